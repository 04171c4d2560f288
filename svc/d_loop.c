/*
 * ipkitd: applications of one daemon talking to each other (svc/README.md,
 * "Between applications").
 *
 * The core drops a datagram from its own address (a "land" packet, internal.h
 * ipk_ip4_src_check), and a frame looped back below the core would also have to
 * undo TSO and checksum offloads the backend was promised. Both ends of such a
 * connection are sockets of this daemon, so the daemon joins them directly: a
 * CONNECT to the node's own address (or 127/8) finds the listener in the port
 * table, both sockets name each other (d_sock.peer) and each direction is a
 * bounded (64 KiB), daemon-private byte pipe, allocated only while it holds
 * bytes. No frame, no core connection, no recursion:
 * a send copies from the sender's region into the receiver's pipe, a receive
 * from the pipe into the receiver's region (both copies counted), and a full
 * pipe holds the sender's SEND until the receiver takes bytes (back-pressure,
 * like a closed window). UDP to the own address goes straight to the bound
 * socket's datagram queue, under the same limits as datagrams from the wire.
 */
#include "daemon.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The node's own address, or loopback 127/8 (which never reaches the core). */
int d_loop_addr(const struct d_daemon *d, uint32_t ip4_be)
{
	return ip4_be == d->cfg.ip4_be || (ipk_ntohl(ip4_be) >> 24) == 127;
}

/* ------------------------------------------------------------ pipes */

static uint32_t d_pipe_put(struct d_pipe *p, const uint8_t *src, uint32_t len)
{
	uint32_t room = D_PIPE_BYTES - p->n, done = 0;
	if (len > room)
		len = room;
	while (done < len) {
		uint32_t at = (p->head + p->n) % D_PIPE_BYTES;
		uint32_t k = D_PIPE_BYTES - at < len - done ? D_PIPE_BYTES - at : len - done;
		memcpy(p->buf + at, src + done, k);
		p->n += k;
		done += k;
	}
	return done;
}

static uint32_t d_pipe_get(struct d_pipe *p, uint8_t *dst, uint32_t len)
{
	uint32_t done = 0;
	if (len > p->n)
		len = p->n;
	while (done < len) {
		uint32_t k = D_PIPE_BYTES - p->head < len - done ? D_PIPE_BYTES - p->head : len - done;
		memcpy(dst + done, p->buf + p->head, k);
		p->head = (p->head + k) % D_PIPE_BYTES;
		p->n -= k;
		done += k;
	}
	if (p->n == 0) { /* an idle connection holds no memory */
		free(p->buf);
		p->buf = NULL;
		p->head = 0;
	}
	return done;
}

/* ------------------------------------------------------------ connect */

/* A free-looking port for the connecting end: only reported to the acceptor (no
 * frame carries it), taken from the ephemeral range, skipping ports the port
 * table holds so the pair's addresses stay unique among this daemon's sockets. */
static uint16_t d_loop_port(struct d_daemon *d, struct d_sock *s)
{
	unsigned i;
	if (s->lport_be)
		return s->lport_be;
	for (i = 0; i < 16384; i++) {
		uint16_t p = ipk_htons((uint16_t)(49152u + (d->loop_next_eph++ % 16384u)));
		if (!d->tcp_port[p])
			return p;
	}
	return ipk_htons(49152);
}

/* CONNECT to our own address: refused without a listener or with its backlog
 * full; otherwise an accepted socket for the listener's application is made,
 * paired with s, and queued for the listener's (multishot) accept. */
static void d_loop_connect_locked(struct d_daemon *d, struct d_sock *s, const struct d_op *op,
                                  const uint8_t *addr6, uint32_t ip4_be);

/* The listener may be another worker's, and the ephemeral cursor is shared: under
 * the port lock (as a SYN from the wire, d_net.c ev_accepted). addr6: the IPv6
 * address the CONNECT named (::1 or ours), NULL for IPv4. */
void d_loop_connect(struct d_daemon *d, struct d_sock *s, const struct d_op *op,
                    const uint8_t *addr6, uint32_t ip4_be)
{
	d_plock(d);
	d_loop_connect_locked(d, s, op, addr6, ip4_be);
	d_punlock(d);
}

/* What the listener's accept reports as its peer, and the connector's CONNECT as
 * its own address: the address the CONNECT named, as both ends are this host
 * (over IPv4 the daemon's address even for 127/8, as before). The accepted
 * socket's own address is the one the CONNECT named (127.0.0.1 too, as the
 * connector's peer name is), at the listener's port. */
static void d_loop_addr_set(const struct d_daemon *d, struct d_sock *w, const uint8_t *addr6,
                            uint32_t ip4_be)
{
	memset(&w->acc_addr, 0, sizeof w->acc_addr);
	w->acc_addr.port_be = w->peer_port_be;
	if (addr6) {
		w->acc_addr.family = IPK_SVC_AF_INET6;
		memcpy(w->acc_addr.addr, addr6, 16);
		d_scope_fill(d, &w->acc_addr);
	} else {
		w->acc_addr.family = IPK_SVC_AF_INET;
		memcpy(w->acc_addr.addr, &d->cfg.ip4_be, 4);
	}
	w->acc_local = w->acc_addr;
	w->acc_local.port_be = w->lport_be;
	if (!addr6)
		memcpy(w->acc_local.addr, &ip4_be, 4);
}

static void d_loop_connect_locked(struct d_daemon *d, struct d_sock *s, const struct d_op *op,
                                  const uint8_t *addr6, uint32_t ip4_be)
{
	struct d_sock *l = d_port_listener(d, op->e.addr.port_be, 1, addr6 ? D_FAM6 : D_FAM4), *w;
	if (!l) {
		struct ipk_svc_cqe c;
		memset(&c, 0, sizeof c);
		c.user_data = op->e.user_data;
		c.res = -ECONNREFUSED;
		/* listeners there, none with room (full, or a fork family none of whose
		 * processes waits yet): said, so the shim does not take the kernel's
		 * loopback instead (its own listeners answer there too) */
		if (d_port_listening(d, op->e.addr.port_be, addr6 ? D_FAM6 : D_FAM4))
			c.flags = IPK_SVC_CQE_F_NOROOM;
		d_post(s, &c);
		return;
	}
	w = d_sock_alloc(l->app, IPK_SVC_TCP);
	if (!w) {
		d_post_res(s, op->e.user_data, -ENOMEM);
		return;
	}
	/* on the connecting socket's worker: both ends of a pipe are one worker's,
	 * so a send, a receive and a close touch only that worker's sockets. The
	 * listener may be another worker's: then the accept crosses as for a
	 * connection from the wire (d_msg.c d_acc_cross) */
	w->wk = s->wk;
	__atomic_add_fetch(&d->wk[w->wk].socks, 1, __ATOMIC_RELAXED);
	s->peer = w;
	w->peer = s;
	s->state = w->state = D_CONNECTED;
	s->rx_eof = w->rx_eof = 0;
	d_sock_level(w, l->prio); /* an accepted socket serves at its listener's level */
	w->lport_be = l->lport_be;
	w->peer_port_be = d_loop_port(d, s);
	s->peer_port_be = l->lport_be;
	s->v6 = w->v6 = addr6 != NULL; /* d_local_cqe names the IPv6 address */
	d_loop_addr_set(d, w, addr6, ip4_be); /* what the listener's accept reports */
	__atomic_add_fetch(&d->loop_conns, 1, __ATOMIC_RELAXED); /* any worker */
	d_local_post(s, op->e.user_data, w->peer_port_be); /* names s's local address */
	if (l->wk == w->wk) {
		d_acc_push(l, w);
		d_accept_deliver(d, l);
	} else if (d_acc_cross(d, l, w) < 0) {
		d_sock_destroy(d, w, 0); /* out of memory: s sees a reset */
	}
}

/* ------------------------------------------------------------ data */

/* Queued SENDs of s into the peer's pipe, in order; SHUTDOWN at the front ends
 * the peer's stream after the bytes before it. */
static void d_loop_tx_once(struct d_daemon *d, struct d_sock *s)
{
	struct d_op *op;
	while (s->peer && (op = d_opq_front(&s->txq)) != NULL) {
		struct d_sock *p = s->peer;
		uint32_t n;
		if (op->e.opcode == IPK_SVC_OP_SHUTDOWN) {
			p->rx_eof = 1;
			d_op_done(s, op->e.user_data, 0);
			d_opq_pop(&s->txq);
			d_rx_deliver(d, p);
			continue;
		}
		if (!p->rxp.buf && !(p->rxp.buf = (uint8_t *)malloc(D_PIPE_BYTES))) {
			d_op_done(s, op->e.user_data, -ENOMEM);
			d_opq_pop(&s->txq);
			continue;
		}
		if (p->wk != s->wk)
			d->wk[s->wk].loop_cross++; /* never: both ends are one worker's */
		n = d_pipe_put(&p->rxp, s->app->base + op->e.buf_off + op->done,
		               op->e.len - op->done);
		op->done += n;
		D_STAT(s->app, tx_copied, n);
		if (n)
			d_rx_deliver(d, p); /* may take bytes and ask for more (guarded) */
		if (op->done < op->e.len) {
			if (p->rxp.n < D_PIPE_BYTES)
				continue; /* the receiver made room meanwhile */
			return;   /* pipe full: the receiver's next RECV pumps us */
		}
		d_evfd_send_done(s, op->e.user_data, (int32_t)op->e.len);
		d_opq_pop(&s->txq);
	}
}

/* d_tx_pump for a paired socket. The receiver's d_rx_deliver, called from here,
 * pumps its peer (this socket) again when it freed room: that inner call only
 * marks pump_again, so the work stays in this loop and nothing recurses. */
void d_loop_tx(struct d_daemon *d, struct d_sock *s)
{
	if (s->pumping) {
		s->pump_again = 1;
		return;
	}
	s->pumping = 1;
	do {
		s->pump_again = 0;
		d_loop_tx_once(d, s);
	} while (s->pump_again && s->peer);
	s->pumping = 0;
	if (!s->peer && d_opq_front(&s->txq))
		d_tx_pump(d, s); /* unpaired meanwhile: the rest fails as on a closed socket */
}

/* One RECV from s's pipe; returns bytes. The caller (d_rx_tcp) pumps the sender
 * once its own queue is settled. */
uint32_t d_loop_rx_copy(struct d_sock *s, const struct ipk_svc_sqe *e)
{
	uint32_t n = d_pipe_get(&s->rxp, s->app->base + e->buf_off, e->len);
	D_STAT(s->app, rx_copied, n);
	return n;
}

/* s goes away: its peer reads what is left in its pipe, then the end of the
 * stream (graceful) or -ECONNRESET; its later sends fail with -EPIPE. */
void d_loop_unpair(struct d_daemon *d, struct d_sock *s, int graceful)
{
	struct d_sock *p = s->peer;
	free(s->rxp.buf);
	s->rxp.buf = NULL;
	s->rxp.n = 0;
	s->peer = NULL;
	if (!p)
		return;
	p->peer = NULL;
	p->rx_eof = 1;
	if (!graceful && !p->err)
		p->err = -ECONNRESET;
	p->state = D_CLOSED;
	d_tx_pump(d, p);
	d_rx_deliver(d, p);
}

/* ------------------------------------------------------------ UDP */

/* Room in s's datagram queue for len more bytes: 0, or -1 (queue limits
 * reached, counted): the same limits for the wire and for other applications. */
int d_dgram_room(struct d_sock *s, uint32_t len)
{
	if (s->dq_n >= D_UDP_QMAX || s->dq_bytes + len > D_UDP_QBYTES) {
		s->udp_drops++;
		return -1;
	}
	return 0;
}

/* A datagram of len bytes, not yet any socket's (or NULL: no memory). */
struct d_dgram *d_dgram_alloc(uint32_t len)
{
	struct d_dgram *g = (struct d_dgram *)malloc(sizeof *g + len);
	if (!g)
		return NULL;
	g->next = NULL;
	g->len = len;
	memset(&g->from, 0, sizeof g->from);
	return g;
}

/* A datagram for s of len bytes, or NULL (queue limits reached, counted, or no
 * memory). */
struct d_dgram *d_dgram_new(struct d_sock *s, uint32_t len)
{
	return d_dgram_room(s, len) < 0 ? NULL : d_dgram_alloc(len);
}

void d_dgram_push(struct d_daemon *d, struct d_sock *s, struct d_dgram *g)
{
	if (s->dq_t)
		s->dq_t->next = g;
	else
		s->dq_h = g;
	s->dq_t = g;
	s->dq_n++;
	s->dq_bytes += g->len;
	d_rx_deliver(d, s);
}

/* SENDTO our own address: into the bound socket's queue, from our address and
 * the sender's port. Like UDP on a wire, nobody bound or a full queue loses the
 * datagram (counted in loop_dgram_drops) and the send still succeeds. A socket of
 * another worker gets it as a message (d_msg.c), whose queue limits its owner
 * applies. */
void d_loop_sendto(struct d_daemon *d, struct d_sock *s, const struct ipk_svc_sqe *e,
                   const uint8_t *addr6)
{
	struct d_pref r;
	struct d_dgram *g = NULL;
	uint32_t h[4], from = d->cfg.ip4_be;
	if (addr6) { /* the sender's address folded, as ev_udp6 folds a peer's */
		memcpy(h, addr6, 16);
		from = h[0] ^ h[1] ^ h[2] ^ h[3];
	}
	/* the socket may be another worker's: a reference (d_pcache.c), never read */
	if (d_udp_ref(d, s->wk, e->addr.port_be, from, s->lport_be, addr6 ? D_FAM6 : D_FAM4, &r))
		g = r.s ? d_dgram_new(r.s, e->len) : d_dgram_alloc(e->len);
	D_STAT(s->app, tx_copied, e->len);
	if (!g) {
		__atomic_add_fetch(&d->loop_dgram_drops, 1, __ATOMIC_RELAXED);
		d_post_res(s, e->user_data, (int32_t)e->len);
		return;
	}
	memcpy(g->data, s->app->base + e->buf_off, e->len);
	memset(&g->from, 0, sizeof g->from);
	g->from.port_be = s->lport_be; /* from the address it was sent to: this host */
	if (addr6) {
		g->from.family = IPK_SVC_AF_INET6;
		memcpy(g->from.addr, addr6, 16);
		d_scope_fill(d, &g->from);
	} else {
		g->from.family = IPK_SVC_AF_INET;
		memcpy(g->from.addr, &d->cfg.ip4_be, 4);
	}
	__atomic_add_fetch(&d->loop_dgrams, 1, __ATOMIC_RELAXED);
	d_post_res(s, e->user_data, (int32_t)e->len);
	if (r.s) {
		d_dgram_push(d, r.s, g);
		return;
	}
	if (d_msg_send_id(d, s->wk, r.wk, r.app_id, r.sock_id, D_MSG_UDP, g) < 0) {
		d->wk[s->wk].msg_full++;
		free(g);
	}
}
