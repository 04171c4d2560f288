/*
 * This build has no DPDK (pkg-config found no libdpdk): the EAL helper says so, and
 * the registry answers "not compiled into this build" for dpdk: specs.
 */
#include "io_internal.h"

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
