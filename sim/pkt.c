#include "pkt.h"

#include <stdlib.h>
#include <string.h>

struct sim_pool *sim_pool_create(uint32_t nbufs, uint32_t buf_size, uint32_t ndescs)
{
	struct sim_pool *p;
	uint32_t i;

	if (nbufs == 0 || buf_size == 0 || ndescs < nbufs)
		return NULL;
	p = (struct sim_pool *)calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->bufs = (struct sim_buf *)calloc(nbufs, sizeof(*p->bufs));
	p->descs = (struct sim_pkt *)calloc(ndescs, sizeof(*p->descs));
	p->mem = (uint8_t *)malloc((size_t)nbufs * buf_size);
	if (!p->bufs || !p->descs || !p->mem) {
		sim_pool_destroy(p);
		return NULL;
	}
	p->nbufs = nbufs;
	p->ndescs = ndescs;
	p->buf_size = buf_size;
	for (i = nbufs; i-- > 0;) {
		p->bufs[i].size = buf_size;
		p->bufs[i].mem = p->mem + (size_t)i * buf_size;
		p->bufs[i].next_free = p->free_bufs;
		p->free_bufs = &p->bufs[i];
	}
	for (i = ndescs; i-- > 0;) {
		p->descs[i].pool = p;
		p->descs[i].next_free = p->free_descs;
		p->free_descs = &p->descs[i];
	}
	return p;
}

void sim_pool_destroy(struct sim_pool *p)
{
	if (!p)
		return;
	free(p->bufs);
	free(p->descs);
	free(p->mem);
	free(p);
}

static struct sim_pkt *desc_get(struct sim_pool *p)
{
	struct sim_pkt *k = p->free_descs;

	if (!k)
		return NULL;
	p->free_descs = k->next_free;
	p->descs_out++;
	k->next_free = NULL;
	k->next = NULL;
	k->off = k->len = 0;
	k->rx_csum = 0;
	k->user = NULL;
	memset(&k->meta, 0, sizeof(k->meta));
	return k;
}

struct sim_pkt *sim_pkt_alloc(struct sim_pool *p)
{
	struct sim_pkt *k;
	struct sim_buf *b;

	p->alloc_count++;
	if (p->fail_every && p->alloc_count % p->fail_every == 0) {
		p->alloc_fail++;
		return NULL;
	}
	if (!p->free_bufs || !p->free_descs) {
		p->alloc_fail++;
		return NULL;
	}
	k = desc_get(p);
	b = p->free_bufs;
	p->free_bufs = b->next_free;
	p->bufs_out++;
	b->refcnt = 1;
	b->next_free = NULL;
	k->buf = b;
	return k;
}

void sim_pkt_free(struct sim_pkt *k)
{
	struct sim_pool *p;

	if (!k)
		return;
	p = k->pool;
	if (--k->buf->refcnt == 0) {
		k->buf->next_free = p->free_bufs;
		p->free_bufs = k->buf;
		p->bufs_out--;
	}
	k->buf = NULL;
	k->next = NULL;
	k->next_free = p->free_descs;
	p->free_descs = k;
	p->descs_out--;
}

void sim_pkt_free_chain(struct sim_pkt *k)
{
	while (k) {
		struct sim_pkt *n = k->next;
		sim_pkt_free(k);
		k = n;
	}
}

struct sim_pkt *sim_pkt_clone(struct sim_pkt *k)
{
	struct sim_pkt *c = desc_get(k->pool);

	if (!c) {
		k->pool->alloc_fail++;
		return NULL;
	}
	c->buf = k->buf;
	c->buf->refcnt++;
	c->off = k->off;
	c->len = k->len;
	c->meta = k->meta;
	c->rx_csum = k->rx_csum;
	return c;
}

uint32_t sim_pkt_chain_len(const struct sim_pkt *k)
{
	uint32_t n = 0;

	for (; k; k = k->next)
		n += k->len;
	return n;
}

struct sim_pkt *sim_pkt_linearize(struct sim_pool *p, const struct sim_pkt *k)
{
	uint32_t total = sim_pkt_chain_len(k), at = 0;
	struct sim_pkt *out;

	if (total > p->buf_size)
		return NULL;
	out = sim_pkt_alloc(p);
	if (!out)
		return NULL;
	out->meta = k->meta;
	out->rx_csum = k->rx_csum;
	for (; k; k = k->next) {
		memcpy(out->buf->mem + at, k->buf->mem + k->off, k->len);
		at += k->len;
	}
	out->len = total;
	return out;
}

struct sim_pkt *sim_pkt_from(struct sim_pool *p, const void *bytes, uint32_t len)
{
	struct sim_pkt *k;

	if (len > p->buf_size)
		return NULL;
	k = sim_pkt_alloc(p);
	if (!k)
		return NULL;
	memcpy(k->buf->mem, bytes, len);
	k->len = len;
	return k;
}

/* ---- the ipk_ops packet callbacks ---- */

static void *op_alloc(void *opaque)
{
	return sim_pkt_alloc(*(struct sim_pool **)opaque);
}
static void op_free(void *pkt, void *opaque)
{
	(void)opaque;
	sim_pkt_free((struct sim_pkt *)pkt);
}
static uint8_t *op_data(void *pkt, void *opaque)
{
	(void)opaque;
	return sim_pkt_data((struct sim_pkt *)pkt);
}
static uint32_t op_len(void *pkt, void *opaque)
{
	(void)opaque;
	return ((struct sim_pkt *)pkt)->len;
}
static void op_set_len(void *pkt, uint32_t len, void *opaque)
{
	struct sim_pkt *k = (struct sim_pkt *)pkt;

	(void)opaque;
	if (k->off + len <= k->buf->size)
		k->len = len;
	else if (k->pool)
		k->pool->bad_set_len++;
}
static void op_adj_head(void *pkt, uint32_t n, void *opaque)
{
	struct sim_pkt *k = (struct sim_pkt *)pkt;

	(void)opaque;
	if (n > k->len)
		n = k->len;
	k->off += n;
	k->len -= n;
}
static void op_trim_tail(void *pkt, uint32_t n, void *opaque)
{
	struct sim_pkt *k = (struct sim_pkt *)pkt;

	(void)opaque;
	if (n > k->len)
		n = k->len;
	k->len -= n;
}
static void *op_clone(void *pkt, void *opaque)
{
	(void)opaque;
	return sim_pkt_clone((struct sim_pkt *)pkt);
}
static void op_chain_append(void *head, void *tail, void *opaque)
{
	struct sim_pkt *h = (struct sim_pkt *)head;

	(void)opaque;
	while (h->next)
		h = h->next;
	h->next = (struct sim_pkt *)tail;
}
static void *op_chain_next(void *pkt, void *opaque)
{
	(void)opaque;
	return ((struct sim_pkt *)pkt)->next;
}
static void *op_chain_cut(void *pkt, void *opaque)
{
	struct sim_pkt *k = (struct sim_pkt *)pkt, *rest = k->next;

	(void)opaque;
	k->next = NULL;
	return rest;
}

void sim_pkt_ops(struct ipk_ops *ops)
{
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
