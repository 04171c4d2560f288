/*
 * SACK on the receiving side (RFC 2018 §4, RFC 2883): the blocks each ACK reports,
 * built from the out-of-order queue, with a D-SACK block first when the segment just
 * processed carried data we already had. Also the option set of every non-SYN
 * segment (timestamps and SACK).
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

void ipk_tcp_dsack_note(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t l, uint32_t r)
{
	if (!(c->fl & IPK_TCPF_SACK_OK) || !ipk_seq_lt(l, r))
		return;
	ctx->dsack_c = c;
	ctx->dsack_l = l;
	ctx->dsack_r = r;
}

void ipk_tcp_sack_recent(struct ipk_conn *c, struct ipk_pb *pb)
{
	struct ipk_pb *p;

	for (p = ipk_tcp_ooo(c); p; p = p->next)
		p->aux &= ~IPK_TCP_PB_RECENT;
	pb->aux |= IPK_TCP_PB_RECENT;
}

/* The contiguous run of queued segments starting at *pp: its edges, whether it holds
 * the most recent arrival; *pp moves past it. */
static void ooo_run(struct ipk_pb **pp, uint32_t *l, uint32_t *r, int *recent)
{
	struct ipk_pb *p = *pp;

	*l = p->seq;
	*r = p->seq + p->len;
	*recent = (p->aux & IPK_TCP_PB_RECENT) != 0;
	for (p = p->next; p && p->seq == *r; p = p->next) {
		*r = p->seq + p->len;
		*recent |= (p->aux & IPK_TCP_PB_RECENT) != 0;
	}
	*pp = p;
}

static void put_block(struct ipk_tcp_opts *o, uint32_t l, uint32_t r)
{
	if (o->nsack >= IPK_TCP_MAX_SACK || l == r)
		return;
	o->sack[o->nsack][0] = l;
	o->sack[o->nsack][1] = r;
	o->nsack++;
}

/* RFC 2018 §4: the block holding the latest segment first, then the rest. We take
 * the rest from the highest down: data arrives at the top of the window, so those
 * are the blocks most recently changed. Runs are collected ascending in a small
 * array (at most what fits in the option) and then written out. */
static void sack_blocks(const struct ipk_conn *c, struct ipk_tcp_opts *o)
{
	uint32_t run[IPK_TCP_MAX_SACK + 1][2], l, r;
	uint32_t n = 0, i, rec_l = 0, rec_r = 0;
	struct ipk_pb *p = ipk_tcp_ooo(c);
	int recent, have_rec = 0;

	while (p) {
		ooo_run(&p, &l, &r, &recent);
		if (recent && !have_rec) {
			rec_l = l;
			rec_r = r;
			have_rec = 1;
			continue;
		}
		if (n == IPK_TCP_MAX_SACK + 1) {
			for (i = 1; i < n; i++) {
				run[i - 1][0] = run[i][0];
				run[i - 1][1] = run[i][1];
			}
			n--;
		}
		run[n][0] = l;
		run[n][1] = r;
		n++;
	}
	if (have_rec)
		put_block(o, rec_l, rec_r);
	while (n > 0) {
		n--;
		put_block(o, run[n][0], run[n][1]);
	}
}


IPK_HOT int ipk_tcp_seg_opts(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_tcp_opts *o)
{
	int any = 0;

	/* Only what a data segment can carry is set; the SACK edges beyond o->nsack are
	 * never read, so they are not cleared. */
	o->has_mss = o->has_ws = o->has_sack_perm = o->has_ts = 0;
	o->nsack = 0;
	if (c->fl & IPK_TCPF_TS_OK) {
		/* RFC 7323 §3.2: TSecr echoes TS.Recent on every segment with ACK */
		o->has_ts = 1;
		o->tsval = ipk_tcp_ts_now(ctx, c);
		o->tsecr = c->ts_recent;
		any = 1;
	}
	if (!(c->fl & IPK_TCPF_SACK_OK))
		return any;
	if (ctx->dsack_c == c) {
		/* RFC 2883 §4: the D-SACK block goes first. */
		put_block(o, ctx->dsack_l, ctx->dsack_r);
		ctx->cnt.tcp_dsack_tx++;
		ctx->dsack_c = NULL;
	}
	if (ipk_tcp_ooo(c))
		sack_blocks(c, o);
	return any || o->nsack > 0;
}
