/*
 * UDP in the workers' application interface (runtime/model.c): ipk_app_udp_bind, the
 * udp event with its zero-copy ref, ipk_app_udp_send and udp_sent, under each thread
 * model. Two workers (software steering) on memlink role a echo every datagram from
 * the received buffer itself and give the ref back in udp_sent; a plain node on role
 * b, in the same process, sends datagrams from 16 source ports (so both workers get
 * some) and checks every echo byte for byte. Afterwards the counters must agree
 * (delivered == sent back, nothing dropped, no wrong-queue frame), and every packet of
 * every worker's pool must be back (a ref the model failed to free shows here; the
 * sanitizer stage runs the same test under ASan).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#include <ipkit/runtime.h>

#define NPORTS 16
#define ROUNDS 3

static void echo_start(struct ipk_app *a, unsigned worker)
{
	(void)worker;
	CHECK_EQ(ipk_app_udp_bind(a, ipk_htons(7)), IPK_OK);
}

static void echo_udp(struct ipk_app *a, const struct ipk_tuple *t, struct ipk_pkt *ref,
                     const uint8_t *data, uint32_t len)
{
	if (ipk_app_udp_send(a, t->local_port_be, t->peer_ip4_be, t->peer_port_be, data, len,
	                     ref) < 0)
		ipk_app_release(a, 0, ref, 0);
}

static void echo_udp_sent(struct ipk_app *a, void *user, const void *buf, uint32_t len,
                          int rc)
{
	(void)buf;
	(void)len;
	(void)rc;
	ipk_app_release(a, 0, (struct ipk_pkt *)user, 0);
}

static const struct ipk_app_ops echo_ops = {
	.start = echo_start,
	.udp = echo_udp,
	.udp_sent = echo_udp_sent,
};

/* The client node's view of the last echo. */
struct cli {
	uint8_t got[1500];
	uint32_t got_len;
	uint16_t got_port_be;
	int got_any;
};

static void cli_udp(struct ipk_ctx *ctx, const struct ipk_tuple *t, void *pkt, uint32_t off,
                    uint32_t len, void *opaque)
{
	struct cli *c = (struct cli *)ipk_node_app(opaque);

	c->got_len = ipk_pkt_copy(ctx, pkt, off, c->got, len < sizeof(c->got) ? len :
	                          (uint32_t)sizeof(c->got));
	c->got_port_be = t->local_port_be;
	c->got_any = 1;
}

static const struct ipk_ops cli_events = { .udp_recv = cli_udp };

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* One datagram from `port` and its echo; retried (ARP, a lost frame), bounded. */
static int exchange(struct ipk_node *n, struct cli *c, uint16_t port, const uint8_t *msg,
                    uint32_t len)
{
	uint64_t deadline = now_ms() + 5000, resend = 0;

	c->got_any = 0;
	while (now_ms() < deadline) {
		if (now_ms() >= resend) {
			(void)ipk_udp_sendto(ipk_node_ctx(n), ipk_htons(port), IPK_IP4(10, 9, 0, 1),
			                     ipk_htons(7), msg, len, ipk_node_now(n));
			resend = now_ms() + 300;
		}
		ipk_node_poll(n, 1);
		if (c->got_any)
			return c->got_port_be == ipk_htons(port) && c->got_len == len &&
			       memcmp(c->got, msg, len) == 0;
	}
	return 0;
}

static void cli_tweak(struct ipk_config *cfg, void *app)
{
	(void)app;
	cfg->max_udp_binds = NPORTS;
}

static void run_model(int model, const char *name)
{
	char err[256], spec[128];
	struct ipk_workers_cfg wc;
	struct ipk_node_cfg nc;
	struct ipk_workers *ws;
	struct ipk_node *n;
	struct cli c;
	uint64_t rx = 0, tx = 0;
	unsigned i, p, r, ok = 0;

	snprintf(spec, sizeof(spec), "memlink:ipkwu%d%s,role=a", (int)getpid(), name);
	ipk_workers_cfg_default(&wc);
	wc.node.io_spec = spec;
	wc.node.ip4_be = IPK_IP4(10, 9, 0, 1);
	wc.nworkers = 2;
	wc.model = model;
	wc.steer = IPK_STEER_SOFT;
	wc.app = &echo_ops;
	ws = ipk_workers_start(&wc, err, sizeof(err));
	if (!ws)
		fprintf(stderr, "workers: %s\n", err);
	CHECK(ws != NULL);
	if (!ws)
		return;
	snprintf(spec, sizeof(spec), "memlink:ipkwu%d%s,role=b", (int)getpid(), name);
	memset(&c, 0, sizeof(c));
	ipk_node_cfg_default(&nc);
	nc.io_spec = spec;
	nc.ip4_be = IPK_IP4(10, 9, 0, 2);
	nc.events = &cli_events;
	nc.app = &c;
	nc.core_tweak = cli_tweak;
	n = ipk_node_create(&nc, err, sizeof(err));
	if (!n)
		fprintf(stderr, "client: %s\n", err);
	CHECK(n != NULL);
	for (p = 0; n && p < NPORTS; p++)
		CHECK_EQ(ipk_udp_bind(ipk_node_ctx(n), ipk_htons((uint16_t)(42000 + p))), IPK_OK);
	for (r = 0; n && r < ROUNDS; r++) {
		for (p = 0; p < NPORTS; p++) {
			uint8_t msg[1200];
			uint32_t len = 1 + (p * 97u + r * 31u) % (uint32_t)sizeof(msg);

			for (i = 0; i < len; i++)
				msg[i] = (uint8_t)(i * 7u + p * 13u + r);
			ok += (unsigned)exchange(n, &c, (uint16_t)(42000 + p), msg, len);
		}
	}
	CHECK_EQ(ok, NPORTS * ROUNDS);
	/* let the last answer's release reach the networking side */
	for (i = 0; n && i < 200; i++)
		ipk_node_poll(n, 1);
	ipk_workers_stop(ws);
	for (i = 0; i < 2; i++) {
		struct ipk_worker_stats st;
		uint32_t bufs = 1, descs = 1;

		CHECK_EQ(ipk_workers_stats(ws, i, &st), IPK_OK);
		CHECK_EQ(st.wrong_queue, 0);
		CHECK_EQ(st.udp_drops, 0);
		CHECK_EQ(st.udp_tx, st.udp_rx);
		CHECK(st.udp_rx > 0); /* 16 source ports: both workers served */
		rx += st.udp_rx;
		tx += st.udp_tx;
		/* every ref given back: the worker's pool holds nothing (the reader's ring
		 * buffers are in another pool) */
		ipk_pool_usage(ipk_node_pool(ipk_workers_node(ws, i)), &bufs, &descs);
		CHECK_EQ(bufs, 0);
		CHECK_EQ(descs, 0);
	}
	CHECK(rx >= NPORTS * ROUNDS && tx == rx);
	ipk_workers_destroy(ws);
	if (n)
		ipk_node_destroy(n);
}

static void test_udp_echo_unified(void) { run_model(IPK_MODEL_UNIFIED, "u"); }
static void test_udp_echo_merge(void) { run_model(IPK_MODEL_MERGE, "m"); }
static void test_udp_echo_split(void) { run_model(IPK_MODEL_SPLIT, "s"); }

/* Misuse answers with IPK_EINVAL and sends nothing. */
static void test_udp_api_errors(void)
{
	static const uint8_t b[1] = {0};

	CHECK_EQ(ipk_app_udp_bind(NULL, ipk_htons(7)), IPK_EINVAL);
	CHECK_EQ(ipk_app_udp_send(NULL, ipk_htons(7), IPK_IP4(10, 0, 0, 1), ipk_htons(7), b, 1,
	                          NULL), IPK_EINVAL);
}

int main(void)
{
	RUN(test_udp_echo_unified);
	RUN(test_udp_echo_merge);
	RUN(test_udp_echo_split);
	RUN(test_udp_api_errors);
	return check_summary();
}
