/*
 * ipkitd --workers N: work one worker gives another, as messages (svc/README.md,
 * "Towards parallel passes", the cross-worker row). One single-producer
 * single-consumer ring per (from, to) pair (runtime/spsc.h); the producer is
 * worker `from`'s thread, the consumer worker `to`'s, which drains its inbox at the
 * start of its pass (d_msg_drain), before it takes its hand-offs. A message names
 * its socket by application id and socket id (index and generation), never by a
 * pointer the receiver would have to trust: a socket gone or reused meanwhile is
 * not found, and the message's payload is freed and counted. With one worker none
 * of this exists.
 *
 * Kinds so far: a UDP datagram for a socket of another worker (from the wire, the
 * steering gave the frame to the worker of its flow, or from another application
 * of this daemon; the receiver applies the socket's queue limits, as for its own
 * datagrams), a socket handed over with its CONNECT from a bound port (the
 * worker its flow hashes to connects it, d_sock_handover), and a CLOSE from the
 * control ring (worker 0's) of another worker's socket: the owner destroys it and
 * sends the result back (D_MSG_CLOSED), which worker 0 posts on the control ring.
 *
 * Two ways to send: d_msg_send may fail on a full ring (a datagram is then lost,
 * a CONNECT retried by its caller); d_msg_post never loses a message it accepted:
 * a full ring puts it on the sender's private outbox (FIFO per destination), which
 * the sender moves into the ring at the start of each of its passes. Only the
 * sender's thread touches its outbox.
 */
#include "daemon.h"

#include "../runtime/spsc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define D_MSG_SLOTS 256u /* per (from, to): a full ring drops (counted), and
                          * bounds the datagrams in flight between two workers */

struct d_msg {
	uint32_t kind;               /* D_MSG_* */
	uint32_t app_id, sock_id;    /* the receiver's socket, looked up again */
	void *p;                     /* the payload, owned by the message */
	uint64_t arg;                /* D_MSG_CLOSE(D): the CLOSE's user_data */
	int32_t res;                 /* D_MSG_CLOSED: its result */
};

/* A message its ring had no room for (d_msg_post), on its sender's outbox. */
struct d_obox {
	struct d_obox *next;
	unsigned to;
	struct d_msg m;
};

static struct spsc *d_mq(struct d_daemon *d, unsigned from, unsigned to)
{
	return &d->mq[from * d->nw + to];
}

/* Slots per ring: D_MSG_SLOTS, or IPKITD_MSG_SLOTS (a power of two, 2 to
 * 65,536) for the tests that make the rings overflow on purpose
 * (svc_w2_workers_outbox: the outbox then carries what they cannot). */
static uint32_t d_msg_slots(void)
{
	const char *e = getenv("IPKITD_MSG_SLOTS");
	long v = e ? strtol(e, NULL, 10) : 0;
	if (v >= 2 && v <= 65536 && (v & (v - 1)) == 0)
		return (uint32_t)v;
	return D_MSG_SLOTS;
}

/* nw > 1: nw * nw rings (the diagonal is never used; one index rule is simpler).
 * 0 or -1 (no memory). */
int d_msg_init(struct d_daemon *d)
{
	unsigned i;
	uint32_t slots = d_msg_slots();
	d->mq = (struct spsc *)calloc((size_t)d->nw * d->nw, sizeof *d->mq);
	if (!d->mq)
		return -1;
	for (i = 0; i < d->nw * d->nw; i++)
		if (spsc_init(&d->mq[i], slots, sizeof(struct d_msg)) < 0)
			return -1;
	return d_pinst_init(d);
}

static void d_msg_free(struct d_msg *m)
{
	free(m->p); /* D_MSG_UDP: a struct d_dgram */
	m->p = NULL;
}

/* After the workers stopped: free what was never delivered, then the rings. */
void d_msg_fini(struct d_daemon *d)
{
	unsigned i;
	for (i = 0; d->mq && i < d->nw * d->nw; i++) {
		struct spsc *r = &d->mq[i];
		uint32_t k, n = r->slots ? spsc_cons_avail(r) : 0;
		for (k = 0; k < n; k++)
			d_msg_free((struct d_msg *)spsc_cons_slot(r, k));
		spsc_fini(r);
	}
	free(d->mq);
	d->mq = NULL;
	d_pinst_fini(d);
	for (i = 0; d->wk && i < d->nw; i++)
		while (d->wk[i].ob_h) {
			struct d_obox *o = d->wk[i].ob_h;
			d->wk[i].ob_h = o->next;
			d_msg_free(&o->m);
			free(o);
		}
}

/* From worker `from` (the calling thread) to s's worker: kind with payload p,
 * whose ownership passes to the message. 0, or -1 when the ring is full (p is
 * then still the caller's). The owner is kicked. */
/* m into the ring from -> to, the owner kicked; 0, or -1 when the ring is full. */
static int d_msg_put(struct d_daemon *d, unsigned from, unsigned to, const struct d_msg *m)
{
	struct spsc *r = d_mq(d, from, to);
	struct d_msg *slot = (struct d_msg *)spsc_prod_slot(r);
	if (!slot)
		return -1;
	*slot = *m;
	spsc_prod_commit(r); /* release: the message before the kick's wake-up */
	d->wk[from].msgs_out++;
	d_kick(&d->wk[to]);
	return 0;
}

int d_msg_send(struct d_daemon *d, unsigned from, const struct d_sock *s, uint32_t kind,
               void *p)
{
	return d_msg_send_id(d, from, s->wk, s->app->id, s->id, kind, p);
}

/* d_msg_send to a socket named by ids only (a port cache entry, d_pcache.c: the
 * sender never reads the socket). */
int d_msg_send_id(struct d_daemon *d, unsigned from, unsigned to, uint32_t app_id,
                  uint32_t sock_id, uint32_t kind, void *p)
{
	struct d_msg m;
	memset(&m, 0, sizeof m);
	m.kind = kind;
	m.app_id = app_id;
	m.sock_id = sock_id;
	m.p = p;
	return d_msg_put(d, from, to, &m);
}

/* Anything of from's outbox waiting for worker `to`? (Then a new message to `to`
 * goes behind it: the messages between two workers stay in order.) */
static int d_obox_has(const struct d_wk *w, unsigned to)
{
	const struct d_obox *o;
	for (o = w->ob_h; o; o = o->next)
		if (o->to == to)
			return 1;
	return 0;
}

/* From worker `from` to worker `to`: kind for socket sock_id of application
 * app_id (payload p, owned by the message on success), never lost for a full
 * ring (the outbox). 0, or -1 when out of memory. */
int d_msg_post(struct d_daemon *d, unsigned from, unsigned to, uint32_t kind, uint32_t app_id,
               uint32_t sock_id, uint64_t arg, int32_t res, void *p)
{
	struct d_wk *w = &d->wk[from];
	struct d_obox *o;
	struct d_msg m;
	memset(&m, 0, sizeof m);
	m.kind = kind;
	m.app_id = app_id;
	m.sock_id = sock_id;
	m.arg = arg;
	m.res = res;
	m.p = p;
	if (!d_obox_has(w, to) && d_msg_put(d, from, to, &m) == 0)
		return 0;
	o = (struct d_obox *)malloc(sizeof *o);
	if (!o)
		return -1;
	o->next = NULL;
	o->to = to;
	o->m = m;
	if (w->ob_t)
		w->ob_t->next = o;
	else
		w->ob_h = o;
	w->ob_t = o;
	w->msg_full++; /* delayed, not lost */
	return 0;
}

/* Start of worker wk's pass: its outbox into the rings that have room, in order
 * per destination (a destination whose ring is full keeps the rest of its
 * messages for the next pass). O(outbox). */
void d_msg_flush(struct d_daemon *d, unsigned wk)
{
	struct d_wk *w = &d->wk[wk];
	struct d_obox **pp = &w->ob_h, *prev = NULL;
	uint64_t full = 0; /* destinations found full this flush (IPK_WORKERS_MAX 64) */
	while (*pp) {
		struct d_obox *o = *pp;
		if (!(full >> o->to & 1) && d_msg_put(d, wk, o->to, &o->m) == 0) {
			*pp = o->next;
			free(o);
			continue;
		}
		full |= 1ull << o->to;
		prev = o;
		pp = &o->next;
	}
	w->ob_t = prev;
}

/* At shutdown, after the worker threads stopped (one thread, d->mt 0): deliver
 * what is still in the rings and outboxes, so every message a worker sent is
 * received before the counters are reported (msgs_in == msgs_out) and none is
 * freed unseen. A message may cause another (a CLOSE its CLOSED), hence rounds;
 * bounded (a chain longer than that is left to d_msg_fini). Returns how many
 * messages are still undelivered. */
unsigned d_msg_quiesce(struct d_daemon *d)
{
	unsigned round, i, left = 0;
	for (round = 0; d->mq && round < 8; round++) {
		for (i = 0; i < d->nw; i++) {
			d_msg_flush(d, i);
			d_msg_drain(d, i);
		}
		for (i = 0, left = 0; i < d->nw; i++) {
			unsigned j;
			const struct d_obox *o;
			for (o = d->wk[i].ob_h; o; o = o->next)
				left++;
			for (j = 0; j < d->nw; j++)
				if (j != i)
					left += spsc_cons_avail(d_mq(d, j, i));
		}
		if (!left)
			break;
	}
	return left;
}

/* Messages waiting for worker wk (a hint: d_may_sleep stays awake for them). */
int d_msg_pending(struct d_daemon *d, unsigned wk)
{
	unsigned j;
	for (j = 0; d->mq && j < d->nw; j++)
		if (j != wk && !spsc_empty(d_mq(d, j, wk)))
			return 1;
	return d->wk[wk].npd != 0; /* INSTALLs held back by the test knob (d_pinst.c) */
}

struct d_app *d_app_of(struct d_daemon *d, uint32_t id)
{
	struct d_app *a;
	for (a = d->apps; a; a = a->next)
		if (a->id == id)
			return a->ready && !a->dying ? a : NULL;
	return NULL;
}

/* A datagram for one of wk's sockets: its queue limits, then delivered. */
static int d_msg_udp(struct d_daemon *d, unsigned wk, struct d_msg *m)
{
	struct d_app *a = d_app_of(d, m->app_id);
	unsigned o;
	struct d_sock *s = a ? d_sock_find_wk(a, m->sock_id, wk, &o) : NULL;
	struct d_dgram *g = (struct d_dgram *)m->p;
	if (!s || s->type != IPK_SVC_UDP || !s->ring)
		return -1;
	if (d_dgram_room(s, g->len) < 0)
		return -1;
	m->p = NULL;
	d_dgram_push(d, s, g);
	return 0;
}

/* A socket handed over with its CONNECT (d_sock_handover): now wk's, connected
 * on wk's node, then served here like any other (the entries behind the CONNECT
 * wait in its SQ). */
static int d_msg_connect(struct d_daemon *d, unsigned wk, struct d_msg *m)
{
	struct d_app *a = d_app_of(d, m->app_id);
	unsigned o;
	struct d_sock *s = a ? d_sock_find_wk(a, m->sock_id, wk, &o) : NULL;
	if (!s || s->move != 2)
		return -1;
	s->move = 0;
	__atomic_add_fetch(&d->wk[wk].socks, 1, __ATOMIC_RELAXED);
	d_connect_start(d, s, &s->conn_op);
	d_act_push(s);
	return 0;
}

/* A CLOSE from the control ring (worker 0) of a socket of this worker: the
 * socket destroyed here, on its own worker (its connection is in this worker's
 * context), then the result back to worker 0 for the control ring. A socket
 * handed over meanwhile (its CONNECT moved it) is passed on to its new worker;
 * one gone meanwhile (a second CLOSE of the same id) answers -EBADF. */
static int d_msg_close(struct d_daemon *d, unsigned wk, struct d_msg *m)
{
	struct d_app *a = d_app_of(d, m->app_id);
	unsigned o = 0xff;
	struct d_sock *s = a ? d_sock_find_wk(a, m->sock_id, wk, &o) : NULL;
	int32_t res = 0;
	if (!a)
		return -1;
	if (!s && o < d->nw && o != wk && d_sock_find(a, m->sock_id))
		return d_msg_post(d, wk, o, D_MSG_CLOSE, m->app_id, m->sock_id, m->arg, m->res,
		                  NULL);
	if (s)
		d_sock_destroy(d, s, d_close_graceful(s, m->res)); /* res: the CLOSE's flags */
	else
		res = -EBADF;
	return d_msg_post(d, wk, 0, D_MSG_CLOSED, m->app_id, 0, m->arg, res, NULL);
}

/* The owner's answer to a CLOSE (d_msg_close): completed on the control ring. */
static int d_msg_closed(struct d_daemon *d, unsigned wk, struct d_msg *m)
{
	struct d_app *a = d_app_of(d, m->app_id);
	if (!a || wk != 0)
		return -1;
	if (m->res == -EBADF)
		D_STAT(a, bad_sqe, 1);
	d_post_res(&a->ctl, m->arg, m->res);
	return 0;
}

/* ------------------------------------------------------------ accept across
 *
 * A SYN reaches the worker its flow hashes to (Y); the port's listener may be
 * another worker's (X). The connection is Y's for life (its context), the
 * listener's queue, rings and CQ are X's. So Y makes the accepted socket (w),
 * reads what the accept completion reports (the peer's address) and sends w to
 * X (D_MSG_ACCEPT, a pointer: w has no id yet). X queues it; its multishot
 * accept gives w rings and an id and posts the completion, then answers Y
 * (D_MSG_ACC_DONE, 0); a listener gone meanwhile, or rings refused, answers with
 * the error and Y resets the connection. Until the answer Y leaves w's queues
 * alone (w->xfer: d_tx_pump and d_rx_deliver wait; payload is held, as for any
 * socket not handed over yet), so X is the only writer of what it sets up.
 * Nothing is dropped: both sends go through d_msg_post (the outbox).
 *
 * Death: w is on Y's xfer list until the answer. d_app_reclaim (which may touch
 * every worker's sockets) destroys the app's w's wherever they are: one in a
 * listener's queue or the socket table as any socket, one only in a message via
 * the list (d_xfer_reclaim); one a message still points to is marked dead
 * instead of freed, and the message's receiver frees it. */

static void d_xfer_link(struct d_daemon *d, struct d_sock *w)
{
	struct d_wk *y = &d->wk[w->wk];
	w->xfer = 1;
	w->xfer_prev = NULL;
	w->xfer_next = y->xfer_h;
	if (y->xfer_h)
		y->xfer_h->xfer_prev = w;
	y->xfer_h = w;
}

void d_xfer_unlink(struct d_daemon *d, struct d_sock *w)
{
	struct d_wk *y = &d->wk[w->wk];
	if (!w->xfer)
		return;
	if (w->xfer_prev)
		w->xfer_prev->xfer_next = w->xfer_next;
	else
		y->xfer_h = w->xfer_next;
	if (w->xfer_next)
		w->xfer_next->xfer_prev = w->xfer_prev;
	w->xfer_prev = w->xfer_next = NULL;
	w->xfer = 0;
}

/* On w's worker (the connection's), from its tcp_accepted: w to listener l's
 * worker. 0, or -1 (out of memory: the caller resets the connection). */
int d_acc_cross(struct d_daemon *d, struct d_sock *l, struct d_sock *w)
{
	return d_acc_cross_id(d, l->wk, l->app->id, l->id, w);
}

/* d_acc_cross to a listener named by ids (a port cache entry, d_pcache.c). */
int d_acc_cross_id(struct d_daemon *d, unsigned lwk, uint32_t app_id, uint32_t sock_id,
                   struct d_sock *w)
{
	d_xfer_link(d, w);
	w->in_msg = 1;
	if (d_msg_post(d, w->wk, lwk, D_MSG_ACCEPT, app_id, sock_id, 0, 0, w) < 0) {
		w->in_msg = 0;
		d_xfer_unlink(d, w);
		return -1;
	}
	d->wk[w->wk].acc_out++;
	return 0;
}

/* On the listener's worker `from`: w's answer to its worker (0: attached and
 * reported; < 0: reset it). After this, `from` never touches w again. */
void d_acc_answer(struct d_daemon *d, unsigned from, struct d_sock *w, int32_t rc)
{
	w->in_msg = 1;
	if (d_msg_post(d, from, w->wk, D_MSG_ACC_DONE, 0, 0, 0, rc, w) < 0)
		d->wk[from].msg_full++; /* out of memory: w stays until its peer gives up */
}

/* X: a connection accepted on another worker for one of X's listeners. */
static int d_msg_accept(struct d_daemon *d, unsigned wk, struct d_msg *m)
{
	struct d_sock *w = (struct d_sock *)m->p, *l;
	struct d_app *a;
	unsigned o;
	m->p = NULL;
	w->in_msg = 0;
	if (w->xfer_dead) { /* its application was reclaimed meanwhile */
		free(w);
		return 0;
	}
	a = d_app_of(d, m->app_id);
	l = a ? d_sock_find_wk(a, m->sock_id, wk, &o) : NULL;
	/* the listener closed meanwhile, or its backlog filled since the SYN's
	 * worker admitted it from its port cache (d_pcache.c: it does not read
	 * another worker's backlog) */
	if (!l || l->state != D_LISTEN || !d_acc_room(l)) {
		d_acc_answer(d, wk, w, -ECONNRESET);
		return 0;
	}
	d->wk[wk].acc_in++;
	d_acc_push(l, w);
	d_accept_deliver(d, l);
	return 0;
}

/* Y: the listener's worker answered for w. */
static int d_msg_acc_done(struct d_daemon *d, unsigned wk, struct d_msg *m)
{
	struct d_sock *w = (struct d_sock *)m->p;
	m->p = NULL;
	w->in_msg = 0;
	d->wk[wk].acc_done++;
	if (w->xfer_dead) {
		free(w);
		return 0;
	}
	d_xfer_unlink(d, w);
	if (m->res < 0) {
		d_sock_destroy(d, w, 0);
		return 0;
	}
	/* what waited for the answer: payload, and entries the app submitted as
	 * soon as it saw the accept completion */
	d_rx_deliver(d, w);
	d_tx_pump(d, w);
	d_act_push(w);
	return 0;
}

/* d_app_reclaim: a's accepted sockets still in flight between workers (only in
 * a message now: the ones in a listener's queue or the table went with them). */
void d_xfer_reclaim(struct d_daemon *d, struct d_app *a)
{
	unsigned i;
	for (i = 0; i < d->nw; i++) {
		struct d_sock *w = d->wk[i].xfer_h, *next;
		for (; w; w = next) {
			next = w->xfer_next;
			if (w->app == a)
				d_sock_destroy(d, w, 0);
		}
	}
}

/* Start of worker wk's pass: every message other workers sent it. O(messages). */
void d_msg_drain(struct d_daemon *d, unsigned wk)
{
	struct d_wk *w = &d->wk[wk];
	unsigned j;
	d_pinst_tick(d, wk);
	for (j = 0; j < d->nw; j++) {
		struct spsc *r;
		uint32_t k, n;
		if (j == wk)
			continue;
		r = d_mq(d, j, wk);
		n = spsc_cons_avail(r);
		for (k = 0; k < n; k++) {
			struct d_msg *m = (struct d_msg *)spsc_cons_slot(r, k);
			int rc = m->kind == D_MSG_UDP       ? d_msg_udp(d, wk, m)
			         : m->kind == D_MSG_CONNECT ? d_msg_connect(d, wk, m)
			         : m->kind == D_MSG_CLOSE   ? d_msg_close(d, wk, m)
			         : m->kind == D_MSG_CLOSED  ? d_msg_closed(d, wk, m)
			         : m->kind == D_MSG_ACCEPT  ? d_msg_accept(d, wk, m)
			         : m->kind == D_MSG_ACC_DONE ? d_msg_acc_done(d, wk, m)
			         : m->kind == D_MSG_INSTALL || m->kind == D_MSG_REMOVE
			                 ? d_pinst_msg(d, wk, j, m->kind, m->app_id, m->sock_id, m->arg, m->res)
			         : m->kind == D_MSG_INSTALLED
			                 ? d_pinst_answer(d, wk, m->app_id, m->sock_id, m->arg, m->res)
			                                    : -1;
			w->msgs_in++;
			if (rc < 0) {
				w->msg_gone++; /* its socket is gone, or its queue full */
				d_msg_free(m);
			}
		}
		/* release: our reads of the slots are done before the sender reuses them */
		spsc_cons_release(r, n);
	}
}
