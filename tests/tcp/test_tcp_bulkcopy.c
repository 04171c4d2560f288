/*
 * The bulk copying path (bench/inmem's offload profile).
 *
 * Send-queue packet sizes of the copying write (core/tcp.c write_cap): with TSO and
 * scatter-gather each packet is filled to the buffer size (pkt_buf_size, 2048 here),
 * so a segment, a retransmission or a SACK-driven repair cuts those packets by
 * sequence at offsets that are not packet boundaries; without TSO one packet per MSS.
 * Every segment's payload is compared byte for byte with what was written.
 *
 * Bytes released with ipk_tcp_recved from a payload callback (core/tcp.c): the
 * window-update test exits early while more than half the buffer is announced, and
 * still announces a reopened window at once when less is.
 */
#include <string.h>

#include "check.h"
#include "harness.h"
#include "wire/wire.h"

#define IRS 1000u
#define W 65535
#define MSS 1460u
#define MS 1000000ull
#define A IPK_TCP_ACK
#define TOTAL 12000u

static uint8_t g_buf[TOTAL];

static void fill(void)
{
	uint32_t i;

	for (i = 0; i < TOTAL; i++)
		g_buf[i] = (uint8_t)((i * 2654435761u) >> 11);
}

static void tso_sg(struct ipk_config *c)
{
	c->caps = IPK_CAP_TSO | IPK_CAP_SG;
	c->tso_max = 16000;
	c->tcp_rack = 0; /* classic RFC 6675 loss detection: three duplicate ACKs */
	c->tcp_timestamps = 0;
}

static void sg_only(struct ipk_config *c)
{
	c->caps = IPK_CAP_SG;
	c->tcp_timestamps = 0;
}

static int sq_pbs(const struct ipk_conn *c, uint32_t *max_len)
{
	const struct ipk_pb *pb;
	int n = 0;

	*max_len = 0;
	for (pb = c->sq_head; pb; pb = pb->next, n++)
		if (pb->len > *max_len)
			*max_len = pb->len;
	return n;
}

/* A captured segment carries stream bytes [off, off + len) of g_buf. */
static int carries(const struct tseg *s, uint32_t iss, uint32_t off, uint32_t len)
{
	return s->h.seq == iss + 1 + off && s->len == len &&
	       memcmp(s->payload, g_buf + off, len) == 0;
}

static uint32_t open_write(struct th *t, struct ipk_conn **c, int sack)
{
	struct ipk_tcp_opts o = th_mss_opt(MSS);
	uint32_t iss;

	o.has_sack_perm = (uint8_t)sack;
	fill();
	iss = th_accept(t, IRS, &o, W, c);
	CHECK_EQ(ipk_tcp_write(t->ctx, *c, g_buf, TOTAL, t->now), (int)TOTAL);
	return iss;
}

static void ack(struct th *t, uint32_t iss, uint32_t off, const uint32_t *sack_end)
{
	struct ipk_tcp_opts o;

	memset(&o, 0, sizeof(o));
	if (sack_end) {
		o.nsack = 1;
		o.sack[0][0] = iss + 1 + 4460;
		o.sack[0][1] = iss + 1 + *sack_end;
	}
	th_send(t, TH_PEER_PORT, TH_LOCAL_PORT, A, IRS + 1, iss + 1 + off, W, &o, NULL, 0);
}

static void test_established_tso_sg_write_fills_packets_to_buffer(void)
{
	struct th *t = th_new(tso_sg);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t max_len, iss = open_write(t, &c, 0);

	/* 12000 bytes in 2048-byte packets: 6, not the 9 of one per MSS */
	CHECK_EQ(sq_pbs(c, &max_len), 6);
	CHECK_EQ(max_len, 2048);
	CHECK(th_next(t, &s));
	CHECK(s.chained);
	CHECK(s.txflags & IPK_TXOFF_TSO);
	CHECK(carries(&s, iss, 0, TOTAL));
	/* a write after a partial ACK tops up the tail packet first */
	ack(t, iss, 1000, NULL);
	CHECK_EQ(ipk_tcp_write(t->ctx, c, g_buf, 100, t->now), 100);
	CHECK_EQ(sq_pbs(c, &max_len), 6);
	ipk_tcp_abort(t->ctx, c, t->now);
	CHECK(th_no_leaks(t));
	th_free(t);
}

static void test_established_sg_only_write_keeps_one_packet_per_mss(void)
{
	struct th *t = th_new(sg_only);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t max_len, iss = open_write(t, &c, 0), off;

	CHECK_EQ(sq_pbs(c, &max_len), 9);
	CHECK_EQ(max_len, MSS);
	for (off = 0; off < TOTAL; off += MSS) {
		CHECK(th_next(t, &s));
		CHECK(carries(&s, iss, off, IPK_MIN(MSS, TOTAL - off)));
	}
	ipk_tcp_abort(t->ctx, c, t->now);
	CHECK(th_no_leaks(t));
	th_free(t);
}

/* RFC 6298 §5.4: the retransmission after an RTO starts at SND.UNA, here byte 1000
 * of the first 2048-byte packet, one MSS long across the boundary at 2048; the next
 * flight after its ACK crosses two more boundaries. */
static void test_established_tso_sg_rto_retransmits_across_packet_boundaries(void)
{
	struct th *t = th_new(tso_sg);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = open_write(t, &c, 0);

	CHECK(th_next(t, &s));
	ack(t, iss, 1000, NULL);
	th_clear(t);
	th_run_for(t, 3000 * MS);
	CHECK(th_next(t, &s));
	CHECK(carries(&s, iss, 1000, MSS));
	CHECK(s.chained);
	CHECK(t->ctx->cnt.tcp_retransmits >= 1);
	th_clear(t);
	ack(t, iss, 1000 + MSS, NULL);
	CHECK(th_next(t, &s));
	CHECK(carries(&s, iss, 1000 + MSS, 2 * MSS));
	ipk_tcp_abort(t->ctx, c, t->now);
	CHECK(th_no_leaks(t));
	th_free(t);
}

/* RFC 6675 §5: SACK above a hole that starts inside the second packet (byte 3000)
 * and ends inside the third (4460): the fast retransmission is exactly the hole. */
static void test_established_tso_sg_sack_repair_cuts_inside_packets(void)
{
	struct th *t = th_new(tso_sg);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t iss = open_write(t, &c, 1), ends[3] = {7380, 10300, TOTAL};
	int i;

	CHECK(th_next(t, &s));
	CHECK(carries(&s, iss, 0, TOTAL));
	ack(t, iss, 3000, NULL);
	th_clear(t);
	for (i = 0; i < 3; i++)
		ack(t, iss, 3000, &ends[i]);
	CHECK(th_next(t, &s));
	CHECK(carries(&s, iss, 3000, MSS));
	CHECK(s.chained);
	CHECK(t->ctx->cnt.tcp_retransmits >= 1);
	ipk_tcp_abort(t->ctx, c, t->now);
	CHECK(th_no_leaks(t));
	th_free(t);
}

/* ------------------------------------------------- releases from a callback */

static void small_rcvbuf(struct ipk_config *c)
{
	c->tcp_rcvbuf = 16384;
	c->tcp_quickack = 0; /* no quick ACKs at the start: one per two segments */
	c->tcp_wscale = 0;
	c->tcp_timestamps = 0;
}

static void (*g_payload)(struct ipk_ctx *, struct ipk_conn *, void *, void *, uint32_t,
                         uint32_t, void *);
static int g_release_all, g_sent_in_callback;

/* The harness's payload event, then (g_release_all) every unread byte released. */
static void release_all(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                        uint32_t off, uint32_t len, void *opaque)
{
	struct th *t = (struct th *)opaque;

	g_payload(ctx, c, user, pkt, off, len, opaque);
	if (!g_release_all)
		return;
	CHECK_EQ(ipk_tcp_recved(ctx, c, c->rcv_unread, t->now), IPK_OK);
	g_sent_in_callback += th_pending(t);
}

/* RFC 9293 §3.8.6.2.2: six unread full-sized segments leave less than half of the
 * 16 KiB buffer announced; the seventh's callback releases all. That segment alone
 * would wait for the delayed-ACK timer (RFC 9293 §3.8.6.3: one ACK per two
 * full-sized segments), but the reopened window goes out at once: one ACK after the
 * callback, announcing the whole buffer. */
static void test_established_recved_in_callback_announces_window_once(void)
{
	struct th *t = th_new(small_rcvbuf);
	struct ipk_conn *c;
	struct tseg s;
	struct ipk_tcp_opts o = th_mss_opt(MSS);
	uint32_t iss = th_accept(t, IRS, &o, W, &c), i;

	fill();
	g_payload = t->ops.tcp_payload;
	t->ops.tcp_payload = release_all;
	for (i = 0; i < 6; i++)
		th_seg(t, A, IRS + 1 + i * MSS, iss + 1, W, g_buf + i * MSS, MSS);
	CHECK_EQ(c->rcv_unread, 6 * MSS);
	th_clear(t);
	g_release_all = 1;
	g_sent_in_callback = 0;
	th_seg(t, A, IRS + 1 + 6 * MSS, iss + 1, W, g_buf + 6 * MSS, MSS);
	CHECK_EQ(g_sent_in_callback, 0);
	CHECK_EQ(c->rcv_unread, 0);
	CHECK(th_expect(t, &s, A, iss + 1, IRS + 1 + 7 * MSS));
	CHECK_EQ(s.h.wnd, 16384);
	CHECK_EQ(th_pending(t), 0);
	CHECK_EQ(t->rxlen, 7 * MSS);
	CHECK(memcmp(t->rx, g_buf, 7 * MSS) == 0);
	/* without a release the next segment waits for its pair or the timer */
	g_release_all = 0;
	th_seg(t, A, IRS + 1 + 7 * MSS, iss + 1, W, g_buf + 7 * MSS, MSS);
	CHECK_EQ(th_pending(t), 0);
	ipk_tcp_abort(t->ctx, c, t->now);
	CHECK(th_no_leaks(t));
	th_free(t);
}

int main(void)
{
	RUN(test_established_tso_sg_write_fills_packets_to_buffer);
	RUN(test_established_sg_only_write_keeps_one_packet_per_mss);
	RUN(test_established_tso_sg_rto_retransmits_across_packet_boundaries);
	RUN(test_established_tso_sg_sack_repair_cuts_inside_packets);
	RUN(test_established_recved_in_callback_announces_window_once);
	return check_summary();
}
