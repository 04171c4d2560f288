/*
 * Path MTU discovery over IPv6 through a smaller link (issue 19, RFC 8201).
 *
 * A --- [R] --- B: R is a test router between two sim links whose far side has an
 * MTU of 1280. Both nodes run a 1500-byte link, so their first TCP segments are
 * too big for R; R drops each such datagram and answers its sender with an ICMPv6
 * Packet Too Big (MTU 1280, as much of the datagram quoted as fits, RFC 4443 §3.2).
 * The transfer (16 MiB each way) must complete with the streams' SHA-256 intact,
 * each node's path MTU lowered once and its connection's MSS with it, and R must
 * stop seeing oversized datagrams after a window's worth.
 * R forwards frames unchanged otherwise (the nodes share 2001:db8::/64, so ND
 * goes through it as through a switch).
 */
#include <stdio.h>
#include <string.h>

#include "frames.h"
#include "world.h"

#define PORT_AB 5001
#define PORT_BA 5002
#define SMALL_MTU 1280u

static const uint8_t G[2][16] = {
	{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
	{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2},
};
static const uint8_t R_IP[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xfe};
static const uint8_t R_MAC[6] = {0x02, 0, 0, 0, 0, 0xfe};

struct router {
	struct sim_port *pa, *pb; /* linked to A, to B */
	uint64_t fwd, ptb_sent, ptb_after; /* ptb_after: PTBs once both MSSs dropped */
	int armed;                /* set by the test once the nodes saw their PTB */
};

static struct router R;

static void cfg6(struct ipk_config *c, uint32_t index)
{
	c->ip6_enable = 1;
	memcpy(c->ip6_addr, G[(index - 1u) & 1u], 16);
}

static struct ipk_addr addr6(uint32_t index)
{
	struct ipk_addr a;

	memset(&a, 0, sizeof(a));
	a.family = IPK_AF_INET6;
	memcpy(a.a, G[(index - 1u) & 1u], 16);
	return a;
}

/* ICMPv6 checksum: pseudo-header (RFC 8200 §8.1) then the message. */
static uint16_t icmp6_csum(const uint8_t src[16], const uint8_t dst[16], const uint8_t *m,
                           uint32_t len)
{
	uint8_t ph[8] = {0};
	uint32_t s;

	tf_wr32(ph, len);
	ph[7] = 58;
	s = sim_csum_add(0, src, 16);
	s = sim_csum_add(s, dst, 16);
	s = sim_csum_add(s, ph, 8);
	return sim_csum_fold(sim_csum_add(s, m, len));
}

/* Packet Too Big about the IPv6 datagram in frame f, back out of port p. */
static void send_ptb(struct sim_port *p, const uint8_t *f, uint32_t len)
{
	uint8_t out[14 + SMALL_MTU];
	uint32_t quote = len - 14, mlen;
	uint8_t *ip = out + 14, *m = ip + 40;

	if (quote > SMALL_MTU - 48)
		quote = SMALL_MTU - 48;
	mlen = 8 + quote;
	tf_eth(out, f + 6, R_MAC, 0x86dd);
	memset(ip, 0, 40);
	ip[0] = 0x60;
	tf_wr16(ip + 4, (uint16_t)mlen);
	ip[6] = 58;
	ip[7] = 64;
	memcpy(ip + 8, R_IP, 16);
	memcpy(ip + 24, f + 14 + 8, 16); /* to the datagram's source */
	m[0] = 2;                        /* Packet Too Big, code 0 */
	m[1] = 0;
	m[2] = m[3] = 0;
	tf_wr32(m + 4, SMALL_MTU);
	memcpy(m + 8, f + 14, quote);
	tf_wr16(m + 2, icmp6_csum(ip + 8, ip + 24, m, mlen));
	CHECK_EQ(sim_port_inject(p, out, 14 + 40 + mlen), 0);
}

static void r_rx(struct sim_port *p, const uint8_t *f, uint32_t len, void *arg)
{
	struct router *r = (struct router *)arg;
	struct sim_port *out = p == r->pa ? r->pb : r->pa;

	if (len > 14 + SMALL_MTU && tf_rd16(f + 12) == 0x86dd) {
		if (r->armed)
			r->ptb_after++;
		r->ptb_sent++;
		send_ptb(p, f, len);
		return;
	}
	r->fwd++;
	sim_port_inject(out, f, len);
}

struct run {
	struct sim *s;
	struct sim_node *a, *b;
	struct sim_bulk app_a, app_b;
	struct sim_bulk_conn *ca, *cb;
};

static struct run X;

static int done(void *arg)
{
	struct run *x = (struct run *)arg;
	return x->ca && x->ca->closed && x->cb && x->cb->closed;
}

static int idle(void *arg)
{
	struct run *x = (struct run *)arg;
	return node_idle(x->a) && node_idle(x->b);
}

/* Both nodes' connections had their MSS lowered: from here on no oversized
 * datagram should reach R but those already in flight. */
static void arm(struct sim *s, void *arg)
{
	(void)arg;
	if (sim_node_counters(X.a)->tcp6_pmtu_mss && sim_node_counters(X.b)->tcp6_pmtu_mss) {
		R.armed = 1;
		return;
	}
	sim_at(s, s->now + SIM_MS(1), arm, NULL);
}

static void run_pmtu(uint64_t seed, uint64_t bytes)
{
	struct ipk_config ca, cb;
	struct sim_link_cfg lc;
	struct ipk_addr pa = addr6(1), pb = addr6(2);
	enum sim_status st;

	memset(&X, 0, sizeof(X));
	memset(&R, 0, sizeof(R));
	sim_link_cfg_default(&lc);
	lc.rate_bps = 1000000000ull;
	lc.delay_ns = SIM_MS(1);
	lc.queue_bytes = 4u << 20;
	X.s = sim_create(seed);
	world_cfg(&ca, 1, 0);
	world_cfg(&cb, 2, 0);
	cfg6(&ca, 1);
	cfg6(&cb, 2);
	X.a = sim_node_create(X.s, &ca, NULL);
	X.b = sim_node_create(X.s, &cb, NULL);
	R.pa = sim_port_raw(X.s, IPK_LINK_ETH, 1500, r_rx, &R);
	R.pb = sim_port_raw(X.s, IPK_LINK_ETH, 1500, r_rx, &R);
	CHECK(X.a && X.b && R.pa && R.pb);
	CHECK(sim_link_create(X.s, &X.a->port, R.pa, &lc) != NULL);
	CHECK(sim_link_create(X.s, R.pb, &X.b->port, &lc) != NULL);
	sim_run(X.s, SIM_SEC(2), NULL, NULL); /* DAD */
	CHECK_EQ(sim_bulk_init(&X.app_a, X.a, ipk_htons(PORT_BA), bytes, seed + 1), 0);
	CHECK_EQ(sim_bulk_init(&X.app_b, X.b, ipk_htons(PORT_AB), bytes, seed + 2), 0);
	sim_bulk_expect(&X.app_a, bytes, seed + 2);
	sim_bulk_expect(&X.app_b, bytes, seed + 1);
	CHECK_EQ(sim_bulk_connect_addr(&X.app_a, &pb, ipk_htons(PORT_AB), &X.ca), 0);
	CHECK_EQ(sim_bulk_connect_addr(&X.app_b, &pa, ipk_htons(PORT_BA), &X.cb), 0);
	sim_node_kick(X.a);
	sim_node_kick(X.b);
	sim_at(X.s, X.s->now, arm, NULL);
	st = sim_run(X.s, X.s->now + SIM_SEC(300), done, &X);
	printf("  seed %llu: %s at %.3f s; A rx %llu B rx %llu; fwd %llu PTB %llu (after MSS cut %llu);"
	       " pmtu lowered %llu/%llu, mss %llu/%llu\n",
	       (unsigned long long)seed, sim_status_name(st), (double)X.s->now / 1e9,
	       (unsigned long long)X.app_a.rx_bytes, (unsigned long long)X.app_b.rx_bytes,
	       (unsigned long long)R.fwd, (unsigned long long)R.ptb_sent,
	       (unsigned long long)R.ptb_after,
	       (unsigned long long)sim_node_counters(X.a)->ip6_pmtu_lowered,
	       (unsigned long long)sim_node_counters(X.b)->ip6_pmtu_lowered,
	       (unsigned long long)sim_node_counters(X.a)->tcp6_pmtu_mss,
	       (unsigned long long)sim_node_counters(X.b)->tcp6_pmtu_mss);
	CHECK_EQ(st, SIM_DONE);
}

/* The transfer completes through the 1280-byte link, SHA-256 intact both ways. */
static void test_pmtu6_tcp_through_smaller_link_16mib_each_way(void)
{
	uint64_t bytes = 16u << 20;

	run_pmtu(31, bytes);
	CHECK(X.ca && X.ca->why == IPK_CLOSE_NORMAL);
	CHECK(X.cb && X.cb->why == IPK_CLOSE_NORMAL);
	CHECK_EQ(X.app_a.ok_transfers, 1);
	CHECK_EQ(X.app_b.ok_transfers, 1);
	CHECK_EQ(X.app_a.bad_transfers + X.app_b.bad_transfers, 0);
	/* each node learnt the path MTU once, and its connection's MSS followed */
	CHECK_EQ(sim_node_counters(X.a)->ip6_pmtu_lowered, 1);
	CHECK_EQ(sim_node_counters(X.b)->ip6_pmtu_lowered, 1);
	CHECK(sim_node_counters(X.a)->tcp6_pmtu_mss >= 1);
	CHECK(sim_node_counters(X.b)->tcp6_pmtu_mss >= 1);
	CHECK(R.ptb_sent >= 2);
	/* after the cut, only what was already in flight can be too big: far fewer
	 * than the ~14,000 segments each way 16 MiB takes at 1220 bytes */
	CHECK(R.armed);
	CHECK(R.ptb_after < 400);
	sim_run(X.s, X.s->now + SIM_SEC(120), idle, &X);
	CHECK(node_idle(X.a) && node_idle(X.b));
	sim_destroy(X.s);
}

int main(void)
{
	RUN(test_pmtu6_tcp_through_smaller_link_16mib_each_way);
	return check_summary();
}
