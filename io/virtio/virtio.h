/*
 * ipkit's virtio-net driver: one network device (receive queue 0, transmit queue 1,
 * virtio 1.x §5.1.2) over a transport. The transports (vhost-user here, PCI in
 * pci*.c) implement struct ipk_virtio_tops; everything above them — feature choice,
 * queues, the packet paths — is shared.
 *
 * Two ways to use a device:
 *   - the raw batch API below (ipk_virtio_rx_batch / _tx_batch on pool buffers, no
 *     copy), what ixy's forwarder uses and bench/virtio_fwd.c measures;
 *   - the io backend "virtio:" (virtio_io.c), which copies between ipk_pkt and the
 *     device's buffers so the whole stack, ipkit-bench and the examples run on it.
 */
#ifndef IPKIT_IO_VIRTIO_H
#define IPKIT_IO_VIRTIO_H

#include "virtq.h"

#include <stddef.h>
#include <stdint.h>

/* What a transport does for the device layer. Every call gets the transport's ctx
 * (the same one as vq.ctx). 0 or a negative errno unless said otherwise; `err` gets a
 * one-line message. */
struct ipk_virtio_tops {
	const char *name;                 /* "vhost-user", "pci-legacy", "pci-modern" */
	/* §3.1.1 steps 1-3 happen in the transport's open; then: */
	int (*get_features)(void *ctx, uint64_t *features, char *err, size_t el);
	/* §3.1.1 steps 5-6: write the driver's features (and check FEATURES_OK) */
	int (*set_features)(void *ctx, uint64_t features, char *err, size_t el);
	/* Largest size the device allows for queue qid (0: no such queue). */
	uint16_t (*queue_max)(void *ctx, uint16_t qid);
	/* §3.1.1 step 7 / §4.1.5.1.3: tell the device about vq (size, ring addresses). */
	int (*queue_setup)(void *ctx, struct ipk_vq *vq, char *err, size_t el);
	/* §3.1.1 step 8: DRIVER_OK (vhost-user: memory table, then enable the rings). */
	int (*start)(void *ctx, char *err, size_t el);
	/* An fd that becomes readable when queue qid has used entries while its
	 * interrupts are on (vhost-user: the call eventfd), or -EOPNOTSUPP. */
	int (*queue_fd)(void *ctx, uint16_t qid);
	/* The device's MAC from its config space (§5.1.4), or -EOPNOTSUPP. */
	int (*mac)(void *ctx, uint8_t mac[6]);
	/* Stop the device and free everything, the device memory included. */
	void (*close)(void *ctx);
	struct ipk_vq_ops vq;             /* alloc, dev_addr, notify; vq.ctx is ctx */
};

/* Driver choices (the "virtio:" spec options). */
struct ipk_virtio_opts {
	int csum;          /* negotiate CSUM / GUEST_CSUM (default 1) */
	int tso;           /* negotiate HOST_TSO4/6 and GUEST_TSO4/6 (default 1; GUEST_TSO
	                    * needs mrg) */
	int mrg;           /* negotiate MRG_RXBUF (default 1) */
	int event;         /* call eventfd for sleeping (default 1); 0: poll only */
	uint16_t qsize;    /* entries per queue (default 256, capped by the device) */
	uint32_t nbufs;    /* pool buffers (default 4 * qsize) */
	struct ipk_vq_pool *pool; /* NULL: the device's own pool; else one in memory the
	                           * device reaches, shared with other devices (a
	                           * forwarder sends one device's buffers on another) */
};
void ipk_virtio_opts_default(struct ipk_virtio_opts *o);

/* Drops by reason on the driver side (the device's bad entries are per queue in
 * rxq.st / txq.st). */
struct ipk_virtio_drops {
	uint64_t short_frame;   /* used length shorter than the virtio-net header */
	uint64_t bad_mrg;       /* num_buffers 0 or past the limit */
	uint64_t too_big;       /* frame larger than any buffer we can give the stack */
	uint64_t bad_gso;       /* larger than the MTU without an acceptable GSO header */
	uint64_t no_pkt;        /* no ipk_pkt free to copy into */
};

struct ipk_virtio {
	const struct ipk_virtio_tops *t;
	void *ctx;
	uint64_t dev_features, features; /* offered, negotiated */
	uint32_t hdr_len;                /* virtio-net header bytes in front of frames */
	struct ipk_vq_pool *pool;        /* one pool for both queues (forwarding moves
	                                  * a received buffer straight to transmit) */
	struct ipk_vq_pool own_pool;     /* pool points here unless opts gave one */
	struct ipk_vq rxq, txq;
	int event;
	int rx_intr_on;                  /* interrupts of rxq enabled (armed) */
	struct ipk_virtio_drops drops;
};

/* Negotiate features with the device (VERSION_1 required, the offloads `o` allows),
 * set up both queues over a pool of o->nbufs buffers, fill the receive queue and
 * start the device. On failure everything is undone except the transport itself (the
 * caller closes it). 0 or a negative errno with a message in err. */
int ipk_virtio_start(struct ipk_virtio *d, const struct ipk_virtio_tops *t, void *ctx,
                     const struct ipk_virtio_opts *o, char *err, size_t el);
/* Give the queues' buffers back and close the transport. */
void ipk_virtio_stop(struct ipk_virtio *d);

/* Raw receive: up to n completed buffers (each holds hdr_len header bytes, then the
 * frame; the caller owns it and frees it to d->pool or sends it). Refills the queue
 * and kicks when it took any. Bad entries are dropped and counted in rxq.st. */
int ipk_virtio_rx_batch(struct ipk_virtio *d, struct ipk_vq_rx *out, int n);
/* Raw transmit: post n one-buffer frames (lens include the header), publish once,
 * kick when the device wants it. Reclaims completed transmissions first. Returns how
 * many were taken; the rest stay the caller's. */
int ipk_virtio_tx_batch(struct ipk_virtio *d, const uint32_t *bufs, const uint32_t *lens, int n);

/* The vhost-user transport (vhost_user.c). mem: a shared memory domain (NULL: a
 * private one sized for o), so two devices of one process can forward buffers to
 * each other (each device's memory table holds the whole domain). */
struct ipk_vu_mem;
/* A memfd of `size` bytes mapped here, to be carved by the devices using it. */
struct ipk_vu_mem *ipk_vu_mem_create(size_t size, char *err, size_t el);
void ipk_vu_mem_put(struct ipk_vu_mem *m);
/* Carve `size` bytes aligned to `align` out of the domain (zeroed); NULL when full.
 * The device address of a pointer into it is the pointer itself. */
void *ipk_vu_mem_alloc(struct ipk_vu_mem *m, size_t size, size_t align);
/* Bytes a device with options o needs from a domain. */
size_t ipk_virtio_mem_bytes(const struct ipk_virtio_opts *o);
/* Connect to the vhost-user device at path (waiting up to wait_ms for it to listen)
 * and say hello (SET_OWNER). event 0: no call eventfds (poll only). *ctx gets the
 * transport's context. */
int ipk_vu_open(const char *path, struct ipk_vu_mem *mem, int wait_ms, int event,
                const struct ipk_virtio_tops **tops, void **ctx, char *err, size_t el);
/* The PCI transport (pci*.c, when built: IPK_IO_HAVE_VIRTIO_PCI): addr is
 * "0000:00:03.0". Same contract as ipk_vu_open. */
int ipk_virtio_pci_open(const char *addr, const struct ipk_virtio_opts *o,
                        const struct ipk_virtio_tops **tops, void **ctx, char *err, size_t el);

/* Open a whole device: transport + ipk_virtio_start. spec_dev is "vhost-user=PATH"
 * (or "pci=ADDR" where that transport is built). */
int ipk_virtio_open(struct ipk_virtio *d, const char *spec_dev, struct ipk_vu_mem *mem,
                    const struct ipk_virtio_opts *o, char *err, size_t el);

#endif
