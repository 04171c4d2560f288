/*
 * Congestion control: the per-connection algorithm interface and NewReno.
 *   RFC 6928  initial window of 10 segments
 *   RFC 5681  slow start, congestion avoidance, fast retransmit
 *   RFC 3465  appropriate byte counting, L = 2
 *   RFC 6582  NewReno fast recovery with partial ACKs
 *
 * Split of duties: the recovery code (ipk_tcp_cc_on_ack / on_dupack / on_rto below,
 * or a SACK-based recovery) decides when congestion happened and owns cwnd while
 * recovering; the algorithm (struct ipk_cc_algo: NewReno here, CUBIC in
 * tcp_cubic.c) decides how far to back off and how to grow outside recovery.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

static uint32_t flight(const struct ipk_conn *c)
{
	return c->snd_max - c->snd_una;
}

const struct ipk_cc_algo *ipk_tcp_cc_algo(unsigned id)
{
	switch (id) {
	case IPK_CC_NEWRENO:
		return &ipk_cc_newreno;
	case IPK_CC_CUBIC:
		return &ipk_cc_cubic;
	default:
		return NULL;
	}
}

static const struct ipk_cc_algo *algo(const struct ipk_conn *c)
{
	const struct ipk_cc_algo *a = ipk_tcp_cc_algo(c->cc_algo);

	return a ? a : &ipk_cc_newreno;
}

/* RFC 7661 §4.1, RFC 9438 §5.8: an application-limited sender does not grow a
 * window it is not using; cwnd counts as validated while half of it is in flight
 * (the flight still includes the bytes this ACK covers). */
static int app_limited(const struct ipk_conn *c) { return ipk_tcp_cc_app_limited(c); }

void ipk_tcp_cc_ack(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t acked)
{
	if (app_limited(c))
		return;
	algo(c)->on_ack(ctx, c, acked, ipk_tcp_srtt_ns(c));
	if (c->cwnd > IPK_TCP_CWND_MAX)
		c->cwnd = IPK_TCP_CWND_MAX;
}

void ipk_tcp_cc_congestion(struct ipk_ctx *ctx, struct ipk_conn *c, enum ipk_cc_event ev)
{
	algo(c)->on_congestion(ctx, c, ev);
	c->bytes_acked = 0;
}

void ipk_tcp_cc_recovery_exit(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	const struct ipk_cc_algo *a = algo(c);

	if (a->on_recovery_exit)
		a->on_recovery_exit(ctx, c);
}

uint32_t ipk_tcp_cc_slow_start(struct ipk_conn *c, uint32_t acked)
{
	/* RFC 3465 §2.2: slow start counts bytes, at most L*SMSS per ACK (L = 2). */
	uint32_t inc = IPK_MIN(acked, 2u * c->mss);
	uint32_t room = c->ssthresh - c->cwnd;

	
	if (inc <= room) {
		c->cwnd += inc;
		return 0;
	}
	/* RFC 5681 §3.1: past ssthresh the rest counts as congestion avoidance. */
	c->cwnd = c->ssthresh;
	return acked - room;
}



static void reno_init(struct ipk_conn *c)
{
	c->bytes_acked = 0;
}

static void reno_on_ack(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t acked, uint64_t rtt)
{
	IPK_UNUSED(ctx);
	IPK_UNUSED(rtt);
	if (c->cwnd < c->ssthresh) {
		acked = ipk_tcp_cc_slow_start(c, acked);
		if (acked == 0)
			return;
	}
	/* RFC 3465 §2.1: one SMSS per cwnd of bytes acknowledged. */
	c->bytes_acked += acked;
	if (c->bytes_acked >= c->cwnd) {
		c->bytes_acked -= c->cwnd;
		c->cwnd += c->mss;
	}
}

static void reno_on_congestion(struct ipk_ctx *ctx, struct ipk_conn *c, enum ipk_cc_event ev)
{
	IPK_UNUSED(ctx);
	/* RFC 5681 (4): ssthresh = max(FlightSize / 2, 2 * SMSS) */
	c->ssthresh = IPK_MAX(flight(c) / 2u, 2u * c->mss);
	/* RFC 5681 §3.1: after an RTO the loss window is one segment. */
	c->cwnd = ev == IPK_CC_EV_RTO ? c->mss : c->ssthresh;
}

const struct ipk_cc_algo ipk_cc_newreno = {
	reno_init, reno_on_ack, reno_on_congestion, NULL
};

/* -------------------------------------------------- recovery (RFC 6582) */

void ipk_tcp_cc_init(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	IPK_UNUSED(ctx);
	/* RFC 6928 §2: IW = min(10*MSS, max(2*MSS, 14600)) */
	c->cwnd = IPK_MIN(10u * c->mss, IPK_MAX(2u * c->mss, 14600u));
	c->ssthresh = IPK_TCP_CWND_MAX; /* RFC 5681 §3.1: arbitrarily high */
	c->recover = c->iss;
	c->dupacks = 0;
	c->fl &= ~IPK_TCPF_RECOVERY;
	algo(c)->init(c);
}

/* RFC 6937 §3 without SACK: every duplicate ACK stands for one SMSS that arrived
 * above the hole (kept in the episode record as if SACKed), so pipe is the flight
 * less those. A partial ACK covers the resent hole and some of them: only the rest
 * is newly delivered, and the segments it covered leave the estimate, while those
 * above the next hole stay in it (resetting it with the duplicate-ACK count made
 * pipe the whole flight after every partial ACK and starved the ACK clock). */
static void reno_prr(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t delivered,
                     uint32_t flight_now)
{
	uint32_t *est = &IPK_RCVY_RENO_SACKED(ipk_tcp_rcvy(c));

	if (*est > flight_now)
		*est = flight_now;
	ipk_tcp_prr_ack(ctx, c, delivered, flight_now - *est, flight_now);
}

/* A partial ACK of `acked` bytes in NewReno recovery: the new data it delivered. */
static uint32_t reno_partial(struct ipk_conn *c, uint32_t acked)
{
	uint32_t *est = &IPK_RCVY_RENO_SACKED(ipk_tcp_rcvy(c));
	uint32_t above = acked > c->mss ? acked - c->mss : 0u; /* beyond the resent hole */
	uint32_t covered = IPK_MIN(*est, above);

	*est -= covered;
	return IPK_MAX(acked - covered, IPK_MIN(acked, c->mss));
}

IPK_HOT int ipk_tcp_cc_on_ack(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t ack, uint32_t acked)
{
	c->dupacks = 0;
	if (!(c->fl & IPK_TCPF_RECOVERY)) {
		if (!app_limited(c)) /* tested here too: no call for a request-response flight */
			ipk_tcp_cc_ack(ctx, c, acked);
		return 0;
	}
	if (ipk_seq_ge(ack, c->recover)) {
		/* RFC 6582 §3.2 (3) full ACK, option (2): min(ssthresh, FlightSize + SMSS) */
		uint32_t fs = flight(c) > acked ? flight(c) - acked : 0;

		c->cwnd = IPK_MIN(c->ssthresh, IPK_MAX(fs, c->mss) + c->mss);
		c->fl &= ~IPK_TCPF_RECOVERY;
		ipk_tcp_prr_end(ctx, c);
		ipk_tcp_rack_recovery_done(c);
		ipk_tcp_cc_recovery_exit(ctx, c);
		return 0;
	}
	if (ipk_tcp_prr_active(ctx, c)) {
		/* RFC 6937 in place of RFC 6582's deflation; the hole is still resent. */
		reno_prr(ctx, c, reno_partial(c, acked), flight(c) - acked);
		return 1;
	}
	/* RFC 6582 §3.2 (3) partial ACK: deflate by the amount acknowledged, add one
	 * SMSS back if at least that much was acknowledged, retransmit the next hole. */
	c->cwnd = c->cwnd > acked ? c->cwnd - acked : c->mss;
	if (acked >= c->mss)
		c->cwnd += c->mss;
	return 1;
}

int ipk_tcp_cc_on_dupack(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	ipk_tcp_fast_clear(c); /* duplicate ACKs counted, recovery may begin */
	if (c->dupacks < 0xffu)
		c->dupacks++;
	if (c->fl & IPK_TCPF_RECOVERY) {
		if (ipk_tcp_prr_active(ctx, c)) {
			IPK_RCVY_RENO_SACKED(ipk_tcp_rcvy(c)) += c->mss;
			reno_prr(ctx, c, c->mss, flight(c));
		} else if (c->cwnd < IPK_TCP_CWND_MAX)
			c->cwnd += c->mss; /* RFC 6582 §3.2 (4): inflate per segment that left */
		return 0;
	}
	/* RFC 6582 §3.2 (2): only when the ACK covers more than `recover`, so one loss
	 * episode causes one window reduction. */
	if (c->dupacks != 3 || !ipk_seq_gt(c->snd_una, c->recover))
		return 0;
	ipk_tcp_cc_congestion(ctx, c, IPK_CC_EV_LOSS);
	c->recover = c->snd_max;
	c->cwnd = c->ssthresh + 3u * c->mss;
	c->fl |= IPK_TCPF_RECOVERY;
	ipk_tcp_prr_start(ctx, c);
	if (ipk_tcp_prr_active(ctx, c)) {
		IPK_RCVY_RENO_SACKED(ipk_tcp_rcvy(c)) = 3u * c->mss; /* the DupThresh duplicate ACKs */
		reno_prr(ctx, c, c->mss, flight(c));
	}
	return 1;
}

void ipk_tcp_cc_on_rto(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	ipk_tcp_cc_congestion(ctx, c, IPK_CC_EV_RTO);
	ipk_tcp_prr_end(ctx, c);
	c->dupacks = 0;
	c->recover = c->snd_max;
	c->fl &= ~IPK_TCPF_RECOVERY;
}

void ipk_tcp_cc_sack_enter(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	/* RFC 6675 §5 (4.2)/(4.3): RecoveryPoint = HighData; cwnd = ssthresh as the
	 * algorithm reduces it. Pipe, not cwnd inflation, then paces the retransmissions. */
	ipk_tcp_cc_congestion(ctx, c, IPK_CC_EV_LOSS);
	c->recover = c->snd_max;
}
