/*
 * Loss detection and recovery, scripted: timestamps and PAWS (RFC 7323), SACK blocks
 * and D-SACK from the receiver (RFC 2018, RFC 2883), the sender's scoreboard and
 * RFC 6675 hole retransmission, RACK's reordering timer and the tail loss probe
 * (RFC 8985).
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "wire/wire.h"

#define IRS 5000000u
#define A IPK_TCP_ACK
#define W 65535
#define MS 1000000ull
#define MSS 1000u

static uint8_t g_buf[64 * 1024];
static uint32_t g_una; /* our ISS + 1: what a peer segment acknowledges when ack is 0 */

static void finish(struct th *t)
{
	CHECK(th_no_leaks(t));
	th_free(t);
}

static void base_cfg(struct ipk_config *c)
{
	c->tcp_delack_ns = 0;
	c->tcp_wscale = 0;
}

static void no_sack_no_ts(struct ipk_config *c)
{
	base_cfg(c);
	c->tcp_sack = 0;
	c->tcp_timestamps = 0;
}

static void no_rack(struct ipk_config *c)
{
	base_cfg(c);
	c->tcp_rack = 0;
}

static struct ipk_tcp_opts syn_opts(int sack, int ts)
{
	struct ipk_tcp_opts o;

	memset(&o, 0, sizeof(o));
	o.has_mss = 1;
	o.mss = MSS;
	o.has_sack_perm = (uint8_t)sack;
	o.has_ts = (uint8_t)ts;
	o.tsval = 100;
	return o;
}

/* Peer segment with optional TS and SACK blocks (nsack pairs in `sk`). */
static void peer(struct th *t, uint8_t flags, uint32_t seq, uint32_t ack, int ts, uint32_t tsval,
                 uint32_t tsecr, uint32_t (*sk)[2], int nsack, const void *p, uint32_t len)
{
	struct ipk_tcp_opts o;
	int i;

	if (ack == 0)
		ack = g_una;
	memset(&o, 0, sizeof(o));
	o.has_ts = (uint8_t)ts;
	o.tsval = tsval;
	o.tsecr = tsecr;
	for (i = 0; i < nsack; i++) {
		o.sack[i][0] = sk[i][0];
		o.sack[i][1] = sk[i][1];
	}
	o.nsack = (uint8_t)nsack;
	th_send(t, TH_PEER_PORT, TH_LOCAL_PORT, flags, seq, ack, W, &o, p, len);
}

/* Handshake with SACK-permitted and/or TS offered, 8 ms round trip (the first RTT
 * sample); returns our ISS. */
static uint32_t open_conn(struct th *t, int sack, int ts, struct ipk_conn **c, struct tseg *synack)
{
	struct ipk_tcp_opts o = syn_opts(sack, ts);
	uint32_t iss;

	ipk_tcp_listen(t->ctx, ipk_htons(TH_LOCAL_PORT), 8);
	th_send(t, TH_PEER_PORT, TH_LOCAL_PORT, IPK_TCP_SYN, IRS, 0, W, &o, NULL, 0);
	CHECK(th_next(t, synack));
	iss = synack->h.seq;
	g_una = iss + 1;
	th_advance(t, 8 * MS);
	peer(t, A, IRS + 1, iss + 1, ts, 101, synack->o.tsval, NULL, 0, NULL, 0);
	*c = t->conn;
	CHECK(*c != NULL);
	return iss;
}

/* ------------------------------------------------------------ negotiation */

static void test_listen_syn_sack_ts_negotiated(void)
{
	struct th *t = th_new(base_cfg);
	struct ipk_conn *c;
	struct ipk_tcp_info in;
	struct tseg s;

	open_conn(t, 1, 1, &c, &s);
	CHECK(s.o.has_sack_perm);
	CHECK(s.o.has_ts);
	CHECK_EQ(s.o.tsecr, 100); /* RFC 7323 §3.2: the SYN-ACK echoes the SYN's TSval */
	ipk_tcp_info(c, &in);
	CHECK_EQ(in.sack_ok, 1);
	CHECK_EQ(in.ts_ok, 1);
	CHECK_EQ(in.mss, MSS - 12); /* room for the timestamp option in every segment */
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_listen_syn_without_options_gets_neither(void)
{
	struct th *t = th_new(base_cfg);
	struct ipk_conn *c;
	struct ipk_tcp_info in;
	struct tseg s;

	open_conn(t, 0, 0, &c, &s);
	CHECK(!s.o.has_sack_perm);
	CHECK(!s.o.has_ts);
	ipk_tcp_info(c, &in);
	CHECK_EQ(in.sack_ok, 0);
	CHECK_EQ(in.ts_ok, 0);
	CHECK_EQ(in.mss, MSS);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_listen_syn_config_off_refuses_both(void)
{
	struct th *t = th_new(no_sack_no_ts);
	struct ipk_conn *c;
	struct tseg s;

	open_conn(t, 1, 1, &c, &s);
	CHECK(!s.o.has_sack_perm);
	CHECK(!s.o.has_ts);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

/* ------------------------------------------------------ SACK generation */

/* Deliver out-of-order 100-byte pieces at the given offsets from IRS+1; return the
 * last ACK we sent. */
static void ooo_pieces(struct th *t, const uint32_t *offs, int n, int ts, struct tseg *last)
{
	int i;

	for (i = 0; i < n; i++) {
		peer(t, A, IRS + 1 + offs[i], 0, ts, 200, 0, NULL, 0, g_buf, 100);
		while (th_next(t, last))
			;
	}
}

static void test_established_ooo_sack_recent_block_first_then_highest(void)
{
	struct th *t = th_new(base_cfg);
	static const uint32_t offs[] = {1000, 2000, 3000, 1100};
	struct ipk_conn *c;
	struct tseg s;
	uint32_t r = IRS + 1;

	open_conn(t, 1, 0, &c, &s);

	ooo_pieces(t, offs, 4, 0, &s);
	CHECK_EQ(s.h.ack, r);
	CHECK_EQ(s.o.nsack, 3);
	/* the block holding the last arrival (1100) first, merged with 1000 */
	CHECK_EQ(s.o.sack[0][0], r + 1000);
	CHECK_EQ(s.o.sack[0][1], r + 1200);
	CHECK_EQ(s.o.sack[1][0], r + 3000);
	CHECK_EQ(s.o.sack[1][1], r + 3100);
	CHECK_EQ(s.o.sack[2][0], r + 2000);
	CHECK_EQ(s.o.sack[2][1], r + 2100);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_ooo_sack_at_most_4_blocks_or_3_with_ts(void)
{
	static const uint32_t offs[] = {1000, 2000, 3000, 4000, 5000, 6000};
	int ts;

	for (ts = 0; ts <= 1; ts++) {
		struct th *t = th_new(base_cfg);
		struct ipk_conn *c;
		struct tseg s;
		uint32_t r = IRS + 1;

		open_conn(t, 1, ts, &c, &s);
		ooo_pieces(t, offs, 6, ts, &s);
		CHECK_EQ(s.o.nsack, ts ? 3 : 4);
		CHECK_EQ(s.o.has_ts, ts);
		CHECK_EQ(s.o.sack[0][0], r + 6000); /* newest first */
		CHECK_EQ(s.o.sack[1][0], r + 5000);
		ipk_tcp_abort(t->ctx, c, t->now);
		finish(t);
	}
}

static void test_established_duplicate_segment_gets_dsack(void)
{
	struct th *t = th_new(base_cfg);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t r = IRS + 1;

	open_conn(t, 1, 0, &c, &s);
	peer(t, A, r, 0, 0, 0, 0, NULL, 0, g_buf, 100);
	while (th_next(t, &s))
		;
	CHECK_EQ(s.o.nsack, 0);
	peer(t, A, r, 0, 0, 0, 0, NULL, 0, g_buf, 100); /* again */
	CHECK(th_next(t, &s));
	CHECK_EQ(s.h.ack, r + 100);
	CHECK_EQ(s.o.nsack, 1);
	CHECK_EQ(s.o.sack[0][0], r); /* RFC 2883 §4: the duplicate, below the ACK */
	CHECK_EQ(s.o.sack[0][1], r + 100);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_dsack_tx, 1);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

/* ------------------------------------------------------------ scoreboard */

/* Queue n full segments and pop what goes out. */
static void send_segs(struct th *t, struct ipk_conn *c, int n)
{
	struct tseg s;

	CHECK_EQ(ipk_tcp_write(t->ctx, c, g_buf, (uint32_t)n * MSS, t->now), (int)((uint32_t)n * MSS));
	while (th_next(t, &s))
		;
}

static void test_established_sack_scoreboard_merges_and_ignores_outside(void)
{
	struct th *t = th_new(base_cfg);
	struct ipk_conn *c;
	struct ipk_tcp_info in;
	struct tseg s;
	uint32_t d, blk[2][2];

	d = open_conn(t, 1, 0, &c, &s) + 1;
	send_segs(t, c, 10);
	blk[0][0] = d + 3 * MSS;
	blk[0][1] = d + 5 * MSS;
	peer(t, A, IRS + 1, d, 0, 0, 0, blk, 1, NULL, 0);
	ipk_tcp_info(c, &in);
	CHECK_EQ(in.sacked_bytes, 2 * MSS);
	blk[0][0] = d + 4 * MSS; /* overlaps: merged into 3..7 */
	blk[0][1] = d + 7 * MSS;
	peer(t, A, IRS + 1, d, 0, 0, 0, blk, 1, NULL, 0);
	ipk_tcp_info(c, &in);
	CHECK_EQ(in.sacked_bytes, 4 * MSS);
	blk[0][0] = d + 9 * MSS; /* beyond snd_max: ignored, counted */
	blk[0][1] = d + 12 * MSS;
	blk[1][0] = d + 8 * MSS;
	blk[1][1] = d + 7 * MSS; /* right edge below left edge */
	peer(t, A, IRS + 1, d, 0, 0, 0, blk, 2, NULL, 0);
	ipk_tcp_info(c, &in);
	CHECK_EQ(in.sacked_bytes, 4 * MSS);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_sack_invalid, 2);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_sack_recovery_retransmits_only_holes(void)
{
	struct th *t = th_new(no_rack);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t d, blk[2][2], seen[8];
	int n = 0;

	d = open_conn(t, 1, 0, &c, &s) + 1;
	send_segs(t, c, 10);
	/* holes 0-1 and 4-5; 6 segments SACKed */
	blk[0][0] = d + 6 * MSS;
	blk[0][1] = d + 10 * MSS;
	blk[1][0] = d + 2 * MSS;
	blk[1][1] = d + 4 * MSS;
	peer(t, A, IRS + 1, d, 0, 0, 0, blk, 2, NULL, 0);
	while (n < 8 && th_next(t, &s))
		if (s.len)
			seen[n++] = s.h.seq - d;
	CHECK_EQ(n, 4);
	CHECK_EQ(seen[0], 0);
	CHECK_EQ(seen[1], MSS);
	CHECK_EQ(seen[2], 4 * MSS);
	CHECK_EQ(seen[3], 5 * MSS);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_sack_recovery_episodes, 1);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_retransmits, 4);
	/* the holes filled: everything acknowledged, recovery over, scoreboard freed */
	peer(t, A, IRS + 1, d + 10 * MSS, 0, 0, 0, NULL, 0, NULL, 0);
	CHECK_EQ(ipk_pbs_free(t->ctx), t->npbs);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_dsack_received_counts_spurious_retransmission(void)
{
	struct th *t = th_new(base_cfg);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t d, blk[1][2];

	d = open_conn(t, 1, 0, &c, &s) + 1;
	send_segs(t, c, 2);
	/* RFC 2883 §4: a block below the cumulative ACK reports a duplicate */
	blk[0][0] = d;
	blk[0][1] = d + MSS;
	peer(t, A, IRS + 1, d + MSS, 0, 0, 0, blk, 1, NULL, 0);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_dsack_rx, 1);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_spurious_rtx, 1);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_sack_invalid, 0);
	CHECK_EQ(c->sb ? IPK_SB_REO_MULT(c->sb) : 0u, 2u); /* RFC 8985 §6.2: wider window */
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_sack_scoreboard_memory_is_bounded(void)
{
	struct th *t = th_new(base_cfg);
	struct ipk_conn *c;
	struct ipk_tcp_opts o = syn_opts(1, 0);
	struct ipk_tcp_info in;
	struct tseg s;
	uint32_t d, blk[4][2], sq, i, j;

	o.mss = 100; /* many segments in the initial window (RFC 6928: 14600 bytes) */
	ipk_tcp_listen(t->ctx, ipk_htons(TH_LOCAL_PORT), 8);
	th_send(t, TH_PEER_PORT, TH_LOCAL_PORT, IPK_TCP_SYN, IRS, 0, W, &o, NULL, 0);
	CHECK(th_next(t, &s));
	d = s.h.seq + 1;
	g_una = d;
	peer(t, A, IRS + 1, d, 0, 0, 0, NULL, 0, NULL, 0);
	c = t->conn;
	CHECK_EQ(ipk_tcp_write(t->ctx, c, g_buf, 200 * 100, t->now), 200 * 100);
	/* slow start: ACK every segment for three rounds, so 80 are out in the fourth */
	for (i = 0; i < 3; i++) {
		uint32_t ends[128], n = 0;

		while (th_next(t, &s))
			if (s.len && n < 128)
				ends[n++] = s.h.seq + s.len;
		for (j = 0; j < n; j++)
			peer(t, A, IRS + 1, ends[j], 0, 0, 0, NULL, 0, NULL, 0);
		d = ends[n - 1];
	}
	while (th_next(t, &s))
		;
	CHECK(c->snd_max - d >= 80 * 100);
	sq = t->npbs - ipk_pbs_free(t->ctx); /* the send queue's descriptors */
	/* 40 disjoint SACKed segments, 4 blocks per ACK */
	for (i = 0; i < 10; i++) {
		for (j = 0; j < 4; j++) {
			blk[j][0] = d + (2 * (4 * i + j) + 1) * 100;
			blk[j][1] = blk[j][0] + 100;
		}
		peer(t, A, IRS + 1, d, 0, 0, 0, blk, 4, NULL, 0);
	}
	while (th_next(t, &s))
		;
	/* the record and at most IPK_TCP_SB_MAX ranges, whatever the window holds */
	CHECK(t->npbs - ipk_pbs_free(t->ctx) <= sq + 1 + IPK_TCP_SB_MAX);
	CHECK(ipk_tcp_info(c, &in) == IPK_OK && in.sacked_bytes > 0);
	for (i = 0; i < 10 && c->snd_una != g_una + 200 * 100; i++) {
		peer(t, A, IRS + 1, c->snd_max, 0, 0, 0, NULL, 0, NULL, 0);
		while (th_next(t, &s))
			;
	}
	CHECK_EQ(ipk_pbs_free(t->ctx), t->npbs);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

/* ------------------------------------------------------------ RACK-TLP */

static void test_established_rack_marks_lost_after_reorder_window(void)
{
	struct th *t = th_new(base_cfg);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t d, blk[1][2];

	d = open_conn(t, 1, 0, &c, &s) + 1;
	send_segs(t, c, 3);
	th_advance(t, 8 * MS);
	/* one segment SACKed above the first: too little for DupThresh */
	blk[0][0] = d + MSS;
	blk[0][1] = d + 2 * MSS;
	peer(t, A, IRS + 1, d, 0, 0, 0, blk, 1, NULL, 0);
	CHECK(!th_next(t, &s)); /* within the reordering window: wait */
	th_advance(t, 1 * MS);
	CHECK(!th_next(t, &s));
	th_advance(t, 2 * MS); /* min_RTT / 4 = 2 ms after the SACK: timer fired */
	CHECK(th_next(t, &s));
	CHECK_EQ(s.h.seq, d);
	CHECK_EQ(s.len, MSS);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_rto, 0);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_tlp_probes_last_segment_after_pto(void)
{
	struct th *t = th_new(base_cfg);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t d;

	d = open_conn(t, 1, 0, &c, &s) + 1; /* SRTT = 8 ms */
	send_segs(t, c, 3);
	th_advance(t, 15 * MS);
	CHECK(!th_next(t, &s));
	th_advance(t, 2 * MS); /* PTO = 2 * SRTT, long before the 200 ms RTO */
	CHECK(th_next(t, &s));
	CHECK_EQ(s.h.seq, d + 2 * MSS); /* the last segment again */
	CHECK_EQ(s.len, MSS);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_tlp_probes, 1);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_rto, 0);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

/* ------------------------------------------------------------ timestamps */

static void test_established_paws_drops_old_tsval_and_acks(void)
{
	struct th *t = th_new(base_cfg);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t r = IRS + 1;

	open_conn(t, 0, 1, &c, &s);
	peer(t, A, r, 0, 1, 200, 0, NULL, 0, g_buf, 100);
	while (th_next(t, &s))
		;
	CHECK_EQ(t->rxlen, 100);
	peer(t, A, r + 100, 0, 1, 150, 0, NULL, 0, g_buf, 100); /* older than TS.Recent */
	CHECK_EQ(t->rxlen, 100);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_paws_drops, 1);
	CHECK_EQ(ipk_counters(t->ctx)->drop[IPK_DROP_TCP_PAWS], 1);
	CHECK(th_next(t, &s)); /* RFC 7323 §5.3 R1: acknowledged */
	CHECK_EQ(s.h.ack, r + 100);
	CHECK_EQ(s.o.tsecr, 200);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_paws_rst_exempt(void)
{
	struct th *t = th_new(base_cfg);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t r = IRS + 1;

	open_conn(t, 0, 1, &c, &s);
	peer(t, A, r, 0, 1, 200, 0, NULL, 0, g_buf, 100);
	while (th_next(t, &s))
		;
	peer(t, IPK_TCP_RST, r + 100, 0, 1, 150, 0, NULL, 0, NULL, 0);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_paws_drops, 0);
	CHECK_EQ(t->closed, 1);
	CHECK_EQ(t->why, IPK_CLOSE_RESET);
	finish(t);
}

static void test_established_paws_idle_24_days_accepts_old_tsval(void)
{
	struct th *t = th_new(base_cfg);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t r = IRS + 1;

	open_conn(t, 0, 1, &c, &s);
	peer(t, A, r, 0, 1, 200, 0, NULL, 0, g_buf, 100);
	t->now += 25ull * 24 * 3600 * 1000 * MS; /* RFC 7323 §5.5: TS.Recent is stale */
	peer(t, A, r + 100, 0, 1, 150, 0, NULL, 0, g_buf, 100);
	CHECK_EQ(t->rxlen, 200);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_paws_drops, 0);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_rtt_from_timestamps_across_retransmission(void)
{
	struct th *t = th_new(base_cfg);
	struct ipk_conn *c;
	struct ipk_tcp_info in;
	struct tseg s;
	uint32_t d;

	d = open_conn(t, 0, 1, &c, &s) + 1;
	CHECK_EQ(ipk_tcp_write(t->ctx, c, g_buf, 100, t->now), 100);
	CHECK(th_next(t, &s));
	th_advance(t, 1000 * MS); /* initial RTO: the segment goes again */
	CHECK(th_next(t, &s));
	CHECK_EQ(s.h.seq, d);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_rto, 1);
	th_advance(t, 30 * MS);
	ipk_tcp_info(c, &in);
	CHECK_EQ(in.srtt_ns, 8 * MS); /* the handshake's sample */
	/* TSecr names the retransmission, so the sample is 30 ms (Karn would take none):
	 * RFC 6298 (2.3) SRTT = 7/8 * 8 ms + 1/8 * 30 ms */
	peer(t, A, IRS + 1, d + 100, 1, 300, s.o.tsval, NULL, 0, NULL, 0);
	ipk_tcp_info(c, &in);
	CHECK_EQ(in.srtt_ns, (7 * 8 * MS + 30 * MS) / 8);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

int main(void)
{
	RUN(test_listen_syn_sack_ts_negotiated);
	RUN(test_listen_syn_without_options_gets_neither);
	RUN(test_listen_syn_config_off_refuses_both);
	RUN(test_established_ooo_sack_recent_block_first_then_highest);
	RUN(test_established_ooo_sack_at_most_4_blocks_or_3_with_ts);
	RUN(test_established_duplicate_segment_gets_dsack);
	RUN(test_established_sack_scoreboard_merges_and_ignores_outside);
	RUN(test_established_sack_recovery_retransmits_only_holes);
	RUN(test_established_dsack_received_counts_spurious_retransmission);
	RUN(test_established_sack_scoreboard_memory_is_bounded);
	RUN(test_established_rack_marks_lost_after_reorder_window);
	RUN(test_established_tlp_probes_last_segment_after_pto);
	RUN(test_established_paws_drops_old_tsval_and_acks);
	RUN(test_established_paws_rst_exempt);
	RUN(test_established_paws_idle_24_days_accepts_old_tsval);
	RUN(test_established_rtt_from_timestamps_across_retransmission);
	return check_summary();
}
