/*
 * Nodes: one engine context with its memory, packet pool and NIC port, driven by
 * the event loop. The ops table forwards the engine's events to the node's
 * handlers (sim_handlers), with the node in place of the opaque pointer.
 */
#include "sim_int.h"

#include <stdlib.h>
#include <string.h>

static struct sim_node *N(void *opaque) { return ((struct sim_node *)opaque)->self; }

/* ------------------------------------------------------- NIC ops */

/* ops->tx: the frame (maybe a chain) is ours now; the NIC copies it to the wire
 * and frees it at once. */
static void op_tx(void *pkt, void *opaque)
{
	sim_port_tx_pkt(&N(opaque)->port, (struct sim_pkt *)pkt);
}

static void op_tx_offload(void *pkt, const struct ipk_tx_meta *meta, void *opaque)
{
	(void)opaque;
	((struct sim_pkt *)pkt)->meta = *meta;
}

static uint32_t op_rx_csum(void *pkt, void *opaque)
{
	(void)opaque;
	return ((struct sim_pkt *)pkt)->rx_csum;
}

static uint32_t op_random(void *opaque)
{
	return (uint32_t)(sim_rng_next(&N(opaque)->rng) >> 32);
}

static void op_arp_learned(uint32_t ip4_be, const uint8_t mac[6], void *opaque)
{
	struct sim_node *n = N(opaque);

	if (n->h.arp_learned)
		n->h.arp_learned(n, ip4_be, mac, n->harg);
}

/* ------------------------------------------------------- event forwarding */

static int op_tcp_accept(struct ipk_ctx *ctx, const struct ipk_tuple *t, void *opaque)
{
	struct sim_node *n = N(opaque);

	(void)ctx;
	return n->h.tcp_accept ? n->h.tcp_accept(n, t, n->harg) : 1;
}

static void *op_tcp_accepted(struct ipk_ctx *ctx, struct ipk_conn *c, void *opaque)
{
	struct sim_node *n = N(opaque);

	(void)ctx;
	return n->h.tcp_accepted ? n->h.tcp_accepted(n, c, n->harg) : NULL;
}

static void op_tcp_connected(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *opaque)
{
	struct sim_node *n = N(opaque);

	(void)ctx;
	if (n->h.tcp_connected)
		n->h.tcp_connected(n, c, user, n->harg);
}

/* Without a handler the bytes are consumed at once so the window stays open. */
static void op_tcp_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                           uint32_t off, uint32_t len, void *opaque)
{
	struct sim_node *n = N(opaque);

	if (n->h.tcp_payload)
		n->h.tcp_payload(n, c, user, pkt, off, len, n->harg);
	else if (len)
		ipk_tcp_recved(ctx, c, len, n->sim->now);
}

static void op_tcp_acked(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, uint32_t bytes,
                         void *opaque)
{
	struct sim_node *n = N(opaque);

	(void)ctx;
	if (n->h.tcp_acked)
		n->h.tcp_acked(n, c, user, bytes, n->harg);
}

static void op_tcp_closed(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
                          enum ipk_close_reason why, void *opaque)
{
	struct sim_node *n = N(opaque);

	(void)ctx;
	if (n->h.tcp_closed)
		n->h.tcp_closed(n, c, user, why, n->harg);
}

static void op_udp_recv(struct ipk_ctx *ctx, const struct ipk_tuple *t, void *pkt,
                        uint32_t off, uint32_t len, void *opaque)
{
	struct sim_node *n = N(opaque);

	(void)ctx;
	if (n->h.udp_recv)
		n->h.udp_recv(n, t, pkt, off, len, n->harg);
}

static void op_icmp_echo_reply(struct ipk_ctx *ctx, uint32_t from_ip4_be, uint16_t id_be,
                               uint16_t seq_be, uint32_t payload_len, void *opaque)
{
	struct sim_node *n = N(opaque);

	(void)ctx;
	if (n->h.icmp_echo_reply)
		n->h.icmp_echo_reply(n, from_ip4_be, id_be, seq_be, payload_len, n->harg);
}

static void op_udp_recv6(struct ipk_ctx *ctx, const struct ipk_atuple *t, void *pkt,
                         uint32_t off, uint32_t len, void *opaque)
{
	struct sim_node *n = N(opaque);

	(void)ctx;
	if (n->h.udp_recv6)
		n->h.udp_recv6(n, t, pkt, off, len, n->harg);
}

static void op_icmp6_echo_reply(struct ipk_ctx *ctx, const uint8_t from[16], uint16_t id_be,
                                uint16_t seq_be, uint32_t payload_len, void *opaque)
{
	struct sim_node *n = N(opaque);

	(void)ctx;
	if (n->h.icmp6_echo_reply)
		n->h.icmp6_echo_reply(n, from, id_be, seq_be, payload_len, n->harg);
}

static void node_ops(struct ipk_ops *o)
{
	memset(o, 0, sizeof(*o));
	sim_pkt_ops(o);
	o->tx = op_tx;
	o->tx_offload = op_tx_offload;
	o->rx_csum = op_rx_csum;
	o->random = op_random;
	o->arp_learned = op_arp_learned;
	o->tcp_accept = op_tcp_accept;
	o->tcp_accepted = op_tcp_accepted;
	o->tcp_connected = op_tcp_connected;
	o->tcp_payload = op_tcp_payload;
	o->tcp_acked = op_tcp_acked;
	o->tcp_closed = op_tcp_closed;
	o->udp_recv = op_udp_recv;
	o->icmp_echo_reply = op_icmp_echo_reply;
	o->udp_recv6 = op_udp_recv6;
	o->icmp6_echo_reply = op_icmp6_echo_reply;
}

/* ------------------------------------------------------- lifecycle */

void sim_node_config(struct ipk_config *cfg, uint32_t index)
{
	ipk_config_default(cfg);
	cfg->ip4_be = IPK_IP4(10, 0, 0, index & 0xff);
	cfg->netmask_be = IPK_IP4(255, 255, 255, 0);
	cfg->mac[0] = 0x02; /* locally administered, unicast */
	cfg->mac[1] = 0;
	cfg->mac[2] = 0;
	cfg->mac[3] = (uint8_t)(index >> 16);
	cfg->mac[4] = (uint8_t)(index >> 8);
	cfg->mac[5] = (uint8_t)index;
}

void sim_node_ip6(uint8_t out[16], uint32_t index)
{
	memset(out, 0, 16);
	out[0] = 0xfd;
	out[2] = 0x00;
	out[3] = 0x5e;
	out[12] = (uint8_t)(index >> 24);
	out[13] = (uint8_t)(index >> 16);
	out[14] = (uint8_t)(index >> 8);
	out[15] = (uint8_t)index;
}

void sim_node_config6(struct ipk_config *cfg, uint32_t index)
{
	sim_node_config(cfg, index);
	cfg->ip6_enable = 1;
	sim_node_ip6(cfg->ip6_addr, index);
	cfg->ip6_prefix_len = 64;
}

static void res_defaults(struct sim_node_res *r, const struct sim_node_res *in)
{
	memset(r, 0, sizeof(*r));
	if (in)
		*r = *in;
	if (!r->conns)
		r->conns = 64;
	if (!r->pbs)
		r->pbs = 4096;
	if (!r->pkts)
		r->pkts = 4096;
	if (!r->descs)
		r->descs = 2 * r->pkts;
}

static int node_alloc(struct sim_node *n)
{
	size_t csz = ipk_ctx_size(&n->cfg);

	if (csz == 0)
		return -1;
	n->pool = sim_pool_create(n->res.pkts, n->cfg.pkt_buf_size, n->res.descs);
	n->ctx_mem = calloc(1, csz);
	n->conn_mem = calloc(n->res.conns, ipk_conn_size());
	n->pb_mem = calloc(n->res.pbs, ipk_pb_size());
	if (!n->pool || !n->ctx_mem || !n->conn_mem || !n->pb_mem)
		return -1;
	n->ctx = ipk_ctx_init(n->ctx_mem, csz, &n->cfg, &n->ops);
	if (!n->ctx)
		return -1;
	if (ipk_add_conns(n->ctx, n->conn_mem, n->res.conns) < 0 ||
	    ipk_add_pbs(n->ctx, n->pb_mem, n->res.pbs) < 0)
		return -1;
	return 0;
}

struct sim_node *sim_node_create(struct sim *s, const struct ipk_config *cfg,
                                 const struct sim_node_res *res)
{
	struct sim_node *n = (struct sim_node *)calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->self = n;
	n->sim = s;
	n->index = s->nnodes;
	n->cfg = *cfg;
	n->cfg.opaque = n;
	n->sched_t = UINT64_MAX;
	n->deadline = UINT64_MAX;
	res_defaults(&n->res, res);
	node_ops(&n->ops);
	sim_rng_seed(&n->rng, s->seed ^ (0x4e4f444500000000ull + n->index));
	if (sim_port_init(&n->port, s, cfg->link, cfg->mtu, cfg->caps) || node_alloc(n) ||
	    sim_grow((void **)&s->nodes, &s->capnodes, s->nnodes + 1, sizeof(*s->nodes))) {
		sim_node_destroy(n);
		return NULL;
	}
	n->port.node = n;
	s->nodes[s->nnodes++] = n;
	sim_node_kick(n);
	return n;
}

void sim_node_destroy(struct sim_node *n)
{
	uint32_t i;

	if (!n)
		return;
	for (i = 0; i < n->rx_count; i++)
		sim_pkt_free(n->rxq[(n->rx_head + i) % SIM_RXRING]);
	sim_port_fini(&n->port);
	free(n->ctx_mem);
	free(n->conn_mem);
	free(n->pb_mem);
	sim_pool_destroy(n->pool);
	free(n);
}

void sim_node_set_handlers(struct sim_node *n, const struct sim_handlers *h, void *arg)
{
	if (h)
		n->h = *h;
	else
		memset(&n->h, 0, sizeof(n->h));
	n->harg = arg;
}

uint64_t sim_node_csum_drops(const struct sim_node *n)
{
	const struct ipk_counters *c = ipk_counters(n->ctx);

	return c->drop[IPK_DROP_IP4_CSUM] + c->drop[IPK_DROP_TCP_CSUM] +
	       c->drop[IPK_DROP_UDP_CSUM] + c->drop[IPK_DROP_ICMP_MALFORMED];
}

/* ------------------------------------------------------- scheduling */

static void node_schedule(struct sim_node *n, uint64_t t)
{
	n->gen++;
	n->sched_t = t;
	if (sim_ev_push(n->sim, t, SIM_EV_NODE, n->gen, n, NULL))
		n->sched_t = UINT64_MAX;
}

void sim_node_kick(struct sim_node *n)
{
	if (n->running) {
		n->rerun = 1;
		return;
	}
	if (n->sched_t <= n->sim->now)
		return; /* already due now */
	node_schedule(n, n->sim->now);
}

/* An engine that keeps asking for "now" again is polled a microsecond later after
 * a while, as a real poll loop would come round, so a bug cannot freeze time. */
#define SIM_SPIN_MAX 1000u

void sim_node_run(struct sim_node *n)
{
	void *batch[SIM_RXBATCH];
	uint32_t k = 0;
	uint64_t now = n->sim->now, dl;

	n->sched_t = UINT64_MAX;
	while (k < SIM_RXBATCH && n->rx_count) {
		batch[k++] = n->rxq[n->rx_head];
		n->rx_head = (n->rx_head + 1) % SIM_RXRING;
		n->rx_count--;
	}
	n->running = 1;
	n->rerun = 0;
	dl = ipk_run(n->ctx, k ? batch : NULL, k, now);
	n->running = 0;
	n->runs++;
	n->deadline = dl;
	if (n->rx_count || n->rerun) {
		node_schedule(n, now);
		return;
	}
	if (dl == UINT64_MAX)
		return;
	if (dl <= now) {
		if (++n->spin > SIM_SPIN_MAX) {
			n->spin = 0;
			dl = now + SIM_US(1);
		}
	} else {
		n->spin = 0;
	}
	node_schedule(n, dl < now ? now : dl);
}

void sim_node_rx(struct sim_node *n, const uint8_t *frame, uint32_t len)
{
	struct sim_port *p = &n->port;
	struct sim_pkt *k;

	if (n->rx_count == SIM_RXRING) {
		p->st.rx_ring_full++;
		return;
	}
	if (len > n->pool->buf_size) {
		p->st.rx_oversize++;
		return;
	}
	k = sim_pkt_from(n->pool, frame, len);
	if (!k) {
		p->st.rx_nobuf++;
		return;
	}
	if (p->caps & (IPK_CAP_RX_CSUM_IP4 | IPK_CAP_RX_CSUM_L4)) {
		k->rx_csum = sim_nic_rx_csum(frame, len, p->linktype == IPK_LINK_ETH ? 14u : 0u,
		                             p->caps);
		if (k->rx_csum & (IPK_RXCSUM_IP4_BAD | IPK_RXCSUM_L4_BAD))
			p->st.rx_csum_bad++;
	}
	n->rxq[(n->rx_head + n->rx_count) % SIM_RXRING] = k;
	n->rx_count++;
	p->st.rx_frames++;
	sim_node_kick(n);
}
