/*
 * DPDK's Environment Abstraction Layer, started once per process.
 *
 * Programs follow the bench-iip convention "prog EAL-args -- app-args" and call
 * ipk_io_dpdk_eal first. A program that never does (or has no "--") still gets a
 * working EAL on its first dpdk: spec, with defaults that need no set-up on the host:
 * no hugepages, no PCI scan, a private file prefix, and the lcore mapped onto the CPUs
 * the thread may already run on (so EAL does not re-pin the caller).
 */
#include "dpdk_internal.h"

#ifdef IPK_DPDK_REAL

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>

#define EAL_MAX_ARGS 128

static pthread_mutex_t eal_lock = PTHREAD_MUTEX_INITIALIZER;
static int eal_state; /* 0 not started, 1 running, -1 failed (EAL cannot be retried) */

static int eal_fail(char *err, size_t errlen, int e)
{
	if (e == EALREADY)
		return ipk_io_err(err, errlen, EALREADY, "dpdk: EAL is already initialised in "
		                  "this process");
	return ipk_io_err(err, errlen, e ? e : EINVAL, "dpdk: EAL init failed: %s (check the "
	                  "EAL arguments before '--'; without hugepages use --no-huge -m MB and a "
	                  "unique --file-prefix)", rte_strerror(e ? e : EINVAL));
}

/* EAL leaves its runtime directory (/var/run/dpdk/<file-prefix>: config, memseg
 * arrays, the mp socket) behind; a primary that exits takes its file prefix with it,
 * so remove what it made. Runs once at exit for an EAL this file started. */
static void eal_at_exit(void)
{
	char dir[PATH_MAX];
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s", rte_eal_get_runtime_dir());
	(void)rte_eal_cleanup();
	d = opendir(dir);
	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		char path[PATH_MAX + 256];

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		(void)unlink(path);
	}
	closedir(d);
	(void)rmdir(dir);
}

/* rte_eal_init permutes and rewrites its argv: give it a copy. */
static int eal_init(int argc, char **argv, char *err, size_t errlen)
{
	char *copy[EAL_MAX_ARGS + 1];
	int rc;

	if (argc > EAL_MAX_ARGS)
		return ipk_io_err(err, errlen, E2BIG, "dpdk: more than %d EAL arguments",
		                  EAL_MAX_ARGS);
	if (eal_state != 0)
		return eal_fail(err, errlen, eal_state > 0 ? EALREADY : EINVAL);
	memcpy(copy, argv, (size_t)argc * sizeof(*copy));
	copy[argc] = NULL;
	rc = rte_eal_init(argc, copy);
	if (rc < 0 && rte_errno == EALREADY) {
		/* the program started EAL itself: use it, leave its clean-up to it */
		eal_state = 1;
		return eal_fail(err, errlen, EALREADY);
	}
	if (rc < 0) {
		eal_state = -1;
		return eal_fail(err, errlen, rte_errno);
	}
	eal_state = 1;
	atexit(eal_at_exit);
	return 0;
}

int ipk_io_dpdk_eal(int argc, char **argv, char *err, size_t errlen)
{
	int j, rc;

	if (argc < 1 || !argv || !argv[0])
		return ipk_io_err(err, errlen, EINVAL, "dpdk: no program name in argv");
	for (j = 1; j < argc; j++)
		if (argv[j] && strcmp(argv[j], "--") == 0)
			break;
	if (j == argc)
		return 0; /* no EAL section: the first dpdk: spec starts EAL with defaults */
	pthread_mutex_lock(&eal_lock);
	rc = eal_init(j, argv, err, errlen);
	pthread_mutex_unlock(&eal_lock);
	return rc < 0 ? rc : j;
}

/* "--lcores=0@(a,b,...)": lcore 0 on the CPUs we may run on now. */
static void eal_lcores_arg(char *buf, size_t len)
{
	cpu_set_t set;
	size_t at;
	int c, first = 1;

	at = (size_t)snprintf(buf, len, "--lcores=0@(");
	if (sched_getaffinity(0, sizeof(set), &set) < 0) {
		snprintf(buf, len, "--lcores=0");
		return;
	}
	for (c = 0; c < CPU_SETSIZE && at + 8 < len; c++)
		if (CPU_ISSET(c, &set)) {
			at += (size_t)snprintf(buf + at, len - at, "%s%d", first ? "" : ",", c);
			first = 0;
		}
	snprintf(buf + at, len - at, ")");
}

int ipk_dpdk_eal_ensure(char *err, size_t errlen)
{
	char prefix[48], lcores[512];
	char *argv[] = { "ipkit", "--no-huge", "-m", "256", "--no-pci", "--no-telemetry",
	                 prefix, lcores, "--log-level=lib.eal:error", NULL };
	int rc = 0;

	pthread_mutex_lock(&eal_lock);
	if (eal_state == 0) {
		snprintf(prefix, sizeof(prefix), "--file-prefix=ipkit-%ld", (long)getpid());
		eal_lcores_arg(lcores, sizeof(lcores));
		rc = eal_init((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv, err, errlen);
		if (rc == -EALREADY)
			rc = 0;
	} else if (eal_state < 0) {
		rc = ipk_io_err(err, errlen, EINVAL, "dpdk: EAL init failed earlier in this "
		                "process (it cannot be retried)");
	}
	pthread_mutex_unlock(&eal_lock);
	return rc;
}

#else  /* !IPK_DPDK_REAL: dpdk_stub.c stands in */
typedef int ipk_dpdk_dpdk_eal_unused_;
#endif
