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
		h->gso_type = VIRTIO_NET_HDR_GSO_TCPV4;
		h->gso_size = m->mss;
		h->hdr_len = (uint16_t)(m->l2_len + m->l3_len + m->l4_len);
	}
}

#endif
