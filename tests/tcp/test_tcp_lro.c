/*
 * Received TCP chains (IPK_CAP_LRO): a coalescing NIC may hand the core one large
 * segment as a chain of packets. The core keeps the chain in its receive and
 * out-of-order queues and delivers it to tcp_payload one flat packet at a time,
 * verifying the checksum over the chain. Nothing about a chain is trusted: its
 * length against the IPv4 total length, headers split across packets, chains
 * without LRO declared or for other protocols are dropped and counted.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "wire/wire.h"

#define IRS 5000000u
#define A IPK_TCP_ACK
#define W 65535
#define HDRS (14u + 20u + 20u) /* Ethernet + IPv4 + TCP without options */

static uint8_t data[8000];

static void finish(struct th *t)
{
	CHECK(th_no_leaks(t));
	th_free(t);
}

static void lro(struct ipk_config *c) { c->caps = IPK_CAP_LRO; }

static uint64_t drops(const struct th *t, enum ipk_drop why)
{
	return ipk_counters(t->ctx)->drop[why];
}

static void fill_data(void)
{
	uint32_t i, x = 12345u;

	for (i = 0; i < sizeof(data); i++) {
		x = x * 1103515245u + 12345u;
		data[i] = (uint8_t)(x >> 23);
	}
}

/* A whole frame from the scripted peer into f: headers, `len` payload bytes of
 * data[from..], correct checksums (th_frame); proto UDP rewrites the IPv4 protocol
 * (the bytes after the IPv4 header do not matter there). Returns its length. */
static uint32_t frame(const struct th *t, uint8_t *f, uint8_t proto, uint32_t seq, uint32_t ack,
                      uint32_t from, uint32_t len)
{
	uint32_t n = th_frame(t, f, TH_PEER_PORT, TH_LOCAL_PORT, A, seq, ack, W, NULL, data + from,
	                      len);
	int odd = 0;

	if (proto != IPK_IPPROTO_TCP) {
		f[14 + 9] = proto;
		ipk_wr16(f + 14 + 10, 0);
		ipk_wr16(f + 14 + 10, ipk_csum_fold(ipk_csum_add(0, f + 14, 20, &odd)));
	}
	return n;
}

/* Cut f into a chain at the given offsets (ascending, 0-terminated) and run it. */
static void inject_chain(struct th *t, const uint8_t *f, uint32_t len, const uint32_t *cuts)
{
	struct sim_pkt *head = NULL, **at = &head;
	uint32_t from = 0, i;
	void *one;

	for (i = 0; from < len; i++) {
		uint32_t to = cuts[i] && cuts[i] < len ? cuts[i] : len;

		*at = sim_pkt_from(t->pool, f + from, to - from);
		at = &(*at)->next;
		from = to;
	}
	one = head;
	ipk_run(t->ctx, &one, 1, t->now);
}

/* Headers alone, then 2000 payload bytes a packet (the pool's buffers hold 2048). */
static const uint32_t three[] = {HDRS, HDRS + 2000, HDRS + 4000, 0};

static void test_lro_chain_delivered_piece_by_piece(void)
{
	struct th *t = th_new(lro);
	struct ipk_conn *c;
	static uint8_t f[HDRS + 6000];
	uint32_t iss = th_accept(t, IRS, NULL, W, &c), n;
	uint64_t segs = ipk_counters(t->ctx)->tcp_rx_segs;
	struct tseg s;

	n = frame(t, f, IPK_IPPROTO_TCP, IRS + 1, iss + 1, 0, 6000);
	inject_chain(t, f, n, three);
	/* one call per packet holding payload, each flat (the harness copies only flat
	 * packets, so a chain handed over whole would leave rx short) */
	CHECK_EQ(t->payload_calls, 3);
	CHECK_EQ(t->rxlen, 6000);
	CHECK(memcmp(t->rx, data, 6000) == 0);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_rx_segs, segs + 1); /* one segment */
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1 + 6000)); /* 4 segments' worth: ACK now */
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_lro_chain_bad_checksum_dropped(void)
{
	struct th *t = th_new(lro);
	struct ipk_conn *c;
	static uint8_t f[HDRS + 6000];
	uint32_t iss = th_accept(t, IRS, NULL, W, &c), n;

	n = frame(t, f, IPK_IPPROTO_TCP, IRS + 1, iss + 1, 0, 6000);
	f[n - 1] ^= 1; /* a byte in the last packet: only a sum over the chain sees it */
	inject_chain(t, f, n, three);
	CHECK_EQ(drops(t, IPK_DROP_TCP_CSUM), 1);
	CHECK_EQ(t->rxlen, 0);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_chain_without_lro_dropped(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	static uint8_t f[HDRS + 6000];
	uint32_t iss = th_accept(t, IRS, NULL, W, &c), n;

	n = frame(t, f, IPK_IPPROTO_TCP, IRS + 1, iss + 1, 0, 6000);
	inject_chain(t, f, n, three);
	CHECK_EQ(drops(t, IPK_DROP_CHAIN), 1);
	CHECK_EQ(t->rxlen, 0);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

/* IPv4 total length against the chain: longer (truncated chain) and shorter. */
static void test_lro_chain_length_mismatch_dropped(void)
{
	struct th *t = th_new(lro);
	struct ipk_conn *c;
	static uint8_t f[HDRS + 6000];
	uint32_t iss = th_accept(t, IRS, NULL, W, &c), n;

	n = frame(t, f, IPK_IPPROTO_TCP, IRS + 1, iss + 1, 0, 6000);
	inject_chain(t, f, n - 100, three); /* chain ends 100 bytes early */
	CHECK_EQ(drops(t, IPK_DROP_IP4_MALFORMED), 1);
	n = frame(t, f, IPK_IPPROTO_TCP, IRS + 1, iss + 1, 0, 5000);
	inject_chain(t, f, n + 1000, three); /* 1000 bytes more than tot_len */
	CHECK_EQ(drops(t, IPK_DROP_IP4_MALFORMED), 2);
	CHECK_EQ(t->rxlen, 0);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_lro_chain_split_ip_header_dropped(void)
{
	struct th *t = th_new(lro);
	struct ipk_conn *c;
	static uint8_t f[HDRS + 6000];
	static const uint32_t cut_ip[] = {14 + 10, HDRS + 2000, HDRS + 4000, 0};
	uint32_t iss = th_accept(t, IRS, NULL, W, &c), n;

	n = frame(t, f, IPK_IPPROTO_TCP, IRS + 1, iss + 1, 0, 6000);
	inject_chain(t, f, n, cut_ip);
	CHECK_EQ(drops(t, IPK_DROP_IP4_MALFORMED), 1);
	CHECK_EQ(t->rxlen, 0);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

/* A TCP header split over two packets: copied into one when the segment fits a
 * packet (then delivered), dropped when it does not. */
static void test_lro_chain_split_tcp_header(void)
{
	struct th *t = th_new(lro);
	struct ipk_conn *c;
	static uint8_t f[HDRS + 6000];
	static const uint32_t cut_tcp[] = {34 + 8, 0};
	static const uint32_t cut_tcp_big[] = {34 + 8, 2042, 4042, 0};
	uint32_t iss = th_accept(t, IRS, NULL, W, &c), n;

	n = frame(t, f, IPK_IPPROTO_TCP, IRS + 1, iss + 1, 0, 1000);
	inject_chain(t, f, n, cut_tcp);
	CHECK_EQ(t->rxlen, 1000);
	CHECK(memcmp(t->rx, data, 1000) == 0);
	n = frame(t, f, IPK_IPPROTO_TCP, IRS + 1001, iss + 1, 1000, 6000);
	inject_chain(t, f, n, cut_tcp_big);
	CHECK_EQ(drops(t, IPK_DROP_CHAIN), 1);
	CHECK_EQ(t->rxlen, 1000);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_lro_chain_other_protocol_dropped(void)
{
	struct th *t = th_new(lro);
	static uint8_t f[HDRS + 6000];
	uint32_t n = frame(t, f, IPK_IPPROTO_UDP, 1, 1, 0, 6000);

	inject_chain(t, f, n, three);
	CHECK_EQ(drops(t, IPK_DROP_CHAIN), 1);
	finish(t);
}

/* A chain that arrives ahead of a hole waits in the out-of-order queue as a chain
 * and is delivered piece by piece once the hole fills; a duplicate chain is freed. */
static void test_lro_chain_out_of_order_then_filled(void)
{
	struct th *t = th_new(lro);
	struct ipk_conn *c;
	static uint8_t f[HDRS + 6000];
	uint32_t iss = th_accept(t, IRS, NULL, W, &c), n;

	n = frame(t, f, IPK_IPPROTO_TCP, IRS + 1 + 1000, iss + 1, 1000, 6000);
	inject_chain(t, f, n, three);
	CHECK_EQ(t->rxlen, 0);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_ooo_segs, 1);
	inject_chain(t, f, n, three); /* the same again: a duplicate of what is held */
	CHECK_EQ(ipk_counters(t->ctx)->tcp_dup_segs, 1);
	th_seg(t, A, IRS + 1, iss + 1, W, data, 1000);
	CHECK_EQ(t->rxlen, 7000);
	CHECK(memcmp(t->rx, data, 7000) == 0);
	CHECK_EQ(t->payload_calls, 4);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

/* Part of the chain already received: delivery starts inside its second packet. */
static void test_lro_chain_partial_overlap_skips_delivered(void)
{
	struct th *t = th_new(lro);
	struct ipk_conn *c;
	static uint8_t f[HDRS + 6000];
	uint32_t iss = th_accept(t, IRS, NULL, W, &c), n;

	th_seg(t, A, IRS + 1, iss + 1, W, data, 1500);
	th_seg(t, A, IRS + 1501, iss + 1, W, data + 1500, 1500);
	n = frame(t, f, IPK_IPPROTO_TCP, IRS + 1, iss + 1, 0, 6000);
	inject_chain(t, f, n, three);
	CHECK_EQ(t->rxlen, 6000);
	CHECK(memcmp(t->rx, data, 6000) == 0);
	CHECK_EQ(t->payload_calls, 4); /* 1500, 1500, then 1000 of the 2nd packet, 2000 */
	CHECK_EQ(t->last_len, 2000);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void lro_no_quickack(struct ipk_config *c)
{
	c->caps = IPK_CAP_LRO;
	c->tcp_quickack = 0;
}

/* A coalesced segment of one full and one partial segment is two segments for the
 * ACK policy (every second one is ACKed at once, RFC 5681 §4.2): it was ACKed only
 * by the delayed-ACK timer, and the sender's tail-loss probe fired first. */
static void test_lro_segment_above_mss_acked_at_once(void)
{
	struct th *t = th_new(lro_no_quickack);
	struct ipk_conn *c;
	static uint8_t f[HDRS + 1560];
	static const uint32_t two[] = {HDRS, HDRS + 1000, 0};
	uint32_t iss = th_accept(t, IRS, NULL, W, &c), n;
	struct tseg s;

	n = frame(t, f, IPK_IPPROTO_TCP, IRS + 1, iss + 1, 0, 1560);
	inject_chain(t, f, n, two);
	CHECK_EQ(t->rxlen, 1560);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1 + 1560));
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

int main(void)
{
	fill_data();
	RUN(test_lro_chain_delivered_piece_by_piece);
	RUN(test_lro_chain_bad_checksum_dropped);
	RUN(test_chain_without_lro_dropped);
	RUN(test_lro_chain_length_mismatch_dropped);
	RUN(test_lro_chain_split_ip_header_dropped);
	RUN(test_lro_chain_split_tcp_header);
	RUN(test_lro_chain_other_protocol_dropped);
	RUN(test_lro_chain_out_of_order_then_filled);
	RUN(test_lro_chain_partial_overlap_skips_delivered);
	RUN(test_lro_segment_above_mss_acked_at_once);
	return check_summary();
}
