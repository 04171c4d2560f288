/*
 * runtime/node.c: the device is kicked once per ipk_run round, not once per reply.
 *
 * Two nodes in this process over a memlink; the server echoes every request from its
 * tcp_payload callback (as ipkit-bench and ipkit-echo do). The server's backend is
 * memlink with a counting flush. With N requests waiting, one ipk_node_poll of the
 * server must send N echoes with one ipk_io_flush; before the fix each ipk_tcp_write
 * inside the callback flushed on its own (N flushes). Every echo is checked on the
 * client. No privileges needed; the memlink is removed at exit.
 */
#include "check.h"

#include <ipkit/runtime.h>

#include "io_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { NCONN = 16 };

struct counting {
	struct ipk_io_backend be; /* the memlink backend with flush replaced */
	const struct ipk_io_backend *inner;
	char spec[96];
	unsigned flushes;
};

struct client {
	struct ipk_conn *c[NCONN];
	int up, echoed, bad;
};

static struct counting *cnt_of; /* the one counting backend of this test */

static int counting_flush(struct ipk_io *io)
{
	cnt_of->flushes++;
	return cnt_of->inner->flush ? cnt_of->inner->flush(io) : 0;
}

static struct ipk_io *counting_open(struct ipk_pool *pool, void *arg, char *err, size_t el)
{
	struct counting *k = (struct counting *)arg;
	struct ipk_io *io = ipk_io_open(k->spec, pool, err, el);

	if (!io)
		return NULL;
	k->inner = io->be;
	k->be = *io->be;
	k->be.flush = counting_flush;
	io->be = &k->be;
	cnt_of = k;
	return io;
}

/* A device that takes frames and hands them on only at a flush, and refuses the
 * next `refuse` flushes (as AF_XDP's kick may: EAGAIN, EBUSY): frames stay with it. */
struct holding {
	struct ipk_io_backend be;
	const struct ipk_io_backend *inner;
	char spec[96];
	struct ipk_pkt *held[64];
	int nheld, refuse;
};

static struct holding *hold_of;

static int holding_tx(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	int i;

	(void)io;
	for (i = 0; i < n && hold_of->nheld < 64; i++)
		hold_of->held[hold_of->nheld++] = pkts[i];
	return i;
}

static int holding_flush(struct ipk_io *io)
{
	int took, i;

	if (hold_of->refuse > 0) {
		hold_of->refuse--;
		return 0;
	}
	took = hold_of->nheld ? hold_of->inner->tx_burst(io, hold_of->held, hold_of->nheld) : 0;
	for (i = took < 0 ? 0 : took; i < hold_of->nheld; i++)
		ipk_pkt_free_chain(hold_of->held[i]);
	hold_of->nheld = 0;
	return hold_of->inner->flush ? hold_of->inner->flush(io) : 0;
}

static struct ipk_io *holding_open(struct ipk_pool *pool, void *arg, char *err, size_t el)
{
	struct holding *h = (struct holding *)arg;
	struct ipk_io *io = ipk_io_open(h->spec, pool, err, el);

	if (!io)
		return NULL;
	h->inner = io->be;
	h->be = *io->be;
	h->be.tx_burst = holding_tx;
	h->be.flush = holding_flush;
	io->be = &h->be;
	hold_of = h;
	return io;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void srv_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                        uint32_t off, uint32_t len, void *opaque)
{
	struct ipk_node *n = ipk_node_from(opaque);

	(void)user;
	if (!pkt)
		return;
	ipk_tcp_write(ctx, c, ipk_pkt_mtod((struct ipk_pkt *)pkt) + off, len, ipk_node_now(n));
	ipk_tcp_recved(ctx, c, len, ipk_node_now(n));
}

static void cli_connected(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *opaque)
{
	(void)ctx;
	(void)c;
	(void)user;
	((struct client *)ipk_node_app(opaque))->up++;
}

static void cli_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                        uint32_t off, uint32_t len, void *opaque)
{
	struct client *cl = (struct client *)ipk_node_app(opaque);
	uintptr_t i = (uintptr_t)user;

	if (!pkt)
		return;
	if (len != 1 || ipk_pkt_mtod((struct ipk_pkt *)pkt)[off] != (uint8_t)('a' + i))
		cl->bad++;
	cl->echoed++;
	ipk_tcp_recved(ctx, c, len, ipk_node_now(ipk_node_from(opaque)));
}

static const struct ipk_ops srv_events = { .tcp_payload = srv_payload };
static const struct ipk_ops cli_events = { .tcp_connected = cli_connected,
                                           .tcp_payload = cli_payload };

static struct ipk_node *node_new(struct ipk_node_cfg *cfg, const char *ip,
                                 const struct ipk_ops *ev, void *app)
{
	char err[256] = "";
	struct ipk_node *n;
	struct in_addr a;

	inet_pton(AF_INET, ip, &a);
	cfg->ip4_be = a.s_addr;
	cfg->events = ev;
	cfg->app = app;
	cfg->conns = 64;
	cfg->pbs = 1024;
	n = ipk_node_create(cfg, err, sizeof err);
	if (!n)
		fprintf(stderr, "node %s: %s\n", ip, err);
	return n;
}

static char ml[32];

/* The client node on side b of memlink ml+suffix, 10.9.0.2. */
static struct ipk_node *client_node(const char *suffix, struct client *cl)
{
	static char spec[96]; /* ipk_node_create opens the backend from it and is done */
	struct ipk_node_cfg cc;

	ipk_node_cfg_default(&cc);
	snprintf(spec, sizeof spec, "memlink:%s%s,role=b", ml, suffix);
	cc.io_spec = spec;
	return node_new(&cc, "10.9.0.2", &cli_events, cl);
}

/* Poll both nodes until done() or 5 s. */
static int pump(struct ipk_node *s, struct ipk_node *c, const struct client *cl, int want_up,
                int want_echoed)
{
	uint64_t end = now_ns() + 5000000000ull;

	while (now_ns() < end) {
		if (cl->up >= want_up && cl->echoed >= want_echoed)
			return 1;
		ipk_node_poll(s, 0);
		ipk_node_poll(c, 0);
	}
	return 0;
}

static void test_echoes_of_one_round_leave_with_one_flush(void)
{
	struct ipk_node_cfg sc;
	struct counting k;
	struct client cl;
	struct ipk_node *s, *c;
	struct ipk_node_stats before, after;
	struct in_addr srv;
	uintptr_t i;

	memset(&k, 0, sizeof k);
	memset(&cl, 0, sizeof cl);
	snprintf(k.spec, sizeof k.spec, "memlink:%s,role=a", ml);
	ipk_node_cfg_default(&sc);
	sc.io_open = counting_open;
	sc.io_open_arg = &k;
	s = node_new(&sc, "10.9.0.1", &srv_events, NULL);
	c = client_node("", &cl);
	CHECK(s && c);
	if (!s || !c)
		goto out;
	CHECK_EQ(ipk_tcp_listen(ipk_node_ctx(s), htons(7), 64), IPK_OK);
	inet_pton(AF_INET, "10.9.0.1", &srv);
	for (i = 0; i < NCONN; i++)
		CHECK_EQ(ipk_tcp_connect(ipk_node_ctx(c), srv.s_addr, htons(7), 0, (void *)i,
		                         &cl.c[i], ipk_node_now(c)), IPK_OK);
	CHECK(pump(s, c, &cl, NCONN, 0));
	/* drain what is left of the handshakes (pure ACKs, window updates) */
	for (i = 0; i < 20; i++) {
		ipk_node_poll(s, 0);
		ipk_node_poll(c, 0);
	}
	/* N one-byte requests, each sent (and flushed) from outside ipk_run */
	for (i = 0; i < NCONN; i++) {
		uint8_t b = (uint8_t)('a' + i);
		CHECK_EQ(ipk_tcp_write(ipk_node_ctx(c), cl.c[i], &b, 1, now_ns()), 1);
	}
	k.flushes = 0;
	ipk_node_stats(s, &before);
	ipk_node_poll(s, 0); /* one round: all N requests in, all N echoes out */
	CHECK_EQ(k.flushes, 1);
	/* ipk_node_stats tells the same: one non-empty poll of N frames, one push of N */
	ipk_node_stats(s, &after);
	CHECK_EQ(after.polls - before.polls, 1);
	CHECK_EQ(after.rx_polls - before.rx_polls, 1);
	CHECK_EQ(after.rx_frames - before.rx_frames, NCONN);
	CHECK_EQ(after.tx_pushes - before.tx_pushes, 1);
	CHECK_EQ(after.tx_frames - before.tx_frames, NCONN);
	CHECK_EQ(after.sleeps, before.sleeps);
	CHECK(pump(s, c, &cl, NCONN, NCONN));
	CHECK_EQ(cl.echoed, NCONN);
	CHECK_EQ(cl.bad, 0);
out:
	ipk_node_destroy(c);
	ipk_node_destroy(s);
}

/* ipk_node_set_spin: right after traffic an event-driven poll keeps polling for
 * spin_us before it sleeps (one spin window, bounded in time); a node whose last
 * traffic is older than spin_us sleeps at once, so an idle node never spins. */
static void test_spin_window_only_after_traffic(void)
{
	struct ipk_node_cfg sc;
	char sspec[96];
	struct client cl;
	struct ipk_node *s, *c;
	struct ipk_node_stats a, b;
	struct in_addr srv;
	uint64_t t0, took;
	uint8_t byte = 'a';
	int i;

	memset(&cl, 0, sizeof cl);
	ipk_node_cfg_default(&sc);
	snprintf(sspec, sizeof sspec, "memlink:%ss,role=a", ml);
	sc.io_spec = sspec;
	sc.spin_us = 10001; /* above the bound: refused at create */
	CHECK(node_new(&sc, "10.9.0.1", &srv_events, NULL) == NULL);
	sc.spin_us = 0;
	s = node_new(&sc, "10.9.0.1", &srv_events, NULL);
	c = client_node("s", &cl);
	CHECK(s && c);
	if (!s || !c)
		goto out;
	CHECK_EQ(ipk_node_set_spin(NULL, 1), -EINVAL);
	CHECK_EQ(ipk_node_set_spin(s, 10001), -EINVAL);
	CHECK_EQ(ipk_node_set_spin(s, 2000), 0); /* 2 ms */
	CHECK_EQ(ipk_tcp_listen(ipk_node_ctx(s), htons(7), 64), IPK_OK);
	inet_pton(AF_INET, "10.9.0.1", &srv);
	CHECK_EQ(ipk_tcp_connect(ipk_node_ctx(c), srv.s_addr, htons(7), 0, (void *)0, &cl.c[0],
	                         ipk_node_now(c)), IPK_OK);
	CHECK(pump(s, c, &cl, 1, 0));
	CHECK_EQ(ipk_tcp_write(ipk_node_ctx(c), cl.c[0], &byte, 1, now_ns()), 1);
	CHECK(pump(s, c, &cl, 1, 1));
	for (i = 0; i < 20; i++) { /* the client's ACK of the echo, if any */
		ipk_node_poll(c, 0);
		ipk_node_poll(s, 0);
	}
	ipk_node_stats(s, &a); /* the server had traffic within the last 2 ms */
	t0 = now_ns();
	ipk_node_poll(s, 50); /* nothing comes: spin ~2 ms (less what pump left), sleep */
	took = now_ns() - t0;
	ipk_node_stats(s, &b);
	CHECK_EQ(b.rx_polls, a.rx_polls);
	CHECK_EQ(b.spins - a.spins, 1);
	CHECK_EQ(b.spin_hits, a.spin_hits);
	CHECK(b.polls - a.polls >= 2);
	CHECK_EQ(b.sleeps - a.sleeps, 1);
	CHECK(took < 1000000000ull); /* bounded by spin_us and the 50 ms timeout */
	/* more than spin_us after the last traffic: straight to sleep, no spin */
	usleep(3000);
	ipk_node_poll(s, 1);
	ipk_node_stats(s, &a);
	CHECK_EQ(a.spins, b.spins);
	CHECK(a.sleeps > b.sleeps);
out:
	ipk_node_destroy(c);
	ipk_node_destroy(s);
}

/* A refused kick must not strand the frames: the server's echo is taken by the
 * device, whose flush is refused once; nothing else is sent. Before the fix the
 * node slept with the echo still held (txn 0, so no flush) until the RTO, 200 ms;
 * now it kicks again before every sleep, so the client has the echo at once. */
static void test_refused_kick_is_retried_before_sleeping(void)
{
	struct ipk_node_cfg sc;
	struct holding h;
	struct client cl;
	struct ipk_node *s, *c;
	struct in_addr srv;
	uint64_t end;
	uint8_t byte = 'a';

	memset(&h, 0, sizeof h);
	memset(&cl, 0, sizeof cl);
	snprintf(h.spec, sizeof h.spec, "memlink:%sh,role=a", ml);
	ipk_node_cfg_default(&sc);
	sc.io_open = holding_open;
	sc.io_open_arg = &h;
	s = node_new(&sc, "10.9.0.1", &srv_events, NULL);
	c = client_node("h", &cl);
	CHECK(s && c);
	if (!s || !c)
		goto out;
	CHECK_EQ(ipk_tcp_listen(ipk_node_ctx(s), htons(7), 64), IPK_OK);
	inet_pton(AF_INET, "10.9.0.1", &srv);
	CHECK_EQ(ipk_tcp_connect(ipk_node_ctx(c), srv.s_addr, htons(7), 0, (void *)0, &cl.c[0],
	                         ipk_node_now(c)), IPK_OK);
	CHECK(pump(s, c, &cl, 1, 0));
	CHECK_EQ(ipk_tcp_write(ipk_node_ctx(c), cl.c[0], &byte, 1, now_ns()), 1);
	h.refuse = 1;
	end = now_ns() + 50000000ull; /* 50 ms: well inside the 200 ms RTO */
	while (cl.echoed == 0 && now_ns() < end) {
		ipk_node_poll(s, 1); /* blocking mode: nothing new comes, so it sleeps */
		ipk_node_poll(c, 0);
	}
	CHECK_EQ(h.refuse, 0); /* the refused flush did happen */
	CHECK_EQ(cl.echoed, 1);
	CHECK_EQ(cl.bad, 0);
out:
	ipk_node_destroy(c);
	ipk_node_destroy(s);
}

int main(void)
{
	snprintf(ml, sizeof ml, "ipknf%x", (unsigned)getpid());
	RUN(test_echoes_of_one_round_leave_with_one_flush);
	RUN(test_spin_window_only_after_traffic);
	RUN(test_refused_kick_is_retried_before_sleeping);
	return check_summary();
}
