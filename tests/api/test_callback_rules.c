/*
 * The callback rules core.h documents ("Calling the core from a callback"), each
 * checked against the code: a connection's own event callback may write, close or
 * abort it; after an abort and inside tcp_closed every call on the handle answers
 * IPK_ECLOSED; nothing leaks. Scripted peer: tests/tcp/harness.c.
 */
#include <string.h>

#include "check.h"
#include "harness.h"
#include "wire/wire.h"

#define IRS 7000000u
#define A IPK_TCP_ACK
#define W 65535

/* What the callbacks under test did, read back by the tests (one test at a time). */
static struct {
	int rc_after;    /* a call made on the handle after the action */
	int rc_action;   /* the action's own result */
	int calls;
	const char *action;
} seen;

static void cb_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                       uint32_t off, uint32_t len, void *opaque)
{
	struct th *t = (struct th *)opaque;

	(void)user; (void)off;
	if (!pkt)
		return;
	seen.calls++;
	if (strcmp(seen.action, "abort") == 0) {
		seen.rc_action = ipk_tcp_abort(ctx, c, t->now);
		seen.rc_after = ipk_tcp_write(ctx, c, "x", 1, t->now);
	} else if (strcmp(seen.action, "close") == 0) {
		ipk_tcp_recved(ctx, c, len, t->now);
		seen.rc_action = ipk_tcp_close(ctx, c, t->now);
		seen.rc_after = ipk_tcp_write(ctx, c, "x", 1, t->now); /* FIN queued */
	} else if (strcmp(seen.action, "write") == 0) {
		ipk_tcp_recved(ctx, c, len, t->now);
		seen.rc_action = ipk_tcp_write(ctx, c, "pong", 4, t->now);
	}
}

static void cb_closed(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
                      enum ipk_close_reason why, void *opaque)
{
	struct th *t = (struct th *)opaque;

	(void)user;
	t->closed++;
	t->why = why;
	if (strcmp(seen.action, "in_closed") == 0) {
		seen.rc_action = ipk_tcp_write(ctx, c, "x", 1, t->now);
		seen.rc_after = ipk_tcp_close(ctx, c, t->now);
	}
}

static struct th *start(const char *action, struct ipk_conn **c, uint32_t *iss)
{
	struct th *t = th_new(NULL);

	memset(&seen, 0, sizeof(seen));
	seen.action = action;
	t->ops.tcp_payload = cb_payload; /* the context keeps a pointer to t->ops */
	t->ops.tcp_closed = cb_closed;
	*iss = th_accept(t, IRS, NULL, W, c);
	th_clear(t);
	return t;
}

static void test_abort_from_own_payload_callback(void)
{
	struct ipk_conn *c;
	uint32_t iss;
	struct th *t = start("abort", &c, &iss);
	struct tseg s;

	th_seg(t, A | IPK_TCP_PSH, IRS + 1, iss + 1, W, "ping", 4);
	CHECK_EQ(seen.calls, 1);
	CHECK_EQ(seen.rc_action, IPK_OK);
	CHECK_EQ(seen.rc_after, IPK_ECLOSED); /* the handle is dead at once */
	CHECK_EQ(t->closed, 1);
	CHECK_EQ(t->why, IPK_CLOSE_ABORTED);
	CHECK(th_next(t, &s) && (s.h.flags & IPK_TCP_RST));
	CHECK_EQ(ipk_tcp_write(t->ctx, c, "x", 1, t->now), IPK_ECLOSED);
	CHECK(th_no_leaks(t));
	th_free(t);
}

static void test_close_from_own_payload_callback_sends_one_fin_ack(void)
{
	struct ipk_conn *c;
	uint32_t iss;
	struct th *t = start("close", &c, &iss);
	struct tseg s;

	th_seg(t, A | IPK_TCP_PSH, IRS + 1, iss + 1, W, "ping", 4);
	CHECK_EQ(seen.rc_action, IPK_OK);
	CHECK_EQ(seen.rc_after, IPK_ENOTCONN); /* our side is closed for sending */
	/* one segment: the FIN carries the ACK of the data (the end-of-segment pass) */
	CHECK(th_expect(t, &s, IPK_TCP_FIN | A, iss + 1, IRS + 5));
	CHECK_EQ(th_pending(t), 0);
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_FIN_WAIT_1);
	ipk_tcp_abort(t->ctx, c, t->now);
	CHECK(th_no_leaks(t));
	th_free(t);
}

static void test_write_from_own_payload_callback_rides_the_ack(void)
{
	struct ipk_conn *c;
	uint32_t iss;
	struct th *t = start("write", &c, &iss);
	struct tseg s;

	th_seg(t, A | IPK_TCP_PSH, IRS + 1, iss + 1, W, "ping", 4);
	CHECK_EQ(seen.rc_action, 4);
	CHECK(th_expect(t, &s, A | IPK_TCP_PSH, iss + 1, IRS + 5));
	CHECK_EQ(s.len, 4);
	CHECK_EQ(th_pending(t), 0); /* no separate pure ACK */
	ipk_tcp_abort(t->ctx, c, t->now);
	CHECK(th_no_leaks(t));
	th_free(t);
}

static void test_calls_inside_tcp_closed_get_eclosed(void)
{
	struct ipk_conn *c;
	uint32_t iss;
	struct th *t = start("in_closed", &c, &iss);

	th_seg(t, IPK_TCP_RST, IRS + 1, 0, 0, NULL, 0);
	CHECK_EQ(t->closed, 1);
	CHECK_EQ(t->why, IPK_CLOSE_RESET);
	CHECK_EQ(seen.rc_action, IPK_ECLOSED);
	CHECK_EQ(seen.rc_after, IPK_ECLOSED);
	CHECK(th_no_leaks(t));
	th_free(t);
}

int main(void)
{
	RUN(test_abort_from_own_payload_callback);
	RUN(test_close_from_own_payload_callback_sends_one_fin_ack);
	RUN(test_write_from_own_payload_callback_rides_the_ack);
	RUN(test_calls_inside_tcp_closed_get_eclosed);
	return check_summary();
}
