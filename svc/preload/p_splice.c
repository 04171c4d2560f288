/*
 * libipkit-preload: splice between a pipe and an ipkit socket (splice(2): one end
 * must be a pipe; a file reaches a socket as file -> pipe (the kernel's splice)
 * -> socket (here)). The bytes are copied through a buffer, never lost: from a
 * pipe, only what the socket can take is read (a non-blocking socket that is not
 * writable says EAGAIN before anything leaves the pipe, and what was read is sent
 * whole, waiting for room as a blocking splice does); into a pipe, at most the
 * pipe's free room is received. An offset for the socket is EINVAL, for the pipe
 * ESPIPE, as Linux says. Kernel-only splices go to the real call.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preload.h"

#define PL_SPLICE_CHUNK (64u << 10)

typedef ssize_t (*pl_splice_fn)(int, loff_t *, int, loff_t *, size_t, unsigned);

static int pl_is_pipe(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

static int pl_ready(int fd, short ev)
{
	struct pollfd p = {fd, ev, 0};
	return pl_r.poll(&p, 1, 0) == 1 && (p.revents & (ev | POLLERR | POLLHUP));
}

/* Send all n bytes (what was taken from a pipe cannot go back): waits for room. */
static ssize_t pl_send_all(int s, const uint8_t *b, size_t n)
{
	size_t done = 0;
	while (done < n) {
		ssize_t w = send(s, b + done, n - done, MSG_NOSIGNAL);
		if (w < 0 && errno == EAGAIN) {
			struct pollfd p = {s, POLLOUT, 0};
			poll(&p, 1, -1);
			continue;
		}
		if (w < 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)w;
	}
	return (ssize_t)done;
}

static ssize_t pl_pipe_to_sock(int in, int out, size_t len, unsigned flags)
{
	uint8_t *b = (uint8_t *)pl_scratch(PL_SCR_SPLICE_IN, PL_SPLICE_CHUNK);
	struct pl_sock *s = pl_get(out);
	int nb = s && s->nonblock;
	ssize_t r;
	if (s)
		pl_put(s);
	if (!b)
		return errno = ENOMEM, -1;
	if (nb && !pl_ready(out, POLLOUT))
		return errno = EAGAIN, -1;
	if ((flags & SPLICE_F_NONBLOCK) && !pl_ready(in, POLLIN))
		return errno = EAGAIN, -1;
	r = read(in, b, len < PL_SPLICE_CHUNK ? len : PL_SPLICE_CHUNK);
	if (r <= 0)
		return r;
	return pl_send_all(out, b, (size_t)r);
}

static ssize_t pl_sock_to_pipe(int in, int out, size_t len, unsigned flags)
{
	uint8_t *b = (uint8_t *)pl_scratch(PL_SCR_SPLICE_OUT, PL_SPLICE_CHUNK);
	int cap = pl_r.fcntl(out, F_GETPIPE_SZ), used = 0;
	size_t room;
	ssize_t r;
	if (!b)
		return errno = ENOMEM, -1;
	if (cap <= 0 || pl_r.ioctl(out, FIONREAD, &used) < 0)
		return errno = EINVAL, -1;
	room = used < cap ? (size_t)(cap - used) : 0;
	if (room == 0)
		return errno = EAGAIN, -1; /* a full pipe: Linux would wait for a reader */
	if (len > room)
		len = room;
	r = recv(in, b, len < PL_SPLICE_CHUNK ? len : PL_SPLICE_CHUNK,
	         (flags & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0);
	if (r <= 0)
		return r;
	return write(out, b, (size_t)r); /* fits: at most the room there was */
}

ssize_t splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len, unsigned flags)
{
	int ipk_in, ipk_out;
	pl_resolve();
	ipk_in = pl_is_ipk(in);
	ipk_out = pl_is_ipk(out);
	if (!ipk_in && !ipk_out) {
		pl_splice_fn f;
		void *p = dlsym(RTLD_NEXT, "splice");
		memcpy(&f, &p, sizeof p);
		return f ? f(in, off_in, out, off_out, len, flags) : (errno = ENOSYS, -1);
	}
	if (ipk_in && ipk_out)
		return errno = EINVAL, -1; /* neither end a pipe */
	if ((ipk_out && off_out) || (ipk_in && off_in))
		return errno = EINVAL, -1; /* Linux: a socket has no offset (EINVAL) */
	if (ipk_out) {
		if (!pl_is_pipe(in))
			return errno = EINVAL, -1;
		if (off_in)
			return errno = ESPIPE, -1;
		return len ? pl_pipe_to_sock(in, out, len, flags) : 0;
	}
	if (!pl_is_pipe(out))
		return errno = EINVAL, -1;
	if (off_out)
		return errno = ESPIPE, -1;
	return len ? pl_sock_to_pipe(in, out, len, flags) : 0;
}
