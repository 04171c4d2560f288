/* ICMPv4 header (RFC 792): type, code, checksum and one 32-bit word whose meaning
 * depends on the type. */
#include "wire/wire.h"

static int icmp_is_echo(uint8_t type)
{
	return type == IPK_ICMP_ECHO || type == IPK_ICMP_ECHO_REPLY;
}

int ipk_icmp_parse(const uint8_t *p, uint32_t len, struct ipk_icmp_hdr *h)
{
	if (len < IPK_ICMP_HLEN)
		return IPK_WIRE_ESHORT;
	h->type = p[0];
	h->code = p[1];
	h->csum = ipk_rd16(p + 2);
	h->rest = ipk_rd32(p + 4);
	h->id = ipk_rd16(p + 4);
	h->seq = ipk_rd16(p + 6);
	/* RFC 1191 §4: next-hop MTU is the low 16 bits of the second word. */
	h->mtu = ipk_rd16(p + 6);
	return IPK_ICMP_HLEN;
}

/* Bytes 4..7 come from id/seq for echo and echo reply, from mtu (high half zero,
 * RFC 1191 §4) for "fragmentation needed", and from rest for every other type. */
uint32_t ipk_icmp_emit(uint8_t *p, uint32_t cap, const struct ipk_icmp_hdr *h)
{
	if (cap < IPK_ICMP_HLEN)
		return 0;
	p[0] = h->type;
	p[1] = h->code;
	ipk_wr16(p + 2, h->csum);
	if (icmp_is_echo(h->type)) {
		ipk_wr16(p + 4, h->id);
		ipk_wr16(p + 6, h->seq);
	} else if (h->type == IPK_ICMP_UNREACH && h->code == IPK_ICMP_UNREACH_NEEDFRAG) {
		ipk_wr16(p + 4, 0);
		ipk_wr16(p + 6, h->mtu);
	} else {
		ipk_wr32(p + 4, h->rest);
	}
	return IPK_ICMP_HLEN;
}
