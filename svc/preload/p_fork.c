/*
 * libipkit-preload: listeners shared across fork (svc/preload/README.md, "fork").
 *
 * On Linux a listener inherited by fork() is one socket that the parent and every
 * child may accept from (nginx: the master listens, its workers accept). Here the
 * parent's ipkitd socket belongs to the parent's connection, which the child must
 * never touch, so the child re-creates each inherited listener right after fork
 * (in the atfork handler, while it still has the parent's credentials: nginx's
 * workers change user next, and ipkitd checks the uid): its own connection to ipkitd,
 * a socket bound with IPK_SVC_SQE_F_INHERIT to the same address and port (ipkitd
 * lets a child of the listener's process join the port, svc/d_family.c), listening
 * with the same backlog, under the same descriptor number.
 *
 * A listener takes connections only once its program waits for them (the ACCEPT
 * is armed by accept/poll/select/epoll, not by listen), and ipkitd hands a new
 * connection to a listener that waits first: a master that never accepts gets none.
 */
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "preload.h"

static pthread_mutex_t f_mu = PTHREAD_MUTEX_INITIALIZER;

/* Put a fresh eventfd under number `fd` (the parent's is shared across fork: its
 * levels are the parent's socket's), keeping the number's FD_CLOEXEC. */
static int pl_fork_fresh_efd(int fd)
{
	int cl = pl_r.fcntl(fd, F_GETFD), n = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), rc;
	if (cl < 0 || n < 0) {
		if (n >= 0)
			pl_r.close(n);
		return -1;
	}
	rc = pl_r.dup3(n, fd, (cl & FD_CLOEXEC) ? O_CLOEXEC : 0);
	pl_r.close(n);
	return rc < 0 ? -1 : 0;
}

/* In the child, from the atfork handler: a listener is kept for re-creation (1),
 * anything else is forgotten (0). Only system calls on descriptors: no daemon. */
static int pl_fam_child_keep(struct pl_sock *s);

int pl_fork_child_keep(struct pl_sock *s)
{
	if (s->state == PL_CONNECTED)
		return pl_fam_child_keep(s);
	if (s->type != SOCK_STREAM || s->state != PL_LISTEN || s->closing || s->fd < 0 ||
	    s->lfd < 0)
		return 0;
	if (pl_fork_fresh_efd(s->fd) < 0 || (s->ofd >= 0 && pl_fork_fresh_efd(s->ofd) < 0) ||
	    pl_r.dup3(s->fd, s->lfd, O_CLOEXEC) < 0)
		return 0;
	s->in_lvl = s->out_lvl = s->in_true = 0;
	s->inherit = 1;
	s->acc_armed = 0;
	return 1;
}

static int pl_fork_bind(struct pl_sock *s, unsigned flags)
{
	struct ipk_svc_sqe e;
	memset(&e, 0, sizeof e);
	ipk_svc_prep_bind(&e, &(struct ipk_svc_addr){0});
	e.flags = (uint8_t)flags;
	pl_sa_to_svc(&e.addr, &s->local);
	if (s->domain == AF_INET6 && s->v6only)
		e.flags |= IPK_SVC_SQE_F_V6ONLY;
	return pl_sync_op(s, &e);
}

/* The child's own ipkitd socket on the inherited listener's port. */
static int pl_fork_relisten(struct pl_sock *s)
{
	struct ipk_svc *svc = pl_svc();
	struct ipk_svc_sqe e;
	struct ipk_svc_sock *so;
	int rc;
	if (!svc)
		return -ENETDOWN;
	rc = ipk_svc_socket(svc, IPK_SVC_TCP, 128, 256, &so);
	if (rc < 0)
		return rc == -EPIPE ? -ENETDOWN : rc;
	pthread_mutex_lock(&s->mu);
	s->so = so;
	pthread_mutex_unlock(&s->mu);
	rc = pl_fork_bind(s, IPK_SVC_SQE_F_INHERIT);
	/* not a child of a holder: after exec in place the port is free once ipkitd
	 * has seen the old image's connection go (bounded: 2 s) */
	for (int i = 0; rc == -EADDRINUSE && i < 100; i++) {
		nanosleep(&(struct timespec){0, 20000000}, NULL);
		rc = pl_fork_bind(s, s->reuseport ? IPK_SVC_SQE_F_REUSEPORT : 0);
	}
	if (rc == 0) {
		memset(&e, 0, sizeof e);
		ipk_svc_prep_listen(&e, s->backlog > 0 ? (uint32_t)s->backlog : 128);
		rc = pl_sync_op(s, &e);
	}
	if (rc == 0)
		pl_mirror_listen(s); /* after exec (a fork child kept the parent's) */
	return rc;
}

/* Re-create s if it is an inherited listener still waiting for it. */
static int pl_listen_want_now(struct pl_sock *s)
{
	int rc = 0;
	if (__atomic_load_n(&s->inherit, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&f_mu); /* one re-creation, whichever thread comes first */
		if (s->inherit) {
			rc = pl_fork_relisten(s);
			if (rc < 0) {
				pthread_mutex_lock(&s->mu);
				s->state = PL_FAILED; /* every later call says why */
				s->so_error = -rc;
				pl_levels(s, 0);
				pthread_mutex_unlock(&s->mu);
			}
			__atomic_store_n(&s->inherit, 0, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&f_mu);
	}
	return rc;
}

int pl_listen_want(struct pl_sock *s)
{
	int rc;
	if (s->type == SOCK_STREAM && __atomic_load_n(&s->fresh, __ATOMIC_ACQUIRE))
		return pl_fam_claim(s); /* a child waiting on its inherited connection */
	if (s->type != SOCK_STREAM || s->state != PL_LISTEN)
		return 0;
	rc = pl_listen_want_now(s);
	pthread_mutex_lock(&s->mu);
	if (rc == 0 && s->so && s->state == PL_LISTEN && !s->acc_armed)
		rc = pl_arm_accept(s);
	pl_levels(s, 0);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

/* In the child right after fork, while it still has the parent's credentials
 * (nginx's workers drop to another user next; ipkitd checks the uid it sees at the
 * connection's hello): its own connection and listeners now. A failure leaves the
 * listener failed with the reason (every call on it says so). */
void pl_fam_child_adopt(struct pl_sock *list);

void pl_fork_child_relisten(struct pl_sock *list)
{
	struct pl_sock *s;
	pthread_mutex_init(&f_mu, NULL); /* another thread may have held it at fork */
	for (s = list; s; s = s->lnext)
		if (s->state == PL_LISTEN)
			pl_listen_want_now(s);
	pl_fam_child_adopt(list);
	pl_exec_fork_child(list);
	pl_mirror_fork_child(list);
}

/* ------------------------------------------------------------ connections
 *
 * A connected TCP socket inherited by fork() (accept-then-fork servers, a client
 * that forks a worker): the child asks ipkitd for its own socket on the same
 * connection (ADOPT, in the atfork handler; the parent waits for it in its own
 * handler, bounded, so a close right after fork cannot end the connection first).
 * The rule, as close to Linux as one reader at a time allows: the received bytes
 * go to one process at a time, the one that last read or wrote (or, for a child,
 * first waited on it: poll/select/epoll_ctl); taking over (CLAIM) makes the other
 * process give back what it had received and not read, so no byte is lost or seen
 * twice. Writes from both are each whole SENDs in the order they reach ipkitd
 * (each write takes the connection first, so two processes writing at once take
 * turns at it). The connection lives until the last process closes it; a holder
 * that closes or dies hands it to another (svc/d_family.c). */

static int g_fam_pipe[2] = {-1, -1};
static uint32_t g_fam_app; /* the parent's application at ipkitd: after an exec
                            * one pid may have several until ipkitd has seen the
                            * old image's go, so the child names it */

/* Before fork (g_mu held): a pipe the child closes once its ADOPTs are done. */
void pl_fam_prepare(struct pl_sock *list)
{
	struct pl_sock *s;
	for (s = list; s; s = s->lnext)
		if (s->type == SOCK_STREAM && s->state == PL_CONNECTED && s->so && !s->closing)
			break;
	if (s && pipe2(g_fam_pipe, O_CLOEXEC) < 0)
		g_fam_pipe[0] = g_fam_pipe[1] = -1;
	g_fam_app = s ? ipk_svc_app_id(pl_svc()) : 0;
	for (s = list; s; s = s->lnext) {
		if (s->type == SOCK_STREAM && s->state == PL_CONNECTED && s->so) {
			s->fam = 1;
			s->fam_id = ipk_svc_sock_id(s->so);
		}
	}
}

/* In the parent after fork: wait (at most 2 s) until the child has adopted. */
void pl_fam_parent(void)
{
	struct pollfd p;
	char c;
	if (g_fam_pipe[0] < 0)
		return;
	pl_r.close(g_fam_pipe[1]);
	p.fd = g_fam_pipe[0];
	p.events = POLLIN;
	for (int i = 0; i < 200; i++) { /* EINTR: a signal; the bound holds */
		int n = pl_r.poll(&p, 1, 10);
		if (n > 0 && read(g_fam_pipe[0], &c, 1) <= 0)
			break; /* EOF: the child is done (or gone) */
	}
	pl_r.close(g_fam_pipe[0]);
	g_fam_pipe[0] = g_fam_pipe[1] = -1;
}

/* In the child (atfork, no daemon yet): keep a connected socket for ADOPT. */
static int pl_fam_child_keep(struct pl_sock *s)
{
	if (s->type != SOCK_STREAM || s->state != PL_CONNECTED || !s->fam || s->closing ||
	    s->fd < 0 || s->lfd < 0)
		return 0;
	if (pl_fork_fresh_efd(s->fd) < 0 || (s->ofd >= 0 && pl_fork_fresh_efd(s->ofd) < 0) ||
	    pl_r.dup3(s->fd, s->lfd, O_CLOEXEC) < 0)
		return 0;
	for (int i = 0; i < 2; i++) { /* the parent's region is not ours */
		s->rx[i].b = NULL;
		s->rx[i].posted = 0;
		s->rx[i].len = s->rx[i].pos = 0;
	}
	s->rx_head = 0;
	s->tx_ops = s->tx_bytes = s->txq_head = 0;
	s->txfull = 0; /* the child counts its own (pl_txfull) */
	s->gb_ops = 0;
	s->in_lvl = s->out_lvl = s->in_true = 0;
	s->adopt = 1;
	return 1;
}

static void pl_fam_adopt(struct pl_sock *s)
{
	struct ipk_svc *svc = pl_svc();
	struct ipk_svc_sock *so = NULL;
	int rc = svc ? ipk_svc_adopt_from(svc, g_fam_app, s->fam_id, 128, 256, &so) : -ENETDOWN;
	pthread_mutex_lock(&s->mu);
	s->adopt = 0;
	if (rc < 0) {
		s->state = PL_FAILED; /* as before: every call says EBADF */
		s->so_error = EBADF;
	} else {
		s->so = so;
		s->away = s->fresh = 1;
		pl_post_recv(s); /* they wait while away; they get data if it comes back */
	}
	pl_levels(s, 0);
	pthread_mutex_unlock(&s->mu);
}

/* In the child's atfork handler, after the listeners: ADOPT every connection,
 * then let the parent go on. */
void pl_fam_child_adopt(struct pl_sock *list)
{
	struct pl_sock *s;
	for (s = list; s; s = s->lnext)
		if (s->adopt)
			pl_fam_adopt(s);
	if (g_fam_pipe[0] >= 0) {
		pl_r.close(g_fam_pipe[0]);
		pl_r.close(g_fam_pipe[1]);
	}
	g_fam_pipe[0] = g_fam_pipe[1] = -1;
}

static int pl_fam_claim_op(struct pl_sock *s, uint32_t arg)
{
	struct ipk_svc_sqe e;
	int rc = -EAGAIN;
	memset(&e, 0, sizeof e);
	e.opcode = IPK_SVC_OP_CLAIM;
	e.arg = arg;
	/* -EAGAIN: the holder's SENDs are still going out (bounded: 10 s) */
	for (int i = 0; i < 10000 && rc == -EAGAIN; i++) {
		rc = pl_sync_op(s, &e);
		if (rc == -EAGAIN)
			nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	return rc;
}

int pl_fam_claim(struct pl_sock *s)
{
	int rc;
	if (!__atomic_load_n(&s->away, __ATOMIC_ACQUIRE))
		return 0;
	rc = pl_fam_claim_op(s, 0);
	if (rc == 0) {
		pthread_mutex_lock(&s->mu);
		s->away = s->fresh = 0;
		pthread_mutex_unlock(&s->mu);
	}
	return rc;
}

/* MOVED (pump, under s->mu): another process took the connection; our RECVs
 * have completed (-EXDEV, before this). Give back what was received and not read,
 * in reading order (even nothing: the new holder waits for it), and wait with
 * RECVs posted again while away. */
void pl_fam_moved(struct pl_sock *s)
{
	struct ipk_svc_sqe *e;
	uint32_t n = pl_rx_avail(s), k = 0;
	uint8_t *b, *base = (uint8_t *)ipk_svc_region(pl_svc(), NULL);
	s->away = 1;
	if (!s->so || !(e = ipk_svc_get_sqe(s->so)))
		return; /* not reached: the SQ holds 128, at most 66 are ours */
	b = n ? (uint8_t *)ipk_svc_buf_alloc(pl_svc(), n) : NULL;
	if (n && !b)
		PL_COUNT(rx_starved, 1); /* lost: the buffer area is exhausted */
	for (int j = 0; j < 2 && b; j++) {
		struct pl_rx *r = &s->rx[s->rx_head ^ j];
		memcpy(b + k, r->b + r->pos, r->len - r->pos);
		k += r->len - r->pos;
	}
	for (int j = 0; j < 2; j++)
		s->rx[j].len = s->rx[j].pos = 0;
	s->rx_head = 0;
	memset(e, 0, sizeof *e);
	if (b)
		ipk_svc_prep_send(s->so, e, b, n); /* buf_off, len */
	e->opcode = IPK_SVC_OP_GIVEBACK;
	/* the buffer (region offset, length) rides in user_data: several may be in
	 * flight when two processes take turns quickly */
	ipk_svc_sqe_set_data(e, (uint64_t)PL_OP_GB << 60 | (uint64_t)(b ? n : 0) << 36 |
	                        (uint64_t)(b ? (uint64_t)(b - base) : 0));
	s->gb_ops++;
	ipk_svc_submit(s->so);
	if (!s->closing)
		pl_post_recv(s);
}

void pl_fam_gb_done(struct pl_sock *s, uint64_t ud)
{
	uint32_t n = (uint32_t)(ud >> 36) & 0xffffffu;
	uint8_t *base = (uint8_t *)ipk_svc_region(pl_svc(), NULL);
	if (s->gb_ops)
		s->gb_ops--;
	if (n)
		ipk_svc_buf_free(pl_svc(), base + (ud & 0xfffffffffull), n);
}

/* close() of a socket other processes may hold (no lock held): hand the
 * connection to one of them first (arg 1), so bytes arriving meanwhile reach it;
 * ours are given back through the -EXDEV path, and the close waits for that.
 * Asked even when we think we are away: a SEND queued while away takes the
 * connection back (d_family_want, d_family_tx_idle) with no completion saying
 * so, and bytes that then reached our RECVs would be lost (issue 18). ipkitd
 * knows: an away member's CLAIM 1 is a no-op there. */
void pl_fam_release(struct pl_sock *s)
{
	if (!s->fam || !s->so || s->type != SOCK_STREAM)
		return;
	pl_fam_claim_op(s, 1);
}
