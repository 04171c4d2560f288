/*
 * virtio-net over the PCI transport as an ipkit io backend: `virtio:pci=ADDR`.
 *
 *   open:  §3.1.1 initialization (reset, ACKNOWLEDGE, DRIVER, features,
 *          FEATURES_OK, queues, DRIVER_OK), one receive and one transmit queue
 *   rx:    take used receive buffers, join mergeable ones (§5.1.6.4), copy the frame
 *          into a pool packet, hand the buffers back, refill, kick
 *   tx:    reclaim finished chains, copy each frame behind a virtio-net header into
 *          ring buffers (several descriptors for a TSO super-frame), publish, kick
 *
 * Options (each offload can be switched off): csum=0|1 (VIRTIO_NET_F_CSUM and
 * GUEST_CSUM), gso=0|1 (HOST_TSO4/6, and GUEST_TSO4/6 when mergeable buffers are on),
 * mrg=0|1 (VIRTIO_NET_F_MRG_RXBUF), qsize=N (modern devices: ring entries, default
 * 256; a legacy device fixes its own).
 *
 * Polling only, no interrupts: the device stays unbound from every kernel driver,
 * so an interrupt could reach this process only through VFIO's eventfds, and the
 * node polls its backend on every loop turn anyway (when idle it naps between
 * polls, NODE_NOFD_NAP_NS). The rings say so to the device
 * (VIRTQ_AVAIL_F_NO_INTERRUPT), which then raises none.
 *
 * The copy on each side is the price of the pool split: ipkit's packets live in
 * the io pool (any memory), the device reaches only the hugepage ring buffers.
 */
#include "io_internal.h"
#include "vnet.h"
#include "pci.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define VNET_RXQ 0                  /* §5.1.2: receiveq1 */
#define VNET_TXQ 1                  /* §5.1.2: transmitq1 */
#define VNET_BUF 2048u              /* ring buffer bytes */
#define VNET_NBUFS 1024u            /* per pool (rx and tx each) */
#define VNET_HELD 256               /* used rx entries held between bursts */
#define VNET_MAX_SEG 40u            /* descriptors of one frame (64 KiB / 2 KiB + 1) */
#define VNET_TSO_MAX 64000u         /* TCP payload of a super-frame (IPv4 length limit) */
#define VNET_LRO_FRAME 65550u       /* largest frame taken on receive (14 + 65535) */

struct vnet_priv {
	struct ipk_vpci dev;
	struct ipk_vq_pool rxp, txp;
	struct ipk_vq rxq, txq;
	uint64_t feat;              /* negotiated */
	uint32_t hdr_len;           /* 12, or 10 for a legacy device without MRG_RXBUF */
	int mrg;
	struct ipk_pool *large;     /* LRO frames above a pool buffer */
	struct ipk_vq_rx held[VNET_HELD];
	int nheld;
	int tx_unkicked;            /* published since the last kick */
	uint64_t bad_frames;        /* malformed from the device (in rx_drops too) */
};

static int has(uint64_t f, int bit) { return (f & IPK_VIRTIO_BIT(bit)) != 0; }

/* ---------------------------------------------------------------- open */

/* What we ask for, from the options, of what the device offers (§5.1.3). */
static uint64_t vnet_want(const struct vnet_priv *v, uint64_t offered, int csum, int gso,
                          int mrg)
{
	uint64_t w = IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_MAC) | IPK_VIRTIO_BIT(IPK_VIRTIO_F_ANY_LAYOUT);

	if (!v->dev.legacy)
		w |= IPK_VIRTIO_BIT(IPK_VIRTIO_F_VERSION_1);
	if (mrg)
		w |= IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_MRG_RXBUF);
	if (csum) {
		w |= IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_CSUM) | IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_GUEST_CSUM);
		/* §5.1.3.1: HOST_TSO needs CSUM, GUEST_TSO needs GUEST_CSUM; receiving
		 * super-frames needs buffers that hold them: only with MRG_RXBUF */
		if (gso)
			w |= IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_HOST_TSO4) |
			     IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_HOST_TSO6);
		if (gso && mrg)
			w |= IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_GUEST_TSO4) |
			     IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_GUEST_TSO6);
	}
	return w & offered;
}

static void vnet_caps(struct ipk_io *io, struct vnet_priv *v)
{
	uint64_t f = v->feat;
	int i;

	io->caps.link = IPK_LINK_ETH;
	io->caps.nqueues = 1;
	io->caps.mtu = 1500;
	io->caps.offloads = IPK_CAP_SG; /* chains are copied into the ring buffers */
	if (has(f, IPK_VIRTIO_NET_F_CSUM))
		io->caps.offloads |= IPK_CAP_TX_CSUM_TCP | IPK_CAP_TX_CSUM_UDP | IPK_CAP_TX_CSUM_TCP6;
	if (has(f, IPK_VIRTIO_NET_F_GUEST_CSUM))
		io->caps.offloads |= IPK_CAP_RX_CSUM_L4;
	if (has(f, IPK_VIRTIO_NET_F_HOST_TSO4))
		io->caps.offloads |= IPK_CAP_TSO;
	if (has(f, IPK_VIRTIO_NET_F_HOST_TSO6))
		io->caps.offloads |= IPK_CAP_TSO6;
	if (io->caps.offloads & (IPK_CAP_TSO | IPK_CAP_TSO6))
		io->caps.tso_max = VNET_TSO_MAX;
	if (v->large)
		io->caps.offloads |= IPK_CAP_LRO;
	if (has(f, IPK_VIRTIO_NET_F_MAC)) {
		for (i = 0; i < 6; i++)
			io->caps.mac[i] = ipk_vpci_cfg8(&v->dev, (uint32_t)i);
	} else if (getrandom(io->caps.mac, 6, 0) == 6) {
		io->caps.mac[0] = (uint8_t)((io->caps.mac[0] & 0xfe) | 0x02);
	}
}

/* §3.1.1 steps 1-6: reset, ACKNOWLEDGE, DRIVER, negotiate, FEATURES_OK. */
static int vnet_negotiate(struct vnet_priv *v, int csum, int gso, int mrg, char *err,
                          size_t errlen)
{
	struct ipk_vpci *d = &v->dev;
	uint64_t offered;

	if (ipk_vpci_reset(d) < 0)
		return ipk_io_err(err, errlen, ETIMEDOUT, "virtio-pci %s: reset did not finish",
		                  d->addr);
	ipk_vpci_set_status(d, IPK_VPCI_S_ACKNOWLEDGE);
	ipk_vpci_set_status(d, IPK_VPCI_S_ACKNOWLEDGE | IPK_VPCI_S_DRIVER);
	offered = ipk_vpci_device_features(d);
	if (!d->legacy && !has(offered, IPK_VIRTIO_F_VERSION_1))
		return ipk_io_err(err, errlen, ENOTSUP,
		                  "virtio-pci %s: modern device without VIRTIO_F_VERSION_1", d->addr);
	v->feat = vnet_want(v, offered, csum, gso, mrg);
	ipk_vpci_driver_features(d, v->feat);
	if (!d->legacy) {
		ipk_vpci_set_status(d, IPK_VPCI_S_ACKNOWLEDGE | IPK_VPCI_S_DRIVER |
		                       IPK_VPCI_S_FEATURES_OK);
		/* §3.1.1 step 6: the device keeps FEATURES_OK only if it accepts them */
		if (!(ipk_vpci_status(d) & IPK_VPCI_S_FEATURES_OK))
			return ipk_io_err(err, errlen, ENOTSUP,
			                  "virtio-pci %s: device refused features 0x%llx", d->addr,
			                  (unsigned long long)v->feat);
	}
	v->mrg = has(v->feat, IPK_VIRTIO_NET_F_MRG_RXBUF);
	/* §5.1.6: 12 bytes with VERSION_1 or MRG_RXBUF, else the legacy 10 */
	v->hdr_len = (!d->legacy || v->mrg) ? IPK_VNET_HDR_LEN : IPK_VNET_HDR_LEN_LEGACY;
	return 0;
}

/* §3.1.1 step 7: the queues; then DRIVER_OK. */
static int vnet_queues(struct vnet_priv *v, uint16_t want, char *err, size_t errlen)
{
	struct ipk_vpci *d = &v->dev;
	struct ipk_vq_ops ops;
	uint16_t rxn = ipk_vpci_queue_size(d, VNET_RXQ, want);
	uint16_t txn = ipk_vpci_queue_size(d, VNET_TXQ, want);
	size_t bytes;
	int rc;

	if (rxn == 0 || txn == 0 || rxn > 1024 || txn > 1024 || (rxn & (rxn - 1)) ||
	    (txn & (txn - 1)))
		return ipk_io_err(err, errlen, EINVAL,
		                  "virtio-pci %s: unusable queue sizes rx %u tx %u", d->addr, rxn, txn);
	bytes = 2 * (size_t)VNET_NBUFS * VNET_BUF + 2 * 65536 + IPK_VPCI_HUGE;
	rc = ipk_vpci_dma_init(d, bytes, err, errlen);
	if (rc < 0)
		return rc;
	ipk_vpci_vq_ops(d, &ops);
	if (ipk_vq_pool_init(&v->rxp, &ops, VNET_NBUFS, VNET_BUF) < 0 ||
	    ipk_vq_pool_init(&v->txp, &ops, VNET_NBUFS, VNET_BUF) < 0)
		return ipk_io_err(err, errlen, ENOMEM, "virtio-pci %s: buffer pools", d->addr);
	if (ipk_vq_init(&v->rxq, VNET_RXQ, rxn, &ops, &v->rxp, 1) < 0 ||
	    ipk_vq_init(&v->txq, VNET_TXQ, txn, &ops, &v->txp, 0) < 0)
		return ipk_io_err(err, errlen, ENOMEM, "virtio-pci %s: rings", d->addr);
	if (ipk_vpci_queue_setup(d, &v->rxq) < 0 || ipk_vpci_queue_setup(d, &v->txq) < 0)
		return ipk_io_err(err, errlen, EINVAL, "virtio-pci %s: queue set-up refused", d->addr);
	ipk_vq_refill(&v->rxq, rxn);
	ipk_vpci_set_status(d, (uint8_t)(ipk_vpci_status(d) | IPK_VPCI_S_DRIVER_OK));
	if (ipk_vpci_status(d) & IPK_VPCI_S_FAILED)
		return ipk_io_err(err, errlen, EIO, "virtio-pci %s: device set FAILED", d->addr);
	(void)ipk_vq_kick(&v->rxq);
	return 0;
}

static void vnet_close(struct ipk_io *io)
{
	struct vnet_priv *v = (struct vnet_priv *)io->priv;

	/* reset first: the device must not touch the rings while they go away */
	(void)ipk_vpci_reset(&v->dev);
	ipk_vq_fini(&v->rxq);  /* a queue never set up is all zeros: nothing to do */
	ipk_vq_fini(&v->txq);
	ipk_vq_pool_fini(&v->rxp);
	ipk_vq_pool_fini(&v->txp);
	ipk_vpci_close(&v->dev);
}

static int vnet_open(struct ipk_io *io, const struct ipk_io_args *a, char *err, size_t errlen)
{
	static const char *const known[] = { "pci", "csum", "gso", "mrg", "qsize", NULL };
	struct vnet_priv *v = (struct vnet_priv *)io->priv;
	const char *addr = ipk_io_arg(a, "pci");
	int csum, gso, mrg, rc;
	long qsize;

	v->dev.io_fd = v->dev.cfg_fd = -1;
	if (strcmp(a->dev, "pci") != 0 || !addr)
		return ipk_io_err(err, errlen, EINVAL, "virtio: expected virtio:pci=ADDR");
	if (ipk_io_arg_check(a, known, err, errlen) < 0)
		return -EINVAL;
	csum = ipk_io_arg_bool(a, "csum", 1, err, errlen);
	gso = ipk_io_arg_bool(a, "gso", 1, err, errlen);
	mrg = ipk_io_arg_bool(a, "mrg", 1, err, errlen);
	qsize = ipk_io_arg_int(a, "qsize", 256, err, errlen);
	if (csum < 0 || gso < 0 || mrg < 0 || qsize < 1 || qsize > 1024)
		return -EINVAL;
	rc = ipk_vpci_open(&v->dev, "/sys", addr, err, errlen);
	if (rc < 0)
		return rc;
	rc = vnet_negotiate(v, csum, gso, mrg, err, errlen);
	if (rc == 0 && has(v->feat, IPK_VIRTIO_NET_F_GUEST_TSO4)) {
		v->large = ipk_pool_large(io->pool);
		if (!v->large)
			rc = ipk_io_err(err, errlen, ENOMEM, "virtio-pci %s: no large pool for LRO",
			                addr);
	}
	if (rc == 0)
		rc = vnet_queues(v, (uint16_t)qsize, err, errlen);
	if (rc < 0) {
		ipk_vpci_set_status(&v->dev, IPK_VPCI_S_FAILED);
		vnet_close(io);
		return rc;
	}
	vnet_caps(io, v);
	return 0;
}

/* ------------------------------------------------------------------ rx */

/* Drop the first k held entries' buffers (back to the pool) and shift the rest. */
static void held_consume(struct vnet_priv *v, int k)
{
	int i;

	for (i = 0; i < k; i++)
		ipk_vq_pool_free_bulk(&v->rxp, &v->held[i].buf, 1);
	memmove(v->held, v->held + k, (size_t)(v->nheld - k) * sizeof(v->held[0]));
	v->nheld -= k;
}

/* Copy the frame spread over held[0..nb-1] (header in the first) into a packet. */
static struct ipk_pkt *rx_copy(struct ipk_io *io, struct vnet_priv *v, int nb, uint32_t flen)
{
	uint32_t room = ipk_pool_buf_size(io->pool) - ipk_pool_headroom(io->pool), done = 0;
	struct ipk_pkt *k;
	int i;

	if (flen <= room)
		k = ipk_pkt_alloc(io->pool);
	else if (v->large && flen <= VNET_LRO_FRAME)
		k = ipk_pkt_alloc(v->large);
	else
		return NULL;
	if (!k)
		return NULL;
	for (i = 0; i < nb; i++) {
		uint32_t skip = i == 0 ? v->hdr_len : 0, n = v->held[i].len - skip;

		memcpy(ipk_pkt_mtod(k) + done, ipk_vq_pool_buf(&v->rxp, v->held[i].buf) + skip, n);
		done += n;
	}
	k->len = flen;
	return k;
}

/* One frame from the head of held: 1 taken (into *out, NULL when dropped), 0 when
 * the frame's buffers have not all arrived yet. */
static int rx_frame(struct ipk_io *io, struct vnet_priv *v, struct ipk_pkt **out)
{
	struct ipk_vnet_hdr h;
	struct virtio_net_hdr lh;
	uint32_t flen = 0;
	int nb = 1, i;
	struct ipk_pkt *k;

	*out = NULL;
	if (v->held[0].len < v->hdr_len) {
		held_consume(v, 1);
		goto bad;
	}
	ipk_vnet_hdr_load(&h, ipk_vq_pool_buf(&v->rxp, v->held[0].buf));
	if (v->mrg) {
		/* §5.1.6.4: num_buffers >= 1; more than we can hold is a lie */
		if (h.num_buffers == 0 || h.num_buffers > VNET_MAX_SEG) {
			held_consume(v, 1);
			goto bad;
		}
		nb = h.num_buffers;
		if (nb > v->nheld)
			return v->nheld == VNET_HELD ? (held_consume(v, 1), 1) : 0;
	}
	for (i = 0; i < nb; i++)
		flen += v->held[i].len; /* each <= VNET_BUF: checked by the ring code */
	flen -= v->hdr_len;
	k = flen >= 14 ? rx_copy(io, v, nb, flen) : NULL;
	held_consume(v, nb);
	if (!k)
		goto bad;
	memset(&lh, 0, sizeof(lh));
	lh.flags = h.flags;
	lh.gso_type = h.gso_type;
	/* above the MTU only as a TCP super-frame the device says it coalesced */
	if (flen > io->caps.mtu + 14u &&
	    !(v->large && ipk_vnet_rx_big_ok(&lh, ipk_pkt_mtod(k) + 14, flen - 14, io->caps.mtu))) {
		ipk_pkt_free(k);
		goto bad;
	}
	if (has(v->feat, IPK_VIRTIO_NET_F_GUEST_CSUM))
		k->rx_csum = ipk_vnet_rx_csum(&lh);
	io->st.rx_pkts++;
	io->st.rx_bytes += flen;
	*out = k;
	return 1;
bad:
	io->st.rx_drops++;
	v->bad_frames++;
	return 1;
}

static int vnet_tx_reclaim(struct vnet_priv *v) { return ipk_vq_tx_reclaim(&v->txq); }

static int vnet_rx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct vnet_priv *v = (struct vnet_priv *)io->priv;
	int got = 0;

	(void)vnet_tx_reclaim(v);
	if (v->nheld < VNET_HELD)
		v->nheld += ipk_vq_rx_harvest(&v->rxq, v->held + v->nheld, VNET_HELD - v->nheld);
	while (got < n && v->nheld > 0) {
		struct ipk_pkt *k;

		if (!rx_frame(io, v, &k))
			break;
		if (k)
			pkts[got++] = k;
	}
	if (ipk_vq_refill(&v->rxq, ipk_vq_free_descs(&v->rxq)) > 0)
		(void)ipk_vq_kick(&v->rxq);
	return got;
}

/* ------------------------------------------------------------------ tx */

/* Copy one frame (chain k) behind its header into ring buffers and post it.
 * 0, or -ENOSPC when the ring or the pool is full now (k stays the caller's). */
static int tx_one(struct ipk_io *io, struct vnet_priv *v, struct ipk_pkt *k)
{
	uint32_t bufs[VNET_MAX_SEG], lens[VNET_MAX_SEG], total, off = 0, i, nseg, got;
	struct virtio_net_hdr lh;
	struct ipk_vnet_hdr h;

	total = v->hdr_len + ipk_pkt_chain_len(k);
	nseg = (total + VNET_BUF - 1) / VNET_BUF;
	if (nseg > VNET_MAX_SEG)
		return -EMSGSIZE;
	if (nseg > ipk_vq_free_descs(&v->txq))
		return -ENOSPC;
	got = ipk_vq_pool_alloc_bulk(&v->txp, bufs, nseg);
	if (got < nseg) {
		ipk_vq_pool_free_bulk(&v->txp, bufs, got);
		return -ENOSPC;
	}
	ipk_vnet_from_meta(&k->meta, &lh);
	memset(&h, 0, sizeof(h));
	h.flags = lh.flags;
	h.gso_type = lh.gso_type;
	h.hdr_len = lh.hdr_len;
	h.gso_size = lh.gso_size;
	h.csum_start = lh.csum_start;
	h.csum_offset = lh.csum_offset;
	ipk_vnet_hdr_store(&h, ipk_vq_pool_buf(&v->txp, bufs[0]), v->hdr_len);
	for (i = 0; i < nseg; i++) {
		uint32_t start = i == 0 ? v->hdr_len : 0;
		uint32_t n = total - i * VNET_BUF < VNET_BUF ? total - i * VNET_BUF : VNET_BUF;

		off += ipk_pkt_copy_out(k, off, ipk_vq_pool_buf(&v->txp, bufs[i]) + start, n - start);
		lens[i] = n;
	}
	if (ipk_vq_add(&v->txq, bufs, lens, (uint16_t)nseg) < 0) {
		ipk_vq_pool_free_bulk(&v->txp, bufs, nseg);
		return -ENOSPC;
	}
	io->st.tx_pkts++;
	io->st.tx_bytes += total - v->hdr_len;
	return 0;
}

static int vnet_flush(struct ipk_io *io)
{
	struct vnet_priv *v = (struct vnet_priv *)io->priv;
	int rc;

	if (!v->tx_unkicked)
		return 0;
	v->tx_unkicked = 0;
	rc = ipk_vq_kick(&v->txq);
	if (rc < 0) {
		io->st.tx_errors++;
		return rc;
	}
	return 0;
}

static int vnet_tx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct vnet_priv *v = (struct vnet_priv *)io->priv;
	int i;

	(void)vnet_tx_reclaim(v);
	for (i = 0; i < n; i++) {
		int rc = tx_one(io, v, pkts[i]);

		if (rc == -ENOSPC)
			break;
		if (rc < 0)
			io->st.tx_drops++; /* too large for any ring: dropped, but taken */
		ipk_pkt_free_chain(pkts[i]);
	}
	if (i > 0) {
		ipk_vq_publish(&v->txq);
		v->tx_unkicked = 1;
		(void)vnet_flush(io);
	}
	return i;
}

static int vnet_fd(const struct ipk_io *io)
{
	(void)io;
	return -EOPNOTSUPP; /* polling only: see the top of this file */
}

const struct ipk_io_backend ipk_io_virtio_pci_backend = {
	"virtio", sizeof(struct vnet_priv), vnet_open, vnet_rx_burst, vnet_tx_burst,
	vnet_flush, vnet_fd, NULL, vnet_close,
};
