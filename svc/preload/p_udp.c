/*
 * libipkit-preload: UDP sockets. Two RECVFROMs stay posted into the socket's two
 * 64 KiB buffers (one datagram each, read in turn); a send is synchronous (one
 * SENDTO, its result is the call's), because ipkitd answers at once and a datagram
 * to a neighbour still being resolved (-EHOSTUNREACH) is retried here for up to a
 * second, where Linux queues it behind the ARP request.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "preload.h"

#define PL_UDP_MAX 65507u /* IPv4: 65535 - 20 - 8 */

void pl_udp_on_recv(struct pl_sock *s, const struct ipk_svc_cqe *c)
{
	struct pl_rx *r = &s->rx[c->user_data & 1];
	if (!r->posted || c->res > (int32_t)PL_RXBUF) {
		PL_COUNT(bad_cqe, 1);
		r->posted = 0;
		return;
	}
	r->posted = 0;
	if (c->res < 0)
		return; /* the socket closed under it; nothing to report on UDP */
	r->len = (uint32_t)c->res;
	r->pos = 0;
	r->full = 1;
	pl_sa_from_svc(&r->from, s->domain, &c->addr);
	PL_COUNT(rx_ipk, (uint64_t)c->res);
}

int pl_udp_post(struct pl_sock *s)
{
	int k;
	for (k = 0; k < 2; k++) {
		struct pl_rx *r = &s->rx[s->rx_head ^ k];
		struct ipk_svc_sqe *e;
		if (r->posted || r->full || !s->so)
			continue;
		if (!r->b)
			r->b = (uint8_t *)ipk_svc_buf_alloc(pl_svc(), PL_RXBUF);
		e = r->b ? ipk_svc_get_sqe(s->so) : NULL;
		if (!e)
			return -ENOBUFS;
		ipk_svc_prep_recvfrom(s->so, e, r->b, PL_RXBUF);
		ipk_svc_sqe_set_data(e, (uint64_t)PL_OP_RECV << 60 | (uint64_t)(s->rx_head ^ k));
		r->posted = 1;
		if (ipk_svc_submit(s->so) < 0)
			return -ENETDOWN;
	}
	return 0;
}

/* One datagram into buf (truncated to len; MSG_TRUNC: its real length returned),
 * its sender in *from. -EAGAIN when none waits. Under s->mu. */
ssize_t pl_udp_recv1(struct pl_sock *s, uint8_t *buf, size_t len, int flags,
                     union pl_sa *from, int *trunc)
{
	struct pl_rx *r = &s->rx[s->rx_head];
	size_t n;
	if (!s->so)
		return -EBADF;
	if (!r->full)
		return -EAGAIN;
	n = r->len < len ? r->len : len;
	memcpy(buf, r->b, n);
	if (from)
		*from = r->from;
	*trunc = n < r->len;
	if (flags & MSG_TRUNC)
		n = r->len;
	if (!(flags & MSG_PEEK)) {
		r->full = 0;
		r->len = 0;
		s->rx_head ^= 1;
		pl_udp_post(s);
		pl_levels(s, 0);
	}
	return (ssize_t)n;
}

/* Connected UDP (Linux): datagrams from anyone else are dropped. Under s->mu. */
static int pl_udp_foreign(const struct pl_sock *s)
{
	const struct pl_rx *r = &s->rx[s->rx_head];
	return s->state == PL_CONNECTED && r->full &&
	       (r->from.in.sin_port != s->peer.in.sin_port ||
	        (s->domain == AF_INET6 ?
	         memcmp(&r->from.in6.sin6_addr, &s->peer.in6.sin6_addr, 16) != 0 :
	         r->from.in.sin_addr.s_addr != s->peer.in.sin_addr.s_addr));
}

ssize_t pl_udp_recv(struct pl_sock *s, void *buf, size_t len, int flags,
                    union pl_sa *from, int *trunc)
{
	for (;;) {
		ssize_t n;
		int w;
		pthread_mutex_lock(&s->mu);
		while (pl_udp_foreign(s)) {
			s->rx[s->rx_head].full = 0;
			s->rx_head ^= 1;
			pl_udp_post(s);
			pl_levels(s, 0);
		}
		n = pl_udp_recv1(s, (uint8_t *)buf, len, flags, from, trunc);
		pthread_mutex_unlock(&s->mu);
		if (n != -EAGAIN || s->nonblock || (flags & MSG_DONTWAIT))
			return n;
		w = pl_wait(s, 0, -1);
		if (w < 0)
			return w;
	}
}

/* One datagram to `to` (NULL: the connected peer). */
ssize_t pl_udp_send(struct pl_sock *s, const void *buf, size_t len, const union pl_sa *to)
{
	struct ipk_svc_sqe e;
	union pl_sa dst;
	uint8_t *b;
	int rc, tries;
	struct timespec ms = {0, 1000000};
	if (len > PL_UDP_MAX)
		return -EMSGSIZE;
	if (len == 0)
		return -EINVAL; /* ipkitd refuses empty datagrams (Linux sends them) */
	pthread_mutex_lock(&s->mu);
	dst = s->peer;
	rc = to ? 0 : s->state == PL_CONNECTED ? 0 : -EDESTADDRREQ;
	pthread_mutex_unlock(&s->mu);
	if (rc < 0)
		return rc;
	if (to)
		dst = *to;
	b = (uint8_t *)ipk_svc_buf_alloc(pl_svc(), (uint32_t)len);
	if (!b)
		return -ENOBUFS;
	memcpy(b, buf, len);
	for (tries = 0; tries < 1000; tries++) {
		memset(&e, 0, sizeof e);
		ipk_svc_prep_sendto(s->so, &e, b, (uint32_t)len, &(struct ipk_svc_addr){0});
		pl_sa_to_svc(&e.addr, &dst);
		rc = pl_sync_op(s, &e);
		if (rc != -EHOSTUNREACH)
			break;
		nanosleep(&ms, NULL); /* the neighbour is being resolved */
	}
	ipk_svc_buf_free(pl_svc(), b, (uint32_t)len);
	if (rc > 0)
		PL_COUNT(tx_ipk, (uint64_t)rc);
	pthread_mutex_lock(&s->mu);
	pl_udp_post(s); /* the first send bound the socket: receive from now on */
	pthread_mutex_unlock(&s->mu);
	return rc < 0 ? rc : (ssize_t)len;
}

/* connect on UDP only names the default peer (AF_UNSPEC forgets it). */
int pl_udp_connect(struct pl_sock *s, const struct sockaddr *a, socklen_t alen)
{
	if (a && alen >= (socklen_t)sizeof(sa_family_t) && a->sa_family == AF_UNSPEC) {
		pthread_mutex_lock(&s->mu);
		s->state = s->local.in.sin_port ? PL_BOUND : PL_NEW;
		memset(&s->peer, 0, sizeof s->peer);
		pthread_mutex_unlock(&s->mu);
		return 0;
	}
	union pl_sa in;
	int rc = pl_sa_in(a, alen, s->domain, &in);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&s->mu);
	s->peer = in;
	s->state = PL_CONNECTED;
	pthread_mutex_unlock(&s->mu);
	return 0;
}
