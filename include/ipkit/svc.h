/*
 * ipkit svc: libipkit-client, the application side of ipkitd.
 *
 * ipkitd owns a NIC and runs the stack; any number of processes use it through
 * shared-memory rings, in the style of liburing:
 *
 *   struct ipk_svc *svc = ipk_svc_open("/run/ipkitd.sock", NULL, &rc);
 *   struct ipk_svc_sock *so;
 *   ipk_svc_socket(svc, IPK_SVC_TCP, NULL, &so);          // its own SQ/CQ pair
 *   struct ipk_svc_sqe *sqe = ipk_svc_get_sqe(so);
 *   ipk_svc_prep_connect(sqe, &peer);  ipk_svc_sqe_set_data(sqe, 1);
 *   ipk_svc_submit(so);
 *   struct ipk_svc_cqe *cqe;
 *   ipk_svc_wait_cqe(so, &cqe, -1);   ... cqe->user_data == 1, cqe->res == 0 ...
 *   ipk_svc_cqe_seen(so, cqe);
 *
 * Model. One region per application (a sealed memfd the daemon creates and passes
 * over the control socket): a header, a ring area the daemon places rings in, and a
 * buffer area the application allocates from (ipk_svc_buf_alloc). Every socket has
 * its own submission ring (SQ, the application produces) and completion ring (CQ, the
 * daemon produces), sized at creation. Data buffers must lie in the buffer area:
 * sends and receives name them by offset, never by pointer.
 *
 * Errors: ipkit's one convention (core.h): 0 or a count on success, a negative errno
 * value on failure; completions carry the same in cqe->res.
 *
 * Buffers: a buffer handed to a send, recv, sendto or recvfrom belongs to the daemon
 * from ipk_svc_submit until that operation's completion has been seen; do not
 * change (send) or read (recv) it meanwhile. Sends are copied into the stack's send
 * buffer before they complete (one copy, counted in the region's statistics), or,
 * where ipkitd sends zero-copy (tap/tun, ipkitd --tx-zc), transmitted from the
 * buffer itself and completed once the peer acknowledged every byte (counted in
 * tx_zc / sends_zc). Rewriting such a buffer before completion corrupts only this
 * socket's stream.
 *
 * Threads: a struct ipk_svc may be used from any thread: ipk_svc_socket,
 * ipk_svc_accepted, ipk_svc_close, ipk_svc_buf_alloc/free and ipk_svc_wait take an
 * internal lock. A socket has one submitting thread at a time (get_sqe .. submit)
 * and one completing thread at a time (peek/wait .. seen); they may be different
 * threads. To share one socket among several threads on the same side, hold
 * ipk_svc_sock_lock around the sequence (a mutex in the handle; the library never
 * takes it itself).
 */
#ifndef IPKIT_SVC_H
#define IPKIT_SVC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ the ABI
 * Shared with the daemon: fixed-size, explicitly padded, versioned by
 * IPK_SVC_VERSION (svc/proto.h holds the region and ring headers). */

/* Address of either family: family, port and 16 address bytes (IPv4 in the first
 * four, IPv6 all sixteen, network order). IPv6 needs ipkitd --ip6 (else
 * -EAFNOSUPPORT); an IPv4-mapped IPv6 address (::ffff:a.b.c.d) is taken as the
 * IPv4 address it carries, as a Linux dual-stack socket does. */
#define IPK_SVC_AF_INET 2
#define IPK_SVC_AF_INET6 10
struct ipk_svc_addr {
	uint16_t family;   /* IPK_SVC_AF_* */
	uint16_t port_be;
	/* The zone of a link-local IPv6 address (fe80::/10; RFC 4007 §6), as
	 * sin6_scope_id: ipkitd has one link, its index set by ipkitd
	 * --link-index (default: the kernel's index of the interface its io spec
	 * names, else 1). Given: 0 or that index is accepted (Linux wants the
	 * index for a link-local bind or connect; ipkitd has one link to mean),
	 * any other index is refused: BIND -ENODEV, CONNECT and SENDTO
	 * -ENETUNREACH (what Linux answers for an index no interface has).
	 * Ignored for every other address. Reported (ACCEPT's peer, RECVFROM's
	 * sender, CONNECT's local address): that index for a link-local address,
	 * 0 for any other, as Linux reports sin6_scope_id. */
	uint32_t scope_id;
	uint8_t addr[16];
};

enum ipk_svc_op {
	IPK_SVC_OP_NOP = 0,      /* completes with 0 */
	IPK_SVC_OP_SOCKET,       /* control ring only: res = socket id */
	IPK_SVC_OP_CLOSE,        /* control ring only: arg = socket id */
	IPK_SVC_OP_BIND,         /* addr (port; address 0 or ours) */
	IPK_SVC_OP_LISTEN,       /* arg = backlog */
	IPK_SVC_OP_ACCEPT,       /* multishot: one completion per connection, flag MORE */
	IPK_SVC_OP_CONNECT,      /* addr */
	IPK_SVC_OP_SEND,         /* buf_off, len: res = len once all is in the stack
	                          * (zero-copy: once all is acknowledged) */
	IPK_SVC_OP_RECV,         /* buf_off, len: res = bytes (0 = end of stream) */
	IPK_SVC_OP_SHUTDOWN,     /* FIN after every earlier send */
	IPK_SVC_OP_SENDTO,       /* UDP: buf_off, len, addr */
	IPK_SVC_OP_RECVFROM,     /* UDP: buf_off, len; cqe->addr = sender */
	IPK_SVC_OP_ADOPT,        /* control ring only: a forked child's socket on the
	                          * connection its parent's socket arg holds (len, arg2:
	                          * ring sizes; buf_off: 0, or the id of the application
	                          * holding it, the parent's or one of this process's
	                          * own; res, sock, ring_off as SOCKET; svc/d_family.c) */
	IPK_SVC_OP_CLAIM,        /* TCP: this process takes the connection's received
	                          * data from the family member that had it, whose
	                          * RECVs complete with -EXDEV (-EAGAIN: its SENDs are
	                          * still in flight, ask again) */
	IPK_SVC_OP_GIVEBACK,     /* TCP: buf_off, len: bytes received and not read, put
	                          * back in front of the connection's stream */
	IPK_SVC_OP__COUNT
};

#define IPK_SVC_TCP 1
#define IPK_SVC_UDP 2

/* Submission entry: 64 bytes. */
struct ipk_svc_sqe {
	uint8_t opcode;      /* enum ipk_svc_op */
	uint8_t flags;       /* IPK_SVC_SQE_F_* (0 for most operations) */
	uint16_t prio;       /* SOCKET: 0 = the application's default level, L >= 1 =
	                      * level L - 1 (level 0 is served first) */
	uint32_t arg;        /* op-specific (backlog, socket id, type) */
	uint64_t user_data;  /* returned in the completion */
	uint64_t buf_off;    /* buffer: offset from the region's start */
	uint32_t len;        /* buffer bytes */
	uint32_t arg2;       /* op-specific (ring sizes) */
	struct ipk_svc_addr addr;
	uint8_t pad[8];
};

/* BIND: share the port with other sockets that ask the same (svc/README.md, "Port
 * sharing"; ipk_svc_prep_bind_reuse). */
#define IPK_SVC_SQE_F_REUSEPORT 1u
/* BIND: a forked child's socket joining the listener it inherited (the port's
 * group holds a listener of its parent process, same uid; svc/d_family.c) */
#define IPK_SVC_SQE_F_INHERIT 2u
/* BIND of an AF_INET6 address ::: IPv6 only (Linux's IPV6_V6ONLY 1). Without it an
 * AF_INET6 socket bound to :: serves both families (its IPv4 peers are reported
 * as AF_INET addresses; the shim maps them to ::ffff:a.b.c.d); one bound AF_INET
 * serves IPv4 only. */
#define IPK_SVC_SQE_F_V6ONLY 4u
/* CLOSE: an abortive close: a TCP connection is reset (RST) at once, data not yet
 * acknowledged is dropped (Linux's close with SO_LINGER {1, 0}; ipk_svc_abort) */
#define IPK_SVC_SQE_F_ABORT 8u
/* CLOSE: reset a TCP connection (as IPK_SVC_SQE_F_ABORT) when ipkitd still holds
 * received bytes no RECV took, else end it with a FIN: Linux's close() with
 * unread data ("unread data was tossed"). An older ipkitd ignores it. */
#define IPK_SVC_SQE_F_RST_UNREAD 16u

#define IPK_SVC_CQE_F_MORE 1u    /* multishot: more completions follow for this sqe */
#define IPK_SVC_CQE_F_RINGERR 2u /* the daemon found this socket's ring indices bad */
#define IPK_SVC_CQE_F_MOVED 4u   /* user_data 0, res -EXDEV: another process's socket
                                  * took the connection (CLAIM); answer with a
                                  * GIVEBACK of what was received and not read,
                                  * even none (svc/d_family.c) */
/* CONNECT, res -ECONNREFUSED, between two applications of ipkitd: the port has
 * listeners, none with room now (their backlogs full, or a fork family none of
 * whose processes waits in ACCEPT yet). Without it: nobody listens there. */
#define IPK_SVC_CQE_F_NOROOM 8u

/* Completion entry: 64 bytes. */
struct ipk_svc_cqe {
	uint64_t user_data;
	int32_t res;         /* result or -errno */
	uint32_t flags;      /* IPK_SVC_CQE_F_* */
	uint32_t sock;       /* ACCEPT, SOCKET: the new socket's id */
	uint32_t seq;        /* the application's completions posted before this one
	                      * (wraps): orders completions across its sockets */
	uint64_t ring_off;   /* ACCEPT, SOCKET: the new socket's rings in the region */
	struct ipk_svc_addr addr; /* RECVFROM: sender; ACCEPT: peer; CONNECT (success):
	                           * the socket's local address (older ipkitd: zero) */
	uint32_t pass;       /* ipkitd's service pass that posted it (wraps): orders
	                      * completions in time across sockets and applications */
	uint8_t pad[4];
};

/* ------------------------------------------------------------ the library */

struct ipk_svc;
struct ipk_svc_sock;

struct ipk_svc_opts {
	uint64_t buf_bytes;   /* buffer area, default 16 MiB (the daemon caps it) */
	uint64_t ring_bytes;  /* ring area, default 4 MiB (the daemon caps it) */
	uint32_t ctl_entries; /* control ring entries, default 64 */
	uint32_t flags;       /* IPK_SVC_OPEN_*, default 0 */
};
/* When this application dies (its control socket hangs up without a CLOSE of its
 * sockets: _exit, a signal, exec), ipkitd ends its TCP connections as Linux ends
 * a process's sockets then: a FIN after the data already in the stack, or a
 * reset where received bytes were never taken by a RECV. Without it they are
 * reset (ipkitd --graceful-close: a FIN for every application). */
#define IPK_SVC_OPEN_EXIT_FIN 1u
/* Fill *o with the defaults above; NULL: nothing. */
void ipk_svc_opts_default(struct ipk_svc_opts *o);

/* Connect to the daemon listening at `path` (NULL: $IPKITD_SOCKET, else
 * /run/ipkitd.sock), receive and map the region. Returns the handle, or NULL with
 * *err (may be NULL) set: -ENOENT / -ECONNREFUSED (no daemon), -EACCES (the
 * daemon's allow-list refused us), -EPROTO (a daemon of another version, or a
 * malformed answer), -ENOMEM, or another -errno of socket/connect/mmap. */
struct ipk_svc *ipk_svc_open(const char *path, const struct ipk_svc_opts *o, int *err);
/* Hang up: the daemon resets every socket of this application and frees its ports.
 * Every socket handle is freed with it. NULL: nothing. */
void ipk_svc_close_all(struct ipk_svc *svc);

/* Create a socket (IPK_SVC_TCP or IPK_SVC_UDP) with an SQ of sq_entries and a CQ of
 * cq_entries (powers of two; 0 = 64 and 128; the daemon caps them). Synchronous:
 * waits for the daemon's answer on the control ring. On success *out is the handle
 * (freed by ipk_svc_close) and 0 is returned; else -EINVAL (bad type or sizes),
 * -ENOMEM (no ring room in the region or the daemon's socket limit), -EPIPE (the
 * daemon is gone). Thread-safe. */
int ipk_svc_socket(struct ipk_svc *svc, int type, uint32_t sq_entries, uint32_t cq_entries,
                   struct ipk_svc_sock **out);
/* ipk_svc_socket_prio: as ipk_svc_socket at priority `level` (0 is served first;
 * ipkitd --prio-levels, default 3). Every lower level keeps a guaranteed share of
 * each service pass (--prio-share), so none starves. Returns also -EPERM: a level
 * above what ipkitd allows this application (--prio-uid), -EINVAL: no such level.
 * Sockets accepted from a listener inherit its level. */
int ipk_svc_socket_prio(struct ipk_svc *svc, int type, uint32_t sq_entries,
                        uint32_t cq_entries, unsigned level, struct ipk_svc_sock **out);
/* Handle for a socket an ACCEPT completion announced (cqe->sock, cqe->ring_off).
 * Returns 0 and *out, -EINVAL (not an accept completion with a socket) or -EPROTO
 * (the rings it names are outside the ring area). Thread-safe. */
int ipk_svc_accepted(struct ipk_svc *svc, const struct ipk_svc_cqe *cqe,
                     struct ipk_svc_sock **out);
/* A forked child's own socket on the TCP connection its parent's socket
 * `parent_id` holds (ipk_svc_sock_id in the parent): the connection stays open
 * until every process's socket on it is closed. The new socket starts away: send
 * IPK_SVC_OP_CLAIM before data (svc/d_family.c has the rules). Returns 0 and *out,
 * -EBADF (not the parent's connected socket, or not the same uid), -ENOMEM.
 * Thread-safe. */
int ipk_svc_adopt(struct ipk_svc *svc, uint32_t parent_id, uint32_t sq_entries,
                  uint32_t cq_entries, struct ipk_svc_sock **out);
/* ipk_svc_adopt, naming the application that holds socket sock_id: app_id
 * (ipk_svc_app_id there; 0: the parent process's, as ipk_svc_adopt). That
 * application must have the same uid and belong to the caller's parent process
 * or to the caller's own process: a connection kept across exec goes from the
 * old image's application to another one of the same process (a "bridge" whose
 * control socket survives exec, ipk_svc_keep_on_exec) and from there to the new
 * image's (svc/preload/README.md, "exec"). Returns as ipk_svc_adopt (-EBADF also
 * when no such application holds it). An ipkitd older than this call ignores
 * app_id and looks in the parent process's applications. Thread-safe. */
int ipk_svc_adopt_from(struct ipk_svc *svc, uint32_t app_id, uint32_t sock_id,
                       uint32_t sq_entries, uint32_t cq_entries, struct ipk_svc_sock **out);
/* This application's id at ipkitd (its logs name it; ipk_svc_adopt_from takes
 * it); 0 for NULL. */
uint32_t ipk_svc_app_id(const struct ipk_svc *svc);
/* Let the control socket survive exec (clears its FD_CLOEXEC): ipkitd keeps the
 * application, its sockets and their connections until the new image closes
 * the returned descriptor number (or the process ends). The region and every
 * other descriptor still go at exec; only ADOPT from another application of the
 * process (ipk_svc_adopt_from) can use the sockets afterwards. Returns the
 * number, or -errno (-EINVAL for NULL). */
int ipk_svc_keep_on_exec(struct ipk_svc *svc);
/* Close the socket: a TCP connection gets FIN after the data already in the stack
 * (sends not yet completed are dropped), a listener or UDP port is freed. Operations
 * still in flight get no completion; their buffers are the application's again when
 * this returns. The handle is freed. Synchronous, thread-safe; returns 0 or -EPIPE
 * (daemon gone; the handle is freed anyway). */
int ipk_svc_close(struct ipk_svc_sock *so);
/* ipk_svc_close, but a TCP connection is reset (RST) instead of ended with a FIN,
 * and data not yet acknowledged is dropped: Linux's close() with SO_LINGER {1, 0}.
 * Other sockets close as with ipk_svc_close. Returns as ipk_svc_close (an ipkitd
 * older than this call ignores the flag and sends a FIN). */
int ipk_svc_abort(struct ipk_svc_sock *so);
/* ipk_svc_close with CLOSE flags: 0, IPK_SVC_SQE_F_ABORT, IPK_SVC_SQE_F_RST_UNREAD
 * (any other bit: -EINVAL, the socket left open). Returns as ipk_svc_close. */
int ipk_svc_close_flags(struct ipk_svc_sock *so, unsigned flags);
/* Close by id (ipk_svc_sock_id) without the handle, e.g. from a thread that does
 * not own it; the handle, if any, must then only be freed with ipk_svc_close (which
 * gets -EBADF). Returns 0, -EBADF (no such socket of this application: another
 * application's ids, stale generations and unknown numbers alike), -EPIPE. */
int ipk_svc_close_id(struct ipk_svc *svc, uint32_t id);
/* The daemon's id of the socket (for logs), 0 for NULL. */
uint32_t ipk_svc_sock_id(const struct ipk_svc_sock *so);
/* An accepted socket's own address: the address and port its peer connected to
 * (a listener bound to 0.0.0.0 or :: accepts on a definite one, which Linux's
 * getsockname reports). Returns 0 and *out, -EINVAL (NULL argument) or -ENODATA
 * (not an accepted socket: a connected one has it in its CONNECT completion, a
 * bound one is where it was bound; or an ipkitd older than this call). Thread-safe. */
int ipk_svc_sock_local(const struct ipk_svc_sock *so, struct ipk_svc_addr *out);

/* Buffers in the region. O(1): power-of-two size classes from 64 bytes up, each
 * with its own free list. Returns a pointer into the buffer area, or NULL when the
 * area is exhausted or len is 0. ipk_svc_buf_free takes a pointer from
 * ipk_svc_buf_alloc and the same len (it names the class; a pointer outside the
 * area is ignored). Blocks of 4 KiB and more are 4 KiB-aligned. Thread-safe. */
void *ipk_svc_buf_alloc(struct ipk_svc *svc, uint32_t len);
void ipk_svc_buf_free(struct ipk_svc *svc, void *buf, uint32_t len);

/* Next free submission entry of the socket, zeroed, or NULL when its SQ is full
 * (submit, then reap completions). Valid until ipk_svc_submit. */
struct ipk_svc_sqe *ipk_svc_get_sqe(struct ipk_svc_sock *so);
/* Preparation: each ipk_svc_prep_* fills the entry for one operation (user_data
 * stays 0 until ipk_svc_sqe_set_data); none can fail here: the daemon checks and
 * answers in the completion. A buffer outside the region is sent as an offset the
 * daemon refuses (-EFAULT in the completion).
 * ipk_svc_prep_nop: completes with 0 (round-trip measurements, wake-up tests). */
void ipk_svc_prep_nop(struct ipk_svc_sqe *sqe);
/* ipk_svc_prep_bind: claim local port (address 0 or the daemon's). res: 0,
 * -EADDRINUSE (another socket holds it), -EACCES (below 1024 without permission),
 * -EADDRNOTAVAIL (not our address), -EINVAL (bound already, port 0). */
void ipk_svc_prep_bind(struct ipk_svc_sqe *sqe, const struct ipk_svc_addr *local);
/* ipk_svc_prep_bind_reuse: bind, sharing the port (SO_REUSEPORT-like): it succeeds
 * on a held port when every socket there asked the same and belongs to an
 * application of the same uid (else -EADDRINUSE). A TCP port's connections go to
 * its listening sockets in turn (round robin, skipping one whose backlog is full);
 * a UDP port's datagrams go to one socket per sender (a hash of the sender's
 * address and port), so one sender's datagrams stay in order. A socket leaving
 * resets the connections waiting in its own backlog only. */
void ipk_svc_prep_bind_reuse(struct ipk_svc_sqe *sqe, const struct ipk_svc_addr *local);
/* ipk_svc_prep_listen: TCP, after bind; backlog 0 = 128 (capped at 4096) bounds the
 * connections waiting for an accept. res: 0, -EINVAL (not a bound TCP socket). */
void ipk_svc_prep_listen(struct ipk_svc_sqe *sqe, uint32_t backlog);
/* ipk_svc_prep_accept: multishot accept: every connection completes with res 0,
 * cqe->sock, ring_off, the peer in cqe->addr and IPK_SVC_CQE_F_MORE; the new sockets
 * get sq_entries / cq_entries (0: defaults); take their handle with
 * ipk_svc_accepted. A completion without MORE ends it (res < 0: why; -EBUSY: one is
 * armed already). */
void ipk_svc_prep_accept(struct ipk_svc_sqe *sqe, uint32_t sq_entries, uint32_t cq_entries);
/* ipk_svc_prep_connect: TCP active open. res: 0 when established, -ECONNREFUSED,
 * -ETIMEDOUT, -EHOSTUNREACH, -EAFNOSUPPORT (IPv6 without ipkitd --ip6, or a family
 * the socket's bind excludes), -ENETUNREACH (IPv6 to ipkitd's own address), -EINVAL. */
void ipk_svc_prep_connect(struct ipk_svc_sqe *sqe, const struct ipk_svc_addr *peer);
/* ipk_svc_prep_send: TCP, len bytes at buf (in the region, see "Buffers"). res: len
 * once every byte is in the stack's send buffer (zero-copy: once the peer
 * acknowledged every byte); -EPIPE / -ECONNRESET when the
 * connection ended first, -ENOTCONN before connect completed. Sends complete in
 * order. */
void ipk_svc_prep_send(struct ipk_svc_sock *so, struct ipk_svc_sqe *sqe, const void *buf,
                       uint32_t len);
/* ipk_svc_prep_recv: TCP, up to len bytes into buf. res: bytes (> 0), 0 at the end
 * of the stream, or the -errno the connection ended with. Receives complete in
 * submission order; the window reopens as they complete. */
void ipk_svc_prep_recv(struct ipk_svc_sock *so, struct ipk_svc_sqe *sqe, void *buf,
                       uint32_t len);
/* ipk_svc_prep_shutdown: FIN after every earlier send of this socket. res: 0. */
void ipk_svc_prep_shutdown(struct ipk_svc_sqe *sqe);
/* ipk_svc_prep_sendto: UDP datagram of len bytes at buf to `to` (the socket gets an
 * ephemeral port at its first send if it is not bound). res: bytes sent, or
 * -EHOSTUNREACH (ARP still resolving or no route), -EMSGSIZE, -ENOBUFS. */
void ipk_svc_prep_sendto(struct ipk_svc_sock *so, struct ipk_svc_sqe *sqe, const void *buf,
                         uint32_t len, const struct ipk_svc_addr *to);
/* ipk_svc_prep_recvfrom: UDP, the next datagram into buf (truncated to len); res:
 * bytes, cqe->addr: the sender. The daemon holds up to 256 datagrams per socket
 * while no recvfrom waits, then drops. */
void ipk_svc_prep_recvfrom(struct ipk_svc_sock *so, struct ipk_svc_sqe *sqe, void *buf,
                           uint32_t len);
/* ipk_svc_sqe_set_data: the tag the completion returns in cqe->user_data. */
static inline void ipk_svc_sqe_set_data(struct ipk_svc_sqe *sqe, uint64_t user_data)
{
	sqe->user_data = user_data;
}
/* Publish every entry taken since the last submit; rings the daemon's doorbell only
 * when it sleeps. Returns the number published, or -EPIPE when the daemon is gone. */
int ipk_svc_submit(struct ipk_svc_sock *so);
/* As ipk_svc_submit, but never writes the doorbell (no system call): a sleeping
 * ipkitd takes the entries at its next pass, whatever wakes it. Only for entries
 * nothing waits on while the socket has others pending: a RECV posted while
 * another RECV of the socket is still in flight (data arriving completes that
 * one, and that pass takes this one too). Returns the number published, or -EPIPE
 * when the daemon is gone, as ipk_svc_submit. */
int ipk_svc_submit_quiet(struct ipk_svc_sock *so);
/* Ring the daemon's doorbell now if it sleeps (a write(2) then, else no system
 * call): for entries published with ipk_svc_submit_quiet that something does wait
 * on, rung later in one go (libipkit-preload rings once before its program waits
 * instead of once per write). */
void ipk_svc_ring(struct ipk_svc *svc);

/* The oldest unseen completion of the socket: 0 and *cqe, or -EAGAIN when none.
 * The entry stays valid until ipk_svc_cqe_seen. */
int ipk_svc_peek_cqe(struct ipk_svc_sock *so, struct ipk_svc_cqe **cqe);
/* As peek, blocking up to timeout_ns (-1: no bound) on the application's futex:
 * 0 and *cqe, -ETIME on timeout, -EPIPE when the daemon is gone. */
int ipk_svc_wait_cqe(struct ipk_svc_sock *so, struct ipk_svc_cqe **cqe, int64_t timeout_ns);
/* Mark the entry from peek/wait consumed (its slot goes back to the daemon). */
void ipk_svc_cqe_seen(struct ipk_svc_sock *so, struct ipk_svc_cqe *cqe);
/* Whole-application waiting. ipkitd counts its service passes that posted
 * completions for this application (the futex word); ipk_svc_wake_count reads the
 * count (0 for NULL). ipk_svc_wait_from blocks until the count differs from
 * `seen` or timeout_ns passes (-1: no bound): read the count, scan your sockets,
 * and wait from the value read, so a completion posted during the scan is never
 * slept through. Returns 0 (look at your sockets), -ETIME, -EPIPE (daemon gone),
 * -EINVAL (NULL svc). */
uint32_t ipk_svc_wake_count(const struct ipk_svc *svc);
int ipk_svc_wait_from(struct ipk_svc *svc, uint32_t seen, int64_t timeout_ns);
/* ipk_svc_wait: ipk_svc_wait_from(svc, ipk_svc_wake_count(svc), timeout_ns): only
 * completions posted after the call wake it. Returns as ipk_svc_wait_from. */
int ipk_svc_wait(struct ipk_svc *svc, int64_t timeout_ns);

/* Callback mode: fn(so, cqe, arg) is called for every completion of every socket
 * of the application (sockets created later included; no limit on their number), in
 * each socket's order, by one library thread sleeping on the application's futex;
 * the entry is marked seen after fn returns (cqe is a copy). */
typedef void (*ipk_svc_cb)(struct ipk_svc_sock *so, const struct ipk_svc_cqe *cqe, void *arg);
/* ipk_svc_callback_start: start that thread. While it runs it is the completing
 * side of every socket: do not peek, wait or mark seen yourself (submitting is
 * fine, under the "Threads" rule). fn may submit and create sockets. Close sockets
 * only from inside fn (any but the one it is called for) or after
 * ipk_svc_callback_stop; fn must not call ipk_svc_callback_stop. Returns 0, -EBUSY
 * (running already), -EINVAL (NULL svc or fn), or -errno of pthread_create. */
int ipk_svc_callback_start(struct ipk_svc *svc, ipk_svc_cb fn, void *arg);
/* ipk_svc_callback_stop: ask the thread to stop and join it (it notices within
 * 100 ms); completions not yet delivered stay in the rings. Returns 0, or -EINVAL
 * (NULL svc, or not running). */
int ipk_svc_callback_stop(struct ipk_svc *svc);

/* ipk_svc_sock_lock / ipk_svc_sock_unlock: the handle's mutex, for sharing one socket side
 * between threads (see "Threads" above). */
void ipk_svc_sock_lock(struct ipk_svc_sock *so);
void ipk_svc_sock_unlock(struct ipk_svc_sock *so);

/* Helpers: an IPv4 address (network order) and port (host order). */
void ipk_svc_addr_ip4(struct ipk_svc_addr *a, uint32_t ip4_be, uint16_t port);
/* An IPv6 address (16 bytes, network order) and port (host order). */
void ipk_svc_addr_ip6(struct ipk_svc_addr *a, const uint8_t ip6[16], uint16_t port);

#define IPK_SVC_FEAT_IP6 1u /* IPv6 addresses (ipkitd --ip6) */
/* ipk_svc_features: what this ipkitd serves, IPK_SVC_FEAT_* bits (0 for NULL; an
 * older ipkitd: 0). Constant for the handle's life. */
uint32_t ipk_svc_features(const struct ipk_svc *svc);

/* ipk_svc_region / ipk_svc_sock_ring_off, for tools and tests (svc_tool's hostile
 * mode): the region's start and size, and a socket's ring offset in it (svc/proto.h describes both). The
 * daemon checks everything written there; a write here can only hurt the caller.
 * NULL / 0 for NULL handles. */
void *ipk_svc_region(const struct ipk_svc *svc, uint64_t *size);
uint64_t ipk_svc_sock_ring_off(const struct ipk_svc_sock *so);

/* Statistics the daemon keeps in the region (bytes copied each way; bad requests). */
struct ipk_svc_stats {
	uint64_t tx_copied, rx_copied;
	uint64_t bad_sqe, bad_index;
	uint64_t sock_visits; /* times the daemon looked at one of the app's sockets (not
	                       * the control ring): the work of its passes, which
	                       * follows the sockets that submitted, not all of them */
	uint64_t low_held_max; /* the most bytes one of the app's sockets below level 0
	                        * had in the daemon's stack, unacknowledged: bounded by
	                        * ipkitd's --low-inflight while a socket of a higher
	                        * level is open (what queues ahead of it) */
	uint64_t low_rwnd_max; /* the widest receive window (bytes the peer may still
	                        * send) one such socket had while limited, past its
	                        * first 2 x 256 KiB: bounded by --low-inflight too */
	uint64_t futex_wakes;  /* wake-up system calls the daemon made for the app:
	                        * only for sockets (or the whole app) a thread sleeps on */
	uint64_t tx_zc;        /* bytes sent zero-copy: transmitted from the region in
	                        * place (ipkitd on a backend that gains: tap, tun) */
	uint64_t sends_zc;     /* SENDs completed zero-copy (res = len once the peer
	                        * acknowledged every byte) */
	uint64_t sends_copied; /* SENDs completed after a copy into the stack */
	uint64_t ev_wakes;     /* writes the daemon made to the app's wake eventfd
	                        * (ipk_svc_wake_fd), a u32 count that wraps */
	uint64_t urgent_wakes; /* completions of the app's level-0 sockets that the
	                        * daemon announced at once, in the middle of its pass,
	                        * because a lower level had sockets open (the app's
	                        * threads were woken then, not after the pass); a u32
	                        * count that wraps */
};
/* ipk_svc_stats: copy them into *st (zeros for a NULL svc; NULL st: nothing). */
void ipk_svc_stats(const struct ipk_svc *svc, struct ipk_svc_stats *st);

/* ------------------------------------------------------------ for the POSIX shim
 * (svc/preload): helpers an LD_PRELOAD library needs and an application does not. */

/* ipk_svc_move_fds: move the handle's own descriptors (the control socket and the
 * doorbell eventfd) to numbers >= min_fd (close-on-exec kept), so that a program
 * running under the shim sees the same descriptor numbers it would see on Linux
 * (the lowest free one). Returns 0, -EINVAL (NULL svc, min_fd < 0) or -errno of
 * fcntl(F_DUPFD_CLOEXEC); on an error the descriptors stay where they were. */
int ipk_svc_move_fds(struct ipk_svc *svc, int min_fd);

/* The app's wake eventfd (non-blocking, close-on-exec; -1 for a NULL svc or a
 * daemon that gave none): a thread that sleeps in the kernel (epoll_wait, poll)
 * with this descriptor in its set, instead of on the app's futex, is woken by the
 * daemon's write after a pass that posted completions, while the count of such
 * sleepers is non-zero. ipk_svc_wake_fd_arm(svc, 1) raises that count (with a
 * full fence: read the wake count, take your completions, arm, then compare the
 * wake count again before sleeping), (svc, 0) lowers it. The eventfd is never
 * read by the library: watch it edge-triggered (EPOLLET) or read it yourself. */
int ipk_svc_wake_fd(const struct ipk_svc *svc);
void ipk_svc_wake_fd_arm(struct ipk_svc *svc, int on);
/* ipk_svc_wake_fd_lazy(svc, 1): a pass whose only completions are successful
 * SENDs does not write the wake eventfd (no thread of the app waits for them);
 * (svc, 0, the default): every pass that posted does. Set it to 0 before
 * submitting a SEND whose completion an armed sleeper needs. */
void ipk_svc_wake_fd_lazy(struct ipk_svc *svc, int on);
/* ipk_svc_hung_up: returns 1 when the daemon hung up (seen by a recv on the
 * control socket; 1 for a NULL svc), else 0. */
int ipk_svc_hung_up(struct ipk_svc *svc);

#ifdef __cplusplus
}
#endif
#endif
