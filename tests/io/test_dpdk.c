/* io/dpdk over net_ring (a vdev whose tx ring is its own rx ring: a loopback with no
 * kernel and no privileges): EAL helper contract, zero-copy transmit of a chain and
 * its release, the copy path, hot-plug of a vdev named in the spec, and the errors
 * (EAL twice, no such port, queue taken, too few queues). EAL runs without hugepages
 * and with a private file prefix. */
#include <ipkit/io.h>

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static char err[256];

static void usage_is(struct ipk_pool *p, uint32_t bufs, uint32_t descs)
{
	uint32_t b, d;

	ipk_pool_usage(p, &b, &d);
	CHECK_EQ(b, bufs);
	CHECK_EQ(d, descs);
}

static void test_eal_consumes_up_to_double_dash(void)
{
	char prefix[64], lcores[64];
	char *argv[] = { "test_dpdk", "--no-huge", "-m", "128", "--no-pci", "--no-telemetry",
	                 prefix, lcores, "--vdev=net_ring0", "--log-level=*:error", "--",
	                 "--io", "dpdk:0", NULL };
	int argc = (int)(sizeof(argv) / sizeof(argv[0])) - 1;
	char *none[] = { "test_dpdk", "--io", "dpdk:0", NULL };

	snprintf(prefix, sizeof(prefix), "--file-prefix=ipkDu%ld", (long)getpid());
	snprintf(lcores, sizeof(lcores), "--lcores=0@(%d)", sched_getcpu() >= 0 ? sched_getcpu() : 0);
	/* no "--": nothing consumed, EAL not started */
	CHECK_EQ(ipk_io_dpdk_eal(3, none, err, sizeof(err)), 0);
	CHECK_EQ(ipk_io_dpdk_eal(argc, argv, err, sizeof(err)), 10);
	CHECK(strcmp(argv[10], "--") == 0 && strcmp(argv[11], "--io") == 0); /* untouched */
	CHECK_EQ(ipk_io_dpdk_eal(argc, argv, err, sizeof(err)), -EALREADY);
	CHECK(strstr(err, "already") != NULL);
}

/* A 54-byte header packet chained to a clone of a 1000-byte payload packet. */
static struct ipk_pkt *make_chain(struct ipk_pool *p, struct ipk_pkt **payload)
{
	struct ipk_pkt *h = ipk_pkt_alloc(p), *d = ipk_pkt_alloc(p);
	uint32_t i;

	CHECK(h && d);
	for (i = 0; i < 54; i++)
		ipk_pkt_mtod(h)[i] = (uint8_t)(0xa0 + i);
	ipk_pkt_mtod(h)[12] = 0x88; /* an ethertype nobody handles: 0x88b5 (local exp.) */
	ipk_pkt_mtod(h)[13] = 0xb5;
	h->len = 54;
	for (i = 0; i < 1000; i++)
		ipk_pkt_mtod(d)[i] = (uint8_t)(i * 7);
	d->len = 1000;
	h->next = ipk_pkt_clone(d);
	*payload = d;
	return h;
}

static struct ipk_pkt *rx_one(struct ipk_io *io)
{
	struct ipk_pkt *k[4];
	int i, n = 0;

	for (i = 0; i < 1000 && n == 0; i++)
		n = ipk_io_rx_burst(io, k, 4);
	CHECK_EQ(n, 1);
	return n == 1 ? k[0] : NULL;
}

static void loop_chain(struct ipk_io *io, struct ipk_pool *p)
{
	struct ipk_pkt *payload, *h = make_chain(p, &payload), *r;
	uint8_t want[1054];

	CHECK_EQ(ipk_pkt_linearize(h, want, sizeof(want)), 1054);
	CHECK_EQ(ipk_io_tx_burst(io, &h, 1), 1);
	CHECK_EQ(ipk_io_flush(io), 0);
	r = rx_one(io);
	if (!r)
		return;
	CHECK_EQ(r->len, 1054);
	CHECK(memcmp(ipk_pkt_mtod(r), want, sizeof(want)) == 0);
	ipk_pkt_free(r);
	/* the sent chain went back to the pool when the PMD freed its mbufs: only our
	 * own reference to the payload is left */
	CHECK_EQ(ipk_pkt_buf_refcnt(payload), 1);
	ipk_pkt_free(payload);
	usage_is(p, 0, 0);
}

static void test_zero_copy_chain_loops_back_and_is_released(void)
{
	struct ipk_pool *p = ipk_pool_create(NULL, err, sizeof(err));
	struct ipk_io *io = ipk_io_open("dpdk:0", p, err, sizeof(err)), *io2;

	CHECK(io != NULL);
	if (!io) {
		fprintf(stderr, "%s\n", err);
		ipk_pool_destroy(p);
		return;
	}
	CHECK(ipk_io_caps(io)->offloads & IPK_CAP_SG); /* net_ring: multi-seg only */
	CHECK_EQ(ipk_io_caps(io)->link, IPK_LINK_ETH);
	loop_chain(io, p);
	io2 = ipk_io_open("dpdk:0", p, err, sizeof(err));
	CHECK(io2 == NULL && strstr(err, "queue 0 is already served") != NULL);
	ipk_io_close(io);
	usage_is(p, 0, 0);
	ipk_pool_destroy(p);
}

struct ext_rec {
	struct ipk_pkt_ext x;
	int released;
};

static void ext_release(struct ipk_pkt_ext *x)
{
	((struct ext_rec *)x->arg)->released++;
}

/* A header from the pool chained to external memory (ipk_pkt_attach_ext): not in
 * the area registered with EAL, so the zero-copy port copies that chain (dp_no_ext)
 * and the record is released at transmit, before the frame is received (attached,
 * net_ring would hold it until the receive side frees the mbuf). */
static void test_external_payload_is_copied(void)
{
	static uint8_t region[2000];
	struct ipk_pool *p = ipk_pool_create(NULL, err, sizeof(err));
	struct ipk_io *io = ipk_io_open("dpdk:net_ring2", p, err, sizeof(err));
	struct ipk_pkt *h, *r;
	struct ext_rec rec;
	uint8_t want[1054];
	uint32_t i;

	CHECK(io != NULL);
	if (!io) {
		fprintf(stderr, "%s\n", err);
		ipk_pool_destroy(p);
		return;
	}
	memset(&rec, 0, sizeof(rec));
	rec.x.release = ext_release;
	rec.x.arg = &rec;
	for (i = 0; i < sizeof(region); i++)
		region[i] = (uint8_t)(i * 13);
	h = ipk_pkt_alloc(p);
	memset(ipk_pkt_mtod(h), 0xee, 54);
	ipk_pkt_mtod(h)[12] = 0x88;
	ipk_pkt_mtod(h)[13] = 0xb5;
	h->len = 54;
	h->next = ipk_pkt_attach_ext(p, region, 77, 1000, &rec.x);
	CHECK_EQ(ipk_pkt_linearize(h, want, sizeof(want)), 1054);
	CHECK_EQ(ipk_io_tx_burst(io, &h, 1), 1);
	CHECK_EQ(ipk_io_flush(io), 0);
	CHECK_EQ(rec.released, 1); /* copied: released at once */
	r = rx_one(io);
	if (r) {
		CHECK_EQ(r->len, 1054);
		CHECK(memcmp(ipk_pkt_mtod(r), want, sizeof(want)) == 0);
		ipk_pkt_free(r);
	}
	CHECK_EQ(rec.released, 1);
	ipk_io_close(io);
	usage_is(p, 0, 0);
	ipk_pool_destroy(p);
}

static void test_copy_path_and_hotplugged_vdev(void)
{
	struct ipk_pool *p = ipk_pool_create(NULL, err, sizeof(err));
	struct ipk_io *io = ipk_io_open("dpdk:net_ring1,txzc=0", p, err, sizeof(err));

	CHECK(io != NULL);
	if (io) {
		loop_chain(io, p);
		ipk_io_close(io);
	}
	/* closed and removed again: the name is free for another probe */
	io = ipk_io_open("dpdk:net_ring1,offload=0", p, err, sizeof(err));
	CHECK(io != NULL);
	ipk_io_close(io);
	usage_is(p, 0, 0);
	ipk_pool_destroy(p);
}

static void test_errors_name_the_problem(void)
{
	struct ipk_pool *p = ipk_pool_create(NULL, err, sizeof(err));
	struct ipk_io *io;

	CHECK(ipk_io_open("dpdk:9", p, err, sizeof(err)) == NULL);
	CHECK(strncmp(err, "dpdk:9: no such port", 20) == 0);
	CHECK(ipk_io_open("dpdk:eth7", p, err, sizeof(err)) == NULL);
	CHECK(strncmp(err, "dpdk:eth7: no such port", 23) == 0);
	CHECK(ipk_io_open("dpdk:net_ring2,queues=17", p, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "queues <= 16") != NULL);
	/* the first open of a port decides its queues; a later one cannot add any */
	io = ipk_io_open("dpdk:net_ring2", p, err, sizeof(err));
	CHECK(io != NULL);
	CHECK(ipk_io_open("dpdk:net_ring2,queue=1", p, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "too few queues: queue=1 asked, the port was started with "
	                  "queues=1") != NULL);
	ipk_io_close(io);
	CHECK(ipk_io_open("dpdk:net_ring3,nodeaction=x:y", p, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "no such port, and probing it as a vdev") != NULL);
	usage_is(p, 0, 0);
	ipk_pool_destroy(p);
}

int main(void)
{
	RUN(test_eal_consumes_up_to_double_dash);
	RUN(test_zero_copy_chain_loops_back_and_is_released);
	RUN(test_external_payload_is_copied);
	RUN(test_copy_path_and_hotplugged_vdev);
	RUN(test_errors_name_the_problem);
	return check_summary();
}
