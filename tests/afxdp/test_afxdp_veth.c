/*
 * afxdp backend against Linux over a veth pair in two namespaces this test creates
 * (ipk<pid-hex>l: Linux peer 10.77.0.1; ipk<pid-hex>k: the kernel keeps 10.77.0.3 on
 * the same device where ipkit answers for 10.77.0.2 through AF_XDP).
 *
 * Proves, for generic (skb) and native (drv) XDP: Linux's ping to ipkit's address is
 * answered (ARP and ICMP reach the socket, replies leave through its tx ring), while
 * a ping to the kernel's own address on the same device still works and none of its
 * frames reach the socket (XDP_PASS). Multi-buffer (sg=1) at MTU 9000 between two
 * sockets, one on each end of the pair. Then the documented configuration errors.
 * Skips (77) without root or without the ip tool. Namespaces are removed at exit.
 */
#include "check.h"

#include <ipkit/io.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char ns_l[32], ns_k[32];
static int made;

static int sh(const char *fmt, const char *a, const char *b)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, fmt, a, b);
	return system(cmd);
}

static void cleanup(void)
{
	if (!made)
		return;
	made = 0;
	sh("ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null", ns_l, ns_k);
}

static void on_signal(int sig)
{
	cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int setup(void)
{
	char cmd[1024];
	int fd;

	snprintf(ns_l, sizeof ns_l, "ipk%04xl", (unsigned)getpid() & 0xffff);
	snprintf(ns_k, sizeof ns_k, "ipk%04xk", (unsigned)getpid() & 0xffff);
	atexit(cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGALRM, on_signal);
	alarm(120);
	made = 1;
	snprintf(cmd, sizeof cmd,
	         "set -e; ip netns add %s; ip netns add %s;"
	         "ip link add vl netns %s type veth peer name vk netns %s;"
	         "ip -n %s addr add 10.77.0.1/24 dev vl; ip -n %s link set vl up;"
	         "ip -n %s addr add 10.77.0.3/24 dev vk; ip -n %s link set vk up;"
	         "ip -n %s link set lo up; ip -n %s link set lo up",
	         ns_l, ns_k, ns_l, ns_k, ns_l, ns_l, ns_k, ns_k, ns_l, ns_k);
	if (system(cmd) != 0)
		return -1;
	snprintf(cmd, sizeof cmd, "/var/run/netns/%s", ns_k);
	fd = open(cmd, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
		return -1;
	close(fd);
	return 0;
}

static struct ipk_pool *pool_new(uint32_t buf_size)
{
	struct ipk_pool_cfg c;
	char err[256];
	ipk_pool_cfg_default(&c);
	c.nbufs = 4096;
	c.buf_size = buf_size;
	return ipk_pool_create(&c, err, sizeof err);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static const uint8_t ipk_ip[4] = { 10, 77, 0, 2 }, host_ip[4] = { 10, 77, 0, 3 };

struct seen { int arp_for_us, icmp_for_us, for_host, other; };

/* Answer ARP requests for 10.77.0.2 and ICMP echo requests to it, in place. */
static int answer(struct ipk_pkt *k, const uint8_t mac[6], struct seen *s)
{
	uint8_t *d = ipk_pkt_mtod(k), t[6];
	uint32_t sum;

	if (k->len >= 42 && d[12] == 0x08 && d[13] == 0x06) {
		if (memcmp(d + 38, host_ip, 4) == 0) {
			s->for_host++;
			return 0;
		}
		if (memcmp(d + 38, ipk_ip, 4) || d[21] != 1) {
			s->other++;
			return 0;
		}
		s->arp_for_us++;
		memcpy(d, d + 6, 6);
		memcpy(d + 6, mac, 6);
		d[21] = 2;                        /* RFC 826 reply */
		memcpy(d + 32, d + 22, 10);       /* target = the asker */
		memcpy(d + 22, mac, 6);
		memcpy(d + 28, ipk_ip, 4);
		return 1;
	}
	if (k->len >= 42 && d[12] == 0x08 && d[13] == 0x00 && (d[14] & 0x0f) == 5) {
		if (memcmp(d + 30, host_ip, 4) == 0) {
			s->for_host++;
			return 0;
		}
		if (memcmp(d + 30, ipk_ip, 4) || d[23] != 1 || d[34] != 8) {
			s->other++;
			return 0;
		}
		s->icmp_for_us++;
		memcpy(t, d, 6);
		memcpy(d, d + 6, 6);
		memcpy(d + 6, t, 6);
		memcpy(d + 30, d + 26, 4);
		memcpy(d + 26, ipk_ip, 4);
		d[34] = 0;                        /* echo reply; RFC 1624 incremental sum */
		sum = (uint32_t)((d[36] << 8) | d[37]) + 0x0800u;
		sum = (sum & 0xffff) + (sum >> 16);
		d[36] = (uint8_t)(sum >> 8);
		d[37] = (uint8_t)sum;
		return 1;
	}
	s->other++;
	return 0;
}

static pid_t spawn_ping(const char *dst)
{
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);
		dup2(fd, 1);
		execlp("ip", "ip", "netns", "exec", ns_l, "ping", "-c", "3", "-i", "0.2", "-W", "2",
		       dst, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Serve until the ping child exits (bounded); returns its exit status. */
static int serve_until(struct ipk_io *io, pid_t pid, struct seen *s)
{
	uint64_t end = now_ms() + 15000;
	struct ipk_pkt *v[32], *out[32];
	int status = -1, i, n, k;

	while (now_ms() < end) {
		struct pollfd pf = { ipk_io_fd(io), POLLIN, 0 };
		if (waitpid(pid, &status, WNOHANG) == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
		if (ipk_io_arm(io) == 0)
			poll(&pf, 1, 20);
		n = ipk_io_rx_burst(io, v, 32);
		for (i = 0, k = 0; i < n; i++) {
			if (answer(v[i], ipk_io_caps(io)->mac, s))
				out[k++] = v[i];
			else
				ipk_pkt_free(v[i]);
		}
		i = ipk_io_tx_burst(io, out, k);
		for (; i < k; i++)
			ipk_pkt_free(out[i]);
		ipk_io_flush(io);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

#ifndef SO_PREFER_BUSY_POLL
#define SO_PREFER_BUSY_POLL 69
#endif

static int sockopt(int fd, int opt)
{
	int v = -1;
	socklen_t l = sizeof v;

	return getsockopt(fd, SOL_SOCKET, opt, &v, &l) < 0 ? -1 : v;
}

/* busy_poll=1 set the socket's busy-poll options; without it they are off */
static void check_busy_poll(struct ipk_io *io, int on)
{
	int fd = ipk_io_fd(io);

	CHECK_EQ(sockopt(fd, SO_PREFER_BUSY_POLL), on);
	CHECK_EQ(sockopt(fd, SO_BUSY_POLL), on ? 20 : 0); /* (the budget cannot be read back) */
}

static void run_mode_opts(const char *mode, const char *opts)
{
	struct ipk_pool *pool = pool_new(2048);
	char spec[128], err[256] = "";
	struct ipk_io *io;
	struct seen s;
	uint32_t b = 1, d = 1;

	memset(&s, 0, sizeof s);
	snprintf(spec, sizeof spec, "afxdp:vk,queue=0,mode=%s,ip=10.77.0.2%s", mode, opts);
	io = ipk_io_open(spec, pool, err, sizeof err);
	if (!io)
		fprintf(stderr, "%s: %s\n", spec, err);
	CHECK(io != NULL);
	if (io) {
		struct ipk_io_stats st;
		check_busy_poll(io, strstr(opts, "busy_poll=1") != NULL);
		CHECK_EQ(serve_until(io, spawn_ping("10.77.0.2"), &s), 0);   /* ipkit answers */
		CHECK_EQ(serve_until(io, spawn_ping("10.77.0.3"), &s), 0);   /* kernel still does */
		CHECK(s.arp_for_us >= 1);
		CHECK(s.icmp_for_us >= 3);
		CHECK_EQ(s.for_host, 0);                                      /* XDP_PASS */
		ipk_io_stats(io, &st);
		CHECK(st.tx_pkts >= 4);
		CHECK_EQ(st.rx_errors + st.tx_errors, 0);
		ipk_io_close(io);
	}
	ipk_pool_usage(pool, &b, &d);
	CHECK_EQ(b, 0);
	CHECK_EQ(d, 0);
	ipk_pool_destroy(pool);
	sh("ip -n %s neigh flush dev vl%s", ns_l, "");
}

static void run_mode(const char *mode) { run_mode_opts(mode, ""); }
static void test_skb_mode_ping_answered_and_host_traffic_passed(void) { run_mode("skb"); }
static void test_drv_mode_ping_answered_and_host_traffic_passed(void) { run_mode("drv"); }
/* The sockets poll the device themselves: the same exchange still works */
static void test_busy_poll_sets_socket_options_and_serves(void)
{
	run_mode_opts("drv", ",busy_poll=1");
}

/* set_addr after open (the runtime's way) steers like ip= does */
static void test_set_addr_after_open_steers(void)
{
	struct ipk_pool *pool = pool_new(2048);
	char err[256] = "";
	struct ipk_io *io = ipk_io_open("afxdp:vk", pool, err, sizeof err);
	struct seen s;

	memset(&s, 0, sizeof s);
	if (!io)
		fprintf(stderr, "afxdp:vk: %s\n", err);
	CHECK(io != NULL);
	if (io) {
		CHECK_EQ(ipk_io_set_addr(io, htonl(0x0a4d0002u),
		                         NULL), 0);
		CHECK_EQ(serve_until(io, spawn_ping("10.77.0.2"), &s), 0);
		CHECK(s.icmp_for_us >= 3);
		ipk_io_close(io);
	}
	ipk_pool_destroy(pool);
	sh("ip -n %s neigh flush dev vl%s", ns_l, "");
}

/* vk's transmitted frames from /proc/net/dev (it follows the caller's namespace,
 * /sys does not): after "vk:" come 8 receive counters, then tx bytes, tx packets. */
static uint64_t vk_tx_packets(void)
{
	FILE *f = fopen("/proc/net/dev", "r");
	unsigned long long r[8], tb, tp = 0;
	char line[512];

	while (f && fgets(line, sizeof line, f)) {
		const char *c = strstr(line, "vk:");
		if (c && sscanf(c + 3, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &r[0],
		                &r[1], &r[2], &r[3], &r[4], &r[5], &r[6], &r[7], &tb, &tp) == 10)
			break;
		tp = 0;
	}
	if (f)
		fclose(f);
	return tp;
}

/* Regression: copy-mode sendto transmits at most 32 descriptors a call, and the
 * backend used to kick once in tx_burst and once in flush, so of a 200-frame burst 64
 * left and the rest waited in the ring for the next round (or for the node to wake).
 * One ipk_io_flush must now put the whole burst on the wire. */
static void burst_one_flush(const char *mode)
{
	enum { N = 200 };
	struct ipk_pool *pool = pool_new(2048);
	struct ipk_pkt *v[N];
	char spec[128], err[256] = "";
	struct ipk_io *io;
	uint64_t before;
	int i, took;

	snprintf(spec, sizeof spec, "afxdp:vk,mode=%s,ip=10.77.0.2", mode);
	io = ipk_io_open(spec, pool, err, sizeof err);
	if (!io)
		fprintf(stderr, "%s: %s\n", spec, err);
	CHECK(io != NULL);
	if (!io) {
		ipk_pool_destroy(pool);
		return;
	}
	for (i = 0; i < N; i++) {
		uint8_t *d;
		v[i] = ipk_pkt_alloc(pool);
		CHECK(v[i] != NULL);
		if (!v[i])
			break;
		d = ipk_pkt_mtod(v[i]);
		memset(d, 0, 60);
		d[0] = 0x02;                     /* to a MAC nobody has: the peer drops it */
		d[5] = 0x99;
		memcpy(d + 6, ipk_io_caps(io)->mac, 6);
		d[12] = 0x88;                    /* IEEE 802 local experimental EtherType */
		d[13] = 0xb5;
		v[i]->len = 60;
	}
	before = vk_tx_packets();
	took = ipk_io_tx_burst(io, v, i);
	CHECK_EQ(took, N);
	for (; took < i; took++)
		ipk_pkt_free(v[took]);
	CHECK_EQ(ipk_io_flush(io), 0);
	CHECK_EQ(vk_tx_packets() - before, N);
	ipk_io_close(io);
	ipk_pool_destroy(pool);
}

struct ext_rec {
	struct ipk_pkt_ext x;
	int released;
};

static void ext_release(struct ipk_pkt_ext *x)
{
	((struct ext_rec *)x->arg)->released++;
}

/* Issue 17: a frame whose payload is external memory (ipk_pkt_attach_ext, idx
 * IPK_PKT_IDX_EXT) is not in the UMEM: it is copied into a frame (never addressed
 * by its index), leaves, and the record is released once. */
static void ext_payload_leaves(const char *mode)
{
	static uint8_t region[1000];
	struct ipk_pool *pool = pool_new(2048);
	struct ipk_pkt *h;
	struct ext_rec rec;
	char spec[128], err[256] = "";
	struct ipk_io *io;
	uint64_t before;

	snprintf(spec, sizeof spec, "afxdp:vk,mode=%s,ip=10.77.0.2", mode);
	io = ipk_io_open(spec, pool, err, sizeof err);
	if (!io)
		fprintf(stderr, "%s: %s\n", spec, err);
	CHECK(io != NULL);
	if (!io) {
		ipk_pool_destroy(pool);
		return;
	}
	memset(&rec, 0, sizeof(rec));
	rec.x.release = ext_release;
	rec.x.arg = &rec;
	h = ipk_pkt_alloc(pool);
	memset(ipk_pkt_mtod(h), 0, 14);
	ipk_pkt_mtod(h)[0] = 0x02; /* to a MAC nobody has: the peer drops it */
	ipk_pkt_mtod(h)[5] = 0x99;
	memcpy(ipk_pkt_mtod(h) + 6, ipk_io_caps(io)->mac, 6);
	ipk_pkt_mtod(h)[12] = 0x88;
	ipk_pkt_mtod(h)[13] = 0xb5;
	h->len = 14;
	h->next = ipk_pkt_attach_ext(pool, region, 0, sizeof(region), &rec.x);
	before = vk_tx_packets();
	CHECK_EQ(ipk_io_tx_burst(io, &h, 1), 1);
	CHECK_EQ(ipk_io_flush(io), 0);
	CHECK_EQ(vk_tx_packets() - before, 1);
	ipk_io_close(io);
	CHECK_EQ(rec.released, 1);
	ipk_pool_destroy(pool);
}

static void test_skb_mode_external_payload_copied(void) { ext_payload_leaves("skb"); }

static void test_skb_mode_burst_of_200_leaves_with_one_flush(void) { burst_one_flush("skb"); }
static void test_drv_mode_burst_of_200_leaves_with_one_flush(void) { burst_one_flush("drv"); }

/* Enter namespace ns (sockets opened there stay bound to its devices). */
static int enter_ns(const char *ns)
{
	char path[64];
	int fd, rc;

	snprintf(path, sizeof path, "/var/run/netns/%s", ns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = setns(fd, CLONE_NEWNET);
	close(fd);
	return rc;
}

static uint8_t sg_byte(uint32_t i) { return (uint8_t)(i * 2654435761u >> 11); }

/* An Ethernet + IPv4 frame of `total` bytes to 10.77.0.2 at `dst` (what the XDP
 * program steers to the socket): a 34-byte header packet, then payload pieces of the
 * given sizes, each its own packet of `pool` (sent in place when they are few enough,
 * copied into fresh frames when not). Byte i of the frame past the header is
 * sg_byte(i). */
static struct ipk_pkt *sg_frame(struct ipk_pool *pool, const uint8_t dst[6],
                                const uint8_t src[6], const uint32_t *piece, int npieces)
{
	static const uint8_t ip[20] = { 0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 253, 0, 0,
	                                10, 77, 0, 1, 10, 77, 0, 2 };
	struct ipk_pkt *h = ipk_pkt_alloc(pool), *t;
	uint32_t at = 0, j, tot = 20;
	uint8_t *d;
	int i;

	if (!h)
		return NULL;
	for (i = 0; i < npieces; i++)
		tot += piece[i];
	d = ipk_pkt_mtod(h);
	memcpy(d, dst, 6);
	memcpy(d + 6, src, 6);
	d[12] = 0x08;
	d[13] = 0x00;
	memcpy(d + 14, ip, 20);
	d[16] = (uint8_t)(tot >> 8);
	d[17] = (uint8_t)tot;
	h->len = 34;
	for (t = h, i = 0; i < npieces; i++, t = t->next) {
		t->next = ipk_pkt_alloc(pool);
		if (!t->next)
			break;
		for (j = 0; j < piece[i]; j++)
			ipk_pkt_mtod(t->next)[j] = sg_byte(at + j);
		t->next->len = piece[i];
		at += piece[i];
	}
	return h;
}

/* The received chain holds the frame sg_frame built: `len` bytes, pattern intact. */
static int sg_frame_ok(const struct ipk_pkt *k, uint32_t len)
{
	uint32_t at = 0, j;

	if (ipk_pkt_chain_len(k) != len)
		return 0;
	for (; k; k = k->next) {
		for (j = 0; j < k->len; j++, at++) {
			if (at >= 34 && ipk_pkt_mtod(k)[j] != sg_byte(at - 34))
				return 0;
		}
	}
	return 1;
}

/* Receive one frame, one descriptor per burst (a frame's descriptors then end in
 * later bursts than its first), bounded at 2 s; NULL when none came. */
static struct ipk_pkt *sg_recv(struct ipk_io *io, int *bursts)
{
	uint64_t end = now_ms() + 2000;
	struct ipk_pkt *k = NULL;

	for (*bursts = 0; now_ms() < end; (*bursts)++) {
		if (ipk_io_rx_burst(io, &k, 1) == 1)
			return k;
	}
	return NULL;
}

/* Multi-buffer (sg=1) at MTU 9000 between two afxdp sockets on the two ends of the
 * veth pair: a 9014-byte frame sent as a chain of 5 packets read in place arrives as
 * one chain of 3 UMEM frames (3840 + 3840 + 1334 bytes), pattern intact; one of 21
 * packets (more than a frame may have descriptors) is copied into fresh frames and
 * arrives the same; a frame over the MTU is refused by the kernel, not by a stall.
 * Every sent buffer comes back once the completions are reaped. */
static void sg_roundtrip(const char *mode)
{
	static const uint32_t few[] = { 1000, 3000, 2500, 2480 };
	uint32_t many[20], b0, d0, b, d, i;
	struct ipk_pool *pa = pool_new(4096), *pb = pool_new(4096);
	struct ipk_io *a = NULL, *b_io = NULL;
	char spec[128], err[256] = "";
	struct ipk_pkt *f, *k;
	int bursts, n;

	for (i = 0; i < 20; i++)
		many[i] = 449;
	sh("ip link set dev vk mtu 9000; ip -n %s link set dev vl mtu 9000%s", ns_l, "");
	snprintf(spec, sizeof spec, "afxdp:vk,mode=%s,frame=4096,sg=1,ip=10.77.0.2", mode);
	a = ipk_io_open(spec, pa, err, sizeof err);
	if (!a)
		fprintf(stderr, "%s: %s\n", spec, err);
	snprintf(spec, sizeof spec, "afxdp:vl,mode=%s,frame=4096,sg=1,ip=10.77.0.1", mode);
	CHECK_EQ(enter_ns(ns_l), 0);
	b_io = ipk_io_open(spec, pb, err, sizeof err);
	if (!b_io)
		fprintf(stderr, "%s: %s\n", spec, err);
	CHECK_EQ(enter_ns(ns_k), 0);
	CHECK(a != NULL && b_io != NULL);
	if (!a || !b_io)
		goto out;
	CHECK(ipk_io_caps(a)->offloads & IPK_CAP_LRO);
	CHECK_EQ(ipk_io_caps(a)->mtu, 9000);
	ipk_pool_usage(pb, &b0, &d0);
	for (n = 0; n < 2; n++) {
		f = n == 0 ? sg_frame(pb, ipk_io_caps(a)->mac, ipk_io_caps(b_io)->mac, few, 4)
		           : sg_frame(pb, ipk_io_caps(a)->mac, ipk_io_caps(b_io)->mac, many, 20);
		CHECK(f != NULL);
		CHECK_EQ(ipk_io_tx_burst(b_io, &f, 1), 1);
		CHECK_EQ(ipk_io_flush(b_io), 0);
		k = sg_recv(a, &bursts);
		CHECK(k != NULL);
		if (!k)
			continue;
		CHECK(sg_frame_ok(k, 9014));
		CHECK(k->next && k->next->next && !k->next->next->next);
		CHECK(k->len == 3840 && k->next->len == 3840);
		ipk_pkt_free_chain(k);
	}
	/* completions reaped by a later flush: B's buffers back to where they were */
	for (i = 0; i < 100; i++) {
		ipk_io_flush(b_io);
		ipk_pool_usage(pb, &b, &d);
		if (b == b0 && d == d0)
			break;
		usleep(10000);
	}
	CHECK_EQ(b, b0);
	CHECK_EQ(d, d0);
out:
	if (a)
		ipk_io_close(a);
	/* B's XDP program is detached by ifindex: from B's namespace */
	CHECK_EQ(enter_ns(ns_l), 0);
	if (b_io)
		ipk_io_close(b_io);
	CHECK_EQ(enter_ns(ns_k), 0);
	ipk_pool_destroy(pa);
	ipk_pool_destroy(pb);
	sh("ip link set dev vk mtu 1500; ip -n %s link set dev vl mtu 1500%s", ns_l, "");
}

static void test_skb_mode_sg_chains_both_ways(void) { sg_roundtrip("skb"); }
static void test_drv_mode_sg_chains_both_ways(void) { sg_roundtrip("drv"); }

static void expect_error(const char *spec, uint32_t buf_size, const char *want)
{
	struct ipk_pool *pool = pool_new(buf_size);
	char err[256] = "";
	struct ipk_io *io = ipk_io_open(spec, pool, err, sizeof err);
	uint32_t b, d;

	CHECK(io == NULL);
	if (io)
		ipk_io_close(io);
	if (!strstr(err, want)) {
		fprintf(stderr, "%s: message '%s' lacks '%s'\n", spec, err, want);
		CHECK(0);
	}
	ipk_pool_usage(pool, &b, &d);
	CHECK_EQ(b + d, 0);
	ipk_pool_destroy(pool);
}

static void test_bad_configuration_messages(void)
{
	pid_t pid;
	int status = -1;

	expect_error("afxdp:ipknosuch0", 2048, "no such network interface");
	expect_error("afxdp:vk,mode=turbo", 2048, "mode=turbo is not supported");
	expect_error("afxdp:vk,ip=10.1", 2048, "not an IPv4 address");
	expect_error("afxdp:vk,ring=100", 2048, "power of two");
	expect_error("afxdp:vk,busy_poll=2", 2048, "option busy_poll=2 must be 0 or 1");
	expect_error("afxdp:vk,csum=2", 2048, "option csum=2 must be 0 or 1");
	expect_error("afxdp:vk,zc=1", 2048, "zero-copy");
	expect_error("afxdp:vk", 16384, "cannot be a UMEM frame");
	sh("ip link set dev vk mtu 3000%s%s", "", "");
	expect_error("afxdp:vk", 2048, "MTU 3000 is larger than 2048-byte UMEM frames carry "
	             "(MTU at most 1774); use frame=4096");
	expect_error("afxdp:vk,frame=4096", 2048, "frame=4096 but the pool's buffers are 2048 bytes");
	expect_error("afxdp:vk,frame=3000", 4096, "frame=3000 is not a UMEM frame size");
	sh("ip link set dev vk mtu 1500%s%s", "", "");
	/* without privileges: the capability is named */
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
			_exit(3);
		check_failed_now_ = 0;
		expect_error("afxdp:vk", 2048, "CAP_");
		_exit(check_failed_now_);
	}
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void)
{
	if (geteuid() != 0 || system("ip -V >/dev/null 2>&1") != 0) {
		printf("skip: needs root and iproute2\n");
		return 77;
	}
	if (setup() < 0) {
		fprintf(stderr, "cannot create namespaces/veth\n");
		cleanup();
		return 1;
	}
	RUN(test_skb_mode_ping_answered_and_host_traffic_passed);
	RUN(test_drv_mode_ping_answered_and_host_traffic_passed);
	RUN(test_busy_poll_sets_socket_options_and_serves);
	RUN(test_set_addr_after_open_steers);
	RUN(test_skb_mode_burst_of_200_leaves_with_one_flush);
	RUN(test_drv_mode_burst_of_200_leaves_with_one_flush);
	RUN(test_skb_mode_external_payload_copied);
	RUN(test_skb_mode_sg_chains_both_ways);
	RUN(test_drv_mode_sg_chains_both_ways);
	RUN(test_bad_configuration_messages);
	cleanup();
	return check_summary();
}
