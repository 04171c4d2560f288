/*
 * Internet checksum (RFC 1071) for afxdp's transmit path: the backend advertises
 * IPK_CAP_TX_CSUM_TCP/UDP (the core writes the pseudo-header sum into the checksum
 * field, as for a NIC) and finishes the sum itself, fused with the copy into the UMEM
 * frame when it copies the frame anyway: one pass over the payload instead of the
 * core's sum and the backend's copy.
 *
 * Sums are of 16-bit words as they lie in memory, added as host-order numbers (RFC
 * 1071 §2(B): byte-order independent; the result is stored back the same way), taken
 * 64 bits at a time with carries counted apart (§2(C): deferred carries). A span is
 * summed from its first byte as if that byte started a word; a span that starts at an
 * odd offset of the checksummed range has its folded sum byte-swapped (§2(B)).
 */
#ifndef IPK_AFXDP_CSUM_H
#define IPK_AFXDP_CSUM_H

#include <stdint.h>
#include <string.h>

/* s + c * 2^64 folded to 16 bits (2^16 = 1 modulo 2^16 - 1, so 2^64 counts as 1). */
static inline uint32_t ipk_xdp_fold(uint64_t s, uint64_t c)
{
	uint64_t t = s + c;

	t += t < c;                               /* end-around carry */
	t = (t & 0xffffffffu) + (t >> 32);        /* < 2^33 */
	t = (t & 0xffffu) + (t >> 16);            /* < 2^18 */
	t = (t & 0xffffu) + (t >> 16);            /* < 2^16 + 4 */
	t = (t & 0xffffu) + (t >> 16);            /* <= 0xffff */
	return (uint32_t)t;
}

/* Two 64-bit lanes (GCC/clang vector extension: SSE2 on x86-64, NEON on arm64,
 * plain 64-bit arithmetic elsewhere). */
typedef uint64_t ipk_xdp_v2 __attribute__((vector_size(16)));

/* The folded sum of n bytes at src, copying them to dst when copy is set: one pass,
 * each 16-byte load stored as it is and added. Each 64-bit word hi:lo (32-bit
 * halves) counts as hi + lo (2^32 = 1 modulo 2^16 - 1), so the lanes collect 32-bit
 * numbers without carries: a span is at most 64 KiB, far below 2^32 of them. The
 * last 0-31 bytes go word by word, the final 1-7 zero-padded (an odd last byte is
 * the first half of its word: RFC 1071's padding). */
static inline uint32_t ipk_xdp_sum_span(uint8_t *dst, const uint8_t *src, uint32_t n, int copy)
{
	const ipk_xdp_v2 lo = { 0xffffffffu, 0xffffffffu };
	ipk_xdp_v2 a = { 0, 0 }, b = { 0, 0 }, v, w;
	uint64_t s, x;
	uint32_t i = 0;

	for (; i + 32 <= n; i += 32) {
		memcpy(&v, src + i, 16);
		memcpy(&w, src + i + 16, 16);
		if (copy) {
			memcpy(dst + i, &v, 16);
			memcpy(dst + i + 16, &w, 16);
		}
		a += (v & lo) + (v >> 32);
		b += (w & lo) + (w >> 32);
	}
	a += b;
	s = a[0] + a[1];
	for (; i < n; i += 8) {
		uint32_t k = n - i < 8 ? n - i : 8;
		x = 0;
		memcpy(&x, src + i, k);
		if (copy)
			memcpy(dst + i, src + i, k);
		s += (x & 0xffffffffu) + (x >> 32);
	}
	return ipk_xdp_fold(s, 0);
}

/* Add a span's folded sum at byte offset pos of the checksummed range to sum. */
static inline uint32_t ipk_xdp_sum_add(uint32_t sum, uint32_t span, uint32_t pos)
{
	if (pos & 1)
		span = ((span & 0xffu) << 8) | (span >> 8);
	return sum + span; /* a few thousand spans at most: no overflow */
}

/* The checksum field's value from a running sum: complemented, as it lies in memory
 * (host-order store of the host-order sum). */
static inline uint16_t ipk_xdp_sum_final(uint32_t sum)
{
	return (uint16_t)~ipk_xdp_fold(sum, 0);
}

#endif
