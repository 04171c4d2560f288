/*
 * io_pingpong: 1-byte TCP ping-pong client on an ipkit node, for benchmark runs of
 * ipkit against ipkit over any backend (e.g. DPDK memif, where no Linux socket can be
 * the client). Not a test: it prints figures.
 *
 *   io_pingpong [EAL args --] --io SPEC --ip A.B.C.D/N [-c CONNS] [-t SECONDS] HOST PORT
 *
 * Each connection sends one byte, waits for the echo, and sends the next. Prints
 *   requests/s p50_us p99_us
 * measured over the last SECONDS (after one warm-up second). Exit 1 when a connection
 * fails.
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
};

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

	(void)c;
	k->up = 1;
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
	if (now >= a->measure_from && a->nlat < PP_MAX_SAMPLES) {
		a->lat_ns[a->nlat++] = (uint32_t)(now - k->sent_at > 0xffffffffu ? 0xffffffffu :
		                                  now - k->sent_at);
		a->done++;
	}
	pp_send(ctx, k, now);
}

static void pp_closed(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
                      enum ipk_close_reason why, void *opaque)
{
	struct pp_app *a = (struct pp_app *)ipk_node_app(opaque);

	(void)ctx;
	(void)c;
	(void)user;
	(void)why;
	a->failed = 1;
}

static const struct ipk_ops pp_events = {
	.tcp_connected = pp_connected,
	.tcp_payload = pp_payload,
	.tcp_closed = pp_closed,
};

static int pp_cmp(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;

	return a < b ? -1 : a > b;
}

static int pp_usage(void)
{
	fprintf(stderr, "usage: io_pingpong [EAL args --] --io SPEC --ip A.B.C.D/N [-c CONNS] "
	        "[-t SECONDS] HOST PORT\n%s", app_common_help);
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
