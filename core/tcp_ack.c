/*
 * When to acknowledge received data (RFC 9293 §3.8.6.3, RFC 5681 §4.2, RFC 1122
 * §4.2.3.2): at once for the first tcp_quickack segments of a connection and again
 * after out-of-order data (so slow start and loss recovery at the sender are not
 * slowed by our timer, as Linux does), otherwise at least every tcp_ack_every full
 * segments, and in between when the delayed-ACK timer fires.
 *
 * "Every tcp_ack_every segments" is counted per receive batch: when ipk_run has
 * more frames after the one that reached the count, the ACK waits for the end of
 * the batch and then covers all of it (one connection at a time, and only while
 * the unacknowledged data is at most a quarter of the window we offered; any other
 * ACKs at once as before). With coalesced 64 KiB frames (LRO/GRO, a TAP's GSO frames) each
 * frame alone reaches the count, and one ACK per frame cost the receiver a write
 * and the sender a read and a send-loop pass each, while every ACK opened the
 * window by one frame only, so the sender's next TSO frames stayed small. The
 * wait is bounded by one ipk_run call (a backend's burst, microseconds), far
 * inside RFC 1122 §4.2.3.2's 0.5 s, and the cumulative ACK acknowledges every
 * segment of the batch (RFC 5681 §4.2 asks for at least every second full one;
 * like GRO, this trades that for fewer ACKs when segments arrive back to back).
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

/* 1: c's count-due ACK waits for the end of ipk_run's batch (ipk_tcp_ack_batch_end). */
static int ack_defer(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t mss)
{
	/* Not acknowledged yet (counted in segments, so rounded up): at most a quarter
	 * of the window we last offered (that plus what the sender has left), so the
	 * sender is never held up by a long batch. */
	uint64_t unacked = (uint64_t)c->segs_unacked * mss;
	uint32_t left = ipk_seq_lt(c->rcv_nxt, c->rcv_adv) ? c->rcv_adv - c->rcv_nxt : 0;

	if (!ctx->rx_more || (ctx->ack_c && ctx->ack_c != c) || 3u * unacked > left)
		return 0;
	if (!ctx->ack_c) {
		ipk_tcp_hold(c); /* a later frame of the batch may reset it */
		ctx->ack_c = c;
	}
	return 1;
}

IPK_HOT void ipk_tcp_ack_data(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t len, int hole_filled)
{
	/* A coalesced (LRO) segment counts as the segments it was made of: a
	 * 1448 + 104 byte pair is two, as it was on the wire (rounding down made it
	 * one, so the ACK waited for the delayed-ACK timer while the sender, with more
	 * than one MSS out, probed first: RFC 8985 §7.2's PTO has no delayed-ACK
	 * allowance then). */
	uint32_t mss = ipk_tcp_rcv_mss(ctx), n = 1;
	int now = hole_filled || ctx->cfg.tcp_delack_ns == 0;

	if (len == 0)
		return;
	if (len > mss && mss) /* a division only for a coalesced segment */
		n = (len + mss - 1u) / mss;
	n += c->segs_unacked;
	c->segs_unacked = (uint16_t)(n > 0xffffu ? 0xffffu : n);
	if (c->quickack > 0) {
		c->quickack--;
		now = 1;
	}
	if (now || (c->segs_unacked >= ctx->cfg.tcp_ack_every && !ack_defer(ctx, c, mss)))
		c->fl |= IPK_TCPF_ACK_NOW;
	else
		c->fl |= IPK_TCPF_ACK_LATER;
}

void ipk_tcp_ack_batch_end(struct ipk_ctx *ctx)
{
	struct ipk_conn *c = ctx->ack_c;

	if (!c)
		return;
	ctx->ack_c = NULL;
	/* An ACK sent since (piggy-backed, or for another reason) cleared the count. */
	if (!(c->fl & IPK_TCPF_ZOMBIE) && c->segs_unacked >= ctx->cfg.tcp_ack_every) {
		c->fl |= IPK_TCPF_ACK_NOW;
		ipk_tcp_output(ctx, c);
	}
	ipk_tcp_release(ctx, c);
}

void ipk_tcp_ack_ooo(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	/* RFC 5681 §4.2: a duplicate ACK at once for out-of-order data; stay quick
	 * while the hole is repaired so the sender sees every advance. */
	c->fl |= IPK_TCPF_ACK_NOW;
	c->quickack = ctx->cfg.tcp_quickack;
}
