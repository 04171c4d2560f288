/*
 * Losses during recovery that used to wait for the retransmission timeout, scripted
 * against one context: a retransmission that RACK finds lost (RFC 8985 §6.2) and a
 * recovery whose ACK clock stopped. Each case comes from a trace through ipk-relay
 * at 5% random loss each way with Linux as the receiver (issue 16): Linux ACKs a
 * burst of segments with one ACK, so one lost ACK leaves the sender with nothing to
 * clock its next transmission.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "wire/wire.h"

#define IRS 5000000u
#define A IPK_TCP_ACK
#define W 65535
#define US 1000ull
#define MS 1000000ull
#define MSS 1000u

static uint8_t g_buf[64 * 1024];

static void finish(struct th *t, struct ipk_conn *c)
{
	ipk_tcp_abort(t->ctx, c, t->now);
	CHECK(th_no_leaks(t));
	th_free(t);
}

static void base_cfg(struct ipk_config *c)
{
	c->tcp_delack_ns = 0;
	c->tcp_wscale = 0;
	c->tcp_timestamps = 0;
}

/* Passive open with SACK and MSS 1000, the handshake's RTT 8 ms; returns the
 * sequence number of our first data byte. */
static uint32_t open_sack(struct th *t, struct ipk_conn **c)
{
	struct ipk_tcp_opts o;
	struct tseg s;
	uint32_t iss;

	memset(&o, 0, sizeof(o));
	o.has_mss = 1;
	o.mss = MSS;
	o.has_sack_perm = 1;
	ipk_tcp_listen(t->ctx, ipk_htons(TH_LOCAL_PORT), 8);
	th_send(t, TH_PEER_PORT, TH_LOCAL_PORT, IPK_TCP_SYN, IRS, 0, W, &o, NULL, 0);
	CHECK(th_next(t, &s));
	iss = s.h.seq;
	th_advance(t, 8 * MS);
	th_send(t, TH_PEER_PORT, TH_LOCAL_PORT, A, IRS + 1, iss + 1, W, NULL, NULL, 0);
	*c = t->conn;
	CHECK(*c != NULL);
	return iss + 1;
}

/* An ACK of snd_una d, SACKing [d + l * MSS, d + r * MSS). */
static void sack(struct th *t, uint32_t d, uint32_t l, uint32_t r)
{
	struct ipk_tcp_opts o;

	memset(&o, 0, sizeof(o));
	o.sack[0][0] = d + l * MSS;
	o.sack[0][1] = d + r * MSS;
	o.nsack = 1;
	th_send(t, TH_PEER_PORT, TH_LOCAL_PORT, A, IRS + 1, d, W, &o, NULL, 0);
}

/* An ACK of snd_una d, SACKing [d + l, d + r) (bytes). */
static void sack_bytes(struct th *t, uint32_t d, uint32_t l, uint32_t r)
{
	struct ipk_tcp_opts o;

	memset(&o, 0, sizeof(o));
	o.sack[0][0] = d + l;
	o.sack[0][1] = d + r;
	o.nsack = 1;
	th_send(t, TH_PEER_PORT, TH_LOCAL_PORT, A, IRS + 1, d, W, &o, NULL, 0);
}

/* Data segments sent since the last call; *first_rtx the first one below max
 * (a retransmission), or ~0 when none was. */
static int drain(struct th *t, uint32_t max, uint32_t *first_rtx)
{
	struct tseg s;
	int n = 0;

	*first_rtx = ~0u;
	while (th_next(t, &s)) {
		if (!s.len)
			continue;
		n++;
		if (ipk_seq_lt(s.h.seq, max) && *first_rtx == ~0u)
			*first_rtx = s.h.seq;
	}
	return n;
}

/*
 * RFC 8985 §6.2: segment 0 is lost, resent, and its retransmission is lost too;
 * segments sent after it are SACKed, so when the reordering window has passed RACK
 * marks it lost. Meanwhile new data filled cwnd and no ACK follows (the receiver's
 * one ACK for the burst was lost). The lost retransmission has left the network and
 * must leave the pipe: then cwnd has room and it goes out again at once. Regression:
 * the pipe still counted it, cwnd - pipe was 0 and it waited for the 200 ms RTO.
 */
static void test_established_lost_retransmission_resent_when_marked_lost(void)
{
	struct th *t = th_new(base_cfg);
	struct ipk_conn *c;
	uint32_t d, rtx, max;
	int n;

	d = open_sack(t, &c);
	CHECK_EQ(ipk_tcp_write(t->ctx, c, g_buf, 60 * MSS, t->now), (int)(60 * MSS));
	n = drain(t, c->snd_max, &rtx);
	CHECK_EQ(n, 10); /* the initial window */
	/* segments 1..3 SACKed: segment 0 lost (DupThresh), resent */
	th_run_for(t, 8 * MS);
	max = c->snd_max;
	sack(t, d, 1, 4);
	drain(t, max, &rtx);
	CHECK_EQ(rtx, d);
	CHECK(c->fl & IPK_TCPF_SACK_RCVY);
	/* the rest of the first flight SACKed: PRR releases new data */
	th_run_for(t, 100 * US);
	max = c->snd_max;
	sack(t, d, 1, 10);
	n = drain(t, max, &rtx);
	CHECK(n > 0);
	CHECK_EQ(rtx, ~0u);
	/* the new data, sent after the retransmission, SACKed 8 ms later: RACK waits
	 * out the reordering window for segment 0's retransmission */
	th_run_for(t, 8 * MS);
	max = c->snd_max;
	sack(t, d, 1, (max - d) / MSS);
	n = drain(t, max, &rtx);
	CHECK_EQ(rtx, ~0u);
	CHECK_EQ(c->rtx_kind, IPK_TCP_RTX_REO);
	CHECK(ipk_tcp_sb_pipe(c) >= c->cwnd); /* cwnd is full */
	/* the window passes with no ACK: lost, and resent at once */
	th_run_for(t, 5 * MS);
	max = c->snd_max;
	drain(t, max, &rtx);
	CHECK_EQ(rtx, d);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_rto, 0);
	finish(t, c);
}

/*
 * RFC 8985 §6.2 marks segments 0..8 lost (segment 9, sent with them, is SACKed);
 * the reordering timer enters recovery and PRR releases one segment, the first
 * hole. Then no ACK comes: eight lost segments wait for room in cwnd that only an
 * ACK would make. At the probe timeout the next lost segment goes out as the probe,
 * not the tail. Regression: no probe was armed while lost segments waited, and the
 * RTO repaired them 200 ms later.
 */
static void test_established_stalled_recovery_probes_first_lost_segment(void)
{
	struct th *t = th_new(base_cfg);
	struct ipk_conn *c;
	uint32_t d, rtx, max;

	d = open_sack(t, &c);
	CHECK_EQ(ipk_tcp_write(t->ctx, c, g_buf, 60 * MSS, t->now), (int)(60 * MSS));
	CHECK_EQ(drain(t, c->snd_max, &rtx), 10);
	th_run_for(t, 8 * MS);
	max = c->snd_max;
	sack(t, d, 9, 10);
	drain(t, max, &rtx);
	CHECK_EQ(rtx, ~0u); /* within the reordering window */
	max = c->snd_max;
	th_run_for(t, 3 * MS);
	CHECK(c->fl & IPK_TCPF_SACK_RCVY);
	CHECK_EQ(drain(t, max, &rtx), 1);
	CHECK_EQ(rtx, d);
	CHECK(ipk_tcp_sb_lost_unsent(c) >= 8 * MSS);
	/* PTO = 2 * SRTT = 16 ms, long before the 200 ms RTO */
	max = c->snd_max;
	th_run_for(t, 30 * MS);
	CHECK_EQ(drain(t, max, &rtx), 1);
	CHECK_EQ(rtx, d + MSS);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_tlp_probes, 1);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_tlp_recovery, 1);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_tlp_new_data, 0);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_rto, 0);
	finish(t, c);
}

/*
 * RFC 8985 §6.2 step 1: RACK learns from segments delivered. The send queue keeps
 * transmit times per packet buffer (pb), and a short first write leaves pbs and
 * segments misaligned: here pb 0 holds bytes [0, 1000) but segment 0 only [0, 500),
 * segment 1 [500, 1500). Segment 0 is lost and resent, which stamps pb 0 with the
 * retransmission's time; a SACK of [500, 4500) then covers pb 0's end but not its
 * start. pb 0 is not delivered: taking it as delivered made RACK.xmit_ts the
 * retransmission's time, and segments 5..9, sent before it and still in flight, were
 * marked lost and resent, all spurious (through ipk-relay at 1% loss, ~10 of
 * a 32 MiB transfer's D-SACKed retransmissions came in such bursts).
 */
static void test_established_rack_partly_sacked_pb_is_not_delivered(void)
{
	struct th *t = th_new(base_cfg);
	struct ipk_conn *c;
	uint32_t d, rtx, max;
	struct tseg s;

	d = open_sack(t, &c);
	CHECK_EQ(ipk_tcp_write(t->ctx, c, g_buf, 500, t->now), 500);
	CHECK(th_next(t, &s) && s.len == 500);
	/* tops pb 0 up to [0, 1000); segments [500, 1500), [1500, 2500) ... go out */
	CHECK_EQ(ipk_tcp_write(t->ctx, c, g_buf, 40 * MSS, t->now), (int)(40 * MSS));
	drain(t, c->snd_max, &rtx);
	CHECK_EQ(c->snd_max - d, 9500u); /* the initial window: 10 segments */
	/* segments 1..3 SACKed: segment 0 lost (DupThresh), resent */
	th_run_for(t, 8 * MS);
	max = c->snd_max;
	sack_bytes(t, d, 500, 3500);
	drain(t, max, &rtx);
	CHECK_EQ(rtx, d);
	CHECK(c->fl & IPK_TCPF_SACK_RCVY);
	/* segment 4 SACKed an RTT after the resend; the ACKs of 5..9 are on their way */
	th_run_for(t, 8 * MS);
	max = c->snd_max;
	sack_bytes(t, d, 500, 4500);
	th_run_for(t, 3 * MS); /* past any reordering window */
	drain(t, max, &rtx);
	CHECK_EQ(rtx, ~0u);
	CHECK_EQ(ipk_tcp_sb_lost_unsent(c), 0u);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_retransmits, 1);
	finish(t, c);
}

/* Retransmissions of the segment at seq among the data segments sent since the last
 * call. */
static int resent(struct th *t, uint32_t seq)
{
	struct tseg s;
	int n = 0;

	while (th_next(t, &s))
		if (s.len && s.h.seq == seq)
			n++;
	return n;
}

/*
 * RFC 8985 §6.2 orders transmissions by time, and equal times by sequence: a TSO
 * burst shares one timestamp and leaves in sequence order. The engine stamps a
 * whole pass with the caller's `now`, and there a retransmission can follow new
 * data: here two ACKs send segments 10 and 11, the third enters recovery and resends
 * segment 0, all at one `now`. The SACK of 10 and 11 then says nothing about the
 * retransmission, sent after them; ordered by sequence it was "sent before" them,
 * marked lost when the reordering window passed and resent again. Regression:
 * through ipk-relay at 1% loss, half of the D-SACKed retransmissions of a 32 MiB
 * transfer, the ACK of the first retransmission being held ~200 us by the receiver.
 */
static void test_established_rack_same_tick_retransmission_not_sent_before(void)
{
	struct th *t = th_new(base_cfg);
	struct ipk_conn *c;
	uint32_t d, rtx;

	d = open_sack(t, &c);
	CHECK_EQ(ipk_tcp_write(t->ctx, c, g_buf, 60 * MSS, t->now), (int)(60 * MSS));
	CHECK_EQ(drain(t, c->snd_max, &rtx), 10);
	th_run_for(t, 8 * MS);
	sack(t, d, 1, 2); /* one ACK each for segments 1, 2, 3, in one poll */
	sack(t, d, 1, 3);
	sack(t, d, 1, 4);
	CHECK(c->fl & IPK_TCPF_SACK_RCVY);
	CHECK_EQ(resent(t, d), 1);
	CHECK(ipk_seq_ge(c->snd_max, d + 12 * MSS)); /* 10 and 11 went out first */
	/* an RTT later everything but segment 0 is SACKed, up to 11 */
	th_run_for(t, 8 * MS);
	sack(t, d, 1, 12);
	th_run_for(t, 5 * MS); /* past the reordering window */
	CHECK_EQ(resent(t, d), 0);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_rto, 0);
	finish(t, c);
}

int main(void)
{
	RUN(test_established_stalled_recovery_probes_first_lost_segment);
	RUN(test_established_rack_partly_sacked_pb_is_not_delivered);
	RUN(test_established_rack_same_tick_retransmission_not_sent_before);
	RUN(test_established_lost_retransmission_resent_when_marked_lost);
	return check_summary();
}
