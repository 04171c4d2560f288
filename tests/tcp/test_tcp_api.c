/*
 * The integrator's side of the TCP API (issue 14 items 10 and 11): the clock an
 * integrator passes in, calls made from inside callbacks, and configuration checks
 * that say why they reject.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "wire/wire.h"

#define MS 1000000ull
#define SEC 1000000000ull

static uint16_t be(uint16_t v) { return ipk_htons(v); }

static const struct ipk_counters *cnt(const struct th *t) { return ipk_counters(t->ctx); }

/* Advance both ends of a pair by dt in steps of 10 ms, moving frames between them. */
static void pair_run(struct th *a, struct th *b, uint64_t dt)
{
	uint64_t end = a->now + dt;

	while (a->now < end) {
		a->now += 10 * MS;
		b->now += 10 * MS;
		ipk_run(a->ctx, NULL, 0, a->now);
		ipk_run(b->ctx, NULL, 0, b->now);
		th_pump(a, b);
	}
}

/* a (10.0.0.1) connects to b (10.0.0.2) port 80, both clocks at `start`; returns a's
 * connection, established on both sides. */
static struct ipk_conn *pair_open(struct th *a, struct th *b, uint64_t start)
{
	struct ipk_conn *c = NULL;

	a->now = b->now = start;
	ipk_run(a->ctx, NULL, 0, a->now);
	ipk_run(b->ctx, NULL, 0, b->now);
	CHECK_EQ(ipk_tcp_listen(b->ctx, be(80), 8), IPK_OK);
	CHECK_EQ(ipk_tcp_connect(a->ctx, b->ip_be, be(80), 0, NULL, &c, a->now), IPK_OK);
	th_pump(a, b);
	CHECK_EQ(a->connected, 1);
	return c;
}

/* ------------------------------------------------------------- item 10 */

static void (*base_payload)(struct ipk_ctx *, struct ipk_conn *, void *, void *, uint32_t,
                            uint32_t, void *);

/* The payload event closes with now = 0: a clock that goes backwards. */
static void payload_close_at_zero(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                                  uint32_t off, uint32_t len, void *opaque)
{
	base_payload(ctx, c, user, pkt, off, len, opaque);
	if (pkt)
		ipk_tcp_close(ctx, c, 0);
}

static void test_close_from_callback_with_now_zero_reaches_closed(void)
{
	struct th *a, *b;
	struct ipk_conn *c;

	th_pair(&a, &b, NULL);
	b->close_on_fin = 1;
	c = pair_open(a, b, 100 * SEC);
	CHECK_EQ(b->accepted, 1);
	base_payload = a->ops.tcp_payload;
	a->ops.tcp_payload = payload_close_at_zero;
	pair_run(a, b, 50 * MS);
	CHECK_EQ(ipk_tcp_write(b->ctx, b->conn, "hello", 5, b->now), 5);
	th_pump(a, b);
	CHECK_EQ(a->rxlen, 5);
	pair_run(a, b, 5 * SEC);
	/* a: FIN-WAIT-1 -> FIN-WAIT-2 -> TIME_WAIT (tcp_closed); b: LAST_ACK -> CLOSED */
	CHECK_EQ(a->closed, 1);
	CHECK_EQ(b->closed, 1);
	CHECK_EQ(b->why, IPK_CLOSE_NORMAL);
	CHECK_EQ(ipk_conns_free(b->ctx), b->nconns);
	CHECK_EQ(cnt(a)->tcp_paws_drops, 0);
	CHECK_EQ(cnt(b)->tcp_paws_drops, 0);
	CHECK_EQ(cnt(a)->tcp_retransmits, 0);
	CHECK_EQ(cnt(b)->tcp_retransmits, 0);
	(void)c;
	th_free(a);
	th_free(b);
}


static void test_write_with_stale_now_keeps_timestamps_monotonic(void)
{
	struct th *a, *b;
	struct ipk_conn *c;

	th_pair(&a, &b, NULL);
	c = pair_open(a, b, 100 * SEC);
	CHECK_EQ(b->accepted, 1);
	pair_run(a, b, 50 * MS);
	/* a stale clock read from outside any callback: taken as the last time seen */
	CHECK_EQ(ipk_tcp_write(a->ctx, c, "abc", 3, 5 * SEC), 3);
	th_pump(a, b);
	CHECK_EQ(b->rxlen, 3);
	CHECK(ipk_run(a->ctx, NULL, 0, 0) >= a->now);
	CHECK_EQ(cnt(b)->tcp_paws_drops, 0);
	CHECK_EQ(cnt(a)->tcp_retransmits, 0);
	ipk_tcp_abort(a->ctx, c, a->now);
	th_pump(a, b);
	CHECK_EQ(b->closed, 1);
	th_free(a);
	th_free(b);
}

/* Calls from inside callbacks: each documented event x each documented call. */
enum { EV_CONNECTED, EV_ACCEPTED, EV_PAYLOAD, EV_ACKED, EV__N };
enum { DO_WRITE, DO_SEND, DO_RECVED, DO_KEEPALIVE, DO_CLOSE, DO_ABORT, DO__N };
static const char *const ev_name[EV__N] = {"connected", "accepted", "payload", "acked"};
static const char *const do_name[DO__N] = {"write", "send", "recved", "keepalive", "close",
                                            "abort"};

static struct {
	int ev, act, fired, rc;
	struct ipk_ops base_a, base_b;
	struct sim_pool *pool; /* of the context the event fires in */
} cb;

/* ipk_tcp_send of a fresh 5-byte packet; the packet stays ours when refused. */
static int cb_send(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	struct sim_pkt *k = sim_pkt_alloc(cb.pool);
	int rc;

	if (!k)
		return IPK_ENOBUFS;
	memcpy(sim_pkt_data(k), "reply", 5);
	k->len = 5;
	rc = ipk_tcp_send(ctx, c, k, 0);
	if (rc < 0)
		sim_pkt_free(k);
	return rc;
}

static void cb_act(struct ipk_ctx *ctx, struct ipk_conn *c, int ev, uint32_t len)
{
	if (ev != cb.ev || cb.fired++)
		return;
	switch (cb.act) {
	case DO_WRITE: cb.rc = ipk_tcp_write(ctx, c, "reply", 5, 0); break;
	case DO_SEND: cb.rc = cb_send(ctx, c); break;
	case DO_RECVED: cb.rc = ipk_tcp_recved(ctx, c, len, 0); break;
	case DO_KEEPALIVE: cb.rc = ipk_tcp_set_keepalive(ctx, c, 1, 0); break;
	case DO_CLOSE: cb.rc = ipk_tcp_close(ctx, c, 0); break;
	default: cb.rc = ipk_tcp_abort(ctx, c, 0); break;
	}
}

static void cb_connected(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *opaque)
{
	cb.base_a.tcp_connected(ctx, c, user, opaque);
	cb_act(ctx, c, EV_CONNECTED, 0);
}

static void *cb_accepted(struct ipk_ctx *ctx, struct ipk_conn *c, void *opaque)
{
	void *u = cb.base_b.tcp_accepted(ctx, c, opaque);

	cb_act(ctx, c, EV_ACCEPTED, 0);
	return u;
}

static void cb_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                       uint32_t off, uint32_t len, void *opaque)
{
	cb.base_a.tcp_payload(ctx, c, user, pkt, off, len, opaque);
	if (pkt)
		cb_act(ctx, c, EV_PAYLOAD, len);
}

static void cb_acked(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, uint32_t bytes,
                     void *opaque)
{
	cb.base_a.tcp_acked(ctx, c, user, bytes, opaque);
	cb_act(ctx, c, EV_ACKED, 0);
}

static void callback_case(int ev, int act)
{
	struct th *a, *b;
	struct ipk_conn *c;
	int ok, before = check_failed_now_;

	check_failed_now_ = 0;
	memset(&cb, 0, sizeof(cb));
	cb.ev = ev;
	cb.act = act;
	th_pair(&a, &b, NULL);
	a->close_on_fin = b->close_on_fin = 1;
	cb.pool = ev == EV_ACCEPTED ? b->pool : a->pool;
	cb.base_a = a->ops;
	cb.base_b = b->ops;
	a->ops.tcp_connected = cb_connected;
	a->ops.tcp_payload = cb_payload;
	a->ops.tcp_acked = cb_acked;
	b->ops.tcp_accepted = cb_accepted;
	c = pair_open(a, b, 100 * SEC);
	if (b->conn && ipk_tcp_state(b->conn) == IPK_TCP_ESTABLISHED)
		ipk_tcp_write(b->ctx, b->conn, "hello", 5, b->now);
	th_pump(a, b);
	if (ipk_tcp_state(c) == IPK_TCP_ESTABLISHED)
		ipk_tcp_write(a->ctx, c, "world", 5, a->now);
	pair_run(a, b, 1 * SEC);
	CHECK(cb.fired >= 1);
	ok = cb.rc >= 0;
	CHECK(ok);
	CHECK_EQ(cnt(a)->tcp_paws_drops + cnt(b)->tcp_paws_drops, 0);
	if (act == DO_CLOSE || act == DO_ABORT) {
		/* the connection ends on both sides, normally or by RST (aborted before
		 * the handshake's last ACK, b's SYN-RECEIVED end dies unannounced) */
		CHECK_EQ(a->closed, 1);
		CHECK_EQ(b->closed, b->accepted);
		CHECK_EQ(b->accepted, !(ev == EV_CONNECTED && act == DO_ABORT));
	} else {
		CHECK_EQ(ipk_tcp_state(c), IPK_TCP_ESTABLISHED);
		if (act == DO_WRITE || act == DO_SEND)
			CHECK_EQ(ev == EV_ACCEPTED ? a->rxlen : b->rxlen, 10);
		ipk_tcp_close(a->ctx, c, a->now);
	}
	pair_run(a, b, 70 * SEC); /* past TIME_WAIT */
	CHECK(th_no_leaks(a));
	CHECK(th_no_leaks(b));
	if (!ok || check_failed_now_)
		fprintf(stderr, "  case: %s from tcp_%s\n", do_name[act], ev_name[ev]);
	check_failed_now_ |= before;
	th_free(a);
	th_free(b);
}

static void test_callbacks_may_write_send_recved_keepalive_close_abort(void)
{
	int ev, act;

	for (ev = 0; ev < EV__N; ev++)
		for (act = 0; act < DO__N; act++)
			callback_case(ev, act);
}

static struct {
	int write_rc, connect_rc, udp_rc;
	struct ipk_conn *again;
	uint32_t peer_be;
	void (*base)(struct ipk_ctx *, struct ipk_conn *, void *, enum ipk_close_reason, void *);
} cl;

static void closed_reconnect(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
                             enum ipk_close_reason why, void *opaque)
{
	cl.base(ctx, c, user, why, opaque);
	if (cl.again)
		return;
	cl.write_rc = ipk_tcp_write(ctx, c, "x", 1, 0);
	cl.connect_rc = ipk_tcp_connect(ctx, cl.peer_be, be(80), 0, NULL, &cl.again, 0);
	cl.udp_rc = ipk_udp_sendto(ctx, be(53), cl.peer_be, be(53), "q", 1, 0);
}

static void test_closed_callback_handle_dead_connect_and_udp_allowed(void)
{
	struct th *a, *b;
	struct ipk_conn *c;

	memset(&cl, 0, sizeof(cl));
	th_pair(&a, &b, NULL);
	cl.base = a->ops.tcp_closed;
	cl.peer_be = b->ip_be;
	a->ops.tcp_closed = closed_reconnect;
	c = pair_open(a, b, 100 * SEC);
	CHECK_EQ(b->accepted, 1);
	CHECK_EQ(ipk_tcp_abort(b->ctx, b->conn, b->now), IPK_OK);
	th_pump(a, b);
	CHECK_EQ(a->closed, 1);
	CHECK_EQ(a->why, IPK_CLOSE_RESET);
	CHECK_EQ(cl.write_rc, IPK_ECLOSED);
	CHECK_EQ(cl.connect_rc, IPK_OK);
	CHECK_EQ(cl.udp_rc, 1);
	CHECK_EQ(cnt(a)->udp_tx, 1);
	pair_run(a, b, 50 * MS);
	CHECK_EQ(b->accepted, 2);
	CHECK_EQ(ipk_tcp_state(cl.again), IPK_TCP_ESTABLISHED);
	ipk_tcp_abort(a->ctx, cl.again, a->now);
	th_pump(a, b);
	CHECK(th_no_leaks(a));
	(void)c;
	th_free(a);
	th_free(b);
}

/* ------------------------------------------------------------- item 11 */

static uint32_t dummy_random(void *o) { (void)o; return 4; }
static void dummy_tx(void *pkt, void *o) { (void)pkt; (void)o; }
static void dummy_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *u, void *p, uint32_t off,
                          uint32_t len, void *o)
{
	(void)ctx; (void)c; (void)u; (void)p; (void)off; (void)len; (void)o;
}

static uint16_t reta_other[2] = {1, 2};

/* One configuration or ops error per case; each must be named by its own string. */
static void bad_cfg(int i, struct ipk_config *c, struct ipk_ops *o)
{
	switch (i) {
	case 0: c->version = 99; break;
	case 1: c->link = 7; break;
	case 2: c->mtu = 575; break;
	case 3: c->pkt_buf_size = 589; break;
	case 4: c->mtu = 9000; break; /* above 2048-byte buffers without SG + LRO */
	case 5: c->conn_hash_buckets = 1000; break;
	case 6: c->max_listeners = 0; break;
	case 7: c->max_udp_binds = 0; break;
	case 8: c->arp_entries = 0; break;
	case 9: c->frag_slots = 0; break;
	case 10: c->frag_max_pieces = 0; break;
	case 11: c->frag_max_bytes = 0; break;
	case 12: c->arp_retries = 0; break;
	case 13: c->arp_queue_per_entry = 0; break;
	case 14: c->ttl = 0; break;
	case 15: c->eph_port_lo = 0; break;
	case 16: c->eph_port_lo = 60000; c->eph_port_hi = 50000; break;
	case 17: c->rss_reta_size = 4; c->rss_reta = NULL; break;
	case 18: c->rss_reta_size = 2; c->rss_reta = reta_other; c->rss_fields = 0x80; break;
	case 19: c->rss_reta_size = 2; c->rss_reta = reta_other; c->rss_queue = 0; break;
	case 20: c->tcp_sndbuf = 0; break;
	case 21: c->tcp_rcvbuf = 0; break;
	case 22: c->tcp_rto_init_ns = 0; break;
	case 23: c->tcp_rto_min_ns = 2 * c->tcp_rto_max_ns; break;
	case 24: c->tcp_syncookies = 3; break;
	case 25: c->tcp_cc = 200; break;
	case 26: c->tcp_prr = 3; break;
	case 27: c->tcp_ack_every = 0; break;
	case 28: c->tcp_keepalive_cnt = 0; break;
	case 29: c->tcp_keepalive_idle_ns = 0; break;
	case 30: c->tcp_keepalive_intvl_ns = 0; break;
	case 31: o->pkt_alloc = NULL; break;
	case 32: o->pkt_free = NULL; break;
	case 33: o->pkt_data = NULL; break;
	case 34: o->pkt_len = NULL; break;
	case 35: o->pkt_set_len = NULL; break;
	case 36: o->pkt_adj_head = NULL; break;
	case 37: o->pkt_trim_tail = NULL; break;
	case 38: o->pkt_clone = NULL; break;
	case 39: o->pkt_chain_append = NULL; break;
	case 40: o->pkt_chain_next = NULL; break;
	case 41: o->pkt_chain_cut = NULL; break;
	case 42: o->tx = NULL; break;
	case 43: o->random = NULL; break;
	case 44: c->caps |= IPK_CAP_TX_CSUM_TCP; o->tx_offload = NULL; break;
	case 45: c->caps |= IPK_CAP_RX_CSUM_L4; o->rx_csum = NULL; break;
	default: break;
	}
}
#define NBAD 46
#define FIRST_OPS_CASE 31

static void good_cfg(struct ipk_config *c, struct ipk_ops *o)
{
	ipk_config_default(c);
	c->ip4_be = IPK_IP4(10, 0, 0, 1);
	c->netmask_be = IPK_IP4(255, 255, 255, 0);
	memset(o, 0, sizeof(*o));
	sim_pkt_ops(o);
	o->tx = dummy_tx;
	o->random = dummy_random;
	o->tx_offload = NULL;
	o->rx_csum = NULL;
}

static void test_config_check_names_every_rejection(void)
{
	const char *whys[NBAD];
	struct ipk_config c;
	struct ipk_ops o;
	const char *why = NULL;
	void *mem;
	int i, j;

	good_cfg(&c, &o);
	CHECK_EQ(ipk_config_check(&c, &o, &why), IPK_OK);
	CHECK(why && strcmp(why, "ok") == 0);
	CHECK_EQ(ipk_config_check(&c, NULL, NULL), IPK_OK);
	CHECK_EQ(ipk_config_check(NULL, &o, &why), IPK_EINVAL);
	CHECK(why && strstr(why, "NULL"));
	mem = aligned_alloc(8, (ipk_ctx_size(&c) + 7) & ~(size_t)7);
	CHECK(ipk_ctx_init(mem, ipk_ctx_size(&c), &c, NULL) == NULL);
	for (i = 0; i < NBAD; i++) {
		good_cfg(&c, &o);
		bad_cfg(i, &c, &o);
		why = NULL;
		CHECK_EQ(ipk_config_check(&c, &o, &why), IPK_EINVAL);
		whys[i] = why;
		CHECK(why != NULL && strcmp(why, "ok") != 0);
		/* ipk_ctx_size applies the configuration rules, ipk_ctx_init all of them */
		if (i < FIRST_OPS_CASE) {
			CHECK_EQ(ipk_ctx_size(&c), 0);
			CHECK_EQ(ipk_config_check(&c, NULL, NULL), IPK_EINVAL);
		} else {
			CHECK(ipk_ctx_size(&c) > 0);
			CHECK_EQ(ipk_config_check(&c, NULL, NULL), IPK_OK);
		}
		CHECK(ipk_ctx_init(mem, 1u << 20, &c, &o) == NULL);
		for (j = 0; j < i && why; j++)
			if (whys[j] && strcmp(whys[j], why) == 0) {
				fprintf(stderr, "cases %d and %d share \"%s\"\n", j, i, why);
				CHECK(0);
			}
	}
	free(mem);
}

static void test_listen_connect_bind_need_their_callbacks(void)
{
	struct ipk_config c;
	struct ipk_ops o;
	struct ipk_ctx *ctx;
	struct ipk_conn *conn = (struct ipk_conn *)&c;
	void *mem;
	size_t sz;

	good_cfg(&c, &o);
	sz = ipk_ctx_size(&c);
	mem = aligned_alloc(8, (sz + 7) & ~(size_t)7);
	ctx = ipk_ctx_init(mem, sz, &c, &o);
	CHECK(ctx != NULL);
	/* no tcp_payload: received data would vanish */
	CHECK_EQ(ipk_tcp_listen(ctx, be(80), 8), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_connect(ctx, IPK_IP4(10, 0, 0, 2), be(80), 0, NULL, &conn, 0), IPK_EINVAL);
	CHECK(conn == NULL);
	CHECK_EQ(ipk_udp_bind(ctx, be(53)), IPK_EINVAL);
	o.tcp_payload = dummy_payload;
	CHECK_EQ(ipk_tcp_listen(ctx, be(80), 8), IPK_OK);
	free(mem);
}

/* ------------------------------------------------------------- issue 20 */

/* ops->tcp_acked_pkt (core.h): each packet given to ipk_tcp_send is shown once, the
 * object itself, in send order, once wholly acknowledged, before the tcp_acked of
 * the ACK that covered it; data of ipk_tcp_write never; the packet is the
 * integrator's from the call (the op frees it: a double free or a leak fails
 * th_no_leaks). */
#define AP_MAX 16
static struct {
	struct th *a;
	void *pkt[AP_MAX];
	void *user[AP_MAX];
	uint64_t acked_before[AP_MAX]; /* a's tcp_acked bytes at the call */
	int n;
	int abort_at;   /* abort the connection from call number abort_at (1-based; 0: no) */
	int zombie_calls; /* calls after that abort (must stay 0) */
	int aborted;
} ap;

static void ap_op(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt, void *opaque)
{
	CHECK(opaque == ap.a);
	if (ap.aborted)
		ap.zombie_calls++;
	if (ap.n < AP_MAX) {
		ap.pkt[ap.n] = pkt;
		ap.user[ap.n] = user;
		ap.acked_before[ap.n] = ap.a->acked;
	}
	ap.n++;
	sim_pkt_free_chain((struct sim_pkt *)pkt); /* ours from the call */
	if (ap.abort_at && ap.n == ap.abort_at) {
		ipk_tcp_abort(ctx, c, ap.a->now);
		ap.aborted = 1;
	}
}

static struct sim_pkt *ap_pkt(struct th *t, uint32_t len, char fill)
{
	struct sim_pkt *k = sim_pkt_alloc(t->pool);

	CHECK(k != NULL);
	if (k) {
		memset(sim_pkt_data(k), fill, len);
		k->len = len;
	}
	return k;
}

static void small_mtu(struct ipk_config *cfg)
{
	cfg->mtu = 576; /* MSS 536: a 1,400-byte packet leaves in three segments */
}

static void test_acked_pkt_shows_each_send_packet_once_in_order_never_copies(void)
{
	struct th *a, *b;
	struct ipk_conn *c;
	struct sim_pkt *k[6];
	/* sequence end of each sent packet, relative to the first byte sent */
	uint64_t end[6], sent = 0;
	int i, n = 0;

	memset(&ap, 0, sizeof(ap));
	th_pair(&a, &b, small_mtu);
	ap.a = a;
	a->close_on_fin = b->close_on_fin = 1;
	b->auto_recved = 1;
	a->ops.tcp_acked_pkt = ap_op;
	c = pair_open(a, b, 100 * SEC);
	if (!c)
		return;
	/* one packet alone: its ACK covers exactly the one queued (the inline path) */
	k[n] = ap_pkt(a, 100, 'a');
	CHECK_EQ(ipk_tcp_send(a->ctx, c, k[n], a->now), 100);
	end[n++] = sent += 100;
	pair_run(a, b, 1 * SEC);
	CHECK_EQ(ap.n, 1);
	/* then sends and copied writes mixed, one packet longer than the MSS (acked in
	 * parts: shown once, when whole), queued at once (several per ACK: the loop) */
	k[n] = ap_pkt(a, 4, 'b');
	CHECK_EQ(ipk_tcp_send(a->ctx, c, k[n], a->now), 4);
	end[n++] = sent += 4;
	CHECK_EQ(ipk_tcp_write(a->ctx, c, "copied", 6, a->now), 6);
	sent += 6;
	k[n] = ap_pkt(a, 1400, 'c');
	CHECK_EQ(ipk_tcp_send(a->ctx, c, k[n], a->now), 1400);
	end[n++] = sent += 1400;
	k[n] = ap_pkt(a, 7, 'd');
	CHECK_EQ(ipk_tcp_send(a->ctx, c, k[n], a->now), 7);
	end[n++] = sent += 7;
	CHECK_EQ(ipk_tcp_write(a->ctx, c, "more copied", 11, a->now), 11);
	sent += 11;
	k[n] = ap_pkt(a, 9, 'e');
	CHECK_EQ(ipk_tcp_send(a->ctx, c, k[n], a->now), 9);
	end[n++] = sent += 9;
	pair_run(a, b, 2 * SEC);
	CHECK_EQ(b->rxlen, (uint32_t)sent);
	CHECK_EQ(a->acked, sent);
	CHECK_EQ(ap.n, n); /* exactly once each, and nothing for the copies */
	for (i = 0; i < n && i < ap.n; i++) {
		CHECK(ap.pkt[i] == (void *)k[i]); /* in send order, the object itself */
		CHECK(ap.user[i] == c->user);
		/* before the tcp_acked of the ACK that covered it */
		CHECK(ap.acked_before[i] < end[i]);
	}
	ipk_tcp_close(a->ctx, c, a->now);
	pair_run(a, b, 70 * SEC); /* past TIME_WAIT */
	CHECK_EQ(ap.n, n);
	CHECK(th_no_leaks(a));
	CHECK(th_no_leaks(b));
	th_free(a);
	th_free(b);
}

/* The op aborts the connection at the first of three packets one ACK covers: the
 * other two are freed by the core, never shown; and packets still unacknowledged
 * when a connection is aborted are freed, never shown. */
static void test_acked_pkt_abort_inside_op_frees_the_rest_unshown(void)
{
	struct th *a, *b;
	struct ipk_conn *c;
	int i;

	memset(&ap, 0, sizeof(ap));
	th_pair(&a, &b, NULL);
	ap.a = a;
	ap.abort_at = 1;
	b->auto_recved = 1;
	a->ops.tcp_acked_pkt = ap_op;
	c = pair_open(a, b, 100 * SEC);
	if (!c)
		return;
	for (i = 0; i < 3; i++)
		CHECK_EQ(ipk_tcp_send(a->ctx, c, ap_pkt(a, 10, 'x'), a->now), 10);
	pair_run(a, b, 1 * SEC);
	CHECK_EQ(ap.n, 1);
	CHECK_EQ(ap.zombie_calls, 0);
	CHECK_EQ(a->closed, 1);
	CHECK_EQ(a->acked, 0); /* no tcp_acked on the aborted connection either */

	/* unacknowledged at the abort: freed with the queues */
	memset(&ap, 0, sizeof(ap));
	ap.a = a;
	CHECK_EQ(ipk_tcp_connect(a->ctx, b->ip_be, be(80), 0, NULL, &c, a->now), IPK_OK);
	th_pump(a, b);
	CHECK_EQ(a->connected, 2);
	for (i = 0; i < 3; i++)
		CHECK_EQ(ipk_tcp_send(a->ctx, c, ap_pkt(a, 10, 'y'), a->now), 10);
	CHECK_EQ(ipk_tcp_abort(a->ctx, c, a->now), IPK_OK);
	pair_run(a, b, 70 * SEC);
	CHECK_EQ(ap.n, 0);
	CHECK(th_no_leaks(a));
	CHECK(th_no_leaks(b));
	th_free(a);
	th_free(b);
}

int main(void)
{
	RUN(test_close_from_callback_with_now_zero_reaches_closed);
	RUN(test_write_with_stale_now_keeps_timestamps_monotonic);
	RUN(test_callbacks_may_write_send_recved_keepalive_close_abort);
	RUN(test_closed_callback_handle_dead_connect_and_udp_allowed);
	RUN(test_config_check_names_every_rejection);
	RUN(test_listen_connect_bind_need_their_callbacks);
	RUN(test_acked_pkt_shows_each_send_packet_once_in_order_never_copies);
	RUN(test_acked_pkt_abort_inside_op_frees_the_rest_unshown);
	return check_summary();
}
