/*
 * ipkitd shared-memory protocol: the region and ring headers and the control-socket
 * messages, used by both the daemon (svc/ipkitd.c) and libipkit-client (svc/client.c).
 * See svc/README.md for the design; include/ipkit/svc.h for the entries.
 *
 * Trust: the daemon trusts nothing the application can write. Every field below
 * marked (app) is read once into daemon-private memory and checked before use; the
 * daemon keeps its own copies of everything it wrote (sizes, offsets, its own
 * indices) and never reads them back from the region.
 */
#ifndef IPKIT_SVC_PROTO_H
#define IPKIT_SVC_PROTO_H

#include <ipkit/svc.h>
#include <stdint.h>

#define IPK_SVC_MAGIC 0x31434b5653504b49ull  /* "IPKSVCK1" little-endian */
#define IPK_SVC_VERSION 3u /* 2: the ready bitmap, sock_visits; 3: per-socket wake-ups
                            * (cq_head.waiting, futex on cq_tail) */
#define IPK_SVC_CL 64u /* cache line: every index sits alone in one */

/* A u32 alone on a cache line (no false sharing between producer and consumer). */
struct ipk_svc_line {
	uint32_t v;
	uint8_t pad[IPK_SVC_CL - 4];
};

/* Start of the region. Line 0 is written by the daemon before the fd is passed and
 * never changes; the app reads it to find everything else. */
struct ipk_svc_region {
	/* line 0 (daemon, constant) */
	uint64_t magic;
	uint32_t version;
	uint32_t hdr_size;         /* sizeof(struct ipk_svc_region) */
	uint64_t region_size;
	uint64_t ring_area_off, ring_area_size;
	uint64_t buf_area_off, buf_area_size;
	uint32_t ctl_ring_off;     /* control rings (socket 0), inside the ring area */
	uint32_t app_id;
	/* line 1 (daemon): bumped after every service pass that posted completions
	 * (FUTEX_WAKE only while app_waiting is set). The app's futex word: one per
	 * application. */
	struct ipk_svc_line app_futex;
	/* line 2 (app): v, the number of app threads about to sleep on app_futex;
	 * ev, the number about to sleep in the kernel on the app's wake eventfd (the
	 * welcome's third descriptor): after a pass that posted, the daemon writes
	 * that eventfd while ev is non-zero (Dekker, as for v); ev_lazy non-zero:
	 * not after a pass whose only completions were successful SENDs' (the app
	 * says none of its threads waits for those: no socket's send queue is full) */
	struct ipk_svc_appw {
		uint32_t v, ev, ev_lazy;
		uint8_t pad[IPK_SVC_CL - 12];
	} app_waiting;
	/* line 3 (daemon): 1 while the daemon may sleep: the app must ring the
	 * eventfd doorbell after publishing submissions */
	struct ipk_svc_line daemon_sleeping;
	/* line 4 (app): incremented after every publish; the daemon scans an app's
	 * sockets only when it changed */
	struct ipk_svc_line submit_seq;
	/* line 5 (daemon): statistics */
	uint64_t tx_copied, rx_copied, bad_sqe, bad_index, sock_visits;
	uint64_t low_held_max; /* most bytes one socket below level 0 held in the
	                        * stack unacknowledged (was padding: versions agree) */
	uint64_t low_rwnd_max; /* the widest receive window one such socket had open
	                        * once past 2 x tcp_rcvbuf bytes (the same) */
	uint64_t futex_wakes;  /* FUTEX_WAKE calls the daemon made for this app */
	/* line 6 (daemon, constant): the ready bitmap (app writes, daemon takes), at
	 * ready_off: ready_sum_words summary words (bit w: bitmap word w may have
	 * bits), then ready_words bitmap words (bit i: socket index i submitted).
	 * The app sets the socket's bit, then the summary bit when the word was
	 * empty; the daemon exchanges a summary word with 0, then each word it names
	 * (both atomic), so a submission is always either in a word the daemon is
	 * about to take or announced by a summary bit. The daemon only ever looks at
	 * the sockets a bit names, and only at its own table's entries. */
	uint64_t ready_off;
	uint32_t ready_words, ready_sum_words;
	/* (daemon) statistics of zero-copy SEND, issue 17 (was padding: versions
	 * agree, an older daemon leaves zeros): bytes the stack sent from the region
	 * in place; SENDs completed that way (from the peer's acknowledgement) and
	 * SENDs completed by copying (tx_copied) */
	uint64_t tx_zc, sends_zc, sends_copied;
	/* (daemon, constant) IPK_SVC_FEAT_* (was padding: versions agree, an older
	 * daemon leaves zeros: none of them) */
	uint32_t features;
	/* (daemon) statistics: writes to the app's wake eventfd (was padding: an
	 * older daemon leaves zero) */
	uint32_t ev_wakes;
	/* (daemon) statistics: wake-ups made in the middle of a pass for a level-0
	 * socket's completion while a lower level had sockets open (was padding: an
	 * older daemon leaves zero) */
	uint32_t urgent_wakes;
	uint8_t pad6[IPK_SVC_CL - 52];
};

/* The app's CQ index and, in the same (app-written) line, how many of its threads
 * sleep on this socket alone: a FUTEX_WAIT on the ring's cq_tail word with the
 * tail they saw. The daemon, after a pass that posted to the socket, fences and
 * reads `waiting`; only when it is non-zero does it FUTEX_WAKE cq_tail. A thread
 * raises `waiting`, fences, re-checks the CQ, then waits (Dekker, as for the
 * app futex): a completion is either seen by the check or moves the word. One
 * socket's completions wake only the threads waiting on it (no herd of every
 * waiting thread of the application, protocol version 2's cost per socket). */
struct ipk_svc_cqh {
	uint32_t v;
	uint32_t waiting;
	uint8_t pad[IPK_SVC_CL - 8];
};

/* Per-socket ring pair, at ring_off in the region (placed by the daemon, inside the
 * ring area, aligned to 64). SQ entries follow the header, CQ entries follow them. */
struct ipk_svc_ring {
	/* line 0 (daemon, constant for the socket's life) */
	uint32_t sq_entries, cq_entries; /* powers of two */
	uint32_t sock;                   /* socket id */
	uint32_t sqes_off, cqes_off;     /* from the ring's start */
	uint32_t flags;                  /* IPK_SVC_RING_F_* (daemon) */
	/* an accepted socket's local address: where its peer connected to, as
	 * Linux's getsockname on an accepted socket answers (family 0 for any other
	 * socket, and from an older daemon: this was padding, versions agree) */
	struct ipk_svc_addr local;
	uint8_t pad0[IPK_SVC_CL - 48];
	struct ipk_svc_line sq_head; /* daemon: entries consumed */
	struct ipk_svc_line sq_tail; /* app: entries published */
	struct ipk_svc_cqh cq_head;  /* app: entries seen; threads asleep on cq_tail */
	struct ipk_svc_line cq_tail; /* daemon: entries posted */
};
#define IPK_SVC_RING_F_BROKEN 1u /* the daemon stopped reading this SQ (bad indices) */

/* Bytes a ring pair of these sizes takes (header + entries). */
static inline uint64_t ipk_svc_ring_bytes(uint32_t sq, uint32_t cq)
{
	return (uint64_t)sizeof(struct ipk_svc_ring) + (uint64_t)sq * sizeof(struct ipk_svc_sqe) +
	       (uint64_t)cq * sizeof(struct ipk_svc_cqe);
}

/* Control socket (SOCK_SEQPACKET): the app sends one hello; the daemon answers with
 * one welcome carrying, on success, three fds by SCM_RIGHTS: the region's memfd
 * (sealed: F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL), the daemon's doorbell eventfd and
 * the app's wake eventfd (line 2's ev; a client that has room for two only gets
 * the first two: the kernel drops the third, and ev stays 0).
 * Afterwards the socket carries nothing; its hang-up tells the daemon the app died. */
struct ipk_svc_hello {
	uint64_t magic;
	uint32_t version;
	uint32_t ctl_entries;
	uint64_t buf_bytes, ring_bytes;
	/* IPK_SVC_OPEN_* (ipkit/svc.h). A hello without these 8 bytes (a client
	 * older than them) is taken with flags 0. */
	uint32_t flags;
	uint32_t pad;
};
struct ipk_svc_welcome {
	uint64_t magic;
	uint32_t version;
	int32_t status;       /* 0 or -errno (-EACCES, -EPROTO, -ENOMEM) */
	uint64_t region_size;
	char msg[104];        /* one-line reason when status < 0 */
};

/* Memory order. Both sides run on the same machine; these are the C11/GCC atomics
 * the comments at each use refer to. */
#define IPK_SVC_LOAD_ACQ(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define IPK_SVC_LOAD_RLX(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define IPK_SVC_STORE_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define IPK_SVC_STORE_RLX(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define IPK_SVC_FENCE() __atomic_thread_fence(__ATOMIC_SEQ_CST)

#endif
