/*
 * ip6.c: IPv6 input and output (RFC 8200), our addresses (RFC 4291, RFC 4862 DAD),
 * ICMPv6 echo and errors (RFC 4443). Neighbor Discovery is nd.c. docs/ipv6-core.md
 * has the design; the wire layer (wire/ip6.c, icmp6.c, nd.c) does every parse.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

static const uint8_t ip6_all_nodes[16] = {0xff, 0x02, 0, 0, 0, 0, 0, 0,
                                          0, 0, 0, 0, 0, 0, 0, 1};

#define IP6_ICMP_BURST 16u         /* ICMPv6 error bucket, as icmp4.c's */
#define IP6_ICMP_RATE_NS 10000000ull /* one error per 10 ms (RFC 4443 §2.4(f)) */
#define IP6_REACHABLE_NS (30ull * 1000000000ull) /* RFC 4861 §10 REACHABLE_TIME */
#define IP6_RETRANS_NS 1000000000ull            /* RETRANS_TIMER */
#define IP6_RS_INTERVAL_NS (4ull * 1000000000ull) /* RTR_SOLICITATION_INTERVAL */

/* ------------------------------------------------------------ addresses */

/* RFC 4291 §2.5.5.2: ::ffff:0:0/96. Never on the wire as an IPv6 address. */
static int ip6_is_v4mapped(const uint8_t a[16])
{
	static const uint8_t pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	return ipk_memcmp(a, pfx, 12) == 0;
}

/* ::1 (RFC 4291 §2.5.3): never from the wire. */
static int ip6_is_loopback(const uint8_t a[16])
{
	static const uint8_t lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

	return ipk_memcmp(a, lo, 16) == 0;
}

int ipk_ip6_addr_find(const struct ipk_ctx *c, const uint8_t a[16])
{
	int i;

	for (i = 0; i < IPK_IP6_ADDRS; i++)
		if (c->ip6.addr[i].state != IPK_A6_FREE && ipk_memcmp(c->ip6.addr[i].a, a, 16) == 0)
			return i;
	return -1;
}

/* An address datagrams may use: DAD passed, valid lifetime not over. */
static int ip6_addr_usable(const struct ipk_ip6_laddr *l)
{
	return l->state == IPK_A6_PREFERRED || l->state == IPK_A6_DEPRECATED;
}

int ipk_ip6_src_select(const struct ipk_ctx *c, const uint8_t dst[16], uint8_t out[16])
{
	int i, want_ll = ipk_ip6_is_linklocal(dst) ||
	                 (ipk_ip6_is_multicast(dst) && (dst[1] & 0x0f) <= 2);

	/* RFC 6724 §5 reduced to its scope rule: link-local for link-scope destinations,
	 * else a preferred global address (rule 3), a deprecated one last. */
	for (i = 0; i < IPK_IP6_ADDRS; i++) {
		const struct ipk_ip6_laddr *l = &c->ip6.addr[i];

		if (l->state == IPK_A6_PREFERRED && ipk_ip6_is_linklocal(l->a) == want_ll) {
			ipk_memcpy(out, l->a, 16);
			return 1;
		}
	}
	for (i = 0; i < IPK_IP6_ADDRS; i++) {
		if (ip6_addr_usable(&c->ip6.addr[i]) &&
		    (want_ll || !ipk_ip6_is_linklocal(c->ip6.addr[i].a))) {
			ipk_memcpy(out, c->ip6.addr[i].a, 16);
			return 1;
		}
	}
	return 0;
}

int ipk_ip6_addrs(const struct ipk_ctx *ctx, uint8_t (*out)[16], int max)
{
	int i, n = 0;

	if (!ctx || !out)
		return 0;
	for (i = 0; i < IPK_IP6_ADDRS && n < max; i++)
		if (ip6_addr_usable(&ctx->ip6.addr[i]))
			ipk_memcpy(out[n++], ctx->ip6.addr[i].a, 16);
	return n;
}

/* Link-local fe80::/64 with the modified EUI-64 of the MAC (RFC 4291 App. A,
 * RFC 4862 §5.3): the universal/local bit inverted, ff:fe in the middle. */
static void ip6_linklocal(const struct ipk_ctx *c, uint8_t a[16])
{
	const uint8_t *m = c->cfg.mac;

	ipk_memset(a, 0, 16);
	a[0] = 0xfe;
	a[1] = 0x80;
	a[8] = (uint8_t)(m[0] ^ 0x02);
	a[9] = m[1];
	a[10] = m[2];
	a[11] = 0xff;
	a[12] = 0xfe;
	a[13] = m[3];
	a[14] = m[4];
	a[15] = m[5];
}

/* Take slot i for address a: tentative until DAD (RFC 4862 §5.4) says otherwise. */
void ipk_ip6_addr_add(struct ipk_ctx *c, int i, const uint8_t a[16], uint8_t plen, int slaac)
{
	struct ipk_ip6_laddr *l = &c->ip6.addr[i];

	ipk_memset(l, 0, sizeof(*l));
	ipk_memcpy(l->a, a, 16);
	l->plen = plen;
	l->slaac = (uint8_t)slaac;
	l->state = IPK_A6_TENTATIVE;
	c->ip6.addr_gen++;
	l->dad_left = c->cfg.ip6_dad_transmits;
	l->t = c->now;
	l->valid_until = l->pref_until = UINT64_MAX;
	ipk_ip6_arm(c, c->now);
}

void ipk_ip6_start(struct ipk_ctx *c)
{
	uint8_t ll[16];

	c->ip6.deadline = IPK_NO_DEADLINE;
	if (!c->cfg.ip6_enable)
		return;
	c->ip6.hlim = c->cfg.ip6_hop_limit;
	c->ip6.mtu = c->cfg.mtu;
	c->ip6.icmp_tokens = IP6_ICMP_BURST;
	c->ip6.reachable_ns = IP6_REACHABLE_NS;
	c->ip6.retrans_ns = IP6_RETRANS_NS;
	c->ip6.rs_left = c->cfg.ip6_rs_count;
	c->ip6.rs_at = IPK_NO_DEADLINE; /* set when the link-local address is up */
	c->ip6.mld_at = IPK_NO_DEADLINE;
	/* RFC 7739 §5: identifications not predictable from outside */
	c->ip6.frag_id = IPK_OPS(c)->random(IPK_OPQ(c));
	ip6_linklocal(c, ll);
	ipk_ip6_addr_add(c, 0, ll, 64, 0);
	if (!ipk_ip6_is_unspecified(c->cfg.ip6_addr)) {
		ipk_ip6_addr_add(c, 1, c->cfg.ip6_addr, c->cfg.ip6_prefix_len, 0);
		ipk_memcpy(c->ip6.pfx[0].p, c->cfg.ip6_addr, 16);
		c->ip6.pfx[0].plen = c->cfg.ip6_prefix_len;
		c->ip6.pfx[0].until = UINT64_MAX;
	}
	if (!ipk_ip6_is_unspecified(c->cfg.ip6_gateway)) {
		ipk_memcpy(c->ip6.rtr[0].ip, c->cfg.ip6_gateway, 16);
		c->ip6.rtr[0].until = UINT64_MAX;
	}
	ipk_ip6_arm(c, 0);
}

/* --------------------------------------------------------------- input */

/* RFC 4291 §2.7, RFC 4861 §7.2.1: the groups we are in: all-nodes and the
 * solicited-node group of every address we hold or are checking (tentative ones
 * too: DAD must hear the other node's NS, RFC 4862 §5.4.2). */
static int ip6_in_group(const struct ipk_ctx *c, const uint8_t g[16])
{
	uint8_t sn[16];
	int i;

	if (ipk_memcmp(g, ip6_all_nodes, 16) == 0)
		return 1;
	if (!ipk_ip6_is_solicited_node(g))
		return 0;
	for (i = 0; i < IPK_IP6_ADDRS; i++) {
		const struct ipk_ip6_laddr *l = &c->ip6.addr[i];

		if (l->state == IPK_A6_FREE || l->state == IPK_A6_DUPLICATE)
			continue;
		ipk_ip6_solicited_node(sn, l->a);
		if (ipk_memcmp(sn, g, 16) == 0)
			return 1;
	}
	return 0;
}

/* -1 when the addresses are acceptable, else the drop reason. The one rule for
 * both receive paths: ipk_ip6_input's and tcp_in.c's shortcut (ipk_tcp_rx_one6). */
int ipk_ip6_addr_check(const struct ipk_ctx *c, const uint8_t src[16], const uint8_t dst[16])
{
	int i;

	/* RFC 4291 §2.7: never from a group; ::1 and IPv4-mapped addresses never
	 * arrive from the wire (RFC 4291 §2.5.3, §2.5.5.2; RFC 4942 §2.2). */
	if (ip6_is_v4mapped(src) || ip6_is_v4mapped(dst))
		return IPK_DROP_IP6_V4MAPPED;
	if (ipk_ip6_is_multicast(src) || ip6_is_loopback(src))
		return IPK_DROP_IP6_BAD_SRC;
	if (ipk_ip6_is_multicast(dst))
		return ip6_in_group(c, dst) ? -1 : IPK_DROP_IP6_NOT_FOR_US;
	i = ipk_ip6_addr_find(c, dst);
	/* RFC 4862 §5.4.3: to a tentative address only NS (which go to the
	 * solicited-node group anyway) are taken: drop the rest. */
	if (i < 0 || !ip6_addr_usable(&c->ip6.addr[i]))
		return IPK_DROP_IP6_NOT_FOR_US;
	i = ipk_ip6_addr_find(c, src);
	if (i >= 0 && ip6_addr_usable(&c->ip6.addr[i]))
		return IPK_DROP_IP6_BAD_SRC; /* our own address: a land packet */
	return -1;
}

static int ip6_addr_check(const struct ipk_ctx *c, const struct ipk_ip6_hdr *h)
{
	return ipk_ip6_addr_check(c, h->src, h->dst);
}

/* The upper layer for rx: ICMPv6, UDP, TCP; anything else draws a Parameter Problem
 * code 1 at the Next Header field that named it (RFC 8200 §4, RFC 4443 §3.4). */
void ipk_ip6_deliver(struct ipk_ctx *c, void *pkt, struct ipk_rx6 *rx, uint8_t proto,
                     uint32_t nh_off)
{
	switch (proto) {
	case IPK_IPPROTO_ICMP6:
		ipk_icmp6_input(c, pkt, rx);
		return;
	case IPK_IPPROTO_UDP:
		ipk_udp_input6(c, pkt, rx);
		return;
	case IPK_IPPROTO_TCP:
		ipk_tcp_input6(c, pkt, rx);
		return;
	case IPK_IPPROTO_NONE: /* RFC 8200 §4.7: nothing follows */
		ipk_pkt_free_chain(c, pkt);
		return;
	default:
		ipk_icmp6_send_error(c, pkt, rx, IPK_ICMP6_PARAM_PROB, 1, nh_off, 0);
		ipk_drop_pkt(c, pkt, IPK_DROP_IP6_PROTO);
	}
}

/*
 * A received chain (IPK_CAP_LRO; ipk_run lets none through without it), as IPv4
 * takes one (ip4.c ip4_chain_ok): one whole TCP segment straight after the IPv6
 * header, that header in the first packet, the chain exactly the datagram's
 * length (a coalescing NIC never pads). Anything else is dropped and counted:
 * a coalescing NIC makes nothing else, and reassembly (frag6.c) keeps fragments
 * flat. The NIC's checksum verdict holds for the coalesced segment (tcp6.c).
 */
static void ip6_input_chain(struct ipk_ctx *c, void *pkt, uint32_t off)
{
	uint32_t first = ipk_pkt_len(c, pkt), total = ipk_pkt_chain_len(c, pkt);
	struct ipk_rx6 rx;
	int why;

	ipk_memset(&rx, 0, sizeof(rx));
	/* The parse reads the fixed header (from the first packet: checked here) and
	 * sees the chain's length, which must be the datagram's exactly. */
	if (first < IPK_IP6_HLEN || off > first - IPK_IP6_HLEN ||
	    ipk_ip6_parse(ipk_pkt_data(c, pkt) + off, total - off, &rx.ip) < 0 ||
	    total - off != IPK_IP6_HLEN + (uint32_t)rx.ip.plen) {
		ipk_drop_pkt(c, pkt, IPK_DROP_IP6_MALFORMED);
		return;
	}
	if (rx.ip.next != IPK_IPPROTO_TCP) {
		ipk_drop_pkt(c, pkt, IPK_DROP_CHAIN);
		return;
	}
	why = ip6_addr_check(c, &rx.ip);
	if (why >= 0) {
		ipk_drop_pkt(c, pkt, (enum ipk_drop)why);
		return;
	}
	c->cnt.ip6_rx++;
	rx.l3_off = off;
	rx.l4_off = off + IPK_IP6_HLEN;
	rx.l4_len = rx.ip.plen;
	rx.dst_mcast = (uint8_t)ipk_ip6_is_multicast(rx.ip.dst);
	rx.chained = 1;
	rx.lro = 1;
	ipk_tcp_input6(c, pkt, &rx);
}

/* Takes ownership of pkt. A chain goes to ip6_input_chain (IPK_CAP_LRO). */
void ipk_ip6_input(struct ipk_ctx *c, void *pkt, uint32_t off)
{
	struct ipk_rx6 rx;
	struct ipk_ip6_ext x;
	const uint8_t *p;
	uint32_t len;
	int why;

	if (ipk_pkt_chain_next(c, pkt)) {
		ip6_input_chain(c, pkt, off);
		return;
	}
	p = ipk_pkt_data(c, pkt) + off;
	len = ipk_pkt_len(c, pkt) - off;
	ipk_memset(&rx, 0, sizeof(rx));
	if (ipk_ip6_parse(p, len, &rx.ip) < 0) {
		ipk_drop_pkt(c, pkt, IPK_DROP_IP6_MALFORMED);
		return;
	}
	why = ip6_addr_check(c, &rx.ip);
	if (why >= 0) {
		ipk_drop_pkt(c, pkt, (enum ipk_drop)why);
		return;
	}
	rx.l3_off = off;
	rx.dst_mcast = (uint8_t)ipk_ip6_is_multicast(rx.ip.dst);
	/* TCP straight after the IPv6 header, a TCP flow's every segment: what the walk
	 * would find (no extension header: the upper layer at 40), without it */
	if (rx.ip.next == IPK_IPPROTO_TCP) {
		c->cnt.ip6_rx++;
		rx.l4_off = off + IPK_IP6_HLEN;
		rx.l4_len = rx.ip.plen;
		ipk_tcp_input6(c, pkt, &rx);
		return;
	}
	if (ipk_ip6_ext_walk(p, IPK_IP6_HLEN + rx.ip.plen, rx.ip.next, rx.dst_mcast, &x) !=
	    IPK_IP6X_OK) {
		if (x.icmp)
			ipk_icmp6_send_error(c, pkt, &rx, IPK_ICMP6_PARAM_PROB, x.icmp_code,
			                     x.icmp_ptr, x.icmp_code == 2);
		ipk_drop_pkt(c, pkt, IPK_DROP_IP6_EXT);
		return;
	}
	c->cnt.ip6_rx++;
	if (x.has_frag) {
		ipk_frag6_input(c, pkt, &rx, &x);
		return;
	}
	rx.l4_off = off + x.off;
	rx.l4_len = IPK_IP6_HLEN + rx.ip.plen - x.off;
	rx.ra = x.ra != 0;
	ipk_ip6_deliver(c, pkt, &rx, x.proto, x.nh_off);
}

/* -------------------------------------------------------------- output */

/* The frame whose IPv6 header is written: to the link for dst (a group's MAC, or
 * the next hop through ND). Ownership passes. */
static IPK_ALWAYS_INLINE int ip6_send(struct ipk_ctx *c, void *pkt, const uint8_t dst[16])
{
	uint8_t nh[16], mac[6];

	c->cnt.ip6_tx++;
	if (ipk_ip6_is_multicast(dst)) { /* RFC 2464 §7: 33:33 + the group's low 32 bits */
		ipk_ip6_mcast_mac(mac, dst);
		ipk_link_eth_tx(c, pkt, mac, IPK_ETHERTYPE_IP6);
		return 0;
	}
	if (ipk_nd_hc_tx(c, pkt, dst))
		return 0;
	if (!ipk_ip6_route(c, dst, nh)) {
		ipk_drop_pkt(c, pkt, IPK_DROP_NO_ROUTE);
		return IPK_EHOSTUNREACH;
	}
	return ipk_nd_output_dst(c, pkt, nh, dst);
}

int ipk_ip6_output(struct ipk_ctx *c, void *pkt, const uint8_t src[16], const uint8_t dst[16],
                   uint8_t proto, uint32_t l4_len, uint8_t hlim)
{
	uint8_t *p = ipk_pkt_data(c, pkt) + c->l2_len;

	/* RFC 8200 §3, written in place (ipk_ip6_emit's bytes with traffic class and
	 * flow label 0) rather than through a zeroed ipk_ip6_hdr copied twice: every
	 * segment txf_send6 sends comes this way */
	ipk_wr32(p, 6u << 28);
	ipk_wr16(p + 4, (uint16_t)l4_len);
	p[6] = proto;
	p[7] = hlim ? hlim : c->ip6.hlim;
	ipk_memcpy(p + 8, src, 16);
	ipk_memcpy(p + 24, dst, 16);
	return ip6_send(c, pkt, dst);
}

int ipk_ip6_output_meta(struct ipk_ctx *c, void *pkt, const uint8_t src[16],
                        const uint8_t dst[16], uint8_t proto, uint32_t l4_len,
                        struct ipk_tx_meta *meta)
{
	struct ipk_ip6_hdr h;

	/* RFC 8200 §3: 16 bits of Payload Length; no jumbograms (RFC 2675) */
	if (l4_len > 0xffffu) {
		ipk_pkt_free_chain(c, pkt);
		return IPK_EMSGSIZE;
	}
	ipk_memset(&h, 0, sizeof(h));
	h.tclass = meta->tos; /* RFC 3168 §5: the ECN field is its low two bits */
	h.plen = (uint16_t)l4_len;
	h.next = proto;
	h.hlim = c->ip6.hlim;
	ipk_memcpy(h.src, src, 16);
	ipk_memcpy(h.dst, dst, 16);
	ipk_ip6_emit(ipk_pkt_data(c, pkt) + c->l2_len, IPK_IP6_HLEN, &h);
	if (meta->flags) {
		meta->flags |= IPK_TXOFF_IP6;
		meta->l2_len = (uint16_t)c->l2_len;
		meta->l3_len = IPK_IP6_HLEN;
		if (IPK_OPS(c)->tx_offload)
			IPK_OPS(c)->tx_offload(pkt, meta, IPK_OPQ(c));
	}
	return ip6_send(c, pkt, dst);
}

/* A packet with room for link + IPv6 headers and l4_len bytes, its length set;
 * NULL when none or when it would not fit one buffer. */
static void *ip6_alloc(struct ipk_ctx *c, uint32_t l4_len, int ctl)
{
	void *p;

	if (ipk_l4_off6(c) + l4_len > c->cfg.pkt_buf_size)
		return NULL;
	p = ctl ? ipk_pkt_alloc_ctl(c) : ipk_pkt_alloc(c);
	if (!p) {
		ipk_drop(c, IPK_DROP_NO_PKT);
		return NULL;
	}
	ipk_pkt_set_len(c, p, ipk_l4_off6(c) + l4_len);
	return p;
}

void *ipk_ip6_alloc(struct ipk_ctx *c, uint32_t l4_len, int ctl) { return ip6_alloc(c, l4_len, ctl); }

/* ------------------------------------------------------------- ICMPv6 */

/* RFC 4443 §2.4(f): a token bucket, IP6_ICMP_BURST at once, then one per 10 ms. */
static int icmp6_rate_ok(struct ipk_ctx *c)
{
	struct ipk_ip6 *s = &c->ip6;
	uint64_t add;

	if (c->now > s->icmp_tokens_t) {
		add = (c->now - s->icmp_tokens_t) / IP6_ICMP_RATE_NS;
		if (add > 0) {
			s->icmp_tokens = (uint32_t)IPK_MIN((uint64_t)IP6_ICMP_BURST, s->icmp_tokens + add);
			s->icmp_tokens_t += add * IP6_ICMP_RATE_NS;
		}
	}
	if (s->icmp_tokens == 0) {
		c->cnt.icmp6_err_limited++;
		return 0;
	}
	s->icmp_tokens--;
	return 1;
}

/* RFC 4443 §2.4(e.1): is the invoking datagram an ICMPv6 error or a redirect? Its
 * extension headers are stepped over whatever made it wrong (the error may be about
 * one of them: a routing header type 0, an unknown option), as the quote parse does
 * (and Linux's is_ineligible); an ICMPv6 header cut off counts as one. */
static int icmp6_about_error(struct ipk_ctx *c, void *pkt, const struct ipk_rx6 *rx)
{
	struct ipk_icmp6_quote q;
	uint32_t len = ipk_pkt_len(c, pkt) - rx->l3_off;
	const uint8_t *p = ipk_pkt_data(c, pkt) + rx->l3_off;

	len = IPK_MIN(len, (uint32_t)IPK_IP6_HLEN + rx->ip.plen);
	if (ipk_icmp6_quote_parse(p, len, &q) < 0 || q.proto != IPK_IPPROTO_ICMP6)
		return 0;
	return q.off >= len || ipk_icmp6_is_error(p[q.off]) || p[q.off] == IPK_ICMP6_ND_REDIRECT;
}

/* RFC 4443 §2.4(e): never about an ICMPv6 error or a redirect, never to a multicast
 * destination (but for PTB and Parameter Problem code 2: mcast_ok), never to a
 * source that does not name one host. */
static int icmp6_error_allowed(struct ipk_ctx *c, void *pkt, const struct ipk_rx6 *rx,
                               int mcast_ok)
{
	if (rx->dst_mcast && !mcast_ok)
		return 0;
	if (ipk_ip6_is_unspecified(rx->ip.src) || ipk_ip6_is_multicast(rx->ip.src))
		return 0;
	return !icmp6_about_error(c, pkt, rx);
}

void ipk_icmp6_send_error(struct ipk_ctx *c, void *pkt, const struct ipk_rx6 *rx,
                          uint8_t type, uint8_t code, uint32_t param, int mcast_ok)
{
	struct ipk_icmp6_hdr h;
	uint8_t src[16];
	uint32_t cap, n, dlen;
	void *out;

	if (!icmp6_error_allowed(c, pkt, rx, mcast_ok) || !ipk_ip6_src_select(c, rx->ip.src, src) ||
	    !icmp6_rate_ok(c))
		return;
	/* RFC 4443 §2.4(c): the reply fits the minimum MTU */
	cap = IPK_MIN((uint32_t)IPK_IP6_MIN_MTU, (uint32_t)c->ip6.mtu) - IPK_IP6_HLEN;
	cap = IPK_MIN(cap, c->cfg.pkt_buf_size - ipk_l4_off6(c));
	out = ip6_alloc(c, cap, 1);
	if (!out)
		return;
	ipk_memset(&h, 0, sizeof(h));
	h.type = type;
	h.code = code;
	h.param = param;
	dlen = ipk_pkt_len(c, pkt) - rx->l3_off;
	dlen = IPK_MIN(dlen, (uint32_t)IPK_IP6_HLEN + rx->ip.plen);
	n = ipk_icmp6_error_emit(ipk_pkt_data(c, out) + ipk_l4_off6(c), cap, &h,
	                         ipk_pkt_data(c, pkt) + rx->l3_off, dlen, src, rx->ip.src);
	ipk_pkt_set_len(c, out, ipk_l4_off6(c) + n);
	c->cnt.icmp6_tx++;
	ipk_ip6_output(c, out, src, rx->ip.src, IPK_IPPROTO_ICMP6, n, 0);
}

/* RFC 4443 §4.2: the reply carries the request's identifier, sequence and data;
 * to a multicast request it comes from a unicast address of ours. */
static void icmp6_echo_reply(struct ipk_ctx *c, const struct ipk_rx6 *rx, const uint8_t *m)
{
	uint8_t src[16];
	uint8_t *q;
	void *out;

	if (rx->dst_mcast ? !ipk_ip6_src_select(c, rx->ip.src, src) : 0)
		return;
	if (!rx->dst_mcast)
		ipk_memcpy(src, rx->ip.dst, 16);
	if (IPK_IP6_HLEN + rx->l4_len > ipk_ip6_pmtu(c, rx->ip.src))
		return; /* a smaller path MTU than the request came by: not answered */
	out = ip6_alloc(c, rx->l4_len, 1);
	if (!out)
		return;
	q = ipk_pkt_data(c, out) + ipk_l4_off6(c);
	ipk_memcpy(q, m, rx->l4_len);
	q[0] = IPK_ICMP6_ECHO_REPLY;
	ipk_icmp6_csum_fill(q, rx->l4_len, src, rx->ip.src);
	c->cnt.icmp6_tx++;
	ipk_ip6_output(c, out, src, rx->ip.src, IPK_IPPROTO_ICMP6, rx->l4_len, 0);
}

/* An error about a datagram of ours: to the TCP connection or UDP socket it came
 * from. */
static void icmp6_error_in(struct ipk_ctx *c, const struct ipk_icmp6_hdr *h, const uint8_t *m,
                           uint32_t len)
{
	struct ipk_icmp6_quote q;
	struct ipk_atuple t;

	if (ipk_icmp6_quote_parse(m + IPK_ICMP6_HLEN, len - IPK_ICMP6_HLEN, &q) < 0 ||
	    ipk_ip6_addr_find(c, q.src) < 0)
		return;
	if (h->type == IPK_ICMP6_PKT_TOO_BIG)
		ipk_ip6_pmtu_update(c, q.dst, h->param);
	if (q.proto == IPK_IPPROTO_TCP) {
		ipk_tcp_icmp6_error(c, h->type, h->code, &q);
		return;
	}
	if (q.proto != IPK_IPPROTO_UDP || !q.has_ports || !IPK_OPS(c)->udp_error6)
		return;
	ipk_memset(&t, 0, sizeof(t));
	t.local.family = t.peer.family = IPK_AF_INET6;
	ipk_memcpy(t.local.a, q.src, 16);
	ipk_memcpy(t.peer.a, q.dst, 16);
	t.local_port_be = q.sport_be;
	t.peer_port_be = q.dport_be;
	IPK_OPS(c)->udp_error6(c, &t, h->type, h->code, IPK_OPQ(c));
}

/* A reassembled echo request's reply (RFC 4443 §4.2): the same data, sent as
 * fragments, its checksum summed over the chain with the new type. */
static void icmp6_echo_reply_chain(struct ipk_ctx *c, void *pkt, const struct ipk_rx6 *rx,
                                   const uint8_t *req)
{
	struct ipk_ip6_gather g;
	uint8_t hdr[IPK_ICMP6_HLEN];
	uint32_t sum;
	int odd = 0;

	if (rx->dst_mcast) /* a fragmented echo to a group: not answered */
		return;
	ipk_memcpy(hdr, req, IPK_ICMP6_HLEN);
	hdr[0] = IPK_ICMP6_ECHO_REPLY;
	hdr[2] = hdr[3] = 0;
	sum = ipk_csum_pseudo6(rx->ip.dst, rx->ip.src, IPK_IPPROTO_ICMP6, rx->l4_len);
	sum = ipk_csum_add(sum, hdr, IPK_ICMP6_HLEN, &odd);
	sum = ipk_csum_chain(c, pkt, rx->l4_off + IPK_ICMP6_HLEN, rx->l4_len - IPK_ICMP6_HLEN, sum,
	                     &odd);
	ipk_wr16(hdr + 2, ipk_csum_fold(sum));
	ipk_memset(&g, 0, sizeof(g));
	g.hdr = hdr;
	g.hlen = IPK_ICMP6_HLEN;
	g.pkt = pkt;
	g.pkt_off = rx->l4_off + IPK_ICMP6_HLEN;
	g.blen = rx->l4_len - IPK_ICMP6_HLEN;
	c->cnt.icmp6_tx++;
	ipk_ip6_output_frags(c, rx->ip.dst, rx->ip.src, IPK_IPPROTO_ICMP6, &g);
}

/* A reassembled ICMPv6 message (a chain): echo only (ND and MLD never come in
 * fragments, RFC 6980). */
static void icmp6_input_chain(struct ipk_ctx *c, void *pkt, const struct ipk_rx6 *rx)
{
	uint8_t m[IPK_ICMP6_HLEN];
	struct ipk_icmp6_hdr h;
	uint32_t sum;
	int odd = 0;

	sum = ipk_csum_pseudo6(rx->ip.src, rx->ip.dst, IPK_IPPROTO_ICMP6, rx->l4_len);
	sum = ipk_csum_chain(c, pkt, rx->l4_off, rx->l4_len, sum, &odd);
	if (ipk_pkt_copy(c, pkt, rx->l4_off, m, sizeof(m)) != sizeof(m) ||
	    ipk_icmp6_parse(m, rx->l4_len, &h) < 0 || ipk_csum_fold(sum) != 0) {
		ipk_drop_pkt(c, pkt, IPK_DROP_ICMP6_MALFORMED);
		return;
	}
	if (h.type == IPK_ICMP6_ECHO_REQUEST) {
		icmp6_echo_reply_chain(c, pkt, rx, m);
	} else if (h.type == IPK_ICMP6_ECHO_REPLY && IPK_OPS(c)->icmp6_echo_reply) {
		IPK_OPS(c)->icmp6_echo_reply(c, rx->ip.src, ipk_htons(h.id), ipk_htons(h.seq),
		                             rx->l4_len - IPK_ICMP6_HLEN, IPK_OPQ(c));
	} else if (h.type != IPK_ICMP6_ECHO_REPLY) {
		ipk_drop_pkt(c, pkt, IPK_DROP_ICMP6_TYPE);
		return;
	}
	ipk_pkt_free_chain(c, pkt);
}

/* Takes ownership of pkt (flat, or a chain from reassembly). */
void ipk_icmp6_input(struct ipk_ctx *c, void *pkt, const struct ipk_rx6 *rx)
{
	const uint8_t *m = ipk_pkt_data(c, pkt) + rx->l4_off;
	struct ipk_icmp6_hdr h;
	int hw;

	if (rx->chained) {
		c->cnt.icmp6_rx++;
		icmp6_input_chain(c, pkt, rx);
		return;
	}
	hw = ipk_ip6_rx_csum(c, pkt);

	c->cnt.icmp6_rx++;
	if (ipk_icmp6_parse(m, rx->l4_len, &h) < 0 || hw < 0 ||
	    (hw == 0 && ipk_csum_l4_6(rx->ip.src, rx->ip.dst, IPK_IPPROTO_ICMP6, m, rx->l4_len) != 0)) {
		ipk_drop_pkt(c, pkt, IPK_DROP_ICMP6_MALFORMED);
		return;
	}
	if (h.type >= IPK_ICMP6_ND_RS && h.type <= IPK_ICMP6_ND_REDIRECT) {
		ipk_nd_input(c, pkt, rx, m);
		return;
	}
	if (h.type == IPK_ICMP6_ECHO_REQUEST) {
		icmp6_echo_reply(c, rx, m);
	} else if (h.type == IPK_ICMP6_ECHO_REPLY) {
		if (IPK_OPS(c)->icmp6_echo_reply)
			IPK_OPS(c)->icmp6_echo_reply(c, rx->ip.src, ipk_htons(h.id), ipk_htons(h.seq),
			                             rx->l4_len - IPK_ICMP6_HLEN, IPK_OPQ(c));
	} else if (ipk_icmp6_is_error(h.type)) {
		icmp6_error_in(c, &h, m, rx->l4_len);
	} else if (h.type == IPK_ICMP6_MLD_QUERY || h.type == IPK_ICMP6_MLD2_REPORT) {
		int why = ipk_mld_input(c, rx, m);

		if (why >= 0) {
			ipk_drop_pkt(c, pkt, (enum ipk_drop)why);
			return;
		}
	} else {
		ipk_drop_pkt(c, pkt, IPK_DROP_ICMP6_TYPE);
		return;
	}
	ipk_pkt_free(c, pkt);
}

/* The echo pattern (byte i is (uint8_t)i) added to sum: it repeats every 256
 * bytes, an even count, so one block summed over and over. */
static uint32_t icmp6_pattern_sum(uint32_t sum, uint32_t len, int *odd)
{
	uint8_t blk[256];
	uint32_t i;

	for (i = 0; i < 256u; i++)
		blk[i] = (uint8_t)i;
	for (; len >= 256u; len -= 256u)
		sum = ipk_csum_add(sum, blk, 256u, odd);
	return ipk_csum_add(sum, blk, len, odd);
}

/* An echo request above the path MTU: fragments (RFC 8200 §4.5). */
static int icmp6_echo_frags(struct ipk_ctx *c, const uint8_t src[16], const uint8_t dst[16],
                            uint16_t id_be, uint16_t seq_be, uint32_t len)
{
	struct ipk_ip6_gather g;
	struct ipk_icmp6_hdr h;
	uint8_t hdr[IPK_ICMP6_HLEN];
	uint32_t sum;
	int odd = 0, rc;

	ipk_memset(&h, 0, sizeof(h));
	h.type = IPK_ICMP6_ECHO_REQUEST;
	h.id = ipk_ntohs(id_be);
	h.seq = ipk_ntohs(seq_be);
	ipk_icmp6_emit(hdr, IPK_ICMP6_HLEN, &h);
	sum = ipk_csum_pseudo6(src, dst, IPK_IPPROTO_ICMP6, IPK_ICMP6_HLEN + len);
	sum = ipk_csum_add(sum, hdr, IPK_ICMP6_HLEN, &odd);
	sum = icmp6_pattern_sum(sum, len, &odd);
	ipk_wr16(hdr + 2, ipk_csum_fold(sum));
	ipk_memset(&g, 0, sizeof(g));
	g.hdr = hdr;
	g.hlen = IPK_ICMP6_HLEN;
	g.blen = len;
	c->cnt.icmp6_tx++;
	rc = ipk_ip6_output_frags(c, src, dst, IPK_IPPROTO_ICMP6, &g);
	ipk_link_flush(c);
	return rc;
}

int ipk_icmp6_echo(struct ipk_ctx *ctx, const uint8_t dst[16], uint16_t id_be, uint16_t seq_be,
                   uint32_t len, uint64_t now)
{
	struct ipk_icmp6_hdr h;
	uint8_t src[16];
	uint8_t *q;
	void *out;
	uint32_t i;

	if (!ctx || !dst || !ctx->cfg.ip6_enable || ipk_ip6_is_unspecified(dst) ||
	    ip6_is_v4mapped(dst))
		return IPK_EINVAL;
	now = ipk_clock(ctx, now);
	if (IPK_ICMP6_HLEN + len > 65535u - IPK_IP6_FRAG_HLEN)
		return IPK_EMSGSIZE;
	if (!ipk_ip6_src_select(ctx, dst, src))
		return IPK_EHOSTUNREACH;
	if (IPK_IP6_HLEN + IPK_ICMP6_HLEN + len > ipk_ip6_pmtu(ctx, dst) ||
	    ipk_l4_off6(ctx) + IPK_ICMP6_HLEN + len > ctx->cfg.pkt_buf_size)
		return icmp6_echo_frags(ctx, src, dst, id_be, seq_be, len);
	out = ip6_alloc(ctx, IPK_ICMP6_HLEN + len, 0);
	if (!out)
		return IPK_ENOBUFS;
	ipk_memset(&h, 0, sizeof(h));
	h.type = IPK_ICMP6_ECHO_REQUEST;
	h.id = ipk_ntohs(id_be);
	h.seq = ipk_ntohs(seq_be);
	q = ipk_pkt_data(ctx, out) + ipk_l4_off6(ctx);
	ipk_icmp6_emit(q, IPK_ICMP6_HLEN, &h);
	for (i = 0; i < len; i++)
		q[IPK_ICMP6_HLEN + i] = (uint8_t)i;
	ipk_icmp6_csum_fill(q, IPK_ICMP6_HLEN + len, src, dst);
	ctx->cnt.icmp6_tx++;
	i = (uint32_t)ipk_ip6_output(ctx, out, src, dst, IPK_IPPROTO_ICMP6, IPK_ICMP6_HLEN + len, 0);
	ipk_link_flush(ctx);
	return (int)i;
}

/* --------------------------------------------------------------- timers */

/* RFC 4862 §5.4: DAD for a tentative address: join its solicited-node group (MLD,
 * §5.4.2), send DupAddrDetectTransmits NS from ::, one RetransTimer apart; no
 * answer by the last one's timeout -> the address is ours. */
static void ip6_dad_step(struct ipk_ctx *c, struct ipk_ip6_laddr *l, uint64_t now)
{
	if (l->dad_left == c->cfg.ip6_dad_transmits)
		ipk_nd_send_mld(c, l->a);
	if (l->dad_left > 0) {
		ipk_nd_send_ns(c, l->a, NULL, NULL);
		l->dad_left--;
		l->t = now + c->ip6.retrans_ns;
		return;
	}
	l->state = IPK_A6_PREFERRED;
	c->ip6.addr_gen++;
	l->t = IPK_NO_DEADLINE;
	c->cnt.ip6_addrs_up++;
	/* RFC 4861 §6.3.7: solicit routers once the link-local address is usable */
	if (ipk_ip6_is_linklocal(l->a) && c->ip6.rs_left > 0)
		c->ip6.rs_at = now;
}

/* RFC 4862 §5.5.4: preferred lifetime over -> deprecated; valid over -> gone. */
static uint64_t ip6_addr_timer(struct ipk_ctx *c, struct ipk_ip6_laddr *l, uint64_t now)
{
	if (l->state == IPK_A6_TENTATIVE) {
		if (l->t <= now)
			ip6_dad_step(c, l, now);
		return l->t;
	}
	if (!ip6_addr_usable(l))
		return IPK_NO_DEADLINE;
	if (l->valid_until <= now) {
		l->state = IPK_A6_FREE;
		c->ip6.addr_gen++;
		return IPK_NO_DEADLINE;
	}
	if (l->pref_until <= now && l->state != IPK_A6_DEPRECATED) {
		l->state = IPK_A6_DEPRECATED;
		c->ip6.addr_gen++;
	}
	return l->state == IPK_A6_PREFERRED ? IPK_MIN(l->pref_until, l->valid_until)
	                                    : l->valid_until;
}

uint64_t ipk_ip6_timer(struct ipk_ctx *c, uint64_t now)
{
	uint64_t next = IPK_NO_DEADLINE;
	int i;

	for (i = 0; i < IPK_IP6_ADDRS; i++)
		next = IPK_MIN(next, ip6_addr_timer(c, &c->ip6.addr[i], now));
	if (c->ip6.rs_at <= now) {
		ipk_nd_send_rs(c);
		c->ip6.rs_left--;
		c->ip6.rs_at = c->ip6.rs_left > 0 ? now + IP6_RS_INTERVAL_NS : IPK_NO_DEADLINE;
	}
	next = IPK_MIN(next, c->ip6.rs_at);
	next = IPK_MIN(next, ipk_nd_timer(c, now));
	next = IPK_MIN(next, ipk_frag6_timer(c, now));
	next = IPK_MIN(next, ipk_mld_timer(c, now));
	ipk_link_flush(c);
	return next;
}

/* --------------------------------------------------------- path MTU */

uint32_t ipk_ip6_pmtu(const struct ipk_ctx *c, const uint8_t dst[16])
{
	int i;

	for (i = 0; i < IPK_PMTU6_ENTRIES; i++)
		if (c->ip6.pmtu[i].until > c->now && ipk_memcmp(c->ip6.pmtu[i].dst, dst, 16) == 0)
			return IPK_MIN((uint32_t)c->ip6.pmtu[i].mtu, (uint32_t)c->ip6.mtu);
	return c->ip6.mtu;
}

/* RFC 8201 §4: a PTB lowers the path MTU, never below 1280 (RFC 8200 §5): a
 * smaller value is a forgery or a broken router and is ignored (RFC 8021 ends the
 * atomic fragments it once asked for). The table is bounded: a new destination
 * takes a free or expired slot, else the one that expires first. */
void ipk_ip6_pmtu_update(struct ipk_ctx *c, const uint8_t dst[16], uint32_t mtu)
{
	struct ipk_pmtu6 *e = NULL;
	int i;

	if (mtu < IPK_IP6_MIN_MTU || mtu >= ipk_ip6_pmtu(c, dst)) {
		c->cnt.ip6_ptb_ignored++;
		return;
	}
	for (i = 0; i < IPK_PMTU6_ENTRIES; i++) {
		struct ipk_pmtu6 *x = &c->ip6.pmtu[i];

		if (x->until > c->now && ipk_memcmp(x->dst, dst, 16) == 0) {
			e = x;
			break;
		}
		if (!e || x->until < e->until)
			e = x;
	}
	ipk_memcpy(e->dst, dst, 16);
	e->mtu = (uint16_t)mtu;
	e->until = c->now + IPK_PMTU6_AGE_NS;
	c->cnt.ip6_pmtu_lowered++;
}

/* ---------------------------------------------------------- fragmentation */

/* Bytes [off, off + n) of the gathered datagram into out. */
static void ip6_gather_copy(struct ipk_ctx *c, const struct ipk_ip6_gather *g, uint32_t off,
                            uint8_t *out, uint32_t n)
{
	uint32_t k;

	if (off < g->hlen) {
		k = IPK_MIN(n, g->hlen - off);
		ipk_memcpy(out, g->hdr + off, k);
		out += k;
		n -= k;
		off += k;
	}
	if (n == 0)
		return;
	off -= g->hlen;
	if (g->body)
		ipk_memcpy(out, g->body + off, n);
	else if (g->pkt)
		ipk_pkt_copy(c, g->pkt, g->pkt_off + off, out, n);
	else
		for (k = 0; k < n; k++)
			out[k] = (uint8_t)(off + k);
}

int ipk_ip6_output_frags(struct ipk_ctx *c, const uint8_t src[16], const uint8_t dst[16],
                         uint8_t proto, const struct ipk_ip6_gather *g)
{
	uint32_t total = g->hlen + g->blen, off, n, room;
	uint32_t id = c->ip6.frag_id++;
	int rc = 0;

	/* §4.5: every fragment but the last a multiple of 8 bytes of data */
	room = (ipk_ip6_pmtu(c, dst) - IPK_IP6_HLEN - IPK_IP6_FRAG_HLEN) & ~7u;
	room = IPK_MIN(room, (c->cfg.pkt_buf_size - ipk_l4_off6(c) - IPK_IP6_FRAG_HLEN) & ~7u);
	if (total > 65535u - IPK_IP6_FRAG_HLEN)
		return IPK_EMSGSIZE;
	c->cnt.ip6_fragmented++;
	for (off = 0; off < total && rc == 0; off += n) {
		uint8_t *p;
		void *out;

		n = IPK_MIN(room, total - off);
		out = ip6_alloc(c, IPK_IP6_FRAG_HLEN + n, 0);
		if (!out)
			return IPK_ENOBUFS;
		p = ipk_pkt_data(c, out) + ipk_l4_off6(c);
		ipk_ip6_frag_emit(p, IPK_IP6_FRAG_HLEN, proto, off, off + n < total, id);
		ip6_gather_copy(c, g, off, p + IPK_IP6_FRAG_HLEN, n);
		c->cnt.ip6_frags_tx++;
		rc = ipk_ip6_output(c, out, src, dst, IPK_IPPROTO_FRAGMENT, IPK_IP6_FRAG_HLEN + n, 0);
	}
	return rc;
}
