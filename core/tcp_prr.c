/*
 * Proportional Rate Reduction (RFC 6937): how much a sender may send on each ACK
 * during fast recovery, for SACK recovery (RFC 6675, tcp_sb.c) and NewReno (RFC
 * 6582, tcp_cc.c) alike. PRR spreads the window reduction over the recovery round
 * trip instead of sending nothing and then a burst (RFC 6675 with a large loss) or
 * bursting retransmissions when many holes are marked lost at once, and it ends
 * recovery with the flight close to ssthresh.
 *
 * The per-episode counters live in the connection's extension record (tcp.h), drawn
 * at recovery entry when the connection has none and returned when nothing else
 * needs it, so an idle connection carries none of them; it also
 * remembers the episode's RFC 6675 rescue retransmission (tcp_sb.c). When the pool
 * is empty the episode runs without PRR (cwnd = ssthresh, as RFC 6675 §5 has it).
 *
 * The engine's send paths allow cwnd - pipe; PRR's output is sndcnt, so on each ACK
 * cwnd is set to pipe + sndcnt (RFC 6937 §3: "cwnd = pipe + sndcnt").
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

/* RFC 6937 §3: on entering recovery prr_delivered = prr_out = 0 and
 * RecoverFS = snd.nxt - snd.una (the flight when the reduction starts). */
void ipk_tcp_prr_start(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	struct ipk_pb *r = ipk_tcp_x_get(ctx, c);

	if (!r)
		return; /* counted by the pool; this episode goes without PRR */
	IPK_RCVY_DELIVERED(r) = 0;
	IPK_RCVY_OUT(r) = 0;
	IPK_RCVY_FS(r) = c->snd_max - c->snd_una;
	IPK_RCVY_FLAGS(r) = IPK_RCVY_F_ON;
	IPK_RCVY_RENO_SACKED(r) = 0;
}

void ipk_tcp_prr_end(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	if (!c->x)
		return;
	IPK_RCVY_FLAGS(c->x) = 0;
	ipk_tcp_x_trim(ctx, c);
}

uint32_t ipk_tcp_prr_sndcnt(uint32_t prr_delivered, uint32_t prr_out, uint32_t recover_fs,
                            uint32_t ssthresh, uint32_t pipe, uint32_t delivered, uint32_t mss,
                            int crb)
{
	uint64_t lim;

	if (pipe > ssthresh) {
		/* RFC 6937 §3 PRR: sndcnt = CEIL(prr_delivered * ssthresh / RecoverFS) - prr_out.
		 * The RFC counts in segments; in bytes the CEIL is taken to whole segments,
		 * so that this sender, which sends whole segments, sends on the same ACKs as
		 * the RFC's examples (a bare byte CEIL would wait for a second ACK). */
		uint64_t fs = recover_fs ? recover_fs : 1u, m = mss ? mss : 1u;

		lim = ((uint64_t)prr_delivered * ssthresh + fs - 1u) / fs;
		lim = (lim + m - 1u) / m * m;
		return lim > prr_out ? (uint32_t)IPK_MIN(lim - prr_out, 0xffffffffull) : 0u;
	}
	/* RFC 6937 §3 reduction bound: PRR-CRB sends no more than was delivered (packet
	 * conservation); PRR-SSRB may also grow by one MSS per ACK, as slow start would,
	 * to catch up when pipe fell below ssthresh (many losses). */
	lim = prr_delivered > prr_out ? prr_delivered - prr_out : 0u;
	if (!crb)
		lim = IPK_MAX(lim, (uint64_t)delivered) + mss;
	return (uint32_t)IPK_MIN(lim, (uint64_t)(ssthresh - pipe));
}

void ipk_tcp_prr_ack(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t delivered, uint32_t pipe,
                     uint32_t base)
{
	struct ipk_pb *r = ipk_tcp_rcvy(c);
	uint32_t snd;

	if (!ipk_tcp_prr_active(ctx, c))
		return;
	IPK_RCVY_DELIVERED(r) += delivered;
	snd = ipk_tcp_prr_sndcnt(IPK_RCVY_DELIVERED(r), IPK_RCVY_OUT(r), IPK_RCVY_FS(r), c->ssthresh,
	                         pipe, delivered, c->mss, ctx->cfg.tcp_prr == IPK_PRR_CRB);
	/* RFC 5681 §3.2 (2) / RFC 6675 §5 (4.3): the first ACK of the episode always
	 * releases the fast retransmission, whatever the proportion says. */
	if (IPK_RCVY_OUT(r) == 0 && snd < c->mss)
		snd = c->mss;
	c->cwnd = IPK_MIN(base + snd, IPK_TCP_CWND_MAX);
}

void ipk_tcp_prr_sent(const struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t seq, uint32_t len)
{
	struct ipk_pb *r = ipk_tcp_rcvy(c);

	if (!ipk_tcp_prr_active(ctx, c) || len == 0)
		return;
	IPK_RCVY_OUT(r) += len;
	/* Without a scoreboard (NewReno) the flight does not grow when a segment is
	 * sent again, so the budget the retransmission used comes off cwnd here; with
	 * one, pipe grows by the retransmitted bytes by itself (RFC 6675 §4). */
	if (!(c->fl & IPK_TCPF_SACK_RCVY) && ipk_seq_lt(seq, c->snd_max))
		c->cwnd = c->cwnd > len ? c->cwnd - len : 0u;
}
