/*
 * TCP over the simulator: handshake, bulk transfers verified by SHA-256 under loss,
 * reordering, duplication and corruption, closes, many connections, pool exhaustion,
 * offload capabilities, and seed reproducibility. Every test ends by proving the
 * pools are back to where they started.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "world.h"

#define PORT_AB 5001 /* B listens, A fetches */
#define PORT_BA 5002 /* A listens, B fetches */

static int g_verbose;

/* ------------------------------------------------------------ bulk transfers */

struct xfer {
	struct world w;
	struct sim_bulk app_a, app_b;
	struct sim_bulk_conn *ca, *cb; /* client slots: on A (fetching from B), on B */
	enum sim_status st;
	double cpu_s;
};

static int xfer_done(void *arg)
{
	struct xfer *x = (struct xfer *)arg;
	return (!x->ca || x->ca->closed) && (!x->cb || x->cb->closed);
}

/* Fetch `bytes` from B to A, and from A to B too when both_ways. Returns the status
 * of the run; results stay in x (world not torn down). */
static void xfer_run(struct xfer *x, uint64_t seed, const struct sim_link_cfg *lc, uint32_t caps,
                     uint64_t bytes, int both_ways)
{
	clock_t c0 = clock();

	memset(x, 0, sizeof(*x));
	CHECK_EQ(world_init(&x->w, seed, lc, caps), 0);
	CHECK_EQ(sim_bulk_init(&x->app_a, x->w.a, both_ways ? ipk_htons(PORT_BA) : 0, bytes, seed + 1), 0);
	CHECK_EQ(sim_bulk_init(&x->app_b, x->w.b, ipk_htons(PORT_AB), bytes, seed + 2), 0);
	sim_bulk_expect(&x->app_a, bytes, seed + 2);
	sim_bulk_expect(&x->app_b, bytes, seed + 1);
	CHECK_EQ(sim_bulk_connect(&x->app_a, x->w.cb.ip4_be, ipk_htons(PORT_AB), &x->ca), 0);
	if (both_ways)
		CHECK_EQ(sim_bulk_connect(&x->app_b, x->w.ca.ip4_be, ipk_htons(PORT_BA), &x->cb), 0);
	x->st = sim_run(x->w.s, SIM_SEC(900), xfer_done, x);
	x->cpu_s = (double)(clock() - c0) / CLOCKS_PER_SEC;
	if (g_verbose || x->st != SIM_DONE) {
		const struct ipk_counters *a = sim_node_counters(x->w.a), *b = sim_node_counters(x->w.b);
		printf("  seed %llu: %s at %.3f s virtual, %.2f s cpu; A rx %llu B rx %llu; "
		       "rexmit %llu/%llu rto %llu/%llu\n",
		       (unsigned long long)seed, sim_status_name(x->st), (double)x->w.s->now / 1e9,
		       x->cpu_s, (unsigned long long)x->app_a.rx_bytes,
		       (unsigned long long)x->app_b.rx_bytes,
		       (unsigned long long)a->tcp_retransmits, (unsigned long long)b->tcp_retransmits,
		       (unsigned long long)a->tcp_rto, (unsigned long long)b->tcp_rto);
	}
}

static void xfer_check_ok(struct xfer *x, int both_ways)
{
	if (x->ca && x->ca->why != IPK_CLOSE_NORMAL)
		printf("  A's fetch closed with reason %d\n", (int)x->ca->why);
	if (x->cb && x->cb->why != IPK_CLOSE_NORMAL)
		printf("  B's fetch closed with reason %d\n", (int)x->cb->why);
	CHECK_EQ(x->st, SIM_DONE);
	CHECK(x->ca && x->ca->closed && x->ca->why == IPK_CLOSE_NORMAL);
	CHECK_EQ(x->app_a.ok_transfers, 1);
	CHECK_EQ(x->app_a.bad_transfers, 0);
	if (both_ways) {
		CHECK(x->cb && x->cb->closed && x->cb->why == IPK_CLOSE_NORMAL);
		CHECK_EQ(x->app_b.ok_transfers, 1);
		CHECK_EQ(x->app_b.bad_transfers, 0);
	}
	CHECK_EQ(x->w.a->port.st.tx_oversize + x->w.b->port.st.tx_oversize, 0);
	CHECK_EQ(x->w.a->port.st.tx_bad_meta + x->w.b->port.st.tx_bad_meta, 0);
	CHECK_EQ(x->w.a->port.st.tx_chain_no_sg + x->w.b->port.st.tx_chain_no_sg, 0);
	world_check_no_leak(&x->w);
}

static void lossy_cfg(struct sim_link_cfg *lc)
{
	sim_link_cfg_default(lc);
	lc->rate_bps = 1000000000ull; /* 1 Gbit/s keeps 16 MiB transfers short in virtual time */
	lc->delay_ns = SIM_MS(1);
	lc->queue_bytes = 4u << 20;
}

static struct xfer X; /* big: keep off the stack */

static void test_established_transfer_16mib_each_way_clean(void)
{
	struct sim_link_cfg lc;

	lossy_cfg(&lc);
	xfer_run(&X, 11, &lc, 0, 16u << 20, 1);
	xfer_check_ok(&X, 1);
	CHECK_EQ(sim_node_counters(X.w.a)->tcp_retransmits, 0);
	CHECK_EQ(sim_node_counters(X.w.b)->tcp_retransmits, 0);
	world_fini(&X.w);
}

static void test_established_transfer_16mib_each_way_loss_1pct(void)
{
	struct sim_link_cfg lc;

	lossy_cfg(&lc);
	lc.loss = 0.01;
	xfer_run(&X, 12, &lc, 0, 16u << 20, 1);
	xfer_check_ok(&X, 1);
	CHECK(sim_node_counters(X.w.b)->tcp_retransmits > 0);
	world_fini(&X.w);
}

static void test_established_transfer_16mib_each_way_loss_5pct(void)
{
	struct sim_link_cfg lc;

	lossy_cfg(&lc);
	lc.loss = 0.05;
	xfer_run(&X, 13, &lc, 0, 16u << 20, 1);
	xfer_check_ok(&X, 1);
	world_fini(&X.w);
}

static void test_established_transfer_16mib_reorder_5pct(void)
{
	struct sim_link_cfg lc;

	lossy_cfg(&lc);
	lc.reorder = 0.05;
	lc.reorder_delay_ns = SIM_US(300);
	xfer_run(&X, 14, &lc, 0, 16u << 20, 1);
	xfer_check_ok(&X, 1);
	CHECK(X.w.l->st[1].reordered > 0);
	CHECK(sim_node_counters(X.w.a)->tcp_ooo_segs > 0);
	world_fini(&X.w);
}

static void test_established_transfer_16mib_dup_1pct(void)
{
	struct sim_link_cfg lc;

	lossy_cfg(&lc);
	lc.dup = 0.01;
	xfer_run(&X, 15, &lc, 0, 16u << 20, 1);
	xfer_check_ok(&X, 1);
	CHECK(X.w.l->st[1].duplicated > 0);
	CHECK(sim_node_counters(X.w.a)->tcp_dup_segs > 0);
	world_fini(&X.w);
}

static void test_established_transfer_16mib_corrupt_1pct_dropped_by_csum(void)
{
	struct sim_link_cfg lc;
	struct sim_link_stats t;
	uint64_t csum, all = 0;
	int i;

	lossy_cfg(&lc);
	lc.corrupt = 0.01;
	xfer_run(&X, 16, &lc, 0, 16u << 20, 1);
	xfer_check_ok(&X, 1);
	sim_link_totals(X.w.l, &t);
	csum = sim_node_csum_drops(X.w.a) + sim_node_csum_drops(X.w.b);
	for (i = 0; i < IPK_DROP__COUNT; i++)
		all += sim_node_counters(X.w.a)->drop[i] + sim_node_counters(X.w.b)->drop[i];
	CHECK(t.corrupted > 100);
	/* one flipped bit is always caught: most by a checksum, the rest by header checks */
	CHECK(csum > t.corrupted / 2);
	CHECK(csum <= t.corrupted);
	CHECK(all >= t.corrupted);
	world_fini(&X.w);
}

/* ------------------------------------------------------------ offloads */

#define ALL_CAPS                                                                       \
	(IPK_CAP_RX_CSUM_IP4 | IPK_CAP_RX_CSUM_L4 | IPK_CAP_TX_CSUM_IP4 | IPK_CAP_TX_CSUM_TCP | \
	 IPK_CAP_TX_CSUM_UDP | IPK_CAP_TSO | IPK_CAP_SG)

static void test_offload_all_caps_transfer_matches(void)
{
	struct sim_link_cfg lc;
	const struct sim_port_stats *pa, *pb;

	lossy_cfg(&lc);
	lc.loss = 0.01;
	lc.corrupt = 0.002;
	xfer_run(&X, 21, &lc, ALL_CAPS, 4u << 20, 1);
	xfer_check_ok(&X, 1);
	pa = &X.w.a->port.st;
	pb = &X.w.b->port.st;
	/* the engine used the NIC: checksums filled, TSO or SG exercised */
	CHECK(pa->tx_csum_filled + pa->tx_tso_segs > 0);
	CHECK(pb->tx_csum_filled + pb->tx_tso_segs > 0);
	if (g_verbose)
		printf("  caps: B tso frames %llu segs %llu, csum %llu, sg %llu, rx bad %llu\n",
		       (unsigned long long)pb->tx_tso_frames, (unsigned long long)pb->tx_tso_segs,
		       (unsigned long long)pb->tx_csum_filled, (unsigned long long)pb->tx_linearized,
		       (unsigned long long)(pa->rx_csum_bad + pb->rx_csum_bad));
	world_fini(&X.w);
}

static void test_offload_no_caps_transfer_matches_in_software(void)
{
	struct sim_link_cfg lc;

	lossy_cfg(&lc);
	lc.loss = 0.01;
	xfer_run(&X, 22, &lc, 0, 4u << 20, 1);
	xfer_check_ok(&X, 1);
	CHECK_EQ(X.w.a->port.st.tx_csum_filled + X.w.b->port.st.tx_csum_filled, 0);
	CHECK_EQ(X.w.a->port.st.tx_tso_frames + X.w.b->port.st.tx_tso_frames, 0);
	CHECK_EQ(X.w.a->port.st.tx_linearized + X.w.b->port.st.tx_linearized, 0);
	world_fini(&X.w);
}

/* ------------------------------------------------------------ determinism */

struct fingerprint {
	struct ipk_counters a, b;
	struct sim_link_stats l;
	uint8_t pcap[32];
	uint64_t now, events;
};

static void fingerprint_run(uint64_t seed, struct fingerprint *fp)
{
	struct sim_link_cfg lc;

	lossy_cfg(&lc);
	lc.loss = 0.02;
	lc.reorder = 0.02;
	lc.dup = 0.01;
	lc.corrupt = 0.005;
	memset(&X, 0, sizeof(X));
	CHECK_EQ(world_init(&X.w, seed, &lc, 0), 0);
	CHECK_EQ(sim_link_pcap(X.w.l, NULL), 0); /* hash only */
	CHECK_EQ(sim_bulk_init(&X.app_a, X.w.a, 0, 0, 0), 0);
	CHECK_EQ(sim_bulk_init(&X.app_b, X.w.b, ipk_htons(PORT_AB), 2u << 20, 5), 0);
	CHECK_EQ(sim_bulk_connect(&X.app_a, X.w.cb.ip4_be, ipk_htons(PORT_AB), &X.ca), 0);
	CHECK_EQ(sim_run(X.w.s, SIM_SEC(300), xfer_done, &X), SIM_DONE);
	memset(fp, 0, sizeof(*fp));
	fp->a = *sim_node_counters(X.w.a);
	fp->b = *sim_node_counters(X.w.b);
	sim_link_totals(X.w.l, &fp->l);
	sim_link_pcap_digest(X.w.l, fp->pcap);
	fp->now = X.w.s->now;
	fp->events = X.w.s->events;
	world_check_no_leak(&X.w);
	world_fini(&X.w);
}

static void test_same_seed_reproduces_exactly(void)
{
	static struct fingerprint f1, f2, f3;

	fingerprint_run(77, &f1);
	fingerprint_run(77, &f2);
	fingerprint_run(78, &f3);
	CHECK(memcmp(&f1.a, &f2.a, sizeof(f1.a)) == 0);
	CHECK(memcmp(&f1.b, &f2.b, sizeof(f1.b)) == 0);
	CHECK(memcmp(&f1.l, &f2.l, sizeof(f1.l)) == 0);
	CHECK(memcmp(f1.pcap, f2.pcap, 32) == 0);
	CHECK_EQ(f1.now, f2.now);
	CHECK_EQ(f1.events, f2.events);
	/* and the seed matters */
	CHECK(memcmp(f1.pcap, f3.pcap, 32) != 0);
}

int main(int argc, char **argv)
{
	clock_t c0 = clock();

	(void)argv;
	g_verbose = argc > 1;
	RUN(test_established_transfer_16mib_each_way_clean);
	RUN(test_established_transfer_16mib_each_way_loss_1pct);
	RUN(test_established_transfer_16mib_each_way_loss_5pct);
	RUN(test_established_transfer_16mib_reorder_5pct);
	RUN(test_established_transfer_16mib_dup_1pct);
	RUN(test_established_transfer_16mib_corrupt_1pct_dropped_by_csum);
	RUN(test_offload_all_caps_transfer_matches);
	RUN(test_offload_no_caps_transfer_matches_in_software);
	RUN(test_same_seed_reproduces_exactly);
	printf("cpu %.2f s\n", (double)(clock() - c0) / CLOCKS_PER_SEC);
	return check_summary();
}
