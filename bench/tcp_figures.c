/*
 * ipkit-tcp-figures: TCP figures in the simulator, over one 1 Gbit/s link with a
 * 10 ms RTT (5 ms each way, one BDP of drop-tail queue), one bulk transfer from B
 * to A. Loss, when set, hits the data direction only, so p is the p of the models.
 *
 *  1. clean path: goodput after slow start as a share of the link rate;
 *  2. 1% random loss: NewReno and CUBIC goodput as a multiple of the Mathis bound
 *     MSS/RTT * 1.22/sqrt(p);
 *  3. loss-recovery episodes that needed an RTO, as a share of all episodes, for
 *     SACK and non-SACK peers.
 *
 *   ipkit-tcp-figures [--out docs/tcp-figures.md] [--seed N]
 *
 * Prints a Markdown table (and writes it to --out). Figures, not a test: it never
 * fails on a number, only when a transfer does not complete. What --out's file holds
 * from a line FIG_KEEP_MARK on (the relay figures of tests/relay/relay_figures.py,
 * measured on real stacks) is kept after the new tables.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps.h"
#include "sim.h"

#ifndef FIG_HAVE_SACK
#define FIG_HAVE_SACK 1
#endif
#ifndef FIG_HAVE_CC
#define FIG_HAVE_CC 1
#endif
#ifndef FIG_HAVE_RTO_EPISODES
#define FIG_HAVE_RTO_EPISODES 1
#endif
#ifndef FIG_HAVE_SACK_EPISODES
#define FIG_HAVE_SACK_EPISODES 1
#endif

#define FIG_RATE 1000000000ull
#define FIG_RTT_MS 10u
#define FIG_PORT 5001
#define FIG_STREAM 0x5a5a0003u
#define FIG_BUF (4u << 20)
#define CC_NEWRENO IPK_CC_NEWRENO
#define CC_CUBIC IPK_CC_CUBIC

struct fig_case {
	double loss;       /* random loss, data direction */
	int burst;         /* Gilbert-Elliott bursts instead */
	unsigned cc;       /* CC_* */
	int sack;          /* the receiving peer offers SACK */
	uint64_t bytes;
	uint64_t seed;
};

struct fig_res {
	int ok;
	uint32_t mss;
	double t_total;     /* connected -> end of stream, s */
	double t_ss;        /* end of slow start (first congestion response), s */
	uint64_t rx_ss;     /* bytes received by then */
	double goodput;     /* bytes/s over the whole transfer */
	double goodput_ss;  /* bytes/s after slow start */
	uint64_t rto, rto_ep, fr, sack_ep;
	double cpu_s;
};

struct fig_run {
	struct sim *s;
	struct sim_node *a, *b;
	struct sim_bulk app_a, app_b;
	struct sim_bulk_conn *ca;
	struct sim_link *l;
	uint64_t trace_bytes;   /* data-direction bytes delivered at the last trace line */
	uint32_t ssthresh0;
	int ss_over;
	struct fig_res *r;
};

static struct fig_run F; /* big: keep off the stack */
/* --trace MS: the clean-path runs print one line per MS ms of virtual time (link
 * utilisation of the data direction, cwnd, ssthresh, bytes in flight, SACKed bytes,
 * queue drops, retransmissions) to stderr, to see where the link goes idle. */
static unsigned g_trace_ms;
static int g_clean_only; /* --clean-only: table 1 alone (not for docs/) */
static int g_tracing;

static int fig_done(void *arg)
{
	struct fig_run *f = (struct fig_run *)arg;
	return f->ca && f->ca->closed;
}

static struct ipk_conn *fig_sender(struct fig_run *f)
{
	return f->app_b.conns[0].in_use ? f->app_b.conns[0].c : NULL;
}

static void fig_trace(struct sim *s, struct fig_run *f, struct ipk_conn *c)
{
	const struct sim_link_stats *st = &f->l->st[1];
	const struct ipk_counters *k = sim_node_counters(f->b);
	struct ipk_tcp_info ti;
	double util;

	if (ipk_tcp_info(c, &ti) != IPK_OK)
		return;
	util = (double)(st->delivered_bytes - f->trace_bytes) * 8.0 /
	       ((double)FIG_RATE * g_trace_ms / 1000.0);
	f->trace_bytes = st->delivered_bytes;
	fprintf(stderr, "t=%.3f util=%5.1f%% cwnd=%u ssthresh=%u inflight=%u sacked=%u "
	        "snd_wnd=%u qdrop=%llu rtx=%llu srtt_us=%llu\n",
	        (double)s->now / 1e9, util * 100.0, ti.cwnd, ti.ssthresh, ti.inflight,
	        ti.sacked_bytes, ti.snd_wnd, (unsigned long long)st->drop[SIM_LDROP_QUEUE],
	        (unsigned long long)k->tcp_retransmits, (unsigned long long)(ti.srtt_ns / 1000u));
}

/* Every millisecond: note when the sender first answered congestion (ssthresh
 * fell below its first value), which is where slow start ended. */
static void fig_sample(struct sim *s, void *arg)
{
	struct fig_run *f = (struct fig_run *)arg;
	struct ipk_conn *c = fig_sender(f);
	struct ipk_tcp_info ti;

	if (c && ipk_tcp_info(c, &ti) == IPK_OK && ti.state == IPK_TCP_ESTABLISHED) {
		if (!f->r->mss)
			f->r->mss = ti.mss;
		if (!f->ssthresh0)
			f->ssthresh0 = ti.ssthresh;
		else if (!f->ss_over && (ti.ssthresh < f->ssthresh0 || ti.retransmits > 0)) {
			f->ss_over = 1;
			f->r->t_ss = (double)(s->now - f->ca->t_connected) / 1e9;
			f->r->rx_ss = f->app_a.rx_bytes;
		}
	}
	if (g_tracing && c && (s->now / SIM_MS(1)) % g_trace_ms == 0)
		fig_trace(s, f, c);
	if (!fig_done(f))
		sim_at(s, s->now + SIM_MS(1), fig_sample, f);
}

static void fig_node_cfg(struct ipk_config *c, uint32_t index, const struct fig_case *fc,
                         int receiver)
{
	sim_node_config(c, index);
	c->tcp_time_wait_ns = SIM_SEC(2);
	c->tcp_sndbuf = FIG_BUF;
	c->tcp_rcvbuf = FIG_BUF;
	c->tcp_ooo_max = FIG_BUF / 1460u;
#if FIG_HAVE_SACK
	if (receiver)
		c->tcp_sack = (uint8_t)(fc->sack != 0);
#endif
#if FIG_HAVE_CC
	if (!receiver)
		c->tcp_cc = (uint8_t)fc->cc;
#endif
	(void)fc;
	(void)receiver;
}

static void fig_run(const struct fig_case *fc, struct fig_res *r)
{
	struct fig_run *f = &F;
	struct ipk_config ca, cb;
	struct sim_link_cfg lc;
	struct sim_link *l;
	struct sim_node_res res;
	const struct ipk_counters *k;
	uint8_t digest[SHA256_DIGEST_LEN];
	clock_t c0 = clock();
	enum sim_status st;

	memset(f, 0, sizeof(*f));
	memset(r, 0, sizeof(*r));
	memset(&res, 0, sizeof(res));
	f->r = r;
	res.pkts = FIG_BUF / 1024u + 4096u;
	res.pbs = res.pkts;
	f->s = sim_create(fc->seed);
	fig_node_cfg(&ca, 1, fc, 1);
	fig_node_cfg(&cb, 2, fc, 0);
	f->a = sim_node_create(f->s, &ca, &res);
	f->b = sim_node_create(f->s, &cb, &res);
	if (!f->a || !f->b) {
		sim_destroy(f->s);
		return;
	}
	sim_link_cfg_default(&lc);
	lc.rate_bps = FIG_RATE;
	lc.delay_ns = SIM_MS(FIG_RTT_MS) / 2u;
	lc.queue_bytes = (uint32_t)(FIG_RATE / 8u * FIG_RTT_MS / 1000u);
	l = sim_connect(f->s, f->a, f->b, &lc);
	f->l = l;
	lc.loss = fc->loss;
	if (fc->burst) {
		lc.ge_p_gb = 0.01;
		lc.ge_p_bg = 0.25;
		lc.ge_loss_bad = 0.5;
	}
	sim_link_set_cfg(l, 1, &lc); /* B -> A carries the data */
	sim_bulk_init(&f->app_a, f->a, 0, 0, 0);
	sim_bulk_init(&f->app_b, f->b, ipk_htons(FIG_PORT), fc->bytes, FIG_STREAM);
	f->app_b.no_tx_digest = 1;
	sim_stream_digest(FIG_STREAM, fc->bytes, digest);
	f->app_a.expect_bytes = fc->bytes;
	f->app_a.expect_seed = FIG_STREAM;
	memcpy(f->app_a.expect_digest, digest, sizeof(digest));
	if (sim_bulk_connect(&f->app_a, cb.ip4_be, ipk_htons(FIG_PORT), &f->ca) == 0) {
		sim_at(f->s, SIM_MS(1), fig_sample, f);
		st = sim_run(f->s, SIM_SEC(3600), fig_done, f);
		r->ok = st == SIM_DONE && f->app_a.ok_transfers == 1 &&
		        f->ca->why == IPK_CLOSE_NORMAL;
	}
	if (r->ok) {
		r->t_total = (double)(f->ca->t_eof - f->ca->t_connected) / 1e9;
		r->goodput = (double)fc->bytes / r->t_total;
		if (f->ss_over && r->t_total > r->t_ss)
			r->goodput_ss = (double)(fc->bytes - r->rx_ss) / (r->t_total - r->t_ss);
	}
	k = sim_node_counters(f->b);
	r->rto = k->tcp_rto;
	r->fr = k->tcp_fast_retransmits;
#if FIG_HAVE_RTO_EPISODES
	r->rto_ep = k->tcp_rto_episodes;
#else
	r->rto_ep = k->tcp_rto; /* every timeout, backoffs included: an upper bound */
#endif
#if FIG_HAVE_SACK_EPISODES
	r->sack_ep = k->tcp_sack_recovery_episodes;
#endif
	r->cpu_s = (double)(clock() - c0) / CLOCKS_PER_SEC;
	sim_destroy(f->s);
}

/* ------------------------------------------------------------ report */

static char g_out[16384];
static size_t g_len;

#if defined(__GNUC__)
static void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#endif
static void emit(const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(g_out + g_len, sizeof(g_out) - g_len, fmt, ap);
	va_end(ap);
	if (n > 0 && (size_t)n < sizeof(g_out) - g_len)
		g_len += (size_t)n;
}

static double mathis_bps(uint32_t mss, double p)
{
	return (double)mss / ((double)FIG_RTT_MS / 1000.0) * 1.22 / sqrt(p);
}

static void fig_clean(uint64_t seed)
{
	struct fig_case fc;
	struct fig_res r;
	unsigned cc;

	emit("\n## 1. Clean path: goodput after slow start\n\n");
	emit("256 MiB, 0%% loss. Slow start ends at the sender's first congestion response; "
	     "goodput is measured from there to the end of the stream. The most TCP payload "
	     "1 Gbit/s of Ethernet frames can carry is MSS/(MSS+54) with 54 = the Ethernet, IPv4 and TCP "
	     "headers less options: 95.6%% at MSS 1448 (timestamps on), 96.4%% at 1460. "
	     "The bytes queued and in flight when slow start ends arrive after it and count "
	     "in the goodput, so the share can pass that ceiling by a few tenths.\n\n");
	emit("| CC | MSS | slow start ends (s) | goodput after (Mbit/s) | share of link rate | "
	     "whole transfer (Mbit/s) | RTO | cpu (s) |\n|---|---|---|---|---|---|---|---|\n");
	for (cc = 0; cc < (FIG_HAVE_CC ? 2u : 1u); cc++) {
		memset(&fc, 0, sizeof(fc));
		fc.cc = cc;
		fc.sack = 1;
		fc.bytes = 256ull << 20;
		fc.seed = seed;
		g_tracing = g_trace_ms != 0;
		if (g_tracing)
			fprintf(stderr, "# clean path, %s\n", cc ? "CUBIC" : "NewReno");
		fig_run(&fc, &r);
		g_tracing = 0;
		if (!r.ok) {
			emit("| %s | transfer failed |||||||\n", cc ? "CUBIC" : "NewReno");
			continue;
		}
		emit("| %s | %u | %.3f | %.1f | **%.1f%%** | %.1f | %llu | %.1f |\n",
		     cc ? "CUBIC" : "NewReno", r.mss, r.t_ss, r.goodput_ss * 8 / 1e6,
		     r.goodput_ss * 8 / (double)FIG_RATE * 100, r.goodput * 8 / 1e6,
		     (unsigned long long)r.rto, r.cpu_s);
	}
}

#define FIG_SEEDS 3

static void fig_mathis(uint64_t seed)
{
	struct fig_case fc;
	struct fig_res r;
	unsigned cc;
	int i;

	emit("\n## 2. 1%% random loss: goodput against the Mathis bound\n\n");
	emit("32 MiB per run, %d seeds (seed, seed+1, ...); Mathis bound MSS/RTT x 1.22/sqrt(p) "
	     "with the 10 ms base RTT and p = 0.01.%s\n\n",
	     FIG_SEEDS, FIG_HAVE_CC ? "" : " **The engine has no CC switch yet: NewReno only.**");
	emit("| CC | MSS | Mathis bound (Mbit/s) | goodput (Mbit/s), mean | min - max | "
	     "x Mathis, mean | RTO episodes | cpu (s) |\n|---|---|---|---|---|---|---|---|\n");
	for (cc = 0; cc < (FIG_HAVE_CC ? 2u : 1u); cc++) {
		double sum = 0, lo = 1e18, hi = 0, cpu = 0, bound = 0;
		uint64_t rto = 0;
		uint32_t mss = 0;
		int n = 0;

		for (i = 0; i < FIG_SEEDS; i++) {
			memset(&fc, 0, sizeof(fc));
			fc.loss = 0.01;
			fc.cc = cc;
			fc.sack = 1;
			fc.bytes = 32ull << 20;
			fc.seed = seed + (uint64_t)i;
			fig_run(&fc, &r);
			cpu += r.cpu_s;
			if (!r.ok)
				continue;
			n++;
			mss = r.mss;
			sum += r.goodput;
			lo = r.goodput < lo ? r.goodput : lo;
			hi = r.goodput > hi ? r.goodput : hi;
			rto += r.rto_ep;
		}
		if (!n) {
			emit("| %s | transfers failed |||||||\n", cc ? "CUBIC" : "NewReno");
			continue;
		}
		bound = mathis_bps(mss, 0.01);
		emit("| %s | %u | %.2f | %.2f | %.2f - %.2f | **%.2f** | %llu | %.1f |\n",
		     cc ? "CUBIC" : "NewReno", mss, bound * 8 / 1e6, sum / n * 8 / 1e6,
		     lo * 8 / 1e6, hi * 8 / 1e6, sum / n / bound, (unsigned long long)rto, cpu);
	}
}

static void fig_episodes(uint64_t seed)
{
	static const struct {
		const char *name;
		double loss;
		int burst;
	} scen[] = {{"1% random", 0.01, 0}, {"5% random", 0.05, 0}, {"bursts (GE, ~1.9%)", 0, 1}};
	struct fig_case fc;
	struct fig_res r;
	unsigned i;
	int sack;

	emit("\n## 3. Loss-recovery episodes that needed an RTO\n\n");
	emit("16 MiB per run, NewReno. Episodes = fast/SACK recoveries entered + RTO episodes; "
	     "share = RTO episodes / episodes.%s%s%s\n\n",
	     FIG_HAVE_SACK ? "" : " **The engine has no SACK switch yet: both rows are the same "
	                          "non-SACK engine.**",
	     FIG_HAVE_RTO_EPISODES ? "" : " **No tcp_rto_episodes counter yet: RTOs counted "
	                                  "with their backoffs (an upper bound).**",
	     " Recoveries without SACK are counted by tcp_fast_retransmits, which also counts "
	     "NewReno partial-ACK retransmissions, so the non-SACK share is a lower bound.");
	emit("| loss | peer | recoveries | RTO episodes | share needing an RTO | "
	     "goodput (Mbit/s) | cpu (s) |\n|---|---|---|---|---|---|---|\n");
	for (i = 0; i < sizeof(scen) / sizeof(scen[0]); i++)
		for (sack = 1; sack >= 0; sack--) {
			uint64_t rec;

			memset(&fc, 0, sizeof(fc));
			fc.loss = scen[i].loss;
			fc.burst = scen[i].burst;
			fc.sack = sack;
			fc.bytes = 16ull << 20;
			fc.seed = seed + 100 + i;
			fig_run(&fc, &r);
			if (!r.ok) {
				emit("| %s | %s | transfer failed |||||\n", scen[i].name,
				     sack ? "SACK" : "no SACK");
				continue;
			}
			rec = sack && FIG_HAVE_SACK_EPISODES && FIG_HAVE_SACK ? r.sack_ep : r.fr;
			emit("| %s | %s | %llu | %llu | **%.1f%%** | %.1f | %.1f |\n", scen[i].name,
			     sack ? "SACK" : "no SACK", (unsigned long long)rec,
			     (unsigned long long)r.rto_ep,
			     rec + r.rto_ep ? 100.0 * (double)r.rto_ep / (double)(rec + r.rto_ep) : 0.0,
			     r.goodput * 8 / 1e6, r.cpu_s);
		}
}

#define FIG_KEEP_MARK "<!-- relay-figures -->"

/* The part of `path` from FIG_KEEP_MARK on (malloc'd), or NULL: none, or no file. */
static char *fig_kept_tail(const char *path)
{
	static char buf[65536];
	size_t n;
	char *mark, *copy;
	FILE *fp = fopen(path, "r");

	if (!fp)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	fclose(fp);
	buf[n] = 0;
	mark = strstr(buf, FIG_KEEP_MARK);
	if (!mark)
		return NULL;
	copy = malloc(strlen(mark) + 1);
	if (copy)
		strcpy(copy, mark);
	return copy;
}

int main(int argc, char **argv)
{
	const char *out = NULL;
	uint64_t seed = 1;
	char date[32];
	time_t now = time(NULL);
	int i;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
			out = argv[++i];
		else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--trace") == 0 && i + 1 < argc)
			g_trace_ms = (unsigned)strtoul(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--clean-only") == 0)
			g_clean_only = 1;
		else {
			fprintf(stderr, "usage: %s [--out FILE.md] [--seed N] [--trace MS] "
			        "[--clean-only]\n", argv[0]);
			return 2;
		}
	}
	strftime(date, sizeof(date), "%Y-%m-%d", gmtime(&now));
	emit("# TCP figures (simulator)\n\n");
	emit("Run %s with `make tcp-figures` (`ipkit-tcp-figures --seed %llu`). "
	     "Path: 1 Gbit/s, 10 ms RTT, drop-tail queue of one BDP (1.25 MB), send and "
	     "receive buffers 4 MiB, one bulk transfer, loss on the data direction only. "
	     "Virtual time, deterministic for the seed: the same engine gives the same table. "
	     "Engine switches present: SACK %s, CC %s, tcp_rto_episodes %s.\n",
	     date, (unsigned long long)seed, FIG_HAVE_SACK ? "yes" : "no",
	     FIG_HAVE_CC ? "yes" : "no", FIG_HAVE_RTO_EPISODES ? "yes" : "no");
	emit("\nChanged since the previous table (clean path 91.4%% NewReno, 94.8%% CUBIC): the "
	     "sender's SACK scoreboard keeps every range the send buffer allows (it kept 16, "
	     "so after the slow-start overshoot, where the drop-tail queue drops every other "
	     "segment, pipe counted delivered data as in flight, recovery stalled with the "
	     "link idle, and RACK resent data that had arrived); fast recovery sends by RFC "
	     "6937 PRR (SSRB); RACK resends only a lost retransmission, not every hole above "
	     "it; RFC 6675 rescue retransmission; RACK reo_wnd persistence (RFC 8985 §6.2) "
	     "and a windowed min_RTT. `--trace MS` prints the link utilisation of table 1's "
	     "runs over time.\n");
	fig_clean(seed);
	if (!g_clean_only) {
		fig_mathis(seed);
		fig_episodes(seed);
	}
	fputs(g_out, stdout);
	if (out) {
		char *tail = fig_kept_tail(out);
		FILE *fp = fopen(out, "w");
		int bad = !fp || fputs(g_out, fp) < 0 ||
		          (tail && (fputs("\n", fp) < 0 || fputs(tail, fp) < 0));

		free(tail);
		if (bad || (fp && fclose(fp) != 0)) {
			perror(out);
			return 1;
		}
	}
	return 0;
}
