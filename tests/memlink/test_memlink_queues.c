/*
 * memlink queues=N: the open that serves every queue places each frame it sends on
 * the queue a receiving RSS NIC would pick (symmetric key, reta i % N): IPv4 and IPv6
 * TCP/UDP by their tuple, fragments and ND by their addresses, ARP and other non-IP
 * frames on queue 0; per-queue opens (queue=Q) receive only theirs and send on their
 * own queue. One process, three opens. The expected queue is computed here from the
 * raw Toeplitz input (12 or 8 bytes for IPv4, 36 or 32 for IPv6), not through the
 * core's packet parser as memlink does.
 */
#include "check.h"

#include <ipkit/core.h>
#include <ipkit/io.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define NQ 2
#define NFLOWS 200

static char name_[64];

static struct ipk_pool *pool_new(void)
{
	struct ipk_pool_cfg c;
	char err[256];
	struct ipk_pool *p;

	ipk_pool_cfg_default(&c);
	c.nbufs = 1024;
	c.ndescs = 2048;
	p = ipk_pool_create(&c, err, sizeof err);
	if (!p)
		fprintf(stderr, "pool: %s\n", err);
	return p;
}

static struct ipk_io *open_or_die(const char *opts, struct ipk_pool *pool)
{
	char spec[160], err[256];
	struct ipk_io *io;

	snprintf(spec, sizeof spec, "memlink:%s,%s", name_, opts);
	io = ipk_io_open(spec, pool, err, sizeof err);
	if (!io)
		fprintf(stderr, "%s: %s\n", spec, err);
	return io;
}

/* Ethernet + IPv4 (+ 4 port bytes): flow i, with frag set an IP fragment. */
static struct ipk_pkt *frame(struct ipk_pool *pool, uint16_t i, uint8_t proto, int frag)
{
	struct ipk_pkt *k = ipk_pkt_alloc(pool);
	uint8_t *d;

	if (!k)
		return NULL;
	d = ipk_pkt_mtod(k);
	memset(d, 0, 64);
	d[12] = 0x08;
	d[14] = 0x45;
	d[20] = frag ? 0x20 : 0; /* MF */
	d[23] = proto;
	memcpy(d + 26, "\x0a\x09\x00\x02", 4);
	d[30] = 10, d[31] = 9, d[32] = (uint8_t)(i >> 8), d[33] = (uint8_t)i;
	d[34] = (uint8_t)((40000 + i) >> 8), d[35] = (uint8_t)(40000 + i), d[37] = 7;
	d[40] = (uint8_t)(i >> 8), d[41] = (uint8_t)i; /* tag for the receiver */
	k->len = 64;
	return k;
}

static int expect_queue(const struct ipk_pkt *k)
{
	static uint8_t key[IPK_RSS_KEY_LEN];
	const uint8_t *d = ipk_pkt_mtod(k);
	uint32_t h;

	ipk_rss_key_symmetric(key);
	if (d[12] != 0x08 || d[13] != 0x00)
		return 0;
	h = ipk_rss_toeplitz(key, IPK_RSS_KEY_LEN, d + 26, d[20] ? 8 : 12);
	return (int)((h % 128) % NQ);
}

/* Everything waiting on io, each frame checked against its queue. */
static uint32_t drain(struct ipk_io *io, int q, uint32_t *seen)
{
	struct ipk_pkt *k[64];
	uint32_t n = 0;
	int got, i, spins;

	for (spins = 0; spins < 100; spins++) {
		got = ipk_io_rx_burst(io, k, 64);
		for (i = 0; i < got; i++) {
			CHECK(expect_queue(k[i]) == q);
			(*seen)++;
			ipk_pkt_free(k[i]);
		}
		n += (uint32_t)(got > 0 ? got : 0);
		if (got <= 0)
			usleep(1000);
	}
	return n;
}

static void test_rss_placement_and_arp_on_queue_0(void)
{
	struct ipk_pool *pool = pool_new();
	struct ipk_io *a, *b[NQ];
	struct ipk_pkt *k;
	uint32_t want[NQ] = {0}, got[NQ] = {0}, seen = 0;
	uint16_t i;
	int q;

	CHECK(pool != NULL);
	a = open_or_die("role=a,queues=2", pool);
	b[0] = open_or_die("role=b,queues=2,queue=0", pool);
	b[1] = open_or_die("role=b,queues=2,queue=1", pool);
	CHECK(a && b[0] && b[1]);
	if (!a || !b[0] || !b[1])
		return;
	CHECK(ipk_io_caps(a)->nqueues == NQ && ipk_io_caps(b[1])->nqueues == 1);
	for (i = 0; i < NFLOWS; i++) {
		/* TCP, UDP, an IP fragment (address hash), ARP */
		k = i % 4 == 3 ? ipk_pkt_alloc(pool) : frame(pool, i, i % 4 == 1 ? 17 : 6, i % 4 == 2);
		if (!k)
			break;
		if (i % 4 == 3) {
			memset(ipk_pkt_mtod(k), 0, 60);
			ipk_pkt_mtod(k)[12] = 0x08, ipk_pkt_mtod(k)[13] = 0x06;
			k->len = 60;
		}
		want[expect_queue(k)]++;
		CHECK(ipk_io_tx_burst(a, &k, 1) == 1);
	}
	ipk_io_flush(a);
	CHECK(want[0] > 40 && want[1] > 40); /* both queues really used */
	for (q = 0; q < NQ; q++)
		got[q] = drain(b[q], q, &seen);
	CHECK(got[0] == want[0] && got[1] == want[1]);
	CHECK(seen == NFLOWS);
	/* back: a per-queue open sends on its queue, the all-queue open reads both */
	for (q = 0; q < NQ; q++) {
		k = frame(pool, (uint16_t)q, 6, 0);
		CHECK(k && ipk_io_tx_burst(b[q], &k, 1) == 1);
	}
	{
		struct ipk_pkt *r[8];
		int n = 0, spins, j;

		for (spins = 0; spins < 100 && n < NQ; spins++) {
			int g = ipk_io_rx_burst(a, r + n, 8 - n);
			n += g > 0 ? g : 0;
			usleep(1000);
		}
		CHECK(n == NQ);
		for (j = 0; j < n; j++)
			ipk_pkt_free(r[j]);
	}
	ipk_io_close(b[0]);
	ipk_io_close(b[1]);
	ipk_io_close(a);
	ipk_pool_destroy(pool);
}

/* Ethernet + IPv6 + 4 port bytes: fd00:9::2 port 40000+i -> fd00:9::1:i port 7; nd
 * makes it an NS (ICMPv6 135) instead. */
static struct ipk_pkt *frame6(struct ipk_pool *pool, uint16_t i, uint8_t proto, int nd)
{
	struct ipk_pkt *k = ipk_pkt_alloc(pool);
	uint8_t *d;

	if (!k)
		return NULL;
	d = ipk_pkt_mtod(k);
	memset(d, 0, 94);
	d[12] = 0x86, d[13] = 0xdd;
	d[14] = 0x60;
	d[14 + 6] = nd ? 58 : proto;
	d[14 + 7] = nd ? 255 : 64;
	d[22] = 0xfd, d[25] = 9, d[37] = 2;           /* source fd00:9::2 */
	d[38] = 0xfd, d[41] = 9, d[51] = 1;           /* destination fd00:9::1:i */
	d[52] = (uint8_t)(i >> 8), d[53] = (uint8_t)i;
	if (nd) {
		d[54] = 135;
	} else {
		d[54] = (uint8_t)((40000 + i) >> 8), d[55] = (uint8_t)(40000 + i), d[57] = 7;
	}
	k->len = 94;
	return k;
}

/* The 36-byte (TCP/UDP) or 32-byte (ND: ICMPv6, addresses only) Toeplitz input. */
static int expect_queue6(const struct ipk_pkt *k)
{
	static uint8_t key[IPK_RSS_KEY_LEN];
	const uint8_t *d = ipk_pkt_mtod(k);
	uint32_t h;

	ipk_rss_key_symmetric(key);
	h = ipk_rss_toeplitz(key, IPK_RSS_KEY_LEN, d + 22, d[20] == 58 ? 32 : 36);
	return (int)((h % 128) % NQ);
}

/* IPv6 frames are placed as a NIC hashing IPv6 would (the workers' steering check
 * agrees), not all on queue 0 as before IPv6 RSS. */
static void test_rss_placement_ip6(void)
{
	struct ipk_pool *pool = pool_new();
	struct ipk_io *a, *b[NQ];
	uint32_t want[NQ] = {0}, got[NQ] = {0};
	uint16_t i;
	int q;

	CHECK(pool != NULL);
	snprintf(name_, sizeof name_, "ipkmq6%d", (int)getpid());
	a = open_or_die("role=a,queues=2", pool);
	b[0] = open_or_die("role=b,queues=2,queue=0", pool);
	b[1] = open_or_die("role=b,queues=2,queue=1", pool);
	CHECK(a && b[0] && b[1]);
	if (!a || !b[0] || !b[1])
		return;
	for (i = 0; i < NFLOWS; i++) {
		struct ipk_pkt *k = frame6(pool, i, i % 3 == 1 ? 17 : 6, i % 3 == 2);

		if (!k)
			break;
		want[expect_queue6(k)]++;
		CHECK(ipk_io_tx_burst(a, &k, 1) == 1);
	}
	ipk_io_flush(a);
	CHECK(want[0] > 40 && want[1] > 40);
	for (q = 0; q < NQ; q++) {
		struct ipk_pkt *k[64];
		int spins, g, j;

		for (spins = 0; spins < 100; spins++) {
			g = ipk_io_rx_burst(b[q], k, 64);
			for (j = 0; j < g; j++) {
				CHECK(expect_queue6(k[j]) == q);
				got[q]++;
				ipk_pkt_free(k[j]);
			}
			if (g <= 0)
				usleep(1000);
		}
	}
	CHECK(got[0] == want[0] && got[1] == want[1]);
	ipk_io_close(b[0]);
	ipk_io_close(b[1]);
	ipk_io_close(a);
	ipk_pool_destroy(pool);
}

static void test_bad_queue_options(void)
{
	struct ipk_pool *pool = pool_new();
	static const char *const bad[] = { "role=a,queues=17", "role=a,queues=0",
	                                   "role=a,queues=2,queue=2", "role=a,queue=1",
	                                   "role=a,queues=2,queue=-1" };
	char spec[160], err[256];
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct ipk_io *io;

		snprintf(spec, sizeof spec, "memlink:%sx,%s", name_, bad[i]);
		err[0] = 0;
		io = ipk_io_open(spec, pool, err, sizeof err);
		CHECK(io == NULL && err[0] != 0);
		if (io)
			ipk_io_close(io);
	}
	ipk_pool_destroy(pool);
}

int main(void)
{
	snprintf(name_, sizeof name_, "tq%d", (int)getpid());
	RUN(test_rss_placement_and_arp_on_queue_0);
	RUN(test_bad_queue_options);
	RUN(test_rss_placement_ip6);
	return check_summary();
}
