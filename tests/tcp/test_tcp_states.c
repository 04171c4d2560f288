/*
 * RFC 9293 state transitions and the RST rules (§3.10.7, RFC 5961), scripted
 * segment by segment against one context.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "wire/wire.h"

#define IRS 1000000u
#define A IPK_TCP_ACK
#define W 65535

static uint16_t be(uint16_t v) { return ipk_htons(v); }

static void finish(struct th *t)
{
	CHECK(th_no_leaks(t));
	th_free(t);
}

static void test_listen_syn_gets_synack(void)
{
	struct th *t = th_new(NULL);
	struct tseg s;

	CHECK_EQ(ipk_tcp_listen(t->ctx, be(80), 4), IPK_OK);
	th_send(t, 5000, 80, IPK_TCP_SYN, IRS, 0, W, NULL, NULL, 0);
	CHECK(th_next(t, &s));
	CHECK_EQ(s.h.flags, IPK_TCP_SYN | A);
	CHECK_EQ(s.h.ack, IRS + 1);
	CHECK(s.csum_ok);
	CHECK(s.o.has_mss);
	CHECK_EQ(s.o.mss, 1460);
	CHECK_EQ(t->accepted, 0);
	CHECK_EQ(t->ctx->listeners[0].pending, 1);
	CHECK_EQ(t->ctx->cnt.tcp_passive_opens, 1);
	/* a retransmitted SYN gets the same SYN-ACK again */
	th_send(t, 5000, 80, IPK_TCP_SYN, IRS, 0, W, NULL, NULL, 0);
	CHECK(th_expect(t, &s, IPK_TCP_SYN | A, s.h.seq, IRS + 1));
	ipk_tcp_unlisten(t->ctx, be(80));
	th_run_for(t, 200ull * 1000000000ull);
	CHECK_EQ(ipk_conns_free(t->ctx), t->nconns);
	CHECK_EQ(t->closed, 0);
	finish(t);
}

static void test_syn_received_ack_establishes(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c = NULL;
	struct ipk_tuple tu;

	th_accept(t, IRS, NULL, W, &c);
	CHECK_EQ(t->accepted, 1);
	CHECK(c != NULL);
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_ESTABLISHED);
	CHECK_EQ(t->ctx->listeners[0].pending, 0);
	CHECK_EQ(ipk_tcp_tuple(c, &tu), IPK_OK);
	CHECK_EQ(tu.peer_port_be, be(5000));
	CHECK_EQ(tu.local_port_be, be(80));
	CHECK_EQ(ipk_tcp_abort(t->ctx, c, t->now), IPK_OK);
	CHECK_EQ(t->closed, 1);
	CHECK_EQ(t->why, IPK_CLOSE_ABORTED);
	finish(t);
}

static void test_syn_received_ack_bad_gets_rst(void)
{
	struct th *t = th_new(NULL);
	struct tseg s;
	uint32_t iss;

	ipk_tcp_listen(t->ctx, be(80), 4);
	th_seg(t, IPK_TCP_SYN, IRS, 0, W, NULL, 0);
	CHECK(th_next(t, &s));
	iss = s.h.seq;
	th_seg(t, A, IRS + 1, iss + 7, W, NULL, 0);
	CHECK(th_expect(t, &s, IPK_TCP_RST, iss + 7, 0));
	CHECK_EQ(t->ctx->cnt.drop[IPK_DROP_TCP_BAD_ACK], 1);
	CHECK_EQ(t->accepted, 0);
	/* RST in SYN-RECEIVED: freed silently, backlog slot returned */
	th_seg(t, IPK_TCP_RST, IRS + 1, 0, W, NULL, 0);
	CHECK_EQ(t->ctx->listeners[0].pending, 0);
	CHECK_EQ(t->closed, 0);
	finish(t);
}

static struct ipk_conn *active_open(struct th *t, uint32_t *iss)
{
	struct ipk_conn *c = NULL;
	struct tseg s;

	CHECK_EQ(ipk_tcp_connect(t->ctx, t->peer_be, be(5000), be(4000), &t->user_tag, &c, t->now),
	         IPK_OK);
	CHECK(th_next(t, &s));
	CHECK_EQ(s.h.flags, IPK_TCP_SYN);
	CHECK(s.o.has_mss && s.o.has_ws);
	*iss = s.h.seq;
	return c;
}

static void test_syn_sent_synack_establishes(void)
{
	struct th *t = th_new(NULL);
	struct tseg s;
	uint32_t iss;
	struct ipk_conn *c = active_open(t, &iss);

	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_SYN_SENT);
	th_send(t, 5000, 4000, IPK_TCP_SYN | A, IRS, iss + 1, W, NULL, NULL, 0);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	CHECK_EQ(t->connected, 1);
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_ESTABLISHED);
	CHECK(ipk_tcp_user(c) == &t->user_tag);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_syn_sent_syn_simultaneous_open(void)
{
	struct th *t = th_new(NULL);
	struct tseg s;
	uint32_t iss;
	struct ipk_conn *c = active_open(t, &iss);

	th_send(t, 5000, 4000, IPK_TCP_SYN, IRS, 0, W, NULL, NULL, 0);
	CHECK(th_expect(t, &s, IPK_TCP_SYN | A, iss, IRS + 1));
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_SYN_RECEIVED);
	CHECK_EQ(t->connected, 0);
	th_send(t, 5000, 4000, IPK_TCP_SYN | A, IRS, iss + 1, W, NULL, NULL, 0);
	/* the peer's SYN-ACK repeats its SYN: a challenge ACK; then its ACK completes */
	th_send(t, 5000, 4000, A, IRS + 1, iss + 1, W, NULL, NULL, 0);
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_ESTABLISHED);
	CHECK_EQ(t->connected, 1);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_fin_close_wait(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	th_seg(t, IPK_TCP_FIN | A, IRS + 1, iss + 1, W, NULL, 0);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 2));
	CHECK_EQ(t->fins, 1);
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_CLOSE_WAIT);
	/* CLOSE_WAIT + close: FIN, LAST_ACK */
	CHECK_EQ(ipk_tcp_close(t->ctx, c, t->now), IPK_OK);
	CHECK(th_expect(t, &s, IPK_TCP_FIN | A, iss + 1, IRS + 2));
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_LAST_ACK);
	/* LAST_ACK + ACK: closed, freed */
	th_seg(t, A, IRS + 2, iss + 2, W, NULL, 0);
	CHECK_EQ(t->closed, 1);
	CHECK_EQ(t->why, IPK_CLOSE_NORMAL);
	CHECK_EQ(th_pending(t), 0);
	finish(t);
}

static void test_last_ack_fin_retransmitted_on_rto(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	th_seg(t, IPK_TCP_FIN | A, IRS + 1, iss + 1, W, NULL, 0);
	ipk_tcp_close(t->ctx, c, t->now);
	th_clear(t);
	th_advance(t, 1000000000ull);
	CHECK(th_expect(t, &s, IPK_TCP_FIN | A, iss + 1, IRS + 2));
	th_seg(t, A, IRS + 2, iss + 2, W, NULL, 0);
	CHECK_EQ(t->closed, 1);
	finish(t);
}

/* Accept, then close: our FIN is iss+1. */
static struct ipk_conn *fin_wait_1(struct th *t, uint32_t *iss)
{
	struct ipk_conn *c;
	struct tseg s;

	*iss = th_accept(t, IRS, NULL, W, &c);
	CHECK_EQ(ipk_tcp_close(t->ctx, c, t->now), IPK_OK);
	CHECK(th_expect(t, &s, IPK_TCP_FIN | A, *iss + 1, IRS + 1));
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_FIN_WAIT_1);
	return c;
}

static void test_fin_wait_1_ack_fin_wait_2(void)
{
	struct th *t = th_new(NULL);
	uint32_t iss;
	struct ipk_conn *c = fin_wait_1(t, &iss);
	struct tseg s;

	th_seg(t, A, IRS + 1, iss + 2, W, NULL, 0);
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_FIN_WAIT_2);
	/* FIN_WAIT_2 + FIN: ACK, TIME_WAIT, closed reported once */
	th_seg(t, IPK_TCP_FIN | A, IRS + 1, iss + 2, W, NULL, 0);
	CHECK(th_expect(t, &s, A, iss + 2, IRS + 2));
	CHECK_EQ(c->state, IPK_TCP_TIME_WAIT);
	CHECK_EQ(t->closed, 1);
	CHECK_EQ(t->why, IPK_CLOSE_NORMAL);
	CHECK_EQ(ipk_tcp_close(t->ctx, c, t->now), IPK_ECLOSED);
	/* TIME_WAIT expiry frees it without a second report */
	th_advance(t, t->cfg.tcp_time_wait_ns);
	CHECK_EQ(t->closed, 1);
	finish(t);
}

static void test_fin_wait_1_fin_closing(void)
{
	struct th *t = th_new(NULL);
	uint32_t iss;
	struct ipk_conn *c = fin_wait_1(t, &iss);
	struct tseg s;

	th_seg(t, IPK_TCP_FIN | A, IRS + 1, iss + 1, W, NULL, 0);
	CHECK(th_expect(t, &s, A, iss + 2, IRS + 2));
	CHECK_EQ(c->state, IPK_TCP_CLOSING);
	th_seg(t, A, IRS + 2, iss + 2, W, NULL, 0);
	CHECK_EQ(c->state, IPK_TCP_TIME_WAIT);
	CHECK_EQ(t->closed, 1);
	th_advance(t, t->cfg.tcp_time_wait_ns);
	finish(t);
}

static void test_fin_wait_1_finack_time_wait(void)
{
	struct th *t = th_new(NULL);
	uint32_t iss;
	struct ipk_conn *c = fin_wait_1(t, &iss);
	struct tseg s;

	th_seg(t, IPK_TCP_FIN | A, IRS + 1, iss + 2, W, NULL, 0);
	CHECK(th_expect(t, &s, A, iss + 2, IRS + 2));
	CHECK_EQ(c->state, IPK_TCP_TIME_WAIT);
	th_advance(t, t->cfg.tcp_time_wait_ns);
	finish(t);
}

static void test_time_wait_fin_retransmit_reacked(void)
{
	struct th *t = th_new(NULL);
	uint32_t iss, free0;
	struct ipk_conn *c = fin_wait_1(t, &iss);
	struct tseg s;

	th_seg(t, IPK_TCP_FIN | A, IRS + 1, iss + 2, W, NULL, 0);
	CHECK(th_expect(t, &s, A, iss + 2, IRS + 2));
	free0 = ipk_conns_free(t->ctx);
	th_advance(t, t->cfg.tcp_time_wait_ns / 2);
	th_seg(t, IPK_TCP_FIN | A, IRS + 1, iss + 2, W, NULL, 0);
	CHECK(th_expect(t, &s, A, iss + 2, IRS + 2));
	/* 2*MSL restarted: still there after the original deadline */
	th_advance(t, t->cfg.tcp_time_wait_ns / 2 + 1);
	CHECK_EQ(ipk_conns_free(t->ctx), free0);
	CHECK_EQ(c->state, IPK_TCP_TIME_WAIT);
	th_advance(t, t->cfg.tcp_time_wait_ns / 2);
	CHECK_EQ(ipk_conns_free(t->ctx), free0 + 1);
	finish(t);
}

static void test_closed_port_syn_gets_rst_ack(void)
{
	struct th *t = th_new(NULL);
	struct tseg s;

	th_send(t, 5000, 81, IPK_TCP_SYN, IRS, 0, W, NULL, NULL, 0);
	CHECK(th_expect(t, &s, IPK_TCP_RST | A, 0, IRS + 1));
	CHECK_EQ(t->ctx->cnt.drop[IPK_DROP_TCP_NO_CONN], 1);
	/* with data and FIN, ACK covers the whole segment */
	th_send(t, 5000, 81, IPK_TCP_FIN, IRS, 0, W, NULL, "abc", 3);
	CHECK(th_expect(t, &s, IPK_TCP_RST | A, 0, IRS + 4));
	finish(t);
}

static void test_closed_port_ack_gets_rst(void)
{
	struct th *t = th_new(NULL);
	struct tseg s;

	th_send(t, 5000, 81, A, IRS, 777, W, NULL, NULL, 0);
	CHECK(th_expect(t, &s, IPK_TCP_RST, 777, 0));
	CHECK_EQ(s.h.flags, IPK_TCP_RST);
	finish(t);
}

static void test_closed_port_rst_gets_nothing(void)
{
	struct th *t = th_new(NULL);

	th_send(t, 5000, 81, IPK_TCP_RST | A, IRS, 777, W, NULL, NULL, 0);
	th_send(t, 5000, 81, IPK_TCP_RST, IRS, 0, W, NULL, NULL, 0);
	CHECK_EQ(th_pending(t), 0);
	CHECK_EQ(t->ctx->cnt.tcp_rst_rx, 2);
	finish(t);
}

static void test_syn_sent_rst_needs_acceptable_ack(void)
{
	struct th *t = th_new(NULL);
	uint32_t iss;
	struct ipk_conn *c = active_open(t, &iss);

	th_send(t, 5000, 4000, IPK_TCP_RST, 0, 0, W, NULL, NULL, 0);
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_SYN_SENT);
	th_send(t, 5000, 4000, IPK_TCP_RST | A, 0, iss + 5, W, NULL, NULL, 0);
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_SYN_SENT);
	CHECK_EQ(th_pending(t), 0); /* never RST a RST */
	th_send(t, 5000, 4000, IPK_TCP_RST | A, 0, iss + 1, W, NULL, NULL, 0);
	CHECK_EQ(t->closed, 1);
	CHECK_EQ(t->why, IPK_CLOSE_REFUSED);
	finish(t);
}

static void test_syn_sent_bad_ack_gets_rst(void)
{
	struct th *t = th_new(NULL);
	struct tseg s;
	uint32_t iss;
	struct ipk_conn *c = active_open(t, &iss);

	th_send(t, 5000, 4000, IPK_TCP_SYN | A, IRS, iss + 9, W, NULL, NULL, 0);
	CHECK(th_expect(t, &s, IPK_TCP_RST, iss + 9, 0));
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_SYN_SENT);
	ipk_tcp_abort(t->ctx, c, t->now);
	CHECK_EQ(t->closed, 1);
	finish(t);
}

static void test_established_rst_exact_closes(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	(void)iss;
	th_seg(t, IPK_TCP_RST, IRS + 1, 0, W, NULL, 0);
	CHECK_EQ(t->closed, 1);
	CHECK_EQ(t->why, IPK_CLOSE_RESET);
	CHECK_EQ(th_pending(t), 0);
	finish(t);
}

static void test_established_rst_in_window_challenge_ack(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	th_seg(t, IPK_TCP_RST, IRS + 100, 0, W, NULL, 0);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	CHECK_EQ(t->closed, 0);
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_ESTABLISHED);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_rst_out_of_window_ignored(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	(void)iss;
	th_seg(t, IPK_TCP_RST, IRS + 1 + (1u << 30), 0, W, NULL, 0);
	th_seg(t, IPK_TCP_RST, IRS - 5, 0, W, NULL, 0);
	CHECK_EQ(th_pending(t), 0);
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_ESTABLISHED);
	CHECK_EQ(t->ctx->cnt.drop[IPK_DROP_TCP_OUT_OF_WINDOW], 2);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_syn_in_window_challenge_ack(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	th_seg(t, IPK_TCP_SYN, IRS + 10, 0, W, NULL, 0);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_ESTABLISHED);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_old_segment_acked_as_dup(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	th_seg(t, A, IRS - 100, iss + 1, W, "xx", 2);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	CHECK_EQ(t->ctx->cnt.tcp_dup_segs, 1);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_abort_sends_rst(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	CHECK_EQ(ipk_tcp_abort(t->ctx, c, t->now), IPK_OK);
	CHECK(th_next(t, &s));
	CHECK(s.h.flags & IPK_TCP_RST);
	CHECK_EQ(s.h.seq, iss + 1);
	CHECK_EQ(ipk_tcp_abort(t->ctx, c, t->now), IPK_ECLOSED);
	finish(t);
}

static void test_listen_malformed_segments_dropped(void)
{
	struct th *t = th_new(NULL);

	ipk_tcp_listen(t->ctx, be(80), 4);
	t->corrupt_next = 1;
	th_seg(t, IPK_TCP_SYN, IRS, 0, W, NULL, 0);
	t->corrupt_next = 2;
	th_seg(t, IPK_TCP_SYN, IRS, 0, W, NULL, 0);
	th_seg(t, IPK_TCP_SYN | IPK_TCP_FIN, IRS, 0, W, NULL, 0);
	CHECK_EQ(th_pending(t), 0);
	CHECK_EQ(t->ctx->cnt.drop[IPK_DROP_TCP_CSUM], 1);
	CHECK_EQ(t->ctx->cnt.drop[IPK_DROP_TCP_MALFORMED], 1);
	CHECK_EQ(t->ctx->cnt.drop[IPK_DROP_TCP_BAD_FLAGS], 1);
	CHECK_EQ(ipk_conns_free(t->ctx), t->nconns);
	finish(t);
}

int main(void)
{
	RUN(test_listen_syn_gets_synack);
	RUN(test_syn_received_ack_establishes);
	RUN(test_syn_received_ack_bad_gets_rst);
	RUN(test_syn_sent_synack_establishes);
	RUN(test_syn_sent_syn_simultaneous_open);
	RUN(test_established_fin_close_wait);
	RUN(test_last_ack_fin_retransmitted_on_rto);
	RUN(test_fin_wait_1_ack_fin_wait_2);
	RUN(test_fin_wait_1_fin_closing);
	RUN(test_fin_wait_1_finack_time_wait);
	RUN(test_time_wait_fin_retransmit_reacked);
	RUN(test_closed_port_syn_gets_rst_ack);
	RUN(test_closed_port_ack_gets_rst);
	RUN(test_closed_port_rst_gets_nothing);
	RUN(test_syn_sent_rst_needs_acceptable_ack);
	RUN(test_syn_sent_bad_ack_gets_rst);
	RUN(test_established_rst_exact_closes);
	RUN(test_established_rst_in_window_challenge_ack);
	RUN(test_established_rst_out_of_window_ignored);
	RUN(test_established_syn_in_window_challenge_ack);
	RUN(test_established_old_segment_acked_as_dup);
	RUN(test_abort_sends_rst);
	RUN(test_listen_malformed_segments_dropped);
	return check_summary();
}
