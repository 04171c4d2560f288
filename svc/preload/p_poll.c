/*
 * libipkit-preload: poll, ppoll, select, pselect and epoll over sets that mix
 * kernel and ipkit descriptors. The kernel does the sleeping: an ipkit socket is
 * watched through its eventfd (readable while the socket is) and its hidden
 * writable-level eventfd; after every wake-up the shim answers an ipkit socket
 * from its own state, so a stale level is never reported.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/eventfd.h>

#include "preload.h"

#define PL_ERR(e) (errno = (e), -1)
#define PL_IN_BITS (POLLIN | POLLPRI | POLLRDHUP)

static int64_t pl_now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* ------------------------------------------------------------ poll */

struct pl_pset {
	struct pollfd *k;      /* what the kernel polls */
	struct pl_sock **s;    /* per user entry: the ipkit socket or NULL */
	int *at;               /* per user entry: its first index in k */
	nfds_t nk;
};

static int pl_pset_build(struct pl_pset *p, struct pollfd *fds, nfds_t n)
{
	nfds_t i, nk = 0;
	p->k = (struct pollfd *)malloc(sizeof *p->k * (2 * n + 1));
	p->s = (struct pl_sock **)calloc(n + 1, sizeof *p->s);
	p->at = (int *)malloc(sizeof *p->at * (n + 1));
	if (!p->k || !p->s || !p->at)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		struct pl_sock *s = pl_get(fds[i].fd);
		p->s[i] = s;
		p->at[i] = (int)nk;
		if (!s) {
			p->k[nk++] = fds[i];
			continue;
		}
		if (fds[i].events & PL_IN_BITS)
			pl_listen_want(s);
		/* the readable level also carries errors: watch it unless only POLLOUT */
		p->k[nk].fd = (fds[i].events & PL_IN_BITS) || !(fds[i].events & POLLOUT) ?
		              fds[i].fd : -1; /* the program's number: an alias of the eventfd */
		p->k[nk++].events = POLLIN;
		p->k[nk].fd = (fds[i].events & POLLOUT) ? pl_ofd(s) : -1;
		p->k[nk++].events = POLLIN;
	}
	p->nk = nk;
	return 0;
}

static void pl_pset_free(struct pl_pset *p, nfds_t n)
{
	nfds_t i;
	for (i = 0; p->s && i < n; i++)
		if (p->s[i])
			pl_put(p->s[i]);
	free(p->k);
	free(p->s);
	free(p->at);
}

/* revents of every user entry from the kernel's answer and the sockets' state;
 * returns how many are non-zero. */
static int pl_pset_collect(struct pl_pset *p, struct pollfd *fds, nfds_t n)
{
	nfds_t i;
	int ready = 0;
	for (i = 0; i < n; i++) {
		if (p->s[i])
			fds[i].revents = (short)(pl_revents(p->s[i]) &
			                         ((unsigned)fds[i].events | POLLERR | POLLHUP));
		else
			fds[i].revents = p->k[p->at[i]].revents;
		ready += fds[i].revents != 0;
	}
	return ready;
}

static void pl_ep_watch(int fd);

/* A kernel wait of a program with ipkit sockets: an epoll set inside it may hold
 * some, so the deferred levels are written first (preload.h). */
static int pl_kwait_done(int r, int in)
{
	int err = errno;
	if (in)
		pl_wait_leave();
	errno = err;
	return r;
}
#define PL_KWAIT(call) (pl_any_sock() ? (pl_wait_flush(), pl_kwait_done((call), 1)) : (call))

static int pl_any_ipk(const struct pollfd *fds, nfds_t n)
{
	nfds_t i;
	int any = 0;
	for (i = 0; i < n; i++) {
		pl_ep_watch(fds[i].fd); /* an epoll set polled from outside */
		any |= pl_is_ipk(fds[i].fd);
	}
	return any;
}

/* The loop: ask the sockets, sleep in the kernel, ask again. timeout_ns < 0: none. */
static int pl_poll_core(struct pollfd *fds, nfds_t n, int64_t timeout_ns, const sigset_t *mask)
{
	struct pl_pset p;
	int64_t end = timeout_ns >= 0 ? pl_now_ns() + timeout_ns : -1;
	int rc;
	memset(&p, 0, sizeof p);
	rc = pl_pset_build(&p, fds, n);
	while (rc == 0) {
		struct timespec ts, *tp = NULL;
		int64_t left = end < 0 ? -1 : end - pl_now_ns();
		int r;
		nfds_t i;
		if (end >= 0 && left < 0)
			left = 0;
		for (i = 0; i < n; i++) {
			if (!p.s[i])
				continue;
			pl_unstale(p.s[i]); /* a stale level would end every sleep at once */
			if (pl_revents(p.s[i]) & ((unsigned)fds[i].events | POLLERR | POLLHUP))
				left = 0; /* an ipkit socket is ready now: only look at the rest */
		}
		if (left >= 0) {
			ts.tv_sec = left / 1000000000;
			ts.tv_nsec = left % 1000000000;
			tp = &ts;
		}
		pl_wait_flush(); /* deferred levels written before the kernel looks */
		r = pl_r.ppoll(p.k, p.nk, tp, mask);
		rc = r < 0 ? -errno : 0;
		pl_wait_leave();
		if (r < 0)
			break;
		rc = pl_pset_collect(&p, fds, n);
		for (i = 0; rc > 0 && i < n; i++)
			if (p.s[i] && fds[i].revents)
				pl_batch_set(1); /* the program handles an ipkit socket next */
		if (rc > 0 || (end >= 0 && pl_now_ns() >= end))
			break;
		rc = 0; /* woken for what was asked no more: sleep again */
	}
	pl_pset_free(&p, n);
	return rc;
}

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	int rc;
	pl_resolve();
	if (!pl_any_ipk(fds, n))
		return PL_KWAIT(pl_r.poll(fds, n, timeout));
	rc = pl_poll_core(fds, n, timeout < 0 ? -1 : (int64_t)timeout * 1000000, NULL);
	return rc < 0 ? PL_ERR(-rc) : rc;
}

int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	(void)fdslen;
	return poll(fds, n, timeout);
}

int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	int rc;
	pl_resolve();
	if (!pl_any_ipk(fds, n))
		return PL_KWAIT(pl_r.ppoll(fds, n, ts, mask));
	rc = pl_poll_core(fds, n, ts ? (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec : -1, mask);
	return rc < 0 ? PL_ERR(-rc) : rc;
}

/* ------------------------------------------------------------ select */

static int pl_sets_ipk(int nfds, fd_set *r, fd_set *w, fd_set *e)
{
	int fd, any = 0;
	for (fd = 0; fd < nfds && fd < FD_SETSIZE; fd++)
		if ((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (e && FD_ISSET(fd, e))) {
			pl_ep_watch(fd); /* an epoll set selected from outside */
			any |= pl_is_ipk(fd);
		}
	return any;
}

/* select as poll (Linux's own select maps the same bits: POLLIN|POLLHUP|POLLERR
 * to readable, POLLOUT|POLLERR to writable, POLLPRI to exceptional). */
static int pl_select(int nfds, fd_set *r, fd_set *w, fd_set *e, int64_t timeout_ns,
                     const sigset_t *mask)
{
	struct pollfd *p = (struct pollfd *)calloc((size_t)nfds + 1, sizeof *p);
	int fd, n = 0, rc, cnt = 0;
	if (!p)
		return -ENOMEM;
	for (fd = 0; fd < nfds; fd++) {
		short ev = (short)(((r && FD_ISSET(fd, r)) ? POLLIN : 0) |
		                   ((w && FD_ISSET(fd, w)) ? POLLOUT : 0) |
		                   ((e && FD_ISSET(fd, e)) ? POLLPRI : 0));
		if (!ev)
			continue;
		p[n].fd = fd;
		p[n++].events = ev;
	}
	rc = pl_poll_core(p, (nfds_t)n, timeout_ns, mask);
	if (rc >= 0) {
		int i;
		if (r) FD_ZERO(r);
		if (w) FD_ZERO(w);
		if (e) FD_ZERO(e);
		for (i = 0; i < n; i++) {
			short v = p[i].revents;
			if (v & POLLNVAL) {
				rc = -EBADF;
				break;
			}
			if (r && (p[i].events & POLLIN) && (v & (POLLIN | POLLHUP | POLLERR)))
				FD_SET(p[i].fd, r), cnt++;
			if (w && (p[i].events & POLLOUT) && (v & (POLLOUT | POLLERR)))
				FD_SET(p[i].fd, w), cnt++;
			if (e && (p[i].events & POLLPRI) && (v & POLLPRI))
				FD_SET(p[i].fd, e), cnt++;
		}
	}
	free(p);
	return rc < 0 ? rc : cnt;
}

int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
	int64_t t0, tns;
	int rc;
	pl_resolve();
	if (nfds < 0 || nfds > FD_SETSIZE || !pl_sets_ipk(nfds, r, w, e))
		return PL_KWAIT(pl_r.select(nfds, r, w, e, tv));
	tns = tv ? (int64_t)tv->tv_sec * 1000000000 + (int64_t)tv->tv_usec * 1000 : -1;
	t0 = pl_now_ns();
	rc = pl_select(nfds, r, w, e, tns, NULL);
	if (tv) { /* Linux writes back the time left */
		int64_t left = tns - (pl_now_ns() - t0);
		if (left < 0)
			left = 0;
		tv->tv_sec = left / 1000000000;
		tv->tv_usec = (left % 1000000000) / 1000;
	}
	return rc < 0 ? PL_ERR(-rc) : rc;
}

int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts,
            const sigset_t *mask)
{
	int rc;
	pl_resolve();
	if (nfds < 0 || nfds > FD_SETSIZE || !pl_sets_ipk(nfds, r, w, e))
		return PL_KWAIT(pl_r.pselect(nfds, r, w, e, ts, mask));
	rc = pl_select(nfds, r, w, e, ts ? (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec : -1,
	               mask);
	return rc < 0 ? PL_ERR(-rc) : rc;
}

/* ------------------------------------------------------------ epoll */

/* An ipkit socket in an epoll set is two kernel registrations, its eventfd (the
 * read side, EPOLLIN) and its writable-level eventfd (EPOLLIN when the user asked
 * EPOLLOUT), each carrying PL_EP_TAG | half << 32 | fd with the user's EPOLLET and
 * EPOLLONESHOT. The user's events and data are kept here, per epoll descriptor,
 * indexed by the socket's descriptor. The tag sits in bits 40..63, which no user
 * pointer on Linux has (user space ends below 2^47); an integer tag with exactly
 * these bits would be mistaken for one of ours.
 *
 * Level-triggered registrations (without EPOLLONESHOT or EPOLLEXCLUSIVE) are kept
 * level-triggered by the shim: the kernel holds them edge-triggered, every arrival
 * writes the eventfd (a new edge), and a socket the set reported goes on the set's
 * own list (`lt`), which every wait looks at again, reporting each socket that is
 * still ready, as Linux re-queues a level-triggered item after reporting it. So the
 * readable level never has to be cleared when the program has read everything (a
 * read(2) per request saved: redis). While that list is not empty the wait only
 * looks at the kernel (timeout 0). The set itself must still look ready to whoever
 * sleeps on it in the kernel (another thread in epoll_wait on it, an outer epoll
 * set or poll/select holding the epoll descriptor): then a hidden eventfd in the
 * set (`pfd`, half 2) is set while the list is not empty. */
#define PL_EP_TAG 0x1b4b17ull
#define PL_EP_MAX 65536
#define PL_EP_PEND (PL_EP_TAG << 40 | 2ull << 32)
#define PL_EP_REAP (PL_EP_TAG << 40 | 3ull << 32) /* ipkitd's wake eventfd (pl_reap) */

struct pl_ereg {
	uint32_t events;
	int on, disarmed;
	int emul;             /* level-triggered kept by the shim (edge in the kernel) */
	int carried;          /* on the set's lt list */
	int oreg;             /* the socket's writable eventfd is in the kernel set too
	                       * (made and added when EPOLLOUT is first asked: pl_ofd) */
	uint64_t serial;      /* the socket's: a closed socket's number reused by another
	                       * (even in the same reused memory) makes a stale entry */
	uint64_t round;       /* the wait that last reported it (one entry per wait) */
	epoll_data_t data;
};

struct pl_eset {
	pthread_mutex_t mu;
	int cap;
	struct pl_ereg *r;
	int *lt, *lt2;        /* reported level-triggered sockets, oldest first */
	int nlt, lt_cap;
	uint64_t round;
	int pfd;              /* the set's own level (-1: not made yet) */
	int pend;             /* pfd's counter is set */
	int sleepers;         /* threads in the kernel's wait on this set */
	int watched;          /* the epoll descriptor is watched from outside */
	int kfirst;           /* the kernel's answer goes before the lt list's */
	int epfd;             /* the epoll descriptor (ONESHOT re-arms) */
	uint64_t evgen;       /* ipkitd's wake eventfd is in the set (pl_reap_arm) */
};

static struct pl_eset *e_sets[PL_EP_MAX];
static __thread int t_ipk; /* ipkit sockets this thread's wait reported */
static uint8_t e_watched[PL_EP_MAX];
static pthread_mutex_t e_mu = PTHREAD_MUTEX_INITIALIZER;

static struct pl_eset *pl_eset(int epfd, int create)
{
	struct pl_eset *e;
	if (epfd < 0 || epfd >= PL_EP_MAX)
		return NULL;
	e = __atomic_load_n(&e_sets[epfd], __ATOMIC_ACQUIRE);
	if (e || !create)
		return e;
	pthread_mutex_lock(&e_mu);
	e = e_sets[epfd];
	if (!e && (e = (struct pl_eset *)calloc(1, sizeof *e)) != NULL) {
		pthread_mutex_init(&e->mu, NULL);
		e->pfd = -1;
		e->epfd = epfd;
		e->watched = __atomic_load_n(&e_watched[epfd], __ATOMIC_RELAXED);
		__atomic_store_n(&e_sets[epfd], e, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&e_mu);
	return e;
}

int pl_ep_handover(const struct pl_sock *s, int fd)
{
	int n = 0;
	for (int epfd = 0; epfd < PL_EP_MAX; epfd++) {
		struct pl_eset *e = __atomic_load_n(&e_sets[epfd], __ATOMIC_ACQUIRE);
		struct epoll_event ev;
		int on = 0;
		if (!e)
			continue;
		pthread_mutex_lock(&e->mu);
		if (fd < e->cap && e->r[fd].on && e->r[fd].serial == s->serial) {
			ev.events = e->r[fd].events; /* what the program asked */
			ev.data = e->r[fd].data;
			e->r[fd].on = 0; /* the shim's entry goes (its lt list drops it) */
			on = 1;
		}
		pthread_mutex_unlock(&e->mu);
		/* the number now names the kernel socket: the program's own registration
		 * of it, beside the old file's (which goes when that file is closed) */
		if (on && pl_r.epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0)
			n++;
	}
	return n;
}

void pl_ep_forget(int epfd)
{
	struct pl_eset *e;
	if (epfd < 0 || epfd >= PL_EP_MAX)
		return;
	if (__atomic_load_n(&e_watched[epfd], __ATOMIC_RELAXED))
		__atomic_store_n(&e_watched[epfd], 0, __ATOMIC_RELAXED);
	if (!__atomic_load_n(&e_sets[epfd], __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&e_mu);
	e = e_sets[epfd];
	__atomic_store_n(&e_sets[epfd], NULL, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&e_mu);
	if (e) { /* a thread still in epoll_wait on it is the caller's race, as in Linux */
		int fd;
		/* its number may name another set next: no socket may think this one
		 * alone sees it (the pump would defer arrivals for a waiter on the new
		 * set that no write of theirs wakes) */
		for (fd = 0; fd < e->cap; fd++) {
			struct pl_sock *s = e->r[fd].on ? pl_get(fd) : NULL;
			int want = epfd;
			if (!s)
				continue;
			__atomic_compare_exchange_n(&s->direct_epfd, &want, -1, 0, __ATOMIC_RELAXED,
			                            __ATOMIC_RELAXED);
			pl_put(s);
		}
		if (e->pfd >= 0)
			pl_r.close(e->pfd);
		pthread_mutex_destroy(&e->mu);
		free(e->r);
		free(e->lt);
		free(e->lt2);
		free(e);
	}
}

/* The set's own level (under e->mu): set while reported level-triggered sockets
 * wait to be looked at again and someone may sleep on the set in the kernel. */
static void pl_ep_pend(struct pl_eset *e, int want)
{
	uint64_t v = 1;
	ssize_t r = 0;
	if (e->pfd < 0 || want == e->pend)
		return;
	r = want ? pl_r.write(e->pfd, &v, sizeof v) : pl_r.read(e->pfd, &v, sizeof v);
	(void)r; /* a non-blocking eventfd: EAGAIN means already so */
	e->pend = want;
}

/* fd is in a poll/select set or being added to an epoll set: if it is an epoll
 * set of ours, it is watched from outside from now on. */
static void pl_ep_watch(int fd)
{
	struct pl_eset *e;
	if (fd < 0 || fd >= PL_EP_MAX)
		return;
	if (!__atomic_load_n(&e_watched[fd], __ATOMIC_RELAXED))
		__atomic_store_n(&e_watched[fd], 1, __ATOMIC_RELAXED);
	e = __atomic_load_n(&e_sets[fd], __ATOMIC_ACQUIRE);
	if (!e || __atomic_load_n(&e->watched, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&e->mu);
	__atomic_store_n(&e->watched, 1, __ATOMIC_RELAXED);
	if (e->nlt > 0)
		pl_ep_pend(e, 1);
	pthread_mutex_unlock(&e->mu);
}

static struct pl_ereg *pl_ereg(struct pl_eset *e, int fd)
{
	if (fd >= e->cap) {
		int cap = e->cap ? e->cap : 64;
		struct pl_ereg *r;
		while (cap <= fd)
			cap *= 2;
		r = (struct pl_ereg *)realloc(e->r, sizeof *r * (size_t)cap);
		if (!r)
			return NULL;
		memset(r + e->cap, 0, sizeof *r * (size_t)(cap - e->cap));
		e->r = r;
		e->cap = cap;
	}
	return &e->r[fd];
}

/* The set's own level eventfd, in the kernel set level-triggered (under e->mu);
 * 0 or -errno. */
static int pl_ep_pfd(struct pl_eset *e, int epfd)
{
	struct epoll_event k;
	int fd;
	if (e->pfd >= 0)
		return 0;
	fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	fd = pl_hide_fd(fd);
	k.events = EPOLLIN;
	k.data.u64 = PL_EP_PEND;
	if (pl_r.epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &k) < 0) {
		int err = errno;
		pl_r.close(fd);
		return -err;
	}
	e->pfd = fd;
	return 0;
}

/* Put fd on the lt list (under e->mu); 0 or -ENOMEM (then it is not carried: the
 * next arrival still reports it, as edge-triggered). */
static int pl_ep_carry(struct pl_eset *e, int fd)
{
	if (e->nlt == e->lt_cap) {
		int cap = e->lt_cap ? 2 * e->lt_cap : 64;
		int *a = (int *)realloc(e->lt, sizeof *a * (size_t)cap);
		int *b;
		if (!a)
			return -ENOMEM;
		e->lt = a;
		b = (int *)realloc(e->lt2, sizeof *b * (size_t)cap);
		if (!b)
			return -ENOMEM;
		e->lt2 = b;
		e->lt_cap = cap;
	}
	e->lt[e->nlt++] = fd;
	e->r[fd].carried = 1;
	return 0;
}

static int pl_ep_kernel(int epfd, int op, int fd, struct pl_sock *s, uint32_t ev,
                        struct pl_ereg *g)
{
	struct epoll_event k[2];
	/* EPOLLEXCLUSIVE too: the kernel wakes one of the sets waiting on the eventfd,
	 * as it would on the socket (and refuses it on MOD, as Linux) */
	uint32_t fl = ev & (EPOLLET | EPOLLONESHOT | EPOLLEXCLUSIVE);
	int in = (ev & PL_IN_BITS) || !(ev & EPOLLOUT), r;
	k[0].events = in ? EPOLLIN | fl : 0;
	k[0].data.u64 = PL_EP_TAG << 40 | (uint32_t)fd;
	k[1].events = (ev & EPOLLOUT) ? EPOLLIN | fl : 0;
	k[1].data.u64 = PL_EP_TAG << 40 | 1ull << 32 | (uint32_t)fd;
	if (op == EPOLL_CTL_MOD && (ev & EPOLLEXCLUSIVE))
		return -EINVAL;
	r = pl_r.epoll_ctl(epfd, op, fd, op == EPOLL_CTL_DEL ? NULL : &k[0]);
	if (r < 0)
		return -errno;
	/* the hidden half, only once EPOLLOUT is asked (the eventfd is made then);
	 * its errors (a dup'd socket added twice) change nothing the user can see
	 * beyond the first registration */
	if (op == EPOLL_CTL_ADD)
		g->oreg = 0;
	if (op == EPOLL_CTL_DEL) {
		int o = __atomic_load_n(&s->ofd, __ATOMIC_ACQUIRE);
		if (g->oreg && o >= 0)
			pl_r.epoll_ctl(epfd, EPOLL_CTL_DEL, o, NULL);
		g->oreg = 0;
	} else if ((ev & EPOLLOUT) || g->oreg) {
		int o = (ev & EPOLLOUT) ? pl_ofd(s) : __atomic_load_n(&s->ofd, __ATOMIC_ACQUIRE);
		if (o >= 0) {
			pl_r.epoll_ctl(epfd, g->oreg ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, o, &k[1]);
			g->oreg = 1;
		}
	}
	return 0;
}

static int pl_ep_direct_ok(const struct pl_ereg *g, struct pl_sock *s);

static int pl_ep_ctl(struct pl_eset *e, int epfd, int op, int fd, struct pl_sock *s,
                     struct epoll_event *ev)
{
	struct pl_ereg *g = pl_ereg(e, fd);
	uint32_t kev;
	int on, rc, emul = 0;
	if (!g)
		return -ENOMEM;
	/* a registration of a socket whose number was reused since (another serial)
	 * is stale: the kernel dropped it with that socket's last descriptor, or
	 * drops it then, and a DEL by number could not reach it anyway (it names
	 * the number's file now, the new socket's): never in the kernel set (one
	 * system call per accepted connection for a server that reuses numbers) */
	on = g->on && g->serial == s->serial;
	if (op == EPOLL_CTL_ADD && on)
		return -EEXIST;
	if (op != EPOLL_CTL_ADD && !on)
		return -ENOENT;
	if (op != EPOLL_CTL_DEL && !ev)
		return -EFAULT;
	kev = op == EPOLL_CTL_DEL ? 0 : ev->events;
	if (op != EPOLL_CTL_DEL && !(kev & (EPOLLET | EPOLLONESHOT | EPOLLEXCLUSIVE)) &&
	    pl_ep_pfd(e, epfd) == 0) {
		emul = 1; /* level-triggered by the shim: edge-triggered in the kernel */
		kev |= EPOLLET;
	}
	rc = pl_ep_kernel(epfd, op, fd, s, kev, g);
	if (rc < 0)
		return rc;
	if (op == EPOLL_CTL_ADD)
		__atomic_add_fetch(&s->nsets, 1, __ATOMIC_RELAXED);
	else if (op == EPOLL_CTL_DEL)
		__atomic_sub_fetch(&s->nsets, 1, __ATOMIC_RELAXED);
	g->on = op != EPOLL_CTL_DEL;
	g->serial = s->serial;
	g->disarmed = 0;
	g->emul = emul;
	if (g->on) {
		g->events = ev->events;
		g->data = ev->data;
		/* level-triggered in the kernel: the readable level is cleared at once */
		if (!emul && !(ev->events & EPOLLET))
			__atomic_store_n(&s->ep_lt, 1, __ATOMIC_RELAXED);
	}
	/* whether this set alone sees its arrivals (pl_ep_direct's rule), under the
	 * number the pump knows it by */
	__atomic_store_n(&s->direct_epfd,
	                 g->on && fd == s->fd && pl_ep_direct_ok(g, s) ? epfd : -1,
	                 __ATOMIC_RELAXED);
	return 0;
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct pl_sock *s;
	struct pl_eset *e;
	int rc;
	pl_resolve();
	s = pl_get(fd);
	if (!s) {
		if (op == EPOLL_CTL_ADD)
			pl_ep_watch(fd); /* an epoll set nested in another */
		return pl_r.epoll_ctl(epfd, op, fd, ev);
	}
	e = pl_eset(epfd, 1);
	if (!e) {
		pl_put(s);
		return PL_ERR(epfd < 0 ? EBADF : ENOMEM);
	}
	if (op != EPOLL_CTL_DEL && ev && (ev->events & (EPOLLIN | EPOLLRDNORM)))
		pl_listen_want(s);
	pthread_mutex_lock(&e->mu);
	rc = pl_ep_ctl(e, epfd, op, fd, s, ev);
	pthread_mutex_unlock(&e->mu);
	pl_put(s);
	return rc < 0 ? PL_ERR(-rc) : 0;
}

/* An ipkit socket's registration as the user's event (under e->mu): the socket's
 * whole state masked by what was asked (Linux reports every true event at a
 * wake-up, also in edge-triggered mode). 0: nothing to report. */
static uint32_t pl_ep_user(struct pl_eset *e, int fd, epoll_data_t *data)
{
	struct pl_ereg *g;
	struct pl_sock *s;
	uint32_t m = 0;
	if (fd < 0 || fd >= e->cap)
		return 0;
	g = &e->r[fd];
	if (g->round == e->round) /* reported in this wait already */
		return 0;
	s = pl_get(fd);
	if (s && g->on && !g->disarmed && g->serial == s->serial) {
		m = pl_revents(s) & (g->events | EPOLLERR | EPOLLHUP);
		/* level-triggered in the kernel: a stale level would wake it again at once */
		if (!(m & (EPOLLIN | EPOLLRDNORM)) && !g->emul)
			pl_unstale(s);
		/* the kernel spent a ONESHOT registration's shot on a level with nothing
		 * behind it; Linux disarms only what it reports: armed again (the stale
		 * level cleared above first), else the next arrival would be lost */
		if (!m && (g->events & EPOLLONESHOT))
			pl_ep_kernel(e->epfd, EPOLL_CTL_MOD, fd, s, g->events, g);
		*data = g->data;
		if (m && (g->events & EPOLLONESHOT))
			g->disarmed = 1;
		if (m) {
			g->round = e->round;
			t_ipk++;
		}
		if (m && g->emul && !g->carried)
			pl_ep_carry(e, fd);
	}
	if (s)
		pl_put(s);
	return m;
}

/* The lt list's sockets still ready, into ev (at most max; under e->mu): the ones
 * reported go to the list's end (Linux re-queues a reported item at the tail), the
 * ones no longer ready or registered leave it, the ones not looked at (ev full) stay
 * in front. Returns the entries written. */
static int pl_ep_carried(struct pl_eset *e, struct epoll_event *ev, int max)
{
	int *old = e->lt, n = e->nlt, i, k = 0, nskip = 0;
	if (n == 0)
		return 0;
	e->lt = e->lt2; /* pl_ep_user carries the reported ones here, in order */
	e->lt2 = old;
	e->nlt = 0;
	for (i = 0; i < n; i++)
		e->r[old[i]].carried = 0;
	for (i = 0; i < n; i++) {
		int fd = old[i];
		epoll_data_t d;
		uint32_t m;
		if (k >= max) {
			old[nskip++] = fd; /* not looked at (nskip <= i: read already) */
			e->r[fd].carried = 1;
			continue;
		}
		if (!e->r[fd].on || !e->r[fd].emul)
			continue;
		m = pl_ep_user(e, fd, &d);
		if (m) {
			ev[k].events = m;
			ev[k++].data = d;
		}
	}
	/* the list is the skipped ones, then the reported ones */
	for (i = 0; i < e->nlt; i++)
		old[nskip + i] = e->lt[i];
	e->nlt += nskip;
	e->lt2 = e->lt;
	e->lt = old;
	return k;
}

/* The set alone sees the socket's arrivals and needs no eventfd write for them:
 * its only epoll set, edge-triggered or level-triggered kept by the shim, not
 * ONESHOT (the kernel's shot), asking for input. */
static int pl_ep_direct_ok(const struct pl_ereg *g, struct pl_sock *s)
{
	return __atomic_load_n(&s->nsets, __ATOMIC_RELAXED) == 1 &&
	       !(g->events & EPOLLONESHOT) && (g->emul || (g->events & EPOLLET)) &&
	       (g->events & (EPOLLIN | EPOLLRDNORM));
}

/* A socket whose arrival was deferred (preload.h), taken by this wait (under
 * e->mu): reported here without its eventfd write when this set alone can see it
 * (its only epoll set, edge-triggered or level-triggered kept by the shim, not
 * ONESHOT), else its write now, for the kernel and every other waiter. Returns
 * the entries written (0 or 1). */
static int pl_ep_direct(struct pl_eset *e, struct pl_sock *s, struct epoll_event *ev,
                        int room)
{
	int fd = s->fd;
	struct pl_ereg *g = fd >= 0 && fd < e->cap ? &e->r[fd] : NULL;
	epoll_data_t d;
	uint32_t m;
	if (room <= 0 || !g || !g->on || g->serial != s->serial || !pl_ep_direct_ok(g, s)) {
		pl_pend_flush(s);
		return 0;
	}
	pl_pend_take(s); /* its state is read after this: an arrival is not missed */
	m = pl_ep_user(e, fd, &d);
	if (!m)
		return 0;
	ev->events = m;
	ev->data = d;
	return 1;
}

/* Rewrite the kernel's answer in place (under e->mu): kernel descriptors as they
 * are, ipkit ones from their state, one entry per socket and wait. Returns the
 * entries kept. */
static int pl_ep_fix(struct pl_eset *e, struct epoll_event *ev, int n)
{
	int i, k = 0;
	for (i = 0; i < n; i++) {
		uint64_t t = ev[i].data.u64;
		epoll_data_t d;
		uint32_t m;
		if (t >> 40 != PL_EP_TAG) {
			ev[k++] = ev[i];
			continue;
		}
		if (t == PL_EP_PEND) /* the set's own level: the lt list was looked at */
			continue;
		if (t == PL_EP_REAP) /* ipkitd posted: taken by pl_reap after the wait */
			continue;
		m = pl_ep_user(e, (int)(uint32_t)t, &d); /* 0 for the second half */
		if (m) {
			ev[k].events = m;
			ev[k++].data = d;
		}
	}
	return k;
}

static int (*r_pwait2)(int, struct epoll_event *, int, const struct timespec *,
                       const sigset_t *);

/* The kernel's wait with a timeout in ns (-1: none): epoll_pwait2 when the program
 * used it (ns resolution), else epoll_pwait (ms, rounded up). */
static int pl_ep_kwait(int epfd, struct epoll_event *ev, int max, int64_t left_ns,
                       const sigset_t *mask, int ns)
{
	struct timespec ts;
	if (ns && r_pwait2) {
		ts.tv_sec = left_ns / 1000000000;
		ts.tv_nsec = left_ns % 1000000000;
		return r_pwait2(epfd, ev, max, left_ns < 0 ? NULL : &ts, mask);
	}
	return pl_r.epoll_pwait(epfd, ev, max,
	                        left_ns < 0 ? -1 : (int)((left_ns + 999999) / 1000000), mask);
}

/* One wait: the lt list first (then the kernel only looks, timeout 0), the kernel's
 * answer after it, as Linux's ready list has the re-queued items before what arrived
 * since, then the arrivals whose levels were deferred (preload.h); after an answer
 * that filled `max` the lt list and the kernel take turns going first, so neither
 * starves the other. */
static int pl_ep_wait_ns(int epfd, struct epoll_event *ev, int max, int64_t timeout_ns,
                         const sigset_t *mask, int ns)
{
	struct pl_eset *e = pl_eset(epfd, 0);
	int64_t end = timeout_ns >= 0 ? pl_now_ns() + timeout_ns : -1;
	struct pl_sock *pend, *nx;
	if (!e || max <= 0)
		return PL_KWAIT(pl_ep_kwait(epfd, ev, max, timeout_ns, mask, ns));
	for (;;) {
		int64_t left = end < 0 ? -1 : end - pl_now_ns();
		int r = 0, nc, k, kf, busy, err, armed = 0;
		uint32_t wv;
		if (end >= 0 && left < 0)
			left = 0;
		/* what ipkitd posted, taken here: the arrivals go on the deferred list,
		 * which the enter below takes (preload.c, "reaping") */
		wv = pl_reap();
		pend = pl_wait_enter_ep(epfd);
		t_ipk = 0;
		pthread_mutex_lock(&e->mu);
		e->round++;
		kf = e->kfirst;
		e->kfirst = 0;
		nc = kf ? 0 : pl_ep_carried(e, ev, max);
		busy = e->nlt > 0 || nc > 0 || pend;
		if (!busy)
			pl_ep_pend(e, 0); /* nothing left to look at again */
		else
			left = 0;
		e->sleepers += !busy;
		/* a sleep: with ipkitd's wake eventfd armed in the set, not the pump */
		if (nc < max && left != 0) {
			armed = pl_reap_arm(epfd, &e->evgen, PL_EP_REAP, wv);
			if (armed < 0)
				left = 0; /* posted since the reap: look again first */
		}
		pthread_mutex_unlock(&e->mu);
		if (nc < max)
			r = pl_ep_kwait(epfd, ev + nc, max - nc, left, mask, ns);
		err = errno; /* EINTR and such, kept across the work below */
		if (armed > 0)
			pl_reap_disarm();
		pl_wait_leave();
		pl_reap(); /* what woke us: onto the deferred list, grabbed below */
		pthread_mutex_lock(&e->mu);
		e->sleepers -= !busy;
		k = nc + (r > 0 ? pl_ep_fix(e, ev + nc, r) : 0);
		/* arrivals nobody was told of yet: newer than what the kernel had (a
		 * waiter's flush wrote every older one), so after its answer */
		for (; pend; pend = nx) {
			nx = pend->pnext;
			k += pl_ep_direct(e, pend, ev + k, max - k);
		}
		/* the ones deferred while we slept (the first one's write woke us) */
		for (pend = pl_pend_grab(); pend; pend = nx) {
			nx = pend->pnext;
			k += pl_ep_direct(e, pend, ev + k, max - k);
		}
		if (r < 0 && k == 0) {
			pthread_mutex_unlock(&e->mu);
			errno = err;
			return r;
		}
		if (kf && k < max)
			k += pl_ep_carried(e, ev + k, max - k);
		/* a full answer may have left either side waiting: the other side goes
		 * first next time, so neither starves (Linux's one ready list rotates) */
		e->kfirst = k >= max && !kf;
		/* someone may sleep on the set in the kernel: it must look ready while the
		 * list holds sockets to look at again (Linux wakes them too) */
		if (e->nlt > 0 && (e->sleepers > 0 || __atomic_load_n(&e->watched, __ATOMIC_RELAXED)))
			pl_ep_pend(e, 1);
		pthread_mutex_unlock(&e->mu);
		if (t_ipk > 0)
			pl_batch_set(1); /* the program handles an ipkit socket next */
		if (k > 0 || (end >= 0 && pl_now_ns() >= end))
			return k;
	}
}

static int pl_ep_wait(int epfd, struct epoll_event *ev, int max, int timeout,
                      const sigset_t *mask)
{
	return pl_ep_wait_ns(epfd, ev, max, timeout < 0 ? -1 : (int64_t)timeout * 1000000, mask,
	                     0);
}

int epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *ts,
                 const sigset_t *mask)
{
	pl_resolve();
	if (!r_pwait2) {
		void *p = dlsym(RTLD_NEXT, "epoll_pwait2");
		memcpy(&r_pwait2, &p, sizeof p);
	}
	if (!r_pwait2) {
		errno = ENOSYS;
		return -1;
	}
	return pl_ep_wait_ns(epfd, ev, max, ts ? (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec : -1,
	                     mask, 1);
}

int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	pl_resolve();
	return pl_ep_wait(epfd, ev, max, timeout, NULL);
}

int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout, const sigset_t *mask)
{
	pl_resolve();
	return pl_ep_wait(epfd, ev, max, timeout, mask);
}
