/*
 * ipkit-echo --workers N --model unified|merge|split: the echo server (and a small
 * echo client for active opens) written once against the message-style application
 * interface (struct ipk_app_ops), so the same code runs under every thread model.
 *
 * Server: each payload reference is sent back as it is (ipk_app_send of the bytes in
 * the received buffer) and released once its sent event says the stack has copied
 * it, so a client that does not read its echoes closes our receive window instead of
 * filling memory. FIN from the peer closes after the last echo.
 *
 * Client (--connect A.B.C.D:PORT or [IPV6]:PORT --conns N): every worker opens N
 * connections, sends one message on each, checks the echo byte for byte, and closes;
 * the program exits when all are done (exit 0 only if every one succeeded). Over IPv6
 * (--ip6 and --connect [ADDR]:PORT) the opens wait in the runtime for DAD.
 */
#include "echo_workers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EW_MSG_MAX 1024

struct ew_conn {
	uint64_t cid;
	struct ipk_app_echoq q;       /* refs held until echoed */
	int fin, closing;
	/* client */
	int client;
	uint32_t got, bad;
	uint8_t msg[EW_MSG_MAX];
};

struct ew_worker {
	uint64_t accepted, echoed, ok, failed;
	uint64_t udp_echoed, udp_failed;
};

struct ew {
	const struct ew_opts *o;
	struct ew_worker w[IPK_WORKERS_MAX];
	uint64_t done; /* client connections finished (any worker; atomic) */
};

static struct ew_worker *ew_w(struct ipk_app *a)
{
	return (struct ew_worker *)ipk_app_state(a);
}

/* ----------------------------------------------------------- server */

static void ew_maybe_close(struct ipk_app *a, struct ew_conn *e)
{
	if (e->fin && !e->q.head && !e->closing) {
		e->closing = 1;
		ipk_app_close(a, e->cid);
	}
}

static void *ew_accepted(struct ipk_app *a, uint64_t cid, const struct ipk_tuple *t)
{
	struct ew_conn *e = (struct ew_conn *)calloc(1, sizeof(*e));

	(void)t;
	if (!e) {
		ipk_app_close(a, cid);
		return NULL;
	}
	e->cid = cid;
	ew_w(a)->accepted++;
	return e;
}

/* Over IPv6 the same (the echo needs no address). */
static void *ew_accepted6(struct ipk_app *a, uint64_t cid, const struct ipk_atuple *t)
{
	(void)t;
	return ew_accepted(a, cid, NULL);
}

static void ew_server_data(struct ipk_app *a, struct ew_conn *e, struct ipk_pkt *ref)
{
	if (!ref) {
		e->fin = 1;
		ew_maybe_close(a, e);
		return;
	}
	ipk_app_echoq_add(a, e->cid, &e->q, ref);
}

static void ew_sent(struct ipk_app *a, uint64_t cid, void *user, const void *buf, uint32_t len)
{
	struct ew_conn *e = (struct ew_conn *)user;

	(void)buf;
	if (!e || e->client || ipk_app_echoq_sent(a, cid, &e->q, len) < 0)
		return;
	ew_w(a)->echoed += len;
	ew_maybe_close(a, e);
}

/* ------------------------------------------------------------- UDP */

/* Echo a datagram from the received buffer itself; the ref goes back once the stack
 * has copied it (udp_sent). A datagram in several buffers (a chain of refs) is
 * gathered into one heap buffer first, freed at udp_sent. */
static void ew_udp_echo(struct ipk_app *a, uint16_t local_port_be, const struct ipk_addr *peer,
                        uint16_t peer_port_be, struct ipk_pkt *ref, const uint8_t *data,
                        uint32_t len)
{
	uint8_t *flat = NULL;

	if (ref->next) {
		flat = (uint8_t *)malloc(len);
		if (flat)
			ipk_pkt_linearize(ref, flat, len);
		data = flat;
	}
	if (!data || ipk_app_udp_send_addr(a, local_port_be, peer, peer_port_be, data, len,
	                                   ref) < 0) {
		ew_w(a)->udp_failed++;
		free(flat);
		ipk_app_release(a, 0, ref, 0);
	}
}

static void ew_udp(struct ipk_app *a, const struct ipk_tuple *t, struct ipk_pkt *ref,
                   const uint8_t *data, uint32_t len)
{
	struct ipk_addr peer;

	memset(&peer, 0, sizeof(peer));
	peer.family = IPK_AF_INET;
	memcpy(peer.a, &t->peer_ip4_be, 4);
	ew_udp_echo(a, t->local_port_be, &peer, t->peer_port_be, ref, data, len);
}

/* Over IPv6 (--ip6): back to the sender from our best address for it. */
static void ew_udp6(struct ipk_app *a, const struct ipk_atuple *t, struct ipk_pkt *ref,
                    const uint8_t *data, uint32_t len)
{
	ew_udp_echo(a, t->local_port_be, &t->peer, t->peer_port_be, ref, data, len);
}

static void ew_udp_sent(struct ipk_app *a, void *user, const void *buf, uint32_t len, int rc)
{
	struct ipk_pkt *ref = (struct ipk_pkt *)user;

	(void)len;
	if (rc < 0)
		ew_w(a)->udp_failed++;
	else
		ew_w(a)->udp_echoed++;
	if (ref->next)
		free((void *)(uintptr_t)buf); /* the gathered copy */
	ipk_app_release(a, 0, ref, 0);
}

/* ----------------------------------------------------------- client */

/* One active open, in --connect's family. Over IPv6 the runtime holds it until this
 * worker's --ip6 address has passed DAD (runtime.h ipk_app_connect_addr). A command
 * refused here has no closed event: it is counted as failed at once. */
static void ew_connect(struct ipk_app *a, const struct ew_opts *o, struct ew_conn *e)
{
	struct ipk_addr peer;

	memset(&peer, 0, sizeof(peer));
	if (o->connect_v6) {
		peer.family = IPK_AF_INET6;
		memcpy(peer.a, o->connect6, 16);
	} else {
		peer.family = IPK_AF_INET;
		memcpy(peer.a, &o->connect_ip4_be, 4);
	}
	if (ipk_app_connect_addr(a, &peer, o->connect_port_be, e) < 0) {
		ew_w(a)->failed++;
		__atomic_fetch_add(&((struct ew *)ipk_app_arg(a))->done, 1, __ATOMIC_RELAXED);
		free(e);
	}
}

static void ew_start(struct ipk_app *a, unsigned worker)
{
	struct ew *ew = (struct ew *)ipk_app_arg(a);
	const struct ew_opts *o = ew->o;
	uint32_t i, j;

	ipk_app_set_state(a, &ew->w[worker]);
	if (o->port_be)
		ipk_app_listen(a, o->port_be);
	if (o->udp_port_be)
		ipk_app_udp_bind(a, o->udp_port_be);
	for (i = 0; (o->connect_ip4_be || o->connect_v6) && i < o->conns; i++) {
		struct ew_conn *e = (struct ew_conn *)calloc(1, sizeof(*e));

		if (!e) {
			ew->w[worker].failed++;
			__atomic_fetch_add(&ew->done, 1, __ATOMIC_RELAXED);
			continue;
		}
		e->client = 1;
		for (j = 0; j < o->msg_size; j++)
			e->msg[j] = (uint8_t)(worker * 131u + i * 7u + j);
		ew_connect(a, o, e);
	}
}

static void ew_connected(struct ipk_app *a, uint64_t cid, void *user)
{
	struct ew_conn *e = (struct ew_conn *)user;
	struct ew *ew = (struct ew *)ipk_app_arg(a);

	e->cid = cid;
	if (ipk_app_send(a, cid, e->msg, ew->o->msg_size) < 0)
		ipk_app_close(a, cid);
}

static void ew_client_data(struct ipk_app *a, struct ew_conn *e, struct ipk_pkt *ref,
                           const uint8_t *data, uint32_t len)
{
	struct ew *ew = (struct ew *)ipk_app_arg(a);
	uint32_t i;

	if (!ref) {
		if (!e->closing) {
			e->closing = 1;
			ipk_app_close(a, e->cid);
		}
		return;
	}
	for (i = 0; i < len; i++)
		if (e->got + i >= ew->o->msg_size || data[i] != e->msg[e->got + i])
			e->bad = 1;
	e->got += len;
	ipk_app_release(a, e->cid, ref, len);
	if (e->got >= ew->o->msg_size && !e->closing) {
		e->closing = 1;
		ipk_app_close(a, e->cid);
	}
}

/* --------------------------------------------------------- both */

static void ew_data(struct ipk_app *a, uint64_t cid, void *user, struct ipk_pkt *ref,
                    const uint8_t *data, uint32_t len)
{
	struct ew_conn *e = (struct ew_conn *)user;

	if (!e) {
		if (ref)
			ipk_app_release(a, cid, ref, len);
		return;
	}
	if (e->client)
		ew_client_data(a, e, ref, data, len);
	else
		ew_server_data(a, e, ref);
}

static void ew_closed(struct ipk_app *a, uint64_t cid, void *user, enum ipk_close_reason why)
{
	struct ew_conn *e = (struct ew_conn *)user;
	struct ew *ew = (struct ew *)ipk_app_arg(a);

	(void)why;
	if (!e)
		return;
	ipk_app_echoq_drop(a, cid, &e->q); /* refs are ours to give back, also now */
	if (e->client) {
		if (e->got == ew->o->msg_size && !e->bad)
			ew_w(a)->ok++;
		else
			ew_w(a)->failed++;
		__atomic_fetch_add(&ew->done, 1, __ATOMIC_RELAXED);
	}
	free(e);
}

static const struct ipk_app_ops ew_ops = {
	.start = ew_start,
	.accepted = ew_accepted,
	.connected = ew_connected,
	.data = ew_data,
	.sent = ew_sent,
	.closed = ew_closed,
	.udp = ew_udp,
	.udp_sent = ew_udp_sent,
	.udp6 = ew_udp6,
	.accepted6 = ew_accepted6,
};

/* ------------------------------------------------------------ main */

static void ew_report(struct ipk_workers *ws, const struct ew *ew, unsigned n)
{
	uint64_t rx, drops;
	unsigned i;

	for (i = 0; i < n; i++) {
		struct ipk_worker_stats st;

		ipk_workers_stats(ws, i, &st);
		fprintf(stderr,
		        "ipkit-echo: worker %u: rx_frames %llu wrong_queue %llu accepted %llu "
		        "connected %llu closed %llu events %llu commands %llu wakeups %llu "
		        "drops %llu echoed %llu active_ok %llu active_failed %llu udp_rx %llu "
		        "udp_echoed %llu udp_failed %llu udp_drops %llu\n",
		        i, (unsigned long long)st.rx_frames, (unsigned long long)st.wrong_queue,
		        (unsigned long long)st.accepted, (unsigned long long)st.connected,
		        (unsigned long long)st.closed, (unsigned long long)st.events,
		        (unsigned long long)st.commands, (unsigned long long)st.app_wakeups,
		        (unsigned long long)st.steer_drops, (unsigned long long)ew->w[i].echoed,
		        (unsigned long long)ew->w[i].ok, (unsigned long long)ew->w[i].failed,
		        (unsigned long long)st.udp_rx, (unsigned long long)ew->w[i].udp_echoed,
		        (unsigned long long)ew->w[i].udp_failed, (unsigned long long)st.udp_drops);
	}
	ipk_workers_steer_stats(ws, &rx, &drops);
	fprintf(stderr, "ipkit-echo: steering rx %llu drops %llu\n", (unsigned long long)rx,
	        (unsigned long long)drops);
}

/* --ip6: every worker's core gets IPv6 (link-local and the static address; each
 * runs its own DAD and neighbour cache, the runtime sends ND to all of them). */
static void ew_core_tweak(struct ipk_config *c, void *app)
{
	const struct app_opts *ao = (const struct app_opts *)app;

	while (c->conn_hash_buckets < ao->conn_pool && c->conn_hash_buckets < (1u << 22))
		c->conn_hash_buckets <<= 1; /* --conn-pool: a bucket a connection */
	if (!ao->ip6)
		return;
	c->ip6_enable = 1;
	memcpy(c->ip6_addr, ao->ip6_addr, 16);
	c->ip6_prefix_len = ao->ip6_plen;
}

int ew_main(const struct app_opts *ao, const struct ew_opts *o)
{
	struct ipk_workers_cfg cfg;
	struct ipk_workers *ws;
	struct ew *ew = (struct ew *)calloc(1, sizeof(*ew));
	volatile int *stop = app_stop_flag();
	uint64_t total = o->connect_ip4_be || o->connect_v6 ? (uint64_t)o->conns * o->nworkers : 0;
	uint64_t ok = 0, i;
	char err[256], spec[512];
	struct timespec nap = {0, 20 * 1000000L};

	if (!ew)
		return APP_EXIT_SETUP;
	ew->o = o;
	snprintf(spec, sizeof(spec), ao->pcap ? "%s,pcap=%s" : "%s", ao->io, ao->pcap);
	ipk_workers_cfg_default(&cfg);
	cfg.node.io_spec = spec;
	cfg.node.ip4_be = ao->ip4_be;
	cfg.node.prefix_len = ao->prefix_len;
	cfg.node.gateway_be = ao->gw_be;
	cfg.node.busy_poll = ao->busy_poll;
	if (ao->conn_pool)
		cfg.node.conns = ao->conn_pool; /* per worker */
	cfg.node.core_tweak = ew_core_tweak;
	cfg.node.app = (void *)(uintptr_t)ao; /* what core_tweak gets (no cfg.run) */
	cfg.nworkers = o->nworkers;
	cfg.model = o->model;
	cfg.steer = o->steer;
	cfg.cpus = o->ncpus ? o->cpus : NULL;
	cfg.ncpus = o->ncpus;
	cfg.app = &ew_ops;
	cfg.app_arg = ew;
	ws = ipk_workers_start(&cfg, err, sizeof(err));
	if (!ws) {
		fprintf(stderr, "ipkit-echo: %s\n", err);
		free(ew);
		return APP_EXIT_SETUP;
	}
	fprintf(stderr, "ipkit-echo: %u workers (%s model, %s steering) on %s\n", o->nworkers,
	        o->model == IPK_MODEL_UNIFIED ? "unified" : o->model == IPK_MODEL_MERGE ? "merge" : "split",
	        ipk_workers_steering(ws) == IPK_STEER_SOFT ? "software" : "queue", ao->io);
	/* Client mode ends when every connection is done (bounded by --timeout). */
	for (i = 0; !*stop; i++) {
		if (total && __atomic_load_n(&ew->done, __ATOMIC_RELAXED) >= total)
			break;
		if (o->timeout_s && i * 20 >= (uint64_t)o->timeout_s * 1000)
			break;
		nanosleep(&nap, NULL);
	}
	ipk_workers_stop(ws);
	ew_report(ws, ew, o->nworkers);
	for (i = 0; i < o->nworkers; i++)
		ok += ew->w[i].ok;
	if (total)
		fprintf(stderr, "ipkit-echo: active opens ok %llu of %llu\n", (unsigned long long)ok,
		        (unsigned long long)total);
	ipk_workers_destroy(ws);
	free(ew);
	return ok == total ? APP_EXIT_OK : APP_EXIT_FAIL;
}
