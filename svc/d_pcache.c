/*
 * ipkitd --workers N: port lookups without the port lock (issue 17's lock split).
 * Every datagram asks which socket holds its port and every SYN which listener;
 * the tables are shared by the workers and change only at BIND, LISTEN and
 * close. So each worker remembers its answers for ports held by one socket, and
 * an answer stays valid while the daemon's port generation (d->port_gen) has not
 * moved: every change under the port lock moves it (release), a lookup loads it
 * (acquire) and takes the lock only when its entry is older.
 *
 * What an entry may hold, so that using it never reads another worker's socket:
 *  - the worker's own socket (a UDP socket, a listener): only its owner frees it,
 *    after leaving the port, which moves the generation in the owner's own
 *    thread, so the owner never uses a freed entry;
 *  - another worker's socket by ids (application id, socket id, worker): the
 *    datagram travels as a message, which its receiver checks (d_msg.c).
 * A lookup that races a change on another worker may use the answer from just
 * before it (a datagram or SYN arriving a moment earlier would have), never a
 * socket gone.
 *
 * A group is chosen from the list the same way the slow path chooses under the
 * lock, so the distribution does not depend on which path answered: a datagram
 * by the hash of its sender (d_port_udp_pick, the same index into the same
 * order), a connection by the port's turn (d_port_turn, one counter shared by
 * the workers and by the slow path), skipping the worker's own listeners with a
 * full backlog (another worker's backlog is checked by its owner when the
 * accepted connection arrives, as for a port of one). Fork families (a listener
 * inherited over fork, d_family.c) are not remembered: their choice prefers the
 * process waiting in ACCEPT, which only the lock may read.
 */
#include "daemon.h"

/* After a change to the port tables or to what their lookups read (a listener's
 * state): under the port lock. With one worker nothing is cached. */
void d_pcache_bump(struct d_daemon *d)
{
	if (d->nw > 1)
		__atomic_add_fetch(&d->port_gen, 1, __ATOMIC_RELEASE);
}

static struct d_pce *d_pce_at(struct d_wk *w, uint16_t port_be, int type, unsigned fam)
{
	uint32_t k = (uint32_t)ipk_ntohs(port_be) * 4u + (uint32_t)(type == IPK_SVC_UDP) * 2u +
	             (fam == D_FAM6);
	return w->pc ? &w->pc[k % D_PCACHE] : NULL;
}

static int d_pce_hit(struct d_daemon *d, const struct d_pce *e, uint16_t port_be, int type,
                     unsigned fam)
{
	return e && e->gen == __atomic_load_n(&d->port_gen, __ATOMIC_ACQUIRE) &&
	       e->port_be == port_be && e->type == type && e->fam == fam;
}

static void d_pmem_fill(struct d_pmem *m, struct d_sock *s, unsigned wk)
{
	m->s = s->wk == wk ? s : NULL;
	m->app = s->app;
	m->app_id = s->app->id;
	m->sock_id = s->id;
	m->wk = s->wk;
	m->prio = s->prio;
}

static int d_pref_from(struct d_pref *r, const struct d_pmem *m)
{
	r->found = 1;
	r->s = m->s;
	r->app = m->app;
	r->app_id = m->app_id;
	r->sock_id = m->sock_id;
	r->wk = m->wk;
	r->prio = m->prio;
	return 1;
}

/* Under the port lock: remember for worker wk the sockets of the port's group
 * that a lookup of family fam chooses from, when every one can be named (an id;
 * for UDP a ring to deliver into). */
static void d_pce_fill(struct d_daemon *d, struct d_pce *e, unsigned wk, uint16_t port_be,
                       int type, unsigned fam)
{
	struct d_sock *g[D_PCE_MEMB];
	int n = d_port_members(d, type, port_be, fam, g, D_PCE_MEMB), i;
	if (!e || n <= 0)
		return;
	for (i = 0; i < n; i++)
		if (!g[i]->id || (type == IPK_SVC_UDP && !g[i]->ring))
			return;
	for (i = 0; i < n; i++)
		d_pmem_fill(&e->m[i], g[i], wk);
	e->n = (unsigned)n;
	e->gen = __atomic_load_n(&d->port_gen, __ATOMIC_RELAXED); /* bumps are ours to see */
	e->port_be = port_be;
	e->type = (uint8_t)type;
	e->fam = (uint8_t)fam;
}

/* The UDP socket a datagram of family fam from from_ip:from_port to port_be goes
 * to (d_port_udp's choice), as a reference worker wk may use: 1, or 0 for none. */
int d_udp_ref(struct d_daemon *d, unsigned wk, uint16_t port_be, uint32_t from_ip_be,
              uint16_t from_port_be, unsigned fam, struct d_pref *r)
{
	struct d_wk *w = &d->wk[wk];
	struct d_pce *e = d_pce_at(w, port_be, IPK_SVC_UDP, fam);
	struct d_sock *s;
	r->found = 0;
	r->s = NULL;
	if (d_pce_hit(d, e, port_be, IPK_SVC_UDP, fam)) {
		w->pc_hit++;
		return d_pref_from(r, &e->m[d_port_udp_pick(from_ip_be, from_port_be, e->n)]);
	}
	d_plock(d);
	s = d_port_udp(d, port_be, from_ip_be, from_port_be, fam);
	if (s && s->ring) {
		struct d_pmem m;
		d_pmem_fill(&m, s, wk);
		d_pref_from(r, &m);
		d_pce_fill(d, e, wk, port_be, IPK_SVC_UDP, fam);
	}
	d_punlock(d);
	if (e)
		w->pc_miss++;
	return r->found;
}

/* A SYN's listener from worker wk's cache: 1 with r filled (r->s: the worker's
 * own listener, with room in its backlog; else another worker's by ids, whose
 * backlog its own worker checks when the accepted connection arrives, d_msg.c
 * d_msg_accept); 0: ask d_port_listener under the port lock (which remembers
 * the answer, d_syn_remember). take: the connection is taken (the group's turn
 * moves on); else only asked whether one would take it. */
int d_syn_ref(struct d_daemon *d, unsigned wk, uint16_t port_be, unsigned fam, int take,
              struct d_pref *r)
{
	struct d_wk *w = &d->wk[wk];
	struct d_pce *e = d_pce_at(w, port_be, IPK_SVC_TCP, fam);
	uint32_t t, i;
	if (!d_pce_hit(d, e, port_be, IPK_SVC_TCP, fam))
		return 0;
	t = e->n > 1 ? d_port_turn(d, port_be, take) : 0;
	for (i = 0; i < e->n; i++) {
		const struct d_pmem *m = &e->m[(t + i) % e->n];
		struct d_sock *l = m->s;
		if (l && (!l->listening || !d_acc_room(l) || !d_fam_ok(l, fam)))
			continue;
		w->pc_hit++;
		return d_pref_from(r, m);
	}
	return 0;
}

/* Under the port lock, after d_port_listener answered worker wk's SYN. */
void d_syn_remember(struct d_daemon *d, unsigned wk, uint16_t port_be, unsigned fam)
{
	struct d_wk *w = &d->wk[wk];
	struct d_pce *e = d_pce_at(w, port_be, IPK_SVC_TCP, fam);
	if (!e)
		return;
	w->pc_miss++;
	d_pce_fill(d, e, wk, port_be, IPK_SVC_TCP, fam);
}
