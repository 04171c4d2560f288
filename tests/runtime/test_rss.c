/*
 * core/rss.c: the Toeplitz hash against the published verification suite (Microsoft
 * "Verifying the RSS Hash Calculation", the same table as the Intel 82599 datasheet
 * §7.1.2.8.3 and DPDK's test_thash.c), the symmetric key, the configuration check,
 * and RSS-aware ephemeral ports: every port ipk_tcp_connect picks must bring the
 * peer's answers back to the caller's queue.
 */
#include <ipkit/core.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "internal.h"

static const uint8_t ms_key[IPK_RSS_KEY_LEN] = {
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
	0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
	0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
};

/* source -> destination as the frame travels; hash of addresses only, and of
 * addresses and ports (IPv4/TCP). */
static const struct vec {
	uint8_t src[4], dst[4];
	uint16_t sport, dport;
	uint32_t h_ip, h_tcp;
} vecs[] = {
	{{66, 9, 149, 187}, {161, 142, 100, 80}, 2794, 1766, 0x323e8fc2, 0x51ccc178},
	{{199, 92, 111, 2}, {65, 69, 140, 83}, 14230, 4739, 0xd718262a, 0xc626b0ea},
	{{24, 19, 198, 95}, {12, 22, 207, 184}, 12898, 38024, 0xd2d0a5de, 0x5c2b394a},
	{{38, 27, 205, 30}, {209, 142, 163, 6}, 48228, 2217, 0x82989176, 0xafc7327f},
	{{153, 39, 163, 191}, {202, 188, 127, 2}, 44251, 1303, 0x5d1809c5, 0x10e828a2},
};

static uint32_t lcg(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8 ^ *s << 13;
}

static uint32_t ip4_be(const uint8_t a[4]) { return IPK_IP4(a[0], a[1], a[2], a[3]); }

static void test_rss_toeplitz_matches_verification_suite(void)
{
	size_t i;

	for (i = 0; i < sizeof(vecs) / sizeof(vecs[0]); i++) {
		const struct vec *v = &vecs[i];
		uint8_t in[8];

		memcpy(in, v->src, 4);
		memcpy(in + 4, v->dst, 4);
		CHECK_EQ(ipk_rss_toeplitz(ms_key, sizeof(ms_key), in, 8), v->h_ip);
		CHECK_EQ(ipk_rss_hash_ip4(ms_key, ip4_be(v->src), ip4_be(v->dst),
		                          ipk_htons(v->sport), ipk_htons(v->dport)),
		         v->h_tcp);
	}
}

/* The IPv6 table of the same suite (Microsoft "Verifying the RSS Hash Calculation":
 * "IPv6 only" and "IPv6 with TCP"), source -> destination as the packet travels. */
static const struct vec6 {
	uint8_t src[16], dst[16];
	uint16_t sport, dport;
	uint32_t h_ip, h_tcp;
} vecs6[] = {
	/* 3ffe:2501:200:1fff::7 -> 3ffe:2501:200:3::1 */
	{{0x3f, 0xfe, 0x25, 0x01, 0x02, 0x00, 0x1f, 0xff, 0, 0, 0, 0, 0, 0, 0, 7},
	 {0x3f, 0xfe, 0x25, 0x01, 0x02, 0x00, 0x00, 0x03, 0, 0, 0, 0, 0, 0, 0, 1},
	 2794, 1766, 0x2cc18cd5, 0x40207d3d},
	/* 3ffe:501:8::260:97ff:fe40:efab -> ff02::1 */
	{{0x3f, 0xfe, 0x05, 0x01, 0x00, 0x08, 0, 0, 0x02, 0x60, 0x97, 0xff, 0xfe, 0x40, 0xef, 0xab},
	 {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
	 14230, 4739, 0x0f0c461c, 0xdde51bbf},
	/* 3ffe:1900:4545:3:200:f8ff:fe21:67cf -> fe80::200:f8ff:fe21:67cf */
	{{0x3f, 0xfe, 0x19, 0x00, 0x45, 0x45, 0x00, 0x03, 0x02, 0x00, 0xf8, 0xff, 0xfe, 0x21, 0x67,
	  0xcf},
	 {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x00, 0xf8, 0xff, 0xfe, 0x21, 0x67, 0xcf},
	 44251, 38024, 0x4b61e985, 0x02d1feef},
};

static void test_rss_toeplitz_ip6_matches_verification_suite(void)
{
	size_t i;

	for (i = 0; i < sizeof(vecs6) / sizeof(vecs6[0]); i++) {
		const struct vec6 *v = &vecs6[i];
		uint8_t in[32];

		memcpy(in, v->src, 16);
		memcpy(in + 16, v->dst, 16);
		CHECK_EQ(ipk_rss_toeplitz(ms_key, sizeof(ms_key), in, 32), v->h_ip);
		CHECK_EQ(ipk_rss_hash_ip6(ms_key, v->src, v->dst, ipk_htons(v->sport),
		                          ipk_htons(v->dport)),
		         v->h_tcp);
	}
	CHECK_EQ(ipk_rss_hash_ip6(ms_key, NULL, vecs6[0].dst, 1, 2), 0);
	CHECK_EQ(ipk_rss_hash_ip6(NULL, vecs6[0].src, vecs6[0].dst, 1, 2), 0);
}

/* As for IPv4: the fields decide, fragments and other protocols hash the addresses,
 * IPv4 flags do not cover IPv6 packets. */
static void test_rss_hash_frame6_follows_fields(void)
{
	const struct vec6 *v = &vecs6[0];
	const uint8_t *s = v->src, *d = v->dst;
	uint16_t sp = ipk_htons(v->sport), dp = ipk_htons(v->dport);
	const uint32_t f4 = IPK_RSS_F_IP4 | IPK_RSS_F_TCP4 | IPK_RSS_F_UDP4;

	CHECK_EQ(ipk_rss_hash_frame6(ms_key, 0, 6, 0, s, d, sp, dp), v->h_tcp);
	CHECK_EQ(ipk_rss_hash_frame6(ms_key, IPK_RSS_F_DEFAULT, 17, 0, s, d, sp, dp), v->h_tcp);
	CHECK_EQ(ipk_rss_hash_frame6(ms_key, IPK_RSS_F_DEFAULT, 6, 1, s, d, sp, dp), v->h_ip);
	CHECK_EQ(ipk_rss_hash_frame6(ms_key, IPK_RSS_F_DEFAULT, 58, 0, s, d, sp, dp), v->h_ip);
	CHECK_EQ(ipk_rss_hash_frame6(ms_key, IPK_RSS_F_IP6, 6, 0, s, d, sp, dp), v->h_ip);
	CHECK_EQ(ipk_rss_hash_frame6(ms_key, IPK_RSS_F_IP6 | IPK_RSS_F_TCP6, 17, 0, s, d, sp, dp),
	         v->h_ip);
	CHECK_EQ(ipk_rss_hash_frame6(ms_key, IPK_RSS_F_TCP6, 17, 0, s, d, sp, dp), 0);
	CHECK_EQ(ipk_rss_hash_frame6(ms_key, IPK_RSS_F_TCP6, 6, 1, s, d, sp, dp), 0);
	CHECK_EQ(ipk_rss_hash_frame6(ms_key, f4, 6, 0, s, d, sp, dp), 0);
	CHECK_EQ(ipk_rss_hash_frame4(ms_key, IPK_RSS_F_IP6 | IPK_RSS_F_TCP6 | IPK_RSS_F_UDP6, 6, 0,
	                             1, 2, 3, 4),
	         0);
	CHECK_EQ(ipk_rss_hash_frame6(ms_key, 0, 6, 0, NULL, d, sp, dp), 0);
}

static void test_rss_symmetric_key_ip6_same_hash_both_ways(void)
{
	uint8_t key[IPK_RSS_KEY_LEN], a[16], b[16];
	uint32_t s = 11, i, j, asym = 0;

	ipk_rss_key_symmetric(key);
	for (i = 0; i < 5000; i++) {
		uint16_t pa = (uint16_t)lcg(&s), pb = (uint16_t)lcg(&s);

		for (j = 0; j < 16; j++) {
			a[j] = (uint8_t)lcg(&s);
			b[j] = (uint8_t)lcg(&s);
		}
		CHECK_EQ(ipk_rss_hash_ip6(key, a, b, pa, pb), ipk_rss_hash_ip6(key, b, a, pb, pa));
		CHECK_EQ(ipk_rss_hash_frame6(key, 0, 58, 0, a, b, pa, pb),
		         ipk_rss_hash_frame6(key, 0, 58, 0, b, a, pb, pa));
		asym += ipk_rss_hash_ip6(ms_key, a, b, pa, pb) != ipk_rss_hash_ip6(ms_key, b, a, pb, pa);
	}
	CHECK(asym > 4500);
}

/* ipk_rss_hash_packet on whole frames: the Microsoft IPv6 vector as an Ethernet/IPv6
 * TCP frame and as raw IP; an NS to ff02::1 is ND with the address hash; ARP none. */
static void test_rss_hash_packet_ip6_frames(void)
{
	const struct vec6 *v = &vecs6[0];
	uint8_t f[14 + 40 + 24];
	uint32_t h = 0;

	memset(f, 0, sizeof(f));
	f[12] = 0x86, f[13] = 0xdd, f[14] = 0x60, f[14 + 6] = 6;
	memcpy(f + 22, v->src, 16);
	memcpy(f + 38, v->dst, 16);
	f[54] = (uint8_t)(v->sport >> 8), f[55] = (uint8_t)v->sport;
	f[56] = (uint8_t)(v->dport >> 8), f[57] = (uint8_t)v->dport;
	CHECK_EQ(ipk_rss_hash_packet(ms_key, 0, f, sizeof(f), IPK_LINK_ETH, &h), IPK_RSS_PKT_HASHED);
	CHECK_EQ(h, v->h_tcp);
	h = 0;
	CHECK_EQ(ipk_rss_hash_packet(ms_key, 0, f + 14, sizeof(f) - 14, IPK_LINK_RAWIP, &h),
	         IPK_RSS_PKT_HASHED);
	CHECK_EQ(h, v->h_tcp);
	f[14 + 6] = 58, f[54] = 135; /* NS */
	CHECK_EQ(ipk_rss_hash_packet(ms_key, 0, f, sizeof(f), IPK_LINK_ETH, &h), IPK_RSS_PKT_ND);
	CHECK_EQ(h, v->h_ip);
	f[54] = 128; /* echo request: by the addresses */
	CHECK_EQ(ipk_rss_hash_packet(ms_key, 0, f, sizeof(f), IPK_LINK_ETH, &h), IPK_RSS_PKT_HASHED);
	CHECK_EQ(h, v->h_ip);
	CHECK_EQ(ipk_rss_hash_packet(ms_key, 0, f, 14 + 39, IPK_LINK_ETH, &h), IPK_RSS_PKT_NONE);
	f[13] = 0x06; /* ARP */
	CHECK_EQ(ipk_rss_hash_packet(ms_key, 0, f, sizeof(f), IPK_LINK_ETH, &h), IPK_RSS_PKT_NONE);
	CHECK_EQ(ipk_rss_hash_packet(ms_key, 0, NULL, 60, IPK_LINK_ETH, &h), IPK_RSS_PKT_NONE);
	CHECK_EQ(ipk_rss_hash_packet(ms_key, 0, f, sizeof(f), IPK_LINK_ETH, NULL), IPK_RSS_PKT_NONE);
}

static void test_rss_toeplitz_refuses_short_key(void)
{
	uint8_t in[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};

	/* 12 input bytes need 16 key bytes: 15 is too short, 16 is enough. */
	CHECK_EQ(ipk_rss_toeplitz(ms_key, 15, in, 12), 0);
	CHECK(ipk_rss_toeplitz(ms_key, 16, in, 12) != 0);
	CHECK_EQ(ipk_rss_toeplitz(ms_key, 16, in, 12), ipk_rss_toeplitz(ms_key, 40, in, 12));
	CHECK_EQ(ipk_rss_toeplitz(NULL, 40, in, 12), 0);
	CHECK_EQ(ipk_rss_toeplitz(ms_key, 40, NULL, 12), 0);
	CHECK_EQ(ipk_rss_toeplitz(ms_key, 3, in, 0), 0);
}

static void test_rss_symmetric_key_same_hash_both_ways(void)
{
	uint8_t key[IPK_RSS_KEY_LEN];
	uint32_t s = 7, i, asym = 0;

	ipk_rss_key_symmetric(key);
	CHECK_EQ(key[0], 0x6d);
	CHECK_EQ(key[1], 0x5a);
	CHECK_EQ(key[38], 0x6d);
	CHECK_EQ(key[39], 0x5a);
	for (i = 0; i < 10000; i++) {
		uint32_t a = lcg(&s), b = lcg(&s);
		uint16_t pa = (uint16_t)lcg(&s), pb = (uint16_t)lcg(&s);

		CHECK_EQ(ipk_rss_hash_ip4(key, a, b, pa, pb), ipk_rss_hash_ip4(key, b, a, pb, pa));
		/* the Microsoft key is not symmetric: most flows differ by direction */
		asym += ipk_rss_hash_ip4(ms_key, a, b, pa, pb) != ipk_rss_hash_ip4(ms_key, b, a, pb, pa);
	}
	CHECK(asym > 9000);
}

static void test_rss_queue_is_reta_of_hash_mod_size(void)
{
	const uint16_t reta[4] = {3, 1, 2, 0};

	CHECK_EQ(ipk_rss_queue(reta, 4, 0), 3);
	CHECK_EQ(ipk_rss_queue(reta, 4, 5), 1);
	CHECK_EQ(ipk_rss_queue(reta, 4, 0xffffffffu), 0);
	CHECK_EQ(ipk_rss_queue(NULL, 4, 1), IPK_EINVAL);
	CHECK_EQ(ipk_rss_queue(reta, 0, 1), IPK_EINVAL);
}

static uint16_t reta2[128]; /* 0,1,0,1,...: two queues, like a 2-queue NIC */

/* The hash fields a port reports decide what is hashed: TCP/UDP with ports when the
 * port hashes them, the addresses when only IPv4 is hashed (and for fragments), 0
 * when nothing covers the frame. */
static void test_rss_hash_frame4_follows_fields(void)
{
	const struct vec *v = &vecs[0];
	uint32_t s = ip4_be(v->src), d = ip4_be(v->dst);
	uint16_t sp = ipk_htons(v->sport), dp = ipk_htons(v->dport);

	CHECK_EQ(ipk_rss_hash_frame4(ms_key, 0, 6, 0, s, d, sp, dp), v->h_tcp);
	CHECK_EQ(ipk_rss_hash_frame4(ms_key, IPK_RSS_F_DEFAULT, 17, 0, s, d, sp, dp), v->h_tcp);
	CHECK_EQ(ipk_rss_hash_frame4(ms_key, IPK_RSS_F_DEFAULT, 6, 1, s, d, sp, dp), v->h_ip);
	CHECK_EQ(ipk_rss_hash_frame4(ms_key, IPK_RSS_F_DEFAULT, 1, 0, s, d, sp, dp), v->h_ip);
	CHECK_EQ(ipk_rss_hash_frame4(ms_key, IPK_RSS_F_IP4, 6, 0, s, d, sp, dp), v->h_ip);
	CHECK_EQ(ipk_rss_hash_frame4(ms_key, IPK_RSS_F_IP4 | IPK_RSS_F_TCP4, 17, 0, s, d, sp, dp),
	         v->h_ip);
	CHECK_EQ(ipk_rss_hash_frame4(ms_key, IPK_RSS_F_TCP4, 17, 0, s, d, sp, dp), 0);
	CHECK_EQ(ipk_rss_hash_frame4(ms_key, IPK_RSS_F_TCP4, 6, 1, s, d, sp, dp), 0);
}

static void test_rss_config_needs_table_naming_our_queue(void)
{
	struct ipk_config cfg;
	uint8_t sym[IPK_RSS_KEY_LEN];

	ipk_config_default(&cfg);
	ipk_rss_key_symmetric(sym);
	CHECK(memcmp(cfg.rss_key, sym, sizeof(sym)) == 0);
	CHECK_EQ(cfg.rss_reta_size, 0);
	CHECK(ipk_ctx_size(&cfg) != 0);
	cfg.rss_reta_size = 128; /* no table */
	CHECK_EQ(ipk_ctx_size(&cfg), 0);
	cfg.rss_reta = reta2;
	cfg.rss_queue = 1;
	CHECK(ipk_ctx_size(&cfg) != 0);
	cfg.rss_queue = 2; /* not in the table */
	CHECK_EQ(ipk_ctx_size(&cfg), 0);
	cfg.rss_queue = 1;
	cfg.rss_fields = IPK_RSS_F_DEFAULT + 1; /* an unknown field */
	CHECK_EQ(ipk_ctx_size(&cfg), 0);
}

static uint16_t queue_under_test;

static void tweak_rss(struct ipk_config *cfg)
{
	cfg->rss_reta = reta2;
	cfg->rss_reta_size = 128;
	cfg->rss_queue = queue_under_test;
}

static uint32_t queue_of_incoming(const struct th *t, const struct ipk_tuple *tu)
{
	uint32_t h = ipk_rss_hash_ip4(t->cfg.rss_key, tu->peer_ip4_be, tu->local_ip4_be,
	                              tu->peer_port_be, tu->local_port_be);
	return (uint32_t)ipk_rss_queue(reta2, 128, h);
}

static void check_picks_land_on(uint16_t q)
{
	struct th *t;
	uint32_t i, ok = 0, n = 200;

	queue_under_test = q;
	t = th_new(tweak_rss);
	for (i = 0; i < n; i++) {
		struct ipk_conn *c = NULL;
		struct ipk_tuple tu;
		/* different peer ports too, so the search starts from varied hashes */
		uint16_t pport = ipk_htons((uint16_t)(5000 + i % 7));

		if (ipk_tcp_connect(t->ctx, t->peer_be, pport, 0, NULL, &c, t->now) != IPK_OK)
			break;
		if (ipk_tcp_tuple(c, &tu) == IPK_OK && queue_of_incoming(t, &tu) == q)
			ok++;
		/* the harness has 8 connection objects: give each back at once */
		ipk_tcp_abort(t->ctx, c, t->now);
	}
	CHECK_EQ(i, n);
	CHECK_EQ(ok, n);
	CHECK(th_no_leaks(t));
	th_free(t);
}

static void test_rss_connect_ports_land_on_queue_0(void) { check_picks_land_on(0); }
static void test_rss_connect_ports_land_on_queue_1(void) { check_picks_land_on(1); }

/* A port that hashes IPv4 addresses only: the local port cannot steer, so an active
 * open works on the queue the addresses hash to and fails on every other one. */
static void tweak_ip_only(struct ipk_config *cfg)
{
	tweak_rss(cfg);
	cfg->rss_fields = IPK_RSS_F_IP4;
}

static void test_rss_connect_ip_only_hash_all_or_nothing(void)
{
	struct ipk_config cfg;
	struct ipk_conn *c = NULL;
	struct th *t;
	uint32_t h;
	uint8_t in[8];
	uint16_t q;

	ipk_config_default(&cfg);
	t = th_new(NULL);
	memcpy(in, &t->peer_be, 4);
	memcpy(in + 4, &t->cfg.ip4_be, 4);
	th_free(t);
	h = ipk_rss_toeplitz(cfg.rss_key, IPK_RSS_KEY_LEN, in, 8);
	for (q = 0; q < 2; q++) {
		queue_under_test = q;
		t = th_new(tweak_ip_only);
		CHECK_EQ(ipk_tcp_connect(t->ctx, t->peer_be, ipk_htons(5000), 0, NULL, &c, t->now),
		         reta2[h % 128] == q ? IPK_OK : IPK_EADDRINUSE);
		th_free(t);
	}
}

static uint16_t eph_only;

static void tweak_one_port(struct ipk_config *cfg)
{
	tweak_rss(cfg);
	cfg->eph_port_lo = cfg->eph_port_hi = eph_only;
}

static void test_rss_connect_no_port_on_queue_is_eaddrinuse(void)
{
	struct ipk_config cfg;
	struct ipk_conn *c = (struct ipk_conn *)&cfg;
	struct th *t;
	uint16_t p;

	/* Find a port whose incoming hash lands on queue 0 and offer only it to a
	 * context serving queue 1. */
	ipk_config_default(&cfg);
	for (p = 50000; p < 50100; p++) {
		uint32_t h = ipk_rss_hash_ip4(cfg.rss_key, IPK_IP4(10, 0, 0, 2), IPK_IP4(10, 0, 0, 1),
		                              ipk_htons(5000), ipk_htons(p));
		if (ipk_rss_queue(reta2, 128, h) == 0)
			break;
	}
	CHECK(p < 50100);
	eph_only = p;
	queue_under_test = 1;
	t = th_new(tweak_one_port);
	CHECK_EQ(ipk_tcp_connect(t->ctx, t->peer_be, ipk_htons(5000), 0, NULL, &c, t->now),
	         IPK_EADDRINUSE);
	CHECK(c == NULL);
	/* the same port is fine for queue 0 */
	th_free(t);
	queue_under_test = 0;
	t = th_new(tweak_one_port);
	CHECK_EQ(ipk_tcp_connect(t->ctx, t->peer_be, ipk_htons(5000), 0, NULL, &c, t->now), IPK_OK);
	th_free(t);
}

/* The port choice helper for IPv6 active opens (ipk_rss_port_ok6, wired by TCP over
 * IPv6): a port it accepts brings the peer's packets (peer -> local) to our queue,
 * one it refuses to the other queue; about half the ports fit a 2-queue table; the
 * local address takes part (link-local and global hash differently); RSS off accepts
 * everything. */
static void check_port_ok6_on(uint16_t q)
{
	static const uint8_t peer[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
	static const uint8_t local[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	static const uint8_t ll[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	uint16_t pp = ipk_htons(443);
	uint32_t p, ok = 0, diff_ll = 0;
	struct th *t;

	queue_under_test = q;
	t = th_new(tweak_rss);
	for (p = 40000; p < 40400; p++) {
		uint16_t lp = ipk_htons((uint16_t)p);
		uint32_t h = ipk_rss_hash_ip6(t->cfg.rss_key, peer, local, pp, lp);
		int fits = ipk_rss_port_ok6(t->ctx, local, peer, pp, lp);

		CHECK_EQ(fits, ipk_rss_queue(reta2, 128, h) == q);
		ok += (uint32_t)fits;
		diff_ll += (uint32_t)(fits != ipk_rss_port_ok6(t->ctx, ll, peer, pp, lp));
	}
	CHECK(ok > 120 && ok < 280);
	CHECK(diff_ll > 0);
	th_free(t);
	t = th_new(NULL);
	for (p = 40000; p < 40010; p++)
		CHECK_EQ(ipk_rss_port_ok6(t->ctx, local, peer, pp, ipk_htons((uint16_t)p)), 1);
	th_free(t);
}

static void test_rss_port_ok6_queue_0(void) { check_port_ok6_on(0); }
static void test_rss_port_ok6_queue_1(void) { check_port_ok6_on(1); }

int main(void)
{
	uint32_t i;

	for (i = 0; i < 128; i++)
		reta2[i] = (uint16_t)(i % 2);
	RUN(test_rss_toeplitz_matches_verification_suite);
	RUN(test_rss_toeplitz_ip6_matches_verification_suite);
	RUN(test_rss_hash_frame6_follows_fields);
	RUN(test_rss_symmetric_key_ip6_same_hash_both_ways);
	RUN(test_rss_hash_packet_ip6_frames);
	RUN(test_rss_toeplitz_refuses_short_key);
	RUN(test_rss_symmetric_key_same_hash_both_ways);
	RUN(test_rss_queue_is_reta_of_hash_mod_size);
	RUN(test_rss_hash_frame4_follows_fields);
	RUN(test_rss_config_needs_table_naming_our_queue);
	RUN(test_rss_connect_ip_only_hash_all_or_nothing);
	RUN(test_rss_connect_ports_land_on_queue_0);
	RUN(test_rss_connect_ports_land_on_queue_1);
	RUN(test_rss_connect_no_port_on_queue_is_eaddrinuse);
	RUN(test_rss_port_ok6_queue_0);
	RUN(test_rss_port_ok6_queue_1);
	return check_summary();
}
