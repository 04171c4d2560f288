/*
 * Send memory (issue 14, second round): the send buffer bounds the packets a
 * connection's queue pins, not only its bytes (core/tcp.c sq_overhead), so an
 * application sending tiny zero-copy packets to a peer that never acknowledges
 * cannot pin a buffer per byte.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "internal.h"
#include "wire/wire.h"

#define IRS 7000000u
#define W 65535

static void sndbuf_64k(struct ipk_config *c)
{
	c->tcp_sndbuf = 64u * 1024u; /* 64 KiB / (2048 / 2) = 64 packets */
}

/* ipk_tcp_send of a fresh 1-byte packet; the packet stays ours when refused. */
static int send1(struct th *t, struct ipk_conn *c)
{
	struct sim_pkt *k = sim_pkt_alloc(t->pool);
	int rc;

	if (!k)
		return IPK_ENOBUFS;
	sim_pkt_data(k)[0] = 'x';
	k->len = 1;
	rc = ipk_tcp_send(t->ctx, c, k, t->now);
	if (rc < 0)
		sim_pkt_free(k);
	return rc;
}

static void test_tiny_zero_copy_sends_bounded_by_buffers(void)
{
	struct th *t = th_new(sndbuf_64k);
	struct ipk_tcp_opts o = th_mss_opt(1460);
	struct ipk_conn *c;
	uint32_t iss = th_accept(t, IRS, &o, W, &c), ok = 0, i;
	uint64_t full0 = t->ctx->cnt.tcp_sndbuf_full;
	int rc = 0;

	th_clear(t);
	/* The peer never ACKs: 400 one-byte sends; bytes alone would take them all. */
	for (i = 0; i < 400; i++) {
		rc = send1(t, c);
		if (rc < 0)
			break;
		ok++;
	}
	CHECK_EQ(ok, 64);
	CHECK_EQ(rc, IPK_EAGAIN);
	CHECK_EQ(c->sq_bytes, 64);
	CHECK_EQ(ipk_tcp_sndbuf_free(c), 0);
	CHECK_EQ(ipk_tcp_write(t->ctx, c, "y", 1, t->now), 0);
	CHECK(t->ctx->cnt.tcp_sndbuf_full > full0);
	/* The ACK frees the packets; the acked event says so and room is back. */
	th_clear(t);
	th_seg(t, IPK_TCP_ACK, IRS + 1, iss + 1 + ok, W, NULL, 0);
	CHECK_EQ(t->acked, ok);
	CHECK_EQ(c->sndbuf, 64u * 1024u);
	CHECK_EQ(ipk_tcp_sndbuf_free(c), 64u * 1024u);
	CHECK_EQ(send1(t, c), 1);
	ipk_tcp_abort(t->ctx, c, t->now);
	CHECK(th_no_leaks(t));
	th_free(t);
}

/* ipk_tcp_write's own packets are never the limit: a full tcp_sndbuf of bytes. */
static void test_write_keeps_full_sndbuf_of_bytes(void)
{
	struct th *t = th_new(sndbuf_64k);
	struct ipk_tcp_opts o = th_mss_opt(1460);
	struct ipk_conn *c;
	static uint8_t buf[128u * 1024u];
	int n;

	(void)th_accept(t, IRS, &o, 0, &c); /* zero window: nothing leaves */
	n = ipk_tcp_write(t->ctx, c, buf, sizeof(buf), t->now);
	CHECK_EQ(n, 64 * 1024);
	CHECK_EQ(c->sndbuf, 64u * 1024u);
	ipk_tcp_abort(t->ctx, c, t->now);
	CHECK(th_no_leaks(t));
	th_free(t);
}

/* ------------------------------------------------- the context's send memory */

#define NBAD 7u            /* the harness has 8 connection objects */
#define WMEM (64u * 1024u) /* context limit */
#define GOOD_BYTES (1u << 20)

static void wmem_64k(struct ipk_config *c)
{
	c->wmem_max = WMEM;
}

/* Handshake from peer port sport; returns our ISS. */
static uint32_t open_from(struct th *t, uint16_t sport, uint32_t irs, struct ipk_conn **c)
{
	struct ipk_tcp_opts o = th_mss_opt(1460);
	struct tseg s;

	th_send(t, sport, TH_LOCAL_PORT, IPK_TCP_SYN, irs, 0, W, &o, NULL, 0);
	CHECK(th_next(t, &s));
	th_send(t, sport, TH_LOCAL_PORT, IPK_TCP_ACK, irs + 1, s.h.seq + 1, W, NULL, NULL, 0);
	*c = t->conn;
	th_clear(t);
	return s.h.seq;
}

static uint8_t pattern(uint32_t i)
{
	return (uint8_t)(i * 2654435761u >> 24);
}

/* One round for the good connection: write what it takes, check what went out
 * byte by byte, ACK it. Returns the bytes acknowledged so far. */
static uint32_t good_round(struct th *t, struct ipk_conn *g, uint16_t port, uint32_t iss,
                           const uint8_t *src, uint32_t *sent, uint32_t rcv)
{
	struct tseg s;
	int n = ipk_tcp_write(t->ctx, g, src + *sent, GOOD_BYTES - *sent, t->now);

	if (n < 0 && *sent < GOOD_BYTES) { /* once: the loop then ends */
		CHECK(n >= 0);
		*sent = GOOD_BYTES;
	}
	*sent += (uint32_t)(n > 0 ? n : 0);
	while (th_next(t, &s)) {
		if (ipk_ntohs(s.h.dport_be) != port || s.len == 0 || s.h.seq != iss + 1 + rcv)
			continue;
		CHECK(rcv + s.len <= GOOD_BYTES && memcmp(s.payload, src + rcv, s.len) == 0);
		rcv += s.len;
	}
	th_send(t, port, TH_LOCAL_PORT, IPK_TCP_ACK, IRS + 1, iss + 1 + rcv, W, NULL, NULL, 0);
	return rcv;
}

/* Seven peers never ACK while their applications write all they can; the eighth
 * connection still moves 1 MiB, checked byte by byte, and the seven hold no more
 * than the context limit plus each one's guaranteed 4 buffers. */
static void test_unacking_peers_bounded_and_cannot_starve_others(void)
{
	struct th *t = th_new(wmem_64k);
	static uint8_t big[256u * 1024u], src[GOOD_BYTES];
	struct ipk_conn *bad[NBAD], *g;
	uint32_t i, iss, sent = 0, rcv = 0, rounds, held = 0;

	for (i = 0; i < GOOD_BYTES; i++)
		src[i] = pattern(i);
	ipk_tcp_listen(t->ctx, ipk_htons(TH_LOCAL_PORT), 8);
	for (i = 0; i < NBAD; i++) {
		(void)open_from(t, (uint16_t)(6000 + i), IRS, &bad[i]);
		for (rounds = 0; rounds < 4; rounds++)
			CHECK(ipk_tcp_write(t->ctx, bad[i], big, sizeof(big), t->now) >= 0);
		th_clear(t);
		held += bad[i]->sq_bytes;
	}
	CHECK(held <= WMEM + NBAD * 4u * 2048u);
	CHECK(t->ctx->cnt.tcp_wmem_limited > 0);
	CHECK_EQ(t->ctx->wmem, held);
	iss = open_from(t, 7000, IRS, &g);
	for (rounds = 0; rounds < 4000 && rcv < GOOD_BYTES; rounds++)
		rcv = good_round(t, g, 7000, iss, src, &sent, rcv);
	CHECK_EQ(rcv, GOOD_BYTES);
	for (i = 0; i < NBAD; i++)
		ipk_tcp_abort(t->ctx, bad[i], t->now);
	ipk_tcp_abort(t->ctx, g, t->now);
	CHECK_EQ(t->ctx->wmem, 0);
	CHECK(th_no_leaks(t));
	th_free(t);
}

/* ------------------------------------- receive memory of packets beyond a buffer */

static void buf_1024(struct ipk_config *c)
{
	c->pkt_buf_size = 1024; /* the harness's buffers hold 2048: "large" packets */
	c->caps |= IPK_CAP_SG | IPK_CAP_LRO; /* an MTU beyond one buffer */
}

/* A held packet longer than pkt_buf_size (an LRO chain from the runtime's 128 KiB
 * buffers) counts by its bytes in the receive budget, not as one small buffer. */
static void test_ooo_packet_beyond_buffer_counts_by_bytes(void)
{
	struct th *t = th_new(buf_1024);
	struct ipk_tcp_opts o = th_mss_opt(1460);
	struct ipk_conn *c;
	static const uint8_t d[1400];
	uint32_t iss = th_accept(t, IRS, &o, W, &c);

	th_seg(t, IPK_TCP_ACK, IRS + 1 + 5000, iss + 1, W, d, sizeof(d)); /* out of order */
	CHECK(c->x != NULL);
	CHECK_EQ(t->ctx->rmem_pkts, 2); /* a 1454-byte frame: two 1024-byte units */
	ipk_tcp_abort(t->ctx, c, t->now);
	CHECK_EQ(t->ctx->rmem_pkts, 0);
	CHECK(th_no_leaks(t));
	th_free(t);
}

/* ------------------------------------------- control packets under the reserve */

static void *(*data_alloc)(void *opaque);
static uint32_t data_refused;

/* An integrator at its reserve: data allocations fail, control ones do not. */
static void *alloc_at_reserve(void *opaque)
{
	(void)opaque;
	data_refused++;
	return NULL;
}

static void test_at_reserve_still_acks_and_resets(void)
{
	struct th *t = th_new(NULL);
	struct ipk_tcp_opts o = th_mss_opt(1460);
	struct ipk_conn *c;
	uint32_t iss = th_accept(t, IRS, &o, W, &c);
	static const uint8_t d[100];
	struct tseg s;

	th_clear(t);
	data_alloc = t->ops.pkt_alloc;
	t->ops.pkt_alloc_ctl = data_alloc;
	t->ops.pkt_alloc = alloc_at_reserve;
	/* data stops at the reserve */
	CHECK_EQ(ipk_tcp_write(t->ctx, c, "x", 1, t->now), IPK_ENOBUFS);
	CHECK(data_refused > 0);
	/* out of order: the duplicate ACK (RFC 9293 §3.10.7.4, RFC 5681 §4.2) leaves */
	th_seg(t, IPK_TCP_ACK, IRS + 1 + 1000, iss + 1, W, d, sizeof(d));
	CHECK(th_expect(t, &s, IPK_TCP_ACK, iss + 1, IRS + 1));
	CHECK_EQ(s.len, 0);
	/* a segment for no connection: the RST (RFC 9293 §3.10.7.1) leaves */
	th_send(t, TH_PEER_PORT + 1, TH_LOCAL_PORT + 1, IPK_TCP_ACK, 1234, 5678, W, NULL, d,
	        sizeof(d));
	CHECK(th_expect(t, &s, IPK_TCP_RST, 5678, 0));
	/* an in-window RST from the peer frees the connection's memory */
	th_seg(t, IPK_TCP_RST, IRS + 1, 0, 0, NULL, 0);
	CHECK_EQ(t->closed, 1);
	t->ops.pkt_alloc = data_alloc;
	t->ops.pkt_alloc_ctl = NULL;
	CHECK(th_no_leaks(t));
	th_free(t);
}

/* ------------------------------------------------- send-buffer autotuning */

#define AT_BUF (32u * 1024u)
#define AT_MAX (192u * 1024u)
#define AT_TOTAL (4u << 20)
#define MS 1000000ull

static uint32_t at_max, at_wmem;

static void autotune(struct ipk_config *c)
{
	c->tcp_sndbuf = AT_BUF;
	c->tcp_sndbuf_max = at_max;
	c->wmem_max = at_wmem;
}

struct at_seen {
	uint32_t buf_max;  /* largest c->sndbuf */
	uint32_t free_max; /* largest ipk_tcp_sndbuf_free: what the application saw */
};

/* b connects to a and writes AT_TOTAL bytes as fast as its buffer takes them, a
 * reading at once (a 256 KiB window, no loss); returns b's connection, still open. */
static struct ipk_conn *at_transfer(struct th *a, struct th *b, struct at_seen *seen)
{
	static uint8_t src[64u * 1024u];
	struct ipk_conn *c = NULL;
	uint32_t sent = 0;
	int iter;

	a->auto_recved = 1;
	CHECK_EQ(ipk_tcp_listen(a->ctx, ipk_htons(80), 8), IPK_OK);
	CHECK_EQ(ipk_tcp_connect(b->ctx, a->ip_be, ipk_htons(80), 0, NULL, &c, 0), IPK_OK);
	th_pump(a, b);
	CHECK_EQ(b->connected, 1);
	for (iter = 0; iter < 20000 && a->rxlen < AT_TOTAL; iter++) {
		int rc = 1, k;

		seen->free_max = IPK_MAX(seen->free_max, ipk_tcp_sndbuf_free(c));
		for (k = 0; k < 64 && rc > 0 && sent < AT_TOTAL; k++) { /* until full */
			rc = ipk_tcp_write(b->ctx, c, src,
			                   IPK_MIN((uint32_t)sizeof(src), AT_TOTAL - sent), b->now);
			sent += rc > 0 ? (uint32_t)rc : 0u;
		}
		seen->buf_max = IPK_MAX(seen->buf_max, c->sndbuf);
		th_pump(a, b);
		a->now += MS;
		b->now = a->now;
		ipk_run(a->ctx, NULL, 0, a->now);
		ipk_run(b->ctx, NULL, 0, b->now);
	}
	CHECK_EQ(a->rxlen, AT_TOTAL);
	return c;
}

/* Linux's tcp_sndbuf_expand: while the application keeps the buffer full the buffer
 * follows 2 * cwnd, and what ipk_tcp_sndbuf_free offers grows with it, up to
 * tcp_sndbuf_max and never past it. */
static void test_sndbuf_grows_with_cwnd_and_stops_at_max(void)
{
	struct th *a, *b;
	struct at_seen seen = {0, 0};
	struct ipk_conn *c;

	at_max = AT_MAX;
	at_wmem = 16u << 20;
	th_pair(&a, &b, autotune);
	c = at_transfer(a, b, &seen);
	CHECK_EQ(seen.buf_max, AT_MAX);
	CHECK(seen.free_max > AT_BUF);
	CHECK(b->ctx->cnt.tcp_sndbuf_grow > 0);
	CHECK(b->ctx->cnt.tcp_sndbuf_grow < 100); /* grows in steps, not per segment */
	CHECK(c->cwnd * 2u >= AT_MAX);
	ipk_tcp_abort(b->ctx, c, b->now);
	th_pump(a, b);
	CHECK(th_no_leaks(a) && th_no_leaks(b));
	th_free(a);
	th_free(b);
}

/* tcp_sndbuf_max at or below tcp_sndbuf fixes the buffer (Linux: SO_SNDBUF locks
 * it); a cap just above it is reached exactly. */
static void test_sndbuf_fixed_when_max_not_above(void)
{
	static const uint32_t maxes[3] = {0u, AT_BUF, 48u * 1024u};
	int i;

	for (i = 0; i < 3; i++) {
		struct th *a, *b;
		struct at_seen seen = {0, 0};
		struct ipk_conn *c;

		at_max = maxes[i];
		at_wmem = 16u << 20;
		th_pair(&a, &b, autotune);
		c = at_transfer(a, b, &seen);
		CHECK_EQ(seen.buf_max, i < 2 ? AT_BUF : maxes[i]);
		CHECK_EQ(b->ctx->cnt.tcp_sndbuf_grow > 0, i == 2);
		ipk_tcp_abort(b->ctx, c, b->now);
		th_pump(a, b);
		CHECK(th_no_leaks(a) && th_no_leaks(b));
		th_free(a);
		th_free(b);
	}
}

/* The context's send memory bounds the growth (half of wmem_max per connection) and
 * still refuses: a grown buffer with room left gets no more than the context allows. */
static void test_sndbuf_growth_bounded_by_wmem_which_still_refuses(void)
{
	static uint8_t more[64u * 1024u];
	struct th *a, *b;
	struct at_seen seen = {0, 0};
	struct ipk_conn *c;
	uint64_t lim0, limited0;
	int n;

	at_max = 4u << 20;
	at_wmem = 160u * 1024u;
	th_pair(&a, &b, autotune);
	c = at_transfer(a, b, &seen);
	CHECK(seen.buf_max > AT_BUF);
	CHECK(seen.buf_max <= at_wmem / 2u);
	/* The grown buffer has room for 64 KiB; the context's limit, lowered under the
	 * 4-buffer guarantee, lets only that guarantee in. */
	lim0 = b->ctx->wmem_lim;
	b->ctx->wmem_lim = 4096u;
	limited0 = b->ctx->cnt.tcp_wmem_limited;
	CHECK(ipk_tcp_sndbuf_free(c) >= sizeof(more));
	n = ipk_tcp_write(b->ctx, c, more, sizeof(more), b->now);
	CHECK_EQ(n, 4 * 2048);
	CHECK(b->ctx->cnt.tcp_wmem_limited > limited0);
	b->ctx->wmem_lim = lim0;
	ipk_tcp_abort(b->ctx, c, b->now);
	th_pump(a, b);
	CHECK(th_no_leaks(a) && th_no_leaks(b));
	th_free(a);
	th_free(b);
}

/* tcp_sndbuf_max bounds a buffer whose size ipk_tcp_write returns as an int. */
static void test_sndbuf_max_above_int32_refused(void)
{
	struct ipk_config cfg;
	const char *why = NULL;

	ipk_config_default(&cfg);
	CHECK_EQ(cfg.tcp_sndbuf_max, 0); /* off by default */
	cfg.tcp_sndbuf_max = 0x80000000u;
	CHECK(ipk_config_check(&cfg, NULL, &why) < 0);
	CHECK(why && strstr(why, "tcp_sndbuf_max") != NULL);
	CHECK_EQ(ipk_ctx_size(&cfg), 0);
	cfg.tcp_sndbuf_max = 0x7fffffffu;
	CHECK(ipk_ctx_size(&cfg) > 0);
}

int main(void)
{
	RUN(test_tiny_zero_copy_sends_bounded_by_buffers);
	RUN(test_write_keeps_full_sndbuf_of_bytes);
	RUN(test_unacking_peers_bounded_and_cannot_starve_others);
	RUN(test_ooo_packet_beyond_buffer_counts_by_bytes);
	RUN(test_at_reserve_still_acks_and_resets);
	RUN(test_sndbuf_grows_with_cwnd_and_stops_at_max);
	RUN(test_sndbuf_fixed_when_max_not_above);
	RUN(test_sndbuf_growth_bounded_by_wmem_which_still_refuses);
	RUN(test_sndbuf_max_above_int32_refused);
	return check_summary();
}
