/*
 * Test helper: open the region a role=a memlink published, as its peer (or a
 * hostile process of the same user) would: read the door record, then open
 * /proc/<pid>/fd/<fd> (ml_ring.h, struct ml_door). Returns an O_RDWR fd or -1.
 */
#ifndef IPKIT_TEST_ML_PEER_H
#define IPKIT_TEST_ML_PEER_H

#include "ml_ring.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

static int ml_peer_region_fd(const char *name)
{
	struct ml_door d;
	char path[128];
	int fd;
	ssize_t n;

	snprintf(path, sizeof path, "/dev/shm/ipkit-ml-%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = pread(fd, &d, sizeof d, 0);
	close(fd);
	if (n != (ssize_t)sizeof d || d.magic != ML_DOOR_MAGIC)
		return -1;
	snprintf(path, sizeof path, "/proc/%u/fd/%d", d.pid, (int)d.fd);
	return open(path, O_RDWR | O_CLOEXEC);
}

#endif
