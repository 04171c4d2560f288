/*
 * libipkit-preload: listeners shared across fork (svc/preload/README.md, "fork").
 *
 * On Linux a listener inherited by fork() is one socket that the parent and every
 * child may accept from (nginx: the master listens, its workers accept). Here the
 * parent's ipkitd socket belongs to the parent's connection, which the child must
 * never touch, so the child re-creates each inherited listener right after fork
 * (in the atfork handler, while it still has the parent's credentials: nginx's
 * workers change user next, and ipkitd checks the uid): its own connection to ipkitd,
 * a socket bound with IPK_SVC_SQE_F_INHERIT to the same address and port (ipkitd
 * lets a child of the listener's process join the port, svc/d_family.c), listening
 * with the same backlog, under the same descriptor number.
 *
 * A listener takes connections only once its program waits for them (the ACCEPT
 * is armed by accept/poll/select/epoll, not by listen), and ipkitd hands a new
 * connection to a listener that waits first: a master that never accepts gets none.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "preload.h"

static pthread_mutex_t f_mu = PTHREAD_MUTEX_INITIALIZER;

/* Put a fresh eventfd under number `fd` (the parent's is shared across fork: its
 * levels are the parent's socket's), keeping the number's FD_CLOEXEC. */
static int pl_fork_fresh_efd(int fd)
{
	int cl = pl_r.fcntl(fd, F_GETFD), n = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), rc;
	if (cl < 0 || n < 0) {
		if (n >= 0)
			pl_r.close(n);
		return -1;
	}
	rc = pl_r.dup3(n, fd, (cl & FD_CLOEXEC) ? O_CLOEXEC : 0);
	pl_r.close(n);
	return rc < 0 ? -1 : 0;
}

/* In the child, from the atfork handler: a listener is kept for re-creation (1),
 * anything else is forgotten (0). Only system calls on descriptors: no daemon. */
int pl_fork_child_keep(struct pl_sock *s)
{
	if (s->type != SOCK_STREAM || s->state != PL_LISTEN || s->closing || s->fd < 0 ||
	    s->lfd < 0 || s->ofd < 0)
		return 0;
	if (pl_fork_fresh_efd(s->fd) < 0 || pl_fork_fresh_efd(s->ofd) < 0 ||
	    pl_r.dup3(s->fd, s->lfd, O_CLOEXEC) < 0)
		return 0;
	s->in_lvl = s->out_lvl = 0;
	s->inherit = 1;
	s->acc_armed = 0;
	return 1;
}

static int pl_fork_bind(struct pl_sock *s, unsigned flags)
{
	struct ipk_svc_sqe e;
	memset(&e, 0, sizeof e);
	ipk_svc_prep_bind(&e, &(struct ipk_svc_addr){0});
	e.flags = (uint8_t)flags;
	ipk_svc_addr_ip4(&e.addr, s->local.sin_addr.s_addr, ntohs(s->local.sin_port));
	return pl_sync_op(s, &e);
}

/* The child's own ipkitd socket on the inherited listener's port. */
static int pl_fork_relisten(struct pl_sock *s)
{
	struct ipk_svc *svc = pl_svc();
	struct ipk_svc_sqe e;
	struct ipk_svc_sock *so;
	int rc;
	if (!svc)
		return -ENETDOWN;
	rc = ipk_svc_socket(svc, IPK_SVC_TCP, 128, 256, &so);
	if (rc < 0)
		return rc == -EPIPE ? -ENETDOWN : rc;
	pthread_mutex_lock(&s->mu);
	s->so = so;
	pthread_mutex_unlock(&s->mu);
	rc = pl_fork_bind(s, IPK_SVC_SQE_F_INHERIT);
	/* not a child of a holder: after exec in place the port is free once ipkitd
	 * has seen the old image's connection go (bounded: 2 s) */
	for (int i = 0; rc == -EADDRINUSE && i < 100; i++) {
		nanosleep(&(struct timespec){0, 20000000}, NULL);
		rc = pl_fork_bind(s, s->reuseport ? IPK_SVC_SQE_F_REUSEPORT : 0);
	}
	if (rc == 0) {
		memset(&e, 0, sizeof e);
		ipk_svc_prep_listen(&e, s->backlog > 0 ? (uint32_t)s->backlog : 128);
		rc = pl_sync_op(s, &e);
	}
	return rc;
}

/* Re-create s if it is an inherited listener still waiting for it. */
static int pl_listen_want_now(struct pl_sock *s)
{
	int rc = 0;
	if (__atomic_load_n(&s->inherit, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&f_mu); /* one re-creation, whichever thread comes first */
		if (s->inherit) {
			rc = pl_fork_relisten(s);
			if (rc < 0) {
				pthread_mutex_lock(&s->mu);
				s->state = PL_FAILED; /* every later call says why */
				s->so_error = -rc;
				pl_levels(s, 0);
				pthread_mutex_unlock(&s->mu);
			}
			__atomic_store_n(&s->inherit, 0, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&f_mu);
	}
	return rc;
}

int pl_listen_want(struct pl_sock *s)
{
	int rc;
	if (s->type != SOCK_STREAM || s->state != PL_LISTEN)
		return 0;
	rc = pl_listen_want_now(s);
	pthread_mutex_lock(&s->mu);
	if (rc == 0 && s->so && s->state == PL_LISTEN && !s->acc_armed)
		rc = pl_arm_accept(s);
	pl_levels(s, 0);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

/* In the child right after fork, while it still has the parent's credentials
 * (nginx's workers drop to another user next; ipkitd checks the uid it sees at the
 * connection's hello): its own connection and listeners now. A failure leaves the
 * listener failed with the reason (every call on it says so). */
void pl_fork_child_relisten(struct pl_sock *list)
{
	struct pl_sock *s;
	pthread_mutex_init(&f_mu, NULL); /* another thread may have held it at fork */
	for (s = list; s; s = s->lnext)
		pl_listen_want_now(s);
	pl_exec_fork_child(list);
}
