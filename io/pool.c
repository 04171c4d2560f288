/*
 * The packet pool: one page-aligned buffer area (a single mmap, so AF_XDP can register
 * it as UMEM and memlink can share it), a descriptor array apart from it, per-buffer
 * reference counts and two free stacks. Buffer i lives at area + i * buf_size, so an
 * index and an address convert both ways with a shift.
 *
 * A pool serves one thread (one node / one queue): no locks on the packet path.
 */
#include <ipkit/io.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define POOL_HUGE_PAGE (2u * 1024 * 1024)

struct ipk_pool {
	struct ipk_pool_cfg cfg;
	uint8_t *area;
	size_t area_size;
	int huge;                 /* area is backed by hugepages */
	uint32_t *refcnt;         /* per buffer; 0 = on the free stack */
	uint32_t *buf_free;       /* stack of free buffer indices */
	uint32_t nbuf_free;
	struct ipk_pkt *descs;
	uint32_t *desc_free;      /* stack of free descriptor indices */
	uint32_t ndesc_free;
	struct ipk_pool_stats st;
	struct ipk_pool *large;   /* companion of 128 KiB buffers (ipk_pool_large), or NULL */
	uint32_t reserve;         /* buffers the core's op_alloc leaves to receive */
};

void ipk_pool_cfg_default(struct ipk_pool_cfg *cfg)
{
	if (!cfg)
		return;
	memset(cfg, 0, sizeof(*cfg));
	cfg->nbufs = 8192;
	cfg->buf_size = 2048;
	cfg->headroom = 128;
	cfg->ndescs = 2 * cfg->nbufs;
	cfg->hugepages = 0;
}

static int pool_cfg_check(const struct ipk_pool_cfg *c, char *err, size_t errlen)
{
	const char *why = NULL;

	if (c->nbufs == 0 || c->nbufs > (1u << 24))
		why = "nbufs must be 1..16777216";
	else if (c->buf_size < 256 || c->buf_size > (1u << 20) ||
	         (c->buf_size & (c->buf_size - 1)) != 0)
		why = "buf_size must be a power of two in 256..1048576";
	else if (c->headroom >= c->buf_size / 2)
		why = "headroom must be below buf_size / 2";
	else if (c->ndescs < c->nbufs || c->ndescs > (1u << 25))
		why = "ndescs must be >= nbufs (and at most 33554432)";
	else if ((uint64_t)c->nbufs * c->buf_size > ((uint64_t)1 << 40))
		why = "area too large";
	if (!why)
		return 0;
	if (err && errlen)
		snprintf(err, errlen, "pool: %s", why);
	return -EINVAL;
}

/* MAP_HUGETLB first when asked (the area rounded up to 2 MiB pages), then normal
 * pages. MAP_POPULATE so the first packets do not fault. */
static int pool_map(struct ipk_pool *p, char *err, size_t errlen)
{
	size_t want = (size_t)p->cfg.nbufs * p->cfg.buf_size;
	void *a = MAP_FAILED;

#ifdef MAP_HUGETLB
	if (p->cfg.hugepages) {
		size_t hs = (want + POOL_HUGE_PAGE - 1) & ~(size_t)(POOL_HUGE_PAGE - 1);

		a = mmap(NULL, hs, PROT_READ | PROT_WRITE,
		         MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);
		if (a != MAP_FAILED) {
			p->area_size = hs;
			p->huge = 1;
		}
	}
#endif
	if (a == MAP_FAILED) {
		a = mmap(NULL, want, PROT_READ | PROT_WRITE,
		         MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (a == MAP_FAILED) {
			int e = errno;

			if (err && errlen)
				snprintf(err, errlen, "pool: mmap of %zu bytes failed: %s", want,
				         strerror(e));
			return -e;
		}
		p->area_size = want;
	}
	p->area = (uint8_t *)a;
	return 0;
}

struct ipk_pool *ipk_pool_create(const struct ipk_pool_cfg *cfg, char *err, size_t errlen)
{
	struct ipk_pool_cfg def;
	struct ipk_pool *p;
	uint32_t i;

	if (!cfg) {
		ipk_pool_cfg_default(&def);
		cfg = &def;
	}
	if (pool_cfg_check(cfg, err, errlen) < 0)
		return NULL;
	p = (struct ipk_pool *)calloc(1, sizeof(*p));
	if (!p)
		goto nomem;
	p->cfg = *cfg;
	p->refcnt = (uint32_t *)calloc(cfg->nbufs, sizeof(uint32_t));
	p->buf_free = (uint32_t *)calloc(cfg->nbufs, sizeof(uint32_t));
	p->descs = (struct ipk_pkt *)calloc(cfg->ndescs, sizeof(struct ipk_pkt));
	p->desc_free = (uint32_t *)calloc(cfg->ndescs, sizeof(uint32_t));
	if (!p->refcnt || !p->buf_free || !p->descs || !p->desc_free)
		goto nomem;
	if (pool_map(p, err, errlen) < 0) {
		ipk_pool_destroy(p);
		return NULL;
	}
	/* Lowest indices on top, so a fresh pool hands out buffer 0 first. */
	for (i = 0; i < cfg->nbufs; i++)
		p->buf_free[i] = cfg->nbufs - 1 - i;
	p->nbuf_free = cfg->nbufs;
	for (i = 0; i < cfg->ndescs; i++)
		p->desc_free[i] = cfg->ndescs - 1 - i;
	p->ndesc_free = cfg->ndescs;
	p->st.hugepages = (uint32_t)p->huge;
	return p;
nomem:
	ipk_pool_destroy(p);
	if (err && errlen)
		snprintf(err, errlen, "pool: out of memory for %u descriptors", cfg->ndescs);
	return NULL;
}

void ipk_pool_destroy(struct ipk_pool *p)
{
	if (!p)
		return;
	ipk_pool_destroy(p->large);
	if (p->area)
		munmap(p->area, p->area_size);
	free(p->refcnt);
	free(p->buf_free);
	free(p->descs);
	free(p->desc_free);
	free(p);
}

/* The accessors answer a NULL pool with NULL / 0 (io.h), never a crash. */
void *ipk_pool_area(const struct ipk_pool *p, size_t *size)
{
	if (size)
		*size = p ? p->area_size : 0;
	return p ? p->area : NULL;
}

uint32_t ipk_pool_buf_size(const struct ipk_pool *p)
{
	return p ? p->cfg.buf_size : 0;
}

uint32_t ipk_pool_headroom(const struct ipk_pool *p)
{
	return p ? p->cfg.headroom : 0;
}

void ipk_pool_usage(const struct ipk_pool *p, uint32_t *bufs_out, uint32_t *descs_out)
{
	if (bufs_out)
		*bufs_out = p ? p->cfg.nbufs - p->nbuf_free : 0;
	if (descs_out)
		*descs_out = p ? p->cfg.ndescs - p->ndesc_free : 0;
}

void ipk_pool_stats(const struct ipk_pool *p, struct ipk_pool_stats *st)
{
	if (!st)
		return;
	if (p)
		*st = p->st;
	else
		memset(st, 0, sizeof(*st));
}

struct ipk_pool *ipk_pool_large(struct ipk_pool *p)
{
	struct ipk_pool_cfg c;

	if (!p)
		return NULL;
	if (p->large || p->cfg.buf_size >= IPK_POOL_LARGE_BUF)
		return p->large ? p->large : p;
	ipk_pool_cfg_default(&c);
	c.nbufs = IPK_POOL_LARGE_NBUFS;
	c.ndescs = 2 * c.nbufs;
	c.buf_size = IPK_POOL_LARGE_BUF;
	c.headroom = p->cfg.headroom;
	p->large = ipk_pool_create(&c, NULL, 0);
	return p->large;
}

/* ------------------------------------------------------------ buffers */

int64_t ipk_pool_buf_get(struct ipk_pool *p)
{
	uint32_t idx;

	if (!p)
		return -EINVAL;
	if (p->nbuf_free == 0) {
		p->st.buf_fails++;
		return -ENOBUFS;
	}
	idx = p->buf_free[--p->nbuf_free];
	p->refcnt[idx] = 1;
	return idx;
}

void ipk_pool_buf_put(struct ipk_pool *p, uint32_t idx)
{
	if (!p)
		return;
	/* A double put or a foreign index would corrupt the free stack: ignore and count. */
	if (idx >= p->cfg.nbufs || p->refcnt[idx] == 0) {
		p->st.bad_puts++;
		return;
	}
	p->refcnt[idx] = 0;
	p->buf_free[p->nbuf_free++] = idx;
}

static void buf_unref(struct ipk_pool *p, uint32_t idx)
{
	if (--p->refcnt[idx] == 0)
		p->buf_free[p->nbuf_free++] = idx;
}

/* --------------------------------------------------------- descriptors */

static struct ipk_pkt *desc_get(struct ipk_pool *p)
{
	struct ipk_pkt *k;

	if (p->ndesc_free == 0)
		return NULL;
	k = &p->descs[p->desc_free[--p->ndesc_free]];
	k->next = NULL;
	k->pool = p;
	k->rx_csum = 0;
	memset(&k->meta, 0, sizeof(k->meta));
	k->user = NULL;
	return k;
}

static void desc_put(struct ipk_pool *p, struct ipk_pkt *k)
{
	k->buf = NULL;
	k->next = NULL;
	p->desc_free[p->ndesc_free++] = (uint32_t)(k - p->descs);
}

struct ipk_pkt *ipk_pkt_alloc(struct ipk_pool *p)
{
	struct ipk_pkt *k;
	int64_t idx;

	if (!p)
		return NULL;
	p->st.allocs++;
	if (p->nbuf_free == 0 || p->ndesc_free == 0) {
		p->st.alloc_fails++;
		return NULL;
	}
	idx = ipk_pool_buf_get(p);
	k = desc_get(p);
	k->idx = (uint32_t)idx;
	k->buf = p->area + (size_t)k->idx * p->cfg.buf_size;
	k->off = p->cfg.headroom;
	k->len = 0;
	return k;
}

struct ipk_pkt *ipk_pkt_attach(struct ipk_pool *p, uint32_t idx, uint32_t off, uint32_t len)
{
	struct ipk_pkt *k;

	if (!p)
		return NULL;
	/* Only a buffer taken with ipk_pool_buf_get (refcount 1, no descriptor) may be
	 * attached, and the data must lie inside it. */
	if (idx >= p->cfg.nbufs || p->refcnt[idx] != 1 || off > p->cfg.buf_size ||
	    len > p->cfg.buf_size - off) {
		p->st.bad_puts++;
		return NULL;
	}
	k = desc_get(p);
	if (!k) {
		p->st.alloc_fails++;
		return NULL;
	}
	k->idx = idx;
	k->buf = p->area + (size_t)idx * p->cfg.buf_size;
	k->off = off;
	k->len = len;
	return k;
}

struct ipk_pkt *ipk_pkt_attach_ext(struct ipk_pool *p, uint8_t *base, uint32_t off,
                                   uint32_t len, struct ipk_pkt_ext *x)
{
	struct ipk_pkt *k;

	if (!p)
		return NULL;
	if (!base || !x || !x->release || len == 0) {
		p->st.bad_puts++;
		return NULL;
	}
	k = desc_get(p);
	if (!k) {
		p->st.alloc_fails++;
		return NULL;
	}
	x->refs++;
	p->st.ext_attaches++;
	k->idx = IPK_PKT_IDX_EXT;
	k->ext = x;
	k->buf = base + off;
	k->off = 0;
	k->len = len;
	return k;
}

/* The last descriptor over an external buffer gone: its owner may reuse or unmap it
 * (the core frees a sent packet once every byte is acknowledged, RFC 9293 3.10.7.4,
 * or when the connection ends). */
static void ext_unref(struct ipk_pool *p, struct ipk_pkt_ext *x)
{
	if (--x->refs == 0) {
		p->st.ext_releases++;
		x->release(x);
	}
}

void ipk_pkt_free(struct ipk_pkt *k)
{
	struct ipk_pool *p;

	if (!k)
		return;
	p = k->pool;
	/* An external buffer has no index: refcnt[] would be read out of range. */
	if (k->idx == IPK_PKT_IDX_EXT)
		ext_unref(p, k->ext);
	else
		buf_unref(p, k->idx);
	desc_put(p, k);
}

void ipk_pkt_free_chain(struct ipk_pkt *k)
{
	while (k) {
		struct ipk_pkt *n = k->next;

		ipk_pkt_free(k);
		k = n;
	}
}

struct ipk_pkt *ipk_pkt_clone(struct ipk_pkt *k)
{
	struct ipk_pool *p;
	struct ipk_pkt *c;

	if (!k)
		return NULL;
	p = k->pool;
	c = desc_get(p);
	p->st.clones++;
	if (!c) {
		p->st.alloc_fails++;
		return NULL;
	}
	if (k->idx == IPK_PKT_IDX_EXT) {
		k->ext->refs++;
		c->ext = k->ext;
	} else {
		p->refcnt[k->idx]++;
	}
	c->idx = k->idx;
	c->buf = k->buf;
	c->off = k->off;
	c->len = k->len;
	c->meta = k->meta;
	c->rx_csum = k->rx_csum;
	return c;
}

uint32_t ipk_pkt_chain_len(const struct ipk_pkt *k)
{
	uint32_t n = 0;

	for (; k; k = k->next)
		n += k->len;
	return n;
}

uint32_t ipk_pkt_copy_out(const struct ipk_pkt *k, uint32_t off, uint8_t *dst, uint32_t len)
{
	uint32_t at = 0;

	if (!dst)
		return 0;
	for (; k && off >= k->len; k = k->next)
		off -= k->len;
	for (; k && at < len; k = k->next, off = 0) {
		uint32_t n = k->len - off < len - at ? k->len - off : len - at;

		memcpy(dst + at, k->buf + k->off + off, n);
		at += n;
	}
	return at;
}

uint32_t ipk_pkt_linearize(const struct ipk_pkt *k, uint8_t *dst, uint32_t cap)
{
	return ipk_pkt_copy_out(k, 0, dst, cap);
}

uint32_t ipk_pkt_buf_refcnt(const struct ipk_pkt *k)
{
	if (!k)
		return 0;
	return k->idx == IPK_PKT_IDX_EXT ? k->ext->refs : k->pool->refcnt[k->idx];
}

/* ------------------------------------------------------ core packet ops */

/* Only the integrator's own calls can pass a NULL opaque; the core passes what it
 * was given and op_alloc runs per packet, so it does not check. */
static struct ipk_pool *ops_pool(void *opaque)
{
	return *(struct ipk_pool **)opaque;
}

void ipk_pool_set_reserve(struct ipk_pool *p, uint32_t nbufs)
{
	if (p)
		p->reserve = nbufs < p->cfg.nbufs ? nbufs : p->cfg.nbufs / 2;
}

int ipk_pool_low(const struct ipk_pool *p)
{
	return p && p->reserve && p->nbuf_free <= 2u * p->reserve;
}

int ipk_pool_pkt_low(void *opaque)
{
	return opaque ? ipk_pool_low(ops_pool(opaque)) : 0;
}

/* The core's allocations stop at the receive reserve (the backend's do not). */
static void *op_alloc(void *opaque)
{
	struct ipk_pool *p = ops_pool(opaque);

	if (p->nbuf_free <= p->reserve) {
		p->st.allocs++;
		p->st.alloc_fails++;
		p->st.reserve_hits++;
		return NULL;
	}
	return ipk_pkt_alloc(p);
}

/* Control packets (ops->pkt_alloc_ctl: ACKs, RSTs, ARP, ICMP errors) may take the
 * upper half of the reserve: at the reserve the core can still send what frees
 * memory, and the lower half stays the backend's, for receive. */
void *ipk_pool_pkt_alloc_ctl(void *opaque)
{
	struct ipk_pool *p = ops_pool(opaque);

	if (p->nbuf_free <= p->reserve / 2u) {
		p->st.allocs++;
		p->st.alloc_fails++;
		p->st.reserve_hits++;
		return NULL;
	}
	if (p->nbuf_free <= p->reserve)
		p->st.reserve_ctl++;
	return ipk_pkt_alloc(p);
}

static void op_free(void *pkt, void *opaque)
{
	(void)opaque;
	ipk_pkt_free((struct ipk_pkt *)pkt);
}

static uint8_t *op_data(void *pkt, void *opaque)
{
	(void)opaque;
	return ipk_pkt_mtod((struct ipk_pkt *)pkt);
}

static uint32_t op_len(void *pkt, void *opaque)
{
	(void)opaque;
	return ((struct ipk_pkt *)pkt)->len;
}

static void op_set_len(void *pkt, uint32_t len, void *opaque)
{
	struct ipk_pkt *k = (struct ipk_pkt *)pkt;

	(void)opaque;
	/* An external buffer's size is its attached length: it never grows (and its off,
	 * 0, is not a pool buffer offset). */
	if (k->idx == IPK_PKT_IDX_EXT ? len <= k->len : len <= k->pool->cfg.buf_size - k->off)
		k->len = len;
}

static void op_adj_head(void *pkt, uint32_t n, void *opaque)
{
	struct ipk_pkt *k = (struct ipk_pkt *)pkt;

	(void)opaque;
	if (n > k->len)
		n = k->len;
	k->off += n;
	k->len -= n;
}

static void op_trim_tail(void *pkt, uint32_t n, void *opaque)
{
	struct ipk_pkt *k = (struct ipk_pkt *)pkt;

	(void)opaque;
	k->len -= n > k->len ? k->len : n;
}

static void *op_clone(void *pkt, void *opaque)
{
	(void)opaque;
	return ipk_pkt_clone((struct ipk_pkt *)pkt);
}

static void op_chain_append(void *head, void *tail, void *opaque)
{
	struct ipk_pkt *h = (struct ipk_pkt *)head;

	(void)opaque;
	while (h->next)
		h = h->next;
	h->next = (struct ipk_pkt *)tail;
}

static void *op_chain_next(void *pkt, void *opaque)
{
	(void)opaque;
	return ((struct ipk_pkt *)pkt)->next;
}

static void *op_chain_cut(void *pkt, void *opaque)
{
	struct ipk_pkt *k = (struct ipk_pkt *)pkt, *rest = k->next;

	(void)opaque;
	k->next = NULL;
	return rest;
}

void ipk_pool_tx_offload(void *pkt, const struct ipk_tx_meta *m, void *opaque)
{
	(void)opaque;
	((struct ipk_pkt *)pkt)->meta = *m;
}

uint32_t ipk_pool_rx_csum(void *pkt, void *opaque)
{
	(void)opaque;
	return ((struct ipk_pkt *)pkt)->rx_csum;
}

void ipk_pool_fill_ops(struct ipk_ops *ops)
{
	if (!ops)
		return;
	ops->pkt_alloc = op_alloc;
	ops->pkt_free = op_free;
	ops->pkt_data = op_data;
	ops->pkt_len = op_len;
	ops->pkt_set_len = op_set_len;
	ops->pkt_adj_head = op_adj_head;
	ops->pkt_trim_tail = op_trim_tail;
	ops->pkt_clone = op_clone;
	ops->pkt_chain_append = op_chain_append;
	ops->pkt_chain_next = op_chain_next;
	ops->pkt_chain_cut = op_chain_cut;
}
