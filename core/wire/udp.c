/* UDP header (RFC 768). */
#include "wire/wire.h"

int ipk_udp_parse(const uint8_t *p, uint32_t len, struct ipk_udp_hdr *h)
{
	uint32_t ulen;

	if (len < IPK_UDP_HLEN)
		return IPK_WIRE_ESHORT;
	ulen = ipk_rd16(p + 4);
	/* RFC 768: the length counts the header, so anything below 8 is malformed. */
	if (ulen < IPK_UDP_HLEN)
		return IPK_WIRE_ELEN;
	if (ulen > len)
		return IPK_WIRE_ESHORT;
	h->sport_be = ipk_rdbe16(p);
	h->dport_be = ipk_rdbe16(p + 2);
	h->len = (uint16_t)ulen;
	h->csum = ipk_rd16(p + 6);
	return IPK_UDP_HLEN;
}

uint32_t ipk_udp_emit(uint8_t *p, uint32_t cap, const struct ipk_udp_hdr *h)
{
	if (cap < IPK_UDP_HLEN)
		return 0;
	ipk_wrbe16(p, h->sport_be);
	ipk_wrbe16(p + 2, h->dport_be);
	ipk_wr16(p + 4, h->len);
	ipk_wr16(p + 6, h->csum);
	return IPK_UDP_HLEN;
}
