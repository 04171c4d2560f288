/*
 * AF_PACKET backend: two SOCK_RAW sockets bound to one interface.
 *   rx: TPACKET_V3 mmap ring (blocks the kernel retires when full or after `tov` ms);
 *       PACKET_IGNORE_OUTGOING so our own transmissions do not come back. Each frame is
 *       copied once into a pool packet. tp_status tells the checksum state:
 *       TP_STATUS_CSUM_VALID (verified) and TP_STATUS_CSUMNOTREADY (built by the local
 *       kernel, e.g. a veth peer, with only the pseudo-header sum in the field: the data
 *       never crossed a wire, so it is reported good, as the tap backend does).
 *   tx: TPACKET_V2 mmap ring, frames queued by tx_burst and pushed by one sendto in
 *       flush. With vnet=1 (PACKET_VNET_HDR) every frame starts with a virtio_net_hdr,
 *       which gives real checksum offload and GSO (the kernel segments TSO frames).
 * Options: fanout=G joins fanout group G (PACKET_FANOUT_HASH: several instances on
 * one interface share flows), vnet=0|1 (default 1), frames=N (ring sizes), promisc=0|1,
 * qdisc_bypass=0|1, tov=MS (rx block retire timeout, default 1).
 */
#include "io_internal.h"
#include "vnet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

#define AFP_RX_BLOCK (256u * 1024)
#define AFP_FRAME 2048u
#define AFP_TSO_FRAME 65536u
#define AFP_TSO_MAX 64000u
#define AFP_TX_DATA (TPACKET2_HDRLEN - sizeof(struct sockaddr_ll))

struct afp_priv {
	int rx_fd, tx_fd, vnet, ifindex;
	uint8_t *rx_ring;
	size_t rx_ring_size;
	uint32_t rx_nblocks, rx_block;     /* current block */
	uint32_t rx_left;                  /* packets not yet taken from the current block */
	uint8_t *rx_pkt;                   /* next tpacket3_hdr in the current block */
	uint8_t *tx_ring;
	size_t tx_ring_size;
	uint32_t tx_fsize, tx_nframes, tx_head, tx_pending;
	uint32_t room;
	uint32_t seg_off, seg_i;           /* progress through a super-frame being cut */
};

/* ------------------------------------------------------------- setup */

static int afp_ifreq(const char *dev, unsigned long req, struct ifreq *ifr)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc, e;

	if (s < 0)
		return -errno;
	memcpy(ifr->ifr_name, dev, strlen(dev) + 1);
	rc = ioctl(s, req, ifr);
	e = errno;
	close(s);
	return rc < 0 ? -e : 0;
}

static int afp_socket(const char *dev, char *err, size_t errlen)
{
	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), e;

	if (fd >= 0)
		return fd;
	e = errno;
	if (e == EPERM || e == EACCES)
		return ipk_io_err(err, errlen, EPERM, "afpacket: %s: needs CAP_NET_RAW", dev);
	return ipk_io_err(err, errlen, e, "afpacket: socket: %s", strerror(e));
}

static int afp_opt(int fd, int name, int val, const char *what, char *err, size_t errlen)
{
	int e;

	if (setsockopt(fd, SOL_PACKET, name, &val, sizeof(val)) == 0)
		return 0;
	e = errno;
	return ipk_io_err(err, errlen, e, "afpacket: %s: %s", what, strerror(e));
}

static int afp_bind(int fd, int ifindex, uint16_t proto, const char *dev, char *err,
                    size_t errlen)
{
	struct sockaddr_ll sll;
	int e;

	memset(&sll, 0, sizeof(sll));
	sll.sll_family = AF_PACKET;
	sll.sll_ifindex = ifindex;
	sll.sll_protocol = htons(proto);
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) == 0)
		return 0;
	e = errno;
	return ipk_io_err(err, errlen, e, "afpacket: bind to %s: %s", dev, strerror(e));
}

static int afp_rx_setup(struct afp_priv *q, const char *dev, uint32_t frames, uint32_t tov,
                        char *err, size_t errlen)
{
	struct tpacket_req3 req;
	int rc, e;

	q->rx_fd = afp_socket(dev, err, errlen);
	if (q->rx_fd < 0)
		return q->rx_fd;
	rc = afp_opt(q->rx_fd, PACKET_VERSION, TPACKET_V3, "TPACKET_V3", err, errlen);
	memset(&req, 0, sizeof(req));
	q->rx_nblocks = (uint32_t)(((uint64_t)frames * AFP_FRAME + AFP_RX_BLOCK - 1) / AFP_RX_BLOCK);
	if (q->rx_nblocks < 2)
		q->rx_nblocks = 2;
	req.tp_block_size = AFP_RX_BLOCK;
	req.tp_block_nr = q->rx_nblocks;
	req.tp_frame_size = AFP_FRAME;
	req.tp_frame_nr = AFP_RX_BLOCK / AFP_FRAME * q->rx_nblocks;
	req.tp_retire_blk_tov = tov;
	if (rc == 0 && setsockopt(q->rx_fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)) < 0) {
		e = errno;
		return ipk_io_err(err, errlen, e, "afpacket: PACKET_RX_RING: %s", strerror(e));
	}
	if (rc < 0)
		return rc;
	q->rx_ring_size = (size_t)AFP_RX_BLOCK * q->rx_nblocks;
	q->rx_ring = (uint8_t *)mmap(NULL, q->rx_ring_size, PROT_READ | PROT_WRITE,
	                             MAP_SHARED | MAP_LOCKED, q->rx_fd, 0);
	if (q->rx_ring == MAP_FAILED) {
		e = errno;
		q->rx_ring = NULL;
		return ipk_io_err(err, errlen, e, "afpacket: rx ring mmap: %s", strerror(e));
	}
	rc = afp_opt(q->rx_fd, PACKET_IGNORE_OUTGOING, 1, "PACKET_IGNORE_OUTGOING", err, errlen);
	if (rc == 0)
		rc = afp_bind(q->rx_fd, q->ifindex, ETH_P_ALL, dev, err, errlen);
	return rc;
}

static int afp_tx_setup(struct afp_priv *q, const char *dev, uint32_t frames, int bypass,
                        char *err, size_t errlen)
{
	struct tpacket_req req;
	int rc, e;

	q->tx_fd = afp_socket(dev, err, errlen);
	if (q->tx_fd < 0)
		return q->tx_fd;
	rc = afp_opt(q->tx_fd, PACKET_VERSION, TPACKET_V2, "TPACKET_V2", err, errlen);
	if (rc == 0 && q->vnet)
		rc = afp_opt(q->tx_fd, PACKET_VNET_HDR, 1, "PACKET_VNET_HDR", err, errlen);
	if (rc == 0 && bypass)
		rc = afp_opt(q->tx_fd, PACKET_QDISC_BYPASS, 1, "PACKET_QDISC_BYPASS", err, errlen);
	if (rc < 0)
		return rc;
	/* With vnet, frames hold a whole TSO super-frame; fewer of them. */
	q->tx_fsize = q->vnet ? AFP_TSO_FRAME : AFP_FRAME;
	q->tx_nframes = q->vnet ? (frames / 16 < 16 ? 16 : frames / 16) : frames;
	memset(&req, 0, sizeof(req));
	req.tp_block_size = q->tx_fsize * 4;
	req.tp_frame_size = q->tx_fsize;
	req.tp_block_nr = (q->tx_nframes + 3) / 4;
	q->tx_nframes = req.tp_block_nr * 4;
	req.tp_frame_nr = q->tx_nframes;
	if (setsockopt(q->tx_fd, SOL_PACKET, PACKET_TX_RING, &req, sizeof(req)) < 0) {
		e = errno;
		return ipk_io_err(err, errlen, e, "afpacket: PACKET_TX_RING: %s", strerror(e));
	}
	q->tx_ring_size = (size_t)q->tx_fsize * q->tx_nframes;
	q->tx_ring = (uint8_t *)mmap(NULL, q->tx_ring_size, PROT_READ | PROT_WRITE, MAP_SHARED,
	                             q->tx_fd, 0);
	if (q->tx_ring == MAP_FAILED) {
		e = errno;
		q->tx_ring = NULL;
		return ipk_io_err(err, errlen, e, "afpacket: tx ring mmap: %s", strerror(e));
	}
	/* Protocol 0: this socket only sends. */
	return afp_bind(q->tx_fd, q->ifindex, 0, dev, err, errlen);
}

static int afp_link(struct ipk_io *io, struct afp_priv *q, const char *dev, char *err,
                    size_t errlen)
{
	struct ifreq ifr;
	int rc;

	memset(&ifr, 0, sizeof(ifr));
	rc = afp_ifreq(dev, SIOCGIFHWADDR, &ifr);
	if (rc == 0 && ifr.ifr_hwaddr.sa_family != 1 /* ARPHRD_ETHER */)
		return ipk_io_err(err, errlen, ENOTSUP, "afpacket: %s is not an Ethernet device",
		                  dev);
	if (rc == 0)
		memcpy(io->caps.mac, ifr.ifr_hwaddr.sa_data, 6);
	memset(&ifr, 0, sizeof(ifr));
	if (rc == 0)
		rc = afp_ifreq(dev, SIOCGIFMTU, &ifr);
	if (rc < 0)
		return ipk_io_err(err, errlen, -rc, "afpacket: %s: %s", dev, strerror(-rc));
	if (ifr.ifr_mtu <= 0 || (uint32_t)ifr.ifr_mtu + 14 > q->room)
		return ipk_io_err(err, errlen, EINVAL,
		                  "afpacket: %s: mtu %d does not fit a pool buffer (%u bytes after headroom)",
		                  dev, ifr.ifr_mtu, q->room);
	io->caps.mtu = (uint16_t)(ifr.ifr_mtu > 65535 ? 65535 : ifr.ifr_mtu);
	return 0;
}

static int afp_membership(struct afp_priv *q, char *err, size_t errlen)
{
	struct packet_mreq mr;
	int e;

	memset(&mr, 0, sizeof(mr));
	mr.mr_ifindex = q->ifindex;
	mr.mr_type = PACKET_MR_PROMISC;
	if (setsockopt(q->rx_fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr)) == 0)
		return 0;
	e = errno;
	return ipk_io_err(err, errlen, e, "afpacket: promiscuous mode: %s", strerror(e));
}

static void afp_close(struct ipk_io *io)
{
	struct afp_priv *q = (struct afp_priv *)io->priv;

	if (q->rx_ring)
		munmap(q->rx_ring, q->rx_ring_size);
	if (q->tx_ring)
		munmap(q->tx_ring, q->tx_ring_size);
	if (q->rx_fd >= 0)
		close(q->rx_fd);
	if (q->tx_fd >= 0)
		close(q->tx_fd);
	q->rx_ring = q->tx_ring = NULL;
	q->rx_fd = q->tx_fd = -1;
}

static int afp_open(struct ipk_io *io, const struct ipk_io_args *a, char *err, size_t errlen)
{
	static const char *const known[] = { "fanout", "vnet", "frames", "promisc",
	                                     "qdisc_bypass", "tov", NULL };
	struct afp_priv *q = (struct afp_priv *)io->priv;
	long fanout, frames, tov;
	int promisc, bypass, rc;

	q->rx_fd = q->tx_fd = -1;
	if (ipk_io_arg_check(a, known, err, errlen) < 0)
		return -EINVAL;
	fanout = ipk_io_arg_int(a, "fanout", -2, err, errlen);
	frames = ipk_io_arg_int(a, "frames", 1024, err, errlen);
	tov = ipk_io_arg_int(a, "tov", 1, err, errlen);
	q->vnet = ipk_io_arg_bool(a, "vnet", 1, err, errlen);
	promisc = ipk_io_arg_bool(a, "promisc", 0, err, errlen);
	bypass = ipk_io_arg_bool(a, "qdisc_bypass", 0, err, errlen);
	if (fanout == -1 || frames < 0 || tov < 0 || q->vnet < 0 || promisc < 0 || bypass < 0)
		return -EINVAL;
	if (frames < 16 || frames > 65536 || fanout > 65535 || tov < 1 || tov > 1000)
		return ipk_io_err(err, errlen, EINVAL,
		                  "afpacket: frames must be 16..65536, fanout 0..65535, tov 1..1000");
	if (strlen(a->dev) >= IFNAMSIZ)
		return ipk_io_err(err, errlen, EINVAL, "afpacket: device name '%s' too long", a->dev);
	q->ifindex = (int)if_nametoindex(a->dev);
	if (q->ifindex == 0)
		return ipk_io_err(err, errlen, ENODEV, "afpacket: no interface %s", a->dev);
	q->room = ipk_pool_buf_size(io->pool) - ipk_pool_headroom(io->pool);
	io->caps.link = IPK_LINK_ETH;
	io->caps.nqueues = 1;
	rc = afp_link(io, q, a->dev, err, errlen);
	if (rc == 0)
		rc = afp_rx_setup(q, a->dev, (uint32_t)frames, (uint32_t)tov, err, errlen);
	if (rc == 0)
		rc = afp_tx_setup(q, a->dev, (uint32_t)frames, bypass, err, errlen);
	if (rc == 0 && promisc)
		rc = afp_membership(q, err, errlen);
	/* The group id is ours to choose; PACKET_FANOUT_HASH keeps a flow on one member. */
	if (rc == 0 && fanout >= 0)
		rc = afp_opt(q->rx_fd, PACKET_FANOUT, (int)(fanout | (PACKET_FANOUT_HASH << 16)),
		             "PACKET_FANOUT", err, errlen);
	if (rc < 0) {
		afp_close(io);
		return rc;
	}
	io->caps.offloads = IPK_CAP_RX_CSUM_L4 | IPK_CAP_SG;
	if (q->vnet) {
		io->caps.offloads |= IPK_CAP_TX_CSUM_TCP | IPK_CAP_TX_CSUM_UDP | IPK_CAP_TSO;
		io->caps.tso_max = AFP_TSO_MAX;
	}
	return 0;
}

/* ---------------------------------------------------------------- rx */

static struct tpacket_block_desc *afp_block(struct afp_priv *q, uint32_t i)
{
	return (struct tpacket_block_desc *)(q->rx_ring + (size_t)i * AFP_RX_BLOCK);
}

/* The current block when the kernel has handed it over, else NULL. */
static struct tpacket_block_desc *afp_block_ready(struct afp_priv *q)
{
	struct tpacket_block_desc *b = afp_block(q, q->rx_block);

	if (q->rx_left)
		return b;
	/* Acquire: the packets are written before the status says TP_STATUS_USER. */
	if (!(__atomic_load_n(&b->hdr.bh1.block_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER))
		return NULL;
	q->rx_left = b->hdr.bh1.num_pkts;
	q->rx_pkt = (uint8_t *)b + b->hdr.bh1.offset_to_first_pkt;
	if (q->rx_left == 0) {
		__atomic_store_n(&b->hdr.bh1.block_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
		q->rx_block = (q->rx_block + 1) % q->rx_nblocks;
		return NULL;
	}
	return b;
}

/* ---- software segmentation of coalesced TCP frames ----
 * A veth peer (or GRO) hands AF_PACKET whole TSO super-frames (up to 64 KiB, checksum
 * partial). The core takes flat packets of one pool buffer, so cut them back into
 * MTU-sized segments here, as the peer's NIC would have: each copies the headers, gets
 * its slice of payload, a fresh IPv4 total length / id / header checksum and its own
 * sequence number; FIN and PSH only on the last, CWR only on the first. The L4 checksum
 * is not recomputed: only frames the kernel marked as locally built or verified come here. */
static uint16_t afp_ip_csum(const uint8_t *h, uint32_t ihl)
{
	uint32_t s = 0, i;

	for (i = 0; i < ihl; i += 2)
		if (i != 10)
			s += (uint32_t)(h[i] << 8 | h[i + 1]);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static void afp_seg_fix(uint8_t *f, uint32_t ihl, uint32_t plen, uint32_t i, uint32_t off,
                        int last)
{
	uint8_t *ip = f + 14, *th = ip + ihl;
	uint32_t thl = (uint32_t)(th[12] >> 4) * 4, tot = ihl + thl + plen;
	uint32_t id = (uint32_t)(ip[4] << 8 | ip[5]) + i;
	uint32_t seq = ((uint32_t)th[4] << 24 | (uint32_t)th[5] << 16 | (uint32_t)th[6] << 8 | th[7]) + off;
	uint16_t c;

	ip[2] = (uint8_t)(tot >> 8);
	ip[3] = (uint8_t)tot;
	ip[4] = (uint8_t)(id >> 8);
	ip[5] = (uint8_t)id;
	c = afp_ip_csum(ip, ihl);
	ip[10] = (uint8_t)(c >> 8);
	ip[11] = (uint8_t)c;
	th[4] = (uint8_t)(seq >> 24);
	th[5] = (uint8_t)(seq >> 16);
	th[6] = (uint8_t)(seq >> 8);
	th[7] = (uint8_t)seq;
	if (!last)
		th[13] &= (uint8_t)~0x09; /* FIN, PSH */
	if (i)
		th[13] &= (uint8_t)~0x80; /* CWR */
}

/* Cuts as many segments as fit in pkts[0..n) and returns their count; *done is set when
 * the frame is finished (cut completely or dropped and counted), else the next call
 * continues at q->seg_off. */
static int afp_rx_segment(struct ipk_io *io, struct afp_priv *q, const uint8_t *f,
                          uint32_t len, struct ipk_pkt **pkts, int n, int *done)
{
	uint32_t ihl, thl, hl, tot, mss;
	int got = 0;

	*done = 1;
	if (len < 54 || f[12] != 0x08 || f[13] != 0x00 || (f[14] >> 4) != 4 || f[23] != 6)
		goto drop;
	ihl = (uint32_t)(f[14] & 15) * 4;
	tot = (uint32_t)(f[16] << 8 | f[17]);
	if (ihl < 20 || 14 + ihl + 20 > len || tot + 14 > len || tot < ihl + 20)
		goto drop;
	thl = (uint32_t)(f[14 + ihl + 12] >> 4) * 4;
	hl = 14 + ihl + thl;
	if (thl < 20 || hl > tot + 14 || io->caps.mtu <= ihl + thl)
		goto drop;
	mss = io->caps.mtu - ihl - thl;
	len = tot + 14;
	/* Bounded by n and by the frame length. */
	for (; hl + q->seg_off < len && got < n; q->seg_off += mss, q->seg_i++) {
		uint32_t off = q->seg_off;
		uint32_t plen = len - hl - off < mss ? len - hl - off : mss;
		struct ipk_pkt *k = ipk_pkt_alloc(io->pool);

		if (!k) {
			io->st.rx_drops++;
			break; /* the rest is lost; TCP retransmits it */
		}
		memcpy(ipk_pkt_mtod(k), f, hl);
		memcpy(ipk_pkt_mtod(k) + hl, f + hl + off, plen);
		afp_seg_fix(ipk_pkt_mtod(k), ihl, plen, q->seg_i, off, hl + off + plen >= len);
		k->len = hl + plen;
		k->rx_csum = IPK_RXCSUM_L4_GOOD;
		pkts[got++] = k;
		io->st.rx_pkts++;
		io->st.rx_bytes += k->len;
	}
	if (got == n && hl + q->seg_off < len) {
		*done = 0;
		return got;
	}
	q->seg_off = q->seg_i = 0;
	return got;
drop:
	q->seg_off = q->seg_i = 0;
	io->st.rx_drops++;
	return 0;
}

static struct ipk_pkt *afp_rx_copy(struct ipk_io *io, struct afp_priv *q,
                                   const struct tpacket3_hdr *h)
{
	struct ipk_pkt *k;
	const uint8_t *end = q->rx_ring + q->rx_ring_size;

	/* The ring is shared with the kernel: still check the frame lies inside it. */
	if (h->tp_snaplen != h->tp_len || h->tp_snaplen > q->room ||
	    (const uint8_t *)h + h->tp_mac + h->tp_snaplen > end) {
		io->st.rx_drops++;
		return NULL;
	}
	k = ipk_pkt_alloc(io->pool);
	if (!k) {
		io->st.rx_drops++;
		return NULL;
	}
	memcpy(ipk_pkt_mtod(k), (const uint8_t *)h + h->tp_mac, h->tp_snaplen);
	k->len = h->tp_snaplen;
	if (h->tp_status & (TP_STATUS_CSUM_VALID | TP_STATUS_CSUMNOTREADY))
		k->rx_csum = IPK_RXCSUM_L4_GOOD;
	io->st.rx_pkts++;
	io->st.rx_bytes += k->len;
	return k;
}

static int afp_rx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct afp_priv *q = (struct afp_priv *)io->priv;
	uint32_t blocks = 0;
	int got = 0;

	while (got < n && blocks <= q->rx_nblocks) {
		struct tpacket_block_desc *b = afp_block_ready(q);
		const struct tpacket3_hdr *h;
		struct ipk_pkt *k;

		if (!b)
			break;
		h = (const struct tpacket3_hdr *)q->rx_pkt;
		if (h->tp_snaplen > q->room && h->tp_snaplen == h->tp_len &&
		    (h->tp_status & (TP_STATUS_CSUM_VALID | TP_STATUS_CSUMNOTREADY)) &&
		    (const uint8_t *)h + h->tp_mac + h->tp_snaplen <= q->rx_ring + q->rx_ring_size) {
			int done;

			got += afp_rx_segment(io, q, (const uint8_t *)h + h->tp_mac, h->tp_snaplen,
			                      pkts + got, n - got, &done);
			if (!done)
				break; /* the caller's burst is full; continue next time */
		} else {
			k = afp_rx_copy(io, q, h);
			if (k)
				pkts[got++] = k;
		}
		q->rx_pkt += h->tp_next_offset;
		if (--q->rx_left == 0) {
			__atomic_store_n(&b->hdr.bh1.block_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
			q->rx_block = (q->rx_block + 1) % q->rx_nblocks;
			blocks++;
		}
	}
	return got;
}

/* ---------------------------------------------------------------- tx */

/* 0 when queued, 1 when the ring is full, -1 when the frame cannot be sent. */
static int afp_tx_one(struct afp_priv *q, struct ipk_pkt *k)
{
	struct tpacket2_hdr *h = (struct tpacket2_hdr *)(q->tx_ring + (size_t)q->tx_head * q->tx_fsize);
	uint8_t *data = (uint8_t *)h + AFP_TX_DATA;
	uint32_t vh = q->vnet ? (uint32_t)sizeof(struct virtio_net_hdr) : 0;
	uint32_t len = ipk_pkt_chain_len(k);
	uint32_t st = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);

	if (st != TP_STATUS_AVAILABLE && st != TP_STATUS_WRONG_FORMAT)
		return 1;
	if (len + vh > q->tx_fsize - AFP_TX_DATA)
		return -1;
	if (vh)
		ipk_vnet_from_meta(&k->meta, (struct virtio_net_hdr *)data);
	ipk_pkt_linearize(k, data + vh, len);
	h->tp_len = len + vh;
	/* Release: the frame bytes are in place before the kernel may take it. */
	__atomic_store_n(&h->tp_status, TP_STATUS_SEND_REQUEST, __ATOMIC_RELEASE);
	q->tx_head = (q->tx_head + 1) % q->tx_nframes;
	q->tx_pending++;
	return 0;
}

static int afp_flush(struct ipk_io *io)
{
	struct afp_priv *q = (struct afp_priv *)io->priv;

	if (!q->tx_pending)
		return 0;
	q->tx_pending = 0;
	if (sendto(q->tx_fd, NULL, 0, MSG_DONTWAIT, NULL, 0) < 0 && errno != EAGAIN &&
	    errno != ENOBUFS) {
		io->st.tx_errors++;
		return -errno;
	}
	return 0;
}

static int afp_tx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct afp_priv *q = (struct afp_priv *)io->priv;
	int i, kicked = 0;

	for (i = 0; i < n; i++) {
		uint32_t len = ipk_pkt_chain_len(pkts[i]);
		int rc = afp_tx_one(q, pkts[i]);

		if (rc == 1 && !kicked) {
			/* Ring full: push what is queued once, then retry this frame. */
			afp_flush(io);
			kicked = 1;
			rc = afp_tx_one(q, pkts[i]);
		}
		if (rc == 1)
			break;
		if (rc < 0) {
			io->st.tx_drops++;
		} else {
			io->st.tx_pkts++;
			io->st.tx_bytes += len;
		}
		ipk_pkt_free_chain(pkts[i]);
	}
	return i;
}

static int afp_fd(const struct ipk_io *io)
{
	return ((const struct afp_priv *)io->priv)->rx_fd;
}

const struct ipk_io_backend ipk_io_afpacket_backend = {
	"afpacket", sizeof(struct afp_priv), afp_open, afp_rx_burst, afp_tx_burst,
	afp_flush, afp_fd, NULL, afp_close,
};
