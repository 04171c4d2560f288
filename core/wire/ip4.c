/* IPv4 header (RFC 791 §3.1). */
#include "wire/wire.h"

int ipk_ip4_parse(const uint8_t *p, uint32_t len, struct ipk_ip4_hdr *h)
{
	uint32_t ihl, tot;

	if (len < IPK_IP4_HLEN)
		return IPK_WIRE_ESHORT;
	if ((p[0] >> 4) != 4)
		return IPK_WIRE_EVERSION;
	ihl = (uint32_t)(p[0] & 0x0f) * 4;
	tot = ipk_rd16(p + 2);
	/* RFC 791 §3.1: IHL counts 32-bit words and 5 is the minimum. */
	if (ihl < IPK_IP4_HLEN)
		return IPK_WIRE_ELEN;
	if (ihl > len)
		return IPK_WIRE_ESHORT;
	if (tot < ihl)
		return IPK_WIRE_ELEN;
	/* Trailing bytes past tot_len (Ethernet padding) are allowed; missing ones are not. */
	if (tot > len)
		return IPK_WIRE_ESHORT;
	h->ihl = (uint8_t)ihl;
	h->tos = p[1];
	h->tot_len = (uint16_t)tot;
	h->id = ipk_rd16(p + 4);
	h->frag = ipk_rd16(p + 6);
	h->ttl = p[8];
	h->proto = p[9];
	h->csum = ipk_rd16(p + 10);
	h->src_be = ipk_rdbe32(p + 12);
	h->dst_be = ipk_rdbe32(p + 16);
	return (int)ihl;
}

/* RFC 1071 §1: a header whose checksum field is right sums to all ones. The caller
 * passes the ihl that ipk_ip4_parse returned, so the bytes are known to be there. */
int ipk_ip4_csum_ok(const uint8_t *p, uint32_t ihl)
{
	int odd = 0;

	if (ihl < IPK_IP4_HLEN)
		return 0;
	if (ihl == IPK_IP4_HLEN)
		return ipk_csum_fold(ipk_csum_hdr20(p)) == 0;
	return ipk_csum_fold(ipk_csum_add(0, p, ihl, &odd)) == 0;
}

uint32_t ipk_ip4_emit(uint8_t *p, uint32_t cap, const struct ipk_ip4_hdr *h, int fill_csum)
{
	if (cap < IPK_IP4_HLEN)
		return 0;
	ipk_ip4_put(p, h, fill_csum);
	return IPK_IP4_HLEN;
}
