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
 * may call the core API on ipk_node_ctx(node) with ipk_node_now(node), under the
 * core's rules (core.h, "Calling the core from a callback"); they must not call
 * ipk_node_poll, ipk_node_run or ipk_node_destroy of their own node.
 *
 * Errors: core.h's one convention: 0 or a count on success, a negative errno value
 * on failure (the core's IPK_E* are the same numbers); functions returning a pointer
 * return NULL and write a one-line reason to `err`. A node serves one thread at a
 * time; the workers section says which calls are allowed from which thread.
 *
 * Several queues / threads: ipk_workers_start (below) runs one node per worker
 * thread, sharing nothing on the packet path, with RSS steering and a choice of
 * thread model.
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
	uint32_t spin_us;         /* event-driven: after traffic, poll this long before
	                           * sleeping, default 0 (ipk_node_set_spin) */
	int queue;                /* backend queue, default 0 */
	int cpu;                  /* pin the calling thread to this CPU in ipk_node_run, -1 = no */
	uint32_t conns, pbs;      /* pool sizes for the core, defaults 1024 and 16384 */
	struct ipk_pool_cfg pool; /* packet pool */
	const struct ipk_ops *events; /* only the event members are used; may be NULL */
	void *app;
	/* (optional) The last word on the core config: called by ipk_node_create with
	 * the config the node built (addresses, caps, pool sizes) and cfg.app, before the
	 * context is made; it may change any field. */
	void (*core_tweak)(struct ipk_config *cfg, void *app);
	/* (optional) Open the backend yourself instead of from io_spec: called once
	 * from ipk_node_create with the node's pool; the node owns what it returns and
	 * closes it with ipk_io_close. NULL with a message in err on failure. */
	struct ipk_io *(*io_open)(struct ipk_pool *pool, void *arg, char *err, size_t errlen);
	void *io_open_arg;
	/* (optional) The argument core_tweak receives instead of cfg.app when non-NULL
	 * (the workers give their own tweak the worker while cfg.app stays the
	 * caller's). */
	void *tweak_arg;
};
/* Fill *cfg with the defaults above (cpu -1, no backend spec, no events); NULL:
 * nothing. */
void ipk_node_cfg_default(struct ipk_node_cfg *cfg);

/* Create a node: pool, backend (io_spec or io_open), core context and its pools,
 * events wired. cfg is copied; cfg->events and cfg->app must outlive the node.
 * Returns the node, or NULL on failure with a one-line message in err (nothing
 * left open). */
struct ipk_node *ipk_node_create(const struct ipk_node_cfg *cfg, char *err, size_t errlen);
/* ipk_node_destroy: close the backend and free the context, the pools and the
 * node; every connection and packet of the node goes with it, without events.
 * NULL is ignored. Not from the node's own callbacks. */
void ipk_node_destroy(struct ipk_node *n);

/* One iteration: receive a burst, run the core, transmit. With timeout_ms != 0 and
 * nothing to do, sleep on the backend until traffic or the core's next deadline
 * (bounded by timeout_ms; -1 = only the deadline). Returns frames received or a
 * negative errno. */
int ipk_node_poll(struct ipk_node *n, int timeout_ms);
/* Loop (ipk_node_poll with cfg.busy_poll's choice of sleeping) until *stop becomes
 * nonzero (set it from a signal handler or another thread); pins the thread to
 * cfg.cpu first when it is >= 0. Returns 0 when stopped, -EINVAL for a NULL
 * argument, or the negative errno of a device error that ended the loop. */
int ipk_node_run(struct ipk_node *n, volatile int *stop);

/* ipk_node_ctx, ipk_node_io, ipk_node_pool: the node's core context, backend and
 * packet pool (owned by the node, valid until ipk_node_destroy; NULL for a NULL
 * node). */
struct ipk_ctx *ipk_node_ctx(struct ipk_node *n);
struct ipk_io *ipk_node_io(struct ipk_node *n);
struct ipk_pool *ipk_node_pool(struct ipk_node *n);
/* ipk_node_now: the node's clock, CLOCK_MONOTONIC ns, refreshed each poll: the `now`
 * to pass to core calls from callbacks (0 for a NULL node). */
uint64_t ipk_node_now(struct ipk_node *n);
/* ipk_node_deadline: the core's next deadline as of the node's last poll (the `now`
 * clock; UINT64_MAX: none, also for a NULL node), for a caller that sleeps in its own
 * loop (ipkitd) and polls the node with timeout 0. */
uint64_t ipk_node_deadline(const struct ipk_node *n);
/* ipk_node_app: cfg.app from an event callback's opaque (NULL for NULL). */
void *ipk_node_app(void *opaque);
/* ipk_node_from: the node from an event callback's opaque (the opaque is the node). */
struct ipk_node *ipk_node_from(void *opaque);
/* Frames the core sent that the backend never took (device queue stuck while the
 * node's own transmit batch was full); dropped and counted, TCP retransmits them. */
uint64_t ipk_node_tx_drops(const struct ipk_node *n);

/* What the loop did, for telling a batched regime from a lock-stepped one (counts
 * since create; read at any time, no locking: call it from the node's thread). */
struct ipk_node_stats {
	uint64_t polls;      /* rx bursts asked of the backend */
	uint64_t rx_polls;   /* ... that returned at least one frame */
	uint64_t rx_frames;  /* frames they returned (rx_frames / rx_polls: batch size) */
	uint64_t sleeps;     /* waits on the backend fd (blocking mode) */
	uint64_t tx_pushes;  /* non-empty transmit batches handed to the backend */
	uint64_t tx_frames;  /* frames it took in them */
	uint64_t spins;      /* spin windows entered instead of a sleep (spin_us) */
	uint64_t spin_hits;  /* ... that ended with frames, no sleep needed */
};
/* Copies the counters into *st; all zero when n is NULL, nothing when st is. */
void ipk_node_stats(const struct ipk_node *n, struct ipk_node_stats *st);

/* Event-driven mode: once frames came in, keep polling the backend for up to spin_us
 * microseconds after the last one before sleeping on its fd (0: sleep at once). On a
 * VM without a halt-polling cpuidle driver, an idle CPU halts and the wake-up costs
 * tens of microseconds on both ends; the peer of a busy exchange answers sooner than
 * that. No traffic, no spin: an idle node sleeps as before. Returns 0, or -EINVAL
 * for a NULL node or spin_us above 10000 (10 ms). */
int ipk_node_set_spin(struct ipk_node *n, uint32_t spin_us);

/* ================================================================ workers
 *
 * N worker threads, each with its own node (context, backend queue, pools), sharing
 * nothing on the packet path. A connection lives on one worker for its whole life:
 *
 *   - Steering. Every worker's context gets the same Toeplitz key and redirection
 *     table (ipk_config.rss_*) and its own queue number = its index, so a frame of a
 *     flow goes to worker reta[hash % reta_size] and active opens pick local ports
 *     that hash back to the caller (core/rss.c).
 *       IPK_STEER_QUEUES: the backend has one queue per worker (afxdp queue=Q, DPDK
 *         with RSS programmed with the same key and table, memlink queues=N); node i
 *         opens queue i. Frames without an RSS hash (ARP) reach one queue only (a NIC
 *         puts them on queue 0), yet every worker needs the neighbour: the worker
 *         that receives an ARP frame hands a copy to every other worker through a
 *         small per-sender SPSC inbox (no shared table, no lock; a full inbox drops
 *         the copy, counted in steer_drops, and ARP retries). Each worker's core then
 *         learns the mapping through its normal ARP input and answers requests for
 *         our address as SOFT's workers do (one reply per worker, all identical).
 *         IPv6 Neighbor Discovery (RS, RA, NS, NA, Redirect) is shared the same way
 *         (the NIC hashes it on the addresses, yet each worker resolves its own
 *         neighbours and follows the routers and prefixes itself).
 *       IPK_STEER_SOFT: one reader thread owns the single backend queue, hashes each
 *         received frame and passes it to its worker over an SPSC ring; frames that
 *         are not IPv4 or IPv6 (ARP), and IPv6 Neighbor Discovery, go to every
 *         worker. Workers hand transmitted frames back to the reader over SPSC
 *         rings (the backend is not thread-safe and its pool is the reader's; one
 *         copy each way keeps every pool single-threaded).
 *   - Checking. Every worker hashes each IPv4 and IPv6 frame it receives (ND aside)
 *     and counts those that do not map to it (ipk_worker_stats.wrong_queue, which
 *     must stay 0).
 *   - Thread models (the application side, struct ipk_app_ops, identical code in all):
 *       IPK_MODEL_UNIFIED: app callbacks run inside the networking thread, from the
 *         core's callbacks; commands execute at once.
 *       IPK_MODEL_MERGE: a networking and an application thread per worker, pinned
 *         to the same CPU; events and commands travel over SPSC rings and the idle
 *         side sleeps on an eventfd the other side signals (only when armed).
 *       IPK_MODEL_SPLIT: the same two threads on separate CPUs, busy-polling the
 *         rings (no sleeping, no system calls on the message path).
 */

#define IPK_MODEL_UNIFIED 0
#define IPK_MODEL_MERGE 1
#define IPK_MODEL_SPLIT 2

#define IPK_STEER_SOFT 0
#define IPK_STEER_QUEUES 1

#define IPK_WORKERS_MAX 64
/* ipk_app_send calls a connection may have outstanding (not yet reported by sent). */
#define IPK_APP_SENDQ 32

struct ipk_workers;
struct ipk_app; /* one worker's application handle */

/*
 * The application interface, message style. Every callback runs on the worker's
 * application thread (the networking thread itself under IPK_MODEL_UNIFIED), one
 * worker's callbacks never concurrently. `cid` names a connection for the worker that
 * reported it; it is never reused while the app can still see it (a generation count
 * is part of it). All members are optional.
 */
struct ipk_app_ops {
	/* Worker start, on its application thread, before any other event: listen,
	 * connect, set up per-worker state (ipk_app_set_state). */
	void (*start)(struct ipk_app *a, unsigned worker);
	/* Worker stop, after the last event. */
	void (*stop)(struct ipk_app *a);
	/* A passive open completed; the return value is the connection's user pointer,
	 * handed to its later events. */
	void *(*accepted)(struct ipk_app *a, uint64_t cid, const struct ipk_tuple *t);
	/* An ipk_app_connect completed (user as given there). */
	void (*connected)(struct ipk_app *a, uint64_t cid, void *user);
	/* In-order payload, zero-copy: `len` bytes at `data`, inside the packet `ref`
	 * that the app now holds (a reference to the received buffer). The app must give
	 * every ref back with ipk_app_release (also after closed); holding refs keeps the
	 * receive window closed, which is the flow control. ref NULL and len 0: the peer
	 * sent FIN (end of stream). */
	void (*data)(struct ipk_app *a, uint64_t cid, void *user, struct ipk_pkt *ref,
	             const uint8_t *data, uint32_t len);
	/* One earlier ipk_app_send is done: its bytes are in the stack's send buffer and
	 * `buf` is the app's again. Exactly once per accepted send, in order. */
	void (*sent)(struct ipk_app *a, uint64_t cid, void *user, const void *buf, uint32_t len);
	/* The connection is gone (for an active open that failed too); the cid is dead,
	 * every unfinished send's buffer is the app's again, refs must still be released. */
	void (*closed)(struct ipk_app *a, uint64_t cid, void *user, enum ipk_close_reason why);
	/* A datagram for a port bound with ipk_app_udp_bind, zero-copy like data: `len`
	 * bytes in `ref`, which the app holds until it gives it back with
	 * ipk_app_release(a, 0, ref, 0). t: peer and local address and port. A datagram
	 * larger than one receive buffer (reassembled from fragments) comes as a chain
	 * of references, as the core hands it over: ref->len bytes at data, then each
	 * ref->next's ipk_pkt_mtod(k), k->len; `len` is the whole datagram
	 * (ipk_pkt_chain_len(ref)) and ipk_pkt_linearize copies it out. With ref->next
	 * NULL, data holds all `len` bytes. Released as one (the whole chain). Out of
	 * descriptors: not delivered, counted in ipk_worker_stats.udp_drops. */
	void (*udp)(struct ipk_app *a, const struct ipk_tuple *t, struct ipk_pkt *ref,
	            const uint8_t *data, uint32_t len);
	/* An ipk_app_udp_send is done: the datagram was handed to the stack (rc 0) or
	 * refused (rc: the core's IPK_E* from ipk_udp_sendto, e.g. IPK_EHOSTUNREACH while
	 * ARP resolves, IPK_EMSGSIZE); `buf` is the app's again. Exactly once per
	 * accepted ipk_app_udp_send, in order, with its `user`. */
	void (*udp_sent)(struct ipk_app *a, void *user, const void *buf, uint32_t len, int rc);
	/* The core's answer to an ipk_app_listen (udp 0) or ipk_app_udp_bind (udp 1) that
	 * returned 0: rc 0 (listening / bound) or its IPK_E* (IPK_EADDRINUSE: the port is
	 * taken; IPK_ENOMEM: no listener or bind slot left). Exactly once per such
	 * command, in order with the other events, in every model (under UNIFIED from
	 * inside the command). Without this member a refusal is printed on stderr. */
	void (*bound)(struct ipk_app *a, uint16_t port_be, int udp, int rc);
	/* A datagram over IPv6 for a port bound with ipk_app_udp_bind (the bind takes
	 * the port in both families, core.h udp_recv6): as udp, with t's addresses of
	 * family IPK_AF_INET6. IPv4 datagrams keep coming to udp. NULL: IPv6 datagrams
	 * are released unseen (the node needs ipk_config.ip6_enable to get any). */
	void (*udp6)(struct ipk_app *a, const struct ipk_atuple *t, struct ipk_pkt *ref,
	             const uint8_t *data, uint32_t len);
	/* A passive open over IPv6 completed: as accepted, with t's addresses of family
	 * IPK_AF_INET6 (IPv4 connections keep coming to accepted). NULL: accepted is
	 * called for it with the ports and zero addresses. */
	void *(*accepted6)(struct ipk_app *a, uint64_t cid, const struct ipk_atuple *t);
};

/* Commands, callable only from the worker's application thread (inside callbacks or
 * start). Under MERGE/SPLIT they take effect asynchronously, in order. Each returns
 * 0 once the command is issued or a negative IPK_E* code when it is refused here;
 * what the core then says comes as an event (listen and udp_bind: bound; under
 * UNIFIED, where the command runs at once, their refusal is returned instead).
 *
 * ipk_app_listen: listen on port_be (backlog 128) on this worker's context. Returns
 * 0, IPK_EINVAL for a NULL app or port 0, or under UNIFIED the core's refusal
 * (IPK_EADDRINUSE for a port in use); under MERGE/SPLIT that comes with bound. */
int ipk_app_listen(struct ipk_app *a, uint16_t port_be);
/* Active open; the result comes as connected or closed with this user pointer
 * (closed with IPK_CLOSE_UNREACH at once for a peer with no route: off-link and no
 * gateway). Returns 0, or IPK_EINVAL for a NULL app or a zero address or port. */
int ipk_app_connect(struct ipk_app *a, uint32_t ip4_be, uint16_t port_be, void *user);
/* ipk_app_connect for either family: peer->family IPK_AF_INET is ipk_app_connect (the
 * address from peer->a[0..3]); IPK_AF_INET6 opens over IPv6 (the core's
 * ipk_tcp_connect_addr: our best source address, a local port whose tuple's RSS hash
 * lands on this worker). Same events. An open made while this worker's core has no
 * source address for the peer yet (ours still in DAD, RFC 4862 §5.4: the first
 * second or two after start) is held by the runtime and retried each loop turn until
 * one has passed DAD, for at most 10 s, then comes as closed IPK_CLOSE_UNREACH;
 * ipk_workers_stop drops held opens without an event. Any other open the core refuses
 * (no route, a mapped or multicast peer, IPv6 off) comes as closed at once
 * (IPK_CLOSE_UNREACH for no route, else IPK_CLOSE_ABORTED). Returns 0, or IPK_EINVAL
 * for a NULL app or peer, port 0, an unknown family or the unspecified address. */
int ipk_app_connect_addr(struct ipk_app *a, const struct ipk_addr *peer, uint16_t port_be,
                         void *user);
/* Queue `len` bytes at buf (the app's memory, read by the networking thread until the
 * matching sent event; not copied now). IPK_EAGAIN when IPK_APP_SENDQ sends of this
 * connection are outstanding, IPK_ECLOSED for a dead cid, IPK_EINVAL for len 0 or a
 * NULL app or buf; 0 when queued. */
int ipk_app_send(struct ipk_app *a, uint64_t cid, const void *buf, uint32_t len);
/* Give back a ref from data (or udp); `len` bytes reopen the window (0 allowed, and
 * for a datagram). Every ref must come back exactly once, also after closed: the
 * ref is the stack's again on return. Returns 0, or IPK_EINVAL for a NULL app or
 * ref. */
int ipk_app_release(struct ipk_app *a, uint64_t cid, struct ipk_pkt *ref, uint32_t len);
/* Close after every queued send (FIN); closed follows. Returns 0, IPK_EINVAL (NULL
 * app) or IPK_ECLOSED (dead cid). */
int ipk_app_close(struct ipk_app *a, uint64_t cid);
/* UDP: receive datagrams for port_be on this worker (every worker binds its own; the
 * RSS hash of a datagram's 4-tuple decides which worker gets it). Returns 0,
 * IPK_EINVAL for a NULL app or port 0, or under UNIFIED the core's refusal
 * (IPK_EADDRINUSE for a bound port); under MERGE/SPLIT that comes with bound. */
int ipk_app_udp_bind(struct ipk_app *a, uint16_t port_be);
/* Send `len` bytes at buf (the app's memory, read by the networking thread until the
 * matching udp_sent event; not copied now) from local_port_be to ip4_be:port_be.
 * Returns 0 when issued, or IPK_EINVAL for a NULL app or buf, len 0 or a zero
 * address/port. The outcome comes with udp_sent. */
int ipk_app_udp_send(struct ipk_app *a, uint16_t local_port_be, uint32_t ip4_be,
                     uint16_t port_be, const void *buf, uint32_t len, void *user);
/* ipk_app_udp_send for either family: peer->family IPK_AF_INET is ipk_app_udp_send
 * (the address from peer->a[0..3]); IPK_AF_INET6 sends over IPv6 (the core's
 * ipk_udp_sendto_addr: our best source address for the peer). Same ownership and
 * udp_sent event; rc there also IPK_EINVAL for an IPv4-mapped peer or IPv6 off.
 * Returns 0 when issued, or IPK_EINVAL for a NULL app, buf or peer, len 0, a zero
 * port, an unknown family or the unspecified address. */
int ipk_app_udp_send_addr(struct ipk_app *a, uint16_t local_port_be,
                          const struct ipk_addr *peer, uint16_t port_be, const void *buf,
                          uint32_t len, void *user);
/*
 * Echo queue: the received refs of one connection held until their bytes are sent
 * back (the echo servers' bookkeeping, examples/echo_workers.c, bench/bench_workers.c).
 * Refs are linked through ref->user, in arrival order; `unsent` is the first one not
 * yet accepted by ipk_app_send. Zero-initialise; one connection per queue; app thread
 * only.
 *   ipk_app_echoq_add   append ref (its bytes: ipk_pkt_mtod(ref), ref->len) and send
 *                       what the connection takes now (IPK_EAGAIN: the rest waits for
 *                       the next sent event).
 *   ipk_app_echoq_sent  on a sent event: release the oldest ref, reopening `len` bytes
 *                       of window, then send more. 0, or IPK_EINVAL when empty.
 *   ipk_app_echoq_drop  give every ref back without reopening the window (closed).
 * Re-entrant: a sent event that UNIFIED runs inside ipk_app_send is handled by the
 * outer call's loop.
 */
struct ipk_app_echoq {
	struct ipk_pkt *head, *tail, *unsent;
	int in_send;
};
/* ipk_app_echoq_add: takes ref (the app's, from data) into q; see above. With a NULL
 * a, q or ref nothing happens (ref stays the caller's). */
void ipk_app_echoq_add(struct ipk_app *a, uint64_t cid, struct ipk_app_echoq *q,
                       struct ipk_pkt *ref);
/* ipk_app_echoq_sent: returns 0, or IPK_EINVAL when q is empty or a or q is NULL
 * (see above). */
int ipk_app_echoq_sent(struct ipk_app *a, uint64_t cid, struct ipk_app_echoq *q, uint32_t len);
/* ipk_app_echoq_drop: releases every ref of q (see above); NULL a or q: nothing. */
void ipk_app_echoq_drop(struct ipk_app *a, uint64_t cid, struct ipk_app_echoq *q);
/* ipk_app_set_state / ipk_app_state: one pointer of per-worker application state,
 * set and read on the worker's application thread (NULL until set). */
void ipk_app_set_state(struct ipk_app *a, void *state);
void *ipk_app_state(const struct ipk_app *a);
/* ipk_app_worker: the worker's index, 0..nworkers-1 (0 for NULL). */
unsigned ipk_app_worker(const struct ipk_app *a);
/* ipk_workers_cfg.app_arg */
void *ipk_app_arg(const struct ipk_app *a);

struct ipk_workers_cfg {
	struct ipk_node_cfg node;   /* template for every worker's node; its events, app,
	                             * queue, cpu and io_open are replaced per worker; its
	                             * core_tweak runs before the RSS fields are set */
	unsigned nworkers;          /* 1..IPK_WORKERS_MAX */
	const int *cpus;            /* NULL: unpinned; else the CPUs to pin to, in order:
	                             * SOFT's reader first (if any), then per worker its
	                             * networking thread and (SPLIT only) its app thread;
	                             * the list is reused from its start when short */
	unsigned ncpus;
	int model;                  /* IPK_MODEL_* */
	int steer;                  /* IPK_STEER_* (ignored with one worker) */
	/* RSS: NULL key = ipk_rss_key_symmetric; NULL reta = entry i -> worker i % N
	 * over reta_size entries (default 128); rss_fields IPK_RSS_F_* (0: default).
	 * With IPK_STEER_QUEUES give the NIC's. A DPDK port (dpdk: spec) replaces all
	 * four with what the port reports it applies (read back after configuring it,
	 * io/dpdk/dpdk_rss.h); a DPDK port without usable RSS makes ipk_workers_start
	 * fall back to IPK_STEER_SOFT over one queue (queue=/queues= dropped from the
	 * spec). Either way one line on stderr says which steering runs. */
	const uint8_t *rss_key;
	const uint16_t *reta;
	uint32_t reta_size;
	uint8_t rss_fields;
	const struct ipk_app_ops *app;
	void *app_arg;
	uint32_t ring_slots;        /* per SPSC ring, power of two, default 4096 */
	/* (optional) Run each worker's networking thread yourself (ipkitd does: it
	 * serves its applications' rings between polls). With run set, app may be
	 * NULL and no model runs: every worker's node gets node.events with
	 * node_apps[i] as its app (ipk_node_app in the callbacks), and worker i's
	 * thread (pinned first, as without run) calls run(ws, i, run_arg) once, which
	 * loops ipk_node_poll on ipk_workers_node(ws, i) and sleeps on that node's
	 * backend fd after ipk_io_arm, until ipk_workers_stopping(ws) (the stop
	 * request kicks that fd). node.core_tweak gets node_apps[i]. */
	void (*run)(struct ipk_workers *ws, unsigned worker, void *run_arg);
	void *run_arg;
	void *const *node_apps;     /* nworkers entries; NULL: node.app for every worker */
};
/* Fill *cfg with the defaults (one worker, UNIFIED, SOFT steering, a 128-entry
 * table, 4096-slot rings) and cfg->node with ipk_node_cfg_default's; NULL: nothing. */
void ipk_workers_cfg_default(struct ipk_workers_cfg *cfg);

/* Create every node and start the threads. NULL with a one-line message on failure
 * (nothing left running). */
struct ipk_workers *ipk_workers_start(const struct ipk_workers_cfg *cfg, char *err,
                                      size_t errlen);
/* Stop and join every thread (app stop hooks run); the nodes stay for their counters
 * (ipk_workers_stats, ipk_counters(ipk_node_ctx(ipk_workers_node(ws, i)))). Call it
 * from the thread that started them, never from a worker's callback. NULL is
 * ignored.
 * Connections still open at stop get no closed event, and their unfinished
 * ipk_app_send calls (and ipk_app_udp_send ones) no sent (udp_sent): those events
 * may also be left in the rings undelivered. Once ipk_workers_stop has returned no
 * thread reads any of those buffers again, so they are the application's to free
 * then (not in the stop hook: under MERGE/SPLIT the networking thread may still be
 * copying from them); keep each connection's outstanding buffers for that (sent
 * reports them in order). References still held (data, udp) need no
 * ipk_app_release after stop: ipk_workers_destroy frees them with the pools. */
void ipk_workers_stop(struct ipk_workers *ws);
/* Stop if running, then free everything (nodes, pools, rings). */
void ipk_workers_destroy(struct ipk_workers *ws);
/* Ask the threads to stop without waiting (async-signal-safe); ipk_workers_stop joins. */
void ipk_workers_request_stop(struct ipk_workers *ws);

struct ipk_worker_stats {
	uint64_t rx_frames;     /* frames this worker's context received */
	uint64_t wrong_queue;   /* ... whose RSS hash maps to another worker (must be 0) */
	uint64_t accepted, connected, closed;
	uint64_t events, commands;    /* app interface messages */
	uint64_t app_wakeups;         /* MERGE: sleeps of either side ended by the other */
	uint64_t steer_drops;         /* SOFT: frames dropped (ring full, too big, no buffer);
	                               * QUEUES: ARP copies dropped (inbox full, no buffer) */
	uint64_t arp_forwarded;       /* QUEUES: ARP and ND frames this worker copied to the
	                               * others */
	uint64_t udp_rx, udp_tx;      /* datagrams delivered to / sent for the app */
	uint64_t udp_drops;           /* datagrams not delivered (no descriptor) */
};
/* Counters of worker i: exact after stop, a recent snapshot while running. Returns
 * 0 or IPK_EINVAL (bad index). Core counters: ipk_counters(ipk_node_ctx(node)) after stop. */
int ipk_workers_stats(const struct ipk_workers *ws, unsigned i, struct ipk_worker_stats *st);
/* ipk_workers_node: worker i's node (NULL for a bad index); owned by ws. Touch its
 * context only after ipk_workers_stop: while running it belongs to the worker. */
struct ipk_node *ipk_workers_node(struct ipk_workers *ws, unsigned i);
/* The steering that runs, returned as IPK_STEER_SOFT or IPK_STEER_QUEUES (QUEUES
 * asked on a DPDK port without usable RSS runs SOFT; one worker counts as QUEUES). */
int ipk_workers_steering(const struct ipk_workers *ws);
/* SOFT steering reader: frames received / dropped for lack of ring room or buffers. */
void ipk_workers_steer_stats(const struct ipk_workers *ws, uint64_t *rx, uint64_t *drops);
/* 1 once ipk_workers_request_stop (or _stop) was called: a cfg.run loop returns
 * (acquire: what the stopping thread wrote before is visible). 1 for NULL. */
int ipk_workers_stopping(const struct ipk_workers *ws);
/* "unified", "merge", "split" -> IPK_MODEL_*, or -EINVAL for anything else (NULL
 * included). */
int ipk_model_parse(const char *name);

#ifdef __cplusplus
}
#endif
#endif
