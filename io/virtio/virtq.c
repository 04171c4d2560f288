/*
 * Split virtqueues (virtio 1.x §2.7), the buffer pool and the virtio-net header.
 * The contract is in virtq.h; this file is the "how", in the order a packet meets it:
 * pool, ring set-up, posting buffers, publishing and kicking, taking used entries.
 */
#include "virtq.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ pool */

int ipk_vq_pool_init(struct ipk_vq_pool *mp, const struct ipk_vq_ops *ops, uint32_t nbufs,
                     uint32_t buf_size)
{
	uint32_t i;

	memset(mp, 0, sizeof(*mp));
	if (buf_size < 256 || buf_size > 65536 || (buf_size & (buf_size - 1)) || nbufs == 0 ||
	    nbufs > (1u << 20))
		return -EINVAL;
	mp->base = (uint8_t *)ops->alloc(ops->ctx, (size_t)nbufs * buf_size, buf_size);
	mp->dev = (uint64_t *)calloc(nbufs, sizeof(uint64_t));
	mp->stack = (uint32_t *)calloc(nbufs, sizeof(uint32_t));
	if (!mp->base || !mp->dev || !mp->stack) {
		ipk_vq_pool_fini(mp);
		return -ENOMEM;
	}
	mp->nbufs = nbufs;
	mp->buf_size = buf_size;
	/* Translate once here: the fast path never asks the transport again. */
	for (i = 0; i < nbufs; i++)
		mp->dev[i] = ops->dev_addr(ops->ctx, mp->base + (size_t)i * buf_size);
	/* lowest index on top, so a fresh pool hands out buffer 0 first */
	for (i = 0; i < nbufs; i++)
		mp->stack[i] = nbufs - 1 - i;
	mp->top = nbufs;
	return 0;
}

void ipk_vq_pool_fini(struct ipk_vq_pool *mp)
{
	free(mp->dev);
	free(mp->stack);
	mp->dev = NULL;
	mp->stack = NULL;
	mp->top = 0;
}

/* ---------------------------------------------------------------- layout */

static size_t align_up(size_t v, size_t a) { return (v + a - 1) & ~(a - 1); }

/* §2.7.2 (legacy layout): desc 16 * size, avail 6 + 2 * size, pad to 4096, used
 * 6 + 8 * size. */
static size_t avail_off(uint16_t size) { return (size_t)16 * size; }
static size_t used_off(uint16_t size) { return align_up(avail_off(size) + 6 + 2u * size, 4096); }

size_t ipk_vq_ring_bytes(uint16_t size)
{
	return align_up(used_off(size) + 6 + (size_t)8 * size, 4096);
}

static size_t pow2_at_least(size_t v)
{
	size_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

/* The indices the device reads or writes: 16-bit little-endian words. The avail ones
 * are ours (the device only reads them); used ones are the device's. */
static uint16_t *avail_flags(struct ipk_vq *vq) { return &vq->avail[0]; }
static uint16_t *avail_idx(struct ipk_vq *vq) { return &vq->avail[1]; }
static uint16_t *used_flags(const struct ipk_vq *vq) { return (uint16_t *)(void *)vq->used; }
static uint16_t *used_idx(const struct ipk_vq *vq) { return (uint16_t *)(void *)(vq->used + 2); }

int ipk_vq_init(struct ipk_vq *vq, uint16_t qid, uint16_t size, const struct ipk_vq_ops *ops,
                struct ipk_vq_pool *pool, int device_writes)
{
	size_t bytes = ipk_vq_ring_bytes(size);
	uint8_t *ring;
	uint16_t i;

	memset(vq, 0, sizeof(*vq));
	if (size == 0 || size > IPK_VQ_MAX_SIZE || (size & (size - 1)) || !pool || !ops ||
	    !ops->alloc || !ops->dev_addr || !ops->notify)
		return -EINVAL;
	ring = (uint8_t *)ops->alloc(ops->ctx, bytes, pow2_at_least(bytes));
	vq->slot = (struct ipk_vq_slot *)calloc(size, sizeof(struct ipk_vq_slot));
	vq->free_ids = (uint16_t *)calloc(size, sizeof(uint16_t));
	if (!ring || !vq->slot || !vq->free_ids) {
		free(vq->slot);
		free(vq->free_ids);
		memset(vq, 0, sizeof(*vq));
		return -ENOMEM;
	}
	vq->desc = (struct ipk_vq_desc *)(void *)ring;
	vq->avail = (uint16_t *)(void *)(ring + avail_off(size));
	vq->used = ring + used_off(size);
	vq->desc_dev = ops->dev_addr(ops->ctx, vq->desc);
	vq->avail_dev = ops->dev_addr(ops->ctx, vq->avail);
	vq->used_dev = ops->dev_addr(ops->ctx, vq->used);
	vq->size = size;
	vq->mask = (uint16_t)(size - 1);
	vq->qid = qid;
	vq->pool = pool;
	vq->ops = *ops;
	vq->device_writes = device_writes;
	for (i = 0; i < size; i++)
		vq->free_ids[i] = (uint16_t)(size - 1 - i);
	vq->nfree = size;
	/* poll mode until ipk_vq_intr(vq, 1) */
	*avail_flags(vq) = htole16(IPK_VQ_AVAIL_F_NO_INTERRUPT);
	return 0;
}

/* Buffers of the chain at head back to the pool, descriptors back to the free list. */
static void chain_release(struct ipk_vq *vq, uint16_t head)
{
	uint32_t bufs[64];
	uint16_t id = head, n = vq->slot[head].nseg, k = 0, i;

	for (i = 0; i < n; i++) {
		struct ipk_vq_slot *s = &vq->slot[id];

		if (k == 64) {
			ipk_vq_pool_free_bulk(vq->pool, bufs, k);
			k = 0;
		}
		bufs[k++] = s->buf;
		vq->free_ids[vq->nfree++] = id;
		id = s->next;   /* our private copy, never the shared descriptor's */
	}
	ipk_vq_pool_free_bulk(vq->pool, bufs, k);
	vq->slot[head].busy = 0;
	vq->inflight--;
}

void ipk_vq_fini(struct ipk_vq *vq)
{
	uint16_t i;

	if (!vq->slot)
		return;
	for (i = 0; i < vq->size; i++)
		if (vq->slot[i].busy)
			chain_release(vq, i);
	free(vq->slot);
	free(vq->free_ids);
	vq->slot = NULL;
	vq->free_ids = NULL;
}

/* ---------------------------------------------------------------- posting */

/* §2.7.13.1: write the chain's descriptors, §2.7.13.2: put its head in the next
 * available slot. The index itself is published later, once per burst. */
int ipk_vq_add(struct ipk_vq *vq, const uint32_t *bufs, const uint32_t *lens, uint16_t nseg)
{
	uint16_t flags = vq->device_writes ? IPK_VQ_DESC_F_WRITE : 0, head, id, i;

	if (nseg == 0)
		return -EINVAL;
	if (nseg > vq->nfree) {
		vq->st.full++;
		return -ENOSPC;
	}
	for (i = 0; i < nseg; i++)
		if (lens[i] > vq->pool->buf_size || bufs[i] >= vq->pool->nbufs)
			return -EINVAL;
	head = id = vq->free_ids[vq->nfree - 1];
	for (i = 0; i < nseg; i++) {
		struct ipk_vq_desc *d = &vq->desc[id];
		struct ipk_vq_slot *s = &vq->slot[id];
		uint16_t next = i + 1 < nseg ? vq->free_ids[vq->nfree - 2] : 0;

		vq->nfree--;
		s->buf = bufs[i];
		s->cap = lens[i];
		s->next = next;
		d->addr = htole64(vq->pool->dev[bufs[i]]);
		d->len = htole32(lens[i]);
		d->flags = htole16((uint16_t)(flags | (i + 1 < nseg ? IPK_VQ_DESC_F_NEXT : 0)));
		d->next = htole16(next);
		id = next;
	}
	vq->slot[head].nseg = nseg;
	vq->slot[head].busy = 1;
	vq->avail[2 + (vq->avail_idx & vq->mask)] = htole16(head);
	vq->avail_idx++;
	vq->inflight++;
	return 0;
}

void ipk_vq_publish(struct ipk_vq *vq)
{
	if (vq->published == vq->avail_idx)
		return;
	/* Release: the descriptors and ring slots written above are visible to the
	 * device before the index that hands them over (§2.7.13.3.1). */
	__atomic_store_n(avail_idx(vq), htole16(vq->avail_idx), __ATOMIC_RELEASE);
	vq->published = vq->avail_idx;
}

int ipk_vq_kick(struct ipk_vq *vq)
{
	uint16_t flags;

	/* Full barrier: the avail->idx store must be visible before we read the
	 * device's used->flags; otherwise a device that reads the old index, sets
	 * "notify me" and sleeps would wait for a kick we skipped (§2.7.13.4). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	flags = le16toh(__atomic_load_n(used_flags(vq), __ATOMIC_RELAXED));
	if (flags & IPK_VQ_USED_F_NO_NOTIFY) {
		vq->st.kick_skips++;
		return 0;
	}
	vq->st.kicks++;
	{
		int rc = vq->ops.notify(vq->ops.ctx, vq->qid);
		return rc < 0 ? rc : 1;
	}
}

int ipk_vq_refill(struct ipk_vq *vq, int max)
{
	uint32_t bufs[64], cap = vq->pool->buf_size;
	int done = 0;

	while (done < max && vq->nfree > 0) {
		uint32_t want = (uint32_t)(max - done), got, i;

		if (want > 64)
			want = 64;
		if (want > vq->nfree)
			want = vq->nfree;
		got = ipk_vq_pool_alloc_bulk(vq->pool, bufs, want);
		for (i = 0; i < got; i++)
			(void)ipk_vq_add(vq, &bufs[i], &cap, 1); /* cannot fail: room checked */
		done += (int)got;
		if (got < want)
			break;
	}
	ipk_vq_publish(vq);
	return done;
}

/* ------------------------------------------------------------- used ring */

/* How many used entries are ours to read. The device's index may not run further
 * ahead of ours than the chains we posted (§2.7.8: the device only returns what was
 * made available). When it does, no entry of that stretch can be told from garbage:
 * read none, count the episode once, and go on as soon as the index is back in
 * range (a device that corrects itself is served again; the entries stay posted). */
static uint16_t used_avail(struct ipk_vq *vq, int count)
{
	/* Acquire: the entries are read only after the index that covers them. */
	uint16_t idx = le16toh(__atomic_load_n(used_idx(vq), __ATOMIC_ACQUIRE));
	uint16_t n = (uint16_t)(idx - vq->used_last);

	if (n > vq->inflight) {
		if (count && !vq->ahead) {
			vq->st.used_ahead++;
			vq->ahead = 1;
		}
		return 0;
	}
	if (count)
		vq->ahead = 0;
	return n;
}

uint16_t ipk_vq_used_pending(const struct ipk_vq *vq)
{
	return used_avail((struct ipk_vq *)(uintptr_t)vq, 0);
}

/* Read entry i once into private memory and check its id: -1 when bad (counted). */
static int used_take(struct ipk_vq *vq, uint32_t *len)
{
	const uint8_t *e = vq->used + 4 + (size_t)8 * (vq->used_last & vq->mask);
	uint32_t id, l;

	memcpy(&id, e, 4);
	memcpy(&l, e + 4, 4);
	vq->used_last++;
	id = le32toh(id);
	*len = le32toh(l);
	if (id >= vq->size || !vq->slot[id].busy) {
		vq->st.bad_id++;
		return -1;
	}
	return (int)id;
}

int ipk_vq_rx_harvest(struct ipk_vq *vq, struct ipk_vq_rx *out, int n)
{
	uint16_t avail = used_avail(vq, 1), i;
	int got = 0;

	for (i = 0; i < avail && got < n; i++) {
		uint32_t len;
		int id = used_take(vq, &len);
		struct ipk_vq_slot *s;

		if (id < 0)
			continue;
		s = &vq->slot[id];
		if (s->nseg != 1 || len > s->cap) {
			/* more than we offered: the bytes past it are not in our buffer */
			vq->st.bad_len++;
			chain_release(vq, (uint16_t)id);
			continue;
		}
		out[got].buf = s->buf;
		out[got].len = len;
		got++;
		vq->free_ids[vq->nfree++] = (uint16_t)id;
		s->busy = 0;
		vq->inflight--;
	}
	return got;
}

int ipk_vq_tx_reclaim(struct ipk_vq *vq)
{
	uint16_t avail = used_avail(vq, 1), i;
	int got = 0;

	for (i = 0; i < avail; i++) {
		uint32_t len;
		int id = used_take(vq, &len);

		/* len is meaningless for a device-read chain (§2.7.8.1): not checked */
		if (id < 0)
			continue;
		chain_release(vq, (uint16_t)id);
		got++;
	}
	return got;
}

int ipk_vq_intr(struct ipk_vq *vq, int on)
{
	__atomic_store_n(avail_flags(vq), htole16(on ? 0 : IPK_VQ_AVAIL_F_NO_INTERRUPT),
	                 __ATOMIC_RELAXED);
	if (!on)
		return 0;
	/* Full barrier: the flag store before the used->idx load, else the device may
	 * finish an entry, see the old flag (no interrupt) while we see the old index
	 * and sleep (§2.7.7.1). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return used_avail(vq, 0) > 0;
}

/* -------------------------------------------------------- virtio-net header */

void ipk_vnet_hdr_load(struct ipk_vnet_hdr *h, const uint8_t *p)
{
	h->flags = p[0];
	h->gso_type = p[1];
	h->hdr_len = ipk_vq_ld16(p + 2);
	h->gso_size = ipk_vq_ld16(p + 4);
	h->csum_start = ipk_vq_ld16(p + 6);
	h->csum_offset = ipk_vq_ld16(p + 8);
	h->num_buffers = ipk_vq_ld16(p + 10);
}

void ipk_vnet_hdr_store(const struct ipk_vnet_hdr *h, uint8_t *p, uint32_t hdr_len)
{
	p[0] = h->flags;
	p[1] = h->gso_type;
	ipk_vq_st16(p + 2, h->hdr_len);
	ipk_vq_st16(p + 4, h->gso_size);
	ipk_vq_st16(p + 6, h->csum_start);
	ipk_vq_st16(p + 8, h->csum_offset);
	if (hdr_len >= IPK_VNET_HDR_LEN)
		ipk_vq_st16(p + 10, h->num_buffers);
}
