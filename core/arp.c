/*
 * arp.c: ARP (RFC 826) for Ethernet/IPv4.
 *
 * Built-in cache of cfg.arp_entries entries. A PENDING entry holds a bounded queue of
 * frames waiting for the reply; requests are retried every arp_retry_ns, and after
 * arp_retries requests the queue is dropped (IPK_DROP_ARP_TIMEOUT). When the table is
 * full a new entry evicts the oldest RESOLVED one; STATIC entries are never evicted,
 * and PENDING ones hold at most half the table (past that a new one evicts the oldest
 * PENDING), so a scan or flood of unresolved addresses can neither push out every
 * working binding nor lock the table; a pending entry's life is bounded by
 * arp_retries * arp_retry_ns.
 * Hostile senders (arp_sender, arp_challenge): a sender MAC must be unicast and
 * non-zero, a sender IP must pass the receive paths' source rule, and one packet
 * cannot rebind a live RESOLVED entry: its MAC is probed first.
 *
 * With ops->arp_resolve the integrator owns the table: the cache slots then only hold
 * PENDING entries (queue + retries), freed once a binding for them is seen.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

static const uint8_t mac_bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
static const uint8_t mac_zero[6] = {0, 0, 0, 0, 0, 0};

static int integrator_owned(const struct ipk_ctx *c) { return IPK_OPS(c)->arp_resolve != NULL; }

static struct ipk_arp_entry *arp_find(struct ipk_ctx *c, uint32_t ip_be)
{
	uint32_t i;

	for (i = 0; i < c->cfg.arp_entries; i++)
		if (c->arp[i].state != IPK_ARP_FREE && c->arp[i].ip4_be == ip_be)
			return &c->arp[i];
	return NULL;
}

/* Of two PENDING entries, was a started first? (More requests sent, or as many
 * and its next retry due sooner.) */
static int arp_pending_older(const struct ipk_arp_entry *a, const struct ipk_arp_entry *b)
{
	return a->tries != b->tries ? a->tries > b->tries : a->expires < b->expires;
}

static void arp_drop_queue(struct ipk_ctx *c, struct ipk_arp_entry *e, enum ipk_drop why);

/*
 * A free slot, else a victim: the RESOLVED entry closest to expiry (the oldest).
 * For a new PENDING entry (for_pending), once PENDING entries hold half the table,
 * or nothing RESOLVED is left, the oldest PENDING one instead (its waiting frames
 * dropped as IPK_DROP_ARP_EVICTED): otherwise frames to many addresses that never
 * answer (a SYN flood from spoofed on-link sources: each SYN-ACK needs one) push
 * every working binding out and leave the table full of entries nothing can evict
 * for arp_retries * arp_retry_ns, cutting off every peer.
 */
static struct ipk_arp_entry *arp_slot(struct ipk_ctx *c, int for_pending)
{
	struct ipk_arp_entry *res = NULL, *pend = NULL, *victim;
	uint32_t i, npend = 0;

	for (i = 0; i < c->cfg.arp_entries; i++) {
		struct ipk_arp_entry *e = &c->arp[i];

		if (e->state == IPK_ARP_FREE)
			return e;
		if (e->state == IPK_ARP_RESOLVED && (!res || e->expires < res->expires))
			res = e;
		if (e->state == IPK_ARP_PENDING) {
			npend++;
			if (!pend || arp_pending_older(e, pend))
				pend = e;
		}
	}
	victim = res;
	if (for_pending && pend && (!res || npend >= IPK_MAX(c->cfg.arp_entries / 2u, 1u)))
		victim = pend;
	if (!victim)
		return NULL;
	if (victim->state == IPK_ARP_PENDING)
		arp_drop_queue(c, victim, IPK_DROP_ARP_EVICTED);
	ipk_memset(victim, 0, sizeof(*victim));
	ipk_link_nhc_clear(c);
	return victim;
}

static void arp_arm(struct ipk_ctx *c, uint64_t t)
{
	if (t < c->arp_deadline)
		c->arp_deadline = t;
}

/* Send an ARP packet on the wire; returns 0 or IPK_ENOBUFS. */
static int arp_send(struct ipk_ctx *c, uint16_t op, const uint8_t dst_mac[6],
                    const uint8_t tha[6], uint32_t tpa_be)
{
	struct ipk_arp_hdr a;
	void *pkt = ipk_pkt_alloc_ctl(c); /* control: without ARP no ACK leaves */

	if (!pkt) {
		ipk_drop(c, IPK_DROP_NO_PKT);
		return IPK_ENOBUFS;
	}
	a.op = op;
	ipk_memcpy(a.sha, c->cfg.mac, 6);
	a.spa_be = c->cfg.ip4_be;
	ipk_memcpy(a.tha, tha, 6);
	a.tpa_be = tpa_be;
	ipk_pkt_set_len(c, pkt, IPK_ETH_HLEN + IPK_ARP_LEN);
	ipk_arp_emit(ipk_pkt_data(c, pkt) + IPK_ETH_HLEN, IPK_ARP_LEN, &a);
	c->cnt.arp_tx++;
	ipk_link_eth_tx(c, pkt, dst_mac, IPK_ETHERTYPE_ARP);
	return 0;
}

/* Transmit every queued frame, in the order queued, to mac; frees the queue. */
static void arp_flush_queue(struct ipk_ctx *c, struct ipk_arp_entry *e, const uint8_t mac[6])
{
	struct ipk_pb *pb = e->q;

	e->q = NULL;
	e->qlen = 0;
	while (pb) {
		struct ipk_pb *next = pb->next;

		ipk_link_eth_tx(c, pb->pkt, mac, IPK_ETHERTYPE_IP4);
		ipk_pb_put(c, pb);
		pb = next;
	}
}

static void arp_drop_queue(struct ipk_ctx *c, struct ipk_arp_entry *e, enum ipk_drop why)
{
	struct ipk_pb *pb = e->q;

	e->q = NULL;
	e->qlen = 0;
	while (pb) {
		struct ipk_pb *next = pb->next;

		ipk_drop_pkt(c, pb->pkt, why);
		ipk_pb_put(c, pb);
		pb = next;
	}
}

/* Bind ip -> mac in entry e (built-in cache) and release its waiting frames. */
static void arp_bind(struct ipk_ctx *c, struct ipk_arp_entry *e, uint32_t ip_be,
                     const uint8_t mac[6])
{
	e->ip4_be = ip_be;
	ipk_memcpy(e->mac, mac, 6);
	ipk_link_nhc_clear(c);
	if (e->state != IPK_ARP_STATIC) {
		e->state = IPK_ARP_RESOLVED;
		e->expires = c->now + c->cfg.arp_ttl_ns;
		arp_arm(c, e->expires);
	}
	e->tries = 0;
	e->probing = 0;
	arp_flush_queue(c, e, mac);
}

/* A sender hardware address a binding may hold: unicast and not all zeros (RFC 826
 * gives no meaning to either; a zero or group MAC cached for a peer silently sends
 * its traffic nowhere, or everywhere). */
static int arp_mac_ok(const uint8_t mac[6])
{
	return (mac[0] & 1u) == 0 && ipk_memcmp(mac, mac_zero, 6) != 0;
}

/*
 * Is the sender one we may hear from? Returns -1 (yes), 0 (yes, but learn nothing:
 * an RFC 5227 probe from 0.0.0.0, or a sender off our link, whose binding no frame
 * of ours would ever use), or the drop reason. The sender IP passes the receive
 * paths' one source rule (internal.h ipk_ip4_src_check); our own address from
 * another MAC is an address conflict (RFC 5227 §2.4): counted, never learned.
 */
static int arp_sender(struct ipk_ctx *c, const struct ipk_arp_hdr *a)
{
	int why;

	if (!arp_mac_ok(a->sha))
		return IPK_DROP_ARP_BAD_SENDER;
	if (a->spa_be == 0)
		return 0;
	why = ipk_ip4_src_check(c, a->spa_be, 0);
	if (why == IPK_DROP_IP4_LAND) {
		c->cnt.arp_conflicts++;
		return IPK_DROP_ARP_BAD_SENDER;
	}
	if (why == IPK_DROP_IP4_BAD_SRC)
		return IPK_DROP_ARP_BAD_SENDER;
	if (why >= 0 || ipk_ip4_next_hop(c, a->spa_be) != a->spa_be)
		return 0;
	return -1;
}

/* Probe the MAC a challenged entry holds: an ARP request unicast to it (the
 * "unicast poll" of RFC 1122 §2.3.2.1, as Linux's NUD_PROBE does). */
static void arp_probe(struct ipk_ctx *c, struct ipk_arp_entry *e)
{
	e->probing++;
	e->probe_at = c->now + c->cfg.arp_retry_ns;
	arp_arm(c, e->probe_at);
	arp_send(c, IPK_ARP_REQUEST, e->mac, e->mac, e->ip4_be);
}

/*
 * Another MAC claims a live RESOLVED entry's address. Taking it on one packet's
 * word lets anyone on the link redirect a peer's traffic (or, with a zero MAC,
 * black-hole it). Instead the entry stays as it is and its MAC is probed: an
 * answer from it (arp_learn, same MAC) ends the challenge and keeps the binding;
 * arp_retries unanswered probes mean the host really moved (a replaced NIC, a
 * failover), and the entry takes the newest claimant (arp_timer). An attacker can
 * then only take an address whose owner is silent, and only after that delay.
 */
static void arp_challenge(struct ipk_ctx *c, struct ipk_arp_entry *e, const uint8_t sha[6])
{
	ipk_memcpy(e->cand_mac, sha, 6);
	if (e->probing)
		return;
	c->cnt.arp_challenges++;
	arp_probe(c, e);
}

/* Built-in table: a packet whose sender is e's address (mac sha). */
static void arp_merge(struct ipk_ctx *c, struct ipk_arp_entry *e, const struct ipk_arp_hdr *a)
{
	if (e->state == IPK_ARP_STATIC)
		return;
	if (e->state == IPK_ARP_RESOLVED && e->expires > c->now &&
	    ipk_memcmp(e->mac, a->sha, 6) != 0) {
		arp_challenge(c, e, a->sha);
		return;
	}
	arp_bind(c, e, a->spa_be, a->sha);
	if (IPK_OPS(c)->arp_learned)
		IPK_OPS(c)->arp_learned(a->spa_be, a->sha, IPK_OPQ(c));
}

/* RFC 826 "Packet Reception": merge into an existing entry from any ARP; add one only
 * when the packet is addressed to us. The sender has passed arp_sender. */
static void arp_learn(struct ipk_ctx *c, const struct ipk_arp_hdr *a, int for_us)
{
	struct ipk_arp_entry *e = arp_find(c, a->spa_be);

	if (integrator_owned(c)) {
		if (IPK_OPS(c)->arp_learned)
			IPK_OPS(c)->arp_learned(a->spa_be, a->sha, IPK_OPQ(c));
		if (e) {
			arp_flush_queue(c, e, a->sha);
			ipk_memset(e, 0, sizeof(*e));
			ipk_link_nhc_clear(c);
		}
		return;
	}
	if (!e && for_us)
		e = arp_slot(c, 0);
	if (e)
		arp_merge(c, e, a);
}

/* Takes ownership of pkt (always freed here). */
void ipk_arp_input(struct ipk_ctx *c, void *pkt, uint32_t off)
{
	struct ipk_arp_hdr a;
	uint32_t len = ipk_pkt_len(c, pkt);
	int for_us, sender;

	c->cnt.arp_rx++;
	if (off > len || ipk_arp_parse(ipk_pkt_data(c, pkt) + off, len - off, &a) < 0 ||
	    (a.op != IPK_ARP_REQUEST && a.op != IPK_ARP_REPLY)) {
		ipk_drop_pkt(c, pkt, IPK_DROP_ARP_MALFORMED);
		return;
	}
	sender = arp_sender(c, &a);
	if (sender > 0) {
		ipk_drop_pkt(c, pkt, (enum ipk_drop)sender);
		return;
	}
	ipk_pkt_free_chain(c, pkt);
	for_us = c->cfg.ip4_be != 0 && a.tpa_be == c->cfg.ip4_be;
	if (sender < 0)
		arp_learn(c, &a, for_us);
	/* RFC 826: answer requests for our address, unicast to the asker. An RFC 5227
	 * probe (sender 0.0.0.0) is answered too, defending our address. */
	if (for_us && a.op == IPK_ARP_REQUEST)
		arp_send(c, IPK_ARP_REPLY, a.sha, a.sha, a.spa_be);
}

/* A binding from the built-in table also becomes link.c's next-hop cache entry, for
 * as long as the entry lives (the integrator's table can change unseen: not cached). */
static int arp_lookup(struct ipk_ctx *c, uint32_t ip_be, uint8_t mac[6])
{
	struct ipk_arp_entry *e;

	if (integrator_owned(c))
		return IPK_OPS(c)->arp_resolve(ip_be, mac, IPK_OPQ(c));
	e = arp_find(c, ip_be);
	if (!e)
		return 0;
	if (e->state == IPK_ARP_STATIC ||
	    (e->state == IPK_ARP_RESOLVED && e->expires > c->now)) {
		ipk_memcpy(mac, e->mac, 6);
		ipk_link_nhc_set(c, ip_be, e->mac,
		                 e->state == IPK_ARP_STATIC ? IPK_NO_DEADLINE : e->expires);
		return 1;
	}
	return 0;
}

/* Find or start the PENDING entry for ip_be (evicting as arp_slot says); NULL only
 * when every entry is STATIC. */
static struct ipk_arp_entry *arp_pending(struct ipk_ctx *c, uint32_t ip_be)
{
	struct ipk_arp_entry *e = arp_find(c, ip_be);

	if (e && e->state == IPK_ARP_PENDING)
		return e;
	if (!e)
		e = arp_slot(c, 1);
	if (!e)
		return NULL;
	/* A new entry, or an expired RESOLVED one being revalidated. */
	ipk_memset(e, 0, sizeof(*e));
	ipk_link_nhc_clear(c);
	e->ip4_be = ip_be;
	e->state = IPK_ARP_PENDING;
	e->tries = 1;
	e->expires = c->now + c->cfg.arp_retry_ns;
	arp_arm(c, e->expires);
	arp_send(c, IPK_ARP_REQUEST, mac_bcast, mac_zero, ip_be);
	return e;
}

static int arp_enqueue(struct ipk_ctx *c, struct ipk_arp_entry *e, void *pkt, uint32_t nh)
{
	struct ipk_pb *pb, **tail;

	if (e->qlen >= c->cfg.arp_queue_per_entry) {
		ipk_drop_pkt(c, pkt, IPK_DROP_ARP_QUEUE_FULL);
		return IPK_EAGAIN;
	}
	pb = ipk_pb_get(c);
	if (!pb) {
		ipk_pkt_free_chain(c, pkt);
		return IPK_ENOMEM;
	}
	pb->pkt = pkt;
	pb->aux = nh;
	pb->t = c->now;
	/* Bounded by arp_queue_per_entry. */
	for (tail = &e->q; *tail; tail = &(*tail)->next)
		;
	*tail = pb;
	e->qlen++;
	return 0;
}

/* Takes ownership of pkt: sent now, queued, or freed (and counted) on error. */
IPK_HOT int ipk_arp_output(struct ipk_ctx *c, void *pkt, uint32_t next_hop_be)
{
	struct ipk_arp_entry *e;
	uint8_t mac[6];

	if (arp_lookup(c, next_hop_be, mac)) {
		ipk_link_eth_tx(c, pkt, mac, IPK_ETHERTYPE_IP4);
		return 0;
	}
	e = arp_pending(c, next_hop_be);
	if (!e) {
		ipk_drop_pkt(c, pkt, IPK_DROP_ARP_QUEUE_FULL);
		return IPK_EHOSTUNREACH;
	}
	return arp_enqueue(c, e, pkt, next_hop_be);
}

/* A PENDING entry whose retry time came: another request, or give up. */
static void arp_retry(struct ipk_ctx *c, struct ipk_arp_entry *e, uint64_t now)
{
	if (e->tries >= c->cfg.arp_retries) {
		arp_drop_queue(c, e, IPK_DROP_ARP_TIMEOUT);
		ipk_memset(e, 0, sizeof(*e));
		ipk_link_nhc_clear(c);
		return;
	}
	e->tries++;
	e->expires = now + c->cfg.arp_retry_ns;
	arp_send(c, IPK_ARP_REQUEST, mac_bcast, mac_zero, e->ip4_be);
}

/* A challenged entry's probe time came (arp_challenge): probe again, or, its MAC
 * silent through arp_retries probes, move to the claimant. */
static void arp_probe_due(struct ipk_ctx *c, struct ipk_arp_entry *e)
{
	uint8_t mac[6];

	if (e->probing < c->cfg.arp_retries) {
		arp_probe(c, e);
		return;
	}
	ipk_memcpy(mac, e->cand_mac, 6);
	c->cnt.arp_moves++;
	arp_bind(c, e, e->ip4_be, mac);
	if (IPK_OPS(c)->arp_learned)
		IPK_OPS(c)->arp_learned(e->ip4_be, mac, IPK_OPQ(c));
}

uint64_t ipk_arp_timer(struct ipk_ctx *c, uint64_t now)
{
	uint64_t next = IPK_NO_DEADLINE;
	uint32_t i;

	for (i = 0; i < c->cfg.arp_entries; i++) {
		struct ipk_arp_entry *e = &c->arp[i];

		if (e->state == IPK_ARP_PENDING && e->expires <= now)
			arp_retry(c, e, now);
		else if (e->state == IPK_ARP_RESOLVED && e->expires <= now) {
			ipk_memset(e, 0, sizeof(*e));
			ipk_link_nhc_clear(c);
		} else if (e->state == IPK_ARP_RESOLVED && e->probing && e->probe_at <= now)
			arp_probe_due(c, e);
		if ((e->state == IPK_ARP_PENDING || e->state == IPK_ARP_RESOLVED) &&
		    e->expires < next)
			next = e->expires;
		if (e->state == IPK_ARP_RESOLVED && e->probing && e->probe_at < next)
			next = e->probe_at;
	}
	return next;
}

int ipk_arp_announce(struct ipk_ctx *ctx, uint64_t now)
{
	int rc;

	if (!ctx || ctx->cfg.link != IPK_LINK_ETH || ctx->cfg.ip4_be == 0)
		return IPK_EINVAL;
	now = ipk_clock(ctx, now);
	/* RFC 5227 §2.3: an ARP Request with sender and target both our address. */
	rc = arp_send(ctx, IPK_ARP_REQUEST, mac_bcast, mac_zero, ctx->cfg.ip4_be);
	ipk_link_flush(ctx);
	return rc;
}

int ipk_arp_add_static(struct ipk_ctx *ctx, uint32_t ip4_be, const uint8_t mac[6])
{
	struct ipk_arp_entry *e;

	if (!ctx || !mac || ip4_be == 0 || (mac[0] & 1u) != 0 || integrator_owned(ctx))
		return IPK_EINVAL;
	e = arp_find(ctx, ip4_be);
	if (!e)
		e = arp_slot(ctx, 0);
	if (!e)
		return IPK_ENOMEM;
	e->state = IPK_ARP_STATIC;
	e->expires = 0;
	arp_bind(ctx, e, ip4_be, mac);
	ipk_link_flush(ctx);
	return 0;
}
