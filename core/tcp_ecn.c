/*
 * Explicit Congestion Notification for TCP (RFC 3168 §6.1), optional
 * (cfg.tcp_ecn). Negotiated in the handshake; then new data goes out ECT(0), a
 * receiver that sees CE echoes ECE until the sender's CWR, and the sender answers
 * ECE with one congestion-window reduction per window of data.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

uint8_t ipk_tcp_ecn_syn_flags(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	/* RFC 3168 §6.1.1: an ECN-setup SYN carries ECE and CWR, an ECN-setup SYN-ACK
	 * ECE only, and only in answer to an ECN-setup SYN. */
	if (c->state == IPK_TCP_SYN_SENT)
		return ctx->cfg.tcp_ecn ? (uint8_t)(IPK_TCP_ECE | IPK_TCP_CWR) : 0u;
	return (c->fl & IPK_TCPF_ECN) ? (uint8_t)IPK_TCP_ECE : 0u;
}

void ipk_tcp_ecn_syn_in(struct ipk_ctx *ctx, struct ipk_conn *c, uint8_t flags)
{
	uint8_t want = c->state == IPK_TCP_SYN_SENT && (flags & IPK_TCP_ACK) ?
	                       (uint8_t)IPK_TCP_ECE :
	                       (uint8_t)(IPK_TCP_ECE | IPK_TCP_CWR);

	c->fl &= ~IPK_TCPF_ECN;
	if (ctx->cfg.tcp_ecn && (flags & (IPK_TCP_ECE | IPK_TCP_CWR)) == want)
		c->fl |= IPK_TCPF_ECN;
}

void ipk_tcp_ecn_rx(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s)
{
	IPK_UNUSED(ctx);
	if (!(c->fl & IPK_TCPF_ECN))
		return;
	/* RFC 3168 §6.1.3: CWR ends the echo; a CE on this same packet starts it again. */
	if (s->h.flags & IPK_TCP_CWR)
		c->fl &= ~IPK_TCPF_ECE_OUT;
	if ((s->tos & 0x3u) == IPK_ECN_CE)
		c->fl |= IPK_TCPF_ECE_OUT | IPK_TCPF_ACK_NOW;
}

void ipk_tcp_ecn_ack(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s)
{
	if (!(c->fl & IPK_TCPF_ECN) || !(s->h.flags & IPK_TCP_ECE) ||
	    (s->h.flags & IPK_TCP_SYN))
		return;
	/* RFC 3168 §6.1.2: react once per window of data, and not while loss
	 * recovery has already reduced the window. */
	if (c->fl & (IPK_TCPF_RECOVERY | IPK_TCPF_SACK_RCVY))
		return;
	/* ecn_high means something only after a first reduction: compared unset, it
	 * made half of all initial sequence numbers look "inside the last window". */
	if ((c->fl & IPK_TCPF_ECN_WND) && ipk_seq_lt(c->snd_una, c->ecn_high))
		return;
	ipk_tcp_cc_congestion(ctx, c, IPK_CC_EV_ECN);
	c->ecn_high = c->snd_max;
	c->fl |= IPK_TCPF_ECN_WND;
	c->fl |= IPK_TCPF_CWR_OUT;
}

uint8_t ipk_tcp_ecn_out(struct ipk_conn *c, uint32_t seq, uint32_t len, unsigned how,
                        uint8_t *tos)
{
	uint8_t f = 0;

	*tos = 0;
	if (!(c->fl & IPK_TCPF_ECN))
		return 0;
	if (c->fl & IPK_TCPF_ECE_OUT)
		f |= IPK_TCP_ECE;
	/* RFC 3168 §6.1.4-§6.1.6: ECT only on new data; never on pure ACKs,
	 * retransmissions or window probes. */
	if (len == 0 || ipk_seq_lt(seq, c->snd_max) || (how & IPK_TCP_X_PROBE))
		return f;
	*tos = IPK_ECN_ECT0;
	if (c->fl & IPK_TCPF_CWR_OUT) {
		/* RFC 3168 §6.1.2: CWR on the first new data packet after the reduction. */
		f |= IPK_TCP_CWR; /* cleared by the caller once the segment is out */
	}
	return f;
}
