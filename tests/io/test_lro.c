/* Coalesced receive: the core takes a 64 KiB TCP segment whole when a backend hands it
 * one from the pool's large companion (ipk_pool_large), as tap (TUN_F_TSO4) and
 * afpacket (GSO frames from a veth peer) do. Two contexts over the io pool's packet
 * ops: A sends with TSO (frames up to 64 KiB, chains allowed); the "wire" makes each
 * frame flat in a packet of B's pools the way the backends do (large companion for
 * anything above the MTU) and marks a partial checksum good, as the kernel's header
 * says. B hashes what arrives; the digests must match, big frames must have reached
 * B's TCP whole, nothing may be dropped, and every buffer must come back. */
#include <ipkit/core.h>
#include <ipkit/io.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sha256.h"

#define MS 1000000ull
#define TOTAL (4u << 20)
#define QMAX 4096
#define MTU 1500u

struct side {
	struct ipk_pool *pool; /* first: ipk_pool_fill_ops finds the pool here */
	struct ipk_ctx *ctx;
	struct ipk_ops ops;
	void *mem, *conns, *pbs;
	struct ipk_pkt *q[QMAX]; /* frames sent, not yet delivered */
	uint32_t nq;
	struct ipk_conn *c;
	struct sha256 sha;
	uint64_t bytes;
	uint32_t max_seg;      /* largest payload in one tcp_payload call */
	uint32_t mtu;
	uint32_t chunk;        /* receive: frames above it arrive as chains of chunk-byte
	                        * packets (AF_XDP multi-buffer), 0 = flat (GSO/GRO) */
	int closed;
	const uint64_t *now;    /* the test's clock */
};

static void side_tx(void *pkt, void *opaque)
{
	struct side *s = (struct side *)opaque;

	CHECK(s->nq < QMAX);
	if (s->nq < QMAX)
		s->q[s->nq++] = (struct ipk_pkt *)pkt;
	else
		ipk_pkt_free_chain((struct ipk_pkt *)pkt);
}

static uint32_t side_random(void *opaque)
{
	static uint32_t x = 12345;
	(void)opaque;
	x = x * 1103515245u + 12345u;
	return x >> 8;
}

static void *side_accepted(struct ipk_ctx *ctx, struct ipk_conn *c, void *opaque)
{
	(void)ctx;
	((struct side *)opaque)->c = c;
	return NULL;
}

static void side_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                         uint32_t off, uint32_t len, void *opaque)
{
	struct side *s = (struct side *)opaque;

	(void)user;
	if (!pkt) {
		s->closed = 1;
		return;
	}
	sha256_update(&s->sha, ipk_pkt_mtod((struct ipk_pkt *)pkt) + off, len);
	s->bytes += len;
	if (len > s->max_seg)
		s->max_seg = len;
	ipk_tcp_recved(ctx, c, len, *s->now);
}

static void side_init(struct side *s, uint32_t ip_last, uint32_t caps, uint32_t mtu,
                      const uint64_t *now)
{
	struct ipk_config c;
	size_t sz;

	memset(s, 0, sizeof(*s));
	s->pool = ipk_pool_create(NULL, NULL, 0);
	ipk_pool_fill_ops(&s->ops);
	s->ops.tx = side_tx;
	s->ops.tx_offload = ipk_pool_tx_offload;
	s->ops.rx_csum = ipk_pool_rx_csum;
	s->ops.random = side_random;
	s->ops.tcp_accepted = side_accepted;
	s->ops.tcp_payload = side_payload;
	ipk_config_default(&c);
	c.opaque = s;
	c.link = IPK_LINK_RAWIP;
	c.mtu = (uint16_t)mtu;
	c.pkt_buf_size = ipk_pool_buf_size(s->pool) - ipk_pool_headroom(s->pool);
	c.ip4_be = ipk_htonl(0x0a000000u | ip_last);
	c.netmask_be = ipk_htonl(0xffffff00u);
	c.caps = caps;
	c.tso_max = 64000;
	c.tcp_rcvbuf = 1u << 20;
	sz = ipk_ctx_size(&c);
	s->mem = calloc(1, sz);
	s->conns = calloc(4, ipk_conn_size());
	s->pbs = calloc(4096, ipk_pb_size());
	s->ctx = ipk_ctx_init(s->mem, sz, &c, &s->ops);
	CHECK(s->ctx != NULL);
	ipk_add_conns(s->ctx, s->conns, 4);
	ipk_add_pbs(s->ctx, s->pbs, 4096);
	sha256_init(&s->sha);
	s->now = now;
	s->mtu = mtu;
}

/* A frame of len bytes as a chain of `chunk`-byte packets of pool p, as an AF_XDP
 * multi-buffer receive hands it over (one UMEM frame per descriptor). */
static struct ipk_pkt *wire_chunks(struct ipk_pkt *f, struct ipk_pool *p, uint32_t len,
                                   uint32_t chunk)
{
	uint8_t flat[65536];
	struct ipk_pkt *head = NULL, **link = &head;
	uint32_t at;

	CHECK(len <= sizeof(flat));
	ipk_pkt_linearize(f, flat, sizeof(flat));
	for (at = 0; at < len; at += chunk) {
		struct ipk_pkt *k = ipk_pkt_alloc(p);
		CHECK(k != NULL);
		if (!k)
			break;
		k->len = len - at < chunk ? len - at : chunk;
		memcpy(ipk_pkt_mtod(k), flat + at, k->len);
		*link = k;
		link = &k->next;
	}
	return head;
}

/* One frame across the wire, in `to`'s pool the way a backend fills it: flat (large
 * companion above the MTU, as GRO/GSO frames come) or, with to->chunk, chained. */
static struct ipk_pkt *wire_copy(struct ipk_pkt *f, struct side *to, uint32_t *big)
{
	uint32_t len = ipk_pkt_chain_len(f);
	struct ipk_pool *p = len > to->mtu ? ipk_pool_large(to->pool) : to->pool;
	struct ipk_pkt *k;

	if (to->chunk && len > to->chunk) {
		(*big)++;
		return wire_chunks(f, to->pool, len, to->chunk);
	}
	k = ipk_pkt_alloc(p);
	CHECK(k != NULL);
	if (!k)
		return NULL;
	k->len = ipk_pkt_linearize(f, ipk_pkt_mtod(k), len);
	/* The sender left a partial checksum (offloaded): the kernel's header says
	 * NEEDS_CSUM, which the backends report as good. */
	if (f->meta.flags & (IPK_TXOFF_TCP_CSUM | IPK_TXOFF_TSO))
		k->rx_csum = IPK_RXCSUM_L4_GOOD;
	if (len > to->mtu)
		(*big)++;
	return k;
}

static uint32_t deliver(struct side *from, struct side *to, uint64_t now, uint32_t *big)
{
	struct ipk_pkt *in[QMAX];
	uint32_t i, n = from->nq;

	for (i = 0; i < n; i++) {
		in[i] = wire_copy(from->q[i], to, big);
		ipk_pkt_free_chain(from->q[i]);
	}
	from->nq = 0;
	ipk_run(to->ctx, (void **)in, n, now);
	return n;
}

static void side_fini(struct side *s)
{
	uint32_t b, d;

	ipk_pool_usage(s->pool, &b, &d);
	CHECK_EQ(b, 0);
	CHECK_EQ(d, 0);
	ipk_pool_usage(ipk_pool_large(s->pool), &b, &d);
	CHECK_EQ(b, 0);
	CHECK_EQ(d, 0);
	free(s->mem);
	free(s->conns);
	free(s->pbs);
	ipk_pool_destroy(s->pool);
}

/* TOTAL bytes from a to b, closed by a; checks b's digest and that b dropped nothing,
 * then closes both and frees them. Returns the frames that crossed above the MTU or
 * as chains (wire_copy's count). */
static uint32_t transfer(struct side *a, struct side *b, uint64_t *now)
{
	static uint8_t buf[TOTAL];
	struct ipk_conn *ca = NULL;
	struct sha256 want;
	char h1[65], h2[65];
	uint32_t sent = 0, big = 0, i, steps;
	int d;

	for (i = 0; i < TOTAL; i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 13);
	sha256_init(&want);
	sha256_update(&want, buf, TOTAL);
	CHECK_EQ(ipk_tcp_listen(b->ctx, ipk_htons(5001), 4), 0);
	CHECK(ipk_tcp_connect(a->ctx, ipk_htonl(0x0a000002u), ipk_htons(5001), 0, NULL,
	                      &ca, *now) == 0);
	/* bounded: a 4 MiB transfer needs a few hundred round trips at most */
	for (steps = 0; steps < 20000 && !(b->closed && a->nq == 0 && b->nq == 0); steps++) {
		if (ca && ipk_tcp_state(ca) == IPK_TCP_ESTABLISHED && sent < TOTAL) {
			d = ipk_tcp_write(a->ctx, ca, buf + sent, TOTAL - sent, *now);
			if (d > 0)
				sent += (uint32_t)d;
			if (sent == TOTAL)
				ipk_tcp_close(a->ctx, ca, *now);
		}
		*now += MS / 10;
		deliver(a, b, *now, &big);
		deliver(b, a, *now, &big);
		ipk_run(a->ctx, NULL, 0, *now);
		ipk_run(b->ctx, NULL, 0, *now);
	}
	CHECK_EQ(b->bytes, TOTAL);
	sha256_hex(&want, h1);
	sha256_hex(&b->sha, h2);
	CHECK(strcmp(h1, h2) == 0);
	for (i = 0; i < IPK_DROP__COUNT; i++)
		CHECK_EQ(ipk_counters(b->ctx)->drop[i], 0);
	if (b->c)
		ipk_tcp_close(b->ctx, b->c, *now);
	/* let both sides finish the close (TIME_WAIT ends at its timer) */
	for (steps = 0; steps < 2000 && (ipk_conns_free(a->ctx) < 4 || ipk_conns_free(b->ctx) < 4);
	     steps++) {
		*now += 100 * MS;
		deliver(a, b, *now, &big);
		deliver(b, a, *now, &big);
		ipk_run(a->ctx, NULL, 0, *now);
		ipk_run(b->ctx, NULL, 0, *now);
	}
	CHECK_EQ(ipk_conns_free(a->ctx), 4);
	CHECK_EQ(ipk_conns_free(b->ctx), 4);
	side_fini(a);
	side_fini(b);
	return big;
}

static void test_core_takes_64k_coalesced_segments_whole(void)
{
	struct side a, b;
	uint64_t now = MS;
	uint32_t big;

	side_init(&a, 1, IPK_CAP_TSO | IPK_CAP_SG | IPK_CAP_TX_CSUM_TCP, MTU, &now);
	side_init(&b, 2, IPK_CAP_RX_CSUM_L4 | IPK_CAP_LRO, MTU, &now);
	big = transfer(&a, &b, &now);
	/* the segments reached TCP whole: far above one MSS, and at least a few */
	CHECK(big >= 8);
	CHECK(b.max_seg > 32u * 1024);
	printf("big frames %u, largest payload %u\n", big, b.max_seg);
}

/* MTU 9000 over 2 KiB pool buffers (1920 bytes of room), as AF_XDP multi-buffer runs
 * it: segments of up to 8960 payload bytes leave as chains (IPK_CAP_SG) and arrive as
 * chains of 1792-byte packets (a 2 KiB UMEM frame less XDP's 256-byte headroom), both
 * checksums done in software over the chain. Nothing dropped, digest equal. */
static void test_mtu9000_over_2k_buffers_as_chains(void)
{
	struct side a, b;
	uint64_t now = MS;
	uint32_t big;

	side_init(&a, 1, IPK_CAP_SG | IPK_CAP_LRO, 9000, &now);
	side_init(&b, 2, IPK_CAP_SG | IPK_CAP_LRO, 9000, &now);
	a.chunk = b.chunk = 1792;
	big = transfer(&a, &b, &now);
	/* nearly every data segment is a full 8960-byte one: five chunks each */
	CHECK(big >= TOTAL / 8960 - 16);
	CHECK(b.max_seg == 1792);
	printf("chained frames %u, largest payload piece %u\n", big, b.max_seg);
}

/* Above the buffer the core needs chains both ways: SG alone or LRO alone is refused. */
static void test_mtu_above_buffer_needs_sg_and_lro(void)
{
	struct ipk_config c;

	ipk_config_default(&c);
	c.mtu = 9000;
	c.pkt_buf_size = 1920;
	CHECK_EQ(ipk_ctx_size(&c), 0);
	c.caps = IPK_CAP_SG;
	CHECK_EQ(ipk_ctx_size(&c), 0);
	c.caps = IPK_CAP_LRO;
	CHECK_EQ(ipk_ctx_size(&c), 0);
	c.caps = IPK_CAP_SG | IPK_CAP_LRO;
	CHECK(ipk_ctx_size(&c) > 0);
	c.pkt_buf_size = 576 + 13; /* every buffer still holds a 576-byte datagram */
	CHECK_EQ(ipk_ctx_size(&c), 0);
	c.mtu = 1500;
	c.pkt_buf_size = 1514;
	c.caps = 0;
	CHECK(ipk_ctx_size(&c) > 0);
}

static void test_large_companion_lives_and_dies_with_its_pool(void)
{
	struct ipk_pool *p = ipk_pool_create(NULL, NULL, 0), *l;
	struct ipk_pkt *k;

	CHECK(p != NULL);
	l = ipk_pool_large(p);
	CHECK(l != NULL && l != p);
	CHECK(ipk_pool_large(p) == l); /* created once */
	CHECK(ipk_pool_buf_size(l) - ipk_pool_headroom(l) >= 65535u + 14u);
	CHECK(ipk_pool_large(l) == l);  /* already large: itself */
	CHECK(ipk_pool_large(NULL) == NULL);
	k = ipk_pkt_alloc(l);
	CHECK(k != NULL && k->pool == l);
	ipk_pkt_free(k);
	ipk_pool_destroy(p); /* frees the companion too (ASan's leak check sees it) */
}

int main(void)
{
	RUN(test_large_companion_lives_and_dies_with_its_pool);
	RUN(test_core_takes_64k_coalesced_segments_whole);
	RUN(test_mtu_above_buffer_needs_sg_and_lro);
	RUN(test_mtu9000_over_2k_buffers_as_chains);
	return check_summary();
}
