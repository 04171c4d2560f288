/*
 * Minimal embedding of the ipkit core: everything an integrator writes.
 *
 *   1. a packet pool behind the packet ops (a toy one here, ~40 lines);
 *   2. memory for the context, connections and pb descriptors, from malloc;
 *   3. a loop: receive frames -> ipk_run -> sleep until the returned deadline.
 *
 * The "NIC" is scripted so this file also runs as a test (suite 'unit'): it receives an
 * ARP request and an ICMP echo request written as bytes and checks the two replies.
 * README.md quotes this file; keep them in sync.
 */
#define _POSIX_C_SOURCE 200809L

#include <ipkit/core.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------------------
 * 1. Packets. The core never allocates: it asks for packets through these ops and
 * gives back every packet it is handed, either to pkt_free or to tx. A packet is a
 * descriptor (data window + chain link) over a reference-counted buffer, so clone is
 * cheap. Free lists keep alloc/free O(1).
 */
#define BUF_SIZE 2048
#define NBUFS 64
#define NDESCS 96 /* more descriptors than buffers: clones share a buffer */

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
static void *pkt_alloc(void *opq)
{
	struct pool *p = (struct pool *)opq; /* the pool is the first member of the opaque */
	struct buf *b = p->free_bufs;
	struct pkt *k;
	if (!b || !p->free_descs) return NULL;
	p->free_bufs = b->next_free;
	k = desc_get(p, b);
	return k;
}
static void pkt_free(void *pk, void *opq)
{
	struct pool *p = (struct pool *)opq;
	struct pkt *k = (struct pkt *)pk;
	if (--k->buf->refs == 0) { k->buf->next_free = p->free_bufs; p->free_bufs = k->buf; }
	k->next = p->free_descs; p->free_descs = k; p->out--;
}
static void *pkt_clone(void *pk, void *opq)
{
	struct pkt *k = (struct pkt *)pk, *c = desc_get((struct pool *)opq, k->buf);
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
 * The node: one context, its memory, and a scripted NIC. In a real program the NIC
 * is a TAP fd, an AF_PACKET socket or a DPDK queue.
 */
#define MAX_FRAMES 4
struct frame { uint32_t len; uint8_t bytes[BUF_SIZE]; };
struct node {
	struct pool pool; /* first: the packet ops get the opaque and treat it as a pool */
	struct ipk_ctx *ctx;
	void *ctx_mem, *conn_mem, *pb_mem;
	uint32_t rng;
	struct frame rx[MAX_FRAMES]; uint32_t rx_n, rx_next; /* frames the wire will bring */
	struct frame tx[MAX_FRAMES]; uint32_t tx_n;          /* frames the stack sent */
};

/* ops->tx: the frame is ours now. A real NIC queues it for DMA; we copy and free. */
static void nic_tx(void *pk, void *opq)
{
	struct node *n = (struct node *)opq;
	struct pkt *k = (struct pkt *)pk;
	if (n->tx_n < MAX_FRAMES && k->len <= BUF_SIZE) {
		n->tx[n->tx_n].len = k->len;
		memcpy(n->tx[n->tx_n].bytes, k->buf->mem + k->off, k->len);
		n->tx_n++;
	}
	while (k) { struct pkt *next = k->next; pkt_free(k, opq); k = next; }
}

static uint32_t node_random(void *opq)
{
	struct node *n = (struct node *)opq; /* xorshift32: fine for a demo, not for ISNs */
	n->rng ^= n->rng << 13; n->rng ^= n->rng >> 17; n->rng ^= n->rng << 5;
	return n->rng;
}

static const struct ipk_ops node_ops = {
	.pkt_alloc = pkt_alloc, .pkt_free = pkt_free, .pkt_data = pkt_data, .pkt_len = pkt_len,
	.pkt_set_len = pkt_set_len, .pkt_adj_head = pkt_adj_head, .pkt_trim_tail = pkt_trim_tail,
	.pkt_clone = pkt_clone, .pkt_chain_append = pkt_chain_append,
	.pkt_chain_next = pkt_chain_next, .pkt_chain_cut = pkt_chain_cut,
	.tx = nic_tx, .random = node_random, /* every other op is optional */
};

/* 2. Memory: the integrator sizes and owns it all; the core keeps pointers into it. */
static int node_init(struct node *n, const uint8_t mac[6], uint32_t ip4_be)
{
	struct ipk_config cfg;
	size_t size;

	pool_init(&n->pool);
	n->rng = 0x2545f491u;
	ipk_config_default(&cfg);
	cfg.opaque = n;
	memcpy(cfg.mac, mac, 6);
	cfg.ip4_be = ip4_be;
	cfg.netmask_be = IPK_IP4(255, 255, 255, 0);
	cfg.pkt_buf_size = BUF_SIZE;

	size = ipk_ctx_size(&cfg);
	n->ctx_mem = size ? malloc(size) : NULL; /* malloc's alignment covers the 8 needed */
	n->conn_mem = calloc(16, ipk_conn_size());
	n->pb_mem = calloc(64, ipk_pb_size());
	if (!n->ctx_mem || !n->conn_mem || !n->pb_mem) return -1;
	n->ctx = ipk_ctx_init(n->ctx_mem, size, &cfg, &node_ops);
	if (!n->ctx) return -1;
	if (ipk_add_conns(n->ctx, n->conn_mem, 16) != 16) return -1;
	if (ipk_add_pbs(n->ctx, n->pb_mem, 64) != 64) return -1;
	return 0;
}

static void node_free(struct node *n)
{
	free(n->ctx_mem); free(n->conn_mem); free(n->pb_mem); /* context first unused */
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Receive up to max frames into fresh packets (what a NIC's rx ring hands over). */
static uint32_t nic_rx(struct node *n, void **batch, uint32_t max)
{
	uint32_t got = 0;
	while (got < max && n->rx_next < n->rx_n) {
		struct frame *f = &n->rx[n->rx_next];
		struct pkt *k = (struct pkt *)pkt_alloc(&n->pool);
		if (!k) break; /* pool empty: leave the frame on the ring, retry next round */
		memcpy(pkt_data(k, NULL), f->bytes, f->len);
		k->len = f->len;
		batch[got++] = k;
		n->rx_next++;
	}
	return got;
}

/* Block until a frame arrives or the deadline passes (poll/epoll on a real fd). */
static uint64_t nic_wait(struct node *n, uint64_t deadline)
{
	uint64_t now = now_ns();
	if (n->rx_next == n->rx_n && deadline > now) {
		uint64_t ns = deadline - now;
		struct timespec ts;
		if (ns > 1000000u) ns = 1000000u; /* the script has no more frames: nap briefly */
		ts.tv_sec = 0;
		ts.tv_nsec = (long)ns;
		nanosleep(&ts, NULL);
	}
	return now_ns();
}

/* 3. The loop. The core never blocks and never reads a clock: we pass `now` in and it
 * tells us when it next needs to run. Bounded here so the example ends. */
static void serve(struct node *n, int rounds)
{
	uint64_t now = now_ns();
	while (rounds-- > 0) {
		void *batch[32];
		uint32_t got = nic_rx(n, batch, 32);                 /* receive frames */
		uint64_t deadline = ipk_run(n->ctx, batch, got, now); /* the core owns them now */
		if (n->rx_next == n->rx_n && n->tx_n > 0) break;     /* script done */
		now = nic_wait(n, deadline);                          /* sleep until deadline */
	}
}

/* ---------------------------------------------------------------------------
 * The test: frames a peer (02:00:00:00:00:02, 192.168.7.1) sends us (192.168.7.2).
 */
static int failures;
#define EXPECT(cond) \
	do { if (!(cond)) { fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

static const uint8_t our_mac[6] = {0x02, 0, 0, 0, 0, 0x01};
static const uint8_t peer_mac[6] = {0x02, 0, 0, 0, 0, 0x02};
static const uint8_t our_ip[4] = {192, 168, 7, 2};
static const uint8_t peer_ip[4] = {192, 168, 7, 1};

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
/* RFC 1071 Internet checksum; 0 when the data includes a correct checksum field. */
static uint16_t csum(const uint8_t *p, uint32_t len)
{
	uint32_t s = 0, i;
	for (i = 0; i + 1 < len; i += 2) s += get16(p + i);
	if (len & 1) s += (uint32_t)p[len - 1] << 8;
	while (s >> 16) s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static uint32_t eth_hdr(uint8_t *f, const uint8_t *dst, uint16_t type)
{
	memcpy(f, dst, 6); memcpy(f + 6, peer_mac, 6); put16(f + 12, type);
	return 14;
}

/* RFC 826: who has 192.168.7.2? tell 192.168.7.1 */
static uint32_t arp_request(uint8_t *f)
{
	static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	uint8_t *a = f + eth_hdr(f, bcast, 0x0806);
	put16(a, 1); put16(a + 2, 0x0800); a[4] = 6; a[5] = 4; put16(a + 6, 1);
	memcpy(a + 8, peer_mac, 6); memcpy(a + 14, peer_ip, 4);
	memset(a + 18, 0, 6); memcpy(a + 24, our_ip, 4);
	return 14 + 28 + 18; /* padded to Ethernet's 60-byte minimum */
}

/* RFC 792 echo request, id 0x1234 seq 7, 32 bytes of payload */
static uint32_t echo_request(uint8_t *f)
{
	uint8_t *ip = f + eth_hdr(f, our_mac, 0x0800), *icmp = ip + 20;
	int i;
	memset(ip, 0, 20);
	ip[0] = 0x45; put16(ip + 2, 20 + 8 + 32); put16(ip + 4, 1); ip[8] = 64; ip[9] = 1;
	memcpy(ip + 12, peer_ip, 4); memcpy(ip + 16, our_ip, 4);
	put16(ip + 10, csum(ip, 20));
	memset(icmp, 0, 8);
	icmp[0] = 8; put16(icmp + 4, 0x1234); put16(icmp + 6, 7);
	for (i = 0; i < 32; i++) icmp[8 + i] = (uint8_t)('a' + i % 26);
	put16(icmp + 2, csum(icmp, 8 + 32));
	return 14 + 20 + 8 + 32;
}

static void expect_arp_reply(const struct frame *f)
{
	const uint8_t *a = f->bytes + 14;
	EXPECT(f->len >= 42);
	EXPECT(memcmp(f->bytes, peer_mac, 6) == 0 && memcmp(f->bytes + 6, our_mac, 6) == 0);
	EXPECT(get16(f->bytes + 12) == 0x0806);
	EXPECT(get16(a + 6) == 2); /* reply */
	EXPECT(memcmp(a + 8, our_mac, 6) == 0 && memcmp(a + 14, our_ip, 4) == 0);
	EXPECT(memcmp(a + 18, peer_mac, 6) == 0 && memcmp(a + 24, peer_ip, 4) == 0);
}

static void expect_echo_reply(const struct frame *f, const uint8_t *req)
{
	const uint8_t *ip = f->bytes + 14, *icmp = ip + 20;
	EXPECT(f->len >= 14 + 20 + 8 + 32);
	if (f->len < 14 + 20 + 8 + 32) return;
	EXPECT(memcmp(f->bytes, peer_mac, 6) == 0 && get16(f->bytes + 12) == 0x0800);
	EXPECT(ip[0] == 0x45 && ip[9] == 1 && csum(ip, 20) == 0);
	EXPECT(memcmp(ip + 12, our_ip, 4) == 0 && memcmp(ip + 16, peer_ip, 4) == 0);
	EXPECT(icmp[0] == 0 && icmp[1] == 0 && csum(icmp, get16(ip + 2) - 20u) == 0);
	EXPECT(memcmp(icmp + 4, req + 14 + 20 + 4, 4 + 32) == 0); /* id, seq, payload */
}

int main(void)
{
	struct node *n = (struct node *)calloc(1, sizeof(*n));
	uint32_t ip_be;
	if (!n) return 1;
	memcpy(&ip_be, our_ip, 4); /* bytes as on the wire = network order */
	if (node_init(n, our_mac, ip_be) != 0) {
		fprintf(stderr, "node_init failed\n");
		return 1;
	}

	n->rx[0].len = arp_request(n->rx[0].bytes);
	n->rx_n = 1;
	serve(n, 100);
	EXPECT(n->tx_n == 1);
	if (n->tx_n >= 1) expect_arp_reply(&n->tx[0]);

	n->tx_n = 0;
	n->rx[1].len = echo_request(n->rx[1].bytes);
	n->rx_n = 2;
	serve(n, 100);
	EXPECT(n->tx_n == 1);
	if (n->tx_n >= 1) expect_echo_reply(&n->tx[0], n->rx[1].bytes);

	/* everything handed to the core came back */
	EXPECT(n->pool.out == 0);
	EXPECT(ipk_pbs_free(n->ctx) == 64 && ipk_conns_free(n->ctx) == 16);
	EXPECT(ipk_counters(n->ctx)->rx_frames == 2 && ipk_counters(n->ctx)->tx_frames == 2);

	node_free(n);
	free(n);
	printf("minimal_embed: %s\n", failures ? "FAIL" : "ok (ARP reply, echo reply)");
	return failures ? 1 : 0;
}
