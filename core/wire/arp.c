/* ARP for IPv4 over Ethernet (RFC 826). Other hardware/protocol pairs are refused. */
#include "wire/wire.h"

#define ARP_HTYPE_ETHER 1

int ipk_arp_parse(const uint8_t *p, uint32_t len, struct ipk_arp_hdr *h)
{
	int i;

	if (len < IPK_ARP_LEN)
		return IPK_WIRE_ESHORT;
	if (ipk_rd16(p) != ARP_HTYPE_ETHER || ipk_rd16(p + 2) != IPK_ETHERTYPE_IP4 ||
	    p[4] != 6 || p[5] != 4)
		return IPK_WIRE_EVERSION;
	h->op = ipk_rd16(p + 6);
	for (i = 0; i < 6; i++) {
		h->sha[i] = p[8 + i];
		h->tha[i] = p[18 + i];
	}
	h->spa_be = ipk_rdbe32(p + 14);
	h->tpa_be = ipk_rdbe32(p + 24);
	return IPK_ARP_LEN;
}

uint32_t ipk_arp_emit(uint8_t *p, uint32_t cap, const struct ipk_arp_hdr *h)
{
	int i;

	if (cap < IPK_ARP_LEN)
		return 0;
	ipk_wr16(p, ARP_HTYPE_ETHER);
	ipk_wr16(p + 2, IPK_ETHERTYPE_IP4);
	p[4] = 6;
	p[5] = 4;
	ipk_wr16(p + 6, h->op);
	for (i = 0; i < 6; i++) {
		p[8 + i] = h->sha[i];
		p[18 + i] = h->tha[i];
	}
	ipk_wrbe32(p + 14, h->spa_be);
	ipk_wrbe32(p + 24, h->tpa_be);
	return IPK_ARP_LEN;
}
