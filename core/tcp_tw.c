/*
 * TIME_WAIT that does not exhaust ports or memory.
 *
 *  - Every connection in TIME_WAIT sits on a FIFO list in the context; when more
 *    than cfg.tcp_tw_max would sit there, the oldest is freed at once, and so it
 *    is when a new connection finds the connection pool empty: TIME_WAIT never
 *    keeps a peer out (a server closing first holds one per request, and would
 *    otherwise refuse every SYN for 2*MSL once the pool is full of them).
 *  - RFC 6191 §2: a SYN for a TIME_WAIT 4-tuple may start a new connection. When
 *    both incarnations use timestamps, a TSval above TS.Recent decides (equal needs
 *    a higher sequence number too); otherwise a sequence number above everything
 *    the old connection received does (RFC 1122 §4.2.2.13).
 *  - Active opens skip 4-tuples in use; when none is left they take over a
 *    TIME_WAIT 4-tuple that has waited at least IPK_TCP_TW_REUSE_NS since the
 *    peer's last FIN (TIME_WAIT's start or restart, like Linux's use of the time
 *    of the last segment), and the new
 *    ISS is raised above the old connection's sequence space so its old duplicates
 *    cannot be mistaken for new data at the peer.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

/* Least time in TIME_WAIT before an active open may take the 4-tuple (Linux's
 * tcp_tw_reuse waits 1 s too). */
#define IPK_TCP_TW_REUSE_NS 1000000000ull
/* Distance put between the old connection's last sequence number and the new ISS:
 * more than any window the old connection can have had unacknowledged in flight
 * without scaling, so its duplicates fall outside the new connection's window. */
#define IPK_TCP_TW_ISS_GAP (1u << 18)

void ipk_tcp_tw_unlink(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	if (!(c->fl & IPK_TCPF_TW_LINKED))
		return;
	if (c->timer_prev)
		c->timer_prev->timer_next = c->timer_next;
	else
		ctx->tw_head = c->timer_next;
	if (c->timer_next)
		c->timer_next->timer_prev = c->timer_prev;
	else
		ctx->tw_tail = c->timer_prev;
	c->timer_next = c->timer_prev = NULL;
	c->fl &= ~IPK_TCPF_TW_LINKED;
	ctx->tw_n--;
}

void ipk_tcp_tw_link(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	if (c->fl & IPK_TCPF_TW_LINKED)
		return;
	/* the TIME_WAIT list takes the timer links: its deadlines stay, ipk_tcp_timer
	 * scans this list too */
	ipk_tcp_timers_unlink(ctx, c);
	c->timer_next = NULL;
	c->timer_prev = ctx->tw_tail;
	if (ctx->tw_tail)
		ctx->tw_tail->timer_next = c;
	else
		ctx->tw_head = c;
	ctx->tw_tail = c;
	c->fl |= IPK_TCPF_TW_LINKED;
	ctx->tw_n++;
	ipk_tcp_timers_update(ctx, c);
	if (ctx->cfg.tcp_tw_max && ctx->tw_n > ctx->cfg.tcp_tw_max && ctx->tw_head != c) {
		ctx->cnt.tcp_tw_recycled++;
		ipk_tcp_destroy(ctx, ctx->tw_head, IPK_CLOSE_NORMAL);
	}
}

/* TIME_WAIT connections looked at for one that nothing runs on: those that are
 * busy are the few a segment is being processed on right now. */
#define IPK_TCP_TW_TAKE_SCAN 8

struct ipk_conn *ipk_tcp_conn_take(struct ipk_ctx *ctx)
{
	struct ipk_conn *c = ipk_conn_get(ctx), *tw;
	int n = 0;

	if (c)
		return c;
	for (tw = ctx->tw_head; tw && n < IPK_TCP_TW_TAKE_SCAN; tw = tw->timer_next, n++) {
		if (tw->busy)
			continue;
		ctx->cnt.tcp_tw_recycled++;
		ipk_tcp_destroy(ctx, tw, IPK_CLOSE_NORMAL);
		return ipk_conn_get(ctx);
	}
	return NULL;
}

void ipk_tcp_iss_above(struct ipk_conn *c, uint32_t floor)
{
	uint32_t iss = floor + IPK_TCP_TW_ISS_GAP;

	if (ipk_seq_gt(c->iss, floor) && ipk_seq_ge(c->iss, iss))
		return;
	c->iss = c->snd_una = c->snd_nxt = c->snd_max = iss;
	c->sq_seq = iss + 1u;
}

/* RFC 6191 §2: may this SYN open a new incarnation of a TIME_WAIT connection? */
static int tw_syn_acceptable(const struct ipk_ctx *ctx, const struct ipk_conn *c,
                             const struct ipk_tcp_seg *s)
{
	int seq_above = ipk_seq_gt(s->h.seq, c->rcv_nxt);

	if ((c->fl & IPK_TCPF_TS_OK) && ctx->cfg.tcp_timestamps && s->o.has_ts) {
		if (ipk_seq_gt(s->o.tsval, c->ts_recent))
			return 1;
		return s->o.tsval == c->ts_recent && seq_above;
	}
	return seq_above;
}

int ipk_tcp_tw_syn(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_tcp_seg *s)
{
	if ((s->h.flags & (IPK_TCP_SYN | IPK_TCP_ACK | IPK_TCP_RST)) != IPK_TCP_SYN ||
	    !tw_syn_acceptable(ctx, c, s))
		return 0;
	ctx->cnt.tcp_tw_reused++;
	/* RFC 1122 §4.2.2.13: the new connection's ISS lies above the old sequence
	 * space (ipk_tcp_conn_setup applies the floor). A cookie SYN-ACK cannot obey:
	 * its ISS is the cookie, which the peer's new ISN already separates. */
	ctx->iss_floor = c->snd_max;
	ctx->iss_floor_on = 1;
	ipk_tcp_destroy(ctx, c, IPK_CLOSE_NORMAL);
	ipk_tcp_input_listen(ctx, s);
	ctx->iss_floor_on = 0;
	return 1;
}

/* Time since TIME_WAIT began or a retransmitted FIN restarted it: rtx_at is its end,
 * cfg.tcp_time_wait_ns (as cut to the µs tick range) after that. Never more than the
 * real time (rtx_at was rounded up). */
static uint64_t tw_age(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	uint64_t tw = IPK_MIN(ctx->cfg.tcp_time_wait_ns, IPK_TCP_TICK_MAX * IPK_TCP_NS_PER_US);
	uint64_t end = ipk_tcp_us_ns(ctx, c->rtx_at);
	uint64_t left = end > ctx->now ? end - ctx->now : 0;

	return left < tw ? tw - left : 0;
}

static int tw_reusable(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	return c->state == IPK_TCP_TIME_WAIT && (c->fl & IPK_TCPF_TW_LINKED) && !c->busy &&
	       tw_age(ctx, c) >= IPK_TCP_TW_REUSE_NS;
}

int ipk_tcp_tw_take(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t *floor)
{
	if (!tw_reusable(ctx, c))
		return 0;
	*floor = c->snd_max;
	ctx->cnt.tcp_tw_reused++;
	ipk_tcp_destroy(ctx, c, IPK_CLOSE_NORMAL);
	return 1;
}

uint16_t ipk_tcp_tw_eph(struct ipk_ctx *ctx, uint32_t lip, uint32_t pip, uint16_t pport,
                       uint32_t *floor)
{
	struct ipk_conn *c;

	/* Oldest first: the list is in the order connections entered TIME_WAIT. */
	for (c = ctx->tw_head; c; c = c->timer_next) {
		uint16_t lport = c->t.local_port_be;
		uint32_t p = ipk_ntohs(lport);

		if (c->t.peer_ip4_be != pip || c->t.peer_port_be != pport ||
		    c->t.local_ip4_be != lip || p < ctx->cfg.eph_port_lo ||
		    p > ctx->cfg.eph_port_hi)
			continue;
		/* a retransmitted FIN restarts a connection's wait, so a later one on
		 * the list may have waited longer */
		if (ipk_tcp_tw_take(ctx, c, floor))
			return lport;
	}
	return 0;
}
