/*
 * RACK-TLP (RFC 8985): time-based loss detection from per-segment transmit times
 * (kept on the send-queue pbs: pb->t last sent, pb->xmit 1 = once, 2 = again,
 * IPK_TCP_XMIT_LOST = the retransmission was lost too), the
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
 * reo_wnd_mult (reo_wnd is bounded by SRTT anyway). */
#define REO_PERSIST 16u
#define REO_MULT_MAX 16u
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
	if (c->reo_mult < REO_MULT_MAX)
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
			pb->xmit = 2;
		else if (pb->xmit == 0)
			pb->xmit = 1;
	}
}

/* RFC 8985 §6.2 step 1-2 for one delivered segment. */
static void rack_update(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_pb *pb)
{
	struct ipk_pb *rec = ipk_tcp_sb(c);
	/* to the nearest µs: a stamp may run a few ns ahead of now (ipk_tcp_tx_stamp) */
	uint64_t rtt = (ctx->now > pb->t ? ctx->now - pb->t : 0u) + RACK_NS_PER_US / 2u;
	uint32_t end = pb->seq + pb->len, us, min = ipk_tcp_min_rtt_us(c);

	/* Step 2: an ACK for a retransmitted segment sooner than min_RTT is for the
	 * original; its time says nothing about the retransmission. */
	if (pb->xmit > 1 && min && rtt < (uint64_t)min * RACK_NS_PER_US)
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
 * §6.2 step 3, RACK.reordering_seen: the cumulative ACK covered data sent once that
 * lay below RACK.fack (the highest SACKed byte), so it arrived after later data.
 * Only the cumulative ACK is checked: SACK blocks ride on ACKs that can be lost and
 * a receiver repeats only its three or four latest blocks, so a range first heard
 * of below RACK.fack is often old news, not late data (on a path that only loses,
 * 10 Mbit/s and 1%, the SACK check fired and turned the DupThresh rule off).
 */
IPK_HOT void ipk_tcp_rack_delivered(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t l, uint32_t r,
                            int cum)
{
	const struct ipk_pb *pb, *cur = ipk_tcp_sb_ranges(c);
	uint32_t fack;

	if (!ipk_tcp_sb(c) || !ctx->cfg.tcp_rack)
		return;
	fack = cum ? ipk_tcp_sb_fack(c) : l;
	for (pb = c->sq_head; pb && ipk_seq_lt(pb->seq, r); pb = pb->next) {
		uint32_t end = pb->seq + pb->len;

		if (ipk_seq_le(end, l) || ipk_seq_gt(end, r) || pb->xmit == 0 ||
		    !pb_head_delivered(c, pb, l, cum))
			continue;
		if (ipk_tcp_sb_sacked_at(&cur, pb->seq, end))
			continue; /* delivered before */
		if (pb->xmit == 1 && ipk_seq_lt(end, fack))
			c->fl |= IPK_TCPF_REORDER;
		rack_update(ctx, c, pb);
	}
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
	if (pb->xmit == 2 && ipk_seq_lt(pb->seq, IPK_SB_HIGH_RXT(ipk_tcp_sb(c)))) {
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

static void probe_sent(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	c->fl |= IPK_TCPF_TLP_OUT;
	ctx->cnt.tcp_tlp_probes++;
}

/*
 * RFC 8985 §7.3: the probe is the last segment sent, sent again, so that its ACK
 * (with SACK) reveals a lost tail. The RFC prefers a new segment when the window
 * allows; ipkit does not take it. A new segment that arrives in order is a single
 * segment, which a delayed-ACK receiver holds (Linux 40 ms, RFC 9293 up to 500 ms)
 * just when the ACK matters most: the flight arrived and only its last ACK was lost.
 * A duplicate is not acceptable data, so the receiver answers it at once (RFC 9293
 * §3.10.7.4, with a D-SACK per RFC 2883). Through ipk-relay at 5% loss each way,
 * new-data probes to Linux waited 40 ms for their ACK about 35 times in 8 MiB.
 * In a SACK recovery with a lost segment waiting, that segment is the probe
 * (ipk_tcp_sb_probe_lost).
 */
static void tlp_send(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	uint32_t end = ipk_tcp_data_end(c), top = ipk_seq_lt(c->snd_max, end) ? c->snd_max : end;
	uint32_t n;
	int rc = ipk_tcp_sb_probe_lost(ctx, c);

	if (rc != 0) {
		if (rc > 0)
			probe_sent(ctx, c);
		return;
	}
	if (ipk_seq_lt(c->snd_una, top)) {
		n = IPK_MIN(c->mss, top - c->snd_una);
		rc = ipk_tcp_xmit(ctx, c, top - n, n, IPK_TCP_X_FIN);
	} else {
		rc = ipk_tcp_xmit(ctx, c, end, 0, IPK_TCP_X_FIN);
	}
	if (rc >= 0)
		probe_sent(ctx, c);
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
