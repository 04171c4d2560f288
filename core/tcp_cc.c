/*
 * Congestion control: NewReno.
 *   RFC 6928  initial window of 10 segments
 *   RFC 5681  slow start, congestion avoidance, fast retransmit
 *   RFC 3465  appropriate byte counting, L = 2
 *   RFC 6582  NewReno fast recovery with partial ACKs
 * The four calls below are the whole interface tcp_in.c and tcp_timer.c use, so a
 * CUBIC (or SACK-based recovery) can replace the bodies without touching them.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

/* cwnd never needs to exceed what a scaled window can use; the cap keeps the
 * additions below from overflowing 32 bits. */
#define CWND_MAX 0x40000000u

static uint32_t flight(const struct ipk_conn *c)
{
	return c->snd_max - c->snd_una;
}

/* RFC 5681 (4): ssthresh = max(FlightSize / 2, 2 * SMSS) */
static uint32_t half_flight(const struct ipk_conn *c)
{
	return IPK_MAX(flight(c) / 2u, 2u * c->mss);
}

void ipk_tcp_cc_init(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	IPK_UNUSED(ctx);
	/* RFC 6928 §2: IW = min(10*MSS, max(2*MSS, 14600)) */
	c->cwnd = IPK_MIN(10u * c->mss, IPK_MAX(2u * c->mss, 14600u));
	c->ssthresh = CWND_MAX; /* RFC 5681 §3.1: arbitrarily high */
	c->bytes_acked = 0;
	c->recover = c->iss;
	c->dupacks = 0;
	c->fl &= ~IPK_TCPF_RECOVERY;
}

static void grow(struct ipk_conn *c, uint32_t acked)
{
	if (c->cwnd < c->ssthresh) {
		/* RFC 3465 §2.2: slow start counts bytes, at most L*SMSS per ACK (L = 2). */
		c->cwnd += IPK_MIN(acked, 2u * c->mss);
	} else {
		/* RFC 3465 §2.1: one SMSS per cwnd of bytes acknowledged. */
		c->bytes_acked += acked;
		if (c->bytes_acked >= c->cwnd) {
			c->bytes_acked -= c->cwnd;
			c->cwnd += c->mss;
		}
	}
	if (c->cwnd > CWND_MAX)
		c->cwnd = CWND_MAX;
}

int ipk_tcp_cc_on_ack(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t ack, uint32_t acked)
{
	IPK_UNUSED(ctx);
	c->dupacks = 0;
	if (!(c->fl & IPK_TCPF_RECOVERY)) {
		grow(c, acked);
		return 0;
	}
	if (ipk_seq_ge(ack, c->recover)) {
		/* RFC 6582 §3.2 (3) full ACK, option (2): min(ssthresh, FlightSize + SMSS) */
		uint32_t fs = flight(c) > acked ? flight(c) - acked : 0;

		c->cwnd = IPK_MIN(c->ssthresh, IPK_MAX(fs, c->mss) + c->mss);
		c->fl &= ~IPK_TCPF_RECOVERY;
		return 0;
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
	IPK_UNUSED(ctx);
	if (c->dupacks < 0xffffu)
		c->dupacks++;
	if (c->fl & IPK_TCPF_RECOVERY) {
		/* RFC 6582 §3.2 (4): inflate for each segment that left the network. */
		if (c->cwnd < CWND_MAX)
			c->cwnd += c->mss;
		return 0;
	}
	/* RFC 6582 §3.2 (2): only when the ACK covers more than `recover`, so one loss
	 * episode causes one window reduction. */
	if (c->dupacks != 3 || !ipk_seq_gt(c->snd_una, c->recover))
		return 0;
	c->ssthresh = half_flight(c);
	c->recover = c->snd_max;
	c->cwnd = c->ssthresh + 3u * c->mss;
	c->fl |= IPK_TCPF_RECOVERY;
	return 1;
}

void ipk_tcp_cc_on_rto(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	IPK_UNUSED(ctx);
	/* RFC 5681 §3.1 (4) and the loss window of one segment. */
	c->ssthresh = half_flight(c);
	c->cwnd = c->mss;
	c->bytes_acked = 0;
	c->dupacks = 0;
	c->recover = c->snd_max;
	c->fl &= ~IPK_TCPF_RECOVERY;
}
