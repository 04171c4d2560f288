/*
 * TCP input: segment validation, demultiplexing, and the RFC 9293 §3.10.7 "segment
 * arrives" processing, split by state and by step so each rule sits in one function.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

/* ------------------------------------------------------------- parsing */

/* A chained segment (IPK_CAP_LRO, or a reassembled datagram) is kept as a chain:
 * its payload goes to the application piece by piece (deliver). Only its TCP header
 * must sit in the first packet; when it does not (a first fragment of 8 bytes), copy
 * the segment into one packet if it fits. Returns the packet to use or NULL (counted,
 * freed). */
static void *hdr_flat(struct ipk_ctx *ctx, void *pkt, const struct ipk_rx *rx)
{
	uint32_t first, total, doff;
	void *one;

	if (!rx->chained)
		return pkt;
	first = ipk_pkt_len(ctx, pkt);
	total = ipk_pkt_chain_len(ctx, pkt);
	/* Nothing from the wire is trusted: the chain must hold what ip4 says. */
	if (rx->l4_off > total || rx->l4_len > total - rx->l4_off || rx->l4_len < IPK_TCP_HLEN) {
		ipk_drop_pkt(ctx, pkt, IPK_DROP_TCP_MALFORMED);
		return NULL;
	}
	if (rx->l4_off + IPK_TCP_HLEN <= first) {
		doff = (uint32_t)(ipk_pkt_data(ctx, pkt)[rx->l4_off + 12] >> 4) * 4u;
		if (rx->l4_off + doff <= first)
			return pkt;
	}
	total = rx->l4_off + rx->l4_len;
	one = total <= ctx->cfg.pkt_buf_size ? ipk_pkt_alloc(ctx) : NULL;
	if (!one) {
		ipk_drop_pkt(ctx, pkt, IPK_DROP_CHAIN);
		return NULL;
	}
	ipk_pkt_set_len(ctx, one, total);
	ipk_pkt_copy(ctx, pkt, 0, ipk_pkt_data(ctx, one), total);
	ipk_pkt_free_chain(ctx, pkt);
	return one;
}

/* RFC 9293 §3.1: the checksum over pseudo-header and segment, 0 when right. A flat
 * segment (here == l4_len bytes in the first packet) in one pass and one fold. */
static uint16_t seg_csum_rx(struct ipk_ctx *ctx, void *pkt, const struct ipk_rx *rx,
                         const uint8_t *p, uint32_t here)
{
	int odd = 0;
	uint32_t sum;

	if (here == rx->l4_len)
		return ipk_csum_l4(rx->src_be, rx->dst_be, IPK_IPPROTO_TCP, p, rx->l4_len);
	sum = ipk_csum_pseudo(rx->src_be, rx->dst_be, IPK_IPPROTO_TCP, rx->l4_len);
	return ipk_csum_fold(ipk_csum_chain(ctx, pkt, rx->l4_off, rx->l4_len, sum, &odd));
}

/* Returns IPK_DROP__COUNT when the segment is sound, else the drop reason. The
 * header is in the first packet (hdr_flat), the payload may run on in a chain
 * whose length hdr_flat checked (or made flat). */
static enum ipk_drop seg_parse(struct ipk_ctx *ctx, void *pkt, const struct ipk_rx *rx,
                               struct ipk_tcp_seg *s)
{
	uint32_t plen = ipk_pkt_len(ctx, pkt), here;
	const uint8_t *p;
	int ts_only;

	if (rx->l4_off > plen || rx->l4_len < IPK_TCP_HLEN)
		return IPK_DROP_TCP_MALFORMED;
	here = plen - rx->l4_off; /* transport bytes in the first packet */
	if (here >= rx->l4_len)
		here = rx->l4_len;
	else if (!rx->chained)
		return IPK_DROP_TCP_MALFORMED;
	p = ipk_pkt_data(ctx, pkt) + rx->l4_off;
	/* Parsing sees the first packet's bytes only: a data offset past them fails.
	 * The usual NOP,NOP,TS header is taken in one step, options included. */
	ts_only = ipk_tcp_parse_ts(p, here, &s->h, &s->o);
	if ((!ts_only && ipk_tcp_parse(p, here, &s->h) < 0) || s->h.sport_be == 0 ||
	    s->h.dport_be == 0)
		return IPK_DROP_TCP_MALFORMED;
	if (!rx->l4_csum_ok && seg_csum_rx(ctx, pkt, rx, p, here) != 0)
		return IPK_DROP_TCP_CSUM;
	if (!ts_only &&
	    ipk_tcp_opts_parse(p + IPK_TCP_HLEN, (uint32_t)s->h.doff - IPK_TCP_HLEN, &s->o) < 0)
		return IPK_DROP_TCP_MALFORMED;
	/* SYN with RST or FIN has no meaning in any state. */
	if ((s->h.flags & IPK_TCP_SYN) && (s->h.flags & (IPK_TCP_RST | IPK_TCP_FIN)))
		return IPK_DROP_TCP_BAD_FLAGS;
	if (rx->is_bcast)
		return IPK_DROP_NOT_FOR_US;
	s->pkt = pkt;
	s->poff = rx->l4_off + s->h.doff;
	s->len = rx->l4_len - s->h.doff;
	s->src_be = rx->src_be;
	s->dst_be = rx->dst_be;
	s->tos = rx->tos;
	s->ts_only = (uint8_t)ts_only;
	return IPK_DROP__COUNT;
}

/*
 * A parsed, checksummed segment to its connection, or to the listeners when none
 * matches (RFC 9293 §3.10.7), counted once. ipk_tcp_lookup's last-hit test is inline;
 * the hash only for another flow.
 */
static IPK_ALWAYS_INLINE void seg_dispatch(struct ipk_ctx *ctx, struct ipk_tcp_seg *s)
{
	struct ipk_conn *c = ctx->last_c;

	ctx->cnt.tcp_rx_segs++;
	if (!c || c->t.peer_ip4_be != s->src_be || c->t.peer_port_be != s->h.sport_be ||
	    c->t.local_port_be != s->h.dport_be || c->t.local_ip4_be != s->dst_be)
		c = ipk_tcp_lookup(ctx, s->dst_be, s->h.dport_be, s->src_be, s->h.sport_be);
	if (c)
		ipk_tcp_input_conn(ctx, c, s);
	else
		ipk_tcp_input_listen(ctx, s);
}

/*
 * Entry from ip4.c; takes ownership of pkt. The packet is freed here after the
 * segment is processed, unless the out-of-order queue kept it (s.pkt set to NULL).
 */
IPK_HOT void ipk_tcp_input(struct ipk_ctx *ctx, void *pkt, const struct ipk_rx *rx)
{
	struct ipk_tcp_seg s;
	enum ipk_drop why;

	pkt = hdr_flat(ctx, pkt, rx);
	if (!pkt)
		return;
	why = seg_parse(ctx, pkt, rx, &s);
	if (why != IPK_DROP__COUNT) {
		ipk_drop_pkt(ctx, pkt, why);
		return;
	}
	seg_dispatch(ctx, &s);
	if (s.pkt)
		ipk_pkt_release(ctx, s.pkt);
}

/* -------------------------------------------------------------- LISTEN */

/* A segment for no connection: RST it (RFC 9293 §3.10.7.1) and count. */
static void no_conn(struct ipk_ctx *ctx, struct ipk_tcp_seg *s)
{
	if (s->h.flags & IPK_TCP_RST)
		ctx->cnt.tcp_rst_rx++;
	ipk_tcp_send_rst_for(ctx, s);
	ipk_drop(ctx, IPK_DROP_TCP_NO_CONN);
}

/* ops->tcp_accept's (tcp_accept6's) answer for t: > 0 take it, 0 refuse, < 0
 * no room now. */
static int accept_verdict(struct ipk_ctx *ctx, const struct ipk_tuple *t)
{
	struct ipk_atuple at;

	if (ipk_tcp_is6(t)) {
		if (!IPK_OPS(ctx)->tcp_accept6)
			return 1;
		return ipk_tcp6_atuple(ctx, t, &at) == IPK_OK
		               ? IPK_OPS(ctx)->tcp_accept6(ctx, &at, IPK_OPQ(ctx))
		               : 0;
	}
	return IPK_OPS(ctx)->tcp_accept ? IPK_OPS(ctx)->tcp_accept(ctx, t, IPK_OPQ(ctx)) : 1;
}

/* The verdict on a SYN: a refused one gets a RST, one the application has no
 * room for now (a negative answer) none: the peer sends it again. */
static int accept_ok(struct ipk_ctx *ctx, struct ipk_tcp_seg *s)
{
	struct ipk_tuple t;
	int v;

	t.local_ip4_be = s->dst_be;
	t.peer_ip4_be = s->src_be;
	t.local_port_be = s->h.dport_be;
	t.peer_port_be = s->h.sport_be;
	v = accept_verdict(ctx, &t);
	if (v > 0)
		return 1;
	if (v < 0) {
		ipk_drop(ctx, IPK_DROP_TCP_BACKLOG);
		return 0;
	}
	ipk_tcp_send_rst_for(ctx, s);
	ipk_drop(ctx, IPK_DROP_TCP_REFUSED);
	return 0;
}

static void passive_open(struct ipk_ctx *ctx, struct ipk_tcp_seg *s, int idx)
{
	struct ipk_tuple t;
	struct ipk_conn *c;

	t.local_ip4_be = s->dst_be;
	t.peer_ip4_be = s->src_be;
	t.local_port_be = s->h.dport_be;
	t.peer_port_be = s->h.sport_be;
	c = ipk_tcp_conn_take(ctx);
	if (!c) {
		ipk_drop(ctx, IPK_DROP_NO_CONN_MEM);
		return;
	}
	if (ipk_tcp_conn_setup(ctx, c, &t) != IPK_OK) {
		ipk_conn_put(ctx, c); /* the pair table is full (counted) */
		return;
	}
	c->rcv_nxt = s->h.seq + 1u;
	ipk_tcp_syn_opts(ctx, c, &s->o);
	ipk_tcp_ecn_syn_in(ctx, c, s->h.flags);
	c->snd_wnd = c->max_sndwnd = s->h.wnd; /* RFC 7323 §2.2: SYN window unscaled */
	c->snd_wl1 = s->h.seq;
	c->fl |= IPK_TCPF_BACKLOG;
	ctx->listeners[idx].pending++;
	ctx->synrecv_n++;
	ipk_tcp_enter(ctx, c, IPK_TCP_SYN_RECEIVED);
	ipk_tcp_hash_insert(ctx, c);
	ctx->cnt.tcp_passive_opens++;
	ipk_tcp_hold(c);
	ipk_tcp_output(ctx, c); /* SYN-ACK */
	ipk_tcp_release(ctx, c);
}

/* RFC 9293 §3.10.7.2 (LISTEN), or §3.10.7.1 when nobody listens. */
void ipk_tcp_input_listen(struct ipk_ctx *ctx, struct ipk_tcp_seg *s)
{
	int idx;
	uint8_t f = s->h.flags;

	/* core.h rx_peek: before the listeners are looked at (it may listen) */
	if (IPK_OPS(ctx)->rx_peek && s->pkt)
		IPK_OPS(ctx)->rx_peek(ctx, s->pkt, IPK_OPQ(ctx));
	idx = ipk_tcp_listener_find(ctx, s->h.dport_be);

	/* a listener of one family (ipk_tcp_listen_family) is closed to the other */
	if (idx >= 0 && ctx->listeners[idx].family &&
	    (ctx->listeners[idx].family == IPK_AF_INET6) != (s->src_be == IPK_TCP6_MARK))
		idx = -1;

	if (idx >= 0 && (f & (IPK_TCP_SYN | IPK_TCP_RST | IPK_TCP_ACK)) == IPK_TCP_ACK) {
		/* RFC 4987 §3.6: an ACK that returns one of our SYN cookies. */
		struct ipk_conn *c;

		if (ipk_tcp_cookie_check(ctx, s, &c)) {
			if (c)
				ipk_tcp_input_conn(ctx, c, s);
			return;
		}
	}
	if (idx < 0 || (f & (IPK_TCP_RST | IPK_TCP_ACK))) {
		no_conn(ctx, s);
		return;
	}
	if (!(f & IPK_TCP_SYN)) {
		ipk_drop(ctx, IPK_DROP_TCP_BAD_FLAGS);
		return;
	}
	if (!accept_ok(ctx, s))
		return;
	if (ipk_tcp_cookie_wanted(ctx, idx)) {
		ipk_tcp_cookie_synack(ctx, s);
		return;
	}
	if (ipk_tcp_synq_full(ctx, idx)) {
		ipk_drop(ctx, IPK_DROP_TCP_BACKLOG);
		return;
	}
	passive_open(ctx, s, idx);
}

/* ------------------------------------------------------------- helpers */

static int zombie(const struct ipk_conn *c)
{
	return (c->fl & IPK_TCPF_ZOMBIE) != 0 || c->state == IPK_TCP_CLOSED;
}

static void ack_now(struct ipk_conn *c)
{
	c->fl |= IPK_TCPF_ACK_NOW;
}

/* Peer's window from a non-SYN segment (RFC 7323 §2.3 scaling). */
static uint32_t seg_wnd(const struct ipk_conn *c, const struct ipk_tcp_seg *s)
{
	return (uint32_t)s->h.wnd << c->snd_wscale;
}

static void announce(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	const struct ipk_ops *ops = IPK_OPS(ctx);

	c->fl |= IPK_TCPF_ANNOUNCED;
	if (c->fl & IPK_TCPF_ACTIVE) {
		if (ops->tcp_connected)
			ops->tcp_connected(ctx, c, c->user, IPK_OPQ(ctx));
	} else if (ops->tcp_accepted) {
		c->user = ops->tcp_accepted(ctx, c, IPK_OPQ(ctx));
	}
}

/* RFC 9293 §3.10.7.4: TIME-WAIT lasts 2*MSL from the last FIN seen. */
static void tw_arm(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	c->rtx_at = ipk_tcp_us_at(ctx, ctx->cfg.tcp_time_wait_ns);
}

static void enter_time_wait(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	ipk_tcp_enter(ctx, c, IPK_TCP_TIME_WAIT);
	ipk_tcp_persist_stop(c);
	c->retry_at = c->delack_at = 0;
	tw_arm(ctx, c);
	ipk_tcp_queues_free(ctx, c);
	ipk_tcp_tw_link(ctx, c);
	/* The application is done with it; the object lives on for 2*MSL. */
	ipk_tcp_report_closed(ctx, c, IPK_CLOSE_NORMAL);
}

/* ------------------------------------------------------------ SYN-SENT */

static void syn_sent_established(struct ipk_ctx *ctx, struct ipk_conn *c,
                                 const struct ipk_tcp_seg *s)
{
	c->snd_una = s->h.ack;
	if (ipk_seq_lt(c->snd_nxt, c->snd_una))
		c->snd_nxt = c->snd_una;
	if ((c->fl & IPK_TCPF_RTT_ON) && ipk_seq_ge(s->h.ack, c->rtt_seq)) {
		c->fl &= ~IPK_TCPF_RTT_ON;
		ipk_tcp_rtt_sample_us(ctx, c, ipk_tcp_rtt_elapsed_us(ctx, c));
	}
	ipk_tcp_loss_stop(c);
	ipk_tcp_rto_reset(ctx, c);
	ipk_tcp_enter(ctx, c, (c->fl & IPK_TCPF_FIN_QUEUED) ? IPK_TCP_FIN_WAIT_1 :
	                                                         IPK_TCP_ESTABLISHED);
	ipk_tcp_keepalive_restart(ctx, c);
	ack_now(c);
	announce(ctx, c);
}

/* RFC 9293 §3.10.7.3 */
static void input_syn_sent(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_tcp_seg *s)
{
	uint8_t f = s->h.flags;

	if ((f & IPK_TCP_ACK) &&
	    (ipk_seq_le(s->h.ack, c->iss) || ipk_seq_gt(s->h.ack, c->snd_max))) {
		ipk_tcp_send_rst_for(ctx, s);
		ipk_drop(ctx, IPK_DROP_TCP_BAD_ACK);
		return;
	}
	if (f & IPK_TCP_RST) {
		ctx->cnt.tcp_rst_rx++;
		if (f & IPK_TCP_ACK)
			ipk_tcp_destroy(ctx, c, IPK_CLOSE_REFUSED);
		else
			ipk_drop(ctx, IPK_DROP_TCP_BAD_FLAGS);
		return;
	}
	if (!(f & IPK_TCP_SYN)) {
		ipk_drop(ctx, IPK_DROP_TCP_BAD_FLAGS);
		return;
	}
	c->rcv_nxt = s->h.seq + 1u;
	c->rcv_adv = c->rcv_nxt + IPK_MIN(ctx->cfg.tcp_rcvbuf, 0xffffu);
	ipk_tcp_syn_opts(ctx, c, &s->o);
	ipk_tcp_ecn_syn_in(ctx, c, f);
	c->snd_wnd = c->max_sndwnd = s->h.wnd; /* unscaled in a SYN (RFC 7323 §2.2) */
	c->snd_wl1 = s->h.seq;
	if (f & IPK_TCP_ACK) {
		syn_sent_established(ctx, c, s);
		return;
	}
	/* Simultaneous open: SYN-RECEIVED, answer with SYN-ACK from our ISS. */
	ipk_tcp_enter(ctx, c, IPK_TCP_SYN_RECEIVED);
	c->snd_nxt = c->iss;
	ipk_tcp_loss_stop(c);
}

/* ------------------------------------------------- synchronized: checks */

/* RFC 9293 §3.10.7.4 first: the four acceptability cases. */
static int seq_acceptable(const struct ipk_conn *c, const struct ipk_tcp_seg *s)
{
	uint32_t wnd = ipk_seq_gt(c->rcv_adv, c->rcv_nxt) ? c->rcv_adv - c->rcv_nxt : 0;
	uint32_t len = ipk_tcp_seg_len(s), seq = s->h.seq;
	uint32_t end = seq + len - 1u;

	if (len == 0)
		return wnd == 0 ? seq == c->rcv_nxt : (seq - c->rcv_nxt) < wnd;
	if (wnd == 0)
		return 0;
	return (seq - c->rcv_nxt) < wnd || (end - c->rcv_nxt) < wnd;
}

/* RFC 5961 §3.2: only an exact hit resets; elsewhere in the window earns a challenge
 * ACK. Returns 1 when the segment was consumed. */
static void input_rst(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s)
{
	ctx->cnt.tcp_rst_rx++;
	if (s->h.seq != c->rcv_nxt) {
		ipk_tcp_challenge_ack(ctx, c);
		ipk_drop(ctx, IPK_DROP_TCP_OUT_OF_WINDOW);
		return;
	}
	if (c->state == IPK_TCP_SYN_RECEIVED && (c->fl & IPK_TCPF_ACTIVE))
		ipk_tcp_destroy(ctx, c, IPK_CLOSE_REFUSED);
	else
		ipk_tcp_destroy(ctx, c, IPK_CLOSE_RESET);
}

/* Unacceptable segment: ACK it (unless RST; rate limited, tcp_defence.c) and drop.
 * TIME_WAIT answers a retransmitted FIN and restarts 2*MSL (§3.10.7.4 eighth). */
static void input_unacceptable(struct ipk_ctx *ctx, struct ipk_conn *c,
                               const struct ipk_tcp_seg *s)
{
	if (s->h.flags & IPK_TCP_RST) {
		ipk_drop(ctx, IPK_DROP_TCP_OUT_OF_WINDOW);
		return;
	}
	ipk_tcp_oow_ack(ctx, c, s);
	if (c->state == IPK_TCP_TIME_WAIT && (s->h.flags & IPK_TCP_FIN))
		tw_arm(ctx, c);
	if (ipk_seq_le(s->h.seq + ipk_tcp_seg_len(s), c->rcv_nxt)) {
		ctx->cnt.tcp_dup_segs++;
		if (s->len)
			ipk_tcp_dsack_note(ctx, c, s->h.seq, s->h.seq + s->len);
	}
	ipk_drop(ctx, IPK_DROP_TCP_OUT_OF_WINDOW);
}

/* ------------------------------------------------------- synchronized: ACK */

/* Free the acknowledged packets left on ctx->tcp_acked_q unshown (the connection
 * ended during an earlier one's call). */
static IPK_NOINLINE void acked_pkts_drop(struct ipk_ctx *ctx)
{
	struct ipk_pb *pb;

	while ((pb = ctx->tcp_acked_q) != NULL) {
		ctx->tcp_acked_q = pb->next;
		ipk_pkt_release(ctx, pb->pkt);
		ipk_pb_put(ctx, pb);
	}
}

/* ops->tcp_acked_pkt: show the ipk_tcp_send packets this ACK acknowledged wholly
 * (ctx->tcp_acked_q, not empty), each once, in send order (core.h). Each leaves the
 * list, its pb freed, before its call, which may send (reusing the pb) or end the
 * connection: the rest are then freed unseen. Inline: usually one packet, and a
 * call frame here cost more than the work (~20 instructions per ACK, measured). */
static IPK_ALWAYS_INLINE void acked_pkts(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	struct ipk_pb *pb = ctx->tcp_acked_q;

	/* No test of IPK_TCPF_ANNOUNCED: new_ack runs in the synchronized states only,
	 * which a connection enters announced (syn_rcvd_ack, syn_sent_established
	 * announce before any ACK of data is processed). */
	do {
		void *pkt = pb->pkt;

		ctx->tcp_acked_q = pb->next;
		ipk_pb_put(ctx, pb);
		IPK_OPS(ctx)->tcp_acked_pkt(ctx, c, c->user, pkt, IPK_OPQ(ctx));
	} while ((pb = ctx->tcp_acked_q) != NULL && !zombie(c));
	if (IPK_UNLIKELY(pb != NULL))
		acked_pkts_drop(ctx);
}

/* Inline in both callers: header prediction's ACK would otherwise cost a frame of its
 * own (~70 instructions per request, measured). */
static IPK_ALWAYS_INLINE void new_ack(struct ipk_ctx *ctx, struct ipk_conn *c,
                                      const struct ipk_tcp_seg *s)
{
	uint32_t ack = s->h.ack, acked = ack - c->snd_una, bytes;
	int partial, sampled = 1;

	if (ipk_tcp_ts_rtt(ctx, c, s)) {
		c->fl &= ~IPK_TCPF_RTT_ON;
	} else if ((c->fl & IPK_TCPF_RTT_ON) && ipk_seq_ge(ack, c->rtt_seq)) {
		c->fl &= ~IPK_TCPF_RTT_ON;
		ipk_tcp_rtt_sample_us(ctx, c, ipk_tcp_rtt_elapsed_us(ctx, c));
	} else {
		sampled = 0;
	}
	if (c->snd_una == c->iss)
		acked--; /* our SYN is not data for congestion control */
	/* RACK's delivery times live on the scoreboard, in the extension record: none,
	 * nothing to update (ipk_tcp_rack_delivered's own first test, without the call
	 * on every ACK of a flight that never saw a SACK block) */
	if ((c->fl & IPK_TCPF_SACK_OK) && c->x)
		ipk_tcp_rack_acked(ctx, c, s);
	/* RFC 6675 §5: in SACK recovery cwnd stays at ssthresh; pipe does the pacing. */
	partial = acked && !(c->fl & IPK_TCPF_SACK_RCVY) ? ipk_tcp_cc_ack_new(ctx, c, ack, acked) : 0;
	bytes = ipk_tcp_sq_release_ack(ctx, c, ack);
	c->snd_una = ack;
	if (ipk_seq_lt(c->snd_nxt, ack))
		c->snd_nxt = ack;
	/* Data still queued and the application had filled at least 3/4 of its send
	 * buffer before this ACK: maybe grow it with cwnd (tcp_mem.c). The first test
	 * alone ends it for request-response traffic, whose ACK empties the queue. */
	if (c->sq_bytes && 4ull * (c->sq_bytes + bytes) >= 3ull * c->sndbuf &&
	    c->sndbuf < ctx->cfg.tcp_sndbuf_max)
		ipk_tcp_sndbuf_expand(ctx, c);
	/* The back-off ends; a sample just computed the RTO from the new estimate
	 * (ipk_tcp_rto_reset does nothing with no back-off and no fast_off). The first
	 * ACK of new data after an RTO may show it spurious (RFC 3522); an undo takes
	 * cwnd back to at least its value before the RTO. */
	if (c->nrtx != 0) {
		ipk_tcp_undo_rto_ack(ctx, c, s);
		if (sampled)
			c->nrtx = 0;
		else
			ipk_tcp_rto_reset(ctx, c);
	} else if (!sampled && ctx->fast_off) {
		ipk_tcp_rto_reset(ctx, c);
	}
	/* The persist back-off ends when the window opens (ack_process), not when a probe
	 * byte is accepted: a receiver may take probe bytes into the last sliver of a
	 * window it advertised as 0 after scaling, and resetting here probed it every
	 * 400 ms forever (RFC 9293 §3.8.6.1: probes back off exponentially). */
	/* RFC 6298 (5.2)/(5.3): stop when all is acknowledged, else restart. */
	ipk_tcp_loss_stop(c);
	c->fl &= ~IPK_TCPF_TLP_OUT;
	if (c->snd_una != c->snd_max)
		ipk_tcp_arm_loss_timer(ctx, c, 0);
	if (partial) {
		uint32_t n = IPK_MIN(c->mss, ipk_tcp_data_end(c) - c->snd_una);

		if (ipk_tcp_xmit(ctx, c, c->snd_una, n, IPK_TCP_X_FIN) >= 0)
			ctx->cnt.tcp_fast_retransmits++;
	}
	if (IPK_OPS(ctx)->tcp_acked_pkt && ctx->tcp_acked_q) {
		acked_pkts(ctx, c);
		if (zombie(c))
			return;
	}
	if (bytes && (c->fl & IPK_TCPF_ANNOUNCED) && IPK_OPS(ctx)->tcp_acked)
		IPK_OPS(ctx)->tcp_acked(ctx, c, c->user, bytes, IPK_OPQ(ctx));
}

static void dup_ack(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	uint32_t n;

	if (!ipk_tcp_cc_on_dupack(ctx, c))
		return;
	/* RFC 5681 §3.2 (2): fast retransmit of the first unacknowledged segment. */
	n = IPK_MIN(c->mss, ipk_tcp_data_end(c) - c->snd_una);
	if (ipk_seq_gt(c->snd_una, ipk_tcp_data_end(c)))
		n = 0;
	if (ipk_tcp_xmit(ctx, c, c->snd_una, n, IPK_TCP_X_FIN) >= 0)
		ctx->cnt.tcp_fast_retransmits++;
	c->rtx_at = 0;
	ipk_tcp_arm_rtx(ctx, c);
}

/* RFC 9293 §3.10.7.4 fifth, ESTABLISHED rules. Returns 0 when the segment is dropped. */
static int ack_process(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s)
{
	uint32_t ack = s->h.ack, wnd = seg_wnd(c, s), old_wnd = c->snd_wnd, prev_una = c->snd_una;
	int dup = 0;

	/* RFC 5961 §5.2: an ACK for data never sent, or older than the peer's largest
	 * window, is dropped with a challenge ACK. */
	if (!ipk_tcp_ack_valid(c, ack)) {
		ipk_tcp_challenge_ack(ctx, c);
		ipk_drop(ctx, IPK_DROP_TCP_BAD_ACK);
		return 0;
	}
	if (ipk_seq_lt(ack, c->snd_una))
		return 1; /* old duplicate ACK: ignore it, keep the text */
	if (ipk_tcp_wnd_newer(c, s->h.seq)) {
		c->snd_wnd = wnd;
		c->snd_wl1 = s->h.seq;
		if (wnd > c->max_sndwnd)
			c->max_sndwnd = wnd;
		if (wnd > 0) {
			ipk_tcp_persist_stop(c);
			c->npersist = 0;
		}
	}
	if (ipk_seq_gt(ack, c->snd_una)) {
		new_ack(ctx, c, s);
	} else if (s->len == 0 && !(s->h.flags & (IPK_TCP_SYN | IPK_TCP_FIN)) && wnd == old_wnd &&
	           c->snd_max != c->snd_una && wnd != 0) {
		/* RFC 5681 §2 DUPLICATE ACKNOWLEDGMENT (a)-(e); with a zero window the
		 * outstanding byte is a persist probe (RFC 9293 §3.8.6.1) and its answers
		 * say nothing about loss. With SACK the scoreboard decides (RFC 6675 §5),
		 * NewReno otherwise (RFC 6582). */
		dup = 1;
		if (!(c->fl & IPK_TCPF_SACK_OK))
			dup_ack(ctx, c);
	}
	if ((c->fl & IPK_TCPF_SACK_OK) && !zombie(c) && ipk_tcp_sb_on_ack(ctx, c, s, prev_una, dup))
		dup_ack(ctx, c); /* no scoreboard could be drawn: NewReno decides */
	return !zombie(c);
}

/* ACK-driven state changes (§3.10.7.4 fifth, per state). Returns 0 when closed. */
static int ack_states(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	if (!ipk_tcp_fin_acked(c))
		return 1;
	switch (c->state) {
	case IPK_TCP_FIN_WAIT_1:
		ipk_tcp_enter(ctx, c, IPK_TCP_FIN_WAIT_2);
		return 1;
	case IPK_TCP_CLOSING:
		enter_time_wait(ctx, c);
		return 1;
	case IPK_TCP_LAST_ACK:
		ipk_tcp_destroy(ctx, c, IPK_CLOSE_NORMAL);
		return 0;
	default:
		return 1;
	}
}

/* SYN-RECEIVED + ACK (§3.10.7.4 fifth). Returns 0 when the segment is dropped. */
static int syn_rcvd_ack(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s)
{
	if (!ipk_seq_gt(s->h.ack, c->snd_una) || ipk_seq_gt(s->h.ack, c->snd_max)) {
		ipk_tcp_send_rst_for(ctx, s);
		ipk_drop(ctx, IPK_DROP_TCP_BAD_ACK);
		return 0;
	}
	/* A passive open's handshake completes only while the application has room
	 * for it (ops->tcp_room): else the ACK is dropped and the connection stays
	 * half-open, its SYN-ACK retransmission asking the peer again later, as
	 * Linux does while the accept queue is full. */
	if (!(c->fl & IPK_TCPF_ACTIVE) && IPK_OPS(ctx)->tcp_room) {
		struct ipk_atuple at;

		if (ipk_tcp_atuple(ctx, c, &at) == IPK_OK &&
		    !IPK_OPS(ctx)->tcp_room(ctx, &at, IPK_OPQ(ctx))) {
			ipk_drop(ctx, IPK_DROP_TCP_BACKLOG);
			return 0;
		}
	}
	ipk_tcp_backlog_release(ctx, c);
	ipk_tcp_enter(ctx, c, (c->fl & IPK_TCPF_FIN_QUEUED) ? IPK_TCP_FIN_WAIT_1 :
	                                                         IPK_TCP_ESTABLISHED);
	c->snd_wnd = seg_wnd(c, s);
	c->max_sndwnd = IPK_MAX(c->max_sndwnd, c->snd_wnd);
	c->snd_wl1 = s->h.seq;
	announce(ctx, c);
	return !zombie(c);
}

/* ------------------------------------------------------ synchronized: text */

/* One packet of a chain to the application: cut from the rest for the call (the
 * callback's contract: never a chain), joined again after it. */
static void deliver_one(struct ipk_ctx *ctx, struct ipk_conn *c, void *pkt, uint32_t off,
                        uint32_t len)
{
	void *rest = ipk_pkt_chain_cut(ctx, pkt);

	IPK_OPS(ctx)->tcp_payload(ctx, c, c->user, pkt, off, len, IPK_OPQ(ctx));
	if (rest)
		ipk_pkt_chain_append(ctx, pkt, rest);
}

/* Bytes [off, off+len) of a chain, one call per packet; stops when a callback
 * closed the connection. */
static void deliver_chain(struct ipk_ctx *ctx, struct ipk_conn *c, void *pkt, uint32_t off,
                          uint32_t len)
{
	for (; pkt && len > 0 && !zombie(c); pkt = ipk_pkt_chain_next(ctx, pkt)) {
		uint32_t plen = ipk_pkt_len(ctx, pkt), n;

		if (off >= plen) {
			off -= plen;
			continue;
		}
		n = IPK_MIN(len, plen - off);
		deliver_one(ctx, c, pkt, off, n);
		len -= n;
		off = 0;
	}
}

/* Hand in-order bytes [off, off+len) of pkt (maybe a chain: IPK_CAP_LRO or
 * reassembly) to the application; the packets stay ours. Inline: the flat case
 * is the per-segment fast path. */
IPK_INLINE void deliver(struct ipk_ctx *ctx, struct ipk_conn *c, void *pkt, uint32_t off,
                    uint32_t len)
{
	c->rcv_nxt += len;
	c->rcv_unread += len;
	if (!len || !IPK_OPS(ctx)->tcp_payload)
		return;
	if (ipk_pkt_chain_next(ctx, pkt))
		deliver_chain(ctx, c, pkt, off, len);
	else
		IPK_OPS(ctx)->tcp_payload(ctx, c, c->user, pkt, off, len, IPK_OPQ(ctx));
}

/* RFC 9293 §3.10.7.4 eighth: FIN in sequence. */
/* End of stream reported to the application (tcp_payload with no packet). */
static void fin_report(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	if (IPK_OPS(ctx)->tcp_payload)
		IPK_OPS(ctx)->tcp_payload(ctx, c, c->user, NULL, 0, 0, IPK_OPQ(ctx));
}

/* RFC 9293 §3.10.7.4 eighth: the FIN moves the state first, so that an application
 * closing from its end-of-stream callback sees CLOSE_WAIT (and goes to LAST_ACK),
 * except where the FIN completes our own close: there end of stream is reported
 * before TIME_WAIT, because entering TIME_WAIT reports tcp_closed. */
static void fin_process(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	if (c->fl & IPK_TCPF_FIN_RCVD)
		return; /* a FIN occupies one sequence number, once */
	c->rcv_nxt += 1u;
	c->fl |= IPK_TCPF_FIN_RCVD;
	ack_now(c);
	switch (c->state) {
	case IPK_TCP_SYN_RECEIVED:
	case IPK_TCP_ESTABLISHED:
		ipk_tcp_enter(ctx, c, IPK_TCP_CLOSE_WAIT);
		fin_report(ctx, c);
		break;
	case IPK_TCP_FIN_WAIT_1:
		if (!ipk_tcp_fin_acked(c)) {
			ipk_tcp_enter(ctx, c, IPK_TCP_CLOSING);
			fin_report(ctx, c);
			break;
		}
		/* our FIN is acknowledged: as FIN-WAIT-2 */
		/* fall through */
	case IPK_TCP_FIN_WAIT_2:
		fin_report(ctx, c);
		if (!zombie(c))
			enter_time_wait(ctx, c);
		break;
	default:
		break;
	}
}

/* Out-of-order segments the connection may hold: tcp_ooo_max when set, else (the
 * default, 0) as many full-sized segments as the receive buffer we advertise from.
 * A receiver that drops in-window data it offered room for turns one lost segment
 * into a retransmission of everything past the queue's end (RFC 2018 §8: SACKed
 * data is kept, so the sender has to resend all the unSACKed data it sees beyond
 * the hole). Payload per segment is counted as rcv_mss less 40 bytes of options so
 * timestamped segments fit too. */
static uint32_t ooo_limit(const struct ipk_ctx *ctx)
{
	uint32_t mss = ipk_tcp_rcv_mss(ctx), seg = mss > 80u ? mss - 40u : 40u;

	if (ctx->cfg.tcp_ooo_max)
		return ctx->cfg.tcp_ooo_max;
	return IPK_MIN(ctx->cfg.tcp_rcvbuf / seg + 1u, 0xffffu);
}

/* Insert [seq, seq+len) (+FIN) into the sorted out-of-order queue at *pp, trimming
 * what other entries already hold. Takes the packet on success (s->pkt = NULL). */
static void ooo_insert_at(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_tcp_seg *s,
                          struct ipk_pb **pp, uint32_t seq, uint32_t off, uint32_t len,
                          int fin)
{
	struct ipk_pb *pb;

	while (*pp && ipk_seq_le((*pp)->seq + (*pp)->len, seq))
		pp = &(*pp)->next;
	if (*pp && ipk_seq_le((*pp)->seq, seq)) {
		uint32_t cover = (*pp)->seq + (*pp)->len - seq;

		if (cover >= len && !fin) {
			ctx->cnt.tcp_dup_segs++;
			ipk_tcp_dsack_note(ctx, c, seq, seq + len);
			return;
		}
		cover = IPK_MIN(cover, len);
		ipk_tcp_dsack_note(ctx, c, seq, seq + cover);
		seq += cover;
		off += cover;
		len -= cover;
		pp = &(*pp)->next;
	}
	while (*pp && ipk_seq_le((*pp)->seq + (*pp)->len, seq + len) &&
	       !((*pp)->aux & IPK_TCP_PB_FIN)) {
		struct ipk_pb *dead = *pp;

		*pp = dead->next;
		ipk_tcp_rmem_uncharge(ctx, c, dead);
		ipk_pkt_release(ctx, dead->pkt);
		ipk_pb_put(ctx, dead);
		c->ooo_n--;
	}
	if (*pp && ipk_seq_lt((*pp)->seq, seq + len)) {
		len = (*pp)->seq - seq;
		fin = 0;
	}
	if (c->ooo_n >= ooo_limit(ctx)) {
		ipk_drop(ctx, IPK_DROP_TCP_OOO_FULL);
		return;
	}
	pb = ipk_pb_get(ctx);
	if (!pb)
		return;
	pb->pkt = s->pkt;
	pb->off = off;
	pb->len = len;
	pb->seq = seq;
	pb->aux = fin ? IPK_TCP_PB_FIN : 0;
	pb->next = *pp;
	*pp = pb;
	ipk_tcp_rmem_charge(ctx, c, pb);
	ipk_tcp_sack_recent(c, pb);
	c->ooo_n++;
	ctx->cnt.tcp_ooo_segs++;
	s->pkt = NULL;
}

/* The queue lives in the extension record: without one (pool empty) the segment is
 * dropped, counted by the pool, and the peer resends it. Receive memory is made room
 * for first (tcp_mem.c: collapse, prune, reclaim), or the segment is dropped there. */
static void ooo_insert(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_tcp_seg *s,
                       uint32_t seq, uint32_t off, uint32_t len, int fin)
{
	struct ipk_pb *x = ipk_tcp_x_get(ctx, c);

	if (!x)
		return;
	if (ipk_tcp_rmem_admit(ctx, c, s->pkt, seq))
		ooo_insert_at(ctx, c, s, &x->next, seq, off, len, fin);
	ipk_tcp_x_trim(ctx, c);
}

/* Deliver queued segments the new rcv_nxt reaches. */
static void ooo_drain(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	struct ipk_pb *pb;

	/* c->x is read again each round: delivery may free the connection's queues. */
	while ((pb = ipk_tcp_ooo(c)) != NULL && ipk_seq_le(pb->seq, c->rcv_nxt) && !zombie(c)) {
		uint32_t skip = c->rcv_nxt - pb->seq;
		int fin;

		c->x->next = pb->next;
		c->ooo_n--;
		ipk_tcp_rmem_uncharge(ctx, c, pb);
		if (skip < pb->len)
			deliver(ctx, c, pb->pkt, pb->off + skip, pb->len - skip);
		fin = (pb->aux & IPK_TCP_PB_FIN) && pb->seq + pb->len == c->rcv_nxt;
		ipk_pkt_release(ctx, pb->pkt);
		ipk_pb_put(ctx, pb);
		if (fin && !zombie(c))
			fin_process(ctx, c);
	}
	ipk_tcp_x_trim(ctx, c);
}

static int text_state(const struct ipk_conn *c)
{
	return c->state == IPK_TCP_ESTABLISHED || c->state == IPK_TCP_FIN_WAIT_1 ||
	       c->state == IPK_TCP_FIN_WAIT_2;
}

/* RFC 9293 §3.10.7.4 seventh and eighth: segment text and FIN. */
static void text_process(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_tcp_seg *s)
{
	uint32_t seq = s->h.seq, off = s->poff, len = s->len, room;
	int fin = (s->h.flags & IPK_TCP_FIN) != 0, had_ooo = ipk_tcp_ooo(c) != NULL;

	if (!text_state(c) || (len == 0 && !fin))
		return;
	if (ipk_seq_lt(seq, c->rcv_nxt)) {
		uint32_t skip = IPK_MIN(c->rcv_nxt - seq, len);

		ipk_tcp_dsack_note(ctx, c, seq, seq + skip); /* RFC 2883 §4.1.1 partial dup */
		seq += skip;
		off += skip;
		len -= skip;
	}
	room = ipk_seq_gt(c->rcv_adv, seq) ? c->rcv_adv - seq : 0;
	if (len > room) {
		len = room; /* beyond the window: trimmed, and a FIN there with it */
		fin = 0;
		ack_now(c);
	}
	if (seq != c->rcv_nxt) {
		ooo_insert(ctx, c, s, seq, off, len, fin);
		ipk_tcp_ack_ooo(ctx, c);
		return;
	}
	deliver(ctx, c, s->pkt, off, len);
	if (!zombie(c))
		ooo_drain(ctx, c);
	/* The FIN counts only where it sits: the drain may have consumed a queued copy. */
	if (fin && !zombie(c) && c->rcv_nxt == seq + len)
		fin_process(ctx, c);
	ipk_tcp_ack_data(ctx, c, len, had_ooo);
}

/* ------------------------------------------------------------ dispatch */

/* SYN-RECEIVED: a retransmitted SYN gets the SYN-ACK again (RFC 793 figure 8, as
 * Linux's tcp_check_req does), rate limited per connection (tcp_defence.c). Nothing but
 * the SYN is accepted before SYN-RECEIVED ends, so its sequence number (IRS) is
 * rcv_nxt - 1. */
static int syn_rcvd_resyn(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s)
{
	if (c->state != IPK_TCP_SYN_RECEIVED || !(s->h.flags & IPK_TCP_SYN) ||
	    (s->h.flags & IPK_TCP_ACK) || s->h.seq != c->rcv_nxt - 1u)
		return 0;
	if (ipk_tcp_synack_again_allowed(ctx, c))
		ipk_tcp_xmit(ctx, c, c->iss, 0, 0);
	return 1;
}

static IPK_NOINLINE void input_synced(struct ipk_ctx *ctx, struct ipk_conn *c,
                                      struct ipk_tcp_seg *s)
{
	uint8_t f = s->h.flags;
	int paws;

	if (syn_rcvd_resyn(ctx, c, s))
		return;
	if (c->state == IPK_TCP_TIME_WAIT && ipk_tcp_tw_syn(ctx, c, s))
		return;
	if ((f & IPK_TCP_SYN) && !(f & IPK_TCP_RST)) {
		/* RFC 5961 §4.2: a SYN in a synchronized state earns a challenge ACK
		 * whatever its sequence number; it never resets the connection. */
		ipk_tcp_challenge_ack(ctx, c);
		ipk_drop(ctx, IPK_DROP_TCP_BAD_FLAGS);
		return;
	}
	/* RFC 7323 §5.3 R1: PAWS comes before the window check; §3.2's missing
	 * timestamp is dropped silently, an old one acknowledged (rate limited). */
	paws = ipk_tcp_paws_reject(ctx, c, s);
	if (paws) {
		if (paws == IPK_TCP_PAWS_OLD)
			ipk_tcp_oow_ack(ctx, c, s);
		return;
	}
	if (!seq_acceptable(c, s)) {
		input_unacceptable(ctx, c, s);
		return;
	}
	if (!(f & IPK_TCP_RST))
		ipk_tcp_ts_recent(ctx, c, s);
	if (f & IPK_TCP_RST) {
		input_rst(ctx, c, s);
		return;
	}
	if (!(f & IPK_TCP_ACK)) {
		ipk_drop(ctx, IPK_DROP_TCP_BAD_FLAGS);
		return;
	}
	ipk_tcp_ecn_rx(ctx, c, s);
	if (c->state == IPK_TCP_SYN_RECEIVED && !syn_rcvd_ack(ctx, c, s))
		return;
	if (!ack_process(ctx, c, s))
		return;
	ipk_tcp_ecn_ack(ctx, c, s);
	if (!ack_states(ctx, c))
		return;
	text_process(ctx, c, s);
}

/* ------------------------------------------------------ header prediction */

/* Options as an established connection's every segment carries them: a timestamp
 * when negotiated (passing PAWS, RFC 7323 §5.3), nothing else. */
static int opts_expected(const struct ipk_conn *c, const struct ipk_tcp_seg *s)
{
	const struct ipk_tcp_opts *o = &s->o;

	if (s->ts_only) /* the parse saw NOP,NOP,TS and nothing else */
		return (c->fl & IPK_TCPF_TS_OK) && ipk_seq_ge(o->tsval, c->ts_recent);
	if (o->has_mss | o->has_ws | o->has_sack_perm | o->nsack)
		return 0;
	if (!(c->fl & IPK_TCPF_TS_OK))
		return !o->has_ts;
	return o->has_ts && ipk_seq_ge(o->tsval, c->ts_recent);
}

/*
 * Header prediction (Van Jacobson's fast path; RFC 9293 §3.10.7.4's common case): in
 * ESTABLISHED, flags exactly ACK (PSH allowed), the next expected sequence number,
 * nothing out of order queued, no loss recovery, the expected options, the same
 * window, and an ACK in [snd_una, snd_max] that advances snd_una or comes with data
 * fitting the window. Every check the full path makes then holds or has nothing to
 * do: acceptable (§3.10.7.4 first), no RST/SYN/URG, PAWS passes, the ACK is valid
 * (RFC 5961 §5.2) and no duplicate, the window update changes only SND.WL1/WL2, no
 * SACK or ECN signal (CE on the IP header goes the full way), no FIN.
 */
static int predicted(const struct ipk_ctx *ctx, const struct ipk_conn *c,
                     const struct ipk_tcp_seg *s)
{
	uint32_t ack = s->h.ack;

	if (ctx->fast_off || (s->h.flags & ~IPK_TCP_PSH) != IPK_TCP_ACK || s->h.seq != c->rcv_nxt)
		return 0;
	/* IPK_TCPF_FAST: the connection's own conditions, known to hold (ECN is not among
	 * them: an ECN connection is never marked, its segments take the tests here) */
	if (!(c->fl & IPK_TCPF_FAST)) {
		if (c->state != IPK_TCP_ESTABLISHED || c->x || c->dupacks ||
		    (c->fl & (IPK_TCPF_RECOVERY | IPK_TCPF_SACK_RCVY)) ||
		    ((c->fl & IPK_TCPF_ECN) && (s->tos & 0x3u) == IPK_ECN_CE))
			return 0;
	}
	/* snd_una <= ack <= snd_max in one unsigned comparison (the flight is below
	 * 2^31, so an ACK before snd_una lands above it too) */
	if (!opts_expected(c, s) || c->snd_wnd == 0 || seg_wnd(c, s) != c->snd_wnd ||
	    ack - c->snd_una > c->snd_max - c->snd_una)
		return 0;
	if (s->len == 0)
		return ack != c->snd_una; /* else a duplicate ACK: the full path counts it */
	return ipk_seq_le(s->h.seq + s->len, c->rcv_adv);
}

/* ipk_tcp_ack_data for a predicted segment with text, its common case inline: one
 * segment (not coalesced), no quick ACK owed, delayed ACKs on and the count still
 * below tcp_ack_every after it: the ACK waits (RFC 9293 §3.8.6.3, RFC 5681 §4.2).
 * Anything else takes the full rules. */
static void ack_data_fast(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t len)
{
	if (len <= ipk_tcp_rcv_mss(ctx) && c->quickack == 0 && ctx->cfg.tcp_delack_ns != 0 &&
	    (uint32_t)c->segs_unacked + 1u < ctx->cfg.tcp_ack_every) {
		c->segs_unacked++;
		c->fl |= IPK_TCPF_ACK_LATER;
		return;
	}
	ipk_tcp_ack_data(ctx, c, len, 0);
}

/* The predicted segment: ACK processing, then in-order text, as the full path would
 * do them. */
static void input_fast(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_tcp_seg *s)
{
	ctx->cnt.tcp_fast_path++;
	/* RFC 7323 §4.3 (2) holds: SEG.SEQ = RCV.NXT, and opts_expected saw the timestamp
	 * when negotiated, with TSval >= TS.Recent. */
	if (c->fl & IPK_TCPF_TS_OK)
		ipk_tcp_ts_recent_take(ctx, c, s->o.tsval);
	/* RFC 9293 §3.10.7.4 fifth: the window is unchanged, only WL1 moves. */
	if (ipk_tcp_wnd_newer(c, s->h.seq))
		c->snd_wl1 = s->h.seq;
	if (s->h.ack != c->snd_una) {
		new_ack(ctx, c, s);
		if (zombie(c))
			return; /* the acked callback aborted it */
	}
	if (s->len == 0)
		return;
	deliver(ctx, c, s->pkt, s->poff, s->len);
	ack_data_fast(ctx, c, s->len);
}

/* Process one segment for connection c; s->pkt stays the caller's unless queued. */
IPK_HOT void ipk_tcp_input_conn(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_tcp_seg *s)
{
	int fast = predicted(ctx, c, s);
	/* RFC 1122 §4.2.3.6: an acceptable segment shows the peer alive. */
	int heard = fast || (c->state != IPK_TCP_SYN_SENT && seq_acceptable(c, s));
	struct ipk_conn *outer = ctx->in_event_c;

	ipk_tcp_hold(c);
	ctx->in_event_c = c; /* writes from callbacks wait for the output pass below */
	if (fast) {
		input_fast(ctx, c, s);
	} else {
		/* the full rules may change any of the fast paths' conditions */
		ipk_tcp_fast_clear(c);
		if (c->state == IPK_TCP_SYN_SENT)
			input_syn_sent(ctx, c, s);
		else
			input_synced(ctx, c, s);
	}
	ctx->in_event_c = outer;
	if (heard && (c->fl & IPK_TCPF_KEEPALIVE) && !zombie(c))
		ipk_tcp_keepalive_restart(ctx, c);
	/* A zombie or closed connection sends nothing: ipk_tcp_output tests that itself
	 * (txf_len's TXF_NOT and TXF_STATES, then its own test before the general pass). */
	ipk_tcp_output(ctx, c);
	if (ctx->dsack_c == c)
		ctx->dsack_c = NULL; /* not reported (no ACK went out): forget it */
	if (!(c->fl & IPK_TCPF_FAST) && ipk_tcp_fast_ok(c))
		c->fl |= IPK_TCPF_FAST;
	ipk_tcp_release(ctx, c);
}

/* ----------------------------------------------------------------- ICMP */

/* RFC 1191 / RFC 5927 §4.1: lower the MSS and resend when the path MTU dropped. */
static void icmp_needfrag(struct ipk_ctx *ctx, struct ipk_conn *c, uint16_t mtu)
{
	uint32_t mss;

	if (mtu < 68u)
		return; /* RFC 1191 §5: old routers send 0; keep the MSS */
	mss = (uint32_t)mtu - 40u;
	if (mss < IPK_TCP_PMTU_MIN_MSS)
		mss = IPK_TCP_PMTU_MIN_MSS;
	if (c->fl & IPK_TCPF_TS_OK)
		mss -= IPK_TCP_TS_LEN; /* the MSS we keep is payload per segment */
	if (mss >= c->mss)
		return;
	c->mss = mss;
	c->snd_nxt = c->snd_una; /* resend what was in flight at the new size */
	ipk_tcp_output(ctx, c);
}

void ipk_tcp_icmp_error(struct ipk_ctx *ctx, uint8_t type, uint8_t code, uint16_t mtu,
                        const uint8_t *quote, uint32_t qlen)
{
	uint32_t ihl, seq;
	struct ipk_conn *c;

	if (!quote || qlen < IPK_IP4_HLEN)
		return;
	ihl = (uint32_t)(quote[0] & 0x0fu) * 4u;
	if (ihl < IPK_IP4_HLEN || qlen < ihl + 8u)
		return;
	/* We never send TCP to the limited broadcast; a quote naming it would name an
	 * IPv6 connection's mark (internal.h IPK_TCP6_MARK), not a segment of ours. */
	if (ipk_rdbe32(quote + 16) == IPK_TCP6_MARK)
		return;
	c = ipk_tcp_lookup(ctx, ipk_rdbe32(quote + 12), ipk_rdbe16(quote + ihl),
	                   ipk_rdbe32(quote + 16), ipk_rdbe16(quote + ihl + 2));
	seq = ipk_rd32(quote + ihl + 4);
	/* RFC 5927 §4.1: believe only errors quoting a sequence number in flight. */
	if (!c || ipk_seq_lt(seq, c->snd_una) || !ipk_seq_lt(seq, c->snd_max))
		return;
	ipk_tcp_hold(c);
	if (type == IPK_ICMP_UNREACH && code == IPK_ICMP_UNREACH_NEEDFRAG) {
		icmp_needfrag(ctx, c, mtu);
	} else if (type == IPK_ICMP_UNREACH && (code == 2 || code == IPK_ICMP_UNREACH_PORT) &&
	           c->state == IPK_TCP_SYN_SENT) {
		/* RFC 1122 §4.2.3.9: protocol/port unreachable are hard errors; we act on
		 * them only while opening, where they cannot tear down live data. */
		ipk_tcp_destroy(ctx, c, IPK_CLOSE_UNREACH);
	} else {
		IPK_UNUSED(type); /* soft error: the connection goes on */
	}
	ipk_tcp_release(ctx, c);
}

/* ------------------------------------------------- one receive function */

/*
 * ipk_tcp_rx_one: the frame almost every established connection receives, judged
 * in one pass over its bytes, on locals: Ethernet II to our MAC (or raw IPv4), an
 * IPv4 header of 20 bytes to our unicast address from a source that can be a host,
 * not a fragment; a TCP header with no options or exactly NOP,NOP,TS, no SYN, both
 * ports set; the checksums right. Each test is one the layers make (link.c, ip4.c
 * ip4_check, seg_parse), so a frame that passes them all is one they would hand on
 * unchanged, and from the lookup on it takes the same way (ipk_tcp_input's tail).
 * Any test failing returns 0 before anything is changed or counted: ipk_run then
 * gives the frame to ipk_link_input, which judges it again with every rule and
 * counts the drop.
 */

/* The IPv4 header at ip (len bytes of frame from it): the datagram's length, or 0.
 * Acceptance is ipk_ip4_fast_accept, the predicate ip4.c's fast path shares
 * (internal.h); this adds only what makes it a TCP segment with a whole header. */
static inline uint32_t rx_one_ip4(struct ipk_ctx *ctx, const uint8_t *ip, uint32_t len)
{
	uint32_t tot = ipk_ip4_fast_accept(ctx, ip, len);

	if (tot < IPK_IP4_HLEN + IPK_TCP_HLEN || ip[9] != IPK_IPPROTO_TCP)
		return 0;
	return tot;
}

/* The TCP header at th (l4 bytes of segment) into s->h and s->o as seg_parse fills
 * them: NOP,NOP,TS in one step, or no options. Returns 0 for anything else. */
static inline int rx_one_tcp(const uint8_t *th, uint32_t l4, struct ipk_tcp_seg *s)
{
	struct ipk_tcp_opts *o = &s->o;

	s->ts_only = (uint8_t)ipk_tcp_parse_ts(th, l4, &s->h, o);
	if (!s->ts_only) {
		if (th[12] != (IPK_TCP_HLEN / 4) << 4) /* data offset 5, reserved bits clear */
			return 0;
		ipk_tcp_hdr_fill(th, IPK_TCP_HLEN, &s->h);
		o->has_mss = o->has_ws = o->has_sack_perm = o->has_ts = 0;
		o->mss = 0;
		o->ws = o->nsack = 0;
		o->tsval = o->tsecr = 0;
	}
	return s->h.sport_be != 0 && s->h.dport_be != 0 && !(s->h.flags & IPK_TCP_SYN);
}

/* The 20-byte IPv4 header's checksum (RFC 1071), summed inline as 64-bit host words
 * (wire.h ipk_csum64_small): right when the sum folds to all ones. */
static inline int rx_one_hdr_ok(const uint8_t *ip)
{
	uint64_t s = ipk_csum64_small(0, ip, IPK_IP4_HLEN);
	uint32_t lo = (uint32_t)s, hi = (uint32_t)(s >> 32);

	lo += hi;
	lo += lo < hi;
	return (uint16_t)((lo + ((lo << 16) | (lo >> 16))) >> 16) == 0xffffu;
}

/* Both checksums (RFC 1071): the NIC's verdict where one is declared and given
 * (ip4_csum_verdict's rules), else summed here; a small segment inline. */
static inline int rx_one_csum(struct ipk_ctx *ctx, void *pkt, const uint8_t *ip,
                              const struct ipk_tcp_seg *s, const uint8_t *th, uint32_t l4)
{
	uint32_t caps = ctx->cfg.caps, v = 0;
	int ip_ok = 0, l4_ok = 0;

	if (caps & (IPK_CAP_RX_CSUM_IP4 | IPK_CAP_RX_CSUM_L4)) {
		if (IPK_OPS(ctx)->rx_csum)
			v = IPK_OPS(ctx)->rx_csum(pkt, IPK_OPQ(ctx));
		if ((caps & IPK_CAP_RX_CSUM_IP4) && (v & IPK_RXCSUM_IP4_BAD))
			return 0;
		ip_ok = (caps & IPK_CAP_RX_CSUM_IP4) && (v & IPK_RXCSUM_IP4_GOOD);
		l4_ok = (caps & IPK_CAP_RX_CSUM_L4) && (v & IPK_RXCSUM_L4_GOOD) &&
		        !(v & IPK_RXCSUM_L4_BAD);
	}
	if (!ip_ok && !rx_one_hdr_ok(ip))
		return 0;
	if (l4_ok)
		return 1;
	if (l4 <= 64u)
		return ipk_csum_l4_small(s->src_be, s->dst_be, IPK_IPPROTO_TCP, th, l4) == 0;
	return ipk_csum_l4(s->src_be, s->dst_be, IPK_IPPROTO_TCP, th, l4) == 0;
}

/* Ethernet II (RFC 894) to our own MAC carrying IPv4: the IPv4 header's offset,
 * or -1 (broadcast frames, ARP and the rest go through link.c). */
static inline int rx_one_eth(const struct ipk_ctx *ctx, const uint8_t *f, uint32_t len)
{
	if (ctx->cfg.link == IPK_LINK_RAWIP)
		return 0;
	if (len < IPK_ETH_HLEN || ipk_rd16(f + 12) != IPK_ETHERTYPE_IP4 ||
	    ipk_rdbe32(f) != ipk_rdbe32(ctx->cfg.mac) || ipk_rdbe16(f + 4) != ipk_rdbe16(ctx->cfg.mac + 4))
		return -1;
	return IPK_ETH_HLEN;
}

/*
 * The IPv6 twin (issue 19): Ethernet II to our MAC carrying IPv6 (RFC 2464) with TCP
 * straight after the fixed header (no extension header to walk, RFC 8200 §4), the
 * payload length within the frame, not to a group (RFC 9293 §3.9.1), an address
 * pair some connection holds (a listener's segment goes the long way) whose
 * addresses ipk_ip6_addr_check accepts (the rule ipk_ip6_input applies; its
 * verdict kept per pair while the address table stands, ip6.addr_gen), the TCP header as
 * rx_one_tcp takes it and its checksum right (RFC 8200 §8.1; the NIC's verdict as
 * tcp6.c tcp6_csum_ok takes it). From there the same way as ipk_tcp_input6: the
 * pair held across the dispatch, src IPK_TCP6_MARK, dst the pair's index. Any
 * test failing returns 0 with nothing changed or counted; ipk_link_input then
 * judges and counts. tests/ip/test_tcp6_rxdiff.c proves it frame by frame.
 */
static int rx_one6_csum(struct ipk_ctx *ctx, void *pkt, const uint8_t *ip, uint32_t l4)
{
	int hw = ipk_ip6_rx_csum(ctx, pkt), odd = 0;
	uint32_t sum;

	if (hw)
		return hw > 0;
	if (l4 <= IPK_TCP6_CSUM_INLINE_MAX)
		return ipk_tcp6_csum_small(ip + 8, ip + 24, ip + IPK_IP6_HLEN, l4) == 0;
	sum = ipk_csum_pseudo6(ip + 8, ip + 24, IPK_IPPROTO_TCP, l4);
	sum = ipk_csum_chain(ctx, pkt, IPK_ETH_HLEN + IPK_IP6_HLEN, l4, sum, &odd);
	return ipk_csum_fold(sum) == 0;
}

/* The IPv6 header at ip (len bytes from it): the TCP segment's length, or 0. */
static uint32_t rx_one6_ip(const uint8_t *ip, uint32_t len)
{
	uint32_t l4;

	if (len < IPK_IP6_HLEN + IPK_TCP_HLEN || (ip[0] >> 4) != 6 || ip[6] != IPK_IPPROTO_TCP)
		return 0;
	l4 = ipk_rd16(ip + 4);
	if (l4 < IPK_TCP_HLEN || l4 > len - IPK_IP6_HLEN || ipk_ip6_is_multicast(ip + 24))
		return 0;
	return l4;
}

static int ipk_tcp_rx_one6(struct ipk_ctx *ctx, void *pkt, const uint8_t *f, uint32_t len)
{
	const uint8_t *ip = f + IPK_ETH_HLEN;
	struct ipk_tcp_seg s;
	uint32_t l4, i;

	if (!ctx->tcp6_n || ctx->fast_off || ctx->cfg.link == IPK_LINK_RAWIP ||
	    len < IPK_ETH_HLEN || ipk_rd16(f + 12) != IPK_ETHERTYPE_IP6 ||
	    ipk_rdbe32(f) != ipk_rdbe32(ctx->cfg.mac) || ipk_rdbe16(f + 4) != ipk_rdbe16(ctx->cfg.mac + 4))
		return 0;
	l4 = rx_one6_ip(ip, len - IPK_ETH_HLEN);
	if (!l4)
		return 0;
	i = ipk_tcp6_pair_find_last(ctx, ip + 24, ip + 8);
	if (i == IPK_TCP6_NONE || ipk_tcp6_pair_addr_check_kept(ctx, i) >= 0 ||
	    !rx_one_tcp(ip + IPK_IP6_HLEN, l4, &s) ||
	    !rx_one6_csum(ctx, pkt, ip, l4))
		return 0;
	s.src_be = IPK_TCP6_MARK;
	s.dst_be = i;
	s.pkt = pkt;
	s.poff = IPK_ETH_HLEN + IPK_IP6_HLEN + s.h.doff;
	s.len = l4 - s.h.doff;
	s.tos = (uint8_t)(ipk_rd16(ip) >> 4); /* the traffic class (RFC 8200 §3) */
	ctx->cnt.ip6_rx++;
	ctx->rx_one_n++;
	ctx->tcp6_pairs[i].refs++;
	seg_dispatch(ctx, &s);
	if (s.pkt)
		ipk_pkt_free(ctx, s.pkt);
	ipk_tcp6_put_fast(ctx, i);
	return 1;
}

IPK_HOT int ipk_tcp_rx_one(struct ipk_ctx *ctx, void *pkt, uint32_t len)
{
	uint32_t tot, l4;
	const uint8_t *f = ipk_pkt_data(ctx, pkt), *ip, *th;
	struct ipk_tcp_seg s;
	int l2 = rx_one_eth(ctx, f, len);

	/* ipk_fast_off turns this off too: it clears ip4_self_ok, which
	 * ipk_ip4_fast_accept tests */
	if (l2 < 0)
		return ipk_tcp_rx_one6(ctx, pkt, f, len);
	ip = f + l2;
	tot = rx_one_ip4(ctx, ip, len - (uint32_t)l2);
	if (!tot)
		return 0;
	th = ip + IPK_IP4_HLEN;
	l4 = tot - IPK_IP4_HLEN;
	s.src_be = ipk_rdbe32(ip + 12);
	s.dst_be = ctx->cfg.ip4_be;
	if (!rx_one_tcp(th, l4, &s) || !rx_one_csum(ctx, pkt, ip, &s, th, l4))
		return 0;
	/* Ethernet pads short frames to 60 bytes: the datagram ends at tot_len. */
	if (len - (uint32_t)l2 > tot)
		ipk_pkt_trim_tail(ctx, pkt, len - (uint32_t)l2 - tot);
	s.pkt = pkt;
	s.poff = (uint32_t)l2 + IPK_IP4_HLEN + s.h.doff;
	s.len = l4 - s.h.doff;
	s.tos = ip[1];
	ctx->rx_one_n++;
	seg_dispatch(ctx, &s);
	if (s.pkt)
		ipk_pkt_free(ctx, s.pkt); /* flat: ipk_pkt_release without the chain test */
	return 1;
}
