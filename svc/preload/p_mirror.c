/*
 * libipkit-preload: the kernel's loopback reaches a listener under the shim
 * (svc/preload/README.md, "Loopback").
 *
 * A listener under the shim listens on ipkitd, so a program on the kernel's
 * sockets (a health check, `curl localhost`, a local client that is not under
 * the shim) could not reach it over 127.0.0.1 or ::1, where on Linux it would.
 * So a TCP listener bound to the wildcard or to a loopback address also gets a
 * kernel listening socket on the loopback address of its port (127.0.0.1, and
 * ::1 for an AF_INET6 one; hidden numbers, non-blocking, SO_REUSEADDR and
 * SO_REUSEPORT so the processes of a fork family can hold it as they hold the
 * ipkitd port). One thread per process (made with the first) sleeps in poll()
 * on those the program has not yet drained; a pending connection sets the
 * listener readable (an edge for EPOLLET) and takes that socket out of the poll
 * until accept() has drained it (EAGAIN). accept() takes ipkitd's connections
 * first, then the kernel's: those are plain kernel sockets, as on Linux.
 * Only the loopback address: the kernel side never accepts from the network,
 * which is ipkitd's. A port the kernel will not give (a kernel program holds
 * it) simply has no such socket.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "preload.h"

#define PL_MIRRORS 256 /* listeners watched at once (more: not watched) */

static pthread_mutex_t m_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pl_sock *m_list; /* listeners with kernel sockets (a reference each) */
static int m_wake = -1;        /* eventfd: the list or a drained socket changed */
static pid_t m_pid;            /* the process whose thread watches */

static void pl_mirror_kick(void)
{
	uint64_t one = 1;
	if (m_wake >= 0 && pl_r.write(m_wake, &one, sizeof one) < 0)
		return; /* a full counter: it is awake anyway */
}

static void *pl_mirror_run(void *arg)
{
	sigset_t all;
	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL); /* the program's handlers run elsewhere */
	for (;;) {
		struct pollfd p[1 + 2 * PL_MIRRORS];
		struct pl_sock *who[1 + 2 * PL_MIRRORS], *s;
		int n = 1;
		p[0].fd = m_wake;
		p[0].events = POLLIN;
		pthread_mutex_lock(&m_mu);
		for (s = m_list; s && n < 1 + 2 * PL_MIRRORS - 1; s = s->mnext) {
			if (__atomic_load_n(&s->kpend, __ATOMIC_ACQUIRE))
				continue; /* readable already: accept drains it first */
			__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
			for (int i = 0; i < 2; i++) {
				if (s->kfd[i] < 0)
					continue;
				p[n].fd = s->kfd[i];
				p[n].events = POLLIN;
				who[n++] = s; /* a socket's numbers are next to each other */
			}
		}
		pthread_mutex_unlock(&m_mu);
		for (int i = 0; i < n; i++)
			p[i].revents = 0;
		if (pl_r.poll(p, (nfds_t)n, -1) < 0 && errno != EINTR) /* not the shim's: no waiter */
			continue;
		if (p[0].revents) {
			uint64_t v;
			if (pl_r.read(m_wake, &v, sizeof v) < 0)
				v = 0;
		}
		for (int i = 1; i < n; i++) {
			s = who[i];
			if ((p[i].revents & (POLLIN | POLLERR | POLLHUP)) &&
			    !__atomic_load_n(&s->kpend, __ATOMIC_ACQUIRE)) {
				pthread_mutex_lock(&s->mu);
				__atomic_store_n(&s->kpend, 1, __ATOMIC_RELEASE);
				pl_levels(s, 1); /* a new arrival: an edge for EPOLLET too */
				pthread_mutex_unlock(&s->mu);
			}
		}
		for (int i = 1; i < n; i++) /* one put per socket: after its last fd */
			if (i == n - 1 || who[i + 1] != who[i])
				pl_put(who[i]);
	}
	return NULL;
}

/* Under m_mu: the watching thread of this process exists (after fork a child
 * has none). 0, or -1 (none could be made: the kernel side stays unwatched). */
static int pl_mirror_thread(void)
{
	pthread_t t;
	pthread_attr_t a;
	int rc;
	if (m_pid == getpid() && m_wake >= 0)
		return 0;
	if (m_wake >= 0)
		pl_r.close(m_wake); /* the parent's: its counter is shared */
	m_wake = pl_hide_fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	if (m_wake < 0)
		return -1;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 1u << 20); /* its poll array is on the stack */
	rc = pthread_create(&t, &a, pl_mirror_run, NULL);
	pthread_attr_destroy(&a);
	if (rc != 0)
		return -1;
	m_pid = getpid();
	return 0;
}

/* A kernel listening socket on the loopback address of the family, port_be. */
static int pl_mirror_one(int domain, uint16_t port_be, int backlog)
{
	int k = pl_r.socket(domain, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
	union pl_sa a;
	if (k < 0)
		return -1;
	memset(&a, 0, sizeof a);
	if (domain == AF_INET) {
		a.in.sin_family = AF_INET;
		a.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a.in.sin_port = port_be;
	} else {
		a.in6.sin6_family = AF_INET6;
		a.in6.sin6_addr = in6addr_loopback;
		a.in6.sin6_port = port_be;
		pl_r.setsockopt(k, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	}
	pl_r.setsockopt(k, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	pl_r.setsockopt(k, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
	if (pl_r.bind(k, &a.sa, pl_sa_len(&a)) < 0 || pl_r.listen(k, backlog > 0 ? backlog : 1) < 0) {
		pl_r.close(k);
		return -1;
	}
	return pl_hide_fd(k);
}

void pl_mirror_listen(struct pl_sock *s)
{
	const union pl_sa *l = &s->local;
	int v4 = 0, v6 = 0;
	uint16_t port = l->in.sin_port;
	if (s->type != SOCK_STREAM || port == 0 || s->kfd[0] >= 0 || s->kfd[1] >= 0 ||
	    !pl_loop_kernel())
		return;
	if (l->sa.sa_family == AF_INET) {
		v4 = l->in.sin_addr.s_addr == htonl(INADDR_ANY) || pl_sa_loopback(l);
	} else if (l->sa.sa_family == AF_INET6) {
		int any = !memcmp(&l->in6.sin6_addr, &in6addr_any, sizeof in6addr_any);
		int lo4 = pl_sa_mapped(l) && pl_sa_loopback(l);
		v6 = any || (!pl_sa_mapped(l) && pl_sa_loopback(l));
		v4 = (any && !s->v6only) || lo4;
	}
	if (v4)
		s->kfd[0] = pl_mirror_one(AF_INET, port, s->backlog);
	if (v6)
		s->kfd[1] = pl_mirror_one(AF_INET6, port, s->backlog);
	if (s->kfd[0] < 0 && s->kfd[1] < 0)
		return;
	pthread_mutex_lock(&m_mu);
	if (pl_mirror_thread() == 0) {
		__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
		s->mnext = m_list;
		m_list = s;
		s->mlisted = 1;
		pl_mirror_kick();
	}
	pthread_mutex_unlock(&m_mu);
}

int pl_mirror_accept(struct pl_sock *s, struct sockaddr *addr, socklen_t *len, int flags)
{
	int fd = -1;
	for (int i = 0; i < 2 && fd < 0; i++) {
		socklen_t l = len ? *len : 0;
		if (s->kfd[i] < 0)
			continue;
		fd = pl_r.accept4(s->kfd[i], addr, len ? &l : NULL,
		                  flags & (SOCK_NONBLOCK | SOCK_CLOEXEC));
		if (fd >= 0 && len)
			*len = l;
	}
	if (fd >= 0) {
		PL_COUNT(sock_kernel, 1);
		return fd;
	}
	/* drained: readable again only by ipkitd's, and watched again */
	pthread_mutex_lock(&s->mu);
	__atomic_store_n(&s->kpend, 0, __ATOMIC_RELEASE);
	pl_levels(s, 0);
	pthread_mutex_unlock(&s->mu);
	pthread_mutex_lock(&m_mu);
	if (s->mlisted && pl_mirror_thread() == 0)
		pl_mirror_kick();
	pthread_mutex_unlock(&m_mu);
	return -EAGAIN;
}

void pl_mirror_drop(struct pl_sock *s)
{
	struct pl_sock **pp;
	int listed = 0;
	pthread_mutex_lock(&m_mu);
	for (pp = &m_list; *pp; pp = &(*pp)->mnext)
		if (*pp == s) {
			*pp = s->mnext;
			listed = 1;
			break;
		}
	s->mlisted = 0;
	s->mnext = NULL;
	pl_mirror_kick();
	pthread_mutex_unlock(&m_mu);
	for (int i = 0; i < 2; i++) {
		if (s->kfd[i] >= 0)
			pl_r.close(s->kfd[i]); /* the watcher holds s, not the number */
		s->kfd[i] = -1;
	}
	if (listed)
		pl_put(s);
}

/* fork child: the list holds the parent's sockets, some forgotten here; the
 * kept listeners (list) keep their kernel sockets, shared with the parent as
 * the listening socket is on Linux. The thread is made on first need. */
void pl_mirror_fork_child(struct pl_sock *list)
{
	struct pl_sock *s;
	pthread_mutex_init(&m_mu, NULL);
	m_list = NULL;
	m_pid = 0; /* the parent's thread is not here */
	for (s = list; s; s = s->lnext) {
		if (s->state != PL_LISTEN || (s->kfd[0] < 0 && s->kfd[1] < 0)) {
			s->mlisted = 0;
			continue;
		}
		__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
		s->kpend = 0;
		s->mnext = m_list;
		m_list = s;
		s->mlisted = 1;
	}
	if (m_list && pl_mirror_thread() == 0)
		pl_mirror_kick();
}
