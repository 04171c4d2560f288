/*
 * ipkit-echo: TCP and UDP echo server (RFC 862) on a real link.
 *
 *   ipkit-echo --io tap:ipk0 --ip 10.7.0.2/24 [--port 7] [--udp-port 7]
 *              [--idle-timeout SECONDS]
 *   ipkit-echo --io tap:ipk0 --ip 10.7.0.2/24 --workers 2 --model merge
 *
 * With --workers or --model the program runs on the multi-core runtime
 * (ipk_workers_start) and the echo is the message-style application in
 * echo_workers.c; without them, a single node with the core's callbacks, below.
 *
 * TCP echo is zero-copy: each payload is cloned (a new descriptor over the received
 * buffer) and queued with ipk_tcp_send. Received bytes are released to the window
 * (ipk_tcp_recved) only once their echo is in the send buffer, so a client that does
 * not read its echoes is slowed down by flow control instead of filling our memory.
 * Small payloads are copied instead (ipk_tcp_write, which fills the send queue's
 * packets, or a buffer of our own at the tail of the waiting queue): a clone keeps
 * the whole receive buffer for its few bytes, and a client sending one-byte segments
 * without acknowledging the echoes made the window's worth of bytes pin one 2 KiB
 * buffer each, the whole pool (issue 14).
 *
 * No client holds a connection forever (issue 14, as ipkit-httpd's --idle-timeout):
 * one that makes no progress (no byte received, none of our echo acknowledged) for
 * --idle-timeout seconds (default 300, generous for an interactive client; 0 =
 * never) is closed with a FIN; if the close does not complete within one more
 * period, or echoes wait that the client does not read, it is aborted (RST). Single
 * node only: the multi-core runtime's app interface has no timer yet.
 */
#include "app.h"
#include "echo_workers.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Payloads up to this many bytes are copied, not cloned. */
#define ECHO_COPY_MAX 256u
#define ECHO_SWEEP_NS 100000000ull /* idle check every 100 ms */
#define ECHO_IDLE_DEFAULT_S 300

struct echo_app;

struct echo_conn {
	struct ipk_conn *c;
	struct echo_app *app;
	struct echo_conn *prev, *next; /* every open connection, for the idle sweep */
	uint64_t last_ns;            /* last progress: a byte received or acknowledged */
	int closing;                 /* the idle timeout closed it once already */
	struct ipk_pkt *head, *tail; /* clones waiting for send-buffer room, linked by ->user */
	struct ipk_pkt *ctail;       /* the tail when it is our own copy buffer, still filling */
	int fin;                     /* peer finished: close once the queue is empty */
};

struct echo_app {
	uint16_t tcp_port_be, udp_port_be;
	uint64_t conns, bytes, datagrams;
	uint64_t idle_ns;            /* --idle-timeout, 0 = never */
	uint64_t idle_closed;        /* connections ended by the idle timeout */
	struct echo_conn *all;
};

static void echo_queue_free(struct echo_conn *e)
{
	while (e->head) {
		struct ipk_pkt *k = e->head;
		e->head = (struct ipk_pkt *)k->user;
		ipk_pkt_free(k);
	}
	e->tail = NULL;
	e->ctail = NULL;
}

/* Move queued clones into the send buffer while it has room. */
static void echo_drain(struct ipk_ctx *ctx, struct echo_conn *e, uint64_t now)
{
	while (e->head) {
		struct ipk_pkt *k = e->head;
		struct ipk_pkt *next = (struct ipk_pkt *)k->user;
		uint32_t len = k->len;
		int r;
		k->user = NULL;
		r = ipk_tcp_send(ctx, e->c, k, now);
		if (r == IPK_EAGAIN) {
			k->user = next;
			return;
		}
		e->head = next;
		if (!next)
			e->tail = NULL;
		if (k == e->ctail)
			e->ctail = NULL; /* sent: nothing more may be written into it */
		if (r < 0) {
			ipk_pkt_free(k);
			echo_queue_free(e);
			ipk_tcp_abort(ctx, e->c, now);
			return;
		}
		ipk_tcp_recved(ctx, e->c, len, now);
	}
	if (e->fin) {
		e->fin = 0;
		ipk_tcp_close(ctx, e->c, now);
	}
}

static void *echo_accepted(struct ipk_ctx *ctx, struct ipk_conn *c, void *opaque)
{
	struct echo_app *a = (struct echo_app *)ipk_node_app(opaque);
	struct echo_conn *e = (struct echo_conn *)calloc(1, sizeof(*e));
	(void)ctx;
	if (!e) {
		ipk_tcp_abort(ctx, c, ipk_node_now(ipk_node_from(opaque)));
		return NULL;
	}
	e->c = c;
	e->app = a;
	e->last_ns = ipk_node_now(ipk_node_from(opaque));
	e->next = a->all;
	if (a->all)
		a->all->prev = e;
	a->all = e;
	a->conns++;
	return e;
}

/* Append len bytes to the waiting queue in our own buffer: the tail one while it has
 * room, else a fresh one. -1 when the pool has none. */
static int echo_copy_queue(struct echo_conn *e, struct ipk_pool *pool, const uint8_t *d,
                           uint32_t len)
{
	struct ipk_pkt *k = e->ctail;

	if (!k || ipk_pool_buf_size(pool) - k->off - k->len < len) {
		k = ipk_pkt_alloc(pool);
		if (!k)
			return -1;
		k->user = NULL;
		if (e->tail)
			e->tail->user = k;
		else
			e->head = k;
		e->tail = e->ctail = k;
	}
	memcpy(ipk_pkt_mtod(k) + k->len, d, len);
	k->len += len;
	return 0;
}

/* A small payload: into the send buffer by copy when nothing waits before it, the
 * rest (send buffer full) copied onto the waiting queue. Bytes are released to the
 * window as they reach the send buffer, as for clones. */
static int echo_small(struct ipk_ctx *ctx, struct echo_conn *e, const uint8_t *d, uint32_t len,
                      void *opaque)
{
	struct echo_app *a = (struct echo_app *)ipk_node_app(opaque);
	struct ipk_node *n = ipk_node_from(opaque);
	int r = 0;

	a->bytes += len;
	if (!e->head) {
		r = ipk_tcp_write(ctx, e->c, d, len, ipk_node_now(n));
		if (r < 0)
			r = 0; /* no packet for it now: it waits with the rest */
		if (r > 0)
			ipk_tcp_recved(ctx, e->c, (uint32_t)r, ipk_node_now(n));
	}
	if ((uint32_t)r == len)
		return 0;
	return echo_copy_queue(e, ipk_node_pool(n), d + r, len - (uint32_t)r);
}

static void echo_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                         uint32_t off, uint32_t len, void *opaque)
{
	struct echo_app *a = (struct echo_app *)ipk_node_app(opaque);
	struct echo_conn *e = (struct echo_conn *)user;
	uint64_t now = ipk_node_now(ipk_node_from(opaque));
	struct ipk_pkt *k;
	(void)c;
	if (!e)
		return;
	e->last_ns = now;
	if (!pkt) {
		e->fin = 1;
		echo_drain(ctx, e, now);
		return;
	}
	if (len <= ECHO_COPY_MAX) {
		if (echo_small(ctx, e, ipk_pkt_mtod((struct ipk_pkt *)pkt) + off, len, opaque) < 0) {
			echo_queue_free(e);
			ipk_tcp_abort(ctx, e->c, now);
		}
		return;
	}
	k = ipk_pkt_clone((struct ipk_pkt *)pkt);
	if (!k) {
		/* out of descriptors: better a reset than a silently broken echo */
		echo_queue_free(e);
		ipk_tcp_abort(ctx, e->c, now);
		return;
	}
	k->off += off;
	k->len = len;
	k->user = NULL;
	if (e->tail)
		e->tail->user = k;
	else
		e->head = k;
	e->tail = k;
	e->ctail = NULL;
	a->bytes += len;
	echo_drain(ctx, e, now);
}

static void echo_acked(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, uint32_t bytes,
                       void *opaque)
{
	uint64_t now = ipk_node_now(ipk_node_from(opaque));
	(void)c;
	(void)bytes;
	if (!user)
		return;
	((struct echo_conn *)user)->last_ns = now;
	echo_drain(ctx, (struct echo_conn *)user, now);
}

static void echo_closed(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
                        enum ipk_close_reason why, void *opaque)
{
	struct echo_conn *e = (struct echo_conn *)user;
	(void)ctx;
	(void)c;
	(void)why;
	(void)opaque;
	if (!e)
		return;
	echo_queue_free(e);
	if (e->prev)
		e->prev->next = e->next;
	else
		e->app->all = e->next;
	if (e->next)
		e->next->prev = e->prev;
	free(e);
}

/* One connection that made no progress for the idle timeout: a FIN the first time
 * when no echo waits; a RST when echoes wait that the client does not read, or when
 * the close did not complete in one more period (the closed event frees e). */
static void echo_expire(struct ipk_ctx *ctx, struct echo_conn *e, uint64_t now)
{
	e->app->idle_closed++;
	if (e->closing || e->head) {
		echo_queue_free(e);
		ipk_tcp_abort(ctx, e->c, now);
		return;
	}
	e->closing = 1;
	e->last_ns = now;
	e->fin = 0;
	(void)ipk_tcp_close(ctx, e->c, now); /* IPK_ENOTCONN: our FIN went already */
}

static void echo_sweep(struct ipk_ctx *ctx, struct echo_app *a, uint64_t now)
{
	struct echo_conn *e = a->all, *next;

	while (e) {
		next = e->next; /* echo_expire may free e (abort -> closed), never another */
		if (now - e->last_ns >= a->idle_ns)
			echo_expire(ctx, e, now);
		e = next;
	}
}

/* ipk_node_run with an idle sweep every ECHO_SWEEP_NS. */
static int echo_run(struct ipk_node *n, struct echo_app *a, volatile int *stop)
{
	uint64_t next_sweep = 0;

	if (!a->idle_ns)
		return ipk_node_run(n, stop);
	while (!*stop) {
		int rc = ipk_node_poll(n, 100);
		uint64_t now = ipk_node_now(n);

		if (rc < 0 && rc != -EINTR && rc != -EAGAIN)
			return rc;
		if (now >= next_sweep) {
			echo_sweep(ipk_node_ctx(n), a, now);
			next_sweep = now + ECHO_SWEEP_NS;
		}
	}
	return 0;
}

static void echo_udp(struct ipk_ctx *ctx, const struct ipk_tuple *t, void *pkt, uint32_t off,
                     uint32_t len, void *opaque)
{
	struct echo_app *a = (struct echo_app *)ipk_node_app(opaque);
	static uint8_t buf[65536];
	uint32_t got = ipk_pkt_copy(ctx, pkt, off, buf, len < sizeof(buf) ? len : sizeof(buf));
	a->datagrams++;
	ipk_udp_sendto(ctx, t->local_port_be, t->peer_ip4_be, t->peer_port_be, buf, got,
	               ipk_node_now(ipk_node_from(opaque)));
}

/* The same over IPv6 (--ip6): the bind is shared between the families. */
static void echo_udp6(struct ipk_ctx *ctx, const struct ipk_atuple *t, void *pkt, uint32_t off,
                      uint32_t len, void *opaque)
{
	struct echo_app *a = (struct echo_app *)ipk_node_app(opaque);
	static uint8_t buf[65536];
	uint32_t got = ipk_pkt_copy(ctx, pkt, off, buf, len < sizeof(buf) ? len : sizeof(buf));
	a->datagrams++;
	ipk_udp_sendto_addr(ctx, t->local_port_be, &t->peer, t->peer_port_be, buf, got,
	                    ipk_node_now(ipk_node_from(opaque)));
}

static const struct ipk_ops echo_events = {
	.tcp_accepted = echo_accepted,
	.tcp_payload = echo_payload,
	.tcp_acked = echo_acked,
	.tcp_closed = echo_closed,
	.udp_recv = echo_udp,
	.udp_recv6 = echo_udp6,
};

static void usage(FILE *f)
{
	fprintf(f, "usage: ipkit-echo --io SPEC --ip A.B.C.D/N [options]\n"
	           "TCP and UDP echo server (RFC 862).\n\n"
	           "  --port N         TCP port, 0 = none (default 7)\n"
	           "  --udp-port N     UDP port, 0 = none (default 7)\n"
	           "  --idle-timeout S close a connection that makes no progress for S seconds,\n"
	           "                   reset it if the close does not complete or echoes wait\n"
	           "                   unread (default 300; 0 = never; single node only)\n"
	           "multi-core (any of these selects it; TCP only):\n"
	           "  --workers N      N worker threads, each its own stack context (default 1)\n"
	           "  --model M        unified: the app runs in the stack thread's callbacks\n"
	           "                   (default); merge: app and stack threads share a CPU and\n"
	           "                   wake each other through eventfds; split: app and stack\n"
	           "                   threads on separate CPUs busy-poll their queues\n"
	           "  --steer S        soft: one reader thread hashes frames (Toeplitz RSS) to\n"
	           "                   the workers (default, any backend); queues: worker i\n"
	           "                   opens queue i of the backend (afxdp, NIC RSS)\n"
	           "  --cpus LIST      CPUs to pin to, comma separated: the soft reader first,\n"
	           "                   then per worker its stack thread (and app thread for\n"
	           "                   split); reused from the start when short\n"
	           "  --connect A.B.C.D:PORT or [IPV6]:PORT  also act as echo client: every\n"
	           "                   worker opens --conns connections (active opens),\n"
	           "                   sends one message, checks the echo and closes; exit\n"
	           "                   when all are done. IPv6 needs --ip6 (the opens wait\n"
	           "                   for its DAD)\n"
	           "  --conns N        client connections per worker (default 10)\n"
	           "  --msg-size N     client message bytes, 1..1024 (default 64)\n"
	           "  --timeout S      client: give up after S seconds (default 60)\n"
	           "  Per-worker counters are printed on exit (wrong_queue must be 0).\n%s",
	        app_common_help);
}

/* Multi-core options; 1 consumed, 0 not ours, -1 bad value. */
/* --connect A.B.C.D:PORT or [IPV6]:PORT (the brackets as in a URL, RFC 3986 §3.2.2).
 * 0, or -1 for anything else (a zone, ::, a mapped or multicast address is refused
 * later by the runtime as an open that fails). */
static int parse_connect(const char *v, struct ew_opts *m)
{
	char ip[INET6_ADDRSTRLEN + 1], *end;
	const char *colon, *close = NULL;
	long p;

	if (v[0] == '[') {
		close = strchr(v, ']');
		if (!close || close[1] != ':')
			return -1;
		colon = close + 1;
		v++;
	} else {
		colon = strchr(v, ':');
	}
	if (!colon || (size_t)((close ? close : colon) - v) >= sizeof(ip))
		return -1;
	p = strtol(colon + 1, &end, 10);
	if (*end || p < 1 || p > 65535)
		return -1;
	memcpy(ip, v, (size_t)((close ? close : colon) - v));
	ip[(close ? close : colon) - v] = 0;
	if (close) {
		static const uint8_t any[16];
		if (inet_pton(AF_INET6, ip, m->connect6) != 1 || memcmp(m->connect6, any, 16) == 0)
			return -1;
		m->connect_v6 = 1;
	} else if (app_parse_ip4(ip, &m->connect_ip4_be, NULL) < 0) {
		return -1;
	}
	m->connect_port_be = ipk_htons((uint16_t)p);
	return 0;
}

static int mc_opt(struct ew_opts *m, int *used, int argc, char **argv, int *i)
{
	const char *v;
	char *end;
	int r;

	if ((r = app_arg("--workers", argc, argv, i, &v)) != 0) {
		long n = r > 0 ? strtol(v, &end, 10) : 0;
		if (r < 0 || *end || n < 1 || n > IPK_WORKERS_MAX)
			return -1;
		m->nworkers = (unsigned)n;
	} else if ((r = app_arg("--model", argc, argv, i, &v)) != 0) {
		if (r < 0 || (m->model = ipk_model_parse(v)) < 0)
			return -1;
	} else if ((r = app_arg("--steer", argc, argv, i, &v)) != 0) {
		if (r < 0 || (strcmp(v, "soft") != 0 && strcmp(v, "queues") != 0))
			return -1;
		m->steer = strcmp(v, "soft") == 0 ? IPK_STEER_SOFT : IPK_STEER_QUEUES;
	} else if ((r = app_arg("--cpus", argc, argv, i, &v)) != 0) {
		for (m->ncpus = 0; r > 0 && *v && m->ncpus < sizeof(m->cpus) / sizeof(m->cpus[0]);) {
			m->cpus[m->ncpus++] = (int)strtol(v, &end, 10);
			if (end == v || (*end && *end != ','))
				return -1;
			v = *end ? end + 1 : end;
		}
		if (r < 0)
			return -1;
	} else if ((r = app_arg("--connect", argc, argv, i, &v)) != 0) {
		if (r < 0 || parse_connect(v, m) < 0)
			return -1;
	} else if ((r = app_arg("--conns", argc, argv, i, &v)) != 0) {
		m->conns = r > 0 ? (uint32_t)strtoul(v, &end, 10) : 0;
		if (r < 0 || *end || m->conns == 0)
			return -1;
	} else if ((r = app_arg("--msg-size", argc, argv, i, &v)) != 0) {
		m->msg_size = r > 0 ? (uint32_t)strtoul(v, &end, 10) : 0;
		if (r < 0 || *end || m->msg_size == 0 || m->msg_size > 1024)
			return -1;
	} else if ((r = app_arg("--timeout", argc, argv, i, &v)) != 0) {
		m->timeout_s = r > 0 ? (unsigned)strtoul(v, &end, 10) : 0;
		if (r < 0 || *end)
			return -1;
	} else {
		return 0;
	}
	*used = 1;
	return 1;
}

static int parse_port(const char *v, uint16_t *port_be)
{
	char *end;
	long p = strtol(v, &end, 10);
	if (end == v || *end || p < 0 || p > 65535) {
		fprintf(stderr, "'%s' is not a port number\n", v);
		return -1;
	}
	*port_be = ipk_htons((uint16_t)p);
	return 0;
}

int main(int argc, char **argv)
{
	struct app_opts o;
	struct ew_opts m;
	int multi = 0;
	struct echo_app a;
	struct ipk_node *n;
	volatile int *stop;
	int i, rc;

	app_opts_default(&o);
	memset(&a, 0, sizeof(a));
	memset(&m, 0, sizeof(m));
	m.nworkers = 1;
	m.conns = 10;
	m.msg_size = 64;
	m.timeout_s = 60;
	a.tcp_port_be = a.udp_port_be = ipk_htons(7);
	a.idle_ns = ECHO_IDLE_DEFAULT_S * 1000000000ull;
	for (i = 1; i < argc; i++) {
		const char *v;
		int r;
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return APP_EXIT_OK;
		}
		if ((r = app_opt(&o, argc, argv, &i)) != 0) {
			if (r < 0)
				return APP_EXIT_USAGE;
			continue;
		}
		if ((r = app_arg("--port", argc, argv, &i, &v)) != 0) {
			if (r < 0 || parse_port(v, &a.tcp_port_be) < 0)
				return APP_EXIT_USAGE;
			continue;
		}
		if ((r = mc_opt(&m, &multi, argc, argv, &i)) != 0) {
			if (r < 0) {
				fprintf(stderr, "ipkit-echo: bad value for %s (see --help)\n", argv[i]);
				return APP_EXIT_USAGE;
			}
			continue;
		}
		if ((r = app_arg("--idle-timeout", argc, argv, &i, &v)) != 0) {
			char *e = NULL;
			double secs = r > 0 ? strtod(v, &e) : -1;
			if (r < 0 || !e || *e || !(secs >= 0 && secs <= 86400)) {
				fprintf(stderr, "ipkit-echo: bad --idle-timeout (seconds, 0..86400)\n");
				return APP_EXIT_USAGE;
			}
			a.idle_ns = (uint64_t)(secs * 1e9);
			continue;
		}
		if ((r = app_arg("--udp-port", argc, argv, &i, &v)) != 0) {
			if (r < 0 || parse_port(v, &a.udp_port_be) < 0)
				return APP_EXIT_USAGE;
			continue;
		}
		fprintf(stderr, "ipkit-echo: unknown argument '%s' (see --help)\n", argv[i]);
		return APP_EXIT_USAGE;
	}
	if (multi) {
		if (!o.io || !o.ip4_be) {
			fprintf(stderr, "both --io SPEC and --ip A.B.C.D/N are required (see --help)\n");
			return APP_EXIT_USAGE;
		}
		if (o.cpu >= 0 && m.ncpus == 0) {
			m.cpus[0] = o.cpu;
			m.ncpus = 1;
		}
		if (m.connect_v6 && !o.ip6) {
			fprintf(stderr, "--connect to an IPv6 address needs --ip6 ADDR/N\n");
			return APP_EXIT_USAGE;
		}
		m.port_be = a.tcp_port_be;
		m.udp_port_be = a.udp_port_be;
		return ew_main(&o, &m);
	}
	stop = app_stop_flag();
	n = app_node(&o, &echo_events, &a, NULL);
	if ((a.tcp_port_be && ipk_tcp_listen(ipk_node_ctx(n), a.tcp_port_be, 128) < 0) ||
	    (a.udp_port_be && ipk_udp_bind(ipk_node_ctx(n), a.udp_port_be) < 0)) {
		fprintf(stderr, "ipkit-echo: cannot listen on the port(s)\n");
		ipk_node_destroy(n);
		return APP_EXIT_SETUP;
	}
	fprintf(stderr, "ipkit-echo: serving on %s (tcp %u, udp %u)\n", o.io,
	        ipk_ntohs(a.tcp_port_be), ipk_ntohs(a.udp_port_be));
	rc = echo_run(n, &a, stop);
	if (o.verbose) {
		app_report(n, "ipkit-echo");
		fprintf(stderr, "ipkit-echo: %llu connections, %llu ended idle\n",
		        (unsigned long long)a.conns, (unsigned long long)a.idle_closed);
	}
	ipk_node_destroy(n);
	return rc < 0 ? APP_EXIT_FAIL : APP_EXIT_OK;
}
