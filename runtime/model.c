/*
 * The application interface (struct ipk_app_ops) under the three thread models.
 *
 * The networking side turns the core's callbacks into messages (accepted, connected,
 * data, sent, closed) and runs the application's commands (listen, connect, send,
 * release, close). The application side turns messages into ipk_app_ops calls. The
 * models differ only in how a message crosses:
 *   UNIFIED  a direct call on the same thread (from inside the core's callback);
 *   MERGE    an SPSC ring each way; the idle side sleeps on its eventfd and the other
 *            side writes it only when the sleeper is armed (struct waker);
 *   SPLIT    the same rings, busy-polled.
 * So the application code is the same under all three.
 *
 * Connections are named by cid = generation << 32 | record index. The networking side
 * owns the records (connection handle, queue of pending sends); the application side
 * keeps its own table (user pointer, generation, sends outstanding). A command for a
 * cid whose record has been reused is recognised by the generation and ignored (a
 * release still frees its packet).
 *
 * UDP has no connection: a datagram event carries its tuple and a reference to the
 * received buffer (given back with ipk_app_release, cid 0, which names no record);
 * a reassembled datagram that spans several buffers comes as a chain of references,
 * one per buffer (the core hands it over as a chain too, core.h udp_recv);
 * a send carries the app's buffer and a user token, and the networking side copies it
 * into a datagram at once (ipk_udp_sendto) and answers with udp_sent.
 *
 * Sends are zero-copy from the application's memory up to the stack: the networking
 * side copies into the send buffer (ipk_tcp_write) as room opens and reports each
 * finished send with a sent event; IPK_APP_SENDQ bounds the sends per connection,
 * counted on the application side so the networking side's queue never overflows.
 */
#include "workers_int.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

enum {
	/* events, networking -> application */
	M_ACCEPTED = 1, M_CONNECTED, M_DATA, M_SENT, M_CLOSED, M_UDP, M_UDP_SENT, M_BOUND,
	M_UDP6, M_ACCEPTED6,
	/* commands, application -> networking */
	C_LISTEN = 16, C_CONNECT, C_SEND, C_RELEASE, C_CLOSE, C_UDP_BIND, C_UDP_SEND,
	C_UDP_SEND6, C_CONNECT6
};

#define APP_BATCH 256
#define NET_BATCH 1024
#define APP_SLEEP_MS 100

struct wk_sendq {
	const uint8_t *buf;
	uint32_t len, done;
};

struct wk_rec {
	struct ipk_conn *c;      /* NULL: free */
	struct wk_rec *next_free;
	uint32_t idx, gen;
	void *cuser;             /* ipk_app_connect's user pointer */
	struct wk_sendq q[IPK_APP_SENDQ];
	uint32_t qh, qn;
	int close_req;           /* 1 asked, 2 FIN queued */
};

struct wk_appconn {
	void *user;
	uint32_t gen;
	uint32_t outstanding;    /* sends not yet reported by sent */
	int alive;
};

struct wk_appside {
	struct wk_appconn *c;
};

struct ipk_app {
	struct wk *w;
};

static uint64_t rec_cid(const struct wk_rec *r)
{
	return (uint64_t)r->gen << 32 | r->idx;
}

/* ---------------------------------------------------------- outboxes */

static void outbox_put(struct outbox *o, const struct wk_msg *m, struct wk *w)
{
	struct wk_ovf *v;

	if (!o->head) {
		struct wk_msg *s = (struct wk_msg *)spsc_prod_slot(o->r);
		if (s) {
			*s = *m;
			o->filled++;
			return;
		}
	}
	v = (struct wk_ovf *)malloc(sizeof(*v));
	if (!v) {
		/* cannot queue: a packet reference would leak; count it (never expected) */
		WK_INC_MT(w->st.steer_drops);
		return;
	}
	v->m = *m;
	v->next = NULL;
	if (o->tail)
		o->tail->next = v;
	else
		o->head = v;
	o->tail = v;
}

/* Move the overflow into the ring and publish; 1 when something was published. */
static int outbox_flush(struct outbox *o)
{
	while (o->head) {
		struct wk_msg *s = (struct wk_msg *)spsc_prod_slot(o->r);
		struct wk_ovf *v = o->head;

		if (!s)
			break;
		*s = v->m;
		o->filled++;
		o->head = v->next;
		if (!o->head)
			o->tail = NULL;
		free(v);
	}
	if (o->filled == 0)
		return 0;
	spsc_prod_commit(o->r);
	o->filled = 0;
	return 1;
}

static void outbox_free(struct outbox *o)
{
	while (o->head) {
		struct wk_ovf *v = o->head;
		o->head = v->next;
		free(v);
	}
	o->tail = NULL;
}

/* ------------------------------------------------- application side */

static struct wk_appconn *app_conn(struct wk *w, uint64_t cid)
{
	uint32_t idx = (uint32_t)cid;

	return idx < w->nrecs ? &w->as->c[idx] : NULL;
}

/* The app's entry for cid if it is that connection and still alive. */
static struct wk_appconn *app_live(struct wk *w, uint64_t cid)
{
	struct wk_appconn *ac = app_conn(w, cid);

	if (!ac || !ac->alive || ac->gen != (uint32_t)(cid >> 32))
		return NULL;
	return ac;
}

/* An IPv6 message's 4-tuple (addresses carried beside the IPv4-sized tuple). */
static void msg_tuple6(const struct wk_msg *m, struct ipk_atuple *t)
{
	memset(t, 0, sizeof(*t));
	t->local.family = t->peer.family = IPK_AF_INET6;
	memcpy(t->local.a, m->local6, 16);
	memcpy(t->peer.a, m->peer6, 16);
	t->local_port_be = m->t.local_port_be;
	t->peer_port_be = m->t.peer_port_be;
}

/* M_ACCEPTED6: the connection's tuple rebuilt from the message, to accepted6; an
 * app without that member gets accepted with the ports and zero addresses. */
static void *app_accepted6(struct wk *w, const struct ipk_app_ops *ops, const struct wk_msg *m)
{
	struct ipk_atuple t;

	if (!ops->accepted6)
		return ops->accepted ? ops->accepted(w->app, m->cid, &m->t) : NULL;
	msg_tuple6(m, &t);
	return ops->accepted6(w->app, m->cid, &t);
}

static void app_open(struct wk *w, const struct wk_msg *m, struct wk_appconn *ac)
{
	const struct ipk_app_ops *ops = w->ws->cfg.app;

	ac->gen = (uint32_t)(m->cid >> 32);
	ac->alive = 1;
	ac->outstanding = 0;
	ac->user = m->type == M_CONNECTED ? m->p : NULL;
	if (m->type == M_ACCEPTED && ops->accepted)
		ac->user = ops->accepted(w->app, m->cid, &m->t);
	else if (m->type == M_ACCEPTED6)
		ac->user = app_accepted6(w, ops, m);
	else if (m->type == M_CONNECTED && ops->connected)
		ops->connected(w->app, m->cid, ac->user);
}

/* M_UDP6: the datagram's tuple rebuilt from the message; without a udp6 member the
 * ref goes back at once. */
static void app_udp6(struct wk *w, const struct ipk_app_ops *ops, const struct wk_msg *m)
{
	struct ipk_atuple t;

	if (!ops->udp6) {
		ipk_app_release(w->app, 0, (struct ipk_pkt *)m->p, 0);
		return;
	}
	msg_tuple6(m, &t);
	ops->udp6(w->app, &t, (struct ipk_pkt *)m->p, m->data, m->len);
}

static void app_dispatch(struct wk *w, const struct wk_msg *m)
{
	const struct ipk_app_ops *ops = w->ws->cfg.app;
	struct wk_appconn *ac = app_live(w, m->cid);
	void *user = ac ? ac->user : NULL;

	WK_INC(w->st.events);
	switch (m->type) {
	case M_ACCEPTED:
	case M_ACCEPTED6:
	case M_CONNECTED:
		if ((ac = app_conn(w, m->cid)) != NULL)
			app_open(w, m, ac);
		break;
	case M_DATA:
		if (ops->data)
			ops->data(w->app, m->cid, user, (struct ipk_pkt *)m->p, m->data, m->len);
		else if (m->p)
			ipk_app_release(w->app, m->cid, (struct ipk_pkt *)m->p, m->len);
		break;
	case M_SENT:
		if (ac && ac->outstanding > 0)
			ac->outstanding--;
		if (ops->sent)
			ops->sent(w->app, m->cid, user, m->p, m->len);
		break;
	case M_UDP:
		if (ops->udp)
			ops->udp(w->app, &m->t, (struct ipk_pkt *)m->p, m->data, m->len);
		else
			ipk_app_release(w->app, 0, (struct ipk_pkt *)m->p, 0);
		break;
	case M_UDP6:
		app_udp6(w, ops, m);
		break;
	case M_UDP_SENT:
		if (ops->udp_sent)
			ops->udp_sent(w->app, m->p, m->data, m->len, -(int)m->why);
		break;
	case M_BOUND:
		if (ops->bound)
			ops->bound(w->app, m->port_be, (int)m->len, -(int)m->why);
		break;
	case M_CLOSED:
		if (ac)
			ac->alive = 0;
		else
			user = m->p; /* an active open that never completed */
		if (ops->closed)
			ops->closed(w->app, m->cid, user, (enum ipk_close_reason)m->why);
		break;
	default:
		break;
	}
}

/* --------------------------------------------------- networking side */

static struct ipk_ctx *net_ctx(struct wk *w) { return ipk_node_ctx(w->node); }
static uint64_t net_now(struct wk *w) { return ipk_node_now(w->node); }

static void net_emit(struct wk *w, const struct wk_msg *m)
{
	if (w->ws->cfg.model == IPK_MODEL_UNIFIED)
		app_dispatch(w, m);
	else
		outbox_put(&w->evo, m, w);
}

static void net_emit_simple(struct wk *w, uint8_t type, uint64_t cid, void *p, uint32_t len,
                            uint8_t why)
{
	struct wk_msg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.cid = cid;
	m.p = p;
	m.len = len;
	m.why = why;
	net_emit(w, &m);
}

static struct wk_rec *rec_get(struct wk *w, struct ipk_conn *c)
{
	struct wk_rec *r = w->rec_free;

	if (!r)
		return NULL;
	w->rec_free = r->next_free;
	r->next_free = NULL;
	r->c = c;
	r->qh = r->qn = 0;
	r->close_req = 0;
	r->cuser = NULL;
	return r;
}

static void rec_put(struct wk *w, struct wk_rec *r)
{
	r->c = NULL;
	r->qh = r->qn = 0;
	r->close_req = 0;
	r->gen++;
	if (r->gen == 0)
		r->gen = 1;
	r->next_free = w->rec_free;
	w->rec_free = r;
}

static struct wk_rec *rec_find(struct wk *w, uint64_t cid)
{
	uint32_t idx = (uint32_t)cid;
	struct wk_rec *r;

	if (idx >= w->nrecs)
		return NULL;
	r = &w->recs[idx];
	return r->c && r->gen == (uint32_t)(cid >> 32) ? r : NULL;
}

/* Copy queued sends into the stack while it takes them; FIN after the last one when
 * the app asked to close. Each finished send is reported before the next is tried,
 * and the queue is updated first, so an app that sends again from its sent callback
 * (UNIFIED re-enters here) sees a consistent queue. */
static void net_pump(struct wk *w, struct wk_rec *r)
{
	uint64_t cid = rec_cid(r);

	while (r->c && r->qn > 0) {
		struct wk_sendq *q = &r->q[r->qh];
		int n = ipk_tcp_write(net_ctx(w), r->c, q->buf + q->done, q->len - q->done,
		                      net_now(w));
		struct wk_sendq done;

		if (n <= 0)
			return; /* send buffer full (acked resumes) or the connection is ending */
		q->done += (uint32_t)n;
		if (q->done < q->len)
			return;
		done = *q;
		r->qh = (r->qh + 1) % IPK_APP_SENDQ;
		r->qn--;
		net_emit_simple(w, M_SENT, cid, (void *)(uintptr_t)done.buf, done.len, 0);
		if (rec_find(w, cid) != r)
			return; /* closed meanwhile */
	}
	if (r->c && r->close_req == 1 && r->qn == 0) {
		r->close_req = 2;
		ipk_tcp_close(net_ctx(w), r->c, net_now(w)); /* may free r: last touch */
	}
}

/*
 * IPv6 active opens made before this worker's core has a source address for the
 * peer (our addresses are still in DAD, RFC 4862 §5.4: about a second after start)
 * are held here and retried each loop turn (model_net_retry) until an address is up,
 * for at most WK_HOLD6_NS of the node's clock; then the open fails as closed
 * (IPK_CLOSE_UNREACH), as it would have at once before. In arrival order; at most
 * one per connection record (more could not open anyway: closed ABORTED).
 */
#define WK_HOLD6_NS (10ull * 1000000000ull)

struct wk_held {
	struct wk_held *next;
	struct wk_msg m;
	uint64_t until;          /* the node's clock: give up after this */
};

/* 1 when the core refused an IPv6 open only because no source address for the
 * peer has passed DAD yet (ipk_tcp_connect_addr's IPK_EHOSTUNREACH, core.h). */
static int net_no_src6(struct wk *w, const struct wk_msg *m, int rc)
{
	uint8_t src[16];

	return m->type == C_CONNECT6 && rc == IPK_EHOSTUNREACH &&
	       !ipk_ip6_src_select(net_ctx(w), m->peer6, src);
}

/* Park m (its deadline from its first try); 0, or -1 when no more may wait. */
static int net_hold(struct wk *w, const struct wk_msg *m, uint64_t until)
{
	struct wk_held *h, **pp;

	if (w->nheld >= w->nrecs || !(h = (struct wk_held *)malloc(sizeof(*h))))
		return -1;
	h->m = *m;
	h->until = until;
	h->next = NULL;
	for (pp = &w->held; *pp; pp = &(*pp)->next)
		;
	*pp = h;
	w->nheld++;
	return 0;
}

static int net_open(struct wk *w, const struct wk_msg *m, struct wk_rec *r, struct ipk_conn **c)
{
	struct ipk_addr peer;

	if (m->type != C_CONNECT6)
		return ipk_tcp_connect(net_ctx(w), m->t.peer_ip4_be, m->port_be, 0, r, c,
		                       net_now(w));
	memset(&peer, 0, sizeof(peer));
	peer.family = IPK_AF_INET6;
	memcpy(peer.a, m->peer6, 16);
	/* the core picks a local port whose IPv6 tuple hashes to this worker
	 * (ipk_rss_port_ok6), as ipk_tcp_connect does for IPv4 */
	return ipk_tcp_connect_addr(net_ctx(w), &peer, m->port_be, 0, r, c, net_now(w));
}

/* Open m's connection; until: the hold deadline of a retried open, 0 for a new one
 * (which may be held). Returns 1 when the open waits (held, or still held). */
static int net_connect_try(struct wk *w, const struct wk_msg *m, uint64_t until)
{
	struct wk_rec *r = rec_get(w, NULL);
	struct ipk_conn *c = NULL;
	uint32_t gen;
	int rc;

	if (!r) {
		net_emit_simple(w, M_CLOSED, 0, m->p, 0, IPK_CLOSE_ABORTED);
		return 0;
	}
	r->cuser = m->p;
	gen = r->gen;
	rc = net_open(w, m, r, &c);
	if (rc < 0) {
		uint64_t cid = rec_cid(r);
		rec_put(w, r);
		if (net_no_src6(w, m, rc)) {
			if (until == 0 && net_hold(w, m, net_now(w) + WK_HOLD6_NS) == 0)
				return 1;
			if (until != 0 && net_now(w) < until)
				return 1;
		}
		/* no route (off-link, no gateway) is the peer's unreachability, not ours */
		net_emit_simple(w, M_CLOSED, cid, m->p, 0,
		                rc == IPK_EHOSTUNREACH ? IPK_CLOSE_UNREACH : IPK_CLOSE_ABORTED);
		return 0;
	}
	/* a connection closed from inside ipk_tcp_connect has put the record back */
	if (r->gen == gen)
		r->c = c;
	return 0;
}

static void net_connect(struct wk *w, const struct wk_msg *m)
{
	(void)net_connect_try(w, m, 0);
}

/* Each loop turn with opens held: retry them in order once an address is up (or
 * their time is over). */
void model_net_retry(struct wk *w)
{
	struct wk_held **pp = &w->held, *h;
	uint8_t src[16];

	while ((h = *pp) != NULL) {
		if (!ipk_ip6_src_select(net_ctx(w), h->m.peer6, src) && net_now(w) < h->until) {
			pp = &h->next;
			continue;
		}
		*pp = h->next; /* unlinked first: the retry may hold it again only if new */
		w->nheld--;
		if (net_connect_try(w, &h->m, h->until)) {
			h->next = *pp;
			*pp = h;
			w->nheld++;
			pp = &h->next;
			continue;
		}
		free(h);
	}
	model_net_publish(w);
}

/* Stop: held opens never started; nothing reaches the app after stop. */
static void net_held_free(struct wk *w)
{
	struct wk_held *h;

	while ((h = w->held) != NULL) {
		w->held = h->next;
		free(h);
	}
	w->nheld = 0;
}

static void net_send(struct wk *w, const struct wk_msg *m)
{
	struct wk_rec *r = rec_find(w, m->cid);

	/* dead: the closed event (sent or on its way) gives the buffer back */
	if (!r || r->qn >= IPK_APP_SENDQ || r->close_req)
		return;
	r->q[(r->qh + r->qn) % IPK_APP_SENDQ] = (struct wk_sendq){m->data, m->len, 0};
	r->qn++;
	net_pump(w, r);
}

/* Copy the app's datagram into the stack now and report at once: the buffer is the
 * app's again as soon as udp_sent arrives. */
static void net_udp_send(struct wk *w, const struct wk_msg *m)
{
	struct wk_msg r = *m;
	struct ipk_addr peer;
	int rc;

	if (m->type == C_UDP_SEND6) {
		memset(&peer, 0, sizeof(peer));
		peer.family = IPK_AF_INET6;
		memcpy(peer.a, m->peer6, 16);
		rc = ipk_udp_sendto_addr(net_ctx(w), m->t.local_port_be, &peer, m->t.peer_port_be,
		                         m->data, m->len, net_now(w));
	} else {
		rc = ipk_udp_sendto(net_ctx(w), m->t.local_port_be, m->t.peer_ip4_be,
		                    m->t.peer_port_be, m->data, m->len, net_now(w));
	}

	if (rc >= 0)
		WK_INC(w->st.udp_tx);
	r.type = M_UDP_SENT;
	/* IPK_E* are negative errno values, all below 256 (Linux's largest is 133) */
	r.why = (uint8_t)(rc < 0 ? -rc : 0);
	net_emit(w, &r);
}

/* listen / udp_bind: the core's answer. Under UNIFIED a refusal is the command's
 * own return value (we run on the caller's thread); otherwise, and for a success, it
 * comes as the bound event, exactly once per command that returned 0 (runtime.h). An
 * app without a bound member also sees a refusal on stderr, as before. */
static int net_bind(struct wk *w, const struct wk_msg *m)
{
	int udp = m->type == C_UDP_BIND;
	int rc = udp ? ipk_udp_bind(net_ctx(w), m->port_be)
	             : ipk_tcp_listen(net_ctx(w), m->port_be, 128);
	struct wk_msg e;

	if (rc > 0)
		rc = 0;
	if (rc < 0 && !w->ws->cfg.app->bound)
		fprintf(stderr, "ipkit worker %u: cannot %s port %u: %s\n", w->idx,
		        udp ? "bind UDP" : "listen on", ipk_ntohs(m->port_be), ipk_strerror(rc));
	if (rc < 0 && w->ws->cfg.model == IPK_MODEL_UNIFIED)
		return rc;
	memset(&e, 0, sizeof(e));
	e.type = M_BOUND;
	e.port_be = m->port_be;
	e.len = (uint32_t)udp;
	e.why = (uint8_t)-rc; /* IPK_E* are negative errno values below 256 */
	net_emit(w, &e);
	return 0;
}

/* Run one command; returns what the command returns under UNIFIED (only listen and
 * udp_bind can refuse here; every other outcome is an event). */
static int net_exec(struct wk *w, const struct wk_msg *m)
{
	struct wk_rec *r;

	switch (m->type) {
	case C_LISTEN:
	case C_UDP_BIND:
		return net_bind(w, m);
	case C_CONNECT:
	case C_CONNECT6:
		net_connect(w, m);
		break;
	case C_SEND:
		net_send(w, m);
		break;
	case C_RELEASE:
		ipk_pkt_free_chain((struct ipk_pkt *)m->p); /* a UDP ref may be a chain */
		r = rec_find(w, m->cid);
		if (r && m->len)
			ipk_tcp_recved(net_ctx(w), r->c, m->len, net_now(w));
		break;
	case C_UDP_SEND:
	case C_UDP_SEND6:
		net_udp_send(w, m);
		break;
	case C_CLOSE:
		r = rec_find(w, m->cid);
		if (r && !r->close_req) {
			r->close_req = 1;
			net_pump(w, r);
		}
		break;
	default:
		break;
	}
	return IPK_OK;
}

/* ------------------------------------------------ the core's callbacks */

static struct wk *cb_wk(void *opaque)
{
	return (struct wk *)ipk_node_app(opaque);
}

static void *cb_accepted(struct ipk_ctx *ctx, struct ipk_conn *c, void *opaque)
{
	struct wk *w = cb_wk(opaque);
	struct wk_rec *r = rec_get(w, c);
	struct wk_msg m;

	if (!r) {
		ipk_tcp_abort(ctx, c, net_now(w));
		return NULL;
	}
	WK_INC(w->st.accepted);
	memset(&m, 0, sizeof(m));
	m.type = M_ACCEPTED;
	m.cid = rec_cid(r);
	if (ipk_tcp_tuple(c, &m.t) == IPK_EINVAL) { /* an IPv6 connection: ports only */
		struct ipk_atuple at;

		if (ipk_tcp_atuple(ctx, c, &at) == IPK_OK && at.peer.family == IPK_AF_INET6) {
			m.type = M_ACCEPTED6;
			memcpy(m.local6, at.local.a, 16);
			memcpy(m.peer6, at.peer.a, 16);
		}
	}
	net_emit(w, &m);
	return r;
}

static void cb_connected(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *opaque)
{
	struct wk *w = cb_wk(opaque);
	struct wk_rec *r = (struct wk_rec *)user;

	(void)ctx;
	(void)c;
	if (!r)
		return;
	WK_INC(w->st.connected);
	net_emit_simple(w, M_CONNECTED, rec_cid(r), r->cuser, 0, 0);
}

/* Payloads up to WK_SMALL bytes go to the application as a clone of a buffer shared by
 * consecutive small payloads, the bytes copied into it, not as a clone of the packet
 * they came in: a peer sending one-byte segments to an application that holds them
 * (an echo behind a full send buffer, whose peer does not read) would otherwise pin a
 * whole receive buffer per byte, and with the pool's buffers gone the node could no
 * longer receive the ACKs and RSTs that free them (issue 14, the in-order side of
 * item 1; ipkit-echo's single-node path copies for the same reason). NULL when no
 * buffer or descriptor is free: the caller clones in place instead. */
#define WK_SMALL 256u

static struct ipk_pkt *small_ref(struct wk *w, struct ipk_pkt *k, uint32_t off, uint32_t len)
{
	struct ipk_pool *p = ipk_node_pool(w->node);
	struct ipk_pkt *ref;

	if (w->small && w->small_fill + len > ipk_pool_buf_size(p)) {
		ipk_pkt_free(w->small); /* our hold only: the refs keep the buffer */
		w->small = NULL;
	}
	if (!w->small) {
		w->small = ipk_pkt_alloc(p);
		if (!w->small)
			return NULL;
		w->small_fill = 0;
	}
	ref = ipk_pkt_clone(w->small);
	if (!ref)
		return NULL;
	memcpy(w->small->buf + w->small_fill, ipk_pkt_mtod(k) + off, len);
	ref->off = w->small_fill;
	ref->len = len;
	ref->next = NULL;
	w->small_fill += len;
	return ref;
}

static void cb_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                       uint32_t off, uint32_t len, void *opaque)
{
	struct wk *w = cb_wk(opaque);
	struct wk_rec *r = (struct wk_rec *)user;
	struct ipk_pkt *ref;
	struct wk_msg m;

	if (!r)
		return;
	memset(&m, 0, sizeof(m));
	m.type = M_DATA;
	m.cid = rec_cid(r);
	if (pkt) {
		ref = len <= WK_SMALL ? small_ref(w, (struct ipk_pkt *)pkt, off, len) : NULL;
		if (ref) {
			m.p = ref;
			m.data = ipk_pkt_mtod(ref);
			m.len = len;
			net_emit(w, &m);
			return;
		}
		ref = ipk_pkt_clone((struct ipk_pkt *)pkt);
		if (!ref) {
			/* out of descriptors: a reset beats a silently broken stream */
			ipk_tcp_abort(ctx, c, net_now(w));
			return;
		}
		ref->off += off;
		ref->len = len;
		ref->next = NULL;
		m.p = ref;
		m.data = ipk_pkt_mtod(ref);
		m.len = len;
	}
	net_emit(w, &m);
}

static void cb_acked(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, uint32_t bytes,
                     void *opaque)
{
	(void)ctx;
	(void)c;
	(void)bytes;
	if (user)
		net_pump(cb_wk(opaque), (struct wk_rec *)user);
}

static void cb_closed(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
                      enum ipk_close_reason why, void *opaque)
{
	struct wk *w = cb_wk(opaque);
	struct wk_rec *r = (struct wk_rec *)user;
	uint64_t cid;
	void *cuser;

	(void)ctx;
	(void)c;
	if (!r)
		return;
	WK_INC(w->st.closed);
	cid = rec_cid(r);
	cuser = r->cuser;
	rec_put(w, r);
	net_emit_simple(w, M_CLOSED, cid, cuser, 0, (uint8_t)why);
}

/* References to `len` bytes from `off` of the chain k: one clone per buffer the bytes
 * touch, trimmed, linked by ->next. NULL when out of descriptors or when the chain is
 * shorter than off + len (nothing is held then). A failed clone leaves len > 0. */
static struct ipk_pkt *udp_ref_chain(struct ipk_pkt *k, uint32_t off, uint32_t len)
{
	struct ipk_pkt *head = NULL, **tail = &head;

	if (len == 0) { /* an empty datagram: one empty reference */
		if ((head = ipk_pkt_clone(k)) != NULL) {
			head->len = 0;
			head->next = NULL;
		}
		return head;
	}
	for (; k && len > 0; k = k->next) {
		struct ipk_pkt *c;

		if (off >= k->len) {
			off -= k->len;
			continue;
		}
		c = ipk_pkt_clone(k);
		if (!c)
			break;
		c->off += off;
		c->len = k->len - off < len ? k->len - off : len;
		c->next = NULL;
		len -= c->len;
		off = 0;
		*tail = c;
		tail = &c->next;
	}
	if (len > 0) {
		ipk_pkt_free_chain(head);
		return NULL;
	}
	return head;
}

/* A datagram: references for the app, like TCP payload; a reassembled datagram that
 * goes on in the packet's chain is a chain of references (zero-copy, no limit but
 * the descriptors). */
static void udp_emit(struct wk *w, struct wk_msg *m, void *pkt, uint32_t off, uint32_t len)
{
	struct ipk_pkt *ref = udp_ref_chain((struct ipk_pkt *)pkt, off, len);

	if (!ref) {
		WK_INC(w->st.udp_drops);
		return;
	}
	m->p = ref;
	m->data = ipk_pkt_mtod(ref);
	m->len = len;
	WK_INC(w->st.udp_rx);
	net_emit(w, m);
}

static void cb_udp(struct ipk_ctx *ctx, const struct ipk_tuple *t, void *pkt, uint32_t off,
                   uint32_t len, void *opaque)
{
	struct wk_msg m;

	(void)ctx;
	memset(&m, 0, sizeof(m));
	m.type = M_UDP;
	m.t = *t;
	udp_emit(cb_wk(opaque), &m, pkt, off, len);
}

/* The same over IPv6: the ports in m.t, the addresses beside them. */
static void cb_udp6(struct ipk_ctx *ctx, const struct ipk_atuple *t, void *pkt, uint32_t off,
                    uint32_t len, void *opaque)
{
	struct wk_msg m;

	(void)ctx;
	memset(&m, 0, sizeof(m));
	m.type = M_UDP6;
	m.t.local_port_be = t->local_port_be;
	m.t.peer_port_be = t->peer_port_be;
	memcpy(m.local6, t->local.a, 16);
	memcpy(m.peer6, t->peer.a, 16);
	udp_emit(cb_wk(opaque), &m, pkt, off, len);
}

const struct ipk_ops model_events = {
	.udp_recv = cb_udp,
	.udp_recv6 = cb_udp6,
	.tcp_accepted = cb_accepted,
	.tcp_connected = cb_connected,
	.tcp_payload = cb_payload,
	.tcp_acked = cb_acked,
	.tcp_closed = cb_closed,
};

/* ------------------------------------------------ networking loop turn */

void model_net_publish(struct wk *w)
{
	if (w->ws->cfg.model == IPK_MODEL_UNIFIED)
		return;
	if (outbox_flush(&w->evo))
		waker_kick(&w->app_wake);
}

uint32_t model_net_turn(struct wk *w)
{
	uint32_t n, i;

	if (w->ws->cfg.model == IPK_MODEL_UNIFIED)
		return 0;
	n = spsc_cons_avail(&w->cmd);
	if (n > NET_BATCH)
		n = NET_BATCH;
	for (i = 0; i < n; i++)
		(void)net_exec(w, (const struct wk_msg *)spsc_cons_slot(&w->cmd, i));
	if (n)
		spsc_cons_release(&w->cmd, n);
	model_net_publish(w);
	return n;
}

/* ------------------------------------------------ application commands */

static int app_cmd(struct ipk_app *a, const struct wk_msg *m)
{
	struct wk *w = a->w;

	WK_INC(w->st.commands);
	if (w->ws->cfg.model == IPK_MODEL_UNIFIED)
		return net_exec(w, m);
	outbox_put(&w->cmdo, m, w);
	return IPK_OK;
}

static void app_msg(struct wk_msg *m, uint8_t type, uint64_t cid)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->cid = cid;
}

int ipk_app_listen(struct ipk_app *a, uint16_t port_be)
{
	struct wk_msg m;

	if (!a || port_be == 0)
		return IPK_EINVAL;
	app_msg(&m, C_LISTEN, 0);
	m.port_be = port_be;
	return app_cmd(a, &m);
}

int ipk_app_connect(struct ipk_app *a, uint32_t ip4_be, uint16_t port_be, void *user)
{
	struct wk_msg m;

	if (!a || ip4_be == 0 || port_be == 0)
		return IPK_EINVAL;
	app_msg(&m, C_CONNECT, 0);
	m.t.peer_ip4_be = ip4_be;
	m.port_be = port_be;
	m.p = user;
	return app_cmd(a, &m);
}

int ipk_app_connect_addr(struct ipk_app *a, const struct ipk_addr *peer, uint16_t port_be,
                         void *user)
{
	static const uint8_t zero[16];
	struct wk_msg m;
	uint32_t ip4;

	if (!a || !peer || port_be == 0)
		return IPK_EINVAL;
	if (peer->family == IPK_AF_INET) {
		memcpy(&ip4, peer->a, 4);
		return ipk_app_connect(a, ip4, port_be, user);
	}
	if (peer->family != IPK_AF_INET6 || memcmp(peer->a, zero, 16) == 0)
		return IPK_EINVAL;
	app_msg(&m, C_CONNECT6, 0);
	memcpy(m.peer6, peer->a, 16);
	m.port_be = port_be;
	m.p = user;
	return app_cmd(a, &m);
}

int ipk_app_send(struct ipk_app *a, uint64_t cid, const void *buf, uint32_t len)
{
	struct wk_appconn *ac;
	struct wk_msg m;

	if (!a || !buf || len == 0)
		return IPK_EINVAL;
	ac = app_live(a->w, cid);
	if (!ac)
		return IPK_ECLOSED;
	if (ac->outstanding >= IPK_APP_SENDQ)
		return IPK_EAGAIN;
	ac->outstanding++;
	app_msg(&m, C_SEND, cid);
	m.data = (const uint8_t *)buf;
	m.len = len;
	return app_cmd(a, &m);
}

int ipk_app_release(struct ipk_app *a, uint64_t cid, struct ipk_pkt *ref, uint32_t len)
{
	struct wk_msg m;

	if (!a || !ref)
		return IPK_EINVAL;
	app_msg(&m, C_RELEASE, cid);
	m.p = ref;
	m.len = len;
	return app_cmd(a, &m);
}

int ipk_app_close(struct ipk_app *a, uint64_t cid)
{
	struct wk_msg m;

	if (!a)
		return IPK_EINVAL;
	if (!app_live(a->w, cid))
		return IPK_ECLOSED;
	app_msg(&m, C_CLOSE, cid);
	return app_cmd(a, &m);
}

int ipk_app_udp_bind(struct ipk_app *a, uint16_t port_be)
{
	struct wk_msg m;

	if (!a || port_be == 0)
		return IPK_EINVAL;
	app_msg(&m, C_UDP_BIND, 0);
	m.port_be = port_be;
	return app_cmd(a, &m);
}

int ipk_app_udp_send(struct ipk_app *a, uint16_t local_port_be, uint32_t ip4_be,
                     uint16_t port_be, const void *buf, uint32_t len, void *user)
{
	struct wk_msg m;

	if (!a || !buf || len == 0 || local_port_be == 0 || ip4_be == 0 || port_be == 0)
		return IPK_EINVAL;
	app_msg(&m, C_UDP_SEND, 0);
	m.t.local_port_be = local_port_be;
	m.t.peer_ip4_be = ip4_be;
	m.t.peer_port_be = port_be;
	m.data = (const uint8_t *)buf;
	m.len = len;
	m.p = user;
	return app_cmd(a, &m);
}

int ipk_app_udp_send_addr(struct ipk_app *a, uint16_t local_port_be,
                          const struct ipk_addr *peer, uint16_t port_be, const void *buf,
                          uint32_t len, void *user)
{
	static const uint8_t any[16];
	struct wk_msg m;

	if (peer && peer->family == IPK_AF_INET) {
		uint32_t ip4_be;
		memcpy(&ip4_be, peer->a, 4); /* network order as stored */
		return ipk_app_udp_send(a, local_port_be, ip4_be, port_be, buf, len, user);
	}
	if (!a || !buf || len == 0 || local_port_be == 0 || port_be == 0 || !peer ||
	    peer->family != IPK_AF_INET6 || memcmp(peer->a, any, 16) == 0)
		return IPK_EINVAL;
	app_msg(&m, C_UDP_SEND6, 0);
	m.t.local_port_be = local_port_be;
	m.t.peer_port_be = port_be;
	memcpy(m.peer6, peer->a, 16);
	m.data = (const uint8_t *)buf;
	m.len = len;
	m.p = user;
	return app_cmd(a, &m);
}

/* ------------------------------------------------------- echo queue */

/* Hand unsent refs to the stack while it takes them; a nested call (UNIFIED runs the
 * sent callback inside ipk_app_send) returns at once and the outer loop goes on. */
static void echoq_send(struct ipk_app *a, uint64_t cid, struct ipk_app_echoq *q)
{
	if (q->in_send)
		return;
	q->in_send = 1;
	while (q->unsent) {
		struct ipk_pkt *k = q->unsent;

		q->unsent = (struct ipk_pkt *)k->user;
		if (ipk_app_send(a, cid, ipk_pkt_mtod(k), k->len) < 0) {
			q->unsent = k; /* IPK_EAGAIN: the next sent event resumes */
			break;
		}
	}
	q->in_send = 0;
}

void ipk_app_echoq_add(struct ipk_app *a, uint64_t cid, struct ipk_app_echoq *q,
                       struct ipk_pkt *ref)
{
	if (!a || !q || !ref)
		return;
	ref->user = NULL;
	if (q->tail)
		q->tail->user = ref;
	else
		q->head = ref;
	q->tail = ref;
	if (!q->unsent)
		q->unsent = ref;
	echoq_send(a, cid, q);
}

static struct ipk_pkt *echoq_pop(struct ipk_app_echoq *q)
{
	struct ipk_pkt *k = q->head;

	if (!k)
		return NULL;
	q->head = (struct ipk_pkt *)k->user;
	if (!q->head)
		q->tail = NULL;
	if (q->unsent == k)
		q->unsent = q->head;
	return k;
}

int ipk_app_echoq_sent(struct ipk_app *a, uint64_t cid, struct ipk_app_echoq *q, uint32_t len)
{
	struct ipk_pkt *k = a && q ? echoq_pop(q) : NULL;

	if (!k)
		return IPK_EINVAL;
	ipk_app_release(a, cid, k, len);
	echoq_send(a, cid, q);
	return IPK_OK;
}

void ipk_app_echoq_drop(struct ipk_app *a, uint64_t cid, struct ipk_app_echoq *q)
{
	struct ipk_pkt *k;

	if (!a || !q)
		return;
	while ((k = echoq_pop(q)) != NULL)
		ipk_app_release(a, cid, k, 0);
}

void ipk_app_set_state(struct ipk_app *a, void *state)
{
	if (a)
		a->w->app_state = state;
}

void *ipk_app_state(const struct ipk_app *a) { return a ? a->w->app_state : NULL; }
unsigned ipk_app_worker(const struct ipk_app *a) { return a ? a->w->idx : 0; }
void *ipk_app_arg(const struct ipk_app *a) { return a ? a->w->ws->cfg.app_arg : NULL; }

/* ------------------------------------------------ application thread */

static void app_start(struct wk *w)
{
	if (w->ws->cfg.app->start)
		w->ws->cfg.app->start(w->app, w->idx);
}

static void app_stop(struct wk *w)
{
	if (w->ws->cfg.app->stop)
		w->ws->cfg.app->stop(w->app);
}

void model_app_start_unified(struct wk *w) { app_start(w); }
void model_app_stop_unified(struct wk *w) { app_stop(w); }

/* Dispatch a batch of events; returns how many. */
static uint32_t app_turn(struct wk *w)
{
	uint32_t n = spsc_cons_avail(&w->ev), i;

	if (n > APP_BATCH)
		n = APP_BATCH;
	for (i = 0; i < n; i++)
		app_dispatch(w, (const struct wk_msg *)spsc_cons_slot(&w->ev, i));
	if (n)
		spsc_cons_release(&w->ev, n);
	if (outbox_flush(&w->cmdo))
		waker_kick(&w->net_wake);
	return n;
}

/* MERGE: sleep until the networking side publishes (or stop). */
static void app_sleep(struct wk *w)
{
	struct pollfd pfd;

	waker_arm(&w->app_wake);
	if (spsc_empty(&w->ev) && !w->cmdo.head && !wk_stopping(w->ws)) {
		pfd.fd = w->app_wake.efd;
		pfd.events = POLLIN;
		pfd.revents = 0;
		if (poll(&pfd, 1, APP_SLEEP_MS) > 0)
			WK_INC(w->st.app_wakeups);
	}
	waker_disarm(&w->app_wake);
}

void *model_app_thread(void *arg)
{
	struct wk *w = (struct wk *)arg;

	if (w->app_cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(w->app_cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set) < 0)
			fprintf(stderr, "ipkit worker %u: app thread cannot pin to CPU %d: %s\n",
			        w->idx, w->app_cpu, strerror(errno));
	}
	app_start(w);
	if (outbox_flush(&w->cmdo))
		waker_kick(&w->net_wake);
	while (!wk_stopping(w->ws)) {
		if (app_turn(w) > 0)
			continue;
		if (w->ws->cfg.model == IPK_MODEL_MERGE)
			app_sleep(w);
		else
			sched_yield(); /* SPLIT: poll again at once unless someone else must run */
	}
	app_stop(w);
	return NULL;
}

/* ------------------------------------------------------------ set-up */

int model_init(struct wk *w, char *err, size_t errlen)
{
	uint32_t i, slots = w->ws->cfg.ring_slots;

	w->nrecs = w->ws->cfg.node.conns;
	w->recs = (struct wk_rec *)calloc(w->nrecs, sizeof(*w->recs));
	w->as = (struct wk_appside *)calloc(1, sizeof(*w->as));
	w->app = (struct ipk_app *)calloc(1, sizeof(*w->app));
	if (!w->recs || !w->as || !w->app ||
	    !(w->as->c = (struct wk_appconn *)calloc(w->nrecs, sizeof(*w->as->c)))) {
		snprintf(err, errlen, "workers: out of memory for connection records");
		return -ENOMEM;
	}
	w->app->w = w;
	for (i = w->nrecs; i-- > 0;) {
		w->recs[i].idx = i;
		w->recs[i].gen = 1;
		w->recs[i].next_free = w->rec_free;
		w->rec_free = &w->recs[i];
	}
	if (w->ws->cfg.model == IPK_MODEL_UNIFIED)
		return 0;
	if (spsc_init(&w->ev, slots, sizeof(struct wk_msg)) < 0 ||
	    spsc_init(&w->cmd, slots, sizeof(struct wk_msg)) < 0 || waker_init(&w->app_wake) < 0) {
		snprintf(err, errlen, "workers: cannot set up the message rings");
		return -ENOMEM;
	}
	w->evo.r = &w->ev;
	w->cmdo.r = &w->cmd;
	return 0;
}

void model_fini(struct wk *w)
{
	net_held_free(w);
	outbox_free(&w->evo);
	outbox_free(&w->cmdo);
	spsc_fini(&w->ev);
	spsc_fini(&w->cmd);
	waker_fini(&w->app_wake);
	if (w->as)
		free(w->as->c);
	free(w->as);
	free(w->app);
	free(w->recs);
	w->as = NULL;
	w->app = NULL;
	w->recs = NULL;
}
