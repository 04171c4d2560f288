/*
 * TCP data path: options, windows, zero-copy delivery, out-of-order queue,
 * retransmission and RTT (RFC 6298), fast retransmit, persist, Nagle, API errors,
 * pool exhaustion, transmit offloads.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "wire/wire.h"

#define IRS 5000000u
#define A IPK_TCP_ACK
#define W 65535
#define MS 1000000ull
#define SEC 1000000000ull

static uint16_t be(uint16_t v) { return ipk_htons(v); }

static void finish(struct th *t)
{
	CHECK(th_no_leaks(t));
	th_free(t);
}

static void no_delack(struct ipk_config *c) { c->tcp_delack_ns = 0; }

static void small_rcvbuf(struct ipk_config *c)
{
	c->tcp_delack_ns = 0;
	c->tcp_rcvbuf = 8192;
	c->tcp_wscale = 0;
}

static void test_listen_syn_mss_negotiated(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct ipk_tcp_info in;
	struct ipk_tcp_opts o = th_mss_opt(1000);

	th_accept(t, IRS, &o, W, &c);
	ipk_tcp_info(c, &in);
	CHECK_EQ(in.mss, 1000);
	CHECK_EQ(in.cwnd, 10000); /* RFC 6928 IW10 */
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_listen_syn_without_mss_uses_536(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct ipk_tcp_info in;

	th_accept(t, IRS, NULL, W, &c);
	ipk_tcp_info(c, &in);
	CHECK_EQ(in.mss, 536);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_listen_syn_wscale_negotiated_both_ways(void)
{
	struct th *t = th_new(no_delack);
	struct ipk_conn *c;
	struct ipk_tcp_info in;
	struct ipk_tcp_opts o = th_mss_opt(1460);
	struct tseg s;
	uint32_t iss;

	o.has_ws = 1;
	o.ws = 3;
	ipk_tcp_listen(t->ctx, be(80), 4);
	th_send(t, 5000, 80, IPK_TCP_SYN, IRS, 0, 1000, &o, NULL, 0);
	CHECK(th_next(t, &s));
	CHECK(s.o.has_ws);
	CHECK_EQ(s.o.ws, 7);
	CHECK_EQ(s.h.wnd, 65535); /* RFC 7323 §2.2: never scaled in a SYN */
	iss = s.h.seq;
	th_seg(t, A, IRS + 1, iss + 1, 1000, NULL, 0);
	c = t->conn;
	ipk_tcp_info(c, &in);
	CHECK_EQ(in.snd_wscale, 3);
	CHECK_EQ(in.rcv_wscale, 7);
	CHECK_EQ(in.snd_wnd, 8000); /* their 1000 << 3 */
	/* our window goes out scaled by 7 */
	th_seg(t, A, IRS + 1, iss + 1, 1000, "hello", 5);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 6));
	CHECK_EQ(s.h.wnd, (256u * 1024u - 5u) >> 7);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_listen_syn_no_wscale_no_scaling(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct ipk_tcp_info in;
	struct tseg s;

	ipk_tcp_listen(t->ctx, be(80), 4);
	th_send(t, 5000, 80, IPK_TCP_SYN, IRS, 0, 1000, NULL, NULL, 0);
	CHECK(th_next(t, &s));
	CHECK(!s.o.has_ws);
	th_seg(t, A, IRS + 1, s.h.seq + 1, 1000, NULL, 0);
	c = t->conn;
	ipk_tcp_info(c, &in);
	CHECK_EQ(in.snd_wscale, 0);
	CHECK_EQ(in.rcv_wscale, 0);
	CHECK_EQ(in.snd_wnd, 1000);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

/* Regression: without window scaling the window field tops out at 65535 while the
 * default tcp_rcvbuf is 256 KiB, and ipk_tcp_recved took the buffer for the window:
 * every read, even of one byte, sent a window update announcing the same 65535
 * (SYN-cookie connections in bench/inmem sent one extra ACK per request). */
static void test_established_no_wscale_read_sends_no_update(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss;

	ipk_tcp_listen(t->ctx, be(80), 4);
	th_send(t, 5000, 80, IPK_TCP_SYN, IRS, 0, W, NULL, NULL, 0);
	CHECK(th_next(t, &s));
	CHECK(!s.o.has_ws);
	iss = s.h.seq;
	th_seg(t, A, IRS + 1, iss + 1, W, NULL, 0);
	c = t->conn;
	th_seg(t, A, IRS + 1, iss + 1, W, "q", 1);
	CHECK_EQ(ipk_tcp_write(t->ctx, c, "s", 1, t->now), 1);
	while (th_next(t, &s)) /* the ACK (quick-ACK at the start) and the answer */
		CHECK_EQ(s.h.wnd, 65535);
	CHECK_EQ(t->rxlen, 1);
	CHECK_EQ(ipk_tcp_recved(t->ctx, c, 1, t->now), IPK_OK);
	CHECK_EQ(th_pending(t), 0); /* nothing to announce: still 65535 */
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_payload_zero_copy_offsets(void)
{
	struct th *t = th_new(no_delack);
	struct ipk_conn *c;
	struct tseg s;
	uint8_t buf[150];
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);
	uint32_t i;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)i;
	th_seg(t, A, IRS + 1, iss + 1, W, buf, 100);
	CHECK_EQ(t->last_off, 14 + 20 + 20);
	CHECK_EQ(t->last_len, 100);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 101));
	/* overlapping retransmission: only the new 50 bytes, offset past the old ones */
	th_seg(t, A, IRS + 1, iss + 1, W, buf, 150);
	CHECK_EQ(t->last_off, 14 + 20 + 20 + 100);
	CHECK_EQ(t->last_len, 50);
	CHECK_EQ(t->rxlen, 150);
	CHECK(memcmp(t->rx, buf, 150) == 0);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_rcv_window_shrinks_until_recved(void)
{
	struct th *t = th_new(small_rcvbuf);
	struct ipk_conn *c;
	struct tseg s;
	uint8_t buf[1024];
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);
	uint32_t i, seq = IRS + 1;

	memset(buf, 'x', sizeof(buf));
	for (i = 0; i < 8; i++) {
		th_seg(t, A, seq, iss + 1, W, buf, 1024);
		seq += 1024;
		CHECK(th_expect(t, &s, A, iss + 1, seq));
		CHECK_EQ(s.h.wnd, 8192 - 1024 * (i + 1));
	}
	/* zero window: more data is not accepted */
	th_seg(t, A, seq, iss + 1, W, buf, 100);
	CHECK(th_expect(t, &s, A, iss + 1, seq));
	CHECK_EQ(s.h.wnd, 0);
	CHECK_EQ(t->rxlen, 8192);
	/* a small release is not announced (receiver SWS avoidance) */
	CHECK_EQ(ipk_tcp_recved(t->ctx, c, 500, t->now), IPK_OK);
	CHECK_EQ(th_pending(t), 0);
	/* a big one is: window update */
	CHECK_EQ(ipk_tcp_recved(t->ctx, c, 3596, t->now), IPK_OK);
	CHECK(th_expect(t, &s, A, iss + 1, seq));
	CHECK_EQ(s.h.wnd, 4096);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_ooo_held_until_gap_filled(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint8_t buf[300];
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);
	uint32_t i;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7);
	th_seg(t, A, IRS + 201, iss + 1, W, buf + 200, 100);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1)); /* immediate duplicate ACK */
	th_seg(t, A, IRS + 101, iss + 1, W, buf + 100, 150); /* overlaps the queued one */
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	CHECK_EQ(t->rxlen, 0);
	CHECK_EQ(t->ctx->cnt.tcp_ooo_segs, 2);
	th_seg(t, A, IRS + 1, iss + 1, W, buf, 100);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 301));
	CHECK_EQ(t->rxlen, 300);
	CHECK(memcmp(t->rx, buf, 300) == 0);
	CHECK_EQ(c->ooo_n, 0);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void ooo_small(struct ipk_config *c) { c->tcp_ooo_max = 2; }

static void test_established_ooo_full_dropped(void)
{
	struct th *t = th_new(ooo_small);
	struct ipk_conn *c;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	th_seg(t, A, IRS + 101, iss + 1, W, "a", 1);
	th_seg(t, A, IRS + 201, iss + 1, W, "b", 1);
	th_seg(t, A, IRS + 301, iss + 1, W, "c", 1);
	CHECK_EQ(t->ctx->cnt.drop[IPK_DROP_TCP_OOO_FULL], 1);
	CHECK_EQ(c->ooo_n, 2);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

/* Regression: the out-of-order queue held 64 segments while the default 256 KiB
 * window invites ~180, so one lost segment in a full window made the receiver drop
 * the rest and the sender resend them all (45 retransmissions for one corrupted
 * frame in bench/inmem). By default the queue holds what the window offers. */
static void test_established_ooo_holds_full_default_window(void)
{
	struct th *t = th_new(no_delack);
	struct ipk_tcp_opts o = th_mss_opt(1460);
	static uint8_t buf[1460];
	struct tseg s;
	uint32_t iss, k, n = (256u * 1024u) / 1460u - 1u;

	o.has_ws = 1;
	o.ws = 7;
	ipk_tcp_listen(t->ctx, be(80), 4);
	th_send(t, 5000, 80, IPK_TCP_SYN, IRS, 0, W, &o, NULL, 0);
	CHECK(th_next(t, &s));
	iss = s.h.seq;
	th_seg(t, A, IRS + 1, iss + 1, W, NULL, 0);
	/* the first segment is lost; the n after it all fit in the window */
	for (k = 1; k <= n; k++)
		th_seg(t, A, IRS + 1 + k * 1460u, iss + 1, W, buf, sizeof(buf));
	CHECK_EQ(t->ctx->cnt.drop[IPK_DROP_TCP_OOO_FULL], 0);
	CHECK_EQ(t->conn->ooo_n, n);
	CHECK_EQ(t->ctx->cnt.tcp_ooo_segs, n);
	ipk_tcp_abort(t->ctx, t->conn, t->now);
	finish(t);
}

static void test_established_rto_backoff_and_karn(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	struct ipk_tcp_info in;
	uint32_t iss;

	t->now = 0;
	iss = th_accept(t, IRS, NULL, W, &c);
	/* handshake RTT was 0: srtt tiny, RTO = rto_min (200 ms) */
	ipk_tcp_info(c, &in);
	CHECK_EQ(in.rto_ns, 200 * MS);
	CHECK_EQ(ipk_tcp_write(t->ctx, c, "data", 4, t->now), 4);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	th_advance(t, 199 * MS);
	CHECK_EQ(th_pending(t), 0);
	th_advance(t, 1 * MS);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	CHECK_EQ(s.len, 4);
	ipk_tcp_info(c, &in);
	CHECK_EQ(in.rto_ns, 400 * MS);
	th_advance(t, 399 * MS);
	CHECK_EQ(th_pending(t), 0);
	th_advance(t, 1 * MS);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	CHECK_EQ(t->ctx->cnt.tcp_rto, 2);
	CHECK_EQ(t->ctx->cnt.tcp_retransmits, 2);
	/* Karn: the ACK of a retransmitted segment gives no RTT sample */
	th_advance(t, 50 * MS);
	th_seg(t, A, IRS + 1, iss + 5, W, NULL, 0);
	ipk_tcp_info(c, &in);
	CHECK_EQ(in.srtt_ns, 1000); /* still the handshake sample (0 counts as 1 us) */
	CHECK_EQ(in.rto_ns, 200 * MS);
	CHECK_EQ(t->acked, 4);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_rto_estimate_from_known_rtt(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	struct ipk_tcp_info in;
	uint32_t iss;

	ipk_tcp_listen(t->ctx, be(80), 4);
	th_seg(t, IPK_TCP_SYN, IRS, 0, W, NULL, 0);
	CHECK(th_next(t, &s));
	iss = s.h.seq;
	th_advance(t, 100 * MS);
	th_seg(t, A, IRS + 1, iss + 1, W, NULL, 0);
	c = t->conn;
	ipk_tcp_info(c, &in);
	/* RFC 6298 (2.2): SRTT = R, RTTVAR = R/2, RTO = SRTT + 4*RTTVAR */
	CHECK_EQ(in.srtt_ns, 100 * MS);
	CHECK_EQ(in.rttvar_ns, 50 * MS);
	CHECK_EQ(in.rto_ns, 300 * MS);
	/* second sample 250 ms: RTTVAR = 3/4*50 + 1/4*150, SRTT = 7/8*100 + 1/8*250 */
	ipk_tcp_write(t->ctx, c, "x", 1, t->now);
	th_advance(t, 250 * MS);
	th_seg(t, A, IRS + 1, iss + 2, W, NULL, 0);
	ipk_tcp_info(c, &in);
	CHECK_EQ(in.rttvar_ns, 75 * MS);
	CHECK_EQ(in.srtt_ns, 118750 * 1000ull);
	CHECK_EQ(in.rto_ns, 418750 * 1000ull);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_three_dupacks_fast_retransmit(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	struct ipk_tcp_opts o = th_mss_opt(1000);
	static uint8_t buf[5000];
	uint32_t iss = th_accept(t, IRS, &o, W, &c);
	int i;

	CHECK_EQ(ipk_tcp_write(t->ctx, c, buf, 5000, t->now), 5000);
	for (i = 0; i < 5; i++) {
		CHECK(th_expect(t, &s, A, iss + 1 + 1000u * (uint32_t)i, IRS + 1));
		CHECK_EQ(s.len, 1000);
	}
	th_seg(t, A, IRS + 1, iss + 1001, W, NULL, 0);
	th_seg(t, A, IRS + 1, iss + 1001, W, NULL, 0);
	th_seg(t, A, IRS + 1, iss + 1001, W, NULL, 0);
	CHECK_EQ(th_pending(t), 0);
	th_seg(t, A, IRS + 1, iss + 1001, W, NULL, 0);
	CHECK(th_expect(t, &s, A, iss + 1001, IRS + 1));
	CHECK_EQ(s.len, 1000);
	CHECK_EQ(t->ctx->cnt.tcp_fast_retransmits, 1);
	CHECK(c->fl & IPK_TCPF_RECOVERY);
	/* partial ACK: next hole retransmitted at once (RFC 6582) */
	th_seg(t, A, IRS + 1, iss + 2001, W, NULL, 0);
	CHECK(th_expect(t, &s, A, iss + 2001, IRS + 1));
	/* full ACK ends recovery */
	th_seg(t, A, IRS + 1, iss + 5001, W, NULL, 0);
	CHECK(!(c->fl & IPK_TCPF_RECOVERY));
	/* ssthresh = max(flight 4000 / 2, 2*MSS); cwnd = min(ssthresh, max(0, MSS) + MSS) */
	CHECK_EQ(c->ssthresh, 2000);
	CHECK_EQ(c->cwnd, 2000);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_zero_window_persist_probe(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, 0, &c);

	CHECK_EQ(ipk_tcp_write(t->ctx, c, "abcdef", 6, t->now), 6);
	CHECK_EQ(th_pending(t), 0);
	th_advance(t, 200 * MS);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	CHECK_EQ(s.len, 1);
	CHECK_EQ(s.payload[0], 'a');
	th_seg(t, A, IRS + 1, iss + 1, 0, NULL, 0); /* still closed, byte not taken */
	th_advance(t, 399 * MS);
	CHECK_EQ(th_pending(t), 0);
	th_advance(t, 1 * MS);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	CHECK_EQ(s.len, 1);
	/* the window opens: everything goes */
	th_seg(t, A, IRS + 1, iss + 1, 1000, NULL, 0);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	CHECK_EQ(s.len, 6);
	CHECK_EQ(c->nrtx, 0);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void syn2(struct ipk_config *c) { c->tcp_syn_retries = 2; }

static void test_syn_sent_retries_exhausted_timeout(void)
{
	struct th *t = th_new(syn2);
	struct ipk_conn *c = NULL;
	struct tseg s;
	int syns = 0;

	CHECK_EQ(ipk_tcp_connect(t->ctx, t->peer_be, be(5000), 0, NULL, &c, t->now), IPK_OK);
	th_run_for(t, 60 * SEC);
	while (th_next(t, &s))
		syns += s.h.flags == IPK_TCP_SYN;
	CHECK_EQ(syns, 3);
	CHECK_EQ(t->closed, 1);
	CHECK_EQ(t->why, IPK_CLOSE_TIMEOUT);
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_CLOSED);
	CHECK_EQ(ipk_tcp_close(t->ctx, c, t->now), IPK_ECLOSED);
	finish(t);
}

static void cookies_off(struct ipk_config *c)
{
	c->tcp_syncookies = 0;
}

static void test_listen_backlog_full_drops_syn(void)
{
	struct th *t = th_new(cookies_off);
	struct tseg s;

	ipk_tcp_listen(t->ctx, be(80), 1);
	th_send(t, 5000, 80, IPK_TCP_SYN, IRS, 0, W, NULL, NULL, 0);
	th_send(t, 5001, 80, IPK_TCP_SYN, IRS, 0, W, NULL, NULL, 0);
	CHECK(th_next(t, &s));
	CHECK(!th_next(t, &s));
	CHECK_EQ(t->ctx->cnt.drop[IPK_DROP_TCP_BACKLOG], 1);
	th_run_for(t, 200 * SEC);
	finish(t);
}

static void test_listen_accept_refused_rst(void)
{
	struct th *t = th_new(NULL);
	struct tseg s;

	t->refuse = 1;
	ipk_tcp_listen(t->ctx, be(80), 4);
	th_seg(t, IPK_TCP_SYN, IRS, 0, W, NULL, 0);
	CHECK(th_expect(t, &s, IPK_TCP_RST | A, 0, IRS + 1));
	CHECK_EQ(t->ctx->cnt.drop[IPK_DROP_TCP_REFUSED], 1);
	finish(t);
}

/* "No room now" (a negative answer): the SYN is dropped without a RST, counted
 * as a full backlog, and the peer's retransmitted SYN is taken once there is
 * room: Linux's behaviour while a listener's accept queue is full. */
static void test_listen_accept_no_room_drops_silently(void)
{
	struct th *t = th_new(NULL);
	struct tseg s;

	t->refuse = -1;
	ipk_tcp_listen(t->ctx, be(80), 4);
	th_seg(t, IPK_TCP_SYN, IRS, 0, W, NULL, 0);
	CHECK(!th_next(t, &s));
	CHECK_EQ(t->ctx->cnt.drop[IPK_DROP_TCP_BACKLOG], 1);
	CHECK_EQ(t->ctx->cnt.drop[IPK_DROP_TCP_REFUSED], 0);
	t->refuse = 0;
	th_seg(t, IPK_TCP_SYN, IRS, 0, W, NULL, 0); /* the retransmission */
	CHECK(th_next(t, &s));
	CHECK_EQ(s.h.flags, IPK_TCP_SYN | A);
	CHECK_EQ(s.h.ack, IRS + 1);
	th_run_for(t, 200 * SEC); /* the half-open connection gives up */
	finish(t);
}

/* No room when the handshake's ACK arrives: the ACK is dropped (no RST, no
 * tcp_accepted), the connection stays half-open, and its SYN-ACK retransmission
 * brings the peer's ACK again, which completes it once there is room. */
static void test_listen_no_room_at_ack_keeps_half_open(void)
{
	struct th *t = th_new(NULL);
	struct tseg s;
	uint32_t iss;

	ipk_tcp_listen(t->ctx, be(80), 4);
	th_seg(t, IPK_TCP_SYN, IRS, 0, W, NULL, 0);
	CHECK(th_next(t, &s));
	CHECK_EQ(s.h.flags, IPK_TCP_SYN | A);
	iss = s.h.seq;
	t->noroom = 1;
	th_seg(t, A, IRS + 1, iss + 1, W, NULL, 0);
	CHECK(!th_next(t, &s));
	CHECK_EQ(t->accepted, 0);
	CHECK_EQ(t->ctx->cnt.drop[IPK_DROP_TCP_BACKLOG], 1);
	t->noroom = 0;
	th_run_for(t, 3 * SEC); /* the SYN-ACK again */
	CHECK(th_next(t, &s));
	CHECK_EQ(s.h.flags, IPK_TCP_SYN | A);
	CHECK_EQ(s.h.seq, iss);
	th_seg(t, A, IRS + 1, iss + 1, W, NULL, 0);
	CHECK_EQ(t->accepted, 1);
	CHECK(t->conn != NULL);
	ipk_tcp_abort(t->ctx, t->conn, t->now);
	finish(t);
}

static void eph3(struct ipk_config *c)
{
	c->eph_port_lo = 50000;
	c->eph_port_hi = 50002;
}

static void test_connect_ephemeral_ports_skip_used(void)
{
	struct th *t = th_new(eph3);
	struct ipk_conn *c[4];
	struct ipk_tuple tu;
	int i;

	t->ctx->eph_next = 50001;
	for (i = 0; i < 3; i++)
		CHECK_EQ(ipk_tcp_connect(t->ctx, t->peer_be, be(5000), 0, NULL, &c[i], 0), IPK_OK);
	ipk_tcp_tuple(c[0], &tu);
	CHECK_EQ(ipk_ntohs(tu.local_port_be), 50001);
	ipk_tcp_tuple(c[2], &tu);
	CHECK_EQ(ipk_ntohs(tu.local_port_be), 50000);
	CHECK_EQ(ipk_tcp_connect(t->ctx, t->peer_be, be(5000), 0, NULL, &c[3], 0),
	         IPK_EADDRINUSE);
	/* another peer port: the same local ports are free again */
	CHECK_EQ(ipk_tcp_connect(t->ctx, t->peer_be, be(5001), 0, NULL, &c[3], 0), IPK_OK);
	ipk_tcp_abort(t->ctx, c[1], 0);
	CHECK_EQ(ipk_tcp_connect(t->ctx, t->peer_be, be(5000), 0, NULL, &c[1], 0), IPK_OK);
	ipk_tcp_tuple(c[1], &tu);
	CHECK_EQ(ipk_ntohs(tu.local_port_be), 50002);
	for (i = 0; i < 4; i++)
		ipk_tcp_abort(t->ctx, c[i], 0);
	finish(t);
}

static void nagle_test(int on)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	CHECK_EQ(ipk_tcp_set_nagle(c, on), IPK_OK);
	ipk_tcp_write(t->ctx, c, "0123456789", 10, t->now);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	ipk_tcp_write(t->ctx, c, "abcdefghij", 10, t->now);
	if (on) {
		CHECK_EQ(th_pending(t), 0);
		ipk_tcp_write(t->ctx, c, "ABCDEFGHIJ", 10, t->now);
		th_seg(t, A, IRS + 1, iss + 11, W, NULL, 0);
		CHECK(th_expect(t, &s, A, iss + 11, IRS + 1));
		CHECK_EQ(s.len, 20);
	} else {
		CHECK(th_expect(t, &s, A, iss + 11, IRS + 1));
		CHECK_EQ(s.len, 10);
	}
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_nagle_on_holds_small_segment(void) { nagle_test(1); }
static void test_established_nagle_off_sends_at_once(void) { nagle_test(0); }

static void test_api_misuse_error_codes(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c, *out;
	struct ipk_tcp_info in;
	struct sim_pkt *k;
	uint32_t iss;

	CHECK_EQ(ipk_tcp_listen(NULL, be(80), 1), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_listen(t->ctx, 0, 1), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_unlisten(t->ctx, be(99)), IPK_ENOENT);
	CHECK_EQ(ipk_tcp_connect(t->ctx, t->peer_be, be(5000), 0, NULL, NULL, 0), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_connect(t->ctx, 0, be(5000), 0, NULL, &out, 0), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_write(NULL, NULL, "x", 1, 0), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_send(t->ctx, NULL, NULL, 0), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_info(NULL, &in), IPK_EINVAL);
	iss = th_accept(t, IRS, NULL, W, &c);
	(void)iss;
	CHECK_EQ(ipk_tcp_listen(t->ctx, be(80), 1), IPK_EADDRINUSE);
	CHECK_EQ(ipk_tcp_recved(t->ctx, c, 1, 0), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_write(t->ctx, c, NULL, 5, 0), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_info(c, NULL), IPK_EINVAL);
	/* a packet larger than the send buffer: EAGAIN, still the caller's */
	k = sim_pkt_alloc(t->pool);
	k->len = 100;
	c->sndbuf = 50; /* the connection's buffer (autotuning may move it) */
	CHECK_EQ(ipk_tcp_send(t->ctx, c, k, 0), IPK_EAGAIN);
	c->sndbuf = t->cfg.tcp_sndbuf;
	CHECK_EQ(ipk_tcp_send(t->ctx, c, k, 0), 100);
	CHECK_EQ(ipk_tcp_close(t->ctx, c, 0), IPK_OK);
	CHECK_EQ(ipk_tcp_close(t->ctx, c, 0), IPK_ENOTCONN);
	CHECK_EQ(ipk_tcp_write(t->ctx, c, "x", 1, 0), IPK_ENOTCONN);
	CHECK_EQ(ipk_tcp_abort(t->ctx, c, 0), IPK_OK);
	CHECK_EQ(ipk_tcp_write(t->ctx, c, "x", 1, 0), IPK_ECLOSED);
	CHECK_EQ(ipk_tcp_recved(t->ctx, c, 0, 0), IPK_ECLOSED);
	CHECK_EQ(ipk_tcp_info(c, &in), IPK_ECLOSED);
	CHECK_EQ(ipk_tcp_set_nagle(c, 1), IPK_ECLOSED);
	CHECK(ipk_tcp_user(c) == NULL);
	CHECK_EQ(ipk_tcp_sndbuf_free(c), 0);
	finish(t);
}

/* SYN-RECEIVED never takes more than half the pool (cookies off: SYNs beyond it are
 * dropped), so a SYN flood cannot starve established connections and active opens. */
static void test_listen_synrecv_capped_at_half_pool(void)
{
	struct th *t = th_new(cookies_off);
	struct ipk_conn *c = NULL;
	struct tseg s;
	uint32_t i;

	ipk_tcp_listen(t->ctx, be(80), 64);
	for (i = 0; i < t->nconns; i++)
		th_send(t, (uint16_t)(6000 + i), 80, IPK_TCP_SYN, IRS, 0, W, NULL, NULL, 0);
	CHECK_EQ(ipk_conns_free(t->ctx), t->nconns / 2);
	CHECK_EQ(t->ctx->cnt.drop[IPK_DROP_TCP_BACKLOG], t->nconns / 2);
	CHECK_EQ(ipk_tcp_connect(t->ctx, t->peer_be, be(9), 0, NULL, &c, t->now), IPK_OK);
	th_clear(t);
	/* one dies (RST in SYN-RECEIVED), and the next SYN gets through */
	th_send(t, 6000, 80, IPK_TCP_RST, IRS + 1, 0, W, NULL, NULL, 0);
	th_send(t, 7000, 80, IPK_TCP_SYN, IRS, 0, W, NULL, NULL, 0);
	CHECK(th_next(t, &s));
	CHECK_EQ(s.h.flags, IPK_TCP_SYN | A);
	ipk_tcp_abort(t->ctx, c, t->now);
	th_run_for(t, 300 * SEC);
	CHECK_EQ(t->ctx->synrecv_n, 0);
	finish(t);
}

static void offload(struct ipk_config *c)
{
	c->caps = IPK_CAP_TX_CSUM_TCP | IPK_CAP_TX_CSUM_IP4 | IPK_CAP_SG;
}

static void test_established_tx_csum_offload_and_sg_chain(void)
{
	struct th *t = th_new(offload);
	struct ipk_conn *c;
	struct tseg s;
	static uint8_t big[300];
	struct sim_pkt *k, *small = sim_pkt_from(t->pool, "zero-copy!", 10);
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	memset(big, 0x3c, sizeof(big));
	k = sim_pkt_from(t->pool, big, sizeof(big));
	CHECK_EQ(ipk_tcp_send(t->ctx, c, k, t->now), 300);
	CHECK(th_next(t, &s));
	CHECK(s.chained);
	CHECK(s.txflags & IPK_TXOFF_TCP_CSUM);
	CHECK(s.csum_ok); /* the field holds the pseudo-header fold */
	CHECK_EQ(s.len, 300);
	CHECK(memcmp(s.payload, big, 300) == 0);
	/* a small payload is copied into the header packet (tcp_out.c IPK_TCP_COPY_MAX) */
	CHECK_EQ(ipk_tcp_send(t->ctx, c, small, t->now), 10);
	CHECK(th_next(t, &s));
	CHECK(!s.chained);
	CHECK_EQ(s.len, 10);
	CHECK(memcmp(s.payload, "zero-copy!", 10) == 0);
	/* the app's packets are held until acknowledged, then freed */
	th_seg(t, A, IRS + 1, iss + 311, W, NULL, 0);
	CHECK_EQ(t->acked, 310);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void tso(struct ipk_config *c)
{
	c->caps = IPK_CAP_TSO | IPK_CAP_SG;
	c->tso_max = 16000;
}

static void test_established_tso_large_segment(void)
{
	struct th *t = th_new(tso);
	struct ipk_conn *c;
	struct tseg s;
	struct ipk_tcp_opts o = th_mss_opt(1460);
	static uint8_t buf[12000];
	uint32_t iss = th_accept(t, IRS, &o, W, &c);

	memset(buf, 7, sizeof(buf));
	CHECK_EQ(ipk_tcp_write(t->ctx, c, buf, sizeof(buf), t->now), (int)sizeof(buf));
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	CHECK_EQ(s.len, 12000);
	CHECK(s.txflags & IPK_TXOFF_TSO);
	CHECK_EQ(s.tso_mss, 1460);
	CHECK(s.csum_ok);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_icmp_needfrag_lowers_mss(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	struct ipk_tcp_opts o = th_mss_opt(1460);
	static uint8_t buf[1460];
	uint8_t q[28];
	uint32_t iss = th_accept(t, IRS, &o, W, &c);

	ipk_tcp_write(t->ctx, c, buf, sizeof(buf), t->now);
	CHECK(th_next(t, &s));
	memset(q, 0, sizeof(q));
	q[0] = 0x45;
	memcpy(q + 12, &t->ip_be, 4);
	memcpy(q + 16, &t->peer_be, 4);
	ipk_wrbe16(q + 20, be(80));
	ipk_wrbe16(q + 22, be(5000));
	ipk_wr32(q + 24, iss + 1);
	ipk_tcp_icmp_error(t->ctx, IPK_ICMP_UNREACH, IPK_ICMP_UNREACH_NEEDFRAG, 1000, q, 28);
	CHECK_EQ(c->mss, 960);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	CHECK_EQ(s.len, 960);
	/* a quote outside snd_una..snd_nxt is ignored */
	ipk_wr32(q + 24, iss + 100000);
	ipk_tcp_icmp_error(t->ctx, IPK_ICMP_UNREACH, IPK_ICMP_UNREACH_NEEDFRAG, 600, q, 28);
	CHECK_EQ(c->mss, 960);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void no_quickack(struct ipk_config *c) { c->tcp_quickack = 0; }

static void test_established_delayed_ack_every_second_segment(void)
{
	struct th *t = th_new(no_quickack);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	th_seg(t, A, IRS + 1, iss + 1, W, "aaaa", 4);
	CHECK_EQ(th_pending(t), 0);
	th_seg(t, A, IRS + 5, iss + 1, W, "bbbb", 4);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 9)); /* second segment: ACK now */
	th_seg(t, A, IRS + 9, iss + 1, W, "cccc", 4);
	CHECK_EQ(th_pending(t), 0);
	th_advance(t, 39 * MS);
	CHECK_EQ(th_pending(t), 0);
	th_advance(t, 1 * MS); /* tcp_delack_ns */
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 13));
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_close_fin_follows_queued_data(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, 0, &c); /* zero window: data waits */

	ipk_tcp_write(t->ctx, c, "last words", 10, t->now);
	CHECK_EQ(ipk_tcp_close(t->ctx, c, t->now), IPK_OK);
	CHECK_EQ(th_pending(t), 0);
	th_seg(t, A, IRS + 1, iss + 1, W, NULL, 0);
	CHECK(th_expect(t, &s, IPK_TCP_FIN | A, iss + 1, IRS + 1));
	CHECK_EQ(s.len, 10);
	th_seg(t, A, IRS + 1, iss + 12, W, NULL, 0);
	CHECK_EQ(c->state, IPK_TCP_FIN_WAIT_2);
	CHECK_EQ(t->acked, 10);
	/* half-closed: the peer may still send */
	th_seg(t, A, IRS + 1, iss + 12, W, "more", 4);
	CHECK_EQ(t->rxlen, 4);
	th_seg(t, IPK_TCP_FIN | A, IRS + 5, iss + 12, W, NULL, 0);
	CHECK_EQ(t->fins, 1);
	CHECK_EQ(c->state, IPK_TCP_TIME_WAIT);
	th_advance(t, t->cfg.tcp_time_wait_ns);
	finish(t);
}

static void test_established_fin_out_of_order_held(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	th_seg(t, IPK_TCP_FIN | A, IRS + 4, iss + 1, W, "def", 3);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	CHECK_EQ(t->fins, 0);
	th_seg(t, A, IRS + 1, iss + 1, W, "abc", 3);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 8));
	CHECK_EQ(t->rxlen, 6);
	CHECK(memcmp(t->rx, "abcdef", 6) == 0);
	CHECK_EQ(t->fins, 1);
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_CLOSE_WAIT);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

/* Regression: a FIN held in the out-of-order queue and the same FIN arriving again
 * in order (a retransmission covering the hole) took two sequence numbers, so every
 * later ACK was one past the peer's FIN and the peer never left LAST_ACK. */
static void test_established_fin_queued_and_retransmitted_counts_once(void)
{
	struct th *t = th_new(no_delack);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	th_seg(t, IPK_TCP_FIN | A, IRS + 4, iss + 1, W, "def", 3);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	th_seg(t, IPK_TCP_FIN | A, IRS + 1, iss + 1, W, "abcdef", 6);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 8));
	CHECK_EQ(t->rxlen, 6);
	CHECK_EQ(t->fins, 1);
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_CLOSE_WAIT);
	/* the next segment we send still acknowledges exactly FIN + 1 */
	CHECK_EQ(ipk_tcp_write(t->ctx, c, "x", 1, t->now), 1);
	CHECK(th_expect(t, &s, A | IPK_TCP_PSH, iss + 1, IRS + 8));
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

/* Regression: the end-of-stream event came before the move to CLOSE_WAIT, so an
 * application closing from it went FIN_WAIT_1 -> CLOSING -> TIME_WAIT and held
 * the connection for 2*MSL as if it had closed first. */
static void test_established_close_from_fin_event_goes_last_ack(void)
{
	struct th *t = th_new(no_delack);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	t->close_on_fin = 1;
	th_seg(t, IPK_TCP_FIN | A, IRS + 1, iss + 1, W, NULL, 0);
	CHECK_EQ(t->fins, 1);
	CHECK_EQ(t->state_at_fin, IPK_TCP_CLOSE_WAIT);
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_LAST_ACK);
	CHECK(th_next(t, &s));
	CHECK(s.h.flags & IPK_TCP_FIN);
	CHECK_EQ(s.h.ack, IRS + 2);
	while (th_next(t, &s))
		;
	th_seg(t, A, IRS + 2, iss + 2, W, NULL, 0);
	CHECK_EQ(t->closed, 1);
	CHECK_EQ(t->why, IPK_CLOSE_NORMAL);
	finish(t);
}

static void test_syn_sent_icmp_port_unreachable_closes(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c = NULL;
	struct tseg s;
	uint8_t q[28];

	ipk_tcp_connect(t->ctx, t->peer_be, be(5000), be(4000), NULL, &c, t->now);
	CHECK(th_next(t, &s));
	memset(q, 0, sizeof(q));
	q[0] = 0x45;
	memcpy(q + 12, &t->ip_be, 4);
	memcpy(q + 16, &t->peer_be, 4);
	ipk_wrbe16(q + 20, be(4000));
	ipk_wrbe16(q + 22, be(5000));
	ipk_wr32(q + 24, s.h.seq);
	ipk_tcp_icmp_error(t->ctx, IPK_ICMP_UNREACH, IPK_ICMP_UNREACH_PORT, 0, q, 28);
	CHECK_EQ(t->closed, 1);
	CHECK_EQ(t->why, IPK_CLOSE_UNREACH);
	finish(t);
}

static void test_syn_sent_close_reports_closed(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c = NULL;

	ipk_tcp_connect(t->ctx, t->peer_be, be(5000), 0, NULL, &c, t->now);
	CHECK_EQ(ipk_tcp_close(t->ctx, c, t->now), IPK_OK);
	CHECK_EQ(t->closed, 1);
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_CLOSED);
	finish(t);
}

static void few_pkts(struct ipk_config *c) { c->tcp_delack_ns = 0; }

static void test_established_out_of_packets_retries_later(void)
{
	struct th *t = th_new(few_pkts);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	ipk_tcp_write(t->ctx, c, "abc", 3, t->now);
	th_seg(t, A, IRS + 1, iss + 4, W, NULL, 0);
	th_clear(t);
	t->pool->fail_every = 1; /* every allocation fails */
	th_seg(t, A, IRS + 1, iss + 4, W, "xyz", 3); /* its ACK cannot be sent */
	t->pool->fail_every = 0;
	CHECK_EQ(th_pending(t), 0);
	CHECK(t->ctx->cnt.drop[IPK_DROP_NO_PKT] > 0);
	th_advance(t, 1 * MS);
	CHECK(th_expect(t, &s, A, iss + 4, IRS + 4));
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

int main(void)
{
	RUN(test_listen_syn_mss_negotiated);
	RUN(test_listen_syn_without_mss_uses_536);
	RUN(test_listen_syn_wscale_negotiated_both_ways);
	RUN(test_listen_syn_no_wscale_no_scaling);
	RUN(test_established_no_wscale_read_sends_no_update);
	RUN(test_established_payload_zero_copy_offsets);
	RUN(test_established_rcv_window_shrinks_until_recved);
	RUN(test_established_ooo_held_until_gap_filled);
	RUN(test_established_ooo_full_dropped);
	RUN(test_established_ooo_holds_full_default_window);
	RUN(test_established_rto_backoff_and_karn);
	RUN(test_established_rto_estimate_from_known_rtt);
	RUN(test_established_three_dupacks_fast_retransmit);
	RUN(test_established_zero_window_persist_probe);
	RUN(test_syn_sent_retries_exhausted_timeout);
	RUN(test_listen_backlog_full_drops_syn);
	RUN(test_listen_accept_refused_rst);
	RUN(test_listen_accept_no_room_drops_silently);
	RUN(test_listen_no_room_at_ack_keeps_half_open);
	RUN(test_connect_ephemeral_ports_skip_used);
	RUN(test_established_nagle_on_holds_small_segment);
	RUN(test_established_nagle_off_sends_at_once);
	RUN(test_api_misuse_error_codes);
	RUN(test_listen_synrecv_capped_at_half_pool);
	RUN(test_established_tx_csum_offload_and_sg_chain);
	RUN(test_established_tso_large_segment);
	RUN(test_established_icmp_needfrag_lowers_mss);
	RUN(test_established_delayed_ack_every_second_segment);
	RUN(test_established_close_fin_follows_queued_data);
	RUN(test_established_fin_out_of_order_held);
	RUN(test_established_fin_queued_and_retransmitted_counts_once);
	RUN(test_established_close_from_fin_event_goes_last_ack);
	RUN(test_syn_sent_icmp_port_unreachable_closes);
	RUN(test_syn_sent_close_reports_closed);
	RUN(test_established_out_of_packets_retries_later);
	return check_summary();
}
