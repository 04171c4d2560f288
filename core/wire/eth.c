/* Ethernet II header (IEEE 802.3 clause 3.2.6 type interpretation). */
#include "wire/wire.h"

int ipk_eth_parse(const uint8_t *p, uint32_t len, struct ipk_eth_hdr *h)
{
	int i;

	if (len < IPK_ETH_HLEN)
		return IPK_WIRE_ESHORT;
	for (i = 0; i < 6; i++) {
		h->dst[i] = p[i];
		h->src[i] = p[6 + i];
	}
	h->type = ipk_rd16(p + 12);
	return IPK_ETH_HLEN;
}

uint32_t ipk_eth_emit(uint8_t *p, uint32_t cap, const struct ipk_eth_hdr *h)
{
	int i;

	if (cap < IPK_ETH_HLEN)
		return 0;
	for (i = 0; i < 6; i++) {
		p[i] = h->dst[i];
		p[6 + i] = h->src[i];
	}
	ipk_wr16(p + 12, h->type);
	return IPK_ETH_HLEN;
}
