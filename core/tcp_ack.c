/*
 * When to acknowledge received data (RFC 9293 §3.8.6.3, RFC 5681 §4.2, RFC 1122
 * §4.2.3.2): at once for the first tcp_quickack segments of a connection and again
 * after out-of-order data (so slow start and loss recovery at the sender are not
 * slowed by our timer, as Linux does), otherwise at least every tcp_ack_every full
 * segments, and in between when the delayed-ACK timer fires.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

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
	c->segs_unacked = (uint16_t)IPK_MIN((uint32_t)c->segs_unacked + n, 0xffffu);
	if (c->quickack > 0) {
		c->quickack--;
		now = 1;
	}
	if (now || c->segs_unacked >= ctx->cfg.tcp_ack_every)
		c->fl |= IPK_TCPF_ACK_NOW;
	else
		c->fl |= IPK_TCPF_ACK_LATER;
}

void ipk_tcp_ack_ooo(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	/* RFC 5681 §4.2: a duplicate ACK at once for out-of-order data; stay quick
	 * while the hole is repaired so the sender sees every advance. */
	c->fl |= IPK_TCPF_ACK_NOW;
	c->quickack = ctx->cfg.tcp_quickack;
}
