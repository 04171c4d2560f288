/*
 * Differential test of the IPv6 receive shortcut (tcp_in.c ipk_tcp_rx_one6, issue
 * 19): the same seeded IPv6 exchange runs twice between two engines, once as built
 * and once with every shortcut off (ipk_fast_off), and must give the same frames on
 * the wire, byte for byte and in order, the same delivered streams and the same
 * counters; the shortcut must have taken most frames in the first run and none in
 * the second. The second run also has the transmit fast path off (ctx->tx_fast_off),
 * so the IPv6 transmit template (tcp_out.c txf_tmpl6) is checked against the general
 * path's segments too. The second test puts a damaged copy of some frames before them (a bad
 * TCP checksum, each address rule of ipk_ip6_addr_check, a group destination, an
 * extension header, Ethernet padding, our address no longer usable while its
 * connection lives, a payload length past the frame, another
 * version, another next header, a source with no connection, the broadcast MAC, an
 * older ACK): each must be judged as the layers judge it, dropped and counted by
 * the same reason or taken as the same segment.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tcp.h"
#include "check.h"
#include "harness.h"
#include "sha256.h"

#define SEC 1000000000ull
#define MS 1000000ull

enum { ROUNDS = 300, MAXMSG = 6000 };

static const uint8_t G1[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
static const uint8_t G2[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

static struct ipk_conn *conn_of[2];
static struct sha256 rxh[2];
static uint32_t rxlen[2];

struct digest {
	uint8_t wire[SHA256_DIGEST_LEN];
	uint8_t rx[2][SHA256_DIGEST_LEN];
	struct ipk_counters cnt[2];
	uint64_t one[2]; /* frames the shortcut took */
	int tmpl6[2];    /* the connection had an IPv6 transmit template (tcp_out.c) */
	uint32_t frames, rxlen[2];
};

static int idx_of(void *opaque) { return ((struct hnode *)opaque)->idx; }

static void *op_accepted(struct ipk_ctx *ctx, struct ipk_conn *c, void *opaque)
{
	(void)ctx;
	conn_of[idx_of(opaque)] = c;
	return NULL;
}

static void op_connected(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *opaque)
{
	(void)ctx; (void)user;
	conn_of[idx_of(opaque)] = c;
}

static void op_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                       uint32_t off, uint32_t len, void *opaque)
{
	int i = idx_of(opaque);
	uint8_t buf[2048];
	uint32_t done = 0, n;

	(void)user;
	if (!pkt)
		return;
	while (done < len) {
		n = len - done < sizeof(buf) ? len - done : (uint32_t)sizeof(buf);
		n = ipk_pkt_copy(ctx, pkt, off + done, buf, n);
		if (!n)
			break;
		sha256_update(&rxh[i], buf, n);
		done += n;
	}
	rxlen[i] += len;
	ipk_tcp_recved(ctx, c, len, ((struct hnode *)opaque)->net->now);
}

static void op_closed(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
                      enum ipk_close_reason why, void *opaque)
{
	(void)ctx; (void)user; (void)why;
	if (conn_of[idx_of(opaque)] == c)
		conn_of[idx_of(opaque)] = NULL;
}

/* ECN on (the traffic class on every segment matters) or off (the transmit fast
 * path and its IPv6 template, which ECN keeps to the general path, run). */
static int ecn_on = 1;

static void tweak6(int idx, struct ipk_config *cfg)
{
	cfg->ip6_enable = 1;
	memcpy(cfg->ip6_addr, idx == 0 ? G1 : G2, 16);
	cfg->tcp_ecn = (uint8_t)ecn_on;
}

static uint32_t lcg(uint32_t *r)
{
	*r = *r * 1664525u + 1013904223u;
	return *r >> 8;
}

/* Hash every frame captured since the last call (and forget them). */
static void drain(struct hnet *net, struct sha256 *h, uint32_t *frames)
{
	int i;

	for (i = 0; i < net->ncap; i++) {
		uint32_t len = net->cap[i].len;

		sha256_update(h, &net->cap[i].from, sizeof(net->cap[i].from));
		sha256_update(h, &len, sizeof(len));
		sha256_update(h, net->cap[i].b, len);
		(*frames)++;
	}
	hnet_clear_cap(net);
}

/* The TCP checksum of IPv6 frame f (no extension header) made right. */
static void fix_tcp6(uint8_t *f)
{
	uint32_t l4 = ipk_rd16(f + 18);

	f[70] = f[71] = 0;
	ipk_wr16(f + 70, ipk_csum_l4_6(f + 22, f + 38, IPK_IPPROTO_TCP, f + 54, l4));
}

/* A damaged copy of IPv6 TCP frame b (len bytes) in out (room for len + 16). */
static uint32_t mutate6(uint32_t *r, const uint8_t *b, uint32_t len, uint8_t *out)
{
	uint32_t k = lcg(r) % 15u;

	memcpy(out, b, len);
	switch (k) {
	case 0: out[70] ^= 0x01; break; /* TCP checksum wrong */
	case 1: out[53] ^= 0x40; fix_tcp6(out); break; /* another destination */
	case 2: memcpy(out + 22, out + 38, 16); fix_tcp6(out); break; /* land */
	case 3: out[22] = 0xff; fix_tcp6(out); break; /* from a group */
	case 4: /* IPv4-mapped source */
		memset(out + 22, 0, 10);
		out[32] = out[33] = 0xff;
		fix_tcp6(out);
		break;
	case 5: /* to all-nodes (a group we are in: TCP drops it, RFC 9293 §3.9.1) */
		memset(out + 38, 0, 16);
		out[38] = 0xff;
		out[39] = 0x02;
		out[53] = 1;
		fix_tcp6(out);
		break;
	case 6: /* an empty hop-by-hop header (RFC 8200 §4.3: PadN) before TCP */
		memmove(out + 62, out + 54, len - 54);
		out[54] = IPK_IPPROTO_TCP;
		out[55] = 0;
		out[56] = 1; /* PadN */
		out[57] = 4;
		memset(out + 58, 0, 4);
		out[20] = 0;
		ipk_wr16(out + 18, (uint16_t)(ipk_rd16(out + 18) + 8u));
		len += 8;
		break;
	case 7: memset(out + len, 0, 8); len += 8; break; /* Ethernet padding */
	case 8: ipk_wr16(out + 18, (uint16_t)(len - 54u + 1u + lcg(r) % 64u)); break;
	case 9: out[14] = (uint8_t)((out[14] & 0x0f) | 0x40); break; /* version 4 */
	case 10: out[20] = IPK_IPPROTO_UDP; break;
	case 11: /* a host with no connection, RST set (no answer) */
		out[37] = 0x77;
		out[67] |= IPK_TCP_RST;
		fix_tcp6(out);
		break;
	case 12: memset(out, 0xff, 6); break; /* broadcast MAC */
	case 13: /* an older ACK */
		ipk_wr32(out + 62, ipk_rd32(out + 62) - (1u + lcg(r) % (1u << 20)));
		fix_tcp6(out);
		break;
	default: /* the ECN field marked CE (RFC 3168 §5) */
		out[15] |= 0x30;
		break;
	}
	return len;
}

/* An undamaged copy of frame f while node h's address is tentative again (as
 * after a DAD restart): its pair still held, the address no longer takes
 * datagrams (RFC 4862 §5.4.3), so both paths drop it (IPK_DROP_IP6_NOT_FOR_US). */
static void gone_addr(struct hnode *h, const uint8_t *f, uint32_t len)
{
	int i = ipk_ip6_addr_find(h->ctx, G2);
	uint8_t st;

	if (i < 0)
		return;
	st = h->ctx->ip6.addr[i].state;
	/* every state change bumps addr_gen (internal.h) */
	h->ctx->ip6.addr[i].state = IPK_A6_TENTATIVE;
	h->ctx->ip6.addr_gen++;
	hnode_inject(h, f, len);
	h->ctx->ip6.addr[i].state = st;
	h->ctx->ip6.addr_gen++;
}

/* Before the frames queued from node 0, a damaged copy of one in 3 to node 1. */
static void damage(struct hnet *net, uint32_t *mr)
{
	uint8_t out[H_FRAME_MAX + 16];
	int i, n = net->qn;

	for (i = 0; i < n; i++) {
		struct sim_pkt *k = net->q[i];
		const uint8_t *f = sim_pkt_data(k);
		uint32_t len;

		if (net->qfrom[i] != 0 || k->len < 74 || k->len > H_FRAME_MAX - 16 ||
		    sim_pkt_chain_len(k) != k->len || ipk_rd16(f + 12) != IPK_ETHERTYPE_IP6 ||
		    f[20] != IPK_IPPROTO_TCP || lcg(mr) % 3u != 0)
			continue;
		len = mutate6(mr, f, k->len, out);
		hnode_inject(net->nodes[1], out, len);
		if (lcg(mr) % 8u == 0)
			gone_addr(net->nodes[1], f, k->len);
	}
}

/* Does a transmit template slot hold c's IPv6 header? */
static int has_tmpl6(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	uint32_t i;

	for (i = 0; c && i < IPK_TT_SLOTS; i++)
		if (ctx->tt_slot[i].c == c && ctx->tt_slot[i].until6 != 0)
			return 1;
	return 0;
}

static void run(int fast_off, int mutate, struct digest *d)
{
	struct hnet *net = hnet_new(2, tweak6);
	struct ipk_addr peer;
	struct ipk_conn *c = NULL;
	struct sha256 wh;
	uint8_t *msg = (uint8_t *)malloc(MAXMSG);
	uint32_t r = 2026u, mr = 91u, i, x;
	int s;

	memset(d, 0, sizeof(*d));
	memset(conn_of, 0, sizeof(conn_of));
	memset(rxlen, 0, sizeof(rxlen));
	sha256_init(&rxh[0]);
	sha256_init(&rxh[1]);
	sha256_init(&wh);
	for (s = 0; s < 2; s++) {
		net->nodes[s]->ops.tcp_accepted = op_accepted;
		net->nodes[s]->ops.tcp_connected = op_connected;
		net->nodes[s]->ops.tcp_payload = op_payload;
		net->nodes[s]->ops.tcp_closed = op_closed;
		if (fast_off) {
			ipk_fast_off(net->nodes[s]->ctx);
			net->nodes[s]->ctx->tx_fast_off = 1; /* and the transmit template */
		}
	}
	hnet_advance(net, 0);
	hnet_advance(net, 2 * SEC); /* DAD done */
	memset(&peer, 0, sizeof(peer));
	peer.family = IPK_AF_INET6;
	memcpy(peer.a, G2, 16);
	CHECK_EQ(ipk_tcp_listen(net->nodes[1]->ctx, ipk_htons(80), 8), IPK_OK);
	CHECK_EQ(ipk_tcp_connect_addr(net->nodes[0]->ctx, &peer, ipk_htons(80), 0, NULL, &c,
	                              net->now), IPK_OK);
	hnet_settle(net);
	CHECK(c != NULL && conn_of[0] == c && conn_of[1] != NULL);
	drain(net, &wh, &d->frames);
	for (i = 0; i < ROUNDS && conn_of[0] && conn_of[1]; i++) {
		for (s = 0; s < 2; s++) {
			uint32_t len = 1u + lcg(&r) % (lcg(&r) % 4u == 0 ? MAXMSG : 200u);

			for (x = 0; x < len; x++)
				msg[x] = (uint8_t)(x * 13u + i + (uint32_t)s);
			(void)ipk_tcp_write(net->nodes[s]->ctx, conn_of[s], msg, len, net->now);
		}
		if (mutate)
			damage(net, &mr);
		hnet_settle(net);
		drain(net, &wh, &d->frames);
		hnet_advance(net, lcg(&r) % 8u == 0 ? 60 * MS : 30000u + lcg(&r) % 90000u);
		drain(net, &wh, &d->frames);
	}
	for (s = 0; s < 2; s++) {
		d->tmpl6[s] = has_tmpl6(net->nodes[s]->ctx, conn_of[s]);
	}
	for (i = 0; i < 20; i++) {
		hnet_advance(net, 300 * MS);
		drain(net, &wh, &d->frames);
	}
	sha256_final(&wh, d->wire);
	for (s = 0; s < 2; s++) {
		sha256_final(&rxh[s], d->rx[s]);
		d->rxlen[s] = rxlen[s];
		d->cnt[s] = *ipk_counters(net->nodes[s]->ctx);
		d->one[s] = net->nodes[s]->ctx->rx_one_n;
		d->cnt[s].tcp_fast_path = 0; /* header prediction: off in one run */
	}
	CHECK(conn_of[0] != NULL && conn_of[1] != NULL);
	if (conn_of[0])
		ipk_tcp_abort(net->nodes[0]->ctx, conn_of[0], net->now);
	hnet_advance(net, 10 * SEC);
	hnet_advance(net, 200 * SEC);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
	free(msg);
}

static void compare(const struct digest *on, const struct digest *off)
{
	CHECK(on->frames > 1000);
	CHECK(on->rxlen[0] > 100000 && on->rxlen[1] > 100000);
	CHECK_EQ(on->rxlen[0], off->rxlen[0]);
	CHECK_EQ(on->rxlen[1], off->rxlen[1]);
	/* the shortcut took most frames on both sides, none with the shortcuts off */
	CHECK(on->one[0] > on->frames / 4 && on->one[1] > on->frames / 4);
	CHECK_EQ(off->one[0] + off->one[1], 0);
	/* without ECN both sides sent from an IPv6 transmit template; none with the
	 * fast paths off */
	CHECK(ecn_on || (on->tmpl6[0] && on->tmpl6[1]));
	CHECK(!off->tmpl6[0] && !off->tmpl6[1]);
	CHECK_EQ(on->frames, off->frames);
	CHECK(memcmp(on->wire, off->wire, sizeof(on->wire)) == 0);
	CHECK(memcmp(on->rx, off->rx, sizeof(on->rx)) == 0);
	CHECK(memcmp(on->cnt, off->cnt, sizeof(on->cnt)) == 0);
}

static void test_tcp6_rx_shortcut_matches_general_path(void)
{
	struct digest *on = (struct digest *)malloc(sizeof(*on));
	struct digest *off = (struct digest *)malloc(sizeof(*off));

	run(0, 0, on);
	run(1, 0, off);
	compare(on, off);
	free(on);
	free(off);
}

/* ECN off: the transmit fast path sends from the IPv6 template, whose frames must be
 * the general path's (seg_send6) byte for byte. */
static void test_tcp6_tx_template_matches_general_path(void)
{
	struct digest *on = (struct digest *)malloc(sizeof(*on));
	struct digest *off = (struct digest *)malloc(sizeof(*off));

	ecn_on = 0;
	run(0, 0, on);
	run(1, 0, off);
	compare(on, off);
	ecn_on = 1;
	free(on);
	free(off);
}

static void test_tcp6_damaged_frames_judged_as_general_path(void)
{
	struct digest *on = (struct digest *)malloc(sizeof(*on));
	struct digest *off = (struct digest *)malloc(sizeof(*off));
	const struct ipk_counters *k = &on->cnt[1];

	run(0, 1, on);
	run(1, 1, off);
	compare(on, off);
	/* the damage reached each rule */
	CHECK(k->drop[IPK_DROP_TCP_CSUM] > 2);
	CHECK(k->drop[IPK_DROP_IP6_NOT_FOR_US] > 2);
	CHECK(k->drop[IPK_DROP_IP6_BAD_SRC] > 2);
	CHECK(k->drop[IPK_DROP_IP6_V4MAPPED] > 2);
	CHECK(k->drop[IPK_DROP_IP6_MALFORMED] > 2);
	CHECK(k->drop[IPK_DROP_NOT_FOR_US] > 2);
	CHECK(k->drop[IPK_DROP_TCP_NO_CONN] > 2);
	free(on);
	free(off);
}

/* Our address's valid lifetime ends while a connection uses it (RFC 4862 §5.5.4):
 * the address timer frees it (and bumps ip6.addr_gen), so the pair's remembered
 * verdict no longer holds and the peer's next segment is dropped as not for us,
 * by the shortcut's fallback exactly as by ipk_ip6_input. */
static void test_tcp6_expired_address_not_taken_by_shortcut(void)
{
	struct hnet *net = hnet_new(2, tweak6);
	struct hnode *b;
	struct ipk_addr peer;
	struct ipk_conn *c = NULL;
	uint8_t msg[100];
	uint64_t one, drops;
	uint32_t got;
	int s;

	memset(conn_of, 0, sizeof(conn_of));
	memset(rxlen, 0, sizeof(rxlen));
	memset(msg, 7, sizeof(msg));
	sha256_init(&rxh[0]);
	sha256_init(&rxh[1]);
	for (s = 0; s < 2; s++) {
		net->nodes[s]->ops.tcp_accepted = op_accepted;
		net->nodes[s]->ops.tcp_connected = op_connected;
		net->nodes[s]->ops.tcp_payload = op_payload;
		net->nodes[s]->ops.tcp_closed = op_closed;
	}
	b = net->nodes[1];
	hnet_advance(net, 0);
	hnet_advance(net, 2 * SEC);
	memset(&peer, 0, sizeof(peer));
	peer.family = IPK_AF_INET6;
	memcpy(peer.a, G2, 16);
	CHECK_EQ(ipk_tcp_listen(b->ctx, ipk_htons(80), 8), IPK_OK);
	CHECK_EQ(ipk_tcp_connect_addr(net->nodes[0]->ctx, &peer, ipk_htons(80), 0, NULL, &c,
	                              net->now), IPK_OK);
	hnet_settle(net);
	CHECK(c != NULL && conn_of[1] != NULL);
	/* data through the shortcut: the pair's verdict is remembered */
	one = b->ctx->rx_one_n;
	CHECK(ipk_tcp_write(net->nodes[0]->ctx, c, msg, sizeof(msg), net->now) > 0);
	hnet_settle(net);
	CHECK_EQ(rxlen[1], sizeof(msg));
	CHECK(b->ctx->rx_one_n > one);
	/* the valid lifetime ends now: the address timer frees the address */
	s = ipk_ip6_addr_find(b->ctx, G2);
	CHECK(s >= 0);
	if (s >= 0)
		b->ctx->ip6.addr[s].valid_until = net->now + MS;
	ipk_ip6_arm(b->ctx, net->now);
	hnet_advance(net, 2 * MS);
	CHECK(ipk_ip6_addr_find(b->ctx, G2) < 0);
	one = b->ctx->rx_one_n;
	got = rxlen[1];
	drops = ipk_counters(b->ctx)->drop[IPK_DROP_IP6_NOT_FOR_US];
	if (c)
		CHECK(ipk_tcp_write(net->nodes[0]->ctx, c, msg, sizeof(msg), net->now) > 0);
	hnet_settle(net);
	CHECK_EQ(rxlen[1], got);
	CHECK_EQ(b->ctx->rx_one_n, one);
	CHECK(ipk_counters(b->ctx)->drop[IPK_DROP_IP6_NOT_FOR_US] > drops);
	if (c)
		ipk_tcp_abort(net->nodes[0]->ctx, c, net->now);
	hnet_advance(net, 200 * SEC);
	hnet_free(net);
}

int main(void)
{
	RUN(test_tcp6_rx_shortcut_matches_general_path);
	RUN(test_tcp6_tx_template_matches_general_path);
	RUN(test_tcp6_damaged_frames_judged_as_general_path);
	RUN(test_tcp6_expired_address_not_taken_by_shortcut);
	return check_summary();
}
