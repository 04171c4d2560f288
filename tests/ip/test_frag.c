/* IPv4 fragmentation on output (RFC 791 §3.2, RFC 1122 §3.3.3): UDP datagrams
 * above the MTU cut into fragments, each checked on the wire (size, offset, MF,
 * ID, header checksum), then reassembled by the receiving context and compared
 * byte for byte; the pool running dry halfway; DF (udp_df) keeping EMSGSIZE. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "check.h"
#include "harness.h"

#define A_IP IPK_IP4(10, 0, 0, 1)
#define B_IP IPK_IP4(10, 0, 0, 2)
#define MAXDG 65507u

static uint16_t g_mtu = 1500;
static uint32_t g_caps;
static uint8_t g_df;

/* What B's application saw: the whole reassembled payload. */
static uint8_t got[MAXDG];
static uint32_t got_len, got_n;

static void tweak(int idx, struct ipk_config *cfg)
{
	(void)idx;
	cfg->mtu = g_mtu;
	cfg->caps = g_caps;
	cfg->udp_df = g_df;
	cfg->frag_max_pieces = 200; /* 65507 bytes at MTU 576 are 119 fragments */
}

static void big_recv(struct ipk_ctx *ctx, const struct ipk_tuple *t, void *pkt, uint32_t off,
                     uint32_t len, void *opaque)
{
	(void)t;
	(void)opaque;
	got_n++;
	got_len = ipk_pkt_copy(ctx, pkt, off, got, len < MAXDG ? len : MAXDG);
}

static uint8_t *pattern(uint32_t n, uint32_t seed)
{
	uint8_t *p = (uint8_t *)malloc(n ? n : 1);
	uint32_t i, x = seed * 2654435761u + 1u;

	for (i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (uint8_t)(x >> 16);
	}
	return p;
}

#define MORE_PBS 192
static void *more_pbs;

static struct hnet *net_up(uint32_t pool)
{
	struct hnet *net = hnet_new_pool(2, tweak, pool);

	/* The harness gives 64 pb descriptors; B holds 119 fragments at once. */
	free(more_pbs);
	more_pbs = malloc(ipk_pb_size() * MORE_PBS);
	ipk_add_pbs(net->nodes[1]->ctx, more_pbs, MORE_PBS);
	net->nodes[1]->npbs += MORE_PBS;

	net->nodes[1]->ops.udp_recv = big_recv;
	ipk_udp_bind(net->nodes[1]->ctx, ipk_htons(7));
	/* Resolve B's MAC first: an unresolved next hop queues only
	 * cfg.arp_queue_per_entry frames, fewer than a large datagram's fragments. */
	ipk_udp_sendto(net->nodes[0]->ctx, ipk_htons(5000), B_IP, ipk_htons(7), "x", 1, net->now);
	hnet_settle(net);
	hnet_clear_cap(net);
	got_len = got_n = 0;
	return net;
}

static int ip4_hdr_csum_ok(const uint8_t *ip)
{
	uint32_t s = 0, i;

	for (i = 0; i < 20; i += 2)
		s += (uint32_t)ip[i] << 8 | ip[i + 1];
	while (s >> 16)
		s = (s & 0xffffu) + (s >> 16);
	return s == 0xffffu;
}

/* Walk A's captured IPv4 frames: every fragment of one datagram of `l4` UDP bytes.
 * Returns the datagram's ID. */
static uint16_t check_fragments(struct hnet *net, uint32_t l4)
{
	uint32_t unit = ((uint32_t)g_mtu - 20u) & ~7u, want = (l4 + unit - 1u) / unit;
	uint32_t next = 0, nfrag = 0;
	int id = -1, i;

	for (i = 0; i < net->ncap; i++) {
		const uint8_t *f = net->cap[i].b, *ip = f + 14;
		uint32_t tot, frag, n;

		if (net->cap[i].from != 0 || f[12] != 0x08 || f[13] != 0x00 || ip[9] != 17)
			continue;
		tot = (uint32_t)ip[2] << 8 | ip[3];
		frag = (uint32_t)ip[6] << 8 | ip[7];
		n = tot - 20u;
		CHECK_EQ(ip[0], 0x45);
		CHECK(tot <= g_mtu);
		CHECK_EQ(net->cap[i].len, 14u + tot);
		CHECK(ip4_hdr_csum_ok(ip));
		CHECK_EQ(frag & 0x4000u, 0); /* no DF on a fragment */
		CHECK_EQ((frag & 0x1fffu) * 8u, next);
		if (id < 0)
			id = (int)((uint32_t)ip[4] << 8 | ip[5]);
		CHECK_EQ((uint32_t)ip[4] << 8 | ip[5], (uint32_t)id);
		nfrag++;
		next += n;
		if (next < l4) { /* all but the last: MF, a multiple of 8, full */
			CHECK(frag & 0x2000u);
			CHECK_EQ(n, unit);
		} else {
			CHECK_EQ(frag & 0x2000u, 0);
		}
	}
	CHECK_EQ(next, l4);
	CHECK_EQ(nfrag, want);
	return (uint16_t)id;
}

/* n bytes of data as a chain of packets of at most 1000 bytes. */
static struct sim_pkt *make_chain(struct hnet *net, const uint8_t *data, uint32_t n)
{
	struct sim_pkt *head = sim_pkt_from(net->pool, data, n < 1000u ? n : 1000u), *t = head;
	uint32_t off;

	for (off = 1000; off < n && t; off += 1000) {
		t->next = sim_pkt_from(net->pool, data + off, n - off < 1000u ? n - off : 1000u);
		t = t->next;
	}
	return head;
}

/* One datagram of n payload bytes from A to B, copying (sendto) or zero-copy
 * (send, a chain of packets of at most 1000 bytes). */
static void send_one(struct hnet *net, const uint8_t *data, uint32_t n, int zero_copy)
{
	struct hnode *a = net->nodes[0];
	int rc;

	if (zero_copy) {
		rc = ipk_udp_send(a->ctx, ipk_htons(5000), B_IP, ipk_htons(7),
		                  make_chain(net, data, n), net->now);
	} else {
		rc = ipk_udp_sendto(a->ctx, ipk_htons(5000), B_IP, ipk_htons(7), data, n, net->now);
	}
	CHECK_EQ(rc, n);
	hnet_settle(net);
}

static void roundtrip(uint16_t mtu, uint32_t caps, int zero_copy)
{
	static const uint32_t sizes[] = {1473, 4000, 8000, MAXDG};
	uint32_t k;

	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		uint32_t n = sizes[k], l4 = n + 8u;
		uint8_t *data = pattern(n, k + mtu);
		struct hnet *net;
		const struct ipk_counters *ca;
		uint16_t id1, id2;

		g_mtu = mtu;
		g_caps = caps;
		net = net_up(512);
		ca = ipk_counters(net->nodes[0]->ctx);
		send_one(net, data, n, zero_copy);
		id1 = check_fragments(net, l4);
		CHECK_EQ(got_n, 1);
		CHECK_EQ(got_len, n);
		CHECK(memcmp(got, data, n) == 0);
		CHECK_EQ(ipk_counters(net->nodes[1]->ctx)->drop[IPK_DROP_UDP_CSUM], 0);
		CHECK_EQ(ipk_counters(net->nodes[1]->ctx)->ip4_reassembled, 1);
		CHECK_EQ(ca->ip4_fragmented, 1);
		CHECK_EQ(ca->ip4_frags_tx, (l4 + ((mtu - 20u) & ~7u) - 1u) / ((mtu - 20u) & ~7u));
		/* A second datagram gets a different ID (RFC 791, RFC 6864 §4.2). */
		hnet_clear_cap(net);
		send_one(net, data, n, zero_copy);
		id2 = check_fragments(net, l4);
		CHECK(id1 != id2);
		CHECK_EQ(got_n, 2);
		CHECK(memcmp(got, data, n) == 0);
		CHECK(hnet_no_leaks(net));
		hnet_free(net);
		free(data);
	}
	g_mtu = 1500;
	g_caps = 0;
}

static void test_frag_copy_mtu1500(void) { roundtrip(1500, 0, 0); }
static void test_frag_copy_mtu576(void) { roundtrip(576, 0, 0); }
static void test_frag_zero_copy_no_sg_mtu1500(void) { roundtrip(1500, 0, 1); }
static void test_frag_sg_clones_mtu1500(void) { roundtrip(1500, IPK_CAP_SG, 1); }
static void test_frag_sg_clones_mtu576(void) { roundtrip(576, IPK_CAP_SG, 1); }
static void test_frag_sg_sendto_mtu576(void) { roundtrip(576, IPK_CAP_SG, 0); }

/* With the NIC's UDP checksum offload a datagram that fits uses it; one that is
 * fragmented is checksummed in software (the offload cannot span fragments). */
static void test_frag_csum_in_software_despite_offload(void)
{
	uint8_t *data = pattern(4000, 3);
	struct hnet *net;
	int i;

	g_caps = IPK_CAP_TX_CSUM_UDP | IPK_CAP_TX_CSUM_IP4;
	net = net_up(256);
	send_one(net, data, 4000, 0);
	CHECK_EQ(got_n, 1);
	CHECK(memcmp(got, data, 4000) == 0);
	CHECK_EQ(ipk_counters(net->nodes[1]->ctx)->drop[IPK_DROP_UDP_CSUM], 0);
	for (i = 0; i < net->ncap; i++)
		if (net->cap[i].from == 0 && net->cap[i].b[14 + 9] == 17)
			CHECK_EQ(net->cap[i].flags & IPK_TXOFF_UDP_CSUM, 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
	free(data);
	g_caps = 0;
}

/* Take every free packet of the pool but `leave`; returns the chain held. */
static struct sim_pkt *hoard(struct hnet *net, uint32_t leave)
{
	struct sim_pkt *held = NULL, *p, *keep[64];
	uint32_t i;

	while ((p = sim_pkt_alloc(net->pool)) != NULL) {
		p->next = held;
		held = p;
	}
	for (i = 0; i < leave && held; i++) {
		keep[i] = held;
		held = held->next;
	}
	while (i-- > 0)
		sim_pkt_free(keep[i]);
	return held;
}

/* The pool runs dry after some fragments are built: nothing is sent, IPK_ENOBUFS,
 * counted, the caller keeps its packet, and nothing leaks. */
static void dry_pool(uint32_t caps)
{
	uint8_t *data = pattern(8000, 9);
	struct hnet *net;
	struct sim_pkt *held, *p;
	const struct ipk_counters *ca;
	uint64_t nopkt;

	g_caps = caps;
	net = net_up(256);
	ca = ipk_counters(net->nodes[0]->ctx);
	nopkt = ca->drop[IPK_DROP_NO_PKT];
	p = make_chain(net, data, 8000);
	CHECK(p != NULL);
	held = hoard(net, 3); /* header + 2 fragments of the 6 needed */
	CHECK_EQ(ipk_udp_send(net->nodes[0]->ctx, ipk_htons(5000), B_IP, ipk_htons(7), p,
	                      net->now), IPK_ENOBUFS);
	CHECK_EQ(sim_pkt_chain_len(p), 8000); /* still the caller's, untouched */
	CHECK(memcmp(sim_pkt_data(p), data, 1000) == 0);
	CHECK_EQ(ipk_udp_sendto(net->nodes[0]->ctx, ipk_htons(5000), B_IP, ipk_htons(7), data,
	                        8000, net->now), IPK_ENOBUFS);
	CHECK(ca->drop[IPK_DROP_NO_PKT] > nopkt);
	CHECK_EQ(ca->ip4_frags_tx, 0);
	CHECK_EQ(net->ncap, 0); /* not one fragment on the wire */
	sim_pkt_free_chain(held);
	sim_pkt_free_chain(p);
	hnet_settle(net);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
	free(data);
	g_caps = 0;
}

static void test_frag_pool_dry_sends_nothing_copy(void) { dry_pool(0); }
static void test_frag_pool_dry_sends_nothing_sg(void) { dry_pool(IPK_CAP_SG); }

static void test_frag_df_and_limits_give_emsgsize(void)
{
	uint8_t *data = pattern(MAXDG + 1u, 5);
	struct hnet *net;
	struct ipk_ctx *a;

	net = net_up(256);
	a = net->nodes[0]->ctx;
	/* IPv4's limit: 65535 - 20 - 8 bytes of payload. */
	CHECK_EQ(ipk_udp_sendto(a, ipk_htons(5000), B_IP, ipk_htons(7), data, MAXDG + 1u,
	                        net->now), IPK_EMSGSIZE);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);

	g_df = 1;
	net = net_up(256);
	a = net->nodes[0]->ctx;
	CHECK_EQ(ipk_udp_sendto(a, ipk_htons(5000), B_IP, ipk_htons(7), data, 1473, net->now),
	         IPK_EMSGSIZE);
	CHECK_EQ(ipk_udp_sendto(a, ipk_htons(5000), B_IP, ipk_htons(7), data, 1472, net->now),
	         1472);
	hnet_settle(net);
	CHECK_EQ(got_n, 1);
	CHECK_EQ(ipk_counters(a)->ip4_fragmented, 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
	g_df = 0;
	free(data);
}

/* A datagram that fits is sent whole with DF and the ordinary ID counter; no
 * fragment counter moves. */
static void test_frag_fitting_datagram_not_fragmented(void)
{
	uint8_t *data = pattern(1472, 1);
	struct hnet *net = net_up(256);
	int i, seen = 0;

	send_one(net, data, 1472, 0);
	for (i = 0; i < net->ncap; i++) {
		const uint8_t *ip = net->cap[i].b + 14;

		if (net->cap[i].from != 0 || ip[9] != 17)
			continue;
		seen++;
		CHECK_EQ(((uint32_t)ip[6] << 8 | ip[7]), 0x4000u);
	}
	CHECK_EQ(seen, 1);
	CHECK_EQ(ipk_counters(net->nodes[0]->ctx)->ip4_frags_tx, 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
	free(data);
}

int main(void)
{
	RUN(test_frag_copy_mtu1500);
	RUN(test_frag_copy_mtu576);
	RUN(test_frag_zero_copy_no_sg_mtu1500);
	RUN(test_frag_sg_clones_mtu1500);
	RUN(test_frag_sg_clones_mtu576);
	RUN(test_frag_sg_sendto_mtu576);
	RUN(test_frag_csum_in_software_despite_offload);
	RUN(test_frag_pool_dry_sends_nothing_copy);
	RUN(test_frag_pool_dry_sends_nothing_sg);
	RUN(test_frag_df_and_limits_give_emsgsize);
	RUN(test_frag_fitting_datagram_not_fragmented);
	free(more_pbs);
	return check_summary();
}
