/*
 * ipkit runtime: turns the core and a backend into a running node.
 *
 * A node = one core context + one backend queue + a packet pool + a clock + addresses,
 * driven by a loop in busy-poll or event-driven mode (sleeps on the backend's fd until
 * the next core deadline; idle CPU near zero).
 *
 *   struct ipk_node_cfg cfg;
 *   ipk_node_cfg_default(&cfg);
 *   cfg.io_spec = "tap:ipk0"; cfg.ip4_be = IPK_IP4(10,0,0,2); cfg.prefix_len = 24;
 *   cfg.events = &my_events; cfg.app = my_state;      // TCP/UDP/ICMP callbacks
 *   struct ipk_node *n = ipk_node_create(&cfg, err, sizeof err);
 *   while (!stop) ipk_node_poll(n, -1);
 *
 * Event callbacks are the core's (struct ipk_ops event members, same signatures); the
 * `opaque` they receive is the node: ipk_node_app(opaque) returns cfg.app. Callbacks
 * may call the core API on ipk_node_ctx(node) with ipk_node_now(node).
 *
 * Several queues / threads: one node per queue, each on its own thread, sharing
 * nothing on the packet path (the DPDK/multi-core issue builds on ipk_node_create with
 * cfg.queue and cfg.cpu).
 */
#ifndef IPKIT_RUNTIME_H
#define IPKIT_RUNTIME_H

#include <ipkit/core.h>
#include <ipkit/io.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ipk_node;

struct ipk_node_cfg {
	const char *io_spec;      /* backend spec, see ipk_io_open */
	uint32_t ip4_be;
	uint8_t prefix_len;       /* netmask as a prefix length, default 24 */
	uint32_t gateway_be;      /* 0 = none */
	const uint8_t *mac;       /* NULL: the device's MAC (or a random local one) */
	int busy_poll;            /* 1: never sleep */
	int queue;                /* backend queue, default 0 */
	int cpu;                  /* pin the calling thread to this CPU in ipk_node_run, -1 = no */
	uint32_t conns, pbs;      /* pool sizes for the core, defaults 1024 and 16384 */
	struct ipk_pool_cfg pool; /* packet pool */
	const struct ipk_ops *events; /* only the event members are used; may be NULL */
	void *app;
	void (*core_tweak)(struct ipk_config *cfg, void *app); /* last word on the core config */
};
void ipk_node_cfg_default(struct ipk_node_cfg *cfg);

/* NULL on failure with a one-line message in err. */
struct ipk_node *ipk_node_create(const struct ipk_node_cfg *cfg, char *err, size_t errlen);
void ipk_node_destroy(struct ipk_node *n);

/* One iteration: receive a burst, run the core, transmit. With timeout_ms != 0 and
 * nothing to do, sleep on the backend until traffic or the core's next deadline
 * (bounded by timeout_ms; -1 = only the deadline). Returns frames received or a
 * negative errno. */
int ipk_node_poll(struct ipk_node *n, int timeout_ms);
/* Loop until *stop becomes nonzero (set it from a signal handler). */
int ipk_node_run(struct ipk_node *n, volatile int *stop);

struct ipk_ctx *ipk_node_ctx(struct ipk_node *n);
struct ipk_io *ipk_node_io(struct ipk_node *n);
struct ipk_pool *ipk_node_pool(struct ipk_node *n);
uint64_t ipk_node_now(struct ipk_node *n); /* CLOCK_MONOTONIC ns, refreshed each poll */
void *ipk_node_app(void *opaque);          /* cfg.app from an event's opaque */
struct ipk_node *ipk_node_from(void *opaque);
/* Frames the core sent that the backend never took (device queue stuck while the
 * node's own transmit batch was full); dropped and counted, TCP retransmits them. */
uint64_t ipk_node_tx_drops(const struct ipk_node *n);

#ifdef __cplusplus
}
#endif
#endif
