/* UDP and ICMP between contexts, raw-IP links, transmit offloads, the bind table,
 * configuration checks. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "check.h"
#include "harness.h"

#define SEC 1000000000ull
#define A_IP IPK_IP4(10, 0, 0, 1)
#define B_IP IPK_IP4(10, 0, 0, 2)

static const uint8_t msg[] = "the quick brown fox";

static void test_udp_echo_between_two_contexts(void)
{
	struct hnet *net = hnet_new(2, NULL);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];

	CHECK_EQ(ipk_udp_bind(a->ctx, ipk_htons(5000)), 0);
	CHECK_EQ(ipk_udp_bind(b->ctx, ipk_htons(7)), 0);
	b->udp_echo = 1;
	CHECK_EQ(ipk_udp_sendto(a->ctx, ipk_htons(5000), B_IP, ipk_htons(7), msg, sizeof(msg),
	                        net->now), (int)sizeof(msg));
	hnet_settle(net);
	CHECK_EQ(b->udp_n, 1);
	CHECK_EQ(b->udp_t.peer_ip4_be, A_IP);
	CHECK_EQ(b->udp_t.peer_port_be, ipk_htons(5000));
	CHECK_EQ(a->udp_n, 1);
	CHECK_EQ(a->udp_len, sizeof(msg));
	CHECK(memcmp(a->udp_data, msg, sizeof(msg)) == 0);
	CHECK_EQ(a->udp_t.peer_port_be, ipk_htons(7));
	CHECK_EQ(ipk_counters(a->ctx)->udp_tx, 1);
	CHECK(a->flushes > 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static uint32_t udp_frame_to_a(uint8_t *b, const uint8_t *payload, uint32_t n, int zero)
{
	uint8_t u[600], mac[6], peer[6];

	hb_mac(mac, 0);
	hb_mac(peer, 1);
	hb_eth(b, mac, peer, IPK_ETHERTYPE_IP4);
	return 14 + hb_ip4(b + 14, B_IP, A_IP, 17, 3, 0, NULL, 0, u,
	                   hb_udp(u, B_IP, A_IP, 9, 5000, payload, n, zero));
}

static void test_udp_zero_checksum_accepted(void)
{
	struct hnet *net = hnet_new(1, NULL);
	struct hnode *a = net->nodes[0];
	uint8_t b[200];
	uint32_t n = udp_frame_to_a(b, msg, 5, 1);

	ipk_udp_bind(a->ctx, ipk_htons(5000));
	CHECK_EQ(ipk_rd16(b + 34 + 6), 0);
	hnode_inject(a, b, n);
	CHECK_EQ(a->udp_n, 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_udp_bad_checksum_or_length_dropped(void)
{
	struct hnet *net = hnet_new(1, NULL);
	struct hnode *a = net->nodes[0];
	uint8_t b[200];
	uint32_t n = udp_frame_to_a(b, msg, 5, 0);

	ipk_udp_bind(a->ctx, ipk_htons(5000));
	b[n - 1] ^= 0x40;
	hnode_inject(a, b, n);
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_UDP_CSUM], 1);
	n = udp_frame_to_a(b, msg, 5, 1);
	ipk_wr16(b + 34 + 4, 40); /* UDP length past the datagram */
	hnode_inject(a, b, n);
	ipk_wr16(b + 34 + 4, 4); /* below the header */
	hnode_inject(a, b, n);
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_UDP_MALFORMED], 2);
	CHECK_EQ(a->udp_n, 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_udp_closed_port_sends_port_unreachable_with_quote(void)
{
	struct hnet *net = hnet_new(2, NULL);
	struct hnode *b = net->nodes[1];
	const struct hframe *sent = NULL, *err = NULL;
	int i;

	ipk_udp_sendto(net->nodes[0]->ctx, ipk_htons(5000), B_IP, ipk_htons(9), msg, sizeof(msg),
	               net->now);
	hnet_settle(net);
	for (i = 0; i < net->ncap; i++) {
		const struct hframe *f = &net->cap[i];

		if (ipk_rd16(f->b + 12) != IPK_ETHERTYPE_IP4)
			continue;
		if (f->from == 0 && f->b[23] == 17)
			sent = f;
		if (f->from == 1 && f->b[23] == 1)
			err = f;
	}
	CHECK_EQ(ipk_counters(b->ctx)->drop[IPK_DROP_UDP_NO_PORT], 1);
	CHECK(sent != NULL && err != NULL);
	if (sent && err) {
		const uint8_t *icmp = err->b + 34;
		int odd = 0;

		CHECK_EQ(icmp[0], IPK_ICMP_UNREACH);
		CHECK_EQ(icmp[1], IPK_ICMP_UNREACH_PORT);
		CHECK_EQ(ipk_csum_fold(ipk_csum_add(0, icmp, err->len - 34, &odd)), 0);
		/* The whole (small) datagram is quoted, byte for byte. */
		CHECK_EQ(err->len - 34 - 8, sent->len - 14);
		CHECK(memcmp(icmp + 8, sent->b + 14, sent->len - 14) == 0);
		CHECK_EQ(ipk_rdbe32(err->b + 14 + 16), A_IP);
	}
	CHECK_EQ(ipk_counters(net->nodes[0]->ctx)->icmp_rx, 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_icmp_errors_rate_limited(void)
{
	struct hnet *net = hnet_new(1, NULL);
	struct hnode *a = net->nodes[0];
	uint8_t b[200];
	uint32_t n = udp_frame_to_a(b, msg, 5, 0);
	int k, icmp = 0;

	ipk_arp_add_static(a->ctx, B_IP, (const uint8_t *)"\2\0\0\0\0\2");
	for (k = 0; k < 40; k++)
		hnode_inject(a, b, n);
	for (k = 0; k < net->ncap; k++)
		icmp += net->cap[k].b[23] == 1;
	CHECK_EQ(icmp, IPK_ICMP_RATE_BURST);
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_UDP_NO_PORT], 40);
	net->now += 100 * 1000000ull; /* 100 ms: 10 more tokens */
	for (k = 0; k < 40; k++)
		hnode_inject(a, b, n);
	CHECK_EQ(net->ncap, IPK_ICMP_RATE_BURST + 10);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_icmp_echo_gets_reply(void)
{
	struct hnet *net = hnet_new(2, NULL);
	struct hnode *a = net->nodes[0];

	CHECK_EQ(ipk_icmp_echo(a->ctx, B_IP, ipk_htons(0x1234), ipk_htons(7), 56, net->now), 0);
	hnet_settle(net);
	CHECK_EQ(a->echo_n, 1);
	CHECK_EQ(a->echo_from_be, B_IP);
	CHECK_EQ(a->echo_id_be, ipk_htons(0x1234));
	CHECK_EQ(a->echo_seq_be, ipk_htons(7));
	CHECK_EQ(a->echo_len, 56);
	CHECK_EQ(ipk_icmp_echo(a->ctx, B_IP, 0, 0, 1500, net->now), IPK_EMSGSIZE);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void jumbo(int idx, struct ipk_config *cfg)
{
	(void)idx;
	cfg->mtu = 9000;
	cfg->caps |= IPK_CAP_SG | IPK_CAP_LRO;
}

/* An MTU above the packet buffer (SG + LRO) does not let an echo request outgrow
 * its one packet: it wrote past the buffer before. */
static void test_icmp_echo_bounded_by_buffer_under_jumbo_mtu(void)
{
	struct hnet *net = hnet_new(2, jumbo);
	struct hnode *a = net->nodes[0];
	uint32_t most = 2048 - IPK_ETH_HLEN - IPK_IP4_HLEN - IPK_ICMP_HLEN;

	CHECK_EQ(ipk_icmp_echo(a->ctx, B_IP, 0, 0, 4000, net->now), IPK_EMSGSIZE);
	CHECK_EQ(ipk_icmp_echo(a->ctx, B_IP, 0, 0, most + 1, net->now), IPK_EMSGSIZE);
	CHECK_EQ(net->pool->bad_set_len, 0); /* refused before any packet was sized */
	CHECK_EQ(ipk_icmp_echo(a->ctx, B_IP, ipk_htons(9), ipk_htons(1), most, net->now), 0);
	hnet_settle(net);
	CHECK_EQ(a->echo_n, 1);
	CHECK_EQ(a->echo_len, most);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_icmp_echo_to_broadcast_ignored(void)
{
	struct hnet *net = hnet_new(2, NULL);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];

	ipk_icmp_echo(a->ctx, IPK_IP4(10, 0, 0, 255), 1, 1, 8, net->now);
	hnet_settle(net);
	CHECK_EQ(a->echo_n, 0);
	CHECK_EQ(ipk_counters(b->ctx)->drop[IPK_DROP_ICMP_TYPE], 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_icmp_bad_checksum_dropped(void)
{
	struct hnet *net = hnet_new(1, NULL);
	struct hnode *a = net->nodes[0];
	uint8_t b[100], icmp[16], mac[6], peer[6];

	memset(icmp, 0, sizeof(icmp));
	icmp[0] = 8;
	ipk_wr16(icmp + 2, 0x1234); /* wrong */
	hb_mac(mac, 0);
	hb_mac(peer, 1);
	hb_eth(b, mac, peer, IPK_ETHERTYPE_IP4);
	hnode_inject(a, b, 14 + hb_ip4(b + 14, B_IP, A_IP, 1, 1, 0, NULL, 0, icmp, 16));
	hnode_inject(a, b, 14 + hb_ip4(b + 14, B_IP, A_IP, 1, 1, 0, NULL, 0, icmp, 4));
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_ICMP_MALFORMED], 2);
	CHECK_EQ(net->ncap, 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void rawip(int idx, struct ipk_config *cfg)
{
	(void)idx;
	cfg->link = IPK_LINK_RAWIP;
}

static void test_rawip_link_udp_and_ping_without_arp(void)
{
	struct hnet *net = hnet_new(2, rawip);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	int i;

	ipk_udp_bind(b->ctx, ipk_htons(7));
	b->udp_echo = 1;
	ipk_udp_bind(a->ctx, ipk_htons(5000));
	ipk_udp_sendto(a->ctx, ipk_htons(5000), B_IP, ipk_htons(7), msg, 4, net->now);
	ipk_icmp_echo(a->ctx, B_IP, 1, 2, 10, net->now);
	hnet_settle(net);
	CHECK_EQ(a->udp_n, 1);
	CHECK_EQ(a->echo_n, 1);
	CHECK_EQ(net->ncap, 4);
	for (i = 0; i < net->ncap; i++)
		CHECK_EQ(net->cap[i].b[0], 0x45); /* bare IPv4, no link header */
	CHECK_EQ(ipk_arp_announce(a->ctx, net->now), IPK_EINVAL);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void tx_offload(int idx, struct ipk_config *cfg)
{
	if (idx == 0)
		cfg->caps |= IPK_CAP_TX_CSUM_IP4 | IPK_CAP_TX_CSUM_UDP | IPK_CAP_SG;
}

static void test_udp_tx_offload_marks_and_sg_chain(void)
{
	struct hnet *net = hnet_new(2, tx_offload);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	struct sim_pkt *p;
	const struct hframe *f;

	ipk_udp_bind(b->ctx, ipk_htons(7));
	ipk_udp_sendto(a->ctx, ipk_htons(5000), B_IP, ipk_htons(7), msg, 3, net->now);
	hnet_settle(net);
	hnet_clear_cap(net);
	p = sim_pkt_from(net->pool, msg, sizeof(msg));
	CHECK_EQ(ipk_udp_send(a->ctx, ipk_htons(5000), B_IP, ipk_htons(7), p, net->now),
	         (int)sizeof(msg));
	CHECK_EQ(net->ncap, 1);
	f = &net->cap[0];
	CHECK(f->chained);
	CHECK_EQ(f->flags, IPK_TXOFF_IP4_CSUM | IPK_TXOFF_UDP_CSUM);
	hnet_settle(net);
	/* The NIC (harness) completed both checksums and b accepted the datagram. */
	CHECK_EQ(b->udp_n, 2);
	CHECK(memcmp(b->udp_data, msg, sizeof(msg)) == 0);
	CHECK_EQ(ipk_counters(b->ctx)->drop[IPK_DROP_UDP_CSUM], 0);
	CHECK_EQ(ipk_counters(b->ctx)->drop[IPK_DROP_IP4_CSUM], 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_udp_send_without_sg_copies_and_frees(void)
{
	struct hnet *net = hnet_new(2, NULL);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	struct sim_pkt *p = sim_pkt_from(net->pool, msg, 8);

	ipk_udp_bind(b->ctx, ipk_htons(7));
	CHECK_EQ(ipk_udp_send(a->ctx, ipk_htons(5000), B_IP, ipk_htons(7), p, net->now), 8);
	hnet_settle(net);
	CHECK_EQ(b->udp_n, 1);
	CHECK_EQ(net->cap[1].chained, 0);
	CHECK_EQ(net->cap[1].flags, 0);
	p = sim_pkt_from(net->pool, msg, 8);
	CHECK_EQ(ipk_udp_send(a->ctx, ipk_htons(5000), IPK_IP4(8, 8, 8, 8), ipk_htons(7), p,
	                      net->now), IPK_EHOSTUNREACH);
	CHECK_EQ(p->len, 8); /* still the caller's */
	sim_pkt_free(p);
	CHECK_EQ(ipk_udp_sendto(a->ctx, ipk_htons(5000), B_IP, ipk_htons(7), msg, 65508, net->now),
	         IPK_EMSGSIZE);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void gateway(int idx, struct ipk_config *cfg)
{
	(void)idx;
	cfg->gateway_be = IPK_IP4(10, 0, 0, 2);
}

static void test_udp_off_link_goes_to_gateway(void)
{
	struct hnet *net = hnet_new(2, gateway);
	uint8_t bmac[6];

	hb_mac(bmac, 1);
	ipk_udp_sendto(net->nodes[0]->ctx, 5, IPK_IP4(8, 8, 8, 8), 53, msg, 3, net->now);
	hnet_settle(net);
	CHECK(net->ncap >= 3);
	/* The datagram went to the gateway's MAC, addressed to 8.8.8.8. */
	CHECK(memcmp(net->cap[2].b, bmac, 6) == 0);
	CHECK_EQ(ipk_rdbe32(net->cap[2].b + 30), IPK_IP4(8, 8, 8, 8));
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_udp_bind_table_errors_and_reuse(void)
{
	struct hnet *net = hnet_new(1, NULL); /* max_udp_binds = 16 */
	struct ipk_ctx *c = net->nodes[0]->ctx;
	uint16_t p;

	CHECK_EQ(ipk_udp_bind(c, 0), IPK_EINVAL);
	CHECK_EQ(ipk_udp_unbind(c, ipk_htons(1)), IPK_ENOENT);
	for (p = 1; p <= 16; p++)
		CHECK_EQ(ipk_udp_bind(c, ipk_htons(p)), 0);
	CHECK_EQ(ipk_udp_bind(c, ipk_htons(3)), IPK_EADDRINUSE);
	CHECK_EQ(ipk_udp_bind(c, ipk_htons(17)), IPK_ENOMEM);
	/* Remove every other port; the rest must still be found. */
	for (p = 1; p <= 16; p += 2)
		CHECK_EQ(ipk_udp_unbind(c, ipk_htons(p)), 0);
	for (p = 2; p <= 16; p += 2)
		CHECK_EQ(ipk_udp_bind(c, ipk_htons(p)), IPK_EADDRINUSE);
	for (p = 1; p <= 16; p += 2)
		CHECK_EQ(ipk_udp_unbind(c, ipk_htons(p)), IPK_ENOENT);
	CHECK_EQ(ipk_udp_bind(c, ipk_htons(17)), 0);
	hnet_free(net);
}

static uint32_t rnd(void *o)
{
	(void)o;
	return 4;
}

static void tx_none(void *pkt, void *o)
{
	(void)o;
	sim_pkt_free((struct sim_pkt *)pkt);
}

static void test_config_invalid_gives_zero_size_and_null_ctx(void)
{
	struct ipk_config cfg, bad;
	struct ipk_ops ops;
	void *mem;
	size_t sz;

	ipk_config_default(&cfg);
	CHECK_EQ(cfg.mtu, 1500);
	CHECK_EQ(cfg.frag_timeout_ns, 30 * SEC);
	CHECK_EQ(cfg.eph_port_lo, 49152);
	sz = ipk_ctx_size(&cfg);
	CHECK(sz > 0 && sz % 8 == 0);
	bad = cfg; bad.version = IPK_CONFIG_VERSION + 1; CHECK_EQ(ipk_ctx_size(&bad), 0);
	bad = cfg; bad.version = IPK_CONFIG_VERSION - 1; CHECK_EQ(ipk_ctx_size(&bad), 0);
	bad = cfg; bad.conn_hash_buckets = 1000; CHECK_EQ(ipk_ctx_size(&bad), 0);
	bad = cfg; bad.mtu = 575; CHECK_EQ(ipk_ctx_size(&bad), 0);
	bad = cfg; bad.mtu = 2040; CHECK_EQ(ipk_ctx_size(&bad), 0);
	bad = cfg; bad.arp_entries = 0; CHECK_EQ(ipk_ctx_size(&bad), 0);
	bad = cfg; bad.frag_slots = 0; CHECK_EQ(ipk_ctx_size(&bad), 0);
	bad = cfg; bad.link = 7; CHECK_EQ(ipk_ctx_size(&bad), 0);
	bad = cfg; bad.link = IPK_LINK_RAWIP; bad.mtu = 2048; CHECK(ipk_ctx_size(&bad) > 0);
	CHECK_EQ(ipk_ctx_size(NULL), 0);
	memset(&ops, 0, sizeof(ops));
	mem = malloc(sz);
	CHECK(ipk_ctx_init(mem, sz, &cfg, &ops) == NULL);
	sim_pkt_ops(&ops);
	ops.random = rnd;
	CHECK(ipk_ctx_init(mem, sz, &cfg, &ops) == NULL); /* no tx */
	ops.tx = tx_none;
	CHECK(ipk_ctx_init(mem, sz - 8, &cfg, &ops) == NULL);
	CHECK(ipk_ctx_init(mem, sz, &cfg, &ops) != NULL);
	cfg.caps = IPK_CAP_TX_CSUM_UDP; /* needs tx_offload */
	CHECK(ipk_ctx_init(mem, sz, &cfg, &ops) == NULL);
	free(mem);
}

static void test_drop_names_all_distinct(void)
{
	int i, j;

	for (i = 0; i < IPK_DROP__COUNT; i++) {
		CHECK(ipk_drop_name((enum ipk_drop)i) != NULL);
		CHECK(strcmp(ipk_drop_name((enum ipk_drop)i), "unknown") != 0);
		for (j = 0; j < i; j++)
			CHECK(strcmp(ipk_drop_name((enum ipk_drop)i), ipk_drop_name((enum ipk_drop)j)));
	}
	CHECK(strcmp(ipk_drop_name(IPK_DROP_IP4_CSUM), "ip4_csum") == 0);
	CHECK(strcmp(ipk_drop_name(IPK_DROP__COUNT), "unknown") == 0);
}

static void test_run_drops_received_chain_and_returns_deadline(void)
{
	struct hnet *net = hnet_new(1, NULL);
	struct hnode *a = net->nodes[0];
	struct sim_pkt *h = sim_pkt_from(net->pool, msg, 4), *t = sim_pkt_from(net->pool, msg, 4);
	void *one = h;
	uint64_t next;

	h->next = t;
	next = ipk_run(a->ctx, &one, 1, net->now);
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_CHAIN], 1);
	CHECK(next > net->now); /* nothing due now */
	/* A pending ARP arms the retry timer. */
	net->cut = 1;
	ipk_udp_sendto(a->ctx, 1, IPK_IP4(10, 0, 0, 5), 1, msg, 1, net->now);
	next = ipk_run(a->ctx, NULL, 0, net->now);
	CHECK_EQ(next, net->now + SEC);
	hnet_advance(net, SEC);
	hnet_advance(net, SEC);
	hnet_advance(net, SEC);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* ops->rx_peek (core.h): called before the core reads an ARP frame, an ICMP or UDP
 * datagram, or a TCP segment without a connection, and allowed to bind: the first
 * datagram to a port nobody bound is delivered when the op binds it (iip's model). */
static uint32_t g_peek_n, g_peek_udp;
static void peek_bind(struct ipk_ctx *ctx, void *pkt, void *o)
{
	const uint8_t *f = ipk_pkt_data(ctx, pkt);
	uint16_t port_be;

	(void)o;
	g_peek_n++;
	if (ipk_pkt_len(ctx, pkt) >= 14 + 20 + 8 && f[12] == 0x08 && f[13] == 0 && f[23] == 17) {
		memcpy(&port_be, f + 14 + (f[14] & 15u) * 4u + 2, 2);
		g_peek_udp++;
		(void)ipk_udp_bind(ctx, port_be);
	}
}

static void test_rx_peek_binds_first_datagram_and_sees_arp_icmp(void)
{
	struct hnet *net = hnet_new(2, NULL);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	uint32_t after_udp;

	g_peek_n = g_peek_udp = 0;
	b->ops.rx_peek = peek_bind; /* b never calls ipk_udp_bind itself */
	CHECK_EQ(ipk_udp_bind(a->ctx, ipk_htons(5000)), 0);
	b->udp_echo = 1;
	CHECK_EQ(ipk_udp_sendto(a->ctx, ipk_htons(5000), B_IP, ipk_htons(7), msg, sizeof(msg),
	                        net->now), (int)sizeof(msg));
	hnet_settle(net);
	CHECK_EQ(g_peek_udp, 1);       /* the datagram, before delivery */
	CHECK(g_peek_n >= 2);          /* and a's ARP request */
	CHECK_EQ(b->udp_n, 1);         /* delivered: the op's bind came first */
	CHECK_EQ(a->udp_n, 1);         /* echoed, no port unreachable */
	CHECK_EQ(ipk_counters(b->ctx)->udp_tx, 1);
	after_udp = g_peek_n;
	CHECK_EQ(ipk_icmp_echo(a->ctx, B_IP, ipk_htons(1), ipk_htons(1), 8, net->now), 0);
	hnet_settle(net);
	CHECK_EQ(a->echo_n, 1);
	CHECK_EQ(g_peek_n, after_udp + 1); /* b saw the echo request first */
	CHECK_EQ(g_peek_udp, 1);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

int main(void)
{
	RUN(test_rx_peek_binds_first_datagram_and_sees_arp_icmp);
	RUN(test_udp_echo_between_two_contexts);
	RUN(test_udp_zero_checksum_accepted);
	RUN(test_udp_bad_checksum_or_length_dropped);
	RUN(test_udp_closed_port_sends_port_unreachable_with_quote);
	RUN(test_icmp_errors_rate_limited);
	RUN(test_icmp_echo_gets_reply);
	RUN(test_icmp_echo_bounded_by_buffer_under_jumbo_mtu);
	RUN(test_icmp_echo_to_broadcast_ignored);
	RUN(test_icmp_bad_checksum_dropped);
	RUN(test_rawip_link_udp_and_ping_without_arp);
	RUN(test_udp_tx_offload_marks_and_sg_chain);
	RUN(test_udp_send_without_sg_copies_and_frees);
	RUN(test_udp_off_link_goes_to_gateway);
	RUN(test_udp_bind_table_errors_and_reuse);
	RUN(test_config_invalid_gives_zero_size_and_null_ctx);
	RUN(test_drop_names_all_distinct);
	RUN(test_run_drops_received_chain_and_returns_deadline);
	return check_summary();
}
