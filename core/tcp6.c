/*
 * TCP over IPv6 (issue 19): the table of IPv6 address pairs that lets one
 * connection table serve both families (internal.h, IPK_TCP6_MARK), the entry of
 * IPv6 segments, and ICMPv6 errors for TCP (RFC 8201 Packet Too Big, RFC 5461
 * soft errors).
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

/* ---------------------------------------------------------------- pairs */

size_t ipk_tcp6_mem_size(const struct ipk_config *cfg)
{
	size_t n = cfg->ip6_enable ? cfg->conn_hash_buckets : 0;

	if (n == 0)
		return 0;
	return (n + 1u) * sizeof(struct ipk_tcp6_pair) + n * sizeof(uint32_t);
}

void ipk_tcp6_init(struct ipk_ctx *c, void *mem)
{
	uint32_t n = c->cfg.ip6_enable ? c->cfg.conn_hash_buckets : 0, i;
	uint8_t *p = (uint8_t *)mem;

	c->tcp6_n = n;
	c->tcp6_free = IPK_TCP6_NONE;
	c->tcp6_last = IPK_TCP6_NONE;
	if (n == 0)
		return;
	c->tcp6_pairs = (struct ipk_tcp6_pair *)(void *)p;
	c->tcp6_heads = (uint32_t *)(void *)(p + (size_t)(n + 1u) * sizeof(struct ipk_tcp6_pair));
	for (i = n; i-- > 0;) {
		c->tcp6_heads[i] = IPK_TCP6_NONE;
		c->tcp6_pairs[i].next = c->tcp6_free;
		c->tcp6_free = i;
	}
}

/* Keyed by the context's hash seed, as the connection hash: a peer cannot choose
 * addresses that pile into one chain. */
static uint32_t tcp6_pair_hash(const struct ipk_ctx *c, const uint8_t l[16], const uint8_t p[16])
{
	uint32_t h = c->conn_hash_seed, i;

	for (i = 0; i < 16; i += 4) {
		h = (h ^ ipk_rd32(l + i)) * 0x9e3779b1u;
		h = (h ^ ipk_rd32(p + i)) * 0x85ebca77u;
		h ^= h >> 15;
	}
	return h & (c->tcp6_n - 1u);
}

static int tcp6_pair_is(const struct ipk_tcp6_pair *e, const uint8_t l[16], const uint8_t p[16])
{
	return ipk_ip6_eq(e->peer, p) && ipk_ip6_eq(e->local, l);
}

/* The index of the pair (l, p) some connection holds, IPK_TCP6_NONE when none. */
static uint32_t tcp6_pair_find(struct ipk_ctx *c, const uint8_t l[16], const uint8_t p[16])
{
	uint32_t i = c->tcp6_last;

	if (i < c->tcp6_n && c->tcp6_pairs[i].refs && tcp6_pair_is(&c->tcp6_pairs[i], l, p))
		return i;
	for (i = c->tcp6_heads[tcp6_pair_hash(c, l, p)]; i != IPK_TCP6_NONE;
	     i = c->tcp6_pairs[i].next) {
		if (tcp6_pair_is(&c->tcp6_pairs[i], l, p)) {
			c->tcp6_last = i;
			return i;
		}
	}
	return IPK_TCP6_NONE;
}

/* The pair (l, p), taken from the free list when no connection holds it yet (then
 * with 0 references: the caller holds it or gives it back, tcp6_pair_put0). */
static uint32_t tcp6_pair_get(struct ipk_ctx *c, const uint8_t l[16], const uint8_t p[16])
{
	uint32_t i = tcp6_pair_find(c, l, p), b;
	struct ipk_tcp6_pair *e;

	if (i != IPK_TCP6_NONE)
		return i;
	i = c->tcp6_free;
	if (i == IPK_TCP6_NONE) {
		ipk_drop(c, IPK_DROP_TCP6_PAIRS);
		return i;
	}
	e = &c->tcp6_pairs[i];
	c->tcp6_free = e->next;
	ipk_memcpy(e->local, l, 16);
	ipk_memcpy(e->peer, p, 16);
	e->refs = 0;
	e->ok = 0;
	b = tcp6_pair_hash(c, l, p);
	e->next = c->tcp6_heads[b];
	c->tcp6_heads[b] = i;
	return i;
}

/* Unlink pair i from its chain and free it. */
static void tcp6_pair_free(struct ipk_ctx *c, uint32_t i)
{
	struct ipk_tcp6_pair *e = &c->tcp6_pairs[i];
	uint32_t *pp = &c->tcp6_heads[tcp6_pair_hash(c, e->local, e->peer)];

	while (*pp != IPK_TCP6_NONE && *pp != i)
		pp = &c->tcp6_pairs[*pp].next;
	if (*pp == i)
		*pp = e->next;
	e->next = c->tcp6_free;
	c->tcp6_free = i;
	if (c->tcp6_last == i)
		c->tcp6_last = IPK_TCP6_NONE;
}

/* A pair tcp6_pair_get returned that nothing came to hold. */
static void tcp6_pair_put0(struct ipk_ctx *c, uint32_t i)
{
	if (i < c->tcp6_n && c->tcp6_pairs[i].refs == 0)
		tcp6_pair_free(c, i);
}

int ipk_tcp6_hold(struct ipk_ctx *c, struct ipk_tuple *t)
{
	uint32_t i = t->local_ip4_be;

	if (i == c->tcp6_n) { /* the scratch pair: the segment's addresses */
		i = tcp6_pair_get(c, c->tcp6_pairs[i].local, c->tcp6_pairs[i].peer);
		if (i == IPK_TCP6_NONE)
			return IPK_ENOMEM;
		t->local_ip4_be = i;
	}
	if (i >= c->tcp6_n)
		return IPK_EINVAL;
	c->tcp6_pairs[i].refs++;
	return IPK_OK;
}

void ipk_tcp6_put(struct ipk_ctx *c, uint32_t i)
{
	if (i < c->tcp6_n && c->tcp6_pairs[i].refs > 0 && --c->tcp6_pairs[i].refs == 0)
		tcp6_pair_free(c, i);
}

uint32_t ipk_tcp6_pair_take(struct ipk_ctx *c, const uint8_t l[16], const uint8_t p[16])
{
	return c->tcp6_n ? tcp6_pair_get(c, l, p) : IPK_TCP6_NONE;
}

uint32_t ipk_tcp6_pair_find(struct ipk_ctx *c, const uint8_t l[16], const uint8_t p[16])
{
	return c->tcp6_n ? tcp6_pair_find(c, l, p) : IPK_TCP6_NONE;
}

/* Pair i's addresses as ipk_ip6_addr_check judges them (-1: taken), the verdict
 * remembered while the address table stays as it was (ip6.addr_gen): the pair
 * names the segment's addresses, so the rule's inputs are the same. */
int ipk_tcp6_pair_addr_check(struct ipk_ctx *c, uint32_t i)
{
	struct ipk_tcp6_pair *e = &c->tcp6_pairs[i];
	int why;

	if (e->ok && e->ok_gen == c->ip6.addr_gen)
		return -1;
	why = ipk_ip6_addr_check(c, e->peer, e->local);
	if (why < 0) {
		e->ok = 1;
		e->ok_gen = c->ip6.addr_gen;
	}
	return why;
}

void ipk_tcp6_pair_unused(struct ipk_ctx *c, uint32_t i) { tcp6_pair_put0(c, i); }

/* A 32-bit fold of an IPv6 address, for hashes whose input is an ipk_tuple
 * (RFC 6528 ISN, SYN cookies): the whole address goes into it. */
static uint32_t tcp6_fold(const uint8_t a[16])
{
	return ipk_rd32(a) ^ ipk_rd32(a + 4) * 0x9e3779b1u ^ ipk_rd32(a + 8) * 0x85ebca77u ^
	       ipk_rd32(a + 12) * 0xc2b2ae3du;
}

void ipk_tcp6_key(const struct ipk_ctx *c, const struct ipk_tuple *t, struct ipk_tuple *k)
{
	const struct ipk_tcp6_pair *e;

	*k = *t;
	if (!ipk_tcp_is6(t) || !(e = ipk_tcp6_pair(c, t->local_ip4_be)))
		return;
	k->local_ip4_be = tcp6_fold(e->local);
	k->peer_ip4_be = tcp6_fold(e->peer);
}

int ipk_tcp6_atuple(const struct ipk_ctx *c, const struct ipk_tuple *t, struct ipk_atuple *a)
{
	const struct ipk_tcp6_pair *e;

	ipk_memset(a, 0, sizeof(*a));
	a->local_port_be = t->local_port_be;
	a->peer_port_be = t->peer_port_be;
	if (!ipk_tcp_is6(t)) {
		a->local.family = a->peer.family = IPK_AF_INET;
		ipk_memcpy(a->local.a, &t->local_ip4_be, 4);
		ipk_memcpy(a->peer.a, &t->peer_ip4_be, 4);
		return IPK_OK;
	}
	e = ipk_tcp6_pair(c, t->local_ip4_be);
	if (!e)
		return IPK_EINVAL;
	a->local.family = a->peer.family = IPK_AF_INET6;
	ipk_memcpy(a->local.a, e->local, 16);
	ipk_memcpy(a->peer.a, e->peer, 16);
	return IPK_OK;
}

/* ---------------------------------------------------------------- input */

/* RFC 8200 §8.1: the checksum over the IPv6 pseudo-header and the segment (the
 * chain, after reassembly or from LRO), unless the NIC verified it: its verdict
 * holds for a frame and for a segment it coalesced, never for a reassembled
 * datagram (it saw fragments only). 1 when right. */
static int tcp6_csum_ok(struct ipk_ctx *c, void *pkt, const struct ipk_rx6 *rx)
{
	int hw = rx->chained && !rx->lro ? 0 : ipk_ip6_rx_csum(c, pkt), odd = 0;
	uint32_t sum;

	if (hw)
		return hw > 0;
	if (!rx->chained && rx->l4_len <= IPK_TCP6_CSUM_INLINE_MAX) /* ip6.c: within the frame */
		return ipk_tcp6_csum_small(rx->ip.src, rx->ip.dst,
		                           ipk_pkt_data(c, pkt) + rx->l4_off, rx->l4_len) == 0;
	sum = ipk_csum_pseudo6(rx->ip.src, rx->ip.dst, IPK_IPPROTO_TCP, rx->l4_len);
	sum = ipk_csum_chain(c, pkt, rx->l4_off, rx->l4_len, sum, &odd);
	return ipk_csum_fold(sum) == 0;
}

/*
 * The segment goes to the IPv4 input's checks and state machine with dst_be the
 * index of its address pair (or the scratch pair's, filled with its addresses,
 * when no connection holds them) and src_be IPK_TCP6_MARK, so the lookup, the
 * listeners and every state rule are one code for both families. The pair is held
 * while the segment is processed: a connection it ends may be the pair's last
 * holder, and a callback of that end (tcp_closed opening another connection) could
 * otherwise take the freed slot before this segment's RST or reply names it.
 */
void ipk_tcp_input6(struct ipk_ctx *c, void *pkt, const struct ipk_rx6 *rx6)
{
	struct ipk_rx rx;
	uint32_t i;

	/* RFC 9293 §3.9.1 (and RFC 1122 §4.2.3.10): no TCP to a multicast address */
	if (rx6->dst_mcast) {
		ipk_drop_pkt(c, pkt, IPK_DROP_NOT_FOR_US);
		return;
	}
	if (rx6->l4_len < IPK_TCP_HLEN || !tcp6_csum_ok(c, pkt, rx6)) {
		ipk_drop_pkt(c, pkt, rx6->l4_len < IPK_TCP_HLEN ? IPK_DROP_TCP_MALFORMED :
		                                                   IPK_DROP_TCP_CSUM);
		return;
	}
	ipk_memset(&rx, 0, sizeof(rx));
	rx.l3_off = rx6->l3_off;
	rx.l4_off = rx6->l4_off;
	rx.l4_len = rx6->l4_len;
	rx.proto = IPK_IPPROTO_TCP;
	rx.tos = rx6->ip.tclass; /* RFC 3168 §5: the ECN field is its low two bits too */
	rx.ttl = rx6->ip.hlim;
	rx.l4_csum_ok = 1;
	rx.chained = rx6->chained;
	rx.reassembled = (uint8_t)(rx6->chained && !rx6->lro);
	rx.src_be = IPK_TCP6_MARK;
	i = tcp6_pair_find(c, rx6->ip.dst, rx6->ip.src);
	if (i == IPK_TCP6_NONE) {
		i = c->tcp6_n;
		ipk_memcpy(c->tcp6_pairs[i].local, rx6->ip.dst, 16);
		ipk_memcpy(c->tcp6_pairs[i].peer, rx6->ip.src, 16);
	} else {
		c->tcp6_pairs[i].refs++;
	}
	rx.dst_be = i;
	ipk_tcp_input(c, pkt, &rx);
	if (i != c->tcp6_n)
		ipk_tcp6_put(c, i);
}

/* ------------------------------------------------------------ ICMPv6 */

/*
 * RFC 8201 §4 and RFC 5927 §4.1: a Packet Too Big quoting a segment in flight
 * lowers the connection's MSS to the new path MTU (which ip6.c has already taken
 * into its table, never below 1280) less the headers, and what was in flight is
 * sent again at that size. Other errors are soft (RFC 5461 §4): the connection
 * goes on and retransmits by its own timers, except a port unreachable while
 * opening (RFC 1122 §4.2.3.9, as for IPv4: it cannot tear down live data).
 */
void ipk_tcp_icmp6_error(struct ipk_ctx *c, uint8_t type, uint8_t code,
                         const struct ipk_icmp6_quote *q)
{
	uint32_t i, mss;
	struct ipk_conn *conn;

	if (!c->tcp6_n || !q->has_ports || !q->has_seq)
		return;
	i = tcp6_pair_find(c, q->src, q->dst);
	if (i == IPK_TCP6_NONE)
		return;
	conn = ipk_tcp_lookup(c, i, q->sport_be, IPK_TCP6_MARK, q->dport_be);
	if (!conn || ipk_seq_lt(q->seq, conn->snd_una) || !ipk_seq_lt(q->seq, conn->snd_max))
		return;
	ipk_tcp_hold(conn);
	if (type == IPK_ICMP6_PKT_TOO_BIG) {
		mss = ipk_tcp_mss6(c, conn->t.local_ip4_be);
		if (conn->fl & IPK_TCPF_TS_OK)
			mss -= IPK_TCP_TS_LEN;
		if (mss < conn->mss) {
			conn->mss = mss;
			c->cnt.tcp6_pmtu_mss++;
			conn->snd_nxt = conn->snd_una; /* resend what was in flight */
			ipk_tcp_output(c, conn);
		}
	} else if (type == IPK_ICMP6_DST_UNREACH && code == 4 &&
	           conn->state == IPK_TCP_SYN_SENT) {
		ipk_tcp_destroy(c, conn, IPK_CLOSE_UNREACH);
	} else {
		c->cnt.tcp6_icmp_soft++;
	}
	ipk_tcp_release(c, conn);
}

/* The MSS for the pair's path: its path MTU less the IPv6 and TCP headers
 * (RFC 9293 §3.7.1, RFC 8201 §5.2). */
uint32_t ipk_tcp_mss6(const struct ipk_ctx *c, uint32_t pair)
{
	const struct ipk_tcp6_pair *e = ipk_tcp6_pair(c, pair);
	uint32_t mtu = e ? ipk_ip6_pmtu(c, e->peer) : IPK_IP6_MIN_MTU;

	return mtu - IPK_IP6_HLEN - IPK_TCP_HLEN;
}
