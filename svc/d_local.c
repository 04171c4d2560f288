/*
 * ipkitd: a successful CONNECT's completion names the socket's local address in
 * cqe.addr (ipkitd's IPv4 address and the port the connection uses), so a client
 * can answer getsockname after connect as Linux does (curl prints it). Older
 * clients ignore the field: CONNECT completions had it zeroed. Over IPv6 the
 * address is the one the core chose as the connection's source.
 */
#include "daemon.h"

#include <string.h>

void d_local_cqe(const struct d_sock *s, struct ipk_svc_cqe *c, uint64_t ud, uint16_t lport_be)
{
	struct ipk_atuple t;
	memset(c, 0, sizeof *c);
	c->user_data = ud;
	c->addr.port_be = lport_be;
	if (s->v6 && s->peer) { /* between two applications (d_loop.c): the address
	                         * the CONNECT named, which is this host's */
		c->addr.family = IPK_SVC_AF_INET6;
		memcpy(c->addr.addr, s->peer->acc_addr.addr, 16);
		d_scope_fill(s->app->d, &c->addr);
		return;
	}
	if (s->v6 && s->conn && ipk_tcp_atuple(d_sctx(s), s->conn, &t) == 0) {
		c->addr.family = IPK_SVC_AF_INET6;
		memcpy(c->addr.addr, t.local.a, 16);
		d_scope_fill(s->app->d, &c->addr);
		return;
	}
	c->addr.family = IPK_SVC_AF_INET;
	memcpy(c->addr.addr, &s->app->d->cfg.ip4_be, 4);
}

/* A connection through ipkitd's own loop: done at once, no operation in flight. */
void d_local_post(struct d_sock *s, uint64_t ud, uint16_t lport_be)
{
	struct ipk_svc_cqe c;
	d_local_cqe(s, &c, ud, lport_be);
	d_post(s, &c);
}

/* The local port of a core connection (0 if the core cannot say). */
uint16_t d_local_port(struct ipk_conn *c)
{
	struct ipk_tuple t;
	ipk_tcp_tuple(c, &t); /* fills the ports of an IPv6 connection too */
	return t.local_port_be;
}
