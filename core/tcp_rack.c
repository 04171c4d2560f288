/*
 * RACK-TLP (RFC 8985): time-based loss detection from per-segment transmit times
 * (kept on the send-queue pbs: pb->t last sent, pb->xmit 1 = once, 2 = twice,
 * IPK_TCP_XMIT_AGAIN = three times or more, IPK_TCP_XMIT_LOST = the retransmission
 * was lost too), the
 * reordering window and its timer, and the tail loss probe. Works beside the SACK
 * scoreboard (tcp_sb.c), which holds RACK's per-flight state.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

#define RACK_NS_PER_US 1000ull
#define RACK_NS_PER_MS 1000000ull
/* RFC 8985 §7.2: worst-case delayed-ACK time added when one segment is in flight. */
#define WC_DELACK_NS ((uint64_t)IPK_TCP_WC_DELACK_US * RACK_NS_PER_US)
/* States with data or a FIN of ours that a tail loss probe may repair. */
#define TLP_STATES ((1u << IPK_TCP_ESTABLISHED) | (1u << IPK_TCP_CLOSE_WAIT) | \
                    (1u << IPK_TCP_FIN_WAIT_1) | (1u << IPK_TCP_CLOSING) | (1u << IPK_TCP_LAST_ACK))
/* Floor for the PTO so a sub-ms RTT does not probe on every scheduling hiccup. */
#define PTO_MIN_NS (10ull * RACK_NS_PER_MS)
/* RFC 8985 §6.2 step 4: RACK.reo_wnd_persist after a widening, and the ceiling of
 * reo_wnd_mult (reo_wnd is bounded by SRTT anyway): Linux's 255 once the path showed
 * reordering, 16 before. Linux widens on a D-SACK only once reordering was seen
 * (tcp_dsack_seen); ipkit widens on every D-SACK (the duplicates' D-SACKs crowd the
 * SACK blocks, tcp_sb.c dsack_take), but on a path that only loses, where D-SACKs
 * answer tail probes and retransmissions that were merely slow, a window grown past
 * 16 steps toward SRTT delayed loss detection into RTOs (through ipk-relay at 5%
 * loss, 5 RTO episodes per 8 MiB on average against 2.5). */
#define REO_PERSIST 16u
#define REO_MULT_MAX 255u
#define REO_MULT_MAX_UNSEEN 16u
/* min_RTT is the least sample of this period and the one before: a window of 5 to
 * 10 s. Long against any RTT, short enough that a path whose RTT rose (a new route,
 * a standing queue) stops being judged by the old minimum within seconds; RFC 8985
 * §6.2 leaves the filter to the implementation. */
#define IPK_TCP_MINRTT_PERIOD_MS 5000u

uint32_t ipk_tcp_min_rtt_us(const struct ipk_conn *c)
{
	uint32_t a = c->min_rtt_cur_us, b = c->min_rtt_prev_us;

	if (a == 0 || (b != 0 && b < a))
		return b;
	return a;
}

void ipk_tcp_min_rtt_sample(struct ipk_ctx *ctx, struct ipk_conn *c, uint64_t r)
{
	uint32_t now = (uint32_t)(ctx->now / RACK_NS_PER_MS);
	uint32_t us = (uint32_t)IPK_MIN(r / RACK_NS_PER_US, 0xffffffffull);

	if (us == 0)
		us = 1;
	if (c->min_rtt_cur_us == 0) {
		c->min_rtt_cur_us = us;
		c->min_rtt_epoch_ms = now;
		return;
	}
	if (now - c->min_rtt_epoch_ms >= IPK_TCP_MINRTT_PERIOD_MS) {
		/* a new period; one with no samples at all ages the old one out too */
		c->min_rtt_prev_us = now - c->min_rtt_epoch_ms >= 2u * IPK_TCP_MINRTT_PERIOD_MS ?
		                             0u : c->min_rtt_cur_us;
		c->min_rtt_cur_us = us;
		c->min_rtt_epoch_ms = now;
		return;
	}
	if (us < c->min_rtt_cur_us)
		c->min_rtt_cur_us = us;
}

void ipk_tcp_rack_dsack(struct ipk_conn *c)
{
	if ((c->fl & IPK_TCPF_DSACK_RND) && ipk_seq_ge(c->snd_una, IPK_SB_DSACK_RND(ipk_tcp_sb(c))))
		c->fl &= ~IPK_TCPF_DSACK_RND;
	if (c->fl & IPK_TCPF_DSACK_RND)
		return; /* at most one widening per round trip */
	c->fl |= IPK_TCPF_DSACK_RND;
	IPK_SB_DSACK_RND(ipk_tcp_sb(c)) = c->snd_nxt;
	if (c->reo_mult < ((c->fl & IPK_TCPF_REORDER) ? REO_MULT_MAX : REO_MULT_MAX_UNSEEN))
		c->reo_mult++;
	c->reo_persist = REO_PERSIST;
}

void ipk_tcp_rack_recovery_done(struct ipk_conn *c)
{
	if (c->reo_persist == 0)
		return;
	if (--c->reo_persist == 0)
		c->reo_mult = 1; /* 16 recoveries without a D-SACK: back to min_RTT / 4 */
}

IPK_HOT void ipk_tcp_rack_sent(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t seq, uint32_t len)
{
	uint32_t at;
	struct ipk_pb *pb = ctx->sq_hint_pb;
	int again = ipk_seq_lt(seq, c->snd_max);
	uint64_t t = ipk_tcp_tx_stamp(ctx);

	/* O(1) for the segment just built: it starts where seg_send's lookup ended,
	 * usually at the first byte of that pb (one pb per write, sent whole). */
	if (ctx->sq_hint_c != c || pb->seq != seq)
		pb = ipk_tcp_sq_find(ctx, c, seq, &at);
	for (; pb && ipk_seq_lt(pb->seq, seq + len); pb = pb->next) {
		if (ipk_seq_le(pb->seq + pb->len, seq))
			continue;
		pb->t = t;
		if (again)
			pb->xmit = pb->xmit > 1 ? IPK_TCP_XMIT_AGAIN : 2u;
		else if (pb->xmit == 0)
			pb->xmit = 1;
	}
}

/*
 * RFC 8985 §6.2 step 2: may the delivery of a retransmitted segment, rtt ns after
 * its retransmission, be the original's? Then its time says nothing about the
 * retransmission and must not move RACK.xmit_ts. The RFC's test, sooner than
 * min_RTT, assumes no queue. On a path that reorders (RACK.reordering_seen) the
 * original of a segment resent too early arrives soon after its retransmission,
 * while a queue can hold the retransmission many times min_RTT: sooner than half
 * SRTT (which counts the queue) is then taken as the original's too. Through
 * ipk-relay at 5% reordering (min_RTT 35 us, SRTT ~700 us) such ACKs came 150 us
 * after the retransmission; taken as its samples they moved RACK.xmit_ts past the
 * whole queued flight, which RACK then marked lost at once, ~10 segments a time,
 * and each of those spurious retransmissions did the same again.
 */
static int rtx_ambiguous(const struct ipk_conn *c, uint64_t rtt, uint32_t min)
{
	uint64_t ref = (uint64_t)IPK_SB_RACK_RTT(ipk_tcp_sb(c)) * RACK_NS_PER_US;

	if (min && rtt < (uint64_t)min * RACK_NS_PER_US)
		return 1;
	if (ref < ipk_tcp_srtt_ns(c))
		ref = ipk_tcp_srtt_ns(c);
	return (c->fl & IPK_TCPF_REORDER) && rtt < ref / 2u;
}

/* RFC 8985 §6.2 step 1-2 for one delivered segment. */
static void rack_update(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_pb *pb)
{
	struct ipk_pb *rec = ipk_tcp_sb(c);
	/* to the nearest µs: a stamp may run a few ns ahead of now (ipk_tcp_tx_stamp) */
	uint64_t rtt = (ctx->now > pb->t ? ctx->now - pb->t : 0u) + RACK_NS_PER_US / 2u;
	uint32_t end = pb->seq + pb->len, us, min = ipk_tcp_min_rtt_us(c);

	if (pb->xmit > 1 && rtx_ambiguous(c, rtt, min))
		return;
	us = (uint32_t)IPK_MIN(rtt / RACK_NS_PER_US, 0xffffffffull);
	if (us == 0)
		us = 1;
	ipk_tcp_min_rtt_sample(ctx, c, rtt);
	IPK_SB_RACK_RTT(rec) = us;
	if (pb->t > IPK_SB_RACK_TS(rec) ||
	    (pb->t == IPK_SB_RACK_TS(rec) && ipk_seq_gt(end, IPK_SB_RACK_END(rec)))) {
		IPK_SB_RACK_TS(rec) = pb->t;
		IPK_SB_RACK_END(rec) = end;
	}
}

/*
 * RFC 8985 §6.2 step 1 is per segment; the send queue keeps one transmit time per
 * pb, and pbs need not line up with segments (a short write, then a top-up). A SACK
 * block [l, r) that covers a pb's end but not its start delivers the pb only when
 * the bytes below l were delivered already. Else part of it is still out, maybe a
 * retransmission whose time the pb carries: taken as delivered, that time became
 * RACK.xmit_ts and every segment sent before it and not yet SACKed was marked lost
 * (through ipk-relay at 1% loss, bursts of spurious retransmissions after a
 * 56-byte hole was resent).
 */
static int pb_head_delivered(const struct ipk_conn *c, const struct ipk_pb *pb, uint32_t l,
                             int cum)
{
	uint32_t s = ipk_seq_lt(pb->seq, c->snd_una) ? c->snd_una : pb->seq;

	return cum || !ipk_seq_lt(s, l) || ipk_tcp_sb_sacked(c, s, l);
}

/*
 * When pb's original was sent, at the latest: its own time when sent once, else
 * that of the next segment sent once (data goes out in sequence order the first
 * time), 0 when there is none.
 */
static uint64_t orig_sent_by(const struct ipk_pb *pb)
{
	unsigned n;

	for (n = 0; pb && n < 8u; pb = pb->next, n++) {
		if (pb->xmit == 1)
			return pb->t;
	}
	return 0;
}

/*
 * §6.2 step 3 (counted), and how far (in send time) the path reordered: pb arrived
 * after the latest-sent delivered segment (RACK.xmit_ts), sent that much later. RACK
 * keeps a segment from being marked lost only while that gap is within reo_wnd, so the
 * window is widened to cover it at once (reo_wnd still caps it at SRTT) and held
 * for REO_PERSIST recoveries, as a D-SACK widening is (step 4). Linux measures the
 * same degree in segments (tcp_check_sack_reordering: tp->reordering). RFC 8985's
 * D-SACK steps alone grow by min_RTT / 4 per round trip, and a path that holds
 * segments back many times that long (a queue in front of the reordering: min_RTT
 * 35 us, segments held up to 400 us through ipk-relay) paid ~40 spurious
 * retransmissions in 16 MiB before the window caught up.
 */
static void reorder_seen(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_pb *pb,
                         int measure)
{
	uint64_t ts = IPK_SB_RACK_TS(ipk_tcp_sb(c)), sent = orig_sent_by(pb), step;
	uint32_t min = ipk_tcp_min_rtt_us(c), need;

	c->fl |= IPK_TCPF_REORDER;
	ctx->cnt.tcp_reordering_seen++;
	if (!measure || sent == 0 || ts <= sent || min < 4u)
		return;
	step = (uint64_t)(min / 4u) * RACK_NS_PER_US;
	need = (uint32_t)IPK_MIN((ts - sent) / step + 1u, (uint64_t)REO_MULT_MAX);
	if (need > c->reo_mult) {
		c->reo_mult = (uint8_t)need;
		c->reo_persist = REO_PERSIST;
	}
}

/*
 * RFC 3522 §3.2 (Eifel) on the cumulative ACK s that covers the resent pb: 1 when its
 * TSecr proves the retransmission was delivered, 0 when it proves the original was
 * (older than the retransmission's TSval), -1 when the 1 ms TSval tick cannot tell
 * (both sends in one tick, or no timestamps). The receiver echoes the TSval of the
 * segment that filled its hole (RFC 7323 §4.3).
 */
static int eifel(const struct ipk_conn *c, const struct ipk_tcp_seg *s, const struct ipk_pb *pb)
{
	uint32_t rtx, orig;
	uint64_t t0 = orig_sent_by(pb->next);

	if (!s || !s->o.has_ts || !(c->fl & IPK_TCPF_TS_OK))
		return -1;
	rtx = (uint32_t)(pb->t / RACK_NS_PER_MS) + c->iss;
	if (ipk_seq_lt(s->o.tsecr, rtx))
		return 0;
	orig = (uint32_t)(t0 / RACK_NS_PER_MS) + c->iss;
	return t0 && orig != rtx ? 1 : -1;
}

/*
 * Step 2's proof that the original of a resent segment arrived: the cumulative ACK
 * s echoes the original's TSval (eifel) or, where the tick cannot tell, came sooner
 * than half min_RTT after the retransmission (not merely sooner: on a 10 ms path at
 * 1% loss a retransmission's own ACK came 0.5% under min_RTT). Below RACK.fack (so
 * not a tail probe, whose original's ACK a delayed-ACK receiver may have held) the
 * segment had been deemed lost while later data got through: the path reorders
 * (step 3). Without this a path that holds segments back longer than three later
 * ones take to be SACKed never showed reordering: the DupThresh rule resent each
 * held-back segment before it arrived, so no cumulative ACK covered one sent once.
 * Only in a SACK recovery: a segment resent after an RTO was not deemed lost by
 * later data, and its original may have arrived long before (ACKs lost, or a
 * receiver that reneged: tests/sim/test_sim_rmem.c). Only a pb of one segment sent
 * twice: a larger pb takes the time of a retransmission of a part of it, and after a
 * third send the ACK of the second echoes an older TSval than the third's (at 0.1%
 * loss, 1% duplication, 10 Mbit/s, 50 ms: 64 false signals, 7 RTOs). The tick
 * is asked first: min_RTT, sampled only while a scoreboard is kept, can lie above a
 * path whose queue drained since (after a slow-start overshoot, 20 ms against
 * retransmissions ACKed in 10 to 17 ms: tests/sim/test_sim_overshoot.c).
 */
static int rtx_too_soon(const struct ipk_ctx *ctx, const struct ipk_conn *c,
                        const struct ipk_tcp_seg *s, const struct ipk_pb *pb)
{
	uint32_t min = ipk_tcp_min_rtt_us(c);
	int e;

	if (pb->xmit != 2 || pb->len > c->mss || !(c->fl & IPK_TCPF_SACK_RCVY))
		return 0;
	e = eifel(c, s, pb);
	if (e >= 0)
		return !e;
	/* a stamp may run a few ns ahead of now (ipk_tcp_tx_stamp) */
	return min && (ctx->now > pb->t ? ctx->now - pb->t : 0u) < (uint64_t)min * RACK_NS_PER_US / 2u;
}

/*
 * Step 2 on a path that reorders, for the cumulative ACK s of a resent pb: its time is
 * a sample of the retransmission only when the timestamp says the retransmission
 * filled the hole (eifel). The hole at snd_una is where a late original lands, and
 * taken as the retransmission's, its ACK moved RACK.xmit_ts past the queued flight,
 * which RACK then marked lost: through ipk-relay at 5% reordering, 1 to 16 such
 * samples per 16 MiB passed the timing tests of rtx_ambiguous, and the runs with
 * most made most spurious retransmissions (up to 150 in one run). Lost
 * retransmissions are still found from SACKed data sent after them.
 */
static int cum_rtx_unproven(const struct ipk_conn *c, const struct ipk_tcp_seg *s,
                            const struct ipk_pb *pb)
{
	return pb->xmit > 1 && (c->fl & IPK_TCPF_REORDER) && eifel(c, s, pb) != 1;
}

/*
 * §6.2 steps 1-3 for the segments in [l, r) not delivered before. Step 3,
 * RACK.reordering_seen: a segment below fack (the highest byte SACKed before this
 * ACK) arrived after later data: sent once, or resent but delivered by its original
 * (rtx_too_soon). s: the cumulative ACK, whose [snd_una, ack) is checked before this
 * ACK's SACK blocks, so RACK.xmit_ts is still the one before this ACK and measures
 * how far the path reordered (reorder_seen); NULL for a SACK block.
 *
 * For a SACK block fack is l: step 3 is not checked. SACK blocks ride on ACKs that
 * can be lost and a receiver repeats only its three or four latest blocks, so a
 * range first heard of below RACK.fack is often old news, not late data: with the
 * check (against the highest byte SACKed before the ACK, as Linux's
 * tcp_check_sack_reordering) a slow-start overshoot that drops every other segment
 * turned the DupThresh rule off and lost its throughput and an RTO
 * (tests/sim/test_sim_overshoot.c), and a receiver that reneged stalled
 * (tests/sim/test_sim_rmem.c).
 */
static void delivered(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s,
                      uint32_t l, uint32_t r, uint32_t fack, int cum)
{
	const struct ipk_pb *pb, *cur = ipk_tcp_sb_ranges(c);

	for (pb = c->sq_head; pb && ipk_seq_lt(pb->seq, r); pb = pb->next) {
		uint32_t end = pb->seq + pb->len;

		if (ipk_seq_le(end, l) || ipk_seq_gt(end, r) || pb->xmit == 0 ||
		    !pb_head_delivered(c, pb, l, cum))
			continue;
		if (ipk_tcp_sb_sacked_at(&cur, pb->seq, end))
			continue; /* delivered before */
		if (ipk_seq_lt(end, fack) && (pb->xmit == 1 || (s && rtx_too_soon(ctx, c, s, pb))))
			reorder_seen(ctx, c, pb, s != NULL);
		if (s && cum_rtx_unproven(c, s, pb))
			continue;
		rack_update(ctx, c, pb);
	}
}

IPK_HOT void ipk_tcp_rack_delivered(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t l, uint32_t r,
                            int cum)
{
	if (!ipk_tcp_sb(c) || !ctx->cfg.tcp_rack)
		return;
	delivered(ctx, c, NULL, l, r, cum ? ipk_tcp_sb_fack(c) : l, cum);
}

void ipk_tcp_rack_acked(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s)
{
	if (!ipk_tcp_sb(c) || !ctx->cfg.tcp_rack)
		return;
	delivered(ctx, c, s, c->snd_una, s->h.ack, ipk_tcp_sb_fack(c), 1);
}

/* RFC 8985 §6.2 step 4: min_RTT / 4 per unit of reo_wnd_mult, at most SRTT. The
 * RFC's reo_wnd of 0 before reordering was seen is not taken: RFC 6675's DupThresh
 * rule (tcp_sb.c) covers that case, and a zero window resent segments whose SACK
 * the bounded scoreboard had not kept (tests/sim/test_sim_overshoot.c). */
static uint64_t reo_wnd(const struct ipk_conn *c)
{
	uint32_t min = ipk_tcp_min_rtt_us(c);
	uint64_t srtt = ipk_tcp_srtt_ns(c);
	uint64_t base = min ? (uint64_t)min * RACK_NS_PER_US : srtt;
	uint64_t w = base / 4u * (c->reo_mult ? c->reo_mult : 1u);

	return srtt && w > srtt ? srtt : w;
}

/* Was pb sent before the most recently delivered segment (§6.2 step 5)? Equal times
 * are the pbs of one segment (ipk_tcp_tx_stamp), ordered by sequence. */
static int sent_before(const struct ipk_pb *rec, const struct ipk_pb *pb)
{
	return pb->t < IPK_SB_RACK_TS(rec) ||
	       (pb->t == IPK_SB_RACK_TS(rec) && ipk_seq_lt(pb->seq + pb->len, IPK_SB_RACK_END(rec)));
}

/* A lost retransmission is marked on its pb, and only that hole is offered again
 * (tcp_sb.c). Moving HIGH_RXT back to it instead re-offered every hole above it
 * whose retransmission was still in flight: spurious retransmissions by the
 * hundred after a large loss. */
static void mark_pb_lost(struct ipk_conn *c, struct ipk_pb *pb)
{
	if ((pb->xmit == 2 || pb->xmit == IPK_TCP_XMIT_AGAIN) &&
	    ipk_seq_lt(pb->seq, IPK_SB_HIGH_RXT(ipk_tcp_sb(c)))) {
		pb->xmit = IPK_TCP_XMIT_LOST;
		c->fl |= IPK_TCPF_RTX_LOST;
	}
	ipk_tcp_sb_mark_lost(c, pb->seq + pb->len);
}

uint64_t ipk_tcp_rack_detect(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	struct ipk_pb *rec = ipk_tcp_sb(c), *pb;
	const struct ipk_pb *cur = ipk_tcp_sb_ranges(c);
	uint64_t wait = 0, rtt, reo;

	if (!rec || !ctx->cfg.tcp_rack || IPK_SB_RACK_RTT(rec) == 0)
		return 0; /* nothing delivered yet in this flight */
	rtt = (uint64_t)IPK_SB_RACK_RTT(rec) * RACK_NS_PER_US;
	reo = reo_wnd(c);
	for (pb = c->sq_head; pb && ipk_seq_lt(pb->seq, c->snd_max); pb = pb->next) {
		uint64_t due = pb->t + rtt + reo;

		if (pb->xmit == 0)
			break;
		if (!sent_before(rec, pb) || ipk_tcp_sb_sacked_at(&cur, pb->seq, pb->seq + pb->len))
			continue;
		if (due <= ctx->now)
			mark_pb_lost(c, pb);
		else if (due - ctx->now > wait)
			wait = due - ctx->now; /* §6.2 step 5: the latest of the pending ones */
	}
	return wait;
}

/*
 * RFC 8985 §7.2 arms no PTO during loss recovery, where RACK finds the losses and
 * ACKs clock out their repair. Neither works once the ACKs stop: the ACK of the last
 * retransmission of a recovery with nothing more to send, or the one ACK of a burst
 * while lost segments wait for room in cwnd. Lost, it cost an RTO (200 ms and
 * go-back-N after it). ipkit probes then too, with a lost segment when one waits
 * (tlp_send). A receiver that ACKs once per burst, as Linux does when its reader
 * drains the socket per burst, makes that single ACK common: through ipk-relay at
 * 5% loss each way, ~10 RTOs in 8 MiB.
 */
static IPK_ALWAYS_INLINE int tlp_allowed(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	if (!ipk_tcp_tlp_allowed_est(ctx, c))
		return 0;
	/* After our FIN too (FIN-WAIT-1, CLOSING, LAST-ACK), as Linux does: the last
	 * flight of a transfer and its FIN are a tail like any other, and without a
	 * probe a lost one waited for the RTO (through ipk-relay at 1% loss, one
	 * 32 MiB transfer in three). */
	return ((1u << c->state) & TLP_STATES) != 0;
}

/* RFC 8985 §7.2: PTO = 2 * SRTT, plus the peer's delayed-ACK time when only one
 * segment is out. */
static uint64_t tlp_pto(const struct ipk_conn *c)
{
	uint64_t pto = 2u * ipk_tcp_srtt_ns(c);

	if (c->snd_max - c->snd_una <= c->mss)
		pto += WC_DELACK_NS;
	return IPK_MAX(pto, PTO_MIN_NS);
}

/* The RTO, or the PTO pto when it comes first (TLP allowed). */
static void arm_rto_or_pto(struct ipk_ctx *ctx, struct ipk_conn *c, uint64_t pto)
{
	uint64_t rto = ipk_tcp_rto_ns(c);

	c->rtx_at = ipk_tcp_us_at(ctx, pto && pto < rto ? pto : rto);
	c->rtx_kind = pto && pto < rto ? IPK_TCP_RTX_TLP : IPK_TCP_RTX_RTO;
}

/* The reordering timer when one is due, else the PTO when it comes before the RTO,
 * else the RTO. The earliest of them, compared as delays from now. */
IPK_HOT void ipk_tcp_arm_loss_timer(struct ipk_ctx *ctx, struct ipk_conn *c, uint64_t reo)
{
	if (reo && reo < ipk_tcp_rto_ns(c)) {
		c->rtx_at = ipk_tcp_us_at(ctx, reo);
		c->rtx_kind = IPK_TCP_RTX_REO;
		return;
	}
	arm_rto_or_pto(ctx, c, tlp_allowed(ctx, c) ? tlp_pto(c) : 0);
}

/* See ipk_tcp_loss_lazy_ok (tcp.h). The choice between RTO and PTO is made now, as
 * arm_loss_timer would; nothing it depends on changes before the timer is settled
 * without an ACK of new data (which stops or re-arms it) or another send (which
 * settles it first). */
IPK_HOT int ipk_tcp_loss_restart_lazy(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	if (!ipk_tcp_loss_lazy_ok(c))
		return 0;
	c->rtx_kind = tlp_allowed(ctx, c) ? IPK_TCP_RTX_LAZY_TLP : IPK_TCP_RTX_LAZY_RTO;
	return 1;
}

void ipk_tcp_loss_settle(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	/* a whole µs after rtt_t's tick starts: never before the send's own time */
	uint64_t sent = ipk_tcp_us_ns(ctx, c->rtt_t) + IPK_TCP_NS_PER_US - 1u;
	uint64_t rto = ipk_tcp_rto_ns(c), t = rto;
	uint8_t kind = c->rtx_kind;

	if (kind == IPK_TCP_RTX_IDLE) {
		c->rtx_at = 0;
		return;
	}
	c->rtx_kind = IPK_TCP_RTX_RTO;
	if (kind == IPK_TCP_RTX_LAZY_TLP && tlp_pto(c) < rto) {
		t = tlp_pto(c);
		c->rtx_kind = IPK_TCP_RTX_TLP;
	}
	c->rtx_at = ipk_tcp_tick_at(sent, t, IPK_TCP_NS_PER_US);
}

/* New data went out: the PTO runs from the latest transmission (RFC 8985 §7.2), and
 * may now replace an RTO armed when one segment was out. */
IPK_HOT void ipk_tcp_tlp_rearm(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	uint64_t pto;

	if (c->rtx_kind > IPK_TCP_RTX_IDLE)
		ipk_tcp_loss_settle(ctx, c);
	if (c->rtx_kind == IPK_TCP_RTX_REO || !tlp_allowed(ctx, c))
		return;
	pto = tlp_pto(c);
	if (c->rtx_kind == IPK_TCP_RTX_TLP || ctx->now + pto < ipk_tcp_us_ns(ctx, c->rtx_at))
		arm_rto_or_pto(ctx, c, pto);
}

static void probe_sent(struct ipk_ctx *ctx, struct ipk_conn *c, int new_data)
{
	c->fl |= IPK_TCPF_TLP_OUT;
	ctx->cnt.tcp_tlp_probes++;
	ctx->cnt.tcp_tlp_new_data += new_data != 0;
	ctx->cnt.tcp_tlp_recovery += (c->fl & IPK_TCPF_SACK_RCVY) != 0;
}

/*
 * RFC 8985 §7.3: the probe is new data when some is queued and the peer's window
 * takes it (tlp_send_new), as Linux's tcp_send_loss_probe does; else the last segment
 * sent, sent again, so that its ACK (with SACK) reveals a lost tail. In a SACK
 * recovery with a lost segment waiting, that segment is the probe
 * (ipk_tcp_sb_probe_lost). Neither of the first two can be a spurious retransmission.
 */
/* Segments a new-data probe sends, when that much is queued and the window allows:
 * an odd number, so that the receiver's ACK of the first two (RFC 5681 §4.2) is
 * followed by a delayed ACK of the third, a second chance before the RTO when the
 * first is lost (tlp_send_new). */
#define TLP_NEW_SEGS 3u

/*
 * The probe as new data: up to TLP_NEW_SEGS new segments past snd_max, beyond cwnd
 * (§7.3 sends the probe whatever cwnd says), within the peer's window. The last
 * segment sent again was D-SACKed whenever the flight had arrived and only its ACK
 * was late or lost: through ipk-relay at 5% loss each way, 16 MiB to Linux, 62 of 65
 * spurious retransmissions were such probes (docs/loss-rto-traces.md), 41 after
 * Linux's ACK of the whole flight was lost, 21 while Linux still held a delayed ACK
 * for the last segment. Two segments, not the RFC's one: a receiver ACKs every
 * second full-sized segment at once (RFC 5681 §4.2) but may hold the ACK of a single
 * in-order one (Linux 40 ms), which is the probe's lot when the flight's ACK was
 * lost: one new segment cut the spurious retransmissions as much but cost a third of
 * the goodput (38/32 Mbit/s against 46-60/42-55, RTO episodes 6/6 against 3-7), and
 * Linux, probing with one, waits the same 44 ms (linux-linux trace, seed 4242).
 * Three, not two: the probe draws one ACK, and RFC 8985 §7.3 re-arms the RTO, not
 * another probe, so when the flight's one ACK and then the probe's are lost the
 * RTO repairs the tail. A third segment is ACKed on its own by the delayed-ACK timer
 * (40 ms in Linux and ipkit, well before the 200 ms RTO) unless the receiver takes
 * the three in one batch. Through ipk-relay at 5% loss each way, 32 MiB to Linux,
 * seeds 6001-6004, 16 runs each way: of the probes whose first ACK was lost 47 of
 * 122 drew no other ACK against 83 of 153 with two, RTO episodes 63 against 86,
 * goodput and D-SACKed retransmissions unchanged or better; at 1%, seed 4242, the
 * event behind issue 16 target (a)'s failures (docs/loss-rto-traces.md) no longer
 * ends in an RTO.
 * Not after an RTO (snd_nxt below snd_max: go-back-N resends first). Returns the
 * bytes sent, 0 when none went (nothing new, or no window), < 0 on a send error.
 */
static int tlp_send_new(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t end)
{
	uint32_t n, out, k;
	int sent = 0, rc;

	for (k = 0; k < TLP_NEW_SEGS; k++) {
		if (c->snd_nxt != c->snd_max || !ipk_seq_lt(c->snd_max, end))
			break;
		out = c->snd_max - c->snd_una;
		n = IPK_MIN(c->mss, end - c->snd_max);
		if (out > c->snd_wnd || c->snd_wnd - out < n)
			break; /* RFC 8985 §7.3: only when the receive window allows it */
		rc = ipk_tcp_xmit(ctx, c, c->snd_max, n, IPK_TCP_X_FIN);
		if (rc <= 0)
			return sent ? sent : rc;
		c->snd_nxt += (uint32_t)rc;
		sent += rc;
	}
	return sent;
}

static void tlp_send(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	uint32_t end = ipk_tcp_data_end(c), top = ipk_seq_lt(c->snd_max, end) ? c->snd_max : end;
	uint32_t n;
	int rc = ipk_tcp_sb_probe_lost(ctx, c);

	if (rc != 0) {
		if (rc > 0)
			probe_sent(ctx, c, 0);
		return;
	}
	rc = tlp_send_new(ctx, c, end);
	if (rc != 0) {
		if (rc > 0)
			probe_sent(ctx, c, 1);
		return;
	}
	if (ipk_seq_lt(c->snd_una, top)) {
		n = IPK_MIN(c->mss, top - c->snd_una);
		rc = ipk_tcp_xmit(ctx, c, top - n, n, IPK_TCP_X_FIN);
	} else {
		rc = ipk_tcp_xmit(ctx, c, end, 0, IPK_TCP_X_FIN);
	}
	if (rc >= 0)
		probe_sent(ctx, c, 0);
}

void ipk_tcp_rack_timer(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	uint8_t kind = c->rtx_kind;
	uint64_t reo;
	uint32_t was;

	c->rtx_kind = IPK_TCP_RTX_RTO;
	if (kind == IPK_TCP_RTX_TLP) {
		tlp_send(ctx, c);
		ipk_tcp_arm_rtx(ctx, c);
		return;
	}
	/* §6.3: the reordering timer expired; what it waited for is now lost. */
	reo = ipk_tcp_rack_detect(ctx, c);
	was = c->fl & IPK_TCPF_SACK_RCVY;
	ipk_tcp_sb_recover(ctx, c);
	/* A recovery entered here has no ACK to run PRR's first step, which releases
	 * the fast retransmission (RFC 6675 §5 (4.3)): cwnd stayed at ssthresh, often
	 * no more than pipe, nothing went out and the RTO repaired the loss. Run it
	 * with nothing delivered, as Linux's tcp_rack_reo_timeout does
	 * (tcp_cwnd_reduction). */
	if (!was && (c->fl & IPK_TCPF_SACK_RCVY)) {
		uint32_t pipe = ipk_tcp_sb_pipe(c);

		ipk_tcp_prr_ack(ctx, c, 0, pipe, pipe);
	}
	ipk_tcp_arm_loss_timer(ctx, c, reo);
}
