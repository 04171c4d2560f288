/*
 * TCP output: building segments (header in a fresh packet, payload chained by
 * scatter-gather or copied), the send decision (windows, Nagle, SWS avoidance), ACKs
 * and RSTs.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

struct seg_spec {
	uint32_t seq, ack;
	uint8_t flags;
	uint16_t wnd;
	const struct ipk_tcp_opts *o;
	uint32_t plen; /* payload bytes taken from the connection's send queue */
	uint8_t tos;   /* IPv4 TOS byte (RFC 3168 ECN field) */
};

/* ------------------------------------------------------------ send queue */

/* Free a queue of pbs; returns the sq_overhead charges they carried (send queue). */
static uint32_t pb_free_all(struct ipk_ctx *ctx, struct ipk_pb *pb)
{
	uint32_t ov = 0;

	while (pb) {
		struct ipk_pb *n = pb->next;

		ov += IPK_TCP_PB_OV(pb);
		ipk_pkt_free_chain(ctx, pb->pkt);
		ipk_pb_put(ctx, pb);
		pb = n;
	}
	return ov;
}

/* Bytes between connection objects in the integrator's array (ipk_conn_size()). */
#define CONN_STRIDE ((sizeof(struct ipk_conn) + 7u) & ~(size_t)7u)

/* c's transmit template slot: up to IPK_TT_SLOTS connections from one array never
 * share one; any other layout only shares slots more often (a shared slot is
 * rebuilt, never wrong: it names its owner). With an odd number of 8-byte words per
 * object the address in words is enough (an odd step is a bijection modulo a power
 * of two), and costs a shift where the object's index costs a multiply that gcc
 * hoists to ipk_tcp_output's entry, paid by every call that sends nothing. */
static struct ipk_tt *txf_tt(struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	uintptr_t i = ((CONN_STRIDE / 8u) & 1u) ? (uintptr_t)c >> 3 : (uintptr_t)c / CONN_STRIDE;

	return &ctx->tt_slot[i & (IPK_TT_SLOTS - 1u)];
}

void ipk_tcp_queues_free(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	struct ipk_tt *tt = txf_tt(ctx, c);
	uint32_t ov;

	if (ctx->sq_hint_c == c)
		ctx->sq_hint_c = NULL;
	if (tt->c == c)
		tt->c = NULL; /* the object may carry another connection next */
	if (tt->last == c)
		tt->last = NULL;
	ov = pb_free_all(ctx, c->sq_head);
	c->sq_head = c->sq_tail = NULL;
	ctx->wmem -= c->sq_bytes + (uint64_t)ov;
	c->sq_bytes = 0;
	c->sndbuf += ov; /* every sq_overhead charge returned, as ipk_tcp_sq_release does */
	if (c->x) {
		ipk_tcp_rmem_clear(ctx, c);
		(void)pb_free_all(ctx, c->x->next);
		c->x->next = NULL;
	}
	c->ooo_n = 0;
	ipk_tcp_sb_free(ctx, c);
	ipk_tcp_prr_end(ctx, c); /* returns the emptied extension record */
}

IPK_HOT uint32_t ipk_tcp_sq_release(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t ack)
{
	uint32_t end = ipk_tcp_data_end(c), n, done;
	struct ipk_pb **kq = &ctx->tcp_acked_q; /* where a kept pb goes (tcp.h ipk_tcp_sq_kept) */

	if (ipk_seq_gt(ack, end))
		ack = end;
	if (!ipk_seq_gt(ack, c->sq_seq))
		return 0;
	n = done = ack - c->sq_seq;
	ctx->wmem -= done; /* tcp.c wmem_room */
	while (n > 0 && c->sq_head) {
		struct ipk_pb *pb = c->sq_head;

		if (pb->len <= n) {
			n -= pb->len;
			c->sq_head = pb->next;
			if (!c->sq_head)
				c->sq_tail = NULL;
			if (ctx->sq_hint_pb == pb)
				ctx->sq_hint_c = NULL;
			c->sndbuf += IPK_TCP_PB_OV(pb); /* tcp.c sq_overhead */
			ctx->wmem -= IPK_TCP_PB_OV(pb);
			if (ipk_tcp_sq_kept(ctx, pb)) {
				*kq = pb;
				kq = &pb->next;
				continue;
			}
			ipk_tcp_sq_pkt_done(ctx, c, pb); /* no chain walk for one packet */
			ipk_pb_put(ctx, pb);
		} else {
			pb->off += n;
			pb->len -= n;
			pb->seq += n;
			n = 0;
		}
	}
	if (IPK_OPS(ctx)->tcp_acked_pkt)
		*kq = NULL; /* the kept list ends (its last pb's next was the queue's) */
	c->sq_seq = ack;
	c->sq_bytes -= done;
	return done;
}

/* The pb holding sequence `seq` and the offset of it inside pb's bytes. Segments go
 * out mostly in sequence order, so the walk starts at the pb the previous lookup
 * ended on when that lies at or below seq (every queued pb's seq is its first
 * byte's); a retransmission below it walks from the head. */
IPK_HOT struct ipk_pb *ipk_tcp_sq_find(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t seq,
                               uint32_t *at)
{
	uint32_t off = seq - c->sq_seq;
	struct ipk_pb *pb = c->sq_head;

	if (ctx->sq_hint_c == c && ipk_seq_le(ctx->sq_hint_pb->seq, seq)) {
		pb = ctx->sq_hint_pb;
		off = seq - pb->seq;
	}
	while (pb && off >= pb->len) {
		off -= pb->len;
		pb = pb->next;
	}
	if (pb) {
		ctx->sq_hint_c = c;
		ctx->sq_hint_pb = pb;
	}
	*at = off;
	return pb;
}

/* Copy `len` queued bytes from `seq` to dst (no scatter-gather). */
static void sq_copy(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t seq, uint8_t *dst,
                    uint32_t len)
{
	uint32_t at;
	struct ipk_pb *pb = ipk_tcp_sq_find(ctx, c, seq, &at);

	while (pb && len > 0) {
		uint32_t n = IPK_MIN(len, pb->len - at);

		/* a pb of one packet (every ipk_tcp_write pb): no chain walk; its bytes
		 * [off, off + len) lie in that packet */
		if (!ipk_pkt_chain_next(ctx, pb->pkt))
			ipk_memcpy(dst, ipk_pkt_data(ctx, pb->pkt) + pb->off + at, n);
		else
			ipk_pkt_copy(ctx, pb->pkt, pb->off + at, dst, n);
		dst += n;
		len -= n;
		at = 0;
		pb = pb->next;
	}
}

/* Chain clones of `len` queued bytes from `seq` behind hdr (a fresh header packet,
 * no chain yet): one clone per send-queue packet the range touches. */
static int sq_attach(struct ipk_ctx *ctx, struct ipk_conn *c, void *hdr, uint32_t seq,
                     uint32_t len)
{
	uint32_t at;
	struct ipk_pb *pb = ipk_tcp_sq_find(ctx, c, seq, &at);
	void *tail = hdr;

	while (pb && len > 0) {
		uint32_t n = IPK_MIN(len, pb->len - at);
		int rc;

		pb->aux |= IPK_TCP_PB_CLONED; /* not IPK_PKT_RECYCLE'd: clones share it */
		rc = ipk_pkt_slice(ctx, &tail, pb->pkt, pb->off + at, n);
		if (rc != IPK_OK)
			return rc;
		len -= n;
		at = 0;
		pb = pb->next;
	}
	return len == 0 ? IPK_OK : IPK_EINVAL;
}

/* ------------------------------------------------------------ segments */

/* Segments up to this many TCP bytes are summed inline (wire.h); longer ones by
 * csum.c's unrolled loop. */
#define CSUM_INLINE_MAX 128u

/* The TCP checksum of a segment in one packet (header th, l4_len bytes): by the NIC
 * when it offers, else in software, in one pass over header and payload. */
static IPK_ALWAYS_INLINE void seg_csum_flat(const struct ipk_ctx *ctx, uint8_t *th,
                                            const struct ipk_tuple *t, uint32_t l4_len,
                                            struct ipk_tx_meta *meta)
{
	if (ctx->cfg.caps & IPK_CAP_TX_CSUM_TCP) {
		ipk_wr16(th + 16, ipk_csum_pseudo_fold(t->local_ip4_be, t->peer_ip4_be,
		                                       IPK_IPPROTO_TCP, l4_len));
		meta->flags |= IPK_TXOFF_TCP_CSUM;
	} else if (l4_len <= CSUM_INLINE_MAX) {
		ipk_wr16(th + 16, ipk_csum_l4_small(t->local_ip4_be, t->peer_ip4_be,
		                                    IPK_IPPROTO_TCP, th, l4_len));
	} else {
		ipk_wr16(th + 16, ipk_csum_l4(t->local_ip4_be, t->peer_ip4_be, IPK_IPPROTO_TCP, th,
		                              l4_len));
	}
}

/* The same for a segment chained by scatter-gather (pkt: header packet and clones). */
static void seg_csum(struct ipk_ctx *ctx, void *pkt, uint8_t *th, int chained,
                     const struct ipk_tuple *t, uint32_t l4_len, struct ipk_tx_meta *meta)
{
	int odd = 0;
	uint32_t sum;

	if (!chained || (ctx->cfg.caps & IPK_CAP_TX_CSUM_TCP)) {
		seg_csum_flat(ctx, th, t, l4_len, meta);
		return;
	}
	sum = ipk_csum_pseudo(t->local_ip4_be, t->peer_ip4_be, IPK_IPPROTO_TCP, l4_len);
	sum = ipk_csum_chain(ctx, pkt, ipk_l4_off(ctx), l4_len, sum, &odd);
	ipk_wr16(th + 16, ipk_csum_fold(sum));
}

/* Payloads up to this many bytes are copied into the header packet even with
 * IPK_CAP_SG: a clone, a chain link and, at a receiver that takes chains, a chained
 * delivery cost more than the copy (282 instructions per 1-byte request and
 * answer in the in-memory harness, bench/inmem). */
#define IPK_TCP_COPY_MAX 256u

/* A segment without payload other than our own SYN (a pure ACK, RST, SYN-ACK, bare
 * FIN) is control: it may use part of the integrator's reserve (ops->pkt_alloc_ctl),
 * for it is what lets memory be freed; data stops at the reserve. */
static void *seg_alloc(struct ipk_ctx *ctx, const struct seg_spec *sp)
{
	if (sp->plen == 0 && (sp->flags & (IPK_TCP_SYN | IPK_TCP_ACK)) != IPK_TCP_SYN)
		return ipk_ip4_alloc_ctl(ctx);
	return ipk_ip4_alloc(ctx);
}

/*
 * Header, options and payload of sp into pkt at l4 (the transport offset of its
 * family): returns the header length, or 0 when the payload could not be chained
 * (pkt freed, counted). The checksum field is left 0.
 */
static IPK_ALWAYS_INLINE uint32_t seg_fill(struct ipk_ctx *ctx, const struct ipk_tuple *t,
                                           const struct seg_spec *sp, struct ipk_conn *c,
                                           void *pkt, uint32_t l4, int sg)
{
	struct ipk_tcp_hdr h;
	uint8_t *th;
	uint32_t hlen;

	/* Header and options straight into the packet (its buffer holds l4 + 60 bytes,
	 * ipk_ctx_init's pkt_buf_size check); the length is set once they are known. */
	th = ipk_pkt_data(ctx, pkt) + l4;
	hlen = IPK_TCP_HLEN +
	       (sp->o ? ipk_tcp_opts_put(th + IPK_TCP_HLEN, sp->o) : 0u);
	ipk_pkt_set_len(ctx, pkt, l4 + hlen + (sg ? 0u : sp->plen));
	h.sport_be = t->local_port_be;
	h.dport_be = t->peer_port_be;
	h.seq = sp->seq;
	h.ack = sp->ack;
	h.doff = (uint8_t)hlen;
	h.flags = sp->flags;
	h.wnd = sp->wnd;
	h.csum = 0;
	h.urp = 0;
	ipk_tcp_hdr_put(th, &h);
	if (sp->plen && !sg)
		sq_copy(ctx, c, sp->seq, th + hlen, sp->plen);
	if (sg && sq_attach(ctx, c, pkt, sp->seq, sp->plen) != IPK_OK) {
		ipk_pkt_free_chain(ctx, pkt);
		ipk_drop(ctx, IPK_DROP_NO_PKT);
		return 0;
	}
	return hlen;
}

static int seg_send6(struct ipk_ctx *ctx, const struct ipk_tuple *t, const struct seg_spec *sp,
                     struct ipk_conn *c);

/*
 * Build and send one segment to t. Payload (sp->plen bytes at sp->seq) comes from c's
 * send queue: cloned and chained with IPK_CAP_SG (above IPK_TCP_COPY_MAX bytes),
 * copied into the header packet otherwise. The packet passes to ipk_ip4_output (which frees it on failure).
 */
static IPK_HOT int seg_send(struct ipk_ctx *ctx, const struct ipk_tuple *t, const struct seg_spec *sp,
                    struct ipk_conn *c)
{
	uint32_t l4 = ipk_l4_off(ctx), hlen;
	int sg = (ctx->cfg.caps & IPK_CAP_SG) && sp->plen > IPK_TCP_COPY_MAX;
	struct ipk_tx_meta meta;
	uint8_t *th;
	void *pkt;

	if (IPK_UNLIKELY(ipk_tcp_is6(t)))
		return seg_send6(ctx, t, sp, c);
	pkt = seg_alloc(ctx, sp);
	if (!pkt)
		return IPK_ENOBUFS;
	th = ipk_pkt_data(ctx, pkt) + l4;
	hlen = seg_fill(ctx, t, sp, c, pkt, l4, sg);
	if (hlen == 0)
		return IPK_ENOBUFS;
	ipk_memset(&meta, 0, sizeof(meta));
	meta.l4_len = (uint16_t)hlen;
	meta.tos = sp->tos;
	seg_csum(ctx, pkt, th, sg, t, hlen + sp->plen, &meta);
	if (c && sp->plen > c->mss && (ctx->cfg.caps & IPK_CAP_TSO)) {
		meta.flags |= IPK_TXOFF_TSO;
		meta.mss = (uint16_t)c->mss;
	}
	ctx->cnt.tcp_tx_segs++;
	if (sp->flags & IPK_TCP_RST)
		ctx->cnt.tcp_rst_tx++;
	return ipk_ip4_output(ctx, pkt, t->peer_ip4_be, IPK_IPPROTO_TCP, hlen + sp->plen, &meta);
}

/*
 * seg_csum for IPv6 (RFC 8200 §8.1 pseudo-header): with IPK_CAP_TX_CSUM_TCP6 the
 * folded pseudo-header sum for the NIC to finish (as IPv4's IPK_CAP_TX_CSUM_TCP),
 * else the whole sum in software, flat or over the scatter-gather chain.
 */
static void seg_csum6(struct ipk_ctx *ctx, void *pkt, uint8_t *th, int sg,
                      const struct ipk_tcp6_pair *e, uint32_t l4_len, struct ipk_tx_meta *meta)
{
	uint32_t sum;
	int odd = 0;

	if (ctx->cfg.caps & IPK_CAP_TX_CSUM_TCP6) {
		sum = ipk_csum_pseudo6(e->local, e->peer, IPK_IPPROTO_TCP, l4_len);
		ipk_wr16(th + 16, (uint16_t)~ipk_csum_fold(sum));
		meta->flags |= IPK_TXOFF_TCP_CSUM;
	} else if (!sg && l4_len <= IPK_TCP6_CSUM_INLINE_MAX) {
		ipk_wr16(th + 16, ipk_tcp6_csum_small(e->local, e->peer, th, l4_len));
	} else {
		sum = ipk_csum_pseudo6(e->local, e->peer, IPK_IPPROTO_TCP, l4_len);
		sum = ipk_csum_chain(ctx, pkt, ipk_l4_off6(ctx), l4_len, sum, &odd);
		ipk_wr16(th + 16, ipk_csum_fold(sum));
	}
}

/*
 * The segment over IPv6 (tcp6.c pairs): the same header and payload at the IPv6
 * upper-layer offset, the checksum by seg_csum6, TSO with IPK_CAP_TSO6 (seg_max6
 * sized it), the ECN codepoint ipk_tcp_ecn_out chose in the Traffic Class
 * (RFC 3168 §5: the same two bits as IPv4's TOS), then ipk_ip6_output_meta (offload
 * marks, next hop, ND).
 */
static IPK_NOINLINE int seg_send6(struct ipk_ctx *ctx, const struct ipk_tuple *t,
                                  const struct seg_spec *sp, struct ipk_conn *c)
{
	const struct ipk_tcp6_pair *e = ipk_tcp6_pair(ctx, t->local_ip4_be);
	uint32_t l4 = ipk_l4_off6(ctx), hlen;
	int sg = (ctx->cfg.caps & IPK_CAP_SG) && sp->plen > IPK_TCP_COPY_MAX;
	struct ipk_tx_meta meta;
	uint8_t *th;
	void *pkt;

	if (!e)
		return IPK_EINVAL;
	pkt = seg_alloc(ctx, sp);
	if (!pkt)
		return IPK_ENOBUFS;
	th = ipk_pkt_data(ctx, pkt) + l4;
	hlen = seg_fill(ctx, t, sp, c, pkt, l4, sg);
	if (hlen == 0)
		return IPK_ENOBUFS;
	ipk_memset(&meta, 0, sizeof(meta));
	meta.l4_len = (uint16_t)hlen;
	meta.tos = sp->tos;
	seg_csum6(ctx, pkt, th, sg, e, hlen + sp->plen, &meta);
	if (c && sp->plen > c->mss && (ctx->cfg.caps & IPK_CAP_TSO6)) {
		meta.flags |= IPK_TXOFF_TSO;
		meta.mss = (uint16_t)c->mss;
	}
	ctx->cnt.tcp_tx_segs++;
	if (sp->flags & IPK_TCP_RST)
		ctx->cnt.tcp_rst_tx++;
	return ipk_ip6_output_meta(ctx, pkt, e->local, e->peer, IPK_IPPROTO_TCP, hlen + sp->plen,
	                           &meta);
}

/* ------------------------------------------------------------ windows */

/* RFC 9293 §3.8.6.2.2 receiver SWS avoidance: offer more only when the window can
 * grow by min(rcvbuf/2, MSS); never move the right edge back (§3.8.6). */
uint32_t ipk_tcp_rcv_window(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	uint32_t buf = ctx->cfg.tcp_rcvbuf;
	uint32_t avail = buf > c->rcv_unread ? buf - c->rcv_unread : 0;
	uint32_t cur = ipk_seq_gt(c->rcv_adv, c->rcv_nxt) ? c->rcv_adv - c->rcv_nxt : 0;
	uint32_t lim = (uint32_t)0xffffu << c->rcv_wscale;

	if (avail < cur + IPK_MIN(buf / 2u, ipk_tcp_rcv_mss(ctx)))
		avail = cur;
	return IPK_MIN(avail, lim);
}

/* Window field for a non-SYN segment; records the right edge it announces. */
static IPK_ALWAYS_INLINE uint16_t wnd_field(const struct ipk_ctx *ctx, struct ipk_conn *c)
{
	uint32_t w = ipk_tcp_rcv_window(ctx, c);
	uint32_t f = w >> c->rcv_wscale;
	uint32_t edge = c->rcv_nxt + (f << c->rcv_wscale);

	if (ipk_seq_gt(edge, c->rcv_adv))
		c->rcv_adv = edge;
	return (uint16_t)f;
}

/* RFC 7323 §2.2: the window in a SYN is never scaled. */
static uint16_t syn_wnd_field(const struct ipk_ctx *ctx, struct ipk_conn *c)
{
	uint32_t w = IPK_MIN(ctx->cfg.tcp_rcvbuf, 0xffffu);

	c->rcv_adv = c->rcv_nxt + w;
	return (uint16_t)w;
}

static void syn_opts(const struct ipk_ctx *ctx, const struct ipk_conn *c, struct ipk_tcp_opts *o)
{
	ipk_memset(o, 0, sizeof(*o));
	o->has_mss = 1;
	o->mss = (uint16_t)ipk_tcp_mss_ours(ctx, &c->t);
	/* RFC 7323 §1.3: offer window scale in our SYN, and in a SYN-ACK only when the
	 * peer's SYN offered it; the same for SACK-permitted (RFC 2018 §2) and
	 * timestamps (RFC 7323 §3.2). */
	if (ctx->cfg.tcp_wscale > 0 &&
	    (c->state == IPK_TCP_SYN_SENT || (c->fl & IPK_TCPF_PEER_WS))) {
		o->has_ws = 1;
		o->ws = (uint8_t)IPK_MIN(ctx->cfg.tcp_wscale, IPK_TCP_MAX_WSCALE);
	}
	if (ctx->cfg.tcp_sack && (c->state == IPK_TCP_SYN_SENT || (c->fl & IPK_TCPF_SACK_OK)))
		o->has_sack_perm = 1;
	if (ctx->cfg.tcp_timestamps && (c->state == IPK_TCP_SYN_SENT || (c->fl & IPK_TCPF_TS_OK))) {
		o->has_ts = 1;
		o->tsval = ipk_tcp_ts_now(ctx, c);
		o->tsecr = c->state == IPK_TCP_SYN_SENT ? 0 : c->ts_recent;
	}
}

/* Options of a data or ACK segment, and the payload that still fits the frame: the
 * MSS already leaves room for timestamps, SACK blocks take payload bytes (a TSO
 * frame, whose header is copied into every segment, carries no blocks). */
static uint32_t data_opts(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_tcp_opts *o,
                          uint32_t len, const struct ipk_tcp_opts **out)
{
	uint32_t room = c->mss + ((c->fl & IPK_TCPF_TS_OK) ? IPK_TCP_TS_LEN : 0u), olen;

	*out = NULL;
	if (!ipk_tcp_seg_opts(ctx, c, o))
		return len;
	if (len > c->mss)
		o->nsack = 0;
	*out = o;
	olen = ipk_tcp_opts_len(o);
	if (len > 0 && len <= c->mss && len + olen > room)
		len = room - olen;
	return len;
}

/* -------------------------------------------------------------- xmit */

/* The states in which our FIN is queued to go (after CLOSE, RFC 9293 §3.10.4). */
#define FIN_STATES ((1u << IPK_TCP_FIN_WAIT_1) | (1u << IPK_TCP_CLOSING) | (1u << IPK_TCP_LAST_ACK))

static int fin_state(const struct ipk_conn *c) { return ((1u << c->state) & FIN_STATES) != 0; }

/* Time the segment ending at `end` unless one is being timed (RFC 6298 §3); 1 when
 * this send started the timing (rtt_t is now). */
static int rtt_start(const struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t end)
{
	if (c->fl & IPK_TCPF_RTT_ON)
		return 0;
	c->fl |= IPK_TCPF_RTT_ON;
	c->rtt_seq = end;
	c->rtt_t = ipk_tcp_tick(ctx->now, IPK_TCP_NS_PER_US);
	return 1;
}

/* Data went out: RFC 6298 (5.1) starts the loss timer when it is not running (lazily
 * when this send started RTT timing: the timer runs from rtt_t); new data moves a PTO
 * (RFC 8985 §7.2), and any send settles a lazy timer first. */
static IPK_ALWAYS_INLINE void loss_timer_sent(struct ipk_ctx *ctx, struct ipk_conn *c, int again,
                                              int timed)
{
	if (timed && c->rtx_kind == IPK_TCP_RTX_IDLE && ipk_tcp_loss_restart_lazy(ctx, c))
		return;
	if (!ipk_tcp_loss_armed(c)) {
		ipk_tcp_arm_loss_timer(ctx, c, 0);
	} else if (!again) {
		ipk_tcp_tlp_rearm(ctx, c);
	} else if (c->rtx_kind > IPK_TCP_RTX_IDLE) {
		ipk_tcp_loss_settle(ctx, c);
	}
}

static void after_xmit(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t seq, uint32_t used,
                       unsigned how)
{
	uint32_t end = seq + used;
	int again = ipk_seq_lt(seq, c->snd_max), timed = 0;

	if (used == 0)
		return;
	if (c->fl & IPK_TCPF_SACK_OK)
		ipk_tcp_rack_sent(ctx, c, seq, used);
	ipk_tcp_prr_sent(ctx, c, seq, used);
	if (again) {
		/* Karn's rule (RFC 6298 §3): no RTT sample across a retransmission. */
		c->fl &= ~IPK_TCPF_RTT_ON;
		c->retransmits++;
		ctx->cnt.tcp_retransmits++;
		if (c->fl & IPK_TCPF_SACK_OK)
			ipk_tcp_undo_sent(ctx, c, seq, used); /* RFC 3708: logged for D-SACKs */
	} else if (!(how & IPK_TCP_X_PROBE)) {
		timed = rtt_start(ctx, c, end);
	}
	if (ipk_seq_gt(end, c->snd_max))
		c->snd_max = end;
	if (how & IPK_TCP_X_PROBE)
		return;
	loss_timer_sent(ctx, c, again, timed);
}

IPK_HOT int ipk_tcp_xmit(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t seq, uint32_t len,
                 unsigned how)
{
	struct seg_spec sp;
	struct ipk_tcp_opts o;
	int syn = seq == c->iss && (c->state == IPK_TCP_SYN_SENT || c->state == IPK_TCP_SYN_RECEIVED);
	uint32_t used;
	int rc;

	ipk_memset(&sp, 0, sizeof(sp));
	sp.seq = seq;
	sp.ack = c->rcv_nxt;
	sp.flags = c->state == IPK_TCP_SYN_SENT ? 0 : IPK_TCP_ACK;
	if (syn) {
		sp.flags |= IPK_TCP_SYN | ipk_tcp_ecn_syn_flags(ctx, c);
		syn_opts(ctx, c, &o);
		sp.o = &o;
		sp.wnd = syn_wnd_field(ctx, c);
		len = 0;
	} else {
		len = data_opts(ctx, c, &o, len, &sp.o);
		sp.wnd = wnd_field(ctx, c);
		sp.plen = len;
		if ((how & IPK_TCP_X_FIN) && (c->fl & IPK_TCPF_FIN_QUEUED) && fin_state(c) &&
		    seq + len == ipk_tcp_data_end(c))
			sp.flags |= IPK_TCP_FIN;
		if (len && seq + len == ipk_tcp_data_end(c))
			sp.flags |= IPK_TCP_PSH;
		sp.flags |= ipk_tcp_ecn_out(c, seq, len, how, &sp.tos);
	}
	rc = seg_send(ctx, &c->t, &sp, c);
	/* No route, or no ARP slot to wait in (ip4.c, arp.c; counted there): not a
	 * pool running dry that the 1 ms retry cures, but a segment lost on the way.
	 * It counts as sent, so the loss timer repeats it with RFC 6298 (5.5) back-off,
	 * as for a neighbour that never answers ARP; retried at once, one SYN to or
	 * from such an address made ~1000 sends a second (issue 14 item 6). */
	if (rc == IPK_EHOSTUNREACH)
		rc = 0;
	if (rc < 0)
		return rc;
	if (!syn && (sp.flags & IPK_TCP_CWR))
		c->fl &= ~IPK_TCPF_CWR_OUT;
	if (sp.flags & IPK_TCP_ACK) {
		c->fl &= ~(IPK_TCPF_ACK_NOW | IPK_TCPF_ACK_LATER);
		c->delack_at = 0;
		c->segs_unacked = 0;
	}
	used = len + (syn ? 1u : 0u) + ((sp.flags & IPK_TCP_FIN) ? 1u : 0u);
	after_xmit(ctx, c, seq, used, how);
	return (int)used;
}

int ipk_tcp_send_ack(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	int rc = ipk_tcp_xmit(ctx, c, c->snd_nxt, 0, 0);

	return rc < 0 ? rc : IPK_OK;
}

int ipk_tcp_send_raw(struct ipk_ctx *ctx, const struct ipk_tuple *t, uint32_t seq, uint32_t ack,
                     uint8_t flags, uint16_t wnd, const struct ipk_tcp_opts *o)
{
	struct seg_spec sp;

	ipk_memset(&sp, 0, sizeof(sp));
	sp.seq = seq;
	sp.ack = ack;
	sp.flags = flags;
	sp.wnd = wnd;
	sp.o = o;
	return seg_send(ctx, t, &sp, NULL);
}

/*
 * The sequence number of a RST on a connection. RFC 9293 §3.10.5 says SND.NXT, but
 * the peer takes a RST only inside its window (RFC 5961 §3.2; with a zero window only
 * SEQ = RCV.NXT), and a peer whose buffer filled may have dropped what we sent and
 * closed its window behind it: SND.NXT then lies past SND.UNA + SND.WND and the RST
 * is ignored. Like Linux's tcp_acceptable_seq(): SND.NXT while it is inside the
 * window (or within one unit of the peer's window scale past it), else the window's
 * right edge.
 */
static uint32_t rst_seq(const struct ipk_conn *c)
{
	uint32_t edge = c->snd_una + c->snd_wnd;

	if (ipk_seq_le(c->snd_nxt, edge) ||
	    ((c->fl & IPK_TCPF_WS_OK) && c->snd_nxt - edge < (1u << c->snd_wscale)))
		return c->snd_nxt;
	return edge;
}

int ipk_tcp_send_rst_conn(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	struct seg_spec sp;

	/* RFC 9293 §3.10.5 ABORT: <SEQ=SND.NXT><CTL=RST> (ACK added so every stack
	 * takes it; the seq alone decides acceptability, RFC 5961 §3.2), SEQ kept
	 * inside the peer's window (rst_seq). */
	ipk_memset(&sp, 0, sizeof(sp));
	sp.seq = rst_seq(c);
	sp.ack = c->rcv_nxt;
	sp.flags = IPK_TCP_RST | (c->state == IPK_TCP_SYN_SENT ? 0 : IPK_TCP_ACK);
	return seg_send(ctx, &c->t, &sp, NULL);
}

void ipk_tcp_send_rst_for(struct ipk_ctx *ctx, const struct ipk_tcp_seg *s)
{
	struct seg_spec sp;
	struct ipk_tuple t;

	/* RFC 9293 §3.10.7.1: never answer a RST; take SEQ from the ACK field when there
	 * is one, else SEQ=0 and ACK the segment's whole sequence space. */
	if ((s->h.flags & IPK_TCP_RST) || !ipk_tcp_rst_allowed(ctx))
		return;
	ipk_memset(&sp, 0, sizeof(sp));
	if (s->h.flags & IPK_TCP_ACK) {
		sp.seq = s->h.ack;
		sp.flags = IPK_TCP_RST;
	} else {
		sp.ack = s->h.seq + ipk_tcp_seg_len(s);
		sp.flags = IPK_TCP_RST | IPK_TCP_ACK;
	}
	t.local_ip4_be = s->dst_be;
	t.peer_ip4_be = s->src_be;
	t.local_port_be = s->h.dport_be;
	t.peer_port_be = s->h.sport_be;
	seg_send(ctx, &t, &sp, NULL);
}

/* ---------------------------------------------------------- send policy */

/* seg_max for an IPv6 connection with IPK_CAP_TSO6: whole MSS multiples up to
 * tso_max, and never past what the 16-bit Payload Length can say with a 60-byte
 * TCP header (RFC 8200 §3; no jumbograms, RFC 2675); limited by the packet size
 * when payload must be copied. */
static uint32_t seg_max6(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	uint32_t max = IPK_MIN(ctx->cfg.tso_max, 0xffffu - 60u), m, room;

	m = max - max % c->mss;
	if (!(ctx->cfg.caps & IPK_CAP_SG)) {
		room = ctx->cfg.pkt_buf_size - ipk_l4_off6(ctx) - 60u;
		m = IPK_MIN(m, room - room % c->mss);
	}
	return m < c->mss ? c->mss : m;
}

/* seg_max with a TSO capability declared: whole MSS multiples up to tso_max (IPv4,
 * IPK_CAP_TSO; IPv6 seg_max6), limited by the packet size when payload must be
 * copied. Out of line: the MSS-only path tests the caps once, as before IPv6. */
static IPK_NOINLINE uint32_t seg_max_tso(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	uint32_t m, room;

	if (ipk_tcp_is6(&c->t))
		return (ctx->cfg.caps & IPK_CAP_TSO6) ? seg_max6(ctx, c) : c->mss;
	if (!(ctx->cfg.caps & IPK_CAP_TSO))
		return c->mss;
	m = ctx->cfg.tso_max - ctx->cfg.tso_max % c->mss;
	if (!(ctx->cfg.caps & IPK_CAP_SG)) {
		room = ctx->cfg.pkt_buf_size - ipk_l4_off(ctx) - 60u;
		m = IPK_MIN(m, room - room % c->mss);
	}
	return m < c->mss ? c->mss : m;
}

/* Largest payload one frame may carry: the MSS, or more with TSO (seg_max_tso). */
static IPK_ALWAYS_INLINE uint32_t seg_max(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	if (IPK_UNLIKELY(ctx->cfg.caps & (IPK_CAP_TSO | IPK_CAP_TSO6)))
		return seg_max_tso(ctx, c);
	return c->mss;
}

/*
 * RFC 9293 §3.8.6.2.1 sender SWS avoidance plus RFC 896 Nagle: a segment goes when it
 * is full, when it empties the queue and (with Nagle) nothing is in flight, or when it
 * is at least half the largest window the peer has offered.
 */
static int send_ok(const struct ipk_conn *c, uint32_t len, uint32_t avail, uint32_t inflight)
{
	if (len >= c->mss)
		return 1;
	if ((c->fl & IPK_TCPF_NAGLE) && inflight > 0)
		return 0;
	if (len == avail)
		return 1;
	return len >= c->max_sndwnd / 2u;
}

static void retry_later(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	if (c->retry_at == 0)
		c->retry_at = ipk_tcp_us_at(ctx, ipk_tcp_retry_ns(ctx, c));
}

/* One pass of the send loop; returns 0 when nothing more can go. */
static int output_one(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	uint32_t end = ipk_tcp_data_end(c);
	uint32_t avail, inflight, pipe, uwnd, usable, len;
	int fin, rc;

	/* Everything queued is out and no FIN waits: the common case after a send or an
	 * ACK, decided before any window arithmetic. */
	if (c->snd_nxt == end && !(c->fl & IPK_TCPF_FIN_QUEUED))
		return 0;
	avail = ipk_seq_lt(c->snd_nxt, end) ? end - c->snd_nxt : 0;
	inflight = c->snd_nxt - c->snd_una;
	/* RFC 6675 §5: with a scoreboard, cwnd limits pipe, not the raw flight. */
	pipe = ipk_tcp_sb(c) ? ipk_tcp_sb_pipe(c) : inflight;
	uwnd = c->snd_wnd > inflight ? c->snd_wnd - inflight : 0;
	usable = IPK_MIN(uwnd, c->cwnd > pipe ? c->cwnd - pipe : 0);
	len = IPK_MIN(IPK_MIN(avail, usable), seg_max(ctx, c));
	/* snd_nxt never passes the FIN, so reaching `end` means the FIN is (re)due */
	fin = fin_state(c) && (c->fl & IPK_TCPF_FIN_QUEUED) && ipk_seq_le(c->snd_nxt, end);
	if (len > 0 && !send_ok(c, len, avail, inflight))
		len = 0;
	fin = fin && c->snd_nxt + len == end;
	if (len == 0 && !fin)
		return 0;
	rc = ipk_tcp_xmit(ctx, c, c->snd_nxt, len, IPK_TCP_X_FIN);
	if (rc < 0) {
		retry_later(ctx, c);
		return 0;
	}
	c->snd_nxt += (uint32_t)rc;
	return rc > 0;
}

/* The send loop, at most `burst` segments (what the fast pass left of the burst). */
static void output_data(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t burst)
{
	uint32_t i;

	if (ipk_tcp_sb(c))
		ipk_tcp_sb_output(ctx, c); /* lost holes before new data (RFC 6675 §5 (C)) */
	for (i = 0; i < burst; i++) {
		if (!output_one(ctx, c))
			break;
	}
	if (ipk_tcp_sb(c))
		ipk_tcp_sb_rescue(ctx, c); /* RFC 6675 NextSeg (4), after rules (1) and (2) */
	/* RFC 9293 §3.8.6.1: data waiting behind a zero window needs the persist timer. */
	if (c->snd_wnd == 0 && ipk_seq_lt(c->snd_nxt, ipk_tcp_data_end(c)) &&
	    c->snd_nxt == c->snd_una && ipk_tcp_rtx_free(c))
		ipk_tcp_arm_persist(ctx, c);
}

/* ---------------------------------------------------- transmit fast path
 *
 * The output pass of an established connection in its common case, straight through:
 * everything queued goes in one segment of new data (or an owed pure ACK goes), or,
 * without TSO, full-MSS segments one after another while each comes from one pb and
 * fits the window (a bulk pass), with at most the timestamp option, copied into the
 * header packet, to a next hop whose Ethernet header the context has cached.
 * Everything else takes the general path (ipk_tcp_xmit and seg_send), which stays the
 * reference, also for the rest of a pass the fast path began: SYN, FIN,
 * retransmission, SACK or D-SACK blocks to send, loss recovery, ECN, a TSO frame, a
 * segment chained by scatter-gather or spread over pbs, Nagle or a window holding
 * data back, an unresolved next hop, the packet pool dry. The fast path writes the same bytes and does the same
 * bookkeeping (tests/tcp/test_tcp_txfast.c sends each situation both ways, with
 * ctx->tx_fast_off, and compares the frames).
 */

/* Connection flags that send the pass the general way. */
#define TXF_NOT (IPK_TCPF_ZOMBIE | IPK_TCPF_FIN_QUEUED | IPK_TCPF_ECN | IPK_TCPF_RECOVERY | \
                 IPK_TCPF_SACK_RCVY | IPK_TCPF_RTX_LOST)
#define TXF_STATES ((1u << IPK_TCP_ESTABLISHED) | (1u << IPK_TCP_CLOSE_WAIT))

/* txf_len's plan of a fast segment: the payload length in the low 16 bits, the TCP
 * flags in the next 8 (PSH when the data empties the queue, ipk_tcp_xmit's rule), and
 * TXF_MORE on a full-MSS segment with more queued behind it. */
#define TXF_LEN(plan) ((uint32_t)(plan) & 0xffffu)
#define TXF_FLAGS(plan) ((uint8_t)((uint32_t)(plan) >> 16))
#define TXF_ACK ((uint32_t)IPK_TCP_ACK << 16)
#define TXF_PSH ((uint32_t)(IPK_TCP_ACK | IPK_TCP_PSH) << 16)
#define TXF_MORE (1u << 24)

static int32_t txf_len(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	uint32_t avail = ipk_tcp_data_end(c) - c->snd_nxt, len = avail, fl = TXF_PSH;
	uint32_t inflight = c->snd_nxt - c->snd_una, uwnd, cwnd;

	/* One compare for what request/response passes never are: nothing to send, or
	 * more than one MSS (a bulk pass). */
	if (avail - 1u >= c->mss) {
		if (avail == 0 && !(c->fl & IPK_TCPF_ACK_NOW))
			return -1; /* nothing to send and no ACK owed now */
		if (avail != 0) {
			/* snd_nxt passes the queue's end only with a FIN (TXF_NOT); with TSO
			 * the general pass sends more than one MSS a frame */
			if ((int32_t)avail < 0 || (ctx->cfg.caps & IPK_CAP_TSO))
				return -1;
			len = c->mss;
			fl = TXF_ACK | TXF_MORE;
		}
	}
	/* IPK_TCPF_FAST: TXF_NOT, the state and the extension record known right */
	if (!(c->fl & IPK_TCPF_FAST) &&
	    ((c->fl & TXF_NOT) || !((1u << c->state) & TXF_STATES) || c->x))
		return -1;
	if (ctx->dsack_c == c || c->snd_nxt != c->snd_max || ctx->tx_fast_off)
		return -1;
	if (len == 0)
		return (int32_t)TXF_ACK;
	/* copied: with SG only up to IPK_TCP_COPY_MAX */
	if ((ctx->cfg.caps & IPK_CAP_SG) && len > IPK_TCP_COPY_MAX)
		return -1;
	/* output_one's usable window and send_ok (len == avail, or a full MSS) */
	uwnd = c->snd_wnd > inflight ? c->snd_wnd - inflight : 0;
	cwnd = c->cwnd > inflight ? c->cwnd - inflight : 0;
	if (IPK_MIN(uwnd, cwnd) < len ||
	    ((c->fl & IPK_TCPF_NAGLE) && inflight > 0 && len < c->mss))
		return -1;
	return (int32_t)(len | fl);
}

/* The fields of a fast segment's IPv4 header that do not change between segments
 * (DF, TOS 0: no ECN on this path); length, ID and checksum 0. */
static void txf_ip4_fixed(const struct ipk_ctx *ctx, const struct ipk_conn *c,
                          struct ipk_ip4_hdr *h)
{
	ipk_memset(h, 0, sizeof(*h));
	h->ihl = IPK_IP4_HLEN;
	h->frag = IPK_IP4_DF;
	h->ttl = ctx->cfg.ttl;
	h->proto = IPK_IPPROTO_TCP;
	h->src_be = ctx->cfg.ip4_be;
	h->dst_be = c->t.peer_ip4_be;
}

/* The same for its TCP header: ports and data offset. */
static void txf_tcp_fixed(const struct ipk_conn *c, uint32_t hlen, struct ipk_tcp_hdr *h)
{
	ipk_memset(h, 0, sizeof(*h));
	h->sport_be = c->t.local_port_be;
	h->dport_be = c->t.peer_port_be;
	h->doff = (uint8_t)hlen;
}

/*
 * The transmit template (struct ipk_tt, c's slot): the header of c's fast segments
 * with every field that changes per segment zero (IPv4 length, ID and checksum; TCP
 * sequence, acknowledgment, flags, window, checksum and the timestamp values), and
 * the sums of the fixed words, so a segment copies it, writes its own fields and adds
 * only those to the sums. Built when a connection's fast segment finds its slot
 * holding another's header for the second time in a row (the slot's `last`): a
 * slot two connections share costs them whole headers, as before, not a rebuild
 * per segment.
 */
static void txf_tmpl_build(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_tt *tt,
                           uint32_t hlen)
{
	uint32_t l2 = ctx->l2_len;
	uint8_t *p = tt->hdr, *th = p + l2 + IPK_IP4_HLEN;
	struct ipk_ip4_hdr ih;
	struct ipk_tcp_hdr h;

	ipk_memset(p, 0, IPK_TT_MAX);
	if (l2)
		ipk_memcpy(p, ctx->nhc_eth, IPK_ETH_HLEN);
	txf_ip4_fixed(ctx, c, &ih);
	ipk_ip4_put(p + l2, &ih, 0);
	tt->ip_sum = (uint16_t)~ipk_ip4_hdr_csum(&ih);
	txf_tcp_fixed(c, 0, &h); /* the offset is summed per segment, beside the flags */
	ipk_tcp_hdr_put(th, &h);
	if (hlen > IPK_TCP_HLEN)
		ipk_tcp_ts_put(th + IPK_TCP_HLEN, 0, 0);
	tt->tcp_sum = ipk_csum64_small((uint64_t)ih.src_be + ih.dst_be +
	                                       ipk_csum_ph_word(IPK_IPPROTO_TCP, 0),
	                               th, hlen);
	th[12] = (uint8_t)((hlen / 4u) << 4);
	tt->c = c;
	tt->gen = ctx->tt_gen;
}

/* Is c's next hop the one the next-hop cache holds, still bound? */
static int txf_route_ok(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	uint32_t nh = ipk_ip4_next_hop(ctx, c->t.peer_ip4_be);

	/* An IPv6 connection fails here without a test of its own: its peer_ip4_be is
	 * IPK_TCP6_MARK, the limited broadcast, whose next hop is never cached (link.c
	 * sends broadcasts without ARP), and IPv6 needs an Ethernet link. So it never
	 * gets a template and goes the general way (seg_send6). */
	return nh != 0 && (ctx->cfg.link == IPK_LINK_RAWIP ||
	                   (nh == ctx->nhc_ip_be && ctx->now < ctx->nhc_until));
}

/* Does the template hold c's header, its next hop still bound? Setting the next-hop
 * cache moves tt_gen on (link.c), which invalidates every template. */
static int txf_tmpl_ok(const struct ipk_ctx *ctx, const struct ipk_tt *tt,
                       const struct ipk_conn *c)
{
	return tt->c == c && tt->gen == ctx->tt_gen &&
	       (ctx->cfg.link == IPK_LINK_RAWIP || ctx->now < ctx->nhc_until);
}

/* txf_tmpl_ok for the current template: tt_cur leaves the slots whenever tt_gen
 * moves on, so a slot it points to is of this generation. */
static int txf_tmpl_cur(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	return ctx->tt_cur->c == c &&
	       (ctx->cfg.link == IPK_LINK_RAWIP || ctx->now < ctx->nhc_until);
}

/* c's template from its slot, when the slot holds a valid one, made the current
 * (ctx->tt_cur); 0 when it does not. Out of line, as txf_tmpl_make: the slot's
 * address would otherwise be one more value txf_send keeps, and gcc computes it at
 * ipk_tcp_output's entry, for every call. */
static IPK_NOINLINE int txf_tmpl_find(struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	struct ipk_tt *tt = txf_tt(ctx, c);

	if (!txf_tmpl_ok(ctx, tt, c))
		return 0;
	ctx->tt_cur = tt;
	return 1;
}

/* c's slot holds another's template: built for c when c was the last to find it
 * so (then current, returns 1), else c noted as that last (0). */
static IPK_NOINLINE int txf_tmpl_make(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t hlen)
{
	struct ipk_tt *tt = txf_tt(ctx, c);

	if (tt->last != c) {
		tt->last = c;
		return 0;
	}
	txf_tmpl_build(ctx, c, tt, hlen);
	ctx->tt_cur = tt;
	return 1;
}

/* A fast segment's header written whole at p (Ethernet, IPv4 of tot bytes, TCP and
 * timestamps), when the template is another connection's. */
static void txf_hdr_full(struct ipk_ctx *ctx, struct ipk_conn *c, uint8_t *p, uint32_t tot,
                         uint32_t hlen, uint32_t plan, uint16_t wnd,
                         struct ipk_tx_meta *meta)
{
	int hw = (ctx->cfg.caps & IPK_CAP_TX_CSUM_IP4) != 0;
	uint8_t *th = p + ctx->l2_len + IPK_IP4_HLEN;
	struct ipk_ip4_hdr ih;
	struct ipk_tcp_hdr h;

	if (ctx->l2_len)
		ipk_memcpy(p, ctx->nhc_eth, IPK_ETH_HLEN);
	ih.ihl = IPK_IP4_HLEN;
	ih.tos = 0;
	ih.tot_len = (uint16_t)tot;
	ih.id = ctx->ip_id++;
	ih.frag = IPK_IP4_DF;
	ih.ttl = ctx->cfg.ttl;
	ih.proto = IPK_IPPROTO_TCP;
	ih.csum = 0;
	ih.src_be = ctx->cfg.ip4_be;
	ih.dst_be = c->t.peer_ip4_be;
	ipk_ip4_put(p + ctx->l2_len, &ih, !hw);
	if (hw)
		meta->flags |= IPK_TXOFF_IP4_CSUM;
	h.sport_be = c->t.local_port_be;
	h.dport_be = c->t.peer_port_be;
	h.seq = c->snd_nxt;
	h.ack = c->rcv_nxt;
	h.doff = (uint8_t)hlen;
	h.flags = TXF_FLAGS(plan);
	h.wnd = wnd;
	h.csum = 0;
	h.urp = 0;
	ipk_tcp_hdr_put(th, &h);
	/* RFC 7323 §3.2: TSecr echoes TS.Recent on every segment with ACK */
	if (hlen > IPK_TCP_HLEN)
		ipk_tcp_ts_put(th + IPK_TCP_HLEN, ipk_tcp_ts_now(ctx, c), c->ts_recent);
}

/* The same from the template: copied whole, a fixed size (the buffer holds l4 + 60
 * bytes, ipk_ctx_init's pkt_buf_size check; the payload goes over any bytes past
 * the header), then the fields of this segment; the IPv4 checksum from the fixed
 * words' sum and the two that changed (RFC 1624), folded twice. */
static void txf_hdr_tmpl(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tt *tt,
                         uint8_t *p, uint32_t tot, uint32_t hlen, uint32_t plan, uint16_t wnd,
                         struct ipk_tx_meta *meta)
{
	uint8_t *ip = p + ctx->l2_len, *th = ip + IPK_IP4_HLEN;
	uint32_t id = ctx->ip_id++, sum;

	ipk_memcpy(p, tt->hdr, IPK_TT_MAX);
	ipk_wr16(ip + 2, (uint16_t)tot);
	ipk_wr16(ip + 4, (uint16_t)id);
	if (ctx->cfg.caps & IPK_CAP_TX_CSUM_IP4) {
		meta->flags |= IPK_TXOFF_IP4_CSUM;
	} else {
		sum = tt->ip_sum + tot + (id & 0xffffu);
		sum = (sum & 0xffffu) + (sum >> 16);
		sum += sum >> 16;
		ipk_wr16(ip + 10, (uint16_t)~sum);
	}
	ipk_wr32(th + 4, c->snd_nxt);
	ipk_wr32(th + 8, c->rcv_nxt);
	th[13] = TXF_FLAGS(plan);
	ipk_wr16(th + 14, wnd);
	if (hlen > IPK_TCP_HLEN) {
		ipk_wr32(th + IPK_TCP_HLEN + 4, ipk_tcp_ts_now(ctx, c));
		ipk_wr32(th + IPK_TCP_HLEN + 8, c->ts_recent);
	}
}

/* The send-queue pb whose one flat packet holds all of [snd_nxt, snd_nxt + len) (the
 * common case: a pb per write, sent whole), with *at the offset of snd_nxt in it; NULL
 * when the bytes are spread (the general path gathers them). */
static IPK_ALWAYS_INLINE struct ipk_pb *txf_src(struct ipk_ctx *ctx, struct ipk_conn *c,
                                                uint32_t len,
                              uint32_t *at)
{
	struct ipk_pb *pb = c->sq_head;

	*at = c->snd_nxt - c->sq_seq;
	if (!pb || *at + len > pb->len)
		pb = ipk_tcp_sq_find(ctx, c, c->snd_nxt, at);
	/* a pb ipk_tcp_write filled is one packet it wrote flat (write_copy): no chain
	 * to test for */
	if (!pb || *at + len > pb->len ||
	    (!(pb->aux & IPK_TCP_PB_COPY) && ipk_pkt_chain_next(ctx, pb->pkt)))
		return NULL;
	return pb;
}

/* The TCP checksum of a fast segment (l4 bytes at th) built from the template: the
 * template's sum plus the words the segment wrote and its payload. */
static IPK_ALWAYS_INLINE void txf_csum(const struct ipk_ctx *ctx, const struct ipk_tt *tt,
                                       uint8_t *th, const struct ipk_conn *c, uint32_t hlen,
                                       uint32_t l4, struct ipk_tx_meta *meta)
{
	uint64_t s;

	if ((ctx->cfg.caps & IPK_CAP_TX_CSUM_TCP) || l4 > CSUM_INLINE_MAX) {
		seg_csum_flat(ctx, th, &c->t, l4, meta);
		return;
	}
	s = tt->tcp_sum + ipk_csum_ph_word(0, l4);
	s = ipk_csum64_small(s, th + 4, 12); /* sequence, acknowledgment, offset to window */
	if (hlen > IPK_TCP_HLEN)
		s = ipk_csum64_small(s, th + IPK_TCP_HLEN + 4, 8);
	s = ipk_csum64_small(s, th + hlen, l4 - hlen);
	ipk_wr16(th + 16, ipk_csum64_finish(s));
}

/* What after_xmit does for new data sent by the fast path from pb alone: RACK's send
 * time goes on pb directly. No extension record: no recovery episode, so PRR has
 * nothing to count. */
static IPK_ALWAYS_INLINE void txf_sent(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t seq,
                                       uint32_t len,
                     struct ipk_pb *pb)
{
	int timed;

	if (c->fl & IPK_TCPF_SACK_OK) {
		pb->t = ipk_tcp_tx_stamp(ctx);
		if (pb->xmit == 0)
			pb->xmit = 1;
	}
	timed = rtt_start(ctx, c, seq + len);
	c->snd_max = seq + len;
	/* ipk_tcp_loss_restart_lazy inline: txf_len's connection is ESTABLISHED or
	 * CLOSE-WAIT, outside recovery */
	if (timed && ipk_tcp_loss_lazy_ok(c)) {
		c->rtx_kind = ipk_tcp_tlp_allowed_est(ctx, c) ? IPK_TCP_RTX_LAZY_TLP :
		                                                 IPK_TCP_RTX_LAZY_RTO;
		return;
	}
	loss_timer_sent(ctx, c, 0, timed);
}

/* What ipk_tcp_xmit does after seg_send, for an ACK and new data (a fast segment
 * of either family went). */
static IPK_ALWAYS_INLINE void txf_done(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t seq,
                                       uint32_t len, struct ipk_pb *src)
{
	c->fl &= ~(IPK_TCPF_ACK_NOW | IPK_TCPF_ACK_LATER);
	c->delack_at = 0;
	c->segs_unacked = 0;
	if (src) {
		txf_sent(ctx, c, seq, len, src);
		c->snd_nxt = seq + len;
	}
}

/* txf_send6's hand-over with IPK_CAP_TX_CSUM_TCP6: the pseudo-header sum for the
 * NIC and the marks (seg_csum6), as the general path sends. */
static IPK_NOINLINE void txf_out6_offload(struct ipk_ctx *ctx, void *pkt,
                                          const struct ipk_tcp6_pair *e, uint8_t *th,
                                          uint32_t hlen, uint32_t len)
{
	struct ipk_tx_meta meta;

	ipk_memset(&meta, 0, sizeof(meta));
	meta.l4_len = (uint16_t)hlen;
	seg_csum6(ctx, pkt, th, 0, e, hlen + len, &meta);
	(void)ipk_ip6_output_meta(ctx, pkt, e->local, e->peer, IPK_IPPROTO_TCP, hlen + len, &meta);
}

/*
 * The IPv6 transmit template (c's slot, as IPv4's): Ethernet from the next-hop header
 * cache (nd.c ipk_nd_hc_tx), the IPv6 header (version, traffic class and flow label
 * 0: no ECN on this path, TXF_NOT; Next Header TCP; the pair's addresses) and the TCP
 * header's fixed words, with their sum and the pseudo-header's addresses and
 * protocol (RFC 8200 §8.1) in tcp_sum. A segment copies it and writes the Payload
 * Length, the Hop Limit (an RA may change it: written per segment, outside every
 * sum) and its TCP fields. Valid while the header cache's rules hold for the
 * neighbour it was built from (txf_tmpl6_ok); built as IPv4's (txf_tmpl_make) when
 * c finds its slot not its own twice in a row and the cache holds its peer.
 */
static void txf_tmpl6_build(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_tt *tt,
                            const struct ipk_tcp6_pair *e, uint32_t hlen)
{
	uint8_t *p = tt->hdr, *ip = p + IPK_ETH_HLEN, *th = ip + IPK_IP6_HLEN;
	struct ipk_tcp_hdr h;

	ipk_memset(p, 0, sizeof(tt->hdr));
	ipk_memcpy(p, ctx->ip6.hc.eth, IPK_ETH_HLEN);
	ipk_wr32(ip, 6u << 28);
	ip[6] = IPK_IPPROTO_TCP;
	ipk_memcpy(ip + 8, e->local, 16);
	ipk_memcpy(ip + 24, e->peer, 16);
	txf_tcp_fixed(c, 0, &h); /* the offset is summed per segment, beside the flags */
	ipk_tcp_hdr_put(th, &h);
	if (hlen > IPK_TCP_HLEN)
		ipk_tcp_ts_put(th + IPK_TCP_HLEN, 0, 0);
	tt->tcp_sum = ipk_csum64_small(ipk_csum64_small(ipk_csum_ph_word(IPK_IPPROTO_TCP, 0),
	                                                ip + 8, 32),
	                               th, hlen);
	th[12] = (uint8_t)((hlen / 4u) << 4);
	tt->nd6 = ctx->ip6.hc.nd;
	tt->state6 = ctx->ip6.hc.state;
	tt->gen6 = ctx->ip6.hc.gen;
	tt->until6 = ctx->ip6.hc.until;
	tt->gen = ctx->tt_gen;
	tt->c = c;
}

/* Does tt hold c's IPv6 header, its neighbour still as it was (ipk_nd_hc_ok's rules:
 * state and its deadline, no route or entry changed, the MAC unchanged)? */
static IPK_ALWAYS_INLINE int txf_tmpl6_ok(const struct ipk_ctx *ctx, const struct ipk_tt *tt,
                        const struct ipk_conn *c)
{
	const struct ipk_nd_entry *n = &ctx->ip6.nd[tt->nd6];

	return tt->c == c && ctx->now < tt->until6 && tt->gen6 == ctx->ip6.gen &&
	       n->state == tt->state6 && ipk_mac_eq(n->mac, tt->hdr);
}

/* c's IPv6 template (slot tt) made, or NULL (then the segment is built whole). */
static IPK_NOINLINE struct ipk_tt *txf_tmpl6_make(struct ipk_ctx *ctx, struct ipk_conn *c,
                                                  struct ipk_tt *tt,
                                                  const struct ipk_tcp6_pair *e, uint32_t hlen)
{
	if (ctx->l2_len != IPK_ETH_HLEN || !ipk_nd_hc_ok(ctx, e->peer))
		return NULL;
	if (tt->last != c) {
		tt->last = c;
		return NULL;
	}
	if (ctx->tt_cur == tt) /* IPv4's current template leaves the slot */
		ctx->tt_cur = &ctx->tt_slot[IPK_TT_SLOTS];
	txf_tmpl6_build(ctx, c, tt, e, hlen);
	return tt;
}

/* c's IPv6 template, valid, or NULL (then the segment is built whole). */
static IPK_ALWAYS_INLINE struct ipk_tt *txf_tmpl6(struct ipk_ctx *ctx, struct ipk_conn *c,
                                                  const struct ipk_tcp6_pair *e, uint32_t hlen)
{
	struct ipk_tt *tt = txf_tt(ctx, c);

	return txf_tmpl6_ok(ctx, tt, c) ? tt : txf_tmpl6_make(ctx, c, tt, e, hlen);
}

/* The fast segment from c's IPv6 template tt into pkt (length set), checksummed,
 * and to the link: what ipk_ip6_output and ipk_nd_hc_tx do for it. */
static void txf_send6_tmpl(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_tt *tt,
                           const struct ipk_tcp6_pair *e, void *pkt, uint32_t hlen,
                           uint32_t plan, const uint8_t *data)
{
	uint32_t len = TXF_LEN(plan), l4 = hlen + len;
	uint8_t *p = ipk_pkt_data(ctx, pkt), *ip = p + IPK_ETH_HLEN, *th = ip + IPK_IP6_HLEN;
	uint64_t s;

	ipk_memcpy(p, tt->hdr, IPK_ETH_HLEN + IPK_IP6_HLEN + hlen);
	ipk_wr16(ip + 4, (uint16_t)l4);
	ip[7] = ctx->ip6.hlim;
	ipk_wr32(th + 4, c->snd_nxt);
	ipk_wr32(th + 8, c->rcv_nxt);
	th[13] = TXF_FLAGS(plan);
	ipk_wr16(th + 14, wnd_field(ctx, c));
	/* RFC 7323 §3.2: TSecr echoes TS.Recent on every segment with ACK */
	if (hlen > IPK_TCP_HLEN) {
		ipk_wr32(th + IPK_TCP_HLEN + 4, ipk_tcp_ts_now(ctx, c));
		ipk_wr32(th + IPK_TCP_HLEN + 8, c->ts_recent);
	}
	if (len)
		ipk_copy_short(th + hlen, data, len);
	if (l4 <= IPK_TCP6_CSUM_INLINE_MAX) {
		s = tt->tcp_sum + ipk_csum_ph_word(0, l4);
		s = ipk_csum64_small(s, th + 4, 12); /* sequence, acknowledgment, offset to window */
		if (hlen > IPK_TCP_HLEN)
			s = ipk_csum64_small(s, th + IPK_TCP_HLEN + 4, 8);
		s = ipk_csum64_small(s, th + hlen, len);
		ipk_wr16(th + 16, ipk_csum64_finish(s));
	} else {
		ipk_wr16(th + 16, ipk_csum_l4_6(e->local, e->peer, IPK_IPPROTO_TCP, th, l4));
	}
	ctx->ip6.nd[tt->nd6].used = ctx->now;
	ctx->cnt.ip6_tx++;
	ipk_link_tx_len(ctx, pkt, IPK_ETH_HLEN + IPK_IP6_HLEN + l4);
}

/*
 * txf_send for an IPv6 connection (txf_send hands over where its route test fails,
 * which it does for every IPv6 connection: internal.h IPK_TCP6_MARK; 0 at once for
 * an IPv4 one, which the general path then takes): the segment txf_len
 * planned, built whole (no template yet: the Ethernet header comes from ND on each
 * segment, ipk_ip6_output), checksummed with the IPv6 pseudo-header. txf_len's
 * conditions are the same for both families (len within the MSS, which the path
 * MTU bounds). 0 when it cannot go this way (payload spread, pool dry).
 */
static IPK_NOINLINE int txf_send6(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t plan)
{
	const struct ipk_tcp6_pair *e;
	struct ipk_tt *tt;
	uint32_t len = TXF_LEN(plan), seq = c->snd_nxt, at = 0, l4 = ipk_l4_off6(ctx);
	uint32_t hlen = IPK_TCP_HLEN + ((c->fl & IPK_TCPF_TS_OK) ? IPK_TCP_TS_LEN : 0u);
	struct ipk_pb *src = NULL;
	struct ipk_tcp_hdr h;
	uint8_t *th;
	void *pkt;

	if (!ipk_tcp_is6(&c->t))
		return 0;
	e = ipk_tcp6_pair(ctx, c->t.local_ip4_be);
	if (!e || IPK_IP6_HLEN + hlen + len > ctx->ip6.mtu)
		return 0;
	if (len && !(src = txf_src(ctx, c, len, &at)))
		return 0;
	pkt = ipk_pkt_alloc(ctx);
	if (!pkt)
		return 0; /* the general path counts it and retries later */
	ipk_pkt_set_len(ctx, pkt, l4 + hlen + len);
	if (!(ctx->cfg.caps & IPK_CAP_TX_CSUM_TCP6) && (tt = txf_tmpl6(ctx, c, e, hlen))) {
		txf_send6_tmpl(ctx, c, tt, e, pkt, hlen, plan,
		               src ? ipk_pkt_data(ctx, src->pkt) + src->off + at : NULL);
		ctx->cnt.tcp_tx_segs++;
		ctx->tx_fast_n++;
		txf_done(ctx, c, seq, len, src);
		return 1;
	}
	th = ipk_pkt_data(ctx, pkt) + l4;
	h.sport_be = c->t.local_port_be;
	h.dport_be = c->t.peer_port_be;
	h.seq = seq;
	h.ack = c->rcv_nxt;
	h.doff = (uint8_t)hlen;
	h.flags = TXF_FLAGS(plan);
	h.wnd = wnd_field(ctx, c);
	h.csum = 0;
	h.urp = 0;
	ipk_tcp_hdr_put(th, &h);
	/* RFC 7323 §3.2: TSecr echoes TS.Recent on every segment with ACK */
	if (hlen > IPK_TCP_HLEN)
		ipk_tcp_ts_put(th + IPK_TCP_HLEN, ipk_tcp_ts_now(ctx, c), c->ts_recent);
	if (src)
		ipk_copy_short(th + hlen, ipk_pkt_data(ctx, src->pkt) + src->off + at, len);
	ctx->cnt.tcp_tx_segs++;
	ctx->tx_fast_n++;
	/* no route / no ND slot: counted there; the segment counts as sent (as
	 * ipk_tcp_xmit treats IPK_EHOSTUNREACH) and the loss timer repeats it */
	if (IPK_UNLIKELY(ctx->cfg.caps & IPK_CAP_TX_CSUM_TCP6)) {
		txf_out6_offload(ctx, pkt, e, th, hlen, len);
	} else {
		ipk_wr16(th + 16, hlen + len <= IPK_TCP6_CSUM_INLINE_MAX ?
		                  ipk_tcp6_csum_small(e->local, e->peer, th, hlen + len) :
		                  ipk_csum_l4_6(e->local, e->peer, IPK_IPPROTO_TCP, th, hlen + len));
		(void)ipk_ip6_output(ctx, pkt, e->local, e->peer, IPK_IPPROTO_TCP, hlen + len, 0);
	}
	txf_done(ctx, c, seq, len, src);
	return 1;
}

/* Build and send the segment txf_len planned; 0 (nothing done) when the frame cannot
 * go this way after all: above the MTU, no route, next hop not cached, payload spread
 * over packets, pool dry. */
static IPK_HOT int txf_send(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t plan)
{
	uint32_t len = TXF_LEN(plan);
	uint32_t hlen = IPK_TCP_HLEN + ((c->fl & IPK_TCPF_TS_OK) ? IPK_TCP_TS_LEN : 0u);
	uint32_t l2 = ctx->l2_len, tot = IPK_IP4_HLEN + hlen + len, seq = c->snd_nxt, at = 0;
	int tmpl;
	uint16_t wnd;
	struct ipk_tx_meta meta;
	struct ipk_pb *src = NULL;
	uint8_t *p, *th;
	void *pkt;

	/* an IPv6 connection has no IPv4 template or route to look for */
	if (IPK_UNLIKELY(ipk_tcp_is6(&c->t)))
		return txf_send6(ctx, c, plan);
	tmpl = txf_tmpl_cur(ctx, c) || txf_tmpl_find(ctx, c);
	if (tot > ctx->cfg.mtu || (!tmpl && !txf_route_ok(ctx, c)))
		return txf_send6(ctx, c, plan);
	if (len && !(src = txf_src(ctx, c, len, &at)))
		return 0;
	pkt = ipk_pkt_alloc(ctx);
	if (!pkt)
		return 0; /* the general path counts it and retries later */
	if (!tmpl)
		tmpl = txf_tmpl_make(ctx, c, hlen);
	ipk_pkt_set_len(ctx, pkt, l2 + tot);
	p = ipk_pkt_data(ctx, pkt);
	ipk_memset(&meta, 0, sizeof(meta));
	th = p + l2 + IPK_IP4_HLEN;
	wnd = wnd_field(ctx, c);
	if (tmpl) {
		txf_hdr_tmpl(ctx, c, ctx->tt_cur, p, tot, hlen, plan, wnd, &meta);
		if (src)
			ipk_copy_short(th + hlen, ipk_pkt_data(ctx, src->pkt) + src->off + at, len);
		txf_csum(ctx, ctx->tt_cur, th, c, hlen, hlen + len, &meta);
	} else {
		txf_hdr_full(ctx, c, p, tot, hlen, plan, wnd, &meta);
		if (src)
			ipk_copy_short(th + hlen, ipk_pkt_data(ctx, src->pkt) + src->off + at, len);
		seg_csum_flat(ctx, th, &c->t, hlen + len, &meta);
	}
	if (meta.flags && IPK_OPS(ctx)->tx_offload) {
		meta.l2_len = (uint16_t)l2;
		meta.l3_len = IPK_IP4_HLEN;
		meta.l4_len = (uint16_t)hlen;
		IPK_OPS(ctx)->tx_offload(pkt, &meta, IPK_OPQ(ctx));
	}
	ctx->cnt.tcp_tx_segs++;
	ctx->tx_fast_n++;
	ipk_link_tx_len(ctx, pkt, l2 + tot);
	/* what ipk_tcp_xmit does after seg_send, for an ACK and new data */
	c->fl &= ~(IPK_TCPF_ACK_NOW | IPK_TCPF_ACK_LATER);
	c->delack_at = 0;
	c->segs_unacked = 0;
	if (src) {
		txf_sent(ctx, c, seq, len, src);
		c->snd_nxt = seq + len;
	}
	return 1;
}

/* ipk_tcp_timers_update after a fast pass, when only the loss timer can have moved
 * earlier: the connection is on the timer list with its loss timer armed, and nothing
 * else but keep-alive may be set (the segment's ACK cleared the delayed ACK, the pass
 * cleared retry). The context deadline only ever needs lowering (it may be early). */
static void txf_timers(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	uint64_t d;

	if (!(c->fl & IPK_TCPF_ON_TIMERS) || c->rtx_at == 0 || c->keepalive_at) {
		ipk_tcp_timers_update(ctx, c);
		return;
	}
	/* a lazily restarted loss timer kept its deadline, which the context has seen */
	if (c->rtx_kind > IPK_TCP_RTX_IDLE)
		return;
	d = ipk_tcp_us_ns(ctx, c->rtx_at);
	if (d < ctx->tcp_deadline)
		ctx->tcp_deadline = d;
}

IPK_HOT void ipk_tcp_output(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	uint32_t fast = 0;
	int32_t plan;

	/* Fast segments while each is the one output_data's loop would send next: one
	 * that empties the queue (or a pure ACK) completes the pass, as does the burst
	 * used up; else the general pass goes on with the rest of the burst. */
	while ((plan = txf_len(ctx, c)) >= 0 && txf_send(ctx, c, (uint32_t)plan)) {
		if (!(plan & TXF_MORE) || ++fast == IPK_TCP_OUTPUT_BURST) {
			c->retry_at = 0;
			c->nretry = 0;
			txf_timers(ctx, c);
			return;
		}
	}
	if (c->state == IPK_TCP_CLOSED || (c->fl & IPK_TCPF_ZOMBIE))
		return;
	c->retry_at = 0;
	if ((c->state == IPK_TCP_SYN_SENT || c->state == IPK_TCP_SYN_RECEIVED) &&
	    c->snd_nxt == c->iss) {
		int rc = ipk_tcp_xmit(ctx, c, c->iss, 0, 0);

		if (rc < 0)
			retry_later(ctx, c);
		else
			c->snd_nxt = c->iss + 1u;
	} else if (ipk_tcp_synced(c) && c->state != IPK_TCP_TIME_WAIT) {
		output_data(ctx, c, IPK_TCP_OUTPUT_BURST - fast);
	}
	if ((c->fl & IPK_TCPF_ACK_NOW) && c->state != IPK_TCP_SYN_SENT &&
	    ipk_tcp_send_ack(ctx, c) < 0)
		retry_later(ctx, c);
	if ((c->fl & IPK_TCPF_ACK_LATER) && c->delack_at == 0)
		c->delack_at = ipk_tcp_us_at(ctx, ctx->cfg.tcp_delack_ns);
	if (c->retry_at == 0)
		c->nretry = 0; /* nothing failed on this pass: the back-off starts over */
	ipk_tcp_timers_update(ctx, c);
}
