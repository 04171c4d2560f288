/*
 * TCP timers: retransmission (RFC 6298), SYN retries, zero-window persist
 * (RFC 9293 §3.8.6.1), delayed ACK (RFC 9293 §3.8.6.3), TIME_WAIT (§3.10.7.4), and
 * the retry of output blocked on packets.
 *
 * Each connection keeps absolute deadlines; connections with any deadline set sit on
 * ctx->timer_head (doubly linked, so arming and disarming are O(1)), and
 * ctx->tcp_deadline caches the earliest one so ipk_tcp_timer costs nothing until
 * something is due. Nothing here runs per packet.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

static uint64_t earliest(uint64_t a, uint64_t b)
{
	if (a == 0)
		return b;
	if (b == 0)
		return a;
	return a < b ? a : b;
}

/* The earliest deadline of c in ns (0 = none); ctx->now must be current. */
static uint64_t conn_deadline(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	uint64_t us = earliest(ipk_tcp_us_ns(ctx, c->rtx_at),
	                       earliest(ipk_tcp_us_ns(ctx, c->delack_at), ipk_tcp_us_ns(ctx, c->retry_at)));

	return earliest(us, ipk_tcp_ms_ns(ctx, c->keepalive_at));
}

void ipk_tcp_timers_unlink(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	if (!(c->fl & IPK_TCPF_ON_TIMERS))
		return;
	if (c->timer_prev)
		c->timer_prev->timer_next = c->timer_next;
	else
		ctx->timer_head = c->timer_next;
	if (c->timer_next)
		c->timer_next->timer_prev = c->timer_prev;
	c->timer_next = c->timer_prev = NULL;
	c->fl &= ~IPK_TCPF_ON_TIMERS;
}

void ipk_tcp_timers_remove(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	if (!(c->fl & IPK_TCPF_ON_TIMERS))
		return;
	ipk_tcp_timers_unlink(ctx, c);
	c->rtx_at = c->delack_at = c->retry_at = c->keepalive_at = 0;
}

/* ctx->tcp_deadline and, while it lies between now and half the µs tick range
 * ahead, its µs tick rounded up (tcp_dl_tick, valid when tcp_dl_ok). */
static void tcp_deadline_set(struct ipk_ctx *ctx, uint64_t d)
{
	ctx->tcp_deadline = d;
	ctx->tcp_dl_ok = d != IPK_NO_DEADLINE && d >= ctx->now && !ctx->fast_off &&
	                 d - ctx->now <= (IPK_TCP_TICK_MAX / 2u) * IPK_TCP_NS_PER_US;
	if (ctx->tcp_dl_ok)
		ctx->tcp_dl_tick = ipk_tcp_tick(d + IPK_TCP_NS_PER_US - 1u, IPK_TCP_NS_PER_US);
}

/* A µs deadline t, off or not before the tick dl. */
static int us_not_before(uint32_t t, uint32_t dl)
{
	return t == 0 || (int32_t)(t - dl) >= 0;
}

/*
 * 1 when c is on the timer list and none of its deadlines lies before
 * ctx->tcp_deadline, decided in ticks without converting any to ns; 0 when
 * unsure (the caller computes conn_deadline). Sound because every deadline is
 * set at or after now and tcp_deadline lies at most 2^30 ticks after the now it
 * was set at: a deadline truly before it is less than 2^31 ticks before it, so
 * its tick difference reads negative. Keep-alive (ms ticks) takes the long way.
 */
static int conn_not_earlier(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	uint32_t dl = ctx->tcp_dl_tick;

	if (!ctx->tcp_dl_ok || c->keepalive_at || !(c->fl & IPK_TCPF_ON_TIMERS) ||
	    !(c->rtx_at | c->delack_at | c->retry_at))
		return 0;
	return us_not_before(c->rtx_at, dl) && us_not_before(c->delack_at, dl) &&
	       us_not_before(c->retry_at, dl);
}

/* RFC 6298 (5.3) restarts the RTO on every ACK of new data, always later than the
 * deadline it replaces: the list and tcp_deadline (which may be early) stand, and
 * only a deadline before tcp_deadline lowers it. */
IPK_HOT void ipk_tcp_timers_update(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	uint64_t d;

	if (conn_not_earlier(ctx, c))
		return;
	d = conn_deadline(ctx, c);

	if (d == 0) {
		ipk_tcp_timers_remove(ctx, c);
		return;
	}
	/* in TIME_WAIT the links hold the TIME_WAIT list, which ipk_tcp_timer scans too */
	if (!(c->fl & (IPK_TCPF_ON_TIMERS | IPK_TCPF_TW_LINKED))) {
		c->timer_prev = NULL;
		c->timer_next = ctx->timer_head;
		if (ctx->timer_head)
			ctx->timer_head->timer_prev = c;
		ctx->timer_head = c;
		c->fl |= IPK_TCPF_ON_TIMERS;
	}
	if (d < ctx->tcp_deadline)
		tcp_deadline_set(ctx, d);
}

/* RFC 6298 (2.3)-(2.5): RTO = SRTT + max(G, K*RTTVAR), clamped to [min, max] (the
 * bounds in µs, converted once at ipk_ctx_init). */
static void rto_compute(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	uint64_t r = (uint64_t)c->srtt_us + IPK_MAX(IPK_TCP_G_NS / IPK_TCP_NS_PER_US, 4ull * c->rttvar_us);

	if (r < ctx->rto_min_us)
		r = ctx->rto_min_us;
	if (r > ctx->rto_max_us)
		r = ctx->rto_max_us;
	c->rto_us = (uint32_t)r;
}

/* r: the sample in µs ticks (0 counts as 1, above IPK_TCP_TICK_MAX as that). The
 * arithmetic is RFC 6298's in integer µs, shifts for alpha and beta. The RTO is
 * recomputed only when the estimate moved or a back-off (nrtx) is in force: else
 * rto_us already holds what rto_compute would give (on_rto is its only other
 * writer, and it raises nrtx). */
IPK_HOT void ipk_tcp_rtt_sample_us(struct ipk_ctx *ctx, struct ipk_conn *c, uint64_t r)
{
	uint32_t srtt = c->srtt_us, rttvar = c->rttvar_us;

	if (r == 0)
		r = 1;
	if (r > IPK_TCP_TICK_MAX)
		r = IPK_TCP_TICK_MAX;
	if (srtt == 0) {
		/* (2.2) first measurement */
		srtt = (uint32_t)r;
		rttvar = (uint32_t)(r >> 1);
	} else {
		/* (2.3) beta = 1/4, alpha = 1/8 */
		uint64_t d = srtt > r ? srtt - r : r - srtt;

		rttvar = (uint32_t)((3ull * rttvar + d) >> 2);
		srtt = (uint32_t)((7ull * srtt + r) >> 3);
	}
	if (srtt == c->srtt_us && rttvar == c->rttvar_us && c->nrtx == 0 && !ctx->fast_off)
		return;
	c->srtt_us = srtt;
	c->rttvar_us = rttvar;
	rto_compute(ctx, c);
}

/* A new ACK ends the back-off: the RTO goes back to the estimate (when there is one).
 * Without a back-off rto_us is the estimate's already. */
void ipk_tcp_rto_reset(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	if (c->nrtx == 0 && !ctx->fast_off)
		return;
	c->nrtx = 0;
	if (c->srtt_us)
		rto_compute(ctx, c);
}

void ipk_tcp_arm_rtx(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	c->rtx_at = ipk_tcp_us_at(ctx, ipk_tcp_rto_ns(c));
	c->rtx_kind = IPK_TCP_RTX_RTO;
}

void ipk_tcp_arm_persist(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	uint64_t t = IPK_MAX(ipk_tcp_rto_ns(c), ctx->cfg.tcp_rto_min_ns);
	uint32_t i;

	for (i = 0; i < c->npersist && t < ctx->cfg.tcp_rto_max_ns; i++)
		t *= 2u;
	c->rtx_at = ipk_tcp_us_at(ctx, IPK_MIN(t, ctx->cfg.tcp_rto_max_ns));
	c->rtx_kind = IPK_TCP_RTX_PERSIST;
}

/* RFC 6298 (5.4)-(5.6): retransmit the earliest unacknowledged segment, back off.
 * Returns 1 when the connection was closed. */
static int on_rto(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	int syn = c->state == IPK_TCP_SYN_SENT || c->state == IPK_TCP_SYN_RECEIVED;
	uint32_t limit = syn ? ctx->cfg.tcp_syn_retries : ctx->cfg.tcp_max_retries;

	if (c->nrtx >= limit) {
		ipk_tcp_destroy(ctx, c, IPK_CLOSE_TIMEOUT);
		return 1;
	}
	if (c->nrtx == 0 && !syn) {
		ctx->cnt.tcp_rto_episodes++;
		if ((c->fl & (IPK_TCPF_SACK_OK | IPK_TCPF_TS_OK)) ==
		    (IPK_TCPF_SACK_OK | IPK_TCPF_TS_OK))
			ipk_tcp_undo_rto_arm(ctx, c); /* RFC 3522: may prove spurious */
		/* RFC 8985 §6.2 step 4 counts RTO recoveries too; the engine keeps no end of
		 * one, so it is counted when it starts */
		ipk_tcp_rack_recovery_done(c);
	}
	if (!syn && (c->fl & (IPK_TCPF_SACK_OK | IPK_TCPF_TS_OK)) == IPK_TCPF_SACK_OK)
		ipk_tcp_frto_on_rto(ctx, c); /* RFC 5682: may prove spurious */
	c->nrtx++;
	c->rto_us = (uint32_t)IPK_MIN(2ull * c->rto_us, ctx->rto_max_us);
	ctx->cnt.tcp_rto++;
	if (syn) {
		c->snd_nxt = c->iss;
		return 0;
	}
	ipk_tcp_cc_on_rto(ctx, c);
	/* With SACK only the holes go again (RFC 6675 §5.1); else go back N. */
	if (!(c->fl & IPK_TCPF_SACK_OK) || !ipk_tcp_sb_on_rto(ctx, c))
		c->snd_nxt = c->snd_una;
	return 0;
}

/* Like a retransmission (RFC 6298 (5.5)) the wait doubles while the pool stays dry:
 * a fixed 1 ms retry per blocked connection made ~40k drops a second each. The
 * exponent drops back to 0 on the next output pass that fails nothing
 * (ipk_tcp_output). */
uint64_t ipk_tcp_retry_ns(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	uint64_t ns = IPK_TCP_RETRY_NS << c->nretry;

	if (c->nretry < IPK_TCP_RETRY_MAX_SHIFT)
		c->nretry++;
	ctx->cnt.tcp_tx_retries++;
	return ns;
}

/* RFC 9293 §3.8.6.1: probe a zero window with one byte, backing off. */
static void on_persist(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	if (c->snd_wnd > 0 || !ipk_seq_lt(c->snd_una, ipk_tcp_data_end(c)) ||
	    c->snd_nxt != c->snd_una)
		return;
	if (ipk_tcp_xmit(ctx, c, c->snd_una, 1, IPK_TCP_X_PROBE) < 0) {
		c->retry_at = ipk_tcp_us_at(ctx, ipk_tcp_retry_ns(ctx, c));
		return;
	}
	if (c->npersist < 30)
		c->npersist++;
	ipk_tcp_arm_persist(ctx, c);
}

/* Fire what is due on one connection (ctx->now is the time); returns 1 when it was
 * closed. */
static int fire(struct ipk_ctx *ctx, struct ipk_conn *c, uint64_t now)
{
	int gone = 0;

	ipk_tcp_hold(c);
	/* A stopped loss timer's deadline does nothing; a lazy one finds its real
	 * deadline, which may lie ahead (tcp_rack.c ipk_tcp_loss_restart_lazy). */
	if (c->rtx_kind >= IPK_TCP_RTX_IDLE && c->state != IPK_TCP_TIME_WAIT &&
	    ipk_tcp_us_due(ctx, c->rtx_at))
		ipk_tcp_loss_settle(ctx, c);
	if (ipk_tcp_us_due(ctx, c->rtx_at)) {
		c->rtx_at = 0;
		if (c->state == IPK_TCP_TIME_WAIT) {
			ipk_tcp_destroy(ctx, c, IPK_CLOSE_NORMAL);
			gone = 1;
		} else if (c->rtx_kind == IPK_TCP_RTX_PERSIST) {
			on_persist(ctx, c);
		} else if (c->rtx_kind != IPK_TCP_RTX_RTO) {
			ipk_tcp_rack_timer(ctx, c);
		} else {
			gone = on_rto(ctx, c);
		}
	}
	if (!gone && ipk_tcp_us_due(ctx, c->delack_at)) {
		c->delack_at = 0;
		if (c->fl & IPK_TCPF_ACK_LATER)
			c->fl |= IPK_TCPF_ACK_NOW;
	}
	if (!gone && ipk_tcp_us_due(ctx, c->retry_at))
		c->retry_at = 0;
	if (!gone && c->keepalive_at && ipk_tcp_ms_ns(ctx, c->keepalive_at) <= now)
		gone = ipk_tcp_keepalive_fire(ctx, c);
	if (!gone)
		ipk_tcp_output(ctx, c);
	return ipk_tcp_release(ctx, c) || gone;
}

/* Fire what is due on the list from c (the timer list or the TIME_WAIT list) and
 * lower *next to the earliest deadline left; returns 1 as soon as a connection was
 * closed: its tcp_closed may have aborted others (the next one among them). */
static int scan(struct ipk_ctx *ctx, struct ipk_conn *c, uint64_t now, uint64_t *next)
{
	struct ipk_conn *n;

	for (; c; c = n) {
		uint64_t d = conn_deadline(ctx, c);

		n = c->timer_next;
		if (d && d <= now) {
			if (fire(ctx, c, now))
				return 1;
			if (!(c->fl & (IPK_TCPF_ON_TIMERS | IPK_TCPF_TW_LINKED)))
				continue;
			d = conn_deadline(ctx, c);
		}
		if (d && d < *next)
			*next = d;
	}
	return 0;
}

uint64_t ipk_tcp_timer(struct ipk_ctx *ctx, uint64_t now)
{
	uint64_t next;
	uint32_t restarts = 0;

	ctx->now = now;
	if (now < ctx->tcp_deadline)
		return ctx->tcp_deadline;
	for (;;) {
		next = IPK_NO_DEADLINE;
		if (!scan(ctx, ctx->timer_head, now, &next) && !scan(ctx, ctx->tw_head, now, &next))
			break;
		/* start over; each pass frees one */
		if (restarts++ > ctx->conn_total) {
			next = now; /* give up for now; the caller comes back */
			break;
		}
	}
	tcp_deadline_set(ctx, next);
	return next;
}
