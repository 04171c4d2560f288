/* Shared option parsing and node start-up for the example programs. */
#include "app.h"

#include <arpa/inet.h>

#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char app_common_help[] =
	"  --io SPEC        backend: tap:NAME, tun:NAME, afpacket:DEV, afxdp:DEV[,queue=Q],\n"
	"                   memlink:NAME,role=a|b (see include/ipkit/io.h) [required]\n"
	"                   afxdp options: mode=skb|drv, frame=4096 (4 KiB UMEM frames, MTU\n"
	"                   up to 3822 instead of 1774), sg=1 (multi-buffer: a frame spans\n"
	"                   several UMEM frames, e.g. MTU 9000)\n"
	"  --ip A.B.C.D/N   this node's address and prefix length [required]\n"
	"  --gw A.B.C.D     default gateway (none by default)\n"
	"  --ip6 ADDR/N     IPv6 on: link-local + this static address; --ip6 auto: link-\n"
	"                   local + what SLAAC gives (Router Advertisements)\n"
	"  --dad-transmits N  Neighbor Solicitations per address for duplicate address\n"
	"                   detection, one second apart (RFC 4862 DupAddrDetectTransmits;\n"
	"                   0 to 10, default 1; 0: addresses are used at once)\n"
	"  --conn-pool N    TCP connections the stack holds, open or in TIME_WAIT\n"
	"                   (default 1024; when none is free a new one takes the\n"
	"                   oldest TIME_WAIT's place)\n"
	"  --busy-poll      never sleep (lowest latency, one core at 100%)\n"
	"  --cpu N          pin the stack thread to CPU N\n"
	"  --pcap FILE      also write every frame to FILE\n"
	"  -v, --verbose    print counters on exit\n"
	"  -h, --help       this text\n"
	"  With the dpdk backend, DPDK's EAL arguments may come first, ended by '--'\n"
	"  (as in bench-iip): PROG -l 0 --no-huge -m 512 --file-prefix=x\n"
	"  --vdev=net_tap0,iface=t0 -- --io dpdk:net_tap0 --ip ... Without them the first\n"
	"  dpdk: spec starts EAL with --no-huge -m 256 --no-pci and hot-plugs the vdev\n"
	"  named in the spec (dpdk:net_tap0,iface=t0).\n";

static volatile int app_stop;

void app_opts_default(struct app_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->prefix_len = 24;
	o->cpu = -1;
	o->dad_transmits = -1;
}

int app_arg(const char *name, int argc, char **argv, int *i, const char **val)
{
	size_t n = strlen(name);
	const char *a = argv[*i];
	if (strncmp(a, name, n) != 0)
		return 0;
	if (a[n] == '=') {
		*val = a + n + 1;
		return 1;
	}
	if (a[n] != 0)
		return 0;
	if (*i + 1 >= argc) {
		fprintf(stderr, "%s needs a value (see --help)\n", name);
		return -1;
	}
	*val = argv[++*i];
	return 1;
}

int app_parse_ip4(const char *s, uint32_t *ip4_be, uint8_t *prefix_len)
{
	unsigned a, b, c, d, p = 32;
	int n = 0;
	if (sscanf(s, "%u.%u.%u.%u%n", &a, &b, &c, &d, &n) != 4)
		return -1;
	if (s[n] == '/') {
		char *end;
		long v = strtol(s + n + 1, &end, 10);
		if (end == s + n + 1 || *end || v < 0 || v > 32)
			return -1;
		p = (unsigned)v;
	} else if (s[n] != 0) {
		return -1;
	}
	if (a > 255 || b > 255 || c > 255 || d > 255)
		return -1;
	*ip4_be = IPK_IP4(a, b, c, d);
	if (prefix_len)
		*prefix_len = (uint8_t)p;
	return 0;
}

int app_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (end == s || s[0] == '-')
		return -1;
	switch (*end) {
	case 0: break;
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: return -1;
	}
	if (*end)
		return -1;
	*out = v;
	return 0;
}

/* "EAL-args --" in front of the program's own arguments: start EAL with them and
 * skip to the argument after "--". */
static int app_eal(int argc, char **argv, int *i)
{
	char err[256];
	int j = ipk_io_dpdk_eal(argc, argv, err, sizeof(err));

	if (j < 0) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	if (j == 0)
		return 0;
	*i = j;
	return 1;
}

/* "auto" or an IPv6 address with an optional /N (default 64). */
static int app_parse_ip6(const char *v, struct app_opts *o)
{
	char buf[64];
	const char *slash = strchr(v, '/');
	size_t n = slash ? (size_t)(slash - v) : strlen(v);

	o->ip6 = 1;
	o->ip6_plen = 64;
	if (strcmp(v, "auto") == 0)
		return 0;
	if (n >= sizeof(buf))
		return -1;
	memcpy(buf, v, n);
	buf[n] = 0;
	if (inet_pton(AF_INET6, buf, o->ip6_addr) != 1)
		return -1;
	if (slash) {
		int plen = atoi(slash + 1);
		if (plen < 1 || plen > 128)
			return -1;
		o->ip6_plen = (uint8_t)plen;
	}
	return 0;
}

/* app_node's core tweak: the IPv6 options, then the program's own tweak. */
static struct app_tweak {
	const struct app_opts *o;
	void (*tweak)(struct ipk_config *, void *);
} app_tw;

static void app_core_tweak(struct ipk_config *c, void *app)
{
	if (app_tw.o->ip6) {
		c->ip6_enable = 1;
		memcpy(c->ip6_addr, app_tw.o->ip6_addr, 16);
		c->ip6_prefix_len = app_tw.o->ip6_plen;
	}
	if (app_tw.o->dad_transmits >= 0)
		c->ip6_dad_transmits = (uint8_t)app_tw.o->dad_transmits;
	while (c->conn_hash_buckets < app_tw.o->conn_pool && c->conn_hash_buckets < (1u << 22))
		c->conn_hash_buckets <<= 1; /* a bucket a connection, as the default */
	if (app_tw.tweak)
		app_tw.tweak(c, app);
}

int app_opt(struct app_opts *o, int argc, char **argv, int *i)
{
	const char *v;
	int r;
	if (*i == 1 && (r = app_eal(argc, argv, i)) != 0)
		return r;
	if ((r = app_arg("--io", argc, argv, i, &v)) != 0) {
		o->io = v;
		return r;
	}
	if ((r = app_arg("--pcap", argc, argv, i, &v)) != 0) {
		o->pcap = v;
		return r;
	}
	if ((r = app_arg("--ip", argc, argv, i, &v)) != 0) {
		if (r > 0 && app_parse_ip4(v, &o->ip4_be, &o->prefix_len) < 0) {
			fprintf(stderr, "--ip: '%s' is not A.B.C.D/N\n", v);
			return -1;
		}
		return r;
	}
	if ((r = app_arg("--ip6", argc, argv, i, &v)) != 0) {
		if (r > 0 && app_parse_ip6(v, o) < 0) {
			fprintf(stderr, "--ip6: '%s' is neither ADDR/N nor auto\n", v);
			return -1;
		}
		return r;
	}
	if ((r = app_arg("--dad-transmits", argc, argv, i, &v)) != 0) {
		char *end;
		long n = r > 0 ? strtol(v, &end, 10) : 0;
		if (r > 0 && (end == v || *end || n < 0 || n > 10)) {
			fprintf(stderr, "--dad-transmits: '%s' is not a count from 0 to 10\n", v);
			return -1;
		}
		o->dad_transmits = (int)n;
		return r;
	}
	if ((r = app_arg("--conn-pool", argc, argv, i, &v)) != 0) {
		char *end;
		long n = r > 0 ? strtol(v, &end, 10) : 0;
		if (r > 0 && (end == v || *end || n < 16 || n > (1L << 22))) {
			fprintf(stderr, "--conn-pool: '%s' is not a count from 16 to 4194304\n", v);
			return -1;
		}
		o->conn_pool = (uint32_t)n;
		return r;
	}
	if ((r = app_arg("--gw", argc, argv, i, &v)) != 0) {
		if (r > 0 && app_parse_ip4(v, &o->gw_be, NULL) < 0) {
			fprintf(stderr, "--gw: '%s' is not an IPv4 address\n", v);
			return -1;
		}
		return r;
	}
	if ((r = app_arg("--cpu", argc, argv, i, &v)) != 0) {
		if (r > 0)
			o->cpu = atoi(v);
		return r;
	}
	if (strcmp(argv[*i], "--busy-poll") == 0) {
		o->busy_poll = 1;
		return 1;
	}
	if (strcmp(argv[*i], "-v") == 0 || strcmp(argv[*i], "--verbose") == 0) {
		o->verbose = 1;
		return 1;
	}
	return 0;
}

struct ipk_node *app_node(const struct app_opts *o, const struct ipk_ops *events, void *app,
                          void (*tweak)(struct ipk_config *, void *))
{
	struct ipk_node_cfg cfg;
	struct ipk_node *n;
	char err[256], spec[512];

	if (!o->io || !o->ip4_be) {
		fprintf(stderr, "both --io SPEC and --ip A.B.C.D/N are required (see --help)\n");
		exit(APP_EXIT_USAGE);
	}
	if (o->pcap)
		snprintf(spec, sizeof(spec), "%s,pcap=%s", o->io, o->pcap);
	else
		snprintf(spec, sizeof(spec), "%s", o->io);
	ipk_node_cfg_default(&cfg);
	cfg.io_spec = spec;
	cfg.ip4_be = o->ip4_be;
	cfg.prefix_len = o->prefix_len;
	cfg.gateway_be = o->gw_be;
	cfg.busy_poll = o->busy_poll;
	if (o->conn_pool)
		cfg.conns = o->conn_pool;
	cfg.cpu = o->cpu;
	cfg.events = events;
	cfg.app = app;
	app_tw.o = o;
	app_tw.tweak = tweak;
	cfg.core_tweak = app_core_tweak;
	n = ipk_node_create(&cfg, err, sizeof(err));
	if (!n) {
		fprintf(stderr, "%s\n", err[0] ? err : "node creation failed");
		exit(APP_EXIT_SETUP);
	}
	if (o->cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(o->cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set) < 0)
			fprintf(stderr, "cannot pin to CPU %d (running unpinned)\n", o->cpu);
	}
	return n;
}

static void app_on_signal(int sig)
{
	(void)sig;
	app_stop = 1;
}

volatile int *app_stop_flag(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = app_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	return &app_stop;
}

void app_report(struct ipk_node *n, const char *prog)
{
	const struct ipk_counters *c = ipk_counters(ipk_node_ctx(n));
	struct ipk_io_stats st;
	int i;
	ipk_io_stats(ipk_node_io(n), &st);
	fprintf(stderr, "%s: rx %llu frames, tx %llu frames, tcp retransmits %llu, device rx_drops %llu "
	        "tx_drops %llu, node tx_drops %llu\n", prog,
	        (unsigned long long)c->rx_frames, (unsigned long long)c->tx_frames,
	        (unsigned long long)c->tcp_retransmits, (unsigned long long)st.rx_drops,
	        (unsigned long long)st.tx_drops, (unsigned long long)ipk_node_tx_drops(n));
	fprintf(stderr, "%s: tcp_rst_rx=%llu tcp_ooo_segs=%llu tcp_rmem_collapsed=%llu "
	        "tcp_rmem_collapse_pkts=%llu tcp_rmem_pruned=%llu tcp_rmem_reclaimed=%llu "
	        "tcp_rmem_reserve=%llu\n", prog, (unsigned long long)c->tcp_rst_rx,
	        (unsigned long long)c->tcp_ooo_segs, (unsigned long long)c->tcp_rmem_collapsed,
	        (unsigned long long)c->tcp_rmem_collapse_pkts,
	        (unsigned long long)c->tcp_rmem_pruned, (unsigned long long)c->tcp_rmem_reclaimed,
	        (unsigned long long)c->tcp_rmem_reserve);
	if (c->ip6_rx || c->ip6_tx) {
		uint32_t off = ipk_io_caps(ipk_node_io(n))->offloads;

		fprintf(stderr, "%s: ip6_rx=%llu ip6_tx=%llu nd_rx=%llu nd_tx=%llu nd_evicted=%llu "
		        "ip6_addrs_up=%llu ip6_dad_conflicts=%llu ip6_reassembled=%llu\n", prog,
		        (unsigned long long)c->ip6_rx, (unsigned long long)c->ip6_tx,
		        (unsigned long long)c->nd_rx, (unsigned long long)c->nd_tx,
		        (unsigned long long)c->nd_evicted, (unsigned long long)c->ip6_addrs_up,
		        (unsigned long long)c->ip6_dad_conflicts,
		        (unsigned long long)c->ip6_reassembled);
		/* the device's IPv6 offloads, as the core was told them (tests check them) */
		fprintf(stderr, "%s: offloads6 tx_csum_tcp6=%d tso6=%d tx_csum_udp6=%d rx_csum_l4=%d "
		        "lro=%d\n", prog, !!(off & IPK_CAP_TX_CSUM_TCP6), !!(off & IPK_CAP_TSO6),
		        !!(off & IPK_CAP_TX_CSUM_UDP6), !!(off & IPK_CAP_RX_CSUM_L4),
		        !!(off & IPK_CAP_LRO));
		fprintf(stderr, "%s: mld_tx=%llu mld_queries=%llu nd_redirects=%llu mld1_tx=%llu "
		        "mld1_queries=%llu\n", prog,
		        (unsigned long long)c->mld_tx, (unsigned long long)c->mld_queries,
		        (unsigned long long)c->nd_redirects, (unsigned long long)c->mld1_tx,
		        (unsigned long long)c->mld1_queries);
	}
	for (i = 0; i < IPK_DROP__COUNT; i++)
		if (c->drop[i])
			fprintf(stderr, "%s:   drop %s %llu\n", prog, ipk_drop_name((enum ipk_drop)i),
			        (unsigned long long)c->drop[i]);
}
