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
 * datagrams), and a socket handed over with its CONNECT from a bound port (the
 * worker its flow hashes to connects it, d_sock_handover).
 */
#include "daemon.h"

#include "../runtime/spsc.h"

#include <stdlib.h>

#define D_MSG_SLOTS 256u /* per (from, to): a full ring drops (counted), and
                          * bounds the datagrams in flight between two workers */

struct d_msg {
	uint32_t kind;               /* D_MSG_* */
	uint32_t app_id, sock_id;    /* the receiver's socket, looked up again */
	void *p;                     /* the payload, owned by the message */
};

static struct spsc *d_mq(struct d_daemon *d, unsigned from, unsigned to)
{
	return &d->mq[from * d->nw + to];
}

/* nw > 1: nw * nw rings (the diagonal is never used; one index rule is simpler).
 * 0 or -1 (no memory). */
int d_msg_init(struct d_daemon *d)
{
	unsigned i;
	d->mq = (struct spsc *)calloc((size_t)d->nw * d->nw, sizeof *d->mq);
	if (!d->mq)
		return -1;
	for (i = 0; i < d->nw * d->nw; i++)
		if (spsc_init(&d->mq[i], D_MSG_SLOTS, sizeof(struct d_msg)) < 0)
			return -1;
	return 0;
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
}

/* From worker `from` (the calling thread) to s's worker: kind with payload p,
 * whose ownership passes to the message. 0, or -1 when the ring is full (p is
 * then still the caller's). The owner is kicked. */
int d_msg_send(struct d_daemon *d, unsigned from, const struct d_sock *s, uint32_t kind,
               void *p)
{
	unsigned to = s->wk;
	struct spsc *r = d_mq(d, from, to);
	struct d_msg *m = (struct d_msg *)spsc_prod_slot(r);
	if (!m)
		return -1;
	m->kind = kind;
	m->app_id = s->app->id;
	m->sock_id = s->id;
	m->p = p;
	spsc_prod_commit(r); /* release: the message before the kick's wake-up */
	d->wk[from].msgs_out++;
	d_kick(&d->wk[to]);
	return 0;
}

/* Messages waiting for worker wk (a hint: d_may_sleep stays awake for them). */
int d_msg_pending(struct d_daemon *d, unsigned wk)
{
	unsigned j;
	for (j = 0; d->mq && j < d->nw; j++)
		if (j != wk && !spsc_empty(d_mq(d, j, wk)))
			return 1;
	return 0;
}

static struct d_app *d_app_of(struct d_daemon *d, uint32_t id)
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
	struct d_sock *s = a ? d_sock_find(a, m->sock_id) : NULL;
	struct d_dgram *g = (struct d_dgram *)m->p;
	if (!s || s->type != IPK_SVC_UDP || !s->ring || s->wk != wk)
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
	struct d_sock *s = a ? d_sock_find(a, m->sock_id) : NULL;
	if (!s || s->wk != wk || s->move != 2)
		return -1;
	s->move = 0;
	d->wk[wk].socks++;
	d_connect_start(d, s, &s->conn_op);
	d_act_push(s);
	return 0;
}

/* Start of worker wk's pass: every message other workers sent it. O(messages). */
void d_msg_drain(struct d_daemon *d, unsigned wk)
{
	struct d_wk *w = &d->wk[wk];
	unsigned j;
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
