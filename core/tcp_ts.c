/*
 * TCP timestamps (RFC 7323): negotiation, TSval from the caller's clock, TS.Recent,
 * RTT measurement from TSecr, and PAWS.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

/* RFC 7323 §5.5: TS.Recent older than 24 days is invalid (in ms of our clock). */
#define PAWS_IDLE_MS (24ull * 24ull * 3600ull * 1000ull)

static uint32_t ts_clock_ms(const struct ipk_ctx *ctx) { return ipk_tcp_ts_clock_ms(ctx); }

void ipk_tcp_ts_syn(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_opts *o)
{
	/* RFC 7323 §3.2: both SYNs must carry TS; a SYN-ACK offers it only when asked. */
	if (!o->has_ts || !ctx->cfg.tcp_timestamps) {
		c->fl &= ~IPK_TCPF_TS_OK;
		return;
	}
	c->fl |= IPK_TCPF_TS_OK;
	c->ts_recent = o->tsval;
	c->ts_recent_ms = ts_clock_ms(ctx);
}

/*
 * RFC 7323 §5.3 R1 and §5.5 (PAWS), and §3.2: once both SYNs carried TSopt, "if a
 * non-<RST> segment is received without a TSopt, a TCP SHOULD silently drop the
 * segment" (and MUST NOT abort the connection for it). Silently: no ACK, so a forger
 * learns nothing and cannot start an ACK exchange. FreeBSD does the same
 * (net.inet.tcp.tolerate_missing_ts = 0); Linux accepts such segments
 * (tcp_validate_incoming applies PAWS only when a timestamp was seen). One function
 * for both: the tests the full path made before decide both. Header prediction never
 * gets here: it takes only segments with the expected timestamp.
 */
int ipk_tcp_paws_reject(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s)
{
	if (!(c->fl & IPK_TCPF_TS_OK) || (s->h.flags & IPK_TCP_RST))
		return 0;
	if (!s->o.has_ts) {
		ipk_drop(ctx, IPK_DROP_TCP_NO_TS);
		return IPK_TCP_TS_MISSING;
	}
	if (!ipk_seq_lt(s->o.tsval, c->ts_recent))
		return 0;
	if ((uint64_t)(uint32_t)(ts_clock_ms(ctx) - c->ts_recent_ms) > PAWS_IDLE_MS) {
		/* §5.5: after 24 idle days TS.Recent says nothing; take the segment's. */
		c->ts_recent = s->o.tsval;
		c->ts_recent_ms = ts_clock_ms(ctx);
		return 0;
	}
	ctx->cnt.tcp_paws_drops++;
	ipk_drop(ctx, IPK_DROP_TCP_PAWS);
	return IPK_TCP_PAWS_OLD;
}

/* RFC 7323 §4.3 (2): SEG.SEQ <= Last.ACK.sent, which is rcv_nxt before this segment's
 * text is taken (the ACK we owe has not gone out yet). */
IPK_HOT void ipk_tcp_ts_recent(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s)
{
	if (!(c->fl & IPK_TCPF_TS_OK) || !s->o.has_ts)
		return;
	if (ipk_seq_le(s->h.seq, c->rcv_nxt) && ipk_seq_ge(s->o.tsval, c->ts_recent))
		ipk_tcp_ts_recent_take(ctx, c, s->o.tsval);
}
