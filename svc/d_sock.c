/*
 * ipkitd: sockets and their rings. Everything read from the region is read here,
 * once, into private memory, and checked (svc/README.md, "Untrusted application").
 */
#include "daemon.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ op queues */

static int d_opq_init(struct d_opq *q, uint32_t cap)
{
	q->v = (struct d_op *)calloc(cap, sizeof *q->v);
	q->head = q->n = 0;
	q->cap = cap;
	return q->v ? 0 : -ENOMEM;
}

int d_opq_push(struct d_opq *q, const struct d_op *op)
{
	if (q->n == q->cap)
		return -ENOBUFS;
	q->v[(q->head + q->n) % q->cap] = *op;
	q->n++;
	return 0;
}

struct d_op *d_opq_front(struct d_opq *q) { return q->n ? &q->v[q->head] : NULL; }

void d_opq_pop(struct d_opq *q)
{
	if (!q->n)
		return;
	q->head = (q->head + 1) % q->cap;
	q->n--;
}

/* ------------------------------------------------------------ rings */

static int d_pow2(uint32_t v) { return v && !(v & (v - 1)); }

/* Place and initialise a ring pair (sizes 0: defaults), plus the private queues
 * sized by the CQ: at most cq_entries ops in flight, so completions always fit in
 * the CQ plus the overflow. */
int d_sock_rings(struct d_sock *s, uint32_t sq, uint32_t cq)
{
	struct d_app *a = s->app;
	const struct d_cfg *c = &a->d->cfg;
	struct ipk_svc_ring *r;
	int rc;
	sq = sq ? sq : 64;
	cq = cq ? cq : 2 * sq;
	if (!d_pow2(sq) || !d_pow2(cq) || sq > c->max_sq || cq > c->max_cq)
		return -EINVAL;
	rc = d_ring_get(a, ipk_svc_ring_bytes(sq, cq), &s->ring_off, &s->ring_cls);
	if (rc < 0)
		return rc;
	if (d_opq_init(&s->txq, cq) < 0 || d_opq_init(&s->rxq, cq) < 0 ||
	    !(s->ovf = (struct ipk_svc_cqe *)calloc(cq, sizeof *s->ovf))) {
		free(s->txq.v);
		free(s->rxq.v);
		s->txq.v = s->rxq.v = NULL;
		d_ring_put(a, s->ring_off, s->ring_cls);
		return -ENOMEM;
	}
	r = (struct ipk_svc_ring *)(a->base + s->ring_off);
	memset(r, 0, sizeof *r);
	r->sq_entries = sq;
	r->cq_entries = cq;
	r->sock = s->id;
	r->local = s->acc_local; /* zeros unless accepted */
	r->sqes_off = sizeof *r;
	r->cqes_off = (uint32_t)(sizeof *r + (uint64_t)sq * sizeof(struct ipk_svc_sqe));
	s->ring = r;
	s->sqes = (struct ipk_svc_sqe *)((uint8_t *)r + r->sqes_off);
	s->cqes = (struct ipk_svc_cqe *)((uint8_t *)r + r->cqes_off);
	s->sq_entries = sq;
	s->cq_entries = cq;
	s->sq_head = s->cq_tail = 0;
	return 0;
}

/* ------------------------------------------------------------ socket table */

/* One more page of the table. The directory is sized once for every index the
 * app can reach (max_socks + the control ring); pages are never moved or freed
 * before the app, so a slot's address stays valid (d_slot). */
static int d_table_grow(struct d_app *a)
{
	uint32_t cap = a->cap + D_SPAGE, max = a->d->cfg.max_socks + 1;
	struct d_spage *pg;
	uint32_t *f;
	if (a->cap >= (1u << D_SOCK_IDX_BITS) || a->cap >= max)
		return -ENOMEM;
	if (!a->sdir) {
		if (max > (1u << D_SOCK_IDX_BITS))
			max = 1u << D_SOCK_IDX_BITS;
		a->ndir = (max + D_SPAGE - 1) / D_SPAGE;
		a->sdir = (struct d_spage **)calloc(a->ndir, sizeof *a->sdir);
		if (!a->sdir)
			return -ENOMEM;
	}
	f = (uint32_t *)realloc(a->free_idx, cap * sizeof *f);
	if (!f)
		return -ENOMEM;
	a->free_idx = f;
	pg = (struct d_spage *)calloc(1, sizeof *pg);
	if (!pg)
		return -ENOMEM;
	a->sdir[a->cap >> D_SPAGE_BITS] = pg;
	a->cap = cap;
	if (a->nsocks == 0) /* index 0 is the control ring */
		__atomic_store_n(&a->nsocks, 1, __ATOMIC_RELEASE);
	return 0;
}

static int d_table_take(struct d_app *a, uint32_t *idx)
{
	if (a->nfree) {
		*idx = a->free_idx[--a->nfree];
		return 0;
	}
	if (a->nlive >= a->d->cfg.max_socks)
		return -ENOMEM;
	if (a->nsocks == a->cap || a->cap == 0) {
		int rc = d_table_grow(a);
		if (rc < 0)
			return rc;
	}
	*idx = a->nsocks;
	/* release: the page holding idx is in the directory before a lock-free
	 * reader (d_sock_find) may look at idx */
	__atomic_store_n(&a->nsocks, a->nsocks + 1, __ATOMIC_RELEASE);
	return 0;
}

/* Record s's worker where a harvest or a message on another worker reads it
 * (d_act_found, d_sock_find_wk). Release, after the slot's store: a reader that
 * loads own[idx] (acquire) naming itself then finds in the slot a socket that is
 * its own (only the owner frees a socket, and only the owner or the socket's
 * creator, before anyone can name it, writes its own[] entry). */
static void d_own_set(const struct d_sock *s)
{
	uint32_t idx = s->id & ((1u << D_SOCK_IDX_BITS) - 1);
	if (s->app->own && s->id)
		__atomic_store_n(&s->app->own[idx], (uint16_t)(s->wk | s->prio << 8),
		                 __ATOMIC_RELEASE);
}

/* own[idx]'s worker (0xff: nobody); nw == 1: wk itself. */
static unsigned d_own_wk(const struct d_app *a, uint32_t idx, unsigned wk)
{
	return a->own ? __atomic_load_n(&a->own[idx], __ATOMIC_ACQUIRE) & 0xffu : wk;
}

/* A socket's level, counted per level for d_net.c's --low-inflight. */
void d_sock_level(struct d_sock *s, unsigned lvl)
{
	struct d_daemon *d = s->app->d;
	/* relaxed: a count any worker changes and d_low_limited reads as a hint
	 * (a SEND racing a level change is judged by the old count once) */
	if (s->lvl_counted)
		__atomic_sub_fetch(&d->lvl_socks[s->prio], 1, __ATOMIC_RELAXED);
	s->prio = lvl;
	__atomic_add_fetch(&d->lvl_socks[lvl], 1, __ATOMIC_RELAXED);
	s->lvl_counted = 1;
	d_own_set(s);
}

struct d_sock *d_sock_alloc(struct d_app *a, int type)
{
	struct d_sock *s = (struct d_sock *)calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->app = a;
	s->type = type;
	s->state = D_NEW;
	return s;
}

/* Give s an id and a place in the table, and its rings (sizes already chosen by
 * d_sock_rings). Returns 0 or -ENOMEM. */
int d_sock_attach(struct d_sock *s)
{
	struct d_app *a = s->app;
	uint32_t idx;
	int rc;
	d_alock(a); /* any worker attaches (SOCKET on 0, accepts on the listener's) */
	rc = d_table_take(a, &idx);
	if (rc < 0) {
		d_aunlock(a);
		return rc;
	}
	a->nlive++;
	s->id = ((uint32_t)__atomic_load_n(d_slot_gen(a, idx), __ATOMIC_RELAXED)
	         << D_SOCK_IDX_BITS) | idx;
	s->ring->sock = s->id;
	d_slot_set(a, idx, s); /* release: s is whole before it can be found */
	d_own_set(s);
	d_aunlock(a);
	return 0;
}

/* The socket of id in app a, or NULL: a stale generation or a free index is as
 * foreign as a wrong number. */
struct d_sock *d_sock_find(struct d_app *a, uint32_t id)
{
	uint32_t idx = id & ((1u << D_SOCK_IDX_BITS) - 1);
	struct d_sock *s;
	if (idx == 0 || idx >= d_nsocks(a) || !(s = d_slot_get(a, idx)))
		return NULL;
	if ((id >> D_SOCK_IDX_BITS) != __atomic_load_n(d_slot_gen(a, idx), __ATOMIC_RELAXED))
		return NULL;
	return s;
}

unsigned d_sock_own(struct d_app *a, uint32_t id)
{
	uint32_t idx = id & ((1u << D_SOCK_IDX_BITS) - 1);
	if (idx == 0 || idx >= d_nsocks(a))
		return 0xffu;
	return d_own_wk(a, idx, 0);
}

/* The socket of id if it is worker wk's, else NULL with *owner the worker the
 * owner table names (0xff: none; nw == 1: wk). A thread must not read another
 * worker's socket (its owner may free it meanwhile): the table is looked at
 * first, the socket only when it is ours. */
struct d_sock *d_sock_find_wk(struct d_app *a, uint32_t id, unsigned wk, unsigned *owner)
{
	uint32_t idx = id & ((1u << D_SOCK_IDX_BITS) - 1);
	struct d_sock *s;
	*owner = 0xff;
	if (idx == 0 || idx >= d_nsocks(a))
		return NULL;
	*owner = d_own_wk(a, idx, wk);
	if (*owner != wk)
		return NULL;
	s = d_sock_find(a, id);
	if (s && s->wk != wk) { /* cannot happen while own[] is kept; stay off it */
		*owner = 0xff;
		return NULL;
	}
	return s;
}

static void d_sock_free_rx(struct d_sock *s)
{
	while (s->rxh) {
		struct ipk_pkt *k = s->rxh;
		s->rxh = (struct ipk_pkt *)k->user;
		ipk_pkt_free(k);
	}
	s->rxt = NULL;
	while (s->dq_h) {
		struct d_dgram *g = s->dq_h;
		s->dq_h = g->next;
		free(g);
	}
	s->dq_n = 0;
	s->dq_bytes = 0;
}

int d_close_graceful(const struct d_sock *s, int how)
{
	int unread = s->rxh != NULL || s->rxp.n > 0 || s->gb_pos < s->gb_len;
	if (how & IPK_SVC_SQE_F_ABORT)
		return 0;
	return !((how & IPK_SVC_SQE_F_RST_UNREAD) && unread);
}

/* Tear a socket down: connection reset (or FIN when graceful), waiting accepted
 * connections reset, ports freed, held data freed, rings back to the allocator.
 * No completion is posted. */
void d_wake_forget(struct d_sock *s);

/* Free a socket's rings and private queues (d_sock_rings' undo). */
void d_sock_unring(struct d_sock *s)
{
	free(s->txq.v);
	free(s->rxq.v);
	free(s->ovf);
	s->txq.v = s->rxq.v = NULL;
	s->ovf = NULL;
	if (s->ring)
		d_ring_put(s->app, s->ring_off, s->ring_cls);
	s->ring = NULL;
}

/* A listener's queue: connections accepted on another worker go back to it
 * (d_acc_answer), which resets them on its own context; only a reclaim, which
 * may touch every worker's sockets, destroys them here. */
void d_sock_unqueue(struct d_daemon *d, struct d_sock *s)
{
	while (s->acc_h) {
		struct d_sock *w = s->acc_h;
		s->acc_h = w->acc_next;
		if (w->wk != s->wk && !d->reclaiming)
			d_acc_answer(d, s->wk, w, -ECONNRESET);
		else
			d_sock_destroy(d, w, 0);
	}
	s->acc_t = NULL;
	d_acc_n_set(s, 0);
}

void d_sock_destroy(struct d_daemon *d, struct d_sock *s, int graceful)
{
	struct d_app *a = s->app;
	uint64_t now = d_snow(s);
	if (s->xfer && d->reclaiming)
		d->wk[s->wk].acc_reaped++;
	d_xfer_unlink(d, s); /* a reclaim of one in flight between workers */
	d_wake_forget(s);
	d_zc_orphan(s); /* before the abort frees the queues: nobody to complete */
	if (s->lvl_counted)
		__atomic_sub_fetch(&d->lvl_socks[s->prio], 1, __ATOMIC_RELAXED);
	s->lvl_counted = 0;
	d_family_leave(d, s); /* the connection goes on with another member */
	d_loop_unpair(d, s, graceful);
	if (s->conn) {
		struct ipk_conn *c = s->conn;
		s->conn = NULL;
		ipk_tcp_set_user(c, NULL); /* later events of c find no socket */
		if (graceful)
			ipk_tcp_close(d_sctx(s), c, now);
		else
			ipk_tcp_abort(d_sctx(s), c, now);
	}
	d_sock_unqueue(d, s);
	d_port_release(d, s);
	d_act_remove(s);
	d_sock_free_rx(s);
	d_sock_unring(s);
	if (s == &a->ctl)
		return;
	if (s->id) {
		uint32_t idx = s->id & ((1u << D_SOCK_IDX_BITS) - 1);
		d_alock(a);
		d_slot_set(a, idx, NULL);
		__atomic_store_n(d_slot_gen(a, idx), (uint8_t)(*d_slot_gen(a, idx) + 1),
		                 __ATOMIC_RELAXED);
		if (a->own) /* nobody's until it is attached again */
			__atomic_store_n(&a->own[idx], (uint16_t)0xffff, __ATOMIC_RELEASE);
		a->free_idx[a->nfree++] = idx;
		a->nlive--;
		d_aunlock(a);
	}
	if (s->in_msg)
		s->xfer_dead = 1; /* a message points to it: its receiver frees it */
	else
		free(s);
}

/* ------------------------------------------------------------ completions */

/* A corrupted CQ index counted: out of line, so that d_cq_room stays small
 * enough to be inlined on the per-completion path. */
__attribute__((noinline, cold)) static void d_cq_bad(struct d_sock *s)
{
	D_STAT(s->app, bad_index, 1);
}

/* CQ room: cq_head is the app's; read once; a value claiming more room than the
 * ring has is a corrupted index: count it and treat the CQ as full. */
static int d_cq_room(struct d_sock *s)
{
	uint32_t head = IPK_SVC_LOAD_ACQ(&s->ring->cq_head.v);
	uint32_t used = s->cq_tail - head;
	if (used > s->cq_entries) {
		d_cq_bad(s);
		return 0;
	}
	return used < s->cq_entries;
}

static void d_cq_write(struct d_sock *s, const struct ipk_svc_cqe *c)
{
	s->cqes[s->cq_tail & (s->cq_entries - 1)] = *c;
	s->cq_tail++;
	/* release: the entry's contents are visible before the tail that covers it */
	IPK_SVC_STORE_REL(&s->ring->cq_tail.v, s->cq_tail);
	d_spw(s)->posted = 1;
	if (!d_ev_send)
		d_spw(s)->loud = 1; /* d_evfd.c: not only a SEND's */
	if (!s->wake_on) { /* its worker's d_wake_apps looks at it once after the pass */
		s->wake_on = 1;
		s->wake_next = d_spw(s)->wake_h;
		d_spw(s)->wake_h = s;
	}
	if (s->prio == 0)
		d_wake_urgent(s);
}

/* Off the app's wake list (a socket destroyed between its post and the wake). */
void d_wake_forget(struct d_sock *s)
{
	struct d_sock **pp = &d_spw(s)->wake_h;
	if (!s->wake_on)
		return;
	while (*pp && *pp != s)
		pp = &(*pp)->wake_next;
	if (*pp)
		*pp = s->wake_next;
	s->wake_on = 0;
}

static void d_ovf_flush(struct d_sock *s)
{
	int snd = d_ev_send;
	d_ev_send = 0; /* older entries: any kind */
	while (s->ovf_n && d_cq_room(s)) {
		d_cq_write(s, &s->ovf[s->ovf_head]);
		s->ovf_head = (s->ovf_head + 1) % s->cq_entries;
		s->ovf_n--;
	}
	d_ev_send = snd;
}

void d_post(struct d_sock *s, const struct ipk_svc_cqe *c0)
{
	struct ipk_svc_cqe cc = *c0, *c = &cc;
	if (!s->ring)
		return;
	cc.seq = s->app->d->nw > 1 ? __atomic_fetch_add(&s->app->cq_seq, 1, __ATOMIC_RELAXED)
	                           : s->app->cq_seq++;
	cc.pass = __atomic_load_n(&s->app->d->passes, __ATOMIC_RELAXED);
	d_ovf_flush(s);
	if (s->ovf_n == 0 && d_cq_room(s)) {
		d_cq_write(s, c);
		return;
	}
	if (s->ovf_n == s->cq_entries) {
		D_STAT(s->app, bad_index, 1); /* only a CQ the app never reads gets here */
		return;
	}
	s->ovf[(s->ovf_head + s->ovf_n) % s->cq_entries] = *c;
	s->ovf_n++;
	d_spw(s)->ovf_wait = 1;
	d_act_push(s); /* looked at again until the app made room */
}

void d_post_res(struct d_sock *s, uint64_t user_data, int32_t res)
{
	struct ipk_svc_cqe c;
	memset(&c, 0, sizeof c);
	c.user_data = user_data;
	c.res = res;
	d_post(s, &c);
}

/* ------------------------------------------------------------ control ops */

/* The level a SOCKET asks for (0: the app's default, L: level L - 1), or -EINVAL
 * (no such level) / -EPERM (higher than the configuration allows this app). */
static int d_prio_pick(const struct d_app *a, uint16_t want)
{
	const struct d_cfg *c = &a->d->cfg;
	unsigned lvl;
	if (want == 0)
		return (int)(c->prio_default > a->prio_max ? c->prio_default : a->prio_max);
	lvl = (unsigned)want - 1;
	if (lvl >= c->prio_levels)
		return -EINVAL;
	return lvl < a->prio_max ? -EPERM : (int)lvl;
}

/* SOCKET: type in arg, SQ size in len, CQ size in arg2, level in prio. */
static void d_ctl_socket(struct d_sock *ctl, const struct ipk_svc_sqe *e)
{
	struct ipk_svc_cqe c;
	struct d_sock *s;
	int rc;
	memset(&c, 0, sizeof c);
	c.user_data = e->user_data;
	if (e->arg != IPK_SVC_TCP && e->arg != IPK_SVC_UDP) {
		c.res = -EINVAL;
		d_post(ctl, &c);
		return;
	}
	rc = d_prio_pick(ctl->app, e->prio);
	if (rc < 0) {
		c.res = rc;
		d_post(ctl, &c);
		return;
	}
	s = d_sock_alloc(ctl->app, (int)e->arg);
	if (s) {
		struct d_daemon *d = ctl->app->d;
		/* a new socket's worker: round robin (a CONNECT from a bound port moves
		 * it to the worker its flow hashes to, d_net.c) */
		s->wk = __atomic_fetch_add(&d->next_wk, 1, __ATOMIC_RELAXED) % d->nw;
		__atomic_add_fetch(&d->wk[s->wk].socks, 1, __ATOMIC_RELAXED);
		d_sock_level(s, (unsigned)rc);
	}
	rc = s ? d_sock_rings(s, e->len, e->arg2) : -ENOMEM;
	if (rc == 0)
		rc = d_sock_attach(s);
	if (rc < 0) {
		if (s)
			d_sock_destroy(ctl->app->d, s, 0);
		c.res = rc;
		d_post(ctl, &c);
		return;
	}
	c.res = 0;
	c.sock = s->id;
	c.ring_off = s->ring_off;
	d_post(ctl, &c);
}

static void d_ctl_op(struct d_daemon *d, struct d_sock *ctl, const struct ipk_svc_sqe *e)
{
	struct d_sock *s;
	switch (e->opcode) {
	case IPK_SVC_OP_NOP:
		d_post_res(ctl, e->user_data, 0);
		return;
	case IPK_SVC_OP_SOCKET:
		d_ctl_socket(ctl, e);
		return;
	case IPK_SVC_OP_ADOPT:
		d_family_adopt(ctl, e);
		return;
	case IPK_SVC_OP_CLOSE: {
		/* IPK_SVC_SQE_F_ABORT, IPK_SVC_SQE_F_RST_UNREAD: decided by the
		 * socket's owner (d_close_graceful), which holds its received bytes */
		int how = e->flags & (IPK_SVC_SQE_F_ABORT | IPK_SVC_SQE_F_RST_UNREAD);
		unsigned o;
		s = d_sock_find_wk(ctl->app, (uint32_t)e->arg, ctl->wk, &o);
		if (!s && (o >= d->nw || !d_sock_find(ctl->app, (uint32_t)e->arg))) {
			D_STAT(ctl->app, bad_sqe, 1);
			d_post_res(ctl, e->user_data, -EBADF);
			return;
		}
		if (!s) {
			/* another worker's socket: destroyed by its owner, which answers
			 * (d_msg.c d_msg_close); the completion comes a pass later */
			if (d_msg_post(d, ctl->wk, o, D_MSG_CLOSE, ctl->app->id, (uint32_t)e->arg,
			               e->user_data, how, NULL) < 0)
				d_post_res(ctl, e->user_data, -ENOMEM);
			return;
		}
		d_sock_destroy(d, s, d_close_graceful(s, how));
		d_post_res(ctl, e->user_data, 0);
		return;
	}
	default:
		D_STAT(ctl->app, bad_sqe, 1);
		d_post_res(ctl, e->user_data, -EINVAL);
	}
}

/* ------------------------------------------------------------ submissions */

/* Buffer range check: [buf_off, buf_off + len) inside the buffer area, written so
 * that no sum can overflow. */
int d_buf_ok(const struct d_app *a, const struct ipk_svc_sqe *e)
{
	uint64_t lo = a->buf_area_off, hi = a->buf_area_off + a->buf_area_size;
	return e->buf_off >= lo && e->buf_off <= hi && e->len <= hi - e->buf_off;
}

static void d_ring_error(struct d_sock *s)
{
	struct ipk_svc_cqe c;
	if (s->broken)
		return;
	s->broken = 1;
	D_STAT(s->app, bad_index, 1);
	s->ring->flags |= IPK_SVC_RING_F_BROKEN;
	memset(&c, 0, sizeof c);
	c.res = -EBADMSG;
	c.flags = IPK_SVC_CQE_F_RINGERR;
	d_post(s, &c);
}

/* Take up to max entries from s's SQ. Returns entries taken. */
static uint32_t d_sock_consume(struct d_daemon *d, struct d_sock *s, uint32_t max)
{
	/* acquire: the entries up to tail are read only after the tail that
	 * published them */
	uint32_t tail = IPK_SVC_LOAD_ACQ(&s->ring->sq_tail.v), n = tail - s->sq_head, k = 0;
	s->more = 0;
	if (n > s->sq_entries) {
		d_ring_error(s);
		return 0;
	}
	if (s->broken) {
		s->broken = 0;
		s->ring->flags &= ~IPK_SVC_RING_F_BROKEN;
	}
	/* a CONNECT that moves s ends its turn here: the rest is its new worker's */
	while (k < n && k < max && s->inflight + s->ovf_n < s->cq_entries && !s->move) {
		struct d_op op;
		/* one copy: the app may rewrite the slot at any time; only op is used */
		memcpy(&op.e, &s->sqes[s->sq_head & (s->sq_entries - 1)], sizeof op.e);
		op.done = 0;
		op.zc = NULL; /* no zero-copy record yet (d_zc.c) */
		s->sq_head++;
		k++;
		if (s == &s->app->ctl)
			d_ctl_op(d, s, &op.e);
		else
			d_op_start(d, s, &op);
	}
	if (k)
		/* release: our copies of the entries are complete before the app may
		 * reuse their slots */
		IPK_SVC_STORE_REL(&s->ring->sq_head.v, s->sq_head);
	s->more = k == max && k < n;
	if (s->more)
		d_spw(s)->rescan = 1; /* budget spent: come back next pass (the in-flight
		                     * limit is lifted by d_op_done, which asks again) */
	return k;
}

static int d_sock_handover(struct d_daemon *d, struct d_sock *s);

/* One socket's turn: waiting completions first, then up to max new entries. */
static uint32_t d_sock_pass(struct d_daemon *d, struct d_sock *s, uint32_t max)
{
	uint32_t k;
	if (s != &s->app->ctl)
		D_STAT(s->app, sock_visits, 1);
	d_ovf_flush(s);
	k = d_sock_consume(d, s, max);
	if (s->move == 1 && d_sock_handover(d, s) == 0)
		return k; /* another worker's now */
	if (s->ovf_n)
		d_spw(s)->ovf_wait = 1; /* the app frees CQ room without a doorbell: look
		                       * again soon (the loop sleeps at most 1 ms) */
	return k;
}

/* ------------------------------------------------------------ active sockets */

/* Onto the tail of its level's active list (nothing if it is on it already). */
void d_act_push(struct d_sock *s)
{
	struct d_appw *a = d_spw(s);
	unsigned l = s->prio;
	if (s->on_act || s == &s->app->ctl || !s->ring)
		return;
	s->on_act = 1;
	s->act_next = NULL;
	s->act_prev = a->act_t[l];
	if (a->act_t[l])
		a->act_t[l]->act_next = s;
	else
		a->act_h[l] = s;
	a->act_t[l] = s;
	a->act_n[l]++;
	d_act_lvl_add(d_sw(s), l, 1);
	if (s->app->d->mt) { /* pushed by any thread: its worker looks next pass */
		a->rescan = 1;
		d_kick(d_sw(s));
	}
}

void d_act_remove(struct d_sock *s)
{
	struct d_appw *a = d_spw(s);
	unsigned l = s->prio;
	if (!s->on_act)
		return;
	if (s->act_prev)
		s->act_prev->act_next = s->act_next;
	else
		a->act_h[l] = s->act_next;
	if (s->act_next)
		s->act_next->act_prev = s->act_prev;
	else
		a->act_t[l] = s->act_prev;
	s->on_act = 0;
	s->act_prev = s->act_next = NULL;
	a->act_n[l]--;
	d_act_lvl_add(d_sw(s), l, -1);
}

/* End of worker `from`'s turn on s whose CONNECT belongs to another worker
 * (d_connect_op, a bound port): s becomes move_to's socket and the CONNECT goes
 * there as a message (d_msg.c d_msg_connect), which connects on its own node.
 * Everything of s is written before the message is published; after it, this
 * worker never touches s again. 0, or -1 with the ring full: s stays here,
 * active, and the next pass tries again. */
static int d_sock_handover(struct d_daemon *d, struct d_sock *s)
{
	unsigned from = s->wk;
	/* posted to this turn: on this worker's wake list, which its new worker
	 * never sees; woken here, before it leaves */
	d_wake_one(s);
	d_act_remove(s);
	s->more = 0;
	s->move = 2;
	s->wk = s->move_to;
	d_own_set(s);
	__atomic_sub_fetch(&d->wk[from].socks, 1, __ATOMIC_RELAXED);
	if (d_msg_send(d, from, s, D_MSG_CONNECT, NULL) == 0)
		return 0;
	__atomic_add_fetch(&d->wk[from].socks, 1, __ATOMIC_RELAXED);
	d->wk[from].msg_full++;
	s->wk = from;
	d_own_set(s);
	s->move = 1;
	return -1;
}

/* The hand-off and the owner table (--workers > 1): allocated at hello, sized by
 * the ready bitmap, freed with the application (d_app_final). 0 or -ENOMEM. */
int d_ho_alloc(struct d_app *a)
{
	unsigned i, nw = a->d->nw;
	uint32_t per = a->ready_words + a->ready_sum_words;
	if (nw == 1)
		return 0;
	a->own = (uint16_t *)calloc((size_t)a->ready_words * 64, sizeof *a->own);
	a->ho_mem = (uint64_t *)calloc((size_t)nw * per, sizeof *a->ho_mem);
	if (!a->own || !a->ho_mem)
		return -ENOMEM;
	for (i = 0; i < nw; i++) {
		a->pw[i].ho_bm = a->ho_mem + (size_t)i * per;
		a->pw[i].ho_sum = a->pw[i].ho_bm + a->ready_words;
	}
	return 0;
}

/* Socket index idx of a, found ready by worker `from`'s pass, not its owner's: a bit in
 * the owner's hand-off mask, then a kick. The owner takes the mask at the start
 * of its own pass (d_ho_take), so only the owner ever puts its sockets on its
 * active lists. */
static void d_ho_give(struct d_app *a, unsigned from, unsigned owner, unsigned lvl,
                      uint32_t idx)
{
	struct d_appw *p = &a->pw[owner];
	uint32_t bw = idx / 64;
	__atomic_fetch_or(&p->ho_bm[bw], 1ull << (idx % 64), __ATOMIC_RELAXED);
	/* release: the word's bit is visible before the summary bit that sends the
	 * owner to it (the owner exchanges the summary with acquire) */
	__atomic_fetch_or(&p->ho_sum[bw / 64], 1ull << (bw % 64), __ATOMIC_RELEASE);
	/* seq_cst: the flag is stored before d_kick reads the owner's `sleeping`;
	 * the owner's side is d_wk_sleep_ok's second look after it raised
	 * `sleeping` (a Dekker pair, d_wk.c) */
	__atomic_store_n(&p->ho_flag, 1, __ATOMIC_SEQ_CST);
	/* relaxed: d_defer reads it as a hint (a stale read costs one deferral too
	 * many or too few, as act_lvl's); the control ring has no level there */
	if (lvl < D_PRIO_MAX)
		__atomic_fetch_or(&a->d->wk[owner].ho_lvls, 1u << lvl, __ATOMIC_RELAXED);
	a->d->wk[from].handed_out++;
	d_kick(&a->d->wk[owner]);
}

int d_ho_pending(const struct d_appw *p)
{
	return p->ho_bm && __atomic_load_n(&p->ho_flag, __ATOMIC_ACQUIRE);
}

/* A ready socket index, found by worker wk's harvest: its owner's active list if
 * that is wk, else the owner's hand-off mask. The table is looked at only for
 * wk's own sockets; a bit for an index the table does not hold is ignored (the
 * app can only name its own sockets, and costs only itself). */
static void d_act_found(struct d_app *a, uint32_t idx, unsigned wk)
{
	struct d_sock *s;
	unsigned ow = a->own ? __atomic_load_n(&a->own[idx], __ATOMIC_ACQUIRE) : wk;
	unsigned o = ow & 0xff, lvl = ow >> 8;
	if (o != wk) { /* another worker's (or nobody's): never read here */
		if (o < a->d->nw && lvl < D_PRIO_MAX)
			d_ho_give(a, wk, o, lvl, idx);
		return;
	}
	if (idx == 0 || idx >= d_nsocks(a) || !(s = d_slot_get(a, idx)))
		return;
	if (s->wk == wk) /* own[] named us after the slot was stored: ours */
		d_act_push(s);
}

/* Take worker wk's hand-off mask of a (d_ho_give): its sockets there become
 * active. Index 0 is the control ring (worker 0's): the caller's pass serves it
 * (the app is dirty). O(summary words + set bits). */
static void d_ho_take(struct d_app *a, unsigned wk)
{
	struct d_appw *p = &a->pw[wk];
	uint32_t w;
	if (!d_ho_pending(p))
		return;
	/* acq_rel: a give after this clear raises the flag again, and its bits are
	 * then seen by this take or by the next pass's */
	__atomic_exchange_n(&p->ho_flag, 0, __ATOMIC_ACQ_REL);
	for (w = 0; w < a->ready_sum_words; w++) {
		uint64_t sum = __atomic_exchange_n(&p->ho_sum[w], 0, __ATOMIC_ACQUIRE);
		while (sum) {
			uint32_t bw = w * 64 + (uint32_t)__builtin_ctzll(sum);
			uint64_t bits = __atomic_exchange_n(&p->ho_bm[bw], 0, __ATOMIC_ACQUIRE);
			sum &= sum - 1;
			while (bits) {
				uint32_t idx = bw * 64 + (uint32_t)__builtin_ctzll(bits);
				struct d_sock *s;
				unsigned ow = __atomic_load_n(&a->own[idx], __ATOMIC_ACQUIRE);
				bits &= bits - 1;
				if ((ow & 0xff) != wk) { /* moved after the give: on to its
				                          * new worker (or gone) */
					if ((ow & 0xff) < a->d->nw && (ow >> 8) < D_PRIO_MAX)
						d_ho_give(a, wk, ow & 0xff, ow >> 8, idx);
					continue;
				}
				if (idx == 0 || idx >= d_nsocks(a) || !(s = d_slot_get(a, idx)))
					continue;
				a->d->wk[wk].handed_in++;
				if (s->wk == wk)
					d_act_push(s);
			}
		}
	}
}

/* Take the ready bitmap: every socket a set bit names becomes active on its
 * owner (d_act_found). O(summary words + set bits). */
static void d_act_harvest(struct d_app *a, unsigned wk)
{
	uint32_t w, nw = a->ready_words;
	for (w = 0; w < a->ready_sum_words; w++) {
		uint64_t sum = __atomic_exchange_n(&a->ready_sum[w], 0, __ATOMIC_ACQ_REL);
		while (sum) {
			uint32_t bw = w * 64 + (uint32_t)__builtin_ctzll(sum);
			uint64_t bits;
			sum &= sum - 1;
			if (bw >= nw)
				continue;
			/* acq_rel: the SQ tails published before the bits are visible to
			 * the consume that follows */
			bits = __atomic_exchange_n(&a->ready_bm[bw], 0, __ATOMIC_ACQ_REL);
			while (bits) {
				uint32_t idx = bw * 64 + (uint32_t)__builtin_ctzll(bits);
				bits &= bits - 1;
				d_act_found(a, idx, wk);
			}
		}
	}
}

/* Start of a service pass: is the application worth looking at (it submitted, or
 * asked to be looked at again)? A submission makes its sockets active (bitmap). */
void d_pass_begin(struct d_app *a, unsigned wk)
{
	struct d_appw *p = &a->pw[wk];
	uint32_t seq;
	p->dirty = 0;
	if (!a->ready || a->dying)
		return;
	seq = IPK_SVC_LOAD_ACQ(&a->hdr->submit_seq.v);
	if (seq == p->last_seq && !p->rescan && !p->ovf_wait && !d_ho_pending(p))
		return;
	if (seq != p->last_seq) {
		d_act_harvest(a, wk);
		/* the control ring has no ready bit: worker 0 serves it when told
		 * (index 0 of its hand-off). Its head as published in the region, not
		 * worker 0's private copy (worker 0's to write): a value the app
		 * scribbled costs one needless hand-off */
		if (wk != 0 && IPK_SVC_LOAD_RLX(&a->ctl.ring->sq_tail.v) !=
		                   IPK_SVC_LOAD_RLX(&a->ctl.ring->sq_head.v))
			d_ho_give(a, wk, 0, D_PRIO_MAX, 0);
	}
	d_ho_take(a, wk);
	p->last_seq = seq; /* per worker: each takes the bitmap when it moved since
	                    * its own last look (another's take left nothing) */
	p->rescan = 0;
	p->ovf_wait = 0;
	p->dirty = 1;
}

/* Serve the active sockets of one priority level (the control ring with level 0),
 * taking at most *budget entries in all (UINT32_MAX: no limit), each socket at
 * most D_PASS_BUDGET. Each active socket is taken from the head of the list once;
 * one with entries left (budget) or completions waiting for CQ room goes to the
 * tail; one held by its in-flight limit comes back through d_op_done. A spent
 * budget leaves the rest at the head for the next pass, so the sockets of a level
 * take turns. O(active sockets). Returns entries taken. */
int d_serve_level(struct d_daemon *d, struct d_app *a, unsigned wk, unsigned level,
                  uint32_t *budget)
{
	struct d_appw *p = &a->pw[wk];
	uint32_t work = 0, n = p->act_n[level];
	if (!p->dirty)
		return 0;
	if (level == 0 && wk == 0) /* the control ring is worker 0's */
		work += d_sock_pass(d, &a->ctl, D_PASS_BUDGET);
	/* the ones pushed back in this pass wait for the next one */
	for (; n && p->act_h[level]; n--) {
		struct d_sock *s = p->act_h[level];
		uint32_t got;
		if (*budget == 0) {
			p->rescan = 1;
			break;
		}
		/* several workers: the level stays counted over the turn, so another
		 * worker's d_defer does not see it empty before its completions */
		if (d->nw > 1)
			d_act_lvl_add(&d->wk[wk], level, 1);
		d_act_remove(s);
		got = d_sock_pass(d, s, *budget < D_PASS_BUDGET ? *budget : D_PASS_BUDGET);
		if (*budget != UINT32_MAX)
			*budget -= got;
		d->wk[wk].sqes += got;
		work += got;
		if (s->wk == wk && (s->more || s->ovf_n || s->move))
			d_act_push(s); /* (move: its hand-over waits for ring room) */
		if (d->nw > 1)
			d_act_lvl_add(&d->wk[wk], level, -1);
	}
	return (int)work;
}
