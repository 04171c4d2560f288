/* Packet pool: allocation, refcounted clones, chains, exhaustion and recovery, buffer
 * index <-> address, buf_get/attach/put, and the core packet ops over the pool. */
#include <errno.h>
#include <ipkit/io.h>

#include <stdint.h>
#include <string.h>

#include "check.h"

static struct ipk_pool *small_pool(uint32_t nbufs, uint32_t ndescs)
{
	struct ipk_pool_cfg c;

	ipk_pool_cfg_default(&c);
	c.nbufs = nbufs;
	c.ndescs = ndescs;
	return ipk_pool_create(&c, NULL, 0);
}

static void usage_is(struct ipk_pool *p, uint32_t bufs, uint32_t descs)
{
	uint32_t b, d;

	ipk_pool_usage(p, &b, &d);
	CHECK_EQ(b, bufs);
	CHECK_EQ(d, descs);
}

static void test_pool_alloc_gives_headroom_and_aligned_area(void)
{
	struct ipk_pool *p = small_pool(16, 32);
	struct ipk_pkt *k;
	size_t sz;
	uint8_t *area;

	CHECK(p != NULL);
	area = (uint8_t *)ipk_pool_area(p, &sz);
	CHECK(((uintptr_t)area & 4095) == 0);
	CHECK(sz >= 16u * 2048);
	k = ipk_pkt_alloc(p);
	CHECK(k != NULL);
	CHECK_EQ(k->off, 128);
	CHECK_EQ(k->len, 0);
	CHECK(k->buf == area + (size_t)k->idx * ipk_pool_buf_size(p));
	CHECK(k->next == NULL && k->pool == p);
	usage_is(p, 1, 1);
	ipk_pkt_free(k);
	usage_is(p, 0, 0);
	ipk_pool_destroy(p);
}

static void test_pool_clone_shares_buffer_until_last_free(void)
{
	struct ipk_pool *p = small_pool(4, 8);
	struct ipk_pkt *k = ipk_pkt_alloc(p), *c;

	k->len = 10;
	memcpy(ipk_pkt_mtod(k), "0123456789", 10);
	k->meta.flags = IPK_TXOFF_TCP_CSUM;
	c = ipk_pkt_clone(k);
	CHECK(c != NULL && c != k);
	CHECK(c->buf == k->buf && c->off == k->off && c->len == 10);
	CHECK_EQ(c->meta.flags, IPK_TXOFF_TCP_CSUM);
	CHECK_EQ(ipk_pkt_buf_refcnt(k), 2);
	usage_is(p, 1, 2);
	ipk_pkt_free(k);
	usage_is(p, 1, 1);
	CHECK(memcmp(ipk_pkt_mtod(c), "0123456789", 10) == 0);
	CHECK_EQ(ipk_pkt_buf_refcnt(c), 1);
	ipk_pkt_free(c);
	usage_is(p, 0, 0);
	ipk_pool_destroy(p);
}

static void test_pool_chain_len_linearize_free_chain(void)
{
	struct ipk_pool *p = small_pool(8, 16);
	struct ipk_pkt *a = ipk_pkt_alloc(p), *b = ipk_pkt_alloc(p), *c;
	uint8_t out[16];

	memcpy(ipk_pkt_mtod(a), "head", 4);
	a->len = 4;
	memcpy(ipk_pkt_mtod(b), "tail!", 5);
	b->len = 5;
	c = ipk_pkt_clone(b);
	a->next = b;
	b->next = c;
	CHECK_EQ(ipk_pkt_chain_len(a), 14);
	CHECK_EQ(ipk_pkt_linearize(a, out, sizeof(out)), 14);
	CHECK(memcmp(out, "headtail!tail!", 14) == 0);
	CHECK_EQ(ipk_pkt_linearize(a, out, 6), 6);
	ipk_pkt_free_chain(a);
	usage_is(p, 0, 0);
	ipk_pool_destroy(p);
}

static void test_pool_exhaustion_counts_and_recovers(void)
{
	struct ipk_pool *p = small_pool(4, 5);
	struct ipk_pkt *k[4], *c, *d;
	struct ipk_pool_stats st;
	int i;

	for (i = 0; i < 4; i++)
		CHECK((k[i] = ipk_pkt_alloc(p)) != NULL);
	CHECK(ipk_pkt_alloc(p) == NULL);
	c = ipk_pkt_clone(k[0]); /* the fifth descriptor */
	CHECK(c != NULL);
	d = ipk_pkt_clone(k[0]); /* out of descriptors */
	CHECK(d == NULL);
	CHECK_EQ(ipk_pool_buf_get(p), -ENOBUFS);
	ipk_pool_stats(p, &st);
	CHECK_EQ(st.alloc_fails, 2);
	CHECK_EQ(st.clones, 2);
	CHECK_EQ(st.buf_fails, 1);
	ipk_pkt_free(c); /* a descriptor back, but still no buffer */
	CHECK(ipk_pkt_alloc(p) == NULL);
	ipk_pkt_free(k[3]);
	CHECK((k[3] = ipk_pkt_alloc(p)) != NULL);
	for (i = 0; i < 4; i++)
		ipk_pkt_free(k[i]);
	usage_is(p, 0, 0);
	ipk_pool_destroy(p);
}

static void test_pool_buf_get_attach_put_roundtrip(void)
{
	struct ipk_pool *p = small_pool(4, 8);
	struct ipk_pool_stats st;
	struct ipk_pkt *k;
	int64_t idx = ipk_pool_buf_get(p);

	CHECK(idx >= 0);
	usage_is(p, 1, 0);
	CHECK(ipk_pkt_attach(p, (uint32_t)idx, 2000, 100) == NULL); /* past the buffer */
	CHECK(ipk_pkt_attach(p, 3, 0, 10) == NULL || idx == 3);     /* free buffer: refused */
	k = ipk_pkt_attach(p, (uint32_t)idx, 256, 60);
	CHECK(k != NULL);
	CHECK_EQ(k->idx, (uint32_t)idx);
	CHECK(ipk_pkt_mtod(k) == (uint8_t *)ipk_pool_area(p, NULL) + idx * 2048 + 256);
	ipk_pkt_free(k);
	usage_is(p, 0, 0);
	idx = ipk_pool_buf_get(p);
	ipk_pool_buf_put(p, (uint32_t)idx);
	ipk_pool_buf_put(p, (uint32_t)idx); /* double put: ignored */
	ipk_pool_buf_put(p, 99);            /* foreign index: ignored */
	ipk_pool_stats(p, &st);
	CHECK(st.bad_puts >= 3);
	usage_is(p, 0, 0);
	ipk_pool_destroy(p);
}

static void test_pool_bad_config_rejected_with_message(void)
{
	struct ipk_pool_cfg c;
	char err[128] = "";

	ipk_pool_cfg_default(&c);
	c.buf_size = 3000;
	CHECK(ipk_pool_create(&c, err, sizeof(err)) == NULL);
	CHECK(strcmp(err, "pool: buf_size must be a power of two in 256..1048576") == 0);
	ipk_pool_cfg_default(&c);
	c.ndescs = c.nbufs - 1;
	CHECK(ipk_pool_create(&c, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "ndescs") != NULL);
	ipk_pool_cfg_default(&c);
	c.headroom = 1024;
	CHECK(ipk_pool_create(&c, err, sizeof(err)) == NULL);
}

static void test_pool_hugepages_falls_back(void)
{
	struct ipk_pool_cfg c;
	struct ipk_pool *p;
	struct ipk_pkt *k;

	ipk_pool_cfg_default(&c);
	c.nbufs = 1024;
	c.ndescs = 2048;
	c.hugepages = 1;
	p = ipk_pool_create(&c, NULL, 0);
	CHECK(p != NULL); /* with or without hugepages configured on the host */
	k = ipk_pkt_alloc(p);
	CHECK(k != NULL);
	ipk_pkt_free(k);
	ipk_pool_destroy(p);
}

struct holder {
	struct ipk_pool *pool;
};

static void test_pool_ops_drive_packets(void)
{
	struct holder h;
	struct ipk_ops ops;
	struct ipk_pkt *k, *c, *rest;
	struct ipk_tx_meta m;

	memset(&ops, 0, sizeof(ops));
	h.pool = small_pool(4, 8);
	ipk_pool_fill_ops(&ops);
	k = (struct ipk_pkt *)ops.pkt_alloc(&h);
	CHECK(k != NULL);
	ops.pkt_set_len(k, 100, &h);
	CHECK_EQ(ops.pkt_len(k, &h), 100);
	ops.pkt_set_len(k, 5000, &h); /* beyond the buffer: ignored */
	CHECK_EQ(ops.pkt_len(k, &h), 100);
	ops.pkt_adj_head(k, 14, &h);
	CHECK_EQ(k->off, 142);
	CHECK(ops.pkt_data(k, &h) == k->buf + 142);
	ops.pkt_trim_tail(k, 200, &h);
	CHECK_EQ(k->len, 0);
	ops.pkt_set_len(k, 10, &h);
	c = (struct ipk_pkt *)ops.pkt_clone(k, &h);
	ops.pkt_chain_append(k, c, &h);
	CHECK(ops.pkt_chain_next(k, &h) == c);
	rest = (struct ipk_pkt *)ops.pkt_chain_cut(k, &h);
	CHECK(rest == c && k->next == NULL);
	memset(&m, 0, sizeof(m));
	m.flags = IPK_TXOFF_TSO;
	m.mss = 1448;
	ipk_pool_tx_offload(k, &m, &h);
	CHECK_EQ(k->meta.mss, 1448);
	k->rx_csum = IPK_RXCSUM_L4_GOOD;
	CHECK_EQ(ipk_pool_rx_csum(k, &h), IPK_RXCSUM_L4_GOOD);
	ops.pkt_free(c, &h);
	ops.pkt_free(k, &h);
	usage_is(h.pool, 0, 0);
	ipk_pool_destroy(h.pool);
}

/* The receive reserve (issue 14): the core's allocations (the packet ops) stop at it,
 * the backend's receive path (ipk_pkt_alloc) does not; pkt_low is on from twice it. */
static void test_pool_reserve_kept_for_receive(void)
{
	struct holder h;
	struct ipk_ops ops;
	struct ipk_pkt *k[8];
	struct ipk_pool_stats st;
	int i;

	memset(&ops, 0, sizeof(ops));
	h.pool = small_pool(8, 16);
	ipk_pool_fill_ops(&ops);
	ipk_pool_set_reserve(h.pool, 2);
	CHECK(!ipk_pool_pkt_low(&h));
	for (i = 0; i < 4; i++)
		CHECK((k[i] = (struct ipk_pkt *)ops.pkt_alloc(&h)) != NULL);
	CHECK(ipk_pool_pkt_low(&h)); /* 4 free: twice the reserve */
	CHECK((k[4] = (struct ipk_pkt *)ops.pkt_alloc(&h)) != NULL);
	CHECK((k[5] = (struct ipk_pkt *)ops.pkt_alloc(&h)) != NULL);
	CHECK(ops.pkt_alloc(&h) == NULL); /* 2 free: the reserve */
	ipk_pool_stats(h.pool, &st);
	CHECK_EQ(st.reserve_hits, 1);
	CHECK((k[6] = ipk_pkt_alloc(h.pool)) != NULL); /* receive still gets them */
	CHECK((k[7] = ipk_pkt_alloc(h.pool)) != NULL);
	CHECK(ipk_pkt_alloc(h.pool) == NULL);
	for (i = 0; i < 8; i++)
		ipk_pkt_free(k[i]);
	CHECK(!ipk_pool_low(h.pool));
	ipk_pool_set_reserve(h.pool, 100); /* more than the pool: half of it */
	for (i = 0; i < 4; i++)
		CHECK((k[i] = (struct ipk_pkt *)ops.pkt_alloc(&h)) != NULL);
	CHECK(ops.pkt_alloc(&h) == NULL);
	for (i = 0; i < 4; i++)
		ipk_pkt_free(k[i]);
	usage_is(h.pool, 0, 0);
	ipk_pool_destroy(h.pool);
}

/* Control packets (ops->pkt_alloc_ctl: ACKs, RSTs, ARP, ICMP errors) may take the
 * upper half of the reserve, data stops at it, receive keeps the lower half. */
static void test_pool_control_allocs_dip_into_half_the_reserve(void)
{
	struct holder h;
	struct ipk_ops ops;
	struct ipk_pkt *k[16];
	struct ipk_pool_stats st;
	int i, n = 0;

	memset(&ops, 0, sizeof(ops));
	h.pool = small_pool(16, 32);
	ipk_pool_fill_ops(&ops);
	CHECK(ops.pkt_alloc_ctl == NULL); /* opt-in */
	ops.pkt_alloc_ctl = ipk_pool_pkt_alloc_ctl;
	ipk_pool_set_reserve(h.pool, 4);
	while (n < 16 && (k[n] = (struct ipk_pkt *)ops.pkt_alloc(&h)) != NULL)
		n++;
	CHECK_EQ(n, 12); /* data: 4 left, the reserve */
	CHECK((k[n++] = (struct ipk_pkt *)ops.pkt_alloc_ctl(&h)) != NULL);
	CHECK((k[n++] = (struct ipk_pkt *)ops.pkt_alloc_ctl(&h)) != NULL);
	CHECK(ops.pkt_alloc_ctl(&h) == NULL); /* 2 left: half the reserve */
	ipk_pool_stats(h.pool, &st);
	CHECK_EQ(st.reserve_ctl, 2);
	CHECK((k[n++] = ipk_pkt_alloc(h.pool)) != NULL); /* receive still gets them */
	CHECK((k[n++] = ipk_pkt_alloc(h.pool)) != NULL);
	for (i = 0; i < n; i++)
		ipk_pkt_free(k[i]);
	usage_is(h.pool, 0, 0);
	ipk_pool_destroy(h.pool);
}

/* ------------------------------------------------- external buffers (issue 17) */

struct ext_rec {
	struct ipk_pkt_ext x;
	int released;
};

static void ext_release(struct ipk_pkt_ext *x)
{
	((struct ext_rec *)x->arg)->released++;
}

static void ext_init(struct ext_rec *r)
{
	memset(r, 0, sizeof(*r));
	r->x.release = ext_release;
	r->x.arg = r;
}

static void test_pool_ext_attach_describes_foreign_memory(void)
{
	struct ipk_pool *p = small_pool(4, 8);
	static uint8_t region[10000];
	struct ext_rec r;
	struct ipk_pool_stats st;
	struct ipk_pkt *k;
	uint8_t out[8];

	ext_init(&r);
	memcpy(region + 9000, "external", 8);
	k = ipk_pkt_attach_ext(p, region, 9000, 8, &r.x);
	CHECK(k != NULL);
	CHECK_EQ(k->idx, IPK_PKT_IDX_EXT);
	CHECK(ipk_pkt_mtod(k) == region + 9000);
	CHECK_EQ(k->len, 8);
	CHECK_EQ(r.x.refs, 1);
	CHECK_EQ(ipk_pkt_buf_refcnt(k), 1);
	CHECK_EQ(ipk_pkt_linearize(k, out, sizeof(out)), 8);
	CHECK(memcmp(out, "external", 8) == 0);
	usage_is(p, 0, 1); /* a descriptor, no pool buffer */
	ipk_pkt_free(k);
	CHECK_EQ(r.released, 1);
	CHECK_EQ(r.x.refs, 0);
	usage_is(p, 0, 0);
	ipk_pool_stats(p, &st);
	CHECK_EQ(st.ext_attaches, 1);
	CHECK_EQ(st.ext_releases, 1);
	CHECK_EQ(st.bad_puts, 0);
	ipk_pool_destroy(p);
}

/* The core clones payload per segment and per retransmission and frees in any order:
 * release fires once, at the last free, whichever that is. */
static void test_pool_ext_clone_release_once_any_order(void)
{
	struct ipk_pool *p = small_pool(4, 8);
	static uint8_t region[4096];
	struct ext_rec r;
	struct ipk_pkt *k, *c1, *c2;

	ext_init(&r);
	k = ipk_pkt_attach_ext(p, region, 0, 4000, &r.x);
	c1 = ipk_pkt_clone(k);
	c2 = ipk_pkt_clone(c1);
	CHECK(c1 && c2);
	CHECK_EQ(c2->idx, IPK_PKT_IDX_EXT);
	CHECK(c2->ext == &r.x && ipk_pkt_mtod(c2) == region);
	CHECK_EQ(r.x.refs, 3);
	CHECK_EQ(ipk_pkt_buf_refcnt(c1), 3);
	ipk_pkt_free(k);
	CHECK_EQ(r.released, 0);
	ipk_pkt_free(c2);
	CHECK_EQ(r.released, 0);
	ipk_pkt_free(c1);
	CHECK_EQ(r.released, 1);
	usage_is(p, 0, 0);
	/* reused after release: a second cycle releases once more */
	k = ipk_pkt_attach_ext(p, region, 100, 1, &r.x);
	ipk_pkt_free(k);
	CHECK_EQ(r.released, 2);
	ipk_pool_destroy(p);
}

/* A header packet chained before external payload (what the core transmits): the
 * chain frees both kinds correctly; pool buffers are not confused with the record. */
static void test_pool_ext_in_chain_with_pool_header(void)
{
	struct ipk_pool *p = small_pool(4, 8);
	static uint8_t region[256];
	struct ext_rec r;
	struct ipk_pkt *h, *k;
	uint8_t out[16];

	ext_init(&r);
	memcpy(region + 10, "PAYLOAD", 7);
	h = ipk_pkt_alloc(p);
	memcpy(ipk_pkt_mtod(h), "HDR", 3);
	h->len = 3;
	k = ipk_pkt_attach_ext(p, region, 10, 7, &r.x);
	h->next = ipk_pkt_clone(k);
	CHECK_EQ(ipk_pkt_chain_len(h), 10);
	CHECK_EQ(ipk_pkt_linearize(h, out, sizeof(out)), 10);
	CHECK(memcmp(out, "HDRPAYLOAD", 10) == 0);
	ipk_pkt_free_chain(h);
	CHECK_EQ(r.released, 0);
	usage_is(p, 0, 1);
	ipk_pkt_free(k);
	CHECK_EQ(r.released, 1);
	usage_is(p, 0, 0);
	ipk_pool_destroy(p);
}

/* No descriptor: NULL, counted, the record untouched (no release owed). Bad
 * arguments: NULL, counted in bad_puts. */
static void test_pool_ext_exhaustion_and_bad_args(void)
{
	struct ipk_pool *p = small_pool(2, 2);
	static uint8_t region[64];
	struct ext_rec r;
	struct ipk_pool_stats st;
	struct ipk_pkt *a, *b;

	ext_init(&r);
	a = ipk_pkt_attach_ext(p, region, 0, 8, &r.x);
	b = ipk_pkt_attach_ext(p, region, 8, 8, &r.x);
	CHECK(a && b);
	CHECK(ipk_pkt_attach_ext(p, region, 16, 8, &r.x) == NULL);
	CHECK(ipk_pkt_clone(a) == NULL);
	CHECK_EQ(r.x.refs, 2);
	ipk_pool_stats(p, &st);
	CHECK_EQ(st.alloc_fails, 2);
	ipk_pkt_free(a);
	ipk_pkt_free(b);
	CHECK_EQ(r.released, 1);
	CHECK(ipk_pkt_attach_ext(NULL, region, 0, 8, &r.x) == NULL);
	CHECK(ipk_pkt_attach_ext(p, NULL, 0, 8, &r.x) == NULL);
	CHECK(ipk_pkt_attach_ext(p, region, 0, 8, NULL) == NULL);
	CHECK(ipk_pkt_attach_ext(p, region, 0, 0, &r.x) == NULL);
	r.x.release = NULL;
	CHECK(ipk_pkt_attach_ext(p, region, 0, 8, &r.x) == NULL);
	ipk_pool_stats(p, &st);
	CHECK_EQ(st.bad_puts, 4);
	CHECK_EQ(r.x.refs, 0);
	usage_is(p, 0, 0);
	ipk_pool_destroy(p);
}

/* The core's packet ops on an external packet: adjust and trim work, set_len never
 * grows it past what was attached (the pool's buf_size means nothing there). */
static void test_pool_ext_ops_never_grow(void)
{
	struct holder h;
	struct ipk_ops ops;
	static uint8_t region[8192];
	struct ext_rec r;
	struct ipk_pkt *k;

	ext_init(&r);
	h.pool = small_pool(2, 4);
	memset(&ops, 0, sizeof(ops));
	ipk_pool_fill_ops(&ops);
	k = ipk_pkt_attach_ext(h.pool, region, 5000, 100, &r.x);
	ops.pkt_set_len(k, 2000, &h);
	CHECK_EQ(k->len, 100);
	ops.pkt_adj_head(k, 10, &h);
	CHECK_EQ(k->len, 90);
	CHECK(ops.pkt_data(k, &h) == region + 5010);
	ops.pkt_trim_tail(k, 40, &h);
	ops.pkt_set_len(k, 60, &h);
	CHECK_EQ(k->len, 50);
	ops.pkt_set_len(k, 20, &h);
	CHECK_EQ(k->len, 20);
	ops.pkt_free(k, &h);
	CHECK_EQ(r.released, 1);
	ipk_pool_destroy(h.pool);
}

int main(void)
{
	RUN(test_pool_alloc_gives_headroom_and_aligned_area);
	RUN(test_pool_clone_shares_buffer_until_last_free);
	RUN(test_pool_chain_len_linearize_free_chain);
	RUN(test_pool_exhaustion_counts_and_recovers);
	RUN(test_pool_buf_get_attach_put_roundtrip);
	RUN(test_pool_bad_config_rejected_with_message);
	RUN(test_pool_hugepages_falls_back);
	RUN(test_pool_ops_drive_packets);
	RUN(test_pool_reserve_kept_for_receive);
	RUN(test_pool_control_allocs_dip_into_half_the_reserve);
	RUN(test_pool_ext_attach_describes_foreign_memory);
	RUN(test_pool_ext_clone_release_once_any_order);
	RUN(test_pool_ext_in_chain_with_pool_header);
	RUN(test_pool_ext_exhaustion_and_bad_args);
	RUN(test_pool_ext_ops_never_grow);
	return check_summary();
}
