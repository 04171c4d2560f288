/*
 * A single-producer single-consumer ring of fixed-size slots, for passing packets and
 * messages between exactly two threads (runtime/steer.c, runtime/model.c).
 *
 * Protocol (the liburing / Lamport queue pattern):
 *   producer: p = spsc_prod_slot(r) ... fill *p ... (more slots) ... spsc_prod_commit(r)
 *   consumer: n = spsc_cons_avail(r); read spsc_cons_slot(r, 0..n-1); spsc_cons_release(r, n)
 *
 * `tail` is written only by the producer and `head` only by the consumer; each side
 * keeps a private copy of the other's index and reloads it only when the ring looks
 * full (producer) or empty (consumer), so the shared cache lines move only when
 * needed. Slots are filled in place and published in batches by one release store.
 *
 * Memory ordering (GCC/Clang __atomic builtins, usable from C99 and C++):
 *   - commit:  store-release of tail, so the slot contents written before it are
 *              visible to a consumer that load-acquires tail and sees the new value;
 *   - avail:   load-acquire of tail, pairing with commit: reading a slot below tail
 *              sees the producer's writes;
 *   - release: store-release of head, so the consumer's reads of those slots are done
 *              before the producer may reuse them;
 *   - slot:    load-acquire of head, pairing with release: the producer overwrites a
 *              slot only after the consumer's reads of it are finished.
 * Indices are free-running 32-bit counters (wrap-around is harmless: capacity is a
 * power of two well below 2^31, and differences are taken modulo 2^32).
 */
#ifndef IPKIT_RUNTIME_SPSC_H
#define IPKIT_RUNTIME_SPSC_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SPSC_CACHELINE 64

struct spsc {
	/* consumer's line */
	uint32_t head;        /* shared: next slot to read; written by the consumer only */
	uint32_t c_tail;      /* consumer's copy of tail */
	char pad0_[SPSC_CACHELINE - 2 * sizeof(uint32_t)];
	/* producer's line */
	uint32_t tail;        /* shared: next slot to publish; written by the producer only */
	uint32_t p_head;      /* producer's copy of head */
	uint32_t p_pos;       /* producer's next slot to fill (>= tail until commit) */
	char pad1_[SPSC_CACHELINE - 3 * sizeof(uint32_t)];
	/* read-only after init */
	uint32_t mask, esize;
	uint8_t *slots;
};

/* cap: a power of two >= 2; esize: bytes per slot. 0 or -1 (no memory / bad size). */
static inline int spsc_init(struct spsc *r, uint32_t cap, uint32_t esize)
{
	memset(r, 0, sizeof(*r));
	if (cap < 2 || (cap & (cap - 1)) != 0 || cap > (1u << 24) || esize == 0)
		return -1;
	r->slots = (uint8_t *)calloc(cap, esize);
	if (!r->slots)
		return -1;
	r->mask = cap - 1;
	r->esize = esize;
	return 0;
}

static inline void spsc_fini(struct spsc *r)
{
	free(r->slots);
	r->slots = NULL;
}

static inline void *spsc_at(const struct spsc *r, uint32_t i)
{
	return r->slots + (size_t)(i & r->mask) * r->esize;
}

/* Producer: the next free slot (not yet visible), or NULL when full. */
static inline void *spsc_prod_slot(struct spsc *r)
{
	if (r->p_pos - r->p_head > r->mask) {
		/* acquire: pairs with the consumer's release of head (slot reads done) */
		r->p_head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
		if (r->p_pos - r->p_head > r->mask)
			return NULL;
	}
	return spsc_at(r, r->p_pos++);
}

/* Producer: publish every slot filled since the last commit. */
static inline void spsc_prod_commit(struct spsc *r)
{
	/* release: the slot contents are written before the consumer can see them */
	__atomic_store_n(&r->tail, r->p_pos, __ATOMIC_RELEASE);
}

/* Producer: free slots (after reloading head). */
static inline uint32_t spsc_prod_room(struct spsc *r)
{
	/* acquire: as in spsc_prod_slot */
	r->p_head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	return r->mask + 1 - (r->p_pos - r->p_head);
}

/* Consumer: slots ready to read (a lower bound: the producer's index is reloaded only
 * when no ready slot is known, which keeps its cache line where it is). */
static inline uint32_t spsc_cons_avail(struct spsc *r)
{
	uint32_t n = r->c_tail - r->head;

	if (n == 0) {
		/* acquire: pairs with spsc_prod_commit, slot contents are visible */
		r->c_tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		n = r->c_tail - r->head;
	}
	return n;
}

/* Consumer: the i-th ready slot (i < spsc_cons_avail). */
static inline void *spsc_cons_slot(const struct spsc *r, uint32_t i)
{
	return spsc_at(r, r->head + i);
}

/* Consumer: give n read slots back to the producer. */
static inline void spsc_cons_release(struct spsc *r, uint32_t n)
{
	/* release: our reads of the slots complete before the producer reuses them */
	__atomic_store_n(&r->head, r->head + n, __ATOMIC_RELEASE);
}

/* Either side: nothing published and unread (a hint: may change at once). */
static inline int spsc_empty(const struct spsc *r)
{
	return __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) ==
	       __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
}

/* Pointer rings: fill the next slot with p (0 ok, -1 full); spsc_prod_commit publishes. */
static inline int spsc_push_ptr(struct spsc *r, void *p)
{
	void **s = (void **)spsc_prod_slot(r);

	if (!s)
		return -1;
	*s = p;
	return 0;
}

#endif
