/*
 * libipkit-preload: the socket calls. Each looks the descriptor up (lock-free); a
 * kernel descriptor goes to the real call unchanged, an ipkit socket is served
 * from its state and the daemon's rings (svc/preload/README.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "preload.h"

#define PL_ERR(e) (errno = (e), -1)

/* ------------------------------------------------------------ helpers */

static uint64_t pl_ud(unsigned kind, uint32_t len, uint64_t off)
{
	return ((uint64_t)kind << 60) | ((uint64_t)(len & 0xffffffu) << 36) |
	       (off & 0xfffffffffull);
}


/* SO_RCVTIMEO/SO_SNDTIMEO as an absolute deadline in ms (0: none). */
static int64_t pl_now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int64_t pl_deadline(const struct timeval *tv)
{
	int64_t ms = (int64_t)tv->tv_sec * 1000 + (tv->tv_usec + 999) / 1000;
	return ms > 0 ? pl_now_ms() + ms : 0;
}

/* Wait for a level with an optional deadline: 0, -EAGAIN (timed out), -EINTR. */
static int pl_wait_until(struct pl_sock *s, int out, int64_t deadline)
{
	int64_t left = -1;
	if (deadline) {
		left = deadline - pl_now_ms();
		if (left <= 0)
			return -EAGAIN;
	}
	return pl_wait(s, out, left > 0x7fffffff ? 0x7fffffff : (int)left);
}

/* ------------------------------------------------------------ creation */

/* A new ipkit socket around `so` (NULL: ask the daemon for one), named by a fresh
 * eventfd. Returns the descriptor or -errno. */
static int pl_make(struct ipk_svc_sock *so, int flags, int kind, int domain,
                   struct pl_sock **out)
{
	struct ipk_svc *svc = pl_svc();
	struct pl_sock *s;
	int rc;
	if (!svc)
		return -EAGAIN;
	s = pl_sock_new(kind);
	if (!s)
		return -ENOMEM;
	s->domain = domain;
	s->fd = eventfd(0, EFD_NONBLOCK | ((flags & SOCK_CLOEXEC) ? EFD_CLOEXEC : 0));
	s->ofd = -1; /* made when first wanted (pl_ofd) */
	s->lfd = pl_hide_dup(s->fd);
	s->nonblock = !!(flags & SOCK_NONBLOCK);
	rc = s->fd < 0 || s->lfd < 0 ? -EMFILE : 0;
	if (rc == 0 && !so)
		rc = ipk_svc_socket(svc, kind == SOCK_DGRAM ? IPK_SVC_UDP : IPK_SVC_TCP, 128, 256,
		                    &so);
	if (rc < 0) {
		if (s->fd >= 0)
			pl_r.close(s->fd);
		if (s->ofd >= 0)
			pl_r.close(s->ofd);
		if (s->lfd >= 0)
			pl_r.close(s->lfd);
		pl_put(s);
		if (rc == -EPIPE)
			pl_daemon_gone();
		return rc == -EPIPE ? -ENETDOWN : rc;
	}
	s->so = so;
	if (kind == SOCK_DGRAM) {
		pthread_mutex_lock(&s->mu);
		pl_udp_post(s);
		pthread_mutex_unlock(&s->mu);
	}
	pl_levels(s, 0);
	pl_sock_link(s);
	pl_tbl_set(s->fd, s);
	PL_COUNT(sock_ipk, 1);
	*out = s;
	return s->fd;
}

int socket(int domain, int type, int protocol)
{
	struct pl_sock *s;
	int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC), fd;
	pl_resolve();
	/* AF_INET6 too (issue 18): many programs open it by default (redis binds
	 * `* -::*`, curl tries both families); ipkitd serves it with --ip6, and maps
	 * a dual-stack socket's IPv4 peers */
	if ((domain != AF_INET && domain != AF_INET6) ||
	    (base != SOCK_STREAM && base != SOCK_DGRAM)) {
		PL_COUNT(sock_passthrough, 1);
		return pl_r.socket(domain, type, protocol);
	}
	/* TCP and UDP go to ipkitd when the switch says all (ports:LIST moves the
	 * socket at bind/connect); another protocol number stays on the kernel */
	if ((protocol && protocol != (base == SOCK_STREAM ? IPPROTO_TCP : IPPROTO_UDP)) ||
	    !pl_route_all()) {
		PL_COUNT(sock_kernel, 1);
		return pl_r.socket(domain, type, protocol);
	}
	if (!pl_svc()) {
		if (errno)
			return -1; /* IPKIT_PRELOAD_FALLBACK=fail: pl_svc set errno */
		PL_COUNT(sock_kernel, 1);
		PL_COUNT(fallbacks, 1);
		return pl_r.socket(domain, type, protocol);
	}
	if (domain == AF_INET6 && !(ipk_svc_features(pl_svc()) & IPK_SVC_FEAT_IP6)) {
		/* ipkitd without --ip6: the kernel's, as before IPv6 reached the service */
		PL_COUNT(sock_passthrough, 1);
		return pl_r.socket(domain, type, protocol);
	}
	fd = pl_make(NULL, type, base, domain, &s);
	if (fd < 0)
		return PL_ERR(-fd);
	pl_put(s);
	return fd;
}

/* IPKIT_PRELOAD=ports:LIST or addrs:LIST: a kernel TCP or UDP socket whose port
 * or address is listed becomes an ipkit socket at bind/connect,
 * under the same number (dup3 over it). Returns the socket (a reference) or NULL
 * to stay on the kernel. */
static struct pl_sock *pl_migrate(int fd, const struct sockaddr *a, socklen_t len)
{
	union pl_sa in;
	struct pl_sock *s;
	int type = 0, dom = 0, fl, fdfl, tmp;
	socklen_t l = sizeof type;
	if (pl_route_all() || !a || len < (socklen_t)sizeof(sa_family_t) ||
	    pl_sa_in(a, len, a->sa_family, &in) < 0 ||
	    !(pl_route_port(ntohs(in.in.sin_port)) || pl_route_addr(&in.sa)))
		return NULL;
	if (pl_r.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0 || (type != SOCK_STREAM && type != SOCK_DGRAM))
		return NULL;
	l = sizeof dom;
	if (pl_r.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) < 0 ||
	    (dom != AF_INET && dom != AF_INET6) || !pl_svc() ||
	    (dom == AF_INET6 && !(ipk_svc_features(pl_svc()) & IPK_SVC_FEAT_IP6)))
		return NULL;
	fl = pl_r.fcntl(fd, F_GETFL);
	fdfl = pl_r.fcntl(fd, F_GETFD);
	tmp = pl_make(NULL, ((fl & O_NONBLOCK) ? SOCK_NONBLOCK : 0), type, dom, &s);
	if (tmp < 0)
		return NULL;
	if (pl_r.dup3(tmp, fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0) {
		int last;
		struct pl_sock *t = pl_tbl_take(tmp, &last);
		pl_r.close(tmp);
		pl_sock_release(s);
		if (t)
			pl_put(t);
		pl_put(s);
		return NULL;
	}
	{
		int last;
		struct pl_sock *t = pl_tbl_take(tmp, &last);
		pl_r.close(tmp);
		s->fd = fd;
		pl_tbl_set(fd, s);
		if (t)
			pl_put(t);
	}
	PL_COUNT(sock_kernel, (uint64_t)-1);
	return s;
}

/* ------------------------------------------------------------ bind, listen */

/* One synchronous operation: submitted here, completed by the pump (s->cv). */
static int pl_sync_op_in(struct pl_sock *s, struct ipk_svc_sqe *tmpl)
{
	struct ipk_svc_sqe *e;
	int rc;
	pthread_mutex_lock(&s->mu);
	while (s->sync_busy && s->so)
		pthread_cond_wait(&s->cv, &s->mu);
	e = s->so ? ipk_svc_get_sqe(s->so) : NULL;
	if (!e) {
		pthread_mutex_unlock(&s->mu);
		return s->so ? -EAGAIN : -EBADF;
	}
	*e = *tmpl;
	e->user_data = pl_ud(PL_OP_BIND, 0, 0);
	s->sync_done = 0;
	s->sync_busy = 1;
	rc = ipk_svc_submit(s->so);
	while (rc >= 0 && !s->sync_done && s->so)
		pthread_cond_wait(&s->cv, &s->mu);
	rc = rc < 0 ? -ENETDOWN : s->sync_done ? s->sync_res : -EBADF;
	s->sync_busy = 0;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

/* The pump completes it: not parked meanwhile (preload.c, "reaping"). */
int pl_sync_op(struct pl_sock *s, struct ipk_svc_sqe *tmpl)
{
	int rc, need = pl_sync_wait_begin();
	rc = pl_sync_op_in(s, tmpl);
	pl_sync_wait_end(need);
	return rc;
}

static int pl_bind_port(struct pl_sock *s, union pl_sa *in)
{
	struct ipk_svc_sqe e;
	int rc, tries = 0;
	unsigned seed = (unsigned)pl_now_ms() ^ (unsigned)getpid() ^ (unsigned)s->fd;
	do {
		union pl_sa t = *in;
		/* port 0: an ephemeral port (Linux's default range), a few tries */
		if (in->in.sin_port == 0)
			t.in.sin_port = htons((uint16_t)(32768 + (seed = seed * 1103515245u + 12345u) %
			                                         28232u));
		memset(&e, 0, sizeof e);
		if (s->reuseport)
			ipk_svc_prep_bind_reuse(&e, &(struct ipk_svc_addr){0});
		else
			ipk_svc_prep_bind(&e, &(struct ipk_svc_addr){0});
		pl_sa_to_svc(&e.addr, &t);
		if (s->domain == AF_INET6 && s->v6only)
			e.flags |= IPK_SVC_SQE_F_V6ONLY;
		rc = pl_sync_op(s, &e);
		if (rc == 0)
			*in = t;
	} while (rc == -EADDRINUSE && in->in.sin_port == 0 && ++tries < 64);
	return rc;
}

int bind(int fd, const struct sockaddr *a, socklen_t len)
{
	struct pl_sock *s = pl_get(fd);
	union pl_sa in;
	int rc;
	pl_resolve();
	if (!s && !(s = pl_migrate(fd, a, len)))
		return pl_r.bind(fd, a, len);
	rc = pl_sa_in(a, len, s->domain, &in);
	if (rc == 0 && s->state != PL_NEW)
		rc = -EINVAL;
	if (rc == 0)
		rc = pl_bind_port(s, &in);
	if (rc == 0) {
		s->local = in;
		s->state = PL_BOUND;
	}
	pl_put(s);
	return rc < 0 ? PL_ERR(-rc) : 0;
}

static int pl_not_stream(struct pl_sock *s)
{
	if (s->type == SOCK_STREAM)
		return 0;
	pl_put(s);
	errno = EOPNOTSUPP;
	return 1;
}

int pl_arm_accept(struct pl_sock *s)
{
	struct ipk_svc_sqe *e = s->so ? ipk_svc_get_sqe(s->so) : NULL;
	if (!e)
		return -EAGAIN;
	ipk_svc_prep_accept(e, 128, 256);
	ipk_svc_sqe_set_data(e, pl_ud(PL_OP_ACCEPT, 0, 0));
	s->acc_armed = 1;
	return ipk_svc_submit(s->so) < 0 ? -ENETDOWN : 0;
}

int listen(int fd, int backlog)
{
	struct pl_sock *s = pl_get(fd);
	struct ipk_svc_sqe e;
	int rc = 0;
	if (!s)
		return pl_r.listen(fd, backlog);
	if (pl_not_stream(s))
		return -1;
	if (s->state == PL_LISTEN)
		goto out; /* Linux: a second listen only changes the backlog */
	if (s->state == PL_NEW) {
		union pl_sa any;
		pl_sa_any(&any, s->domain);
		rc = pl_bind_port(s, &any);
		if (rc == 0) {
			s->local = any;
			s->state = PL_BOUND;
		}
	}
	if (rc == 0 && s->state != PL_BOUND)
		rc = -EINVAL;
	if (rc == 0) {
		memset(&e, 0, sizeof e);
		ipk_svc_prep_listen(&e, backlog > 0 ? (uint32_t)backlog : 1);
		rc = pl_sync_op(s, &e);
	}
	if (rc == 0) {
		pthread_mutex_lock(&s->mu);
		s->state = PL_LISTEN;
		s->backlog = backlog;
		/* the ACCEPT is armed when the program waits (pl_listen_want): a
		 * process that never accepts (nginx's master) takes no connection
		 * from the children it shares the port with */
		pl_levels(s, 0);
		pthread_mutex_unlock(&s->mu);
		pl_exec_note(s); /* exec keeps it unless FD_CLOEXEC (p_exec.c) */
		pl_mirror_listen(s); /* the kernel's loopback reaches it too */
	}
out:
	pl_put(s);
	return rc < 0 ? PL_ERR(-rc) : 0;
}

/* ------------------------------------------------------------ accept */

static struct pl_acc *pl_acc_pop(struct pl_sock *s, int *err)
{
	struct pl_acc *a = NULL;
	pthread_mutex_lock(&s->mu);
	*err = 0;
	if (!s->so || s->state != PL_LISTEN)
		*err = -EINVAL;
	else if ((a = s->acc_h) != NULL) {
		s->acc_h = a->next;
		if (!s->acc_h)
			s->acc_t = NULL;
		s->acc_n--;
	} else if (!s->acc_armed) {
		*err = pl_arm_accept(s);
	}
	if (!*err && !a)
		*err = -EAGAIN;
	pl_levels(s, 0);
	pthread_mutex_unlock(&s->mu);
	return a;
}

static int pl_accept_new(struct pl_sock *l, struct pl_acc *a, int flags, struct sockaddr *addr,
                         socklen_t *len)
{
	struct pl_sock *s;
	int fd = pl_make(a->so, flags, SOCK_STREAM, l->domain, &s);
	if (fd < 0) {
		ipk_svc_close(a->so);
		free(a);
		return fd;
	}
	pthread_mutex_lock(&s->mu);
	s->state = PL_CONNECTED;
	s->peer = a->peer;
	s->local = l->local;
	{
		/* the address the peer connected to (the listener's may be 0.0.0.0
		 * or ::); an older ipkitd does not say: the listener's, as before */
		struct ipk_svc_addr me;
		if (ipk_svc_sock_local(a->so, &me) == 0)
			pl_sa_from_svc(&s->local, l->domain, &me);
	}
	s->nodelay = l->nodelay;
	s->keepalive = l->keepalive;
	pl_post_recv(s);
	pl_levels(s, 0);
	pthread_mutex_unlock(&s->mu);
	pl_sa_out(addr, len, &a->peer);
	free(a);
	PL_COUNT(accepts, 1);
	pl_put(s);
	return fd;
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	struct pl_sock *s = pl_get(fd);
	int64_t dl;
	int rc;
	if (!s)
		return pl_r.accept4(fd, addr, len, flags);
	if (pl_not_stream(s))
		return -1;
	if (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) {
		pl_put(s);
		return PL_ERR(EINVAL);
	}
	dl = pl_deadline(&s->rcvtimeo);
	pl_listen_want(s);
	for (;;) {
		struct pl_acc *a = pl_acc_pop(s, &rc);
		if (a) {
			rc = pl_accept_new(s, a, flags, addr, len);
			break;
		}
		/* the kernel's loopback, once its watcher saw a connection there (no
		 * system call for a program that only gets ipkitd's) */
		if (rc == -EAGAIN && __atomic_load_n(&s->kpend, __ATOMIC_ACQUIRE)) {
			rc = pl_mirror_accept(s, addr, len, flags);
			if (rc >= 0)
				break;
		}
		if (rc != -EAGAIN || s->nonblock)
			break;
		rc = pl_wait_until(s, 0, dl);
		if (rc < 0)
			break;
	}
	pl_put(s);
	return rc < 0 ? PL_ERR(-rc) : rc;
}

int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	pl_resolve();
	if (!pl_is_ipk(fd))
		return pl_r.accept(fd, addr, len);
	return accept4(fd, addr, len, 0);
}

/* ------------------------------------------------------------ connect */

static int pl_connect_start(struct pl_sock *s, const union pl_sa *in)
{
	struct ipk_svc_sqe *e;
	switch (s->state) {
	case PL_CONNECTING: return -EALREADY;
	case PL_CONNECTED:
		/* Linux: the first connect() after a non-blocking connect completed
		 * reports success, later ones EISCONN */
		if (s->conn_unseen) {
			s->conn_unseen = 0;
			return 0;
		}
		return -EISCONN;
	case PL_LISTEN: return -EINVAL;
	case PL_FAILED: {
		/* a failed non-blocking connect reports its error once (Linux) */
		int err = s->so_error ? s->so_error : ECONNABORTED;
		s->so_error = 0;
		s->state = PL_NEW;
		return -err;
	}
	default: break;
	}
	e = s->so ? ipk_svc_get_sqe(s->so) : NULL;
	if (!e)
		return -EAGAIN;
	ipk_svc_prep_connect(e, &(struct ipk_svc_addr){0});
	pl_sa_to_svc(&e->addr, in);
	ipk_svc_sqe_set_data(e, pl_ud(PL_OP_CONNECT, 0, 0));
	if (ipk_svc_submit(s->so) < 0)
		return -ENETDOWN;
	s->state = PL_CONNECTING;
	s->peer = *in;
	PL_COUNT(connects, 1);
	pl_levels(s, 0);
	return -EINPROGRESS;
}

/* ------------------------------------------------------------ loopback
 *
 * A connection to a loopback address that no ipkit application listens on goes
 * to the kernel: a program under the shim reaches the kernel's local servers (a
 * database, a backend nginx proxies to, a local resolver over TCP) as it would
 * without the shim, while ipkit applications still reach each other through
 * ipkitd. ipkitd decides a loopback CONNECT at once (svc/d_loop.c), so connect()
 * waits for that answer even on a non-blocking socket (one round trip to ipkitd);
 * a refusal turns the socket into a kernel one under the same number (options
 * the program set carried over) and the kernel connects it. Only a socket that
 * is new (not bound) and named by one number; the epoll sets it is in get the
 * kernel socket instead (pl_ep_handover: nginx adds an upstream socket to its
 * set before connect). */

static int pl_loop_candidate(const struct pl_sock *s, const union pl_sa *in)
{
	return s->type == SOCK_STREAM && s->state == PL_NEW && s->nfds == 1 && pl_route_all() &&
	       pl_loop_kernel() && pl_sa_loopback(in);
}

/* s (fd's socket, connect refused by ipkitd) as a kernel socket under fd; the
 * options set through the shim carried over. 0, or -1 (stays as it is). */
static int pl_to_kernel(struct pl_sock *s, int fd)
{
	int fdfl = pl_r.fcntl(fd, F_GETFD), one = 1, last, tcp = s->type == SOCK_STREAM;
	int k = pl_r.socket(s->domain, s->type | (s->nonblock ? SOCK_NONBLOCK : 0) | SOCK_CLOEXEC, 0);
	struct pl_sock *t;
	if (k < 0 || fdfl < 0) {
		if (k >= 0)
			pl_r.close(k);
		return -1;
	}
	if (s->domain == AF_INET6 && s->v6only)
		pl_r.setsockopt(k, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	if (s->reuseaddr)
		pl_r.setsockopt(k, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (s->reuseport)
		pl_r.setsockopt(k, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
	if (tcp && s->keepalive)
		pl_r.setsockopt(k, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
	if (tcp && s->nodelay)
		pl_r.setsockopt(k, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (s->linger.l_onoff)
		pl_r.setsockopt(k, SOL_SOCKET, SO_LINGER, &s->linger, sizeof s->linger);
	if (s->rcvtimeo.tv_sec || s->rcvtimeo.tv_usec)
		pl_r.setsockopt(k, SOL_SOCKET, SO_RCVTIMEO, &s->rcvtimeo, sizeof s->rcvtimeo);
	if (s->sndtimeo.tv_sec || s->sndtimeo.tv_usec)
		pl_r.setsockopt(k, SOL_SOCKET, SO_SNDTIMEO, &s->sndtimeo, sizeof s->sndtimeo);
	if (tcp && s->kidle != 7200)
		pl_r.setsockopt(k, IPPROTO_TCP, TCP_KEEPIDLE, &s->kidle, sizeof s->kidle);
	if (tcp && s->kintvl != 75)
		pl_r.setsockopt(k, IPPROTO_TCP, TCP_KEEPINTVL, &s->kintvl, sizeof s->kintvl);
	if (tcp && s->kcnt != 9)
		pl_r.setsockopt(k, IPPROTO_TCP, TCP_KEEPCNT, &s->kcnt, sizeof s->kcnt);
	/* the number names the kernel socket from here on: no ipkit call sees it */
	t = pl_tbl_take(fd, &last);
	if (pl_r.dup3(k, fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0) {
		if (t)
			pl_tbl_set(fd, t), pl_put(t);
		pl_r.close(k);
		return -1;
	}
	pl_r.close(k);
	if (__atomic_load_n(&s->nsets, __ATOMIC_RELAXED))
		pl_ep_handover(s, fd); /* nginx adds an upstream socket before connect */
	if (t) {
		pl_sock_release(t); /* its ipkitd socket goes */
		pl_put(t);
	}
	PL_COUNT(sock_kernel, 1);
	PL_COUNT(loop_kernel, 1);
	return 0;
}

/* UDP: does a kernel socket hold this loopback address and port? A probe bind
 * without SO_REUSEADDR/SO_REUSEPORT fails with EADDRINUSE when one does (bound
 * there, or to the wildcard). */
static int pl_kernel_holds_udp(const union pl_sa *to)
{
	union pl_sa a = *to;
	int k, rc;
	if (pl_sa_mapped(&a)) { /* ::ffff:127.x: the IPv4 socket's port */
		uint16_t port = a.in6.sin6_port;
		uint32_t ip;
		memcpy(&ip, &a.in6.sin6_addr.s6_addr[12], 4);
		memset(&a, 0, sizeof a);
		a.in.sin_family = AF_INET;
		a.in.sin_addr.s_addr = ip;
		a.in.sin_port = port;
	}
	k = pl_r.socket(a.sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (k < 0)
		return 0;
	rc = pl_r.bind(k, &a.sa, pl_sa_len(&a));
	rc = rc < 0 && errno == EADDRINUSE;
	pl_r.close(k);
	return rc;
}

/* A UDP socket about to talk to a loopback address (connect, or its first
 * sendto) that a kernel socket holds and no ipkit application could: the
 * socket becomes a kernel one under fd (1: the caller makes the kernel call),
 * so a program under the shim reaches a local resolver, statsd or syslog
 * daemon on the kernel. 0: it stays ipkitd's. Only a new, unbound socket named
 * by one number (its epoll sets get the kernel socket, as for TCP). */
int pl_udp_loop_kernel(struct pl_sock *s, int fd, const union pl_sa *to)
{
	if (s->type != SOCK_DGRAM || s->state != PL_NEW || s->nfds != 1 || !pl_route_all() ||
	    !pl_loop_kernel() || !pl_sa_loopback(to) || !pl_kernel_holds_udp(to))
		return 0;
	return pl_to_kernel(s, fd) == 0;
}

/* connect() of a loopback candidate: ipkitd's answer first. Returns what connect
 * returns, or 1: the kernel's connect(2) is to be called (the socket is a kernel
 * one now). */
static int pl_connect_loop(struct pl_sock *s, int fd, const union pl_sa *in)
{
	int rc, st, err;
	pthread_mutex_lock(&s->mu);
	rc = pl_connect_start(s, in);
	pthread_mutex_unlock(&s->mu);
	if (rc != -EINPROGRESS)
		return rc < 0 ? PL_ERR(-rc) : 0;
	for (int i = 0; i < 200; i++) { /* ipkitd answers in its next pass: 2 s bound */
		pthread_mutex_lock(&s->mu);
		st = s->state;
		pthread_mutex_unlock(&s->mu);
		if (st != PL_CONNECTING)
			break;
		if (pl_wait(s, 1, 10) == -EINTR)
			continue; /* the program's handler ran; the answer still comes */
	}
	pthread_mutex_lock(&s->mu);
	st = s->state;
	err = s->so_error;
	if (st == PL_FAILED && err == ECONNREFUSED && s->conn_noroom)
		err = 0; /* ipkit listeners, full: no kernel (ours answer there too) */
	if (st == PL_CONNECTED && !s->nonblock)
		s->conn_unseen = 0;
	if (st == PL_FAILED && err == ECONNREFUSED) {
		s->state = PL_NEW; /* not reported: the kernel's connect answers */
		s->so_error = 0;
	}
	pthread_mutex_unlock(&s->mu);
	if (st == PL_FAILED && err == ECONNREFUSED && pl_to_kernel(s, fd) == 0)
		return 1;
	if (st == PL_CONNECTED)
		return s->nonblock ? PL_ERR(EINPROGRESS) : 0; /* as before for a non-blocking one */
	if (st == PL_CONNECTING)
		return s->nonblock ? PL_ERR(EINPROGRESS) : PL_ERR(ETIMEDOUT);
	pthread_mutex_lock(&s->mu);
	rc = pl_connect_start(s, in); /* takes the error */
	pthread_mutex_unlock(&s->mu);
	return rc < 0 ? PL_ERR(-rc) : 0;
}

int connect(int fd, const struct sockaddr *a, socklen_t len)
{
	struct pl_sock *s = pl_get(fd);
	union pl_sa in;
	int64_t dl;
	int rc;
	pl_resolve();
	if (!s && !(s = pl_migrate(fd, a, len)))
		return pl_r.connect(fd, a, len);
	if (s->type == SOCK_DGRAM) {
		if (pl_sa_in(a, len, s->domain, &in) == 0 && pl_udp_loop_kernel(s, fd, &in)) {
			pl_put(s);
			return pl_r.connect(fd, a, len);
		}
		rc = pl_udp_connect(s, a, len);
		pl_put(s);
		return rc < 0 ? PL_ERR(-rc) : 0;
	}
	rc = pl_sa_in(a, len, s->domain, &in);
	if (rc == 0 && pl_loop_candidate(s, &in)) {
		rc = pl_connect_loop(s, fd, &in);
		pl_put(s);
		return rc == 1 ? pl_r.connect(fd, a, len) : rc;
	}
	pthread_mutex_lock(&s->mu);
	if (rc == 0)
		rc = pl_connect_start(s, &in);
	pthread_mutex_unlock(&s->mu);
	dl = pl_deadline(&s->sndtimeo);
	while (rc == -EINPROGRESS && !s->nonblock) {
		int w = pl_wait_until(s, 1, dl);
		pthread_mutex_lock(&s->mu);
		if (s->state == PL_CONNECTED) {
			rc = 0;
			s->conn_unseen = 0;
		}
		else if (s->state == PL_FAILED)
			rc = pl_connect_start(s, &in); /* takes the error */
		else if (w < 0)
			rc = w == -EAGAIN ? -EINPROGRESS : w;
		pthread_mutex_unlock(&s->mu);
		if (w == -EAGAIN && rc == -EINPROGRESS)
			break; /* SO_SNDTIMEO: Linux says EINPROGRESS */
	}
	pl_put(s);
	return rc < 0 ? PL_ERR(-rc) : 0;
}
