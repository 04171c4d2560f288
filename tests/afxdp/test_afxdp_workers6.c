/*
 * IPv6 through AF_XDP with two workers and software steering: the reader thread owns
 * the device, so the XDP program must learn the workers' IPv6 from the runtime
 * (steer_set_addr6), or every IPv6 frame goes to the kernel and ipkit never hears
 * ND or echo. A veth pair in two namespaces this test creates (ipk<pid-hex>6l: Linux
 * at fd00:77::1; ipk<pid-hex>6k: the workers at fd00:77::2 on vk, the kernel without
 * an IPv6 address there). Linux pings fd00:77::2: every request answered once, no
 * duplicate, no frame on the wrong worker. Skips (77) without root or the ip tool.
 */
#include "check.h"

#include <ipkit/runtime.h>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char ns_l[32], ns_k[32];
static int made;

static void cleanup(void)
{
	char cmd[160];

	if (!made)
		return;
	made = 0;
	snprintf(cmd, sizeof cmd, "ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null",
	         ns_l, ns_k);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup: %s failed\n", cmd);
}

static void on_signal(int sig)
{
	cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int setup(void)
{
	char cmd[1024];
	int fd;

	snprintf(ns_l, sizeof ns_l, "ipk%04x6l", (unsigned)getpid() & 0xffff);
	snprintf(ns_k, sizeof ns_k, "ipk%04x6k", (unsigned)getpid() & 0xffff);
	atexit(cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGALRM, on_signal);
	alarm(100);
	made = 1;
	snprintf(cmd, sizeof cmd,
	         "set -e; ip netns add %s; ip netns add %s;"
	         "ip link add vl netns %s type veth peer name vk netns %s;"
	         "ip -n %s link set vl up; ip -n %s -6 addr add fd00:77::1/64 dev vl nodad;"
	         "ip netns exec %s ethtool -K vl tx off >/dev/null 2>&1 || true;"
	         "ip -n %s link set vk addrgenmode none; ip -n %s link set vk up;"
	         "ip -n %s link set lo up; ip -n %s link set lo up",
	         ns_l, ns_k, ns_l, ns_k, ns_l, ns_l, ns_l, ns_k, ns_k, ns_l, ns_k);
	if (system(cmd) != 0)
		return -1;
	snprintf(cmd, sizeof cmd, "/var/run/netns/%s", ns_k);
	fd = open(cmd, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
		return -1;
	close(fd);
	return 0;
}

static void tweak6(struct ipk_config *c, void *app)
{
	static const uint8_t a[16] = {0xfd, 0, 0, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

	(void)app;
	c->ip6_enable = 1;
	memcpy(c->ip6_addr, a, 16);
	c->ip6_prefix_len = 64;
	c->ip6_dad_transmits = 0;
	c->ip6_rs_count = 0;
}

static const struct ipk_app_ops no_app = { .start = NULL };

/* Linux's ping output (bounded by ping's own count and deadline). */
static int ping6(char *out, size_t len)
{
	char cmd[256];
	size_t at = 0;
	FILE *p;

	snprintf(cmd, sizeof cmd, "ip netns exec %s ping -6 -c 5 -i 0.2 -w 6 fd00:77::2 2>&1",
	         ns_l);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (at + 1 < len && fgets(out + at, (int)(len - at), p))
		at += strlen(out + at);
	return pclose(p);
}

static void test_afxdp_two_workers_soft_steering_answer_ping6(void)
{
	struct ipk_workers_cfg wc;
	struct ipk_workers *ws;
	char err[256], out[4096] = "";
	unsigned i;
	int rc = -1, tries;

	ipk_workers_cfg_default(&wc);
	wc.node.io_spec = "afxdp:vk,mode=skb";
	wc.node.ip4_be = IPK_IP4(10, 77, 6, 2);
	wc.node.core_tweak = tweak6;
	wc.nworkers = 2;
	wc.steer = IPK_STEER_SOFT;
	wc.app = &no_app;
	ws = ipk_workers_start(&wc, err, sizeof err);
	if (!ws)
		fprintf(stderr, "workers: %s\n", err);
	CHECK(ws != NULL);
	if (!ws)
		return;
	/* the first run may spend its time on ND; a second one must be clean */
	for (tries = 0; tries < 3 && rc != 0; tries++)
		rc = ping6(out, sizeof out);
	CHECK_EQ(rc, 0);
	CHECK(strstr(out, " 0% packet loss") != NULL);
	CHECK(strstr(out, "DUP!") == NULL);
	if (rc != 0 || strstr(out, "DUP!"))
		fprintf(stderr, "%s", out);
	ipk_workers_stop(ws);
	for (i = 0; i < 2; i++) {
		struct ipk_worker_stats st;

		CHECK_EQ(ipk_workers_stats(ws, i, &st), IPK_OK);
		CHECK_EQ(st.wrong_queue, 0);
	}
	ipk_workers_destroy(ws);
}

int main(void)
{
	if (geteuid() != 0 || system("ip -V >/dev/null 2>&1") != 0) {
		puts("test_afxdp_workers6: needs root and the ip tool: skipped");
		return 77;
	}
	if (setup() < 0) {
		fprintf(stderr, "namespace set-up failed\n");
		return 1;
	}
	RUN(test_afxdp_two_workers_soft_steering_answer_ping6);
	return check_summary();
}
