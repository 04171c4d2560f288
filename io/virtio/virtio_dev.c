/*
 * The virtio-net device over any transport: feature negotiation (§3.1.1, §5.1.3),
 * the two queues (§5.1.2: receiveq1 = 0, transmitq1 = 1) over one buffer pool, and
 * ixy's raw batch calls.
 */
#include "virtio.h"
#include "io_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define VIO_BUF_SIZE 2048u

void ipk_virtio_opts_default(struct ipk_virtio_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->csum = 1;
	o->tso = 1;
	o->mrg = 1;
	o->event = 1;
	o->qsize = 256;
}

static uint32_t vio_nbufs(const struct ipk_virtio_opts *o)
{
	return o->nbufs ? o->nbufs : 4u * o->qsize;
}

static size_t pow2_ge(size_t v)
{
	size_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

size_t ipk_virtio_mem_bytes(const struct ipk_virtio_opts *o)
{
	size_t ring = pow2_ge(ipk_vq_ring_bytes(o->qsize));

	/* two rings, each aligned to its size, then the pool: worst-case padding included */
	return 4 * ring + (size_t)vio_nbufs(o) * VIO_BUF_SIZE + VIO_BUF_SIZE;
}

/* The features we ask for: the offloads the options allow, each with what the
 * specification requires beside it (§5.1.3.1: HOST_TSO* needs CSUM, GUEST_TSO*
 * needs GUEST_CSUM), and GUEST_TSO only with mergeable buffers (else every receive
 * buffer would have to hold 64 KiB, §5.1.6.3.1). */
static uint64_t vio_wanted(const struct ipk_virtio_opts *o)
{
	uint64_t f = IPK_VIRTIO_BIT(IPK_VIRTIO_F_VERSION_1);

	if (o->mrg)
		f |= IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_MRG_RXBUF);
	if (o->csum)
		f |= IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_CSUM) | IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_GUEST_CSUM);
	if (o->csum && o->tso)
		f |= IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_HOST_TSO4) |
		     IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_HOST_TSO6);
	if (o->csum && o->tso && o->mrg)
		f |= IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_GUEST_TSO4) |
		     IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_GUEST_TSO6);
	return f;
}

static int vio_negotiate(struct ipk_virtio *d, const struct ipk_virtio_opts *o, char *err,
                         size_t el)
{
	uint64_t f;
	int rc = d->t->get_features(d->ctx, &d->dev_features, err, el);

	if (rc < 0)
		return rc;
	f = vio_wanted(o) & d->dev_features;
	/* a device offering GUEST_TSO4 without GUEST_CSUM breaks §5.1.3.1: take neither */
	if (!(f & IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_GUEST_CSUM)))
		f &= ~(IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_GUEST_TSO4) |
		       IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_GUEST_TSO6));
	if (!(f & IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_CSUM)))
		f &= ~(IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_HOST_TSO4) |
		       IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_HOST_TSO6));
	if (!(f & IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_MRG_RXBUF)))
		f &= ~(IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_GUEST_TSO4) |
		       IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_GUEST_TSO6));
	if ((rc = d->t->set_features(d->ctx, f, err, el)) < 0)
		return rc;
	d->features = f;
	/* §5.1.6: the header has num_buffers with VERSION_1 or MRG_RXBUF (12 bytes) */
	d->hdr_len = (f & (IPK_VIRTIO_BIT(IPK_VIRTIO_F_VERSION_1) |
	                   IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_MRG_RXBUF))) ?
	                     IPK_VNET_HDR_LEN : IPK_VNET_HDR_LEN_LEGACY;
	return 0;
}

static int vio_queues(struct ipk_virtio *d, const struct ipk_virtio_opts *o, char *err,
                      size_t el)
{
	struct ipk_vq_ops ops = d->t->vq;
	uint16_t qs[2];
	int q, rc;

	ops.ctx = d->ctx;
	for (q = 0; q < 2; q++) {
		uint16_t max = d->t->queue_max(d->ctx, (uint16_t)q);

		if (max == 0)
			return ipk_io_err(err, el, ENODEV, "virtio: the device has no queue %d", q);
		qs[q] = o->qsize < max ? o->qsize : max;
	}
	d->pool = o->pool ? o->pool : &d->own_pool;
	if (!o->pool && (rc = ipk_vq_pool_init(&d->own_pool, &ops, vio_nbufs(o), VIO_BUF_SIZE)) < 0)
		return ipk_io_err(err, el, -rc, "virtio: buffer pool of %u: %s", vio_nbufs(o),
		                  strerror(-rc));
	if ((rc = ipk_vq_init(&d->rxq, 0, qs[0], &ops, d->pool, 1)) < 0 ||
	    (rc = ipk_vq_init(&d->txq, 1, qs[1], &ops, d->pool, 0)) < 0)
		return ipk_io_err(err, el, -rc, "virtio: queues of %u entries: %s", o->qsize,
		                  strerror(-rc));
	if ((rc = d->t->queue_setup(d->ctx, &d->rxq, err, el)) < 0 ||
	    (rc = d->t->queue_setup(d->ctx, &d->txq, err, el)) < 0)
		return rc;
	/* receive buffers in place before the device starts looking */
	ipk_vq_refill(&d->rxq, d->rxq.size);
	return 0;
}

int ipk_virtio_start(struct ipk_virtio *d, const struct ipk_virtio_tops *t, void *ctx,
                     const struct ipk_virtio_opts *o, char *err, size_t el)
{
	int rc;

	memset(d, 0, sizeof(*d));
	d->t = t;
	d->ctx = ctx;
	d->event = o->event && t->queue_fd(ctx, 0) >= 0;
	if (o->qsize == 0 || o->qsize > IPK_VQ_MAX_SIZE || (o->qsize & (o->qsize - 1)))
		return ipk_io_err(err, el, EINVAL, "virtio: qsize=%u must be a power of two up "
		                  "to %u", o->qsize, IPK_VQ_MAX_SIZE);
	if ((rc = vio_negotiate(d, o, err, el)) < 0 || (rc = vio_queues(d, o, err, el)) < 0 ||
	    (rc = t->start(ctx, err, el)) < 0) {
		ipk_vq_fini(&d->rxq);
		ipk_vq_fini(&d->txq);
		ipk_vq_pool_fini(&d->own_pool);
		return rc;
	}
	return 0;
}

void ipk_virtio_stop(struct ipk_virtio *d)
{
	if (!d->t)
		return;
	d->t->close(d->ctx); /* the device stops first: then the rings are ours again */
	ipk_vq_fini(&d->rxq);
	ipk_vq_fini(&d->txq);
	ipk_vq_pool_fini(&d->own_pool);
	d->t = NULL;
}

int ipk_virtio_rx_batch(struct ipk_virtio *d, struct ipk_vq_rx *out, int n)
{
	int got = ipk_vq_rx_harvest(&d->rxq, out, n);

	if (got > 0 && ipk_vq_refill(&d->rxq, d->rxq.nfree) > 0)
		(void)ipk_vq_kick(&d->rxq);
	return got;
}

int ipk_virtio_tx_batch(struct ipk_virtio *d, const uint32_t *bufs, const uint32_t *lens, int n)
{
	int i;

	if (d->txq.nfree < (uint16_t)(n < 0xffff ? n : 0xffff))
		(void)ipk_vq_tx_reclaim(&d->txq);
	for (i = 0; i < n; i++)
		if (ipk_vq_add(&d->txq, &bufs[i], &lens[i], 1) < 0)
			break;
	if (i > 0) {
		ipk_vq_publish(&d->txq);
		(void)ipk_vq_kick(&d->txq);
	}
	return i;
}

int ipk_virtio_open(struct ipk_virtio *d, const char *spec_dev, struct ipk_vu_mem *mem,
                    const struct ipk_virtio_opts *o, char *err, size_t el)
{
	const struct ipk_virtio_tops *t = NULL;
	void *ctx = NULL;
	int rc;

	memset(d, 0, sizeof(*d));
	if (strncmp(spec_dev, "vhost-user=", 11) == 0) {
		struct ipk_vu_mem *own = mem;

		if (!own && !(own = ipk_vu_mem_create(ipk_virtio_mem_bytes(o), err, el)))
			return -ENOMEM;
		rc = ipk_vu_open(spec_dev + 11, own, 5000, o->event, &t, &ctx, err, el);
		if (!mem)
			ipk_vu_mem_put(own); /* the transport holds its own reference */
		if (rc < 0)
			return rc;
	} else if (strncmp(spec_dev, "pci=", 4) == 0) {
#ifdef IPK_IO_HAVE_VIRTIO_PCI
		if ((rc = ipk_virtio_pci_open(spec_dev + 4, o, &t, &ctx, err, el)) < 0)
			return rc;
#else
		return ipk_io_err(err, el, ENOTSUP, "virtio: the PCI transport is not built in");
#endif
	} else {
		return ipk_io_err(err, el, EINVAL, "virtio: device '%s' is neither "
		                  "vhost-user=PATH nor pci=ADDR", spec_dev);
	}
	rc = ipk_virtio_start(d, t, ctx, o, err, el);
	if (rc < 0)
		t->close(ctx);
	return rc;
}
