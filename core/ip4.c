/*
 * ip4.c: IPv4 input validation and dispatch, output (header, routing, offload
 * marks), and fragment reassembly.
 *
 * Reassembly (RFC 791 §3.2, with RFC 815's idea of tracking what is still missing by
 * keeping pieces sorted): up to cfg.frag_slots datagrams at once, keyed by
 * (src, dst, id, proto). Pieces are kept whole, as pb entries sorted by offset.
 * Overlap policy, as RFC 5722 mandates for IPv6: an exact duplicate of a piece we
 * hold is ignored; any other overlap discards the whole datagram, because
 * overlapping fragments are only ever seen in attacks (IDS evasion, RFC 1858) and
 * there is no safe way to choose which bytes to trust.
 * Pressure (frag_make_room): one source holds at most half the slots, and a full
 * table evicts the datagram that received nothing for longest, so unfinished
 * datagrams cannot hold reassembly hostage for the whole timeout.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#define IP4_MAX_TOTAL 65535u
#define IPOPT_EOL 0
#define IPOPT_NOP 1
#define IPOPT_LSRR 131
#define IPOPT_SSRR 137

/* --------------------------------------------------------------- addresses */

/* RFC 1122 §3.3.6: our subnet has a directed broadcast address (all-ones host part,
 * and the obsolete all-zeros form) unless RFC 3021's /31 or /32 applies, or no
 * address or mask is configured. A property of the configuration: ipk_ctx_init
 * keeps it in ctx->ip4_has_bcast. */
int ipk_ip4_subnet_has_bcast(const struct ipk_config *cfg)
{
	return cfg->ip4_be != 0 && cfg->netmask_be != 0 && ipk_ntohl(~cfg->netmask_be) >= 3u;
}

int ipk_ip4_is_bcast(const struct ipk_ctx *c, uint32_t ip_be)
{
	return ipk_ip4_bcast_in(c, ip_be);
}

int ipk_ip4_is_local(const struct ipk_ctx *c, uint32_t ip_be)
{
	if (!c)
		return 0;
	return (c->cfg.ip4_be != 0 && ip_be == c->cfg.ip4_be) || ipk_ip4_is_bcast(c, ip_be);
}


/* ------------------------------------------------------------------ input */

/* Walk the options (RFC 791 §3.1). Returns 0 to go on, else the drop reason. */
static int ip4_options(const uint8_t *p, uint32_t len)
{
	uint32_t i = 0;

	while (i < len) {
		uint8_t type = p[i];
		uint32_t olen;

		if (type == IPOPT_EOL)
			return 0;
		if (type == IPOPT_NOP) {
			i++;
			continue;
		}
		if (i + 1 >= len || p[i + 1] < 2 || p[i + 1] > len - i)
			return IPK_DROP_IP4_MALFORMED;
		olen = p[i + 1];
		/* RFC 7126 §4.3/4.4: loose and strict source routes are dropped. */
		if (type == IPOPT_LSRR || type == IPOPT_SSRR)
			return IPK_DROP_IP4_OPTIONS;
		i += olen;
	}
	return 0;
}

/* Header checksum: the NIC's verdict when it gives one, else software. Also reports
 * whether the NIC vouched for the transport checksum. */
static IPK_ALWAYS_INLINE int ip4_csum_verdict(struct ipk_ctx *c, void *pkt, const uint8_t *ip, uint32_t ihl,
                            uint8_t *l4_ok)
{
	uint32_t v = 0;

	/* No receive offload declared: the 20-byte header summed inline (RFC 1071). */
	if (!(c->cfg.caps & (IPK_CAP_RX_CSUM_IP4 | IPK_CAP_RX_CSUM_L4))) {
		*l4_ok = 0;
		if (ihl == IPK_IP4_HLEN)
			return ipk_csum_fold(ipk_csum_hdr20(ip)) == 0;
		return ipk_ip4_csum_ok(ip, ihl);
	}
	if (IPK_OPS(c)->rx_csum)
		v = IPK_OPS(c)->rx_csum(pkt, IPK_OPQ(c));
	*l4_ok = (c->cfg.caps & IPK_CAP_RX_CSUM_L4) && (v & IPK_RXCSUM_L4_GOOD) &&
	         !(v & IPK_RXCSUM_L4_BAD);
	if (c->cfg.caps & IPK_CAP_RX_CSUM_IP4) {
		if (v & IPK_RXCSUM_IP4_BAD)
			return 0;
		if (v & IPK_RXCSUM_IP4_GOOD)
			return 1;
	}
	return ipk_ip4_csum_ok(ip, ihl);
}

/* A chain of at most pkt_buf_size bytes as one flat packet (the chain is freed). */
static void *ip4_linearize(struct ipk_ctx *c, void *pkt, uint32_t total)
{
	void *flat = ipk_pkt_alloc(c);

	if (!flat) {
		ipk_drop_pkt(c, pkt, IPK_DROP_NO_PKT);
		return NULL;
	}
	ipk_pkt_copy(c, pkt, 0, ipk_pkt_data(c, flat), total);
	ipk_pkt_set_len(c, flat, total);
	ipk_pkt_free_chain(c, pkt);
	return flat;
}

/* core.h rx_peek (ICMP and UDP here; ARP in link.c, TCP in tcp_in.c): before the
 * layer above reads the datagram (a static ops table without the op compiles this
 * away). */
static inline void ip4_peek(struct ipk_ctx *c, void *pkt)
{
	if (IPK_OPS(c)->rx_peek)
		IPK_OPS(c)->rx_peek(c, pkt, IPK_OPQ(c));
}

/* Hand a complete datagram to its transport (which takes ownership). */
static void ip4_dispatch(struct ipk_ctx *c, void *pkt, const struct ipk_rx *rx)
{
	/* UDP and TCP read chains (TCP delivers a chained segment to the application
	 * piece by piece, tcp_in.c). ICMP gets a reassembled datagram flat when it fits
	 * one buffer (errors are parsed in place), else as the chain (an echo request
	 * of up to 65,507 bytes is answered from it: icmp4.c). */
	if (rx->reassembled && rx->proto == IPK_IPPROTO_ICMP) {
		uint32_t total = ipk_pkt_chain_len(c, pkt);

		if (total <= c->cfg.pkt_buf_size) {
			pkt = ip4_linearize(c, pkt, total);
			if (!pkt)
				return;
		}
	}
	switch (rx->proto) {
	case IPK_IPPROTO_ICMP:
		ip4_peek(c, pkt);
		ipk_icmp_input(c, pkt, rx);
		return;
	case IPK_IPPROTO_UDP:
		ip4_peek(c, pkt);
		ipk_udp_input(c, pkt, rx);
		return;
	case IPK_IPPROTO_TCP:
		ipk_tcp_input(c, pkt, rx);
		return;
	default:
		/* RFC 1122 §3.2.2.1: protocol unreachable, never for broadcasts. */
		if (!rx->is_bcast)
			ipk_icmp_send_error(c, pkt, rx->l3_off, IPK_ICMP_UNREACH, 2);
		ipk_drop_pkt(c, pkt, IPK_DROP_IP4_PROTO);
	}
}

static void ip4_frag_input(struct ipk_ctx *c, void *pkt, const struct ipk_ip4_hdr *h,
                           const struct ipk_rx *rx);

/* Parse and length checks of a received chain (IPK_CAP_LRO, see ipk_run): the
 * IPv4 header must sit whole in the first packet, and the chain must hold exactly
 * tot_len bytes after it. A NIC that coalesces never pads; a chain longer or
 * shorter than the datagram it claims to carry is malformed, whatever the cause. */
static int ip4_chain_ok(struct ipk_ctx *c, void *pkt, uint32_t off, struct ipk_ip4_hdr *h)
{
	uint32_t first = ipk_pkt_len(c, pkt), total = ipk_pkt_chain_len(c, pkt);

	/* The parse reads the fixed header from the first packet: it must be there. */
	if (first < IPK_IP4_HLEN || off > first - IPK_IP4_HLEN ||
	    ipk_ip4_parse(ipk_pkt_data(c, pkt) + off, total - off, h) < 0)
		return 0;
	return off + h->ihl <= first && total - off == h->tot_len;
}

/* Validate a datagram whose header is at `off`; returns the drop reason or -1. */
static int ip4_check(struct ipk_ctx *c, void *pkt, uint32_t off, struct ipk_ip4_hdr *h,
                     struct ipk_rx *rx)
{
	uint8_t *p = ipk_pkt_data(c, pkt);
	uint32_t len = ipk_pkt_len(c, pkt);
	int opt, src;

	/* A chain (IPK_CAP_LRO): the parse sees its length (tot_len may pass the first
	 * packet), the header itself must be in the first packet (ip4_chain_ok). */
	if (ipk_pkt_chain_next(c, pkt)) {
		rx->chained = 1;
		if (!ip4_chain_ok(c, pkt, off, h))
			return IPK_DROP_IP4_MALFORMED;
		len = h->tot_len + off;
	} else if (off > len || ipk_ip4_parse(p + off, len - off, h) < 0) {
		return IPK_DROP_IP4_MALFORMED;
	}
	/* Ethernet pads short frames to 60 bytes: the datagram ends at tot_len. */
	if (len - off > h->tot_len)
		ipk_pkt_trim_tail(c, pkt, len - off - h->tot_len);
	if (!ip4_csum_verdict(c, pkt, p + off, h->ihl, &rx->l4_csum_ok))
		return IPK_DROP_IP4_CSUM;
	rx->is_bcast = (uint8_t)ipk_ip4_bcast_in(c, h->dst_be);
	if (!rx->is_bcast && (c->cfg.ip4_be == 0 || h->dst_be != c->cfg.ip4_be))
		return IPK_DROP_NOT_FOR_US; /* ipk_ip4_is_local, with the broadcast test once */
	src = ipk_ip4_src_check(c, h->src_be, rx->is_bcast && h->proto == IPK_IPPROTO_UDP);
	if (src >= 0)
		return src;
	opt = ip4_options(p + off + IPK_IP4_HLEN, (uint32_t)h->ihl - IPK_IP4_HLEN);
	if (opt)
		return opt;
	return -1;
}

static void ip4_rx_fill(struct ipk_rx *rx, const struct ipk_ip4_hdr *h, uint32_t off)
{
	rx->src_be = h->src_be;
	rx->dst_be = h->dst_be;
	rx->l3_off = off;
	rx->l4_off = off + h->ihl;
	rx->l4_len = (uint32_t)h->tot_len - h->ihl;
	rx->proto = h->proto;
	rx->tos = h->tos;
	rx->ttl = h->ttl;
}

/*
 * The datagram almost every frame carries: one flat packet accepted by
 * ipk_ip4_fast_accept (the predicate ipk_tcp_rx_one shares), header checksum
 * right. Returns 0 with nothing changed (no side effect, no count) for anything
 * else: ip4_check then judges it with every rule and counts.
 */
static int ip4_input_fast(struct ipk_ctx *c, void *pkt, uint32_t off)
{
	uint32_t len = ipk_pkt_len(c, pkt);
	const uint8_t *p = ipk_pkt_data(c, pkt) + off;
	struct ipk_ip4_hdr h;
	struct ipk_rx rx;

	if (off > len || ipk_pkt_chain_next(c, pkt))
		return 0;
	h.tot_len = (uint16_t)ipk_ip4_fast_accept(c, p, len - off);
	if (h.tot_len == 0 || !ip4_csum_verdict(c, pkt, p, IPK_IP4_HLEN, &rx.l4_csum_ok))
		return 0;
	h.ihl = IPK_IP4_HLEN;
	h.proto = p[9];
	h.src_be = ipk_rdbe32(p + 12);
	h.dst_be = ipk_rdbe32(p + 16);
	h.tos = p[1];
	h.ttl = p[8];
	/* Ethernet pads short frames to 60 bytes: the datagram ends at tot_len. */
	if (len - off > h.tot_len)
		ipk_pkt_trim_tail(c, pkt, len - off - h.tot_len);
	ip4_rx_fill(&rx, &h, off);
	/* every other field as ipk_ip4_input's memset leaves it: a flat unicast
	 * datagram, not reassembled */
	rx.is_bcast = rx.reassembled = rx.chained = 0;
	if (h.proto == IPK_IPPROTO_TCP)
		ipk_tcp_input(c, pkt, &rx);
	else
		ip4_dispatch(c, pkt, &rx);
	return 1;
}

/* Takes ownership of pkt. The IPv4 header is at `off`. */
IPK_HOT void ipk_ip4_input(struct ipk_ctx *c, void *pkt, uint32_t off)
{
	struct ipk_ip4_hdr h;
	struct ipk_rx rx;
	int why;

	if (ip4_input_fast(c, pkt, off))
		return;
	ipk_memset(&rx, 0, sizeof(rx));
	why = ip4_check(c, pkt, off, &h, &rx);
	if (why >= 0) {
		ipk_drop_pkt(c, pkt, (enum ipk_drop)why);
		return;
	}
	ip4_rx_fill(&rx, &h, off);
	/* A received chain (IPK_CAP_LRO) is accepted as one whole TCP segment only: a
	 * coalescing NIC makes nothing else, and reassembly keeps pieces flat. */
	if (rx.chained &&
	    (h.proto != IPK_IPPROTO_TCP || (h.frag & (IPK_IP4_MF | IPK_IP4_OFFMASK)))) {
		ipk_drop_pkt(c, pkt, IPK_DROP_CHAIN);
		return;
	}
	if (h.frag & (IPK_IP4_MF | IPK_IP4_OFFMASK)) {
		rx.l4_csum_ok = 0; /* a NIC verdict on one fragment says nothing */
		ip4_frag_input(c, pkt, &h, &rx);
		return;
	}
	ip4_dispatch(c, pkt, &rx);
}

/* ------------------------------------------------------------ reassembly */

static void frag_free_slot(struct ipk_ctx *c, struct ipk_frag *f, int count_as)
{
	struct ipk_pb *pb = f->pieces;

	while (pb) {
		struct ipk_pb *next = pb->next;

		c->rmem_pkts -= pb->xmit; /* frag_store's charge */
		if (count_as >= 0)
			ipk_drop_pkt(c, pb->pkt, (enum ipk_drop)count_as);
		else
			ipk_pkt_free_chain(c, pb->pkt);
		ipk_pb_put(c, pb);
		pb = next;
	}
	ipk_memset(f, 0, sizeof(*f));
}

/* The slot that has received nothing for longest, among all (src_be 0) or one
 * source's; NULL when none is used. */
static struct ipk_frag *frag_stalest(struct ipk_ctx *c, uint32_t src_be)
{
	struct ipk_frag *v = NULL;
	uint32_t i;

	for (i = 0; i < c->cfg.frag_slots; i++) {
		struct ipk_frag *f = &c->frags[i];

		if (f->used && (src_be == 0 || f->src_be == src_be) && (!v || f->touched < v->touched))
			v = f;
	}
	return v;
}

/*
 * Room for a new datagram from src_be, which holds n_src slots already; NULL when
 * none can be made. Unfinished datagrams must not hold reassembly hostage for the
 * whole timeout (RFC 791's 15 s, our 30 s; issue 14 item 2: eight first fragments
 * blocked all of it). One source holds at most half the slots: past that its own
 * stalest datagram makes room. A full table evicts the datagram that received
 * nothing for longest: a flood of first fragments that never continue is evicted
 * before a datagram whose pieces keep arriving, from any source.
 */
static struct ipk_frag *frag_make_room(struct ipk_ctx *c, uint32_t src_be, uint32_t n_src)
{
	uint32_t per_src = IPK_MAX(c->cfg.frag_slots / 2u, 1u);
	struct ipk_frag *v = frag_stalest(c, n_src >= per_src ? src_be : 0);

	if (v)
		frag_free_slot(c, v, IPK_DROP_FRAG_EVICTED);
	return v;
}

static struct ipk_frag *frag_slot(struct ipk_ctx *c, const struct ipk_ip4_hdr *h)
{
	struct ipk_frag *free_slot = NULL;
	uint32_t i, n_src = 0;

	for (i = 0; i < c->cfg.frag_slots; i++) {
		struct ipk_frag *f = &c->frags[i];

		if (!f->used) {
			if (!free_slot)
				free_slot = f;
			continue;
		}
		if (f->src_be == h->src_be && f->dst_be == h->dst_be && f->id == h->id &&
		    f->proto == h->proto)
			return f;
		n_src += f->src_be == h->src_be;
	}
	if (!free_slot || n_src >= IPK_MAX(c->cfg.frag_slots / 2u, 1u))
		free_slot = frag_make_room(c, h->src_be, n_src);
	if (!free_slot)
		return NULL;
	free_slot->used = 1;
	free_slot->src_be = h->src_be;
	free_slot->dst_be = h->dst_be;
	free_slot->id = h->id;
	free_slot->proto = h->proto;
	free_slot->touched = c->frag_tick;
	free_slot->expires = c->now + c->cfg.frag_timeout_ns;
	if (free_slot->expires < c->frag_deadline)
		c->frag_deadline = free_slot->expires;
	return free_slot;
}

/* Where a piece [start, end) goes in the sorted list. Returns 1 (insert at *at),
 * 0 (exact duplicate) or -1 (overlap). */
static int frag_place(struct ipk_frag *f, uint32_t start, uint32_t end, struct ipk_pb ***at)
{
	struct ipk_pb **pp = &f->pieces;

	while (*pp && (*pp)->seq + (*pp)->len <= start)
		pp = &(*pp)->next;
	*at = pp;
	if (!*pp || end <= (*pp)->seq)
		return 1;
	if ((*pp)->seq == start && (*pp)->seq + (*pp)->len == end)
		return 0;
	return -1;
}

/* Does the new piece contradict what the slot knows of the datagram's end? */
static int frag_bad_end(const struct ipk_frag *f, uint32_t end, int last)
{
	const struct ipk_pb *pb;

	if (f->total && (end > f->total || (last && end != f->total)))
		return 1;
	if (last)
		for (pb = f->pieces; pb; pb = pb->next)
			if (pb->seq + pb->len > end)
				return 1;
	return 0;
}

static void frag_complete(struct ipk_ctx *c, struct ipk_frag *f);

/* Decide what to do with a fragment; returns the drop reason for the whole
 * datagram, IPK_DROP__COUNT to drop only this fragment silently, or -1 to keep it. */
static int frag_admit(struct ipk_ctx *c, struct ipk_frag *f, uint32_t start, uint32_t end,
                      int last, struct ipk_pb ***at)
{
	int place;

	if (end > c->cfg.frag_max_bytes)
		return IPK_DROP_FRAG_TOO_BIG;
	if (frag_bad_end(f, end, last))
		return IPK_DROP_FRAG_OVERLAP;
	place = frag_place(f, start, end, at);
	if (place == 0)
		return IPK_DROP__COUNT;
	if (place < 0)
		return IPK_DROP_FRAG_OVERLAP;
	if (f->npieces >= c->cfg.frag_max_pieces)
		return IPK_DROP_FRAG_TOO_BIG;
	return -1;
}

/* Held fragments count in the receive-memory budget that TCP's out-of-order data
 * uses (cfg.rmem_max, tcp_mem.c): over it, other datagrams are evicted, the one
 * that received nothing for longest first. One datagram alone may pass it (it is
 * bounded by frag_max_pieces and frag_max_bytes), so a budget smaller than the
 * largest datagram does not forbid it; 0 when TCP holds the budget and f none. */
static int frag_mem_room(struct ipk_ctx *c, const struct ipk_frag *f, uint32_t need)
{
	while (!ipk_rmem_ctx_fits(c, need)) {
		struct ipk_frag *v = NULL;
		uint32_t i;

		for (i = 0; i < c->cfg.frag_slots; i++) {
			struct ipk_frag *o = &c->frags[i];

			if (o->used && o != f && o->pieces && (!v || o->touched < v->touched))
				v = o;
		}
		if (!v)
			return f->pieces != NULL;
		frag_free_slot(c, v, IPK_DROP_FRAG_EVICTED);
	}
	return 1;
}

static void frag_store(struct ipk_ctx *c, struct ipk_frag *f, void *pkt, struct ipk_pb **at,
                       const struct ipk_rx *rx, uint32_t start, int last)
{
	uint32_t units = ipk_rmem_units(c, pkt);
	struct ipk_pb *pb;

	if (!frag_mem_room(c, f, units)) {
		ipk_drop_pkt(c, pkt, IPK_DROP_FRAG_NOMEM);
		frag_free_slot(c, f, IPK_DROP_FRAG_NOMEM);
		return;
	}
	pb = ipk_pb_get(c);
	if (!pb) {
		ipk_pkt_free_chain(c, pkt); /* counted as IPK_DROP_NO_PB */
		return;
	}
	pb->xmit = units;
	c->rmem_pkts += units;
	pb->pkt = pkt;
	pb->seq = start;
	pb->off = rx->l4_off;
	pb->len = rx->l4_len;
	pb->aux = rx->l3_off;
	pb->t = c->now;
	pb->next = *at;
	*at = pb;
	f->touched = ++c->frag_tick;
	f->npieces++;
	f->have += rx->l4_len;
	if (last)
		f->total = start + rx->l4_len;
	if (f->total && f->have == f->total)
		frag_complete(c, f);
}

/* Takes ownership of pkt (one fragment; rx describes it). */
static void ip4_frag_input(struct ipk_ctx *c, void *pkt, const struct ipk_ip4_hdr *h,
                           const struct ipk_rx *rx)
{
	uint32_t start = (uint32_t)(h->frag & IPK_IP4_OFFMASK) * 8u, end = start + rx->l4_len;
	int last = !(h->frag & IPK_IP4_MF), why;
	struct ipk_pb **at;
	struct ipk_frag *f;

	c->cnt.ip4_frags_rx++;
	/* RFC 791: every fragment but the last carries a multiple of 8 bytes. */
	if (rx->l4_len == 0 || (!last && (rx->l4_len & 7u) != 0)) {
		ipk_drop_pkt(c, pkt, IPK_DROP_IP4_MALFORMED);
		return;
	}
	if (end + h->ihl > IP4_MAX_TOTAL) {
		ipk_drop_pkt(c, pkt, IPK_DROP_FRAG_TOO_BIG);
		return;
	}
	f = frag_slot(c, h);
	if (!f) {
		ipk_drop_pkt(c, pkt, IPK_DROP_FRAG_NOMEM);
		return;
	}
	why = frag_admit(c, f, start, end, last, &at);
	if (why == IPK_DROP__COUNT) {
		ipk_pkt_free_chain(c, pkt);
	} else if (why >= 0) {
		ipk_drop_pkt(c, pkt, (enum ipk_drop)why);
		frag_free_slot(c, f, why);
	} else {
		frag_store(c, f, pkt, at, rx, start, last);
	}
}

/* Make the first fragment's header describe the whole datagram, so that an ICMP
 * error quoting it (port unreachable) shows the real datagram. */
static void frag_fix_header(struct ipk_ctx *c, void *pkt, uint32_t l3_off, uint32_t total)
{
	uint8_t *ip = ipk_pkt_data(c, pkt) + l3_off;
	uint32_t ihl = (uint32_t)(ip[0] & 0x0fu) * 4u;
	int odd = 0;

	ipk_wr16(ip + 2, (uint16_t)(ihl + total));
	ipk_wr16(ip + 6, 0);
	ipk_wr16(ip + 10, 0);
	ipk_wr16(ip + 10, ipk_csum_fold(ipk_csum_add(0, ip, ihl, &odd)));
}

/* All bytes are here: one chain, first fragment (headers intact) then each other
 * fragment trimmed to its payload. */
static void frag_complete(struct ipk_ctx *c, struct ipk_frag *f)
{
	struct ipk_pb *first = f->pieces, *pb;
	struct ipk_rx rx;
	const uint8_t *ip;
	void *head = first->pkt;

	ipk_memset(&rx, 0, sizeof(rx));
	rx.l3_off = first->aux;
	rx.l4_off = first->off;
	if ((rx.l4_off - rx.l3_off) + f->total > IP4_MAX_TOTAL) {
		frag_free_slot(c, f, IPK_DROP_FRAG_TOO_BIG);
		return;
	}
	for (pb = first->next; pb; pb = pb->next) {
		ipk_pkt_adj_head(c, pb->pkt, pb->off);
		ipk_pkt_chain_append(c, head, pb->pkt);
	}
	for (pb = first; pb;) {
		struct ipk_pb *next = pb->next;
		c->rmem_pkts -= pb->xmit; /* handed on: no longer held */
		ipk_pb_put(c, pb);
		pb = next;
	}
	frag_fix_header(c, head, rx.l3_off, f->total);
	ip = ipk_pkt_data(c, head) + rx.l3_off;
	rx.src_be = f->src_be;
	rx.dst_be = f->dst_be;
	rx.proto = f->proto;
	rx.tos = ip[1];
	rx.ttl = ip[8];
	rx.l4_len = f->total;
	rx.is_bcast = (uint8_t)ipk_ip4_is_bcast(c, f->dst_be);
	rx.reassembled = 1;
	rx.chained = 1;
	ipk_memset(f, 0, sizeof(*f));
	c->cnt.ip4_reassembled++;
	ip4_dispatch(c, head, &rx);
}

/* RFC 792 / RFC 1122 §3.3.2: on timeout, time exceeded (code 1) if the first fragment
 * arrived; every held fragment is freed and counted. */
uint64_t ipk_ip4_frag_timer(struct ipk_ctx *c, uint64_t now)
{
	uint64_t next = IPK_NO_DEADLINE;
	uint32_t i;

	for (i = 0; i < c->cfg.frag_slots; i++) {
		struct ipk_frag *f = &c->frags[i];

		if (!f->used)
			continue;
		if (f->expires > now) {
			next = IPK_MIN(next, f->expires);
			continue;
		}
		if (f->pieces && f->pieces->seq == 0)
			ipk_icmp_send_error(c, f->pieces->pkt, f->pieces->aux,
			                    IPK_ICMP_TIME_EXCEEDED, 1);
		frag_free_slot(c, f, IPK_DROP_FRAG_TIMEOUT);
	}
	return next;
}

/* ----------------------------------------------------------------- output */

static void *ip4_alloc_done(struct ipk_ctx *c, void *pkt)
{
	if (!pkt) {
		ipk_drop(c, IPK_DROP_NO_PKT);
		return NULL;
	}
	ipk_pkt_set_len(c, pkt, 0);
	return pkt;
}

void *ipk_ip4_alloc(struct ipk_ctx *c)
{
	return ip4_alloc_done(c, ipk_pkt_alloc(c));
}

/* For control packets (ops->pkt_alloc_ctl): ACKs, RSTs, ICMP errors. */
void *ipk_ip4_alloc_ctl(struct ipk_ctx *c)
{
	return ip4_alloc_done(c, ipk_pkt_alloc_ctl(c));
}

/* Write the 20-byte header at l2_len; checksum by the NIC when it offers. `frag` is
 * the flags + fragment offset field (DF for every datagram sent whole). */
static inline void ip4_fill(struct ipk_ctx *c, void *pkt, uint32_t dst_be, uint8_t proto,
                            uint32_t l4_len, uint16_t id, uint16_t frag,
                            struct ipk_tx_meta *meta)
{
	struct ipk_ip4_hdr h;
	int hw = (c->cfg.caps & IPK_CAP_TX_CSUM_IP4) != 0;

	h.ihl = IPK_IP4_HLEN;
	h.csum = 0;
	h.tot_len = (uint16_t)(IPK_IP4_HLEN + l4_len);
	h.id = id;
	h.frag = frag;
	h.ttl = c->cfg.ttl;
	h.tos = meta->tos;
	h.proto = proto;
	h.src_be = c->cfg.ip4_be;
	h.dst_be = dst_be;
	ipk_ip4_put(ipk_pkt_data(c, pkt) + c->l2_len, &h, !hw);
	if (hw)
		meta->flags |= IPK_TXOFF_IP4_CSUM;
	meta->l2_len = (uint16_t)c->l2_len;
	meta->l3_len = IPK_IP4_HLEN;
}

/* ----------------------------------------------------------- fragmentation
 *
 * RFC 791 §3.2 / RFC 1122 §3.3.3: a datagram longer than the link MTU goes as
 * fragments. Each carries a multiple of 8 payload bytes but the last, MF on all
 * but the last, its offset in 8-byte units, and one ID for the whole datagram.
 * The fragments are all built before the first is sent, so a pool that runs dry
 * halfway sends nothing. With IPK_CAP_SG a fragment is a fresh header packet
 * followed by clones of the source's packets trimmed to its range (no payload
 * copy); without it, one copy into a flat packet.
 */

/* One fragment's packets, appended after *tail: header room, then l4 bytes
 * [off, off + n) of src (whose l4 bytes start at ipk_l4_off). Returns the
 * fragment's first packet, NULL when the pool is dry. */
static void *frag_build(struct ipk_ctx *c, void *src, uint32_t off, uint32_t n, void **tail)
{
	uint32_t hl = ipk_l4_off(c);
	void *f = ipk_pkt_alloc(c), *last;

	if (!f)
		return NULL;
	if (*tail)
		ipk_pkt_chain_append(c, *tail, f);
	*tail = f;
	if (!(c->cfg.caps & IPK_CAP_SG)) {
		ipk_pkt_set_len(c, f, hl + n);
		ipk_pkt_copy(c, src, hl + off, ipk_pkt_data(c, f) + hl, n);
		return f;
	}
	ipk_pkt_set_len(c, f, hl);
	/* on failure *tail stays f: frag_build_all frees from the first fragment */
	last = f;
	if (ipk_pkt_slice(c, &last, src, hl + off, n) != IPK_OK)
		return NULL;
	*tail = last;
	return f;
}

/* Payload bytes per fragment but the last: what fits the MTU, rounded down to 8. */
static uint32_t frag_unit(const struct ipk_ctx *c)
{
	return ((uint32_t)c->cfg.mtu - IPK_IP4_HLEN) & ~7u;
}

/* Build every fragment of the datagram in src as one chain (fragment after
 * fragment); NULL (nothing left allocated) when the pool runs dry. */
static void *frag_build_all(struct ipk_ctx *c, void *src, uint32_t l4_len)
{
	uint32_t unit = frag_unit(c), off;
	void *head = NULL, *tail = NULL;

	for (off = 0; off < l4_len; off += unit) {
		void *f = frag_build(c, src, off, IPK_MIN(unit, l4_len - off), &tail);

		if (!head)
			head = f ? f : tail;
		if (!f) {
			if (head)
				ipk_pkt_free_chain(c, head);
			ipk_drop(c, IPK_DROP_NO_PKT);
			return NULL;
		}
	}
	return head;
}

/* Detach the first `len` bytes' packets of the chain at pkt (a fragment ends on a
 * packet boundary by construction) and return the rest. */
static void *frag_split(struct ipk_ctx *c, void *pkt, uint32_t len)
{
	uint32_t sum = ipk_pkt_len(c, pkt);

	while (sum < len) {
		pkt = ipk_pkt_chain_next(c, pkt);
		sum += ipk_pkt_len(c, pkt);
	}
	return ipk_pkt_chain_cut(c, pkt);
}

/* Header, offload marks and link output of each fragment of the chain `all`. */
static int frag_send_all(struct ipk_ctx *c, void *all, uint32_t dst_be, uint32_t nh,
                         uint8_t proto, uint32_t l4_len, uint8_t tos)
{
	uint32_t unit = frag_unit(c), off;
	/* RFC 6864 §4.2: the ID matters only for fragmented datagrams; they draw from
	 * their own counter, so unfragmented traffic does not wrap it. */
	uint16_t id = c->ip_frag_id++;
	int rc = 0;

	c->cnt.ip4_fragmented++;
	for (off = 0; off < l4_len && all; off += unit) {
		uint32_t n = IPK_MIN(unit, l4_len - off);
		uint16_t frag = (uint16_t)(off / 8u);
		struct ipk_tx_meta meta;
		void *next = frag_split(c, all, ipk_l4_off(c) + n);
		int r;

		if (off + n < l4_len)
			frag |= IPK_IP4_MF;
		ipk_memset(&meta, 0, sizeof(meta));
		meta.tos = tos;
		ip4_fill(c, all, dst_be, proto, n, id, frag, &meta);
		if (meta.flags && IPK_OPS(c)->tx_offload)
			IPK_OPS(c)->tx_offload(all, &meta, IPK_OPQ(c));
		c->cnt.ip4_frags_tx++;
		r = ipk_link_output_ip4(c, all, nh);
		if (r < 0 && rc == 0)
			rc = r;
		all = next;
	}
	return rc;
}

int ipk_ip4_output_frags(struct ipk_ctx *c, void *pkt, uint32_t dst_be, uint8_t proto,
                         uint32_t l4_len, uint8_t tos)
{
	uint32_t nh;
	void *all;

	if (IPK_IP4_HLEN + l4_len > IP4_MAX_TOTAL)
		return IPK_EMSGSIZE;
	nh = ipk_ip4_next_hop(c, dst_be);
	if (nh == 0)
		return IPK_EHOSTUNREACH;
	all = frag_build_all(c, pkt, l4_len);
	if (!all)
		return IPK_ENOBUFS;
	/* The fragments hold their own references (clones) or copies. */
	ipk_pkt_free_chain(c, pkt);
	return frag_send_all(c, all, dst_be, nh, proto, l4_len, tos);
}

/* Takes ownership of pkt (a chain allowed): transmitted, queued for ARP, or freed
 * and counted on error. A datagram above the MTU (no TSO) goes as fragments. */
IPK_HOT int ipk_ip4_output(struct ipk_ctx *c, void *pkt, uint32_t dst_be, uint8_t proto,
                   uint32_t l4_len, struct ipk_tx_meta *meta)
{
	struct ipk_tx_meta local;
	uint32_t nh, tot = IPK_IP4_HLEN + l4_len;

	if (!meta) {
		ipk_memset(&local, 0, sizeof(local));
		meta = &local;
	}
	if (ipk_pkt_len(c, pkt) < c->l2_len + IPK_IP4_HLEN) {
		ipk_pkt_free_chain(c, pkt);
		return IPK_EMSGSIZE;
	}
	/* The one compare on the TCP path: segments fit the MSS (or go to TSO). */
	if (tot > c->cfg.mtu && !(meta->flags & IPK_TXOFF_TSO)) {
		int rc = meta->flags ? IPK_EMSGSIZE : /* a checksum offload cannot span fragments */
		         ipk_ip4_output_frags(c, pkt, dst_be, proto, l4_len, meta->tos);

		if (rc == IPK_EMSGSIZE || rc == IPK_ENOBUFS || rc == IPK_EHOSTUNREACH)
			ipk_pkt_free_chain(c, pkt);
		return rc;
	}
	if (tot > IP4_MAX_TOTAL) {
		ipk_pkt_free_chain(c, pkt);
		return IPK_EMSGSIZE;
	}
	nh = ipk_ip4_next_hop(c, dst_be);
	if (nh == 0) {
		ipk_drop_pkt(c, pkt, IPK_DROP_NO_ROUTE);
		return IPK_EHOSTUNREACH;
	}
	ip4_fill(c, pkt, dst_be, proto, l4_len, c->ip_id++, IPK_IP4_DF, meta);
	if (meta->flags && IPK_OPS(c)->tx_offload)
		IPK_OPS(c)->tx_offload(pkt, meta, IPK_OPQ(c));
	return ipk_link_output_ip4(c, pkt, nh);
}
