/* SipHash-2-4: 2 compression rounds per 8-byte word, 4 finalisation rounds. */
#include "siphash.h"

#define ROTL64(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

struct sip_state { uint64_t v0, v1, v2, v3; };

static void sip_round(struct sip_state *s)
{
	s->v0 += s->v1; s->v1 = ROTL64(s->v1, 13); s->v1 ^= s->v0; s->v0 = ROTL64(s->v0, 32);
	s->v2 += s->v3; s->v3 = ROTL64(s->v3, 16); s->v3 ^= s->v2;
	s->v0 += s->v3; s->v3 = ROTL64(s->v3, 21); s->v3 ^= s->v0;
	s->v2 += s->v1; s->v1 = ROTL64(s->v1, 17); s->v1 ^= s->v2; s->v2 = ROTL64(s->v2, 32);
}

/* The message is read as little-endian words whatever the host's byte order. */
static uint64_t sip_le64(const uint8_t *p, size_t n)
{
	uint64_t w = 0;
	size_t i;
	for (i = 0; i < n; i++)
		w |= (uint64_t)p[i] << (8 * i);
	return w;
}

static void sip_absorb(struct sip_state *s, uint64_t m)
{
	s->v3 ^= m;
	sip_round(s);
	sip_round(s);
	s->v0 ^= m;
}

uint64_t ipk_siphash24(const uint64_t k[2], const void *msg, size_t len)
{
	const uint8_t *p = (const uint8_t *)msg;
	struct sip_state s;
	size_t off;
	int i;

	s.v0 = k[0] ^ 0x736f6d6570736575ull;
	s.v1 = k[1] ^ 0x646f72616e646f6dull;
	s.v2 = k[0] ^ 0x6c7967656e657261ull;
	s.v3 = k[1] ^ 0x7465646279746573ull;
	for (off = 0; off + 8 <= len; off += 8)
		sip_absorb(&s, sip_le64(p + off, 8));
	/* last word: the remaining bytes plus the length's low byte at the top */
	sip_absorb(&s, sip_le64(p + off, len - off) | ((uint64_t)(len & 0xff) << 56));
	s.v2 ^= 0xff;
	for (i = 0; i < 4; i++)
		sip_round(&s);
	return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}
