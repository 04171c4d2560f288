/*
 * ipkit core: a freestanding TCP/IP engine (Ethernet, ARP, IPv4, ICMP, UDP, TCP).
 *
 * The core has no libc, no allocator, no threads, no clock and no loop of its own.
 * Everything it needs comes from the integrator:
 *
 *   - memory for the context (ipk_ctx_size), connection objects (ipk_conn_size) and
 *     packet-buffer descriptors (ipk_pb_size), handed over before or after init;
 *   - packets: the integrator's own objects (an mbuf, an XDP frame, a pool slot),
 *     touched only through the packet ops in struct ipk_ops;
 *   - time: every entry point takes `now` in nanoseconds; ipk_run returns the next
 *     deadline (see "Time" below);
 *   - events: delivered by callback from inside ipk_run and the other entry points.
 *
 * One context serves one thread / one NIC queue. Contexts share nothing, so many of
 * them can live in one process (the simulator runs hundreds).
 *
 * Byte order: every value that ends in _be is in network byte order (as it sits in
 * the packet). Ports and addresses cross the API in network order so that they can be
 * copied straight from and to headers; use ipk_htons / ipk_htonl to build them.
 *
 * Packet ownership, the one rule: a packet handed to the core (ipk_run's batch,
 * ipk_tcp_send, ipk_udp_send) belongs to the core from then on, which frees it through
 * ops->pkt_free or passes it to ops->tx; a packet handed to the integrator (ops->tx)
 * belongs to the integrator. Packets shown in events (payload, UDP datagram, ICMP
 * reply) stay the core's and are valid only during the callback; clone them with the
 * integrator's own clone to keep them.
 *
 * Errors: one convention for every layer, described under "errors" below (negative
 * Linux errno values; ipk_strerror).
 *
 * Threads: a context, and every connection in it, belongs to one thread at a time;
 * the core takes no lock. Calls on different contexts may run concurrently. The
 * functions that take no context (ipk_config_default, ipk_ctx_size, ipk_conn_size,
 * ipk_pb_size, ipk_config_check, ipk_drop_name, ipk_strerror, ipk_rss_*,
 * ipk_htons/ipk_htonl) touch
 * no shared state and may be called from any thread.
 *
 * Calling the core from a callback (what the code allows):
 *   - Event callbacks (tcp_accepted, tcp_connected, tcp_payload, tcp_acked,
 *     tcp_acked_pkt, tcp_closed, udp_recv, icmp_echo_reply; also rx_peek, between
 *     two frames) run
 *     inside ipk_run or inside an API call
 *     on the same context, and may call any function of this header on that context,
 *     on any of its connections, except ipk_run and ipk_ctx_init. A connection is
 *     held while its callback runs, so ipk_tcp_close (FIN after the queued data)
 *     and ipk_tcp_abort on it, even from its own tcp_payload or tcp_acked, are safe:
 *     after an abort the core finishes the event, then frees the connection, and
 *     later calls on the handle return IPK_ECLOSED. Writes on the
 *     connection whose segment is being processed are queued and sent once, with the
 *     ACK, at the end of that segment. Pass the `now` of the entry point the callback
 *     runs in (the node runtime: ipk_node_now).
 *   - tcp_closed: the handle is invalid once the callback returns (its object goes
 *     back to the pool and is reused by a later connection, so a stale handle may
 *     name another connection: drop every copy of it in tcp_closed).
 *   - All other ops (the packet ops, tx, tx_flush, tx_offload, rx_csum, random,
 *     isn_hash, arp_resolve, arp_learned, tcp_accept, pkt_low) are called in the middle of
 *     the core's work and must not call any function of this header on the context
 *     (ipk_htons and the other context-free helpers excepted). They must not block.
 *
 * Time: `now` is a monotonic clock in nanoseconds (any epoch, e.g. CLOCK_MONOTONIC)
 * that never goes back. A value smaller than the largest one the context has seen
 * (a stale read, 0 passed from inside a callback) is taken as that largest value:
 * every entry point clamps it, because deadlines are kept relative to the last time
 * and RFC 7323 timestamps come from it (a clock stepping back would stall timers and
 * make both ends drop our segments as PAWS-old).
 */
#ifndef IPKIT_CORE_H
#define IPKIT_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- errors */

/*
 * The error convention of every ipkit layer (core.h, io.h, runtime.h): a function
 * that can fail returns 0, or a non-negative count or index, on success and a
 * negative error code on failure. The codes are the negative Linux errno values
 * (IPK_EINVAL == -EINVAL == -22), written here as literal numbers so that the
 * freestanding core needs no <errno.h>; io and runtime return -errno from the
 * system in the same space, so one `rc < 0` test and one ipk_strerror (or
 * strerror(-rc) in hosted code) serve every layer. The core returns only the codes
 * below; io and runtime may return any -errno their system calls give. Functions
 * returning a pointer return NULL on failure instead (and the hosted layers write
 * a one-line reason to their `err` buffer); functions that cannot fail say so.
 * Compare codes with the names, never with numbers.
 */
#define IPK_OK 0
#define IPK_ENOENT (-2)        /* ENOENT: nothing bound / listening there */
#define IPK_EAGAIN (-11)       /* EAGAIN: send buffer full or window closed: retry after an event */
#define IPK_ENOMEM (-12)       /* ENOMEM: a pool (connections or pb descriptors) is empty */
#define IPK_EINVAL (-22)       /* EINVAL: bad argument: NULL handle, bad length, bad config */
#define IPK_ECLOSED (-32)      /* EPIPE: handle refers to a connection that is closed or freed */
#define IPK_EMSGSIZE (-90)     /* EMSGSIZE: datagram larger than the path allows */
#define IPK_EADDRINUSE (-98)   /* EADDRINUSE: port already bound / listening / 4-tuple in use */
#define IPK_ENOBUFS (-105)     /* ENOBUFS: ops->pkt_alloc returned NULL */
#define IPK_ENOTCONN (-107)    /* ENOTCONN: connection not in a state that allows the call */
#define IPK_EHOSTUNREACH (-113) /* EHOSTUNREACH: no route or ARP resolution failed */

/* A short description of an error code ("invalid argument"): the IPK_E* codes and
 * the few other -errno values io and runtime return commonly; "unknown error" for
 * anything else, "ok" for 0 or a positive count. Never NULL; static strings, no
 * libc: callable anywhere, also from inside ops callbacks. */
const char *ipk_strerror(int err);

/* ------------------------------------------------------------- constants */

#define IPK_LINK_ETH 0   /* Ethernet II frames */
#define IPK_LINK_RAWIP 1 /* bare IPv4 packets (TUN-style devices) */

/* NIC capabilities, declared by the integrator in ipk_config.caps. The core uses
 * each when present and does the work in software when absent. */
#define IPK_CAP_RX_CSUM_IP4 (1u << 0) /* ops->rx_csum reports IPv4 header checksum status */
#define IPK_CAP_RX_CSUM_L4 (1u << 1)  /* ops->rx_csum reports TCP/UDP checksum status */
#define IPK_CAP_TX_CSUM_IP4 (1u << 2) /* NIC fills the IPv4 header checksum */
#define IPK_CAP_TX_CSUM_TCP (1u << 3) /* NIC fills the TCP checksum (core writes pseudo-header sum) */
#define IPK_CAP_TX_CSUM_UDP (1u << 4) /* NIC fills the UDP checksum (core writes pseudo-header sum) */
#define IPK_CAP_TSO (1u << 5)         /* NIC segments TCP up to ipk_config.tso_max bytes */
#define IPK_CAP_SG (1u << 6)          /* NIC transmits packet chains (scatter-gather) */
/* NIC may deliver coalesced TCP segments larger than the MSS, flat or as a chain, or
 * frames larger than one buffer as a chain (AF_XDP multi-buffer, one packet per frame):
 * with it ipk_run accepts a received chain (without it a chain is dropped as
 * IPK_DROP_CHAIN) when it is one whole, unfragmented IPv4 TCP datagram whose
 * link, IPv4 and TCP headers sit in the first packet and whose length is exactly
 * the IPv4 total length; anything else is dropped and counted (IPK_DROP_CHAIN,
 * IPK_DROP_IP4_MALFORMED, IPK_DROP_TCP_MALFORMED). The segment stays a chain in
 * the core's queues and reaches tcp_payload one packet at a time. Chained UDP, ICMP
 * and IPv4 fragments are not taken (IPK_DROP_CHAIN). */
#define IPK_CAP_LRO (1u << 7)
/* IPv6 (issue 19): NICs declare these apart from IPv4's (Linux NETIF_F_IPV6_CSUM,
 * NETIF_F_TSO6; virtio VIRTIO_NET_F_HOST_TSO6). With IPK_CAP_TX_CSUM_TCP6 the core
 * writes the folded IPv6 pseudo-header sum (RFC 8200 §8.1) in the TCP checksum
 * field and marks IPK_TXOFF_TCP_CSUM | IPK_TXOFF_IP6; with IPK_CAP_TSO6 it hands
 * IPv6 TCP segments up to min(tso_max, 65535 - 60) payload bytes marked
 * IPK_TXOFF_TSO | IPK_TXOFF_IP6 (the NIC fills each segment's checksum, as with
 * IPK_CAP_TSO). IPv6 receive uses IPK_CAP_RX_CSUM_L4 and
 * IPK_CAP_LRO as IPv4 does (a chain: one whole IPv6 TCP segment, no extension
 * header, the IPv6 and TCP headers in the first packet). */
#define IPK_CAP_TX_CSUM_TCP6 (1u << 8)
#define IPK_CAP_TSO6 (1u << 9)
/* The NIC fills the UDP checksum over IPv6: the core writes the folded IPv6
 * pseudo-header sum in the field and marks IPK_TXOFF_UDP_CSUM | IPK_TXOFF_IP6 (a
 * datagram sent as fragments is summed by the core, RFC 8200 §4.5). The NIC must
 * send a computed 0 as 0xffff (RFC 8200 §8.1: 0 is not allowed over IPv6). */
#define IPK_CAP_TX_CSUM_UDP6 (1u << 10)

/* ipk_config.pkt_fields: packet descriptor members the core may read directly. */
#define IPK_PKT_FIELD_DATA (1u << 0) /* pkt_data_off: uint8_t *data */
#define IPK_PKT_FIELD_LEN (1u << 1)  /* pkt_len_off: uint32_t len */
#define IPK_PKT_FIELD_NEXT (1u << 2) /* pkt_next_off: the chain link (a pointer) */
/* With IPK_PKT_FIELD_LEN: pkt_set_len does nothing but store its argument in the
 * pkt_len_off member, so the core stores it there itself (no pkt_set_len call). */
#define IPK_PKT_FIELD_LEN_SET (1u << 3)
/* Not a member: pkt_alloc has no refusal policy (no reserve kept from data
 * allocations) and a packet the core got from pkt_alloc and would pkt_free is, for
 * its next pkt_alloc, as good as a fresh one once the core sets its length. The
 * core may then, inside one ipk_run call, hand such a packet (a copy-write's
 * packet, flat, never cloned, data pointer untouched) to its next copy-write
 * instead of freeing one and allocating another: one alloc/free pair fewer per
 * request-response each way. Whatever it kept is freed before ipk_run returns.
 * Honoured in unity builds too. */
#define IPK_PKT_RECYCLE (1u << 4)

/* Bytes of a Toeplitz RSS key (the size NICs use for IPv4/IPv6 hashing). */
#define IPK_RSS_KEY_LEN 40

/* ops->rx_csum result bits */
#define IPK_RXCSUM_IP4_GOOD (1u << 0)
#define IPK_RXCSUM_IP4_BAD (1u << 1)
#define IPK_RXCSUM_L4_GOOD (1u << 2)
#define IPK_RXCSUM_L4_BAD (1u << 3)

/* Transmit offload requests placed on a packet through ops->tx_offload. */
#define IPK_TXOFF_IP4_CSUM (1u << 0)
#define IPK_TXOFF_TCP_CSUM (1u << 1)
#define IPK_TXOFF_UDP_CSUM (1u << 2)
#define IPK_TXOFF_TSO (1u << 3)
/* The frame is IPv6: l3_len is the IPv6 header (40), the pseudo-header sum in the
 * TCP checksum field the IPv6 one; tos is the Traffic Class. */
#define IPK_TXOFF_IP6 (1u << 4)

struct ipk_tx_meta {
	uint32_t flags;  /* IPK_TXOFF_* */
	uint16_t l2_len; /* bytes of link header (0 for IPK_LINK_RAWIP) */
	uint16_t l3_len; /* bytes of IPv4 header (IPv6: 40, IPK_TXOFF_IP6) */
	uint16_t l4_len; /* bytes of TCP/UDP header */
	uint16_t mss;    /* with IPK_TXOFF_TSO: payload bytes per segment */
	uint8_t tos;     /* IPv4 TOS byte or IPv6 Traffic Class the core wrote (RFC 3168
	                  * ECN bits in the low two) */
};

/* Why a connection was closed (ops->tcp_closed). */
enum ipk_close_reason {
	IPK_CLOSE_NORMAL = 0,   /* both FINs exchanged and acknowledged */
	IPK_CLOSE_RESET = 1,    /* peer sent a valid RST */
	IPK_CLOSE_REFUSED = 2,  /* RST in answer to our SYN */
	IPK_CLOSE_TIMEOUT = 3,  /* retransmissions exhausted */
	IPK_CLOSE_ABORTED = 4,  /* ipk_tcp_abort called */
	IPK_CLOSE_UNREACH = 5   /* ICMP hard error during connection setup */
};

/* Reasons a received frame or segment was dropped; ipk_counters.drop[reason]. */
enum ipk_drop {
	IPK_DROP_RUNT = 0,          /* shorter than its link header */
	IPK_DROP_ETHERTYPE,         /* unsupported EtherType */
	IPK_DROP_NOT_FOR_US,        /* destination MAC or IPv4 address is not ours */
	IPK_DROP_ARP_MALFORMED,     /* bad ARP header or lengths */
	IPK_DROP_IP4_MALFORMED,     /* bad version, IHL, total length */
	IPK_DROP_IP4_CSUM,          /* IPv4 header checksum */
	IPK_DROP_IP4_OPTIONS,       /* options we refuse (source route etc.) */
	IPK_DROP_IP4_PROTO,         /* unsupported protocol */
	IPK_DROP_IP4_BAD_SRC,       /* broadcast / multicast / loopback source */
	IPK_DROP_FRAG_NOMEM,        /* reassembly resources exhausted */
	IPK_DROP_FRAG_OVERLAP,      /* overlapping fragments: datagram discarded */
	IPK_DROP_FRAG_TIMEOUT,      /* reassembly timed out (per fragment freed) */
	IPK_DROP_FRAG_TOO_BIG,      /* a datagram being reassembled passes 65535 bytes,
	                             * cfg.frag_max_bytes or cfg.frag_max_pieces fragments
	                             * (never a complete datagram larger than a buffer:
	                             * ICMP echo answers those from the chain) */
	IPK_DROP_ICMP_MALFORMED,    /* short or bad checksum */
	IPK_DROP_ICMP_TYPE,         /* type we do not handle */
	IPK_DROP_UDP_MALFORMED,     /* bad length */
	IPK_DROP_UDP_CSUM,          /* UDP checksum */
	IPK_DROP_UDP_NO_PORT,       /* nobody bound (ICMP port unreachable sent) */
	IPK_DROP_TCP_MALFORMED,     /* bad data offset, length or options */
	IPK_DROP_TCP_CSUM,          /* TCP checksum */
	IPK_DROP_TCP_NO_CONN,       /* no connection / listener (RST sent if allowed) */
	IPK_DROP_TCP_OUT_OF_WINDOW, /* sequence outside the receive window */
	IPK_DROP_TCP_BAD_ACK,       /* acknowledges data never sent */
	IPK_DROP_TCP_BAD_FLAGS,     /* flag combination not allowed in this state */
	IPK_DROP_TCP_OOO_FULL,      /* out-of-order queue full */
	IPK_DROP_TCP_BACKLOG,       /* listener backlog full */
	IPK_DROP_TCP_REFUSED,       /* ops->tcp_accept said no */
	IPK_DROP_NO_CONN_MEM,       /* connection pool empty */
	IPK_DROP_NO_PB,             /* packet-buffer descriptor pool empty */
	IPK_DROP_ARP_QUEUE_FULL,    /* tx packet waiting for ARP dropped */
	IPK_DROP_ARP_TIMEOUT,       /* tx packet waiting for ARP timed out */
	IPK_DROP_NO_PKT,            /* ops->pkt_alloc returned NULL on transmit */
	IPK_DROP_CHAIN,             /* received packet chain not allowed here (a chain
	                             * without IPK_CAP_LRO, a chained ARP frame, an ICMP
	                             * message other than echo larger than one buffer) */
	IPK_DROP_NO_ROUTE,          /* transmit: destination off-link and no gateway */
	IPK_DROP_TCP_PAWS,          /* RFC 7323 §5: timestamp older than TS.Recent */
	IPK_DROP_TCP_RMEM,          /* out-of-order data refused: receive-memory limit
	                             * (tcp_rmem_max, rmem_max) or ops->pkt_low */
	IPK_DROP_TCP_NO_TS,         /* RFC 7323 §3.2: no timestamp on a connection that
	                             * negotiated them (non-RST; dropped silently) */
	IPK_DROP_IP4_LAND,          /* source is our own address ("land" attack) */
	IPK_DROP_IP4_SRC_NO_ROUTE,  /* source we have no route back to (RFC 3704 §2.4) */
	IPK_DROP_ARP_BAD_SENDER,    /* ARP sender MAC not unicast, or sender IP no host */
	IPK_DROP_FRAG_EVICTED,      /* held fragment freed to make room (oldest first) */
	IPK_DROP_ARP_EVICTED,       /* tx packet waiting for ARP: its entry evicted */
	/* IPv6 (issue 19; core/ip6.c, core/nd.c) */
	IPK_DROP_IP6_MALFORMED,     /* bad version, payload length past the frame */
	IPK_DROP_IP6_NOT_FOR_US,    /* destination not ours, not a group we are in */
	IPK_DROP_IP6_BAD_SRC,       /* multicast source, our own address, IPv4-mapped */
	IPK_DROP_IP6_EXT,           /* extension-header walk refused it (chain too long,
	                             * RH0, unknown option, ...): ipk_ip6_ext_walk */
	IPK_DROP_IP6_PROTO,         /* unknown upper layer (Parameter Problem code 1) */
	IPK_DROP_IP6_FRAG,          /* a fragment: reassembly is not there yet */
	IPK_DROP_ICMP6_MALFORMED,   /* short, bad checksum */
	IPK_DROP_ICMP6_TYPE,        /* type we do not handle */
	IPK_DROP_ND_INVALID,        /* ND message failing RFC 4861 validity (hop limit
	                             * not 255, bad code, target, source, options) */
	IPK_DROP_ND_QUEUE_FULL,     /* tx packet waiting for ND: queue full / evicted */
	IPK_DROP_ND_TIMEOUT,        /* tx packet waiting for ND: no answer (RFC 4861 §7.2.2) */
	/* TCP over IPv6 (issue 19; core/tcp6.c) */
	IPK_DROP_TCP6_PAIRS,        /* no free slot in the IPv6 address-pair table (one per
	                             * distinct local/peer pair of IPv6 connections, sized
	                             * conn_hash_buckets): connection not opened */
	IPK_DROP_IP6_V4MAPPED,      /* IPv4-mapped source or destination (::ffff:0:0/96,
	                             * RFC 4291 §2.5.5.2, RFC 4942 §2.2): never routed as IPv6 */
	IPK_DROP_MLD_INVALID,       /* MLD query failing RFC 3810 §6.2's checks (source not
	                             * link-local, hop limit not 1, no router alert, bad
	                             * length or group), or an MLDv1 one (§8: not answered) */
	IPK_DROP__COUNT
};

struct ipk_counters {
	uint64_t drop[IPK_DROP__COUNT];
	uint64_t rx_frames, tx_frames;
	uint64_t rx_bytes, tx_bytes;
	uint64_t tcp_rx_segs, tcp_tx_segs;
	uint64_t tcp_retransmits;     /* segments sent again (RTO and fast retransmit) */
	uint64_t tcp_rto;             /* retransmission timeouts */
	uint64_t tcp_fast_retransmits;
	uint64_t tcp_rst_tx, tcp_rst_rx;
	uint64_t tcp_active_opens, tcp_passive_opens;
	uint64_t tcp_ooo_segs;        /* segments queued out of order */
	uint64_t tcp_dup_segs;        /* segments carrying only already-received data */
	uint64_t udp_rx, udp_tx;
	uint64_t icmp_rx, icmp_tx;
	uint64_t arp_rx, arp_tx;
	uint64_t ip4_frags_rx, ip4_reassembled;
	uint64_t ip4_fragmented, ip4_frags_tx; /* datagrams sent as fragments, fragments sent */
	/* TCP defences against hostile peers (RFC 5961, RFC 4987, RFC 6191) */
	uint64_t tcp_challenge_acks;         /* challenge ACKs sent (RFC 5961 §3.2, §4.2, §5.2) */
	uint64_t tcp_challenge_acks_limited; /* ... suppressed by tcp_challenge_ack_limit (§7) */
	uint64_t tcp_oow_acks_limited;       /* ACKs to unacceptable segments suppressed by
	                                      * tcp_invalid_ratelimit_ns (stops ACK loops) */
	uint64_t tcp_syncookies_sent;        /* SYN-ACKs carrying a SYN cookie */
	uint64_t tcp_syncookies_ok;          /* returning ACKs whose cookie opened a connection */
	uint64_t tcp_syncookies_failed;      /* ACKs to a listener with a cookie that did not check */
	uint64_t tcp_tw_recycled;            /* TIME_WAIT connections freed early: for
	                                      * tcp_tw_max, or for a new connection that
	                                      * found the connection pool empty */
	uint64_t tcp_tw_reused;              /* TIME_WAIT 4-tuples taken over by a new connection */
	/* loss recovery (RFC 6675, RFC 8985, RFC 2883, RFC 7323) */
	uint64_t tcp_sack_recovery_episodes; /* SACK-based recoveries entered */
	uint64_t tcp_rto_episodes;    /* loss episodes that needed an RTO (first RTO of a series) */
	uint64_t tcp_tlp_probes;      /* tail loss probes sent */
	uint64_t tcp_dsack_rx;        /* D-SACK blocks received */
	uint64_t tcp_spurious_rtx;    /* retransmissions a D-SACK showed were not needed */
	uint64_t tcp_paws_drops;      /* segments dropped by PAWS (also drop[IPK_DROP_TCP_PAWS]) */
	uint64_t tcp_sack_invalid;    /* SACK blocks ignored: outside snd_una..snd_max or malformed */
	uint64_t tcp_dsack_tx;        /* D-SACK blocks sent */
	uint64_t tcp_rescue_rtx;      /* RFC 6675 rescue retransmissions (one per recovery) */
	uint64_t tcp_fast_path;       /* segments taken by header prediction (RFC 9293
	                               * §3.10.7.4's common case; the rest went the full way) */
	/* receive-memory pressure (tcp_mem.c): out-of-order data held against tcp_rmem_max
	 * and rmem_max */
	uint64_t tcp_rmem_collapsed;  /* queued segments copied together into fewer packets */
	uint64_t tcp_rmem_collapse_pkts; /* packets those copies filled */
	uint64_t tcp_rmem_pruned;     /* queued segments dropped (reneged, RFC 2018 §8),
	                               * highest sequence first */
	uint64_t tcp_rmem_pruned_bytes; /* their payload bytes */
	uint64_t tcp_rmem_reclaimed;  /* of those, taken from another connection holding more
	                               * (context limit) */
	uint64_t tcp_rmem_reserve;    /* segments refused because ops->pkt_low said the
	                               * integrator's packets run low (also drop[TCP_RMEM]) */
	uint64_t tcp_synack_dup_limited; /* duplicate SYNs in SYN-RECEIVED left unanswered
	                                  * (one SYN-ACK per tcp_invalid_ratelimit_ns) */
	uint64_t tcp_rst_limited;     /* RSTs for segments not sent: tcp_rst_limit reached */
	/* ARP defences (arp.c): a resolved entry is not overwritten on one packet's word */
	uint64_t arp_conflicts;       /* ARP from another host claiming our own address */
	uint64_t arp_challenges;      /* resolved entries another MAC claimed (probed) */
	uint64_t arp_moves;           /* ... that moved: the old MAC left probes unanswered */
	uint64_t tcp_tx_retries;      /* TCP output deferred for lack of packets or pbs (also
	                               * drop[IPK_DROP_NO_PKT]); the wait doubles per failure
	                               * in a row, from 1 ms up to 256 ms */
	uint64_t tcp_sndbuf_full;     /* ipk_tcp_send refused with IPK_EAGAIN: no room in the
	                               * send buffer (bytes, or the packets' truesize) */
	uint64_t tcp_wmem_limited;    /* ipk_tcp_write / ipk_tcp_send calls cut short or
	                               * refused by the context's wmem_max */
	uint64_t tcp_reordering_seen; /* segments that showed the path reorders (RFC 8985
	                               * §6.2 step 3: delivered after later data; Linux's
	                               * TCPSACKReorder) */
	uint64_t tcp_dsack_undo;      /* SACK recoveries undone: every retransmission was
	                               * D-SACKed (RFC 3708 §3; Linux's TCPDSACKUndo) */
	uint64_t tcp_rto_undo;        /* RTOs undone: the first ACK after one echoed a TSval
	                               * older than its retransmission's (Eifel, RFC 3522;
	                               * Linux's TCPLossUndo) */
	uint64_t tcp_tlp_new_data;    /* tail loss probes that sent new data (RFC 8985 §7.3) */
	uint64_t tcp_tlp_recovery;    /* tail loss probes sent during a SACK recovery */
	uint64_t tcp_frto_undo;       /* RTOs undone without timestamps: after new data went
	                               * out, an ACK covered data never resent (F-RTO, RFC
	                               * 5682 §3.1; Linux's TCPSpuriousRTOs), or every
	                               * retransmission of the episode was D-SACKed (RFC
	                               * 3708 §3; Linux's undo_retrans) */
	/* IPv6 (issue 19) */
	uint64_t ip6_rx, ip6_tx;      /* datagrams accepted / sent */
	uint64_t icmp6_rx, icmp6_tx;
	uint64_t icmp6_err_limited;   /* errors suppressed by the rate limit (RFC 4443 §2.4(f)) */
	uint64_t nd_rx, nd_tx;        /* RS/RA/NS/NA received (valid) / sent */
	uint64_t nd_evicted;          /* neighbor cache entries reused for a new address */
	uint64_t ip6_dad_conflicts;   /* our tentative addresses another node holds
	                               * (RFC 4862 §5.4.5): not used */
	uint64_t ip6_addrs_up;        /* addresses that passed DAD and came into use */
	uint64_t mld_tx;              /* MLDv2 reports sent */
	uint64_t ip6_pmtu_lowered;    /* Packet Too Big that lowered a path MTU (RFC 8201) */
	uint64_t ip6_ptb_ignored;     /* Packet Too Big below 1280 or not lowering: ignored */
	uint64_t ip6_fragmented, ip6_frags_tx; /* datagrams sent as fragments, fragments sent */
	uint64_t ip6_frags_rx, ip6_reassembled;
	uint64_t tcp_sndbuf_grow;     /* send buffers grown by autotuning (tcp_sndbuf_max) */
	uint64_t tcp6_pmtu_mss;       /* Packet Too Big that lowered a TCP connection's MSS
	                             * (RFC 8201 §4 via the path MTU table) */
	uint64_t tcp6_icmp_soft;      /* ICMPv6 errors taken as soft errors by a TCP
	                             * connection (RFC 5461: it goes on) */
	uint64_t mld_queries;         /* MLD queries answered (RFC 3810 §6.2; reports sent
	                             * count in mld_tx) */
	uint64_t nd_redirects;        /* ICMPv6 Redirects taken (RFC 4861 §8.3) */
	uint64_t mld1_queries;        /* MLDv1 queries heard (RFC 3810 §8.2.1: each starts
	                             * or extends MLDv1 compatibility mode, 260 s) */
	uint64_t mld1_tx;             /* MLDv1 reports sent in that mode (RFC 2710 §3) */
};

/* Name of a drop reason, for logs ("ip4_csum"); "unknown" for a value outside the
 * enum, never NULL. Static strings; callable from any thread and any callback. */
const char *ipk_drop_name(enum ipk_drop reason);

/* ----------------------------------------------------------------- types */

struct ipk_ctx;  /* opaque engine context */
struct ipk_conn; /* opaque TCP connection handle */

/* A TCP connection's addresses, all in network order. */
struct ipk_tuple {
	uint32_t local_ip4_be, peer_ip4_be;
	uint16_t local_port_be, peer_port_be;
};

/*
 * An address of either family (issue 19). family IPK_AF_INET: a[0..3] hold the IPv4
 * address in network order (the rest zero); IPK_AF_INET6: a[0..15] the IPv6 address
 * in network order. Today's IPv4 calls keep their uint32_t addresses and stay the
 * fast path; the calls taking an ipk_addr serve both families.
 */
#define IPK_AF_INET 4u
#define IPK_AF_INET6 6u
struct ipk_addr {
	uint8_t family;  /* IPK_AF_INET or IPK_AF_INET6 */
	uint8_t pad_[3];
	uint8_t a[16];
};
/* A flow's addresses and ports in either family (local and peer have one family). */
struct ipk_atuple {
	struct ipk_addr local, peer;
	uint16_t local_port_be, peer_port_be;
};

/*
 * The one ops table. All fields marked (required) must be set; optional ones may be
 * NULL. `opaque` is ipk_config.opaque, passed back untouched.
 *
 * Unity builds: define IPK_OPS_STATIC to the name of the integrator's own
 * `static const struct ipk_ops` before including core/ipkit_unity.c and the core calls
 * that table directly, so hot calls are direct and inlinable; the table given to
 * ipk_ctx_init is then ignored.
 */
struct ipk_ops {
	/* -- packets (required) ------------------------------------------------
	 * A packet is a descriptor over a buffer: data pointer + length, room to grow
	 * at the tail up to the buffer's end, and an optional `next` (scatter-gather
	 * chain). The core never touches a packet except through these. */

	/* A fresh packet with at least ipk_config.pkt_buf_size bytes of room at its data
	 * pointer and length 0; NULL when the pool is empty (the core counts and backs
	 * off, never spins). */
	void *(*pkt_alloc)(void *opaque);
	/* Release a packet, and its buffer when this was the last reference. Frees one
	 * descriptor, not the chain behind it. */
	void (*pkt_free)(void *pkt, void *opaque);
	/* Pointer to the first data byte of this packet (not of its chain); the core
	 * reads and writes pkt_len bytes there, and up to the buffer's end after
	 * pkt_set_len grew it. */
	uint8_t *(*pkt_data)(void *pkt, void *opaque);
	/* Data bytes in this packet alone (pkt_len), not counting its chain. */
	uint32_t (*pkt_len)(void *pkt, void *opaque);
	/* Grow or shrink the data length (within the buffer). */
	void (*pkt_set_len)(void *pkt, uint32_t len, void *opaque);
	/* Move the data start forward by n bytes (n <= len). */
	void (*pkt_adj_head)(void *pkt, uint32_t n, void *opaque);
	/* Drop n bytes from the end (n <= len). */
	void (*pkt_trim_tail)(void *pkt, uint32_t n, void *opaque);
	/* New descriptor over the same buffer (reference count + 1), same data pointer
	 * and length, no next; NULL when out of descriptors. */
	void *(*pkt_clone)(void *pkt, void *opaque);
	/* Append `tail` (and its chain) at the end of `head`'s chain. */
	void (*pkt_chain_append)(void *head, void *tail, void *opaque);
	/* Next packet in a chain, or NULL. */
	void *(*pkt_chain_next)(void *pkt, void *opaque);
	/* Detach and return the rest of the chain after `pkt` (pkt's next becomes NULL). */
	void *(*pkt_chain_cut)(void *pkt, void *opaque);

	/* -- NIC ------------------------------------------------------------- */

	/* (required) Queue a frame (possibly a chain, with IPK_CAP_SG) for transmit.
	 * Ownership of the whole chain passes to the integrator, who frees it (every
	 * descriptor, e.g. with pkt_free along the chain) once sent or dropped. Must
	 * not call the core (see "Calling the core from a callback" above). */
	void (*tx)(void *pkt, void *opaque);
	/* (optional) Called at the end of every entry point that queued frames: the
	 * moment to ring the NIC's doorbell for the batch tx collected. */
	void (*tx_flush)(void *opaque);
	/* (optional, needed with any IPK_CAP_TX_*) Mark transmit offloads on a frame. */
	void (*tx_offload)(void *pkt, const struct ipk_tx_meta *meta, void *opaque);
	/* (optional, needed with IPK_CAP_RX_CSUM_*) IPK_RXCSUM_* bits for a received
	 * frame; bits not set mean "unknown" and the core checks in software. */
	uint32_t (*rx_csum)(void *pkt, void *opaque);

	/* -- randomness (required) ------------------------------------------- */

	/* 32 random bits (ephemeral ports, IPv4 ID, fallback ISN). */
	uint32_t (*random)(void *opaque);
	/* (optional) RFC 6528 F(): a keyed hash of the 4-tuple (PRF with a secret key).
	 * When NULL the core uses random() for the ISN offset instead. */
	uint32_t (*isn_hash)(const struct ipk_tuple *t, void *opaque);

	/* -- ARP owned by the integrator (optional) ---------------------------
	 * When arp_resolve is set the built-in ARP cache is not used: the core asks
	 * this function for the MAC of a next hop; 1 = known (mac filled), 0 = not
	 * known (the packet waits in the ARP queue and the core sends a request). */
	int (*arp_resolve)(uint32_t ip4_be, uint8_t mac[6], void *opaque);
	/* (optional) Told of every IP->MAC binding learned from the wire. */
	void (*arp_learned)(uint32_t ip4_be, const uint8_t mac[6], void *opaque);

	/* -- TCP events ------------------------------------------------------ */

	/* (optional) A SYN arrived for a listening port: return a positive value to
	 * accept; 0 refuses it with a RST (counted IPK_DROP_TCP_REFUSED); a
	 * negative value drops it without an answer (counted IPK_DROP_TCP_BACKLOG):
	 * "no room now", as Linux drops a SYN while the listener's accept queue is
	 * full, so the peer's SYN retransmission tries again instead of failing with
	 * "connection refused" (tcp_room decides again at the handshake's end).
	 * NULL accepts everything up to the backlog. Decide only: must not call the
	 * core. */
	int (*tcp_accept)(struct ipk_ctx *ctx, const struct ipk_tuple *t, void *opaque);
	/* (optional) A passive open completed (the handshake's ACK arrived); the return
	 * value becomes the connection's user pointer (ipk_tcp_user), passed to its later
	 * events. The handle is valid until tcp_closed. */
	void *(*tcp_accepted)(struct ipk_ctx *ctx, struct ipk_conn *c, void *opaque);
	/* (optional) An active open (ipk_tcp_connect) completed; user is the pointer
	 * given there. A failed one gets tcp_closed instead. */
	void (*tcp_connected)(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *opaque);
	/* (required for TCP: ipk_tcp_listen / ipk_tcp_connect fail without it)
	 * In-order payload, zero-copy: `len` bytes at `off` in `pkt`
	 * (never a chain: a chained segment, IPK_CAP_LRO or reassembly, comes as one
	 * call per packet of the chain, in order). The packet stays the core's, valid
	 * only during the call (clone it to keep it). The bytes count against the
	 * receive window until the application calls ipk_tcp_recved. len == 0 with
	 * pkt == NULL means the peer sent FIN (end of stream). */
	void (*tcp_payload)(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
	                    uint32_t off, uint32_t len, void *opaque);
	/* (optional) `bytes` more of our data were acknowledged; send-buffer room grew
	 * (ipk_tcp_sndbuf_free): the moment to write more. Packets given to
	 * ipk_tcp_send whose bytes are all acknowledged have been freed (with
	 * tcp_acked_pkt: shown there, just before this call). */
	void (*tcp_acked)(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, uint32_t bytes,
	                  void *opaque);
	/* (optional) The connection is gone for the application (closed, reset, timed
	 * out, aborted, or entered TIME_WAIT, which the core runs out alone); after this
	 * call the handle is invalid. Called once per connection that reached
	 * tcp_accepted / tcp_connected, and for active opens that failed; never for a
	 * half-open connection the application never saw. */
	void (*tcp_closed)(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
	                   enum ipk_close_reason why, void *opaque);

	/* -- UDP / ICMP events ----------------------------------------------- */

	/* (required for UDP receive: ipk_udp_bind fails without it) A datagram for a
	 * bound port (ipk_udp_bind): `len` bytes at `off` in
	 * `pkt`; after a reassembly the payload may continue in pkt's chain (use
	 * ipk_pkt_copy). t: the peer's and our address and port. The packet stays the
	 * core's, valid only during the call (clone it to keep it). */
	void (*udp_recv)(struct ipk_ctx *ctx, const struct ipk_tuple *t, void *pkt, uint32_t off,
	                 uint32_t len, void *opaque);
	/* (optional) An ICMP echo reply arrived (for ipk_icmp_echo): the replier, the
	 * id and sequence of the request, and its payload length. */
	void (*icmp_echo_reply)(struct ipk_ctx *ctx, uint32_t from_ip4_be, uint16_t id_be,
	                        uint16_t seq_be, uint32_t payload_len, void *opaque);

	/* -- memory pressure (optional) ------------------------------------- */

	/* Nonzero when the integrator's packets run low (e.g. a pool below the reserve it
	 * keeps for receive). Asked only before the core would hold one more received
	 * packet (out-of-order data); while it says so the core holds none, so that
	 * ACKs, RSTs, ARP and ICMP can still be received and processed. NULL: never. */
	int (*pkt_low)(void *opaque);
	/* (optional) pkt_alloc for control packets: pure ACKs, RSTs, SYN-ACKs, ARP and
	 * ICMP errors, which are what frees memory at a peer and here (an ACK lets the
	 * peer send the data that fills a hole; a RST ends a connection that holds
	 * packets). An integrator that keeps a reserve from pkt_alloc lets these dip
	 * into part of it, so a node at its reserve still answers (io/pool.c
	 * ipk_pool_pkt_alloc_ctl: down to half the reserve). Data, its headers and
	 * the core's copies always use pkt_alloc. NULL: pkt_alloc. */
	void *(*pkt_alloc_ctl)(void *opaque);

	/* -- IPv6 (issue 19; IPK_CONFIG_VERSION 3) ---------------------------- */

	/* (optional) A UDP datagram over IPv6 for a bound port (the bind table is
	 * shared with IPv4: one ipk_udp_bind takes the port in both families, as a
	 * Linux dual-stack socket). Same contract as udp_recv; t's family is
	 * IPK_AF_INET6. NULL: IPv6 datagrams are dropped as IPK_DROP_UDP_NO_PORT. */
	void (*udp_recv6)(struct ipk_ctx *ctx, const struct ipk_atuple *t, void *pkt,
	                  uint32_t off, uint32_t len, void *opaque);
	/* (optional) An ICMPv6 echo reply arrived (for ipk_icmp6_echo). */
	void (*icmp6_echo_reply)(struct ipk_ctx *ctx, const uint8_t from[16], uint16_t id_be,
	                         uint16_t seq_be, uint32_t payload_len, void *opaque);
	/* (optional) A UDP socket's datagram drew an ICMPv6 error (RFC 4443 §2.4(f)...
	 * §3): t from the quote (our address and port, the peer's), type and code. */
	void (*udp_error6)(struct ipk_ctx *ctx, const struct ipk_atuple *t, uint8_t type,
	                   uint8_t code, void *opaque);
	/* (optional) Neighbor Discovery owned by the integrator, as arp_resolve: when
	 * set the core asks it for the MAC of an on-link IPv6 next hop; 1 = known (mac
	 * filled), 0 = not known: the packet waits (at most 4 per neighbor) while the
	 * core sends Neighbor Solicitations, and the built-in cache holds nothing
	 * else (no REACHABLE/STALE entries). */
	int (*nd_resolve)(const uint8_t ip6[16], uint8_t mac[6], void *opaque);
	/* (optional) Told of every IPv6 -> MAC binding learned from ND (NA, or the
	 * source link-layer option of an NS or RA). */
	void (*nd_learned)(const uint8_t ip6[16], const uint8_t mac[6], void *opaque);
	/* (optional) tcp_accept for a SYN over IPv6 (t's family IPK_AF_INET6), with
	 * the same answers. NULL accepts up to the backlog (tcp_accept is asked about
	 * IPv4 SYNs only). Decide only: must not call the core. */
	int (*tcp_accept6)(struct ipk_ctx *ctx, const struct ipk_atuple *t, void *opaque);

	/* -- send objects shown when acknowledged (issue 20) ------------------- */

	/* (optional) A packet given to ipk_tcp_send is wholly acknowledged: it is shown
	 * here, the packet object itself (the whole chain), so an API that reports
	 * acknowledged send objects (iip's tcp_acked) needs no record of its own.
	 *  - One call per such packet, in send order, at the point where the core
	 *    raises tcp_acked for the ACK that covered it (just before tcp_acked, for
	 *    a connection announced by tcp_accepted / tcp_connected). Data of
	 *    ipk_tcp_write (copied into the core's own packets) is never shown.
	 *  - Ownership: the packet is the integrator's from the call on (free it, or
	 *    reuse it for the next ipk_tcp_send); the core never touches it again.
	 *  - It is an event callback: it may call the core as tcp_acked may
	 *    (ipk_tcp_send, ipk_tcp_close, ipk_tcp_abort, ...). When the connection
	 *    ends during one of these calls (abort, RST), the packets of the same ACK
	 *    not yet shown are freed by the core without a call, as are packets
	 *    dropped unacknowledged (reset, abort, close with data queued).
	 * NULL: the core frees acknowledged ipk_tcp_send packets itself (and with
	 * IPK_OPS_STATIC the tests compile away). */
	void (*tcp_acked_pkt)(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
	                      void *opaque);
	/* (optional) A received frame the core is about to process that is ARP, an
	 * IPv4 ICMP or UDP datagram, or a TCP segment that matches no connection (a SYN,
	 * a SYN cookie's ACK, a stray segment; IPv4 or IPv6), after the link, IP and
	 * TCP checks, before the layer above looks it up. Established segments never
	 * come here. It lets an API that has no listen or bind call, or that shows the
	 * frame itself in its events (iip's tcp_accept, icmp_reply, arp_reply), act on
	 * those frames without testing every frame of a batch first. pkt is the frame
	 * as received (a reassembled datagram: its first fragment, the rest chained);
	 * it is still the core's: read it, do not free, modify or keep it. The core is
	 * between two frames' work here, so this op may call what event callbacks may
	 * (ipk_tcp_listen, ipk_udp_bind, ...). NULL: nothing is called (with
	 * IPK_OPS_STATIC the tests compile away). */
	void (*rx_peek)(struct ipk_ctx *ctx, void *pkt, void *opaque);
	/* (optional) A passive open's handshake is about to complete (its last ACK
	 * arrived; t names the connection, either family): return nonzero when the
	 * application has room for it now. 0 drops that ACK (counted
	 * IPK_DROP_TCP_BACKLOG): the connection stays half-open and its SYN-ACK
	 * retransmission asks the peer again later, as Linux does while a
	 * listener's accept queue is full; the peer's data waits meanwhile. NULL:
	 * the handshake always completes. Decide only: must not call the core. */
	int (*tcp_room)(struct ipk_ctx *ctx, const struct ipk_atuple *t, void *opaque);
};

/* Engine configuration. ipk_config_default fills every field with a documented
 * default; set addresses, caps and sizes after it. */
struct ipk_config {
	uint32_t version; /* IPK_CONFIG_VERSION */
	void *opaque;     /* handed back to every op */

	uint8_t link;     /* IPK_LINK_ETH (default) or IPK_LINK_RAWIP */
	uint8_t mac[6];
	uint32_t ip4_be, netmask_be, gateway_be; /* gateway 0 = none (on-link only: a
	                             * datagram from off-link is then dropped, as no reply
	                             * could leave, IPK_DROP_IP4_SRC_NO_ROUTE, RFC 3704) */
	/* IP MTU, default 1500, at least 576. Up to pkt_buf_size - 14 (Ethernet; - 0 raw
	 * IP) a frame fits one packet. Above that (jumbo frames over small buffers, e.g.
	 * AF_XDP multi-buffer over 4 KiB UMEM frames) caps must hold both IPK_CAP_SG
	 * (segments up to the MTU go out as chains) and IPK_CAP_LRO (a received datagram
	 * spanning several packets comes in as one chain, see IPK_CAP_LRO); else
	 * ipk_ctx_size returns 0. */
	uint16_t mtu;
	uint32_t pkt_buf_size; /* bytes every ops->pkt_alloc packet can hold, default 2048,
	                        * at least 576 + 14 (Ethernet) or 576 (raw IP) */

	uint32_t caps;    /* IPK_CAP_* */
	uint32_t tso_max; /* with IPK_CAP_TSO: largest TCP payload per frame, default 65535-40 */

	/* sizes of internal tables, fixed at init (they set ipk_ctx_size) */
	uint32_t conn_hash_buckets; /* power of two, default 1024 */
	uint16_t max_listeners;     /* default 16 */
	uint16_t max_udp_binds;     /* default 16 */
	uint16_t arp_entries;       /* default 64 */
	uint16_t frag_slots;        /* datagrams reassembled at once, default 8; one
	                             * source holds at most half of them (at least 1).
	                             * When full, a new datagram evicts the one that
	                             * received nothing for longest (IPK_DROP_FRAG_EVICTED) */

	/* ARP */
	uint64_t arp_ttl_ns;        /* cache entry life, default 60 s */
	uint64_t arp_retry_ns;      /* request retransmit interval, default 1 s */
	uint8_t arp_retries;        /* requests before giving up, default 3 */
	uint8_t arp_queue_per_entry;/* tx packets waiting per unresolved address, default 8 */

	/* IPv4 */
	uint8_t ttl;                /* default 64 */
	uint64_t frag_timeout_ns;   /* RFC 791: default 30 s */
	uint32_t frag_max_bytes;    /* largest reassembled datagram, default 65535 */
	uint16_t frag_max_pieces;   /* fragments per datagram, default 64 */

	/* TCP */
	uint32_t tcp_sndbuf;        /* bytes queued unacknowledged per connection, default 256 KiB
	                             * at first (autotuning, when on, grows it: tcp_sndbuf_max),
	                             * at most INT32_MAX (sends return counts as int); a
	                             * zero-copy send is charged at least pkt_buf_size / 2
	                             * per packet (it pins the buffer), so 2 * tcp_sndbuf /
	                             * pkt_buf_size bounds the packets it can pin */
	uint32_t tcp_rcvbuf;        /* receive window ceiling, default 256 KiB */
	uint16_t tcp_ooo_max;       /* out-of-order segments held per connection; default 0 =
	                             * as many full-sized segments as tcp_rcvbuf holds */
	/* Receive memory (issue 14: a peer must not fill the integrator's packets with
	 * out-of-order data). Counted like Linux's truesize: every packet held costs
	 * pkt_buf_size bytes, whatever its payload, so a 1-byte segment costs a whole
	 * buffer. Past a limit the core first copies small contiguous segments together
	 * (collapse), then drops queued data from the highest sequence down (RFC 2018 §8
	 * allows reneging SACKed data; our SACK blocks follow the queue), then, for the
	 * context limit, takes it from a connection holding more; otherwise the new
	 * segment is dropped (IPK_DROP_TCP_RMEM). In-order data never counts: it is
	 * delivered at once. */
	uint32_t tcp_rmem_max;      /* bytes held per connection; default 0 = 2 * tcp_rcvbuf */
	uint64_t rmem_max;          /* bytes held by the whole context; default 0 = half the
	                             * pb descriptors (ipk_add_pbs) times pkt_buf_size. Set it
	                             * to a fraction of the packet pool (the runtime uses a
	                             * quarter) so the rest always remains for receive and
	                             * transmit. UINT64_MAX = no context limit. */
	uint64_t tcp_rto_min_ns;    /* RFC 6298 (2.4) says 1 s; default 200 ms like Linux */
	uint64_t tcp_rto_max_ns;    /* default 60 s */
	uint64_t tcp_rto_init_ns;   /* RFC 6298 (2.1): default 1 s */
	uint8_t tcp_max_retries;    /* RTOs in a row before IPK_CLOSE_TIMEOUT, default 12 */
	uint8_t tcp_syn_retries;    /* default 6 */
	uint64_t tcp_time_wait_ns;  /* TIME_WAIT duration (2*MSL), default 60 s */
	uint64_t tcp_delack_ns;     /* delayed-ACK timer, default 40 ms; 0 = ACK every segment */
	uint8_t tcp_nagle;          /* RFC 896 Nagle, default 0 (off) */
	uint8_t tcp_wscale;         /* our window-scale shift, default 7 */
	uint16_t tcp_backlog_max;   /* cap on any listener's backlog, default 128 */
	uint16_t eph_port_lo, eph_port_hi; /* ephemeral range (host order), default 49152..65535 */

	/* TCP defences against hostile peers */
	/* RFC 5961 §7: challenge ACKs one context sends per second (in-window RST or SYN,
	 * ACK outside the valid range), default 1000 like Linux; 0 = none. The budget of
	 * each second is drawn at random between half and 1.5 times this value so that
	 * an off-path attacker cannot count it (the CVE-2016-5696 side channel). */
	uint32_t tcp_challenge_ack_limit;
	/* Per connection: least time between two ACKs answering unacceptable segments
	 * that carry no data (pure ACKs, SYNs, challenges), default 500 ms like Linux's
	 * tcp_invalid_ratelimit. Two ends that disagree on a sequence number would
	 * otherwise trade ACKs forever. 0 = no limit. Segments with data always get
	 * their duplicate ACK (RFC 9293 §3.10.7.4). The same gap limits SYN-ACKs
	 * answering duplicates of the SYN in SYN-RECEIVED (the first is answered at
	 * once; tcp_synack_dup_limited counts the rest), as Linux's tcp_check_req. */
	uint64_t tcp_invalid_ratelimit_ns;
	/* Connections in SYN-RECEIVED per context (all listeners), default 256; never
	 * more than half the connection pool, so a SYN flood cannot drain it. */
	uint32_t tcp_synrecv_max;
	/* SYN cookies (RFC 4987 §3.6): 0 off, 1 when the SYN queue (listener backlog,
	 * tcp_synrecv_max or the connection pool) is full (default), 2 always.
	 * A connection opened by a cookie has its MSS rounded down to one of 8 table
	 * values. When the SYN carried timestamps, window scale, SACK-permitted and ECN
	 * travel in the low bits of our TSval and the connection has them all; without
	 * timestamps it has none of them (a 64 KiB window, no SACK, no ECN). */
	uint8_t tcp_syncookies;
	/* Connections in TIME_WAIT per context, default 4096; when one more enters, the
	 * oldest is freed (counted in tcp_tw_recycled). 0 = no limit. Whatever the
	 * limit, a new connection (SYN, cookie ACK, connect) that finds the connection
	 * pool empty frees the oldest TIME_WAIT one and takes its object: TIME_WAIT
	 * never keeps a peer out. */
	uint32_t tcp_tw_max;

	/* TCP congestion control, ACK policy, keep-alive, ECN */
	uint8_t tcp_cc;             /* IPK_CC_* for new connections, default IPK_CC_NEWRENO */
	uint8_t tcp_ack_every;      /* ACK at least every Nth full segment (RFC 5681 §4.2
	                             * says at most 2), default 2, 1..255 */
	uint8_t tcp_quickack;       /* segments ACKed at once at connection start and after
	                             * out-of-order data (Linux-like quick-ACK), default 16 */
	uint8_t tcp_ecn;            /* RFC 3168 ECN: ask for and accept it, default 0 (off) */
	uint8_t tcp_keepalive;      /* RFC 1122 §4.2.3.6 keep-alives on new connections,
	                             * default 0 (off); per connection: ipk_tcp_set_keepalive */
	uint8_t tcp_keepalive_cnt;  /* unanswered probes before IPK_CLOSE_TIMEOUT, default 9 */
	uint64_t tcp_keepalive_idle_ns;  /* idle time before the first probe, default 2 h
	                                  * (RFC 1122: no less than two hours) */
	uint64_t tcp_keepalive_intvl_ns; /* between unanswered probes, default 75 s */
	uint8_t tcp_sack;           /* RFC 2018/6675 SACK: offer and use, default 1 */
	uint8_t tcp_timestamps;     /* RFC 7323 timestamps (1 ms clock) and PAWS, default 1 */
	uint8_t tcp_rack;           /* RFC 8985 RACK-TLP (needs SACK), default 1 */

	/* Receive-side scaling: when several contexts share one address, each serving
	 * one NIC queue, the NIC (or a software steerer) picks the queue of a received
	 * TCP/UDP frame as rss_reta[toeplitz(rss_key, 4-tuple) % rss_reta_size]. Given
	 * the same key and table, active opens (ipk_tcp_connect with local port 0)
	 * choose a port whose incoming 4-tuple lands on rss_queue, so the answers come
	 * back to this context. rss_reta_size 0 (default) = off. */
	uint8_t rss_key[IPK_RSS_KEY_LEN]; /* default: ipk_rss_key_symmetric */
	uint16_t rss_queue;               /* this context's queue, default 0; must appear
	                                   * in rss_reta (else ipk_ctx_size says invalid) */
	uint32_t rss_reta_size;           /* entries in rss_reta, default 0 (RSS off) */
	/* Redirection table, rss_reta_size queue numbers. Not copied: it must stay
	 * valid and unchanged while the context lives. */
	const uint16_t *rss_reta;
	/* Which frames the port hashes on what (IPK_RSS_F_*, as the NIC reports them);
	 * 0 (default) = IPK_RSS_F_DEFAULT. Without IPK_RSS_F_TCP4 (IPK_RSS_F_TCP6 for
	 * IPv6) the local port cannot steer, and an active open succeeds only when the addresses hash to rss_queue. */
	uint8_t rss_fields;

	/* What fast recovery (SACK or NewReno) sends per ACK: IPK_PRR_SSRB (0, default)
	 * RFC 6937 proportional rate reduction with the slow-start reduction bound,
	 * IPK_PRR_CRB with the conservative bound, IPK_PRR_OFF none (RFC 6675 pipe
	 * against cwnd = ssthresh, RFC 6582 window inflation). */
	uint8_t tcp_prr;

	/* 1 = UDP datagrams are never fragmented (Linux IP_PMTUDISC_DO): above
	 * mtu - 28 payload bytes ipk_udp_send / ipk_udp_sendto return IPK_EMSGSIZE.
	 * 0 (default): they go as IPv4 fragments (RFC 791 §3.2). */
	uint8_t udp_df;

	/* RSTs a second this context sends in answer to segments (no connection or
	 * listener, RFC 9293 §3.10.7.1; refused by tcp_accept; unacceptable ACKs in
	 * SYN-SENT/SYN-RECEIVED), default 1000; 0 = no limit. A scan or a spoofed flood
	 * at line rate would otherwise get one RST per segment (FreeBSD limits these to
	 * 200/s, net.inet.icmp.icmplim; Linux does not). Above it they are counted in
	 * tcp_rst_limited. */
	uint32_t tcp_rst_limit;

	/* Where the integrator's packet descriptor keeps what three read-only packet ops
	 * return (IPK_PKT_FIELD_* bits; 0, the default, = always call the ops): the data
	 * pointer (pkt_data_off, a `uint8_t *` member), the length of this packet alone
	 * (pkt_len_off, a `uint32_t` member) and the chain link (pkt_next_off, an object
	 * pointer member, NULL at the end), each a byte offset from the descriptor's
	 * address (offsetof). For a declared field the core reads the member instead of
	 * calling pkt_data, pkt_len or pkt_chain_next: in a library build those are
	 * indirect calls, a dozen per request of a one-segment ping-pong. The member must
	 * hold at every moment what its op would return; the ops stay required, and every
	 * change (set_len, adj_head, chain_append, ...) still goes through them, except
	 * that with IPK_PKT_FIELD_LEN_SET (only together with IPK_PKT_FIELD_LEN) the core
	 * writes a new length into the len member itself instead of calling pkt_set_len
	 * (declare it only when pkt_set_len has no other effect: no accounting, no
	 * capacity check the core's own bounds do not already make). Ignored
	 * when IPK_OPS_STATIC binds the ops at compile time (they inline there), except
	 * IPK_PKT_RECYCLE, which is about the pool, not the calls. Declared
	 * members must not overlap (else ipk_ctx_size says invalid). */
	uint8_t pkt_fields;
	uint16_t pkt_data_off, pkt_len_off, pkt_next_off;

	/* Send memory of the whole context (Linux's tcp_mem), in the send buffer's unit:
	 * bytes queued, a zero-copy packet counted as at least pkt_buf_size / 2 (see
	 * tcp_sndbuf). Above it ipk_tcp_write / ipk_tcp_send queue nothing more
	 * (returning 0 / IPK_EAGAIN, counted in tcp_wmem_limited) on a connection that
	 * already has 4 * pkt_buf_size queued; that one is told by tcp_acked when its
	 * data is acknowledged, and one with less is never refused, so connections
	 * whose peers never ACK cannot stop the others. Default 0 = the pb descriptors
	 * (ipk_add_pbs) times pkt_buf_size / 4; the runtime uses a quarter of its
	 * packet pool. UINT64_MAX = no context limit. */
	uint64_t wmem_max;

	/* RFC 5682 F-RTO (SACK-enhanced, §3.1) on SACK connections without timestamps,
	 * where Eifel cannot tell a spurious RTO: after the RTO's retransmission is
	 * ACKed, new data goes before the rest of the flight, and an ACK of data never
	 * resent undoes the timeout's reduction (tcp_frto_undo). Default 1 (on, as
	 * Linux's net.ipv4.tcp_frto); 0 = off. */
	uint8_t tcp_frto;

	/* IPv6 (issue 19, docs/ipv6-core.md). Off by default: IPv6 frames are then
	 * dropped as IPK_DROP_ETHERTYPE, as before. Ethernet only. */
	uint8_t ip6_enable;
	/* Link-local address fe80::/64 + the modified EUI-64 of mac (RFC 4291 App. A,
	 * RFC 4862 §5.3), always. A static global address: ip6_addr with its on-link
	 * prefix length ip6_prefix_len (default 64); all zero = none. */
	uint8_t ip6_addr[16];
	uint8_t ip6_prefix_len;
	/* A static default router (link-local or on-link), all zero = none: routers
	 * come from Router Advertisements. */
	uint8_t ip6_gateway[16];
	uint8_t ip6_hop_limit;      /* default 64 (RFC 8200 §3; an RA may change it) */
	uint8_t ip6_slaac;          /* RFC 4862 §5.5 addresses from RA prefixes, default 1 */
	uint8_t ip6_dad_transmits;  /* RFC 4862 DupAddrDetectTransmits, default 1; 0 =
	                             * addresses are used at once (no DAD) */
	uint8_t ip6_rs_count;       /* Router Solicitations at start (RFC 4861 §6.3.7
	                             * MAX_RTR_SOLICITATIONS), default 3; 0 = none */
	/* Send-buffer autotuning (Linux's tcp_sndbuf_expand, tcp_wmem[2]): a connection's
	 * send buffer starts at tcp_sndbuf and, while the application keeps it full,
	 * grows to twice the congestion window (at least 10 segments), so a cwnd cut by a
	 * recovery (0.7x with CUBIC) still has queued data to rebound into. It never
	 * shrinks while the connection lives. Bounded by this field, by half the
	 * context's send memory (wmem_max) per connection, and it stops while the
	 * context's send memory is above half its limit (core/tcp_mem.c). Bytes, at
	 * most INT32_MAX; at or below tcp_sndbuf the buffer is fixed at tcp_sndbuf.
	 * Default 0 (off): through ipk-relay the deeper queue cost a clean path ~20 %
	 * and gained nothing measurable at 5 % reordering (docs/sender-goodput.md);
	 * Linux's ceiling, 4 MiB, is the value to try. What ipk_tcp_sndbuf_free
	 * reports and ipk_tcp_send accepts grows with it. */
	uint32_t tcp_sndbuf_max;
};

#define IPK_PRR_SSRB 0u
#define IPK_PRR_CRB 1u
#define IPK_PRR_OFF 2u

/* The layout of struct ipk_config and struct ipk_ops this header describes. 2: the
 * receive/send memory limits, tcp_rst_limit, pkt_fields and the ops pkt_low and
 * pkt_alloc_ctl were appended (issues 14 and 15), so a program built against an older
 * header, whose structs are shorter, is refused (ipk_config_check: "version ...")
 * instead of having the library read past them. 3: tcp_frto, the IPv6 fields and
 * ops (issue 19) and tcp_sndbuf_max (issue 16) appended. */
#define IPK_CONFIG_VERSION 3u

/* Fill every field of *cfg with its documented default (version included); then set
 * the addresses, caps and sizes. A NULL cfg is ignored. */
void ipk_config_default(struct ipk_config *cfg);

/* --------------------------------------------------------------- context */

/* Check a configuration, and with ops != NULL the ops table too, by the rules
 * ipk_ctx_size and ipk_ctx_init apply. Returns IPK_OK, or IPK_EINVAL with *why (when
 * why != NULL) pointing to a static string naming the first problem ("mtu is below
 * 576 (RFC 791)", "ops->tx is NULL (required)"); on IPK_OK *why is "ok". Required
 * ops: the packet ops, tx and random, plus tx_offload / rx_csum when caps ask for
 * them. tcp_payload is required to use TCP (ipk_tcp_listen and ipk_tcp_connect return
 * IPK_EINVAL without it) and udp_recv to bind a UDP port (ipk_udp_bind). */
int ipk_config_check(const struct ipk_config *cfg, const struct ipk_ops *ops, const char **why);

/* Bytes the context needs for this configuration (0 if the config is invalid:
 * ipk_config_check(cfg, NULL, &why) says why). */
size_t ipk_ctx_size(const struct ipk_config *cfg);
/* ipk_conn_size: bytes of one connection object; ipk_pb_size: bytes of one
 * packet-buffer (pb) descriptor, the core's record of a packet it holds (send and
 * out-of-order queues, ARP waits, fragments). Constant for a build of the library. */
size_t ipk_conn_size(void);
size_t ipk_pb_size(void);

/* Initialise a context in `mem` (ipk_ctx_size bytes, 8-byte aligned). The config
 * is copied (except rss_reta, which must stay valid); `ops` is not copied and must
 * outlive the context. The memory stays the integrator's: the context holds no
 * other resource, so to end it stop calling it and free `mem` (and the pools
 * given with ipk_add_conns / ipk_add_pbs; packets the core still holds are lost
 * with it unless the integrator's pool reclaims them). Returns the context, or NULL
 * for a NULL or misaligned mem, a size below ipk_ctx_size, a bad config or a
 * missing required op (ipk_config_check says which). */
struct ipk_ctx *ipk_ctx_init(void *mem, size_t size, const struct ipk_config *cfg,
                             const struct ipk_ops *ops);

/* ipk_add_conns / ipk_add_pbs: give the core `count` connection objects / pb
 * descriptors laid out contiguously in `mem` (8-byte aligned, count *
 * ipk_conn_size() or count * ipk_pb_size() bytes). May be called again to grow a
 * pool, also from an event callback. The memory stays the integrator's, to free
 * only after the context is no longer used. Returns count (the number added), or
 * IPK_EINVAL for a NULL ctx or mem, a misaligned mem or a count above INT32_MAX
 * (which the int result could not carry). */
int ipk_add_conns(struct ipk_ctx *ctx, void *mem, uint32_t count);
int ipk_add_pbs(struct ipk_ctx *ctx, void *mem, uint32_t count);

/* ipk_conns_free / ipk_pbs_free: how many connection objects / pb descriptors are
 * unused now (0 for a NULL ctx). Tests compare them with the count given to check
 * that nothing leaked. */
uint32_t ipk_conns_free(const struct ipk_ctx *ctx);
uint32_t ipk_pbs_free(const struct ipk_ctx *ctx);

/*
 * The engine's one driving call: process `n` received frames (ownership passes to
 * the core, the array itself stays the caller's; NULL entries are skipped; pkts may
 * be NULL when n == 0), fire the timers due at `now`, transmit what is ready, and
 * return the next absolute deadline in ns (UINT64_MAX when no timer is armed, or
 * for a NULL ctx). Call it again at that deadline, or sooner when frames arrive.
 * Event callbacks run inside it. Never call it from a callback of the same context
 * (it is not re-entrant). Cannot fail: bad frames are dropped and counted.
 */
uint64_t ipk_run(struct ipk_ctx *ctx, void **pkts, uint32_t n, uint64_t now);

/* Counters since init (NULL for a NULL ctx). The pointer stays valid as long as the
 * context; read it from the context's thread (the values change under ipk_run). */
const struct ipk_counters *ipk_counters(const struct ipk_ctx *ctx);

/* Copy `len` bytes starting `off` bytes into the chain at `pkt` into `dst`;
 * returns bytes copied (less when the chain is shorter, 0 for a NULL ctx or dst).
 * pkt stays whoever's it was (typically the core's, inside udp_recv). */
uint32_t ipk_pkt_copy(struct ipk_ctx *ctx, void *pkt, uint32_t off, void *dst, uint32_t len);

/* ------------------------------------------------------------------- ARP */

/* Send a gratuitous ARP for our address (RFC 5227 §2.3 announcement). Returns 0,
 * IPK_EINVAL (NULL ctx, raw-IP link, no address) or IPK_ENOBUFS (ops->pkt_alloc
 * returned NULL). */
int ipk_arp_announce(struct ipk_ctx *ctx, uint64_t now);
/* Put a static entry in the built-in cache (never expires; replaces a learned one).
 * Returns 0, IPK_EINVAL (NULL ctx or mac, address 0, a multicast mac, or ARP owned
 * by the integrator through ops->arp_resolve) or IPK_ENOMEM (no free or resolved
 * entry to take over: the cache is full of static and pending ones). */
int ipk_arp_add_static(struct ipk_ctx *ctx, uint32_t ip4_be, const uint8_t mac[6]);

/* ------------------------------------------------------------------- TCP */

/* ipk_tcp_listen: listen on a local port; backlog (capped by tcp_backlog_max)
 * bounds connections in SYN-RECEIVED for it. Connections arrive by tcp_accept /
 * tcp_accepted. Returns 0, IPK_EINVAL (NULL ctx, port 0, backlog 0),
 * IPK_EADDRINUSE (already listening there) or IPK_ENOMEM (max_listeners reached);
 * IPK_EINVAL also when ops->tcp_payload is NULL (as for ipk_tcp_connect).
 * ipk_tcp_unlisten: stop listening; established connections stay. Returns 0,
 * IPK_EINVAL or IPK_ENOENT (not listening there). */
int ipk_tcp_listen(struct ipk_ctx *ctx, uint16_t port_be, uint16_t backlog);
int ipk_tcp_unlisten(struct ipk_ctx *ctx, uint16_t port_be);

/* Active open to peer. local_port_be 0 picks an ephemeral port (with RSS
 * configured, one whose incoming 4-tuple hashes to rss_queue; see ipk_config). On
 * success *out is the new connection (SYN sent); tcp_connected or tcp_closed follows.
 * `user` becomes the connection's user pointer. Returns 0, IPK_EINVAL (NULL ctx or
 * out, peer address or port 0, peer 255.255.255.255: RFC 1122 §4.2.3.10),
 * IPK_EHOSTUNREACH (no route: the peer is off-link
 * and gateway_be is 0; an on-link peer not yet resolved by ARP is not refused, its
 * SYN waits for the answer), IPK_ENOMEM (connection pool empty), or
 * IPK_EADDRINUSE: the 4-tuple is taken or no ephemeral port is free (with RSS: none
 * of the free ones lands on this context's queue; the search is bounded by the size
 * of the ephemeral range). On error *out is not a connection and no event follows. */
int ipk_tcp_connect(struct ipk_ctx *ctx, uint32_t peer_ip4_be, uint16_t peer_port_be,
                    uint16_t local_port_be, void *user, struct ipk_conn **out, uint64_t now);

/* Zero-copy send: queue `pkt` (its data..len are payload; a chain is allowed)
 * after the data already queued. Ownership passes to the core on success only;
 * on error the packet is still the caller's. The core frees the packet (through
 * ops->pkt_free) once all its bytes are acknowledged or the connection ends; until
 * then the buffer must not change (retransmissions read it). Returns payload bytes
 * queued, or IPK_EAGAIN (not enough send-buffer room for the whole packet, its
 * truesize counted (tcp_sndbuf), or the context's wmem_max reached: wait for
 * tcp_acked), IPK_ENOTCONN (FIN already queued: our sending side is closed; data
 * queued in SYN-SENT / SYN-RECEIVED is allowed and goes after the handshake),
 * IPK_EINVAL (NULL argument, empty packet), IPK_ECLOSED (closed handle) or
 * IPK_ENOMEM (no pb descriptor). */
int ipk_tcp_send(struct ipk_ctx *ctx, struct ipk_conn *c, void *pkt, uint64_t now);
/* Copying send: queue up to len bytes from buf (copied at once: buf is the caller's
 * again on return). Returns bytes queued (0 when the send buffer or the context's
 * send memory, wmem_max, is full: wait for tcp_acked; fewer than len when it filled), or IPK_ENOBUFS (room, but
 * ops->pkt_alloc or the pb pool gave nothing), IPK_ENOTCONN, IPK_EINVAL (NULL ctx
 * or handle, NULL buf with len > 0) or IPK_ECLOSED, as for ipk_tcp_send. */
int ipk_tcp_write(struct ipk_ctx *ctx, struct ipk_conn *c, const void *buf, uint32_t len,
                  uint64_t now);
/* Room left in the send buffer, in bytes (0 for a NULL, closed or half-closed
 * connection). */
uint32_t ipk_tcp_sndbuf_free(const struct ipk_conn *c);
/* The application consumed `bytes` delivered by tcp_payload; reopens the window
 * (an ACK announcing it goes out when the window grew enough, RFC 9293
 * §3.8.6.2.2). Call it from tcp_payload or any time later. Returns 0, IPK_EINVAL
 * (NULL argument, or more bytes than delivered and not yet released) or
 * IPK_ECLOSED. */
int ipk_tcp_recved(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t bytes, uint64_t now);
/* Half-close: send FIN after queued data. The connection lives until both sides
 * are done (receiving goes on); tcp_closed reports the end. In SYN-SENT it ends the
 * attempt at once (tcp_closed with IPK_CLOSE_ABORTED). Returns 0, IPK_ENOTCONN (FIN
 * already queued, or a state past it), IPK_EINVAL (NULL argument) or IPK_ECLOSED. */
int ipk_tcp_close(struct ipk_ctx *ctx, struct ipk_conn *c, uint64_t now);
/* Send RST (RFC 9293 §3.10.5; none in SYN-SENT) and free the connection now;
 * tcp_closed(IPK_CLOSE_ABORTED) is called before this returns, and every packet the
 * connection held is freed. Returns 0, IPK_EINVAL (NULL argument) or IPK_ECLOSED. */
int ipk_tcp_abort(struct ipk_ctx *ctx, struct ipk_conn *c, uint64_t now);

/* ipk_tcp_user / ipk_tcp_set_user: the connection's user pointer (given to
 * ipk_tcp_connect or returned by tcp_accepted; passed to every event). The getter
 * returns NULL and the setter does nothing for a NULL or closed handle. */
void *ipk_tcp_user(const struct ipk_conn *c);
void ipk_tcp_set_user(struct ipk_conn *c, void *user);
/* Fill *t with the connection's addresses and ports (network order). Returns 0,
 * IPK_EINVAL (NULL argument, or an IPv6 connection: ports filled, addresses 0;
 * use ipk_tcp_atuple) or IPK_ECLOSED. */
int ipk_tcp_tuple(const struct ipk_conn *c, struct ipk_tuple *t);
/* Per-connection Nagle switch (RFC 896); default from ipk_config.tcp_nagle. Returns
 * 0, IPK_EINVAL (NULL handle) or IPK_ECLOSED. */
int ipk_tcp_set_nagle(struct ipk_conn *c, int on);

/* Congestion-control algorithms (ipk_config.tcp_cc, ipk_tcp_set_cc). */
#define IPK_CC_NEWRENO 0u /* RFC 5681 / RFC 6582 */
#define IPK_CC_CUBIC 1u   /* RFC 9438 */

/* Choose the congestion-control algorithm of one connection (any state). The
 * algorithm's own state starts afresh; cwnd and ssthresh carry over. Returns IPK_OK,
 * IPK_EINVAL for a NULL handle or an unknown algorithm, IPK_ECLOSED for a closed one. */
int ipk_tcp_set_cc(struct ipk_conn *c, unsigned algo);

/* Keep-alives for one connection (RFC 1122 §4.2.3.6), using the context's
 * tcp_keepalive_idle_ns / _intvl_ns / _cnt: after idle time with nothing to send,
 * probe; when tcp_keepalive_cnt probes in a row go unanswered the connection closes
 * with IPK_CLOSE_TIMEOUT. Returns IPK_OK, IPK_EINVAL (NULL handle) or IPK_ECLOSED. */
int ipk_tcp_set_keepalive(struct ipk_ctx *ctx, struct ipk_conn *c, int on, uint64_t now);

/* Connection state, as RFC 9293 names them. */
enum ipk_tcp_state {
	IPK_TCP_CLOSED = 0, IPK_TCP_LISTEN, IPK_TCP_SYN_SENT, IPK_TCP_SYN_RECEIVED,
	IPK_TCP_ESTABLISHED, IPK_TCP_FIN_WAIT_1, IPK_TCP_FIN_WAIT_2, IPK_TCP_CLOSE_WAIT,
	IPK_TCP_CLOSING, IPK_TCP_LAST_ACK, IPK_TCP_TIME_WAIT
};
/* The connection's state; IPK_TCP_CLOSED for a NULL or freed handle. A handle
 * already reported by tcp_closed may still show TIME_WAIT. */
enum ipk_tcp_state ipk_tcp_state(const struct ipk_conn *c);

struct ipk_tcp_info {
	enum ipk_tcp_state state;
	uint32_t mss;           /* send MSS */
	uint32_t cwnd, ssthresh;/* bytes */
	uint32_t snd_wnd;       /* peer's advertised window, bytes */
	uint32_t rcv_wnd;       /* our advertised window, bytes */
	uint32_t inflight;      /* bytes sent, not acknowledged */
	uint64_t srtt_ns, rttvar_ns, rto_ns;
	uint64_t retransmits;   /* segments this connection sent again (any cause) */
	uint8_t snd_wscale, rcv_wscale;
	uint8_t cc_algo;        /* IPK_CC_* */
	uint8_t ecn;            /* 1 when RFC 3168 ECN was negotiated */
	uint8_t sack_ok;        /* SACK negotiated */
	uint8_t ts_ok;          /* timestamps negotiated */
	uint32_t sacked_bytes;  /* bytes the peer SACKed above the cumulative ACK now */
};
/* Fill *info with a snapshot of the connection (like Linux's TCP_INFO). Returns 0,
 * IPK_EINVAL (NULL argument) or IPK_ECLOSED. */
int ipk_tcp_info(const struct ipk_conn *c, struct ipk_tcp_info *info);

/* ------------------------------------------------------------------- UDP */

/* ipk_udp_bind: deliver datagrams for local port_be to ops->udp_recv (datagrams to
 * an unbound port get ICMP port unreachable). Returns 0, IPK_EINVAL (NULL ctx, port
 * 0, or ops->udp_recv NULL: the datagrams would vanish), IPK_EADDRINUSE (bound
 * already) or IPK_ENOMEM (max_udp_binds reached).
 * ipk_udp_unbind: undo it; returns 0, IPK_EINVAL or IPK_ENOENT (not bound). Sending
 * needs no bind. */
int ipk_udp_bind(struct ipk_ctx *ctx, uint16_t port_be);
int ipk_udp_unbind(struct ipk_ctx *ctx, uint16_t port_be);
/*
 * Send `pkt` (data..len is the payload, a chain allowed; headers are prepended in a
 * separate packet the core allocates). Returns the payload bytes sent; ownership
 * passes to the core on success only. On IPK_EINVAL (bad argument), IPK_EMSGSIZE
 * (payload above 65,507 bytes, or above mtu - 28 with ipk_config.udp_df),
 * IPK_EHOSTUNREACH (no route) and IPK_ENOBUFS (packet pool empty) pkt is still the
 * caller's and nothing was sent. A datagram larger than the MTU (payload above
 * mtu - 28) is sent as IPv4 fragments (RFC 791 §3.2, RFC 1122 §3.3.3) with its UDP
 * checksum computed in software over the whole datagram (a NIC checksum offload
 * cannot span fragments); the fragments clone the payload's packets with
 * IPK_CAP_SG, else copy it once. They are all built before the first is sent: a
 * pool that runs dry halfway gives IPK_ENOBUFS (counted as IPK_DROP_NO_PKT) and
 * sends nothing. Later failures (ARP queue full) free and count.
 */
int ipk_udp_send(struct ipk_ctx *ctx, uint16_t local_port_be, uint32_t peer_ip4_be,
                 uint16_t peer_port_be, void *pkt, uint64_t now);
/* Copying variant: buf (len bytes, NULL allowed when len is 0) is copied and is the
 * caller's again on return. Returns the payload bytes sent, or the same errors as
 * ipk_udp_send; a datagram above the MTU is first copied into a chain of packets,
 * then fragmented as above. */
int ipk_udp_sendto(struct ipk_ctx *ctx, uint16_t local_port_be, uint32_t peer_ip4_be,
                   uint16_t peer_port_be, const void *buf, uint32_t len, uint64_t now);

/* ------------------------------------------------------------------ ICMP */

/* Send an echo request with `len` bytes of payload (a pattern); the reply comes by
 * ops->icmp_echo_reply. Returns 0 when the request went out or waits for ARP, or
 * IPK_EINVAL (NULL ctx, destination 0), IPK_EMSGSIZE (the request would not fit the
 * MTU or one packet buffer: it is never fragmented or chained), IPK_ENOBUFS
 * (ops->pkt_alloc returned NULL), or, when the request was built but dropped on
 * the way out (freed and counted), IPK_EHOSTUNREACH (no route, no ARP slot),
 * IPK_EAGAIN (ARP queue for the next hop full) or IPK_ENOMEM (no pb descriptor to
 * wait for ARP in). */
int ipk_icmp_echo(struct ipk_ctx *ctx, uint32_t dst_ip4_be, uint16_t id_be, uint16_t seq_be,
                  uint32_t len, uint64_t now);

/* ------------------------------------------------------------------ IPv6 */

/* ipk_udp_sendto for either family: peer->family IPK_AF_INET takes the IPv4 path
 * (ipk_udp_sendto), IPK_AF_INET6 sends over IPv6 from our best source address
 * (link-local to a link-local peer, else a global one; RFC 6724 reduced to that).
 * Same ownership and errors as ipk_udp_sendto; IPK_EMSGSIZE above the link MTU
 * (IPv6 fragmentation on output is not there yet), IPK_EHOSTUNREACH without a
 * route or a usable source address, IPK_EINVAL for IPv4-mapped or unspecified
 * peers, or IPv6 off (RFC 4291 §2.5.5.2: mapped addresses never go on the wire). */
int ipk_udp_sendto_addr(struct ipk_ctx *ctx, uint16_t local_port_be,
                        const struct ipk_addr *peer, uint16_t peer_port_be, const void *buf,
                        uint32_t len, uint64_t now);
/* An ICMPv6 echo request (RFC 4443 §4.1) of len payload bytes to dst; the reply
 * comes to ops->icmp6_echo_reply. Returns 0 when the request went out or waits for
 * ND, IPK_EINVAL (IPv6 off, dst ::, IPv4-mapped), IPK_EMSGSIZE (above the link MTU
 * or one buffer: never fragmented yet), IPK_EHOSTUNREACH (no source address in use
 * or no route), IPK_ENOBUFS (no packet), IPK_ENOMEM (no pb to wait for ND in). */
int ipk_icmp6_echo(struct ipk_ctx *ctx, const uint8_t dst[16], uint16_t id_be, uint16_t seq_be,
                   uint32_t len, uint64_t now);
/* Our IPv6 addresses in use (DAD passed): up to max copied into out; returns the
 * count copied. Link-local first. */
int ipk_ip6_addrs(const struct ipk_ctx *ctx, uint8_t (*out)[16], int max);
/* The source address this context's ipk_tcp_connect_addr and ipk_udp_sendto_addr use
 * towards dst (RFC 6724 §5 reduced to its scope rule: link-local for a link-scope
 * destination, else a preferred global address, a deprecated one last): returns 1 with out
 * filled, 0 when no address is usable yet (DAD running). Lets a caller that steers
 * flows itself (ipkitd --workers) hash a connection's 4-tuple before opening it. */
int ipk_ip6_src_select(const struct ipk_ctx *c, const uint8_t dst[16], uint8_t out[16]);

/*
 * TCP over IPv6 (issue 19; docs/ipv6-core.md). One connection table serves both
 * families; every ipk_tcp_* call taking a handle works on either. Listeners
 * (ipk_tcp_listen) take both families on their port, as a Linux socket bound to ::
 * with IPV6_V6ONLY 0.
 *
 * ipk_tcp_connect_addr: ipk_tcp_connect for either family. peer->family
 * IPK_AF_INET takes the IPv4 call unchanged; IPK_AF_INET6 opens from our best
 * source address for the peer (link-local to a link-local peer, else a global
 * one). Same ownership, events and errors as ipk_tcp_connect, and: IPK_EINVAL for
 * a NULL peer, an unknown family, IPv6 off (cfg.ip6_enable 0), or a peer that is
 * ::, ::1, multicast or IPv4-mapped (::ffff:0:0/96 is never routed as IPv6: pass
 * IPK_AF_INET instead); IPK_EHOSTUNREACH when no source address is in use yet (DAD
 * still running) or there is no route; IPK_ENOMEM when no connection or no slot in
 * the IPv6 address-pair table (conn_hash_buckets distinct pairs) is free. Local
 * port 0 picks an ephemeral port, RSS-aware for both families (the peer's segments
 * to it hash to cfg.rss_queue; for IPv6 with the source address chosen).
 */
int ipk_tcp_connect_addr(struct ipk_ctx *ctx, const struct ipk_addr *peer,
                         uint16_t peer_port_be, uint16_t local_port_be, void *user,
                         struct ipk_conn **out, uint64_t now);
/* ipk_tcp_listen limited to one family: family 0 both (ipk_tcp_listen),
 * IPK_AF_INET IPv4 only, IPK_AF_INET6 IPv6 only (IPV6_V6ONLY 1); a SYN of the other
 * family is answered as for a closed port (RST). Same returns as ipk_tcp_listen,
 * IPK_EINVAL also for another family value or IPK_AF_INET6 with IPv6 off. */
int ipk_tcp_listen_family(struct ipk_ctx *ctx, uint16_t port_be, uint16_t backlog,
                          unsigned family);
/* The connection's addresses and ports in either family (local and peer of one
 * family). Returns 0, IPK_EINVAL (NULL argument) or IPK_ECLOSED. ipk_tcp_tuple on
 * an IPv6 connection fills the ports and zero addresses and returns IPK_EINVAL. */
int ipk_tcp_atuple(const struct ipk_ctx *ctx, const struct ipk_conn *c, struct ipk_atuple *t);

/* ------------------------------------------------------------------- RSS */

/* Hash fields of a port (ipk_config.rss_fields): IPv4 addresses for IPv4 frames that
 * no other flag covers (fragments, other protocols); TCP and UDP over IPv4 (not
 * fragmented): addresses and ports. The same three for IPv6 (Microsoft's
 * NDIS_HASH_IPV6, _TCP_IPV6, _UDP_IPV6; DPDK's RTE_ETH_RSS_IPV6, NONFRAG_IPV6_TCP,
 * NONFRAG_IPV6_UDP): the 16-byte addresses of the fixed header, never the addresses
 * of a routing or home-address option (the _EX types). A frame no flag covers is not
 * hashed (hash 0). */
#define IPK_RSS_F_IP4 0x01u
#define IPK_RSS_F_TCP4 0x02u
#define IPK_RSS_F_UDP4 0x04u
#define IPK_RSS_F_IP6 0x08u
#define IPK_RSS_F_TCP6 0x10u
#define IPK_RSS_F_UDP6 0x20u
#define IPK_RSS_F_DEFAULT                                                                        \
	(IPK_RSS_F_IP4 | IPK_RSS_F_TCP4 | IPK_RSS_F_UDP4 | IPK_RSS_F_IP6 | IPK_RSS_F_TCP6 |      \
	 IPK_RSS_F_UDP6)

/* Fill `key` with the symmetric Toeplitz key (0x6d, 0x5a repeated): with it the hash
 * of a flow is the same in both directions, so one queue sees both halves of every
 * connection, whatever the addresses. ipk_config_default puts it in rss_key. A NULL
 * key: nothing. */
void ipk_rss_key_symmetric(uint8_t key[IPK_RSS_KEY_LEN]);

/* The Toeplitz hash of `n` input bytes under a `keylen`-byte key, as RSS NICs compute
 * it. The key must cover the input plus 4 bytes (n <= keylen - 4); otherwise, or with
 * a NULL pointer, the result is 0. */
uint32_t ipk_rss_toeplitz(const uint8_t *key, uint32_t keylen, const uint8_t *in, uint32_t n);

/* RSS hash of an IPv4 TCP or UDP frame as the NIC computes it: input source address,
 * destination address, source port, destination port of the frame as received, all
 * in network order; key is IPK_RSS_KEY_LEN bytes. For the IPv4-only hash (frames
 * without ports) use ipk_rss_toeplitz over the 8 address bytes. */
uint32_t ipk_rss_hash_ip4(const uint8_t *key, uint32_t src_be, uint32_t dst_be,
                          uint16_t sport_be, uint16_t dport_be);

/* Queue a frame with this hash goes to: reta[hash % reta_size], the NIC rule.
 * Returns the queue or IPK_EINVAL (NULL table or size 0). */
int ipk_rss_queue(const uint16_t *reta, uint32_t reta_size, uint32_t hash);
/* RSS hash of an IPv4 frame under hash fields `fields` (IPK_RSS_F_*, 0 = default):
 * proto is the IP protocol, frag nonzero for a fragment (MF or an offset: no ports);
 * ports in network order, ignored unless the fields say TCP/UDP hash them. */
uint32_t ipk_rss_hash_frame4(const uint8_t *key, uint32_t fields, uint8_t proto, int frag,
                             uint32_t src_be, uint32_t dst_be, uint16_t sport_be,
                             uint16_t dport_be);

/* RSS hash of an IPv6 TCP or UDP packet as the NIC computes it: input the 16-byte
 * source address, the 16-byte destination address, source port, destination port,
 * as they sit in the packet (36 bytes). key is IPK_RSS_KEY_LEN bytes (36 + 4 = 40,
 * exactly the RSS key size). For the IPv6-only hash use ipk_rss_toeplitz over the 32
 * address bytes. NULL pointers: 0. */
uint32_t ipk_rss_hash_ip6(const uint8_t *key, const uint8_t src[16], const uint8_t dst[16],
                          uint16_t sport_be, uint16_t dport_be);
/* RSS hash of an IPv6 packet under hash fields `fields` (IPK_RSS_F_*, 0 = default),
 * as ipk_rss_hash_frame4: proto is the upper-layer protocol after any extension
 * headers, frag nonzero for a packet with a Fragment header (no ports hashed, as
 * NICs do for every fragment: RTE_ETH_RSS_FRAG_IPV6 hashes addresses only). */
uint32_t ipk_rss_hash_frame6(const uint8_t *key, uint32_t fields, uint8_t proto, int frag,
                             const uint8_t src[16], const uint8_t dst[16], uint16_t sport_be,
                             uint16_t dport_be);

/* ipk_rss_hash_packet results. */
#define IPK_RSS_PKT_NONE 0   /* not IPv4/IPv6, or its header is not whole: a NIC gives no
                              * hash (software steering: every context gets it) */
#define IPK_RSS_PKT_HASHED 1 /* *hash is what the NIC computes */
#define IPK_RSS_PKT_ND 2     /* IPv6 Neighbor Discovery (RFC 4861 §4, ICMPv6 133..137):
                              * *hash as the NIC computes it (on the addresses), yet
                              * every context needs the message (own neighbour cache) */
/* The RSS hash a NIC with hash fields `fields` (0 = default) computes for a received
 * frame of `len` bytes at f; link IPK_LINK_ETH (Ethernet header first) or
 * IPK_LINK_RAWIP (the IP header first, the version nibble tells the family). IPv4:
 * the 4-tuple for TCP/UDP, the addresses for fragments and other protocols (and a
 * TCP/UDP header cut short). IPv6: hop-by-hop, routing and destination options headers
 * are walked (at most 8, each inside the frame) to the upper layer; a Fragment header,
 * or a chain that does not end inside the frame, hashes the addresses. Reads nothing
 * past f + len. Returns IPK_RSS_PKT_*; *hash is set unless NONE. */
int ipk_rss_hash_packet(const uint8_t *key, uint32_t fields, const uint8_t *f, uint32_t len,
                        uint8_t link, uint32_t *hash);

/* --------------------------------------------------------------- helpers */

/* ipk_htons / ipk_htonl (and ipk_ntohs / ipk_ntohl, the same functions): swap
 * between host and network byte order on any host, with no libc. */
static inline uint16_t ipk_htons(uint16_t v)
{
	const uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
	uint16_t r;
	__builtin_memcpy(&r, b, 2);
	return r;
}
/* ipk_htonl: the 32-bit form of ipk_htons. */
static inline uint32_t ipk_htonl(uint32_t v)
{
	const uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
	uint32_t r;
	__builtin_memcpy(&r, b, 4);
	return r;
}
#define ipk_ntohs ipk_htons
#define ipk_ntohl ipk_htonl
/* a.b.c.d in network order */
#define IPK_IP4(a, b, c, d) \
	ipk_htonl(((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (uint32_t)(d))

#ifdef __cplusplus
}
#endif
#endif
