/*
 * svc_tool's figures (included by svc_tool.c): NOP round trips through ipkitd, and
 * the machine's own futex ping-pong between two processes as the floor for the
 * sleeping case. Benchmarks, not tests: they print, they do not judge.
 */
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void print_lat(const char *what, uint64_t *v, long n)
{
	uint64_t sum = 0;
	long i;
	for (i = 0; i < n; i++)
		sum += v[i];
	qsort(v, (size_t)n, sizeof *v, cmp_u64);
	printf("%s n %ld mean_ns %llu p50_ns %llu p99_ns %llu p999_ns %llu\n", what, n,
	       (unsigned long long)(sum / (uint64_t)n), (unsigned long long)v[n / 2],
	       (unsigned long long)v[n * 99 / 100], (unsigned long long)v[n * 999 / 1000]);
}

static int mode_nopbench(struct ipk_svc *svc, char **av)
{
	struct ipk_svc_sock *so;
	long n = atol(av[0]), i;
	int spin = !strcmp(av[1], "spin");
	uint64_t *lat;
	if (n < 1000 || ipk_svc_socket(svc, IPK_SVC_TCP, 8, 16, &so) < 0)
		return n < 1000 ? 2 : 1;
	lat = (uint64_t *)malloc((size_t)n * sizeof *lat);
	if (!lat)
		return 1;
	for (i = -n / 10; i < n; i++) { /* the first tenth warms up, unmeasured */
		struct ipk_svc_sqe *e = ipk_svc_get_sqe(so);
		struct ipk_svc_cqe *c;
		uint64_t t0 = now_ns();
		long spins = 0;
		ipk_svc_prep_nop(e);
		ipk_svc_submit(so);
		if (spin) {
			while (ipk_svc_peek_cqe(so, &c) != 0)
				if (++spins > 2000000000l)
					return 1;
		} else if (ipk_svc_wait_cqe(so, &c, WAIT_NS) != 0) {
			return 1;
		}
		ipk_svc_cqe_seen(so, c);
		if (i >= 0)
			lat[i] = now_ns() - t0;
	}
	print_lat(spin ? "nop_spin" : "nop_sleep", lat, n);
	free(lat);
	ipk_svc_close(so);
	return 0;
}

static void fx_wait(uint32_t *w, uint32_t v)
{
	syscall(SYS_futex, w, FUTEX_WAIT, v, NULL, NULL, 0);
}

static void fx_wake(uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Parent writes turn 1 and wakes; child answers with turn 0 and wakes: one round
 * trip = two futex wakes across processes, as a sleeping NOP through ipkitd. */
static int mode_futex_floor(char **av)
{
	long n = atol(av[0]), i;
	uint32_t *turn = (uint32_t *)mmap(NULL, 4096, PROT_READ | PROT_WRITE,
	                                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uint64_t *lat = (uint64_t *)malloc((size_t)(n > 0 ? n : 1) * sizeof *lat);
	pid_t child;
	if (n < 1000 || turn == MAP_FAILED || !lat)
		return 2;
	*turn = 0;
	child = fork();
	if (child == 0) {
		for (i = -n / 10; i < n; i++) {
			while (__atomic_load_n(turn, __ATOMIC_ACQUIRE) != 1)
				fx_wait(turn, 0);
			__atomic_store_n(turn, 0, __ATOMIC_RELEASE);
			fx_wake(turn);
		}
		_exit(0);
	}
	for (i = -n / 10; i < n; i++) {
		uint64_t t0 = now_ns();
		__atomic_store_n(turn, 1, __ATOMIC_RELEASE);
		fx_wake(turn);
		while (__atomic_load_n(turn, __ATOMIC_ACQUIRE) != 0)
			fx_wait(turn, 1);
		if (i >= 0)
			lat[i] = now_ns() - t0;
	}
	waitpid(child, NULL, 0);
	print_lat("futex_floor", lat, n);
	free(lat);
	return 0;
}

/* ------------------------------------------------------------ priorities */
#include <pthread.h>

struct flood {
	struct ipk_svc_sock *so[16];
	int n;
	int stop; /* atomic */
	uint64_t done;
};

/* Keep every flood socket's SQ full of NOPs; count what completes. */
static void *flood_main(void *arg)
{
	struct flood *f = (struct flood *)arg;
	while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
		int i;
		for (i = 0; i < f->n; i++) {
			struct ipk_svc_cqe *c;
			struct ipk_svc_sqe *e;
			while (ipk_svc_peek_cqe(f->so[i], &c) == 0) {
				ipk_svc_cqe_seen(f->so[i], c);
				__atomic_add_fetch(&f->done, 1, __ATOMIC_RELAXED);
			}
			while ((e = ipk_svc_get_sqe(f->so[i])) != NULL)
				ipk_svc_prep_nop(e);
			ipk_svc_submit(f->so[i]);
		}
	}
	return NULL;
}

/* n NOPs one at a time on so, spinning; latencies into lat. 0 or -1. */
static int probe(struct ipk_svc_sock *so, uint64_t *lat, long n)
{
	long i;
	for (i = 0; i < n; i++) {
		struct ipk_svc_sqe *e = ipk_svc_get_sqe(so);
		struct ipk_svc_cqe *c;
		uint64_t t0 = now_ns(), end = t0 + 10000000000ull;
		ipk_svc_prep_nop(e);
		ipk_svc_submit(so);
		while (ipk_svc_peek_cqe(so, &c) != 0)
			if (now_ns() > end)
				return -1;
		ipk_svc_cqe_seen(so, c);
		lat[i] = now_ns() - t0;
	}
	return 0;
}

/* prio NFLOOD N: N probe NOPs at level 0 idle, then under a flood of NFLOOD level-2
 * sockets, then a level-2 probe under the same flood (what the level buys). Prints
 * each distribution and the flood's progress during each probe. */
static int mode_prio(struct ipk_svc *svc, char **av)
{
	struct flood f;
	struct ipk_svc_sock *hi, *lo;
	pthread_t th;
	long n = atol(av[1]);
	uint64_t *lat = (uint64_t *)malloc((size_t)(n > 0 ? n : 1) * sizeof *lat), d0;
	int i, rc = 0;
	memset(&f, 0, sizeof f);
	f.n = atoi(av[0]);
	if (!lat || n < 100 || f.n < 1 || f.n > 16)
		return 2;
	if (ipk_svc_socket_prio(svc, IPK_SVC_TCP, 8, 16, 0, &hi) < 0 ||
	    ipk_svc_socket_prio(svc, IPK_SVC_TCP, 8, 16, 2, &lo) < 0)
		return 1;
	for (i = 0; i < f.n; i++)
		if (ipk_svc_socket_prio(svc, IPK_SVC_TCP, 64, 128, 2, &f.so[i]) < 0)
			return 1;
	rc |= probe(hi, lat, n);
	print_lat("prio_hi_idle", lat, n);
	pthread_create(&th, NULL, flood_main, &f);
	usleep(100000);
	d0 = __atomic_load_n(&f.done, __ATOMIC_RELAXED);
	rc |= probe(hi, lat, n);
	print_lat("prio_hi_flood", lat, n);
	printf("flood_during_hi %llu\n",
	       (unsigned long long)(__atomic_load_n(&f.done, __ATOMIC_RELAXED) - d0));
	d0 = __atomic_load_n(&f.done, __ATOMIC_RELAXED);
	rc |= probe(lo, lat, n);
	print_lat("prio_lo_flood", lat, n);
	printf("flood_during_lo %llu\n",
	       (unsigned long long)(__atomic_load_n(&f.done, __ATOMIC_RELAXED) - d0));
	__atomic_store_n(&f.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	printf("flood_total %llu\n", (unsigned long long)__atomic_load_n(&f.done, __ATOMIC_RELAXED));
	free(lat);
	return rc ? 1 : 0;
}

/* Whether /proc says pid is stopped (state T). */
static int proc_stopped(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
	return p && p[1] == ' ' && p[2] == 'T';
}

/* prio-order DAEMON_PID: with ipkitd stopped (SIGSTOP), fill one level-1 socket and
 * two level-2 sockets with 64 NOPs each and put one NOP on a level-0 socket; let
 * ipkitd go and read the completions' order (cqe->seq). Default shares (3 levels,
 * --prio-share 16): the level-0 NOP completes first; the first pass then serves 32
 * level-1 and 16 level-2 entries, so the low level progresses while a higher one
 * still has work; every NOP completes. Counted in entries, not in time. */
static int mode_prio_order(struct ipk_svc *svc, char **av)
{
	struct ipk_svc_sock *s0, *s1, *s2[2];
	struct ipk_svc_sock *all[4];
	uint32_t first = 0xffffffffu, seq0 = 0;
	int lvl_of[4] = {0, 1, 2, 2}, in48[3] = {0, 0, 0}, total = 0, i, k;
	pid_t d = (pid_t)atol(av[0]);
	uint32_t *seqs = (uint32_t *)calloc(256, sizeof *seqs);
	int *lv = (int *)calloc(256, sizeof *lv);
	if (!seqs || !lv || d <= 0)
		return 2;
	if (ipk_svc_socket_prio(svc, IPK_SVC_TCP, 64, 128, 0, &s0) < 0 ||
	    ipk_svc_socket_prio(svc, IPK_SVC_TCP, 64, 128, 1, &s1) < 0 ||
	    ipk_svc_socket_prio(svc, IPK_SVC_TCP, 64, 128, 2, &s2[0]) < 0 ||
	    ipk_svc_socket_prio(svc, IPK_SVC_TCP, 64, 128, 2, &s2[1]) < 0)
		return 1;
	all[0] = s0; all[1] = s1; all[2] = s2[0]; all[3] = s2[1];
	kill(d, SIGSTOP);
	for (k = 0; k < 1000 && !proc_stopped(d); k++) /* kill() may return first */
		usleep(1000);
	for (i = 1; i < 4; i++) {
		for (k = 0; k < 64; k++)
			ipk_svc_prep_nop(ipk_svc_get_sqe(all[i]));
		ipk_svc_submit(all[i]);
	}
	ipk_svc_prep_nop(ipk_svc_get_sqe(s0));
	ipk_svc_submit(s0);
	kill(d, SIGCONT);
	for (i = 0; i < 4; i++) {
		int want = i == 0 ? 1 : 64;
		for (k = 0; k < want; k++) {
			struct ipk_svc_cqe c;
			if (take(all[i], &c) < 0)
				return 1;
			if (total < 256) {
				seqs[total] = c.seq;
				lv[total] = lvl_of[i];
			}
			if (c.seq < first)
				first = c.seq;
			if (i == 0)
				seq0 = c.seq;
			total++;
		}
	}
	for (i = 0; i < total; i++) /* completions among the first 1 + 48 posted */
		if (seqs[i] - first < 49)
			in48[lv[i]]++;
	printf("prio_order level0_first %d first49 l0 %d l1 %d l2 %d total %d\n", seq0 == first,
	       in48[0], in48[1], in48[2], total);
	CHECK(seq0 == first, "the level-0 NOP completed first");
	CHECK(in48[1] == 32 && in48[2] == 16, "first pass: 32 level-1, 16 level-2 entries");
	CHECK(total == 193, "every NOP completed");
	free(seqs);
	free(lv);
	return fails ? 1 : 0;
}

/* scale N K: N sockets with one NOP in flight each, K completions per socket,
 * spinning; the mean and tail of submit-to-completion (issue 17's latency against
 * the number of sockets, the shape of the thesis's Table 6.4). */
static int mode_scale(struct ipk_svc *svc, char **av)
{
	long n = atol(av[0]), k = atol(av[1]), i, got = 0, total;
	struct ipk_svc_sock **v;
	uint64_t *t0, *lat, end;
	if (n <= 0 || k <= 0)
		return 2;
	total = n * k;
	v = (struct ipk_svc_sock **)calloc((size_t)n, sizeof *v);
	t0 = (uint64_t *)calloc((size_t)n, sizeof *t0);
	lat = (uint64_t *)calloc((size_t)total, sizeof *lat);
	if (!v || !t0 || !lat)
		return 1;
	for (i = 0; i < n; i++)
		if (ipk_svc_socket(svc, IPK_SVC_TCP, 8, 16, &v[i]) < 0)
			return 1;
	for (i = 0; i < n; i++) {
		ipk_svc_prep_nop(ipk_svc_get_sqe(v[i]));
		t0[i] = now_ns();
		ipk_svc_submit(v[i]);
	}
	end = now_ns() + 60000000000ull;
	while (got < total && now_ns() < end) {
		for (i = 0; i < n && got < total; i++) {
			struct ipk_svc_cqe *c;
			if (ipk_svc_peek_cqe(v[i], &c) != 0)
				continue;
			ipk_svc_cqe_seen(v[i], c);
			lat[got++] = now_ns() - t0[i];
			ipk_svc_prep_nop(ipk_svc_get_sqe(v[i]));
			t0[i] = now_ns();
			ipk_svc_submit(v[i]);
		}
	}
	{
		char name[32];
		snprintf(name, sizeof name, "scale_%ld", n);
		print_lat(name, lat, got ? got : 1);
	}
	return got == total ? 0 : 1;
}

/* openloop N RATE SECS: issue 17's latency against sockets without coordinated
 * omission. One client thread offers RATE NOPs a second in all, spread evenly
 * over N sockets (operation i goes to socket i mod N at its scheduled time
 * start + i / RATE, whether or not earlier ones completed), for SECS seconds.
 * Latency runs from the scheduled time to the completion seen by the thread, so
 * an operation submitted late because the thread or the daemon was behind counts
 * the wait too. Prints the row, how many were submitted late (over 10 us behind
 * schedule: the thread or a full SQ held them) and how many never completed
 * within 5 s after. */
static void ol_reap(struct ipk_svc_sock **v, long n, uint64_t t_start, double ns_per_op,
                   uint64_t *lat, long *got, long total)
{
	long i;
	uint64_t t = now_ns();
	for (i = 0; i < n; i++) {
		struct ipk_svc_cqe *c;
		while (*got < total && ipk_svc_peek_cqe(v[i], &c) == 0) {
			uint64_t sched = t_start + (uint64_t)((double)c->user_data * ns_per_op);
			if (c->res == 0) /* time taken once per sweep: the sweep is the reaper's
			                  * delay, as any application's would be */
				lat[(*got)++] = t > sched ? t - sched : 0;
			ipk_svc_cqe_seen(v[i], c);
		}
	}
}

static int mode_openloop(struct ipk_svc *svc, char **av)
{
	long n = atol(av[0]), rate = atol(av[1]), secs = atol(av[2]), total, next = 0, got = 0,
	     late = 0, i;
	struct ipk_svc_sock **v;
	uint64_t *lat, t_start, end;
	double ns_per_op;
	if (n <= 0 || rate <= 0 || secs <= 0 || rate > 10000000 || secs > 600)
		return 2;
	total = rate * secs;
	ns_per_op = 1e9 / (double)rate;
	v = (struct ipk_svc_sock **)calloc((size_t)n, sizeof *v);
	lat = (uint64_t *)calloc((size_t)total, sizeof *lat);
	if (!v || !lat)
		return 1;
	for (i = 0; i < n; i++)
		if (ipk_svc_socket(svc, IPK_SVC_TCP, 64, 128, &v[i]) < 0)
			return 1;
	t_start = now_ns() + 1000000; /* 1 ms to get going */
	while (next < total) {
		uint64_t t = now_ns();
		while (next < total && t_start + (uint64_t)((double)next * ns_per_op) <= t) {
			struct ipk_svc_sock *so = v[next % n];
			struct ipk_svc_sqe *e = ipk_svc_get_sqe(so);
			if (!e) /* SQ full: reap first; the operation stays due (and late) */
				break;
			ipk_svc_prep_nop(e);
			ipk_svc_sqe_set_data(e, (uint64_t)next);
			ipk_svc_submit(so);
			if (t - (t_start + (uint64_t)((double)next * ns_per_op)) > 10000)
				late++;
			next++;
		}
		ol_reap(v, n, t_start, ns_per_op, lat, &got, total);
	}
	end = now_ns() + 5000000000ull;
	while (got < total && now_ns() < end)
		ol_reap(v, n, t_start, ns_per_op, lat, &got, total);
	{
		char name[128];
		snprintf(name, sizeof name, "openloop_%ld rate %ld late %ld lost %ld", n, rate, late,
		         total - got);
		print_lat(name, lat, got ? got : 1);
	}
	for (i = 0; i < n; i++)
		ipk_svc_close(v[i]);
	free(lat);
	free(v);
	return got == total ? 0 : 1;
}

/* threads N MS: the thesis's Table 6.4 shape (its section 6.1.3): N threads, each
 * with its own socket, each with one operation in flight, for MS milliseconds;
 * every thread sleeps in ipk_svc_wait_cqe between operations (as pifus's threads
 * blocked). NOPs, so the figure is the service's own cost per socket (the thesis
 * wrote to a peer over TAP; the wire's cost does not depend on N). Prints the
 * mean and tail of submit-to-completion over all threads. */
struct thr_arg {
	struct ipk_svc_sock *so;
	uint64_t end, *lat, n, cap;
};

static void *thr_main(void *p)
{
	struct thr_arg *t = (struct thr_arg *)p;
	while (t->n < t->cap && now_ns() < t->end) {
		struct ipk_svc_cqe *c;
		uint64_t t0;
		ipk_svc_prep_nop(ipk_svc_get_sqe(t->so));
		t0 = now_ns();
		ipk_svc_submit(t->so);
		if (ipk_svc_wait_cqe(t->so, &c, 5000000000ll) < 0)
			break;
		t->lat[t->n++] = now_ns() - t0;
		ipk_svc_cqe_seen(t->so, c);
	}
	return NULL;
}

static int mode_threads(struct ipk_svc *svc, char **av)
{
	long n = atol(av[0]), ms = atol(av[1]), i, got = 0;
	struct thr_arg *t;
	pthread_t *th;
	uint64_t *all, cap = 400000;
	char name[32];
	if (n <= 0 || ms <= 0)
		return 2;
	t = (struct thr_arg *)calloc((size_t)n, sizeof *t);
	th = (pthread_t *)calloc((size_t)n, sizeof *th);
	all = (uint64_t *)calloc(cap * (size_t)n / (n > 8 ? (size_t)n / 8 : 1), sizeof *all);
	if (!t || !th || !all)
		return 1;
	if (n > 8)
		cap = cap * 8 / (uint64_t)n; /* memory bounded: 3.2 M samples in all */
	for (i = 0; i < n; i++) {
		if (ipk_svc_socket(svc, IPK_SVC_TCP, 8, 16, &t[i].so) < 0)
			return 1;
		t[i].lat = all + (uint64_t)i * cap;
		t[i].cap = cap;
	}
	for (i = 0; i < n; i++) {
		t[i].end = now_ns() + (uint64_t)ms * 1000000ull;
		if (pthread_create(&th[i], NULL, thr_main, &t[i]) != 0)
			return 1;
	}
	for (i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < n; i++) { /* compact the samples */
		memmove(all + got, t[i].lat, t[i].n * sizeof *all);
		got += (long)t[i].n;
	}
	snprintf(name, sizeof name, "threads_%ld", n);
	print_lat(name, all, got ? got : 1);
	printf("threads_%ld ops %ld\n", n, got);
	return got > 0 ? 0 : 1;
}

/* herd K: one thread sleeps in ipk_svc_wait_cqe on socket A while this one runs K
 * NOPs on socket B, spinning; then A gets its NOP. Prints the daemon's wake-up
 * system calls for the app during the K NOPs (ipk_svc_stats futex_wakes): B's
 * completions must not wake A's thread. Counted, not timed. */
struct herd_arg {
	struct ipk_svc_sock *so;
	int rc;
};

static void *herd_waiter(void *p)
{
	struct herd_arg *h = (struct herd_arg *)p;
	struct ipk_svc_cqe *c;
	h->rc = ipk_svc_wait_cqe(h->so, &c, 30000000000ll);
	if (h->rc == 0)
		ipk_svc_cqe_seen(h->so, c);
	return NULL;
}

static int mode_herd(struct ipk_svc *svc, char **av)
{
	long k = atol(av[0]), i;
	struct herd_arg h;
	struct ipk_svc_sock *b;
	struct ipk_svc_stats s0, s1;
	pthread_t th;
	memset(&h, 0, sizeof h);
	if (k <= 0 || ipk_svc_socket(svc, IPK_SVC_TCP, 8, 16, &h.so) < 0 ||
	    ipk_svc_socket(svc, IPK_SVC_TCP, 8, 16, &b) < 0)
		return 1;
	if (pthread_create(&th, NULL, herd_waiter, &h) != 0)
		return 1;
	usleep(200000); /* the waiter is asleep by now (if not, it only costs wakes) */
	ipk_svc_stats(svc, &s0);
	for (i = 0; i < k; i++) {
		struct ipk_svc_cqe *c;
		uint64_t end = now_ns() + 10000000000ull;
		ipk_svc_prep_nop(ipk_svc_get_sqe(b));
		ipk_svc_submit(b);
		while (ipk_svc_peek_cqe(b, &c) != 0)
			if (now_ns() > end)
				return 1;
		ipk_svc_cqe_seen(b, c);
	}
	ipk_svc_stats(svc, &s1);
	ipk_svc_prep_nop(ipk_svc_get_sqe(h.so));
	ipk_svc_submit(h.so);
	pthread_join(th, NULL);
	printf("herd_wakes %llu nops %ld waiter %d\n",
	       (unsigned long long)(s1.futex_wakes - s0.futex_wakes), k, h.rc);
	return h.rc == 0 ? 0 : 1;
}

/* rr IP PORT CONNS SECONDS [sleep]: CONNS TCP connections to an echo server, each
 * with one 1-byte request in flight (ipkit-bench's -g 1 -l 1), for SECONDS; the
 * client spins on the CQs, or with "sleep" sleeps on the application futex when a
 * scan found nothing. Prints requests/s and the latency distribution; every echo checked. */
struct rr_conn {
	struct ipk_svc_sock *so;
	uint8_t *tx, *rx;
	uint64_t t0;
	int busy;
	uint8_t next;
};

static int rr_issue(struct rr_conn *c)
{
	struct ipk_svc_sqe *r = ipk_svc_get_sqe(c->so), *s;
	if (!r)
		return -1;
	ipk_svc_prep_recv(c->so, r, c->rx, 64);
	ipk_svc_sqe_set_data(r, 2);
	s = ipk_svc_get_sqe(c->so);
	if (!s)
		return -1;
	c->tx[0] = c->next;
	ipk_svc_prep_send(c->so, s, c->tx, 1);
	ipk_svc_sqe_set_data(s, 1);
	c->t0 = now_ns();
	c->busy = 1;
	return ipk_svc_submit(c->so) < 0 ? -1 : 0;
}

static int rr_open(struct ipk_svc *svc, struct rr_conn *c, const struct ipk_svc_addr *peer)
{
	struct ipk_svc_sqe e;
	if (tool_socket(svc, 8, 16, &c->so) < 0)
		return -1;
	memset(&e, 0, sizeof e);
	ipk_svc_prep_connect(&e, peer);
	c->tx = (uint8_t *)ipk_svc_buf_alloc(svc, 64);
	c->rx = (uint8_t *)ipk_svc_buf_alloc(svc, 64);
	return c->tx && c->rx && one(c->so, &e, NULL) == 0 ? 0 : -1;
}

static int mode_rr(struct ipk_svc *svc, char **av)
{
	struct ipk_svc_addr peer;
	long conns = atol(av[2]), i, got = 0, cap, bad = 0;
	double secs = atof(av[3]);
	int sleep_mode = av[4] && !strcmp(av[4], "sleep");
	struct rr_conn *cs;
	uint64_t *lat, t_start, t_end;
	if (parse_addr(av[0], av[1], &peer) < 0 || conns <= 0 || secs <= 0)
		return 2;
	cap = 20000000;
	cs = (struct rr_conn *)calloc((size_t)conns, sizeof *cs);
	lat = (uint64_t *)malloc((size_t)cap * sizeof *lat);
	if (!cs || !lat)
		return 1;
	for (i = 0; i < conns; i++)
		if (rr_open(svc, &cs[i], &peer) < 0 || rr_issue(&cs[i]) < 0)
			return 1;
	/* every connection is open: a test that kills this process mid-traffic waits
	 * for this line, not for a time that a loaded machine may not meet */
	printf("rr open %ld\n", conns);
	fflush(stdout);
	t_start = now_ns();
	t_end = t_start + (uint64_t)(secs * 1e9);
	while (now_ns() < t_end && got < cap && !bad) {
		long before = got;
		uint32_t v = ipk_svc_wake_count(svc);
		for (i = 0; i < conns; i++) {
			struct rr_conn *c = &cs[i];
			struct ipk_svc_cqe *q;
			while (ipk_svc_peek_cqe(c->so, &q) == 0) {
				int res = q->res;
				uint64_t tag = q->user_data;
				ipk_svc_cqe_seen(c->so, q);
				if (res < 0 || (tag == 2 && (res != 1 || c->rx[0] != c->next)))
					bad++;
				else if (tag == 2) {
					lat[got++] = now_ns() - c->t0;
					c->next++;
					c->busy = 0;
				}
			}
			if (!c->busy && rr_issue(c) < 0)
				bad++;
		}
		if (sleep_mode && got == before)
			ipk_svc_wait_from(svc, v, 100000000);
	}
	t_end = now_ns();
	printf("rr conns %ld requests %ld rps %.0f bad %ld\n", conns, got,
	       (double)got / ((double)(t_end - t_start) / 1e9), bad);
	print_lat("rr", lat, got ? got : 1);
	{
		struct ipk_svc_stats st;
		ipk_svc_stats(svc, &st);
		printf("rr urgent_wakes %llu futex_wakes %llu\n",
		       (unsigned long long)st.urgent_wakes, (unsigned long long)st.futex_wakes);
	}
	free(lat); /* the sockets go with the app (under LeakSanitizer: svc_w2_*) */
	free(cs);
	return bad || !got ? 1 : 0;
}

/* flood NSOCK SECONDS: NSOCK sockets at level 2 kept full of NOPs for SECONDS;
 * prints the NOPs completed. Two of these side by side must both progress. */
static int mode_flood(struct ipk_svc *svc, char **av)
{
	struct flood f;
	pthread_t th;
	int i;
	memset(&f, 0, sizeof f);
	f.n = atoi(av[0]);
	if (f.n < 1 || f.n > 16)
		return 2;
	/* deep rings: the flooder always has entries waiting when ipkitd looks */
	for (i = 0; i < f.n; i++)
		if (ipk_svc_socket_prio(svc, IPK_SVC_TCP, 2048, 4096, 2, &f.so[i]) < 0)
			return 1;
	pthread_create(&th, NULL, flood_main, &f);
	usleep((useconds_t)(atof(av[1]) * 1e6));
	__atomic_store_n(&f.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	printf("flood %llu\n", (unsigned long long)f.done);
	return 0;
}

/* victim N SECS: one level-2 socket; after "ready" and half a second (a flooder
 * starts meanwhile), N NOPs one at a time, all within SECS. */
static int mode_victim(struct ipk_svc *svc, char **av)
{
	struct ipk_svc_sock *so;
	long n = atol(av[0]), done = 0;
	uint64_t end;
	if (n <= 0 || ipk_svc_socket_prio(svc, IPK_SVC_TCP, 8, 16, 2, &so) < 0)
		return 1;
	printf("ready\n");
	fflush(stdout);
	usleep(500000);
	end = now_ns() + (uint64_t)(atof(av[1]) * 1e9);
	while (done < n && now_ns() < end) {
		struct ipk_svc_cqe *c;
		ipk_svc_prep_nop(ipk_svc_get_sqe(so));
		ipk_svc_submit(so);
		while (ipk_svc_peek_cqe(so, &c) != 0 && now_ns() < end)
			;
		if (ipk_svc_peek_cqe(so, &c) != 0)
			break;
		ipk_svc_cqe_seen(so, c);
		done++;
	}
	printf("victim %ld/%ld in %.3f s\n", done, n,
	       (double)(now_ns() - (end - (uint64_t)(atof(av[1]) * 1e9))) / 1e9);
	return done == n ? 0 : 1;
}

/* fair DAEMON_PID SOCKPATH: two applications in this process on one level. V
 * connects first, F second (so F is ahead of V in ipkitd's list). With ipkitd
 * stopped, F fills 16 level-2 sockets with 2,048 NOPs each and V puts one NOP on its
 * level-2 socket; then ipkitd goes on. By the pass that completed V's NOP, F must
 * not have had all of its 32,768 served (that is 2,048 passes of the level's share
 * of 16): the share is spent in turns across applications, so V waits at most a
 * pass or two. Counted by cqe->pass, not timed. */
static int mode_fair(struct ipk_svc *v, char **av)
{
	struct ipk_svc_opts o;
	struct ipk_svc *f;
	struct ipk_svc_sock *vs, *fs[16];
	struct ipk_svc_cqe cv;
	pid_t d = (pid_t)atol(av[0]);
	uint64_t done = 0, least = UINT64_MAX;
	int i, k, err;
	ipk_svc_opts_default(&o);
	o.ring_bytes = 16u << 20;
	f = ipk_svc_open(av[1], &o, &err);
	if (!f || ipk_svc_socket_prio(v, IPK_SVC_TCP, 8, 16, 2, &vs) < 0)
		return 1;
	for (i = 0; i < 16; i++)
		if (ipk_svc_socket_prio(f, IPK_SVC_TCP, 2048, 4096, 2, &fs[i]) < 0)
			return 1;
	kill(d, SIGSTOP);
	for (k = 0; k < 1000 && !proc_stopped(d); k++)
		usleep(1000);
	for (i = 0; i < 16; i++) {
		for (k = 0; k < 2048; k++)
			ipk_svc_prep_nop(ipk_svc_get_sqe(fs[i]));
		ipk_svc_submit(fs[i]);
	}
	ipk_svc_prep_nop(ipk_svc_get_sqe(vs));
	ipk_svc_submit(vs);
	kill(d, SIGCONT);
	if (take(vs, &cv) < 0)
		return 1;
	/* F's completions from passes up to V's (cqe->pass orders them in time,
	 * whenever this process gets round to reading them) */
	for (i = 0; i < 16; i++) {
		uint64_t mine = 0;
		for (k = 0; k < 2048; k++) {
			struct ipk_svc_cqe cf;
			if (take(fs[i], &cf) < 0)
				return 1;
			mine += (int32_t)(cf.pass - cv.pass) <= 0;
		}
		done += mine;
		least = mine < least ? mine : least;
	}
	printf("fair: by V's NOP (pass %u) F had %llu of 32768 served\n", cv.pass,
	       (unsigned long long)done);
	CHECK(done < 32768, "V waited for all of F's flood");
	/* ipkitd --workers N (SVC_FAIR_WORKERS=N): F's sockets on other workers than
	 * V's are served in their own passes, which V does not compete with (passes
	 * are numbered daemon-wide); V's worker shares its level between V and the F
	 * sockets it owns, so the least-served F socket, one of those, had at most a
	 * few passes' share */
	if (getenv("SVC_FAIR_WORKERS") && atoi(getenv("SVC_FAIR_WORKERS")) > 1)
		CHECK(least <= 64, "V served within a few passes of its worker's level share");
	else
		CHECK(done <= 64, "V served within a few passes of its level's share");
	ipk_svc_close_all(f);
	return fails ? 1 : 0;
}

/* ------------------------------------------------------------ workers' races */

/* nopspin SECS NSOCK [PORT0]: NSOCK sockets (ipkitd puts new sockets round robin
 * over its workers, so with --workers 2 they sit on both), each bound to PORT0 + i
 * when PORT0 is given, each keeping DEPTH NOPs in flight for SECS seconds. Prints
 * "ready" once bound and spinning, then "nopspin OPS ops_per_s R". The figure's
 * load (two applications, each on its own worker) and the death test's victim. */
static int nopspin_bind(struct ipk_svc_sock *so, uint16_t port)
{
	struct ipk_svc_sqe e;
	struct ipk_svc_addr a;
	memset(&e, 0, sizeof e);
	ipk_svc_addr_ip4(&a, 0, port);
	ipk_svc_prep_bind(&e, &a);
	return one(so, &e, NULL);
}

static int nopspin_fill(struct ipk_svc_sock *so, uint32_t n)
{
	uint32_t i;
	for (i = 0; i < n; i++) {
		struct ipk_svc_sqe *e = ipk_svc_get_sqe(so);
		if (!e)
			return -EBUSY;
		ipk_svc_prep_nop(e);
	}
	ipk_svc_submit(so);
	return 0;
}

static int mode_nopspin(struct ipk_svc *svc, char **av, int argc)
{
	double secs = atof(av[0]);
	long ns = atol(av[1]), i;
	unsigned port0 = argc >= 3 ? (unsigned)atoi(av[2]) : 0;
	struct ipk_svc_sock *so[64];
	uint64_t ops = 0, t0, end;
	if (secs <= 0 || ns < 1 || ns > 64)
		return 2;
	for (i = 0; i < ns; i++) {
		if (ipk_svc_socket(svc, IPK_SVC_TCP, 2 * DEPTH, 4 * DEPTH, &so[i]) < 0)
			return 1;
		if (port0 && nopspin_bind(so[i], (uint16_t)(port0 + i)) != 0) {
			fprintf(stderr, "svc_tool: nopspin bind %ld failed\n", port0 + i);
			return 1;
		}
		if (nopspin_fill(so[i], DEPTH) < 0)
			return 1;
	}
	printf("ready\n");
	fflush(stdout);
	t0 = now_ns();
	end = t0 + (uint64_t)(secs * 1e9);
	while (now_ns() < end) {
		for (i = 0; i < ns; i++) {
			struct ipk_svc_cqe *c;
			uint32_t got = 0;
			while (got < DEPTH && ipk_svc_peek_cqe(so[i], &c) == 0) {
				if (c->res != 0) {
					fprintf(stderr, "svc_tool: nopspin NOP res %d\n", (int)c->res);
					return 1;
				}
				ipk_svc_cqe_seen(so[i], c);
				got++;
			}
			if (got && nopspin_fill(so[i], got) < 0)
				return 1;
			ops += got;
		}
	}
	printf("nopspin %llu ops_per_s %.0f\n", (unsigned long long)ops,
	       (double)ops * 1e9 / (double)(now_ns() - t0));
	return ops ? 0 : 1;
}

/* bindrace PORT0 COUNT GOFILE [rev]: COUNT TCP sockets (on every worker), "ready",
 * then when GOFILE exists (bounded) one BIND of PORT0 + i on socket i, all
 * submitted before any is awaited (rev: from the highest port down, so two
 * applications going opposite ways meet in the middle), so two applications doing this at once race
 * for every port on both workers. Prints "won P..." (the ports it got; fails on
 * any result other than 0 or -EADDRINUSE) and holds them until GOFILE is gone. */
static int mode_bindrace(struct ipk_svc *svc, char **av, int argc)
{
	unsigned port0 = (unsigned)atoi(av[0]);
	long n = atol(av[1]), i, t;
	int rev = argc >= 4 && !strcmp(av[3], "rev");
	struct ipk_svc_sock *so[256];
	if (n < 1 || n > 256 || port0 + (unsigned long)n > 65535)
		return 2;
	for (i = 0; i < n; i++)
		if (ipk_svc_socket(svc, IPK_SVC_TCP, 4, 8, &so[i]) < 0)
			return 1;
	printf("ready\n");
	fflush(stdout);
	for (t = 0; access(av[2], F_OK) != 0; t++) { /* spin: both start together */
		if (t > 2000000)
			return 1;
		sched_yield();
	}
	for (i = 0; i < n; i++) {
		long k = rev ? n - 1 - i : i;
		struct ipk_svc_sqe *e = ipk_svc_get_sqe(so[k]);
		struct ipk_svc_addr a;
		ipk_svc_addr_ip4(&a, 0, (uint16_t)(port0 + k));
		ipk_svc_prep_bind(e, &a);
		ipk_svc_submit(so[k]);
	}
	printf("won");
	for (i = 0; i < n; i++) {
		struct ipk_svc_cqe c;
		int rc = take(so[i], &c);
		if (rc < 0 || (c.res != 0 && c.res != -EADDRINUSE)) {
			fprintf(stderr, "svc_tool: bindrace port %ld: %d %d\n", port0 + i, rc, (int)c.res);
			return 1;
		}
		if (c.res == 0)
			printf(" %ld", port0 + i);
	}
	printf("\n");
	fflush(stdout);
	/* hold the ports until the test has both answers: GOFILE removed (bounded) */
	for (t = 0; access(av[2], F_OK) == 0 && t < 20000; t++)
		usleep(1000);
	return 0;
}
