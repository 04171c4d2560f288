/*
 * TCP over IPv6 with the NIC's help and ECN (issue 19), over the back-to-back
 * harness: transmit checksum offload marked for IPv6 (IPK_CAP_TX_CSUM_TCP6), the
 * receive verdicts honoured on frames and LRO chains, LRO chains taken as one
 * segment (and malformed ones dropped by reason), and RFC 3168 ECN in the Traffic
 * Class: ECT on new data, CE echoed as ECE until CWR, ECE answered with CWR.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tcp.h"
#include "check.h"
#include "harness.h"

#define SEC 1000000000ull
#define MS 1000000ull

static const uint8_t G1[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
static const uint8_t G2[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

static struct ipk_conn *conn_of[H_MAX_NODES];
static uint8_t rxbuf[H_MAX_NODES][70000];
static uint32_t rxlen[H_MAX_NODES];
static uint32_t caps_of[H_MAX_NODES];
static int ecn_on;

static int idx_of(void *opaque) { return ((struct hnode *)opaque)->idx; }

static void *op_accepted(struct ipk_ctx *ctx, struct ipk_conn *c, void *opaque)
{
	(void)ctx;
	conn_of[idx_of(opaque)] = c;
	return NULL;
}

static void op_connected(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *opaque)
{
	(void)ctx; (void)user;
	conn_of[idx_of(opaque)] = c;
}

static void op_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                       uint32_t off, uint32_t len, void *opaque)
{
	int i = idx_of(opaque);

	(void)user;
	if (!pkt)
		return;
	if (rxlen[i] + len <= sizeof(rxbuf[i]))
		rxlen[i] += ipk_pkt_copy(ctx, pkt, off, rxbuf[i] + rxlen[i], len);
	ipk_tcp_recved(ctx, c, len, ((struct hnode *)opaque)->net->now);
}

/* No timestamps: the forged segments below need none (RFC 7323 §3.2). */
static void tweak(int idx, struct ipk_config *cfg)
{
	cfg->ip6_enable = 1;
	memcpy(cfg->ip6_addr, idx == 0 ? G1 : G2, 16);
	cfg->tcp_timestamps = 0;
	cfg->tcp_ecn = (uint8_t)ecn_on;
	cfg->caps = caps_of[idx];
}

/* Node 0 (G1) connected to node 1 (G2):80, both up. */
static struct hnet *open6(uint32_t caps0, uint32_t caps1, int ecn)
{
	struct hnet *net;
	struct ipk_addr peer;
	struct ipk_conn *c = NULL;
	int i;

	caps_of[0] = caps0;
	caps_of[1] = caps1;
	ecn_on = ecn;
	net = hnet_new(2, tweak);
	memset(conn_of, 0, sizeof(conn_of));
	memset(rxlen, 0, sizeof(rxlen));
	for (i = 0; i < 2; i++) {
		net->nodes[i]->ops.tcp_accepted = op_accepted;
		net->nodes[i]->ops.tcp_connected = op_connected;
		net->nodes[i]->ops.tcp_payload = op_payload;
	}
	hnet_advance(net, 0);
	hnet_advance(net, 2 * SEC); /* DAD done */
	memset(&peer, 0, sizeof(peer));
	peer.family = IPK_AF_INET6;
	memcpy(peer.a, G2, 16);
	CHECK_EQ(ipk_tcp_listen(net->nodes[1]->ctx, ipk_htons(80), 8), IPK_OK);
	CHECK_EQ(ipk_tcp_connect_addr(net->nodes[0]->ctx, &peer, ipk_htons(80), 0, NULL, &c,
	                              net->now),
	         IPK_OK);
	hnet_settle(net);
	CHECK(c != NULL && conn_of[0] == c && conn_of[1] != NULL);
	return net;
}

/* A segment of node 0's connection as node 0 would send it (its ports, snd_nxt,
 * rcv_nxt), Traffic Class tc, into b; returns the frame length. bad_csum: the
 * checksum off by one. */
static uint32_t seg6(uint8_t *b, const struct ipk_conn *c, uint8_t tc, uint8_t flags,
                     const uint8_t *pl, uint32_t plen, int bad_csum)
{
	uint8_t m0[6], m1[6], *ip = b + 14, *t = b + 54;

	hb_mac(m0, 0);
	hb_mac(m1, 1);
	hb_eth(b, m1, m0, IPK_ETHERTYPE_IP6);
	ipk_wr32(ip, (6u << 28) | ((uint32_t)tc << 20));
	ipk_wr16(ip + 4, (uint16_t)(20 + plen));
	ip[6] = IPK_IPPROTO_TCP;
	ip[7] = 64;
	memcpy(ip + 8, G1, 16);
	memcpy(ip + 24, G2, 16);
	memset(t, 0, 20);
	memcpy(t, &c->t.local_port_be, 2);
	memcpy(t + 2, &c->t.peer_port_be, 2);
	ipk_wr32(t + 4, c->snd_nxt);
	ipk_wr32(t + 8, c->rcv_nxt);
	t[12] = 5 << 4;
	t[13] = flags;
	ipk_wr16(t + 14, 0xffff);
	memcpy(t + 20, pl, plen);
	ipk_wr16(t + 16, (uint16_t)(ipk_csum_l4_6(G1, G2, IPK_IPPROTO_TCP, t, 20 + plen) + bad_csum));
	return 54 + 20 + plen;
}

/* The frame in b as a chain of two packets cut at `cut`, `extra` bytes of
 * garbage after it, handed to node h as received (rx_csum as its stamp). */
static void inject_chain(struct hnode *h, const uint8_t *b, uint32_t len, uint32_t cut,
                         uint32_t extra)
{
	static uint8_t tail[H_FRAME_MAX];
	struct sim_pkt *k1, *k2;
	void *one;

	memcpy(tail, b + cut, len - cut);
	memset(tail + (len - cut), 0xab, extra);
	k1 = sim_pkt_from(h->pool, b, cut);
	k2 = sim_pkt_from(h->pool, tail, len - cut + extra);
	CHECK(k1 && k2);
	if (!k1 || !k2)
		return;
	k1->next = k2;
	k1->rx_csum = h->rx_csum_stamp;
	one = k1;
	ipk_run(h->ctx, &one, 1, h->net->now);
}

static uint8_t pay[2000];

static void fill_pay(void)
{
	uint32_t i;

	for (i = 0; i < sizeof(pay); i++)
		pay[i] = (uint8_t)(i * 13 + 5);
}

/* The last TCP frame node `from` sent; NULL when none. */
static const uint8_t *last_tcp6(const struct hnet *net, int from)
{
	const uint8_t *f = NULL;
	int i;

	for (i = 0; i < net->ncap; i++)
		if (net->cap[i].from == from && ipk_rd16(net->cap[i].b + 12) == IPK_ETHERTYPE_IP6 &&
		    net->cap[i].b[20] == IPK_IPPROTO_TCP)
			f = net->cap[i].b;
	return f;
}

static unsigned ecn_of(const uint8_t *f) { return (f[15] >> 4) & 3u; }

/* ---------------------------------------------------------------- LRO */

/* A coalesced 3000-byte segment as a chain (IPK_CAP_LRO) reaches the application
 * whole and is acknowledged (dropped as IPK_DROP_CHAIN before). */
static void test_tcp6_lro_chain_delivered_as_one_segment(void)
{
	struct hnet *net = open6(0, IPK_CAP_LRO, 0);
	struct hnode *b = net->nodes[1];
	static uint8_t f[4000];
	uint32_t len, seq = conn_of[0]->snd_nxt;
	const uint8_t *ack;

	fill_pay();
	net->cut = 1; /* node 0 never sent this: keep node 1's answer off it */
	hnet_clear_cap(net);
	len = seg6(f, conn_of[0], 0, IPK_TCP_ACK | IPK_TCP_PSH, pay, sizeof(pay), 0);
	inject_chain(b, f, len, 54 + 20 + 100, 0);
	hnet_settle(net);
	CHECK_EQ(ipk_counters(b->ctx)->drop[IPK_DROP_CHAIN], 0);
	CHECK_EQ(rxlen[1], sizeof(pay));
	CHECK(memcmp(rxbuf[1], pay, sizeof(pay)) == 0);
	ack = last_tcp6(net, 1);
	CHECK(ack != NULL && ipk_rd32(ack + 54 + 8) == seq + sizeof(pay));
	net->cut = 0;
	hnet_clear_cap(net);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* Chains a coalescing NIC never makes are dropped by reason and deliver nothing:
 * longer than the datagram, the IPv6 header split, another protocol. */
static void test_tcp6_lro_malformed_chains_dropped(void)
{
	struct hnet *net = open6(0, IPK_CAP_LRO, 0);
	struct hnode *b = net->nodes[1];
	static uint8_t f[4000];
	uint32_t len;

	fill_pay();
	net->cut = 1;
	len = seg6(f, conn_of[0], 0, IPK_TCP_ACK, pay, sizeof(pay), 0);
	inject_chain(b, f, len, 200, 1); /* a byte past the payload length */
	len = seg6(f, conn_of[0], 0, IPK_TCP_ACK, pay, 1500, 0);
	inject_chain(b, f, len, 30, 0); /* the IPv6 header across the cut */
	CHECK_EQ(ipk_counters(b->ctx)->drop[IPK_DROP_IP6_MALFORMED], 2);
	len = seg6(f, conn_of[0], 0, IPK_TCP_ACK, pay, sizeof(pay), 0);
	f[20] = IPK_IPPROTO_UDP;
	inject_chain(b, f, len, 200, 0);
	CHECK_EQ(ipk_counters(b->ctx)->drop[IPK_DROP_CHAIN], 1);
	CHECK_EQ(rxlen[1], 0);
	net->cut = 0;
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* ------------------------------------------------------- rx verdicts */

/* The NIC's verdict stands for IPv6 TCP, flat and on an LRO chain: L4_BAD drops a
 * right segment, L4_GOOD lets a wrong one through (the NIC saw it whole). */
static void test_tcp6_rx_csum_verdicts_honoured_flat_and_chained(void)
{
	struct hnet *net = open6(0, IPK_CAP_LRO | IPK_CAP_RX_CSUM_L4, 0);
	struct hnode *b = net->nodes[1];
	static uint8_t f[4000];
	uint32_t len;

	fill_pay();
	net->cut = 1;
	b->rx_csum_stamp = IPK_RXCSUM_L4_BAD;
	len = seg6(f, conn_of[0], 0, IPK_TCP_ACK, pay, 500, 0);
	hnode_inject(b, f, len);
	len = seg6(f, conn_of[0], 0, IPK_TCP_ACK, pay, sizeof(pay), 0);
	inject_chain(b, f, len, 300, 0);
	CHECK_EQ(ipk_counters(b->ctx)->drop[IPK_DROP_TCP_CSUM], 2);
	CHECK_EQ(rxlen[1], 0);
	b->rx_csum_stamp = IPK_RXCSUM_L4_GOOD;
	len = seg6(f, conn_of[0], 0, IPK_TCP_ACK, pay, sizeof(pay), 1);
	inject_chain(b, f, len, 300, 0);
	CHECK_EQ(ipk_counters(b->ctx)->drop[IPK_DROP_TCP_CSUM], 2);
	CHECK_EQ(rxlen[1], sizeof(pay));
	net->cut = 0;
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* ------------------------------------------------------ tx checksum */

/* With IPK_CAP_TX_CSUM_TCP6 every IPv6 TCP frame goes marked TCP_CSUM | IP6 with
 * the IPv6 header's length, the NIC (harness.c nic_finish) completes the sum, and
 * the bytes arrive intact; without the cap nothing is marked. */
static void test_tcp6_tx_csum_offload_marked_and_completed(void)
{
	struct hnet *net = open6(IPK_CAP_TX_CSUM_TCP6, 0, 0);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	int i, marked = 0, tcp = 0;

	fill_pay();
	hnet_clear_cap(net);
	CHECK_EQ(ipk_tcp_write(a->ctx, conn_of[0], pay, sizeof(pay), net->now), (int)sizeof(pay));
	for (i = 0; i < 20 && rxlen[1] < sizeof(pay); i++)
		hnet_advance(net, 10 * MS);
	CHECK_EQ(rxlen[1], sizeof(pay));
	CHECK(memcmp(rxbuf[1], pay, sizeof(pay)) == 0);
	for (i = 0; i < net->ncap; i++) {
		const struct hframe *h = &net->cap[i];

		if (h->from != 0 || ipk_rd16(h->b + 12) != IPK_ETHERTYPE_IP6 || h->b[20] != 6)
			continue;
		tcp++;
		marked += h->flags == (IPK_TXOFF_TCP_CSUM | IPK_TXOFF_IP6);
	}
	CHECK(tcp >= 3);
	CHECK_EQ(marked, tcp);
	CHECK_EQ(ipk_counters(b->ctx)->drop[IPK_DROP_TCP_CSUM], 0);
	/* the other way, no cap: nothing marked */
	hnet_clear_cap(net);
	CHECK_EQ(ipk_tcp_write(b->ctx, conn_of[1], "pong", 4, net->now), 4);
	hnet_advance(net, 10 * MS);
	CHECK_EQ(rxlen[0], 4);
	for (i = 0; i < net->ncap; i++)
		if (net->cap[i].from == 1)
			CHECK_EQ(net->cap[i].flags, 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* UDP over IPv6 with IPK_CAP_TX_CSUM_UDP6: the datagram leaves marked UDP_CSUM | IP6
 * with the pseudo-header sum in its field, the NIC (the harness's) completes it and
 * the peer takes the bytes. Without the cap: no mark. */
static int udp6_got;
static uint32_t udp6_len;

static void op_udp6(struct ipk_ctx *ctx, const struct ipk_atuple *t, void *pkt, uint32_t off,
                    uint32_t len, void *opaque)
{
	uint8_t buf[4000];

	(void)t;
	(void)opaque;
	if (len <= sizeof(buf) && ipk_pkt_copy(ctx, pkt, off, buf, len) == len &&
	    memcmp(buf, pay, len < sizeof(pay) ? len : sizeof(pay)) == 0) {
		udp6_got++;
		udp6_len = len;
	}
}

static void test_udp6_tx_csum_offload_marked_and_completed(void)
{
	struct hnet *net = open6(IPK_CAP_TX_CSUM_UDP6, 0, 0);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	struct ipk_addr to;
	int i, marked = 0, udp = 0;

	fill_pay();
	udp6_got = 0;
	b->ops.udp_recv6 = op_udp6;
	CHECK_EQ(ipk_udp_bind(b->ctx, ipk_htons(9)), IPK_OK);
	memset(&to, 0, sizeof(to));
	to.family = IPK_AF_INET6;
	memcpy(to.a, G2, 16);
	hnet_clear_cap(net);
	CHECK_EQ(ipk_udp_sendto_addr(a->ctx, ipk_htons(7), &to, ipk_htons(9), pay, 1000, net->now),
	         1000);
	hnet_settle(net);
	CHECK_EQ(udp6_got, 1);
	CHECK_EQ(udp6_len, 1000);
	for (i = 0; i < net->ncap; i++) {
		const struct hframe *h = &net->cap[i];

		if (h->from != 0 || ipk_rd16(h->b + 12) != IPK_ETHERTYPE_IP6 || h->b[20] != 17)
			continue;
		udp++;
		marked += h->flags == (IPK_TXOFF_UDP_CSUM | IPK_TXOFF_IP6);
	}
	CHECK_EQ(udp, 1);
	CHECK_EQ(marked, 1);
	CHECK_EQ(ipk_counters(b->ctx)->drop[IPK_DROP_UDP_CSUM], 0);
	/* the other way, no cap: not marked, still right */
	hnet_clear_cap(net);
	CHECK_EQ(ipk_udp_bind(a->ctx, ipk_htons(9)), IPK_OK);
	a->ops.udp_recv6 = op_udp6;
	memcpy(to.a, G1, 16);
	CHECK_EQ(ipk_udp_sendto_addr(b->ctx, ipk_htons(7), &to, ipk_htons(9), pay, 300, net->now),
	         300);
	hnet_settle(net);
	CHECK_EQ(udp6_got, 2);
	for (i = 0; i < net->ncap; i++)
		if (net->cap[i].from == 1)
			CHECK_EQ(net->cap[i].flags, 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* ---------------------------------------------------------------- ECN */

/* RFC 3168 §6.1.1: negotiated over IPv6, new data goes ECT(0) in the Traffic
 * Class; pure ACKs go Not-ECT (§6.1.4). */
static void test_tcp6_ecn_data_ect_acks_not(void)
{
	struct hnet *net = open6(0, 0, 1);
	struct hnode *a = net->nodes[0];
	int i, data = 0, ect = 0, acks = 0;
	uint32_t next = 0;

	CHECK(conn_of[0]->fl & IPK_TCPF_ECN);
	CHECK(conn_of[1]->fl & IPK_TCPF_ECN);
	fill_pay();
	hnet_clear_cap(net);
	CHECK_EQ(ipk_tcp_write(a->ctx, conn_of[0], pay, sizeof(pay), net->now), (int)sizeof(pay));
	for (i = 0; i < 20 && rxlen[1] < sizeof(pay); i++)
		hnet_advance(net, 10 * MS);
	CHECK_EQ(rxlen[1], sizeof(pay));
	for (i = 0; i < net->ncap; i++) {
		const uint8_t *f = net->cap[i].b;

		if (ipk_rd16(f + 12) != IPK_ETHERTYPE_IP6 || f[20] != 6)
			continue;
		if (net->cap[i].from == 0 && ipk_rd16(f + 18) > 20) {
			uint32_t seq = ipk_rd32(f + 54 + 4);

			/* new data ECT(0); a retransmission Not-ECT (§6.1.5) */
			if (data == 0 || ipk_seq_ge(seq, next)) {
				data++;
				ect += ecn_of(f) == IPK_ECN_ECT0;
				next = seq + ipk_rd16(f + 18) - 20u;
			} else {
				CHECK_EQ(ecn_of(f), 0);
			}
		} else if (net->cap[i].from == 1) {
			acks++;
			CHECK_EQ(ecn_of(f), 0);
		}
	}
	CHECK(data >= 2 && acks >= 1);
	CHECK_EQ(ect, data);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* RFC 3168 §6.1.3: a CE in the Traffic Class is echoed as ECE on every ACK until
 * a segment with CWR comes. */
static void test_tcp6_ecn_ce_echoed_as_ece_until_cwr(void)
{
	struct hnet *net = open6(0, 0, 1);
	struct hnode *b = net->nodes[1];
	struct ipk_conn *c = conn_of[0];
	static uint8_t f[2000];
	const uint8_t *ack;
	uint32_t len;

	net->cut = 1;
	hnet_clear_cap(net);
	len = seg6(f, c, IPK_ECN_CE, IPK_TCP_ACK, pay, 100, 0);
	hnode_inject(b, f, len);
	ack = last_tcp6(net, 1);
	CHECK(ack != NULL && (ack[54 + 13] & IPK_TCP_ECE));
	c->snd_nxt += 100; /* node 0's view of what it "sent" */
	hnet_clear_cap(net);
	len = seg6(f, c, IPK_ECN_ECT0, IPK_TCP_ACK | IPK_TCP_PSH, pay, 100, 0);
	hnode_inject(b, f, len);
	hnet_advance(net, 500 * MS); /* a delayed ACK goes out */
	ack = last_tcp6(net, 1);
	CHECK(ack != NULL && (ack[54 + 13] & IPK_TCP_ECE));
	c->snd_nxt += 100;
	hnet_clear_cap(net);
	len = seg6(f, c, IPK_ECN_ECT0, IPK_TCP_ACK | IPK_TCP_CWR | IPK_TCP_PSH, pay, 100, 0);
	hnode_inject(b, f, len);
	hnet_advance(net, 500 * MS);
	ack = last_tcp6(net, 1);
	CHECK(ack != NULL && !(ack[54 + 13] & IPK_TCP_ECE));
	c->snd_nxt -= 200;
	CHECK_EQ(rxlen[1], 300);
	net->cut = 0;
	hnet_free(net);
}

/* RFC 3168 §6.1.2: an ECE from the receiver halves the window once and the next
 * new data segment carries CWR, ECT(0) in its Traffic Class. */
static void test_tcp6_ecn_ece_reduces_then_cwr(void)
{
	struct hnet *net = open6(0, 0, 1);
	struct hnode *a = net->nodes[0];
	struct ipk_conn *c = conn_of[0];
	static uint8_t f[200];
	uint8_t m0[6], m1[6];
	uint32_t len, cwnd;
	const uint8_t *d;

	fill_pay();
	CHECK_EQ(ipk_tcp_write(a->ctx, c, pay, 1000, net->now), 1000);
	hnet_advance(net, 10 * MS);
	CHECK_EQ(rxlen[1], 1000);
	cwnd = c->cwnd;
	/* node 1's ACK of it with ECE, forged from node 1's connection */
	len = seg6(f, conn_of[1], 0, IPK_TCP_ACK | IPK_TCP_ECE, pay, 0, 0);
	hb_mac(m0, 0);
	hb_mac(m1, 1);
	hb_eth(f, m0, m1, IPK_ETHERTYPE_IP6);
	memcpy(f + 22, G2, 16);
	memcpy(f + 38, G1, 16);
	ipk_wr16(f + 54 + 16, 0);
	ipk_wr16(f + 54 + 16, ipk_csum_l4_6(G2, G1, IPK_IPPROTO_TCP, f + 54, 20));
	hnode_inject(a, f, len);
	CHECK(c->cwnd < cwnd || c->ssthresh < cwnd);
	hnet_clear_cap(net);
	CHECK_EQ(ipk_tcp_write(a->ctx, c, pay, 500, net->now), 500);
	hnet_advance(net, 10 * MS);
	d = NULL;
	{
		int i;

		for (i = 0; i < net->ncap && !d; i++)
			if (net->cap[i].from == 0 && ipk_rd16(net->cap[i].b + 18) > 20)
				d = net->cap[i].b;
	}
	CHECK(d != NULL && (d[54 + 13] & IPK_TCP_CWR) && ecn_of(d) == IPK_ECN_ECT0);
	CHECK_EQ(rxlen[1], 1500);
	hnet_free(net);
}

int main(void)
{
	RUN(test_tcp6_lro_chain_delivered_as_one_segment);
	RUN(test_tcp6_lro_malformed_chains_dropped);
	RUN(test_tcp6_rx_csum_verdicts_honoured_flat_and_chained);
	RUN(test_tcp6_tx_csum_offload_marked_and_completed);
	RUN(test_udp6_tx_csum_offload_marked_and_completed);
	RUN(test_tcp6_ecn_data_ect_acks_not);
	RUN(test_tcp6_ecn_ce_echoed_as_ece_until_cwr);
	RUN(test_tcp6_ecn_ece_reduces_then_cwr);
	return check_summary();
}
