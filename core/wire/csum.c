/*
 * RFC 1071 Internet checksum. The running sum holds big-endian 16-bit words as numbers,
 * so the folded result is the checksum field's value in host order on any endianness.
 */
#include "wire/wire.h"

/* RFC 1071 §2(C): carries can be deferred and folded in at the end; folding the upper
 * half back in keeps the sum within 32 bits for any buffer length. */
static uint32_t csum_reduce(uint64_t s)
{
	while (s >> 32)
		s = (s & 0xffffffffu) + (s >> 32);
	return (uint32_t)s;
}

/* 1 on a little-endian machine; a constant the compiler folds. */
static int csum_host_le(void)
{
	const uint16_t one = 1;
	uint8_t b[2];

	__builtin_memcpy(b, &one, 2);
	return b[0];
}

/*
 * Sum of an even number of bytes as 16-bit big-endian words, folded to 16 bits.
 * RFC 1071 §2(B),(C): the sum may be taken over wider words in host order, with
 * carries deferred, and byte-swapped at the end on a little-endian host. Loads are
 * memcpy'd (any alignment); 64-bit words are added as two 32-bit halves so the
 * 64-bit accumulator cannot overflow for any length under 2^32.
 */
static uint32_t csum_wide(const uint8_t *p, uint32_t len)
{
	uint64_t s = 0, w;
	uint32_t i = 0, h;

	for (; i + 8 <= len; i += 8) {
		__builtin_memcpy(&w, p + i, 8);
		s += (w & 0xffffffffu) + (w >> 32);
	}
	if (i + 4 <= len) {
		__builtin_memcpy(&h, p + i, 4);
		s += h;
		i += 4;
	}
	if (i < len) {
		uint16_t v;

		__builtin_memcpy(&v, p + i, 2);
		s += v;
	}
	while (s >> 16)
		s = (s & 0xffffu) + (s >> 16);
	if (csum_host_le())
		s = ((s & 0xffu) << 8) | (s >> 8);
	return (uint32_t)s;
}

uint32_t ipk_csum_add(uint32_t sum, const uint8_t *p, uint32_t len, int *odd)
{
	uint64_t s = sum;
	uint32_t i = 0, even;

	/* A piece that starts at an odd offset: its first byte is the low half of the
	 * word the previous piece started (RFC 1071 §2(B), byte-order independence). */
	if (*odd && len > 0) {
		s += p[0];
		i = 1;
		*odd = 0;
	}
	even = (len - i) & ~1u;
	s += csum_wide(p + i, even);
	i += even;
	if (i < len) {
		s += (uint32_t)p[i] << 8;
		*odd = 1;
	}
	return csum_reduce(s);
}

static uint16_t csum_fold16(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffffu) + (sum >> 16);
	return (uint16_t)sum;
}

uint16_t ipk_csum_fold(uint32_t sum) { return (uint16_t)~csum_fold16(sum); }

uint32_t ipk_csum_pseudo(uint32_t src_be, uint32_t dst_be, uint8_t proto, uint32_t l4_len)
{
	uint8_t a[8];
	uint64_t s;

	ipk_wrbe32(a, src_be);
	ipk_wrbe32(a + 4, dst_be);
	/* RFC 9293 §3.1 / RFC 768: src, dst, zero, protocol, transport length. */
	s = (uint64_t)ipk_rd16(a) + ipk_rd16(a + 2) + ipk_rd16(a + 4) + ipk_rd16(a + 6);
	s += proto;
	s += (l4_len >> 16) + (l4_len & 0xffffu);
	return csum_reduce(s);
}

uint16_t ipk_csum_pseudo_fold(uint32_t src_be, uint32_t dst_be, uint8_t proto, uint32_t l4_len)
{
	return csum_fold16(ipk_csum_pseudo(src_be, dst_be, proto, l4_len));
}
