/*
 * test_relay_key: the segment identities ipk-relay's keyed mode draws from
 * (relay_key.h), on byte vectors: the same segment has the same identity whatever the
 * ISNs and ports of the connection, a retransmission is the next occurrence, pure ACKs
 * are told apart by their SACK blocks, and malformed frames have no identity.
 */
#include <stdio.h>
#include <string.h>

#include "relay_key.h"

static int failures;

#define CHECK(cond)                                                            \
	do {                                                                       \
		if (!(cond)) {                                                         \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
			failures++;                                                        \
		}                                                                      \
	} while (0)

enum { SYN = 0x02, ACK = 0x10, FIN = 0x01, PSH = 0x08 };

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* An Ethernet/IPv4/TCP frame into f (>= 1600 bytes); optlen bytes of options from opt
 * (a multiple of 4), payload of `len` zero bytes. Returns the frame length. */
static uint32_t frame(uint8_t *f, uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport,
                      uint32_t seq, uint32_t ack, uint8_t flags, const uint8_t *opt,
                      uint32_t optlen, uint32_t len)
{
	uint8_t *ip = f + 14, *tcp = ip + 20;
	uint32_t doff = 20 + optlen;
	memset(f, 0, 14 + 20 + doff + len);
	put16(f + 12, 0x0800);
	ip[0] = 0x45;
	put16(ip + 2, (uint16_t)(20 + doff + len));
	put16(ip + 6, 0x4000); /* DF, not a fragment */
	ip[8] = 64;
	ip[9] = 6;
	put32(ip + 12, src);
	put32(ip + 16, dst);
	put16(tcp, sport);
	put16(tcp + 2, dport);
	put32(tcp + 4, seq);
	put32(tcp + 8, ack);
	tcp[12] = (uint8_t)((doff / 4) << 4);
	tcp[13] = flags;
	put16(tcp + 14, 65535);
	if (optlen)
		memcpy(tcp + 20, opt, optlen);
	return 14 + 20 + doff + len;
}

#define A_IP 0x0a640001u
#define B_IP 0x0a640002u

/* One connection's handshake and a data segment; returns the data segment's identity. */
static void handshake(struct rk_flows *t, uint16_t eport, uint32_t isn_b, uint32_t isn_a)
{
	static uint8_t f[1600];
	struct rk_id id;
	uint32_t n = frame(f, B_IP, eport, A_IP, 5001, isn_b, 0, SYN, NULL, 0, 0);
	CHECK(rk_identity(t, f, n, &id) == 0 && id.kind == RK_DATA && id.rel == 0 &&
	      id.flags == SYN && id.listen == 5001);
	n = frame(f, A_IP, 5001, B_IP, eport, isn_a, isn_b + 1, SYN | ACK, NULL, 0, 0);
	CHECK(rk_identity(t, f, n, &id) == 0 && id.kind == RK_DATA && id.rel == 0);
}

static uint64_t data_hash(struct rk_flows *t, uint16_t eport, uint32_t isn_b, uint32_t off,
                          uint32_t len)
{
	static uint8_t f[1600];
	struct rk_id id;
	uint32_t n = frame(f, B_IP, eport, A_IP, 5001, isn_b + 1 + off, 12345, ACK | PSH, NULL, 0,
	                   len);
	if (rk_identity(t, f, n, &id) != 0)
		return 0;
	CHECK(id.kind == RK_DATA && id.rel == 1 + off && id.len == len && id.listen == 5001);
	return rk_hash(&id);
}

static uint64_t ack_hash(struct rk_flows *t, uint16_t eport, uint32_t isn_a, uint32_t isn_b,
                         uint32_t acked, uint32_t sl, uint32_t sr, struct rk_id *id)
{
	static uint8_t f[1600];
	uint8_t opt[12] = {1, 1, 5, 10};
	uint32_t n;
	put32(opt + 4, isn_b + 1 + sl);
	put32(opt + 8, isn_b + 1 + sr);
	n = frame(f, A_IP, 5001, B_IP, eport, isn_a + 1, isn_b + 1 + acked, ACK, opt,
	          sr ? 12 : 0, 0);
	if (rk_identity(t, f, n, id) != 0)
		return 0;
	return rk_hash(id);
}

static void test_same_segment_same_identity_whatever_the_isn(void)
{
	static struct rk_flows t1, t2;
	handshake(&t1, 40000, 0x11111111u, 0x22222222u);
	handshake(&t2, 51234, 0xfffff000u, 0x00000007u); /* other ports, ISNs, wrap */
	CHECK(data_hash(&t1, 40000, 0x11111111u, 1448 * 7, 1448) ==
	      data_hash(&t2, 51234, 0xfffff000u, 1448 * 7, 1448));
	/* another length at the same sequence number is another segment */
	CHECK(data_hash(&t1, 40000, 0x11111111u, 1448 * 7, 1448) !=
	      data_hash(&t1, 40000, 0x11111111u, 1448 * 7, 724));
	CHECK(data_hash(&t1, 40000, 0x11111111u, 0, 1448) !=
	      data_hash(&t1, 40000, 0x11111111u, 1448, 1448));
}

static void test_pure_acks_keyed_by_relative_ack_and_sack(void)
{
	static struct rk_flows t1, t2;
	struct rk_id id;
	uint64_t h1, h2, h3;
	handshake(&t1, 40000, 0x11111111u, 0x22222222u);
	handshake(&t2, 40001, 0x80000000u, 0x7fffffffu);
	h1 = ack_hash(&t1, 40000, 0x22222222u, 0x11111111u, 2896, 4344, 5792, &id);
	CHECK(id.kind == RK_ACK && id.rel == 1 + 2896 && id.nsack == 1 &&
	      id.sack[0] == 1 + 4344 && id.sack[1] == 1 + 5792);
	h2 = ack_hash(&t2, 40001, 0x7fffffffu, 0x80000000u, 2896, 4344, 5792, &id);
	CHECK(h1 == h2);
	/* a duplicate ACK with a new SACK block is a new identity */
	h3 = ack_hash(&t1, 40000, 0x22222222u, 0x11111111u, 2896, 4344, 7240, &id);
	CHECK(h3 != h1);
	CHECK(ack_hash(&t1, 40000, 0x22222222u, 0x11111111u, 2896, 0, 0, &id) != h1 &&
	      id.nsack == 0);
}

static void test_retransmission_is_the_next_occurrence(void)
{
	static struct rk_flows t;
	struct rk_occ o;
	uint64_t h, k0, k1;
	CHECK(rk_occ_init(&o, 4) == 0);
	handshake(&t, 40000, 1, 2);
	h = data_hash(&t, 40000, 1, 0, 1448);
	CHECK(rk_occ_next(&o, h) == 0);
	CHECK(rk_occ_next(&o, h + 1) == 0);
	CHECK(rk_occ_next(&o, h) == 1);
	CHECK(rk_occ_next(&o, h) == 2);
	k0 = rk_key(h, 0);
	k1 = rk_key(h, 1);
	CHECK(k0 != k1 && k0 == rk_key(h, 0));
	/* growth keeps the counts: 100 identities in a table made for 4 */
	for (h = 1000; h < 1100; h++)
		CHECK(rk_occ_next(&o, h) == 0);
	for (h = 1000; h < 1100; h++)
		CHECK(rk_occ_next(&o, h) == 1);
	CHECK(o.cap >= 256 && o.n == 102);
	rk_occ_free(&o);
}

static void test_malformed_frames_have_no_identity(void)
{
	static struct rk_flows t;
	static uint8_t f[1600];
	struct rk_id id;
	uint8_t badopt[4] = {5, 40, 0, 0}; /* SACK longer than the options */
	uint32_t n = frame(f, B_IP, 40000, A_IP, 5001, 7, 0, SYN, NULL, 0, 0);
	CHECK(rk_identity(&t, f, 13, &id) < 0);         /* shorter than Ethernet */
	CHECK(rk_identity(&t, f, 14 + 19, &id) < 0);    /* shorter than IPv4 */
	CHECK(rk_identity(&t, f, n - 1, &id) < 0);      /* IP total length beyond frame */
	f[14 + 9] = 17;                                 /* UDP */
	CHECK(rk_identity(&t, f, n, &id) < 0);
	f[14 + 9] = 6;
	put16(f + 14 + 6, 0x2000);                      /* MF: a first fragment */
	CHECK(rk_identity(&t, f, n, &id) < 0);
	put16(f + 14 + 6, 0);
	f[14 + 20 + 12] = 4 << 4;                       /* data offset 16 < 20 */
	CHECK(rk_identity(&t, f, n, &id) < 0);
	f[14 + 20 + 12] = 15 << 4;                      /* data offset beyond the segment */
	CHECK(rk_identity(&t, f, n, &id) < 0);
	f[14] = 0x65;                                   /* IPv6 version in an IPv4 frame */
	CHECK(rk_identity(&t, f, n, &id) < 0);
	/* a malformed SACK option is not read past the options: no blocks */
	n = frame(f, A_IP, 5001, B_IP, 40000, 9, 8, ACK, badopt, 4, 0);
	CHECK(rk_identity(&t, f, n, &id) == 0 && id.kind == RK_ACK && id.nsack == 0);
}

static void test_mid_stream_flow_counts_from_first_seen(void)
{
	static struct rk_flows t;
	static uint8_t f[1600];
	struct rk_id id;
	uint32_t n = frame(f, B_IP, 40000, A_IP, 5001, 1000000, 5, ACK, NULL, 0, 100);
	CHECK(rk_identity(&t, f, n, &id) == 0 && id.kind == RK_DATA && id.rel == 0 &&
	      id.len == 100 && id.listen == 5001);
	n = frame(f, B_IP, 40000, A_IP, 5001, 1000100, 5, ACK | FIN, NULL, 0, 0);
	CHECK(rk_identity(&t, f, n, &id) == 0 && id.kind == RK_DATA && id.rel == 100 &&
	      id.flags == FIN);
}

int main(void)
{
	test_same_segment_same_identity_whatever_the_isn();
	test_pure_acks_keyed_by_relative_ack_and_sack();
	test_retransmission_is_the_next_occurrence();
	test_malformed_frames_have_no_identity();
	test_mid_stream_flow_counts_from_first_seen();
	if (failures)
		fprintf(stderr, "test_relay_key: %d failures\n", failures);
	else
		printf("test_relay_key: ok\n");
	return failures ? 1 : 0;
}
