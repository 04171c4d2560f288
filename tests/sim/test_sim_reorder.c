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

struct run {
	struct world w;
	struct sim_bulk app_a, app_b;
	struct sim_bulk_conn *ca;
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

int main(void)
{
	RUN(test_established_reordering_resends_few);
	RUN(test_established_reordering_behind_queue_resends_few);
	return check_summary();
}
