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

static struct ipk_pkt *frame(const uint8_t *b, uint32_t len)
{
	static uint8_t buf[256];
	static struct ipk_pkt k;

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
	return check_summary();
}
