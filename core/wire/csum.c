/*
 * RFC 1071 Internet checksum. The running sum holds big-endian 16-bit words as numbers,
 * so the folded result is the checksum field's value in host order on any endianness.
 */
#include "wire/wire.h"

/* RFC 1071 §2(C): carries can be deferred and folded in at the end; folding the upper
 * half back in keeps the sum within 32 bits for any buffer length. One add and its
 * end-around carry, no loop: lo + hi wraps at most once and the carry cannot wrap. */
static uint32_t csum_reduce(uint64_t s)
{
	uint32_t lo = (uint32_t)s, hi = (uint32_t)(s >> 32);

	lo += hi;
	return lo + (lo < hi);
}

/* The same from 32 to 16 bits. With sum = A * 2^16 + B, sum + (sum rotated by 16)
 * holds A + B in its upper half plus the carry out of the lower half's A + B: the
 * end-around carry, in one add (A + B <= 0x1fffe, so the result fits 16 bits). */
static uint16_t csum_fold16(uint32_t sum)
{
	return (uint16_t)((sum + ((sum << 16) | (sum >> 16))) >> 16);
}

/* 1 on a little-endian machine; a constant the compiler folds. */
static int csum_host_le(void)
{
	const uint16_t one = 1;
	uint8_t b[2];

	__builtin_memcpy(b, &one, 2);
	return b[0];
}

/* One's-complement addition of 64-bit words (RFC 1071 §2(A),(C)): the carry out of
 * the top goes back in at the bottom ("end-around carry"). */
static uint64_t csum_add64(uint64_t s, uint64_t w)
{
	s += w;
	return s + (s < w);
}

static uint64_t csum_load64(const uint8_t *p)
{
	uint64_t w;

	__builtin_memcpy(&w, p, 8);
	return w;
}

/* A sum of host-order words folded to 16 bits, as the big-endian word sum. */
static uint32_t csum_fold_host(uint64_t s)
{
	uint16_t f = csum_fold16(csum_reduce(s));

	if (csum_host_le())
		f = (uint16_t)((f << 8) | (f >> 8));
	return f;
}

/* A big-endian 16-bit word value v as it counts in a sum of host-order words. */
static uint32_t csum_host16(uint32_t v)
{
	return csum_host_le() ? ((v & 0xffu) << 8) | (v >> 8) : v;
}

/* s += the 64-bit word at p, its carry out counted in *c (each is worth 2^64, i.e. 1
 * in the end-around sum): compilers make that an add and an add-with-carry. */
static void csum_step(uint64_t *s, uint64_t *c, const uint8_t *p)
{
	uint64_t w = csum_load64(p);

	*s += w;
	*c += *s < w;
}

/*
 * Sum of an even number of bytes as host-order words, not folded (the caller folds
 * once with csum_fold_host). RFC 1071 §2(B),(C): the sum may be taken over wider
 * words in host order (2^16 is 1 modulo 2^16 - 1, so every 16-bit lane counts alike)
 * and byte-swapped at the end on a little-endian host. Loads are memcpy'd (any
 * alignment). From 64 bytes on, the words go into two sums (even and odd words),
 * each with its own carry count (RFC 1071 §2(C): the order of additions does not
 * matter): two add/add-with-carry chains of half the length, 64 bytes a round
 * (x86-64: 1460 bytes in ~15% less time and instructions). Shorter buffers (the
 * headers and small payloads of request/response traffic) take one chain without
 * the second sum's set-up and merge.
 */
static uint64_t csum_host(const uint8_t *p, uint32_t len)
{
	uint64_t s = 0, c = 0;
	uint32_t i = 0, h;

	if (len >= 64) {
		uint64_t s1 = 0, c1 = 0;

		for (; i + 64 <= len; i += 64) {
			csum_step(&s, &c, p + i);
			csum_step(&s1, &c1, p + i + 8);
			csum_step(&s, &c, p + i + 16);
			csum_step(&s1, &c1, p + i + 24);
			csum_step(&s, &c, p + i + 32);
			csum_step(&s1, &c1, p + i + 40);
			csum_step(&s, &c, p + i + 48);
			csum_step(&s1, &c1, p + i + 56);
		}
		/* each count holds at most one carry per 8 bytes: no overflow */
		c += c1;
		s += s1;
		c += s < s1;
	}
	if (i + 32 <= len) {
		csum_step(&s, &c, p + i);
		csum_step(&s, &c, p + i + 8);
		csum_step(&s, &c, p + i + 16);
		csum_step(&s, &c, p + i + 24);
		i += 32;
	}
	for (; i + 8 <= len; i += 8)
		csum_step(&s, &c, p + i);
	s = csum_add64(s, c);
	if (i + 4 <= len) {
		__builtin_memcpy(&h, p + i, 4);
		s = csum_add64(s, h);
		i += 4;
	}
	if (i < len) {
		uint16_t v;

		__builtin_memcpy(&v, p + i, 2);
		s = csum_add64(s, v);
	}
	return s;
}

/* Sum of an even number of bytes as 16-bit big-endian words, folded to 16 bits. */
static uint32_t csum_wide(const uint8_t *p, uint32_t len)
{
	return csum_fold_host(csum_host(p, len));
}

uint32_t ipk_csum_hdr20(const uint8_t *p)
{
	uint64_t s = csum_add64(csum_load64(p), csum_load64(p + 8));
	uint32_t h;

	__builtin_memcpy(&h, p + 16, 4);
	return csum_fold_host(csum_add64(s, h));
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

uint16_t ipk_csum_fold(uint32_t sum) { return (uint16_t)~csum_fold16(sum); }

uint32_t ipk_csum_pseudo(uint32_t src_be, uint32_t dst_be, uint8_t proto, uint32_t l4_len)
{
	/* RFC 9293 §3.1 / RFC 768: src, dst, zero, protocol, transport length. The two
	 * addresses are summed as host-order words (RFC 1071 §2(B)) and folded as the
	 * big-endian word sum, then the host-order numbers join it. */
	uint64_t s = csum_fold_host((uint64_t)src_be + dst_be);

	s += proto;
	s += (l4_len >> 16) + (l4_len & 0xffffu);
	return csum_reduce(s);
}

uint16_t ipk_csum_pseudo_fold(uint32_t src_be, uint32_t dst_be, uint8_t proto, uint32_t l4_len)
{
	return csum_fold16(ipk_csum_pseudo(src_be, dst_be, proto, l4_len));
}

uint16_t ipk_csum_l4(uint32_t src_be, uint32_t dst_be, uint8_t proto, const uint8_t *p,
                     uint32_t len)
{
	/* Pseudo-header (RFC 9293 §3.1 / RFC 768): the addresses as they lie in memory,
	 * protocol and length as big-endian words; all in the host-order sum. */
	uint64_t s = csum_host(p, len & ~1u);

	s = csum_add64(s, (uint64_t)src_be + dst_be + csum_host16(proto) + csum_host16(len));
	/* An odd last byte is the high half of a word padded with zero (RFC 1071 §1). */
	if (len & 1u)
		s = csum_add64(s, csum_host16((uint32_t)p[len - 1] << 8));
	return (uint16_t)~csum_fold_host(s);
}

/* The two 16-byte addresses of the IPv6 pseudo-header as host-order words. */
static uint64_t csum_addr6(const uint8_t src[16], const uint8_t dst[16])
{
	uint64_t s = csum_add64(csum_load64(src), csum_load64(src + 8));

	s = csum_add64(s, csum_load64(dst));
	return csum_add64(s, csum_load64(dst + 8));
}

uint32_t ipk_csum_pseudo6(const uint8_t src[16], const uint8_t dst[16], uint8_t proto,
                          uint32_t l4_len)
{
	/* RFC 8200 §8.1: source, destination, 32-bit upper-layer length, three zero
	 * bytes, next header. Addresses summed in host order, folded as big-endian
	 * words (RFC 1071 §2(B)); the numbers join as host-order values. */
	uint64_t s = csum_fold_host(csum_addr6(src, dst));

	s += proto;
	s += (l4_len >> 16) + (l4_len & 0xffffu);
	return csum_reduce(s);
}

uint16_t ipk_csum_l4_6(const uint8_t src[16], const uint8_t dst[16], uint8_t proto,
                       const uint8_t *p, uint32_t len)
{
	int odd = 0;

	return ipk_csum_fold(ipk_csum_add(ipk_csum_pseudo6(src, dst, proto, len), p, len, &odd));
}

int ipk_udp6_csum_ok(const uint8_t src[16], const uint8_t dst[16], const uint8_t *p,
                     uint32_t len)
{
	/* RFC 8200 §8.1: unlike IPv4, a zero UDP checksum is not "none": drop it. */
	if (len < IPK_UDP_HLEN || ipk_rd16(p + 6) == 0)
		return 0;
	return ipk_csum_l4_6(src, dst, IPK_IPPROTO_UDP, p, len) == 0;
}

uint16_t ipk_udp6_csum(const uint8_t src[16], const uint8_t dst[16], const uint8_t *p,
                       uint32_t len)
{
	uint16_t c = ipk_csum_l4_6(src, dst, IPK_IPPROTO_UDP, p, len);

	/* RFC 768 / RFC 8200 §8.1: a computed 0 is sent as all ones. */
	return c ? c : 0xffff;
}
