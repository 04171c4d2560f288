/*
 * ipk_app_listen / ipk_app_udp_bind tell the caller what the core said (issue 14:
 * a port in use used to be a stderr line only). One worker on a memlink role a
 * listens on TCP 80 twice and binds UDP 7 twice from start: under UNIFIED the second
 * of each returns IPK_EADDRINUSE at once and the first gets bound(0); under MERGE and
 * SPLIT all four return 0 and four bound events bring 0, EADDRINUSE, 0, EADDRINUSE in
 * order. The rule checked in every model: each command's verdict arrives exactly once,
 * as its return value (a refusal) or as its bound event (after a 0).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#include <ipkit/runtime.h>

#define NCMD 4

/* Written on the worker's application thread, read by the test after
 * ipk_workers_stop (which joins it) or through the atomic count while it runs. */
static int rets[NCMD];
static int verdicts[NCMD], nverdicts;
static uint16_t ports[NCMD];
static int udps[NCMD];
static int started;

static void start(struct ipk_app *a, unsigned worker)
{
	(void)worker;
	rets[0] = ipk_app_listen(a, ipk_htons(80));
	rets[1] = ipk_app_listen(a, ipk_htons(80));
	rets[2] = ipk_app_udp_bind(a, ipk_htons(7));
	rets[3] = ipk_app_udp_bind(a, ipk_htons(7));
	__atomic_store_n(&started, 1, __ATOMIC_RELEASE);
}

static void bound(struct ipk_app *a, uint16_t port_be, int udp, int rc)
{
	int i = __atomic_load_n(&nverdicts, __ATOMIC_RELAXED);

	(void)a;
	if (i >= NCMD)
		return;
	verdicts[i] = rc;
	ports[i] = port_be;
	udps[i] = udp;
	__atomic_store_n(&nverdicts, i + 1, __ATOMIC_RELEASE);
}

static const struct ipk_app_ops ops = { .start = start, .bound = bound };

/* ipk_app_connect to an off-link peer with no gateway: closed with
 * IPK_CLOSE_UNREACH (ipk_tcp_connect's IPK_EHOSTUNREACH), the user pointer back. */
static int closed_why = -1;
static void *closed_user;

static void conn_start(struct ipk_app *a, unsigned worker)
{
	(void)worker;
	CHECK_EQ(ipk_app_connect(a, IPK_IP4(192, 168, 50, 1), ipk_htons(80), &closed_why), 0);
}

static void conn_closed(struct ipk_app *a, uint64_t cid, void *user, enum ipk_close_reason why)
{
	(void)a;
	(void)cid;
	closed_user = user;
	__atomic_store_n(&closed_why, (int)why, __ATOMIC_RELEASE);
}

static const struct ipk_app_ops conn_ops = { .start = conn_start, .closed = conn_closed };

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void run_model(int model, const char *name)
{
	static const int want[NCMD] = {0, IPK_EADDRINUSE, 0, IPK_EADDRINUSE};
	struct ipk_workers_cfg wc;
	struct ipk_workers *ws;
	char err[256], spec[128];
	int refused = 0, i, j;
	uint64_t deadline;

	memset(rets, 0x55, sizeof(rets));
	nverdicts = 0;
	started = 0;
	snprintf(spec, sizeof(spec), "memlink:ipkwb%d%s,role=a", (int)getpid(), name);
	ipk_workers_cfg_default(&wc);
	wc.node.io_spec = spec;
	wc.node.ip4_be = IPK_IP4(10, 9, 1, 1);
	wc.nworkers = 1;
	wc.model = model;
	wc.app = &ops;
	ws = ipk_workers_start(&wc, err, sizeof(err));
	if (!ws)
		fprintf(stderr, "workers: %s\n", err);
	CHECK(ws != NULL);
	if (!ws)
		return;
	deadline = now_ms() + 5000;
	while (!__atomic_load_n(&started, __ATOMIC_ACQUIRE) && now_ms() < deadline)
		usleep(1000);
	CHECK(started);
	for (i = 0; i < NCMD; i++)
		refused += rets[i] < 0;
	while (__atomic_load_n(&nverdicts, __ATOMIC_ACQUIRE) < NCMD - refused &&
	       now_ms() < deadline)
		usleep(1000);
	usleep(20000); /* no extra event may follow */
	ipk_workers_stop(ws);
	CHECK_EQ(nverdicts, NCMD - refused);
	for (i = 0, j = 0; i < NCMD; i++) {
		int v = rets[i];

		if (v == 0 && j < nverdicts) {
			v = verdicts[j];
			CHECK_EQ(ports[j], ipk_htons(i < 2 ? 80 : 7));
			CHECK_EQ(udps[j], i >= 2);
			j++;
		}
		CHECK_EQ(v, want[i]);
	}
	if (model == IPK_MODEL_UNIFIED)
		CHECK_EQ(refused, 2); /* on the node's thread: at once */
	else
		CHECK_EQ(refused, 0);
	ipk_workers_destroy(ws);
}

static void run_connect(int model, const char *name)
{
	struct ipk_workers_cfg wc;
	struct ipk_workers *ws;
	char err[256], spec[128];
	uint64_t deadline;

	closed_why = -1;
	closed_user = NULL;
	snprintf(spec, sizeof(spec), "memlink:ipkwc%d%s,role=a", (int)getpid(), name);
	ipk_workers_cfg_default(&wc);
	wc.node.io_spec = spec;
	wc.node.ip4_be = IPK_IP4(10, 9, 1, 1); /* /24, no gateway */
	wc.nworkers = 1;
	wc.model = model;
	wc.app = &conn_ops;
	ws = ipk_workers_start(&wc, err, sizeof(err));
	CHECK(ws != NULL);
	if (!ws)
		return;
	deadline = now_ms() + 5000;
	while (__atomic_load_n(&closed_why, __ATOMIC_ACQUIRE) < 0 && now_ms() < deadline)
		usleep(1000);
	ipk_workers_stop(ws);
	CHECK_EQ(closed_why, IPK_CLOSE_UNREACH);
	CHECK(closed_user == &closed_why);
	ipk_workers_destroy(ws);
}

static void test_connect_no_route_unified(void) { run_connect(IPK_MODEL_UNIFIED, "u"); }
static void test_connect_no_route_merge(void) { run_connect(IPK_MODEL_MERGE, "m"); }

static void test_bind_unified(void) { run_model(IPK_MODEL_UNIFIED, "u"); }
static void test_bind_merge(void) { run_model(IPK_MODEL_MERGE, "m"); }
static void test_bind_split(void) { run_model(IPK_MODEL_SPLIT, "s"); }

int main(void)
{
	RUN(test_bind_unified);
	RUN(test_bind_merge);
	RUN(test_bind_split);
	RUN(test_connect_no_route_unified);
	RUN(test_connect_no_route_merge);
	return check_summary();
}
