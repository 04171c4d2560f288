/*
 * ipkit simulator: many engines in one process over impaired point-to-point links,
 * in virtual time, fully deterministic for a given seed.
 *
 *   struct sim *s = sim_create(seed);
 *   struct ipk_config ca, cb;
 *   sim_node_config(&ca, 1); sim_node_config(&cb, 2);
 *   struct sim_node *a = sim_node_create(s, &ca, NULL), *b = sim_node_create(s, &cb, NULL);
 *   struct sim_link_cfg lc; sim_link_cfg_default(&lc); lc.loss = 0.01;
 *   struct sim_link *l = sim_connect(s, a, b, &lc);
 *   sim_link_pcap(l, "run.pcap");
 *   ... set handlers, ipk_tcp_listen(b->ctx, ...), ipk_tcp_connect(a->ctx, ...), sim_node_kick(a);
 *   sim_run(s, SIM_SEC(10), done_pred, arg);
 *   sim_destroy(s);
 *
 * Time only moves inside sim_run. Events are ordered by (time, sequence number), so
 * two events at the same instant always run in the order they were scheduled.
 * Every random draw comes from xoshiro256** generators seeded from the sim seed:
 * one per link (impairments) and one per node (ops->random), so a change in one
 * node's draws does not shift another link's losses.
 *
 * Ownership: frames on a link are the simulator's own copies (a NIC has DMA'd them
 * out of the sender's packet, which is freed at once); on arrival a frame is copied
 * into a packet of the receiver's pool and handed to its engine by ipk_run.
 */
#ifndef IPKIT_SIM_H
#define IPKIT_SIM_H

#include <ipkit/core.h>
#include <stdint.h>
#include <stdio.h>

#include "pkt.h"
#include "sha256.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SIM_NS(x) ((uint64_t)(x))
#define SIM_US(x) ((uint64_t)(x) * 1000u)
#define SIM_MS(x) ((uint64_t)(x) * 1000000u)
#define SIM_SEC(x) ((uint64_t)(x) * 1000000000u)

struct sim;
struct sim_node;
struct sim_link;
struct sim_port;

/* ------------------------------------------------------------ PRNG */

/* xoshiro256** (Blackman & Vigna), state seeded by splitmix64. */
struct sim_rng {
	uint64_t s[4];
};
void sim_rng_seed(struct sim_rng *r, uint64_t seed);
uint64_t sim_rng_next(struct sim_rng *r);
/* Uniform in [0, n) without modulo bias; 0 when n == 0. */
uint64_t sim_rng_below(struct sim_rng *r, uint64_t n);
/* 1 with probability p (p <= 0 never, p >= 1 always). */
int sim_rng_chance(struct sim_rng *r, double p);
/* splitmix64 step: also the deterministic byte stream of the bulk app. */
uint64_t sim_splitmix64(uint64_t *state);

/* The sim's own generator (for tests and apps that need randomness). */
uint64_t sim_rand_u64(struct sim *s);
uint32_t sim_rand_u32(struct sim *s);
uint64_t sim_rand_below(struct sim *s, uint64_t n);
int sim_rand_chance(struct sim *s, double p);

/* ------------------------------------------------------------ sim */

enum sim_status {
	SIM_DONE = 0,  /* the predicate became true */
	SIM_TIME = 1,  /* reached t_end */
	SIM_IDLE = 2,  /* nothing left to happen (time stays where it was) */
	SIM_LIMIT = 3  /* event budget (sim->max_events per call) exhausted */
};

struct sim_ev {
	uint64_t t, seq;
	int type;
	uint32_t gen;
	void *p;
	void (*fn)(struct sim *, void *); /* SIM_EV_CALL */
};

struct sim {
	uint64_t now;     /* virtual ns */
	uint64_t seed;
	struct sim_rng rng;
	struct sim_ev *heap;
	uint32_t nheap, capheap;
	uint64_t seq;
	uint64_t events;  /* processed since creation */
	uint64_t max_events; /* per sim_run call; default 200 million */
	struct sim_node **nodes;
	uint32_t nnodes, capnodes;
	struct sim_link **links;
	uint32_t nlinks, caplinks;
	struct sim_port **ports;  /* raw ports (nodes own theirs) */
	uint32_t nports, capports;
};

struct sim *sim_create(uint64_t seed);
/* Frees every node, link, port and frame in flight, and closes pcap files. */
void sim_destroy(struct sim *s);
static inline uint64_t sim_now(const struct sim *s) { return s->now; }

/*
 * Advance virtual time event by event until pred(arg) returns nonzero (checked
 * before the first event and after each one; pred may be NULL), the next event is
 * later than t_end, nothing is scheduled, or max_events events ran. Returns why.
 */
enum sim_status sim_run(struct sim *s, uint64_t t_end, int (*pred)(void *), void *arg);
/* Run fn(s, arg) at absolute virtual time t (>= now). Returns 0 or -1 (no memory). */
int sim_at(struct sim *s, uint64_t t, void (*fn)(struct sim *, void *), void *arg);
const char *sim_status_name(enum sim_status st);

/* --------------------------------------------------------- handlers */

/*
 * Per-node event handlers. The node's ops table forwards the core's TCP/UDP/ICMP
 * events here with the node instead of the opaque pointer; any may be NULL (accept
 * then defaults to yes). Packets shown stay the core's, valid during the call only.
 */
struct sim_handlers {
	int (*tcp_accept)(struct sim_node *n, const struct ipk_tuple *t, void *arg);
	void *(*tcp_accepted)(struct sim_node *n, struct ipk_conn *c, void *arg);
	void (*tcp_connected)(struct sim_node *n, struct ipk_conn *c, void *user, void *arg);
	void (*tcp_payload)(struct sim_node *n, struct ipk_conn *c, void *user, void *pkt,
	                    uint32_t off, uint32_t len, void *arg);
	void (*tcp_acked)(struct sim_node *n, struct ipk_conn *c, void *user, uint32_t bytes,
	                  void *arg);
	void (*tcp_closed)(struct sim_node *n, struct ipk_conn *c, void *user,
	                   enum ipk_close_reason why, void *arg);
	void (*udp_recv)(struct sim_node *n, const struct ipk_tuple *t, void *pkt, uint32_t off,
	                 uint32_t len, void *arg);
	void (*icmp_echo_reply)(struct sim_node *n, uint32_t from_ip4_be, uint16_t id_be,
	                        uint16_t seq_be, uint32_t payload_len, void *arg);
	void (*arp_learned)(struct sim_node *n, uint32_t ip4_be, const uint8_t mac[6], void *arg);
	/* IPv6 (nodes made with sim_node_config6): a UDP datagram, an echo reply */
	void (*udp_recv6)(struct sim_node *n, const struct ipk_atuple *t, void *pkt, uint32_t off,
	                  uint32_t len, void *arg);
	void (*icmp6_echo_reply)(struct sim_node *n, const uint8_t from[16], uint16_t id_be,
	                         uint16_t seq_be, uint32_t payload_len, void *arg);
};

/* ------------------------------------------------------------ ports */

/* What a port's simulated NIC did. */
struct sim_port_stats {
	uint64_t tx_frames;        /* frames handed to the port by its engine or injector */
	uint64_t tx_linearized;    /* SG chains gathered into one frame */
	uint64_t tx_chain_no_sg;   /* chains sent without IPK_CAP_SG declared (engine bug) */
	uint64_t tx_tso_frames;    /* TSO super-frames split */
	uint64_t tx_tso_segs;      /* segments they became */
	uint64_t tx_csum_filled;   /* checksums the NIC computed */
	uint64_t tx_oversize;      /* frames above MTU + link header: dropped */
	uint64_t tx_bad_meta;      /* offload marks that do not fit the frame: dropped */
	uint64_t tx_unattached;    /* no link: dropped */
	uint64_t rx_frames;        /* handed to the engine */
	uint64_t rx_nobuf;         /* receiver pool empty: dropped */
	uint64_t rx_ring_full;     /* receive ring full: dropped */
	uint64_t rx_oversize;      /* larger than the receiver's buffers: dropped */
	uint64_t rx_csum_bad;      /* frames whose offloaded check said BAD */
};

/* Raw ports receive frames through this instead of an engine. Bytes are valid
 * during the call only. */
typedef void (*sim_raw_rx_fn)(struct sim_port *p, const uint8_t *frame, uint32_t len,
                              void *arg);

struct sim_port {
	struct sim *sim;
	struct sim_node *node;  /* NULL for a raw port */
	struct sim_link *link;
	int side;               /* 0 or 1 on its link */
	uint8_t linktype;       /* IPK_LINK_ETH / IPK_LINK_RAWIP */
	uint16_t mtu;           /* IP MTU */
	uint32_t caps;          /* IPK_CAP_* the NIC implements */
	sim_raw_rx_fn raw_rx;
	void *raw_arg;
	uint8_t *scratch;       /* gather buffer for chains / TSO */
	uint32_t scratch_size;
	struct sim_port_stats st;
};

/* A port not bound to an engine: frames it receives go to rx(arg); frames are sent
 * with sim_port_inject. For crafted-packet tests and taps. */
struct sim_port *sim_port_raw(struct sim *s, uint8_t linktype, uint16_t mtu,
                              sim_raw_rx_fn rx, void *arg);
/* Put a frame on the port's link as if its NIC transmitted it (no offload
 * processing; the bytes are copied). Returns 0, or -1 when not attached. */
int sim_port_inject(struct sim_port *p, const uint8_t *frame, uint32_t len);

/* ------------------------------------------------------------ nodes */

/* Memory a node gets; 0 fields take the defaults shown. */
struct sim_node_res {
	uint32_t conns; /* connection objects, default 64 */
	uint32_t pbs;   /* pb descriptors, default 4096 */
	uint32_t pkts;  /* packet buffers, default 4096 */
	uint32_t descs; /* packet descriptors (clones need extra), default 2 * pkts */
};

#define SIM_RXRING 1024
#define SIM_RXBATCH 32

struct sim_node {
	struct sim_pool *pool;  /* first: the sim_pkt ops find it through opaque */
	struct sim_node *self;  /* second: opaque is the node itself */
	struct sim *sim;
	uint32_t index;
	struct ipk_ctx *ctx;
	struct ipk_config cfg;
	struct ipk_ops ops;
	void *ctx_mem, *conn_mem, *pb_mem;
	struct sim_node_res res;
	struct sim_port port;
	struct sim_rng rng;
	struct sim_handlers h;
	void *harg;
	/* scheduling */
	uint32_t gen;           /* run events with another gen are stale */
	uint64_t sched_t;       /* time of the valid pending run event, UINT64_MAX none */
	uint64_t deadline;      /* last value ipk_run returned */
	uint32_t spin;          /* consecutive runs that asked for "now" again */
	int running, rerun;
	uint64_t runs;
	/* received frames waiting for ipk_run */
	struct sim_pkt *rxq[SIM_RXRING];
	uint32_t rx_head, rx_count;
};

/* ipk_config_default + address 10.0.0.index/24, MAC 02:00:00:00:00:index. */
void sim_node_config(struct ipk_config *cfg, uint32_t index);
/* sim_node_config with IPv6 on as well: the static address fd00:5e::index/64
 * (sim_node_ip6) besides the link-local fe80::/64 + EUI-64 of the MAC; DAD with one
 * probe, so addresses come up one virtual second after the node starts. */
void sim_node_config6(struct ipk_config *cfg, uint32_t index);
/* The static IPv6 address sim_node_config6 gives node `index`. */
void sim_node_ip6(uint8_t out[16], uint32_t index);
/*
 * Create a node: allocates the context, connections, pb descriptors and packet
 * pool, builds the ops table (packet ops from sim/pkt.c, NIC and event forwarding
 * here) and initialises the engine with cfg (opaque is overwritten). The NIC
 * implements cfg->caps. NULL on failure (bad config or no memory).
 */
struct sim_node *sim_node_create(struct sim *s, const struct ipk_config *cfg,
                                 const struct sim_node_res *res);
void sim_node_set_handlers(struct sim_node *n, const struct sim_handlers *h, void *arg);
/* Have the node run (ipk_run) at the current time: call after using the ipk_* API
 * on a node from outside its own callbacks, so new timers and frames are seen. */
void sim_node_kick(struct sim_node *n);
static inline const struct ipk_counters *sim_node_counters(const struct sim_node *n)
{
	return ipk_counters(n->ctx);
}
/* Drops in all TCP/IP/UDP checksum reasons together. */
uint64_t sim_node_csum_drops(const struct sim_node *n);

/* ------------------------------------------------------------ links */

struct sim_link_cfg {
	uint64_t rate_bps;          /* 0 = infinite (no serialization delay) */
	uint64_t delay_ns;          /* one-way propagation delay */
	uint32_t queue_bytes;       /* drop-tail limit of the transmit queue; 0 = none */
	double loss;                /* independent loss probability per frame */
	double ge_p_gb, ge_p_bg;    /* Gilbert-Elliott: P(good->bad), P(bad->good); 0 = off */
	double ge_loss_bad;         /* loss probability in the bad state */
	double reorder;             /* probability a frame is held back ... */
	uint64_t reorder_delay_ns;  /* ... by this much extra delay */
	double dup;                 /* probability a frame is delivered twice */
	double corrupt;             /* probability one bit of the IP packet is flipped */
};

/* 100 Mbit/s, 5 ms one way, 1 MB queue, no impairments. */
void sim_link_cfg_default(struct sim_link_cfg *c);

enum sim_link_drop {
	SIM_LDROP_QUEUE = 0, /* drop-tail queue full */
	SIM_LDROP_LOSS,      /* random loss */
	SIM_LDROP_BURST,     /* Gilbert-Elliott bad-state loss */
	SIM_LDROP__COUNT
};

struct sim_link_stats {
	uint64_t sent, sent_bytes;           /* frames offered to the link */
	uint64_t delivered, delivered_bytes; /* frames that reached the far port */
	uint64_t drop[SIM_LDROP__COUNT];
	uint64_t duplicated, reordered, corrupted;
};

struct sim_link {
	struct sim *sim;
	uint32_t index;
	struct sim_port *port[2];
	struct sim_link_cfg cfg[2];   /* per direction: [0] = port[0] -> port[1] */
	struct sim_rng rng;
	uint64_t busy_until[2];       /* end of the serialization in progress */
	int ge_bad[2];                /* Gilbert-Elliott state */
	struct sim_link_stats st[2];
	FILE *pcap;
	int pcap_on;                  /* capturing (to a file, or hash only) */
	struct sha256 pcap_sha;       /* of every byte written to the pcap */
	uint64_t pcap_bytes;
};

/* Join two ports (each at most on one link); both directions take cfg. */
struct sim_link *sim_link_create(struct sim *s, struct sim_port *a, struct sim_port *b,
                                 const struct sim_link_cfg *cfg);
static inline struct sim_link *sim_connect(struct sim *s, struct sim_node *a,
                                           struct sim_node *b, const struct sim_link_cfg *cfg)
{
	return sim_link_create(s, &a->port, &b->port, cfg);
}
/* Change one direction's parameters (dir 0: port[0] -> port[1]). */
void sim_link_set_cfg(struct sim_link *l, int dir, const struct sim_link_cfg *cfg);
/*
 * Capture every frame entering the link (both directions, after the NIC's offload
 * work, so checksums are real) into a classic pcap file with nanosecond virtual
 * timestamps (magic 0xa1b23c4d), LINKTYPE_ETHERNET or LINKTYPE_RAW. path NULL:
 * hash only (pcap_sha still covers the bytes a file would hold). Returns 0 or -1.
 */
int sim_link_pcap(struct sim_link *l, const char *path);
/* SHA-256 of the pcap bytes produced so far (file header included). */
void sim_link_pcap_digest(const struct sim_link *l, uint8_t out[SHA256_DIGEST_LEN]);
/* Both directions added up. */
void sim_link_totals(const struct sim_link *l, struct sim_link_stats *out);

/* ------------------------------------------------------ NIC model */

/*
 * What a NIC with the offload caps does to an outgoing frame: fill the checksums
 * marked in meta (IPv4 header; TCP/UDP from the pseudo-header sum the engine left in
 * the field), or split a TSO super-frame into MSS-sized segments with their own
 * headers. Calls emit() once per resulting frame (bytes valid during the call).
 * `frame` may be modified. Returns frames emitted, or -1 when the marks do not fit
 * the frame (nothing emitted). scratch must hold at least len bytes.
 */
int sim_nic_tx(uint8_t *frame, uint32_t len, const struct ipk_tx_meta *meta,
               uint8_t *scratch, uint32_t scratch_size,
               void (*emit)(const uint8_t *f, uint32_t len, void *arg), void *arg,
               struct sim_port_stats *st);
/* IPK_RXCSUM_* bits a NIC with `caps` reports for a frame (l2_len bytes of link
 * header): verdicts are real checks; bits stay 0 when not applicable. */
uint32_t sim_nic_rx_csum(const uint8_t *frame, uint32_t len, uint32_t l2_len, uint32_t caps);
/* RFC 1071 sum helpers used by the NIC model (independent of the core's). */
uint32_t sim_csum_add(uint32_t sum, const uint8_t *p, uint32_t len);
uint16_t sim_csum_fold(uint32_t sum);

/* ------------------------------------------------------------ pcap */

#define SIM_PCAP_MAGIC_NS 0xa1b23c4du
#define SIM_LINKTYPE_ETHERNET 1u
#define SIM_LINKTYPE_RAW 101u

/* Write the 24-byte file header / one record into buf; return bytes written. */
uint32_t sim_pcap_file_header(uint8_t buf[24], uint32_t linktype, uint32_t snaplen);
uint32_t sim_pcap_record_header(uint8_t buf[16], uint64_t t_ns, uint32_t caplen,
                                uint32_t origlen);

#ifdef __cplusplus
}
#endif
#endif
