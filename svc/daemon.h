/*
 * ipkitd internals: the daemon's private state. Nothing here is shared with an
 * application; the region (svc/proto.h) is only ever read through the checks in
 * d_sock.c.
 */
#ifndef IPKIT_SVC_DAEMON_H
#define IPKIT_SVC_DAEMON_H

#include "proto.h"

#include <ipkit/runtime.h>
#include <pthread.h>
#include <sys/types.h>

#define D_MAX_IDS 16
#define D_PRIO_MAX 16
#define D_RING_CLASSES 40
#define D_RING_MIN 512u        /* smallest ring pair block */
#define D_PASS_BUDGET 64u      /* SQEs taken from one socket per pass (fairness) */
#define D_UDP_QMAX 256u        /* datagrams held per UDP socket before dropping */
#define D_UDP_QBYTES (1u << 20) /* ... and bytes: a peer flooding a port nobody reads
                                 * costs at most this much memory per socket */
#define D_SOCK_IDX_BITS 24
#define D_BACKLOG_MAX 4096u
#define D_GB_MAX (1u << 20)     /* bytes given back (GIVEBACK) held per connection */
#define D_PIPE_BYTES (64u << 10) /* bytes in flight one way between two applications
                                  * of this daemon; allocated while it holds any */

struct d_cfg {
	const char *io_spec, *sock_path;
	char *owned[2];              /* strdup'd io_spec / sock_path */
	uint32_t ip4_be, gw_be;
	uint8_t prefix_len;
	/* --ip6 ADDR/N | auto: IPv6 on (the core's link-local address always, this
	 * static address when given, SLAAC from router advertisements) */
	int ip6;
	uint8_t ip6_addr[16], ip6_plen;
	/* --link-index N: the scope_id of ipkitd's one link (link-local addresses,
	 * RFC 4007 §6); default the kernel's index of the interface the io spec
	 * names (tap:, afpacket:, afxdp:), else 1 */
	uint32_t link_index;
	uid_t allow_uid[D_MAX_IDS], low_uid[D_MAX_IDS];
	gid_t allow_gid[D_MAX_IDS];
	unsigned n_allow_uid, n_low_uid, n_allow_gid;
	uint64_t max_buf, max_ring;
	uint32_t max_sq, max_cq, max_socks;
	uint32_t conns;              /* the stack's connection objects per worker */
	unsigned prio_levels, prio_default, prio_share; /* levels, default level, entries a
	                                                 * lower level gets per pass */
	uid_t prio_uid[D_MAX_IDS];
	unsigned prio_uid_level[D_MAX_IDS], n_prio_uid;
	int busy_poll, graceful, verbose;
	int tx_zc;                   /* zero-copy SEND: 1 on, 0 off, -1 auto (tap/tun) */
	uint32_t spin_us;
	uint32_t low_inflight;       /* bytes a socket below level 0 may hold in the
	                              * stack unacknowledged (0: no limit), d_net.c */
	int urgent_wake;             /* level-0 completions woken mid-pass (d_app.c) */
	unsigned workers;            /* --workers: one node (queue) and thread each */
	int steer;                   /* IPK_STEER_*, -1: auto (queues= in the spec) */
	int cpus[IPK_WORKERS_MAX];   /* --cpus: pin the workers (runtime's order) */
	unsigned ncpus;
};

struct d_zc;
struct spsc;

/* A port lookup a worker remembers (d_pcache.c): valid while the daemon's port
 * generation has not moved since. A port held by up to D_PCE_MEMB sockets that
 * take the lookup's family is remembered as their list, in the order the choice
 * counts them (d_port_members): each the socket itself when it is the worker's
 * own (only its owner frees it), else its ids for a message. */
#define D_PCACHE 1024u
#define D_PCE_MEMB 8u
struct d_pmem {
	struct d_sock *s;            /* the worker's own socket, or NULL */
	struct d_app *app;           /* its application (alive while a W is held) */
	uint32_t app_id, sock_id;
	unsigned wk, prio;
};
struct d_pce {
	uint32_t gen;                /* d->port_gen when filled (0: empty) */
	uint16_t port_be;
	uint8_t type, fam;
	unsigned n;                  /* members (1..D_PCE_MEMB) */
	struct d_pmem m[D_PCE_MEMB];
};
struct d_pref {                      /* a lookup's answer */
	struct d_sock *s;            /* ours (usable), or NULL */
	struct d_app *app;
	uint32_t app_id, sock_id;
	unsigned wk, prio;
	int found;
};
struct d_pdelay;

/* cross-worker messages (d_msg.c) */
enum { D_MSG_UDP = 1, D_MSG_CONNECT, D_MSG_CLOSE, D_MSG_CLOSED, D_MSG_ACCEPT, D_MSG_ACC_DONE,
       D_MSG_INSTALL, D_MSG_REMOVE, D_MSG_INSTALLED };
struct d_obox;

/* An operation in flight: the SQE copied out of the ring, never re-read. */
struct d_op {
	struct ipk_svc_sqe e;
	uint32_t done;
	struct d_zc *zc;             /* SEND being queued zero-copy (d_zc.c) */
};

struct d_sock;
struct d_app;

/* A page of an application's socket table (d_app.sdir): made once, freed with
 * the application, so a pointer to a slot stays valid while the table grows. */
#define D_SPAGE_BITS 10
#define D_SPAGE (1u << D_SPAGE_BITS)
struct d_spage {
	struct d_sock *s[D_SPAGE];
	uint8_t gen[D_SPAGE];
};

/* A zero-copy SEND (d_zc.c): the ext record of its descriptors. */
struct d_zc {
	struct ipk_pkt_ext x;        /* x.arg = this */
	struct d_app *app;
	struct d_sock *s;            /* NULL: the socket is gone (an orphan) */
	struct d_zc *prev, *next;    /* s's records */
	struct d_zc *done_next;      /* s's released records, waiting to complete */
	struct d_zc *aprev, *anext;  /* all of the app's records (freed at shutdown) */
	struct ipk_pkt *hold;        /* the daemon's own reference while queuing */
	uint64_t user_data;
	uint32_t len;
};

/* FIFO of ops, capacity fixed at creation (the socket's cq_entries). */
struct d_opq {
	struct d_op *v;
	uint32_t head, n, cap;
};

struct d_dgram {
	struct d_dgram *next;
	struct ipk_svc_addr from;
	uint32_t len;
	uint8_t data[];
};

enum d_state { D_NEW, D_BOUND, D_LISTEN, D_CONNECTING, D_CONNECTED, D_CLOSED };

/* Bytes one paired socket sent and the other has not received yet (d_loop.c). */
struct d_pipe {
	uint8_t *buf;
	uint32_t head, n;            /* capacity D_PIPE_BYTES */
};

struct d_app;

struct d_sock {
	struct d_app *app;
	uint32_t id;                 /* 0: not attached yet (accepted, waiting) */
	unsigned wk;                 /* the worker that owns it: its node holds the
	                              * connection, its thread consumes the SQ */
	int type;                    /* IPK_SVC_TCP / UDP */
	unsigned prio;               /* level, 0 served first (set by d_sock_level) */
	int lvl_counted;             /* counted in d->lvl_socks[prio] */
	enum d_state state;
	/* rings: daemon-private copies of where they are and how big */
	uint64_t ring_off;
	unsigned ring_cls;
	struct ipk_svc_ring *ring;
	struct ipk_svc_sqe *sqes;
	struct ipk_svc_cqe *cqes;
	uint32_t sq_entries, cq_entries;
	uint32_t sq_head, cq_tail;   /* the daemon's own indices (authoritative) */
	int broken;                  /* SQ tail found out of range */
	uint32_t inflight;           /* consumed, not yet completed */
	uint32_t tx_held;            /* bytes written into the stack, not yet acked */
	uint32_t rx_unread, rx_owed; /* bytes the core delivered and we have not
	                              * released (ipk_tcp_recved); of those, the ones
	                              * the app already took */
	uint64_t rx_total;           /* bytes the core delivered (low_rwnd_max) */
	struct d_opq txq, rxq;       /* SEND/SHUTDOWN in order; RECV/RECVFROM */
	struct ipk_svc_cqe *ovf;     /* completions waiting for CQ room */
	uint32_t ovf_head, ovf_n;
	/* TCP */
	struct ipk_conn *conn;
	int err;                     /* -errno the connection ended with (0: normal) */
	int rx_eof;
	uint16_t lport_be;
	int reuse;                   /* asked to share its port (IPK_SVC_SQE_F_REUSEPORT) */
	int inherit;                 /* joins its parent's listener (IPK_SVC_SQE_F_INHERIT, d_family.c) */
	int port_member;             /* holds lport_be in the port table (d_port.c) */
	struct d_sock *port_next;    /* the other sockets on the port, a circle */
	int listening;               /* state is D_LISTEN, as the port's circle sees
	                              * it: written under the port lock, read by any
	                              * worker's SYN (state itself is the owner's) */
	struct ipk_pkt *rxh, *rxt;   /* held payload (clones), linked by ->user */
	struct d_op conn_op;         /* CONNECT in flight */
	unsigned move_to;            /* with move: the worker its CONNECT's flow reaches */
	int move;                    /* 1: CONNECT taken, hand over after this turn;
	                              * 2: handed over, the message in flight
	                              * (d_sock_handover, d_msg.c) */
	/* accepted on one worker for a listener of another (d_msg.c d_acc_cross):
	 * the listener's worker queues it, gives it rings and an id and answers
	 * (D_MSG_ACC_DONE); until then its own worker leaves its queues alone */
	struct ipk_svc_addr acc_addr; /* the peer, read at accept by the connection's
	                               * worker (the listener's never reads the conn) */
	struct ipk_svc_addr acc_local; /* its own address, the same way (d_sock_rings
	                                * shows it in the ring header) */
	int xfer;                    /* its worker's: waiting for ACC_DONE */
	int in_msg;                  /* a message carries a pointer to it */
	int xfer_dead;               /* reclaimed meanwhile: the message's receiver
	                              * frees the struct */
	struct d_sock *xfer_prev, *xfer_next; /* its worker's xfer list */
	/* listener */
	struct d_sock *acc_h, *acc_t, *acc_next;
	uint32_t acc_n, backlog;
	struct d_op acc_op;
	int acc_armed;
	/* TCP between two applications of this daemon (d_loop.c): no connection in
	 * the core, the two sockets name each other and bytes move through pipes */
	struct d_sock *peer;
	struct d_pipe rxp;           /* bytes for this socket's RECVs */
	uint16_t peer_port_be;       /* the other end's port (accept's address) */
	/* families the socket serves, from its BIND (d_net.c d_fam_ok): 0 both (never
	 * bound), D_FAM4 (AF_INET), D_FAM6 (AF_INET6 with V6ONLY), both (AF_INET6) */
	unsigned fam;
	int v6;                      /* its connection runs over IPv6 */
	/* the app's active list at this socket's level (d_sock.c): sockets with
	 * submissions or work left, so a pass costs O(active sockets) */
	struct d_sock *act_prev, *act_next;
	int on_act, more;
	int pumping, pump_again;     /* d_tx_pump re-entry guard */
	struct d_sock *wake_next;    /* on its worker's wake list for the app
	                              * (d_appw.wake_h): posted this pass */
	int wake_on;
	/* UDP */
	struct d_dgram *dq_h, *dq_t;
	uint32_t dq_n, dq_bytes;
	uint64_t udp_drops;
	/* zero-copy SENDs (d_zc.c) */
	struct d_zc *zc_h;           /* records not released */
	struct d_zc *zc_done_h, *zc_done_t; /* released, to complete */
	/* one connection held by several processes after fork (d_family.c): the
	 * members form a circle; one holds the connection (conn, received data),
	 * the others are away (their RECVs wait) */
	struct d_sock *fam_next;     /* NULL or self: alone */
	int fam_away;
	int fam_want;                /* away with SENDs queued: takes the connection
	                              * once the holder's SENDs are out */
	uint8_t *gb;                 /* bytes given back (GIVEBACK), before rxh */
	uint32_t gb_len, gb_pos;
	int gb_wait;                 /* a GIVEBACK of the member that had the data
	                              * is due: deliver nothing before it */
	/* its port installed in the other workers' contexts (d_pinst.c): the
	 * LISTEN or BIND (inst_ud) completes when inst_wait answers are in */
	uint32_t inst_gen, inst_wait;
	int32_t inst_rc;             /* the first error answered, or 0 */
	uint64_t inst_ud;
};

#define D_FAM4 1u
#define D_FAM6 2u

/* epoll tags */
enum { D_EV_LISTEN = 1, D_EV_NODE, D_EV_CTL, D_EV_BELL, D_EV_PID, D_EV_KICK };
struct d_ev {
	int kind;
	struct d_app *app;
};

struct d_ring_alloc {
	uint64_t *free[D_RING_CLASSES];
	uint32_t n[D_RING_CLASSES], cap[D_RING_CLASSES];
	uint64_t bump, end;          /* region offsets */
};

/* An application's service state on one worker: the sockets of it that worker
 * owns which have submissions or work left, per level, and the pass flags. */
struct d_appw {
	struct d_sock *act_h[D_PRIO_MAX], *act_t[D_PRIO_MAX]; /* active sockets per level */
	uint32_t act_n[D_PRIO_MAX];
	int dirty;                   /* this pass: its sockets are looked at */
	uint32_t last_seq;           /* submit_seq at this worker's last harvest */
	int rescan, ovf_wait;
	/* the hand-off (--workers > 1, d_sock.c d_ho_give): sockets of this worker
	 * that another worker's harvest found ready. Any worker sets bits (atomic
	 * OR, word then summary then flag); only this worker takes them, at the
	 * start of its own pass. NULL with one worker. */
	uint64_t *ho_bm, *ho_sum;    /* ready_words / ready_sum_words words */
	int ho_flag;                 /* bits may be set: look at ho_sum */
	/* what this worker posted to since its last d_wake_apps: each worker wakes
	 * what it posted (a socket's completions are its owner's to post) */
	int posted;
	int loud;                    /* ... a completion other than a SEND's (d_evfd.c) */
	struct d_sock *wake_h;
};

struct d_app {
	struct d_daemon *d;
	struct d_app *prev, *next;
	uint32_t id;
	pid_t pid;
	uid_t uid;
	int low_ports;
	unsigned prio_max;           /* the highest level (smallest number) it may ask */
	struct d_appw *pw;           /* per worker (d->nw entries) */
	uint64_t *ready_sum, *ready_bm; /* the region's ready bitmap (untrusted) */
	uint32_t ready_words, ready_sum_words;
	uint16_t *own;               /* --workers > 1: per socket index (ready_words
	                              * * 64) its worker | level << 8, read by a
	                              * harvest without the owner's socket; NULL
	                              * with one worker */
	uint64_t *ho_mem;            /* the pw[].ho_bm/ho_sum words, one block */
	int ctl_fd, bell_fd, pid_fd;
	int ev_fd;                   /* the app's wake eventfd (d_evfd.c), or -1 */
	uint32_t bells;              /* doorbell events seen (drained every 4096th) */
	struct d_ev ev_ctl, ev_bell, ev_pid;
	int ready;                   /* hello done, region mapped */
	int refused;                 /* not allowed: answered, waiting to close */
	int exit_fin;                /* IPK_SVC_OPEN_EXIT_FIN at hello */
	uint8_t *base;
	uint64_t size;
	struct ipk_svc_region *hdr;
	uint64_t ring_area_off, ring_area_size, buf_area_off, buf_area_size;
	struct d_ring_alloc ra;
	struct d_sock ctl;           /* the control rings */
	struct d_spage **sdir;       /* the socket table: index 1.. live sockets
	                              * (NULL = free) and their generations, in
	                              * pages that never move once made (a reader
	                              * needs no lock against growth: d_slot) */
	uint32_t ndir;               /* sdir's entries, fixed at the first growth */
	uint32_t nsocks, cap, nlive;
	uint32_t *free_idx, nfree;
	uint32_t cq_seq;             /* completions posted, any socket (cqe->seq);
	                              * several workers: a relaxed fetch-add */
	uint64_t gone_ns;            /* when its death was noticed */
	const char *dying;           /* set: reclaim after this epoll batch */
	uint32_t zc_out;             /* zero-copy records not released (d_zc.c) */
	struct d_zc *zc_all;         /* those records */
	int zc_dead;                 /* reclaimed: unmap and free at zc_out 0 */
	int zombie;                  /* ... meanwhile on d->zombies */
	pthread_mutex_t amu;         /* nw > 1: the socket table (slots, free list,
	                              * nsocks, nlive), the ring allocator and the
	                              * zero-copy records' list and count; taken at
	                              * creation and destruction only, never by a
	                              * SEND, RECV or NOP */
	int amu_ok;                  /* amu initialised */
};

/* One worker: a node (context, backend queue) and, with --workers above 1, a
 * thread (runtime/workers.c runs d_wk_run on it). With one worker the main
 * thread is the worker, as before. */
struct d_wk {
	struct d_daemon *d;
	unsigned idx;
	struct ipk_node *node;
	struct ipk_ctx *ctx;
	int ep;                      /* --workers > 1: node fd, kick fd, (worker 0) bells */
	int kick_fd;                 /* eventfd: another thread gave this worker work */
	pthread_mutex_t mu;          /* W[i] (nw > 1): this worker's pass and poll;
	                              * the control thread takes every W in index
	                              * order (d_lock); IPKITD_BIG_LOCK=1: every
	                              * worker takes wk[0].mu instead (d_wmu) */
	unsigned waiters;            /* threads waiting for mu (d_relax) */
	int sleeping;                /* committed to epoll_wait: seq_cst store, read
	                              * seq_cst by d_kick after the kicker published
	                              * its work (a Dekker pair, d_wk_sleep_ok) */
	int in_pass;                 /* inside d_serve + poll (atomic; overlap) */
	uint64_t overlap;            /* its passes during which another worker was
	                              * inside its own: the lock split's proof */
	struct d_ev ev_node, ev_kick;
	uint32_t passes, rot;
	uint32_t passes_done;        /* nw > 1: passes ended (release; d_defer)*/
	uint32_t act_lvl[D_PRIO_MAX];  /* its active sockets per level, all apps */
	uint32_t defer_mark[IPK_WORKERS_MAX]; /* d_defer: worker j's passes begun
	                                        * when we first yielded to it */
	uint8_t defer_on[IPK_WORKERS_MAX];
	uint32_t ho_lvls;            /* levels of the sockets other workers handed it
	                              * since its last pass began (atomic bit mask;
	                              * d_defer counts them as active) */
	/* counters (under d->mu), logged at shutdown: who served what */
	uint64_t sqes, socks, accepted, connected, udp_rx;
	uint64_t handed_in, handed_out; /* sockets it took from its hand-off mask;
	                                 * bits its harvests set in other workers' */
	uint64_t msgs_in, msgs_out, msg_gone; /* d_msg.c: received, sent, and of
	                                       * those received, dropped (socket
	                                       * gone, queue full) */
	uint64_t msg_full;           /* the ring to the owner was full: not sent
	                              * (d_msg_send) or delayed (d_msg_post) */
	struct d_obox *ob_h, *ob_t;  /* d_msg_post's messages waiting for ring room
	                              * (this worker's thread only) */
	struct d_sock *xfer_h;       /* its connections accepted for another worker's
	                              * listener, not yet answered (d_acc_cross) */
	uint64_t acc_out, acc_in;    /* such accepts sent / queued on its listeners */
	uint64_t acc_done;           /* answers it received for its acc_out */
	uint64_t acc_reaped;         /* of its acc_out, destroyed by a reclaim before
	                              * the answer (the application died) */
	uint64_t loop_cross;         /* app-to-app sends into a pipe of another
	                              * worker's socket (d_loop.c): must stay 0 */
	uint32_t *pst;               /* nw > 1: per (type, port) the install
	                              * generation this worker saw << 1 | its context
	                              * has it (d_pinst.c; this worker's thread, or
	                              * the control thread in a reclaim) */
	uint64_t port_in;            /* INSTALL / REMOVE messages it applied */
	struct d_pce *pc;            /* nw > 1: its port cache (D_PCACHE entries) */
	uint64_t pc_hit, pc_miss;    /* lookups answered by it / under the port lock */
	uint64_t adopt_pair;         /* ADOPTs that took one more W (d_family_adopt) */
	uint64_t adopt_world;        /* ADOPTs that stopped every other worker */
	uint64_t urgent_wakes;       /* level-0 completions woken mid-pass (d_wake_urgent) */
	struct d_pdelay *pd;         /* test knob IPKITD_INSTALL_DELAY_MS: INSTALLs
	                              * held back (d_pinst.c); npd of D_PDELAY_MAX */
	unsigned npd;
};

struct d_daemon {
	struct d_cfg cfg;
	struct d_wk *wk;             /* nw entries; wk[0].node is the node of one worker */
	unsigned nw;
	struct ipk_workers *ws;      /* nw > 1 */
	struct spsc *mq;             /* nw > 1: nw * nw message rings (d_msg.c) */
	pthread_mutex_t pmu;         /* nw > 1: the port tables, their circles, the
	                              * ephemeral cursors, pgen, the zombie list
	                              * (d_plock; taken inside a W, never around one) */
	int mt;                      /* nw > 1: threads, take the locks */
	int big;                     /* IPKITD_BIG_LOCK=1: one lock for every worker
	                              * (the comparison the split is measured against) */
	uint64_t ev_ns;              /* when the control thread's epoll batch returned */
	unsigned awake;              /* workers not committed to sleep (atomic) */
	unsigned next_wk;            /* round robin of new sockets */
	uint8_t rss_key[IPK_RSS_KEY_LEN];
	uint16_t reta[128];
	int ep, lfd, bound;
	struct d_ev ev_listen, ev_node;
	struct d_ev ev_bell;         /* every doorbell's tag with several workers */
	struct d_app *apps;
	uint32_t next_app_id, napps;
	struct d_sock *tcp_port[65536], *udp_port[65536];
	uint16_t udp_next_eph, loop_next_eph;
	uint64_t loop_conns, loop_dgrams, loop_dgram_drops;
	uint64_t reclaims;
	uint32_t passes;             /* service passes (cqe->pass) */
	uint32_t rcvbuf;             /* the core's tcp_rcvbuf (d_core_tweak) */
	int zc;                      /* SENDs go zero-copy (the backend gains) */
	struct d_app *zombies;       /* reclaimed apps whose region the stack still
	                              * points into (zero-copy sends), via next/prev */
	uint32_t lvl_socks[D_PRIO_MAX]; /* live sockets per level (--low-inflight
	                                 * limits a level only while a higher one has any) */
	uint64_t inst_delay_ns;      /* test knob (d_pinst.c), 0: none */
	uint32_t port_gen;           /* moves (under the port lock, release) with every
	                              * change a port cache could have seen (d_pcache.c) */
	uint32_t *tturn;             /* nw > 1: per TCP port the turn of its group's
	                              * listeners (atomic, d_port_turn) */
	uint32_t *pgen;              /* nw > 1: per (type, port) the generation of
	                              * its last install (d_pinst.c; port lock) */
	int reclaiming;              /* d_app_reclaim runs: it may touch every worker's
	                              * sockets (d_sock_destroy of a listener) */
};

/* The table slot of index idx of a (idx below a->cap: its page exists). */
static inline struct d_sock **d_slot(const struct d_app *a, uint32_t idx)
{
	return &a->sdir[idx >> D_SPAGE_BITS]->s[idx & (D_SPAGE - 1)];
}
static inline uint8_t *d_slot_gen(const struct d_app *a, uint32_t idx)
{
	return &a->sdir[idx >> D_SPAGE_BITS]->gen[idx & (D_SPAGE - 1)];
}
/* Lock-free readers of the table (a harvest, a message's receiver, worker 0's
 * CLOSE): a slot and nsocks are stored with release under the app's mutex and
 * loaded with acquire, so a socket found is fully made. */
static inline struct d_sock *d_slot_get(const struct d_app *a, uint32_t idx)
{
	return __atomic_load_n(d_slot(a, idx), __ATOMIC_ACQUIRE);
}
static inline void d_slot_set(const struct d_app *a, uint32_t idx, struct d_sock *s)
{
	__atomic_store_n(d_slot(a, idx), s, __ATOMIC_RELEASE);
}
static inline uint32_t d_nsocks(const struct d_app *a)
{
	return __atomic_load_n(&a->nsocks, __ATOMIC_ACQUIRE);
}

static inline struct d_wk *d_sw(const struct d_sock *s) { return &s->app->d->wk[s->wk]; }
static inline struct ipk_ctx *d_sctx(const struct d_sock *s) { return d_sw(s)->ctx; }
static inline uint64_t d_snow(const struct d_sock *s) { return ipk_node_now(d_sw(s)->node); }
static inline struct d_appw *d_spw(const struct d_sock *s) { return &s->app->pw[s->wk]; }

/* A statistic in the application's region (svc/proto.h): with several workers
 * any of them may count into one application's region, so a relaxed atomic add
 * (the application reads counters; nothing is ordered by them); with one worker
 * a plain add. */
#define D_STAT(app, f, n)                                                              \
	do {                                                                           \
		struct d_app *d_st_ = (app);                                           \
		if (d_st_->d->nw > 1)                                                  \
			__atomic_add_fetch(&d_st_->hdr->f, (uint64_t)(n), __ATOMIC_RELAXED); \
		else                                                                   \
			d_st_->hdr->f += (n);                                          \
	} while (0)

/* A worker's active sockets per level: written by the worker, read by the
 * others' d_defer (relaxed: a stale count costs one deferral too many or too
 * few for one pass; the deferral still ends when the other's passes moves). */
static inline void d_act_lvl_add(struct d_wk *w, unsigned l, int32_t n)
{
	/* release: a drop to 0 after a socket's turn (d_serve_level holds the count
	 * over the turn) comes after its completions; d_defer loads with acquire */
	__atomic_store_n(&w->act_lvl[l], w->act_lvl[l] + (uint32_t)n, __ATOMIC_RELEASE);
}

/* A listener's backlog count and armed ACCEPT: written only by the listener's
 * worker (its queue is its own: an accept from another worker arrives as a
 * message, d_msg.c), read by any worker's SYN (ev_accept, ev_accepted,
 * d_loop_connect through d_port_listener). Relaxed atomics: a stale count
 * admits one connection past the backlog, or refuses one SYN too many, for one
 * read; the count itself stays exact (one writer). */
static inline void d_acc_n_set(struct d_sock *l, uint32_t n)
{
	__atomic_store_n(&l->acc_n, n, __ATOMIC_RELAXED);
}
static inline int d_acc_room(const struct d_sock *l)
{
	return __atomic_load_n(&l->acc_n, __ATOMIC_RELAXED) < l->backlog;
}
static inline void d_acc_armed_set(struct d_sock *l, int on)
{
	__atomic_store_n(&l->acc_armed, on, __ATOMIC_RELAXED);
}
static inline int d_acc_armed(const struct d_sock *l)
{
	return __atomic_load_n(&l->acc_armed, __ATOMIC_RELAXED);
}

/* ipkitd.c: the service pass and the sleep decision, shared with the workers */
void d_node_template(struct d_daemon *d, struct ipk_node_cfg *nc);
void d_ep_node(struct d_wk *w, int ep);
/* Add fd to epoll set ep, its events tagged with ev (svc/d_app.c). */
void d_ep_add_to(int ep, int fd, struct d_ev *ev, uint32_t events);
int d_serve(struct d_daemon *d, unsigned wk);
int d_may_sleep(struct d_daemon *d, unsigned wk, int *ovf);
int d_sleep_flags(struct d_daemon *d, unsigned wk);
void d_awake(struct d_daemon *d);
int d_timeout_ms(struct d_wk *w, int ovf);
int d_bell_ep(const struct d_daemon *d);

/* d_wk.c: --workers N */
void d_lock(struct d_daemon *d);
void d_unlock(struct d_daemon *d);
void d_wlock(struct d_wk *w);
void d_wunlock(struct d_wk *w);
void d_plock(struct d_daemon *d);
void d_punlock(struct d_daemon *d);
void d_alock(struct d_app *a);
void d_aunlock(struct d_app *a);
void d_world_stop(struct d_daemon *d, unsigned wk);
void d_world_start(struct d_daemon *d, unsigned wk);
void d_kick(struct d_wk *w);
void d_kick_all(struct d_daemon *d);
unsigned d_flow_worker(const struct d_daemon *d, uint32_t peer_be, uint16_t pport_be,
                       uint16_t lport_be);
unsigned d_flow_worker6(const struct d_daemon *d, const uint8_t peer[16], uint16_t pport_be,
                        const uint8_t src[16], uint16_t lport_be);
int d_start_workers(struct d_daemon *d, char *err, size_t errlen);
int d_defer(struct d_daemon *d, unsigned wk, unsigned lvl);
struct d_app *d_first(struct d_daemon *d, unsigned wk);
void d_wk_report(struct d_daemon *d);

/* d_app.c */
int d_listen(struct d_daemon *d);
void d_accept_apps(struct d_daemon *d);
void d_app_event(struct d_daemon *d, struct d_ev *ev, uint32_t events);
void d_reap(struct d_daemon *d);
void d_app_reclaim(struct d_daemon *d, struct d_app *a, const char *why);
void d_app_final(struct d_daemon *d, struct d_app *a);
void d_wake_apps(struct d_daemon *d, unsigned wk);
void d_wake_urgent(struct d_sock *s);
void d_wake_one(struct d_sock *s);
/* d_evfd.c: the app's wake eventfd */
int d_evfd_make(struct d_app *a);
void d_evfd_wake(struct d_app *a, int loud);
/* A SEND's completion (successful): as d_op_done, but alone in a pass it does not
 * write the app's wake eventfd while the app says ev_lazy. */
void d_evfd_send_done(struct d_sock *s, uint64_t user_data, int32_t res);
extern __thread int d_ev_send; /* set while posting one */
void d_evfd_close(struct d_app *a);
int d_ring_get(struct d_app *a, uint64_t bytes, uint64_t *off, unsigned *cls);
void d_ring_put(struct d_app *a, uint64_t off, unsigned cls);
uint64_t d_now(void);

/* d_sock.c */
int d_serve_level(struct d_daemon *d, struct d_app *a, unsigned wk, unsigned level,
                  uint32_t *budget);
void d_pass_begin(struct d_app *a, unsigned wk);
int d_ho_alloc(struct d_app *a);
int d_ho_pending(const struct d_appw *p);
void d_act_push(struct d_sock *s);
void d_act_remove(struct d_sock *s);
void d_post(struct d_sock *s, const struct ipk_svc_cqe *c);
void d_post_res(struct d_sock *s, uint64_t user_data, int32_t res);
int d_sock_rings(struct d_sock *s, uint32_t sq, uint32_t cq);
int d_sock_attach(struct d_sock *s);
struct d_sock *d_sock_alloc(struct d_app *a, int type);
struct d_sock *d_sock_find(struct d_app *a, uint32_t id);
struct d_sock *d_sock_find_wk(struct d_app *a, uint32_t id, unsigned wk, unsigned *owner);
/* The worker the owner table names for id (0xff: none, a free index; with one
 * worker 0). Reads no socket. */
unsigned d_sock_own(struct d_app *a, uint32_t id);
void d_sock_destroy(struct d_daemon *d, struct d_sock *s, int graceful);
void d_sock_level(struct d_sock *s, unsigned lvl);
void d_sock_unring(struct d_sock *s);
void d_sock_unqueue(struct d_daemon *d, struct d_sock *s);
void d_wake_forget(struct d_sock *s);
int d_opq_push(struct d_opq *q, const struct d_op *op);
struct d_op *d_opq_front(struct d_opq *q);
void d_opq_pop(struct d_opq *q);
int d_buf_ok(const struct d_app *a, const struct ipk_svc_sqe *e);

/* d_msg.c */
int d_msg_init(struct d_daemon *d);
void d_msg_fini(struct d_daemon *d);
int d_msg_send(struct d_daemon *d, unsigned from, const struct d_sock *s, uint32_t kind,
               void *p);
int d_msg_send_id(struct d_daemon *d, unsigned from, unsigned to, uint32_t app_id,
                  uint32_t sock_id, uint32_t kind, void *p);
int d_msg_post(struct d_daemon *d, unsigned from, unsigned to, uint32_t kind, uint32_t app_id,
               uint32_t sock_id, uint64_t arg, int32_t res, void *p);
int d_acc_cross(struct d_daemon *d, struct d_sock *l, struct d_sock *w);
int d_acc_cross_id(struct d_daemon *d, unsigned lwk, uint32_t app_id, uint32_t sock_id,
                   struct d_sock *w);
void d_acc_answer(struct d_daemon *d, unsigned from, struct d_sock *w, int32_t rc);
void d_xfer_reclaim(struct d_daemon *d, struct d_app *a);
void d_xfer_unlink(struct d_daemon *d, struct d_sock *w);
void d_msg_flush(struct d_daemon *d, unsigned wk);
int d_msg_pending(struct d_daemon *d, unsigned wk);
void d_msg_drain(struct d_daemon *d, unsigned wk);
unsigned d_msg_quiesce(struct d_daemon *d);
struct d_app *d_app_of(struct d_daemon *d, uint32_t id);

/* d_pinst.c: a port installed in / removed from every worker's context */
int d_pinst_init(struct d_daemon *d);
void d_pinst_fini(struct d_daemon *d);
int d_pinst_add(struct d_daemon *d, struct d_sock *s, uint16_t port_be, uint16_t bl, int wait);
int d_pinst_again(struct d_daemon *d, struct d_sock *s, uint16_t port_be, uint16_t bl);
void d_pinst_del(struct d_daemon *d, struct d_sock *s, uint16_t port_be);
void d_pinst_wait(struct d_daemon *d, struct d_sock *s, uint64_t ud);
int d_pinst_msg(struct d_daemon *d, unsigned wk, unsigned from, uint32_t kind, uint32_t app_id,
                uint32_t sock_id, uint64_t arg, int32_t type);
void d_pinst_tick(struct d_daemon *d, unsigned wk);
int d_pinst_answer(struct d_daemon *d, unsigned wk, uint32_t app_id, uint32_t sock_id,
                   uint64_t gen, int32_t res);

/* d_pcache.c: port lookups without the port lock while nothing changed */
void d_pcache_bump(struct d_daemon *d);
int d_udp_ref(struct d_daemon *d, unsigned wk, uint16_t port_be, uint32_t from_ip_be,
              uint16_t from_port_be, unsigned fam, struct d_pref *r);
int d_syn_ref(struct d_daemon *d, unsigned wk, uint16_t port_be, unsigned fam, int take,
              struct d_pref *r);
void d_syn_remember(struct d_daemon *d, unsigned wk, uint16_t port_be, unsigned fam);

/* d_port.c */
int d_port_claim(struct d_daemon *d, struct d_sock *s, uint16_t port_be, int wait);
int d_port_listened(const struct d_sock *s);
/* d_net.c: does s (listener, UDP socket) take this family (D_FAM4/6)? */
int d_fam_ok(const struct d_sock *s, unsigned fam);
/* d_local.c: a CONNECT's completion carries the local address (cqe.addr) */
void d_local_cqe(const struct d_sock *s, struct ipk_svc_cqe *c, uint64_t ud, uint16_t lport_be);
void d_local_post(struct d_sock *s, uint64_t ud, uint16_t lport_be);
uint16_t d_local_port(struct ipk_conn *c);
void d_connect_done(struct d_sock *s, uint16_t lport_be);
/* d_family.c: a forked child's share of an inherited listener */
int d_family_share_ok(const struct d_sock *head, const struct d_sock *s);
struct d_sock *d_family_waiting(struct d_daemon *d, uint16_t port_be, unsigned fam);
/* d_family.c: a connection shared across fork (ADOPT, CLAIM, GIVEBACK) */
void d_family_adopt(struct d_sock *ctl, const struct ipk_svc_sqe *e);
void d_family_op(struct d_daemon *d, struct d_sock *s, const struct ipk_svc_sqe *e);
void d_family_leave(struct d_daemon *d, struct d_sock *s);
void d_family_want(struct d_daemon *d, struct d_sock *s);
void d_family_tx_idle(struct d_daemon *d, struct d_sock *s);
uint32_t d_family_rx_copy(struct d_sock *s, const struct ipk_svc_sqe *e);
void d_port_release(struct d_daemon *d, struct d_sock *s);
struct d_sock *d_port_listener(struct d_daemon *d, uint16_t port_be, int take, unsigned fam);
int d_port_listening(struct d_daemon *d, uint16_t port_be, unsigned fam);
int d_port_members(struct d_daemon *d, int type, uint16_t port_be, unsigned fam,
                   struct d_sock **out, unsigned max);
unsigned d_port_udp_pick(uint32_t from_ip_be, uint16_t from_port_be, unsigned n);
uint32_t d_port_turn(struct d_daemon *d, uint16_t port_be, int take);
struct d_sock *d_port_udp(struct d_daemon *d, uint16_t port_be, uint32_t from_ip_be,
                          uint16_t from_port_be, unsigned fam);

/* d_net.c: a link-local IPv6 address's scope_id as Linux reports it (our link's
 * index; 0 for every other address) */
void d_scope_fill(const struct d_daemon *d, struct ipk_svc_addr *a);

/* ipkitd.c: SIGUSR1's request count, and one worker's stack counters on stderr
 * (by the thread that owns its context, or after the workers stopped) */
unsigned d_dump_gen(void);
void d_stack_report(struct d_daemon *d, unsigned i);

/* d_sock.c: whether a CLOSE with flags `how` (IPK_SVC_SQE_F_ABORT,
 * IPK_SVC_SQE_F_RST_UNREAD) ends s's connection with a FIN (1) or a reset (0);
 * by s's owner, which holds its received bytes */
int d_close_graceful(const struct d_sock *s, int how);

/* d_loop.c */
int d_loop_addr(const struct d_daemon *d, uint32_t ip4_be);
/* addr6: the IPv6 address the CONNECT named, or NULL and ip4_be the IPv4 one */
void d_loop_connect(struct d_daemon *d, struct d_sock *s, const struct d_op *op,
                    const uint8_t *addr6, uint32_t ip4_be);
void d_loop_tx(struct d_daemon *d, struct d_sock *s);
uint32_t d_loop_rx_copy(struct d_sock *s, const struct ipk_svc_sqe *e);
void d_loop_unpair(struct d_daemon *d, struct d_sock *s, int graceful);
void d_loop_sendto(struct d_daemon *d, struct d_sock *s, const struct ipk_svc_sqe *e,
                   const uint8_t *addr6);
int d_loop6_addr(const struct d_sock *s, const uint8_t a[16]);
struct d_dgram *d_dgram_new(struct d_sock *s, uint32_t len);
struct d_dgram *d_dgram_alloc(uint32_t len);
int d_dgram_room(struct d_sock *s, uint32_t len);
void d_dgram_push(struct d_daemon *d, struct d_sock *s, struct d_dgram *g);

/* d_net.c */
void d_acc_push(struct d_sock *l, struct d_sock *w);
extern const struct ipk_ops d_events;
void d_tx_pump(struct d_daemon *d, struct d_sock *s);
void d_rx_deliver(struct d_daemon *d, struct d_sock *s);
void d_accept_deliver(struct d_daemon *d, struct d_sock *l);
void d_op_start(struct d_daemon *d, struct d_sock *s, const struct d_op *op);
void d_op_done(struct d_sock *s, uint64_t user_data, int32_t res);
void d_connect_start(struct d_daemon *d, struct d_sock *s, const struct d_op *op);

/* d_zc.c */
int d_zc_write(struct d_daemon *d, struct d_sock *s, struct d_op *op, uint32_t n, uint64_t now);
void d_zc_close(struct d_op *op, int failed);
void d_zc_complete(struct d_sock *s);
void d_zc_orphan(struct d_sock *s);
void d_zc_drop_all(struct d_app *a);

#endif
