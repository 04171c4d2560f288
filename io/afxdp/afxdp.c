/*
 * afxdp: AF_XDP sockets through libxdp (xsk) and libbpf, one socket per queue.
 *
 *   afxdp:DEV[,queue=Q][,mode=skb|drv][,zc=0|1][,prog=0|1][,ip=A.B.C.D][,ring=N]
 *        [,frame=2048|4096][,sg=0|1][,busy_poll=0|1][,csum=0|1]
 *
 * UMEM = the whole area of the pool (frame = one pool buffer, so buf_size must be
 * 2048 or 4096: aligned chunk mode). frame=N states the size the spec needs; the
 * runtime creates its pool with it (ipk_io_spec_buf_size) and open checks the two
 * agree. A frame holds XDP_PACKET_HEADROOM (256) bytes and the frame, so 4 KiB frames
 * carry MTUs up to 3822 (2 KiB: 1774): 2.2x fewer frames per byte than 1500, which is
 * what copy mode pays for (an skb built per transmitted frame, a copy per received
 * one). The fill ring is fed with ipk_pool_buf_get
 * buffers; an rx descriptor becomes a packet with ipk_pkt_attach (no copy). Transmit
 * sends a single-buffer packet of this pool by address (held until the completion
 * ring returns it); chains and foreign buffers are copied into a fresh frame.
 *
 * sg=1: multi-buffer AF_XDP (XDP_USE_SG, Linux >= 6.6): a frame spans several UMEM
 * frames, descriptors chained with XDP_PKT_CONTD, so the MTU may exceed one frame
 * (jumbo frames: fewer, larger frames per byte, which is what copy mode pays per).
 * Received descriptors of one frame become one packet chain (the core takes it with
 * IPK_CAP_LRO: a whole datagram, headers in the first packet); a transmitted chain
 * whose pieces all lie in the UMEM goes out by address, one descriptor per piece,
 * each held until the completion ring returns its address.
 *
 * The XDP program (ipk_xdp.bpf.c, embedded) redirects only ARP and IPv4 for ipkit's
 * address (and, once ipk_io_set_addr6 turned IPv6 on, IPv6 to ipkit's addresses and
 * the ND for them) and passes the rest to the kernel; the address comes from ",ip="
 * or from ipk_io_set_addr (the runtime calls both after open). prog=0 lets libxdp load its
 * default program instead (every frame of the queue to ipkit).
 * mode: drv (native XDP) or skb (generic); without mode= native is tried first.
 * zc=1 asks for zero-copy and fails with a clear message when the driver lacks it.
 *
 * csum=1 (default): the backend advertises IPK_CAP_TX_CSUM_TCP/UDP and _TCP6 (TCP over
 * IPv6), so the core only
 * writes the pseudo-header sum (as for a NIC) and the backend finishes the checksum:
 * in the same pass as its copy into the UMEM frame when it copies the segment (the
 * bench's --zerocopy payload lies outside the UMEM), else in a pass over the pieces
 * sent in place (afxdp_csum.h). One read of the payload fewer per segment on the
 * sender; csum=0 leaves the sum to the core (for comparison).
 *
 * busy_poll=1: preferred busy polling (Documentation/networking/napi.rst "Preferred
 * busy polling", af_xdp.rst): SO_PREFER_BUSY_POLL, SO_BUSY_POLL and
 * SO_BUSY_POLL_BUDGET on the socket, and every rx burst starts with a non-blocking
 * recvfrom that runs the device queue's NAPI poll on our CPU (sendto does the same).
 * The device's napi_defer_hard_irqs and gro_flush_timeout (sysfs) must be set so the
 * kernel leaves the NAPI to us between bursts. The kernel polls the NAPI id of the
 * socket; since Linux 6.13 ("xsk: Bring back busy polling support") a socket gets one
 * only at bind and only in zero-copy mode, from the queue's NAPI. A copy-mode socket
 * (veth, any skb-mode XDP) has none and the recvfrom polls nothing: there busy_poll=1
 * costs one system call per burst and changes nothing else (measured on veth, 6.18).
 *
 * Without the xdp headers (cross builds), a stub backend explains what is missing.
 */
#include "afxdp_real.h"
#include "io_internal.h"

#include <errno.h>
#include <string.h>

#ifdef IPK_AFXDP_REAL

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xdp/xsk.h>

#include "afxdp_csum.h"
#include "afxdp_prog.h"

enum { XF_FREE = 0, XF_KERNEL = 1, XF_TXCOPY = 2 };

/* linux/if_xdp.h of Linux 6.6 (Debian 12's headers predate it) */
#ifndef XDP_USE_SG
#define XDP_USE_SG (1 << 4)
#endif
#ifndef XDP_PKT_CONTD
#define XDP_PKT_CONTD (1 << 0)
#endif
/* Descriptors per transmitted frame: copy mode builds one skb of a linear part and
 * MAX_SKB_FRAGS - 1 (17 - 1) page fragments and refuses more (EOVERFLOW). */
#define XDP_SG_MAX_DESC 16u
/* Descriptors per received frame we accept: a 64 KiB datagram in 2 KiB frames. */
#define XDP_SG_MAX_RX 40u

/* One transmitted descriptor until the completion ring returns its address: the
 * packet piece sent in place (freed then), or NULL for a frame we copied into. */
struct xdp_txrec {
	uint64_t addr;        /* UINT64_MAX once completed out of order */
	struct ipk_pkt *pkt;
};

struct xdp_priv {
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	struct xsk_ring_prod fq, tx;
	struct xsk_ring_cons cq, rx;
	struct ipk_afxdp_prog prog;
	uint8_t *area;
	uint64_t area_size;
	uint32_t fs;          /* frame size = pool buf_size */
	uint32_t nframes;
	uint32_t ring;        /* descriptors per ring */
	uint32_t fill_target; /* frames kept in the fill ring */
	uint8_t *state;       /* XF_* per frame we took from the pool */
	struct xdp_txrec *txq; /* in flight, in submit order: [txq_head, txq_tail) */
	uint32_t txq_mask;    /* txq size - 1 (2 rings: tx ring plus completion ring) */
	uint32_t txq_head, txq_tail;
	uint32_t queue;
	int sg;               /* XDP_USE_SG bound */
	int busy;             /* busy_poll=1: rx bursts drive the NAPI poll */
	int csum;             /* csum=1: we finish the TCP/UDP checksums the core leaves */
	struct ipk_pkt *rx_head, *rx_tail; /* frame being received, more descriptors due */
	uint32_t rx_ndesc;
	int rx_skip;          /* dropping the rest of a bad multi-descriptor frame */
};

static struct xdp_priv *xdp_priv(const struct ipk_io *io) { return (struct xdp_priv *)io->priv; }

static int xdp_ifreq(const char *dev, unsigned long req, struct ifreq *ifr)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc;

	if (s < 0)
		return -errno;
	memset(ifr, 0, sizeof *ifr);
	snprintf(ifr->ifr_name, sizeof ifr->ifr_name, "%s", dev);
	rc = ioctl(s, req, ifr) < 0 ? -errno : 0;
	close(s);
	return rc;
}

static int xdp_perm_err(char *err, size_t el, int e, const char *dev, const char *what)
{
	if (e == EPERM || e == EACCES)
		return ipk_io_err(err, el, e, "afxdp:%s: %s: permission denied; needs "
		                  "CAP_NET_ADMIN and CAP_BPF (and CAP_NET_RAW), e.g. run as root",
		                  dev, what);
	return ipk_io_err(err, el, e, "afxdp:%s: %s: %s", dev, what, strerror(e));
}

/* Feed the fill ring up to fill_target frames from the pool. */
static void xdp_refill(struct ipk_io *io)
{
	struct xdp_priv *p = xdp_priv(io);
	uint32_t have = p->ring - xsk_prod_nb_free(&p->fq, p->ring), want, got, i, at;

	if (have >= p->fill_target)
		return;
	want = p->fill_target - have;
	got = xsk_ring_prod__reserve(&p->fq, want, &at);
	for (i = 0; i < got; i++) {
		int64_t b = ipk_pool_buf_get(io->pool);
		if (b < 0)
			break;
		p->state[b] = XF_KERNEL;
		*xsk_ring_prod__fill_addr(&p->fq, at + i) = (uint64_t)b * p->fs;
	}
	if (i < got)
		p->fq.cached_prod -= got - i; /* give back the unused reservations */
	if (i)
		xsk_ring_prod__submit(&p->fq, i);
}

/* One descriptor's transmission is over: free the piece sent in place, or give the
 * frame we copied into back to the pool. */
static void xdp_tx_release(struct ipk_io *io, struct xdp_txrec *r)
{
	struct xdp_priv *p = xdp_priv(io);

	if (r->pkt) {
		ipk_pkt_free(r->pkt);
	} else {
		uint32_t b = (uint32_t)(r->addr / p->fs);
		p->state[b] = XF_FREE;
		ipk_pool_buf_put(io->pool, b);
	}
	r->pkt = NULL;
	r->addr = UINT64_MAX;
}

/* The completion ring returned addr: normally the oldest record; a later one when
 * the kernel completed out of order (its skbs may be freed in any order). */
static void xdp_tx_done(struct ipk_io *io, uint64_t addr)
{
	struct xdp_priv *p = xdp_priv(io);
	uint32_t i;

	for (i = p->txq_head; i != p->txq_tail; i++) {
		struct xdp_txrec *r = &p->txq[i & p->txq_mask];
		if (r->addr == addr) {
			xdp_tx_release(io, r);
			break;
		}
	}
	if (i == p->txq_tail) {
		io->st.tx_errors++; /* an address we never sent */
		return;
	}
	while (p->txq_head != p->txq_tail && p->txq[p->txq_head & p->txq_mask].addr == UINT64_MAX)
		p->txq_head++;
}

/* Return completed transmissions to the pool. */
static void xdp_complete(struct ipk_io *io)
{
	struct xdp_priv *p = xdp_priv(io);
	uint32_t at, n = xsk_ring_cons__peek(&p->cq, p->ring, &at), i;

	for (i = 0; i < n; i++)
		xdp_tx_done(io, *xsk_ring_cons__comp_addr(&p->cq, at + i));
	if (n)
		xsk_ring_cons__release(&p->cq, n);
}

/* Drop the frame being received (a bad descriptor, no packet for a piece, too many
 * pieces) and the descriptors of it still to come. */
static void xdp_rx_abort(struct ipk_io *io, int more)
{
	struct xdp_priv *p = xdp_priv(io);

	ipk_pkt_free_chain(p->rx_head);
	p->rx_head = p->rx_tail = NULL;
	p->rx_ndesc = 0;
	p->rx_skip = more;
}

/* One rx descriptor: a packet over its frame, appended to the frame being received.
 * Returns the whole frame when this was its last descriptor, else NULL. */
static struct ipk_pkt *xdp_rx_desc(struct ipk_io *io, const struct xdp_desc *d)
{
	struct xdp_priv *p = xdp_priv(io);
	uint64_t addr = xsk_umem__extract_addr(d->addr) + xsk_umem__extract_offset(d->addr);
	uint64_t b = addr / p->fs;
	uint32_t off = (uint32_t)(addr % p->fs);
	int more = p->sg && (d->options & XDP_PKT_CONTD);
	struct ipk_pkt *pk, *whole;

	if (b >= p->nframes || p->state[b] != XF_KERNEL || d->len > p->fs - off) {
		io->st.rx_errors++;
		xdp_rx_abort(io, more);
		return NULL;
	}
	p->state[b] = XF_FREE;
	if (p->rx_skip) { /* the rest of a frame already dropped */
		ipk_pool_buf_put(io->pool, (uint32_t)b);
		p->rx_skip = more;
		return NULL;
	}
	/* The kernel copied the frame in on the sender's CPU: start the cache misses of
	 * the whole burst now, before the core parses the first one. */
	if (!p->rx_head)
		__builtin_prefetch(p->area + addr);
	pk = ipk_pkt_attach(io->pool, (uint32_t)b, off, d->len);
	if (!pk || p->rx_ndesc >= XDP_SG_MAX_RX) {
		if (pk)
			ipk_pkt_free(pk);
		else
			ipk_pool_buf_put(io->pool, (uint32_t)b);
		io->st.rx_drops++;
		xdp_rx_abort(io, more);
		return NULL;
	}
	if (p->rx_tail)
		p->rx_tail->next = pk;
	else
		p->rx_head = pk;
	p->rx_tail = pk;
	p->rx_ndesc++;
	io->st.rx_bytes += d->len;
	if (more)
		return NULL;
	whole = p->rx_head;
	p->rx_head = p->rx_tail = NULL;
	p->rx_ndesc = 0;
	io->st.rx_pkts++;
	return whole;
}

static int xdp_rx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct xdp_priv *p = xdp_priv(io);
	uint32_t at, got, i;
	int k = 0;

	/* busy_poll=1: one NAPI poll (up to SO_BUSY_POLL_BUDGET frames) into the rx ring,
	 * on this CPU, before we look at it */
	if (p->busy)
		(void)recvfrom(xsk_socket__fd(p->xsk), NULL, 0, MSG_DONTWAIT, NULL, NULL);
	/* at most n descriptors, so at most n frames (a frame's descriptors may end in
	 * the next burst: rx_head keeps the start) */
	got = xsk_ring_cons__peek(&p->rx, (uint32_t)n, &at);
	for (i = 0; i < got; i++) {
		struct ipk_pkt *pk = xdp_rx_desc(io, xsk_ring_cons__rx_desc(&p->rx, at + i));
		if (pk)
			pkts[k++] = pk;
	}
	if (got)
		xsk_ring_cons__release(&p->rx, got);
	xdp_refill(io);
	/* need_wakeup: the kernel sleeps on an empty fill ring until we kick it. */
	if (xsk_ring_prod__needs_wakeup(&p->fq))
		(void)recvfrom(xsk_socket__fd(p->xsk), NULL, 0, MSG_DONTWAIT, NULL, NULL);
	return k;
}

/* Address of a piece the kernel may read in place (it lies in one UMEM frame of
 * this pool), or UINT64_MAX. An external buffer (idx IPK_PKT_IDX_EXT, never below
 * nframes) is outside the UMEM: it is copied. */
static uint64_t xdp_piece_addr(const struct xdp_priv *p, const struct ipk_io *io,
                               const struct ipk_pkt *k)
{
	if (k->pool != io->pool || k->idx >= p->nframes || k->len == 0 ||
	    k->buf != p->area + (uint64_t)k->idx * p->fs)
		return UINT64_MAX;
	return (uint64_t)k->idx * p->fs + k->off;
}

/* Descriptors for sending chain k in place, or 0 when it must be copied (a piece
 * outside the UMEM, or more pieces than one frame may have). */
static uint32_t xdp_inplace_descs(const struct xdp_priv *p, const struct ipk_io *io,
                                  const struct ipk_pkt *k)
{
	uint32_t nd = 0;

	for (; k; k = k->next) {
		if (xdp_piece_addr(p, io, k) == UINT64_MAX || ++nd > (p->sg ? XDP_SG_MAX_DESC : 1u))
			return 0;
	}
	return nd;
}

static void xdp_desc_set(struct xdp_desc *d, uint64_t addr, uint32_t len, int more)
{
	d->addr = addr;
	d->len = len;
	d->options = more ? XDP_PKT_CONTD : 0;
}

static void xdp_txq_push(struct xdp_priv *p, uint64_t addr, struct ipk_pkt *k)
{
	struct xdp_txrec *r = &p->txq[p->txq_tail++ & p->txq_mask];

	r->addr = addr;
	r->pkt = k;
}

/* Chain k in place, nd descriptors from tx ring slot at: each piece is detached and
 * held by its record until completed. */
static void xdp_tx_inplace(struct ipk_io *io, struct ipk_pkt *k, uint32_t at, uint32_t nd)
{
	struct xdp_priv *p = xdp_priv(io);
	uint32_t i;

	for (i = 0; i < nd; i++) {
		struct ipk_pkt *next = k->next;
		uint64_t addr = xdp_piece_addr(p, io, k);
		xdp_desc_set(xsk_ring_prod__tx_desc(&p->tx, at + i), addr, k->len, i + 1 < nd);
		k->next = NULL;
		xdp_txq_push(p, addr, k);
		k = next;
	}
}

/* Where the checksum the core left to us (IPK_TXOFF_TCP_CSUM / _UDP_CSUM: the
 * pseudo-header sum in the field) starts and where its field lies, from the head's
 * meta; 0 when there is none. -1 when the field does not lie in the first len bytes
 * (the frame is dropped: a core bug, never sent with a wrong sum). */
static int xdp_csum_at(const struct ipk_pkt *k, uint32_t len, uint32_t *start, uint32_t *field)
{
	const struct ipk_tx_meta *m = &k->meta;

	if (!(m->flags & (IPK_TXOFF_TCP_CSUM | IPK_TXOFF_UDP_CSUM)))
		return 0;
	*start = (uint32_t)m->l2_len + m->l3_len;
	*field = *start + ((m->flags & IPK_TXOFF_TCP_CSUM) ? 16u : 6u); /* RFC 9293, RFC 768 */
	return *field + 2 <= len ? 1 : -1;
}

/* The field's final value from the sum over [start, end) (field included). */
static void xdp_csum_store(uint8_t *f, uint32_t sum, const struct ipk_pkt *k)
{
	uint16_t v = ipk_xdp_sum_final(sum);

	if (v == 0 && (k->meta.flags & IPK_TXOFF_UDP_CSUM))
		v = 0xffff; /* RFC 768: 0 means "no checksum" */
	memcpy(f, &v, 2);
}

/* Copy n bytes at stream offset pos to dst; bytes at or after start (UINT32_MAX:
 * none) are summed into *sum in the same pass. */
static void xdp_copy_span(uint8_t *dst, const uint8_t *src, uint32_t n, uint32_t pos,
                          uint32_t start, uint32_t *sum)
{
	uint32_t plain = 0;

	if (pos < start)
		plain = start - pos < n ? start - pos : n;
	memcpy(dst, src, plain);
	if (n > plain)
		*sum = ipk_xdp_sum_add(*sum, ipk_xdp_sum_span(dst + plain, src + plain, n - plain, 1),
		                       pos + plain - start);
}

/* Chain k laid out over the pool buffers b[] (UMEM frames of fs bytes each), the
 * checksum from start summed on the way (start UINT32_MAX: none); returns the sum. */
static uint32_t xdp_copy_chain(struct xdp_priv *p, const struct ipk_pkt *k, const int64_t *b,
                               uint32_t start)
{
	uint32_t fi = 0, fo = 0, pos = 0, sum = 0;

	for (; k; k = k->next) {
		const uint8_t *src = k->buf + k->off;
		uint32_t left = k->len;
		while (left) {
			uint32_t n = left < p->fs - fo ? left : p->fs - fo;
			xdp_copy_span(p->area + (uint64_t)b[fi] * p->fs + fo, src, n, pos, start, &sum);
			src += n;
			left -= n;
			pos += n;
			fo += n;
			if (fo == p->fs) {
				fi++;
				fo = 0;
			}
		}
	}
	return sum;
}

/* Chain head sent in place: its checksum summed over the pieces and stored in the
 * head, which holds the field (xdp_tx_one checked). The head is the core's fresh
 * header packet; payload pieces are only read. */
static void xdp_csum_inplace(struct ipk_pkt *head, uint32_t start, uint32_t field)
{
	const struct ipk_pkt *k = head;
	uint32_t pos = 0, sum = 0;

	for (; k; pos += k->len, k = k->next) {
		uint32_t skip = pos < start ? (start - pos < k->len ? start - pos : k->len) : 0;
		if (k->len > skip)
			sum = ipk_xdp_sum_add(sum, ipk_xdp_sum_span(NULL, k->buf + k->off + skip,
			                                            k->len - skip, 0),
			                      pos + skip - start);
	}
	xdp_csum_store(head->buf + head->off + field, sum, head);
}

/* Chain k copied into nd fresh frames (fs bytes each, the last one partly), its
 * checksum finished on the way when the core left it to us, or -ENOBUFS with nothing
 * taken when the pool has fewer. */
static int xdp_tx_copy(struct ipk_io *io, struct ipk_pkt *k, uint32_t len, uint32_t at,
                       uint32_t nd, uint32_t start, uint32_t field)
{
	struct xdp_priv *p = xdp_priv(io);
	int64_t b[XDP_SG_MAX_DESC];
	uint32_t i, done = 0, sum;

	for (i = 0; i < nd; i++) {
		b[i] = ipk_pool_buf_get(io->pool);
		if (b[i] < 0) {
			while (i--)
				ipk_pool_buf_put(io->pool, (uint32_t)b[i]);
			return -ENOBUFS;
		}
	}
	sum = xdp_copy_chain(p, k, b, start);
	if (start != UINT32_MAX)
		xdp_csum_store(p->area + (uint64_t)b[0] * p->fs + field, sum, k);
	for (i = 0; i < nd; i++) {
		uint64_t addr = (uint64_t)b[i] * p->fs;
		uint32_t n = len - done < p->fs ? len - done : p->fs;
		p->state[b[i]] = XF_TXCOPY;
		xdp_desc_set(xsk_ring_prod__tx_desc(&p->tx, at + i), addr, n, i + 1 < nd);
		xdp_txq_push(p, addr, NULL);
		done += n;
	}
	ipk_pkt_free_chain(k);
	return 0;
}

/* Queue one frame: 0 taken, -EAGAIN no room now (the caller keeps it), -ENOBUFS
 * no frame to copy into (the same), -EMSGSIZE too long for the frames or -EINVAL a
 * checksum field outside the first frame (both dropped). */
static int xdp_tx_one(struct ipk_io *io, struct ipk_pkt *k)
{
	struct xdp_priv *p = xdp_priv(io);
	uint32_t len = ipk_pkt_chain_len(k), nd = xdp_inplace_descs(p, io, k), at;
	uint32_t start = UINT32_MAX, field = 0;
	int copy = nd == 0, cs = 0;

	if (p->csum) { /* in place: the field must lie in the head; copied: in frame 0 */
		cs = xdp_csum_at(k, copy ? len : k->len, &start, &field);
		if (cs < 0 && !copy) {
			copy = 1;
			cs = xdp_csum_at(k, len, &start, &field);
		}
		if (cs < 0 || field + 2 > p->fs)
			return -EINVAL;
		if (!cs)
			start = UINT32_MAX;
	}
	if (copy)
		nd = (len + p->fs - 1) / p->fs;
	if (nd == 0 || nd > (p->sg ? XDP_SG_MAX_DESC : 1u))
		return -EMSGSIZE;
	if (p->txq_tail - p->txq_head + nd > p->txq_mask + 1 ||
	    xsk_ring_prod__reserve(&p->tx, nd, &at) != nd)
		return -EAGAIN;
	if (!copy) {
		if (cs) /* after the reservation: a frame kept for later is summed once */
			xdp_csum_inplace(k, start, field);
		xdp_tx_inplace(io, k, at, nd);
	} else if (xdp_tx_copy(io, k, len, at, nd, start, field) < 0) {
		p->tx.cached_prod -= nd; /* give back the reservation */
		return -ENOBUFS;
	}
	io->st.tx_pkts++;
	io->st.tx_bytes += len;
	return 0;
}

/* Descriptors submitted to the tx ring that the kernel has not taken yet. */
static uint32_t xdp_tx_untaken(struct xdp_priv *p)
{
	return p->ring - xsk_prod_nb_free(&p->tx, p->ring);
}

static int xdp_kick_errno(struct ipk_io *io, int e)
{
	/* EAGAIN: more left or the completion ring is full (the next round goes on);
	 * EBUSY/ENOBUFS/ENETDOWN: the device cannot take it now, TCP retransmits. */
	if (e == EAGAIN || e == EBUSY || e == ENOBUFS || e == ENETDOWN)
		return 0;
	io->st.tx_errors++;
	return -e;
}

/* Copy mode transmits inside sendto, at most 32 descriptors a call (the kernel's
 * TX_BATCH_SIZE in xsk_generic_xmit, which answers EAGAIN when more are left): kick
 * until the kernel has taken everything submitted, or a bounded number of times, so a
 * burst never waits in the ring while the node sleeps. Driver (zero-copy) queues need
 * a kick only while need_wakeup says they are idle. One call per loop round. */
static int xdp_kick(struct ipk_io *io)
{
	struct xdp_priv *p = xdp_priv(io);
	uint32_t i, max = p->ring / 32 + 2;

	for (i = 0; i < max && xdp_tx_untaken(p) && xsk_ring_prod__needs_wakeup(&p->tx); i++) {
		if (sendto(xsk_socket__fd(p->xsk), NULL, 0, MSG_DONTWAIT, NULL, 0) < 0) {
			int e = errno;
			if (e != EAGAIN)
				return xdp_kick_errno(io, e);
		}
		xdp_complete(io); /* room in the completion ring for the next batch */
	}
	return 0;
}

static int xdp_tx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct xdp_priv *p = xdp_priv(io);
	uint32_t before = p->txq_tail;
	int i;

	xdp_complete(io);
	for (i = 0; i < n; i++) {
		int rc = xdp_tx_one(io, pkts[i]);
		if (rc == -EAGAIN || rc == -ENOBUFS)
			break;
		if (rc < 0) { /* too long or no checksum field: taken and dropped */
			io->st.tx_errors++;
			ipk_pkt_free_chain(pkts[i]);
		}
	}
	if (p->txq_tail != before)
		xsk_ring_prod__submit(&p->tx, p->txq_tail - before);
	io->st.tx_drops += (uint64_t)(n - i);
	return i; /* ipk_io_flush kicks, once for everything queued this round */
}

static int xdp_flush(struct ipk_io *io)
{
	xdp_complete(io);
	return xdp_kick(io);
}

static int xdp_fd(const struct ipk_io *io)
{
	return xdp_priv(io)->xsk ? xsk_socket__fd(xdp_priv(io)->xsk) : -1;
}

static int xdp_arm(struct ipk_io *io)
{
	struct xdp_priv *p = xdp_priv(io);
	uint32_t at;

	xdp_refill(io);
	/* peek without consuming: frames already waiting mean "don't sleep" */
	if (xsk_ring_cons__peek(&p->rx, 1, &at)) {
		xsk_ring_cons__cancel(&p->rx, 1);
		return 1;
	}
	return 0;
}

int ipk_io_afxdp_set_addr(struct ipk_io *io, uint32_t ip4_be, const uint8_t mac[6])
{
	return ipk_afxdp_prog_set_addr(&xdp_priv(io)->prog, ip4_be, mac);
}

int ipk_io_afxdp_set_addr6(struct ipk_io *io, const uint8_t addr[16], const uint8_t mac[6],
                           uint32_t flags)
{
	return ipk_afxdp_prog_set_addr6(&xdp_priv(io)->prog, addr, mac,
	                                flags & IPK_IO_ADDR6_RA ? IPK_XDP6_RA : 0);
}

/* Frames the kernel or a transmission still holds go back to the pool. */
static void xdp_release_frames(struct ipk_io *io)
{
	struct xdp_priv *p = xdp_priv(io);
	uint32_t b;

	for (; p->txq && p->txq_head != p->txq_tail; p->txq_head++) {
		struct xdp_txrec *r = &p->txq[p->txq_head & p->txq_mask];
		if (r->addr != UINT64_MAX && r->pkt)
			ipk_pkt_free(r->pkt); /* copied frames: state XF_TXCOPY, put below */
	}
	xdp_rx_abort(io, 0);
	for (b = 0; p->state && b < p->nframes; b++) {
		if (p->state[b] != XF_FREE)
			ipk_pool_buf_put(io->pool, b);
	}
	free(p->state);
	free(p->txq);
	p->state = NULL;
	p->txq = NULL;
}

static void xdp_close(struct ipk_io *io)
{
	struct xdp_priv *p = xdp_priv(io);

	if (p->xsk)
		xsk_socket__delete(p->xsk);
	p->xsk = NULL;
	if (p->umem)
		xsk_umem__delete(p->umem);
	p->umem = NULL;
	ipk_afxdp_prog_close(&p->prog);
	xdp_release_frames(io);
}

struct xdp_opts {
	long queue, ring, zc, prog, frame, sg, busy, csum; /* frame 0: the pool's buf_size */
	int mode;          /* 0 auto, XDP_FLAGS_SKB_MODE, XDP_FLAGS_DRV_MODE */
	uint32_t ip4_be;
};

static int xdp_parse(const struct ipk_io_args *a, struct xdp_opts *o, char *err, size_t el)
{
	static const char *const known[] = { "queue", "mode", "zc", "prog", "ip", "ring", "frame",
	                                      "sg", "busy_poll", "csum", NULL };
	const char *mode = ipk_io_arg(a, "mode"), *ip = ipk_io_arg(a, "ip");
	struct in_addr in;

	if (ipk_io_arg_check(a, known, err, el) < 0)
		return -EINVAL;
	o->queue = ipk_io_arg_int(a, "queue", 0, err, el);
	o->ring = ipk_io_arg_int(a, "ring", 2048, err, el);
	o->zc = ipk_io_arg_bool(a, "zc", 0, err, el);
	o->prog = ipk_io_arg_bool(a, "prog", 1, err, el);
	o->frame = ipk_io_arg_int(a, "frame", 0, err, el);
	o->sg = ipk_io_arg_bool(a, "sg", 0, err, el);
	o->busy = ipk_io_arg_bool(a, "busy_poll", 0, err, el);
	o->csum = ipk_io_arg_bool(a, "csum", 1, err, el);
	if (o->queue < 0 || o->ring < 0 || o->zc < 0 || o->prog < 0 || o->frame < 0 || o->sg < 0 ||
	    o->busy < 0 || o->csum < 0)
		return -EINVAL;
	if (o->frame && o->frame != 2048 && o->frame != 4096)
		return ipk_io_err(err, el, EINVAL, "afxdp:%s: frame=%ld is not a UMEM frame size "
		                  "(use 2048 or 4096)", a->dev, o->frame);
	if (o->ring < 64 || o->ring > 16384 || (o->ring & (o->ring - 1)))
		return ipk_io_err(err, el, EINVAL, "afxdp:%s: ring=%ld must be a power of two in "
		                  "64..16384", a->dev, o->ring);
	o->mode = 0;
	if (mode && !strcmp(mode, "skb"))
		o->mode = XDP_FLAGS_SKB_MODE;
	else if (mode && !strcmp(mode, "drv"))
		o->mode = XDP_FLAGS_DRV_MODE;
	else if (mode)
		return ipk_io_err(err, el, EINVAL, "afxdp:%s: mode=%s is not supported (use skb "
		                  "or drv)", a->dev, mode);
	o->ip4_be = 0;
	if (ip && inet_pton(AF_INET, ip, &in) != 1)
		return ipk_io_err(err, el, EINVAL, "afxdp:%s: ip=%s is not an IPv4 address",
		                  a->dev, ip);
	if (ip)
		o->ip4_be = in.s_addr;
	return 0;
}

/* Device facts: index, MTU (checked against the frame), MAC. */
static int xdp_device(struct ipk_io *io, const char *dev, int *ifindex, char *err, size_t el)
{
	struct xdp_priv *p = xdp_priv(io);
	struct ifreq ifr;
	int rc;

	*ifindex = (int)if_nametoindex(dev);
	if (*ifindex == 0)
		return ipk_io_err(err, el, ENODEV, "afxdp:%s: no such network interface", dev);
	rc = xdp_ifreq(dev, SIOCGIFMTU, &ifr);
	if (rc < 0)
		return ipk_io_err(err, el, -rc, "afxdp:%s: cannot read the MTU: %s", dev,
		                  strerror(-rc));
	/* XDP keeps XDP_PACKET_HEADROOM (256) bytes before the frame in each chunk; 18 =
	 * Ethernet header plus one VLAN tag. Multi-buffer: XDP_SG_MAX_DESC chunks. */
	if (p->sg && (uint32_t)ifr.ifr_mtu + 18 > XDP_SG_MAX_DESC * (p->fs - 256))
		return ipk_io_err(err, el, EMSGSIZE, "afxdp:%s: MTU %d is larger than %u "
		                  "%u-byte UMEM frames carry with sg=1 (MTU at most %u); lower the "
		                  "MTU", dev, ifr.ifr_mtu, XDP_SG_MAX_DESC, p->fs,
		                  XDP_SG_MAX_DESC * (p->fs - 256) - 18);
	if (!p->sg && (uint32_t)ifr.ifr_mtu + 18 > p->fs - 256)
		return ipk_io_err(err, el, EMSGSIZE, "afxdp:%s: MTU %d is larger than %u-byte UMEM "
		                  "frames carry (MTU at most %u)%s", dev, ifr.ifr_mtu, p->fs,
		                  p->fs - 256 - 18, p->fs < 4096 && ifr.ifr_mtu <= 4096 - 256 - 18 ?
		                  "; use frame=4096" : "; use sg=1 (multi-buffer) or lower the MTU");
	io->caps.mtu = (uint16_t)ifr.ifr_mtu;
	rc = xdp_ifreq(dev, SIOCGIFHWADDR, &ifr);
	if (rc == 0)
		memcpy(io->caps.mac, ifr.ifr_hwaddr.sa_data, 6);
	return 0;
}

static int xdp_umem(struct ipk_io *io, const struct xdp_opts *o, const char *dev, char *err,
                    size_t el)
{
	struct xdp_priv *p = xdp_priv(io);
	struct xsk_umem_config uc;
	size_t size;
	int rc;

	p->area = (uint8_t *)ipk_pool_area(io->pool, &size);
	p->area_size = size;
	p->nframes = (uint32_t)(size / p->fs);
	p->ring = (uint32_t)o->ring;
	p->fill_target = p->ring < p->nframes / 2 ? p->ring : p->nframes / 2;
	p->state = (uint8_t *)calloc(p->nframes, 1);
	p->txq_mask = 2 * p->ring - 1;
	p->txq = (struct xdp_txrec *)calloc(p->txq_mask + 1, sizeof *p->txq);
	if (!p->state || !p->txq)
		return ipk_io_err(err, el, ENOMEM, "afxdp:%s: out of memory", dev);
	memset(&uc, 0, sizeof uc);
	uc.fill_size = p->ring;
	uc.comp_size = p->ring;
	uc.frame_size = p->fs;
	uc.frame_headroom = 0;
	rc = xsk_umem__create(&p->umem, p->area, size, &p->fq, &p->cq, &uc);
	if (rc < 0)
		return xdp_perm_err(err, el, -rc, dev, "registering the pool as UMEM");
	return 0;
}

static int xdp_socket(struct ipk_io *io, const struct xdp_opts *o, const char *dev,
                      uint32_t xdp_flags, char *err, size_t el)
{
	struct xdp_priv *p = xdp_priv(io);
	struct xsk_socket_config sc;
	int rc, tries;

	memset(&sc, 0, sizeof sc);
	sc.rx_size = p->ring;
	sc.tx_size = p->ring;
	sc.libxdp_flags = o->prog ? XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD : 0;
	sc.xdp_flags = xdp_flags;
	sc.bind_flags = XDP_USE_NEED_WAKEUP | (o->zc ? XDP_ZEROCOPY : XDP_COPY) |
	                (o->sg ? XDP_USE_SG : 0);
	/* A socket closed just before on this queue is released by deferred kernel work;
	 * until then the bind fails with EBUSY. Wait for it, bounded (1 s). */
	for (tries = 0;; tries++) {
		rc = xsk_socket__create(&p->xsk, dev, (uint32_t)o->queue, p->umem, &p->rx, &p->tx,
		                        &sc);
		if (rc != -EBUSY || tries >= 100)
			break;
		usleep(10000);
	}
	if (rc == -EBUSY)
		return ipk_io_err(err, el, EBUSY, "afxdp:%s: queue %ld is already bound to another "
		                  "AF_XDP socket", dev, o->queue);
	if (rc < 0 && o->zc && (rc == -EOPNOTSUPP || rc == -EINVAL || rc == -EPROTONOSUPPORT))
		return ipk_io_err(err, el, EOPNOTSUPP, "afxdp:%s: zero-copy (zc=1) is not offered "
		                  "by this driver or XDP mode; use zc=0 (copy mode)", dev);
	if (rc < 0 && o->sg && (rc == -EOPNOTSUPP || rc == -EINVAL))
		return ipk_io_err(err, el, -rc, "afxdp:%s: the kernel refused multi-buffer AF_XDP "
		                  "(sg=1, XDP_USE_SG needs Linux 6.6 or later): %s", dev,
		                  strerror(-rc));
	if (rc == -EINVAL && o->queue > 0)
		return ipk_io_err(err, el, EINVAL, "afxdp:%s: cannot bind queue %ld (does the "
		                  "device have that many queues?)", dev, o->queue);
	if (rc < 0)
		return xdp_perm_err(err, el, -rc, dev, "creating the AF_XDP socket");
	if (o->prog && (rc = ipk_afxdp_prog_add_socket(&p->prog, (uint32_t)o->queue,
	                                               xsk_socket__fd(p->xsk))) < 0)
		return xdp_perm_err(err, el, -rc, dev, "adding the socket to the XSK map");
	return 0;
}

/* linux/socket.h values of Linux 5.11 (older libc headers lack them) */
#ifndef SO_PREFER_BUSY_POLL
#define SO_PREFER_BUSY_POLL 69
#endif
#ifndef SO_BUSY_POLL_BUDGET
#define SO_BUSY_POLL_BUDGET 70
#endif
/* busy_poll=1: the time a blocking poll may spin (our recvfrom is non-blocking: one
 * NAPI poll a call) and the frames one NAPI poll may bring, as af_xdp.rst suggests */
#define XDP_BUSY_POLL_US 20
#define XDP_BUSY_POLL_BUDGET 64

static int xdp_busy_poll(struct ipk_io *io, const char *dev, char *err, size_t el)
{
	static const struct { int opt, val; const char *name; } so[] = {
		{ SO_PREFER_BUSY_POLL, 1, "SO_PREFER_BUSY_POLL" },
		{ SO_BUSY_POLL, XDP_BUSY_POLL_US, "SO_BUSY_POLL" },
		{ SO_BUSY_POLL_BUDGET, XDP_BUSY_POLL_BUDGET, "SO_BUSY_POLL_BUDGET" },
	};
	int fd = xsk_socket__fd(xdp_priv(io)->xsk);
	size_t i;

	for (i = 0; i < sizeof so / sizeof so[0]; i++) {
		if (setsockopt(fd, SOL_SOCKET, so[i].opt, &so[i].val, sizeof so[i].val) < 0)
			return xdp_perm_err(err, el, errno, dev, so[i].name);
	}
	xdp_priv(io)->busy = 1;
	return 0;
}

static int xdp_open_inner(struct ipk_io *io, const struct ipk_io_args *a, char *err, size_t el)
{
	struct xdp_priv *p = xdp_priv(io);
	struct xdp_opts o;
	uint32_t xdp_flags = 0;
	int ifindex, rc;

	memset(&o, 0, sizeof o);
	p->prog.prog_fd = p->prog.xsks_fd = p->prog.cfg_fd = -1;
	rc = xdp_parse(a, &o, err, el);
	if (rc < 0)
		return rc;
	p->fs = ipk_pool_buf_size(io->pool);
	p->queue = (uint32_t)o.queue;
	p->sg = (int)o.sg;
	p->csum = (int)o.csum;
	if (p->fs != 2048 && p->fs != 4096)
		return ipk_io_err(err, el, EINVAL, "afxdp:%s: pool buf_size %u cannot be a UMEM "
		                  "frame; use 2048 or 4096", a->dev, p->fs);
	if (o.frame && (uint32_t)o.frame != p->fs)
		return ipk_io_err(err, el, EINVAL, "afxdp:%s: frame=%ld but the pool's buffers are "
		                  "%u bytes (a UMEM frame is one pool buffer: create the pool with "
		                  "buf_size %ld)", a->dev, o.frame, p->fs, o.frame);
	if ((rc = xdp_device(io, a->dev, &ifindex, err, el)) < 0)
		return rc;
	if (o.prog) {
		rc = ipk_afxdp_prog_attach(&p->prog, ifindex, o.mode, a->dev, err, el);
		if (rc < 0)
			return rc;
		xdp_flags = p->prog.xdp_flags;
		if (o.ip4_be && (rc = ipk_afxdp_prog_set_addr(&p->prog, o.ip4_be, io->caps.mac)) < 0)
			return xdp_perm_err(err, el, -rc, a->dev, "setting the address map");
	} else {
		xdp_flags = (uint32_t)o.mode;
	}
	if ((rc = xdp_umem(io, &o, a->dev, err, el)) < 0)
		return rc;
	if ((rc = xdp_socket(io, &o, a->dev, xdp_flags, err, el)) < 0)
		return rc;
	if (o.busy && (rc = xdp_busy_poll(io, a->dev, err, el)) < 0)
		return rc;
	xdp_refill(io);
	/* sg=1: received frames above one UMEM frame come as chains (IPK_CAP_LRO's rule:
	 * one whole datagram), which lets the core run an MTU above its buffers */
	/* csum=1: the sum starts after l2_len + l3_len whatever the family, so TCP
	 * over IPv6 (IPK_TXOFF_IP6, l3_len 40) is finished the same way */
	io->caps.offloads = IPK_CAP_SG | (p->sg ? IPK_CAP_LRO : 0) |
	                    (p->csum ? IPK_CAP_TX_CSUM_TCP | IPK_CAP_TX_CSUM_UDP |
	                               IPK_CAP_TX_CSUM_TCP6 | IPK_CAP_TX_CSUM_UDP6 : 0);
	io->caps.nqueues = 1;
	io->caps.link = IPK_LINK_ETH;
	return 0;
}

static int xdp_open(struct ipk_io *io, const struct ipk_io_args *a, char *err, size_t el)
{
	int rc = xdp_open_inner(io, a, err, el);

	if (rc < 0)
		xdp_close(io);
	return rc;
}

const struct ipk_io_backend ipk_io_afxdp_backend = {
	"afxdp", sizeof(struct xdp_priv), xdp_open, xdp_rx_burst, xdp_tx_burst, xdp_flush,
	xdp_fd, xdp_arm, xdp_close,
};

#else /* !IPK_AFXDP_REAL */

static int xdp_stub_open(struct ipk_io *io, const struct ipk_io_args *a, char *err, size_t el)
{
	(void)io;
	return ipk_io_err(err, el, ENOTSUP, "afxdp:%s: this build has no libxdp/libbpf headers "
	                  "(Debian: apt-get install libxdp-dev libbpf-dev)", a->dev);
}

const struct ipk_io_backend ipk_io_afxdp_backend = {
	"afxdp", 0, xdp_stub_open, NULL, NULL, NULL, NULL, NULL, NULL,
};

int ipk_io_afxdp_set_addr(struct ipk_io *io, uint32_t ip4_be, const uint8_t mac[6])
{
	(void)io;
	(void)ip4_be;
	(void)mac;
	return -ENOTSUP;
}

int ipk_io_afxdp_set_addr6(struct ipk_io *io, const uint8_t addr[16], const uint8_t mac[6],
                           uint32_t flags)
{
	(void)io;
	(void)addr;
	(void)mac;
	(void)flags;
	return -ENOTSUP;
}

#endif
