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
#include <stdlib.h>
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

/* A datagram in several buffers (a chain of refs) is gathered into a heap copy for
 * the send, freed at udp_sent. */
static void echo_udp(struct ipk_app *a, const struct ipk_tuple *t, struct ipk_pkt *ref,
                     const uint8_t *data, uint32_t len)
{
	uint8_t *flat = NULL;

	CHECK_EQ(ipk_pkt_chain_len(ref), len);
	if (ref->next) {
		flat = (uint8_t *)malloc(len);
		CHECK(flat != NULL);
		if (flat)
			CHECK_EQ(ipk_pkt_linearize(ref, flat, len), len);
		data = flat;
	}
	if (!data || ipk_app_udp_send(a, t->local_port_be, t->peer_ip4_be, t->peer_port_be,
	                              data, len, ref) < 0) {
		free(flat);
		ipk_app_release(a, 0, ref, 0);
	}
}

static void echo_udp_sent(struct ipk_app *a, void *user, const void *buf, uint32_t len,
                          int rc)
{
	struct ipk_pkt *ref = (struct ipk_pkt *)user;

	(void)len;
	CHECK_EQ(rc, 0);
	if (ref->next)
		free((void *)(uintptr_t)buf);
	ipk_app_release(a, 0, ref, 0);
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

/* Two echo workers (software steering) on memlink role a at `spec`; buf_size 0 keeps
 * the default pool. */
static struct ipk_workers *start_echo(const char *spec, int model, uint32_t buf_size)
{
	struct ipk_workers_cfg wc;
	struct ipk_workers *ws;
	char err[256];

	ipk_workers_cfg_default(&wc);
	wc.node.io_spec = spec;
	wc.node.ip4_be = IPK_IP4(10, 9, 0, 1);
	if (buf_size) {
		wc.node.pool.buf_size = buf_size;
		wc.node.pool.nbufs = 512;
		wc.node.pool.ndescs = 1024;
	}
	wc.nworkers = 2;
	wc.model = model;
	wc.steer = IPK_STEER_SOFT;
	wc.app = &echo_ops;
	ws = ipk_workers_start(&wc, err, sizeof(err));
	if (!ws)
		fprintf(stderr, "workers: %s\n", err);
	CHECK(ws != NULL);
	return ws;
}

/* Stop the workers and check their counters: nothing dropped, every datagram sent
 * back, no wrong-queue frame, every ref given back (the worker's pool holds nothing;
 * the reader's ring buffers are in another pool). Returns the datagrams delivered. */
static uint64_t stop_and_check(struct ipk_workers *ws, int both_served)
{
	uint64_t rx = 0;
	unsigned i;

	ipk_workers_stop(ws);
	for (i = 0; i < 2; i++) {
		struct ipk_worker_stats st;
		uint32_t bufs = 1, descs = 1;

		CHECK_EQ(ipk_workers_stats(ws, i, &st), IPK_OK);
		CHECK_EQ(st.wrong_queue, 0);
		CHECK_EQ(st.udp_drops, 0);
		CHECK_EQ(st.udp_tx, st.udp_rx);
		CHECK(!both_served || st.udp_rx > 0);
		rx += st.udp_rx;
		ipk_pool_usage(ipk_node_pool(ipk_workers_node(ws, i)), &bufs, &descs);
		CHECK_EQ(bufs, 0);
		CHECK_EQ(descs, 0);
	}
	return rx;
}

static void run_model(int model, const char *name)
{
	char err[256], spec[128];
	struct ipk_node_cfg nc;
	struct ipk_workers *ws;
	struct ipk_node *n;
	struct cli c;
	uint64_t rx;
	unsigned i, p, r, ok = 0;

	snprintf(spec, sizeof(spec), "memlink:ipkwu%d%s,role=a", (int)getpid(), name);
	ws = start_echo(spec, model, 0);
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
	rx = stop_and_check(ws, 1); /* 16 source ports: both workers served */
	CHECK(rx >= NPORTS * ROUNDS);
	ipk_workers_destroy(ws);
	if (n)
		ipk_node_destroy(n);
}

static void test_udp_echo_unified(void) { run_model(IPK_MODEL_UNIFIED, "u"); }
static void test_udp_echo_merge(void) { run_model(IPK_MODEL_MERGE, "m"); }
static void test_udp_echo_split(void) { run_model(IPK_MODEL_SPLIT, "s"); }

/* ------------------------------------------- datagrams in several buffers
 *
 * A datagram larger than one frame arrives in IPv4 fragments; the core reassembles
 * it into a chain of buffers and the workers must hand the app the whole chain
 * (runtime.h, udp). The client here is a raw memlink endpoint that cuts each
 * datagram into fragments itself (the core fragments nothing it sends) and answers
 * ARP; the workers run with mtu=9000 and 16 KiB buffers so that the echo app
 * (gathering the chain, as examples/echo_workers.c does) can send each echo back in
 * one frame, which the client checks byte for byte.
 */
#define BIG_MTU 9000
#define FRAG_MAX 1480 /* IP payload per fragment: 1500-byte frames, a multiple of 8 */

static const uint8_t raw_mac[6] = {0x02, 0, 0, 0, 0, 0x02};
static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
static const uint8_t ip_cli[4] = {10, 9, 0, 2}, ip_srv[4] = {10, 9, 0, 1};

struct raw {
	struct ipk_pool *pool;
	struct ipk_io *io;
	uint8_t peer_mac[6];
	int have_peer;
	uint16_t ip_id;
	uint8_t got[BIG_MTU];
	uint32_t got_len;
	uint16_t got_dport;
	int got_any;
};

static void wr16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint32_t rd16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }

/* RFC 1071 sum over n bytes, added to s (not folded, not inverted). */
static uint32_t sum16(uint32_t s, const uint8_t *p, uint32_t n)
{
	uint32_t i;

	for (i = 0; i + 1 < n; i += 2)
		s += rd16(p + i);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	return s;
}

static uint16_t fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static void raw_tx(struct raw *r, const uint8_t *f, uint32_t len)
{
	struct ipk_pkt *k = ipk_pkt_alloc(r->pool);

	CHECK(k != NULL);
	if (!k)
		return;
	memcpy(ipk_pkt_mtod(k), f, len);
	k->len = len;
	if (ipk_io_tx_burst(r->io, &k, 1) != 1)
		ipk_pkt_free(k);
	ipk_io_flush(r->io);
}

static void raw_eth(uint8_t *f, const uint8_t *dst, uint32_t type)
{
	memcpy(f, dst, 6);
	memcpy(f + 6, raw_mac, 6);
	wr16(f + 12, type);
}

/* RFC 826 request (op 1) or reply (op 2) from us. */
static void raw_arp(struct raw *r, uint32_t op, const uint8_t *dst_mac, const uint8_t *tha,
                    const uint8_t *tpa)
{
	uint8_t f[42];

	raw_eth(f, dst_mac, 0x0806);
	wr16(f + 14, 1);
	wr16(f + 16, 0x0800);
	f[18] = 6;
	f[19] = 4;
	wr16(f + 20, op);
	memcpy(f + 22, raw_mac, 6);
	memcpy(f + 28, ip_cli, 4);
	memcpy(f + 32, tha, 6);
	memcpy(f + 38, tpa, 4);
	raw_tx(r, f, sizeof(f));
}

static void raw_input(struct raw *r, const uint8_t *f, uint32_t len)
{
	const uint8_t *ip = f + 14;
	uint32_t ihl;

	if (len >= 42 && rd16(f + 12) == 0x0806) {
		if (rd16(f + 20) == 1 && memcmp(f + 38, ip_cli, 4) == 0)
			raw_arp(r, 2, f + 22, f + 22, f + 28); /* the worker asks for us */
		else if (rd16(f + 20) == 2 && memcmp(f + 28, ip_srv, 4) == 0) {
			memcpy(r->peer_mac, f + 22, 6);
			r->have_peer = 1;
		}
		return;
	}
	if (len < 14 + 20 + 8 || rd16(f + 12) != 0x0800 || ip[9] != 17)
		return;
	ihl = (uint32_t)(ip[0] & 0x0f) * 4u;
	/* the echo must come back whole, in one frame (the worker's MTU is 9000) */
	CHECK_EQ(rd16(ip + 6) & 0x3fff, 0);
	if (len < 14 + ihl + 8 || rd16(ip + ihl) != 7 || rd16(ip + 2) + 14u > len)
		return;
	r->got_len = rd16(ip + ihl + 4) - 8u;
	if (r->got_len > sizeof(r->got) || 14 + ihl + 8 + r->got_len > len)
		return;
	memcpy(r->got, ip + ihl + 8, r->got_len);
	r->got_dport = (uint16_t)rd16(ip + ihl + 2);
	r->got_any = 1;
}

static void raw_poll(struct raw *r)
{
	struct ipk_pkt *pk[32];
	int n = ipk_io_rx_burst(r->io, pk, 32), i;

	for (i = 0; i < n; i++) {
		raw_input(r, ipk_pkt_mtod(pk[i]), pk[i]->len);
		ipk_pkt_free_chain(pk[i]);
	}
}

/* The UDP datagram (header, RFC 768 checksum over the pseudo-header, payload) in
 * RFC 791 fragments of at most FRAG_MAX bytes each. */
static void raw_send_udp(struct raw *r, uint16_t sport, const uint8_t *msg, uint32_t len)
{
	static uint8_t u[8 + BIG_MTU], f[14 + 20 + FRAG_MAX];
	uint32_t total = 8 + len, off, s;

	wr16(u, sport);
	wr16(u + 2, 7);
	wr16(u + 4, total);
	wr16(u + 6, 0);
	memcpy(u + 8, msg, len);
	s = sum16(sum16(0, ip_cli, 4), ip_srv, 4) + 17 + total;
	s = fold(sum16(s, u, total));
	wr16(u + 6, s ? s : 0xffff);
	r->ip_id++;
	for (off = 0; off < total; off += FRAG_MAX) {
		uint32_t n = total - off < FRAG_MAX ? total - off : FRAG_MAX;
		uint8_t *ip = f + 14;

		raw_eth(f, r->peer_mac, 0x0800);
		memset(ip, 0, 20);
		ip[0] = 0x45;
		wr16(ip + 2, 20 + n);
		wr16(ip + 4, r->ip_id);
		wr16(ip + 6, (off + n < total ? 0x2000u : 0) | off / 8);
		ip[8] = 64;
		ip[9] = 17;
		memcpy(ip + 12, ip_cli, 4);
		memcpy(ip + 16, ip_srv, 4);
		wr16(ip + 10, fold(sum16(0, ip, 20)));
		memcpy(ip + 20, u + off, n);
		raw_tx(r, f, 14 + 20 + n);
	}
}

/* One datagram in fragments and its echo; retried, bounded. */
static int raw_exchange(struct raw *r, uint16_t sport, const uint8_t *msg, uint32_t len)
{
	uint64_t deadline = now_ms() + 5000, resend = 0;

	r->got_any = 0;
	while (now_ms() < deadline) {
		if (now_ms() >= resend) {
			if (!r->have_peer)
				raw_arp(r, 1, bcast, bcast, ip_srv);
			else
				raw_send_udp(r, sport, msg, len);
			resend = now_ms() + 300;
		}
		raw_poll(r);
		if (r->got_any && r->got_dport == sport)
			return r->got_len == len && memcmp(r->got, msg, len) == 0;
		usleep(200);
	}
	return 0;
}

static void big_udp(int model, const char *name)
{
	static const uint32_t sizes[] = {1472, 4000, 8000};
	static uint8_t msg[8000];
	char err[256], spec[128];
	struct ipk_pool_cfg pc;
	struct ipk_workers *ws;
	struct raw r;
	unsigned i, k, ok = 0;

	snprintf(spec, sizeof(spec), "memlink:ipkwf%d%s,role=a,mtu=%d", (int)getpid(), name,
	         BIG_MTU);
	ws = start_echo(spec, model, 16384);
	if (!ws)
		return;
	memset(&r, 0, sizeof(r));
	ipk_pool_cfg_default(&pc);
	pc.buf_size = 16384;
	pc.nbufs = 256;
	pc.ndescs = 512;
	r.pool = ipk_pool_create(&pc, err, sizeof(err));
	CHECK(r.pool != NULL);
	snprintf(spec, sizeof(spec), "memlink:ipkwf%d%s,role=b", (int)getpid(), name);
	r.io = r.pool ? ipk_io_open(spec, r.pool, err, sizeof(err)) : NULL;
	if (!r.io)
		fprintf(stderr, "raw client: %s\n", err);
	CHECK(r.io != NULL);
	for (i = 0; r.io && i < 3; i++)
		for (k = 0; k < 3; k++) {
			uint32_t len = sizes[k], j;

			for (j = 0; j < len; j++)
				msg[j] = (uint8_t)(j * 11u + i * 5u + k);
			ok += (unsigned)raw_exchange(&r, (uint16_t)(43000 + i * 3 + k), msg, len);
		}
	CHECK_EQ(ok, 9);
	for (i = 0; r.io && i < 100; i++) { /* the last release reaches the worker */
		raw_poll(&r);
		usleep(1000);
	}
	CHECK(stop_and_check(ws, 0) >= 9);
	ipk_workers_destroy(ws);
	if (r.io)
		ipk_io_close(r.io);
	if (r.pool)
		ipk_pool_destroy(r.pool);
}

static void test_udp_fragmented_unified(void) { big_udp(IPK_MODEL_UNIFIED, "u"); }
static void test_udp_fragmented_merge(void) { big_udp(IPK_MODEL_MERGE, "m"); }
static void test_udp_fragmented_split(void) { big_udp(IPK_MODEL_SPLIT, "s"); }

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
	RUN(test_udp_fragmented_unified);
	RUN(test_udp_fragmented_merge);
	RUN(test_udp_fragmented_split);
	RUN(test_udp_api_errors);
	return check_summary();
}
