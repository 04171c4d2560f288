/*
 * ACKs per receive batch (core/tcp_ack.c): when one ipk_run call carries several
 * in-order frames of a connection, the ACK the segment count makes due waits for the
 * end of the batch and acknowledges all of it, instead of one ACK per frame (with
 * coalesced 64 KiB frames from a TAP or an LRO NIC every frame reaches the count).
 * A frame alone, the last frame of a batch, out-of-order data and other connections
 * still get their ACK at once.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "wire/wire.h"

#define IRS 5000000u
#define A IPK_TCP_ACK
#define W 65535
#define SEG 100u /* payload bytes per scripted frame */
#define MAXB 8 /* frames per scripted batch */

static uint8_t data[SEG * MAXB];

static void no_quickack(struct ipk_config *c) { c->tcp_quickack = 0; }

static void finish(struct th *t)
{
	CHECK(th_no_leaks(t));
	th_free(t);
}

struct fspec {
	uint16_t sport;
	uint8_t flags;
	uint32_t seq, ack;
};

/* One ipk_run call with n frames from the peer, SEG bytes of data each unless RST. */
static void batch(struct th *t, int n, const struct fspec *f)
{
	void *v[MAXB];
	int i;

	for (i = 0; i < n; i++) {
		struct sim_pkt *k = sim_pkt_alloc(t->pool);
		uint32_t len = (f[i].flags & IPK_TCP_RST) ? 0 : SEG;

		k->len = th_frame(t, sim_pkt_data(k), f[i].sport, TH_LOCAL_PORT, f[i].flags, f[i].seq,
		                  f[i].ack, W, NULL, data + (uint32_t)i * SEG, len);
		v[i] = k;
	}
	ipk_run(t->ctx, v, (uint32_t)n, t->now);
}

/* n frames of one connection (default ports), in order from sequence seq */
static void batch_in_order(struct th *t, int n, uint32_t seq, uint32_t ack)
{
	struct fspec f[MAXB];
	int i;

	for (i = 0; i < n; i++) {
		f[i].sport = TH_PEER_PORT;
		f[i].flags = A;
		f[i].seq = seq + (uint32_t)i * SEG;
		f[i].ack = ack;
	}
	batch(t, n, f);
}

static void small_rcvbuf(struct ipk_config *c)
{
	c->tcp_quickack = 0;
	c->tcp_rcvbuf = 16384;
}

/* A batch longer than a quarter of the window we offered does not wait for its end:
 * with a 16 KiB window and segments counted as a 1460-byte MSS each, the fourth
 * frame (4 * 1460 * 3 > 16384 - 400) is ACKed at once, the last two at the end. */
static void test_batch_ack_bounded_by_window(void)
{
	struct th *t = th_new(small_rcvbuf);
	struct ipk_conn *c;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);
	struct tseg s;

	batch_in_order(t, 6, IRS + 1, iss + 1);
	CHECK_EQ(t->rxlen, 6 * SEG);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1 + 4 * SEG));
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1 + 6 * SEG));
	CHECK_EQ(th_pending(t), 0);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

/* Two in-order frames from IRS + 1, then one at seq3 with flags3, in one batch. */
static void batch3(struct th *t, uint32_t ack, uint32_t seq3, uint8_t flags3)
{
	struct fspec f[3] = {{TH_PEER_PORT, A, IRS + 1, 0}, {TH_PEER_PORT, A, IRS + 1 + SEG, 0},
	                     {TH_PEER_PORT, 0, 0, 0}};

	f[0].ack = f[1].ack = f[2].ack = ack;
	f[2].seq = seq3;
	f[2].flags = flags3;
	batch(t, 3, f);
}

/* Four in-order frames in one batch: one ACK, for all four (was: after the second and
 * after the fourth). */
static void test_batch_one_cumulative_ack(void)
{
	struct th *t = th_new(no_quickack);
	struct ipk_conn *c;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);
	struct tseg s;

	batch_in_order(t, 4, IRS + 1, iss + 1);
	CHECK_EQ(t->rxlen, 4 * SEG);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1 + 4 * SEG));
	CHECK_EQ(th_pending(t), 0);
	CHECK_EQ(c->delack_at, 0); /* nothing left for the delayed-ACK timer */
	/* a frame alone still reaches the count with the next one and is ACKed at once */
	th_seg(t, A, IRS + 1 + 4 * SEG, iss + 1, W, data, SEG);
	CHECK_EQ(th_pending(t), 0);
	th_seg(t, A, IRS + 1 + 5 * SEG, iss + 1, W, data, SEG);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1 + 6 * SEG));
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

/* Three frames: the count is reached at the second (deferred), the third is the last
 * of the batch and takes the ACK itself; nothing more at the end of the batch. */
static void test_batch_last_frame_acks(void)
{
	struct th *t = th_new(no_quickack);
	struct ipk_conn *c;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);
	struct tseg s;

	batch3(t, iss + 1, IRS + 1 + 2 * SEG, A);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1 + 3 * SEG));
	CHECK_EQ(th_pending(t), 0);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

/* Out-of-order data in the batch is ACKed at once (RFC 5681 §4.2 duplicate ACK), and
 * the in-order frames before it were covered by that ACK's cumulative point. */
static void test_batch_ooo_acked_at_once(void)
{
	struct th *t = th_new(no_quickack);
	struct ipk_conn *c;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);
	struct tseg s;

	batch3(t, iss + 1, IRS + 1 + 3 * SEG, A); /* a hole at 2 * SEG */
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1 + 2 * SEG)); /* the duplicate ACK */
	CHECK_EQ(th_pending(t), 0);
	ipk_tcp_abort(t->ctx, c, t->now);
	finish(t);
}

/* The connection that deferred its ACK is reset by a later frame of the same batch:
 * no ACK for it, and the hold on it does not leak it. */
static void test_batch_reset_after_defer(void)
{
	struct th *t = th_new(no_quickack);
	struct ipk_conn *c;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);

	batch3(t, iss + 1, IRS + 1 + 2 * SEG, IPK_TCP_RST);
	CHECK_EQ(t->closed, 1);
	CHECK_EQ(th_pending(t), 0);
	finish(t);
}

/* Two connections in one batch: the first defers its ACK; the second, while the
 * first waits, ACKs at once as before; the first's ACK goes at the end of the batch. */
static void test_batch_second_conn_acks_at_once(void)
{
	struct th *t = th_new(no_quickack);
	struct ipk_conn *c1, *c2;
	uint32_t iss1 = th_accept(t, IRS, NULL, W, &c1), iss2;
	struct fspec f[5];
	struct tseg s;

	th_send(t, TH_PEER_PORT + 1, TH_LOCAL_PORT, IPK_TCP_SYN, IRS, 0, W, NULL, NULL, 0);
	CHECK(th_next(t, &s));
	iss2 = s.h.seq;
	th_send(t, TH_PEER_PORT + 1, TH_LOCAL_PORT, A, IRS + 1, iss2 + 1, W, NULL, NULL, 0);
	c2 = t->conn;
	CHECK(c2 != c1);
	f[0] = (struct fspec){TH_PEER_PORT, A, IRS + 1, iss1 + 1};
	f[1] = (struct fspec){TH_PEER_PORT, A, IRS + 1 + SEG, iss1 + 1};
	f[2] = (struct fspec){TH_PEER_PORT + 1, A, IRS + 1, iss2 + 1};
	f[3] = (struct fspec){TH_PEER_PORT + 1, A, IRS + 1 + SEG, iss2 + 1};
	f[4] = (struct fspec){TH_PEER_PORT, A, IRS + 1 + 2 * SEG, iss1 + 1};
	batch(t, 5, f);
	CHECK(th_next(t, &s));
	CHECK_EQ(s.h.sport_be, ipk_htons(TH_LOCAL_PORT));
	CHECK_EQ(s.h.dport_be, ipk_htons(TH_PEER_PORT + 1));
	CHECK_EQ(s.h.ack, IRS + 1 + 2 * SEG);
	CHECK(th_next(t, &s));
	CHECK_EQ(s.h.dport_be, ipk_htons(TH_PEER_PORT));
	CHECK_EQ(s.h.ack, IRS + 1 + 3 * SEG);
	CHECK_EQ(th_pending(t), 0);
	ipk_tcp_abort(t->ctx, c1, t->now);
	ipk_tcp_abort(t->ctx, c2, t->now);
	finish(t);
}

int main(void)
{
	uint32_t i;

	for (i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7u + 3u);
	RUN(test_batch_one_cumulative_ack);
	RUN(test_batch_last_frame_acks);
	RUN(test_batch_ooo_acked_at_once);
	RUN(test_batch_reset_after_defer);
	RUN(test_batch_second_conn_acks_at_once);
	RUN(test_batch_ack_bounded_by_window);
	return check_summary();
}
