/*
 * A back-to-back harness for the link/ARP/IPv4/ICMP/UDP tests: two or three
 * contexts on one shared segment (a hub: every frame goes to every other node),
 * a virtual clock, a capture of every transmitted frame, and the events each node
 * saw. All nodes draw packets from one sim pool, so a leak anywhere shows in it.
 */
#ifndef IPKIT_TESTS_IP_HARNESS_H
#define IPKIT_TESTS_IP_HARNESS_H

#include <ipkit/core.h>
#include <stdint.h>

#include "pkt.h"

#define H_MAX_NODES 3
#define H_CAP_FRAMES 512
#define H_FRAME_MAX 2048
#define H_QUEUE 1024

struct hnet;

struct hnode {
	struct sim_pool *pool; /* first: sim_pkt_ops finds the pool through opaque */
	struct hnet *net;
	int idx;
	struct ipk_ctx *ctx;
	void *mem, *conns, *pbs;
	uint32_t npbs;
	struct ipk_ops ops;
	struct ipk_config cfg;

	uint32_t rx_csum_stamp; /* IPK_RXCSUM_* the simulated NIC reports on arrivals */
	int udp_echo;           /* send every datagram back to where it came from */

	/* events seen */
	uint32_t udp_n;
	uint8_t udp_data[H_FRAME_MAX];
	uint32_t udp_len;
	struct ipk_tuple udp_t;
	int udp_was_chain;
	uint8_t udp_order[64]; /* first payload byte of each datagram, in arrival order */
	uint32_t echo_n, echo_from_be, echo_len;
	uint16_t echo_id_be, echo_seq_be;
	uint32_t flushes, offloads;

	/* integrator-owned ARP table (ops->arp_resolve) */
	uint32_t itab_ip[8];
	uint8_t itab_mac[8][6];
	int itab_n, learned_n;
};

struct hframe {
	int from;
	uint32_t len;
	uint32_t flags; /* IPK_TXOFF_* marks it carried */
	int chained;    /* it was a scatter-gather chain */
	uint8_t b[H_FRAME_MAX];
};

struct hnet {
	struct sim_pool *pool;
	struct hnode *nodes[H_MAX_NODES];
	int n;
	uint64_t now;
	int cut;           /* 1: the wire delivers nothing (frames still captured) */
	struct sim_pkt *q[H_QUEUE];
	int qfrom[H_QUEUE];
	int qn;
	struct hframe *cap; /* H_CAP_FRAMES */
	int ncap;
};

/* A net of n nodes; node i has MAC 02:00:00:00:00:(i+1), IP 10.0.0.(i+1)/24.
 * `tweak` (may be NULL) edits each node's config before init. */
struct hnet *hnet_new(int n, void (*tweak)(int idx, struct ipk_config *cfg));
/* Same with a pool of `pkts` packets (hnet_new: 256) and twice as many descriptors. */
struct hnet *hnet_new_pool(int n, void (*tweak)(int idx, struct ipk_config *cfg),
                           uint32_t pkts);
/* Same with integrator-owned ARP on every node. */
void hnode_use_arp_table(struct hnode *h);
void hnet_free(struct hnet *net);

/* Deliver every frame in flight (and what they trigger) until the wire is quiet. */
void hnet_settle(struct hnet *net);
/* Move the clock forward by dt, running every node's timers, then settle. */
void hnet_advance(struct hnet *net, uint64_t dt);
/* Hand raw frame bytes to one node as if received (rx_csum as its stamp). */
void hnode_inject(struct hnode *h, const void *bytes, uint32_t len);
/* Frames captured since the last hnet_clear_cap. */
void hnet_clear_cap(struct hnet *net);
/* Nothing leaked: every packet back in the pool, every pb back in each context. */
int hnet_no_leaks(struct hnet *net);

/* ---- frame builders ---- */
uint32_t hb_eth(uint8_t *b, const uint8_t dst[6], const uint8_t src[6], uint16_t type);
/* IPv4 header (ihl 20 + optlen of opts) + payload at b; returns bytes. */
uint32_t hb_ip4(uint8_t *b, uint32_t src_be, uint32_t dst_be, uint8_t proto, uint16_t id,
                uint16_t frag, const uint8_t *opts, uint32_t optlen, const uint8_t *payload,
                uint32_t plen);
/* UDP header + payload with a correct checksum (csum_zero: send 0). */
uint32_t hb_udp(uint8_t *b, uint32_t src_be, uint32_t dst_be, uint16_t sport, uint16_t dport,
                const uint8_t *payload, uint32_t plen, int csum_zero);
void hb_mac(uint8_t mac[6], int idx);

#endif
