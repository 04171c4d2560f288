/*
 * ipkit-sim-demo: two engines in one process, a client fetching a deterministic
 * byte stream from a server over a simulated lossy link, verified by SHA-256, with
 * a pcap of everything that crossed the wire.
 *
 *   ipkit-sim-demo [--bytes N] [--loss P] [--seed S] [--rate BPS] [--rtt MS |
 *                  --delay NS] [--pcap FILE]
 *
 * Exit status: 0 when the transfer completed and the digests match, 1 on mismatch
 * or timeout, 2 on bad arguments or setup failure.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps.h"
#include "sim.h"

/* not a well-known port, so capture tools do not dissect the stream as HTTP etc. */
#define DEMO_PORT 40000

struct opts {
	uint64_t bytes, seed, rate, delay_ns;
	double loss;
	const char *pcap;
};

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: ipkit-sim-demo [options]\n"
	        "  --bytes N     bytes to transfer (default 8388608 = 8 MiB)\n"
	        "  --loss P      loss probability per frame, each direction (default 0.01)\n"
	        "  --seed S      simulation seed (default 1)\n"
	        "  --rate BPS    link rate in bit/s (default 100000000)\n"
	        "  --rtt MS      round-trip propagation time in ms (default 10)\n"
	        "  --delay NS    one-way propagation delay in ns (instead of --rtt)\n"
	        "  --pcap FILE   capture file (default ipkit-demo.pcap; '-' for none)\n"
	        "  --help        this text\n");
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || s[0] == '-')
		return -1;
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	int i;

	o->bytes = 8u << 20;
	o->loss = 0.01;
	o->seed = 1;
	o->rate = 100000000u;
	o->delay_ns = SIM_MS(5);
	o->pcap = "ipkit-demo.pcap";
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t ms;
		char *end;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			exit(0);
		}
		if (!v)
			return -1;
		i++;
		if (!strcmp(a, "--bytes")) {
			if (parse_u64(v, &o->bytes))
				return -1;
		} else if (!strcmp(a, "--seed")) {
			if (parse_u64(v, &o->seed))
				return -1;
		} else if (!strcmp(a, "--rate")) {
			if (parse_u64(v, &o->rate) || o->rate == 0)
				return -1;
		} else if (!strcmp(a, "--delay")) {
			if (parse_u64(v, &o->delay_ns))
				return -1;
		} else if (!strcmp(a, "--rtt")) {
			if (parse_u64(v, &ms))
				return -1;
			o->delay_ns = SIM_MS(ms) / 2;
		} else if (!strcmp(a, "--loss")) {
			o->loss = strtod(v, &end);
			if (*end || end == v || !(o->loss >= 0.0 && o->loss < 1.0))
				return -1;
		} else if (!strcmp(a, "--pcap")) {
			o->pcap = strcmp(v, "-") ? v : NULL;
		} else {
			return -1;
		}
	}
	return 0;
}

struct demo {
	struct sim_bulk server, client;
	struct sim_bulk_conn *conn;
};

static int demo_done(void *arg)
{
	struct demo *d = (struct demo *)arg;

	return d->conn && d->conn->closed;
}

static void print_summary(const struct opts *o, struct sim *s, struct demo *d,
                          struct sim_node *cn, struct sim_node *sn, struct sim_link *l,
                          int match)
{
	const struct sim_bulk_conn *c = d->conn, *sv = &d->server.conns[0];
	const struct ipk_counters *cc = sim_node_counters(cn), *sc = sim_node_counters(sn);
	struct sim_link_stats ls;
	uint64_t t = c->t_eof ? c->t_eof - c->t_start : s->now - c->t_start;
	char hex[65];

	sim_link_totals(l, &ls);
	printf("ipkit-sim-demo: seed %" PRIu64 ", %.1f Mbit/s, RTT %.1f ms, loss %.2f%%\n",
	       o->seed, (double)o->rate / 1e6, (double)(2 * o->delay_ns) / 1e6, o->loss * 100);
	printf("  bytes received     %" PRIu64 " of %" PRIu64 "\n", c->pos, o->bytes);
	printf("  virtual time       %.3f s (transfer), %.3f s (total)\n", (double)t / 1e9,
	       (double)s->now / 1e9);
	printf("  goodput            %.2f Mbit/s\n",
	       t ? (double)c->pos * 8.0 / ((double)t / 1e9) / 1e6 : 0.0);
	printf("  handshake          %.3f ms\n",
	       c->connected ? (double)(c->t_connected - c->t_start) / 1e6 : -1.0);
	printf("  retransmissions    %" PRIu64 " (server) + %" PRIu64 " (client), RTOs %" PRIu64
	       " + %" PRIu64 ", fast %" PRIu64 "\n",
	       sc->tcp_retransmits, cc->tcp_retransmits, sc->tcp_rto, cc->tcp_rto,
	       sc->tcp_fast_retransmits + cc->tcp_fast_retransmits);
	printf("  link               %" PRIu64 " frames sent, %" PRIu64 " lost, %" PRIu64
	       " queue drops\n",
	       ls.sent, ls.drop[SIM_LDROP_LOSS] + ls.drop[SIM_LDROP_BURST],
	       ls.drop[SIM_LDROP_QUEUE]);
	if (c->have_digest) {
		sha256_hex(c->digest, hex);
		printf("  sha256 (client)    %s\n", hex);
	}
	if (sv->have_digest) {
		sha256_hex(sv->digest, hex);
		printf("  sha256 (server)    %s\n", hex);
	}
	printf("  SHA-256 match:     %s\n", match ? "yes" : "no");
	if (o->pcap)
		printf("  pcap               %s (%" PRIu64 " bytes)\n", o->pcap, l->pcap_bytes);
}

static int run_demo(const struct opts *o)
{
	struct sim *s = sim_create(o->seed);
	struct ipk_config ca, cb;
	struct sim_link_cfg lc;
	struct sim_node *cn, *sn;
	struct sim_link *l;
	static struct demo d;
	enum sim_status st;
	int match, rc;

	sim_node_config(&ca, 1);
	sim_node_config(&cb, 2);
	cn = s ? sim_node_create(s, &ca, NULL) : NULL;
	sn = s ? sim_node_create(s, &cb, NULL) : NULL;
	sim_link_cfg_default(&lc);
	lc.rate_bps = o->rate;
	lc.delay_ns = o->delay_ns;
	lc.loss = o->loss;
	l = cn && sn ? sim_connect(s, cn, sn, &lc) : NULL;
	if (!l || (o->pcap && sim_link_pcap(l, o->pcap)) ||
	    sim_bulk_init(&d.server, sn, ipk_htons(DEMO_PORT), o->bytes, o->seed) ||
	    sim_bulk_init(&d.client, cn, 0, 0, 0) ||
	    sim_bulk_connect(&d.client, cb.ip4_be, ipk_htons(DEMO_PORT), &d.conn)) {
		fprintf(stderr, "ipkit-sim-demo: setup failed (engine, memory or pcap file)\n");
		sim_destroy(s);
		return 2;
	}
	/* generous bound: a lossy path never needs more than minutes of virtual time */
	st = sim_run(s, SIM_SEC(600), demo_done, &d);
	match = d.conn->have_digest && d.server.conns[0].have_digest && d.conn->pos == o->bytes &&
	        !memcmp(d.conn->digest, d.server.conns[0].digest, SHA256_DIGEST_LEN);
	print_summary(o, s, &d, cn, sn, l, match);
	rc = 0;
	if (st != SIM_DONE) {
		printf("  FAILED: the transfer did not finish (%s)\n", sim_status_name(st));
		rc = 1;
	} else if (!match) {
		printf("  FAILED: digest mismatch\n");
		rc = 1;
	}
	sim_destroy(s);
	return rc;
}

int main(int argc, char **argv)
{
	struct opts o;

	if (parse_args(argc, argv, &o)) {
		usage(stderr);
		return 2;
	}
	return run_demo(&o);
}
