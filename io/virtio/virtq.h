/*
 * The split virtqueue shared by ipkit's two virtio transports (PCI, vhost-user), a
 * memory pool of device-reachable buffers, and the virtio-net header.
 *
 * Section numbers are those of the virtio 1.x specification (v1.2, "split
 * virtqueues" is §2.7). Everything in device-reachable memory (rings, buffers) is
 * untrusted: the device may write any value at any time. So the driver keeps its own
 * private record of every descriptor it posted (buffer index, capacity, chain) and
 * only reads three things the device wrote: used->idx, used->ring[i].id and
 * used->ring[i].len; each is checked before use, and a bad one is dropped and counted
 * (struct ipk_vq_stats), never trusted, never a crash.
 *
 * A transport gives the ring code three things through struct ipk_vq_ops: memory the
 * device can reach (PCI: hugepages; vhost-user: a memfd shared with the device),
 * the address the device uses for a pointer into it (PCI: physical address;
 * vhost-user: our virtual address, which the memory table maps 1:1), and the
 * notification ("kick") of a queue (PCI: a register write; vhost-user: the kick
 * eventfd).
 *
 * Batching, as ixy does it: buffers come from the pool in bulk, descriptors are
 * written for a whole burst, the available index is published once per burst
 * (ipk_vq_publish) and the device is notified at most once per burst (ipk_vq_kick),
 * and not at all while it says it polls (VIRTQ_USED_F_NO_NOTIFY).
 *
 * Threads: one queue and one pool serve one thread at a time.
 * Endianness: virtio 1.x rings and headers are little-endian (§2.7, §5.1.6); the
 * accessors below convert. A legacy (0.9.5) device uses the guest's native order,
 * which is the same on the little-endian hosts the legacy PCI transport supports.
 * Errors: 0 or a count on success, a negative errno value on failure.
 */
#ifndef IPKIT_IO_VIRTQ_H
#define IPKIT_IO_VIRTQ_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------- feature bits (§6, §5.1.3) */

#define IPK_VIRTIO_NET_F_CSUM        0   /* device takes partial checksums (tx) */
#define IPK_VIRTIO_NET_F_GUEST_CSUM  1   /* driver takes partial checksums (rx) */
#define IPK_VIRTIO_NET_F_MTU         3
#define IPK_VIRTIO_NET_F_MAC         5
#define IPK_VIRTIO_NET_F_GUEST_TSO4  7   /* driver takes TCPv4 super-frames (rx) */
#define IPK_VIRTIO_NET_F_GUEST_TSO6  8
#define IPK_VIRTIO_NET_F_HOST_TSO4   11  /* device segments TCPv4 (tx) */
#define IPK_VIRTIO_NET_F_HOST_TSO6   12
#define IPK_VIRTIO_NET_F_MRG_RXBUF   15  /* a received frame may span several buffers */
#define IPK_VIRTIO_NET_F_STATUS      16
#define IPK_VIRTIO_F_ANY_LAYOUT      27
#define IPK_VIRTIO_F_INDIRECT_DESC   28
#define IPK_VIRTIO_F_EVENT_IDX       29
#define IPK_VIRTIO_F_VERSION_1       32
#define IPK_VIRTIO_F_ACCESS_PLATFORM 33
#define IPK_VIRTIO_F_RING_PACKED     34
#define IPK_VIRTIO_BIT(b) ((uint64_t)1 << (b))

/* ------------------------------------------------------------ ring layout (§2.7) */

/* §2.7.5 The Virtqueue Descriptor Table: 16 bytes each, little-endian. */
struct ipk_vq_desc {
	uint64_t addr;   /* device address of the buffer */
	uint32_t len;
	uint16_t flags;  /* IPK_VQ_DESC_F_* */
	uint16_t next;   /* with F_NEXT: the next descriptor of the chain */
};
#define IPK_VQ_DESC_F_NEXT  1u  /* §2.7.5: the chain continues at `next` */
#define IPK_VQ_DESC_F_WRITE 2u  /* §2.7.5: device writes the buffer (receive) */

/* §2.7.6 The Virtqueue Available Ring: flags, idx, ring[size] (uint16_t each). */
#define IPK_VQ_AVAIL_F_NO_INTERRUPT 1u /* §2.7.7: driver polls, no used notifications */
/* §2.7.8 The Virtqueue Used Ring: flags, idx, then {id, len} per entry. */
struct ipk_vq_used_elem {
	uint32_t id;     /* head descriptor of the finished chain */
	uint32_t len;    /* bytes the device wrote into the chain (receive) */
};
#define IPK_VQ_USED_F_NO_NOTIFY 1u     /* §2.7.10: device polls, no kick needed */

/* Bytes of the three parts laid out as the legacy interface requires (§2.7.2
 * "Legacy Interfaces": descriptors, then the available ring, then the used ring at
 * the next 4096-byte boundary), which also meets the 1.x alignments (16, 2, 4). */
size_t ipk_vq_ring_bytes(uint16_t size);
#define IPK_VQ_MAX_SIZE 32768u  /* §2.7: queue size is a power of 2, at most 32768 */

/* ----------------------------------------------------------- transport hooks */

struct ipk_vq_ops {
	/* Zeroed memory the device can reach, `size` bytes aligned to `align` (a power
	 * of two); every naturally aligned `align`-byte block of it must be contiguous
	 * for the device (PCI: it lies in one hugepage). NULL when none is left. The
	 * transport owns it and frees all of it when it closes. */
	void *(*alloc)(void *ctx, size_t size, size_t align);
	/* The address the device uses for `virt` (a pointer into a block from alloc). */
	uint64_t (*dev_addr)(void *ctx, const void *virt);
	/* Tell the device queue `qid` has new available buffers. 0 or a negative errno. */
	int (*notify)(void *ctx, uint16_t qid);
	void *ctx;
};

/* ------------------------------------------------------------ memory pool */

/*
 * ixy's mempool: nbufs buffers of buf_size bytes in device-reachable memory, a
 * stack of free indices, bulk alloc and free. A buffer is named by its index; its
 * device address is computed once at creation (no translation on the fast path).
 * The pool's bookkeeping lives in private memory, never in the buffers, which the
 * device can overwrite.
 */
struct ipk_vq_pool {
	uint8_t *base;          /* nbufs * buf_size bytes from ops->alloc */
	uint64_t *dev;          /* device address of each buffer (private) */
	uint32_t *stack;        /* free buffer indices, top at stack[top - 1] (private) */
	uint32_t top;
	uint32_t nbufs, buf_size;
	uint32_t pad_;
	uint64_t alloc_fails;   /* bulk allocations that got fewer buffers than asked */
};

/* Create: buf_size a power of two from 256 to 65536, nbufs 1..1<<20; the area is one
 * ops->alloc block aligned to buf_size (so a buffer never straddles a device page).
 * 0, -EINVAL for bad sizes, -ENOMEM when ops->alloc or malloc fail. */
int ipk_vq_pool_init(struct ipk_vq_pool *mp, const struct ipk_vq_ops *ops, uint32_t nbufs,
                     uint32_t buf_size);
/* Free the private arrays (the buffer area belongs to the transport). */
void ipk_vq_pool_fini(struct ipk_vq_pool *mp);

/* Take up to n free buffer indices into out; returns how many (fewer when the pool
 * runs low: counted in alloc_fails). */
static inline uint32_t ipk_vq_pool_alloc_bulk(struct ipk_vq_pool *mp, uint32_t *out, uint32_t n)
{
	uint32_t i;

	if (n > mp->top) {
		mp->alloc_fails++;
		n = mp->top;
	}
	for (i = 0; i < n; i++)
		out[i] = mp->stack[--mp->top];
	return n;
}

/* Give n buffers back. The caller must own them (indices from alloc_bulk or from a
 * completed receive); the pool does not check for double frees. */
static inline void ipk_vq_pool_free_bulk(struct ipk_vq_pool *mp, const uint32_t *in, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		mp->stack[mp->top++] = in[i];
}

static inline uint8_t *ipk_vq_pool_buf(const struct ipk_vq_pool *mp, uint32_t idx)
{
	return mp->base + (size_t)idx * mp->buf_size;
}

/* ------------------------------------------------------------- virtqueue */

/* What went wrong on the device side, counted per queue (each entry is dropped). */
struct ipk_vq_stats {
	uint64_t bad_id;      /* used id >= queue size, or a descriptor not in flight */
	uint64_t bad_len;     /* used len past the buffers posted (receive) */
	uint64_t used_ahead;  /* used->idx more than the in-flight count ahead: nothing is
	                       * read until it is back in range (counted once per episode) */
	uint64_t kicks;       /* notifications sent */
	uint64_t kick_skips;  /* notifications the device said it did not need */
	uint64_t full;        /* adds refused: no free descriptor */
};

/* Private record of one descriptor (the device never sees it). */
struct ipk_vq_slot {
	uint32_t buf;      /* pool buffer index */
	uint32_t cap;      /* bytes posted (the descriptor's len as we wrote it) */
	uint16_t next;     /* chain successor as we wrote it */
	uint16_t nseg;     /* head only: descriptors in the chain */
	uint8_t busy;      /* head only: posted and not yet returned */
	uint8_t pad_[3];
};

struct ipk_vq {
	/* shared with the device */
	struct ipk_vq_desc *desc;
	uint16_t *avail;               /* [0] flags, [1] idx, [2 + i] ring[i] */
	uint8_t *used;                 /* flags (u16), idx (u16), ring of ipk_vq_used_elem */
	uint64_t desc_dev, avail_dev, used_dev; /* their device addresses */
	/* private */
	struct ipk_vq_slot *slot;
	uint16_t *free_ids;            /* stack of free descriptor ids */
	uint16_t nfree;
	uint16_t size, mask, qid;
	uint16_t avail_idx;            /* next available index we publish */
	uint16_t used_last;            /* next used entry we read */
	uint16_t inflight;             /* chains posted and not returned */
	uint16_t published;            /* avail_idx last written to the ring */
	int device_writes;             /* 1: receive queue (descriptors F_WRITE) */
	int ahead;                     /* used->idx seen running ahead (counted once) */
	struct ipk_vq_pool *pool;      /* buffers come from and return to it */
	struct ipk_vq_ops ops;
	struct ipk_vq_stats st;
};

/* Set up queue qid with `size` entries (power of two, 1..IPK_VQ_MAX_SIZE) over pool;
 * device_writes 1 for a receive queue. The rings come from ops->alloc (one block,
 * aligned to its size rounded up to a power of two, so it is device-contiguous).
 * Starts with interrupts off (VIRTQ_AVAIL_F_NO_INTERRUPT: poll mode).
 * 0, -EINVAL, -ENOMEM. */
int ipk_vq_init(struct ipk_vq *vq, uint16_t qid, uint16_t size, const struct ipk_vq_ops *ops,
                struct ipk_vq_pool *pool, int device_writes);
/* Give every buffer still posted back to the pool and free the private arrays. Call
 * only once the device no longer uses the queue (reset / disconnected). */
void ipk_vq_fini(struct ipk_vq *vq);

/* Post one chain of nseg buffers (bufs[i] with lens[i] bytes: the data to send, or
 * for a receive queue the room offered) without publishing it. The queue owns the
 * buffers from here until they come back (ipk_vq_rx_harvest / ipk_vq_tx_reclaim).
 * 0, -ENOSPC when fewer than nseg descriptors are free (counted in full), -EINVAL for
 * nseg 0 or a length past the buffer. */
int ipk_vq_add(struct ipk_vq *vq, const uint32_t *bufs, const uint32_t *lens, uint16_t nseg);
/* Receive queue: allocate up to `max` buffers in bulk and post each as a one-buffer
 * chain offering the whole buffer; publishes. Returns how many were posted. */
int ipk_vq_refill(struct ipk_vq *vq, int max);
/* §2.7.13.3: make the chains added so far visible (one release store of avail->idx). */
void ipk_vq_publish(struct ipk_vq *vq);
/* §2.7.13.4: notify the device unless it set VIRTQ_USED_F_NO_NOTIFY (checked after a
 * full barrier, so a device going to sleep cannot miss the new buffers). Returns 1
 * when notified, 0 when not needed, or notify's negative errno. */
int ipk_vq_kick(struct ipk_vq *vq);

/* A completed receive: pool buffer `buf` holding `len` bytes (header included). */
struct ipk_vq_rx {
	uint32_t buf;
	uint32_t len;
};
/* Receive queue: take up to n completed one-buffer chains (the caller owns each
 * buffer from here). Entries with a bad id or length are dropped and counted (their
 * buffer, when known, goes back to the pool). */
int ipk_vq_rx_harvest(struct ipk_vq *vq, struct ipk_vq_rx *out, int n);
/* Transmit queue: return every buffer of every completed chain to the pool, in bulk;
 * returns the chains reclaimed. Bad entries are dropped and counted. */
int ipk_vq_tx_reclaim(struct ipk_vq *vq);
/* Used entries waiting (0 while the device's index runs ahead of the in-flight
 * count). */
uint16_t ipk_vq_used_pending(const struct ipk_vq *vq);
/* Event mode: on = 1 clears VIRTQ_AVAIL_F_NO_INTERRUPT (§2.7.7) and returns 1 when
 * used entries arrived meanwhile (do not sleep), else 0; on = 0 sets it again. */
int ipk_vq_intr(struct ipk_vq *vq, int on);
static inline uint16_t ipk_vq_free_descs(const struct ipk_vq *vq) { return vq->nfree; }

/* ------------------------------------------------------ virtio-net header (§5.1.6) */

/* struct virtio_net_hdr with num_buffers: 12 bytes in front of every frame when
 * VIRTIO_F_VERSION_1 or VIRTIO_NET_F_MRG_RXBUF is negotiated (10 bytes otherwise,
 * legacy without mergeable buffers). Little-endian fields. */
#define IPK_VNET_HDR_LEN 12u
#define IPK_VNET_HDR_LEN_LEGACY 10u
#define IPK_VNET_F_NEEDS_CSUM 1u   /* §5.1.6.2: checksum from csum_start is partial */
#define IPK_VNET_F_DATA_VALID 2u   /* §5.1.6.4: device checked the checksum */
#define IPK_VNET_GSO_NONE 0u
#define IPK_VNET_GSO_TCPV4 1u
#define IPK_VNET_GSO_UDP 3u
#define IPK_VNET_GSO_TCPV6 4u
#define IPK_VNET_GSO_ECN 0x80u

struct ipk_vnet_hdr {
	uint8_t flags;
	uint8_t gso_type;
	uint16_t hdr_len;
	uint16_t gso_size;
	uint16_t csum_start;
	uint16_t csum_offset;
	uint16_t num_buffers;  /* MRG_RXBUF: buffers this frame spans (receive) */
};

/* Byte-wise little-endian access: never a cast of device memory to a struct. */
static inline uint16_t ipk_vq_ld16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline void ipk_vq_st16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}
/* Read a header out of a (device-written) buffer into private memory. */
void ipk_vnet_hdr_load(struct ipk_vnet_hdr *h, const uint8_t *p);
/* Write h at p (hdr_len bytes: IPK_VNET_HDR_LEN or _LEGACY). */
void ipk_vnet_hdr_store(const struct ipk_vnet_hdr *h, uint8_t *p, uint32_t hdr_len);

#ifdef __cplusplus
}
#endif
#endif
