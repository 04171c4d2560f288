/*
 * The loss timer kept lazily across a ping-pong (tcp.h IPK_TCP_RTX_IDLE/LAZY_*): an
 * ACK of everything stops it without taking its deadline off, and the next send
 * restarts it behind that earlier deadline. At the early deadline the timer must
 * find its real one (RFC 6298 (5.1): the RTO runs from the send that started it;
 * RFC 8985 §7.2: the PTO from the latest transmission) and neither fire then nor
 * late, and an ACK in time must leave nothing to retransmit.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "wire/wire.h"

#define IRS 5000000u
#define A IPK_TCP_ACK
#define W 65535
#define US 1000ull
#define MS 1000000ull
#define SEC 1000000000ull
#define RTT (10 * MS)
#define IDLE (100 * MS)

static void finish(struct th *t, struct ipk_conn *c)
{
	ipk_tcp_abort(t->ctx, c, t->now);
	CHECK(th_no_leaks(t));
	th_free(t);
}

/* One byte out at once, its ACK RTT later; *snd is our next sequence number. */
static void ping(struct th *t, struct ipk_conn *c, uint32_t *snd)
{
	struct tseg s;

	CHECK_EQ(ipk_tcp_write(t->ctx, c, "p", 1, t->now), 1);
	CHECK(th_expect(t, &s, A | IPK_TCP_PSH, *snd, IRS + 1));
	CHECK_EQ(s.len, 1);
	th_advance(t, RTT);
	*snd += 1;
	th_seg(t, A, IRS + 1, *snd, W, NULL, 0);
	CHECK_EQ(th_pending(t), 0);
}

/* A few pings, an idle period, then one more byte at *sent: the timer it starts
 * must be the lazy one (what this file tests), behind the deadline the last ping
 * armed, RTT + IDLE earlier. */
static struct ipk_conn *lazy_setup(struct th *t, const struct ipk_tcp_opts *o, uint32_t *snd,
                                   uint64_t *sent, uint8_t kind)
{
	struct ipk_conn *c;
	struct tseg s;
	int i;

	*snd = th_accept(t, IRS, o, W, &c) + 1;
	for (i = 0; i < 4; i++)
		ping(t, c, snd);
	th_advance(t, IDLE);
	CHECK_EQ(c->rtx_kind, IPK_TCP_RTX_IDLE);
	CHECK(c->rtx_at != 0);
	*sent = t->now;
	CHECK_EQ(ipk_tcp_write(t->ctx, c, "q", 1, t->now), 1);
	CHECK(th_expect(t, &s, A | IPK_TCP_PSH, *snd, IRS + 1));
	CHECK_EQ(c->rtx_kind, kind);
	return c;
}

/* Advance to `at` (absolute) in 1 ms steps, nothing may be sent on the way. */
static void quiet_until(struct th *t, uint64_t at)
{
	int i;

	for (i = 0; i < 100000 && t->now < at; i++) {
		th_advance(t, IPK_MIN(1 * MS, at - t->now));
		CHECK_EQ(th_pending(t), 0);
	}
}

static void test_established_lazy_rto_fires_at_its_time_after_idle(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t snd;
	uint64_t sent, rto;

	c = lazy_setup(t, NULL, &snd, &sent, IPK_TCP_RTX_LAZY_RTO);
	rto = (uint64_t)c->rto_us * US;
	CHECK_EQ(rto, 200 * MS); /* the RFC 6298 minimum: the 10 ms path is far below it */
	/* the deadline left from the last ping passes (RTT + IDLE before the real one):
	 * no retransmission then, nor until the RTO has run from this send */
	quiet_until(t, sent + rto - 1 * US);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_rto, 0);
	/* deadlines round up to the next µs tick: due within one */
	th_advance(t, 2 * US);
	CHECK(th_expect(t, &s, A | IPK_TCP_PSH, snd, IRS + 1));
	CHECK_EQ(s.len, 1);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_rto, 1);
	/* and backs off from there (RFC 6298 (5.5)) */
	quiet_until(t, t->now + 2 * rto - 2 * US);
	th_advance(t, 2 * US);
	CHECK(th_expect(t, &s, A | IPK_TCP_PSH, snd, IRS + 1));
	finish(t, c);
}

static void test_established_lazy_rto_ack_in_time_no_retransmission(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	uint32_t snd;
	uint64_t sent, rto;

	c = lazy_setup(t, NULL, &snd, &sent, IPK_TCP_RTX_LAZY_RTO);
	rto = (uint64_t)c->rto_us * US;
	/* past the old deadline, before the real one: the ACK comes */
	quiet_until(t, sent + rto - 20 * MS);
	th_seg(t, A, IRS + 1, snd + 1, W, NULL, 0);
	quiet_until(t, t->now + 3 * SEC);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_rto, 0);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_retransmits, 0);
	CHECK_EQ(c->retransmits, 0);
	/* and the ping-pong goes on lazily */
	snd += 1;
	ping(t, c, &snd);
	finish(t, c);
}

/* SACK negotiated: RFC 8985's tail loss probe. A minimum RTO of 1 s puts the PTO
 * (2 * SRTT + the 200 ms delayed-ACK allowance for one segment out) first. */
static void rto_1s(struct ipk_config *c) { c->tcp_rto_min_ns = 1 * SEC; }

static struct ipk_tcp_opts sack_perm(void)
{
	struct ipk_tcp_opts o;

	memset(&o, 0, sizeof(o));
	o.has_sack_perm = 1;
	return o;
}

static void test_established_lazy_pto_probes_at_its_time_after_idle(void)
{
	struct th *t = th_new(rto_1s);
	struct ipk_tcp_opts o = sack_perm();
	struct ipk_conn *c;
	struct tseg s;
	uint32_t snd;
	uint64_t sent, pto;

	c = lazy_setup(t, &o, &snd, &sent, IPK_TCP_RTX_LAZY_TLP);
	pto = 2ull * c->srtt_us * US + 200 * MS;
	quiet_until(t, sent + pto - 1 * US);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_tlp_probes, 0);
	th_advance(t, 2 * US);
	/* RFC 8985 §7.3: the probe is the last segment again */
	CHECK(th_expect(t, &s, A | IPK_TCP_PSH, snd, IRS + 1));
	CHECK_EQ(ipk_counters(t->ctx)->tcp_tlp_probes, 1);
	CHECK_EQ(c->rtx_kind, IPK_TCP_RTX_RTO);
	finish(t, c);
}

static void test_established_lazy_pto_ack_in_time_no_probe(void)
{
	struct th *t = th_new(rto_1s);
	struct ipk_tcp_opts o = sack_perm();
	struct ipk_conn *c;
	uint32_t snd;
	uint64_t sent, pto;

	c = lazy_setup(t, &o, &snd, &sent, IPK_TCP_RTX_LAZY_TLP);
	pto = 2ull * c->srtt_us * US + 200 * MS;
	quiet_until(t, sent + pto - 20 * MS);
	th_seg(t, A, IRS + 1, snd + 1, W, NULL, 0);
	quiet_until(t, t->now + 3 * SEC);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_tlp_probes, 0);
	CHECK_EQ(ipk_counters(t->ctx)->tcp_retransmits, 0);
	finish(t, c);
}

/* A second segment while the timer is lazy settles it first: the RTO still runs
 * from the first send (RFC 6298 (5.1) does not restart a running timer; Nagle is off
 * by default, so the second byte goes at once). */
static void test_established_lazy_rto_second_send_keeps_first_start(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t snd;
	uint64_t sent, rto;

	c = lazy_setup(t, NULL, &snd, &sent, IPK_TCP_RTX_LAZY_RTO);
	rto = (uint64_t)c->rto_us * US;
	th_advance(t, 50 * MS);
	CHECK_EQ(ipk_tcp_write(t->ctx, c, "r", 1, t->now), 1);
	CHECK(th_expect(t, &s, A | IPK_TCP_PSH, snd + 1, IRS + 1));
	CHECK_EQ(c->rtx_kind, IPK_TCP_RTX_RTO);
	quiet_until(t, sent + rto - 1 * US);
	th_advance(t, 2 * US);
	CHECK(th_expect(t, &s, A | IPK_TCP_PSH, snd, IRS + 1));
	finish(t, c);
}

/* After a backed-off RTO the stopped timer's deadline lies beyond the RTO a new
 * send needs (the back-off ends with the ACK): that deadline cannot stand in, the
 * timer is armed at its own time. */
static void test_established_lazy_not_taken_when_old_deadline_later(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	struct tseg s;
	uint32_t snd;
	uint64_t sent, rto;
	int i;

	snd = th_accept(t, IRS, NULL, W, &c) + 1;
	for (i = 0; i < 4; i++)
		ping(t, c, &snd);
	rto = (uint64_t)c->rto_us * US;
	CHECK_EQ(ipk_tcp_write(t->ctx, c, "b", 1, t->now), 1);
	CHECK(th_expect(t, &s, A | IPK_TCP_PSH, snd, IRS + 1));
	quiet_until(t, t->now + rto - 1 * US);
	th_advance(t, 2 * US);
	CHECK(th_expect(t, &s, A | IPK_TCP_PSH, snd, IRS + 1)); /* RTO, backed off to 2x */
	th_advance(t, RTT);
	snd += 1;
	th_seg(t, A, IRS + 1, snd, W, NULL, 0); /* the back-off ends */
	CHECK_EQ(c->rtx_kind, IPK_TCP_RTX_IDLE);
	CHECK_EQ((uint64_t)c->rto_us * US, rto);
	sent = t->now;
	CHECK_EQ(ipk_tcp_write(t->ctx, c, "c", 1, t->now), 1);
	CHECK(th_expect(t, &s, A | IPK_TCP_PSH, snd, IRS + 1));
	CHECK_EQ(c->rtx_kind, IPK_TCP_RTX_RTO);
	quiet_until(t, sent + rto - 1 * US);
	th_advance(t, 2 * US);
	CHECK(th_expect(t, &s, A | IPK_TCP_PSH, snd, IRS + 1));
	finish(t, c);
}

int main(void)
{
	RUN(test_established_lazy_rto_fires_at_its_time_after_idle);
	RUN(test_established_lazy_rto_ack_in_time_no_retransmission);
	RUN(test_established_lazy_pto_probes_at_its_time_after_idle);
	RUN(test_established_lazy_pto_ack_in_time_no_probe);
	RUN(test_established_lazy_rto_second_send_keeps_first_start);
	RUN(test_established_lazy_not_taken_when_old_deadline_later);
	return check_summary();
}
