/*
 * libipkit-preload: listeners kept across exec (svc/preload/README.md, "exec").
 *
 * exec() keeps a descriptor without FD_CLOEXEC, but the new image's shim starts
 * empty: it would see a bare eventfd. So the shim keeps a small table of its
 * listeners in a memfd (no FD_CLOEXEC, a hidden number named by the environment
 * variable IPKIT_PRELOAD_STATE, set once): number, eventfd inode, address, port,
 * backlog, O_NONBLOCK. The new image's constructor reads it and adopts every entry
 * whose number is still open on the same eventfd (a CLOEXEC listener was closed
 * by the kernel: skipped), re-creating the listener on ipkitd: as a forked child
 * (IPK_SVC_SQE_F_INHERIT) when its parent still holds the port (fork + exec,
 * posix_spawn), else a plain bind once ipkitd has seen the old image's connection
 * go (exec in place: the old image's control socket was CLOEXEC).
 *
 * Only listeners: a connected socket kept across exec cannot follow (its data
 * and rings were the old image's, and ipkitd resets them when that connection
 * goes); in the new image its number is a bare eventfd (README, "exec").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "preload.h"

#define PL_EX_MAGIC 0x69706b78u /* "ipkx" */
#define PL_EX_MAX 128

struct pl_ex_ent {
	int32_t fd, backlog, nonblock, listen;
	uint64_t ino;
	uint32_t ip_be;
	uint16_t port_be, pad;
};
struct pl_ex_tab {
	uint32_t magic, n;
	struct pl_ex_ent e[PL_EX_MAX];
};

static pthread_mutex_t x_mu = PTHREAD_MUTEX_INITIALIZER;
static int x_fd = -1;
static struct pl_ex_tab x_tab;

static uint64_t pl_ex_ino(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* Still the same eventfd under that number? */
static int pl_ex_valid(const struct pl_ex_ent *e)
{
	char p[64], l[64];
	ssize_t n;
	snprintf(p, sizeof p, "/proc/self/fd/%d", (int)e->fd);
	n = readlink(p, l, sizeof l - 1);
	if (n <= 0)
		return 0;
	l[n] = 0;
	return strcmp(l, "anon_inode:[eventfd]") == 0 && pl_ex_ino(e->fd) == e->ino;
}

/* A memfd of our own under number `at` (-1: a new hidden number). Under x_mu. */
static int pl_ex_open(int at)
{
	int m = (int)memfd_create("ipkit-preload-state", 0), h;
	char v[16];
	if (m < 0)
		return -1;
	if (at >= 0) {
		h = pl_r.dup3(m, at, 0) < 0 ? -1 : at;
		pl_r.close(m);
	} else {
		h = pl_hide_fd(m); /* CLOEXEC: cleared below, exec must keep it */
		if (h >= 0)
			pl_r.fcntl(h, F_SETFD, 0);
		snprintf(v, sizeof v, "%d", h);
		setenv("IPKIT_PRELOAD_STATE", v, 1);
	}
	return x_fd = h;
}

static void pl_ex_write(void)
{
	if (x_fd < 0 && pl_ex_open(-1) < 0)
		return;
	if (pwrite(x_fd, &x_tab, sizeof x_tab, 0) != (ssize_t)sizeof x_tab)
		return; /* exec will not find the listeners: as before this file */
}

void pl_exec_note(struct pl_sock *s)
{
	struct pl_ex_ent e;
	uint32_t i, k = 0;
	memset(&e, 0, sizeof e);
	e.fd = s->fd;
	e.ino = pl_ex_ino(s->fd);
	e.backlog = s->backlog;
	e.nonblock = s->nonblock;
	e.listen = 1;
	/* AF_INET6 listeners are re-created AF_INET on the wildcard (README) */
	e.ip_be = s->domain == AF_INET ? s->local.in.sin_addr.s_addr : 0;
	e.port_be = s->local.in.sin_port;
	pthread_mutex_lock(&x_mu);
	x_tab.magic = PL_EX_MAGIC;
	for (i = 0; i < x_tab.n; i++) /* drop the entries no longer true */
		if (pl_ex_valid(&x_tab.e[i]) && x_tab.e[i].fd != e.fd)
			x_tab.e[k++] = x_tab.e[i];
	x_tab.n = k;
	if (x_tab.n < PL_EX_MAX)
		x_tab.e[x_tab.n++] = e;
	pl_ex_write();
	pthread_mutex_unlock(&x_mu);
}

/* fork child: its listeners have fresh eventfds (p_fork.c), and the memfd is
 * shared with the parent: a new one under the same number, with the new inodes. */
void pl_exec_fork_child(struct pl_sock *list)
{
	struct pl_sock *s;
	pthread_mutex_init(&x_mu, NULL);
	x_tab.n = 0;
	for (s = list; s; s = s->lnext)
		if (s->state == PL_LISTEN || s->inherit) {
			struct pl_ex_ent *e = &x_tab.e[x_tab.n];
			if (x_tab.n == PL_EX_MAX)
				break;
			memset(e, 0, sizeof *e);
			e->fd = s->fd, e->ino = pl_ex_ino(s->fd), e->backlog = s->backlog;
			e->nonblock = s->nonblock, e->listen = 1;
			e->ip_be = s->domain == AF_INET ? s->local.in.sin_addr.s_addr : 0;
			e->port_be = s->local.in.sin_port;
			x_tab.n++;
		}
	if (x_fd >= 0 && pl_ex_open(x_fd) >= 0)
		pl_ex_write();
}

/* One inherited listener under its old number, to be re-created. */
static void pl_ex_adopt(const struct pl_ex_ent *e)
{
	struct pl_sock *s = pl_sock_new(SOCK_STREAM);
	int n = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), cl = pl_r.fcntl(e->fd, F_GETFD);
	if (!s || n < 0 || cl < 0 || pl_r.dup3(n, e->fd, (cl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0) {
		if (n >= 0)
			pl_r.close(n);
		if (s)
			pl_put(s);
		return;
	}
	pl_r.close(n);
	s->fd = e->fd;
	s->ofd = pl_hide_fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	s->lfd = pl_hide_dup(s->fd);
	s->nonblock = e->nonblock;
	s->backlog = e->backlog;
	s->domain = AF_INET;
	s->local.in.sin_family = AF_INET;
	s->local.in.sin_addr.s_addr = e->ip_be;
	s->local.in.sin_port = e->port_be;
	s->state = PL_LISTEN;
	s->inherit = 1;
	pl_sock_link(s);
	pl_tbl_set(s->fd, s);
	PL_COUNT(sock_ipk, 1);
	pl_listen_want(s); /* re-created now, armed (the old image was waiting) */
	pl_exec_note(s);
	pl_put(s);
}

void pl_exec_adopt_all(void)
{
	const char *v = getenv("IPKIT_PRELOAD_STATE");
	struct pl_ex_tab t;
	uint32_t i;
	int fd;
	if (!v || (fd = atoi(v)) <= 2)
		return;
	memset(&t, 0, sizeof t);
	if (pread(fd, &t, sizeof t, 0) != (ssize_t)sizeof t || t.magic != PL_EX_MAGIC ||
	    t.n > PL_EX_MAX)
		return;
	pthread_mutex_lock(&x_mu);
	if (pl_ex_open(fd) < 0) { /* ours from now on: the parent's stays its own */
		pthread_mutex_unlock(&x_mu);
		return;
	}
	x_tab.magic = PL_EX_MAGIC;
	pthread_mutex_unlock(&x_mu);
	for (i = 0; i < t.n; i++)
		if (t.e[i].listen && pl_ex_valid(&t.e[i]))
			pl_ex_adopt(&t.e[i]);
}
