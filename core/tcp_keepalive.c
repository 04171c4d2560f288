/*
 * TCP keep-alive (RFC 1122 §4.2.3.6): off unless asked for; after an idle interval
 * with nothing outstanding, probe with an old sequence number so that a live peer
 * must answer with an ACK; after tcp_keepalive_cnt silent probes the peer is dead.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

static int keepalive_state(const struct ipk_conn *c)
{
	return c->state == IPK_TCP_ESTABLISHED || c->state == IPK_TCP_CLOSE_WAIT ||
	       c->state == IPK_TCP_FIN_WAIT_2;
}

void ipk_tcp_keepalive_restart(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	c->nkeepalive = 0;
	if ((c->fl & IPK_TCPF_KEEPALIVE) && keepalive_state(c))
		c->keepalive_at = ipk_tcp_ms_at(ctx, ctx->cfg.tcp_keepalive_idle_ns);
	else
		c->keepalive_at = 0;
}

int ipk_tcp_keepalive_fire(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	c->keepalive_at = 0;
	if (!(c->fl & IPK_TCPF_KEEPALIVE) || !keepalive_state(c))
		return 0;
	/* RFC 1122 §4.2.3.6: only when no data is outstanding or queued; otherwise the
	 * retransmission or persist timer watches the peer. */
	if (c->snd_una != c->snd_max || ipk_seq_lt(c->snd_nxt, ipk_tcp_data_end(c))) {
		ipk_tcp_keepalive_restart(ctx, c);
		return 0;
	}
	if (c->nkeepalive >= ctx->cfg.tcp_keepalive_cnt) {
		/* as Linux's tcp_keepalive_timer: a peer only cut off for a while learns
		 * that the connection is gone when the path comes back */
		ipk_tcp_send_rst_conn(ctx, c);
		ipk_tcp_destroy(ctx, c, IPK_CLOSE_TIMEOUT);
		return 1;
	}
	/* SEG.SEQ = SND.NXT - 1 with no data: unacceptable to the peer, which answers
	 * with an ACK (RFC 9293 §3.10.7.4). */
	if (ipk_tcp_xmit(ctx, c, c->snd_nxt - 1u, 0, IPK_TCP_X_PROBE) < 0) {
		c->keepalive_at = ipk_tcp_ms_at(ctx, ipk_tcp_retry_ns(ctx, c));
		return 0;
	}
	if (c->nkeepalive < 0xffu)
		c->nkeepalive++;
	c->keepalive_at = ipk_tcp_ms_at(ctx, ctx->cfg.tcp_keepalive_intvl_ns);
	return 0;
}
