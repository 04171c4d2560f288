/* ARP: resolution with queued packets, retries and timeout, replies, gratuitous
 * ARP, eviction, static entries, integrator-owned table. */
#include <string.h>

#include "../../core/wire/wire.h"
#include "check.h"
#include "harness.h"

#define SEC 1000000000ull

static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

static int is_arp(const struct hframe *f, uint16_t op)
{
	return f->len >= 42 && ipk_rd16(f->b + 12) == IPK_ETHERTYPE_ARP && ipk_rd16(f->b + 20) == op;
}

static int count_arp(struct hnet *net, int from, uint16_t op)
{
	int i, n = 0;

	for (i = 0; i < net->ncap; i++)
		if (net->cap[i].from == from && is_arp(&net->cap[i], op))
			n++;
	return n;
}

/* An ARP packet from a host that is not a context in the net. */
static void inject_arp(struct hnode *to, uint16_t op, const uint8_t sha[6], uint32_t spa,
                       const uint8_t dst[6], uint32_t tpa)
{
	uint8_t b[60];
	struct ipk_arp_hdr a;

	memset(b, 0, sizeof(b));
	hb_eth(b, dst, sha, IPK_ETHERTYPE_ARP);
	memset(&a, 0, sizeof(a));
	a.op = op;
	memcpy(a.sha, sha, 6);
	a.spa_be = spa;
	a.tpa_be = tpa;
	ipk_arp_emit(b + 14, 28, &a);
	hnode_inject(to, b, sizeof(b));
}

/* One second at a time, so every retry timer fires. */
static void advance_secs(struct hnet *net, int n)
{
	while (n-- > 0)
		hnet_advance(net, SEC);
}

static void send_byte(struct hnet *net, int from, uint32_t dst, uint8_t v)
{
	ipk_udp_sendto(net->nodes[from]->ctx, ipk_htons(5000), dst, ipk_htons(7), &v, 1, net->now);
}

static void test_arp_queued_packets_sent_after_reply(void)
{
	struct hnet *net = hnet_new(2, NULL);
	struct hnode *b = net->nodes[1];
	uint8_t i;

	CHECK_EQ(ipk_udp_bind(b->ctx, ipk_htons(7)), 0);
	net->cut = 1; /* hold the wire to see what was sent before the reply */
	for (i = 1; i <= 4; i++)
		send_byte(net, 0, IPK_IP4(10, 0, 0, 2), i);
	CHECK_EQ(net->ncap, 1);
	CHECK(is_arp(&net->cap[0], IPK_ARP_REQUEST));
	CHECK_EQ(ipk_pbs_free(net->nodes[0]->ctx), 64 - 4);
	net->cut = 0;
	hnet_clear_cap(net);
	/* The retry is answered: everything queued flows, in order. */
	hnet_advance(net, SEC);
	CHECK_EQ(b->udp_n, 4);
	CHECK(memcmp(b->udp_order, "\1\2\3\4", 4) == 0);
	CHECK_EQ(count_arp(net, 1, IPK_ARP_REPLY), 1);
	CHECK_EQ(b->learned_n, 1); /* b learned a from the request aimed at it */
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_arp_unanswered_requests_retry_then_drop_queue(void)
{
	struct hnet *net = hnet_new(2, NULL);
	struct ipk_ctx *a = net->nodes[0]->ctx;
	int k;

	net->cut = 1;
	send_byte(net, 0, IPK_IP4(10, 0, 0, 2), 1);
	send_byte(net, 0, IPK_IP4(10, 0, 0, 2), 2);
	for (k = 0; k < 5; k++)
		hnet_advance(net, SEC);
	CHECK_EQ(count_arp(net, 0, IPK_ARP_REQUEST), 3); /* arp_retries */
	CHECK_EQ(ipk_counters(a)->drop[IPK_DROP_ARP_TIMEOUT], 2);
	CHECK_EQ(ipk_pbs_free(a), 64);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_arp_queue_full_drops_extra_packets(void)
{
	struct hnet *net = hnet_new(2, NULL);
	struct ipk_ctx *a = net->nodes[0]->ctx;
	int k;

	net->cut = 1;
	for (k = 0; k < 10; k++)
		send_byte(net, 0, IPK_IP4(10, 0, 0, 2), (uint8_t)k);
	CHECK_EQ(ipk_counters(a)->drop[IPK_DROP_ARP_QUEUE_FULL], 2); /* 8 per entry */
	for (k = 0; k < 4; k++)
		hnet_advance(net, SEC);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_arp_request_for_us_gets_reply_and_entry(void)
{
	struct hnet *net = hnet_new(1, NULL);
	struct hnode *a = net->nodes[0];
	const uint8_t peer[6] = {0x02, 0xaa, 0, 0, 0, 9};
	const struct hframe *f;

	inject_arp(a, IPK_ARP_REQUEST, peer, IPK_IP4(10, 0, 0, 9), bcast, IPK_IP4(10, 0, 0, 1));
	CHECK_EQ(net->ncap, 1);
	f = &net->cap[0];
	CHECK(is_arp(f, IPK_ARP_REPLY));
	CHECK(memcmp(f->b, peer, 6) == 0);               /* unicast to the asker */
	CHECK(memcmp(f->b + 22, a->cfg.mac, 6) == 0);    /* sha: us */
	CHECK_EQ(ipk_rdbe32(f->b + 28), IPK_IP4(10, 0, 0, 1));
	CHECK(memcmp(f->b + 32, peer, 6) == 0);
	CHECK_EQ(ipk_rdbe32(f->b + 38), IPK_IP4(10, 0, 0, 9));
	/* The entry exists: sending to the asker needs no request. */
	hnet_clear_cap(net);
	send_byte(net, 0, IPK_IP4(10, 0, 0, 9), 1);
	CHECK_EQ(net->ncap, 1);
	CHECK(memcmp(net->cap[0].b, peer, 6) == 0);
	/* A request for someone else is not answered and creates nothing. */
	hnet_clear_cap(net);
	inject_arp(a, IPK_ARP_REQUEST, peer, IPK_IP4(10, 0, 0, 8), bcast, IPK_IP4(10, 0, 0, 3));
	CHECK_EQ(net->ncap, 0);
	send_byte(net, 0, IPK_IP4(10, 0, 0, 8), 1);
	CHECK(is_arp(&net->cap[0], IPK_ARP_REQUEST));
	advance_secs(net, 5);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_arp_malformed_counted(void)
{
	struct hnet *net = hnet_new(1, NULL);
	struct hnode *a = net->nodes[0];
	const uint8_t peer[6] = {0x02, 0xaa, 0, 0, 0, 9};
	uint8_t b[60];

	memset(b, 0, sizeof(b));
	hb_eth(b, bcast, peer, IPK_ETHERTYPE_ARP);
	b[14] = 0; b[15] = 6; /* htype 6: not Ethernet */
	hnode_inject(a, b, sizeof(b));
	hnode_inject(a, b, 20); /* short */
	inject_arp(a, 7, peer, IPK_IP4(10, 0, 0, 9), bcast, IPK_IP4(10, 0, 0, 1)); /* bad op */
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_ARP_MALFORMED], 3);
	CHECK_EQ(net->ncap, 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_arp_gratuitous_updates_known_entry_only(void)
{
	struct hnet *net = hnet_new(2, NULL);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	const uint8_t moved[6] = {0x02, 0xbb, 0, 0, 0, 2};
	const uint8_t other[6] = {0x02, 0xcc, 0, 0, 0, 7};

	ipk_udp_bind(b->ctx, ipk_htons(7));
	send_byte(net, 0, IPK_IP4(10, 0, 0, 2), 1);
	hnet_settle(net);
	CHECK_EQ(b->udp_n, 1);
	/* b's own announcement is a broadcast request with spa == tpa. */
	hnet_clear_cap(net);
	CHECK_EQ(ipk_arp_announce(b->ctx, net->now), 0);
	CHECK(is_arp(&net->cap[0], IPK_ARP_REQUEST));
	CHECK(memcmp(net->cap[0].b, bcast, 6) == 0);
	CHECK_EQ(ipk_rdbe32(net->cap[0].b + 28), ipk_rdbe32(net->cap[0].b + 38));
	hnet_settle(net);
	/* Another MAC claims 10.0.0.2 while b still answers: a probes b's MAC and,
	 * answered, keeps it (the claim is a spoof as far as a can tell). */
	hnet_clear_cap(net);
	inject_arp(a, IPK_ARP_REQUEST, moved, IPK_IP4(10, 0, 0, 2), bcast, IPK_IP4(10, 0, 0, 2));
	CHECK(is_arp(&net->cap[0], IPK_ARP_REQUEST));
	CHECK(memcmp(net->cap[0].b, b->cfg.mac, 6) == 0); /* the probe: unicast to b */
	hnet_settle(net);
	advance_secs(net, 5);
	hnet_clear_cap(net);
	send_byte(net, 0, IPK_IP4(10, 0, 0, 2), 2);
	CHECK(memcmp(net->cap[0].b, b->cfg.mac, 6) == 0);
	CHECK_EQ(ipk_counters(a->ctx)->arp_challenges, 1);
	CHECK_EQ(ipk_counters(a->ctx)->arp_moves, 0);
	/* 10.0.0.2 really moves (b silent): after arp_retries unanswered probes a
	 * follows the new MAC (RFC 826 merge, confirmed). */
	net->cut = 1;
	inject_arp(a, IPK_ARP_REQUEST, moved, IPK_IP4(10, 0, 0, 2), bcast, IPK_IP4(10, 0, 0, 2));
	advance_secs(net, 4);
	hnet_clear_cap(net);
	send_byte(net, 0, IPK_IP4(10, 0, 0, 2), 3);
	CHECK(memcmp(net->cap[0].b, moved, 6) == 0);
	CHECK_EQ(ipk_counters(a->ctx)->arp_moves, 1);
	net->cut = 0;
	/* A gratuitous ARP for an address a never talked to creates no entry. */
	inject_arp(a, IPK_ARP_REQUEST, other, IPK_IP4(10, 0, 0, 7), bcast, IPK_IP4(10, 0, 0, 7));
	hnet_clear_cap(net);
	send_byte(net, 0, IPK_IP4(10, 0, 0, 7), 3);
	CHECK(is_arp(&net->cap[0], IPK_ARP_REQUEST));
	net->cut = 1;
	advance_secs(net, 5);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* Frame i of the capture is an IPv4 frame to mac. */
static int ip_frame_to(const struct hnet *net, int i, const uint8_t mac[6])
{
	return i < net->ncap && ipk_rd16(net->cap[i].b + 12) == IPK_ETHERTYPE_IP4 &&
	       memcmp(net->cap[i].b, mac, 6) == 0;
}

/* Also: the entry evicted is a next hop link.c cached (a frame went to it while it
 * was the only one); a frame to it after the eviction must ask again, not take the
 * cached header (the cache is cleared by every table change: the new bindings here). */
static void test_arp_cache_full_evicts_oldest(void)
{
	struct hnet *net = hnet_new(1, NULL); /* arp_entries = 8 */
	struct hnode *a = net->nodes[0];
	uint8_t peer[6] = {0x02, 0xaa, 0, 0, 0, 0};
	int k;

	net->cut = 1;
	for (k = 0; k < 9; k++) {
		peer[5] = (uint8_t)(20 + k);
		inject_arp(a, IPK_ARP_REQUEST, peer, IPK_IP4(10, 0, 0, 20 + k), bcast,
		           IPK_IP4(10, 0, 0, 1));
		if (k == 0) {
			hnet_clear_cap(net);
			send_byte(net, 0, IPK_IP4(10, 0, 0, 20), 1);
			CHECK(ip_frame_to(net, 0, peer));
		}
		net->now += SEC;
	}
	hnet_clear_cap(net);
	send_byte(net, 0, IPK_IP4(10, 0, 0, 28), 1); /* newest: known */
	CHECK_EQ(net->ncap, 1);
	CHECK(ipk_rd16(net->cap[0].b + 12) == IPK_ETHERTYPE_IP4);
	send_byte(net, 0, IPK_IP4(10, 0, 0, 20), 1); /* oldest: evicted */
	CHECK_EQ(net->ncap, 2);
	CHECK(is_arp(&net->cap[1], IPK_ARP_REQUEST));
	advance_secs(net, 5);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_arp_static_entry_never_expires_or_changes(void)
{
	struct hnet *net = hnet_new(1, NULL);
	struct hnode *a = net->nodes[0];
	const uint8_t mac[6] = {0x02, 0x55, 0, 0, 0, 50};
	const uint8_t liar[6] = {0x02, 0x66, 0, 0, 0, 50};

	CHECK_EQ(ipk_arp_add_static(a->ctx, IPK_IP4(10, 0, 0, 50), mac), 0);
	CHECK_EQ(ipk_arp_add_static(a->ctx, 0, mac), IPK_EINVAL);
	hnet_advance(net, 120 * SEC);
	inject_arp(a, IPK_ARP_REPLY, liar, IPK_IP4(10, 0, 0, 50), a->cfg.mac, IPK_IP4(10, 0, 0, 1));
	hnet_clear_cap(net);
	send_byte(net, 0, IPK_IP4(10, 0, 0, 50), 1);
	CHECK_EQ(net->ncap, 1);
	CHECK(memcmp(net->cap[0].b, mac, 6) == 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_arp_entry_expires_after_ttl(void)
{
	struct hnet *net = hnet_new(2, NULL);

	ipk_udp_bind(net->nodes[1]->ctx, ipk_htons(7));
	send_byte(net, 0, IPK_IP4(10, 0, 0, 2), 1);
	hnet_settle(net);
	hnet_advance(net, 61 * SEC);
	hnet_clear_cap(net);
	send_byte(net, 0, IPK_IP4(10, 0, 0, 2), 2);
	CHECK(is_arp(&net->cap[0], IPK_ARP_REQUEST));
	hnet_settle(net);
	CHECK_EQ(net->nodes[1]->udp_n, 2);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_arp_integrator_table_consulted_and_told(void)
{
	struct hnet *net = hnet_new(2, NULL);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];

	hnode_use_arp_table(a);
	ipk_udp_bind(b->ctx, ipk_htons(7));
	send_byte(net, 0, IPK_IP4(10, 0, 0, 2), 1);
	CHECK(is_arp(&net->cap[0], IPK_ARP_REQUEST));
	hnet_settle(net);
	CHECK_EQ(b->udp_n, 1);
	CHECK_EQ(a->learned_n, 1);
	CHECK_EQ(a->itab_n, 1);
	hnet_clear_cap(net);
	send_byte(net, 0, IPK_IP4(10, 0, 0, 2), 2); /* table answers now */
	CHECK_EQ(net->ncap, 1);
	CHECK(ipk_rd16(net->cap[0].b + 12) == IPK_ETHERTYPE_IP4);
	CHECK_EQ(ipk_arp_add_static(a->ctx, IPK_IP4(10, 0, 0, 3), a->cfg.mac), IPK_EINVAL);
	hnet_settle(net);
	CHECK_EQ(b->udp_n, 2);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

static void test_arp_broadcast_destination_needs_no_request(void)
{
	struct hnet *net = hnet_new(2, NULL);

	ipk_udp_bind(net->nodes[1]->ctx, ipk_htons(7));
	send_byte(net, 0, IPK_IP4(10, 0, 0, 255), 1);
	send_byte(net, 0, IPK_IP4(255, 255, 255, 255), 2);
	CHECK_EQ(net->ncap, 2);
	CHECK(memcmp(net->cap[0].b, bcast, 6) == 0);
	CHECK(memcmp(net->cap[1].b, bcast, 6) == 0);
	hnet_settle(net);
	CHECK_EQ(net->nodes[1]->udp_n, 2);
	CHECK_EQ(net->ncap, 2); /* no port unreachable or anything else */
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}


/* The next-hop cache (link.c) serves the previous frame's next hop without a table
 * lookup; it must follow a MAC move, an eviction and the entry's expiry at once. */
static void test_arp_next_hop_cache_follows_moves_and_expiry(void)
{
	struct hnet *net = hnet_new(2, NULL);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	const uint8_t moved[6] = {0x02, 0xbb, 0, 0, 0, 2};

	ipk_udp_bind(b->ctx, ipk_htons(7));
	send_byte(net, 0, IPK_IP4(10, 0, 0, 2), 1);
	hnet_settle(net);
	hnet_clear_cap(net);
	send_byte(net, 0, IPK_IP4(10, 0, 0, 2), 2); /* table lookup, fills the cache */
	send_byte(net, 0, IPK_IP4(10, 0, 0, 2), 3); /* from the cache */
	CHECK(ip_frame_to(net, 0, b->cfg.mac));
	CHECK(ip_frame_to(net, 1, b->cfg.mac));
	hnet_settle(net);
	CHECK_EQ(b->udp_n, 3);
	/* RFC 826 merge, once b leaves the probes unanswered (arp_challenge): the
	 * next frame goes to the new MAC, not the cached one. */
	net->cut = 1;
	inject_arp(a, IPK_ARP_REQUEST, moved, IPK_IP4(10, 0, 0, 2), bcast, IPK_IP4(10, 0, 0, 2));
	advance_secs(net, 4);
	hnet_clear_cap(net);
	send_byte(net, 0, IPK_IP4(10, 0, 0, 2), 4);
	send_byte(net, 0, IPK_IP4(10, 0, 0, 2), 5);
	CHECK(ip_frame_to(net, 0, moved));
	CHECK(ip_frame_to(net, 1, moved));
	/* Past the entry's life (no timer has run to clear it): resolve again. */
	net->now += 61 * SEC;
	hnet_clear_cap(net);
	send_byte(net, 0, IPK_IP4(10, 0, 0, 2), 6);
	CHECK_EQ(net->ncap, 1);
	CHECK(is_arp(&net->cap[0], IPK_ARP_REQUEST));
	advance_secs(net, 5);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* Issue 14 item 5: a request with sender MAC 00:00:00:00:00:00 was cached and cut
 * the peer off. Zero, broadcast and multicast sender MACs are dropped before any
 * learning or answer; so are martian sender IPs (the receive paths' source rule). */
static void test_arp_bad_sender_mac_or_ip_dropped(void)
{
	struct hnet *net = hnet_new(2, NULL);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	const uint8_t zero[6] = {0, 0, 0, 0, 0, 0}, mcast[6] = {0x01, 0, 0x5e, 0, 0, 1};
	const uint8_t peer[6] = {0x02, 0xaa, 0, 0, 0, 9};
	uint32_t us = IPK_IP4(10, 0, 0, 1), bip = IPK_IP4(10, 0, 0, 2);

	ipk_udp_bind(b->ctx, ipk_htons(7));
	send_byte(net, 0, bip, 1);
	hnet_settle(net);
	CHECK_EQ(b->udp_n, 1);
	net->cut = 1;
	hnet_clear_cap(net);
	inject_arp(a, IPK_ARP_REQUEST, zero, bip, bcast, us);
	inject_arp(a, IPK_ARP_REPLY, zero, bip, a->cfg.mac, us);
	inject_arp(a, IPK_ARP_REQUEST, bcast, bip, bcast, us);
	inject_arp(a, IPK_ARP_REQUEST, mcast, bip, bcast, us);
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_ARP_BAD_SENDER], 4);
	CHECK_EQ(net->ncap, 0); /* no reply, no probe */
	inject_arp(a, IPK_ARP_REQUEST, peer, IPK_IP4(240, 0, 0, 9), bcast, us);
	inject_arp(a, IPK_ARP_REQUEST, peer, IPK_IP4(127, 0, 0, 1), bcast, us);
	inject_arp(a, IPK_ARP_REQUEST, peer, IPK_IP4(10, 0, 0, 255), bcast, us);
	CHECK_EQ(ipk_counters(a->ctx)->drop[IPK_DROP_ARP_BAD_SENDER], 7);
	/* our own address from another MAC: a conflict, counted, not learned */
	inject_arp(a, IPK_ARP_REQUEST, peer, us, bcast, us);
	CHECK_EQ(ipk_counters(a->ctx)->arp_conflicts, 1);
	CHECK_EQ(net->ncap, 0);
	/* b's binding is intact: the next frame goes to b's MAC */
	send_byte(net, 0, bip, 2);
	CHECK_EQ(net->ncap, 1);
	CHECK(ip_frame_to(net, 0, b->cfg.mac));
	/* an RFC 5227 probe (sender 0.0.0.0) is answered but teaches nothing */
	hnet_clear_cap(net);
	inject_arp(a, IPK_ARP_REQUEST, peer, 0, bcast, us);
	CHECK_EQ(net->ncap, 1);
	CHECK(is_arp(&net->cap[0], IPK_ARP_REPLY));
	CHECK(memcmp(net->cap[0].b, peer, 6) == 0);
	advance_secs(net, 5);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* A unicast MAC claiming a resolved peer's address while the peer answers its
 * probes never takes over, however often it repeats the claim. */
static void test_arp_spoofed_claim_of_live_peer_never_wins(void)
{
	struct hnet *net = hnet_new(2, NULL);
	struct hnode *a = net->nodes[0], *b = net->nodes[1];
	const uint8_t evil[6] = {0x02, 0xee, 0, 0, 0, 2};
	uint32_t bip = IPK_IP4(10, 0, 0, 2);
	int k;

	ipk_udp_bind(b->ctx, ipk_htons(7));
	send_byte(net, 0, bip, 1);
	hnet_settle(net);
	for (k = 0; k < 20; k++) {
		inject_arp(a, k % 2 ? IPK_ARP_REPLY : IPK_ARP_REQUEST, evil, bip,
		           k % 2 ? a->cfg.mac : bcast, IPK_IP4(10, 0, 0, 1));
		hnet_settle(net);
		hnet_advance(net, SEC / 2);
		hnet_clear_cap(net);
		send_byte(net, 0, bip, 2);
		CHECK(ip_frame_to(net, 0, b->cfg.mac));
		hnet_settle(net);
	}
	CHECK_EQ(b->udp_n, 21);
	CHECK_EQ(ipk_counters(a->ctx)->arp_moves, 0);
	CHECK(ipk_counters(a->ctx)->arp_challenges > 0);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

/* The same class as issue 14 item 5 (a table a peer can fill): frames to many
 * addresses that never answer ARP (a SYN flood from spoofed on-link sources makes
 * one SYN-ACK for each) filled the table with PENDING entries, which nothing could
 * evict, after pushing out every RESOLVED one: no peer was reachable until they
 * timed out, and the flood renews them. PENDING entries now hold at most half the
 * table: a working binding stays, and a new peer still resolves. */
static void test_arp_unresolvable_flood_leaves_peers_reachable(void)
{
	struct hnet *net = hnet_new(3, NULL); /* arp_entries = 8 */
	struct hnode *a = net->nodes[0], *b = net->nodes[1], *c = net->nodes[2];
	int k, round;

	ipk_udp_bind(b->ctx, ipk_htons(7));
	ipk_udp_bind(c->ctx, ipk_htons(7));
	send_byte(net, 0, IPK_IP4(10, 0, 0, 2), 1);
	hnet_settle(net);
	CHECK_EQ(b->udp_n, 1);
	for (round = 0; round < 3; round++) {
		for (k = 0; k < 20; k++) /* nobody has these addresses */
			send_byte(net, 0, IPK_IP4(10, 0, 0, 100 + 20 * round + k), 9);
		hnet_settle(net);
		send_byte(net, 0, IPK_IP4(10, 0, 0, 2), 2);
		hnet_settle(net);
		CHECK_EQ(b->udp_n, 2u + (uint32_t)round);
		net->now += SEC / 4;
	}
	/* a peer a never talked to resolves in the middle of it */
	send_byte(net, 0, IPK_IP4(10, 0, 0, 3), 3);
	hnet_settle(net);
	CHECK_EQ(c->udp_n, 1);
	CHECK(ipk_counters(a->ctx)->drop[IPK_DROP_ARP_EVICTED] > 0);
	advance_secs(net, 5);
	CHECK(hnet_no_leaks(net));
	hnet_free(net);
}

int main(void)
{
	RUN(test_arp_queued_packets_sent_after_reply);
	RUN(test_arp_unanswered_requests_retry_then_drop_queue);
	RUN(test_arp_queue_full_drops_extra_packets);
	RUN(test_arp_request_for_us_gets_reply_and_entry);
	RUN(test_arp_malformed_counted);
	RUN(test_arp_gratuitous_updates_known_entry_only);
	RUN(test_arp_cache_full_evicts_oldest);
	RUN(test_arp_static_entry_never_expires_or_changes);
	RUN(test_arp_entry_expires_after_ttl);
	RUN(test_arp_integrator_table_consulted_and_told);
	RUN(test_arp_broadcast_destination_needs_no_request);
	RUN(test_arp_next_hop_cache_follows_moves_and_expiry);
	RUN(test_arp_bad_sender_mac_or_ip_dropped);
	RUN(test_arp_spoofed_claim_of_live_peer_never_wins);
	RUN(test_arp_unresolvable_flood_leaves_peers_reachable);
	return check_summary();
}
