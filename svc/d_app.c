/*
 * ipkitd: applications. The control socket, SO_PEERCRED checks, the region (a sealed
 * memfd), the ring allocator, death detection and reclaim, futex wake-ups.
 */
#include "daemon.h"

#include <stddef.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

uint64_t d_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ control socket */

/* A path left by a dead daemon is removed; one a live daemon answers on is not. */
static int d_path_free(const struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), rc;
	if (fd < 0)
		return -errno;
	rc = connect(fd, (const struct sockaddr *)sa, sizeof *sa);
	close(fd);
	if (rc == 0)
		return -EADDRINUSE;
	if (errno == ECONNREFUSED)
		unlink(sa->sun_path);
	return 0;
}

int d_listen(struct d_daemon *d)
{
	struct sockaddr_un sa;
	const char *path = d->cfg.sock_path;
	int rc;
	if (strlen(path) >= sizeof sa.sun_path)
		return -ENAMETOOLONG;
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, strlen(path));
	rc = d_path_free(&sa);
	if (rc < 0)
		return rc;
	d->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (d->lfd < 0)
		return -errno;
	if (bind(d->lfd, (struct sockaddr *)&sa, sizeof sa) < 0)
		return -errno;
	d->bound = 1;
	if (listen(d->lfd, 512) < 0)
		return -errno;
	/* access is decided by SO_PEERCRED, not by file modes */
	chmod(path, 0666);
	return 0;
}

static int d_id_in(const uid_t *v, unsigned n, uid_t id)
{
	unsigned i;
	for (i = 0; i < n; i++)
		if (v[i] == id)
			return 1;
	return 0;
}

static int d_allowed(const struct d_cfg *c, const struct ucred *cr)
{
	unsigned i;
	if (d_id_in(c->allow_uid, c->n_allow_uid, cr->uid))
		return 1;
	for (i = 0; i < c->n_allow_gid; i++)
		if (c->allow_gid[i] == cr->gid)
			return 1;
	return 0;
}

/* The highest level (smallest number) uid may ask for: --prio-uid, else the
 * default level (an application cannot raise itself above it). */
static unsigned d_prio_max(const struct d_cfg *c, uid_t uid)
{
	unsigned i;
	for (i = 0; i < c->n_prio_uid; i++)
		if (c->prio_uid[i] == uid)
			return c->prio_uid_level[i];
	return c->prio_default;
}

static void d_send_welcome(int fd, int status, uint64_t size, const int *fds, const char *msg)
{
	struct ipk_svc_welcome w;
	char cbuf[CMSG_SPACE(3 * sizeof(int))];
	struct iovec iov;
	struct msghdr mh;
	memset(&w, 0, sizeof w);
	w.magic = IPK_SVC_MAGIC;
	w.version = IPK_SVC_VERSION;
	w.status = status;
	w.region_size = size;
	if (msg)
		snprintf(w.msg, sizeof w.msg, "%s", msg);
	iov.iov_base = &w;
	iov.iov_len = sizeof w;
	memset(&mh, 0, sizeof mh);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (fds) {
		struct cmsghdr *c;
		memset(cbuf, 0, sizeof cbuf);
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof cbuf;
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(3 * sizeof(int));
		memcpy(CMSG_DATA(c), fds, 3 * sizeof(int));
	}
	/* non-blocking socket, one small message: a full buffer means a peer that
	 * does not read; it gets nothing and is dropped at its hang-up */
	if (sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		return;
}

void d_ep_add_to(int ep, int fd, struct d_ev *ev, uint32_t events)
{
	struct epoll_event e;
	memset(&e, 0, sizeof e);
	e.events = events;
	e.data.ptr = ev;
	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
}

static void d_ep_add(struct d_daemon *d, int fd, struct d_ev *ev, uint32_t events)
{
	d_ep_add_to(d->ep, fd, ev, events);
}

static void d_app_link(struct d_daemon *d, struct d_app *a)
{
	a->next = d->apps;
	if (d->apps)
		d->apps->prev = a;
	d->apps = a;
	d->napps++;
}

/* A new connection: check who it is, then wait for its hello. */
static void d_accept_one(struct d_daemon *d, int fd)
{
	struct ucred cr;
	socklen_t cl = sizeof cr;
	struct d_app *a;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cl != sizeof cr) {
		close(fd);
		return;
	}
	a = (struct d_app *)calloc(1, sizeof *a);
	if (a && !(a->pw = (struct d_appw *)calloc(d->nw, sizeof *a->pw))) {
		free(a);
		a = NULL;
	}
	if (!a) {
		close(fd);
		return;
	}
	a->d = d;
	a->amu_ok = pthread_mutex_init(&a->amu, NULL) == 0;
	a->id = ++d->next_app_id;
	a->pid = cr.pid;
	a->uid = cr.uid;
	a->low_ports = d_id_in(d->cfg.low_uid, d->cfg.n_low_uid, cr.uid);
	a->prio_max = d_prio_max(&d->cfg, cr.uid);
	a->ctl_fd = fd;
	a->bell_fd = -1;
	a->pid_fd = -1;
	a->ev_fd = -1;
	if (!d_allowed(&d->cfg, &cr)) {
		/* answered now, closed once its hello is read or it hangs up: closing a
		 * UNIX socket with its hello unread would reset the connection and
		 * discard our answer before the client reads it */
		fprintf(stderr, "ipkitd: refused pid %d uid %u gid %u: not in the allow-list\n",
		        (int)cr.pid, (unsigned)cr.uid, (unsigned)cr.gid);
		d_send_welcome(fd, -EACCES, 0, NULL, "uid/gid not allowed by ipkitd");
		a->refused = 1;
		a->ev_ctl.kind = D_EV_CTL;
		a->ev_ctl.app = a;
		d_ep_add(d, fd, &a->ev_ctl, EPOLLIN | EPOLLRDHUP);
		d_app_link(d, a);
		return;
	}
	/* a pidfd notices an exit even if the process passed its socket on */
	a->pid_fd = (int)syscall(SYS_pidfd_open, cr.pid, 0);
	a->ev_ctl.kind = D_EV_CTL;
	a->ev_ctl.app = a;
	a->ev_bell.kind = D_EV_BELL;
	a->ev_bell.app = a;
	a->ev_pid.kind = D_EV_PID;
	a->ev_pid.app = a;
	d_ep_add(d, fd, &a->ev_ctl, EPOLLIN | EPOLLRDHUP);
	if (a->pid_fd >= 0)
		d_ep_add(d, a->pid_fd, &a->ev_pid, EPOLLIN);
	d_app_link(d, a);
}

void d_accept_apps(struct d_daemon *d)
{
	int i;
	for (i = 0; i < 256; i++) { /* bounded: other work goes on */
		int fd = accept4(d->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			return;
		d_accept_one(d, fd);
	}
}

/* ------------------------------------------------------------ region */

static uint64_t d_clamp(uint64_t v, uint64_t lo, uint64_t hi)
{
	v = v < lo ? lo : v > hi ? hi : v;
	return (v + 4095) & ~(uint64_t)4095;
}

/* Create, size, seal and map the memfd. Returns the fd or -errno. */
static int d_region_create(struct d_app *a, uint64_t size)
{
	int fd = (int)syscall(SYS_memfd_create, "ipkitd-app", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *p;
	if (fd < 0)
		return -errno;
	/* sealed against shrinking: the daemon's mapping can never lose pages under it
	 * (no SIGBUS); against growing and against removing the seals too */
	if (ftruncate(fd, (off_t)size) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		int e = -errno;
		close(fd);
		return e;
	}
	a->base = (uint8_t *)p;
	a->size = size;
	a->hdr = (struct ipk_svc_region *)p;
	return fd;
}

static void d_region_header(struct d_app *a)
{
	struct ipk_svc_region *h = a->hdr;
	h->magic = IPK_SVC_MAGIC;
	h->version = IPK_SVC_VERSION;
	h->hdr_size = sizeof *h;
	h->region_size = a->size;
	h->ring_area_off = a->ring_area_off;
	h->ring_area_size = a->ring_area_size;
	h->buf_area_off = a->buf_area_off;
	h->buf_area_size = a->buf_area_size;
	h->ctl_ring_off = (uint32_t)a->ctl.ring_off;
	h->app_id = a->id;
	h->ready_off = 4096;
	h->ready_words = a->ready_words;
	h->ready_sum_words = a->ready_sum_words;
	h->features = a->d->cfg.ip6 ? IPK_SVC_FEAT_IP6 : 0;
}

/* The hello arrived: build the region and answer. 0, or -errno (answered). */
static int d_app_hello(struct d_daemon *d, struct d_app *a, const struct ipk_svc_hello *hi)
{
	uint64_t ring, buf;
	int memfd, fds[3], rc;
	if (hi->magic != IPK_SVC_MAGIC || hi->version != IPK_SVC_VERSION) {
		char m[96];
		snprintf(m, sizeof m, "ipkitd speaks protocol version %u, client %u",
		         IPK_SVC_VERSION, (unsigned)hi->version);
		d_send_welcome(a->ctl_fd, -EPROTO, 0, NULL, m);
		return -EPROTO;
	}
	ring = d_clamp(hi->ring_bytes, 64u << 10, d->cfg.max_ring);
	buf = d_clamp(hi->buf_bytes, 64u << 10, d->cfg.max_buf);
	/* the ready bitmap after the header page: a bit per socket index the table
	 * can reach (max_socks + the control ring), a summary bit per bitmap word */
	a->ready_words = (d->cfg.max_socks + 1 + 63) / 64;
	a->ready_sum_words = (a->ready_words + 63) / 64;
	if (d_ho_alloc(a) < 0) {
		d_send_welcome(a->ctl_fd, -ENOMEM, 0, NULL, "out of memory");
		return -ENOMEM;
	}
	a->ring_area_off = 4096 + (((uint64_t)a->ready_words + a->ready_sum_words) * 8 + 4095) /
	                          4096 * 4096;
	a->ring_area_size = ring;
	a->buf_area_off = a->ring_area_off + ring;
	a->buf_area_size = buf;
	a->ra.bump = a->ring_area_off;
	a->ra.end = a->ring_area_off + ring;
	memfd = d_region_create(a, a->buf_area_off + buf);
	if (memfd < 0) {
		d_send_welcome(a->ctl_fd, memfd, 0, NULL, "cannot create the region");
		return memfd;
	}
	a->ready_sum = (uint64_t *)(a->base + 4096);
	a->ready_bm = a->ready_sum + a->ready_sum_words;
	a->ctl.app = a;
	rc = d_sock_rings(&a->ctl, hi->ctl_entries ? hi->ctl_entries : 64,
	                  hi->ctl_entries ? hi->ctl_entries : 64);
	if (rc < 0) {
		close(memfd);
		d_send_welcome(a->ctl_fd, rc, 0, NULL, "bad control ring size");
		return rc;
	}
	d_region_header(a);
	a->bell_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (a->bell_fd < 0) {
		close(memfd);
		d_send_welcome(a->ctl_fd, -errno, 0, NULL, "no eventfd");
		return -EMFILE;
	}
	/* edge-triggered: every write to an eventfd wakes its waiters and so queues a
	 * new edge, so the doorbell needs no read(2) per wake-up (d_app_event) */
	/* with several workers the doorbell wakes worker 0, whose epoll batch may
	 * outlive the app (the control thread reclaims it meanwhile): its tag is
	 * the daemon's, never the app's (the pass after it takes the bitmap) */
	d_ep_add_to(d_bell_ep(d), a->bell_fd, d->nw > 1 ? &d->ev_bell : &a->ev_bell,
	            EPOLLIN | EPOLLET);
	if (d_evfd_make(a) < 0) {
		close(memfd);
		d_send_welcome(a->ctl_fd, -EMFILE, 0, NULL, "no eventfd");
		return -EMFILE;
	}
	fds[0] = memfd;
	fds[1] = a->bell_fd;
	fds[2] = a->ev_fd;
	d_send_welcome(a->ctl_fd, 0, a->size, fds, NULL);
	close(memfd); /* the mapping stays */
	a->ready = 1;
	if (d->cfg.verbose)
		fprintf(stderr, "ipkitd: app %u pid %d connected (%llu KiB region)\n", a->id,
		        (int)a->pid, (unsigned long long)(a->size >> 10));
	return 0;
}

static void d_app_doom(struct d_app *a, const char *why);

static void d_ctl_readable(struct d_daemon *d, struct d_app *a)
{
	struct ipk_svc_hello hi;
	ssize_t r = recv(a->ctl_fd, &hi, sizeof hi, MSG_DONTWAIT);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r == 0 || r < 0) {
		d_app_doom(a, "hung up");
		return;
	}
	if (a->refused) {
		d_app_doom(a, "refused");
		return;
	}
	if ((size_t)r == offsetof(struct ipk_svc_hello, flags)) {
		hi.flags = 0; /* an older client's shorter hello */
		r = sizeof hi;
	}
	if (a->ready || (size_t)r != sizeof hi) {
		/* nothing else is ever sent on the socket: a protocol error ends it */
		d_app_doom(a, "sent garbage on the control socket");
		return;
	}
	a->exit_fin = !!(hi.flags & IPK_SVC_OPEN_EXIT_FIN);
	if (d_app_hello(d, a, &hi) < 0)
		d_app_doom(a, "refused at set-up");
}

/* Death is noticed inside an epoll batch that may hold more events of the same
 * app: mark it, reclaim after the batch (d_reap). */
static void d_app_doom(struct d_app *a, const char *why)
{
	if (!a->dying) {
		a->dying = why;
		/* when epoll told us, before the lock (--workers N): the reclaim's
		 * logged time includes any wait for it */
		a->gone_ns = a->d->ev_ns ? a->d->ev_ns : d_now();
	}
}

void d_reap(struct d_daemon *d)
{
	struct d_app *a = d->apps, *next;
	for (; a; a = next) {
		next = a->next;
		if (a->dying)
			d_app_reclaim(d, a, a->dying);
	}
}

void d_app_event(struct d_daemon *d, struct d_ev *ev, uint32_t events)
{
	struct d_app *a = ev->app;
	uint64_t v;
	switch (ev->kind) {
	case D_EV_CTL:
		if (events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR)) {
			d_app_doom(a, "hung up");
			return;
		}
		d_ctl_readable(d, a);
		return;
	case D_EV_PID:
		d_app_doom(a, "exited");
		return;
	case D_EV_BELL:
		/* The counter is drained only every 4096th ring (one system call fewer
		 * per sleeping round trip); it would saturate after 2^64 rings of 1. An
		 * application that saturates its own with a large write only loses its
		 * own wake-ups (the loop still looks at least every second). */
		if ((++a->bells & 4095u) == 0 && read(a->bell_fd, &v, sizeof v) < 0 &&
		    errno != EAGAIN)
			return;
		a->pw[0].rescan = 1; /* worker 0 takes the bitmap and kicks the owners */
		return;
	default:
		return;
	}
}

/* ------------------------------------------------------------ reclaim */

static void d_app_unlink(struct d_daemon *d, struct d_app *a)
{
	if (a->prev)
		a->prev->next = a->next;
	else
		d->apps = a->next;
	if (a->next)
		a->next->prev = a->prev;
	d->napps--;
}

/* Every socket reset (or closed gracefully with --graceful-close), ports freed,
 * region unmapped, fds closed. Called on death, refusal and shutdown. */
void d_app_reclaim(struct d_daemon *d, struct d_app *a, const char *why)
{
	uint64_t t0 = a->gone_ns ? a->gone_ns : d_now();
	uint32_t i, n = a->nlive;
	int k;
	d->reclaiming = 1; /* every worker's sockets are ours here (under the lock) */
	for (i = 1; i < a->nsocks; i++) {
		struct d_sock *s = *d_slot(a, i);
		if (s)
			d_sock_destroy(d, s,
			               d->cfg.graceful ||
			                   (a->exit_fin && d_close_graceful(s, IPK_SVC_SQE_F_RST_UNREAD)));
	}
	d_xfer_reclaim(d, a);
	d->reclaiming = 0;
	if (a->ctl.txq.v)
		d_sock_destroy(d, &a->ctl, 0);
	if (a->ctl_fd >= 0)
		close(a->ctl_fd); /* closing an fd removes it from the epoll set */
	if (a->bell_fd >= 0)
		close(a->bell_fd);
	if (a->pid_fd >= 0)
		close(a->pid_fd);
	d_app_unlink(d, a);
	d->reclaims++;
	if (a->ready)
		fprintf(stderr, "ipkitd: app %u pid %d %s: %u sockets %s, ports freed, region "
		        "%s %llu us after its death was seen\n", a->id, (int)a->pid, why, n,
		        d->cfg.graceful ? "closed" : "reset",
		        a->zc_out ? "kept for zero-copy sends in flight" : "unmapped",
		        (unsigned long long)((d_now() - t0) / 1000));
	(void)k;
	a->zc_dead = 1;
	if (a->zc_out == 0) {
		d_app_final(d, a);
		return;
	}
	d_plock(d); /* the list: a worker's last release takes an app off it */
	a->zombie = 1; /* kept on the zombie list until its last release */
	a->prev = NULL;
	a->next = d->zombies;
	if (a->next)
		a->next->prev = a;
	d->zombies = a;
	d_punlock(d);
}

/* The region is unmapped only once no descriptor of the stack points into it: a
 * reset frees the queues at once (so this runs from d_app_reclaim), a graceful
 * close or a backend freeing late leaves it to the last release (d_zc.c). */
void d_app_final(struct d_daemon *d, struct d_app *a)
{
	int k;
	if (a->zc_dead && a->zc_out) /* shutdown: the stack is gone, nothing points in */
		d_zc_drop_all(a);
	if (a->zombie) { /* off the zombie list */
		d_plock(d);
		if (a->prev)
			a->prev->next = a->next;
		else
			d->zombies = a->next;
		if (a->next)
			a->next->prev = a->prev;
		d_punlock(d);
	}
	if (a->amu_ok)
		pthread_mutex_destroy(&a->amu);
	if (a->base)
		munmap(a->base, a->size);
	d_evfd_close(a); /* here, not at reclaim: no pass can still write it */
	for (k = 0; k < D_RING_CLASSES; k++)
		free(a->ra.free[k]);
	free(a->pw);
	free(a->own);
	free(a->ho_mem);
	for (k = 0; a->sdir && k < (int)a->ndir; k++)
		free(a->sdir[k]);
	free(a->sdir);
	free(a->free_idx);
	free(a);
}

/* ------------------------------------------------------------ wake-ups */

/* Threads asleep on one socket (ipk_svc_wait_cqe): woken only by their own
 * socket's completions. `waiting` is the app's (untrusted): a wrong value costs
 * one FUTEX_WAKE per socket and pass that posted, no more. */
static void d_wake_socks(struct d_app *a, struct d_appw *p)
{
	struct d_sock *s = p->wake_h;
	p->wake_h = NULL;
	/* seq_cst: forbids reading `waiting` before our cq_tail stores are visible;
	 * the app fences between raising it and re-checking its CQ */
	IPK_SVC_FENCE();
	for (; s; s = s->wake_next) {
		s->wake_on = 0;
		if (s->ring && IPK_SVC_LOAD_RLX(&s->ring->cq_head.waiting) != 0) {
			D_STAT(a, futex_wakes, 1);
			syscall(SYS_futex, &s->ring->cq_tail.v, FUTEX_WAKE, 0x7fffffff, NULL, NULL,
			        0);
		}
	}
}

/* One socket posted to this turn, woken now (a bound CONNECT hands it to
 * another worker, whose wake list it was not on): as d_wake_socks for s. */
void d_wake_one(struct d_sock *s)
{
	if (!s->wake_on)
		return;
	d_wake_forget(s);
	IPK_SVC_FENCE(); /* seq_cst: as in d_wake_socks */
	if (s->ring && IPK_SVC_LOAD_RLX(&s->ring->cq_head.waiting) != 0) {
		D_STAT(s->app, futex_wakes, 1);
		syscall(SYS_futex, &s->ring->cq_tail.v, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
	}
}

/* The threads of application a waiting on what worker p's pass posted so far. */
static void d_wake_app(struct d_app *a, struct d_appw *p)
{
	int loud = p->loud;
	p->posted = 0;
	p->loud = 0;
	d_wake_socks(a, p);
	/* the futex word counts passes that posted (no system call): a waiter
	 * that read it before scanning its CQs sees it move (ipk_svc_wait_from) */
	__atomic_add_fetch(&a->hdr->app_futex.v, 1, __ATOMIC_RELEASE);
	/* seq_cst: forbids reading app_waiting before our cq_tail and futex
	 * stores are visible; the app fences between raising app_waiting and
	 * re-checking, so either it sees them or we see it waiting */
	IPK_SVC_FENCE();
	d_evfd_wake(a, loud);
	if (IPK_SVC_LOAD_RLX(&a->hdr->app_waiting.v) == 0)
		return;
	D_STAT(a, futex_wakes, 1);
	syscall(SYS_futex, &a->hdr->app_futex.v, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
}

/* After worker wk's pass: the threads waiting on what it posted. */
void d_wake_apps(struct d_daemon *d, unsigned wk)
{
	struct d_app *a;
	for (a = d->apps; a; a = a->next)
		if (a->pw[wk].posted)
			d_wake_app(a, &a->pw[wk]);
}

/* A completion of a level-0 socket while a lower level has sockets open: its
 * application is woken now, in the middle of the pass, not after it. The rest of
 * the pass may be a lower level's work (the acknowledgements of a flood answered
 * with more of it, written to the device after the receive batch), which the
 * level-0 waiter would otherwise wait out. One wake-up per such completion at
 * most, and none while level 0 is alone (the pass's end comes soon enough). */
void d_wake_urgent(struct d_sock *s)
{
	struct d_daemon *d = s->app->d;
	unsigned l;
	if (!d->cfg.urgent_wake)
		return;
	for (l = 1; l < d->cfg.prio_levels && l < D_PRIO_MAX; l++)
		if (__atomic_load_n(&d->lvl_socks[l], __ATOMIC_RELAXED)) {
			d->wk[s->wk].urgent_wakes++;
			__atomic_add_fetch(&s->app->hdr->urgent_wakes, 1, __ATOMIC_RELAXED);
			d_wake_app(s->app, d_spw(s));
			return;
		}
}

/* ------------------------------------------------------------ ring allocator */

/* Power-of-two classes from D_RING_MIN; a free stack per class and a bump pointer:
 * O(1) (amortised for the stack's growth). Private to the daemon. */
static int d_ring_get_locked(struct d_app *a, uint64_t bytes, uint64_t *off, unsigned *cls);

/* Under the application's lock: rings are placed and freed by whichever worker
 * makes or ends a socket (SOCKET on worker 0, an accept, a close on the owner). */
int d_ring_get(struct d_app *a, uint64_t bytes, uint64_t *off, unsigned *cls)
{
	int rc;
	d_alock(a);
	rc = d_ring_get_locked(a, bytes, off, cls);
	d_aunlock(a);
	return rc;
}

static void d_ring_put_locked(struct d_app *a, uint64_t off, unsigned cls);

void d_ring_put(struct d_app *a, uint64_t off, unsigned cls)
{
	d_alock(a);
	d_ring_put_locked(a, off, cls);
	d_aunlock(a);
}

static int d_ring_get_locked(struct d_app *a, uint64_t bytes, uint64_t *off, unsigned *cls)
{
	struct d_ring_alloc *r = &a->ra;
	unsigned c = 0;
	uint64_t sz;
	while (((uint64_t)D_RING_MIN << c) < bytes && c + 1 < D_RING_CLASSES)
		c++;
	sz = (uint64_t)D_RING_MIN << c;
	if (sz < bytes)
		return -ENOMEM;
	if (r->n[c]) {
		*off = r->free[c][--r->n[c]];
	} else {
		if (r->bump + sz > r->end)
			return -ENOMEM;
		*off = r->bump;
		r->bump += sz;
	}
	*cls = c;
	return 0;
}

static void d_ring_put_locked(struct d_app *a, uint64_t off, unsigned cls)
{
	struct d_ring_alloc *r = &a->ra;
	if (r->n[cls] == r->cap[cls]) {
		uint32_t cap = r->cap[cls] ? 2 * r->cap[cls] : 16;
		uint64_t *f = (uint64_t *)realloc(r->free[cls], cap * sizeof *f);
		if (!f)
			return; /* leaks one block of this app's ring area; freed with the app */
		r->free[cls] = f;
		r->cap[cls] = cap;
	}
	r->free[cls][r->n[cls]++] = off;
}
