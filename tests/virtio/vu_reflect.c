/*
 * A driver-side probe for the hostile-device test: opens an io spec (virtio:...),
 * sends every received frame straight back, and on SIGTERM/SIGINT (or after
 * --seconds, default 60) prints its counters as key=value lines:
 *   reflected=N rx_bad_id=N rx_bad_len=N rx_used_ahead=N tx_bad_id=N tx_used_ahead=N
 *   short_frame=N bad_mrg=N too_big=N rx_drops=N
 * Usage: vu_reflect SPEC [SECONDS]
 */
#include "io_internal.h"
#include "virtio.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile sig_atomic_t stop;
static void on_sig(int s) { (void)s; stop = 1; }

int main(int argc, char **argv)
{
	struct ipk_vq_stats rq, tq;
	struct ipk_virtio_drops dr;
	struct ipk_io_stats st;
	struct ipk_pool *pool;
	struct ipk_io *io;
	struct ipk_pkt *pk[32];
	unsigned long long reflected = 0;
	char err[256];
	time_t end;

	if (argc < 2) {
		fprintf(stderr, "usage: vu_reflect SPEC [SECONDS]\n");
		return 2;
	}
	end = time(NULL) + (argc > 2 ? atoi(argv[2]) : 60);
	signal(SIGTERM, on_sig);
	signal(SIGINT, on_sig);
	pool = ipk_pool_create(NULL, err, sizeof err);
	if (!pool || !(io = ipk_io_open(argv[1], pool, err, sizeof err))) {
		fprintf(stderr, "vu_reflect: %s\n", err);
		return 1;
	}
	fprintf(stderr, "vu_reflect: open\n");
	while (!stop && time(NULL) < end) {
		int n = ipk_io_rx_burst(io, pk, 32), t = 0, i;

		while (t < n) {
			int k = ipk_io_tx_burst(io, pk + t, n - t);

			ipk_io_flush(io);
			if (k <= 0)
				break;
			t += k;
		}
		for (i = t; i < n; i++)
			ipk_pkt_free_chain(pk[i]);
		reflected += (unsigned long long)t;
		if (n == 0) {
			struct timespec ts = { 0, 200000 };
			nanosleep(&ts, NULL);
		}
	}
	ipk_io_stats(io, &st);
	if (ipk_io_virtio_counters(io, &rq, &tq, &dr) < 0) {
		fprintf(stderr, "vu_reflect: not a virtio backend\n");
		return 1;
	}
	printf("reflected=%llu\nrx_bad_id=%llu\nrx_bad_len=%llu\nrx_used_ahead=%llu\n"
	       "tx_bad_id=%llu\ntx_used_ahead=%llu\nshort_frame=%llu\nbad_mrg=%llu\n"
	       "too_big=%llu\nrx_drops=%llu\n", reflected,
	       (unsigned long long)rq.bad_id, (unsigned long long)rq.bad_len,
	       (unsigned long long)rq.used_ahead, (unsigned long long)tq.bad_id,
	       (unsigned long long)tq.used_ahead, (unsigned long long)dr.short_frame,
	       (unsigned long long)dr.bad_mrg, (unsigned long long)dr.too_big,
	       (unsigned long long)st.rx_drops);
	ipk_io_close(io);
	ipk_pool_destroy(pool);
	return 0;
}
