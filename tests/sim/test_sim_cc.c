/*
 * CUBIC (RFC 9438) against NewReno on the same path, side by side in one run:
 * 100 Mbit/s, 20 ms RTT, a drop-tail queue of one bandwidth-delay product and 0.1%
 * random loss. Same seed, same link, same transfer; goodput is compared after the
 * same virtual time, then both transfers must complete with the right SHA-256.
 *
 * At this loss rate and RTT CUBIC runs mostly in its Reno-friendly region (RFC 9438
 * §4.3), so the gain comes from beta 0.7 and the concave climb back to W_max; one
 * seed's losses can favour either side, so the comparison sums several seeds, each
 * run on both algorithms.
 */
#include <stdio.h>
#include <string.h>

#include "world.h"

#define PORT 5001
#define BYTES (48ull << 20)
#define SAMPLE_NS SIM_SEC(8)

static unsigned g_cc;

static void cc_tweak(struct ipk_config *c, uint32_t index)
{
	(void)index;
	c->tcp_cc = (uint8_t)g_cc;
	/* windows well above the 250 KB BDP, so cwnd alone limits the flow */
	c->tcp_sndbuf = 4u << 20;
	c->tcp_rcvbuf = 4u << 20;
}

struct run {
	struct world w;
	struct sim_bulk app_a, app_b;
	struct sim_bulk_conn *ca;
	uint64_t at_sample;        /* bytes A received by SAMPLE_NS */
	enum sim_status st;
	uint64_t rexmit, rto;
};

static int done(void *arg)
{
	struct run *r = (struct run *)arg;
	return r->ca && r->ca->closed;
}

static void run_cc(struct run *r, unsigned cc, double loss, uint64_t seed)
{
	struct sim_link_cfg lc;

	memset(r, 0, sizeof(*r));
	sim_link_cfg_default(&lc);
	lc.rate_bps = 100000000ull;
	lc.delay_ns = SIM_MS(10);
	lc.queue_bytes = 250000;
	lc.loss = loss;
	g_cc = cc;
	world_cfg_tweak = cc_tweak;
	CHECK_EQ(world_init(&r->w, seed, &lc, 0), 0);
	world_cfg_tweak = NULL;
	CHECK_EQ(sim_bulk_init(&r->app_a, r->w.a, 0, 0, 1), 0);
	CHECK_EQ(sim_bulk_init(&r->app_b, r->w.b, ipk_htons(PORT), BYTES, 5), 0);
	sim_bulk_expect(&r->app_a, BYTES, 5);
	CHECK_EQ(sim_bulk_connect(&r->app_a, r->w.cb.ip4_be, ipk_htons(PORT), &r->ca), 0);
	sim_run(r->w.s, SAMPLE_NS, done, r);
	r->at_sample = r->app_a.rx_bytes;
	r->st = sim_run(r->w.s, SIM_SEC(600), done, r);
	r->rexmit = sim_node_counters(r->w.b)->tcp_retransmits;
	r->rto = sim_node_counters(r->w.b)->tcp_rto;
	CHECK_EQ(r->st, SIM_DONE);
	CHECK(r->ca && r->ca->closed && r->ca->why == IPK_CLOSE_NORMAL);
	CHECK_EQ(r->app_a.ok_transfers, 1); /* SHA-256 of the whole stream matched */
	CHECK_EQ(r->app_a.bad_transfers, 0);
}

static double mbps(uint64_t bytes, uint64_t ns)
{
	return (double)bytes * 8.0 / ((double)ns / 1e9) / 1e6;
}

static struct run R_reno, R_cubic; /* big: keep off the stack */

#define NSEEDS 6

static void compare(double loss, double min_ratio)
{
	uint64_t seed, sum_reno = 0, sum_cubic = 0;
	double ratio;

	for (seed = 1; seed <= NSEEDS; seed++) {
		run_cc(&R_reno, IPK_CC_NEWRENO, loss, seed);
		run_cc(&R_cubic, IPK_CC_CUBIC, loss, seed);
		printf("  seed %llu: first %.0f s NewReno %.1f Mbit/s, CUBIC %.1f Mbit/s; 48 MiB done "
		       "at %.2f s / %.2f s; retransmits %llu / %llu, RTOs %llu / %llu\n",
		       (unsigned long long)seed, SAMPLE_NS / 1e9, mbps(R_reno.at_sample, SAMPLE_NS),
		       mbps(R_cubic.at_sample, SAMPLE_NS), R_reno.ca->t_closed / 1e9,
		       R_cubic.ca->t_closed / 1e9, (unsigned long long)R_reno.rexmit,
		       (unsigned long long)R_cubic.rexmit, (unsigned long long)R_reno.rto,
		       (unsigned long long)R_cubic.rto);
		sum_reno += R_reno.at_sample;
		sum_cubic += R_cubic.at_sample;
		world_check_no_leak(&R_reno.w);
		world_check_no_leak(&R_cubic.w);
		world_fini(&R_reno.w);
		world_fini(&R_cubic.w);
	}
	ratio = (double)sum_cubic / (double)sum_reno;
	/* Mathis et al.: MSS/RTT * 1.22/sqrt(p) for Reno-style AIMD */
	printf("  loss %.2f%%, mean goodput over the first %.0f s: NewReno %.1f Mbit/s, CUBIC %.1f "
	       "Mbit/s, ratio %.2f (Mathis bound %.1f Mbit/s)\n",
	       loss * 100, SAMPLE_NS / 1e9, mbps(sum_reno / NSEEDS, SAMPLE_NS),
	       mbps(sum_cubic / NSEEDS, SAMPLE_NS), ratio, 1460 * 8 / 0.02 * 1.22 / 0.0316228 / 1e6);
	CHECK(ratio >= min_ratio);
}

static void test_established_cubic_beats_newreno_100mbit_20ms_loss_0_1pct(void)
{
	compare(0.001, 1.05);
}

int main(void)
{
	RUN(test_established_cubic_beats_newreno_100mbit_20ms_loss_0_1pct);
	return check_summary();
}
