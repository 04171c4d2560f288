/*
 * ipkitd --workers N: a port's listener (TCP LISTEN) or binding (UDP BIND) is
 * installed in every worker's core context, since a SYN or a datagram lands on
 * the worker its flow hashes to (svc/README.md, "Parallel passes"). Each context
 * is one thread's (DESIGN: one context per thread), so the socket's worker
 * installs it in its own context and asks every other worker to do the same in
 * theirs with a message (D_MSG_INSTALL); the LISTEN or BIND completes only when
 * every worker has answered (D_MSG_INSTALLED): a client connecting right after
 * the completion must not be refused by a worker that has not installed it yet.
 * A release is a message too (D_MSG_REMOVE), not answered.
 *
 * Ordering: messages from one sender stay in order (one SPSC ring per (from, to)
 * pair, and d_msg_post's outbox is FIFO per destination), but two senders' rings
 * are not ordered against each other: worker X's REMOVE of port P may reach Y
 * after worker Z's INSTALL of P (Z claimed the port after X released it). So
 * every install of a port takes a new generation (d->pgen, written under the
 * port lock, with the claim), and each worker keeps per port the generation it
 * last saw and whether its context has it (d_wk.pst: gen << 1 | on). A message
 * older than what a worker saw is stale and ignored; a REMOVE that arrives before
 * its own INSTALL records the generation as gone, so the late INSTALL is ignored.
 *
 * With one worker none of it exists: the calls go to the one context directly.
 * The control thread's reclaim of a dead application (d->reclaiming, which may
 * touch every worker's state under the lock; after the lock split: holding every
 * W[i]) removes directly too, keeping the per-worker generations.
 */
#include "daemon.h"

#include <errno.h>
#include <stdlib.h>

#define D_PGEN_MASK 0x7fffffffu /* 31 bits: the state word keeps gen << 1 | on */
#define D_PDELAY_MAX 16u

/* An INSTALL held back by the test knob IPKITD_INSTALL_DELAY_MS (a slow worker,
 * svc_w2_workers_ports: the LISTEN must not complete before it is applied). */
struct d_pdelay {
	uint64_t due, arg;
	uint32_t app_id, sock_id;
	int32_t type;
	unsigned from;
};

/* Index of (type, port) in d->pgen and d_wk.pst. */
static size_t d_pidx(int type, uint16_t port_be)
{
	return (size_t)(type == IPK_SVC_UDP) << 16 | port_be;
}

/* nw > 1: the generation tables. 0 or -1. Freed by d_pinst_fini. */
int d_pinst_init(struct d_daemon *d)
{
	unsigned i;
	const char *e = getenv("IPKITD_INSTALL_DELAY_MS");
	long ms = e ? strtol(e, NULL, 10) : 0;
	d->inst_delay_ns = ms > 0 && ms <= 1000 ? (uint64_t)ms * 1000000u : 0;
	d->pgen = (uint32_t *)calloc(2u << 16, sizeof *d->pgen);
	if (!d->pgen)
		return -1;
	for (i = 0; i < d->nw; i++) {
		d->wk[i].pst = (uint32_t *)calloc(2u << 16, sizeof *d->wk[i].pst);
		d->wk[i].pd = d->inst_delay_ns ? (struct d_pdelay *)calloc(D_PDELAY_MAX,
		                                                           sizeof *d->wk[i].pd)
		                               : NULL;
		if (!d->wk[i].pst || (d->inst_delay_ns && !d->wk[i].pd))
			return -1;
	}
	return 0;
}

void d_pinst_fini(struct d_daemon *d)
{
	unsigned i;
	for (i = 0; d->wk && i < d->nw; i++) {
		free(d->wk[i].pst);
		free(d->wk[i].pd);
		d->wk[i].pst = NULL;
		d->wk[i].pd = NULL;
		d->wk[i].npd = 0;
	}
	free(d->pgen);
	d->pgen = NULL;
}

static int d_core_add(struct ipk_ctx *ctx, int type, uint16_t port_be, uint16_t bl)
{
	return type == IPK_SVC_TCP ? ipk_tcp_listen(ctx, port_be, bl) : ipk_udp_bind(ctx, port_be);
}

static void d_core_del(struct ipk_ctx *ctx, int type, uint16_t port_be)
{
	if (type == IPK_SVC_TCP)
		ipk_tcp_unlisten(ctx, port_be);
	else
		ipk_udp_unbind(ctx, port_be);
}

/* gen - cur, in the 31-bit circle: > 0 newer, 0 the same, < 0 older. */
static int32_t d_gen_cmp(uint32_t gen, uint32_t cur)
{
	uint32_t x = (gen - cur) & D_PGEN_MASK;
	return x == 0 ? 0 : x < 0x40000000u ? 1 : -1;
}

/* On worker wk (its thread, or the control thread under the lock): generation
 * gen of the port installed in wk's context, unless wk saw it or a later one
 * already. 0 or the core's error. */
static int d_pst_add(struct d_daemon *d, unsigned wk, int type, uint16_t port_be, uint32_t gen,
                     uint16_t bl)
{
	uint32_t *p = &d->wk[wk].pst[d_pidx(type, port_be)];
	int rc;
	if (d_gen_cmp(gen, *p >> 1) <= 0)
		return 0; /* stale: removed already, or a later claim's */
	rc = d_core_add(d->wk[wk].ctx, type, port_be, bl);
	if (rc == IPK_EADDRINUSE && (*p & 1))
		rc = 0; /* the older generation's REMOVE has not arrived: it stays */
	*p = gen << 1 | (rc == 0);
	return rc;
}

/* On worker wk: generation gen of the port removed from wk's context (and an
 * older one still installed, whose REMOVE will be stale); a later
 * generation's state is left alone. */
static void d_pst_del(struct d_daemon *d, unsigned wk, int type, uint16_t port_be, uint32_t gen)
{
	uint32_t *p = &d->wk[wk].pst[d_pidx(type, port_be)];
	if (d_gen_cmp(gen, *p >> 1) < 0)
		return;
	if (*p & 1)
		d_core_del(d->wk[wk].ctx, type, port_be);
	*p = gen << 1;
}

/* One worker: the old all-or-none loop over the one context. */
static int d_pinst_one(struct d_daemon *d, int type, uint16_t port_be, uint16_t bl)
{
	return d_core_add(d->wk[0].ctx, type, port_be, bl);
}

static uint64_t d_pinst_arg(uint32_t gen, uint16_t port_be, uint16_t bl)
{
	return (uint64_t)gen | (uint64_t)port_be << 32 | (uint64_t)bl << 48;
}

/* On s's worker, under the port lock, when s is the port's first listener (TCP)
 * or binder (UDP): the port installed in every context. 0 (done), 1 (this
 * worker's context has it, the others were asked: with wait, s's operation
 * completes in d_pinst_answer, else it is not waited for: a UDP autobind's
 * early replies may be lost on a worker not there yet, as on a wire) or < 0
 * (nothing installed). */
int d_pinst_add(struct d_daemon *d, struct d_sock *s, uint16_t port_be, uint16_t bl, int wait)
{
	uint32_t *g, gen;
	unsigned i;
	int rc;
	if (d->nw == 1)
		return d_pinst_one(d, s->type, port_be, bl);
	g = &d->pgen[d_pidx(s->type, port_be)];
	*g = (*g + 1) & D_PGEN_MASK;
	if (*g == 0)
		*g = 1; /* 0 is "never seen" */
	gen = *g;
	rc = d_pst_add(d, s->wk, s->type, port_be, gen, bl);
	if (rc < 0)
		return rc;
	s->inst_gen = gen;
	s->inst_wait = 0;
	s->inst_rc = 0;
	for (i = 0; i < d->nw; i++) {
		if (i == s->wk)
			continue;
		if (d_msg_post(d, s->wk, i, D_MSG_INSTALL, s->app->id, wait ? s->id : 0,
		               d_pinst_arg(gen, port_be, bl), s->type, NULL) < 0) {
			s->inst_rc = -ENOMEM;
			continue;
		}
		s->inst_wait += wait != 0;
	}
	if (s->inst_wait == 0 && s->inst_rc < 0) {
		d_pinst_del(d, s, port_be);
		return s->inst_rc;
	}
	return 1;
}

/* s's port (the group's last listener or binder leaves) removed from every
 * context: on s's worker, its own directly and the others by message; in a
 * reclaim, all directly. */
void d_pinst_del(struct d_daemon *d, struct d_sock *s, uint16_t port_be)
{
	uint32_t gen;
	unsigned i;
	if (d->nw == 1) {
		d_core_del(d->wk[0].ctx, s->type, port_be);
		return;
	}
	gen = d->pgen[d_pidx(s->type, port_be)];
	if (d->reclaiming) {
		for (i = 0; i < d->nw; i++)
			d_pst_del(d, i, s->type, port_be, gen);
		return;
	}
	d_pst_del(d, s->wk, s->type, port_be, gen);
	for (i = 0; i < d->nw; i++)
		if (i != s->wk &&
		    d_msg_post(d, s->wk, i, D_MSG_REMOVE, 0, 0, d_pinst_arg(gen, port_be, 0), s->type,
		               NULL) < 0)
			d->wk[s->wk].msg_full++; /* out of memory: that context keeps it */
}

/* An INSTALL applied on wk, answered when it names a socket. */
static int d_pinst_apply(struct d_daemon *d, unsigned wk, unsigned from, uint32_t app_id,
                         uint32_t sock_id, uint64_t arg, int32_t type)
{
	uint32_t gen = (uint32_t)arg;
	uint16_t port_be = (uint16_t)(arg >> 32), bl = (uint16_t)(arg >> 48);
	int rc = d_pst_add(d, wk, type, port_be, gen, bl);
	if (sock_id == 0)
		return 0;
	return d_msg_post(d, wk, from, D_MSG_INSTALLED, app_id, sock_id, gen, rc, NULL);
}

/* Start of worker wk's drain: the held-back INSTALLs that are due (test knob). */
void d_pinst_tick(struct d_daemon *d, unsigned wk)
{
	struct d_wk *w = &d->wk[wk];
	uint64_t now;
	unsigned i, k = 0;
	if (w->npd == 0)
		return;
	now = d_now();
	for (i = 0; i < w->npd; i++) {
		struct d_pdelay *p = &w->pd[i];
		if (p->due <= now)
			d_pinst_apply(d, wk, p->from, p->app_id, p->sock_id, p->arg, p->type);
		else
			w->pd[k++] = *p;
	}
	w->npd = k;
}

/* On worker wk, from worker `from`: an INSTALL or a REMOVE (res: the type; arg:
 * generation, port, backlog). An INSTALL naming a socket is answered. A REMOVE
 * overtaking a held-back INSTALL is the reordering the generations handle. */
int d_pinst_msg(struct d_daemon *d, unsigned wk, unsigned from, uint32_t kind, uint32_t app_id,
                uint32_t sock_id, uint64_t arg, int32_t type)
{
	struct d_wk *w = &d->wk[wk];
	if (type != IPK_SVC_TCP && type != IPK_SVC_UDP)
		return -1;
	w->port_in++;
	if (kind == D_MSG_REMOVE) {
		d_pst_del(d, wk, type, (uint16_t)(arg >> 32), (uint32_t)arg);
		return 0;
	}
	if (d->inst_delay_ns && w->npd < D_PDELAY_MAX) {
		struct d_pdelay *p = &w->pd[w->npd++];
		p->due = d_now() + d->inst_delay_ns;
		p->arg = arg;
		p->app_id = app_id;
		p->sock_id = sock_id;
		p->type = type;
		p->from = from;
		return 0;
	}
	return d_pinst_apply(d, wk, from, app_id, sock_id, arg, type);
}

/* On s's worker: the installing is over (every answer in): the operation that
 * waited completes; on an error the port is taken out again (the socket is as
 * before its LISTEN or BIND). */
static void d_pinst_done(struct d_daemon *d, struct d_sock *s)
{
	int32_t rc = s->inst_rc;
	if (rc < 0 && s->state == D_LISTEN) {
		d_plock(d); /* pgen, and the circle's view of s */
		d_pinst_del(d, s, s->lport_be);
		s->listening = 0;
		d_pcache_bump(d);
		d_punlock(d);
		d_sock_unqueue(d, s);
		s->state = D_BOUND;
	} else if (rc < 0) {
		d_port_release(d, s);
		s->state = D_NEW;
	}
	d_op_done(s, s->inst_ud, rc);
}

/* On s's worker: s's LISTEN or BIND (user_data ud) waits for the answers. */
void d_pinst_wait(struct d_daemon *d, struct d_sock *s, uint64_t ud)
{
	s->inst_ud = ud;
	s->inflight++; /* its completion's CQ room, as for a queued operation */
	if (s->inst_wait == 0) /* no other worker to ask (an error already counted) */
		d_pinst_done(d, s);
}

/* On worker wk: an answer to one of its INSTALLs (res: the other worker's result;
 * arg: the generation). A socket gone, or an answer for an earlier install of
 * it, is not found (counted as gone by the caller). */
int d_pinst_answer(struct d_daemon *d, unsigned wk, uint32_t app_id, uint32_t sock_id,
                   uint64_t gen, int32_t res)
{
	struct d_app *a = d_app_of(d, app_id);
	unsigned o;
	struct d_sock *s = a ? d_sock_find_wk(a, sock_id, wk, &o) : NULL;
	if (!s || s->inst_wait == 0 || s->inst_gen != (uint32_t)gen)
		return -1;
	if (res < 0 && s->inst_rc == 0)
		s->inst_rc = res;
	if (--s->inst_wait == 0)
		d_pinst_done(d, s);
	return 0;
}
