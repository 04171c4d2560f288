/*
 * Counters, per-second lines and the final summary of ipkit-bench and its twin, as
 * text or (--json) one JSON object per line with the same fields:
 *
 *   {"type":"second","prog":...,"role":"client","t":3,"requests":..,"req_per_s":..,
 *    "rx_gbps":..,"tx_gbps":..,"conns":..,"errors":..}
 *   {"type":"summary",...,"seconds":..,"requests":..,"req_per_s":..,"rx_gbps":..,
 *    "tx_gbps":..,"lat_us":{"p50":..,"p90":..,"p99":..,"p999":..,"max":..,"mean":..},
 *    "mismatches":..,"closes":..,"timeouts":..,"connect_fails":..,"errors":..}
 */
#ifndef IPKIT_BENCH_REPORT_H
#define IPKIT_BENCH_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "bench_opts.h"
#include "hist.h"

struct bench_counters {
	uint64_t requests;      /* client: answered (ping-pong) or sent (burst); server: received */
	uint64_t rx_bytes, tx_bytes; /* payload bytes */
	uint64_t mismatches;    /* echoed bytes that differ from what was sent */
	uint64_t closes;        /* connections the peer closed or reset during the run */
	uint64_t timeouts;      /* requests unanswered for --timeout */
	uint64_t connect_fails; /* connections that never opened */
	uint64_t conns;         /* open now (a gauge, not summed over time) */
};

/* Fold b into a (conns too: threads' gauges add up). */
void bench_counters_add(struct bench_counters *a, const struct bench_counters *b);
uint64_t bench_errors(const struct bench_counters *c);
/* Threads: a worker publishes its counters (relaxed atomic stores, field by field) and
 * the printing thread adds up what was published; a line may mix two instants of one
 * worker, which is fine for a per-second rate. */
void bench_counters_publish(struct bench_counters *pub, const struct bench_counters *c);
void bench_counters_add_published(struct bench_counters *sum, const struct bench_counters *pub);

struct bench_report {
	const struct bench_opts *o;
	FILE *out;
	uint64_t start_ns, last_ns;
	struct bench_counters last;
	uint32_t second;
};

void bench_report_start(struct bench_report *r, const struct bench_opts *o, FILE *out,
                        uint64_t now_ns);
/* Nanoseconds until the next per-second line is due (0 = now). */
uint64_t bench_report_due_in(const struct bench_report *r, uint64_t now_ns);
/* Print the per-second line when one is due; returns 1 when printed. */
int bench_report_tick(struct bench_report *r, const struct bench_counters *c, uint64_t now_ns);
/* Final summary; lat may be NULL or empty (burst mode, servers). */
void bench_report_summary(struct bench_report *r, const struct bench_counters *c,
                          const struct hist *lat, uint64_t now_ns);
/* BENCH_EXIT_OK, or BENCH_EXIT_FAIL for a client with errors or no request done. */
int bench_exit_status(const struct bench_opts *o, const struct bench_counters *c);

#endif
