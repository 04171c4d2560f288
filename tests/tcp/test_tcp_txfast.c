/*
 * The transmit fast path (tcp_out.c txf_*) against the general path it shortcuts: one
 * script of situations runs on two contexts alike, one with the fast path and one
 * with ctx->tx_fast_off, and every frame they send must be the same bytes (and the
 * same offload marks), and the connection's send state (sequence variables, flags,
 * timers, the context deadline, RACK's send stamps) the same after every step. The
 * script crosses into the general path and back (a write's tail behind Nagle, a
 * retransmission, SACK blocks, a zero window, FIN), so a shortcut that forgets some
 * bookkeeping shows up in a later step too. The fast run must have used the fast
 * path, the other must not have.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "wire/wire.h"

#define IRS 7000000u
#define A IPK_TCP_ACK
#define MS 1000000ull
#define MAX_FRAMES 160
#define MAX_STEPS 40

/* What a run leaves behind: every frame, and a digest of the send state per step. */
struct digest {
	uint32_t snd_una, snd_nxt, snd_max, rcv_nxt, rcv_adv, fl, rtx_at, delack_at, retry_at;
	uint32_t rtt_seq, rtt_t, segs_unacked, rtx_kind, cwnd, ip_id, pb_n;
	uint64_t tcp_deadline, tx_segs, pb_t_sum, pb_xmit_sum;
};

struct run {
	struct tframe f[MAX_FRAMES];
	int nf;
	struct digest d[MAX_STEPS];
	int nd;
	uint64_t fast_n;
};

static void digest(struct th *t, struct ipk_conn *c, struct run *r)
{
	struct digest *d = &r->d[r->nd < MAX_STEPS ? r->nd++ : MAX_STEPS - 1];
	struct ipk_pb *pb;

	memset(d, 0, sizeof(*d));
	d->snd_una = c->snd_una;
	d->snd_nxt = c->snd_nxt;
	d->snd_max = c->snd_max;
	d->rcv_nxt = c->rcv_nxt;
	d->rcv_adv = c->rcv_adv;
	d->fl = c->fl;
	d->rtx_at = c->rtx_at;
	d->rtx_kind = c->rtx_kind;
	d->delack_at = c->delack_at;
	d->retry_at = c->retry_at;
	d->rtt_seq = c->rtt_seq;
	d->rtt_t = c->rtt_t;
	d->segs_unacked = c->segs_unacked;
	d->cwnd = c->cwnd;
	d->ip_id = t->ctx->ip_id;
	d->tcp_deadline = t->ctx->tcp_deadline;
	d->tx_segs = ipk_counters(t->ctx)->tcp_tx_segs;
	for (pb = c->sq_head; pb; pb = pb->next) {
		d->pb_n++;
		d->pb_t_sum += pb->t * d->pb_n;
		d->pb_xmit_sum += (uint64_t)pb->xmit * d->pb_n;
	}
	/* take the frames sent so far */
	while (t->next < t->ncap) {
		struct tframe *f = &t->cap[t->next++];

		if (r->nf < MAX_FRAMES) {
			r->f[r->nf] = *f;
			r->f[r->nf].b = (uint8_t *)malloc(f->len);
			memcpy(r->f[r->nf].b, f->b, f->len);
			r->nf++;
		}
	}
}

/* The peer's ACK of everything we sent, with a window and optional data. */
static void peer(struct th *t, struct ipk_conn *c, uint32_t *pseq, uint32_t ack, uint16_t wnd,
                 const void *data, uint32_t len, int ts)
{
	struct ipk_tcp_opts o = th_ts_opt(1000u + (uint32_t)(t->now / MS), c->iss);

	th_send(t, TH_PEER_PORT, TH_LOCAL_PORT, A | (len ? IPK_TCP_PSH : 0), *pseq, ack, wnd,
	        ts ? &o : NULL, data, len);
	*pseq += len;
}

struct variant {
	void (*tweak)(struct ipk_config *cfg);
	int ts;        /* the peer offers timestamps and SACK */
	uint32_t big;  /* a write above what the fast path takes */
};

/* The passive open both scripts start from: MSS 1460, window scale 2, timestamps and
 * SACK as the variant says. NULL when the handshake failed (th_accept checked it). */
static struct ipk_conn *accept_variant(struct th *t, const struct variant *v)
{
	struct ipk_tcp_opts o = th_ts_opt(1000u, 0);
	struct ipk_conn *c = NULL;

	o.has_mss = 1;
	o.mss = 1460;
	o.has_sack_perm = (uint8_t)v->ts;
	o.has_ts = (uint8_t)v->ts;
	o.has_ws = 1;
	o.ws = 2;
	th_accept(t, IRS, &o, 60000, &c);
	return c;
}

static void script(struct th *t, const struct variant *v, struct run *r)
{
	static uint8_t buf[4096];
	struct ipk_conn *c;
	uint32_t pseq = IRS + 1, i;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7u + 3u);
	c = accept_variant(t, v);
	if (!c)
		return;
	digest(t, c, r);
	/* a request written outside any event: one segment at once */
	ipk_tcp_write(t->ctx, c, buf, 1, t->now);
	digest(t, c, r);
	/* the peer answers with data that ACKs it; echoed from the payload event */
	t->echo = 1;
	t->now += MS;
	peer(t, c, &pseq, c->snd_nxt, 60000, buf + 10, 1, v->ts);
	digest(t, c, r);
	t->now += MS;
	peer(t, c, &pseq, c->snd_nxt, 60000, buf + 20, 100, v->ts);
	digest(t, c, r);
	t->echo = 0;
	/* data only: a pure ACK now or from the delayed-ACK timer */
	t->now += MS;
	peer(t, c, &pseq, c->snd_nxt, 60000, buf + 30, 200, v->ts);
	digest(t, c, r);
	th_run_for(t, 300 * MS);
	digest(t, c, r);
	/* above one MSS (its full segments fast, not with scatter-gather), then small
	 * writes behind it (Nagle: general) */
	ipk_tcp_write(t->ctx, c, buf, v->big, t->now);
	ipk_tcp_write(t->ctx, c, buf + 7, 10, t->now);
	digest(t, c, r);
	t->now += MS;
	peer(t, c, &pseq, c->snd_una + 1000, 60000, NULL, 0, v->ts);
	digest(t, c, r);
	peer(t, c, &pseq, c->snd_nxt, 60000, NULL, 0, v->ts);
	digest(t, c, r);
	peer(t, c, &pseq, c->snd_nxt, 60000, NULL, 0, v->ts);
	digest(t, c, r);
	/* a write nobody ACKs: the loss timer (TLP or RTO) resends it */
	ipk_tcp_write(t->ctx, c, buf + 100, 50, t->now);
	digest(t, c, r);
	th_run_for(t, 2000 * MS);
	digest(t, c, r);
	peer(t, c, &pseq, c->snd_nxt, 60000, NULL, 0, v->ts);
	digest(t, c, r);
	/* out-of-order data (SACK blocks in the ACK), then the hole filled */
	pseq += 100;
	peer(t, c, &pseq, c->snd_nxt, 60000, buf + 200, 50, v->ts);
	digest(t, c, r);
	ipk_tcp_write(t->ctx, c, buf + 300, 20, t->now);
	digest(t, c, r);
	pseq -= 150;
	peer(t, c, &pseq, c->snd_nxt, 60000, buf + 100, 100, v->ts);
	pseq += 50;
	digest(t, c, r);
	/* a window update from ipk_tcp_recved outside any event */
	ipk_tcp_recved(t->ctx, c, pseq - IRS - 1, t->now);
	digest(t, c, r);
	/* a zero window holds a write back; opened, it goes */
	peer(t, c, &pseq, c->snd_nxt, 0, NULL, 0, v->ts);
	ipk_tcp_write(t->ctx, c, buf + 400, 30, t->now);
	digest(t, c, r);
	t->now += MS;
	peer(t, c, &pseq, c->snd_nxt, 60000, NULL, 0, v->ts);
	digest(t, c, r);
	peer(t, c, &pseq, c->snd_nxt, 60000, NULL, 0, v->ts);
	ipk_tcp_write(t->ctx, c, buf + 500, 40, t->now);
	digest(t, c, r);
	/* FIN (general), and the close */
	ipk_tcp_close(t->ctx, c, t->now);
	digest(t, c, r);
	peer(t, c, &pseq, c->snd_nxt, 60000, NULL, 0, v->ts);
	r->fast_n = t->ctx->tx_fast_n;
	ipk_tcp_abort(t->ctx, c, t->now);
}

static void run_free(struct run *r)
{
	int i;

	for (i = 0; i < r->nf; i++)
		free(r->f[i].b);
}

static int frames_same(const struct tframe *a, const struct tframe *b)
{
	return a->len == b->len && a->flags == b->flags && a->mss == b->mss &&
	       a->chained == b->chained && memcmp(a->b, b->b, a->len) == 0;
}

/* Both ways through the script; the fast path must have sent at least `min_fast`. */
static void compare_with(void (*sc)(struct th *, const struct variant *, struct run *),
                         const struct variant *v, uint64_t min_fast)
{
	static struct run fast, slow;
	struct th *tf = th_new(v->tweak), *ts = th_new(v->tweak);
	int i;

	memset(&fast, 0, sizeof(fast));
	memset(&slow, 0, sizeof(slow));
	ts->ctx->tx_fast_off = 1;
	sc(tf, v, &fast);
	sc(ts, v, &slow);
	if (fast.fast_n < min_fast)
		fprintf(stderr, "fast path sent %llu, want >= %llu\n",
		        (unsigned long long)fast.fast_n, (unsigned long long)min_fast);
	CHECK(fast.fast_n >= min_fast);
	CHECK_EQ(slow.fast_n, 0);
	CHECK(fast.nf > 10);
	CHECK_EQ(fast.nf, slow.nf);
	CHECK_EQ(fast.nd, slow.nd);
	for (i = 0; i < fast.nf && i < slow.nf; i++) {
		if (!frames_same(&fast.f[i], &slow.f[i]))
			fprintf(stderr, "frame %d differs\n", i);
		CHECK(frames_same(&fast.f[i], &slow.f[i]));
	}
	for (i = 0; i < fast.nd && i < slow.nd; i++) {
		if (memcmp(&fast.d[i], &slow.d[i], sizeof(fast.d[i])) != 0)
			fprintf(stderr, "state after step %d differs\n", i);
		CHECK(memcmp(&fast.d[i], &slow.d[i], sizeof(fast.d[i])) == 0);
	}
	CHECK(th_no_leaks(tf));
	CHECK(th_no_leaks(ts));
	run_free(&fast);
	run_free(&slow);
	th_free(tf);
	th_free(ts);
}

static void compare(const struct variant *v, uint64_t min_fast)
{
	compare_with(script, v, min_fast);
}

static void test_txfast_same_frames_ts_sack(void)
{
	const struct variant v = {NULL, 1, 3000};

	compare(&v, 6);
}

static void test_txfast_same_frames_no_options(void)
{
	const struct variant v = {NULL, 0, 3000};

	compare(&v, 6);
}

static void offload(struct ipk_config *c)
{
	c->caps |= IPK_CAP_TX_CSUM_IP4 | IPK_CAP_TX_CSUM_TCP;
}

static void test_txfast_same_frames_csum_offload(void)
{
	const struct variant v = {offload, 1, 3000};

	compare(&v, 6);
}

/* With scatter-gather, payloads above IPK_TCP_COPY_MAX go as chains (general path). */
static void sg(struct ipk_config *c) { c->caps |= IPK_CAP_SG; }

static void test_txfast_same_frames_sg(void)
{
	const struct variant v = {sg, 1, 1000};

	compare(&v, 6);
}

static void no_delack(struct ipk_config *c) { c->tcp_delack_ns = 0; }

static void test_txfast_same_frames_no_delack(void)
{
	const struct variant v = {no_delack, 1, 3000};

	compare(&v, 6);
}

/* Another connection from peer port TH_PEER_PORT + k (the listener is up). */
static struct ipk_conn *accept_k(struct th *t, const struct ipk_tcp_opts *o, uint16_t k)
{
	uint16_t port = (uint16_t)(TH_PEER_PORT + k);
	struct tseg s;

	th_send(t, port, TH_LOCAL_PORT, IPK_TCP_SYN, IRS, 0, 60000, o, NULL, 0);
	if (!th_next(t, &s))
		return NULL;
	if (o->has_ts) {
		/* RFC 7323 §3.2: negotiated, so every later segment carries one */
		struct ipk_tcp_opts ts = th_ts_opt(o->tsval, s.o.tsval);

		th_send(t, port, TH_LOCAL_PORT, A, IRS + 1, s.h.seq + 1, 60000, &ts,
		        NULL, 0);
	} else {
		th_send(t, port, TH_LOCAL_PORT, A, IRS + 1, s.h.seq + 1, 60000, NULL,
		        NULL, 0);
	}
	return t->conn;
}

/* One write on c and the peer's ACK of it (port: the peer's). */
/* Does the context hold a valid transmit template for c? */
static int has_tmpl(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	uint32_t i;

	for (i = 0; i < IPK_TT_SLOTS; i++)
		if (ctx->tt_slot[i].c == c && ctx->tt_slot[i].gen == ctx->tt_gen)
			return 1;
	return 0;
}

static void write_acked(struct th *t, struct ipk_conn *c, uint16_t port, const uint8_t *p,
                        uint32_t len, int ts)
{
	struct ipk_tcp_opts o = th_ts_opt(1000u + (uint32_t)(t->now / MS), c->iss);

	ipk_tcp_write(t->ctx, c, p, len, t->now);
	t->now += MS;
	th_send(t, port, TH_LOCAL_PORT, A, IRS + 1, c->snd_nxt, 60000, ts ? &o : NULL, NULL, 0);
}

/*
 * Two connections taking turns and in runs: each one's transmit template (its slot
 * of ctx->tt) is built for its second fast segment and kept while the other sends;
 * an ARP change of the peer's address drops both with the next-hop cache. Every
 * frame must be what the general path sends.
 */
static void script_two(struct th *t, const struct variant *v, struct run *r)
{
	/* A..A B A B B A A, then the peer's MAC changes, A A B */
	static const char order[] = "AAABABBAAxAAB";
	static const uint8_t mac2[6] = {0x02, 0, 0, 0, 0x77, 0x02};
	static uint8_t buf[512];
	struct ipk_tcp_opts o = th_ts_opt(1000u, 0);
	struct ipk_conn *c[2];
	uint32_t i, tmpl_seen = 0;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 13u + 5u);
	o.has_mss = 1;
	o.mss = 1460;
	o.has_sack_perm = (uint8_t)v->ts;
	o.has_ts = (uint8_t)v->ts;
	th_accept(t, IRS, &o, 60000, &c[0]);
	c[1] = accept_k(t, &o, 1);
	if (!c[0] || !c[1] || c[0] == c[1])
		return;
	for (i = 0; order[i]; i++) {
		int k = order[i] == 'B';

		if (order[i] == 'x') {
			ipk_arp_add_static(t->ctx, t->peer_be, mac2);
			continue;
		}
		write_acked(t, c[k], (uint16_t)(TH_PEER_PORT + k), buf + i * 7u, 1u + i * 9u, v->ts);
		tmpl_seen += (uint32_t)has_tmpl(t->ctx, c[k]);
		digest(t, c[k], r);
	}
	/* the fast context used its template (the other never sends fast) */
	if (!t->ctx->tx_fast_off)
		CHECK(tmpl_seen >= 4);
	r->fast_n = t->ctx->tx_fast_n;
	ipk_tcp_abort(t->ctx, c[0], t->now);
	ipk_tcp_abort(t->ctx, c[1], t->now);
}

/*
 * Connections taking turns, one segment each (a ping-pong over many connections):
 * each keeps a template of its own from its second segment on (they lie in one
 * array, so in distinct slots), and every frame is still what the general path
 * sends.
 */
#define MANY 6
static void script_many(struct th *t, const struct variant *v, struct run *r)
{
	static uint8_t buf[256];
	struct ipk_tcp_opts o = th_ts_opt(1000u, 0);
	struct ipk_conn *c[MANY];
	uint32_t i, k, tmpl_seen = 0;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 29u + 3u);
	o.has_mss = 1;
	o.mss = 1460;
	o.has_sack_perm = (uint8_t)v->ts;
	o.has_ts = (uint8_t)v->ts;
	th_accept(t, IRS, &o, 60000, &c[0]);
	for (k = 1; k < MANY; k++)
		c[k] = accept_k(t, &o, (uint16_t)k);
	for (k = 0; k < MANY; k++)
		if (!c[k])
			return;
	for (i = 0; i < 4; i++) {
		for (k = 0; k < MANY; k++) {
			write_acked(t, c[k], (uint16_t)(TH_PEER_PORT + k), buf + i * 11u + k,
			            1u + i * 5u + k, v->ts);
			if (i >= 2)
				tmpl_seen += (uint32_t)has_tmpl(t->ctx, c[k]);
			digest(t, c[k], r);
		}
	}
	/* from the second round on every connection sends from its own template */
	if (!t->ctx->tx_fast_off)
		CHECK_EQ(tmpl_seen, 2u * MANY);
	r->fast_n = t->ctx->tx_fast_n;
	for (k = 0; k < MANY; k++)
		ipk_tcp_abort(t->ctx, c[k], t->now);
}

static void test_txfast_template_per_connection(void)
{
	const struct variant ts = {NULL, 1, 0}, plain = {NULL, 0, 0}, off = {offload, 1, 0};

	compare_with(script_many, &ts, 3 * MANY);
	compare_with(script_many, &plain, 3 * MANY);
	compare_with(script_many, &off, 3 * MANY);
}

static void test_txfast_template_two_connections(void)
{
	const struct variant ts = {NULL, 1, 0}, plain = {NULL, 0, 0}, off = {offload, 1, 0};

	compare_with(script_two, &ts, 10);
	compare_with(script_two, &plain, 10);
	compare_with(script_two, &off, 10);
}

/*
 * Bulk: writes of several MSS each, ACKs that open the window two segments at a time,
 * a window that holds the tail back. The fast path sends every full-MSS segment a
 * pass sends (output_data's loop, without TSO), PSH only on the one that empties the
 * queue; a partial segment behind Nagle or a short window goes the general way.
 */
static void script_bulk(struct th *t, const struct variant *v, struct run *r)
{
	static uint8_t buf[4096];
	struct ipk_conn *c;
	uint32_t pseq = IRS + 1, i;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 11u + 1u);
	c = accept_variant(t, v);
	if (!c)
		return;
	digest(t, c, r);
	for (i = 0; i < 3; i++) {
		ipk_tcp_write(t->ctx, c, buf, 2 * c->mss, t->now);
		digest(t, c, r);
	}
	t->now += MS;
	peer(t, c, &pseq, c->snd_una + 2 * 1460, 60000, NULL, 0, v->ts);
	digest(t, c, r);
	peer(t, c, &pseq, c->snd_una + 2 * 1460, 60000, NULL, 0, v->ts);
	digest(t, c, r);
	/* a short window: 4,400 bytes (field 1100, scale 2) over what is in flight */
	t->now += MS;
	peer(t, c, &pseq, c->snd_nxt, 1100, NULL, 0, v->ts);
	ipk_tcp_write(t->ctx, c, buf, 2 * c->mss, t->now);
	ipk_tcp_write(t->ctx, c, buf + 5, 3000, t->now); /* spans pbs: general */
	digest(t, c, r);
	t->now += MS;
	peer(t, c, &pseq, c->snd_nxt, 60000, NULL, 0, v->ts);
	digest(t, c, r);
	t->now += MS;
	peer(t, c, &pseq, c->snd_nxt, 60000, NULL, 0, v->ts);
	digest(t, c, r);
	peer(t, c, &pseq, c->snd_nxt, 60000, NULL, 0, v->ts);
	digest(t, c, r);
	r->fast_n = t->ctx->tx_fast_n;
	ipk_tcp_abort(t->ctx, c, t->now);
}

static void test_txfast_bulk_full_segments(void)
{
	const struct variant ts = {NULL, 1, 0}, plain = {NULL, 0, 0}, off = {offload, 1, 0};
	const struct variant sgv = {sg, 1, 0};

	compare_with(script_bulk, &ts, 10);
	compare_with(script_bulk, &plain, 10);
	compare_with(script_bulk, &off, 10);
	/* scatter-gather sends full segments by reference: the general path's */
	compare_with(script_bulk, &sgv, 0);
}

/* The inline checksum of small segments is the one csum.c computes. */
static void test_csum_l4_small_matches(void)
{
	uint8_t b[200];
	uint32_t len, i, bad = 0;

	for (i = 0; i < sizeof(b); i++)
		b[i] = (uint8_t)(i * 37u + 11u);
	for (len = 0; len <= sizeof(b); len++) {
		uint16_t want = ipk_csum_l4(IPK_IP4(10, 1, 2, 3), IPK_IP4(192, 168, 200, 255),
		                            IPK_IPPROTO_TCP, b, len);

		bad += ipk_csum_l4_small(IPK_IP4(10, 1, 2, 3), IPK_IP4(192, 168, 200, 255),
		                         IPK_IPPROTO_TCP, b, len) != want;
	}
	CHECK_EQ(bad, 0);
}

int main(void)
{
	RUN(test_csum_l4_small_matches);
	RUN(test_txfast_same_frames_ts_sack);
	RUN(test_txfast_same_frames_no_options);
	RUN(test_txfast_same_frames_csum_offload);
	RUN(test_txfast_same_frames_sg);
	RUN(test_txfast_same_frames_no_delack);
	RUN(test_txfast_template_two_connections);
	RUN(test_txfast_template_per_connection);
	RUN(test_txfast_bulk_full_segments);
	return check_summary();
}
