/*
 * What the example programs share: the node options (--io, --ip, --gw, --busy-poll,
 * --cpu, --pcap), a stop flag set by SIGINT/SIGTERM, and exit codes.
 *
 * Exit codes: 0 success, 1 the job failed (transfer broken, no reply), 2 bad command
 * line, 3 the node could not start (backend or configuration error, message on stderr).
 */
#ifndef IPKIT_EXAMPLES_APP_H
#define IPKIT_EXAMPLES_APP_H

#include <ipkit/runtime.h>

#define APP_EXIT_OK 0
#define APP_EXIT_FAIL 1
#define APP_EXIT_USAGE 2
#define APP_EXIT_SETUP 3

struct app_opts {
	const char *io;
	const char *pcap;
	uint32_t ip4_be, gw_be;
	uint8_t prefix_len;
	int busy_poll;
	int cpu;
	int verbose;
	/* --ip6 ADDR/N or --ip6 auto: IPv6 on (link-local always; a static address,
	 * or only what SLAAC gives) */
	int ip6;
	uint8_t ip6_addr[16];
	uint8_t ip6_plen;
	int dad_transmits; /* --dad-transmits N; -1: the core's default (1) */
	uint32_t conn_pool; /* --conn-pool N; 0: the node's default (1024) */
};

/* Help text for the options above, for each program's --help. */
extern const char app_common_help[];

void app_opts_default(struct app_opts *o);
/* Try argv[*i] as a common option; 1 consumed (and its value), 0 not ours, -1 bad
 * value (message printed). */
int app_opt(struct app_opts *o, int argc, char **argv, int *i);
/* "--name value" or "--name=value": 1 matched (*val set), 0 not this option, -1
 * value missing (message printed). */
int app_arg(const char *name, int argc, char **argv, int *i, const char **val);
/* Dotted quad with an optional /prefix. 0 ok, -1 malformed. */
int app_parse_ip4(const char *s, uint32_t *ip4_be, uint8_t *prefix_len);
/* Decimal with an optional k/M/G suffix (powers of 1024). 0 ok, -1 malformed. */
int app_parse_size(const char *s, uint64_t *out);

/* Create the node or print the reason and exit(APP_EXIT_SETUP). */
struct ipk_node *app_node(const struct app_opts *o, const struct ipk_ops *events, void *app,
                          void (*tweak)(struct ipk_config *, void *));
/* Install SIGINT/SIGTERM handlers that set the returned flag. */
volatile int *app_stop_flag(void);
/* Core and device counters on stderr (with --verbose). */
void app_report(struct ipk_node *n, const char *prog);

#endif
