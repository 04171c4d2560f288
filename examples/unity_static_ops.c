/*
 * The core as one translation unit with its ops table bound at compile time.
 *
 * Defining IPK_OPS_STATIC before including core/ipkit_unity.c makes every op call in
 * the core a direct call to the functions in `my_ops`, which the compiler can inline
 * (see IPK_OPS in core/internal.h). Build it with nothing but a compiler:
 *
 *     cc -std=c99 -O2 -Iinclude -Icore examples/unity_static_ops.c -o unity_static_ops
 *
 * To prove the compile-time table is the one in use, the table handed to ipk_ctx_init
 * points at trap functions that count calls; the check below wants them never called.
 * As a test it answers an ARP request and an ICMP echo request written as bytes.
 */
#include <ipkit/core.h>

#include <stdio.h>
#include <string.h>

/* -------------------------------------------------- a fixed pool, no clones shared */
#define NPKT 32
#define PKT_ROOM 2048

struct ex_pkt { uint32_t off, len, refs, used; struct ex_pkt *next, *buf_owner; uint8_t mem[PKT_ROOM]; };
struct ex_world {
	struct ex_pkt pkts[NPKT]; /* a clone is a descriptor whose buf_owner is another ex_slot */
	int out, tx_count, trap_calls;
	uint8_t last_tx[PKT_ROOM];
	uint32_t last_len, rng;
};

static struct ex_pkt *ex_slot(struct ex_world *w)
{
	int i;
	for (i = 0; i < NPKT; i++)
		if (!w->pkts[i].used) {
			struct ex_pkt *k = &w->pkts[i];
			k->used = 1; k->off = 0; k->len = 0; k->refs = 1; k->next = NULL; k->buf_owner = k;
			w->out++;
			return k;
		}
	return NULL;
}
static void *exu_alloc(void *o) { return ex_slot((struct ex_world *)o); }
static void exu_release(struct ex_world *w, struct ex_pkt *k)
{
	if (--k->refs == 0) { k->used = 0; w->out--; }
}
static void exu_free(void *p, void *o)
{
	struct ex_pkt *k = (struct ex_pkt *)p;
	struct ex_pkt *owner = k->buf_owner;
	if (owner != k) exu_release((struct ex_world *)o, k);
	exu_release((struct ex_world *)o, owner);
}
static uint8_t *exu_data(void *p, void *o) { struct ex_pkt *k = (struct ex_pkt *)p; (void)o; return k->buf_owner->mem + k->off; }
static uint32_t exu_len(void *p, void *o) { (void)o; return ((struct ex_pkt *)p)->len; }
static void exu_set_len(void *p, uint32_t n, void *o) { (void)o; ((struct ex_pkt *)p)->len = n; }
static void exu_adj_head(void *p, uint32_t n, void *o) { struct ex_pkt *k = (struct ex_pkt *)p; (void)o; k->off += n; k->len -= n; }
static void exu_trim_tail(void *p, uint32_t n, void *o) { (void)o; ((struct ex_pkt *)p)->len -= n; }
static void *exu_clone(void *p, void *o)
{
	struct ex_pkt *k = (struct ex_pkt *)p, *c = ex_slot((struct ex_world *)o);
	if (!c) return NULL;
	c->buf_owner = k->buf_owner; c->buf_owner->refs++;
	c->off = k->off; c->len = k->len;
	return c;
}
static void exu_append(void *h, void *t, void *o)
{
	struct ex_pkt *k = (struct ex_pkt *)h;
	(void)o;
	while (k->next) k = k->next;
	k->next = (struct ex_pkt *)t;
}
static void *exu_next(void *p, void *o) { (void)o; return ((struct ex_pkt *)p)->next; }
static void *exu_cut(void *p, void *o) { struct ex_pkt *k = (struct ex_pkt *)p, *r = k->next; (void)o; k->next = NULL; return r; }
static void exu_tx(void *p, void *o)
{
	struct ex_world *w = (struct ex_world *)o;
	struct ex_pkt *k = (struct ex_pkt *)p;
	w->tx_count++;
	w->last_len = k->len;
	memcpy(w->last_tx, exu_data(k, o), k->len);
	while (k) { struct ex_pkt *n = k->next; exu_free(k, o); k = n; }
}
static uint32_t exu_random(void *o) { struct ex_world *w = (struct ex_world *)o; w->rng = w->rng * 1103515245u + 12345u; return w->rng; }

static const struct ipk_ops my_ops = {
	.pkt_alloc = exu_alloc, .pkt_free = exu_free, .pkt_data = exu_data, .pkt_len = exu_len,
	.pkt_set_len = exu_set_len, .pkt_adj_head = exu_adj_head, .pkt_trim_tail = exu_trim_tail,
	.pkt_clone = exu_clone, .pkt_chain_append = exu_append, .pkt_chain_next = exu_next,
	.pkt_chain_cut = exu_cut, .tx = exu_tx, .random = exu_random,
};

#define IPK_OPS_STATIC my_ops
#include "../core/ipkit_unity.c"

/* ---------------------------------- traps: the runtime table must never be called */
static void *ext_alloc(void *o) { ((struct ex_world *)o)->trap_calls++; return NULL; }
static void ext_free(void *p, void *o) { (void)p; ((struct ex_world *)o)->trap_calls++; }
static uint8_t *ext_data(void *p, void *o) { (void)p; ((struct ex_world *)o)->trap_calls++; return NULL; }
static uint32_t ext_len(void *p, void *o) { (void)p; ((struct ex_world *)o)->trap_calls++; return 0; }
static void ext_set(void *p, uint32_t n, void *o) { (void)p; (void)n; ((struct ex_world *)o)->trap_calls++; }
static void *ext_clone(void *p, void *o) { (void)p; ((struct ex_world *)o)->trap_calls++; return NULL; }
static void ext_append(void *h, void *t, void *o) { (void)h; (void)t; ((struct ex_world *)o)->trap_calls++; }
static void ext_tx(void *p, void *o) { (void)p; ((struct ex_world *)o)->trap_calls++; }
static uint32_t ext_random(void *o) { ((struct ex_world *)o)->trap_calls++; return 4; }

static const struct ipk_ops trap_ops = {
	.pkt_alloc = ext_alloc, .pkt_free = ext_free, .pkt_data = ext_data, .pkt_len = ext_len,
	.pkt_set_len = ext_set, .pkt_adj_head = ext_set, .pkt_trim_tail = ext_set,
	.pkt_clone = ext_clone, .pkt_chain_append = ext_append, .pkt_chain_next = ext_clone,
	.pkt_chain_cut = ext_clone, .tx = ext_tx, .random = ext_random,
};

/* ------------------------------------------------------------------ the check */
static const uint8_t ex_our_mac[6] = {0x02, 0, 0, 0, 0, 0x11}, ex_peer_mac[6] = {0x02, 0, 0, 0, 0, 0x22};
static const uint8_t ex_our_ip[4] = {10, 9, 0, 2}, ex_peer_ip[4] = {10, 9, 0, 1};

static uint16_t ex_sum16(const uint8_t *p, uint32_t len)
{
	uint32_t s = 0, i;
	for (i = 0; i + 1 < len; i += 2) s += (uint32_t)(p[i] << 8 | p[i + 1]);
	while (s >> 16) s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static void *ex_frame_in(struct ex_world *w, const uint8_t *bytes, uint32_t len)
{
	struct ex_pkt *k = ex_slot(w);
	if (k) { memcpy(k->mem, bytes, len); k->len = len; }
	return k;
}

static uint32_t ex_build_arp(uint8_t *f)
{
	memset(f, 0xff, 6); memcpy(f + 6, ex_peer_mac, 6); f[12] = 0x08; f[13] = 0x06;
	f[14] = 0; f[15] = 1; f[16] = 0x08; f[17] = 0; f[18] = 6; f[19] = 4; f[20] = 0; f[21] = 1;
	memcpy(f + 22, ex_peer_mac, 6); memcpy(f + 28, ex_peer_ip, 4);
	memset(f + 32, 0, 6); memcpy(f + 38, ex_our_ip, 4);
	memset(f + 42, 0, 18);
	return 60;
}

static uint32_t ex_build_ping(uint8_t *f)
{
	uint8_t *ip = f + 14, *ic = f + 34;
	uint16_t s;
	memcpy(f, ex_our_mac, 6); memcpy(f + 6, ex_peer_mac, 6); f[12] = 0x08; f[13] = 0;
	memset(ip, 0, 20 + 8 + 16);
	ip[0] = 0x45; ip[3] = 20 + 8 + 16; ip[8] = 64; ip[9] = 1;
	memcpy(ip + 12, ex_peer_ip, 4); memcpy(ip + 16, ex_our_ip, 4);
	s = ex_sum16(ip, 20); ip[10] = (uint8_t)(s >> 8); ip[11] = (uint8_t)s;
	ic[0] = 8; ic[4] = 0xbe; ic[5] = 0xef; ic[7] = 1;
	memset(ic + 8, 0x5a, 16);
	s = ex_sum16(ic, 8 + 16); ic[2] = (uint8_t)(s >> 8); ic[3] = (uint8_t)s;
	return 14 + 20 + 8 + 16;
}

static struct ex_world ex_w;              /* big: keep it off the stack */
static uint64_t ex_ctx_mem[1 << 16];   /* 512 KiB, 8-byte aligned; size checked below */
static uint64_t ex_pb_mem[64 * 16];

int main(void)
{
	struct ipk_config cfg;
	struct ipk_ctx *ctx;
	uint8_t f[64];
	void *p;
	size_t need;
	int bad = 0;

	ipk_config_default(&cfg);
	cfg.opaque = &ex_w;
	memcpy(cfg.mac, ex_our_mac, 6);
	memcpy(&cfg.ip4_be, ex_our_ip, 4);
	cfg.netmask_be = IPK_IP4(255, 255, 255, 0);
	cfg.conn_hash_buckets = 16;
	need = ipk_ctx_size(&cfg);
	if (need == 0 || need > sizeof(ex_ctx_mem) || ipk_pb_size() * 64 > sizeof(ex_pb_mem)) {
		printf("unity_static_ops: memory too small (ctx %lu)\n", (unsigned long)need);
		return 1;
	}
	ctx = ipk_ctx_init(ex_ctx_mem, sizeof(ex_ctx_mem), &cfg, &trap_ops);
	if (!ctx || ipk_add_pbs(ctx, ex_pb_mem, 64) != 64) {
		printf("unity_static_ops: init failed\n");
		return 1;
	}

	p = ex_frame_in(&ex_w, f, ex_build_arp(f));
	ipk_run(ctx, &p, 1, 1000);
	if (ex_w.tx_count != 1 || ex_w.last_len < 42 || ex_w.last_tx[12] != 0x08 || ex_w.last_tx[13] != 0x06 ||
	    ex_w.last_tx[21] != 2) {
		printf("FAIL: no ARP reply (tx %d)\n", ex_w.tx_count);
		bad = 1;
	}
	p = ex_frame_in(&ex_w, f, ex_build_ping(f));
	ipk_run(ctx, &p, 1, 2000);
	if (ex_w.tx_count != 2 || ex_w.last_len < 58 || ex_w.last_tx[34] != 0 || ex_w.last_tx[38] != 0xbe ||
	    ex_sum16(ex_w.last_tx + 34, 24) != 0) {
		printf("FAIL: no echo reply (tx %d)\n", ex_w.tx_count);
		bad = 1;
	}
	if (ex_w.trap_calls != 0) {
		printf("FAIL: the runtime ops table was called %d times\n", ex_w.trap_calls);
		bad = 1;
	}
	if (ex_w.out != 0) {
		printf("FAIL: %d packets not returned\n", ex_w.out);
		bad = 1;
	}
	printf("unity_static_ops: %s\n", bad ? "FAIL" : "ok (static ops: ARP reply, echo reply)");
	return bad;
}
