/*
 * The sender's SACK scoreboard (RFC 2018 §5) and SACK-based loss recovery
 * (RFC 6675): SACKed ranges kept in pool descriptors, the lost boundary (IsLost and
 * RACK), pipe, and NextSeg rule 1 (retransmit only lost holes).
 *
 * Holes are the unSACKed bytes between snd_una and snd_max. Two sequence numbers
 * describe them: holes below LOST_END are lost, holes below HIGH_RXT have been
 * retransmitted in this episode. Ranges beyond ipk_tcp_sb_cap() are not stored (the
 * data they cover is treated as not SACKed, which costs a needless retransmission,
 * never a wrong delivery), so the memory per connection is bounded: no more
 * descriptors than half the segments its send buffer holds. A cap well below that
 * (16 ranges, as before) forgot most SACKs after a slow-start overshoot, where a
 * drop-tail queue drops every other segment: pipe then counted delivered data as in
 * flight, recovery stalled and RACK resent data that had arrived.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

/* RFC 6675 §2 DupThresh */
#define DUP_THRESH 3u

static uint32_t rng_end(const struct ipk_pb *p)
{
	return p->seq + p->len;
}

struct ipk_pb *ipk_tcp_x_get(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	struct ipk_pb *x = c->x;

	if (x)
		return x;
	x = ipk_pb_get(ctx);
	if (!x)
		return NULL;
	x->next = NULL;
	x->pkt = NULL;
	IPK_RCVY_FLAGS(x) = 0;
	c->x = x;
	ipk_tcp_fast_clear(c);
	return x;
}

void ipk_tcp_x_trim(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	struct ipk_pb *x = c->x;

	if (!x || x->next || x->pkt || (IPK_RCVY_FLAGS(x) & IPK_RCVY_F_ON))
		return;
	c->x = NULL;
	ipk_pb_put(ctx, x);
}

static struct ipk_pb *rec_get(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	struct ipk_pb *r = ipk_tcp_sb(c), *x;

	if (r)
		return r;
	x = ipk_tcp_x_get(ctx, c);
	if (!x)
		return NULL;
	r = ipk_pb_get(ctx);
	if (!r) {
		ipk_tcp_x_trim(ctx, c);
		return NULL;
	}
	IPK_SB_HIGH_RXT(r) = c->snd_una;
	IPK_SB_LOST_END(r) = c->snd_una;
	IPK_SB_NRANGES(r) = 0;
	r->next = NULL;
	r->pkt = NULL;
	x->pkt = r;
	c->fl &= ~IPK_TCPF_DSACK_RND;
	return r;
}

struct ipk_pb *ipk_tcp_sb_get(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	return rec_get(ctx, c);
}

static void ranges_free(struct ipk_ctx *ctx, struct ipk_pb *r)
{
	while (r->next) {
		struct ipk_pb *p = r->next;

		r->next = p->next;
		ipk_pb_put(ctx, p);
	}
	IPK_SB_NRANGES(r) = 0;
}

void ipk_tcp_sb_free(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	struct ipk_pb *r = ipk_tcp_sb(c);

	if (!r)
		return;
	ranges_free(ctx, r);
	ipk_tcp_undo_free(ctx, r);
	ipk_pb_put(ctx, r);
	c->x->pkt = NULL;
	ipk_tcp_x_trim(ctx, c);
}

uint32_t ipk_tcp_sb_cap(const struct ipk_conn *c)
{
	uint32_t n = c->mss ? c->sndbuf / c->mss / 2u : 0u;

	return IPK_MIN(IPK_MAX(n, IPK_TCP_SB_MIN), IPK_TCP_SB_MAX);
}

uint32_t ipk_tcp_sb_fack(const struct ipk_conn *c)
{
	const struct ipk_pb *p;
	uint32_t f = c->snd_una;

	for (p = ipk_tcp_sb(c) ? ipk_tcp_sb(c)->next : NULL; p; p = p->next)
		f = rng_end(p);
	return f;
}

int ipk_tcp_sb_sacked_at(const struct ipk_pb **cur, uint32_t l, uint32_t r)
{
	const struct ipk_pb *p = *cur;

	while (p && ipk_seq_le(rng_end(p), l))
		p = p->next;
	*cur = p;
	return p && ipk_seq_le(p->seq, l) && ipk_seq_ge(rng_end(p), r);
}

int ipk_tcp_sb_sacked(const struct ipk_conn *c, uint32_t l, uint32_t r)
{
	const struct ipk_pb *p;

	if (!ipk_tcp_sb(c))
		return 0;
	for (p = ipk_tcp_sb(c)->next; p && ipk_seq_lt(p->seq, r); p = p->next) {
		if (ipk_seq_le(p->seq, l) && ipk_seq_ge(rng_end(p), r))
			return 1;
	}
	return 0;
}

/* SACKed bytes inside [l, r). */
static uint32_t sacked_in(const struct ipk_conn *c, uint32_t l, uint32_t r)
{
	const struct ipk_pb *p;
	uint32_t n = 0;

	if (!ipk_tcp_sb(c) || !ipk_seq_lt(l, r))
		return 0;
	for (p = ipk_tcp_sb(c)->next; p && ipk_seq_lt(p->seq, r); p = p->next) {
		uint32_t a = ipk_seq_gt(p->seq, l) ? p->seq : l;
		uint32_t b = ipk_seq_lt(rng_end(p), r) ? rng_end(p) : r;

		if (ipk_seq_lt(a, b))
			n += b - a;
	}
	return n;
}

/* Merge [l, r) into the sorted, disjoint ranges. */
static void range_add(struct ipk_ctx *ctx, const struct ipk_conn *c, struct ipk_pb *rec,
                      uint32_t l, uint32_t r)
{
	struct ipk_pb **pp = &rec->next, *p, *q;

	while (*pp && ipk_seq_lt(rng_end(*pp), l))
		pp = &(*pp)->next;
	p = *pp;
	if (p && ipk_seq_le(p->seq, r)) {
		uint32_t nl = ipk_seq_lt(p->seq, l) ? p->seq : l;
		uint32_t nr = ipk_seq_gt(rng_end(p), r) ? rng_end(p) : r;

		while (p->next && ipk_seq_le(p->next->seq, nr)) {
			q = p->next;
			if (ipk_seq_gt(rng_end(q), nr))
				nr = rng_end(q);
			p->next = q->next;
			ipk_pb_put(ctx, q);
			IPK_SB_NRANGES(rec)--;
		}
		p->seq = nl;
		p->len = nr - nl;
		return;
	}
	if (IPK_SB_NRANGES(rec) >= ipk_tcp_sb_cap(c))
		return;
	q = ipk_pb_get(ctx);
	if (!q)
		return;
	q->seq = l;
	q->len = r - l;
	q->next = p;
	*pp = q;
	IPK_SB_NRANGES(rec)++;
}

/* The cumulative ACK moved: forget what it covers. */
static void sb_trim(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_pb *rec)
{
	uint32_t una = c->snd_una;

	while (rec->next && ipk_seq_le(rng_end(rec->next), una)) {
		struct ipk_pb *p = rec->next;

		rec->next = p->next;
		ipk_pb_put(ctx, p);
		IPK_SB_NRANGES(rec)--;
	}
	if (rec->next && ipk_seq_lt(rec->next->seq, una)) {
		rec->next->len = rng_end(rec->next) - una;
		rec->next->seq = una;
	}
	if (ipk_seq_lt(IPK_SB_HIGH_RXT(rec), una))
		IPK_SB_HIGH_RXT(rec) = una;
	if (ipk_seq_lt(IPK_SB_LOST_END(rec), una))
		IPK_SB_LOST_END(rec) = una;
}

void ipk_tcp_sb_mark_lost(struct ipk_conn *c, uint32_t end)
{
	if (!ipk_tcp_sb(c))
		return;
	if (ipk_seq_gt(end, c->snd_max))
		end = c->snd_max;
	if (ipk_seq_gt(end, IPK_SB_LOST_END(ipk_tcp_sb(c))))
		IPK_SB_LOST_END(ipk_tcp_sb(c)) = end;
}

/* RFC 2883 §4 / RFC 3708: the first block is a D-SACK when it lies below the
 * cumulative ACK or inside the second block. Returns 1 when it was one. */
static int dsack_take(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_opts *o,
                      uint32_t ack)
{
	uint32_t l = o->sack[0][0], r = o->sack[0][1];
	int below = ipk_seq_le(r, ack);
	int inside = o->nsack > 1 && ipk_seq_ge(l, o->sack[1][0]) && ipk_seq_le(r, o->sack[1][1]);

	if (!ipk_seq_lt(l, r) || !(below || inside))
		return 0;
	ctx->cnt.tcp_dsack_rx++;
	/* Only a D-SACK of data we retransmitted shows a needless retransmission (and
	 * may undo the recovery); one of an original is a network duplicate (RFC 2883
	 * §4.2), below the ACK or not. */
	if (ipk_tcp_undo_dsack(ctx, c, l, r))
		ctx->cnt.tcp_spurious_rtx++;
	/* RFC 8985 §6.2 step 4: any D-SACK widens the reordering window, as the RFC
	 * says. Widening on retransmitted data only cost the simulator matrix's
	 * 1%-duplication cells up to 7 RTOs and twice the retransmissions: the
	 * duplicates' D-SACKs take SACK slots, and ranges a receiver stopped
	 * reporting looked lost to a narrow window. */
	if (ipk_tcp_sb(c))
		ipk_tcp_rack_dsack(c); /* RACK.dsack_round lives on the scoreboard */
	return 1;
}

/* RFC 2018 §5 with RFC 6675 §5 bounds: blocks outside snd_una..snd_max are ignored. */
static void sack_blocks_in(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s)
{
	const struct ipk_tcp_opts *o = &s->o;
	uint32_t i = 0, l, r;
	struct ipk_pb *rec;

	if (o->nsack == 0)
		return;
	rec = rec_get(ctx, c); /* before the D-SACK check: RACK.dsack_round lives there */
	if (dsack_take(ctx, c, o, s->h.ack))
		i = 1;
	for (; i < o->nsack; i++) {
		l = o->sack[i][0];
		r = o->sack[i][1];
		if (!ipk_seq_lt(l, r) || ipk_seq_gt(r, c->snd_max) || !ipk_seq_gt(r, c->snd_una) ||
		    r - l > c->snd_max - c->snd_una) {
			ctx->cnt.tcp_sack_invalid++;
			continue;
		}
		if (ipk_seq_lt(l, c->snd_una))
			l = c->snd_una;
		if (!rec)
			continue;
		ipk_tcp_rack_delivered(ctx, c, l, r, 0);
		range_add(ctx, c, rec, l, r);
	}
}

/* RFC 6675 §4 IsLost over ranges: the hole below a range is lost when the ranges
 * from it up hold more than (DupThresh - 1) * SMSS bytes, or DupThresh ranges.
 * RFC 8985 §6.2: once the path showed reordering, counting is no evidence of loss
 * (a segment held back behind three others is not lost), so only RACK's
 * reordering window decides; Linux does the same. */
static void mark_lost_dupthresh(const struct ipk_ctx *ctx, struct ipk_conn *c)
{
	const struct ipk_pb *p;
	uint32_t total = 0, before = 0, n = 0, i = 0, edge = c->snd_una;

	if (ctx->cfg.tcp_rack && (c->fl & IPK_TCPF_REORDER))
		return;

	for (p = ipk_tcp_sb(c)->next; p; p = p->next) {
		total += p->len;
		n++;
	}
	for (p = ipk_tcp_sb(c)->next; p; p = p->next, i++) {
		if (total - before > (DUP_THRESH - 1u) * c->mss || n - i >= DUP_THRESH)
			edge = p->seq;
		before += p->len;
	}
	/* RFC 6675 §5: DupThresh duplicate ACKs mean the first segment is lost even
	 * when the peer sent no SACK blocks with them. */
	if (c->dupacks >= DUP_THRESH && !ipk_seq_gt(edge, c->snd_una))
		edge = ipk_tcp_sb(c)->next ? ipk_tcp_sb(c)->next->seq : c->snd_una + c->mss;
	ipk_tcp_sb_mark_lost(c, edge);
}

/* Lost holes not yet retransmitted: bytes in [HIGH_RXT, LOST_END) not SACKed. */
static uint32_t lost_pending(const struct ipk_conn *c)
{
	const struct ipk_pb *r = ipk_tcp_sb(c);
	uint32_t a = IPK_SB_HIGH_RXT(r), b = IPK_SB_LOST_END(r);

	if (ipk_seq_lt(a, c->snd_una))
		a = c->snd_una;
	if (ipk_seq_gt(b, c->snd_nxt))
		b = c->snd_nxt;
	if (!ipk_seq_lt(a, b))
		return 0;
	return (b - a) - sacked_in(c, a, b);
}

/*
 * RFC 6675 §4 SetPipe counts a retransmitted segment once more (HighRxt covers it)
 * until it is SACKed or ACKed. RFC 8985 §6.2 treats a retransmission like any
 * segment: once RACK marks it lost (pb->xmit IPK_TCP_XMIT_LOST, tcp_rack.c) it has
 * left the network as the original did, so it leaves the pipe until it is sent
 * again, as Linux's lost_out does. Counting it held cwnd - pipe below one segment
 * with nothing arriving to raise cwnd, and the resend waited for the RTO (through
 * ipk-relay at 5% loss each way, 1-2 of every 8 MiB transfer's RTO episodes). Walks
 * the send queue below HighRxt only while such a pb exists (RTX_LOST).
 */
static uint32_t lost_rtx_bytes(const struct ipk_conn *c)
{
	const struct ipk_pb *pb;
	uint32_t hi, n = 0;

	if (!(c->fl & IPK_TCPF_RTX_LOST))
		return 0;
	hi = IPK_SB_HIGH_RXT(ipk_tcp_sb(c));
	for (pb = c->sq_head; pb && ipk_seq_lt(pb->seq, hi); pb = pb->next) {
		uint32_t s = ipk_seq_lt(pb->seq, c->snd_una) ? c->snd_una : pb->seq;
		uint32_t e = ipk_seq_lt(pb->seq + pb->len, hi) ? pb->seq + pb->len : hi;

		if (pb->xmit == IPK_TCP_XMIT_LOST && ipk_seq_lt(s, e))
			n += (e - s) - sacked_in(c, s, e);
	}
	return n;
}

uint32_t ipk_tcp_sb_lost_unsent(const struct ipk_conn *c)
{
	return ipk_tcp_sb(c) ? lost_pending(c) : 0u;
}

/* RFC 6675 §4 SetPipe: bytes sent, not SACKed, not lost-and-unretransmitted. */
uint32_t ipk_tcp_sb_pipe(const struct ipk_conn *c)
{
	uint32_t flight = c->snd_nxt - c->snd_una, gone;

	if (!ipk_tcp_sb(c) || !ipk_seq_gt(c->snd_nxt, c->snd_una))
		return flight;
	gone = sacked_in(c, c->snd_una, c->snd_nxt) + lost_pending(c) + lost_rtx_bytes(c);
	return flight > gone ? flight - gone : 0;
}

/* RFC 6675 §5 (4)/(5): enter recovery once per episode (snd_una beyond the last
 * recovery point), with cwnd = ssthresh; leave it at the recovery point. */
void ipk_tcp_sb_recover(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	if (c->fl & IPK_TCPF_SACK_RCVY) {
		if (ipk_seq_ge(c->snd_una, c->recover)) {
			c->fl &= ~IPK_TCPF_SACK_RCVY;
			/* RFC 6937 §3: recovery ends with cwnd = ssthresh. */
			c->cwnd = c->ssthresh;
			ipk_tcp_prr_end(ctx, c);
			ipk_tcp_rack_recovery_done(c);
			ipk_tcp_cc_recovery_exit(ctx, c);
			ipk_tcp_undo_rcvy_exit(ctx, c);
		}
		return;
	}
	if (!ipk_tcp_sb(c) || lost_pending(c) == 0 || !ipk_seq_gt(c->snd_una, c->recover))
		return;
	c->fl |= IPK_TCPF_SACK_RCVY;
	ctx->cnt.tcp_sack_recovery_episodes++;
	ipk_tcp_undo_arm(ctx, c);
	ipk_tcp_cc_sack_enter(ctx, c);
	ipk_tcp_prr_start(ctx, c);
}

/* RFC 6937 §3: DeliveredData = change_in(snd.una) + change_in(SACKd). `before` is
 * what was SACKed from prev_una up before this ACK (ranges dropped for the bound
 * can make the change negative: then nothing was delivered). */
static uint32_t delivered_data(const struct ipk_conn *c, uint32_t prev_una, uint32_t before)
{
	uint32_t got = (c->snd_una - prev_una) + sacked_in(c, c->snd_una, c->snd_max);

	return got > before ? got - before : 0u;
}

int ipk_tcp_sb_on_ack(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s,
                      uint32_t prev_una, int dup)
{
	uint64_t reo = 0;
	uint32_t before = sacked_in(c, prev_una, c->snd_max);
	int counted = 0;

	if (c->snd_una != prev_una) {
		c->dupacks = 0;
	} else if (dup && c->dupacks < 0xffu) {
		c->dupacks++;
		counted = 1;
	}
	sack_blocks_in(ctx, c, s);
	if (!ipk_tcp_sb(c) && c->dupacks >= DUP_THRESH)
		rec_get(ctx, c);
	if (!ipk_tcp_sb(c)) {
		/* Without SACK state the duplicate is NewReno's (RFC 6582 §3.2), as on a
		 * connection without SACK; its path counts it again. */
		if (counted)
			c->dupacks--;
		return dup;
	}
	ipk_tcp_frto_ack(ctx, c, prev_una, dup); /* RFC 5682 steps 2-3, before the trim */
	sb_trim(ctx, c, ipk_tcp_sb(c));
	if (c->snd_una == c->snd_max) {
		ipk_tcp_sb_recover(ctx, c); /* everything acknowledged ends recovery */
		ipk_tcp_sb_free(ctx, c);
		return 0;
	}
	mark_lost_dupthresh(ctx, c);
	if (ctx->cfg.tcp_rack)
		reo = ipk_tcp_rack_detect(ctx, c);
	ipk_tcp_sb_recover(ctx, c);
	if (c->fl & IPK_TCPF_SACK_RCVY) {
		uint32_t pipe = ipk_tcp_sb_pipe(c);

		ipk_tcp_prr_ack(ctx, c, delivered_data(c, prev_una, before), pipe, pipe);
	}
	if (reo)
		ipk_tcp_arm_loss_timer(ctx, c, reo);
	return 0;
}

/* NextSeg rule 1: the first lost, unSACKed byte at or above HIGH_RXT, and how much of
 * its hole follows. Returns 0 when there is none. */
static int next_hole(const struct ipk_conn *c, uint32_t *seq, uint32_t *len)
{
	const struct ipk_pb *p;
	uint32_t s = IPK_SB_HIGH_RXT(ipk_tcp_sb(c)), lim = IPK_SB_LOST_END(ipk_tcp_sb(c));

	if (ipk_seq_lt(s, c->snd_una))
		s = c->snd_una;
	for (p = ipk_tcp_sb(c)->next; p && ipk_seq_le(p->seq, s); p = p->next) {
		if (ipk_seq_gt(rng_end(p), s))
			s = rng_end(p);
	}
	if (p && ipk_seq_lt(p->seq, lim))
		lim = p->seq;
	if (!ipk_seq_lt(s, lim))
		return 0;
	*seq = s;
	*len = lim - s;
	return 1;
}

/* RFC 8985 §6.2 / RFC 6675 NextSeg (1): a hole below HIGH_RXT whose retransmission
 * RACK found lost (tcp_rack.c) comes first. Clears the flag when none is left. */
static int lost_rtx(struct ipk_conn *c, uint32_t *seq, uint32_t *len)
{
	const struct ipk_pb *pb, *cur = ipk_tcp_sb_ranges(c);
	uint32_t hi = IPK_SB_HIGH_RXT(ipk_tcp_sb(c));

	for (pb = c->sq_head; pb && ipk_seq_lt(pb->seq, hi); pb = pb->next) {
		uint32_t s = ipk_seq_lt(pb->seq, c->snd_una) ? c->snd_una : pb->seq;
		uint32_t e = ipk_seq_lt(pb->seq + pb->len, hi) ? pb->seq + pb->len : hi;

		if (pb->xmit != IPK_TCP_XMIT_LOST)
			continue;
		/* only the unSACKed part of the pb: a SACKed byte sent again is a duplicate */
		ipk_tcp_sb_sacked_at(&cur, s, s);
		while (cur && ipk_seq_le(cur->seq, s) && ipk_seq_lt(s, e)) {
			s = rng_end(cur);
			cur = cur->next;
		}
		if (cur && ipk_seq_lt(cur->seq, e))
			e = cur->seq;
		if (!ipk_seq_lt(s, e))
			continue;
		*seq = s;
		*len = e - s;
		return 1;
	}
	c->fl &= ~IPK_TCPF_RTX_LOST;
	return 0;
}

static int next_seg(struct ipk_conn *c, uint32_t *seq, uint32_t *len, int *again)
{
	*again = (c->fl & IPK_TCPF_RTX_LOST) && lost_rtx(c, seq, len);
	return *again || next_hole(c, seq, len);
}

void ipk_tcp_sb_output(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	uint32_t i, seq, len, pipe, end;
	int rc, again;

	if (ipk_tcp_frto_holds(c))
		return; /* RFC 5682 §3.1 step 2b: new data first */
	for (i = 0; i < IPK_TCP_OUTPUT_BURST && ipk_tcp_sb(c); i++) {
		if (!next_seg(c, &seq, &len, &again))
			return;
		pipe = ipk_tcp_sb_pipe(c);
		/* RFC 6675 §5 (C): send while cwnd - pipe >= 1 SMSS */
		if (c->cwnd <= pipe || c->cwnd - pipe < IPK_MIN(c->mss, len))
			return;
		end = ipk_tcp_data_end(c);
		len = ipk_seq_lt(seq, end) ? IPK_MIN(IPK_MIN(len, c->mss), end - seq) : 0;
		rc = ipk_tcp_xmit(ctx, c, seq, len, IPK_TCP_X_FIN);
		if (rc <= 0) {
			if (rc < 0 && c->retry_at == 0)
				c->retry_at = ipk_tcp_us_at(ctx, ipk_tcp_retry_ns(ctx, c));
			return;
		}
		if (!again)
			IPK_SB_HIGH_RXT(ipk_tcp_sb(c)) = seq + (uint32_t)rc;
		/* the last lost hole went out: the PTO now covers its ACK (tcp_rack.c) */
		ipk_tcp_tlp_rearm(ctx, c);
	}
}

/*
 * A recovery whose ACK clock stopped: every ACK of the last burst was lost (a
 * receiver that ACKs a burst once, as Linux does, makes that one ACK), and what is
 * known lost waits for room in cwnd that only an ACK would make. The probe timer
 * then sends the first lost segment instead of the tail (RFC 8985 §7.3 repeats the
 * last segment to learn what is lost; here that is known). Filling the hole, it is
 * ACKed at once (RFC 5681 §4.2) and the ACK clock runs again; it was due anyway,
 * so it is never a spurious retransmission. Without it the RTO repaired the hole:
 * through ipk-relay at 5% loss each way, one of every 8 MiB transfer's RTO episodes
 * or two, e.g. 2896 bytes lost, cwnd 6516 and pipe 5792, and no ACK for 200 ms.
 */
int ipk_tcp_sb_probe_lost(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	uint32_t seq, len, end;
	int rc, again;

	if (!(c->fl & IPK_TCPF_SACK_RCVY) || !ipk_tcp_sb(c) || !next_seg(c, &seq, &len, &again))
		return 0;
	end = ipk_tcp_data_end(c);
	len = ipk_seq_lt(seq, end) ? IPK_MIN(IPK_MIN(len, c->mss), end - seq) : 0;
	rc = ipk_tcp_xmit(ctx, c, seq, len, IPK_TCP_X_FIN);
	if (rc < 0)
		return -1;
	if (!again)
		IPK_SB_HIGH_RXT(ipk_tcp_sb(c)) = seq + (uint32_t)rc;
	return 1;
}

/* RFC 6675 §5.1: after an RTO every byte not SACKed is lost and is resent in order.
 * The ranges go too, in case the receiver reneged (RFC 2018 §8), at the second RTO in
 * a row, or at the first when a range starts at snd_una: the peer ACKed up to a byte
 * it had SACKed, so it dropped what it SACKed (Linux: FLAG_SACK_RENEGING); kept,
 * they leave no hole to resend, nothing goes out and no timer runs again. */
int ipk_tcp_sb_on_rto(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	struct ipk_pb *rec = rec_get(ctx, c);

	if (!rec)
		return 0;
	if (c->nrtx > 1 || (rec->next && ipk_seq_le(rec->next->seq, c->snd_una)))
		ranges_free(ctx, rec);
	c->fl &= ~(IPK_TCPF_SACK_RCVY | IPK_TCPF_TLP_OUT | IPK_TCPF_RTX_LOST);
	ipk_tcp_undo_cancel(c);
	ipk_tcp_prr_end(ctx, c);
	IPK_SB_HIGH_RXT(rec) = c->snd_una;
	IPK_SB_LOST_END(rec) = c->snd_max;
	c->snd_nxt = c->snd_max;
	return 1;
}

/* The highest unSACKed, outstanding sequence range: [*lo, *hi) with hi - 1 the
 * highest unSACKed byte (or our FIN) and lo where the SACKed range below it ends. */
static int top_unsacked(const struct ipk_conn *c, uint32_t *lo, uint32_t *hi)
{
	const struct ipk_pb *p;
	uint32_t l = c->snd_una, h = c->snd_max;

	for (p = ipk_tcp_sb(c)->next; p; p = p->next) {
		if (p->next == NULL && rng_end(p) == h)
			h = p->seq; /* the top of the window was SACKed */
	}
	for (p = ipk_tcp_sb(c)->next; p && ipk_seq_lt(p->seq, h); p = p->next) {
		if (ipk_seq_le(rng_end(p), h) && ipk_seq_gt(rng_end(p), l))
			l = rng_end(p);
	}
	*lo = l;
	*hi = h;
	return ipk_seq_lt(l, h);
}

/*
 * RFC 6675 §4 NextSeg (4), the rescue retransmission: when no lost hole (rule 1)
 * and no new data (rule 2) can use the room cwnd leaves, resend one segment of up
 * to SMSS holding the highest outstanding unSACKed byte, so that a loss at the
 * tail of the window, with nothing more to send, is repaired by the ACK clock and
 * not by the RTO. Once per recovery: RescueRxt = RecoveryPoint, and HighACK cannot
 * exceed that before the episode ends. HighRxt is not moved. Only bytes above
 * HighRxt are rescued: the rest was just resent by rule (1).
 */
void ipk_tcp_sb_rescue(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	struct ipk_pb *r = ipk_tcp_rcvy(c);
	uint32_t pipe, lo, hi, seq, end, len, s2, l2;
	int rc, again;

	if (!(c->fl & IPK_TCPF_SACK_RCVY) || !r || !ipk_tcp_sb(c) ||
	    (IPK_RCVY_FLAGS(r) & IPK_RCVY_F_RESCUED))
		return;
	pipe = ipk_tcp_sb_pipe(c);
	if (c->cwnd <= pipe || c->cwnd - pipe < c->mss || next_seg(c, &s2, &l2, &again))
		return;
	if (ipk_seq_lt(c->snd_nxt, ipk_tcp_data_end(c)) || !top_unsacked(c, &lo, &hi))
		return; /* rule (2) still has new data to offer */
	/* Data below HighRxt went out again in this episode already (rule 1): a rescue
	 * of it would be a duplicate, not a probe of the tail. */
	if (!ipk_seq_gt(hi, IPK_SB_HIGH_RXT(ipk_tcp_sb(c))))
		return;
	if (ipk_seq_lt(lo, IPK_SB_HIGH_RXT(ipk_tcp_sb(c))))
		lo = IPK_SB_HIGH_RXT(ipk_tcp_sb(c));
	seq = hi - IPK_MIN(hi - lo, c->mss);
	end = ipk_tcp_data_end(c);
	len = ipk_seq_lt(seq, end) ? (ipk_seq_lt(hi, end) ? hi : end) - seq : 0u;
	rc = ipk_tcp_xmit(ctx, c, seq, len, IPK_TCP_X_FIN);
	if (rc <= 0)
		return;
	IPK_RCVY_FLAGS(r) |= IPK_RCVY_F_RESCUED;
	ctx->cnt.tcp_rescue_rtx++;
}

uint32_t ipk_tcp_sb_sacked_bytes(const struct ipk_conn *c)
{
	return sacked_in(c, c->snd_una, c->snd_max);
}
