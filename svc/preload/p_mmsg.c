/*
 * libipkit-preload: sendmmsg and recvmmsg on ipkit sockets, as sendmsg/recvmsg
 * in turn with Linux's rules (sendmmsg(2), recvmmsg(2)): at most UIO_MAXIOV
 * messages; each message's length in msg_len; an error on the first message is
 * the call's error, an error after some is dropped and the count returned (the
 * next call sees the condition again); recvmmsg's MSG_WAITFORONE turns on
 * MSG_DONTWAIT after the first message, and its timeout is checked after each
 * message, as the kernel does. Kernel descriptors go to the real calls.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <time.h>

#include "preload.h"

#ifndef UIO_MAXIOV
#define UIO_MAXIOV 1024
#endif

typedef int (*pl_smm_fn)(int, struct mmsghdr *, unsigned, int);
typedef int (*pl_rmm_fn)(int, struct mmsghdr *, unsigned, int, struct timespec *);

static void *pl_mm_sym(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

int sendmmsg(int fd, struct mmsghdr *v, unsigned n, int flags)
{
	unsigned i;
	pl_resolve();
	if (!pl_is_ipk(fd)) {
		pl_smm_fn f;
		void *p = pl_mm_sym("sendmmsg");
		memcpy(&f, &p, sizeof p);
		return f ? f(fd, v, n, flags) : (errno = ENOSYS, -1);
	}
	if (n > UIO_MAXIOV)
		n = UIO_MAXIOV;
	for (i = 0; i < n; i++) {
		ssize_t r = sendmsg(fd, &v[i].msg_hdr, flags);
		if (r < 0)
			return i ? (int)i : -1;
		v[i].msg_len = (unsigned)r;
	}
	return (int)i;
}

static int pl_mm_past(const struct timespec *end)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec > end->tv_sec || (t.tv_sec == end->tv_sec && t.tv_nsec >= end->tv_nsec);
}

int recvmmsg(int fd, struct mmsghdr *v, unsigned n, int flags, struct timespec *timeout)
{
	struct timespec end;
	unsigned i;
	pl_resolve();
	if (!pl_is_ipk(fd)) {
		pl_rmm_fn f;
		void *p = pl_mm_sym("recvmmsg");
		memcpy(&f, &p, sizeof p);
		return f ? f(fd, v, n, flags, timeout) : (errno = ENOSYS, -1);
	}
	if (timeout) {
		if (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1000000000L)
			return errno = EINVAL, -1;
		clock_gettime(CLOCK_MONOTONIC, &end);
		end.tv_sec += timeout->tv_sec + (end.tv_nsec + timeout->tv_nsec) / 1000000000L;
		end.tv_nsec = (end.tv_nsec + timeout->tv_nsec) % 1000000000L;
	}
	if (n > UIO_MAXIOV)
		n = UIO_MAXIOV;
	for (i = 0; i < n; i++) {
		ssize_t r = recvmsg(fd, &v[i].msg_hdr, flags & ~MSG_WAITFORONE);
		if (r < 0)
			return i ? (int)i : -1;
		v[i].msg_len = (unsigned)r;
		if (flags & MSG_WAITFORONE)
			flags |= MSG_DONTWAIT;
		if (timeout && pl_mm_past(&end))
			return (int)i + 1;
	}
	return (int)i;
}
