/*
 * SHA-256 (FIPS 180-4) for verifying simulated transfers end to end. Incremental:
 * init, update any number of times with any lengths, final.
 */
#ifndef IPKIT_SIM_SHA256_H
#define IPKIT_SIM_SHA256_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SHA256_DIGEST_LEN 32

struct sha256 {
	uint32_t h[8];
	uint64_t total;   /* bytes hashed so far */
	uint8_t blk[64];  /* partial block */
	uint32_t nblk;    /* bytes in blk */
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
void sha256_final(struct sha256 *s, uint8_t out[SHA256_DIGEST_LEN]);
/* One-shot convenience. */
void sha256(const void *data, size_t len, uint8_t out[SHA256_DIGEST_LEN]);
/* Lower-case hex of a digest into out (65 bytes incl. the terminating NUL). */
void sha256_hex(const uint8_t d[SHA256_DIGEST_LEN], char out[2 * SHA256_DIGEST_LEN + 1]);

#ifdef __cplusplus
}
#endif
#endif
