/* SHA-256 (FIPS 180-4), streaming; used by ipkit-nc to prove transfers intact. */
#ifndef IPKIT_EXAMPLES_SHA256_H
#define IPKIT_EXAMPLES_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
	uint32_t h[8];
	uint64_t bytes;
	uint8_t block[64];
	uint32_t fill;
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
/* Use the CPU's SHA instructions when want != 0 and the CPU has them (the default),
 * plain C otherwise; returns 1 when the instructions are now in use. Process-wide. */
int sha256_accel(int want);
/* Finish and write the digest as 64 lowercase hex characters plus NUL. */
void sha256_hex(struct sha256 *s, char out[65]);

#endif
