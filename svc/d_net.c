/*
 * ipkitd: operations on sockets and the core's events. The SQE here is always the
 * daemon's private copy (d_sock.c); buffer ranges are checked before any copy.
 */
#include "daemon.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The node's app is its worker (ipkitd.c). */
static struct d_wk *W(void *opaque) { return (struct d_wk *)ipk_node_app(opaque); }
static struct d_daemon *D(void *opaque) { return W(opaque)->d; }

/* A completion lifts the in-flight limit: if the SQ holds entries the daemon has
 * not taken (the limit held them back, whatever the CQ overflow did meanwhile),
 * the socket is looked at again. The tail is the app's and only a hint here: a
 * wrong one costs a visit, d_sock_consume checks it. */
static void d_sq_recheck(struct d_sock *s)
{
	if (s->ring && IPK_SVC_LOAD_RLX(&s->ring->sq_tail.v) != s->sq_head) {
		d_spw(s)->rescan = 1;
		d_act_push(s);
	}
}

/* An op that counted in flight completes. */
void d_op_done(struct d_sock *s, uint64_t user_data, int32_t res)
{
	d_sq_recheck(s);
	if (s->inflight)
		s->inflight--;
	d_post_res(s, user_data, res);
}

/* CONNECT succeeded: as d_op_done, the completion naming the local address
 * (svc/d_local.c), which getsockname reports after connect. */
void d_connect_done(struct d_sock *s, uint16_t lport_be)
{
	struct ipk_svc_cqe c;
	d_sq_recheck(s);
	if (s->inflight)
		s->inflight--;
	d_local_cqe(s, &c, s->conn_op.e.user_data, lport_be);
	d_post(s, &c);
}

static void d_bad(struct d_sock *s, const struct ipk_svc_sqe *e, int32_t res)
{
	D_STAT(s->app, bad_sqe, 1);
	d_post_res(s, e->user_data, res);
}

/* The application's address as the core's (issue 17, IPv6): AF_INET as it is;
 * AF_INET6 needs ipkitd --ip6 (else -EAFNOSUPPORT), and an IPv4-mapped one
 * (::ffff:a.b.c.d, RFC 4291 §2.5.5.2) is the IPv4 address it carries, as a Linux
 * dual-stack socket sends to it over IPv4. */
/* fe80::/10, link-local unicast (RFC 4291 §2.5.6) */
static int d_ll6(const uint8_t a[16])
{
	return a[0] == 0xfe && (a[1] & 0xc0) == 0x80;
}

static int d_addr(const struct d_daemon *d, const struct ipk_svc_addr *a, struct ipk_addr *o)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	memset(o, 0, sizeof *o);
	if (a->family == IPK_SVC_AF_INET) {
		o->family = IPK_AF_INET;
		memcpy(o->a, a->addr, 4);
		return 0;
	}
	if (a->family != IPK_SVC_AF_INET6)
		return -EINVAL;
	if (!memcmp(a->addr, mapped, 12)) {
		o->family = IPK_AF_INET;
		memcpy(o->a, a->addr + 12, 4);
		return 0;
	}
	if (!d->cfg.ip6)
		return -EAFNOSUPPORT;
	/* RFC 4007 §6: a link-local address names a link by its zone. ipkitd has
	 * one: 0 (unlike Linux, which wants the zone of a link-local bind or
	 * connect) or its index; any other zone is a link it does not have. */
	if (d_ll6(a->addr) && a->scope_id && a->scope_id != d->cfg.link_index)
		return -ENODEV;
	o->family = IPK_AF_INET6;
	memcpy(o->a, a->addr, 16);
	return 0;
}

void d_scope_fill(const struct d_daemon *d, struct ipk_svc_addr *a)
{
	a->scope_id = a->family == IPK_SVC_AF_INET6 && d_ll6(a->addr) ? d->cfg.link_index : 0;
}

static uint32_t d_addr_ip4(const struct ipk_addr *a)
{
	uint32_t ip;
	memcpy(&ip, a->a, 4);
	return ip;
}

static int d_addr_any6(const uint8_t a[16])
{
	static const uint8_t zero[16];
	return !memcmp(a, zero, 16);
}

/* Is a one of our IPv6 addresses (in use, or the configured static one while DAD
 * still runs)? */
static int d_addr_ours6(const struct d_sock *s, const uint8_t a[16]);

/* An IPv6 address that means this daemon (issue 17): ::1 (RFC 4291 §2.5.3), which
 * never reaches the core, or one of our addresses, which the core would drop as
 * a packet from itself; either joins two applications through d_loop.c. */
int d_loop6_addr(const struct d_sock *s, const uint8_t a[16])
{
	static const uint8_t lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	return !memcmp(a, lo, 16) || d_addr_ours6(s, a);
}

static int d_addr_ours6(const struct d_sock *s, const uint8_t a[16])
{
	uint8_t mine[8][16];
	int i, n = ipk_ip6_addrs(d_sctx(s), mine, 8);
	if (!d_addr_any6(s->app->d->cfg.ip6_addr) && !memcmp(a, s->app->d->cfg.ip6_addr, 16))
		return 1;
	for (i = 0; i < n; i++)
		if (!memcmp(a, mine[i], 16))
			return 1;
	return 0;
}

/* The families a BIND serves: AF_INET, or AF_INET6 with an IPv4-mapped address,
 * IPv4; AF_INET6 to :: both, as Linux's IPV6_V6ONLY 0, unless
 * IPK_SVC_SQE_F_V6ONLY; AF_INET6 to one of our addresses IPv6. */
static unsigned d_bind_fam(const struct ipk_svc_sqe *e, const struct ipk_addr *a)
{
	if (a->family == IPK_AF_INET)
		return D_FAM4;
	if (!d_addr_any6(a->a) || (e->flags & IPK_SVC_SQE_F_V6ONLY))
		return D_FAM6;
	return D_FAM4 | D_FAM6;
}

/* Does s (a listener or UDP socket) take traffic of this family? */
int d_fam_ok(const struct d_sock *s, unsigned fam)
{
	return s->fam == 0 ? fam == D_FAM4 : (s->fam & fam) != 0; /* 0: never bound,
	                                                        * IPv4 as before */
}

/* ------------------------------------------------------------ bind / listen */

static int d_bind(struct d_daemon *d, struct d_sock *s, const struct ipk_svc_sqe *e)
{
	struct ipk_addr a;
	int rc = d_addr(d, &e->addr, &a);
	if (rc < 0 && rc != -ENODEV)
		return rc;
	/* Linux's order: an IPv4 address not ours before "already bound"
	 * (inet_bind), an IPv6 one's zone and address after it (inet6_bind) */
	if (rc == 0 && a.family == IPK_AF_INET && d_addr_ip4(&a) != 0 &&
	    d_addr_ip4(&a) != d->cfg.ip4_be)
		return -EADDRNOTAVAIL;
	if (s->state != D_NEW)
		return -EINVAL;
	if (rc < 0) /* a zone we do not have */
		return rc;
	if (a.family == IPK_AF_INET6 && !d_addr_any6(a.a) && !d_addr_ours6(s, a.a))
		return -EADDRNOTAVAIL;
	s->reuse = (e->flags & IPK_SVC_SQE_F_REUSEPORT) != 0;
	s->inherit = (e->flags & IPK_SVC_SQE_F_INHERIT) != 0;
	s->fam = d_bind_fam(e, &a); /* before the claim: disjoint families share */
	rc = d_port_claim(d, s, e->addr.port_be, 1);
	if (rc >= 0) /* 1: completes when every worker has it (d_pinst.c) */
		s->state = D_BOUND;
	else
		s->fam = 0;
	return rc;
}

/* UDP send without bind: take a free port of the ephemeral range (bounded scan). */
static int d_udp_autobind(struct d_daemon *d, struct d_sock *s)
{
	unsigned i;
	d_plock(d); /* the cursor, with the claims it drives */
	for (i = 0; i < 16384; i++) {
		uint16_t p = (uint16_t)(49152u + (d->udp_next_eph++ % 16384u));
		if (d_port_claim(d, s, ipk_htons(p), 0) >= 0) {
			d_punlock(d);
			s->state = D_BOUND;
			return 0;
		}
	}
	d_punlock(d);
	return -EADDRINUSE;
}

static int d_listen_op(struct d_daemon *d, struct d_sock *s, const struct ipk_svc_sqe *e)
{
	uint32_t bl = e->arg ? e->arg : 128;
	int rc;
	if (s->type != IPK_SVC_TCP || s->state != D_BOUND)
		return -EINVAL;
	if (bl > D_BACKLOG_MAX)
		bl = D_BACKLOG_MAX;
	/* a shared port: the core listens once, for all its listeners */
	/* every worker's context listens: a SYN lands on the worker its flow hashes
	 * to, and the connection is accepted there. 1: this worker's context has it,
	 * the others were asked; the LISTEN completes with their answers (d_pinst.c) */
	d_plock(d); /* the circle: another LISTEN on the port, a SYN's walk */
	rc = d_port_listened(s) ? d_pinst_again(d, s, s->lport_be, (uint16_t)bl)
	                        : d_pinst_add(d, s, s->lport_be, (uint16_t)bl, 1);
	if (rc >= 0) {
		s->state = D_LISTEN;
		s->backlog = bl;
		s->listening = 1;
		d_pcache_bump(d);
	}
	d_punlock(d);
	return rc;
}

/* ------------------------------------------------------------ accept */

void d_acc_push(struct d_sock *l, struct d_sock *w)
{
	w->acc_next = NULL;
	if (l->acc_t)
		l->acc_t->acc_next = w;
	else
		l->acc_h = w;
	l->acc_t = w;
	d_acc_n_set(l, l->acc_n + 1);
}

/* Hand waiting connections to an armed multishot accept, while the listener's CQ
 * has room; each gets its rings sized by the accept's SQE. */
void d_accept_deliver(struct d_daemon *d, struct d_sock *l)
{
	while (l->acc_armed && l->acc_h && l->ovf_n == 0) {
		struct d_sock *w = l->acc_h;
		struct ipk_svc_cqe c;
		int rc;
		l->acc_h = w->acc_next;
		if (!l->acc_h)
			l->acc_t = NULL;
		d_acc_n_set(l, l->acc_n - 1);
		rc = d_sock_rings(w, l->acc_op.e.len, l->acc_op.e.arg2);
		if (rc == 0)
			rc = d_sock_attach(w);
		if (rc < 0) {
			/* no ring room or sizes refused: the connection is reset and the
			 * multishot ends with the reason; the app re-arms */
			if (w->wk != l->wk) { /* its connection is another worker's */
				d_sock_unring(w);
				d_acc_answer(d, l->wk, w, rc);
			} else {
				d_sock_destroy(d, w, 0);
			}
			d_acc_armed_set(l, 0);
			d_op_done(l, l->acc_op.e.user_data, rc);
			return;
		}
		memset(&c, 0, sizeof c);
		c.user_data = l->acc_op.e.user_data;
		c.flags = IPK_SVC_CQE_F_MORE;
		c.sock = w->id;
		c.ring_off = w->ring_off;
		c.addr = w->acc_addr; /* set at accept (or by d_loop_connect): the
		                       * connection may be another worker's */
		d_post(l, &c);
		if (w->wk != l->wk)
			d_acc_answer(d, l->wk, w, 0); /* its worker delivers what waited */
		else
			d_rx_deliver(d, w);
	}
}

static void d_accept_op(struct d_daemon *d, struct d_sock *s, const struct d_op *op)
{
	if (s->state != D_LISTEN) {
		d_bad(s, &op->e, -EINVAL);
		return;
	}
	if (s->acc_armed) {
		d_post_res(s, op->e.user_data, -EBUSY);
		return;
	}
	s->acc_op = *op;
	d_acc_armed_set(s, 1);
	s->inflight++;
	d_accept_deliver(d, s);
}

/* ------------------------------------------------------------ connect */

static void d_connect_op(struct d_daemon *d, struct d_sock *s, const struct d_op *op)
{
	struct ipk_addr a;
	uint32_t ip = 0;
	int rc = d_addr(d, &op->e.addr, &a);
	if (rc == -ENODEV) /* a zone we do not have: Linux's connect says so */
		rc = -ENETUNREACH;
	if (rc == 0 && (s->type != IPK_SVC_TCP || (s->state != D_NEW && s->state != D_BOUND)))
		rc = -EINVAL;
	if (rc == 0 && a.family == IPK_AF_INET)
		ip = d_addr_ip4(&a);
	if (rc == 0 && ((a.family == IPK_AF_INET ? ip == 0 : d_addr_any6(a.a)) ||
	                op->e.addr.port_be == 0))
		rc = -EINVAL;
	if (rc == 0 && s->fam && !d_fam_ok(s, a.family == IPK_AF_INET ? D_FAM4 : D_FAM6))
		rc = -EAFNOSUPPORT; /* bound for the other family only (V6ONLY) */
	if (rc < 0) {
		d_post_res(s, op->e.user_data, rc);
		return;
	}
	if (a.family == IPK_AF_INET && d_loop_addr(d, ip)) {
		d_loop_connect(d, s, op, NULL, ip);
		return;
	}
	if (a.family == IPK_AF_INET6 && d_loop6_addr(s, a.a)) { /* ::1 or ours */
		d_loop_connect(d, s, op, a.a, 0);
		return;
	}
	/* a bound port fixes the 4-tuple, so the worker its replies reach: another
	 * worker's socket from here on, connected by it (this worker hands it over
	 * after this turn, d_sock_handover, and touches it no more). An unbound one
	 * stays on its worker, whose core picks a port that hashes back to it
	 * (core/rss.c). IPv6 the same, from the source address the core will pick
	 * (no usable address yet: it stays, and the core refuses the connect). */
	if (d->nw > 1 && s->lport_be) {
		uint8_t src[16];
		unsigned to = s->wk;
		if (a.family == IPK_AF_INET)
			to = d_flow_worker(d, ip, op->e.addr.port_be, s->lport_be);
		else if (ipk_ip6_src_select(d_sctx(s), a.a, src))
			to = d_flow_worker6(d, a.a, op->e.addr.port_be, src, s->lport_be);
		if (to != s->wk) {
			s->conn_op = *op;
			s->move_to = to;
			s->move = 1;
			return;
		}
	}
	d_connect_start(d, s, op);
}

/* The CONNECT of s, on its (final) worker, to an address d_connect_op checked. */
void d_connect_start(struct d_daemon *d, struct d_sock *s, const struct d_op *op)
{
	struct ipk_conn *c = NULL;
	struct ipk_addr a;
	int rc;
	(void)d_addr(d, &op->e.addr, &a); /* checked by d_connect_op */
	/* in flight before the call: an outcome reported from inside it (tcp_closed)
	 * must find the op to complete */
	s->state = D_CONNECTING;
	s->conn_op = *op;
	s->inflight++;
	s->v6 = a.family == IPK_AF_INET6;
	if (a.family == IPK_AF_INET)
		rc = ipk_tcp_connect(d_sctx(s), d_addr_ip4(&a), op->e.addr.port_be, s->lport_be, s,
		                     &c, d_snow(s));
	else
		rc = ipk_tcp_connect_addr(d_sctx(s), &a, op->e.addr.port_be, s->lport_be, s, &c,
		                          d_snow(s));
	if (rc < 0) {
		s->state = s->lport_be ? D_BOUND : D_NEW;
		d_op_done(s, op->e.user_data, rc);
		return;
	}
	if (s->state == D_CONNECTING || s->state == D_CONNECTED)
		s->conn = c; /* not when it already closed inside the call */
}

/* ------------------------------------------------------------ send / recv */

/* Priority past submission (issue 17, the on-the-wire figure): what the daemon
 * writes into the stack leaves in order, so every byte a level-2 flood has in the
 * stack is a byte a level-0 request may wait behind, in the core's send queue and
 * then in the backend's. Like Linux's byte queue limits, a socket below level 0
 * may have at most --low-inflight bytes written and not yet acknowledged; level 0
 * has no limit. The rest stays in the application's region (its SEND not yet
 * complete) until tcp_acked frees room: throughput of a low level is then one
 * budget per round trip, which is the point. */
/* Limited: s is below level 0, the limit is on, and some socket of a higher level
 * is open (alone or among equals a level has nothing to yield to, and a long path
 * would only lose throughput). */
static int d_low_limited(const struct d_daemon *d, const struct d_sock *s)
{
	unsigned l;
	if (s->prio == 0 || d->cfg.low_inflight == 0)
		return 0;
	for (l = 0; l < s->prio && l < D_PRIO_MAX; l++)
		if (__atomic_load_n(&d->lvl_socks[l], __ATOMIC_RELAXED))
			return 1;
	return 0;
}

static uint32_t d_tx_room(const struct d_daemon *d, const struct d_sock *s, uint32_t want)
{
	uint32_t lim = d->cfg.low_inflight;
	if (!d_low_limited(d, s))
		return want;
	if (s->tx_held >= lim)
		return 0;
	return want < lim - s->tx_held ? want : lim - s->tx_held;
}

/* Account bytes written into the stack; the high-water mark is the app's to read
 * (ipk_svc_stats: low_held_max), what the test counts. */
/* A high-water mark in the app's region header (a statistic the app reads
 * relaxed): one app's sockets live on several workers (--workers), so the maximum
 * is kept with a compare-and-swap. The app can write its region too, so the retries
 * are bounded: a mark lost to a hostile app is the app's loss alone. */
static void d_region_max(uint64_t *max, uint64_t v)
{
	uint64_t cur = __atomic_load_n(max, __ATOMIC_RELAXED);
	for (int k = 0; k < 8 && v > cur; k++)
		if (__atomic_compare_exchange_n(max, &cur, v, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			return;
}

static void d_tx_held(struct d_sock *s, uint32_t n)
{
	s->tx_held += n;
	if (s->prio)
		d_region_max(&s->app->hdr->low_held_max, s->tx_held);
}

/* op is all in the stack. A copied SEND completes now; a zero-copy one when its
 * last descriptor is released (d_zc.c), so a SHUTDOWN behind it waits for that
 * (sends complete in order, and before the FIN's completion). */
static void d_tx_sent(struct d_sock *s, struct d_op *op)
{
	if (op->zc) {
		d_zc_close(op, 0);
	} else {
		D_STAT(s->app, sends_copied, 1);
		d_evfd_send_done(s, op->e.user_data, (int32_t)op->e.len);
	}
	d_opq_pop(&s->txq);
}

/* Move queued SENDs into the stack's send buffer (copying from the region, or
 * zero-copy: d_zc.c), in order; SHUTDOWN when it reaches the front. */
static void d_tx_pump1(struct d_daemon *d, struct d_sock *s);

void d_tx_pump(struct d_daemon *d, struct d_sock *s)
{
	if (s->fam_away)
		return; /* its SENDs wait until it holds the connection (d_family.c) */
	d_tx_pump1(d, s);
	if (s->fam_next)
		d_family_tx_idle(d, s);
}

static void d_tx_pump1(struct d_daemon *d, struct d_sock *s)
{
	struct d_op *op;
	uint32_t n;
	uint64_t now;
	if (s->xfer)
		return; /* accepted for another worker's listener, not answered yet */
	now = d_snow(s);
	if (s->peer) {
		d_loop_tx(d, s);
		return;
	}
	while ((op = d_opq_front(&s->txq)) != NULL) {
		int rc;
		if (!s->conn) {
			d_op_done(s, op->e.user_data, s->err ? s->err : -EPIPE);
			d_zc_close(op, 1);
			d_opq_pop(&s->txq);
			continue;
		}
		if (op->e.opcode == IPK_SVC_OP_SHUTDOWN) {
			if (s->zc_h) {
				d_zc_complete(s);
				if (s->zc_h)
					return; /* earlier sends not yet acknowledged: tcp_acked */
			}
			rc = ipk_tcp_close(d_sctx(s), s->conn, now);
			d_op_done(s, op->e.user_data, rc);
			d_opq_pop(&s->txq);
			continue;
		}
		n = d_tx_room(d, s, op->e.len - op->done);
		if (n == 0)
			return; /* its share is in the stack: tcp_acked brings us back */
		if (d->zc)
			rc = d_zc_write(d, s, op, n, now);
		else
			rc = ipk_tcp_write(d_sctx(s), s->conn, s->app->base + op->e.buf_off + op->done,
			                   n, now);
		if (rc < 0) {
			d_op_done(s, op->e.user_data, rc);
			d_zc_close(op, 1);
			d_opq_pop(&s->txq);
			continue;
		}
		op->done += (uint32_t)rc;
		d_tx_held(s, (uint32_t)rc);
		if (!d->zc)
			D_STAT(s->app, tx_copied, (uint64_t)rc);
		if (op->done < op->e.len) {
			if (rc > 0 && d->zc)
				continue; /* a zero-copy piece: room for the next? */
			return; /* send buffer full or share used: tcp_acked brings us back */
		}
		d_tx_sent(s, op);
	}
	d_zc_complete(s); /* a hold dropped last: outside the core's events too */
}

/* The receive side of the same limit: bytes in flight towards a low level wait
 * in the backend's receive queue ahead of a level-0 reply, and the peer may send
 * a whole window (tcp_rcvbuf, 256 KiB) of them. The window is tcp_rcvbuf minus the
 * bytes delivered and not released (RFC 9293 §3.8.6.2.2), so a socket below level
 * 0 keeps tcp_rcvbuf - low_inflight bytes unreleased after the app took them: its
 * window never opens beyond low_inflight. The right edge never moves back (we
 * only release later, never take back), and each byte the app takes beyond that
 * reserve is released at once, so the window cannot close for good. */
static void d_rx_release(struct d_daemon *d, struct d_sock *s, uint32_t n)
{
	uint32_t lim = d->cfg.low_inflight, keep = 0, r;
	s->rx_owed += n;
	if (d_low_limited(d, s) && d->rcvbuf > lim)
		keep = d->rcvbuf - lim;
	r = s->rx_unread > keep ? s->rx_unread - keep : 0;
	if (r > s->rx_owed)
		r = s->rx_owed;
	if (r == 0)
		return;
	s->rx_owed -= r;
	s->rx_unread -= r;
	ipk_tcp_recved(d_sctx(s), s->conn, r, d_snow(s));
}

/* The counter the test reads: the window the core has open to a low level's peer
 * (RFC 9293: rcv_adv - rcv_nxt), once the first windows (opened before any byte
 * could be kept back) are behind it. */
static void d_rx_window_seen(struct d_daemon *d, struct ipk_conn *c, struct d_sock *s,
                             uint32_t len)
{
	struct ipk_tcp_info ti;
	s->rx_total += len;
	if (!d_low_limited(d, s) || s->rx_total <= 2ull * d->rcvbuf || ipk_tcp_info(c, &ti) != 0)
		return;
	d_region_max(&s->app->hdr->low_rwnd_max, ti.rcv_wnd);
}

/* Copy held payload into one RECV's buffer; returns bytes. */
static uint32_t d_rx_copy(struct d_sock *s, const struct ipk_svc_sqe *e)
{
	uint8_t *dst = s->app->base + e->buf_off;
	uint32_t got = 0;
	while (s->rxh && got < e->len) {
		struct ipk_pkt *k = s->rxh;
		uint32_t n = k->len < e->len - got ? k->len : e->len - got;
		memcpy(dst + got, ipk_pkt_mtod(k), n);
		got += n;
		k->off += n;
		k->len -= n;
		if (k->len == 0) {
			s->rxh = (struct ipk_pkt *)k->user;
			if (!s->rxh)
				s->rxt = NULL;
			ipk_pkt_free(k);
		}
	}
	return got;
}

static void d_rx_tcp(struct d_daemon *d, struct d_sock *s)
{
	struct d_op *op;
	int took = 0;
	if (s->gb_wait)
		return; /* the bytes given back come first (d_family.c) */
	while ((op = d_opq_front(&s->rxq)) != NULL) {
		if (s->gb_len > s->gb_pos) {
			d_op_done(s, op->e.user_data, (int32_t)d_family_rx_copy(s, &op->e));
		} else if (s->rxp.n) {
			d_op_done(s, op->e.user_data, (int32_t)d_loop_rx_copy(s, &op->e));
			took = 1;
		} else if (s->rxh) {
			uint32_t n = d_rx_copy(s, &op->e);
			D_STAT(s->app, rx_copied, n);
			if (s->conn) /* the window reopens as the app takes the bytes */
				d_rx_release(d, s, n);
			d_op_done(s, op->e.user_data, (int32_t)n);
		} else if (s->rx_eof) {
			d_op_done(s, op->e.user_data, s->err);
		} else {
			break;
		}
		d_opq_pop(&s->rxq);
	}
	/* a paired sender may go on into the room we made; only now, with no op of
	 * ours half-done, since its pump delivers to us again (d_loop.c) */
	if (took && s->peer)
		d_tx_pump(d, s->peer);
}

static void d_rx_udp(struct d_sock *s)
{
	struct d_op *op;
	while ((op = d_opq_front(&s->rxq)) != NULL && s->dq_h) {
		struct d_dgram *g = s->dq_h;
		struct ipk_svc_cqe c;
		uint32_t n = g->len < op->e.len ? g->len : op->e.len;
		memcpy(s->app->base + op->e.buf_off, g->data, n);
		D_STAT(s->app, rx_copied, n);
		memset(&c, 0, sizeof c);
		c.user_data = op->e.user_data;
		c.res = (int32_t)n; /* truncated to the buffer, as recvfrom does */
		c.addr = g->from;
		d_sq_recheck(s);
		if (s->inflight)
			s->inflight--;
		d_post(s, &c);
		d_opq_pop(&s->rxq);
		s->dq_h = g->next;
		if (!s->dq_h)
			s->dq_t = NULL;
		s->dq_n--;
		s->dq_bytes -= g->len;
		free(g);
	}
}

void d_rx_deliver(struct d_daemon *d, struct d_sock *s)
{
	/* xfer first: while it is set the listener's worker writes s's rings
	 * (d_accept_deliver), so this worker must not read them yet */
	if (s->xfer || !s->ring)
		return; /* accepted, not handed over yet: data waits */
	if (s->type == IPK_SVC_TCP)
		d_rx_tcp(d, s);
	else
		d_rx_udp(s);
}

static void d_sendto_op(struct d_daemon *d, struct d_sock *s, const struct ipk_svc_sqe *e)
{
	struct ipk_addr a;
	int rc = d_addr(d, &e->addr, &a);
	if (rc == -ENODEV) /* a zone we do not have, as Linux's sendto */
		rc = -ENETUNREACH;
	if ((rc < 0 && rc != -ENETUNREACH) || s->type != IPK_SVC_UDP || e->len == 0 ||
	    !d_buf_ok(s->app, e)) {
		d_bad(s, e, rc < 0 ? rc : !d_buf_ok(s->app, e) ? -EFAULT : -EINVAL);
		return;
	}
	if (rc == 0 && s->fam && !d_fam_ok(s, a.family == IPK_AF_INET ? D_FAM4 : D_FAM6)) {
		d_post_res(s, e->user_data, -EAFNOSUPPORT); /* V6ONLY, or an IPv4 socket */
		return;
	}
	/* An unbound socket is bound first, also when the destination is then
	 * refused: Linux binds a UDP socket before it looks at where a datagram
	 * goes (inet_send_prepare), so a later bind() says EINVAL. */
	if (s->state == D_NEW) { /* an AF_INET6 socket to ::, an AF_INET one to 0.0.0.0 */
		int brc;
		s->fam = e->addr.family == IPK_SVC_AF_INET6 ? D_FAM4 | D_FAM6 : D_FAM4;
		if ((brc = d_udp_autobind(d, s)) < 0) {
			s->fam = 0;
			d_post_res(s, e->user_data, brc);
			return;
		}
	}
	if (rc < 0) { /* a zone we do not have */
		d_post_res(s, e->user_data, rc);
		return;
	}
	if (a.family == IPK_AF_INET && d_loop_addr(d, d_addr_ip4(&a))) {
		d_loop_sendto(d, s, e, NULL);
		return;
	}
	if (a.family == IPK_AF_INET6 && d_loop6_addr(s, a.a)) {
		d_loop_sendto(d, s, e, a.a);
		return;
	}
	if (a.family == IPK_AF_INET)
		rc = ipk_udp_sendto(d_sctx(s), s->lport_be, d_addr_ip4(&a), e->addr.port_be,
		                    s->app->base + e->buf_off, e->len, d_snow(s));
	else
		rc = ipk_udp_sendto_addr(d_sctx(s), s->lport_be, &a, e->addr.port_be,
		                         s->app->base + e->buf_off, e->len, d_snow(s));
	if (rc > 0)
		D_STAT(s->app, tx_copied, (uint64_t)rc);
	d_post_res(s, e->user_data, rc);
}

/* SEND, SHUTDOWN, RECV, RECVFROM: checked, then queued in order. */
static void d_queue_op(struct d_daemon *d, struct d_sock *s, const struct d_op *op)
{
	const struct ipk_svc_sqe *e = &op->e;
	int data = e->opcode != IPK_SVC_OP_SHUTDOWN;
	int tx = e->opcode == IPK_SVC_OP_SEND || e->opcode == IPK_SVC_OP_SHUTDOWN;
	int want = e->opcode == IPK_SVC_OP_RECVFROM ? IPK_SVC_UDP : IPK_SVC_TCP;
	if (s->type != want) {
		d_bad(s, e, -EOPNOTSUPP);
		return;
	}
	if (data && (e->len == 0 || !d_buf_ok(s->app, e))) {
		d_bad(s, e, e->len == 0 ? -EINVAL : -EFAULT);
		return;
	}
	if (want == IPK_SVC_TCP && s->state == D_CLOSED && tx) {
		/* as svc.h says: the connection ended first (reset or closed) */
		d_post_res(s, e->user_data, s->err ? s->err : -EPIPE);
		return;
	}
	if (want == IPK_SVC_TCP && s->state != D_CONNECTED && s->state != D_CLOSED) {
		d_post_res(s, e->user_data, -ENOTCONN);
		return;
	}
	if (d_opq_push(tx ? &s->txq : &s->rxq, op) < 0) {
		d_post_res(s, e->user_data, -ENOBUFS); /* not reached: bounded by inflight */
		return;
	}
	s->inflight++;
	if (tx && s->fam_away)
		d_family_want(d, s); /* a write takes the connection (d_family.c) */
	else if (tx)
		d_tx_pump(d, s);
	else
		d_rx_deliver(d, s);
}

void d_op_start(struct d_daemon *d, struct d_sock *s, const struct d_op *op)
{
	const struct ipk_svc_sqe *e = &op->e;
	int rc;
	switch (e->opcode) {
	case IPK_SVC_OP_NOP:
		d_post_res(s, e->user_data, 0);
		return;
	case IPK_SVC_OP_BIND:
		rc = d_bind(d, s, e);
		if (rc == -EINVAL || rc == -EAFNOSUPPORT)
			D_STAT(s->app, bad_sqe, 1);
		if (rc == 1)
			d_pinst_wait(d, s, e->user_data);
		else
			d_post_res(s, e->user_data, rc);
		return;
	case IPK_SVC_OP_LISTEN:
		rc = d_listen_op(d, s, e);
		if (rc == 1)
			d_pinst_wait(d, s, e->user_data);
		else
			d_post_res(s, e->user_data, rc);
		return;
	case IPK_SVC_OP_ACCEPT:
		d_accept_op(d, s, op);
		return;
	case IPK_SVC_OP_CONNECT:
		d_connect_op(d, s, op);
		return;
	case IPK_SVC_OP_SENDTO:
		d_sendto_op(d, s, e);
		return;
	case IPK_SVC_OP_SEND:
	case IPK_SVC_OP_SHUTDOWN:
	case IPK_SVC_OP_RECV:
	case IPK_SVC_OP_RECVFROM:
		d_queue_op(d, s, op);
		return;
	case IPK_SVC_OP_CLAIM:
	case IPK_SVC_OP_GIVEBACK:
		d_family_op(d, s, e);
		return;
	default: /* SOCKET and CLOSE belong on the control ring; the rest is garbage */
		d_bad(s, e, -EINVAL);
	}
}

/* ------------------------------------------------------------ core events */

/* A SYN: the port's listeners are known without the port lock while the ports
 * have not changed (d_pcache.c); else asked under it and remembered. 1: one takes
 * it; -1: the port has listeners for the family but every backlog is full, so
 * the SYN is dropped without an answer and the peer tries again (Linux drops a
 * SYN while the accept queue is full; a RST would fail the client's connect with
 * "connection refused" under a burst); 0: none (RST). */
static int d_syn_ok(struct d_daemon *d, unsigned wk, uint16_t port_be, unsigned fam)
{
	struct d_sock *l;
	struct d_pref r;
	int v;
	if (d_syn_ref(d, wk, port_be, fam, 0, &r))
		return 1;
	d_plock(d);
	l = d_port_listener(d, port_be, 0, fam);
	d_syn_remember(d, wk, port_be, fam);
	v = l ? 1 : d_port_listening(d, port_be, fam) ? -1 : 0;
	d_punlock(d);
	return v; /* -1: the core counts it as a full backlog (tcp_backlog) */
}

static int ev_accept(struct ipk_ctx *ctx, const struct ipk_tuple *t, void *opq)
{
	(void)ctx; /* an AF_INET6 V6ONLY listener alone: RST, as Linux */
	return d_syn_ok(D(opq), W(opq)->idx, t->local_port_be, D_FAM4);
}

/* The handshake's last ACK: no room in any listener's backlog (-1) drops it, the
 * SYN-ACK's retransmission asks again; a port with no listener left goes on
 * (ev_accepted resets it). */
static int ev_room(struct ipk_ctx *ctx, const struct ipk_atuple *t, void *opq)
{
	(void)ctx;
	return d_syn_ok(D(opq), W(opq)->idx, t->local_port_be,
	                t->peer.family == IPK_AF_INET6 ? D_FAM6 : D_FAM4) >= 0;
}

/* A SYN over IPv6 (issue 17): only a listener bound AF_INET6 takes it. */
static int ev_accept6(struct ipk_ctx *ctx, const struct ipk_atuple *t, void *opq)
{
	(void)ctx;
	return d_syn_ok(D(opq), W(opq)->idx, t->local_port_be, D_FAM6);
}

/* The accepted connection's peer, either family, for the ACCEPT completion, and
 * its local address (the ring header's `local`). */
static void d_acc_peer(const struct ipk_atuple *t, struct d_sock *w)
{
	memset(&w->acc_addr, 0, sizeof w->acc_addr);
	w->acc_addr.port_be = t->peer_port_be;
	w->v6 = t->peer.family == IPK_AF_INET6;
	w->acc_addr.family = w->v6 ? IPK_SVC_AF_INET6 : IPK_SVC_AF_INET;
	memcpy(w->acc_addr.addr, t->peer.a, w->v6 ? 16 : 4);
	d_scope_fill(w->app->d, &w->acc_addr);
	w->acc_local = w->acc_addr;
	w->acc_local.port_be = t->local_port_be;
	w->acc_local.scope_id = 0;
	memcpy(w->acc_local.addr, t->local.a, w->v6 ? 16 : 4);
	d_scope_fill(w->app->d, &w->acc_local);
}

static void *ev_accepted_l(struct ipk_ctx *ctx, struct ipk_conn *c, void *opq,
                           const struct ipk_atuple *tp, struct d_sock *l);

static void *ev_accepted_far(struct ipk_ctx *ctx, struct ipk_conn *c, void *opq,
                             const struct ipk_atuple *t, const struct d_pref *r);

/* The listener may be another worker's: then the port lock is held while it is
 * read (its close leaves the port under the lock before it is freed). A port's
 * listener (alone, or its group's turn) comes from the cache without it: this
 * worker's own as a socket, another worker's by ids (ev_accepted_far). */
static void *ev_accepted(struct ipk_ctx *ctx, struct ipk_conn *c, void *opq)
{
	struct d_daemon *d = D(opq);
	struct ipk_atuple t;
	struct d_sock *l;
	struct d_pref pr;
	unsigned fam;
	void *r;
	if (ipk_tcp_atuple(ctx, c, &t) < 0)
		return NULL;
	fam = t.peer.family == IPK_AF_INET6 ? D_FAM6 : D_FAM4;
	if (d_syn_ref(d, W(opq)->idx, t.local_port_be, fam, 1, &pr))
		return pr.s ? ev_accepted_l(ctx, c, opq, &t, pr.s)
		            : ev_accepted_far(ctx, c, opq, &t, &pr);
	d_plock(d);
	l = d_port_listener(d, t.local_port_be, 1, fam); /* the listeners take turns */
	d_syn_remember(d, W(opq)->idx, t.local_port_be, fam);
	r = ev_accepted_l(ctx, c, opq, &t, l);
	d_punlock(d);
	return r;
}

/* The socket of a connection this worker accepted for a listener of app at level
 * prio: held by this worker, connected, its peer's address filled in. NULL (the
 * connection aborted) when the application has no room. */
static struct d_sock *d_acc_new(struct ipk_ctx *ctx, struct ipk_conn *c, void *opq,
                                struct d_app *app, unsigned prio,
                                const struct ipk_atuple *tp)
{
	struct ipk_atuple t = *tp;
	struct d_sock *w = app ? d_sock_alloc(app, IPK_SVC_TCP) : NULL;
	if (!w) {
		ipk_tcp_abort(ctx, c, ipk_node_now(ipk_node_from(opq)));
		return NULL;
	}
	w->wk = W(opq)->idx; /* the worker that got the SYN holds the connection */
	__atomic_add_fetch(&W(opq)->socks, 1, __ATOMIC_RELAXED);
	W(opq)->accepted++;
	w->state = D_CONNECTED;
	d_acc_peer(&t, w);
	d_sock_level(w, prio); /* an accepted socket serves at its listener's level */
	w->conn = c;
	return w;
}

/* Undo d_acc_new when the hand-over to the listener's worker failed. */
static void *d_acc_drop(struct ipk_ctx *ctx, struct ipk_conn *c, void *opq,
                        struct d_sock *w)
{
	w->conn = NULL;
	d_sock_destroy(D(opq), w, 0);
	ipk_tcp_abort(ctx, c, ipk_node_now(ipk_node_from(opq)));
	return NULL;
}

static void *ev_accepted_l(struct ipk_ctx *ctx, struct ipk_conn *c, void *opq,
                           const struct ipk_atuple *tp, struct d_sock *l)
{
	struct d_daemon *d = D(opq);
	struct d_sock *w = d_acc_new(ctx, c, opq, l ? l->app : NULL, l ? l->prio : 0, tp);
	if (!w)
		return NULL;
	if (l->wk != w->wk) { /* the listener's queue is another worker's (d_msg.c) */
		if (d_acc_cross(d, l, w) < 0)
			return d_acc_drop(ctx, c, opq, w);
		return w;
	}
	d_acc_push(l, w);
	d_accept_deliver(d, l);
	return w;
}

/* A connection for another worker's listener known by ids (d_pcache.c): made
 * here without reading the listener (its application is alive while this
 * worker's lock is held), sent over as any accept across workers; a listener
 * gone or full meanwhile answers with a reset (d_msg.c d_msg_accept). */
static void *ev_accepted_far(struct ipk_ctx *ctx, struct ipk_conn *c, void *opq,
                             const struct ipk_atuple *t, const struct d_pref *r)
{
	struct d_sock *w = d_acc_new(ctx, c, opq, r->app, r->prio, t);
	if (!w)
		return NULL;
	if (d_acc_cross_id(D(opq), r->wk, r->app_id, r->sock_id, w) < 0)
		return d_acc_drop(ctx, c, opq, w);
	return w;
}

static void ev_connected(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *opq)
{
	struct d_sock *s = (struct d_sock *)user;
	if (!s) {
		ipk_tcp_abort(ctx, c, ipk_node_now(ipk_node_from(opq)));
		return;
	}
	W(opq)->connected++;
	s->state = D_CONNECTED;
	d_connect_done(s, d_local_port(c));
}

static void ev_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                       uint32_t off, uint32_t len, void *opq)
{
	struct d_sock *s = (struct d_sock *)user;
	struct d_daemon *d = D(opq);
	struct ipk_pkt *k;
	if (!s) {
		/* closed by the app: data after close gets a reset, as in Linux; with
		 * --graceful-close it is read and dropped, so the FIN ends the stream */
		if (pkt && d->cfg.graceful)
			ipk_tcp_recved(ctx, c, len, ipk_node_now(ipk_node_from(opq)));
		else if (pkt)
			ipk_tcp_abort(ctx, c, ipk_node_now(ipk_node_from(opq)));
		return;
	}
	if (!pkt) {
		s->rx_eof = 1;
		d_rx_deliver(d, s);
		return;
	}
	k = ipk_pkt_clone((struct ipk_pkt *)pkt);
	if (!k) { /* cannot hold it: losing bytes of a stream is not an option */
		s->err = -ENOMEM;
		ipk_tcp_abort(ctx, c, ipk_node_now(ipk_node_from(opq)));
		return;
	}
	s->rx_unread += len;
	d_rx_window_seen(d, c, s, len);
	k->off += off;
	k->len = len;
	k->next = NULL;
	k->user = NULL;
	if (s->rxt)
		s->rxt->user = k;
	else
		s->rxh = k;
	s->rxt = k;
	d_rx_deliver(d, s);
}

static void ev_acked(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, uint32_t bytes,
                     void *opq)
{
	(void)ctx;
	(void)c;
	if (user) {
		struct d_sock *s = (struct d_sock *)user;
		s->tx_held -= bytes < s->tx_held ? bytes : s->tx_held; /* FIN: clamp */
		d_zc_complete(s); /* released by this acknowledgement: sent */
		d_tx_pump(D(opq), s);
	}
}

static int d_close_err(enum ipk_close_reason why)
{
	switch (why) {
	case IPK_CLOSE_NORMAL: return 0;
	case IPK_CLOSE_RESET: return -ECONNRESET;
	case IPK_CLOSE_REFUSED: return -ECONNREFUSED;
	case IPK_CLOSE_TIMEOUT: return -ETIMEDOUT;
	case IPK_CLOSE_UNREACH: return -EHOSTUNREACH;
	default: return -ECONNABORTED;
	}
}

static void ev_closed(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
                      enum ipk_close_reason why, void *opq)
{
	struct d_sock *s = (struct d_sock *)user;
	struct d_daemon *d = D(opq);
	(void)ctx;
	(void)c;
	if (!s)
		return;
	s->conn = NULL;
	if (!s->err)
		s->err = d_close_err(why);
	s->rx_eof = 1;
	if (s->state == D_CONNECTING)
		d_op_done(s, s->conn_op.e.user_data, s->err ? s->err : -ECONNABORTED);
	s->state = D_CLOSED;
	d_zc_complete(s); /* released with the queues: failed, s->err */
	d_tx_pump(d, s);
	d_rx_deliver(d, s);
}

/* A datagram for a socket of another worker (the steering sends a frame to the
 * worker of its flow, the port's socket may be elsewhere): copied here, queued
 * there as a message (d_msg.c) naming the socket by ids; a full ring loses it,
 * like a full queue. */
static void d_udp_other(struct ipk_ctx *ctx, struct d_wk *w, const struct d_pref *r,
                        struct d_dgram *g, void *pkt, uint32_t off, uint32_t len)
{
	g->len = ipk_pkt_copy(ctx, pkt, off, g->data, len);
	if (d_msg_send_id(w->d, w->idx, r->wk, r->app_id, r->sock_id, D_MSG_UDP, g) < 0) {
		w->msg_full++;
		free(g);
	}
}

/* Either family's datagram for port_be: its socket (d_udp_ref: without the port
 * lock while the ports have not changed), then queued here or sent over. */
static void d_udp_in(struct ipk_ctx *ctx, void *opq, uint16_t port_be, uint32_t from_key,
                     uint16_t from_port_be, unsigned fam, const struct ipk_svc_addr *from,
                     void *pkt, uint32_t off, uint32_t len)
{
	struct d_pref r;
	struct d_dgram *g;
	if (!d_udp_ref(D(opq), W(opq)->idx, port_be, from_key, from_port_be, fam, &r))
		return;
	g = r.s ? d_dgram_new(r.s, len) : d_dgram_alloc(len);
	if (!g)
		return;
	W(opq)->udp_rx++;
	g->from = *from;
	if (!r.s) {
		d_udp_other(ctx, W(opq), &r, g, pkt, off, len);
		return;
	}
	g->len = ipk_pkt_copy(ctx, pkt, off, g->data, len);
	d_dgram_push(D(opq), r.s, g);
}

static void ev_udp(struct ipk_ctx *ctx, const struct ipk_tuple *t, void *pkt, uint32_t off,
                   uint32_t len, void *opq)
{
	struct ipk_svc_addr from;
	memset(&from, 0, sizeof from);
	from.family = IPK_SVC_AF_INET;
	from.port_be = t->peer_port_be;
	memcpy(from.addr, &t->peer_ip4_be, 4);
	d_udp_in(ctx, opq, t->local_port_be, t->peer_ip4_be, t->peer_port_be, D_FAM4, &from, pkt,
	         off, len);
}

/* A UDP datagram over IPv6 (issue 17): for a socket bound AF_INET6 only. */
static void ev_udp6(struct ipk_ctx *ctx, const struct ipk_atuple *t, void *pkt, uint32_t off,
                    uint32_t len, void *opq)
{
	struct ipk_svc_addr from;
	uint32_t h[4];
	memcpy(h, t->peer.a, 16); /* the sender's address folded: the group's choice */
	memset(&from, 0, sizeof from);
	from.family = IPK_SVC_AF_INET6;
	from.port_be = t->peer_port_be;
	memcpy(from.addr, t->peer.a, 16);
	d_scope_fill(D(opq), &from);
	d_udp_in(ctx, opq, t->local_port_be, h[0] ^ h[1] ^ h[2] ^ h[3], t->peer_port_be, D_FAM6,
	         &from, pkt, off, len);
}

const struct ipk_ops d_events = {
	.tcp_accept6 = ev_accept6,
	.udp_recv6 = ev_udp6,
	.tcp_accept = ev_accept,
	.tcp_room = ev_room,
	.tcp_accepted = ev_accepted,
	.tcp_connected = ev_connected,
	.tcp_payload = ev_payload,
	.tcp_acked = ev_acked,
	.tcp_closed = ev_closed,
	.udp_recv = ev_udp,
};
