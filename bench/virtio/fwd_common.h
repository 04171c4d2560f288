/*
 * The measurement both forwarders share (ixy's experiment, issue 21): packets moved
 * A->B and B->A, TSC cycles of the calls that moved at least one packet ("busy"),
 * and TSC cycles of the whole run. Output: one line of key=value.
 *
 * On a shared, loaded machine the mean of busy cycles includes every preemption
 * that hit a busy call; the median over calls of (cycles / packets of the call),
 * med_cycles_per_pkt, is what a call costs when it runs undisturbed.
 */
#ifndef IPKIT_BENCH_FWD_COMMON_H
#define IPKIT_BENCH_FWD_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

#define FWD_SAMPLES (1u << 20)
struct fwd_meter {
	uint64_t pkts, drops, busy, t0_tsc, polls;
	double t0;
	float *cpp;        /* cycles per packet of each busy call (the first FWD_SAMPLES) */
	uint32_t ns;
};

static inline void fwd_sample(struct fwd_meter *m, uint64_t cycles, unsigned n)
{
	m->busy += cycles;
	if (m->cpp && m->ns < FWD_SAMPLES)
		m->cpp[m->ns++] = (float)cycles / (float)n;
}

static int fwd_cmp(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

static inline double fwd_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void fwd_start(struct fwd_meter *m)
{
	m->pkts = m->drops = m->busy = m->polls = 0;
	m->ns = 0;
	if (!m->cpp)
		m->cpp = (float *)malloc(sizeof(float) * FWD_SAMPLES);
	m->t0 = fwd_now();
	m->t0_tsc = __rdtsc();
}

static inline void fwd_print(struct fwd_meter *m, const char *drv, int batch)
{
	double secs = fwd_now() - m->t0;
	uint64_t tsc = __rdtsc() - m->t0_tsc;
	double hz = (double)tsc / secs, med = 0;

	if (m->ns) {
		qsort(m->cpp, m->ns, sizeof(float), fwd_cmp);
		med = m->cpp[m->ns / 2];
	}
	printf("driver=%s batch=%d secs=%.2f pkts=%llu drops=%llu mpps=%.3f med_cycles_per_pkt=%.1f "
	       "busy_cycles_per_pkt=%.1f all_cycles_per_pkt=%.1f tsc_mhz=%.0f\n", drv, batch, secs,
	       (unsigned long long)m->pkts, (unsigned long long)m->drops,
	       (double)m->pkts / secs / 1e6, med,
	       m->pkts ? (double)m->busy / (double)m->pkts : 0.0,
	       m->pkts ? (double)tsc / (double)m->pkts : 0.0, hz / 1e6);
	fflush(stdout);
}

#endif
