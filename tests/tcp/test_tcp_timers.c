/*
 * ACK policy (quick-ACK, every Nth segment, delayed-ACK timer), the zero-window
 * persist back-off, keep-alive, and the send-queue copy path under partial ACKs.
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

static void finish(struct th *t, struct ipk_conn *c)
{
	if (c)
		ipk_tcp_abort(t->ctx, c, t->now);
	CHECK(th_no_leaks(t));
	th_free(t);
}

/* Peer sends n full segments of 1000 bytes from *seq; returns ACKs we sent. */
static int send_segs(struct th *t, uint32_t *seq, uint32_t iss, int n)
{
	static uint8_t buf[1460];
	struct tseg s;
	int i, acks = 0;

	for (i = 0; i < n; i++) {
		th_seg(t, A, *seq, iss + 1, W, buf, 1460);
		*seq += 1460;
		while (th_next(t, &s))
			acks++;
	}
	return acks;
}

static void test_established_quickack_first_segments_then_every_second(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c), seq = IRS + 1;

	/* cfg.tcp_quickack = 16: every one of the first 16 segments is ACKed at once */
	CHECK_EQ(send_segs(t, &seq, iss, 16), 16);
	/* then one ACK per two full segments (RFC 5681 §4.2) */
	CHECK_EQ(send_segs(t, &seq, iss, 1), 0);
	CHECK_EQ(send_segs(t, &seq, iss, 1), 1);
	CHECK_EQ(send_segs(t, &seq, iss, 10), 5);
	finish(t, c);
}

static void test_established_ooo_data_restarts_quickack(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	static uint8_t buf[1460];
	uint32_t iss = th_accept(t, IRS, NULL, W, &c), seq = IRS + 1;

	send_segs(t, &seq, iss, 20);
	th_advance(t, 100 * MS);
	th_clear(t);
	/* a hole: the segment after it is ACKed at once (duplicate ACK) */
	th_seg(t, A, seq + 1460, iss + 1, W, buf, 1460);
	CHECK(th_expect(t, &s, A, iss + 1, seq));
	/* the hole fills: ACK at once, and the next segments too (quick again) */
	th_seg(t, A, seq, iss + 1, W, buf, 1460);
	CHECK(th_expect(t, &s, A, iss + 1, seq + 2920));
	seq += 2920;
	CHECK_EQ(send_segs(t, &seq, iss, 4), 4);
	finish(t, c);
}

static void every4(struct ipk_config *c)
{
	c->tcp_ack_every = 4;
	c->tcp_quickack = 0;
}

static void test_established_ack_every_configurable(void)
{
	struct th *t = th_new(every4);
	struct ipk_conn *c;
	struct tseg s;
	static uint8_t big[4 * 1460];
	uint32_t iss = th_accept(t, IRS, NULL, W, &c), seq = IRS + 1;

	CHECK_EQ(send_segs(t, &seq, iss, 3), 0);
	CHECK_EQ(send_segs(t, &seq, iss, 1), 1);
	CHECK_EQ(send_segs(t, &seq, iss, 8), 2);
	/* the delayed-ACK timer covers the rest */
	CHECK_EQ(send_segs(t, &seq, iss, 1), 0);
	th_advance(t, 40 * MS);
	CHECK(th_expect(t, &s, A, iss + 1, seq));
	/* a coalesced (LRO) segment of four MSS counts as four */
	th_seg(t, A, seq, iss + 1, W, big, sizeof(big));
	CHECK(th_expect(t, &s, A, iss + 1, seq + sizeof(big)));
	finish(t, c);
}

static void test_established_persist_backoff_doubles_until_window_opens(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, 0, &c);
	uint64_t gap = 200 * MS;
	int i;

	CHECK_EQ(ipk_tcp_write(t->ctx, c, "abcdef", 6, t->now), 6);
	CHECK_EQ(th_pending(t), 0);
	/* RFC 9293 §3.8.6.1 with RFC 6298 back-off: 200, 400, 800, ... ms apart */
	for (i = 0; i < 6; i++) {
		th_advance(t, gap - 1 * MS);
		CHECK_EQ(th_pending(t), 0);
		th_advance(t, 1 * MS);
		CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
		CHECK_EQ(s.len, 1);
		/* the probe is answered: window still zero, the byte not taken; such ACKs
		 * are not duplicate ACKs (no fast retransmit into a closed window) */
		th_seg(t, A, IRS + 1, iss + 1, 0, NULL, 0);
		CHECK_EQ(th_pending(t), 0);
		gap *= 2;
	}
	CHECK_EQ(t->ctx->cnt.tcp_fast_retransmits, 0);
	CHECK_EQ(c->cwnd, 10 * 536);
	/* a window update ends persist: the data goes and no probe follows */
	th_seg(t, A, IRS + 1, iss + 1, 1000, NULL, 0);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	CHECK_EQ(s.len, 6);
	CHECK(!ipk_tcp_persist_armed(c));
	CHECK_EQ(c->npersist, 0);
	th_seg(t, A, IRS + 1, iss + 7, 1000, NULL, 0);
	th_advance(t, 60 * SEC);
	CHECK_EQ(th_pending(t), 0);
	finish(t, c);
}

static void ka_cfg(struct ipk_config *c)
{
	c->tcp_keepalive = 1;
	c->tcp_keepalive_idle_ns = 10 * SEC;
	c->tcp_keepalive_intvl_ns = 1 * SEC;
	c->tcp_keepalive_cnt = 3;
}

static void test_established_keepalive_dead_peer_times_out(void)
{
	struct th *t = th_new(ka_cfg);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);
	int i;

	th_advance(t, 10 * SEC - 1);
	CHECK_EQ(th_pending(t), 0);
	for (i = 0; i < 3; i++) {
		th_advance(t, i == 0 ? 1 : 1 * SEC);
		/* RFC 1122 §4.2.3.6: SEG.SEQ = SND.NXT - 1, no data */
		CHECK(th_expect(t, &s, A, iss, IRS + 1));
		CHECK_EQ(s.len, 0);
		CHECK_EQ(t->closed, 0);
	}
	th_advance(t, 1 * SEC);
	CHECK_EQ(t->closed, 1);
	CHECK_EQ(t->why, IPK_CLOSE_TIMEOUT);
	finish(t, NULL);
}

static void test_established_keepalive_answer_restarts_idle(void)
{
	struct th *t = th_new(ka_cfg);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	th_advance(t, 10 * SEC);
	CHECK(th_expect(t, &s, A, iss, IRS + 1));
	th_advance(t, 500 * MS);
	th_seg(t, A, IRS + 1, iss + 1, W, NULL, 0); /* the peer answers */
	th_advance(t, 10 * SEC - 1);
	CHECK_EQ(th_pending(t), 0);
	th_advance(t, 1);
	CHECK(th_expect(t, &s, A, iss, IRS + 1));
	CHECK_EQ(c->nkeepalive, 1);
	CHECK_EQ(t->closed, 0);
	finish(t, c);
}

static void test_established_keepalive_off_by_default_and_per_connection(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	th_advance(t, 3 * 3600 * SEC);
	CHECK_EQ(th_pending(t), 0);
	CHECK_EQ(ipk_tcp_set_keepalive(t->ctx, NULL, 1, t->now), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_set_keepalive(t->ctx, c, 1, t->now), IPK_OK);
	th_advance(t, 7200 * SEC); /* the default idle time, RFC 1122's two hours */
	CHECK(th_expect(t, &s, A, iss, IRS + 1));
	CHECK_EQ(ipk_tcp_set_keepalive(t->ctx, c, 0, t->now), IPK_OK);
	th_advance(t, 3 * 3600 * SEC);
	CHECK_EQ(th_pending(t), 0);
	finish(t, c);
}

static uint8_t pat(uint32_t i) { return (uint8_t)(i * 7u + 3u); }

/* Regression: after a partial ACK of a copy-packet, ipk_tcp_write appended beyond
 * the packet buffer (room was computed from the unacknowledged length), corrupting
 * a neighbouring buffer and sending garbage. */
static void test_established_write_after_partial_ack_stays_in_buffer(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	struct ipk_tcp_opts o = th_mss_opt(1460);
	static uint8_t buf[4000];
	uint32_t iss = th_accept(t, IRS, &o, W, &c), i;
	int bad = 0;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = pat(i);
	CHECK_EQ(ipk_tcp_write(t->ctx, c, buf, 1400, t->now), 1400);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	th_seg(t, A, IRS + 1, iss + 1301, W, NULL, 0);
	CHECK_EQ(ipk_tcp_write(t->ctx, c, buf + 1400, 2600, t->now), 2600);
	for (i = 1400; i < 4000;) {
		if (!th_next(t, &s)) {
			bad++;
			break;
		}
		CHECK_EQ(s.h.seq, iss + 1 + i);
		for (uint32_t j = 0; j < s.len; j++)
			bad += s.payload[j] != pat(i + j);
		i += s.len;
	}
	CHECK_EQ(bad, 0);
	finish(t, c);
}

int main(void)
{
	RUN(test_established_quickack_first_segments_then_every_second);
	RUN(test_established_ooo_data_restarts_quickack);
	RUN(test_established_ack_every_configurable);
	RUN(test_established_persist_backoff_doubles_until_window_opens);
	RUN(test_established_keepalive_dead_peer_times_out);
	RUN(test_established_keepalive_answer_restarts_idle);
	RUN(test_established_keepalive_off_by_default_and_per_connection);
	RUN(test_established_write_after_partial_ack_stays_in_buffer);
	return check_summary();
}
