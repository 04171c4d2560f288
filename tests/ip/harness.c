#include "harness.h"

#include <stdlib.h>
#include <string.h>

#include "../../core/wire/wire.h"

#define H_NPBS 64
#define H_NCONNS 4

void hb_mac(uint8_t mac[6], int idx)
{
	static const uint8_t base[6] = {0x02, 0, 0, 0, 0, 0};

	memcpy(mac, base, 6);
	mac[5] = (uint8_t)(idx + 1);
}

/* ---- ops ---- */

static uint32_t op_random(void *opaque)
{
	struct hnode *h = (struct hnode *)opaque;

	return 0x9e3779b9u * (uint32_t)(h->idx + 7);
}

/* The simulated NIC: finish the offloads marked on the frame (as hardware would)
 * so the peer sees a correct frame, and keep the marks for the capture. */
static void nic_finish(struct hnode *h, struct sim_pkt *k)
{
	uint8_t *p = sim_pkt_data(k);
	uint32_t l2 = k->meta.l2_len, l3 = k->meta.l3_len;
	int odd = 0;

	if (k->meta.flags & IPK_TXOFF_IP4_CSUM) {
		ipk_wr16(p + l2 + 10, 0);
		ipk_wr16(p + l2 + 10, ipk_csum_fold(ipk_csum_add(0, p + l2, l3, &odd)));
	}
	if (k->meta.flags & IPK_TXOFF_UDP_CSUM) {
		uint8_t *u = p + l2 + l3;
		uint32_t ulen = ipk_rd16(u + 4);
		uint16_t c;

		/* The field holds the pseudo-header sum: summing over it completes it. */
		odd = 0;
		c = ipk_csum_fold(ipk_csum_add(0, u, ulen, &odd));
		ipk_wr16(u + 6, c ? c : 0xffff);
	}
	if ((k->meta.flags & (IPK_TXOFF_TCP_CSUM | IPK_TXOFF_IP6)) ==
	    (IPK_TXOFF_TCP_CSUM | IPK_TXOFF_IP6)) {
		/* IPv6 TCP: the field holds the pseudo-header sum; sum the segment over it */
		uint8_t *t = p + l2 + l3;

		odd = 0;
		ipk_wr16(t + 16, ipk_csum_fold(ipk_csum_add(0, t, ipk_rd16(p + l2 + 4), &odd)));
	}
	(void)h;
}

static void op_tx(void *pkt, void *opaque)
{
	struct hnode *h = (struct hnode *)opaque;
	struct hnet *net = h->net;
	struct sim_pkt *k = (struct sim_pkt *)pkt;
	struct sim_pkt *flat = sim_pkt_linearize(net->pool, k);

	if (flat) {
		flat->meta = k->meta;
		nic_finish(h, flat);
		if (net->ncap < H_CAP_FRAMES) {
			struct hframe *f = &net->cap[net->ncap++];

			f->from = h->idx;
			f->len = flat->len;
			f->flags = k->meta.flags;
			f->chained = k->next != NULL;
			memcpy(f->b, sim_pkt_data(flat), flat->len);
		}
		if (!net->cut && net->qn < H_QUEUE) {
			net->q[net->qn] = flat;
			net->qfrom[net->qn++] = h->idx;
		} else {
			sim_pkt_free(flat);
		}
	}
	sim_pkt_free_chain(k);
}

static void op_tx_flush(void *opaque) { ((struct hnode *)opaque)->flushes++; }

static void op_tx_offload(void *pkt, const struct ipk_tx_meta *meta, void *opaque)
{
	((struct sim_pkt *)pkt)->meta = *meta;
	((struct hnode *)opaque)->offloads++;
}

static uint32_t op_rx_csum(void *pkt, void *opaque)
{
	(void)opaque;
	return ((struct sim_pkt *)pkt)->rx_csum;
}

/* The IP tests open TCP connections only to watch what IPv4 does with their
 * segments; the payload is not looked at (ipk_tcp_connect requires the op). */
static void op_tcp_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                           uint32_t off, uint32_t len, void *opaque)
{
	(void)ctx; (void)c; (void)user; (void)pkt; (void)off; (void)len; (void)opaque;
}

static void op_udp_recv(struct ipk_ctx *ctx, const struct ipk_tuple *t, void *pkt, uint32_t off,
                        uint32_t len, void *opaque)
{
	struct hnode *h = (struct hnode *)opaque;

	if (h->udp_n < sizeof(h->udp_order) && len > 0)
		ipk_pkt_copy(ctx, pkt, off, &h->udp_order[h->udp_n], 1);
	h->udp_n++;
	h->udp_t = *t;
	h->udp_was_chain = ((struct sim_pkt *)pkt)->next != NULL;
	h->udp_len = ipk_pkt_copy(ctx, pkt, off, h->udp_data,
	                          len < sizeof(h->udp_data) ? len : (uint32_t)sizeof(h->udp_data));
	if (h->udp_echo)
		ipk_udp_sendto(ctx, t->local_port_be, t->peer_ip4_be, t->peer_port_be, h->udp_data,
		               h->udp_len, h->net->now);
}

static void op_echo_reply(struct ipk_ctx *ctx, uint32_t from, uint16_t id_be, uint16_t seq_be,
                          uint32_t len, void *opaque)
{
	struct hnode *h = (struct hnode *)opaque;

	(void)ctx;
	h->echo_n++;
	h->echo_from_be = from;
	h->echo_id_be = id_be;
	h->echo_seq_be = seq_be;
	h->echo_len = len;
}

static int op_arp_resolve(uint32_t ip, uint8_t mac[6], void *opaque)
{
	struct hnode *h = (struct hnode *)opaque;
	int i;

	for (i = 0; i < h->itab_n; i++)
		if (h->itab_ip[i] == ip) {
			memcpy(mac, h->itab_mac[i], 6);
			return 1;
		}
	return 0;
}

static void op_arp_learned(uint32_t ip, const uint8_t mac[6], void *opaque)
{
	struct hnode *h = (struct hnode *)opaque;

	h->learned_n++;
	if (h->ops.arp_resolve && h->itab_n < 8 && !op_arp_resolve(ip, (uint8_t[6]){0}, h)) {
		h->itab_ip[h->itab_n] = ip;
		memcpy(h->itab_mac[h->itab_n++], mac, 6);
	}
}

/* ---- net ---- */

static struct hnode *hnode_new(struct hnet *net, int idx,
                               void (*tweak)(int, struct ipk_config *))
{
	struct hnode *h = (struct hnode *)calloc(1, sizeof(*h));
	size_t sz;

	h->pool = net->pool;
	h->net = net;
	h->idx = idx;
	ipk_config_default(&h->cfg);
	h->cfg.opaque = h;
	hb_mac(h->cfg.mac, idx);
	h->cfg.ip4_be = IPK_IP4(10, 0, 0, idx + 1);
	h->cfg.netmask_be = IPK_IP4(255, 255, 255, 0);
	h->cfg.conn_hash_buckets = 16;
	h->cfg.arp_entries = 8;
	h->cfg.frag_slots = 4;
	if (tweak)
		tweak(idx, &h->cfg);
	sim_pkt_ops(&h->ops);
	h->ops.tx = op_tx;
	h->ops.tx_flush = op_tx_flush;
	h->ops.tx_offload = op_tx_offload;
	h->ops.rx_csum = op_rx_csum;
	h->ops.random = op_random;
	h->ops.udp_recv = op_udp_recv;
	h->ops.tcp_payload = op_tcp_payload;
	h->ops.icmp_echo_reply = op_echo_reply;
	h->ops.arp_learned = op_arp_learned;
	sz = ipk_ctx_size(&h->cfg);
	h->mem = malloc((sz + 7) & ~(size_t)7);
	h->ctx = ipk_ctx_init(h->mem, sz, &h->cfg, &h->ops);
	h->npbs = H_NPBS;
	h->pbs = malloc(ipk_pb_size() * H_NPBS);
	h->conns = malloc(ipk_conn_size() * H_NCONNS);
	if (h->ctx) {
		ipk_add_pbs(h->ctx, h->pbs, H_NPBS);
		ipk_add_conns(h->ctx, h->conns, H_NCONNS);
	}
	return h;
}

void hnode_use_arp_table(struct hnode *h) { h->ops.arp_resolve = op_arp_resolve; }

struct hnet *hnet_new(int n, void (*tweak)(int idx, struct ipk_config *cfg))
{
	return hnet_new_pool(n, tweak, 256);
}

struct hnet *hnet_new_pool(int n, void (*tweak)(int idx, struct ipk_config *cfg),
                           uint32_t pkts)
{
	struct hnet *net = (struct hnet *)calloc(1, sizeof(*net));
	int i;

	net->pool = sim_pool_create(pkts, H_FRAME_MAX, 2 * pkts);
	net->cap = (struct hframe *)calloc(H_CAP_FRAMES, sizeof(struct hframe));
	net->n = n;
	net->now = 1000000000ull;
	for (i = 0; i < n; i++)
		net->nodes[i] = hnode_new(net, i, tweak);
	return net;
}

void hnet_free(struct hnet *net)
{
	int i;

	for (i = 0; i < net->qn; i++)
		sim_pkt_free(net->q[i]);
	for (i = 0; i < net->n; i++) {
		free(net->nodes[i]->mem);
		free(net->nodes[i]->pbs);
		free(net->nodes[i]->conns);
		free(net->nodes[i]);
	}
	sim_pool_destroy(net->pool);
	free(net->cap);
	free(net);
}

static void deliver(struct hnet *net, struct sim_pkt *frame, int from)
{
	int i;

	for (i = 0; i < net->n; i++) {
		struct hnode *h = net->nodes[i];
		struct sim_pkt *copy;
		void *one;

		if (i == from)
			continue;
		copy = sim_pkt_from(net->pool, sim_pkt_data(frame), frame->len);
		if (!copy)
			continue;
		copy->rx_csum = h->rx_csum_stamp;
		one = copy;
		ipk_run(h->ctx, &one, 1, net->now);
	}
	sim_pkt_free(frame);
}

void hnet_settle(struct hnet *net)
{
	int rounds;

	for (rounds = 0; rounds < 100 && net->qn > 0; rounds++) {
		struct sim_pkt *batch[H_QUEUE];
		int from[H_QUEUE], n = net->qn, i;

		memcpy(batch, net->q, sizeof(batch[0]) * (size_t)n);
		memcpy(from, net->qfrom, sizeof(from[0]) * (size_t)n);
		net->qn = 0;
		for (i = 0; i < n; i++)
			deliver(net, batch[i], from[i]);
	}
}

void hnet_advance(struct hnet *net, uint64_t dt)
{
	int i;

	net->now += dt;
	for (i = 0; i < net->n; i++)
		ipk_run(net->nodes[i]->ctx, NULL, 0, net->now);
	hnet_settle(net);
}

void hnode_inject(struct hnode *h, const void *bytes, uint32_t len)
{
	struct sim_pkt *k = sim_pkt_from(h->pool, bytes, len);
	void *one = k;

	if (!k)
		return;
	k->rx_csum = h->rx_csum_stamp;
	ipk_run(h->ctx, &one, 1, h->net->now);
}

void hnet_clear_cap(struct hnet *net) { net->ncap = 0; }

int hnet_no_leaks(struct hnet *net)
{
	int i, ok = 1;

	hnet_settle(net);
	for (i = 0; i < net->n; i++)
		if (ipk_pbs_free(net->nodes[i]->ctx) != net->nodes[i]->npbs)
			ok = 0;
	return ok && net->pool->descs_out == 0 && net->pool->bufs_out == 0;
}

/* ---- builders ---- */

uint32_t hb_eth(uint8_t *b, const uint8_t dst[6], const uint8_t src[6], uint16_t type)
{
	memcpy(b, dst, 6);
	memcpy(b + 6, src, 6);
	ipk_wr16(b + 12, type);
	return 14;
}

uint32_t hb_ip4(uint8_t *b, uint32_t src_be, uint32_t dst_be, uint8_t proto, uint16_t id,
                uint16_t frag, const uint8_t *opts, uint32_t optlen, const uint8_t *payload,
                uint32_t plen)
{
	uint32_t ihl = 20 + optlen;
	int odd = 0;

	b[0] = (uint8_t)(0x40 | (ihl / 4));
	b[1] = 0;
	ipk_wr16(b + 2, (uint16_t)(ihl + plen));
	ipk_wr16(b + 4, id);
	ipk_wr16(b + 6, frag);
	b[8] = 64;
	b[9] = proto;
	ipk_wr16(b + 10, 0);
	ipk_wrbe32(b + 12, src_be);
	ipk_wrbe32(b + 16, dst_be);
	if (optlen)
		memcpy(b + 20, opts, optlen);
	ipk_wr16(b + 10, ipk_csum_fold(ipk_csum_add(0, b, ihl, &odd)));
	if (plen)
		memcpy(b + ihl, payload, plen);
	return ihl + plen;
}

uint32_t hb_udp(uint8_t *b, uint32_t src_be, uint32_t dst_be, uint16_t sport, uint16_t dport,
                const uint8_t *payload, uint32_t plen, int csum_zero)
{
	uint32_t sum;
	uint16_t c;
	int odd = 0;

	ipk_wr16(b, sport);
	ipk_wr16(b + 2, dport);
	ipk_wr16(b + 4, (uint16_t)(8 + plen));
	ipk_wr16(b + 6, 0);
	if (plen)
		memcpy(b + 8, payload, plen);
	if (!csum_zero) {
		sum = ipk_csum_pseudo(src_be, dst_be, 17, 8 + plen);
		c = ipk_csum_fold(ipk_csum_add(sum, b, 8 + plen, &odd));
		ipk_wr16(b + 6, c ? c : 0xffff);
	}
	return 8 + plen;
}
