/*
 * ipk_workers_cfg.run (the hook ipkitd --workers N runs on): the caller's loop on
 * each worker's thread instead of a message model. Two workers on a memlink, with
 * software steering (one reader thread) and with queue steering (queues=2):
 *   - run is called exactly once per worker, with its index and run_arg;
 *   - worker i's node carries node_apps[i] as its app (ipk_node_app) and the
 *     caller's core_tweak gets node_apps[i] too (the workers' own RSS tweak runs
 *     after it, with the worker);
 *   - a run loop sleeping on its node's fd (after ipk_io_arm) is woken by
 *     ipk_workers_stop, which returns well before the loop's 2 s sleep would end;
 *   - ipk_workers_stopping is 0 while running, 1 once stopping (and for NULL).
 */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#include <ipkit/runtime.h>

#define NW 2

static int app_tag[NW];             /* node_apps[i] = &app_tag[i] */
static void *tweak_seen[NW];        /* core_tweak's app argument, by call order */
static int ntweaks;
static unsigned runs[NW];           /* run calls per worker index */
static void *run_args[NW];
static int stopping_seen_running[NW];

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ipk_workers_start creates the nodes one after the other on the calling thread */
static void tweak(struct ipk_config *c, void *app)
{
	(void)c;
	if (ntweaks < NW)
		tweak_seen[ntweaks] = app;
	ntweaks++;
}

static void run(struct ipk_workers *ws, unsigned idx, void *arg)
{
	struct ipk_node *n = ipk_workers_node(ws, idx);
	if (idx >= NW)
		return;
	__atomic_add_fetch(&runs[idx], 1, __ATOMIC_RELAXED);
	run_args[idx] = arg;
	stopping_seen_running[idx] = ipk_workers_stopping(ws);
	while (!ipk_workers_stopping(ws)) {
		struct pollfd p;
		ipk_node_poll(n, 0);
		if (ipk_io_arm(ipk_node_io(n)) > 0)
			continue;
		p.fd = ipk_io_fd(ipk_node_io(n));
		p.events = POLLIN;
		poll(&p, 1, 2000); /* the stop request must wake this */
	}
}

static void run_one(int steer, const char *spec)
{
	struct ipk_workers_cfg wc;
	struct ipk_workers *ws;
	void *apps[NW];
	char err[256];
	uint64_t t0;
	int i;

	memset(runs, 0, sizeof runs);
	memset(tweak_seen, 0, sizeof tweak_seen);
	ntweaks = 0;
	ipk_workers_cfg_default(&wc);
	wc.node.io_spec = spec;
	wc.node.ip4_be = IPK_IP4(10, 9, 2, 1);
	wc.node.core_tweak = tweak;
	wc.nworkers = NW;
	wc.steer = steer;
	for (i = 0; i < NW; i++)
		apps[i] = &app_tag[i];
	wc.node_apps = apps;
	wc.run = run;
	wc.run_arg = &ntweaks;
	ws = ipk_workers_start(&wc, err, sizeof err);
	if (!ws)
		fprintf(stderr, "workers: %s\n", err);
	CHECK(ws != NULL);
	if (!ws)
		return;
	t0 = now_ms() + 5000;
	while ((__atomic_load_n(&runs[0], __ATOMIC_RELAXED) == 0 ||
	        __atomic_load_n(&runs[1], __ATOMIC_RELAXED) == 0) && now_ms() < t0)
		usleep(1000);
	usleep(50000); /* every run loop asleep in poll by now (or soon) */
	CHECK_EQ(ipk_workers_stopping(ws), 0);
	for (i = 0; i < NW; i++)
		CHECK(ipk_node_app(ipk_workers_node(ws, i)) == &app_tag[i]);
	t0 = now_ms();
	ipk_workers_stop(ws);
	CHECK(now_ms() - t0 < 1000); /* woken, not the 2 s poll timeout */
	CHECK_EQ(ipk_workers_stopping(ws), 1);
	for (i = 0; i < NW; i++) {
		CHECK_EQ(runs[i], 1u);
		CHECK(run_args[i] == &ntweaks);
		CHECK_EQ(stopping_seen_running[i], 0);
		CHECK(tweak_seen[i] == &app_tag[i]);
	}
	CHECK_EQ(ntweaks, NW);
	ipk_workers_destroy(ws);
}

static void test_workers_run_soft_steering(void)
{
	char spec[128];
	snprintf(spec, sizeof spec, "memlink:ipkwr%ds,role=a", (int)getpid());
	run_one(IPK_STEER_SOFT, spec);
}

static void test_workers_run_queue_steering(void)
{
	char spec[128];
	snprintf(spec, sizeof spec, "memlink:ipkwr%dq,role=a,queues=2", (int)getpid());
	run_one(IPK_STEER_QUEUES, spec);
}

static void test_workers_stopping_null(void)
{
	CHECK_EQ(ipk_workers_stopping(NULL), 1);
}

int main(void)
{
	RUN(test_workers_run_soft_steering);
	RUN(test_workers_run_queue_steering);
	RUN(test_workers_stopping_null);
	return check_summary();
}
