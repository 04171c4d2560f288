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
 * socket gone. Ports held by several sockets (reuseport, families) always take
 * the lock: their choice moves per sender or per connection.
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

static void d_pref_of(struct d_pref *r, struct d_sock *s, unsigned wk)
{
	r->found = 1;
	r->s = s->wk == wk ? s : NULL;
	r->app = s->app;
	r->app_id = s->app->id;
	r->sock_id = s->id;
	r->wk = s->wk;
	r->prio = s->prio;
}

/* Under the port lock: remember s (the port's only socket) for worker w. */
static void d_pce_fill(struct d_daemon *d, struct d_pce *e, struct d_sock *s, unsigned wk,
                       uint16_t port_be, int type, unsigned fam)
{
	e->gen = __atomic_load_n(&d->port_gen, __ATOMIC_RELAXED); /* bumps are ours to see */
	e->port_be = port_be;
	e->type = (uint8_t)type;
	e->fam = (uint8_t)fam;
	e->s = s->wk == wk ? s : NULL;
	e->app = s->app;
	e->app_id = s->app->id;
	e->sock_id = s->id;
	e->wk = s->wk;
	e->prio = s->prio;
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
		r->found = 1;
		r->s = e->s;
		r->app = e->app;
		r->app_id = e->app_id;
		r->sock_id = e->sock_id;
		r->wk = e->wk;
		r->prio = e->prio;
		return 1;
	}
	d_plock(d);
	s = d_port_udp(d, port_be, from_ip_be, from_port_be, fam);
	if (s && s->ring) {
		d_pref_of(r, s, wk);
		if (e && s->port_next == s && s->id) /* alone: every sender reaches it */
			d_pce_fill(d, e, s, wk, port_be, IPK_SVC_UDP, fam);
	}
	d_punlock(d);
	if (e)
		w->pc_miss++;
	return r->found;
}

/* A SYN's listener when it is worker wk's own and alone on its port with room in
 * its backlog, from the cache; NULL: ask d_port_listener under the port lock
 * (which remembers the answer when it is such a listener, d_syn_remember). */
struct d_sock *d_syn_mine(struct d_daemon *d, unsigned wk, uint16_t port_be, unsigned fam)
{
	struct d_wk *w = &d->wk[wk];
	struct d_pce *e = d_pce_at(w, port_be, IPK_SVC_TCP, fam);
	struct d_sock *l;
	if (!d_pce_hit(d, e, port_be, IPK_SVC_TCP, fam) || !(l = e->s))
		return NULL;
	if (!l->listening || !d_acc_room(l) || !d_fam_ok(l, fam))
		return NULL;
	w->pc_hit++;
	return l;
}

/* Under the port lock, after d_port_listener found l for worker wk's SYN. */
void d_syn_remember(struct d_daemon *d, unsigned wk, struct d_sock *l, uint16_t port_be,
                    unsigned fam)
{
	struct d_wk *w = &d->wk[wk];
	struct d_pce *e = d_pce_at(w, port_be, IPK_SVC_TCP, fam);
	if (!e)
		return;
	w->pc_miss++;
	if (l && l->wk == wk && l->port_next == l && l->id)
		d_pce_fill(d, e, l, wk, port_be, IPK_SVC_TCP, fam);
}
