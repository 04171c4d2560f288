/*
 * ipkit-bench: the benchmark tool on the ipkit stack (options as bench-iip; the Linux
 * twin bench/linux/ipkit-bench-linux.c takes the same ones).
 *
 *   ipkit-bench --io tap:ipk0 --ip 10.7.0.2/24 -p 10000                   # server
 *   ipkit-bench --io tap:ipk0 --ip 10.7.0.2/24 -s 10.7.0.1 -c 32 -t 10    # client
 *
 * One node (core context + backend queue) driven by this program's loop; the client
 * and server logic is bench_flow.c's, shared with the twin. TCP sends copy
 * (ipk_tcp_write) since requests are generated; receive is zero-copy (payload checked
 * in the received buffer, then released to the window with ipk_tcp_recved).
 */
#include "bench_flow.h"
#include "bench_workers.h"

#include "app.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <linux/if_xdp.h>
#ifndef SOL_XDP
#define SOL_XDP 283
#endif

#define IB_BUF (64 * 1024)
/* --zerocopy layout pool: one buffer, so a request's slice (up to IB_BUF) is one
 * piece; descriptors for the slices a send buffer of up to 8 MiB queues (128) and
 * their transmit clones, with a wide margin */
#define IB_ZC_BUF (128u * 1024)
#define IB_ZC_DESCS 4096u
#define IB_ROUNDS 64          /* bound on send rounds per kick */
#define IB_UDP_PORT_BASE 40000 /* client flow i sends from UDP port base + i */
#define IB_CLOSE_WAIT_NS 500000000ull
#define IB_PING_EVERY_NS 100000000ull
#define IB_WARM_UP_NS 3000000000ull /* covers two ARP retries (one a second) */
/* IPv6: DAD of our addresses first (RFC 4862 §5.4: one NS, RetransTimer 1 s), then
 * Neighbor Discovery of the server */
#define IB_WARM_UP6_NS 5000000000ull

struct ib_srv_conn {          /* server side of one TCP connection */
	struct bench_flow *f;
	struct ipk_conn *c;
	struct bench_hold hold;   /* echo bytes the send buffer did not take yet */
	uint32_t unreleased;      /* received bytes not yet given back to the window */
};

struct ib {
	const struct bench_opts *o;
	struct bench_worker w;
	struct ipk_node *n;
	struct ipk_addr srv;      /* the server (client over IPv6: -s ADDR) */
	int ping_answered;
	uint64_t zc_sent, zc_copied; /* --zerocopy chains queued / pieces copied instead */
	struct ipk_pkt *zc;       /* --zerocopy: the payload layout (bench_payload_zc_layout) */
	struct ipk_pool *zc_pool; /* its own pool (ib_zc_setup) */
	uint32_t zc_cap;          /* its bytes */
	uint8_t buf[IB_BUF];
};

static struct ib *ib_of(void *opaque)
{
	return (struct ib *)ipk_node_app(opaque);
}

static uint64_t ib_now(struct ib *b)
{
	return ipk_node_now(b->n);
}

/* ------------------------------------------------------------------ client */

static int ib_kick_udp(struct ib *b, struct bench_flow *f)
{
	struct ipk_ctx *ctx = ipk_node_ctx(b->n);
	uint32_t n = bench_flow_tx_fill(&b->w, f, b->buf, IB_BUF, 1);
	uint16_t lport_be = ipk_htons((uint16_t)(IB_UDP_PORT_BASE + f->idx));
	int r = b->o->ip6 ?
	        ipk_udp_sendto_addr(ctx, lport_be, &b->srv, ipk_htons(b->o->port), b->buf, n,
	                            ib_now(b)) :
	        ipk_udp_sendto(ctx, lport_be, b->o->server_ip4_be, ipk_htons(b->o->port), b->buf,
	                       n, ib_now(b));
	if (r < 0)
		return 0; /* pool empty or ARP/ND pending: the tick retries */
	bench_flow_tx_done(&b->w, f, n);
	return 1;
}

static int ib_kick_tcp(struct ib *b, struct bench_flow *f)
{
	struct ipk_conn *c = (struct ipk_conn *)f->handle;
	uint32_t room = ipk_tcp_sndbuf_free(c), n;
	int r;
	if (!room)
		return 0; /* tcp_acked kicks again */
	n = bench_flow_tx_fill(&b->w, f, b->buf, room < IB_BUF ? room : IB_BUF, 0);
	r = ipk_tcp_write(ipk_node_ctx(b->n), c, b->buf, n, ib_now(b));
	if (r <= 0)
		return 0;
	bench_flow_tx_done(&b->w, f, (uint32_t)r);
	return 1;
}

/* A packet over bytes [pos, pos+n) of the layout: a clone shares its buffer. The
 * descriptor is ours until ipk_tcp_send takes it, so its window is set here. */
static struct ipk_pkt *ib_zc_slice(struct ib *b, uint32_t pos, uint32_t n)
{
	struct ipk_pkt *k = ipk_pkt_clone(b->zc);
	if (k) {
		k->off = b->zc->off + pos;
		k->len = n;
	}
	return k;
}

/* --zerocopy: one piece of the request at (numbered bytes copied into a small
 * packet, the rest a slice of the layout) appended at *tail; -1 out of packets. */
static int ib_zc_piece(struct ib *b, const struct bench_flow *at, uint32_t n, uint32_t ncopy,
                       uint32_t pos, struct ipk_pkt ***tail)
{
	struct ipk_pkt *k;
	if (ncopy) {
		if (!(k = ipk_pkt_alloc(ipk_node_pool(b->n))))
			return -1;
		k->len = bench_flow_tx_fill(&b->w, at, ipk_pkt_mtod(k), ncopy, 0);
		**tail = k;
		*tail = &k->next;
	}
	if (n > ncopy) {
		if (!(k = ib_zc_slice(b, pos, n - ncopy)))
			return -1;
		**tail = k;
		*tail = &k->next;
	}
	return 0;
}

/* --zerocopy: up to IB_BUF bytes of the current request as one chain of pieces,
 * queued with one ipk_tcp_send; out of packets, the piece is copied instead. */
static int ib_kick_tcp_zc(struct ib *b, struct bench_flow *f)
{
	struct ipk_conn *c = (struct ipk_conn *)f->handle;
	struct bench_flow at = *f; /* walks the request; f moves once the chain is queued */
	struct ipk_pkt *head = NULL, **tail = &head;
	uint32_t room = ipk_tcp_sndbuf_free(c), total = 0, n, ncopy, pos;
	int r;
	if (room > IB_BUF)
		room = IB_BUF;
	while (total < room &&
	       (n = bench_flow_tx_zc(&b->w, &at, b->zc_cap, room - total, &ncopy, &pos)) != 0) {
		if (ib_zc_piece(b, &at, n, ncopy, pos, &tail) < 0)
			break;
		total += n;
		at.tx_off += n;
		if (at.tx_off == b->w.pay.len)
			break; /* a chain never spans two requests */
	}
	if (!total) {
		ipk_pkt_free_chain(head);
		if (room && bench_flow_tx_pending(&b->w, f))
			b->zc_copied++;
		return room ? ib_kick_tcp(b, f) : 0; /* full: tcp_acked kicks again */
	}
	r = ipk_tcp_send(ipk_node_ctx(b->n), c, head, ib_now(b));
	if (r <= 0) {
		ipk_pkt_free_chain(head);
		return 0;
	}
	bench_flow_tx_done(&b->w, f, (uint32_t)r);
	b->zc_sent++;
	return 1;
}

/* At the end, a warning on stderr when the zero-copy sender ran short of packets
 * (pieces copied instead, failed allocations in the pool: tests look for it). */
static void ib_zc_report(const struct ib *b)
{
	struct ipk_pool_stats st, zst;
	ipk_pool_stats(ipk_node_pool(b->n), &st);
	ipk_pool_stats(b->zc_pool, &zst);
	if (b->zc_copied || st.alloc_fails || zst.alloc_fails)
		fprintf(stderr, "ipkit-bench: zerocopy: pool short: %llu pieces copied, %llu failed "
		        "packet allocations (%llu chains of slices sent)\n",
		        (unsigned long long)b->zc_copied,
		        (unsigned long long)(st.alloc_fails + zst.alloc_fails),
		        (unsigned long long)b->zc_sent);
}

static void ib_kick(struct bench_worker *w, struct bench_flow *f, void *arg)
{
	struct ib *b = (struct ib *)arg;
	int round;
	for (round = 0; round < IB_ROUNDS && f->open; round++) {
		if (!bench_flow_tx_pending(w, f) &&
		    (w->o->mode != BENCH_BURST || !bench_worker_admit(w, f, ib_now(b))))
			return;
		if (!(w->o->proto == 17 ? ib_kick_udp(b, f) :
		      b->zc ? ib_kick_tcp_zc(b, f) : ib_kick_tcp(b, f))) {
			w->starved = 1; /* come back on the next tick */
			return;
		}
	}
	if (w->o->mode == BENCH_BURST)
		w->starved = 1; /* still room: keep the pipe full from the tick */
}

static void ib_admit_kick(struct ib *b, struct bench_flow *f)
{
	bench_worker_admit(&b->w, f, ib_now(b));
	ib_kick(&b->w, f, b);
}

static void ib_connected(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *opaque)
{
	struct ib *b = ib_of(opaque);
	struct bench_flow *f = (struct bench_flow *)user;
	(void)ctx;
	(void)c;
	f->open = 1;
	b->w.c.conns++;
	ib_admit_kick(b, f);
}

static void ib_client_payload(struct ib *b, struct bench_flow *f, struct ipk_conn *c,
                              struct ipk_pkt *k, uint32_t off, uint32_t len)
{
	struct ipk_ctx *ctx = ipk_node_ctx(b->n);
	if (!k) { /* the server closed its side: unexpected while we run */
		if (!b->w.stopping)
			b->w.c.closes++;
		ipk_tcp_close(ctx, c, ib_now(b));
		return;
	}
	bench_flow_rx(&b->w, f, ipk_pkt_mtod(k) + off, len, ib_now(b));
	ipk_tcp_recved(ctx, c, len, ib_now(b));
	if (b->o->mode == BENCH_PINGPONG)
		ib_admit_kick(b, f);
}

/* A reply on local_port_be; from_server: its source is the server's address. */
static void ib_udp_client(struct ib *b, uint16_t local_port_be, int from_server, void *pkt,
                          uint32_t off, uint32_t len)
{
	uint32_t port = ipk_ntohs(local_port_be), got;
	struct bench_flow *f;
	if (port < IB_UDP_PORT_BASE || port - IB_UDP_PORT_BASE >= b->w.nflows || !from_server)
		return; /* not one of ours */
	f = &b->w.flows[port - IB_UDP_PORT_BASE];
	got = ipk_pkt_copy(ipk_node_ctx(b->n), pkt, off, b->buf, len < IB_BUF ? len : IB_BUF);
	bench_flow_rx_datagram(&b->w, f, b->buf, got, ib_now(b));
	if (b->o->mode == BENCH_PINGPONG)
		ib_admit_kick(b, f);
}

static int ib_client_start(struct ib *b)
{
	struct ipk_ctx *ctx = ipk_node_ctx(b->n);
	uint32_t i;
	for (i = 0; i < b->w.nflows; i++) {
		struct bench_flow *f = &b->w.flows[i];
		struct ipk_conn *c = NULL;
		if (b->o->proto == 17) {
			if (ipk_udp_bind(ctx, ipk_htons((uint16_t)(IB_UDP_PORT_BASE + i))) < 0)
				return -1;
			f->open = 1;
			b->w.c.conns++;
			ib_admit_kick(b, f);
			continue;
		}
		if ((b->o->ip6 ?
		     ipk_tcp_connect_addr(ctx, &b->srv, ipk_htons(b->o->port), 0, f, &c, ib_now(b)) :
		     ipk_tcp_connect(ctx, b->o->server_ip4_be, ipk_htons(b->o->port), 0, f, &c,
		                     ib_now(b))) < 0) {
			b->w.c.connect_fails++;
			continue;
		}
		f->handle = c;
	}
	return 0;
}

/* ------------------------------------------------------------------ server */

static void *ib_accepted(struct ipk_ctx *ctx, struct ipk_conn *c, void *opaque)
{
	struct ib *b = ib_of(opaque);
	struct ib_srv_conn *s = (struct ib_srv_conn *)calloc(1, sizeof(*s));
	if (!s || !(s->f = bench_flow_new(&b->w))) {
		free(s);
		ipk_tcp_abort(ctx, c, ib_now(b));
		return NULL;
	}
	s->c = c;
	s->f->open = 1;
	b->w.c.conns++;
	return s;
}

/* Write held echo bytes; releases them to the window as they go. */
static void ib_srv_drain(struct ib *b, struct ib_srv_conn *s)
{
	struct ipk_ctx *ctx = ipk_node_ctx(b->n);
	int r;
	if (!s->hold.len)
		return;
	r = ipk_tcp_write(ctx, s->c, s->hold.p, s->hold.len, ib_now(b));
	if (r <= 0)
		return;
	b->w.c.tx_bytes += (uint64_t)r;
	bench_hold_drop(&s->hold, (uint32_t)r);
	ipk_tcp_recved(ctx, s->c, (uint32_t)r, ib_now(b));
	s->unreleased -= (uint32_t)r;
}

static void ib_srv_echo(struct ib *b, struct ib_srv_conn *s, const uint8_t *data, uint32_t len)
{
	struct ipk_ctx *ctx = ipk_node_ctx(b->n);
	int r = 0;
	if (b->o->corrupt_echo) {
		memcpy(b->buf, data, len < IB_BUF ? len : IB_BUF);
		bench_flow_maybe_corrupt(&b->w, b->buf, len < IB_BUF ? len : IB_BUF);
		data = b->buf;
	}
	s->unreleased += len;
	if (!s->hold.len)
		r = ipk_tcp_write(ctx, s->c, data, len, ib_now(b));
	if (r < 0) {
		ipk_tcp_abort(ctx, s->c, ib_now(b));
		return;
	}
	b->w.c.tx_bytes += (uint64_t)r;
	ipk_tcp_recved(ctx, s->c, (uint32_t)r, ib_now(b));
	s->unreleased -= (uint32_t)r;
	/* the rest stays counted against our receive window until it is written */
	if ((uint32_t)r < len && bench_hold_add(&s->hold, data + r, len - (uint32_t)r) < 0)
		ipk_tcp_abort(ctx, s->c, ib_now(b));
}

static void ib_srv_payload(struct ib *b, struct ib_srv_conn *s, struct ipk_pkt *k,
                           uint32_t off, uint32_t len)
{
	struct ipk_ctx *ctx = ipk_node_ctx(b->n);
	if (!k) {
		ipk_tcp_close(ctx, s->c, ib_now(b));
		return;
	}
	bench_flow_server_rx(&b->w, s->f, len);
	if (b->o->mode == BENCH_PINGPONG)
		ib_srv_echo(b, s, ipk_pkt_mtod(k) + off, len);
	else
		ipk_tcp_recved(ctx, s->c, len, ib_now(b));
}

/* Counts the request; in ping-pong copies it into b->buf (corrupted with
 * --corrupt-echo) and returns its length to echo, else 0. */
static uint32_t ib_udp_server_rx(struct ib *b, void *pkt, uint32_t off, uint32_t len)
{
	uint32_t got;
	b->w.c.requests++;
	b->w.c.rx_bytes += len;
	if (b->o->mode != BENCH_PINGPONG)
		return 0;
	got = ipk_pkt_copy(ipk_node_ctx(b->n), pkt, off, b->buf, len < IB_BUF ? len : IB_BUF);
	bench_flow_maybe_corrupt(&b->w, b->buf, got);
	return got;
}

static void ib_udp_server(struct ib *b, const struct ipk_tuple *t, void *pkt, uint32_t off,
                          uint32_t len)
{
	uint32_t got = ib_udp_server_rx(b, pkt, off, len);
	if (got && ipk_udp_sendto(ipk_node_ctx(b->n), t->local_port_be, t->peer_ip4_be,
	                          t->peer_port_be, b->buf, got, ib_now(b)) >= 0)
		b->w.c.tx_bytes += got;
}

static void ib_udp6_server(struct ib *b, const struct ipk_atuple *t, void *pkt, uint32_t off,
                           uint32_t len)
{
	uint32_t got = ib_udp_server_rx(b, pkt, off, len);
	if (got && ipk_udp_sendto_addr(ipk_node_ctx(b->n), t->local_port_be, &t->peer,
	                               t->peer_port_be, b->buf, got, ib_now(b)) >= 0)
		b->w.c.tx_bytes += got;
}

/* ------------------------------------------------------------------ events */

static void ib_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                       uint32_t off, uint32_t len, void *opaque)
{
	struct ib *b = ib_of(opaque);
	(void)ctx;
	if (!user)
		return;
	if (b->o->client)
		ib_client_payload(b, (struct bench_flow *)user, c, (struct ipk_pkt *)pkt, off, len);
	else
		ib_srv_payload(b, (struct ib_srv_conn *)user, (struct ipk_pkt *)pkt, off, len);
}

static void ib_acked(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, uint32_t bytes,
                     void *opaque)
{
	struct ib *b = ib_of(opaque);
	(void)ctx;
	(void)c;
	(void)bytes;
	if (!user)
		return;
	if (b->o->client)
		ib_kick(&b->w, (struct bench_flow *)user, b);
	else
		ib_srv_drain(b, (struct ib_srv_conn *)user);
}

static void ib_closed(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
                      enum ipk_close_reason why, void *opaque)
{
	struct ib *b = ib_of(opaque);
	(void)ctx;
	(void)c;
	(void)why;
	if (!user)
		return;
	if (!b->o->client) {
		struct ib_srv_conn *s = (struct ib_srv_conn *)user;
		b->w.c.conns--;
		bench_hold_free(&s->hold);
		bench_flow_free(s->f);
		free(s);
		return;
	}
	bench_flow_closed(&b->w, (struct bench_flow *)user, why == IPK_CLOSE_NORMAL);
}

static void ib_udp(struct ipk_ctx *ctx, const struct ipk_tuple *t, void *pkt, uint32_t off,
                   uint32_t len, void *opaque)
{
	struct ib *b = ib_of(opaque);
	(void)ctx;
	if (b->o->client)
		ib_udp_client(b, t->local_port_be, !b->o->ip6 && t->peer_ip4_be == b->o->server_ip4_be,
		              pkt, off, len);
	else
		ib_udp_server(b, t, pkt, off, len);
}

static void ib_udp6(struct ipk_ctx *ctx, const struct ipk_atuple *t, void *pkt, uint32_t off,
                    uint32_t len, void *opaque)
{
	struct ib *b = ib_of(opaque);
	(void)ctx;
	if (b->o->client)
		ib_udp_client(b, t->local_port_be,
		              b->o->ip6 && memcmp(t->peer.a, b->o->server_ip6, 16) == 0, pkt, off,
		              len);
	else
		ib_udp6_server(b, t, pkt, off, len);
}

static void ib_echo_reply(struct ipk_ctx *ctx, uint32_t from_ip4_be, uint16_t id_be,
                          uint16_t seq_be, uint32_t payload_len, void *opaque)
{
	struct ib *b = ib_of(opaque);
	(void)ctx;
	(void)id_be;
	(void)seq_be;
	(void)payload_len;
	if (from_ip4_be == b->o->server_ip4_be)
		b->ping_answered = 1;
}

static void ib_echo6_reply(struct ipk_ctx *ctx, const uint8_t from[16], uint16_t id_be,
                           uint16_t seq_be, uint32_t payload_len, void *opaque)
{
	struct ib *b = ib_of(opaque);
	(void)ctx;
	(void)id_be;
	(void)seq_be;
	(void)payload_len;
	if (memcmp(from, b->o->server_ip6, 16) == 0)
		b->ping_answered = 1;
}

static const struct ipk_ops ib_events = {
	.icmp_echo_reply = ib_echo_reply,
	.tcp_accepted = ib_accepted,
	.tcp_connected = ib_connected,
	.tcp_payload = ib_payload,
	.tcp_acked = ib_acked,
	.tcp_closed = ib_closed,
	.udp_recv = ib_udp,
	.udp_recv6 = ib_udp6,
	.icmp6_echo_reply = ib_echo6_reply,
};

/* ------------------------------------------------------------------ main */

/* --tcp-buf: a bulk sender with the core's 256 KiB keeps ~4 TSO frames in flight, so
 * every ACK wakes it to send the next; a larger buffer lets ACKs and frames batch. */
static void ib_tweak(struct ipk_config *cfg, void *app)
{
	const struct ib *b = (const struct ib *)app;
	if (b->o->tcp_buf) {
		cfg->tcp_sndbuf = b->o->tcp_buf;
		cfg->tcp_rcvbuf = b->o->tcp_buf;
	}
}

static struct ipk_node *ib_node(struct ib *b)
{
	struct app_opts a;
	app_opts_default(&a);
	a.io = b->o->io;
	a.pcap = b->o->pcap;
	a.ip4_be = b->o->ip4_be;
	a.prefix_len = b->o->prefix_len;
	a.gw_be = b->o->gw_be;
	a.busy_poll = b->o->busy_poll;
	if (b->o->ip6) { /* IPv6 on: link-local and the --ip6 static address */
		a.ip6 = 1;
		memcpy(a.ip6_addr, b->o->ip6_self, 16);
		a.ip6_plen = b->o->ip6_plen;
	}
	return app_node(&a, &ib_events, b, ib_tweak); /* exits with APP_EXIT_SETUP on failure */
}

/* --zerocopy: the payload layout for the whole run lies in the one buffer of a pool
 * of its own (IB_ZC_BUF bytes, IB_ZC_DESCS descriptors), so each request after its
 * numbered bytes is one slice and a 64 KiB TSO frame two or three pieces. Slices of
 * a node-pool buffer (2 KiB) made ~35 pieces per frame: clones, chain appends, frees
 * and iovecs per piece were ~20% of a tap sender's CPU. Not the node pool's large
 * companion either: every slice and transmit clone is a descriptor of the slices'
 * pool, and the companion's 128 ran dry with a send buffer of a few MiB (--tcp-buf),
 * stalling the transfer on retransmission timeouts. 0 or -1 (message printed). */
static int ib_zc_setup(struct ib *b)
{
	struct ipk_pool_cfg pc;
	struct ipk_pkt *k;
	char err[160];

	ipk_pool_cfg_default(&pc);
	pc.nbufs = 1;
	pc.buf_size = IB_ZC_BUF;
	pc.ndescs = IB_ZC_DESCS;
	b->zc_pool = ipk_pool_create(&pc, err, sizeof(err));
	k = b->zc_pool ? ipk_pkt_alloc(b->zc_pool) : NULL;
	if (!k) {
		fprintf(stderr, "ipkit-bench: --zerocopy: no buffer for the payload: %s\n",
		        b->zc_pool ? "pool empty" : err);
		return -1;
	}
	b->zc_cap = ipk_pool_buf_size(k->pool) - k->off;
	if (bench_payload_zc_layout(&b->w.pay, ipk_pkt_mtod(k), b->zc_cap) < 0) {
		fprintf(stderr, "ipkit-bench: --zerocopy: a %u-byte -m payload does not fit one "
		        "pool buffer (%u bytes)\n", b->w.pay.len, b->zc_cap);
		ipk_pkt_free(k);
		return -1;
	}
	k->len = b->zc_cap;
	b->zc = k;
	return 0;
}

/* Before the clock starts, ping the server (for at most 3 s, over IPv6 5 s) so the
 * neighbour is resolved: a kernel client has its ARP entry from earlier traffic, and
 * a freshly opened TAP device drops what is sent before its carrier is up. Over
 * IPv6 the echo also waits for our address to pass DAD (ipk_icmp6_echo refuses
 * until then), which an active open needs too. No answer (ICMP filtered) is not an
 * error: the run starts anyway. */
static void ib_ping(struct ib *b, uint16_t seq, uint64_t now)
{
	if (b->o->ip6)
		ipk_icmp6_echo(ipk_node_ctx(b->n), b->o->server_ip6, ipk_htons(0x1b), ipk_htons(seq),
		               8, now);
	else
		ipk_icmp_echo(ipk_node_ctx(b->n), b->o->server_ip4_be, ipk_htons(0x1b),
		              ipk_htons(seq), 8, now);
}

static void ib_warm_up(struct ib *b, volatile int *stop)
{
	uint64_t now = ib_now(b), until = now + (b->o->ip6 ? IB_WARM_UP6_NS : IB_WARM_UP_NS);
	uint64_t next = now;
	uint16_t seq = 0;
	while (!b->ping_answered && !*stop && now < until) {
		if (now >= next) {
			ib_ping(b, seq++, now);
			next = now + IB_PING_EVERY_NS;
		}
		ipk_node_poll(b->n, 1);
		now = ib_now(b);
	}
}

/* Over IPv6, run the node until its --ip6 address has passed DAD (RFC 4862 §5.4;
 * at most IB_WARM_UP6_NS): a server announces itself only once a peer can reach
 * it, a client opens only from an address in use. 0 up, -1 not (yet). */
static int ib_wait_addr6(struct ib *b, volatile int *stop)
{
	uint8_t addrs[8][16];
	uint64_t until = ib_now(b) + IB_WARM_UP6_NS;
	int i, n;
	while (!*stop && ib_now(b) < until) {
		n = ipk_ip6_addrs(ipk_node_ctx(b->n), addrs, 8);
		for (i = 0; i < n; i++)
			if (memcmp(addrs[i], b->o->ip6_self, 16) == 0)
				return 0;
		ipk_node_poll(b->n, 1);
	}
	return -1;
}

/* How long a blocking poll may sleep with nothing to do: the client's tick (pacing,
 * request timeouts) wants 1 ms; a server only prints once a second, so an idle one
 * wakes ten times a second instead of a thousand (idle CPU near zero). */
#define IB_SRV_IDLE_MS 100

static void ib_loop(struct ib *b, volatile int *stop, struct bench_report *r)
{
	uint64_t now = ib_now(b);
	uint64_t end = b->o->duration_s ? now + b->o->duration_s * 1000000000ull : UINT64_MAX;
	int idle_ms = b->o->busy_poll ? 0 : b->o->client ? 1 : IB_SRV_IDLE_MS;
	while (!*stop && now < end) {
		ipk_node_poll(b->n, idle_ms);
		now = ib_now(b);
		if (b->o->client)
			bench_worker_tick(&b->w, now, ib_kick, b);
		bench_report_tick(r, &b->w.c, now);
	}
}

/* Close the client's connections and give the FINs a moment to go out. */
static void ib_finish(struct ib *b)
{
	struct ipk_ctx *ctx = ipk_node_ctx(b->n);
	uint64_t until;
	uint32_t i;
	b->w.stopping = 1;
	for (i = 0; i < b->w.nflows && b->o->proto == 6; i++) {
		struct bench_flow *f = &b->w.flows[i];
		if (f->open) {
			ipk_tcp_close(ctx, (struct ipk_conn *)f->handle, ib_now(b));
		} else if (f->handle) { /* still opening after the whole run: a failure too */
			struct ipk_conn *c = (struct ipk_conn *)f->handle;
			f->handle = NULL;
			ipk_tcp_abort(ctx, c, ib_now(b)); /* tcp_closed counts it */
		}
	}
	until = ib_now(b) + IB_CLOSE_WAIT_NS;
	while (b->o->proto == 6 && b->w.c.conns && ib_now(b) < until)
		ipk_node_poll(b->n, 1);
}

/* --stats on an AF_XDP backend: the kernel's socket counters (XDP_STATISTICS on the
 * backend's fd; any other backend's fd refuses the option and nothing is printed).
 * rx_ring_full and rx_fill_ring_empty are frames the kernel dropped before ipkit saw
 * them: a stalled request, an RTO. */
static void ib_stats_xsk(const struct ib *b)
{
	struct xdp_statistics xs;
	socklen_t len = sizeof(xs);
	int fd = ipk_io_fd(ipk_node_io(b->n));

	memset(&xs, 0, sizeof(xs));
	if (fd < 0 || getsockopt(fd, SOL_XDP, XDP_STATISTICS, &xs, &len) < 0)
		return;
	fprintf(stderr, "ipkit-bench: stats: xsk rx_dropped %llu rx_ring_full %llu "
	        "rx_fill_ring_empty %llu tx_ring_empty %llu invalid rx %llu tx %llu\n",
	        (unsigned long long)xs.rx_dropped, (unsigned long long)xs.rx_ring_full,
	        (unsigned long long)xs.rx_fill_ring_empty_descs,
	        (unsigned long long)xs.tx_ring_empty_descs,
	        (unsigned long long)xs.rx_invalid_descs, (unsigned long long)xs.tx_invalid_descs);
}

static double ib_per(uint64_t v, uint64_t per)
{
	return per ? (double)v / (double)per : 0.0;
}

/* --stats: what the loop did per request, to tell a batched regime from a lock-stepped
 * one (bench/pp32_runs.sh reads this line): rx frames per non-empty poll, tx frames
 * per push, polls / sleeps per request, and the process's user and system CPU time
 * per request (getrusage: the kernel's share is the copy-mode AF_XDP path). */
static void ib_stats_report(const struct ib *b)
{
	struct ipk_node_stats ns;
	struct ipk_io_stats io;
	struct rusage ru;
	uint64_t req = b->w.c.requests;
	double us = 0, sy = 0;

	ipk_node_stats(b->n, &ns);
	ipk_io_stats(ipk_node_io(b->n), &io);
	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		us = (double)ru.ru_utime.tv_sec * 1e6 + (double)ru.ru_utime.tv_usec;
		sy = (double)ru.ru_stime.tv_sec * 1e6 + (double)ru.ru_stime.tv_usec;
	}
	fprintf(stderr, "ipkit-bench: stats: requests %llu rx/poll %.2f tx/push %.2f "
	        "polls/req %.3f empty/req %.3f sleeps/req %.3f spins/req %.3f spin_hits %.2f "
	        "pushes/req %.3f "
	        "user_us/req %.3f sys_us/req %.3f rx_drops %llu tx_drops %llu retransmits %llu\n",
	        (unsigned long long)req, ib_per(ns.rx_frames, ns.rx_polls),
	        ib_per(ns.tx_frames, ns.tx_pushes), ib_per(ns.polls, req),
	        ib_per(ns.polls - ns.rx_polls, req), ib_per(ns.sleeps, req),
	        ib_per(ns.spins, req), ib_per(ns.spin_hits, ns.spins),
	        ib_per(ns.tx_pushes, req), ib_per((uint64_t)us, req), ib_per((uint64_t)sy, req),
	        (unsigned long long)io.rx_drops, (unsigned long long)io.tx_drops,
	        (unsigned long long)ipk_counters(ipk_node_ctx(b->n))->tcp_retransmits);
	ib_stats_xsk(b);
}

/* -T > 1 or a thread model other than the single loop: the workers runtime. */
static int ib_use_workers(const struct bench_opts *o)
{
	if (o->threads == 1 && o->model == BENCH_MODEL_UNIFIED)
		return 0;
#if IB_HAVE_WORKERS
	return 1;
#else
	fprintf(stderr, "ipkit-bench: -T %u / --model %s: the multi-core runtime is not "
	        "available yet in this build (single thread only; ipkit-bench-linux has -T)\n",
	        o->threads, bench_model_name(o->model));
	return -1;
#endif
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	struct bench_report r;
	struct ib *b;
	volatile int *stop;
	int rc = bench_opts_parse(&o, BENCH_PROG_IPKIT, argc, argv, stdout, stderr);
	if (rc != BENCH_OPTS_OK)
		return rc == BENCH_OPTS_HELP ? BENCH_EXIT_OK : BENCH_EXIT_USAGE;
	switch (ib_use_workers(&o)) {
	case 1: return bench_workers_run(&o);
	case -1: return BENCH_EXIT_USAGE;
	default: break;
	}
	b = (struct ib *)calloc(1, sizeof(*b));
	if (!b || bench_worker_init(&b->w, &o, o.client ? o.conns : 0) < 0)
		return BENCH_EXIT_SETUP;
	b->o = &o;
	b->srv.family = IPK_AF_INET6;
	memcpy(b->srv.a, o.server_ip6, 16); /* used over IPv6 only */
	stop = app_stop_flag();
	b->n = ib_node(b);
	ipk_node_set_spin(b->n, o.spin_us); /* 0..10000, checked by bench_opts_parse */
	if (o.zerocopy && ib_zc_setup(b) < 0)
		return BENCH_EXIT_SETUP;
	if (o.ip6 && ib_wait_addr6(b, stop) < 0)
		fprintf(stderr, "ipkit-bench: --ip6 address not in use after 5 s (DAD conflict?)\n");
	if (o.client)
		ib_warm_up(b, stop);
	if (o.client ? ib_client_start(b) < 0 :
	    (o.proto == 17 ? ipk_udp_bind(ipk_node_ctx(b->n), ipk_htons(o.port)) :
	     ipk_tcp_listen(ipk_node_ctx(b->n), ipk_htons(o.port), 1024)) < 0) {
		fprintf(stderr, "ipkit-bench: cannot bind/listen on port %u\n", o.port);
		return BENCH_EXIT_SETUP;
	}
	if (!o.client)
		fprintf(stderr, "ipkit-bench: serving on %s port %u (%s)\n", o.io, o.port,
		        o.proto == 17 ? "udp" : "tcp");
	bench_report_start(&r, &o, stdout, ib_now(b));
	ib_loop(b, stop, &r);
	if (o.client)
		ib_finish(b);
	bench_report_summary(&r, &b->w.c, &b->w.lat, ib_now(b));
	rc = bench_exit_status(&o, &b->w.c);
	if (b->zc)
		ib_zc_report(b);
	if (o.stats)
		ib_stats_report(b);
	ipk_pkt_free(b->zc); /* clones the core still holds keep the buffer until it goes */
	ipk_node_destroy(b->n);
	ipk_pool_destroy(b->zc_pool); /* after the node: the core held slices of it */
	bench_worker_free(&b->w);
	free(b);
	return rc;
}
