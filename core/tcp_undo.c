/*
 * Undo of a spurious SACK recovery (RFC 3708 §3 with RFC 2883 D-SACKs, as Linux's
 * undo_retrans / tcp_try_undo_dsack / tcp_undo_cwnd_reduction), and the log of
 * what was retransmitted that it needs.
 *
 * A D-SACK says a segment arrived twice. That proves a retransmission needless only
 * when the range was retransmitted: a network duplicate of an original is D-SACKed
 * too (RFC 2883 §4.2). So every retransmission is logged as a sequence range, and a
 * D-SACK counts (tcp_spurious_rtx, the reordering window's widening, the undo) only
 * when it covers a logged range, which it then consumes.
 *
 * Entering a SACK recovery keeps cwnd, ssthresh and CUBIC's W_max and counts the
 * episode's retransmitted segments from snd_una at entry (the undo marker). Each
 * D-SACK of one takes one off; at zero every retransmission of the episode was
 * needless (reordering or delay, not congestion) and the reduction is undone: at
 * once when the episode has ended, else when it ends (PRR owns cwnd while it runs).
 * An RTO cancels that undo, but arms its own (Eifel, RFC 3522, as Linux's
 * tcp_try_undo_loss with tcp_packet_delayed): with timestamps the first RTO of an
 * episode keeps cwnd, ssthresh and W_max as they are then (a recovery's reduction
 * before it stays: the recovery's own undo is cancelled) and the TSval its
 * retransmission carries (or an earlier retransmission's still outstanding, as
 * Linux's retrans_stamp).
 * The first ACK that then advances snd_una decides (RFC 3522 §3): a TSecr older
 * than that TSval acknowledges an original, so the timeout was spurious (a delayed
 * ACK, not a loss); the reduction is undone, the rest of the flight is no longer
 * taken as lost, and tcp_rto_undo counts it. Without timestamps F-RTO (RFC 5682,
 * below) decides instead. Without SACK there is no scoreboard to hang the record
 * on, and no undo.
 *
 * The state lives in one pool descriptor hung off the scoreboard record (its pkt
 * field), with the logged ranges on its next chain, at most IPK_TCP_UNDO_LOG_MAX (the oldest
 * is dropped first). It goes back to the pool with the scoreboard, when nothing is
 * outstanding: a D-SACK arriving after that finds no log and counts nothing.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"


/* The undo record's fields */
#define UNDO_MARKER(u) ((u)->seq)   /* snd_una when the recovery began */
#define UNDO_RETRANS(u) ((u)->len)  /* segments resent since, not yet D-SACKed */
#define UNDO_RTO_TS(u) ((u)->len)   /* with UNDO_F_RTO: TSval of the first retransmission */
#define UNDO_CWND(u) ((u)->off)     /* cwnd before the reduction */
#define UNDO_SSTHRESH(u) ((u)->aux) /* ssthresh before it */
#define UNDO_WMAX(u) ((u)->t)       /* CUBIC W_max before it */
#define UNDO_FLAGS(u) ((u)->xmit)
#define UNDO_NLOG(u) ((u)->pad_)    /* ranges on the next chain */
#define UNDO_F_ARMED 0x1u   /* a recovery's prior state is kept */
#define UNDO_F_PENDING 0x2u /* all its retransmissions were D-SACKed: undo at its end */
#define UNDO_F_RTO 0x4u     /* an RTO's prior state is kept (Eifel, RFC 3522) */
/* F-RTO (RFC 5682, below): steps 2-3 run, c->recover being its "recover"; step 2b
 * passed (new data, no retransmission); UNDO_RETRANS counts the RTO episode's
 * retransmissions for a D-SACK undo */
#define UNDO_F_FRTO 0x8u
#define UNDO_F_FRTO_NEW 0x10u
#define UNDO_F_FRTO_DS 0x20u

static struct ipk_pb *undo_rec(const struct ipk_conn *c)
{
	struct ipk_pb *sb = ipk_tcp_sb(c);

	return sb ? (struct ipk_pb *)sb->pkt : NULL;
}

static struct ipk_pb *undo_get(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	struct ipk_pb *sb = ipk_tcp_sb_get(ctx, c), *u;

	if (!sb)
		return NULL;
	if (sb->pkt)
		return (struct ipk_pb *)sb->pkt;
	u = ipk_pb_get(ctx);
	if (!u)
		return NULL;
	u->next = NULL;
	u->pkt = NULL;
	UNDO_FLAGS(u) = 0;
	UNDO_NLOG(u) = 0;
	UNDO_RETRANS(u) = 0;
	sb->pkt = u;
	return u;
}

void ipk_tcp_undo_free(struct ipk_ctx *ctx, struct ipk_pb *sb)
{
	struct ipk_pb *u = (struct ipk_pb *)sb->pkt;

	if (!u)
		return;
	while (u->next) {
		struct ipk_pb *p = u->next;

		u->next = p->next;
		ipk_pb_put(ctx, p);
	}
	ipk_pb_put(ctx, u);
	sb->pkt = NULL;
}

static uint32_t segs(const struct ipk_conn *c, uint32_t len)
{
	return c->mss ? (len + c->mss - 1u) / c->mss : 1u;
}

static struct ipk_pb *log_tail(struct ipk_pb *u)
{
	struct ipk_pb *p = u->next;

	while (p && p->next)
		p = p->next;
	return p;
}

/* Append [seq, seq + len) to the log, merged with the newest range when they touch. */
static void log_add(struct ipk_ctx *ctx, struct ipk_pb *u, uint32_t seq, uint32_t len)
{
	struct ipk_pb *t = log_tail(u), *p;

	if (t && ipk_seq_le(t->seq, seq) && ipk_seq_le(seq, t->seq + t->len)) {
		if (ipk_seq_gt(seq + len, t->seq + t->len))
			t->len = seq + len - t->seq;
		return;
	}
	if (UNDO_NLOG(u) >= IPK_TCP_UNDO_LOG_MAX) {
		p = u->next; /* the oldest is reused */
		u->next = p->next;
		UNDO_NLOG(u)--;
		t = log_tail(u);
	} else if ((p = ipk_pb_get(ctx)) == NULL) {
		return;
	}
	p->seq = seq;
	p->len = len;
	p->next = NULL;
	if (t)
		t->next = p;
	else
		u->next = p;
	UNDO_NLOG(u)++;
}

void ipk_tcp_undo_sent(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t seq, uint32_t len)
{
	struct ipk_pb *u;

	/* No scoreboard is drawn for this alone: a probe or an RTO before any SACK
	 * goes unlogged (its D-SACK then counts nothing) rather than put the flight on
	 * the scoreboard's paths. */
	if (!ipk_tcp_sb(c) || (u = undo_get(ctx, c)) == NULL)
		return;
	log_add(ctx, u, seq, len);
	if ((UNDO_FLAGS(u) & (UNDO_F_ARMED | UNDO_F_FRTO_DS)) && ipk_seq_ge(seq, UNDO_MARKER(u)))
		UNDO_RETRANS(u) += segs(c, len);
}

void ipk_tcp_undo_arm(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	struct ipk_pb *u = undo_get(ctx, c);

	if (!u)
		return;
	UNDO_FLAGS(u) = UNDO_F_ARMED;
	UNDO_MARKER(u) = c->snd_una;
	UNDO_RETRANS(u) = 0;
	UNDO_CWND(u) = c->cwnd;
	UNDO_SSTHRESH(u) = c->ssthresh;
	UNDO_WMAX(u) = c->cc.cubic.w_max;
}

void ipk_tcp_undo_cancel(struct ipk_conn *c)
{
	struct ipk_pb *u = undo_rec(c);

	if (u)
		UNDO_FLAGS(u) &= ~(UNDO_F_ARMED | UNDO_F_PENDING);
}

/* RFC 3708 §3 / Linux tcp_undo_cwnd_reduction: the reduction was needless. CUBIC's
 * W_max comes back too, and a new epoch starts from the restored window (RFC 9438
 * §4.9). */
static void undo_restore(struct ipk_conn *c, struct ipk_pb *u)
{
	c->cwnd = IPK_MAX(c->cwnd, UNDO_CWND(u));
	c->ssthresh = IPK_MAX(c->ssthresh, UNDO_SSTHRESH(u));
	if (c->cc_algo == IPK_CC_CUBIC && UNDO_WMAX(u) > c->cc.cubic.w_max)
		c->cc.cubic.w_max = (uint32_t)UNDO_WMAX(u);
	c->fl &= ~IPK_TCPF_CC_EPOCH;
	UNDO_FLAGS(u) = 0;
}

static void undo_apply(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_pb *u)
{
	undo_restore(c, u);
	ctx->cnt.tcp_dsack_undo++;
}

/* Linux's retrans_stamp: the TSval of the earliest retransmission still outstanding
 * (a tail probe's, a SACK recovery's: pb->t, the last send, as RACK's eifel reads
 * it), else the RTO's own, which leaves in this pass at this ms tick (tcp_timer.c
 * fire). An ACK echoing an earlier retransmission proves a loss, not a spurious
 * timeout. The walk is over the sent part of the send queue, on an RTO only. */
static uint32_t first_rtx_ts(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	uint32_t ts = ipk_tcp_ts_now(ctx, c), v;
	const struct ipk_pb *pb;

	for (pb = c->sq_head; pb && ipk_seq_lt(pb->seq, c->snd_max); pb = pb->next) {
		if (pb->xmit < 2 || !ipk_seq_gt(pb->seq + pb->len, c->snd_una))
			continue;
		v = (uint32_t)(pb->t / 1000000u) + c->iss;
		if (ipk_seq_lt(v, ts))
			ts = v;
	}
	return ts;
}

/* RFC 3522 §2: called on the first RTO of an episode, before the reduction. The
 * state kept is this moment's, never an earlier recovery's (ARMED outlives its
 * recovery for late D-SACKs, and the ACK that proves the RTO spurious may echo that
 * recovery's own, needed, retransmission). */
void ipk_tcp_undo_rto_arm(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	struct ipk_pb *u = undo_get(ctx, c);

	if (!u)
		return;
	UNDO_CWND(u) = c->cwnd;
	UNDO_SSTHRESH(u) = c->ssthresh;
	UNDO_WMAX(u) = c->cc.cubic.w_max;
	UNDO_FLAGS(u) = UNDO_F_RTO;
	UNDO_MARKER(u) = c->snd_una;
	UNDO_RTO_TS(u) = first_rtx_ts(ctx, c);
}

/* RFC 3522 §3: the first ACK of new data after the RTO decides. Its TSecr echoes the
 * segment that advanced the peer's left edge (RFC 7323 §4.3); older than the
 * retransmission's TSval, it is the original's: the timeout was spurious. */
void ipk_tcp_undo_rto_ack(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s)
{
	struct ipk_pb *u = undo_rec(c), *sb = ipk_tcp_sb(c);

	if (!u || !(UNDO_FLAGS(u) & UNDO_F_RTO))
		return;
	UNDO_FLAGS(u) &= ~UNDO_F_RTO;
	if (!(c->fl & IPK_TCPF_TS_OK) || !s->o.has_ts || s->o.tsecr == 0 ||
	    !ipk_seq_lt(s->o.tsecr, UNDO_RTO_TS(u)))
		return;
	undo_restore(c, u);
	/* RFC 3522 §1 / Linux: the flight is not lost; only what the RTO already resent
	 * stays resent (RACK may still find real losses). */
	if (ipk_seq_lt(IPK_SB_HIGH_RXT(sb), IPK_SB_LOST_END(sb)))
		IPK_SB_LOST_END(sb) = IPK_SB_HIGH_RXT(sb);
	ctx->cnt.tcp_rto_undo++;
}

/* ------------------------------------------- F-RTO (RFC 5682 §3.1), no timestamps
 *
 * Without timestamps Eifel has no evidence; F-RTO finds it in what the ACKs after
 * the RTO acknowledge (as Linux's tcp_frto, on by default there). Step 1: the RTO
 * resends the first unacknowledged segment (as always) and keeps cwnd, ssthresh and
 * W_max, with "recover" = snd_max. Step 2: the first ACK that advances snd_una lets
 * new data go instead of the rest of the flight (retransmissions are held). Step 3:
 * the next ACK decides. A cumulative ACK of data sent before the RTO and never
 * resent (above HighRxt) says the flight was not lost: the timeout was spurious and
 * is undone. A duplicate ACK or one that acknowledges only resent data says it was
 * lost: the RTO recovery goes on as without F-RTO. A SACK of old data leaves a hole
 * below it (at snd_una), so it proves nothing and counts as a loss (more cautious
 * than Linux, which undoes then and may enter fast recovery at once). One ACK of the
 * whole flight leaves F-RTO nothing to test; a D-SACK of every retransmission of the
 * episode (and of those outstanding at the RTO) then proves it spurious (RFC 3708). */

/* Retransmitted segments still outstanding (Linux's retrans_out at tcp_init_undo):
 * a D-SACK of one of them then counts down too. Counted per pb, at least as many
 * as the segments: the undo can only come later, never wrongly. */
static uint32_t rtx_outstanding(const struct ipk_conn *c)
{
	const struct ipk_pb *pb;
	uint32_t n = 0;

	for (pb = c->sq_head; pb && ipk_seq_lt(pb->seq, c->snd_max); pb = pb->next) {
		if ((pb->xmit == 2u || pb->xmit == IPK_TCP_XMIT_AGAIN) &&
		    ipk_seq_gt(pb->seq + pb->len, c->snd_una))
			n += segs(c, pb->len);
	}
	return n;
}

/* RFC 5682 §3.1 step 1, called on every RTO of a SACK connection without
 * timestamps, before cwnd is cut. Not entered during a loss recovery, SACK or RTO
 * (snd_una below the recovery point), as Linux's tcp_enter_loss; a second timeout
 * ends steps 2-3 ("go to step 1", which then finds the RTO recovery running), but
 * its retransmission joins the D-SACK count (RFC 3708), as Linux's undo_retrans. */
void ipk_tcp_frto_on_rto(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	struct ipk_pb *u = undo_rec(c);

	if (u) /* a second timeout: steps 2-3 end, the D-SACK count goes on */
		UNDO_FLAGS(u) &= ~(UNDO_F_FRTO | UNDO_F_FRTO_NEW | (c->nrtx ? 0u : UNDO_F_FRTO_DS));
	if (c->nrtx != 0 || !ctx->cfg.tcp_frto || (c->fl & IPK_TCPF_SACK_RCVY) ||
	    ipk_seq_lt(c->snd_una, c->recover))
		return;
	if ((u = undo_get(ctx, c)) == NULL)
		return;
	UNDO_CWND(u) = c->cwnd;
	UNDO_SSTHRESH(u) = c->ssthresh;
	UNDO_WMAX(u) = c->cc.cubic.w_max;
	UNDO_FLAGS(u) = UNDO_F_FRTO | UNDO_F_FRTO_DS;
	UNDO_MARKER(u) = c->snd_una;
	UNDO_RETRANS(u) = rtx_outstanding(c);
}

/* Step 2b holds the retransmissions of the rest of the flight (tcp_sb.c output). */
int ipk_tcp_frto_holds(const struct ipk_conn *c)
{
	const struct ipk_pb *u = undo_rec(c);

	return u && (UNDO_FLAGS(u) & UNDO_F_FRTO_NEW) && ipk_seq_lt(c->snd_una, c->recover);
}

/* The RTO was spurious: cwnd, ssthresh and W_max come back, the flight is no longer
 * lost, and a loss found later starts a recovery of its own. */
static void frto_undo(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_pb *u)
{
	struct ipk_pb *sb = ipk_tcp_sb(c);

	undo_restore(c, u);
	if (ipk_seq_lt(IPK_SB_HIGH_RXT(sb), IPK_SB_LOST_END(sb)))
		IPK_SB_LOST_END(sb) = IPK_SB_HIGH_RXT(sb);
	c->recover = c->snd_una;
	ctx->cnt.tcp_frto_undo++;
}

/* RFC 3708 §3 for the RTO episode (Linux's undo_retrans in tcp_try_undo_loss): every
 * retransmission since it, and every one outstanding then, was D-SACKed, so none
 * was needed. This catches what step 2a cannot: one ACK for the whole flight, when
 * the RTO's retransmission was a duplicate. Returns 1 when it took the D-SACK. */
static int frto_count_down(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_pb *u, uint32_t l,
                           uint32_t got)
{
	if (!(UNDO_FLAGS(u) & UNDO_F_FRTO_DS))
		return 0;
	if (ipk_seq_lt(l, UNDO_MARKER(u)) || UNDO_RETRANS(u) == 0)
		return 1;
	UNDO_RETRANS(u) -= IPK_MIN(segs(c, got), UNDO_RETRANS(u));
	if (UNDO_RETRANS(u) == 0)
		frto_undo(ctx, c, u);
	return 1;
}

/* Step 3 (a)/(b): spurious when the cumulative ACK moved over never-resent data
 * below "recover". */
static void frto_decide(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_pb *u, uint32_t prev_una)
{
	struct ipk_pb *sb = ipk_tcp_sb(c);
	uint32_t from = prev_una, to = c->recover;

	UNDO_FLAGS(u) &= ~(UNDO_F_FRTO | UNDO_F_FRTO_NEW);
	if (ipk_seq_lt(from, IPK_SB_HIGH_RXT(sb)))
		from = IPK_SB_HIGH_RXT(sb);
	if (ipk_seq_lt(c->snd_una, to))
		to = c->snd_una;
	if (ipk_seq_lt(from, to))
		frto_undo(ctx, c, u); /* (b); else (a): the loss was real */
}

/* Steps 2 and 3 on an ACK, from the scoreboard's ACK processing before it is trimmed
 * (HighRxt still marks what was resent). prev_una: snd_una before this ACK; dup: a
 * duplicate ACK (RFC 5681 §2). Other ACKs (window updates) are ignored (step 3). */
void ipk_tcp_frto_ack(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t prev_una, int dup)
{
	struct ipk_pb *u = undo_rec(c);

	if (!u || !(UNDO_FLAGS(u) & UNDO_F_FRTO))
		return;
	if (c->snd_una == prev_una && !dup)
		return;
	if ((UNDO_FLAGS(u) & UNDO_F_FRTO_NEW) && c->snd_max != c->recover) {
		frto_decide(ctx, c, u, prev_una);
		return;
	}
	/* step 2 (again, when the window let nothing new go): duplicate ACKs wait */
	if (c->snd_una == prev_una)
		return;
	if (ipk_seq_lt(c->snd_una, c->recover) &&
	    ipk_seq_lt(c->snd_max, ipk_tcp_data_end(c)) &&
	    ipk_seq_lt(c->snd_max, c->snd_una + c->snd_wnd)) {
		UNDO_FLAGS(u) |= UNDO_F_FRTO_NEW; /* (b): new data next */
		return;
	}
	/* (a) all of the flight acknowledged, or (b) nothing new to send: conventional */
	UNDO_FLAGS(u) &= ~(UNDO_F_FRTO | UNDO_F_FRTO_NEW);
}

void ipk_tcp_undo_rcvy_exit(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	struct ipk_pb *u = undo_rec(c);

	if (u && (UNDO_FLAGS(u) & UNDO_F_PENDING))
		undo_apply(ctx, c, u);
}

/* Take [l, r) out of the logged range p; returns the bytes it covered. A D-SACK in
 * the middle of a range keeps the larger side only (no descriptor is drawn here):
 * the other side's D-SACK will then count nothing, never twice. */
static uint32_t log_take(struct ipk_pb *p, uint32_t l, uint32_t r)
{
	uint32_t e = p->seq + p->len;
	uint32_t a = ipk_seq_gt(l, p->seq) ? l : p->seq, b = ipk_seq_lt(r, e) ? r : e;

	if (!ipk_seq_lt(a, b))
		return 0;
	if (a - p->seq >= e - b) {
		p->len = a - p->seq; /* keep the part below */
	} else {
		p->seq = b;
		p->len = e - b;
	}
	return b - a;
}

/* The D-SACKed range covered this much retransmitted data, consumed from the log. */
static uint32_t log_match(struct ipk_ctx *ctx, struct ipk_pb *u, uint32_t l, uint32_t r)
{
	struct ipk_pb **pp = &u->next, *p;
	uint32_t got = 0;

	while ((p = *pp) != NULL) {
		got += log_take(p, l, r);
		if (p->len == 0) {
			*pp = p->next;
			ipk_pb_put(ctx, p);
			UNDO_NLOG(u)--;
			continue;
		}
		pp = &p->next;
	}
	return got;
}

/* RFC 3708 §3: one D-SACKed retransmission of the episode fewer; none left: undo. */
static void count_down(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_pb *u, uint32_t l,
                       uint32_t got)
{
	if (!(UNDO_FLAGS(u) & UNDO_F_ARMED) || (UNDO_FLAGS(u) & UNDO_F_PENDING) ||
	    ipk_seq_lt(l, UNDO_MARKER(u)) || UNDO_RETRANS(u) == 0)
		return;
	UNDO_RETRANS(u) -= IPK_MIN(segs(c, got), UNDO_RETRANS(u));
	if (UNDO_RETRANS(u) != 0)
		return;
	if (c->fl & IPK_TCPF_SACK_RCVY)
		UNDO_FLAGS(u) |= UNDO_F_PENDING;
	else
		undo_apply(ctx, c, u);
}

int ipk_tcp_undo_dsack(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t l, uint32_t r)
{
	struct ipk_pb *u = undo_rec(c);
	uint32_t got;

	if (!u || (got = log_match(ctx, u, l, r)) == 0)
		return 0;
	if (!frto_count_down(ctx, c, u, l, got))
		count_down(ctx, c, u, l, got);
	return 1;
}
