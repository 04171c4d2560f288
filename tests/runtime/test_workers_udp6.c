/*
 * UDP over IPv6 through the workers' application interface (runtime/model.c):
 * ipk_app_ops.udp6 delivers a datagram with its ipk_atuple, ipk_app_udp_send_addr
 * answers it. Two workers with IPv6 on (memlink role a, one address for both) echo
 * on port 7; a plain node on role b sends from 16 source ports (the tuple hash
 * spreads them over both workers) and checks every echo's bytes and source.
 * IPv4 datagrams keep coming to udp (one IPv4 flow checked too). Under UNIFIED
 * and MERGE.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#include <ipkit/runtime.h>

#define NPORTS 16
#define CLI_PORT 44000
#define MSG_LEN 200

static const uint8_t srv6[16] = {0xfd, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
static const uint8_t cli6[16] = {0xfd, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

struct cli {
	uint32_t echoes6, echoes4, bad;  /* flows echoed (each counted once) */
	uint8_t got[NPORTS + 1];         /* flow i (port CLI_PORT + i) echoed; NPORTS: IPv4 */
};

/* Count flow `port_be`'s first echo; a repeat (a resent request) is not an error. */
static void cli_got(struct cli *c, uint16_t port_be, uint32_t *count)
{
	uint32_t i = (uint32_t)ipk_ntohs(port_be) - CLI_PORT;

	if (i > NPORTS) {
		c->bad++;
		return;
	}
	if (!c->got[i]) {
		c->got[i] = 1;
		++*count;
	}
}

/* ---------------------------------------------------------- the workers' app */

struct srv {
	uint32_t udp6[2], udp4[2], sent_ok[2], sent_fail[2];
};

static struct srv *srv_of(struct ipk_app *a)
{
	return (struct srv *)ipk_app_arg(a);
}

static void app_start(struct ipk_app *a, unsigned worker)
{
	(void)worker;
	CHECK_EQ(ipk_app_udp_bind(a, ipk_htons(7)), 0);
}

/* echo from the received buffer; the ref goes back at udp_sent */
static void app_udp6(struct ipk_app *a, const struct ipk_atuple *t, struct ipk_pkt *ref,
                     const uint8_t *data, uint32_t len)
{
	unsigned w = ipk_app_worker(a);

	srv_of(a)->udp6[w]++;
	CHECK_EQ(t->local.family, IPK_AF_INET6);
	CHECK_EQ(t->peer.family, IPK_AF_INET6);
	CHECK(memcmp(t->local.a, srv6, 16) == 0);
	CHECK(memcmp(t->peer.a, cli6, 16) == 0);
	CHECK_EQ(ipk_ntohs(t->local_port_be), 7);
	if (ref->next || ipk_app_udp_send_addr(a, t->local_port_be, &t->peer, t->peer_port_be,
	                                       data, len, ref) < 0)
		ipk_app_release(a, 0, ref, 0);
}

static void app_udp4(struct ipk_app *a, const struct ipk_tuple *t, struct ipk_pkt *ref,
                     const uint8_t *data, uint32_t len)
{
	struct ipk_addr peer;

	srv_of(a)->udp4[ipk_app_worker(a)]++;
	memset(&peer, 0, sizeof(peer));
	peer.family = IPK_AF_INET; /* the IPv4 path of ipk_app_udp_send_addr */
	memcpy(peer.a, &t->peer_ip4_be, 4);
	if (ref->next || ipk_app_udp_send_addr(a, t->local_port_be, &peer, t->peer_port_be, data,
	                                       len, ref) < 0)
		ipk_app_release(a, 0, ref, 0);
}

static void app_udp_sent(struct ipk_app *a, void *user, const void *buf, uint32_t len, int rc)
{
	(void)buf;
	(void)len;
	if (rc < 0)
		srv_of(a)->sent_fail[ipk_app_worker(a)]++;
	else
		srv_of(a)->sent_ok[ipk_app_worker(a)]++;
	ipk_app_release(a, 0, (struct ipk_pkt *)user, 0);
}

static const struct ipk_app_ops app = {
	.start = app_start, .udp = app_udp4, .udp_sent = app_udp_sent, .udp6 = app_udp6,
};

/* ---------------------------------------------------------- the client node */

static void fill(uint8_t *b, uint16_t port)
{
	uint32_t i;

	for (i = 0; i < MSG_LEN; i++)
		b[i] = (uint8_t)(port * 7u + i);
}

static int echo_ok(struct ipk_ctx *ctx, uint16_t port_be, void *pkt, uint32_t off, uint32_t len)
{
	uint8_t got[MSG_LEN], want[MSG_LEN];

	if (len != MSG_LEN || ipk_pkt_copy(ctx, pkt, off, got, MSG_LEN) != MSG_LEN)
		return 0;
	fill(want, ipk_ntohs(port_be));
	return memcmp(got, want, MSG_LEN) == 0;
}

static void cli_udp6(struct ipk_ctx *ctx, const struct ipk_atuple *t, void *pkt, uint32_t off,
                     uint32_t len, void *opaque)
{
	struct cli *c = (struct cli *)ipk_node_app(opaque);

	if (memcmp(t->peer.a, srv6, 16) == 0 && ipk_ntohs(t->peer_port_be) == 7 &&
	    ipk_ntohs(t->local_port_be) < CLI_PORT + NPORTS &&
	    echo_ok(ctx, t->local_port_be, pkt, off, len))
		cli_got(c, t->local_port_be, &c->echoes6);
	else
		c->bad++;
}

static void cli_udp4(struct ipk_ctx *ctx, const struct ipk_tuple *t, void *pkt, uint32_t off,
                     uint32_t len, void *opaque)
{
	struct cli *c = (struct cli *)ipk_node_app(opaque);

	if (t->peer_ip4_be == IPK_IP4(10, 10, 0, 1) &&
	    ipk_ntohs(t->local_port_be) == CLI_PORT + NPORTS &&
	    echo_ok(ctx, t->local_port_be, pkt, off, len))
		cli_got(c, t->local_port_be, &c->echoes4);
	else
		c->bad++;
}

static const struct ipk_ops cli_events = { .udp_recv = cli_udp4, .udp_recv6 = cli_udp6 };

/* IPv6 on for every worker and the client: one static address each, no DAD wait
 * (the test owns the link). */
static void tweak6(struct ipk_config *c, const uint8_t addr[16])
{
	c->ip6_enable = 1;
	memcpy(c->ip6_addr, addr, 16);
	c->ip6_prefix_len = 64;
	c->ip6_dad_transmits = 0;
	c->ip6_rs_count = 0;
	c->max_udp_binds = NPORTS + 2;
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

static struct ipk_workers *start_workers(const char *spec, int model, struct srv *s)
{
	struct ipk_workers_cfg wc;
	struct ipk_workers *ws;
	char err[256];

	ipk_workers_cfg_default(&wc);
	wc.node.io_spec = spec;
	wc.node.ip4_be = IPK_IP4(10, 10, 0, 1);
	wc.node.core_tweak = srv_tweak;
	wc.nworkers = 2;
	wc.model = model;
	wc.app = &app;
	wc.app_arg = s;
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
	nc.ip4_be = IPK_IP4(10, 10, 0, 2);
	nc.events = &cli_events;
	nc.app = c;
	nc.core_tweak = cli_tweak;
	n = ipk_node_create(&nc, err, sizeof(err));
	if (!n)
		fprintf(stderr, "client: %s\n", err);
	return n;
}

/* One round: the datagram of every flow not echoed yet (ND or ARP may hold or drop
 * the first ones); flow NPORTS goes over IPv4. */
static void send_round(struct ipk_node *n, const struct cli *c)
{
	struct ipk_ctx *ctx = ipk_node_ctx(n);
	struct ipk_addr to;
	uint8_t msg[MSG_LEN];
	uint16_t p;

	memset(&to, 0, sizeof(to));
	to.family = IPK_AF_INET6;
	memcpy(to.a, srv6, 16);
	for (p = 0; p <= NPORTS; p++) {
		uint16_t port_be = ipk_htons((uint16_t)(CLI_PORT + p));
		if (c->got[p])
			continue;
		fill(msg, (uint16_t)(CLI_PORT + p));
		if (p < NPORTS)
			ipk_udp_sendto_addr(ctx, port_be, &to, ipk_htons(7), msg, MSG_LEN,
			                    ipk_node_now(n));
		else
			ipk_udp_sendto(ctx, port_be, IPK_IP4(10, 10, 0, 1), ipk_htons(7), msg, MSG_LEN,
			               ipk_node_now(n));
	}
}

/* Rounds every 200 ms until every flow is echoed; bounded by 5 s. */
static void exchange(struct ipk_node *n, struct cli *c)
{
	struct ipk_ctx *ctx = ipk_node_ctx(n);
	uint8_t a[4][16];
	uint64_t deadline = now_ms() + 5000, next = 0;
	uint16_t p;

	while (ipk_ip6_addrs(ctx, a, 4) < 2 && now_ms() < deadline)
		ipk_node_poll(n, 1);
	for (p = 0; p <= NPORTS; p++)
		CHECK_EQ(ipk_udp_bind(ctx, ipk_htons((uint16_t)(CLI_PORT + p))), IPK_OK);
	while ((c->echoes6 < NPORTS || c->echoes4 < 1) && now_ms() < deadline) {
		if (now_ms() >= next) {
			send_round(n, c);
			next = now_ms() + 200;
		}
		ipk_node_poll(n, 1);
	}
}

static void run_model(int model, const char *name)
{
	char spec[128];
	struct ipk_workers *ws;
	struct ipk_node *n;
	struct cli c;
	struct srv s;
	unsigned i;

	memset(&c, 0, sizeof(c));
	memset(&s, 0, sizeof(s));
	snprintf(spec, sizeof(spec), "memlink:ipku6%d%s,role=a", (int)getpid(), name);
	ws = start_workers(spec, model, &s);
	CHECK(ws != NULL);
	if (!ws)
		return;
	snprintf(spec, sizeof(spec), "memlink:ipku6%d%s,role=b", (int)getpid(), name);
	n = start_client(spec, &c);
	CHECK(n != NULL);
	if (n)
		exchange(n, &c);
	ipk_workers_stop(ws);
	CHECK_EQ(c.echoes6, NPORTS);   /* every flow's bytes came back over IPv6 */
	CHECK_EQ(c.echoes4, 1);        /* and IPv4 still through udp */
	CHECK_EQ(c.bad, 0);
	CHECK(s.udp4[0] + s.udp4[1] >= 1);
	for (i = 0; i < 2; i++) {
		struct ipk_worker_stats st;

		CHECK_EQ(ipk_workers_stats(ws, i, &st), IPK_OK);
		CHECK_EQ(st.wrong_queue, 0);
		CHECK(s.udp6[i] > 0);  /* the 16 flows spread over both workers */
		CHECK_EQ(s.sent_fail[i], 0);
		CHECK_EQ(st.udp_drops, 0);
	}
	ipk_workers_destroy(ws);
	if (n)
		ipk_node_destroy(n);
}

static void test_udp6_app_echo_unified(void) { run_model(IPK_MODEL_UNIFIED, "u"); }
static void test_udp6_app_echo_merge(void) { run_model(IPK_MODEL_MERGE, "m"); }

/* Refused at the call: a NULL peer, an unknown family, the unspecified address. */
static void test_udp6_send_addr_refuses_bad_peer(void)
{
	struct ipk_addr p;
	uint8_t b = 0;

	memset(&p, 0, sizeof(p));
	CHECK_EQ(ipk_app_udp_send_addr(NULL, 1, &p, 1, &b, 1, NULL), IPK_EINVAL);
	p.family = IPK_AF_INET6;
	CHECK_EQ(ipk_app_udp_send_addr(NULL, 1, &p, 1, &b, 1, NULL), IPK_EINVAL);
}

int main(void)
{
	RUN(test_udp6_send_addr_refuses_bad_peer);
	RUN(test_udp6_app_echo_unified);
	RUN(test_udp6_app_echo_merge);
	return check_summary();
}
