/*
 * CUBIC congestion control (RFC 9438) in integer arithmetic.
 *
 * Units: windows in bytes, time in milliseconds. C = 0.4 segments/s^3 and
 * beta_cubic = 0.7 (RFC 9438 §4.6, §5). The cube root is a bitwise integer one, so
 * the engine needs no FPU.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

/* |t - K| beyond this (1000 s) would overflow the cube; the window is capped long
 * before (IPK_TCP_CWND_MAX). */
#define CUBIC_T_MAX_MS 1000000u

uint32_t ipk_cubic_cbrt(uint64_t x)
{
	uint64_t y = 0;
	int s;

	/* Digit-by-digit: take three bits of x per result bit, 22 rounds at most. */
	for (s = 63; s >= 0; s -= 3) {
		uint64_t b;

		y <<= 1;
		b = 3u * y * (y + 1u) + 1u;
		if ((x >> s) >= b) {
			x -= b << s;
			y++;
		}
	}
	return (uint32_t)y;
}

/* RFC 9438 eq. 2: K = cbrt((W_max - cwnd_epoch) / C), here in ms:
 * K_ms = cbrt(segments * 2.5e9). */
uint32_t ipk_cubic_k(uint32_t w_max, uint32_t cwnd_epoch, uint32_t mss)
{
	if (w_max <= cwnd_epoch || mss == 0)
		return 0;
	return ipk_cubic_cbrt((uint64_t)(w_max - cwnd_epoch) * 2500000000ull / mss);
}

/* RFC 9438 eq. 1: W_cubic(t) = C * (t - K)^3 + W_max, in bytes:
 * C * d^3 segments with d in ms is d^3 * 4 / 10^10 segments. */
uint32_t ipk_cubic_window(uint32_t w_max, uint32_t k_ms, uint32_t mss, uint32_t t_ms)
{
	uint32_t d = t_ms >= k_ms ? t_ms - k_ms : k_ms - t_ms;
	uint64_t useg, bytes;

	if (d > CUBIC_T_MAX_MS)
		d = CUBIC_T_MAX_MS;
	useg = (uint64_t)d * d * d * 4u / 10000u; /* millionths of a segment */
	bytes = useg / 1000u * mss / 1000u;
	if (t_ms < k_ms)
		return bytes >= w_max ? 0u : w_max - (uint32_t)bytes;
	if (bytes >= IPK_TCP_CWND_MAX - (uint64_t)IPK_MIN(w_max, IPK_TCP_CWND_MAX))
		return IPK_TCP_CWND_MAX;
	return w_max + (uint32_t)bytes;
}

static uint32_t now_ms(const struct ipk_ctx *ctx)
{
	return (uint32_t)(ctx->now / 1000000u);
}

static void cubic_init(struct ipk_conn *c)
{
	ipk_memset(&c->cc, 0, sizeof(c->cc));
	c->bytes_acked = 0;
	c->fl &= ~IPK_TCPF_CC_EPOCH;
}

/* RFC 9438 §4.2: a congestion-avoidance stage begins; cwnd is cwnd_epoch. After a
 * timeout (or with no congestion event yet) W_max is this cwnd and K is 0 (§4.8). */
static void epoch_start(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	c->fl |= IPK_TCPF_CC_EPOCH;
	c->cc.cubic.epoch_ms = now_ms(ctx);
	if (c->cc.cubic.w_max <= c->cwnd)
		c->cc.cubic.w_max = c->cwnd;
	c->cc.cubic.k_ms = ipk_cubic_k(c->cc.cubic.w_max, c->cwnd, c->mss);
	c->cc.cubic.w_est = c->cwnd;
	c->bytes_acked = 0;
}

/* RFC 9438 §4.3: W_est grows by alpha_cubic segments per window of acknowledged
 * bytes; alpha_cubic = 3(1 - beta)/(1 + beta) = 9/17, and 1 once W_est reaches the
 * window before the reduction (W_max stands in for cwnd_prior). */
static void reno_friendly(struct ipk_conn *c, uint32_t acked)
{
	uint32_t inc;

	c->bytes_acked += acked;
	if (c->bytes_acked < c->cwnd)
		return;
	c->bytes_acked -= c->cwnd;
	inc = c->cc.cubic.w_est >= c->cc.cubic.w_max ? c->mss : c->mss * 9u / 17u;
	if (c->cc.cubic.w_est < IPK_TCP_CWND_MAX)
		c->cc.cubic.w_est += inc;
}

static void cubic_on_ack(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t acked, uint64_t rtt)
{
	uint32_t t, w_t, target;

	if (c->cwnd < c->ssthresh) {
		acked = ipk_tcp_cc_slow_start(c, acked);
		if (acked == 0)
			return;
	}
	if (!(c->fl & IPK_TCPF_CC_EPOCH))
		epoch_start(ctx, c);
	t = now_ms(ctx) - c->cc.cubic.epoch_ms;
	reno_friendly(c, acked);
	w_t = ipk_cubic_window(c->cc.cubic.w_max, c->cc.cubic.k_ms, c->mss, t);
	if (w_t < c->cc.cubic.w_est) {
		/* RFC 9438 §4.3: the Reno-friendly region. */
		if (c->cc.cubic.w_est > c->cwnd)
			c->cwnd = c->cc.cubic.w_est;
		return;
	}
	/* RFC 9438 §4.4/§4.5: aim at W_cubic(t + RTT), within [cwnd, 1.5 cwnd]. */
	target = ipk_cubic_window(c->cc.cubic.w_max, c->cc.cubic.k_ms, c->mss,
	                          t + (uint32_t)(rtt / 1000000u));
	if (target < c->cwnd)
		target = c->cwnd;
	if (target > c->cwnd + c->cwnd / 2u)
		target = c->cwnd + c->cwnd / 2u;
	c->cwnd += (uint32_t)((uint64_t)(target - c->cwnd) * acked / c->cwnd);
}

static void cubic_on_congestion(struct ipk_ctx *ctx, struct ipk_conn *c, enum ipk_cc_event ev)
{
	uint32_t cw = c->cwnd;

	IPK_UNUSED(ctx);
	c->fl &= ~IPK_TCPF_CC_EPOCH;
	/* RFC 9438 §4.6: ssthresh = cwnd * beta_cubic, at least two segments. */
	c->ssthresh = IPK_MAX((uint32_t)((uint64_t)cw * 7u / 10u), 2u * c->mss);
	if (ev == IPK_CC_EV_RTO) {
		/* RFC 9438 §4.8: the next epoch starts from K = 0 at its own cwnd. */
		c->cc.cubic.w_max = 0;
		c->cwnd = c->mss;
		return;
	}
	/* RFC 9438 §4.7 fast convergence: release bandwidth when W_max shrank. */
	if (cw < c->cc.cubic.w_max)
		c->cc.cubic.w_max = (uint32_t)((uint64_t)cw * 17u / 20u);
	else
		c->cc.cubic.w_max = cw;
	c->cwnd = c->ssthresh;
}

const struct ipk_cc_algo ipk_cc_cubic = {
	cubic_init, cubic_on_ack, cubic_on_congestion, NULL
};
