/*
 * Segments a hostile or broken peer sends to wedge or flood a connection (issue 14
 * items 7 and 8), scripted segment by segment: duplicate SYNs in SYN-RECEIVED and
 * segments without the timestamp a connection negotiated (RFC 7323 §3.2).
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "wire/wire.h"

#define IRS 9000000u
#define A IPK_TCP_ACK
#define W 65535
#define MS 1000000ull
#define TSV 50000u

static const struct ipk_counters *cnt(const struct th *t) { return ipk_counters(t->ctx); }

static int synacks(struct th *t, uint32_t iss)
{
	struct tseg s;
	int n = 0;

	while (th_next(t, &s))
		if (s.h.flags == (IPK_TCP_SYN | IPK_TCP_ACK) && s.h.seq == iss && s.h.ack == IRS + 1)
			n++;
	return n;
}

/* 30 copies of the SYN within a millisecond: one SYN-ACK for the first SYN, one more
 * for the duplicates (as Linux: tcp_check_req rate-limits by tcp_invalid_ratelimit),
 * and one per tcp_invalid_ratelimit_ns after that. */
static void test_syn_received_duplicate_syns_rate_limited(void)
{
	struct th *t = th_new(NULL);
	struct tseg s;
	uint32_t iss;
	int i;

	ipk_tcp_listen(t->ctx, ipk_htons(TH_LOCAL_PORT), 8);
	th_seg(t, IPK_TCP_SYN, IRS, 0, W, NULL, 0);
	CHECK(th_next(t, &s));
	iss = s.h.seq;
	for (i = 0; i < 29; i++) {
		t->now += 30000; /* 29 x 30 us: all within one millisecond */
		th_seg(t, IPK_TCP_SYN, IRS, 0, W, NULL, 0);
	}
	CHECK_EQ(synacks(t, iss), 1);
	CHECK_EQ(cnt(t)->tcp_synack_dup_limited, 28);
	/* after the limit's 500 ms the next duplicate is answered again */
	th_advance(t, 600 * MS);
	th_clear(t); /* the SYN-ACK timer's own retransmission, if due */
	th_seg(t, IPK_TCP_SYN, IRS, 0, W, NULL, 0);
	CHECK_EQ(synacks(t, iss), 1);
	/* the handshake still completes */
	th_seg(t, A, IRS + 1, iss + 1, W, NULL, 0);
	CHECK_EQ(t->accepted, 1);
	CHECK_EQ(ipk_tcp_state(t->conn), IPK_TCP_ESTABLISHED);
	ipk_tcp_abort(t->ctx, t->conn, t->now);
	CHECK(th_no_leaks(t));
	th_free(t);
}

/* ts_seg: a segment from the peer with a timestamp option. */
static void ts_seg(struct th *t, uint8_t flags, uint32_t seq, uint32_t ack, uint32_t tsval,
                   uint32_t tsecr, const void *data, uint32_t len)
{
	struct ipk_tcp_opts o = th_ts_opt(tsval, tsecr);

	th_send(t, TH_PEER_PORT, TH_LOCAL_PORT, flags, seq, ack, W, &o, data, len);
}

/* RFC 7323 §3.2: data, a pure ACK and a FIN without TSopt are dropped silently and
 * counted; the connection goes on (MUST NOT abort), and a RST without one still
 * counts (RSTs are exempt). */
static void test_established_segment_without_timestamp_dropped_silently(void)
{
	struct th *t = th_new(NULL);
	struct ipk_tcp_opts o = th_ts_opt(TSV, 0);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, &o, W, &c);

	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_ESTABLISHED);
	th_clear(t);
	th_seg(t, A | IPK_TCP_PSH, IRS + 1, iss + 1, W, "evil", 4);
	th_seg(t, A, IRS + 1, iss + 1, W, NULL, 0);
	th_seg(t, A | IPK_TCP_FIN, IRS + 1, iss + 1, W, NULL, 0);
	CHECK_EQ(th_pending(t), 0);
	CHECK_EQ(t->rxlen, 0);
	CHECK_EQ(t->fins, 0);
	CHECK_EQ(cnt(t)->drop[IPK_DROP_TCP_NO_TS], 3);
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_ESTABLISHED);
	/* the real peer's data, with its timestamp, is taken and ACKed */
	ts_seg(t, A | IPK_TCP_PSH, IRS + 1, iss + 1, TSV + 1, 0, "good", 4);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 5));
	CHECK(s.o.has_ts && s.o.tsecr == TSV + 1);
	CHECK_EQ(t->rxlen, 4);
	CHECK(memcmp(t->rx, "good", 4) == 0);
	/* a RST at rcv_nxt without a timestamp still resets (RFC 7323 §3.2 exempts it) */
	th_seg(t, IPK_TCP_RST, IRS + 5, 0, W, NULL, 0);
	CHECK_EQ(t->closed, 1);
	CHECK_EQ(t->why, IPK_CLOSE_RESET);
	CHECK(th_no_leaks(t));
	th_free(t);
}

/* The handshake's ACK must carry the timestamp too: without it the connection stays
 * in SYN-RECEIVED (FreeBSD's syncache does the same). */
static void test_syn_received_ack_without_timestamp_dropped(void)
{
	struct th *t = th_new(NULL);
	struct ipk_tcp_opts o = th_ts_opt(TSV, 0);
	struct tseg s;
	uint32_t iss;

	ipk_tcp_listen(t->ctx, ipk_htons(TH_LOCAL_PORT), 8);
	th_send(t, TH_PEER_PORT, TH_LOCAL_PORT, IPK_TCP_SYN, IRS, 0, W, &o, NULL, 0);
	CHECK(th_next(t, &s));
	CHECK(s.o.has_ts);
	iss = s.h.seq;
	th_seg(t, A, IRS + 1, iss + 1, W, NULL, 0);
	CHECK_EQ(t->accepted, 0);
	CHECK_EQ(cnt(t)->drop[IPK_DROP_TCP_NO_TS], 1);
	ts_seg(t, A, IRS + 1, iss + 1, TSV + 1, s.o.tsval, NULL, 0);
	CHECK_EQ(t->accepted, 1);
	ipk_tcp_abort(t->ctx, t->conn, t->now);
	CHECK(th_no_leaks(t));
	th_free(t);
}

/* Without timestamps negotiated nothing changes: segments without TSopt are normal. */
static void test_established_no_timestamps_negotiated_segments_taken(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	th_seg(t, A | IPK_TCP_PSH, IRS + 1, iss + 1, W, "data", 4);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 5));
	CHECK_EQ(t->rxlen, 4);
	CHECK_EQ(cnt(t)->drop[IPK_DROP_TCP_NO_TS], 0);
	ipk_tcp_abort(t->ctx, c, t->now);
	th_free(t);
}

static int rsts(struct th *t)
{
	struct tseg s;
	int n = 0;

	while (th_next(t, &s))
		if (s.h.flags & IPK_TCP_RST)
			n++;
	return n;
}

static void rst_limit10(struct ipk_config *c) { c->tcp_rst_limit = 10; }

/* A scan or spoofed flood to a closed port: RSTs (RFC 9293 §3.10.7.1) up to
 * tcp_rst_limit a second, the rest counted; the next second answers again. */
static void test_closed_port_rsts_limited_per_second(void)
{
	struct th *t = th_new(rst_limit10), *d = th_new(NULL);
	int i;

	for (i = 0; i < 50; i++) {
		th_send(t, (uint16_t)(TH_PEER_PORT + i), 81, IPK_TCP_SYN, IRS, 0, W, NULL, NULL, 0);
		th_send(d, (uint16_t)(TH_PEER_PORT + i), 81, IPK_TCP_SYN, IRS, 0, W, NULL, NULL, 0);
	}
	CHECK_EQ(rsts(t), 10);
	CHECK_EQ(cnt(t)->tcp_rst_limited, 40);
	CHECK_EQ(cnt(t)->drop[IPK_DROP_TCP_NO_CONN], 50);
	CHECK_EQ(rsts(d), 50); /* the default (1000/s) lets these through */
	CHECK_EQ(cnt(d)->tcp_rst_limited, 0);
	th_advance(t, 1000 * MS);
	th_seg(t, A, IRS, 77, W, NULL, 0);
	CHECK_EQ(rsts(t), 1);
	CHECK(th_no_leaks(t));
	th_free(t);
	th_free(d);
}

int main(void)
{
	RUN(test_syn_received_duplicate_syns_rate_limited);
	RUN(test_established_segment_without_timestamp_dropped_silently);
	RUN(test_syn_received_ack_without_timestamp_dropped);
	RUN(test_established_no_timestamps_negotiated_segments_taken);
	RUN(test_closed_port_rsts_limited_per_second);
	return check_summary();
}
