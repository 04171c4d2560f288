/*
 * Log-linear latency histogram (the HdrHistogram layout, fixed precision).
 *
 * Values below 2^HIST_SUB_BITS are counted exactly. Above, every power-of-two range
 * [2^m, 2^(m+1)) is split into 2^HIST_SUB_BITS equal buckets, so a bucket is never
 * wider than 2^-HIST_SUB_BITS of its lower edge. A quantile is reported as the middle
 * of the bucket that holds it (clamped to the exact min and max seen), hence:
 *
 *   |reported - exact| <= exact * 2^-(HIST_SUB_BITS + 1)     (0.2% with 8 sub-bits)
 *
 * where "exact" is the sample of the same rank in the sorted input. The bound is
 * checked by tests/bench/test_hist.c. Any 64-bit value is accepted (no overflow
 * bucket); the histogram is ~115 KiB of counters and never allocates.
 */
#ifndef IPKIT_BENCH_HIST_H
#define IPKIT_BENCH_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 8
#define HIST_SUB (1u << HIST_SUB_BITS)
/* exact range + one range per possible shift (0 .. 63 - HIST_SUB_BITS) */
#define HIST_BUCKETS (HIST_SUB * (64 - HIST_SUB_BITS + 1))

struct hist {
	uint64_t count, sum, min, max;
	uint64_t bucket[HIST_BUCKETS];
};

void hist_init(struct hist *h);
void hist_add(struct hist *h, uint64_t v);
/* Add every sample of src into dst (threads keep their own and merge at the end). */
void hist_merge(struct hist *dst, const struct hist *src);
/* Value at quantile q in [0, 1] (q = 0.99 for p99) within the bound above; 0 when
 * the histogram is empty. */
uint64_t hist_quantile(const struct hist *h, double q);
uint64_t hist_mean(const struct hist *h);

#endif
