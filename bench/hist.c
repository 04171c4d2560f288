/* Log-linear histogram; the layout and its error bound are described in hist.h. */
#include "hist.h"

#include <string.h>

static unsigned hist_msb(uint64_t v)
{
	return 63u - (unsigned)__builtin_clzll(v);
}

static uint32_t hist_index(uint64_t v)
{
	unsigned shift;
	if (v < HIST_SUB)
		return (uint32_t)v;
	/* mantissa v >> shift lies in [HIST_SUB, 2 * HIST_SUB) */
	shift = hist_msb(v) - HIST_SUB_BITS;
	return (shift + 1u) * HIST_SUB + (uint32_t)((v >> shift) - HIST_SUB);
}

/* Lowest value of a bucket and its width. */
static void hist_bucket_range(uint32_t idx, uint64_t *lo, uint64_t *width)
{
	uint32_t range = idx / HIST_SUB;
	if (range == 0) {
		*lo = idx;
		*width = 1;
		return;
	}
	*width = (uint64_t)1 << (range - 1);
	*lo = ((uint64_t)HIST_SUB + idx % HIST_SUB) << (range - 1);
}

void hist_init(struct hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

void hist_add(struct hist *h, uint64_t v)
{
	h->bucket[hist_index(v)]++;
	h->count++;
	h->sum += v;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
	uint32_t i;
	for (i = 0; i < HIST_BUCKETS; i++)
		dst->bucket[i] += src->bucket[i];
	dst->count += src->count;
	dst->sum += src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
}

uint64_t hist_quantile(const struct hist *h, double q)
{
	uint64_t rank, seen = 0, lo, width, mid;
	uint32_t i;
	if (h->count == 0)
		return 0;
	if (q <= 0)
		return h->min;
	if (q >= 1)
		return h->max;
	/* rank of the sample: ceil(q * count), at least 1 */
	rank = (uint64_t)(q * (double)h->count);
	if ((double)rank < q * (double)h->count)
		rank++;
	if (rank == 0)
		rank = 1;
	for (i = 0; i < HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen >= rank)
			break;
	}
	hist_bucket_range(i, &lo, &width);
	mid = lo + (width - 1) / 2;
	if (mid < h->min)
		mid = h->min;
	if (mid > h->max)
		mid = h->max;
	return mid;
}

uint64_t hist_mean(const struct hist *h)
{
	return h->count ? h->sum / h->count : 0;
}
