/*
 * ixy's forwarder on ipkit's virtio driver (raw batch API, no copy): two vhost-user
 * devices sharing one memory domain and one buffer pool; what arrives on one is sent
 * on the other, in batches of BATCH.
 *
 *   ipkit-virtio-fwd SOCK_A SOCK_B BATCH SECONDS
 *
 * The clock starts at the first received packet; prints one fwd_common.h line.
 */
#include "fwd_common.h"
#include "virtio.h"

#include <stdlib.h>
#include <string.h>

#define MAXB 256

static void *mem_alloc(void *ctx, size_t size, size_t align)
{
	return ipk_vu_mem_alloc((struct ipk_vu_mem *)ctx, size, align);
}
static uint64_t mem_dev(void *ctx, const void *v) { (void)ctx; return (uint64_t)(uintptr_t)v; }
static int no_notify(void *ctx, uint16_t q) { (void)ctx; (void)q; return 0; }

/* One direction: returns packets received. */
static int fwd_step(struct ipk_virtio *src, struct ipk_virtio *dst, int batch,
                    struct fwd_meter *m)
{
	struct ipk_vq_rx rx[MAXB];
	uint32_t bufs[MAXB], lens[MAXB];
	uint64_t t = __rdtsc();
	int n = ipk_virtio_rx_batch(src, rx, batch), k, i;

	if (n == 0)
		return 0;
	for (i = 0; i < n; i++) {
		/* a transmit header says nothing: no checksum or GSO request */
		memset(ipk_vq_pool_buf(src->pool, rx[i].buf), 0, src->hdr_len);
		bufs[i] = rx[i].buf;
		lens[i] = rx[i].len;
	}
	k = ipk_virtio_tx_batch(dst, bufs, lens, n);
	if (k < n)
		ipk_vq_pool_free_bulk(src->pool, bufs + k, (uint32_t)(n - k));
	m->pkts += (uint64_t)k;
	m->drops += (uint64_t)(n - k);
	fwd_sample(m, __rdtsc() - t, (unsigned)n);
	return n;
}

int main(int argc, char **argv)
{
	struct ipk_virtio_opts o;
	struct ipk_virtio a, b;
	struct ipk_vq_pool pool;
	struct ipk_vu_mem *mem;
	struct ipk_vq_ops ops;
	struct fwd_meter m = { 0 };
	char err[256], dev[160];
	int batch, started = 0;
	double secs, end = 0;

	if (argc != 5) {
		fprintf(stderr, "usage: ipkit-virtio-fwd SOCK_A SOCK_B BATCH SECONDS\n");
		return 2;
	}
	batch = atoi(argv[3]);
	secs = atof(argv[4]);
	if (batch < 1 || batch > MAXB || secs <= 0) {
		fprintf(stderr, "ipkit-virtio-fwd: BATCH 1..%d, SECONDS > 0\n", MAXB);
		return 2;
	}
	ipk_virtio_opts_default(&o);
	o.csum = o.tso = o.mrg = 0;   /* small frames, nothing to offload */
	o.event = 0;                  /* poll mode, as ixy */
	o.nbufs = 4096;
	mem = ipk_vu_mem_create(2 * ipk_virtio_mem_bytes(&o), err, sizeof err);
	if (!mem) {
		fprintf(stderr, "ipkit-virtio-fwd: %s\n", err);
		return 1;
	}
	ops.alloc = mem_alloc;
	ops.dev_addr = mem_dev;
	ops.notify = no_notify;
	ops.ctx = mem;
	if (ipk_vq_pool_init(&pool, &ops, o.nbufs, 2048) < 0) {
		fprintf(stderr, "ipkit-virtio-fwd: pool\n");
		return 1;
	}
	o.pool = &pool;
	snprintf(dev, sizeof dev, "vhost-user=%s", argv[1]);
	if (ipk_virtio_open(&a, dev, mem, &o, err, sizeof err) < 0) {
		fprintf(stderr, "ipkit-virtio-fwd: %s\n", err);
		return 1;
	}
	snprintf(dev, sizeof dev, "vhost-user=%s", argv[2]);
	if (ipk_virtio_open(&b, dev, mem, &o, err, sizeof err) < 0) {
		fprintf(stderr, "ipkit-virtio-fwd: %s\n", err);
		return 1;
	}
	fwd_start(&m);
	end = fwd_now() + 30; /* bound the wait for the first packet */
	for (;;) {
		int got = fwd_step(&a, &b, batch, &m) + fwd_step(&b, &a, batch, &m);

		if (!started && got) {
			started = 1;
			fwd_start(&m);
			end = m.t0 + secs;
		}
		if ((++m.polls & 1023) == 0 && fwd_now() >= end)
			break;
	}
	if (!started)
		fprintf(stderr, "ipkit-virtio-fwd: no packet in 30 s\n");
	else
		fwd_print(&m, "ipkit", batch);
	ipk_virtio_stop(&a);
	ipk_virtio_stop(&b);
	ipk_vq_pool_fini(&pool);
	ipk_vu_mem_put(mem);
	return started ? 0 : 1;
}
