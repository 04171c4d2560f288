/*
 * The virtio-net header (struct virtio_net_hdr) that TAP (IFF_VNET_HDR) and AF_PACKET
 * (PACKET_VNET_HDR) put in front of frames: one translation from the core's transmit
 * offload marks, shared by both backends.
 */
#ifndef IPKIT_IO_VNET_H
#define IPKIT_IO_VNET_H

#include <ipkit/core.h>
#include <linux/virtio_net.h>
#include <string.h>

/* Checksum offload asks the kernel to complete the L4 checksum from csum_start,
 * storing it csum_offset bytes further (the core left the pseudo-header sum there);
 * TSO asks it to cut the frame into gso_size segments. */
static inline void ipk_vnet_from_meta(const struct ipk_tx_meta *m, struct virtio_net_hdr *h)
{
	memset(h, 0, sizeof(*h));
	if (m->flags & (IPK_TXOFF_TCP_CSUM | IPK_TXOFF_UDP_CSUM | IPK_TXOFF_TSO)) {
		h->flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
		h->csum_start = (uint16_t)(m->l2_len + m->l3_len);
		/* RFC 9293 §3.1: TCP checksum at byte 16; RFC 768: UDP checksum at byte 6. */
		h->csum_offset = (m->flags & IPK_TXOFF_UDP_CSUM) ? 6 : 16;
	}
	if ((m->flags & IPK_TXOFF_TSO) && m->mss) {
		/* IPv6 frames (IPK_CAP_TSO6) are cut by the kernel's TCPv6 GSO */
		h->gso_type = (m->flags & IPK_TXOFF_IP6) ? VIRTIO_NET_HDR_GSO_TCPV6 :
		                                           VIRTIO_NET_HDR_GSO_TCPV4;
		h->gso_size = m->mss;
		h->hdr_len = (uint16_t)(m->l2_len + m->l3_len + m->l4_len);
	}
}

/* Receive: VIRTIO_NET_HDR_F_DATA_VALID means the checksum was verified. F_NEEDS_CSUM
 * means the frame was built by the local kernel (CHECKSUM_PARTIAL: a veth peer or the
 * TAP's own stack) with only the pseudo-header sum in the field; its bytes never
 * crossed a wire, so the data is intact and the core is told the checksum is good (the
 * frame is consumed here, never forwarded, so the missing sum cannot leak out). */
static inline uint32_t ipk_vnet_rx_csum(const struct virtio_net_hdr *h)
{
	if (h->flags & (VIRTIO_NET_HDR_F_DATA_VALID | VIRTIO_NET_HDR_F_NEEDS_CSUM))
		return IPK_RXCSUM_L4_GOOD;
	return 0;
}

/* A received IPv4 or IPv6 packet (ip, iplen bytes) longer than the MTU is
 * acceptable only as a coalesced TCP segment (GSO/GRO super-frame), which the core
 * takes whole (IPK_CAP_LRO); h (NULL when the device gives no header) must agree.
 * Anything else that large (UDP GSO, a jumbo from a misconfigured peer) is dropped. */
static inline int ipk_vnet_rx_big_ok(const struct virtio_net_hdr *h, const uint8_t *ip,
                                     uint32_t iplen, uint32_t mtu)
{
	unsigned gso = h ? (unsigned)(h->gso_type & ~VIRTIO_NET_HDR_GSO_ECN) : 0u;

	if (iplen <= mtu)
		return 1;
	/* RFC 8200 §3: version 6, TCP (6) straight after the fixed header */
	if (iplen >= 60 && (ip[0] >> 4) == 6)
		return (!h || gso == VIRTIO_NET_HDR_GSO_TCPV6) && ip[6] == 6;
	if (h && gso != VIRTIO_NET_HDR_GSO_TCPV4)
		return 0;
	/* RFC 791: version 4; protocol 6 is TCP (RFC 9293). */
	return iplen >= 40 && (ip[0] >> 4) == 4 && ip[9] == 6;
}

#endif
