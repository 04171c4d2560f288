/*
 * Receive memory (core/tcp_mem.c, issue 14 item 1): out-of-order data counted by the
 * packet buffers it pins, collapse of small contiguous segments, pruning from the
 * highest sequence down with SACK blocks that follow (RFC 2018 §8), the context
 * limit taken from a connection holding more, and ops->pkt_low.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "internal.h"
#include "wire/wire.h"

#define IRS 5000000u
#define A IPK_TCP_ACK
#define W 65535
#define BUF 2048u /* the harness's pkt_buf_size */

static void finish(struct th *t)
{
	CHECK_EQ(t->ctx->rmem_pkts, 0);
	CHECK(th_no_leaks(t));
	th_free(t);
}

static struct ipk_tcp_opts sack_opt(void)
{
	struct ipk_tcp_opts o = th_mss_opt(1460);

	o.has_sack_perm = 1;
	return o;
}

/* Handshake from peer port `sport` with SACK; returns our ISS. */
static uint32_t open_from(struct th *t, uint16_t sport, uint32_t irs, struct ipk_conn **c)
{
	struct ipk_tcp_opts o = sack_opt();
	struct tseg s;

	th_send(t, sport, TH_LOCAL_PORT, IPK_TCP_SYN, irs, 0, W, &o, NULL, 0);
	CHECK(th_next(t, &s));
	th_send(t, sport, TH_LOCAL_PORT, A, irs + 1, s.h.seq + 1, W, NULL, NULL, 0);
	*c = t->conn;
	th_clear(t);
	return s.h.seq;
}

static uint32_t held(const struct ipk_conn *c)
{
	return c->x ? IPK_X_RMEM(c->x) : 0u;
}

/* The last segment we sent (the older ones are dropped); 0 when none. */
static int last_seg(struct th *t, struct tseg *last)
{
	struct tseg s;
	int any = 0;

	while (th_next(t, &s)) {
		*last = s;
		any = 1;
	}
	return any;
}

/* Whether one of its SACK blocks covers sequence q. */
static int covers(const struct tseg *s, uint32_t q)
{
	uint32_t i;

	for (i = 0; i < s->o.nsack; i++) {
		if (ipk_seq_le(s->o.sack[i][0], q) && ipk_seq_lt(q, s->o.sack[i][1]))
			return 1;
	}
	return 0;
}

static void conn8(struct ipk_config *c)
{
	c->tcp_delack_ns = 0;
	c->tcp_rmem_max = 8u * BUF;
}

static void conn4(struct ipk_config *c)
{
	c->tcp_delack_ns = 0;
	c->tcp_rmem_max = 4u * BUF;
}

/* 40 one-byte segments in a row, the byte before them missing: over 8 buffers the
 * queue is copied together, so all 40 are held in a buffer or two and delivered
 * intact once the gap is filled. */
static void test_rmem_small_contiguous_segments_collapsed(void)
{
	struct th *t = th_new(conn8);
	struct ipk_conn *c;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c), i;
	uint8_t want[41];

	for (i = 0; i < 41; i++)
		want[i] = (uint8_t)('a' + i % 26);
	for (i = 1; i <= 40; i++)
		th_seg(t, A, IRS + 1 + i, iss + 1, W, want + i, 1);
	CHECK(t->ctx->cnt.tcp_rmem_collapsed >= 8);
	CHECK(t->ctx->cnt.tcp_rmem_collapse_pkts >= 1);
	CHECK_EQ(t->ctx->cnt.tcp_rmem_pruned, 0);
	CHECK_EQ(t->ctx->cnt.drop[IPK_DROP_TCP_RMEM], 0);
	CHECK(held(c) <= 8);
	CHECK_EQ(t->ctx->rmem_pkts, held(c));
	th_seg(t, A, IRS + 1, iss + 1, W, want, 1);
	CHECK_EQ(t->rxlen, 41);
	CHECK(memcmp(t->rx, want, 41) == 0);
	CHECK_EQ(held(c), 0);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

/* Gapped segments cannot be collapsed: over the limit the highest queued one goes
 * (only ones above the arriving segment), the SACK blocks we send stop covering it,
 * and a segment above everything queued is itself dropped. */
static void test_rmem_prunes_highest_first_and_sack_follows(void)
{
	struct th *t = th_new(conn4);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss, k;

	ipk_tcp_listen(t->ctx, ipk_htons(TH_LOCAL_PORT), 4);
	iss = open_from(t, TH_PEER_PORT, IRS, &c);
	for (k = 1; k <= 4; k++)
		th_seg(t, A, IRS + 1 + 10u * k, iss + 1, W, "x", 1);
	CHECK_EQ(held(c), 4);
	CHECK(last_seg(t, &s) && covers(&s, IRS + 1 + 40));
	th_seg(t, A, IRS + 1 + 5, iss + 1, W, "y", 1);
	CHECK_EQ(t->ctx->cnt.tcp_rmem_pruned, 1);
	CHECK_EQ(t->ctx->cnt.tcp_rmem_pruned_bytes, 1);
	CHECK_EQ(held(c), 4);
	CHECK_EQ(c->ooo_n, 4);
	/* RFC 2018 §8: the reneged byte is no longer reported, the rest is */
	CHECK(last_seg(t, &s));
	CHECK(!covers(&s, IRS + 1 + 40));
	CHECK(covers(&s, IRS + 1 + 5) && covers(&s, IRS + 1 + 30));
	th_seg(t, A, IRS + 1 + 50, iss + 1, W, "z", 1);
	CHECK_EQ(t->ctx->cnt.drop[IPK_DROP_TCP_RMEM], 1);
	CHECK_EQ(t->ctx->cnt.tcp_rmem_pruned, 1);
	CHECK(last_seg(t, &s));
	CHECK(!covers(&s, IRS + 1 + 50) && !covers(&s, IRS + 1 + 40));
	/* what is held is still delivered: bytes 0..9 fill the gap, 5 was a copy, 10
	 * follows; 20 and 30 stay queued */
	th_seg(t, A, IRS + 1, iss + 1, W, "0123456789", 10);
	CHECK_EQ(t->rxlen, 11);
	CHECK_EQ(t->rx[10], 'x');
	CHECK_EQ(held(c), 2);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void ctx6(struct ipk_config *c)
{
	c->tcp_delack_ns = 0;
	c->rmem_max = 6u * BUF;
}

/* The context limit: a connection holding nothing takes room from one holding the
 * whole context's share, from its highest sequence down. */
static void test_rmem_context_limit_reclaims_from_bigger_holder(void)
{
	struct th *t = th_new(ctx6);
	struct ipk_conn *a, *b;
	struct tseg s;
	uint32_t isa, isb, k;

	ipk_tcp_listen(t->ctx, ipk_htons(TH_LOCAL_PORT), 4);
	isa = open_from(t, 5000, IRS, &a);
	isb = open_from(t, 5001, 9000000u, &b);

	for (k = 1; k <= 6; k++)
		th_send(t, 5000, TH_LOCAL_PORT, A, IRS + 1 + 10u * k, isa + 1, W, NULL, "a", 1);
	CHECK_EQ(held(a), 6);
	CHECK_EQ(t->ctx->rmem_pkts, 6);
	th_send(t, 5001, TH_LOCAL_PORT, A, 9000000u + 1 + 10u, isb + 1, W, NULL, "b", 1);
	CHECK_EQ(t->ctx->cnt.tcp_rmem_reclaimed, 1);
	CHECK_EQ(held(a), 5);
	CHECK_EQ(held(b), 1);
	CHECK_EQ(t->ctx->rmem_pkts, 6);
	/* a's highest (offset 60) went, its lowest is still there */
	CHECK(a->x && a->x->next && a->x->next->seq == IRS + 1 + 10);
	th_clear(t);
	th_send(t, 5000, TH_LOCAL_PORT, A, IRS + 1 + 70, isa + 1, W, NULL, "a", 1);
	CHECK(last_seg(t, &s) && !covers(&s, IRS + 1 + 60) && covers(&s, IRS + 1 + 50));
	/* a is at the limit and b holds less: a's new top segment is refused */
	CHECK_EQ(t->ctx->cnt.drop[IPK_DROP_TCP_RMEM], 1);
	ipk_tcp_abort(t->ctx, a, t->now);
	ipk_tcp_abort(t->ctx, b, t->now);
	finish(t);
}

static int low_flag;
static int pkt_low(void *opaque)
{
	(void)opaque;
	return low_flag;
}

/* While the integrator's packets run low nothing new is held out of order; in-order
 * data and ACKs go on. */
static void test_rmem_pkt_low_holds_nothing(void)
{
	struct th *t = th_new(conn8);
	struct ipk_conn *c;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	t->ops.pkt_low = pkt_low;
	low_flag = 1;
	th_seg(t, A, IRS + 11, iss + 1, W, "late", 4);
	CHECK_EQ(t->ctx->cnt.tcp_rmem_reserve, 1);
	CHECK_EQ(t->ctx->cnt.drop[IPK_DROP_TCP_RMEM], 1);
	CHECK_EQ(held(c), 0);
	th_seg(t, A, IRS + 1, iss + 1, W, "in order", 8);
	CHECK_EQ(t->rxlen, 8);
	low_flag = 0;
	th_seg(t, A, IRS + 11, iss + 1, W, "late", 4);
	CHECK_EQ(held(c), 1);
	low_flag = 0;
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

/* The charge follows the queue through every exit: gap filled, overlap replaced,
 * connection aborted. */
static void test_rmem_accounting_returns_to_zero(void)
{
	struct th *t = th_new(conn8);
	struct ipk_conn *c;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	th_seg(t, A, IRS + 101, iss + 1, W, "aaaa", 4);
	th_seg(t, A, IRS + 201, iss + 1, W, "bbbb", 4);
	CHECK_EQ(t->ctx->rmem_pkts, 2);
	th_seg(t, A, IRS + 90, iss + 1, W, "cccccccccccccccccccccccc", 24); /* covers 101..105 */
	CHECK_EQ(c->ooo_n, 2);
	CHECK_EQ(t->ctx->rmem_pkts, 2);
	ipk_tcp_abort(t->ctx, c, t->now);
	CHECK_EQ(t->ctx->rmem_pkts, 0);
	finish(t);
}

int main(void)
{
	RUN(test_rmem_small_contiguous_segments_collapsed);
	RUN(test_rmem_prunes_highest_first_and_sack_follows);
	RUN(test_rmem_context_limit_reclaims_from_bigger_holder);
	RUN(test_rmem_pkt_low_holds_nothing);
	RUN(test_rmem_accounting_returns_to_zero);
	return check_summary();
}
