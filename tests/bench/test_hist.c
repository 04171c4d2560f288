/* The latency histogram's stated error bound (bench/hist.h): every reported quantile
 * is within exact * 2^-(HIST_SUB_BITS + 1) of the sample of the same rank. */
#include "hist.h"

#include <stdlib.h>

#include "../common/check.h"

static struct hist h, h2;
static uint64_t v[200000];

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Deterministic xorshift so a failure reproduces. */
static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static const double qs[] = { 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999 };

/* Quantiles of v[0..n) from the histogram against the sorted samples. */
static void check_bound(uint32_t n)
{
	uint32_t i;
	hist_init(&h);
	for (i = 0; i < n; i++)
		hist_add(&h, v[i]);
	qsort(v, n, sizeof(v[0]), cmp_u64);
	for (i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		uint64_t rank = (uint64_t)(qs[i] * n), exact, got, diff;
		if ((double)rank < qs[i] * n)
			rank++;
		exact = v[(rank ? rank : 1) - 1];
		got = hist_quantile(&h, qs[i]);
		diff = got > exact ? got - exact : exact - got;
		/* diff <= exact / 2^(SUB_BITS+1), in integers */
		CHECK(diff <= (exact >> (HIST_SUB_BITS + 1)));
	}
	CHECK_EQ(hist_quantile(&h, 1.0), v[n - 1]);
	CHECK_EQ(h.max, v[n - 1]);
	CHECK_EQ(h.min, v[0]);
	CHECK_EQ(h.count, n);
}

static void test_hist_small_values_exact(void)
{
	uint64_t i;
	hist_init(&h);
	for (i = 0; i < HIST_SUB; i++)
		hist_add(&h, i);
	CHECK_EQ(hist_quantile(&h, 0.5), HIST_SUB / 2 - 1);
	CHECK_EQ(hist_quantile(&h, 0.01), 2);
	CHECK_EQ(hist_quantile(&h, 1.0), HIST_SUB - 1);
	CHECK_EQ(hist_mean(&h), (HIST_SUB - 1) / 2);
}

static void test_hist_bound_log_uniform(void)
{
	uint32_t i;
	for (i = 0; i < 200000; i++) /* 1 ns .. ~2^40 ns, every octave alike */
		v[i] = (next() >> (24 + next() % 40)) + 1;
	check_bound(200000);
}

static void test_hist_bound_latency_like(void)
{
	uint32_t i;
	for (i = 0; i < 100000; i++) /* 20-40 us body, a 1% tail to 10 ms */
		v[i] = 20000 + next() % 20000 + (next() % 100 == 0 ? next() % 10000000 : 0);
	check_bound(100000);
}

static void test_hist_bound_two_points_and_extremes(void)
{
	uint32_t i;
	for (i = 0; i < 1000; i++)
		v[i] = i % 2 ? UINT64_MAX - i : 1000 + i;
	check_bound(1000);
	hist_init(&h);
	CHECK_EQ(hist_quantile(&h, 0.5), 0); /* empty */
	hist_add(&h, UINT64_MAX);
	CHECK_EQ(hist_quantile(&h, 0.5), UINT64_MAX);
}

static void test_hist_merge_equals_one_histogram(void)
{
	uint32_t i, k;
	rng = 88172645463325252ull;
	hist_init(&h);
	hist_init(&h2);
	for (i = 0; i < 50000; i++)
		hist_add(i % 3 ? &h : &h2, (next() >> 40) + 1);
	hist_merge(&h, &h2);
	CHECK_EQ(h.count, 50000);
	rng = 88172645463325252ull;
	hist_init(&h2);
	for (i = 0; i < 50000; i++)
		hist_add(&h2, (next() >> 40) + 1);
	for (k = 0; k < sizeof(qs) / sizeof(qs[0]); k++)
		CHECK_EQ(hist_quantile(&h, qs[k]), hist_quantile(&h2, qs[k]));
	CHECK_EQ(h.sum, h2.sum);
}

int main(void)
{
	RUN(test_hist_small_values_exact);
	RUN(test_hist_bound_log_uniform);
	RUN(test_hist_bound_latency_like);
	RUN(test_hist_bound_two_points_and_extremes);
	RUN(test_hist_merge_equals_one_histogram);
	return check_summary();
}
