/*
 * memlink rings: the SPSC protocol over shared memory (layout in ml_ring.h).
 *
 * Barriers, liburing style: the producer fills a slot and a descriptor with plain
 * stores and then publishes `prod` with a release store, so a consumer that reads
 * `prod` with an acquire load sees the slot and the descriptor complete. The consumer
 * copies the frame out and then publishes `cons` with a release store, so the
 * producer's acquire load of `cons` orders its next write of that slot after our
 * reads. The sleep/wake handshake is a Dekker pattern and needs full fences (below).
 */
#include "ml_ring.h"

#include <string.h>

static size_t ml_align(size_t v, size_t a) { return (v + a - 1) & ~(a - 1); }

size_t ml_ring_ctl_off(int ring, uint32_t nslots)
{
	size_t one = sizeof(struct ml_ring_ctl) + (size_t)nslots * sizeof(struct ml_desc);
	return ML_HDR_SIZE + (size_t)ring * ml_align(one, ML_CACHELINE);
}

size_t ml_ring_desc_off(int ring, uint32_t nslots)
{
	return ml_ring_ctl_off(ring, nslots) + sizeof(struct ml_ring_ctl);
}

size_t ml_slots_off(int side, uint32_t nslots, uint32_t slot_size)
{
	size_t base = ml_align(ml_ring_ctl_off(2, nslots), 4096);
	return base + (size_t)side * (size_t)nslots * slot_size;
}

size_t ml_region_size(uint32_t nslots, uint32_t slot_size)
{
	return ml_slots_off(2, nslots, slot_size);
}

uint32_t ml_slot_size(uint32_t mtu)
{
	return (uint32_t)ml_align((size_t)mtu + 14 + 4, ML_CACHELINE);
}

void ml_ring_init(struct ml_ring *r, struct ml_ring_ctl *ctl, struct ml_desc *descs,
                  uint8_t *slots, uint32_t nslots, uint32_t slot_size)
{
	memset(r, 0, sizeof *r);
	r->ctl = ctl;
	r->descs = descs;
	r->slots = slots;
	r->nslots = nslots;
	r->slot_size = slot_size;
}

uint32_t ml_ring_prod_space(struct ml_ring *r)
{
	/* acquire: our later writes into a slot must not move before the consumer's
	 * release of it. */
	uint32_t cons = __atomic_load_n(&r->ctl->cons, __ATOMIC_ACQUIRE);
	uint32_t used = r->local - cons;

	if (used > r->nslots) {
		/* The consumer claims to have read what we never wrote: corrupt peer. */
		r->bad_index++;
		return 0;
	}
	r->cached = cons;
	return r->nslots - used;
}

uint8_t *ml_ring_prod_slot(struct ml_ring *r)
{
	return r->slots + (size_t)(r->local & (r->nslots - 1)) * r->slot_size;
}

void ml_ring_prod_commit(struct ml_ring *r, uint32_t len)
{
	uint32_t pos = r->local & (r->nslots - 1);
	struct ml_desc *d = &r->descs[pos];

	d->off = pos * r->slot_size;
	d->len = len;
	d->flags = 0;
	d->rsvd = 0;
	r->local++;
}

int ml_ring_prod_publish(struct ml_ring *r)
{
	/* release: slot bytes and descriptors before the index that exposes them. */
	__atomic_store_n(&r->ctl->prod, r->local, __ATOMIC_RELEASE);
	/* Full fence: the store of prod must be visible before we read need_wakeup, or
	 * the consumer could arm, see the old prod, sleep, and we would not see its flag
	 * (the mirror fence is in ml_ring_cons_arm). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&r->ctl->need_wakeup, __ATOMIC_RELAXED) == 0)
		return 0;
	/* One wake-up per sleep: whoever clears the flag sends it. */
	return __atomic_exchange_n(&r->ctl->need_wakeup, 0, __ATOMIC_ACQ_REL) != 0;
}

uint32_t ml_ring_cons_avail(struct ml_ring *r)
{
	/* acquire: pairs with the producer's release of prod (slot + descriptor). */
	uint32_t prod = __atomic_load_n(&r->ctl->prod, __ATOMIC_ACQUIRE);
	uint32_t n = prod - r->local;

	if (n > r->nslots) {
		r->bad_index++;
		return 0;
	}
	r->cached = prod;
	return n;
}

long ml_ring_cons_peek(struct ml_ring *r, const uint8_t **data)
{
	const struct ml_desc *d = &r->descs[r->local & (r->nslots - 1)];
	/* Read each field once: the peer may rewrite the descriptor while we check it. */
	uint32_t off = __atomic_load_n(&d->off, __ATOMIC_RELAXED);
	uint32_t len = __atomic_load_n(&d->len, __ATOMIC_RELAXED);
	uint64_t area = (uint64_t)r->nslots * r->slot_size;

	if (len == 0 || len > r->slot_size || (uint64_t)off + len > area) {
		r->bad_desc++;
		return -1;
	}
	*data = r->slots + off;
	return (long)len;
}

void ml_ring_cons_next(struct ml_ring *r) { r->local++; }

void ml_ring_cons_release(struct ml_ring *r)
{
	/* release: our reads of the slots come before the producer may reuse them. */
	__atomic_store_n(&r->ctl->cons, r->local, __ATOMIC_RELEASE);
}

int ml_ring_cons_arm(struct ml_ring *r)
{
	__atomic_store_n(&r->ctl->need_wakeup, 1, __ATOMIC_RELAXED);
	/* Full fence: the flag must be visible before we look at prod again (the
	 * producer does store prod; fence; load flag). One of us sees the other. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return ml_ring_cons_avail(r) != 0;
}

void ml_ring_cons_disarm(struct ml_ring *r)
{
	__atomic_store_n(&r->ctl->need_wakeup, 0, __ATOMIC_RELAXED);
}
