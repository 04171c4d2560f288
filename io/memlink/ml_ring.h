/*
 * memlink shared-memory layout and its single-producer/single-consumer rings.
 *
 * Design (why one copy each way): the two processes never hand pool buffers to each
 * other. Each side owns half of a shared slot area; the sender copies a frame into
 * the slot that belongs to its ring position and publishes a descriptor, the receiver
 * copies the bytes into a buffer of its own pool and releases the position. Putting
 * the pools themselves in shared memory would save that copy but would let a faulty
 * peer corrupt our free lists, refcounts and the data the core is still reading (a
 * TCP retransmission queue, a payload the application holds); with one copy nothing
 * the peer writes is ever used except the bytes of a frame, checked like any frame.
 *
 * Region (every offset is a pure function of nslots and slot_size, so the attaching
 * side recomputes it instead of trusting offsets stored by the peer):
 *
 *   0                     struct ml_hdr (one page, versioned, padded)
 *   ml_ring_ctl_off(r)    struct ml_ring_ctl for ring r (0: a->b, 1: b->a)
 *   ml_ring_desc_off(r)   nslots struct ml_desc
 *   ml_slots_off(s)       nslots slots of slot_size bytes owned by sender s
 *
 * Rings: the producer writes only `prod` and the descriptors, the consumer only
 * `cons`; each index lives on its own cache line so the two cores do not bounce one
 * line on every packet. Indices are free-running uint32 (wrap at 2^32); the
 * descriptor for position i is descs[i & (nslots - 1)], its data in the sender's slot
 * i & (nslots - 1), so a slot is free again exactly when the consumer has passed it.
 * Each side keeps its own index privately and only reads the peer's index from
 * shared memory, validating it (0 <= prod - cons <= nslots) before use.
 */
#ifndef IPKIT_ML_RING_H
#define IPKIT_ML_RING_H

#include <stddef.h>
#include <stdint.h>

#define ML_MAGIC 0x4d4b5049u   /* "IPKM" little-endian in memory */
/* 2: the region is a sealed memfd found through a door file (struct ml_door);
 * 1 was a plain /dev/shm file, which either side could shrink under the other. */
#define ML_VERSION 2u
#define ML_DOOR_MAGIC 0x524f4f44u /* "DOOR" */
#define ML_HDR_SIZE 4096u
#define ML_CACHELINE 64u
#define ML_MAX_SLOTS 32768u
#define ML_MIN_SLOTS 8u
#define ML_MAX_MTU 9216u

/* Shared header. Both processes are on one machine, so host byte order is fine;
 * the magic catches a region written by something else. */
struct ml_hdr {
	uint32_t magic;        /* written last by the creator (release) */
	uint16_t version;
	uint16_t hdr_size;     /* ML_HDR_SIZE */
	uint32_t nslots;       /* per direction, power of two */
	uint32_t slot_size;    /* bytes per slot, multiple of 64 */
	uint32_t mtu;          /* IP MTU both sides use */
	uint32_t flags;        /* none defined; must be 0 */
	uint64_t total_size;   /* bytes of the whole region */
	uint32_t pid[2];       /* creator / attacher, for humans only */
	uint32_t attached;     /* set by role b once it has checked the header */
	uint8_t reserved[ML_HDR_SIZE - 44];
};

/*
 * Door: how role b finds role a's region (issue 14 item 13). The region is a memfd
 * sealed against shrinking and growing (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
 * so neither side can cut the mapping under the other (SIGBUS). A memfd has no
 * name, so role a writes this record to /dev/shm/ipkit-ml-NAME (atomically: a
 * temporary file renamed) and role b opens /proc/<pid>/fd/<fd>, which needs the
 * same user as role a (as the old 0600 file did). Role b reads the door with
 * pread, never maps it, and checks the seals, the header and the size before it
 * maps the region.
 */
struct ml_door {
	uint32_t magic;        /* ML_DOOR_MAGIC */
	uint16_t version;      /* ML_VERSION */
	uint16_t door_size;    /* sizeof(struct ml_door) */
	uint32_t pid;          /* role a's process */
	int32_t fd;            /* its memfd holding the region */
	uint64_t region_size;  /* for humans; role b trusts only the checked header */
	uint8_t reserved[40];  /* zero; pads to 64 bytes */
};

/* Ring control: three cache lines. */
struct ml_ring_ctl {
	uint32_t prod;              /* written by the producer only */
	uint8_t pad0[ML_CACHELINE - 4];
	uint32_t cons;              /* written by the consumer only */
	uint8_t pad1[ML_CACHELINE - 4];
	uint32_t need_wakeup;       /* consumer sets before sleeping; producer clears + wakes */
	uint8_t pad2[ML_CACHELINE - 4];
};

struct ml_desc {
	uint32_t off;    /* byte offset of the frame in the sender's slot area */
	uint32_t len;    /* frame bytes */
	uint32_t flags;  /* none defined; ignored */
	uint32_t rsvd;
};

size_t ml_ring_ctl_off(int ring, uint32_t nslots);
size_t ml_ring_desc_off(int ring, uint32_t nslots);
size_t ml_slots_off(int side, uint32_t nslots, uint32_t slot_size);
size_t ml_region_size(uint32_t nslots, uint32_t slot_size);
/* Slot size for an IP MTU: Ethernet header + VLAN tag + MTU, rounded to 64. */
uint32_t ml_slot_size(uint32_t mtu);

/* One side's view of one ring. `slots` is the sender's slot area. */
struct ml_ring {
	struct ml_ring_ctl *ctl;
	struct ml_desc *descs;
	uint8_t *slots;
	uint32_t nslots;
	uint32_t slot_size;
	uint32_t local;      /* our own index: prod (producer) or cons (consumer) */
	uint32_t cached;     /* last validated peer index */
	uint64_t bad_index;  /* peer index out of range (corrupt peer) */
	uint64_t bad_desc;   /* descriptor offset/length out of range */
};

void ml_ring_init(struct ml_ring *r, struct ml_ring_ctl *ctl, struct ml_desc *descs,
                  uint8_t *slots, uint32_t nslots, uint32_t slot_size);

/* Producer: free positions now (0 when full or when the peer's cons is corrupt). */
uint32_t ml_ring_prod_space(struct ml_ring *r);
/* Producer: where the next frame goes (slot_size bytes; the caller checked space). */
uint8_t *ml_ring_prod_slot(struct ml_ring *r);
/* Producer: write the descriptor for the frame copied into ml_ring_prod_slot; it
 * becomes visible to the consumer only with ml_ring_prod_publish. */
void ml_ring_prod_commit(struct ml_ring *r, uint32_t len);
/* Producer: make everything put so far visible. Returns 1 when the consumer asked to
 * be woken (the caller sends the wake-up), else 0. */
int ml_ring_prod_publish(struct ml_ring *r);

/* Consumer: positions ready (0 when empty or when the peer's prod is corrupt). */
uint32_t ml_ring_cons_avail(struct ml_ring *r);
/* Consumer: the next frame, validated: returns its length and sets *data, or -1 for
 * a bad descriptor (counted; the position is consumed anyway). */
long ml_ring_cons_peek(struct ml_ring *r, const uint8_t **data);
/* Consumer: move past the frame just peeked (the slot becomes the sender's again
 * once published by ml_ring_cons_release). */
void ml_ring_cons_next(struct ml_ring *r);
void ml_ring_cons_release(struct ml_ring *r);
/* Consumer: ask for a wake-up. Returns 1 if frames are already waiting. */
int ml_ring_cons_arm(struct ml_ring *r);
void ml_ring_cons_disarm(struct ml_ring *r);

#endif
