/*
 * Byte-vector tests of the IPv6 wire layer (issue 19): the IPv6 header, the
 * extension-header walk and its options, the IPv6 pseudo-header checksum, ICMPv6,
 * Neighbor Discovery and MLDv2; every parser against frames Linux sent
 * (linux_frames6.h, checked against tshark's decoding), emit -> parse round trips,
 * and the malformed shapes each parser must refuse.
 */
#include <string.h>

#include "check.h"
#include "linux_frames6.h"
#include "wire/wire.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static const uint8_t A1[16] = {0xfd, 0, 0, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
static const uint8_t A2[16] = {0xfd, 0, 0, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
static const uint8_t LL1[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0x5e, 0xff, 0xfe, 0, 0x77, 1};
static const uint8_t ALLNODES[16] = {0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
static const uint8_t UNSPEC[16] = {0};

/* Reference one's-complement checksum over the IPv6 pseudo-header and the bytes,
 * written independently of csum.c: the definition, 16-bit big-endian words. */
static uint16_t ref_csum6(const uint8_t *s, const uint8_t *d, uint8_t proto, const uint8_t *p,
                          uint32_t len)
{
	uint64_t sum = 0;
	uint32_t i;

	for (i = 0; i < 16; i += 2)
		sum += (uint32_t)(s[i] << 8 | s[i + 1]) + (uint32_t)(d[i] << 8 | d[i + 1]);
	sum += (len >> 16) + (len & 0xffff) + proto;
	for (i = 0; i < len; i++)
		sum += (i & 1) ? p[i] : (uint64_t)p[i] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* A datagram in b: IPv6 header (next header nh) then plen payload bytes from pl. */
static uint32_t mk6(uint8_t *b, uint8_t nh, const uint8_t *pl, uint32_t plen)
{
	struct ipk_ip6_hdr h;

	memset(&h, 0, sizeof(h));
	h.plen = (uint16_t)plen;
	h.next = nh;
	h.hlim = 64;
	memcpy(h.src, A1, 16);
	memcpy(h.dst, A2, 16);
	ipk_ip6_emit(b, IPK_IP6_HLEN, &h);
	memcpy(b + IPK_IP6_HLEN, pl, plen);
	return IPK_IP6_HLEN + plen;
}

/* ================================================================ header */

static const uint8_t ip6_bytes[40] = {
	0x6b, 0x8f, 0x12, 0x34, 0x00, 0x10, 0x11, 0x40,
	0xfd, 0, 0, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
	0xfd, 0, 0, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

static void test_ip6_parse_known_bytes(void)
{
	uint8_t b[64];
	struct ipk_ip6_hdr h;

	memcpy(b, ip6_bytes, 40);
	memset(b + 40, 0, 16);
	CHECK_EQ(ipk_ip6_parse(b, 56, &h), IPK_IP6_HLEN);
	CHECK_EQ(h.tclass, 0xb8); /* DSCP 46 (EF), ECN 0 */
	CHECK_EQ(h.flow, 0xf1234);
	CHECK_EQ(h.plen, 16);
	CHECK_EQ(h.next, IPK_IPPROTO_UDP);
	CHECK_EQ(h.hlim, 64);
	CHECK(memcmp(h.src, A1, 16) == 0);
	CHECK(memcmp(h.dst, A2, 16) == 0);
	/* trailing bytes (Ethernet padding) accepted */
	CHECK_EQ(ipk_ip6_parse(b, 60, &h), IPK_IP6_HLEN);
}

static void test_ip6_emit_known_bytes_and_round_trip(void)
{
	struct ipk_ip6_hdr h;
	uint8_t b[40], c[40];

	memset(&h, 0, sizeof(h));
	h.tclass = 0xb8;
	h.flow = 0xff1234; /* cut to 20 bits */
	h.plen = 16;
	h.next = IPK_IPPROTO_UDP;
	h.hlim = 64;
	memcpy(h.src, A1, 16);
	memcpy(h.dst, A2, 16);
	CHECK_EQ(ipk_ip6_emit(b, sizeof(b), &h), IPK_IP6_HLEN);
	CHECK(memcmp(b, ip6_bytes, 40) == 0);
	CHECK_EQ(ipk_ip6_emit(c, 39, &h), 0);
}

static void test_ip6_short_and_bad_version_rejected(void)
{
	uint8_t b[56];
	struct ipk_ip6_hdr h;
	uint32_t n;
	int bad = 0;

	memcpy(b, ip6_bytes, 40);
	memset(b + 40, 0, 16);
	for (n = 0; n < 56; n++) /* every cut before the payload's end */
		bad += ipk_ip6_parse(b, n, &h) != IPK_WIRE_ESHORT;
	CHECK_EQ(bad, 0);
	b[0] = 0x4b;
	CHECK_EQ(ipk_ip6_parse(b, 56, &h), IPK_WIRE_EVERSION);
	b[0] = 0x7b;
	CHECK_EQ(ipk_ip6_parse(b, 56, &h), IPK_WIRE_EVERSION);
}

static void test_ip6_payload_length_past_buffer_rejected(void)
{
	uint8_t b[56];
	struct ipk_ip6_hdr h;

	memcpy(b, ip6_bytes, 40);
	memset(b + 40, 0, 16);
	ipk_wr16(b + 4, 17);
	CHECK_EQ(ipk_ip6_parse(b, 56, &h), IPK_WIRE_ESHORT);
	ipk_wr16(b + 4, 0xffff);
	CHECK_EQ(ipk_ip6_parse(b, 56, &h), IPK_WIRE_ESHORT);
	ipk_wr16(b + 4, 0); /* plen 0 parses: the walk refuses what needs a payload */
	CHECK_EQ(ipk_ip6_parse(b, 56, &h), IPK_IP6_HLEN);
}

static void test_ip6_address_helpers(void)
{
	static const uint8_t sn[16] = {0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0x77, 1};
	uint8_t o[16], mac[6];

	ipk_ip6_solicited_node(o, LL1);
	CHECK(memcmp(o, sn, 16) == 0); /* RFC 4291 §2.7.1 */
	CHECK(ipk_ip6_is_solicited_node(o));
	CHECK(!ipk_ip6_is_solicited_node(ALLNODES));
	ipk_ip6_mcast_mac(mac, o);
	CHECK(memcmp(mac, "\x33\x33\xff\x00\x77\x01", 6) == 0); /* RFC 2464 §7 */
	CHECK(ipk_ip6_is_multicast(o) && !ipk_ip6_is_multicast(A1));
	CHECK(ipk_ip6_is_linklocal(LL1) && !ipk_ip6_is_linklocal(A1));
	CHECK(ipk_ip6_is_unspecified(UNSPEC) && !ipk_ip6_is_unspecified(A1));
}

/* ====================================================== extension headers */

static void test_ext_no_headers_gives_upper_layer(void)
{
	uint8_t b[128], pl[8] = {0};
	struct ipk_ip6_ext x;
	uint32_t n = mk6(b, IPK_IPPROTO_UDP, pl, 8);

	CHECK_EQ(ipk_ip6_ext_walk(b, n, IPK_IPPROTO_UDP, 0, &x), IPK_IP6X_OK);
	CHECK_EQ(x.proto, IPK_IPPROTO_UDP);
	CHECK_EQ(x.off, 40);
	CHECK_EQ(x.nh_off, 6);
	CHECK_EQ(x.nhdrs, 0);
}

static void test_ext_hbh_dst_rh_then_tcp(void)
{
	/* HBH (router alert 0, PadN), DstOpts (PadN 4), RH type 4 segleft 0, TCP */
	static const uint8_t pl[] = {60, 0, 5, 2, 0, 0, 1, 0,
	                             43, 0, 1, 4, 0, 0, 0, 0,
	                             6, 0, 4, 0, 0, 0, 0, 0,
	                             0, 0, 0, 0};
	uint8_t b[128];
	struct ipk_ip6_ext x;
	uint32_t n = mk6(b, 0, pl, sizeof(pl));

	CHECK_EQ(ipk_ip6_ext_walk(b, n, 0, 0, &x), IPK_IP6X_OK);
	CHECK_EQ(x.proto, IPK_IPPROTO_TCP);
	CHECK_EQ(x.off, 64);
	CHECK_EQ(x.nh_off, 56); /* the routing header's next header field */
	CHECK_EQ(x.nhdrs, 3);
	CHECK_EQ(x.ra, 1); /* router alert value 0 (MLD) + 1 */
	CHECK(x.has_rh && x.rh_type == 4 && x.rh_segleft == 0);
	CHECK(!x.has_frag && !x.icmp);
}

static void test_ext_no_next_header(void)
{
	static const uint8_t pl[] = {59, 0, 1, 4, 0, 0, 0, 0, 0xde, 0xad};
	uint8_t b[64];
	struct ipk_ip6_ext x;
	uint32_t n = mk6(b, IPK_IPPROTO_DSTOPTS, pl, sizeof(pl));

	CHECK_EQ(ipk_ip6_ext_walk(b, n, IPK_IPPROTO_DSTOPTS, 0, &x), IPK_IP6X_OK);
	CHECK_EQ(x.proto, IPK_IPPROTO_NONE);
	CHECK_EQ(x.off, 48);
	n = mk6(b, IPK_IPPROTO_NONE, pl, 0);
	CHECK_EQ(ipk_ip6_ext_walk(b, n, IPK_IPPROTO_NONE, 0, &x), IPK_IP6X_OK);
	CHECK_EQ(x.proto, IPK_IPPROTO_NONE);
}

static void test_ext_hbh_not_first_is_param_problem_code1(void)
{
	static const uint8_t pl[] = {0, 0, 1, 4, 0, 0, 0, 0, 17, 0, 1, 4, 0, 0, 0, 0};
	uint8_t b[64];
	struct ipk_ip6_ext x;
	uint32_t n = mk6(b, IPK_IPPROTO_DSTOPTS, pl, sizeof(pl));

	CHECK_EQ(ipk_ip6_ext_walk(b, n, IPK_IPPROTO_DSTOPTS, 0, &x), IPK_IP6X_HBH_NOT_FIRST);
	CHECK(x.icmp && x.icmp_code == 1 && x.icmp_ptr == 40);
	/* no error to a multicast destination (RFC 4443 §2.4(e)) */
	CHECK_EQ(ipk_ip6_ext_walk(b, n, IPK_IPPROTO_DSTOPTS, 1, &x), IPK_IP6X_HBH_NOT_FIRST);
	CHECK(!x.icmp);
}

/* A chain of k destination-options headers of 8 bytes, then UDP. */
static uint32_t mk_chain(uint8_t *b, uint32_t k)
{
	uint8_t pl[1200];
	uint32_t i;

	memset(pl, 0, sizeof(pl));
	for (i = 0; i < k; i++) {
		pl[i * 8] = i + 1 < k ? IPK_IPPROTO_DSTOPTS : IPK_IPPROTO_UDP;
		pl[i * 8 + 2] = IPK_IP6OPT_PADN;
		pl[i * 8 + 3] = 4;
	}
	return mk6(b, IPK_IPPROTO_DSTOPTS, pl, k * 8 + 8);
}

static void test_ext_chain_over_count_bound_dropped(void)
{
	uint8_t b[1300];
	struct ipk_ip6_ext x;
	uint32_t n;

	n = mk_chain(b, IPK_IP6_EXT_MAX_COUNT);
	CHECK_EQ(ipk_ip6_ext_walk(b, n, IPK_IPPROTO_DSTOPTS, 0, &x), IPK_IP6X_OK);
	CHECK_EQ(x.nhdrs, IPK_IP6_EXT_MAX_COUNT);
	CHECK_EQ(x.proto, IPK_IPPROTO_UDP);
	n = mk_chain(b, IPK_IP6_EXT_MAX_COUNT + 1);
	CHECK_EQ(ipk_ip6_ext_walk(b, n, IPK_IPPROTO_DSTOPTS, 0, &x), IPK_IP6X_TOO_MANY);
	n = mk_chain(b, 140); /* a chain that never ends: as many as fit */
	CHECK_EQ(ipk_ip6_ext_walk(b, n, IPK_IPPROTO_DSTOPTS, 0, &x), IPK_IP6X_TOO_MANY);
	CHECK(!x.icmp);
}

static void test_ext_chain_over_length_bound_dropped(void)
{
	/* one routing header (segleft 0) of 1032 bytes: over IPK_IP6_EXT_MAX_LEN */
	uint8_t pl[1100], b[1200];
	struct ipk_ip6_ext x;
	uint32_t n;

	memset(pl, 0, sizeof(pl));
	pl[0] = IPK_IPPROTO_UDP;
	pl[1] = (IPK_IP6_EXT_MAX_LEN + 8) / 8 - 1;
	pl[2] = 4;
	n = mk6(b, IPK_IPPROTO_ROUTING, pl, IPK_IP6_EXT_MAX_LEN + 8 + 8);
	CHECK_EQ(ipk_ip6_ext_walk(b, n, IPK_IPPROTO_ROUTING, 0, &x), IPK_IP6X_TOO_LONG);
	pl[1] = IPK_IP6_EXT_MAX_LEN / 8 - 1; /* exactly at the bound: accepted */
	n = mk6(b, IPK_IPPROTO_ROUTING, pl, IPK_IP6_EXT_MAX_LEN + 8);
	CHECK_EQ(ipk_ip6_ext_walk(b, n, IPK_IPPROTO_ROUTING, 0, &x), IPK_IP6X_OK);
	CHECK_EQ(x.off, 40 + IPK_IP6_EXT_MAX_LEN);
}

static void test_ext_every_truncation_dropped(void)
{
	static const uint8_t pl[] = {60, 0, 5, 2, 0, 0, 1, 0, 44, 0, 1, 4, 0, 0, 0, 0,
	                             17, 0, 0, 0, 0, 0, 0, 1};
	uint8_t b[128];
	struct ipk_ip6_ext x;
	uint32_t n = mk6(b, 0, pl, sizeof(pl)), cut;
	int bad = 0;

	CHECK_EQ(ipk_ip6_ext_walk(b, n, 0, 0, &x), IPK_IP6X_OK);
	CHECK_EQ(x.off, 64);
	CHECK(x.frag_atomic);
	for (cut = 0; cut < n; cut++)
		bad += ipk_ip6_ext_walk(b, cut, 0, 0, &x) != IPK_IP6X_TRUNC;
	CHECK_EQ(bad, 0);
}

static void test_ext_rh0_dropped(void)
{
	static const uint8_t pl[] = {17, 2, 0, 1, 0, 0, 0, 0,
	                             0xfd, 0, 0, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9};
	uint8_t b[128], q[sizeof(pl)];
	struct ipk_ip6_ext x;
	uint32_t n = mk6(b, IPK_IPPROTO_ROUTING, pl, sizeof(pl));

	/* RFC 5095 §3: segments left 1: Parameter Problem code 0 at the type field */
	CHECK_EQ(ipk_ip6_ext_walk(b, n, IPK_IPPROTO_ROUTING, 0, &x), IPK_IP6X_RH0);
	CHECK(x.has_rh && x.rh_type == 0 && x.rh_segleft == 1);
	CHECK(x.icmp && x.icmp_code == 0 && x.icmp_ptr == 42);
	/* segments left 0: still dropped (issue 19), silently */
	memcpy(q, pl, sizeof(q));
	q[3] = 0;
	n = mk6(b, IPK_IPPROTO_ROUTING, q, sizeof(q));
	CHECK_EQ(ipk_ip6_ext_walk(b, n, IPK_IPPROTO_ROUTING, 0, &x), IPK_IP6X_RH0);
	CHECK(!x.icmp);
}

static void test_ext_unknown_routing_type_by_segments_left(void)
{
	uint8_t pl[24] = {17, 2, 4, 0};
	uint8_t b[128];
	struct ipk_ip6_ext x;
	uint32_t n = mk6(b, IPK_IPPROTO_ROUTING, pl, sizeof(pl));

	CHECK_EQ(ipk_ip6_ext_walk(b, n, IPK_IPPROTO_ROUTING, 0, &x), IPK_IP6X_OK);
	CHECK_EQ(x.proto, IPK_IPPROTO_UDP);
	b[43] = 3; /* segments left 3: RFC 8200 §4.4 */
	CHECK_EQ(ipk_ip6_ext_walk(b, n, IPK_IPPROTO_ROUTING, 0, &x), IPK_IP6X_RH_UNKNOWN);
	CHECK(x.icmp && x.icmp_code == 0 && x.icmp_ptr == 42 && x.rh_segleft == 3);
}

static void test_ext_fragment_fields_and_atomic(void)
{
	uint8_t pl[8 + 16], b[128];
	struct ipk_ip6_ext x;
	uint32_t n;

	memset(pl, 0, sizeof(pl));
	CHECK_EQ(ipk_ip6_frag_emit(pl, 8, IPK_IPPROTO_UDP, 1448, 1, 0x12345678), 8);
	n = mk6(b, IPK_IPPROTO_FRAGMENT, pl, sizeof(pl));
	CHECK_EQ(ipk_ip6_ext_walk(b, n, IPK_IPPROTO_FRAGMENT, 0, &x), IPK_IP6X_OK);
	CHECK(x.has_frag && x.frag_more && !x.frag_atomic);
	CHECK_EQ(x.frag_off, 1448);
	CHECK_EQ(x.frag_id, 0x12345678);
	CHECK_EQ(x.frag_hoff, 40);
	CHECK_EQ(x.proto, IPK_IPPROTO_UDP);
	CHECK_EQ(x.off, 48);
	/* RFC 6946: offset 0, M 0 is an atomic fragment, walked past */
	ipk_ip6_frag_emit(pl, 8, IPK_IPPROTO_UDP, 0, 0, 7);
	n = mk6(b, IPK_IPPROTO_FRAGMENT, pl, sizeof(pl));
	CHECK_EQ(ipk_ip6_ext_walk(b, n, IPK_IPPROTO_FRAGMENT, 0, &x), IPK_IP6X_OK);
	CHECK(x.frag_atomic && !x.has_frag);
	CHECK_EQ(x.proto, IPK_IPPROTO_UDP);
	CHECK_EQ(ipk_ip6_frag_emit(pl, 8, 17, 12, 0, 1), 0); /* not a multiple of 8 */
	CHECK_EQ(ipk_ip6_frag_emit(pl, 7, 17, 8, 0, 1), 0);
}

static void test_ext_fragment_bad_length_and_size(void)
{
	uint8_t pl[8 + 20], b[128];
	struct ipk_ip6_ext x;
	uint32_t n;

	memset(pl, 0, sizeof(pl));
	/* RFC 8200 §4.5: M set, 20 bytes of data: pointer at the payload length */
	ipk_ip6_frag_emit(pl, 8, IPK_IPPROTO_UDP, 0, 1, 1);
	n = mk6(b, IPK_IPPROTO_FRAGMENT, pl, sizeof(pl));
	CHECK_EQ(ipk_ip6_ext_walk(b, n, IPK_IPPROTO_FRAGMENT, 0, &x), IPK_IP6X_FRAG_LEN);
	CHECK(x.icmp && x.icmp_code == 0 && x.icmp_ptr == 4);
	/* offset + length past 65535: pointer at the fragment offset field */
	ipk_ip6_frag_emit(pl, 8, IPK_IPPROTO_UDP, 65528, 0, 1);
	n = mk6(b, IPK_IPPROTO_FRAGMENT, pl, sizeof(pl));
	CHECK_EQ(ipk_ip6_ext_walk(b, n, IPK_IPPROTO_FRAGMENT, 0, &x), IPK_IP6X_FRAG_SIZE);
	CHECK(x.icmp && x.icmp_code == 0 && x.icmp_ptr == 42);
}

/* A destination-options header holding option bytes o (padded with Pad1), then UDP. */
static enum ipk_ip6x walk_dstopt(const uint8_t *o, uint32_t olen, int mcast,
                                 struct ipk_ip6_ext *x)
{
	uint8_t pl[16], b[64];
	uint32_t n;

	memset(pl, 0, sizeof(pl));
	pl[0] = IPK_IPPROTO_UDP;
	pl[1] = 0;
	memcpy(pl + 2, o, olen);
	n = mk6(b, IPK_IPPROTO_DSTOPTS, pl, 16);
	return ipk_ip6_ext_walk(b, n, IPK_IPPROTO_DSTOPTS, mcast, x);
}

static void test_ext_unknown_option_action_bits(void)
{
	static const uint8_t skip[] = {0x1e, 1, 0, 1, 0, 0}; /* 00: skip (then PadN) */
	static const uint8_t disc[] = {0x5e, 1, 0, 1, 0, 0}; /* 01 */
	static const uint8_t icmp[] = {1, 0, 0x9e, 1, 0, 0}; /* 10, after a PadN */
	static const uint8_t ucast[] = {0xde, 1, 0, 1, 0, 0}; /* 11 */
	struct ipk_ip6_ext x;

	CHECK_EQ(walk_dstopt(skip, 6, 0, &x), IPK_IP6X_OK);
	CHECK_EQ(walk_dstopt(disc, 6, 0, &x), IPK_IP6X_OPT_UNKNOWN);
	CHECK(!x.icmp);
	CHECK_EQ(walk_dstopt(icmp, 6, 0, &x), IPK_IP6X_OPT_UNKNOWN);
	CHECK(x.icmp && x.icmp_code == 2 && x.icmp_ptr == 44);
	CHECK_EQ(walk_dstopt(icmp, 6, 1, &x), IPK_IP6X_OPT_UNKNOWN);
	CHECK(x.icmp); /* 10: even to multicast (RFC 4443 §2.4(e.3)) */
	CHECK_EQ(walk_dstopt(ucast, 6, 0, &x), IPK_IP6X_OPT_UNKNOWN);
	CHECK(x.icmp && x.icmp_code == 2 && x.icmp_ptr == 42);
	CHECK_EQ(walk_dstopt(ucast, 6, 1, &x), IPK_IP6X_OPT_UNKNOWN);
	CHECK(!x.icmp);
}

static void test_ext_option_past_header_and_long_padding_dropped(void)
{
	static const uint8_t past[] = {0x1e, 5, 0, 0, 0, 0}; /* 7 bytes in a 6-byte area */
	static const uint8_t hanging[] = {1, 2, 0, 0, 0, 0x1e}; /* last type without length */
	static const uint8_t pad8[] = {1, 4, 0, 0, 0, 0}; /* 6 + Pad1 x0: fine */
	uint8_t opts[14];
	uint8_t pl[16], b[64];
	struct ipk_ip6_ext x;
	uint32_t n, bad, ra;

	CHECK_EQ(walk_dstopt(past, 6, 0, &x), IPK_IP6X_OPT_BAD);
	CHECK_EQ(walk_dstopt(hanging, 6, 0, &x), IPK_IP6X_OPT_BAD);
	CHECK_EQ(walk_dstopt(pad8, 6, 0, &x), IPK_IP6X_OK);
	/* 14 bytes of padding in a 16-byte header: RFC 8504 §5.3 allows 7 at most */
	memset(opts, 0, sizeof(opts));
	opts[0] = IPK_IP6OPT_PADN;
	opts[1] = 12;
	memset(pl, 0, sizeof(pl));
	pl[0] = IPK_IPPROTO_UDP;
	pl[1] = 1;
	memcpy(pl + 2, opts, 14);
	n = mk6(b, IPK_IPPROTO_DSTOPTS, pl, 16);
	CHECK_EQ(ipk_ip6_ext_walk(b, n, IPK_IPPROTO_DSTOPTS, 0, &x), IPK_IP6X_OPT_BAD);
	memset(pl + 2, 0, 14); /* 14 Pad1 */
	CHECK_EQ(ipk_ip6_opts_walk(pl, 16, &bad, &ra), IPK_IP6_OPT_MALFORMED);
	CHECK_EQ(bad, 9); /* the eighth Pad1 */
}

/* ============================================================= checksums */

static void test_csum6_pseudo_header_equals_reference(void)
{
	uint8_t p[301], s[16], d[16];
	uint32_t len, i, x = 7;
	int bad = 0, odd;

	for (len = 0; len <= sizeof(p); len += 13) {
		for (i = 0; i < sizeof(p); i++) {
			x = x * 1103515245u + 12345u;
			p[i] = (uint8_t)(x >> 16);
		}
		for (i = 0; i < 16; i++) {
			s[i] = (uint8_t)(0xff - i * len);
			d[i] = (uint8_t)(i * 31 + len);
		}
		bad += ipk_csum_l4_6(s, d, IPK_IPPROTO_TCP, p, len) !=
		       ref_csum6(s, d, IPK_IPPROTO_TCP, p, len);
		odd = 0;
		bad += ipk_csum_fold(ipk_csum_add(ipk_csum_pseudo6(s, d, 58, len), p, len, &odd)) !=
		       ref_csum6(s, d, 58, p, len);
	}
	CHECK_EQ(bad, 0);
	/* all-ones addresses: every carry path */
	memset(s, 0xff, 16);
	memset(d, 0xff, 16);
	memset(p, 0xff, sizeof(p));
	CHECK_EQ(ipk_csum_l4_6(s, d, 17, p, 301), ref_csum6(s, d, 17, p, 301));
}

static void test_udp6_zero_checksum_invalid(void)
{
	uint8_t u[12] = {0x30, 0x39, 0x27, 0x0f, 0, 12, 0, 0, 'a', 'b', 'c', 'd'};
	uint16_t c;

	c = ipk_udp6_csum(A1, A2, u, 12);
	CHECK(c != 0);
	ipk_wr16(u + 6, c);
	CHECK(ipk_udp6_csum_ok(A1, A2, u, 12));
	CHECK_EQ(ipk_csum_l4_6(A1, A2, 17, u, 12), 0);
	u[11] ^= 1;
	CHECK(!ipk_udp6_csum_ok(A1, A2, u, 12));
	u[11] ^= 1;
	/* RFC 8200 §8.1: a zero checksum field is refused even where IPv4 takes it */
	ipk_wr16(u + 6, 0);
	CHECK(!ipk_udp6_csum_ok(A1, A2, u, 12));
	CHECK(!ipk_udp6_csum_ok(A1, A2, u, 7));
}

static void test_udp6_computed_zero_sent_as_ffff(void)
{
	uint8_t u[10] = {0, 1, 0, 2, 0, 10, 0, 0, 0, 0};
	uint16_t want;

	/* choose the last two bytes so the sum comes out all ones: checksum 0 */
	want = ref_csum6(A1, A2, 17, u, 10);
	ipk_wr16(u + 8, want);
	CHECK_EQ(ref_csum6(A1, A2, 17, u, 10), 0);
	/* the sum is right with the field 0, and still the datagram is refused */
	CHECK(!ipk_udp6_csum_ok(A1, A2, u, 10));
	CHECK_EQ(ipk_udp6_csum(A1, A2, u, 10), 0xffff);
	ipk_wr16(u + 6, 0xffff);
	CHECK(ipk_udp6_csum_ok(A1, A2, u, 10));
}

/* ============================================================ ICMPv6 */

static void test_icmp6_echo_parse_emit_and_checksum(void)
{
	uint8_t m[16] = {128, 0, 0, 0, 0x12, 0x34, 0x00, 0x07, 'p', 'i', 'n', 'g', 0, 1, 2, 3};
	struct ipk_icmp6_hdr h, h2;
	uint8_t b[8];

	uint16_t want = ref_csum6(A1, A2, IPK_IPPROTO_ICMP6, m, sizeof(m));

	m[2] = 0x55; /* csum_fill ignores what the field held */
	ipk_icmp6_csum_fill(m, sizeof(m), A1, A2);
	CHECK_EQ(ipk_rd16(m + 2), want);
	CHECK_EQ(ipk_csum_l4_6(A1, A2, IPK_IPPROTO_ICMP6, m, sizeof(m)), 0);
	CHECK_EQ(ipk_icmp6_parse(m, sizeof(m), &h), IPK_ICMP6_HLEN);
	CHECK(h.type == IPK_ICMP6_ECHO_REQUEST && h.code == 0);
	CHECK_EQ(h.id, 0x1234);
	CHECK_EQ(h.seq, 7);
	CHECK(!ipk_icmp6_is_error(h.type));
	h.type = IPK_ICMP6_ECHO_REPLY;
	CHECK_EQ(ipk_icmp6_emit(b, sizeof(b), &h), IPK_ICMP6_HLEN);
	CHECK_EQ(ipk_icmp6_parse(b, sizeof(b), &h2), IPK_ICMP6_HLEN);
	CHECK(h2.type == IPK_ICMP6_ECHO_REPLY && h2.id == 0x1234 && h2.seq == 7);
	CHECK_EQ(ipk_icmp6_emit(b, 7, &h), 0);
	CHECK_EQ(ipk_icmp6_parse(m, 7, &h), IPK_WIRE_ESHORT);
}

/* The invoking packet of the error tests: IPv6, destination options, TCP. */
static uint32_t invoking_tcp(uint8_t *b, uint32_t payload)
{
	uint8_t pl[1600];

	memset(pl, 0xa5, sizeof(pl));
	memcpy(pl, "\x06\x00\x01\x04\x00\x00\x00\x00", 8);
	memcpy(pl + 8, "\xc3\x50\x00\x50\x11\x22\x33\x44", 8);
	return mk6(b, IPK_IPPROTO_DSTOPTS, pl, 8 + 20 + payload);
}

static void test_icmp6_errors_carry_param_and_quote(void)
{
	static const uint8_t types[4] = {IPK_ICMP6_DST_UNREACH, IPK_ICMP6_PKT_TOO_BIG,
	                                 IPK_ICMP6_TIME_EXCEEDED, IPK_ICMP6_PARAM_PROB};
	static const uint32_t params[4] = {0, 1280, 0, 42};
	uint8_t inv[1700], m[1400];
	struct ipk_icmp6_hdr h, r;
	struct ipk_icmp6_quote q;
	uint32_t n = invoking_tcp(inv, 100), len, i;

	for (i = 0; i < 4; i++) {
		memset(&h, 0, sizeof(h));
		h.type = types[i];
		h.code = (uint8_t)(i == 0 ? 4 : 0);
		h.param = params[i];
		len = ipk_icmp6_error_emit(m, sizeof(m), &h, inv, n, A2, A1);
		CHECK_EQ(len, 8 + n);
		CHECK_EQ(ipk_csum_l4_6(A2, A1, 58, m, len), 0);
		CHECK_EQ(ipk_icmp6_parse(m, len, &r), 8);
		CHECK(r.type == types[i] && r.code == h.code && r.param == params[i]);
		CHECK(memcmp(m + 8, inv, n) == 0);
		CHECK_EQ(ipk_icmp6_quote_parse(m + 8, len - 8, &q), IPK_IP6_HLEN);
		CHECK(memcmp(q.src, A1, 16) == 0 && memcmp(q.dst, A2, 16) == 0);
		CHECK(q.proto == IPK_IPPROTO_TCP && q.off == 48);
		CHECK(q.has_ports && q.has_seq);
		CHECK(q.sport_be == ipk_rdbe16((const uint8_t *)"\xc3\x50"));
		CHECK_EQ(q.seq, 0x11223344);
	}
	memset(&h, 0, sizeof(h));
	h.type = IPK_ICMP6_ECHO_REQUEST; /* not an error */
	CHECK_EQ(ipk_icmp6_error_emit(m, sizeof(m), &h, inv, n, A2, A1), 0);
}

static void test_icmp6_error_quote_cut_to_minimum_mtu(void)
{
	uint8_t inv[1700], m[1600];
	struct ipk_icmp6_hdr h;
	uint32_t n = invoking_tcp(inv, 1400), len;

	memset(&h, 0, sizeof(h));
	h.type = IPK_ICMP6_PKT_TOO_BIG;
	h.param = 1280;
	/* RFC 4443 §2.4(c): the whole error fits in 1280 bytes with its IPv6 header */
	len = ipk_icmp6_error_emit(m, sizeof(m), &h, inv, n, A2, A1);
	CHECK_EQ(len, IPK_IP6_MIN_MTU - IPK_IP6_HLEN);
	CHECK_EQ(ipk_csum_l4_6(A2, A1, 58, m, len), 0);
	/* and to the caller's room */
	len = ipk_icmp6_error_emit(m, 100, &h, inv, n, A2, A1);
	CHECK_EQ(len, 100);
	CHECK_EQ(ipk_csum_l4_6(A2, A1, 58, m, len), 0);
	CHECK_EQ(ipk_icmp6_error_emit(m, 7, &h, inv, n, A2, A1), 0);
}

static void test_icmp6_quote_every_cut(void)
{
	uint8_t inv[200];
	struct ipk_icmp6_quote q;
	uint32_t n = invoking_tcp(inv, 0), cut;
	int bad = 0;

	for (cut = 0; cut < 40; cut++)
		bad += ipk_icmp6_quote_parse(inv, cut, &q) != IPK_WIRE_ESHORT;
	for (cut = 40; cut <= n; cut++) {
		bad += ipk_icmp6_quote_parse(inv, cut, &q) != IPK_IP6_HLEN;
		bad += q.has_ports != (cut >= 52);
		bad += q.has_seq != (cut >= 56);
		bad += (q.proto == IPK_IPPROTO_TCP) != (cut >= 48);
	}
	CHECK_EQ(bad, 0);
	inv[0] = 0x45;
	CHECK_EQ(ipk_icmp6_quote_parse(inv, n, &q), IPK_WIRE_EVERSION);
}

static void test_icmp6_quote_fragment_and_echo(void)
{
	uint8_t pl[32], b[100];
	struct ipk_icmp6_quote q;
	uint32_t n;

	memset(pl, 0, sizeof(pl));
	/* first fragment of an echo request: the echo id is there */
	ipk_ip6_frag_emit(pl, 8, IPK_IPPROTO_ICMP6, 0, 1, 9);
	memcpy(pl + 8, "\x80\x00\x00\x00\xbe\xef\x00\x05", 8);
	n = mk6(b, IPK_IPPROTO_FRAGMENT, pl, 16);
	CHECK_EQ(ipk_icmp6_quote_parse(b, n, &q), 40);
	CHECK(q.proto == IPK_IPPROTO_ICMP6 && q.has_echo && q.echo_id == 0xbeef && q.echo_seq == 5);
	/* a later fragment hides the upper layer */
	ipk_ip6_frag_emit(pl, 8, IPK_IPPROTO_UDP, 1448, 0, 9);
	n = mk6(b, IPK_IPPROTO_FRAGMENT, pl, 16);
	CHECK_EQ(ipk_icmp6_quote_parse(b, n, &q), 40);
	CHECK(!q.has_ports && !q.has_echo && q.proto == IPK_IPPROTO_FRAGMENT);
}

/* ==================================================== ND and MLDv2 */

static const uint8_t MAC1[6] = {0x02, 0x00, 0x5e, 0x00, 0x77, 0x01};

/* A whole ND message: fixed part from m, then the options bytes given. */
static uint32_t mk_nd(uint8_t *b, uint32_t cap, const struct ipk_nd_msg *m, const uint8_t *o,
                      uint32_t olen, const uint8_t *src, const uint8_t *dst)
{
	uint32_t n = ipk_nd_emit(b, cap, m);

	memcpy(b + n, o, olen);
	ipk_icmp6_csum_fill(b, n + olen, src, dst);
	return n + olen;
}

static void test_nd_ra_round_trip_with_options(void)
{
	struct ipk_nd_msg m, r;
	struct ipk_nd_prefix pf;
	uint8_t o[200], b[256];
	static const uint8_t rdnss[40] = {25, 5, 0, 0, 0, 0, 0x0e, 0x10,
	                                  0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x53,
	                                  0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x54};
	uint32_t olen = 0, n;

	memset(&m, 0, sizeof(m));
	m.type = IPK_ICMP6_ND_RA;
	m.cur_hlim = 64;
	m.flags = IPK_ND_RA_MANAGED | IPK_ND_RA_OTHER | 0x08; /* + preference high (RFC 4191) */
	m.router_lifetime = 1800;
	m.reachable = 30000;
	m.retrans = 1000;
	memset(&pf, 0, sizeof(pf));
	pf.plen = 64;
	pf.flags = IPK_ND_PFX_ONLINK | IPK_ND_PFX_AUTO;
	pf.valid = 86400;
	pf.preferred = 14400;
	memcpy(pf.prefix, A1, 8);
	olen += ipk_nd_opt_lla_emit(o + olen, 8, IPK_NDOPT_SLLA, MAC1);
	olen += ipk_nd_opt_mtu_emit(o + olen, 8, 1500);
	olen += ipk_nd_opt_prefix_emit(o + olen, 32, &pf);
	memcpy(o + olen, rdnss, 40);
	olen += 40;
	memcpy(o + olen, "\xfe\x01\x00\x00\x00\x00\x00\x00", 8); /* unknown type: skipped */
	olen += 8;
	n = mk_nd(b, sizeof(b), &m, o, olen, LL1, ALLNODES);
	CHECK_EQ(n, 16 + 8 + 8 + 32 + 40 + 8);
	CHECK_EQ(ipk_csum_l4_6(LL1, ALLNODES, 58, b, n), 0);
	CHECK_EQ(ipk_nd_parse(b, n, &r), 16);
	CHECK(r.type == IPK_ICMP6_ND_RA && r.code == 0 && r.cur_hlim == 64);
	CHECK_EQ(r.flags, IPK_ND_RA_MANAGED | IPK_ND_RA_OTHER | 0x08);
	CHECK_EQ(r.router_lifetime, 1800);
	CHECK_EQ(r.reachable, 30000);
	CHECK_EQ(r.retrans, 1000);
	CHECK(r.opts.has_slla && memcmp(r.opts.slla, MAC1, 6) == 0 && !r.opts.has_tlla);
	CHECK(r.opts.has_mtu && r.opts.mtu == 1500);
	CHECK_EQ(r.opts.nprefix, 1);
	CHECK(r.opts.prefix[0].plen == 64 && r.opts.prefix[0].flags == 0xc0);
	CHECK(r.opts.prefix[0].valid == 86400 && r.opts.prefix[0].preferred == 14400);
	CHECK(memcmp(r.opts.prefix[0].prefix, pf.prefix, 16) == 0);
	CHECK_EQ(r.opts.nrdnss, 2);
	CHECK_EQ(r.opts.rdnss_lifetime, 3600);
	CHECK(r.opts.rdnss[1][15] == 0x54);
}

static void test_nd_ns_na_redirect_rs_round_trip(void)
{
	static const uint8_t types[4] = {IPK_ICMP6_ND_NS, IPK_ICMP6_ND_NA, IPK_ICMP6_ND_REDIRECT,
	                                 IPK_ICMP6_ND_RS};
	static const uint32_t fixed[4] = {24, 24, 40, 8};
	struct ipk_nd_msg m, r;
	uint8_t b[128], o[8];
	uint32_t i, n;

	for (i = 0; i < 4; i++) {
		memset(&m, 0, sizeof(m));
		m.type = types[i];
		m.flags = types[i] == IPK_ICMP6_ND_NA ? 0xe0 : 0;
		memcpy(m.target, A2, 16);
		memcpy(m.dest, A1, 16);
		ipk_nd_opt_lla_emit(o, 8, IPK_NDOPT_TLLA, MAC1);
		n = mk_nd(b, sizeof(b), &m, o, 8, A1, A2);
		CHECK_EQ(n, fixed[i] + 8);
		CHECK_EQ(ipk_nd_parse(b, n, &r), (int)fixed[i]);
		CHECK_EQ(r.type, types[i]);
		CHECK(r.opts.has_tlla && memcmp(r.opts.tlla, MAC1, 6) == 0);
		if (types[i] != IPK_ICMP6_ND_RS)
			CHECK(memcmp(r.target, A2, 16) == 0);
		if (types[i] == IPK_ICMP6_ND_NA)
			CHECK_EQ(r.flags, 0xe0);
		if (types[i] == IPK_ICMP6_ND_REDIRECT)
			CHECK(memcmp(r.dest, A1, 16) == 0);
		CHECK_EQ(ipk_nd_parse(b, fixed[i] - 1, &r), IPK_WIRE_ESHORT);
		CHECK_EQ(ipk_nd_emit(b, fixed[i] - 1, &m), 0);
	}
	CHECK_EQ(ipk_nd_parse((const uint8_t *)"\x80\0\0\0\0\0\0\0", 8, &r), IPK_WIRE_EVERSION);
}

static void test_nd_redirected_header_option(void)
{
	uint8_t o[64];
	struct ipk_nd_opts op;

	memset(o, 0x11, sizeof(o));
	o[0] = IPK_NDOPT_REDIRECTED;
	o[1] = 6; /* 8 + 40 bytes of the redirected packet */
	CHECK_EQ(ipk_nd_opts_parse(o, 48, &op), 0);
	CHECK(op.has_redir && op.redir_off == 8 && op.redir_len == 40);
}

static void test_nd_option_length_zero_rejected(void)
{
	uint8_t o[16] = {IPK_NDOPT_SLLA, 1, 2, 0, 0x5e, 0, 0x77, 1, 0xfe, 0, 0, 0, 0, 0, 0, 0};
	struct ipk_nd_opts op;

	CHECK_EQ(ipk_nd_opts_parse(o, 16, &op), IPK_WIRE_EOPT); /* the unknown one, length 0 */
	o[9] = 1;
	CHECK_EQ(ipk_nd_opts_parse(o, 16, &op), 0);
	o[1] = 0;
	CHECK_EQ(ipk_nd_opts_parse(o, 16, &op), IPK_WIRE_EOPT);
}

static void test_nd_option_lengths_checked(void)
{
	uint8_t o[64];
	struct ipk_nd_opts op;
	uint32_t cut;
	int bad = 0;

	memset(o, 0, sizeof(o));
	o[0] = IPK_NDOPT_PREFIX;
	o[1] = 4;
	CHECK_EQ(ipk_nd_opts_parse(o, 32, &op), 0);
	for (cut = 1; cut < 32; cut++) /* an option past the end, or a lone type byte */
		bad += ipk_nd_opts_parse(o, cut, &op) != IPK_WIRE_EOPT;
	CHECK_EQ(bad, 0);
	o[1] = 3; /* prefix of 24 bytes */
	CHECK_EQ(ipk_nd_opts_parse(o, 24, &op), IPK_WIRE_EOPT);
	o[0] = IPK_NDOPT_SLLA;
	o[1] = 2;
	CHECK_EQ(ipk_nd_opts_parse(o, 16, &op), IPK_WIRE_EOPT);
	o[0] = IPK_NDOPT_MTU;
	CHECK_EQ(ipk_nd_opts_parse(o, 16, &op), IPK_WIRE_EOPT);
	o[0] = IPK_NDOPT_RDNSS; /* RFC 8106 §5.1: odd, at least 3 */
	CHECK_EQ(ipk_nd_opts_parse(o, 16, &op), IPK_WIRE_EOPT);
	o[1] = 4;
	CHECK_EQ(ipk_nd_opts_parse(o, 32, &op), IPK_WIRE_EOPT);
	o[1] = 3;
	CHECK_EQ(ipk_nd_opts_parse(o, 24, &op), 0);
	CHECK_EQ(op.nrdnss, 1);
	o[1] = 255; /* 2040 bytes claimed in 64 */
	CHECK_EQ(ipk_nd_opts_parse(o, 64, &op), IPK_WIRE_EOPT);
}

static void test_nd_many_prefixes_kept_and_counted(void)
{
	uint8_t o[32 * 6];
	struct ipk_nd_opts op;
	uint32_t i;

	memset(o, 0, sizeof(o));
	for (i = 0; i < 6; i++) {
		o[32 * i] = IPK_NDOPT_PREFIX;
		o[32 * i + 1] = 4;
		o[32 * i + 2] = (uint8_t)(48 + i);
	}
	CHECK_EQ(ipk_nd_opts_parse(o, sizeof(o), &op), 0);
	CHECK_EQ(op.nprefix, IPK_ND_MAX_PREFIX);
	CHECK_EQ(op.nprefix_seen, 6);
	CHECK_EQ(op.prefix[3].plen, 51);
}

/* ND message of type t from src to dst with hop limit hl, parsed and checked. */
static enum ipk_nd_bad nd_verdict(uint8_t t, uint8_t code, uint8_t flags, const uint8_t *target,
                                  const uint8_t *src, const uint8_t *dst, uint8_t hl, int slla)
{
	struct ipk_ip6_hdr ip;
	struct ipk_nd_msg m, r;
	uint8_t b[128], o[8];
	uint32_t n;

	memset(&m, 0, sizeof(m));
	m.type = t;
	m.code = code;
	m.flags = flags;
	memcpy(m.target, target, 16);
	memcpy(m.dest, target, 16);
	ipk_nd_opt_lla_emit(o, 8, IPK_NDOPT_SLLA, MAC1);
	n = mk_nd(b, sizeof(b), &m, o, slla ? 8 : 0, src, dst);
	memset(&ip, 0, sizeof(ip));
	ip.hlim = hl;
	memcpy(ip.src, src, 16);
	memcpy(ip.dst, dst, 16);
	if (ipk_nd_parse(b, n, &r) < 0)
		return (enum ipk_nd_bad)99;
	return ipk_nd_check(&ip, &r);
}

/* A Redirect from LL1 with the given target and destination, checked. */
static enum ipk_nd_bad nd_verdict2(const uint8_t *target, const uint8_t *dest)
{
	struct ipk_ip6_hdr ip;
	struct ipk_nd_msg m, r;
	uint8_t b[64];
	uint32_t n;

	memset(&m, 0, sizeof(m));
	m.type = IPK_ICMP6_ND_REDIRECT;
	memcpy(m.target, target, 16);
	memcpy(m.dest, dest, 16);
	n = mk_nd(b, sizeof(b), &m, (const uint8_t *)"", 0, LL1, A1);
	memset(&ip, 0, sizeof(ip));
	ip.hlim = 255;
	memcpy(ip.src, LL1, 16);
	memcpy(ip.dst, A1, 16);
	if (ipk_nd_parse(b, n, &r) < 0)
		return (enum ipk_nd_bad)99;
	return ipk_nd_check(&ip, &r);
}

static void test_nd_check_hop_limit_255_and_code_0(void)
{
	uint8_t sn[16];

	ipk_ip6_solicited_node(sn, A2);
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_NS, 0, 0, A2, A1, sn, 255, 1), IPK_ND_OK);
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_NS, 0, 0, A2, A1, sn, 254, 1), IPK_ND_BAD_HLIM);
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_NA, 0, 0x60, A1, A2, A1, 64, 0), IPK_ND_BAD_HLIM);
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_RA, 0, 0, A1, LL1, ALLNODES, 1, 1), IPK_ND_BAD_HLIM);
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_RS, 0, 0, A1, LL1, ALLNODES, 0, 1), IPK_ND_BAD_HLIM);
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_REDIRECT, 0, 0, A1, LL1, A1, 128, 0), IPK_ND_BAD_HLIM);
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_NS, 1, 0, A2, A1, sn, 255, 1), IPK_ND_BAD_CODE);
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_RA, 3, 0, A1, LL1, ALLNODES, 255, 1), IPK_ND_BAD_CODE);
}

/* A link-layer option naming a group or all-zero MAC is refused (fuzz_ip6 found an
 * NA whose target option bound a unicast neighbour to a multicast MAC). */
static void test_nd_check_refuses_group_lla(void)
{
	struct ipk_ip6_hdr ip;
	struct ipk_nd_msg m, r;
	static const uint8_t bad[3][6] = {{0x03, 0, 0x5e, 0, 0x77, 1}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	                                  {0, 0, 0, 0, 0, 0}};
	uint8_t b[64], o[8];
	uint32_t n, i, t;

	memset(&ip, 0, sizeof(ip));
	ip.hlim = 255;
	memcpy(ip.src, A2, 16);
	memcpy(ip.dst, A1, 16);
	for (t = 0; t < 2; t++)
		for (i = 0; i < 4; i++) {
			memset(&m, 0, sizeof(m));
			m.type = t ? IPK_ICMP6_ND_NA : IPK_ICMP6_ND_NS;
			m.flags = t ? 0x60 : 0;
			memcpy(m.target, t ? A2 : A1, 16);
			ipk_nd_opt_lla_emit(o, 8, t ? IPK_NDOPT_TLLA : IPK_NDOPT_SLLA, i < 3 ? bad[i] : MAC1);
			n = mk_nd(b, sizeof(b), &m, o, 8, A2, A1);
			CHECK(ipk_nd_parse(b, n, &r) > 0);
			CHECK_EQ(ipk_nd_check(&ip, &r), i < 3 ? IPK_ND_BAD_LLA : IPK_ND_OK);
		}
}

static void test_nd_check_per_type_rules(void)
{
	uint8_t sn[16];

	ipk_ip6_solicited_node(sn, A2);
	/* §7.1.1: target not multicast; DAD (unspecified source) to solicited-node, no SLLA */
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_NS, 0, 0, ALLNODES, A1, sn, 255, 1), IPK_ND_BAD_TARGET);
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_NS, 0, 0, A2, UNSPEC, sn, 255, 0), IPK_ND_OK);
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_NS, 0, 0, A2, UNSPEC, sn, 255, 1), IPK_ND_BAD_SRC);
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_NS, 0, 0, A2, UNSPEC, A2, 255, 0), IPK_ND_BAD_SRC);
	/* §7.1.2: solicited NA not to multicast; target not multicast */
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_NA, 0, 0x60, A2, A2, A1, 255, 0), IPK_ND_OK);
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_NA, 0, 0x60, A2, A2, ALLNODES, 255, 0), IPK_ND_BAD_SOLICITED);
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_NA, 0, 0x20, A2, A2, ALLNODES, 255, 0), IPK_ND_OK);
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_NA, 0, 0x20, sn, A2, ALLNODES, 255, 0), IPK_ND_BAD_TARGET);
	/* §6.1.2, §8.1: RA and Redirect from link-local only */
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_RA, 0, 0, A1, LL1, ALLNODES, 255, 1), IPK_ND_OK);
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_RA, 0, 0, A1, A1, ALLNODES, 255, 1), IPK_ND_BAD_SRC);
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_REDIRECT, 0, 0, A1, A2, A1, 255, 0), IPK_ND_BAD_SRC);
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_REDIRECT, 0, 0, A1, LL1, A1, 255, 0), IPK_ND_OK);
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_REDIRECT, 0, 0, sn, LL1, A1, 255, 0), IPK_ND_BAD_TARGET);
	/* §8.1: target a link-local router or the destination itself */
	CHECK_EQ(nd_verdict2(LL1, A2), IPK_ND_OK);
	CHECK_EQ(nd_verdict2(A2, A2), IPK_ND_OK);
	CHECK_EQ(nd_verdict2(A1, A2), IPK_ND_BAD_TARGET);
	/* §6.1.1: RS from the unspecified address without SLLA */
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_RS, 0, 0, A1, UNSPEC, ALLNODES, 255, 0), IPK_ND_OK);
	CHECK_EQ(nd_verdict(IPK_ICMP6_ND_RS, 0, 0, A1, UNSPEC, ALLNODES, 255, 1), IPK_ND_BAD_SRC);
}

static void test_mld2_report_emit_and_records(void)
{
	uint8_t groups[2][16], m[64], b[8];
	struct ipk_mld2_rec r;
	uint32_t n;

	ipk_ip6_solicited_node(groups[0], A1);
	ipk_ip6_solicited_node(groups[1], LL1);
	n = ipk_mld2_report_emit(m, sizeof(m), IPK_MLD2_CHANGE_TO_EXCLUDE,
	                         (const uint8_t(*)[16])groups, 2, LL1);
	CHECK_EQ(n, 48);
	CHECK(m[0] == IPK_ICMP6_MLD2_REPORT && ipk_rd16(m + 6) == 2);
	CHECK_EQ(ipk_csum_l4_6(LL1, ipk_ip6_all_mldv2_routers, 58, m, n), 0);
	CHECK_EQ(ipk_mld2_rec_parse(m + 8, n - 8, &r), 20);
	CHECK(r.type == IPK_MLD2_CHANGE_TO_EXCLUDE && r.nsrc == 0);
	CHECK(memcmp(r.group, groups[0], 16) == 0);
	CHECK_EQ(ipk_mld2_rec_parse(m + 28, 20, &r), 20);
	CHECK(memcmp(r.group, groups[1], 16) == 0);
	CHECK_EQ(ipk_mld2_rec_parse(m + 28, 19, &r), IPK_WIRE_ESHORT);
	m[30] = 0;
	m[31] = 1; /* one source claimed, not there */
	CHECK_EQ(ipk_mld2_rec_parse(m + 28, 20, &r), IPK_WIRE_ESHORT);
	CHECK_EQ(ipk_mld2_report_emit(m, 47, 4, (const uint8_t(*)[16])groups, 2, LL1), 0);
	CHECK_EQ(ipk_ip6_hbh_ra_emit(b, 8, 58), 8);
	CHECK(memcmp(b, "\x3a\x00\x05\x02\x00\x00\x01\x00", 8) == 0);
	CHECK_EQ(ipk_ip6_hbh_ra_emit(b, 7, 58), 0);
}

/* RFC 2710 §3: an MLDv1 report is 24 bytes, type 131, the group at 8, checksummed
 * for its destination (the group itself); a short buffer gets nothing. */
static void test_mld1_report_emit(void)
{
	uint8_t g[16], m[32];

	ipk_ip6_solicited_node(g, A1);
	memset(m, 0xee, sizeof(m));
	CHECK_EQ(ipk_mld1_report_emit(m, sizeof(m), g, LL1), 24);
	CHECK(m[0] == IPK_ICMP6_MLD1_REPORT && m[1] == 0);
	CHECK(ipk_rd16(m + 4) == 0 && ipk_rd16(m + 6) == 0);
	CHECK(memcmp(m + 8, g, 16) == 0);
	CHECK_EQ(m[24], 0xee); /* nothing written past the message */
	CHECK_EQ(ipk_csum_l4_6(LL1, g, 58, m, 24), 0);
	CHECK(ipk_csum_l4_6(LL1, ipk_ip6_all_mldv2_routers, 58, m, 24) != 0);
	CHECK_EQ(ipk_mld1_report_emit(m, 23, g, LL1), 0);
}

/* ===================================================== Linux frames */

static int lf6_is(const struct linux_frame6 *f, const char *name)
{
	return strcmp(f->name, name) == 0;
}

static const struct linux_frame6 *lf6_find(const char *name)
{
	size_t i;

	for (i = 0; i < NELEM(linux_frames6); i++)
		if (lf6_is(&linux_frames6[i], name))
			return &linux_frames6[i];
	return NULL;
}

/* NS, NA, RS: fields as tshark decoded them, the §7.1/§6.1 checks pass, and the
 * message re-emitted from the parsed fields (plus its one link-layer option) is
 * Linux's, checksum included. */
static void check_lf6_nd(const struct linux_frame6 *f, const struct ipk_ip6_hdr *ip,
                         const uint8_t *p, uint32_t len)
{
	struct ipk_nd_msg m;
	uint8_t b[128];
	uint32_t n;

	CHECK(ipk_nd_parse(p, len, &m) > 0);
	CHECK_EQ(ipk_nd_check(ip, &m), IPK_ND_OK);
	if (m.type == IPK_ICMP6_ND_NS)
		CHECK(memcmp(m.target, f->ns_target, 16) == 0);
	if (m.type == IPK_ICMP6_ND_NA) {
		CHECK(memcmp(m.target, f->na_target, 16) == 0);
		CHECK_EQ(m.flags, f->na_flags >> 24);
		CHECK(m.opts.has_tlla && memcmp(m.opts.tlla, f->lla, 6) == 0);
	} else if (!ipk_ip6_is_unspecified(ip->src)) {
		CHECK(m.opts.has_slla && memcmp(m.opts.slla, f->lla, 6) == 0);
	} else {
		CHECK(!m.opts.has_slla); /* DAD: §7.1.1 */
	}
	n = ipk_nd_emit(b, sizeof(b), &m);
	if (m.opts.has_slla)
		n += ipk_nd_opt_lla_emit(b + n, 8, IPK_NDOPT_SLLA, m.opts.slla);
	if (m.opts.has_tlla)
		n += ipk_nd_opt_lla_emit(b + n, 8, IPK_NDOPT_TLLA, m.opts.tlla);
	/* Linux's DAD NS carries a nonce (RFC 7527, type 14): an option unknown to the
	 * parser, skipped; copied as it is */
	if (ipk_ip6_is_unspecified(ip->src) && n + 8 == len && p[n] == 14 && p[n + 1] == 1) {
		memcpy(b + n, p + n, 8);
		n += 8;
	}
	ipk_icmp6_csum_fill(b, n, ip->src, ip->dst);
	CHECK_EQ(n, len);
	CHECK(memcmp(b, p, len) == 0);
}

/* The MLDv2 report Linux sends from :: for its solicited-node groups is what
 * ipk_mld2_report_emit writes for the same groups. */
static void check_lf6_mld(const struct linux_frame6 *f, const struct ipk_ip6_hdr *ip,
                          const uint8_t *p, uint32_t len)
{
	uint8_t groups[4][16], b[128];
	struct ipk_mld2_rec r;
	uint32_t n = ipk_rd16(p + 6), i, off = 8;
	int rl;

	CHECK_EQ(n, f->mld_nrec);
	CHECK(n <= 4);
	for (i = 0; i < n && i < 4; i++) {
		rl = ipk_mld2_rec_parse(p + off, len - off, &r);
		CHECK_EQ(rl, 20);
		if (rl != 20)
			return;
		if (i == 0)
			CHECK(r.type == f->mld_rtype && memcmp(r.group, f->mld_group, 16) == 0);
		CHECK(ipk_ip6_is_solicited_node(r.group));
		memcpy(groups[i], r.group, 16);
		off += 20;
	}
	CHECK(memcmp(ip->dst, ipk_ip6_all_mldv2_routers, 16) == 0);
	CHECK_EQ(ipk_mld2_report_emit(b, sizeof(b), r.type, (const uint8_t(*)[16])groups, n,
	                              ip->src), len);
	CHECK(memcmp(b, p, len) == 0);
}

static void check_lf6_icmp(const struct linux_frame6 *f, const struct ipk_ip6_hdr *ip,
                           const uint8_t *p, uint32_t len)
{
	struct ipk_icmp6_hdr h;
	struct ipk_icmp6_quote q;
	const struct linux_frame6 *u;
	uint8_t b[256];

	CHECK_EQ(ipk_icmp6_parse(p, len, &h), IPK_ICMP6_HLEN);
	CHECK(h.type == f->icmp_type && h.code == f->icmp_code && h.csum == f->icmp_csum);
	CHECK_EQ(ipk_csum_l4_6(ip->src, ip->dst, IPK_IPPROTO_ICMP6, p, len), 0);
	if (h.type == IPK_ICMP6_ECHO_REQUEST || h.type == IPK_ICMP6_ECHO_REPLY) {
		CHECK(h.id == f->echo_id && h.seq == f->echo_seq);
		CHECK_EQ(ipk_icmp6_emit(b, sizeof(b), &h), 8);
		CHECK(memcmp(b, p, 8) == 0);
	} else if (h.type == IPK_ICMP6_ND_NS || h.type == IPK_ICMP6_ND_NA ||
	           h.type == IPK_ICMP6_ND_RS) {
		check_lf6_nd(f, ip, p, len);
	} else if (h.type == IPK_ICMP6_MLD2_REPORT) {
		check_lf6_mld(f, ip, p, len);
	} else if (h.type == IPK_ICMP6_DST_UNREACH) {
		/* the quote names the UDP datagram it answers */
		u = lf6_find("udp");
		CHECK_EQ(ipk_icmp6_quote_parse(p + 8, len - 8, &q), IPK_IP6_HLEN);
		CHECK(q.proto == IPK_IPPROTO_UDP && q.has_ports);
		CHECK(u && memcmp(q.src, u->src, 16) == 0 && memcmp(q.dst, u->dst, 16) == 0);
		CHECK(u && ipk_rd16((const uint8_t *)&q.sport_be) == u->udp_sport);
		CHECK_EQ(ipk_rd16((const uint8_t *)&q.dport_be), f->udp_dport);
		CHECK(u && len - 8 == u->len - IPK_ETH_HLEN); /* Linux quoted it whole */
		CHECK_EQ(ipk_icmp6_error_emit(b, sizeof(b), &h, p + 8, len - 8, ip->src, ip->dst), len);
		CHECK(memcmp(b, p, len) == 0);
	} else {
		CHECK(!"unexpected ICMPv6 type in linux_frames6.h");
	}
}

static void check_lf6_tcp(const struct linux_frame6 *f, const struct ipk_ip6_hdr *ip,
                          const uint8_t *p, uint32_t len)
{
	struct ipk_tcp_hdr h;
	struct ipk_tcp_opts o;
	uint8_t b[128];

	CHECK_EQ(ipk_tcp_parse(p, len, &h), (int)f->tcp_hlen);
	if (h.doff != f->tcp_hlen || len > sizeof(b))
		return;
	CHECK(ipk_rd16((const uint8_t *)&h.sport_be) == f->tcp_sport);
	CHECK(ipk_rd16((const uint8_t *)&h.dport_be) == f->tcp_dport);
	CHECK(h.seq == f->tcp_seq && h.ack == f->tcp_ack && h.flags == f->tcp_flags);
	CHECK_EQ(h.wnd, f->tcp_wnd);
	CHECK_EQ(ipk_tcp_opts_parse(p + 20, h.doff - 20u, &o), 0);
	CHECK(o.has_mss && o.mss == f->mss && o.mss == 1440); /* 1500 - 40 - 20 */
	CHECK(o.has_ws && o.ws == f->ws && o.has_sack_perm);
	CHECK(o.has_ts && o.tsval == f->tsval && o.tsecr == f->tsecr);
	CHECK_EQ(ipk_csum_l4_6(ip->src, ip->dst, IPK_IPPROTO_TCP, p, len), 0);
	/* re-emitted with a fresh checksum: Linux's bytes */
	h.csum = 0;
	ipk_tcp_emit(b, sizeof(b), &h);
	CHECK_EQ(ipk_tcp_opts_emit(b + 20, sizeof(b) - 20, &o), h.doff - 20u);
	memcpy(b + h.doff, p + h.doff, len - h.doff);
	ipk_wr16(b + 16, ipk_csum_l4_6(ip->src, ip->dst, IPK_IPPROTO_TCP, b, len));
	CHECK(memcmp(b, p, len) == 0);
}

static void check_lf6_udp(const struct linux_frame6 *f, const struct ipk_ip6_hdr *ip,
                          const uint8_t *p, uint32_t len)
{
	struct ipk_udp_hdr h;
	uint8_t b[128];

	CHECK_EQ(ipk_udp_parse(p, len, &h), IPK_UDP_HLEN);
	CHECK(ipk_rd16((const uint8_t *)&h.sport_be) == f->udp_sport);
	CHECK(ipk_rd16((const uint8_t *)&h.dport_be) == f->udp_dport);
	CHECK(h.len == f->udp_len && h.len == len);
	CHECK(ipk_udp6_csum_ok(ip->src, ip->dst, p, len));
	CHECK(len <= sizeof(b));
	if (len > sizeof(b))
		return;
	memcpy(b, p, len);
	ipk_wr16(b + 6, 0);
	CHECK_EQ(ipk_udp6_csum(ip->src, ip->dst, b, len), h.csum);
}

/* A fragment: the walk's fields against tshark's (offset in 8-byte units there). */
static void check_lf6_frag(const struct linux_frame6 *f, const struct ipk_ip6_ext *x,
                           const uint8_t *l3)
{
	struct ipk_icmp6_hdr h;

	CHECK(x->has_frag);
	CHECK_EQ(x->proto, f->frag_nxt);
	CHECK_EQ(x->frag_off, f->frag_off * 8);
	CHECK_EQ(x->frag_more, f->frag_more);
	CHECK_EQ(x->frag_id, f->frag_id);
	CHECK_EQ(x->frag_hoff, 40);
	CHECK_EQ(x->off, 48);
	if (x->frag_off == 0) { /* the first carries the echo header */
		CHECK_EQ(ipk_icmp6_parse(l3 + x->off, 8, &h), 8);
		CHECK(h.type == f->icmp_type && h.id == f->echo_id && h.seq == f->echo_seq);
	} else {
		CHECK_EQ(f->frag_off * 8 % 1448, 0); /* 1500 - 40 - 8, rounded to 8 */
	}
}

static void check_lf6_ip6(const struct linux_frame6 *f, const uint8_t *l3, uint32_t len)
{
	struct ipk_ip6_hdr h;
	struct ipk_ip6_ext x;
	uint8_t b[IPK_IP6_HLEN];
	uint32_t n;

	CHECK_EQ(ipk_ip6_parse(l3, len, &h), IPK_IP6_HLEN);
	CHECK(memcmp(h.src, f->src, 16) == 0 && memcmp(h.dst, f->dst, 16) == 0);
	CHECK(h.plen == f->plen && h.next == f->nxt && h.hlim == f->hlim);
	CHECK(h.flow == f->flow && h.tclass == f->tclass);
	CHECK_EQ(ipk_ip6_emit(b, sizeof(b), &h), IPK_IP6_HLEN);
	CHECK(memcmp(b, l3, IPK_IP6_HLEN) == 0);
	n = IPK_IP6_HLEN + h.plen;
	CHECK_EQ(ipk_ip6_ext_walk(l3, n, h.next, ipk_ip6_is_multicast(h.dst), &x), IPK_IP6X_OK);
	if (f->frag_nxt) {
		check_lf6_frag(f, &x, l3);
		return;
	}
	CHECK(!x.has_frag && !x.frag_atomic && !x.has_rh);
	if (f->hbh_nxt) { /* MLD: hop-by-hop with router alert 0 */
		CHECK(x.nhdrs == 1 && x.proto == f->hbh_nxt && x.ra == 1 && x.off == 48);
		CHECK_EQ(ipk_ip6_hbh_ra_emit(b, 8, x.proto), 8);
		CHECK(memcmp(b, l3 + 40, 8) == 0);
	}
	if (x.proto == IPK_IPPROTO_ICMP6)
		check_lf6_icmp(f, &h, l3 + x.off, n - x.off);
	else if (x.proto == IPK_IPPROTO_TCP)
		check_lf6_tcp(f, &h, l3 + x.off, n - x.off);
	else if (x.proto == IPK_IPPROTO_UDP)
		check_lf6_udp(f, &h, l3 + x.off, n - x.off);
	else
		CHECK(!"unexpected protocol in linux_frames6.h");
}

static void test_linux6_frames_parse_verify_and_reemit(void)
{
	struct ipk_eth_hdr e;
	uint8_t mac[6];
	size_t i;

	for (i = 0; i < NELEM(linux_frames6); i++) {
		const struct linux_frame6 *f = &linux_frames6[i];
		int before = check_failed_now_;
		check_failed_now_ = 0;
		CHECK_EQ(ipk_eth_parse(f->bytes, f->len, &e), IPK_ETH_HLEN);
		CHECK_EQ(e.type, IPK_ETHERTYPE_IP6);
		if (ipk_ip6_is_multicast(f->dst)) { /* RFC 2464 §7 */
			ipk_ip6_mcast_mac(mac, f->dst);
			CHECK(memcmp(mac, e.dst, 6) == 0);
		}
		check_lf6_ip6(f, f->bytes + IPK_ETH_HLEN, f->len - IPK_ETH_HLEN);
		if (check_failed_now_)
			fprintf(stderr, "  (in linux frame %s)\n", f->name);
		check_failed_now_ |= before;
	}
}

static void test_linux6_frames_cover_every_kind(void)
{
	static const char *const names[] = {"dad_ns", "mld2_report", "rs", "ns", "na",
	                                    "echo_request", "echo_reply", "frag_first",
	                                    "frag_last", "tcp_syn", "tcp_synack", "udp",
	                                    "port_unreach"};
	const struct linux_frame6 *f;
	size_t i;

	for (i = 0; i < NELEM(names); i++)
		CHECK(lf6_find(names[i]) != NULL);
	f = lf6_find("dad_ns"); /* DAD: from ::, to the target's solicited-node group */
	CHECK(f && ipk_ip6_is_unspecified(f->src) && ipk_ip6_is_solicited_node(f->dst));
	f = lf6_find("frag_first");
	CHECK(f && f->frag_more && f->len == 14 + 40 + 8 + 1448);
}

/* Every cut of every datagram: the header parse refuses it, and the walk plus the
 * upper-layer parsers never accept a cut that hides a header they need. */
static void test_linux6_frames_every_truncation_rejected(void)
{
	struct ipk_ip6_hdr h;
	struct ipk_ip6_ext x;
	size_t i;
	uint32_t n, full;
	int bad = 0;

	for (i = 0; i < NELEM(linux_frames6); i++) {
		const struct linux_frame6 *f = &linux_frames6[i];
		const uint8_t *l3 = f->bytes + IPK_ETH_HLEN;
		full = IPK_IP6_HLEN + f->plen;
		for (n = 0; n < full; n++)
			bad += ipk_ip6_parse(l3, n, &h) >= 0;
		/* the walk over a datagram cut inside its extension headers */
		for (n = IPK_IP6_HLEN; n < full; n++)
			if (ipk_ip6_ext_walk(l3, n, f->nxt, 0, &x) == IPK_IP6X_OK)
				bad += x.off > n;
	}
	CHECK_EQ(bad, 0);
}

/* Malformed variants of Linux's own frames: each must be refused. */
static void test_linux6_frames_malformed_variants_rejected(void)
{
	const struct linux_frame6 *f;
	struct ipk_ip6_hdr ip;
	struct ipk_nd_msg m;
	struct ipk_ip6_ext x;
	uint8_t b[256];
	uint32_t n;

	/* NS with its SLLA option length set to 0 (§4.6) */
	f = lf6_find("ns");
	CHECK(f != NULL);
	if (!f)
		return;
	memcpy(b, f->bytes, f->len);
	n = f->len - IPK_ETH_HLEN;
	CHECK_EQ(ipk_nd_parse(b + 54, n - 40, &m), 24);
	b[54 + 24 + 1] = 0;
	CHECK_EQ(ipk_nd_parse(b + 54, n - 40, &m), IPK_WIRE_EOPT);
	/* the same NS with hop limit 254: parsed, refused by the check */
	memcpy(b, f->bytes, f->len);
	b[14 + 7] = 254;
	CHECK_EQ(ipk_ip6_parse(b + 14, n, &ip), 40);
	CHECK_EQ(ipk_nd_parse(b + 54, n - 40, &m), 24);
	CHECK_EQ(ipk_nd_check(&ip, &m), IPK_ND_BAD_HLIM);
	/* payload length one past the frame */
	ipk_wr16(b + 14 + 4, (uint16_t)(n - 40 + 1));
	CHECK_EQ(ipk_ip6_parse(b + 14, n, &ip), IPK_WIRE_ESHORT);
	/* the MLD report's hop-by-hop header claiming 16 bytes where 8 are left of it
	 * and the ICMPv6 message is parsed as options */
	f = lf6_find("mld2_report");
	CHECK(f != NULL);
	if (!f)
		return;
	memcpy(b, f->bytes, f->len);
	b[14 + 41] = 7; /* 64 bytes: past the 56-byte payload */
	CHECK_EQ(ipk_ip6_ext_walk(b + 14, f->len - 14, 0, 1, &x), IPK_IP6X_TRUNC);
	/* the echo request sent with a routing header type 0 in front of it */
	f = lf6_find("echo_request");
	CHECK(f != NULL);
	if (!f)
		return;
	memcpy(b, f->bytes + 14, 40);
	memcpy(b + 40, "\x3a\x02\x00\x01", 4);
	memset(b + 44, 0, 20);
	memcpy(b + 64, f->bytes + 54, f->len - 54);
	ipk_wr16(b + 4, (uint16_t)(f->plen + 24));
	b[6] = IPK_IPPROTO_ROUTING;
	CHECK_EQ(ipk_ip6_ext_walk(b, 40 + f->plen + 24, b[6], 0, &x), IPK_IP6X_RH0);
	CHECK(x.icmp && x.icmp_ptr == 42);
}


int main(void)
{
	RUN(test_ip6_parse_known_bytes);
	RUN(test_ip6_emit_known_bytes_and_round_trip);
	RUN(test_ip6_short_and_bad_version_rejected);
	RUN(test_ip6_payload_length_past_buffer_rejected);
	RUN(test_ip6_address_helpers);

	RUN(test_ext_no_headers_gives_upper_layer);
	RUN(test_ext_hbh_dst_rh_then_tcp);
	RUN(test_ext_no_next_header);
	RUN(test_ext_hbh_not_first_is_param_problem_code1);
	RUN(test_ext_chain_over_count_bound_dropped);
	RUN(test_ext_chain_over_length_bound_dropped);
	RUN(test_ext_every_truncation_dropped);
	RUN(test_ext_rh0_dropped);
	RUN(test_ext_unknown_routing_type_by_segments_left);
	RUN(test_ext_fragment_fields_and_atomic);
	RUN(test_ext_fragment_bad_length_and_size);
	RUN(test_ext_unknown_option_action_bits);
	RUN(test_ext_option_past_header_and_long_padding_dropped);

	RUN(test_csum6_pseudo_header_equals_reference);
	RUN(test_udp6_zero_checksum_invalid);
	RUN(test_udp6_computed_zero_sent_as_ffff);

	RUN(test_icmp6_echo_parse_emit_and_checksum);
	RUN(test_icmp6_errors_carry_param_and_quote);
	RUN(test_icmp6_error_quote_cut_to_minimum_mtu);
	RUN(test_icmp6_quote_every_cut);
	RUN(test_icmp6_quote_fragment_and_echo);

	RUN(test_nd_ra_round_trip_with_options);
	RUN(test_nd_ns_na_redirect_rs_round_trip);
	RUN(test_nd_redirected_header_option);
	RUN(test_nd_option_length_zero_rejected);
	RUN(test_nd_option_lengths_checked);
	RUN(test_nd_many_prefixes_kept_and_counted);
	RUN(test_nd_check_hop_limit_255_and_code_0);
	RUN(test_nd_check_refuses_group_lla);
	RUN(test_nd_check_per_type_rules);
	RUN(test_mld2_report_emit_and_records);
	RUN(test_mld1_report_emit);

	RUN(test_linux6_frames_cover_every_kind);
	RUN(test_linux6_frames_parse_verify_and_reemit);
	RUN(test_linux6_frames_every_truncation_rejected);
	RUN(test_linux6_frames_malformed_variants_rejected);
	return check_summary();
}
