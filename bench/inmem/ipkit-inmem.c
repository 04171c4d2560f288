/*
 * ipkit-inmem: two ipkit contexts in one process and one thread over an in-memory
 * wire, to measure what the stack itself costs (issue 6, "In-memory harness").
 *
 * The wire is zero-copy: a frame one engine passes to ops->tx is put, as the same
 * packet object, on the other engine's receive batch for its next ipk_run. Both
 * engines share one packet pool (refcounted buffers, descriptors on free lists).
 * ARP entries are static, so only TCP/IPv4/Ethernet frames cross; with --ip6 the
 * connections are IPv6 (fd00::1, fd00::2, no DAD) and one ND exchange precedes them.
 *
 * Two builds of this one file (bench/inmem/meson.build):
 *   ipkit-inmem        links the core library, ops called through the table;
 *   ipkit-inmem-unity  includes core/ipkit_unity.c with IPK_OPS_STATIC = im_ops, so
 *                      every op is a direct, inlinable call (the fast configuration).
 * Options and output: im_common.h / --help.
 */
#include <ipkit/core.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "im_common.h"

#ifdef IM_UNITY
#define IM_BUILD "unity"
#else
#define IM_BUILD "lib"
#endif

/* ------------------------------------------------------------ packet pool */

#define IM_BUF_SIZE 2048u
#define IM_NBUFS 16384u  /* 32 MiB: two 256 KiB send buffers and everything in flight */
#define IM_NDESCS 32768u /* clones (TSO chains, --zerocopy) */
#define IM_RXQ 32768u    /* frames one engine can have waiting (all buffers fit) */
#define IM_FRAME_MAX (14u + 1500u)

struct im_buf;

struct im_pkt {
	uint8_t *data;
	uint32_t len;
	struct im_buf *buf;
	struct im_pkt *next; /* chain link, or free-list link of a clone descriptor */
};

/*
 * A buffer carries its own first descriptor, so pkt_alloc is one pop from one free
 * list; clones (ops->pkt_clone: TSO chains, --zerocopy) take descriptors of their
 * own, and the buffer goes back when its last descriptor is freed. The embedded
 * descriptor of a buffer held by clones alone stays unused until then.
 */
struct im_buf {
	struct im_pkt pk;
	uint32_t refs;
	struct im_buf *next_free;
	uint8_t mem[IM_BUF_SIZE] __attribute__((aligned(64)));
};

struct im_pool {
	/* --zerocopy: the buffer every packet over the pattern refers to; its count
	 * starts at 1, so it never reaches the free list. */
	struct im_buf pat_buf;
	struct im_buf *bufs, *free_bufs;
	void *raw;
	struct im_pkt *descs, *free_descs;
};

struct im_app;

/* One engine and its side of the wire; the ops' opaque. */
struct im_node {
	struct im_pool *pool; /* shared by both nodes */
	struct im_node *peer;
	struct im_app *app;
	struct ipk_ctx *ctx;
	void **rxq, **batch;  /* frames waiting for this node; the batch being run */
	uint32_t rxn;
	int rare_tx;          /* --corrupt or offload: every frame takes im_tx_rare */
	int copy_wire;        /* --wire copy (default): frames are copied (im_dma) */
	uint64_t frames, wire_bytes; /* what this node sent over the wire */
	uint64_t deadline;
	int is_client;
	int bulk_sender;      /* the client in a bulk run: writes more on tcp_acked */
	uint32_t rng;
	void *mem_ctx, *mem_conns, *mem_pbs;
};

/* A clone descriptor over b (one more reference to it), or NULL. */
static struct im_pkt *im_desc(struct im_pool *p, struct im_buf *b)
{
	struct im_pkt *k = p->free_descs;

	if (!k)
		return NULL;
	p->free_descs = k->next;
	k->next = NULL;
	k->buf = b;
	b->refs++;
	return k;
}

static void *im_alloc(void *o)
{
	struct im_pool *p = ((struct im_node *)o)->pool;
	struct im_buf *b = p->free_bufs;

	if (!b)
		return NULL;
	p->free_bufs = b->next_free;
	b->refs = 1;
	b->pk.data = b->mem;
	b->pk.len = 0;
	b->pk.next = NULL;
	return &b->pk;
}

static void im_free(void *pk, void *o)
{
	struct im_pool *p = ((struct im_node *)o)->pool;
	struct im_pkt *k = (struct im_pkt *)pk;
	struct im_buf *b = k->buf;

	if (k != &b->pk) {
		k->next = p->free_descs;
		p->free_descs = k;
	}
	if (--b->refs == 0) {
		b->next_free = p->free_bufs;
		p->free_bufs = b;
	}
}

/* Packets not on the free lists (im_collect: zero once both engines are at rest).
 * Counted at the end, not per packet, so the check costs the run nothing. */
static long im_pool_out(const struct im_pool *p)
{
	const struct im_buf *b;
	const struct im_pkt *k;
	long out = (long)IM_NBUFS + (long)IM_NDESCS;

	for (b = p->free_bufs; b && out > 0; b = b->next_free)
		out--;
	for (k = p->free_descs; k && out > 0; k = k->next)
		out--;
	return out;
}

static void *im_clone(void *pk, void *o)
{
	struct im_pkt *k = (struct im_pkt *)pk;
	struct im_pkt *c = im_desc(((struct im_node *)o)->pool, k->buf);

	if (c) {
		c->data = k->data;
		c->len = k->len;
	}
	return c;
}

static uint8_t *im_data(void *k, void *o) { (void)o; return ((struct im_pkt *)k)->data; }
static uint32_t im_len(void *k, void *o) { (void)o; return ((struct im_pkt *)k)->len; }
static void im_set_len(void *k, uint32_t n, void *o) { (void)o; ((struct im_pkt *)k)->len = n; }
static void im_adj_head(void *pk, uint32_t n, void *o)
{
	struct im_pkt *k = (struct im_pkt *)pk;

	(void)o;
	k->data += n;
	k->len -= n;
}
static void im_trim_tail(void *k, uint32_t n, void *o) { (void)o; ((struct im_pkt *)k)->len -= n; }
static void *im_next(void *k, void *o) { (void)o; return ((struct im_pkt *)k)->next; }
static void *im_cut(void *pk, void *o)
{
	struct im_pkt *k = (struct im_pkt *)pk, *rest = k->next;

	(void)o;
	k->next = NULL;
	return rest;
}
static void im_append(void *h, void *t, void *o)
{
	struct im_pkt *k = (struct im_pkt *)h;

	(void)o;
	while (k->next)
		k = k->next;
	k->next = (struct im_pkt *)t;
}

static uint32_t im_random(void *o)
{
	struct im_node *n = (struct im_node *)o;

	n->rng = n->rng * 1103515245u + 12345u;
	return n->rng;
}

/* Offload profile: the wire never corrupts, so the "NIC" reports every checksum good
 * and the transmit marks need no action. */
static uint32_t im_rx_csum(void *pkt, void *o)
{
	(void)pkt;
	(void)o;
	return IPK_RXCSUM_IP4_GOOD | IPK_RXCSUM_L4_GOOD;
}
static void im_tx_offload(void *pkt, const struct ipk_tx_meta *m, void *o)
{
	(void)pkt;
	(void)m;
	(void)o;
}

static void im_tx(void *pkt, void *o);
static void *im_accepted(struct ipk_ctx *ctx, struct ipk_conn *c, void *o);
static void im_connected(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *o);
static void im_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                       uint32_t off, uint32_t len, void *o);
static void im_acked(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, uint32_t bytes, void *o);
static void im_closed(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
                      enum ipk_close_reason why, void *o);

#define IM_OPS_COMMON                                                                      \
	.pkt_alloc = im_alloc, .pkt_free = im_free, .pkt_data = im_data, .pkt_len = im_len,   \
	.pkt_set_len = im_set_len, .pkt_adj_head = im_adj_head, .pkt_trim_tail = im_trim_tail, \
	.pkt_clone = im_clone, .pkt_chain_append = im_append, .pkt_chain_next = im_next,      \
	.pkt_chain_cut = im_cut, .tx = im_tx, .tx_offload = im_tx_offload, .rx_csum = im_rx_csum, \
	.random = im_random, .tcp_accepted = im_accepted, .tcp_connected = im_connected,       \
	.tcp_payload = im_payload, .tcp_closed = im_closed
/* The client (the bulk sender writes more on tcp_acked) */
static const struct ipk_ops im_ops = {IM_OPS_COMMON, .tcp_acked = im_acked};
/* The server uses no tcp_acked, so it registers none (optional in ipk_ops), as
 * the lwIP harness's server sets no tcp_sent: the library build then makes no
 * call for it. The unity build binds im_ops for both nodes (IPK_OPS_STATIC), where
 * im_acked is inline and tests bulk_sender. */
static const struct ipk_ops im_ops_srv = {IM_OPS_COMMON};

#ifdef IM_UNITY
#define IPK_OPS_STATIC im_ops
#include "ipkit_unity.c"
#endif

/* -------------------------------------------------------------- the app */

/* 32 bytes, two to a cache line: with many connections every request touches its
 * client and server entries, and a spread-out entry would cost a cache miss more. */
struct im_conn {
	struct ipk_conn *c;
	uint64_t k;        /* ping-pong: current request; bulk: bytes written */
	uint64_t rx_total; /* bulk receiver: bytes checked */
	uint32_t off;      /* ping-pong client: im_req_off(id, k), stepped by im_req_next */
	uint32_t got;      /* ping-pong: bytes of the current reply received */
};

struct im_app {
	const struct im_opts *o;
	struct im_node *client;     /* the sending engine (--zerocopy packets) */
	const uint8_t *pat;
	uint32_t len;               /* o->len and o->requests, read per request */
	uint64_t requests;
	uint64_t now;
	uint64_t issued, done;      /* ping-pong requests sent / verified */
	uint64_t rx_bytes;          /* bytes verified */
	uint64_t data_frames, corrupted;
	uint64_t tso_frames;        /* frames above the MTU or chained (TSO) */
	int connected, accepted, closed;
	const char *error;
	struct im_conn *cli, *srv;  /* o->conns each, on 64-byte boundaries */
	void *conn_mem;
};

static void im_fail(struct im_app *a, const char *why)
{
	if (!a->error)
		a->error = why;
}

static void im_free_chain(struct im_pkt *k, void *o)
{
	while (k) {
		struct im_pkt *nx = k->next;
		im_free(k, o);
		k = nx;
	}
}

/* Flip the last byte of frame k. In a chain (offload profile, scatter-gather) the
 * last packet is a clone of send-queue data, or the pattern itself with
 * --zerocopy: its last byte moves, flipped, into a packet of its own, so that the
 * sender's bytes stay right. Returns 0 when no packet was left. */
static int im_corrupt(struct im_pkt *k, void *o)
{
	struct im_pkt *last = k, *cp;

	while (last->next)
		last = last->next;
	if (last == k) {
		k->data[k->len - 1] ^= 0x5a;
		return 1;
	}
	cp = (struct im_pkt *)im_alloc(o);
	if (!cp)
		return 0;
	cp->data[0] = (uint8_t)(last->data[last->len - 1] ^ 0x5a);
	cp->len = 1;
	last->len--;
	last->next = cp;
	return 1;
}

/*
 * The copying wire (--wire copy, the default): the receiver gets fresh buffers
 * holding the frame's bytes, as from a NIC's receive DMA, and the sender's packet is
 * freed as its transmit completion would free it. A chain (offload profile) is copied
 * link by link. NULL, with the run failed, when the pool is empty.
 */
/* The wire's copy goes through the C library's memcpy, as the lwIP and smoltcp
 * harnesses' copies do (pbuf_copy_partial, copy_from_slice): called directly, gcc
 * inlines this copy (its length is bounded by IM_BUF_SIZE) as `rep movsq`, which took
 * about twice the time of glibc's vector copy per 1.5 KB frame here (perf annotate). */
static void *(*volatile im_memcpy)(void *, const void *, size_t) = memcpy;

static struct im_pkt *im_dma(struct im_node *n, struct im_pkt *k)
{
	struct im_pkt *head = NULL, **tail = &head, *src;

	for (src = k; src; src = src->next) {
		uint32_t done = 0;

		do { /* a link above a buffer (a TSO chain's --zerocopy link) takes several */
			struct im_pkt *c = (struct im_pkt *)im_alloc(n);
			uint32_t m = src->len - done < IM_BUF_SIZE ? src->len - done : IM_BUF_SIZE;

			if (!c) {
				im_fail(n->app, "wire: no receive buffer");
				im_free_chain(head, n);
				im_free_chain(k, n);
				return NULL;
			}
			im_memcpy(c->data, src->data + done, m);
			c->len = m;
			done += m;
			*tail = c;
			tail = &c->next;
		} while (done < src->len);
	}
	im_free_chain(k, n);
	return head;
}

/* The wire's rare cases: a chain (scatter-gather, offload profile only: without SG a
 * chain is a core bug), a frame above the MTU (TSO), a full queue, and --corrupt,
 * which flips one payload byte of the K-th frame that carries data. */
static void im_tx_rare(struct im_node *n, struct im_pkt *k)
{
	struct im_pkt *cp;
	struct im_node *p = n->peer;
	struct im_app *a = n->app;

	if ((k->next && !a->o->offload) || p->rxn == IM_RXQ) {
		im_fail(a, k->next ? "chain on the wire" : "wire queue overflow");
		im_free_chain(k, n);
		return;
	}
	if (k->next || k->len > IM_FRAME_MAX)
		a->tso_frames++;
	n->frames++;
	for (cp = k; cp; cp = cp->next)
		n->wire_bytes += cp->len;
	if (n->copy_wire && !(k = im_dma(n, k)))
		return;
	if (a->o->corrupt_at && (k->next || k->len > 14 + 20 + 32) &&
	    ++a->data_frames == a->o->corrupt_at) {
		if (!im_corrupt(k, n))
			im_fail(a, "no buffer to corrupt a frame");
		a->corrupted++;
	}
	p->rxq[p->rxn++] = k;
}

/* The wire: the frame goes to the peer's next batch, copied into a fresh buffer
 * (--wire copy) or as it is (--wire handoff). The common frame (one packet within the MTU, room on the wire, no corruption asked
 * for) takes the first branch; everything else is checked in im_tx_rare. */
static void im_tx(void *pkt, void *o)
{
	struct im_node *n = (struct im_node *)o, *p = n->peer;
	struct im_pkt *k = (struct im_pkt *)pkt;

	if (!n->rare_tx && !k->next && k->len <= IM_FRAME_MAX && p->rxn < IM_RXQ) {
		n->frames++;
		n->wire_bytes += k->len;
		if (n->copy_wire && !(k = im_dma(n, k)))
			return;
		p->rxq[p->rxn++] = k;
	} else
		im_tx_rare(n, k);
}

static void im_send_req(struct ipk_ctx *ctx, struct im_app *a, struct im_conn *e)
{
	int w = ipk_tcp_write(ctx, e->c, a->pat + e->off, a->len, a->now);

	if (w != (int)a->len)
		im_fail(a, "request did not fit the send buffer");
	a->issued++;
}

/* --zerocopy: queue n pattern bytes at stream offset k as one packet over the
 * pattern (no copy); 0 when the send buffer has no room for all of it. */
static int im_send_zc(struct ipk_ctx *ctx, struct im_node *nd, struct im_conn *e, uint32_t n)
{
	struct im_pkt *k = im_desc(nd->pool, &nd->pool->pat_buf);
	int w;

	if (!k)
		return 0;
	k->data = (uint8_t *)nd->app->pat + e->k % IM_PAT;
	k->len = n;
	w = ipk_tcp_send(ctx, e->c, k, nd->app->now);
	if (w < 0)
		im_free(k, nd);
	return w == IPK_EAGAIN ? 0 : w;
}

static void im_bulk_pump(struct ipk_ctx *ctx, struct im_app *a, struct im_conn *e)
{
	while (e->k < a->o->bytes) {
		uint64_t left = a->o->bytes - e->k;
		uint32_t n = left < a->o->msg ? (uint32_t)left : a->o->msg;
		int w = a->o->zerocopy ? im_send_zc(ctx, a->client, e, n)
		                       : ipk_tcp_write(ctx, e->c, a->pat + e->k % IM_PAT, n, a->now);

		if (w <= 0) {
			if (w < 0)
				im_fail(a, "bulk write failed");
			return;
		}
		e->k += (uint32_t)w;
	}
}

static void *im_accepted(struct ipk_ctx *ctx, struct ipk_conn *c, void *o)
{
	struct im_app *a = ((struct im_node *)o)->app;
	struct im_conn *e;

	(void)ctx;
	if (a->accepted >= a->o->conns) {
		im_fail(a, "unexpected connection");
		return NULL;
	}
	e = &a->srv[a->accepted++];
	e->c = c;
	return e;
}

static void im_connected(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *o)
{
	(void)ctx;
	(void)c;
	(void)user;
	((struct im_node *)o)->app->connected++;
}

/* Server: echo (ping-pong) or check against the stream (bulk). */
static void im_srv_payload(struct ipk_ctx *ctx, struct im_app *a, struct im_conn *e,
                           const uint8_t *d, uint32_t len)
{
	if (a->o->bulk) {
		if (memcmp(d, a->pat + e->rx_total % IM_PAT, len) != 0)
			im_fail(a, "bulk data mismatch");
		e->rx_total += len;
		a->rx_bytes += len;
	} else if (ipk_tcp_write(ctx, e->c, d, len, a->now) != (int)len) {
		im_fail(a, "echo did not fit the send buffer");
	}
	ipk_tcp_recved(ctx, e->c, len, a->now);
}

/* Client: the reply must be the request, byte for byte. */
static void im_cli_payload(struct ipk_ctx *ctx, struct im_app *a, struct im_conn *e,
                           const uint8_t *d, uint32_t len)
{
	if (e->got + len > a->len || memcmp(d, a->pat + e->off + e->got, len) != 0) {
		im_fail(a, "echo mismatch");
		return;
	}
	ipk_tcp_recved(ctx, e->c, len, a->now);
	a->rx_bytes += len;
	e->got += len;
	if (e->got < a->len)
		return;
	e->got = 0;
	e->k++;
	e->off = im_req_next(e->off);
	a->done++;
	if (a->issued < a->requests)
		im_send_req(ctx, a, e);
}

static void im_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                       uint32_t off, uint32_t len, void *o)
{
	struct im_node *n = (struct im_node *)o;
	struct im_conn *e = (struct im_conn *)user;

	(void)c;
	if (!pkt) { /* FIN: nobody closes during a run */
		im_fail(n->app, "unexpected FIN");
		return;
	}
	if (!e)
		return;
	if (n->is_client)
		im_cli_payload(ctx, n->app, e, im_data(pkt, o) + off, len);
	else
		im_srv_payload(ctx, n->app, e, im_data(pkt, o) + off, len);
}

static void im_acked(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, uint32_t bytes, void *o)
{
	struct im_node *n = (struct im_node *)o;

	(void)c;
	(void)bytes;
	if (n->bulk_sender && user)
		im_bulk_pump(ctx, n->app, (struct im_conn *)user);
}

static void im_closed(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
                      enum ipk_close_reason why, void *o)
{
	(void)ctx;
	(void)c;
	(void)user;
	(void)why;
	((struct im_node *)o)->app->closed++;
}

/* ------------------------------------------------------------ the engines */

static const uint8_t im_mac[2][6] = {{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}};
#define IM_IP(i) IPK_IP4(10, 0, 0, 1 + (i))
#define IM_PORT 5001

static uint32_t im_pow2(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

static void im_config(struct ipk_config *cfg, const struct im_opts *o, int i, void *opaque)
{
	ipk_config_default(cfg);
	cfg->opaque = opaque;
	memcpy(cfg->mac, im_mac[i], 6);
	cfg->ip4_be = IM_IP(i);
	cfg->netmask_be = IPK_IP4(255, 255, 255, 0);
	cfg->pkt_buf_size = IM_BUF_SIZE;
	cfg->conn_hash_buckets = im_pow2((uint32_t)o->conns);
	if (o->ip6) {
		cfg->ip6_enable = 1;
		cfg->ip6_addr[0] = 0xfd;
		cfg->ip6_addr[15] = (uint8_t)(1 + i);
		cfg->ip6_dad_transmits = 0;
		cfg->ip6_rs_count = 0;
	}
	/* Offload: a NIC pair with TSO + scatter-gather on the sending side and LRO on
	 * the receiving one, each engine both. The wire hands the TSO frame (a header
	 * packet chained to clones of send-queue data) to the receiver as is, where a
	 * real pair would cut it into MSS frames and coalesce them again: this profile
	 * measures what the stack costs (issue 6), not the NIC. */
	if (o->offload)
		cfg->caps = IPK_CAP_RX_CSUM_IP4 | IPK_CAP_RX_CSUM_L4 | IPK_CAP_TX_CSUM_IP4 |
		            IPK_CAP_TX_CSUM_TCP | IPK_CAP_TX_CSUM_UDP | IPK_CAP_TSO | IPK_CAP_SG |
		            IPK_CAP_LRO;
	/* The descriptor's data pointer, length and chain link are plain members: the
	 * library build reads them without an indirect call (ipk_config.pkt_fields; the
	 * unity build inlines the ops and ignores this), and writes the length itself
	 * (IPK_PKT_FIELD_LEN_SET: im_set_len only stores it). --op-calls measures
	 * without. */
	if (!o->op_calls) {
		cfg->pkt_fields = IPK_PKT_FIELD_DATA | IPK_PKT_FIELD_LEN | IPK_PKT_FIELD_NEXT |
		                  IPK_PKT_FIELD_LEN_SET;
		cfg->pkt_data_off = (uint16_t)offsetof(struct im_pkt, data);
		cfg->pkt_len_off = (uint16_t)offsetof(struct im_pkt, len);
		cfg->pkt_next_off = (uint16_t)offsetof(struct im_pkt, next);
	}
	/* im_alloc keeps no reserve and hands out what im_free took back, reset: the
	 * engine may reuse an acknowledged write's packet for the next write
	 * (IPK_PKT_RECYCLE, both builds; a real integrator with such a pool would). */
	cfg->pkt_fields |= IPK_PKT_RECYCLE;
}

static void *im_zalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);

	if (!p) {
		fprintf(stderr, "ipkit-inmem: out of memory\n");
		exit(1);
	}
	return p;
}

static int im_node_init(struct im_node *n, const struct im_opts *o, int i)
{
	struct ipk_config cfg;
	/* Twice the connections: the engine takes SYN cookies once half its pool is in
	 * SYN-RECEIVED (tcp_syncookie.c), and C handshakes all start at once here; a
	 * cookie connection would run without timestamps and SACK. */
	uint32_t nconns = 2u * (uint32_t)o->conns + 8, npbs = 8192;
	size_t sz;

	n->is_client = i == 0;
	n->bulk_sender = i == 0 && o->bulk;
	n->rare_tx = o->corrupt_at || o->offload;
	n->copy_wire = !o->handoff;
	n->rng = 0x1234567u + (uint32_t)i;
	n->rxq = (void **)im_zalloc(IM_RXQ * sizeof(void *));
	n->batch = (void **)im_zalloc(IM_RXQ * sizeof(void *));
	im_config(&cfg, o, i, n);
	sz = ipk_ctx_size(&cfg);
	n->mem_ctx = im_zalloc(sz);
	n->mem_conns = im_zalloc(nconns * ipk_conn_size());
	n->mem_pbs = im_zalloc(npbs * ipk_pb_size());
	n->ctx = ipk_ctx_init(n->mem_ctx, sz, &cfg, i == 0 ? &im_ops : &im_ops_srv);
	if (!n->ctx || ipk_add_conns(n->ctx, n->mem_conns, nconns) != (int)nconns ||
	    ipk_add_pbs(n->ctx, n->mem_pbs, npbs) != (int)npbs)
		return -1;
	return ipk_arp_add_static(n->ctx, IM_IP(1 - i), im_mac[1 - i]);
}

static void im_node_fini(struct im_node *n)
{
	free(n->rxq);
	free(n->batch);
	free(n->mem_ctx);
	free(n->mem_conns);
	free(n->mem_pbs);
}

static void im_pool_init(struct im_pool *p)
{
	uint32_t i;

	p->pat_buf.refs = 1;
	p->raw = im_zalloc(IM_NBUFS * sizeof(struct im_buf) + 64);
	p->bufs = (struct im_buf *)(((uintptr_t)p->raw + 63) & ~(uintptr_t)63);
	p->descs = (struct im_pkt *)im_zalloc(IM_NDESCS * sizeof(struct im_pkt));
	for (i = IM_NBUFS; i-- > 0;) {
		p->bufs[i].pk.buf = &p->bufs[i];
		p->bufs[i].next_free = p->free_bufs;
		p->free_bufs = &p->bufs[i];
	}
	for (i = IM_NDESCS; i-- > 0;) {
		p->descs[i].next = p->free_descs;
		p->free_descs = &p->descs[i];
	}
}

/* Run one engine on the frames waiting for it; returns the frames it got. */
static uint32_t im_step(struct im_node *n, uint64_t now)
{
	uint32_t got = n->rxn;
	void **b = n->rxq;

	n->rxq = n->batch; /* frames sent to n while it runs wait for its next step */
	n->batch = b;
	n->rxn = 0;
	n->app->now = now;
	n->deadline = ipk_run(n->ctx, b, got, now);
	return got;
}

struct im_world {
	struct im_opts o;
	struct im_pool pool;
	struct im_node node[2];
	struct im_app *app;
	uint64_t vnow;
	uint64_t wall_end; /* wall-clock bound */
};

static uint64_t im_now(struct im_world *w)
{
	return w->o.real_clock ? im_wall_ns() : w->vnow;
}

/* Drive both engines until done() or failure. Idle rounds jump (virtual clock) or
 * wait (real clock) to the next timer. Bounded by the wall clock. */
/* Inlined at each call, so done() is a direct, inlined test in the measured loop. */
static inline __attribute__((always_inline)) void
im_loop(struct im_world *w, int (*done)(const struct im_world *))
{
	struct im_app *a = w->app;
	uint32_t rounds = 0;

	while (!a->error && !done(w)) {
		uint64_t now = im_now(w), next;
		uint32_t moved = im_step(&w->node[0], now) + im_step(&w->node[1], now);

		w->vnow += 1000;
		if ((++rounds & 1023) == 0 && im_wall_ns() > w->wall_end) {
			im_fail(a, "time bound exceeded");
			return;
		}
		if (moved || w->node[0].rxn || w->node[1].rxn)
			continue;
		next = w->node[0].deadline < w->node[1].deadline ? w->node[0].deadline
		                                                 : w->node[1].deadline;
		if (next == UINT64_MAX) {
			im_fail(a, "stalled: nothing in flight and no timer armed");
			return;
		}
		if (!w->o.real_clock && next > w->vnow)
			w->vnow = next;
	}
}

static int im_all_connected(const struct im_world *w)
{
	return w->app->connected == w->o.conns && w->app->accepted == w->o.conns;
}

static int im_measured_done(const struct im_world *w)
{
	return w->o.bulk ? w->app->rx_bytes >= w->o.bytes : w->app->done >= w->o.requests;
}

/* Quiet: nothing in flight, every byte acknowledged (delayed ACKs went out). */
static int im_quiet(const struct im_world *w)
{
	int i;

	for (i = 0; i < 2; i++) {
		const struct im_app *a = w->app;
		int k;

		if (w->node[i].rxn)
			return 0;
		for (k = 0; k < w->o.conns; k++) {
			struct ipk_tcp_info ti;
			struct ipk_conn *c = i == 0 ? a->cli[k].c : a->srv[k].c;

			if (!c || ipk_tcp_info(c, &ti) != IPK_OK || ti.inflight)
				return 0;
		}
	}
	return 1;
}

/* --ip6: run both engines (bounded) until their addresses are up (no DAD: the
 * first timer pass). */
static void im_ip6_up(struct im_world *w)
{
	uint8_t addrs[4][16];
	int k;

	for (k = 0; k < 100; k++) {
		if (ipk_ip6_addrs(w->node[0].ctx, addrs, 4) >= 2 &&
		    ipk_ip6_addrs(w->node[1].ctx, addrs, 4) >= 2)
			return;
		im_step(&w->node[0], im_now(w));
		im_step(&w->node[1], im_now(w));
		w->vnow += 1000000;
	}
	im_fail(w->app, "IPv6 addresses never came up");
}

static void im_open(struct im_world *w)
{
	struct im_app *a = w->app;
	int i;

	if (ipk_tcp_listen(w->node[1].ctx, ipk_htons(IM_PORT), (uint16_t)(w->o.conns + 8)) != IPK_OK) {
		im_fail(a, "listen failed");
		return;
	}
	if (w->o.ip6)
		im_ip6_up(w);
	for (i = 0; i < w->o.conns && !a->error; i++) {
		struct ipk_addr peer;

		memset(&peer, 0, sizeof(peer));
		peer.family = IPK_AF_INET6;
		peer.a[0] = 0xfd;
		peer.a[15] = 2;
		a->cli[i].off = im_req_off((uint32_t)i, 0);
		if ((w->o.ip6 ? ipk_tcp_connect_addr(w->node[0].ctx, &peer, ipk_htons(IM_PORT), 0,
		                                     &a->cli[i], &a->cli[i].c, im_now(w))
		              : ipk_tcp_connect(w->node[0].ctx, IM_IP(1), ipk_htons(IM_PORT), 0,
		                                &a->cli[i], &a->cli[i].c, im_now(w))) != IPK_OK)
			im_fail(a, "connect failed");
	}
	im_loop(w, im_all_connected);
}

/*
 * Engine bytes per idle established connection, per side: the connection object,
 * the context's per-connection table share (hash buckets: measured as the context
 * size growth per bucket, times buckets per connection), and pb descriptors the
 * engine still holds at rest.
 */
static double im_conn_bytes(struct im_world *w)
{
	struct ipk_config cfg;
	double per_bucket, pbs_held = 0, buckets;
	size_t s1, s2;
	int i;

	im_config(&cfg, &w->o, 0, NULL);
	buckets = cfg.conn_hash_buckets;
	cfg.conn_hash_buckets = 1024;
	s1 = ipk_ctx_size(&cfg);
	cfg.conn_hash_buckets = 2048;
	s2 = ipk_ctx_size(&cfg);
	per_bucket = (double)(s2 - s1) / 1024.0;
	for (i = 0; i < 2; i++)
		pbs_held += 8192.0 - ipk_pbs_free(w->node[i].ctx);
	return (double)ipk_conn_size() + per_bucket * buckets / w->o.conns +
	       pbs_held * (double)ipk_pb_size() / (2.0 * w->o.conns);
}

static int im_run(struct im_world *w, struct im_result *r)
{
	struct im_app *a = w->app;
	uint64_t t0;
	int i;

	im_open(w);
	if (a->error)
		return -1;
	t0 = im_wall_ns();
	if (w->o.bulk)
		im_bulk_pump(w->node[0].ctx, a, &a->cli[0]);
	else
		for (i = 0; i < w->o.conns && a->issued < w->o.requests; i++)
			im_send_req(w->node[0].ctx, a, &a->cli[i]);
	im_loop(w, im_measured_done);
	r->seconds = (double)(im_wall_ns() - t0) / 1e9;
	r->requests = a->done;
	r->bytes = w->o.bulk ? a->rx_bytes : 2 * a->rx_bytes;
	if (a->error)
		return -1;
	im_loop(w, im_quiet); /* let delayed ACKs go so the connections are at rest */
	r->conn_bytes = im_conn_bytes(w);
	return 0;
}

static void im_collect(struct im_world *w, struct im_result *r)
{
	int i;

	for (i = 0; i < 2; i++) {
		const struct ipk_counters *k = ipk_counters(w->node[i].ctx);

		r->csum_drops += k->drop[IPK_DROP_TCP_CSUM] + k->drop[IPK_DROP_IP4_CSUM];
		r->retransmits += k->tcp_retransmits;
		r->frames[i] = w->node[i].frames;
		r->wire_bytes[i] = w->node[i].wire_bytes;
	}
	r->corrupted = w->app->corrupted;
	/* At rest (im_quiet) neither engine holds a packet and none is on the wire. */
	if (!w->app->error && im_pool_out(&w->pool) != 0)
		im_fail(w->app, "packets leaked: held after the run went quiet");
	if (!w->app->error && w->app->closed)
		im_fail(w->app, "a connection closed during the run");
	if (!w->app->error && w->o.corrupt_at && (!r->corrupted || r->csum_drops != r->corrupted))
		im_fail(w->app, "corrupted frame not dropped as a checksum error");
	/* The offload profile declares TSO: a bulk run that never sent a frame above
	 * the MTU did not measure what it says. */
	if (!w->app->error && w->o.offload && w->o.bulk && w->o.bytes > 200000 &&
	    !w->app->tso_frames)
		im_fail(w->app, "offload profile sent no TSO frame");
	if (!w->app->error && r->retransmits > w->o.max_rtx)
		im_fail(w->app, "more retransmissions than --max-rtx");
	if (!w->app->error && r->conn_bytes > (double)w->o.max_conn_bytes)
		im_fail(w->app, "conn_bytes above --max-conn-bytes");
	r->error = w->app->error;
}

int main(int argc, char **argv)
{
	static struct im_world w;
	struct im_result r;
	int i, rc;

	im_parse(argc, argv, &w.o, "ipkit");
	memset(&r, 0, sizeof(r));
	r.stack = "ipkit";
	r.build = IM_BUILD;
	w.app = (struct im_app *)im_zalloc(sizeof(struct im_app));
	w.app->o = &w.o;
	w.app->conn_mem = im_zalloc(2 * (size_t)w.o.conns * sizeof(struct im_conn) + 64);
	w.app->cli = (struct im_conn *)(((uintptr_t)w.app->conn_mem + 63) & ~(uintptr_t)63);
	w.app->srv = w.app->cli + w.o.conns;
	w.app->pat = im_pattern();
	w.app->len = w.o.len;
	w.app->requests = w.o.requests;
	w.app->client = &w.node[0];
	w.wall_end = im_wall_ns() + (uint64_t)(w.o.max_seconds * 1e9);
	w.vnow = 1000000000ull;
	im_pool_init(&w.pool);
	for (i = 0; i < 2; i++) {
		w.node[i].pool = &w.pool;
		w.node[i].peer = &w.node[1 - i];
		w.node[i].app = w.app;
		if (im_node_init(&w.node[i], &w.o, i) != IPK_OK) {
			fprintf(stderr, "ipkit-inmem: engine init failed\n");
			return 1;
		}
	}
	im_run(&w, &r);
	im_collect(&w, &r);
	rc = im_report(&w.o, &r);
	for (i = 0; i < 2; i++)
		im_node_fini(&w.node[i]);
	free(w.pool.raw);
	free(w.pool.descs);
	free(w.app->conn_mem);
	free(w.app);
	return rc;
}
