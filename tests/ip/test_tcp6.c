/*
 * TCP over IPv6 (issue 19) over the back-to-back harness: handshake and data both
 * ways, RST for a closed port, SYN cookies, TIME-WAIT and 4-tuple reuse, Packet
 * Too Big lowering a live connection's MSS (RFC 8201), unreachable as a soft error
 * (RFC 5461), IPv4-mapped addresses dropped, dual-stack and one-family listeners,
 * the address-pair table bounded, and the API's documented errors.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tcp.h"
#include "check.h"
#include "harness.h"

#define SEC 1000000000ull
#define MS 1000000ull

static const uint8_t G1[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
static const uint8_t G2[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
static const uint8_t RTR[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x99};

/* events per node index */
static struct ipk_conn *conn_of[H_MAX_NODES];
static int accepted_n[H_MAX_NODES], connected_n[H_MAX_NODES], closed_n[H_MAX_NODES];
static int closed_why[H_MAX_NODES], fin_n[H_MAX_NODES], accept6_n[H_MAX_NODES];
static uint8_t rxbuf[H_MAX_NODES][70000];
static uint32_t rxlen[H_MAX_NODES];

static int idx_of(void *opaque) { return ((struct hnode *)opaque)->idx; }

static void *op_accepted(struct ipk_ctx *ctx, struct ipk_conn *c, void *opaque)
{
	(void)ctx;
	accepted_n[idx_of(opaque)]++;
	conn_of[idx_of(opaque)] = c;
	return NULL;
}

static void op_connected(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *opaque)
{
	(void)ctx; (void)user;
	connected_n[idx_of(opaque)]++;
	conn_of[idx_of(opaque)] = c;
}

static void op_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                       uint32_t off, uint32_t len, void *opaque)
{
	int i = idx_of(opaque);

	(void)user;
	if (!pkt) {
		fin_n[i]++;
		return;
	}
	if (rxlen[i] + len <= sizeof(rxbuf[i]))
		rxlen[i] += ipk_pkt_copy(ctx, pkt, off, rxbuf[i] + rxlen[i], len);
	ipk_tcp_recved(ctx, c, len, ((struct hnode *)opaque)->net->now);
}

static void op_closed(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
                      enum ipk_close_reason why, void *opaque)
{
	(void)ctx; (void)user;
	closed_n[idx_of(opaque)]++;
	closed_why[idx_of(opaque)] = (int)why;
	if (conn_of[idx_of(opaque)] == c)
		conn_of[idx_of(opaque)] = NULL;
}

static int op_accept6(struct ipk_ctx *ctx, const struct ipk_atuple *t, void *opaque)
{
	(void)ctx;
	accept6_n[idx_of(opaque)]++;
	/* the tuple names the segment's addresses: ours first */
	return t->local.family == IPK_AF_INET6 && memcmp(t->local.a, G2, 16) == 0 &&
	       memcmp(t->peer.a, G1, 16) == 0;
}

static void tweak6(int idx, struct ipk_config *cfg)
{
	cfg->ip6_enable = 1;
	memcpy(cfg->ip6_addr, idx == 0 ? G1 : G2, 16);
	if (idx == 2)
		cfg->ip6_addr[15] = 3;
}

static void tweak6_cookies(int idx, struct ipk_config *cfg)
{
	tweak6(idx, cfg);
	cfg->tcp_syncookies = 2; /* every SYN answered with a cookie */
}

static void tweak6_one_pair(int idx, struct ipk_config *cfg)
{
	tweak6(idx, cfg);
	if (idx == 1)
		cfg->conn_hash_buckets = 1; /* one IPv6 address pair */
}

static struct hnet *net6(int n, void (*tweak)(int, struct ipk_config *))
{
	struct hnet *net = hnet_new(n, tweak);
	int i;

	memset(conn_of, 0, sizeof(conn_of));
	memset(accepted_n, 0, sizeof(accepted_n));
	memset(connected_n, 0, sizeof(connected_n));
	memset(closed_n, 0, sizeof(closed_n));
	memset(closed_why, 0, sizeof(closed_why));
	memset(fin_n, 0, sizeof(fin_n));
	memset(accept6_n, 0, sizeof(accept6_n));
	memset(rxlen, 0, sizeof(rxlen));
	for (i = 0; i < n; i++) {
		net->nodes[i]->ops.tcp_accepted = op_accepted;
		net->nodes[i]->ops.tcp_connected = op_connected;
		net->nodes[i]->ops.tcp_payload = op_payload;
		net->nodes[i]->ops.tcp_closed = op_closed;
	}
	hnet_advance(net, 0);
	hnet_advance(net, 2 * SEC); /* DAD done */
	return net;
}

static struct ipk_addr a6(const uint8_t a[16])
{
	struct ipk_addr x;

	memset(&x, 0, sizeof(x));
	x.family = IPK_AF_INET6;
	memcpy(x.a, a, 16);
	return x;
}

/* Node 0 connects to node 1's G2:80 (listening), both ends up. */
static struct ipk_conn *open6(struct hnet *net)
{
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	struct ipk_addr peer = a6(G2);
	struct ipk_conn *c = NULL;

	CHECK_EQ(ipk_tcp_listen(b->ctx, ipk_htons(80), 8), IPK_OK);
	CHECK_EQ(ipk_tcp_connect_addr(a->ctx, &peer, ipk_htons(80), 0, NULL, &c, net->now), IPK_OK);
	hnet_settle(net);
	CHECK_EQ(connected_n[0], 1);
	CHECK_EQ(accepted_n[1], 1);
	CHECK(c != NULL && conn_of[0] == c);
	return c;
}

/* Frames node `from` sent that are IPv6 TCP; the last one's TCP header in *th. */
static int tcp6_frames(struct hnet *net, int from, const uint8_t **th)
{
	int i, n = 0;

	for (i = 0; i < net->ncap; i++) {
		const uint8_t *f = net->cap[i].b;

		if (net->cap[i].from == from && ipk_rd16(f + 12) == IPK_ETHERTYPE_IP6 &&
		    f[20] == IPK_IPPROTO_TCP) {
			n++;
			if (th)
				*th = f + 54;
		}
	}
	return n;
}

static void test_tcp6_handshake_data_both_ways(void)
{
	struct hnet *net;
	struct hnode *a, *b;
	struct ipk_conn *c;
	struct ipk_atuple t;
	struct ipk_tuple t4;
	const uint8_t *th = NULL;
	int i, syn_mss = 0;

	net = net6(2, tweak6);
	a = net->nodes[0];
	b = net->nodes[1];
	hnet_clear_cap(net);
	c = open6(net);
	/* the SYN went over IPv6 offering MSS 1500 - 60 (RFC 9293 §3.7.1) */
	for (i = 0; i < net->ncap; i++) {
		const uint8_t *f = net->cap[i].b;

		if (net->cap[i].from == 0 && ipk_rd16(f + 12) == IPK_ETHERTYPE_IP6 &&
		    f[20] == IPK_IPPROTO_TCP && (f[54 + 13] & IPK_TCP_SYN) && f[74] == 2)
			syn_mss = ipk_rd16(f + 76);
	}
	CHECK_EQ(syn_mss, 1440);
	CHECK_EQ(ipk_tcp_atuple(a->ctx, c, &t), IPK_OK);
	CHECK_EQ(t.local.family, IPK_AF_INET6);
	CHECK(memcmp(t.local.a, G1, 16) == 0 && memcmp(t.peer.a, G2, 16) == 0);
	CHECK_EQ(ipk_ntohs(t.peer_port_be), 80);
	CHECK_EQ(ipk_tcp_atuple(b->ctx, conn_of[1], &t), IPK_OK);
	CHECK(memcmp(t.local.a, G2, 16) == 0 && memcmp(t.peer.a, G1, 16) == 0);
	/* the IPv4 getter says it is no IPv4 connection */
	CHECK_EQ(ipk_tcp_tuple(c, &t4), IPK_EINVAL);
	CHECK_EQ(t4.local_ip4_be, 0);
	CHECK_EQ(ipk_ntohs(t4.peer_port_be), 80);
	{
		struct ipk_tcp_info info;

		CHECK_EQ(ipk_tcp_info(c, &info), IPK_OK);
		CHECK_EQ(info.mss, 1440 - (info.ts_ok ? 12 : 0));
	}
	/* data both ways, byte for byte */
	{
		static uint8_t big[20000];

		for (i = 0; i < (int)sizeof(big); i++)
			big[i] = (uint8_t)(i * 7 + 3);
		CHECK_EQ(ipk_tcp_write(a->ctx, c, big, sizeof(big), net->now), (int)sizeof(big));
		CHECK_EQ(ipk_tcp_write(b->ctx, conn_of[1], "pong", 4, net->now), 4);
		for (i = 0; i < 50 && rxlen[1] < sizeof(big); i++)
			hnet_advance(net, 10 * MS);
		CHECK_EQ(rxlen[1], sizeof(big));
		CHECK(memcmp(rxbuf[1], big, sizeof(big)) == 0);
		CHECK_EQ(rxlen[0], 4);
		CHECK(memcmp(rxbuf[0], "pong", 4) == 0);
		/* the small reply and the ACKs went the fast way (tcp_out.c txf_send6) */
		CHECK(b->ctx->tx_fast_n > 0);
		CHECK(a->ctx->tx_fast_n > 0);
	}
	CHECK(tcp6_frames(net, 0, &th) > 10);
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_TCP_CSUM], 0);
	CHECK_EQ(ipk_counters(b->ctx)->drop[IPK_DROP_TCP_CSUM], 0);
	/* close both ways, then TIME-WAIT runs out and the pair goes back */
	CHECK_EQ(ipk_tcp_close(a->ctx, c, net->now), IPK_OK);
	hnet_settle(net);
	CHECK_EQ(fin_n[1], 1);
	CHECK_EQ(ipk_tcp_close(b->ctx, conn_of[1], net->now), IPK_OK);
	hnet_settle(net);
	CHECK_EQ(closed_n[0], 1);
	CHECK_EQ(closed_n[1], 1);
	CHECK_EQ(b->ctx->tcp6_pairs[0].refs + b->ctx->tcp6_pairs[1].refs, 0);
	for (i = 0; i < 130; i++)
		hnet_advance(net, SEC);
	CHECK_EQ(ipk_conns_free(a->ctx), 4);
	for (i = 0; i < (int)a->ctx->tcp6_n; i++)
		CHECK_EQ(a->ctx->tcp6_pairs[i].refs, 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_tcp6_closed_port_gets_rst(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	struct ipk_addr peer = a6(G2);
	struct ipk_conn *c = NULL;
	const uint8_t *th = NULL;

	CHECK_EQ(ipk_tcp_connect_addr(a->ctx, &peer, ipk_htons(81), 0, NULL, &c, net->now), IPK_OK);
	hnet_clear_cap(net);
	hnet_settle(net);
	CHECK_EQ(closed_n[0], 1);
	CHECK_EQ(closed_why[0], IPK_CLOSE_REFUSED);
	CHECK_EQ(ipk_counters(b->ctx)->drop[IPK_DROP_TCP_NO_CONN], 1);
	CHECK_EQ(tcp6_frames(net, 1, &th), 1);
	CHECK(th && (th[13] & IPK_TCP_RST));
	/* the scratch pair served the RST: nothing held */
	CHECK_EQ(b->ctx->tcp6_free != IPK_TCP6_NONE, 1);
	CHECK_EQ(ipk_conns_free(a->ctx), 4);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_tcp6_syn_cookie_handshake(void)
{
	struct hnet *net = net6(2, tweak6_cookies);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	struct ipk_conn *c = open6(net);

	CHECK_EQ(ipk_counters(b->ctx)->tcp_syncookies_sent, 1);
	CHECK_EQ(ipk_counters(b->ctx)->tcp_syncookies_ok, 1);
	CHECK_EQ(ipk_tcp_write(a->ctx, c, "cookie", 6, net->now), 6);
	hnet_settle(net);
	CHECK_EQ(rxlen[1], 6);
	CHECK_EQ(ipk_tcp_state(conn_of[1]), IPK_TCP_ESTABLISHED);
	ipk_tcp_abort(a->ctx, c, net->now);
	hnet_settle(net);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_tcp6_time_wait_then_reuse(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	struct ipk_addr peer = a6(G2);
	struct ipk_conn *c = open6(net), *c2 = NULL;
	struct ipk_atuple t;
	uint16_t lport;

	CHECK_EQ(ipk_tcp_atuple(a->ctx, c, &t), IPK_OK);
	lport = t.local_port_be;
	CHECK_EQ(ipk_tcp_close(a->ctx, c, net->now), IPK_OK);
	hnet_settle(net);
	CHECK_EQ(ipk_tcp_close(b->ctx, conn_of[1], net->now), IPK_OK);
	hnet_settle(net);
	/* a closed first: it holds the 4-tuple in TIME-WAIT, and its pair with it */
	CHECK_EQ(a->ctx->tw_n, 1);
	CHECK_EQ(a->ctx->tcp6_pairs[a->ctx->tw_head->t.local_ip4_be].refs, 1);
	/* the same 4-tuple again (RFC 6191 reuse after the minimum age) */
	hnet_advance(net, 2 * SEC);
	CHECK_EQ(ipk_tcp_connect_addr(a->ctx, &peer, ipk_htons(80), lport, NULL, &c2, net->now),
	         IPK_OK);
	hnet_settle(net);
	CHECK_EQ(connected_n[0], 2);
	CHECK_EQ(ipk_counters(a->ctx)->tcp_tw_reused, 1);
	CHECK_EQ(ipk_tcp_state(c2), IPK_TCP_ESTABLISHED);
	ipk_tcp_abort(a->ctx, c2, net->now);
	hnet_settle(net);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* The server closes first and holds TIME-WAIT; a new SYN on the same 4-tuple
 * takes it over (RFC 6191), the old connection and its pair's last holder freed
 * before the new one holds the pair again. */
static void test_tcp6_syn_reuses_server_time_wait(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	struct ipk_addr peer = a6(G2);
	struct ipk_conn *c = open6(net), *c2 = NULL;
	struct ipk_atuple t;

	CHECK_EQ(ipk_tcp_atuple(a->ctx, c, &t), IPK_OK);
	CHECK_EQ(ipk_tcp_close(b->ctx, conn_of[1], net->now), IPK_OK);
	hnet_settle(net);
	CHECK_EQ(ipk_tcp_close(a->ctx, c, net->now), IPK_OK);
	hnet_settle(net);
	CHECK_EQ(b->ctx->tw_n, 1);
	CHECK_EQ(ipk_conns_free(a->ctx), 4);
	hnet_advance(net, SEC);
	CHECK_EQ(ipk_tcp_connect_addr(a->ctx, &peer, ipk_htons(80), t.local_port_be, NULL, &c2,
	                              net->now), IPK_OK);
	hnet_settle(net);
	CHECK_EQ(ipk_counters(b->ctx)->tcp_tw_reused, 1);
	CHECK_EQ(accepted_n[1], 2);
	CHECK_EQ(connected_n[0], 2);
	CHECK(conn_of[1] != NULL);
	if (conn_of[1]) {
		CHECK_EQ(ipk_tcp_atuple(b->ctx, conn_of[1], &t), IPK_OK);
		CHECK(memcmp(t.peer.a, G1, 16) == 0);
		CHECK_EQ(b->ctx->tcp6_pairs[conn_of[1]->t.local_ip4_be].refs, 1);
	}
	CHECK_EQ(ipk_tcp_write(a->ctx, c2, "again", 5, net->now), 5);
	hnet_settle(net);
	CHECK_EQ(rxlen[1], 5);
	ipk_tcp_abort(a->ctx, c2, net->now);
	hnet_settle(net);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* A Packet Too Big from a router about the captured frame f (its IPv6 packet). */
static void inject_ptb(struct hnode *a, const uint8_t *f, uint32_t flen, uint8_t type,
                       uint8_t code, uint32_t mtu)
{
	uint8_t b[1400];
	struct ipk_icmp6_hdr h;
	uint32_t n, inv = flen - 14 > 1100 ? 1100 : flen - 14;

	memset(&h, 0, sizeof(h));
	h.type = type;
	h.code = code;
	h.param = mtu;
	n = ipk_icmp6_error_emit(b + 54, sizeof(b) - 54, &h, f + 14, inv, RTR, G1);
	{
		struct ipk_ip6_hdr ih;
		uint8_t dm[6], sm[6] = {0x02, 0x66, 0, 0, 0, 0x99};

		hb_mac(dm, 0);
		hb_eth(b, dm, sm, IPK_ETHERTYPE_IP6);
		memset(&ih, 0, sizeof(ih));
		ih.plen = (uint16_t)n;
		ih.next = IPK_IPPROTO_ICMP6;
		ih.hlim = 64;
		memcpy(ih.src, RTR, 16);
		memcpy(ih.dst, G1, 16);
		ipk_ip6_emit(b + 14, 40, &ih);
	}
	hnode_inject(a, b, 54 + n);
}

/* The last full-size data frame node 0 sent; NULL when none. */
static const struct hframe *last_data(struct hnet *net)
{
	const struct hframe *r = NULL;
	int i;

	for (i = 0; i < net->ncap; i++)
		if (net->cap[i].from == 0 && ipk_rd16(net->cap[i].b + 12) == IPK_ETHERTYPE_IP6 &&
		    net->cap[i].b[20] == IPK_IPPROTO_TCP && net->cap[i].len > 1000)
			r = &net->cap[i];
	return r;
}

static void test_tcp6_ptb_lowers_mss_of_live_connection(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0];
	struct ipk_conn *c = open6(net);
	static uint8_t big[8000];
	const struct hframe *f;
	struct ipk_tcp_info info;
	int i, over = 0;

	for (i = 0; i < (int)sizeof(big); i++)
		big[i] = (uint8_t)(i ^ 0x5a);
	net->cut = 1; /* the segments stay in flight */
	hnet_clear_cap(net);
	CHECK_EQ(ipk_tcp_write(a->ctx, c, big, sizeof(big), net->now), (int)sizeof(big));
	hnet_settle(net);
	f = last_data(net);
	CHECK(f != NULL);
	if (!f)
		goto out;
	/* a forged one below 1280 changes nothing (RFC 8201 §4) */
	inject_ptb(a, f->b, f->len, IPK_ICMP6_PKT_TOO_BIG, 0, 1000);
	CHECK_EQ(ipk_counters(a->ctx)->tcp6_pmtu_mss, 0);
	inject_ptb(a, f->b, f->len, IPK_ICMP6_PKT_TOO_BIG, 0, 1280);
	CHECK_EQ(ipk_counters(a->ctx)->tcp6_pmtu_mss, 1);
	CHECK_EQ(ipk_tcp_info(c, &info), IPK_OK);
	CHECK_EQ(info.mss, 1280 - 60 - (info.ts_ok ? 12 : 0));
	/* the resent segments fit 1280 bytes of IPv6 */
	hnet_clear_cap(net);
	net->cut = 0;
	for (i = 0; i < 50 && rxlen[1] < sizeof(big); i++)
		hnet_advance(net, 50 * MS);
	for (i = 0; i < net->ncap; i++)
		if (net->cap[i].from == 0 && net->cap[i].len - 14 > 1280)
			over++;
	CHECK_EQ(over, 0);
	CHECK_EQ(rxlen[1], sizeof(big));
	CHECK(memcmp(rxbuf[1], big, sizeof(big)) == 0);
	/* an ICMPv4 needfrag whose quote names the IPv6 connection's internal tuple
	 * (pair index as source, the mark as destination) is no error about it */
	{
		uint8_t q[28];
		uint32_t mss0 = info.mss;

		memset(q, 0, sizeof(q));
		q[0] = 0x45;
		q[9] = IPK_IPPROTO_TCP;
		ipk_wrbe32(q + 12, c->t.local_ip4_be);
		ipk_wrbe32(q + 16, c->t.peer_ip4_be);
		ipk_wrbe16(q + 20, c->t.local_port_be);
		ipk_wrbe16(q + 22, c->t.peer_port_be);
		ipk_wr32(q + 24, c->snd_una);
		net->cut = 1;
		CHECK_EQ(ipk_tcp_write(a->ctx, c, big, 1000, net->now), 1000);
		hnet_settle(net);
		ipk_tcp_icmp_error(a->ctx, IPK_ICMP_UNREACH, IPK_ICMP_UNREACH_NEEDFRAG, 600, q, 28);
		CHECK_EQ(ipk_tcp_info(c, &info), IPK_OK);
		CHECK_EQ(info.mss, mss0);
		net->cut = 0;
		for (i = 0; i < 50 && rxlen[1] < sizeof(big) + 1000; i++)
			hnet_advance(net, 100 * MS);
		CHECK_EQ(rxlen[1], sizeof(big) + 1000);
	}
	/* an unreachable quoting a segment in flight is a soft error (RFC 5461) */
	net->cut = 1;
	hnet_clear_cap(net);
	CHECK_EQ(ipk_tcp_write(a->ctx, c, big, 3000, net->now), 3000);
	hnet_settle(net);
	f = last_data(net);
	CHECK(f != NULL);
	if (f)
		inject_ptb(a, f->b, f->len, IPK_ICMP6_DST_UNREACH, 3, 0);
	CHECK_EQ(ipk_counters(a->ctx)->tcp6_icmp_soft, 1);
	CHECK_EQ(ipk_tcp_state(c), IPK_TCP_ESTABLISHED);
	net->cut = 0;
	for (i = 0; i < 50 && rxlen[1] < sizeof(big) + 4000; i++)
		hnet_advance(net, 100 * MS);
	CHECK_EQ(rxlen[1], sizeof(big) + 4000);
out:
	ipk_tcp_abort(a->ctx, c, net->now);
	hnet_settle(net);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* A SYN over IPv6 from src to G1:80, injected into node 0; its checksum right, or
 * one off when bad. */
static void inject_syn6_csum(struct hnode *a, const uint8_t src[16], int bad)
{
	uint8_t b[200];
	struct ipk_tcp_hdr h;
	struct ipk_ip6_hdr ih;
	uint8_t dm[6], sm[6] = {0x02, 0x66, 0, 0, 0, 0x99};

	memset(b, 0, sizeof(b));
	memset(&h, 0, sizeof(h));
	h.sport_be = ipk_htons(4000);
	h.dport_be = ipk_htons(80);
	h.seq = 1000;
	h.doff = 20;
	h.flags = IPK_TCP_SYN;
	h.wnd = 65535;
	ipk_tcp_hdr_put(b + 54, &h);
	ipk_wr16(b + 54 + 16,
	         (uint16_t)(ipk_csum_l4_6(src, G1, IPK_IPPROTO_TCP, b + 54, 20) + (bad ? 1 : 0)));
	hb_mac(dm, 0);
	hb_eth(b, dm, sm, IPK_ETHERTYPE_IP6);
	memset(&ih, 0, sizeof(ih));
	ih.plen = 20;
	ih.next = IPK_IPPROTO_TCP;
	ih.hlim = 64;
	memcpy(ih.src, src, 16);
	memcpy(ih.dst, G1, 16);
	ipk_ip6_emit(b + 14, 40, &ih);
	hnode_inject(a, b, 74);
}

static void inject_syn6(struct hnode *a, const uint8_t src[16]) { inject_syn6_csum(a, src, 0); }

/* A SYN behind a Destination Options header (PadN only) goes through the extension
 * walk and ipk_ip6_deliver to TCP; the checksum covers the TCP segment only (RFC
 * 8200 §8.1: the upper-layer length excludes extension headers). */
static void test_tcp6_syn_behind_dest_options_answered(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0];
	uint8_t b[200];
	struct ipk_tcp_hdr h;
	struct ipk_ip6_hdr ih;
	uint8_t dm[6], sm[6] = {0x02, 0x66, 0, 0, 0, 0x99};
	const uint8_t *th = NULL;

	CHECK_EQ(ipk_tcp_listen(a->ctx, ipk_htons(80), 8), IPK_OK);
	memset(b, 0, sizeof(b));
	b[54] = IPK_IPPROTO_TCP; /* the options header: next header, length 0 (8 bytes) */
	b[55] = 0;
	b[56] = IPK_IP6OPT_PADN;
	b[57] = 4;
	memset(&h, 0, sizeof(h));
	h.sport_be = ipk_htons(4001);
	h.dport_be = ipk_htons(80);
	h.seq = 77;
	h.doff = 20;
	h.flags = IPK_TCP_SYN;
	h.wnd = 65535;
	ipk_tcp_hdr_put(b + 62, &h);
	ipk_wr16(b + 62 + 16, ipk_csum_l4_6(G2, G1, IPK_IPPROTO_TCP, b + 62, 20));
	hb_mac(dm, 0);
	hb_eth(b, dm, sm, IPK_ETHERTYPE_IP6);
	memset(&ih, 0, sizeof(ih));
	ih.plen = 28;
	ih.next = IPK_IPPROTO_DSTOPTS;
	ih.hlim = 64;
	memcpy(ih.src, G2, 16);
	memcpy(ih.dst, G1, 16);
	ipk_ip6_emit(b + 14, 40, &ih);
	hnet_clear_cap(net);
	hnode_inject(a, b, 82);
	hnet_settle(net);
	CHECK_EQ(tcp6_frames(net, 0, &th), 1);
	CHECK(th && (th[13] & (IPK_TCP_SYN | IPK_TCP_ACK)) == (IPK_TCP_SYN | IPK_TCP_ACK));
	CHECK(th && ipk_rd32(th + 8) == 78);
	hnet_advance(net, 100 * SEC);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_tcp6_mapped_source_dropped_and_counted(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0];
	const uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2};
	struct ipk_addr peer = a6(mapped);
	struct ipk_conn *c = NULL;

	CHECK_EQ(ipk_tcp_listen(a->ctx, ipk_htons(80), 8), IPK_OK);
	hnet_clear_cap(net);
	inject_syn6(a, mapped);
	hnet_settle(net);
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_IP6_V4MAPPED], 1);
	CHECK_EQ(tcp6_frames(net, 0, NULL), 0); /* no SYN-ACK */
	/* a wrong checksum is dropped and counted (RFC 8200 §8.1 pseudo-header) */
	inject_syn6_csum(a, G2, 1);
	hnet_settle(net);
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_TCP_CSUM], 1);
	CHECK_EQ(tcp6_frames(net, 0, NULL), 0);
	/* the same SYN from a real address is answered (the test can fail) */
	inject_syn6(a, G2);
	hnet_settle(net);
	CHECK_EQ(tcp6_frames(net, 0, NULL), 1);
	/* and never as a destination we connect to */
	CHECK_EQ(ipk_tcp_connect_addr(a->ctx, &peer, ipk_htons(80), 0, NULL, &c, net->now),
	         IPK_EINVAL);
	CHECK(c == NULL);
	hnet_advance(net, 100 * SEC);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_tcp6_api_errors(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnet *net4 = hnet_new(2, NULL);
	struct hnode *a = net->nodes[0];
	struct ipk_addr peer = a6(G2), any, four;
	struct ipk_conn *c = (struct ipk_conn *)&peer;
	const uint8_t mc[16] = {0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	struct ipk_atuple t;

	memset(&any, 0, sizeof(any));
	any.family = IPK_AF_INET6;
	CHECK_EQ(ipk_tcp_connect_addr(a->ctx, NULL, ipk_htons(80), 0, NULL, &c, net->now),
	         IPK_EINVAL);
	CHECK(c == NULL);
	CHECK_EQ(ipk_tcp_connect_addr(a->ctx, &any, ipk_htons(80), 0, NULL, &c, net->now),
	         IPK_EINVAL);
	peer = a6(mc);
	CHECK_EQ(ipk_tcp_connect_addr(a->ctx, &peer, ipk_htons(80), 0, NULL, &c, net->now),
	         IPK_EINVAL);
	peer = a6(G2);
	peer.family = 5;
	CHECK_EQ(ipk_tcp_connect_addr(a->ctx, &peer, ipk_htons(80), 0, NULL, &c, net->now),
	         IPK_EINVAL);
	peer = a6(G2);
	CHECK_EQ(ipk_tcp_connect_addr(a->ctx, &peer, 0, 0, NULL, &c, net->now), IPK_EINVAL);
	/* IPv6 off: refused, never sent */
	CHECK_EQ(ipk_tcp_connect_addr(net4->nodes[0]->ctx, &peer, ipk_htons(80), 0, NULL, &c,
	                              net4->now), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_listen_family(net4->nodes[0]->ctx, ipk_htons(80), 4, IPK_AF_INET6),
	         IPK_EINVAL);
	CHECK_EQ(ipk_tcp_listen_family(a->ctx, ipk_htons(80), 4, 5), IPK_EINVAL);
	/* no TCP to the limited broadcast (RFC 1122 §4.2.3.10; the IPv6 mark) */
	CHECK_EQ(ipk_tcp_connect(a->ctx, 0xffffffffu, ipk_htons(80), 0, NULL, &c, net->now),
	         IPK_EINVAL);
	/* IPK_AF_INET takes the IPv4 call: a connection to 10.0.0.2 */
	memset(&four, 0, sizeof(four));
	four.family = IPK_AF_INET;
	four.a[0] = 10; four.a[3] = 2;
	CHECK_EQ(ipk_tcp_listen(net->nodes[1]->ctx, ipk_htons(80), 4), IPK_OK);
	CHECK_EQ(ipk_tcp_connect_addr(a->ctx, &four, ipk_htons(80), 0, NULL, &c, net->now), IPK_OK);
	hnet_settle(net);
	CHECK_EQ(connected_n[0], 1);
	CHECK_EQ(ipk_tcp_atuple(a->ctx, c, &t), IPK_OK);
	CHECK_EQ(t.peer.family, IPK_AF_INET);
	CHECK(t.peer.a[0] == 10 && t.peer.a[3] == 2);
	CHECK_EQ(ipk_tcp_atuple(NULL, c, &t), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_atuple(a->ctx, c, NULL), IPK_EINVAL);
	ipk_tcp_abort(a->ctx, c, net->now);
	hnet_settle(net);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
	hnet_free(net4);
}

static void test_tcp6_listener_families(void)
{
	struct hnet *net = net6(2, tweak6);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	struct ipk_addr p6 = a6(G2);
	struct ipk_conn *c = NULL;

	/* dual-stack (the default): both families on one port */
	CHECK_EQ(ipk_tcp_listen(b->ctx, ipk_htons(80), 8), IPK_OK);
	CHECK_EQ(ipk_tcp_connect_addr(a->ctx, &p6, ipk_htons(80), 0, NULL, &c, net->now), IPK_OK);
	CHECK_EQ(ipk_tcp_connect(a->ctx, IPK_IP4(10, 0, 0, 2), ipk_htons(80), 0, NULL, &c, net->now),
	         IPK_OK);
	hnet_settle(net);
	CHECK_EQ(accepted_n[1], 2);
	CHECK_EQ(connected_n[0], 2);
	/* IPv4 only: the IPv6 SYN is answered as by a closed port */
	CHECK_EQ(ipk_tcp_listen_family(b->ctx, ipk_htons(81), 8, IPK_AF_INET), IPK_OK);
	CHECK_EQ(ipk_tcp_connect_addr(a->ctx, &p6, ipk_htons(81), 0, NULL, &c, net->now), IPK_OK);
	hnet_settle(net);
	CHECK_EQ(closed_why[0], IPK_CLOSE_REFUSED);
	CHECK_EQ(accepted_n[1], 2);
	/* IPv6 only: the IPv4 SYN refused, the IPv6 one taken; tcp_accept6 decides */
	b->ops.tcp_accept6 = op_accept6;
	CHECK_EQ(ipk_tcp_listen_family(b->ctx, ipk_htons(82), 8, IPK_AF_INET6), IPK_OK);
	CHECK_EQ(ipk_tcp_connect(a->ctx, IPK_IP4(10, 0, 0, 2), ipk_htons(82), 0, NULL, &c, net->now),
	         IPK_OK);
	hnet_settle(net);
	CHECK_EQ(closed_n[0], 2);
	CHECK_EQ(accepted_n[1], 2);
	CHECK_EQ(ipk_tcp_connect_addr(a->ctx, &p6, ipk_htons(82), 0, NULL, &c, net->now), IPK_OK);
	hnet_settle(net);
	CHECK_EQ(accept6_n[1], 1);
	CHECK_EQ(accepted_n[1], 3);
	hnet_advance(net, 200 * SEC);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_tcp6_pair_table_bounded(void)
{
	struct hnet *net = net6(3, tweak6_one_pair);
	struct hnode *a = net->nodes[0], *b = net->nodes[1], *c3 = net->nodes[2];
	struct ipk_addr p6 = a6(G2);
	struct ipk_conn *c = NULL, *cc = NULL;

	CHECK_EQ(ipk_tcp_listen(b->ctx, ipk_htons(80), 8), IPK_OK);
	CHECK_EQ(ipk_tcp_connect_addr(a->ctx, &p6, ipk_htons(80), 0, NULL, &c, net->now), IPK_OK);
	hnet_settle(net);
	CHECK_EQ(accepted_n[1], 1);
	/* a second connection of the same pair shares its slot */
	CHECK_EQ(ipk_tcp_connect_addr(a->ctx, &p6, ipk_htons(80), 0, NULL, &c, net->now), IPK_OK);
	hnet_settle(net);
	CHECK_EQ(accepted_n[1], 2);
	CHECK_EQ(b->ctx->tcp6_pairs[0].refs, 2);
	/* a third node's pair finds the table full: dropped, counted, b still fine */
	CHECK_EQ(ipk_tcp_connect_addr(c3->ctx, &p6, ipk_htons(80), 0, NULL, &cc, net->now), IPK_OK);
	hnet_settle(net);
	CHECK_EQ(accepted_n[1], 2);
	CHECK(ipk_counters(b->ctx)->drop[IPK_DROP_TCP6_PAIRS] >= 1);
	CHECK_EQ(ipk_conns_free(b->ctx), 2);
	hnet_advance(net, 200 * SEC);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* RSS on node 0: a 128-entry table over two queues, node 0 serving queue `rss_q6`. */
static uint16_t reta6[128];
static uint16_t rss_q6;

static void tweak6_rss(int idx, struct ipk_config *cfg)
{
	uint32_t i;

	tweak6(idx, cfg);
	if (idx != 0)
		return;
	for (i = 0; i < 128; i++)
		reta6[i] = (uint16_t)(i % 2);
	cfg->rss_reta = reta6;
	cfg->rss_reta_size = 128;
	cfg->rss_queue = rss_q6;
}

/* Hash-aware active opens over IPv6: every local port ipk_tcp_connect_addr picks makes
 * the peer's segments hash (Toeplitz over the IPv6 tuple, as the NIC does) to the
 * queue the context serves, for either queue. */
static void check_ports6_land_on(uint16_t q)
{
	struct hnet *net;
	struct ipk_addr p6 = a6(G2);
	uint32_t i, ok = 0, n = 100;

	rss_q6 = q;
	net = net6(2, tweak6_rss);
	for (i = 0; i < n; i++) {
		struct ipk_ctx *ctx = net->nodes[0]->ctx;
		struct ipk_conn *c = NULL;
		struct ipk_atuple t;
		uint16_t pport = ipk_htons((uint16_t)(5000 + i % 7));
		uint32_t h;

		if (ipk_tcp_connect_addr(ctx, &p6, pport, 0, NULL, &c, net->now) != IPK_OK)
			break;
		if (ipk_tcp_atuple(ctx, c, &t) == IPK_OK) {
			h = ipk_rss_hash_ip6(ctx->cfg.rss_key, t.peer.a, t.local.a,
			                     t.peer_port_be, t.local_port_be);
			ok += ipk_rss_queue(reta6, 128, h) == (int)q;
		}
		ipk_tcp_abort(ctx, c, net->now);
	}
	CHECK_EQ(i, n);
	CHECK_EQ(ok, n);
	hnet_advance(net, 200 * SEC);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_tcp6_rss_connect_ports_land_on_queue(void)
{
	check_ports6_land_on(0);
	check_ports6_land_on(1);
}

int main(void)
{
	RUN(test_tcp6_handshake_data_both_ways);
	RUN(test_tcp6_closed_port_gets_rst);
	RUN(test_tcp6_syn_cookie_handshake);
	RUN(test_tcp6_time_wait_then_reuse);
	RUN(test_tcp6_syn_reuses_server_time_wait);
	RUN(test_tcp6_ptb_lowers_mss_of_live_connection);
	RUN(test_tcp6_syn_behind_dest_options_answered);
	RUN(test_tcp6_mapped_source_dropped_and_counted);
	RUN(test_tcp6_api_errors);
	RUN(test_tcp6_listener_families);
	RUN(test_tcp6_pair_table_bounded);
	RUN(test_tcp6_rss_connect_ports_land_on_queue);
	return check_summary();
}
