/*
 * ipkitd: zero-copy SEND (issue 17). A SEND's bytes stay in the application's
 * region: the daemon hands the core descriptors over them (ipk_pkt_attach_ext,
 * io/pool.c) with ipk_tcp_send, which keeps them until every byte is acknowledged
 * or the connection ended (core.h). The SEND completes from the record's release,
 * as io_uring's SEND_ZC notification and Linux's MSG_ZEROCOPY: res = len when the
 * bytes were acknowledged, the connection's error when it ended first.
 *
 * Which of the two freed the record: the core frees acknowledged data before it
 * reports tcp_acked, and frees the queues of an ending connection before it reports
 * tcp_closed (core/tcp.c ipk_tcp_destroy). A released record therefore waits on its
 * socket's done list until one of those events (or the pump, outside the core)
 * completes it: with the connection alive, acknowledged; with it gone, failed.
 *
 * The region stays mapped while a record of the application is unreleased (a
 * graceful close keeps queued data; a backend may free late): d_app_reclaim leaves
 * the unmapping to the last release (d_zc_free).
 *
 * The application may rewrite a buffer it handed over: the core and the backend
 * only copy those bytes to the wire (the checksum covers what is read), so it
 * corrupts its own stream only; the daemon takes no decision from them.
 */
#include "daemon.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* One descriptor covers at most this much: the core's send buffer charges a
 * packet whole (ipk_tcp_send refuses what does not fit), so a large SEND goes in
 * pieces as room opens. */
#define D_ZC_CHUNK (64u << 10)
/* Below this much send-buffer room, wait for tcp_acked rather than pin a small
 * piece (each is charged at least half a buffer, core/tcp.c sq_overhead). */
#define D_ZC_MIN 2048u

static void d_zc_unlink(struct d_zc *z)
{
	struct d_sock *s = z->s;
	if (!s)
		return;
	if (z->prev)
		z->prev->next = z->next;
	else
		s->zc_h = z->next;
	if (z->next)
		z->next->prev = z->prev;
	z->prev = z->next = NULL;
}

static void d_zc_free(struct d_zc *z)
{
	struct d_app *a = z->app;
	int last;
	d_zc_unlink(z);
	d_alock(a); /* the app's list and count: every worker's records are on it */
	if (z->aprev)
		z->aprev->anext = z->anext;
	else
		a->zc_all = z->anext;
	if (z->anext)
		z->anext->aprev = z->aprev;
	last = --a->zc_out == 0 && a->zc_dead;
	d_aunlock(a);
	free(z);
	if (last) {
		fprintf(stderr, "ipkitd: app %u region unmapped: its last zero-copy send was "
		        "released\n", a->id);
		d_app_final(a->d, a);
	}
}

/* ext release (from ipk_pkt_free, any context): the last descriptor is gone. */
static void d_zc_release(struct ipk_pkt_ext *x)
{
	struct d_zc *z = (struct d_zc *)x->arg;
	struct d_sock *s = z->s;
	if (!s) { /* the socket is gone: nobody to tell */
		d_zc_free(z);
		return;
	}
	z->done_next = NULL;
	if (s->zc_done_t)
		s->zc_done_t->done_next = z;
	else
		s->zc_done_h = z;
	s->zc_done_t = z;
}

/* Complete the released records of s, in order (releases come in stream order). */
void d_zc_complete(struct d_sock *s)
{
	while (s->zc_done_h) {
		struct d_zc *z = s->zc_done_h;
		int32_t res = s->conn ? (int32_t)z->len : (s->err ? s->err : -EPIPE);
		s->zc_done_h = z->done_next;
		if (!s->zc_done_h)
			s->zc_done_t = NULL;
		if (res > 0) {
			D_STAT(s->app, sends_zc, 1);
			d_evfd_send_done(s, z->user_data, res);
		} else {
			d_op_done(s, z->user_data, res);
		}
		d_zc_free(z);
	}
}

/* A record for op, holding one reference of its own (a 1-byte descriptor) so it
 * cannot be released between pieces. NULL: out of memory or descriptors. */
static struct d_zc *d_zc_open(struct d_daemon *d, struct d_sock *s, struct d_op *op)
{
	struct d_zc *z = (struct d_zc *)calloc(1, sizeof(*z));
	(void)d; /* the socket's worker holds the pool */
	if (!z)
		return NULL;
	z->x.release = d_zc_release;
	z->x.arg = z;
	z->app = s->app;
	z->user_data = op->e.user_data;
	z->len = op->e.len;
	z->hold = ipk_pkt_attach_ext(ipk_node_pool(d_sw(s)->node), s->app->base, op->e.buf_off, 1,
	                             &z->x);
	if (!z->hold) {
		free(z);
		return NULL;
	}
	z->s = s;
	z->next = s->zc_h;
	if (z->next)
		z->next->prev = z;
	s->zc_h = z;
	d_alock(s->app);
	s->app->zc_out++;
	z->anext = s->app->zc_all;
	if (z->anext)
		z->anext->aprev = z;
	s->app->zc_all = z;
	d_aunlock(s->app);
	op->zc = z;
	return z;
}

/* op is fully queued (or failed: it is completed by the caller): drop our own
 * reference; the last descriptor's release completes it. */
void d_zc_close(struct d_op *op, int failed)
{
	struct d_zc *z = op->zc;
	if (!z)
		return;
	op->zc = NULL;
	if (failed) { /* completed already: its release tells nobody */
		d_zc_unlink(z);
		z->s = NULL;
	}
	ipk_pkt_free(z->hold);
}

/* The socket goes: its records are orphans (their releases only count down the
 * app's records), released ones are dropped, the op being queued lets go. */
void d_zc_orphan(struct d_sock *s)
{
	struct d_op *op = d_opq_front(&s->txq);
	while (s->zc_done_h) {
		struct d_zc *z = s->zc_done_h;
		s->zc_done_h = z->done_next;
		d_zc_free(z);
	}
	s->zc_done_t = NULL;
	while (s->zc_h) {
		struct d_zc *z = s->zc_h;
		d_zc_unlink(z);
		z->s = NULL;
	}
	if (op && op->zc)
		d_zc_close(op, 1);
}

/* Copy up to n bytes of op into the stack (the other backends' path, and the
 * fall-back). Bytes queued, 0 (wait for tcp_acked) or a negative error. */
static int d_copy_write(struct d_daemon *d, struct d_sock *s, struct d_op *op, uint32_t n,
                        uint64_t now)
{
	int rc = ipk_tcp_write(d_sctx(s), s->conn, s->app->base + op->e.buf_off + op->done, n, now);
	(void)d;
	if (rc > 0)
		D_STAT(s->app, tx_copied, (uint64_t)rc);
	return rc;
}

/* Queue up to n bytes of op without copying. Same returns as d_copy_write, which
 * it falls back to when it cannot pin (no descriptor, or refused with nothing of
 * ours in the stack whose acknowledgement would bring us back). */
int d_zc_write(struct d_daemon *d, struct d_sock *s, struct d_op *op, uint32_t n, uint64_t now)
{
	uint32_t room = ipk_tcp_sndbuf_free(s->conn);
	struct ipk_pkt *k;
	int rc;
	if (n > D_ZC_CHUNK)
		n = D_ZC_CHUNK;
	if (n > room)
		n = room;
	if (n < D_ZC_MIN && n < op->e.len - op->done)
		return s->tx_held ? 0 : d_copy_write(d, s, op, op->e.len - op->done, now);
	if (!op->zc && !d_zc_open(d, s, op))
		return d_copy_write(d, s, op, n, now);
	k = ipk_pkt_attach_ext(ipk_node_pool(d_sw(s)->node), s->app->base, op->e.buf_off + op->done, n,
	                       &op->zc->x);
	if (!k)
		return d_copy_write(d, s, op, n, now);
	rc = ipk_tcp_send(d_sctx(s), s->conn, k, now);
	if (rc < 0) {
		ipk_pkt_free(k); /* still ours on error */
		if (rc == IPK_EAGAIN)
			return s->tx_held ? 0 : d_copy_write(d, s, op, n, now);
		return rc;
	}
	D_STAT(s->app, tx_zc, (uint64_t)rc);
	return rc;
}

/* Shutdown: the stack is gone (ipk_node_destroy unmaps its pool without freeing
 * packet by packet), so no release will come for what it still held. */
void d_zc_drop_all(struct d_app *a)
{
	while (a->zc_all) {
		struct d_zc *z = a->zc_all;
		a->zc_all = z->anext;
		free(z);
	}
	a->zc_out = 0;
}
