/*
 * The io backend "virtio:" — ipkit's own virtio-net driver under the stack.
 *
 *   virtio:vhost-user=PATH[,csum=0|1][,tso=0|1][,mrg=0|1][,event=0|1][,qsize=N]
 *         [,mtu=M][,mac=xx:xx:xx:xx:xx:xx]
 *   virtio:pci=0000:00:03.0[,...]            (where the PCI transport is built)
 *
 * Frames are copied once each way between the stack's packets (struct ipk_pkt) and
 * the device's buffers: the device reaches only the memory the transport shares with
 * it (a memfd, hugepages), not the stack's pool. Transmit writes the virtio-net
 * header from the core's offload marks (io/vnet.h) and spreads a large (TSO) frame
 * over a descriptor chain; receive reads the header, joins mergeable buffers
 * (§5.1.6.4) into one packet (from the pool's large companion when it is bigger than
 * a normal buffer) and reports the checksum state.
 *
 * Event mode (event=1, the default): ipk_io_fd is the receive queue's call eventfd;
 * ipk_io_arm turns the queue's interrupts on (§2.7.7) just before the node sleeps and
 * the next receive turns them off again, so a busy node costs the device no eventfd
 * writes. Poll mode (event=0): no call fd at all.
 */
#include "virtio.h"
#include "io_internal.h"
#include "vnet.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define VIO_BATCH 64
#define VIO_MAX_MRG 64u                     /* buffers one received frame may span */
#define VIO_TSO_MAX 64000u                  /* as TAP: IPv4 total length <= 65535 */

struct vio_priv {
	struct ipk_virtio d;
	uint32_t mtu;
	/* a mergeable frame being joined across receive entries (and calls) */
	struct ipk_pkt *mrg_pkt;
	uint32_t mrg_left;                  /* buffers still to come */
	int mrg_drop;                       /* frame already refused: swallow the rest */
	struct ipk_vnet_hdr mrg_hdr;
	uint64_t bad_seen;                  /* device errors already in st.rx_drops */
};

static struct vio_priv *vio(const struct ipk_io *io) { return (struct vio_priv *)io->priv; }

static const char *const vio_keys[] = { "csum", "tso", "mrg", "event", "qsize", "mtu", "mac",
                                        NULL };

static int vio_mac(const char *s, uint8_t mac[6])
{
	unsigned v[6];
	int i;

	if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
		return -1;
	for (i = 0; i < 6; i++)
		mac[i] = (uint8_t)v[i];
	return (mac[0] & 1) ? -1 : 0; /* a multicast address is no station's */
}

static int vio_parse(const struct ipk_io_args *a, struct ipk_virtio_opts *o, long *mtu,
                     uint8_t mac[6], char *err, size_t el)
{
	long qsize;
	int rc = ipk_io_arg_check(a, vio_keys, err, el);

	if (rc < 0)
		return rc;
	ipk_virtio_opts_default(o);
	if ((o->csum = ipk_io_arg_bool(a, "csum", 1, err, el)) < 0 ||
	    (o->tso = ipk_io_arg_bool(a, "tso", 1, err, el)) < 0 ||
	    (o->mrg = ipk_io_arg_bool(a, "mrg", 1, err, el)) < 0 ||
	    (o->event = ipk_io_arg_bool(a, "event", 1, err, el)) < 0)
		return -EINVAL;
	qsize = ipk_io_arg_int(a, "qsize", 256, err, el);
	*mtu = ipk_io_arg_int(a, "mtu", 1500, err, el);
	if (qsize < 0 || *mtu < 0)
		return -EINVAL;
	if (qsize < 16 || qsize > 4096 || (qsize & (qsize - 1)))
		return ipk_io_err(err, el, EINVAL, "virtio: qsize=%ld must be a power of two in "
		                  "16..4096", qsize);
	/* a frame must fit a non-mergeable 2 KiB buffer with its header */
	if (*mtu < 68 || *mtu > 2048 - 14 - (long)IPK_VNET_HDR_LEN)
		return ipk_io_err(err, el, EINVAL, "virtio: mtu=%ld out of range 68..%u", *mtu,
		                  2048 - 14 - IPK_VNET_HDR_LEN);
	o->qsize = (uint16_t)qsize;
	if (ipk_io_arg(a, "mac")) {
		if (vio_mac(ipk_io_arg(a, "mac"), mac) < 0)
			return ipk_io_err(err, el, EINVAL, "virtio: mac=%s is not a unicast "
			                  "xx:xx:xx:xx:xx:xx", ipk_io_arg(a, "mac"));
	} else {
		/* vhost-user has no config space: a random locally administered address */
		if (getrandom(mac, 6, 0) != 6)
			return ipk_io_err(err, el, EIO, "virtio: getrandom: %s", strerror(errno));
		mac[0] = (uint8_t)((mac[0] & 0xfe) | 0x02);
	}
	return 0;
}

static uint32_t vio_caps(uint64_t f)
{
	uint32_t c = 0;

	if (f & IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_CSUM))
		c |= IPK_CAP_TX_CSUM_TCP | IPK_CAP_TX_CSUM_UDP | IPK_CAP_TX_CSUM_TCP6 | IPK_CAP_SG;
	if (f & IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_HOST_TSO4))
		c |= IPK_CAP_TSO;
	if (f & IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_HOST_TSO6))
		c |= IPK_CAP_TSO6;
	if (f & IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_GUEST_CSUM))
		c |= IPK_CAP_RX_CSUM_L4;
	if (f & (IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_GUEST_TSO4) |
	         IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_GUEST_TSO6)))
		c |= IPK_CAP_LRO;
	return c;
}

static int vio_open(struct ipk_io *io, const struct ipk_io_args *a, char *err, size_t el)
{
	struct vio_priv *p = vio(io);
	struct ipk_virtio_opts o;
	long mtu;
	int rc;

	if ((rc = vio_parse(a, &o, &mtu, io->caps.mac, err, el)) < 0)
		return rc;
	if ((rc = ipk_virtio_open(&p->d, a->dev, NULL, &o, err, el)) < 0)
		return rc;
	if (!ipk_io_arg(a, "mac")) /* the device's own address (PCI config) over a random one */
		(void)p->d.t->mac(p->d.ctx, io->caps.mac);
	p->mtu = (uint32_t)mtu;
	io->caps.offloads = vio_caps(p->d.features);
	io->caps.tso_max = (io->caps.offloads & IPK_CAP_TSO) ? VIO_TSO_MAX : 0;
	io->caps.mtu = (uint16_t)mtu;
	io->caps.nqueues = 1;
	io->caps.link = IPK_LINK_ETH;
	if (io->caps.offloads & IPK_CAP_LRO)
		(void)ipk_pool_large(io->pool); /* created now, not on the first big frame */
	return 0;
}

/* --------------------------------------------------------------- receive */

/* Fold the device's per-queue error counters into the io stats. */
static void vio_count_bad(struct ipk_io *io)
{
	struct vio_priv *p = vio(io);
	const struct ipk_vq_stats *s = &p->d.rxq.st, *t = &p->d.txq.st;
	uint64_t bad = s->bad_id + s->bad_len + s->used_ahead + t->bad_id + t->used_ahead;

	if (bad != p->bad_seen) {
		io->st.rx_drops += bad - p->bad_seen;
		p->bad_seen = bad;
	}
}

/* A packet big enough for len bytes: the pool's, or its large companion's. */
static struct ipk_pkt *vio_pkt_for(struct ipk_io *io, uint32_t len)
{
	struct ipk_pool *pool = io->pool;

	if (len > ipk_pool_buf_size(pool) - ipk_pool_headroom(pool)) {
		pool = ipk_pool_large(io->pool);
		if (!pool || len > ipk_pool_buf_size(pool) - ipk_pool_headroom(pool))
			return NULL;
	}
	return ipk_pkt_alloc(pool);
}

/* The first buffer of a frame: header, checks, a packet to copy into. Returns the
 * packet (mrg_left set for more buffers) or NULL when the frame is dropped. */
static struct ipk_pkt *vio_rx_first(struct ipk_io *io, const uint8_t *b, uint32_t len)
{
	struct vio_priv *p = vio(io);
	uint32_t hl = p->d.hdr_len, nbuf = 1, room;
	struct ipk_pkt *k;

	if (len < hl + 14) {
		p->d.drops.short_frame++;
		return NULL;
	}
	ipk_vnet_hdr_load(&p->mrg_hdr, b);
	if (p->d.features & IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_MRG_RXBUF)) {
		nbuf = p->mrg_hdr.num_buffers;
		if (nbuf == 0 || nbuf > VIO_MAX_MRG) {
			p->d.drops.bad_mrg++;
			/* we cannot know where this frame ends: the rest is read as new frames,
			 * each checked again */
			return NULL;
		}
	}
	/* the largest the frame can be: this buffer plus nbuf - 1 full ones */
	room = len - hl + (nbuf - 1) * p->d.pool->buf_size;
	k = vio_pkt_for(io, nbuf == 1 ? len - hl : room);
	p->mrg_left = nbuf - 1;
	p->mrg_drop = 0;
	if (!k) {
		if (room > IPK_POOL_LARGE_BUF - ipk_pool_headroom(io->pool))
			p->d.drops.too_big++;
		else
			p->d.drops.no_pkt++;
		p->mrg_drop = 1;
		return NULL;
	}
	memcpy(ipk_pkt_mtod(k), b + hl, len - hl);
	k->len = len - hl;
	return k;
}

/* The frame is whole: check its size against the MTU and hand it on. */
static void vio_rx_done(struct ipk_io *io, struct ipk_pkt *k, struct ipk_pkt **pkts, int *out)
{
	struct vio_priv *p = vio(io);
	struct virtio_net_hdr h;
	const uint8_t *f = ipk_pkt_mtod(k);

	memset(&h, 0, sizeof(h));
	h.flags = p->mrg_hdr.flags;
	h.gso_type = p->mrg_hdr.gso_type;
	/* Larger than the MTU: only a TCP super-frame, and only when we said we take
	 * them (GUEST_TSO*). A switch such as testpmd's io forwarding passes one on with
	 * gso_type NONE (it forwards DPDK's LRO mbuf as it is): judged as a frame without
	 * a header, the core then checks its checksum itself. */
	if (k->len > 14 + p->mtu &&
	    (!(io->caps.offloads & IPK_CAP_LRO) ||
	     !ipk_vnet_rx_big_ok(h.gso_type == IPK_VNET_GSO_NONE ? NULL : &h, f + 14,
	                         k->len - 14, p->mtu))) {
		p->d.drops.bad_gso++;
		io->st.rx_drops++;
		ipk_pkt_free(k);
		return;
	}
	k->rx_csum = (io->caps.offloads & IPK_CAP_RX_CSUM_L4) ? ipk_vnet_rx_csum(&h) : 0;
	io->st.rx_pkts++;
	io->st.rx_bytes += k->len;
	pkts[(*out)++] = k;
}

/* One used buffer: the start of a frame or a continuation of p->mrg_pkt. */
static void vio_rx_entry(struct ipk_io *io, const struct ipk_vq_rx *e, struct ipk_pkt **pkts,
                         int *out)
{
	struct vio_priv *p = vio(io);
	const uint8_t *b = ipk_vq_pool_buf(p->d.pool, e->buf);

	if (p->mrg_left > 0) {
		p->mrg_left--;
		if (!p->mrg_drop) {
			struct ipk_pkt *k = p->mrg_pkt;
			uint32_t cap = ipk_pool_buf_size(k->pool) - k->off;

			if (k->len + e->len > cap) { /* cannot happen: sized for nbuf buffers */
				p->d.drops.too_big++;
				ipk_pkt_free(k);
				p->mrg_pkt = NULL;
				p->mrg_drop = 1;
			} else {
				memcpy(ipk_pkt_mtod(k) + k->len, b, e->len);
				k->len += e->len;
			}
		}
		if (p->mrg_left == 0 && !p->mrg_drop && p->mrg_pkt) {
			vio_rx_done(io, p->mrg_pkt, pkts, out);
			p->mrg_pkt = NULL;
		} else if (p->mrg_left == 0 && p->mrg_drop) {
			io->st.rx_drops++;
		}
		return;
	}
	p->mrg_pkt = vio_rx_first(io, b, e->len);
	if (!p->mrg_pkt) {
		if (p->mrg_left == 0)
			io->st.rx_drops++;
		return;
	}
	if (p->mrg_left == 0) {
		vio_rx_done(io, p->mrg_pkt, pkts, out);
		p->mrg_pkt = NULL;
	}
}

static int vio_rx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct vio_priv *p = vio(io);
	struct ipk_vq_rx rx[VIO_BATCH];
	uint32_t bufs[VIO_BATCH];
	int out = 0, got, i, total = 0;

	if (p->d.rx_intr_on) {
		ipk_vq_intr(&p->d.rxq, 0);
		p->d.rx_intr_on = 0;
	}
	do {
		int want = n - out < VIO_BATCH ? n - out : VIO_BATCH;

		got = ipk_vq_rx_harvest(&p->d.rxq, rx, want);
		for (i = 0; i < got; i++) {
			vio_rx_entry(io, &rx[i], pkts, &out);
			bufs[i] = rx[i].buf;
		}
		ipk_vq_pool_free_bulk(p->d.pool, bufs, (uint32_t)got);
		total += got;
	} while (got > 0 && out < n);
	if (total > 0 && ipk_vq_refill(&p->d.rxq, p->d.rxq.nfree) > 0)
		(void)ipk_vq_kick(&p->d.rxq);
	vio_count_bad(io);
	return out;
}

/* -------------------------------------------------------------- transmit */

/* Copy one packet (chain) behind its virtio-net header into as many buffers as it
 * needs and post them as one chain. 0, or -ENOSPC when the queue or pool is short. */
static int vio_tx_one(struct ipk_io *io, struct ipk_pkt *k)
{
	struct vio_priv *p = vio(io);
	struct ipk_virtio *d = &p->d;
	uint32_t bs = d->pool->buf_size, total = ipk_pkt_chain_len(k) + d->hdr_len, nseg, i;
	uint32_t bufs[VIO_MAX_MRG], lens[VIO_MAX_MRG], at = 0, off = 0;
	struct virtio_net_hdr vh;
	struct ipk_vnet_hdr h;
	const struct ipk_pkt *s;

	nseg = (total + bs - 1) / bs;
	if (nseg > VIO_MAX_MRG)
		return -EMSGSIZE;
	if (d->txq.nfree < nseg)
		(void)ipk_vq_tx_reclaim(&d->txq);
	if (d->txq.nfree < nseg)
		return -ENOSPC;
	i = ipk_vq_pool_alloc_bulk(d->pool, bufs, nseg);
	if (i < nseg) {
		ipk_vq_pool_free_bulk(d->pool, bufs, i);
		return -ENOSPC;
	}
	ipk_vnet_from_meta(&k->meta, &vh);
	memset(&h, 0, sizeof(h));
	h.flags = vh.flags;
	h.gso_type = vh.gso_type;
	h.hdr_len = vh.hdr_len;
	h.gso_size = vh.gso_size;
	h.csum_start = vh.csum_start;
	h.csum_offset = vh.csum_offset;
	ipk_vnet_hdr_store(&h, ipk_vq_pool_buf(d->pool, bufs[0]), d->hdr_len);
	at = d->hdr_len;
	i = 0;
	for (s = k; s; s = s->next) {
		const uint8_t *src = ipk_pkt_mtod(s);
		uint32_t left = s->len;

		while (left > 0) {
			uint32_t n = bs - at < left ? bs - at : left;

			memcpy(ipk_vq_pool_buf(d->pool, bufs[i]) + at, src, n);
			src += n;
			left -= n;
			at += n;
			off += n;
			if (at == bs && off + d->hdr_len < total) {
				lens[i++] = bs;
				at = 0;
			}
		}
	}
	lens[i] = at;
	(void)ipk_vq_add(&d->txq, bufs, lens, (uint16_t)nseg); /* room checked above */
	return 0;
}

static int vio_tx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct vio_priv *p = vio(io);
	int i;

	for (i = 0; i < n; i++) {
		uint32_t len = ipk_pkt_chain_len(pkts[i]);
		int rc = vio_tx_one(io, pkts[i]);

		if (rc == -ENOSPC)
			break;
		if (rc < 0) {
			io->st.tx_errors++;  /* too large for a chain: dropped, it is ours */
			ipk_pkt_free_chain(pkts[i]);
			continue;
		}
		io->st.tx_pkts++;
		io->st.tx_bytes += len;
		ipk_pkt_free_chain(pkts[i]);
	}
	ipk_vq_publish(&p->d.txq); /* the rest (i < n) stay the caller's (io.h) */
	return i;
}

static int vio_flush(struct ipk_io *io)
{
	struct vio_priv *p = vio(io);
	int rc;

	ipk_vq_publish(&p->d.txq);
	rc = ipk_vq_kick(&p->d.txq);
	if (rc < 0) {
		io->st.tx_errors++;
		return rc == -EAGAIN ? 0 : rc;
	}
	(void)ipk_vq_tx_reclaim(&p->d.txq);
	return 0;
}

/* ------------------------------------------------------------ event mode */

static int vio_fd(const struct ipk_io *io)
{
	const struct vio_priv *p = vio(io);

	return p->d.event ? p->d.t->queue_fd(p->d.ctx, 0) : -EOPNOTSUPP;
}

static int vio_arm(struct ipk_io *io)
{
	struct vio_priv *p = vio(io);
	uint64_t v;
	int fd;

	if (!p->d.event)
		return 0;
	fd = p->d.t->queue_fd(p->d.ctx, 0);
	/* reset the eventfd: a signal from before belongs to frames we have read */
	if (fd >= 0 && read(fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
		io->st.wakeups++;
	p->d.rx_intr_on = 1;
	return ipk_vq_intr(&p->d.rxq, 1);
}

static void vio_close(struct ipk_io *io)
{
	struct vio_priv *p = vio(io);

	if (p->mrg_pkt)
		ipk_pkt_free(p->mrg_pkt);
	ipk_virtio_stop(&p->d);
}

const struct ipk_io_backend ipk_io_virtio_backend = {
	"virtio", sizeof(struct vio_priv), vio_open, vio_rx_burst, vio_tx_burst, vio_flush,
	vio_fd, vio_arm, vio_close,
};

/* Drop counters by reason for tests and tools (io_internal.h). */
int ipk_io_virtio_counters(const struct ipk_io *io, struct ipk_vq_stats *rxq,
                           struct ipk_vq_stats *txq, struct ipk_virtio_drops *drops)
{
	const struct vio_priv *p;

	while (io && io->inner)
		io = io->inner;
	if (!io || io->be != &ipk_io_virtio_backend)
		return -EINVAL;
	p = vio(io);
	if (rxq)
		*rxq = p->d.rxq.st;
	if (txq)
		*txq = p->d.txq.st;
	if (drops)
		*drops = p->d.drops;
	return 0;
}
