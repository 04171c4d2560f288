/* IPv6 header (RFC 8200 §3), addresses (RFC 4291), and the extension-header walk
 * (RFC 8200 §4). */
#include "wire/wire.h"

int ipk_ip6_parse(const uint8_t *p, uint32_t len, struct ipk_ip6_hdr *h)
{
	uint32_t w0, plen;

	if (len < IPK_IP6_HLEN)
		return IPK_WIRE_ESHORT;
	w0 = ipk_rd32(p);
	if ((w0 >> 28) != 6)
		return IPK_WIRE_EVERSION;
	plen = ipk_rd16(p + 4);
	/* Trailing bytes past the payload length (Ethernet padding) are allowed. */
	if (plen > len - IPK_IP6_HLEN)
		return IPK_WIRE_ESHORT;
	h->tclass = (uint8_t)(w0 >> 20);
	h->flow = w0 & 0xfffffu;
	h->plen = (uint16_t)plen;
	h->next = p[6];
	h->hlim = p[7];
	__builtin_memcpy(h->src, p + 8, 16);
	__builtin_memcpy(h->dst, p + 24, 16);
	return IPK_IP6_HLEN;
}

uint32_t ipk_ip6_emit(uint8_t *p, uint32_t cap, const struct ipk_ip6_hdr *h)
{
	if (cap < IPK_IP6_HLEN)
		return 0;
	ipk_wr32(p, (6u << 28) | ((uint32_t)h->tclass << 20) | (h->flow & 0xfffffu));
	ipk_wr16(p + 4, h->plen);
	p[6] = h->next;
	p[7] = h->hlim;
	__builtin_memcpy(p + 8, h->src, 16);
	__builtin_memcpy(p + 24, h->dst, 16);
	return IPK_IP6_HLEN;
}

int ipk_ip6_is_unspecified(const uint8_t a[16])
{
	uint8_t o = 0;
	int i;

	for (i = 0; i < 16; i++)
		o |= a[i];
	return o == 0;
}

void ipk_ip6_solicited_node(uint8_t out[16], const uint8_t addr[16])
{
	int i;

	for (i = 0; i < 16; i++)
		out[i] = 0;
	out[0] = 0xff;
	out[1] = 0x02;
	out[11] = 0x01;
	out[12] = 0xff;
	out[13] = addr[13];
	out[14] = addr[14];
	out[15] = addr[15];
}

int ipk_ip6_is_solicited_node(const uint8_t a[16])
{
	static const uint8_t pfx[13] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff};
	int i;

	for (i = 0; i < 13; i++)
		if (a[i] != pfx[i])
			return 0;
	return 1;
}

void ipk_ip6_mcast_mac(uint8_t mac[6], const uint8_t group[16])
{
	mac[0] = 0x33;
	mac[1] = 0x33;
	__builtin_memcpy(mac + 2, group + 12, 4);
}

int ipk_ip6_is_ext(uint8_t next)
{
	return next == IPK_IPPROTO_HOPOPTS || next == IPK_IPPROTO_ROUTING ||
	       next == IPK_IPPROTO_FRAGMENT || next == IPK_IPPROTO_DSTOPTS;
}

/* RFC 8200 §4.2: the two high bits of an unknown option's type say what to do. */
static enum ipk_ip6_optact ip6_opt_unknown(uint8_t type)
{
	static const enum ipk_ip6_optact act[4] = {IPK_IP6_OPT_SKIP, IPK_IP6_OPT_DISCARD,
	                                           IPK_IP6_OPT_ICMP, IPK_IP6_OPT_ICMP_UCAST};
	return act[type >> 6];
}

enum ipk_ip6_optact ipk_ip6_opts_walk(const uint8_t *p, uint32_t len, uint32_t *bad_off,
                                      uint32_t *ra)
{
	uint32_t i = 2, pad = 0, olen;
	enum ipk_ip6_optact a;

	*ra = 0;
	*bad_off = 0;
	while (i < len) {
		*bad_off = i;
		if (p[i] == IPK_IP6OPT_PAD1) {
			if (++pad > IPK_IP6_MAX_PAD)
				return IPK_IP6_OPT_MALFORMED;
			i++;
			continue;
		}
		/* every other option has a length byte, and its data must fit */
		if (i + 2 > len || p[i + 1] > len - i - 2)
			return IPK_IP6_OPT_MALFORMED;
		olen = 2u + p[i + 1];
		if (p[i] == IPK_IP6OPT_PADN) {
			pad += olen;
			if (pad > IPK_IP6_MAX_PAD)
				return IPK_IP6_OPT_MALFORMED;
		} else {
			pad = 0;
			if (p[i] == IPK_IP6OPT_ROUTER_ALERT && olen == 4)
				*ra = ipk_rd16(p + i + 2) + 1u; /* RFC 2711 §2.1 */
			else if ((a = ip6_opt_unknown(p[i])) != IPK_IP6_OPT_SKIP)
				return a;
		}
		i += olen;
	}
	return IPK_IP6_OPT_SKIP;
}

/* A verdict that answers with a Parameter Problem (RFC 4443 §3.4) when `send`: RFC
 * 4443 §2.4(e) allows none to a multicast destination except for an unknown option
 * whose action bits are 10. */
static enum ipk_ip6x ip6x_param(struct ipk_ip6_ext *x, enum ipk_ip6x why, uint8_t code,
                                uint32_t ptr, int send)
{
	x->icmp = (uint8_t)(send != 0);
	x->icmp_code = code;
	x->icmp_ptr = ptr;
	return why;
}

/* An options header (hop-by-hop or destination options) at off, hlen bytes. */
static enum ipk_ip6x ip6x_opts(const uint8_t *pkt, uint32_t off, uint32_t hlen, int dst_mcast,
                               struct ipk_ip6_ext *x)
{
	uint32_t bad = 0, ra = 0;
	enum ipk_ip6_optact a = ipk_ip6_opts_walk(pkt + off, hlen, &bad, &ra);

	switch (a) {
	case IPK_IP6_OPT_SKIP:
		if (pkt[6] == IPK_IPPROTO_HOPOPTS && off == IPK_IP6_HLEN)
			x->ra = ra;
		return IPK_IP6X_OK;
	case IPK_IP6_OPT_MALFORMED:
		return IPK_IP6X_OPT_BAD;
	case IPK_IP6_OPT_DISCARD:
		return IPK_IP6X_OPT_UNKNOWN;
	case IPK_IP6_OPT_ICMP_UCAST:
		return ip6x_param(x, IPK_IP6X_OPT_UNKNOWN, 2, off + bad, !dst_mcast);
	case IPK_IP6_OPT_ICMP:
		break;
	}
	return ip6x_param(x, IPK_IP6X_OPT_UNKNOWN, 2, off + bad, 1);
}

/* RFC 8200 §4.4 and RFC 5095 §3. A host implements no routing type: with segments
 * left 0 the header is ignored, else the datagram is refused pointing at the type. */
static enum ipk_ip6x ip6x_rh(const uint8_t *pkt, uint32_t off, int dst_mcast,
                             struct ipk_ip6_ext *x)
{
	uint8_t type = pkt[off + 2], left = pkt[off + 3];

	if (!x->has_rh) {
		x->has_rh = 1;
		x->rh_type = type;
		x->rh_segleft = left;
	}
	if (type == 0)
		return ip6x_param(x, IPK_IP6X_RH0, 0, off + 2, left != 0 && !dst_mcast);
	if (left != 0)
		return ip6x_param(x, IPK_IP6X_RH_UNKNOWN, 0, off + 2, !dst_mcast);
	return IPK_IP6X_OK;
}

/* RFC 8200 §4.5: the fragment header at off; len is the datagram's length. */
static enum ipk_ip6x ip6x_frag(const uint8_t *pkt, uint32_t len, uint32_t off, int dst_mcast,
                               struct ipk_ip6_ext *x)
{
	uint16_t w = ipk_rd16(pkt + off + 2);
	uint32_t data = len - off - IPK_IP6_FRAG_HLEN, foff = w & 0xfff8u;

	if (foff == 0 && !(w & 1u)) {
		x->frag_atomic = 1; /* RFC 6946 §4: processed in isolation, as unfragmented */
		return IPK_IP6X_OK;
	}
	x->has_frag = 1;
	x->frag_more = (uint8_t)(w & 1u);
	x->frag_off = (uint16_t)foff;
	x->frag_hoff = (uint16_t)off;
	x->frag_id = ipk_rd32(pkt + off + 4);
	/* pointers: the payload length field, then the fragment offset field */
	if (x->frag_more && (data & 7u))
		return ip6x_param(x, IPK_IP6X_FRAG_LEN, 0, 4, !dst_mcast);
	if (foff + data > 65535u)
		return ip6x_param(x, IPK_IP6X_FRAG_SIZE, 0, off + 2, !dst_mcast);
	return IPK_IP6X_OK;
}

static void ip6x_clear(struct ipk_ip6_ext *x)
{
	x->proto = 0;
	x->nhdrs = 0;
	x->off = x->nh_off = 0;
	x->ra = 0;
	x->has_rh = x->rh_type = x->rh_segleft = 0;
	x->has_frag = x->frag_atomic = x->frag_more = 0;
	x->frag_off = x->frag_hoff = 0;
	x->frag_id = 0;
	x->icmp = x->icmp_code = 0;
	x->icmp_ptr = 0;
}

/* Length of the extension header `next` at off, 0 when it does not fit in len. */
static uint32_t ip6x_hlen(const uint8_t *pkt, uint32_t len, uint32_t off, uint8_t next)
{
	uint32_t hlen;

	if (len - off < 8) /* every extension header is at least 8 bytes */
		return 0;
	hlen = next == IPK_IPPROTO_FRAGMENT ? IPK_IP6_FRAG_HLEN : (pkt[off + 1] + 1u) * 8u;
	return hlen <= len - off ? hlen : 0;
}

/* One extension header's own checks; the walk goes on when it returns OK. */
static enum ipk_ip6x ip6x_one(const uint8_t *pkt, uint32_t len, uint32_t off, uint32_t hlen,
                              uint8_t next, int dst_mcast, struct ipk_ip6_ext *x)
{
	if (next == IPK_IPPROTO_ROUTING)
		return ip6x_rh(pkt, off, dst_mcast, x);
	if (next == IPK_IPPROTO_FRAGMENT)
		return ip6x_frag(pkt, len, off, dst_mcast, x);
	return ip6x_opts(pkt, off, hlen, dst_mcast, x);
}

enum ipk_ip6x ipk_ip6_ext_walk(const uint8_t *pkt, uint32_t len, uint8_t next, int dst_mcast,
                               struct ipk_ip6_ext *x)
{
	uint32_t off = IPK_IP6_HLEN, nh_off = 6, total = 0, hlen;
	enum ipk_ip6x v;

	ip6x_clear(x);
	if (len < IPK_IP6_HLEN)
		return IPK_IP6X_TRUNC;
	while (ipk_ip6_is_ext(next)) {
		/* RFC 8200 §4: a Next Header of 0 anywhere but in the IPv6 header is
		 * answered as an unrecognised one (code 1, pointing at it). */
		if (next == IPK_IPPROTO_HOPOPTS && off != IPK_IP6_HLEN)
			return ip6x_param(x, IPK_IP6X_HBH_NOT_FIRST, 1, nh_off, !dst_mcast);
		if (x->nhdrs >= IPK_IP6_EXT_MAX_COUNT)
			return IPK_IP6X_TOO_MANY;
		hlen = ip6x_hlen(pkt, len, off, next);
		if (hlen == 0)
			return IPK_IP6X_TRUNC;
		total += hlen;
		if (total > IPK_IP6_EXT_MAX_LEN)
			return IPK_IP6X_TOO_LONG;
		x->nhdrs++;
		v = ip6x_one(pkt, len, off, hlen, next, dst_mcast, x);
		if (v != IPK_IP6X_OK)
			return v;
		nh_off = off;
		next = pkt[off];
		off += hlen;
		if (x->has_frag) /* the rest is the fragment's data, reassembled first */
			break;
	}
	x->proto = next;
	x->off = (uint16_t)off;
	x->nh_off = (uint16_t)nh_off;
	return IPK_IP6X_OK;
}

uint32_t ipk_ip6_hbh_ra_emit(uint8_t *p, uint32_t cap, uint8_t next)
{
	if (cap < 8)
		return 0;
	p[0] = next;
	p[1] = 0;                       /* (0 + 1) * 8 bytes */
	p[2] = IPK_IP6OPT_ROUTER_ALERT; /* RFC 2711 §2.1: type 5, length 2, value 0 (MLD) */
	p[3] = 2;
	p[4] = 0;
	p[5] = 0;
	p[6] = IPK_IP6OPT_PADN; /* two bytes of padding: PadN of data length 0 */
	p[7] = 0;
	return 8;
}

uint32_t ipk_ip6_frag_emit(uint8_t *p, uint32_t cap, uint8_t next, uint32_t off_bytes,
                           int more, uint32_t id)
{
	if (cap < IPK_IP6_FRAG_HLEN || (off_bytes & 7u) || off_bytes > 0xfff8u)
		return 0;
	p[0] = next;
	p[1] = 0;
	ipk_wr16(p + 2, (uint16_t)(off_bytes | (more ? 1u : 0u)));
	ipk_wr32(p + 4, id);
	return IPK_IP6_FRAG_HLEN;
}
