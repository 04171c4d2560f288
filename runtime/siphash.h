/*
 * SipHash-2-4 (Aumasson & Bernstein, 2012): the keyed PRF the runtime uses for the
 * RFC 6528 ISN function. Internal to the runtime; exposed only for its unit test.
 */
#ifndef IPKIT_RUNTIME_SIPHASH_H
#define IPKIT_RUNTIME_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* 64-bit tag of `len` bytes at `msg` under the 128-bit key (k[0] = first 8 key bytes
 * read little-endian, k[1] = the next 8), as the reference implementation computes it. */
uint64_t ipk_siphash24(const uint64_t k[2], const void *msg, size_t len);

#endif
