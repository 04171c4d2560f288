/*
 * libipkit-preload: internal interfaces shared by the shim's files
 * (svc/preload/README.md is the design).
 *
 *   preload.c  start-up switch, real symbols, descriptor table, completion pump, stats
 *   p_sock.c   socket calls (socket .. close, options, data)
 *   p_poll.c   poll, select, epoll
 */
#ifndef IPKIT_PRELOAD_H
#define IPKIT_PRELOAD_H

#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "ipkit/svc.h"

/* ------------------------------------------------------------ real symbols */
struct pl_real {
	int (*socket)(int, int, int);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*listen)(int, int);
	int (*accept)(int, struct sockaddr *, socklen_t *);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	int (*shutdown)(int, int);
	int (*close)(int);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*fcntl)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	int (*getsockname)(int, struct sockaddr *, socklen_t *);
	int (*getpeername)(int, struct sockaddr *, socklen_t *);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
	               const sigset_t *);
	int (*epoll_create)(int);
	int (*epoll_create1)(int);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	int (*epoll_wait)(int, struct epoll_event *, int, int);
	int (*epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
};
extern struct pl_real pl_r;
void pl_resolve(void);
/* ipkitd hung up: reset every socket, say so once on stderr (idempotent). */
void pl_daemon_gone(void);

/* ------------------------------------------------------------ addresses (p_addr.c) */
/* A socket address in the socket's own family: sockaddr_in for AF_INET sockets,
 * sockaddr_in6 for AF_INET6 ones (IPv4 peers as ::ffff:a.b.c.d, as Linux). The
 * port sits at the same offset in both: in.sin_port serves either. */
union pl_sa {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
};
socklen_t pl_sa_len(const union pl_sa *a);
void pl_sa_any(union pl_sa *a, int domain);
void pl_sa_from_svc(union pl_sa *a, int domain, const struct ipk_svc_addr *x);
void pl_sa_to_svc(struct ipk_svc_addr *x, const union pl_sa *a);
int pl_sa_mapped(const union pl_sa *a);
int pl_sa_loopback(const union pl_sa *a); /* 127.0.0.0/8, ::1, ::ffff:127.x */
int pl_sa_in(const struct sockaddr *a, socklen_t len, int domain, union pl_sa *out);
void pl_sa_out(struct sockaddr *to, socklen_t *len, const union pl_sa *a);

/* ------------------------------------------------------------ sockets */
enum pl_state { PL_NEW, PL_BOUND, PL_LISTEN, PL_CONNECTING, PL_CONNECTED, PL_FAILED };

/* An accepted connection waiting for accept(): the daemon's socket and its peer. */
struct pl_acc {
	struct pl_acc *next;
	struct ipk_svc_sock *so;
	union pl_sa peer;
};

#define PL_RXBUF (64u << 10)  /* each of a TCP socket's two receive buffers */
#define PL_TXMAX (256u << 10) /* bytes of SENDs in flight before "not writable" */
#define PL_TXOPS 64u          /* SENDs in flight at most (the SQ holds 128) */

/* One ipkit socket. Its descriptor number is an eventfd (`fd`) whose counter is
 * non-zero while the socket is readable (or failed); a hidden second eventfd
 * (`ofd`) is non-zero while it is writable. The kernel sleeps on them in
 * poll/select/epoll; the shim computes the true state under `mu`. Memory is never
 * returned to malloc (the table's lock-free lookups may touch a socket being
 * closed: `refs` 0 means free). */
struct pl_sock {
	int refs;          /* atomic: table entries + calls in progress + pump list */
	int nfds;          /* descriptor numbers naming it (dup) */
	uint64_t serial;   /* which socket this memory is now (it is reused) */
	int fd;  /* the number it was created under (the user's; may be closed) */
	int lfd; /* the shim's own hidden dup of that eventfd: levels are written and
	          * waited on here, never on a number the program may close and reuse */
	int ofd;
	int type;          /* SOCK_STREAM, SOCK_DGRAM */
	int domain;        /* AF_INET, AF_INET6 */
	int v6only;        /* IPV6_V6ONLY (AF_INET6; Linux's default 0) */
	pthread_mutex_t mu;
	struct ipk_svc_sock *so;
	enum pl_state state;
	int nonblock, so_error, rd_shut, wr_shut, eof, closing;
	int abort;           /* closing with SO_LINGER {1, 0}: ipkitd resets */
	int in_lvl, out_lvl; /* the eventfds' counters are set */
	int in_true;         /* readable when the level was last computed (in_lvl
	                      * without it: a stale level, cleared lazily) */
	int ep_lt;           /* ever in a level-triggered epoll set: clear at once */
	union pl_sa local, peer;
	/* two receive buffers in the region, read in turn from rx_head: one RECV may
	 * fill the second while the application reads the first */
	struct pl_rx {
		uint8_t *b;
		uint32_t pos, len;
		int posted;
		int full;                /* UDP: a datagram waits here */
		union pl_sa from;        /* UDP: its sender */
	} rx[2];
	int rx_head;
	int conn_unseen; /* a non-blocking connect completed that no connect() reported */
	int conn_noroom; /* its refusal: ipkit listeners there, none with room */
	uint32_t tx_bytes, tx_ops;
	/* the SENDs in flight, oldest first (they complete in order): the buffers are
	 * found here, never from what the daemon writes back */
	struct pl_txq { uint8_t *b; uint32_t len; } txq[PL_TXOPS];
	uint32_t txq_head;
	struct pl_acc *acc_h, *acc_t;
	int acc_n, acc_armed;
	int backlog; /* listen()'s, for a forked child's own listener */
	int inherit; /* fork child: a listener re-created on first use (p_fork.c) */
	/* a connection shared across fork (p_fork.c, svc/d_family.c) */
	int fam;           /* other processes may hold it: close hands it over */
	int away;          /* another process has its data: CLAIM before use */
	int fresh;         /* adopted, never claimed: waiting on it claims too */
	int adopt;         /* fork child: ADOPT fam_id at the atfork handler */
	uint32_t fam_id;   /* the parent's ipkitd socket id */
	int gb_ops;        /* GIVEBACKs in flight (close waits for them) */
	/* options (get/setsockopt) */
	int reuseaddr, reuseport, keepalive, nodelay, rcvbuf, sndbuf;
	int kidle, kintvl, kcnt;
	struct linger linger;
	struct timeval rcvtimeo, sndtimeo;
	pthread_cond_t cv; /* synchronous operations (bind, listen): the pump signals */
	int sync_done, sync_res, sync_busy;
	int pending;       /* its readable level's write is deferred (w_pend list) */
	int txfull;        /* counted in the shim's full send queues (pl_txfull) */
	int nsets;         /* atomic: epoll sets it was added to (not less than) */
	int direct_epfd;   /* atomic: the one epoll set that alone sees its arrivals
	                    * (edge or shim-kept level, not ONESHOT, EPOLLIN), or -1 */
	struct pl_sock *pnext;         /* the deferred list */
	struct pl_sock *lnext, *lprev; /* the pump's list */
	struct pl_sock *fnext;         /* free list */
	struct pl_sock *dnext;         /* a pump round's finished sockets */
	/* a listener's kernel sockets on loopback (p_mirror.c): 127.0.0.1, ::1 */
	int kfd[2];
	int kpend;                     /* atomic: one of them has a connection */
	int mlisted;                   /* on the watcher's list (its mutex) */
	struct pl_sock *mnext;
};

/* Lookup of a descriptor: the socket with a reference taken, or NULL for a kernel
 * descriptor (lock-free). Release with pl_put. */
struct pl_sock *pl_get(int fd);
void pl_put(struct pl_sock *s);
int pl_is_ipk(int fd);
/* The lowest descriptor number >= from that names an ipkit socket, or -1. */
int pl_tbl_next(int from);
/* The first of the hidden numbers (pl_hide_fd). */
long pl_hide_min(void);
/* Table edits (under the table lock): name `s` by fd (a reference), drop a name. */
void pl_tbl_set(int fd, struct pl_sock *s);
struct pl_sock *pl_tbl_take(int fd, int *last);

/* The daemon connection, opened at the first AF_INET socket (NULL: pass through). */
struct ipk_svc *pl_svc(void);
/* Whether a socket of this port goes to ipkit (the IPKIT_PRELOAD switch). */
int pl_route_all(void);
int pl_route_port(unsigned port);
int pl_route_addr(const struct sockaddr *a); /* its address is listed (addrs:) */
/* IPKIT_PRELOAD_LOOPBACK: kernel (default: loopback connects no ipkit application
 * takes go to the kernel, listeners answer the kernel's loopback too) | ipkit
 * (loopback is ipkitd's alone). */
int pl_loop_kernel(void);

struct pl_sock *pl_sock_new(int type);
void pl_sock_link(struct pl_sock *s);
/* Release the daemon socket now if nothing is in flight, else when the pump sees
 * the last SEND complete (close must not drop queued data, Linux does not). */
void pl_sock_release(struct pl_sock *s);

/* Levels of the two eventfds from the state (under s->mu); `edge`: new data even
 * when already readable (epoll EPOLLET reports every arrival, as Linux). */
void pl_levels(struct pl_sock *s, int edge);
unsigned pl_revents(struct pl_sock *s); /* POLL* mask now (takes s->mu) */
/* Clear a stale readable level before sleeping on it (takes s->mu). */
void pl_unstale(struct pl_sock *s);
/* Deferred readable levels: while no thread of the program sleeps in the kernel
 * (epoll, poll, select, a blocking call), a new arrival's eventfd write waits on a
 * list; whoever is about to wait takes the list first (pl_wait_enter), reports what
 * it can itself (pl_pend_take) and writes the rest (pl_pend_flush), and says when
 * its wait is over (pl_wait_leave). A busy program so pays no write per arrival. */
struct pl_sock *pl_wait_enter(void);
/* As pl_wait_enter for an epoll wait on epfd: while it is the only waiter, once
 * one arrival for a socket it alone watches (pl_sock.direct_epfd) has been
 * written, later ones for such sockets are deferred too (it wakes anyway) and it
 * takes them after its wake-up (pl_pend_grab). */
struct pl_sock *pl_wait_enter_ep(int epfd);
struct pl_sock *pl_pend_grab(void);
/* Doorbells: a SEND or RECV submitted by a thread handling what a wait just
 * reported (pl_batch_set) is published without ringing ipkitd while the pump
 * sleeps short; the bell is rung once when a thread next waits (pl_wait_enter) or
 * when the pump next sleeps (at most PL_PUMP_SHORT_MS later), not per write. */
int pl_submit_data(struct ipk_svc_sock *so);
void pl_ring(void);
void pl_batch_set(int on);
void pl_wait_leave(void);
void pl_pend_take(struct pl_sock *s);  /* the caller reports it: no write; puts s */
void pl_pend_flush(struct pl_sock *s); /* its write now (if still readable); puts s */
void pl_wait_flush(void);              /* enter + flush every one (no leave) */
int pl_any_sock(void);                 /* the process ever had an ipkit socket */
/* Reaping in the waiting thread (preload.c, "reaping"): an epoll wait takes the
 * completions itself and sleeps with ipkitd's wake eventfd in its set, armed,
 * while the pump stays parked: one wake-up per arrival, not the pump's and then
 * the program's. pl_reap: handle what ipkitd posted since the last round (any
 * thread's), returns the wake count read before it. pl_reap_arm (under the
 * set's lock): the eventfd in the set (gen: the set's record of it, updated),
 * then armed; 1 armed and nothing posted since `v` (sleep), 0 not armed (no
 * eventfd: the pump wakes the sleep, as before), -1 not armed, something was
 * posted since `v` (do not sleep). pl_reap_disarm after an armed sleep. */
uint32_t pl_reap(void);
/* Under s->mu: the socket's send queue is full (1: before the SEND that fills it
 * is submitted) or not (0): while any is, ipkitd writes the wake eventfd for
 * SEND completions too (an armed sleeper may wait for EPOLLOUT); else not. */
void pl_txfull(struct pl_sock *s, int full);
int pl_reap_arm(int epfd, uint64_t *gen, uint64_t tag, uint32_t v);
void pl_reap_disarm(void);
/* Sleep until ofd (out) or fd (in) is signalled, or timeout_ms (-1: none). Returns 0,
 * -EAGAIN (timed out), -EINTR. */
int pl_wait(struct pl_sock *s, int out, int timeout_ms);
/* The hidden writable eventfd, made when first wanted (EPOLLOUT, POLLOUT, a
 * blocking send or connect): most sockets are never asked whether they are
 * writable, and each would cost four system calls more. Takes s->mu. Returns it,
 * or -1 (no descriptor left). */
int pl_ofd(struct pl_sock *s);
int pl_post_recv(struct pl_sock *s); /* under s->mu */
int pl_arm_accept(struct pl_sock *s); /* under s->mu */
void pl_on_cqe(struct pl_sock *s, const struct ipk_svc_cqe *c); /* pump, under s->mu */
uint32_t pl_rx_avail(const struct pl_sock *s); /* bytes received, not yet read */
/* A hidden descriptor (the writable level) moved high, out of the numbers the
 * application sees allocated (Linux gives the lowest free number): see
 * pl_hide_base. */
int pl_hide_fd(int fd);
/* A CLOEXEC duplicate of fd among the hidden numbers, in one call (-1: none). */
int pl_hide_dup(int fd);

/* user_data of the shim's operations: the kind in the top 4 bits (RECV: the
 * buffer's index in bit 0). Nothing else is taken from a completion but res, which
 * is checked against what was asked. */
enum { PL_OP_RECV = 1, PL_OP_SEND, PL_OP_ACCEPT, PL_OP_CONNECT, PL_OP_SHUT, PL_OP_BIND,
       PL_OP_GB };

/* Per-thread scratch buffers of n bytes (one slot, one size each), made on first
 * use and freed at the thread's exit; NULL (errno ENOMEM) when malloc fails. Not
 * static __thread arrays: a preloaded library's static TLS is carved from every
 * thread's stack, so 256 KiB of it made pthread_create fail with EINVAL for a
 * program's small-stack threads (node's). */
enum { PL_SCR_DGRAM, PL_SCR_SENDFILE, PL_SCR_SPLICE_IN, PL_SCR_SPLICE_OUT, PL_SCR__N };
void *pl_scratch(int slot, size_t n);
/* ------------------------------------------------------------ stats */
struct pl_stats {
	uint64_t sock_ipk, sock_kernel, sock_passthrough;
	uint64_t tx_ipk, rx_ipk;
	uint64_t accepts, connects, fallbacks;
	uint64_t bad_cqe; /* completions that did not fit what the shim asked: dropped */
	uint64_t tx_failed; /* bytes the program wrote that ipkitd refused or did not take,
	                     * by their SEND's completion (e.g. the peer reset the
	                     * connection first: lost as on Linux, but counted) */
	uint64_t rx_starved; /* sockets failed with ENOBUFS: no receive buffer left */
	uint64_t pump_cqes;  /* completions the pump thread handled */
	uint64_t reap_cqes;  /* completions a waiting thread handled itself (pl_reap) */
	uint64_t pump_wakes; /* the pump's sleeps ended by ipkitd's futex wake-up */
	uint64_t loop_kernel; /* loopback connects no ipkit application took: kernel */
};
extern struct pl_stats pl_st;
#define PL_COUNT(f, n) __atomic_add_fetch(&pl_st.f, (n), __ATOMIC_RELAXED)

/* One operation the pump completes and the caller waits for (bind, listen, UDP
 * sends); one at a time per socket. Returns its result. */
int pl_sync_op(struct pl_sock *s, struct ipk_svc_sqe *tmpl);
/* Around a wait for the pump's work: it is not parked meanwhile (preload.c). */
int pl_sync_wait_begin(void);      /* returns what pl_sync_wait_end takes */
void pl_sync_wait_end(int counted);

/* UDP (p_udp.c) */
void pl_udp_on_recv(struct pl_sock *s, const struct ipk_svc_cqe *c); /* under s->mu */
int pl_udp_post(struct pl_sock *s);                                  /* under s->mu */
ssize_t pl_udp_recv(struct pl_sock *s, void *buf, size_t len, int flags,
                    union pl_sa *from, int *trunc);
ssize_t pl_udp_send(struct pl_sock *s, const void *buf, size_t len,
                    const union pl_sa *to);
int pl_udp_connect(struct pl_sock *s, const struct sockaddr *a, socklen_t alen);
/* A loopback peer a kernel socket holds: s becomes a kernel socket under fd (1;
 * the caller makes the kernel call), else 0 (p_sock.c). */
int pl_udp_loop_kernel(struct pl_sock *s, int fd, const union pl_sa *to);

/* SA_RESTART (p_sig.c): clear before a sleep; after EINTR, whether to restart. */
void pl_sig_clear(void);
int pl_sig_restart(int has_timeout);

/* fork (p_fork.c): in the child's atfork handler, keep a listener for
 * re-creation (1) or forget the socket (0); the program waits for connections on
 * s: re-create an inherited listener, arm its ACCEPT (0 or -errno). */
int pl_fork_child_keep(struct pl_sock *s);
int pl_listen_want(struct pl_sock *s);
void pl_fork_child_relisten(struct pl_sock *list);
/* connections across fork: the parent's pipe the child closes once it adopted
 * (prepare / parent handler); the program uses s: CLAIM it if away (0 or
 * -errno); MOVED completion (pump, under s->mu); a holder's close hands it over. */
void pl_fam_prepare(struct pl_sock *list);
void pl_fam_parent(void);
int pl_fam_claim(struct pl_sock *s);
void pl_fam_moved(struct pl_sock *s);
void pl_fam_gb_done(struct pl_sock *s, uint64_t user_data);
void pl_fam_release(struct pl_sock *s);
/* exec (p_exec.c): note a listener for the next image; the fork child's table;
 * the new image adopts what it inherited (constructor). */
void pl_exec_note(struct pl_sock *s);
void pl_exec_fork_child(struct pl_sock *list);
void pl_exec_adopt_all(void);
/* Before an exec (the exec calls, p_exec.c): connected sockets whose numbers
 * survive it go to a bridge application the new image adopts them from; 1 when
 * one was made (pl_exec_undo after a failed exec). */
int pl_exec_prepare(void);
void pl_exec_undo(int made);

/* The kernel's loopback to a listener (p_mirror.c): after listen (or its
 * re-creation after exec), kernel listening sockets on loopback; accept's
 * turn at them once ipkitd's queue is empty (a descriptor or -EAGAIN); the
 * listener is finished; a fork child's list rebuilt from its listeners. */
void pl_mirror_listen(struct pl_sock *s);
int pl_mirror_accept(struct pl_sock *s, struct sockaddr *addr, socklen_t *len, int flags);
void pl_mirror_drop(struct pl_sock *s);
void pl_mirror_fork_child(struct pl_sock *list);
/* epoll: s's number fd now names a kernel socket (p_sock.c, loopback): each set
 * that had s gets fd with the program's events and data; returns how many. */
int pl_ep_handover(const struct pl_sock *s, int fd);
/* epoll: forget the registrations of a closed epoll descriptor. */
void pl_ep_forget(int epfd);

#endif
