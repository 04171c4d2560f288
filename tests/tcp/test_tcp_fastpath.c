/*
 * The per-event fast paths: header prediction on input (RFC 9293 §3.10.7.4's common
 * case, counted in tcp_fast_path) must take in-order data and advancing ACKs and leave
 * every other segment to the full path; a reply written from the payload event goes
 * out once, with the ACK on it; a write outside any event is sent at once.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "wire/wire.h"

#define IRS 5000000u
#define A IPK_TCP_ACK
#define W 65535
#define TSV 1000u

static void no_delack(struct ipk_config *c) { c->tcp_delack_ns = 0; }

static uint64_t hits(const struct th *t) { return ipk_counters(t->ctx)->tcp_fast_path; }

static void finish(struct th *t, struct ipk_conn *c)
{
	ipk_tcp_abort(t->ctx, c, t->now);
	CHECK(th_no_leaks(t));
	th_free(t);
}

/* Peer segment with a timestamp (and nsack SACK blocks when sk is set). */
static void ts_seg(struct th *t, uint8_t flags, uint32_t seq, uint32_t ack, uint32_t tsval,
                   uint32_t (*sk)[2], int nsack, const void *p, uint32_t len)
{
	struct ipk_tcp_opts o = th_ts_opt(tsval, 0);
	int i;

	for (i = 0; i < nsack; i++) {
		o.sack[i][0] = sk[i][0];
		o.sack[i][1] = sk[i][1];
	}
	o.nsack = (uint8_t)nsack;
	th_send(t, TH_PEER_PORT, TH_LOCAL_PORT, flags, seq, ack, W, &o, p, len);
}

/* No options negotiated: the predicted cases hit, each exception goes the full way
 * (and is still processed: data delivered, ACKs sent). */
static void test_established_fastpath_taken_only_when_predicted(void)
{
	struct th *t = th_new(no_delack);
	struct ipk_conn *c;
	struct tseg s;
	uint8_t buf[100];
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);
	uint64_t h;

	memset(buf, 'q', sizeof(buf));
	h = hits(t);
	th_seg(t, A, IRS + 1, iss + 1, W, buf, 10); /* in order, ACK = snd_una */
	CHECK_EQ(hits(t), h + 1);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 11));
	th_seg(t, A | IPK_TCP_PSH, IRS + 11, iss + 1, W, buf, 10); /* PSH is allowed */
	CHECK_EQ(hits(t), h + 2);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 21));
	CHECK_EQ(t->rxlen, 20);

	h = hits(t);
	th_seg(t, A, IRS + 121, iss + 1, W, buf, 10); /* out of order */
	CHECK_EQ(hits(t), h);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 21));
	th_seg(t, A, IRS + 21, iss + 1, W, buf, 100); /* in order, but a queue to drain */
	CHECK_EQ(hits(t), h);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 131));
	CHECK_EQ(t->rxlen, 130);
	th_seg(t, A, IRS + 131, iss + 1, W - 100, buf, 10); /* window changed */
	CHECK_EQ(hits(t), h);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 141));
	th_seg(t, A, IRS + 141, iss + 1, W - 100, buf, 10); /* the same again: predicted */
	CHECK_EQ(hits(t), h + 1);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 151));

	h = hits(t);
	th_seg(t, A, IRS + 151, iss + 1, W - 100, NULL, 0); /* duplicate ACK */
	CHECK_EQ(hits(t), h);
	CHECK_EQ(th_pending(t), 0);
	/* a write outside any event is sent at once */
	CHECK_EQ(ipk_tcp_write(t->ctx, c, "hello", 5, t->now), 5);
	CHECK(th_expect(t, &s, A | IPK_TCP_PSH, iss + 1, IRS + 151));
	CHECK_EQ(s.len, 5);
	th_seg(t, A, IRS + 151, iss + 9, W - 100, NULL, 0); /* ACK beyond snd_max */
	CHECK_EQ(hits(t), h);
	th_clear(t);
	th_seg(t, A, IRS + 151, iss + 6, W - 100, NULL, 0); /* pure ACK advancing snd_una */
	CHECK_EQ(hits(t), h + 1);
	CHECK_EQ(t->acked, 5);
	CHECK_EQ(th_pending(t), 0);
	th_seg(t, A | IPK_TCP_URG, IRS + 151, iss + 6, W - 100, buf, 10); /* URG */
	CHECK_EQ(hits(t), h + 1);
	CHECK(th_expect(t, &s, A, iss + 6, IRS + 161));
	th_seg(t, A | IPK_TCP_FIN, IRS + 161, iss + 6, W - 100, buf, 10); /* FIN */
	CHECK_EQ(hits(t), h + 1);
	CHECK(th_expect(t, &s, A, iss + 6, IRS + 172));
	CHECK_EQ(t->rxlen, 170);
	CHECK_EQ(t->fins, 1);
	finish(t, c);
}

/* Timestamps and SACK negotiated: the timestamp is the expected option; SACK blocks,
 * a missing or old timestamp and other options go the full way. */
static void test_established_fastpath_options(void)
{
	struct th *t = th_new(no_delack);
	struct ipk_tcp_opts o = th_ts_opt(TSV, 0);
	struct ipk_conn *c;
	struct tseg s;
	uint8_t buf[10];
	uint32_t iss, sk[1][2];
	uint64_t h;

	memset(buf, 'z', sizeof(buf));
	o.has_sack_perm = 1;
	iss = th_accept(t, IRS, &o, W, &c);
	sk[0][0] = iss + 1; /* nothing is in flight: an invalid block, still not predicted */
	sk[0][1] = iss + 2;
	h = hits(t);
	ts_seg(t, A, IRS + 1, iss + 1, TSV + 1, NULL, 0, buf, 10);
	CHECK_EQ(hits(t), h + 1);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 11));
	CHECK(s.o.has_ts && s.o.tsecr == TSV + 1); /* TS.Recent taken on the fast path */
	ts_seg(t, A, IRS + 11, iss + 1, TSV + 2, sk, 1, buf, 10); /* SACK block */
	CHECK_EQ(hits(t), h + 1);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 21));
	/* no timestamp: RFC 7323 §3.2, dropped silently (no ACK) */
	th_seg(t, A, IRS + 21, iss + 1, W, buf, 10);
	CHECK_EQ(hits(t), h + 1);
	CHECK_EQ(th_pending(t), 0);
	CHECK_EQ(ipk_counters(t->ctx)->drop[IPK_DROP_TCP_NO_TS], 1);
	CHECK_EQ(t->rxlen, 20);
	ts_seg(t, A, IRS + 21, iss + 1, TSV + 2, NULL, 0, buf, 10); /* the same, with one */
	CHECK_EQ(hits(t), h + 2);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 31));
	h = hits(t) - 1;
	ts_seg(t, A, IRS + 31, iss + 1, TSV - 5, NULL, 0, buf, 10); /* PAWS: dropped */
	CHECK_EQ(hits(t), h + 1);
	th_clear(t);
	CHECK_EQ(t->rxlen, 30);
	o = th_ts_opt(TSV + 3, 0);
	o.has_mss = 1; /* an option only a SYN should carry */
	o.mss = 1000;
	th_send(t, TH_PEER_PORT, TH_LOCAL_PORT, A, IRS + 31, iss + 1, W, &o, buf, 10);
	CHECK_EQ(hits(t), h + 1);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 41));
	ts_seg(t, A, IRS + 41, iss + 1, TSV + 4, NULL, 0, buf, 10);
	CHECK_EQ(hits(t), h + 2);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 51));
	CHECK_EQ(t->rxlen, 50);
	finish(t, c);
}

/* The echo written from the payload event leaves as one segment that carries the
 * ACK: the write only queues, the event's one output pass sends. Before, the write
 * sent the data and the ACK policy that ran after it (quick ACKs at the start of a
 * connection) added a pure ACK behind it. */
static void test_established_echo_from_event_one_segment(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c), i, seq = IRS + 1;

	t->echo = 1;
	t->auto_recved = 1;
	for (i = 0; i < 4; i++) {
		th_seg(t, A, seq, iss + 1 + 7 * i, W, "request", 7);
		seq += 7;
		CHECK(th_expect(t, &s, A | IPK_TCP_PSH, iss + 1 + 7 * i, seq));
		CHECK_EQ(s.len, 7);
		CHECK(memcmp(s.payload, "request", 7) == 0);
		CHECK_EQ(th_pending(t), 0);
	}
	finish(t, c);
}

/* Two engines in ping-pong: nearly every segment is predicted on both sides, the
 * server sends exactly one segment per request, and every echo comes back intact. */
static void test_established_pingpong_predicted_both_sides(void)
{
	enum { N = 60, L = 32 };
	struct th *a, *b;
	struct ipk_conn *c = NULL;
	uint8_t req[L], *want = (uint8_t *)malloc(N * L);
	uint64_t a_tx, a_h, b_h;
	uint32_t i, j;

	th_pair(&a, &b, NULL);
	a->echo = 1;
	a->auto_recved = 1;
	b->auto_recved = 1;
	CHECK_EQ(ipk_tcp_listen(a->ctx, ipk_htons(80), 8), IPK_OK);
	CHECK_EQ(ipk_tcp_connect(b->ctx, a->ip_be, ipk_htons(80), 0, NULL, &c, 0), IPK_OK);
	th_pump(a, b);
	CHECK_EQ(a->accepted, 1);
	a_tx = ipk_counters(a->ctx)->tcp_tx_segs;
	a_h = hits(a);
	b_h = hits(b);
	for (i = 0; i < N; i++) {
		for (j = 0; j < L; j++)
			req[j] = (uint8_t)(i * 31u + j);
		memcpy(want + i * L, req, L);
		CHECK_EQ(ipk_tcp_write(b->ctx, c, req, L, b->now), L);
		th_pump(a, b);
		CHECK_EQ(b->rxlen, (i + 1) * L);
	}
	CHECK(memcmp(b->rx, want, N * L) == 0);
	CHECK_EQ(ipk_counters(a->ctx)->tcp_tx_segs - a_tx, N);
	/* a: every request but the first. b: most echoes; those whose window field
	 * moved go the full way (a keeps its right edge until it can open by an MSS,
	 * RFC 9293 §3.8.6.2.2, so the field shrinks by the request size at a's
	 * window-scale granularity). */
	CHECK(hits(a) - a_h >= N - 1);
	CHECK(hits(b) - b_h >= N / 2);
	ipk_tcp_abort(b->ctx, c, b->now);
	th_pump(a, b);
	CHECK(th_no_leaks(a) && th_no_leaks(b));
	th_free(a);
	th_free(b);
	free(want);
}

/* IPK_TCPF_FAST (tcp.h) marks a connection whose own fast-path conditions hold: set
 * at the end of the handshake's last event, cleared while an out-of-order queue holds
 * the extension record, set again by the event that drains it, cleared by close. The
 * harness checks on every frame and event that the mark never outlives its
 * conditions (ipk_tcp_fast_ok); here, that it comes back, so the one-bit test keeps
 * the fast paths in use. */
static void test_established_fast_mark_follows_conditions(void)
{
	struct th *t = th_new(no_delack);
	struct ipk_conn *c;
	struct tseg s;
	uint8_t buf[10];
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);
	uint64_t h;

	memset(buf, 'm', sizeof(buf));
	CHECK(c->fl & IPK_TCPF_FAST);
	th_seg(t, A, IRS + 11, iss + 1, W, buf, 10); /* out of order: queued */
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1));
	CHECK(c->x != NULL);
	CHECK(!(c->fl & IPK_TCPF_FAST));
	th_seg(t, A, IRS + 1, iss + 1, W, buf, 10); /* fills the gap, drains the queue */
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 21));
	CHECK(c->x == NULL);
	CHECK(c->fl & IPK_TCPF_FAST);
	h = hits(t);
	th_seg(t, A, IRS + 21, iss + 1, W, buf, 10); /* predicted through the mark */
	CHECK_EQ(hits(t), h + 1);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 31));
	CHECK_EQ(t->rxlen, 30);
	ipk_tcp_close(t->ctx, c, t->now);
	CHECK(!(c->fl & IPK_TCPF_FAST));
	finish(t, c);
}

int main(void)
{
	RUN(test_established_fastpath_taken_only_when_predicted);
	RUN(test_established_fastpath_options);
	RUN(test_established_echo_from_event_one_segment);
	RUN(test_established_pingpong_predicted_both_sides);
	RUN(test_established_fast_mark_follows_conditions);
	return check_summary();
}
