/*
 * ipkitd: a forked child takes its share of a listener it inherited.
 *
 * A listening socket shared across fork() on Linux is one socket: the parent and
 * every child may accept from its one queue (nginx's master opens the port, its
 * workers accept). An ipkitd socket belongs to one application (one process's
 * connection), so a child that inherited a listener (libipkit-preload, after fork)
 * asks for its own socket on the same port with IPK_SVC_SQE_F_INHERIT at bind. The
 * daemon lets it join the port's group when the group holds a socket of the
 * child's parent process (the one it inherited from) and every socket on the port
 * belongs to the same uid: the child could use the parent's socket on Linux, so it
 * may take the parent's connections here. Nothing else may join this way: an
 * unrelated process still gets EADDRINUSE, as on Linux.
 *
 * The parent is found by reading /proc/PID/stat of the child's pid (SO_PEERCRED
 * at hello): ipkitd must see the application's pid namespace (svc/README.md).
 *
 * Connections then go to the listeners that wait for one first (an ACCEPT armed):
 * a shared Linux socket is taken by whoever calls accept, and nginx's master never
 * does; a listener with no ACCEPT armed only gets one when no other has room.
 */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The parent pid of pid from /proc/PID/stat (field 4, after the name in
 * parentheses, which may itself hold ')' and spaces), or -1. */
static pid_t d_family_ppid(pid_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd, ppid = -1;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1)
		return -1;
	return (pid_t)ppid;
}

int d_family_share_ok(const struct d_sock *head, const struct d_sock *s)
{
	const struct d_sock *m = head;
	pid_t pp = d_family_ppid(s->app->pid);
	int parent = 0;
	if (pp <= 0)
		return 0;
	do {
		if (m->app->uid != s->app->uid)
			return 0;
		if (m->app->pid == pp && m->listening)
			parent = 1;
		m = m->port_next;
	} while (m != head);
	return parent;
}

/* The listener of the group to take the next connection: one with an ACCEPT armed
 * and room, the turn moving on past it; NULL: none waits (the caller falls back to
 * any listener with room). */
struct d_sock *d_family_waiting(struct d_daemon *d, uint16_t port_be, unsigned fam)
{
	struct d_sock *h = d->tcp_port[port_be], *m;
	if (!h || h->port_next == h)
		return NULL;
	m = h;
	do {
		if (m->listening && d_acc_armed(m) && d_acc_room(m) &&
		    d_fam_ok(m, fam)) { /* only one serving the SYN's family (IPv4/IPv6) */
			d->tcp_port[port_be] = m->port_next;
			return m;
		}
		m = m->port_next;
	} while (m != h);
	return NULL;
}

/* ------------------------------------------------------------ connections
 *
 * A connected socket shared across fork() is one socket on Linux: it stays open
 * until the last process holding it closes it, and whoever reads takes the bytes.
 * Here each process has its own ipkitd socket on the connection (a forked child
 * asks with ADOPT, naming its parent's socket, the same family check as for a
 * listener); the members form a circle. One member holds the connection (the
 * core's user pointer, the received data); the others are "away": their RECVs
 * wait. A process that reads or writes CLAIMs the connection first (the shim does
 * it when the program calls): the holder's RECVs complete with -EXDEV, its
 * program gives back what it had received and not read (GIVEBACK), and the new
 * holder gets those bytes before anything newer. A member that closes or dies
 * leaves the circle; the connection itself ends only with its last member, and a
 * holder that leaves hands the connection to the next member (so a child's death
 * never resets a connection its parent still holds). Connections to the network
 * and between two applications of this daemon (d_loop.c) alike. */

static struct d_sock *d_fam_holder(struct d_sock *s)
{
	struct d_sock *m = s;
	do {
		if (!m->fam_away)
			return m;
		m = m->fam_next;
	} while (m && m != s);
	return NULL;
}

/* Whether member m's process can still take bytes: its control socket not hung
 * up, its process not gone. ipkitd notices a death a pass later (epoll), and a
 * hand-over in between (another member closing or leaving) must not pick a
 * member that has died or exec'd: the bytes its RECVs took would be lost with
 * its region. One poll(0) per member looked at; hand-overs are rare (fork
 * families only). The descriptors stay open until the application is reclaimed,
 * which every worker's W excludes. */
static int d_fam_alive(const struct d_sock *m)
{
	const struct d_app *a = m->app;
	struct pollfd p[2];
	nfds_t n = 0;
	if (a->ctl_fd >= 0) {
		p[n].fd = a->ctl_fd;
		p[n].events = POLLRDHUP;
		p[n++].revents = 0;
	}
	if (a->pid_fd >= 0) {
		p[n].fd = a->pid_fd;
		p[n].events = POLLIN;
		p[n++].revents = 0;
	}
	return n == 0 || poll(p, n, 0) == 0;
}

/* The member after s to hand the connection to: the first one alive, else the
 * next (every other member is dying: the connection ends with them). */
static struct d_sock *d_fam_next_live(struct d_sock *s)
{
	struct d_sock *m;
	for (m = s->fam_next; m && m != s; m = m->fam_next)
		if (d_fam_alive(m))
			return m;
	return s->fam_next;
}

/* The first member alive going round from n (n itself first), else n. */
static struct d_sock *d_fam_live_from(struct d_sock *n)
{
	struct d_sock *m = n;
	do {
		if (d_fam_alive(m))
			return m;
		m = m->fam_next;
	} while (m && m != n);
	return n;
}

/* Move the connection (and what it received) from h to n, both of one family and
 * one worker. */
static void d_fam_move(struct d_sock *h, struct d_sock *n)
{
	n->state = h->state;
	n->conn = h->conn;
	n->err = h->err;
	n->rx_eof = h->rx_eof;
	n->lport_be = h->lport_be;
	n->rxh = h->rxh;
	n->rxt = h->rxt;
	n->rx_unread = h->rx_unread;
	n->rx_owed = h->rx_owed;
	n->rx_total = h->rx_total;
	n->tx_held = h->tx_held;
	n->gb = h->gb;
	n->gb_len = h->gb_len;
	n->gb_pos = h->gb_pos;
	n->gb_wait = 0;
	n->peer = h->peer; /* a connection between two applications (d_loop.c) */
	if (n->peer)
		n->peer->peer = n;
	n->rxp = h->rxp;
	n->peer_port_be = h->peer_port_be;
	h->peer = NULL;
	memset(&h->rxp, 0, sizeof h->rxp);
	if (n->conn)
		ipk_tcp_set_user(n->conn, n);
	h->conn = NULL;
	h->rxh = h->rxt = NULL;
	h->rx_unread = h->rx_owed = h->tx_held = 0;
	h->gb = NULL;
	h->gb_len = h->gb_pos = 0;
	h->gb_wait = 0;
	h->fam_away = 1;
	n->fam_away = 0;
}

static void d_fam_link(struct d_sock *p, struct d_sock *n)
{
	if (!p->fam_next)
		p->fam_next = p;
	n->fam_next = p->fam_next;
	p->fam_next = n;
}

#define D_ALL_HELD 0x100u /* every worker's W is held (the world stopped) */

/* The application holding socket id that the child may share it with: same uid,
 * set up, not dying, the owner table has the id's index live, and either
 * - app_id 0: one of the child's parent process (a parent with several sessions:
 *   the first such), or
 * - app_id: that application, if it is the parent process's or another of the
 *   child's own process (a connection kept across exec: the old image's socket
 *   is adopted by a bridge application of the same process whose control socket
 *   survives exec, and the new image adopts it from there; p_exec.c). A process
 *   could use its own sockets anyway; the pid was read by SO_PEERCRED at hello,
 *   and a live application's pid cannot be reused.
 * The application list changes only while every W is held, so the caller's own W
 * is enough to read it. */
static struct d_app *d_fam_parent_app(struct d_app *child, uint32_t app_id, uint32_t id)
{
	struct d_app *a;
	pid_t pp = d_family_ppid(child->pid);
	for (a = child->d->apps; a; a = a->next) {
		if (a == child || !a->ready || a->dying || a->uid != child->uid ||
		    (app_id && a->id != app_id))
			continue;
		if (((pp > 0 && a->pid == pp) || (app_id && a->pid == child->pid)) &&
		    d_sock_own(a, id) != 0xffu)
			return a;
	}
	return NULL;
}

/* The socket id of the child's parent application a, if the child may share it.
 * held: the worker whose W the caller holds besides the control ring's (or
 * D_ALL_HELD); a socket of any other worker is not read (d_sock_find_wk). */
static struct d_sock *d_fam_parent_sock(struct d_app *a, uint32_t id, unsigned ctl_wk,
                                        unsigned held)
{
	struct d_sock *s;
	unsigned owner;
	if (!a)
		return NULL;
	if (held == D_ALL_HELD)
		s = d_sock_find(a, id);
	else if (!(s = d_sock_find_wk(a, id, held, &owner)))
		s = d_sock_find_wk(a, id, ctl_wk, &owner);
	if (s && s->type == IPK_SVC_TCP && !s->move &&
	    (s->state == D_CONNECTED || s->state == D_CLOSED))
		return s;
	return NULL;
}

static void d_family_adopt_locked(struct d_sock *ctl, const struct ipk_svc_sqe *e,
                                  struct d_app *pa, unsigned held);

/* ADOPT reads the parent's socket, which may be another worker's (and another
 * application's), and links the child's new socket into its circle on that
 * worker. So the control ring's worker (0, whose W the pass holds) takes the W
 * of that one worker as well, found in the parent's owner table (d_sock_own:
 * release/acquire, written by the owner), and checks after taking it that the
 * table still names it (a socket moves only under its owner's W, so it cannot
 * move away while the W is held, nor be freed). The other workers go on. Lock
 * order holds: W[0] first, then a higher W. When the table keeps moving (a
 * socket handed over while we look, bounded to a few tries) or names a worker
 * below ours, every other worker is stopped, as before (d_world_stop). Counted
 * per worker: adopt_pair (one more W), adopt_world (all). */
void d_family_adopt(struct d_sock *ctl, const struct ipk_svc_sqe *e)
{
	struct d_daemon *d = ctl->app->d;
	struct d_app *pa = e->buf_off > 0xffffffffu
	                       ? NULL
	                       : d_fam_parent_app(ctl->app, (uint32_t)e->buf_off, (uint32_t)e->arg);
	struct d_wk *w = &d->wk[ctl->wk];
	unsigned o = pa ? d_sock_own(pa, (uint32_t)e->arg) : 0xffu, again, tries;
	for (tries = 0; d->mt && !d->big && tries < 4; tries++) {
		if (o == 0xffu || o == ctl->wk) { /* none, or ours: no other W needed */
			d_family_adopt_locked(ctl, e, pa, ctl->wk);
			return;
		}
		if (o < ctl->wk || o >= d->nw)
			break;
		d_wlock(&d->wk[o]);
		again = d_sock_own(pa, (uint32_t)e->arg);
		if (again == o) {
			w->adopt_pair++;
			d_family_adopt_locked(ctl, e, pa, o);
			d_wunlock(&d->wk[o]);
			return;
		}
		d_wunlock(&d->wk[o]);
		o = again;
	}
	w->adopt_world += d->mt && !d->big;
	d_world_stop(d, ctl->wk);
	d_family_adopt_locked(ctl, e, pa, D_ALL_HELD);
	d_world_start(d, ctl->wk);
}

static void d_family_adopt_locked(struct d_sock *ctl, const struct ipk_svc_sqe *e,
                                  struct d_app *pa, unsigned held)
{
	struct d_sock *p = d_fam_parent_sock(pa, (uint32_t)e->arg, ctl->wk, held);
	struct d_sock *s = NULL;
	struct ipk_svc_cqe c;
	int rc = p ? 0 : -EBADF;
	memset(&c, 0, sizeof c);
	c.user_data = e->user_data;
	if (rc == 0) {
		s = d_sock_alloc(ctl->app, IPK_SVC_TCP);
		rc = s ? 0 : -ENOMEM;
	}
	if (s) {
		s->wk = p->wk; /* the connection's worker serves every member */
		__atomic_add_fetch(&ctl->app->d->wk[s->wk].socks, 1, __ATOMIC_RELAXED);
		d_sock_level(s, p->prio);
		rc = d_sock_rings(s, e->len, e->arg2);
		if (rc == 0)
			rc = d_sock_attach(s);
	}
	if (rc < 0) {
		if (s)
			d_sock_destroy(ctl->app->d, s, 0);
		c.res = rc;
		d_post(ctl, &c);
		return;
	}
	s->state = D_CONNECTED;
	s->fam_away = 1;
	s->lport_be = p->lport_be;
	d_fam_link(p, s);
	c.sock = s->id;
	c.ring_off = s->ring_off;
	d_post(ctl, &c);
}

/* The connection goes from holder h to member n; h's RECVs complete with -EXDEV,
 * then one MOVED completion asks h's program for what it had received and not
 * read (its RECVs may all have completed with data), and n delivers nothing
 * before that GIVEBACK. */
static void d_fam_hand(struct d_daemon *d, struct d_sock *h, struct d_sock *n)
{
	struct ipk_svc_cqe c;
	struct d_op *op;
	d_fam_move(h, n);
	while ((op = d_opq_front(&h->rxq)) != NULL) {
		d_op_done(h, op->e.user_data, -EXDEV);
		d_opq_pop(&h->rxq);
	}
	memset(&c, 0, sizeof c);
	c.res = -EXDEV;
	c.flags = IPK_SVC_CQE_F_MOVED;
	d_post(h, &c);
	n->gb_wait = 1;
	n->fam_want = 0;
	d_rx_deliver(d, n);
	d_tx_pump(d, n); /* its writes waiting for the connection */
}

/* A SEND (or SHUTDOWN) queued on an away member takes the connection: now if
 * the holder has nothing in flight, else when its last SEND is out (the writes
 * of two processes follow each other whole, in the order they came). */
void d_family_want(struct d_daemon *d, struct d_sock *s)
{
	struct d_sock *h = d_fam_holder(s);
	if (h && !h->txq.n && !h->zc_h) {
		d_fam_hand(d, h, s);
		return;
	}
	s->fam_want = 1;
}

/* The holder h has no SEND in flight any more: a member waiting to write goes. */
void d_family_tx_idle(struct d_daemon *d, struct d_sock *h)
{
	struct d_sock *m;
	if (h->fam_away || h->txq.n || h->zc_h)
		return;
	for (m = h->fam_next; m && m != h; m = m->fam_next) {
		if (m->fam_want) {
			d_fam_hand(d, h, m);
			return;
		}
	}
}

/* CLAIM: arg 0 take the connection; arg 1 (a holder closing) hand it to the
 * next member, if there is one. */
static int d_fam_claim(struct d_daemon *d, struct d_sock *s, uint32_t arg)
{
	struct d_sock *h;
	if (arg == 1) {
		if (s->fam_away || !s->fam_next || s->fam_next == s)
			return 0;
		if (s->txq.n || s->zc_h)
			return -EAGAIN; /* its bytes go out first */
		d_fam_hand(d, s, d_fam_next_live(s));
		return 0;
	}
	if (!s->fam_away)
		return 0;
	h = d_fam_holder(s);
	if (!h)
		return -ENOTCONN;
	if (h->txq.n || h->zc_h)
		return -EAGAIN; /* its bytes go first: the shim asks again */
	d_fam_hand(d, h, s);
	return 0;
}

static int d_fam_giveback(struct d_daemon *d, struct d_sock *s, const struct ipk_svc_sqe *e)
{
	struct d_sock *t = s->fam_away ? d_fam_holder(s) : s;
	uint32_t rest;
	uint8_t *nb;
	if (e->len && !d_buf_ok(s->app, e))
		return -EFAULT;
	if (!t)
		return -ENOTCONN;
	rest = t->gb_len - t->gb_pos;
	/* the daemon's memory: a program gives back at most what its two receive
	 * buffers held; one that keeps giving more is refused (counted) */
	if (e->len > D_GB_MAX || rest > D_GB_MAX - e->len) {
		D_STAT(s->app, bad_sqe, 1);
		t->gb_wait = 0; /* nothing more comes: deliver what there is */
		d_rx_deliver(d, t);
		return -ENOBUFS;
	}
	if (e->len) { /* the given bytes came before any still held here */
		nb = (uint8_t *)malloc((size_t)e->len + rest);
		if (!nb)
			return -ENOMEM;
		memcpy(nb, s->app->base + e->buf_off, e->len);
		if (rest)
			memcpy(nb + e->len, t->gb + t->gb_pos, rest);
		free(t->gb);
		t->gb = nb;
		t->gb_len = e->len + rest;
		t->gb_pos = 0;
	}
	t->gb_wait = 0;
	d_rx_deliver(d, t);
	return 0;
}

void d_family_op(struct d_daemon *d, struct d_sock *s, const struct ipk_svc_sqe *e)
{
	int rc;
	if (s->type != IPK_SVC_TCP) {
		D_STAT(s->app, bad_sqe, 1);
		d_post_res(s, e->user_data, -EOPNOTSUPP);
		return;
	}
	rc = e->opcode == IPK_SVC_OP_CLAIM ? d_fam_claim(d, s, e->arg) : d_fam_giveback(d, s, e);
	d_post_res(s, e->user_data, rc);
}

/* Bytes given back, into one RECV (they come before the core's held payload). */
uint32_t d_family_rx_copy(struct d_sock *s, const struct ipk_svc_sqe *e)
{
	uint32_t n = s->gb_len - s->gb_pos;
	if (n > e->len)
		n = e->len;
	memcpy(s->app->base + e->buf_off, s->gb + s->gb_pos, n);
	D_STAT(s->app, rx_copied, n);
	s->gb_pos += n;
	if (s->gb_pos == s->gb_len) {
		free(s->gb);
		s->gb = NULL;
		s->gb_len = s->gb_pos = 0;
	}
	return n;
}

/* s is being destroyed (close, or its process died): it leaves the circle; a
 * holder hands the connection to the next member, which keeps it open. */
void d_family_leave(struct d_daemon *d, struct d_sock *s)
{
	struct d_sock *p, *n = s->fam_next;
	if (n && n != s) {
		for (p = n; p->fam_next != s; p = p->fam_next)
			;
		p->fam_next = n;
		if (n == p && n->fam_next == n)
			n->fam_next = NULL;
		if (!s->fam_away) {
			n = d_fam_live_from(n);
			d_fam_move(s, n);
			n->fam_want = 0;
			d_rx_deliver(d, n);
			d_tx_pump(d, n);
		} else if ((p = d_fam_holder(n)) != NULL && p->gb_wait) {
			p->gb_wait = 0; /* the give-back it waited for will not come */
			d_rx_deliver(d, p);
		}
	}
	s->fam_next = NULL;
	free(s->gb);
	s->gb = NULL;
	s->gb_len = s->gb_pos = 0;
}
