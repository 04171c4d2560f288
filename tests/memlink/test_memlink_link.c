/*
 * memlink backend through the public io API: two processes (fork) exchanging frames
 * both ways with poll() wake-ups and with busy-polling, large MTU, configuration
 * errors with their messages, a corrupted region header and a corrupted peer.
 * Region names carry the pid so parallel runs do not meet.
 */
#include "check.h"
#include "ml_peer.h"
#include "ml_ring.h"

#include <ipkit/io.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FRAMES 20000u

static char name_[64];

static const char *uniq(const char *tag)
{
	snprintf(name_, sizeof name_, "t%d%s", (int)getpid(), tag);
	return name_;
}

static struct ipk_pool *pool_new(uint32_t buf_size)
{
	struct ipk_pool_cfg c;
	char err[256];
	struct ipk_pool *p;

	ipk_pool_cfg_default(&c);
	c.nbufs = 1024;
	c.ndescs = 2048;
	c.buf_size = buf_size;
	p = ipk_pool_create(&c, err, sizeof err);
	if (!p)
		fprintf(stderr, "pool: %s\n", err);
	return p;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A frame carrying its sequence number and a length that depends on it. */
static uint32_t frame_len(uint32_t seq, uint32_t mtu) { return 60 + (seq * 7919u) % (mtu - 46); }

static struct ipk_pkt *frame_make(struct ipk_pool *pool, uint32_t seq, uint32_t mtu)
{
	struct ipk_pkt *k = ipk_pkt_alloc(pool);
	uint32_t len = frame_len(seq, mtu), i;
	uint8_t *d;

	if (!k)
		return NULL;
	d = ipk_pkt_mtod(k);
	for (i = 0; i < len; i++)
		d[i] = (uint8_t)(seq + i);
	memcpy(d, &seq, 4);
	k->len = len;
	return k;
}

static int frame_ok(const struct ipk_pkt *k, uint32_t seq, uint32_t mtu)
{
	const uint8_t *d = ipk_pkt_mtod(k);
	uint32_t got, i;

	if (k->len != frame_len(seq, mtu))
		return 0;
	memcpy(&got, d, 4);
	if (got != seq)
		return 0;
	for (i = 4; i < k->len; i++)
		if (d[i] != (uint8_t)(seq + i))
			return 0;
	return 1;
}

/* Send FRAMES frames and check FRAMES received in order; sleeps in poll() when idle
 * (unless busy). Returns 0 on success. Bounded by 60 s (slow under sanitizers on a loaded machine). */
static int pump(struct ipk_io *io, struct ipk_pool *pool, uint32_t mtu, int busy)
{
	uint32_t sent = 0, rcvd = 0;
	uint64_t end = now_ms() + 60000;
	struct ipk_pkt *v[32];
	int fd = ipk_io_fd(io), i, n;

	while ((sent < FRAMES || rcvd < FRAMES) && now_ms() < end) {
		int k = 0, progress = 0;
		while (k < 32 && sent + (uint32_t)k < FRAMES) {
			v[k] = frame_make(pool, sent + (uint32_t)k, mtu);
			if (!v[k])
				break;
			k++;
		}
		n = ipk_io_tx_burst(io, v, k);
		for (i = n; i < k; i++)
			ipk_pkt_free(v[i]);
		sent += (uint32_t)n;
		progress += n;
		ipk_io_flush(io);
		n = ipk_io_rx_burst(io, v, 32);
		for (i = 0; i < n; i++) {
			if (!frame_ok(v[i], rcvd, mtu)) {
				fprintf(stderr, "pid %d: frame %u wrong\n", (int)getpid(), rcvd);
				return 1;
			}
			rcvd++;
			ipk_pkt_free(v[i]);
		}
		progress += n;
		if (!progress && !busy && fd >= 0 && ipk_io_arm(io) == 0) {
			struct pollfd pf = { fd, POLLIN, 0 };
			poll(&pf, 1, 100);
		}
	}
	if (sent != FRAMES || rcvd != FRAMES) {
		fprintf(stderr, "pid %d: sent %u rcvd %u\n", (int)getpid(), sent, rcvd);
		return 1;
	}
	return 0;
}

/* Both sides pump; the child is role b. Let the peer drain before closing. */
static void two_process_exchange(const char *opts_a, const char *opts_b, uint32_t mtu,
                                 uint32_t buf_size, int busy)
{
	char spec[160], err[256];
	const char *nm = uniq(busy ? "busy" : "wake");
	pid_t pid;
	int status = -1;

	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct ipk_pool *pool = pool_new(buf_size);
		struct ipk_io *io;
		int rc;
		uint32_t b, d;
		snprintf(spec, sizeof spec, "memlink:%s,role=b%s", nm, opts_b);
		io = ipk_io_open(spec, pool, err, sizeof err);
		if (!io) {
			fprintf(stderr, "child: %s\n", err);
			_exit(2);
		}
		rc = pump(io, pool, mtu, busy);
		usleep(200000);
		ipk_io_close(io);
		ipk_pool_usage(pool, &b, &d);
		ipk_pool_destroy(pool);
		_exit(rc || b || d ? 1 : 0);
	} else {
		struct ipk_pool *pool = pool_new(buf_size);
		struct ipk_io *io;
		struct ipk_io_stats st;
		uint32_t b = 1, d = 1;
		snprintf(spec, sizeof spec, "memlink:%s,role=a%s", nm, opts_a);
		io = ipk_io_open(spec, pool, err, sizeof err);
		if (!io)
			fprintf(stderr, "parent: %s\n", err);
		CHECK(io != NULL);
		if (io) {
			CHECK_EQ(ipk_io_caps(io)->mtu, mtu);
			CHECK_EQ(ipk_io_caps(io)->link, IPK_LINK_ETH);
			CHECK_EQ(pump(io, pool, mtu, busy), 0);
			ipk_io_stats(io, &st);
			CHECK_EQ(st.rx_pkts, FRAMES);
			CHECK_EQ(st.tx_pkts, FRAMES);
			CHECK_EQ(st.rx_errors, 0);
			/* No check on st.wakeups here: whether a side ever sleeps (and is then
			 * woken) depends on scheduling; a full ring can be drained while the
			 * sender still makes progress on receive (seen failing in the i686
			 * gate build). Wake-ups are exercised by the
			 * event-driven memlink interop transfers (256 MiB each way), which
			 * would take minutes on 100 ms poll timeouts alone. */
			waitpid(pid, &status, 0);
			ipk_io_close(io);
		} else {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
		}
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		ipk_pool_usage(pool, &b, &d);
		CHECK_EQ(b, 0);
		CHECK_EQ(d, 0);
		ipk_pool_destroy(pool);
	}
}

static void test_two_processes_exchange_with_wakeups(void)
{
	two_process_exchange(",slots=64", "", 1500, 2048, 0);
}

static void test_two_processes_exchange_busypoll(void)
{
	two_process_exchange(",busypoll=1", ",busypoll=1", 1500, 2048, 1);
}

static void test_two_processes_exchange_mtu_9000(void)
{
	two_process_exchange(",mtu=9000", ",mtu=9000", 9000, 16384, 0);
}

/* open must fail and the message must contain `want` */
static void expect_error(const char *spec, struct ipk_pool *pool, const char *want)
{
	char err[256] = "";
	struct ipk_io *io = ipk_io_open(spec, pool, err, sizeof err);

	CHECK(io == NULL);
	if (io)
		ipk_io_close(io);
	if (!strstr(err, want)) {
		fprintf(stderr, "spec %s: message '%s' lacks '%s'\n", spec, err, want);
		CHECK(0);
	}
}

static void test_bad_configuration_messages(void)
{
	struct ipk_pool *pool = pool_new(2048);
	char spec[160], err[256];
	struct ipk_io *a;
	uint32_t b, d;

	expect_error("memlink:x", pool, "role=a");
	expect_error("memlink:x,role=c", pool, "role=a");
	expect_error("memlink:n123456789n123456789n123456789n123456789n123456789,role=a", pool,
	             "1-48 characters");
	expect_error("memlink:x,role=a,slots=100", pool, "power of two");
	expect_error("memlink:x,role=a,slots=abc", pool, "slots");
	expect_error("memlink:x,role=a,mtu=20000", pool, "out of range");
	expect_error("memlink:x,role=a,mtu=9000", pool, "does not fit");
	expect_error("memlink:x,role=a,busypoll=2", pool, "busypoll");
	snprintf(spec, sizeof spec, "memlink:%s,role=b,wait=30", uniq("none"));
	expect_error(spec, pool, "no role=a side");
	/* MTU mismatch and a second b against a live a */
	snprintf(spec, sizeof spec, "memlink:%s,role=a", uniq("mm"));
	a = ipk_io_open(spec, pool, err, sizeof err);
	CHECK(a != NULL);
	snprintf(spec, sizeof spec, "memlink:%s,role=b,mtu=1400,wait=0", uniq("mm"));
	expect_error(spec, pool, "MTU mismatch");
	if (a) {
		struct ipk_io *b1;
		snprintf(spec, sizeof spec, "memlink:%s,role=b,wait=0", uniq("mm"));
		b1 = ipk_io_open(spec, pool, err, sizeof err);
		CHECK(b1 != NULL);
		expect_error(spec, pool, "already attached");
		if (b1)
			ipk_io_close(b1);
		b1 = ipk_io_open(spec, pool, err, sizeof err); /* re-attach after close */
		CHECK(b1 != NULL);
		if (b1)
			ipk_io_close(b1);
		ipk_io_close(a);
	}
	ipk_pool_usage(pool, &b, &d);
	CHECK_EQ(b + d, 0);
	ipk_pool_destroy(pool);
}

/* Map the region role a created, as a hostile peer would. */
static uint8_t *region_map(const char *nm, size_t *size)
{
	int fd;
	uint8_t *m;

	fd = ml_peer_region_fd(nm);
	if (fd < 0)
		return NULL;
	*size = (size_t)lseek(fd, 0, SEEK_END);
	m = (uint8_t *)mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return m == MAP_FAILED ? NULL : m;
}

static void test_corrupt_header_rejected_on_attach(void)
{
	struct ipk_pool *pool = pool_new(2048);
	char spec[160], err[256];
	struct ipk_io *a;
	uint8_t *m;
	size_t size = 0;

	snprintf(spec, sizeof spec, "memlink:%s,role=a", uniq("hdr"));
	a = ipk_io_open(spec, pool, err, sizeof err);
	CHECK(a != NULL);
	m = region_map(name_, &size);
	CHECK(m != NULL);
	if (a && m) {
		struct ml_hdr *h = (struct ml_hdr *)m;
		snprintf(spec, sizeof spec, "memlink:%s,role=b,wait=0", name_);
		h->version = 99;
		expect_error(spec, pool, "version 99");
		h->version = ML_VERSION;
		h->nslots = 1u << 20;
		expect_error(spec, pool, "inconsistent");
		h->nslots = 1024;
		h->total_size += 4096;
		expect_error(spec, pool, "inconsistent");
		h->total_size -= 4096;
		h->slot_size = 64;
		expect_error(spec, pool, "inconsistent");
	}
	if (m)
		munmap(m, size);
	if (a)
		ipk_io_close(a);
	ipk_pool_destroy(pool);
}

static void test_corrupt_peer_indices_and_descriptors_counted(void)
{
	struct ipk_pool *pool = pool_new(2048);
	char spec[160], err[256];
	struct ipk_io *a;
	struct ipk_io_stats st;
	struct ipk_pkt *v[8];
	uint8_t *m;
	size_t size = 0;
	uint32_t b, d;

	snprintf(spec, sizeof spec, "memlink:%s,role=a,slots=16,busypoll=1", uniq("peer"));
	a = ipk_io_open(spec, pool, err, sizeof err);
	CHECK(a != NULL);
	m = region_map(name_, &size);
	CHECK(m != NULL);
	if (a && m) {
		/* ring 1 carries b->a: pretend to be b */
		struct ml_ring_ctl *ctl = (struct ml_ring_ctl *)(m + ml_ring_ctl_off(1, 16));
		struct ml_desc *ds = (struct ml_desc *)(m + ml_ring_desc_off(1, 16));
		ctl->prod = 1000;                       /* far beyond the ring */
		CHECK_EQ(ipk_io_rx_burst(a, v, 8), 0);
		ctl->prod = 2;
		ds[0].off = 0;
		ds[0].len = 100000;                     /* longer than a slot */
		ds[1].off = 0;
		ds[1].len = 60;
		CHECK_EQ(ipk_io_rx_burst(a, v, 8), 1);  /* only the good one */
		ipk_pkt_free(v[0]);
		/* ring 0 carries a->b: a consumer index ahead of a's producer */
		ctl = (struct ml_ring_ctl *)(m + ml_ring_ctl_off(0, 16));
		ctl->cons = 77;
		v[0] = ipk_pkt_alloc(pool);
		v[0]->len = 60;
		CHECK_EQ(ipk_io_tx_burst(a, v, 1), 0);
		ipk_pkt_free(v[0]);
		ipk_io_stats(a, &st);
		CHECK_EQ(st.rx_errors, 3);
		CHECK_EQ(st.rx_pkts, 1);
		CHECK_EQ(st.tx_pkts, 0);
	}
	if (m)
		munmap(m, size);
	if (a)
		ipk_io_close(a);
	ipk_pool_usage(pool, &b, &d);
	CHECK_EQ(b + d, 0);
	ipk_pool_destroy(pool);
}

int main(void)
{
	RUN(test_bad_configuration_messages);
	RUN(test_corrupt_header_rejected_on_attach);
	RUN(test_corrupt_peer_indices_and_descriptors_counted);
	RUN(test_two_processes_exchange_with_wakeups);
	RUN(test_two_processes_exchange_busypoll);
	RUN(test_two_processes_exchange_mtu_9000);
	return check_summary();
}
