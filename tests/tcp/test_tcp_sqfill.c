/*
 * Send-queue packet sizes of the copying write (core/tcp.c write_cap): with TSO and
 * scatter-gather each packet is filled to the buffer size (pkt_buf_size, 2048 here),
 * so a segment, a retransmission or a SACK-driven repair cuts those packets by
 * sequence at offsets that are not packet boundaries; without TSO one packet per MSS.
 * Every segment's payload is compared byte for byte with what was written.
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

int main(void)
{
	RUN(test_established_tso_sg_write_fills_packets_to_buffer);
	RUN(test_established_sg_only_write_keeps_one_packet_per_mss);
	RUN(test_established_tso_sg_rto_retransmits_across_packet_boundaries);
	RUN(test_established_tso_sg_sack_repair_cuts_inside_packets);
	return check_summary();
}
