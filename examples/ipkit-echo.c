/*
 * ipkit-echo: TCP and UDP echo server (RFC 862) on a real link.
 *
 *   ipkit-echo --io tap:ipk0 --ip 10.7.0.2/24 [--port 7] [--udp-port 7]
 *
 * TCP echo is zero-copy: each payload is cloned (a new descriptor over the received
 * buffer) and queued with ipk_tcp_send. Received bytes are released to the window
 * (ipk_tcp_recved) only once their echo is in the send buffer, so a client that does
 * not read its echoes is slowed down by flow control instead of filling our memory.
 */
#include "app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct echo_conn {
	struct ipk_conn *c;
	struct ipk_pkt *head, *tail; /* clones waiting for send-buffer room, linked by ->user */
	int fin;                     /* peer finished: close once the queue is empty */
};

struct echo_app {
	uint16_t tcp_port_be, udp_port_be;
	uint64_t conns, bytes, datagrams;
};

static void echo_queue_free(struct echo_conn *e)
{
	while (e->head) {
		struct ipk_pkt *k = e->head;
		e->head = (struct ipk_pkt *)k->user;
		ipk_pkt_free(k);
	}
	e->tail = NULL;
}

/* Move queued clones into the send buffer while it has room. */
static void echo_drain(struct ipk_ctx *ctx, struct echo_conn *e, uint64_t now)
{
	while (e->head) {
		struct ipk_pkt *k = e->head;
		struct ipk_pkt *next = (struct ipk_pkt *)k->user;
		uint32_t len = k->len;
		int r;
		k->user = NULL;
		r = ipk_tcp_send(ctx, e->c, k, now);
		if (r == IPK_EAGAIN) {
			k->user = next;
			return;
		}
		e->head = next;
		if (!next)
			e->tail = NULL;
		if (r < 0) {
			ipk_pkt_free(k);
			echo_queue_free(e);
			ipk_tcp_abort(ctx, e->c, now);
			return;
		}
		ipk_tcp_recved(ctx, e->c, len, now);
	}
	if (e->fin) {
		e->fin = 0;
		ipk_tcp_close(ctx, e->c, now);
	}
}

static void *echo_accepted(struct ipk_ctx *ctx, struct ipk_conn *c, void *opaque)
{
	struct echo_app *a = (struct echo_app *)ipk_node_app(opaque);
	struct echo_conn *e = (struct echo_conn *)calloc(1, sizeof(*e));
	(void)ctx;
	if (!e) {
		ipk_tcp_abort(ctx, c, ipk_node_now(ipk_node_from(opaque)));
		return NULL;
	}
	e->c = c;
	a->conns++;
	return e;
}

static void echo_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                         uint32_t off, uint32_t len, void *opaque)
{
	struct echo_app *a = (struct echo_app *)ipk_node_app(opaque);
	struct echo_conn *e = (struct echo_conn *)user;
	uint64_t now = ipk_node_now(ipk_node_from(opaque));
	struct ipk_pkt *k;
	(void)c;
	if (!e)
		return;
	if (!pkt) {
		e->fin = 1;
		echo_drain(ctx, e, now);
		return;
	}
	k = ipk_pkt_clone((struct ipk_pkt *)pkt);
	if (!k) {
		/* out of descriptors: better a reset than a silently broken echo */
		echo_queue_free(e);
		ipk_tcp_abort(ctx, e->c, now);
		return;
	}
	k->off += off;
	k->len = len;
	k->user = NULL;
	if (e->tail)
		e->tail->user = k;
	else
		e->head = k;
	e->tail = k;
	a->bytes += len;
	echo_drain(ctx, e, now);
}

static void echo_acked(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, uint32_t bytes,
                       void *opaque)
{
	(void)c;
	(void)bytes;
	if (user)
		echo_drain(ctx, (struct echo_conn *)user, ipk_node_now(ipk_node_from(opaque)));
}

static void echo_closed(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
                        enum ipk_close_reason why, void *opaque)
{
	struct echo_conn *e = (struct echo_conn *)user;
	(void)ctx;
	(void)c;
	(void)why;
	(void)opaque;
	if (!e)
		return;
	echo_queue_free(e);
	free(e);
}

static void echo_udp(struct ipk_ctx *ctx, const struct ipk_tuple *t, void *pkt, uint32_t off,
                     uint32_t len, void *opaque)
{
	struct echo_app *a = (struct echo_app *)ipk_node_app(opaque);
	static uint8_t buf[65536];
	uint32_t got = ipk_pkt_copy(ctx, pkt, off, buf, len < sizeof(buf) ? len : sizeof(buf));
	a->datagrams++;
	ipk_udp_sendto(ctx, t->local_port_be, t->peer_ip4_be, t->peer_port_be, buf, got,
	               ipk_node_now(ipk_node_from(opaque)));
}

static const struct ipk_ops echo_events = {
	.tcp_accepted = echo_accepted,
	.tcp_payload = echo_payload,
	.tcp_acked = echo_acked,
	.tcp_closed = echo_closed,
	.udp_recv = echo_udp,
};

static void usage(FILE *f)
{
	fprintf(f, "usage: ipkit-echo --io SPEC --ip A.B.C.D/N [options]\n"
	           "TCP and UDP echo server (RFC 862).\n\n"
	           "  --port N         TCP port, 0 = none (default 7)\n"
	           "  --udp-port N     UDP port, 0 = none (default 7)\n%s", app_common_help);
}

static int parse_port(const char *v, uint16_t *port_be)
{
	char *end;
	long p = strtol(v, &end, 10);
	if (end == v || *end || p < 0 || p > 65535) {
		fprintf(stderr, "'%s' is not a port number\n", v);
		return -1;
	}
	*port_be = ipk_htons((uint16_t)p);
	return 0;
}

int main(int argc, char **argv)
{
	struct app_opts o;
	struct echo_app a;
	struct ipk_node *n;
	volatile int *stop;
	int i, rc;

	app_opts_default(&o);
	memset(&a, 0, sizeof(a));
	a.tcp_port_be = a.udp_port_be = ipk_htons(7);
	for (i = 1; i < argc; i++) {
		const char *v;
		int r;
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return APP_EXIT_OK;
		}
		if ((r = app_opt(&o, argc, argv, &i)) != 0) {
			if (r < 0)
				return APP_EXIT_USAGE;
			continue;
		}
		if ((r = app_arg("--port", argc, argv, &i, &v)) != 0) {
			if (r < 0 || parse_port(v, &a.tcp_port_be) < 0)
				return APP_EXIT_USAGE;
			continue;
		}
		if ((r = app_arg("--udp-port", argc, argv, &i, &v)) != 0) {
			if (r < 0 || parse_port(v, &a.udp_port_be) < 0)
				return APP_EXIT_USAGE;
			continue;
		}
		fprintf(stderr, "ipkit-echo: unknown argument '%s' (see --help)\n", argv[i]);
		return APP_EXIT_USAGE;
	}
	stop = app_stop_flag();
	n = app_node(&o, &echo_events, &a, NULL);
	if ((a.tcp_port_be && ipk_tcp_listen(ipk_node_ctx(n), a.tcp_port_be, 128) < 0) ||
	    (a.udp_port_be && ipk_udp_bind(ipk_node_ctx(n), a.udp_port_be) < 0)) {
		fprintf(stderr, "ipkit-echo: cannot listen on the port(s)\n");
		ipk_node_destroy(n);
		return APP_EXIT_SETUP;
	}
	fprintf(stderr, "ipkit-echo: serving on %s (tcp %u, udp %u)\n", o.io,
	        ipk_ntohs(a.tcp_port_be), ipk_ntohs(a.udp_port_be));
	rc = ipk_node_run(n, stop);
	if (o.verbose)
		app_report(n, "ipkit-echo");
	ipk_node_destroy(n);
	return rc < 0 ? APP_EXIT_FAIL : APP_EXIT_OK;
}
