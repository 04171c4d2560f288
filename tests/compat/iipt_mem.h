/*
 * An in-memory world for programs written against iip's documented API (issue 20):
 * a packet pool behind iip_ops_pkt_*, a NIC model behind the feature and mark
 * callbacks (checksum offload computed on the wire, TSO segmented there, received
 * checksums verified and reported), and a wire that carries each pushed frame to
 * the other node as a fresh flat packet (a receive DMA). Nothing here uses ipkit's
 * own headers: only the iip API (compat/iip/iip.c, included by the program) and libc.
 *
 * A node's applications hook in through struct iipt_app (event handlers); the
 * iip_ops_* events below dispatch to the node the opaque names.
 */
#ifndef IIPT_MEM_H
#define IIPT_MEM_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IIPT_BUF 2048u
#define IIPT_NPKT 8192u
#define IIPT_QMAX 4096u

/* Feature bits a node declares (one per iip_ops_nic_feature_* callback). */
#define F_SG (1u << 0)
#define F_IP4_RX (1u << 1)
#define F_IP4_TX (1u << 2)
#define F_TCP_RX (1u << 3)
#define F_TCP_TX (1u << 4)
#define F_TSO (1u << 5)
#define F_UDP_RX (1u << 6)
#define F_UDP_TX (1u << 7)
#define F_UDP_TSO (1u << 8)
#define F_ALL 0x1ffu

/* marks on a packet (tx) and verdicts (rx) */
#define M_IP4 1u
#define M_TCP 2u
#define M_UDP 4u
#define M_TSO 8u
#define R_IP4_BAD 16u
#define R_L4_BAD 32u

struct tbuf {
	int refs;
	uint8_t mem[IIPT_BUF];
};
struct tpkt {
	struct tbuf *b;
	uint32_t off, len;
	struct tpkt *next;
	uint32_t flags;
	uint16_t tso_mss;
	uint8_t used;
};

struct iipt_node;
struct iipt_app {
	uint8_t (*accept)(struct iipt_node *n, void *pkt);
	void *(*accepted)(struct iipt_node *n, void *h, void *pkt);
	void *(*connected)(struct iipt_node *n, void *h, void *pkt);
	void (*payload)(struct iipt_node *n, void *h, void *pkt, void *to, uint16_t ho, uint16_t tl);
	void (*acked)(struct iipt_node *n, void *h, void *pkt, void *to);
	void (*closed)(struct iipt_node *n, void *h, uint32_t peer_ip, uint16_t lport,
	               uint16_t pport, void *to);
	void (*udp)(struct iipt_node *n, void *pkt);
	void (*arp_reply)(struct iipt_node *n, void *pkt);
	void (*icmp_reply)(struct iipt_node *n, void *pkt);
};

struct iipt_node {
	void *ws;
	uint8_t mac[6];
	uint32_t ip_be;
	uint32_t features;
	struct iipt_node *peer;
	struct tpkt *rxq[IIPT_QMAX];
	uint32_t nrx;
	const struct iipt_app *app;
	void *app_state;
	uint64_t pushed, tso_frames, marks_tso, bad_rx;
	void *conn_mem, *pb_mem;
	uint32_t nconn, npb;
	int tap_fd; /* > 0: frames go to a TAP device instead of the peer (iip_tap_app.c) */
};
static void tap_write(struct iipt_node *n, const uint8_t *f, uint32_t len);

static struct tpkt g_pkts[IIPT_NPKT];
static struct tbuf g_bufs[IIPT_NPKT];
static struct tpkt *g_free_pkts[IIPT_NPKT];
static struct tbuf *g_free_bufs[IIPT_NPKT];
static uint32_t g_nfree_pkts, g_nfree_bufs;
static uint64_t g_clock_ns = 1000000000ull;
static int g_fail;

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); g_fail++; } } while (0)

static void pool_init(void)
{
	uint32_t i;

	memset(g_pkts, 0, sizeof(g_pkts));
	for (i = 0; i < IIPT_NPKT; i++) {
		g_free_pkts[i] = &g_pkts[IIPT_NPKT - 1 - i];
		g_free_bufs[i] = &g_bufs[IIPT_NPKT - 1 - i];
	}
	g_nfree_pkts = g_nfree_bufs = IIPT_NPKT;
}

static struct tpkt *desc_get(void)
{
	struct tpkt *k;

	if (!g_nfree_pkts)
		return NULL;
	k = g_free_pkts[--g_nfree_pkts];
	memset(k, 0, sizeof(*k));
	k->used = 1;
	return k;
}

/* ------------------------------------------------------------ packet ops */
static void *iip_ops_pkt_alloc(void *opaque)
{
	struct tpkt *k;

	(void)opaque;
	if (!g_nfree_bufs || !g_nfree_pkts)
		return NULL;
	k = desc_get();
	k->b = g_free_bufs[--g_nfree_bufs];
	k->b->refs = 1;
	return k;
}
static void iip_ops_pkt_free(void *pkt, void *opaque)
{
	struct tpkt *k = (struct tpkt *)pkt;

	(void)opaque;
	if (!k->used) {
		fprintf(stderr, "FAIL: double free of a packet\n");
		g_fail++;
		return;
	}
	if (--k->b->refs == 0)
		g_free_bufs[g_nfree_bufs++] = k->b;
	k->used = 0;
	g_free_pkts[g_nfree_pkts++] = k;
}
static void *iip_ops_pkt_get_data(void *pkt, void *opaque)
{
	(void)opaque;
	return ((struct tpkt *)pkt)->b->mem + ((struct tpkt *)pkt)->off;
}
static uint16_t iip_ops_pkt_get_len(void *pkt, void *opaque)
{
	(void)opaque;
	return (uint16_t)((struct tpkt *)pkt)->len;
}
static void iip_ops_pkt_set_len(void *pkt, uint16_t len, void *opaque)
{
	(void)opaque;
	((struct tpkt *)pkt)->len = len;
}
static void iip_ops_pkt_increment_head(void *pkt, uint16_t len, void *opaque)
{
	(void)opaque;
	((struct tpkt *)pkt)->off += len;
	((struct tpkt *)pkt)->len -= len;
}
static void iip_ops_pkt_decrement_tail(void *pkt, uint16_t len, void *opaque)
{
	(void)opaque;
	((struct tpkt *)pkt)->len -= len;
}
static void *iip_ops_pkt_clone(void *pkt, void *opaque)
{
	struct tpkt *k = (struct tpkt *)pkt, *c = desc_get();

	(void)opaque;
	if (!c)
		return NULL;
	c->b = k->b;
	c->b->refs++;
	c->off = k->off;
	c->len = k->len;
	return c;
}
static void iip_ops_pkt_scatter_gather_chain_append(void *h, void *t, void *opaque)
{
	struct tpkt *k = (struct tpkt *)h;

	(void)opaque;
	while (k->next)
		k = k->next;
	k->next = (struct tpkt *)t;
}
static void *iip_ops_pkt_scatter_gather_chain_get_next(void *h, void *opaque)
{
	(void)opaque;
	return ((struct tpkt *)h)->next;
}

/* ------------------------------------------------------------ time, L2 */
static void iip_ops_util_now_ns(uint32_t t[3], void *opaque)
{
	uint64_t s = g_clock_ns / 1000000000ull;

	(void)opaque;
	t[0] = (uint32_t)(s >> 32);
	t[1] = (uint32_t)s;
	t[2] = (uint32_t)(g_clock_ns % 1000000000ull);
}
/* The link layer, set before the nodes start (one for the whole world):
 *   L2_ETH   Ethernet II, 14 bytes
 *   L2_TUN   Linux TUN's packet information (struct tun_pi): 2 bytes of flags, then
 *            the EtherType; 4 bytes, no addresses
 *   L2_VLAN  802.1Q: Ethernet addresses, 0x8100, a tag (VLAN 5), the EtherType; 18
 *   L2_RAW   no header at all (a TUN without packet information): IPv4 by version
 * Every non-Ethernet one runs the adapter's re-framing (iip.h "L2"). */
enum { L2_ETH, L2_TUN, L2_VLAN, L2_RAW };
static int g_l2 = L2_ETH;
static uint32_t g_l2h = 14; /* header length of g_l2 */
static int g_lro;           /* receive: frames handed over as chains (LRO), see wire_deliver */
static uint64_t g_chains, g_chains_big; /* chains delivered; of them over 2 KiB */

__attribute__((unused)) static void l2_set(int l2)
{
	static const uint32_t len[] = {14, 4, 18, 0};

	g_l2 = l2;
	g_l2h = len[l2];
}
static uint16_t iip_ops_l2_hdr_len(void *pkt, void *opaque) { (void)pkt; (void)opaque; return (uint16_t)g_l2h; }
static uint8_t *iip_ops_l2_hdr_src_ptr(void *pkt, void *opaque)
{
	if (g_l2 != L2_ETH && g_l2 != L2_VLAN)
		return NULL;
	return (uint8_t *)iip_ops_pkt_get_data(pkt, opaque) + 6;
}
static uint8_t *iip_ops_l2_hdr_dst_ptr(void *pkt, void *opaque)
{
	if (g_l2 != L2_ETH && g_l2 != L2_VLAN)
		return NULL;
	return (uint8_t *)iip_ops_pkt_get_data(pkt, opaque);
}
/* The EtherType of frame f (big-endian, as in the frame). */
static uint16_t l2_type(const uint8_t *f, uint32_t len)
{
	static const uint8_t ip4[2] = {0x08, 0x00};
	uint16_t v = 0;

	if (g_l2 == L2_RAW) {
		if (len && (f[0] >> 4) == 4)
			memcpy(&v, ip4, 2);
		return v;
	}
	if (len >= g_l2h)
		memcpy(&v, f + g_l2h - 2, 2);
	return v;
}
static uint16_t iip_ops_l2_ethertype_be(void *pkt, void *opaque)
{
	return l2_type((const uint8_t *)iip_ops_pkt_get_data(pkt, opaque), iip_ops_pkt_get_len(pkt, opaque));
}
static uint16_t iip_ops_l2_addr_len(void *opaque)
{
	(void)opaque;
	return g_l2 == L2_ETH || g_l2 == L2_VLAN ? 6 : 0;
}
static void iip_ops_l2_broadcast_addr(uint8_t bcaddr[], void *opaque)
{
	(void)opaque;
	memset(bcaddr, 0xff, iip_ops_l2_addr_len(opaque));
}
static void iip_ops_l2_hdr_craft(void *pkt, uint8_t src[], uint8_t dst[], uint16_t ethertype_be,
                                 void *opaque)
{
	uint8_t *d = (uint8_t *)iip_ops_pkt_get_data(pkt, opaque);

	if (g_l2 == L2_ETH || g_l2 == L2_VLAN) {
		memcpy(d, dst, 6);
		memcpy(d + 6, src, 6);
	}
	if (g_l2 == L2_VLAN) {
		d[12] = 0x81;
		d[13] = 0x00;
		d[14] = 0x00;
		d[15] = 0x05;
	}
	if (g_l2 == L2_TUN)
		d[0] = d[1] = 0;
	if (g_l2 != L2_RAW)
		memcpy(d + g_l2h - 2, &ethertype_be, 2);
}
static uint8_t iip_ops_l2_skip(void *pkt, void *opaque) { (void)pkt; (void)opaque; return 0; }
static uint8_t iip_ops_arp_lhw(void *opaque) { (void)opaque; return 6; }
static uint8_t iip_ops_arp_lproto(void *opaque) { (void)opaque; return 4; }

/* ------------------------------------------------------------ NIC model */
#define NODE(o) ((struct iipt_node *)(o))
static uint32_t htonl_(uint32_t v)
{
	uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
	uint32_t r;
	memcpy(&r, b, 4);
	return r;
}
static uint16_t htons_(uint16_t v)
{
	uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
	uint16_t r;
	memcpy(&r, b, 2);
	return r;
}
static uint8_t feat(void *o, uint32_t f) { return (NODE(o)->features & f) != 0; }
static uint8_t iip_ops_nic_feature_offload_tx_scatter_gather(void *o) { return feat(o, F_SG); }
static uint8_t iip_ops_nic_feature_offload_ip4_rx_checksum(void *o) { return feat(o, F_IP4_RX); }
static uint8_t iip_ops_nic_feature_offload_ip4_tx_checksum(void *o) { return feat(o, F_IP4_TX); }
static uint8_t iip_ops_nic_feature_offload_tcp_rx_checksum(void *o) { return feat(o, F_TCP_RX); }
static uint8_t iip_ops_nic_feature_offload_tcp_tx_checksum(void *o) { return feat(o, F_TCP_TX); }
static uint8_t iip_ops_nic_feature_offload_tcp_tx_tso(void *o) { return feat(o, F_TSO); }
static uint8_t iip_ops_nic_feature_offload_udp_rx_checksum(void *o) { return feat(o, F_UDP_RX); }
static uint8_t iip_ops_nic_feature_offload_udp_tx_checksum(void *o) { return feat(o, F_UDP_TX); }
static uint8_t iip_ops_nic_feature_offload_udp_tx_tso(void *o) { return feat(o, F_UDP_TSO); }
static uint8_t iip_ops_nic_offload_ip4_rx_checksum(void *m, void *o)
{
	(void)o;
	return !(((struct tpkt *)m)->flags & R_IP4_BAD);
}
static uint8_t iip_ops_nic_offload_tcp_rx_checksum(void *m, void *o)
{
	(void)o;
	return !(((struct tpkt *)m)->flags & R_L4_BAD);
}
static uint8_t iip_ops_nic_offload_udp_rx_checksum(void *m, void *o)
{
	(void)o;
	return !(((struct tpkt *)m)->flags & R_L4_BAD);
}
static void iip_ops_nic_offload_ip4_tx_checksum_mark(void *m, void *o)
{
	(void)o;
	((struct tpkt *)m)->flags |= M_IP4;
}
static void iip_ops_nic_offload_tcp_tx_checksum_mark(void *m, void *o)
{
	(void)o;
	((struct tpkt *)m)->flags |= M_TCP;
}
static void iip_ops_nic_offload_tcp_tx_tso_mark(void *m, void *o)
{
	((struct tpkt *)m)->flags |= M_TSO;
	((struct tpkt *)m)->tso_mss = iip_compat_tso_mss(NODE(o)->ws);
	NODE(o)->marks_tso++;
}
static void iip_ops_nic_offload_udp_tx_checksum_mark(void *m, void *o)
{
	(void)o;
	((struct tpkt *)m)->flags |= M_UDP;
}
static void iip_ops_nic_offload_udp_tx_tso_mark(void *m, void *o)
{
	(void)m;
	(void)o;
	fprintf(stderr, "FAIL: UDP TSO marked\n");
	g_fail++;
}

/* Internet checksum helpers (RFC 1071). */
static uint32_t csum_add(uint32_t sum, const uint8_t *p, uint32_t n)
{
	uint32_t i;

	for (i = 0; i + 1 < n; i += 2)
		sum += ((uint32_t)p[i] << 8) | p[i + 1];
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	return sum;
}
static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}
static uint32_t pseudo(const uint8_t *ip, uint8_t proto, uint32_t l4len)
{
	uint32_t s = csum_add(0, ip + 12, 8);
	return s + proto + l4len;
}
static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static uint16_t get16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static uint32_t get32(const uint8_t *p) { return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]; }
static void put32(uint8_t *p, uint32_t v) { put16(p, (uint16_t)(v >> 16)); put16(p + 2, (uint16_t)v); }

/* Full L4 checksum of an IPv4 frame at f (what the NIC fills, or what we verify). */
static void fill_l4(uint8_t *f, uint32_t len)
{
	uint8_t *ip = f + g_l2h;
	uint32_t ihl = (ip[0] & 15u) * 4u, l4len = get16(ip + 2) - ihl;
	uint8_t *l4 = ip + ihl;
	uint32_t off = ip[9] == 6 ? 16 : 6;

	(void)len;
	put16(l4 + off, 0);
	put16(l4 + off, csum_fold(pseudo(ip, ip[9], l4len) + csum_add(0, l4, l4len)));
	if (ip[9] == 17 && get16(l4 + 6) == 0)
		put16(l4 + 6, 0xffff);
}
static void fill_ip4(uint8_t *f)
{
	uint8_t *ip = f + g_l2h;

	put16(ip + 10, 0);
	put16(ip + 10, csum_fold(csum_add(0, ip, (ip[0] & 15u) * 4u)));
}

/* Receive side: a fresh packet holding the frame, verdicts set when the receiver
 * declared rx checksum features (the NIC verifies, the stack asks). */
static void rx_verdicts(struct tpkt *k, const uint8_t *f, uint32_t len);
static uint16_t htons_(uint16_t v);
/* With g_lro, a TCP frame with payload comes as a chain, as from a NIC that
 * coalesces (LRO) or receives into small buffers: the headers and 8 payload bytes in
 * the first packet, the rest in pieces of at most 1000 bytes; a TSO frame is not cut
 * on the wire but arrives whole (wire_tso), one segment of up to 64 KiB. */
static void wire_deliver(struct iipt_node *to, const uint8_t *f, uint32_t len)
{
	struct tpkt *head = NULL, *tail = NULL;
	uint32_t off = 0, first = len;
	int tcp = len >= g_l2h + 20u && l2_type(f, len) == htons_(0x0800) && f[g_l2h + 9] == 6;

	if (g_lro && tcp && len > g_l2h + 60u)
		first = g_l2h + 60u;
	if (first > IIPT_BUF || to->nrx == IIPT_QMAX) {
		CHECK(0, "wire: frame %u too long / rx queue full", len);
		return;
	}
	while (off < len) {
		uint32_t n = off == 0 ? first : (len - off < 1000u ? len - off : 1000u);
		struct tpkt *k = (struct tpkt *)iip_ops_pkt_alloc(NULL);

		if (!k) {
			CHECK(0, "wire: no packet");
			for (; head; head = k) {
				k = head->next;
				iip_ops_pkt_free(head, NULL);
			}
			return;
		}
		memcpy(k->b->mem, f + off, n);
		k->len = n;
		if (tail)
			tail->next = k;
		else
			head = k;
		tail = k;
		off += n;
	}
	rx_verdicts(head, f, len);
	if (head->next) {
		g_chains++;
		g_chains_big += len > IIPT_BUF;
	}
	to->rxq[to->nrx++] = head;
}

/* What a NIC with receive checksum offload reports: verified here in software. */
static void rx_verdicts(struct tpkt *k, const uint8_t *f, uint32_t len)
{
	if (len >= g_l2h + 20u && l2_type(f, len) == htons_(0x0800)) {
		const uint8_t *ip = f + g_l2h;
		uint32_t ihl = (ip[0] & 15u) * 4u, l4len = get16(ip + 2) - ihl;

		if (csum_fold(csum_add(0, ip, ihl)) != 0)
			k->flags |= R_IP4_BAD;
		if ((ip[9] == 6 || ip[9] == 17) && g_l2h + ihl + l4len <= len &&
		    csum_fold(pseudo(ip, ip[9], l4len) + csum_add(0, ip + ihl, l4len)) != 0)
			k->flags |= R_L4_BAD;
	}
}

/* A frame leaves the node: to the TAP device, or to the other node. */
static void wire_out(struct iipt_node *from, const uint8_t *f, uint32_t len)
{
	if (from->tap_fd > 0)
		tap_write(from, f, len);
	else
		wire_deliver(from->peer, f, len);
}

/* TSO on the wire: cut the TCP payload into mss pieces, each a whole frame. */
static void wire_tso(struct iipt_node *from, uint8_t *f, uint32_t len, uint32_t mss)
{
	uint8_t *ip = f + g_l2h, seg[IIPT_BUF];
	uint32_t ihl = (ip[0] & 15u) * 4u, thl = (ip[ihl + 12] >> 4) * 4u;
	uint32_t hl = g_l2h + ihl + thl, plen = len - hl, off, seq = get32(ip + ihl + 4);
	uint8_t flags = ip[ihl + 13];
	uint16_t id = get16(ip + 4);

	if (g_lro && from->tap_fd <= 0) { /* the receiver coalesces: one segment */
		fill_ip4(f);
		fill_l4(f, len);
		wire_deliver(from->peer, f, len);
		return;
	}
	CHECK(mss > 0 && hl + mss <= IIPT_BUF, "wire: TSO frame without a usable mss (%u)", mss);
	if (!mss || hl + mss > IIPT_BUF)
		return;
	for (off = 0; off < plen; off += mss) {
		uint32_t n = plen - off < mss ? plen - off : mss;
		uint8_t *sip = seg + g_l2h;

		memcpy(seg, f, hl);
		memcpy(seg + hl, f + hl + off, n);
		put16(sip + 2, (uint16_t)(ihl + thl + n));
		put16(sip + 4, (uint16_t)(id + off / mss));
		put32(sip + ihl + 4, seq + off);
		if (off + n < plen)
			sip[ihl + 13] = (uint8_t)(flags & ~0x09u); /* FIN, PSH on the last only */
		fill_ip4(seg);
		fill_l4(seg, hl + n);
		wire_out(from, seg, hl + n);
	}
}

/* Every frame a node pushes carries the link's header (g_l2): the adapter framed it
 * for this link, not as Ethernet. */
static void wire_check_l2(const uint8_t *f, uint32_t len)
{
	int ok = len >= g_l2h + 20u;

	if (ok && g_l2 == L2_ETH)
		ok = f[12] == 0x08 && (f[13] == 0x00 || f[13] == 0x06);
	else if (ok && g_l2 == L2_TUN)
		ok = f[0] == 0 && f[1] == 0 && f[2] == 0x08 && (f[3] == 0x00 || f[3] == 0x06);
	else if (ok && g_l2 == L2_VLAN)
		ok = f[12] == 0x81 && f[13] == 0x00 && f[15] == 5 && f[16] == 0x08 &&
		     (f[17] == 0x00 || f[17] == 0x06);
	else if (ok)
		ok = (f[0] >> 4) == 4;
	CHECK(ok, "wire: a %u-byte frame without the link's header (l2 %d)", len, g_l2);
}

/* The node's NIC transmits: flatten the chain, apply the marks, hand it over. */
static uint8_t g_frame[70000];
static void iip_ops_l2_push(void *pkt, void *opaque)
{
	struct iipt_node *n = NODE(opaque);
	struct tpkt *k = (struct tpkt *)pkt, *nx;
	uint32_t len = 0, flags = k->flags, mss = k->tso_mss;

	n->pushed++;
	for (; k; k = nx) {
		nx = k->next;
		if (len + k->len <= sizeof(g_frame))
			memcpy(g_frame + len, iip_ops_pkt_get_data(k, NULL), k->len);
		len += k->len;
		k->next = NULL;
		iip_ops_pkt_free(k, NULL); /* one object: iip.h's contract */
	}
	wire_check_l2(g_frame, len);
	if ((flags & M_TSO) && len > g_l2h + 20 + 20) {
		n->tso_frames++;
		wire_tso(n, g_frame, len, mss);
		return;
	}
	if (flags & M_IP4)
		fill_ip4(g_frame);
	if (flags & (M_TCP | M_UDP))
		fill_l4(g_frame, len);
	wire_out(n, g_frame, len);
}
static void iip_ops_l2_flush(void *opaque) { (void)opaque; }

/* ------------------------------------------------------------ events */
static void iip_ops_arp_reply(void *ctx, void *m, void *o)
{
	(void)ctx;
	if (NODE(o)->app->arp_reply)
		NODE(o)->app->arp_reply(NODE(o), m);
}
static void iip_ops_icmp_reply(void *ctx, void *m, void *o)
{
	(void)ctx;
	if (NODE(o)->app->icmp_reply)
		NODE(o)->app->icmp_reply(NODE(o), m);
}
static uint8_t iip_ops_tcp_accept(void *ctx, void *m, void *o)
{
	(void)ctx;
	return NODE(o)->app->accept ? NODE(o)->app->accept(NODE(o), m) : 0;
}
static void *iip_ops_tcp_accepted(void *ctx, void *h, void *m, void *o)
{
	(void)ctx;
	return NODE(o)->app->accepted ? NODE(o)->app->accepted(NODE(o), h, m) : NULL;
}
static void *iip_ops_tcp_connected(void *ctx, void *h, void *m, void *o)
{
	(void)ctx;
	return NODE(o)->app->connected ? NODE(o)->app->connected(NODE(o), h, m) : NULL;
}
static void iip_ops_tcp_payload(void *ctx, void *h, void *m, void *to, uint16_t ho, uint16_t tl,
                                void *o)
{
	(void)ctx;
	NODE(o)->app->payload(NODE(o), h, m, to, ho, tl);
}
static void iip_ops_tcp_acked(void *ctx, void *h, void *m, void *to, void *o)
{
	(void)ctx;
	if (NODE(o)->app->acked)
		NODE(o)->app->acked(NODE(o), h, m, to);
}
static void iip_ops_tcp_closed(void *h, uint8_t lm[], uint32_t li, uint16_t lp, uint8_t pm[],
                               uint32_t pi, uint16_t pp, void *to, void *o)
{
	(void)lm;
	(void)li;
	(void)pm;
	if (NODE(o)->app->closed)
		NODE(o)->app->closed(NODE(o), h, pi, lp, pp, to);
}
static void iip_ops_udp_payload(void *ctx, void *m, void *o)
{
	(void)ctx;
	if (NODE(o)->app->udp)
		NODE(o)->app->udp(NODE(o), m);
}

/* ------------------------------------------------------------ world */
static void node_init(struct iipt_node *n, int id, uint32_t features, const struct iipt_app *app,
                      uint32_t nconn, uint32_t npb)
{
	uint32_t i;
	size_t cs = iip_tcp_conn_size(), ps = iip_pb_size();

	memset(n, 0, sizeof(*n));
	n->ws = calloc(1, iip_workspace_size());
	n->mac[0] = 2;
	n->mac[5] = (uint8_t)id;
	n->ip_be = htonl_(0x0a000000u | (uint32_t)id);
	n->features = features;
	n->app = app;
	n->nconn = nconn;
	n->npb = npb;
	n->conn_mem = aligned_alloc(64, ((cs * nconn + 63) / 64) * 64);
	n->pb_mem = aligned_alloc(64, ((ps * npb + 63) / 64) * 64);
	for (i = 0; i < nconn; i++)
		iip_add_tcp_conn(n->ws, (uint8_t *)n->conn_mem + i * cs);
	for (i = 0; i < npb; i++)
		iip_add_pb(n->ws, (uint8_t *)n->pb_mem + i * ps);
}

__attribute__((unused)) static void node_free(struct iipt_node *n)
{
	uint32_t i;

	for (i = 0; i < n->nrx; i++)
		iip_ops_pkt_free(n->rxq[i], NULL);
	free(n->ws);
	free(n->conn_mem);
	free(n->pb_mem);
}

/* One round: each node takes every frame waiting for it, runs, and the clock moves
 * 10 us (to the next deadline when nothing moved). Returns frames moved. */
__attribute__((unused)) static uint32_t world_round(struct iipt_node *a, struct iipt_node *b)
{
	struct iipt_node *ns[2] = {a, b};
	uint32_t moved = 0, next_min = 1000000, i;

	for (i = 0; i < 2; i++) {
		struct iipt_node *n = ns[i];
		void *batch[IIPT_QMAX];
		uint32_t cnt = n->nrx, nu = 0, j, k;

		memcpy(batch, n->rxq, cnt * sizeof(void *));
		n->nrx = 0;
		moved += cnt;
		for (j = 0; j < cnt || j == 0; j += 0xffff) {
			k = cnt - j < 0xffff ? cnt - j : 0xffff;
			iip_run(n->ws, n->mac, n->ip_be, batch + j, (uint16_t)k, &nu, n);
			if (nu < next_min)
				next_min = nu;
			if (!cnt)
				break;
		}
	}
	g_clock_ns += moved ? 10000ull : (uint64_t)(next_min ? next_min : 1) * 1000ull;
	return moved;
}
#endif
