/* SHA-256 per FIPS 180-4 §6.2; words are read big-endian byte by byte. On x86-64 with
 * the SHA extensions (SHA-NI) the same compression runs on sha256rnds2/msg1/msg2, about
 * 4x faster: ipkit-nc --sha256 hashes every byte it sends and receives, and the plain C
 * rounds (~200 MB/s here) cost more than the whole TCP stack at 1.5 Gbit/s; the Linux
 * peers of the relay tests hash with OpenSSL, which uses these instructions too. */
#include "sha256.h"

#include <stdio.h>
#include <string.h>

static const uint32_t sha_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha_block_c(uint32_t h[8], const uint8_t *p)
{
	uint32_t w[64], a, b, c, d, e, f, g, hh;
	int i;
	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (i = 16; i < 64; i++) {
		uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	a = h[0]; b = h[1]; c = h[2]; d = h[3]; e = h[4]; f = h[5]; g = h[6]; hh = h[7];
	for (i = 0; i < 64; i++) {
		uint32_t t1 = hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) +
		              sha_k[i] + w[i];
		uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
		hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
	}
	h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define SHA_HAVE_NI 1

/* CPUID.7.0:EBX bit 29 (SHA), CPUID.1:ECX bits 9 (SSSE3) and 19 (SSE4.1). */
static int sha_ni_present(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 9)) || !(c & (1u << 19)))
		return 0;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return 0;
	return (b >> 29) & 1u;
}

/* Four rounds (two sha256rnds2) with W[4i..4i+3] + K[4i..4i+3]. */
#define SHA_NI_ROUNDS4(s0, s1, m, i)                                                   \
	do {                                                                           \
		__m128i k_ = _mm_add_epi32((m), _mm_loadu_si128((const __m128i *)&sha_k[4 * (i)])); \
		(s1) = _mm_sha256rnds2_epu32((s1), (s0), k_);                          \
		(s0) = _mm_sha256rnds2_epu32((s0), (s1), _mm_shuffle_epi32(k_, 0x0E)); \
	} while (0)

/* One 64-byte block. State layout of the instructions: s0 = ABEF, s1 = CDGH (Intel,
 * "New Instructions Supporting the SHA-256", 2013). m[i & 3] holds W[4i..4i+3]; after
 * its rounds it is replaced by W[4i+16..4i+19] (FIPS 180-4 §6.2.2 step 1). */
__attribute__((target("sha,sse4.1,ssse3")))
static void sha_block_ni(uint32_t h[8], const uint8_t *p)
{
	const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bll, 0x0405060700010203ll);
	__m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1);
	__m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B);
	__m128i s0 = _mm_alignr_epi8(t, s1, 8), abef, cdgh, m[4];
	int i;

	s1 = _mm_blend_epi16(s1, t, 0xF0);
	abef = s0;
	cdgh = s1;
	for (i = 0; i < 4; i++)
		m[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), bswap);
	for (i = 0; i < 16; i++) {
		SHA_NI_ROUNDS4(s0, s1, m[i & 3], i);
		if (i < 12) {
			__m128i w = _mm_sha256msg1_epu32(m[i & 3], m[(i + 1) & 3]);
			w = _mm_add_epi32(w, _mm_alignr_epi8(m[(i + 3) & 3], m[(i + 2) & 3], 4));
			m[i & 3] = _mm_sha256msg2_epu32(w, m[(i + 3) & 3]);
		}
	}
	s0 = _mm_add_epi32(s0, abef);
	s1 = _mm_add_epi32(s1, cdgh);
	t = _mm_shuffle_epi32(s0, 0x1B);
	s1 = _mm_shuffle_epi32(s1, 0xB1);
	_mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(t, s1, 0xF0));
	_mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(s1, t, 8));
}
#endif

/* -1: not decided yet; 0: plain C; 1: SHA-NI. */
static int sha_accel = -1;

int sha256_accel(int want)
{
#ifdef SHA_HAVE_NI
	sha_accel = want && sha_ni_present();
#else
	(void)want;
	sha_accel = 0;
#endif
	return sha_accel;
}

static void sha_block(uint32_t h[8], const uint8_t *p)
{
	if (sha_accel < 0)
		sha256_accel(1);
#ifdef SHA_HAVE_NI
	if (sha_accel) {
		sha_block_ni(h, p);
		return;
	}
#endif
	sha_block_c(h, p);
}

void sha256_init(struct sha256 *s)
{
	static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
	memcpy(s->h, iv, sizeof(iv));
	s->bytes = 0;
	s->fill = 0;
}

void sha256_update(struct sha256 *s, const void *data, size_t len)
{
	const uint8_t *p = (const uint8_t *)data;
	s->bytes += len;
	if (s->fill) {
		size_t n = 64 - s->fill < len ? 64 - s->fill : len;
		memcpy(s->block + s->fill, p, n);
		s->fill += (uint32_t)n;
		p += n;
		len -= n;
		if (s->fill < 64)
			return;
		sha_block(s->h, s->block);
		s->fill = 0;
	}
	for (; len >= 64; p += 64, len -= 64)
		sha_block(s->h, p);
	memcpy(s->block, p, len);
	s->fill = (uint32_t)len;
}

void sha256_hex(struct sha256 *s, char out[65])
{
	uint64_t bits = s->bytes * 8;
	uint8_t pad[72];
	size_t padlen = (s->fill < 56 ? 56 : 120) - s->fill;
	int i;
	memset(pad, 0, sizeof(pad));
	pad[0] = 0x80;
	for (i = 0; i < 8; i++)
		pad[padlen + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
	sha256_update(s, pad, padlen + 8);
	for (i = 0; i < 8; i++)
		snprintf(out + 8 * i, 9, "%08x", (unsigned)s->h[i]);
}
