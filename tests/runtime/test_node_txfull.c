/*
 * runtime/node.c: a device that refuses frames (full ring, nobody draining it) is
 * retried with a doubling wait (1 ms up to 64 ms), not every millisecond forever
 * (issue 14, the class of the core's packet-less retry).
 *
 * One node on a memlink role a with no role b: its 64-slot transmit ring fills and
 * stays full. 600 UDP datagrams leave more than the ring takes waiting in the node's
 * queue; one second of ipk_node_poll(n, 1000) must then sleep a few dozen times,
 * not ~1000 (the fixed 1 ms retry made each call return after 1 ms).
 */
#include "check.h"

#include <ipkit/runtime.h>

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void test_full_device_retry_backs_off(void)
{
	static const uint8_t peer_mac[6] = {2, 0, 0, 0, 0, 9};
	struct ipk_node_cfg nc;
	struct ipk_node_stats st;
	struct ipk_node *n;
	char err[256], spec[96];
	uint8_t msg[200];
	uint64_t t0, sleeps0;
	unsigned i, polls = 0;

	snprintf(spec, sizeof(spec), "memlink:ipktf%d,role=a,slots=64", (int)getpid());
	ipk_node_cfg_default(&nc);
	nc.io_spec = spec;
	nc.ip4_be = IPK_IP4(10, 9, 2, 1);
	n = ipk_node_create(&nc, err, sizeof(err));
	if (!n)
		fprintf(stderr, "node: %s\n", err);
	CHECK(n != NULL);
	if (!n)
		return;
	CHECK_EQ(ipk_arp_add_static(ipk_node_ctx(n), IPK_IP4(10, 9, 2, 2), peer_mac), IPK_OK);
	memset(msg, 0x5a, sizeof(msg));
	for (i = 0; i < 600; i++)
		(void)ipk_udp_sendto(ipk_node_ctx(n), ipk_htons(9000), IPK_IP4(10, 9, 2, 2),
		                     ipk_htons(9), msg, sizeof(msg), ipk_node_now(n));
	ipk_node_poll(n, 0);
	ipk_node_stats(n, &st);
	sleeps0 = st.sleeps;
	t0 = now_ns();
	while (now_ns() - t0 < 1000000000ull && polls < 5000) {
		ipk_node_poll(n, 1000);
		polls++;
	}
	ipk_node_stats(n, &st);
	/* 1 + 2 + ... + 32 ms, then one per 64 ms: about 20 in the second */
	printf("  %u polls, %llu sleeps in 1 s\n", polls,
	       (unsigned long long)(st.sleeps - sleeps0));
	CHECK(polls <= 60);
	CHECK(st.sleeps - sleeps0 <= 60);
	ipk_node_destroy(n);
}

int main(void)
{
	RUN(test_full_device_retry_backs_off);
	return check_summary();
}
