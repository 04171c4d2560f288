/* IPv4 input: every malformed-header drop reason, checksum offload verdicts,
 * Ethernet padding, and fragment reassembly with its limits. */
#include <string.h>

#include "../../core/wire/wire.h"
#include "check.h"
#include "harness.h"
#include "internal.h"

#define SEC 1000000000ull
#define PEER IPK_IP4(10, 0, 0, 9)
#define US IPK_IP4(10, 0, 0, 1)

static const uint8_t peer_mac[6] = {0x02, 0xaa, 0, 0, 0, 9};

static struct hnet *one_node(void (*tweak)(int, struct ipk_config *))
{
	struct hnet *net = hnet_new(1, tweak);

	/* The peer is known, so replies (ICMP) need no ARP. */
	ipk_arp_add_static(net->nodes[0]->ctx, PEER, peer_mac);
	ipk_udp_bind(net->nodes[0]->ctx, ipk_htons(7));
	return net;
}

/* An Ethernet frame to node 0 carrying one IPv4 datagram; returns the length. */
static uint32_t frame(uint8_t *b, uint32_t src, uint32_t dst, uint8_t proto, uint16_t id,
                      uint16_t frag, const uint8_t *payload, uint32_t plen)
{
	uint8_t us[6];

	hb_mac(us, 0);
	hb_eth(b, us, peer_mac, IPK_ETHERTYPE_IP4);
	return 14 + hb_ip4(b + 14, src, dst, proto, id, frag, NULL, 0, payload, plen);
}

static uint32_t udp_frame(uint8_t *b, const uint8_t *data, uint32_t n)
{
	uint8_t u[1600];
	uint32_t ul = hb_udp(u, PEER, US, 1234, 7, data, n, 0);

	return frame(b, PEER, US, 17, 1, 0, u, ul);
}

static uint64_t drops(struct hnet *net, enum ipk_drop d)
{
	return ipk_counters(net->nodes[0]->ctx)->drop[d];
}

static void test_ip4_malformed_headers_each_counted(void)
{
	struct hnet *net = one_node(NULL);
	struct hnode *a = net->nodes[0];
	uint8_t b[200], good[200];
	uint32_t n = udp_frame(good, (const uint8_t *)"hello", 5);

	memcpy(b, good, n); b[14] = 0x65; /* version 6 */
	hnode_inject(a, b, n);
	memcpy(b, good, n); b[14] = 0x44; /* ihl 16 bytes */
	hnode_inject(a, b, n);
	memcpy(b, good, n); ipk_wr16(b + 16, 300); /* tot_len beyond the frame */
	hnode_inject(a, b, n);
	hnode_inject(a, good, 14 + 10); /* truncated header */
	CHECK_EQ(drops(net, IPK_DROP_IP4_MALFORMED), 4);
	memcpy(b, good, n); b[14 + 8] ^= 1; /* ttl changed, checksum not */
	hnode_inject(a, b, n);
	CHECK_EQ(drops(net, IPK_DROP_IP4_CSUM), 1);
	CHECK_EQ(a->udp_n, 0);
	hnode_inject(a, good, n);
	CHECK_EQ(a->udp_n, 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_ip4_bad_addresses_dropped(void)
{
	struct hnet *net = one_node(NULL);
	struct hnode *a = net->nodes[0];
	uint8_t b[200], u[64];
	uint32_t ul = hb_udp(u, PEER, US, 1, 7, NULL, 0, 1);

	hnode_inject(a, b, frame(b, PEER, IPK_IP4(10, 0, 0, 77), 17, 1, 0, u, ul));
	CHECK_EQ(drops(net, IPK_DROP_NOT_FOR_US), 1);
	hnode_inject(a, b, frame(b, IPK_IP4(127, 0, 0, 1), US, 17, 1, 0, u, ul));
	hnode_inject(a, b, frame(b, IPK_IP4(224, 0, 0, 1), US, 17, 1, 0, u, ul));
	hnode_inject(a, b, frame(b, IPK_IP4(255, 255, 255, 255), US, 17, 1, 0, u, ul));
	hnode_inject(a, b, frame(b, IPK_IP4(10, 0, 0, 255), US, 17, 1, 0, u, ul));
	hnode_inject(a, b, frame(b, 0, US, 17, 1, 0, u, ul)); /* 0.0.0.0 unicast */
	CHECK_EQ(drops(net, IPK_DROP_IP4_BAD_SRC), 5);
	/* 0.0.0.0 to broadcast is a booting host (DHCP): allowed. */
	hnode_inject(a, b, frame(b, 0, IPK_IP4(255, 255, 255, 255), 17, 1, 0, u, ul));
	CHECK_EQ(a->udp_n, 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* Item 4 of issue 14: one source rule (internal.h ipk_ip4_src_check) for every
 * path. Class E, 0/8 and our own address ("land") were accepted before it. */
static void test_ip4_martian_and_land_sources_dropped(void)
{
	struct hnet *net = one_node(NULL);
	struct hnode *a = net->nodes[0];
	uint8_t b[200], u[64];
	uint32_t ul = hb_udp(u, PEER, US, 1, 7, NULL, 0, 1);

	a->udp_echo = 1;
	hnode_inject(a, b, frame(b, IPK_IP4(240, 1, 2, 3), US, 17, 1, 0, u, ul));
	hnode_inject(a, b, frame(b, IPK_IP4(254, 0, 0, 1), US, 17, 1, 0, u, ul));
	hnode_inject(a, b, frame(b, IPK_IP4(0, 1, 2, 3), US, 17, 1, 0, u, ul));
	hnode_inject(a, b, frame(b, IPK_IP4(0, 1, 2, 3), IPK_IP4(255, 255, 255, 255), 17, 1, 0,
	                         u, ul));
	CHECK_EQ(drops(net, IPK_DROP_IP4_BAD_SRC), 4);
	/* land: from our own address to our own address */
	hnode_inject(a, b, frame(b, US, US, 17, 1, 0, u, ul));
	hnode_inject(a, b, frame(b, US, IPK_IP4(10, 0, 0, 255), 17, 1, 0, u, ul));
	CHECK_EQ(drops(net, IPK_DROP_IP4_LAND), 2);
	CHECK_EQ(a->udp_n, 0);
	CHECK_EQ(net->ncap, 0); /* no echo, no ICMP, no ARP for ourselves */
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void with_gateway(int idx, struct ipk_config *cfg)
{
	(void)idx;
	cfg->gateway_be = IPK_IP4(10, 0, 0, 9);
}

/* RFC 3704 §2.4 loose reverse path: with no gateway, an off-link source can never
 * be answered (issue 14 item 6: a SYN from one retried about 1000 times a second);
 * with a gateway the same datagram is taken. */
static void test_ip4_source_without_route_back_dropped(void)
{
	struct hnet *net = one_node(NULL);
	struct hnode *a = net->nodes[0];
	uint8_t b[200], u[64];
	uint32_t far = IPK_IP4(192, 168, 7, 7);
	uint32_t ul = hb_udp(u, far, US, 1, 7, NULL, 0, 1);

	hnode_inject(a, b, frame(b, far, US, 17, 1, 0, u, ul));
	CHECK_EQ(drops(net, IPK_DROP_IP4_SRC_NO_ROUTE), 1);
	CHECK_EQ(a->udp_n, 0);
	CHECK_EQ(net->ncap, 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
	net = one_node(with_gateway);
	a = net->nodes[0];
	hnode_inject(a, b, frame(b, far, US, 17, 1, 0, u, ul));
	CHECK_EQ(drops(net, IPK_DROP_IP4_SRC_NO_ROUTE), 0);
	CHECK_EQ(a->udp_n, 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void mask32(int i, struct ipk_config *c)
{
	(void)i;
	c->netmask_be = IPK_IP4(255, 255, 255, 255);
}

/* The receive shortcuts remember the last source the rule passed (ctx->src_ok_be,
 * started at an address that passes). Under a /32 without a gateway no address
 * passes, so there is no start value: the shortcuts must stay off rather than
 * remember 0, which would let 0.0.0.0 through them. */
static void test_ip4_zero_source_dropped_where_no_source_passes(void)
{
	struct hnet *net = one_node(mask32);
	struct hnode *a = net->nodes[0];
	uint8_t b[200], u[64];
	uint32_t ul = hb_udp(u, 0, US, 1, 7, NULL, 0, 1);

	hnode_inject(a, b, frame(b, 0, US, 17, 1, 0, u, ul)); /* 0.0.0.0 unicast */
	CHECK_EQ(drops(net, IPK_DROP_IP4_BAD_SRC), 1);
	CHECK_EQ(a->udp_n, 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* Issue 14 item 6: a connection to an address with no route retried its SYN every
 * millisecond (~1000 no_route drops a second). It must back off like a segment
 * lost on the way: RFC 6298 exponential retransmission, a handful of tries in 10 s. */
/* Off-link with no gateway: ipk_tcp_connect says IPK_EHOSTUNREACH at once instead of
 * opening a connection whose SYNs are all dropped (IPK_DROP_NO_ROUTE) until it times
 * out; nothing is sent, counted or held. With a gateway the same peer is reachable,
 * and an on-link peer not in the ARP cache is not refused (its SYN waits for ARP). */
static void test_ip4_no_route_connect_fails_at_once(void)
{
	struct hnet *net = one_node(NULL);
	struct hnode *a = net->nodes[0];
	struct ipk_conn *c = NULL;
	int k;

	CHECK_EQ(ipk_tcp_connect(a->ctx, IPK_IP4(192, 168, 7, 7), ipk_htons(80), 0, NULL, &c,
	                         net->now), IPK_EHOSTUNREACH);
	CHECK(c == NULL);
	CHECK_EQ(ipk_counters(a->ctx)->tcp_active_opens, 0);
	for (k = 0; k < 100; k++)
		hnet_advance(net, 10000000ull); /* 1 s in 10 ms steps */
	CHECK_EQ(drops(net, IPK_DROP_NO_ROUTE), 0);
	CHECK_EQ(net->ncap, 0);
	/* on-link, unresolved: accepted, the ARP request goes out */
	CHECK_EQ(ipk_tcp_connect(a->ctx, IPK_IP4(10, 0, 0, 77), ipk_htons(80), 0, NULL, &c,
	                         net->now), IPK_OK);
	CHECK(c != NULL);
	CHECK(net->ncap >= 1);
	if (c)
		ipk_tcp_abort(a->ctx, c, net->now);
	for (k = 0; k < 100; k++)
		hnet_advance(net, 100000000ull); /* 10 s: ARP gives up, its queue is freed */
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
	/* with a gateway: accepted, the SYN goes to the gateway */
	net = one_node(with_gateway);
	a = net->nodes[0];
	c = NULL;
	CHECK_EQ(ipk_tcp_connect(a->ctx, IPK_IP4(192, 168, 7, 7), ipk_htons(80), 0, NULL, &c,
	                         net->now), IPK_OK);
	CHECK(c != NULL);
	if (c)
		ipk_tcp_abort(a->ctx, c, net->now);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_ip4_options_skipped_source_route_dropped(void)
{
	struct hnet *net = one_node(NULL);
	struct hnode *a = net->nodes[0];
	uint8_t b[200], u[64], us[6];
	const uint8_t ts_opt[4] = {1, 1, 1, 0};          /* NOP NOP NOP EOL */
	const uint8_t lsrr[8] = {131, 7, 4, 10, 0, 0, 9, 0};
	const uint8_t badlen[4] = {7, 9, 4, 0};          /* length past the header */
	uint32_t ul = hb_udp(u, PEER, US, 1, 7, NULL, 0, 1);

	hb_mac(us, 0);
	hb_eth(b, us, peer_mac, IPK_ETHERTYPE_IP4);
	hnode_inject(a, b, 14 + hb_ip4(b + 14, PEER, US, 17, 1, 0, ts_opt, 4, u, ul));
	CHECK_EQ(a->udp_n, 1);
	hnode_inject(a, b, 14 + hb_ip4(b + 14, PEER, US, 17, 1, 0, lsrr, 8, u, ul));
	CHECK_EQ(drops(net, IPK_DROP_IP4_OPTIONS), 1);
	hnode_inject(a, b, 14 + hb_ip4(b + 14, PEER, US, 17, 1, 0, badlen, 4, u, ul));
	CHECK_EQ(drops(net, IPK_DROP_IP4_MALFORMED), 1);
	CHECK_EQ(a->udp_n, 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_ip4_unknown_protocol_gets_protocol_unreachable(void)
{
	struct hnet *net = one_node(NULL);
	struct hnode *a = net->nodes[0];
	uint8_t b[200];
	const uint8_t data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	const uint8_t *icmp;

	hnode_inject(a, b, frame(b, PEER, US, 99, 5, 0, data, 8));
	CHECK_EQ(drops(net, IPK_DROP_IP4_PROTO), 1);
	CHECK_EQ(net->ncap, 1);
	icmp = net->cap[0].b + 34;
	CHECK_EQ(icmp[0], 3);
	CHECK_EQ(icmp[1], 2);
	/* Not for a broadcast. */
	hnode_inject(a, b, frame(b, PEER, IPK_IP4(10, 0, 0, 255), 99, 5, 0, data, 8));
	CHECK_EQ(net->ncap, 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_link_bad_frames_counted(void)
{
	struct hnet *net = one_node(NULL);
	struct hnode *a = net->nodes[0];
	uint8_t b[200];
	uint32_t n = udp_frame(b, (const uint8_t *)"x", 1);

	hnode_inject(a, b, 10);
	CHECK_EQ(drops(net, IPK_DROP_RUNT), 1);
	b[5] = 0x77; /* someone else's MAC */
	hnode_inject(a, b, n);
	CHECK_EQ(drops(net, IPK_DROP_NOT_FOR_US), 1);
	b[5] = 1;
	ipk_wr16(b + 12, 0x86dd);
	hnode_inject(a, b, n);
	ipk_wr16(b + 12, IPK_ETHERTYPE_VLAN);
	hnode_inject(a, b, n);
	CHECK_EQ(drops(net, IPK_DROP_ETHERTYPE), 2);
	CHECK_EQ(a->udp_n, 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_ip4_ethernet_padding_trimmed(void)
{
	struct hnet *net = one_node(NULL);
	struct hnode *a = net->nodes[0];
	uint8_t b[200];
	uint32_t n = udp_frame(b, (const uint8_t *)"ab", 2);

	memset(b + n, 0xee, 60 - n);
	hnode_inject(a, b, 60);
	CHECK_EQ(a->udp_n, 1);
	CHECK_EQ(a->udp_len, 2);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void rx_offload(int idx, struct ipk_config *cfg)
{
	(void)idx;
	cfg->caps |= IPK_CAP_RX_CSUM_IP4 | IPK_CAP_RX_CSUM_L4;
}

static void test_ip4_rx_csum_offload_verdict_honoured(void)
{
	struct hnet *net = one_node(rx_offload);
	struct hnode *a = net->nodes[0];
	uint8_t b[200], bad[200];
	uint32_t n = udp_frame(b, (const uint8_t *)"abc", 3);

	memcpy(bad, b, n);
	bad[14 + 10] ^= 0xff; /* IP checksum wrong */
	a->rx_csum_stamp = IPK_RXCSUM_IP4_GOOD;
	hnode_inject(a, bad, n);
	CHECK_EQ(a->udp_n, 1); /* the NIC said good: no software check */
	a->rx_csum_stamp = IPK_RXCSUM_IP4_BAD;
	hnode_inject(a, b, n);
	CHECK_EQ(drops(net, IPK_DROP_IP4_CSUM), 1);
	a->rx_csum_stamp = IPK_RXCSUM_L4_BAD;
	hnode_inject(a, b, n);
	CHECK_EQ(drops(net, IPK_DROP_UDP_CSUM), 1);
	memcpy(bad, b, n);
	bad[n - 1] ^= 0xff; /* UDP payload corrupted */
	a->rx_csum_stamp = IPK_RXCSUM_L4_GOOD;
	hnode_inject(a, bad, n);
	CHECK_EQ(a->udp_n, 2);
	a->rx_csum_stamp = 0; /* unknown: software catches it */
	hnode_inject(a, bad, n);
	CHECK_EQ(drops(net, IPK_DROP_UDP_CSUM), 2);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* ---------------------------------------------------------- reassembly */

#define DGRAM 1200u
#define PIECE 200u /* 6 fragments */

static uint8_t udp_dgram[DGRAM];

/* Build the UDP datagram (header + payload) that the fragments carry. */
static void make_dgram(void)
{
	uint8_t payload[DGRAM - 8];
	uint32_t i;

	for (i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 7 + 3);
	hb_udp(udp_dgram, PEER, US, 1234, 7, payload, sizeof(payload), 0);
}

/* Fragment k (of DGRAM / PIECE) of datagram `id`, `len` bytes from offset `off`. */
static void send_piece(struct hnode *a, uint16_t id, uint32_t off, uint32_t len, int more)
{
	uint8_t b[1600];
	uint16_t frag = (uint16_t)((off / 8) | (more ? IPK_IP4_MF : 0));

	hnode_inject(a, b, frame(b, PEER, US, 17, id, frag, udp_dgram + off, len));
}

static void send_frag(struct hnode *a, uint16_t id, uint32_t k)
{
	send_piece(a, id, k * PIECE, PIECE, (k + 1) * PIECE < DGRAM);
}

static int delivered_intact(struct hnode *a)
{
	return a->udp_n == 1 && a->udp_len == DGRAM - 8 && a->udp_was_chain &&
	       memcmp(a->udp_data, udp_dgram + 8, DGRAM - 8) == 0;
}

static void reassemble_in_order(const uint32_t *order, int dup)
{
	struct hnet *net = one_node(NULL);
	struct hnode *a = net->nodes[0];
	uint32_t i;

	make_dgram();
	for (i = 0; i < DGRAM / PIECE; i++) {
		send_frag(a, 42, order[i]);
		if (dup && i + 1 < DGRAM / PIECE)
			send_frag(a, 42, order[i]);
	}
	CHECK(delivered_intact(a));
	CHECK_EQ(ipk_counters(a->ctx)->ip4_reassembled, 1);
	CHECK_EQ(ipk_counters(a->ctx)->ip4_frags_rx, 6u + (dup ? 5u : 0u));
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_frag_in_order_reassembled(void)
{
	const uint32_t order[6] = {0, 1, 2, 3, 4, 5};
	reassemble_in_order(order, 0);
}

static void test_frag_reverse_order_reassembled(void)
{
	const uint32_t order[6] = {5, 4, 3, 2, 1, 0};
	reassemble_in_order(order, 0);
}

static void test_frag_random_order_reassembled(void)
{
	const uint32_t order[6] = {3, 0, 5, 1, 4, 2};
	reassemble_in_order(order, 0);
}

static void test_frag_exact_duplicates_ignored(void)
{
	const uint32_t order[6] = {2, 5, 0, 4, 1, 3};
	reassemble_in_order(order, 1);
}

static void test_frag_overlap_discards_datagram(void)
{
	struct hnet *net = one_node(NULL);
	struct hnode *a = net->nodes[0];
	uint32_t k;

	make_dgram();
	send_frag(a, 7, 0);
	send_frag(a, 7, 1);
	send_piece(a, 7, 200, 400, 1); /* covers piece 1 and 2: not an exact duplicate */
	CHECK_EQ(drops(net, IPK_DROP_FRAG_OVERLAP), 3);
	CHECK_EQ(ipk_pbs_free(a->ctx), 64);
	for (k = 2; k < 6; k++)
		send_frag(a, 7, k);
	CHECK_EQ(a->udp_n, 0);
	net->cut = 1;
	hnet_advance(net, 31 * SEC);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_frag_timeout_frees_all_and_sends_time_exceeded(void)
{
	struct hnet *net = one_node(NULL);
	struct hnode *a = net->nodes[0];
	const uint8_t *icmp;

	make_dgram();
	send_frag(a, 9, 0);
	send_frag(a, 9, 3);
	CHECK_EQ(ipk_pbs_free(a->ctx), 62);
	hnet_advance(net, 29 * SEC);
	CHECK_EQ(drops(net, IPK_DROP_FRAG_TIMEOUT), 0);
	hnet_advance(net, 2 * SEC);
	CHECK_EQ(drops(net, IPK_DROP_FRAG_TIMEOUT), 2);
	CHECK_EQ(net->ncap, 1);
	icmp = net->cap[0].b + 34;
	CHECK_EQ(icmp[0], IPK_ICMP_TIME_EXCEEDED);
	CHECK_EQ(icmp[1], 1);
	CHECK_EQ(ipk_rd16(icmp + 8 + 4), 9); /* the quoted datagram's id */
	/* Without the first fragment: no ICMP. */
	hnet_clear_cap(net);
	send_frag(a, 10, 2);
	hnet_advance(net, 31 * SEC);
	CHECK_EQ(drops(net, IPK_DROP_FRAG_TIMEOUT), 3);
	CHECK_EQ(net->ncap, 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void few_pieces(int idx, struct ipk_config *cfg)
{
	(void)idx;
	cfg->frag_max_pieces = 4;
}

static void test_frag_too_many_pieces_dropped(void)
{
	struct hnet *net = one_node(few_pieces);
	struct hnode *a = net->nodes[0];
	uint32_t k;

	make_dgram();
	for (k = 0; k < 6; k++)
		send_frag(a, 11, k);
	CHECK_EQ(a->udp_n, 0);
	CHECK(drops(net, IPK_DROP_FRAG_TOO_BIG) >= 5);
	net->cut = 1;
	hnet_advance(net, 31 * SEC);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void small_max(int idx, struct ipk_config *cfg)
{
	(void)idx;
	cfg->frag_max_bytes = 1000;
}

static void test_frag_too_big_dropped(void)
{
	struct hnet *net = one_node(small_max);
	struct hnode *a = net->nodes[0];
	uint32_t k;

	make_dgram();
	for (k = 0; k < 6; k++)
		send_frag(a, 12, k);
	CHECK_EQ(a->udp_n, 0);
	CHECK_EQ(drops(net, IPK_DROP_FRAG_TOO_BIG), 6); /* five held + the one past 1000 */
	/* An offset that would pass 65535 bytes is refused at once. */
	{
		uint8_t b[100];

		hnode_inject(a, b, frame(b, PEER, US, 17, 13, 65528 / 8, udp_dgram, 16));
	}
	CHECK_EQ(drops(net, IPK_DROP_FRAG_TOO_BIG), 7);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* One source holds at most half the slots (frag_slots = 4 here): its third
 * unfinished datagram evicts its own stalest. */
static void test_frag_one_source_holds_half_the_slots(void)
{
	struct hnet *net = one_node(NULL); /* frag_slots = 4 */
	struct hnode *a = net->nodes[0];
	uint16_t id;

	make_dgram();
	for (id = 100; id < 105; id++)
		send_frag(a, id, 1);
	CHECK_EQ(drops(net, IPK_DROP_FRAG_NOMEM), 0);
	CHECK_EQ(drops(net, IPK_DROP_FRAG_EVICTED), 3);
	hnet_advance(net, 31 * SEC);
	CHECK_EQ(drops(net, IPK_DROP_FRAG_TIMEOUT), 2);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* A first fragment of datagram id from src that never continues. */
static void send_stray(struct hnode *a, uint32_t src, uint16_t id)
{
	uint8_t b[1600];

	hnode_inject(a, b, frame(b, src, US, 17, id, IPK_IP4_MF, udp_dgram, PIECE));
}

/* Issue 14 item 2: first fragments that never complete held every slot for the
 * whole 30 s timeout, so no other datagram could be reassembled. Now a flood from
 * one source, then from a new (spoofed) source per fragment, both interleaved
 * with a legitimate datagram's pieces, leaves it to be reassembled intact. */
static void test_frag_unfinished_flood_does_not_block_reassembly(void)
{
	struct hnet *net = one_node(NULL); /* frag_slots = 4 */
	struct hnode *a = net->nodes[0];
	uint32_t k, n = 0;

	make_dgram();
	for (k = 0; k < 50; k++)
		send_stray(a, IPK_IP4(10, 0, 0, 50), (uint16_t)(1000 + k));
	for (k = 0; k < DGRAM / PIECE; k++) {
		send_stray(a, IPK_IP4(10, 0, 0, 50), (uint16_t)(2000 + k));
		send_frag(a, 42, k);
	}
	CHECK(delivered_intact(a));
	/* many sources: two new datagrams between each of the legitimate pieces */
	a->udp_n = 0;
	for (k = 0; k < DGRAM / PIECE; k++) {
		send_stray(a, IPK_IP4(10, 0, 0, 60 + n), (uint16_t)k), n++;
		send_stray(a, IPK_IP4(10, 0, 0, 60 + n), (uint16_t)k), n++;
		send_frag(a, 43, k);
	}
	CHECK(delivered_intact(a));
	CHECK(drops(net, IPK_DROP_FRAG_EVICTED) > 50);
	net->cut = 1;
	hnet_advance(net, 31 * SEC);
	for (k = 0; k < 5; k++) /* time exceeded to the strays waits for ARP */
		hnet_advance(net, SEC);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_frag_bad_sizes_malformed(void)
{
	struct hnet *net = one_node(NULL);
	struct hnode *a = net->nodes[0];

	make_dgram();
	send_piece(a, 14, 0, 100, 1); /* not a multiple of 8 with MF */
	CHECK_EQ(drops(net, IPK_DROP_IP4_MALFORMED), 1);
	send_piece(a, 15, 400, 200, 0); /* last: total 600 */
	send_piece(a, 15, 600, 200, 1); /* beyond the end */
	CHECK_EQ(drops(net, IPK_DROP_FRAG_OVERLAP), 2);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_frag_icmp_echo_reassembled_gets_reply(void)
{
	struct hnet *net = one_node(NULL);
	struct hnode *a = net->nodes[0];
	uint8_t icmp[1008], b[1600];
	int odd = 0;
	uint32_t i;

	memset(icmp, 0, sizeof(icmp));
	icmp[0] = 8;
	ipk_wr16(icmp + 4, 77);
	for (i = 8; i < sizeof(icmp); i++)
		icmp[i] = (uint8_t)i;
	ipk_wr16(icmp + 2, ipk_csum_fold(ipk_csum_add(0, icmp, sizeof(icmp), &odd)));
	hnode_inject(a, b, frame(b, PEER, US, 1, 50, 504 / 8, icmp + 504, 504));
	hnode_inject(a, b, frame(b, PEER, US, 1, 50, IPK_IP4_MF, icmp, 504));
	CHECK_EQ(net->ncap, 1);
	CHECK_EQ(net->cap[0].len, 14 + 20 + sizeof(icmp));
	CHECK_EQ(net->cap[0].b[34], 0); /* echo reply */
	CHECK(memcmp(net->cap[0].b + 34 + 8, icmp + 8, sizeof(icmp) - 8) == 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* Inject an echo request of `data` bytes (header + pattern) as fragments of at most
 * 1480 payload bytes, last first (so it completes on the first fragment). */
static void inject_big_echo(struct hnode *a, uint8_t *icmp, uint32_t data)
{
	uint32_t l4 = 8 + data, off, i;
	int odd = 0;

	memset(icmp, 0, 8);
	icmp[0] = 8;
	ipk_wr16(icmp + 4, 0x1234);
	ipk_wr16(icmp + 6, 7);
	for (i = 8; i < l4; i++)
		icmp[i] = (uint8_t)(i * 13u + (i >> 8));
	ipk_wr16(icmp + 2, ipk_csum_fold(ipk_csum_add(0, icmp, l4, &odd)));
	for (off = ((l4 - 1) / 1480) * 1480;; off -= 1480) {
		uint8_t b[1600];
		uint32_t n = l4 - off < 1480 ? l4 - off : 1480;
		uint16_t frag = (uint16_t)((off / 8) | (off + n < l4 ? IPK_IP4_MF : 0));

		hnode_inject(a, b, frame(b, PEER, US, 1, 0x77, frag, icmp + off, n));
		if (off == 0)
			break;
	}
}

/* The reply's fragments among the captured frames put back together in out;
 * returns the ICMP bytes found in order with no gap (0 on any inconsistency). */
static uint32_t collect_reply(struct hnet *net, uint8_t *out, uint32_t max)
{
	uint32_t have = 0, total = 0;
	int i;

	for (i = 0; i < net->ncap; i++) {
		const uint8_t *ip = net->cap[i].b + 14;
		uint32_t ihl = (ip[0] & 15u) * 4u, tot = ipk_rd16(ip + 2), n = tot - ihl;
		uint32_t off = (ipk_rd16(ip + 6) & IPK_IP4_OFFMASK) * 8u;

		if (ipk_rd16(net->cap[i].b + 12) != IPK_ETHERTYPE_IP4 || ip[9] != 1 ||
		    net->cap[i].len != 14 + tot || tot > 1500 || off + n > max ||
		    ipk_csum_fold(ipk_csum_hdr20(ip)) != 0)
			return 0;
		memcpy(out + off, ip + ihl, n);
		have += n;
		if (!(ipk_rd16(ip + 6) & IPK_IP4_MF))
			total = off + n;
	}
	return have == total ? total : 0;
}

static uint32_t g_caps_echo;
static void big_echo_cfg(int idx, struct ipk_config *cfg)
{
	(void)idx;
	cfg->caps = g_caps_echo;
	cfg->frag_max_pieces = 64;
}

/* Issue 14 item 3: RFC 1122 §3.2.2.6 wants the echo data back. A request larger
 * than one buffer (2,048 here) was reassembled, then dropped as frag_too_big when
 * flattened; now the reply is built from the chain and leaves in fragments, the
 * data intact, with and without scatter-gather. */
static void big_echo(uint32_t data, uint32_t caps)
{
	static uint8_t icmp[65535], back[65535];
	struct hnet *net;
	struct hnode *a;
	uint32_t got;
	int odd = 0;

	g_caps_echo = caps;
	net = one_node(big_echo_cfg);
	a = net->nodes[0];
	inject_big_echo(a, icmp, data);
	got = collect_reply(net, back, sizeof(back));
	CHECK_EQ(got, 8 + data);
	CHECK_EQ(back[0], 0); /* echo reply */
	CHECK_EQ(ipk_csum_fold(ipk_csum_add(0, back, got, &odd)), 0);
	CHECK(memcmp(back + 4, icmp + 4, 8 + data - 4) == 0);
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_FRAG_TOO_BIG], 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_icmp_echo_3000_answered_from_chain(void) { big_echo(3000, 0); }
static void test_icmp_echo_9000_answered_from_chain_sg(void) { big_echo(9000, IPK_CAP_SG); }
static void test_icmp_echo_65507_answered_from_chain(void) { big_echo(65507, 0); }
static void test_icmp_echo_65507_answered_from_chain_sg(void) { big_echo(65507, IPK_CAP_SG); }

static void rmem_8(int idx, struct ipk_config *cfg)
{
	(void)idx;
	cfg->rmem_max = 8ull * cfg->pkt_buf_size; /* 8 packets held */
}

/* Fragment k of datagram id from src (never completed: k < DGRAM / PIECE - 1). */
static void send_frag_from(struct hnode *a, uint32_t src, uint16_t id, uint32_t k)
{
	uint8_t b[1600];

	hnode_inject(a, b, frame(b, src, US, 17, id, (uint16_t)((k * PIECE / 8) | IPK_IP4_MF),
	                         udp_dgram + k * PIECE, PIECE));
}

static uint32_t frag_pieces_held(struct hnode *a)
{
	uint32_t i, n = 0;

	for (i = 0; i < a->ctx->cfg.frag_slots; i++)
		n += a->ctx->frags[i].npieces;
	return n;
}

/* Issue 14 (memory, item 4): held fragments count in the context's receive-memory
 * budget (rmem_max, shared with TCP's out-of-order queues); over it the datagram
 * that received nothing for longest is evicted (one datagram alone may pass it),
 * and a datagram that keeps arriving is still reassembled. */
static void test_frag_held_pieces_bounded_by_rmem(void)
{
	struct hnet *net = one_node(rmem_8);
	struct hnode *a = net->nodes[0];
	uint32_t k, top = 0;

	make_dgram();
	for (k = 0; k < 3; k++) { /* three sources, four pieces each, none finished */
		uint32_t p;

		for (p = 0; p < 4; p++) {
			send_frag_from(a, IPK_IP4(10, 0, 0, 80 + k), (uint16_t)(300 + k), p);
			top = IPK_MAX(top, frag_pieces_held(a));
		}
	}
	CHECK_EQ(top, 8);
	CHECK_EQ(a->ctx->rmem_pkts, 8);
	CHECK_EQ(drops(net, IPK_DROP_FRAG_EVICTED), 4);
	for (k = 0; k < DGRAM / PIECE; k++) {
		send_stray(a, IPK_IP4(10, 0, 0, 70 + k), (uint16_t)k);
		send_frag(a, 44, k);
	}
	CHECK(delivered_intact(a));
	net->cut = 1;
	hnet_advance(net, 31 * SEC);
	for (k = 0; k < 5; k++)
		hnet_advance(net, SEC);
	CHECK_EQ(a->ctx->rmem_pkts, 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

int main(void)
{
	RUN(test_ip4_malformed_headers_each_counted);
	RUN(test_ip4_bad_addresses_dropped);
	RUN(test_ip4_martian_and_land_sources_dropped);
	RUN(test_ip4_source_without_route_back_dropped);
	RUN(test_ip4_zero_source_dropped_where_no_source_passes);
	RUN(test_ip4_no_route_connect_fails_at_once);
	RUN(test_ip4_options_skipped_source_route_dropped);
	RUN(test_ip4_unknown_protocol_gets_protocol_unreachable);
	RUN(test_link_bad_frames_counted);
	RUN(test_ip4_ethernet_padding_trimmed);
	RUN(test_ip4_rx_csum_offload_verdict_honoured);
	RUN(test_frag_in_order_reassembled);
	RUN(test_frag_reverse_order_reassembled);
	RUN(test_frag_random_order_reassembled);
	RUN(test_frag_exact_duplicates_ignored);
	RUN(test_frag_overlap_discards_datagram);
	RUN(test_frag_timeout_frees_all_and_sends_time_exceeded);
	RUN(test_frag_too_many_pieces_dropped);
	RUN(test_frag_too_big_dropped);
	RUN(test_frag_one_source_holds_half_the_slots);
	RUN(test_frag_unfinished_flood_does_not_block_reassembly);
	RUN(test_frag_held_pieces_bounded_by_rmem);
	RUN(test_frag_bad_sizes_malformed);
	RUN(test_frag_icmp_echo_reassembled_gets_reply);
	RUN(test_icmp_echo_3000_answered_from_chain);
	RUN(test_icmp_echo_9000_answered_from_chain_sg);
	RUN(test_icmp_echo_65507_answered_from_chain);
	RUN(test_icmp_echo_65507_answered_from_chain_sg);
	return check_summary();
}
