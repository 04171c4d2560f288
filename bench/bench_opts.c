/* Option parsing for ipkit-bench and ipkit-bench-linux (see bench_opts.h). */
#include "bench_opts.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const char bench_help_common[] =
	"Server when -s is absent (echoes each request, or only consumes with -g 2),\n"
	"client otherwise. Per-second lines and a final summary go to stdout.\n"
	"\n"
	"benchmark (as bench-iip):\n"
	"  -c N        client: connections (UDP: flows, one local port each) [1]\n"
	"  -d N        client: requests in flight per connection (depth) [1]\n"
	"  -g 1|2      mode: 1 ping-pong (the server echoes, the client checks every byte\n"
	"              and measures latency); 2 burst (the client sends whenever the\n"
	"              window allows, the server only consumes) [1]\n"
	"  -l N        request length in bytes; the server uses it only to count requests\n"
	"              [1; TCP up to 1048576, UDP up to 1472]\n"
	"  -m STR      literal request payload instead of a generated one (sets -l)\n"
	"  -n 6|17     protocol: 6 TCP, 17 UDP [6]\n"
	"  -p PORT     server port to listen on / connect to [10000]\n"
	"  -r N        client: target requests/s per thread, 0 = as fast as possible [0]\n"
	"  -s A.B.C.D  server address: run as a client; an IPv6 address (with %IFNAME\n"
	"              for a link-local one) runs over IPv6\n"
	"  -6          IPv6: the server listens on :: (twin: or --ip ADDR; ipkit-bench:\n"
	"              its --ip6 address) [IPv4]\n"
	"  -t SECS     duration, 0 = until SIGINT/SIGTERM [client 10, server 0]\n"
	"  --timeout MS  client: a request unanswered this long counts as a timeout\n"
	"              [TCP 5000, UDP 1000]\n"
	"\n"
	"threads and output:\n"
	"  -T N        threads [1]\n"
	"  --json      one JSON object per line instead of text (same fields)\n"
	"  --busy-poll never sleep waiting for traffic (one core at 100% per thread)\n"
	"  --corrupt-echo  server (tests only): flip one byte of every echoed request,\n"
	"              so the client must report mismatches and exit 1\n"
	"  -h, --help  this text\n"
	"\n"
	"Exit status: 0 ok; 1 the client counted errors (payload mismatch, unexpected\n"
	"close, timeout, failed connect) or completed no request; 2 bad command line;\n"
	"3 set-up failed.\n";

static const char bench_help_ipkit[] =
	"usage: ipkit-bench --io SPEC --ip A.B.C.D/N [options]\n"
	"Benchmark tool on the ipkit stack (twin: ipkit-bench-linux, same options).\n"
	"\n"
	"ipkit node:\n"
	"  --io SPEC   backend: tap:NAME, tun:NAME, afpacket:DEV, afxdp:DEV,\n"
	"              memlink:NAME,role=a|b (include/ipkit/io.h) [required]\n"
	"              afxdp options: mode=skb|drv, frame=4096 (4 KiB UMEM frames, MTU\n"
	"              up to 3822 instead of 1774), sg=1 (multi-buffer: a frame spans\n"
	"              several UMEM frames, e.g. MTU 9000)\n"
	"  --ip A.B.C.D/N  this node's address [required; over IPv6 too: a dual-stack\n"
	"              node, as the examples' app_node]\n"
	"  --ip6 ADDR/N    this node's static IPv6 address (link-local too; N default 64);\n"
	"              implies -6; required with -6 or an IPv6 -s\n"
	"  --gw A.B.C.D    default gateway\n"
	"  --pcap FILE write every frame to FILE\n"
	"  --model unified|merge|split  thread model with -T > 1 (multi-core runtime)\n"
	"  --tcp-buf BYTES  TCP send buffer and receive window ceiling (ipk_config\n"
	"              tcp_sndbuf/tcp_rcvbuf), 16384..8388480 [the core's, 256 KiB]\n"
	"  --zerocopy  TCP client: queue the payload with ipk_tcp_send as packets over one\n"
	"              pattern buffer (only the 8 numbered bytes of a request are copied)\n"
	"              instead of copying it with ipk_tcp_write\n"
	"  --spin-us N blocking mode: after traffic, poll up to N us (0..10000) before\n"
	"              sleeping on the backend (ipk_node_set_spin) [0: sleep at once]\n"
	"  --stats     at the end, one line on stderr: the loop's and the backend's\n"
	"              counters per request (rx/tx batch sizes, sleeps; single thread)\n"
	"\n";

static const char bench_help_linux[] =
	"usage: ipkit-bench-linux [options]\n"
	"The Linux twin of ipkit-bench: the same options on kernel sockets and epoll.\n"
	"Blocking by default (epoll_wait sleeps); --busy-poll spins on epoll_wait with\n"
	"timeout 0 and sets SO_BUSY_POLL where the kernel allows it.\n"
	"\n"
	"  --ip ADDR   server: address to listen on [0.0.0.0, with -6 ::]; client: source\n"
	"              address (IPv4, or IPv6 with colons)\n"
	"  -T N        threads; each has its own epoll, connections and (server) an\n"
	"              SO_REUSEPORT listener\n"
	"  --spin-us N blocking mode: after traffic, call epoll_wait with timeout 0 for\n"
	"              up to N us (0..10000) before sleeping in it, as ipkit-bench's\n"
	"              --spin-us does on its backend [0: sleep at once]\n"
	"\n";

const char *bench_prog_name(enum bench_prog prog)
{
	return prog == BENCH_PROG_IPKIT ? "ipkit-bench" : "ipkit-bench-linux";
}

const char *bench_model_name(enum bench_model m)
{
	static const char *const names[] = { "unified", "merge", "split" };
	return names[m];
}

int bench_parse_ip4(const char *s, uint32_t *ip4_be, uint8_t *prefix_len)
{
	char addr[16];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	struct in_addr a;
	if (n >= sizeof(addr) || (slash && !prefix_len))
		return -1;
	memcpy(addr, s, n);
	addr[n] = 0;
	if (inet_pton(AF_INET, addr, &a) != 1)
		return -1;
	if (slash) {
		char *end;
		long p = strtol(slash + 1, &end, 10);
		if (end == slash + 1 || *end || p < 0 || p > 32)
			return -1;
		*prefix_len = (uint8_t)p;
	}
	*ip4_be = a.s_addr; /* inet_pton writes network byte order */
	return 0;
}

int bench_parse_ip6(const char *s, uint8_t ip6[16], uint32_t *scope)
{
	char addr[INET6_ADDRSTRLEN];
	const char *pct = strchr(s, '%');
	size_t n = pct ? (size_t)(pct - s) : strlen(s);

	if (n >= sizeof(addr) || (pct && !scope))
		return -1;
	memcpy(addr, s, n);
	addr[n] = 0;
	if (inet_pton(AF_INET6, addr, ip6) != 1)
		return -1;
	if (scope) {
		*scope = pct ? if_nametoindex(pct + 1) : 0;
		if (pct && *scope == 0)
			return -1;
	}
	return 0;
}

int bench_parse_ip6_prefix(const char *s, uint8_t ip6[16], uint8_t *prefix_len)
{
	char addr[INET6_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	unsigned long plen = 64;
	char *end;

	if (n == 0 || n >= sizeof(addr))
		return -1;
	memcpy(addr, s, n);
	addr[n] = 0;
	if (slash) {
		plen = strtoul(slash + 1, &end, 10);
		if (end == slash + 1 || *end || plen < 1 || plen > 128)
			return -1;
	}
	if (inet_pton(AF_INET6, addr, ip6) != 1)
		return -1;
	*prefix_len = (uint8_t)plen;
	return 0;
}

/* Numeric options: where the value goes and its range. */
enum opt_kind { OPT_U32, OPT_U64, OPT_U16, OPT_MODE, OPT_PROTO };
struct num_opt {
	char name;
	enum opt_kind kind;
	size_t off;
	uint64_t min, max;
};

static const struct num_opt bench_num_opts[] = {
	{ 'c', OPT_U32, offsetof(struct bench_opts, conns), 1, 65535 },
	{ 'd', OPT_U32, offsetof(struct bench_opts, depth), 1, 1024 },
	{ 'g', OPT_MODE, offsetof(struct bench_opts, mode), 1, 2 },
	{ 'l', OPT_U32, offsetof(struct bench_opts, len), 1, BENCH_TCP_MAX_LEN },
	{ 'n', OPT_PROTO, offsetof(struct bench_opts, proto), 6, 17 },
	{ 'p', OPT_U16, offsetof(struct bench_opts, port), 1, 65535 },
	{ 'r', OPT_U64, offsetof(struct bench_opts, rate), 0, 1000000000 },
	{ 't', OPT_U32, offsetof(struct bench_opts, duration_s), 0, 86400 },
	{ 'T', OPT_U32, offsetof(struct bench_opts, threads), 1, 64 },
};

static int set_num(struct bench_opts *o, const struct num_opt *d, const char *v, FILE *err)
{
	char *end;
	unsigned long long x;
	char *field = (char *)o + d->off;
	x = strtoull(v, &end, 10);
	if (end == v || *end || v[0] == '-' || x < d->min || x > d->max ||
	    (d->kind == OPT_PROTO && x != 6 && x != 17)) {
		fprintf(err, "%s: -%c: '%s' is not %s (see --help)\n", bench_prog_name(o->prog),
		        d->name, v, d->kind == OPT_PROTO ? "6 or 17" : "in range");
		return BENCH_OPTS_ERROR;
	}
	switch (d->kind) {
	case OPT_U64: *(uint64_t *)(void *)field = x; break;
	case OPT_U16: *(uint16_t *)(void *)field = (uint16_t)x; break;
	case OPT_MODE: *(enum bench_mode *)(void *)field = (enum bench_mode)x; break;
	case OPT_PROTO: *(int *)(void *)field = (int)x; break;
	default: *(uint32_t *)(void *)field = (uint32_t)x; break;
	}
	return BENCH_OPTS_OK;
}

static void bench_opts_default(struct bench_opts *o, enum bench_prog prog)
{
	memset(o, 0, sizeof(*o));
	o->prog = prog;
	o->conns = 1;
	o->depth = 1;
	o->mode = BENCH_PINGPONG;
	o->len = 1;
	o->proto = 6;
	o->port = 10000;
	o->duration_s = UINT32_MAX; /* "not given": the role picks the default */
	o->prefix_len = 24;
	o->ip6_plen = 64;
	o->threads = 1;
	o->model = BENCH_MODEL_UNIFIED;
}

/* "--name value" or "--name=value" */
static int long_val(const char *name, int argc, char **argv, int *i, const char **val)
{
	size_t n = strlen(name);
	if (strncmp(argv[*i], name, n) != 0)
		return 0;
	if (argv[*i][n] == '=') {
		*val = argv[*i] + n + 1;
		return 1;
	}
	if (argv[*i][n] != 0)
		return 0;
	if (*i + 1 >= argc)
		return -1;
	*val = argv[++*i];
	return 1;
}

static int bad(const struct bench_opts *o, FILE *err, const char *what, const char *v)
{
	fprintf(err, "%s: %s%s%s (see --help)\n", bench_prog_name(o->prog), what, v ? ": " : "",
	        v ? v : "");
	return BENCH_OPTS_ERROR;
}

/* 1 set, BENCH_OPTS_ERROR unknown name */
static int set_model(struct bench_opts *o, const char *v, FILE *err)
{
	int m;
	for (m = BENCH_MODEL_UNIFIED; m <= BENCH_MODEL_SPLIT; m++)
		if (strcmp(v, bench_model_name((enum bench_model)m)) == 0) {
			o->model = (enum bench_model)m;
			return 1;
		}
	return bad(o, err, "--model takes unified, merge or split, not", v);
}

/* v as a decimal number in lo..hi: 0 and *n, or -1 */
static int ul_in(const char *v, unsigned long lo, unsigned long hi, unsigned long *n)
{
	char *end;
	*n = strtoul(v, &end, 10);
	return end == v || *end || v[0] == '-' || *n < lo || *n > hi ? -1 : 0;
}

/* One long option with a value; 1 handled, 0 not one, BENCH_OPTS_ERROR bad. */
static int long_opt(struct bench_opts *o, int argc, char **argv, int *i, FILE *err)
{
	static const char *const names[] = { "--io", "--ip", "--gw", "--pcap", "--model",
	                                     "--tcp-buf", "--timeout", "--spin-us", "--ip6" };
	const char *v = NULL;
	unsigned long n;
	unsigned k;
	int ipkit = o->prog == BENCH_PROG_IPKIT;
	for (k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		int r = long_val(names[k], argc, argv, i, &v);
		if (r < 0)
			return bad(o, err, "missing value for", names[k]);
		if (r > 0)
			break;
	}
	if (!v)
		return 0;
	if (!ipkit && (k == 0 || k == 2 || k == 3 || k == 4 || k == 5 || k == 8))
		return bad(o, err, "ipkit-bench only (the twin uses kernel sockets):", names[k]);
	switch (k) {
	case 0: o->io = v; break;
	case 1:
		if (!ipkit && strchr(v, ':')) {
			o->ip6 = 1;
			return bench_parse_ip6(v, o->ip6_bind, NULL) < 0 ?
			       bad(o, err, "--ip is not an IPv6 address", v) : 1;
		}
		if (bench_parse_ip4(v, &o->ip4_be, ipkit ? &o->prefix_len : NULL) < 0)
			return bad(o, err, ipkit ? "--ip is not A.B.C.D/N" : "--ip is not A.B.C.D", v);
		break;
	case 2:
		if (bench_parse_ip4(v, &o->gw_be, NULL) < 0)
			return bad(o, err, "--gw is not A.B.C.D", v);
		break;
	case 3: o->pcap = v; break;
	case 4: return set_model(o, v, err);
	case 5:
		if (ul_in(v, BENCH_TCP_BUF_MIN, BENCH_TCP_BUF_MAX, &n) < 0)
			return bad(o, err, "--tcp-buf takes bytes in 16384..8388480, not", v);
		o->tcp_buf = (uint32_t)n;
		break;
	case 6:
		if (ul_in(v, 1, 3600000, &n) < 0)
			return bad(o, err, "--timeout takes milliseconds in 1..3600000, not", v);
		o->timeout_ms = (uint32_t)n;
		break;
	case 8:
		o->ip6 = 1;
		return bench_parse_ip6_prefix(v, o->ip6_self, &o->ip6_plen) < 0 ?
		       bad(o, err, "--ip6 is not ADDR/N (an IPv6 address, N in 1..128)", v) : 1;
	default:
		if (ul_in(v, 0, 10000, &n) < 0)
			return bad(o, err, "--spin-us takes microseconds in 0..10000, not", v);
		o->spin_us = (uint32_t)n;
	}
	return 1;
}

static int flag_opt(struct bench_opts *o, const char *a)
{
	if (strcmp(a, "--json") == 0)
		o->json = 1;
	else if (strcmp(a, "--busy-poll") == 0)
		o->busy_poll = 1;
	else if (strcmp(a, "--corrupt-echo") == 0)
		o->corrupt_echo = 1;
	else if (strcmp(a, "--zerocopy") == 0)
		o->zerocopy = 1;
	else if (strcmp(a, "--stats") == 0)
		o->stats = 1;
	else if (strcmp(a, "-6") == 0)
		o->ip6 = 1;
	else
		return 0;
	return 1;
}

/* -X VALUE or -XVALUE for the short options */
static int short_opt(struct bench_opts *o, int argc, char **argv, int *i, FILE *err)
{
	const char *a = argv[*i], *v;
	unsigned k = 0; /* set below for every option but -s and -m (gcc -O2 with
	                 * -fsanitize cannot see that: -Werror=maybe-uninitialized) */
	if (a[0] != '-' || a[1] == 0 || a[1] == '-')
		return 0;
	v = a[2] ? a + 2 : (*i + 1 < argc ? argv[*i + 1] : NULL);
	if (a[1] != 's' && a[1] != 'm') {
		for (k = 0; k < sizeof(bench_num_opts) / sizeof(bench_num_opts[0]); k++)
			if (bench_num_opts[k].name == a[1])
				break;
		if (k == sizeof(bench_num_opts) / sizeof(bench_num_opts[0]))
			return 0;
	}
	if (!v)
		return bad(o, err, "missing value for", a);
	if (!a[2])
		++*i;
	if (a[1] == 's') {
		o->client = 1;
		if (strchr(v, ':')) {
			o->ip6 = 1;
			return bench_parse_ip6(v, o->server_ip6, &o->server_scope) < 0 ?
			       bad(o, err, "-s is not an IPv6 address (ADDR or ADDR%IFNAME)", v) : 1;
		}
		return bench_parse_ip4(v, &o->server_ip4_be, NULL) < 0 ?
		       bad(o, err, "-s is not A.B.C.D", v) : 1;
	}
	if (a[1] == 'm') {
		o->msg = v;
		return 1;
	}
	return set_num(o, &bench_num_opts[k], v, err) < 0 ? BENCH_OPTS_ERROR : 1;
}

/* ipkit-bench over IPv6: the node needs its own static address (no SLAAC wait in a
 * benchmark) beside its --ip (a dual-stack node). -T/--model runs both roles over
 * IPv6: a client's opens wait in the runtime for the address to pass DAD. */
static int bench_opts_check6_ipkit(struct bench_opts *o, FILE *err)
{
	static const uint8_t any[16];

	if (memcmp(o->ip6_self, any, 16) == 0)
		return bad(o, err, "ipkit-bench over IPv6 needs --ip6 ADDR/N (its own address)",
		           NULL);
	return BENCH_OPTS_OK;
}

/* IPv6: one family throughout, a real server address. */
static int bench_opts_check6(struct bench_opts *o, FILE *err)
{
	static const uint8_t any[16];
	int r;

	if (!o->ip6)
		return BENCH_OPTS_OK;
	if (o->prog == BENCH_PROG_IPKIT && (r = bench_opts_check6_ipkit(o, err)) != BENCH_OPTS_OK)
		return r;
	if (o->server_ip4_be || (o->ip4_be && o->prog != BENCH_PROG_IPKIT))
		return bad(o, err, "-6 or an IPv6 address cannot go with an IPv4 -s or --ip", NULL);
	if (o->client && memcmp(o->server_ip6, any, 16) == 0)
		return bad(o, err, "-s :: is not a server address (give -s ADDR with -6)", NULL);
	if (o->proto == 17 && o->len > BENCH_UDP6_MAX_LEN)
		return bad(o, err, "UDP requests over IPv6 are at most 1452 bytes (one datagram)",
		           NULL);
	return BENCH_OPTS_OK;
}

/* The combination: limits that depend on several options, and role defaults. */
static int bench_opts_check(struct bench_opts *o, FILE *err)
{
	int r;

	if (o->msg) {
		size_t n = strlen(o->msg);
		if (n == 0 || n > BENCH_TCP_MAX_LEN)
			return bad(o, err, "-m needs 1 to 1048576 bytes", NULL);
		o->len = (uint32_t)n;
	}
	if (o->proto == 17 && o->len > BENCH_UDP_MAX_LEN)
		return bad(o, err, "UDP requests are at most 1472 bytes (one datagram)", NULL);
	if (o->prog == BENCH_PROG_IPKIT && (!o->io || !o->ip4_be))
		return bad(o, err, "both --io SPEC and --ip A.B.C.D/N are required", NULL);
	if (o->duration_s == UINT32_MAX)
		o->duration_s = o->client ? 10 : 0;
	if (!o->timeout_ms)
		o->timeout_ms = o->proto == 17 ? 1000 : 5000;
	if ((r = bench_opts_check6(o, err)) != BENCH_OPTS_OK)
		return r;
	if (o->client && !o->ip6 && !o->server_ip4_be)
		return bad(o, err, "-s 0.0.0.0 is not a server address", NULL);
	if (o->client && o->corrupt_echo)
		return bad(o, err, "--corrupt-echo is a server option", NULL);
	if (o->zerocopy && o->prog != BENCH_PROG_IPKIT)
		return bad(o, err, "ipkit-bench only (the twin uses kernel sockets):", "--zerocopy");
	if (o->tcp_buf && (o->threads != 1 || o->model != BENCH_MODEL_UNIFIED))
		return bad(o, err, "--tcp-buf is for the single-thread loop (not -T/--model)", NULL);
	if (o->zerocopy && (!o->client || o->proto != 6 || o->threads != 1 ||
	                    o->model != BENCH_MODEL_UNIFIED))
		return bad(o, err, "--zerocopy is for a single-thread TCP client", NULL);
	if (o->stats && o->prog != BENCH_PROG_IPKIT)
		return bad(o, err, "ipkit-bench only (the twin has no loop of its own):", "--stats");
	if (o->spin_us && (o->busy_poll || o->threads != 1 || o->model != BENCH_MODEL_UNIFIED))
		return bad(o, err, "--spin-us is for the blocking single-thread loop (not "
		           "--busy-poll, -T or --model)", NULL);
	if (o->stats && (o->threads != 1 || o->model != BENCH_MODEL_UNIFIED))
		return bad(o, err, "--stats is for the single-thread loop (not -T/--model)", NULL);
	return BENCH_OPTS_OK;
}

int bench_opts_parse(struct bench_opts *o, enum bench_prog prog, int argc, char **argv,
                     FILE *out, FILE *err)
{
	int i, r;
	bench_opts_default(o, prog);
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			fputs(prog == BENCH_PROG_IPKIT ? bench_help_ipkit : bench_help_linux, out);
			fputs(bench_help_common, out);
			return BENCH_OPTS_HELP;
		}
		if (flag_opt(o, a))
			continue;
		if ((r = long_opt(o, argc, argv, &i, err)) == 0)
			r = short_opt(o, argc, argv, &i, err);
		if (r < 0)
			return BENCH_OPTS_ERROR;
		if (r == 0)
			return bad(o, err, "unknown argument", a);
	}
	return bench_opts_check(o, err);
}
