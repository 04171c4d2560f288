/* ICMPv6 (RFC 4443): the 8-byte header, error messages with their quote of the
 * invoking packet, and the flow found in such a quote. */
#include "wire/wire.h"

static int icmp6_is_echo(uint8_t type)
{
	return type == IPK_ICMP6_ECHO_REQUEST || type == IPK_ICMP6_ECHO_REPLY;
}

int ipk_icmp6_parse(const uint8_t *p, uint32_t len, struct ipk_icmp6_hdr *h)
{
	if (len < IPK_ICMP6_HLEN)
		return IPK_WIRE_ESHORT;
	h->type = p[0];
	h->code = p[1];
	h->csum = ipk_rd16(p + 2);
	h->id = ipk_rd16(p + 4);
	h->seq = ipk_rd16(p + 6);
	h->param = ipk_rd32(p + 4);
	return IPK_ICMP6_HLEN;
}

uint32_t ipk_icmp6_emit(uint8_t *p, uint32_t cap, const struct ipk_icmp6_hdr *h)
{
	if (cap < IPK_ICMP6_HLEN)
		return 0;
	p[0] = h->type;
	p[1] = h->code;
	ipk_wr16(p + 2, h->csum);
	if (icmp6_is_echo(h->type)) {
		ipk_wr16(p + 4, h->id);
		ipk_wr16(p + 6, h->seq);
	} else {
		ipk_wr32(p + 4, h->param);
	}
	return IPK_ICMP6_HLEN;
}

void ipk_icmp6_csum_fill(uint8_t *p, uint32_t len, const uint8_t src[16], const uint8_t dst[16])
{
	/* RFC 4443 §2.3: over the pseudo-header (next header 58) and the message. */
	ipk_wr16(p + 2, 0);
	ipk_wr16(p + 2, ipk_csum_l4_6(src, dst, IPK_IPPROTO_ICMP6, p, len));
}

uint32_t ipk_icmp6_error_emit(uint8_t *p, uint32_t cap, const struct ipk_icmp6_hdr *h,
                              const uint8_t *inv, uint32_t inv_len, const uint8_t src[16],
                              const uint8_t dst[16])
{
	uint32_t q = inv_len;

	if (cap < IPK_ICMP6_HLEN || !ipk_icmp6_is_error(h->type))
		return 0;
	/* RFC 4443 §2.4(c): as much of the invoking packet as fits in 1280 bytes. */
	if (q > IPK_ICMP6_ERR_QUOTE_MAX)
		q = IPK_ICMP6_ERR_QUOTE_MAX;
	if (q > cap - IPK_ICMP6_HLEN)
		q = cap - IPK_ICMP6_HLEN;
	ipk_icmp6_emit(p, cap, h);
	if (q)
		__builtin_memmove(p + IPK_ICMP6_HLEN, inv, q);
	ipk_icmp6_csum_fill(p, IPK_ICMP6_HLEN + q, src, dst);
	return IPK_ICMP6_HLEN + q;
}

/* The upper-layer fields of the quote at off that lie before its end. */
static void icmp6_quote_l4(const uint8_t *p, uint32_t len, struct ipk_icmp6_quote *q)
{
	uint32_t off = q->off;

	if (q->proto == IPK_IPPROTO_TCP || q->proto == IPK_IPPROTO_UDP) {
		if (len - off >= 4) {
			q->has_ports = 1;
			q->sport_be = ipk_rdbe16(p + off);
			q->dport_be = ipk_rdbe16(p + off + 2);
		}
		if (q->proto == IPK_IPPROTO_TCP && len - off >= 8) {
			q->has_seq = 1;
			q->seq = ipk_rd32(p + off + 4);
		}
	} else if (q->proto == IPK_IPPROTO_ICMP6 && len - off >= 8 && icmp6_is_echo(p[off])) {
		q->has_echo = 1;
		q->echo_id = ipk_rd16(p + off + 4);
		q->echo_seq = ipk_rd16(p + off + 6);
	}
}

/* Steps over the quote's extension headers that are wholly present; 0 when the
 * upper layer is reached, -1 when the quote is cut or a later fragment hides it. */
static int icmp6_quote_walk(const uint8_t *p, uint32_t len, struct ipk_icmp6_quote *q)
{
	uint32_t off = IPK_IP6_HLEN, n, hlen;
	uint8_t next = p[6];

	for (n = 0; n < IPK_IP6_EXT_MAX_COUNT && ipk_ip6_is_ext(next); n++) {
		if (len - off < 8)
			break;
		if (next == IPK_IPPROTO_FRAGMENT) {
			hlen = IPK_IP6_FRAG_HLEN;
			if (ipk_rd16(p + off + 2) & 0xfff8u) /* not the first: no ports */
				break;
		} else {
			hlen = (p[off + 1] + 1u) * 8u;
		}
		if (hlen > len - off)
			break;
		next = p[off];
		off += hlen;
	}
	q->proto = next;
	q->off = (uint16_t)off;
	return ipk_ip6_is_ext(next) ? -1 : 0;
}

int ipk_icmp6_quote_parse(const uint8_t *p, uint32_t len, struct ipk_icmp6_quote *q)
{
	if (len < IPK_IP6_HLEN)
		return IPK_WIRE_ESHORT;
	if ((p[0] >> 4) != 6)
		return IPK_WIRE_EVERSION;
	__builtin_memcpy(q->src, p + 8, 16);
	__builtin_memcpy(q->dst, p + 24, 16);
	q->has_ports = q->has_seq = q->has_echo = 0;
	q->sport_be = q->dport_be = 0;
	q->seq = 0;
	q->echo_id = q->echo_seq = 0;
	if (icmp6_quote_walk(p, len, q) == 0)
		icmp6_quote_l4(p, len, q);
	return IPK_IP6_HLEN;
}
