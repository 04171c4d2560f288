/*
 * Internals of the multi-core runtime (include/ipkit/runtime.h, "workers"):
 *   workers.c  threads, per-worker nodes, RSS configuration, stats
 *   wio.c      the worker's backend: software-steered rings or a wrapped queue, and
 *              the wrong-queue check on every received frame
 *   steer.c    the software-steering reader thread (IPK_STEER_SOFT)
 *   model.c    the application interface under the unified / merge / split models
 */
#ifndef IPKIT_RUNTIME_WORKERS_INT_H
#define IPKIT_RUNTIME_WORKERS_INT_H

#include <ipkit/runtime.h>

#include <pthread.h>

#include "spsc.h"

/* Counters written by one thread and read by another: relaxed atomic accesses (the
 * value may be a little old, never torn; one writer, so no atomic add is needed). */
#define WK_INC(x) __atomic_store_n(&(x), (x) + 1, __ATOMIC_RELAXED)
#define WK_ADD(x, n) __atomic_store_n(&(x), (x) + (n), __ATOMIC_RELAXED)
#define WK_GET(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
/* ... and counters more than one thread writes (an atomic add). */
#define WK_INC_MT(x) __atomic_fetch_add(&(x), 1, __ATOMIC_RELAXED)

/*
 * A sleeping side and the side that wakes it, over an eventfd. The sleeper arms,
 * re-checks its queues and sleeps only if they are still empty; a producer commits,
 * then kicks, which writes the eventfd only when the sleeper is armed. Both sides put
 * a full fence between their store and their load (Dekker): either the sleeper sees
 * the new entries or the producer sees `armed` set, never neither.
 */
struct waker {
	int efd;
	uint32_t armed;
	uint64_t wakeups;
};
int waker_init(struct waker *w);
void waker_fini(struct waker *w);
/* Sleeper: drain the eventfd and set armed; then re-check the queues. */
void waker_arm(struct waker *w);
void waker_disarm(struct waker *w);
/* Producer: after committing to a ring the sleeper reads. */
void waker_kick(struct waker *w);

/* Message between the networking and the application side (model.c). */
struct wk_msg {
	uint8_t type;
	uint8_t why;
	uint16_t port_be;
	uint32_t len;
	uint64_t cid;
	void *p;            /* ref packet, send buffer or user pointer */
	const uint8_t *data;
	struct ipk_tuple t;
	/* M_UDP6 and C_UDP_SEND6: the IPv6 addresses (t carries the ports only) */
	uint8_t local6[16], peer6[16];
};

/* A producer's side of a message ring: messages that do not fit wait in a private
 * overflow list (kept in order), so neither side ever blocks or drops an event that
 * carries a packet reference. */
struct wk_ovf {
	struct wk_ovf *next;
	struct wk_msg m;
};
struct outbox {
	struct spsc *r;
	struct wk_ovf *head, *tail;
	uint32_t filled;   /* slots filled since the last commit */
};

/* IPK_STEER_QUEUES: an ARP or ND frame one worker received, copied for another
 * (wio.c). An Ethernet ARP packet for IPv4 is 42 bytes (the rest of a padded frame is
 * padding); NS/NA with a link-layer option are 86, an RA with a prefix, MTU and
 * source link-layer option 118: 254 leaves room for more options. */
#define WK_ARP_MAX 254
#define WK_ARP_SLOTS 32
struct wk_arp {
	uint16_t len;
	uint8_t b[WK_ARP_MAX];
};

struct wk_rec;      /* networking side of a connection (model.c) */
struct wk_appside;  /* application side tables (model.c) */
struct wk_held;     /* an IPv6 open waiting for DAD (model.c) */
struct steer;

struct wk {
	struct ipk_workers *ws;
	unsigned idx;
	struct ipk_node *node;
	struct ipk_app *app;     /* the handle app callbacks get */
	pthread_t net_thr, app_thr;
	int net_started, app_started;
	int net_cpu, app_cpu;

	/* backend (wio.c) */
	struct waker net_wake;   /* the networking thread sleeps on it */
	struct ipk_io *inner;    /* IPK_STEER_QUEUES: the real queue */
	int epfd;                /* inner fd + net_wake */
	struct spsc rx, rxret, tx, txret; /* SOFT: reader pkts in / back, ours out / back */
	struct spsc *arp_in;     /* QUEUES: arp_in[j] carries worker j's ARP frames to us
	                          * (struct wk_arp; one ring per sender, so SPSC) */

	/* model (model.c) */
	struct spsc ev, cmd;     /* net -> app, app -> net (MERGE, SPLIT) */
	struct outbox evo, cmdo; /* their producer sides */
	struct waker app_wake;
	struct wk_rec *recs;
	struct wk_rec *rec_free;
	uint32_t nrecs;
	struct wk_appside *as;
	void *app_state;
	/* model.c cb_payload: the buffer small payloads are copied into (one clone
	 * each), and the bytes of it used; networking thread only */
	struct ipk_pkt *small;
	uint32_t small_fill;
	/* model.c: IPv6 opens waiting for an address to pass DAD (networking thread) */
	struct wk_held *held;
	uint32_t nheld;

	struct ipk_worker_stats st;
};

struct ipk_workers {
	struct ipk_workers_cfg cfg;
	unsigned n;
	struct wk *w;
	uint8_t key[IPK_RSS_KEY_LEN];
	uint8_t fields;          /* IPK_RSS_F_* (0: default) */
	uint8_t mac[6];          /* SOFT without a device MAC: the one all workers use */
	uint16_t *reta;
	uint32_t reta_size;
	int soft;                /* software steering in use */
	int no_port_rss;         /* QUEUES: the DPDK port has no usable RSS (wio.c) */
	int addr6_rc;            /* SOFT: steer_set_addr6's result (negative: failed) */
	char *spec_own;          /* the spec the software fallback uses (owned) */
	struct steer *steer;
	uint32_t stop;           /* set once: every thread leaves its loop */
};

/* workers.c: replace the key, table and hash fields (the port's own, read back);
 * 0 or -EINVAL with a message when an entry names no worker. */
int wk_rss_install(struct ipk_workers *ws, const uint8_t *key, uint8_t fields,
                   const uint16_t *reta, uint32_t reta_size, char *err, size_t errlen);

/* wio.c */
struct ipk_io *wio_open(struct ipk_pool *pool, void *arg, char *err, size_t errlen);
/* The worker a received frame belongs to, by its RSS hash: 0..n-1, or -1 for a frame
 * without one (not IPv4 or IPv6, or IPv6 Neighbor Discovery: every worker gets it). */
int wk_frame_worker(const struct ipk_workers *ws, const struct ipk_pkt *k, uint8_t link);
/* 1 when the networking side has work waiting that is not a received frame. */
int wk_net_pending(struct wk *w);
/* QUEUES with several workers: the ARP inboxes of w (0 or -ENOMEM); freed by
 * wio_arp_fini. */
int wio_arp_init(struct wk *w);
void wio_arp_fini(struct wk *w);

/* steer.c */
struct steer *steer_create(struct ipk_workers *ws, char *err, size_t errlen);
int steer_start(struct steer *s, int cpu);
void steer_kick(struct steer *s);
void steer_stop(struct steer *s);    /* joins the thread (the stop flag is set) */
void steer_destroy(struct steer *s); /* stops, then frees */
const struct ipk_io_caps *steer_caps(const struct steer *s);
/* The reader's device learns the workers' IPv6 (afxdp's filter): worker 0's core
 * config, once it is final. 0 or a negative errno. */
int steer_set_addr6(struct steer *s, const struct ipk_config *c);
void steer_stats(const struct steer *s, uint64_t *rx, uint64_t *drops);

/* model.c */
int model_init(struct wk *w, char *err, size_t errlen);
void model_fini(struct wk *w);
extern const struct ipk_ops model_events;
/* Networking side, each loop turn: run queued commands, publish events. Returns the
 * commands run. */
uint32_t model_net_turn(struct wk *w);
/* Networking side, each loop turn while w->held: retry the IPv6 opens waiting for
 * our address to pass DAD (or fail those whose time is over). */
void model_net_retry(struct wk *w);
/* Networking side: make the events queued so far visible and wake the app. */
void model_net_publish(struct wk *w);
void *model_app_thread(void *arg);
void model_app_start_unified(struct wk *w);
void model_app_stop_unified(struct wk *w);

static inline int wk_stopping(const struct ipk_workers *ws)
{
	return (int)__atomic_load_n(&ws->stop, __ATOMIC_ACQUIRE);
}

#endif
