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
