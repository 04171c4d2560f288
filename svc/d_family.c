/*
 * ipkitd: a forked child takes its share of a listener it inherited.
 *
 * A listening socket shared across fork() on Linux is one socket: the parent and
 * every child may accept from its one queue (nginx's master opens the port, its
 * workers accept). An ipkitd socket belongs to one application (one process's
 * connection), so a child that inherited a listener (libipkit-preload, after fork)
 * asks for its own socket on the same port with IPK_SVC_SQE_F_INHERIT at bind. The
 * daemon lets it join the port's group when the group holds a socket of the
 * child's parent process (the one it inherited from) and every socket on the port
 * belongs to the same uid: the child could use the parent's socket on Linux, so it
 * may take the parent's connections here. Nothing else may join this way: an
 * unrelated process still gets EADDRINUSE, as on Linux.
 *
 * The parent is found by reading /proc/PID/stat of the child's pid (SO_PEERCRED
 * at hello): ipkitd must see the application's pid namespace (svc/README.md).
 *
 * Connections then go to the listeners that wait for one first (an ACCEPT armed):
 * a shared Linux socket is taken by whoever calls accept, and nginx's master never
 * does; a listener with no ACCEPT armed only gets one when no other has room.
 */
#include "daemon.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The parent pid of pid from /proc/PID/stat (field 4, after the name in
 * parentheses, which may itself hold ')' and spaces), or -1. */
static pid_t d_family_ppid(pid_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd, ppid = -1;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1)
		return -1;
	return (pid_t)ppid;
}

int d_family_share_ok(const struct d_sock *head, const struct d_sock *s)
{
	const struct d_sock *m = head;
	pid_t pp = d_family_ppid(s->app->pid);
	int parent = 0;
	if (pp <= 0)
		return 0;
	do {
		if (m->app->uid != s->app->uid)
			return 0;
		if (m->app->pid == pp && m->state == D_LISTEN)
			parent = 1;
		m = m->port_next;
	} while (m != head);
	return parent;
}

/* The listener of the group to take the next connection: one with an ACCEPT armed
 * and room, the turn moving on past it; NULL: none waits (the caller falls back to
 * any listener with room). */
struct d_sock *d_family_waiting(struct d_daemon *d, uint16_t port_be)
{
	struct d_sock *h = d->tcp_port[port_be], *m;
	if (!h || h->port_next == h)
		return NULL;
	m = h;
	do {
		if (m->state == D_LISTEN && m->acc_armed && m->acc_n < m->backlog) {
			d->tcp_port[port_be] = m->port_next;
			return m;
		}
		m = m->port_next;
	} while (m != h);
	return NULL;
}
