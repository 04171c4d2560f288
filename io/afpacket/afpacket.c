/*
 * AF_PACKET backend: two SOCK_RAW sockets bound to one interface.
 *   rx: an mmap ring, PACKET_IGNORE_OUTGOING so our own transmissions do not come back.
 *       Each frame is copied once into a pool packet.
 *       rx=v2 (default): TPACKET_V2, one frame per 2 KiB slot, handed over as soon as it
 *         is written: no added latency. Frames larger than a slot (GSO super-frames
 *         from a veth peer with TSO on, up to 64 KiB) go whole to the socket queue
 *         (PACKET_COPY_THRESH; the slot says TP_STATUS_COPY) and recvmsg fetches them.
 *       rx=v3: TPACKET_V3 blocks of 256 KiB, retired when full or after tov ms: fewer
 *         wake-ups under load, but up to tov ms of latency when traffic is light.
 *       A coalesced TCP segment goes to the core whole, in a buffer of the pool's
 *       large companion (ipk_pool_large; IPK_CAP_LRO): one copy and one pass through
 *       the core for up to 64 KiB. Checksum state: TP_STATUS_CSUM_VALID / the virtio
 *       header's DATA_VALID (verified), TP_STATUS_CSUMNOTREADY / NEEDS_CSUM (built by
 *       the local kernel, e.g. a veth peer, with only the pseudo-header sum in the
 *       field: the data never crossed a wire, so it is reported good, as the tap
 *       backend does).
 *   tx: TPACKET_V2 mmap ring, frames queued by tx_burst and pushed by one sendto in
 *       flush. With vnet=1 (PACKET_VNET_HDR, both sockets) every frame carries a
 *       virtio_net_hdr, which gives real checksum offload and GSO (the kernel segments
 *       TSO frames) and tells rx which frames are coalesced.
 * Options: rx=v2|v3, fanout=G joins fanout group G (PACKET_FANOUT_HASH: several
 * instances on one interface share flows), vnet=0|1 (default 1), frames=N (ring
 * slots), promisc=0|1, qdisc_bypass=0|1, tov=MS (v3 block retire timeout, default 1).
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
#define AFP_V2_BLOCK (64u * 1024)
/* Socket queue for the super-frames that skip the v2 ring: 64 of 64 KiB. */
#define AFP_RCVBUF (4 * 1024 * 1024)

struct afp_priv {
	int rx_fd, tx_fd, vnet, ifindex, rx_v3;
	uint8_t *rx_ring;
	size_t rx_ring_size;
	struct ipk_pool *large;            /* coalesced segments go here (ipk_pool_large) */
	uint32_t rx_fsize, rx_nframes, rx_head; /* v2: slot size, count, next slot */
	uint32_t rx_nblocks, rx_block;     /* v3: blocks, current block */
	uint32_t rx_left;                  /* v3: packets not yet taken from the current block */
	uint8_t *rx_pkt;                   /* v3: next tpacket3_hdr in the current block */
	uint8_t *tx_ring;
	size_t tx_ring_size;
	uint32_t tx_fsize, tx_nframes, tx_head, tx_pending;
	uint32_t room;
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

/* v3: blocks of AFP_RX_BLOCK holding frames of any size up to a block. */
static void afp_req_v3(struct afp_priv *q, uint32_t frames, uint32_t tov,
                       struct tpacket_req3 *req)
{
	q->rx_nblocks = (uint32_t)(((uint64_t)frames * AFP_FRAME + AFP_RX_BLOCK - 1) / AFP_RX_BLOCK);
	if (q->rx_nblocks < 2)
		q->rx_nblocks = 2;
	req->tp_block_size = AFP_RX_BLOCK;
	req->tp_block_nr = q->rx_nblocks;
	req->tp_frame_size = AFP_FRAME;
	req->tp_frame_nr = AFP_RX_BLOCK / AFP_FRAME * q->rx_nblocks;
	req->tp_retire_blk_tov = tov;
	q->rx_ring_size = (size_t)AFP_RX_BLOCK * q->rx_nblocks;
}

/* v2: `frames` slots of AFP_FRAME bytes; bigger frames take the socket queue. */
static int afp_v2_queue(struct afp_priv *q, uint32_t frames, struct tpacket_req3 *req,
                        char *err, size_t errlen)
{
	int one = 1, rcvbuf = AFP_RCVBUF, rc;

	req->tp_block_size = AFP_V2_BLOCK;
	req->tp_frame_size = AFP_FRAME;
	req->tp_block_nr = (frames * AFP_FRAME + AFP_V2_BLOCK - 1) / AFP_V2_BLOCK;
	req->tp_frame_nr = req->tp_block_nr * (AFP_V2_BLOCK / AFP_FRAME);
	q->rx_fsize = AFP_FRAME;
	q->rx_nframes = req->tp_frame_nr;
	q->rx_ring_size = (size_t)AFP_V2_BLOCK * req->tp_block_nr;
	rc = afp_opt(q->rx_fd, PACKET_COPY_THRESH, one, "PACKET_COPY_THRESH", err, errlen);
	/* FORCE needs CAP_NET_ADMIN; without it the system's rmem_max caps SO_RCVBUF. */
	if (rc == 0 &&
	    setsockopt(q->rx_fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) < 0)
		(void)setsockopt(q->rx_fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	return rc;
}

static int afp_rx_setup(struct afp_priv *q, const char *dev, uint32_t frames, uint32_t tov,
                        char *err, size_t errlen)
{
	struct tpacket_req3 req;
	int rc, e;

	q->rx_fd = afp_socket(dev, err, errlen);
	if (q->rx_fd < 0)
		return q->rx_fd;
	rc = q->rx_v3 ? afp_opt(q->rx_fd, PACKET_VERSION, TPACKET_V3, "TPACKET_V3", err, errlen)
	              : afp_opt(q->rx_fd, PACKET_VERSION, TPACKET_V2, "TPACKET_V2", err, errlen);
	/* The virtio header must be asked for before the ring exists. */
	if (rc == 0 && q->vnet)
		rc = afp_opt(q->rx_fd, PACKET_VNET_HDR, 1, "PACKET_VNET_HDR", err, errlen);
	memset(&req, 0, sizeof(req));
	if (rc == 0 && q->rx_v3)
		afp_req_v3(q, frames, tov, &req);
	else if (rc == 0)
		rc = afp_v2_queue(q, frames, &req, err, errlen);
	if (rc < 0)
		return rc;
	/* A v2 request is the first four fields of the v3 one. */
	if (setsockopt(q->rx_fd, SOL_PACKET, PACKET_RX_RING, &req,
	               q->rx_v3 ? sizeof(req) : sizeof(struct tpacket_req)) < 0) {
		e = errno;
		return ipk_io_err(err, errlen, e, "afpacket: PACKET_RX_RING: %s", strerror(e));
	}
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
	                                     "qdisc_bypass", "tov", "rx", NULL };
	struct afp_priv *q = (struct afp_priv *)io->priv;
	long fanout, frames, tov;
	const char *rxv = ipk_io_arg(a, "rx");
	int promisc, bypass, rc;

	q->rx_fd = q->tx_fd = -1;
	if (ipk_io_arg_check(a, known, err, errlen) < 0)
		return -EINVAL;
	if (rxv && strcmp(rxv, "v2") != 0 && strcmp(rxv, "v3") != 0)
		return ipk_io_err(err, errlen, EINVAL, "afpacket: option rx=%s must be v2 or v3", rxv);
	q->rx_v3 = rxv && strcmp(rxv, "v3") == 0;
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
	q->large = ipk_pool_large(io->pool);
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
	io->caps.offloads = IPK_CAP_RX_CSUM_L4 | IPK_CAP_SG | (q->large ? IPK_CAP_LRO : 0);
	if (q->vnet) {
		/* the kernel finishes sums and cuts GSO frames of both families
		 * (vnet.h: IPK_TXOFF_IP6 -> VIRTIO_NET_HDR_GSO_TCPV6) */
		io->caps.offloads |= IPK_CAP_TX_CSUM_TCP | IPK_CAP_TX_CSUM_UDP | IPK_CAP_TSO |
		                     IPK_CAP_TX_CSUM_TCP6 | IPK_CAP_TSO6 | IPK_CAP_TX_CSUM_UDP6;
		io->caps.tso_max = AFP_TSO_MAX;
	}
	return 0;
}

/* ---------------------------------------------------------------- rx */

/* Where a received frame is and what the kernel said about it. */
struct afp_frame {
	const uint8_t *data;   /* the Ethernet header */
	uint32_t snaplen, len, status;
	const struct virtio_net_hdr *vh; /* with vnet=1: the header before data, else NULL */
};

static uint32_t afp_csum(const struct afp_frame *f)
{
	/* CSUMNOTREADY: built by the local kernel (see the top and ipk_vnet_rx_csum). */
	if (f->status & (TP_STATUS_CSUM_VALID | TP_STATUS_CSUMNOTREADY))
		return IPK_RXCSUM_L4_GOOD;
	return f->vh ? ipk_vnet_rx_csum(f->vh) : 0;
}

static int afp_big_ok(const struct ipk_io *io, const struct afp_frame *f)
{
	const uint8_t *d = f->data;

	if (f->len <= (uint32_t)io->caps.mtu + 14)
		return 1;
	/* Ethernet II with EtherType IPv4 (0x0800) or IPv6 (0x86dd, RFC 2464 §3): a
	 * TCPv6 GSO frame from a veth peer is taken whole as IPv4's is */
	return ((d[12] == 0x08 && d[13] == 0x00) || (d[12] == 0x86 && d[13] == 0xdd)) &&
	       ipk_vnet_rx_big_ok(f->vh, d + 14, f->len - 14, io->caps.mtu);
}

/* The pool a frame of len bytes goes to: the normal one, or the large companion for a
 * coalesced segment; NULL (counted) when it fits neither or the pool is empty. */
static struct ipk_pkt *afp_pkt_for(struct ipk_io *io, const struct afp_priv *q, uint32_t len)
{
	struct ipk_pool *p = len <= q->room ? io->pool : q->large;
	struct ipk_pkt *k;

	if (!p || len > ipk_pool_buf_size(p) - ipk_pool_headroom(p)) {
		io->st.rx_drops++;
		return NULL;
	}
	k = ipk_pkt_alloc(p);
	if (!k)
		io->st.rx_drops++;
	return k;
}

/* Copy one complete frame out of the ring into a packet. */
static struct ipk_pkt *afp_rx_copy(struct ipk_io *io, struct afp_priv *q,
                                   const struct afp_frame *f)
{
	struct ipk_pkt *k;

	if (f->snaplen != f->len || !afp_big_ok(io, f)) {
		io->st.rx_drops++;
		return NULL;
	}
	k = afp_pkt_for(io, q, f->len);
	if (!k)
		return NULL;
	memcpy(ipk_pkt_mtod(k), f->data, f->len);
	k->len = f->len;
	k->rx_csum = afp_csum(f);
	io->st.rx_pkts++;
	io->st.rx_bytes += k->len;
	return k;
}

/* The frame and its virtio header at ring offset `mac` of the slot at base..base+size;
 * -1 when the kernel's offsets point outside the slot (never trust shared memory). */
static int afp_frame_at(const struct afp_priv *q, const uint8_t *base, size_t size,
                        uint32_t mac, uint32_t snaplen, struct afp_frame *f)
{
	uint32_t vh = q->vnet ? (uint32_t)sizeof(struct virtio_net_hdr) : 0;

	if (mac < vh || mac > size || snaplen > size - mac)
		return -1;
	f->data = base + mac;
	f->snaplen = snaplen;
	f->vh = vh ? (const struct virtio_net_hdr *)(base + mac - vh) : NULL;
	return 0;
}

/* --- TPACKET_V2: one frame per slot, handed over at once (no block timeout) ---
 * A frame larger than a slot (a GSO super-frame) is not in the ring: with
 * PACKET_COPY_THRESH the kernel marks the slot TP_STATUS_COPY and queues the whole
 * frame on the socket, in ring order, where recvmsg fetches it. */
static struct ipk_pkt *afp_rx_queued(struct ipk_io *io, struct afp_priv *q, uint32_t status)
{
	struct virtio_net_hdr vh;
	struct afp_frame f;
	struct iovec iov[2];
	struct msghdr mh;
	struct ipk_pkt *k = q->large ? ipk_pkt_alloc(q->large) : NULL;
	ssize_t r;
	int vn = q->vnet ? 1 : 0;

	if (!k) {
		/* consume it anyway: the ring slot and the queue stay in step */
		(void)recv(q->rx_fd, &vh, sizeof(vh), MSG_DONTWAIT | MSG_TRUNC);
		io->st.rx_drops++;
		return NULL;
	}
	iov[0].iov_base = &vh;
	iov[0].iov_len = sizeof(vh);
	iov[1].iov_base = ipk_pkt_mtod(k);
	iov[1].iov_len = ipk_pool_buf_size(q->large) - ipk_pool_headroom(q->large);
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = iov + 1 - vn;
	mh.msg_iovlen = (size_t)(1 + vn);
	r = recvmsg(q->rx_fd, &mh, MSG_DONTWAIT | MSG_TRUNC);
	f.data = ipk_pkt_mtod(k);
	f.vh = vn ? &vh : NULL;
	f.status = status; /* the slot's checksum bits describe the queued frame */
	if (r < vn * (ssize_t)sizeof(vh) + 14 || (mh.msg_flags & MSG_TRUNC)) {
		ipk_pkt_free(k);
		io->st.rx_drops++;
		return NULL;
	}
	f.len = f.snaplen = (uint32_t)r - (uint32_t)vn * (uint32_t)sizeof(vh);
	if (!afp_big_ok(io, &f)) {
		ipk_pkt_free(k);
		io->st.rx_drops++;
		return NULL;
	}
	k->len = f.len;
	k->rx_csum = afp_csum(&f);
	io->st.rx_pkts++;
	io->st.rx_bytes += k->len;
	return k;
}

static int afp_rx_burst_v2(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct afp_priv *q = (struct afp_priv *)io->priv;
	int got = 0;
	uint32_t seen;

	for (seen = 0; got < n && seen < q->rx_nframes; seen++) {
		uint8_t *slot = q->rx_ring + (size_t)q->rx_head * q->rx_fsize;
		struct tpacket2_hdr *h = (struct tpacket2_hdr *)slot;
		/* Acquire: the frame is written before the status says TP_STATUS_USER. */
		uint32_t st = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
		struct ipk_pkt *k = NULL;
		struct afp_frame f;

		if (!(st & TP_STATUS_USER))
			break;
		if (st & TP_STATUS_COPY) {
			k = afp_rx_queued(io, q, st);
		} else if (afp_frame_at(q, slot, q->rx_fsize, h->tp_mac, h->tp_snaplen, &f) == 0) {
			f.len = h->tp_len;
			f.status = st;
			k = afp_rx_copy(io, q, &f);
		} else {
			io->st.rx_drops++;
		}
		if (k)
			pkts[got++] = k;
		__atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
		q->rx_head = (q->rx_head + 1) % q->rx_nframes;
	}
	return got;
}

/* --- TPACKET_V3: blocks of frames, retired when full or after tov ms --- */
static struct tpacket_block_desc *afp_block(struct afp_priv *q, uint32_t i)
{
	return (struct tpacket_block_desc *)(q->rx_ring + (size_t)i * AFP_RX_BLOCK);
}

static void afp_block_done(struct afp_priv *q, struct tpacket_block_desc *b)
{
	/* Release: we are done reading the block before the kernel may refill it. */
	__atomic_store_n(&b->hdr.bh1.block_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
	q->rx_block = (q->rx_block + 1) % q->rx_nblocks;
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
		afp_block_done(q, b);
		return NULL;
	}
	return b;
}

static int afp_rx_burst_v3(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct afp_priv *q = (struct afp_priv *)io->priv;
	uint32_t blocks = 0;
	int got = 0;

	while (got < n && blocks <= q->rx_nblocks) {
		struct tpacket_block_desc *b = afp_block_ready(q);
		const struct tpacket3_hdr *h;
		const uint8_t *end = (const uint8_t *)b + AFP_RX_BLOCK;
		struct afp_frame f;
		struct ipk_pkt *k;

		if (!b)
			break;
		h = (const struct tpacket3_hdr *)q->rx_pkt;
		if ((const uint8_t *)h < (const uint8_t *)b || (const uint8_t *)h + sizeof(*h) > end ||
		    afp_frame_at(q, (const uint8_t *)h, (size_t)(end - (const uint8_t *)h), h->tp_mac,
		                 h->tp_snaplen, &f) < 0) {
			/* offsets outside the block: give the block back whole */
			io->st.rx_drops++;
			q->rx_left = 0;
			afp_block_done(q, b);
			blocks++;
			continue;
		}
		f.len = h->tp_len;
		f.status = h->tp_status;
		k = afp_rx_copy(io, q, &f);
		if (k)
			pkts[got++] = k;
		q->rx_pkt += h->tp_next_offset;
		if (--q->rx_left == 0) {
			afp_block_done(q, b);
			blocks++;
		}
	}
	return got;
}

static int afp_rx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct afp_priv *q = (struct afp_priv *)io->priv;

	return q->rx_v3 ? afp_rx_burst_v3(io, pkts, n) : afp_rx_burst_v2(io, pkts, n);
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
