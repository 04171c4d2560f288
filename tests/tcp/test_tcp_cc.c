/*
 * Congestion control: the per-connection algorithm interface, NewReno byte counting,
 * and integer CUBIC (RFC 9438) checked against the same formulas in floating point.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "wire/wire.h"

#define IRS 5000000u
#define A IPK_TCP_ACK
#define W 65535
#define MS 1000000ull
#define MSS 1000u

static int near(double got, double want, double tol)
{
	return fabs(got - want) <= tol;
}

/* The float reference: RFC 9438 eq. 1 and 2, C = 0.4, windows in segments. */
static double ref_k_s(double w_max_seg, double cwnd_seg)
{
	return cbrt((w_max_seg - cwnd_seg) / 0.4);
}

static double ref_w_seg(double w_max_seg, double k_s, double t_s)
{
	return 0.4 * pow(t_s - k_s, 3) + w_max_seg;
}

static void test_cubic_cbrt_is_floor_of_real_root(void)
{
	uint64_t x = 1;
	int i, bad = 0;

	CHECK_EQ(ipk_cubic_cbrt(0), 0);
	CHECK_EQ(ipk_cubic_cbrt(7), 1);
	CHECK_EQ(ipk_cubic_cbrt(8), 2);
	CHECK_EQ(ipk_cubic_cbrt(26), 2);
	CHECK_EQ(ipk_cubic_cbrt(27), 3);
	CHECK_EQ(ipk_cubic_cbrt(UINT64_MAX), 2642245);
	for (i = 0; i < 200000; i++) {
		uint64_t r = ipk_cubic_cbrt(x);

		if (r * r * r > x || (r + 1) * (r + 1) * (r + 1) <= x)
			bad++;
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		x >>= (unsigned)(i % 40);
	}
	CHECK_EQ(bad, 0);
}

static void test_cubic_k_matches_float(void)
{
	static const uint32_t wmax[] = {10, 100, 1000, 12345, 700000};
	unsigned i;

	for (i = 0; i < sizeof(wmax) / sizeof(wmax[0]); i++) {
		uint32_t w = wmax[i] * MSS, e = w / 10u * 7u;
		double want = ref_k_s(w / (double)MSS, e / (double)MSS) * 1000.0;

		CHECK(near(ipk_cubic_k(w, e, MSS), want, 1.0));
	}
	CHECK_EQ(ipk_cubic_k(50 * MSS, 60 * MSS, MSS), 0);
}

static void test_cubic_window_curve_matches_float(void)
{
	uint32_t w_max = 100 * MSS, k = ipk_cubic_k(w_max, 70 * MSS, MSS);
	double k_s = ref_k_s(100, 70);
	uint32_t t;
	int bad = 0;

	for (t = 0; t <= 20000; t += 37) {
		double want = ref_w_seg(100, k_s, t / 1000.0) * MSS;
		uint32_t got = ipk_cubic_window(w_max, k, MSS, t);

		/* K is truncated to whole ms: allow the slope over 1 ms plus 2 bytes */
		if (want < 0)
			want = 0;
		if (!near(got, want, 2.0 + 1.2 * MSS * pow((t / 1000.0 - k_s), 2) / 1000.0 + 2.0))
			bad++;
	}
	CHECK_EQ(bad, 0);
	/* the plateau: W_cubic(K) = W_max; concave before, convex after */
	CHECK_EQ(ipk_cubic_window(w_max, k, MSS, k), w_max);
	CHECK(near(ipk_cubic_window(w_max, k, MSS, 0), 70 * MSS, 30));
	/* far beyond: capped, never wrapped */
	CHECK_EQ(ipk_cubic_window(w_max, 0, MSS, 0xffffffffu), IPK_TCP_CWND_MAX);
}

static void fake_conn(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t cwnd)
{
	memset(ctx, 0, sizeof(*ctx));
	memset(c, 0, sizeof(*c));
	c->mss = MSS;
	c->cc_algo = IPK_CC_CUBIC;
	c->cwnd = cwnd;
	c->ssthresh = IPK_TCP_CWND_MAX;
	c->snd_max = cwnd; /* a full window in flight */
	ipk_cc_cubic.init(c);
}

static void test_cubic_loss_beta_07_and_fast_convergence(void)
{
	struct ipk_ctx *ctx = calloc(1, sizeof(*ctx));
	struct ipk_conn c;

	fake_conn(ctx, &c, 100 * MSS);
	ipk_tcp_cc_congestion(ctx, &c, IPK_CC_EV_LOSS);
	CHECK_EQ(c.ssthresh, 70 * MSS);
	CHECK_EQ(c.cwnd, 70 * MSS);
	CHECK_EQ(c.cc.cubic.w_max, 100 * MSS);
	/* RFC 9438 §4.7: a loss below the last W_max lowers W_max to cwnd (1+beta)/2 */
	c.cwnd = 90 * MSS;
	ipk_tcp_cc_congestion(ctx, &c, IPK_CC_EV_LOSS);
	CHECK_EQ(c.cc.cubic.w_max, 76500);
	CHECK_EQ(c.ssthresh, 63 * MSS);
	/* RFC 9438 §4.8: a timeout leaves one segment and restarts the curve at K = 0 */
	ipk_tcp_cc_congestion(ctx, &c, IPK_CC_EV_RTO);
	CHECK_EQ(c.cwnd, MSS);
	CHECK_EQ(c.ssthresh, 44100);
	CHECK_EQ(c.cc.cubic.w_max, 0);
	free(ctx);
}

/* Feed one RTT's worth of ACKs (2 segments each) spread over the RTT. */
static void ack_rtt(struct ipk_ctx *ctx, struct ipk_conn *c, uint64_t rtt_ns)
{
	uint32_t n = c->cwnd / (2 * MSS), i;

	if (n == 0)
		n = 1;
	for (i = 0; i < n; i++) {
		ctx->now += rtt_ns / n;
		c->snd_max = c->snd_una + c->cwnd; /* the window is in use */
		ipk_tcp_cc_ack(ctx, c, 2 * MSS);
	}
}

static void test_cubic_avoidance_follows_curve_to_w_max_at_k(void)
{
	struct ipk_ctx *ctx = calloc(1, sizeof(*ctx));
	struct ipk_conn c;
	double k_s;
	int r;

	fake_conn(ctx, &c, 1000 * MSS);
	c.srtt_us = 100 * 1000;
	ctx->now = 1000 * MS;
	ipk_tcp_cc_congestion(ctx, &c, IPK_CC_EV_LOSS); /* cwnd 700, W_max 1000 */
	k_s = ref_k_s(1000, 700); /* 9.09 s */
	for (r = 0; r < 200; r++) {
		double t = (r + 1) * 0.1, want = ref_w_seg(1000, k_s, t + 0.1);

		ack_rtt(ctx, &c, 100 * MS);
		/* the window trails the curve by about one RTT of growth */
		if (want > 700 && !near(c.cwnd / (double)MSS, want, 0.03 * want + 2))
			fprintf(stderr, "t=%.1f cwnd=%u want=%.1f\n", t, c.cwnd / MSS, want);
		CHECK(want <= 700 || near(c.cwnd / (double)MSS, want, 0.03 * want + 2));
	}
	free(ctx);
}

static void test_cubic_reno_friendly_region_on_short_rtt(void)
{
	struct ipk_ctx *ctx = calloc(1, sizeof(*ctx));
	struct ipk_conn c;
	double w_est = 7;
	int r;

	fake_conn(ctx, &c, 10 * MSS);
	c.srtt_us = 1 * 1000;
	ipk_tcp_cc_congestion(ctx, &c, IPK_CC_EV_LOSS); /* cwnd 7, W_max 10, K 1.96 s */
	for (r = 0; r < 100; r++) {
		ack_rtt(ctx, &c, 1 * MS);
		w_est += w_est >= 10 ? 1.0 : 9.0 / 17.0;
	}
	/* 100 ms in: CUBIC alone is still below W_max; Reno's line is at ~100 segments */
	CHECK(ipk_cubic_window(10 * MSS, ipk_cubic_k(10 * MSS, 7 * MSS, MSS), MSS, 100) < 10 * MSS);
	CHECK(near(c.cwnd / (double)MSS, w_est, 0.1 * w_est));
	free(ctx);
}

static void test_cc_application_limited_window_does_not_grow(void)
{
	struct ipk_ctx *ctx = calloc(1, sizeof(*ctx));
	struct ipk_conn c;

	fake_conn(ctx, &c, 20 * MSS);
	c.cc_algo = IPK_CC_NEWRENO;
	c.snd_max = 9 * MSS; /* less than half the window in use */
	ipk_tcp_cc_ack(ctx, &c, 2 * MSS);
	CHECK_EQ(c.cwnd, 20 * MSS);
	c.snd_max = 10 * MSS;
	ipk_tcp_cc_ack(ctx, &c, 2 * MSS);
	CHECK_EQ(c.cwnd, 22 * MSS);
	free(ctx);
}

static void test_newreno_avoidance_one_mss_per_window(void)
{
	struct ipk_ctx *ctx = calloc(1, sizeof(*ctx));
	struct ipk_conn c;

	fake_conn(ctx, &c, 10 * MSS);
	c.cc_algo = IPK_CC_NEWRENO;
	c.ssthresh = 10 * MSS;
	ipk_tcp_cc_ack(ctx, &c, 5 * MSS);
	CHECK_EQ(c.cwnd, 10 * MSS);
	ipk_tcp_cc_ack(ctx, &c, 5 * MSS);
	CHECK_EQ(c.cwnd, 11 * MSS);
	/* RFC 3465 §2.2: slow start grows at most 2 SMSS per ACK and stops at ssthresh */
	c.ssthresh = 14 * MSS;
	ipk_tcp_cc_ack(ctx, &c, 8 * MSS);
	CHECK_EQ(c.cwnd, 13 * MSS);
	ipk_tcp_cc_ack(ctx, &c, 8 * MSS);
	CHECK_EQ(c.cwnd, 14 * MSS);
	free(ctx);
}

static void cubic_cfg(struct ipk_config *c) { c->tcp_cc = IPK_CC_CUBIC; }

static void test_established_cubic_fast_retransmit_ssthresh_07(void)
{
	struct th *t = th_new(cubic_cfg);
	struct ipk_conn *c;
	struct tseg s;
	struct ipk_tcp_opts o = th_mss_opt(1000);
	static uint8_t buf[10000];
	struct ipk_tcp_info in;
	uint32_t iss = th_accept(t, IRS, &o, W, &c);
	int i;

	CHECK_EQ(ipk_tcp_info(c, &in), IPK_OK);
	CHECK_EQ(in.cc_algo, IPK_CC_CUBIC);
	CHECK_EQ(ipk_tcp_write(t->ctx, c, buf, 10000, t->now), 10000);
	for (i = 0; i < 10; i++)
		CHECK(th_expect(t, &s, A, iss + 1 + 1000u * (uint32_t)i, IRS + 1));
	for (i = 0; i < 3; i++)
		th_seg(t, A, IRS + 1, iss + 1, W, NULL, 0);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	/* RFC 9438 §4.6: ssthresh = 0.7 * cwnd (10 segments), not half the flight */
	CHECK_EQ(c->ssthresh, 7000);
	CHECK_EQ(c->cc.cubic.w_max, 10000);
	th_seg(t, A, IRS + 1, iss + 10001, W, NULL, 0);
	CHECK(!(c->fl & IPK_TCPF_RECOVERY));
	/* RFC 6582 §3.2 (3) option 2: min(ssthresh, FlightSize + SMSS), nothing in flight */
	CHECK_EQ(c->cwnd, 2000);
	ipk_tcp_abort(t->ctx, c, t->now);
	CHECK(th_no_leaks(t));
	th_free(t);
}

static void test_api_set_cc_unknown_einval(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct ipk_config cfg;
	uint32_t cwnd;

	th_accept(t, IRS, NULL, W, &c);
	CHECK_EQ(c->cc_algo, IPK_CC_NEWRENO);
	cwnd = c->cwnd;
	CHECK_EQ(ipk_tcp_set_cc(c, 7), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_set_cc(NULL, IPK_CC_CUBIC), IPK_EINVAL);
	CHECK_EQ(c->cc_algo, IPK_CC_NEWRENO);
	CHECK_EQ(ipk_tcp_set_cc(c, IPK_CC_CUBIC), IPK_OK);
	CHECK_EQ(c->cc_algo, IPK_CC_CUBIC);
	CHECK_EQ(c->cwnd, cwnd);
	ipk_tcp_abort(t->ctx, c, t->now);
	CHECK_EQ(ipk_tcp_set_cc(c, IPK_CC_NEWRENO), IPK_ECLOSED);
	CHECK(th_no_leaks(t));
	th_free(t);
	ipk_config_default(&cfg);
	CHECK_EQ(cfg.tcp_cc, IPK_CC_NEWRENO);
	cfg.tcp_cc = 9;
	CHECK_EQ(ipk_ctx_size(&cfg), 0);
}

static void test_conn_object_stays_small(void)
{
	printf("  sizeof(struct ipk_conn) = %zu\n", sizeof(struct ipk_conn));
	/* the algorithms share one small union instead of a struct each */
	CHECK(sizeof(union ipk_cc_state) <= 16);
}

int main(void)
{
	RUN(test_cubic_cbrt_is_floor_of_real_root);
	RUN(test_cubic_k_matches_float);
	RUN(test_cubic_window_curve_matches_float);
	RUN(test_cubic_loss_beta_07_and_fast_convergence);
	RUN(test_cubic_avoidance_follows_curve_to_w_max_at_k);
	RUN(test_cubic_reno_friendly_region_on_short_rtt);
	RUN(test_newreno_avoidance_one_mss_per_window);
	RUN(test_cc_application_limited_window_does_not_grow);
	RUN(test_established_cubic_fast_retransmit_ssthresh_07);
	RUN(test_api_set_cc_unknown_einval);
	RUN(test_conn_object_stays_small);
	return check_summary();
}
