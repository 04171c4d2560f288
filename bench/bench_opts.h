/*
 * Command line shared by ipkit-bench and its Linux twin ipkit-bench-linux.
 *
 * The benchmark options follow bench-iip (-c -d -g -l -m -n -p -r -s -t): a server
 * when -s is absent, a client otherwise. The rest says where the program runs: the
 * ipkit backend (--io, --ip, --pcap), threads (-T, --model), output (--json).
 * Parsing never exits: it returns BENCH_OPTS_* and prints one line on `err`.
 */
#ifndef IPKIT_BENCH_OPTS_H
#define IPKIT_BENCH_OPTS_H

#include <stdint.h>
#include <stdio.h>

#define BENCH_EXIT_OK 0
#define BENCH_EXIT_FAIL 1  /* errors counted (mismatch, close, timeout) or no request done */
#define BENCH_EXIT_USAGE 2 /* bad command line (message on stderr) */
#define BENCH_EXIT_SETUP 3 /* node, socket or thread could not start */

enum bench_prog { BENCH_PROG_IPKIT, BENCH_PROG_LINUX };
enum bench_mode { BENCH_PINGPONG = 1, BENCH_BURST = 2 };
enum bench_model { BENCH_MODEL_UNIFIED, BENCH_MODEL_MERGE, BENCH_MODEL_SPLIT };

/* Largest request: a UDP request is one datagram of at most one Ethernet MTU
 * (1500 - 20 IPv4 - 8 UDP); a TCP request is a stream record of any size up to this. */
#define BENCH_UDP_MAX_LEN 1472u
#define BENCH_UDP6_MAX_LEN 1452u /* 1500 - 40 IPv6 - 8 UDP */
#define BENCH_TCP_MAX_LEN (1u << 20)
/* --tcp-buf range: at least a few segments; at most what the core's window scale
 * (shift 7, RFC 7323 §2.2) can advertise, 65535 << 7 */
#define BENCH_TCP_BUF_MIN 16384u
#define BENCH_TCP_BUF_MAX (65535u << 7)

struct bench_opts {
	enum bench_prog prog;
	int client;               /* -s given */
	uint32_t server_ip4_be;   /* -s */
	uint32_t conns;           /* -c, client: connections (UDP: flows), default 1 */
	uint32_t depth;           /* -d, client: requests in flight per connection, default 1 */
	enum bench_mode mode;     /* -g */
	uint32_t len;             /* -l, or strlen(-m) */
	const char *msg;          /* -m, NULL = generated payload */
	int proto;                /* -n: 6 TCP, 17 UDP */
	uint16_t port;            /* -p, default 10000 */
	uint64_t rate;            /* -r: requests/s per thread, 0 = unlimited */
	uint32_t duration_s;      /* -t: 0 = until SIGINT; client default 10, server 0 */
	uint32_t timeout_ms;      /* --timeout: a request unanswered this long counts */
	const char *io;           /* --io SPEC (ipkit-bench) */
	uint32_t ip4_be;          /* --ip: ipkit's address; the twin's bind address */
	uint8_t prefix_len;
	uint32_t gw_be;           /* --gw */
	const char *pcap;         /* --pcap FILE (ipkit-bench) */
	uint32_t threads;         /* -T */
	enum bench_model model;   /* --model */
	int json;                 /* --json */
	int busy_poll;            /* --busy-poll */
	int corrupt_echo;         /* --corrupt-echo (test only): server flips one byte */
	uint32_t tcp_buf;         /* --tcp-buf (ipkit-bench): send buffer and receive window
	                           * ceiling in bytes, 0 = the core's defaults (256 KiB) */
	int zerocopy;             /* --zerocopy (ipkit-bench, TCP client): send without copying */
	int stats;                /* --stats (ipkit-bench): loop and backend counters at the end */
	uint32_t spin_us;         /* --spin-us (ipkit-bench, blocking): poll this long after
	                           * traffic before sleeping (ipk_node_set_spin), 0 = don't */
	/* IPv6 (issue 19): -6, an address with colons in -s or (twin) --ip, or
	 * (ipkit-bench) --ip6 */
	int ip6;
	uint8_t server_ip6[16];   /* -s ADDR[%IFNAME] */
	uint32_t server_scope;    /* its interface index (link-local), 0 = none */
	uint8_t ip6_bind[16];     /* --ip ADDR (twin): listen / source address, :: = any */
	uint8_t ip6_self[16];     /* --ip6 ADDR/N (ipkit-bench): the node's static address */
	uint8_t ip6_plen;         /* its on-link prefix length, default 64 */
};

#define BENCH_OPTS_OK 0
#define BENCH_OPTS_HELP 1  /* --help printed: exit 0 */
#define BENCH_OPTS_ERROR -1 /* message printed: exit BENCH_EXIT_USAGE */

/* Fill defaults for `prog`, parse argv, check the combination. */
int bench_opts_parse(struct bench_opts *o, enum bench_prog prog, int argc, char **argv,
                     FILE *out, FILE *err);
const char *bench_prog_name(enum bench_prog prog);
const char *bench_model_name(enum bench_model m);
/* Dotted quad with an optional /N (prefix may be NULL: then no /N allowed).
 * 0 ok, -1 malformed. */
int bench_parse_ip4(const char *s, uint32_t *ip4_be, uint8_t *prefix_len);
/* An IPv6 address, with %IFNAME (an interface of this host, by if_nametoindex) when
 * scope is non-NULL; *scope 0 without one. 0 ok, -1 malformed or no such interface. */
int bench_parse_ip6(const char *s, uint8_t ip6[16], uint32_t *scope);
/* ADDR or ADDR/N (N 1..128, default 64) for --ip6. 0 ok, -1 malformed. */
int bench_parse_ip6_prefix(const char *s, uint8_t ip6[16], uint8_t *prefix_len);

#endif
