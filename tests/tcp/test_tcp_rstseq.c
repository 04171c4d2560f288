/*
 * The sequence number of the RSTs we send on a connection (abort, keep-alive give-up):
 * inside the peer's window, as Linux's tcp_acceptable_seq() picks it, so a peer that
 * closed its window behind data it dropped still takes the RST (RFC 5961 §3.2 accepts
 * a RST only in the window; with a zero window only SEQ = RCV.NXT).
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "wire/wire.h"

#define IRS 3000000u
#define A IPK_TCP_ACK
#define R IPK_TCP_RST
#define W 65535
#define SEC 1000000000ull
#define MSS 1000u

static const uint8_t data[3 * MSS];

/* An accepted connection (peer MSS 1000) that sent 3000 bytes in three segments. */
static uint32_t sent_3(struct th *t, struct ipk_conn **c)
{
	struct ipk_tcp_opts o = th_mss_opt(MSS);
	uint32_t iss = th_accept(t, IRS, &o, W, c);
	struct tseg s;
	int n = 0;

	CHECK_EQ(ipk_tcp_write(t->ctx, *c, data, sizeof(data), t->now), (int)sizeof(data));
	while (th_next(t, &s))
		n += s.len == MSS;
	CHECK_EQ(n, 3);
	return iss;
}

static void finish(struct th *t)
{
	CHECK(th_no_leaks(t));
	th_free(t);
}

/* The peer's buffer filled: it kept the first segment, dropped the other two and
 * ACKs with a zero window. SND.NXT (iss + 3001) is past its window's right edge
 * (iss + 1001): the RST goes at the edge, the one sequence the peer takes. */
static void test_established_abort_zero_window_rst_at_window_edge(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = sent_3(t, &c);

	th_seg(t, A, IRS + 1, iss + 1 + MSS, 0, NULL, 0);
	CHECK_EQ(ipk_tcp_abort(t->ctx, c, t->now), IPK_OK);
	CHECK(th_expect(t, &s, R | A, iss + 1 + MSS, IRS + 1));
	finish(t);
}

/* A window that still covers SND.NXT: the RST carries SND.NXT (RFC 9293 §3.10.5). */
static void test_established_abort_open_window_rst_at_snd_nxt(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = sent_3(t, &c);

	th_seg(t, A, IRS + 1, iss + 1 + MSS, W, NULL, 0);
	CHECK_EQ(ipk_tcp_abort(t->ctx, c, t->now), IPK_OK);
	CHECK(th_expect(t, &s, R | A, iss + 1 + 3 * MSS, IRS + 1));
	finish(t);
}

/* The window shrank to 500 bytes past SND.UNA: the edge, not SND.NXT. */
static void test_established_abort_shrunk_window_rst_at_window_edge(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = sent_3(t, &c);

	th_seg(t, A, IRS + 1, iss + 1 + MSS, 500, NULL, 0);
	CHECK_EQ(ipk_tcp_abort(t->ctx, c, t->now), IPK_OK);
	CHECK(th_expect(t, &s, R | A, iss + 1 + MSS + 500, IRS + 1));
	finish(t);
}

static void ka_cfg(struct ipk_config *c)
{
	c->tcp_keepalive = 1;
	c->tcp_keepalive_idle_ns = 10 * SEC;
	c->tcp_keepalive_intvl_ns = 1 * SEC;
	c->tcp_keepalive_cnt = 3;
}

/* Keep-alive gives up: like Linux (tcp_keepalive_timer) a RST tells a peer that is
 * only unreachable for a while, at SND.NXT (its window covers it). */
static void test_established_keepalive_give_up_sends_rst(void)
{
	struct th *t = th_new(ka_cfg);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);
	int probes = 0, rst = 0;

	th_advance(t, 10 * SEC);
	th_advance(t, 1 * SEC);
	th_advance(t, 1 * SEC);
	th_advance(t, 1 * SEC);
	while (th_next(t, &s)) {
		if (s.h.flags & R) {
			rst++;
			CHECK_EQ(s.h.seq, iss + 1);
		} else {
			probes++;
		}
	}
	CHECK_EQ(probes, 3);
	CHECK_EQ(rst, 1);
	CHECK_EQ(t->closed, 1);
	CHECK_EQ(t->why, IPK_CLOSE_TIMEOUT);
	finish(t);
}

int main(void)
{
	RUN(test_established_abort_zero_window_rst_at_window_edge);
	RUN(test_established_abort_open_window_rst_at_snd_nxt);
	RUN(test_established_abort_shrunk_window_rst_at_window_edge);
	RUN(test_established_keepalive_give_up_sends_rst);
	return check_summary();
}
