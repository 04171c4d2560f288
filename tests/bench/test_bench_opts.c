/* ipkit-bench's command line (bench/bench_opts.c) and its echo check
 * (bench/bench_flow.c): bad options are refused with a message, and a changed,
 * stale or invented echo byte is counted, never taken as an answer. */
#include "bench_flow.h"

#include <string.h>

#include "../common/check.h"

static FILE *devnull;

static int parse(struct bench_opts *o, enum bench_prog prog, const char *line)
{
	char buf[512], *argv[64];
	int argc = 0;
	char *tok;
	strcpy(buf, line);
	argv[argc++] = (char *)"prog";
	for (tok = strtok(buf, " "); tok && argc < 63; tok = strtok(NULL, " "))
		argv[argc++] = tok;
	argv[argc] = NULL;
	return bench_opts_parse(o, prog, argc, argv, devnull, devnull);
}

#define IPK "--io tap:x --ip 10.0.0.2/24 "

static void test_opts_defaults_server_and_client(void)
{
	struct bench_opts o;
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK), BENCH_OPTS_OK);
	CHECK(!o.client);
	CHECK_EQ(o.duration_s, 0);
	CHECK_EQ(o.port, 10000);
	CHECK_EQ(o.proto, 6);
	CHECK_EQ(o.prefix_len, 24);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "-s 10.1.2.3"), BENCH_OPTS_OK);
	CHECK(o.client);
	CHECK_EQ(o.duration_s, 10);
	CHECK_EQ(o.timeout_ms, 5000);
	CHECK(memcmp(&o.server_ip4_be, "\x0a\x01\x02\x03", 4) == 0); /* network order */
}

static void test_opts_every_benchmark_option(void)
{
	struct bench_opts o;
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK "-s 10.0.0.1 -c 32 -d 4 -g 2 -l 100 -n 17 "
	               "-p 7 -r 5000 -t 3 -T 1 --json --busy-poll --model split --timeout 250"),
	         BENCH_OPTS_OK);
	CHECK_EQ(o.conns, 32);
	CHECK_EQ(o.depth, 4);
	CHECK_EQ(o.mode, BENCH_BURST);
	CHECK_EQ(o.len, 100);
	CHECK_EQ(o.proto, 17);
	CHECK_EQ(o.port, 7);
	CHECK_EQ(o.rate, 5000);
	CHECK_EQ(o.duration_s, 3);
	CHECK_EQ(o.timeout_ms, 250);
	CHECK_EQ(o.model, BENCH_MODEL_SPLIT);
	CHECK(o.json && o.busy_poll);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "-s 10.0.0.1 -mGET -c4"), BENCH_OPTS_OK);
	CHECK_EQ(o.len, 3);
	CHECK_EQ(o.conns, 4);
	CHECK(strcmp(o.msg, "GET") == 0);
}

static void test_opts_bad_values_refused(void)
{
	static const char *const bad[] = {
		"-c 0", "-c 70000", "-d 0", "-g 3", "-n 5", "-p 0", "-p 65536", "-l 0",
		"-n 17 -l 1473", "-t -1", "-T 0", "-s 10.0.0", "-s 10.0.0.256", "-c",
		"--model fast", "--timeout 0", "--bogus", "extra", "-x 1", "-s 0.0.0.0",
		"-s 10.0.0.1 --corrupt-echo", "--ip 10.0.0.2/33", "-c 12abc",
		"--zerocopy", "-s 10.0.0.1 --zerocopy -n 17", "--tcp-buf 16383",
		"--tcp-buf 8388481", "--tcp-buf 1M", "-s 10.0.0.1 --zerocopy -T 2",
		"--stats -T 2", "--spin-us 10001", "--spin-us -1", "--spin-us 50 --busy-poll",
		"--spin-us 5x", "--spin-us 50 -T 2",
	};
	struct bench_opts o;
	unsigned i;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char line[256];
		snprintf(line, sizeof(line), IPK "%s", bad[i]);
		if (parse(&o, BENCH_PROG_IPKIT, line) != BENCH_OPTS_ERROR) {
			fprintf(stderr, "accepted: %s\n", bad[i]);
			CHECK(0);
		}
	}
}

static void test_opts_per_program(void)
{
	struct bench_opts o;
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, "-p 1"), BENCH_OPTS_ERROR); /* no --io/--ip */
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "--io tap:x"), BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "--ip 10.0.0.1/24"), BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "--ip 10.0.0.1"), BENCH_OPTS_OK);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "-s 10.0.0.1 --zerocopy"), BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK "-s 10.0.0.1 -g 2 --zerocopy"), BENCH_OPTS_OK);
	CHECK(o.zerocopy);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "--tcp-buf 1048576"), BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK "--tcp-buf 1048576"), BENCH_OPTS_OK);
	CHECK_EQ(o.tcp_buf, 1048576);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "--stats"), BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "--spin-us 50"), BENCH_OPTS_OK);
	CHECK_EQ(o.spin_us, 50);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "--spin-us 50 --busy-poll"), BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "--spin-us 10001"), BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK "--spin-us 50"), BENCH_OPTS_OK);
	CHECK_EQ(o.spin_us, 50);
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK "--spin-us 0 --busy-poll"), BENCH_OPTS_OK);
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK "--stats"), BENCH_OPTS_OK);
	CHECK(o.stats);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "--help"), BENCH_OPTS_HELP);
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, "-h"), BENCH_OPTS_HELP);
}

/* IPv6 (the twin): -6, an address with colons in -s or --ip, a scope by interface
 * name; one family throughout; ipkit-bench refuses IPv6 without its --ip6. */
static void test_opts_ip6_twin_only_one_family(void)
{
	static const uint8_t srv[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
	static const uint8_t bind6[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	struct bench_opts o;

	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "-p 1"), BENCH_OPTS_OK);
	CHECK(!o.ip6);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "-6 -p 1"), BENCH_OPTS_OK);
	CHECK(o.ip6 && !o.client);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "-s fd00::2 -c 2"), BENCH_OPTS_OK);
	CHECK(o.ip6 && o.client);
	CHECK(memcmp(o.server_ip6, srv, 16) == 0);
	CHECK_EQ(o.server_scope, 0);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "-s fe80::2%lo"), BENCH_OPTS_OK);
	CHECK(o.server_scope != 0);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "--ip fd00::1 -6"), BENCH_OPTS_OK);
	CHECK(memcmp(o.ip6_bind, bind6, 16) == 0);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "-6 -s fd00::2 -n 17 -l 1452"), BENCH_OPTS_OK);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "-s 10.0.0.1 -n 17 -l 1472"), BENCH_OPTS_OK);
	CHECK(!o.ip6);
	/* refused */
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "-6 -s fd00::2 -n 17 -l 1453"), BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "-6 -s 10.0.0.1"), BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "--ip 10.0.0.2 -s fd00::2"), BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "-s ::"), BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "-s fd00::2::3"), BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "-s fe80::2%ipknosuchif9"), BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "--ip fd00::1%lo"), BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK "-6"), BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK "-s fd00::2"), BENCH_OPTS_ERROR);
}

/* ipkit-bench over IPv6: --ip6 ADDR/N (its own address, beside --ip) implies -6;
 * an IPv6 -s or -6 needs it; single thread only; UDP up to 1452 bytes. */
static void test_opts_ip6_ipkit_needs_own_address(void)
{
	static const uint8_t self[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3};
	static const uint8_t srv[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
	struct bench_opts o;

	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK "--ip6 fd00::3/64 -6"), BENCH_OPTS_OK);
	CHECK(o.ip6 && !o.client && o.ip6_plen == 64);
	CHECK(memcmp(o.ip6_self, self, 16) == 0);
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK "--ip6 fd00::3/112 -s fd00::2 -c 4"),
	         BENCH_OPTS_OK);
	CHECK(o.ip6 && o.client && o.ip6_plen == 112);
	CHECK(memcmp(o.server_ip6, srv, 16) == 0);
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK "--ip6 fd00::3 -p 1"), BENCH_OPTS_OK);
	CHECK(o.ip6 && o.ip6_plen == 64);
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK "--ip6 fd00::3 -p 1 -T 2"), BENCH_OPTS_OK);
	CHECK(o.ip6 && o.threads == 2 && !o.client);
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK "--ip6 fd00::3 -s fd00::2 -n 17 -l 1452"),
	         BENCH_OPTS_OK);
	/* refused */
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK "--ip6 fd00::3 -s fd00::2 -n 17 -l 1453"),
	         BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK "--ip6 fd00::3 -s 10.0.0.1"), BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK "--ip6 fd00::3 -s ::"), BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK "--ip6 fd00::3/0"), BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK "--ip6 fd00::3/129"), BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK "--ip6 10.0.0.3/24"), BENCH_OPTS_ERROR);
	/* -T/--model: a client over IPv6 may too (the runtime holds its opens until DAD) */
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, IPK "--ip6 fd00::3 -s fd00::2 -T 2 --model merge"),
	         BENCH_OPTS_OK);
	CHECK(o.ip6 && o.client && o.threads == 2);
	CHECK_EQ(parse(&o, BENCH_PROG_IPKIT, "--io tap:x --ip6 fd00::3"), BENCH_OPTS_ERROR);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "--ip6 fd00::3"), BENCH_OPTS_ERROR);
}

/* A client flow with requests 0..2 sent; returns the worker ready for echoes. */
static void flow_setup(struct bench_worker *w, struct bench_opts *o, uint8_t *sent)
{
	CHECK_EQ(parse(o, BENCH_PROG_LINUX, "-s 10.0.0.1 -l 10 -d 3"), BENCH_OPTS_OK);
	CHECK_EQ(bench_worker_init(w, o, 1), 0);
	w->flows[0].open = 1;
	CHECK_EQ(bench_worker_admit(w, &w->flows[0], 1000), 3);
	CHECK_EQ(bench_flow_tx_fill(w, &w->flows[0], sent, 30, 0), 30);
	bench_flow_tx_done(w, &w->flows[0], 30);
}

static void test_flow_echo_ok_then_corrupt_stale_invented(void)
{
	struct bench_opts o;
	struct bench_worker w;
	uint8_t sent[30], bad[10];
	flow_setup(&w, &o, sent);
	CHECK(memcmp(sent, sent + 10, 10) != 0); /* requests differ (number in bytes 0..7) */
	bench_flow_rx(&w, &w.flows[0], sent, 7, 5000);  /* split anywhere */
	bench_flow_rx(&w, &w.flows[0], sent + 7, 3, 5000);
	CHECK_EQ(w.c.requests, 1);
	CHECK_EQ(w.lat.count, 1);
	CHECK_EQ(w.lat.max, 4000);
	memcpy(bad, sent + 10, 10);
	bad[9] ^= 1;                                      /* flipped byte */
	bench_flow_rx(&w, &w.flows[0], bad, 10, 6000);
	CHECK_EQ(w.c.mismatches, 1);
	bench_flow_rx(&w, &w.flows[0], sent, 10, 6000);  /* request 0's echo again: stale */
	CHECK_EQ(w.c.mismatches, 2);
	bench_flow_rx(&w, &w.flows[0], sent, 10, 6000);  /* beyond what was sent */
	CHECK_EQ(w.c.mismatches, 3);
	CHECK_EQ(w.c.requests, 1);
	CHECK_EQ(bench_errors(&w.c), 3);
	CHECK_EQ(bench_exit_status(&o, &w.c), BENCH_EXIT_FAIL);
	bench_worker_free(&w);
}

static void test_flow_timeout_counted_once(void)
{
	struct bench_opts o;
	struct bench_worker w;
	uint8_t sent[30];
	flow_setup(&w, &o, sent);
	bench_worker_tick(&w, 1000 + 4999000000ull, NULL, NULL);
	CHECK_EQ(w.c.timeouts, 0);
	bench_worker_tick(&w, 1000 + 5000000000ull, NULL, NULL);
	bench_worker_tick(&w, 1000 + 6000000000ull, NULL, NULL);
	CHECK_EQ(w.c.timeouts, 1);
	bench_worker_free(&w);
}

/* Zero-copy pieces (numbered bytes copied, the rest a slice of the layout) rebuild
 * exactly the stream the copying path sends, across request boundaries and with
 * pieces cut short by the send buffer (max), for a generated and a -m payload. */
static void zc_matches_copy(const char *line, uint32_t cap, uint32_t max)
{
	static uint8_t layout[4096], want[4096], got[4096];
	struct bench_opts o;
	struct bench_worker w;
	struct bench_flow *f;
	uint32_t total = 0, ncopy, pos, n, pieces = 0;
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, line), BENCH_OPTS_OK);
	CHECK_EQ(bench_worker_init(&w, &o, 1), 0);
	f = &w.flows[0];
	f->open = 1;
	CHECK_EQ(bench_payload_zc_layout(&w.pay, layout, cap), 0);
	CHECK_EQ(bench_worker_admit(&w, f, 1), o.depth);
	CHECK_EQ(bench_flow_tx_fill(&w, f, want, sizeof(want), 0), o.depth * o.len);
	while ((n = bench_flow_tx_zc(&w, f, cap, max, &ncopy, &pos)) != 0 && pieces++ < 4096) {
		CHECK(n <= max && ncopy <= n && ncopy <= BENCH_SEQ_BYTES);
		CHECK(n - ncopy <= cap - pos);
		CHECK_EQ(bench_flow_tx_fill(&w, f, got + total, ncopy, 0), ncopy);
		memcpy(got + total + ncopy, layout + pos, n - ncopy);
		bench_flow_tx_done(&w, f, n);
		total += n;
	}
	CHECK_EQ(total, o.depth * o.len);
	CHECK(memcmp(got, want, total) == 0);
	bench_worker_free(&w);
}

static void test_zc_pieces_rebuild_the_copied_stream(void)
{
	struct bench_opts o;
	struct bench_worker w;
	uint8_t small[40];
	zc_matches_copy("-s 10.0.0.1 -l 1000 -d 3", 300, 4096);  /* slices cut by the layout */
	zc_matches_copy("-s 10.0.0.1 -l 1000 -d 3", 2048, 77);   /* ... by the send buffer */
	zc_matches_copy("-s 10.0.0.1 -l 5 -d 7", 64, 3);         /* shorter than the numbers */
	zc_matches_copy("-s 10.0.0.1 -mabcdefghijklmnopqrstuvwxyz0123 -d 5", 31, 10);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "-s 10.0.0.1 -m0123456789"), BENCH_OPTS_OK);
	CHECK_EQ(bench_worker_init(&w, &o, 1), 0);
	CHECK_EQ(bench_payload_zc_layout(&w.pay, small, 9), -1); /* -m longer than the buffer */
	bench_worker_free(&w);
	CHECK_EQ(parse(&o, BENCH_PROG_LINUX, "-s 10.0.0.1 -l 100"), BENCH_OPTS_OK);
	CHECK_EQ(bench_worker_init(&w, &o, 1), 0);
	CHECK_EQ(bench_payload_zc_layout(&w.pay, small, 40), -1); /* < two pattern periods */
	bench_worker_free(&w);
}

int main(void)
{
	devnull = fopen("/dev/null", "w");
	RUN(test_opts_defaults_server_and_client);
	RUN(test_opts_every_benchmark_option);
	RUN(test_opts_bad_values_refused);
	RUN(test_opts_per_program);
	RUN(test_opts_ip6_twin_only_one_family);
	RUN(test_opts_ip6_ipkit_needs_own_address);
	RUN(test_flow_echo_ok_then_corrupt_stale_invented);
	RUN(test_flow_timeout_counted_once);
	RUN(test_zc_pieces_rebuild_the_copied_stream);
	return check_summary();
}
