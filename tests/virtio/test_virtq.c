/*
 * The split ring against a device played by the test itself, in the same memory:
 * buffers travel both ways and come back to the pool, and a device that writes bad
 * ids, lengths past the buffer or a used index running ahead is dropped and counted,
 * never trusted (issue 21).
 */
#include "check.h"
#include "virtq.h"

#include <endian.h>
#include <errno.h>

#include <stdlib.h>
#include <string.h>

/* Transport: plain heap memory, device address = virtual address + a fixed offset
 * (so a test sees the ring translates), notifications counted. */
#define DEV_OFF 0x100000000ull
struct fake { int notifies; void *blocks[8]; int nblocks; };

static void *f_alloc(void *ctx, size_t size, size_t align)
{
	struct fake *f = (struct fake *)ctx;
	void *p = NULL;

	if (f->nblocks == 8 || posix_memalign(&p, align < 64 ? 64 : align, size) != 0)
		return NULL;
	memset(p, 0, size);
	f->blocks[f->nblocks++] = p;
	return p;
}
static uint64_t f_dev(void *ctx, const void *v) { (void)ctx; return (uint64_t)(uintptr_t)v + DEV_OFF; }
static int f_notify(void *ctx, uint16_t q) { (void)q; ((struct fake *)ctx)->notifies++; return 0; }

static struct fake fk;
static struct ipk_vq_ops ops = { f_alloc, f_dev, f_notify, &fk };

static void fake_free(void)
{
	int i;
	for (i = 0; i < fk.nblocks; i++)
		free(fk.blocks[i]);
	memset(&fk, 0, sizeof fk);
}

/* The device's view: every shared field little-endian (virtio 1.x §2.7). */
static uint16_t dev_avail_idx(struct ipk_vq *vq) { return le16toh(vq->avail[1]); }
static uint16_t dev_avail_ring(struct ipk_vq *vq, uint16_t i) { return le16toh(vq->avail[2 + (i & vq->mask)]); }
static void dev_put_used(struct ipk_vq *vq, uint16_t at, uint32_t id, uint32_t len)
{
	uint8_t *e = vq->used + 4 + 8 * (at & vq->mask);
	id = htole32(id);
	len = htole32(len);
	memcpy(e, &id, 4);
	memcpy(e + 4, &len, 4);
}
static void dev_set_used_idx(struct ipk_vq *vq, uint16_t idx)
{
	idx = htole16(idx);
	memcpy(vq->used + 2, &idx, 2);
}
static uint64_t d_addr(const struct ipk_vq_desc *d) { return le64toh(d->addr); }
static uint32_t d_len(const struct ipk_vq_desc *d) { return le32toh(d->len); }
static uint16_t d_flags(const struct ipk_vq_desc *d) { return le16toh(d->flags); }
static uint16_t d_next(const struct ipk_vq_desc *d) { return le16toh(d->next); }

static void test_virtq_rx_roundtrip_returns_every_buffer(void)
{
	struct ipk_vq_pool mp;
	struct ipk_vq vq;
	struct ipk_vq_rx rx[64];
	uint16_t i, n;
	int got;

	CHECK_EQ(ipk_vq_pool_init(&mp, &ops, 128, 2048), 0);
	CHECK_EQ(ipk_vq_init(&vq, 0, 64, &ops, &mp, 1), 0);
	CHECK_EQ(ipk_vq_refill(&vq, 1000), 64);   /* bounded by the ring */
	CHECK_EQ(mp.top, 64);
	n = dev_avail_idx(&vq);
	CHECK_EQ(n, 64);
	for (i = 0; i < 10; i++) {  /* device fills 10 buffers, writes 100 + i bytes */
		uint16_t id = dev_avail_ring(&vq, i);
		struct ipk_vq_desc *d = &vq.desc[id];
		CHECK(d_flags(d) & IPK_VQ_DESC_F_WRITE);
		CHECK_EQ(d_len(d), 2048);
		memset((uint8_t *)(uintptr_t)(d_addr(d) - DEV_OFF), (int)i, 100 + i);
		dev_put_used(&vq, i, id, 100u + i);
	}
	dev_set_used_idx(&vq, 10);
	CHECK_EQ(ipk_vq_used_pending(&vq), 10);
	got = ipk_vq_rx_harvest(&vq, rx, 64);
	CHECK_EQ(got, 10);
	for (i = 0; i < 10 && (int)i < got; i++) {
		CHECK_EQ(rx[i].len, 100u + i);
		CHECK_EQ(ipk_vq_pool_buf(&mp, rx[i].buf)[99 + i], i);
	}
	for (i = 0; (int)i < got; i++)
		ipk_vq_pool_free_bulk(&mp, &rx[i].buf, 1);
	CHECK_EQ(ipk_vq_refill(&vq, 1000), 10);
	CHECK_EQ(vq.st.bad_id + vq.st.bad_len + vq.st.used_ahead, 0);
	ipk_vq_fini(&vq);
	CHECK_EQ(mp.top, 128);
	ipk_vq_pool_fini(&mp);
	fake_free();
}

static void test_virtq_tx_chain_reclaimed_and_kick_suppressed(void)
{
	struct ipk_vq_pool mp;
	struct ipk_vq vq;
	uint32_t bufs[3], lens[3] = { 12, 2048, 500 };
	uint16_t id;

	CHECK_EQ(ipk_vq_pool_init(&mp, &ops, 16, 2048), 0);
	CHECK_EQ(ipk_vq_init(&vq, 1, 4, &ops, &mp, 0), 0);
	CHECK_EQ(ipk_vq_pool_alloc_bulk(&mp, bufs, 3), 3);
	CHECK_EQ(ipk_vq_add(&vq, bufs, lens, 3), 0);
	CHECK_EQ(ipk_vq_add(&vq, bufs, lens, 3), -ENOSPC);  /* 1 descriptor left */
	CHECK_EQ(vq.st.full, 1);
	ipk_vq_publish(&vq);
	CHECK_EQ(ipk_vq_kick(&vq), 1);
	CHECK_EQ(fk.notifies, 1);
	memcpy(vq.used, &(uint16_t){ htole16(IPK_VQ_USED_F_NO_NOTIFY) }, 2);
	CHECK_EQ(ipk_vq_kick(&vq), 0);
	CHECK_EQ(fk.notifies, 1);
	/* the device walks the chain as we wrote it */
	id = dev_avail_ring(&vq, 0);
	CHECK(d_flags(&vq.desc[id]) & IPK_VQ_DESC_F_NEXT);
	CHECK_EQ(d_addr(&vq.desc[id]), mp.dev[bufs[0]]);
	CHECK_EQ(d_len(&vq.desc[d_next(&vq.desc[id])]), 2048);
	/* the device rewrites our next pointers: reclaim follows its private copy */
	vq.desc[id].next = htole16(id);
	dev_put_used(&vq, 0, id, 0);
	dev_set_used_idx(&vq, 1);
	CHECK_EQ(ipk_vq_tx_reclaim(&vq), 1);
	CHECK_EQ(mp.top, 16);
	CHECK_EQ(ipk_vq_free_descs(&vq), 4);
	ipk_vq_fini(&vq);
	ipk_vq_pool_fini(&mp);
	fake_free();
}

static void test_virtq_hostile_used_entries_dropped_and_counted(void)
{
	struct ipk_vq_pool mp;
	struct ipk_vq vq;
	struct ipk_vq_rx rx[16];
	uint16_t id0, id1;

	CHECK_EQ(ipk_vq_pool_init(&mp, &ops, 32, 2048), 0);
	CHECK_EQ(ipk_vq_init(&vq, 0, 8, &ops, &mp, 1), 0);
	CHECK_EQ(ipk_vq_refill(&vq, 8), 8);
	id0 = dev_avail_ring(&vq, 0);
	id1 = dev_avail_ring(&vq, 1);
	dev_put_used(&vq, 0, 9999, 64);        /* id out of range */
	dev_put_used(&vq, 1, id0, 4096);       /* longer than the 2048 posted */
	dev_put_used(&vq, 2, id0, 64);         /* id0 again: no longer in flight */
	dev_put_used(&vq, 3, id1, 60);         /* the one good entry */
	dev_set_used_idx(&vq, 4);
	CHECK_EQ(ipk_vq_rx_harvest(&vq, rx, 16), 1);
	CHECK_EQ(rx[0].len, 60);
	CHECK_EQ(vq.st.bad_id, 2);
	CHECK_EQ(vq.st.bad_len, 1);
	ipk_vq_pool_free_bulk(&mp, &rx[0].buf, 1);
	/* used index 1000 ahead: nothing is read, the episode counted once */
	dev_set_used_idx(&vq, 1004);
	CHECK_EQ(ipk_vq_used_pending(&vq), 0);
	CHECK_EQ(ipk_vq_rx_harvest(&vq, rx, 16), 0);
	CHECK_EQ(ipk_vq_rx_harvest(&vq, rx, 16), 0);
	CHECK_EQ(vq.st.used_ahead, 1);
	CHECK_EQ(vq.inflight, 6);
	/* the device puts its index back and completes one more: served again */
	{
		uint16_t id2 = dev_avail_ring(&vq, 2);
		dev_put_used(&vq, 4, id2, 42);
		dev_set_used_idx(&vq, 5);
		CHECK_EQ(ipk_vq_rx_harvest(&vq, rx, 16), 1);
		CHECK_EQ(rx[0].len, 42);
		ipk_vq_pool_free_bulk(&mp, &rx[0].buf, 1);
	}
	CHECK_EQ(vq.st.used_ahead, 1);
	/* every buffer is still accounted for: in the pool or posted */
	ipk_vq_fini(&vq);
	CHECK_EQ(mp.top, 32);
	ipk_vq_pool_fini(&mp);
	fake_free();
}

static void test_virtq_bad_sizes_refused(void)
{
	struct ipk_vq_pool mp;
	struct ipk_vq vq;

	CHECK_EQ(ipk_vq_pool_init(&mp, &ops, 16, 1000), -EINVAL);
	CHECK_EQ(ipk_vq_pool_init(&mp, &ops, 16, 2048), 0);
	CHECK_EQ(ipk_vq_init(&vq, 0, 48, &ops, &mp, 1), -EINVAL);
	CHECK_EQ(ipk_vq_init(&vq, 0, 0, &ops, &mp, 1), -EINVAL);
	CHECK_EQ(ipk_vq_init(&vq, 0, 8, &ops, &mp, 0), 0);
	{
		uint32_t b = 0, l = 4096;
		CHECK_EQ(ipk_vq_add(&vq, &b, &l, 1), -EINVAL);
		b = 99; l = 10;
		CHECK_EQ(ipk_vq_add(&vq, &b, &l, 1), -EINVAL);
	}
	ipk_vq_fini(&vq);
	ipk_vq_pool_fini(&mp);
	fake_free();
}

static void test_vnet_hdr_bytes_little_endian(void)
{
	struct ipk_vnet_hdr h = { 1, 1, 54, 1448, 34, 16, 3 }, g;
	uint8_t b[12];
	static const uint8_t want[12] = { 1, 1, 54, 0, 0xa8, 5, 34, 0, 16, 0, 3, 0 };

	ipk_vnet_hdr_store(&h, b, IPK_VNET_HDR_LEN);
	CHECK(memcmp(b, want, 12) == 0);
	ipk_vnet_hdr_load(&g, b);
	CHECK(memcmp(&g, &h, sizeof g) == 0);
}

int main(void)
{
	RUN(test_virtq_rx_roundtrip_returns_every_buffer);
	RUN(test_virtq_tx_chain_reclaimed_and_kick_suppressed);
	RUN(test_virtq_hostile_used_entries_dropped_and_counted);
	RUN(test_virtq_bad_sizes_refused);
	RUN(test_vnet_hdr_bytes_little_endian);
	return check_summary();
}
