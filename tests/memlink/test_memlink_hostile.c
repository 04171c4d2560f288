/*
 * memlink against a hostile peer that owns the other half of the shared memory
 * (issue 14 item 13). The victim must never read or write outside its mapping,
 * never die of SIGBUS, and must count and refuse what it cannot use:
 *   - a creator that rewrites nslots / slot_size while the attacher checks the
 *     header (the attacher must use the copy it checked, never re-read)
 *   - wild ring indices and descriptor lengths (counted, bounded work)
 *   - a region either side could shrink (SIGBUS): sealed, and an unsealed one refused
 * Run under ASan too (the sanitizer stage builds this file).
 */
#include "check.h"
#include "ml_peer.h"
#include "ml_ring.h"

#include <ipkit/io.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define ATTACHES 5000

static char name_[64];

static const char *uniq(const char *tag)
{
	snprintf(name_, sizeof name_, "h%d%s", (int)getpid(), tag);
	return name_;
}

static struct ipk_pool *pool_new(void)
{
	struct ipk_pool_cfg c;
	char err[256];
	struct ipk_pool *p;

	ipk_pool_cfg_default(&c);
	c.nbufs = 256;
	c.ndescs = 512;
	p = ipk_pool_create(&c, err, sizeof err);
	if (!p)
		fprintf(stderr, "pool: %s\n", err);
	return p;
}

/* An fd on the region role a created, opened read-write as the hostile side would. */
static int region_fd(const char *nm) { return ml_peer_region_fd(nm); }

/* The region role a created, mapped read-write as the hostile side would. */
static uint8_t *region_map(const char *nm, size_t *size)
{
	struct stat st;
	uint8_t *m;
	int fd = region_fd(nm);

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return NULL;
	}
	*size = (size_t)st.st_size;
	m = (uint8_t *)mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return m == MAP_FAILED ? NULL : m;
}

struct flipper {
	struct ml_hdr *h;
	uint32_t good_n, good_ss;
	volatile int stop;
};

/* Rewrite the geometry over and over: valid for a while, then far larger than the
 * region for a while (a few microseconds each, about the time an attach takes
 * between its checks and its use of the values). */
static void spin(unsigned n)
{
	volatile unsigned i;
	for (i = 0; i < n; i++)
		;
}

static void *flip(void *arg)
{
	struct flipper *f = (struct flipper *)arg;
	unsigned k = 0;

	while (!f->stop) {
		__atomic_store_n(&f->h->nslots, f->good_n, __ATOMIC_RELAXED);
		__atomic_store_n(&f->h->slot_size, f->good_ss, __ATOMIC_RELAXED);
		spin(500 + (k * 7919u) % 3000u);
		__atomic_store_n(&f->h->nslots, ML_MAX_SLOTS, __ATOMIC_RELAXED);
		__atomic_store_n(&f->h->slot_size, ml_slot_size(ML_MAX_MTU), __ATOMIC_RELAXED);
		spin(500 + (k * 104729u) % 3000u);
		k++;
	}
	return NULL;
}

/* One attach under the flipper; the rings are exercised when it succeeds. Returns
 * 1 attached and used, 0 refused (an inconsistent header seen). */
static int attach_once(struct ipk_pool *pool, const char *spec)
{
	char err[256];
	struct ipk_io *b = ipk_io_open(spec, pool, err, sizeof err);
	struct ipk_pkt *v[8];
	int i, got;

	if (!b) {
		CHECK(strstr(err, "inconsistent") != NULL);
		return 0;
	}
	CHECK_EQ(ipk_io_caps(b)->mtu, 1500);
	v[0] = ipk_pkt_alloc(pool);
	if (v[0]) {
		memset(ipk_pkt_mtod(v[0]), 0xab, 60);
		v[0]->len = 60;
		if (ipk_io_tx_burst(b, v, 1) != 1)
			ipk_pkt_free(v[0]);
	}
	got = ipk_io_rx_burst(b, v, 8);
	for (i = 0; i < got; i++)
		ipk_pkt_free(v[i]);
	ipk_io_close(b);
	return 1;
}

/* The creator rewrites nslots/slot_size while role b attaches, hundreds of times:
 * b either refuses (it saw the bad values in its copy) or works with the geometry
 * it checked. Before the fix, b checked one read of the header and then built its
 * rings from another, so a bad value there put them outside the mapping. */
static void test_geometry_rewritten_during_attach(void)
{
	struct ipk_pool *pool = pool_new();
	char spec[160], err[256];
	struct ipk_io *a;
	struct flipper f;
	pthread_t th;
	uint8_t *m;
	size_t size = 0;
	int i, ok = 0, refused = 0;

	snprintf(spec, sizeof spec, "memlink:%s,role=a,slots=8,busypoll=1", uniq("geo"));
	a = ipk_io_open(spec, pool, err, sizeof err);
	CHECK(a != NULL);
	m = a ? region_map(name_, &size) : NULL;
	CHECK(m != NULL);
	if (a && m) {
		f.h = (struct ml_hdr *)m;
		f.good_n = f.h->nslots;
		f.good_ss = f.h->slot_size;
		f.stop = 0;
		CHECK_EQ(pthread_create(&th, NULL, flip, &f), 0);
		snprintf(spec, sizeof spec, "memlink:%s,role=b,wait=0,busypoll=1", name_);
		for (i = 0; i < ATTACHES; i++) {
			if (attach_once(pool, spec))
				ok++;
			else
				refused++;
		}
		f.stop = 1;
		pthread_join(th, NULL);
		printf("  attached %d, refused %d\n", ok, refused);
		CHECK(ok + refused == ATTACHES);
	}
	if (m)
		munmap(m, size);
	if (a)
		ipk_io_close(a);
	ipk_pool_destroy(pool);
}

/* Role b is the victim here; the test plays role a in its region: producer index
 * far ahead (and wrapped), descriptors whose offset + length overflow 32 bits or
 * leave the slot area, a consumer index ahead of b's producer. Every bad one is
 * counted in rx_errors, nothing is read outside the region, the good frame passes. */
static void test_wild_indices_and_descriptors_from_creator(void)
{
	struct ipk_pool *pool = pool_new();
	char spec[160], err[256];
	struct ipk_io *a, *b = NULL;
	struct ipk_io_stats st;
	struct ipk_pkt *v[16];
	uint8_t *m;
	size_t size = 0;
	int i, got;

	snprintf(spec, sizeof spec, "memlink:%s,role=a,slots=8,busypoll=1", uniq("wild"));
	a = ipk_io_open(spec, pool, err, sizeof err);
	CHECK(a != NULL);
	m = a ? region_map(name_, &size) : NULL;
	CHECK(m != NULL);
	if (m) {
		snprintf(spec, sizeof spec, "memlink:%s,role=b,wait=0,busypoll=1", name_);
		b = ipk_io_open(spec, pool, err, sizeof err);
		CHECK(b != NULL);
	}
	if (b) {
		/* ring 0 carries a->b: the test writes it as a would */
		struct ml_ring_ctl *ctl = (struct ml_ring_ctl *)(m + ml_ring_ctl_off(0, 8));
		struct ml_desc *ds = (struct ml_desc *)(m + ml_ring_desc_off(0, 8));
		uint32_t ss = ml_slot_size(1500);

		ctl->prod = 0x80000000u;                 /* 2^31 frames "ready" */
		CHECK_EQ(ipk_io_rx_burst(b, v, 16), 0);
		ctl->prod = 0xfffffff0u;                 /* behind b: wrapped negative */
		CHECK_EQ(ipk_io_rx_burst(b, v, 16), 0);
		ctl->prod = 4;
		ds[0].off = 0xffffff00u;                 /* off + len wraps 32 bits */
		ds[0].len = 0x200;
		ds[1].off = 7 * ss + 64;                 /* runs past the slot area */
		ds[1].len = ss;
		ds[2].off = 0;
		ds[2].len = 0;                           /* empty */
		ds[3].off = 3 * ss;
		ds[3].len = 60;                          /* the good one */
		memset(m + ml_slots_off(0, 8, ss) + 3 * ss, 0x5a, 60);
		got = ipk_io_rx_burst(b, v, 16);
		CHECK_EQ(got, 1);
		if (got == 1) {
			CHECK_EQ(v[0]->len, 60);
			CHECK_EQ(ipk_pkt_mtod(v[0])[59], 0x5a);
		}
		for (i = 0; i < got; i++)
			ipk_pkt_free(v[i]);
		/* ring 1 carries b->a: a consumer index ahead of what b produced */
		ctl = (struct ml_ring_ctl *)(m + ml_ring_ctl_off(1, 8));
		ctl->cons = 1000;
		v[0] = ipk_pkt_alloc(pool);
		if (v[0]) {
			v[0]->len = 60;
			CHECK_EQ(ipk_io_tx_burst(b, v, 1), 0);
			ipk_pkt_free(v[0]);
		}
		ipk_io_stats(b, &st);
		CHECK_EQ(st.rx_errors, 2 + 3 + 1);
		CHECK_EQ(st.rx_pkts, 1);
		CHECK_EQ(st.tx_pkts, 0);
		ipk_io_close(b);
	}
	if (m)
		munmap(m, size);
	if (a)
		ipk_io_close(a);
	ipk_pool_destroy(pool);
}

/* Exercise both directions of a linked pair a <-> b: a frame each way. */
static void pair_traffic(struct ipk_io *a, struct ipk_io *b, struct ipk_pool *pool)
{
	struct ipk_io *io[2] = { a, b };
	struct ipk_pkt *v[8];
	int s, i, got;

	for (s = 0; s < 2; s++) {
		v[0] = ipk_pkt_alloc(pool);
		if (!v[0])
			continue;
		memset(ipk_pkt_mtod(v[0]), 0x11, 60);
		v[0]->len = 60;
		if (ipk_io_tx_burst(io[s], v, 1) != 1)
			ipk_pkt_free(v[0]);
		got = ipk_io_rx_burst(io[!s], v, 8);
		for (i = 0; i < got; i++)
			ipk_pkt_free(v[i]);
	}
}

/* A peer shrinks the region under the other (ftruncate to one page) and the pair
 * keeps polling. Touching a mapping past the end of its file raises SIGBUS, so the
 * region must be a file nobody can shrink: the ftruncate must fail. Both ends run
 * in a child so a signal is a test failure, not the end of the run. */
static void truncate_and_poll(void)
{
	struct ipk_pool *pool = pool_new();
	char spec[160], err[256];
	struct ipk_io *a, *b = NULL;
	int fd, rc = -1, k;

	snprintf(spec, sizeof spec, "memlink:%s,role=a,slots=8,busypoll=1", uniq("trunc"));
	a = ipk_io_open(spec, pool, err, sizeof err);
	if (a) {
		snprintf(spec, sizeof spec, "memlink:%s,role=b,wait=0,busypoll=1", name_);
		b = ipk_io_open(spec, pool, err, sizeof err);
	}
	if (!a || !b) {
		fprintf(stderr, "open: %s\n", err);
		_exit(3);
	}
	pair_traffic(a, b, pool);
	fd = region_fd(name_);
	if (fd >= 0) {
		rc = ftruncate(fd, ML_HDR_SIZE);
		close(fd);
	}
	printf("  ftruncate by a hostile peer: %s\n", rc == 0 ? "done" : "refused");
	for (k = 0; k < 4; k++)
		pair_traffic(a, b, pool);
	ipk_io_close(b);
	ipk_io_close(a);
	ipk_pool_destroy(pool);
	fflush(stdout);
	_exit(fd < 0 ? 5 : rc == 0 ? 4 : 0); /* shrinkable: a failure even if we survived */
}

static void test_truncated_region_never_sigbus(void)
{
	int status = 0;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0)
		truncate_and_poll();
	CHECK(pid > 0);
	if (pid <= 0)
		return;
	CHECK(waitpid(pid, &status, 0) == pid);
	if (WIFSIGNALED(status))
		fprintf(stderr, "  the pair was killed by signal %d\n", WTERMSIG(status));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* A creator that publishes a region it can still shrink (a memfd without seals, as
 * a plain file would be): role b refuses it at open, before mapping anything. */
static void test_unsealed_region_refused(void)
{
	struct ipk_pool *pool = pool_new();
	uint32_t ss = ml_slot_size(1500);
	size_t size = ml_region_size(8, ss);
	struct ml_hdr h;
	struct ml_door d;
	char spec[160], err[256], door[128];
	struct ipk_io *b;
	int fd = memfd_create("hostile", MFD_CLOEXEC), dfd;

	CHECK(fd >= 0);
	CHECK(ftruncate(fd, (off_t)size) == 0);
	memset(&h, 0, sizeof h);
	h.magic = ML_MAGIC;
	h.version = ML_VERSION;
	h.hdr_size = ML_HDR_SIZE;
	h.nslots = 8;
	h.slot_size = ss;
	h.mtu = 1500;
	h.total_size = size;
	CHECK(pwrite(fd, &h, sizeof h, 0) == (ssize_t)sizeof h);
	memset(&d, 0, sizeof d);
	d.magic = ML_DOOR_MAGIC;
	d.version = ML_VERSION;
	d.door_size = sizeof d;
	d.pid = (uint32_t)getpid();
	d.fd = fd;
	d.region_size = size;
	snprintf(door, sizeof door, "/dev/shm/ipkit-ml-%s", uniq("unsealed"));
	dfd = open(door, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(dfd >= 0);
	CHECK(write(dfd, &d, sizeof d) == (ssize_t)sizeof d);
	close(dfd);
	snprintf(spec, sizeof spec, "memlink:%s,role=b,wait=0,busypoll=1", name_);
	b = ipk_io_open(spec, pool, err, sizeof err);
	CHECK(b == NULL);
	if (b)
		ipk_io_close(b);
	else
		CHECK(strstr(err, "not sealed") != NULL);
	/* nor can the hostile side seal it later: made without MFD_ALLOW_SEALING */
	CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0); /* no MFD_ALLOW_SEALING */
	unlink(door);
	close(fd);
	ipk_pool_destroy(pool);
}

/* What is left at the door path by an older ipkit (version 1 put the region itself
 * there) is refused with a message that says so. */
static void test_version1_region_named(void)
{
	struct ipk_pool *pool = pool_new();
	struct ml_hdr h;
	char spec[160], err[256], door[128];
	struct ipk_io *b;
	int dfd;

	memset(&h, 0, sizeof h);
	h.magic = ML_MAGIC;
	h.version = 1;
	snprintf(door, sizeof door, "/dev/shm/ipkit-ml-%s", uniq("v1"));
	dfd = open(door, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(dfd >= 0);
	CHECK(write(dfd, &h, sizeof h) == (ssize_t)sizeof h);
	close(dfd);
	snprintf(spec, sizeof spec, "memlink:%s,role=b,wait=0,busypoll=1", name_);
	b = ipk_io_open(spec, pool, err, sizeof err);
	CHECK(b == NULL);
	if (b)
		ipk_io_close(b);
	else
		CHECK(strstr(err, "version 1") != NULL);
	unlink(door);
	ipk_pool_destroy(pool);
}

int main(void)
{
	RUN(test_geometry_rewritten_during_attach);
	RUN(test_wild_indices_and_descriptors_from_creator);
	RUN(test_truncated_region_never_sigbus);
	RUN(test_unsealed_region_refused);
	RUN(test_version1_region_named);
	return check_summary();
}
