/* Every backend transmits a packet over external memory (ipk_pkt_attach_ext, issue
 * 17) from its bytes, never by a buffer index: a frame = a pool header + external
 * payload goes out intact and the record is released exactly once. memlink in this
 * process; tap and afpacket (over a veth pair) in a network namespace of our own (unshare;
 * skipped with a note when that is not permitted). AF_XDP and DPDK copy such a
 * piece (afxdp.c xdp_piece_addr, dpdk.c dp_no_ext): tests/afxdp/test_afxdp_veth.c
 * and tests/io/test_dpdk.c send one each. */
#include <ipkit/io.h>

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "check.h"

#define FRAME_HDR 14
#define PAYLOAD 1000

struct ext_rec {
	struct ipk_pkt_ext x;
	int released;
};

static void ext_release(struct ipk_pkt_ext *x)
{
	((struct ext_rec *)x->arg)->released++;
}

static uint8_t region[3 * PAYLOAD];

/* A frame to ff:..:ff of an unused ethertype (0x88b5, local experimental), its payload
 * in the external region at an odd offset. */
static struct ipk_pkt *ext_frame(struct ipk_pool *p, struct ext_rec *r)
{
	static const uint8_t hdr[FRAME_HDR] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0,
	                                        0, 0, 0, 7, 0x88, 0xb5 };
	struct ipk_pkt *h = ipk_pkt_alloc(p), *k;
	uint32_t i;

	memset(r, 0, sizeof(*r));
	r->x.release = ext_release;
	r->x.arg = r;
	for (i = 0; i < sizeof(region); i++)
		region[i] = (uint8_t)(i * 7 + 3);
	k = ipk_pkt_attach_ext(p, region, 333, PAYLOAD, &r->x);
	if (!h || !k)
		return NULL;
	memcpy(ipk_pkt_mtod(h), hdr, FRAME_HDR);
	h->len = FRAME_HDR;
	h->next = k;
	return h;
}

static int frame_ok(const uint8_t *f, size_t n)
{
	return n >= FRAME_HDR + PAYLOAD && f[12] == 0x88 && f[13] == 0xb5 &&
	       memcmp(f + FRAME_HDR, region + 333, PAYLOAD) == 0;
}

static void test_ext_tx_memlink(void)
{
	struct ipk_pool *pa = ipk_pool_create(NULL, NULL, 0), *pb = ipk_pool_create(NULL, NULL, 0);
	struct ipk_io *a, *b;
	struct ipk_pkt *k, *got[4];
	struct ext_rec r;
	char spec[96], err[256] = "";
	uint8_t buf[2048];
	int n = 0, i;

	snprintf(spec, sizeof(spec), "memlink:ipkext%ld,role=a,busypoll=1", (long)getpid());
	a = ipk_io_open(spec, pa, err, sizeof(err));
	snprintf(spec, sizeof(spec), "memlink:ipkext%ld,role=b,busypoll=1,wait=1000", (long)getpid());
	b = a ? ipk_io_open(spec, pb, err, sizeof(err)) : NULL;
	CHECK(a && b);
	if (!a || !b) {
		fprintf(stderr, "memlink: %s\n", err);
		goto out;
	}
	k = ext_frame(pa, &r);
	CHECK_EQ(ipk_io_tx_burst(a, &k, 1), 1);
	ipk_io_flush(a);
	for (i = 0; i < 1000 && n == 0; i++)
		n = ipk_io_rx_burst(b, got, 4);
	CHECK_EQ(n, 1);
	if (n == 1) {
		uint32_t len = ipk_pkt_linearize(got[0], buf, sizeof(buf));

		CHECK(frame_ok(buf, len));
		ipk_pkt_free_chain(got[0]);
	}
	CHECK_EQ(r.released, 1);
out:
	ipk_io_close(a);
	ipk_io_close(b);
	ipk_pool_destroy(pa);
	ipk_pool_destroy(pb);
}

/* A packet socket on dev (in our namespace) sees what the backend writes. */
static int capture_open(const char *dev)
{
	struct sockaddr_ll sl;
	struct timeval tv = { 0, 200000 };
	int fd = socket(AF_PACKET, SOCK_RAW, htons(0x88b5));

	if (fd < 0)
		return -1;
	memset(&sl, 0, sizeof(sl));
	sl.sll_family = AF_PACKET;
	sl.sll_protocol = htons(0x88b5);
	sl.sll_ifindex = (int)if_nametoindex(dev);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (sl.sll_ifindex == 0 || bind(fd, (struct sockaddr *)&sl, sizeof(sl)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Send one ext frame through the backend `spec` on dev, capture it: bounded to a
 * few tries (a packet socket may see our own frame as outgoing and incoming). */
static void ext_tx_captured(const char *spec, const char *dev)
{
	struct ipk_pool *p = ipk_pool_create(NULL, NULL, 0);
	struct ipk_io *io;
	struct ipk_pkt *k;
	struct ext_rec r;
	char err[256] = "";
	uint8_t buf[4096];
	int fd, seen = 0, i;

	io = ipk_io_open(spec, p, err, sizeof(err));
	CHECK(io != NULL);
	if (!io) {
		fprintf(stderr, "%s: %s\n", spec, err);
		ipk_pool_destroy(p);
		return;
	}
	fd = capture_open(dev);
	CHECK(fd >= 0);
	k = ext_frame(p, &r);
	CHECK_EQ(ipk_io_tx_burst(io, &k, 1), 1);
	ipk_io_flush(io);
	for (i = 0; i < 4 && fd >= 0 && !seen; i++) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		seen = n > 0 && frame_ok(buf, (size_t)n);
	}
	CHECK(seen);
	ipk_io_close(io);
	CHECK_EQ(r.released, 1);
	if (fd >= 0)
		close(fd);
	ipk_pool_destroy(p);
}

static int netns_ok;

static void test_ext_tx_tap(void)
{
	if (!netns_ok)
		return;
	ext_tx_captured("tap:ipkext0,vnet=0,up=1", "ipkext0");
	ext_tx_captured("tap:ipkext1,vnet=1,up=1", "ipkext1");
}

static void test_ext_tx_afpacket(void)
{
	if (!netns_ok)
		return;
	/* a veth pair inside our namespace: send on one end, capture on the other */
	if (system("ip link add ipkexa type veth peer name ipkexb && ip link set ipkexa up && "
	           "ip link set ipkexb up") != 0) {
		printf("note: no veth pair: afpacket skipped\n");
		return;
	}
	ext_tx_captured("afpacket:ipkexa", "ipkexb");
}

/* lo up in a fresh namespace (it starts down). */
static int lo_up(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM, 0), rc;

	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	rc = ioctl(fd, SIOCGIFFLAGS, &ifr);
	ifr.ifr_flags |= IFF_UP;
	if (rc == 0)
		rc = ioctl(fd, SIOCSIFFLAGS, &ifr);
	close(fd);
	return rc;
}

int main(void)
{
	RUN(test_ext_tx_memlink);
	/* Our own namespace: the devices we create vanish with the process. */
	netns_ok = unshare(CLONE_NEWNET) == 0 && lo_up() == 0;
	if (!netns_ok)
		printf("note: no network namespace (%s): tap and afpacket skipped\n", strerror(errno));
	RUN(test_ext_tx_tap);
	RUN(test_ext_tx_afpacket);
	return check_summary();
}
