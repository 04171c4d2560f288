/*
 * TCP over IPv6 through the workers' application interface (runtime/model.c): two
 * workers with IPv6 on (memlink role a, one address for both) and a plain node on
 * role b, in both directions at once:
 *   - passive: the node opens NCONN connections to the workers' port 80 over IPv6;
 *     each reaches a worker's accepted6 with its IPv6 tuple (families, addresses,
 *     ports checked), the worker echoes every byte back (ipk_app_echoq), the node
 *     checks them; the tuple hash spreads the connections over both workers;
 *   - active: every worker, once the node's first connection reached it, opens NCONN
 *     connections with ipk_app_connect_addr to the
 *     node's port 90 over IPv6, sends a message and checks the node's echo. The
 *     core picks a local port whose tuple hashes back to the opening worker
 *     (ipk_rss_port_ok6); were it not so the SYN-ACK would reach the other worker,
 *     which has no such connection, and the open would fail.
 * No frame may reach the wrong worker (wrong_queue 0). Under software steering and
 * queue steering (queues=2), UNIFIED and MERGE. Then the call's refusals.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#include <ipkit/runtime.h>

#define NCONN 8
#define NMAX 40 /* the node's opens: NCONN, more while a worker has none */
#define MSG_LEN 3000
#define NW 2

static const uint8_t srv6[16] = {0xfd, 0, 0, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
static const uint8_t cli6[16] = {0xfd, 0, 0, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

static void fill(uint8_t *b, uint32_t seed)
{
	uint32_t i;

	for (i = 0; i < MSG_LEN; i++)
		b[i] = (uint8_t)(seed * 31u + i * 7u);
}

/* ---------------------------------------------------------- the workers' app */

struct sconn {
	struct ipk_app_echoq q; /* passive: refs held until echoed */
	int active;             /* ours (ipk_app_connect_addr) */
	uint32_t got, bad;      /* active: echo bytes received, mismatches */
	uint8_t msg[MSG_LEN];
};

struct srv {
	uint32_t accepted6[NW], accepted4[NW], tuple_bad[NW];
	uint32_t active_ok[NW], active_fail[NW], echoed[NW], passive_closed[NW];
};

static struct srv *srv_of(struct ipk_app *a) { return (struct srv *)ipk_app_arg(a); }

static void app_start(struct ipk_app *a, unsigned worker)
{
	(void)worker;
	CHECK_EQ(ipk_app_listen(a, ipk_htons(80)), 0);
}

/* The worker's own opens, once a connection from the node shows its address is up
 * (DAD off, but the address comes up in the worker's first run, after start). */
static void app_open_active(struct ipk_app *a, unsigned worker)
{
	struct ipk_addr peer;
	unsigned i;

	memset(&peer, 0, sizeof(peer));
	peer.family = IPK_AF_INET6; /* refused at the call: ::, port 0, another family */
	CHECK_EQ(ipk_app_connect_addr(a, &peer, ipk_htons(90), NULL), IPK_EINVAL);
	memcpy(peer.a, cli6, 16);
	CHECK_EQ(ipk_app_connect_addr(a, &peer, 0, NULL), IPK_EINVAL);
	peer.family = 99;
	CHECK_EQ(ipk_app_connect_addr(a, &peer, ipk_htons(90), NULL), IPK_EINVAL);
	CHECK_EQ(ipk_app_connect_addr(a, NULL, ipk_htons(90), NULL), IPK_EINVAL);
	peer.family = IPK_AF_INET6;
	for (i = 0; i < NCONN; i++) {
		struct sconn *s = (struct sconn *)calloc(1, sizeof(*s));

		s->active = 1;
		fill(s->msg, 1000u + worker * 100u + i);
		CHECK_EQ(ipk_app_connect_addr(a, &peer, ipk_htons(90), s), 0);
	}
}

static void *app_accepted6(struct ipk_app *a, uint64_t cid, const struct ipk_atuple *t)
{
	unsigned w = ipk_app_worker(a);

	(void)cid;
	if (__atomic_fetch_add(&srv_of(a)->accepted6[w], 1u, __ATOMIC_RELEASE) == 0)
		app_open_active(a, w);
	if (t->local.family != IPK_AF_INET6 || t->peer.family != IPK_AF_INET6 ||
	    memcmp(t->local.a, srv6, 16) != 0 || memcmp(t->peer.a, cli6, 16) != 0 ||
	    ipk_ntohs(t->local_port_be) != 80 || t->peer_port_be == 0)
		srv_of(a)->tuple_bad[w]++;
	return calloc(1, sizeof(struct sconn));
}

static void *app_accepted4(struct ipk_app *a, uint64_t cid, const struct ipk_tuple *t)
{
	(void)cid;
	(void)t;
	srv_of(a)->accepted4[ipk_app_worker(a)]++; /* no IPv4 client here */
	return calloc(1, sizeof(struct sconn));
}

static void app_connected(struct ipk_app *a, uint64_t cid, void *user)
{
	struct sconn *s = (struct sconn *)user;

	CHECK_EQ(ipk_app_send(a, cid, s->msg, MSG_LEN), 0);
}

static void app_data(struct ipk_app *a, uint64_t cid, void *user, struct ipk_pkt *ref,
                     const uint8_t *data, uint32_t len)
{
	struct sconn *s = (struct sconn *)user;

	if (!s) {
		if (ref)
			ipk_app_release(a, cid, ref, len);
		return;
	}
	if (!s->active) {
		if (ref)
			ipk_app_echoq_add(a, cid, &s->q, ref);
		else
			ipk_app_close(a, cid); /* the node's FIN: done */
		return;
	}
	if (ref) {
		if (s->got + len > MSG_LEN || memcmp(data, s->msg + s->got, len) != 0)
			s->bad++;
		s->got += len;
		ipk_app_release(a, cid, ref, len);
		if (s->got == MSG_LEN)
			ipk_app_close(a, cid);
	}
}

static void app_sent(struct ipk_app *a, uint64_t cid, void *user, const void *buf, uint32_t len)
{
	struct sconn *s = (struct sconn *)user;

	(void)buf;
	if (s && !s->active && ipk_app_echoq_sent(a, cid, &s->q, len) == 0)
		__atomic_fetch_add(&srv_of(a)->echoed[ipk_app_worker(a)], len, __ATOMIC_RELEASE);
}

static void app_closed(struct ipk_app *a, uint64_t cid, void *user, enum ipk_close_reason why)
{
	struct sconn *s = (struct sconn *)user;
	unsigned w = ipk_app_worker(a);

	(void)why;
	if (!s)
		return;
	if (s->active) /* read by the test's thread while the workers run */
		__atomic_fetch_add(s->got == MSG_LEN && !s->bad ? &srv_of(a)->active_ok[w] :
		                   &srv_of(a)->active_fail[w], 1u, __ATOMIC_RELEASE);
	else
		__atomic_fetch_add(&srv_of(a)->passive_closed[w], 1u, __ATOMIC_RELEASE);
	ipk_app_echoq_drop(a, cid, &s->q);
	free(s);
}

static const struct ipk_app_ops app = {
	.start = app_start, .accepted = app_accepted4, .connected = app_connected,
	.data = app_data, .sent = app_sent, .closed = app_closed, .accepted6 = app_accepted6,
};

/* ---------------------------------------------------------- the node */

struct ncon {
	int mine;               /* the node's active open (to port 80) */
	uint32_t got, bad, seed;
};

struct cli {
	struct ncon c[NMAX];
	uint32_t n, done, bad, echoed_back;
	uint8_t msg[NMAX][MSG_LEN];
};

static void cli_connected(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *opaque)
{
	struct cli *k = (struct cli *)ipk_node_app(opaque);
	struct ncon *n = (struct ncon *)user;
	uint32_t i = (uint32_t)(n - k->c);

	if (ipk_tcp_write(ctx, c, k->msg[i], MSG_LEN, ipk_node_now(opaque)) != MSG_LEN)
		k->bad++;
}

static void *cli_accepted(struct ipk_ctx *ctx, struct ipk_conn *c, void *opaque)
{
	(void)ctx;
	(void)c;
	(void)opaque;
	return NULL; /* a worker's active open: echoed in cli_payload */
}

static void cli_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                        uint32_t off, uint32_t len, void *opaque)
{
	struct cli *k = (struct cli *)ipk_node_app(opaque);
	struct ncon *n = (struct ncon *)user;
	uint8_t buf[2048];
	uint32_t at = 0;

	if (!pkt) { /* FIN */
		if (!n)
			ipk_tcp_close(ctx, c, ipk_node_now(opaque));
		return;
	}
	while (at < len) {
		uint32_t m = len - at < sizeof(buf) ? len - at : (uint32_t)sizeof(buf);

		ipk_pkt_copy(ctx, pkt, off + at, buf, m);
		if (n) {
			uint32_t i = (uint32_t)(n - k->c);

			if (n->got + m > MSG_LEN || memcmp(buf, k->msg[i] + n->got, m) != 0)
				n->bad++;
			n->got += m;
		} else if (ipk_tcp_write(ctx, c, buf, m, ipk_node_now(opaque)) == (int)m) {
			k->echoed_back += m;
		} else {
			k->bad++;
		}
		at += m;
	}
	ipk_tcp_recved(ctx, c, len, ipk_node_now(opaque));
	if (n && n->got == MSG_LEN) {
		k->done += !n->bad;
		ipk_tcp_close(ctx, c, ipk_node_now(opaque));
	}
}

static const struct ipk_ops cli_events = {
	.tcp_connected = cli_connected, .tcp_accepted = cli_accepted, .tcp_payload = cli_payload,
};

static void tweak6(struct ipk_config *c, const uint8_t addr[16])
{
	c->ip6_enable = 1;
	memcpy(c->ip6_addr, addr, 16);
	c->ip6_prefix_len = 64;
	c->ip6_dad_transmits = 0; /* the test owns the link */
	c->ip6_rs_count = 0;
}

static void srv_tweak(struct ipk_config *c, void *a)
{
	(void)a;
	tweak6(c, srv6);
}

static void cli_tweak(struct ipk_config *c, void *a)
{
	(void)a;
	tweak6(c, cli6);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void run(int model, int steer, const char *name)
{
	struct ipk_workers_cfg wc;
	struct ipk_node_cfg nc;
	struct ipk_workers *ws;
	struct ipk_node *n = NULL;
	struct ipk_addr to;
	static struct cli k;
	struct srv s;
	char spec[128], err[256];
	const char *q = steer == IPK_STEER_QUEUES ? ",queues=2" : "";
	uint64_t deadline;
	uint8_t a6[4][16];
	uint32_t ok = 0, echoed = 0, pclosed = 0;
	unsigned w;

	memset(&k, 0, sizeof(k));
	memset(&s, 0, sizeof(s));
	snprintf(spec, sizeof(spec), "memlink:ipkt6%d%s,role=a%s", (int)getpid(), name, q);
	ipk_workers_cfg_default(&wc);
	wc.node.io_spec = spec;
	wc.node.ip4_be = IPK_IP4(10, 11, 0, 1);
	wc.node.core_tweak = srv_tweak;
	wc.nworkers = NW;
	wc.model = model;
	wc.steer = steer;
	wc.app = &app;
	wc.app_arg = &s;
	ws = ipk_workers_start(&wc, err, sizeof(err));
	CHECK(ws != NULL);
	if (!ws) {
		fprintf(stderr, "workers: %s\n", err);
		return;
	}
	snprintf(spec, sizeof(spec), "memlink:ipkt6%d%s,role=b%s", (int)getpid(), name, q);
	ipk_node_cfg_default(&nc);
	nc.io_spec = spec;
	nc.ip4_be = IPK_IP4(10, 11, 0, 2);
	nc.events = &cli_events;
	nc.app = &k;
	nc.core_tweak = cli_tweak;
	n = ipk_node_create(&nc, err, sizeof(err));
	CHECK(n != NULL);
	if (n) {
		struct ipk_ctx *ctx = ipk_node_ctx(n);

		CHECK_EQ(ipk_tcp_listen(ctx, ipk_htons(90), 64), IPK_OK);
		memset(&to, 0, sizeof(to));
		to.family = IPK_AF_INET6;
		memcpy(to.a, srv6, 16);
		/* bounded by 10 s (well above the ~0.2 s it takes) */
		deadline = now_ms() + 10000;
		while (ipk_ip6_addrs(ctx, a6, 4) < 2 && now_ms() < deadline)
			ipk_node_poll(n, 1);
		while (now_ms() < deadline) {
			ok = echoed = pclosed = 0;
			for (w = 0; w < NW; w++) {
				pclosed += __atomic_load_n(&s.passive_closed[w], __ATOMIC_ACQUIRE);
				ok += __atomic_load_n(&s.active_ok[w], __ATOMIC_ACQUIRE) +
				      __atomic_load_n(&s.active_fail[w], __ATOMIC_ACQUIRE);
				/* the sent events come after the bytes left (MERGE: later) */
				echoed += __atomic_load_n(&s.echoed[w], __ATOMIC_ACQUIRE);
			}
			/* NCONN opens, then one more at a time while a worker has none */
			if (k.n < NMAX && (k.n < NCONN ||
			                   (k.done + k.bad >= k.n &&
			                    (!__atomic_load_n(&s.accepted6[0], __ATOMIC_ACQUIRE) ||
			                     !__atomic_load_n(&s.accepted6[1], __ATOMIC_ACQUIRE))))) {
				struct ipk_conn *c;

				fill(k.msg[k.n], k.n);
				k.c[k.n].mine = 1;
				CHECK_EQ(ipk_tcp_connect_addr(ctx, &to, ipk_htons(80), 0, &k.c[k.n], &c,
				                              ipk_node_now(n)), IPK_OK);
				k.n++;
				continue;
			}
			/* and every connection closed on the workers (their state freed) */
			if (k.done + k.bad >= k.n && ok >= NW * NCONN && echoed >= k.n * MSG_LEN &&
			    pclosed >= k.n)
				break;
			ipk_node_poll(n, 1);
		}
	}
	ipk_workers_stop(ws);
	CHECK(k.n >= NCONN);
	CHECK_EQ(k.done, k.n);            /* every echo from a worker byte for byte */
	CHECK_EQ(k.bad, 0);
	CHECK_EQ(k.echoed_back, NW * NCONN * MSG_LEN);
	for (w = 0; w < NW; w++) {
		struct ipk_worker_stats st;

		CHECK_EQ(ipk_workers_stats(ws, w, &st), IPK_OK);
		CHECK_EQ(st.wrong_queue, 0);
		CHECK_EQ(s.tuple_bad[w], 0);
		CHECK_EQ(s.accepted4[w], 0);
		CHECK(s.accepted6[w] > 0);       /* the node's opens spread over both */
		CHECK_EQ(s.active_ok[w], NCONN); /* each worker's opens came back to it */
		CHECK_EQ(s.active_fail[w], 0);
	}
	CHECK_EQ(s.accepted6[0] + s.accepted6[1], k.n);
	CHECK_EQ(s.echoed[0] + s.echoed[1], k.n * MSG_LEN);
	CHECK_EQ(s.passive_closed[0] + s.passive_closed[1], k.n);
	ipk_workers_destroy(ws);
	if (n)
		ipk_node_destroy(n);
}

static void test_tcp6_workers_soft_unified(void) { run(IPK_MODEL_UNIFIED, IPK_STEER_SOFT, "su"); }
static void test_tcp6_workers_soft_merge(void) { run(IPK_MODEL_MERGE, IPK_STEER_SOFT, "sm"); }
static void test_tcp6_workers_queues_unified(void)
{
	run(IPK_MODEL_UNIFIED, IPK_STEER_QUEUES, "qu");
}

/* Refused at the call without an app (the other refusals: app_start). */
static void test_tcp6_connect_addr_refuses_null_app(void)
{
	struct ipk_addr p;

	memset(&p, 0, sizeof(p));
	p.family = IPK_AF_INET6;
	memcpy(p.a, cli6, 16);
	CHECK_EQ(ipk_app_connect_addr(NULL, &p, 1, NULL), IPK_EINVAL);
}

int main(void)
{
	RUN(test_tcp6_connect_addr_refuses_null_app);
	RUN(test_tcp6_workers_soft_unified);
	RUN(test_tcp6_workers_soft_merge);
	RUN(test_tcp6_workers_queues_unified);
	return check_summary();
}
