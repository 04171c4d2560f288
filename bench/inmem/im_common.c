/* The in-memory harnesses' shared command line, pattern, clock and report. */
#include "im_common.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint8_t im_pat[IM_PAT + IM_PAT_TAIL];
static int im_pat_ready;

const uint8_t *im_pattern(void)
{
	uint32_t x = 0x9e3779b9u, i;

	if (im_pat_ready)
		return im_pat;
	for (i = 0; i < IM_PAT; i++) {
		x ^= x << 13; /* xorshift32: bytes that no off-by-one can match */
		x ^= x >> 17;
		x ^= x << 5;
		im_pat[i] = (uint8_t)(x >> 24);
	}
	for (i = 0; i < IM_PAT_TAIL; i++)
		im_pat[IM_PAT + i] = im_pat[i];
	im_pat_ready = 1;
	return im_pat;
}

uint32_t im_req_off(uint32_t id, uint64_t k)
{
	return (uint32_t)(((uint64_t)id * 4099u + k * IM_REQ_STEP) % IM_PAT);
}

uint64_t im_wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void im_usage(FILE *f, const char *stack)
{
	fprintf(f,
	        "usage: %s-inmem [options]\n"
	        "Two %s stacks in one process and one thread over an in-memory wire (frames\n"
	        "handed over as-is); reports requests/s, ns/request, Gbit/s and engine bytes\n"
	        "per idle connection. Every payload byte is checked; a run that fails the check\n"
	        "exits 1.\n"
	        "  -w, --workload W   pingpong (default) or bulk\n"
	        "  -c, --conns N      ping-pong connections (default 1, at most %d)\n"
	        "  -l, --len N        ping-pong request bytes, echoed back (default 1, at most %u)\n"
	        "  -m, --msg N        bulk bytes per write (default 16384, at most %u)\n"
	        "  -n, --requests N   ping-pong requests to complete (default 1000000)\n"
	        "  -b, --bytes N      bulk bytes to deliver (default 1073741824)\n"
	        "  -p, --profile P    sw (software checksums, default) or offload (checksum\n"
	        "                     offload declared: tx checksums left to the 'NIC', rx\n"
	        "                     checksums reported good)\n"
	        "      --wire W       copy (default: every frame is copied into a fresh receive\n"
	        "                     buffer of the other stack, as a NIC's DMA would) or\n"
	        "                     handoff (the sender's frame buffer itself goes over)\n"
	        "      --clock C      virtual (default: 1 us per loop round, jumps to the next\n"
	        "                     timer when idle) or real (CLOCK_MONOTONIC)\n"
	        "  -t, --seconds S    wall-clock bound of the run, fails when exceeded (default 120)\n"
	        "      --corrupt K    flip one payload byte of the K-th frame carrying data (a\n"
	        "                     test of the sw profile: the frame must be dropped and resent)\n"
	        "      --max-rtx N    fail the run when the stacks retransmitted more than N\n"
	        "                     segments (ipkit: checks loss recovery with --corrupt)\n"
	        "      --max-conn-bytes N  fail the run when conn_bytes (engine memory per idle\n"
	        "                     established connection) exceeds N (ipkit)\n"
	        "      --ip6          TCP over IPv6 between fd00::1 and fd00::2 (ipkit, sw\n"
	        "                     profile; neighbours found by ND, no DAD)\n"
	        "      --zerocopy     bulk: queue packets that point into the pattern with\n"
	        "                     ipk_tcp_send instead of copying with ipk_tcp_write (ipkit\n"
	        "                     only: the other stacks have no such call here)\n"
	        "      --op-calls     ipkit: declare no packet descriptor fields\n"
	        "                     (ipk_config.pkt_fields 0): the library build then calls\n"
	        "                     pkt_data, pkt_len and pkt_chain_next as an integrator\n"
	        "                     without the declaration would\n"
	        "      --json FILE    append the result as one JSON object per line ('-' = stdout)\n"
	        "  -q, --quiet        no text line\n"
	        "  -h, --help         this text\n"
	        "Exit: 0 verified, 1 the run failed (data mismatch, stall, time bound), 2 usage.\n",
	        stack, stack, IM_MAX_CONNS, IM_MAX_LEN, IM_MAX_LEN);
}

static uint64_t im_num(const char *s, const char *what, uint64_t lo, uint64_t hi, const char *stack)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);

	if (!*s || *end || v < lo || v > hi) {
		fprintf(stderr, "%s-inmem: bad %s '%s' (%llu..%llu)\n", stack, what, s,
		        (unsigned long long)lo, (unsigned long long)hi);
		exit(2);
	}
	return (uint64_t)v;
}

static int im_pick(const char *s, const char *a, const char *b, const char *what, const char *stack)
{
	if (strcmp(s, a) == 0)
		return 0;
	if (strcmp(s, b) == 0)
		return 1;
	fprintf(stderr, "%s-inmem: bad %s '%s' (%s or %s)\n", stack, what, s, a, b);
	exit(2);
}

void im_parse(int argc, char **argv, struct im_opts *o, const char *stack)
{
	static const struct option lo[] = {
		{"workload", 1, 0, 'w'}, {"conns", 1, 0, 'c'}, {"len", 1, 0, 'l'},
		{"msg", 1, 0, 'm'}, {"requests", 1, 0, 'n'}, {"bytes", 1, 0, 'b'},
		{"profile", 1, 0, 'p'}, {"clock", 1, 0, 'K'}, {"seconds", 1, 0, 't'},
		{"corrupt", 1, 0, 'X'}, {"max-rtx", 1, 0, 'R'}, {"json", 1, 0, 'J'}, {"quiet", 0, 0, 'q'},
		{"max-conn-bytes", 1, 0, 'M'}, {"zerocopy", 0, 0, 'Z'},
		{"wire", 1, 0, 'W'}, {"op-calls", 0, 0, 'O'}, {"ip6", 0, 0, '6'},
		{"help", 0, 0, 'h'}, {0, 0, 0, 0}};
	int ch;

	memset(o, 0, sizeof(*o));
	o->conns = 1;
	o->len = 1;
	o->msg = 16384;
	o->requests = 1000000;
	o->bytes = 1ull << 30;
	o->max_seconds = 120;
	o->max_rtx = UINT64_MAX;
	o->max_conn_bytes = UINT64_MAX;
	while ((ch = getopt_long(argc, argv, "w:c:l:m:n:b:p:t:qh", lo, NULL)) != -1) {
		switch (ch) {
		case 'w': o->bulk = im_pick(optarg, "pingpong", "bulk", "workload", stack); break;
		case 'c': o->conns = (int)im_num(optarg, "-c", 1, IM_MAX_CONNS, stack); break;
		case 'l': o->len = (uint32_t)im_num(optarg, "-l", 1, IM_MAX_LEN, stack); break;
		case 'm': o->msg = (uint32_t)im_num(optarg, "-m", 1, IM_MAX_LEN, stack); break;
		case 'n': o->requests = im_num(optarg, "-n", 1, 1ull << 40, stack); break;
		case 'b': o->bytes = im_num(optarg, "-b", 1, 1ull << 44, stack); break;
		case 'p': o->offload = im_pick(optarg, "sw", "offload", "profile", stack); break;
		case 'K': o->real_clock = im_pick(optarg, "virtual", "real", "clock", stack); break;
		case 't': o->max_seconds = (double)im_num(optarg, "-t", 1, 86400, stack); break;
		case 'X': o->corrupt_at = im_num(optarg, "--corrupt", 1, 1ull << 40, stack); break;
		case 'R': o->max_rtx = im_num(optarg, "--max-rtx", 0, 1ull << 40, stack); break;
		case 'M': o->max_conn_bytes = im_num(optarg, "--max-conn-bytes", 1, 1ull << 40, stack); break;
		case 'J': o->json = optarg; break;
		case 'Z': o->zerocopy = 1; break;
		case 'O': o->op_calls = 1; break;
		case '6': o->ip6 = 1; break;
		case 'W': o->handoff = im_pick(optarg, "copy", "handoff", "wire", stack); break;
		case 'q': o->quiet = 1; break;
		case 'h': im_usage(stdout, stack); exit(0);
		default: im_usage(stderr, stack); exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s-inmem: unexpected argument '%s'\n", stack, argv[optind]);
		exit(2);
	}
	if (o->ip6 && (strcmp(stack, "ipkit") != 0 || o->offload)) {
		fprintf(stderr, "%s-inmem: --ip6 is ipkit's only, with the sw profile (no IPv6\n"
		        "offloads yet)\n", stack);
		exit(2);
	}
	if ((o->zerocopy || o->op_calls) && strcmp(stack, "ipkit") != 0) {
		fprintf(stderr, "%s-inmem: --zerocopy and --op-calls are ipkit's only\n", stack);
		exit(2);
	}
	if (o->bulk)
		o->conns = 1;
}

static void im_json(const struct im_opts *o, const struct im_result *r, double rps, double nspr,
                    double gbps)
{
	FILE *f = strcmp(o->json, "-") == 0 ? stdout : fopen(o->json, "a");

	if (!f) {
		perror(o->json);
		return;
	}
	fprintf(f,
	        "{\"tool\":\"inmem\",\"stack\":\"%s\",\"build\":\"%s\",\"workload\":\"%s\","
	        "\"profile\":\"%s\",\"clock\":\"%s\",\"conns\":%d,\"len\":%u,\"msg\":%u,"
	        "\"requests\":%llu,\"bytes\":%llu,\"seconds\":%.6f,\"req_per_s\":%.1f,"
	        "\"ns_per_req\":%.2f,\"gbit_s\":%.4f,\"conn_bytes\":%.1f,\"csum_drops\":%llu,"
	        "\"retransmits\":%llu,\"corrupted\":%llu,\"zerocopy\":%s,\"wire\":\"%s\","
	        "\"frames\":[%llu,%llu],\"wire_bytes\":[%llu,%llu],\"verified\":%s,"
	        "\"error\":",
	        r->stack, r->build, o->bulk ? "bulk" : "pingpong", o->offload ? "offload" : "sw",
	        o->real_clock ? "real" : "virtual", o->conns, o->bulk ? 0u : o->len,
	        o->bulk ? o->msg : 0u, (unsigned long long)r->requests,
	        (unsigned long long)r->bytes, r->seconds, rps, nspr, gbps, r->conn_bytes,
	        (unsigned long long)r->csum_drops, (unsigned long long)r->retransmits,
	        (unsigned long long)r->corrupted, o->zerocopy ? "true" : "false",
	        o->handoff ? "handoff" : "copy", (unsigned long long)r->frames[0],
	        (unsigned long long)r->frames[1], (unsigned long long)r->wire_bytes[0],
	        (unsigned long long)r->wire_bytes[1], r->error ? "false" : "true");
	if (r->error)
		fprintf(f, "\"%s\"}\n", r->error); /* fixed strings of the harness: no escaping */
	else
		fprintf(f, "null}\n");
	if (f != stdout)
		fclose(f);
	else
		fflush(f);
}

int im_report(const struct im_opts *o, const struct im_result *r)
{
	double s = r->seconds > 0 ? r->seconds : 1e-9;
	double rps = o->bulk ? 0 : (double)r->requests / s;
	double nspr = r->requests ? s * 1e9 / (double)r->requests : 0;
	double gbps = (double)r->bytes * 8 / s / 1e9;

	if (!o->quiet) {
		if (o->bulk)
			printf("%s %s bulk %s%s %s m=%u: %llu bytes in %.3f s: %.2f Gbit/s",
			       r->stack, r->build, o->offload ? "offload" : "sw",
			       o->zerocopy ? " zerocopy" : "", o->handoff ? "handoff" : "copy", o->msg,
			       (unsigned long long)r->bytes, r->seconds, gbps);
		else
			printf("%s %s pingpong %s %s c=%d l=%u: %llu req in %.3f s: %.0f req/s, "
			       "%.1f ns/req, %.3f Gbit/s",
			       r->stack, r->build, o->offload ? "offload" : "sw",
			       o->handoff ? "handoff" : "copy", o->conns, o->len,
			       (unsigned long long)r->requests, r->seconds, rps, nspr, gbps);
		printf(", %.0f B/idle conn, csum drops %llu, rtx %llu: %s\n", r->conn_bytes,
		       (unsigned long long)r->csum_drops, (unsigned long long)r->retransmits,
		       r->error ? r->error : "verified");
		fflush(stdout);
	}
	if (o->json)
		im_json(o, r, rps, nspr, gbps);
	return r->error ? 1 : 0;
}
