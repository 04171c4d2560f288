/*
 * libipkit-preload: sockets kept across exec (svc/preload/README.md, "exec").
 *
 * exec() keeps a descriptor without FD_CLOEXEC, but the new image's shim starts
 * empty: it would see a bare eventfd. So the shim keeps a small table in a memfd
 * (no FD_CLOEXEC, a hidden number named by the environment variable
 * IPKIT_PRELOAD_STATE, set once), and the new image's constructor reads it and
 * adopts every entry whose number is still open on the same eventfd (a CLOEXEC
 * socket was closed by the kernel: skipped).
 *
 * Listeners (written at listen): number, eventfd inode, address, port, backlog,
 * O_NONBLOCK. The new image re-creates the listener on ipkitd: as a forked child
 * (IPK_SVC_SQE_F_INHERIT) when its parent still holds the port (fork + exec,
 * posix_spawn), else a plain bind once ipkitd has seen the old image's
 * connection go (exec in place: the old image's control socket was CLOEXEC).
 *
 * Connected TCP sockets (written by the exec calls below, just before the exec):
 * their data, rings and ipkitd socket are the old image's, and ipkitd ends them
 * when that image's connection goes. So the exec call first opens a second
 * connection to ipkitd, the bridge, whose control socket survives exec, and
 * ADOPTs each such socket there (ipk_svc_adopt_from: the old image's application,
 * this same process). The socket then has two members (svc/d_family.c): the old
 * image hands the connection to the bridge (CLAIM 1) with what it had received
 * and not read (GIVEBACK), so no byte is lost; the bridge never reads. After the
 * exec the old image's sockets leave their circles, the connections stay open on
 * the bridge, and the new image ADOPTs each from the bridge, then closes the
 * bridge's control socket: ipkitd hands each connection, with the bytes given
 * back, to the new image's socket. If the exec fails, the bridge is closed and
 * the old image's sockets take their connections back at their next use.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "preload.h"

#define PL_EX_MAGIC 0x69706b79u /* "ipky": the layout with connections */
#define PL_EX_MAX 128

struct pl_ex_ent {
	int32_t fd, backlog, nonblock, listen;
	uint64_t ino;
	uint32_t ip_be;
	uint16_t port_be, pad;
	/* a connected socket (listen 0), held by the bridge across the exec */
	int32_t bridge_fd, domain;
	uint32_t bridge_app, bridge_sock;
	union pl_sa local, peer;
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

/* ------------------------------------------------------------ connections */

/* The new image: one connection the bridge holds, under every number of the
 * group e[0..n) (dups share the eventfd), adopted from the bridge. It starts away,
 * as a forked child's: the program's first use CLAIMs it (p_fork.c). */
static void pl_ex_adopt_conn(struct pl_ex_ent *const *g, int n)
{
	struct ipk_svc *svc = pl_svc();
	struct ipk_svc_sock *so = NULL;
	struct pl_sock *s = pl_sock_new(SOCK_STREAM);
	int ev = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), rc, k = 0;
	uint8_t ok[PL_EX_MAX];
	if (!s || ev < 0) {
		if (ev >= 0)
			pl_r.close(ev);
		if (s)
			pl_put(s);
		return; /* the numbers stay bare eventfds, as before this file */
	}
	for (int i = 0; i < n; i++) { /* kept across exec: none is CLOEXEC */
		ok[i] = pl_r.dup3(ev, g[i]->fd, 0) == g[i]->fd;
		if (ok[i] && k++ == 0)
			s->fd = g[i]->fd;
	}
	s->lfd = pl_hide_dup(ev);
	pl_r.close(ev);
	if (k == 0 || s->lfd < 0) {
		if (s->lfd >= 0)
			pl_r.close(s->lfd);
		pl_put(s);
		return;
	}
	s->ofd = -1;
	s->domain = g[0]->domain == AF_INET6 ? AF_INET6 : AF_INET;
	s->local = g[0]->local;
	s->peer = g[0]->peer;
	s->nonblock = g[0]->nonblock;
	rc = svc ? ipk_svc_adopt_from(svc, g[0]->bridge_app, g[0]->bridge_sock, 128, 256, &so)
	         : -ENETDOWN;
	pthread_mutex_lock(&s->mu);
	s->state = PL_CONNECTED;
	s->fam = 1;
	if (rc < 0) {
		s->state = PL_FAILED; /* every call says so */
		s->so_error = ECONNRESET;
	} else {
		s->so = so;
		s->away = s->fresh = 1;
		pl_post_recv(s);
	}
	pl_levels(s, 0);
	pthread_mutex_unlock(&s->mu);
	pl_sock_link(s);
	for (int i = 0; i < n; i++)
		if (ok[i])
			pl_tbl_set(g[i]->fd, s);
	PL_COUNT(sock_ipk, 1);
	pl_put(s);
}

static void pl_ex_adopt_conns(struct pl_ex_tab *t)
{
	struct pl_ex_ent *g[PL_EX_MAX];
	uint8_t done[PL_EX_MAX];
	struct stat st;
	uint32_t i, j;
	int n;
	memset(done, 0, sizeof done);
	for (i = 0; i < t->n; i++) {
		if (t->e[i].listen || done[i])
			continue;
		for (n = 0, j = i; j < t->n; j++) {
			if (t->e[j].listen || done[j] || t->e[j].bridge_app != t->e[i].bridge_app ||
			    t->e[j].bridge_sock != t->e[i].bridge_sock)
				continue;
			done[j] = 1;
			if (pl_ex_valid(&t->e[j]))
				g[n++] = &t->e[j];
		}
		if (n && t->e[i].bridge_sock)
			pl_ex_adopt_conn(g, n);
	}
	/* then the bridges go: ipkitd hands each connection to our socket */
	for (i = 0; i < t->n; i++) {
		int b = t->e[i].bridge_fd;
		if (t->e[i].listen || b <= 2 || fstat(b, &st) < 0 || !S_ISSOCK(st.st_mode))
			continue;
		for (j = i; j < t->n; j++)
			if (!t->e[j].listen && t->e[j].bridge_fd == b)
				t->e[j].bridge_fd = -1;
		pl_r.close(b);
	}
}

/* While an exec is tried: the bridge, and the sockets handed to it (a reference
 * each), with their ids there, to take back if the exec fails. */
static struct ipk_svc *x_bridge;
static struct pl_sock *x_held[PL_EX_MAX];
static uint32_t x_held_id[PL_EX_MAX];
static int x_nheld;

/* Drop the table's connection entries (under x_mu). */
static void pl_ex_drop_conns(void)
{
	uint32_t i, k = 0;
	for (i = 0; i < x_tab.n; i++)
		if (x_tab.e[i].listen)
			x_tab.e[k++] = x_tab.e[i];
	x_tab.n = k;
}

/* The GIVEBACKs and SENDs of v[0..n) in flight: the pump completes them
 * (bounded: 2 s; a SEND in flight past that is the new image's loss, as data
 * written just before an exec whose peer does not read). */
static void pl_ex_settle(struct pl_sock *const *v, int n)
{
	int need = pl_sync_wait_begin();
	for (int t = 0, busy = 1; busy && t < 2000; t++) {
		busy = 0;
		for (int i = 0; i < n; i++) {
			pthread_mutex_lock(&v[i]->mu);
			busy |= v[i]->gb_ops > 0 || (v[i]->so && v[i]->tx_ops > 0);
			pthread_mutex_unlock(&v[i]->mu);
		}
		if (busy)
			nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	pl_sync_wait_end(need);
}

/* Our own ipkitd socket on s's connection goes (the bridge holds it now): from
 * here to the exec no byte can reach this image's buffers, where the exec
 * would lose it (another process of the family handing the connection on,
 * while ipkitd has not yet seen this image go). The buffers stay ours. */
static void pl_ex_detach(struct pl_sock *s)
{
	struct ipk_svc_sock *so;
	pthread_mutex_lock(&s->mu);
	so = s->so;
	s->so = NULL;
	for (int j = 0; j < 2; j++)
		s->rx[j].posted = 0, s->rx[j].len = s->rx[j].pos = 0;
	s->rx_head = 0;
	s->tx_ops = s->tx_bytes = s->txq_head = 0;
	s->gb_ops = 0;
	s->away = 1;
	pthread_mutex_unlock(&s->mu);
	if (so)
		ipk_svc_close(so); /* a member leaving: the connection goes on */
}

int pl_exec_prepare(void)
{
	struct ipk_svc *svc, *br;
	struct ipk_svc_opts o;
	struct pl_sock *v[PL_EX_MAX];
	int fds[PL_EX_MAX], n = 0, fd, cl;
	uint32_t bid[PL_EX_MAX], me;
	if (!pl_any_sock() || !(svc = pl_svc()))
		return 0;
	for (fd = pl_tbl_next(0); fd >= 0 && n < PL_EX_MAX; fd = pl_tbl_next(fd + 1)) {
		struct pl_sock *s = pl_get(fd);
		if (!s)
			continue;
		if (s->type == SOCK_STREAM && s->state == PL_CONNECTED && s->so && !s->closing &&
		    (cl = pl_r.fcntl(fd, F_GETFD)) >= 0 && !(cl & FD_CLOEXEC)) {
			v[n] = s;
			fds[n++] = fd;
		} else {
			pl_put(s);
		}
	}
	if (n == 0)
		return 0;
	ipk_svc_opts_default(&o);
	o.buf_bytes = 1u << 20; /* the bridge never reads or writes */
	o.ring_bytes = 1u << 20;
	o.flags = IPK_SVC_OPEN_EXIT_FIN; /* a new image without the shim: as Linux */
	br = ipk_svc_open(NULL, &o, NULL);
	if (br)
		ipk_svc_move_fds(br, (int)pl_hide_min());
	me = ipk_svc_app_id(svc);
	x_nheld = 0;
	for (int i = 0; i < n; i++) {
		struct ipk_svc_sock *bso;
		int j;
		bid[i] = 0;
		for (j = 0; j < i && v[j] != v[i]; j++)
			;
		if (j < i) { /* another number of the same socket */
			bid[i] = bid[j];
			continue;
		}
		if (!br || ipk_svc_adopt_from(br, me, ipk_svc_sock_id(v[i]->so), 8, 8, &bso) < 0)
			continue; /* not followed: a bare eventfd there, as before */
		bid[i] = ipk_svc_sock_id(bso);
		pthread_mutex_lock(&v[i]->mu);
		v[i]->fam = 1;
		pthread_mutex_unlock(&v[i]->mu);
		pl_fam_release(v[i]); /* to the bridge, with our unread bytes */
		__atomic_add_fetch(&v[i]->refs, 1, __ATOMIC_RELAXED);
		x_held[x_nheld] = v[i];
		x_held_id[x_nheld++] = bid[i];
	}
	pl_ex_settle(x_held, x_nheld);
	for (int i = 0; i < x_nheld; i++)
		pl_ex_detach(x_held[i]);
	if (x_nheld) {
		int bfd = ipk_svc_keep_on_exec(br);
		pthread_mutex_lock(&x_mu);
		x_tab.magic = PL_EX_MAGIC;
		pl_ex_drop_conns();
		for (int i = 0; i < n && bfd >= 0 && x_tab.n < PL_EX_MAX; i++) {
			struct pl_ex_ent *e = &x_tab.e[x_tab.n];
			if (!bid[i])
				continue;
			memset(e, 0, sizeof *e);
			e->fd = fds[i];
			e->ino = pl_ex_ino(fds[i]);
			e->nonblock = v[i]->nonblock;
			e->bridge_fd = bfd;
			e->bridge_app = ipk_svc_app_id(br);
			e->bridge_sock = bid[i];
			e->domain = v[i]->domain;
			e->local = v[i]->local;
			e->peer = v[i]->peer;
			x_tab.n++;
		}
		pl_ex_write();
		pthread_mutex_unlock(&x_mu);
		x_bridge = br;
	} else if (br) {
		ipk_svc_close_all(br);
	}
	for (int i = 0; i < n; i++)
		pl_put(v[i]);
	return x_nheld > 0;
}

void pl_exec_undo(int made)
{
	struct ipk_svc *svc = pl_svc();
	if (!made)
		return;
	pthread_mutex_lock(&x_mu);
	pl_ex_drop_conns();
	pl_ex_write();
	pthread_mutex_unlock(&x_mu);
	/* each socket takes its connection back from the bridge (it starts away, as
	 * a forked child's: its next use CLAIMs it), then the bridge goes */
	for (int i = 0; i < x_nheld; i++) {
		struct pl_sock *s = x_held[i];
		struct ipk_svc_sock *so = NULL;
		int rc = svc ? ipk_svc_adopt_from(svc, ipk_svc_app_id(x_bridge), x_held_id[i], 128,
		                                  256, &so)
		             : -ENETDOWN;
		pthread_mutex_lock(&s->mu);
		if (rc < 0) {
			s->state = PL_FAILED;
			s->so_error = ECONNRESET;
		} else {
			s->so = so;
			s->away = s->fresh = 1;
			pl_post_recv(s);
		}
		pl_levels(s, 0);
		pthread_mutex_unlock(&s->mu);
		pl_put(s);
	}
	x_nheld = 0;
	ipk_svc_close_all(x_bridge);
	x_bridge = NULL;
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
	pl_ex_adopt_conns(&t);
}

/* ------------------------------------------------------------ the exec calls
 *
 * Each runs pl_exec_prepare, then the C library's own call; if that returns (the
 * exec failed), the bridge goes and errno is the exec's. glibc's posix_spawn,
 * system and popen exec inside the C library (not seen here): their child keeps
 * no connected socket (README, "exec"). */

typedef int (*pl_execve_fn)(const char *, char *const[], char *const[]);
typedef int (*pl_execv_fn)(const char *, char *const[]);
typedef int (*pl_fexecve_fn)(int, char *const[], char *const[]);

static void *pl_ex_real(void **slot, const char *name)
{
	void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (!f) {
		f = dlsym(RTLD_NEXT, name);
		__atomic_store_n(slot, f, __ATOMIC_RELEASE);
	}
	if (!f)
		errno = ENOSYS;
	return f;
}

static int pl_ex_after(int made, int rc)
{
	int e = errno;
	pl_exec_undo(made);
	errno = e;
	return rc;
}

static void *r_execve, *r_execv, *r_execvp, *r_execvpe, *r_fexecve;

int execve(const char *path, char *const argv[], char *const envp[])
{
	pl_execve_fn f = (pl_execve_fn)pl_ex_real(&r_execve, "execve");
	int made;
	if (!f)
		return -1;
	made = pl_exec_prepare();
	return pl_ex_after(made, f(path, argv, envp));
}

int execv(const char *path, char *const argv[])
{
	pl_execv_fn f = (pl_execv_fn)pl_ex_real(&r_execv, "execv");
	int made;
	if (!f)
		return -1;
	made = pl_exec_prepare();
	return pl_ex_after(made, f(path, argv));
}

int execvp(const char *file, char *const argv[])
{
	pl_execv_fn f = (pl_execv_fn)pl_ex_real(&r_execvp, "execvp");
	int made;
	if (!f)
		return -1;
	made = pl_exec_prepare();
	return pl_ex_after(made, f(file, argv));
}

int execvpe(const char *file, char *const argv[], char *const envp[])
{
	pl_execve_fn f = (pl_execve_fn)pl_ex_real(&r_execvpe, "execvpe");
	int made;
	if (!f)
		return -1;
	made = pl_exec_prepare();
	return pl_ex_after(made, f(file, argv, envp));
}

int fexecve(int fd, char *const argv[], char *const envp[])
{
	pl_fexecve_fn f = (pl_fexecve_fn)pl_ex_real(&r_fexecve, "fexecve");
	int made;
	if (!f)
		return -1;
	made = pl_exec_prepare();
	return pl_ex_after(made, f(fd, argv, envp));
}

/* execl, execlp, execle: the list as an array (and execle's environment after
 * its NULL), then the array call above. */
static char **pl_ex_list(const char *arg, va_list ap, char ***envp)
{
	va_list cp;
	size_t n = 1, i = 0;
	char **v;
	va_copy(cp, ap);
	while (arg && va_arg(cp, const char *))
		n++;
	va_end(cp);
	v = (char **)malloc((n + 1) * sizeof *v);
	if (!v) {
		errno = ENOMEM;
		return NULL;
	}
	v[i++] = (char *)arg;
	while (arg && (v[i] = va_arg(ap, char *)) != NULL)
		i++;
	v[i] = NULL;
	if (envp)
		*envp = va_arg(ap, char **);
	return v;
}

int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	char **v;
	int rc;
	va_start(ap, arg);
	v = pl_ex_list(arg, ap, NULL);
	va_end(ap);
	if (!v)
		return -1;
	rc = execv(path, v);
	free(v);
	return rc;
}

int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	char **v;
	int rc;
	va_start(ap, arg);
	v = pl_ex_list(arg, ap, NULL);
	va_end(ap);
	if (!v)
		return -1;
	rc = execvp(file, v);
	free(v);
	return rc;
}

int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	char **v, **env = NULL;
	int rc;
	va_start(ap, arg);
	v = pl_ex_list(arg, ap, &env);
	va_end(ap);
	if (!v)
		return -1;
	rc = execve(path, v, env);
	free(v);
	return rc;
}
