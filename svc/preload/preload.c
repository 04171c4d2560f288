/*
 * libipkit-preload: start-up switch, real symbols, descriptor table, the completion
 * pump and the statistics (svc/preload/README.md).
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "preload.h"

struct pl_real pl_r;
struct pl_stats pl_st;

/* ------------------------------------------------------------ real symbols */

/* dlsym returns an object pointer; POSIX guarantees it converts to a function
 * pointer of the right type, which C writes as a copy of the pointer's bytes. */
#define PL_SYM(name) do { void *p_ = dlsym(RTLD_NEXT, #name); \
	memcpy(&pl_r.name, &p_, sizeof p_); } while (0)

void pl_resolve(void)
{
	static int done;
	if (__atomic_load_n(&done, __ATOMIC_ACQUIRE))
		return;
	PL_SYM(socket); PL_SYM(bind); PL_SYM(listen); PL_SYM(accept); PL_SYM(accept4);
	PL_SYM(connect); PL_SYM(read); PL_SYM(write); PL_SYM(readv); PL_SYM(writev);
	PL_SYM(send); PL_SYM(recv); PL_SYM(sendto); PL_SYM(recvfrom); PL_SYM(sendmsg);
	PL_SYM(recvmsg); PL_SYM(shutdown); PL_SYM(close); PL_SYM(dup); PL_SYM(dup2);
	PL_SYM(dup3); PL_SYM(fcntl); PL_SYM(ioctl); PL_SYM(getsockname); PL_SYM(getpeername);
	PL_SYM(getsockopt); PL_SYM(setsockopt); PL_SYM(poll); PL_SYM(ppoll); PL_SYM(select);
	PL_SYM(pselect); PL_SYM(epoll_create); PL_SYM(epoll_create1); PL_SYM(epoll_ctl);
	PL_SYM(epoll_wait); PL_SYM(epoll_pwait);
	__atomic_store_n(&done, 1, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------ the switch */

/* IPKIT_PRELOAD: all (default) | none | ports:P1,P2,... | addrs:A[/N],... (ports
 * and addrs may be joined by '+') — which AF_INET and AF_INET6 sockets go to
 * ipkitd. IPKIT_PRELOAD_FALLBACK: kernel (default) | fail — what happens when
 * ipkitd is unreachable. */
static int cfg_mode = -1; /* 0 none, 1 all, 2 listed */
static uint8_t cfg_ports[65536 / 8];
#define PL_CFG_ADDRS 32
static struct pl_cfg_net {
	int family; /* AF_INET, AF_INET6 */
	uint8_t a[16];
	unsigned bits;
} cfg_addrs[PL_CFG_ADDRS];
static int cfg_naddrs;

static void pl_cfg_ports(const char *p, const char *stop)
{
	while (p < stop && *p) {
		char *end;
		unsigned long v = strtoul(p, &end, 10);
		if (end == p)
			break;
		if (v < 65536)
			cfg_ports[v / 8] |= (uint8_t)(1u << (v % 8));
		p = *end == ',' ? end + 1 : end;
	}
}

/* "A" or "A/N", IPv4 or IPv6, comma separated; a malformed entry is skipped
 * (said once on stderr). */
static void pl_cfg_addrs(const char *p, const char *stop)
{
	while (p < stop && *p && cfg_naddrs < PL_CFG_ADDRS) {
		char one[64], *slash;
		size_t n = strcspn(p, ",+");
		struct pl_cfg_net *c = &cfg_addrs[cfg_naddrs];
		if (n >= sizeof one)
			n = sizeof one - 1;
		memcpy(one, p, n);
		one[n] = 0;
		p += n;
		p += *p == ',';
		slash = strchr(one, '/');
		if (slash)
			*slash++ = 0;
		c->family = strchr(one, ':') ? AF_INET6 : AF_INET;
		c->bits = c->family == AF_INET ? 32 : 128;
		if (slash) {
			char *end;
			unsigned long b = strtoul(slash, &end, 10);
			c->bits = *end || b > c->bits ? 999 : (unsigned)b;
		}
		if (c->bits == 999 || inet_pton(c->family, one, c->a) != 1) {
			fprintf(stderr, "ipkit-preload: IPKIT_PRELOAD: not an address: %s\n", one);
			continue;
		}
		if (c->family == AF_INET6 && c->bits >= 96 &&
		    !memcmp(c->a, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12)) {
			memmove(c->a, c->a + 12, 4); /* ::ffff:a.b.c.d: the IPv4 address */
			c->family = AF_INET;
			c->bits -= 96;
		}
		cfg_naddrs++;
	}
}

static void pl_cfg(void)
{
	const char *e = getenv("IPKIT_PRELOAD");
	if (cfg_mode >= 0)
		return;
	if (e && strcmp(e, "none") == 0) {
		cfg_mode = 0;
	} else if (e && (strncmp(e, "ports:", 6) == 0 || strncmp(e, "addrs:", 6) == 0)) {
		const char *p = e;
		while (*p) {
			const char *stop = strchr(p, '+');
			if (!stop)
				stop = p + strlen(p);
			if (strncmp(p, "ports:", 6) == 0)
				pl_cfg_ports(p + 6, stop);
			else if (strncmp(p, "addrs:", 6) == 0)
				pl_cfg_addrs(p + 6, stop);
			p = *stop ? stop + 1 : stop;
		}
		cfg_mode = 2;
	} else {
		cfg_mode = 1;
	}
}

int pl_loop_kernel(void)
{
	static int v = -1;
	if (v < 0) {
		const char *e = getenv("IPKIT_PRELOAD_LOOPBACK");
		v = !(e && strcmp(e, "ipkit") == 0);
	}
	return v;
}

int pl_route_addr(const struct sockaddr *sa)
{
	const uint8_t *a;
	int fam = sa->sa_family;
	pl_cfg();
	if (cfg_mode == 1)
		return 1;
	if (cfg_mode != 2)
		return 0;
	if (fam == AF_INET)
		a = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
	else if (fam == AF_INET6)
		a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
	else
		return 0;
	if (fam == AF_INET6 && !memcmp(a, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12)) {
		fam = AF_INET; /* ::ffff:a.b.c.d is the IPv4 address it carries */
		a += 12;
	}
	for (int i = 0; i < cfg_naddrs; i++) {
		const struct pl_cfg_net *c = &cfg_addrs[i];
		unsigned full = c->bits / 8, rest = c->bits % 8;
		if (c->family != fam || memcmp(a, c->a, full) != 0)
			continue;
		if (rest && ((a[full] ^ c->a[full]) & (uint8_t)(0xff00u >> rest)))
			continue;
		return 1;
	}
	return 0;
}

int pl_route_all(void)
{
	pl_cfg();
	return cfg_mode == 1;
}

int pl_route_port(unsigned port)
{
	pl_cfg();
	if (cfg_mode == 1)
		return 1;
	return cfg_mode == 2 && port < 65536 && (cfg_ports[port / 8] >> (port % 8)) & 1;
}

/* ------------------------------------------------------------ the daemon */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* svc open, pump list */
static struct ipk_svc *g_svc;
static int g_svc_state; /* 0 not tried, 1 open, 2 unreachable: kernel, 3 unreachable: fail */
static int g_svc_err;
static struct pl_sock *g_live;
static pthread_t g_pump;

static void *pl_pump(void *arg);
static long pl_hide_base(void);
static void pl_reap_open(struct ipk_svc *svc);

static void pl_open_locked(void)
{
	struct ipk_svc_opts o;
	const char *fb = getenv("IPKIT_PRELOAD_FALLBACK");
	int err = 0;
	ipk_svc_opts_default(&o);
	/* the most ipkitd gives by default (it clamps): memfd pages cost only when
	 * touched; each TCP socket uses 2 x 64 KiB to receive and rings of ~24 KiB */
	o.buf_bytes = 256ull << 20;
	o.ring_bytes = 64ull << 20;
	/* a process that dies without exit()'s flush (_exit, a signal) ends its
	 * connections as on Linux: FIN, or RST where bytes were never read */
	o.flags = IPK_SVC_OPEN_EXIT_FIN;
	g_svc = ipk_svc_open(NULL, &o, &err);
	if (g_svc)
		ipk_svc_move_fds(g_svc, pl_hide_base());
	if (g_svc)
		pl_reap_open(g_svc);
	if (g_svc && pthread_create(&g_pump, NULL, pl_pump, NULL) == 0) {
		pthread_detach(g_pump);
		__atomic_store_n(&g_svc_state, 1, __ATOMIC_RELEASE);
		return;
	}
	if (g_svc)
		ipk_svc_close_all(g_svc);
	g_svc = NULL;
	g_svc_err = err ? -err : EAGAIN;
	g_svc_state = fb && strcmp(fb, "fail") == 0 ? 3 : 2;
	/* one line, once per process: the switch says what happens next */
	fprintf(stderr, "ipkit-preload: ipkitd not reachable at %s (%s): %s\n",
	        getenv("IPKITD_SOCKET") ? getenv("IPKITD_SOCKET") : "/run/ipkitd.sock",
	        strerror(g_svc_err),
	        g_svc_state == 3 ? "AF_INET sockets fail" : "using kernel sockets");
}

struct ipk_svc *pl_svc(void)
{
	struct ipk_svc *s;
	/* once open it stays open: no lock (the pump calls this under g_mu) */
	if (__atomic_load_n(&g_svc_state, __ATOMIC_ACQUIRE) == 1)
		return g_svc;
	pthread_mutex_lock(&g_mu);
	if (g_svc_state == 0)
		pl_open_locked();
	s = g_svc;
	if (!s && g_svc_state == 3)
		errno = g_svc_err;
	else if (!s)
		errno = 0;
	pthread_mutex_unlock(&g_mu);
	return s;
}

/* ------------------------------------------------------------ descriptor table */

/* Two levels of 1024 entries: reads are one acquire load each, no lock; writes take
 * t_mu. Chunks are never freed. */
#define PL_CHUNK 1024
#define PL_CHUNKS 4096 /* 4 M descriptors */
static struct pl_sock **t_chunk[PL_CHUNKS];
static pthread_mutex_t t_mu = PTHREAD_MUTEX_INITIALIZER;
static int t_any; /* any ipkit socket ever: a process without one pays one load */

static struct pl_sock *pl_tbl_load(int fd)
{
	struct pl_sock **c;
	if (fd < 0 || fd >= PL_CHUNK * PL_CHUNKS || !__atomic_load_n(&t_any, __ATOMIC_RELAXED))
		return NULL;
	c = __atomic_load_n(&t_chunk[fd / PL_CHUNK], __ATOMIC_ACQUIRE);
	return c ? __atomic_load_n(&c[fd % PL_CHUNK], __ATOMIC_ACQUIRE) : NULL;
}

int pl_is_ipk(int fd) { return pl_tbl_load(fd) != NULL; }

int pl_tbl_next(int from)
{
	if (from < 0 || !__atomic_load_n(&t_any, __ATOMIC_RELAXED))
		return -1;
	for (int fd = from; fd < PL_CHUNK * PL_CHUNKS;) {
		struct pl_sock **c = __atomic_load_n(&t_chunk[fd / PL_CHUNK], __ATOMIC_ACQUIRE);
		if (!c) {
			fd = (fd / PL_CHUNK + 1) * PL_CHUNK;
			continue;
		}
		if (__atomic_load_n(&c[fd % PL_CHUNK], __ATOMIC_ACQUIRE))
			return fd;
		fd++;
	}
	return -1;
}
int pl_any_sock(void) { return __atomic_load_n(&t_any, __ATOMIC_RELAXED); }

struct pl_sock *pl_get(int fd)
{
	struct pl_sock *s;
	while ((s = pl_tbl_load(fd)) != NULL) {
		int r = __atomic_load_n(&s->refs, __ATOMIC_RELAXED);
		/* take a reference only while it is live (refs > 0): a freed socket stays
		 * memory of a socket (never returned to malloc), so the load is safe */
		while (r > 0 && !__atomic_compare_exchange_n(&s->refs, &r, r + 1, 0,
		                                              __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			;
		if (r > 0 && pl_tbl_load(fd) == s)
			return s;
		if (r > 0)
			pl_put(s);
	}
	return NULL;
}

static struct pl_sock *g_free;
static pthread_mutex_t f_mu = PTHREAD_MUTEX_INITIALIZER;

void pl_put(struct pl_sock *s)
{
	if (__atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	pthread_mutex_lock(&f_mu);
	s->fnext = g_free;
	g_free = s;
	pthread_mutex_unlock(&f_mu);
}

void pl_tbl_set(int fd, struct pl_sock *s)
{
	struct pl_sock **c;
	pthread_mutex_lock(&t_mu);
	c = t_chunk[fd / PL_CHUNK];
	if (!c) {
		c = (struct pl_sock **)calloc(PL_CHUNK, sizeof *c);
		__atomic_store_n(&t_chunk[fd / PL_CHUNK], c, __ATOMIC_RELEASE);
	}
	if (c) {
		__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
		s->nfds++;
		__atomic_store_n(&c[fd % PL_CHUNK], s, __ATOMIC_RELEASE);
		__atomic_store_n(&t_any, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&t_mu);
}

/* Remove fd's name; returns the socket with the table's reference (the caller puts
 * it), or NULL. s->nfds says whether other names remain. */
struct pl_sock *pl_tbl_take(int fd, int *last)
{
	struct pl_sock *s;
	*last = 0;
	if (!pl_tbl_load(fd))
		return NULL;
	pthread_mutex_lock(&t_mu);
	s = t_chunk[fd / PL_CHUNK][fd % PL_CHUNK];
	if (s) {
		__atomic_store_n(&t_chunk[fd / PL_CHUNK][fd % PL_CHUNK], NULL, __ATOMIC_RELEASE);
		*last = --s->nfds == 0;
	}
	pthread_mutex_unlock(&t_mu);
	return s;
}

/* ------------------------------------------------------------ socket objects */

struct pl_sock *pl_sock_new(int type)
{
	struct pl_sock *s;
	pthread_mutex_lock(&f_mu);
	s = g_free;
	if (s)
		g_free = s->fnext;
	pthread_mutex_unlock(&f_mu);
	if (!s) {
		s = (struct pl_sock *)calloc(1, sizeof *s);
		if (!s)
			return NULL;
	} else {
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->cv);
		/* refs stays 0 until the add below: a stale lookup cannot take it */
		memset((char *)s + sizeof s->refs, 0, sizeof *s - sizeof s->refs);
	}
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	{
		static uint64_t serials;
		s->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
	}
	s->type = type;
	s->domain = AF_INET; /* pl_make sets the socket's own */
	s->fd = s->lfd = s->ofd = -1;
	s->kfd[0] = s->kfd[1] = -1;
	s->direct_epfd = -1;
	s->rcvbuf = 131072;
	s->sndbuf = 16384;
	s->kidle = 7200;
	s->kintvl = 75;
	s->kcnt = 9;
	__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELEASE); /* the caller's */
	return s;
}

/* The pump's list holds a reference. */
void pl_sock_link(struct pl_sock *s)
{
	__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&g_mu);
	s->lnext = g_live;
	s->lprev = NULL;
	if (g_live)
		g_live->lprev = s;
	g_live = s;
	pthread_mutex_unlock(&g_mu);
}

static void pl_unlink_locked(struct pl_sock *s)
{
	if (s->lprev)
		s->lprev->lnext = s->lnext;
	else
		g_live = s->lnext;
	if (s->lnext)
		s->lnext->lprev = s->lprev;
	s->lnext = s->lprev = NULL;
}

/* After pl_unlink_locked (the pump no longer finds s): close the daemon's socket,
 * free the region buffers, the queued accepted connections and the hidden
 * eventfds. Not under g_mu: a CLOSE is a round trip to ipkitd, and every other
 * thread's completions (pl_pump_round, an epoll wait's reaping) would wait for it
 * behind g_mu (one close per request for a server that closes its connections). */
static void pl_finish_close(struct pl_sock *s)
{
	struct ipk_svc *svc = g_svc;
	if (s->mlisted || s->kfd[0] >= 0 || s->kfd[1] >= 0)
		pl_mirror_drop(s); /* its kernel sockets on loopback */
	pthread_mutex_lock(&s->mu); /* a thread still in a call on it sees so == NULL */
	pl_txfull(s, 0);
	while (s->acc_h) {
		struct pl_acc *a = s->acc_h;
		s->acc_h = a->next;
		ipk_svc_close(a->so);
		free(a);
	}
	if (s->so && s->abort) {
		ipk_svc_abort(s->so);
		/* none left (the close waited for them); were one dropped, it would
		 * complete no more and its buffer would be ours */
		while (s->tx_ops) {
			struct pl_txq *q = &s->txq[s->txq_head];
			s->txq_head = (s->txq_head + 1) % PL_TXOPS;
			ipk_svc_buf_free(svc, q->b, q->len);
			s->tx_bytes -= q->len;
			s->tx_ops--;
		}
	} else if (s->so && !s->fam && s->type == SOCK_STREAM && s->state == PL_CONNECTED) {
		/* bytes ipkitd holds beyond our buffers, never read: a reset, as
		 * Linux's close() (ours were looked at in pl_sock_release) */
		ipk_svc_close_flags(s->so, IPK_SVC_SQE_F_RST_UNREAD);
	} else if (s->so) {
		ipk_svc_close(s->so);
	}
	s->so = NULL;
	pthread_cond_broadcast(&s->cv); /* a synchronous operation waiting ends */
	for (int i = 0; i < 2; i++) {
		if (s->rx[i].b)
			ipk_svc_buf_free(svc, s->rx[i].b, PL_RXBUF);
		s->rx[i].b = NULL;
	}
	{
		/* -1 under the lock: a deferred level's flush (pl_pend_flush) looks
		 * under it and never writes a number closed here and maybe reused */
		int ofd = s->ofd, lfd = s->lfd;
		s->ofd = s->lfd = -1;
		pthread_mutex_unlock(&s->mu);
		if (ofd >= 0)
			pl_r.close(ofd);
		if (lfd >= 0)
			pl_r.close(lfd);
	}
}

/* Both, under g_mu (exit's flush: nothing else runs then). */
static void pl_finish_locked(struct pl_sock *s)
{
	pl_unlink_locked(s);
	pl_finish_close(s);
}

void pl_sock_release(struct pl_sock *s)
{
	int now;
	pl_fam_release(s); /* another process's copy takes the connection first */
	pthread_mutex_lock(&g_mu);
	pthread_mutex_lock(&s->mu);
	s->closing = 1;
	pl_levels(s, 0);
	/* An abortive close: a reset, no FIN, as Linux's close() does with SO_LINGER
	 * {1, 0}, and when bytes received were never read (tcp_close: "unread data
	 * was tossed, zap the connection"; here, those in the shim's receive
	 * buffers). Linux sends what a send() already put on the wire first, so the
	 * SENDs in flight still go into the stack (the close waits for them, as any
	 * close). Not for a connection another process may hold. */
	s->abort = ((s->linger.l_onoff && s->linger.l_linger == 0) || pl_rx_avail(s) > 0) &&
	           !s->fam && s->so && s->type == SOCK_STREAM && s->state == PL_CONNECTED;
	now = (s->tx_ops == 0 && s->gb_ops == 0) || !s->so;
	if (!now && !s->abort && !s->fam && !s->wr_shut && s->state == PL_CONNECTED &&
	    s->type == SOCK_STREAM) {
		/* SENDs still in flight: the close waits for them, but the FIN
		 * need not. It follows the last byte at once, in ipkitd's same
		 * pass, as Linux sends it after the data still queued at close:
		 * a peer that reads the reply and closes would otherwise often
		 * close first and keep a TIME_WAIT per connection (a client
		 * opening thousands spends its connect()s searching them). Not
		 * for a connection another process may still hold (fork). */
		struct ipk_svc_sqe *e = ipk_svc_get_sqe(s->so);
		if (e) {
			ipk_svc_prep_shutdown(e);
			ipk_svc_sqe_set_data(e, (uint64_t)PL_OP_SHUT << 60);
			ipk_svc_submit(s->so);
			s->wr_shut = 1;
		}
	}
	pthread_mutex_unlock(&s->mu);
	if (now && (s->lnext || s->lprev || g_live == s)) {
		pl_unlink_locked(s);
		pthread_mutex_unlock(&g_mu);
		pl_finish_close(s);
		pl_put(s); /* the list's reference */
		return;
	}
	pthread_mutex_unlock(&g_mu);
}

/* ------------------------------------------------------------ the pump */

/* One pass over the live sockets: every completion is handled under the socket's
 * lock. Returns the number handled. Sockets whose close waited for their SENDs are
 * finished here. */
static int pl_pump_round(void)
{
	struct pl_sock *s, *next, *done = NULL;
	int n = 0;
	pthread_mutex_lock(&g_mu);
	for (s = g_live; s; s = next) {
		struct ipk_svc_cqe *c;
		int fin;
		next = s->lnext;
		pthread_mutex_lock(&s->mu);
		while (s->so && ipk_svc_peek_cqe(s->so, &c) == 0) {
			struct ipk_svc_cqe copy = *c;
			ipk_svc_cqe_seen(s->so, c);
			pl_on_cqe(s, &copy);
			n++;
		}
		fin = s->closing && s->tx_ops == 0 && s->gb_ops == 0;
		pthread_mutex_unlock(&s->mu);
		if (fin) { /* finished below, once g_mu is free */
			pl_unlink_locked(s);
			s->dnext = done;
			done = s;
		}
	}
	pthread_mutex_unlock(&g_mu);
	while ((s = done) != NULL) {
		done = s->dnext;
		pl_finish_close(s);
		pl_put(s); /* the list's reference */
	}
	return n;
}

/* ipkitd is gone: every socket ends as a connection does when the network
 * resets it, so nothing waits for a completion that will never come. Called by the
 * pump when its wait sees the hang-up, and by a call that met it first (a socket()
 * refused with -EPIPE): the program may exit before the pump's next wake-up, and the
 * one line on stderr must not depend on which thread wins. Once only. */
void pl_daemon_gone(void)
{
	static int once;
	struct pl_sock *s;
	if (__atomic_exchange_n(&once, 1, __ATOMIC_ACQ_REL))
		return;
	pthread_mutex_lock(&g_mu);
	for (s = g_live; s; s = s->lnext) {
		pthread_mutex_lock(&s->mu);
		if (s->state == PL_CONNECTING)
			s->state = PL_FAILED;
		if (!s->eof && s->state != PL_NEW && s->state != PL_BOUND)
			s->so_error = s->state == PL_LISTEN ? ENETDOWN : ECONNRESET;
		s->eof = 1;
		s->sync_res = -ENETDOWN;
		s->sync_done = 1;
		pthread_cond_broadcast(&s->cv);
		pl_levels(s, 1);
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_unlock(&g_mu);
	fprintf(stderr, "ipkit-preload: ipkitd hung up: every ipkit socket is reset\n");
}

/* ------------------------------------------------------------ doorbells */

#define PL_PUMP_SHORT_MS 2   /* the pump's sleep while completions are recent */
#define PL_PUMP_RECENT_MS 20 /* completions this recent keep its sleeps short */
#define PL_DEFER_MS 10       /* a bell is deferred only this soon after completions */

static int g_defer = 1;       /* IPKIT_PRELOAD_DEFER=0: write levels, ring bells at once */
static __thread int t_batch;  /* this thread handles what its last wait reported */
static int g_owed;            /* a quiet submit's bell is owed (atomic) */
static int64_t g_recent;      /* the pump's last round with completions (ns; atomic) */

static int64_t pl_mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t); /* the vDSO: no system call */
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

void pl_batch_set(int on) { t_batch = on; }

int pl_submit_data(struct ipk_svc_sock *so)
{
	int r;
	/* deferred only while the pump sleeps short: it rings before each sleep, so
	 * the bell is late by PL_PUMP_SHORT_MS at most (the pump picks a long sleep
	 * only PL_PUMP_RECENT_MS after completions, when no deferral starts) */
	if (!t_batch || !g_defer ||
	    pl_mono_ns() - __atomic_load_n(&g_recent, __ATOMIC_RELAXED) >= PL_DEFER_MS * 1000000ll)
		return ipk_svc_submit(so);
	r = ipk_svc_submit_quiet(so);
	if (r > 0) /* release: the publication comes before the flag a ringer takes */
		__atomic_store_n(&g_owed, 1, __ATOMIC_RELEASE);
	return r;
}

void pl_ring(void)
{
	if (__atomic_load_n(&g_owed, __ATOMIC_RELAXED) &&
	    __atomic_exchange_n(&g_owed, 0, __ATOMIC_ACQ_REL))
		ipk_svc_ring(g_svc);
}

/* ------------------------------------------------------------ reaping */

/* The pump takes every completion while nobody else does; but on the request
 * path it costs a wake-up of its own: ipkitd's futex wake-up of the pump, then
 * the pump's eventfd write that wakes the program's epoll_wait (two threads
 * scheduled per arrival on a machine with few CPUs). So an epoll wait takes the
 * completions itself: before it sleeps it handles what was posted (pl_reap), then
 * sleeps with ipkitd's wake eventfd (ipk_svc_wake_fd) in the kernel set,
 * edge-triggered, armed (region line 2's ev: ipkitd writes it after a pass that
 * posted); woken, it handles them again, and the arrivals go to its own deferred
 * list (it no longer counts as a sleeper), which it reports without an eventfd
 * write. Meanwhile the pump is parked on a private futex (ipkitd does not wake
 * it): while a thread is armed and no thread waits for the pump's work (a
 * poll/select/blocking call's sleep, a synchronous operation, exit's flush:
 * those kick it out of the park). A park lasts the pump's usual sleep (2 ms while
 * completions are recent, else 200 ms, after which it checks for ipkitd's
 * hang-up); the last armed thread to leave kicks a long park, so completions that
 * come while the program is busy wait at most 2 ms for the pump, as its bells.
 * IPKIT_PRELOAD_REAP=0 (or an ipkitd that gives no wake eventfd): the pump alone,
 * as before. */
static int g_evfd = -1;       /* ipkitd's wake eventfd, or -1: no reaping */
static uint64_t g_evgen;      /* bumped at each connection (a forked child's own) */
static int g_reapers;         /* threads armed on it (atomic) */
static int g_needpump;        /* threads waiting for the pump's work (atomic) */
static uint32_t g_park_w;     /* the park's futex word (private) */
static int g_parked;          /* 0, 1 parked short, 2 parked long (atomic) */
static uint32_t g_seen;       /* wake count read before the last round (atomic) */
static int64_t g_reap_last;   /* when an armed thread last left its sleep (ns; atomic) */
#define PL_REAP_RECENT_MS 20  /* the pump stays parked this long after one */
static __thread int t_needpump;

static int g_txfull;          /* sockets with a full send queue (g_txmu) */
static pthread_mutex_t g_txmu = PTHREAD_MUTEX_INITIALIZER;

static void pl_reap_open(struct ipk_svc *svc)
{
	const char *e = getenv("IPKIT_PRELOAD_REAP");
	g_evfd = e && strcmp(e, "0") == 0 ? -1 : ipk_svc_wake_fd(svc);
	g_evgen++;
	g_txfull = 0;
	/* SEND completions matter to a sleeper only when a queue was full */
	ipk_svc_wake_fd_lazy(svc, 1);
}

void pl_txfull(struct pl_sock *s, int full)
{
	if (g_evfd < 0 || s->txfull == full)
		return;
	s->txfull = full;
	/* under a lock: the flag follows the count (two sockets crossing at once
	 * never leave it lazy with a full queue) */
	pthread_mutex_lock(&g_txmu);
	g_txfull += full ? 1 : -1;
	ipk_svc_wake_fd_lazy(g_svc, g_txfull == 0);
	pthread_mutex_unlock(&g_txmu);
}

static void pl_pump_kick(void)
{
	__atomic_add_fetch(&g_park_w, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&g_parked, __ATOMIC_SEQ_CST))
		syscall(SYS_futex, &g_park_w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* A thread is about to wait for what only the pump does while nobody reaps:
 * counted (1) or not (0: no reaping in this process now); pl_pump_unneed with
 * that answer when done (the count stays right if the connection opens between). */
static int pl_pump_need(void)
{
	if (g_evfd < 0)
		return 0;
	__atomic_add_fetch(&g_needpump, 1, __ATOMIC_SEQ_CST);
	pl_pump_kick();
	return 1;
}

static void pl_pump_unneed(int counted)
{
	if (counted)
		__atomic_sub_fetch(&g_needpump, 1, __ATOMIC_SEQ_CST);
}

int pl_sync_wait_begin(void) { return pl_pump_need(); }
void pl_sync_wait_end(int counted) { pl_pump_unneed(counted); }

uint32_t pl_reap(void)
{
	uint32_t v;
	int n;
	if (g_evfd < 0 || __atomic_load_n(&g_svc_state, __ATOMIC_ACQUIRE) != 1)
		return 0;
	v = ipk_svc_wake_count(g_svc);
	if (v == __atomic_load_n(&g_seen, __ATOMIC_RELAXED))
		return v; /* another round covers it (the pump's: its arrivals are written
		           * or deferred for us as before) */
	__atomic_store_n(&g_seen, v, __ATOMIC_RELAXED);
	n = pl_pump_round();
	if (n > 0) {
		__atomic_store_n(&g_recent, pl_mono_ns(), __ATOMIC_RELAXED);
		PL_COUNT(reap_cqes, (uint64_t)n);
	}
	return v;
}

int pl_reap_arm(int epfd, uint64_t *gen, uint64_t tag, uint32_t v)
{
	if (g_evfd < 0 || __atomic_load_n(&g_svc_state, __ATOMIC_ACQUIRE) != 1)
		return 0;
	if (*gen != g_evgen) {
		struct epoll_event k;
		k.events = EPOLLIN | EPOLLET; /* an edge per write: never read */
		k.data.u64 = tag;
		if (pl_r.epoll_ctl(epfd, EPOLL_CTL_ADD, g_evfd, &k) < 0 && errno != EEXIST)
			return 0; /* the pump wakes this wait, as before */
		*gen = g_evgen;
	}
	__atomic_add_fetch(&g_reapers, 1, __ATOMIC_SEQ_CST);
	ipk_svc_wake_fd_arm(g_svc, 1); /* fenced: the check below sees what it missed */
	if (ipk_svc_wake_count(g_svc) != v) {
		pl_reap_disarm();
		return -1;
	}
	return 1;
}

void pl_reap_disarm(void)
{
	ipk_svc_wake_fd_arm(g_svc, 0);
	/* the program handles what woke it and waits again soon: the pump stays
	 * parked meanwhile (in short parks), not woken by ipkitd for every pass */
	__atomic_store_n(&g_reap_last, pl_mono_ns(), __ATOMIC_RELAXED);
	/* the last one out: a pump parked long (nothing recent) comes back to the
	 * futex now, not 200 ms later */
	if (__atomic_sub_fetch(&g_reapers, 1, __ATOMIC_SEQ_CST) == 0 &&
	    __atomic_load_n(&g_parked, __ATOMIC_RELAXED) == 2)
		pl_pump_kick();
}

/* A thread reaps, or did so lately (it handles what woke it and waits again),
 * and nobody waits for the pump's work: the pump parks. */
static int pl_reaping(int64_t now)
{
	if (g_evfd < 0 || __atomic_load_n(&g_needpump, __ATOMIC_SEQ_CST) > 0)
		return 0;
	return __atomic_load_n(&g_reapers, __ATOMIC_SEQ_CST) > 0 ||
	       now - __atomic_load_n(&g_reap_last, __ATOMIC_RELAXED) <
	               PL_REAP_RECENT_MS * 1000000ll;
}

/* The pump's sleep while a thread reaps: 0 woken or kicked, -ETIME. */
static int pl_pump_park(int64_t t_ns, uint32_t w)
{
	struct timespec ts = {(time_t)(t_ns / 1000000000), (long)(t_ns % 1000000000)};
	int r;
	__atomic_store_n(&g_parked, t_ns > PL_PUMP_SHORT_MS * 1000000ll ? 2 : 1,
	                 __ATOMIC_SEQ_CST);
	/* seq_cst: a reaper leaving or a kick after this sees us parked; one before
	 * it moved the word (the wait returns at once) or the counts read below */
	if (!pl_reaping(pl_mono_ns())) {
		__atomic_store_n(&g_parked, 0, __ATOMIC_RELAXED);
		return 0;
	}
	r = (int)syscall(SYS_futex, &g_park_w, FUTEX_WAIT_PRIVATE, w, &ts, NULL, 0);
	__atomic_store_n(&g_parked, 0, __ATOMIC_RELAXED);
	return r < 0 && errno == ETIMEDOUT ? -ETIME : 0;
}

static void *pl_pump(void *arg)
{
	sigset_t all;
	(void)arg;
	/* the application's signals go to its own threads (EINTR where it waits) */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		uint32_t v = ipk_svc_wake_count(g_svc);
		uint32_t w = __atomic_load_n(&g_park_w, __ATOMIC_SEQ_CST);
		int64_t now, t;
		int n, r;
		__atomic_store_n(&g_seen, v, __ATOMIC_RELAXED);
		if ((n = pl_pump_round()) > 0) {
			PL_COUNT(pump_cqes, (uint64_t)n);
			__atomic_store_n(&g_recent, pl_mono_ns(), __ATOMIC_RELAXED);
			continue;
		}
		now = pl_mono_ns();
		t = now - __atomic_load_n(&g_recent, __ATOMIC_RELAXED) <
		    PL_PUMP_RECENT_MS * 1000000ll ? PL_PUMP_SHORT_MS * 1000000ll : 200000000ll;
		pl_ring(); /* after the choice: a bell deferred from here on finds it short */
		if (pl_reaping(now)) {
			/* nobody armed (the program is busy): short, so what comes
			 * meanwhile is taken within PL_PUMP_SHORT_MS */
			if (__atomic_load_n(&g_reapers, __ATOMIC_SEQ_CST) == 0)
				t = PL_PUMP_SHORT_MS * 1000000ll;
			/* a quiet long park: is ipkitd still there (the armed thread
			 * would otherwise sleep through its death) */
			if (pl_pump_park(t, w) == -ETIME && t > PL_PUMP_SHORT_MS * 1000000ll &&
			    ipk_svc_wake_count(g_svc) == v && ipk_svc_hung_up(g_svc))
				break;
			continue;
		}
		r = ipk_svc_wait_from(g_svc, v, t);
		if (r == -EPIPE)
			break;
		if (r == 0)
			PL_COUNT(pump_wakes, 1);
	}
	pl_pump_round(); /* what ipkitd posted before it went */
	pl_daemon_gone();
	return NULL;
}

/* ------------------------------------------------------------ levels and waits */

static void pl_lvl(int fd, int *cur, int want, int edge)
{
	uint64_t v = 1;
	ssize_t r = 0;
	if (fd < 0)
		return;
	if (want && (!*cur || edge))
		r = pl_r.write(fd, &v, sizeof v);
	else if (!want && *cur)
		r = pl_r.read(fd, &v, sizeof v);
	(void)r; /* both are non-blocking eventfds: EAGAIN means already so */
	*cur = want;
}

static int pl_readable(const struct pl_sock *s)
{
	if (s->type == SOCK_DGRAM)
		return s->rx[s->rx_head].full || s->so_error;
	if (s->state == PL_FAILED || s->so_error || s->rd_shut)
		return 1;
	if (s->state == PL_LISTEN)
		return s->acc_n > 0 || __atomic_load_n(&s->kpend, __ATOMIC_ACQUIRE);
	return s->state == PL_CONNECTED && (pl_rx_avail(s) > 0 || s->eof);
}

static int pl_writable(const struct pl_sock *s)
{
	if (s->state == PL_FAILED || s->so_error || s->wr_shut)
		return 1;
	if (s->type == SOCK_DGRAM)
		return 1; /* a send waits only for ipkitd's answer */
	return s->state == PL_CONNECTED && s->tx_bytes < PL_TXMAX && s->tx_ops < PL_TXOPS;
}

/* ------------------------------------------------------------ deferred levels */

static pthread_mutex_t w_mu = PTHREAD_MUTEX_INITIALIZER;
static int w_sleepers;          /* threads in (or entering) a wait on eventfds */
static struct pl_sock *w_pend;  /* deferred readable levels, newest first */
static int w_ep = -1;           /* the only waiter's epoll set, or -1 */
static int w_kicked;            /* it has been woken by a written arrival */

/* Under s->mu: defer the readable level's write when nobody waits (1), else 0 and
 * the caller writes. A socket already on the list is covered: whoever takes it
 * looks at its state after taking it. */
static int pl_defer(struct pl_sock *s)
{
	int d = 0, ep = __atomic_load_n(&s->direct_epfd, __ATOMIC_RELAXED);
	if (s->pending)
		return 1;
	if (!g_defer)
		return 0;
	pthread_mutex_lock(&w_mu);
	if (w_sleepers > 0 && ep >= 0 && ep == w_ep && !w_kicked)
		w_kicked = 1; /* this write wakes the one waiter: later ones can wait */
	else if (w_sleepers == 0 || (ep >= 0 && ep == w_ep)) {
		s->pending = 1;
		__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED); /* the list's */
		s->pnext = w_pend;
		__atomic_store_n(&w_pend, s, __ATOMIC_RELAXED); /* pl_pend_grab peeks */
		d = 1;
	}
	pthread_mutex_unlock(&w_mu);
	return d;
}

static struct pl_sock *pl_pend_order(struct pl_sock *l)
{
	struct pl_sock *r = NULL;
	while (l) { /* oldest first */
		struct pl_sock *n = l->pnext;
		l->pnext = r;
		r = l;
		l = n;
	}
	return r;
}

static struct pl_sock *pl_enter(int epfd)
{
	struct pl_sock *l;
	t_batch = 0;
	pl_ring(); /* what this thread (or another) wrote goes out before we wait */
	if (epfd < 0 && !t_needpump) /* only the pump completes what this waits for */
		t_needpump = pl_pump_need();
	pthread_mutex_lock(&w_mu);
	w_sleepers++; /* from here on the pump writes levels itself */
	w_ep = w_sleepers == 1 ? epfd : -1;
	w_kicked = 0;
	l = w_pend;
	__atomic_store_n(&w_pend, NULL, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&w_mu);
	return pl_pend_order(l);
}

struct pl_sock *pl_wait_enter(void) { return pl_enter(-1); }
struct pl_sock *pl_wait_enter_ep(int epfd) { return pl_enter(epfd); }

struct pl_sock *pl_pend_grab(void)
{
	struct pl_sock *l;
	if (!__atomic_load_n(&w_pend, __ATOMIC_RELAXED))
		return NULL;
	pthread_mutex_lock(&w_mu);
	l = w_pend;
	__atomic_store_n(&w_pend, NULL, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&w_mu);
	return pl_pend_order(l);
}

void pl_wait_leave(void)
{
	if (t_needpump) {
		t_needpump = 0;
		pl_pump_unneed(1);
	}
	pthread_mutex_lock(&w_mu);
	w_sleepers--;
	w_ep = -1; /* a waiter left: no deferral while others sleep */
	pthread_mutex_unlock(&w_mu);
}

void pl_pend_take(struct pl_sock *s)
{
	pthread_mutex_lock(&s->mu);
	s->pending = 0; /* an arrival from now on is deferred again or written */
	pthread_mutex_unlock(&s->mu);
	pl_put(s);
}

void pl_pend_flush(struct pl_sock *s)
{
	uint64_t v = 1;
	pthread_mutex_lock(&s->mu);
	if (s->pending && s->lfd >= 0 && !s->closing && s->in_true) {
		ssize_t r = pl_r.write(s->lfd, &v, sizeof v);
		(void)r; /* a non-blocking eventfd: EAGAIN means already so */
	}
	s->pending = 0;
	pthread_mutex_unlock(&s->mu);
	pl_put(s);
}

void pl_wait_flush(void)
{
	struct pl_sock *l = pl_wait_enter();
	while (l) {
		struct pl_sock *n = l->pnext;
		pl_pend_flush(l);
		l = n;
	}
}

/* The readable level is cleared lazily: when the program has read everything,
 * the eventfd stays set ("stale", in_true 0) instead of a read(2) per request;
 * the next arrival writes it again (a new edge for EPOLLET, as now), and whoever
 * is about to sleep on it clears it first (pl_unstale: poll/select, blocking
 * calls, an epoll wake-up that found nothing). An edge-triggered epoll loop
 * (nginx) so pays one write per arrival instead of a write and a read; a socket
 * ever put in a level-triggered epoll set (redis) is cleared at once, as before. */
static void pl_lvl_in(struct pl_sock *s, int want, int edge)
{
	uint64_t v = 1;
	ssize_t r = 0;
	if (s->lfd < 0)
		return;
	if (want && (!s->in_lvl || !s->in_true || edge)) {
		if (!pl_defer(s))
			r = pl_r.write(s->lfd, &v, sizeof v);
		s->in_lvl = 1; /* set, or about to be (deferred) */
	} else if (!want && s->in_lvl && (s->closing || s->ep_lt)) {
		/* a closed socket shows nothing: its registrations may outlive it in
		 * epoll sets, where nobody would clear a stale level; in a
		 * level-triggered set a stale level would cost a wake-up and an
		 * epoll_wait more than the read it saves */
		r = pl_r.read(s->lfd, &v, sizeof v);
		s->in_lvl = 0;
	}
	(void)r; /* a non-blocking eventfd: EAGAIN means already so */
	s->in_true = want;
}

void pl_unstale(struct pl_sock *s)
{
	uint64_t v;
	ssize_t r;
	pthread_mutex_lock(&s->mu);
	if (s->in_lvl && !s->in_true && s->lfd >= 0) {
		r = pl_r.read(s->lfd, &v, sizeof v);
		(void)r;
		s->in_lvl = 0;
	}
	pthread_mutex_unlock(&s->mu);
}

int pl_ofd(struct pl_sock *s)
{
	int o;
	pthread_mutex_lock(&s->mu);
	o = s->ofd;
	if (o < 0 && s->lfd >= 0) { /* not once finished (pl_finish_close) */
		o = pl_hide_fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
		if (o >= 0) {
			s->out_lvl = 0;
			pl_lvl(o, &s->out_lvl, !s->closing && pl_writable(s), 0);
			__atomic_store_n(&s->ofd, o, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&s->mu);
	return o;
}

void pl_levels(struct pl_sock *s, int edge)
{
	/* a closed socket shows nothing (its hidden writable eventfd stays open
	 * until its SENDs complete) */
	pl_lvl_in(s, !s->closing && pl_readable(s), edge);
	pl_lvl(s->ofd, &s->out_lvl, !s->closing && pl_writable(s), 0);
}

/* Linux's tcp_poll(): POLLHUP when both directions are shut or the connection is
 * gone, POLLRDHUP when the peer's FIN arrived, POLLOUT on a new socket only as part
 * of the closed state's POLLOUT|POLLHUP. */
unsigned pl_revents(struct pl_sock *s)
{
	unsigned m = 0;
	pthread_mutex_lock(&s->mu);
	if (pl_readable(s))
		m |= POLLIN | POLLRDNORM;
	if (pl_writable(s))
		m |= POLLOUT | POLLWRNORM;
	if (s->so_error)
		m |= POLLERR;
	if (s->type == SOCK_STREAM && s->state != PL_LISTEN) {
		if (s->eof || s->rd_shut)
			m |= POLLRDHUP;
		if ((s->eof && s->wr_shut) || s->state == PL_FAILED ||
		    s->state == PL_NEW || s->state == PL_BOUND)
			m |= POLLHUP;
		if (s->state == PL_NEW || s->state == PL_BOUND)
			m |= POLLOUT | POLLWRNORM;
	}
	pthread_mutex_unlock(&s->mu);
	return m;
}

int pl_wait(struct pl_sock *s, int out, int timeout_ms)
{
	struct pollfd p;
	int r;
	if (!out)
		pl_unstale(s); /* else a stale level ends the sleep at once, every time */
	p.fd = out ? pl_ofd(s) : s->lfd;
	if (p.fd < 0)
		return -EMFILE; /* no descriptor for the writable level */
	p.events = POLLIN;
	p.revents = 0;
	pl_sig_clear();
	pl_wait_flush(); /* also this socket's own deferred level */
	r = pl_r.poll(&p, 1, timeout_ms);
	{
		int err = errno;
		pl_wait_leave();
		errno = err;
	}
	if (r < 0 && errno == EINTR && pl_sig_restart(timeout_ms >= 0))
		return 0; /* SA_RESTART: the caller looks again and sleeps again */
	if (r < 0)
		return -errno;
	return r == 0 ? -EAGAIN : 0;
}

/* Where the shim's own descriptors go: above the soft RLIMIT_NOFILE the program
 * started with, whose limit is raised to make room (to 4 x, at least 4,096 more,
 * never past the hard limit). Every ipkit socket costs a hidden descriptor
 * (the shim's own copy of its number), two once something asks whether it is
 * writable (its writable level, pl_ofd); this way the program's numbers and the point
 * where it runs out of them stay Linux's. Without room (hard = soft) they go to
 * the limit's top quarter. */
long pl_hide_min(void) { return pl_hide_base(); }

static long pl_hide_base(void)
{
	static long base = -1;
	struct rlimit rl;
	if (base >= 0)
		return base;
	base = 0;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < rl.rlim_max) {
		rlim_t want = rl.rlim_cur * 4 > rl.rlim_cur + 4096 ? rl.rlim_cur * 4 :
		              rl.rlim_cur + 4096;
		struct rlimit nl = rl;
		nl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &nl) == 0)
			return base = (long)rl.rlim_cur;
	}
	/* no room to add: the top quarter of the limit, which programs rarely reach */
	if (base == 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= 256 &&
	    rl.rlim_cur != RLIM_INFINITY)
		base = (long)(rl.rlim_cur - rl.rlim_cur / 4);
	return base;
}

int pl_hide_dup(int fd)
{
	long base = pl_hide_base();
	int h = fd < 0 ? -1 : pl_r.fcntl(fd, F_DUPFD_CLOEXEC, (int)(base > 0 ? base : 0));
	if (h < 0 && fd >= 0 && base > 0) /* nothing free up there: anywhere */
		h = pl_r.fcntl(fd, F_DUPFD_CLOEXEC, 0);
	return h;
}

int pl_hide_fd(int fd)
{
	long base = pl_hide_base();
	int h;
	if (base <= 0 || fd < 0)
		return fd;
	h = pl_r.fcntl(fd, F_DUPFD_CLOEXEC, (int)base);
	if (h < 0)
		return fd;
	pl_r.close(fd);
	return h;
}

/* ------------------------------------------------------------ stats */

/* IPKIT_PRELOAD_STATS=1: one line on stderr at exit saying what went where, so a
 * test can prove its traffic went through ipkitd. */
static void pl_stats_print(void)
{
	struct ipk_svc_stats d;
	memset(&d, 0, sizeof d);
	if (__atomic_load_n(&g_svc_state, __ATOMIC_ACQUIRE) == 1)
		ipk_svc_stats(g_svc, &d); /* ipkitd's own count, from the region */
	fprintf(stderr, "ipkit-preload: pid %d ipkit_sockets %llu kernel_inet_sockets %llu "
	        "other_sockets %llu ipkit_tx %llu ipkit_rx %llu accepts %llu connects %llu "
	        "ipkitd_tx %llu ipkitd_rx %llu bad_completions %llu ipkit_tx_failed %llu "
	        "pump_cqes %llu reap_cqes %llu pump_wakes %llu ipkitd_futex_wakes %llu "
	        "ipkitd_ev_wakes %llu loopback_to_kernel %llu\n",
	        (int)getpid(), (unsigned long long)pl_st.sock_ipk,
	        (unsigned long long)pl_st.sock_kernel,
	        (unsigned long long)pl_st.sock_passthrough, (unsigned long long)pl_st.tx_ipk,
	        (unsigned long long)pl_st.rx_ipk, (unsigned long long)pl_st.accepts,
	        (unsigned long long)pl_st.connects,
	        (unsigned long long)(d.tx_copied + d.tx_zc), (unsigned long long)d.rx_copied,
	        (unsigned long long)pl_st.bad_cqe, (unsigned long long)pl_st.tx_failed,
	        (unsigned long long)pl_st.pump_cqes, (unsigned long long)pl_st.reap_cqes,
	        (unsigned long long)pl_st.pump_wakes, (unsigned long long)d.futex_wakes,
	        (unsigned long long)d.ev_wakes, (unsigned long long)pl_st.loop_kernel);
}

/* At exit Linux keeps sending what the process wrote and then ends each
 * connection with FIN; ipkitd resets the connections of an application that died.
 * So exit() waits for the SENDs in flight (bounded: IPKIT_PRELOAD_LINGER seconds,
 * default 30) and closes every socket itself. _exit and SIGKILL skip this. */
static uint32_t pl_tx_ops_all(void)
{
	struct pl_sock *s;
	uint32_t n = 0;
	pthread_mutex_lock(&g_mu);
	for (s = g_live; s; s = s->lnext) {
		pthread_mutex_lock(&s->mu);
		n += s->so ? s->tx_ops + (uint32_t)s->gb_ops : 0;
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_unlock(&g_mu);
	return n;
}

/* Connections other processes also hold (fork): hand each to one of them, with
 * what this process had received and not read (Linux keeps those bytes in the
 * socket for them). */
static void pl_exit_handover(void)
{
	struct pl_sock *s, *v[64];
	int n;
	for (int round = 0; round < 1024; round++) { /* 64 at a time, bounded */
		n = 0;
		pthread_mutex_lock(&g_mu);
		for (s = g_live; s && n < 64; s = s->lnext) {
			if (s->fam && s->so && !s->closing) { /* away too: pl_fam_release */
				__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
				v[n++] = s;
			}
		}
		pthread_mutex_unlock(&g_mu);
		if (n == 0)
			return;
		for (int i = 0; i < n; i++) {
			pl_fam_release(v[i]);
			v[i]->fam = 0; /* handed over (or nobody else holds it) */
			pl_put(v[i]);
		}
	}
}

/* Shared connections handed over, then the SENDs in flight into the stack
 * (bounded: IPKIT_PRELOAD_LINGER seconds, default 30). 0: no ipkitd session. */
static int pl_exit_wait(void)
{
	const char *e = getenv("IPKIT_PRELOAD_LINGER");
	long ms = (e ? atol(e) : 30) * 1000, i;
	int need;
	struct timespec t = {0, 1000000};
	if (__atomic_load_n(&g_svc_state, __ATOMIC_ACQUIRE) != 1)
		return 0;
	pl_exit_handover();
	pl_ring();
	need = pl_pump_need(); /* not parked: it completes them meanwhile */
	for (i = 0; i < ms && pl_tx_ops_all() > 0; i++)
		nanosleep(&t, NULL); /* the pump completes them meanwhile */
	pl_pump_unneed(need);
	return 1;
}

static void pl_exit_flush(void)
{
	if (!pl_exit_wait())
		return;
	pthread_mutex_lock(&g_mu);
	while (g_live) {
		struct pl_sock *s = g_live;
		pl_finish_locked(s); /* FIN after what the stack holds */
	}
	pthread_mutex_unlock(&g_mu);
}

/* _exit and _Exit: no exit handlers, but on Linux what write() took is in the
 * kernel and goes out after the process is gone. Here a write is a SEND that
 * ipkitd may not have taken yet: the process waits until its SENDs are in the
 * stack (bounded as exit's wait, IPKIT_PRELOAD_LINGER), hands connections it
 * shares with other processes to them, and goes; ipkitd then ends its
 * connections with a FIN (IPK_SVC_OPEN_EXIT_FIN). Nothing is closed here, and a
 * vfork child (another pid in this memory) goes at once. */
static pid_t g_pid; /* this process (set at start and in a fork child) */

typedef void (*pl_exit_fn)(int);

/* The wait, then the C library's own call (name) in *slot. */
__attribute__((noreturn)) static void pl_exit_via(pl_exit_fn *slot, const char *name, int status)
{
	pl_exit_fn real = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (!real) {
		real = (pl_exit_fn)dlsym(RTLD_NEXT, name);
		__atomic_store_n(slot, real, __ATOMIC_RELEASE);
	}
	if (getpid() == g_pid)
		pl_exit_wait();
	if (real)
		real(status);
	syscall(SYS_exit_group, status); /* not reached with a C library */
	for (;;)
		;
}

static pl_exit_fn r_exit, r_Exit;

void _exit(int status) { pl_exit_via(&r_exit, "_exit", status); }
void _Exit(int status) { pl_exit_via(&r_Exit, "_Exit", status); }

static int pl_stats_on;

static pthread_key_t g_scr_key;
static pthread_once_t g_scr_once = PTHREAD_ONCE_INIT;
static int g_scr_key_ok;
static __thread void *t_scr[PL_SCR__N];

static void pl_scratch_free(void *p)
{
	void **v = (void **)p;
	for (int i = 0; i < PL_SCR__N; i++) {
		free(v[i]);
		v[i] = NULL;
	}
}

static void pl_scratch_key(void)
{
	g_scr_key_ok = pthread_key_create(&g_scr_key, pl_scratch_free) == 0;
}

void *pl_scratch(int slot, size_t n)
{
	if (!t_scr[slot]) {
		t_scr[slot] = malloc(n);
		if (!t_scr[slot]) {
			errno = ENOMEM;
			return NULL;
		}
		pthread_once(&g_scr_once, pl_scratch_key);
		if (g_scr_key_ok)
			pthread_setspecific(g_scr_key, t_scr); /* freed at the thread's exit */
	}
	return t_scr[slot];
}

/* fork (this landing): the child is a new application of ipkitd. The region, the
 * rings and the pump belong to the parent: the child forgets them (it must never
 * touch the parent's rings), its inherited ipkit descriptors answer EBADF (their
 * numbers stay taken until closed), and its first new socket opens its own
 * connection to ipkitd. Sharing inherited sockets (nginx's workers) is next. The
 * locks are held across fork so the child's copy of the list is consistent. */
static void pl_fork_prepare(void)
{
	pthread_mutex_lock(&g_mu);
	pl_fam_prepare(g_live);
}

static void pl_fork_parent(void)
{
	pthread_mutex_unlock(&g_mu);
	pl_fam_parent(); /* connections: until the child adopted them (p_fork.c) */
}

static void pl_fork_child(void)
{
	struct pl_sock *s, *next, *keep = NULL;
	g_pid = getpid();
	for (s = g_live; s; s = next) {
		next = s->lnext;
		pthread_mutex_init(&s->mu, NULL);
		pthread_cond_init(&s->cv, NULL);
		s->so = NULL;
		s->sync_busy = 0;
		s->away = s->fresh = 0;
		while (s->acc_h) {
			struct pl_acc *a = s->acc_h;
			s->acc_h = a->next;
			free(a);
		}
		s->acc_t = NULL;
		s->acc_n = 0;
		s->lnext = s->lprev = NULL;
		if (pl_fork_child_keep(s)) { /* stays on the list (its reference) */
			s->lnext = keep;
			if (keep)
				keep->lprev = s;
			keep = s;
			continue;
		}
		s->state = PL_FAILED; /* every call on it: EBADF */
		s->so_error = EBADF;
	}
	g_live = keep;
	pthread_mutex_init(&f_mu, NULL); /* pl_put below; another thread may have held it */
	for (s = w_pend; s; s = next) { /* the parent's deferred levels */
		next = s->pnext;
		s->pending = 0;
		pl_put(s); /* the list's reference: kept, it would never come back to the
		            * free list in the child (LeakSanitizer saw it after fork_accept) */
	}
	w_pend = NULL;
	w_sleepers = 0;
	w_ep = -1;
	g_owed = 0; /* the parent's bell, on the parent's connection */
	t_batch = 0;
	pthread_mutex_init(&w_mu, NULL);
	if (g_svc)
		ipk_svc_close_all(g_svc); /* unmaps the parent's region in the child only */
	g_svc = NULL;
	g_svc_state = 0;
	g_evfd = -1; /* the child's own connection brings its own (a new g_evgen) */
	g_reapers = g_needpump = g_parked = 0;
	g_reap_last = 0;
	g_txfull = 0;
	pthread_mutex_init(&g_txmu, NULL);
	g_seen = 0;
	t_needpump = 0;
	memset(&pl_st, 0, sizeof pl_st);
	pthread_mutex_init(&g_mu, NULL);
	pl_fork_child_relisten(keep);
}

__attribute__((constructor)) static void pl_init(void)
{
	const char *e = getenv("IPKIT_PRELOAD_STATS");
	pl_resolve();
	pl_cfg();
	pl_stats_on = e && *e && strcmp(e, "0") != 0;
	g_pid = getpid();
	e = getenv("IPKIT_PRELOAD_DEFER");
	g_defer = !(e && strcmp(e, "0") == 0);
	pthread_atfork(pl_fork_prepare, pl_fork_parent, pl_fork_child);
	pl_exec_adopt_all(); /* listeners an exec kept (p_exec.c) */
}

__attribute__((destructor)) static void pl_fini(void)
{
	pl_exit_flush();
	if (pl_stats_on)
		pl_stats_print();
}
