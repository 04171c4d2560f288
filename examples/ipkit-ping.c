/*
 * ipkit-ping: ICMP echo client (RFC 792) on a real link, printing like ping(8).
 *
 *   ipkit-ping --io tap:ipk0 --ip 10.7.0.2/24 [-c 4] [-i 1.0] [-s 56] [-W 2] 10.7.0.1
 *
 * Exit 0 when at least one reply came back, 1 when none did, 2/3 on usage/setup errors.
 */
#include "app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>

#define PING_MAX 65536

struct ping_app {
	uint32_t dst_be;
	int v6;             /* DEST had a colon: ICMPv6 */
	uint8_t dst6[16];
	uint16_t id_be;
	uint32_t count, size;
	uint32_t sent, received;
	uint64_t sent_at[PING_MAX];
	uint8_t seen[PING_MAX];
	uint64_t rtt_min, rtt_max, rtt_sum;
	int quiet;
};

static uint64_t ping_clock(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void ping_reply(struct ipk_ctx *ctx, uint32_t from_be, uint16_t id_be, uint16_t seq_be,
                       uint32_t payload_len, void *opaque)
{
	struct ping_app *a = (struct ping_app *)ipk_node_app(opaque);
	uint16_t seq = ipk_ntohs(seq_be);
	uint64_t rtt;
	uint32_t f = ipk_ntohl(from_be);
	(void)ctx;
	if (id_be != a->id_be || from_be != a->dst_be || seq >= a->sent || a->seen[seq])
		return;
	a->seen[seq] = 1;
	rtt = ping_clock() - a->sent_at[seq];
	a->received++;
	a->rtt_sum += rtt;
	if (a->received == 1 || rtt < a->rtt_min)
		a->rtt_min = rtt;
	if (rtt > a->rtt_max)
		a->rtt_max = rtt;
	printf("%u bytes from %u.%u.%u.%u: icmp_seq=%u time=%.3f ms\n", payload_len + 8, f >> 24,
	       (f >> 16) & 255, (f >> 8) & 255, f & 255, seq, (double)rtt / 1e6);
	fflush(stdout);
}

/* One reply: counted once, its round-trip time kept; 0 when not ours or seen. */
static int ping_take(struct ping_app *a, uint16_t id_be, uint16_t seq, uint64_t *rtt)
{
	if (id_be != a->id_be || seq >= a->sent || a->seen[seq])
		return 0;
	a->seen[seq] = 1;
	*rtt = ping_clock() - a->sent_at[seq];
	a->received++;
	a->rtt_sum += *rtt;
	if (a->received == 1 || *rtt < a->rtt_min)
		a->rtt_min = *rtt;
	if (*rtt > a->rtt_max)
		a->rtt_max = *rtt;
	return 1;
}

static void ping6_reply(struct ipk_ctx *ctx, const uint8_t from[16], uint16_t id_be,
                        uint16_t seq_be, uint32_t payload_len, void *opaque)
{
	struct ping_app *a = (struct ping_app *)ipk_node_app(opaque);
	uint16_t seq = ipk_ntohs(seq_be);
	char txt[INET6_ADDRSTRLEN];
	uint64_t rtt;
	(void)ctx;
	if (memcmp(from, a->dst6, 16) != 0 || !ping_take(a, id_be, seq, &rtt))
		return;
	inet_ntop(AF_INET6, from, txt, sizeof(txt));
	printf("%u bytes from %s: icmp_seq=%u time=%.3f ms\n", payload_len + 8, txt, seq,
	       (double)rtt / 1e6);
	fflush(stdout);
}

static const struct ipk_ops ping_events = {.icmp_echo_reply = ping_reply,
                                           .icmp6_echo_reply = ping6_reply};

/* IPv6: wait (bounded) until DAD gave us an address to send from. */
static void ping6_wait_addr(struct ipk_node *n)
{
	uint8_t addrs[4][16];
	uint64_t end = ping_clock() + 5000000000ull;

	while (ipk_ip6_addrs(ipk_node_ctx(n), addrs, 4) < 2 && ping_clock() < end)
		ipk_node_poll(n, 1);
}

static int ping_send(struct ping_app *a, struct ipk_node *n)
{
	uint16_t seq_be = ipk_htons((uint16_t)a->sent);

	if (a->v6)
		return ipk_icmp6_echo(ipk_node_ctx(n), a->dst6, a->id_be, seq_be, a->size,
		                      ipk_node_now(n));
	return ipk_icmp_echo(ipk_node_ctx(n), a->dst_be, a->id_be, seq_be, a->size,
	                     ipk_node_now(n));
}

static void usage(FILE *f)
{
	fprintf(f, "usage: ipkit-ping --io SPEC --ip A.B.C.D/N [--ip6 ADDR/N] [options] DEST\n"
	           "Send ICMP echo requests to DEST and print the round-trip times.\n\n"
	           "  -c N             stop after N requests (default 4, at most 65536)\n"
	           "  -i SECONDS       interval between requests (default 1, may be 0.01)\n"
	           "  -s BYTES         payload size (default 56)\n"
	           "  -W SECONDS       wait this long for the last reply (default 2)\n%s",
	        app_common_help);
}

static void ping_summary(const struct ping_app *a, const char *dst)
{
	printf("\n--- %s ping statistics ---\n", dst);
	printf("%u packets transmitted, %u received, %u%% packet loss\n", a->sent, a->received,
	       a->sent ? (unsigned)((a->sent - a->received) * 100u / a->sent) : 0u);
	if (a->received)
		printf("rtt min/avg/max = %.3f/%.3f/%.3f ms\n", (double)a->rtt_min / 1e6,
		       (double)a->rtt_sum / a->received / 1e6, (double)a->rtt_max / 1e6);
}

int main(int argc, char **argv)
{
	static struct ping_app a;
	struct app_opts o;
	struct ipk_node *n;
	volatile int *stop;
	const char *dst = NULL;
	double interval = 1.0, wait_s = 2.0;
	uint64_t next, end = 0;
	int i;

	app_opts_default(&o);
	a.count = 4;
	a.size = 56;
	for (i = 1; i < argc; i++) {
		const char *v;
		int r;
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return APP_EXIT_OK;
		}
		if ((r = app_opt(&o, argc, argv, &i)) != 0) {
			if (r < 0)
				return APP_EXIT_USAGE;
			continue;
		}
		if ((r = app_arg("-c", argc, argv, &i, &v)) != 0) {
			long c = r > 0 ? strtol(v, NULL, 10) : 0;
			if (c <= 0 || c > PING_MAX) {
				fprintf(stderr, "ipkit-ping: -c wants 1..%d\n", PING_MAX);
				return APP_EXIT_USAGE;
			}
			a.count = (uint32_t)c;
		} else if ((r = app_arg("-i", argc, argv, &i, &v)) != 0) {
			interval = r > 0 ? atof(v) : -1;
			if (interval < 0.001 || interval > 3600) {
				fprintf(stderr, "ipkit-ping: -i wants 0.001..3600 seconds\n");
				return APP_EXIT_USAGE;
			}
		} else if ((r = app_arg("-W", argc, argv, &i, &v)) != 0) {
			wait_s = r > 0 ? atof(v) : -1;
			if (wait_s <= 0 || wait_s > 3600) {
				fprintf(stderr, "ipkit-ping: -W wants a positive number of seconds\n");
				return APP_EXIT_USAGE;
			}
		} else if ((r = app_arg("-s", argc, argv, &i, &v)) != 0) {
			long s = r > 0 ? strtol(v, NULL, 10) : -1;
			if (s < 0 || s > 65507 - 8) {
				fprintf(stderr, "ipkit-ping: -s wants 0..65499\n");
				return APP_EXIT_USAGE;
			}
			a.size = (uint32_t)s;
		} else if (argv[i][0] != '-' && !dst) {
			dst = argv[i];
		} else {
			fprintf(stderr, "ipkit-ping: unknown argument '%s' (see --help)\n", argv[i]);
			return APP_EXIT_USAGE;
		}
	}
	a.v6 = dst && strchr(dst, ':') != NULL;
	if (a.v6 && (inet_pton(AF_INET6, dst, a.dst6) != 1 || !o.ip6)) {
		fprintf(stderr, "ipkit-ping: an IPv6 DEST needs --ip6 (see --help)\n");
		return APP_EXIT_USAGE;
	}
	if (!dst || (!a.v6 && app_parse_ip4(dst, &a.dst_be, NULL) < 0)) {
		fprintf(stderr, "ipkit-ping: give the destination as A.B.C.D or an IPv6 address\n");
		return APP_EXIT_USAGE;
	}
	stop = app_stop_flag();
	n = app_node(&o, &ping_events, &a, NULL);
	a.id_be = ipk_htons((uint16_t)(ping_clock() & 0xffff));
	if (a.v6)
		ping6_wait_addr(n);
	printf("PING %s: %u data bytes\n", dst, a.size);
	next = ping_clock();
	while (!*stop) {
		uint64_t now = ping_clock();
		if (a.sent < a.count && now >= next) {
			a.sent_at[a.sent] = now;
			if (ping_send(&a, n) < 0)
				fprintf(stderr, "ipkit-ping: send failed for icmp_seq=%u\n", a.sent);
			a.sent++;
			next = now + (uint64_t)(interval * 1e9);
			if (a.sent == a.count)
				end = now + (uint64_t)(wait_s * 1e9);
		}
		if (a.sent == a.count && (a.received == a.count || now >= end))
			break;
		ipk_node_poll(n, 1);
	}
	ping_summary(&a, dst);
	if (o.verbose)
		app_report(n, "ipkit-ping");
	ipk_node_destroy(n);
	return a.received ? APP_EXIT_OK : APP_EXIT_FAIL;
}
