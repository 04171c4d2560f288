/*
 * What an address-filtering backend (afxdp) is told about a node's IPv6
 * (ipk_io_set_addr6), shared by the single node (node.c) and the workers' reader
 * thread (steer.c), which owns the device when steering in software.
 */
#ifndef IPKIT_RUNTIME_ADDR6_H
#define IPKIT_RUNTIME_ADDR6_H

#include <ipkit/core.h>
#include <ipkit/io.h>

#include <string.h>

/* The static address, and the addresses ending in the MAC's interface identifier
 * (link-local, SLAAC). Router Advertisements to all-nodes are taken from the kernel
 * only when the node has no static address and relies on SLAAC: with one, the host
 * keeps its RAs. 0 when IPv6 is off (nothing to tell). */
static inline int rt_io_set_addr6(struct ipk_io *io, const struct ipk_config *c)
{
	static const uint8_t none[16];
	int slaac_only;

	if (!c->ip6_enable)
		return 0;
	slaac_only = memcmp(c->ip6_addr, none, 16) == 0 && c->ip6_slaac;
	return ipk_io_set_addr6(io, c->ip6_addr, c->mac, slaac_only ? IPK_IO_ADDR6_RA : 0);
}

#endif
