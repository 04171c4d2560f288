/*
 * frag6.c: IPv6 fragment reassembly (RFC 8200 §4.5) with bounded memory: at most
 * IPK_REASM6_SLOTS datagrams of IPK_REASM6_PIECES fragments each, 60 s to complete;
 * overlapping fragments drop the whole datagram (RFC 5722); the first fragment must
 * hold the whole header chain (RFC 7112); atomic fragments never come here (the
 * walk skips them, RFC 6946). The datagram goes up as a packet chain.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

static void frag6_free(struct ipk_ctx *c, struct ipk_reasm6 *r, enum ipk_drop why)
{
	while (r->pieces) {
		struct ipk_pb *pb = r->pieces;

		r->pieces = pb->next;
		ipk_drop_pkt(c, pb->pkt, why);
		ipk_pb_put(c, pb);
	}
	ipk_memset(r, 0, sizeof(*r));
}

/* The datagram's slot: (src, dst, id) as §4.5 says; a new one takes a free slot,
 * else the one closest to its timeout gives way (counted). */
static struct ipk_reasm6 *frag6_slot(struct ipk_ctx *c, const struct ipk_rx6 *rx, uint32_t id)
{
	struct ipk_reasm6 *r, *old = NULL;
	int i;

	for (i = 0; i < IPK_REASM6_SLOTS; i++) {
		r = &c->ip6.reasm[i];
		if (r->used && r->id == id && ipk_memcmp(r->src, rx->ip.src, 16) == 0 &&
		    ipk_memcmp(r->dst, rx->ip.dst, 16) == 0)
			return r;
	}
	for (i = 0; i < IPK_REASM6_SLOTS; i++) {
		r = &c->ip6.reasm[i];
		if (!r->used) {
			old = r;
			break;
		}
		if (!old || r->expires < old->expires)
			old = r;
	}
	if (old->used)
		frag6_free(c, old, IPK_DROP_FRAG_EVICTED);
	ipk_memcpy(old->src, rx->ip.src, 16);
	ipk_memcpy(old->dst, rx->ip.dst, 16);
	old->id = id;
	old->used = 1;
	old->expires = c->now + IPK_REASM6_TIMEOUT_NS;
	ipk_ip6_arm(c, old->expires);
	return old;
}

static void frag6_time_exceeded(struct ipk_ctx *c, struct ipk_pb *first)
{
	struct ipk_rx6 rx;
	const uint8_t *p = ipk_pkt_data(c, first->pkt) + c->l2_len;

	ipk_memset(&rx, 0, sizeof(rx));
	if (ipk_ip6_parse(p, ipk_pkt_len(c, first->pkt) - c->l2_len, &rx.ip) < 0)
		return;
	rx.l3_off = c->l2_len;
	rx.dst_mcast = (uint8_t)ipk_ip6_is_multicast(rx.ip.dst);
	ipk_icmp6_send_error(c, first->pkt, &rx, IPK_ICMP6_TIME_EXCEEDED, 1, 0, 0);
}

/* RFC 5722: a fragment overlapping another discards the whole datagram. Returns
 * the link to insert at (sorted by offset), or NULL on overlap. */
static struct ipk_pb **frag6_place(struct ipk_reasm6 *r, uint32_t off, uint32_t len)
{
	struct ipk_pb **at = &r->pieces;

	for (; *at; at = &(*at)->next) {
		struct ipk_pb *p = *at;

		if (off < p->seq + p->len && p->seq < off + len)
			return NULL;
		if (p->seq > off)
			break;
	}
	return at;
}

/* The pieces as one chain: each packet cut to its data, the first keeping its
 * headers in front (rx->l4_off points past them). */
static void *frag6_chain(struct ipk_ctx *c, struct ipk_reasm6 *r, struct ipk_rx6 *rx)
{
	struct ipk_pb *pb = r->pieces, *next;
	void *head = pb->pkt;

	rx->l4_off = pb->off;
	for (; pb; pb = next) {
		uint32_t plen = ipk_pkt_len(c, pb->pkt);

		next = pb->next;
		if (pb != r->pieces)
			ipk_pkt_adj_head(c, pb->pkt, pb->off);
		ipk_pkt_trim_tail(c, pb->pkt, plen - pb->off - pb->len);
		if (pb != r->pieces)
			ipk_pkt_chain_append(c, head, pb->pkt);
		ipk_pb_put(c, pb);
	}
	r->pieces = NULL;
	return head;
}

/* RFC 7112 §5: the first fragment carries the upper-layer header whole (ports, type):
 * else Parameter Problem code 3. Fragments whose next header is another extension
 * header (destination options after the fragment header) are not reassembled. */
static int frag6_first_ok(uint8_t proto, uint32_t len)
{
	uint32_t need = proto == IPK_IPPROTO_TCP ? 20u : 8u;

	return !ipk_ip6_is_ext(proto) && len >= need;
}

/* Every piece is in: no holes (have == total and no overlaps), none past the end. */
static void frag6_done(struct ipk_ctx *c, struct ipk_reasm6 *r, struct ipk_rx6 *rx)
{
	struct ipk_pb *last = r->pieces;
	uint8_t proto = r->proto;
	void *head;

	while (last->next)
		last = last->next;
	if (r->have != r->total || last->seq + last->len != r->total || r->pieces->seq != 0) {
		frag6_free(c, r, IPK_DROP_FRAG_OVERLAP);
		return;
	}
	rx->l4_len = r->total;
	rx->chained = 1;
	head = frag6_chain(c, r, rx);
	ipk_memset(r, 0, sizeof(*r));
	c->cnt.ip6_reassembled++;
	ipk_ip6_deliver(c, head, rx, proto, IPK_IP6_HLEN);
}

/* RFC 8200 §4.5: 60 s after the first fragment the datagram is dropped, with a
 * Time Exceeded (code 1) when the first fragment had come. */
uint64_t ipk_frag6_timer(struct ipk_ctx *c, uint64_t now)
{
	uint64_t next = IPK_NO_DEADLINE;
	int i;

	for (i = 0; i < IPK_REASM6_SLOTS; i++) {
		struct ipk_reasm6 *r = &c->ip6.reasm[i];

		if (!r->used)
			continue;
		if (r->expires > now) {
			next = IPK_MIN(next, r->expires);
			continue;
		}
		if (r->pieces && r->pieces->seq == 0)
			frag6_time_exceeded(c, r->pieces);
		frag6_free(c, r, IPK_DROP_FRAG_TIMEOUT);
	}
	return next;
}

void ipk_frag6_input(struct ipk_ctx *c, void *pkt, struct ipk_rx6 *rx, const struct ipk_ip6_ext *x)
{
	uint32_t len = IPK_IP6_HLEN + rx->ip.plen - x->off;
	struct ipk_reasm6 *r;
	struct ipk_pb **at, *pb;

	c->cnt.ip6_frags_rx++;
	if (x->frag_off == 0 && !frag6_first_ok(x->proto, len)) {
		ipk_icmp6_send_error(c, pkt, rx, IPK_ICMP6_PARAM_PROB, 3, 0, 0);
		ipk_drop_pkt(c, pkt, IPK_DROP_IP6_FRAG);
		return;
	}
	if (len == 0) { /* no data (as Linux's end == offset): it fills nothing, and a
	                 * zero-length piece would sort beside the one at its offset */
		ipk_drop_pkt(c, pkt, IPK_DROP_IP6_MALFORMED);
		return;
	}
	r = frag6_slot(c, rx, x->frag_id);
	at = frag6_place(r, x->frag_off, len);
	if (!at || (r->total && x->frag_off + len > r->total) || (!x->frag_more && r->total)) {
		frag6_free(c, r, IPK_DROP_FRAG_OVERLAP);
		ipk_drop_pkt(c, pkt, IPK_DROP_FRAG_OVERLAP);
		return;
	}
	if (r->npieces >= IPK_REASM6_PIECES || (pb = ipk_pb_get(c)) == NULL) {
		frag6_free(c, r, IPK_DROP_FRAG_TOO_BIG);
		ipk_drop_pkt(c, pkt, IPK_DROP_FRAG_TOO_BIG);
		return;
	}
	pb->pkt = pkt;
	pb->off = rx->l3_off + x->off;
	pb->len = len;
	pb->seq = x->frag_off;
	pb->next = *at;
	*at = pb;
	r->npieces++;
	r->have += len;
	if (x->frag_off == 0)
		r->proto = x->proto;
	if (!x->frag_more)
		r->total = x->frag_off + len;
	if (r->total == 0 || r->have < r->total)
		return;
	frag6_done(c, r, rx);
}
