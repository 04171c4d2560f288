/*
 * udp.c: UDP (RFC 768, RFC 1122 §4.1): the bind table, input with checksum and
 * length checks, and zero-copy or copying output.
 *
 * The bind table is an open-addressing hash of cfg.max_udp_binds slots with linear
 * probing and backward-shift deletion, so a lookup on the per-packet path touches a
 * few slots, not every bound port.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* ------------------------------------------------------------ bind table */

static uint32_t bind_home(const struct ipk_ctx *c, uint16_t port_be)
{
	/* Fibonacci hashing of the port, reduced to the table size. */
	uint32_t h = (uint32_t)port_be * 2654435769u;

	return (h >> 16) % c->cfg.max_udp_binds;
}

/* Slot holding port_be, or -1. Stops at the first empty slot. */
static int32_t bind_find(const struct ipk_ctx *c, uint16_t port_be)
{
	uint32_t n = c->cfg.max_udp_binds, i = bind_home(c, port_be), k;

	for (k = 0; k < n; k++, i = (i + 1u) % n) {
		if (c->udp_binds[i].port_be == 0)
			return -1;
		if (c->udp_binds[i].port_be == port_be)
			return (int32_t)i;
	}
	return -1;
}

int ipk_udp_bind(struct ipk_ctx *ctx, uint16_t port_be)
{
	uint32_t n, i, k;

	/* A bound port's datagrams go to ops->udp_recv: without it they would vanish. */
	if (!ctx || port_be == 0 || !IPK_OPS(ctx)->udp_recv)
		return IPK_EINVAL;
	if (bind_find(ctx, port_be) >= 0)
		return IPK_EADDRINUSE;
	n = ctx->cfg.max_udp_binds;
	for (k = 0, i = bind_home(ctx, port_be); k < n; k++, i = (i + 1u) % n) {
		if (ctx->udp_binds[i].port_be == 0) {
			ctx->udp_binds[i].port_be = port_be;
			return 0;
		}
	}
	return IPK_ENOMEM;
}

/* Is slot `home` <= ... < `hole` on the cyclic probe path to `i`? Then the entry at
 * i may move back into the hole. */
static int bind_can_fill(uint32_t home, uint32_t hole, uint32_t i)
{
	if (hole <= i)
		return home <= hole || home > i;
	return home <= hole && home > i;
}

int ipk_udp_unbind(struct ipk_ctx *ctx, uint16_t port_be)
{
	int32_t at;
	uint32_t n, hole, i, k;

	if (!ctx || port_be == 0)
		return IPK_EINVAL;
	at = bind_find(ctx, port_be);
	if (at < 0)
		return IPK_ENOENT;
	n = ctx->cfg.max_udp_binds;
	hole = (uint32_t)at;
	ctx->udp_binds[hole].port_be = 0;
	/* Backward-shift deletion keeps every probe chain unbroken. */
	for (k = 1, i = (hole + 1u) % n; k < n; k++, i = (i + 1u) % n) {
		uint16_t p = ctx->udp_binds[i].port_be;

		if (p == 0)
			break;
		if (bind_can_fill(bind_home(ctx, p), hole, i)) {
			ctx->udp_binds[hole].port_be = p;
			ctx->udp_binds[i].port_be = 0;
			hole = i;
		}
	}
	return 0;
}

/* ----------------------------------------------------------------- input */

/* RFC 768: checksum 0 means the sender computed none. */
static int udp_csum_ok(struct ipk_ctx *c, void *pkt, const struct ipk_rx *rx,
                       const struct ipk_udp_hdr *h)
{
	uint32_t sum;
	int odd = 0;

	if (h->csum == 0 || rx->l4_csum_ok)
		return 1;
	if (!rx->reassembled && (c->cfg.caps & IPK_CAP_RX_CSUM_L4) &&
	    (IPK_OPS(c)->rx_csum(pkt, IPK_OPQ(c)) & IPK_RXCSUM_L4_BAD))
		return 0;
	sum = ipk_csum_pseudo(rx->src_be, rx->dst_be, IPK_IPPROTO_UDP, h->len);
	sum = ipk_csum_chain(c, pkt, rx->l4_off, h->len, sum, &odd);
	return ipk_csum_fold(sum) == 0;
}

/* Takes ownership of pkt (maybe a reassembled chain); freed after ops->udp_recv. */
void ipk_udp_input(struct ipk_ctx *c, void *pkt, const struct ipk_rx *rx)
{
	struct ipk_udp_hdr h;
	struct ipk_tuple t;
	uint8_t hdr[IPK_UDP_HLEN];

	c->cnt.udp_rx++;
	if (ipk_pkt_copy(c, pkt, rx->l4_off, hdr, sizeof(hdr)) != sizeof(hdr) ||
	    ipk_udp_parse(hdr, rx->l4_len, &h) < 0) {
		ipk_drop_pkt(c, pkt, IPK_DROP_UDP_MALFORMED);
		return;
	}
	if (!udp_csum_ok(c, pkt, rx, &h)) {
		ipk_drop_pkt(c, pkt, IPK_DROP_UDP_CSUM);
		return;
	}
	if (bind_find(c, h.dport_be) < 0) {
		/* RFC 1122 §4.1.3.1: port unreachable, never for broadcasts. */
		if (!rx->is_bcast)
			ipk_icmp_send_error(c, pkt, rx->l3_off, IPK_ICMP_UNREACH,
			                    IPK_ICMP_UNREACH_PORT);
		ipk_drop_pkt(c, pkt, IPK_DROP_UDP_NO_PORT);
		return;
	}
	if (IPK_OPS(c)->udp_recv) {
		t.local_ip4_be = rx->dst_be;
		t.peer_ip4_be = rx->src_be;
		t.local_port_be = h.dport_be;
		t.peer_port_be = h.sport_be;
		IPK_OPS(c)->udp_recv(c, &t, pkt, rx->l4_off + IPK_UDP_HLEN,
		                     (uint32_t)h.len - IPK_UDP_HLEN, IPK_OPQ(c));
	}
	ipk_pkt_free_chain(c, pkt);
}

/* ---------------------------------------------------------------- output */

/* Write the UDP header at ipk_l4_off of pkt (whose chain holds the payload) and its
 * checksum: the pseudo-header sum for the NIC to finish when `hw`, else the whole
 * checksum in software. */
static void udp_fill(struct ipk_ctx *c, void *pkt, const struct ipk_udp_hdr *h,
                     uint32_t dst_be, int hw)
{
	uint8_t *p = ipk_pkt_data(c, pkt) + ipk_l4_off(c);
	struct ipk_udp_hdr w = *h;
	uint32_t sum;
	int odd = 0;

	if (hw) {
		w.csum = ipk_csum_pseudo_fold(c->cfg.ip4_be, dst_be, IPK_IPPROTO_UDP, h->len);
		ipk_udp_emit(p, IPK_UDP_HLEN, &w);
		return;
	}
	sum = ipk_csum_pseudo(c->cfg.ip4_be, dst_be, IPK_IPPROTO_UDP, h->len);
	ipk_udp_emit(p, IPK_UDP_HLEN, &w);
	sum = ipk_csum_chain(c, pkt, ipk_l4_off(c), h->len, sum, &odd);
	w.csum = ipk_csum_fold(sum);
	/* RFC 768: a computed 0 is sent as all ones (0 means "no checksum"). */
	ipk_wr16(p + 6, w.csum ? w.csum : 0xffffu);
}

/* `pkt` holds link + IPv4 room, 8 bytes of UDP header room and the payload (in
 * its chain). Fills the header and checksum, sends. Above the MTU the datagram
 * goes as fragments, checksummed in software (an offload cannot span them). Sets
 * *kept when nothing was sent and pkt is still the caller's (fragments could not
 * be built); otherwise pkt is consumed, also on error. */
static int udp_emit(struct ipk_ctx *c, void *pkt, uint16_t sport_be, uint32_t dst_be,
                    uint16_t dport_be, uint32_t plen, int *kept)
{
	struct ipk_udp_hdr h;
	struct ipk_tx_meta meta;
	uint32_t ulen = IPK_UDP_HLEN + plen;
	int rc;

	ipk_memset(&meta, 0, sizeof(meta));
	h.sport_be = sport_be;
	h.dport_be = dport_be;
	h.len = (uint16_t)ulen;
	h.csum = 0;
	if (IPK_IP4_HLEN + ulen > c->cfg.mtu) {
		udp_fill(c, pkt, &h, dst_be, 0);
		rc = ipk_ip4_output_frags(c, pkt, dst_be, IPK_IPPROTO_UDP, ulen, 0);
		*kept = rc == IPK_ENOBUFS || rc == IPK_EMSGSIZE || rc == IPK_EHOSTUNREACH;
		if (*kept)
			return rc;
	} else {
		if (c->cfg.caps & IPK_CAP_TX_CSUM_UDP) {
			meta.flags |= IPK_TXOFF_UDP_CSUM;
			meta.l4_len = IPK_UDP_HLEN;
		}
		udp_fill(c, pkt, &h, dst_be, (c->cfg.caps & IPK_CAP_TX_CSUM_UDP) != 0);
		rc = ipk_ip4_output(c, pkt, dst_be, IPK_IPPROTO_UDP, ulen, &meta);
	}
	c->cnt.udp_tx++;
	ipk_link_flush(c);
	return rc < 0 ? rc : (int)plen;
}

static int udp_send_check(struct ipk_ctx *c, uint16_t sport_be, uint32_t dst_be,
                          uint16_t dport_be, uint32_t plen)
{
	if (!c || sport_be == 0 || dport_be == 0 || dst_be == 0)
		return IPK_EINVAL;
	/* RFC 768: the length field bounds a datagram; IPv4 bounds it further. */
	if (plen > 65535u - IPK_IP4_HLEN - IPK_UDP_HLEN ||
	    (c->cfg.udp_df && plen > (uint32_t)c->cfg.mtu - IPK_IP4_HLEN - IPK_UDP_HLEN))
		return IPK_EMSGSIZE;
	if (ipk_ip4_next_hop(c, dst_be) == 0)
		return IPK_EHOSTUNREACH;
	return 0;
}

/* Does a datagram with this payload need fragments? */
static int udp_frags(const struct ipk_ctx *c, uint32_t plen)
{
	return plen > (uint32_t)c->cfg.mtu - IPK_IP4_HLEN - IPK_UDP_HLEN;
}

/*
 * Zero-copy with IPK_CAP_SG (a header packet is chained in front of pkt), else one
 * copy into a fresh packet. A datagram above the MTU is chained the same way in
 * either case; the fragments then clone (SG) or copy its bytes. See core.h for
 * ownership and errors.
 */
int ipk_udp_send(struct ipk_ctx *ctx, uint16_t local_port_be, uint32_t peer_ip4_be,
                 uint16_t peer_port_be, void *pkt, uint64_t now)
{
	uint32_t plen, hl;
	void *hdr;
	int rc, chain, kept = 0;

	if (!ctx || !pkt)
		return IPK_EINVAL;
	plen = ipk_pkt_chain_len(ctx, pkt);
	rc = udp_send_check(ctx, local_port_be, peer_ip4_be, peer_port_be, plen);
	if (rc < 0)
		return rc;
	now = ipk_clock(ctx, now);
	hdr = ipk_ip4_alloc(ctx);
	if (!hdr)
		return IPK_ENOBUFS;
	hl = ipk_l4_off(ctx) + IPK_UDP_HLEN;
	chain = (ctx->cfg.caps & IPK_CAP_SG) || udp_frags(ctx, plen);
	if (chain) {
		ipk_pkt_set_len(ctx, hdr, hl);
		ipk_pkt_chain_append(ctx, hdr, pkt);
	} else {
		ipk_pkt_copy(ctx, pkt, 0, ipk_pkt_data(ctx, hdr) + hl, plen);
		ipk_pkt_set_len(ctx, hdr, hl + plen);
	}
	rc = udp_emit(ctx, hdr, local_port_be, peer_ip4_be, peer_port_be, plen, &kept);
	if (kept) {
		/* Nothing sent: the caller's packet goes back as it came. */
		if (chain)
			ipk_pkt_chain_cut(ctx, hdr);
		ipk_pkt_free(ctx, hdr);
		return rc;
	}
	if (!chain)
		ipk_pkt_free_chain(ctx, pkt);
	return rc;
}

/* A chain holding header room and then buf's len bytes, each packet filled to
 * pkt_buf_size; NULL (nothing left allocated) when the pool is dry. */
static void *udp_copy_chain(struct ipk_ctx *c, const void *buf, uint32_t len)
{
	const uint8_t *b = (const uint8_t *)buf;
	uint32_t room = c->cfg.pkt_buf_size, hl = ipk_l4_off(c) + IPK_UDP_HLEN;
	void *head = ipk_ip4_alloc(c), *tail = head;
	uint32_t n = IPK_MIN(len, room - hl);

	if (!head)
		return NULL;
	if (n > 0)
		ipk_memcpy(ipk_pkt_data(c, head) + hl, b, n);
	ipk_pkt_set_len(c, head, hl + n);
	for (b += n, len -= n; len > 0; b += n, len -= n) {
		void *p = ipk_ip4_alloc(c);

		if (!p) {
			ipk_pkt_free_chain(c, head);
			return NULL;
		}
		n = IPK_MIN(len, room);
		ipk_memcpy(ipk_pkt_data(c, p), b, n);
		ipk_pkt_set_len(c, p, n);
		ipk_pkt_chain_append(c, tail, p);
		tail = p;
	}
	return head;
}

int ipk_udp_sendto(struct ipk_ctx *ctx, uint16_t local_port_be, uint32_t peer_ip4_be,
                   uint16_t peer_port_be, const void *buf, uint32_t len, uint64_t now)
{
	void *pkt;
	int rc, kept = 0;

	if (!ctx || (!buf && len > 0))
		return IPK_EINVAL;
	rc = udp_send_check(ctx, local_port_be, peer_ip4_be, peer_port_be, len);
	if (rc < 0)
		return rc;
	now = ipk_clock(ctx, now);
	pkt = udp_copy_chain(ctx, buf, len);
	if (!pkt)
		return IPK_ENOBUFS;
	rc = udp_emit(ctx, pkt, local_port_be, peer_ip4_be, peer_port_be, len, &kept);
	if (kept)
		ipk_pkt_free_chain(ctx, pkt);
	return rc;
}

/* ---------------------------------------------------------------- IPv6 */

/* A reassembled datagram's checksum over its chain; a zero field is refused. */
static int udp6_chain_csum_ok(struct ipk_ctx *c, void *pkt, const struct ipk_rx6 *rx,
                              const struct ipk_udp_hdr *h)
{
	uint32_t sum;
	int odd = 0;

	if (h->csum == 0)
		return 0;
	sum = ipk_csum_pseudo6(rx->ip.src, rx->ip.dst, IPK_IPPROTO_UDP, h->len);
	sum = ipk_csum_chain(c, pkt, rx->l4_off, h->len, sum, &odd);
	return ipk_csum_fold(sum) == 0;
}

/* Takes ownership of pkt (flat, or a chain from reassembly). RFC 8200 §8.1: the checksum is mandatory over
 * IPv6; a zero field is refused like a wrong one. The bind table is the IPv4 one:
 * a bound port takes both families (docs/ipv6-core.md). */
void ipk_udp_input6(struct ipk_ctx *c, void *pkt, const struct ipk_rx6 *rx)
{
	const uint8_t *p = ipk_pkt_data(c, pkt) + rx->l4_off;
	uint8_t hdr[IPK_UDP_HLEN];
	struct ipk_udp_hdr h;
	struct ipk_atuple t;
	int hw;

	c->cnt.udp_rx++;
	if (rx->chained && ipk_pkt_copy(c, pkt, rx->l4_off, hdr, sizeof(hdr)) == sizeof(hdr))
		p = hdr;
	if (ipk_udp_parse(p, rx->l4_len, &h) < 0) {
		ipk_drop_pkt(c, pkt, IPK_DROP_UDP_MALFORMED);
		return;
	}
	hw = rx->chained ? (udp6_chain_csum_ok(c, pkt, rx, &h) ? 1 : -1) : ipk_ip6_rx_csum(c, pkt);
	if (hw < 0 || (hw == 0 && !ipk_udp6_csum_ok(rx->ip.src, rx->ip.dst, p, h.len))) {
		ipk_drop_pkt(c, pkt, IPK_DROP_UDP_CSUM);
		return;
	}
	if (bind_find(c, h.dport_be) < 0 || !IPK_OPS(c)->udp_recv6) {
		/* RFC 4443 §3.1: port unreachable (code 4), never to a multicast group */
		ipk_icmp6_send_error(c, pkt, rx, IPK_ICMP6_DST_UNREACH, 4, 0, 0);
		ipk_drop_pkt(c, pkt, IPK_DROP_UDP_NO_PORT);
		return;
	}
	ipk_memset(&t, 0, sizeof(t));
	t.local.family = t.peer.family = IPK_AF_INET6;
	ipk_memcpy(t.local.a, rx->ip.dst, 16);
	ipk_memcpy(t.peer.a, rx->ip.src, 16);
	t.local_port_be = h.dport_be;
	t.peer_port_be = h.sport_be;
	IPK_OPS(c)->udp_recv6(c, &t, pkt, rx->l4_off + IPK_UDP_HLEN, (uint32_t)h.len - IPK_UDP_HLEN,
	                      IPK_OPQ(c));
	ipk_pkt_free_chain(c, pkt);
}

/* Above the path MTU: RFC 8200 §4.5 fragments; the checksum covers the whole
 * datagram, summed before it is cut. */
static int udp_sendto6_frags(struct ipk_ctx *c, uint16_t sport_be, const uint8_t src[16],
                             const uint8_t dst[16], uint16_t dport_be, const void *buf,
                             uint32_t len)
{
	struct ipk_ip6_gather g;
	struct ipk_udp_hdr h;
	uint8_t hdr[IPK_UDP_HLEN];
	uint32_t sum;
	int odd = 0, rc;

	h.sport_be = sport_be;
	h.dport_be = dport_be;
	h.len = (uint16_t)(IPK_UDP_HLEN + len);
	h.csum = 0;
	ipk_udp_emit(hdr, IPK_UDP_HLEN, &h);
	sum = ipk_csum_pseudo6(src, dst, IPK_IPPROTO_UDP, h.len);
	sum = ipk_csum_add(sum, hdr, IPK_UDP_HLEN, &odd);
	sum = ipk_csum_add(sum, (const uint8_t *)buf, len, &odd);
	h.csum = ipk_csum_fold(sum);
	ipk_wr16(hdr + 6, h.csum ? h.csum : 0xffffu); /* RFC 8200 §8.1: never 0 */
	ipk_memset(&g, 0, sizeof(g));
	g.hdr = hdr;
	g.hlen = IPK_UDP_HLEN;
	g.body = (const uint8_t *)buf;
	g.blen = len;
	c->cnt.udp_tx++;
	rc = ipk_ip6_output_frags(c, src, dst, IPK_IPPROTO_UDP, &g);
	ipk_link_flush(c);
	return rc < 0 ? rc : (int)len;
}

/* One packet, checksummed in software (no IPv6 UDP offload declared yet). */
static int udp_sendto6(struct ipk_ctx *c, uint16_t sport_be, const uint8_t dst[16],
                       uint16_t dport_be, const void *buf, uint32_t len)
{
	struct ipk_udp_hdr h;
	uint8_t src[16];
	uint32_t ulen = IPK_UDP_HLEN + len;
	uint8_t *p;
	void *pkt;
	int rc;

	if (ulen > 65535u)
		return IPK_EMSGSIZE;
	if (!ipk_ip6_src_select(c, dst, src))
		return IPK_EHOSTUNREACH;
	if (IPK_IP6_HLEN + ulen > ipk_ip6_pmtu(c, dst))
		return udp_sendto6_frags(c, sport_be, src, dst, dport_be, buf, len);
	pkt = ipk_ip6_alloc(c, ulen, 0);
	if (!pkt)
		return IPK_ENOBUFS;
	p = ipk_pkt_data(c, pkt) + ipk_l4_off6(c);
	h.sport_be = sport_be;
	h.dport_be = dport_be;
	h.len = (uint16_t)ulen;
	h.csum = 0;
	ipk_udp_emit(p, IPK_UDP_HLEN, &h);
	if (len > 0)
		ipk_memcpy(p + IPK_UDP_HLEN, buf, len);
	c->cnt.udp_tx++;
	if (c->cfg.caps & IPK_CAP_TX_CSUM_UDP6) {
		struct ipk_tx_meta meta;

		/* the NIC finishes the sum from the pseudo-header's (RFC 8200 §8.1) */
		ipk_memset(&meta, 0, sizeof(meta));
		ipk_wr16(p + 6, (uint16_t)~ipk_csum_fold(ipk_csum_pseudo6(src, dst, IPK_IPPROTO_UDP,
		                                                              ulen)));
		meta.flags = IPK_TXOFF_UDP_CSUM;
		meta.l4_len = IPK_UDP_HLEN;
		rc = ipk_ip6_output_meta(c, pkt, src, dst, IPK_IPPROTO_UDP, ulen, &meta);
	} else {
		ipk_wr16(p + 6, ipk_udp6_csum(src, dst, p, ulen));
		rc = ipk_ip6_output(c, pkt, src, dst, IPK_IPPROTO_UDP, ulen, 0);
	}
	ipk_link_flush(c);
	return rc < 0 ? rc : (int)len;
}

int ipk_udp_sendto_addr(struct ipk_ctx *ctx, uint16_t local_port_be,
                        const struct ipk_addr *peer, uint16_t peer_port_be, const void *buf,
                        uint32_t len, uint64_t now)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	uint32_t ip4;

	if (!ctx || !peer || (!buf && len > 0))
		return IPK_EINVAL;
	if (peer->family == IPK_AF_INET) {
		ipk_memcpy(&ip4, peer->a, 4);
		return ipk_udp_sendto(ctx, local_port_be, ip4, peer_port_be, buf, len, now);
	}
	if (peer->family != IPK_AF_INET6 || !ctx->cfg.ip6_enable || local_port_be == 0 ||
	    peer_port_be == 0 || ipk_ip6_is_unspecified(peer->a) ||
	    ipk_memcmp(peer->a, mapped, 12) == 0)
		return IPK_EINVAL;
	now = ipk_clock(ctx, now);
	return udp_sendto6(ctx, local_port_be, peer->a, peer_port_be, buf, len);
}
