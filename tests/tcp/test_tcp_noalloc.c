/*
 * Output that finds no packet (ops->pkt_alloc returns NULL, IPK_DROP_NO_PKT): the
 * retry backs off like a retransmission instead of firing every millisecond (issue 14,
 * same class as item 1: a dry pool gave ~1.1M no_pkt drops in 25 s), and the data
 * still goes once the pool recovers.
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

/* The harness's pkt_alloc, wrapped: NULL while the clock is before fail_until, the
 * first `pass` calls excepted (the copy into the send queue). */
static void *(*real_alloc)(void *opaque);
static const struct th *clock_of;
static uint64_t fail_until;
static uint32_t pass;

static void *flaky_alloc(void *opaque)
{
	if (pass > 0) {
		pass--;
		return real_alloc(opaque);
	}
	if (clock_of->now < fail_until)
		return NULL;
	return real_alloc(opaque);
}

static void flaky(struct th *t, uint32_t p, uint64_t until)
{
	if (t->ops.pkt_alloc != flaky_alloc) {
		real_alloc = t->ops.pkt_alloc;
		t->ops.pkt_alloc = flaky_alloc; /* the context keeps a pointer to t->ops */
	}
	clock_of = t;
	pass = p;
	fail_until = until;
}

static const struct ipk_counters *cnt(const struct th *t) { return ipk_counters(t->ctx); }

/* Data segments of len bytes at seq captured since the last call. */
static int data_segs(struct th *t, uint32_t seq, uint32_t len)
{
	struct tseg s;
	int n = 0;

	while (th_next(t, &s))
		if (s.len == len && s.h.seq == seq)
			n++;
	return n;
}

static const uint8_t msg[100] = "backed off, then sent";

/* The pool stays dry for a second: a handful of tries (1, 2, 4 ... 256 ms apart),
 * not a thousand; once it recovers the data goes within the longest wait. */
static void test_established_dry_pool_retries_back_off(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);
	uint64_t drops0 = cnt(t)->drop[IPK_DROP_NO_PKT];

	/* the copy into the send queue gets its packet, every transmit after fails */
	flaky(t, 1, UINT64_MAX);
	CHECK_EQ(ipk_tcp_write(t->ctx, c, msg, sizeof(msg), t->now), (int)sizeof(msg));
	CHECK_EQ(data_segs(t, iss + 1, sizeof(msg)), 0);
	th_run_for(t, SEC);
	CHECK_EQ(data_segs(t, iss + 1, sizeof(msg)), 0);
	/* 1+2+...+128 = 255 ms for 8 tries, then one per 256 ms: 11 in the second */
	CHECK(cnt(t)->tcp_tx_retries >= 8);
	CHECK(cnt(t)->tcp_tx_retries <= 16);
	CHECK(cnt(t)->drop[IPK_DROP_NO_PKT] - drops0 <= 17);
	/* the pool recovers: the data goes at the next try, at most 256 ms later */
	flaky(t, 0, 0);
	th_run_for(t, 300 * MS);
	CHECK_EQ(data_segs(t, iss + 1, sizeof(msg)), 1);
	th_seg(t, A, IRS + 1, iss + 1 + sizeof(msg), W, NULL, 0);
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_ESTABLISHED);
	ipk_tcp_abort(t->ctx, c, t->now);
	flaky(t, 0, 0);
	CHECK(th_no_leaks(t));
	th_free(t);
}

/* The pool is dry for 5 ms: tries at 1, 1+2 and 1+2+4 ms, the data at 7 ms; the
 * success resets the back-off, so the next failure waits 1 ms again, not 16. */
static void test_established_retry_backoff_resets_on_success(void)
{
	struct th *t = th_new(NULL);
	struct ipk_conn *c;
	uint32_t iss = th_accept(t, IRS, NULL, W, &c);
	uint64_t t0;

	t0 = t->now;
	flaky(t, 1, t0 + 5 * MS);
	ipk_tcp_write(t->ctx, c, msg, sizeof(msg), t->now);
	th_run_for(t, 6 * MS);
	CHECK_EQ(data_segs(t, iss + 1, sizeof(msg)), 0);
	th_run_for(t, 2 * MS);
	CHECK_EQ(data_segs(t, iss + 1, sizeof(msg)), 1);
	CHECK(t->now - t0 <= 8 * MS);
	th_seg(t, A, IRS + 1, iss + 1 + sizeof(msg), W, NULL, 0);
	/* a second message: its first transmit fails once, the retry comes 1 ms later */
	flaky(t, 1, t->now + MS / 2);
	ipk_tcp_write(t->ctx, c, msg, sizeof(msg), t->now);
	th_run_for(t, 2 * MS);
	CHECK_EQ(data_segs(t, iss + 1 + sizeof(msg), sizeof(msg)), 1);
	ipk_tcp_abort(t->ctx, c, t->now);
	flaky(t, 0, 0);
	CHECK(th_no_leaks(t));
	th_free(t);
}

int main(void)
{
	RUN(test_established_dry_pool_retries_back_off);
	RUN(test_established_retry_backoff_resets_on_success);
	return check_summary();
}
