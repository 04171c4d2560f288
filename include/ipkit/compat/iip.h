/*
 * iip's documented API on top of ipkit's core (issue 20).
 *
 * An application written for iip (github.com/yasukata/iip, its README's "api"
 * section) defines the iip_ops_* callbacks and calls the iip_* functions below. To
 * move it to ipkit, replace the line that includes iip's main.c with
 *
 *     #include "compat/iip/iip.c"   (with -I<ipkit>/include -I<ipkit>/core -I<ipkit>)
 *
 * and build as before: the adapter and the whole core become part of the
 * application's translation unit, every iip_ops_* call is a direct (inlinable) call,
 * as with iip. The callbacks may be defined before or after that line (the adapter
 * declares them). A normal library build exists too (libipkit-iip.a, pkg-config
 * ipkit-iip): define IIP_COMPAT_LIBRARY before including this header; the callbacks
 * must then be defined without `static` (the library calls them by name) and the
 * iip_* functions are extern. Everything below holds for both builds.
 *
 * This header states the contract as this adapter implements it. Where iip's
 * document is silent or ipkit is stricter, the choice is marked "(ipkit)".
 *
 * ---------------------------------------------------------------- objects
 * context  iip_workspace_size() bytes the application allocates (any alignment; the
 *          adapter aligns inside). No init call exists in iip's API: the memory must
 *          be zeroed before first use (calloc, or memset 0); the first call that
 *          names our address (iip_run, iip_tcp_connect, iip_udp_send,
 *          iip_arp_request) initialises the engine with that MAC and IPv4 address
 *          and with the NIC features the feature callbacks report at that moment.
 *          (ipkit) Later calls naming another local address use the first one.
 * conn     iip_tcp_conn_size() bytes, 8-byte aligned (malloc's are), given with
 *          iip_add_tcp_conn; one per concurrent TCP connection (TIME_WAIT ones too).
 * pb       iip_pb_size() bytes, 8-byte aligned, given with iip_add_pb: the engine's
 *          record of a packet it holds (send queue, out-of-order data, ARP waits).
 *          Misaligned objects are refused and counted (iip_compat_stats).
 * handle   a TCP connection, valid from tcp_accepted / tcp_connected until
 *          tcp_closed returns; after that the object is reused by a later connection.
 *          (ipkit) iip_tcp_send / iip_tcp_rxbuf_consumed trust a non-NULL handle to
 *          come from this workspace (they skip the workspace set-up test: per-packet
 *          calls); NULL is refused (EINVAL / ignored).
 * opaque   passed to every iip_* call; the callbacks that call in receive the one
 *          of the call in progress (the last one for timers run by iip_run).
 *
 * ---------------------------------------------------------------- packets
 * Packets are the application's objects, handled only through iip_ops_pkt_*:
 *  - iip_ops_pkt_alloc returns a packet with length 0 and room for at least
 *    IIP_COMPAT_PKT_BUF_SIZE bytes (2048 unless the application defines it before
 *    including the adapter; the library build uses 2048).
 *  - (ipkit) iip_ops_pkt_free releases ONE packet object (and its buffer when the
 *    last reference goes), not the packets chained after it: the engine walks chains
 *    itself. A backend frees a transmitted chain object by object.
 *  - Received frames handed to iip_run become the stack's: each is freed with
 *    iip_ops_pkt_free exactly once (or pushed, never for received frames).
 *  - Frames the stack sends go to iip_ops_l2_push and are the application's from
 *    then on (free them after transmission); iip_ops_l2_flush ends each batch.
 *  - In every event callback the packet stays the stack's and is freed after the
 *    callback returns: clone it (iip_ops_pkt_clone) to keep it. In particular the
 *    tcp_payload packet may be kept by cloning; its bytes count against the receive
 *    window until iip_tcp_rxbuf_consumed releases them (below).
 *  - A packet given to iip_tcp_send or iip_udp_send becomes the stack's when the call
 *    returns 0; (ipkit) when it returns nonzero it is still the application's.
 *  - (ipkit) Every packet the stack shows holds a whole frame: data (get_data)
 *    starts at the L2 header, so the application parses addresses and ports from it,
 *    as iip applications do. The exception is the packet of tcp_acked (below).
 *
 * ---------------------------------------------------------------- time
 * iip_ops_util_now_ns(t) fills t[0] = seconds >> 32, t[1] = seconds & 0xffffffff,
 * t[2] = nanoseconds (0..999999999), as iip's backends do; any monotonic clock will
 * do (CLOCK_MONOTONIC). iip_run sets *next_us to the microseconds until it wants to
 * be called again (rounded up; 0 = at once; (ipkit) at most 1,000,000 when no timer
 * is armed). Calling earlier is always fine. The clock is read once per API call
 * (not inside callbacks: they run at the time of their call).
 *
 * ---------------------------------------------------------------- L2
 * The L2 callbacks describe the link. At start the adapter crafts one header into
 * a scratch packet (iip_ops_pkt_alloc, iip_ops_l2_broadcast_addr, _hdr_craft,
 * _hdr_len, _addr_len): 14 bytes with destination, source and EtherType in their
 * Ethernet II places and 6-byte addresses is Ethernet; anything else is another L2.
 * iip_ops_l2_skip is asked for every received frame (nonzero: freed unseen,
 * counted).
 * Ethernet II: the engine frames it itself. iip_ops_l2_hdr_craft, _broadcast_addr,
 * _hdr_len and iip_ops_arp_lhw/lproto build the ARP requests of iip_arp_request;
 * iip_ops_l2_hdr_src_ptr gives the peer's MAC of passive opens (tcp_closed). ARP: as
 * in iip, the application keeps its own table and passes the peer's MAC to
 * iip_tcp_connect / iip_udp_send; the adapter enters it in the engine's ARP cache
 * (static entry). The engine answers ARP requests and learns from them.
 * (ipkit) Another L2 (a TUN device's packet information, 802.1Q, a link with no
 * header at all, ...): addresses of at most 6 bytes (iip_ops_l2_addr_len, 0 for
 * none) and headers of at most 256 bytes (else the start fails, init_failed).
 * The engine runs on bare IPv4 and the adapter does the L2 with the callbacks:
 *  - receive: iip_ops_l2_hdr_len and _ethertype_be of each frame; IPv4 goes to the
 *    engine as a clone (iip_ops_pkt_clone) whose head is moved past the L2 header
 *    (iip_ops_pkt_increment_head): no copy, and every event still shows the
 *    received frame whole, as on Ethernet. Data the engine kept and shows later
 *    (out of order, reassembled) is shown as a copy behind a crafted L2 header,
 *    freed after the event. ARP is answered by the adapter (requests for our
 *    address; replies shown to iip_ops_arp_reply); other EtherTypes, frames shorter
 *    than their header and chains are freed, counted (l2_dropped).
 *  - send: each frame gets a new packet: the L2 header (iip_ops_l2_hdr_craft) and
 *    the engine's first packet copied behind it (the one copy; a scatter-gather
 *    chain's payload packets follow as they are, zero-copy); the offload marks are
 *    made on that packet. A 0-byte header needs no copy: the frame goes as it is.
 *    The engine's packets leave room for the header (each holds
 *    IIP_COMPAT_PKT_BUF_SIZE minus the header bytes).
 *  - addresses: the destination is the one known for the IPv4 destination: given
 *    by the application (peer_mac of iip_tcp_connect / iip_udp_send), learned from
 *    the source of received IPv4 frames (iip_ops_l2_hdr_src_ptr) and from ARP; else
 *    the broadcast address (counted, l2_no_addr). A link without addresses sends no
 *    ARP (iip_arp_request does nothing there).
 *
 * ---------------------------------------------------------------- received chains
 * (ipkit) A received frame may be a chain (a NIC that coalesces, LRO, or receives
 * into small buffers): iip has no feature callback for it, the adapter takes chains
 * always, on Ethernet. A chain must hold one whole TCP segment (ARP, UDP, ICMP and
 * IPv4 fragments as chains are dropped, counted by the engine). Its payload is shown
 * one tcp_payload per packet of the chain, in order; the packet shown may still
 * have the rest of the chain behind it (iip's API cannot detach it): read only
 * data + head_off .. len - tail_off of the packet itself. iip_tcp_rxbuf_consumed
 * counts these packets. The stack frees a chain object by object.
 *
 * ---------------------------------------------------------------- offloads
 * The feature callbacks are read once, at initialisation, and become ipkit's
 * capabilities: tx_scatter_gather -> IPK_CAP_SG (payloads above 256 bytes go as
 * header + the application's packets, zero-copy), ip4_tx_checksum ->
 * IPK_CAP_TX_CSUM_IP4, tcp_tx_checksum / udp_tx_checksum -> IPK_CAP_TX_CSUM_TCP/UDP
 * (the checksum field holds the pseudo-header sum, as NICs expect), tcp_tx_tso ->
 * IPK_CAP_TSO (up to 65,495 payload bytes a frame with scatter-gather, else what one
 * packet holds), ip4_rx_checksum / tcp_rx_checksum / udp_rx_checksum -> received
 * checksums are taken from iip_ops_nic_offload_*_rx_checksum (0 = bad: dropped and
 * counted; nonzero = good). The *_mark callbacks are called on every frame that
 * needs them, with the frame complete: (ipkit) a TSO frame's segment size is the
 * connection's MSS, which iip's mark has no argument for; the backend reads it with
 * iip_compat_tso_mss(context) inside the mark callback (an ipkit addition, below).
 * udp_tx_tso is never used (the engine does not send UDP segmentation offload).
 *
 * ---------------------------------------------------------------- TCP
 * Listening: iip has no listen call. The first SYN to a local port is shown to
 * iip_ops_tcp_accept; a nonzero answer opens the port (later SYNs to it are shown
 * there again, each decided alone); 0 refuses the SYN (RST, counted). tcp_accept
 * decides only: (ipkit) it must not call the iip_* functions.
 * (ipkit) Initial sequence numbers come from a xorshift generator seeded from the
 * clock and the workspace address (iip gives no randomness callback), not from
 * RFC 6528's keyed hash; ipkit's own ops (isn_hash) have that.
 * tcp_accepted(context, handle, pkt, opaque) runs when the handshake completes
 * (ipkit: after the third segment, not at the SYN): pkt is a header-only frame the
 * adapter builds with the connection's addresses, ports and SYN flag (the original
 * SYN is gone by then). tcp_connected likewise with SYN+ACK. The return value is
 * the connection's tcp_opaque, passed to its later events.
 * tcp_payload(context, handle, pkt, tcp_opaque, head_off, tail_off, opaque): new
 * in-order bytes are data(pkt) + head_off up to get_len(pkt) - tail_off; (ipkit)
 * offsets count from the packet's data pointer (the frame start), so overlap with
 * data already delivered is cut by head_off as in iip. One call per packet, in
 * order. iip_tcp_rxbuf_consumed(handle, cnt) says cnt of those packets are consumed,
 * oldest first; their bytes reopen the receive window. (ipkit) Counts above what was
 * delivered are cut to it and counted; a connection closes with whatever is left.
 * End of stream: (ipkit) iip has no event for it. When the peer's FIN has arrived
 * in order and every packet delivered has been consumed (iip_tcp_rxbuf_consumed),
 * the adapter closes our side (FIN after the data queued by then); tcp_closed
 * follows. An application that answers data later holds it unconsumed until its
 * answer is queued (an echo under back-pressure does).
 * tcp_acked(context, handle, pkt, tcp_opaque, opaque): one call per packet given to
 * iip_tcp_send, in order, once all its bytes are acknowledged; pkt is that packet
 * object itself (ipkit: not a copy), its chain too; the stack frees it, object by
 * object, after the callback.
 * tcp_closed(handle, local_mac, local_ip4_be, local_port_be, peer_mac, peer_ip4_be,
 * peer_port_be, tcp_opaque, opaque): once per connection the application saw
 * (accepted or connected), and (ipkit) for an active open that failed (tcp_opaque
 * NULL); also on reset or timeout. The handle dies when it returns.
 *
 * Return values (uint16_t): 0 = done; nonzero = (ipkit) a positive Linux errno
 * naming why (11 EAGAIN: send buffer full, retry after tcp_acked; 12 ENOMEM: no
 * connection object or pb; 22 EINVAL: bad argument; 32 EPIPE: the connection is
 * gone; 90 EMSGSIZE; 98 EADDRINUSE; 105 ENOBUFS: iip_ops_pkt_alloc gave NULL; 107
 * ENOTCONN: our side is already closed; 113 EHOSTUNREACH).
 *  - iip_tcp_connect: 0 when the SYN is sent (or waits for ARP); tcp_connected or
 *    tcp_closed follows. Nonzero: nothing follows.
 *  - iip_tcp_send: queues pkt's bytes after those queued (tcp_flags ignored: (ipkit)
 *    no urgent data). (ipkit) The stack queues up to its send buffer (1 MiB) whatever
 *    the peer's window, and sends as the window opens; beyond it EAGAIN, the packet
 *    still the application's. Allowed from any callback, also before the handshake
 *    ends. Sending after close: ENOTCONN.
 *  - iip_tcp_close: FIN after the queued data (0); (ipkit) a second close gives
 *    ENOTCONN and changes nothing; a closed handle gives EPIPE.
 *  - iip_udp_send: 0 when sent (or waiting for ARP); the datagram must fit the MTU
 *    (1500: (ipkit) no fragmentation, EMSGSIZE). (ipkit) UDP frames to any port are
 *    shown to iip_ops_udp_payload (iip has no bind): the first datagram to a port
 *    binds it; up to 64 ports (then the engine answers port unreachable, counted).
 *  - iip_arp_request and iip_tcp_rxbuf_consumed return nothing; iip_run returns 0.
 *
 * Calls from callbacks: the event callbacks (arp_reply, icmp_reply, tcp_accepted,
 * tcp_connected, tcp_payload, tcp_acked, tcp_closed, udp_payload) may call every
 * iip_* function except iip_run. All other iip_ops_* are called in the middle of the
 * engine's work and must not call iip_* functions.
 * arp_reply and icmp_reply get the received ARP reply / ICMP echo reply frame.
 */
#ifndef IPKIT_COMPAT_IIP_H
#define IPKIT_COMPAT_IIP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Alone, this header compiles only with IIP_COMPAT_LIBRARY defined. In the unity
 * build every declaration below is a static function whose definition follows in
 * the same file (the adapter's in compat/iip/iip.c, the application's callbacks);
 * a file holding the header and nothing else has none of them, which gcc reports
 * ("declared 'static' but never defined", -Wunused-function, at the end of the
 * file, where no pragma of a header reaches). IIP_COMPAT_LIBRARY gives the same
 * prototypes with external linkage, so a header check (tests/port/install_check.sh,
 * tests/compat/iip_header_alone.c) or a tool compiles it alone that way; the unity
 * declarations are checked where they are used (tests/compat/test_iip_signatures.*,
 * as C and C++ with -Werror). */
#ifdef IIP_COMPAT_LIBRARY
#define IIP_API extern
#define IIP_OPS extern
#else
/* Unity build: everything is static in the application's file. An application need
 * not use every addition below, and the adapter does not call every callback (the
 * L2 ones it does not need for Ethernet, UDP TSO), so none of them warns unused. */
#if defined(__GNUC__) || defined(__clang__)
#define IIP_API static __attribute__((unused))
#define IIP_OPS static __attribute__((unused))
#else
#define IIP_API static
#define IIP_OPS static
#endif
#endif

/* --- the functions iip provides (signatures exactly as iip's README lists them) */
IIP_API uint32_t iip_workspace_size(void);
IIP_API uint32_t iip_tcp_conn_size(void);
IIP_API uint32_t iip_pb_size(void);
IIP_API void iip_add_tcp_conn(void *context, void *conn);
IIP_API void iip_add_pb(void *context, void *p);
IIP_API void iip_arp_request(void *context, uint8_t local_mac[], uint32_t local_ip4_be,
                             uint32_t target_ip4_be, void *opaque);
IIP_API uint16_t iip_tcp_connect(void *context, uint8_t local_mac[], uint32_t local_ip4_be,
                                 uint16_t local_port_be, uint8_t peer_mac[],
                                 uint32_t peer_ip4_be, uint16_t peer_port_be, void *opaque);
IIP_API uint16_t iip_tcp_close(void *context, void *handle, void *opaque);
IIP_API uint16_t iip_tcp_send(void *context, void *handle, void *pkt, uint16_t tcp_flags,
                              void *opaque);
IIP_API void iip_tcp_rxbuf_consumed(void *context, void *handle, uint16_t cnt, void *opaque);
IIP_API uint16_t iip_udp_send(void *context, uint8_t local_mac[], uint32_t local_ip4_be,
                              uint16_t local_port_be, uint8_t peer_mac[], uint32_t peer_ip4_be,
                              uint16_t peer_port_be, void *pkt, void *opaque);
IIP_API uint16_t iip_run(void *context, uint8_t mac[], uint32_t ip4_be, void *pkt[],
                         uint16_t cnt, uint32_t *next_us, void *opaque);

/* --- ipkit additions (not in iip; an application that uses them is no longer
 * portable back to iip) */
/* Counters of what the adapter refused or cut, for tests and logs. */
struct iip_compat_stats {
	uint32_t init_failed;      /* engine could not start (workspace too small, config) */
	uint32_t objects_refused;  /* conn / pb objects misaligned or given after a failure */
	uint32_t l2_skipped;       /* frames iip_ops_l2_skip said to drop */
	uint32_t consumed_excess;  /* iip_tcp_rxbuf_consumed counts above what was delivered */
	uint32_t udp_ports_full;   /* datagrams to a port beyond the 64 bound */
	uint32_t synth_failed;     /* tcp_accepted/connected got NULL: no packet to build */
	/* a non-Ethernet L2 (see "L2" above) */
	uint32_t l2_dropped;       /* received frames neither IPv4 nor ARP, or shorter than their
	                            * L2 header, or ARP not for us: freed */
	uint32_t l2_tx_failed;     /* frames not sent: no packet to re-frame them into */
	uint32_t l2_no_addr;       /* frames sent to the broadcast address: no neighbour known */
	uint32_t l2_shown_raw;     /* events that showed a packet from its IPv4 header: no
	                            * packet to re-frame it into (see "L2") */
};
IIP_API const struct iip_compat_stats *iip_compat_stats(void *context);
/* The engine's own counters (struct ipk_counters of ipkit/core.h), NULL before init. */
IIP_API const void *iip_compat_counters(void *context);
/* Segment size of the TSO frame being marked (valid inside
 * iip_ops_nic_offload_tcp_tx_tso_mark only; 0 elsewhere). */
IIP_API uint16_t iip_compat_tso_mss(void *context);
/* Connection objects and pbs not in use (leak checks). */
IIP_API uint32_t iip_compat_conns_free(void *context);
IIP_API uint32_t iip_compat_pbs_free(void *context);

/* --- the callbacks the application provides (iip's README, signatures exact) */
IIP_OPS void *iip_ops_pkt_alloc(void *opaque);
IIP_OPS void iip_ops_pkt_free(void *pkt, void *opaque);
IIP_OPS void *iip_ops_pkt_get_data(void *pkt, void *opaque);
IIP_OPS uint16_t iip_ops_pkt_get_len(void *pkt, void *opaque);
IIP_OPS void iip_ops_pkt_set_len(void *pkt, uint16_t len, void *opaque);
IIP_OPS void iip_ops_pkt_increment_head(void *pkt, uint16_t len, void *opaque);
IIP_OPS void iip_ops_pkt_decrement_tail(void *pkt, uint16_t len, void *opaque);
IIP_OPS void *iip_ops_pkt_clone(void *pkt, void *opaque);
IIP_OPS void iip_ops_pkt_scatter_gather_chain_append(void *pkt_head, void *pkt_tail,
                                                     void *opaque);
IIP_OPS void *iip_ops_pkt_scatter_gather_chain_get_next(void *pkt_head, void *opaque);
IIP_OPS void iip_ops_util_now_ns(uint32_t t[3], void *opaque);
IIP_OPS uint16_t iip_ops_l2_hdr_len(void *pkt, void *opaque);
IIP_OPS uint8_t *iip_ops_l2_hdr_src_ptr(void *pkt, void *opaque);
IIP_OPS uint8_t *iip_ops_l2_hdr_dst_ptr(void *pkt, void *opaque);
IIP_OPS uint16_t iip_ops_l2_ethertype_be(void *pkt, void *opaque);
IIP_OPS uint16_t iip_ops_l2_addr_len(void *opaque);
IIP_OPS void iip_ops_l2_broadcast_addr(uint8_t bcaddr[], void *opaque);
IIP_OPS void iip_ops_l2_hdr_craft(void *pkt, uint8_t src[], uint8_t dst[], uint16_t ethertype_be,
                                  void *opaque);
IIP_OPS uint8_t iip_ops_l2_skip(void *pkt, void *opaque);
IIP_OPS uint8_t iip_ops_arp_lhw(void *opaque);
IIP_OPS uint8_t iip_ops_arp_lproto(void *opaque);
IIP_OPS void iip_ops_l2_push(void *pkt, void *opaque);
IIP_OPS void iip_ops_l2_flush(void *opaque);
IIP_OPS uint8_t iip_ops_nic_feature_offload_tx_scatter_gather(void *opaque);
IIP_OPS uint8_t iip_ops_nic_feature_offload_ip4_rx_checksum(void *opaque);
IIP_OPS uint8_t iip_ops_nic_feature_offload_ip4_tx_checksum(void *opaque);
IIP_OPS uint8_t iip_ops_nic_feature_offload_tcp_rx_checksum(void *opaque);
IIP_OPS uint8_t iip_ops_nic_feature_offload_tcp_tx_checksum(void *opaque);
IIP_OPS uint8_t iip_ops_nic_feature_offload_tcp_tx_tso(void *opaque);
IIP_OPS uint8_t iip_ops_nic_feature_offload_udp_rx_checksum(void *opaque);
IIP_OPS uint8_t iip_ops_nic_feature_offload_udp_tx_checksum(void *opaque);
IIP_OPS uint8_t iip_ops_nic_feature_offload_udp_tx_tso(void *opaque);
IIP_OPS uint8_t iip_ops_nic_offload_ip4_rx_checksum(void *pkt, void *opaque);
IIP_OPS uint8_t iip_ops_nic_offload_tcp_rx_checksum(void *pkt, void *opaque);
IIP_OPS uint8_t iip_ops_nic_offload_udp_rx_checksum(void *pkt, void *opaque);
IIP_OPS void iip_ops_nic_offload_ip4_tx_checksum_mark(void *pkt, void *opaque);
IIP_OPS void iip_ops_nic_offload_tcp_tx_checksum_mark(void *pkt, void *opaque);
IIP_OPS void iip_ops_nic_offload_tcp_tx_tso_mark(void *pkt, void *opaque);
IIP_OPS void iip_ops_nic_offload_udp_tx_checksum_mark(void *pkt, void *opaque);
IIP_OPS void iip_ops_nic_offload_udp_tx_tso_mark(void *pkt, void *opaque);
IIP_OPS void iip_ops_arp_reply(void *context, void *pkt, void *opaque);
IIP_OPS void iip_ops_icmp_reply(void *context, void *pkt, void *opaque);
IIP_OPS uint8_t iip_ops_tcp_accept(void *context, void *pkt, void *opaque);
IIP_OPS void *iip_ops_tcp_accepted(void *context, void *handle, void *pkt, void *opaque);
IIP_OPS void *iip_ops_tcp_connected(void *context, void *handle, void *pkt, void *opaque);
IIP_OPS void iip_ops_tcp_payload(void *context, void *handle, void *pkt, void *tcp_opaque,
                                 uint16_t head_off, uint16_t tail_off, void *opaque);
IIP_OPS void iip_ops_tcp_acked(void *context, void *handle, void *pkt, void *tcp_opaque,
                               void *opaque);
IIP_OPS void iip_ops_tcp_closed(void *handle, uint8_t local_mac[], uint32_t local_ip4_be,
                                uint16_t local_port_be, uint8_t peer_mac[], uint32_t peer_ip4_be,
                                uint16_t peer_port_be, void *tcp_opaque, void *opaque);
IIP_OPS void iip_ops_udp_payload(void *context, void *pkt, void *opaque);

#ifdef __cplusplus
}
#endif

#endif
