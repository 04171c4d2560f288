/*
 * io_pingpong: 1-byte TCP ping-pong client on an ipkit node, for benchmark runs of
 * ipkit against ipkit over any backend (e.g. DPDK memif, where no Linux socket can be
 * the client). Not a test: it prints figures.
 *
 *   io_pingpong [EAL args --] --io SPEC --ip A.B.C.D/N [-c CONNS] [-t SECONDS] HOST PORT
 *   io_pingpong [EAL args --] --io SPEC --ip A.B.C.D/N --bulk BYTES HOST PORT
 *
 * Ping-pong: each connection sends one byte, waits for the echo, and sends the next.
 * Prints "requests/s p50_us p99_us" measured over the last SECONDS (after one warm-up
 * second). Bulk: one connection sends BYTES; prints "Gbit/s" from the connection's
 * establishment to the acknowledgment of the last byte (the receiver's stack has it
 * all), so process and EAL start-up are not in it. Exit 1 when a connection fails.
 */
#include "app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PP_MAX_CONNS 256
#define PP_MAX_SAMPLES (1u << 22)

struct pp_conn {
	struct ipk_conn *c;
	uint64_t sent_at;
	int up;
};

struct pp_app {
	struct pp_conn conn[PP_MAX_CONNS];
	int nconns, failed;
	uint64_t measure_from, done;
	uint32_t *lat_ns; /* samples while measuring */
	uint32_t nlat;
	uint64_t bulk, bulk_sent, bulk_acked, t_up, t_done; /* bulk mode */
	int closed_ok;
};

static uint8_t pp_chunk[65536];

/* Bulk: keep the send buffer full until everything is queued. */
static void pp_bulk_pump(struct ipk_node *n, struct pp_app *a)
{
	struct pp_conn *k = &a->conn[0];
	int rounds;

	if (!k->up || a->bulk_sent == a->bulk)
		return;
	for (rounds = 0; rounds < 64 && a->bulk_sent < a->bulk; rounds++) {
		uint64_t left = a->bulk - a->bulk_sent;
		int w = ipk_tcp_write(ipk_node_ctx(n), k->c, pp_chunk,
		                      left < sizeof(pp_chunk) ? (uint32_t)left : sizeof(pp_chunk),
		                      ipk_node_now(n));
		if (w <= 0)
			break;
		a->bulk_sent += (uint64_t)w;
	}
}

static void pp_send(struct ipk_ctx *ctx, struct pp_conn *k, uint64_t now)
{
	static const uint8_t b = 'x';

	k->sent_at = now;
	if (ipk_tcp_write(ctx, k->c, &b, 1, now) != 1)
		k->sent_at = 0; /* no room for 1 byte: cannot happen with one in flight */
}

static void pp_connected(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *opaque)
{
	struct pp_conn *k = (struct pp_conn *)user;

	struct pp_app *a = (struct pp_app *)ipk_node_app(opaque);

	(void)c;
	k->up = 1;
	if (a->bulk) {
		a->t_up = ipk_node_now(ipk_node_from(opaque));
		return;
	}
	pp_send(ctx, k, ipk_node_now(ipk_node_from(opaque)));
}

static void pp_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                       uint32_t off, uint32_t len, void *opaque)
{
	struct pp_app *a = (struct pp_app *)ipk_node_app(opaque);
	struct pp_conn *k = (struct pp_conn *)user;
	uint64_t now = ipk_node_now(ipk_node_from(opaque));

	(void)off;
	if (!pkt || !k)
		return;
	ipk_tcp_recved(ctx, c, len, now);
	if (a->bulk)
		return;
	if (now >= a->measure_from && a->nlat < PP_MAX_SAMPLES) {
		a->lat_ns[a->nlat++] = (uint32_t)(now - k->sent_at > 0xffffffffu ? 0xffffffffu :
		                                  now - k->sent_at);
		a->done++;
	}
	pp_send(ctx, k, now);
}

static void pp_acked(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, uint32_t bytes,
                     void *opaque)
{
	struct pp_app *a = (struct pp_app *)ipk_node_app(opaque);

	(void)ctx;
	(void)c;
	(void)user;
	a->bulk_acked += bytes;
	if (a->bulk && a->bulk_acked >= a->bulk && !a->closed_ok) {
		a->closed_ok = 1;
		a->t_done = ipk_node_now(ipk_node_from(opaque));
	}
}

static void pp_closed(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
                      enum ipk_close_reason why, void *opaque)
{
	struct pp_app *a = (struct pp_app *)ipk_node_app(opaque);

	(void)ctx;
	(void)c;
	(void)user;
	if (a->bulk && (a->closed_ok || why == IPK_CLOSE_NORMAL))
		return;
	(void)why;
	a->failed = 1;
}

static const struct ipk_ops pp_events = {
	.tcp_connected = pp_connected,
	.tcp_payload = pp_payload,
	.tcp_acked = pp_acked,
	.tcp_closed = pp_closed,
};

static int pp_cmp(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;

	return a < b ? -1 : a > b;
}

/* Bulk mode main loop, bounded by 120 s. */
static int pp_bulk_run(struct ipk_node *n, struct pp_app *a, volatile int *stop)
{
	uint64_t t_end = ipk_node_now(n) + 120000000000ull;
	int rc = APP_EXIT_OK;

	if (a->nconns != 1)
		a->failed = 1;
	while (!*stop && !a->failed && !a->closed_ok && ipk_node_now(n) < t_end) {
		pp_bulk_pump(n, a);
		ipk_node_poll(n, 1);
	}
	if (!a->closed_ok || a->t_done <= a->t_up) {
		fprintf(stderr, "io_pingpong: bulk transfer failed (sent %llu of %llu)\n",
		        (unsigned long long)a->bulk_sent, (unsigned long long)a->bulk);
		rc = APP_EXIT_FAIL;
	} else {
		printf("%.2f\n", (double)a->bulk * 8.0 / (double)(a->t_done - a->t_up));
	}
	ipk_node_destroy(n);
	free(a->lat_ns);
	return rc;
}

static int pp_usage(void)
{
	fprintf(stderr, "usage: io_pingpong [EAL args --] --io SPEC --ip A.B.C.D/N [-c CONNS] "
	        "[-t SECONDS] [--bulk BYTES] HOST PORT\n%s", app_common_help);
	return APP_EXIT_USAGE;
}

int main(int argc, char **argv)
{
	static struct pp_app a;
	struct app_opts o;
	const char *host = NULL, *port = NULL, *v;
	uint32_t peer_be = 0;
	uint64_t secs = 3, t_end;
	struct ipk_node *n;
	volatile int *stop;
	int i, r;

	app_opts_default(&o);
	a.nconns = 1;
	for (i = 1; i < argc; i++) {
		if ((r = app_opt(&o, argc, argv, &i)) != 0) {
			if (r < 0)
				return APP_EXIT_USAGE;
		} else if ((r = app_arg("-c", argc, argv, &i, &v)) != 0) {
			a.nconns = r > 0 ? atoi(v) : 0;
		} else if ((r = app_arg("--bulk", argc, argv, &i, &v)) != 0) {
			if (r < 0 || app_parse_size(v, &a.bulk) < 0 || a.bulk == 0)
				return pp_usage();
		} else if ((r = app_arg("-t", argc, argv, &i, &v)) != 0) {
			if (r < 0 || app_parse_size(v, &secs) < 0)
				return pp_usage();
		} else if (argv[i][0] == '-') {
			return pp_usage();
		} else if (!host) {
			host = argv[i];
		} else {
			port = argv[i];
		}
	}
	if (!host || !port || a.nconns < 1 || a.nconns > PP_MAX_CONNS || secs == 0 ||
	    app_parse_ip4(host, &peer_be, NULL) < 0)
		return pp_usage();
	a.lat_ns = (uint32_t *)malloc(PP_MAX_SAMPLES * sizeof(uint32_t));
	if (!a.lat_ns)
		return APP_EXIT_SETUP;
	stop = app_stop_flag();
	n = app_node(&o, &pp_events, &a, NULL);
	for (i = 0; i < a.nconns; i++)
		if (ipk_tcp_connect(ipk_node_ctx(n), peer_be, ipk_htons((uint16_t)atoi(port)), 0,
		                    &a.conn[i], &a.conn[i].c, ipk_node_now(n)) < 0)
			a.failed = 1;
	if (a.bulk)
		return pp_bulk_run(n, &a, stop);
	a.measure_from = ipk_node_now(n) + 1000000000ull;
	t_end = a.measure_from + secs * 1000000000ull;
	while (!*stop && !a.failed && ipk_node_now(n) < t_end)
		ipk_node_poll(n, 1);
	if (a.failed || a.nlat == 0) {
		fprintf(stderr, "io_pingpong: a connection failed or nothing was echoed\n");
		ipk_node_destroy(n);
		return APP_EXIT_FAIL;
	}
	qsort(a.lat_ns, a.nlat, sizeof(a.lat_ns[0]), pp_cmp);
	printf("%.0f %.0f %.0f\n", (double)a.done / (double)secs,
	       a.lat_ns[a.nlat / 2] / 1000.0, a.lat_ns[(uint64_t)a.nlat * 99 / 100] / 1000.0);
	ipk_node_destroy(n);
	free(a.lat_ns);
	return 0;
}
