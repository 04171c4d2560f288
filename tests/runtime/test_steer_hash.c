/*
 * runtime/wio.c wk_frame_worker: the rule the software steering and every worker's
 * wrong-queue check share. Frames come from the wire, so every length is checked:
 * runts, bad IHL, non-IPv4 and truncated transport headers must not be read past
 * their end (ASan in the sanitizer stage) and must go to every worker (-1) or be
 * hashed on what is there. TCP/UDP use the 4-tuple, fragments and other protocols the
 * addresses only, both directions of a flow land on the same worker.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "workers_int.h"

static struct ipk_workers ws;
static uint16_t reta[128];

/* The frame in a heap buffer of exactly len bytes, so the sanitizer stage catches a
 * read past its end. */
static struct ipk_pkt *frame(const uint8_t *b, uint32_t len)
{
	static uint8_t *buf;
	static struct ipk_pkt k;

	free(buf);
	buf = (uint8_t *)malloc(len ? len : 1);
	if (!buf)
		abort();
	memcpy(buf, b, len);
	memset(&k, 0, sizeof(k));
	k.buf = buf;
	k.len = len;
	return &k;
}

/* Ethernet + IPv4 (IHL 5) + 4 port bytes: 10.0.0.1:40000 -> 10.0.0.2:7 */
static uint32_t build(uint8_t *f, uint8_t proto, uint16_t frag, int swap)
{
	static const uint8_t a[4] = {10, 0, 0, 1}, b[4] = {10, 0, 0, 2};
	uint8_t *ip = f + 14;

	memset(f, 0, 64);
	f[12] = 0x08;
	ip[0] = 0x45;
	ip[6] = (uint8_t)(frag >> 8);
	ip[7] = (uint8_t)frag;
	ip[9] = proto;
	memcpy(ip + 12, swap ? b : a, 4);
	memcpy(ip + 16, swap ? a : b, 4);
	ip[20] = swap ? 0 : 0x9c;
	ip[21] = swap ? 7 : 0x40;
	ip[22] = swap ? 0x9c : 0;
	ip[23] = swap ? 0x40 : 7;
	return 14 + 20 + 4;
}

static int expect(uint8_t *f, uint32_t n4)
{
	uint32_t h = ipk_rss_toeplitz(ws.key, IPK_RSS_KEY_LEN, f + 14 + 12, n4);
	return reta[h % 128];
}

static void test_steer_tcp_udp_by_4tuple_both_directions(void)
{
	uint8_t f[64];
	uint32_t n;
	int q;

	n = build(f, 6, 0, 0);
	q = wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH);
	CHECK(q >= 0 && q == expect(f, 12));
	n = build(f, 6, 0, 1);
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), q);
	n = build(f, 17, 0, 0);
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), expect(f, 12));
	/* raw IP link (TUN): the same frame without the Ethernet header */
	n = build(f, 6, 0, 0);
	CHECK_EQ(wk_frame_worker(&ws, frame(f + 14, n - 14), IPK_LINK_RAWIP), q);
}

static void test_steer_fragments_and_icmp_by_addresses(void)
{
	uint8_t f[64];
	uint32_t n;

	n = build(f, 6, 0x2000, 0); /* MF */
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), expect(f, 8));
	n = build(f, 17, 0x0010, 0); /* offset */
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), expect(f, 8));
	n = build(f, 1, 0, 0); /* ICMP */
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), expect(f, 8));
	n = build(f, 6, 0x4000, 0); /* DF alone is not a fragment */
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), expect(f, 12));
}

static void test_steer_malformed_goes_to_everyone_or_addresses(void)
{
	uint8_t f[64];
	uint32_t n = build(f, 6, 0, 0), len;

	for (len = 0; len < 14 + 20; len++) /* runts: no IPv4 header to hash */
		CHECK_EQ(wk_frame_worker(&ws, frame(f, len), IPK_LINK_ETH), -1);
	/* ports cut off: addresses only, never a read past the end */
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n - 1), IPK_LINK_ETH), expect(f, 8));
	f[14] = 0x44; /* IHL 4 */
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), -1);
	f[14] = 0x4f; /* IHL 15: 60 bytes, longer than the frame */
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), -1);
	f[14] = 0x65; /* version 6 */
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), -1);
	n = build(f, 6, 0, 0);
	f[12] = 0x08;
	f[13] = 0x06; /* ARP */
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), -1);
}

/* Ethernet + IPv6 + 4 port bytes: 2001:db8::1 port 40000 -> 2001:db8::2 port 7, with
 * `next` as the next header and `ext` 8-byte extension headers (hop-by-hop, then
 * destination options) before the upper layer. */
static uint32_t build6(uint8_t *f, uint8_t next, int ext, int swap)
{
	uint8_t a[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	uint8_t b[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
	uint8_t *ip = f + 14, *l4;
	int i;

	memset(f, 0, 160);
	f[12] = 0x86;
	f[13] = 0xdd;
	ip[0] = 0x60;
	ip[6] = ext ? 0 : next;
	ip[7] = 64;
	memcpy(ip + 8, swap ? b : a, 16);
	memcpy(ip + 24, swap ? a : b, 16);
	for (i = 0; i < ext; i++) /* each 8 bytes: next header, length 0, PadN */
		ip[40 + 8 * i] = i + 1 < ext ? 60 : next;
	l4 = ip + 40 + 8 * ext;
	l4[0] = swap ? 0 : 0x9c;
	l4[1] = swap ? 7 : 0x40;
	l4[2] = swap ? 0x9c : 0;
	l4[3] = swap ? 0x40 : 7;
	return (uint32_t)(14 + 40 + 8 * ext + 4);
}

static int expect6(const uint8_t *f, int ext, int ports)
{
	uint8_t in[36];
	uint32_t h;

	memcpy(in, f + 14 + 8, 32);
	memcpy(in + 32, f + 14 + 40 + 8 * ext, 4);
	h = ipk_rss_toeplitz(ws.key, IPK_RSS_KEY_LEN, in, ports ? 36 : 32);
	return reta[h % 128];
}

/* IPv6 TCP/UDP by the 36-byte tuple (what a NIC hashing IPv6 TCP/UDP computes), the
 * same worker both ways, past hop-by-hop and destination options. */
static void test_steer_ip6_tcp_udp_by_tuple_both_directions(void)
{
	uint8_t f[160];
	uint32_t n;
	int q, q0 = 0, q1 = 0, i;

	n = build6(f, 6, 0, 0);
	q = wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH);
	CHECK(q >= 0 && q == expect6(f, 0, 1));
	n = build6(f, 6, 0, 1);
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), q);
	n = build6(f, 17, 0, 0);
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), expect6(f, 0, 1));
	n = build6(f, 17, 2, 0);
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), expect6(f, 2, 1));
	CHECK_EQ(wk_frame_worker(&ws, frame(f + 14, n - 14), IPK_LINK_RAWIP), expect6(f, 2, 1));
	/* the port takes part: both workers get flows */
	for (i = 0; i < 64; i++) {
		n = build6(f, 17, 0, 0);
		f[14 + 40 + 1] = (uint8_t)i;
		if (wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH) == 0)
			q0++;
		else
			q1++;
	}
	CHECK(q0 > 8 && q1 > 8);
}

/* Fragments, echo and ICMPv6 errors by addresses; ND to every worker (-1); chains
 * that do not end in the frame and truncated headers never read past the end. */
static void test_steer_ip6_nd_everyone_rest_by_addresses(void)
{
	uint8_t f[160];
	uint32_t n, len;
	uint8_t t;

	n = build6(f, 44, 0, 0); /* Fragment header */
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), expect6(f, 0, 0));
	n = build6(f, 58, 0, 0);
	f[14 + 40] = 128; /* echo request */
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), expect6(f, 0, 0));
	f[14 + 40] = 2; /* Packet Too Big */
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), expect6(f, 0, 0));
	for (t = 133; t <= 137; t++) {
		f[14 + 40] = t;
		CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), -1);
	}
	n = build6(f, 58, 1, 0);
	f[14 + 48] = 135; /* NS behind a hop-by-hop header (MLD's Router Alert style) */
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), -1);
	f[14 + 48] = 138;
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), expect6(f, 0, 0));
	/* truncated: runts to nobody, cut ports or cut chains by addresses */
	n = build6(f, 6, 2, 0);
	for (len = 0; len < 14 + 40; len++)
		CHECK_EQ(wk_frame_worker(&ws, frame(f, len), IPK_LINK_ETH), -1);
	for (len = 14 + 40; len < n; len++)
		CHECK_EQ(wk_frame_worker(&ws, frame(f, len), IPK_LINK_ETH), expect6(f, 0, 0));
	/* a hop-by-hop length pointing far past the end */
	n = build6(f, 6, 1, 0);
	f[14 + 41] = 255;
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), expect6(f, 0, 0));
	/* a chain longer than the walk (9 destination options headers) */
	n = build6(f, 6, 9, 0);
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), expect6(f, 0, 0));
	/* version 4 in an IPv6 ethertype: nobody's */
	n = build6(f, 6, 0, 0);
	f[14] = 0x45;
	CHECK_EQ(wk_frame_worker(&ws, frame(f, n), IPK_LINK_ETH), -1);
}

int main(void)
{
	uint32_t i;

	ws.n = 2;
	ipk_rss_key_symmetric(ws.key);
	for (i = 0; i < 128; i++)
		reta[i] = (uint16_t)(i % 2);
	ws.reta = reta;
	ws.reta_size = 128;
	RUN(test_steer_tcp_udp_by_4tuple_both_directions);
	RUN(test_steer_fragments_and_icmp_by_addresses);
	RUN(test_steer_malformed_goes_to_everyone_or_addresses);
	RUN(test_steer_ip6_tcp_udp_by_tuple_both_directions);
	RUN(test_steer_ip6_nd_everyone_rest_by_addresses);
	return check_summary();
}
