/*
 * TCP: RFC 5961 challenge ACKs and their limits, and the limit on ACKs that answer
 * unacceptable segments (the ACK-loop guard).
 *
 * Two limits apply, as in Linux:
 *  - per connection, at most one ACK per cfg.tcp_invalid_ratelimit_ns answers a
 *    segment without data that we cannot accept (pure ACK, SYN, RST challenge).
 *    Two ends that disagree on a sequence number (a desynchronised peer, a middlebox
 *    rewriting sequence numbers) otherwise answer each other's ACK with an ACK at
 *    wire speed forever;
 *  - per context, RFC 5961 §7: at most cfg.tcp_challenge_ack_limit challenge ACKs a
 *    second, so a flood of forged RST/SYN/ACK cannot turn us into an amplifier.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

#define IPK_CHACK_PERIOD_NS 1000000000ull

/* Per-connection gap; returns 1 (and records the time) when an ACK may go now. A
 * valid oow_until lies at most the gap ahead; one further ahead is a tick from
 * 24.8 days or more ago read across the wrap, so it is over. */
static int oow_allowed(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	uint64_t gap = ctx->cfg.tcp_invalid_ratelimit_ns;

	if (gap == 0)
		return 1;
	if (c->oow_until) {
		uint64_t until = ipk_tcp_ms_ns(ctx, c->oow_until);

		if (ctx->now < until && until - ctx->now <= gap + IPK_TCP_NS_PER_MS)
			return 0;
	}
	c->oow_until = ipk_tcp_ms_at(ctx, gap);
	return 1;
}

/* RFC 5961 §7 with a randomised budget per second: a fixed global count lets an
 * off-path attacker learn whether its guess hit a window by counting the challenge
 * ACKs left in the second (CVE-2016-5696). */
static int chack_allowed(struct ipk_ctx *ctx)
{
	uint32_t lim = ctx->cfg.tcp_challenge_ack_limit;

	if (lim == 0)
		return 0;
	if (ctx->now >= ctx->chack_end) {
		ctx->chack_end = ctx->now + IPK_CHACK_PERIOD_NS;
		ctx->chack_n = 0;
		ctx->chack_budget = lim / 2u + IPK_OPS(ctx)->random(IPK_OPQ(ctx)) % lim + 1u;
	}
	if (ctx->chack_n >= ctx->chack_budget)
		return 0;
	ctx->chack_n++;
	return 1;
}

void ipk_tcp_challenge_ack(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	if (!oow_allowed(ctx, c)) {
		ctx->cnt.tcp_oow_acks_limited++;
		return;
	}
	if (!chack_allowed(ctx)) {
		ctx->cnt.tcp_challenge_acks_limited++;
		return;
	}
	ctx->cnt.tcp_challenge_acks++;
	c->fl |= IPK_TCPF_ACK_NOW;
}

void ipk_tcp_oow_ack(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s)
{
	/* Data or FIN (without SYN) is a retransmission our lost ACK caused: the peer
	 * needs the duplicate ACK at once (a FIN in TIME_WAIT, §3.10.7.4), and segments
	 * that occupy sequence space cannot form a loop by themselves. */
	if ((s->len > 0 || (s->h.flags & IPK_TCP_FIN)) && !(s->h.flags & IPK_TCP_SYN)) {
		c->fl |= IPK_TCPF_ACK_NOW;
		return;
	}
	if (!oow_allowed(ctx, c)) {
		ctx->cnt.tcp_oow_acks_limited++;
		return;
	}
	c->fl |= IPK_TCPF_ACK_NOW;
}

/* A duplicate of the SYN that opened a SYN-RECEIVED connection: our SYN-ACK was
 * lost, or the peer (or a forger with its address) repeats the SYN at line rate.
 * The first gets a SYN-ACK at once, later ones only one per tcp_invalid_ratelimit_ns,
 * as Linux's tcp_check_req does (tcp_oow_rate_limited on the request's
 * last_oow_ack_time, counted as TCPACKSkippedSynRecv); the SYN-ACK timer resends it
 * anyway. Without the limit each of 30 SYNs in a millisecond got its own SYN-ACK. */
int ipk_tcp_synack_again_allowed(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	if (oow_allowed(ctx, c))
		return 1;
	ctx->cnt.tcp_synack_dup_limited++;
	return 0;
}

/* tcp_rst_limit RSTs per second of our clock for segments (not for ipk_tcp_abort):
 * a fixed window, as for challenge ACKs. */
int ipk_tcp_rst_allowed(struct ipk_ctx *ctx)
{
	uint32_t lim = ctx->cfg.tcp_rst_limit;

	if (lim == 0)
		return 1;
	if (ctx->now >= ctx->rst_end) {
		ctx->rst_end = ctx->now + IPK_CHACK_PERIOD_NS;
		ctx->rst_n = 0;
	}
	if (ctx->rst_n >= lim) {
		ctx->cnt.tcp_rst_limited++;
		return 0;
	}
	ctx->rst_n++;
	return 1;
}

int ipk_tcp_ack_valid(const struct ipk_conn *c, uint32_t ack)
{
	/* RFC 5961 §5.2: MAX.SND.WND is the largest window the peer has offered; an
	 * ACK further back than that cannot come from the peer we talk to. */
	if (ipk_seq_gt(ack, c->snd_max))
		return 0;
	return ipk_seq_ge(ack, c->snd_una - c->max_sndwnd);
}
