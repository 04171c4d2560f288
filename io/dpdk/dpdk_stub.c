/*
 * Stand-ins when the DPDK backend cannot be compiled for real (no libdpdk found by
 * pkg-config, or a cross compile of the sources without the target's DPDK headers):
 * the EAL helper says so, and the backend refuses to open with the reason.
 */
#include "dpdk_internal.h"

#ifndef IPK_DPDK_REAL

#include <errno.h>
#include <string.h>

int ipk_io_dpdk_eal(int argc, char **argv, char *err, size_t errlen)
{
	int j;

	for (j = 1; argv && j < argc; j++)
		if (argv[j] && strcmp(argv[j], "--") == 0)
			return ipk_io_err(err, errlen, ENOTSUP, "dpdk: EAL arguments given but this "
			                  "build has no DPDK (Debian: apt-get install libdpdk-dev, "
			                  "then reconfigure)");
	return 0;
}

static int dp_stub_open(struct ipk_io *io, const struct ipk_io_args *a, char *err,
                        size_t errlen)
{
	(void)io;
	return ipk_io_err(err, errlen, ENOTSUP, "dpdk:%s: this build has no DPDK headers for "
	                  "its target (Debian: libdpdk-dev)", a->dev);
}

int ipk_dpdk_rss_get(const struct ipk_io *io, struct ipk_dpdk_rss *out, char *why,
                     size_t whylen)
{
	(void)io;
	(void)out;
	return ipk_io_err(why, whylen, ENOTSUP, "this build has no DPDK");
}

const struct ipk_io_backend ipk_io_dpdk_backend = {
	"dpdk", 0, dp_stub_open, NULL, NULL, NULL, NULL, NULL, NULL,
};

#else
typedef int ipk_dpdk_stub_unused_;
#endif
