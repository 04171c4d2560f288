/*
 * pl_calls: one program per call family, run once on Linux's sockets and once under
 * libipkit-preload; the two outputs must be identical (tests/preload/test_preload.py).
 * It prints what a program can observe (return values, errno names, event masks),
 * never addresses or times, so the kernel's answers are the expected ones.
 *
 * Usage: pl_calls FAMILY ECHO_IP ECHO_PORT LOOP_IP PORT CLOSED_PORT
 *   ECHO_IP:ECHO_PORT  a TCP echo server
 *   LOOP_IP:PORT       where this program listens and connects to itself
 *   CLOSED_PORT        a port of ECHO_IP nobody listens on
 * FAMILY: blocking nonblocking refused accept timeouts dup poll select
 *         epoll_lt epoll_et epoll_oneshot epoll_rdhup epoll_mixed opts signals
 *         threads all
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_in echo_a, loop_a, closed_a;

#define SAY(...) (printf(__VA_ARGS__), fflush(stdout))

static const char *ename(int e)
{
	switch (e) {
	case 0: return "0";
	case EAGAIN: return "EAGAIN";
	case EINPROGRESS: return "EINPROGRESS";
	case EALREADY: return "EALREADY";
	case EISCONN: return "EISCONN";
	case ECONNREFUSED: return "ECONNREFUSED";
	case ENOTCONN: return "ENOTCONN";
	case EPIPE: return "EPIPE";
	case EINVAL: return "EINVAL";
	case EBADF: return "EBADF";
	case ECONNRESET: return "ECONNRESET";
	case ENOPROTOOPT: return "ENOPROTOOPT";
	default: return strerror(e);
	}
}

#define R(call) ({ long r_ = (long)(call); int e_ = r_ < 0 ? errno : 0; \
	SAY("  %s = %ld %s\n", #call, r_ < 0 ? -1L : r_, ename(e_)); r_; })

static void addr(struct sockaddr_in *a, const char *ip, const char *port)
{
	memset(a, 0, sizeof *a);
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)atoi(port));
	inet_pton(AF_INET, ip, &a->sin_addr);
}

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int tcp(int flags)
{
	return socket(AF_INET, SOCK_STREAM | flags, 0);
}

static int connected(const struct sockaddr_in *a)
{
	int s = tcp(0);
	if (connect(s, (const struct sockaddr *)a, sizeof *a) < 0) {
		SAY("  connect failed: %s\n", ename(errno));
		exit(1);
	}
	return s;
}

/* Read exactly n bytes (blocking), -1 on a short stream. */
static long read_n(int s, char *b, long n)
{
	long got = 0;
	while (got < n) {
		ssize_t r = recv(s, b + got, (size_t)(n - got), 0);
		if (r <= 0)
			return -1;
		got += r;
	}
	return got;
}

static int listener(void)
{
	int l = tcp(0), one = 1;
	struct sockaddr_in a = loop_a;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	a.sin_addr.s_addr = htonl(INADDR_ANY);
	if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 16) < 0) {
		SAY("  listen failed: %s\n", ename(errno));
		exit(1);
	}
	return l;
}

/* A connected pair through this program's own listener: *c client, return server. */
static int pair(int l, int *c)
{
	int s;
	*c = connected(&loop_a);
	s = accept(l, NULL, NULL);
	if (s < 0) {
		SAY("  accept failed: %s\n", ename(errno));
		exit(1);
	}
	return s;
}

/* ------------------------------------------------------------ families */

static void t_blocking(void)
{
	static char out[100000], in[100000];
	int s = connected(&echo_a), i, same;
	SAY("blocking\n");
	for (i = 0; i < (int)sizeof out; i++)
		out[i] = (char)(i * 7 + 3);
	R(send(s, out, sizeof out, 0));
	R(read_n(s, in, sizeof in));
	same = memcmp(in, out, sizeof in) == 0;
	SAY("  echo intact %d\n", same);
	R(write(s, "abc", 3));
	R(read_n(s, in, 3));
	R(shutdown(s, SHUT_WR));
	R(recv(s, in, sizeof in, 0));
	R(send(s, "x", 1, MSG_NOSIGNAL));
	R(close(s));
}

static void t_nonblocking(void)
{
	int s = tcp(SOCK_NONBLOCK), err = -1;
	socklen_t l = sizeof err;
	struct pollfd p;
	char b[16];
	SAY("nonblocking\n");
	R(connect(s, (struct sockaddr *)&echo_a, sizeof echo_a));
	p.fd = s;
	p.events = POLLOUT;
	R(poll(&p, 1, 5000));
	SAY("  revents %#x\n", p.revents);
	R(getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &l));
	SAY("  SO_ERROR %s\n", ename(err));
	R(connect(s, (struct sockaddr *)&echo_a, sizeof echo_a));
	R(recv(s, b, sizeof b, 0));
	R(fcntl(s, F_GETFL) & O_NONBLOCK);
	R(send(s, "ping", 4, 0));
	p.events = POLLIN;
	R(poll(&p, 1, 5000));
	SAY("  revents %#x\n", p.revents);
	R(recv(s, b, sizeof b, 0));
	R(close(s));
}

static void t_refused(void)
{
	int s = tcp(0), err = -1;
	socklen_t l = sizeof err;
	struct pollfd p;
	SAY("refused\n");
	R(connect(s, (struct sockaddr *)&closed_a, sizeof closed_a));
	R(close(s));
	s = tcp(SOCK_NONBLOCK);
	R(connect(s, (struct sockaddr *)&closed_a, sizeof closed_a));
	p.fd = s;
	p.events = POLLOUT;
	R(poll(&p, 1, 5000));
	SAY("  revents %#x\n", p.revents);
	R(getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &l));
	SAY("  SO_ERROR %s\n", ename(err));
	R(close(s));
}

static void t_accept(void)
{
	int l = listener(), c, s, v = 0;
	struct sockaddr_in peer;
	socklen_t pl = sizeof peer;
	struct pollfd p;
	char b[16];
	SAY("accept\n");
	R(fcntl(l, F_SETFL, O_NONBLOCK));
	R(accept(l, NULL, NULL));
	c = tcp(SOCK_NONBLOCK);
	R(connect(c, (struct sockaddr *)&loop_a, sizeof loop_a));
	p.fd = l;
	p.events = POLLIN;
	R(poll(&p, 1, 5000));
	SAY("  revents %#x\n", p.revents);
	s = (int)R(accept4(l, (struct sockaddr *)&peer, &pl, SOCK_NONBLOCK | SOCK_CLOEXEC));
	SAY("  peer family %d len %d\n", peer.sin_family, (int)pl);
	R(fcntl(s, F_GETFL) & O_NONBLOCK);
	R(fcntl(s, F_GETFD) & FD_CLOEXEC);
	R(getsockopt(l, SOL_SOCKET, SO_ACCEPTCONN, &v, &(socklen_t){sizeof v}));
	SAY("  SO_ACCEPTCONN %d\n", v);
	R(send(c, "hello", 5, 0));
	p.fd = s;
	R(poll(&p, 1, 5000));
	R(ioctl(s, FIONREAD, &v));
	SAY("  FIONREAD %d\n", v);
	R(recv(s, b, sizeof b, 0));
	R(getpeername(s, (struct sockaddr *)&peer, &pl));
	R(close(c));
	R(poll(&p, 1, 5000));
	SAY("  revents %#x\n", p.revents);
	R(recv(s, b, sizeof b, 0));
	R(close(s));
	R(close(l));
}

static void t_timeouts(void)
{
	struct timeval tv = {0, 200000};
	int l = listener(), c, s;
	double t0;
	char b[4];
	SAY("timeouts\n");
	R(setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv));
	t0 = now_ms();
	R(accept(l, NULL, NULL));
	SAY("  accept waited >= 150 ms: %d\n", now_ms() - t0 >= 150);
	s = pair(l, &c);
	R(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv));
	t0 = now_ms();
	R(recv(s, b, sizeof b, 0));
	SAY("  recv waited >= 150 ms: %d\n", now_ms() - t0 >= 150);
	t0 = now_ms();
	R(poll(&(struct pollfd){.fd = s, .events = POLLIN}, 1, 200));
	SAY("  poll waited >= 150 ms: %d\n", now_ms() - t0 >= 150);
	R(close(c));
	R(close(s));
	R(close(l));
}

static void t_dup(void)
{
	int l = listener(), c, s, d, d2;
	(void)d;
	char b[16];
	SAY("dup\n");
	s = pair(l, &c);
	d = dup(s);
	R(close(s));
	R(send(d, "via-dup", 7, 0));
	R(read_n(c, b, 7));
	d2 = fcntl(d, F_DUPFD_CLOEXEC, 100);
	R(d2 >= 100);
	R(fcntl(d2, F_GETFD) & FD_CLOEXEC);
	R(dup2(d2, s) == s);
	R(send(s, "dup2", 4, 0));
	R(read_n(c, b, 4));
	R(close(d2));
	R(close(d));
	R(send(s, "x", 1, 0));
	R(close(s));
	R(recv(c, b, sizeof b, 0));
	R(recv(c, b, sizeof b, 0));
	R(close(c));
	R(close(l));
}

static void t_poll(void)
{
	int l = listener(), c, s, pfd[2];
	struct pollfd p[3];
	char b[16];
	SAY("poll\n");
	s = pair(l, &c);
	R(pipe(pfd));
	p[0].fd = s;   p[0].events = POLLIN;
	p[1].fd = pfd[0]; p[1].events = POLLIN;
	p[2].fd = c;   p[2].events = POLLOUT;
	R(poll(p, 3, 0));
	SAY("  revents %#x %#x %#x\n", p[0].revents, p[1].revents, p[2].revents);
	R(write(pfd[1], "k", 1));
	R(poll(p, 2, 1000));
	SAY("  revents %#x %#x\n", p[0].revents, p[1].revents);
	R(read(pfd[0], b, 1));
	R(send(c, "sock", 4, 0));
	R(poll(p, 2, 5000));
	SAY("  revents %#x %#x\n", p[0].revents, p[1].revents);
	R(read(s, b, sizeof b));
	R(ppoll(p, 2, &(struct timespec){0, 50000000}, NULL));
	R(close(pfd[0]));
	R(close(pfd[1]));
	R(close(c));
	R(close(s));
	R(close(l));
}

static void t_select(void)
{
	int l = listener(), c, s, pfd[2], n;
	fd_set r, w;
	struct timeval tv;
	char b[16];
	SAY("select\n");
	s = pair(l, &c);
	R(pipe(pfd));
	n = (s > pfd[0] ? s : pfd[0]) + 1;
	n = n > c + 1 ? n : c + 1;
	FD_ZERO(&r); FD_ZERO(&w);
	FD_SET(s, &r); FD_SET(pfd[0], &r); FD_SET(c, &w);
	tv.tv_sec = 0; tv.tv_usec = 0;
	R(select(n, &r, &w, NULL, &tv));
	SAY("  r %d %d w %d\n", FD_ISSET(s, &r), FD_ISSET(pfd[0], &r), FD_ISSET(c, &w));
	R(send(c, "sock", 4, 0));
	FD_ZERO(&r); FD_ZERO(&w);
	FD_SET(s, &r); FD_SET(pfd[0], &r);
	tv.tv_sec = 5;
	R(select(n, &r, NULL, NULL, &tv));
	SAY("  r %d %d\n", FD_ISSET(s, &r), FD_ISSET(pfd[0], &r));
	R(read(s, b, sizeof b));
	FD_ZERO(&r);
	FD_SET(s, &r);
	R(pselect(n, &r, NULL, NULL, &(struct timespec){0, 50000000}, NULL));
	R(close(pfd[0]));
	R(close(pfd[1]));
	R(close(c));
	R(close(s));
	R(close(l));
}

/* Until n bytes wait at s (bounded: 5 s): the data of a send on Linux's loopback is
 * at the receiver when send returns, through ipkitd a moment later; the families
 * test what the calls say, not that moment. */
static void wait_avail(int s, int n)
{
	int v = 0, i;
	for (i = 0; i < 500 && (ioctl(s, FIONREAD, &v) < 0 || v < n); i++)
		poll(NULL, 0, 10);
}

static void ep_show(int ep, int timeout)
{
	struct epoll_event ev[8];
	int n = epoll_wait(ep, ev, 8, timeout), i;
	SAY("  epoll_wait = %d:", n);
	for (i = 0; i < n; i++)
		SAY(" [%llu %#x]", (unsigned long long)ev[i].data.u64, ev[i].events);
	SAY("\n");
}

static int ep_add(int ep, int fd, uint32_t events, uint64_t tag)
{
	struct epoll_event e;
	e.events = events;
	e.data.u64 = tag;
	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
}

static void t_epoll(uint32_t mode, const char *name)
{
	int l = listener(), c, s, ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event e;
	char b[16];
	SAY("%s\n", name);
	s = pair(l, &c);
	R(ep_add(ep, s, EPOLLIN | mode, 7));
	R(ep_add(ep, s, EPOLLIN | mode, 7));
	ep_show(ep, 50);
	R(send(c, "0123456789", 10, 0));
	ep_show(ep, 5000);
	ep_show(ep, 50);
	R(recv(s, b, 5, 0));
	ep_show(ep, 50);
	R(send(c, "more", 4, 0));
	wait_avail(s, 9);
	ep_show(ep, 1000); /* the data is there: EPOLLONESHOT alone waits it out */
	e.events = EPOLLIN | EPOLLOUT | mode;
	e.data.u64 = 8;
	R(epoll_ctl(ep, EPOLL_CTL_MOD, s, &e));
	ep_show(ep, 50);
	R(recv(s, b, sizeof b, 0));
	R(epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL));
	R(epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL));
	ep_show(ep, 50);
	R(close(ep));
	R(close(c));
	R(close(s));
	R(close(l));
}

static void t_epoll_rdhup(void)
{
	int l = listener(), c, s, ep = epoll_create(4);
	char b[16];
	SAY("epoll_rdhup\n");
	s = pair(l, &c);
	R(ep_add(ep, s, EPOLLIN | EPOLLRDHUP | EPOLLET, 1));
	R(send(c, "last", 4, 0));
	R(shutdown(c, SHUT_WR));
	R(read_n(s, b, 4));
	ep_show(ep, 5000);
	R(recv(s, b, sizeof b, 0));
	R(close(ep));
	R(close(c));
	R(close(s));
	R(close(l));
}

static void t_epoll_mixed(void)
{
	int l = listener(), c, s, pfd[2], ep = epoll_create1(0), ep2 = epoll_create1(0);
	char b[16];
	SAY("epoll_mixed\n");
	s = pair(l, &c);
	R(pipe(pfd));
	R(ep_add(ep, s, EPOLLIN, 1));
	R(ep_add(ep, pfd[0], EPOLLIN, 2));
	R(ep_add(ep, l, EPOLLIN, 3));
	R(ep_add(ep2, s, EPOLLIN, 4)); /* one socket in two sets */
	ep_show(ep, 50);
	R(write(pfd[1], "p", 1));
	ep_show(ep, 5000);
	R(read(pfd[0], b, 1));
	R(send(c, "s", 1, 0));
	ep_show(ep, 5000);
	ep_show(ep2, 5000);
	R(recv(s, b, 1, 0));
	{
		int c2 = tcp(SOCK_NONBLOCK), s2;
		R(connect(c2, (struct sockaddr *)&loop_a, sizeof loop_a));
		ep_show(ep, 5000);
		s2 = (int)R(accept(l, NULL, NULL));
		ep_show(ep, 50);
		close(s2);
		close(c2);
	}
	R(close(ep2));
	R(close(ep));
	R(close(pfd[0]));
	R(close(pfd[1]));
	R(close(c));
	R(close(s));
	R(close(l));
}

static void t_opts(void)
{
	int s = tcp(0), v = 0;
	socklen_t l = sizeof v;
	SAY("opts\n");
	R(setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int)));
	R(getsockopt(s, IPPROTO_TCP, TCP_NODELAY, &v, &l));
	SAY("  TCP_NODELAY %d\n", v);
	R(setsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &(int){5}, sizeof(int)));
	R(getsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &v, &l));
	SAY("  SO_KEEPALIVE %d\n", v);
	R(setsockopt(s, SOL_SOCKET, SO_RCVBUF, &(int){65536}, sizeof(int)));
	R(getsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, &l));
	SAY("  SO_RCVBUF %d\n", v);
	R(setsockopt(s, IPPROTO_TCP, TCP_KEEPIDLE, &(int){30}, sizeof(int)));
	R(getsockopt(s, IPPROTO_TCP, TCP_KEEPIDLE, &v, &l));
	SAY("  TCP_KEEPIDLE %d\n", v);
	R(getsockopt(s, SOL_SOCKET, SO_TYPE, &v, &l));
	SAY("  SO_TYPE %d\n", v);
	R(getsockopt(s, SOL_SOCKET, SO_ERROR, &v, &l));
	R(setsockopt(s, IPPROTO_TCP, TCP_KEEPIDLE, &(int){0}, sizeof(int)));
	R(getpeername(s, (struct sockaddr *)&(struct sockaddr_in){0}, &(socklen_t){16}));
	R(recv(s, &v, 1, 0));
	R(shutdown(s, SHUT_WR));
	R(listen(s, 4));
	R(getsockopt(s, SOL_SOCKET, SO_ACCEPTCONN, &v, &l));
	SAY("  SO_ACCEPTCONN %d\n", v);
	R(close(s));
}

static volatile sig_atomic_t handled;
static void on_alarm(int sig) { (void)sig; handled++; }

static void alarm_in(int ms, int restart)
{
	struct sigaction a;
	struct itimerval it = {{0, 0}, {0, ms * 1000}};
	memset(&a, 0, sizeof a);
	a.sa_handler = on_alarm;
	a.sa_flags = restart ? SA_RESTART : 0;
	sigemptyset(&a.sa_mask);
	sigaction(SIGALRM, &a, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
}

struct late { int fd, ms; };
static void *connect_late(void *arg)
{
	int *c = arg;
	poll(NULL, 0, 400);
	*c = connected(&loop_a);
	return NULL;
}
static void *send_late(void *arg)
{
	struct late *l = arg;
	poll(NULL, 0, l->ms);
	send(l->fd, "late", 4, 0);
	return NULL;
}

/* EINTR without SA_RESTART; with it a blocking recv/accept restarts, unless the
 * socket has a timeout; poll never restarts (signal(7)). */
static void t_signals(void)
{
	int l = listener(), c, s;
	struct timeval tv = {5, 0};
	struct sigaction q;
	pthread_t th;
	struct late lt;
	char b[8];
	SAY("signals\n");
	s = pair(l, &c);
	alarm_in(100, 0);
	R(recv(s, b, sizeof b, 0));
	alarm_in(100, 1);
	lt.fd = c;
	lt.ms = 400;
	pthread_create(&th, NULL, send_late, &lt);
	R(recv(s, b, sizeof b, 0));
	pthread_join(th, NULL);
	alarm_in(100, 1);
	R(poll(&(struct pollfd){.fd = s, .events = POLLIN}, 1, 3000));
	R(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv));
	alarm_in(100, 1);
	R(recv(s, b, sizeof b, 0));
	alarm_in(100, 1);
	{
		int c2 = -1, s2;
		alarm_in(100, 1);
		/* a restarted accept sees the connection made after the signal */
		pthread_create(&th, NULL, connect_late, &c2);
		s2 = (int)R(accept(l, NULL, NULL) >= 0);
		pthread_join(th, NULL);
		close(c2);
		(void)s2;
	}
	SAY("  handler ran %d\n", (int)handled);
	R(sigaction(SIGALRM, NULL, &q));
	SAY("  handler is ours %d, SA_RESTART %d\n", q.sa_handler == on_alarm,
	    !!(q.sa_flags & SA_RESTART));
	R(close(c));
	R(close(s));
	R(close(l));
}

#define THREADS 4
#define RECS 500
#define RECLEN 64
static int thr_fd;
static void mkrec(char *rec, long id, int seq)
{
	int n = snprintf(rec, RECLEN, "%ld:%d:", id, seq);
	memset(rec + n, (int)('a' + id), (size_t)(RECLEN - n));
}

static void *writer(void *arg)
{
	long id = (long)arg;
	char rec[RECLEN];
	int i;
	for (i = 0; i < RECS; i++) {
		mkrec(rec, id, i);
		if (send(thr_fd, rec, sizeof rec, 0) != RECLEN)
			return (void *)1;
	}
	return NULL;
}

/* Many threads on one socket: every send of a record arrives whole (no torn
 * writes), each thread's records in its order. */
static void t_threads(void)
{
	static char all[THREADS * RECS * RECLEN];
	int l = listener(), c, s, i, intact = 0, next[THREADS] = {0}, order = 1;
	pthread_t th[THREADS];
	SAY("threads\n");
	s = pair(l, &c);
	thr_fd = c;
	for (i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, writer, (void *)(long)i);
	R(read_n(s, all, sizeof all));
	for (i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < THREADS * RECS; i++) {
		const char *r = all + (size_t)i * RECLEN;
		char want[RECLEN];
		long id = r[0] - '0';
		if (id < 0 || id >= THREADS)
			continue;
		mkrec(want, id, next[id]);
		if (memcmp(r, want, RECLEN) == 0) {
			intact++;
			next[id]++;
		} else {
			order = 0;
		}
	}
	SAY("  records intact %d in order %d\n", intact, order);
	R(close(c));
	R(close(s));
	R(close(l));
}

/* sendfile from a file with and without an offset pointer; the echo returns it. */
static void t_sendfile(void)
{
	static char data[200000], back[200000];
	char path[] = "/tmp/pl_callsXXXXXX";
	int f = mkstemp(path), s = connected(&echo_a), i;
	off_t off = 0;
	SAY("sendfile\n");
	unlink(path);
	for (i = 0; i < (int)sizeof data; i++)
		data[i] = (char)(i * 13 + 1);
	R(write(f, data, sizeof data));
	R(sendfile(s, f, &off, 150000));
	SAY("  offset %ld, file position %ld\n", (long)off, (long)lseek(f, 0, SEEK_CUR));
	R(lseek(f, 150000, SEEK_SET));
	R(sendfile(s, f, NULL, 100000));
	SAY("  file position %ld\n", (long)lseek(f, 0, SEEK_CUR));
	R(read_n(s, back, sizeof back));
	SAY("  echo intact %d\n", memcmp(back, data, sizeof data) == 0);
	R(close(f));
	R(close(s));
}

/* UDP against the echo's UDP port (the same number as its TCP one). */
static void t_udp(void)
{
	int u = socket(AF_INET, SOCK_DGRAM, 0), v = 0;
	struct sockaddr_in from, me;
	socklen_t fl = sizeof from;
	char b[200], small[10];
	struct iovec io = {small, sizeof small};
	struct msghdr m;
	struct pollfd p = {.fd = u, .events = POLLIN};
	SAY("udp\n");
	R(getsockopt(u, SOL_SOCKET, SO_TYPE, &v, &(socklen_t){sizeof v}));
	SAY("  SO_TYPE %d\n", v);
	me = loop_a;
	me.sin_addr.s_addr = htonl(INADDR_ANY);
	R(bind(u, (struct sockaddr *)&me, sizeof me));
	R(getsockname(u, (struct sockaddr *)&me, &fl));
	SAY("  bound to our port %d\n", me.sin_port == loop_a.sin_port);
	R(listen(u, 1));
	R(recv(u, b, sizeof b, MSG_DONTWAIT));
	R(sendto(u, "ping1", 5, 0, (struct sockaddr *)&echo_a, sizeof echo_a));
	R(poll(&p, 1, 5000));
	SAY("  revents %#x\n", p.revents);
	R(ioctl(u, FIONREAD, &v));
	SAY("  FIONREAD %d\n", v);
	fl = sizeof from;
	R(recvfrom(u, b, sizeof b, 0, (struct sockaddr *)&from, &fl));
	SAY("  from the echo %d len %d\n", from.sin_port == echo_a.sin_port, (int)fl);
	R(send(u, "x", 1, 0));
	R(connect(u, (struct sockaddr *)&echo_a, sizeof echo_a));
	R(getpeername(u, (struct sockaddr *)&from, &fl));
	R(send(u, "ping2", 5, 0));
	R(recv(u, b, sizeof b, 0));
	memset(b, 'u', 100);
	R(send(u, b, 100, 0));
	R(recv(u, small, sizeof small, MSG_TRUNC));
	R(write(u, b, 100));
	memset(&m, 0, sizeof m);
	m.msg_iov = &io;
	m.msg_iovlen = 1;
	R(recvmsg(u, &m, 0));
	SAY("  MSG_TRUNC %d\n", !!(m.msg_flags & MSG_TRUNC));
	R(close(u));
}

/* sendmmsg/recvmmsg: three datagrams to the echo in one call, back in one call
 * (blocking: it waits for all three), MSG_WAITFORONE on an empty socket; then two
 * messages on a TCP connection. */
static void t_mmsg(void)
{
	int u = socket(AF_INET, SOCK_DGRAM, 0), s, i;
	char out[3][8] = {"one", "two!", "three"}, in[3][16], b[16];
	struct iovec oi[3], ii[3];
	struct mmsghdr om[3], im[3];
	SAY("mmsg\n");
	memset(om, 0, sizeof om);
	memset(im, 0, sizeof im);
	for (i = 0; i < 3; i++) {
		oi[i].iov_base = out[i];
		oi[i].iov_len = strlen(out[i]);
		om[i].msg_hdr.msg_iov = &oi[i];
		om[i].msg_hdr.msg_iovlen = 1;
		om[i].msg_hdr.msg_name = &echo_a;
		om[i].msg_hdr.msg_namelen = sizeof echo_a;
		ii[i].iov_base = in[i];
		ii[i].iov_len = sizeof in[i];
		im[i].msg_hdr.msg_iov = &ii[i];
		im[i].msg_hdr.msg_iovlen = 1;
	}
	R(sendmmsg(u, om, 3, 0));
	SAY("  sent %u %u %u\n", om[0].msg_len, om[1].msg_len, om[2].msg_len);
	R(recvmmsg(u, im, 3, 0, NULL));
	for (i = 0; i < 3; i++)
		SAY("  got %u %.*s\n", im[i].msg_len, (int)im[i].msg_len, in[i]);
	R(recvmmsg(u, im, 3, MSG_WAITFORONE | MSG_DONTWAIT, NULL));
	R(close(u));
	s = connected(&echo_a);
	for (i = 0; i < 2; i++) {
		om[i].msg_hdr.msg_name = NULL;
		om[i].msg_hdr.msg_namelen = 0;
	}
	R(sendmmsg(s, om, 2, 0));
	R(read_n(s, b, 7));
	SAY("  stream %.7s\n", b);
	R(close(s));
}

/* linger0: close() with SO_LINGER {1, 0} resets the connection: the peer's recv
 * fails with ECONNRESET (not an end of stream), its send after that with EPIPE;
 * and with bytes still queued. A plain close is an end of stream. */
static void t_linger0(void)
{
	struct linger lg = {1, 0};
	char b[8];
	int l = listener(), c, v, i;
	SAY("linger0\n");
	for (i = 0; i < 2; i++) {
		v = pair(l, &c);
		R(setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg));
		if (i == 1) /* bytes the peer reads before the reset, or not: Linux
		             * delivers them (they arrived first), so must we */
			R(send(c, "abc", 3, 0));
		R(close(c));
		usleep(200000); /* the reset reaches the peer */
		if (i == 1)
			R(recv(v, b, sizeof b, 0));
		R(recv(v, b, sizeof b, 0));
		R(recv(v, b, sizeof b, 0));
		R(close(v));
	}
	v = pair(l, &c);
	R(close(c));
	usleep(200000);
	R(recv(v, b, sizeof b, 0));
	R(close(v));
	R(close(l));
}

/* unread: close() with received bytes the program never read resets the
 * connection (Linux's tcp_close: the peer's recv fails with ECONNRESET); with
 * everything read it is an end of stream. */
static void t_unread(void)
{
	char b[8];
	int l = listener(), c, v, i;
	SAY("unread\n");
	for (i = 0; i < 2; i++) {
		struct pollfd p;
		v = pair(l, &c);
		R(send(c, "abc", 3, 0));
		p.fd = v; /* the bytes reached v (poll reads nothing) */
		p.events = POLLIN;
		R(poll(&p, 1, 10000));
		if (i == 1)
			R(read_n(v, b, 3));
		R(close(v));
		usleep(200000); /* the reset or the FIN reaches c */
		R(recv(c, b, sizeof b, 0));
		R(recv(c, b, sizeof b, 0));
		R(close(c));
	}
	R(close(l));
}

/* names: getsockname after connect gives the address and port the connection
 * really uses (not 0.0.0.0:0): nonzero to the echo, and through our own listener
 * the client's name is the accepted socket's peer; the accepted socket's name
 * (its listener bound to 0.0.0.0) is where the client connected to, its peer. */
static void t_names(void)
{
	struct sockaddr_in a, b, me;
	socklen_t la = sizeof a, lb = sizeof b, lm = sizeof me;
	int s = connected(&echo_a), l = listener(), c, v;
	SAY("names\n");
	R(getsockname(s, (struct sockaddr *)&a, &la));
	SAY("  to echo: family %d ip set %d port set %d len %u\n", a.sin_family,
	    a.sin_addr.s_addr != 0, a.sin_port != 0, (unsigned)la);
	R(close(s));
	v = pair(l, &c);
	la = sizeof a;
	R(getsockname(c, (struct sockaddr *)&a, &la));
	R(getpeername(v, (struct sockaddr *)&b, &lb));
	SAY("  client name = server's peer: ip %d port %d\n",
	    a.sin_addr.s_addr == b.sin_addr.s_addr, a.sin_port == b.sin_port);
	R(getsockname(v, (struct sockaddr *)&me, &lm));
	la = sizeof a;
	R(getpeername(c, (struct sockaddr *)&a, &la));
	SAY("  accepted name: family %d len %u ip set %d = client's peer: ip %d port %d\n",
	    me.sin_family, (unsigned)lm, me.sin_addr.s_addr != 0,
	    me.sin_addr.s_addr == a.sin_addr.s_addr, me.sin_port == a.sin_port);
	R(close(c));
	R(close(v));
	R(close(l));
}

/* exec_child LISTEN CLOEXEC_FD READY (the image exec or posix_spawn started): the
 * CLOEXEC socket must be gone, the listener usable: accept one connection, answer
 * its 4 bytes with "ok", the last one, and 'C' if the CLOEXEC one was closed. */
static int exec_child(char **argv)
{
	int l = atoi(argv[2]), cx = atoi(argv[3]), ready = atoi(argv[4]), a;
	char b[4], r[4];
	alarm(20);
	r[3] = fcntl(cx, F_GETFD) < 0 && errno == EBADF ? 'C' : 'c';
	if (write(ready, "r", 1) != 1)
		return 1;
	a = accept(l, NULL, NULL);
	if (a < 0 || read_n(a, b, 4) != 4)
		return 1;
	r[0] = 'o', r[1] = 'k', r[2] = b[3];
	if (send(a, r, 4, 0) != 4)
		return 1;
	close(a);
	return 0;
}

/* exec: a listener without FD_CLOEXEC stays usable in the new image (fork + exec,
 * then posix_spawn), a SOCK_CLOEXEC socket is closed; the parent's listener works
 * after. */
static void t_exec(void)
{
	int l = listener(), cx = tcp(SOCK_CLOEXEC), pfd[2], i, c, st;
	char a1[16], a2[16], a3[16], b[4], r;
	char *args[] = {"pl_calls", "exec_child", a1, a2, a3, NULL};
	extern char **environ;
	SAY("exec\n");
	R(pipe(pfd));
	snprintf(a1, sizeof a1, "%d", l);
	snprintf(a2, sizeof a2, "%d", cx);
	snprintf(a3, sizeof a3, "%d", pfd[1]);
	for (i = 0; i < 2; i++) {
		struct pollfd p = {pfd[0], POLLIN, 0};
		struct timeval tv = {15, 0};
		pid_t pid;
		if (i == 0) {
			pid = fork();
			if (pid == 0) {
				execve("/proc/self/exe", args, environ);
				_exit(127);
			}
		} else {
			R(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, environ));
		}
		R(poll(&p, 1, 10000) == 1 && read(pfd[0], &r, 1) == 1);
		c = connected(&loop_a);
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		R(send(c, i ? "bbb1" : "aaa0", 4, 0));
		R(read_n(c, b, 4));
		SAY("  %s: reply %.4s\n", i ? "posix_spawn" : "fork+exec", b);
		R(close(c));
		st = -1;
		R(waitpid(pid, &st, 0) == pid);
		SAY("  exit %d\n", st);
	}
	{
		int s = pair(l, &c);
		R(send(c, "p", 1, 0));
		R(read_n(s, b, 1));
		R(close(s));
		R(close(c));
	}
	R(close(l));
	R(close(cx));
	close(pfd[0]);
	close(pfd[1]);
}

/* exec_conn_child FD CLOEXEC_FD (the new image): the connected socket FD, kept
 * across exec, still has the 4 bytes the old image received and did not read;
 * answer them with "got:" and them, then echo 4 more, and close. Exit code:
 * 0 done, 2 the CLOEXEC socket was still open, 3 the name was lost, 1 else. */
static int exec_conn_child(char **argv)
{
	int s = atoi(argv[2]), cx = atoi(argv[3]);
	struct sockaddr_in p;
	socklen_t pl = sizeof p;
	char b[8];
	alarm(20);
	if (fcntl(cx, F_GETFD) >= 0 || errno != EBADF)
		return 2;
	if (getpeername(s, (struct sockaddr *)&p, &pl) < 0 || p.sin_family != AF_INET ||
	    p.sin_port == 0 || p.sin_addr.s_addr == 0)
		return 3;
	if (read_n(s, b + 4, 4) != 4)
		return 1;
	memcpy(b, "got:", 4);
	if (write(s, b, 8) != 8 || read_n(s, b, 4) != 4 || write(s, b, 4) != 4)
		return 1;
	return close(s) == 0 ? 0 : 1;
}

/* exec_conn: a connected socket without FD_CLOEXEC stays usable in the new image,
 * with the bytes the old image had received and not read (Linux keeps them in
 * the socket): exec in place by a process that alone held the connection, then
 * a forked child that execs (inetd, CGI) while the parent still holds it and
 * closes it afterwards. A SOCK_CLOEXEC one is closed; an exec that fails leaves
 * the socket as it was, unread bytes too. */
static void t_exec_conn(void)
{
	int l = listener(), i;
	SAY("exec_conn\n");
	for (i = 0; i < 2; i++) {
		int s = -1, c = -1, st = -1;
		char b[8], a1[16], a2[16];
		char *args[] = {"pl_calls", "exec_conn_child", a1, a2, NULL};
		struct timeval tv = {15, 0};
		pid_t pid;
		if (i == 0) {
			/* the child connects, reads half of 8 bytes and execs */
			pid = fork();
			if (pid == 0) {
				int k = connected(&loop_a), cx = connected(&loop_a);
				fcntl(cx, F_SETFD, FD_CLOEXEC);
				if (write(k, "k", 1) != 1 || read_n(k, b, 4) != 4 ||
				    memcmp(b, "AAAA", 4) != 0)
					_exit(4);
				snprintf(a1, sizeof a1, "%d", k);
				snprintf(a2, sizeof a2, "%d", cx);
				/* an exec that fails leaves the socket as it was */
				if (execv("/nonexistent/pl_calls", args) == 0 || errno != ENOENT)
					_exit(5);
				if (read_n(k, b, 2) != 2 || memcmp(b, "BB", 2) != 0)
					_exit(6);
				execv("/proc/self/exe", args);
				_exit(127);
			}
			s = accept(l, NULL, NULL);
			{ /* the other is the CLOEXEC one: k says "k" */
				int x = accept(l, NULL, NULL), t;
				struct pollfd p[2] = {{s, POLLIN, 0}, {x, POLLIN, 0}};
				R(x >= 0);
				R(poll(p, 2, 15000) >= 1);
				if (!(p[0].revents & POLLIN))
					t = s, s = x, x = t;
				R(read(s, b, 1));
				R(send(s, "AAAABBBBBB", 10, 0));
				setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
				R(read_n(s, b, 8));
				SAY("  in place: %.8s\n", b);
				R(send(s, "CCCC", 4, 0));
				R(read_n(s, b, 4));
				SAY("  in place: %.4s\n", b);
				R(read(s, b, 1)); /* the new image's close: end of stream */
				close(x);
			}
			R(close(s));
		} else {
			/* the parent reads half, a child execs with the socket, the
			 * parent closes its copy */
			int cx = tcp(SOCK_CLOEXEC);
			s = pair(l, &c);
			R(send(c, "AAAABBBB", 8, 0));
			R(read_n(s, b, 4));
			snprintf(a1, sizeof a1, "%d", s);
			snprintf(a2, sizeof a2, "%d", cx);
			pid = fork();
			if (pid == 0) {
				execvp("/proc/self/exe", args);
				_exit(127);
			}
			R(close(s));
			R(close(cx));
			setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
			R(read_n(c, b, 8));
			SAY("  fork+exec: %.8s\n", b);
			R(send(c, "DDDD", 4, 0));
			R(read_n(c, b, 4));
			SAY("  fork+exec: %.4s\n", b);
			R(read(c, b, 1));
			R(close(c));
		}
		R(waitpid(pid, &st, 0) == pid);
		SAY("  exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
	R(close(l));
}

static void *small_stack_fn(void *arg)
{
	int *fd = (int *)arg;
	char b[4];
	/* a socket call from the small stack: a send and the echo */
	if (send(*fd, "sst", 3, 0) != 3 || read_n(*fd, b, 3) != 3 || memcmp(b, "sst", 3) != 0)
		*fd = -1;
	return NULL;
}

/* small_stack: a thread with the smallest stack POSIX allows (node makes such
 * threads) starts and uses a socket. The shim's static TLS is carved from every
 * thread's stack: 256 KiB of it made pthread_create fail with EINVAL. */
static void t_small_stack(void)
{
	pthread_attr_t a;
	pthread_t t;
	int c = connected(&echo_a), rc;
	SAY("small_stack\n");
	pthread_attr_init(&a);
	R(pthread_attr_setstacksize(&a, PTHREAD_STACK_MIN));
	rc = pthread_create(&t, &a, small_stack_fn, &c);
	SAY("  pthread_create = %s\n", ename(rc));
	if (rc == 0)
		R(pthread_join(t, NULL));
	SAY("  echo from the thread: %s\n", c >= 0 ? "ok" : "failed");
	pthread_attr_destroy(&a);
	if (c >= 0)
		R(close(c));
}

/* exit_fin: a process that leaves with _exit (no exit handlers: dash, a forked
 * child) while its connection still has bytes going out: Linux sends them and a
 * FIN, the peer reads everything and the end of the stream. */
static void t_exit_fin(void)
{
	int l = listener(), s, st = -1;
	static char b[65536];
	long got = 0, n;
	pid_t pid;
	struct timeval tv = {15, 0};
	SAY("exit_fin\n");
	pid = fork();
	if (pid == 0) {
		int c = connected(&loop_a);
		memset(b, 'x', sizeof b);
		if (write(c, b, sizeof b) != (ssize_t)sizeof b)
			_exit(1);
		_exit(0);
	}
	s = accept(l, NULL, NULL);
	R(s >= 0);
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	while ((n = read(s, b, sizeof b)) > 0)
		got += n;
	SAY("  read %ld bytes, then %ld %s\n", got, n, ename(n < 0 ? errno : 0));
	R(waitpid(pid, &st, 0) == pid);
	SAY("  exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	R(close(s));
	R(close(l));
}

/* fork_conn: a connected client socket used in a forked child (it sends and
 * reads the echo), then by the parent after the child is gone: the socket stays
 * open across the child's exit, and both processes see the same stream; a second
 * child uses it and is killed (SIGKILL): the parent's connection is not reset. */
static void t_fork_conn(void)
{
	int s = connected(&echo_a), st = -1;
	char b[8];
	pid_t pid;
	SAY("fork_conn\n");
	R(send(s, "pre", 3, 0));
	R(read_n(s, b, 3));
	pid = fork();
	if (pid == 0) {
		alarm(10);
		if (send(s, "child", 5, 0) != 5 || read_n(s, b, 5) != 5 || memcmp(b, "child", 5))
			exit(1);
		exit(0);
	}
	waitpid(pid, &st, 0);
	printf("  child exit %d\n", st);
	fflush(stdout);
	R(send(s, "after", 5, 0));
	R(read_n(s, b, 5));
	SAY("  parent read %.5s\n", b);
	/* a child that took the connection and is killed: no reset, the parent goes on */
	pid = fork();
	if (pid == 0) {
		alarm(10);
		if (send(s, "k", 1, 0) == 1 && read_n(s, b, 1) == 1)
			raise(SIGKILL);
		exit(1);
	}
	waitpid(pid, &st, 0);
	SAY("  killed child: signal %d\n", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	R(send(s, "again", 5, 0));
	R(read_n(s, b, 5));
	SAY("  parent read %.5s\n", b);
	R(close(s));
}

/* fork_idle: a child that never touches the inherited connection (redis's
 * BGSAVE, a helper that execs): the parent goes on using it while the child
 * lives (poll, then read: the data stays the parent's) and after it exits. */
static void t_fork_idle(void)
{
	int s = connected(&echo_a), st = -1, pfd[2], ok = 1;
	char b[4], c;
	pid_t pid;
	SAY("fork_idle\n");
	R(pipe(pfd));
	pid = fork();
	if (pid == 0) {
		close(pfd[1]);
		alarm(20);
		_exit(read(pfd[0], &c, 1) < 0 ? 1 : 0); /* until the parent is done */
	}
	close(pfd[0]);
	for (int i = 0; i < 20; i++) {
		struct pollfd p = {s, POLLIN, 0};
		ok &= send(s, "ping", 4, 0) == 4 && poll(&p, 1, 5000) == 1 && read_n(s, b, 4) == 4 &&
		      memcmp(b, "ping", 4) == 0;
	}
	SAY("  20 echoes while the child lives ok %d\n", ok);
	R(write(pfd[1], "x", 1));
	R(waitpid(pid, &st, 0) == pid);
	SAY("  child exit %d\n", st);
	R(send(s, "pong", 4, 0));
	R(read_n(s, b, 4));
	R(close(pfd[1]));
	R(close(s));
}

/* A pattern both ends can check: byte i of stream `seed`. */
static char fa_byte(long i, int seed) { return (char)((i * 131 + seed * 7 + i / 251) & 0xff); }

static long fa_check(int s, long n, int seed)
{
	static char b[16384];
	long got = 0, bad = 0;
	while (got < n) {
		long k = n - got < (long)sizeof b ? n - got : (long)sizeof b;
		ssize_t r = recv(s, b, (size_t)k, 0);
		if (r <= 0)
			break;
		for (long i = 0; i < r; i++)
			bad += b[i] != fa_byte(got + i, seed);
		got += r;
	}
	return got == n && bad == 0 ? 0 : -1;
}

static long fa_send(int s, long n, int seed)
{
	static char b[16384];
	long done = 0;
	while (done < n) {
		long k = n - done < (long)sizeof b ? n - done : (long)sizeof b;
		for (long i = 0; i < k; i++)
			b[i] = fa_byte(done + i, seed);
		if (send(s, b, (size_t)k, 0) != k)
			return -1;
		done += k;
	}
	return 0;
}

/* fork_accept: the classic accept-then-fork server. The client's first 8 bytes
 * (two sends) are already received when the parent forks; the parent closes its copy at
 * once; the child reads them and 256 KiB sent after the fork, answers 300 KiB
 * and closes: the client gets every byte, then the end of the stream (the
 * connection ended only with the child's close, and the parent's close did not
 * end it). Then three such children at once. */
static void fa_child(int l, int a, int c)
{
	char b[8];
	alarm(20);
	close(l);
	close(c); /* its copy of the client end: the parent's stays open */
	if (read_n(a, b, 8) != 8 || memcmp(b, "req0req1", 8) || fa_check(a, 256 << 10, 1) ||
	    fa_send(a, 300 << 10, 2))
		exit(1);
	close(a);
	exit(0);
}

/* Wait (bounded) until n bytes are received and unread on s (FIONREAD). */
static int fa_unread(int s, int n)
{
	int v = 0;
	for (int i = 0; i < 1000 && (ioctl(s, FIONREAD, &v) < 0 || v < n); i++)
		usleep(1000);
	return v == n ? 0 : -1;
}

static void t_fork_accept(void)
{
	int l = listener(), c[3], a, i, st;
	char b[4];
	pid_t pid[3];
	SAY("fork_accept\n");
	for (i = 0; i < 3; i++) {
		struct pollfd p;
		struct timeval tv = {15, 0};
		c[i] = connected(&loop_a);
		setsockopt(c[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		a = accept(l, NULL, NULL);
		R(send(c[i], "req0", 4, 0));
		p.fd = a, p.events = POLLIN, p.revents = 0;
		R(poll(&p, 1, 10000)); /* received before the fork */
		R(send(c[i], "req1", 4, 0));
		R(fa_unread(a, 8)); /* in a second piece: under the shim, both receive
		                     * buffers hold data at the fork, none is posted */
		pid[i] = fork();
		if (pid[i] == 0)
			fa_child(l, a, c[i]);
		R(close(a)); /* the parent's copy, at once */
	}
	for (i = 0; i < 3; i++)
		R(fa_send(c[i], 256 << 10, 1));
	for (i = 0; i < 3; i++) {
		SAY("  client %d: 300 KiB ok %d", i, fa_check(c[i], 300 << 10, 2) == 0);
		SAY(" then eof %d\n", (int)recv(c[i], b, 1, 0) == 0);
		st = -1;
		waitpid(pid[i], &st, 0);
		SAY("  child exit %d\n", st);
		R(close(c[i]));
	}
	R(close(l));
}

/* fork_both: parent and child write to one connection at once (50 records of
 * 512 bytes each, 'P' or 'C'): each write arrives whole (the documented rule:
 * each write is one piece of the stream, the two processes' writes interleave
 * between writes), and the echo of all of them reaches the parent once the child
 * has exited (what the child had received and not read is handed back). */
static void t_fork_both(void)
{
	int s = connected(&echo_a), st = -1, p = 0, c = 0, torn = 0;
	static char rec[512], all[100 * 512];
	pid_t pid;
	SAY("fork_both\n");
	pid = fork();
	memset(rec, pid == 0 ? 'C' : 'P', sizeof rec);
	for (int i = 0; i < 50; i++)
		if (send(s, rec, sizeof rec, 0) != (ssize_t)sizeof rec)
			SAY("  send failed\n");
	if (pid == 0)
		exit(0);
	waitpid(pid, &st, 0);
	SAY("  child exit %d\n", st);
	R(read_n(s, all, sizeof all));
	for (int i = 0; i < 100; i++) {
		for (int j = 1; j < 512; j++)
			torn += all[i * 512 + j] != all[i * 512];
		p += all[i * 512] == 'P';
		c += all[i * 512] == 'C';
	}
	SAY("  records P %d C %d torn %d\n", p, c, torn);
	R(close(s));
}

/* fork_handoff (issue 18): a process that became the connection's holder
 * without its program touching the socket must still hand over what it
 * received when it exits. The parent forks A (the reader) and then B; it writes
 * 8 records and closes its copy, which hands the connection to B (ipkitd's
 * circle: the newest member follows the parent). The echo then reaches B's
 * receive buffers while B's shim still thinks it is away; B exits without a
 * call on the socket; A reads: on Linux the 4096 bytes wait in the one socket,
 * here B's exit must give them back. A's exit status: the records it read. */
static void t_fork_handoff(void)
{
	int s = connected(&echo_a), go[2], st = -1;
	static char rec[8 * 512];
	struct timeval tv = {5, 0};
	pid_t a, b;
	SAY("fork_handoff\n");
	if (pipe(go) < 0)
		exit(1);
	a = fork();
	if (a == 0) { /* A: waits for the go, then reads with a bound */
		char c;
		long got = 0;
		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(200);
		setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		while (got < (long)sizeof rec) {
			ssize_t r = recv(s, rec + got, sizeof rec - (size_t)got, 0);
			if (r <= 0)
				break;
			got += r;
		}
		exit((int)(got / 512));
	}
	close(go[0]);
	b = fork();
	if (b == 0) { /* B: never touches s; the echo arrives meanwhile */
		nanosleep(&(struct timespec){0, 300000000}, NULL);
		exit(0);
	}
	memset(rec, 'P', sizeof rec);
	R(send(s, rec, sizeof rec, 0));
	R(close(s));
	waitpid(b, &st, 0);
	SAY("  B exit %d\n", st);
	if (write(go[1], "g", 1) != 1)
		SAY("  write failed\n");
	close(go[1]);
	waitpid(a, &st, 0);
	SAY("  A read %d records\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* CPU time this process has used, ms. */
static double cpu_ms(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
	       (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

/* stale: every wait after the data was read sleeps (the shim leaves the readable
 * level set after a read and clears it only before a sleep: a wait that found it
 * set would return at once, again and again). poll, select, a level- and an
 * edge-triggered epoll set and a blocking recv with a timeout each wait 400 ms
 * for nothing; the process's CPU time over the 2 s must stay small (a spinning
 * wait uses a large share of a CPU even on a loaded machine). Then new data is an
 * edge again. */
static void t_stale(void)
{
	int s = connected(&echo_a), et = epoll_create1(0), lt = epoll_create1(0);
	struct epoll_event e = {EPOLLIN | EPOLLET, {.u64 = 7}}, out;
	struct timeval tv = {0, 400000};
	struct pollfd p = {s, POLLIN, 0};
	fd_set r;
	char b[2];
	double c0;
	SAY("stale\n");
	R(epoll_ctl(et, EPOLL_CTL_ADD, s, &e));
	R(send(s, "x", 1, 0));
	R(epoll_wait(et, &out, 1, 5000));
	R(read_n(s, b, 1));
	/* CPU time of each 400 ms wait: sleeping costs next to none; spinning on a
	 * stale level costs its share of a CPU, tens of ms even under heavy load */
#define QUIET(call) (c0 = cpu_ms(), (void)(call), SAY("  %s quiet %d\n", #call, cpu_ms() - c0 < 40))
	QUIET(poll(&p, 1, 400));
	R(send(s, "x", 1, 0)); /* each wait below after an arrival that was read */
	R(read_n(s, b, 1));
	FD_ZERO(&r);
	FD_SET(s, &r);
	QUIET(select(s + 1, &r, NULL, NULL, &tv));
	R(send(s, "x", 1, 0));
	R(read_n(s, b, 1));
	QUIET(epoll_wait(et, &out, 1, 400)); /* the edge of a byte already read: none */
	R(send(s, "x", 1, 0));
	R(read_n(s, b, 1));
	tv.tv_usec = 400000;
	R(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv));
	QUIET(recv(s, b, 1, 0));
	R(send(s, "x", 1, 0));
	R(read_n(s, b, 1));
	e.events = EPOLLIN;
	R(epoll_ctl(lt, EPOLL_CTL_ADD, s, &e));
	QUIET(epoll_wait(lt, &out, 1, 400));
#undef QUIET
	R(send(s, "y", 1, 0));
	R(epoll_wait(et, &out, 1, 5000));
	R(read_n(s, b, 1));
	R(close(lt));
	R(close(et));
	R(close(s));
}

/* splice: pipe -> socket (3,000 bytes), file -> pipe -> socket (10,000 bytes),
 * socket -> pipe (the echo's answer), each read back and compared; a socket at
 * both ends is EINVAL, an offset on the socket ESPIPE. */
static long splice_all(int in, loff_t *off, int out, long n)
{
	long done = 0;
	double end = now_ms() + 10000;
	while (done < n && now_ms() < end) {
		ssize_t r = splice(in, off, out, NULL, (size_t)(n - done), 0);
		if (r <= 0)
			return r < 0 ? -1 : done;
		done += r;
	}
	return done;
}

static void t_splice(void)
{
	static char pat[10000], got[10000];
	int p[2], s = connected(&echo_a), f, i;
	char tmpl[] = "/tmp/ipkpl_spliceXXXXXX";
	loff_t off = 0;
	SAY("splice\n");
	for (i = 0; i < (int)sizeof pat; i++)
		pat[i] = (char)('a' + (i * 7) % 26);
	R(pipe(p));
	R(write(p[1], pat, 3000));
	R(splice_all(p[0], NULL, s, 3000));
	R(read_n(s, got, 3000));
	SAY("  pipe->socket same %d\n", memcmp(pat, got, 3000) == 0);
	f = mkstemp(tmpl);
	unlink(tmpl);
	R(write(f, pat, sizeof pat));
	R(splice(f, &off, p[1], NULL, sizeof pat, 0));
	R(splice_all(p[0], NULL, s, sizeof pat));
	R(read_n(s, got, sizeof pat));
	SAY("  file->pipe->socket same %d off %ld\n", memcmp(pat, got, sizeof pat) == 0,
	    (long)off);
	R(send(s, "hello", 5, 0));
	R(splice_all(s, NULL, p[1], 5));
	R(read(p[0], got, 5));
	SAY("  socket->pipe %.5s\n", got);
	R(splice(s, NULL, s, NULL, 5, 0));
	R(splice(p[0], NULL, s, &off, 5, 0));
	R(close(f));
	R(close(s));
	close(p[0]);
	close(p[1]);
}

/* fork: the child makes its own connection and uses it; the parent's connection
 * keeps working after the child is gone. (The child using an inherited socket is
 * the next landing's.) */
static void t_fork(void)
{
	int s = connected(&echo_a), st = -1;
	char b[16];
	pid_t pid;
	SAY("fork\n");
	R(send(s, "before", 6, 0));
	R(read_n(s, b, 6));
	pid = fork();
	if (pid == 0) {
		int c = connected(&echo_a);
		SAY(" child\n");
		R(send(c, "child", 5, 0));
		R(read_n(c, b, 5));
		R(close(c));
		exit(0);
	}
	R(waitpid(pid, &st, 0) == pid);
	SAY("  child exit %d\n", st);
	R(send(s, "after", 5, 0));
	R(read_n(s, b, 5));
	R(close(s));
}

/* fork_listen child: wait for a connection (how 0: poll, then a blocking accept;
 * 1: epoll, then accept4), say so on `ready`, take one connection, answer its 4
 * bytes with "ok" and the last one. Exit 0 on success, 1 otherwise. */
static void fl_child(int l, int how, int ready)
{
	struct pollfd p = {l, POLLIN, 0};
	struct epoll_event e = {EPOLLIN, {.u64 = 1}}, out;
	int ep = -1, a;
	char b[4], r[3];
	alarm(20); /* a child that never gets its connection ends */
	if (how == 0) {
		poll(&p, 1, 0);
	} else {
		ep = epoll_create1(0);
		epoll_ctl(ep, EPOLL_CTL_ADD, l, &e);
	}
	if (write(ready, "r", 1) != 1)
		_exit(1);
	if (how == 1 && epoll_wait(ep, &out, 1, 15000) != 1)
		_exit(1);
	a = how == 0 ? accept(l, NULL, NULL) : accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (a < 0 || read_n(a, b, 4) != 4)
		_exit(1);
	r[0] = 'o', r[1] = 'k', r[2] = b[3];
	if (send(a, r, 3, 0) != 3)
		_exit(1);
	close(a);
	exit(0);
}

/* fork_listen: a listener shared across fork (nginx: the master listens and never
 * accepts, its workers accept): two children each take one connection, the
 * parent's own accept works after they are gone. */
static void t_fork_listen(void)
{
	int l = listener(), pfd[2], i, c[2];
	pid_t pid[2];
	char b[3], r;
	SAY("fork_listen\n");
	R(pipe(pfd));
	for (i = 0; i < 2; i++) {
		pid[i] = fork();
		if (pid[i] == 0)
			fl_child(l, i, pfd[1]);
	}
	for (i = 0; i < 2; i++) {
		struct pollfd p = {pfd[0], POLLIN, 0};
		R(poll(&p, 1, 10000) == 1 && read(pfd[0], &r, 1) == 1);
	}
	for (i = 0; i < 2; i++) {
		struct timeval tv = {15, 0}; /* a connection nobody takes fails the test */
		c[i] = connected(&loop_a);
		setsockopt(c[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		R(send(c[i], i ? "bbb1" : "aaa0", 4, 0));
	}
	for (i = 0; i < 2; i++) {
		R(read_n(c[i], b, 3));
		SAY("  reply %c%c%c\n", b[0], b[1], b[2]);
		R(close(c[i]));
	}
	for (i = 0; i < 2; i++) {
		int st = -1;
		R(waitpid(pid[i], &st, 0) == pid[i]);
		SAY("  child %d exit %d\n", i, st);
	}
	{
		int s = pair(l, &c[0]);
		R(send(c[0], "p", 1, 0));
		R(read_n(s, b, 1));
		R(close(s));
		R(close(c[0]));
	}
	R(close(l));
	close(pfd[0]);
	close(pfd[1]);
}

/* EPOLLEXCLUSIVE (ADD only), nested epoll, epoll_pwait2. */
static void t_epoll_more(void)
{
	int l = listener(), c, s, ep1 = epoll_create1(0), ep2 = epoll_create1(0);
	struct epoll_event e, out[4];
	char b[4];
	SAY("epoll_more\n");
	s = pair(l, &c);
	R(ep_add(ep1, s, EPOLLIN | EPOLLEXCLUSIVE, 1));
	e.events = EPOLLIN | EPOLLEXCLUSIVE;
	e.data.u64 = 1;
	R(epoll_ctl(ep1, EPOLL_CTL_MOD, s, &e));
	R(ep_add(ep2, ep1, EPOLLIN, 2));
	ep_show(ep2, 50);
	R(send(c, "n", 1, 0));
	ep_show(ep2, 5000);
	ep_show(ep1, 50);
	R(epoll_pwait2(ep1, out, 4, &(struct timespec){1, 0}, NULL));
	SAY("  [%llu %#x]\n", (unsigned long long)out[0].data.u64, out[0].events);
	R(recv(s, b, sizeof b, 0));
	R(epoll_pwait2(ep1, out, 4, &(struct timespec){0, 50000000}, NULL));
	{
		/* close removes a socket from every set: its number, reused at once by the
		 * next socket, can be added again (nginx does this all the time) */
		int c2, s2 = pair(l, &c2), c3, s3, n2 = s2;
		R(ep_add(ep1, s2, EPOLLIN, 9));
		R(close(s2));
		s3 = pair(l, &c3);
		R(c3 == n2);
		R(ep_add(ep1, c3, EPOLLIN, 10));
		R(send(s3, "r", 1, 0));
		ep_show(ep1, 5000);
		close(c2);
		close(c3);
		close(s3);
	}
	R(close(ep2));
	R(close(ep1));
	R(close(c));
	R(close(s));
	R(close(l));
}

/* Level-triggered epoll (the shim keeps the level itself, svc/preload/README.md
 * "epoll"): a socket left readable is reported at every wait, also after a partial
 * read; with maxevents 1 two ready sockets take turns (Linux re-queues a reported
 * item at the tail); a socket drained leaves the set quiet; the set looks ready to
 * poll and to an outer set while a reported socket is still readable; MOD to
 * edge-triggered stops the repeats, MOD back starts them again. */
static void ep_show1(int ep, int timeout)
{
	struct epoll_event ev;
	int n = epoll_wait(ep, &ev, 1, timeout);
	SAY("  epoll_wait max 1 = %d:", n);
	if (n == 1)
		SAY(" [%llu %#x]", (unsigned long long)ev.data.u64, ev.events);
	SAY("\n");
}

static void t_epoll_ltlist(void)
{
	int l = listener(), c1, c2, s1, s2, ep = epoll_create1(0), outer = epoll_create1(0), i;
	struct epoll_event e;
	struct pollfd p;
	char b[16];
	SAY("epoll_ltlist\n");
	s1 = pair(l, &c1);
	s2 = pair(l, &c2);
	R(ep_add(ep, s1, EPOLLIN, 1));
	R(ep_add(ep, s2, EPOLLIN, 2));
	R(ep_add(outer, ep, EPOLLIN, 9));
	R(send(c1, "abcdef", 6, 0));
	wait_avail(s1, 6);
	R(send(c2, "xyz", 3, 0));
	wait_avail(s2, 3);
	for (i = 0; i < 5; i++)
		ep_show1(ep, 5000);
	R(recv(s1, b, 2, 0)); /* partly read: still readable */
	ep_show(ep, 5000);
	p.fd = ep;
	p.events = POLLIN;
	p.revents = 0;
	i = poll(&p, 1, 1000);
	SAY("  poll(ep) = %d %#x\n", i, p.revents);
	ep_show(outer, 1000);
	R(read_n(s1, b, 4));
	R(read_n(s2, b, 3));
	ep_show(ep, 50); /* drained: nothing */
	ep_show(outer, 50);
	e.events = EPOLLIN | EPOLLET;
	e.data.u64 = 3;
	R(epoll_ctl(ep, EPOLL_CTL_MOD, s1, &e));
	R(send(c1, "12", 2, 0));
	wait_avail(s1, 2);
	ep_show(ep, 5000);
	ep_show(ep, 50); /* edge-triggered: once */
	e.events = EPOLLIN;
	e.data.u64 = 4;
	R(epoll_ctl(ep, EPOLL_CTL_MOD, s1, &e)); /* level again: the data is there */
	ep_show(ep, 5000);
	ep_show(ep, 5000);
	R(epoll_ctl(ep, EPOLL_CTL_DEL, s1, NULL));
	ep_show(ep, 50); /* deleted: no repeat */
	R(read_n(s1, b, 2));
	R(close(outer));
	R(close(ep));
	R(close(c1));
	R(close(c2));
	R(close(s1));
	R(close(s2));
	R(close(l));
}

/* EPOLLET|EPOLLONESHOT re-armed by MOD after everything was read: the next
 * arrival must still be reported (under the shim the re-arm met the eventfd's
 * stale level, the kernel spent its one shot on it and the arrival was lost). */
static void t_epoll_rearm(void)
{
	int l = listener(), c, s, ep = epoll_create1(0), i;
	struct epoll_event e;
	char b[8];
	SAY("epoll_rearm\n");
	s = pair(l, &c);
	for (i = 0; i < 3; i++) {
		uint32_t mode = i == 0 ? EPOLLET | EPOLLONESHOT : i == 1 ? EPOLLONESHOT : EPOLLET;
		if (i == 0)
			R(ep_add(ep, s, EPOLLIN | mode, 5));
		R(send(c, "d", 1, 0));
		ep_show(ep, 5000);
		R(read_n(s, b, 1));
		e.events = EPOLLIN | mode;
		e.data.u64 = 6 + (uint64_t)i;
		R(epoll_ctl(ep, EPOLL_CTL_MOD, s, &e)); /* re-armed with nothing to read */
		ep_show(ep, 50);
		R(send(c, "e", 1, 0));
		ep_show(ep, 5000);
		R(read_n(s, b, 1));
		R(epoll_ctl(ep, EPOLL_CTL_MOD, s, &e));
	}
	R(close(ep));
	R(close(c));
	R(close(s));
	R(close(l));
}

/* Arrivals while the program waits nowhere (it spins on FIONREAD, as a busy
 * program does): under the shim their eventfd writes are deferred to the next
 * wait, which must still report them in Linux's order (level-triggered turns,
 * one edge for two arrivals); and a reply written right after a wait, with no
 * wait after it, must still reach the peer (its doorbell is not left owed). */
static int spin_avail(int s, int n)
{
	int v = 0;
	double end = now_ms() + 10000;
	while (now_ms() < end)
		if (ioctl(s, FIONREAD, &v) == 0 && v >= n)
			return 1;
	return 0;
}

static void t_defer(void)
{
	int l = listener(), c1, c2, c3, s1, s2, s3, ep = epoll_create1(0), et = epoll_create1(0);
	struct epoll_event out;
	char b[16];
	SAY("defer\n");
	s1 = pair(l, &c1);
	s2 = pair(l, &c2);
	s3 = pair(l, &c3);
	R(ep_add(ep, s1, EPOLLIN, 1));
	R(ep_add(ep, s2, EPOLLIN, 2));
	R(ep_add(et, s3, EPOLLIN | EPOLLET, 3));
	R(send(c1, "aa", 2, 0));
	R(spin_avail(s1, 2));
	R(send(c2, "bb", 2, 0));
	R(spin_avail(s2, 2));
	ep_show1(ep, 5000);
	ep_show1(ep, 5000);
	ep_show1(ep, 5000);
	R(read_n(s1, b, 2));
	R(read_n(s2, b, 2));
	ep_show(ep, 50);
	R(send(c3, "1", 1, 0));
	R(spin_avail(s3, 1));
	R(send(c3, "2", 1, 0));
	R(spin_avail(s3, 2));
	ep_show(et, 5000); /* two arrivals, one edge */
	ep_show(et, 50);
	R(read_n(s3, b, 2));
	R(send(c1, "q", 1, 0));
	R(epoll_wait(ep, &out, 1, 5000));
	R(read_n(s1, b, 1));
	R(send(s1, "reply", 5, 0));
	R(spin_avail(c1, 5)); /* no wait in between */
	R(read_n(c1, b, 5));
	R(close(et));
	R(close(ep));
	R(close(c1));
	R(close(c2));
	R(close(c3));
	R(close(s1));
	R(close(s2));
	R(close(s3));
	R(close(l));
}

/* A thread asleep in epoll_wait while another makes data arrive on four sockets
 * of its set at once (under the shim the first arrival's write wakes it and the
 * others are deferred to it): it sees all four, each once per arrival. */
#define DT_N 4
static int dt_ep;
static void *dt_waiter(void *arg)
{
	int *seen = (int *)arg, got = 0, i;
	double end = now_ms() + 10000;
	while (got < DT_N && now_ms() < end) {
		struct epoll_event ev[8];
		int n = epoll_wait(dt_ep, ev, 8, 1000);
		for (i = 0; i < n; i++)
			if (ev[i].data.u64 < DT_N && !seen[ev[i].data.u64]++)
				got++;
	}
	return NULL;
}

static void t_defer_threads(void)
{
	int l = listener(), c[DT_N], s[DT_N], seen[DT_N] = {0}, i, twice = 0;
	pthread_t t;
	char b[4];
	SAY("defer_threads\n");
	dt_ep = epoll_create1(0);
	for (i = 0; i < DT_N; i++) {
		s[i] = pair(l, &c[i]);
		R(ep_add(dt_ep, s[i], EPOLLIN | EPOLLET, (uint64_t)i));
	}
	R(pthread_create(&t, NULL, dt_waiter, seen));
	{
		/* the waiter is asleep in the kernel by now (else it merely finds the
		 * data on its way in: the same output); spinning, not sleeping, so it is
		 * the only waiter (the shim's deferral while one thread sleeps) */
		double t0 = now_ms();
		while (now_ms() - t0 < 200)
			;
	}
	for (i = 0; i < DT_N; i++)
		R(send(c[i], "w", 1, 0));
	R(pthread_join(t, NULL));
	for (i = 0; i < DT_N; i++)
		twice += seen[i] != 1;
	SAY("  each socket seen once: %d\n", twice == 0);
	for (i = 0; i < DT_N; i++) {
		R(read_n(s[i], b, 1));
		R(close(c[i]));
		R(close(s[i]));
	}
	R(close(dt_ep));
	R(close(l));
}

/* Many sockets at once: 300 connections (600 sockets) to ourselves, a byte each
 * way on every one. */
#define MANY 300
static void t_many(void)
{
	static int cs[MANY], ss[MANY];
	int l = listener(), i, ok = 0, maxfd = 0;
	char b;
	SAY("many\n");
	for (i = 0; i < MANY; i++) {
		ss[i] = pair(l, &cs[i]);
		maxfd = ss[i] > maxfd ? ss[i] : maxfd;
	}
	SAY("  highest descriptor %d\n", maxfd);
	for (i = 0; i < MANY; i++)
		send(cs[i], "m", 1, 0);
	for (i = 0; i < MANY; i++)
		ok += recv(ss[i], &b, 1, 0) == 1 && b == 'm' && send(ss[i], "r", 1, 0) == 1;
	for (i = 0; i < MANY; i++)
		ok += recv(cs[i], &b, 1, 0) == 1 && b == 'r';
	SAY("  exchanges %d\n", ok);
	for (i = 0; i < MANY; i++) {
		close(cs[i]);
		close(ss[i]);
	}
	R(close(l));
}

/* A socket's first number closed while a dup keeps it open, the number reused at
 * once by a file: data arriving for the socket changes nothing in the file. */
static void t_reuse(void)
{
	int l = listener(), c, s, f, d, old;
	char path[] = "/tmp/pl_reuseXXXXXX", b[8];
	SAY("reuse\n");
	s = pair(l, &c);
	old = c;
	d = dup(c);
	R(close(c));
	f = mkstemp(path);
	unlink(path);
	R(f == old);
	R(write(f, "abc", 3));
	R(send(s, "x", 1, 0));
	R(recv(d, b, sizeof b, 0));
	R(close(s));
	R(recv(d, b, sizeof b, 0));
	R(lseek(f, 0, SEEK_END));
	R(pread(f, b, sizeof b, 0));
	R(close(f));
	R(close(d));
	R(close(l));
}

/* Shim only (test_preload.py daemon_dies): a blocked recv while ipkitd is killed
 * ends with an error, as on a connection the network reset, never hangs. */
static void t_hold(void)
{
	int s = connected(&echo_a);
	char b[8];
	SAY("hold\n");
	SAY("  ready\n");
	R(recv(s, b, sizeof b, 0) < 0 && errno == ECONNRESET);
	R(socket(AF_INET, SOCK_STREAM, 0) < 0);
	R(close(s));
}

/* As hold, asleep in epoll_wait (the shim's waiting thread armed on ipkitd's
 * wake eventfd, the pump parked): ipkitd's death still ends the wait. */
static void t_hold_ep(void)
{
	int s = connected(&echo_a), ep = epoll_create1(0);
	struct epoll_event ev;
	char b[8];
	SAY("hold_ep\n");
	R(ep_add(ep, s, EPOLLIN, 3));
	SAY("  ready\n");
	R(epoll_wait(ep, &ev, 1, 20000) == 1 && (ev.events & EPOLLIN));
	R(recv(s, b, sizeof b, 0) < 0 && errno == ECONNRESET);
	R(socket(AF_INET, SOCK_STREAM, 0) < 0);
	R(close(ep));
	R(close(s));
}

struct fam {
	const char *name;
	void (*fn)(void);
};

static void t_lt(void) { t_epoll(0, "epoll_lt"); }
static void t_et(void) { t_epoll(EPOLLET, "epoll_et"); }
/* v6 (issue 18): AF_INET6 sockets. The domain and IPV6_V6ONLY (0, Linux's
 * default) read back; an AF_INET address refused in Linux's order (short: EINVAL);
 * a listener bound to [::] with V6ONLY 0 is dual-stack: an AF_INET6 client to the
 * IPv4-mapped loop address ::ffff:LOOP_IP is accepted and both sides name each
 * other as ::ffff:a.b.c.d with 28-byte AF_INET6 addresses; with V6ONLY 1 the same
 * bind leaves the IPv4 port free for an AF_INET listener. UDP AF_INET6 sockets: a
 * datagram to the mapped loop address comes back with a mapped sender. */
static void v6_mapped(struct sockaddr_in6 *a6, const struct sockaddr_in *a4)
{
	memset(a6, 0, sizeof *a6);
	a6->sin6_family = AF_INET6;
	a6->sin6_port = a4->sin_port;
	a6->sin6_addr.s6_addr[10] = a6->sin6_addr.s6_addr[11] = 0xff;
	memcpy(&a6->sin6_addr.s6_addr[12], &a4->sin_addr, 4);
}

static void v6_say(const char *what, const struct sockaddr_in6 *a, socklen_t len)
{
	SAY("  %s: family %d len %u mapped %d port set %d\n", what, a->sin6_family,
	    (unsigned)len, IN6_IS_ADDR_V4MAPPED(&a->sin6_addr), a->sin6_port != 0);
}

static void t_v6_opts(int s)
{
	int v = -1;
	socklen_t lv = sizeof v;
	struct sockaddr_in a4 = loop_a;
	R(getsockopt(s, SOL_SOCKET, SO_DOMAIN, &v, &lv));
	SAY("  domain %d\n", v);
	lv = sizeof v;
	R(getsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &v, &lv));
	SAY("  v6only %d\n", v);
	R(bind(s, (struct sockaddr *)&a4, sizeof a4));
	R(connect(s, (struct sockaddr *)&a4, sizeof a4));
}

static void t_v6(void)
{
	struct sockaddr_in6 any, to, a, b;
	socklen_t la = sizeof a, lb = sizeof b;
	int l = socket(AF_INET6, SOCK_STREAM, 0), c, v, one = 1, u, u2;
	char buf[4];
	SAY("v6\n");
	t_v6_opts(l);
	memset(&any, 0, sizeof any);
	any.sin6_family = AF_INET6;
	any.sin6_port = loop_a.sin_port;
	R(setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one));
	R(bind(l, (struct sockaddr *)&any, sizeof any));
	R(listen(l, 4));
	R(getsockname(l, (struct sockaddr *)&a, &la));
	v6_say("listener", &a, la);
	c = socket(AF_INET6, SOCK_STREAM, 0);
	v6_mapped(&to, &loop_a);
	R(connect(c, (struct sockaddr *)&to, sizeof to));
	la = sizeof a;
	v = accept(l, (struct sockaddr *)&a, &la);
	SAY("  accepted %d\n", v >= 0);
	v6_say("accept's peer", &a, la);
	la = sizeof a;
	R(getsockname(c, (struct sockaddr *)&a, &la));
	R(getpeername(v, (struct sockaddr *)&b, &lb));
	v6_say("client name", &a, la);
	SAY("  client name = server's peer: port %d\n", a.sin6_port == b.sin6_port);
	la = sizeof a;
	R(getsockname(v, (struct sockaddr *)&a, &la));
	v6_say("accepted name", &a, la);
	SAY("  accepted name = where the client connected: %d\n",
	    !memcmp(&a.sin6_addr, &to.sin6_addr, 16) && a.sin6_port == to.sin6_port);
	R(send(c, "v6!", 3, 0));
	R(read_n(v, buf, 3));
	SAY("  stream %.3s\n", buf);
	R(close(c));
	R(close(v));
	R(close(l));
	/* V6ONLY 1: the IPv4 side of the port stays free */
	l = socket(AF_INET6, SOCK_STREAM, 0);
	R(setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one));
	R(setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one));
	R(bind(l, (struct sockaddr *)&any, sizeof any));
	R(listen(l, 4));
	v = listener(); /* AF_INET on the same port */
	R(close(v));
	R(close(l));
	/* UDP */
	u = socket(AF_INET6, SOCK_DGRAM, 0);
	u2 = socket(AF_INET6, SOCK_DGRAM, 0);
	any.sin6_port = closed_a.sin_port; /* a port nobody uses */
	R(bind(u, (struct sockaddr *)&any, sizeof any));
	v6_mapped(&to, &loop_a);
	to.sin6_port = closed_a.sin_port;
	R(sendto(u2, "dg6", 3, 0, (struct sockaddr *)&to, sizeof to));
	la = sizeof a;
	R(recvfrom(u, buf, sizeof buf, 0, (struct sockaddr *)&a, &la));
	v6_say("datagram from", &a, la);
	R(close(u));
	R(close(u2));
	/* A link-local address in a zone no interface has: Linux answers bind ENODEV,
	 * sendto and connect ENETUNREACH; the shim must hand sin6_scope_id to
	 * ipkitd, which answers the same (include/ipkit/svc.h). */
	memset(&to, 0, sizeof to);
	to.sin6_family = AF_INET6;
	to.sin6_port = closed_a.sin_port;
	to.sin6_addr.s6_addr[0] = 0xfe;
	to.sin6_addr.s6_addr[1] = 0x80;
	to.sin6_addr.s6_addr[15] = 1;
	to.sin6_scope_id = 0x7ffffff0u;
	u = socket(AF_INET6, SOCK_DGRAM, 0);
	R(sendto(u, "zn", 2, 0, (struct sockaddr *)&to, sizeof to));
	R(bind(u, (struct sockaddr *)&to, sizeof to));
	R(close(u));
	c = socket(AF_INET6, SOCK_STREAM, 0);
	R(connect(c, (struct sockaddr *)&to, sizeof to));
	R(close(c));
}

static void t_os(void) { t_epoll(EPOLLONESHOT, "epoll_oneshot"); }

/* Round trips through an epoll loop, as a server's (redis: level-triggered):
 * under the shim the waiting thread takes its completions itself, woken by
 * ipkitd's wake eventfd, and the pump stays parked (test_preload.py checks the
 * shim's counters: completions handled by the waiter, not the pump). Then a
 * thread blocked in recv while this one sleeps in epoll_wait on another socket:
 * its data arrives (the pump is not needed for it, or is kicked out of its park),
 * and its reply wakes the epoll_wait. */
#define RP_N 2000
static int rp_fd;
static void *rp_blocked(void *arg)
{
	char b[8];
	int peer = *(int *)arg;
	long r = read_n(rp_fd, b, 5);
	/* silent: this thread's lines would interleave with the main one's */
	if (r == 5 && send(peer, "reply", 5, 0) != 5)
		rp_fd = -1;
	return NULL;
}

static void *rp_late(void *arg)
{
	poll(NULL, 0, 100); /* the other two asleep by now (else the same output) */
	if (send(*(int *)arg, "hello", 5, 0) != 5)
		rp_fd = -2;
	return NULL;
}

static void *rp_drain(void *arg)
{
	static char b[65536];
	int fd = *(int *)arg;
	long total = 0;
	ssize_t r;
	poll(NULL, 0, 100); /* the writer asleep for EPOLLOUT by now (else the same output) */
	while ((r = recv(fd, b, sizeof b, 0)) > 0 && total < (64l << 20))
		total += r; /* to the end of the stream (the writer's shutdown) */
	return NULL;
}

static void t_reap(void)
{
	static char out[32], in[32];
	int s = connected(&echo_a), ep = epoll_create1(0), i, ok = 1, fl, l, a1, b1, a2, b2;
	double end = now_ms() + 60000;
	pthread_t t1, t2;
	struct epoll_event ev;
	SAY("reap\n");
	fl = fcntl(s, F_GETFL);
	R(fcntl(s, F_SETFL, fl | O_NONBLOCK));
	R(ep_add(ep, s, EPOLLIN, 7));
	for (i = 0; i < RP_N && ok && now_ms() < end; i++) {
		long got = 0;
		memset(out, 'a' + i % 26, sizeof out);
		if (send(s, out, sizeof out, 0) != (ssize_t)sizeof out)
			ok = 0;
		while (ok && got < (long)sizeof in) {
			ssize_t r;
			int n = epoll_wait(ep, &ev, 1, 10000);
			if (n != 1 || ev.data.u64 != 7 || !(ev.events & EPOLLIN)) {
				ok = 0;
				break;
			}
			r = recv(s, in + got, sizeof in - (size_t)got, 0);
			if (r > 0)
				got += r;
			else if (r == 0 || errno != EAGAIN)
				ok = 0;
		}
		if (ok && memcmp(in, out, sizeof in) != 0)
			ok = 0;
	}
	SAY("  %d round trips through epoll_wait, echo intact %d\n", i, ok);
	R(close(ep));
	R(close(s));
	/* a blocking recv in one thread, epoll_wait in this one */
	l = listener();
	a1 = pair(l, &b1); /* the blocked thread's: a1 read, b1 written */
	a2 = pair(l, &b2); /* this one's: a2 in the set, its peer b2 replies */
	rp_fd = a1;
	ep = epoll_create1(0);
	R(ep_add(ep, a2, EPOLLIN, 9));
	R(pthread_create(&t1, NULL, rp_blocked, &b2));
	R(pthread_create(&t2, NULL, rp_late, &b1));
	ep_show(ep, 10000);
	R(read_n(a2, in, 5));
	SAY("  reply %.5s\n", in);
	R(pthread_join(t1, NULL));
	R(pthread_join(t2, NULL));
	SAY("  threads' sends ok %d\n", rp_fd == a1);
	R(close(ep));
	R(close(a1));
	R(close(b1));
	R(close(a2));
	R(close(b2));
	/* a full send queue, then EPOLLOUT (edge-triggered, as nginx) once the peer
	 * reads: the SEND completions must wake the sleeper */
	{
		static char big[65536];
		int c, w = pair(l, &c), full = 0, out = 0, k;
		long sent = 0;
		ep = epoll_create1(0);
		R(fcntl(w, F_SETFL, fcntl(w, F_GETFL) | O_NONBLOCK));
		R(ep_add(ep, w, EPOLLOUT | EPOLLET, 5));
		ep_show(ep, 10000); /* writable at first */
		for (k = 0; k < 100000 && sent < (32l << 20); k++) {
			ssize_t r = send(w, big, sizeof big, 0);
			if (r < 0) {
				full = errno == EAGAIN;
				break;
			}
			sent += r;
		}
		SAY("  send queue full %d\n", full);
		R(pthread_create(&t1, NULL, rp_drain, &c));
		for (k = 0; k < 100 && !out; k++) {
			int n = epoll_wait(ep, &ev, 1, 10000);
			out = n == 1 && (ev.events & EPOLLOUT);
		}
		SAY("  EPOLLOUT once the peer read %d\n", out);
		R(shutdown(w, SHUT_WR));
		R(pthread_join(t1, NULL));
		R(close(ep));
		R(close(w));
		R(close(c));
	}
	R(close(l));
}


static const struct fam fams[] = {
	{"blocking", t_blocking}, {"nonblocking", t_nonblocking}, {"refused", t_refused},
	{"accept", t_accept}, {"timeouts", t_timeouts}, {"dup", t_dup}, {"poll", t_poll},
	{"select", t_select}, {"epoll_lt", t_lt}, {"epoll_et", t_et}, {"epoll_oneshot", t_os},
	{"epoll_rdhup", t_epoll_rdhup}, {"epoll_mixed", t_epoll_mixed}, {"opts", t_opts},
	{"signals", t_signals}, {"threads", t_threads}, {"sendfile", t_sendfile},
	{"udp", t_udp}, {"fork", t_fork}, {"splice", t_splice}, {"fork_conn", t_fork_conn}, {"fork_accept", t_fork_accept}, {"fork_both", t_fork_both}, {"fork_handoff", t_fork_handoff}, {"stale", t_stale}, {"fork_idle", t_fork_idle}, {"exec", t_exec}, {"exec_conn", t_exec_conn}, {"exit_fin", t_exit_fin}, {"small_stack", t_small_stack}, {"names", t_names}, {"linger0", t_linger0}, {"unread", t_unread}, {"mmsg", t_mmsg}, {"fork_listen", t_fork_listen}, {"epoll_more", t_epoll_more}, {"epoll_ltlist", t_epoll_ltlist}, {"defer", t_defer}, {"defer_threads", t_defer_threads}, {"epoll_rearm", t_epoll_rearm}, {"reap", t_reap},
	{"many", t_many}, {"reuse", t_reuse}, {"hold", t_hold}, {"hold_ep", t_hold_ep}, {"v6", t_v6},
};

int main(int argc, char **argv)
{
	size_t i;
	int any = 0;
	if (argc == 5 && strcmp(argv[1], "exec_child") == 0)
		return exec_child(argv);
	if (argc == 4 && strcmp(argv[1], "exec_conn_child") == 0)
		return exec_conn_child(argv);
	if (argc != 7) {
		fprintf(stderr, "usage: pl_calls FAMILY ECHO_IP ECHO_PORT LOOP_IP PORT CLOSED_PORT\n");
		return 2;
	}
	addr(&echo_a, argv[2], argv[3]);
	addr(&loop_a, argv[4], argv[5]);
	addr(&closed_a, argv[2], argv[6]);
	for (i = 0; i < sizeof fams / sizeof fams[0]; i++)
		if ((strcmp(argv[1], "all") == 0 && fams[i].fn != t_hold &&
		     fams[i].fn != t_hold_ep) ||
		    strcmp(argv[1], fams[i].name) == 0) {
			fams[i].fn();
			any = 1;
		}
	return any ? 0 : 2;
}
