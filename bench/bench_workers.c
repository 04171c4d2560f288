/* ipkit-bench over the workers runtime (see bench_workers.h). */
#include "bench_workers.h"

#include "bench_flow.h"

#include <ipkit/runtime.h>

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BW_SEND_MAX (64u * 1024u)
#define BW_ROUNDS 64

/* A client connection's sends not yet reported by sent, oldest first (sent comes in
 * order, at most IPK_APP_SENDQ outstanding): freed by sent, all at once by closed
 * (runtime.h: every unfinished send's buffer is the app's again) and, for the
 * connections still open, after ipk_workers_stop (which reports nothing for them). */
struct bw_txq {
	void *buf[IPK_APP_SENDQ];
	uint32_t head, n;
};

struct bw_srv;

struct bw_worker {
	struct bench_worker w;
	struct bench_counters pub;   /* w.c for the printing thread */
	int started;
	struct bw_txq *txq;          /* client: one per flow (w.flows[i].idx) */
	struct bw_srv *srv;          /* server: the connections not yet closed */
};

struct bw {
	const struct bench_opts *o;
	struct bw_worker *ws;
};

/* Server side of one connection: refs held for their echo (ipk_app_echoq). */
struct bw_srv {
	struct bench_flow *f;
	struct ipk_app_echoq q;
	int fin, closing;
	struct bw_srv *prev, *next; /* bw_worker.srv */
};

static struct bw_worker *bw_of(struct ipk_app *a)
{
	return (struct bw_worker *)ipk_app_state(a);
}

static uint64_t bw_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------ client */

static void bw_txq_push(struct bw_txq *q, void *buf)
{
	q->buf[(q->head + q->n++) % IPK_APP_SENDQ] = buf;
}

/* The oldest outstanding send's buffer (the one sent reports), or NULL. */
static void *bw_txq_pop(struct bw_txq *q)
{
	void *b;
	if (!q->n)
		return NULL;
	b = q->buf[q->head];
	q->head = (q->head + 1) % IPK_APP_SENDQ;
	q->n--;
	return b;
}

static void bw_txq_free(struct bw_txq *q)
{
	void *b;
	while ((b = bw_txq_pop(q)) != NULL)
		free(b);
}

/* Hand admitted bytes to the stack in buffers of ours (freed by sent). UNIFIED runs
 * sent inside ipk_app_send, which calls us again: then busy = 2 asks the running loop
 * for another pass, since no later event may come to resume a burst sender. */
static int bw_kick_pass(struct ipk_app *a, struct bench_flow *f)
{
	struct bench_worker *w = &bw_of(a)->w;
	int round;
	for (round = 0; round < BW_ROUNDS && f->open; round++) {
		uint8_t *buf;
		uint32_t n;
		if (!bench_flow_tx_pending(w, f) &&
		    (w->o->mode != BENCH_BURST || !bench_worker_admit(w, f, bw_now())))
			return 0;
		if (bw_of(a)->txq[f->idx].n >= IPK_APP_SENDQ)
			return 0; /* the runtime's bound: a sent kicks again */
		buf = (uint8_t *)malloc(BW_SEND_MAX);
		if (!buf)
			return 0;
		n = bench_flow_tx_fill(w, f, buf, BW_SEND_MAX, 0);
		/* queued first: under UNIFIED sent comes from inside ipk_app_send */
		bw_txq_push(&bw_of(a)->txq[f->idx], buf);
		if (ipk_app_send(a, f->cid, buf, n) < 0) { /* IPK_EAGAIN: sent kicks again */
			bw_of(a)->txq[f->idx].n--; /* the newest, refused: not outstanding */
			free(buf);
			return 0;
		}
		bench_flow_tx_done(w, f, n);
	}
	return 1;
}

static void bw_kick(struct ipk_app *a, struct bench_flow *f)
{
	if (f->busy) {
		f->busy = 2;
		return;
	}
	do {
		f->busy = 1;
		if (bw_kick_pass(a, f)) /* rounds bound hit: come back at once */
			f->busy = 2;
	} while (f->busy == 2 && f->open);
	f->busy = 0;
}

static void bw_connected(struct ipk_app *a, uint64_t cid, void *user)
{
	struct bw_worker *bw = bw_of(a);
	struct bench_flow *f = (struct bench_flow *)user;
	f->cid = cid;
	f->open = 1;
	bw->w.c.conns++;
	bench_worker_admit(&bw->w, f, bw_now());
	bw_kick(a, f);
	bench_counters_publish(&bw->pub, &bw->w.c);
}

static void bw_client_data(struct ipk_app *a, struct bench_flow *f, struct ipk_pkt *ref,
                           const uint8_t *data, uint32_t len)
{
	struct bench_worker *w = &bw_of(a)->w;
	uint64_t now = bw_now();
	if (!ref) { /* the server closed its side during the run */
		if (!w->stopping)
			w->c.closes++;
		ipk_app_close(a, f->cid);
		return;
	}
	bench_flow_rx(w, f, data, len, now);
	ipk_app_release(a, f->cid, ref, len);
	if (w->o->mode == BENCH_PINGPONG && bench_worker_admit(w, f, now))
		bw_kick(a, f);
}

/* ------------------------------------------------------------------ server */

static void bw_srv_maybe_close(struct ipk_app *a, struct bw_srv *s)
{
	if (s->fin && !s->q.head && !s->closing) {
		s->closing = 1;
		ipk_app_close(a, s->f->cid);
	}
}

static void *bw_accepted(struct ipk_app *a, uint64_t cid, const struct ipk_tuple *t)
{
	struct bw_worker *bw = bw_of(a);
	struct bw_srv *s = (struct bw_srv *)calloc(1, sizeof(*s));
	(void)t;
	if (!s || !(s->f = bench_flow_new(&bw->w))) {
		free(s);
		ipk_app_close(a, cid);
		return NULL;
	}
	s->f->cid = cid;
	s->f->open = 1;
	bw->w.c.conns++;
	s->next = bw->srv;
	if (bw->srv)
		bw->srv->prev = s;
	bw->srv = s;
	return s;
}

/* Over IPv6 the same (the server needs no address). */
static void *bw_accepted6(struct ipk_app *a, uint64_t cid, const struct ipk_atuple *t)
{
	(void)t;
	return bw_accepted(a, cid, NULL);
}

static void bw_srv_data(struct ipk_app *a, struct bw_srv *s, struct ipk_pkt *ref, uint32_t len)
{
	struct bench_worker *w = &bw_of(a)->w;
	if (!ref) {
		s->fin = 1;
		bw_srv_maybe_close(a, s);
		return;
	}
	bench_flow_server_rx(w, s->f, len);
	if (w->o->mode != BENCH_PINGPONG) {
		ipk_app_release(a, s->f->cid, ref, len);
		return;
	}
	/* the ref is ours until released: --corrupt-echo may write into it */
	bench_flow_maybe_corrupt(w, ipk_pkt_mtod(ref), ref->len);
	ipk_app_echoq_add(a, s->f->cid, &s->q, ref);
}

static void bw_srv_sent(struct ipk_app *a, struct bw_srv *s, uint32_t len)
{
	if (ipk_app_echoq_sent(a, s->f->cid, &s->q, len) < 0)
		return;
	bw_of(a)->w.c.tx_bytes += len;
	bw_srv_maybe_close(a, s);
}

static void bw_srv_unlink(struct bw_worker *bw, struct bw_srv *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		bw->srv = s->next;
	if (s->next)
		s->next->prev = s->prev;
}

static void bw_srv_free(struct ipk_app *a, struct bw_srv *s)
{
	bw_srv_unlink(bw_of(a), s);
	ipk_app_echoq_drop(a, s->f->cid, &s->q); /* refs go back even after closed */
	bench_flow_free(s->f);
	free(s);
}

/* ------------------------------------------------------------------ events */

/* One active open to -s, in its family. Over IPv6 the runtime holds the open until
 * this worker's --ip6 (or link-local) address has passed DAD (runtime.h). */
static int bw_connect(struct ipk_app *a, const struct bench_opts *o, struct bench_flow *f)
{
	struct ipk_addr peer;
	if (!o->ip6)
		return ipk_app_connect(a, o->server_ip4_be, ipk_htons(o->port), f);
	memset(&peer, 0, sizeof(peer));
	peer.family = IPK_AF_INET6;
	memcpy(peer.a, o->server_ip6, 16);
	return ipk_app_connect_addr(a, &peer, ipk_htons(o->port), f);
}

static void bw_start(struct ipk_app *a, unsigned worker)
{
	struct bw *b = (struct bw *)ipk_app_arg(a);
	struct bw_worker *bw = &b->ws[worker];
	uint32_t i;
	ipk_app_set_state(a, bw);
	if (!b->o->client) {
		ipk_app_listen(a, ipk_htons(b->o->port));
	} else {
		for (i = 0; i < bw->w.nflows; i++) {
			struct bench_flow *f = &bw->w.flows[i];
			f->handle = f; /* "connect pending" until connected or closed */
			if (bw_connect(a, b->o, f) < 0) {
				f->handle = NULL;
				bw->w.c.connect_fails++;
			}
		}
	}
	__atomic_store_n(&bw->started, 1, __ATOMIC_RELEASE);
}

static void bw_stop(struct ipk_app *a)
{
	struct bw_worker *bw = bw_of(a);
	uint32_t i;
	bw->w.stopping = 1;
	for (i = 0; i < bw->w.nflows; i++)
		if (bw->w.flows[i].handle && !bw->w.flows[i].open)
			bw->w.c.connect_fails++; /* never opened during the whole run */
	bench_counters_publish(&bw->pub, &bw->w.c);
}

static void bw_data(struct ipk_app *a, uint64_t cid, void *user, struct ipk_pkt *ref,
                    const uint8_t *data, uint32_t len)
{
	struct bw_worker *bw = bw_of(a);
	if (!user) {
		if (ref)
			ipk_app_release(a, cid, ref, len);
		return;
	}
	if (bw->w.o->client)
		bw_client_data(a, (struct bench_flow *)user, ref, data, len);
	else
		bw_srv_data(a, (struct bw_srv *)user, ref, len);
	bench_counters_publish(&bw->pub, &bw->w.c);
}

static void bw_sent(struct ipk_app *a, uint64_t cid, void *user, const void *buf, uint32_t len)
{
	struct bw_worker *bw = bw_of(a);
	(void)cid;
	if (!user)
		return;
	if (!bw->w.o->client) {
		bw_srv_sent(a, (struct bw_srv *)user, len);
		return;
	}
	/* sent reports this connection's sends in order: the oldest outstanding is buf */
	free(bw_txq_pop(&bw->txq[((struct bench_flow *)user)->idx]));
	(void)buf;
	bw_kick(a, (struct bench_flow *)user);
}

static void bw_closed(struct ipk_app *a, uint64_t cid, void *user, enum ipk_close_reason why)
{
	struct bw_worker *bw = bw_of(a);
	(void)cid;
	if (!user)
		return;
	if (!bw->w.o->client) {
		bw->w.c.conns--;
		bw_srv_free(a, (struct bw_srv *)user);
		return;
	}
	bw_txq_free(&bw->txq[((struct bench_flow *)user)->idx]); /* unfinished: ours again */
	bench_flow_closed(&bw->w, (struct bench_flow *)user, why == IPK_CLOSE_NORMAL);
	bench_counters_publish(&bw->pub, &bw->w.c); /* bw_wait_opens sees failed opens */
}

static const struct ipk_app_ops bw_ops = {
	.start = bw_start,
	.stop = bw_stop,
	.accepted = bw_accepted,
	.connected = bw_connected,
	.data = bw_data,
	.sent = bw_sent,
	.closed = bw_closed,
	.accepted6 = bw_accepted6,
};

/* ------------------------------------------------------------------ main */

static int bw_check(const struct bench_opts *o)
{
	const char *why = o->proto == 17 ? "UDP (the workers runtime carries TCP only)" :
	                  o->rate ? "-r (the workers runtime has no application timer)" : NULL;
	if (!why)
		return 0;
	fprintf(stderr, "ipkit-bench: -T/--model cannot run %s; use -T 1 without --model\n", why);
	return -1;
}

/* --ip6: every worker's core gets the static address (and its link-local); the
 * options of bench_workers_run's call, read by the workers' threads at start. */
static const struct bench_opts *bw_opts6;

static void bw_tweak6(struct ipk_config *c, void *app)
{
	(void)app;
	c->ip6_enable = 1;
	memcpy(c->ip6_addr, bw_opts6->ip6_self, 16);
	c->ip6_prefix_len = bw_opts6->ip6_plen;
}

static struct ipk_workers *bw_start_all(const struct bench_opts *o, struct bw *b)
{
	struct ipk_workers_cfg cfg;
	struct ipk_workers *ws;
	char err[256], spec[512];
	if (o->pcap)
		snprintf(spec, sizeof(spec), "%s,pcap=%s", o->io, o->pcap);
	else
		snprintf(spec, sizeof(spec), "%s", o->io);
	ipk_workers_cfg_default(&cfg);
	cfg.node.io_spec = spec;
	cfg.node.ip4_be = o->ip4_be;
	cfg.node.prefix_len = o->prefix_len;
	cfg.node.gateway_be = o->gw_be;
	cfg.node.busy_poll = o->busy_poll;
	if (o->ip6) { /* IPv6: the --ip6 address in every worker's core */
		bw_opts6 = o;
		cfg.node.core_tweak = bw_tweak6;
	}
	cfg.nworkers = o->threads;
	cfg.model = o->model == BENCH_MODEL_MERGE ? IPK_MODEL_MERGE :
	            o->model == BENCH_MODEL_SPLIT ? IPK_MODEL_SPLIT : IPK_MODEL_UNIFIED;
	cfg.steer = IPK_STEER_SOFT;
	cfg.app = &bw_ops;
	cfg.app_arg = b;
	ws = ipk_workers_start(&cfg, err, sizeof(err));
	if (!ws)
		fprintf(stderr, "ipkit-bench: %s\n", err[0] ? err : "workers did not start");
	return ws;
}

/* A client over IPv6: the clock starts once every connection has opened or failed,
 * so the DAD wait (about 1-2 s, the runtime holds the opens meanwhile) is not
 * counted as run time. Bounded: the runtime fails a held open after 10 s; 30 s here
 * covers a slow handshake too. Returns 0, or -1 when the signal or bound came first
 * (the run goes on and reports what it sees). */
static int bw_wait_opens(struct bw *b)
{
	const struct bench_opts *o = b->o;
	uint64_t end = bw_now() + 30ull * 1000000000ull;
	while (bw_now() < end) {
		struct timespec d = { 0, 10000000 };
		struct bench_counters sum;
		uint32_t k;
		memset(&sum, 0, sizeof(sum));
		for (k = 0; k < o->threads; k++)
			bench_counters_add_published(&sum, &b->ws[k].pub);
		if (sum.conns + sum.connect_fails + sum.closes >= o->conns)
			return 0;
		nanosleep(&d, NULL);
	}
	fprintf(stderr, "ipkit-bench: not every IPv6 connection opened within 30 s\n");
	return -1;
}

/* Print a line a second until the duration is over or SIGINT/SIGTERM. */
static void bw_report(struct bw *b, struct bench_report *r)
{
	const struct bench_opts *o = b->o;
	uint64_t end = o->duration_s ? bw_now() + o->duration_s * 1000000000ull : UINT64_MAX;
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	while (bw_now() < end) {
		struct timespec d = { 0, 20000000 };
		struct bench_counters sum;
		uint32_t k;
		if (sigtimedwait(&sigs, NULL, &d) > 0)
			break;
		memset(&sum, 0, sizeof(sum));
		for (k = 0; k < o->threads; k++)
			bench_counters_add_published(&sum, &b->ws[k].pub);
		bench_report_tick(r, &sum, bw_now());
	}
}

static int bw_finish(struct bw *b, struct bench_report *r)
{
	struct bench_counters sum;
	struct hist *lat = (struct hist *)malloc(sizeof(*lat));
	uint32_t k;
	int rc;
	if (!lat)
		return BENCH_EXIT_SETUP;
	hist_init(lat);
	memset(&sum, 0, sizeof(sum));
	for (k = 0; k < b->o->threads; k++) {
		bench_counters_add(&sum, &b->ws[k].w.c);
		hist_merge(lat, &b->ws[k].w.lat);
	}
	bench_report_summary(r, &sum, lat, bw_now());
	rc = bench_exit_status(b->o, &sum);
	free(lat);
	return rc;
}

int bench_workers_run(const struct bench_opts *o)
{
	struct bw b;
	struct bench_report r;
	struct ipk_workers *ws;
	sigset_t sigs;
	uint32_t k;
	int rc;
	if (bw_check(o) < 0)
		return BENCH_EXIT_USAGE;
	b.o = o;
	b.ws = (struct bw_worker *)calloc(o->threads, sizeof(*b.ws));
	if (!b.ws)
		return BENCH_EXIT_SETUP;
	for (k = 0; k < o->threads; k++) {
		uint32_t share = o->client ? o->conns / o->threads + (k < o->conns % o->threads) : 0;
		if (bench_worker_init(&b.ws[k].w, o, share) < 0)
			return BENCH_EXIT_SETUP;
		b.ws[k].txq = (struct bw_txq *)calloc(share ? share : 1, sizeof(*b.ws[k].txq));
		if (!b.ws[k].txq)
			return BENCH_EXIT_SETUP;
	}
	/* the workers inherit the mask, so only bw_report takes the signals */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	ws = bw_start_all(o, &b);
	if (!ws)
		return BENCH_EXIT_SETUP;
	for (k = 0; k < o->threads; k++) /* start hooks (listen, connect) have run */
		while (!__atomic_load_n(&b.ws[k].started, __ATOMIC_ACQUIRE)) {
			struct timespec d = { 0, 1000000 };
			nanosleep(&d, NULL);
		}
	if (!o->client)
		fprintf(stderr, "ipkit-bench: serving on %s port %u (tcp, %u workers, %s)\n", o->io,
		        o->port, o->threads, bench_model_name(o->model));
	if (o->client && o->ip6)
		(void)bw_wait_opens(&b);
	bench_report_start(&r, o, stdout, bw_now());
	bw_report(&b, &r);
	ipk_workers_stop(ws);
	/* runtime.h: nothing is reported for the connections still open at stop, and
	 * once it returned no thread reads their send buffers: free them, and the
	 * server's per-connection state (its held refs go with the pools) */
	for (k = 0; k < o->threads; k++) {
		struct bw_worker *bw = &b.ws[k];
		uint32_t i;
		for (i = 0; o->client && i < bw->w.nflows; i++)
			bw_txq_free(&bw->txq[i]);
		while (bw->srv) {
			struct bw_srv *s = bw->srv;
			bw->srv = s->next;
			bench_flow_free(s->f);
			free(s);
		}
	}
	rc = bw_finish(&b, &r);
	ipk_workers_destroy(ws);
	for (k = 0; k < o->threads; k++) {
		bench_worker_free(&b.ws[k].w);
		free(b.ws[k].txq);
	}
	free(b.ws);
	return rc;
}
