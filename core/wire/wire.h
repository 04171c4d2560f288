/*
 * ipkit wire layer: pure parse and emit of each header. No state, no ops, no context.
 *
 * Rules every function here follows:
 *  - parse checks every length before it reads a byte, returns the header length on
 *    success and a negative IPK_WIRE_E* code when the bytes are malformed;
 *  - emit writes into a caller's buffer of `cap` bytes and returns the bytes written,
 *    or 0 when cap is too small;
 *  - all multi-byte fields are read and written in big-endian order through
 *    ipk_rd16/ipk_rd32/ipk_wr16/ipk_wr32 (memcpy'd words or bytes, never a cast of
 *    a byte pointer to a struct), so the code is right on any endianness and
 *    alignment;
 *  - IPv4 addresses and ports stay in network order (suffix _be) so they compare and
 *    copy directly against the API's values; every other number is host order.
 */
#ifndef IPKIT_WIRE_H
#define IPKIT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IPK_WIRE_ESHORT (-1)   /* buffer shorter than the header says */
#define IPK_WIRE_EVERSION (-2) /* wrong version / hardware / protocol type */
#define IPK_WIRE_ELEN (-3)     /* a length field is inconsistent */
#define IPK_WIRE_EOPT (-4)     /* malformed option */

/* ------------------------------------------------------------- bytes */

/* Big-endian loads and stores. With the compiler's byte order known (GCC and Clang
 * predefine __BYTE_ORDER__) one memcpy'd word and a byte swap on little-endian hosts:
 * any alignment, and a store through p cannot be taken to alias the value's source,
 * so the compiler need not write and reload byte by byte. Else bytes, shifted. */
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && \
	__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define IPK_WIRE_SWAP16(v) __builtin_bswap16(v)
#define IPK_WIRE_SWAP32(v) __builtin_bswap32(v)
#elif defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && \
	__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define IPK_WIRE_SWAP16(v) (v)
#define IPK_WIRE_SWAP32(v) (v)
#endif

#ifdef IPK_WIRE_SWAP32
static inline uint16_t ipk_rd16(const uint8_t *p)
{
	uint16_t v;
	__builtin_memcpy(&v, p, 2);
	return (uint16_t)IPK_WIRE_SWAP16(v);
}
static inline uint32_t ipk_rd32(const uint8_t *p)
{
	uint32_t v;
	__builtin_memcpy(&v, p, 4);
	return (uint32_t)IPK_WIRE_SWAP32(v);
}
static inline void ipk_wr16(uint8_t *p, uint16_t v)
{
	v = (uint16_t)IPK_WIRE_SWAP16(v);
	__builtin_memcpy(p, &v, 2);
}
static inline void ipk_wr32(uint8_t *p, uint32_t v)
{
	v = (uint32_t)IPK_WIRE_SWAP32(v);
	__builtin_memcpy(p, &v, 4);
}
#else
static inline uint16_t ipk_rd16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t ipk_rd32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline void ipk_wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static inline void ipk_wr32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}
#endif
/* Network-order values kept as they are in memory (the _be convention). */
static inline uint16_t ipk_rdbe16(const uint8_t *p)
{
	uint16_t v;
	__builtin_memcpy(&v, p, 2);
	return v;
}
static inline uint32_t ipk_rdbe32(const uint8_t *p)
{
	uint32_t v;
	__builtin_memcpy(&v, p, 4);
	return v;
}
static inline void ipk_wrbe16(uint8_t *p, uint16_t v) { __builtin_memcpy(p, &v, 2); }
static inline void ipk_wrbe32(uint8_t *p, uint32_t v) { __builtin_memcpy(p, &v, 4); }

/* ---------------------------------------------------------- checksum */

/* RFC 1071 one's-complement sum. ipk_csum_add adds `len` bytes at `p` to a running
 * 32-bit sum; `odd` says whether an odd number of bytes was summed before (so pieces
 * of a scattered buffer can be summed one after another) and is updated. */
uint32_t ipk_csum_add(uint32_t sum, const uint8_t *p, uint32_t len, int *odd);
/* ipk_csum_add(0, p, 20, &odd) for exactly 20 bytes (an IPv4 header without
 * options: every datagram's header is summed on send and on receive), unrolled. */
uint32_t ipk_csum_hdr20(const uint8_t *p);
/* Fold to 16 bits and complement: the value to store in a checksum field (host order). */
uint16_t ipk_csum_fold(uint32_t sum);
/* Sum of the TCP/UDP IPv4 pseudo-header (RFC 793 §3.1 / RFC 768). */
uint32_t ipk_csum_pseudo(uint32_t src_be, uint32_t dst_be, uint8_t proto, uint32_t l4_len);
/* Non-complemented fold of the pseudo-header sum, as NICs expect in the checksum field
 * when transmit checksum offload is requested. */
uint16_t ipk_csum_pseudo_fold(uint32_t src_be, uint32_t dst_be, uint8_t proto, uint32_t l4_len);
/* The checksum of a contiguous TCP/UDP segment of len (< 65536) bytes with its
 * pseudo-header, in one pass and one fold: with the checksum field zero, the value to
 * store (host order); over a received segment, 0 when the checksum is right. The same
 * as ipk_csum_fold(ipk_csum_add(ipk_csum_pseudo(...), p, len, &odd)). */
uint16_t ipk_csum_l4(uint32_t src_be, uint32_t dst_be, uint8_t proto, const uint8_t *p,
                     uint32_t len);

/* Inline sums for the transmit fast path's small segments (RFC 1071 §2(B),(C)): 64-bit
 * words in the host's byte order, each carry added back at once, folded at the end;
 * 2^16 is 1 modulo 2^16 - 1, so every 16-bit lane counts alike and only the lane a
 * byte falls in (its offset modulo 2) matters. A little-endian host swaps the folded
 * result's two bytes. */
static inline uint64_t ipk_csum64_add(uint64_t s, uint64_t w)
{
	s += w;
	return s + (s < w);
}
/* Host-order sum of len bytes at p, which starts on an even offset of the sum: the loop
 * runs len / 8 times, so this is for headers and small payloads (csum.c has the
 * unrolled loop for the rest). An odd last byte is the high half of a word padded
 * with zero (RFC 1071 §1). */
static inline uint64_t ipk_csum64_small(uint64_t s, const uint8_t *p, uint32_t len)
{
	uint8_t last[2] = {0, 0};
	uint64_t w8;
	uint32_t w4;
	uint16_t w2;

	for (; len >= 8; p += 8, len -= 8) {
		__builtin_memcpy(&w8, p, 8);
		s = ipk_csum64_add(s, w8);
	}
	if (len & 4) {
		__builtin_memcpy(&w4, p, 4);
		s = ipk_csum64_add(s, w4);
		p += 4;
	}
	if (len & 2) {
		__builtin_memcpy(&w2, p, 2);
		s = ipk_csum64_add(s, w2);
		p += 2;
	}
	if (len & 1) {
		last[0] = p[0];
		__builtin_memcpy(&w2, last, 2);
		s = ipk_csum64_add(s, w2);
	}
	return s;
}
/* The checksum field's value (for ipk_wr16) from a sum of words as they lie in memory
 * (ipk_csum64_small's): folded to 16 bits, into host order, complemented. */
static inline uint16_t ipk_csum64_finish(uint64_t s)
{
	const uint16_t one = 1;
	uint8_t le;
	uint32_t lo, hi;
	uint16_t f;

	lo = (uint32_t)s;
	hi = (uint32_t)(s >> 32);
	lo += hi;
	lo += lo < hi;
	f = (uint16_t)((lo + ((lo << 16) | (lo >> 16))) >> 16);
	__builtin_memcpy(&le, &one, 1);
	if (le)
		f = (uint16_t)((f << 8) | (f >> 8));
	return (uint16_t)~f;
}
/* The pseudo-header's last word pair (zero, protocol, length) as it lies in memory. */
static inline uint32_t ipk_csum_ph_word(uint8_t proto, uint32_t len)
{
	const uint8_t ph[4] = {0, proto, (uint8_t)(len >> 8), (uint8_t)len};
	uint32_t w4;

	__builtin_memcpy(&w4, ph, 4);
	return w4;
}
/* ipk_csum_l4 for a segment of len (< 65536) bytes, inline: the value to store with
 * ipk_wr16 (the checksum field zero while summed). */
static inline uint16_t ipk_csum_l4_small(uint32_t src_be, uint32_t dst_be, uint8_t proto,
                                         const uint8_t *p, uint32_t len)
{
	return ipk_csum64_finish(ipk_csum64_small(
	        (uint64_t)src_be + dst_be + ipk_csum_ph_word(proto, len), p, len));
}

/* ---------------------------------------------------------- Ethernet */

#define IPK_ETH_HLEN 14
#define IPK_ETHERTYPE_IP4 0x0800
#define IPK_ETHERTYPE_ARP 0x0806
#define IPK_ETHERTYPE_VLAN 0x8100

struct ipk_eth_hdr {
	uint8_t dst[6], src[6];
	uint16_t type; /* host order */
};
int ipk_eth_parse(const uint8_t *p, uint32_t len, struct ipk_eth_hdr *h);
uint32_t ipk_eth_emit(uint8_t *p, uint32_t cap, const struct ipk_eth_hdr *h);

/* --------------------------------------------------------------- ARP */

#define IPK_ARP_LEN 28 /* Ethernet/IPv4 ARP body */
#define IPK_ARP_REQUEST 1
#define IPK_ARP_REPLY 2

struct ipk_arp_hdr {
	uint16_t op;
	uint8_t sha[6];
	uint32_t spa_be;
	uint8_t tha[6];
	uint32_t tpa_be;
};
/* Accepts only htype 1 / ptype 0x0800 / hlen 6 / plen 4 (else IPK_WIRE_EVERSION). */
int ipk_arp_parse(const uint8_t *p, uint32_t len, struct ipk_arp_hdr *h);
uint32_t ipk_arp_emit(uint8_t *p, uint32_t cap, const struct ipk_arp_hdr *h);

/* -------------------------------------------------------------- IPv4 */

#define IPK_IP4_HLEN 20
#define IPK_IPPROTO_ICMP 1
#define IPK_IPPROTO_TCP 6
#define IPK_IPPROTO_UDP 17
#define IPK_IP4_DF 0x4000
#define IPK_IP4_MF 0x2000
#define IPK_IP4_OFFMASK 0x1fff

struct ipk_ip4_hdr {
	uint8_t ihl;        /* header length in bytes (20..60) */
	uint8_t tos;
	uint16_t tot_len;   /* total length in bytes */
	uint16_t id;
	uint16_t frag;      /* flags (DF/MF) | offset in 8-byte units, as on the wire */
	uint8_t ttl;
	uint8_t proto;
	uint16_t csum;
	uint32_t src_be, dst_be;
};
/* Checks version 4, ihl >= 20, ihl <= tot_len <= len. Does not verify the checksum
 * (see ipk_ip4_csum_ok) so that a NIC's verdict can be used instead. */
int ipk_ip4_parse(const uint8_t *p, uint32_t len, struct ipk_ip4_hdr *h);
int ipk_ip4_csum_ok(const uint8_t *p, uint32_t ihl);
/* Writes a 20-byte header (no options). With fill_csum the checksum is computed,
 * otherwise the field is 0 (for offload). */
uint32_t ipk_ip4_emit(uint8_t *p, uint32_t cap, const struct ipk_ip4_hdr *h, int fill_csum);
/* The checksum field of the 20-byte header ipk_ip4_put writes for h, computed from
 * the fields (RFC 1071: the one's-complement sum of the ten 16-bit words, the checksum
 * word counted as 0), so the header is not read back after it is written. Nine words
 * of at most 0xffff sum below 2^20: two folds end every carry. */
static inline uint16_t ipk_ip4_hdr_csum(const struct ipk_ip4_hdr *h)
{
	uint32_t s = ipk_rd32((const uint8_t *)&h->src_be);
	uint32_t d = ipk_rd32((const uint8_t *)&h->dst_be);
	uint32_t sum = (0x4500u | h->tos) + h->tot_len + h->id + h->frag +
	               (((uint32_t)h->ttl << 8) | h->proto) + (s >> 16) + (s & 0xffffu) +
	               (d >> 16) + (d & 0xffffu);

	sum = (sum & 0xffffu) + (sum >> 16);
	sum += sum >> 16;
	return (uint16_t)~sum;
}
/* The same into 20 bytes the caller knows are there: inline, so the transmit path
 * writes the header in place whatever else calls it. */
static inline void ipk_ip4_put(uint8_t *p, const struct ipk_ip4_hdr *h, int fill_csum)
{
	p[0] = 0x45;
	p[1] = h->tos;
	ipk_wr16(p + 2, h->tot_len);
	ipk_wr16(p + 4, h->id);
	ipk_wr16(p + 6, h->frag);
	p[8] = h->ttl;
	p[9] = h->proto;
	ipk_wr16(p + 10, fill_csum ? ipk_ip4_hdr_csum(h) : 0);
	ipk_wrbe32(p + 12, h->src_be);
	ipk_wrbe32(p + 16, h->dst_be);
}

/* -------------------------------------------------------------- ICMP */

#define IPK_ICMP_HLEN 8
#define IPK_ICMP_ECHO_REPLY 0
#define IPK_ICMP_UNREACH 3
#define IPK_ICMP_ECHO 8
#define IPK_ICMP_TIME_EXCEEDED 11
#define IPK_ICMP_UNREACH_PORT 3
#define IPK_ICMP_UNREACH_NEEDFRAG 4

struct ipk_icmp_hdr {
	uint8_t type, code;
	uint16_t csum;
	uint16_t id, seq; /* echo: identifier and sequence (host order) */
	uint16_t mtu;     /* unreach/needfrag: next-hop MTU (RFC 1191) */
	uint32_t rest;    /* the raw 4 bytes after the checksum */
};
int ipk_icmp_parse(const uint8_t *p, uint32_t len, struct ipk_icmp_hdr *h);
/* Writes the 8-byte header; the checksum over header + payload is the caller's
 * (compute with ipk_csum_add after the payload is in place). Bytes 4..7 come from
 * id/seq for echo and echo reply, from mtu (upper half zero) for unreach/needfrag,
 * and from rest for every other type. */
uint32_t ipk_icmp_emit(uint8_t *p, uint32_t cap, const struct ipk_icmp_hdr *h);

/* --------------------------------------------------------------- UDP */

#define IPK_UDP_HLEN 8

struct ipk_udp_hdr {
	uint16_t sport_be, dport_be;
	uint16_t len; /* header + payload */
	uint16_t csum;
};
/* Checks 8 <= len field <= len. */
int ipk_udp_parse(const uint8_t *p, uint32_t len, struct ipk_udp_hdr *h);
uint32_t ipk_udp_emit(uint8_t *p, uint32_t cap, const struct ipk_udp_hdr *h);

/* --------------------------------------------------------------- TCP */

#define IPK_TCP_HLEN 20
#define IPK_TCP_MAX_OPT 40 /* RFC 9293 §3.1: data offset 15 words minus the fixed 5 */
#define IPK_TCP_FIN 0x01
#define IPK_TCP_SYN 0x02
#define IPK_TCP_RST 0x04
#define IPK_TCP_PSH 0x08
#define IPK_TCP_ACK 0x10
#define IPK_TCP_URG 0x20
#define IPK_TCP_ECE 0x40
#define IPK_TCP_CWR 0x80

struct ipk_tcp_hdr {
	uint16_t sport_be, dport_be;
	uint32_t seq, ack;
	uint8_t doff;   /* header length in bytes (20..60) */
	uint8_t flags;  /* IPK_TCP_* */
	uint16_t wnd;   /* raw window field, unscaled */
	uint16_t csum;
	uint16_t urp;
};
/* Checks 20 <= doff <= len. Options are parsed separately. */
int ipk_tcp_parse(const uint8_t *p, uint32_t len, struct ipk_tcp_hdr *h);
/* Writes the 20-byte fixed header with h->doff as data offset (options follow,
 * written by ipk_tcp_opts_emit); checksum field as given. Also returns 0 when
 * h->doff is not a multiple of 4 in 20..60. */
uint32_t ipk_tcp_emit(uint8_t *p, uint32_t cap, const struct ipk_tcp_hdr *h);
/* ipk_tcp_emit without the checks, for a caller that built doff itself (the
 * transmit path: 20 + the length ipk_tcp_opts_emit returned). */
static inline void ipk_tcp_hdr_put(uint8_t *p, const struct ipk_tcp_hdr *h)
{
	ipk_wrbe16(p, h->sport_be);
	ipk_wrbe16(p + 2, h->dport_be);
	ipk_wr32(p + 4, h->seq);
	ipk_wr32(p + 8, h->ack);
	p[12] = (uint8_t)((h->doff / 4) << 4);
	p[13] = h->flags;
	ipk_wr16(p + 14, h->wnd);
	ipk_wr16(p + 16, h->csum);
	ipk_wr16(p + 18, h->urp);
}

#define IPK_TCPOPT_EOL 0
#define IPK_TCPOPT_NOP 1
#define IPK_TCPOPT_MSS 2
#define IPK_TCPOPT_WSCALE 3
#define IPK_TCPOPT_SACK_PERM 4
#define IPK_TCPOPT_SACK 5
#define IPK_TCPOPT_TS 8
#define IPK_TCP_TS_OPT_LEN 12u /* NOP,NOP,TS: the usual options of an established segment */
#define IPK_TCP_MAX_SACK 4

struct ipk_tcp_opts {
	uint8_t has_mss, has_ws, has_sack_perm, has_ts;
	uint16_t mss;
	uint8_t ws;            /* shift as received (caller clamps to 14, RFC 7323 §2.3) */
	uint8_t nsack;         /* SACK blocks present */
	uint32_t tsval, tsecr;
	uint32_t sack[IPK_TCP_MAX_SACK][2]; /* left, right edges */
};
/* The fixed header's fields; the caller checked that 20 bytes and doff are there.
 * Inline, as the two below: the receive path parses every segment with them. */
static inline void ipk_tcp_hdr_fill(const uint8_t *p, uint32_t doff, struct ipk_tcp_hdr *h)
{
	h->sport_be = ipk_rdbe16(p);
	h->dport_be = ipk_rdbe16(p + 2);
	h->seq = ipk_rd32(p + 4);
	h->ack = ipk_rd32(p + 8);
	h->doff = (uint8_t)doff;
	h->flags = p[13];
	h->wnd = ipk_rd16(p + 14);
	h->csum = ipk_rd16(p + 16);
	h->urp = ipk_rd16(p + 18);
}

/* The NOP,NOP,TS value: the caller checked the option kind and length bytes. */
static inline void ipk_tcp_ts_fill(const uint8_t *p, struct ipk_tcp_opts *o)
{
	o->has_ts = 1;
	o->tsval = ipk_rd32(p + 4);
	o->tsecr = ipk_rd32(p + 8);
}

/* The common established segment in one step: a 32-byte header whose options are
 * exactly NOP,NOP,TS (RFC 7323 Appendix A). Returns 1 with h and o filled as
 * ipk_tcp_parse + ipk_tcp_opts_parse would (o->sack is left as it was: nsack is 0),
 * else 0 with nothing promised: the caller parses the general way. */
static inline int ipk_tcp_parse_ts(const uint8_t *p, uint32_t len, struct ipk_tcp_hdr *h,
                                   struct ipk_tcp_opts *o)
{
	/* Data offset 8 words with the reserved bits clear, then 01 01 08 0a. */
	if (len < IPK_TCP_HLEN + IPK_TCP_TS_OPT_LEN || p[12] != 0x80 ||
	    ipk_rd32(p + IPK_TCP_HLEN) != 0x0101080au)
		return 0;
	ipk_tcp_hdr_fill(p, IPK_TCP_HLEN + IPK_TCP_TS_OPT_LEN, h);
	o->has_mss = o->has_ws = o->has_sack_perm = 0;
	o->mss = 0;
	o->ws = o->nsack = 0;
	ipk_tcp_ts_fill(p + IPK_TCP_HLEN, o);
	return 1;
}

/* Parse the option bytes (p points after the fixed header, len = doff - 20) into o,
 * which is cleared first. Unknown options with a sane length are skipped. Returns 0 or IPK_WIRE_EOPT for a
 * length of 0/1, a length past the end, or a known option with the wrong length. */
int ipk_tcp_opts_parse(const uint8_t *p, uint32_t len, struct ipk_tcp_opts *o);
/* Emit the options present in o (MSS, WS, SACK-permitted, TS, SACK blocks), NOP
 * padded to a multiple of 4; returns bytes written (<= 40) or 0 if cap is short.
 * Layout as Linux sends it: MSS; SACK-perm,TS (or NOP,NOP,TS); NOP,WS;
 * NOP,NOP,SACK-perm when there is no TS; NOP,NOP,SACK with as many of o->nsack
 * blocks as fit in 40 bytes (3 with TS, 4 without). */
uint32_t ipk_tcp_opts_emit(uint8_t *p, uint32_t cap, const struct ipk_tcp_opts *o);
/* NOP,NOP,TS (RFC 7323 Appendix A layout) into 12 bytes the caller knows are there. */
static inline void ipk_tcp_ts_put(uint8_t *p, uint32_t tsval, uint32_t tsecr)
{
	ipk_wr32(p, 0x0101080au); /* NOP, NOP, kind 8, length 10 */
	ipk_wr32(p + 4, tsval);
	ipk_wr32(p + 8, tsecr);
}
/* ipk_tcp_opts_emit into 40 bytes of room, with the established segment's usual
 * options, NOP,NOP,TS (RFC 7323 Appendix A), written inline. */
static inline uint32_t ipk_tcp_opts_put(uint8_t *p, const struct ipk_tcp_opts *o)
{
	if (o->has_ts && !(o->has_mss | o->has_ws | o->has_sack_perm | o->nsack)) {
		ipk_tcp_ts_put(p, o->tsval, o->tsecr);
		return IPK_TCP_TS_OPT_LEN;
	}
	return ipk_tcp_opts_emit(p, IPK_TCP_MAX_OPT, o);
}
/* Bytes ipk_tcp_opts_emit writes for o (given room), without writing them. */
uint32_t ipk_tcp_opts_len(const struct ipk_tcp_opts *o);

/* -------------------------------------------------------------- IPv6 */
/*
 * IPv6 addresses are uint8_t[16] in network order: they compare and copy with
 * memcmp/memcpy as they lie on the wire. The upper-layer length of the pseudo-header
 * and every other number are host order.
 */

#define IPK_ETHERTYPE_IP6 0x86dd
#define IPK_IP6_HLEN 40
#define IPK_IP6_MIN_MTU 1280 /* RFC 8200 §5 */
#define IPK_IPPROTO_HOPOPTS 0
#define IPK_IPPROTO_ROUTING 43
#define IPK_IPPROTO_FRAGMENT 44
#define IPK_IPPROTO_ICMP6 58
#define IPK_IPPROTO_NONE 59 /* RFC 8200 §4.7: no next header */
#define IPK_IPPROTO_DSTOPTS 60
#define IPK_IP6_FRAG_HLEN 8

struct ipk_ip6_hdr {
	uint8_t tclass;    /* traffic class (DSCP << 2 | ECN) */
	uint32_t flow;     /* flow label, 20 bits */
	uint16_t plen;     /* payload length: bytes after the 40-byte header */
	uint8_t next;      /* next header */
	uint8_t hlim;      /* hop limit */
	uint8_t src[16], dst[16];
};
/* RFC 8200 §3: checks len >= 40, version 6, 40 + payload length <= len (trailing
 * bytes, e.g. Ethernet padding, are allowed and are not the datagram's). A payload
 * length of 0 is returned as it is: ipkit does not accept jumbograms (RFC 2675), so
 * the extension-header walk finds no room for a hop-by-hop header and drops such a
 * datagram as truncated. Returns 40. */
int ipk_ip6_parse(const uint8_t *p, uint32_t len, struct ipk_ip6_hdr *h);
/* Writes the 40-byte header (flow label cut to 20 bits); returns 40 or 0. */
uint32_t ipk_ip6_emit(uint8_t *p, uint32_t cap, const struct ipk_ip6_hdr *h);

/* Address predicates (RFC 4291 §2.4, §2.7) and helpers. */
static inline int ipk_ip6_is_multicast(const uint8_t a[16]) { return a[0] == 0xff; }
static inline int ipk_ip6_is_linklocal(const uint8_t a[16])
{
	return a[0] == 0xfe && (a[1] & 0xc0) == 0x80;
}
int ipk_ip6_is_unspecified(const uint8_t a[16]);
/* RFC 4291 §2.7.1: the solicited-node group ff02::1:ffXX:XXXX of addr's low 24 bits. */
void ipk_ip6_solicited_node(uint8_t out[16], const uint8_t addr[16]);
/* 1 when a is a solicited-node group address (ff02::1:ff00:0/104). */
int ipk_ip6_is_solicited_node(const uint8_t a[16]);
/* RFC 2464 §7: the Ethernet MAC of an IPv6 multicast group, 33:33 and its low 32 bits. */
void ipk_ip6_mcast_mac(uint8_t mac[6], const uint8_t group[16]);

/* ------------------------------------------- IPv6 extension headers */

/*
 * Bound on the extension headers one datagram may carry before its upper-layer
 * header. RFC 8200 §4.1 orders at most hop-by-hop, destination options, routing,
 * fragment, AH, ESP, destination options: five that a host walks (AH/ESP end the
 * walk as upper layers), one more when an atomic fragment (RFC 6946) precedes a
 * real one. 8 leaves room for every legitimate chain and stops a chain that never
 * ends (every header is at least 8 bytes, so a 64 KiB datagram could hold 8,000).
 */
#define IPK_IP6_EXT_MAX_COUNT 8
/* Bound on their total length in bytes: RFC 8504 §5.3 lets a host limit extension
 * header sizes. Options headers of a host carry a few padding and alert bytes; the
 * largest routing header in use (SRH, RFC 8754) with 16 segments is 264 bytes.
 * 1024 admits those together and keeps a crafted chain from costing a walk over
 * a whole datagram. */
#define IPK_IP6_EXT_MAX_LEN 1024
/* RFC 8504 §5.3: a host may drop more than 7 bytes of consecutive padding (Linux
 * does): real senders pad to 8-byte alignment, longer runs only hide data. */
#define IPK_IP6_MAX_PAD 7

/* What to do with an options header (RFC 8200 §4.2), the first that applies. */
enum ipk_ip6_optact {
	IPK_IP6_OPT_SKIP = 0,      /* every option known or skippable: go on */
	IPK_IP6_OPT_DISCARD,       /* unknown option, action 01: drop silently */
	IPK_IP6_OPT_ICMP,          /* action 10: drop, Parameter Problem code 2 */
	IPK_IP6_OPT_ICMP_UCAST,    /* action 11: the same unless the destination is multicast */
	IPK_IP6_OPT_MALFORMED,     /* option runs past the header, or padding over 7 bytes */
};
#define IPK_IP6OPT_PAD1 0x00
#define IPK_IP6OPT_PADN 0x01
#define IPK_IP6OPT_ROUTER_ALERT 0x05 /* RFC 2711, hop-by-hop; MLD uses it */

/* Walks the option TLVs of one hop-by-hop or destination-options header (p at the
 * header's first byte, len its length from the header length field). Returns the
 * action; *bad_off is the offset in p of the option that decided it (the Parameter
 * Problem pointer, relative to the header). *ra gets the router alert value + 1 (0
 * when there is none), so that the caller can tell which MLD/RSVP it is. */
enum ipk_ip6_optact ipk_ip6_opts_walk(const uint8_t *p, uint32_t len, uint32_t *bad_off,
                                      uint32_t *ra);

/* Why the walk says drop. Parameter Problem fields say whether and what to send. */
enum ipk_ip6x {
	IPK_IP6X_OK = 0,       /* deliver x->proto at x->off (59: nothing to deliver) */
	IPK_IP6X_TRUNC,        /* an extension header runs past the payload */
	IPK_IP6X_HBH_NOT_FIRST,/* RFC 8200 §4.1: hop-by-hop only right after the header */
	IPK_IP6X_TOO_MANY,     /* more than IPK_IP6_EXT_MAX_COUNT headers */
	IPK_IP6X_TOO_LONG,     /* more than IPK_IP6_EXT_MAX_LEN bytes of headers */
	IPK_IP6X_OPT_BAD,      /* an option runs past its header, or padding over 7 bytes */
	IPK_IP6X_OPT_UNKNOWN,  /* an unknown option whose action bits say discard */
	IPK_IP6X_RH0,          /* routing header type 0 (RFC 5095) */
	IPK_IP6X_RH_UNKNOWN,   /* unsupported routing type with segments left (§4.4) */
	IPK_IP6X_FRAG_LEN,     /* §4.5: M set and fragment length not a multiple of 8 */
	IPK_IP6X_FRAG_SIZE,    /* §4.5: offset + length past 65535 */
};

struct ipk_ip6_ext {
	uint8_t proto;       /* the Next Header value that ended the walk: upper layer */
	uint8_t nhdrs;       /* extension headers walked */
	uint16_t off;        /* upper-layer header's offset from the IPv6 header */
	uint16_t nh_off;     /* offset of the Next Header field that named proto: the
	                      * pointer of a Parameter Problem code 1 when the stack does
	                      * not know proto (RFC 8200 §4, RFC 4443 §3.4) */
	uint32_t ra;         /* router alert value + 1 from hop-by-hop, 0 if none */
	uint8_t has_rh, rh_type, rh_segleft; /* the routing header seen (first one) */
	uint8_t has_frag;    /* a non-atomic fragment: proto/off describe its data */
	uint8_t frag_atomic; /* an atomic fragment was seen and skipped (RFC 6946) */
	uint8_t frag_more;   /* M flag */
	uint16_t frag_off;   /* fragment offset in bytes */
	uint16_t frag_hoff;  /* offset of the fragment header (end of the unfragmentable part) */
	uint32_t frag_id;    /* identification */
	/* Set when the verdict calls for an ICMPv6 Parameter Problem (RFC 4443 §3.4). */
	uint8_t icmp;        /* 1: send one */
	uint8_t icmp_code;   /* 0 erroneous field, 1 unknown next header, 2 unknown option */
	uint32_t icmp_ptr;   /* offset from the IPv6 header's first byte */
};

/*
 * RFC 8200 §4: walks the extension headers of the datagram at pkt (the IPv6 header,
 * len = 40 + its payload length, so a reassembled datagram is walked the same way)
 * from offset 40, where header `next` (the IPv6 header's) begins. dst_mcast: the
 * destination is multicast (decides action 11 and RFC 4443 §2.4(e)).
 *
 * Hop-by-hop is accepted only at offset 40 as the first header; routing headers of
 * a type ipkit does not implement (all of them; a host is never a waypoint) are
 * ignored with segments left 0 and refused otherwise; type 0 is always refused
 * (issue 19; RFC 5095 §3 deprecates it, and a host has no use for an RH0 datagram);
 * an atomic fragment (offset 0, M 0) is skipped and the walk goes on (RFC 6946
 * §4); any other fragment ends the walk with has_frag set and proto/off giving the
 * fragment's next header and data. Every other value of next ends the walk as the
 * upper layer, 59 (no next header) included.
 *
 * Returns IPK_IP6X_OK with x->proto/x->off, or the reason to drop (x->icmp and its
 * code and pointer say whether to answer with a Parameter Problem).
 */
enum ipk_ip6x ipk_ip6_ext_walk(const uint8_t *pkt, uint32_t len, uint8_t next, int dst_mcast,
                               struct ipk_ip6_ext *x);
/* 1 for the Next Header values the walk steps over (0, 43, 44, 60). */
int ipk_ip6_is_ext(uint8_t next);
/* An 8-byte hop-by-hop header with a router alert option (RFC 2711, value 0: MLD)
 * and PadN, as MLD messages carry it (RFC 3810 §5). Returns 8 or 0. */
uint32_t ipk_ip6_hbh_ra_emit(uint8_t *p, uint32_t cap, uint8_t next);
/* A fragment header (RFC 8200 §4.5): offset in bytes (a multiple of 8), M, id. */
uint32_t ipk_ip6_frag_emit(uint8_t *p, uint32_t cap, uint8_t next, uint32_t off_bytes,
                           int more, uint32_t id);

/* ------------------------------------------------- IPv6 checksums */

/* Sum of the IPv6 pseudo-header (RFC 8200 §8.1): source, destination (the final
 * one when a routing header is present: the caller's choice), the upper-layer
 * length as 32 bits, three zero bytes and the next header. Folds like
 * ipk_csum_pseudo; continue with ipk_csum_add over the upper-layer bytes. */
uint32_t ipk_csum_pseudo6(const uint8_t src[16], const uint8_t dst[16], uint8_t proto,
                          uint32_t l4_len);
/* The checksum of a contiguous upper-layer packet of len bytes with its IPv6
 * pseudo-header: with the checksum field zero, the value to store (host order);
 * over a received packet, 0 when the checksum is right. TCP, UDP, ICMPv6 alike. */
uint16_t ipk_csum_l4_6(const uint8_t src[16], const uint8_t dst[16], uint8_t proto,
                       const uint8_t *p, uint32_t len);
/* RFC 8200 §8.1: a UDP datagram over IPv6 with checksum field 0 is invalid and must
 * be dropped. 1 when the datagram at p (len bytes, the UDP length) carries a
 * non-zero checksum that verifies, else 0. */
int ipk_udp6_csum_ok(const uint8_t src[16], const uint8_t dst[16], const uint8_t *p,
                     uint32_t len);
/* The checksum field's value for a UDP datagram over IPv6 whose field is zero while
 * summed: a computed 0 is sent as 0xffff (RFC 768, RFC 8200 §8.1). */
uint16_t ipk_udp6_csum(const uint8_t src[16], const uint8_t dst[16], const uint8_t *p,
                       uint32_t len);

/* ------------------------------------------------------------ ICMPv6 */

#define IPK_ICMP6_HLEN 8
#define IPK_ICMP6_DST_UNREACH 1
#define IPK_ICMP6_PKT_TOO_BIG 2
#define IPK_ICMP6_TIME_EXCEEDED 3
#define IPK_ICMP6_PARAM_PROB 4
#define IPK_ICMP6_ECHO_REQUEST 128
#define IPK_ICMP6_ECHO_REPLY 129
#define IPK_ICMP6_MLD_QUERY 130
#define IPK_ICMP6_MLD1_REPORT 131 /* RFC 2710 §3 (MLDv1 compatibility, RFC 3810 §8) */
#define IPK_ICMP6_ND_RS 133
#define IPK_ICMP6_ND_RA 134
#define IPK_ICMP6_ND_NS 135
#define IPK_ICMP6_ND_NA 136
#define IPK_ICMP6_ND_REDIRECT 137
#define IPK_ICMP6_MLD2_REPORT 143
/* RFC 4443 §2.4(c): an error carries as much of the invoking packet as fits in the
 * minimum MTU: 1280 - 40 (IPv6) - 8 (ICMPv6). */
#define IPK_ICMP6_ERR_QUOTE_MAX (IPK_IP6_MIN_MTU - IPK_IP6_HLEN - IPK_ICMP6_HLEN)

struct ipk_icmp6_hdr {
	uint8_t type, code;
	uint16_t csum;
	uint16_t id, seq;  /* echo request/reply (RFC 4443 §4) */
	uint32_t param;    /* the second word: PTB MTU (§3.2), Parameter Problem
	                    * pointer (§3.4), 0 (unused) for unreachable/time exceeded */
};
/* Reads the 8-byte header (type-specific word both as id/seq and as param).
 * Types 0..127 are errors (RFC 4443 §2.1). Checksum not verified: ipk_csum_l4_6. */
int ipk_icmp6_parse(const uint8_t *p, uint32_t len, struct ipk_icmp6_hdr *h);
static inline int ipk_icmp6_is_error(uint8_t type) { return type < 128; }
/* Writes the 8-byte header: id/seq for echo, param for every other type. The
 * checksum is written as given (see ipk_icmp6_csum_fill). */
uint32_t ipk_icmp6_emit(uint8_t *p, uint32_t cap, const struct ipk_icmp6_hdr *h);
/* Computes and stores the checksum of the len-byte ICMPv6 message at p (bytes 2..3
 * are overwritten; the caller guarantees len >= 4). */
void ipk_icmp6_csum_fill(uint8_t *p, uint32_t len, const uint8_t src[16], const uint8_t dst[16]);
/* An error message: h's 8 bytes, then as much of the invoking packet (inv, inv_len,
 * its IPv6 header first) as fits in cap and IPK_ICMP6_ERR_QUOTE_MAX, checksummed
 * for src -> dst. Returns the message length or 0 when cap < 8 or h is not an error. */
uint32_t ipk_icmp6_error_emit(uint8_t *p, uint32_t cap, const struct ipk_icmp6_hdr *h,
                              const uint8_t *inv, uint32_t inv_len, const uint8_t src[16],
                              const uint8_t dst[16]);

/* The flow an error is about, from its quote of the invoking packet (RFC 4443 §2.4(c)).
 * The quote may be cut anywhere: fields past the cut are reported absent. */
struct ipk_icmp6_quote {
	uint8_t src[16], dst[16]; /* the invoking packet's addresses (ours first) */
	uint8_t proto;            /* upper layer reached, or the last next header seen */
	uint16_t off;             /* its offset in the quote */
	uint8_t has_ports;        /* TCP/UDP ports present (first fragment or none) */
	uint8_t has_seq;          /* TCP sequence number present */
	uint8_t has_echo;         /* ICMPv6 echo id/seq present */
	uint16_t sport_be, dport_be;
	uint32_t seq;
	uint16_t echo_id, echo_seq;
};
/* p: the bytes after an error's 8-byte header. Needs the whole 40-byte IPv6 header
 * (else IPK_WIRE_ESHORT; IPK_WIRE_EVERSION for a version other than 6); walks at most
 * IPK_IP6_EXT_MAX_COUNT extension headers that fit, stops at a non-first fragment.
 * Returns 40. */
int ipk_icmp6_quote_parse(const uint8_t *p, uint32_t len, struct ipk_icmp6_quote *q);

/* ------------------------------------------- Neighbor Discovery, MLD */

#define IPK_ND_RA_MANAGED 0x80  /* RA M flag (RFC 4861 §4.2) */
#define IPK_ND_RA_OTHER 0x40    /* RA O flag */
#define IPK_ND_NA_ROUTER 0x80   /* NA R flag (§4.4) */
#define IPK_ND_NA_SOLICITED 0x40
#define IPK_ND_NA_OVERRIDE 0x20
#define IPK_ND_HOP_LIMIT 255    /* §6.1, §7.1: every ND message arrives with 255 */
#define IPK_NDOPT_SLLA 1
#define IPK_NDOPT_TLLA 2
#define IPK_NDOPT_PREFIX 3
#define IPK_NDOPT_REDIRECTED 4
#define IPK_NDOPT_MTU 5
#define IPK_NDOPT_RDNSS 25      /* RFC 8106 */
#define IPK_ND_PFX_ONLINK 0x80  /* prefix option L flag (§4.6.2) */
#define IPK_ND_PFX_AUTO 0x40    /* A flag */
#define IPK_ND_MAX_PREFIX 4     /* prefix options kept per message; more are counted */
#define IPK_ND_MAX_RDNSS 3      /* RDNSS addresses kept (RFC 8106 §5.3.1 suggests 3) */

struct ipk_nd_prefix {
	uint8_t plen, flags;     /* prefix length, L/A flags */
	uint32_t valid, preferred; /* lifetimes in seconds, 0xffffffff = infinity */
	uint8_t prefix[16];
};

struct ipk_nd_opts {
	uint8_t has_slla, has_tlla, has_mtu, has_redir;
	uint8_t slla[6], tlla[6];  /* Ethernet link-layer addresses (RFC 2464 §6) */
	uint32_t mtu;
	uint8_t nprefix;           /* prefix options kept (<= IPK_ND_MAX_PREFIX) */
	uint8_t nprefix_seen;      /* prefix options present (saturates at 255) */
	struct ipk_nd_prefix prefix[IPK_ND_MAX_PREFIX];
	uint16_t redir_off, redir_len; /* redirected header's IP bytes, offset from the
	                                * options' first byte */
	uint8_t nrdnss;
	uint32_t rdnss_lifetime;
	uint8_t rdnss[IPK_ND_MAX_RDNSS][16];
};
/* RFC 4861 §4.6: parses the options at p (len bytes) into o (cleared first). An
 * option of length 0, one running past len, or a known option of the wrong length
 * (SLLA/TLLA 1 for Ethernet, prefix 4, MTU 1, redirected >= 1, RDNSS odd >= 3)
 * returns IPK_WIRE_EOPT: the caller discards the message. Unknown options are
 * skipped (§4.6: receivers silently ignore them). Returns 0. */
int ipk_nd_opts_parse(const uint8_t *p, uint32_t len, struct ipk_nd_opts *o);

/* An ND message's fixed fields (RS, RA, NS, NA, Redirect). */
struct ipk_nd_msg {
	uint8_t type, code;
	uint16_t csum;
	uint8_t flags;          /* RA: the flags byte as sent (M, O, and e.g. RFC 4191's
	                         * router preference); NA: R/S/O, reserved bits zero */
	uint8_t cur_hlim;       /* RA */
	uint16_t router_lifetime; /* RA, seconds */
	uint32_t reachable, retrans; /* RA, milliseconds */
	uint8_t target[16];     /* NS, NA, Redirect */
	uint8_t dest[16];       /* Redirect */
	uint32_t len;           /* the ICMPv6 message length parsed */
	uint16_t opt_off;       /* first option byte: 8 (RS), 16 (RA), 24 (NS/NA), 40 */
	struct ipk_nd_opts opts;
};
/* Parses the whole ICMPv6 ND message at p (len bytes: the ICMPv6 length), fixed part
 * and options. IPK_WIRE_EVERSION when the type is not RS/RA/NS/NA/Redirect,
 * IPK_WIRE_ESHORT when len is below the type's fixed part (§6.1.1/§6.1.2/§7.1.1/
 * §7.1.2/§8.1: "ICMP length is 8/16/24/24/40 or more"), IPK_WIRE_EOPT from the
 * options. Returns the fixed part's length (m->opt_off). */
int ipk_nd_parse(const uint8_t *p, uint32_t len, struct ipk_nd_msg *m);

/* Why an ND message is not acceptable (RFC 4861 §6.1.1, §6.1.2, §7.1.1, §7.1.2, §8.1). */
enum ipk_nd_bad {
	IPK_ND_OK = 0,
	IPK_ND_BAD_HLIM,      /* IP hop limit not 255: it crossed a router */
	IPK_ND_BAD_CODE,      /* ICMP code not 0 */
	IPK_ND_BAD_TARGET,    /* NS/NA target or Redirect destination multicast; a
	                       * Redirect target neither link-local nor the destination */
	IPK_ND_BAD_SRC,       /* RA/Redirect from a non-link-local source; an unspecified
	                       * source with a source link-layer option, or (NS) to a
	                       * group that is not solicited-node */
	IPK_ND_BAD_SOLICITED, /* NA to a multicast group with the S flag */
	IPK_ND_BAD_LLA,       /* a link-layer option naming a group (multicast/broadcast)
	                       * or all-zero MAC: no unicast neighbour has one (as ARP
	                       * refuses such a sender, IPK_DROP_ARP_BAD_SENDER) */
};
/* The validity checks that need the IPv6 header; the caller has checked the ICMPv6
 * checksum and parsed m with ipk_nd_parse (which checked the lengths and options). */
enum ipk_nd_bad ipk_nd_check(const struct ipk_ip6_hdr *ip, const struct ipk_nd_msg *m);
/* Writes m's ICMPv6 header and fixed part (8/16/24/24/40 bytes by type, checksum
 * field from m->csum, reserved bits zero); options follow, written by the emitters
 * below; then ipk_icmp6_csum_fill over the whole message. Returns bytes or 0. */
uint32_t ipk_nd_emit(uint8_t *p, uint32_t cap, const struct ipk_nd_msg *m);
/* Link-layer address option (type IPK_NDOPT_SLLA or TLLA), 8 bytes. */
uint32_t ipk_nd_opt_lla_emit(uint8_t *p, uint32_t cap, uint8_t type, const uint8_t mac[6]);
/* Prefix information option (§4.6.2), 32 bytes. */
uint32_t ipk_nd_opt_prefix_emit(uint8_t *p, uint32_t cap, const struct ipk_nd_prefix *pf);
/* MTU option (§4.6.4), 8 bytes. */
uint32_t ipk_nd_opt_mtu_emit(uint8_t *p, uint32_t cap, uint32_t mtu);

/* MLDv2 (RFC 3810 §5.2). Record types of a report (§5.2.12). */
#define IPK_MLD2_MODE_IS_INCLUDE 1
#define IPK_MLD2_MODE_IS_EXCLUDE 2
#define IPK_MLD2_CHANGE_TO_INCLUDE 3 /* leave, with no sources */
#define IPK_MLD2_CHANGE_TO_EXCLUDE 4 /* join, with no sources */
/* An MLDv2 report (type 143) of n records of rec_type with no sources, one per group,
 * checksummed for src -> ff02::16 (RFC 3810 §5.2.14). The IPv6 header around it has
 * hop limit 1 and a hop-by-hop router alert (ipk_ip6_hbh_ra_emit). Returns the
 * message length (8 + 20 n) or 0 when cap is short. */
uint32_t ipk_mld2_report_emit(uint8_t *p, uint32_t cap, uint8_t rec_type,
                              const uint8_t (*groups)[16], uint32_t n, const uint8_t src[16]);
/* One record of a report: its type, source count and group; the record's length is
 * returned (20 + 16 sources + aux data), so records are walked from offset 8. */
struct ipk_mld2_rec {
	uint8_t type;
	uint16_t nsrc;
	uint8_t group[16];
};
int ipk_mld2_rec_parse(const uint8_t *p, uint32_t len, struct ipk_mld2_rec *r);
/* MLDv1 (RFC 2710 §3): a query is 24 bytes (RFC 3810 §8.1 tells it from an MLDv2
 * one by that length), a report the same 24: type 131, code 0, checksum, Maximum
 * Response Delay 0, reserved, the group. */
#define IPK_MLD1_LEN 24u
/* An MLDv1 report of group, checksummed for src -> group (RFC 2710 §3: a report goes
 * to the group it reports; hop limit 1 and a router alert, as MLDv2's). Returns 24,
 * or 0 when cap is short. */
uint32_t ipk_mld1_report_emit(uint8_t *p, uint32_t cap, const uint8_t group[16],
                              const uint8_t src[16]);
/* ff02::16, all MLDv2-capable routers (RFC 3810 §5.2.14). */
extern const uint8_t ipk_ip6_all_mldv2_routers[16];

#ifdef __cplusplus
}
#endif
#endif
