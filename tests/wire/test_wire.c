/*
 * Byte-vector tests of the wire layer: every header parsed from known bytes, emitted
 * from known fields, round-tripped, and fed every malformed shape its parser must
 * reject; the RFC 1071 checksum over contiguous and scattered buffers; and frames
 * Linux sent, checked against tshark's decoding (linux_frames.h).
 */
#include <string.h>

#include "check.h"
#include "linux_frames.h"
#include "wire/wire.h"

/* Network-order value of a host number, built byte-wise so the test is right on any
 * endianness (the same way the wire layer reads _be fields). */
static uint16_t be16(uint16_t v)
{
	uint8_t b[2];
	ipk_wr16(b, v);
	return ipk_rdbe16(b);
}

static uint32_t be32(uint32_t v)
{
	uint8_t b[4];
	ipk_wr32(b, v);
	return ipk_rdbe32(b);
}

static uint32_t host32(uint32_t v_be)
{
	uint8_t b[4];
	ipk_wrbe32(b, v_be);
	return ipk_rd32(b);
}

static uint16_t host16(uint16_t v_be)
{
	uint8_t b[2];
	ipk_wrbe16(b, v_be);
	return ipk_rd16(b);
}

/* Reference one's-complement sum, written independently of csum.c: the naive
 * definition over 16-bit big-endian words with a zero pad byte. */
static uint16_t ref_csum(const uint8_t *p, uint32_t len)
{
	uint64_t s = 0;
	uint32_t i;

	for (i = 0; i < len; i++)
		s += (i & 1) ? p[i] : (uint64_t)p[i] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static uint16_t csum_of(const uint8_t *p, uint32_t len)
{
	int odd = 0;
	return ipk_csum_fold(ipk_csum_add(0, p, len, &odd));
}

static void fill_pattern(uint8_t *p, uint32_t len, uint32_t seed)
{
	uint32_t i, x = seed;

	for (i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (uint8_t)(x >> 16);
	}
}

/* ============================================================== checksum */

/* The unrolled 20-byte sum equals the reference for patterns, all ones (carries in
 * every lane) and the RFC 1071 example, at every alignment. */
static void test_csum_hdr20_equals_reference(void)
{
	uint8_t buf[64];
	uint32_t seed, a;

	for (seed = 0; seed < 200; seed++) {
		fill_pattern(buf, sizeof(buf), seed);
		if (seed == 0)
			memset(buf, 0xff, sizeof(buf));
		for (a = 0; a < 8; a++)
			CHECK_EQ(ipk_csum_fold(ipk_csum_hdr20(buf + a)), ref_csum(buf + a, 20));
	}
}

static void test_csum_rfc1071_example(void)
{
	/* RFC 1071 §3: these bytes sum to 0x2ddf0, folded 0xddf2. */
	static const uint8_t b[8] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
	int odd = 0;
	uint32_t s = ipk_csum_add(0, b, 8, &odd);

	CHECK_EQ(odd, 0);
	CHECK_EQ((uint16_t)~ipk_csum_fold(s), 0xddf2);
	CHECK_EQ(ipk_csum_fold(s), 0x220d);
}

static void test_csum_rfc1071_byte_order_independent_sum(void)
{
	/* RFC 1071 §2(B): summing the byte-swapped words gives the byte-swapped sum. */
	static const uint8_t b[8] = {0x01, 0x00, 0x03, 0xf2, 0xf5, 0xf4, 0xf7, 0xf6};
	CHECK_EQ((uint16_t)~csum_of(b, 8), 0xf2dd);
}

static void test_csum_odd_length_pads_with_zero(void)
{
	static const uint8_t b[3] = {0x01, 0x02, 0x03};
	int odd = 0;
	uint32_t s = ipk_csum_add(0, b, 3, &odd);

	CHECK_EQ(odd, 1);
	CHECK_EQ(ipk_csum_fold(s), (uint16_t)~0x0402);
}

static void test_csum_empty_and_zero(void)
{
	static const uint8_t z[4] = {0, 0, 0, 0};
	int odd = 0;

	CHECK_EQ(ipk_csum_add(0, z, 0, &odd), 0);
	CHECK_EQ(odd, 0);
	CHECK_EQ(csum_of(z, 4), 0xffff);
}

static void test_csum_scattered_pieces_equal_contiguous(void)
{
	uint8_t b[61];
	uint32_t i, j, len;
	int bad = 0;

	fill_pattern(b, sizeof(b), 7);
	/* Every split of every prefix into three pieces, empty pieces included. */
	for (len = 0; len <= sizeof(b); len++) {
		uint16_t want = ref_csum(b, len);
		for (i = 0; i <= len; i++) {
			for (j = i; j <= len; j++) {
				int odd = 0;
				uint32_t s = ipk_csum_add(0, b, i, &odd);
				s = ipk_csum_add(s, b + i, j - i, &odd);
				s = ipk_csum_add(s, b + j, len - j, &odd);
				if (ipk_csum_fold(s) != want || odd != (int)(len & 1))
					bad++;
			}
		}
	}
	CHECK_EQ(bad, 0);
}

/* The wide-word path: long buffers at every start alignment, all-ones bytes (the
 * most carries) and random bytes, against the byte-wise reference. */
static void test_csum_long_buffers_every_alignment(void)
{
	static uint8_t b[2100];
	uint32_t start, len;
	int bad = 0, fill;

	for (fill = 0; fill < 2; fill++) {
		if (fill == 0)
			memset(b, 0xff, sizeof(b));
		else
			fill_pattern(b, sizeof(b), 11);
		for (start = 0; start < 16; start++)
			for (len = 1500; len < 1500 + 24; len++)
				if (csum_of(b + start, len) != ref_csum(b + start, len))
					bad++;
		if (csum_of(b, 2048) != ref_csum(b, 2048))
			bad++;
	}
	CHECK_EQ(bad, 0);
}

static void test_csum_single_byte_pieces(void)
{
	uint8_t b[33];
	uint32_t i, s = 0;
	int odd = 0;

	fill_pattern(b, sizeof(b), 3);
	for (i = 0; i < sizeof(b); i++)
		s = ipk_csum_add(s, b + i, 1, &odd);
	CHECK_EQ(ipk_csum_fold(s), ref_csum(b, sizeof(b)));
}

static void test_csum_large_buffer_no_overflow(void)
{
	static uint8_t big[200001];
	uint32_t s = 0xffffffffu;
	int odd = 0;

	memset(big, 0xff, sizeof(big));
	CHECK_EQ(csum_of(big, sizeof(big)), ref_csum(big, sizeof(big)));
	fill_pattern(big, sizeof(big), 11);
	CHECK_EQ(csum_of(big, sizeof(big)), ref_csum(big, sizeof(big)));
	/* A running sum that is already at the top of its range still adds correctly:
	 * 0xffffffff is one's-complement equal to 0xffff + 0xffff = 0x1fffe ~ 0xffff. */
	s = ipk_csum_add(s, big, 2, &odd);
	CHECK_EQ(ipk_csum_fold(s), ref_csum(big, 2));
}

static void test_csum_pseudo_header(void)
{
	uint32_t src = be32(0x0a000001), dst = be32(0x0a000002);

	/* 0x0a00 + 0x0001 + 0x0a00 + 0x0002 + 17 + 12 */
	CHECK_EQ(ipk_csum_pseudo_fold(src, dst, IPK_IPPROTO_UDP, 12), 0x1420);
	CHECK_EQ(ipk_csum_fold(ipk_csum_pseudo(src, dst, IPK_IPPROTO_UDP, 12)),
	         (uint16_t)~0x1420);
	/* 5 * 0xffff + 6 folds to 6 with end-around carries. */
	CHECK_EQ(ipk_csum_pseudo_fold(0xffffffffu, 0xffffffffu, IPK_IPPROTO_TCP, 0xffff), 6);
}

/* ipk_csum_l4 (pseudo-header and segment in one pass, one fold) against the
 * byte-wise reference over the 12-byte pseudo-header followed by the segment: every
 * length 0..300 (odd ones too), every start alignment, all-ones bytes, addresses with
 * carries in every lane; and a segment carrying its checksum verifies to 0. */
static void test_csum_l4_equals_reference(void)
{
	static uint8_t w[12 + 1600], seg[8 + 1600];
	uint32_t addr[3][2] = {{0x0a000001u, 0x0a000002u}, {0xffffffffu, 0xffffffffu},
	                       {0xc0a80164u, 0x08080808u}};
	uint32_t len, start, a;
	int bad = 0, fill;
	uint16_t c;

	for (fill = 0; fill < 2; fill++) {
		for (a = 0; a < 3; a++) {
			for (len = 0; len <= 300 + 1300 * (uint32_t)fill; len += 1 + 13 * (uint32_t)fill) {
				for (start = 0; start < 8; start++) {
					if (fill == 0)
						memset(seg + start, 0xff, len);
					else
						fill_pattern(seg + start, len, len + start);
					ipk_wr32(w, addr[a][0]);
					ipk_wr32(w + 4, addr[a][1]);
					w[8] = 0;
					w[9] = IPK_IPPROTO_TCP;
					ipk_wr16(w + 10, (uint16_t)len);
					memcpy(w + 12, seg + start, len);
					c = ipk_csum_l4(be32(addr[a][0]), be32(addr[a][1]),
					                IPK_IPPROTO_TCP, seg + start, len);
					if (c != ref_csum(w, 12 + len))
						bad++;
				}
			}
		}
	}
	CHECK_EQ(bad, 0);
	/* A TCP header with the checksum filled in verifies to 0. */
	fill_pattern(seg, 41, 5);
	seg[16] = seg[17] = 0;
	c = ipk_csum_l4(be32(0x0a000001u), be32(0x0a000002u), IPK_IPPROTO_TCP, seg, 41);
	ipk_wr16(seg + 16, c);
	CHECK_EQ(ipk_csum_l4(be32(0x0a000001u), be32(0x0a000002u), IPK_IPPROTO_TCP, seg, 41), 0);
}

static void test_csum_udp_datagram_verifies(void)
{
	/* 10.0.0.1:1234 -> 10.0.0.2:53, payload "abc" (odd, so the pad byte matters). */
	uint8_t d[11] = {0x04, 0xd2, 0x00, 0x35, 0x00, 0x0b, 0x00, 0x00, 'a', 'b', 'c'};
	uint32_t src = be32(0x0a000001), dst = be32(0x0a000002), s;
	uint8_t ph[12] = {10, 0, 0, 1, 10, 0, 0, 2, 0, 17, 0, 11};
	int odd = 0;
	uint16_t c;

	s = ipk_csum_add(ipk_csum_pseudo(src, dst, IPK_IPPROTO_UDP, 11), d, 11, &odd);
	c = ipk_csum_fold(s);
	{
		uint8_t whole[23];
		memcpy(whole, ph, 12);
		memcpy(whole + 12, d, 11);
		CHECK_EQ(c, ref_csum(whole, 23));
	}
	ipk_wr16(d + 6, c);
	odd = 0;
	s = ipk_csum_add(ipk_csum_pseudo(src, dst, IPK_IPPROTO_UDP, 11), d, 11, &odd);
	CHECK_EQ(ipk_csum_fold(s), 0);
	/* Offload seed: pseudo fold in the field, then the sum over the datagram with
	 * that seed completes to the same checksum a NIC would write. */
	ipk_wr16(d + 6, ipk_csum_pseudo_fold(src, dst, IPK_IPPROTO_UDP, 11));
	odd = 0;
	CHECK_EQ(ipk_csum_fold(ipk_csum_add(0, d, 11, &odd)), c);
}

/* ============================================================== Ethernet */

static const uint8_t eth_bytes[14] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x11,
                                      0x22, 0x33, 0x44, 0x55, 0x08, 0x06};

static void test_eth_parse_known_bytes(void)
{
	struct ipk_eth_hdr h;

	CHECK_EQ(ipk_eth_parse(eth_bytes, 14, &h), 14);
	CHECK(memcmp(h.dst, eth_bytes, 6) == 0);
	CHECK(h.src[0] == 0x02 && h.src[5] == 0x55);
	CHECK_EQ(h.type, IPK_ETHERTYPE_ARP);
	CHECK_EQ(ipk_eth_parse(eth_bytes, 60, &h), 14);
}

static void test_eth_emit_known_bytes_and_round_trip(void)
{
	struct ipk_eth_hdr h, g;
	uint8_t b[20];

	memset(&h, 0, sizeof(h));
	memset(h.dst, 0xff, 6);
	memcpy(h.src, eth_bytes + 6, 6);
	h.type = IPK_ETHERTYPE_ARP;
	CHECK_EQ(ipk_eth_emit(b, sizeof(b), &h), 14);
	CHECK(memcmp(b, eth_bytes, 14) == 0);
	memset(&g, 0, sizeof(g));
	CHECK_EQ(ipk_eth_parse(b, 14, &g), 14);
	CHECK(memcmp(&g, &h, sizeof(g)) == 0);
}

static void test_eth_short_buffers_rejected(void)
{
	struct ipk_eth_hdr h;
	uint8_t b[14];
	uint32_t n;

	for (n = 0; n < 14; n++) {
		CHECK_EQ(ipk_eth_parse(eth_bytes, n, &h), IPK_WIRE_ESHORT);
		CHECK_EQ(ipk_eth_emit(b, n, &h), 0);
	}
}

/* =================================================================== ARP */

/* Who has 192.168.1.2? Tell 192.168.1.1 (RFC 826 request, Ethernet/IPv4). */
static const uint8_t arp_bytes[28] = {
	0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0x11, 0x22, 0x33, 0x44, 0x55,
	0xc0, 0xa8, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0xa8, 0x01, 0x02};

static void test_arp_parse_known_bytes(void)
{
	struct ipk_arp_hdr h;

	CHECK_EQ(ipk_arp_parse(arp_bytes, 28, &h), 28);
	CHECK_EQ(h.op, IPK_ARP_REQUEST);
	CHECK(memcmp(h.sha, arp_bytes + 8, 6) == 0);
	CHECK_EQ(h.spa_be, be32(0xc0a80101));
	CHECK(memcmp(h.tha, arp_bytes + 18, 6) == 0);
	CHECK_EQ(h.tpa_be, be32(0xc0a80102));
}

static void test_arp_emit_known_bytes_and_round_trip(void)
{
	struct ipk_arp_hdr h, g;
	uint8_t b[28];

	memset(&h, 0, sizeof(h));
	h.op = IPK_ARP_REQUEST;
	memcpy(h.sha, arp_bytes + 8, 6);
	h.spa_be = be32(0xc0a80101);
	h.tpa_be = be32(0xc0a80102);
	CHECK_EQ(ipk_arp_emit(b, 28, &h), 28);
	CHECK(memcmp(b, arp_bytes, 28) == 0);
	memset(&g, 0, sizeof(g)); /* the struct has padding after tha */
	CHECK_EQ(ipk_arp_parse(b, 28, &g), 28);
	CHECK(memcmp(&g, &h, sizeof(g)) == 0);
}

static void test_arp_short_buffers_rejected(void)
{
	struct ipk_arp_hdr h;
	uint8_t b[28];
	uint32_t n;

	for (n = 0; n < 28; n++) {
		CHECK_EQ(ipk_arp_parse(arp_bytes, n, &h), IPK_WIRE_ESHORT);
		CHECK_EQ(ipk_arp_emit(b, n, &h), 0);
	}
}

static void test_arp_wrong_hardware_or_protocol_rejected(void)
{
	/* byte offset and a wrong value for htype, ptype, hlen, plen */
	static const uint8_t bad[][2] = {{1, 6}, {0, 1}, {2, 0x86}, {3, 0xdd}, {4, 8}, {5, 16}};
	struct ipk_arp_hdr h;
	uint8_t b[28];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(b, arp_bytes, 28);
		b[bad[i][0]] = bad[i][1];
		CHECK_EQ(ipk_arp_parse(b, 28, &h), IPK_WIRE_EVERSION);
	}
}

/* ================================================================== IPv4 */

/* A UDP datagram header, 192.168.0.1 -> 192.168.0.199, tot_len 115, DF, TTL 64,
 * checksum 0xb861 (a widely used worked example of the IPv4 header checksum). */
static const uint8_t ip4_bytes[20] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40,
                                      0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
                                      0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};

static void ip4_packet(uint8_t *b, uint32_t len)
{
	memset(b, 0xee, len);
	memcpy(b, ip4_bytes, 20);
}

static void test_ip4_parse_known_bytes(void)
{
	uint8_t b[115];
	struct ipk_ip4_hdr h;

	ip4_packet(b, sizeof(b));
	CHECK_EQ(ipk_ip4_parse(b, 115, &h), 20);
	CHECK_EQ(h.ihl, 20);
	CHECK_EQ(h.tos, 0);
	CHECK_EQ(h.tot_len, 115);
	CHECK_EQ(h.id, 0);
	CHECK_EQ(h.frag, IPK_IP4_DF);
	CHECK_EQ(h.ttl, 64);
	CHECK_EQ(h.proto, IPK_IPPROTO_UDP);
	CHECK_EQ(h.csum, 0xb861);
	CHECK_EQ(h.src_be, be32(0xc0a80001));
	CHECK_EQ(h.dst_be, be32(0xc0a800c7));
	CHECK(ipk_ip4_csum_ok(b, 20));
}

static void test_ip4_trailing_padding_accepted(void)
{
	uint8_t b[200];
	struct ipk_ip4_hdr h;

	ip4_packet(b, sizeof(b));
	CHECK_EQ(ipk_ip4_parse(b, sizeof(b), &h), 20);
	CHECK_EQ(h.tot_len, 115);
}

static void test_ip4_emit_known_bytes_and_round_trip(void)
{
	struct ipk_ip4_hdr h, g;
	uint8_t b[115];

	memset(&h, 0, sizeof(h));
	h.tot_len = 115;
	h.frag = IPK_IP4_DF;
	h.ttl = 64;
	h.proto = IPK_IPPROTO_UDP;
	h.src_be = be32(0xc0a80001);
	h.dst_be = be32(0xc0a800c7);
	memset(b, 0xee, sizeof(b));
	CHECK_EQ(ipk_ip4_emit(b, sizeof(b), &h, 1), 20);
	CHECK(memcmp(b, ip4_bytes, 20) == 0);
	memset(&g, 0, sizeof(g));
	CHECK_EQ(ipk_ip4_parse(b, sizeof(b), &g), 20);
	h.ihl = 20;
	h.csum = 0xb861;
	CHECK(memcmp(&g, &h, sizeof(g)) == 0);
}

static void test_ip4_emit_without_csum_leaves_zero(void)
{
	struct ipk_ip4_hdr h;
	uint8_t b[20];

	memset(&h, 0, sizeof(h));
	h.csum = 0x1234; /* ignored: the field is 0 for offload */
	h.ttl = 1;
	h.ihl = 40; /* ignored: emit writes no options */
	CHECK_EQ(ipk_ip4_emit(b, 20, &h, 0), 20);
	CHECK_EQ(b[0], 0x45);
	CHECK_EQ(ipk_rd16(b + 10), 0);
	CHECK_EQ(ipk_ip4_emit(b, 20, &h, 1), 20);
	CHECK(ipk_ip4_csum_ok(b, 20));
}

static void test_ip4_short_buffers_rejected(void)
{
	uint8_t b[115];
	struct ipk_ip4_hdr h;
	uint32_t n;

	ip4_packet(b, sizeof(b));
	for (n = 0; n < 20; n++) {
		CHECK_EQ(ipk_ip4_parse(b, n, &h), IPK_WIRE_ESHORT);
		CHECK_EQ(ipk_ip4_emit(b + 20, n, &h, 1), 0);
	}
}

static void test_ip4_bad_version_rejected(void)
{
	uint8_t b[115];
	struct ipk_ip4_hdr h;
	unsigned v;

	for (v = 0; v < 16; v++) {
		if (v == 4)
			continue;
		ip4_packet(b, sizeof(b));
		b[0] = (uint8_t)(v << 4 | 5);
		CHECK_EQ(ipk_ip4_parse(b, sizeof(b), &h), IPK_WIRE_EVERSION);
	}
}

static void test_ip4_ihl_below_20_rejected(void)
{
	uint8_t b[115];
	struct ipk_ip4_hdr h;
	unsigned w;

	for (w = 0; w < 5; w++) {
		ip4_packet(b, sizeof(b));
		b[0] = (uint8_t)(0x40 | w);
		CHECK_EQ(ipk_ip4_parse(b, sizeof(b), &h), IPK_WIRE_ELEN);
	}
}

static void test_ip4_ihl_past_buffer_rejected(void)
{
	uint8_t b[115];
	struct ipk_ip4_hdr h;

	ip4_packet(b, sizeof(b));
	b[0] = 0x4f; /* 60-byte header */
	ipk_wr16(b + 2, 60);
	CHECK_EQ(ipk_ip4_parse(b, 59, &h), IPK_WIRE_ESHORT);
	CHECK_EQ(ipk_ip4_parse(b, 60, &h), 60);
	CHECK_EQ(h.ihl, 60);
}

static void test_ip4_options_header_parses_and_checksums(void)
{
	uint8_t b[40];
	struct ipk_ip4_hdr h;
	int odd = 0;

	memset(b, 0, sizeof(b));
	memcpy(b, ip4_bytes, 20);
	b[0] = 0x46;
	ipk_wr16(b + 2, 40);
	b[20] = 1; /* NOP options */
	b[21] = 1;
	b[22] = 1;
	b[23] = 0;
	ipk_wr16(b + 10, 0);
	ipk_wr16(b + 10, ipk_csum_fold(ipk_csum_add(0, b, 24, &odd)));
	CHECK_EQ(ipk_ip4_parse(b, 40, &h), 24);
	CHECK(ipk_ip4_csum_ok(b, 24));
	CHECK(!ipk_ip4_csum_ok(b, 20));
}

static void test_ip4_tot_len_past_buffer_rejected(void)
{
	uint8_t b[115];
	struct ipk_ip4_hdr h;

	ip4_packet(b, sizeof(b));
	CHECK_EQ(ipk_ip4_parse(b, 114, &h), IPK_WIRE_ESHORT);
	ipk_wr16(b + 2, 0xffff);
	CHECK_EQ(ipk_ip4_parse(b, sizeof(b), &h), IPK_WIRE_ESHORT);
}

static void test_ip4_tot_len_below_ihl_rejected(void)
{
	uint8_t b[115];
	struct ipk_ip4_hdr h;
	uint16_t t;

	ip4_packet(b, sizeof(b));
	for (t = 0; t < 20; t++) {
		ipk_wr16(b + 2, t);
		CHECK_EQ(ipk_ip4_parse(b, sizeof(b), &h), IPK_WIRE_ELEN);
	}
	b[0] = 0x46;
	ipk_wr16(b + 2, 23);
	CHECK_EQ(ipk_ip4_parse(b, sizeof(b), &h), IPK_WIRE_ELEN);
	ipk_wr16(b + 2, 24);
	CHECK_EQ(ipk_ip4_parse(b, sizeof(b), &h), 24);
}

static void test_ip4_csum_detects_every_single_bit_flip(void)
{
	uint8_t b[20];
	unsigned i, bit;
	int missed = 0;

	for (i = 0; i < 20; i++) {
		for (bit = 0; bit < 8; bit++) {
			memcpy(b, ip4_bytes, 20);
			b[i] ^= (uint8_t)(1u << bit);
			missed += ipk_ip4_csum_ok(b, 20);
		}
	}
	CHECK_EQ(missed, 0);
	CHECK(!ipk_ip4_csum_ok(ip4_bytes, 19));
}

/* ================================================================== ICMP */

/* Echo request id 0x1234 seq 1, payload "abcd"; checksum precomputed by hand:
 * 0x0800 + 0x1234 + 0x0001 + 0x6162 + 0x6364 = 0xdefb -> ~ = 0x2104. */
static const uint8_t icmp_echo[12] = {0x08, 0x00, 0x21, 0x04, 0x12, 0x34,
                                      0x00, 0x01, 'a', 'b', 'c', 'd'};

static void test_icmp_parse_echo_known_bytes(void)
{
	struct ipk_icmp_hdr h;

	CHECK_EQ(ipk_icmp_parse(icmp_echo, sizeof(icmp_echo), &h), 8);
	CHECK_EQ(h.type, IPK_ICMP_ECHO);
	CHECK_EQ(h.code, 0);
	CHECK_EQ(h.csum, 0x2104);
	CHECK_EQ(h.id, 0x1234);
	CHECK_EQ(h.seq, 1);
	CHECK_EQ(h.rest, 0x12340001u);
	CHECK_EQ(csum_of(icmp_echo, sizeof(icmp_echo)), 0);
}

static void test_icmp_parse_needfrag_mtu(void)
{
	static const uint8_t b[8] = {0x03, 0x04, 0x00, 0x00, 0x00, 0x00, 0x05, 0xdc};
	struct ipk_icmp_hdr h;

	CHECK_EQ(ipk_icmp_parse(b, 8, &h), 8);
	CHECK_EQ(h.type, IPK_ICMP_UNREACH);
	CHECK_EQ(h.code, IPK_ICMP_UNREACH_NEEDFRAG);
	CHECK_EQ(h.mtu, 1500);
}

static void test_icmp_emit_echo_then_checksum_verifies(void)
{
	struct ipk_icmp_hdr h, g;
	uint8_t b[12];

	memset(&h, 0, sizeof(h));
	h.type = IPK_ICMP_ECHO;
	h.id = 0x1234;
	h.seq = 1;
	CHECK_EQ(ipk_icmp_emit(b, sizeof(b), &h), 8);
	memcpy(b + 8, "abcd", 4);
	ipk_wr16(b + 2, csum_of(b, sizeof(b)));
	CHECK(memcmp(b, icmp_echo, sizeof(b)) == 0);
	CHECK_EQ(ipk_icmp_parse(b, sizeof(b), &g), 8);
	CHECK_EQ(g.id, h.id);
	CHECK_EQ(g.seq, h.seq);
	CHECK_EQ(g.type, h.type);
}

static void test_icmp_emit_needfrag_and_other_types(void)
{
	struct ipk_icmp_hdr h;
	uint8_t b[8];
	static const uint8_t nf[8] = {0x03, 0x04, 0xab, 0xcd, 0x00, 0x00, 0x05, 0xdc};
	static const uint8_t tx[8] = {0x0b, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
	static const uint8_t pu[8] = {0x03, 0x03, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef};

	memset(&h, 0, sizeof(h));
	h.type = IPK_ICMP_UNREACH;
	h.code = IPK_ICMP_UNREACH_NEEDFRAG;
	h.csum = 0xabcd;
	h.mtu = 1500;
	h.rest = 0xffffffffu; /* ignored: RFC 1191 wants the unused half zero */
	CHECK_EQ(ipk_icmp_emit(b, 8, &h), 8);
	CHECK(memcmp(b, nf, 8) == 0);
	memset(&h, 0, sizeof(h));
	h.type = IPK_ICMP_TIME_EXCEEDED;
	h.id = 7; /* ignored: not an echo */
	CHECK_EQ(ipk_icmp_emit(b, 8, &h), 8);
	CHECK(memcmp(b, tx, 8) == 0);
	h.type = IPK_ICMP_UNREACH;
	h.code = IPK_ICMP_UNREACH_PORT;
	h.rest = 0xdeadbeefu;
	CHECK_EQ(ipk_icmp_emit(b, 8, &h), 8);
	CHECK(memcmp(b, pu, 8) == 0);
}

static void test_icmp_short_buffers_rejected(void)
{
	struct ipk_icmp_hdr h;
	uint8_t b[8];
	uint32_t n;

	memset(&h, 0, sizeof(h));
	for (n = 0; n < 8; n++) {
		CHECK_EQ(ipk_icmp_parse(icmp_echo, n, &h), IPK_WIRE_ESHORT);
		CHECK_EQ(ipk_icmp_emit(b, n, &h), 0);
	}
}

/* =================================================================== UDP */

/* 1234 -> 53, length 11 ("abc"), checksum 0xbeef. */
static const uint8_t udp_bytes[11] = {0x04, 0xd2, 0x00, 0x35, 0x00, 0x0b,
                                      0xbe, 0xef, 'a', 'b', 'c'};

static void test_udp_parse_known_bytes(void)
{
	struct ipk_udp_hdr h;

	CHECK_EQ(ipk_udp_parse(udp_bytes, 11, &h), 8);
	CHECK_EQ(h.sport_be, be16(1234));
	CHECK_EQ(h.dport_be, be16(53));
	CHECK_EQ(host16(h.dport_be), 53);
	CHECK_EQ(h.len, 11);
	CHECK_EQ(h.csum, 0xbeef);
}

static void test_udp_emit_known_bytes_and_round_trip(void)
{
	struct ipk_udp_hdr h, g;
	uint8_t b[11];

	h.sport_be = be16(1234);
	h.dport_be = be16(53);
	h.len = 11;
	h.csum = 0xbeef;
	CHECK_EQ(ipk_udp_emit(b, sizeof(b), &h), 8);
	memcpy(b + 8, "abc", 3);
	CHECK(memcmp(b, udp_bytes, 11) == 0);
	CHECK_EQ(ipk_udp_parse(b, 11, &g), 8);
	CHECK(memcmp(&g, &h, sizeof(g)) == 0);
}

static void test_udp_short_buffers_rejected(void)
{
	struct ipk_udp_hdr h;
	uint8_t b[8];
	uint32_t n;

	memset(&h, 0, sizeof(h));
	for (n = 0; n < 8; n++) {
		CHECK_EQ(ipk_udp_parse(udp_bytes, n, &h), IPK_WIRE_ESHORT);
		CHECK_EQ(ipk_udp_emit(b, n, &h), 0);
	}
}

static void test_udp_len_below_8_rejected(void)
{
	uint8_t b[11];
	struct ipk_udp_hdr h;
	uint16_t l;

	memcpy(b, udp_bytes, 11);
	for (l = 0; l < 8; l++) {
		ipk_wr16(b + 4, l);
		CHECK_EQ(ipk_udp_parse(b, 11, &h), IPK_WIRE_ELEN);
	}
	ipk_wr16(b + 4, 8);
	CHECK_EQ(ipk_udp_parse(b, 11, &h), 8);
}

static void test_udp_len_past_buffer_rejected(void)
{
	uint8_t b[11];
	struct ipk_udp_hdr h;

	memcpy(b, udp_bytes, 11);
	CHECK_EQ(ipk_udp_parse(b, 10, &h), IPK_WIRE_ESHORT);
	ipk_wr16(b + 4, 0xffff);
	CHECK_EQ(ipk_udp_parse(b, 11, &h), IPK_WIRE_ESHORT);
}

/* =================================================================== TCP */

/* 40000 -> 80 SYN, seq 0x01020304, window 64240, doff 40, with the options Linux
 * puts on a SYN: MSS 1460, SACK-permitted, TS 0x11223344/0, NOP, WS 7. */
static const uint8_t tcp_syn[40] = {
	0x9c, 0x40, 0x00, 0x50, 0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02,
	0xfa, 0xf0, 0x12, 0x34, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a,
	0x11, 0x22, 0x33, 0x44, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x07};

static void test_tcp_parse_known_bytes(void)
{
	struct ipk_tcp_hdr h;

	CHECK_EQ(ipk_tcp_parse(tcp_syn, 40, &h), 40);
	CHECK_EQ(h.sport_be, be16(40000));
	CHECK_EQ(h.dport_be, be16(80));
	CHECK_EQ(h.seq, 0x01020304u);
	CHECK_EQ(h.ack, 0);
	CHECK_EQ(h.doff, 40);
	CHECK_EQ(h.flags, IPK_TCP_SYN);
	CHECK_EQ(h.wnd, 64240);
	CHECK_EQ(h.csum, 0x1234);
	CHECK_EQ(h.urp, 0);
}

static void test_tcp_parse_all_flags_and_ignores_reserved_bits(void)
{
	uint8_t b[20];
	struct ipk_tcp_hdr h;

	memcpy(b, tcp_syn, 20);
	b[12] = 0x5f; /* doff 5, reserved bits and the old NS bit set */
	b[13] = 0xff;
	CHECK_EQ(ipk_tcp_parse(b, 20, &h), 20);
	CHECK_EQ(h.flags, 0xff);
	CHECK_EQ(h.doff, 20);
}

static void test_tcp_emit_known_bytes_and_round_trip(void)
{
	struct ipk_tcp_hdr h, g;
	struct ipk_tcp_opts o;
	uint8_t b[60];

	memset(&h, 0, sizeof(h));
	h.sport_be = be16(40000);
	h.dport_be = be16(80);
	h.seq = 0x01020304u;
	h.doff = 40;
	h.flags = IPK_TCP_SYN;
	h.wnd = 64240;
	h.csum = 0x1234;
	memset(&o, 0, sizeof(o));
	o.has_mss = o.has_ws = o.has_sack_perm = o.has_ts = 1;
	o.mss = 1460;
	o.ws = 7;
	o.tsval = 0x11223344u;
	CHECK_EQ(ipk_tcp_emit(b, sizeof(b), &h), 20);
	CHECK_EQ(ipk_tcp_opts_emit(b + 20, sizeof(b) - 20, &o), 20);
	CHECK(memcmp(b, tcp_syn, 40) == 0);
	memset(&g, 0, sizeof(g));
	CHECK_EQ(ipk_tcp_parse(b, 40, &g), 40);
	CHECK(memcmp(&g, &h, sizeof(g)) == 0);
}

static void test_tcp_emit_rejects_unencodable_doff(void)
{
	struct ipk_tcp_hdr h;
	uint8_t b[60];

	memset(&h, 0, sizeof(h));
	h.doff = 16;
	CHECK_EQ(ipk_tcp_emit(b, 60, &h), 0);
	h.doff = 22;
	CHECK_EQ(ipk_tcp_emit(b, 60, &h), 0);
	h.doff = 64;
	CHECK_EQ(ipk_tcp_emit(b, 60, &h), 0);
	h.doff = 60;
	CHECK_EQ(ipk_tcp_emit(b, 60, &h), 20);
	CHECK_EQ(b[12], 0xf0);
}

static void test_tcp_short_buffers_rejected(void)
{
	struct ipk_tcp_hdr h;
	uint8_t b[20];
	uint32_t n;

	memset(&h, 0, sizeof(h));
	h.doff = 20;
	for (n = 0; n < 20; n++) {
		CHECK_EQ(ipk_tcp_parse(tcp_syn, n, &h), IPK_WIRE_ESHORT);
		CHECK_EQ(ipk_tcp_emit(b, n, &h), 0);
	}
}

static void test_tcp_doff_below_20_rejected(void)
{
	uint8_t b[40];
	struct ipk_tcp_hdr h;
	unsigned w;

	for (w = 0; w < 5; w++) {
		memcpy(b, tcp_syn, 40);
		b[12] = (uint8_t)(w << 4);
		CHECK_EQ(ipk_tcp_parse(b, 40, &h), IPK_WIRE_ELEN);
	}
}

static void test_tcp_doff_past_buffer_rejected(void)
{
	uint8_t b[60];
	struct ipk_tcp_hdr h;
	uint32_t n;

	memset(b, 1, sizeof(b));
	memcpy(b, tcp_syn, 40);
	for (n = 20; n < 40; n++)
		CHECK_EQ(ipk_tcp_parse(b, n, &h), IPK_WIRE_ESHORT);
	b[12] = 0xf0;
	CHECK_EQ(ipk_tcp_parse(b, 59, &h), IPK_WIRE_ESHORT);
	CHECK_EQ(ipk_tcp_parse(b, 60, &h), 60);
}

/* ========================================================= TCP options in */

static void test_tcpopt_parse_linux_syn_options(void)
{
	struct ipk_tcp_opts o;

	CHECK_EQ(ipk_tcp_opts_parse(tcp_syn + 20, 20, &o), 0);
	CHECK(o.has_mss && o.has_ws && o.has_sack_perm && o.has_ts);
	CHECK_EQ(o.mss, 1460);
	CHECK_EQ(o.ws, 7);
	CHECK_EQ(o.tsval, 0x11223344u);
	CHECK_EQ(o.tsecr, 0);
	CHECK_EQ(o.nsack, 0);
}

static void test_tcpopt_parse_empty_clears_everything(void)
{
	struct ipk_tcp_opts o;

	memset(&o, 0xa5, sizeof(o));
	CHECK_EQ(ipk_tcp_opts_parse(tcp_syn, 0, &o), 0);
	CHECK(!o.has_mss && !o.has_ws && !o.has_sack_perm && !o.has_ts && o.nsack == 0);
}

/* The NOP,NOP,TS fast paths (parse and emit) agree with the general code: the same
 * bytes as an emit with SACK-permitted folded away, a stale struct fully cleared,
 * and a TS option of the wrong length still rejected. */
static void test_tcpopt_timestamp_only_fast_paths(void)
{
	uint8_t b[40], g[40] = {1, 1, 8, 10};
	struct ipk_tcp_opts o, back;

	memset(&o, 0, sizeof(o));
	o.has_ts = 1;
	o.tsval = 0x01020304u;
	o.tsecr = 0xa0b0c0d0u;
	CHECK_EQ(ipk_tcp_opts_len(&o), 12);
	CHECK_EQ(ipk_tcp_opts_emit(b, 11, &o), 0);
	CHECK_EQ(ipk_tcp_opts_emit(b, sizeof(b), &o), 12);
	ipk_wr32(g + 4, 0x01020304u);
	ipk_wr32(g + 8, 0xa0b0c0d0u);
	CHECK(memcmp(b, g, 12) == 0);
	memset(&back, 0xa5, sizeof(back));
	CHECK_EQ(ipk_tcp_opts_parse(b, 12, &back), 0);
	CHECK(back.has_ts && !back.has_mss && !back.has_ws && !back.has_sack_perm);
	CHECK_EQ(back.nsack, 0);
	CHECK_EQ(back.tsval, 0x01020304u);
	CHECK_EQ(back.tsecr, 0xa0b0c0d0u);
	g[3] = 9; /* not the fast layout: the general parser rejects the length */
	CHECK_EQ(ipk_tcp_opts_parse(g, 12, &back), IPK_WIRE_EOPT);
	o.nsack = 1; /* with a block the general emitter runs */
	o.sack[0][0] = 1;
	o.sack[0][1] = 2;
	CHECK_EQ(ipk_tcp_opts_len(&o), 24);
	CHECK_EQ(ipk_tcp_opts_emit(b, sizeof(b), &o), 24);
}

static void test_tcpopt_parse_sack_blocks(void)
{
	uint8_t b[40] = {1, 1, 5, 34};
	struct ipk_tcp_opts o;
	uint32_t i;

	for (i = 0; i < 8; i++)
		ipk_wr32(b + 4 + 4 * i, 0x10000000u + i);
	CHECK_EQ(ipk_tcp_opts_parse(b, 36, &o), 0);
	CHECK_EQ(o.nsack, 4);
	for (i = 0; i < 4; i++) {
		CHECK_EQ(o.sack[i][0], 0x10000000u + 2 * i);
		CHECK_EQ(o.sack[i][1], 0x10000000u + 2 * i + 1);
	}
	b[3] = 10;
	CHECK_EQ(ipk_tcp_opts_parse(b, 12, &o), 0);
	CHECK_EQ(o.nsack, 1);
}

static void test_tcpopt_eol_stops_parsing(void)
{
	static const uint8_t b[8] = {2, 4, 0x05, 0xb4, 0, 0xff, 0xff, 0xff};
	struct ipk_tcp_opts o;

	CHECK_EQ(ipk_tcp_opts_parse(b, 8, &o), 0);
	CHECK(o.has_mss);
	CHECK_EQ(o.mss, 1460);
}

static void test_tcpopt_nops_and_unknown_kinds_skipped(void)
{
	/* NOP, unknown kind 30 (len 4), unknown kind 254 (len 2), NOP, WS 14 */
	static const uint8_t b[12] = {1, 30, 4, 0xaa, 0xbb, 254, 2, 1, 3, 3, 14, 1};
	struct ipk_tcp_opts o;

	CHECK_EQ(ipk_tcp_opts_parse(b, 12, &o), 0);
	CHECK(o.has_ws && !o.has_mss && !o.has_ts);
	CHECK_EQ(o.ws, 14);
}

static void test_tcpopt_unknown_kind_at_end_exactly_fits(void)
{
	static const uint8_t b[4] = {1, 99, 2, 1};
	static const uint8_t c[4] = {1, 1, 99, 2};
	struct ipk_tcp_opts o;

	CHECK_EQ(ipk_tcp_opts_parse(b, 4, &o), 0);
	CHECK_EQ(ipk_tcp_opts_parse(c, 4, &o), 0);
}

static void test_tcpopt_length_0_or_1_rejected(void)
{
	uint8_t b[8] = {30, 0, 1, 1, 1, 1, 1, 1};
	struct ipk_tcp_opts o;

	CHECK_EQ(ipk_tcp_opts_parse(b, 8, &o), IPK_WIRE_EOPT);
	b[1] = 1;
	CHECK_EQ(ipk_tcp_opts_parse(b, 8, &o), IPK_WIRE_EOPT);
	b[0] = IPK_TCPOPT_MSS;
	b[1] = 0;
	CHECK_EQ(ipk_tcp_opts_parse(b, 8, &o), IPK_WIRE_EOPT);
}

static void test_tcpopt_length_past_end_rejected(void)
{
	static const uint8_t a[4] = {1, 1, 1, 2};           /* kind with no length byte */
	static const uint8_t b[4] = {1, 1, 30, 3};          /* unknown kind, 1 byte past */
	static const uint8_t c[8] = {1, 8, 10, 0, 0, 0, 0, 0}; /* TS cut at 8 */
	static const uint8_t d[3] = {2, 4, 5};              /* MSS cut */
	struct ipk_tcp_opts o;

	CHECK_EQ(ipk_tcp_opts_parse(a, 4, &o), IPK_WIRE_EOPT);
	CHECK_EQ(ipk_tcp_opts_parse(b, 4, &o), IPK_WIRE_EOPT);
	CHECK_EQ(ipk_tcp_opts_parse(c, 8, &o), IPK_WIRE_EOPT);
	CHECK_EQ(ipk_tcp_opts_parse(d, 3, &o), IPK_WIRE_EOPT);
	CHECK_EQ(ipk_tcp_opts_parse(tcp_syn + 20, 19, &o), IPK_WIRE_EOPT);
}

/* A known kind whose length byte is anything but its fixed size is malformed. */
static void expect_only_len_ok(uint8_t kind, const uint8_t *ok, unsigned nok)
{
	uint8_t b[44];
	struct ipk_tcp_opts o;
	unsigned l, i;

	for (l = 2; l <= 44; l++) {
		int good = 0;
		for (i = 0; i < nok; i++)
			good |= (l == ok[i]);
		memset(b, 0, sizeof(b));
		b[0] = kind;
		b[1] = (uint8_t)l;
		if (good)
			CHECK_EQ(ipk_tcp_opts_parse(b, l, &o), 0);
		else
			CHECK_EQ(ipk_tcp_opts_parse(b, l, &o), IPK_WIRE_EOPT);
	}
}

static void test_tcpopt_known_kind_wrong_length_rejected(void)
{
	static const uint8_t mss[1] = {4}, ws[1] = {3}, sp[1] = {2}, ts[1] = {10};
	static const uint8_t sack[4] = {10, 18, 26, 34};

	expect_only_len_ok(IPK_TCPOPT_MSS, mss, 1);
	expect_only_len_ok(IPK_TCPOPT_WSCALE, ws, 1);
	expect_only_len_ok(IPK_TCPOPT_SACK_PERM, sp, 1);
	expect_only_len_ok(IPK_TCPOPT_TS, ts, 1);
	expect_only_len_ok(IPK_TCPOPT_SACK, sack, 4);
}

/* ======================================================== TCP options out */

static void opts_all_syn(struct ipk_tcp_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->has_mss = o->has_ws = o->has_sack_perm = o->has_ts = 1;
	o->mss = 1460;
	o->ws = 7;
	o->tsval = 0x11223344u;
}

static void test_tcpopt_emit_single_option_layouts(void)
{
	static const uint8_t mss[4] = {2, 4, 0x05, 0xb4};
	static const uint8_t ws[4] = {1, 3, 3, 9};
	static const uint8_t sp[4] = {1, 1, 4, 2};
	static const uint8_t ts[12] = {1, 1, 8, 10, 0, 0, 0, 5, 0, 0, 0, 6};
	struct ipk_tcp_opts o;
	uint8_t b[40];

	memset(&o, 0, sizeof(o));
	CHECK_EQ(ipk_tcp_opts_emit(b, 40, &o), 0);
	o.has_mss = 1;
	o.mss = 1460;
	CHECK_EQ(ipk_tcp_opts_emit(b, 40, &o), 4);
	CHECK(memcmp(b, mss, 4) == 0);
	memset(&o, 0, sizeof(o));
	o.has_ws = 1;
	o.ws = 9;
	CHECK_EQ(ipk_tcp_opts_emit(b, 40, &o), 4);
	CHECK(memcmp(b, ws, 4) == 0);
	memset(&o, 0, sizeof(o));
	o.has_sack_perm = 1;
	CHECK_EQ(ipk_tcp_opts_emit(b, 40, &o), 4);
	CHECK(memcmp(b, sp, 4) == 0);
	memset(&o, 0, sizeof(o));
	o.has_ts = 1;
	o.tsval = 5;
	o.tsecr = 6;
	CHECK_EQ(ipk_tcp_opts_emit(b, 40, &o), 12);
	CHECK(memcmp(b, ts, 12) == 0);
}

static void test_tcpopt_emit_syn_without_sack_perm(void)
{
	static const uint8_t want[20] = {2, 4, 0x05, 0xb4, 1, 1, 8, 10, 0x11, 0x22,
	                                 0x33, 0x44, 0, 0, 0, 0, 1, 3, 3, 7};
	struct ipk_tcp_opts o;
	uint8_t b[40];

	opts_all_syn(&o);
	o.has_sack_perm = 0;
	CHECK_EQ(ipk_tcp_opts_emit(b, 40, &o), 20);
	CHECK(memcmp(b, want, 20) == 0);
}

static void test_tcpopt_emit_sack_blocks_fill_what_fits(void)
{
	struct ipk_tcp_opts o, g;
	uint8_t b[40];
	uint32_t i;

	memset(&o, 0, sizeof(o));
	o.nsack = 4;
	for (i = 0; i < 4; i++) {
		o.sack[i][0] = 1000 * i + 1;
		o.sack[i][1] = 1000 * i + 500;
	}
	CHECK_EQ(ipk_tcp_opts_emit(b, 40, &o), 36);
	CHECK(b[0] == 1 && b[1] == 1 && b[2] == 5 && b[3] == 34);
	CHECK_EQ(ipk_tcp_opts_parse(b, 36, &g), 0);
	CHECK_EQ(g.nsack, 4);
	CHECK_EQ(g.sack[3][1], 3500);
	/* With timestamps 12 bytes are taken: only 3 blocks fit (12 + 4 + 24 = 40). */
	o.has_ts = 1;
	CHECK_EQ(ipk_tcp_opts_emit(b, 40, &o), 40);
	CHECK_EQ(ipk_tcp_opts_parse(b, 40, &g), 0);
	CHECK_EQ(g.nsack, 3);
	CHECK(g.has_ts);
	CHECK_EQ(g.sack[2][0], 2001);
	/* A full SYN leaves room for 2 blocks (20 + 4 + 16 = 40). */
	opts_all_syn(&o);
	o.nsack = 4;
	o.sack[0][0] = 1;
	CHECK_EQ(ipk_tcp_opts_emit(b, 40, &o), 40);
	CHECK_EQ(ipk_tcp_opts_parse(b, 40, &g), 0);
	CHECK_EQ(g.nsack, 2);
}

static void test_tcpopt_emit_short_cap_returns_0(void)
{
	struct ipk_tcp_opts o;
	uint8_t b[40];
	uint32_t cap;

	opts_all_syn(&o);
	for (cap = 0; cap < 20; cap++)
		CHECK_EQ(ipk_tcp_opts_emit(b, cap, &o), 0);
	CHECK_EQ(ipk_tcp_opts_emit(b, 20, &o), 20);
}

static void test_tcpopt_emit_every_combination_round_trips(void)
{
	struct ipk_tcp_opts o, g;
	uint8_t b[48];
	unsigned m, n, i;
	int bad = 0;

	for (m = 0; m < 16; m++) {
		for (n = 0; n <= IPK_TCP_MAX_SACK; n++) {
			uint32_t len;
			memset(&o, 0, sizeof(o));
			o.has_mss = m & 1;
			o.has_ws = (m >> 1) & 1;
			o.has_sack_perm = (m >> 2) & 1;
			o.has_ts = (m >> 3) & 1;
			o.mss = 536;
			o.ws = 14;
			o.tsval = 0xfffffff0u;
			o.tsecr = 0x80000001u;
			o.nsack = (uint8_t)n;
			for (i = 0; i < n; i++) {
				o.sack[i][0] = 0xfffff000u + i;
				o.sack[i][1] = 0x00000010u + i;
			}
			memset(b, 0xcc, sizeof(b));
			len = ipk_tcp_opts_emit(b, sizeof(b), &o);
			bad += (len % 4 != 0) || len > 40 || b[len] != 0xcc;
			bad += ipk_tcp_opts_parse(b, len, &g) != 0;
			bad += g.has_mss != o.has_mss || g.has_ws != o.has_ws;
			bad += g.has_sack_perm != o.has_sack_perm || g.has_ts != o.has_ts;
			bad += o.has_mss && g.mss != o.mss;
			bad += o.has_ws && g.ws != o.ws;
			bad += o.has_ts && (g.tsval != o.tsval || g.tsecr != o.tsecr);
			bad += g.nsack > n || (n > 0 && g.nsack == 0 && len + 12 <= 40);
			for (i = 0; i < g.nsack; i++)
				bad += g.sack[i][0] != o.sack[i][0] || g.sack[i][1] != o.sack[i][1];
		}
	}
	CHECK_EQ(bad, 0);
}

/* ========================================================= Linux frames */

static void check_lf_arp(const struct linux_frame *f, const uint8_t *l3, uint32_t len)
{
	struct ipk_arp_hdr h;
	uint8_t b[IPK_ARP_LEN];

	memset(&h, 0, sizeof(h));
	CHECK_EQ(ipk_arp_parse(l3, len, &h), IPK_ARP_LEN);
	CHECK_EQ(h.op, f->arp_op);
	CHECK_EQ(host32(h.spa_be), f->arp_spa);
	CHECK_EQ(host32(h.tpa_be), f->arp_tpa);
	CHECK(memcmp(h.sha, f->bytes + 6, 6) == 0); /* sender is the frame's source */
	CHECK_EQ(ipk_arp_emit(b, sizeof(b), &h), IPK_ARP_LEN);
	CHECK(memcmp(b, l3, IPK_ARP_LEN) == 0);
}

static void check_lf_icmp(const struct linux_frame *f, const uint8_t *p, uint32_t len)
{
	struct ipk_icmp_hdr h;
	uint8_t b[IPK_ICMP_HLEN];

	CHECK_EQ(ipk_icmp_parse(p, len, &h), IPK_ICMP_HLEN);
	CHECK_EQ(h.type, f->icmp_type);
	CHECK_EQ(h.code, f->icmp_code);
	CHECK_EQ(h.id, f->icmp_id);
	CHECK_EQ(h.seq, f->icmp_seq);
	CHECK_EQ(csum_of(p, len), 0);
	CHECK_EQ(ipk_icmp_emit(b, sizeof(b), &h), IPK_ICMP_HLEN);
	CHECK(memcmp(b, p, IPK_ICMP_HLEN) == 0);
}

/* Option kinds in wire order as our parser saw them must be what tshark listed;
 * the parser's has_* flags must agree with that list. */
static void check_lf_opt_kinds(const struct linux_frame *f, const struct ipk_tcp_opts *o)
{
	int mss = 0, ws = 0, sp = 0, ts = 0;
	unsigned i;

	for (i = 0; i < sizeof(f->opt_kinds) && f->opt_kinds[i]; i++) {
		mss |= f->opt_kinds[i] == IPK_TCPOPT_MSS;
		ws |= f->opt_kinds[i] == IPK_TCPOPT_WSCALE;
		sp |= f->opt_kinds[i] == IPK_TCPOPT_SACK_PERM;
		ts |= f->opt_kinds[i] == IPK_TCPOPT_TS;
	}
	CHECK_EQ(o->has_mss, mss);
	CHECK_EQ(o->has_ws, ws);
	CHECK_EQ(o->has_sack_perm, sp);
	CHECK_EQ(o->has_ts, ts);
}

static void check_lf_tcp_csum(const struct ipk_ip4_hdr *ip, const uint8_t *p, uint32_t len)
{
	uint32_t s, cut;
	int odd = 0, bad = 0;

	s = ipk_csum_add(ipk_csum_pseudo(ip->src_be, ip->dst_be, ip->proto, len), p, len, &odd);
	CHECK_EQ(ipk_csum_fold(s), 0);
	/* The same segment summed in two scattered pieces, cut at every offset. */
	for (cut = 0; cut <= len; cut++) {
		odd = 0;
		s = ipk_csum_pseudo(ip->src_be, ip->dst_be, ip->proto, len);
		s = ipk_csum_add(s, p, cut, &odd);
		s = ipk_csum_add(s, p + cut, len - cut, &odd);
		bad += ipk_csum_fold(s) != 0;
	}
	CHECK_EQ(bad, 0);
}

/* Re-emits header and options and recomputes the checksum from scratch. */
static void check_lf_tcp_reemit(const struct ipk_ip4_hdr *ip, const struct ipk_tcp_hdr *h,
                                const struct ipk_tcp_opts *o, const uint8_t *p, uint32_t len)
{
	uint8_t b[1600];
	struct ipk_tcp_hdr z = *h;
	int odd = 0;
	uint32_t s;

	CHECK(len <= sizeof(b));
	if (len > sizeof(b))
		return;
	z.csum = 0;
	CHECK_EQ(ipk_tcp_emit(b, sizeof(b), &z), IPK_TCP_HLEN);
	CHECK_EQ(ipk_tcp_opts_emit(b + IPK_TCP_HLEN, sizeof(b) - IPK_TCP_HLEN, o),
	         (uint32_t)h->doff - IPK_TCP_HLEN);
	memcpy(b + h->doff, p + h->doff, len - h->doff);
	s = ipk_csum_add(ipk_csum_pseudo(ip->src_be, ip->dst_be, ip->proto, len), b, len, &odd);
	ipk_wr16(b + 16, ipk_csum_fold(s));
	CHECK(memcmp(b, p, len) == 0);
}

static void check_lf_tcp(const struct linux_frame *f, const struct ipk_ip4_hdr *ip,
                         const uint8_t *p, uint32_t len)
{
	struct ipk_tcp_hdr h;
	struct ipk_tcp_opts o;

	CHECK_EQ(ipk_tcp_parse(p, len, &h), (int)f->tcp_hlen);
	if (h.doff != f->tcp_hlen)
		return;
	CHECK_EQ(host16(h.sport_be), f->tcp_sport);
	CHECK_EQ(host16(h.dport_be), f->tcp_dport);
	CHECK_EQ(h.seq, f->tcp_seq);
	CHECK_EQ(h.ack, f->tcp_ack);
	CHECK_EQ(h.flags, f->tcp_flags);
	CHECK_EQ(h.wnd, f->tcp_wnd);
	CHECK_EQ(len - h.doff, f->tcp_len);
	CHECK_EQ(ipk_tcp_opts_parse(p + IPK_TCP_HLEN, h.doff - IPK_TCP_HLEN, &o), 0);
	check_lf_opt_kinds(f, &o);
	if (o.has_mss)
		CHECK_EQ(o.mss, f->mss);
	if (o.has_ws)
		CHECK_EQ(o.ws, f->ws);
	if (o.has_ts) {
		CHECK_EQ(o.tsval, f->tsval);
		CHECK_EQ(o.tsecr, f->tsecr);
	}
	check_lf_tcp_csum(ip, p, len);
	check_lf_tcp_reemit(ip, &h, &o, p, len);
}

static void check_lf_ip4(const struct linux_frame *f, const uint8_t *l3, uint32_t len)
{
	struct ipk_ip4_hdr h;
	uint8_t b[IPK_IP4_HLEN];

	CHECK_EQ(ipk_ip4_parse(l3, len, &h), IPK_IP4_HLEN);
	if (h.ihl != IPK_IP4_HLEN)
		return;
	CHECK_EQ(host32(h.src_be), f->ip_src);
	CHECK_EQ(host32(h.dst_be), f->ip_dst);
	CHECK_EQ(h.ttl, f->ip_ttl);
	CHECK_EQ(h.id, f->ip_id);
	CHECK_EQ(h.tot_len, f->ip_len);
	CHECK_EQ(h.proto, f->ip_proto);
	CHECK_EQ(h.tos, f->ip_tos);
	CHECK_EQ(h.frag >> 13, f->ip_flags);
	CHECK(ipk_ip4_csum_ok(l3, h.ihl));
	CHECK_EQ(ipk_ip4_emit(b, sizeof(b), &h, 1), IPK_IP4_HLEN);
	CHECK(memcmp(b, l3, IPK_IP4_HLEN) == 0);
	if (h.proto == IPK_IPPROTO_ICMP)
		check_lf_icmp(f, l3 + h.ihl, h.tot_len - h.ihl);
	else if (h.proto == IPK_IPPROTO_TCP)
		check_lf_tcp(f, &h, l3 + h.ihl, h.tot_len - h.ihl);
	else
		CHECK(!"unexpected protocol in linux_frames.h");
}

static void check_lf_frame(const struct linux_frame *f)
{
	struct ipk_eth_hdr e;
	uint8_t b[IPK_ETH_HLEN];

	CHECK_EQ(ipk_eth_parse(f->bytes, f->len, &e), IPK_ETH_HLEN);
	CHECK_EQ(e.type, f->eth_type);
	CHECK_EQ(ipk_eth_emit(b, sizeof(b), &e), IPK_ETH_HLEN);
	CHECK(memcmp(b, f->bytes, IPK_ETH_HLEN) == 0);
	if (e.type == IPK_ETHERTYPE_ARP)
		check_lf_arp(f, f->bytes + IPK_ETH_HLEN, f->len - IPK_ETH_HLEN);
	else if (e.type == IPK_ETHERTYPE_IP4)
		check_lf_ip4(f, f->bytes + IPK_ETH_HLEN, f->len - IPK_ETH_HLEN);
	else
		CHECK(!"unexpected ethertype in linux_frames.h");
}

static const struct linux_frame *lf_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(linux_frames) / sizeof(linux_frames[0]); i++)
		if (strcmp(linux_frames[i].name, name) == 0)
			return &linux_frames[i];
	return NULL;
}

static void test_linux_frames_parse_verify_and_reemit(void)
{
	size_t i;

	for (i = 0; i < sizeof(linux_frames) / sizeof(linux_frames[0]); i++) {
		int before = check_failed_now_;
		check_failed_now_ = 0;
		check_lf_frame(&linux_frames[i]);
		if (check_failed_now_)
			fprintf(stderr, "  (in linux frame %s)\n", linux_frames[i].name);
		check_failed_now_ |= before;
	}
}

static void test_linux_frames_cover_every_kind(void)
{
	static const char *const names[] = {"arp_request", "arp_reply", "echo_request",
	                                    "echo_reply", "tcp_syn", "tcp_synack", "tcp_ack",
	                                    "http_request", "http_response", "tcp_fin"};
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		CHECK(lf_find(names[i]) != NULL);
}

static void test_linux_syn_carries_all_four_options(void)
{
	const struct linux_frame *f = lf_find("tcp_syn");
	const uint8_t *p;
	struct ipk_tcp_opts o;

	CHECK(f != NULL);
	if (!f)
		return;
	p = f->bytes + IPK_ETH_HLEN + IPK_IP4_HLEN;
	CHECK_EQ(ipk_tcp_opts_parse(p + IPK_TCP_HLEN, (uint32_t)(p[12] >> 4) * 4 - 20, &o), 0);
	CHECK(o.has_mss && o.has_ws && o.has_sack_perm && o.has_ts);
	CHECK_EQ(o.mss, 1460); /* 1500-byte veth MTU minus 40 */
	CHECK(o.tsval != 0);
	CHECK_EQ(o.tsecr, 0);
}

static void test_linux_frames_every_truncation_rejected(void)
{
	size_t i;
	uint32_t n;
	int bad = 0;

	/* Cut each IPv4 frame anywhere inside its datagram: parse must refuse, never read
	 * past the cut (run under ASan to see reads). */
	for (i = 0; i < sizeof(linux_frames) / sizeof(linux_frames[0]); i++) {
		const struct linux_frame *f = &linux_frames[i];
		struct ipk_ip4_hdr h;
		if (f->eth_type != IPK_ETHERTYPE_IP4)
			continue;
		for (n = 0; n < f->ip_len; n++)
			bad += ipk_ip4_parse(f->bytes + IPK_ETH_HLEN, n, &h) >= 0;
	}
	CHECK_EQ(bad, 0);
}

int main(void)
{
	RUN(test_csum_rfc1071_example);
	RUN(test_csum_hdr20_equals_reference);
	RUN(test_csum_rfc1071_byte_order_independent_sum);
	RUN(test_csum_odd_length_pads_with_zero);
	RUN(test_csum_empty_and_zero);
	RUN(test_csum_scattered_pieces_equal_contiguous);
	RUN(test_csum_single_byte_pieces);
	RUN(test_csum_long_buffers_every_alignment);
	RUN(test_csum_large_buffer_no_overflow);
	RUN(test_csum_pseudo_header);
	RUN(test_csum_l4_equals_reference);
	RUN(test_csum_udp_datagram_verifies);

	RUN(test_eth_parse_known_bytes);
	RUN(test_eth_emit_known_bytes_and_round_trip);
	RUN(test_eth_short_buffers_rejected);

	RUN(test_arp_parse_known_bytes);
	RUN(test_arp_emit_known_bytes_and_round_trip);
	RUN(test_arp_short_buffers_rejected);
	RUN(test_arp_wrong_hardware_or_protocol_rejected);

	RUN(test_ip4_parse_known_bytes);
	RUN(test_ip4_trailing_padding_accepted);
	RUN(test_ip4_emit_known_bytes_and_round_trip);
	RUN(test_ip4_emit_without_csum_leaves_zero);
	RUN(test_ip4_short_buffers_rejected);
	RUN(test_ip4_bad_version_rejected);
	RUN(test_ip4_ihl_below_20_rejected);
	RUN(test_ip4_ihl_past_buffer_rejected);
	RUN(test_ip4_options_header_parses_and_checksums);
	RUN(test_ip4_tot_len_past_buffer_rejected);
	RUN(test_ip4_tot_len_below_ihl_rejected);
	RUN(test_ip4_csum_detects_every_single_bit_flip);

	RUN(test_icmp_parse_echo_known_bytes);
	RUN(test_icmp_parse_needfrag_mtu);
	RUN(test_icmp_emit_echo_then_checksum_verifies);
	RUN(test_icmp_emit_needfrag_and_other_types);
	RUN(test_icmp_short_buffers_rejected);

	RUN(test_udp_parse_known_bytes);
	RUN(test_udp_emit_known_bytes_and_round_trip);
	RUN(test_udp_short_buffers_rejected);
	RUN(test_udp_len_below_8_rejected);
	RUN(test_udp_len_past_buffer_rejected);

	RUN(test_tcp_parse_known_bytes);
	RUN(test_tcp_parse_all_flags_and_ignores_reserved_bits);
	RUN(test_tcp_emit_known_bytes_and_round_trip);
	RUN(test_tcp_emit_rejects_unencodable_doff);
	RUN(test_tcp_short_buffers_rejected);
	RUN(test_tcp_doff_below_20_rejected);
	RUN(test_tcp_doff_past_buffer_rejected);

	RUN(test_tcpopt_parse_linux_syn_options);
	RUN(test_tcpopt_parse_empty_clears_everything);
	RUN(test_tcpopt_parse_sack_blocks);
	RUN(test_tcpopt_timestamp_only_fast_paths);
	RUN(test_tcpopt_eol_stops_parsing);
	RUN(test_tcpopt_nops_and_unknown_kinds_skipped);
	RUN(test_tcpopt_unknown_kind_at_end_exactly_fits);
	RUN(test_tcpopt_length_0_or_1_rejected);
	RUN(test_tcpopt_length_past_end_rejected);
	RUN(test_tcpopt_known_kind_wrong_length_rejected);
	RUN(test_tcpopt_emit_single_option_layouts);
	RUN(test_tcpopt_emit_syn_without_sack_perm);
	RUN(test_tcpopt_emit_sack_blocks_fill_what_fits);
	RUN(test_tcpopt_emit_short_cap_returns_0);
	RUN(test_tcpopt_emit_every_combination_round_trips);

	RUN(test_linux_frames_cover_every_kind);
	RUN(test_linux_frames_parse_verify_and_reemit);
	RUN(test_linux_syn_carries_all_four_options);
	RUN(test_linux_frames_every_truncation_rejected);
	return check_summary();
}
