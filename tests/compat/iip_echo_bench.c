/*
 * Issue 20, item 4: the cost of the iip adapter. One echo exchange (client sends a
 * request, server echoes it, client waits for all of it, next request) between two
 * nodes in memory, written twice over the same packet pool and wire:
 *
 *   iip_echo_bench        both nodes on iip's API (compat/iip/iip.c included)
 *   iip_echo_bench_native both nodes on ipkit's own API, core as one unit with the
 *                         ops bound at compile time (the adapter's own build shape)
 *
 * Same logic on each side: the request is written into a fresh packet and sent
 * zero-copy (iip_tcp_send / ipk_tcp_send); the server copies what arrives into a
 * fresh packet and sends it back, then releases the received bytes
 * (iip_tcp_rxbuf_consumed / ipk_tcp_recved). The wire hands the pushed frame itself
 * to the other node (no copy), software checksums, virtual clock.
 *
 *   iip_echo_bench[_native] N [SIZE]   -> "requests N size S ok"
 * tests/compat/iip_figure.sh runs both under callgrind at two N and prints
 * instructions per request: (I(N2) - I(N1)) / (N2 - N1).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef NATIVE
#include "compat/iip/iip.c"
#else
#include <ipkit/core.h>
#endif

#define BUF 2048u
#define NPKT 1024u

struct bpkt {
	uint8_t *data;
	uint32_t len;
	struct bpkt *next;
	uint8_t *mem;
	uint32_t *refs;
};
static struct bpkt g_pk[NPKT];
static struct bpkt *g_free[NPKT];
static uint32_t g_nfree, g_refs[NPKT];
static uint8_t g_mem[NPKT][BUF];
static uint32_t g_buf_free[NPKT], g_nbuf;
static uint64_t g_now = 1000000000ull;

static void pool_init(void)
{
	uint32_t i;
	for (i = 0; i < NPKT; i++) {
		g_free[i] = &g_pk[i];
		g_buf_free[i] = i;
	}
	g_nfree = g_nbuf = NPKT;
}
static void *p_alloc(void)
{
	struct bpkt *k;
	uint32_t b;

	if (!g_nfree || !g_nbuf)
		return NULL;
	k = g_free[--g_nfree];
	b = g_buf_free[--g_nbuf];
	k->mem = g_mem[b];
	k->data = k->mem;
	k->refs = &g_refs[b];
	*k->refs = 1;
	k->len = 0;
	k->next = NULL;
	return k;
}
static void p_free(void *p)
{
	struct bpkt *k = (struct bpkt *)p;

	if (--*k->refs == 0)
		g_buf_free[g_nbuf++] = (uint32_t)(k->refs - g_refs);
	g_free[g_nfree++] = k;
}
static void *p_clone(void *p)
{
	struct bpkt *k = (struct bpkt *)p, *c;

	if (!g_nfree)
		return NULL;
	c = g_free[--g_nfree];
	*c = *k;
	c->next = NULL;
	++*c->refs;
	return c;
}
static void p_append(void *h, void *t)
{
	struct bpkt *k = (struct bpkt *)h;
	while (k->next)
		k = k->next;
	k->next = (struct bpkt *)t;
}

/* The two nodes; a pushed frame goes to the other node's queue as it is. */
struct node {
	void *ctx; /* iip workspace or ipk_ctx */
	uint8_t mac[6];
	uint32_t ip_be;
	void *rx[64];
	uint32_t nrx;
	struct node *peer;
	int is_server;
	void *conn;
	uint32_t got;      /* client: bytes of the current answer */
	uint64_t done;     /* client: requests answered */
};
static struct node g_a, g_b;
static uint32_t g_size = 64, g_n;
static int g_fail;

static void wire_push(struct node *n, void *p)
{
	struct bpkt *k = (struct bpkt *)p;

	if (k->next || n->peer->nrx == 64) { /* no chains at this size; queue bounded */
		g_fail = 1;
		while (k) {
			struct bpkt *nx = k->next;
			p_free(k);
			k = nx;
		}
		return;
	}
	n->peer->rx[n->peer->nrx++] = p;
}

static void *make_request(void)
{
	struct bpkt *k = (struct bpkt *)p_alloc();

	if (k) {
		memset(k->data, 'q', g_size);
		k->len = g_size;
	}
	return k;
}

#ifndef NATIVE
/* ------------------------------------------------------------ iip side */
#define N(o) ((struct node *)(o))
static void *iip_ops_pkt_alloc(void *o) { (void)o; return p_alloc(); }
static void iip_ops_pkt_free(void *p, void *o) { (void)o; p_free(p); }
static void *iip_ops_pkt_get_data(void *p, void *o) { (void)o; return ((struct bpkt *)p)->data; }
static uint16_t iip_ops_pkt_get_len(void *p, void *o) { (void)o; return (uint16_t)((struct bpkt *)p)->len; }
static void iip_ops_pkt_set_len(void *p, uint16_t l, void *o) { (void)o; ((struct bpkt *)p)->len = l; }
static void iip_ops_pkt_increment_head(void *p, uint16_t l, void *o) { (void)o; ((struct bpkt *)p)->data += l; ((struct bpkt *)p)->len -= l; }
static void iip_ops_pkt_decrement_tail(void *p, uint16_t l, void *o) { (void)o; ((struct bpkt *)p)->len -= l; }
static void *iip_ops_pkt_clone(void *p, void *o) { (void)o; return p_clone(p); }
static void iip_ops_pkt_scatter_gather_chain_append(void *h, void *t, void *o) { (void)o; p_append(h, t); }
static void *iip_ops_pkt_scatter_gather_chain_get_next(void *h, void *o) { (void)o; return ((struct bpkt *)h)->next; }
static void iip_ops_util_now_ns(uint32_t t[3], void *o)
{
	(void)o;
	t[0] = 0;
	t[1] = (uint32_t)(g_now / 1000000000ull);
	t[2] = (uint32_t)(g_now % 1000000000ull);
}
static uint16_t iip_ops_l2_hdr_len(void *p, void *o) { (void)p; (void)o; return 14; }
static uint8_t *iip_ops_l2_hdr_src_ptr(void *p, void *o) { return (uint8_t *)iip_ops_pkt_get_data(p, o) + 6; }
static uint8_t *iip_ops_l2_hdr_dst_ptr(void *p, void *o) { return (uint8_t *)iip_ops_pkt_get_data(p, o); }
static uint16_t iip_ops_l2_ethertype_be(void *p, void *o) { uint16_t v; memcpy(&v, (uint8_t *)iip_ops_pkt_get_data(p, o) + 12, 2); return v; }
static uint16_t iip_ops_l2_addr_len(void *o) { (void)o; return 6; }
static void iip_ops_l2_broadcast_addr(uint8_t bc[], void *o) { (void)o; memset(bc, 0xff, 6); }
static void iip_ops_l2_hdr_craft(void *p, uint8_t s[], uint8_t d[], uint16_t et, void *o)
{
	uint8_t *f = (uint8_t *)iip_ops_pkt_get_data(p, o);
	memcpy(f, d, 6);
	memcpy(f + 6, s, 6);
	memcpy(f + 12, &et, 2);
}
static uint8_t iip_ops_l2_skip(void *p, void *o) { (void)p; (void)o; return 0; }
static uint8_t iip_ops_arp_lhw(void *o) { (void)o; return 6; }
static uint8_t iip_ops_arp_lproto(void *o) { (void)o; return 4; }
static void iip_ops_l2_push(void *p, void *o) { wire_push(N(o), p); }
static void iip_ops_l2_flush(void *o) { (void)o; }
static uint8_t iip_ops_nic_feature_offload_tx_scatter_gather(void *o) { (void)o; return 0; }
static uint8_t iip_ops_nic_feature_offload_ip4_rx_checksum(void *o) { (void)o; return 0; }
static uint8_t iip_ops_nic_feature_offload_ip4_tx_checksum(void *o) { (void)o; return 0; }
static uint8_t iip_ops_nic_feature_offload_tcp_rx_checksum(void *o) { (void)o; return 0; }
static uint8_t iip_ops_nic_feature_offload_tcp_tx_checksum(void *o) { (void)o; return 0; }
static uint8_t iip_ops_nic_feature_offload_tcp_tx_tso(void *o) { (void)o; return 0; }
static uint8_t iip_ops_nic_feature_offload_udp_rx_checksum(void *o) { (void)o; return 0; }
static uint8_t iip_ops_nic_feature_offload_udp_tx_checksum(void *o) { (void)o; return 0; }
static uint8_t iip_ops_nic_feature_offload_udp_tx_tso(void *o) { (void)o; return 0; }
static uint8_t iip_ops_nic_offload_ip4_rx_checksum(void *m, void *o) { (void)m; (void)o; return 1; }
static uint8_t iip_ops_nic_offload_tcp_rx_checksum(void *m, void *o) { (void)m; (void)o; return 1; }
static uint8_t iip_ops_nic_offload_udp_rx_checksum(void *m, void *o) { (void)m; (void)o; return 1; }
static void iip_ops_nic_offload_ip4_tx_checksum_mark(void *m, void *o) { (void)m; (void)o; }
static void iip_ops_nic_offload_tcp_tx_checksum_mark(void *m, void *o) { (void)m; (void)o; }
static void iip_ops_nic_offload_tcp_tx_tso_mark(void *m, void *o) { (void)m; (void)o; }
static void iip_ops_nic_offload_udp_tx_checksum_mark(void *m, void *o) { (void)m; (void)o; }
static void iip_ops_nic_offload_udp_tx_tso_mark(void *m, void *o) { (void)m; (void)o; }
static void iip_ops_arp_reply(void *c, void *m, void *o) { (void)c; (void)m; (void)o; }
static void iip_ops_icmp_reply(void *c, void *m, void *o) { (void)c; (void)m; (void)o; }
static uint8_t iip_ops_tcp_accept(void *c, void *m, void *o) { (void)c; (void)m; return N(o)->is_server; }
static void *iip_ops_tcp_accepted(void *c, void *h, void *m, void *o) { (void)c; (void)m; N(o)->conn = h; return o; }
static void *iip_ops_tcp_connected(void *c, void *h, void *m, void *o)
{
	(void)m;
	N(o)->conn = h;
	if (iip_tcp_send(c, h, make_request(), 0, o))
		g_fail = 1;
	return o;
}
static void iip_ops_tcp_payload(void *c, void *h, void *m, void *to, uint16_t ho, uint16_t tl, void *o)
{
	struct node *n = N(o);
	uint32_t len = iip_ops_pkt_get_len(m, o) - ho - tl;

	(void)to;
	if (n->is_server) {
		struct bpkt *k = (struct bpkt *)p_alloc();
		memcpy(k->data, (uint8_t *)iip_ops_pkt_get_data(m, o) + ho, len);
		k->len = len;
		if (iip_tcp_send(c, h, k, 0, o))
			g_fail = 1;
	} else {
		n->got += len;
		if (n->got == g_size) {
			n->got = 0;
			if (++n->done < g_n && iip_tcp_send(c, h, make_request(), 0, o))
				g_fail = 1;
		}
	}
	iip_tcp_rxbuf_consumed(c, h, 1, o);
}
static void iip_ops_tcp_acked(void *c, void *h, void *m, void *to, void *o) { (void)c; (void)h; (void)m; (void)to; (void)o; }
static void iip_ops_tcp_closed(void *h, uint8_t lm[], uint32_t li, uint16_t lp, uint8_t pm[], uint32_t pi, uint16_t pp, void *to, void *o)
{ (void)h; (void)lm; (void)li; (void)lp; (void)pm; (void)pi; (void)pp; (void)to; (void)o; }
static void iip_ops_udp_payload(void *c, void *m, void *o) { (void)c; (void)m; (void)o; }

static void node_start(struct node *n)
{
	uint32_t i;
	uint8_t *conns, *pbs;

	n->ctx = calloc(1, iip_workspace_size());
	conns = (uint8_t *)aligned_alloc(64, (4 * iip_tcp_conn_size() + 63) / 64 * 64);
	pbs = (uint8_t *)aligned_alloc(64, (256 * iip_pb_size() + 63) / 64 * 64);
	for (i = 0; i < 4; i++)
		iip_add_tcp_conn(n->ctx, conns + i * iip_tcp_conn_size());
	for (i = 0; i < 256; i++)
		iip_add_pb(n->ctx, pbs + i * iip_pb_size());
}
static void node_run(struct node *n)
{
	uint32_t next_us, cnt = n->nrx;
	void *batch[64];

	memcpy(batch, n->rx, cnt * sizeof(void *));
	n->nrx = 0;
	iip_run(n->ctx, n->mac, n->ip_be, batch, (uint16_t)cnt, &next_us, n);
}
static void client_connect(struct node *a, struct node *b)
{
	if (iip_tcp_connect(a->ctx, a->mac, a->ip_be, 0x409c, b->mac, b->ip_be, 0x0700, a))
		g_fail = 1;
}
static void server_listen(struct node *b)
{
	uint32_t next_us;
	iip_run(b->ctx, b->mac, b->ip_be, NULL, 0, &next_us, b);
}
#else
/* ------------------------------------------------------------ native side */
#define N(o) ((struct node *)(o))
static void *o_alloc(void *o) { (void)o; return p_alloc(); }
static void o_free(void *p, void *o) { (void)o; p_free(p); }
static uint8_t *o_data(void *p, void *o) { (void)o; return ((struct bpkt *)p)->data; }
static uint32_t o_len(void *p, void *o) { (void)o; return ((struct bpkt *)p)->len; }
static void o_set_len(void *p, uint32_t l, void *o) { (void)o; ((struct bpkt *)p)->len = l; }
static void o_adj(void *p, uint32_t l, void *o) { (void)o; ((struct bpkt *)p)->data += l; ((struct bpkt *)p)->len -= l; }
static void o_trim(void *p, uint32_t l, void *o) { (void)o; ((struct bpkt *)p)->len -= l; }
static void *o_clone(void *p, void *o) { (void)o; return p_clone(p); }
static void o_append(void *h, void *t, void *o) { (void)o; p_append(h, t); }
static void *o_next(void *h, void *o) { (void)o; return ((struct bpkt *)h)->next; }
static void *o_cut(void *h, void *o) { struct bpkt *r = ((struct bpkt *)h)->next; (void)o; ((struct bpkt *)h)->next = NULL; return r; }
static void o_tx(void *p, void *o) { wire_push(N(o), p); }
static void o_flush(void *o) { (void)o; }
static uint64_t g_rng = 88172645463325252ull;
static uint32_t o_random(void *o) { (void)o; g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17; return (uint32_t)g_rng; }
static int o_accept(struct ipk_ctx *c, const struct ipk_tuple *t, void *o) { (void)c; (void)t; return N(o)->is_server; }
static void *o_accepted(struct ipk_ctx *c, struct ipk_conn *h, void *o) { (void)c; N(o)->conn = h; return o; }
static void o_connected(struct ipk_ctx *c, struct ipk_conn *h, void *u, void *o)
{
	(void)u;
	N(o)->conn = h;
	if (ipk_tcp_send(c, h, make_request(), g_now) < 0)
		g_fail = 1;
}
static void o_payload(struct ipk_ctx *c, struct ipk_conn *h, void *u, void *m, uint32_t off,
                      uint32_t len, void *o)
{
	struct node *n = N(o);

	(void)u;
	if (!m)
		return;
	if (n->is_server) {
		struct bpkt *k = (struct bpkt *)p_alloc();
		memcpy(k->data, ((struct bpkt *)m)->data + off, len);
		k->len = len;
		if (ipk_tcp_send(c, h, k, g_now) < 0)
			g_fail = 1;
	} else {
		n->got += len;
		if (n->got == g_size) {
			n->got = 0;
			if (++n->done < g_n && ipk_tcp_send(c, h, make_request(), g_now) < 0)
				g_fail = 1;
		}
	}
	ipk_tcp_recved(c, h, len, g_now);
}
static const struct ipk_ops g_ops = {
	o_alloc, o_free, o_data, o_len, o_set_len, o_adj, o_trim, o_clone, o_append, o_next,
	o_cut, o_tx, o_flush, NULL, NULL, o_random, NULL, NULL, NULL, o_accept, o_accepted,
	o_connected, o_payload, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	NULL, NULL, NULL, NULL};
#define IPK_OPS_STATIC g_ops
#include "ipkit_unity.c"

static void node_start(struct node *n)
{
	struct ipk_config cfg;
	size_t sz;
	void *mem;

	/* The adapter's configuration (compat/iip/iip.c iipk_config). */
	ipk_config_default(&cfg);
	cfg.opaque = n;
	memcpy(cfg.mac, n->mac, 6);
	cfg.ip4_be = n->ip_be;
	cfg.netmask_be = 0;
	cfg.pkt_buf_size = BUF;
	cfg.max_listeners = 64;
	cfg.max_udp_binds = 64;
	cfg.arp_entries = 256;
	cfg.tcp_sndbuf = 1u << 20;
	cfg.udp_df = 1;
	cfg.frag_max_bytes = BUF - 14;
	sz = ipk_ctx_size(&cfg);
	mem = aligned_alloc(64, (sz + 63) / 64 * 64);
	n->ctx = ipk_ctx_init(mem, sz, &cfg, &g_ops);
	ipk_add_conns((struct ipk_ctx *)n->ctx, aligned_alloc(64, 4 * 4096), 4);
	ipk_add_pbs((struct ipk_ctx *)n->ctx, aligned_alloc(64, 256 * 64), 256);
}
static void node_run(struct node *n)
{
	uint32_t cnt = n->nrx;
	void *batch[64];

	memcpy(batch, n->rx, cnt * sizeof(void *));
	n->nrx = 0;
	ipk_run((struct ipk_ctx *)n->ctx, batch, cnt, g_now);
}
static void client_connect(struct node *a, struct node *b)
{
	struct ipk_conn *c;

	ipk_arp_add_static((struct ipk_ctx *)a->ctx, b->ip_be, b->mac);
	if (ipk_tcp_connect((struct ipk_ctx *)a->ctx, b->ip_be, 0x0700, 0x409c, NULL, &c, g_now))
		g_fail = 1;
}
static void server_listen(struct node *b)
{
	if (ipk_tcp_listen((struct ipk_ctx *)b->ctx, 0x0700, 16))
		g_fail = 1;
}
#endif

int main(int argc, char **argv)
{
	uint64_t rounds = 0;

	g_n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 1000;
	g_size = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 64;
	if (g_size < 1 || g_size > 1400)
		return 2;
	pool_init();
	g_a.mac[0] = 2; g_a.mac[5] = 1; g_b.mac[0] = 2; g_b.mac[5] = 2;
	memcpy(&g_a.ip_be, "\x0a\x00\x00\x01", 4);
	memcpy(&g_b.ip_be, "\x0a\x00\x00\x02", 4);
	g_a.peer = &g_b;
	g_b.peer = &g_a;
	g_b.is_server = 1;
	node_start(&g_a);
	node_start(&g_b);
	server_listen(&g_b);
	client_connect(&g_a, &g_b);
	while (g_a.done < g_n && !g_fail && rounds < 100ull * g_n + 1000) {
		node_run(&g_b);
		node_run(&g_a);
		g_now += 10000;
		rounds++;
	}
	printf("requests %llu size %u %s\n", (unsigned long long)g_a.done, g_size,
	       g_a.done == g_n && !g_fail ? "ok" : "FAIL");
	return g_a.done == g_n && !g_fail ? 0 : 1;
}
