/*
 * link.c: framing in and out. Ethernet II (RFC 894) or raw IPv4 (TUN-style, no link
 * header and no ARP).
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

static const uint8_t eth_bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

/* Frames we accept: to our MAC or to broadcast. Multicast groups are not joined.
 * The destination compared in place (a word and a half-word), not copied out. */
static int eth_for_us(const struct ipk_ctx *c, const uint8_t *dst)
{
	return ipk_memcmp(dst, c->cfg.mac, 6) == 0 || ipk_memcmp(dst, eth_bcast, 6) == 0;
}

/* An IPv6 multicast frame (33:33:xx, RFC 2464 §7) while IPv6 is on: ip6.c then
 * keeps only the groups we are in (all-nodes, our solicited-node groups). Asked
 * only for frames not to our MAC or broadcast, off the IPv4 path. */
static int eth_ip6_mcast(const struct ipk_ctx *c, const uint8_t *dst)
{
	return c->cfg.ip6_enable && dst[0] == 0x33 && dst[1] == 0x33;
}

/* Takes ownership of pkt: passes it on or frees it. The Ethernet II header (RFC 894)
 * is read in place: destination, then type; the source is not needed here. */
IPK_HOT void ipk_link_input(struct ipk_ctx *c, void *pkt)
{
	const uint8_t *p;
	uint16_t type;

	if (c->cfg.link == IPK_LINK_RAWIP) {
		ipk_ip4_input(c, pkt, 0);
		return;
	}
	if (ipk_pkt_len(c, pkt) < IPK_ETH_HLEN) {
		ipk_drop_pkt(c, pkt, IPK_DROP_RUNT);
		return;
	}
	p = ipk_pkt_data(c, pkt);
	if (!eth_for_us(c, p) && !eth_ip6_mcast(c, p)) {
		ipk_drop_pkt(c, pkt, IPK_DROP_NOT_FOR_US);
		return;
	}
	type = ipk_rd16(p + 12);
	/* 802.1Q tagged frames (0x8100) land here too: no VLAN support. */
	if (type == IPK_ETHERTYPE_IP4)
		ipk_ip4_input(c, pkt, IPK_ETH_HLEN);
	else if (type == IPK_ETHERTYPE_ARP && !ipk_pkt_chain_next(c, pkt)) {
		if (IPK_OPS(c)->rx_peek) /* core.h: before the core reads it */
			IPK_OPS(c)->rx_peek(c, pkt, IPK_OPQ(c));
		ipk_arp_input(c, pkt, IPK_ETH_HLEN);
	} else if (type == IPK_ETHERTYPE_ARP)
		ipk_drop_pkt(c, pkt, IPK_DROP_CHAIN); /* chains (IPK_CAP_LRO) are TCP only */
	else if (type == IPK_ETHERTYPE_IP6 && c->cfg.ip6_enable)
		ipk_ip6_input(c, pkt, IPK_ETH_HLEN);
	else
		ipk_drop_pkt(c, pkt, IPK_DROP_ETHERTYPE);
}

/* Ownership of pkt passes to the integrator through ops->tx. */
IPK_HOT void ipk_link_tx(struct ipk_ctx *c, void *pkt)
{
	ipk_link_tx_len(c, pkt, ipk_pkt_chain_len(c, pkt));
}

/* The 14-byte Ethernet II header (RFC 894) at p. */
static void eth_put(const struct ipk_ctx *c, uint8_t *p, const uint8_t dst_mac[6], uint16_t type)
{
	ipk_memcpy(p, dst_mac, 6);
	ipk_memcpy(p + 6, c->cfg.mac, 6);
	ipk_wr16(p + 12, type);
}

/* Ownership of pkt passes (transmitted, or freed when it cannot hold the header). */
void ipk_link_eth_tx(struct ipk_ctx *c, void *pkt, const uint8_t dst_mac[6], uint16_t type)
{
	if (ipk_pkt_len(c, pkt) < IPK_ETH_HLEN) {
		ipk_drop_pkt(c, pkt, IPK_DROP_NO_PKT);
		return;
	}
	eth_put(c, ipk_pkt_data(c, pkt), dst_mac, type);
	ipk_link_tx(c, pkt);
}

void ipk_link_nhc_set(struct ipk_ctx *c, uint32_t nh_be, const uint8_t mac[6], uint64_t until)
{
	c->nhc_ip_be = nh_be;
	c->nhc_until = until;
	/* the transmit templates hold the old next hop's header */
	c->tt_gen++;
	c->tt_cur = &c->tt_slot[IPK_TT_SLOTS];
	eth_put(c, c->nhc_eth, mac, IPK_ETHERTYPE_IP4);
}

/* Ownership of pkt passes. Broadcast destinations need no ARP (RFC 1122 §3.3.6). The
 * next hop of the previous frame, while its ARP binding lives, takes the cached
 * header: ip4.c has checked that pkt holds l2_len + 20 bytes. */
IPK_HOT int ipk_link_output_ip4(struct ipk_ctx *c, void *pkt, uint32_t next_hop_be)
{
	if (c->cfg.link == IPK_LINK_RAWIP) {
		ipk_link_tx(c, pkt);
		return 0;
	}
	if (next_hop_be == c->nhc_ip_be && c->now < c->nhc_until) {
		ipk_memcpy(ipk_pkt_data(c, pkt), c->nhc_eth, IPK_ETH_HLEN);
		ipk_link_tx(c, pkt);
		return 0;
	}
	if (ipk_ip4_is_bcast(c, next_hop_be)) {
		ipk_link_eth_tx(c, pkt, eth_bcast, IPK_ETHERTYPE_IP4);
		return 0;
	}
	return ipk_arp_output(c, pkt, next_hop_be);
}
