/*
 * iip's documented API on ipkit's core: the adapter (issue 20).
 *
 * The contract is in include/ipkit/compat/iip.h; docs/iip-compat.md says how an iip
 * application moves over. This file is one translation unit with the core: it binds
 * the core's ops table at compile time (IPK_OPS_STATIC) to wrappers that call the
 * application's iip_ops_* directly, so an application that includes this file gets
 * the same direct, inlinable calls iip's single-file build gives.
 *
 * Layout: state and helpers, the ipk_ops wrappers (the core calling the
 * application), the core itself, then the iip_* functions (the application calling
 * the core). Freestanding: <stdint.h>/<stddef.h> only, like the core.
 */
#include "ipkit/compat/iip.h"
#include <ipkit/core.h>

#ifndef IIP_COMPAT_PKT_BUF_SIZE
#define IIP_COMPAT_PKT_BUF_SIZE 2048u
#endif

#define IIPK_MAGIC 0x69697063706b6974ull /* "iipcpkit": the state was set up */
#define IIPK_RUN_KEY 0x6970697065746821ull /* running on Ethernet II (iip_run) */
#define IIPK_BATCH 32u     /* frames handed to ipk_run at once */
#define IIPK_RXQ 16u       /* delivered-packet records per connection (merged beyond) */
#define IIPK_SYNMAC 8u     /* recent SYNs' peer MACs (for passive opens' tcp_closed) */
#define IIPK_NEXT_US_IDLE 1000000u
#define IIPK_ETH_HLEN 14u
#define IIPK_ETH_IP4 0x0800u
#define IIPK_ETH_ARP 0x0806u
#define IIPK_L2_HLEN_MAX 256u /* longest non-Ethernet L2 header taken (iip.h "L2") */
#define IIPK_NB 64u        /* neighbours remembered on a non-Ethernet L2 (IPv4 -> address) */

/* ------------------------------------------------------------------ state */

/* What the adapter keeps per connection, after the core's own object. */
struct iipk_rxrec {
	uint32_t bytes, pkts; /* one delivered packet, or several merged when the ring is full */
};
struct iipk_ext {
	struct iipk_rxrec rx[IIPK_RXQ];
	uint16_t rx_head, rx_n;
	uint8_t peer_mac[6];
	uint8_t fin_wait;         /* peer's FIN in, our close waits for rxbuf_consumed */
};

struct iipk_synmac {
	uint32_t ip_be;
	uint16_t port_be;
	uint8_t mac[6];
};

/* A neighbour on a non-Ethernet L2 with addresses (iip.h "L2"): the engine runs raw
 * IPv4 there and has no ARP cache, so the adapter keeps this one. */
struct iipk_nb {
	uint32_t ip_be;
	uint8_t addr[6];
	uint8_t used;
};

struct iipk_state {
	uint64_t magic;
	uint64_t run_key;         /* IIPK_RUN_KEY: the engine runs on Ethernet II, iip_run's
	                           * usual path may go (one compare, no set-up test) */
	void *workspace;          /* the application's context pointer */
	void *opaque;             /* of the API call in progress */
	struct ipk_ctx *ctx;      /* NULL until the first call naming our address */
	uint64_t now;             /* of the outermost call in progress */
	uint64_t rng;
	void *cur;                /* frame the core is processing alone (ICMP, SYN) */
	void *pend_conns, *pend_pbs; /* objects given before the engine started */
	uint32_t depth;           /* API calls in progress (callbacks call in) */
	uint32_t ip4_be, last_arp_ip;
	uint16_t tso_mss, udp_nbound;
	uint8_t mac[6], last_arp_mac[6];
	uint8_t failed, verdict_given, synmac_next;
	uint8_t pre_classified;   /* iipk_run_other runs: frames were classified before
	                           * the engine saw them, iipk_rx_peek leaves them */
	/* A non-Ethernet L2 (iip.h "L2"): the engine runs raw IPv4; received frames lose
	 * their L2 header (increment_head), sent ones get it in a new packet. */
	uint8_t l2_foreign;       /* 0: Ethernet II, the engine frames it itself */
	uint8_t l2_alen;          /* iip_ops_l2_addr_len (0..6) */
	uint8_t l3off;            /* where the IPv4 header of a shown packet starts: 14 or 0 */
	uint16_t l2_hlen;         /* length of a header iip_ops_l2_hdr_craft writes */
	uint8_t l2_bcast[6];
	void *txm_pkt;            /* the frame whose offload marks wait for its re-framing */
	void *rx_p, *rx_c;        /* the received frame being processed and the engine's
	                           * clone of it (head past the L2 header) */
	uint16_t rx_hl;           /* that frame's L2 header length */
	void *shown_copy;         /* a re-framed copy an event showed (iipk_shown) */
	struct ipk_conn *pay_conn; /* in tcp_payload for this connection, its packet not yet
	                            * recorded nor consumed (pay_len bytes) */
	uint32_t pay_len;
	struct ipk_tx_meta txm;
	struct iipk_nb nb[IIPK_NB];
	struct iipk_synmac synmac[IIPK_SYNMAC];
	struct iip_compat_stats st;
	uint8_t listening[8192];  /* bitmap by local port: ipk_tcp_listen done */
	uint8_t udp_bound[8192];  /* bitmap by local port: ipk_udp_bind done */
};

#if defined(__GNUC__) || defined(__clang__)
#define IIPK_COLD __attribute__((noinline, cold))
#else
#define IIPK_COLD
#endif
#if defined(__GNUC__) || defined(__clang__)
#define IIPK_NOINLINE __attribute__((noinline))
#define IIPK_INLINE_ALWAYS __attribute__((always_inline)) inline
#else
#define IIPK_NOINLINE
#define IIPK_INLINE_ALWAYS
#endif
/* The calls an application makes per packet from its callbacks, inlined into them
 * in the unity build (the library keeps them as functions). */
#if !defined(IIP_COMPAT_LIBRARY) && (defined(__GNUC__) || defined(__clang__))
#define IIPK_API_HOT __attribute__((always_inline)) inline
#else
#define IIPK_API_HOT
#endif
#define IIPK_ALIGN8(x) (((x) + 7u) & ~(uintptr_t)7u)
#define IIPK_STATE_SIZE IIPK_ALIGN8(sizeof(struct iipk_state))

static void iipk_zero(void *p, size_t n)
{
	uint8_t *b = (uint8_t *)p;
	while (n--)
		*b++ = 0;
}

static int iipk_bit(const uint8_t *map, uint16_t port_be)
{
	return (map[port_be >> 3] >> (port_be & 7u)) & 1u;
}

static void iipk_bit_set(uint8_t *map, uint16_t port_be)
{
	map[port_be >> 3] = (uint8_t)(map[port_be >> 3] | (1u << (port_be & 7u)));
}

/* The state sits at the first 8-byte boundary of the workspace; the engine's
 * context follows it. A workspace never seen before (no magic) is set up here. */
IIPK_COLD static void iipk_state_init(struct iipk_state *s, void *workspace)
{
	iipk_zero(s, sizeof(*s));
	s->magic = IIPK_MAGIC;
	s->workspace = workspace;
}

static inline struct iipk_state *iipk_state(void *workspace)
{
	struct iipk_state *s = (struct iipk_state *)(void *)IIPK_ALIGN8((uintptr_t)workspace);

	if (s->magic != IIPK_MAGIC)
		iipk_state_init(s, workspace);
	return s;
}

/* The state for a call naming a connection: only a started engine hands out
 * handles, so the set-up test of iipk_state is not needed (a NULL handle is
 * refused before this). */
static inline struct iipk_state *iipk_state_conn(void *workspace)
{
	return (struct iipk_state *)(void *)IIPK_ALIGN8((uintptr_t)workspace);
}

#define IIPK_S(o) ((struct iipk_state *)(o))
#define IIPK_EXT(c) ((struct iipk_ext *)(void *)((uint8_t *)(c) + IIPK_ALIGN8(ipk_conn_size())))

/* iip's clock: seconds in t[0] (high) and t[1] (low), nanoseconds in t[2]. */
static uint64_t iipk_clock(void *opaque)
{
	uint32_t t[3] = {0, 0, 0};

	iip_ops_util_now_ns(t, opaque);
	return ((((uint64_t)t[0] << 32) | t[1]) * 1000000000ull) + t[2];
}

/* Enter an API call: callbacks calling in reuse the outer call's time. */
static uint64_t iipk_enter(struct iipk_state *s, void *opaque)
{
	if (s->depth++ == 0) {
		s->opaque = opaque;
		s->now = iipk_clock(opaque);
	}
	return s->now;
}

static void iipk_leave(struct iipk_state *s) { s->depth--; }

/* Enter a call naming a connection (iipk_begin without the start): 0 = the engine
 * is not running; 1 = called from a callback, inside a call in progress whose time
 * and opaque hold (nothing to undo); 2 = entered, iipk_leave when done. The depth
 * first: a call in progress means a running engine (only iipk_begin enters, after
 * the start; ctx is never cleared), so the usual call from a callback tests once. */
static inline int iipk_begin_conn(struct iipk_state *s, void *opq)
{
	if (s->depth)
		return 1;
	if (!s->ctx)
		return 0;
	(void)iipk_enter(s, opq);
	return 2;
}

/* Error to iip's uint16_t return: 0, or the positive errno (iip.h). */
static uint16_t iipk_rc(int rc) { return rc < 0 ? (uint16_t)-rc : 0u; }

/* --------------------------------------------------- packets for the core */

static void *iipk_pkt_alloc(void *o) { return iip_ops_pkt_alloc(IIPK_S(o)->opaque); }
static void iipk_pkt_free(void *p, void *o) { iip_ops_pkt_free(p, IIPK_S(o)->opaque); }
static uint8_t *iipk_pkt_data(void *p, void *o)
{
	return (uint8_t *)iip_ops_pkt_get_data(p, IIPK_S(o)->opaque);
}
static uint32_t iipk_pkt_len(void *p, void *o) { return iip_ops_pkt_get_len(p, IIPK_S(o)->opaque); }
/* Lengths fit 16 bits: no packet holds more than IIP_COMPAT_PKT_BUF_SIZE (< 64 KiB)
 * and the core never grows one past its buffer. */
static void iipk_pkt_set_len(void *p, uint32_t n, void *o)
{
	iip_ops_pkt_set_len(p, (uint16_t)n, IIPK_S(o)->opaque);
}
static void iipk_pkt_adj_head(void *p, uint32_t n, void *o)
{
	iip_ops_pkt_increment_head(p, (uint16_t)n, IIPK_S(o)->opaque);
}
static void iipk_pkt_trim_tail(void *p, uint32_t n, void *o)
{
	iip_ops_pkt_decrement_tail(p, (uint16_t)n, IIPK_S(o)->opaque);
}
static void *iipk_pkt_clone(void *p, void *o) { return iip_ops_pkt_clone(p, IIPK_S(o)->opaque); }
static void *iipk_pkt_next(void *p, void *o)
{
	return iip_ops_pkt_scatter_gather_chain_get_next(p, IIPK_S(o)->opaque);
}
/* iip has no "append only if absent": the core re-joins a chain it cut (which iip
 * cannot cut, below), so a tail already in the chain is left where it is. Chains are
 * a few packets long (header + payload). */
static void iipk_pkt_append(void *h, void *t, void *o)
{
	void *k;

	for (k = h; k; k = iip_ops_pkt_scatter_gather_chain_get_next(k, IIPK_S(o)->opaque))
		if (k == t)
			return;
	iip_ops_pkt_scatter_gather_chain_append(h, t, IIPK_S(o)->opaque);
}
/* iip's API has no way to detach a chain. The core cuts chains to free them packet
 * by packet (iip_ops_pkt_free frees one object, iip.h) and to show a received chain
 * (LRO) one packet per tcp_payload, joining it again after: returning the rest
 * without detaching serves both (the shown packet keeps its chain behind it, iip.h
 * "received chains"; the re-join finds the tail there and leaves it, iipk_pkt_append).
 * Reassembly stays within one buffer and UDP is never fragmented. */
static void *iipk_pkt_cut(void *p, void *o) { return iipk_pkt_next(p, o); }

static void *iipk_tx_l2(struct iipk_state *s, void *f);
static void iipk_marks(struct iipk_state *s, void *p, const struct ipk_tx_meta *m);

IIPK_INLINE_ALWAYS static void iipk_tx(void *p, void *o)
{
	struct iipk_state *s = IIPK_S(o);

	/* one call site of iip_ops_l2_push here, so the compiler inlines the
	 * application's */
	if (__builtin_expect(s->l2_foreign, 0) && !(p = iipk_tx_l2(s, p)))
		return;
	iip_ops_l2_push(p, s->opaque);
}
static void iipk_tx_flush(void *o) { iip_ops_l2_flush(IIPK_S(o)->opaque); }

/* Offload requests become iip's per-packet marks; on a non-Ethernet L2 they wait for
 * the re-framed packet (the engine's frame is copied behind the L2 header, iipk_tx_l2,
 * right after this call). */
static void iipk_tx_offload(void *p, const struct ipk_tx_meta *m, void *o)
{
	struct iipk_state *s = IIPK_S(o);

	if (__builtin_expect(s->l2_foreign, 0)) {
		s->txm_pkt = p;
		s->txm = *m;
		return;
	}
	iipk_marks(s, p, m);
}

/* The marks of m on p; the TSO segment size is exposed for the duration of the mark
 * (iip_compat_tso_mss). */
static void iipk_marks(struct iipk_state *s, void *p, const struct ipk_tx_meta *m)
{

	if (m->flags & IPK_TXOFF_IP4_CSUM)
		iip_ops_nic_offload_ip4_tx_checksum_mark(p, s->opaque);
	if (m->flags & IPK_TXOFF_TCP_CSUM)
		iip_ops_nic_offload_tcp_tx_checksum_mark(p, s->opaque);
	if (m->flags & IPK_TXOFF_UDP_CSUM)
		iip_ops_nic_offload_udp_tx_checksum_mark(p, s->opaque);
	if (m->flags & IPK_TXOFF_TSO) {
		s->tso_mss = m->mss;
		iip_ops_nic_offload_tcp_tx_tso_mark(p, s->opaque);
		s->tso_mss = 0;
	}
}

/* Received checksum verdicts from iip's per-packet calls (0 = bad). Only the
 * features the application declared are asked; the rest stays "unknown" and the core
 * checks in software. The protocol byte is read only from a frame long enough. */
static uint32_t iipk_rx_csum(void *p, void *o)
{
	struct iipk_state *s = IIPK_S(o);
	uint32_t r = 0;
	const uint8_t *d;
	void *q = p; /* the packet the NIC's verdict is on: on a non-Ethernet L2 the
	              * received frame, not the engine's clone of it */

	if (__builtin_expect(s->l2_foreign, 0) && p == s->rx_c)
		q = s->rx_p;
	if (iip_ops_nic_feature_offload_ip4_rx_checksum(s->opaque))
		r |= iip_ops_nic_offload_ip4_rx_checksum(q, s->opaque) ? IPK_RXCSUM_IP4_GOOD
		                                                        : IPK_RXCSUM_IP4_BAD;
	if (iip_ops_pkt_get_len(p, s->opaque) < s->l3off + 20u)
		return r;
	d = (const uint8_t *)iip_ops_pkt_get_data(p, s->opaque) + s->l3off;
	if (d[9] == 6u && iip_ops_nic_feature_offload_tcp_rx_checksum(s->opaque))
		r |= iip_ops_nic_offload_tcp_rx_checksum(q, s->opaque) ? IPK_RXCSUM_L4_GOOD
		                                                       : IPK_RXCSUM_L4_BAD;
	else if (d[9] == 17u &&
	         iip_ops_nic_feature_offload_udp_rx_checksum(s->opaque))
		r |= iip_ops_nic_offload_udp_rx_checksum(q, s->opaque) ? IPK_RXCSUM_L4_GOOD
		                                                       : IPK_RXCSUM_L4_BAD;
	return r;
}

/* iip gives no randomness: xorshift64* seeded from the clock and the workspace
 * address at start (ephemeral ports, IPv4 IDs, ISN offsets). */
static uint32_t iipk_random(void *o)
{
	struct iipk_state *s = IIPK_S(o);

	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return (uint32_t)((s->rng * 0x2545f4914f6cdd1dull) >> 32);
}

/* ------------------------------------------------------- TCP event wrappers */

static void iipk_wr32(uint8_t *p, uint32_t v_be) { __builtin_memcpy(p, &v_be, 4); }
static void iipk_wr16(uint8_t *p, uint16_t v_be) { __builtin_memcpy(p, &v_be, 2); }

/* RFC 791 header checksum of the 20-byte header at h. */
static void iipk_ip4_csum(uint8_t *h)
{
	uint32_t sum = 0;
	int i;

	for (i = 0; i < 20; i += 2)
		sum += ((uint32_t)h[i] << 8) | h[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffffu) + (sum >> 16);
	sum = ~sum & 0xffffu;
	h[10] = (uint8_t)(sum >> 8);
	h[11] = (uint8_t)sum;
}

/* A header-only frame from the peer to us with the connection's addresses and the
 * given TCP flags: what tcp_accepted / tcp_connected show (iip.h). NULL (counted)
 * when no packet is free. */
static void *iipk_synth(struct iipk_state *s, struct ipk_conn *c, uint8_t flags)
{
	struct ipk_tuple t;
	void *p = iip_ops_pkt_alloc(s->opaque);
	uint8_t *d, ethtype[2] = {0x08, 0x00};
	uint16_t hl, et;

	if (!p || ipk_tcp_tuple(c, &t) != IPK_OK) {
		if (p)
			iip_ops_pkt_free(p, s->opaque);
		s->st.synth_failed++;
		return NULL;
	}
	iip_ops_pkt_set_len(p, (uint16_t)((s->l2_foreign ? s->l2_hlen : IIPK_ETH_HLEN) + 40u),
	                    s->opaque);
	__builtin_memcpy(&et, ethtype, 2);
	iip_ops_l2_hdr_craft(p, IIPK_EXT(c)->peer_mac, s->mac, et, s->opaque);
	hl = iip_ops_l2_hdr_len(p, s->opaque);
	iip_ops_pkt_set_len(p, (uint16_t)(hl + 40u), s->opaque);
	d = (uint8_t *)iip_ops_pkt_get_data(p, s->opaque) + hl;
	iipk_zero(d, 40);
	d[0] = 0x45;
	d[3] = 40;
	d[8] = 64;
	d[9] = 6;
	iipk_wr32(d + 12, t.peer_ip4_be);
	iipk_wr32(d + 16, t.local_ip4_be);
	iipk_ip4_csum(d);
	iipk_wr16(d + 20, t.peer_port_be);
	iipk_wr16(d + 22, t.local_port_be);
	d[32] = 5u << 4;
	d[33] = flags;
	return p;
}

/* Free a packet and the chain behind it, object by object (iip.h: pkt_free frees
 * one object). */
static void iipk_free_chain(struct iipk_state *s, void *p)
{
	while (p) {
		void *n = iip_ops_pkt_scatter_gather_chain_get_next(p, s->opaque);

		iip_ops_pkt_free(p, s->opaque);
		p = n;
	}
}

/* ------------------------------------------- a non-Ethernet L2 (iip.h "L2") */

static struct iipk_nb *iipk_nb_slot(struct iipk_state *s, uint32_t ip_be)
{
	return &s->nb[(uint32_t)(ip_be * 2654435761u) >> 26]; /* IIPK_NB = 64 */
}

/* Remember ip's L2 address (direct-mapped: a collision replaces the older one). */
static void iipk_nb_set(struct iipk_state *s, uint32_t ip_be, const uint8_t *addr)
{
	struct iipk_nb *e = iipk_nb_slot(s, ip_be);

	e->ip_be = ip_be;
	iipk_zero(e->addr, sizeof(e->addr));
	__builtin_memcpy(e->addr, addr, s->l2_alen);
	e->used = 1;
}

static const uint8_t *iipk_nb_get(struct iipk_state *s, uint32_t ip_be)
{
	const struct iipk_nb *e = iipk_nb_slot(s, ip_be);

	return e->used && e->ip_be == ip_be ? e->addr : NULL;
}

/* A frame of the engine (raw IPv4, maybe a chain) onto the application's L2: a new
 * packet with the L2 header (iip_ops_l2_hdr_craft) and the first packet's bytes
 * copied behind it (the one copy; the payload packets of a chain follow as they
 * are), the marks the engine asked for on it; returned for iip_ops_l2_push (NULL:
 * dropped, counted). The engine's first packet object is freed (one object, iip.h).
 * The destination address is the neighbour's the adapter knows for the IPv4
 * destination, else broadcast (counted). */
IIPK_NOINLINE static void *iipk_tx_l2(struct iipk_state *s, void *f)
{
	static const uint8_t ethtype[2] = {0x08, 0x00};
	const uint8_t *d = (const uint8_t *)iip_ops_pkt_get_data(f, s->opaque), *a;
	uint32_t flen = iip_ops_pkt_get_len(f, s->opaque), hl = s->l2_hlen, ip_be;
	void *rest = iip_ops_pkt_scatter_gather_chain_get_next(f, s->opaque);
	int marked = s->txm_pkt == f;
	uint8_t dst[6];
	uint16_t et;
	void *q;

	s->txm_pkt = NULL;
	if (hl == 0) { /* no L2 header at all (raw IPv4): nothing to re-frame */
		if (marked)
			iipk_marks(s, f, &s->txm);
		return f;
	}
	q = iip_ops_pkt_alloc(s->opaque);
	iipk_zero(dst, sizeof(dst));
	if (q && flen >= 20u && hl + flen <= IIP_COMPAT_PKT_BUF_SIZE) {
		if (s->l2_alen) {
			__builtin_memcpy(&ip_be, d + 16, 4);
			a = iipk_nb_get(s, ip_be);
			if (!a) {
				a = s->l2_bcast;
				s->st.l2_no_addr++;
			}
			__builtin_memcpy(dst, a, 6);
		}
		iip_ops_pkt_set_len(q, (uint16_t)(hl + flen), s->opaque);
		__builtin_memcpy(&et, ethtype, 2);
		iip_ops_l2_hdr_craft(q, s->mac, dst, et, s->opaque);
		hl = iip_ops_l2_hdr_len(q, s->opaque);
	}
	if (!q || flen < 20u || hl + flen > IIP_COMPAT_PKT_BUF_SIZE) {
		if (q)
			iip_ops_pkt_free(q, s->opaque);
		s->st.l2_tx_failed++;
		iipk_free_chain(s, f);
		return NULL;
	}
	iip_ops_pkt_set_len(q, (uint16_t)(hl + flen), s->opaque);
	__builtin_memcpy((uint8_t *)iip_ops_pkt_get_data(q, s->opaque) + hl, d, flen);
	iip_ops_pkt_free(f, s->opaque);
	if (rest)
		iip_ops_pkt_scatter_gather_chain_append(q, rest, s->opaque);
	if (marked)
		iipk_marks(s, q, &s->txm);
	return q;
}

/* An ARP packet (RFC 826) through iip's L2 callbacks: a request to broadcast (tha
 * NULL) or a reply to l2dst. Addresses of iip_ops_arp_lhw bytes (at most 6). */
static void iipk_arp_send(struct iipk_state *s, uint8_t op, const uint8_t htype[2],
                          const uint8_t *l2dst, const uint8_t *tha, uint32_t tpa_be)
{
	static const uint8_t ethtype[2] = {0x08, 0x06};
	uint32_t al = iip_ops_arp_lhw(s->opaque), n;
	uint8_t dst[6], *d;
	uint16_t hl, et;
	void *p = iip_ops_pkt_alloc(s->opaque);

	if (!p)
		return;
	if (al > 6u)
		al = 6u;
	n = 8u + 2u * al + 8u;
	__builtin_memcpy(dst, l2dst, 6);
	iip_ops_pkt_set_len(p, (uint16_t)((s->l2_foreign ? s->l2_hlen : IIPK_ETH_HLEN) + n),
	                    s->opaque);
	__builtin_memcpy(&et, ethtype, 2);
	iip_ops_l2_hdr_craft(p, s->mac, dst, et, s->opaque);
	hl = iip_ops_l2_hdr_len(p, s->opaque);
	iip_ops_pkt_set_len(p, (uint16_t)(hl + n), s->opaque);
	d = (uint8_t *)iip_ops_pkt_get_data(p, s->opaque) + hl;
	iipk_zero(d, n);
	d[0] = htype[0];
	d[1] = htype[1];
	d[2] = 0x08; /* protocol IPv4 */
	d[4] = (uint8_t)al;
	d[5] = iip_ops_arp_lproto(s->opaque);
	d[7] = op;
	__builtin_memcpy(d + 8, s->mac, al);
	iipk_wr32(d + 8 + al, s->ip4_be);
	if (tha)
		__builtin_memcpy(d + 12 + al, tha, al);
	iipk_wr32(d + 12 + 2 * al, tpa_be);
	iip_ops_l2_push(p, s->opaque);
	iip_ops_l2_flush(s->opaque);
}

/* A received ARP frame on a non-Ethernet L2 with addresses (the engine, on raw
 * IPv4, has no ARP): a request for our address is answered and its sender
 * remembered; a reply is shown to iip_ops_arp_reply (the whole frame) and its sender
 * remembered. Anything malformed is counted. Frees p. */
static void iipk_arp_in(struct iipk_state *s, void *p, uint32_t hl, uint32_t len)
{
	const uint8_t *d = (const uint8_t *)iip_ops_pkt_get_data(p, s->opaque) + hl;
	uint32_t al = s->l2_alen, spa, tpa;

	if (!al || len < hl + 16u + 2u * al || d[2] != 0x08 || d[3] != 0 || d[4] != al ||
	    d[5] != 4 || d[6] != 0 || (d[7] != 1 && d[7] != 2)) {
		s->st.l2_dropped++;
		iip_ops_pkt_free(p, s->opaque);
		return;
	}
	__builtin_memcpy(&spa, d + 8 + al, 4);
	__builtin_memcpy(&tpa, d + 12 + 2 * al, 4);
	if (d[7] == 2) {
		iip_ops_arp_reply(s->workspace, p, s->opaque);
		iipk_nb_set(s, spa, d + 8);
	} else if (tpa == s->ip4_be) {
		iipk_nb_set(s, spa, d + 8);
		iipk_arp_send(s, 2, d, d + 8, d + 8, spa);
	}
	iip_ops_pkt_free(p, s->opaque);
}

/* The packet an event shows for the engine's packet c on a non-Ethernet L2: the
 * received frame when c is its clone (*hl its L2 header length); else (data the
 * engine kept: out of order, reassembled) a copy of c behind an L2 header crafted
 * from the peer's address (freed at the next such copy or when iip_run ends, after
 * the event in any case); c itself, from its IPv4 header, when no packet is free
 * (counted). */
IIPK_NOINLINE static void *iipk_shown(struct iipk_state *s, void *c, uint32_t *hl)
{
	static const uint8_t ethtype[2] = {0x08, 0x00};
	const uint8_t *d = (const uint8_t *)iip_ops_pkt_get_data(c, s->opaque), *a;
	uint32_t len = iip_ops_pkt_get_len(c, s->opaque), ip_be, h = s->l2_hlen;
	uint8_t src[6];
	uint16_t et;
	void *p;

	*hl = 0;
	if (c == s->rx_c) {
		*hl = s->rx_hl;
		return s->rx_p;
	}
	if (s->shown_copy) {
		iip_ops_pkt_free(s->shown_copy, s->opaque);
		s->shown_copy = NULL;
	}
	p = h + len <= IIP_COMPAT_PKT_BUF_SIZE && len >= 20u ? iip_ops_pkt_alloc(s->opaque) : NULL;
	if (p) {
		iipk_zero(src, sizeof(src));
		__builtin_memcpy(&ip_be, d + 12, 4);
		if (s->l2_alen && (a = iipk_nb_get(s, ip_be)) != NULL)
			__builtin_memcpy(src, a, 6);
		iip_ops_pkt_set_len(p, (uint16_t)(h + len), s->opaque);
		__builtin_memcpy(&et, ethtype, 2);
		iip_ops_l2_hdr_craft(p, src, s->mac, et, s->opaque);
		h = iip_ops_l2_hdr_len(p, s->opaque);
		if (h + len > IIP_COMPAT_PKT_BUF_SIZE) {
			iip_ops_pkt_free(p, s->opaque);
			p = NULL;
		}
	}
	if (!p) {
		s->st.l2_shown_raw++;
		return c;
	}
	iip_ops_pkt_set_len(p, (uint16_t)(h + len), s->opaque);
	__builtin_memcpy((uint8_t *)iip_ops_pkt_get_data(p, s->opaque) + h, d, len);
	*hl = h;
	s->shown_copy = p;
	return p;
}

/* The connection is gone: its records go (sent packets not yet acknowledged were
 * the core's, which freed them with its queues). */
static void iipk_ext_reset(struct iipk_state *s, struct iipk_ext *e)
{
	(void)s;
	iipk_zero(e, sizeof(*e));
}

/* Peer MAC of a recent SYN from ip:port (zeros when not seen). */
static void iipk_synmac_find(struct iipk_state *s, const struct ipk_tuple *t, uint8_t mac[6])
{
	unsigned i;

	for (i = 0; i < IIPK_SYNMAC; i++)
		if (s->synmac[i].ip_be == t->peer_ip4_be && s->synmac[i].port_be == t->peer_port_be) {
			__builtin_memcpy(mac, s->synmac[i].mac, 6);
			return;
		}
}

/* The SYN was already shown to iip_ops_tcp_accept when it opened the port; later
 * SYNs are decided here, on the frame being processed (iip.h: "Listening"). */
static int iipk_tcp_accept(struct ipk_ctx *ctx, const struct ipk_tuple *t, void *o)
{
	struct iipk_state *s = IIPK_S(o);

	(void)ctx;
	(void)t;
	if (s->verdict_given) {
		s->verdict_given = 0;
		return 1;
	}
	if (s->cur)
		return iip_ops_tcp_accept(s->workspace, s->cur, s->opaque) != 0;
	return 1; /* a SYN-cookie's returning ACK: the SYN was accepted then */
}

static void *iipk_tcp_accepted(struct ipk_ctx *ctx, struct ipk_conn *c, void *o)
{
	struct iipk_state *s = IIPK_S(o);
	struct ipk_tuple t;
	void *p, *u;

	(void)ctx;
	if (ipk_tcp_tuple(c, &t) == IPK_OK)
		iipk_synmac_find(s, &t, IIPK_EXT(c)->peer_mac);
	p = iipk_synth(s, c, 0x02);
	u = iip_ops_tcp_accepted(s->workspace, c, p, s->opaque);
	if (p)
		iip_ops_pkt_free(p, s->opaque);
	return u;
}

static void iipk_tcp_connected(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *o)
{
	struct iipk_state *s = IIPK_S(o);
	void *p = iipk_synth(s, c, 0x12);

	(void)ctx;
	(void)user;
	ipk_tcp_set_user(c, iip_ops_tcp_connected(s->workspace, c, p, s->opaque));
	if (p)
		iip_ops_pkt_free(p, s->opaque);
}

/* Record one delivered packet of `len` bytes for iip_tcp_rxbuf_consumed. */
static void iipk_rx_push(struct iipk_ext *e, uint32_t len)
{
	struct iipk_rxrec *r;

	if (e->rx_n < IIPK_RXQ) {
		r = &e->rx[(e->rx_head + e->rx_n) % IIPK_RXQ];
		r->bytes = len;
		r->pkts = 1;
		e->rx_n++;
		return;
	}
	/* Full: the newest record takes it; its bytes are released when all its packets
	 * are consumed (never earlier than the application said). */
	r = &e->rx[(e->rx_head + IIPK_RXQ - 1u) % IIPK_RXQ];
	r->bytes += len;
	r->pkts++;
}

/* tcp_payload on a non-Ethernet L2: the frame shown whole (iipk_shown), *off moved
 * past its L2 header. */
IIPK_NOINLINE static void *iipk_shown_off(struct iipk_state *s, void *pkt, uint32_t *off)
{
	uint32_t hl;
	void *p = iipk_shown(s, pkt, &hl);

	*off += hl;
	return p;
}

IIPK_INLINE_ALWAYS static void iipk_tcp_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                             uint32_t off, uint32_t len, void *o)
{
	struct iipk_state *s = IIPK_S(o);
	uint32_t plen;

	if (__builtin_expect(!pkt || s->l2_foreign, 0)) {
		if (!pkt) {
			/* End of stream: close our side once the application has consumed
			 * every packet delivered (iip.h): data it still holds may yet be
			 * answered. ENOTCONN when the application closed first is fine. */
			if (IIPK_EXT(c)->rx_n)
				IIPK_EXT(c)->fin_wait = 1;
			else
				(void)ipk_tcp_close(ctx, c, s->now);
			return;
		}
		pkt = iipk_shown_off(s, pkt, &off);
	}
	/* The packet is recorded for iip_tcp_rxbuf_consumed only if the callback does
	 * not consume it at once (the usual echo does: no ring then). */
	s->pay_conn = c;
	s->pay_len = len;
	plen = iip_ops_pkt_get_len(pkt, s->opaque);
	iip_ops_tcp_payload(s->workspace, c, pkt, user, (uint16_t)off,
	                    (uint16_t)(plen - off - len), s->opaque);
	if (s->pay_conn) {
		s->pay_conn = NULL;
		iipk_rx_push(IIPK_EXT(c), len);
	}
}

/* tcp_acked: the core shows each wholly acknowledged iip_tcp_send packet, once, in
 * send order, where the application may be called (core.h tcp_acked_pkt); the
 * packet is ours from the call on, and iip's stack frees it after the callback. */
static void iipk_tcp_acked_pkt(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                               void *o)
{
	struct iipk_state *s = IIPK_S(o);

	(void)ctx;
	iip_ops_tcp_acked(s->workspace, c, pkt, user, s->opaque);
	do { /* iipk_free_chain without its first test: the core shows no NULL */
		void *n = iip_ops_pkt_scatter_gather_chain_get_next(pkt, s->opaque);

		iip_ops_pkt_free(pkt, s->opaque);
		pkt = n;
	} while (pkt);
}

static void iipk_tcp_closed(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
                            enum ipk_close_reason why, void *o)
{
	struct iipk_state *s = IIPK_S(o);
	struct iipk_ext *e = IIPK_EXT(c);
	struct ipk_tuple t;

	(void)ctx;
	(void)why;
	if (s->pay_conn == c) /* closed from inside its tcp_payload */
		s->pay_conn = NULL;
	if (ipk_tcp_tuple(c, &t) != IPK_OK)
		iipk_zero(&t, sizeof(t));
	iip_ops_tcp_closed(c, s->mac, t.local_ip4_be, t.local_port_be, e->peer_mac, t.peer_ip4_be,
	                   t.peer_port_be, user, s->opaque);
	iipk_ext_reset(s, e);
}

/* ------------------------------------------------- UDP, ICMP event wrappers */

static void iipk_udp_recv(struct ipk_ctx *ctx, const struct ipk_tuple *t, void *pkt,
                          uint32_t off, uint32_t len, void *o)
{
	struct iipk_state *s = IIPK_S(o);
	uint32_t hl;

	(void)ctx;
	(void)t;
	(void)off;
	(void)len;
	if (s->l2_foreign)
		pkt = iipk_shown(s, pkt, &hl);
	iip_ops_udp_payload(s->workspace, pkt, s->opaque);
}

static void iipk_icmp_reply(struct ipk_ctx *ctx, uint32_t from_be, uint16_t id_be,
                            uint16_t seq_be, uint32_t len, void *o)
{
	struct iipk_state *s = IIPK_S(o);

	(void)ctx;
	(void)from_be;
	(void)id_be;
	(void)seq_be;
	(void)len;
	if (s->cur)
		iip_ops_icmp_reply(s->workspace, s->cur, s->opaque);
}

/* iip_run's usual path hands every frame to the engine untested; the engine calls
 * this for each one its established-TCP fast path does not take (below). */
static void iipk_rx_peek(struct ipk_ctx *ctx, void *pkt, void *o);

static const struct ipk_ops iipk_ops = {
	iipk_pkt_alloc, iipk_pkt_free, iipk_pkt_data, iipk_pkt_len, iipk_pkt_set_len,
	iipk_pkt_adj_head, iipk_pkt_trim_tail, iipk_pkt_clone, iipk_pkt_append, iipk_pkt_next,
	iipk_pkt_cut, iipk_tx, iipk_tx_flush, iipk_tx_offload, iipk_rx_csum, iipk_random,
	NULL /* isn_hash: random() */, NULL /* arp_resolve: the core's cache */,
	NULL /* arp_learned */, iipk_tcp_accept, iipk_tcp_accepted, iipk_tcp_connected,
	iipk_tcp_payload, NULL /* tcp_acked: per packet, tcp_acked_pkt */, iipk_tcp_closed,
	iipk_udp_recv, iipk_icmp_reply, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	NULL /* tcp_accept6 */, iipk_tcp_acked_pkt,
	iipk_rx_peek, NULL /* tcp_room */};

#define IPK_OPS_STATIC iipk_ops
#include "ipkit_unity.c"

/* ----------------------------------------------------------- the engine */

/* The configuration iip's model implies: Ethernet (or raw IPv4 under another L2 of
 * l2_hlen bytes, iip.h "L2"), our address, every peer on-link (iip has no routes:
 * the application gives peer MACs), packets of IIP_COMPAT_PKT_BUF_SIZE bytes, UDP
 * never fragmented and reassembly kept within one buffer. */
static void iipk_config(struct ipk_config *cfg, uint32_t caps, const uint8_t mac[6],
                        uint32_t ip4_be, int rawip, uint32_t l2_hlen, void *opq)
{
	ipk_config_default(cfg);
	cfg->opaque = opq;
	cfg->link = rawip ? IPK_LINK_RAWIP : IPK_LINK_ETH;
	if (mac)
		__builtin_memcpy(cfg->mac, mac, 6);
	cfg->ip4_be = ip4_be;
	cfg->netmask_be = 0;
	cfg->pkt_buf_size = IIP_COMPAT_PKT_BUF_SIZE;
	cfg->caps = caps;
	cfg->max_listeners = 64;
	cfg->max_udp_binds = 64;
	cfg->arp_entries = 256;
	cfg->tcp_sndbuf = 1u << 20;
	cfg->udp_df = 1;
	cfg->frag_max_bytes = IIP_COMPAT_PKT_BUF_SIZE - IIPK_ETH_HLEN;
	if (rawip) {
		/* a non-Ethernet L2: every packet the engine builds leaves room for the
		 * header it gets when re-framed (iipk_tx_l2) */
		cfg->pkt_buf_size = IIP_COMPAT_PKT_BUF_SIZE - l2_hlen;
		cfg->frag_max_bytes = cfg->pkt_buf_size;
	}
}

#define IIPK_CAPS_ALL (IPK_CAP_RX_CSUM_IP4 | IPK_CAP_RX_CSUM_L4 | IPK_CAP_TX_CSUM_IP4 | \
                       IPK_CAP_TX_CSUM_TCP | IPK_CAP_TX_CSUM_UDP | IPK_CAP_TSO | IPK_CAP_SG | \
                       IPK_CAP_LRO)

static size_t iipk_ctx_bytes(void)
{
	static const uint8_t mac[6] = {2, 0, 0, 0, 0, 1};
	struct ipk_config cfg;
	size_t a, b;

	iipk_config(&cfg, 0, mac, 0x0100000au, 0, 0, NULL);
	a = ipk_ctx_size(&cfg);
	iipk_config(&cfg, IIPK_CAPS_ALL, mac, 0x0100000au, 0, 0, NULL);
	b = ipk_ctx_size(&cfg);
	a = a > b ? a : b;
	iipk_config(&cfg, IIPK_CAPS_ALL, mac, 0x0100000au, 1, IIPK_L2_HLEN_MAX, NULL);
	b = ipk_ctx_size(&cfg);
	return a > b ? a : b;
}

/* The NIC features iip's callbacks declare, as ipkit capabilities (iip.h). */
static uint32_t iipk_caps(void *opq)
{
	/* Received chains are taken whatever the features say (iip has no LRO feature
	 * callback; a backend whose NIC coalesces hands them over, iip.h) */
	uint32_t caps = IPK_CAP_LRO;

	if (iip_ops_nic_feature_offload_tx_scatter_gather(opq))
		caps |= IPK_CAP_SG;
	if (iip_ops_nic_feature_offload_ip4_rx_checksum(opq))
		caps |= IPK_CAP_RX_CSUM_IP4;
	if (iip_ops_nic_feature_offload_tcp_rx_checksum(opq) ||
	    iip_ops_nic_feature_offload_udp_rx_checksum(opq))
		caps |= IPK_CAP_RX_CSUM_L4;
	if (iip_ops_nic_feature_offload_ip4_tx_checksum(opq))
		caps |= IPK_CAP_TX_CSUM_IP4;
	if (iip_ops_nic_feature_offload_tcp_tx_checksum(opq))
		caps |= IPK_CAP_TX_CSUM_TCP;
	if (iip_ops_nic_feature_offload_udp_tx_checksum(opq))
		caps |= IPK_CAP_TX_CSUM_UDP;
	if (iip_ops_nic_feature_offload_tcp_tx_tso(opq))
		caps |= IPK_CAP_TSO;
	return caps;
}

/* Hand the objects given before the start to the engine. */
static void iipk_flush_pending(struct iipk_state *s)
{
	while (s->pend_conns) {
		void *o = s->pend_conns;

		s->pend_conns = *(void **)o;
		iipk_zero(IIPK_EXT(o), sizeof(struct iipk_ext));
		(void)ipk_add_conns(s->ctx, o, 1);
	}
	while (s->pend_pbs) {
		void *o = s->pend_pbs;

		s->pend_pbs = *(void **)o;
		(void)ipk_add_pbs(s->ctx, o, 1);
	}
}

/* Is the application's L2 Ethernet II? A header crafted into a scratch packet
 * tells: 14 bytes, destination, source and EtherType in Ethernet's places, 6-byte
 * addresses. Anything else is a non-Ethernet L2 (iip.h "L2"). -1: no packet to probe
 * with (the next call tries again), or an L2 this adapter does not take (addresses
 * over 6 bytes, a header over IIPK_L2_HLEN_MAX, counted in init_failed). */
IIPK_COLD static int iipk_l2_probe(struct iipk_state *s, const uint8_t mac[], void *opq)
{
	static const uint8_t ethtype[2] = {0x08, 0x00};
	uint8_t bc[16], src[6], *d;
	uint16_t alen = iip_ops_l2_addr_len(opq), hl, et;
	void *p;
	int eth;

	if (alen > 6u) {
		s->st.init_failed++;
		return -1;
	}
	p = iip_ops_pkt_alloc(opq);
	if (!p)
		return -1;
	iipk_zero(bc, sizeof(bc));
	iipk_zero(src, sizeof(src));
	iip_ops_l2_broadcast_addr(bc, opq);
	__builtin_memcpy(src, mac, alen);
	iip_ops_pkt_set_len(p, IIPK_L2_HLEN_MAX, opq);
	iipk_zero(iip_ops_pkt_get_data(p, opq), IIPK_L2_HLEN_MAX);
	__builtin_memcpy(&et, ethtype, 2);
	iip_ops_l2_hdr_craft(p, src, bc, et, opq);
	hl = iip_ops_l2_hdr_len(p, opq);
	d = (uint8_t *)iip_ops_pkt_get_data(p, opq);
	eth = alen == 6u && hl == IIPK_ETH_HLEN && __builtin_memcmp(d, bc, 6) == 0 &&
	      __builtin_memcmp(d + 6, src, 6) == 0 && d[12] == 0x08 && d[13] == 0x00;
	iip_ops_pkt_free(p, opq);
	if (!eth && hl > IIPK_L2_HLEN_MAX) {
		s->st.init_failed++;
		return -1;
	}
	s->l2_foreign = (uint8_t)!eth;
	s->l2_alen = (uint8_t)alen;
	s->l2_hlen = hl;
	s->l3off = eth ? IIPK_ETH_HLEN : 0u;
	__builtin_memcpy(s->l2_bcast, bc, 6);
	return 0;
}

/* Start the engine on the first call naming our address; 0 when it cannot run.
 * Kept out of line: every API call passes here, and only the first one starts. */
IIPK_COLD static int iipk_start(struct iipk_state *s, const uint8_t mac[], uint32_t ip4_be,
                                void *opq)
{
	struct ipk_config cfg;
	uint8_t *mem;

	if (s->failed || !mac || iipk_l2_probe(s, mac, opq) < 0)
		return 0;
	iipk_config(&cfg, iipk_caps(opq), mac, ip4_be, s->l2_foreign, s->l2_hlen, s);
	mem = (uint8_t *)s + IIPK_STATE_SIZE;
	s->ctx = ipk_ctx_init(mem, iipk_ctx_bytes(), &cfg, &iipk_ops);
	if (!s->ctx) {
		s->failed = 1;
		s->st.init_failed++;
		return 0;
	}
	__builtin_memcpy(s->mac, mac, s->l2_foreign ? s->l2_alen : 6u);
	if (!s->l2_foreign)
		s->run_key = IIPK_RUN_KEY;
	s->ip4_be = ip4_be;
	s->rng = (iipk_clock(opq) ^ (uint64_t)(uintptr_t)s ^ 0x9e3779b97f4a7c15ull) | 1u;
	iipk_flush_pending(s);
	return 1;
}

static inline int iipk_ready(struct iipk_state *s, const uint8_t mac[], uint32_t ip4_be,
                             void *opq)
{
	return s->ctx ? 1 : iipk_start(s, mac, ip4_be, opq);
}

/* Enter with the engine running (starting it when mac is given); 0: not running. */
IIPK_INLINE_ALWAYS static int iipk_begin(struct iipk_state *s, const uint8_t mac[],
                                         uint32_t ip4_be, void *opq)
{
	if (!iipk_ready(s, mac, ip4_be, opq))
		return 0;
	(void)iipk_enter(s, opq);
	return 1;
}

/* The application's ARP table speaks: its peer MAC goes in the engine's cache. The
 * last pair is remembered so a stream of datagrams to one peer costs one compare. */
static void iipk_peer_mac(struct iipk_state *s, uint32_t ip4_be, const uint8_t mac[])
{
	static const uint8_t zero[6] = {0, 0, 0, 0, 0, 0};

	if (s->l2_foreign) {
		if (mac && s->l2_alen)
			iipk_nb_set(s, ip4_be, mac);
		return;
	}
	if (!mac || __builtin_memcmp(mac, zero, 6) == 0)
		return;
	if (s->last_arp_ip == ip4_be && __builtin_memcmp(mac, s->last_arp_mac, 6) == 0)
		return;
	if (ipk_arp_add_static(s->ctx, ip4_be, mac) == IPK_OK) {
		s->last_arp_ip = ip4_be;
		__builtin_memcpy(s->last_arp_mac, mac, 6);
	}
}

/* ------------------------------------------------------- memory allocation */

IIP_API uint32_t iip_workspace_size(void)
{
	return (uint32_t)(7u + IIPK_STATE_SIZE + iipk_ctx_bytes());
}

/* Both sizes are multiples of 8, so objects laid out in an array stay 8-byte
 * aligned (on 32-bit targets the extension's size alone is not). */
IIP_API uint32_t iip_tcp_conn_size(void)
{
	return (uint32_t)IIPK_ALIGN8(IIPK_ALIGN8(ipk_conn_size()) + sizeof(struct iipk_ext));
}

IIP_API uint32_t iip_pb_size(void)
{
	return (uint32_t)IIPK_ALIGN8(ipk_pb_size() > sizeof(void *) ? ipk_pb_size() : sizeof(void *));
}

/* Objects wait in a list (threaded through their first bytes) until the engine
 * starts; misaligned ones are refused and counted. */
static void iipk_add(struct iipk_state *s, void *o, void **pending, int is_conn)
{
	if (!o || ((uintptr_t)o & 7u) || s->failed) {
		s->st.objects_refused++;
		return;
	}
	if (!s->ctx) {
		*(void **)o = *pending;
		*pending = o;
		return;
	}
	if (is_conn) {
		iipk_zero(IIPK_EXT(o), sizeof(struct iipk_ext));
		(void)ipk_add_conns(s->ctx, o, 1);
	} else {
		(void)ipk_add_pbs(s->ctx, o, 1);
	}
}

IIP_API void iip_add_tcp_conn(void *context, void *conn)
{
	struct iipk_state *s = iipk_state(context);

	iipk_add(s, conn, &s->pend_conns, 1);
}

IIP_API void iip_add_pb(void *context, void *p)
{
	struct iipk_state *s = iipk_state(context);

	iipk_add(s, p, &s->pend_pbs, 0);
}

/* ------------------------------------------------------- active operations */

/* An ARP request built through iip's L2 callbacks (RFC 826): the engine has no call
 * to ask for an arbitrary address, and iip leaves the table to the application. */
IIP_API void iip_arp_request(void *context, uint8_t local_mac[], uint32_t local_ip4_be,
                             uint32_t target_ip4_be, void *opaque)
{
	static const uint8_t htype_eth[2] = {0, 1}; /* iip names no other hardware type */
	struct iipk_state *s = iipk_state(context);
	uint8_t bc[16];

	if (!local_mac || !iipk_begin(s, local_mac, local_ip4_be, opaque))
		return;
	/* (ipkit) a link without addresses (iip_ops_l2_addr_len 0) has nothing to ask */
	if (!s->l2_foreign || s->l2_alen) {
		iipk_zero(bc, sizeof(bc));
		iip_ops_l2_broadcast_addr(bc, opaque);
		iipk_arp_send(s, 1, htype_eth, bc, NULL, target_ip4_be);
	}
	iipk_leave(s);
}

IIP_API uint16_t iip_tcp_connect(void *context, uint8_t local_mac[], uint32_t local_ip4_be,
                                 uint16_t local_port_be, uint8_t peer_mac[],
                                 uint32_t peer_ip4_be, uint16_t peer_port_be, void *opaque)
{
	struct iipk_state *s = iipk_state(context);
	struct ipk_conn *c = NULL;
	uint64_t now;
	int rc;

	if (!iipk_begin(s, local_mac, local_ip4_be, opaque))
		return iipk_rc(IPK_EINVAL);
	now = s->now;
	iipk_peer_mac(s, peer_ip4_be, peer_mac);
	rc = ipk_tcp_connect(s->ctx, peer_ip4_be, peer_port_be, local_port_be, NULL, &c, now);
	if (rc == IPK_OK && peer_mac)
		__builtin_memcpy(IIPK_EXT(c)->peer_mac, peer_mac, 6);
	iipk_leave(s);
	return iipk_rc(rc);
}

IIP_API uint16_t iip_tcp_close(void *context, void *handle, void *opaque)
{
	struct iipk_state *s = iipk_state(context);
	int rc;

	if (!iipk_begin(s, NULL, 0, opaque))
		return iipk_rc(IPK_EINVAL);
	rc = ipk_tcp_close(s->ctx, (struct ipk_conn *)handle, s->now);
	iipk_leave(s);
	return iipk_rc(rc);
}

/* The core keeps pkt until it is acknowledged, then shows it to tcp_acked
 * (iipk_tcp_acked_pkt): nothing to record here. */
IIP_API IIPK_API_HOT uint16_t iip_tcp_send(void *context, void *handle, void *pkt, uint16_t tcp_flags,
                              void *opaque)
{
	struct iipk_state *s;
	int rc, how;

	(void)tcp_flags;
	if (!handle)
		return iipk_rc(IPK_EINVAL);
	s = iipk_state_conn(context);
	how = iipk_begin_conn(s, opaque);
	if (!how)
		return iipk_rc(IPK_EINVAL);
	/* ipk_tcp_send refuses a NULL or empty packet (EINVAL) before queueing; it
	 * returns the bytes queued (all of them) or an error. */
	rc = ipk_tcp_send(s->ctx, (struct ipk_conn *)handle, pkt, s->now);
	if (how == 2)
		iipk_leave(s);
	return iipk_rc(rc);
}

/* cnt delivered packets consumed, oldest first: release the bytes of every record
 * whose packets are all consumed. */
IIP_API IIPK_API_HOT void iip_tcp_rxbuf_consumed(void *context, void *handle, uint16_t cnt, void *opaque)
{
	struct iipk_state *s;
	struct ipk_conn *c = (struct ipk_conn *)handle;
	struct iipk_ext *e;
	uint32_t left = cnt, bytes = 0;
	int how;

	if (!c)
		return;
	s = iipk_state_conn(context);
	e = IIPK_EXT(c);
	if (s->pay_conn == c) {
		/* From inside c's tcp_payload (a call in progress: the engine runs, the
		 * peer's FIN is not in yet). The usual call: that one packet, nothing
		 * older held: its bytes, no ring. Else it joins the ring, in order. */
		s->pay_conn = NULL;
		if (left == 1 && !e->rx_n) {
			(void)ipk_tcp_recved(s->ctx, c, s->pay_len, s->now);
			return;
		}
		iipk_rx_push(e, s->pay_len);
	}
	how = iipk_begin_conn(s, opaque);
	if (!how)
		return;
	while (left && e->rx_n) {
		struct iipk_rxrec *r = &e->rx[e->rx_head];
		uint32_t take = left < r->pkts ? left : r->pkts;

		r->pkts -= take;
		left -= take;
		if (r->pkts == 0) {
			bytes += r->bytes;
			e->rx_head = (uint16_t)((e->rx_head + 1u) % IIPK_RXQ);
			e->rx_n--;
		}
	}
	if (left)
		s->st.consumed_excess++;
	if (bytes)
		(void)ipk_tcp_recved(s->ctx, c, bytes, s->now);
	if (e->fin_wait && !e->rx_n) {
		e->fin_wait = 0;
		(void)ipk_tcp_close(s->ctx, c, s->now);
	}
	if (how == 2)
		iipk_leave(s);
}

IIP_API uint16_t iip_udp_send(void *context, uint8_t local_mac[], uint32_t local_ip4_be,
                              uint16_t local_port_be, uint8_t peer_mac[], uint32_t peer_ip4_be,
                              uint16_t peer_port_be, void *pkt, void *opaque)
{
	struct iipk_state *s = iipk_state(context);
	int rc;

	if (!iipk_begin(s, local_mac, local_ip4_be, opaque))
		return iipk_rc(IPK_EINVAL);
	iipk_peer_mac(s, peer_ip4_be, peer_mac);
	rc = ipk_udp_send(s->ctx, local_port_be, peer_ip4_be, peer_port_be, pkt, s->now);
	iipk_leave(s);
	return iipk_rc(rc);
}

/* ------------------------------------------------------------------ iip_run */

enum iipk_kind { IIPK_FAST, IIPK_ALONE, IIPK_ARP_REPLY, IIPK_SKIP, IIPK_DONE /* freed */ };

/* iip has no bind: a datagram's destination port is bound on first sight, so the
 * engine delivers it (up to max_udp_binds ports; the rest are counted and the
 * engine answers port unreachable, RFC 1122 §4.1.3.1). */
static void iipk_udp_port(struct iipk_state *s, const uint8_t *uh)
{
	uint16_t port_be;

	__builtin_memcpy(&port_be, uh + 2, 2);
	if (iipk_bit(s->udp_bound, port_be))
		return;
	if (ipk_udp_bind(s->ctx, port_be) == IPK_OK) {
		iipk_bit_set(s->udp_bound, port_be);
		s->udp_nbound++;
	} else {
		s->st.udp_ports_full++;
	}
}

/* Bytes 12..15 of an Ethernet frame carrying IPv4 without options (EtherType
 * 0x0800, version 4, IHL 5; the TOS byte ignored), and bytes 20..23 of an
 * unfragmented TCP datagram (flags and offset 0 but DF, protocol 6; TTL ignored),
 * as read from memory: loads of 4 bytes compared under a mask, whatever the byte
 * order (the constants are built from bytes the same way). */
static const uint8_t iipk_pat[16] = {0x08, 0x00, 0x45, 0x00, 0xff, 0xff, 0xff, 0x00,
                                     0x00, 0x00, 0x00, 0x06, 0xbf, 0xff, 0x00, 0xff};

static uint32_t iipk_ld32(const uint8_t *p)
{
	uint32_t v;

	__builtin_memcpy(&v, p, 4);
	return v;
}

/* The per-request frame: TCP in IPv4 without options, not a fragment, no SYN. */
static int iipk_plain_tcp(const uint8_t *d)
{
	return ((iipk_ld32(d + 12) ^ iipk_ld32(iipk_pat)) & iipk_ld32(iipk_pat + 4)) == 0 &&
	       ((iipk_ld32(d + 20) ^ iipk_ld32(iipk_pat + 8)) & iipk_ld32(iipk_pat + 12)) == 0 &&
	       !(d[IIPK_ETH_HLEN + 20u + 13u] & 0x02u);
}

/* What an IPv4 datagram at ip (len bytes) needs before the engine sees it: ICMP and
 * SYNs go alone (their frame is shown), a UDP port is bound on first sight. Only
 * lengths already checked are read; anything odd goes the fast way and the engine
 * drops it. *l4 is set to the TCP header of a SYN. */
static enum iipk_kind iipk_classify_ip(struct iipk_state *s, const uint8_t *ip, uint32_t len,
                                       const uint8_t **l4)
{
	uint32_t ihl;

	if (len < 20u || (ip[0] >> 4) != 4)
		return IIPK_FAST;
	if (ip[9] == 1)
		return IIPK_ALONE; /* ICMP: an echo reply is shown with its frame */
	ihl = (ip[0] & 0xfu) * 4u;
	/* Short, or a fragment: no ports to read (the UDP header is 8 bytes, TCP's 20). */
	if (ihl < 20 || (ip[6] & 0x1fu) || ip[7] || len < ihl + (ip[9] == 6 ? 20u : 8u))
		return IIPK_FAST;
	if (ip[9] == 6) {
		if ((ip[ihl + 13] & 0x12u) != 0x02u)
			return IIPK_FAST;
		*l4 = ip + ihl;
		return IIPK_ALONE; /* SYN without ACK: the application decides */
	}
	if (ip[9] == 17)
		iipk_udp_port(s, ip + ihl);
	return IIPK_FAST;
}

/* What a received Ethernet frame that is not plain TCP (iipk_kind_of tested that)
 * needs. Out of line: the per-request frame never comes here, and iip_run's loop
 * stays small. */
IIPK_NOINLINE static enum iipk_kind iipk_classify(struct iipk_state *s, const uint8_t *d,
                                                  uint32_t len, const uint8_t **l4)
{
	if (len < IIPK_ETH_HLEN + 20u)
		return IIPK_FAST;
	if (d[12] == 0x08 && d[13] == 0x06)
		return (len >= IIPK_ETH_HLEN + 28u && d[20] == 0 && d[21] == 2) ? IIPK_ARP_REPLY
		                                                                 : IIPK_FAST;
	if (d[12] != 0x08 || d[13] != 0x00)
		return IIPK_FAST;
	return iipk_classify_ip(s, d + IIPK_ETH_HLEN, len - IIPK_ETH_HLEN, l4);
}

/* A received frame p on a non-Ethernet L2 (iip.h "L2"): the engine gets *c, a clone
 * whose head is moved past the L2 header (iip_ops_pkt_increment_head, no copy); p
 * stays whole for the events. ARP is the adapter's (iipk_arp_in); other EtherTypes,
 * short frames and chains (LRO is Ethernet-only here) are freed, counted. */
static enum iipk_kind iipk_kind_l2(struct iipk_state *s, void *p, void **c,
                                   const uint8_t **l4)
{
	static const uint8_t et_ip4[2] = {0x08, 0x00}, et_arp[2] = {0x08, 0x06};
	uint32_t len, hl;
	uint16_t et, v4, arp;

	*l4 = NULL;
	if (iip_ops_l2_skip(p, s->opaque))
		return IIPK_SKIP;
	len = iip_ops_pkt_get_len(p, s->opaque);
	hl = iip_ops_l2_hdr_len(p, s->opaque);
	et = iip_ops_l2_ethertype_be(p, s->opaque);
	__builtin_memcpy(&v4, et_ip4, 2);
	__builtin_memcpy(&arp, et_arp, 2);
	if (hl <= len && et == arp && !iip_ops_pkt_scatter_gather_chain_get_next(p, s->opaque)) {
		iipk_arp_in(s, p, hl, len);
		return IIPK_DONE;
	}
	if (hl > len || et != v4 || len - hl < 20u ||
	    iip_ops_pkt_scatter_gather_chain_get_next(p, s->opaque) ||
	    !(*c = iip_ops_pkt_clone(p, s->opaque))) {
		s->st.l2_dropped++;
		iipk_free_chain(s, p);
		return IIPK_DONE;
	}
	if (s->l2_alen) { /* the sender's address, for the answers */
		const uint8_t *src = iip_ops_l2_hdr_src_ptr(p, s->opaque);
		uint32_t ip_be;

		__builtin_memcpy(&ip_be, (const uint8_t *)iip_ops_pkt_get_data(p, s->opaque) + hl + 12, 4);
		if (src)
			iipk_nb_set(s, ip_be, src);
	}
	iip_ops_pkt_increment_head(*c, (uint16_t)hl, s->opaque);
	s->rx_hl = (uint16_t)hl;
	return iipk_classify_ip(s, (const uint8_t *)iip_ops_pkt_get_data(*c, s->opaque), len - hl,
	                        l4);
}

/* A SYN, processed alone so that tcp_accept can show it. The first SYN to a port
 * asks the application here and opens the port when it says yes (iip.h). */
static uint64_t iipk_run_syn(struct iipk_state *s, void *p, void *eng, const uint8_t *th)
{
	uint16_t port_be, sport_be;
	const uint8_t *d = (const uint8_t *)iip_ops_pkt_get_data(eng ? eng : p, s->opaque), *src;
	struct iipk_synmac *m = &s->synmac[s->synmac_next++ % IIPK_SYNMAC];
	uint64_t next;

	__builtin_memcpy(&sport_be, th, 2);
	__builtin_memcpy(&port_be, th + 2, 2);
	__builtin_memcpy(&m->ip_be, d + s->l3off + 12, 4);
	m->port_be = sport_be;
	src = iip_ops_l2_hdr_src_ptr(p, s->opaque);
	iipk_zero(m->mac, 6);
	if (src || !s->l2_foreign)
		__builtin_memcpy(m->mac, src ? src : d + 6, s->l2_foreign ? s->l2_alen : 6u);
	if (!iipk_bit(s->listening, port_be) && iip_ops_tcp_accept(s->workspace, p, s->opaque) &&
	    ipk_tcp_listen(s->ctx, port_be, 128) == IPK_OK) {
		iipk_bit_set(s->listening, port_be);
		s->verdict_given = 1;
	}
	s->cur = p;
	if (!eng)
		return 0; /* iipk_rx_peek: the engine is processing it already */
	next = ipk_run(s->ctx, &eng, 1, s->now);
	s->cur = NULL;
	s->verdict_given = 0;
	return next;
}

/* An ICMP frame, processed alone so that an echo reply is shown with it (p shown,
 * eng to the engine: the same packet on Ethernet). */
static uint64_t iipk_run_alone(struct iipk_state *s, void *p, void *eng)
{
	uint64_t next;

	s->cur = p;
	next = ipk_run(s->ctx, &eng, 1, s->now);
	s->cur = NULL;
	return next;
}

/* Microseconds to the engine's next deadline, rounded up (iip.h: next_us). */
static uint32_t iipk_next_us(uint64_t deadline, uint64_t now)
{
	uint64_t us;

	if (deadline <= now)
		return 0;
	us = (deadline - now + 999u) / 1000u;
	return us > IIPK_NEXT_US_IDLE ? IIPK_NEXT_US_IDLE : (uint32_t)us;
}

/* What iip_run does with frame p before the engine sees it (l2_skip asked first);
 * *l4 is the TCP header of a SYN (IIPK_ALONE), else NULL. */
static enum iipk_kind iipk_kind_of(struct iipk_state *s, void *p, const uint8_t **l4)
{
	uint32_t len;
	const uint8_t *d;

	*l4 = NULL;
	if (!p)
		return IIPK_FAST; /* the engine skips NULL entries */
	if (iip_ops_l2_skip(p, s->opaque))
		return IIPK_SKIP;
	len = iip_ops_pkt_get_len(p, s->opaque);
	d = (const uint8_t *)iip_ops_pkt_get_data(p, s->opaque);
	/* The per-request case here, inline: TCP in an unfragmented IPv4 datagram
	 * without options (version 4, IHL 5), no SYN; the flags byte is at 14 + 20 + 13. */
	if (len >= IIPK_ETH_HLEN + 40u && iipk_plain_tcp(d))
		return IIPK_FAST;
	return iipk_classify(s, d, len, l4);
}

/* Frames from pkt[i] on, the first of kind k (with l4), one at a time: runs of
 * ordinary frames go to the engine in batches, the others alone or after their
 * event. Returns the engine's next deadline. */
static uint64_t iipk_run_slow(struct iipk_state *s, void *pkt[], uint32_t i, uint32_t cnt,
                              enum iipk_kind k, const uint8_t *l4)
{
	void *batch[IIPK_BATCH];
	uint32_t n = 0, ran = 0;
	uint64_t next = UINT64_MAX;

	for (;;) {
		void *p = pkt[i];

		if (k != IIPK_FAST && n) {
			next = ipk_run(s->ctx, batch, n, s->now);
			n = 0;
			ran = 1;
		}
		if (k == IIPK_SKIP) {
			iipk_free_chain(s, p);
			s->st.l2_skipped++;
		} else if (k == IIPK_ALONE) {
			next = l4 ? iipk_run_syn(s, p, p, l4) : iipk_run_alone(s, p, p);
			ran = 1;
		} else if (p) {
			if (k == IIPK_ARP_REPLY)
				iip_ops_arp_reply(s->workspace, p, s->opaque);
			batch[n++] = p;
			if (n == IIPK_BATCH) {
				next = ipk_run(s->ctx, batch, n, s->now);
				n = 0;
				ran = 1;
			}
		}
		if (++i >= cnt)
			break;
		k = iipk_kind_of(s, pkt[i], &l4);
	}
	if (n || !ran)
		next = ipk_run(s->ctx, batch, n, s->now);
	return next;
}

/* iip_run on a non-Ethernet L2, frame by frame: the engine runs on the clone of a
 * frame (iipk_kind_l2) while the events show the frame itself (s->rx_c -> s->rx_p,
 * iipk_shown); the frame is freed after, its clone is the engine's. */
IIPK_NOINLINE static uint64_t iipk_run_l2(struct iipk_state *s, void *pkt[], uint32_t cnt)
{
	uint64_t next = UINT64_MAX, t;
	uint32_t i;

	for (i = 0; i < cnt; i++) {
		void *p = pkt[i], *c = NULL;
		const uint8_t *l4;
		enum iipk_kind k;

		if (!p)
			continue;
		k = iipk_kind_l2(s, p, &c, &l4);
		if (k == IIPK_SKIP) {
			iipk_free_chain(s, p);
			s->st.l2_skipped++;
			continue;
		}
		if (k == IIPK_DONE)
			continue;
		s->rx_p = p;
		s->rx_c = c;
		if (k == IIPK_ALONE)
			t = l4 ? iipk_run_syn(s, p, c, l4) : iipk_run_alone(s, p, c);
		else
			t = ipk_run(s->ctx, &c, 1, s->now);
		s->rx_p = s->rx_c = NULL;
		iip_ops_pkt_free(p, s->opaque);
		next = t < next ? t : next;
	}
	t = ipk_run(s->ctx, NULL, 0, s->now); /* timers, and the deadline */
	if (s->shown_copy) {
		iip_ops_pkt_free(s->shown_copy, s->opaque);
		s->shown_copy = NULL;
	}
	return t < next ? t : next;
}

/* iip_run on Ethernet once the first `i` frames are known ordinary: those go to the
 * engine as they are (the application's array; it only reads it), up to IIPK_BATCH
 * frames at once; the rest frame by frame (iipk_run_slow). */
static uint64_t iipk_run_mixed(struct iipk_state *s, void *pkt[], uint32_t i, uint32_t cnt)
{
	const uint8_t *l4 = NULL;
	enum iipk_kind k = IIPK_FAST;
	uint64_t next, later;

	for (; i < cnt && i < IIPK_BATCH; i++)
		if ((k = iipk_kind_of(s, pkt[i], &l4)) != IIPK_FAST)
			break;
	if (i == cnt)
		return ipk_run(s->ctx, pkt, cnt, s->now);
	next = i ? ipk_run(s->ctx, pkt, i, s->now) : UINT64_MAX;
	if (i == IIPK_BATCH)
		k = iipk_kind_of(s, pkt[i], &l4);
	later = iipk_run_slow(s, pkt, i, cnt, k, l4);
	return later < next ? later : next;
}

/* iip_run's general path: the engine not running yet (start it, or free the frames
 * when it cannot run), a non-Ethernet L2, or a batch that is not all ordinary
 * frames (the first `known` of them are). */
IIPK_NOINLINE static uint16_t iipk_run_other(void *context, uint8_t mac[], uint32_t ip4_be,
                                             void *pkt[], uint32_t cnt, uint32_t known,
                                             uint32_t *next_us, void *opaque)
{
	struct iipk_state *s = iipk_state(context);
	uint64_t next;
	uint32_t i;

	if (!iipk_begin(s, mac, ip4_be, opaque)) {
		for (i = 0; pkt && i < cnt; i++) { /* each frame object by object (iip.h) */
			void *p = pkt[i], *n;

			for (; p; p = n) {
				n = iip_ops_pkt_scatter_gather_chain_get_next(p, opaque);
				iip_ops_pkt_free(p, opaque);
			}
		}
		if (next_us)
			*next_us = IIPK_NEXT_US_IDLE;
		return 0;
	}
	if (!pkt)
		cnt = 0;
	s->cur = NULL; /* may be a frame of an earlier usual call (iipk_rx_peek) */
	s->verdict_given = 0;
	s->pre_classified = 1;
	if (s->l2_foreign)
		next = iipk_run_l2(s, pkt, cnt);
	else
		next = iipk_run_mixed(s, pkt, known, cnt);
	s->pre_classified = 0;
	if (next_us)
		*next_us = iipk_next_us(next, s->now);
	iipk_leave(s);
	return 0;
}

/* A frame the engine's fast path did not take, in iip_run's usual path (Ethernet
 * II; ipkit/core.h rx_peek: called right before the engine processes it, and
 * allowed to listen and bind): what iipk_run_slow does before a frame's ipk_run, done
 * here instead, so the usual path needs no test of each frame. An ICMP frame or a SYN
 * becomes the frame the events show (s->cur); an ARP reply is shown now, before the
 * engine learns it; a datagram's port is bound. Frames of iipk_run_other were
 * classified before (pre_classified). */
static void iipk_rx_peek(struct ipk_ctx *ctx, void *pkt, void *o)
{
	struct iipk_state *s = IIPK_S(o);
	const uint8_t *l4 = NULL;
	enum iipk_kind k;

	(void)ctx;
	if (s->pre_classified)
		return;
	s->cur = NULL;
	s->verdict_given = 0;
	k = iipk_classify(s, (const uint8_t *)iip_ops_pkt_get_data(pkt, s->opaque),
	                  iip_ops_pkt_get_len(pkt, s->opaque), &l4);
	if (k == IIPK_ARP_REPLY)
		iip_ops_arp_reply(s->workspace, pkt, s->opaque);
	else if (k == IIPK_ALONE && l4)
		(void)iipk_run_syn(s, pkt, NULL, l4);
	else if (k == IIPK_ALONE)
		s->cur = pkt;
}

/* The usual call: running on Ethernet, up to IIPK_BATCH frames, none of them
 * skipped by iip_ops_l2_skip. They go to the engine as they are, untested: the few
 * the adapter must see first reach iipk_rx_peek. Everything else takes
 * iipk_run_other. The workspace's set-up test is run_key's compare (a zeroed
 * workspace, iip.h, has none). */
IIP_API IIPK_API_HOT uint16_t iip_run(void *context, uint8_t mac[], uint32_t ip4_be, void *pkt[],
                         uint16_t cnt, uint32_t *next_us, void *opaque)
{
	struct iipk_state *s = iipk_state_conn(context);
	uint64_t next;
	uint32_t i;

	if (__builtin_expect(s->run_key != IIPK_RUN_KEY || !pkt || cnt > IIPK_BATCH, 0))
		return iipk_run_other(context, mac, ip4_be, pkt, cnt, 0, next_us, opaque);
	for (i = 0; i < cnt; i++) /* iip_ops_l2_skip's frames never reach the engine */
		if (pkt[i] && iip_ops_l2_skip(pkt[i], opaque))
			return iipk_run_other(context, mac, ip4_be, pkt, cnt, 0, next_us, opaque);
	s->depth++; /* iip_run is not called from callbacks (iip.h): no outer call */
	s->opaque = opaque;
	s->now = iipk_clock(opaque);
	next = ipk_run(s->ctx, pkt, cnt, s->now);
	if (next_us)
		*next_us = iipk_next_us(next, s->now);
	s->depth--;
	return 0;
}

/* ------------------------------------------------------------ ipkit additions */

IIP_API const struct iip_compat_stats *iip_compat_stats(void *context)
{
	return &iipk_state(context)->st;
}

IIP_API const void *iip_compat_counters(void *context)
{
	struct iipk_state *s = iipk_state(context);

	return s->ctx ? (const void *)ipk_counters(s->ctx) : NULL;
}

IIP_API uint16_t iip_compat_tso_mss(void *context)
{
	return iipk_state(context)->tso_mss;
}

IIP_API uint32_t iip_compat_conns_free(void *context)
{
	return ipk_conns_free(iipk_state(context)->ctx);
}

IIP_API uint32_t iip_compat_pbs_free(void *context)
{
	return ipk_pbs_free(iipk_state(context)->ctx);
}
