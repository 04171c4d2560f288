/*
 * ipkit core internals: the context layout and the calls modules make to each other.
 * Nothing here is API; integrators include only <ipkit/core.h>.
 *
 * Module map (one concern a file):
 *   wire/       pure parse/emit of each header and the checksum (wire/wire.h)
 *   stack.c     context, pools, ipk_run dispatch, timers fan-out, counters, helpers,
 *               ipk_drop_name, ipk_strerror
 *   link.c      Ethernet / raw-IP framing in and out
 *   arp.c       ARP cache, requests/replies, queue of packets waiting for resolution
 *   ip4.c       IPv4 input validation, output, fragment reassembly and fragmentation
 *   icmp4.c     echo, errors out (port unreachable), errors in (to TCP)
 *   udp.c       bind table, input, output
 *   tcp_*.c     TCP (tcp.h has the connection object and the map of its files)
 *   rss.c       Toeplitz RSS hash, queue of a flow, RSS-aware ephemeral ports
 *   ipkit_unity.c  every file above as one translation unit
 */
#ifndef IPKIT_CORE_INTERNAL_H
#define IPKIT_CORE_INTERNAL_H

#include <ipkit/core.h>

#include "wire/wire.h"

#define IPK_INLINE static inline
/* The receive path's per-packet functions. GCC places them together (.text.hot):
 * spread over the whole text, the few lines a packet runs through fell into the same
 * instruction-cache sets by accident of layout and evicted each other (cachegrind:
 * 0 to 67 L1i misses per request, changing with unrelated edits). */
#if defined(__GNUC__)
#define IPK_HOT __attribute__((hot))
#else
#define IPK_HOT
#endif
/* A slow-path function kept out of its hot caller: inlined, its code changed the
 * hot caller's register allocation and cost instructions on every fast segment. */
#if defined(__GNUC__)
#define IPK_NOINLINE __attribute__((noinline))
#else
#define IPK_NOINLINE
#endif
/* A small helper the transmit path needs inline in each of its callers, which GCC's
 * size heuristics would otherwise leave as a call. */
#if defined(__GNUC__)
#define IPK_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define IPK_ALWAYS_INLINE inline
#endif
/* A per-segment function whose callees (where the compiler sees them: the unity
 * build) are inlined into it, so one sample does not pay two calls. */
#if defined(__GNUC__)
#define IPK_FLATTEN __attribute__((flatten))
#else
#define IPK_FLATTEN
#endif

/* A branch the common frame never takes (an IPv6 connection on a path IPv4 shares):
 * laid out of line so the IPv4 code around it keeps its shape. */
#if defined(__GNUC__)
#define IPK_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define IPK_UNLIKELY(x) (x)
#endif

/* Ops access: a unity build binds the table at compile time. */
#ifdef IPK_OPS_STATIC
/* ctx is still evaluated (and discarded) so a function that uses its context only
 * for ops does not trip -Wunused-parameter in the unity build. */
#define IPK_OPS(ctx) ((void)(ctx), &(IPK_OPS_STATIC))
#else
#define IPK_OPS(ctx) ((ctx)->ops)
#endif
#define IPK_OPQ(ctx) ((ctx)->cfg.opaque)

#define IPK_NO_DEADLINE UINT64_MAX

/* Freestanding helpers (no libc). */
#define ipk_memcpy __builtin_memcpy
#define ipk_memset __builtin_memset
#define ipk_memcmp __builtin_memcmp
#define IPK_MIN(a, b) ((a) < (b) ? (a) : (b))
#define IPK_MAX(a, b) ((a) > (b) ? (a) : (b))
#define IPK_UNUSED(x) ((void)(x))

/* Are IPv6 addresses a and b (16 bytes each) the same? Two 64-bit words each, no
 * call: the per-segment pair and next-hop tests use it. */
IPK_INLINE int ipk_ip6_eq(const uint8_t *a, const uint8_t *b)
{
	uint64_t a0, a1, b0, b1;

	__builtin_memcpy(&a0, a, 8);
	__builtin_memcpy(&a1, a + 8, 8);
	__builtin_memcpy(&b0, b, 8);
	__builtin_memcpy(&b1, b + 8, 8);
	return ((a0 ^ b0) | (a1 ^ b1)) == 0;
}

/* Are the 6-byte MAC addresses a and b the same? */
IPK_INLINE int ipk_mac_eq(const uint8_t *a, const uint8_t *b)
{
	uint32_t a0, b0;
	uint16_t a1, b1;

	__builtin_memcpy(&a0, a, 4);
	__builtin_memcpy(&b0, b, 4);
	__builtin_memcpy(&a1, a + 4, 2);
	__builtin_memcpy(&b1, b + 4, 2);
	return a0 == b0 && a1 == b1;
}

/* Copy len bytes: a few (a 1-byte request, a short reply) by hand, where a call to
 * the library's memcpy costs more than the copy; more by memcpy. */
IPK_INLINE void ipk_copy_short(uint8_t *dst, const uint8_t *src, uint32_t len)
{
	uint32_t i;

	if (len > 8) {
		ipk_memcpy(dst, src, len);
		return;
	}
	for (i = 0; i < len; i++)
		dst[i] = src[i];
}

/*
 * A packet-buffer descriptor: one packet held in one of the core's queues (TCP send
 * queue, TCP out-of-order queue, reassembly, ARP wait queue). Taken from the pool the
 * integrator filled with ipk_add_pbs; exhaustion is counted (IPK_DROP_NO_PB).
 */
struct ipk_pb {
	struct ipk_pb *next;
	void *pkt;       /* the integrator's packet */
	uint32_t off;    /* first byte of interest in pkt (payload start) */
	uint32_t len;    /* bytes of interest */
	uint32_t seq;    /* TCP: sequence number of the first byte; frag: byte offset */
	uint32_t aux;    /* ARP queue: next-hop IPv4 (be); TCP send: flags (SYN/FIN) */
	uint64_t t;      /* TCP send: time last sent; frag/ARP: time queued */
	uint32_t xmit;   /* TCP send: times transmitted */
	uint32_t pad_;   /* TCP send: truesize charge beyond len (IPK_TCP_PB_OV) */
};

/* Received-datagram facts passed from ip4 to the transport inputs. */
struct ipk_rx {
	uint32_t src_be, dst_be;
	uint32_t l3_off;  /* IPv4 header offset in pkt */
	uint32_t l4_off;  /* transport header offset in pkt */
	uint32_t l4_len;  /* transport bytes (header + payload), chain included */
	uint8_t proto;
	uint8_t tos;
	uint8_t ttl;
	uint8_t l4_csum_ok; /* 1: NIC verified the transport checksum */
	uint8_t is_bcast;   /* to the broadcast / network address */
	uint8_t reassembled;/* pkt is a chain built by reassembly */
	uint8_t chained;    /* pkt is a chain (reassembly, or IPK_CAP_LRO receive) */
};

struct ipk_listener {
	uint16_t port_be;   /* 0 = free slot */
	uint16_t backlog;
	uint16_t pending;   /* connections in SYN-RECEIVED */
	uint16_t family;    /* 0 both, IPK_AF_INET or IPK_AF_INET6 only */
};

struct ipk_udp_bind {
	uint16_t port_be;   /* 0 = free slot */
};

struct ipk_arp_entry {
	uint32_t ip4_be;    /* 0 = free */
	uint8_t mac[6];
	uint8_t state;      /* IPK_ARP_* below */
	uint8_t tries;
	uint64_t expires;   /* RESOLVED: end of life; PENDING: next retry */
	struct ipk_pb *q;   /* packets waiting (PENDING) */
	uint16_t qlen;
	/* RESOLVED, another MAC claimed the address (arp.c arp_challenge): frames
	 * still go to mac while unicast probes ask it; cand_mac takes over only when
	 * arp_retries of them go unanswered. */
	uint8_t probing;    /* probes sent so far, 0 = not challenged */
	uint8_t cand_mac[6];
	uint64_t probe_at;  /* next probe, or the switch to cand_mac */
};
#define IPK_ARP_FREE 0
#define IPK_ARP_PENDING 1
#define IPK_ARP_RESOLVED 2
#define IPK_ARP_STATIC 3

struct ipk_frag {
	uint32_t src_be, dst_be;
	uint16_t id;
	uint8_t proto;
	uint8_t used;
	uint32_t total;     /* datagram payload length once the last fragment is seen, else 0 */
	uint32_t have;      /* payload bytes held */
	uint16_t npieces;
	uint16_t pad_;
	uint64_t expires;
	struct ipk_pb *pieces; /* sorted by offset; pb->seq = offset, pb->off/len = payload */
	uint64_t touched;   /* ctx->frag_tick when a piece last arrived (eviction order) */
};

struct ipk_conn; /* tcp.h */

/* ---- IPv6 state (ip6.c, nd.c; docs/ipv6-core.md). Fixed sizes inside the context:
 * every table is bounded, and a full one evicts or refuses (counted). */
#define IPK_IP6_ADDRS 4     /* link-local, the static one, two from SLAAC */
#define IPK_ND_ENTRIES 32   /* neighbor cache (RFC 4861 §5.1) */
#define IPK_ND_QLEN 4       /* packets waiting for one neighbor's resolution */
#define IPK_ND_ROUTERS 2    /* default router list */
#define IPK_ND_REDIRECTS 8  /* destinations a Redirect sent elsewhere (RFC 4861 §8.3) */
/* How long a Redirect's next hop is kept: RFC 4861 leaves it to the destination
 * cache; 10 min, as a lowered path MTU (a stale one costs a redirect more). */
#define IPK_ND_REDIRECT_AGE_NS (600ull * 1000000000ull)
#define IPK_ND_PREFIXES 4   /* on-link prefix list */

/* Address states (RFC 4862 §5.4, §5.5.4) */
#define IPK_A6_FREE 0
#define IPK_A6_TENTATIVE 1  /* DAD running: not used, NS/NA for it watched */
#define IPK_A6_PREFERRED 2
#define IPK_A6_DEPRECATED 3 /* preferred lifetime over: kept for running flows */
#define IPK_A6_DUPLICATE 4  /* DAD found another holder: never used */

struct ipk_ip6_laddr {
	uint8_t a[16];
	uint8_t state;      /* IPK_A6_* */
	uint8_t plen;       /* on-link prefix length (static: cfg; SLAAC: 64) */
	uint8_t dad_left;   /* DAD probes still to send */
	uint8_t slaac;      /* formed from an RA prefix: lifetimes apply */
	uint64_t t;         /* TENTATIVE: next DAD step */
	uint64_t valid_until, pref_until; /* UINT64_MAX = infinite */
};

/* Neighbor cache states (RFC 4861 §7.3.2) */
#define IPK_ND_FREE 0
#define IPK_ND_INCOMPLETE 1
#define IPK_ND_REACHABLE 2
#define IPK_ND_STALE 3
#define IPK_ND_DELAY 4
#define IPK_ND_PROBE 5

struct ipk_nd_entry {
	uint8_t ip[16];
	uint8_t mac[6];
	uint8_t state;      /* IPK_ND_* */
	uint8_t probes;     /* NS sent in INCOMPLETE / PROBE */
	uint8_t is_router;
	uint8_t qlen;
	uint64_t t;         /* next event: retransmit, REACHABLE -> STALE, DELAY -> PROBE */
	uint64_t used;      /* last use: the eviction order (least recently used first) */
	struct ipk_pb *q;   /* packets waiting (INCOMPLETE), pb->pkt a whole frame */
};

struct ipk_ip6_router {
	uint8_t ip[16];     /* link-local address of the router */
	uint64_t until;     /* 0 = free slot; UINT64_MAX: configured */
};

struct ipk_ip6_prefix {
	uint8_t p[16];
	uint8_t plen;
	uint64_t until;     /* 0 = free slot */
};

#define IPK_REASM6_SLOTS 4    /* IPv6 datagrams reassembled at once */
#define IPK_REASM6_PIECES 48  /* fragments per datagram (a 64 KiB one at 1280: 52) */
#define IPK_REASM6_TIMEOUT_NS (60ull * 1000000000ull) /* RFC 8200 §4.5 */
struct ipk_reasm6 {
	uint8_t src[16], dst[16];
	uint32_t id;
	uint8_t proto;      /* the fragments' next header (an upper layer) */
	uint8_t used;
	uint16_t npieces;
	uint32_t total;     /* data bytes once the last fragment is seen, else 0 */
	uint32_t have;      /* data bytes held */
	uint64_t expires;
	struct ipk_pb *pieces; /* sorted by offset: pb->seq offset, pb->off/len data */
};
#define IPK_PMTU6_ENTRIES 16 /* destinations with a path MTU below the link's */
#define IPK_PMTU6_AGE_NS (600ull * 1000000000ull) /* RFC 8201 §4: retry after 10 min */
struct ipk_pmtu6 {
	uint8_t dst[16];
	uint16_t mtu;
	uint64_t until;     /* 0 = free slot */
};

struct ipk_ip6 {
	struct ipk_pmtu6 pmtu[IPK_PMTU6_ENTRIES];
	struct ipk_reasm6 reasm[IPK_REASM6_SLOTS];
	struct ipk_ip6_laddr addr[IPK_IP6_ADDRS];
	/* Bumped by every change to addr (bytes or state): a pair whose addresses
	 * passed ipk_ip6_addr_check at this generation passes it still (tcp6.c,
	 * the receive shortcut). Every write to addr[].state goes with a bump. */
	uint32_t addr_gen;
	struct ipk_nd_entry nd[IPK_ND_ENTRIES];
	struct ipk_ip6_router rtr[IPK_ND_ROUTERS];
	/* nd.c: RFC 4861 §8.3 destination cache entries from Redirects: dst goes to
	 * nh (a router's link-local, or dst itself: on-link) until `until` */
	struct {
		uint8_t dst[16], nh[16];
		uint64_t until;     /* 0 = free */
	} redir[IPK_ND_REDIRECTS];
	uint8_t nredir;             /* slots ever taken (a hint: 0 while no Redirect was
	                             * taken, and ipk_ip6_route skips the scan) */
	struct ipk_ip6_prefix pfx[IPK_ND_PREFIXES];
	uint64_t deadline;          /* earliest ND/DAD/RS event (ipk_ip6_timer) */
	uint64_t rs_at;             /* next Router Solicitation */
	uint8_t rs_left;
	uint8_t hlim;               /* current hop limit (cfg, or an RA's) */
	uint16_t mtu;               /* link MTU (cfg.mtu, or an RA's MTU option) */
	uint32_t icmp_tokens;       /* ICMPv6 error bucket (RFC 4443 §2.4(f)) */
	uint64_t icmp_tokens_t;
	uint64_t reachable_ns, retrans_ns; /* RFC 4861 §6.3.2, from RAs */
	uint32_t frag_id;           /* next fragment identification (random start) */
	/* nd.c ipk_nd_hc_tx: the last unicast destination's Ethernet header while its
	 * neighbour stays REACHABLE or DELAY and no route or entry changed (gen), so
	 * a connection's segments skip the route and the neighbour scan. */
	struct {
		uint8_t dst[16];
		uint8_t eth[14];    /* IPK_ETH_HLEN: neighbour's MAC, ours, 0x86dd */
		uint8_t nd;         /* index of the neighbour entry in nd[] */
		uint8_t state;      /* its state then: REACHABLE or DELAY */
		uint32_t gen;
		uint64_t until;     /* that state's deadline (e->t); 0 = empty */
	} hc;
	uint32_t gen;               /* bumped when a route or a neighbour entry changes */
	/* mld.c: the pending answer to MLD queries (RFC 3810 §6.2): when, and for
	 * which address slots' solicited-node groups (a bit each) */
	uint64_t mld_at;            /* IPK_NO_DEADLINE: none */
	uint32_t mld_want;
	/* RFC 3810 §8.2.1: an MLDv1 querier heard: MLDv1 compatibility mode until this
	 * time (the Older Version Querier Present timer); 0 = MLDv2 mode */
	uint64_t mld_v1_until;
};

/*
 * TCP over IPv6 (tcp6.c): a connection keeps its struct ipk_tuple of two 32-bit
 * addresses, so the IPv4 paths and the object's size are what they were. An IPv6
 * connection has peer_ip4_be IPK_TCP6_MARK (255.255.255.255: no IPv4 connection
 * has that peer, ipk_tcp_connect refuses it and the source rule drops it on
 * receive; and no next hop is ever cached for it, so the IPv4 transmit template's
 * route test fails for an IPv6 connection without a test of its own) and
 * local_ip4_be the index of its (local, peer) address pair in ctx->tcp6_pairs,
 * counted by the connections holding it. The connection hash, the last-hit cache, TIME_WAIT and the 4-tuple
 * rules then serve both families unchanged: two IPv6 4-tuples are equal exactly
 * when their pair index and ports are. Entry tcp6_n is the scratch pair: the
 * addresses of the segment being processed when no connection has them (a SYN, a
 * segment to RST), so that replies and new connections name them the same way.
 */
#define IPK_TCP6_MARK 0xffffffffu
#define IPK_TCP6_NONE 0xffffffffu
struct ipk_tcp6_pair {
	uint8_t local[16], peer[16];
	uint32_t refs;      /* connections holding it; 0 = free (or the scratch) */
	uint32_t next;      /* hash chain, or the free list; IPK_TCP6_NONE ends it */
	uint32_t ok_gen;    /* ip6.addr_gen when the addresses last passed the check */
	uint8_t ok;         /* ok_gen is set (cleared when the slot takes new addresses) */
};

/* An upper-layer datagram to send as fragments: hlen bytes at hdr, then blen bytes
 * from body (bytes), else from packet chain pkt at pkt_off, else (both NULL) the
 * echo pattern: byte i of the body is (uint8_t)i. */
struct ipk_ip6_gather {
	const uint8_t *hdr;
	uint32_t hlen;
	const uint8_t *body;
	void *pkt;
	uint32_t pkt_off;
	uint32_t blen;
};

/* Ethernet + IPv4 + TCP + NOP,NOP,TS: the longest header the transmit template holds,
 * and the bytes a fast segment copies from it whatever its length. */
#define IPK_TT_MAX 66u
/* Ethernet + IPv6 + TCP + NOP,NOP,TS: the longest IPv6 template header. */
#define IPK_TT6_MAX 86u
/* Transmit templates a context keeps (tcp_out.c txf_tt: one slot per connection
 * object index modulo this, a power of two). */
#define IPK_TT_SLOTS 32u

/* One transmit template (tcp_out.c txf_*): the frame header of connection c's fast
 * segments as far as it does not change between them (Ethernet from the next-hop
 * cache, IPv4 and TCP headers, NOP,NOP,TS kinds; the per-segment fields zero), with
 * the sums of those fixed words: ip_sum (host order, folded) and tcp_sum (memory
 * order, with the pseudo-header's addresses and protocol). Built when last, the
 * connection whose fast segment last found the slot not its own, sends the next one
 * too; valid while gen is the context's tt_gen (moved on when the next-hop cache is
 * set, link.c); dropped when c's queues are freed (last likewise). */
struct ipk_tt {
	/* first, and a multiple of 8: copied in words (IPv4: IPK_TT_MAX bytes; IPv6:
	 * IPK_TT6_MAX at most) */
	uint8_t hdr[IPK_TT6_MAX + 2u];
	uint32_t ip_sum, gen;
	uint64_t tcp_sum;
	struct ipk_conn *c, *last;
	/* An IPv6 connection's template (tcp_out.c txf_tmpl6): its Ethernet header is
	 * the next-hop header cache's (nd.c ipk_nd_hc_tx) when built, valid under the
	 * same rules: before until6 (the neighbour state's deadline), while ip6.gen is
	 * gen6, neighbour entry nd6 in state state6 with the MAC hdr[0..5]. */
	uint64_t until6;
	uint32_t gen6;
	uint8_t nd6, state6;
};

struct ipk_ctx {
	struct ipk_config cfg;
	const struct ipk_ops *ops;
	struct ipk_counters cnt;
	uint64_t now;
	uint64_t tx_stamp;      /* the last TCP transmit time handed out (ipk_tcp_tx_stamp) */
	uint32_t l2_len;        /* 14 for Ethernet, 0 for raw IP */
	uint32_t tx_queued;     /* frames given to ops->tx since the last flush */

	/* pools (free lists threaded through the objects) */
	struct ipk_pb *pb_free;
	uint32_t pb_nfree, pb_total;
	struct ipk_conn *conn_free;
	uint32_t conn_nfree, conn_total;

	/* tables carved out of the context memory after this struct */
	struct ipk_conn **conn_hash;  /* cfg.conn_hash_buckets heads */
	struct ipk_listener *listeners;
	struct ipk_udp_bind *udp_binds;
	struct ipk_arp_entry *arp;
	struct ipk_frag *frags;

	/* TCP bookkeeping */
	struct ipk_conn *timer_head;  /* connections with an armed timer (tcp_timer.c) */
	uint64_t tcp_deadline;        /* earliest timer among them (cached, may be early) */
	uint32_t tcp_dl_tick;         /* its µs tick, when tcp_dl_ok (tcp_timer.c) */
	uint8_t tcp_dl_ok;
	uint16_t eph_next;            /* next ephemeral port to try (host order) */
	uint32_t conn_hash_seed;      /* keys the 4-tuple hash: peers cannot aim at one bucket */
	uint16_t ip_id;               /* next IPv4 identification */
	uint16_t ip_frag_id;          /* next ID of a fragmented datagram (RFC 6864) */
	uint32_t isn_secret_;         /* unused when ops->isn_hash is set */

	uint64_t arp_deadline, frag_deadline;
	uint64_t frag_tick;           /* counts fragments stored: ipk_frag.touched's clock */
	/* cfg.tcp_rto_min_ns/max_ns as µs (ipk_tcp_ns_to_us) and max in whole ms: the RTT
	 * path compares and clamps without converting (tcp_timer.c, tcp_ts.c). */
	uint32_t rto_min_us, rto_max_us;
	uint64_t ts_rtt_max_ms;
	/* ip4.c, from the configuration at ipk_ctx_init: the subnet has a directed
	 * broadcast address; our address is set and is not one (so a datagram to it is
	 * unicast to us without testing the destination again) */
	uint8_t ip4_has_bcast, ip4_self_ok;
	/* The source address the receive shortcuts last saw pass ipk_ip4_src_check
	 * (ipk_ip4_fast_accept). Never 0 (0.0.0.0 fails the rule): ipk_ctx_init starts
	 * it at an address that passes (stack.c src_ok_start), and where it finds none
	 * it clears ip4_self_ok, so the shortcuts, which test that first, take
	 * nothing and the memo is never read. The rule is a pure
	 * function of the address and of the configuration, which ipk_ctx_init fixes,
	 * so an address that passed once passes again: the peer of a running
	 * connection is tested once, not on every segment. */
	uint32_t src_ok_be;
	/* Tests only (tests/tcp/test_tcp_rxdiff.c), 0 otherwise: 1 turns every receive
	 * shortcut off (IPv4 fast path, header prediction, timers_update's tick test,
	 * the RTO kept when the estimate did not move), so the general paths' result
	 * can be compared with the shortcuts' frame by frame. Set with ipk_fast_off,
	 * which also clears ip4_self_ok and tcp_dl_ok (their tests then fail). */
	uint8_t fast_off;

	/* ICMP error rate limit (icmp4.c): token bucket, RFC 1812 §4.3.2.8 / RFC 1122 */
	uint64_t icmp_tokens_t;        /* time the bucket was last refilled */
	uint32_t icmp_tokens;

	/* TCP defences (tcp_defence.c, tcp_syncookie.c, tcp_tw.c) */
	uint64_t chack_end;           /* end of the current challenge-ACK second */
	uint32_t chack_n, chack_budget; /* sent in it, and its (randomised) budget */
	uint64_t rst_end;             /* end of the current tcp_rst_limit second */
	uint32_t rst_n;               /* RSTs for segments sent in it (tcp_defence.c) */
	uint32_t synrecv_n;           /* connections in SYN-RECEIVED (counted in a backlog) */
	/* receive memory (tcp_mem.c): packets held in out-of-order queues, and the hash
	 * bucket where the next search for a connection to take them from starts */
	uint32_t rmem_pkts;
	uint32_t rmem_cursor;
	/* send memory (tcp.c wmem_room): bytes queued on every send queue plus the
	 * zero-copy packets' charge (IPK_TCP_PB_OV), against cfg.wmem_max */
	uint64_t wmem;
	uint64_t wmem_lim;            /* cfg.wmem_max or its default (ipk_wmem_limit_set) */
	uint32_t tw_n;                /* connections on the TIME_WAIT list */
	struct ipk_conn *tw_head, *tw_tail; /* TIME_WAIT, oldest first */
	uint64_t cookie_key[2];       /* SipHash key for SYN cookies, drawn on first use */
	uint64_t cookie_until;        /* cookies are checked until then (2 ticks after the last) */
	uint8_t cookie_keyed;
	uint8_t iss_floor_on;         /* new connections take an ISS above iss_floor */
	uint32_t iss_floor;           /* (a TIME_WAIT 4-tuple being reused, tcp_tw.c) */
	/* RFC 2883: a duplicate the segment being processed carried, for the next ACK
	 * to that connection (tcp_sack.c); dsack_c is NULL when there is none. */
	struct ipk_conn *dsack_c;
	uint32_t dsack_l, dsack_r;
	/* The send-queue pb (of connection sq_hint_c) a segment was last built from, so
	 * that the next lookup starts there instead of at snd_una (tcp_out.c sq_find);
	 * cleared when that pb leaves the queue. One per context keeps ipk_conn small. */
	struct ipk_conn *sq_hint_c;
	struct ipk_pb *sq_hint_pb;
	/* IPK_PKT_RECYCLE: an acknowledged copy-write packet kept for the next
	 * copy-write of this ipk_run call (tcp.h ipk_tcp_sq_pkt_done, tcp.c write_copy);
	 * ipk_run frees it before returning. */
	void *pkt_spare;
	/* ops->tcp_acked_pkt: the pbs of the ipk_tcp_send packets the ACK being
	 * processed acknowledged wholly, in send order (tcp.h ipk_tcp_sq_release_ack,
	 * tcp_out.c ipk_tcp_sq_release); tcp_in.c new_ack shows and empties it before
	 * it returns, so it is empty between two ACKs. */
	struct ipk_pb *tcp_acked_q;
	/* The connection whose arriving segment is being processed (tcp_in.c): API calls
	 * on it from a callback only queue; the one output pass at the end of the event
	 * sends, so a reply carries the ACK and is built once (tcp.c after_queue). */
	struct ipk_conn *in_event_c;
	/* Receive batches (tcp_ack.c): rx_more is set while ipk_run has frames after
	 * the one being processed; ack_c (held) is the one connection whose ACK, due
	 * by the segment count, waits for the end of the batch. */
	struct ipk_conn *ack_c;
	uint8_t rx_more;
	/* The connection ipk_tcp_lookup found last (tcp.c): checked before the hash;
	 * cleared when it leaves the hash. */
	struct ipk_conn *last_c;
	/* One-entry next-hop cache (link.c, arp.c): the Ethernet header for frames to
	 * next hop nhc_ip_be, valid while now < nhc_until (its ARP entry's expiry). Every
	 * change to the ARP table zeroes nhc_until, so the common frame skips the
	 * broadcast test and the table scan. Filled only from the built-in table. */
	uint32_t nhc_ip_be;
	uint8_t nhc_eth[IPK_ETH_HLEN];
	uint64_t nhc_until;
	/* The transmit fast path (tcp_out.c): output passes it sent, and a switch the
	 * tests set to send everything the general way and compare the frames. */
	uint64_t tx_fast_n;
	uint8_t tx_fast_off;
	/* Frames ipk_tcp_rx_one took from ipk_run (tests compare it with ipk_fast_off). */
	uint64_t rx_one_n;
	/* The transmit templates (struct ipk_tt): a slot per connection index modulo
	 * IPK_TT_SLOTS, so connections taking turns (ping-pong over many) each keep
	 * theirs; tt_cur, the slot the last fast segment used, tested first (one
	 * connection sending in a row finds its own there at a fixed cost). Setting
	 * the next-hop cache (link.c) moves tt_gen on, which invalidates every slot,
	 * and points tt_cur at the last one, which no connection ever owns. */
	uint32_t tt_gen;
	struct ipk_tt *tt_cur;
	struct ipk_tt tt_slot[IPK_TT_SLOTS + 1u];

	struct ipk_ip6 ip6;           /* IPv6 (ip6.c, nd.c); unused with cfg.ip6_enable 0 */
	/* TCP over IPv6 (tcp6.c): tcp6_n pairs (cfg.conn_hash_buckets with IPv6 on, else
	 * 0) plus the scratch one, tcp6_n chain heads, the free list and the pair found
	 * last (tested before the hash). */
	struct ipk_tcp6_pair *tcp6_pairs;
	uint32_t *tcp6_heads;
	uint32_t tcp6_n, tcp6_free, tcp6_last;
};
#define IPK_ICMP_RATE_BURST 16u             /* tokens the bucket holds */
#define IPK_ICMP_RATE_NS 10000000ull        /* one token per 10 ms (100 errors/s) */

/* ---------------------------------------------------------- op shims */

/* The engine's clock at an entry point (ipk_run, ipk_tcp_*, ipk_udp_*, ...): `now` is
 * the integrator's monotonic ns and never goes back. A smaller value (a stale clock
 * read, or 0 passed from inside a callback) is taken as the last one seen: deadlines
 * are 32-bit ticks relative to ctx->now and TSvals come from it, so a clock that
 * stepped back would put timers 2^32 ticks away and send segments PAWS drops
 * (RFC 7323 §5.3). Returns the clock to use. */
IPK_INLINE uint64_t ipk_clock(struct ipk_ctx *c, uint64_t now)
{
	if (now < c->now)
		now = c->now;
	c->now = now;
	return now;
}

IPK_INLINE void *ipk_pkt_alloc(struct ipk_ctx *c) { return IPK_OPS(c)->pkt_alloc(IPK_OPQ(c)); }
/* A control packet (ops->pkt_alloc_ctl): allowed below the integrator's data reserve. */
IPK_INLINE void *ipk_pkt_alloc_ctl(struct ipk_ctx *c)
{
	if (IPK_OPS(c)->pkt_alloc_ctl)
		return IPK_OPS(c)->pkt_alloc_ctl(IPK_OPQ(c));
	return IPK_OPS(c)->pkt_alloc(IPK_OPQ(c));
}
IPK_INLINE void ipk_pkt_free(struct ipk_ctx *c, void *p) { IPK_OPS(c)->pkt_free(p, IPK_OPQ(c)); }

/* Descriptor members the integrator declared (ipk_config.pkt_fields) are read in
 * place of the op: a load instead of an indirect call in the library build. A unity
 * build with IPK_OPS_STATIC inlines the ops and ignores the declaration. The copy
 * (one load at -O1 and above) reads the member whatever its declared pointer type,
 * without an aliasing question. */
#ifdef IPK_OPS_STATIC
#define IPK_PKT_FIELD(c, f) ((void)(c), 0)
#else
#define IPK_PKT_FIELD(c, f) ((c)->cfg.pkt_fields & (f))
#endif

IPK_INLINE uint8_t *ipk_pkt_data(struct ipk_ctx *c, void *p)
{
	uint8_t *d;

	if (!IPK_PKT_FIELD(c, IPK_PKT_FIELD_DATA))
		return IPK_OPS(c)->pkt_data(p, IPK_OPQ(c));
	ipk_memcpy(&d, (const uint8_t *)p + c->cfg.pkt_data_off, sizeof(d));
	return d;
}

IPK_INLINE uint32_t ipk_pkt_len(struct ipk_ctx *c, void *p)
{
	uint32_t n;

	if (!IPK_PKT_FIELD(c, IPK_PKT_FIELD_LEN))
		return IPK_OPS(c)->pkt_len(p, IPK_OPQ(c));
	ipk_memcpy(&n, (const uint8_t *)p + c->cfg.pkt_len_off, sizeof(n));
	return n;
}
/* IPK_PKT_FIELD_LEN_SET: the integrator declared that pkt_set_len only stores the
 * length in its len member, so the store is made here (the config check requires
 * IPK_PKT_FIELD_LEN with it, so pkt_len_off is declared). */
IPK_INLINE void ipk_pkt_set_len(struct ipk_ctx *c, void *p, uint32_t n)
{
	if (!IPK_PKT_FIELD(c, IPK_PKT_FIELD_LEN_SET)) {
		IPK_OPS(c)->pkt_set_len(p, n, IPK_OPQ(c));
		return;
	}
	ipk_memcpy((uint8_t *)p + c->cfg.pkt_len_off, &n, sizeof(n));
}
IPK_INLINE void ipk_pkt_adj_head(struct ipk_ctx *c, void *p, uint32_t n) { IPK_OPS(c)->pkt_adj_head(p, n, IPK_OPQ(c)); }
IPK_INLINE void ipk_pkt_trim_tail(struct ipk_ctx *c, void *p, uint32_t n) { IPK_OPS(c)->pkt_trim_tail(p, n, IPK_OPQ(c)); }
IPK_INLINE void *ipk_pkt_clone(struct ipk_ctx *c, void *p) { return IPK_OPS(c)->pkt_clone(p, IPK_OPQ(c)); }
IPK_INLINE void ipk_pkt_chain_append(struct ipk_ctx *c, void *h, void *t) { IPK_OPS(c)->pkt_chain_append(h, t, IPK_OPQ(c)); }

IPK_INLINE void *ipk_pkt_chain_next(struct ipk_ctx *c, void *p)
{
	void *n;

	if (!IPK_PKT_FIELD(c, IPK_PKT_FIELD_NEXT))
		return IPK_OPS(c)->pkt_chain_next(p, IPK_OPQ(c));
	ipk_memcpy(&n, (const uint8_t *)p + c->cfg.pkt_next_off, sizeof(n));
	return n;
}
IPK_INLINE void *ipk_pkt_chain_cut(struct ipk_ctx *c, void *p) { return IPK_OPS(c)->pkt_chain_cut(p, IPK_OPQ(c)); }

/* These two are linked into the same programs as io's public ipk_pkt_free_chain /
 * ipk_pkt_chain_len (include/ipkit/io.h), which take no context: give the core's
 * versions their own link names so the linker cannot bind one to the other. */
#define ipk_pkt_free_chain ipk_core_pkt_free_chain
#define ipk_pkt_chain_len ipk_core_pkt_chain_len
/* Free a whole chain. */
void ipk_pkt_free_chain(struct ipk_ctx *c, void *p);
/* Free a packet that may be a chain; the common flat case costs one free. */
IPK_INLINE void ipk_pkt_release(struct ipk_ctx *c, void *p)
{
	if (ipk_pkt_chain_next(c, p))
		ipk_pkt_free_chain(c, p);
	else
		ipk_pkt_free(c, p);
}
/* Total bytes of a chain. */
uint32_t ipk_pkt_chain_len(struct ipk_ctx *c, void *p);
/* Checksum-add `len` bytes from `off` into the chain (ipk_csum_add semantics). */
uint32_t ipk_csum_chain(struct ipk_ctx *c, void *p, uint32_t off, uint32_t len, uint32_t sum, int *odd);

/* Chain clones of bytes [off, off+len) of packet chain p behind *tail, the last
 * packet of the chain being built, and leave *tail at the last clone: each append
 * is then O(1) for an integrator whose append walks to the end of the chain (a
 * 64 KiB TSO segment is ~45 clones), no payload copied (TCP segments from the send
 * queue, IPv4 fragments). IPK_ENOBUFS when out of descriptors (clones made so far
 * stay chained), IPK_EINVAL when p is shorter. Inline: the TCP transmit path calls
 * it per segment. */
IPK_INLINE int ipk_pkt_slice(struct ipk_ctx *c, void **tail, void *p, uint32_t off,
                             uint32_t len)
{
	for (; p && len > 0; p = ipk_pkt_chain_next(c, p)) {
		uint32_t plen = ipk_pkt_len(c, p), n;
		void *k;

		if (off >= plen) {
			off -= plen;
			continue;
		}
		n = IPK_MIN(len, plen - off);
		k = ipk_pkt_clone(c, p);
		if (!k)
			return IPK_ENOBUFS;
		ipk_pkt_adj_head(c, k, off);
		ipk_pkt_trim_tail(c, k, plen - off - n);
		ipk_pkt_chain_append(c, *tail, k);
		*tail = k;
		len -= n;
		off = 0;
	}
	return len == 0 ? IPK_OK : IPK_EINVAL;
}

/* ------------------------------------------------------------ pools */

struct ipk_conn *ipk_conn_get(struct ipk_ctx *c);       /* zeroed; NULL when empty */
void ipk_conn_put(struct ipk_ctx *c, struct ipk_conn *conn);

IPK_INLINE void ipk_drop(struct ipk_ctx *c, enum ipk_drop why) { c->cnt.drop[why]++; }

/* A zeroed pb from the free list; NULL + counted when empty. Inline: every write and
 * every acknowledged segment takes or gives one, and the library build would
 * otherwise call into stack.c for a few loads and stores. */
IPK_INLINE struct ipk_pb *ipk_pb_get(struct ipk_ctx *c)
{
	struct ipk_pb *pb = c->pb_free;

	if (!pb) {
		ipk_drop(c, IPK_DROP_NO_PB);
		return NULL;
	}
	c->pb_free = pb->next;
	c->pb_nfree--;
	ipk_memset(pb, 0, sizeof(*pb));
	return pb;
}

/* Back to the free list; does not free pb->pkt. */
IPK_INLINE void ipk_pb_put(struct ipk_ctx *c, struct ipk_pb *pb)
{
	pb->pkt = NULL;
	pb->next = c->pb_free;
	c->pb_free = pb;
	c->pb_nfree++;
}
/* Count `why` and free the packet chain. */
void ipk_drop_pkt(struct ipk_ctx *c, void *pkt, enum ipk_drop why);

/* -------------------------------------------------------- link / ARP */

/* Input of one frame from ipk_run (takes ownership). */
void ipk_link_input(struct ipk_ctx *c, void *pkt);
/*
 * Output of a frame whose IPv4 datagram starts at offset c->l2_len of pkt (the first
 * l2_len bytes are reserved for the link header, which this fills). next_hop_be is
 * the on-link destination (ip4.c picks gateway or destination). Ownership passes.
 * Returns 0, or a negative error when the packet was dropped.
 */
int ipk_link_output_ip4(struct ipk_ctx *c, void *pkt, uint32_t next_hop_be);
/* Hand a finished frame to ops->tx, counting it. */
void ipk_link_tx(struct ipk_ctx *c, void *pkt);
/* The same for a frame of `len` bytes the caller knows (no chain walk to count it). */
IPK_INLINE void ipk_link_tx_len(struct ipk_ctx *c, void *pkt, uint32_t len)
{
	c->cnt.tx_frames++;
	c->cnt.tx_bytes += len;
	c->tx_queued++;
	IPK_OPS(c)->tx(pkt, IPK_OPQ(c));
}
/* Remember next hop nh_be at mac until `until` (ctx nhc_*); and forget it, which
 * arp.c does on every change to its table. */
void ipk_link_nhc_set(struct ipk_ctx *c, uint32_t nh_be, const uint8_t mac[6], uint64_t until);
IPK_INLINE void ipk_link_nhc_clear(struct ipk_ctx *c) { c->nhc_until = 0; }
/* Fill the Ethernet header (first 14 bytes of pkt) and transmit. Ownership passes. */
void ipk_link_eth_tx(struct ipk_ctx *c, void *pkt, const uint8_t dst_mac[6], uint16_t type);
/* Call ops->tx_flush when frames were queued since the last flush (end of every
 * entry point). */
void ipk_link_flush(struct ipk_ctx *c);

void ipk_arp_input(struct ipk_ctx *c, void *pkt, uint32_t off);
/* Resolve next_hop for pkt: transmits now when known, else queues (bounded) and
 * sends a request. Ownership passes. */
int ipk_arp_output(struct ipk_ctx *c, void *pkt, uint32_t next_hop_be);
uint64_t ipk_arp_timer(struct ipk_ctx *c, uint64_t now); /* returns next deadline */

/* --------------------------------------------------------------- IPv4 */

void ipk_ip4_input(struct ipk_ctx *c, void *pkt, uint32_t off);
/* Allocate a packet for an outgoing datagram: returns it with length 0; the
 * transport writes its header at ipk_l4_off(c). NULL (counted) when none. */
void *ipk_ip4_alloc(struct ipk_ctx *c);
/* Receive memory shared by TCP's out-of-order queues and IPv4 reassembly (tcp_mem.c,
 * ctx->rmem_pkts against cfg.rmem_max): what a held chain costs, in pkt_buf_size
 * units, and whether `need` more fit the context's budget. */
uint32_t ipk_rmem_units(struct ipk_ctx *ctx, void *pkt);
int ipk_rmem_ctx_fits(const struct ipk_ctx *ctx, uint32_t need);
/* Set ctx->wmem_lim from cfg.wmem_max and the pbs given (at init, ipk_add_pbs). */
void ipk_wmem_limit_set(struct ipk_ctx *ctx);
void *ipk_ip4_alloc_ctl(struct ipk_ctx *c);
IPK_INLINE uint32_t ipk_l4_off(const struct ipk_ctx *c) { return c->l2_len + IPK_IP4_HLEN; }
/*
 * Finish and send a datagram: pkt (maybe a chain) holds l2 room + 20 bytes of IPv4
 * header room + l4_len transport bytes. Fills the IPv4 header (DF set), applies
 * checksum offload marks (meta is completed with l2/l3 and the IP flag), routes,
 * and passes to the link. Above the MTU (no TSO, no offload flags in meta) it
 * fragments (ipk_ip4_output_frags). Ownership passes.
 */
int ipk_ip4_output(struct ipk_ctx *c, void *pkt, uint32_t dst_be, uint8_t proto,
                   uint32_t l4_len, struct ipk_tx_meta *meta);
/*
 * Send the datagram in pkt (laid out as for ipk_ip4_output, transport checksum
 * already final) as RFC 791 fragments of at most the MTU, all with one ID from the
 * fragment ID counter. All fragments are built before any is sent. Returns
 * IPK_EMSGSIZE (above 65535 bytes), IPK_EHOSTUNREACH (no route) or IPK_ENOBUFS
 * (pool dry: counted as IPK_DROP_NO_PKT, nothing sent) with pkt still the caller's;
 * otherwise pkt is consumed and the result is the first link error or 0.
 */
int ipk_ip4_output_frags(struct ipk_ctx *c, void *pkt, uint32_t dst_be, uint8_t proto,
                         uint32_t l4_len, uint8_t tos);
uint64_t ipk_ip4_frag_timer(struct ipk_ctx *c, uint64_t now);
/* Is this address one we answer to (ours, broadcast)? */
int ipk_ip4_is_local(const struct ipk_ctx *c, uint32_t ip_be);
/* Limited broadcast or our subnet's broadcast / network address? */
int ipk_ip4_is_bcast(const struct ipk_ctx *c, uint32_t ip_be);
int ipk_ip4_subnet_has_bcast(const struct ipk_config *cfg);
/* Tests only: every receive shortcut off (ctx->fast_off). */
void ipk_fast_off(struct ipk_ctx *ctx);
/* ipk_ip4_is_bcast inline, for the receive paths (ip4.c, tcp_in.c ipk_tcp_rx_one). */
IPK_INLINE int ipk_ip4_bcast_in(const struct ipk_ctx *c, uint32_t ip_be)
{
	uint32_t mask = c->cfg.netmask_be, host = ~mask, part = ip_be & host;

	if (ip_be == 0xffffffffu)
		return 1;
	if (!c->ip4_has_bcast || (ip_be & mask) != (c->cfg.ip4_be & mask))
		return 0;
	return part == host || part == 0;
}
/*
 * The one rule for a source address a datagram or an ARP binding may carry (every
 * receive path uses it: ip4.c ip4_check and ip4_input_fast through
 * ipk_ip4_fast_accept, tcp_in.c ipk_tcp_rx_one likewise, arp.c, icmp4.c). Returns
 * -1 when src_be can be a host that we can answer, else the drop reason:
 *  - IPK_DROP_IP4_BAD_SRC: RFC 1122 §3.2.1.3 / RFC 6890: 0/8 "this network"
 *    (0.0.0.0 itself is allowed only for UDP to a broadcast, udp_bcast: a host
 *    booting with DHCP/BOOTP, RFC 2131 §4.1), 127/8 loopback, 224/4 multicast,
 *    240/4 reserved (class E, with 255.255.255.255), our subnet's broadcast;
 *  - IPK_DROP_IP4_LAND: our own address (a "land" packet: we would answer
 *    ourselves, ARP for ourselves and keep half-open connections to ourselves);
 *  - IPK_DROP_IP4_SRC_NO_ROUTE: RFC 3704 §2.4 loose reverse-path check: no route
 *    back (off-link with no gateway), so nothing we send in reply can leave; a
 *    SYN from there would only retry into the void.
 */
IPK_INLINE int ipk_ip4_src_check(const struct ipk_ctx *c, uint32_t src_be, int udp_bcast)
{
	uint8_t top = (uint8_t)(ipk_ntohl(src_be) >> 24);
	uint32_t host = ~c->cfg.netmask_be, part = src_be & host;

	/* 0/8 and 224/4 + 240/4 in one compare: top + 32 wraps them onto 0..32 */
	if ((uint8_t)(top + 32u) <= 32u || top == 127)
		return src_be == 0 && udp_bcast ? -1 : IPK_DROP_IP4_BAD_SRC;
	if (((src_be ^ c->cfg.ip4_be) & c->cfg.netmask_be) != 0)
		return c->cfg.gateway_be != 0 ? -1 : IPK_DROP_IP4_SRC_NO_ROUTE;
	if (src_be == c->cfg.ip4_be)
		return IPK_DROP_IP4_LAND;
	/* on our subnet: its broadcast address (ipk_ip4_bcast_in's rule) */
	if (c->ip4_has_bcast && (part == host || part == 0))
		return IPK_DROP_IP4_BAD_SRC;
	return -1;
}
/*
 * IPv4 acceptance for the datagram almost every frame carries, shared by both
 * receive shortcuts (ip4.c ip4_input_fast, tcp_in.c ipk_tcp_rx_one) so they cannot
 * drift from each other: p holds len bytes from the IPv4 header on. Returns the
 * datagram's total length when it is one ip4_check would accept with the same
 * rules, read the short way: version 4 with a 20-byte header (no options to walk),
 * not a fragment (RFC 791 §3.2), total length within the frame, to our unicast
 * address (ip4_self_ok: ours is set and is no broadcast), from a source
 * ipk_ip4_src_check accepts (remembered for the last source that passed:
 * ctx->src_ok_be). 0 for anything else, with nothing counted: the full
 * path (ip4_check) then judges it with the same predicates and counts the reason.
 * The header checksum is the caller's (each has its own NIC-verdict path).
 * tests/tcp/test_tcp_rxdiff.c proves the equivalence frame by frame.
 */
IPK_INLINE uint32_t ipk_ip4_fast_accept(struct ipk_ctx *c, const uint8_t *p, uint32_t len)
{
	uint32_t tot, src;

	if (len < IPK_IP4_HLEN || p[0] != 0x45 ||
	    (ipk_rd16(p + 6) & (IPK_IP4_MF | IPK_IP4_OFFMASK)) != 0)
		return 0;
	tot = ipk_rd16(p + 2);
	if (tot < IPK_IP4_HLEN || tot > len || !c->ip4_self_ok ||
	    ipk_rdbe32(p + 16) != c->cfg.ip4_be)
		return 0;
	src = ipk_rdbe32(p + 12);
	if (src != c->src_ok_be) {
		if (ipk_ip4_src_check(c, src, 0) >= 0)
			return 0;
		c->src_ok_be = src;
	}
	return tot;
}
/* RFC 8200 §4.5: send the datagram g as fragments of at most the path MTU to dst.
 * Returns 0 or a negative IPK_E* (a fragment that could not be built ends it). */
int ipk_ip6_output_frags(struct ipk_ctx *c, const uint8_t src[16], const uint8_t dst[16],
                         uint8_t proto, const struct ipk_ip6_gather *g);
/* Path MTU toward dst (RFC 8201): the link MTU or less, never below 1280. */
uint32_t ipk_ip6_pmtu(const struct ipk_ctx *c, const uint8_t dst[16]);
/* A Packet Too Big for a datagram of ours to dst said mtu. */
void ipk_ip6_pmtu_update(struct ipk_ctx *c, const uint8_t dst[16], uint32_t mtu);
/* On-link next hop for dst (dst itself, or the gateway); 0 when there is no route.
 * Inline: every transmitted datagram asks. */
IPK_INLINE uint32_t ipk_ip4_next_hop(const struct ipk_ctx *c, uint32_t dst_be)
{
	uint32_t mask = c->cfg.netmask_be;

	if (dst_be == 0)
		return 0;
	if (dst_be == 0xffffffffu || (dst_be & mask) == (c->cfg.ip4_be & mask))
		return dst_be;
	return c->cfg.gateway_be;
}

/* --------------------------------------------------------------- IPv6 */

/* Received-datagram facts passed from ip6.c to ICMPv6 and UDP. */
struct ipk_rx6 {
	struct ipk_ip6_hdr ip;  /* the parsed IPv6 header */
	uint32_t l3_off;        /* IPv6 header offset in pkt */
	uint32_t l4_off;        /* upper-layer header offset in pkt */
	uint32_t l4_len;        /* upper-layer bytes */
	uint8_t dst_mcast;
	uint8_t chained;        /* pkt is a chain: reassembly (frag6.c) or, with lro, the NIC */
	uint8_t lro;            /* the chain is one coalesced TCP segment (IPK_CAP_LRO) */
	uint8_t ra;             /* a hop-by-hop router alert came with it (RFC 2711) */
};

/* An IPv6 frame from ipk_link_input (takes ownership); off = link header length. */
void ipk_ip6_input(struct ipk_ctx *c, void *pkt, uint32_t off);
/* Frame room before the upper layer: link header + 40. */
IPK_INLINE uint32_t ipk_l4_off6(const struct ipk_ctx *c) { return c->l2_len + IPK_IP6_HLEN; }
/* Fill the IPv6 header of pkt (l2 room + 40 + l4_len bytes) and send it to dst
 * (next hop by ipk_ip6_route, resolved by ND). hlim 0: the context's hop limit.
 * Ownership passes. Returns 0 or a negative IPK_E*. */
int ipk_ip6_output(struct ipk_ctx *c, void *pkt, const uint8_t src[16], const uint8_t dst[16],
                   uint8_t proto, uint32_t l4_len, uint8_t hlim);
/* ipk_ip6_output with the hop limit of the context, meta->tos as the Traffic Class
 * and, when meta->flags asks for an offload, IPK_TXOFF_IP6 with the link and IPv6
 * header lengths marked through ops->tx_offload (IPK_CAP_TX_CSUM_TCP6, TSO6). */
int ipk_ip6_output_meta(struct ipk_ctx *c, void *pkt, const uint8_t src[16],
                        const uint8_t dst[16], uint8_t proto, uint32_t l4_len,
                        struct ipk_tx_meta *meta);
/* Our source address for dst (a usable one; link-local for link-local/multicast
 * destinations); 0 when there is none. */
int ipk_ip6_src_select(const struct ipk_ctx *c, const uint8_t dst[16], uint8_t out[16]);
/* Is a an address of ours in state >= the given state? Returns the slot or -1. */
int ipk_ip6_addr_find(const struct ipk_ctx *c, const uint8_t a[16]);
/* ip6.c: -1 when a datagram from src to dst is one we take (RFC 4291 address
 * rules, our usable address, no land), else the drop reason. */
int ipk_ip6_addr_check(const struct ipk_ctx *c, const uint8_t src[16], const uint8_t dst[16]);
/* ICMPv6 error about the datagram at l3_off of pkt (which stays the caller's),
 * rate-limited, never about an error or to a multicast source (RFC 4443 §2.4(e)). */
void ipk_icmp6_send_error(struct ipk_ctx *c, void *pkt, const struct ipk_rx6 *rx,
                          uint8_t type, uint8_t code, uint32_t param, int mcast_ok);
void ipk_icmp6_input(struct ipk_ctx *c, void *pkt, const struct ipk_rx6 *rx);
/* The NIC's word on pkt's upper-layer checksum (IPK_CAP_RX_CSUM_L4): 1 verified,
 * -1 bad, 0 not checked (verify in software). */
IPK_INLINE int ipk_ip6_rx_csum(struct ipk_ctx *c, void *pkt)
{
	uint32_t v;

	if (!(c->cfg.caps & IPK_CAP_RX_CSUM_L4))
		return 0;
	v = IPK_OPS(c)->rx_csum(pkt, IPK_OPQ(c));
	return (v & IPK_RXCSUM_L4_BAD) ? -1 : (v & IPK_RXCSUM_L4_GOOD) ? 1 : 0;
}
void ipk_udp_input6(struct ipk_ctx *c, void *pkt, const struct ipk_rx6 *rx);
/* frag6.c: a fragment (x from the walk) of the datagram in pkt; takes ownership.
 * A completed datagram goes on to the upper layer as a chain. */
void ipk_frag6_input(struct ipk_ctx *c, void *pkt, struct ipk_rx6 *rx,
                     const struct ipk_ip6_ext *x);
uint64_t ipk_frag6_timer(struct ipk_ctx *c, uint64_t now);
/* The upper layer of a datagram that passed the checks (ip6.c). */
void ipk_ip6_deliver(struct ipk_ctx *c, void *pkt, struct ipk_rx6 *rx, uint8_t proto,
                     uint32_t nh_off);
/* Take address slot i for a, tentative (DAD first), lifetimes infinite. */
void ipk_ip6_addr_add(struct ipk_ctx *c, int i, const uint8_t a[16], uint8_t plen, int slaac);
/* A packet of link + 40 + l4_len bytes (length set); NULL (counted) when the pool
 * is dry or it would not fit one buffer. ctl: ops->pkt_alloc_ctl. */
void *ipk_ip6_alloc(struct ipk_ctx *c, uint32_t l4_len, int ctl);
/* An IPv6 event (ND, DAD, RS, lifetimes, reassembly) due at t. It rides on the
 * ARP deadline (stack.c run_timers: neighbor timers of both families), so
 * ipk_run pays no extra test for IPv6 on the IPv4 path. */
IPK_INLINE void ipk_ip6_arm(struct ipk_ctx *c, uint64_t t)
{
	if (t < c->ip6.deadline)
		c->ip6.deadline = t;
	if (t < c->arp_deadline)
		c->arp_deadline = t;
}
/* Run at ctx init when cfg.ip6_enable (addresses tentative, RS scheduled). */
void ipk_ip6_start(struct ipk_ctx *c);
uint64_t ipk_ip6_timer(struct ipk_ctx *c, uint64_t now); /* next deadline */
/* nd.c */
void ipk_nd_input(struct ipk_ctx *c, void *pkt, const struct ipk_rx6 *rx, const uint8_t *msg);
/* Send pkt (a whole frame, IPv6 header filled) to on-link next hop nh: now when
 * the neighbor is known, else queued while an NS asks. Ownership passes. */
int ipk_nd_output(struct ipk_ctx *c, void *pkt, const uint8_t nh[16]);
/* ipk_nd_output for a unicast dst whose next hop is nh: also keeps dst's header in
 * the one-entry cache ipk_nd_hc_tx reads while the neighbour is REACHABLE. */
int ipk_nd_output_dst(struct ipk_ctx *c, void *pkt, const uint8_t nh[16], const uint8_t dst[16]);
/* Send pkt (IPv6 header filled) to unicast dst from the cache: 1 when sent
 * (ownership passed), 0 when the cache does not hold dst (pkt untouched). */
/* mld.c (RFC 3810): an MLD message (query or report) at m, checksum checked; -1 when
 * taken (the caller frees the packet), else the drop reason. */
int ipk_mld_input(struct ipk_ctx *c, const struct ipk_rx6 *rx, const uint8_t *m);
/* The pending query answer when due; the next MLD deadline. */
uint64_t ipk_mld_timer(struct ipk_ctx *c, uint64_t now);
int ipk_nd_hc_tx(struct ipk_ctx *c, void *pkt, const uint8_t dst[16]);
/* 1 when ipk_nd_hc_tx would send to dst now (the cache holds dst, still valid). */
int ipk_nd_hc_ok(const struct ipk_ctx *c, const uint8_t dst[16]);
/* On-link next hop for dst (dst itself or a default router); 0 when none. */
int ipk_ip6_route(const struct ipk_ctx *c, const uint8_t dst[16], uint8_t nh[16]);
uint64_t ipk_nd_timer(struct ipk_ctx *c, uint64_t now);
/* Send a Neighbor Solicitation for target: src NULL = from :: (DAD) to the
 * solicited-node group; dst_mac non-NULL = unicast probe to it (RFC 4861 §7.2.2). */
void ipk_nd_send_ns(struct ipk_ctx *c, const uint8_t target[16], const uint8_t *src,
                    const uint8_t *dst_mac);
void ipk_nd_send_rs(struct ipk_ctx *c);
void ipk_nd_send_mld(struct ipk_ctx *c, const uint8_t addr[16]);

/* --------------------------------------------------------------- ICMP */

void ipk_icmp_input(struct ipk_ctx *c, void *pkt, const struct ipk_rx *rx);
/* Send an ICMP error quoting the offending datagram (its IPv4 header at l3_off of
 * pkt, which stays the caller's). */
void ipk_icmp_send_error(struct ipk_ctx *c, void *pkt, uint32_t l3_off, uint8_t type,
                         uint8_t code);

/* ---------------------------------------------------------------- UDP */

void ipk_udp_input(struct ipk_ctx *c, void *pkt, const struct ipk_rx *rx);

/* ---------------------------------------------------------------- TCP */

void ipk_tcp_input(struct ipk_ctx *c, void *pkt, const struct ipk_rx *rx);
/* The common frame, whole: a flat Ethernet (or raw IPv4) frame carrying an IPv4
 * datagram without options or fragmentation to our address, with a TCP segment
 * whose options are none or exactly NOP,NOP,TS, every checksum right (tcp_in.c).
 * len is ipk_pkt_len(pkt), which the caller (ipk_run) has read already. Returns 1 when it took the frame (ownership passes), 0 with nothing changed and
 * nothing counted for anything else: ipk_link_input then judges it. */
int ipk_tcp_rx_one(struct ipk_ctx *c, void *pkt, uint32_t len);
/* An ICMP error quoted a TCP segment of ours: `quote` holds the quoted IPv4 header
 * and at least 8 bytes after it (qlen bytes, already checked >= ihl + 8). */
void ipk_tcp_icmp_error(struct ipk_ctx *c, uint8_t type, uint8_t code, uint16_t mtu,
                        const uint8_t *quote, uint32_t qlen);
uint64_t ipk_tcp_timer(struct ipk_ctx *c, uint64_t now); /* returns next deadline */
/* tcp6.c: a TCP segment over IPv6 (takes ownership of pkt). */
void ipk_tcp_input6(struct ipk_ctx *c, void *pkt, const struct ipk_rx6 *rx);
/* An ICMPv6 error quoting a TCP segment of ours (q parsed from the error body). */
void ipk_tcp_icmp6_error(struct ipk_ctx *c, uint8_t type, uint8_t code,
                         const struct ipk_icmp6_quote *q);
/* Bytes of context memory the pair table takes under cfg (0 with IPv6 off), and
 * its set-up at ipk_ctx_init over mem (8-aligned, that many bytes). */
size_t ipk_tcp6_mem_size(const struct ipk_config *cfg);
void ipk_tcp6_init(struct ipk_ctx *c, void *mem);

/* ---------------------------------------------------------------- RSS */

/* 1 when cfg's RSS fields are consistent (off, or a table that names rss_queue). */
int ipk_rss_config_valid(const struct ipk_config *cfg);
/* 1 when a segment from peer:peer_port to us:local_port would reach this context's
 * queue (always 1 with RSS off). */
int ipk_rss_port_ok(const struct ipk_ctx *ctx, uint32_t peer_be, uint16_t peer_port_be,
                    uint16_t local_port_be);
/* The same for IPv6 (hash-aware port choice of an IPv6 active open): 1 when a
 * segment from peer:peer_port to local:local_port (local = the source address the
 * connection will use) would reach this context's queue; always 1 with RSS off. */
int ipk_rss_port_ok6(const struct ipk_ctx *ctx, const uint8_t local[16],
                     const uint8_t peer[16], uint16_t peer_port_be, uint16_t local_port_be);

#endif
