/*
 * TAP (Ethernet) and TUN (raw IPv4) devices through /dev/net/tun.
 *
 * With vnet=1 every frame is preceded by a struct virtio_net_hdr (IFF_VNET_HDR), which
 * is how the kernel and we trade offloads:
 *   tx: IPK_TXOFF_*_CSUM -> VIRTIO_NET_HDR_F_NEEDS_CSUM (csum_start/offset; the core
 *       already put the pseudo-header sum in the field, as Linux's CHECKSUM_PARTIAL
 *       expects); IPK_TXOFF_TSO -> GSO_TCPV4 + gso_size: the kernel segments (or, for a
 *       local destination, takes the large segment whole).
 *   rx: VIRTIO_NET_HDR_F_DATA_VALID -> IPK_RXCSUM_L4_GOOD. F_NEEDS_CSUM means the frame
 *       was built by the local kernel with a partial checksum (CHECKSUM_PARTIAL): its
 *       bytes never crossed a wire, so the data is intact but the checksum field only
 *       holds the pseudo-header sum. Verifying it would fail, so we report
 *       IPK_RXCSUM_L4_GOOD and the core trusts it; the frame is only consumed here,
 *       never forwarded, so the missing checksum cannot leak onto a wire.
 *       GSO frames (gso_type TCPV4, larger than the MTU): with TUN_F_TSO4 the kernel
 *       hands over its TCP segments unsplit, up to 64 KiB, so one read moves what
 *       would be ~45 frames. The core takes them whole (IPK_CAP_LRO) but only flat,
 *       never as chains, so each read scatters into a normal pool buffer followed by
 *       the tail of a spare buffer of the pool's large companion (ipk_pool_large):
 *       a frame that fits the first stays there; a longer one is made flat in the
 *       large buffer by copying only the first part in front of the tail.
 * offload=0 turns all of this off (the kernel then checksums and segments before
 * handing frames over).
 */
#include "io_internal.h"
#include "vnet.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <linux/virtio_net.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define TAP_MAX_IOV 64
#define TAP_TSO_MAX 64000u      /* TCP payload per super-frame: IPv4 total length <= 65535 */
#define TAP_LRO_ROOM (65535u + 14u)

struct tap_priv {
	int fd;
	int vnet;
	int offload;
	uint32_t room;          /* bytes a pool buffer holds after the headroom */
	struct ipk_pool *large; /* with TUN_F_TSO4 and small buffers: super-frames go here */
	struct ipk_pkt *spare;  /* the large buffer the next read may spill into */
};

/* ------------------------------------------------------------ device */

static int tap_ifreq(const char *dev, unsigned long req, struct ifreq *ifr)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc, e;

	if (s < 0)
		return -errno;
	memcpy(ifr->ifr_name, dev, strlen(dev) + 1); /* length checked at open */
	rc = ioctl(s, req, ifr);
	e = errno;
	close(s);
	return rc < 0 ? -e : 0;
}

/* up=1 / mtu=N: set the link up and its MTU for callers without ip(8). */
static int tap_link_setup(const char *dev, int up, long mtu, char *err, size_t errlen)
{
	struct ifreq ifr;
	int rc;

	if (mtu > 0) {
		memset(&ifr, 0, sizeof(ifr));
		ifr.ifr_mtu = (int)mtu;
		rc = tap_ifreq(dev, SIOCSIFMTU, &ifr);
		if (rc < 0)
			return ipk_io_err(err, errlen, -rc, "tap: setting mtu %ld on %s: %s", mtu, dev,
			                  strerror(-rc));
	}
	if (!up)
		return 0;
	memset(&ifr, 0, sizeof(ifr));
	rc = tap_ifreq(dev, SIOCGIFFLAGS, &ifr);
	if (rc == 0) {
		ifr.ifr_flags |= IFF_UP;
		rc = tap_ifreq(dev, SIOCSIFFLAGS, &ifr);
	}
	if (rc < 0)
		return ipk_io_err(err, errlen, -rc, "tap: setting %s up: %s%s", dev, strerror(-rc),
		                  rc == -EPERM ? " (needs CAP_NET_ADMIN)" : "");
	return 0;
}

static int tap_attach(struct tap_priv *t, const char *kind, const char *dev, int is_tap,
                      int persist, char *err, size_t errlen)
{
	struct ifreq ifr;
	int e;

	t->fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (t->fd < 0) {
		e = errno;
		return ipk_io_err(err, errlen, e, "%s: cannot open /dev/net/tun: %s%s", kind,
		                  strerror(e),
		                  e == ENOENT ? " (load the tun module)"
		                  : (e == EACCES || e == EPERM) ? " (needs CAP_NET_ADMIN)" : "");
	}
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, dev, strlen(dev)); /* length checked at open */
	ifr.ifr_flags = (short)((is_tap ? IFF_TAP : IFF_TUN) | IFF_NO_PI |
	                        (t->vnet ? IFF_VNET_HDR : 0));
	if (ioctl(t->fd, TUNSETIFF, &ifr) < 0) {
		e = errno;
		if (e == EPERM)
			return ipk_io_err(err, errlen, e, "%s: %s: needs CAP_NET_ADMIN", kind, dev);
		if (e == EBUSY)
			return ipk_io_err(err, errlen, e, "%s: %s is busy (attached by another process)",
			                  kind, dev);
		if (e == EINVAL)
			return ipk_io_err(err, errlen, e,
			                  "%s: %s exists with other flags (not a %s device?)", kind,
			                  dev, kind);
		return ipk_io_err(err, errlen, e, "%s: TUNSETIFF %s: %s", kind, dev, strerror(e));
	}
	if (persist >= 0 && ioctl(t->fd, TUNSETPERSIST, persist) < 0) {
		e = errno;
		return ipk_io_err(err, errlen, e, "%s: TUNSETPERSIST %s: %s", kind, dev, strerror(e));
	}
	return 0;
}

/* Offloads the kernel may hand us (TUNSETOFFLOAD) and what we advertise to the core. */
static int tap_offloads(struct ipk_io *io, struct tap_priv *t, const char *kind, char *err,
                        size_t errlen)
{
	unsigned int off = 0;
	int hdrsz = (int)sizeof(struct virtio_net_hdr), e;

	if (!t->vnet)
		return 0;
	if (ioctl(t->fd, TUNSETVNETHDRSZ, &hdrsz) < 0) {
		e = errno;
		return ipk_io_err(err, errlen, e, "%s: TUNSETVNETHDRSZ: %s", kind, strerror(e));
	}
	if (t->offload) {
		off = TUN_F_CSUM;
		if (t->room < TAP_LRO_ROOM)
			t->large = ipk_pool_large(io->pool);
		if (t->room >= TAP_LRO_ROOM || t->large)
			off |= TUN_F_TSO4 | TUN_F_TSO6;
	}
	if (ioctl(t->fd, TUNSETOFFLOAD, off) < 0) {
		e = errno;
		return ipk_io_err(err, errlen, e, "%s: TUNSETOFFLOAD: %s", kind, strerror(e));
	}
	if (!t->offload)
		return 0;
	io->caps.offloads = IPK_CAP_RX_CSUM_L4 | IPK_CAP_TX_CSUM_TCP | IPK_CAP_TX_CSUM_UDP |
	                    IPK_CAP_TSO | IPK_CAP_SG | ((off & TUN_F_TSO4) ? IPK_CAP_LRO : 0) |
	                    IPK_CAP_TX_CSUM_TCP6 | IPK_CAP_TSO6 | IPK_CAP_TX_CSUM_UDP6;
	io->caps.tso_max = TAP_TSO_MAX;
	return 0;
}

static int tap_mtu(struct ipk_io *io, const char *kind, const char *dev, char *err,
                   size_t errlen)
{
	struct tap_priv *t = (struct tap_priv *)io->priv;
	uint32_t l2 = io->caps.link == IPK_LINK_ETH ? 14 : 0;
	struct ifreq ifr;
	int rc;

	memset(&ifr, 0, sizeof(ifr));
	rc = tap_ifreq(dev, SIOCGIFMTU, &ifr);
	if (rc < 0)
		return ipk_io_err(err, errlen, -rc, "%s: SIOCGIFMTU %s: %s", kind, dev, strerror(-rc));
	if (ifr.ifr_mtu <= 0 || (uint32_t)ifr.ifr_mtu + l2 > t->room)
		return ipk_io_err(err, errlen, EINVAL,
		                  "%s: %s: mtu %d does not fit a pool buffer (%u bytes after headroom)",
		                  kind, dev, ifr.ifr_mtu, t->room);
	io->caps.mtu = (uint16_t)(ifr.ifr_mtu > 65535 ? 65535 : ifr.ifr_mtu);
	return 0;
}

static int tap_open_kind(struct ipk_io *io, const struct ipk_io_args *a, int is_tap, char *err,
                         size_t errlen)
{
	static const char *const known[] = { "vnet", "offload", "persist", "up", "mtu", NULL };
	struct tap_priv *t = (struct tap_priv *)io->priv;
	const char *kind = is_tap ? "tap" : "tun";
	int up, persist, rc;
	long mtu;

	t->fd = -1;
	if (ipk_io_arg_check(a, known, err, errlen) < 0)
		return -EINVAL;
	if (strlen(a->dev) >= IFNAMSIZ)
		return ipk_io_err(err, errlen, EINVAL, "%s: device name '%s' longer than %d bytes",
		                  kind, a->dev, IFNAMSIZ - 1);
	t->vnet = ipk_io_arg_bool(a, "vnet", is_tap, err, errlen);
	t->offload = ipk_io_arg_bool(a, "offload", 1, err, errlen);
	persist = ipk_io_arg_bool(a, "persist", -1, err, errlen);
	up = ipk_io_arg_bool(a, "up", 0, err, errlen);
	mtu = ipk_io_arg_int(a, "mtu", 0, err, errlen);
	if (t->vnet < 0 || t->offload < 0 || up < 0 || mtu < 0 ||
	    (ipk_io_arg(a, "persist") && persist < 0))
		return -EINVAL;
	if (!t->vnet)
		t->offload = 0;
	t->room = ipk_pool_buf_size(io->pool) - ipk_pool_headroom(io->pool);
	io->caps.link = is_tap ? IPK_LINK_ETH : IPK_LINK_RAWIP;
	io->caps.nqueues = 1;
	rc = tap_attach(t, kind, a->dev, is_tap, persist, err, errlen);
	if (rc == 0)
		rc = tap_offloads(io, t, kind, err, errlen);
	if (rc == 0 && (up || mtu))
		rc = tap_link_setup(a->dev, up, mtu, err, errlen);
	if (rc == 0)
		rc = tap_mtu(io, kind, a->dev, err, errlen);
	/* The device's own MAC is the kernel side's; the core gets a random local one. */
	if (rc == 0 && is_tap && getrandom(io->caps.mac, 6, 0) == 6)
		io->caps.mac[0] = (uint8_t)((io->caps.mac[0] & 0xfe) | 0x02);
	if (rc < 0 && t->fd >= 0) {
		close(t->fd);
		t->fd = -1;
	}
	return rc;
}

static int tap_open(struct ipk_io *io, const struct ipk_io_args *a, char *err, size_t errlen)
{
	return tap_open_kind(io, a, 1, err, errlen);
}

static int tun_open(struct ipk_io *io, const struct ipk_io_args *a, char *err, size_t errlen)
{
	return tap_open_kind(io, a, 0, err, errlen);
}

/* ---------------------------------------------------------------- rx */

/* The spill tail starts this far into a large buffer: room for the part the normal
 * buffer took (copied in front of the tail) after the large pool's headroom. */
static uint32_t tap_spill_off(const struct tap_priv *t)
{
	return ipk_pool_headroom(t->large) + t->room;
}

/* Scatter list for one read: [virtio header] normal buffer [spare large tail]. */
static int tap_rx_iov(struct tap_priv *t, struct virtio_net_hdr *vh, struct ipk_pkt *k,
                      struct iovec *iov)
{
	int cnt = 0;

	if (t->vnet) {
		iov[cnt].iov_base = vh;
		iov[cnt++].iov_len = sizeof(*vh);
	}
	iov[cnt].iov_base = ipk_pkt_mtod(k);
	iov[cnt++].iov_len = t->room;
	if (t->large && !t->spare)
		t->spare = ipk_pkt_alloc(t->large);
	if (t->spare) {
		iov[cnt].iov_base = t->spare->buf + tap_spill_off(t);
		iov[cnt++].iov_len = TAP_LRO_ROOM - t->room;
	}
	return cnt;
}

/* A read of len bytes longer than the normal buffer: move its first part in front of
 * the spilled tail so the large buffer holds the frame flat. */
static struct ipk_pkt *tap_rx_join(struct tap_priv *t, struct ipk_pkt *k, uint32_t len)
{
	struct ipk_pkt *big = t->spare;

	t->spare = NULL;
	big->off = tap_spill_off(t) - t->room;
	memcpy(ipk_pkt_mtod(big), ipk_pkt_mtod(k), t->room);
	big->len = len;
	ipk_pkt_free(k);
	return big;
}

/* Checks and marks one frame just read; NULL when it was dropped (counted). */
static struct ipk_pkt *tap_rx_frame(struct ipk_io *io, struct tap_priv *t, struct ipk_pkt *k,
                                    const struct virtio_net_hdr *vh, uint32_t len)
{
	uint32_t l2 = io->caps.link == IPK_LINK_ETH ? 14 : 0;
	const uint8_t *d;

	if (len > t->room)
		k = tap_rx_join(t, k, len);
	d = ipk_pkt_mtod(k);
	/* Ethernet II with EtherType IPv4 (0x0800) or IPv6 (0x86dd) when the frame is
	 * above the MTU */
	if (len > io->caps.mtu + l2 &&
	    ((l2 && !(d[12] == 0x08 && d[13] == 0x00) && !(d[12] == 0x86 && d[13] == 0xdd)) ||
	     !ipk_vnet_rx_big_ok(t->vnet ? vh : NULL, d + l2, len - l2, io->caps.mtu))) {
		ipk_pkt_free(k);
		io->st.rx_drops++;
		return NULL;
	}
	k->len = len;
	if (t->vnet)
		k->rx_csum = ipk_vnet_rx_csum(vh);
	io->st.rx_pkts++;
	io->st.rx_bytes += len;
	return k;
}

/* The pool is empty: read one frame into nothing and count it. Leaving it in the
 * device would keep the fd readable, and a node polling it would spin without ever
 * getting a buffer (issue 14: the node burnt a core and received nothing); dropping
 * it lets the node sleep, and the next frame gets a buffer as soon as one is free.
 * Returns 0 when the device had no frame. */
static int tap_rx_discard(struct ipk_io *io, struct tap_priv *t)
{
	uint8_t sink[64];
	ssize_t r = read(t->fd, sink, sizeof(sink)); /* a datagram: the rest is discarded */

	if (r <= 0)
		return 0;
	io->st.rx_drops++;
	return 1;
}

static int tap_rx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct tap_priv *t = (struct tap_priv *)io->priv;
	struct virtio_net_hdr vh;
	struct iovec iov[3];
	int got = 0, dropped = 0;

	/* One read per frame; stop at the first EAGAIN. */
	while (got + dropped < n) {
		struct ipk_pkt *k = ipk_pkt_alloc(io->pool);
		ssize_t r;
		uint32_t vhl = t->vnet ? (uint32_t)sizeof(vh) : 0;

		if (!k) {
			if (!tap_rx_discard(io, t))
				break;
			dropped++;
			continue;
		}
		r = readv(t->fd, iov, tap_rx_iov(t, &vh, k, iov));
		if (r <= 0) {
			int e = errno;

			ipk_pkt_free(k);
			if (r < 0 && e != EAGAIN && e != EINTR) {
				io->st.rx_errors++;
				return got ? got : -e;
			}
			break;
		}
		/* tun reports a frame's full length even when it had to cut it to the room
		 * we gave (a super-frame while the large pool was empty): drop those. */
		if ((uint32_t)r < vhl ||
		    (uint32_t)r - vhl > t->room + (t->spare ? TAP_LRO_ROOM - t->room : 0)) {
			ipk_pkt_free(k);
			io->st.rx_drops++;
			continue;
		}
		k = tap_rx_frame(io, t, k, &vh, (uint32_t)r - vhl);
		if (k)
			pkts[got++] = k;
	}
	return got;
}

/* ---------------------------------------------------------------- tx */

static int tap_tx_one(struct tap_priv *t, struct ipk_pkt *k)
{
	struct iovec iov[TAP_MAX_IOV + 1];
	struct virtio_net_hdr vh;
	const struct ipk_pkt *s;
	int cnt = 0;
	ssize_t r;

	if (t->vnet) {
		ipk_vnet_from_meta(&k->meta, &vh);
		iov[cnt].iov_base = &vh;
		iov[cnt++].iov_len = sizeof(vh);
	}
	for (s = k; s; s = s->next) {
		if (cnt == TAP_MAX_IOV + 1)
			return -EMSGSIZE;
		iov[cnt].iov_base = ipk_pkt_mtod(s);
		iov[cnt++].iov_len = s->len;
	}
	r = writev(t->fd, iov, cnt);
	if (r < 0)
		return -errno;
	return (int)r - (t->vnet ? (int)sizeof(vh) : 0); /* the frame's bytes */
}

static int tap_tx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct tap_priv *t = (struct tap_priv *)io->priv;
	int i;

	for (i = 0; i < n; i++) {
		int rc = tap_tx_one(t, pkts[i]);

		if (rc == -EAGAIN || rc == -EINTR || rc == -ENOBUFS)
			break; /* queue full: the rest stays the caller's */
		if (rc < 0) {
			io->st.tx_errors++;
			io->st.tx_drops++;
		} else {
			io->st.tx_pkts++;
			io->st.tx_bytes += (uint32_t)rc;
		}
		ipk_pkt_free_chain(pkts[i]);
	}
	return i;
}

static int tap_flush(struct ipk_io *io)
{
	(void)io;
	return 0; /* every write is already on its way */
}

static int tap_fd(const struct ipk_io *io)
{
	return ((const struct tap_priv *)io->priv)->fd;
}

static void tap_close(struct ipk_io *io)
{
	struct tap_priv *t = (struct tap_priv *)io->priv;

	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
	ipk_pkt_free(t->spare);
	t->spare = NULL;
}

const struct ipk_io_backend ipk_io_tap_backend = {
	"tap", sizeof(struct tap_priv), tap_open, tap_rx_burst, tap_tx_burst,
	tap_flush, tap_fd, NULL, tap_close,
};

const struct ipk_io_backend ipk_io_tun_backend = {
	"tun", sizeof(struct tap_priv), tun_open, tap_rx_burst, tap_tx_burst,
	tap_flush, tap_fd, NULL, tap_close,
};
