/*
 * ipkit-bench on the multi-core runtime (ipk_workers_start, include/ipkit/runtime.h):
 * -T N worker threads, each its own stack context, under the thread model --model
 * (unified, merge, split), with the same flow logic and output as the single loop.
 * TCP only (the runtime's application interface has no datagrams), and without -r
 * and --timeout (it gives the application no timer to resume a paced flow from).
 */
#ifndef IPKIT_BENCH_WORKERS_H
#define IPKIT_BENCH_WORKERS_H

#include "bench_opts.h"

/* Run the whole benchmark; returns the exit status (BENCH_EXIT_*). */
int bench_workers_run(const struct bench_opts *o);

#endif
