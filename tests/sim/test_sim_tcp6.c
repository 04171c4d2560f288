/*
 * TCP over IPv6 over the simulator (issue 19): handshake, then 16 MiB each way at
 * 0, 1 and 5% loss, every stream checked by SHA-256, pools back where they started.
 * The nodes run IPv6 only for these connections (2001:db8::1 and ::2, DAD first).
 */
#include <stdio.h>
#include <string.h>

#include "world.h"

#define PORT_AB 5001 /* B listens, A fetches */
#define PORT_BA 5002 /* A listens, B fetches */

static const uint8_t G[2][16] = {
	{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
	{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2},
};

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

struct xfer6 {
	struct world w;
	struct sim_bulk app_a, app_b;
	struct sim_bulk_conn *ca, *cb;
	enum sim_status st;
};

static struct xfer6 X;

static int done(void *arg)
{
	struct xfer6 *x = (struct xfer6 *)arg;
	return (!x->ca || x->ca->closed) && (!x->cb || x->cb->closed);
}

static void link_cfg(struct sim_link_cfg *lc, double loss)
{
	sim_link_cfg_default(lc);
	lc->rate_bps = 1000000000ull;
	lc->delay_ns = SIM_MS(1);
	lc->queue_bytes = 4u << 20;
	lc->loss = loss;
}

/* Both ways when bytes > 0 (B serves A, A serves B); the IPv6 addresses first
 * pass DAD (1 s of virtual time). */
static void xfer6_run(uint64_t seed, double loss, uint64_t bytes)
{
	struct sim_link_cfg lc;
	struct ipk_addr pa = addr6(1), pb = addr6(2);

	memset(&X, 0, sizeof(X));
	link_cfg(&lc, loss);
	world_cfg_tweak = cfg6;
	CHECK_EQ(world_init(&X.w, seed, &lc, 0), 0);
	world_cfg_tweak = NULL;
	sim_run(X.w.s, SIM_SEC(2), NULL, NULL);
	CHECK_EQ(sim_bulk_init(&X.app_a, X.w.a, ipk_htons(PORT_BA), bytes, seed + 1), 0);
	CHECK_EQ(sim_bulk_init(&X.app_b, X.w.b, ipk_htons(PORT_AB), bytes, seed + 2), 0);
	sim_bulk_expect(&X.app_a, bytes, seed + 2);
	sim_bulk_expect(&X.app_b, bytes, seed + 1);
	CHECK_EQ(sim_bulk_connect_addr(&X.app_a, &pb, ipk_htons(PORT_AB), &X.ca), 0);
	CHECK_EQ(sim_bulk_connect_addr(&X.app_b, &pa, ipk_htons(PORT_BA), &X.cb), 0);
	X.st = sim_run(X.w.s, SIM_SEC(900), done, &X);
	printf("  seed %llu loss %.0f%%: %s at %.3f s virtual; A rx %llu B rx %llu; rexmit %llu/%llu\n",
	       (unsigned long long)seed, loss * 100, sim_status_name(X.st), (double)X.w.s->now / 1e9,
	       (unsigned long long)X.app_a.rx_bytes, (unsigned long long)X.app_b.rx_bytes,
	       (unsigned long long)sim_node_counters(X.w.a)->tcp_retransmits,
	       (unsigned long long)sim_node_counters(X.w.b)->tcp_retransmits);
}

/* min_rx: IPv6 datagrams each node must have received (the transfer went over
 * IPv6, not IPv4). */
static void xfer6_check(uint64_t min_rx)
{
	CHECK_EQ(X.st, SIM_DONE);
	CHECK(X.ca && X.ca->closed && X.ca->why == IPK_CLOSE_NORMAL);
	CHECK(X.cb && X.cb->closed && X.cb->why == IPK_CLOSE_NORMAL);
	CHECK_EQ(X.app_a.ok_transfers, 1);
	CHECK_EQ(X.app_b.ok_transfers, 1);
	CHECK_EQ(X.app_a.bad_transfers + X.app_b.bad_transfers, 0);
	/* it was IPv6: frames counted by the IPv6 layer, none lost to checksums */
	CHECK(sim_node_counters(X.w.a)->ip6_rx > min_rx);
	CHECK(sim_node_counters(X.w.b)->ip6_rx > min_rx);
	/* every TCP segment came over IPv6 (ip6_rx also counts ND) */
	CHECK(sim_node_counters(X.w.a)->ip6_rx >= sim_node_counters(X.w.a)->tcp_rx_segs);
	CHECK(sim_node_counters(X.w.b)->ip6_rx >= sim_node_counters(X.w.b)->tcp_rx_segs);
	CHECK_EQ(sim_node_counters(X.w.a)->drop[IPK_DROP_TCP_CSUM], 0);
	CHECK_EQ(sim_node_counters(X.w.b)->drop[IPK_DROP_TCP_CSUM], 0);
	world_check_no_leak(&X.w);
	world_fini(&X.w);
}

static void test_tcp6_handshake_small_each_way(void)
{
	xfer6_run(1, 0.0, 1000);
	CHECK(X.ca && X.ca->connected && X.cb && X.cb->connected);
	CHECK_EQ(sim_node_counters(X.w.a)->tcp_active_opens, 1);
	CHECK_EQ(sim_node_counters(X.w.a)->tcp_passive_opens, 1);
	xfer6_check(5);
}

static void test_tcp6_16mib_each_way_clean(void)
{
	xfer6_run(11, 0.0, 16u << 20);
	CHECK_EQ(sim_node_counters(X.w.a)->tcp_retransmits, 0);
	CHECK_EQ(sim_node_counters(X.w.b)->tcp_retransmits, 0);
	xfer6_check(10000);
}

static void test_tcp6_16mib_each_way_loss_1pct(void)
{
	xfer6_run(12, 0.01, 16u << 20);
	CHECK(sim_node_counters(X.w.b)->tcp_retransmits > 0);
	xfer6_check(10000);
}

static void test_tcp6_16mib_each_way_loss_5pct(void)
{
	xfer6_run(13, 0.05, 16u << 20);
	CHECK(sim_node_counters(X.w.b)->tcp_retransmits > 0);
	xfer6_check(10000);
}

int main(void)
{
	RUN(test_tcp6_handshake_small_each_way);
	RUN(test_tcp6_16mib_each_way_clean);
	RUN(test_tcp6_16mib_each_way_loss_1pct);
	RUN(test_tcp6_16mib_each_way_loss_5pct);
	return check_summary();
}
