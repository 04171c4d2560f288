/*
 * libFuzzer target: the memlink backend as a hostile peer process would drive it.
 * Once per process: a memlink pair opened through the public io API (role a, the
 * "peer", and role b, the side under test; busypoll, 8 slots, MTU 1500), and the
 * region mapped a third time for the fuzzer, which then writes it as role a's
 * process could: ring 0 (a -> b) descriptors, slot bytes and prod index, ring 1
 * (b -> a) cons index, the need-wakeup flags. Role a's own io is never used.
 *
 *   op & 7: 0, 1  produce on ring 0: k descriptors, each an offset (the right slot,
 *                 or the fuzzer's 32 bits) and a length (or 16 fuzzed bits), slot
 *                 bytes a pattern; then prod = b's cons + n, n in range or not
 *           2, 3  b receives (ipk_io_rx_burst, up to 8)
 *           4     ring 1's cons set: in range, or the fuzzer's 32 bits
 *           5     b sends k frames of fuzzed lengths (ipk_io_tx_burst)
 *           6     need-wakeup flags written; b arms (ipk_io_arm)
 *           7     prod written with 32 fuzzed bits
 *
 * Invariants: every frame b receives is exactly the bytes of a descriptor that was
 * valid (length 1..slot size, inside a's slot area), in ring order, and an index
 * out of range yields nothing (checked against a model of the ring, ml_ring.h);
 * b's sends never change a byte of ring 0's descriptors or a's slots; b's
 * descriptors on ring 1 point into its own slot of the position; and b's pool is
 * back at its start after each input (received and unsent frames freed).
 */
#include "fuzz.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ipkit/io.h>

#include "fz_host.h"
#include "ml_ring.h"
#include "../memlink/ml_peer.h"

#define WHO "fuzz_memlink"
#define MAX_OPS 48

static struct {
	int ok;
	char name[32];
	struct ipk_pool *pa, *pb;
	struct ipk_io *a, *b;
	uint8_t *base;          /* our own mapping of the region */
	size_t size;
	uint32_t n, ss;         /* slots, slot size */
	struct ml_ring_ctl *ctl0, *ctl1;
	struct ml_desc *d0, *d1;
	uint8_t *slots_a, *slots_b;
	uint8_t *copy;          /* ring 0 descriptors + a's slots, before b sends */
	uint32_t bufs0, descs0; /* b's pool usage at start */
} M;

static void need(int ok, const char *what)
{
	if (!ok)
		fz_fail(WHO, what);
}

static void close_all(void)
{
	if (M.base)
		munmap(M.base, M.size);
	ipk_io_close(M.b);
	ipk_io_close(M.a);
	ipk_pool_destroy(M.pa);
	ipk_pool_destroy(M.pb);
}

static int map_region(void)
{
	char path[96];
	struct stat st;
	const struct ml_hdr *h;
	int fd;

	/* the region as another process of the same user opens it: through the door
	 * record role a published (memlink protocol 2, tests/memlink/ml_peer.h) */
	snprintf(path, sizeof(path), "/dev/shm/ipkit-ml-%s", M.name);
	fd = ml_peer_region_fd(M.name);
	if (fd < 0 || fstat(fd, &st) < 0)
		return -1;
	M.size = (size_t)st.st_size;
	M.base = (uint8_t *)mmap(NULL, M.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (M.base == MAP_FAILED) {
		M.base = NULL;
		return -1;
	}
	h = (const struct ml_hdr *)M.base;
	M.n = h->nslots;
	M.ss = h->slot_size;
	if (M.n != 8 || ml_region_size(M.n, M.ss) != M.size)
		return -1;
	M.ctl0 = (struct ml_ring_ctl *)(M.base + ml_ring_ctl_off(0, M.n));
	M.ctl1 = (struct ml_ring_ctl *)(M.base + ml_ring_ctl_off(1, M.n));
	M.d0 = (struct ml_desc *)(M.base + ml_ring_desc_off(0, M.n));
	M.d1 = (struct ml_desc *)(M.base + ml_ring_desc_off(1, M.n));
	M.slots_a = M.base + ml_slots_off(0, M.n, M.ss);
	M.slots_b = M.base + ml_slots_off(1, M.n, M.ss);
	M.copy = (uint8_t *)malloc(M.n * sizeof(struct ml_desc) + (size_t)M.n * M.ss);
	/* Every side has it mapped now: the name can go, so a crash (abort, no atexit)
	 * leaves nothing in /dev/shm (role a's close ignores the name being gone). */
	unlink(path);
	return M.copy ? 0 : -1;
}

static int setup(void)
{
	struct ipk_pool_cfg pc;
	char spec[96], err[256];

	snprintf(M.name, sizeof(M.name), "fz%ld", (long)getpid());
	ipk_pool_cfg_default(&pc);
	pc.nbufs = 64;
	M.pa = ipk_pool_create(&pc, err, sizeof(err));
	M.pb = ipk_pool_create(&pc, err, sizeof(err));
	if (!M.pa || !M.pb)
		return -1;
	snprintf(spec, sizeof(spec), "memlink:%s,role=a,busypoll=1,slots=8", M.name);
	M.a = ipk_io_open(spec, M.pa, err, sizeof(err));
	snprintf(spec, sizeof(spec), "memlink:%s,role=b,busypoll=1,slots=8,wait=1000", M.name);
	M.b = M.a ? ipk_io_open(spec, M.pb, err, sizeof(err)) : NULL;
	if (!M.b || map_region()) {
		fprintf(stderr, "%s: set-up failed: %s\n", WHO, err);
		close_all();
		return -1;
	}
	atexit(close_all);
	ipk_pool_usage(M.pb, &M.bufs0, &M.descs0);
	M.ok = 1;
	return 0;
}

struct rd {
	const uint8_t *p;
	size_t n, at;
};
static uint8_t rd8(struct rd *r) { return r->at < r->n ? r->p[r->at++] : 0; }
static uint32_t rd32(struct rd *r)
{
	uint32_t v = 0;
	int i;

	for (i = 0; i < 4; i++)
		v = v << 8 | rd8(r);
	return v;
}

static uint32_t cons0(void) { return __atomic_load_n(&M.ctl0->cons, __ATOMIC_ACQUIRE); }

static void produce(struct rd *r)
{
	uint8_t k = (uint8_t)(rd8(r) % (M.n + 1)), b;
	uint32_t c = cons0(), i, prod;

	for (i = 0; i < k; i++) {
		uint32_t pos = (c + i) & (M.n - 1), j;
		struct ml_desc *d = &M.d0[pos];

		b = rd8(r);
		d->off = b & 1 ? rd32(r) : pos * M.ss + (b & 0x80 ? (uint32_t)rd8(r) : 0u);
		d->len = b & 2 ? (uint32_t)(rd8(r) << 8 | rd8(r)) : 14u + (uint32_t)(b >> 2) * 23u;
		d->flags = b & 4 ? rd32(r) : 0;
		for (j = 0; j < 64; j++) /* the head of the slot: enough to tell frames apart */
			M.slots_a[pos * M.ss + j] = (uint8_t)(pos * 64 + j + b);
	}
	b = rd8(r);
	prod = b & 0x80 ? c + (uint32_t)(int8_t)(b << 1) / 2 : c + (b % (M.n + 1));
	__atomic_store_n(&M.ctl0->prod, prod, __ATOMIC_RELEASE);
}

/* What b must deliver now, by ml_ring.h's rules: an index out of range gives
 * nothing; else each valid descriptor in order, invalid ones skipped. */
static void receive(uint8_t burst)
{
	struct ipk_pkt *pk[8];
	uint32_t c = cons0(), prod = __atomic_load_n(&M.ctl0->prod, __ATOMIC_RELAXED);
	uint32_t avail = prod - c, i, seen = 0;
	uint64_t area = (uint64_t)M.n * M.ss;
	int got, k = 0;

	burst = (uint8_t)(1 + burst % 8);
	got = ipk_io_rx_burst(M.b, pk, burst);
	need(got >= 0 && got <= burst, "rx_burst returned more than asked");
	if (avail > M.n) {
		need(got == 0, "frames received past a corrupt prod index");
		need(cons0() == c, "cons moved on a corrupt prod index");
		return;
	}
	for (i = 0; i < avail && seen < (uint32_t)burst; i++) {
		const struct ml_desc *d = &M.d0[(c + i) & (M.n - 1)];
		if (d->len == 0 || d->len > M.ss || (uint64_t)d->off + d->len > area)
			continue;
		seen++;
		need(k < got, "a valid descriptor was not delivered");
		need(pk[k]->len == d->len && ipk_pkt_chain_len(pk[k]) == d->len,
		     "received length differs from the descriptor's");
		need(!memcmp(ipk_pkt_mtod(pk[k]), M.slots_a + d->off, d->len),
		     "received bytes differ from the slot's");
		k++;
	}
	need(k == got, "received a frame no valid descriptor gave");
	for (i = 0; i < (uint32_t)got; i++)
		ipk_pkt_free_chain(pk[i]);
}

static void send(struct rd *r)
{
	struct ipk_pkt *pk[8];
	uint32_t prod1 = __atomic_load_n(&M.ctl1->prod, __ATOMIC_RELAXED), i;
	uint8_t k = (uint8_t)(1 + rd8(r) % 8);
	size_t dlen = M.n * sizeof(struct ml_desc);
	int sent, n = 0;

	memcpy(M.copy, M.d0, dlen);
	memcpy(M.copy + dlen, M.slots_a, (size_t)M.n * M.ss);
	for (i = 0; i < k; i++) {
		uint8_t b = rd8(r);
		struct ipk_pkt *p = ipk_pkt_alloc(M.pb);
		if (!p)
			break;
		p->len = b & 0x80 ? (uint32_t)(b & 0x7f) * 16u : 60u + b;
		if (p->len > ipk_pool_buf_size(M.pb) - p->off)
			p->len = ipk_pool_buf_size(M.pb) - p->off;
		memset(ipk_pkt_mtod(p), 0xee, p->len);
		pk[n++] = p;
	}
	sent = ipk_io_tx_burst(M.b, pk, n);
	need(sent >= 0 && sent <= n, "tx_burst returned more than given");
	for (i = (uint32_t)sent; i < (uint32_t)n; i++)
		ipk_pkt_free_chain(pk[i]); /* unsent frames stay the caller's */
	need(!memcmp(M.copy, M.d0, dlen) && !memcmp(M.copy + dlen, M.slots_a, (size_t)M.n * M.ss),
	     "b's send wrote into ring 0 or a's slots");
	for (i = prod1; i != __atomic_load_n(&M.ctl1->prod, __ATOMIC_RELAXED); i++) {
		const struct ml_desc *d = &M.d1[i & (M.n - 1)];
		need(d->off == (i & (M.n - 1)) * M.ss && d->len <= M.ss && d->len > 0,
		     "b wrote a descriptor outside its own slot");
		if (i - prod1 > M.n)
			fz_fail(WHO, "b's prod moved more than the ring holds");
	}
}

static void run_op(struct rd *r)
{
	uint8_t op = rd8(r), b;

	switch (op & 7) {
	case 0: case 1: produce(r); break;
	case 2: case 3: receive(rd8(r)); break;
	case 4:
		b = rd8(r);
		__atomic_store_n(&M.ctl1->cons,
		                 b & 1 ? rd32(r) : __atomic_load_n(&M.ctl1->prod, __ATOMIC_RELAXED) -
		                                    (uint32_t)(b >> 1) % (M.n + 1),
		                 __ATOMIC_RELEASE);
		break;
	case 5: send(r); break;
	case 6:
		b = rd8(r);
		M.ctl0->need_wakeup = b & 1;
		M.ctl1->need_wakeup = (b >> 1) & 1;
		if (b & 4)
			ipk_io_arm(M.b);
		break;
	default: __atomic_store_n(&M.ctl0->prod, rd32(r), __ATOMIC_RELEASE); break;
	}
}

/* Leave the rings empty and sane for the next input: nothing pending either way. */
static void drain(void)
{
	uint32_t bo, dout;

	__atomic_store_n(&M.ctl0->prod, cons0(), __ATOMIC_RELEASE);
	__atomic_store_n(&M.ctl1->cons, __atomic_load_n(&M.ctl1->prod, __ATOMIC_RELAXED),
	                 __ATOMIC_RELEASE);
	M.ctl0->need_wakeup = M.ctl1->need_wakeup = 0;
	ipk_pool_usage(M.pb, &bo, &dout);
	need(bo == M.bufs0 && dout == M.descs0, "b's pool not back at its start");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rd r;
	int i;

	/* A world that cannot be built is a broken target, not an input to skip:
	 * returning would fuzz nothing and pass (it did, after memlink's protocol 2). */
	if (!M.ok && setup())
		fz_fail(WHO, "set-up failed");
	r.p = data;
	r.n = size;
	r.at = 0;
	for (i = 0; i < MAX_OPS && r.at < r.n; i++)
		run_op(&r);
	drain();
	return 0;
}

/* ------------------------------------------------------------ seed corpus */

int fuzz_make_corpus(const char *dir)
{
	/* three good frames, received in two bursts */
	static const uint8_t good[] = {0, 3, 0x10, 0x20, 0x30, 3, 2, 3, 2, 2, 8};
	/* a bad offset, a zero length, a length past the slot, then a good one */
	static const uint8_t bad_desc[] = {0, 4, 0x01, 0xff, 0xff, 0xff, 0x00, 0x00, 0x02, 0, 0,
	                                   0x02, 0x40, 0x00, 0x10, 4, 2, 8};
	/* prod far ahead (corrupt), receive, then sane again */
	static const uint8_t bad_prod[] = {7, 0x80, 0, 0, 0, 2, 8, 0, 1, 0x10, 1, 2, 8};
	/* b sends with a corrupt cons, then a full ring, then consumed */
	static const uint8_t send_[] = {4, 1, 0xde, 0xad, 0xbe, 0xef, 5, 4, 1, 2, 3, 4,
	                                4, 0, 5, 8, 1, 2, 3, 4, 5, 6, 7, 8, 5, 2, 0x85, 0xff,
	                                4, 16, 5, 1, 9};
	/* wake-up flags and arm */
	static const uint8_t wake[] = {6, 7, 0, 1, 0x10, 1, 5, 1, 10, 2, 1};
	int n = 0;

	n += fz_put_file(dir, "good-frames", good, sizeof(good));
	n += fz_put_file(dir, "bad-descriptors", bad_desc, sizeof(bad_desc));
	n += fz_put_file(dir, "corrupt-prod", bad_prod, sizeof(bad_prod));
	n += fz_put_file(dir, "send-corrupt-cons", send_, sizeof(send_));
	n += fz_put_file(dir, "wakeup-arm", wake, sizeof(wake));
	return n;
}
