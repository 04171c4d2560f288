/*
 * afxdp's transmit checksum (io/afxdp/afxdp_csum.h) against a plain RFC 1071 sum of
 * big-endian 16-bit words: spans of every length 0..300 and random ones up to 9 KiB,
 * at every source and destination alignment 0..15, with and without the copy (the
 * copy must reproduce the bytes and touch nothing past them); and a frame cut into
 * random pieces, odd lengths and odd offsets included, summed span by span with
 * ipk_xdp_sum_add as the backend does, must give the same field value.
 * Portable (no kernel): suite 'unit', so the cross gate runs it on 32-bit and
 * big-endian targets too.
 */
#include "check.h"

#include "afxdp_csum.h"

#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	rng ^= rng << 13; /* xorshift64 */
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

/* RFC 1071 §4.1's loop: big-endian words, an odd last byte padded on the right. */
static uint16_t ref_final(const uint8_t *p, uint32_t n)
{
	uint32_t s = 0, i;

	for (i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (i < n)
		s += (uint32_t)p[i] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* the field value as the backend stores it, read back big-endian */
static uint16_t be_of(uint16_t stored)
{
	uint8_t b[2];

	memcpy(b, &stored, 2);
	return (uint16_t)(b[0] << 8 | b[1]);
}

static uint8_t src[9216 + 16], dst[9216 + 32];

static void one_span(uint32_t n, uint32_t so, uint32_t d, int copy)
{
	uint32_t i, sum;

	for (i = 0; i < n; i++)
		src[so + i] = (uint8_t)rnd();
	memset(dst, 0xa5, sizeof dst);
	sum = ipk_xdp_sum_span(dst + d, src + so, n, copy);
	CHECK_EQ(be_of(ipk_xdp_sum_final(ipk_xdp_sum_add(0, sum, 0))), ref_final(src + so, n));
	if (copy)
		CHECK(memcmp(dst + d, src + so, n) == 0);
	for (i = 0; i < sizeof dst; i++) {
		if (i < d || i >= d + (copy ? n : 0))
			CHECK_EQ(dst[i], 0xa5); /* nothing written outside */
	}
}

static void test_span_sums_match_rfc1071_every_length_and_alignment(void)
{
	uint32_t n, a, k;

	for (n = 0; n <= 300; n++)
		for (a = 0; a < 16; a++)
			one_span(n, a, (a * 7) & 15, (int)(n & 1));
	for (k = 0; k < 200; k++)
		one_span(rnd() % 9217, rnd() % 16, rnd() % 16, (int)(k & 1));
}

/* all-ones data sums to 0xffff (negative zero): the field must still verify */
static void test_all_ones_and_all_zero(void)
{
	uint32_t sum;

	memset(src, 0xff, 4000);
	sum = ipk_xdp_sum_span(dst, src, 4000, 1);
	CHECK_EQ(be_of(ipk_xdp_sum_final(sum)), ref_final(src, 4000));
	memset(src, 0, 4000);
	sum = ipk_xdp_sum_span(NULL, src, 4000, 0);
	CHECK_EQ(be_of(ipk_xdp_sum_final(sum)), ref_final(src, 4000));
}

/* a frame in random pieces (1..700 bytes, so odd offsets and lengths), summed piece
 * by piece into one copy as xdp_copy_chain does */
static void test_pieces_at_odd_offsets_sum_as_one(void)
{
	uint32_t k;

	for (k = 0; k < 500; k++) {
		uint32_t n = 1 + rnd() % 9216, pos = 0, sum = 0, i;
		for (i = 0; i < n; i++)
			src[i] = (uint8_t)rnd();
		while (pos < n) {
			uint32_t m = 1 + rnd() % 700;
			if (m > n - pos)
				m = n - pos;
			sum = ipk_xdp_sum_add(sum, ipk_xdp_sum_span(dst + pos, src + pos, m, 1), pos);
			pos += m;
		}
		CHECK_EQ(be_of(ipk_xdp_sum_final(sum)), ref_final(src, n));
		CHECK(memcmp(dst, src, n) == 0);
	}
}

int main(void)
{
	RUN(test_span_sums_match_rfc1071_every_length_and_alignment);
	RUN(test_all_ones_and_all_zero);
	RUN(test_pieces_at_odd_offsets_sum_as_one);
	return check_summary();
}
