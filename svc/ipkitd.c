/*
 * ipkitd: the ipkit daemon. Owns one backend, runs the stack (one ipk_node), and
 * serves applications over shared-memory rings (svc/README.md, include/ipkit/svc.h).
 *
 *   ipkitd --io tap:ipk0 --ip 10.7.0.2/24 [--socket /run/ipkitd.sock] [--allow-uid U]
 *
 * Exit codes: 0 clean shutdown (SIGTERM/SIGINT), 2 bad command line, 3 could not
 * start (one-line reason on stderr).
 */
#include "daemon.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

static volatile sig_atomic_t d_stop;

static const char d_help[] =
	"usage: ipkitd --io SPEC --ip A.B.C.D/N [options]\n"
	"  --io SPEC            backend (tap:NAME, afpacket:DEV, afxdp:DEV, memlink:..., dpdk:...)\n"
	"  --ip A.B.C.D/N       the stack's address and prefix\n"
	"  --gw A.B.C.D         default gateway\n"
	"  --ip6 ADDR/N|auto    IPv6 on: link-local, this static address (or, with auto,\n"
	"                       addresses from router advertisements only)\n"
	"  --link-index N       scope_id of our link for link-local IPv6 (default: the\n"
	"                       kernel's index of the spec's interface, else 1)\n"
	"  --socket PATH        control socket (default /run/ipkitd.sock)\n"
	"  --allow-uid UID      let this uid connect (repeatable; default: our own uid)\n"
	"  --allow-gid GID      let this gid connect (repeatable)\n"
	"  --low-ports-uid UID  let this uid bind ports below 1024 (repeatable; default none)\n"
	"  --max-buf-mb N       largest buffer area per application (default 256)\n"
	"  --max-ring-mb N      largest ring area per application (default 64)\n"
	"  --max-sockets N      sockets per application (default 65536)\n"
	"  --conns N            TCP connections the stack holds per worker, open or in\n"
	"                       TIME_WAIT (default 16384, at least 16; when none is\n"
	"                       free a new one takes the oldest TIME_WAIT's place)\n"
	"  --graceful-close     a dead application's connections get FIN, not RST\n"
	"  --prio-levels N      priority levels, 0 served first (default 3, at most 16)\n"
	"  --prio-default L     level of sockets that ask for none, and the highest an\n"
	"                       application may ask for without --prio-uid (default 1)\n"
	"  --prio-uid UID:L     let uid ask for level L and below (repeatable)\n"
	"  --prio-share N       entries each lower level is guaranteed per service pass,\n"
	"                       doubled per level upwards (default 16)\n"
	"  --low-inflight B     while a higher level has a socket open, bytes a socket\n"
	"                       may have in the stack unacknowledged and receive window\n"
	"                       it may have open (default 65536; 0: no limit)\n"
	"  --urgent-wake 0|1    a level-0 socket's completion wakes its application at\n"
	"                       once, mid-pass, while a lower level has sockets open\n"
	"                       (default 1; 0: after the pass, as every other)\n"
	"  --tx-zc auto|0|1     zero-copy SEND: the stack transmits from the application's\n"
	"                       region and completes a SEND when the peer acknowledged it\n"
	"                       (auto, the default: on for tap and tun, which write from any\n"
	"                       address; the other backends copy into their rings anyway)\n"
	"  --workers N          worker threads, one node (backend queue) each (default 1:\n"
	"                       the main thread runs the stack, as before); a socket is\n"
	"                       served by the worker that holds its flow\n"
	"  --steer auto|soft|queues  how frames reach the workers: one reader thread\n"
	"                       hashing for all (soft), or one backend queue per worker\n"
	"                       (queues: memlink queues=N, afxdp, dpdk); auto: queues when\n"
	"                       the spec has queues=, else soft\n"
	"  --cpus A,B,...       pin the threads (the runtime's order: soft's reader first,\n"
	"                       then one per worker; with one worker the main thread)\n"
	"  --busy-poll          never sleep\n"
	"  --spin-us N          after work, keep polling N microseconds before sleeping\n"
	"                       (default 50; 0 on a machine with 2 CPUs or fewer, where\n"
	"                       the spin takes the CPU its applications need; 0 = sleep\n"
	"                       at once, at most 100000)\n"
	"  --config FILE        read options from FILE, one 'option value' a line ('#' comments)\n"
	"  --verbose            log each application\n"
	"  --help               this text\n"
	"Stops cleanly on SIGTERM or SIGINT: sockets reset, regions unmapped, socket file removed.\n"
	"SIGUSR1, and the stop, log each worker's stack counters (connections free, opens,\n"
	"resets, retransmissions, TIME_WAIT recycled, drops by reason).\n";

static void d_on_signal(int sig)
{
	(void)sig;
	d_stop = 1;
}

/* SIGUSR1: every worker logs its stack's counters (d_stack_report) at its next
 * turn; the count of requests, compared by each against the last it answered. */
static unsigned d_dump_n; /* atomic (lock-free: safe in the handler) */

static void d_on_usr1(int sig)
{
	(void)sig;
	__atomic_add_fetch(&d_dump_n, 1u, __ATOMIC_RELAXED);
}

unsigned d_dump_gen(void) { return __atomic_load_n(&d_dump_n, __ATOMIC_RELAXED); }

void d_stack_report(struct d_daemon *d, unsigned i)
{
	struct ipk_ctx *ctx = d->wk[i].node ? ipk_node_ctx(d->wk[i].node) : NULL;
	const struct ipk_counters *c = ctx ? ipk_counters(ctx) : NULL;
	char drops[1024];
	size_t at = 0;
	unsigned r;
	if (!c)
		return;
	drops[0] = 0;
	for (r = 0; r < IPK_DROP__COUNT && at < sizeof drops; r++)
		if (c->drop[r]) {
			int k = snprintf(drops + at, sizeof drops - at, " %s %llu",
			                 ipk_drop_name((enum ipk_drop)r), (unsigned long long)c->drop[r]);
			at += k > 0 ? (size_t)k : 0;
		}
	fprintf(stderr, "ipkitd: worker %u stack: conns_free %u/%u rx_frames %llu tx_frames %llu "
	        "tcp_passive_opens %llu tcp_active_opens %llu tcp_rst_tx %llu tcp_rst_rx %llu "
	        "tcp_retransmits %llu tcp_rto %llu tcp_tw_recycled %llu tcp_tw_reused %llu "
	        "tcp_syncookies_sent %llu udp_rx %llu udp_tx %llu drops:%s\n", i,
	        ipk_conns_free(ctx), d->cfg.conns, (unsigned long long)c->rx_frames,
	        (unsigned long long)c->tx_frames, (unsigned long long)c->tcp_passive_opens,
	        (unsigned long long)c->tcp_active_opens, (unsigned long long)c->tcp_rst_tx,
	        (unsigned long long)c->tcp_rst_rx, (unsigned long long)c->tcp_retransmits,
	        (unsigned long long)c->tcp_rto, (unsigned long long)c->tcp_tw_recycled,
	        (unsigned long long)c->tcp_tw_reused, (unsigned long long)c->tcp_syncookies_sent,
	        (unsigned long long)c->udp_rx, (unsigned long long)c->udp_tx,
	        drops[0] ? drops : " none");
}

static int d_parse_ip4(const char *s, uint32_t *ip_be, uint8_t *prefix)
{
	unsigned a, b, c, e, p = 32;
	char tail;
	int n = sscanf(s, "%u.%u.%u.%u/%u%c", &a, &b, &c, &e, &p, &tail);
	if ((n != 4 && n != 5) || a > 255 || b > 255 || c > 255 || e > 255 || p > 32)
		return -1;
	if (n == 4 && strchr(s, '/'))
		return -1;
	*ip_be = IPK_IP4(a, b, c, e);
	if (prefix)
		*prefix = (uint8_t)(n == 5 ? p : 24);
	return 0;
}

static int d_parse_u(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

/* --ip6 ADDR/N (N default 64) or auto */
static int d_parse_ip6(const char *s, struct d_cfg *c)
{
	char buf[64], *sl;
	unsigned long p = 64;
	if (strlen(s) >= sizeof buf)
		return -1;
	c->ip6 = 1;
	c->ip6_plen = 64;
	memset(c->ip6_addr, 0, 16);
	if (!strcmp(s, "auto"))
		return 0;
	strcpy(buf, s);
	sl = strchr(buf, '/');
	if (sl) {
		*sl++ = 0;
		if (d_parse_u(sl, 128, &p) < 0 || p == 0)
			return -1;
	}
	if (inet_pton(AF_INET6, buf, c->ip6_addr) != 1)
		return -1;
	c->ip6_plen = (uint8_t)p;
	return 0;
}

static int d_add_id(uid_t *v, unsigned *n, const char *s)
{
	unsigned long x;
	if (*n == D_MAX_IDS || d_parse_u(s, 0xfffffffful, &x) < 0)
		return -1;
	v[(*n)++] = (uid_t)x;
	return 0;
}

static int d_config_file(struct d_cfg *c, const char *path);

/* "UID:LEVEL" */
static int d_prio_uid(struct d_cfg *c, const char *val)
{
	unsigned long uid, lvl;
	char buf[64], *colon;
	if (strlen(val) >= sizeof buf || c->n_prio_uid == D_MAX_IDS)
		return -1;
	memcpy(buf, val, strlen(val) + 1);
	colon = strchr(buf, ':');
	if (!colon)
		return -1;
	*colon = 0;
	if (d_parse_u(buf, 0xfffffffful, &uid) < 0 || d_parse_u(colon + 1, D_PRIO_MAX - 1, &lvl) < 0)
		return -1;
	c->prio_uid[c->n_prio_uid] = (uid_t)uid;
	c->prio_uid_level[c->n_prio_uid++] = (unsigned)lvl;
	return 0;
}

/* "0,1,3": at most IPK_WORKERS_MAX CPUs. */
static int d_parse_cpus(struct d_cfg *c, const char *val)
{
	char buf[512], *tok, *save = NULL;
	unsigned long x;
	if (strlen(val) >= sizeof buf)
		return -1;
	memcpy(buf, val, strlen(val) + 1);
	c->ncpus = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (c->ncpus == IPK_WORKERS_MAX || d_parse_u(tok, 4095, &x) < 0)
			return -1;
		c->cpus[c->ncpus++] = (int)x;
	}
	return c->ncpus ? 0 : -1;
}

/* One option with its value (NULL for flags). 0 ok, -1 bad (message printed). */
static int d_opt(struct d_cfg *c, const char *name, const char *val, int *took)
{
	unsigned long x;
	*took = 1;
	if (!strcmp(name, "--busy-poll") || !strcmp(name, "--graceful-close") ||
	    !strcmp(name, "--verbose")) {
		*took = 0;
		if (name[2] == 'b')
			c->busy_poll = 1;
		else if (name[2] == 'g')
			c->graceful = 1;
		else
			c->verbose = 1;
		return 0;
	}
	if (!val) {
		fprintf(stderr, "ipkitd: %s needs a value (see --help)\n", name);
		return -1;
	}
	if (!strcmp(name, "--io") || !strcmp(name, "--socket")) {
		/* copied: a value from a config file lives in a line buffer */
		int k = name[2] == 'i' ? 0 : 1;
		free(c->owned[k]);
		c->owned[k] = strdup(val);
		if (!c->owned[k])
			return -1;
		if (k == 0)
			c->io_spec = c->owned[0];
		else
			c->sock_path = c->owned[1];
	}
	else if (!strcmp(name, "--ip") && d_parse_ip4(val, &c->ip4_be, &c->prefix_len) == 0)
		;
	else if (!strcmp(name, "--gw") && d_parse_ip4(val, &c->gw_be, NULL) == 0)
		;
	else if (!strcmp(name, "--ip6") && d_parse_ip6(val, c) == 0)
		;
	else if (!strcmp(name, "--allow-uid") && d_add_id(c->allow_uid, &c->n_allow_uid, val) == 0)
		;
	else if (!strcmp(name, "--allow-gid") &&
	         d_add_id((uid_t *)c->allow_gid, &c->n_allow_gid, val) == 0)
		;
	else if (!strcmp(name, "--low-ports-uid") && d_add_id(c->low_uid, &c->n_low_uid, val) == 0)
		;
	else if (!strcmp(name, "--link-index") && d_parse_u(val, 0x7fffffffu, &x) == 0 && x)
		c->link_index = (uint32_t)x;
	else if (!strcmp(name, "--max-buf-mb") && d_parse_u(val, 65536, &x) == 0 && x)
		c->max_buf = (uint64_t)x << 20;
	else if (!strcmp(name, "--max-ring-mb") && d_parse_u(val, 4096, &x) == 0 && x)
		c->max_ring = (uint64_t)x << 20;
	else if (!strcmp(name, "--max-sockets") && d_parse_u(val, (1ul << D_SOCK_IDX_BITS) - 2, &x) == 0 && x)
		c->max_socks = (uint32_t)x;
	else if (!strcmp(name, "--conns") && d_parse_u(val, 1u << 22, &x) == 0 && x >= 16)
		c->conns = (uint32_t)x;
	else if (!strcmp(name, "--config") && d_config_file(c, val) == 0)
		;
	else if (!strcmp(name, "--spin-us") && d_parse_u(val, 100000, &x) == 0)
		c->spin_us = (uint32_t)x;
	else if (!strcmp(name, "--prio-levels") && d_parse_u(val, D_PRIO_MAX, &x) == 0 && x)
		c->prio_levels = (unsigned)x;
	else if (!strcmp(name, "--prio-default") && d_parse_u(val, D_PRIO_MAX - 1, &x) == 0)
		c->prio_default = (unsigned)x;
	else if (!strcmp(name, "--prio-share") && d_parse_u(val, 1u << 20, &x) == 0 && x)
		c->prio_share = (unsigned)x;
	else if (!strcmp(name, "--prio-uid") && d_prio_uid(c, val) == 0)
		;
	else if (!strcmp(name, "--low-inflight") && d_parse_u(val, 1u << 30, &x) == 0)
		c->low_inflight = (uint32_t)x;
	else if (!strcmp(name, "--urgent-wake") && d_parse_u(val, 1, &x) == 0)
		c->urgent_wake = (int)x;
	else if (!strcmp(name, "--workers") && d_parse_u(val, IPK_WORKERS_MAX, &x) == 0 && x)
		c->workers = (unsigned)x;
	else if (!strcmp(name, "--steer") && !strcmp(val, "auto"))
		c->steer = -1;
	else if (!strcmp(name, "--steer") && !strcmp(val, "soft"))
		c->steer = IPK_STEER_SOFT;
	else if (!strcmp(name, "--steer") && !strcmp(val, "queues"))
		c->steer = IPK_STEER_QUEUES;
	else if (!strcmp(name, "--cpus") && d_parse_cpus(c, val) == 0)
		;
	else if (!strcmp(name, "--tx-zc") && !strcmp(val, "auto"))
		c->tx_zc = -1;
	else if (!strcmp(name, "--tx-zc") && d_parse_u(val, 1, &x) == 0)
		c->tx_zc = (int)x;
	else {
		fprintf(stderr, "ipkitd: bad option or value: %s %s (see --help)\n", name, val);
		return -1;
	}
	return 0;
}

static int d_config_file(struct d_cfg *c, const char *path)
{
	char line[512];
	int lineno = 0, rc = 0;
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "ipkitd: cannot read config %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (rc == 0 && fgets(line, sizeof line, f)) {
		char opt[128], key[64], val[384];
		int n, took;
		lineno++;
		n = sscanf(line, " %63s %383s", key, val);
		if (n < 1 || key[0] == '#')
			continue;
		snprintf(opt, sizeof opt, "--%s", key);
		rc = d_opt(c, opt, n == 2 ? val : NULL, &took);
		if (rc < 0)
			fprintf(stderr, "ipkitd: %s:%d: bad line\n", path, lineno);
	}
	fclose(f);
	return rc;
}

static void d_cfg_default(struct d_cfg *c)
{
	memset(c, 0, sizeof *c);
	c->sock_path = "/run/ipkitd.sock";
	c->prefix_len = 24;
	c->max_buf = 256ull << 20;
	c->max_ring = 64ull << 20;
	c->max_sq = 4096;
	c->max_cq = 8192;
	c->max_socks = 65536;
	/* the stack's TCP connections per worker, open and in TIME_WAIT (a new one
	 * takes the oldest TIME_WAIT's object when none is free): a node's default
	 * of 1024 would cap every application together far below --max-sockets.
	 * 248 bytes each (ipk_conn_size), 4 MiB at this default */
	c->conns = 16384;
	/* the spin saves the applications a doorbell when they answer within it, but
	 * on 2 CPUs it competes with them and with their peers for the CPU, and on
	 * TAP each of its polls is a readv: libipkit-preload figures there, system
	 * calls per request in ipkitd 7-12 with 50 us, 2.2-2.8 with 0
	 * (svc/preload/README.md, "Figures") */
	c->spin_us = sysconf(_SC_NPROCESSORS_ONLN) > 2 ? 50 : 0;
	c->prio_levels = 3;
	c->prio_default = 1;
	c->prio_share = 16;
	c->low_inflight = 64u << 10;
	c->urgent_wake = 1;
	c->tx_zc = -1;
	c->workers = 1;
	c->steer = -1;
}

/* The kernel's index of the interface a tap:, afpacket: or afxdp: spec names (what
 * if_nametoindex gives a program ported from kernel sockets), else 1. */
static uint32_t d_spec_ifindex(const char *spec)
{
	static const char *const kinds[] = {"tap:", "afpacket:", "afxdp:"};
	char name[IF_NAMESIZE];
	size_t i, k, n;
	for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
		k = strlen(kinds[i]);
		if (strncmp(spec, kinds[i], k) != 0)
			continue;
		n = strcspn(spec + k, ",");
		if (n == 0 || n >= sizeof name)
			return 1;
		memcpy(name, spec + k, n);
		name[n] = 0;
		n = if_nametoindex(name);
		return n ? (uint32_t)n : 1;
	}
	return 1;
}

/* 0 run, 1 help printed, -1 bad usage. */
static int d_args(struct d_cfg *c, int argc, char **argv)
{
	int i;
	for (i = 1; i < argc; i++) {
		int took = 0;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(d_help, stdout);
			return 1;
		}
		if (strncmp(argv[i], "--", 2) != 0) {
			fprintf(stderr, "ipkitd: unexpected argument %s (see --help)\n", argv[i]);
			return -1;
		}
		if (d_opt(c, argv[i], i + 1 < argc ? argv[i + 1] : NULL, &took) < 0)
			return -1;
		i += took;
	}
	if (!c->io_spec || !c->ip4_be) {
		fprintf(stderr, "ipkitd: --io and --ip are required (see --help)\n");
		return -1;
	}
	if (c->prio_default >= c->prio_levels) {
		fprintf(stderr, "ipkitd: --prio-default %u needs --prio-levels above it\n",
		        c->prio_default);
		return -1;
	}
	if (c->n_allow_uid == 0 && c->n_allow_gid == 0)
		c->allow_uid[c->n_allow_uid++] = geteuid();
	if (!c->link_index)
		c->link_index = d_spec_ifindex(c->io_spec);
	return 0;
}

/* ------------------------------------------------------------ set-up */

/* The receive window is tcp_rcvbuf minus what the core delivered and we did not
 * release: d_rx_release needs the first to clamp a low level's window. The node's
 * app is its worker. */
static void d_core_tweak(struct ipk_config *cfg, void *app)
{
	const struct d_cfg *c = &((struct d_wk *)app)->d->cfg;
	((struct d_wk *)app)->d->rcvbuf = cfg->tcp_rcvbuf;
	/* a bucket a connection (--conns), as the core's default is for a node's
	 * 1024: lookups stay one bucket deep at full load */
	cfg->conn_hash_buckets = 1024;
	while (cfg->conn_hash_buckets < c->conns && cfg->conn_hash_buckets < (1u << 22))
		cfg->conn_hash_buckets <<= 1;
	if (c->ip6) { /* docs/ipv6-core.md: static address when given, SLAAC on */
		cfg->ip6_enable = 1;
		memcpy(cfg->ip6_addr, c->ip6_addr, 16);
		cfg->ip6_prefix_len = c->ip6_plen;
	}
}

void d_node_template(struct d_daemon *d, struct ipk_node_cfg *nc)
{
	ipk_node_cfg_default(nc);
	nc->io_spec = d->cfg.io_spec;
	nc->ip4_be = d->cfg.ip4_be;
	nc->prefix_len = d->cfg.prefix_len;
	nc->gateway_be = d->cfg.gw_be;
	nc->conns = d->cfg.conns;
	nc->events = &d_events;
	nc->core_tweak = d_core_tweak;
}

void d_ep_node(struct d_wk *w, int ep)
{
	if (ipk_io_fd(ipk_node_io(w->node)) >= 0) {
		w->ev_node.kind = D_EV_NODE;
		d_ep_add_to(ep, ipk_io_fd(ipk_node_io(w->node)), &w->ev_node, EPOLLIN);
	}
}

static int d_start(struct d_daemon *d, char *err, size_t errlen)
{
	struct ipk_node_cfg nc;
	unsigned i;
	int rc;
	d->nw = d->cfg.workers;
	d->wk = (struct d_wk *)calloc(d->nw, sizeof *d->wk);
	if (!d->wk) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (i = 0; i < d->nw; i++) {
		d->wk[i].d = d;
		d->wk[i].idx = i;
		d->wk[i].ep = d->wk[i].kick_fd = -1;
	}
	if (d->nw > 1) {
		if (d_start_workers(d, err, errlen) < 0)
			return -1;
	} else {
		d_node_template(d, &nc);
		nc.app = &d->wk[0];
		d->wk[0].node = ipk_node_create(&nc, err, errlen);
		if (!d->wk[0].node)
			return -1;
		d->wk[0].ctx = ipk_node_ctx(d->wk[0].node);
		if (d->cfg.ncpus) { /* one worker: the main thread is it */
			cpu_set_t set;
			CPU_ZERO(&set);
			CPU_SET(d->cfg.cpus[0], &set);
			if (sched_setaffinity(0, sizeof set, &set) < 0)
				fprintf(stderr, "ipkitd: cannot pin to CPU %d: %s\n", d->cfg.cpus[0],
				        strerror(errno));
		}
	}
	/* tap and tun writev a chain from any address (io/tap/tap.c): the first
	 * backends where transmitting from the region saves the copy (issue 17) */
	d->zc = d->cfg.tx_zc >= 0 ? d->cfg.tx_zc
	                          : !strncmp(d->cfg.io_spec, "tap:", 4) ||
	                                    !strncmp(d->cfg.io_spec, "tun:", 4);
	d->ep = epoll_create1(EPOLL_CLOEXEC);
	rc = d_listen(d);
	if (d->ep < 0 || rc < 0) {
		snprintf(err, errlen, "control socket %s: %s", d->cfg.sock_path,
		         strerror(rc < 0 ? -rc : errno));
		return -1;
	}
	d->ev_listen.kind = D_EV_LISTEN;
	d_ep_add_to(d->ep, d->lfd, &d->ev_listen, EPOLLIN);
	if (d->nw == 1) /* one worker: the main thread sleeps on everything */
		d_ep_node(&d->wk[0], d->ep);
	return 0;
}

/* The epoll set an application's doorbell goes into: the one loop's with one
 * worker, else worker 0's (a doorbell means every worker slept: worker 0 takes
 * the bitmap and kicks the owners). */
int d_bell_ep(const struct d_daemon *d)
{
	return d->nw > 1 ? d->wk[0].ep : d->ep;
}

/* ------------------------------------------------------------ loop */

static void d_events_wait(struct d_daemon *d, int timeout_ms)
{
	struct epoll_event ev[64];
	int i, n = epoll_wait(d->ep, ev, 64, timeout_ms);
	uint64_t seen = n > 0 ? d_now() : 0;
	d_lock(d);
	d->ev_ns = seen;
	for (i = 0; i < n; i++) {
		struct d_ev *t = (struct d_ev *)ev[i].data.ptr;
		if (t->kind == D_EV_LISTEN)
			d_accept_apps(d);
		else if (t->kind != D_EV_NODE)
			d_app_event(d, t, ev[i].events);
	}
	d_reap(d);
	if (d->mt) {
		/* a new application's region, a reclaim's resets: every worker looks
		 * (the last to sleep raises daemon_sleeping in the new region) */
		if (n > 0)
			d_kick_all(d);
	}
	d->ev_ns = 0;
	d_unlock(d);
}

/* Raise daemon_sleeping everywhere, then look once more: an app that published
 * before seeing the flag is caught here, one that published after rings. 1: no
 * application submitted since worker wk's last look. With several workers only
 * the last one going to sleep calls it (d_wk.c d_wk_sleep_ok): while any worker
 * is awake, its passes take the bitmap and kick the owners. */
int d_sleep_flags(struct d_daemon *d, unsigned wk)
{
	struct d_app *a;
	for (a = d->apps; a; a = a->next)
		if (a->ready)
			IPK_SVC_STORE_RLX(&a->hdr->daemon_sleeping.v, 1);
	/* seq_cst: forbids re-reading submit_seq before the flag stores are visible
	 * (the app's side: publish, fence, read the flag) */
	IPK_SVC_FENCE();
	for (a = d->apps; a; a = a->next) {
		if (!a->ready)
			continue;
		if (IPK_SVC_LOAD_ACQ(&a->hdr->submit_seq.v) != a->pw[wk].last_seq)
			return 0;
	}
	return 1;
}

/* One worker: may the loop sleep? */
int d_may_sleep(struct d_daemon *d, unsigned wk, int *ovf)
{
	struct d_app *a;
	*ovf = 0;
	for (a = d->apps; a; a = a->next) {
		*ovf |= a->ready && a->pw[wk].ovf_wait;
		if (a->ready && (a->pw[wk].rescan || d_ho_pending(&a->pw[wk])))
			return 0;
	}
	return d_sleep_flags(d, wk);
}

void d_awake(struct d_daemon *d)
{
	struct d_app *a;
	for (a = d->apps; a; a = a->next)
		if (a->ready)
			IPK_SVC_STORE_RLX(&a->hdr->daemon_sleeping.v, 0);
}

int d_timeout_ms(struct d_wk *w, int ovf)
{
	uint64_t dl = ipk_node_deadline(w->node), now = d_now();
	uint64_t ms = dl == UINT64_MAX ? 1000 : dl > now ? (dl - now + 999999) / 1000000 : 0;
	if (ms > 1000)
		ms = 1000;
	if (ovf && ms > 1)
		ms = 1; /* a CQ was full: the app frees room without a doorbell */
	return (int)ms;
}

/* A level's budget is spent in list order: the first application of each pass goes
 * to the back, so one that floods a level cannot take its whole share pass after
 * pass from the others on it. O(applications), as the pass itself. */
static void d_apps_rotate(struct d_daemon *d)
{
	struct d_app *first = d->apps, *last = d->apps;
	if (!first || !first->next)
		return;
	while (last->next)
		last = last->next;
	d->apps = first->next;
	d->apps->prev = NULL;
	first->prev = last;
	first->next = NULL;
	last->next = first;
}

static int d_serve_pass(struct d_daemon *d, unsigned wk);

/* One pass of worker wk; with several workers its end is published (passes_done,
 * release after every completion the pass posted): a worker that yielded a
 * level to it (d_defer) waits for a pass to end, not to begin, so the higher
 * level's completions come first (svc_w2_prio: the level-0 NOP first). */
int d_serve(struct d_daemon *d, unsigned wk)
{
	int work = d_serve_pass(d, wk);
	if (d->nw > 1)
		__atomic_store_n(&d->wk[wk].passes_done, d->wk[wk].passes_done + 1,
		                 __ATOMIC_RELEASE);
	return work;
}

static int d_serve_pass(struct d_daemon *d, unsigned wk)
{
	struct d_app *a, *first = d_first(d, wk);
	unsigned lvl;
	int work = 0;
	/* relaxed: only a label on completions (cqe->pass), any worker counts */
	__atomic_add_fetch(&d->passes, 1, __ATOMIC_RELAXED);
	/* release: d_defer on another worker reads it (acquire) to see this
	 * worker's pass begin */
	__atomic_store_n(&d->wk[wk].passes, d->wk[wk].passes + 1, __ATOMIC_RELEASE);
	if (d->nw > 1) {
		d_msg_flush(d, wk); /* what the rings had no room for last pass */
		d_msg_drain(d, wk);
	}
	for (a = d->apps; a; a = a->next)
		d_pass_begin(a, wk);
	/* after the hand-offs are on the active lists (act_lvl): release, so a
	 * d_defer that reads the cleared mask (acquire) sees them there. A give
	 * between the take and this clear loses its hint for one pass only (its
	 * bits stay in the mask: d_ho_pending keeps this worker awake) */
	if (d->nw > 1)
		__atomic_store_n(&d->wk[wk].ho_lvls, 0, __ATOMIC_RELEASE);
	for (lvl = 0; lvl < d->cfg.prio_levels; lvl++) {
		uint32_t budget = UINT32_MAX;
		if (lvl > 0 && d->nw > 1 && d->wk[wk].act_lvl[lvl] && d_defer(d, wk, lvl)) {
			for (a = d->apps; a; a = a->next)
				a->pw[wk].rescan |= a->pw[wk].dirty; /* look again next pass */
			return work + 1;
		}
		if (lvl > 0)
			budget = d->cfg.prio_share << (d->cfg.prio_levels - 1 - lvl);
		for (a = first; a; a = a->next)
			work += d_serve_level(d, a, wk, lvl, &budget);
		for (a = d->apps; a != first; a = a->next)
			work += d_serve_level(d, a, wk, lvl, &budget);
	}
	if (d->nw == 1)
		d_apps_rotate(d);
	return work;
}

static void d_loop(struct d_daemon *d)
{
	unsigned idle_checks = 0;
	uint64_t last_work = 0, spin = (uint64_t)d->cfg.spin_us * 1000u;
	struct ipk_node *node = d->wk[0].node;
	unsigned dumped = d_dump_gen();
	while (!d_stop) {
		int work = 0, ovf;
		if (d_dump_gen() != dumped) {
			dumped = d_dump_gen();
			d_stack_report(d, 0);
		}
		work += d_serve(d, 0);
		work += ipk_node_poll(node, 0) > 0;
		d_wake_apps(d, 0);
		if (work && spin)
			last_work = d_now();
		/* the spin window: an application answering within spin_us finds us
		 * awake (no doorbell, no wake-up on our side) */
		if (work || d->cfg.busy_poll || (spin && d_now() - last_work < spin)) {
			if (++idle_checks % 64 == 0)
				d_events_wait(d, 0);
			continue;
		}
		if (!d_may_sleep(d, 0, &ovf)) {
			d_awake(d);
			d_events_wait(d, 0);
			continue;
		}
		if (ipk_io_arm(ipk_node_io(node)) <= 0)
			d_events_wait(d, d_timeout_ms(&d->wk[0], ovf));
		d_awake(d);
	}
}

static void d_ctl_loop(struct d_daemon *d)
{
	while (!d_stop)
		d_events_wait(d, 100);
}

static void d_shutdown(struct d_daemon *d)
{
	unsigned i, left;
	if (d->ws) {
		ipk_workers_stop(d->ws); /* the threads are gone: one thread from here */
		d->mt = 0;
		left = d_msg_quiesce(d); /* what was in flight when they stopped */
		if (left)
			fprintf(stderr, "ipkitd: %u messages between workers undelivered at shutdown\n", left);
		d_wk_report(d);
	}
	for (i = 0; i < d->nw; i++) /* one thread from here: every context is ours */
		d_stack_report(d, i);
	while (d->apps)
		d_app_reclaim(d, d->apps, "disconnected at shutdown");
	for (i = 0; i < d->nw; i++)
		if (d->wk[i].node)
			ipk_node_poll(d->wk[i].node, 0); /* the resets go out */
	if (d->lfd >= 0)
		close(d->lfd);
	if (d->bound) /* only the path we created: never a live daemon's */
		unlink(d->cfg.sock_path);
	if (d->ep >= 0)
		close(d->ep);
	d_msg_fini(d); /* after the reclaims: the stack is stopped, nothing sends */
	if (d->ws) {
		ipk_workers_destroy(d->ws);
		for (i = 0; i < d->nw; i++)
			pthread_mutex_destroy(&d->wk[i].mu);
		pthread_mutex_destroy(&d->pmu);
	} else if (d->wk) {
		ipk_node_destroy(d->wk[0].node);
	}
	free(d->tturn);
	for (i = 0; d->wk && i < d->nw; i++) {
		free(d->wk[i].pc);
		if (d->wk[i].ep >= 0)
			close(d->wk[i].ep);
		if (d->wk[i].kick_fd >= 0)
			close(d->wk[i].kick_fd);
	}
	while (d->zombies) /* graceful closes still sending: the stack is gone now */
		d_app_final(d, d->zombies);
	free(d->wk);
}

int main(int argc, char **argv)
{
	struct d_daemon *d = (struct d_daemon *)calloc(1, sizeof *d);
	struct sigaction sa;
	char err[256] = "";
	int rc;
	if (!d) {
		fprintf(stderr, "ipkitd: out of memory\n");
		return 3;
	}
	d->lfd = d->ep = -1;
	d_cfg_default(&d->cfg);
	rc = d_args(&d->cfg, argc, argv);
	if (rc) {
		free(d->cfg.owned[0]);
		free(d->cfg.owned[1]);
		free(d);
		return rc > 0 ? 0 : 2;
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = d_on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = d_on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (d->cfg.workers > 1) { /* the workers' threads leave the signals to us */
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, SIGTERM);
		sigaddset(&set, SIGINT);
		sigaddset(&set, SIGUSR1);
		pthread_sigmask(SIG_BLOCK, &set, NULL);
	}
	rc = d_start(d, err, sizeof err);
	if (d->cfg.workers > 1) {
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, SIGTERM);
		sigaddset(&set, SIGINT);
		sigaddset(&set, SIGUSR1);
		pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	}
	if (rc < 0) {
		fprintf(stderr, "ipkitd: %s\n", err);
		d_shutdown(d);
		free(d->cfg.owned[0]);
		free(d->cfg.owned[1]);
		free(d);
		return 3;
	}
	fprintf(stderr, "ipkitd: serving on %s (io %s)\n", d->cfg.sock_path, d->cfg.io_spec);
	if (d->nw > 1)
		d_ctl_loop(d);
	else
		d_loop(d);
	d_shutdown(d);
	fprintf(stderr, "ipkitd: stopped (%llu applications reclaimed)\n",
	        (unsigned long long)d->reclaims);
	free(d->cfg.owned[0]);
	free(d->cfg.owned[1]);
	free(d);
	return 0;
}
