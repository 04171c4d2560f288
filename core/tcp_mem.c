/*
 * Receive memory: what the out-of-order queues may hold (issue 14 item 1).
 *
 * A peer decides how much out-of-order data it sends, and every segment queued pins
 * one of the integrator's packets until the hole below it is filled. Without a bound
 * ~50 connections sending 200 one-byte segments each took the whole packet pool and
 * the node could not receive again. The policy follows Linux's (tcp_try_rmem_schedule,
 * tcp_collapse_ofo_queue, tcp_prune_ofo_queue):
 *
 *  - memory is counted as packets held times pkt_buf_size (Linux's truesize): a
 *    1-byte segment costs a whole buffer;
 *  - two limits: per connection (cfg.tcp_rmem_max) and per context (cfg.rmem_max);
 *  - over a limit, first collapse: copy runs of small contiguous segments into as few
 *    fresh packets as they fit in, freeing the originals;
 *  - then prune: drop queued segments from the highest sequence down, but only those
 *    above the arriving one (data nearer rcv_nxt fills the hole sooner). RFC 2018 §8
 *    lets a receiver renege on SACKed data; our SACK blocks are built from the queue
 *    (tcp_sack.c), so they never cover what was pruned, and the sender's second RTO
 *    forgets its scoreboard (tcp_sb.c ipk_tcp_sb_on_rto);
 *  - for the context limit, then reclaim: prune a connection that holds more than
 *    this one would (a bounded search from a rotating hash bucket), so an idle
 *    attacker cannot keep the memory a working connection needs;
 *  - when the integrator says its packets run low (ops->pkt_low), hold nothing new.
 * Each step is counted (tcp_rmem_* counters, IPK_DROP_TCP_RMEM). In-order data is
 * never held here: it is delivered at once. All of this runs only when a segment is
 * about to be queued out of order, never on the in-order fast path.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"

/* Hash buckets one reclaim looks at, at most: bounds the work a segment can cause. */
#define IPK_RMEM_SCAN 64u

/* The units (pkt_buf_size each) a held chain costs: one per packet, more for a packet
 * longer than pkt_buf_size, which only a larger buffer holds (an LRO chain from the
 * runtime's 128 KiB buffers, ipk_pool_large): counted by its bytes, a lower bound of
 * its buffer, not as one small buffer. */
uint32_t ipk_rmem_units(struct ipk_ctx *ctx, void *pkt)
{
	uint32_t n = 0, b = ctx->cfg.pkt_buf_size;

	for (; pkt; pkt = ipk_pkt_chain_next(ctx, pkt)) {
		uint32_t len = ipk_pkt_len(ctx, pkt);

		n += len > b ? (uint32_t)(((uint64_t)len + b - 1u) / b) : 1u;
	}
	return n;
}

#define rmem_pkts_of ipk_rmem_units

/* Limits in packets (bytes / pkt_buf_size), never below one. */
static uint64_t rmem_conn_limit(const struct ipk_ctx *ctx)
{
	uint64_t b = ctx->cfg.tcp_rmem_max ? ctx->cfg.tcp_rmem_max : 2ull * ctx->cfg.tcp_rcvbuf;

	return IPK_MAX(b / ctx->cfg.pkt_buf_size, 1u);
}

static uint64_t rmem_ctx_limit(const struct ipk_ctx *ctx)
{
	uint64_t b = ctx->cfg.rmem_max;

	if (b == 0)
		return IPK_MAX(ctx->pb_total / 2u, 1u);
	if (b == UINT64_MAX)
		return UINT64_MAX;
	return IPK_MAX(b / ctx->cfg.pkt_buf_size, 1u);
}

static uint32_t rmem_held(const struct ipk_conn *c)
{
	return c->x ? IPK_X_RMEM(c->x) : 0u;
}

static int rmem_conn_fits(const struct ipk_ctx *ctx, const struct ipk_conn *c, uint32_t need)
{
	return (uint64_t)rmem_held(c) + need <= rmem_conn_limit(ctx);
}

static int rmem_ctx_fits(const struct ipk_ctx *ctx, uint32_t need)
{
	return (uint64_t)ctx->rmem_pkts + need <= rmem_ctx_limit(ctx);
}

int ipk_rmem_ctx_fits(const struct ipk_ctx *ctx, uint32_t need)
{
	return rmem_ctx_fits(ctx, need);
}

static int rmem_fits(const struct ipk_ctx *ctx, const struct ipk_conn *c, uint32_t need)
{
	return rmem_conn_fits(ctx, c, need) && rmem_ctx_fits(ctx, need);
}

void ipk_tcp_rmem_charge(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_pb *pb)
{
	pb->xmit = rmem_pkts_of(ctx, pb->pkt);
	IPK_X_RMEM(c->x) += pb->xmit;
	ctx->rmem_pkts += pb->xmit;
}

void ipk_tcp_rmem_uncharge(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_pb *pb)
{
	IPK_X_RMEM(c->x) -= pb->xmit;
	ctx->rmem_pkts -= pb->xmit;
}

void ipk_tcp_rmem_clear(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	if (!c->x)
		return;
	ctx->rmem_pkts -= IPK_X_RMEM(c->x);
	IPK_X_RMEM(c->x) = 0;
}

/* Unlink and free the pb after *pp. */
static void rmem_unlink(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_pb **pp)
{
	struct ipk_pb *dead = *pp;

	*pp = dead->next;
	ipk_tcp_rmem_uncharge(ctx, c, dead);
	ipk_pkt_release(ctx, dead->pkt);
	ipk_pb_put(ctx, dead);
	c->ooo_n--;
}

/* ------------------------------------------------------------ collapse */

/* The pbs from `first` on that one fresh packet can take: contiguous, no FIN before
 * the last, payload within pkt_buf_size. Returns how many (1 = nothing to gain). */
static uint32_t rmem_run(const struct ipk_ctx *ctx, const struct ipk_pb *first,
                         uint32_t *bytes, uint32_t *pkts)
{
	const struct ipk_pb *p = first;
	uint32_t n = 1;

	*bytes = p->len;
	*pkts = p->xmit;
	while (p->next && p->next->seq == p->seq + p->len && !(p->aux & IPK_TCP_PB_FIN) &&
	       *bytes + p->next->len <= ctx->cfg.pkt_buf_size) {
		p = p->next;
		*bytes += p->len;
		*pkts += p->xmit;
		n++;
	}
	return n;
}

/* Copy the run of n pbs at `first` into pkt and make `first` hold it; the others
 * are freed. */
static void rmem_merge(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_pb *first,
                       uint32_t n, void *pkt, uint32_t bytes)
{
	uint8_t *dst = ipk_pkt_data(ctx, pkt);
	uint32_t at = 0, i, aux = 0;
	struct ipk_pb *p = first;

	ipk_pkt_set_len(ctx, pkt, bytes);
	for (i = 0; i < n; i++, p = p->next) {
		at += ipk_pkt_copy(ctx, p->pkt, p->off, dst + at, p->len);
		aux |= p->aux;
	}
	for (i = 1; i < n; i++)
		rmem_unlink(ctx, c, &first->next);
	ipk_tcp_rmem_uncharge(ctx, c, first);
	ipk_pkt_release(ctx, first->pkt);
	first->pkt = pkt;
	first->off = 0;
	first->len = at;
	first->aux = aux; /* RECENT from any of them, FIN from the last (rmem_run) */
	ipk_tcp_rmem_charge(ctx, c, first);
	ctx->cnt.tcp_rmem_collapsed += n;
	ctx->cnt.tcp_rmem_collapse_pkts++;
}

/* Linux's tcp_collapse_ofo_queue: runs of small contiguous segments go into fresh
 * packets, one run per packet, where that frees at least one. Stops when the
 * integrator has no packet to give. */
static void rmem_collapse(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	struct ipk_pb *p = ipk_tcp_ooo(c);

	while (p) {
		uint32_t bytes, pkts, n = rmem_run(ctx, p, &bytes, &pkts);
		void *pkt;

		if (n < 2 || pkts < 2) {
			p = p->next;
			continue;
		}
		pkt = ipk_pkt_alloc(ctx);
		if (!pkt)
			return;
		rmem_merge(ctx, c, p, n, pkt, bytes);
		p = p->next;
	}
}

/* ---------------------------------------------------------------- prune */

/* Drop c's highest queued segment when it starts above `floor`; 0 when none does. */
static int rmem_prune_top(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t floor)
{
	struct ipk_pb **pp = &c->x->next, **top = NULL;

	for (; *pp; pp = &(*pp)->next)
		top = pp;
	if (!top || !ipk_seq_gt((*top)->seq, floor))
		return 0;
	ctx->cnt.tcp_rmem_pruned++;
	ctx->cnt.tcp_rmem_pruned_bytes += (*top)->len;
	rmem_unlink(ctx, c, top);
	return 1;
}

/* Prune c from the top (above `floor`) until `need` more packets fit for `me`. */
static void rmem_prune(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_conn *me,
                       uint32_t floor, uint32_t need)
{
	while (!rmem_fits(ctx, me, need) && rmem_prune_top(ctx, c, floor))
		;
}

/* A connection, other than c, holding more than c will once `need` is added. Looks
 * at IPK_RMEM_SCAN buckets at most, from where the last search stopped. */
static struct ipk_conn *rmem_victim(struct ipk_ctx *ctx, const struct ipk_conn *c,
                                    uint32_t need)
{
	uint32_t mask = ctx->cfg.conn_hash_buckets - 1u, i;
	uint32_t mine = rmem_held(c) + need;

	for (i = 0; i < IPK_RMEM_SCAN && i <= mask; i++) {
		struct ipk_conn *v = ctx->conn_hash[ctx->rmem_cursor & mask];

		for (; v; v = v->hash_next) {
			if (v != c && !v->busy && rmem_held(v) > mine)
				return v;
		}
		ctx->rmem_cursor++;
	}
	return NULL;
}

/* The context limit: take from connections holding more than c would, highest
 * sequence first, the whole queue if need be. */
static void rmem_reclaim(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t need)
{
	struct ipk_conn *v;
	uint32_t tries;

	for (tries = 0; tries < 4u && !rmem_ctx_fits(ctx, need); tries++) {
		v = rmem_victim(ctx, c, need);
		if (!v)
			return;
		while (!rmem_ctx_fits(ctx, need) && rmem_held(v) > rmem_held(c) + need) {
			uint64_t before = ctx->cnt.tcp_rmem_pruned;

			if (!rmem_prune_top(ctx, v, v->rcv_nxt))
				break;
			ctx->cnt.tcp_rmem_reclaimed += ctx->cnt.tcp_rmem_pruned - before;
		}
		ipk_tcp_x_trim(ctx, v);
	}
}

/* ---------------------------------------------------------------- admit */

static int rmem_refuse(struct ipk_ctx *ctx)
{
	ipk_drop(ctx, IPK_DROP_TCP_RMEM);
	return 0;
}

int ipk_tcp_rmem_admit(struct ipk_ctx *ctx, struct ipk_conn *c, void *pkt, uint32_t seq)
{
	uint32_t need = rmem_pkts_of(ctx, pkt);

	if (IPK_OPS(ctx)->pkt_low && IPK_OPS(ctx)->pkt_low(IPK_OPQ(ctx))) {
		ctx->cnt.tcp_rmem_reserve++;
		return rmem_refuse(ctx);
	}
	if (rmem_fits(ctx, c, need))
		return 1;
	rmem_collapse(ctx, c);
	rmem_prune(ctx, c, c, seq, need);
	if (!rmem_conn_fits(ctx, c, need))
		return rmem_refuse(ctx);
	if (!rmem_ctx_fits(ctx, need))
		rmem_reclaim(ctx, c, need);
	return rmem_ctx_fits(ctx, need) ? 1 : rmem_refuse(ctx);
}

/*
 * Send memory: autotuning of a connection's send buffer (issue 16), after Linux's
 * tcp_sndbuf_expand / tcp_should_expand_sndbuf. A fixed buffer caps the flight: after
 * each fast recovery cwnd is ~0.7x the flight, and the buffer, sized near the path,
 * keeps the rebound from going above it. Linux sizes sk_sndbuf to twice
 * max(cwnd, initial window, reordering + 1) segments' truesize ("Cubic needs 1.7
 * factor, rounded to 2"); the buffer here counts payload bytes (ipk_tcp_write's
 * packets are charged by bytes, zero-copy ones by sq_overhead on top), so the same
 * rule is 2 * max(cwnd, 10 * MSS) bytes of room besides the zero-copy packets'
 * charges (c->sndbuf is the buffer less them, as Linux's counts truesize).
 *
 * How it meets the context's send memory (cfg.wmem_max, tcp.c wmem_room, the hard
 * limit like Linux's tcp_mem[2]): growth only raises what a connection may queue;
 * every write is still cut and counted (tcp_wmem_limited) by wmem_room, so memory
 * pressure refuses as before. The growth itself stops
 *  - while the context holds at least half its limit (Linux does not expand above
 *    tcp_mem[0], half of tcp_mem[2] by its default ratios), and
 *  - at half the limit for one connection, so a single bulk sender never reaches
 *    the hard limit by itself (the runtime's default, a quarter of its packet pool,
 *    ~3.9 MB, lets one connection grow to ~1.9 MB; raise wmem_max to allow more),
 * and at cfg.tcp_sndbuf_max (Linux's tcp_wmem[2]); at or below tcp_sndbuf it is
 * off, like a buffer set with SO_SNDBUF (SOCK_SNDBUF_LOCK). It grows only when the
 * application filled the buffer (Linux: SOCK_NOSPACE) and the flight is below cwnd
 * (Linux: "if we filled the congestion window, do not expand"), never shrinks.
 * Called from the ACK path only for a buffer that was at least 3/4 full and below
 * tcp_sndbuf_max (tcp_in.c), so a request-response connection never calls it.
 */
void ipk_tcp_sndbuf_expand(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	uint64_t half = ctx->wmem_lim / 2u, want;

	if (c->mss == 0 || ctx->wmem >= half || c->snd_max - c->snd_una >= c->cwnd)
		return;
	want = 2ull * IPK_MAX((uint64_t)c->cwnd, 10ull * c->mss);
	want = IPK_MIN(want, IPK_MIN((uint64_t)ctx->cfg.tcp_sndbuf_max, half));
	/* The charges given back later come on top (at most ctx->wmem): the buffer
	 * must stay within INT32_MAX, what ipk_tcp_write can return. */
	if (want <= c->sndbuf || want + ctx->wmem > 0x7fffffffu)
		return;
	c->sndbuf = (uint32_t)want;
	ctx->cnt.tcp_sndbuf_grow++;
}
