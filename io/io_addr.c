/*
 * ipk_io_set_addr, ipk_io_set_addr6: hand the node's addresses to the backends that
 * steer by them.
 */
#include "io_internal.h"

#include <errno.h>

int ipk_io_set_addr(struct ipk_io *io, uint32_t ip4_be, const uint8_t mac[6])
{
	int depth;

	if (!io)
		return -EINVAL;
	/* through wrappers (pcap) to the device backend; bounded like any chain */
	for (depth = 0; io && depth < 8; io = io->inner, depth++) {
#ifdef IPK_IO_HAVE_AFXDP
		if (io->be == &ipk_io_afxdp_backend)
			return ipk_io_afxdp_set_addr(io, ip4_be, mac);
#endif
	}
	(void)ip4_be;
	(void)mac;
	return 0;
}

int ipk_io_set_addr6(struct ipk_io *io, const uint8_t addr[16], const uint8_t mac[6],
                     uint32_t flags)
{
	int depth;

	if (!io)
		return -EINVAL;
	for (depth = 0; io && depth < 8; io = io->inner, depth++) {
#ifdef IPK_IO_HAVE_AFXDP
		if (io->be == &ipk_io_afxdp_backend)
			return ipk_io_afxdp_set_addr6(io, addr, mac, flags);
#endif
	}
	(void)addr;
	(void)mac;
	(void)flags;
	return 0;
}
