/*
 * Applications the simulation tests and the demo share, built on the node event
 * forwarding (sim_handlers):
 *
 *  - bulk: a server that, on every accepted connection, sends `serve_bytes` of a
 *    deterministic pseudo-random stream and closes; a client that connects, hashes
 *    every byte it receives with SHA-256, releases the bytes as it consumes them
 *    (ipk_tcp_recved) and records handshake and completion times. One app per node
 *    may play both roles at once (listen and connect), so transfers can run in both
 *    directions between two nodes.
 *  - echo: TCP and UDP echo servers.
 */
#ifndef IPKIT_SIM_APPS_H
#define IPKIT_SIM_APPS_H

#include "sim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Deterministic stream: byte i of the stream seeded `seed`, for any i. */
void sim_stream_fill(uint64_t seed, uint64_t pos, uint8_t *buf, uint32_t len);
/* SHA-256 of the first n bytes of the stream. */
void sim_stream_digest(uint64_t seed, uint64_t n, uint8_t out[SHA256_DIGEST_LEN]);

#define SIM_BULK_MAXCONN 32

struct sim_bulk;

struct sim_bulk_conn {
	struct sim_bulk *app;
	struct ipk_conn *c;       /* NULL once closed */
	int in_use;
	int server;               /* 1: sends the stream; 0: receives it */
	int connected, fin_sent, eof, closed;
	enum ipk_close_reason why;
	uint64_t total;           /* server: bytes to send */
	uint64_t pos;             /* server: bytes queued; client: bytes received */
	struct sha256 sha;
	uint8_t digest[SHA256_DIGEST_LEN]; /* of bytes sent (server) / received (client) */
	int have_digest;          /* set when the stream ended (all queued / FIN seen) */
	uint64_t t_start, t_connected, t_eof, t_closed;
};

struct sim_bulk {
	struct sim_node *node;
	/* configuration (set before use) */
	uint16_t port_be;         /* server role: port to listen on (0 = client only) */
	uint64_t serve_bytes;     /* stream length per accepted connection */
	uint64_t stream_seed;
	uint32_t write_chunk;     /* bytes per ipk_tcp_write call, default 16 KiB */
	int recycle;              /* free a slot once its connection closed (many-conn tests) */
	/* client-side expectation for recycled slots: counts matches in ok_transfers */
	uint64_t expect_bytes;
	uint64_t expect_seed;
	uint8_t expect_digest[SHA256_DIGEST_LEN];
	/* results */
	struct sim_bulk_conn conns[SIM_BULK_MAXCONN];
	uint32_t accepted, connected, closed, failed; /* failed: closed with reason != NORMAL */
	uint32_t ok_transfers, bad_transfers;         /* client EOFs checked vs expectation */
	uint32_t no_slot;                             /* accepts refused for lack of a slot */
	uint64_t rx_bytes, tx_bytes;
	/* optional hook after every close (e.g. to start the next connection) */
	void (*on_closed)(struct sim_bulk *app, struct sim_bulk_conn *bc);
	void *hook_arg;
	/* server role: skip hashing what is sent (digest stays zero); for long runs
	 * whose clients check against sim_bulk_expect, which already knows the hash */
	int no_tx_digest;
};

/* Zero the app, bind it to the node (installs its handlers) and listen when
 * port_be != 0. Returns 0 or the ipk_tcp_listen error. */
int sim_bulk_init(struct sim_bulk *app, struct sim_node *n, uint16_t port_be,
                  uint64_t serve_bytes, uint64_t stream_seed);
/* Set the expectation clients check every completed stream against. */
void sim_bulk_expect(struct sim_bulk *app, uint64_t bytes, uint64_t seed);
/* Client role: connect to peer; the slot is returned in *out (may be NULL).
 * Returns 0 or a negative IPK_E* (the core's code from ipk_tcp_connect, or
 * IPK_ENOMEM when no slot is free). */
int sim_bulk_connect(struct sim_bulk *app, uint32_t peer_ip4_be, uint16_t port_be,
                     struct sim_bulk_conn **out);
/* sim_bulk_connect for either family (ipk_tcp_connect_addr: IPv6 needs
 * cfg.ip6_enable and an address past DAD). */
int sim_bulk_connect_addr(struct sim_bulk *app, const struct ipk_addr *peer, uint16_t port_be,
                          struct sim_bulk_conn **out);
/* Slots in use with a live connection. */
uint32_t sim_bulk_live(const struct sim_bulk *app);

struct sim_echo {
	struct sim_node *node;
	uint16_t tcp_port_be, udp_port_be;
	uint64_t tcp_bytes, udp_datagrams, udp_bytes;
	uint32_t tcp_accepted, tcp_closed;
	uint32_t udp_send_fail;
	uint32_t tcp_short;     /* payload that did not fit the send buffer */
};

/* Echo on TCP port and/or UDP port (0 = off); installs the node's handlers. */
int sim_echo_init(struct sim_echo *e, struct sim_node *n, uint16_t tcp_port_be,
                  uint16_t udp_port_be);

#ifdef __cplusplus
}
#endif
#endif
