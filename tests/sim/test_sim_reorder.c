/*
 * A path that reorders and never loses: 100 Mbit/s, 2 ms one way, 5% of the frames
 * in each direction held back 1 ms (about eight segments at this rate). Nothing is
 * lost, so every retransmission is spurious and comes back as a D-SACK.
 *
 * RFC 8985 §6.2: once the sender has seen reordering, RACK's reordering window alone
 * decides loss (it widens on each D-SACK round); RFC 6675's DupThresh count, which
 * marks a segment lost as soon as three later ones are SACKed, is not used any more.
 *
 * Regression: with the DupThresh rule always on, every held-back segment that three
 * others overtook was resent (here 211 and 227 retransmissions, nearly all spurious,
 * for ~570 frames held back; now 1); the same happened through ipk-relay against Linux.
 */
#include <stdio.h>
#include <string.h>

#include "world.h"

#define PORT 5001
#define BYTES (16ull << 20)
#define DUP_BYTES (64ull << 20)

struct run {
	struct world w;
	struct sim_bulk app_a, app_b;
	struct sim_bulk_conn *ca, *cb;
};

static struct run R; /* big: keep off the stack */

static int done(void *arg)
{
	struct run *r = (struct run *)arg;
	return r->ca && r->ca->closed;
}

static void reorder_run(uint64_t seed)
{
	struct sim_link_cfg lc;
	const struct ipk_counters *k;
	uint64_t held;

	memset(&R, 0, sizeof(R));
	sim_link_cfg_default(&lc);
	lc.delay_ns = SIM_MS(2);
	lc.reorder = 0.05;
	lc.reorder_delay_ns = SIM_MS(1);
	CHECK_EQ(world_init(&R.w, seed, &lc, 0), 0);
	CHECK_EQ(sim_bulk_init(&R.app_a, R.w.a, 0, 0, 1), 0);
	CHECK_EQ(sim_bulk_init(&R.app_b, R.w.b, ipk_htons(PORT), BYTES, 9), 0);
	sim_bulk_expect(&R.app_a, BYTES, 9);
	CHECK_EQ(sim_bulk_connect(&R.app_a, R.w.cb.ip4_be, ipk_htons(PORT), &R.ca), 0);
	CHECK_EQ(sim_run(R.w.s, SIM_SEC(60), done, &R), SIM_DONE);
	CHECK(R.ca && R.ca->closed && R.ca->why == IPK_CLOSE_NORMAL);
	CHECK_EQ(R.app_a.ok_transfers, 1); /* SHA-256 of the whole stream matched */
	k = sim_node_counters(R.w.b);      /* b sends the data */
	held = R.w.l->st[1].reordered;
	printf("  seed %llu: %llu frames held back, %llu retransmissions, %llu D-SACKs, "
	       "%llu recoveries, %llu RTOs\n", (unsigned long long)seed,
	       (unsigned long long)held, (unsigned long long)k->tcp_retransmits,
	       (unsigned long long)k->tcp_dsack_rx,
	       (unsigned long long)k->tcp_sack_recovery_episodes, (unsigned long long)k->tcp_rto);
	CHECK(held > 300); /* the reordering happened */
	CHECK_EQ(R.w.l->st[1].drop[SIM_LDROP_QUEUE] + R.w.l->st[1].drop[SIM_LDROP_LOSS], 0);
	/* a few while reo_wnd widens, not one per held-back frame */
	CHECK(k->tcp_retransmits <= held / 10u);
	CHECK_EQ(k->tcp_rto, 0);
	world_check_no_leak(&R.w);
	world_fini(&R.w);
}

static void test_established_reordering_resends_few(void)
{
	reorder_run(5);
	reorder_run(6);
}

/*
 * A queue in front of the reordering, as through ipk-relay to Linux: 1 Gbit/s, 20 us
 * one way, the default 1 MB queue, which the sender fills (SRTT grows to
 * milliseconds while min_RTT stays ~50 us), and on the data path alone 5% of the
 * frames held back 100 us (min_RTT / 4 is ~12 us).
 *
 * Regression (RFC 8985 §6.2, tcp_rack.c): held-back segments were all resent by the
 * DupThresh rule before they arrived, so reordering was never seen; the late
 * original's ACK, taken as its retransmission's RTT sample, moved RACK.xmit_ts past
 * the queued flight, which RACK marked lost (each spurious retransmission making
 * more); and reo_wnd grew by min_RTT / 4 per D-SACK round up to 16 steps only.
 * Before: 33 and 131 retransmissions; now 9 and 4.
 */
static void queue_run(uint64_t seed, uint64_t *rtx, uint64_t *held)
{
	struct sim_link_cfg lc, data;
	const struct ipk_counters *k;

	memset(&R, 0, sizeof(R));
	sim_link_cfg_default(&lc);
	lc.rate_bps = 1000000000ull;
	lc.delay_ns = SIM_US(20);
	data = lc;
	data.reorder = 0.05;
	data.reorder_delay_ns = SIM_US(100);
	CHECK_EQ(world_init(&R.w, seed, &lc, 0), 0);
	sim_link_set_cfg(R.w.l, 1, &data); /* b -> a carries the data */
	CHECK_EQ(sim_bulk_init(&R.app_a, R.w.a, 0, 0, 1), 0);
	CHECK_EQ(sim_bulk_init(&R.app_b, R.w.b, ipk_htons(PORT), BYTES, 9), 0);
	sim_bulk_expect(&R.app_a, BYTES, 9);
	CHECK_EQ(sim_bulk_connect(&R.app_a, R.w.cb.ip4_be, ipk_htons(PORT), &R.ca), 0);
	CHECK_EQ(sim_run(R.w.s, SIM_SEC(60), done, &R), SIM_DONE);
	CHECK(R.ca && R.ca->closed && R.ca->why == IPK_CLOSE_NORMAL);
	CHECK_EQ(R.app_a.ok_transfers, 1);
	k = sim_node_counters(R.w.b);
	*held = R.w.l->st[1].reordered;
	*rtx = k->tcp_retransmits;
	printf("  queue seed %llu: %llu frames held back, %llu retransmissions, %llu D-SACKs, "
	       "%llu recoveries, %llu RTOs, %llu queue drops\n", (unsigned long long)seed,
	       (unsigned long long)*held, (unsigned long long)k->tcp_retransmits,
	       (unsigned long long)k->tcp_dsack_rx,
	       (unsigned long long)k->tcp_sack_recovery_episodes, (unsigned long long)k->tcp_rto,
	       (unsigned long long)R.w.l->st[1].drop[SIM_LDROP_QUEUE]);
	world_check_no_leak(&R.w);
	world_fini(&R.w);
}

static void test_established_reordering_behind_queue_resends_few(void)
{
	uint64_t rtx, held;

	queue_run(7, &rtx, &held);
	CHECK(held > 300);
	CHECK(rtx <= held / 25u);
	queue_run(8, &rtx, &held);
	CHECK(held > 300);
	CHECK(rtx <= held / 25u);
}

/*
 * A path that never reorders: 10 Mbit/s, 25 ms one way, a drop-tail queue of 64
 * frames that slow start overflows, 1% of the frames duplicated each way, 64 MiB
 * each way at once. Neither sender may conclude that the path reorders.
 *
 * Regression (tcp_rack.c rtx_too_soon): a segment sent three times (its
 * retransmission lost, resent) got the ACK of its second send, whose TSecr is older
 * than the third send's TSval, and that was taken as its original arriving late;
 * RACK's reordering window then widened to SRTT and losses waited for RTOs (the
 * simulator matrix's 10M-50ms-dup1pct cell: 4 RTOs, 530 retransmissions, against
 * none and 132).
 */
static void dup_tweak(struct ipk_config *c, uint32_t index)
{
	(void)index;
	c->tcp_sndbuf = 256u << 10;
	c->tcp_rcvbuf = 256u << 10;
}

static int both_done(void *arg)
{
	struct run *r = (struct run *)arg;
	return r->ca && r->ca->closed && r->cb && r->cb->closed;
}

static void dup_run(uint64_t seed, uint64_t *seen, uint64_t *rtos)
{
	struct sim_link_cfg lc;
	const struct ipk_counters *ka, *kb;

	memset(&R, 0, sizeof(R));
	sim_link_cfg_default(&lc);
	lc.rate_bps = 10000000ull;
	lc.delay_ns = SIM_MS(25);
	lc.queue_bytes = 64u * 1514u;
	lc.dup = 0.01;
	world_cfg_tweak = dup_tweak;
	CHECK_EQ(world_init(&R.w, seed, &lc, 0), 0);
	world_cfg_tweak = NULL;
	/* data both ways at once, as the matrix does: each side fetches from the other */
	CHECK_EQ(sim_bulk_init(&R.app_a, R.w.a, ipk_htons(PORT), DUP_BYTES, 9), 0);
	CHECK_EQ(sim_bulk_init(&R.app_b, R.w.b, ipk_htons(PORT), DUP_BYTES, 9), 0);
	sim_bulk_expect(&R.app_a, DUP_BYTES, 9);
	sim_bulk_expect(&R.app_b, DUP_BYTES, 9);
	CHECK_EQ(sim_bulk_connect(&R.app_a, R.w.cb.ip4_be, ipk_htons(PORT), &R.ca), 0);
	CHECK_EQ(sim_bulk_connect(&R.app_b, R.w.ca.ip4_be, ipk_htons(PORT), &R.cb), 0);
	CHECK_EQ(sim_run(R.w.s, SIM_SEC(300), both_done, &R), SIM_DONE);
	CHECK_EQ(R.app_a.ok_transfers + R.app_b.ok_transfers, 2);
	ka = sim_node_counters(R.w.a);
	kb = sim_node_counters(R.w.b);
	*seen = ka->tcp_reordering_seen + kb->tcp_reordering_seen;
	*rtos = ka->tcp_rto + kb->tcp_rto;
	printf("  dup seed %llu: %llu + %llu retransmissions, %llu reordering seen, %llu RTOs\n",
	       (unsigned long long)seed, (unsigned long long)ka->tcp_retransmits,
	       (unsigned long long)kb->tcp_retransmits, (unsigned long long)*seen,
	       (unsigned long long)*rtos);
	world_check_no_leak(&R.w);
	world_fini(&R.w);
}

static void test_established_duplicating_path_shows_no_reordering(void)
{
	/* the seeds where a segment went three times (without the fix: reordering seen
	 * 8, 8 and 3 times, 8, 3 and 4 RTOs) */
	static const uint64_t seeds[] = {1, 4, 5};
	uint64_t seen, rtos;
	unsigned i;

	for (i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		dup_run(seeds[i], &seen, &rtos);
		CHECK_EQ(seen, 0);
		CHECK_EQ(rtos, 0);
	}
}

int main(void)
{
	RUN(test_established_reordering_resends_few);
	RUN(test_established_reordering_behind_queue_resends_few);
	RUN(test_established_duplicating_path_shows_no_reordering);
	return check_summary();
}
