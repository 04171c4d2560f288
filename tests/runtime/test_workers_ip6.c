/*
 * IPv6 through the workers' software steering (runtime/steer.c, wio.c): two workers
 * with IPv6 on (memlink role a, one address for both) and a plain node on role b in
 * the same process.
 *
 *   - Neighbor Discovery reaches every worker (each resolves the client itself), and
 *     the client's echo requests are answered exactly once: the reader steers them to
 *     one worker by the address hash, never to all (before IPv6 steering every IPv6
 *     frame went to every worker and each answered);
 *   - UDP from 16 source ports to a port nobody bound draws exactly one Port
 *     Unreachable each, and both workers took some (the 36-byte tuple hash spreads
 *     the flows as a NIC hashing IPv6 UDP would);
 *   - no frame reached the wrong worker (wrong_queue 0), under each thread model.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#include <ipkit/runtime.h>

#define NPORTS 16
#define NPINGS 5

static const uint8_t srv6[16] = {0xfd, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
static const uint8_t cli6[16] = {0xfd, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

struct cli {
	uint32_t pongs, errors, other_errors;
	uint32_t pinged; /* bit s: echo sequence s was answered */
	uint32_t answered; /* bit p: port 43000 + p got its Port Unreachable */
};

static void cli_pong(struct ipk_ctx *ctx, const uint8_t from[16], uint16_t id_be,
                     uint16_t seq_be, uint32_t payload_len, void *opaque)
{
	struct cli *c = (struct cli *)ipk_node_app(opaque);

	(void)ctx;
	(void)id_be;
	(void)payload_len;
	if (memcmp(from, srv6, 16) == 0) {
		c->pongs++;
		if (ipk_ntohs(seq_be) < 32)
			c->pinged |= 1u << ipk_ntohs(seq_be);
	}
}

static void cli_error6(struct ipk_ctx *ctx, const struct ipk_atuple *t, uint8_t type,
                       uint8_t code, void *opaque)
{
	struct cli *c = (struct cli *)ipk_node_app(opaque);

	(void)ctx;
	/* RFC 4443 §3.1: Destination Unreachable, code 4 port unreachable */
	if (type == 1 && code == 4) {
		unsigned p = (unsigned)(ipk_ntohs(t->local_port_be) - 43000u);
		c->errors++;
		if (p < NPORTS)
			c->answered |= 1u << p;
	} else
		c->other_errors++;
}

/* ipk_udp_bind wants an IPv4 handler too (the bind is shared by both families) */
static void cli_udp4(struct ipk_ctx *ctx, const struct ipk_tuple *t, void *pkt, uint32_t off,
                     uint32_t len, void *opaque)
{
	(void)ctx;
	(void)t;
	(void)pkt;
	(void)off;
	(void)len;
	(void)opaque;
}

static const struct ipk_ops cli_events = {
	.udp_recv = cli_udp4, .icmp6_echo_reply = cli_pong, .udp_error6 = cli_error6,
};

/* IPv6 on for every worker and the client: one static address each, no DAD wait
 * (the test owns the link). */
static void tweak6(struct ipk_config *c, const uint8_t addr[16])
{
	c->ip6_enable = 1;
	memcpy(c->ip6_addr, addr, 16);
	c->ip6_prefix_len = 64;
	c->ip6_dad_transmits = 0;
	c->ip6_rs_count = 0;
	c->max_udp_binds = NPORTS;
}

static void srv_tweak(struct ipk_config *c, void *app)
{
	(void)app;
	tweak6(c, srv6);
}

static void cli_tweak(struct ipk_config *c, void *app)
{
	(void)app;
	tweak6(c, cli6);
}

static const struct ipk_app_ops no_app = { .start = NULL };

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Poll the client until *v reaches want, then on for `settle_ms` more so that a
 * duplicate would show; bounded by 60 s. */
static void poll_until(struct ipk_node *n, const uint32_t *v, uint32_t want, uint64_t settle_ms)
{
	uint64_t deadline = now_ms() + 60000, settle = 0;

	while (now_ms() < deadline) {
		ipk_node_poll(n, 1);
		if (*v >= want && !settle)
			settle = now_ms() + settle_ms;
		if (settle && now_ms() >= settle)
			return;
	}
}

static struct ipk_workers *start_workers(const char *spec, int model, int steer)
{
	struct ipk_workers_cfg wc;
	struct ipk_workers *ws;
	char err[256];

	ipk_workers_cfg_default(&wc);
	wc.node.io_spec = spec;
	wc.node.ip4_be = IPK_IP4(10, 9, 0, 1);
	wc.node.core_tweak = srv_tweak;
	wc.nworkers = 2;
	wc.model = model;
	wc.steer = steer;
	wc.app = &no_app;
	ws = ipk_workers_start(&wc, err, sizeof(err));
	if (!ws)
		fprintf(stderr, "workers: %s\n", err);
	return ws;
}

static struct ipk_node *start_client(const char *spec, struct cli *c)
{
	struct ipk_node_cfg nc;
	struct ipk_node *n;
	char err[256];

	ipk_node_cfg_default(&nc);
	nc.io_spec = spec;
	nc.ip4_be = IPK_IP4(10, 9, 0, 2);
	nc.events = &cli_events;
	nc.app = c;
	nc.core_tweak = cli_tweak;
	n = ipk_node_create(&nc, err, sizeof(err));
	if (!n)
		fprintf(stderr, "client: %s\n", err);
	return n;
}

static void pings(struct ipk_node *n, struct cli *c)
{
	uint16_t s;

	uint8_t a[4][16];
	uint64_t up = now_ms() + 30000;

	/* the client's addresses come up on its first runs (no DAD) */
	while (ipk_ip6_addrs(ipk_node_ctx(n), a, 4) < 2 && now_ms() < up)
		ipk_node_poll(n, 1);
	/* the first request waits for ND (the client's NS reaches both workers); a
	 * request or answer lost on a loaded machine is sent again every 500 ms, all
	 * bounded by 30 s: each sequence answered, never more often than sent */
	uint32_t sent = 0;
	uint64_t deadline = now_ms() + 30000;

	for (s = 1; s <= NPINGS; s++) {
		uint64_t resend = 0;

		while (!(c->pinged & (1u << s)) && now_ms() < deadline) {
			if (now_ms() >= resend) {
				CHECK_EQ(ipk_icmp6_echo(ipk_node_ctx(n), srv6, ipk_htons(0x66),
				                        ipk_htons(s), 32, ipk_node_now(n)), 0);
				sent++;
				resend = now_ms() + 500;
			}
			ipk_node_poll(n, 1);
		}
	}
	poll_until(n, &c->pongs, c->pongs, 200); /* late duplicates show here */
	CHECK_EQ(c->pinged, ((1u << NPINGS) - 1u) << 1);
	/* one answer per request sent: one worker per flow */
	CHECK(c->pongs >= NPINGS && c->pongs <= sent);
}

/* One datagram to a closed port from each of NPORTS client ports: each draws one
 * Port Unreachable from the worker its flow is steered to. A datagram or error lost
 * on a loaded machine (a worker still resolving the client, a full ring) is sent
 * again every 500 ms for the ports not answered yet, bounded by 60 s: the check is
 * that every port is answered, and never more often than it was sent to (no flow
 * answered by both workers). */
static void port_unreachables(struct ipk_node *n, struct cli *c)
{
	struct ipk_addr to;
	uint8_t msg[64];
	uint16_t p;
	uint32_t sent = 0, all = (1u << NPORTS) - 1u;
	uint64_t deadline = now_ms() + 60000, resend = 0;

	memset(&to, 0, sizeof(to));
	to.family = IPK_AF_INET6;
	memcpy(to.a, srv6, 16);
	memset(msg, 0x5a, sizeof(msg));
	for (p = 0; p < NPORTS; p++)
		CHECK_EQ(ipk_udp_bind(ipk_node_ctx(n), ipk_htons((uint16_t)(43000 + p))), IPK_OK);
	while (c->answered != all && now_ms() < deadline) {
		if (now_ms() >= resend) {
			for (p = 0; p < NPORTS; p++) {
				if (c->answered & (1u << p))
					continue;
				CHECK(ipk_udp_sendto_addr(ipk_node_ctx(n), ipk_htons((uint16_t)(43000 + p)),
				                          &to, ipk_htons(9), msg, sizeof(msg),
				                          ipk_node_now(n)) >= 0);
				sent++;
				ipk_node_poll(n, 0);
			}
			resend = now_ms() + 500;
		}
		ipk_node_poll(n, 1);
	}
	poll_until(n, &c->errors, c->errors, 300); /* late duplicates show here */
	CHECK_EQ(c->answered, all);
	CHECK(c->errors >= NPORTS && c->errors <= sent);
	CHECK_EQ(c->other_errors, 0);
}

static void run_model(int model, int steer, const char *name)
{
	char spec[128];
	struct ipk_workers *ws;
	struct ipk_node *n;
	struct cli c;
	unsigned i;

	memset(&c, 0, sizeof(c));
	/* queues: two queue pairs, worker i on queue i; the client's open serves both
	 * and places each frame as an RSS NIC would (io/memlink) */
	snprintf(spec, sizeof(spec), "memlink:ipkw6%d%s,role=a%s", (int)getpid(), name,
	         steer == IPK_STEER_QUEUES ? ",queues=2" : "");
	ws = start_workers(spec, model, steer);
	CHECK(ws != NULL);
	if (!ws)
		return;
	snprintf(spec, sizeof(spec), "memlink:ipkw6%d%s,role=b%s", (int)getpid(), name,
	         steer == IPK_STEER_QUEUES ? ",queues=2" : "");
	n = start_client(spec, &c);
	CHECK(n != NULL);
	if (n) {
		pings(n, &c);
		port_unreachables(n, &c);
	}
	ipk_workers_stop(ws);
	for (i = 0; i < 2; i++) {
		struct ipk_worker_stats st;
		const struct ipk_counters *k = ipk_counters(ipk_node_ctx(ipk_workers_node(ws, i)));

		CHECK_EQ(ipk_workers_stats(ws, i, &st), IPK_OK);
		CHECK_EQ(st.wrong_queue, 0);
		/* every worker heard ND (it resolved the client on its own) */
		CHECK(k->nd_rx > 0);
		/* the 16 flows were spread over both workers by their tuple hash */
		CHECK(k->drop[IPK_DROP_UDP_NO_PORT] > 0);
	}
	ipk_workers_destroy(ws);
	if (n)
		ipk_node_destroy(n);
}

static void test_ip6_soft_steering_unified(void)
{
	run_model(IPK_MODEL_UNIFIED, IPK_STEER_SOFT, "u");
}

static void test_ip6_soft_steering_merge(void) { run_model(IPK_MODEL_MERGE, IPK_STEER_SOFT, "m"); }

/* queue steering: the NIC (memlink's emulation) hashes IPv6, ND lands on one queue
 * and its worker copies it to the other through the ARP inbox */
static void test_ip6_queue_steering_unified(void)
{
	run_model(IPK_MODEL_UNIFIED, IPK_STEER_QUEUES, "q");
}

int main(void)
{
	RUN(test_ip6_soft_steering_unified);
	RUN(test_ip6_soft_steering_merge);
	RUN(test_ip6_queue_steering_unified);
	return check_summary();
}
