/*
 * Embedding the ipkit core for TCP: two contexts in one process, wired back to back
 * in memory. Everything an integrator writes is here:
 *
 *   1. a packet pool behind the packet ops (one pool shared by both contexts, so a
 *      frame crosses the "wire" without a copy);
 *   2. memory for each context, its connections and pb descriptors, from malloc;
 *   3. the event callbacks: a listener on B, an active open from A, 64 KiB each way
 *      through 16 KiB buffers, so both flow controls work (ipk_tcp_write takes what
 *      fits, tcp_acked resumes it; ipk_tcp_recved reopens the window), then close;
 *   4. a loop: hand each context the frames the other sent -> ipk_run -> advance a
 *      virtual clock to the earliest deadline when nothing is in flight.
 *
 * It runs as a test (suite 'unit'): every received byte is checked against the
 * sender's pattern, both connections must end in IPK_CLOSE_NORMAL, and every pool
 * (packets, connections, pb descriptors) must be back at its starting count.
 * README.md quotes this file ("Embedding the core"); tests/port/readme_sync.py keeps
 * the two in step.
 */
#include <ipkit/core.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * 1. Packets. The core never allocates: it asks for packets through these ops and
 * gives back every packet it is handed, either to pkt_free or to tx. A packet is a
 * descriptor (data window + chain link) over a reference-counted buffer, so clone is
 * cheap. Free lists keep alloc/free O(1).
 */
#define BUF_SIZE 2048
#define NBUFS 1024
#define NDESCS 2048 /* more descriptors than buffers: clones share a buffer */

struct buf { uint32_t refs; struct buf *next_free; uint8_t mem[BUF_SIZE]; };
struct pkt { struct buf *buf; uint32_t off, len; struct pkt *next; };
struct pool {
	struct buf bufs[NBUFS];
	struct pkt descs[NDESCS];
	struct buf *free_bufs;
	struct pkt *free_descs; /* threaded through pkt.next */
	int out;                /* descriptors in use, to prove nothing leaks */
};

static struct pkt *desc_get(struct pool *p, struct buf *b)
{
	struct pkt *k = p->free_descs;
	if (!k) return NULL;
	p->free_descs = k->next;
	k->buf = b; k->off = 0; k->len = 0; k->next = NULL;
	b->refs++; p->out++;
	return k;
}
/* Every op gets the opaque of ipk_config: a node, whose first member points to the pool. */
#define POOL(opq) (*(struct pool **)(opq))
static void *pkt_alloc(void *opq)
{
	struct pool *p = POOL(opq);
	struct buf *b = p->free_bufs;
	if (!b || !p->free_descs) return NULL; /* the core counts it and backs off */
	p->free_bufs = b->next_free;
	return desc_get(p, b);
}
static void pkt_free(void *pk, void *opq)
{
	struct pool *p = POOL(opq);
	struct pkt *k = (struct pkt *)pk;
	if (--k->buf->refs == 0) { k->buf->next_free = p->free_bufs; p->free_bufs = k->buf; }
	k->next = p->free_descs; p->free_descs = k; p->out--;
}
static void *pkt_clone(void *pk, void *opq)
{
	struct pkt *k = (struct pkt *)pk, *c = desc_get(POOL(opq), k->buf);
	if (c) { c->off = k->off; c->len = k->len; }
	return c;
}
static uint8_t *pkt_data(void *k, void *o) { (void)o; return ((struct pkt *)k)->buf->mem + ((struct pkt *)k)->off; }
static uint32_t pkt_len(void *k, void *o) { (void)o; return ((struct pkt *)k)->len; }
static void pkt_set_len(void *k, uint32_t n, void *o) { (void)o; ((struct pkt *)k)->len = n; }
static void pkt_adj_head(void *k, uint32_t n, void *o) { (void)o; ((struct pkt *)k)->off += n; ((struct pkt *)k)->len -= n; }
static void pkt_trim_tail(void *k, uint32_t n, void *o) { (void)o; ((struct pkt *)k)->len -= n; }
static void *pkt_chain_next(void *k, void *o) { (void)o; return ((struct pkt *)k)->next; }
static void *pkt_chain_cut(void *pk, void *o)
{
	struct pkt *k = (struct pkt *)pk, *rest = k->next;
	(void)o;
	k->next = NULL;
	return rest;
}
static void pkt_chain_append(void *head, void *tail, void *o)
{
	struct pkt *k = (struct pkt *)head;
	(void)o;
	while (k->next) k = k->next;
	k->next = (struct pkt *)tail;
}

static void pool_init(struct pool *p)
{
	int i;
	memset(p, 0, sizeof(*p));
	for (i = NBUFS - 1; i >= 0; i--) { p->bufs[i].next_free = p->free_bufs; p->free_bufs = &p->bufs[i]; }
	for (i = NDESCS - 1; i >= 0; i--) { p->descs[i].next = p->free_descs; p->free_descs = &p->descs[i]; }
}

/* ---------------------------------------------------------------------------
 * The nodes and the wire. A node is one context with its memory, its inbox (frames
 * the other node sent, waiting for our ipk_run) and one TCP connection's state.
 */
#define STREAM_BYTES (64u * 1024) /* each side sends this much */
#define NCONNS 4
#define NPBS 256
#define INBOX 1024

struct node {
	struct pool *pool; /* first: the packet ops read it from the opaque */
	struct node *peer;
	const char *name;
	struct ipk_ctx *ctx;
	void *ctx_mem, *conn_mem, *pb_mem;
	uint64_t *now;     /* the shared virtual clock */
	uint32_t rng;
	void *inbox[INBOX];
	uint32_t in_n;
	/* the connection */
	struct ipk_conn *c;
	uint8_t seed;      /* our stream's byte i is (uint8_t)(i * 7 + seed) */
	uint32_t sent;     /* bytes of our stream queued so far */
	uint32_t rcvd;     /* bytes of the peer's stream received and checked */
	int fin_sent, eof, closed, bad;
	enum ipk_close_reason why;
	uint32_t conns0;   /* free connection objects at the start */
};

/* ops->tx: the frame is ours now. The wire hands it, unchanged and uncopied, to the
 * peer's inbox; the peer's ipk_run takes ownership. A full inbox drops it, as a
 * real link would (TCP retransmits). */
static void wire_tx(void *pk, void *opq)
{
	struct node *n = (struct node *)opq;
	struct node *to = n->peer;
	if (to->in_n < INBOX)
		to->inbox[to->in_n++] = pk;
	else
		pkt_free(pk, opq); /* one pool, so either node may free it */
}

static uint32_t node_random(void *opq)
{
	struct node *n = (struct node *)opq; /* xorshift32: fine for a demo, not for ISNs */
	n->rng ^= n->rng << 13; n->rng ^= n->rng >> 17; n->rng ^= n->rng << 5;
	return n->rng;
}

/* ---------------------------------------------------------------------------
 * 3. Events. They run inside ipk_run (or inside an API call); they may call the core
 * API on the same context, passing the `now` of the call they run in.
 */

/* Queue as much of our stream as the send buffer takes; close once it is all queued
 * (the FIN goes after the data). Called on open and on every tcp_acked. */
static void pump(struct node *n)
{
	uint8_t chunk[4096];
	while (n->sent < STREAM_BYTES) {
		uint32_t i, len = STREAM_BYTES - n->sent;
		int w;
		if (len > sizeof(chunk)) len = sizeof(chunk);
		for (i = 0; i < len; i++) chunk[i] = (uint8_t)((n->sent + i) * 7u + n->seed);
		w = ipk_tcp_write(n->ctx, n->c, chunk, len, *n->now);
		if (w < 0) { printf("%s: write: %s\n", n->name, ipk_strerror(w)); n->bad = 1; return; }
		if (w == 0) return; /* send buffer full: tcp_acked calls us again */
		n->sent += (uint32_t)w;
	}
	if (!n->fin_sent && ipk_tcp_close(n->ctx, n->c, *n->now) == IPK_OK)
		n->fin_sent = 1;
}

static void *on_accepted(struct ipk_ctx *ctx, struct ipk_conn *c, void *opq)
{
	struct node *n = (struct node *)opq;
	(void)ctx;
	n->c = c;
	pump(n);
	return n; /* becomes the connection's user pointer */
}

static void on_connected(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *opq)
{
	struct node *n = (struct node *)opq;
	(void)ctx; (void)c; (void)user;
	pump(n);
}

/* In-order bytes, zero-copy: `len` bytes at `off` in the core's packet, valid only
 * during this call. Check them, then give the window back with ipk_tcp_recved. */
static void on_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pk,
                       uint32_t off, uint32_t len, void *opq)
{
	struct node *n = (struct node *)opq;
	const uint8_t *p;
	uint32_t i;
	(void)user;
	if (!pk) { n->eof = 1; return; } /* len 0, no packet: the peer's FIN */
	p = pkt_data(pk, opq) + off;
	for (i = 0; i < len; i++)
		if (p[i] != (uint8_t)((n->rcvd + i) * 7u + n->peer->seed)) n->bad = 1;
	n->rcvd += len;
	ipk_tcp_recved(ctx, c, len, *n->now);
}

static void on_acked(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, uint32_t bytes,
                     void *opq)
{
	(void)ctx; (void)c; (void)user; (void)bytes;
	pump((struct node *)opq);
}

/* The handle is dead after this call. */
static void on_closed(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
                      enum ipk_close_reason why, void *opq)
{
	struct node *n = (struct node *)opq;
	(void)ctx; (void)c; (void)user;
	n->closed = 1;
	n->why = why;
	n->c = NULL;
}

static const struct ipk_ops node_ops = {
	.pkt_alloc = pkt_alloc, .pkt_free = pkt_free, .pkt_data = pkt_data, .pkt_len = pkt_len,
	.pkt_set_len = pkt_set_len, .pkt_adj_head = pkt_adj_head, .pkt_trim_tail = pkt_trim_tail,
	.pkt_clone = pkt_clone, .pkt_chain_append = pkt_chain_append,
	.pkt_chain_next = pkt_chain_next, .pkt_chain_cut = pkt_chain_cut,
	.tx = wire_tx, .random = node_random,
	.tcp_accepted = on_accepted, .tcp_connected = on_connected, .tcp_payload = on_payload,
	.tcp_acked = on_acked, .tcp_closed = on_closed,
};

/* 2. Memory: the integrator sizes and owns it all; the core keeps pointers into it. */
static int node_init(struct node *n, uint8_t id, struct pool *pool, uint64_t *now)
{
	const uint8_t mac[6] = {0x02, 0, 0, 0, 0, id};
	struct ipk_config cfg;
	size_t size;

	n->pool = pool;
	n->now = now;
	n->rng = 0x2545f491u * id;
	n->seed = (uint8_t)(id * 31u);
	ipk_config_default(&cfg);
	cfg.opaque = n;
	memcpy(cfg.mac, mac, 6);
	cfg.ip4_be = IPK_IP4(10, 0, 0, id);
	cfg.netmask_be = IPK_IP4(255, 255, 255, 0);
	cfg.pkt_buf_size = BUF_SIZE;
	cfg.tcp_sndbuf = cfg.tcp_rcvbuf = 16 * 1024; /* small: 64 KiB must wait for windows */

	size = ipk_ctx_size(&cfg);
	n->ctx_mem = size ? malloc(size) : NULL; /* malloc's alignment covers the 8 needed */
	n->conn_mem = calloc(NCONNS, ipk_conn_size());
	n->pb_mem = calloc(NPBS, ipk_pb_size());
	if (!n->ctx_mem || !n->conn_mem || !n->pb_mem) return -1;
	n->ctx = ipk_ctx_init(n->ctx_mem, size, &cfg, &node_ops);
	if (!n->ctx) return -1;
	if (ipk_add_conns(n->ctx, n->conn_mem, NCONNS) != NCONNS) return -1;
	if (ipk_add_pbs(n->ctx, n->pb_mem, NPBS) != NPBS) return -1;
	return 0;
}

static void node_free(struct node *n)
{
	free(n->ctx_mem); free(n->conn_mem); free(n->pb_mem); /* context first unused */
}

/* ---------------------------------------------------------------------------
 * 4. The loop. Each round hands every node the frames the other sent (ownership
 * passes to its core) and runs it; when no frame is in flight, virtual time jumps to
 * the earliest deadline either core asked for (delayed ACKs, retransmission, ARP).
 * tcp_closed comes when a connection enters TIME_WAIT (the handle is dead then), but
 * the connection object goes back to the pool only when TIME_WAIT ends (2 MSL,
 * ipk_config.tcp_time_wait_ns): the loop runs until both pools are full again.
 */
static uint64_t deliver(struct node *n)
{
	void *batch[INBOX];
	uint32_t got = n->in_n;
	memcpy(batch, n->inbox, got * sizeof(void *));
	n->in_n = 0; /* frames the run sends to us land in a fresh inbox */
	return ipk_run(n->ctx, batch, got, *n->now);
}

static int done(const struct node *n)
{
	return n->closed && ipk_conns_free(n->ctx) == n->conns0;
}

static int run(struct node *a, struct node *b, uint64_t *now, int rounds)
{
	while (rounds-- > 0) {
		uint64_t da = deliver(a), db = deliver(b);
		if (done(a) && done(b)) return 0;
		if (a->in_n == 0 && b->in_n == 0) {
			uint64_t next = da < db ? da : db;
			if (next == UINT64_MAX) return -1; /* nothing will ever happen again */
			*now = next > *now ? next : *now;
		} else {
			*now += 10000; /* 10 us a round while frames fly */
		}
	}
	return -1;
}

static int check(int ok, const char *what)
{
	printf("%s %s\n", ok ? "ok" : "FAIL", what);
	return ok ? 0 : 1;
}

int main(void)
{
	static struct pool pool; /* 2 MiB of buffers: static, not on the stack */
	static struct node a, b;
	uint64_t now = 1000000000u; /* virtual time, ns */
	uint32_t pbs_a, pbs_b;
	int fails = 0, rc;

	pool_init(&pool);
	a.name = "A"; b.name = "B";
	a.peer = &b; b.peer = &a;
	if (node_init(&a, 1, &pool, &now) || node_init(&b, 2, &pool, &now)) {
		printf("FAIL setup\n");
		return 1;
	}
	pbs_a = ipk_pbs_free(a.ctx); pbs_b = ipk_pbs_free(b.ctx);
	a.conns0 = ipk_conns_free(a.ctx); b.conns0 = ipk_conns_free(b.ctx);

	rc = ipk_tcp_listen(b.ctx, ipk_htons(7), 8);
	fails += check(rc == IPK_OK, "B listens on port 7");
	rc = ipk_tcp_connect(a.ctx, IPK_IP4(10, 0, 0, 2), ipk_htons(7), 0, &a, &a.c, now);
	fails += check(rc == IPK_OK, "A connects to 10.0.0.2:7");
	fails += check(run(&a, &b, &now, 100000) == 0, "both connections closed, TIME_WAIT over");

	fails += check(a.rcvd == STREAM_BYTES && b.rcvd == STREAM_BYTES && a.sent == STREAM_BYTES &&
	               b.sent == STREAM_BYTES, "64 KiB each way");
	fails += check(!a.bad && !b.bad, "every byte as sent");
	fails += check(a.eof && b.eof, "both saw the peer's FIN");
	fails += check(a.why == IPK_CLOSE_NORMAL && b.why == IPK_CLOSE_NORMAL,
	               "both closed normally (CLOSED after FIN/ACK both ways)");
	fails += check(ipk_conns_free(a.ctx) == a.conns0 && ipk_conns_free(b.ctx) == b.conns0,
	               "connection pools back to start");
	fails += check(ipk_pbs_free(a.ctx) == pbs_a && ipk_pbs_free(b.ctx) == pbs_b,
	               "pb descriptor pools back to start");
	fails += check(pool.out == 0, "every packet back in the pool");
	printf("A: %llu frames out, B: %llu frames out, %llu ms of virtual time\n",
	       (unsigned long long)ipk_counters(a.ctx)->tx_frames,
	       (unsigned long long)ipk_counters(b.ctx)->tx_frames,
	       (unsigned long long)((now - 1000000000u) / 1000000u));
	node_free(&a);
	node_free(&b);
	return fails ? 1 : 0;
}
