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
		p->k[nk].fd = (fds[i].events & POLLOUT) ? s->ofd : -1;
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

static int pl_any_ipk(const struct pollfd *fds, nfds_t n)
{
	nfds_t i;
	for (i = 0; i < n; i++)
		if (pl_is_ipk(fds[i].fd))
			return 1;
	return 0;
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
		r = pl_r.ppoll(p.k, p.nk, tp, mask);
		if (r < 0) {
			rc = -errno;
			break;
		}
		rc = pl_pset_collect(&p, fds, n);
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
		return pl_r.poll(fds, n, timeout);
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
		return pl_r.ppoll(fds, n, ts, mask);
	rc = pl_poll_core(fds, n, ts ? (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec : -1, mask);
	return rc < 0 ? PL_ERR(-rc) : rc;
}

/* ------------------------------------------------------------ select */

static int pl_sets_ipk(int nfds, fd_set *r, fd_set *w, fd_set *e)
{
	int fd;
	for (fd = 0; fd < nfds && fd < FD_SETSIZE; fd++)
		if (((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (e && FD_ISSET(fd, e))) &&
		    pl_is_ipk(fd))
			return 1;
	return 0;
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
		return pl_r.select(nfds, r, w, e, tv);
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
		return pl_r.pselect(nfds, r, w, e, ts, mask);
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
 * these bits would be mistaken for one of ours. */
#define PL_EP_TAG 0x1b4b17ull
#define PL_EP_MAX 65536
#define PL_EP_DUP (1ull << 33)

struct pl_ereg {
	uint32_t events;
	int on, disarmed;
	uint64_t serial;      /* the socket's: a closed socket's number reused by another
	                       * (even in the same reused memory) makes a stale entry */
	epoll_data_t data;
};

struct pl_eset {
	pthread_mutex_t mu;
	int cap;
	struct pl_ereg *r;
};

static struct pl_eset *e_sets[PL_EP_MAX];
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
		__atomic_store_n(&e_sets[epfd], e, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&e_mu);
	return e;
}

void pl_ep_forget(int epfd)
{
	struct pl_eset *e;
	if (epfd < 0 || epfd >= PL_EP_MAX || !__atomic_load_n(&e_sets[epfd], __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&e_mu);
	e = e_sets[epfd];
	__atomic_store_n(&e_sets[epfd], NULL, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&e_mu);
	if (e) { /* a thread still in epoll_wait on it is the caller's race, as in Linux */
		pthread_mutex_destroy(&e->mu);
		free(e->r);
		free(e);
	}
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

static int pl_ep_kernel(int epfd, int op, int fd, struct pl_sock *s, uint32_t ev)
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
	/* the hidden half: its errors (a dup'd socket added twice) change nothing the
	 * user can see beyond the first registration */
	pl_r.epoll_ctl(epfd, op, s->ofd, op == EPOLL_CTL_DEL ? NULL : &k[1]);
	return 0;
}

static int pl_ep_ctl(struct pl_eset *e, int epfd, int op, int fd, struct pl_sock *s,
                     struct epoll_event *ev)
{
	struct pl_ereg *g = pl_ereg(e, fd);
	int on, rc;
	if (!g)
		return -ENOMEM;
	on = g->on && g->serial == s->serial;
	if (op == EPOLL_CTL_ADD && g->on && g->serial != s->serial)
		pl_r.epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL); /* stale: the number was reused */
	if (op == EPOLL_CTL_ADD && on)
		return -EEXIST;
	if (op != EPOLL_CTL_ADD && !on)
		return -ENOENT;
	if (op != EPOLL_CTL_DEL && !ev)
		return -EFAULT;
	rc = pl_ep_kernel(epfd, op, fd, s, op == EPOLL_CTL_DEL ? 0 : ev->events);
	if (rc < 0)
		return rc;
	g->on = op != EPOLL_CTL_DEL;
	g->serial = s->serial;
	g->disarmed = 0;
	if (g->on) {
		g->events = ev->events;
		g->data = ev->data;
		if (!(ev->events & EPOLLET)) /* the readable level is cleared at once */
			__atomic_store_n(&s->ep_lt, 1, __ATOMIC_RELAXED);
	}
	return 0;
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct pl_sock *s;
	struct pl_eset *e;
	int rc;
	pl_resolve();
	s = pl_get(fd);
	if (!s)
		return pl_r.epoll_ctl(epfd, op, fd, ev);
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

/* One kernel event of an ipkit socket as the user's: the socket's whole state
 * masked by what was asked (Linux reports every true event at a wake-up, also in
 * edge-triggered mode). 0: nothing to report. */
static uint32_t pl_ep_user(struct pl_eset *e, uint64_t tag, epoll_data_t *data)
{
	int fd = (int)(uint32_t)tag;
	struct pl_ereg *g;
	struct pl_sock *s;
	uint32_t m = 0;
	if (fd < 0 || fd >= e->cap)
		return 0;
	g = &e->r[fd];
	s = pl_get(fd);
	if (s && g->on && !g->disarmed && g->serial == s->serial) {
		m = pl_revents(s) & (g->events | EPOLLERR | EPOLLHUP);
		if (!(m & (EPOLLIN | EPOLLRDNORM)))
			pl_unstale(s); /* a level-triggered set would wake again at once */
		*data = g->data;
		if (m && (g->events & EPOLLONESHOT))
			g->disarmed = 1;
	}
	if (s)
		pl_put(s);
	return m;
}

/* Rewrite the kernel's answer in place: kernel descriptors as they are, ipkit ones
 * from their state, one entry per socket. Returns the entries kept. */
static int pl_ep_fix(struct pl_eset *e, struct epoll_event *ev, int n)
{
	int i, k = 0, j;
	/* both halves of one socket woke: keep the first (it reports the whole state) */
	for (i = 0; i < n; i++)
		for (j = i + 1; ev[i].data.u64 >> 40 == PL_EP_TAG && j < n; j++)
			if (ev[j].data.u64 >> 40 == PL_EP_TAG &&
			    (uint32_t)ev[j].data.u64 == (uint32_t)ev[i].data.u64)
				ev[j].data.u64 |= PL_EP_DUP;
	pthread_mutex_lock(&e->mu);
	for (i = 0; i < n; i++) {
		uint64_t t = ev[i].data.u64;
		epoll_data_t d;
		uint32_t m;
		if (t >> 40 != PL_EP_TAG) {
			ev[k++] = ev[i];
			continue;
		}
		if (t & PL_EP_DUP)
			continue;
		m = pl_ep_user(e, t, &d);
		if (m) {
			ev[k].events = m;
			ev[k++].data = d;
		}
	}
	pthread_mutex_unlock(&e->mu);
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

static int pl_ep_wait_ns(int epfd, struct epoll_event *ev, int max, int64_t timeout_ns,
                         const sigset_t *mask, int ns)
{
	struct pl_eset *e = pl_eset(epfd, 0);
	int64_t end = timeout_ns >= 0 ? pl_now_ns() + timeout_ns : -1;
	if (!e)
		return pl_ep_kwait(epfd, ev, max, timeout_ns, mask, ns);
	for (;;) {
		int64_t left = end < 0 ? -1 : end - pl_now_ns();
		int r, k;
		if (end >= 0 && left < 0)
			left = 0;
		r = pl_ep_kwait(epfd, ev, max, left, mask, ns);
		if (r <= 0)
			return r;
		k = pl_ep_fix(e, ev, r);
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
