/*
 * Defences against hostile or confused peers, scripted segment by segment:
 * RFC 5961 challenge ACKs and their limits, the ACK-loop guard, SYN cookies
 * (RFC 4987), the SYN-RECEIVED cap, TIME_WAIT bounds and reuse (RFC 6191), and
 * ICMP validation (RFC 5927).
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "wire/wire.h"

#define IRS 7000000u
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

static const struct ipk_counters *cnt(const struct th *t) { return ipk_counters(t->ctx); }

/* ------------------------------------------------------------ RFC 5961 */

static void test_established_rst_in_window_challenge_ack_counted(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	th_seg(t, IPK_TCP_RST, IRS + 10, 0, W, NULL, 0);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	CHECK_EQ(cnt(t)->tcp_challenge_acks, 1);
	/* the peer's answer to the challenge: a RST exactly at rcv_nxt */
	th_seg(t, IPK_TCP_RST, IRS + 1, 0, W, NULL, 0);
	CHECK_EQ(t->closed, 1);
	CHECK_EQ(t->why, IPK_CLOSE_RESET);
	finish(t);
}

static void test_established_syn_out_of_window_challenge_ack(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	/* RFC 5961 §4.2: whatever its sequence number */
	th_seg(t, IPK_TCP_SYN, IRS + (1u << 30), 0, W, NULL, 0);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	CHECK_EQ(cnt(t)->tcp_challenge_acks, 1);
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_ESTABLISHED);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_ack_older_than_max_window_dropped(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	/* RFC 5961 §5.2: SEG.ACK < SND.UNA - MAX.SND.WND: dropped, challenge ACK */
	th_seg(t, A, IRS + 1, iss + 1 - 70000u, W, "abcd", 4);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	CHECK_EQ(t->rxlen, 0);
	CHECK_EQ(cnt(t)->drop[IPK_DROP_TCP_BAD_ACK], 1);
	CHECK_EQ(cnt(t)->tcp_challenge_acks, 1);
	/* an old ACK inside the window is only ignored: the text is taken */
	th_advance(t, 600 * MS);
	th_seg(t, A, IRS + 1, iss + 1 - 1000u, W, "abcd", 4);
	CHECK_EQ(t->rxlen, 4);
	th_clear(t);
	/* an ACK for data never sent: dropped with a challenge ACK */
	th_advance(t, 600 * MS);
	th_seg(t, A, IRS + 5, iss + 5000u, W, "efgh", 4);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 5));
	CHECK_EQ(t->rxlen, 4);
	CHECK_EQ(cnt(t)->tcp_challenge_acks, 2);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void limit10_no_gap(struct ipk_config *c)
{
	c->tcp_challenge_ack_limit = 10;
	c->tcp_invalid_ratelimit_ns = 0;
}

static void test_established_challenge_acks_limited_per_second(void)
{
	struct th *t = th_new(limit10_no_gap);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t i, sent;

	th_accept(t, IRS, NULL, W, &c);
	for (i = 0; i < 100; i++)
		th_seg(t, IPK_TCP_RST, IRS + 2 + i, 0, W, NULL, 0);
	sent = (uint32_t)cnt(t)->tcp_challenge_acks;
	/* RFC 5961 §7, budget drawn in [limit/2, 1.5 limit] */
	CHECK(sent >= 5 && sent <= 15);
	CHECK_EQ(cnt(t)->tcp_challenge_acks_limited, 100 - sent);
	CHECK_EQ((uint32_t)th_pending(t), sent);
	th_clear(t);
	th_advance(t, 1 * SEC);
	th_seg(t, IPK_TCP_RST, IRS + 50, 0, W, NULL, 0);
	CHECK(th_next(t, &s));
	CHECK_EQ(cnt(t)->tcp_challenge_acks, sent + 1);
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_ESTABLISHED);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

static void test_established_invalid_acks_limited_per_connection(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c), i;

	/* pure ACKs outside the window: one answer per 500 ms */
	for (i = 0; i < 20; i++)
		th_seg(t, A, IRS + 1 + (1u << 30) + i, iss + 1, W, NULL, 0);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	CHECK_EQ(th_pending(t), 0);
	CHECK_EQ(cnt(t)->tcp_oow_acks_limited, 19);
	th_advance(t, 499 * MS);
	th_seg(t, A, IRS + 1 + (1u << 30), iss + 1, W, NULL, 0);
	CHECK_EQ(th_pending(t), 0);
	th_advance(t, 1 * MS);
	th_seg(t, A, IRS + 1 + (1u << 30), iss + 1, W, NULL, 0);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	/* old data (our ACK was lost) is always answered at once */
	for (i = 0; i < 3; i++) {
		th_seg(t, A, IRS - 100, iss + 1, W, "xx", 2);
		CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	}
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

/* Regression: two ends that disagree on a sequence number traded ACKs forever (one
 * every 2 ms on a 1 ms link). Now each end answers at most once per 500 ms. */
static void test_established_desync_ack_war_bounded(void)
{
	struct th *a, *b;
	struct ipk_conn *cb = NULL, *ca;
	uint64_t segs0;
	int i;

	th_pair(&a, &b, NULL);
	CHECK_EQ(ipk_tcp_listen(a->ctx, be(80), 4), IPK_OK);
	CHECK_EQ(ipk_tcp_connect(b->ctx, a->ip_be, be(80), 0, NULL, &cb, 0), IPK_OK);
	th_pump(a, b);
	ca = a->conn;
	CHECK(ca != NULL && b->connected == 1);
	ca->rcv_nxt += 1u << 30; /* a believes the peer sent a gigabyte it never did */
	ca->rcv_adv += 1u << 30;
	segs0 = a->ctx->cnt.tcp_tx_segs + b->ctx->cnt.tcp_tx_segs;
	CHECK_EQ(ipk_tcp_write(b->ctx, cb, "ping", 4, b->now), 4);
	th_pump(a, b);
	CHECK(a->ctx->cnt.tcp_tx_segs + b->ctx->cnt.tcp_tx_segs - segs0 < 8);
	for (i = 0; i < 2500; i++) { /* 5 s in 2 ms steps */
		a->now += 2 * MS;
		b->now = a->now;
		ipk_run(a->ctx, NULL, 0, a->now);
		ipk_run(b->ctx, NULL, 0, b->now);
		th_pump(a, b);
	}
	/* b's RTO retransmissions (~4) each draw one ACK and one limited challenge */
	CHECK(a->ctx->cnt.tcp_tx_segs + b->ctx->cnt.tcp_tx_segs - segs0 < 60);
	CHECK(a->ctx->cnt.tcp_oow_acks_limited + b->ctx->cnt.tcp_oow_acks_limited > 0);
	ipk_tcp_abort(a->ctx, ca, a->now);
	ipk_tcp_abort(b->ctx, cb, b->now);
	th_pump(a, b);
	CHECK(th_no_leaks(a));
	CHECK(th_no_leaks(b));
	th_free(a);
	th_free(b);
}

/* ------------------------------------------------------------ SYN cookies */

static struct ipk_tcp_opts syn_opts(uint16_t mss, int ws)
{
	struct ipk_tcp_opts o;

	memset(&o, 0, sizeof(o));
	o.has_mss = 1;
	o.mss = mss;
	o.has_ws = (uint8_t)(ws != 0);
	o.ws = 7;
	return o;
}

/* Fill the backlog (1) with one SYN from port 5000; returns the cookie SYN-ACK
 * answering a SYN from `sport`. */
static uint32_t cookie_synack(struct th *t, uint16_t sport, uint32_t irs)
{
	struct ipk_tcp_opts o = syn_opts(1400, 1);
	struct tseg s;

	th_send(t, 5000, 80, IPK_TCP_SYN, IRS, 0, W, NULL, NULL, 0);
	CHECK(th_next(t, &s));
	th_send(t, sport, 80, IPK_TCP_SYN, irs, 0, W, &o, NULL, 0);
	CHECK(th_next(t, &s));
	CHECK_EQ(s.h.flags, IPK_TCP_SYN | A);
	CHECK_EQ(s.h.ack, irs + 1);
	CHECK(s.o.has_mss);
	CHECK(!s.o.has_ws); /* a cookie cannot carry window scaling */
	CHECK_EQ(cnt(t)->tcp_syncookies_sent, 1);
	return s.h.seq;
}

static void test_listen_syncookie_handshake_opens_connection(void)
{
	struct th *t = th_new(NULL);
	struct tseg s;
	uint32_t iss, free0;

	ipk_tcp_listen(t->ctx, be(80), 1);
	free0 = ipk_conns_free(t->ctx);
	iss = cookie_synack(t, 6000, IRS);
	CHECK_EQ(ipk_conns_free(t->ctx), free0 - 1); /* no state for the cookie */
	th_send(t, 6000, 80, A, IRS + 1, iss + 1, W, NULL, "hello", 5);
	CHECK_EQ(cnt(t)->tcp_syncookies_ok, 1);
	CHECK_EQ(t->accepted, 1);
	CHECK_EQ(t->rxlen, 5);
	CHECK(memcmp(t->rx, "hello", 5) == 0);
	CHECK_EQ(ipk_tcp_state(t->conn), IPK_TCP_ESTABLISHED);
	CHECK_EQ(t->conn->mss, 1400);
	CHECK_EQ(t->conn->snd_wscale, 0);
	CHECK_EQ(t->ctx->listeners[0].pending, 1); /* the cookie took no backlog slot */
	ipk_tcp_write(t->ctx, t->conn, "world", 5, t->now);
	th_advance(t, 50 * MS);
	while (th_next(t, &s) && s.len == 0)
		;
	CHECK_EQ(s.h.seq, iss + 1);
	CHECK_EQ(s.len, 5);
	ipk_tcp_abort(t->ctx, t->conn, t->now);
	ipk_tcp_unlisten(t->ctx, be(80));
	th_run_for(t, 300 * SEC);
	finish(t);
}

static void test_listen_syncookie_forged_ack_gets_rst(void)
{
	struct th *t = th_new(NULL);
	struct tseg s;
	uint32_t iss;

	ipk_tcp_listen(t->ctx, be(80), 1);
	iss = cookie_synack(t, 6000, IRS);
	th_send(t, 6000, 80, A, IRS + 1, iss + 2, W, NULL, NULL, 0);    /* wrong cookie */
	CHECK(th_expect(t, &s, IPK_TCP_RST, iss + 2, 0));
	th_send(t, 6000, 80, A, IRS + 100, iss + 1, W, NULL, NULL, 0);  /* wrong peer ISN */
	CHECK(th_expect(t, &s, IPK_TCP_RST, iss + 1, 0));
	th_send(t, 6001, 80, A, IRS + 1, iss + 1, W, NULL, NULL, 0);    /* wrong port */
	CHECK(th_expect(t, &s, IPK_TCP_RST, iss + 1, 0));
	CHECK_EQ(cnt(t)->tcp_syncookies_failed, 3);
	CHECK_EQ(t->accepted, 0);
	/* the right ACK still works, until the cookie is too old */
	t->now += 150 * SEC; /* two ticks of 2^36 ns */
	th_send(t, 6000, 80, A, IRS + 1, iss + 1, W, NULL, NULL, 0);
	CHECK_EQ(t->accepted, 0);
	ipk_tcp_unlisten(t->ctx, be(80));
	th_run_for(t, 300 * SEC);
	finish(t);
}

static void cookies_always(struct ipk_config *c) { c->tcp_syncookies = 2; }

static void test_listen_syncookies_always_mode(void)
{
	struct th *t = th_new(cookies_always);
	struct ipk_tcp_opts o = syn_opts(1000, 0);
	struct tseg s;

	ipk_tcp_listen(t->ctx, be(80), 8);
	th_send(t, 5000, 80, IPK_TCP_SYN, IRS, 0, W, &o, NULL, 0);
	CHECK(th_next(t, &s));
	CHECK_EQ(s.h.flags, IPK_TCP_SYN | A);
	CHECK_EQ(ipk_conns_free(t->ctx), t->nconns);
	CHECK_EQ(cnt(t)->tcp_syncookies_sent, 1);
	th_send(t, 5000, 80, A, IRS + 1, s.h.seq + 1, W, NULL, NULL, 0);
	CHECK_EQ(t->accepted, 1);
	CHECK_EQ(t->conn->mss, 536); /* 1000 rounds down to the table's 536 */
	ipk_tcp_abort(t->ctx, t->conn, t->now);
	finish(t);
}

/* A cookie SYN-ACK (cookies always) answering a SYN from sport with MSS 1400,
 * window scale 5 and SACK-permitted, timestamps when ts, and `flags` added. */
static int cookie_synack_opts(struct th *t, uint16_t sport, int ts, uint8_t flags,
                              struct tseg *sa)
{
	struct ipk_tcp_opts o = syn_opts(1400, 1);

	o.ws = 5;
	o.has_sack_perm = 1;
	o.has_ts = (uint8_t)ts;
	o.tsval = 1000;
	th_send(t, sport, 80, (uint8_t)(IPK_TCP_SYN | flags), IRS, 0, W, &o, NULL, 0);
	if (!th_next(t, sa))
		return 0;
	CHECK_EQ(cnt(t)->tcp_syncookies_sent, 1);
	CHECK_EQ(ipk_conns_free(t->ctx), t->nconns); /* no state kept */
	return 1;
}

/* RFC 4987 §3.6 with RFC 7323: the SYN had timestamps, so the cookie SYN-ACK offers
 * window scale and SACK back, our TSval carries the peer's choices, and the
 * connection the ACK opens scales the peer's window by 5 and takes SACK blocks. */
static void test_listen_syncookie_with_timestamps_keeps_ws_and_sack(void)
{
	struct th *t = th_new(cookies_always);
	struct ipk_tcp_opts o;
	struct ipk_tcp_info in;
	struct ipk_conn *c;
	struct tseg sa, s;
	uint32_t iss;

	ipk_tcp_listen(t->ctx, be(80), 8);
	CHECK(cookie_synack_opts(t, 5000, 1, 0, &sa));
	CHECK(sa.o.has_ts && sa.o.has_ws && sa.o.has_sack_perm);
	CHECK_EQ(sa.o.tsecr, 1000);
	CHECK_EQ(sa.o.ws, t->cfg.tcp_wscale);
	CHECK_EQ(sa.o.tsval & 0x3fu, 0x10u | 5u); /* SACK bit, shift 5 */
	CHECK(!(sa.h.flags & IPK_TCP_ECE));
	iss = sa.h.seq;
	o = th_ts_opt(1001, sa.o.tsval);
	th_send(t, 5000, 80, A, IRS + 1, iss + 1, 100, &o, NULL, 0);
	CHECK_EQ(cnt(t)->tcp_syncookies_ok, 1);
	CHECK_EQ(t->accepted, 1);
	c = t->conn;
	CHECK(ipk_tcp_info(c, &in) == IPK_OK);
	CHECK(in.ts_ok && in.sack_ok);
	CHECK_EQ(in.snd_wscale, 5);
	CHECK_EQ(in.rcv_wscale, t->cfg.tcp_wscale);
	CHECK_EQ(in.snd_wnd, 100u << 5); /* the ACK's window, scaled */
	CHECK_EQ(in.mss, 1400 - 12);
	/* SACK in use: two segments out, the second SACKed */
	CHECK_EQ(ipk_tcp_write(t->ctx, c, "0123456789", 10, t->now), 10);
	CHECK_EQ(ipk_tcp_write(t->ctx, c, "abcdefghij", 10, t->now), 10);
	while (th_next(t, &s))
		CHECK(s.o.has_ts && s.o.tsval - sa.o.tsval < 1000u); /* TSval never went back */
	o = th_ts_opt(1002, sa.o.tsval);
	o.nsack = 1;
	o.sack[0][0] = iss + 11;
	o.sack[0][1] = iss + 21;
	th_send(t, 5000, 80, A, IRS + 1, iss + 1, 100, &o, NULL, 0);
	CHECK(ipk_tcp_info(c, &in) == IPK_OK);
	CHECK_EQ(in.sacked_bytes, 10);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

/* The option bits are part of the cookie: an ACK echoing other bits does not open
 * a connection. */
static void test_listen_syncookie_tampered_option_bits_fail(void)
{
	struct th *t = th_new(cookies_always);
	struct ipk_tcp_opts o;
	struct tseg sa, s;

	ipk_tcp_listen(t->ctx, be(80), 8);
	CHECK(cookie_synack_opts(t, 5000, 1, 0, &sa));
	o = th_ts_opt(1001, sa.o.tsval ^ 0xeu); /* claims window scale 11 */
	th_send(t, 5000, 80, A, IRS + 1, sa.h.seq + 1, 100, &o, NULL, 0);
	CHECK(th_expect(t, &s, IPK_TCP_RST, sa.h.seq + 1, 0));
	CHECK_EQ(cnt(t)->tcp_syncookies_failed, 1);
	CHECK_EQ(t->accepted, 0);
	o = th_ts_opt(1001, sa.o.tsval); /* the true echo still works */
	th_send(t, 5000, 80, A, IRS + 1, sa.h.seq + 1, 100, &o, NULL, 0);
	CHECK_EQ(t->accepted, 1);
	ipk_tcp_abort(t->ctx, t->conn, t->now);
	finish(t);
}

/* Without timestamps there is nowhere to keep them: no window scale, no SACK. */
static void test_listen_syncookie_without_timestamps_drops_ws_and_sack(void)
{
	struct th *t = th_new(cookies_always);
	struct ipk_tcp_info in;
	struct tseg sa;

	ipk_tcp_listen(t->ctx, be(80), 8);
	CHECK(cookie_synack_opts(t, 5000, 0, 0, &sa));
	CHECK(!sa.o.has_ts && !sa.o.has_ws && !sa.o.has_sack_perm);
	th_send(t, 5000, 80, A, IRS + 1, sa.h.seq + 1, 100, NULL, NULL, 0);
	CHECK_EQ(t->accepted, 1);
	CHECK(ipk_tcp_info(t->conn, &in) == IPK_OK);
	CHECK(!in.ts_ok && !in.sack_ok);
	CHECK_EQ(in.snd_wscale, 0);
	CHECK_EQ(in.snd_wnd, 100);
	ipk_tcp_abort(t->ctx, t->conn, t->now);
	finish(t);
}

static void cookies_always_ecn(struct ipk_config *c)
{
	c->tcp_syncookies = 2;
	c->tcp_ecn = 1;
}

/* RFC 3168 §6.1.1 through a cookie: an ECN-setup SYN gets an ECN-setup SYN-ACK and
 * the connection has ECN. */
static void test_listen_syncookie_with_timestamps_keeps_ecn(void)
{
	struct th *t = th_new(cookies_always_ecn);
	struct ipk_tcp_opts o;
	struct ipk_tcp_info in;
	struct tseg sa;

	ipk_tcp_listen(t->ctx, be(80), 8);
	CHECK(cookie_synack_opts(t, 5000, 1, IPK_TCP_ECE | IPK_TCP_CWR, &sa));
	CHECK_EQ(sa.h.flags, IPK_TCP_SYN | A | IPK_TCP_ECE);
	CHECK_EQ(sa.o.tsval & 0x20u, 0x20u);
	o = th_ts_opt(1001, sa.o.tsval);
	th_send(t, 5000, 80, A, IRS + 1, sa.h.seq + 1, 100, &o, NULL, 0);
	CHECK_EQ(t->accepted, 1);
	CHECK(ipk_tcp_info(t->conn, &in) == IPK_OK);
	CHECK_EQ(in.ecn, 1);
	ipk_tcp_abort(t->ctx, t->conn, t->now);
	finish(t);
}

/* ------------------------------------------------------------ TIME_WAIT */

/* A passive connection from sport that we close first, into TIME_WAIT. */
static struct ipk_conn *to_time_wait(struct th *t, uint16_t sport, uint32_t *iss)
{
	struct ipk_conn *c;
	struct tseg s;

	th_send(t, sport, 80, IPK_TCP_SYN, IRS, 0, W, NULL, NULL, 0);
	CHECK(th_next(t, &s));
	*iss = s.h.seq;
	th_send(t, sport, 80, A, IRS + 1, *iss + 1, W, NULL, NULL, 0);
	c = t->conn;
	ipk_tcp_close(t->ctx, c, t->now);
	th_send(t, sport, 80, IPK_TCP_FIN | A, IRS + 1, *iss + 2, W, NULL, NULL, 0);
	CHECK_EQ(c->state, IPK_TCP_TIME_WAIT);
	th_clear(t);
	return c;
}

static void test_time_wait_syn_above_rcv_nxt_reuses_tuple(void)
{
	struct th *t = th_new(NULL);
	struct tseg s;
	uint32_t iss;

	ipk_tcp_listen(t->ctx, be(80), 4);
	to_time_wait(t, 5000, &iss);
	/* RFC 6191 §2 (no timestamps): a SYN above everything received */
	th_send(t, 5000, 80, IPK_TCP_SYN, IRS + 100000, 0, W, NULL, NULL, 0);
	CHECK(th_next(t, &s));
	CHECK_EQ(s.h.flags, IPK_TCP_SYN | A);
	CHECK_EQ(s.h.ack, IRS + 100001);
	CHECK(ipk_seq_gt(s.h.seq, iss + 2)); /* new ISS above the old sequence space */
	CHECK_EQ(th_pending(t), 0);          /* one SYN-ACK, no ACK from the old one */
	CHECK_EQ(cnt(t)->tcp_tw_reused, 1);
	th_send(t, 5000, 80, A, IRS + 100001, s.h.seq + 1, W, NULL, NULL, 0);
	CHECK_EQ(t->accepted, 2);
	CHECK_EQ(ipk_tcp_state(t->conn), IPK_TCP_ESTABLISHED);
	ipk_tcp_abort(t->ctx, t->conn, t->now);
	finish(t);
}

static void test_time_wait_old_syn_gets_challenge_ack(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss;

	ipk_tcp_listen(t->ctx, be(80), 4);
	c = to_time_wait(t, 5000, &iss);
	th_send(t, 5000, 80, IPK_TCP_SYN, IRS, 0, W, NULL, NULL, 0);
	CHECK(th_expect(t, &s, A, iss + 2, IRS + 2));
	CHECK_EQ(c->state, IPK_TCP_TIME_WAIT);
	CHECK_EQ(cnt(t)->tcp_tw_reused, 0);
	th_run_for(t, t->cfg.tcp_time_wait_ns + SEC);
	finish(t);
}

/* As to_time_wait, with timestamps on both sides (peer's last TSval 102). */
static struct ipk_conn *to_time_wait_ts(struct th *t, uint16_t sport, uint32_t *iss)
{
	struct ipk_conn *c;
	struct ipk_tcp_opts o = th_ts_opt(100, 0);
	struct tseg s;

	th_send(t, sport, 80, IPK_TCP_SYN, IRS, 0, W, &o, NULL, 0);
	CHECK(th_next(t, &s));
	CHECK(s.o.has_ts);
	*iss = s.h.seq;
	o = th_ts_opt(101, s.o.tsval);
	th_send(t, sport, 80, A, IRS + 1, *iss + 1, W, &o, NULL, 0);
	c = t->conn;
	CHECK(c->fl & IPK_TCPF_TS_OK);
	ipk_tcp_close(t->ctx, c, t->now);
	o = th_ts_opt(102, s.o.tsval);
	th_send(t, sport, 80, IPK_TCP_FIN | A, IRS + 1, *iss + 2, W, &o, NULL, 0);
	CHECK_EQ(c->state, IPK_TCP_TIME_WAIT);
	th_clear(t);
	return c;
}

/* RFC 6191 §2 with timestamps: a newer TSval opens a new incarnation even when the
 * SYN's sequence number is not above the old connection's (a peer whose ISN clock
 * wrapped or restarted); an older TSval does not, whatever the sequence number. */
static void test_time_wait_syn_newer_tsval_reuses_tuple(void)
{
	struct th *t = th_new(NULL);
	struct ipk_tcp_opts o = th_ts_opt(200, 0);
	struct tseg s;
	uint32_t iss;

	ipk_tcp_listen(t->ctx, be(80), 4);
	to_time_wait_ts(t, 5000, &iss);
	th_send(t, 5000, 80, IPK_TCP_SYN, IRS - 5000, 0, W, &o, NULL, 0);
	CHECK(th_next(t, &s));
	CHECK_EQ(s.h.flags, IPK_TCP_SYN | A);
	CHECK_EQ(s.h.ack, IRS - 4999);
	CHECK_EQ(cnt(t)->tcp_tw_reused, 1);
	th_run_for(t, 200 * SEC);
	finish(t);
}

static void test_time_wait_syn_older_tsval_stays(void)
{
	struct th *t = th_new(NULL);
	struct ipk_tcp_opts o = th_ts_opt(50, 0);
	struct ipk_conn *c;
	uint32_t iss;

	ipk_tcp_listen(t->ctx, be(80), 4);
	c = to_time_wait_ts(t, 5000, &iss);
	th_send(t, 5000, 80, IPK_TCP_SYN, IRS + 100000, 0, W, &o, NULL, 0);
	CHECK_EQ(c->state, IPK_TCP_TIME_WAIT);
	CHECK_EQ(cnt(t)->tcp_tw_reused, 0);
	th_clear(t);
	th_run_for(t, t->cfg.tcp_time_wait_ns + SEC);
	finish(t);
}

static void tw_max2(struct ipk_config *c) { c->tcp_tw_max = 2; }

static void test_time_wait_max_recycles_oldest(void)
{
	struct th *t = th_new(tw_max2);
	struct ipk_conn *c0, *c2;
	uint32_t iss;

	ipk_tcp_listen(t->ctx, be(80), 4);
	c0 = to_time_wait(t, 5000, &iss);
	t->now += SEC;
	to_time_wait(t, 5001, &iss);
	CHECK_EQ(c0->state, IPK_TCP_TIME_WAIT);
	c2 = to_time_wait(t, 5002, &iss);
	CHECK_EQ(cnt(t)->tcp_tw_recycled, 1);
	CHECK_EQ(t->ctx->tw_n, 2);
	CHECK_EQ(ipk_conns_free(t->ctx), t->nconns - 2);
	CHECK(ipk_tcp_lookup(t->ctx, t->ip_be, be(80), t->peer_be, be(5000)) == NULL);
	CHECK(ipk_tcp_lookup(t->ctx, t->ip_be, be(80), t->peer_be, be(5002)) == c2);
	th_run_for(t, t->cfg.tcp_time_wait_ns + 2 * SEC);
	CHECK_EQ(t->ctx->tw_n, 0);
	finish(t);
}

/* tcp_tw_max above the pool (the default 4096 against a node's 1024): TIME_WAIT
 * alone fills the pool, and a server that closes first would refuse every SYN
 * for 2*MSL. A new connection takes the oldest TIME_WAIT one's object instead. */
static void tw_unbounded(struct ipk_config *c) { c->tcp_tw_max = 0; }

static void test_time_wait_full_pool_yields_to_new_connections(void)
{
	struct th *t = th_new(tw_unbounded);
	struct ipk_conn *first, *c = NULL;
	struct tseg s;
	uint32_t iss, i;

	ipk_tcp_listen(t->ctx, be(80), 4);
	first = to_time_wait(t, 5000, &iss);
	for (i = 1; i < t->nconns; i++) {
		t->now += 1000000; /* 1 ms apart: oldest first */
		to_time_wait(t, (uint16_t)(5000 + i), &iss);
	}
	CHECK_EQ(ipk_conns_free(t->ctx), 0);
	CHECK_EQ(t->ctx->tw_n, t->nconns);
	CHECK_EQ(cnt(t)->tcp_tw_recycled, 0);
	/* a SYN from a new port: answered, the oldest TIME_WAIT freed for it */
	th_send(t, 6000, 80, IPK_TCP_SYN, IRS, 0, W, NULL, NULL, 0);
	CHECK(th_next(t, &s));
	CHECK_EQ(s.h.flags, IPK_TCP_SYN | A);
	CHECK_EQ(cnt(t)->tcp_tw_recycled, 1);
	CHECK(ipk_tcp_lookup(t->ctx, t->ip_be, be(80), t->peer_be, be(5000)) == NULL);
	CHECK(ipk_tcp_lookup(t->ctx, t->ip_be, be(80), t->peer_be, be(5001)) != NULL);
	th_send(t, 6000, 80, A, IRS + 1, s.h.seq + 1, W, NULL, NULL, 0);
	CHECK_EQ(ipk_tcp_state(t->conn), IPK_TCP_ESTABLISHED);
	CHECK(t->conn != NULL && first != NULL);
	th_clear(t);
	/* an active open too: the next oldest goes */
	CHECK_EQ(ipk_tcp_connect(t->ctx, t->peer_be, be(9), 0, NULL, &c, t->now), IPK_OK);
	CHECK(th_next(t, &s));
	CHECK_EQ(s.h.flags, IPK_TCP_SYN);
	CHECK_EQ(cnt(t)->tcp_tw_recycled, 2);
	CHECK(ipk_tcp_lookup(t->ctx, t->ip_be, be(80), t->peer_be, be(5001)) == NULL);
	ipk_tcp_abort(t->ctx, c, t->now);
	ipk_tcp_abort(t->ctx, t->conn, t->now);
	th_clear(t);
	th_run_for(t, t->cfg.tcp_time_wait_ns + 2 * SEC);
	CHECK_EQ(t->ctx->tw_n, 0);
	finish(t);
}

static void one_port(struct ipk_config *c)
{
	c->eph_port_lo = 40000;
	c->eph_port_hi = 40000;
}

static void test_connect_takes_time_wait_tuple_when_ports_run_out(void)
{
	struct th *t = th_new(one_port);
	struct ipk_conn *c = NULL, *c2 = NULL;
	struct tseg s;
	uint32_t iss;

	CHECK_EQ(ipk_tcp_connect(t->ctx, t->peer_be, be(9), 0, NULL, &c, t->now), IPK_OK);
	CHECK(th_next(t, &s));
	iss = s.h.seq;
	th_send(t, 9, 40000, IPK_TCP_SYN | A, IRS, iss + 1, W, NULL, NULL, 0);
	ipk_tcp_write(t->ctx, c, "data", 4, t->now);
	ipk_tcp_close(t->ctx, c, t->now);
	th_send(t, 9, 40000, IPK_TCP_FIN | A, IRS + 1, iss + 6, W, NULL, NULL, 0);
	CHECK_EQ(c->state, IPK_TCP_TIME_WAIT);
	th_clear(t);
	/* too young to take over */
	CHECK_EQ(ipk_tcp_connect(t->ctx, t->peer_be, be(9), 0, NULL, &c2, t->now),
	         IPK_EADDRINUSE);
	th_advance(t, 1 * SEC);
	CHECK_EQ(ipk_tcp_connect(t->ctx, t->peer_be, be(9), 0, NULL, &c2, t->now), IPK_OK);
	CHECK_EQ(cnt(t)->tcp_tw_reused, 1);
	CHECK(th_next(t, &s));
	CHECK_EQ(s.h.flags, IPK_TCP_SYN);
	CHECK_EQ(s.h.sport_be, be(40000));
	CHECK(ipk_seq_gt(s.h.seq, iss + 6));
	ipk_tcp_abort(t->ctx, c2, t->now);
	CHECK_EQ(ipk_conns_free(t->ctx), t->nconns);
	finish(t);
}

/* ------------------------------------------------------------ ICMP */

static void test_established_forged_icmp_needfrag_ignored(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	static uint8_t buf[1460];
	uint8_t q[28];
	uint32_t iss;
	struct ipk_tcp_opts o = syn_opts(1460, 0);

	iss = th_accept(t, IRS, &o, W, &c);
	ipk_tcp_write(t->ctx, c, buf, sizeof(buf), t->now);
	CHECK(th_next(t, &s));
	memset(q, 0, sizeof(q));
	q[0] = 0x45;
	memcpy(q + 12, &t->ip_be, 4);
	memcpy(q + 16, &t->peer_be, 4);
	ipk_wrbe16(q + 20, be(80));
	ipk_wrbe16(q + 22, be(5000));
	/* RFC 5927 §4.1: before snd_una, at snd_max, far ahead: all ignored */
	ipk_wr32(q + 24, iss);
	ipk_tcp_icmp_error(t->ctx, IPK_ICMP_UNREACH, IPK_ICMP_UNREACH_NEEDFRAG, 600, q, 28);
	ipk_wr32(q + 24, iss + 1 + 1460);
	ipk_tcp_icmp_error(t->ctx, IPK_ICMP_UNREACH, IPK_ICMP_UNREACH_NEEDFRAG, 600, q, 28);
	ipk_wr32(q + 24, iss + (1u << 31));
	ipk_tcp_icmp_error(t->ctx, IPK_ICMP_UNREACH, IPK_ICMP_UNREACH_NEEDFRAG, 600, q, 28);
	/* another 4-tuple */
	ipk_wr32(q + 24, iss + 1);
	ipk_wrbe16(q + 22, be(5001));
	ipk_tcp_icmp_error(t->ctx, IPK_ICMP_UNREACH, IPK_ICMP_UNREACH_NEEDFRAG, 600, q, 28);
	CHECK_EQ(c->mss, 1460);
	CHECK_EQ(th_pending(t), 0);
	/* in flight, but an MTU below the floor: clamped to 536 */
	ipk_wrbe16(q + 22, be(5000));
	ipk_tcp_icmp_error(t->ctx, IPK_ICMP_UNREACH, IPK_ICMP_UNREACH_NEEDFRAG, 100, q, 28);
	CHECK_EQ(c->mss, 536);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

int main(void)
{
	RUN(test_established_rst_in_window_challenge_ack_counted);
	RUN(test_established_syn_out_of_window_challenge_ack);
	RUN(test_established_ack_older_than_max_window_dropped);
	RUN(test_established_challenge_acks_limited_per_second);
	RUN(test_established_invalid_acks_limited_per_connection);
	RUN(test_established_desync_ack_war_bounded);
	RUN(test_listen_syncookie_handshake_opens_connection);
	RUN(test_listen_syncookie_forged_ack_gets_rst);
	RUN(test_listen_syncookies_always_mode);
	RUN(test_listen_syncookie_with_timestamps_keeps_ws_and_sack);
	RUN(test_listen_syncookie_tampered_option_bits_fail);
	RUN(test_listen_syncookie_without_timestamps_drops_ws_and_sack);
	RUN(test_listen_syncookie_with_timestamps_keeps_ecn);
	RUN(test_time_wait_syn_above_rcv_nxt_reuses_tuple);
	RUN(test_time_wait_old_syn_gets_challenge_ack);
	RUN(test_time_wait_syn_newer_tsval_reuses_tuple);
	RUN(test_time_wait_syn_older_tsval_stays);
	RUN(test_time_wait_max_recycles_oldest);
	RUN(test_time_wait_full_pool_yields_to_new_connections);
	RUN(test_connect_takes_time_wait_tuple_when_ports_run_out);
	RUN(test_established_forged_icmp_needfrag_ignored);
	return check_summary();
}
