/* IPv6 in the core (issue 19): DAD, ND resolution, echo, UDP, SLAAC, and hostile
 * input (ext chains, RH0, ND hop limit, cache floods, forged addresses) over the
 * back-to-back harness. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "check.h"
#include "harness.h"

#define SEC 1000000000ull

static const uint8_t G1[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
static const uint8_t G2[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
static const uint8_t ALLN[16] = {0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
static const uint8_t msg[] = "ipv6 payload, checked";

/* events from the IPv6 ops, per node index */
static int echo6_n[H_MAX_NODES], udp6_n[H_MAX_NODES], udp6_echo[H_MAX_NODES];
static uint8_t udp6_data[H_MAX_NODES][4096];
static uint32_t udp6_len[H_MAX_NODES];
static struct ipk_atuple udp6_t[H_MAX_NODES];
static int err6_n[H_MAX_NODES];
static uint8_t err6_type[H_MAX_NODES];

static void op_echo6(struct ipk_ctx *ctx, const uint8_t from[16], uint16_t id, uint16_t seq,
                     uint32_t len, void *opaque)
{
	(void)ctx; (void)from; (void)id; (void)seq; (void)len;
	echo6_n[((struct hnode *)opaque)->idx]++;
}

static void op_udp6(struct ipk_ctx *ctx, const struct ipk_atuple *t, void *pkt, uint32_t off,
                    uint32_t len, void *opaque)
{
	struct hnode *h = (struct hnode *)opaque;
	int i = h->idx;

	udp6_n[i]++;
	udp6_t[i] = *t;
	udp6_len[i] = ipk_pkt_copy(ctx, pkt, off, udp6_data[i], len < 4096 ? len : 4096);
	if (udp6_echo[i])
		ipk_udp_sendto_addr(ctx, t->local_port_be, &t->peer, t->peer_port_be, udp6_data[i],
		                    udp6_len[i], h->net->now);
}

static void op_err6(struct ipk_ctx *ctx, const struct ipk_atuple *t, uint8_t type, uint8_t code,
                    void *opaque)
{
	(void)ctx; (void)t; (void)code;
	err6_n[((struct hnode *)opaque)->idx]++;
	err6_type[((struct hnode *)opaque)->idx] = type;
}

static void tweak6(int idx, struct ipk_config *cfg)
{
	cfg->ip6_enable = 1;
	memcpy(cfg->ip6_addr, idx == 0 ? G1 : G2, 16);
	if (idx == 2)
		cfg->ip6_addr[15] = 3;
}

static void tweak6_same(int idx, struct ipk_config *cfg)
{
	(void)idx;
	cfg->ip6_enable = 1;
	memcpy(cfg->ip6_addr, G1, 16);
}

static void tweak6_bare(int idx, struct ipk_config *cfg)
{
	(void)idx;
	cfg->ip6_enable = 1;
	cfg->ip6_rs_count = 0;
}

/* A net of n IPv6 nodes whose addresses passed DAD (2 s). */
static struct hnet *net6(int n, void (*tweak)(int, struct ipk_config *))
{
	struct hnet *net = hnet_new(n, tweak);
	int i;

	memset(echo6_n, 0, sizeof(echo6_n));
	memset(udp6_n, 0, sizeof(udp6_n));
	memset(udp6_echo, 0, sizeof(udp6_echo));
	memset(err6_n, 0, sizeof(err6_n));
	for (i = 0; i < n; i++) {
		net->nodes[i]->ops.icmp6_echo_reply = op_echo6;
		net->nodes[i]->ops.udp_recv6 = op_udp6;
		net->nodes[i]->ops.udp_error6 = op_err6;
	}
	hnet_advance(net, 0);
	hnet_advance(net, 2 * SEC);
	return net;
}

static void ll_of(int idx, uint8_t a[16])
{
	uint8_t m[6];

	hb_mac(m, idx);
	memset(a, 0, 16);
	a[0] = 0xfe; a[1] = 0x80;
	a[8] = m[0] ^ 2; a[9] = m[1]; a[10] = m[2]; a[11] = 0xff; a[12] = 0xfe;
	a[13] = m[3]; a[14] = m[4]; a[15] = m[5];
}

/* Ethernet + IPv6 header + l4 (plen bytes, already at b + 54). Returns frame length. */
static uint32_t hb6(uint8_t *b, int to, const uint8_t src[16], const uint8_t dst[16],
                    uint8_t next, uint8_t hlim, uint32_t plen)
{
	struct ipk_ip6_hdr h;
	uint8_t dm[6], sm[6] = {0x02, 0x66, 0, 0, 0, 0x99};

	if (ipk_ip6_is_multicast(dst))
		ipk_ip6_mcast_mac(dm, dst);
	else
		hb_mac(dm, to);
	hb_eth(b, dm, sm, IPK_ETHERTYPE_IP6);
	memset(&h, 0, sizeof(h));
	h.plen = (uint16_t)plen;
	h.next = next;
	h.hlim = hlim;
	memcpy(h.src, src, 16);
	memcpy(h.dst, dst, 16);
	ipk_ip6_emit(b + 14, 40, &h);
	return 54 + plen;
}

/* An NS for target from src (with SLLA smac unless src is ::) at b + 54. */
static uint32_t hb_ns(uint8_t *b, const uint8_t src[16], const uint8_t dst[16],
                      const uint8_t target[16], const uint8_t smac[6], uint8_t hlim)
{
	struct ipk_nd_msg m;
	uint32_t n;

	memset(&m, 0, sizeof(m));
	m.type = IPK_ICMP6_ND_NS;
	memcpy(m.target, target, 16);
	n = ipk_nd_emit(b + 54, 64, &m);
	if (!ipk_ip6_is_unspecified(src))
		n += ipk_nd_opt_lla_emit(b + 54 + n, 8, IPK_NDOPT_SLLA, smac);
	ipk_icmp6_csum_fill(b + 54, n, src, dst);
	return hb6(b, 0, src, dst, IPK_IPPROTO_ICMP6, hlim, n);
}

static int count_icmp6(struct hnet *net, int from, uint8_t type)
{
	int i, n = 0;

	for (i = 0; i < net->ncap; i++) {
		const uint8_t *f = net->cap[i].b;

		if (net->cap[i].from == from && ipk_rd16(f + 12) == IPK_ETHERTYPE_IP6 &&
		    f[20] == IPK_IPPROTO_ICMP6 && f[54] == type)
			n++;
	}
	return n;
}

static void test_dad_then_link_local_and_static_up(void)
{
	struct hnet *net = hnet_new(1, tweak6);
	struct hnode *a = net->nodes[0];
	uint8_t addrs[4][16], ll[16];

	hnet_advance(net, 0);
	/* tentative: nothing usable yet, but DAD NS from :: and MLD reports went out */
	CHECK_EQ(ipk_ip6_addrs(a->ctx, addrs, 4), 0);
	CHECK_EQ(count_icmp6(net, 0, IPK_ICMP6_ND_NS), 2);
	CHECK(ipk_ip6_is_unspecified(net->cap[1].b + 22) || ipk_ip6_is_unspecified(net->cap[0].b + 22));
	CHECK_EQ(ipk_counters(a->ctx)->mld_tx, 2);
	hnet_advance(net, 2 * SEC);
	CHECK_EQ(ipk_ip6_addrs(a->ctx, addrs, 4), 2);
	ll_of(0, ll);
	CHECK(memcmp(addrs[0], ll, 16) == 0);
	CHECK(memcmp(addrs[1], G1, 16) == 0);
	CHECK_EQ(ipk_counters(a->ctx)->ip6_addrs_up, 2);
	/* RS once the link-local address is up (RFC 4861 §6.3.7) */
	CHECK_EQ(count_icmp6(net, 0, IPK_ICMP6_ND_RS), 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_ping6_resolves_neighbor_and_replies(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	uint8_t ll_b[16];

	ll_of(1, ll_b);
	CHECK_EQ(ipk_icmp6_echo(a->ctx, ll_b, ipk_htons(1), ipk_htons(1), 56, net->now), 0);
	hnet_settle(net);
	CHECK_EQ(echo6_n[0], 1);
	CHECK(ipk_counters(a->ctx)->nd_tx >= 1);
	CHECK(ipk_counters(b->ctx)->nd_rx >= 1);
	/* the global address too, now the cache has b */
	CHECK_EQ(ipk_icmp6_echo(a->ctx, G2, ipk_htons(1), ipk_htons(2), 1000, net->now), 0);
	hnet_settle(net);
	CHECK_EQ(echo6_n[0], 2);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_udp6_echo_data_checked(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	struct ipk_addr peer;

	CHECK_EQ(ipk_udp_bind(a->ctx, ipk_htons(5000)), 0);
	CHECK_EQ(ipk_udp_bind(b->ctx, ipk_htons(7)), 0);
	udp6_echo[1] = 1;
	memset(&peer, 0, sizeof(peer));
	peer.family = IPK_AF_INET6;
	memcpy(peer.a, G2, 16);
	CHECK_EQ(ipk_udp_sendto_addr(a->ctx, ipk_htons(5000), &peer, ipk_htons(7), msg, sizeof(msg),
	                             net->now), (int)sizeof(msg));
	hnet_settle(net);
	CHECK_EQ(udp6_n[1], 1);
	CHECK(memcmp(udp6_t[1].peer.a, G1, 16) == 0);
	CHECK_EQ(udp6_n[0], 1);
	CHECK_EQ(udp6_len[0], sizeof(msg));
	CHECK(memcmp(udp6_data[0], msg, sizeof(msg)) == 0);
	CHECK_EQ(udp6_t[0].peer_port_be, ipk_htons(7));
	/* IPv4 on the same bound port still works (shared bind table) */
	CHECK_EQ(ipk_udp_sendto(a->ctx, ipk_htons(5000), IPK_IP4(10, 0, 0, 2), ipk_htons(7), msg, 4,
	                        net->now), 4);
	hnet_settle(net);
	CHECK_EQ(b->udp_n, 1);
	/* IPv4-mapped peers are refused: never routed as IPv6 */
	memset(peer.a, 0, 16);
	peer.a[10] = peer.a[11] = 0xff;
	CHECK_EQ(ipk_udp_sendto_addr(a->ctx, ipk_htons(5000), &peer, ipk_htons(7), msg, 4, net->now),
	         IPK_EINVAL);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_udp6_port_unreachable_rate_limited_and_delivered(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	struct ipk_addr peer;
	int i;

	CHECK_EQ(ipk_udp_bind(a->ctx, ipk_htons(5000)), 0);
	memset(&peer, 0, sizeof(peer));
	peer.family = IPK_AF_INET6;
	memcpy(peer.a, G2, 16);
	ipk_udp_sendto_addr(a->ctx, ipk_htons(5000), &peer, ipk_htons(9), msg, 4, net->now);
	hnet_settle(net);
	CHECK_EQ(err6_n[0], 1);
	CHECK_EQ(err6_type[0], IPK_ICMP6_DST_UNREACH);
	for (i = 0; i < 40; i++)
		ipk_udp_sendto_addr(a->ctx, ipk_htons(5000), &peer, ipk_htons(9), msg, 4, net->now);
	hnet_settle(net);
	/* RFC 4443 §2.4(f): a burst of 16, then nothing in the same instant */
	CHECK_EQ(err6_n[0], 16);
	CHECK_EQ(ipk_counters(b->ctx)->icmp6_err_limited, 25);
	CHECK_EQ(ipk_counters(b->ctx)->drop[IPK_DROP_UDP_NO_PORT], 41);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_udp6_zero_checksum_dropped(void)
{
	struct hnet *net = net6(1, tweak6);
	struct hnode *a = net->nodes[0];
	uint8_t b[200];
	uint32_t n;

	ipk_udp_bind(a->ctx, ipk_htons(5000));
	memset(b, 0, sizeof(b));
	ipk_wr16(b + 54, 9);
	ipk_wr16(b + 56, 5000);
	ipk_wr16(b + 58, 12);
	memcpy(b + 62, "abcd", 4);
	n = hb6(b, 0, G2, G1, IPK_IPPROTO_UDP, 64, 12);
	hnode_inject(a, b, n);
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_UDP_CSUM], 1);
	CHECK_EQ(udp6_n[0], 0);
	/* the same with its checksum is delivered */
	ipk_wr16(b + 60, ipk_udp6_csum(G2, G1, b + 54, 12));
	hnode_inject(a, b, n);
	CHECK_EQ(udp6_n[0], 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_dad_conflict_address_not_used(void)
{
	struct hnet *net = net6(2, tweak6_same);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	uint8_t addrs[4][16];

	/* both checked G1 at once: each saw the other's DAD NS (RFC 4862 §5.4.3) */
	CHECK_EQ(ipk_counters(a->ctx)->ip6_dad_conflicts, 1);
	CHECK_EQ(ipk_counters(b->ctx)->ip6_dad_conflicts, 1);
	CHECK_EQ(ipk_ip6_addrs(a->ctx, addrs, 4), 1); /* the link-local only */
	CHECK(ipk_ip6_is_linklocal(addrs[0]));
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_dad_conflict_from_na(void)
{
	struct hnet *net = hnet_new(1, tweak6);
	struct hnode *a = net->nodes[0];
	struct ipk_nd_msg m;
	uint8_t b[200], addrs[4][16], mac[6] = {2, 0x66, 0, 0, 0, 0x99};
	uint32_t n;

	hnet_advance(net, 0); /* DAD running */
	memset(&m, 0, sizeof(m));
	m.type = IPK_ICMP6_ND_NA;
	m.flags = IPK_ND_NA_OVERRIDE;
	memcpy(m.target, G1, 16);
	n = ipk_nd_emit(b + 54, 64, &m);
	n += ipk_nd_opt_lla_emit(b + 54 + n, 8, IPK_NDOPT_TLLA, mac);
	ipk_icmp6_csum_fill(b + 54, n, G1, ALLN);
	hnode_inject(a, b, hb6(b, 0, G1, ALLN, IPK_IPPROTO_ICMP6, 255, n));
	hnet_advance(net, 2 * SEC);
	CHECK_EQ(ipk_counters(a->ctx)->ip6_dad_conflicts, 1);
	CHECK_EQ(ipk_ip6_addrs(a->ctx, addrs, 4), 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_nd_hop_limit_below_255_dropped(void)
{
	struct hnet *net = net6(1, tweak6);
	struct hnode *a = net->nodes[0];
	uint8_t b[200], sn[16], mac[6] = {2, 0x66, 0, 0, 0, 0x99};
	uint32_t n;

	ipk_ip6_solicited_node(sn, G1);
	hnet_clear_cap(net);
	n = hb_ns(b, G2, sn, G1, mac, 254);
	hnode_inject(a, b, n);
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_ND_INVALID], 1);
	CHECK_EQ(count_icmp6(net, 0, IPK_ICMP6_ND_NA), 0);
	/* the same NS with 255 is answered */
	n = hb_ns(b, G2, sn, G1, mac, 255);
	hnode_inject(a, b, n);
	CHECK_EQ(count_icmp6(net, 0, IPK_ICMP6_ND_NA), 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_nd_cache_flood_stays_bounded(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0];
	uint8_t b[200], sn[16], src[16], mac[6] = {2, 0x66, 0, 0, 0, 0x99}, ll_b[16];
	int i, used = 0;

	ipk_ip6_solicited_node(sn, G1);
	for (i = 0; i < 200; i++) {
		memcpy(src, G2, 16);
		src[13] = (uint8_t)(i >> 8);
		src[14] = (uint8_t)i;
		src[15] = 0x77;
		hnode_inject(a, b, hb_ns(b, src, sn, G1, mac, 255));
	}
	for (i = 0; i < IPK_ND_ENTRIES; i++)
		used += a->ctx->ip6.nd[i].state != IPK_ND_FREE;
	CHECK(used <= IPK_ND_ENTRIES);
	CHECK(ipk_counters(a->ctx)->nd_evicted >= 200 - IPK_ND_ENTRIES);
	/* the node recovers: a ping to the real neighbor still works */
	hnet_settle(net);
	ll_of(1, ll_b);
	CHECK_EQ(ipk_icmp6_echo(a->ctx, ll_b, ipk_htons(3), ipk_htons(1), 8, net->now), 0);
	hnet_settle(net);
	CHECK_EQ(echo6_n[0], 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* dst-options headers of 8 bytes each (PadN), n of them, then no next header. */
static uint32_t chain_of(uint8_t *l4, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		uint8_t *h = l4 + 8 * i;

		h[0] = i + 1 < n ? IPK_IPPROTO_DSTOPTS : IPK_IPPROTO_NONE;
		h[1] = 0;
		h[2] = IPK_IP6OPT_PADN;
		h[3] = 4;
		memset(h + 4, 0, 4);
	}
	return 8u * (uint32_t)n;
}

static void test_ext_chain_that_never_ends_dropped(void)
{
	struct hnet *net = net6(1, tweak6);
	struct hnode *a = net->nodes[0];
	static uint8_t b[H_FRAME_MAX];
	uint32_t n;

	n = chain_of(b + 54, 40);
	hnode_inject(a, b, hb6(b, 0, G2, G1, IPK_IPPROTO_DSTOPTS, 64, n));
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_IP6_EXT], 1);
	n = chain_of(b + 54, 3); /* a short chain is fine */
	hnode_inject(a, b, hb6(b, 0, G2, G1, IPK_IPPROTO_DSTOPTS, 64, n));
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_IP6_EXT], 1);
	CHECK_EQ(ipk_counters(a->ctx)->ip6_rx, 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_rh0_dropped_with_param_problem(void)
{
	struct hnet *net = net6(2, tweak6); /* node 1 holds G2: the error resolves to it */
	struct hnode *a = net->nodes[0];
	uint8_t b[300];
	uint8_t *r = b + 54;

	memset(b, 0, sizeof(b));
	r[0] = IPK_IPPROTO_NONE;
	r[1] = 2;  /* 24 bytes: one address */
	r[2] = 0;  /* type 0 */
	r[3] = 1;  /* segments left */
	memcpy(r + 8, G2, 16);
	hnet_clear_cap(net);
	hnode_inject(a, b, hb6(b, 0, G2, G1, IPK_IPPROTO_ROUTING, 64, 24));
	hnet_settle(net);
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_IP6_EXT], 1);
	CHECK_EQ(count_icmp6(net, 0, IPK_ICMP6_PARAM_PROB), 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_unknown_next_header_param_problem_code_1(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0];
	uint8_t b[200];
	int i, found = 0;

	memset(b, 0, sizeof(b));
	hnet_clear_cap(net);
	hnode_inject(a, b, hb6(b, 0, G2, G1, 253, 64, 8));
	hnet_settle(net);
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_IP6_PROTO], 1);
	for (i = 0; i < net->ncap; i++) {
		const uint8_t *f = net->cap[i].b;

		if (net->cap[i].from == 0 && f[20] == IPK_IPPROTO_ICMP6 &&
		    f[54] == IPK_ICMP6_PARAM_PROB) {
			found = 1;
			CHECK_EQ(f[55], 1);
			CHECK_EQ(ipk_rd32(f + 58), 6); /* the Next Header field */
			CHECK_EQ(f[21], 64);           /* our hop limit on output */
		}
	}
	CHECK(found);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_forged_sources_dropped(void)
{
	struct hnet *net = net6(1, tweak6);
	struct hnode *a = net->nodes[0];
	uint8_t b[200], mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2};
	uint8_t other[16];

	memset(b, 0, sizeof(b));
	hnode_inject(a, b, hb6(b, 0, mapped, G1, IPK_IPPROTO_NONE, 64, 0));
	hnode_inject(a, b, hb6(b, 0, ALLN, G1, IPK_IPPROTO_NONE, 64, 0));
	hnode_inject(a, b, hb6(b, 0, G1, G1, IPK_IPPROTO_NONE, 64, 0));
	/* the mapped source under its own reason (issue 19: never routed as IPv6) */
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_IP6_BAD_SRC], 2);
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_IP6_V4MAPPED], 1);
	memcpy(other, G1, 16);
	other[15] = 0x42; /* not ours */
	hnode_inject(a, b, hb6(b, 0, G2, other, IPK_IPPROTO_NONE, 64, 0));
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_IP6_NOT_FOR_US], 1);
	CHECK_EQ(ipk_counters(a->ctx)->ip6_rx, 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* An RA from fe80::99 with one prefix option (L|A) for 2001:db8:1::/64. */
static uint32_t hb_ra(uint8_t *b, uint32_t valid, uint32_t preferred, uint16_t rlife)
{
	static const uint8_t rtr[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x99};
	uint8_t mac[6] = {2, 0x66, 0, 0, 0, 0x99};
	struct ipk_nd_msg m;
	struct ipk_nd_prefix pf;
	uint32_t n;

	memset(&m, 0, sizeof(m));
	m.type = IPK_ICMP6_ND_RA;
	m.cur_hlim = 63;
	m.router_lifetime = rlife;
	n = ipk_nd_emit(b + 54, 200, &m);
	n += ipk_nd_opt_lla_emit(b + 54 + n, 8, IPK_NDOPT_SLLA, mac);
	memset(&pf, 0, sizeof(pf));
	pf.plen = 64;
	pf.flags = IPK_ND_PFX_ONLINK | IPK_ND_PFX_AUTO;
	pf.valid = valid;
	pf.preferred = preferred;
	pf.prefix[0] = 0x20; pf.prefix[1] = 0x01; pf.prefix[2] = 0x0d; pf.prefix[3] = 0xb8;
	pf.prefix[5] = 1;
	n += ipk_nd_opt_prefix_emit(b + 54 + n, 32, &pf);
	n += ipk_nd_opt_mtu_emit(b + 54 + n, 8, 1400);
	ipk_icmp6_csum_fill(b + 54, n, rtr, ALLN);
	return hb6(b, 0, rtr, ALLN, IPK_IPPROTO_ICMP6, 255, n);
}

static int slaac_slot(struct ipk_ctx *c)
{
	int i;

	for (i = 0; i < IPK_IP6_ADDRS; i++)
		if (c->ip6.addr[i].slaac && c->ip6.addr[i].state != IPK_A6_FREE)
			return i;
	return -1;
}

static void test_slaac_from_ra_and_two_hour_rule(void)
{
	struct hnet *net = net6(1, tweak6_bare);
	struct hnode *a = net->nodes[0];
	uint8_t b[300], addrs[4][16], off_link[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 9};
	struct ipk_addr peer;
	int s;

	hnode_inject(a, b, hb_ra(b, 86400, 3600, 1800));
	s = slaac_slot(a->ctx);
	CHECK(s >= 0);
	CHECK_EQ(a->ctx->ip6.addr[s > 0 ? s : 0].state, IPK_A6_TENTATIVE);
	hnet_advance(net, 2 * SEC);
	CHECK_EQ(ipk_ip6_addrs(a->ctx, addrs, 4), 2);
	CHECK_EQ(addrs[1][5], 1);                             /* 2001:db8:1:: */
	CHECK(memcmp(addrs[1] + 8, a->ctx->ip6.addr[0].a + 8, 8) == 0); /* EUI-64 */
	CHECK_EQ(a->ctx->ip6.hlim, 63);
	CHECK_EQ(a->ctx->ip6.mtu, 1400);
	/* RFC 4862 §5.5.3 e): a forged 60 s valid lifetime only cuts it to 2 h */
	hnode_inject(a, b, hb_ra(b, 60, 30, 1800));
	CHECK(a->ctx->ip6.addr[s].valid_until >= net->now + 7200 * SEC);
	/* off-link goes to the router, whose address the RA's SLLA gave (STALE) */
	hnet_clear_cap(net);
	memset(&peer, 0, sizeof(peer));
	peer.family = IPK_AF_INET6;
	memcpy(peer.a, off_link, 16);
	ipk_udp_bind(a->ctx, ipk_htons(5000));
	CHECK_EQ(ipk_udp_sendto_addr(a->ctx, ipk_htons(5000), &peer, ipk_htons(7), msg, 4, net->now),
	         4);
	CHECK_EQ(net->ncap, 1);
	CHECK_EQ(net->cap[0].b[5], 0x99); /* to the router's MAC */
	CHECK_EQ(net->cap[0].b[20], IPK_IPPROTO_UDP);
	/* DELAY -> PROBE: unicast NS to the router (RFC 4861 §7.3.3), then given up */
	hnet_advance(net, 6 * SEC);
	CHECK_EQ(count_icmp6(net, 0, IPK_ICMP6_ND_NS), 1);
	CHECK_EQ(net->cap[1].b[5], 0x99);
	hnet_advance(net, 1 * SEC);
	hnet_advance(net, 1 * SEC);
	hnet_advance(net, 1 * SEC);
	CHECK_EQ(count_icmp6(net, 0, IPK_ICMP6_ND_NS), 3);
	for (s = 0; s < IPK_ND_ENTRIES; s++)
		CHECK(a->ctx->ip6.nd[s].state == IPK_ND_FREE || a->ctx->ip6.nd[s].ip[15] != 0x99);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_na_override_flag_rules(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0];
	struct ipk_nd_msg m;
	struct ipk_nd_entry *e = NULL;
	uint8_t b[200], ll_b[16], mac_b[6], other[6] = {2, 0x55, 0, 0, 0, 1};
	uint32_t n;
	int i;

	ll_of(1, ll_b);
	hb_mac(mac_b, 1);
	ipk_icmp6_echo(a->ctx, ll_b, 1, 1, 8, net->now);
	hnet_settle(net);
	for (i = 0; i < IPK_ND_ENTRIES; i++)
		if (memcmp(a->ctx->ip6.nd[i].ip, ll_b, 16) == 0)
			e = &a->ctx->ip6.nd[i];
	CHECK(e != NULL);
	if (!e)
		goto out;
	CHECK_EQ(e->state, IPK_ND_REACHABLE);
	/* unsolicited NA, another MAC, no Override: STALE, MAC kept (RFC 4861 §7.2.5) */
	memset(&m, 0, sizeof(m));
	m.type = IPK_ICMP6_ND_NA;
	memcpy(m.target, ll_b, 16);
	n = ipk_nd_emit(b + 54, 64, &m);
	n += ipk_nd_opt_lla_emit(b + 54 + n, 8, IPK_NDOPT_TLLA, other);
	ipk_icmp6_csum_fill(b + 54, n, ll_b, ALLN);
	hnode_inject(a, b, hb6(b, 0, ll_b, ALLN, IPK_IPPROTO_ICMP6, 255, n));
	CHECK_EQ(e->state, IPK_ND_STALE);
	CHECK(memcmp(e->mac, mac_b, 6) == 0);
	/* with Override: the MAC moves */
	m.flags = IPK_ND_NA_OVERRIDE;
	n = ipk_nd_emit(b + 54, 64, &m);
	n += ipk_nd_opt_lla_emit(b + 54 + n, 8, IPK_NDOPT_TLLA, other);
	ipk_icmp6_csum_fill(b + 54, n, ll_b, ALLN);
	hnode_inject(a, b, hb6(b, 0, ll_b, ALLN, IPK_IPPROTO_ICMP6, 255, n));
	CHECK(memcmp(e->mac, other, 6) == 0);
out:
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_reachable_goes_stale_then_probe(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0];
	struct ipk_nd_entry *e = NULL;
	uint8_t ll_b[16];
	int i;

	ll_of(1, ll_b);
	ipk_icmp6_echo(a->ctx, ll_b, 1, 1, 8, net->now);
	hnet_settle(net);
	for (i = 0; i < IPK_ND_ENTRIES; i++)
		if (memcmp(a->ctx->ip6.nd[i].ip, ll_b, 16) == 0)
			e = &a->ctx->ip6.nd[i];
	CHECK(e != NULL);
	if (!e)
		goto out;
	hnet_advance(net, 6 * SEC);  /* b's own probe of a, answered */
	hnet_advance(net, 25 * SEC); /* REACHABLE_TIME since the first NA */
	CHECK_EQ(e->state, IPK_ND_STALE);
	ipk_icmp6_echo(a->ctx, ll_b, 1, 2, 8, net->now);
	CHECK_EQ(e->state, IPK_ND_DELAY);
	hnet_settle(net);
	CHECK_EQ(echo6_n[0], 2);
	hnet_advance(net, 6 * SEC); /* DELAY_FIRST_PROBE_TIME: a unicast probe, answered */
	CHECK_EQ(e->state, IPK_ND_REACHABLE);
out:
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* Echo requests from node 0 (type 128) captured to eth destination mac. */
static int echo_req_to(struct hnet *net, const uint8_t mac[6])
{
	int i, n = 0;

	for (i = 0; i < net->ncap; i++) {
		const uint8_t *f = net->cap[i].b;

		if (net->cap[i].from == 0 && ipk_rd16(f + 12) == IPK_ETHERTYPE_IP6 &&
		    f[20] == IPK_IPPROTO_ICMP6 && f[54] == IPK_ICMP6_ECHO_REQUEST && memcmp(f, mac, 6) == 0)
			n++;
	}
	return n;
}

static struct ipk_nd_entry *nd_entry_of(struct ipk_ctx *c, const uint8_t ip[16])
{
	int i;

	for (i = 0; i < IPK_ND_ENTRIES; i++)
		if (c->ip6.nd[i].state != IPK_ND_FREE && memcmp(c->ip6.nd[i].ip, ip, 16) == 0)
			return &c->ip6.nd[i];
	return NULL;
}

/* nd.c's next-hop header cache (ipk_nd_hc_tx): a solicited NA with Override and a
 * new MAC keeps the entry REACHABLE (RFC 4861 §7.2.5) but moves it; the next
 * packet goes to the new MAC, not to the header cached from the old one. */
static void test_nd_cached_header_follows_na_override(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0];
	struct ipk_nd_msg m;
	struct ipk_nd_entry *e;
	uint8_t b[200], ll_a[16], ll_b[16], other[6] = {2, 0x55, 0, 0, 0, 1};
	uint64_t tx_bytes;
	uint32_t n;

	ll_of(0, ll_a);
	ll_of(1, ll_b);
	ipk_icmp6_echo(a->ctx, ll_b, 1, 1, 8, net->now);
	hnet_settle(net);
	ipk_icmp6_echo(a->ctx, ll_b, 1, 2, 8, net->now); /* the cache holds ll_b now */
	hnet_settle(net);
	e = nd_entry_of(a->ctx, ll_b);
	CHECK(e != NULL && e->state == IPK_ND_REACHABLE);
	memset(&m, 0, sizeof(m));
	m.type = IPK_ICMP6_ND_NA;
	m.flags = IPK_ND_NA_SOLICITED | IPK_ND_NA_OVERRIDE;
	memcpy(m.target, ll_b, 16);
	n = ipk_nd_emit(b + 54, 64, &m);
	n += ipk_nd_opt_lla_emit(b + 54 + n, 8, IPK_NDOPT_TLLA, other);
	ipk_icmp6_csum_fill(b + 54, n, ll_b, ll_a);
	hnode_inject(a, b, hb6(b, 0, ll_b, ll_a, IPK_IPPROTO_ICMP6, 255, n));
	CHECK(e != NULL && e->state == IPK_ND_REACHABLE && memcmp(e->mac, other, 6) == 0);
	net->cut = 1;
	hnet_clear_cap(net);
	ipk_icmp6_echo(a->ctx, ll_b, 1, 3, 8, net->now);
	hnet_settle(net);
	CHECK_EQ(echo_req_to(net, other), 1);
	/* the next one from the cache, counted as the whole frame (as the full path) */
	hnet_clear_cap(net);
	tx_bytes = a->ctx->cnt.tx_bytes;
	ipk_icmp6_echo(a->ctx, ll_b, 1, 4, 8, net->now);
	hnet_settle(net);
	CHECK_EQ(echo_req_to(net, other), 1);
	CHECK(net->ncap == 1 && a->ctx->cnt.tx_bytes - tx_bytes == net->cap[0].len);
	net->cut = 0;
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* A neighbour that stops answering goes REACHABLE -> STALE -> DELAY -> PROBE ->
 * gone (RFC 4861 §7.3.3); the cached header must follow it: after the failure a
 * new packet asks again by multicast NS, and no request goes to the old MAC
 * once the probes have failed. */
static void test_nd_cached_header_dropped_when_neighbour_fails(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0];
	uint8_t ll_b[16], mac_b[6];
	int k;

	ll_of(1, ll_b);
	hb_mac(mac_b, 1);
	for (k = 1; k <= 2; k++) {
		ipk_icmp6_echo(a->ctx, ll_b, 1, (uint16_t)k, 8, net->now);
		hnet_settle(net);
	}
	CHECK_EQ(echo6_n[0], 2);
	net->cut = 1;
	for (k = 3; k < 3 + 60; k++) { /* one request a second for a minute */
		/* REACHABLE ends by 30 s, DELAY 5 s, PROBE 3 x 1 s: failed by 45 s */
		if (k == 3 + 45)
			hnet_clear_cap(net);
		ipk_icmp6_echo(a->ctx, ll_b, 1, (uint16_t)k, 8, net->now);
		hnet_advance(net, SEC);
	}
	CHECK_EQ(echo_req_to(net, mac_b), 0);
	CHECK(count_icmp6(net, 0, IPK_ICMP6_ND_NS) >= 1);
	net->cut = 0;
	hnet_advance(net, 5 * SEC);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_ip6_off_frames_dropped_as_ethertype(void)
{
	struct hnet *net = hnet_new(1, NULL);
	struct hnode *a = net->nodes[0];
	uint8_t b[200];

	memset(b, 0, sizeof(b));
	hnode_inject(a, b, hb6(b, 0, G2, G1, IPK_IPPROTO_NONE, 64, 0));
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_ETHERTYPE], 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_udp6_3000_bytes_fragmented_both_ways(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	static uint8_t big[3000];
	struct ipk_addr peer;
	uint32_t i;

	for (i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7 + 3);
	ipk_udp_bind(a->ctx, ipk_htons(5000));
	ipk_udp_bind(b->ctx, ipk_htons(7));
	udp6_echo[1] = 1;
	memset(&peer, 0, sizeof(peer));
	peer.family = IPK_AF_INET6;
	memcpy(peer.a, G2, 16);
	CHECK_EQ(ipk_udp_sendto_addr(a->ctx, ipk_htons(5000), &peer, ipk_htons(7), big, sizeof(big),
	                             net->now), (int)sizeof(big));
	hnet_settle(net);
	CHECK_EQ(ipk_counters(a->ctx)->ip6_frags_tx, 3);
	CHECK_EQ(ipk_counters(b->ctx)->ip6_reassembled, 1);
	CHECK_EQ(udp6_n[1], 1);
	CHECK_EQ(udp6_n[0], 1);
	CHECK_EQ(udp6_len[0], sizeof(big));
	CHECK(memcmp(udp6_data[0], big, sizeof(big)) == 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_ping6_3000_fragmented_both_ways(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];

	CHECK_EQ(ipk_icmp6_echo(a->ctx, G2, ipk_htons(9), ipk_htons(1), 3000, net->now), 0);
	hnet_settle(net);
	CHECK_EQ(ipk_counters(b->ctx)->ip6_reassembled, 1);
	CHECK_EQ(ipk_counters(a->ctx)->ip6_reassembled, 1);
	CHECK_EQ(echo6_n[0], 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* A fragment of datagram id: off bytes in, more flag, n data bytes of fill. */
static uint32_t hb_frag(uint8_t *b, uint8_t next, uint32_t off, int more, uint32_t n,
                        uint32_t id)
{
	ipk_ip6_frag_emit(b + 54, 8, next, off, more, id);
	memset(b + 62, 0x5a, n);
	return hb6(b, 0, G2, G1, IPK_IPPROTO_FRAGMENT, 64, 8 + n);
}

static void test_overlapping_fragments_drop_whole_datagram(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0];
	uint8_t b[300];

	ipk_udp_bind(a->ctx, ipk_htons(0x5a5a));
	hnode_inject(a, b, hb_frag(b, IPK_IPPROTO_UDP, 0, 1, 16, 77));
	hnode_inject(a, b, hb_frag(b, IPK_IPPROTO_UDP, 8, 0, 16, 77)); /* overlaps 8..16 */
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_FRAG_OVERLAP], 2);
	/* the rest of the datagram, arriving after, starts a new one that times out */
	hnode_inject(a, b, hb_frag(b, IPK_IPPROTO_UDP, 16, 0, 8, 77));
	CHECK_EQ(udp6_n[0], 0);
	CHECK_EQ(ipk_counters(a->ctx)->ip6_reassembled, 0);
	hnet_advance(net, 61 * SEC); /* RFC 8200 §4.5: 60 s */
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_FRAG_TIMEOUT], 1);
	/* an overlap that leaves a hole of the same size: the byte count adds up,
	 * only the overlap rule stops a datagram with a hole in it going up */
	hnode_inject(a, b, hb_frag(b, IPK_IPPROTO_UDP, 0, 1, 16, 81));
	hnode_inject(a, b, hb_frag(b, IPK_IPPROTO_UDP, 8, 1, 8, 81));
	hnode_inject(a, b, hb_frag(b, IPK_IPPROTO_UDP, 24, 0, 8, 81));
	CHECK_EQ(ipk_counters(a->ctx)->ip6_reassembled, 0);
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_FRAG_OVERLAP], 4);
	hnet_advance(net, 61 * SEC);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_first_fragment_without_upper_header_param_problem_3(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0];
	uint8_t b[300];

	hnet_clear_cap(net);
	/* RFC 7112: the first fragment ends inside the header chain */
	hnode_inject(a, b, hb_frag(b, IPK_IPPROTO_DSTOPTS, 0, 1, 8, 78));
	hnet_settle(net);
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_IP6_FRAG], 1);
	CHECK_EQ(count_icmp6(net, 0, IPK_ICMP6_PARAM_PROB), 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_fragment_timeout_sends_time_exceeded(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0];
	uint8_t b[300];

	hnode_inject(a, b, hb_frag(b, IPK_IPPROTO_UDP, 0, 1, 16, 79));
	hnet_clear_cap(net);
	hnet_advance(net, 59 * SEC);
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_FRAG_TIMEOUT], 0);
	hnet_advance(net, 2 * SEC);
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_FRAG_TIMEOUT], 1);
	CHECK_EQ(count_icmp6(net, 0, IPK_ICMP6_TIME_EXCEEDED), 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_atomic_fragment_delivered(void)
{
	struct hnet *net = net6(1, tweak6);
	struct hnode *a = net->nodes[0];
	uint8_t b[300];
	uint32_t n;

	ipk_udp_bind(a->ctx, ipk_htons(5000));
	ipk_ip6_frag_emit(b + 54, 8, IPK_IPPROTO_UDP, 0, 0, 80); /* RFC 6946 */
	ipk_wr16(b + 62, 9);
	ipk_wr16(b + 64, 5000);
	ipk_wr16(b + 66, 12);
	ipk_wr16(b + 68, 0);
	memcpy(b + 70, "abcd", 4);
	ipk_wr16(b + 68, ipk_udp6_csum(G2, G1, b + 62, 12));
	n = hb6(b, 0, G2, G1, IPK_IPPROTO_FRAGMENT, 64, 20);
	hnode_inject(a, b, n);
	CHECK_EQ(udp6_n[0], 1);
	CHECK_EQ(ipk_counters(a->ctx)->ip6_frags_rx, 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* A Packet Too Big to a about its datagram G1 -> G2, saying mtu. */
static void inject_ptb(struct hnode *a, uint32_t mtu)
{
	uint8_t b[400], inv[100];
	struct ipk_icmp6_hdr h;
	struct ipk_ip6_hdr ih;
	static const uint8_t rtr[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x99};
	uint32_t n;

	memset(&ih, 0, sizeof(ih));
	ih.plen = 60;
	ih.next = IPK_IPPROTO_UDP;
	ih.hlim = 64;
	memcpy(ih.src, G1, 16);
	memcpy(ih.dst, G2, 16);
	memset(inv, 0, sizeof(inv));
	ipk_ip6_emit(inv, 40, &ih);
	memset(&h, 0, sizeof(h));
	h.type = IPK_ICMP6_PKT_TOO_BIG;
	h.param = mtu;
	n = ipk_icmp6_error_emit(b + 54, 300, &h, inv, 100, rtr, G1);
	hnode_inject(a, b, hb6(b, 0, rtr, G1, IPK_IPPROTO_ICMP6, 64, n));
}

static void test_ptb_lowers_pmtu_never_below_1280(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0];
	static uint8_t big[1300];
	struct ipk_addr peer;

	inject_ptb(a, 1000); /* forged: below the IPv6 minimum */
	CHECK_EQ(ipk_counters(a->ctx)->ip6_ptb_ignored, 1);
	CHECK_EQ(ipk_ip6_pmtu(a->ctx, G2), 1500);
	inject_ptb(a, 1300);
	CHECK_EQ(ipk_counters(a->ctx)->ip6_pmtu_lowered, 1);
	CHECK_EQ(ipk_ip6_pmtu(a->ctx, G2), 1300);
	/* a 1300-byte datagram now goes as fragments */
	ipk_udp_bind(a->ctx, ipk_htons(5000));
	memset(&peer, 0, sizeof(peer));
	peer.family = IPK_AF_INET6;
	memcpy(peer.a, G2, 16);
	CHECK_EQ(ipk_udp_sendto_addr(a->ctx, ipk_htons(5000), &peer, ipk_htons(7), big, sizeof(big),
	                             net->now), (int)sizeof(big));
	hnet_settle(net);
	CHECK_EQ(ipk_counters(a->ctx)->ip6_fragmented, 1);
	/* the table is bounded: PTBs for many destinations keep at most its size */
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* integrator-owned ND: node 0's table */
static uint8_t otab_ip[4][16], otab_mac[4][6];
static int otab_n, olearned_n;

static int op_nd_resolve(const uint8_t ip[16], uint8_t mac[6], void *opaque)
{
	int i;

	(void)opaque;
	for (i = 0; i < otab_n; i++)
		if (memcmp(otab_ip[i], ip, 16) == 0) {
			memcpy(mac, otab_mac[i], 6);
			return 1;
		}
	return 0;
}

static void op_nd_learned(const uint8_t ip[16], const uint8_t mac[6], void *opaque)
{
	(void)opaque;
	olearned_n++;
	if (otab_n < 4) {
		memcpy(otab_ip[otab_n], ip, 16);
		memcpy(otab_mac[otab_n++], mac, 6);
	}
}

static void test_integrator_owned_nd(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0];
	int i, used = 0;

	otab_n = olearned_n = 0;
	a->ops.nd_resolve = op_nd_resolve;
	a->ops.nd_learned = op_nd_learned;
	hnet_clear_cap(net);
	/* unknown: the request waits while an NS asks; the NA goes to nd_learned */
	CHECK_EQ(ipk_icmp6_echo(a->ctx, G2, ipk_htons(5), ipk_htons(1), 8, net->now), 0);
	hnet_settle(net);
	CHECK_EQ(echo6_n[0], 1);
	CHECK(olearned_n >= 1);
	CHECK_EQ(count_icmp6(net, 0, IPK_ICMP6_ND_NS), 1);
	for (i = 0; i < IPK_ND_ENTRIES; i++)
		used += a->ctx->ip6.nd[i].state != IPK_ND_FREE;
	CHECK_EQ(used, 0); /* the built-in cache keeps nothing */
	/* known: no NS, straight out */
	CHECK_EQ(ipk_icmp6_echo(a->ctx, G2, ipk_htons(5), ipk_htons(2), 8, net->now), 0);
	hnet_settle(net);
	CHECK_EQ(echo6_n[0], 2);
	CHECK_EQ(count_icmp6(net, 0, IPK_ICMP6_ND_NS), 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* ------------------------------------------------------------ MLD (mld.c) */

static const uint8_t QRY_SRC[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x99};

/* An MLD query (RFC 3810 §5.1) from src to dst about group (NULL: general), with
 * Maximum Response Code mrc, hop limit hlim, a router alert unless no_ra, 28 bytes
 * (24: an MLDv1 one). Returns the frame length. */
static uint32_t hb_mld_query(uint8_t *b, const uint8_t src[16], const uint8_t dst[16],
                             const uint8_t *group, uint16_t mrc, uint8_t hlim, int no_ra,
                             uint32_t qlen)
{
	uint8_t *m = b + 54 + (no_ra ? 0 : 8);

	memset(b, 0, 54 + 8 + 28);
	if (!no_ra)
		ipk_ip6_hbh_ra_emit(b + 54, 8, IPK_IPPROTO_ICMP6);
	m[0] = IPK_ICMP6_MLD_QUERY;
	ipk_wr16(m + 4, mrc);
	if (group)
		memcpy(m + 8, group, 16);
	if (qlen >= 28) {
		m[24] = 2;   /* QRV */
		m[25] = 125; /* QQIC */
	}
	ipk_icmp6_csum_fill(m, qlen, src, dst);
	return hb6(b, 0, src, dst, no_ra ? IPK_IPPROTO_ICMP6 : IPK_IPPROTO_HOPOPTS, hlim,
	           (no_ra ? 0 : 8) + qlen);
}

/* MLDv2 reports node `from` sent (hop-by-hop, then ICMPv6 type 143); *last: the
 * last one's message. */
static int mld_reports(struct hnet *net, int from, const uint8_t **last)
{
	int i, n = 0;

	for (i = 0; i < net->ncap; i++) {
		const uint8_t *f = net->cap[i].b;

		if (net->cap[i].from == from && ipk_rd16(f + 12) == IPK_ETHERTYPE_IP6 &&
		    f[20] == IPK_IPPROTO_HOPOPTS && f[54] == IPK_IPPROTO_ICMP6 &&
		    f[62] == IPK_ICMP6_MLD2_REPORT) {
			*last = f + 62;
			n++;
		}
	}
	return n;
}

/* Does report m hold a MODE_IS_EXCLUDE record for g? */
static int mld_has(const uint8_t *m, const uint8_t g[16])
{
	uint32_t i, n = ipk_rd16(m + 6);

	for (i = 0; i < n; i++)
		if (m[8 + 20 * i] == IPK_MLD2_MODE_IS_EXCLUDE && memcmp(m + 12 + 20 * i, g, 16) == 0)
			return 1;
	return 0;
}

/* RFC 3810 §6.2: a General Query is answered once, within its Maximum Response
 * Delay, by a current-state report of every solicited-node group (the link-local's
 * and the static address's), to ff02::16 with hop limit 1; ff02::1 is not reported
 * (§6). (With tweak6 both addresses end in 00:00:01 and share one group: one
 * record, as the specific-query test sees.) */
static void tweak6_mld(int idx, struct ipk_config *cfg)
{
	tweak6(idx, cfg);
	cfg->ip6_addr[15] = 0x42; /* its own solicited-node group beside the link-local's */
}

static void test_mld_general_query_answered_within_max_delay(void)
{
	struct hnet *net = net6(1, tweak6_mld);
	struct hnode *a = net->nodes[0];
	uint8_t b[200], ll[16], g1[16], gl[16], st[16];
	const uint8_t *r = NULL;

	ll_of(0, ll);
	ipk_ip6_solicited_node(gl, ll);
	memcpy(st, G1, 16);
	st[15] = 0x42;
	ipk_ip6_solicited_node(g1, st);
	hnet_clear_cap(net);
	hnode_inject(a, b, hb_mld_query(b, QRY_SRC, ALLN, NULL, 1000, 1, 0, 28)); /* 1 s */
	CHECK_EQ(ipk_counters(a->ctx)->mld_queries, 1);
	hnet_advance(net, SEC + SEC / 100);
	CHECK_EQ(mld_reports(net, 0, &r), 1);
	if (r) {
		const uint8_t *ip = r - 48;

		CHECK_EQ(ipk_rd16(r + 6), 2);
		CHECK(mld_has(r, gl) && mld_has(r, g1));
		CHECK(memcmp(ip + 24, ipk_ip6_all_mldv2_routers, 16) == 0);
		CHECK(memcmp(ip + 8, ll, 16) == 0); /* from our link-local */
		CHECK_EQ(ip[7], 1);
	}
	/* nothing more until another query */
	hnet_advance(net, 5 * SEC);
	CHECK_EQ(mld_reports(net, 0, &r), 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* A Multicast-Address-Specific Query for one of our groups, sent to that group, is
 * answered for it alone; one for a group we are not in draws nothing. */
static void test_mld_specific_query_answered_for_its_group_only(void)
{
	struct hnet *net = net6(1, tweak6);
	struct hnode *a = net->nodes[0];
	uint8_t b[200], g1[16], other[16];
	const uint8_t *r = NULL;

	ipk_ip6_solicited_node(g1, G1);
	memcpy(other, g1, 16);
	other[15] ^= 0x55;
	hnet_clear_cap(net);
	hnode_inject(a, b, hb_mld_query(b, QRY_SRC, g1, g1, 500, 1, 0, 28));
	hnet_advance(net, SEC);
	CHECK_EQ(mld_reports(net, 0, &r), 1);
	if (r) {
		CHECK_EQ(ipk_rd16(r + 6), 1);
		CHECK(mld_has(r, g1));
	}
	hnet_clear_cap(net);
	hnode_inject(a, b, hb_mld_query(b, QRY_SRC, ALLN, other, 500, 1, 0, 28));
	hnet_advance(net, SEC);
	CHECK_EQ(mld_reports(net, 0, &r), 0);
	CHECK_EQ(ipk_counters(a->ctx)->mld_queries, 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* §6.2's checks: a query from a global source, with hop limit 2, without a router
 * alert, or of 26 bytes (neither version, §8.1) is dropped as mld_invalid and
 * answered by nothing. */
static void test_mld_invalid_queries_dropped(void)
{
	struct hnet *net = net6(1, tweak6);
	struct hnode *a = net->nodes[0];
	uint8_t b[200];
	const uint8_t *r = NULL;

	hnet_clear_cap(net);
	hnode_inject(a, b, hb_mld_query(b, G2, ALLN, NULL, 100, 1, 0, 28));
	hnode_inject(a, b, hb_mld_query(b, QRY_SRC, ALLN, NULL, 100, 2, 0, 28));
	hnode_inject(a, b, hb_mld_query(b, QRY_SRC, ALLN, NULL, 100, 1, 1, 28));
	hnode_inject(a, b, hb_mld_query(b, QRY_SRC, ALLN, NULL, 100, 1, 0, 26));
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_MLD_INVALID], 4);
	hnet_advance(net, SEC);
	CHECK_EQ(mld_reports(net, 0, &r), 0);
	CHECK_EQ(ipk_counters(a->ctx)->mld_queries, 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* ------------------------------------- MLDv1 compatibility (RFC 3810 §8) */

/* MLDv1 reports (RFC 2710 §3) node `from` sent since the capture was cleared: each
 * one checked (24 bytes after a router-alert hop-by-hop header, hop limit 1, from
 * our link-local, to the group it reports, checksum right); the groups go to out
 * (up to max). Returns the count, -1 when one is malformed. */
static int mld1_reports(struct hnet *net, int from, uint8_t (*out)[16], int max)
{
	uint8_t ll[16];
	int i, n = 0;

	ll_of(from, ll);
	for (i = 0; i < net->ncap; i++) {
		const uint8_t *f = net->cap[i].b, *ip = f + 14, *m = f + 62;

		if (net->cap[i].from != from || ipk_rd16(f + 12) != IPK_ETHERTYPE_IP6 ||
		    f[20] != IPK_IPPROTO_HOPOPTS || f[54] != IPK_IPPROTO_ICMP6 ||
		    m[0] != IPK_ICMP6_MLD1_REPORT)
			continue;
		if (net->cap[i].len != 62 + 24 || ipk_rd16(ip + 4) != 8 + 24 || ip[7] != 1 ||
		    memcmp(ip + 8, ll, 16) != 0 || memcmp(ip + 24, m + 8, 16) != 0 ||
		    f[0] != 0x33 || f[1] != 0x33 || memcmp(f + 2, m + 20, 4) != 0 ||
		    ipk_csum_l4_6(ip + 8, ip + 24, IPK_IPPROTO_ICMP6, m, 24) != 0)
			return -1;
		if (n < max)
			memcpy(out[n], m + 8, 16);
		n++;
	}
	return n;
}

static int has_group(uint8_t (*g)[16], int n, const uint8_t want[16])
{
	int i;

	for (i = 0; i < n; i++)
		if (memcmp(g[i], want, 16) == 0)
			return 1;
	return 0;
}

/* §8.2.1: an MLDv1 General Query (24 bytes, §8.1) is answered within its Maximum
 * Response Delay (ms, RFC 2710 §3.4) by one MLDv1 report per solicited-node group,
 * each to its group, and no MLDv2 report; the MLDv2 response pending when it came is
 * cancelled (a change of mode). */
static void test_mld_v1_query_answered_with_v1_reports(void)
{
	struct hnet *net = net6(1, tweak6_mld);
	struct hnode *a = net->nodes[0];
	uint8_t b[200], ll[16], st[16], g1[16], gl[16], got[4][16];
	const uint8_t *r = NULL;

	ll_of(0, ll);
	ipk_ip6_solicited_node(gl, ll);
	memcpy(st, G1, 16);
	st[15] = 0x42;
	ipk_ip6_solicited_node(g1, st);
	hnet_clear_cap(net);
	/* an MLDv2 query asking within 10 s, then an MLDv1 one within 0.5 s */
	hnode_inject(a, b, hb_mld_query(b, QRY_SRC, ALLN, NULL, 10000, 1, 0, 28));
	hnode_inject(a, b, hb_mld_query(b, QRY_SRC, ALLN, NULL, 500, 1, 0, 24));
	CHECK_EQ(ipk_counters(a->ctx)->mld1_queries, 1);
	hnet_advance(net, SEC / 2 + SEC / 100);
	CHECK_EQ(mld1_reports(net, 0, got, 4), 2);
	CHECK(has_group(got, 2, gl) && has_group(got, 2, g1));
	CHECK_EQ(ipk_counters(a->ctx)->mld1_tx, 2);
	hnet_advance(net, 11 * SEC); /* past the MLDv2 query's 10 s: it was cancelled */
	CHECK_EQ(mld_reports(net, 0, &r), 0);
	CHECK_EQ(mld1_reports(net, 0, got, 4), 2);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* An MLDv1 Multicast-Address-Specific Query for one of our groups is answered for
 * it alone; one for a group we are not in draws nothing (still enters the mode). */
static void test_mld_v1_specific_query_answered_for_its_group_only(void)
{
	struct hnet *net = net6(1, tweak6);
	struct hnode *a = net->nodes[0];
	uint8_t b[200], g1[16], other[16], got[4][16];

	ipk_ip6_solicited_node(g1, G1);
	memcpy(other, g1, 16);
	other[15] ^= 0x55;
	hnet_clear_cap(net);
	hnode_inject(a, b, hb_mld_query(b, QRY_SRC, ALLN, other, 500, 1, 0, 24));
	hnet_advance(net, SEC);
	CHECK_EQ(mld1_reports(net, 0, got, 4), 0);
	hnode_inject(a, b, hb_mld_query(b, QRY_SRC, g1, g1, 500, 1, 0, 24));
	hnet_advance(net, SEC);
	CHECK_EQ(mld1_reports(net, 0, got, 4), 1);
	CHECK(memcmp(got[0], g1, 16) == 0);
	CHECK_EQ(ipk_counters(a->ctx)->mld1_queries, 2);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* §8.2.1, §9.12: MLDv1 mode lasts the Older Version Querier Present Timeout (260 s
 * with the defaults) from the last MLDv1 query: MLDv2 queries meanwhile get MLDv1
 * reports; a second MLDv1 query restarts the time; once it has run out, an MLDv2
 * query gets an MLDv2 report again. */
static void test_mld_v1_mode_ends_after_present_timeout(void)
{
	struct hnet *net = net6(1, tweak6);
	struct hnode *a = net->nodes[0];
	uint8_t b[200], got[4][16];
	const uint8_t *r = NULL;

	hnode_inject(a, b, hb_mld_query(b, QRY_SRC, ALLN, NULL, 100, 1, 0, 24));
	hnet_advance(net, 200 * SEC);
	hnet_clear_cap(net);
	hnode_inject(a, b, hb_mld_query(b, QRY_SRC, ALLN, NULL, 100, 1, 0, 28));
	hnet_advance(net, SEC);
	CHECK_EQ(mld1_reports(net, 0, got, 4), 1); /* MLDv2 query, v1 mode: v1 answer */
	CHECK_EQ(mld_reports(net, 0, &r), 0);
	hnode_inject(a, b, hb_mld_query(b, QRY_SRC, ALLN, NULL, 100, 1, 0, 24)); /* t=201 s */
	hnet_advance(net, 100 * SEC);                                            /* t=301 s */
	hnet_clear_cap(net);
	hnode_inject(a, b, hb_mld_query(b, QRY_SRC, ALLN, NULL, 100, 1, 0, 28));
	hnet_advance(net, SEC);
	CHECK_EQ(mld1_reports(net, 0, got, 4), 1); /* still v1: restarted at 201 s */
	CHECK_EQ(mld_reports(net, 0, &r), 0);
	hnet_advance(net, 160 * SEC); /* t=462 s: 261 s after the last MLDv1 query */
	hnet_clear_cap(net);
	hnode_inject(a, b, hb_mld_query(b, QRY_SRC, ALLN, NULL, 100, 1, 0, 28));
	hnet_advance(net, SEC);
	CHECK_EQ(mld_reports(net, 0, &r), 1);
	CHECK_EQ(mld1_reports(net, 0, got, 4), 0);
	CHECK_EQ(ipk_counters(a->ctx)->mld1_queries, 2);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* An MLDv1 query failing RFC 2710 §3's checks (hop limit 2, a global source, no
 * router alert) is dropped as mld_invalid and does not change the mode: an MLDv2
 * query after it gets an MLDv2 report. */
static void test_mld_v1_invalid_query_keeps_v2(void)
{
	struct hnet *net = net6(1, tweak6);
	struct hnode *a = net->nodes[0];
	uint8_t b[200], got[4][16];
	const uint8_t *r = NULL;

	hnet_clear_cap(net);
	hnode_inject(a, b, hb_mld_query(b, QRY_SRC, ALLN, NULL, 100, 2, 0, 24));
	hnode_inject(a, b, hb_mld_query(b, G2, ALLN, NULL, 100, 1, 0, 24));
	hnode_inject(a, b, hb_mld_query(b, QRY_SRC, ALLN, NULL, 100, 1, 1, 24));
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_MLD_INVALID], 3);
	CHECK_EQ(ipk_counters(a->ctx)->mld1_queries, 0);
	hnode_inject(a, b, hb_mld_query(b, QRY_SRC, ALLN, NULL, 100, 1, 0, 28));
	hnet_advance(net, SEC);
	CHECK_EQ(mld_reports(net, 0, &r), 1);
	CHECK_EQ(mld1_reports(net, 0, got, 4), 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* ------------------------------------------------- Redirect (RFC 4861 §8) */

/* A Redirect from src about dest to target (with a TLLA option tmac unless NULL),
 * hop limit hlim. */
static uint32_t hb_redirect(uint8_t *b, const uint8_t src[16], const uint8_t dst[16],
                            const uint8_t target[16], const uint8_t dest[16],
                            const uint8_t *tmac, uint8_t hlim)
{
	struct ipk_nd_msg m;
	uint32_t n;

	memset(b, 0, 200);
	memset(&m, 0, sizeof(m));
	m.type = IPK_ICMP6_ND_REDIRECT;
	memcpy(m.target, target, 16);
	memcpy(m.dest, dest, 16);
	n = ipk_nd_emit(b + 54, 100, &m);
	if (tmac)
		n += ipk_nd_opt_lla_emit(b + 54 + n, 8, IPK_NDOPT_TLLA, tmac);
	ipk_icmp6_csum_fill(b + 54, n, src, dst);
	return hb6(b, 0, src, dst, IPK_IPPROTO_ICMP6, hlim, n);
}

/* One UDP datagram to dst from port 5000; the destination MAC of the frame it made. */
static int udp6_out_mac(struct hnet *net, struct hnode *a, const uint8_t dst[16], uint8_t mac[6])
{
	struct ipk_addr peer;
	int i;

	hnet_clear_cap(net);
	memset(&peer, 0, sizeof(peer));
	peer.family = IPK_AF_INET6;
	memcpy(peer.a, dst, 16);
	ipk_udp_sendto_addr(a->ctx, ipk_htons(5000), &peer, ipk_htons(7), msg, 4, net->now);
	for (i = 0; i < net->ncap; i++)
		if (net->cap[i].b[20] == IPK_IPPROTO_UDP) {
			memcpy(mac, net->cap[i].b, 6);
			return 1;
		}
	return 0;
}

/* §8.3: a Redirect from our router for an off-link destination sends its traffic to
 * the better router it names (its TLLA learned); one to the destination itself makes
 * it on-link. §8.1: from another node than the first-hop router, or with hop limit
 * 254, it is dropped and changes nothing. */
static void test_redirect_followed_from_first_hop_router_only(void)
{
	static const uint8_t rtr[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x99};
	static const uint8_t better[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x77};
	static const uint8_t rogue[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x55};
	static const uint8_t dest[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};
	static const uint8_t dest2[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8};
	uint8_t bmac[6] = {2, 0x66, 0, 0, 0, 0x77}, rmac[6] = {2, 0x66, 0, 0, 0, 0x55};
	struct hnet *net = net6(1, tweak6_bare);
	struct hnode *a = net->nodes[0];
	uint8_t b[300], mac[6], ours[16];
	int i;

	hnode_inject(a, b, hb_ra(b, 86400, 3600, 1800));
	hnet_advance(net, 2 * SEC);
	ipk_udp_bind(a->ctx, ipk_htons(5000));
	CHECK(udp6_out_mac(net, a, dest, mac) && mac[5] == 0x99); /* via the router */
	ll_of(0, ours);
	/* from a node that is not the first-hop router for dest: dropped */
	hnode_inject(a, b, hb_redirect(b, rogue, ours, rogue, dest, rmac, 255));
	/* hop limit 254: dropped */
	hnode_inject(a, b, hb_redirect(b, rtr, ours, better, dest, bmac, 254));
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_ND_INVALID], 2);
	CHECK_EQ(ipk_counters(a->ctx)->nd_redirects, 0);
	CHECK(udp6_out_mac(net, a, dest, mac) && mac[5] == 0x99);
	/* from the router: dest goes to the better router, its MAC from the TLLA */
	hnode_inject(a, b, hb_redirect(b, rtr, ours, better, dest, bmac, 255));
	CHECK_EQ(ipk_counters(a->ctx)->nd_redirects, 1);
	CHECK(udp6_out_mac(net, a, dest, mac) && mac[5] == 0x77);
	/* other destinations still go through the router */
	CHECK(udp6_out_mac(net, a, dest2, mac) && mac[5] == 0x99);
	/* target == destination: dest2 is on-link, resolved by an NS for itself */
	hnode_inject(a, b, hb_redirect(b, rtr, ours, dest2, dest2, NULL, 255));
	CHECK_EQ(ipk_counters(a->ctx)->nd_redirects, 2);
	CHECK(!udp6_out_mac(net, a, dest2, mac)); /* waits for ND */
	CHECK_EQ(count_icmp6(net, 0, IPK_ICMP6_ND_NS), 1);
	CHECK(memcmp(net->cap[0].b + 54 + 8, dest2, 16) == 0); /* NS target */
	for (i = 0; i < 10; i++) /* ND gives up on dest2 (no answer): the datagram goes */
		hnet_advance(net, SEC);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

int main(void)
{
	RUN(test_dad_then_link_local_and_static_up);
	RUN(test_ping6_resolves_neighbor_and_replies);
	RUN(test_udp6_echo_data_checked);
	RUN(test_udp6_port_unreachable_rate_limited_and_delivered);
	RUN(test_udp6_zero_checksum_dropped);
	RUN(test_dad_conflict_address_not_used);
	RUN(test_dad_conflict_from_na);
	RUN(test_nd_hop_limit_below_255_dropped);
	RUN(test_nd_cache_flood_stays_bounded);
	RUN(test_ext_chain_that_never_ends_dropped);
	RUN(test_rh0_dropped_with_param_problem);
	RUN(test_unknown_next_header_param_problem_code_1);
	RUN(test_forged_sources_dropped);
	RUN(test_slaac_from_ra_and_two_hour_rule);
	RUN(test_na_override_flag_rules);
	RUN(test_reachable_goes_stale_then_probe);
	RUN(test_nd_cached_header_follows_na_override);
	RUN(test_nd_cached_header_dropped_when_neighbour_fails);
	RUN(test_ip6_off_frames_dropped_as_ethertype);
	RUN(test_udp6_3000_bytes_fragmented_both_ways);
	RUN(test_ping6_3000_fragmented_both_ways);
	RUN(test_overlapping_fragments_drop_whole_datagram);
	RUN(test_first_fragment_without_upper_header_param_problem_3);
	RUN(test_fragment_timeout_sends_time_exceeded);
	RUN(test_atomic_fragment_delivered);
	RUN(test_ptb_lowers_pmtu_never_below_1280);
	RUN(test_integrator_owned_nd);
	RUN(test_mld_general_query_answered_within_max_delay);
	RUN(test_mld_specific_query_answered_for_its_group_only);
	RUN(test_mld_invalid_queries_dropped);
	RUN(test_mld_v1_query_answered_with_v1_reports);
	RUN(test_mld_v1_specific_query_answered_for_its_group_only);
	RUN(test_mld_v1_mode_ends_after_present_timeout);
	RUN(test_mld_v1_invalid_query_keeps_v2);
	RUN(test_redirect_followed_from_first_hop_router_only);
	return check_summary();
}
