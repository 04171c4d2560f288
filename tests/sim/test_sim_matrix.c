/*
 * Simulation matrix: 64 MiB each way between two engines over links of
 * 10/100/1000 Mbit/s, 1/10/50 ms RTT and 0, 0.1, 1, 5, 10% random loss, plus
 * bursty loss (Gilbert-Elliott), 5% reordering and 1% duplication. Every transfer
 * must end normally, with the SHA-256 of the stream on both sides, within a
 * virtual-time bound derived from a throughput model (see cell_bound_ns), and with
 * every pool back at its start value.
 *
 *   test_sim_matrix                 every cell (suite 'matrix', make sim-matrix)
 *   test_sim_matrix --subset        a representative subset, for a quick look
 *   test_sim_matrix --list          cell names
 *   ... --shard K/N                 only cells whose index is K mod N (parallel runs)
 *   test_sim_matrix --cell 100M-10ms-1pct [--seed N] [--pcap f.pcap] [-v]
 *   ... --no-timestamps [--no-frto]  both engines without RFC 7323 timestamps (F-RTO
 *                                    then decides on RTOs), with F-RTO off
 *
 * A cell's seed is fixed by its name (cell_seed), so a failure printed with its seed
 * reproduces exactly by rerunning that one cell.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "world.h"

#define PORT_AB 5001 /* B listens, A fetches */
#define PORT_BA 5002 /* A listens, B fetches */
#define MATRIX_BYTES (64ull << 20)
#define MSS 1460.0
#define WIRE_PER_SEG 1514.0 /* MSS + IPv4 + TCP + Ethernet headers */

enum impair { IMP_LOSS = 0, IMP_BURST, IMP_REORDER, IMP_DUP };

struct cell {
	char name[40];
	uint64_t rate_bps;
	uint32_t rtt_ms;
	uint32_t loss_ppm; /* random loss, per million frames */
	enum impair imp;
	int subset;        /* part of the --subset run */
};

static const uint64_t k_rates[] = {10000000ull, 100000000ull, 1000000000ull};
static const char *const k_rate_names[] = {"10M", "100M", "1G"};
static const uint32_t k_rtts[] = {1, 10, 50};
static const uint32_t k_loss_ppm[] = {0, 1000, 10000, 50000, 100000};
static const char *const k_loss_names[] = {"0pct", "0.1pct", "1pct", "5pct", "10pct"};
static const char *const k_imp_names[] = {"", "burst", "reorder5pct", "dup1pct"};

#define MAX_CELLS 96
static struct cell g_cells[MAX_CELLS];
static int g_ncells;
static int g_verbose;
static const char *g_pcap;
static uint64_t g_bytes = MATRIX_BYTES;
static const char *g_argv0 = "test_sim_matrix";
static int g_no_ts;   /* --no-timestamps: Eifel cannot run, F-RTO decides */
static int g_no_frto; /* --no-frto: tcp_frto = 0 */

/* The quick run: every loss rate on the middle link, the corners of the
 * rate x RTT plane at the loss rates that stress them, and each impairment once. */
static int cell_in_subset(int r, int d, int l, enum impair imp)
{
	if (imp != IMP_LOSS)
		return r == 1 && d == 1;
	if (r == 1 && d == 1)
		return 1;
	if (r == 2 && d == 0 && (l == 0 || l == 2))
		return 1; /* fast, short: 1G 1 ms */
	if (r == 2 && d == 2 && l == 1)
		return 1; /* big BDP: 1G 50 ms */
	if (r == 0 && d == 2 && l == 4)
		return 1; /* slow, long, 10% loss */
	return 0;
}

static void cell_add(int r, int d, int l, enum impair imp)
{
	struct cell *c = &g_cells[g_ncells++];

	memset(c, 0, sizeof(*c));
	c->rate_bps = k_rates[r];
	c->rtt_ms = k_rtts[d];
	c->imp = imp;
	c->subset = cell_in_subset(r, d, l, imp);
	if (imp == IMP_LOSS) {
		c->loss_ppm = k_loss_ppm[l];
		snprintf(c->name, sizeof(c->name), "%s-%ums-%s", k_rate_names[r], c->rtt_ms,
		         k_loss_names[l]);
	} else {
		snprintf(c->name, sizeof(c->name), "%s-%ums-%s", k_rate_names[r], c->rtt_ms,
		         k_imp_names[imp]);
	}
}

static void cells_build(void)
{
	int r, d, l, i;

	for (r = 0; r < 3; r++)
		for (d = 0; d < 3; d++) {
			for (l = 0; l < 5; l++)
				cell_add(r, d, l, IMP_LOSS);
			for (i = IMP_BURST; i <= IMP_DUP; i++)
				cell_add(r, d, 0, (enum impair)i);
		}
}

static const struct cell *cell_find(const char *name)
{
	int i;

	for (i = 0; i < g_ncells; i++)
		if (strcmp(g_cells[i].name, name) == 0)
			return &g_cells[i];
	return NULL;
}

/* FNV-1a of the name: a cell keeps its seed when cells are added or reordered. */
static uint64_t cell_seed(const struct cell *c)
{
	uint64_t h = 0xcbf29ce484222325ull;
	const char *p;

	for (p = c->name; *p; p++)
		h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
	return h & 0xffffffffull;
}

/* ------------------------------------------------------------ link and model */

/* Gilbert-Elliott: mean burst 4 frames, bad state 1/26 of the time, half lost in
 * it: about 1.9% of frames lost, in clumps. */
#define GE_P_GB 0.01
#define GE_P_BG 0.25
#define GE_LOSS_BAD 0.5

static double cell_loss_rate(const struct cell *c)
{
	switch (c->imp) {
	case IMP_BURST:
		return GE_P_GB / (GE_P_GB + GE_P_BG) * GE_LOSS_BAD;
	case IMP_REORDER:
		/* a segment held back past three others looks lost to a sender
		 * without reordering detection: count it as a loss event */
		return 0.05;
	default:
		return (double)c->loss_ppm / 1e6;
	}
}

static uint64_t cell_bdp(const struct cell *c)
{
	return c->rate_bps / 8u * c->rtt_ms / 1000u;
}

/* Buffers cover twice the path's BDP (so the window never limits a clean path),
 * at least the engine default, at most what window scale 7 can advertise. */
static uint32_t cell_buf(const struct cell *c)
{
	uint64_t b = 2 * cell_bdp(c);

	if (b < (256u << 10))
		b = 256u << 10;
	if (b > (8u << 20))
		b = 8u << 20;
	return (uint32_t)b;
}

static void cell_link(const struct cell *c, struct sim_link_cfg *lc)
{
	uint64_t q = cell_bdp(c);

	sim_link_cfg_default(lc);
	lc->rate_bps = c->rate_bps;
	lc->delay_ns = SIM_MS(c->rtt_ms) / 2u;
	/* one BDP of drop-tail queue, at least 64 frames */
	lc->queue_bytes = (uint32_t)(q > 64 * 1514 ? q : 64 * 1514);
	lc->loss = (double)c->loss_ppm / 1e6;
	switch (c->imp) {
	case IMP_BURST:
		lc->ge_p_gb = GE_P_GB;
		lc->ge_p_bg = GE_P_BG;
		lc->ge_loss_bad = GE_LOSS_BAD;
		break;
	case IMP_REORDER:
		lc->reorder = 0.05;
		/* held back by a quarter RTT (at least 1 ms): well past three segments */
		lc->reorder_delay_ns = SIM_MS(c->rtt_ms) / 4u > SIM_MS(1) ? SIM_MS(c->rtt_ms) / 4u
		                                                            : SIM_MS(1);
		break;
	case IMP_DUP:
		lc->dup = 0.01;
		break;
	default:
		break;
	}
}

/*
 * Virtual-time bound for one direction's transfer, in seconds:
 *
 *   T_model = bytes / min(link goodput, window / RTT, PFTK rate) + 30 RTT + 1 RTO
 *   bound   = 4 * T_model + 5 s
 *
 * The PFTK rate (Padhye et al., SIGCOMM 1998) is the Mathis model
 * MSS / (RTT * sqrt(2bp/3)) with the time spent in retransmission timeouts added:
 *   MSS / (RTT sqrt(2bp/3) + T0 min(1, 3 sqrt(3bp/8)) p (1 + 32 p^2)),
 * b = 2 segments per ACK, T0 = RTO = max(200 ms, RTT) + RTT. Mathis alone has no
 * timeout term, so at 5-10% loss on a 1 ms path (RTO 200x RTT) it predicts a rate
 * no TCP reaches; PFTK stays within a small factor of measured TCP. 30 RTT cover
 * the handshake and slow start; 4x and 5 s are the slack. A transfer that needs
 * longer fails the cell.
 */
static double cell_model_s(const struct cell *c, uint64_t bytes)
{
	double rtt = (double)c->rtt_ms / 1000.0;
	double p = cell_loss_rate(c), b = 2.0;
	double rate = (double)c->rate_bps / 8.0 * MSS / WIRE_PER_SEG;
	double wnd = (double)cell_buf(c) / rtt;
	double t0 = (rtt > 0.2 ? rtt : 0.2) + rtt;

	if (wnd < rate)
		rate = wnd;
	if (p > 0) {
		double den = rtt * sqrt(2 * b * p / 3) +
		             t0 * fmin(1.0, 3 * sqrt(3 * b * p / 8)) * p * (1 + 32 * p * p);
		double pftk = MSS / den;
		if (pftk < rate)
			rate = pftk;
	}
	return (double)bytes / rate + 30 * rtt + t0;
}

static double cell_bound_s(const struct cell *c, uint64_t bytes)
{
	return 4.0 * cell_model_s(c, bytes) + 5.0;
}

/* ------------------------------------------------------------ one run */

struct run {
	struct world w;
	struct sim_bulk app_a, app_b;
	struct sim_bulk_conn *ca, *cb;
	enum sim_status st;
	double cpu_s;
};

static struct run R; /* big: keep off the stack */

/* The streams do not depend on the cell seed (the link and node draws do), so their
 * digests are computed once per run; the servers skip hashing what they send. */
#define STREAM_AB 0x5a5a0001u /* served by B, fetched by A */
#define STREAM_BA 0x5a5a0002u

static void expect_cached(struct sim_bulk *app, uint64_t stream)
{
	static uint8_t digest[2][SHA256_DIGEST_LEN];
	static uint64_t have_bytes[2];
	int i = stream == STREAM_BA;

	if (have_bytes[i] != g_bytes) {
		sim_stream_digest(stream, g_bytes, digest[i]);
		have_bytes[i] = g_bytes;
	}
	app->expect_bytes = g_bytes;
	app->expect_seed = stream;
	memcpy(app->expect_digest, digest[i], SHA256_DIGEST_LEN);
}

static int run_done(void *arg)
{
	struct run *x = (struct run *)arg;
	return x->ca && x->ca->closed && x->cb && x->cb->closed;
}

static void run_cfg(struct ipk_config *cfg, const struct cell *c)
{
	/* TIME_WAIT must outlast the peer's backed-off RTO, or a lost last ACK turns
	 * its FIN retransmission into an RST (world_cfg's 2 s is too short at 5%
	 * loss: seen on 1G-50ms-5pct seed 2530330522) */
	cfg->tcp_time_wait_ns = SIM_SEC(60);
	cfg->tcp_sndbuf = cell_buf(c);
	cfg->tcp_rcvbuf = cell_buf(c);
	/* hold a full window of out-of-order segments */
	cfg->tcp_ooo_max = (uint16_t)(cell_buf(c) / 1460u > 64 ? cell_buf(c) / 1460u : 64);
	if (g_no_ts)
		cfg->tcp_timestamps = 0;
	if (g_no_frto)
		cfg->tcp_frto = 0;
}

/* -v: the loss-recovery counters of one sender, to trace a cell that moved. */
static void cell_counters(const char *who, const struct ipk_counters *k)
{
	printf("    %s: rto_episodes %llu sack_recoveries %llu tlp %llu spurious_rtx %llu "
	       "dsack_undo %llu rto_undo %llu frto_undo %llu\n",
	       who, (unsigned long long)k->tcp_rto_episodes,
	       (unsigned long long)k->tcp_sack_recovery_episodes,
	       (unsigned long long)k->tcp_tlp_probes, (unsigned long long)k->tcp_spurious_rtx,
	       (unsigned long long)k->tcp_dsack_undo, (unsigned long long)k->tcp_rto_undo,
	       (unsigned long long)k->tcp_frto_undo);
}

/* Returns the number of failed checks for the cell (0: passed). */
static int cell_run(const struct cell *c, uint64_t seed)
{
	struct run *x = &R;
	struct sim_link_cfg lc;
	struct sim_node_res res;
	double bound = cell_bound_s(c, g_bytes), t_a, t_b, t_run;
	uint64_t t_end = (uint64_t)(bound * 1e9);
	clock_t c0 = clock();
	int fails;
	const struct ipk_counters *ka, *kb;

	memset(x, 0, sizeof(*x));
	memset(&res, 0, sizeof(res));
	/* the send queue holds a window of packets; the receiver a window out of order */
	res.pkts = cell_buf(c) / 1024u + 4096u;
	res.pbs = res.pkts;
	cell_link(c, &lc);
	x->w.s = sim_create(seed);
	world_cfg(&x->w.ca, 1, 0);
	world_cfg(&x->w.cb, 2, 0);
	run_cfg(&x->w.ca, c);
	run_cfg(&x->w.cb, c);
	x->w.a = sim_node_create(x->w.s, &x->w.ca, &res);
	x->w.b = sim_node_create(x->w.s, &x->w.cb, &res);
	CHECK(x->w.a && x->w.b);
	if (!x->w.a || !x->w.b)
		return 1;
	x->w.l = sim_connect(x->w.s, x->w.a, x->w.b, &lc);
	CHECK(x->w.l != NULL);
	if (g_pcap)
		CHECK_EQ(sim_link_pcap(x->w.l, g_pcap), 0);
	CHECK_EQ(sim_bulk_init(&x->app_a, x->w.a, ipk_htons(PORT_BA), g_bytes, STREAM_BA), 0);
	CHECK_EQ(sim_bulk_init(&x->app_b, x->w.b, ipk_htons(PORT_AB), g_bytes, STREAM_AB), 0);
	x->app_a.no_tx_digest = 1;
	x->app_b.no_tx_digest = 1;
	expect_cached(&x->app_a, STREAM_AB);
	expect_cached(&x->app_b, STREAM_BA);
	CHECK_EQ(sim_bulk_connect(&x->app_a, x->w.cb.ip4_be, ipk_htons(PORT_AB), &x->ca), 0);
	CHECK_EQ(sim_bulk_connect(&x->app_b, x->w.ca.ip4_be, ipk_htons(PORT_BA), &x->cb), 0);
	x->st = sim_run(x->w.s, t_end, run_done, x);
	x->cpu_s = (double)(clock() - c0) / CLOCKS_PER_SEC;
	t_run = (double)x->w.s->now / 1e9;

	t_a = x->ca && x->ca->t_eof ? (double)(x->ca->t_eof - x->ca->t_start) / 1e9 : -1;
	t_b = x->cb && x->cb->t_eof ? (double)(x->cb->t_eof - x->cb->t_start) / 1e9 : -1;
	ka = sim_node_counters(x->w.a);
	kb = sim_node_counters(x->w.b);
	CHECK_EQ(x->st, SIM_DONE);
	CHECK(x->ca && x->ca->why == IPK_CLOSE_NORMAL);
	CHECK(x->cb && x->cb->why == IPK_CLOSE_NORMAL);
	CHECK_EQ(x->app_a.ok_transfers, 1);
	CHECK_EQ(x->app_b.ok_transfers, 1);
	CHECK_EQ(x->app_a.bad_transfers + x->app_b.bad_transfers, 0);
	if (x->st == SIM_DONE)
		world_check_no_leak(&x->w);
	fails = check_failed_now_;

	printf("%-22s %s seed %-10llu virt %8.2f s (A<-B %8.2f, B<-A %8.2f, bound %8.1f, "
	       "model %7.2f) rexmit %6llu/%-6llu rto %4llu/%-4llu cpu %5.2f s\n",
	       c->name, fails ? "FAIL" : "ok  ", (unsigned long long)seed,
	       t_run, t_a, t_b, bound, cell_model_s(c, g_bytes),
	       (unsigned long long)kb->tcp_retransmits, (unsigned long long)ka->tcp_retransmits,
	       (unsigned long long)kb->tcp_rto, (unsigned long long)ka->tcp_rto, x->cpu_s);
	if (fails || g_verbose) {
		printf("    status %s; A fetch closed %d why %d rx %llu; B fetch closed %d why %d "
		       "rx %llu\n",
		       sim_status_name(x->st), x->ca ? x->ca->closed : -1,
		       x->ca ? (int)x->ca->why : -1, (unsigned long long)x->app_a.rx_bytes,
		       x->cb ? x->cb->closed : -1, x->cb ? (int)x->cb->why : -1,
		       (unsigned long long)x->app_b.rx_bytes);
		cell_counters("B (sends A<-B)", kb);
		cell_counters("A (sends B<-A)", ka);
	}
	if (fails)
		printf("    rerun: %s --cell %s --seed %llu --pcap %s.pcap -v\n", g_argv0, c->name,
		       (unsigned long long)seed, c->name);
	fflush(stdout);
	world_fini(&x->w);
	return fails;
}

/* ------------------------------------------------------------ driver */

static int usage(void)
{
	fprintf(stderr, "usage: %s [--subset | --list | --cell NAME [--seed N]] [--shard K/N] "
	                "[--bytes N] [--pcap FILE] [--no-timestamps] [--no-frto] [-v]\n",
	        g_argv0);
	return 2;
}

int main(int argc, char **argv)
{
	const char *only = NULL;
	uint64_t seed = 0;
	int have_seed = 0, subset = 0, list = 0, i, ran = 0, bad = 0, idx = 0;
	unsigned shard_k = 0, shard_n = 1;
	clock_t c0 = clock();

	g_argv0 = argv[0];
	cells_build();
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--subset") == 0)
			subset = 1;
		else if (strcmp(argv[i], "--list") == 0)
			list = 1;
		else if (strcmp(argv[i], "--no-timestamps") == 0)
			g_no_ts = 1;
		else if (strcmp(argv[i], "--no-frto") == 0)
			g_no_frto = 1;
		else if (strcmp(argv[i], "-v") == 0)
			g_verbose = 1;
		else if (strcmp(argv[i], "--cell") == 0 && i + 1 < argc)
			only = argv[++i];
		else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
			seed = strtoull(argv[++i], NULL, 0);
			have_seed = 1;
		} else if (strcmp(argv[i], "--bytes") == 0 && i + 1 < argc)
			g_bytes = strtoull(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--shard") == 0 && i + 1 < argc) {
			if (sscanf(argv[++i], "%u/%u", &shard_k, &shard_n) != 2 || shard_n == 0 ||
			    shard_k >= shard_n)
				return usage();
		} else if (strcmp(argv[i], "--pcap") == 0 && i + 1 < argc)
			g_pcap = argv[++i];
		else
			return usage();
	}
	if (list) {
		for (i = 0; i < g_ncells; i++)
			printf("%s%s\n", g_cells[i].name, g_cells[i].subset ? " (subset)" : "");
		return 0;
	}
	if (only && !cell_find(only)) {
		fprintf(stderr, "no cell %s (see --list)\n", only);
		return 2;
	}
	if ((have_seed || g_pcap) && !only)
		return usage();
	printf("%llu bytes each way; bound = 4 x model + 5 s (see cell_model_s)\n",
	       (unsigned long long)g_bytes);
	for (i = 0; i < g_ncells; i++) {
		const struct cell *c = &g_cells[i];

		if (only ? strcmp(c->name, only) != 0 : (subset && !c->subset))
			continue;
		if ((unsigned)idx++ % shard_n != shard_k)
			continue;
		check_failed_now_ = 0;
		if (cell_run(c, have_seed ? seed : cell_seed(c))) {
			check_failed_++;
			bad++;
		} else {
			check_passed_++;
		}
		ran++;
	}
	printf("%d cells, %d failed, cpu %.1f s\n", ran, bad,
	       (double)(clock() - c0) / CLOCKS_PER_SEC);
	return check_summary();
}
