/* ipkit-echo's multi-core mode (echo_workers.c). */
#ifndef IPKIT_EXAMPLES_ECHO_WORKERS_H
#define IPKIT_EXAMPLES_ECHO_WORKERS_H

#include "app.h"

struct ew_opts {
	unsigned nworkers;
	int model;                 /* IPK_MODEL_* */
	int steer;                 /* IPK_STEER_* */
	int cpus[IPK_WORKERS_MAX * 2 + 1];
	unsigned ncpus;
	uint16_t port_be;          /* listen (0 = no) */
	uint16_t udp_port_be;      /* UDP echo (0 = no) */
	uint32_t connect_ip4_be;   /* client mode when nonzero (or connect_v6) */
	uint8_t connect6[16];      /* connect_v6: the IPv6 server ([ADDR]:PORT) */
	int connect_v6;
	uint16_t connect_port_be;
	uint32_t conns;            /* client connections per worker */
	uint32_t msg_size;         /* client message bytes, 1..1024 */
	unsigned timeout_s;        /* client mode: give up after this (0 = never) */
};

/* Run until SIGINT/SIGTERM (or, as a client, until every connection is done); prints
 * one line of counters per worker on stderr. Returns an APP_EXIT_* code. */
int ew_main(const struct app_opts *ao, const struct ew_opts *o);

#endif
