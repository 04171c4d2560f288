/*
 * The split virtqueue (io/virtio/virtq.c) against a device that writes anything:
 * the input is a script of device writes (used entries with any id and length, used
 * indices anywhere, scribbles over the descriptor table) interleaved with the
 * driver's own steps (harvest, refill, transmit, reclaim). After every step no buffer
 * and no descriptor may be lost or doubled: free + posted == total, for the pool and
 * for each queue's descriptors; at the end every buffer is back in the pool.
 */
#include "fuzz.h"
#include "fz_host.h"
#include "virtq.h"

#include <stdlib.h>
#include <string.h>

#define QN 8u
#define NBUFS 32u
#define AREA (64u * 1024)

static uint8_t area[AREA] __attribute__((aligned(16384)));
static size_t area_used;

static void *f_alloc(void *ctx, size_t size, size_t align)
{
	size_t at = (area_used + align - 1) & ~(align - 1);

	(void)ctx;
	if (at + size > AREA)
		return NULL;
	area_used = at + size;
	memset(area + at, 0, size);
	return area + at;
}
static uint64_t f_dev(void *ctx, const void *v) { (void)ctx; return (uint64_t)(uintptr_t)v; }
static int f_notify(void *ctx, uint16_t q) { (void)ctx; (void)q; return 0; }

/* Buffers and descriptors a queue holds, from its private records. */
static uint32_t posted_bufs(const struct ipk_vq *vq)
{
	uint32_t i, n = 0;

	for (i = 0; i < vq->size; i++)
		if (vq->slot[i].busy)
			n += vq->slot[i].nseg;
	return n;
}

static void check(const struct ipk_vq_pool *mp, const struct ipk_vq *rx, const struct ipk_vq *tx)
{
	uint32_t prx = posted_bufs(rx), ptx = posted_bufs(tx);

	if (mp->top + prx + ptx != NBUFS || rx->nfree + prx != rx->size ||
	    tx->nfree + ptx != tx->size)
		abort();
}

static void used_put(struct ipk_vq *vq, uint16_t *dev_idx, uint32_t id, uint32_t len)
{
	uint8_t *e = vq->used + 4 + 8 * (*dev_idx & vq->mask);

	memcpy(e, &id, 4);
	memcpy(e + 4, &len, 4);
	(*dev_idx)++;
	memcpy(vq->used + 2, dev_idx, 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	struct ipk_vq_ops ops = { f_alloc, f_dev, f_notify, NULL };
	struct ipk_vq_pool mp;
	struct ipk_vq rx, tx;
	struct ipk_vq_rx got[QN];
	uint16_t rx_dev = 0, tx_dev = 0;
	size_t i = 0;

	area_used = 0;
	if (ipk_vq_pool_init(&mp, &ops, NBUFS, 256) < 0)
		return 0;
	if (ipk_vq_init(&rx, 0, QN, &ops, &mp, 1) < 0 || ipk_vq_init(&tx, 1, QN, &ops, &mp, 0) < 0)
		abort();
	ipk_vq_refill(&rx, QN);
	while (i + 4 <= n) {
		uint8_t op = d[i] & 7, a = d[i + 1];
		uint16_t b = (uint16_t)(d[i + 2] | d[i + 3] << 8);
		int k, j;

		i += 4;
		switch (op) {
		case 0: used_put(&rx, &rx_dev, a, b); break;          /* any id, any length */
		case 1: rx_dev = b; memcpy(rx.used + 2, &b, 2); break; /* any used index */
		case 2:
			k = ipk_vq_rx_harvest(&rx, got, 1 + a % QN);
			for (j = 0; j < k; j++) {
				if (got[j].len > mp.buf_size)
					abort();
				ipk_vq_pool_free_bulk(&mp, &got[j].buf, 1);
			}
			ipk_vq_refill(&rx, QN);
			break;
		case 3: {
			uint32_t bufs[4], lens[4], nseg = 1u + a % 4u, m;

			m = ipk_vq_pool_alloc_bulk(&mp, bufs, nseg);
			for (j = 0; j < (int)m; j++)
				lens[j] = b % (mp.buf_size + 1);
			if (m < nseg || ipk_vq_add(&tx, bufs, lens, (uint16_t)nseg) < 0)
				ipk_vq_pool_free_bulk(&mp, bufs, m);
			ipk_vq_publish(&tx);
			(void)ipk_vq_kick(&tx);
			break;
		}
		case 4: used_put(&tx, &tx_dev, a, b); break;
		case 5: tx_dev = b; memcpy(tx.used + 2, &b, 2); break;
		case 6: (void)ipk_vq_tx_reclaim(&tx); break;
		case 7: /* scribble over a descriptor: the driver never reads them back */
			((uint8_t *)rx.desc)[(a * 2u) % (16u * QN)] = (uint8_t)b;
			((uint8_t *)tx.desc)[(a * 3u) % (16u * QN)] = (uint8_t)(b >> 8);
			break;
		}
		check(&mp, &rx, &tx);
	}
	ipk_vq_fini(&rx);
	ipk_vq_fini(&tx);
	if (mp.top != NBUFS)
		abort();
	ipk_vq_pool_fini(&mp);
	return 0;
}

int fuzz_make_corpus(const char *dir)
{
	/* a device that completes rx entries, a transmit and its completion, and one
	 * that runs its index ahead, then a bad id and a long length */
	static const uint8_t good[] = { 0, 0, 100, 0, 0, 1, 60, 0, 2, 7, 0, 0,
	                                3, 1, 200, 0, 4, 0, 0, 0, 6, 0, 0, 0 };
	static const uint8_t bad[] = { 1, 0, 0xe8, 3, 2, 7, 0, 0, 0, 99, 5, 0,
	                               0, 3, 0, 9, 2, 7, 0, 0, 7, 5, 0xff, 0xff, 5, 0, 9, 0 };
	return fz_put_file(dir, "good", good, sizeof(good)) +
	       fz_put_file(dir, "bad", bad, sizeof(bad));
}
