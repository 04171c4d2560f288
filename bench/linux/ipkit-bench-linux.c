/*
 * ipkit-bench-linux: the Linux twin of ipkit-bench. The same options and the same
 * client/server logic (bench_flow.c), on kernel sockets with one epoll per thread.
 *
 *   ipkit-bench-linux -p 10000                      # server
 *   ipkit-bench-linux -s 10.0.0.2 -p 10000 -c 32    # client
 *   ipkit-bench-linux -6 -p 10000                   # server on ::
 *   ipkit-bench-linux -s fd00::2 -p 10000 -c 32     # client over IPv6
 *
 * Blocking by default (epoll_wait sleeps up to 1 ms; with --spin-us N it polls for N us
 * after the last traffic first); --busy-poll spins with timeout 0 and asks the kernel for
 * SO_BUSY_POLL on every socket (ignored where not allowed).
 * Threads (-T) share nothing: each has its own epoll, its share of the client's
 * connections or an SO_REUSEPORT listener; the main thread only prints.
 */
#include "../bench_flow.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LX_BUF (64 * 1024)
#define LX_EVENTS 256
#define LX_KICK_ROUNDS 64 /* bound on send rounds per kick, so one flow cannot starve others */
#define LX_BUSY_POLL_US 50

struct lx_conn {
	int fd;
	int connecting;
	int want_out;                /* EPOLLOUT armed */
	struct bench_flow *f;
	struct bench_hold hold;      /* server: echo bytes the socket did not take yet */
};

struct lx_thread {
	pthread_t tid;
	uint32_t id, first, count;   /* client: connections [first, first + count) */
	struct bench_worker w;
	struct bench_counters pub;   /* w.c published for the printing thread */
	struct lx_conn *conns;       /* client: count entries */
	struct lx_conn listener;     /* server */
	int ep;
	uint8_t buf[LX_BUF];
	int rc;
	int ready;                   /* sockets set up (or failed): rc is final */
};

static int lx_stop; /* set by the printing thread (signal) or a failed worker */

static uint64_t lx_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void lx_publish(struct lx_thread *t)
{
	bench_counters_publish(&t->pub, &t->w.c);
}

static void lx_collect(struct lx_thread *ts, uint32_t n, struct bench_counters *sum)
{
	uint32_t k;
	memset(sum, 0, sizeof(*sum));
	for (k = 0; k < n; k++)
		bench_counters_add_published(sum, &ts[k].pub);
}

/* The server's address (server 1) or our bind address (server 0) in o's family;
 * returns its length. */
static socklen_t lx_sockaddr(struct sockaddr_storage *ss, const struct bench_opts *o,
                             int server, uint16_t port)
{
	memset(ss, 0, sizeof(*ss));
	if (o->ip6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, server ? o->server_ip6 : o->ip6_bind, 16);
		s6->sin6_scope_id = server ? o->server_scope : 0;
		s6->sin6_port = htons(port);
		return sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		s4->sin_family = AF_INET;
		s4->sin_addr.s_addr = server ? o->server_ip4_be : o->ip4_be;
		s4->sin_port = htons(port);
		return sizeof(*s4);
	}
}

/* The client binds a source address only when --ip gave one. */
static int lx_has_src(const struct bench_opts *o)
{
	static const uint8_t any[16];

	return o->ip6 ? memcmp(o->ip6_bind, any, 16) != 0 : o->ip4_be != 0;
}

static int lx_epoll_set(struct lx_thread *t, struct lx_conn *lc, int op, uint32_t events)
{
	struct epoll_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.events = events;
	ev.data.ptr = lc;
	lc->want_out = (events & EPOLLOUT) != 0;
	return epoll_ctl(t->ep, op, lc->fd, &ev);
}

static int lx_socket(const struct bench_opts *o)
{
	int one = 1, us = LX_BUSY_POLL_US;
	int fd = socket(o->ip6 ? AF_INET6 : AF_INET,
	                (o->proto == 17 ? SOCK_DGRAM : SOCK_STREAM) | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	if (o->proto == 6)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (o->busy_poll)
		(void)setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &us, sizeof(us));
	return fd;
}

/* Events a connection waits for: burst senders always want EPOLLOUT; echo
 * senders only while the socket holds back bytes. */
static uint32_t lx_events(const struct lx_thread *t, const struct lx_conn *lc, int want_out)
{
	(void)lc;
	if (t->w.o->client && t->w.o->mode == BENCH_BURST)
		return EPOLLIN | EPOLLOUT;
	return EPOLLIN | (want_out ? EPOLLOUT : 0u);
}

static void lx_close(struct lx_thread *t, struct lx_conn *lc, int unexpected)
{
	if (lc->fd < 0)
		return;
	epoll_ctl(t->ep, EPOLL_CTL_DEL, lc->fd, NULL);
	close(lc->fd);
	lc->fd = -1;
	if (lc->f && lc->f->open) {
		lc->f->open = 0;
		t->w.c.conns--;
	}
	if (unexpected && t->w.o->client && !t->w.stopping)
		t->w.c.closes++;
}

/* ------------------------------------------------------------------ client */

static void lx_kick(struct bench_worker *w, struct bench_flow *f, void *arg)
{
	struct lx_thread *t = (struct lx_thread *)arg;
	struct lx_conn *lc = (struct lx_conn *)f->handle;
	int udp = w->o->proto == 17, round;
	for (round = 0; round < LX_KICK_ROUNDS; round++) {
		uint32_t n;
		ssize_t s;
		if (!bench_flow_tx_pending(w, f) &&
		    (w->o->mode != BENCH_BURST || !bench_worker_admit(w, f, lx_now())))
			break;
		n = bench_flow_tx_fill(w, f, t->buf, LX_BUF, udp);
		s = send(lc->fd, t->buf, n, MSG_NOSIGNAL);
		if (s < 0) {
			if (errno == EAGAIN || errno == ENOBUFS) {
				if (!lc->want_out)
					lx_epoll_set(t, lc, EPOLL_CTL_MOD, lx_events(t, lc, 1));
			} else {
				lx_close(t, lc, 1);
			}
			return;
		}
		bench_flow_tx_done(w, f, (uint32_t)s);
	}
	if (lc->want_out && !bench_flow_tx_pending(w, f) && w->o->mode != BENCH_BURST)
		lx_epoll_set(t, lc, EPOLL_CTL_MOD, lx_events(t, lc, 0));
}

static int lx_client_open(struct lx_thread *t)
{
	const struct bench_opts *o = t->w.o;
	struct sockaddr_storage srv, src;
	socklen_t srv_len = lx_sockaddr(&srv, o, 1, o->port), src_len = lx_sockaddr(&src, o, 0, 0);
	uint32_t i;
	for (i = 0; i < t->count; i++) {
		struct lx_conn *lc = &t->conns[i];
		lc->f = &t->w.flows[i];
		lc->f->handle = lc;
		lc->fd = lx_socket(o);
		if (lc->fd < 0 || (lx_has_src(o) && bind(lc->fd, (struct sockaddr *)&src, src_len) < 0))
			return -1;
		if (connect(lc->fd, (struct sockaddr *)&srv, srv_len) < 0 && errno != EINPROGRESS) {
			t->w.c.connect_fails++;
			close(lc->fd);
			lc->fd = -1;
			continue;
		}
		lc->connecting = 1;
		if (lx_epoll_set(t, lc, EPOLL_CTL_ADD, EPOLLIN | EPOLLOUT) < 0)
			return -1;
	}
	return 0;
}

static void lx_connected(struct lx_thread *t, struct lx_conn *lc, uint64_t now)
{
	int err = 0;
	socklen_t len = sizeof(err);
	lc->connecting = 0;
	if (getsockopt(lc->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
		t->w.c.connect_fails++;
		lx_close(t, lc, 0);
		return;
	}
	lc->f->open = 1;
	t->w.c.conns++;
	lx_epoll_set(t, lc, EPOLL_CTL_MOD, lx_events(t, lc, 0));
	bench_worker_admit(&t->w, lc->f, now);
	lx_kick(&t->w, lc->f, t);
}

static void lx_client_rx(struct lx_thread *t, struct lx_conn *lc, uint64_t now)
{
	int udp = t->w.o->proto == 17, i;
	for (i = 0; i < LX_KICK_ROUNDS && lc->fd >= 0; i++) {
		ssize_t r = recv(lc->fd, t->buf, LX_BUF, 0);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (r < 0 || (r == 0 && !udp)) {
			lx_close(t, lc, 1);
			return;
		}
		if (udp)
			bench_flow_rx_datagram(&t->w, lc->f, t->buf, (uint32_t)r, now);
		else
			bench_flow_rx(&t->w, lc->f, t->buf, (uint32_t)r, now);
	}
	if (t->w.o->mode == BENCH_PINGPONG && bench_worker_admit(&t->w, lc->f, now))
		lx_kick(&t->w, lc->f, t);
}

static void lx_client_event(struct lx_thread *t, struct lx_conn *lc, uint32_t ev, uint64_t now)
{
	if (lc->connecting) {
		if (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			lx_connected(t, lc, now);
		return;
	}
	if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))
		lx_client_rx(t, lc, now);
	if (lc->fd >= 0 && (ev & EPOLLOUT))
		lx_kick(&t->w, lc->f, t);
}

/* ------------------------------------------------------------------ server */

static int lx_listen(struct lx_thread *t)
{
	const struct bench_opts *o = t->w.o;
	struct sockaddr_storage sa;
	socklen_t sa_len = lx_sockaddr(&sa, o, 0, o->port);
	int one = 1;
	struct lx_conn *l = &t->listener;
	l->fd = lx_socket(o);
	if (l->fd < 0)
		return -1;
	setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(l->fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (bind(l->fd, (struct sockaddr *)&sa, sa_len) < 0 ||
	    (o->proto == 6 && listen(l->fd, 1024) < 0))
		return -1;
	return lx_epoll_set(t, l, EPOLL_CTL_ADD, EPOLLIN);
}

static void lx_accept(struct lx_thread *t)
{
	int i;
	for (i = 0; i < LX_KICK_ROUNDS; i++) {
		struct lx_conn *lc;
		int fd = accept4(t->listener.fd, NULL, NULL, SOCK_NONBLOCK);
		int one = 1, us = LX_BUSY_POLL_US;
		if (fd < 0)
			return;
		lc = (struct lx_conn *)calloc(1, sizeof(*lc));
		if (!lc || !(lc->f = bench_flow_new(&t->w))) {
			free(lc);
			close(fd);
			continue;
		}
		lc->fd = fd;
		lc->f->handle = lc;
		lc->f->open = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (t->w.o->busy_poll)
			(void)setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &us, sizeof(us));
		t->w.c.conns++;
		lx_epoll_set(t, lc, EPOLL_CTL_ADD, EPOLLIN);
	}
}

static void lx_conn_free(struct lx_thread *t, struct lx_conn *lc)
{
	lx_close(t, lc, 0);
	bench_flow_free(lc->f);
	bench_hold_free(&lc->hold);
	free(lc);
}

/* Write held-back echo bytes; 1 when all are out, 0 not yet, -1 connection gone. */
static int lx_flush(struct lx_thread *t, struct lx_conn *lc)
{
	ssize_t s;
	if (!lc->hold.len)
		return 1;
	s = send(lc->fd, lc->hold.p, lc->hold.len, MSG_NOSIGNAL);
	if (s < 0)
		return errno == EAGAIN ? 0 : -1;
	t->w.c.tx_bytes += (uint64_t)s;
	bench_hold_drop(&lc->hold, (uint32_t)s);
	return lc->hold.len == 0;
}

/* Echo n bytes; what the socket refuses waits in hold and reading pauses (EPOLLOUT
 * only) until it is out, so a client that does not read is slowed by TCP, not by us
 * buffering without bound. */
static int lx_echo(struct lx_thread *t, struct lx_conn *lc, uint8_t *data, uint32_t n)
{
	ssize_t s = 0;
	bench_flow_maybe_corrupt(&t->w, data, n);
	if (!lc->hold.len) {
		s = send(lc->fd, data, n, MSG_NOSIGNAL);
		if (s < 0 && errno != EAGAIN)
			return -1;
		if (s < 0)
			s = 0;
		t->w.c.tx_bytes += (uint64_t)s;
	}
	if ((uint32_t)s == n)
		return 0;
	if (bench_hold_add(&lc->hold, data + s, n - (uint32_t)s) < 0)
		return -1;
	return lx_epoll_set(t, lc, EPOLL_CTL_MOD, EPOLLOUT);
}

static void lx_server_stream(struct lx_thread *t, struct lx_conn *lc, uint32_t ev)
{
	int i;
	if (ev & EPOLLOUT) {
		int r = lx_flush(t, lc);
		if (r < 0)
			goto gone;
		if (r == 0)
			return;
		lx_epoll_set(t, lc, EPOLL_CTL_MOD, EPOLLIN);
	}
	for (i = 0; i < LX_KICK_ROUNDS && !lc->hold.len; i++) {
		ssize_t r = recv(lc->fd, t->buf, LX_BUF, 0);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (r <= 0)
			goto gone;
		bench_flow_server_rx(&t->w, lc->f, (uint32_t)r);
		if (t->w.o->mode == BENCH_PINGPONG && lx_echo(t, lc, t->buf, (uint32_t)r) < 0)
			goto gone;
	}
	return;
gone:
	lx_conn_free(t, lc);
}

static void lx_server_udp(struct lx_thread *t)
{
	int i;
	for (i = 0; i < LX_KICK_ROUNDS; i++) {
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		ssize_t r = recvfrom(t->listener.fd, t->buf, LX_BUF, 0, (struct sockaddr *)&peer, &plen);
		if (r < 0)
			return;
		t->w.c.requests++;
		t->w.c.rx_bytes += (uint64_t)r;
		if (t->w.o->mode != BENCH_PINGPONG)
			continue;
		bench_flow_maybe_corrupt(&t->w, t->buf, (uint32_t)r);
		if (sendto(t->listener.fd, t->buf, (size_t)r, 0, (struct sockaddr *)&peer, plen) == r)
			t->w.c.tx_bytes += (uint64_t)r;
	}
}

static void lx_server_event(struct lx_thread *t, struct lx_conn *lc, uint32_t ev)
{
	if (lc != &t->listener)
		lx_server_stream(t, lc, ev);
	else if (t->w.o->proto == 17)
		lx_server_udp(t);
	else
		lx_accept(t);
}

/* ------------------------------------------------------------------ threads */

static void lx_loop(struct lx_thread *t)
{
	const struct bench_opts *o = t->w.o;
	struct epoll_event evs[LX_EVENTS];
	uint64_t now = lx_now(), last = 0, spin_ns = (uint64_t)o->spin_us * 1000u;
	uint64_t end = o->duration_s ? now + o->duration_s * 1000000000ull : UINT64_MAX;
	while (!__atomic_load_n(&lx_stop, __ATOMIC_RELAXED)) {
		/* --spin-us: poll, do not sleep, while traffic was seen in the last spin_ns
		 * (the same window ipkit-bench's blocking loop spins, ipk_node_set_spin) */
		int tmo = o->busy_poll || (spin_ns && now - last < spin_ns) ? 0 : 1;
		int i, n = epoll_wait(t->ep, evs, LX_EVENTS, tmo);
		now = lx_now();
		if (n > 0)
			last = now;
		for (i = 0; i < n; i++) {
			struct lx_conn *lc = (struct lx_conn *)evs[i].data.ptr;
			if (o->client)
				lx_client_event(t, lc, evs[i].events, now);
			else
				lx_server_event(t, lc, evs[i].events);
		}
		if (o->client)
			bench_worker_tick(&t->w, now, lx_kick, t);
		lx_publish(t);
		if (now >= end)
			break;
	}
	__atomic_store_n(&t->w.stopping, 1, __ATOMIC_RELAXED);
}

static void *lx_thread_main(void *arg)
{
	struct lx_thread *t = (struct lx_thread *)arg;
	uint32_t i;
	t->rc = t->w.o->client ? lx_client_open(t) : lx_listen(t);
	__atomic_store_n(&t->ready, 1, __ATOMIC_RELEASE);
	if (t->rc < 0) {
		fprintf(stderr, "ipkit-bench-linux: thread %u: socket set-up failed: %s\n", t->id,
		        strerror(errno));
		__atomic_store_n(&lx_stop, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&t->w.stopping, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	lx_loop(t);
	for (i = 0; i < t->count; i++) {
		if (t->conns[i].connecting && t->conns[i].fd >= 0)
			t->w.c.connect_fails++; /* never opened during the whole run */
		lx_close(t, &t->conns[i], 0);
	}
	lx_close(t, &t->listener, 0);
	lx_publish(t);
	return NULL;
}

static int lx_thread_init(struct lx_thread *t, const struct bench_opts *o, uint32_t id)
{
	uint32_t share = o->client ? o->conns / o->threads : 0;
	uint32_t extra = o->client && id < o->conns % o->threads ? 1 : 0;
	t->id = id;
	t->count = share + extra;
	t->listener.fd = -1;
	t->ep = epoll_create1(EPOLL_CLOEXEC);
	if (t->ep < 0 || bench_worker_init(&t->w, o, t->count) < 0)
		return -1;
	t->conns = (struct lx_conn *)calloc(t->count ? t->count : 1, sizeof(*t->conns));
	return t->conns ? 0 : -1;
}

/* SIGINT/SIGTERM are blocked in every thread (the workers inherit the mask) and taken
 * by the printing thread with sigtimedwait, so no handler races the workers. */
static void lx_signals_block(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, set, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* Wait until every thread has its sockets (the ready line must not come before the
 * listeners exist); -1 when one failed. */
static int lx_wait_ready(struct lx_thread *ts, uint32_t n)
{
	uint32_t k;
	for (k = 0; k < n; k++) {
		while (!__atomic_load_n(&ts[k].ready, __ATOMIC_ACQUIRE)) {
			struct timespec d = { 0, 1000000 };
			nanosleep(&d, NULL);
		}
		if (ts[k].rc < 0)
			return -1;
	}
	return 0;
}

/* Print a line a second until every thread has finished. */
static void lx_report(struct lx_thread *ts, const struct bench_opts *o, struct bench_report *r,
                      const sigset_t *sigs)
{
	struct bench_counters sum;
	uint32_t k, live = o->threads;
	while (live) {
		struct timespec d = { 0, 20000000 };
		if (sigtimedwait(sigs, NULL, &d) > 0)
			__atomic_store_n(&lx_stop, 1, __ATOMIC_RELAXED);
		lx_collect(ts, o->threads, &sum);
		bench_report_tick(r, &sum, lx_now());
		for (live = 0, k = 0; k < o->threads; k++)
			live += !__atomic_load_n(&ts[k].w.stopping, __ATOMIC_RELAXED);
	}
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	struct bench_report r;
	struct bench_counters sum;
	struct hist *lat;
	struct lx_thread *ts;
	sigset_t sigs;
	uint32_t k;
	int rc = bench_opts_parse(&o, BENCH_PROG_LINUX, argc, argv, stdout, stderr);
	if (rc != BENCH_OPTS_OK)
		return rc == BENCH_OPTS_HELP ? BENCH_EXIT_OK : BENCH_EXIT_USAGE;
	lx_signals_block(&sigs);
	ts = (struct lx_thread *)calloc(o.threads, sizeof(*ts));
	lat = (struct hist *)malloc(sizeof(*lat));
	if (!ts || !lat)
		return BENCH_EXIT_SETUP;
	for (k = 0; k < o.threads; k++)
		if (lx_thread_init(&ts[k], &o, k) < 0) {
			fprintf(stderr, "ipkit-bench-linux: out of memory or epoll\n");
			return BENCH_EXIT_SETUP;
		}
	bench_report_start(&r, &o, stdout, lx_now());
	for (k = 0; k < o.threads; k++)
		if (pthread_create(&ts[k].tid, NULL, lx_thread_main, &ts[k]) != 0)
			return BENCH_EXIT_SETUP;
	if (!o.client && lx_wait_ready(ts, o.threads) == 0)
		fprintf(stderr, "ipkit-bench-linux: serving on port %u (%s)\n", o.port,
		        o.proto == 17 ? "udp" : "tcp");
	lx_report(ts, &o, &r, &sigs);
	hist_init(lat);
	for (k = 0; k < o.threads; k++) {
		pthread_join(ts[k].tid, NULL);
		if (ts[k].rc < 0)
			return BENCH_EXIT_SETUP;
		hist_merge(lat, &ts[k].w.lat);
	}
	lx_collect(ts, o.threads, &sum);
	bench_report_summary(&r, &sum, lat, lx_now());
	rc = bench_exit_status(&o, &sum);
	for (k = 0; k < o.threads; k++) {
		bench_worker_free(&ts[k].w);
		free(ts[k].conns);
		close(ts[k].ep);
	}
	free(lat);
	free(ts);
	return rc;
}
