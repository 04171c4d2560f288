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

#ifdef __cplusplus
}
#endif
#endif
