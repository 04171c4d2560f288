/*
 * nd.c: Neighbor Discovery (RFC 4861) for a host: the neighbor cache with its
 * states and a bounded queue of packets waiting for resolution, NS/NA in and out,
 * Router Solicitation, Router Advertisement (default routers, on-link prefixes,
 * MTU, hop limit), SLAAC (RFC 4862 §5.5) and the DAD answers (§5.4.3-5.4.5), MLDv2
 * reports for our solicited-node groups (RFC 3810). Timers from ipk_ip6_timer.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#define ND_MAX_MCAST_SOLICIT 3u  /* RFC 4861 §10 */
#define ND_MAX_UCAST_SOLICIT 3u
#define ND_DELAY_FIRST_PROBE_NS (5ull * 1000000000ull)
#define ND_NS_PER_S 1000000000ull
#define ND_TWO_HOURS_S 7200u     /* RFC 4862 §5.5.3 e) */

static const uint8_t nd_all_nodes[16] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
static const uint8_t nd_all_routers[16] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

/* ------------------------------------------------------------- routing */

/* Do the first plen bits of a and b agree? */
static int nd_prefix_match(const uint8_t a[16], const uint8_t b[16], uint8_t plen)
{
	uint8_t n = (uint8_t)(plen / 8u), r = (uint8_t)(plen % 8u), mask;

	if (plen > 128 || ipk_memcmp(a, b, n) != 0)
		return 0;
	if (r == 0)
		return 1;
	mask = (uint8_t)(0xffu << (8u - r));
	return ((a[n] ^ b[n]) & mask) == 0;
}

/* RFC 4861 §5.2: link-local and on-link prefixes go direct, the rest to a
 * default router (the first live one: no round robin, §6.3.6 allows it). */
/* §5.2: the destination cache first: a Redirect's next hop for dst, if live. */
static int nd_redirected(const struct ipk_ctx *c, const uint8_t dst[16], uint8_t nh[16])
{
	int i;

	for (i = 0; i < IPK_ND_REDIRECTS; i++)
		if (c->ip6.redir[i].until > c->now && ipk_ip6_eq(c->ip6.redir[i].dst, dst)) {
			ipk_memcpy(nh, c->ip6.redir[i].nh, 16);
			return 1;
		}
	return 0;
}

int ipk_ip6_route(const struct ipk_ctx *c, const uint8_t dst[16], uint8_t nh[16])
{
	int i;

	if (ipk_ip6_is_linklocal(dst))
		goto direct;
	if (c->ip6.nredir && nd_redirected(c, dst, nh))
		return 1;
	for (i = 0; i < IPK_ND_PREFIXES; i++)
		if (c->ip6.pfx[i].until > c->now &&
		    nd_prefix_match(c->ip6.pfx[i].p, dst, c->ip6.pfx[i].plen))
			goto direct;
	for (i = 0; i < IPK_ND_ROUTERS; i++) {
		if (c->ip6.rtr[i].until > c->now) {
			ipk_memcpy(nh, c->ip6.rtr[i].ip, 16);
			return 1;
		}
	}
	return 0;
direct:
	ipk_memcpy(nh, dst, 16);
	return 1;
}

/* -------------------------------------------------------- neighbor cache */

static struct ipk_nd_entry *nd_find(struct ipk_ctx *c, const uint8_t ip[16])
{
	int i;

	for (i = 0; i < IPK_ND_ENTRIES; i++)
		if (c->ip6.nd[i].state != IPK_ND_FREE && ipk_memcmp(c->ip6.nd[i].ip, ip, 16) == 0)
			return &c->ip6.nd[i];
	return NULL;
}

/* Drop the packets waiting on e, counted as why. */
static void nd_queue_drop(struct ipk_ctx *c, struct ipk_nd_entry *e, enum ipk_drop why)
{
	while (e->q) {
		struct ipk_pb *pb = e->q;

		e->q = pb->next;
		ipk_drop_pkt(c, pb->pkt, why);
		ipk_pb_put(c, pb);
	}
	e->qlen = 0;
}

static void nd_free(struct ipk_ctx *c, struct ipk_nd_entry *e, enum ipk_drop why)
{
	c->ip6.gen++; /* the header cache may name e (ipk_nd_hc_tx) */
	nd_queue_drop(c, e, why);
	ipk_memset(e, 0, sizeof(*e));
}

/* A slot for ip: a free one, else the least recently used (RFC 4861 §7.3.1 leaves
 * garbage collection to the implementation; a flood of sources recycles the cache
 * instead of growing it). Counted in nd_evicted. */
static struct ipk_nd_entry *nd_alloc(struct ipk_ctx *c, const uint8_t ip[16])
{
	struct ipk_nd_entry *e = NULL;
	int i;

	for (i = 0; i < IPK_ND_ENTRIES; i++) {
		struct ipk_nd_entry *x = &c->ip6.nd[i];

		if (x->state == IPK_ND_FREE) {
			e = x;
			break;
		}
		if (!e || x->used < e->used)
			e = x;
	}
	if (e->state != IPK_ND_FREE) {
		c->cnt.nd_evicted++;
		nd_free(c, e, IPK_DROP_ND_QUEUE_FULL);
	}
	ipk_memcpy(e->ip, ip, 16);
	e->used = c->now;
	c->ip6.gen++;
	return e;
}

static void nd_arm(struct ipk_ctx *c, struct ipk_nd_entry *e, uint64_t t)
{
	e->t = t;
	ipk_ip6_arm(c, t);
}

/* Frame out to mac (pkt's IPv6 header filled). */
static void nd_tx(struct ipk_ctx *c, void *pkt, const uint8_t mac[6])
{
	ipk_link_eth_tx(c, pkt, mac, IPK_ETHERTYPE_IP6);
}

static void nd_flush_queue(struct ipk_ctx *c, struct ipk_nd_entry *e)
{
	while (e->q) {
		struct ipk_pb *pb = e->q;

		e->q = pb->next;
		nd_tx(c, pb->pkt, e->mac);
		ipk_pb_put(c, pb);
	}
	e->qlen = 0;
}

/* INCOMPLETE: hold pkt (at most IPK_ND_QLEN, RFC 4861 §7.2.2 asks for a small
 * queue; the oldest gives way, as Linux's unres_qlen). */
static int nd_enqueue(struct ipk_ctx *c, struct ipk_nd_entry *e, void *pkt)
{
	struct ipk_pb *pb, **tail;

	if (e->qlen >= IPK_ND_QLEN) {
		pb = e->q;
		e->q = pb->next;
		ipk_drop_pkt(c, pb->pkt, IPK_DROP_ND_QUEUE_FULL);
		ipk_pb_put(c, pb);
		e->qlen--;
	}
	pb = ipk_pb_get(c);
	if (!pb) {
		ipk_drop_pkt(c, pkt, IPK_DROP_NO_PB);
		return IPK_ENOMEM;
	}
	pb->pkt = pkt;
	pb->t = c->now;
	for (tail = &e->q; *tail; tail = &(*tail)->next)
		;
	*tail = pb;
	e->qlen++;
	return 0;
}

/* ops->nd_resolve: the integrator owns the table; the built-in cache then only
 * holds INCOMPLETE entries (queue and retries), freed once the address is known. */
static int nd_owned(const struct ipk_ctx *c) { return IPK_OPS(c)->nd_resolve != NULL; }

/* A binding learned for e's address: tell the integrator; an owned table keeps
 * no entry, so e's waiting packets go and e is freed. Returns 1 when e was freed. */
static int nd_learned(struct ipk_ctx *c, struct ipk_nd_entry *e, const uint8_t mac[6])
{
	if (IPK_OPS(c)->nd_learned)
		IPK_OPS(c)->nd_learned(e->ip, mac, IPK_OPQ(c));
	if (!nd_owned(c))
		return 0;
	ipk_memcpy(e->mac, mac, 6);
	nd_flush_queue(c, e);
	ipk_memset(e, 0, sizeof(*e));
	return 1;
}

int ipk_nd_output(struct ipk_ctx *c, void *pkt, const uint8_t nh[16])
{
	struct ipk_nd_entry *e;
	uint8_t src[16], mac[6];

	if (nd_owned(c) && IPK_OPS(c)->nd_resolve(nh, mac, IPK_OPQ(c))) {
		nd_tx(c, pkt, mac);
		return 0;
	}
	e = nd_find(c, nh);
	if (!e) { /* RFC 4861 §7.2.2: create INCOMPLETE, multicast an NS */
		e = nd_alloc(c, nh);
		e->state = IPK_ND_INCOMPLETE;
		e->probes = 1;
		nd_arm(c, e, c->now + c->ip6.retrans_ns);
		/* §7.2.2: the NS comes from the packet's own source when it is ours */
		ipk_memcpy(src, ipk_pkt_data(c, pkt) + c->l2_len + 8, 16);
		if (ipk_ip6_addr_find(c, src) < 0 && !ipk_ip6_src_select(c, nh, src)) {
			nd_free(c, e, IPK_DROP_NO_ROUTE);
			ipk_drop_pkt(c, pkt, IPK_DROP_NO_ROUTE);
			return IPK_EHOSTUNREACH;
		}
		ipk_nd_send_ns(c, nh, src, NULL);
	}
	e->used = c->now;
	if (e->state == IPK_ND_INCOMPLETE)
		return nd_enqueue(c, e, pkt);
	if (e->state == IPK_ND_STALE) { /* §7.3.3: use it, check in DELAY_FIRST_PROBE_TIME */
		e->state = IPK_ND_DELAY;
		nd_arm(c, e, c->now + ND_DELAY_FIRST_PROBE_NS);
	}
	nd_tx(c, pkt, e->mac);
	return 0;
}

/* ---------------------------------------------------- next-hop header cache */

/*
 * One destination's Ethernet header, as IPv4's next-hop cache (link.c): the
 * segments of a connection go out without ipk_ip6_route and the neighbour scan.
 * Kept only while the entry stays in the state it had, REACHABLE or DELAY (RFC
 * 4861 §7.3.3: both send to the cached address with no state change; a STALE
 * entry's first use starts DELAY, INCOMPLETE queues, PROBE goes the slow way), up
 * to that state's deadline (REACHABLE -> STALE, DELAY -> PROBE), and while no
 * route and no entry changed identity (gen); a MAC changed in place by an NA
 * (§7.2.5 Override) is caught by comparing it.
 */
int ipk_nd_hc_ok(const struct ipk_ctx *c, const uint8_t dst[16])
{
	const struct ipk_nd_entry *e = &c->ip6.nd[c->ip6.hc.nd];

	return c->now < c->ip6.hc.until && c->ip6.hc.gen == c->ip6.gen &&
	       e->state == c->ip6.hc.state && ipk_mac_eq(e->mac, c->ip6.hc.eth) &&
	       ipk_ip6_eq(dst, c->ip6.hc.dst);
}

int ipk_nd_hc_tx(struct ipk_ctx *c, void *pkt, const uint8_t dst[16])
{
	struct ipk_nd_entry *e = &c->ip6.nd[c->ip6.hc.nd];
	uint8_t *p;

	if (!ipk_nd_hc_ok(c, dst))
		return 0;
	e->used = c->now;
	p = ipk_pkt_data(c, pkt);
	ipk_memcpy(p, c->ip6.hc.eth, IPK_ETH_HLEN);
	/* the frame's length from the Payload Length ipk_ip6_output just wrote (RFC
	 * 8200 §3), chain or not: no walk of the chain to count it */
	ipk_link_tx_len(c, pkt, IPK_ETH_HLEN + IPK_IP6_HLEN + ipk_rd16(p + IPK_ETH_HLEN + 4));
	return 1;
}

static int nd_hc_state(const struct ipk_nd_entry *e)
{
	return e->state == IPK_ND_REACHABLE || e->state == IPK_ND_DELAY;
}

/* After a send through e: keep dst's header while e stays REACHABLE or DELAY and
 * ours (an integrator-owned table answers per packet, nd_resolve). */
static void nd_hc_fill(struct ipk_ctx *c, const struct ipk_nd_entry *e, const uint8_t dst[16])
{
	if (!nd_hc_state(e) || nd_owned(c) || c->l2_len != IPK_ETH_HLEN)
		return;
	c->ip6.hc.state = e->state;
	ipk_memcpy(c->ip6.hc.dst, dst, 16);
	ipk_memcpy(c->ip6.hc.eth, e->mac, 6);
	ipk_memcpy(c->ip6.hc.eth + 6, c->cfg.mac, 6);
	ipk_wr16(c->ip6.hc.eth + 12, IPK_ETHERTYPE_IP6);
	c->ip6.hc.nd = (uint8_t)(e - c->ip6.nd);
	c->ip6.hc.gen = c->ip6.gen;
	c->ip6.hc.until = e->t;
}

int ipk_nd_output_dst(struct ipk_ctx *c, void *pkt, const uint8_t nh[16], const uint8_t dst[16])
{
	struct ipk_nd_entry *e;

	if (nd_owned(c) || !(e = nd_find(c, nh)) || !nd_hc_state(e))
		return ipk_nd_output(c, pkt, nh);
	nd_hc_fill(c, e, dst);
	e->used = c->now;
	nd_tx(c, pkt, e->mac);
	return 0;
}

/* §7.2.3, §6.3.4: a link-layer address from an NS, RS or RA source option. New or
 * changed -> STALE (reachability not proven); the same -> left as it is. */
static void nd_learn(struct ipk_ctx *c, const uint8_t ip[16], const uint8_t mac[6])
{
	struct ipk_nd_entry *e = nd_find(c, ip);

	if (nd_owned(c)) {
		if (e)
			nd_learned(c, e, mac);
		else if (IPK_OPS(c)->nd_learned)
			IPK_OPS(c)->nd_learned(ip, mac, IPK_OPQ(c));
		return;
	}
	if (!e)
		e = nd_alloc(c, ip);
	else if (e->state != IPK_ND_INCOMPLETE && ipk_memcmp(e->mac, mac, 6) == 0)
		return;
	ipk_memcpy(e->mac, mac, 6);
	e->state = IPK_ND_STALE;
	e->t = IPK_NO_DEADLINE;
	nd_flush_queue(c, e);
	nd_learned(c, e, mac);
}

/* One entry's timer (§7.3.3): retransmit or give up, age REACHABLE to STALE,
 * DELAY to PROBE. Returns the entry's next deadline. */
static uint64_t nd_entry_timer(struct ipk_ctx *c, struct ipk_nd_entry *e, uint64_t now)
{
	uint8_t src[16];

	if (e->state == IPK_ND_FREE || e->t > now)
		return e->state == IPK_ND_FREE ? IPK_NO_DEADLINE : e->t;
	switch (e->state) {
	case IPK_ND_INCOMPLETE:
	case IPK_ND_PROBE:
		if (e->probes >= (e->state == IPK_ND_PROBE ? ND_MAX_UCAST_SOLICIT
		                                           : ND_MAX_MCAST_SOLICIT)) {
			nd_free(c, e, IPK_DROP_ND_TIMEOUT);
			return IPK_NO_DEADLINE;
		}
		break;
	case IPK_ND_REACHABLE: /* §7.3.3: ReachableTime passed without confirmation */
		e->state = IPK_ND_STALE;
		e->t = IPK_NO_DEADLINE;
		return e->t;
	case IPK_ND_DELAY:
		e->state = IPK_ND_PROBE;
		e->probes = 0;
		break;
	default:
		e->t = IPK_NO_DEADLINE;
		return e->t;
	}
	if (ipk_ip6_src_select(c, e->ip, src))
		ipk_nd_send_ns(c, e->ip, src, e->state == IPK_ND_PROBE ? e->mac : NULL);
	e->probes++;
	e->t = now + c->ip6.retrans_ns;
	return e->t;
}

/* Routers and prefixes whose lifetime ran out leave their lists (§6.3.5). */
static uint64_t nd_lists_timer(struct ipk_ctx *c, uint64_t now)
{
	uint64_t next = IPK_NO_DEADLINE;
	int i;

	for (i = 0; i < IPK_ND_ROUTERS; i++) {
		if (c->ip6.rtr[i].until != 0 && c->ip6.rtr[i].until <= now) {
			c->ip6.rtr[i].until = 0;
			c->ip6.gen++;
		}
		if (c->ip6.rtr[i].until != 0)
			next = IPK_MIN(next, c->ip6.rtr[i].until);
	}
	for (i = 0; i < IPK_ND_PREFIXES; i++) {
		if (c->ip6.pfx[i].until != 0 && c->ip6.pfx[i].until <= now) {
			c->ip6.pfx[i].until = 0;
			c->ip6.gen++;
		}
		if (c->ip6.pfx[i].until != 0)
			next = IPK_MIN(next, c->ip6.pfx[i].until);
	}
	return next;
}

uint64_t ipk_nd_timer(struct ipk_ctx *c, uint64_t now)
{
	uint64_t next = nd_lists_timer(c, now);
	int i;

	for (i = 0; i < IPK_ND_ENTRIES; i++)
		next = IPK_MIN(next, nd_entry_timer(c, &c->ip6.nd[i], now));
	return next;
}

/* ---------------------------------------------------------------- output */

/* Send the ND message of mlen bytes at l4 of out from src to dst with hop limit
 * 255 (§6.1, §7.1), checksummed; unicast to dst_mac when given. */
static void nd_send(struct ipk_ctx *c, void *out, const uint8_t src[16], const uint8_t dst[16],
                    uint32_t mlen, const uint8_t *dst_mac)
{
	struct ipk_ip6_hdr h;

	ipk_icmp6_csum_fill(ipk_pkt_data(c, out) + ipk_l4_off6(c), mlen, src, dst);
	c->cnt.nd_tx++;
	c->cnt.icmp6_tx++;
	if (!dst_mac) {
		ipk_ip6_output(c, out, src, dst, IPK_IPPROTO_ICMP6, mlen, IPK_ND_HOP_LIMIT);
		return;
	}
	ipk_memset(&h, 0, sizeof(h));
	h.plen = (uint16_t)mlen;
	h.next = IPK_IPPROTO_ICMP6;
	h.hlim = IPK_ND_HOP_LIMIT;
	ipk_memcpy(h.src, src, 16);
	ipk_memcpy(h.dst, dst, 16);
	ipk_ip6_emit(ipk_pkt_data(c, out) + c->l2_len, IPK_IP6_HLEN, &h);
	c->cnt.ip6_tx++;
	nd_tx(c, out, dst_mac);
}

/* An ND message: fixed part of m, then a link-layer option of ours (type lla, 0 =
 * none). */
static void nd_build_send(struct ipk_ctx *c, const struct ipk_nd_msg *m, uint8_t lla,
                          const uint8_t src[16], const uint8_t dst[16], const uint8_t *dst_mac)
{
	uint32_t cap = 24u + (lla ? 8u : 0u), n;
	uint8_t *p;
	void *out = ipk_ip6_alloc(c, cap, 1);

	if (!out)
		return;
	p = ipk_pkt_data(c, out) + ipk_l4_off6(c);
	n = ipk_nd_emit(p, cap, m);
	if (lla)
		n += ipk_nd_opt_lla_emit(p + n, cap - n, lla, c->cfg.mac);
	ipk_pkt_set_len(c, out, ipk_l4_off6(c) + n);
	nd_send(c, out, src, dst, n, dst_mac);
}

void ipk_nd_send_ns(struct ipk_ctx *c, const uint8_t target[16], const uint8_t *src,
                    const uint8_t *dst_mac)
{
	static const uint8_t any[16] = {0};
	struct ipk_nd_msg m;
	uint8_t dst[16];

	ipk_memset(&m, 0, sizeof(m));
	m.type = IPK_ICMP6_ND_NS;
	ipk_memcpy(m.target, target, 16);
	if (dst_mac)
		ipk_memcpy(dst, target, 16);
	else
		ipk_ip6_solicited_node(dst, target);
	/* §7.2.2 / RFC 4862 §5.4.2: DAD's NS comes from :: and carries no SLLA */
	nd_build_send(c, &m, src ? IPK_NDOPT_SLLA : 0, src ? src : any, dst, dst_mac);
}

static void nd_send_na(struct ipk_ctx *c, const uint8_t target[16], const uint8_t dst[16],
                       uint8_t flags)
{
	struct ipk_nd_msg m;

	ipk_memset(&m, 0, sizeof(m));
	m.type = IPK_ICMP6_ND_NA;
	m.flags = flags;
	ipk_memcpy(m.target, target, 16);
	/* §7.2.4: the target is the source; TLLA always (it was solicited or DAD) */
	nd_build_send(c, &m, IPK_NDOPT_TLLA, target, dst, NULL);
}

void ipk_nd_send_rs(struct ipk_ctx *c)
{
	static const uint8_t any[16] = {0};
	struct ipk_nd_msg m;
	uint8_t src[16];
	int have = ipk_ip6_src_select(c, nd_all_routers, src);

	ipk_memset(&m, 0, sizeof(m));
	m.type = IPK_ICMP6_ND_RS;
	/* §6.3.7: SLLA only from a real source address (§4.1) */
	nd_build_send(c, &m, have ? IPK_NDOPT_SLLA : 0, have ? src : any, nd_all_routers, NULL);
}

/* ipk_nd_send_mld: core/mld.c, with the answers to queries. */

/* ----------------------------------------------------------------- input */

/* RFC 4862 §5.4.5: another node holds (or is checking) a tentative address. */
static void nd_dad_conflict(struct ipk_ctx *c, int i)
{
	c->ip6.addr[i].state = IPK_A6_DUPLICATE;
	c->ip6.addr_gen++;
	c->ip6.addr[i].t = IPK_NO_DEADLINE;
	c->cnt.ip6_dad_conflicts++;
}

/* §7.2.3: an NS for one of our addresses. */
static void nd_ns_in(struct ipk_ctx *c, const struct ipk_rx6 *rx, const struct ipk_nd_msg *m)
{
	int i = ipk_ip6_addr_find(c, m->target), dad = ipk_ip6_is_unspecified(rx->ip.src);

	if (i < 0 || c->ip6.addr[i].state == IPK_A6_DUPLICATE)
		return;
	if (c->ip6.addr[i].state == IPK_A6_TENTATIVE) {
		/* RFC 4862 §5.4.3: someone else's DAD for it -> ours is a duplicate;
		 * other NS for a tentative address are ignored */
		if (dad)
			nd_dad_conflict(c, i);
		return;
	}
	if (dad) { /* §7.2.4: answer DAD to all-nodes, S clear */
		nd_send_na(c, m->target, nd_all_nodes, IPK_ND_NA_OVERRIDE);
		return;
	}
	if (m->opts.has_slla)
		nd_learn(c, rx->ip.src, m->opts.slla);
	nd_send_na(c, m->target, rx->ip.src, IPK_ND_NA_SOLICITED | IPK_ND_NA_OVERRIDE);
}

/* §7.2.5 when the entry was INCOMPLETE: the address arrives. */
static void nd_na_complete(struct ipk_ctx *c, struct ipk_nd_entry *e, const struct ipk_nd_msg *m)
{
	if (!m->opts.has_tlla || nd_learned(c, e, m->opts.tlla))
		return;
	ipk_memcpy(e->mac, m->opts.tlla, 6);
	e->probes = 0;
	if (m->flags & IPK_ND_NA_SOLICITED) {
		e->state = IPK_ND_REACHABLE;
		nd_arm(c, e, c->now + c->ip6.reachable_ns);
	} else {
		e->state = IPK_ND_STALE;
		e->t = IPK_NO_DEADLINE;
	}
	nd_flush_queue(c, e);
}

/* §7.2.5: an NA for a neighbor we know (entry not INCOMPLETE). Without Override a
 * different address only marks a REACHABLE entry STALE; with it (or with the same
 * address) the address is taken and S confirms reachability. */
static void nd_na_update(struct ipk_ctx *c, struct ipk_nd_entry *e, const struct ipk_nd_msg *m)
{
	int differs = m->opts.has_tlla && ipk_memcmp(e->mac, m->opts.tlla, 6) != 0;

	if (!(m->flags & IPK_ND_NA_OVERRIDE) && differs) {
		if (e->state == IPK_ND_REACHABLE) {
			e->state = IPK_ND_STALE;
			e->t = IPK_NO_DEADLINE;
		}
		return;
	}
	if (differs) {
		ipk_memcpy(e->mac, m->opts.tlla, 6);
		nd_learned(c, e, e->mac);
	}
	if (m->flags & IPK_ND_NA_SOLICITED) {
		e->state = IPK_ND_REACHABLE;
		e->probes = 0;
		nd_arm(c, e, c->now + c->ip6.reachable_ns);
	} else if (differs) {
		e->state = IPK_ND_STALE;
		e->t = IPK_NO_DEADLINE;
	}
	e->is_router = (m->flags & IPK_ND_NA_ROUTER) != 0;
}

static void nd_na_in(struct ipk_ctx *c, const struct ipk_nd_msg *m)
{
	int i = ipk_ip6_addr_find(c, m->target);
	struct ipk_nd_entry *e;

	if (i >= 0) { /* RFC 4862 §5.4.4: an NA for our tentative address */
		if (c->ip6.addr[i].state == IPK_A6_TENTATIVE)
			nd_dad_conflict(c, i);
		return;
	}
	e = nd_find(c, m->target);
	if (!e) /* §7.2.5: no entry -> silently discarded */
		return;
	if (e->state == IPK_ND_INCOMPLETE)
		nd_na_complete(c, e, m);
	else
		nd_na_update(c, e, m);
}

/* A slot in a lifetime list: the entry for key, else a free one; -1 when full. */
static int nd_router_slot(struct ipk_ctx *c, const uint8_t ip[16])
{
	int i, free_i = -1;

	for (i = 0; i < IPK_ND_ROUTERS; i++) {
		if (c->ip6.rtr[i].until != 0 && ipk_memcmp(c->ip6.rtr[i].ip, ip, 16) == 0)
			return i;
		if (c->ip6.rtr[i].until == 0 && free_i < 0)
			free_i = i;
	}
	return free_i;
}

static uint64_t nd_life(uint64_t now, uint32_t s)
{
	return s == 0xffffffffu ? UINT64_MAX : now + (uint64_t)s * ND_NS_PER_S;
}

/* §6.3.4: the router list. Lifetime 0 takes the router out. */
static void nd_ra_router(struct ipk_ctx *c, const struct ipk_rx6 *rx, const struct ipk_nd_msg *m)
{
	int i = nd_router_slot(c, rx->ip.src);

	if (i < 0 || c->ip6.rtr[i].until == UINT64_MAX) /* full, or the configured one */
		return;
	c->ip6.gen++; /* routes change: ipk_nd_hc_tx's entry goes */
	ipk_memcpy(c->ip6.rtr[i].ip, rx->ip.src, 16);
	c->ip6.rtr[i].until = m->router_lifetime ? nd_life(c->now, m->router_lifetime) : 0;
	if (c->ip6.rtr[i].until)
		ipk_ip6_arm(c, c->ip6.rtr[i].until);
}

/* §6.3.4: on-link prefixes (L flag). Link-local prefixes are ignored. */
static void nd_ra_onlink(struct ipk_ctx *c, const struct ipk_nd_prefix *pf)
{
	int i, free_i = -1;

	if (ipk_ip6_is_linklocal(pf->prefix) || pf->plen > 128)
		return;
	for (i = 0; i < IPK_ND_PREFIXES; i++) {
		struct ipk_ip6_prefix *x = &c->ip6.pfx[i];

		if (x->until != 0 && x->plen == pf->plen && nd_prefix_match(x->p, pf->prefix, pf->plen))
			break;
		if (x->until == 0 && free_i < 0)
			free_i = i;
	}
	if (i == IPK_ND_PREFIXES)
		i = free_i;
	if (i < 0 || c->ip6.pfx[i].until == UINT64_MAX)
		return;
	c->ip6.gen++; /* routes change: ipk_nd_hc_tx's entry goes */
	ipk_memcpy(c->ip6.pfx[i].p, pf->prefix, 16);
	c->ip6.pfx[i].plen = pf->plen;
	c->ip6.pfx[i].until = pf->valid ? nd_life(c->now, pf->valid) : 0;
	if (c->ip6.pfx[i].until)
		ipk_ip6_arm(c, c->ip6.pfx[i].until);
}

/* RFC 4862 §5.5.3 e): the "two-hour rule": a received valid lifetime shortens an
 * address's only down to two hours, so a forged RA cannot kill it. */
static void nd_slaac_update(struct ipk_ctx *c, struct ipk_ip6_laddr *l,
                            const struct ipk_nd_prefix *pf)
{
	uint64_t two_h = c->now + (uint64_t)ND_TWO_HOURS_S * ND_NS_PER_S;
	uint64_t rx_valid = nd_life(c->now, pf->valid);

	if (pf->valid > ND_TWO_HOURS_S || rx_valid > l->valid_until)
		l->valid_until = rx_valid;
	else if (l->valid_until > two_h)
		l->valid_until = two_h;
	l->pref_until = nd_life(c->now, pf->preferred);
	if (l->state == IPK_A6_DEPRECATED && l->pref_until > c->now) {
		l->state = IPK_A6_PREFERRED;
		c->ip6.addr_gen++;
	}
	ipk_ip6_arm(c, c->now); /* the address timer recomputes its deadline */
}

/* RFC 4862 §5.5.3: an autonomous prefix forms prefix + our interface identifier
 * (the same modified EUI-64 as the link-local address: §5.5.3 d, RFC 4291 App. A). */
static void nd_ra_slaac(struct ipk_ctx *c, const struct ipk_nd_prefix *pf)
{
	uint8_t a[16];
	int i;

	/* b) link-local, c) preferred > valid: ignore; d) only 64-bit identifiers */
	if (ipk_ip6_is_linklocal(pf->prefix) || pf->preferred > pf->valid || pf->plen != 64)
		return;
	ipk_memcpy(a, pf->prefix, 8);
	ipk_memcpy(a + 8, c->ip6.addr[0].a + 8, 8);
	i = ipk_ip6_addr_find(c, a);
	if (i >= 0) {
		if (c->ip6.addr[i].slaac && c->ip6.addr[i].state != IPK_A6_DUPLICATE)
			nd_slaac_update(c, &c->ip6.addr[i], pf);
		return;
	}
	if (pf->valid == 0)
		return;
	for (i = 1; i < IPK_IP6_ADDRS; i++) { /* slot 1 when no static address */
		if (c->ip6.addr[i].state == IPK_A6_FREE) {
			ipk_ip6_addr_add(c, i, a, 64, 1);
			c->ip6.addr[i].valid_until = nd_life(c->now, pf->valid);
			c->ip6.addr[i].pref_until = nd_life(c->now, pf->preferred);
			return;
		}
	}
}

/* §6.3.4: a valid RA from a router's link-local address. */
static void nd_ra_in(struct ipk_ctx *c, const struct ipk_rx6 *rx, const struct ipk_nd_msg *m)
{
	uint32_t i;

	nd_ra_router(c, rx, m);
	if (m->cur_hlim)
		c->ip6.hlim = m->cur_hlim;
	if (m->reachable)
		c->ip6.reachable_ns = (uint64_t)m->reachable * 1000000u;
	if (m->retrans)
		c->ip6.retrans_ns = (uint64_t)m->retrans * 1000000u;
	/* §6.3.4: an MTU option within [1280, the link's] is taken */
	if (m->opts.has_mtu && m->opts.mtu >= IPK_IP6_MIN_MTU && m->opts.mtu <= c->cfg.mtu)
		c->ip6.mtu = (uint16_t)m->opts.mtu;
	if (m->opts.has_slla)
		nd_learn(c, rx->ip.src, m->opts.slla);
	for (i = 0; i < m->opts.nprefix; i++) {
		if (m->opts.prefix[i].flags & IPK_ND_PFX_ONLINK)
			nd_ra_onlink(c, &m->opts.prefix[i]);
		if ((m->opts.prefix[i].flags & IPK_ND_PFX_AUTO) && c->cfg.ip6_slaac)
			nd_ra_slaac(c, &m->opts.prefix[i]);
	}
	c->ip6.rs_at = IPK_NO_DEADLINE; /* §6.3.7: an RA ends the solicitations */
	c->ip6.rs_left = 0;
}

/* Takes ownership of pkt. msg: the ICMPv6 message, checksum verified. */
/* RFC 4861 §8.1's last check (the others: ipk_nd_check): the Redirect comes from
 * the first-hop router we use for its destination; -1 when not. Then §8.3: dst
 * goes to the target (a router, or dst itself: on-link) from now on, the target's
 * link-layer address from the TLLA option learned as from an NS (STALE). The slot:
 * dst's own, else a free or expired one, else the one expiring first. */
static int nd_redirect_in(struct ipk_ctx *c, const struct ipk_rx6 *rx, const struct ipk_nd_msg *m)
{
	uint8_t nh[16];
	int i, k = -1;

	if (!ipk_ip6_route(c, m->dest, nh) || !ipk_ip6_eq(nh, rx->ip.src))
		return -1;
	for (i = 0; i < IPK_ND_REDIRECTS; i++) {
		if (c->ip6.redir[i].until > c->now && ipk_ip6_eq(c->ip6.redir[i].dst, m->dest)) {
			k = i;
			break;
		}
		if (k < 0 || c->ip6.redir[i].until < c->ip6.redir[k].until)
			k = i;
	}
	if (c->ip6.redir[k].until <= c->now && c->ip6.nredir < IPK_ND_REDIRECTS)
		c->ip6.nredir++;
	ipk_memcpy(c->ip6.redir[k].dst, m->dest, 16);
	ipk_memcpy(c->ip6.redir[k].nh, m->target, 16);
	c->ip6.redir[k].until = c->now + IPK_ND_REDIRECT_AGE_NS;
	if (m->opts.has_tlla)
		nd_learn(c, m->target, m->opts.tlla);
	c->ip6.gen++; /* routes change: ipk_nd_hc_tx's entry and the templates go */
	c->cnt.nd_redirects++;
	return 0;
}

void ipk_nd_input(struct ipk_ctx *c, void *pkt, const struct ipk_rx6 *rx, const uint8_t *msg)
{
	struct ipk_nd_msg m;

	if (ipk_nd_parse(msg, rx->l4_len, &m) < 0 || ipk_nd_check(&rx->ip, &m) != IPK_ND_OK) {
		ipk_drop_pkt(c, pkt, IPK_DROP_ND_INVALID);
		return;
	}
	c->cnt.nd_rx++;
	switch (m.type) {
	case IPK_ICMP6_ND_NS:
		nd_ns_in(c, rx, &m);
		break;
	case IPK_ICMP6_ND_NA:
		nd_na_in(c, &m);
		break;
	case IPK_ICMP6_ND_RA:
		nd_ra_in(c, rx, &m);
		break;
	case IPK_ICMP6_ND_REDIRECT:
		if (nd_redirect_in(c, rx, &m) < 0) {
			ipk_drop_pkt(c, pkt, IPK_DROP_ND_INVALID);
			return;
		}
		break;
	default: /* RS (§6.2.6: routers only) */
		break;
	}
	ipk_pkt_free(c, pkt);
}
