/*
 * svc_tool's adoptfork mode (included by svc_tool.c): forked children take their
 * parent's connections (ADOPT, svc/d_family.c), many times, while the caller
 * keeps another application busy on the other worker.
 *
 *   adoptfork IP PORT N K
 * The parent listens on PORT and makes N connections to IP:PORT through ipkitd
 * (its own listener takes them; new sockets are placed round robin, so the
 * connections are on every worker). Then K children, one after the other, each
 * opens its own session, ADOPTs all N of the parent's connecting sockets and
 * closes them again (half by naming the parent's application,
 * ipk_svc_adopt_from). Prints "adoptfork DONE/K*N"; exit 0 when every ADOPT
 * worked and every one that must be refused was: an application id that is not
 * the holder's, a grandchild naming its grandparent's application (neither its
 * parent's nor its own process's), a second session of the parent's own process
 * without naming the application (app id 0 looks in the parent process only).
 * A second session of the parent's process naming it adopts (exec's bridge).
 */
#include <sys/wait.h>

/* In a forked child: adopt each id, close it; the number adopted as exit code
 * (0..n, n <= 100). */
static void af_child(const char *path, const uint32_t *ids, int n, uint32_t papp)
{
	struct ipk_svc_opts o;
	struct ipk_svc *c;
	struct ipk_svc_sock *x;
	int i, ok = 0, err, st = -1;
	pid_t g;
	ipk_svc_opts_default(&o);
	c = ipk_svc_open(path, &o, &err);
	if (!c)
		_exit(200);
	if (ipk_svc_adopt_from(c, papp + 1000, ids[0], 16, 32, &x) != -EBADF)
		_exit(201); /* not the holder */
	g = fork();
	if (g == 0) { /* the grandchild: not a child of the holder's process */
		struct ipk_svc *gc = ipk_svc_open(path, &o, &err);
		_exit(gc && ipk_svc_adopt_from(gc, papp, ids[0], 16, 32, &x) == -EBADF ? 0 : 1);
	}
	if (g < 0 || waitpid(g, &st, 0) != g || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		_exit(202);
	for (i = 0; i < n; i++) {
		if ((i & 1 ? ipk_svc_adopt_from(c, papp, ids[i], 16, 32, &x)
		           : ipk_svc_adopt(c, ids[i], 16, 32, &x)) == 0) {
			ok++;
			ipk_svc_close(x);
		}
	}
	ipk_svc_close_all(c);
	_exit(ok);
}

static int mode_adoptfork(struct ipk_svc *svc, char **av, const char *path)
{
	struct ipk_svc_addr peer, any;
	struct ipk_svc_sock *l, *cs[100], *as[100];
	struct ipk_svc_sqe e;
	struct ipk_svc_cqe c;
	uint32_t ids[100];
	int n = atoi(av[2]), k = atoi(av[3]), i, done = 0;
	if (!path || parse_addr(av[0], av[1], &peer) < 0 || n <= 0 || n > 100 || k <= 0)
		return 2;
	if (ipk_svc_socket(svc, IPK_SVC_TCP, 16, 256, &l) < 0)
		return 1;
	ipk_svc_addr_ip4(&any, 0, (uint16_t)atoi(av[1]));
	memset(&e, 0, sizeof e);
	ipk_svc_prep_bind(&e, &any);
	if (one(l, &e, NULL) != 0)
		return 1;
	memset(&e, 0, sizeof e);
	ipk_svc_prep_listen(&e, 128);
	if (one(l, &e, NULL) != 0)
		return 1;
	memset(&e, 0, sizeof e);
	ipk_svc_prep_accept(&e, 8, 16);
	*ipk_svc_get_sqe(l) = e;
	ipk_svc_submit(l);
	for (i = 0; i < n; i++) {
		if (ipk_svc_socket(svc, IPK_SVC_TCP, 8, 16, &cs[i]) < 0)
			return 1;
		memset(&e, 0, sizeof e);
		ipk_svc_prep_connect(&e, &peer);
		if (one(cs[i], &e, NULL) != 0 || take_t(l, &c, WAIT_NS) < 0 || c.res != 0 ||
		    ipk_svc_accepted(svc, &c, &as[i]) != 0) {
			printf("adoptfork connect %d failed\n", i);
			return 1;
		}
		ids[i] = ipk_svc_sock_id(cs[i]);
	}
	printf("connected\n");
	fflush(stdout);
	{ /* a second session of this process: only by naming the application */
		struct ipk_svc_opts o;
		struct ipk_svc *b;
		struct ipk_svc_sock *x;
		int err;
		ipk_svc_opts_default(&o);
		b = ipk_svc_open(path, &o, &err);
		if (!b || ipk_svc_adopt(b, ids[0], 16, 32, &x) != -EBADF ||
		    ipk_svc_adopt_from(b, ipk_svc_app_id(svc), ids[0], 16, 32, &x) != 0) {
			printf("adoptfork own-process session: wrong answers\n");
			return 1;
		}
		ipk_svc_close_all(b); /* a member leaves: the connection goes on */
	}
	for (i = 0; i < k; i++) {
		int st = 0;
		pid_t p = fork();
		if (p == 0)
			af_child(path, ids, n, ipk_svc_app_id(svc));
		if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st))
			break;
		done += WEXITSTATUS(st) <= n ? WEXITSTATUS(st) : 0;
	}
	printf("adoptfork %d/%d\n", done, n * k);
	for (i = 0; i < n; i++) {
		ipk_svc_close(cs[i]);
		ipk_svc_close(as[i]);
	}
	ipk_svc_close(l);
	return done == n * k ? 0 : 1;
}
