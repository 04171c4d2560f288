/*
 * ipkit io: packet-I/O backends behind one small interface, and the packet pool they
 * share with the core.
 *
 * A backend moves frames between a (real or virtual) NIC queue and packets of an
 * ipk_pool. It never sees the core; the runtime (ipkit/runtime.h, runtime/node.c)
 * joins the two.
 *
 *   struct ipk_pool *pool = ipk_pool_create(&pcfg, err, sizeof err);
 *   struct ipk_io *io = ipk_io_open("afxdp:veth1,queue=0", pool, err, sizeof err);
 *   n = ipk_io_rx_burst(io, pkts, 32);   ... ipk_run(ctx, (void **)pkts, n, now) ...
 *   ipk_io_tx_burst(io, out, k); ipk_io_flush(io);
 *
 * Hosted code (Linux): libc, system calls and the backends' libraries are allowed here.
 * Errors follow core.h's one convention: 0 or a non-negative count on success, a
 * negative errno value on failure (the same space as the core's IPK_E*; print it with
 * ipk_strerror or strerror(-rc)); functions returning a pointer return NULL instead.
 * Where a function takes `err`, it also writes a one-line human message there (what
 * failed, on which device, and what to do, e.g. the missing capability).
 *
 * Threads: a pool and a backend serve one thread at a time (no locks on the packet
 * path); handles passed to these functions must be the live ones their create/open
 * returned: a closed or destroyed one cannot be detected. A NULL handle or NULL
 * pointer argument is never a crash: int functions return -EINVAL (ipk_io_tx_burst:
 * 0 taken), pointer functions NULL, sizes and counts 0, and void ones do nothing
 * (output structs are zeroed); tests/api/test_null_args.c walks them all.
 */
#ifndef IPKIT_IO_H
#define IPKIT_IO_H

#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ pool */

struct ipk_pool;

/*
 * A packet: a descriptor over one buffer of the pool. Buffers are reference counted
 * (clones share them) and chains link descriptors (scatter-gather). All fields are
 * readable by backends; `off`/`len` change only through the pool functions or the
 * core's packet ops.
 */
struct ipk_pkt {
	uint8_t *buf;            /* start of the buffer (buf_size bytes) */
	uint32_t off;            /* data starts at buf + off */
	uint32_t len;            /* data bytes in this descriptor */
	struct ipk_pkt *next;    /* scatter-gather chain, NULL at the end */
	struct ipk_pool *pool;
	uint32_t idx;            /* buffer index in the pool area (AF_XDP frame address / buf_size) */
	uint32_t rx_csum;        /* IPK_RXCSUM_* set by a backend that knows (vnet hdr, XDP hints) */
	struct ipk_tx_meta meta; /* transmit offloads requested by the core (flags 0 = none) */
	void *user;              /* free for the current holder */
	struct ipk_pkt_ext *ext; /* idx == IPK_PKT_IDX_EXT only: the external buffer's record */
};

/*
 * External buffers: a descriptor over memory the pool does not own (an application's
 * shared region in ipkitd), for zero-copy transmit. Its idx is IPK_PKT_IDX_EXT, never
 * a buffer index: backends that address buffers by index (AF_XDP's UMEM, DPDK's
 * registered area) must copy such a packet, which they do (checked per piece).
 * The record belongs to whoever attaches it; it counts the descriptors over it
 * (attach and clone add one, ipk_pkt_free removes one) and `release` runs exactly
 * once, from the ipk_pkt_free that drops refs to 0, on the pool's thread. Until then
 * the memory must stay mapped and the record alive. Set refs = 0 before the first
 * attach. The bytes are never interpreted by the pool.
 */
#define IPK_PKT_IDX_EXT 0xffffffffu
struct ipk_pkt_ext {
	uint32_t refs;           /* descriptors over the buffer (0 before the first attach) */
	/* Called once, when the last descriptor is freed: the buffer is the owner's
	 * again (x may be freed or reused from here). */
	void (*release)(struct ipk_pkt_ext *x);
	void *arg;               /* free for the owner */
};
/* A descriptor over [base + off, base + off + len) recorded in x (x->refs + 1): buf
 * = base + off, off 0, idx IPK_PKT_IDX_EXT. Its data cannot grow (set_len only
 * shrinks). NULL when no descriptor is free (counted in alloc_fails; x unchanged),
 * or for a NULL p, base or x, a NULL release or len 0 (counted in bad_puts). */
struct ipk_pkt *ipk_pkt_attach_ext(struct ipk_pool *p, uint8_t *base, uint32_t off,
                                   uint32_t len, struct ipk_pkt_ext *x);

struct ipk_pool_cfg {
	uint32_t nbufs;      /* buffers, default 8192 */
	uint32_t buf_size;   /* bytes per buffer incl. headroom, power of two, default 2048 */
	uint32_t headroom;   /* bytes kept free before data on alloc, default 128 */
	uint32_t ndescs;     /* descriptors (>= nbufs; clones need extra), default 2 * nbufs */
	int hugepages;       /* 1: back the area with hugepages, falling back to 4 KiB pages */
};
/* Fill *cfg with the defaults above (NULL: nothing). */
void ipk_pool_cfg_default(struct ipk_pool_cfg *cfg);

/* Create a pool (cfg NULL: the defaults). The buffer area is one contiguous,
 * page-aligned mapping (AF_XDP registers it as UMEM). Returns the pool, or NULL with
 * a one-line reason in err (bad sizes, out of memory). */
struct ipk_pool *ipk_pool_create(const struct ipk_pool_cfg *cfg, char *err, size_t errlen);
/* Unmap and free the pool and its companion large pool (ipk_pool_large). Every
 * packet and buffer of it becomes invalid: destroy it only after the backends and
 * the core that used it are closed / no longer called. NULL is ignored. */
void ipk_pool_destroy(struct ipk_pool *p);
/* The buffer area and (when size is not NULL) its size in bytes. The pool owns it.
 * NULL and size 0 for a NULL pool. */
void *ipk_pool_area(const struct ipk_pool *p, size_t *size);
/* Bytes per buffer (ipk_pool_cfg.buf_size), headroom included; 0 for a NULL pool. */
uint32_t ipk_pool_buf_size(const struct ipk_pool *p);

/* A fresh packet: len 0, off = headroom. NULL when empty (counted) or p is NULL. */
struct ipk_pkt *ipk_pkt_alloc(struct ipk_pool *p);
/* Packet for a given buffer index (a backend that got the buffer back from the kernel,
 * e.g. an AF_XDP rx frame): takes a descriptor, refcount 1. NULL when out of descriptors. */
struct ipk_pkt *ipk_pkt_attach(struct ipk_pool *p, uint32_t idx, uint32_t off, uint32_t len);
/* Take a buffer out of the pool without a descriptor (to hand to the kernel: AF_XDP fill
 * ring); returns its index, or -ENOBUFS when none is free (counted in buf_fails),
 * -EINVAL for a NULL pool. ipk_pool_buf_put gives it back (a NULL pool, a foreign or
 * double put is ignored, the last two counted in bad_puts). */
int64_t ipk_pool_buf_get(struct ipk_pool *p);
void ipk_pool_buf_put(struct ipk_pool *p, uint32_t idx);
/* ipk_pkt_free: release one descriptor (and the buffer at its last reference), not
 * the chain behind it; ipk_pkt_free_chain: release every descriptor of the chain.
 * Both ignore NULL. The caller must own what it frees (see each API's ownership). */
void ipk_pkt_free(struct ipk_pkt *k);
void ipk_pkt_free_chain(struct ipk_pkt *k);
/* A new descriptor over k's buffer (reference count + 1, the ext record's for an
 * external buffer): same off and len, no next;
 * NULL when out of descriptors (counted) or k is NULL. */
struct ipk_pkt *ipk_pkt_clone(struct ipk_pkt *k);
/* Data bytes of the whole chain starting at k (0 for NULL). */
uint32_t ipk_pkt_chain_len(const struct ipk_pkt *k);
/* ipk_pkt_mtod: pointer to k's first data byte (buf + off), as DPDK's rte_pktmbuf_mtod. */
static inline uint8_t *ipk_pkt_mtod(const struct ipk_pkt *k) { return k->buf + k->off; }
/* Buffers and descriptors in use now (tests check these return to 0); 0 for a NULL
 * pool. */
void ipk_pool_usage(const struct ipk_pool *p, uint32_t *bufs_out, uint32_t *descs_out);

/* The receive reserve: the core's allocations through the packet ops (transmit
 * headers, its copies) fail while no more than `nbufs` buffers are free, so the
 * backend's receive path (ipk_pkt_alloc) always finds buffers for the ACKs, RSTs, ARP
 * and ICMP that let memory be freed again (issue 14). The core's control packets
 * may use the upper half of it when ops->pkt_alloc_ctl is ipk_pool_pkt_alloc_ctl.
 * Default 0 (none). */
void ipk_pool_set_reserve(struct ipk_pool *p, uint32_t nbufs);
/* ipk_pool_low returns 1 when at most twice the reserve is free (0 otherwise, and 0
 * with no reserve set); ipk_pool_pkt_low returns the same for the pool found through
 * `opaque` (the convention of ipk_pool_fill_ops), to be used as the core's
 * ops->pkt_low, under which the core holds no more received packets. */
int ipk_pool_low(const struct ipk_pool *p);
int ipk_pool_pkt_low(void *opaque);
/* For ops->pkt_alloc_ctl (opaque as ipk_pool_fill_ops): control packets (pure ACKs,
 * RSTs, SYN-ACKs, ARP, ICMP errors) may take the upper half of the reserve, so a node
 * at its reserve still acknowledges and resets; counted in reserve_ctl. Not set by
 * ipk_pool_fill_ops: the runtime does not use it yet (with --workers, payload
 * references pinning the pool, it left receive too little; see README status). */
void *ipk_pool_pkt_alloc_ctl(void *opaque);

/* Fill the packet ops of `ops` (pkt_alloc ... pkt_chain_cut) with this pool (NULL:
 * nothing). The
 * context's ipk_config.opaque must point to a struct whose first member is the
 * struct ipk_pool * to allocate from. */
void ipk_pool_fill_ops(struct ipk_ops *ops);
/* ops->tx_offload and ops->rx_csum for pool packets (the runtime sets them when the
 * backend advertises IPK_CAP_TX_* / IPK_CAP_RX_CSUM_*): the marks live in pkt->meta
 * and pkt->rx_csum, where backends read and write them. */
void ipk_pool_tx_offload(void *pkt, const struct ipk_tx_meta *m, void *opaque);
/* ipk_pool_rx_csum: ops->rx_csum for pool packets, pkt->rx_csum (see above). */
uint32_t ipk_pool_rx_csum(void *pkt, void *opaque);

/* Bytes free before the data of a fresh packet. A packet from ipk_pkt_alloc has
 * buf_size - headroom bytes of room: set the core's pkt_buf_size to at most that.
 * 0 for a NULL pool. */
uint32_t ipk_pool_headroom(const struct ipk_pool *p);
/* Copy a chain's data into dst (at most cap bytes); returns the bytes copied (0 for a
 * NULL chain or dst). */
uint32_t ipk_pkt_linearize(const struct ipk_pkt *k, uint8_t *dst, uint32_t cap);
/* Copy up to len bytes starting off bytes into the chain (a frame split over several
 * buffers, e.g. AF_XDP multi-buffer); returns the bytes copied (0 for a NULL chain or
 * dst). */
uint32_t ipk_pkt_copy_out(const struct ipk_pkt *k, uint32_t off, uint8_t *dst, uint32_t len);
/* References to k's buffer (1 + clones sharing it; an external buffer's record
 * refs), 0 for NULL; for tests and debugging. */
uint32_t ipk_pkt_buf_refcnt(const struct ipk_pkt *k);

/*
 * Coalesced receive frames (a kernel's GSO/GRO super-frame: up to 64 KiB of TCP payload
 * plus headers) do not fit a normal buffer, and the core takes received frames flat,
 * never as chains (ipk_run drops chains with IPK_DROP_CHAIN). A backend that asks the
 * kernel for such frames (tap with TUN_F_TSO4, afpacket with GSO frames from a veth
 * peer) takes them from this companion pool of IPK_POOL_LARGE_NBUFS buffers of
 * IPK_POOL_LARGE_BUF bytes. Its packets work with every pkt function and core op (they
 * carry their own pool). Created on the first call, owned by p and destroyed with it,
 * so packets the core still holds stay valid until p goes. Returns p itself when p's
 * buffers are already that large, NULL when the companion cannot be mapped.
 */
#define IPK_POOL_LARGE_BUF (128u * 1024)
#define IPK_POOL_LARGE_NBUFS 64u
/* ipk_pool_large: p's companion pool of large buffers, described above (NULL for a
 * NULL p or when it cannot be mapped). */
struct ipk_pool *ipk_pool_large(struct ipk_pool *p);

struct ipk_pool_stats {
	uint64_t allocs, alloc_fails; /* ipk_pkt_alloc calls / NULL returns (also clone/attach) */
	uint64_t clones;
	uint64_t buf_fails;           /* ipk_pool_buf_get found the pool empty */
	uint64_t bad_puts;            /* double or foreign buf_put / attach, ignored */
	uint32_t hugepages;           /* 1 when the area is backed by hugepages */
	uint32_t pad_;
	uint64_t reserve_hits;        /* core allocations refused to keep the receive
	                               * reserve (ipk_pool_set_reserve) */
	uint64_t reserve_ctl;         /* control packets (ops->pkt_alloc_ctl) taken from the
	                               * upper half of the reserve */
	uint64_t ext_attaches;        /* ipk_pkt_attach_ext descriptors handed out */
	uint64_t ext_releases;        /* external records whose last reference went (release
	                               * called) */
};
/* Copy p's counters into *st (zeros for a NULL p; nothing for a NULL st). */
void ipk_pool_stats(const struct ipk_pool *p, struct ipk_pool_stats *st);

/* --------------------------------------------------------------- backend */

struct ipk_io;

struct ipk_io_caps {
	uint32_t offloads;  /* IPK_CAP_* the device really provides (and that are enabled) */
	uint32_t tso_max;   /* with IPK_CAP_TSO */
	uint16_t mtu;       /* IP MTU of the device */
	uint16_t nqueues;   /* queues this instance serves */
	uint8_t link;       /* IPK_LINK_ETH or IPK_LINK_RAWIP */
	uint8_t mac[6];     /* the device's MAC (zero for raw IP) */
	uint8_t pad_;
};

struct ipk_io_stats {
	uint64_t rx_pkts, rx_bytes, tx_pkts, tx_bytes;
	uint64_t rx_drops;    /* no buffer / ring full / malformed from the device */
	uint64_t tx_drops;    /* could not be queued */
	uint64_t rx_errors, tx_errors;
	uint64_t wakeups;     /* sleeps on the fd that ended with traffic */
};

/*
 * Open a backend from a spec string "<kind>:<device>[,key=value...]":
 *   tap:NAME[,vnet=0|1][,offload=0|1]     TAP (Ethernet); creates/attaches NAME; offload=1
 *                                         (default) trades checksums and 64 KiB TSO/GSO
 *                                         frames with the kernel, offload=0 none of it
 *   tun:NAME[,vnet=0|1]                   TUN (raw IPv4)
 *   afpacket:DEV[,rx=v2|v3][,fanout=N][,vnet=0|1][,frames=N][,tov=MS]
 *                                         rx=v2 (default): TPACKET_V2, every frame handed
 *                                         over at once (lowest latency); rx=v3:
 *                                         TPACKET_V3 blocks, fewer wake-ups but up to tov
 *                                         ms (default 1) of added latency
 *   afxdp:DEV[,queue=Q][,mode=skb|drv][,zc=0|1][,prog=0|1][,frame=2048|4096][,sg=0|1]
 *        [,busy_poll=0|1][,csum=0|1]
 *                                         frame=4096: 4 KiB UMEM frames (the pool's
 *                                         buf_size must match; the runtime sizes its
 *                                         pool from it), MTU up to 3822 instead of 1774;
 *                                         sg=1: multi-buffer (XDP_USE_SG, Linux 6.6+),
 *                                         a frame spans up to 16 UMEM frames (MTU up
 *                                         to 61422 with 4 KiB frames), received as one
 *                                         chain (IPK_CAP_LRO); busy_poll=1:
 *                                         SO_PREFER_BUSY_POLL on the socket and a
 *                                         non-blocking recvfrom per rx burst, which
 *                                         runs the device's NAPI on the caller's CPU
 *                                         (zero-copy drivers; Linux 6.13+ gives a
 *                                         copy-mode socket, e.g. on veth, no NAPI to
 *                                         poll, so there it changes nothing); errors:
 *                                         a value other than 0/1, EPERM without
 *                                         CAP_NET_ADMIN; csum=1 (default): the
 *                                         backend finishes TCP/UDP checksums
 *                                         (IPK_CAP_TX_CSUM_*) while it copies into
 *                                         the UMEM, csum=0: the core sums them
 *   memlink:NAME,role=a|b[,busypoll=0|1][,slots=N][,queues=N][,queue=Q]
 *                                         queues=N (1..16, both sides alike): N queue
 *                                         pairs; queue=Q serves one (caps.nqueues 1),
 *                                         none serves all and emulates the peer's RSS
 *                                         NIC: each sent frame goes to queue
 *                                         reta[toeplitz % 128], symmetric key, reta
 *                                         i % N; ARP and non-IPv4 to queue 0
 *   dpdk:PORT[,queue=Q][,queues=N][,offload=0|1][,txzc=0|1][,lro=0|1][,rxd=N][,txd=N]
 *                                         a DPDK port by id or name; a vdev name EAL
 *                                         lacks (net_tap0, net_memif0, ...) is
 *                                         hot-plugged with the other options as devargs
 *   virtio:vhost-user=PATH[,csum=0|1][,tso=0|1][,mrg=0|1][,event=0|1][,qsize=N]
 *        [,mtu=M][,mac=XX:XX:XX:XX:XX:XX]
 *                                         ipkit's own virtio-net driver (io/virtio) on
 *                                         the vhost-user device listening at PATH
 *                                         (e.g. DPDK's net_vhost); csum/tso/mrg (default
 *                                         1) offer the checksum, TSO and mergeable-
 *                                         buffer features, event=0 polls only (no
 *                                         ipk_io_fd); the MAC is random unless given
 * Any spec may end with ",pcap=FILE" to wrap the backend in a pcap writer.
 * Returns NULL and writes a one-line message to err on failure (unknown kind, missing
 * device, missing privilege — naming the capability, unsupported mode, MTU mismatch).
 */
struct ipk_io *ipk_io_open(const char *spec, struct ipk_pool *pool, char *err, size_t errlen);
/* Pool buf_size the spec asks for (afxdp's frame=N), or 0 when it leaves the pool's
 * size to the caller or cannot be parsed (ipk_io_open reports that). Call before
 * ipk_pool_create. */
uint32_t ipk_io_spec_buf_size(const char *spec);
/* Close the device and free the backend. Call it before destroying the pool the
 * backend was opened with. NULL is ignored. */
void ipk_io_close(struct ipk_io *io);

/* Receive up to n packets (ownership passes to the caller); returns the count (0 when
 * nothing is there or n <= 0; never blocks), -EINVAL for a NULL io or pkts, or a
 * negative errno on a device error. */
int ipk_io_rx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n);
/* Queue up to n packets (chains allowed when caps.offloads has IPK_CAP_SG; offload
 * marks in pkt->meta honoured for the caps advertised). Returns how many were taken;
 * the rest stay the caller's (all of them, 0 returned, for a NULL io or pkts or
 * n <= 0). Taken packets are freed by the backend once sent. */
int ipk_io_tx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n);
/* Push queued transmissions to the device (kick). Returns 0 or a negative errno
 * when the kick failed (counted in tx_errors); a busy device (EAGAIN, ENOBUFS) is
 * not an error: the next flush or transmit kicks again. -EINVAL for a NULL io. */
int ipk_io_flush(struct ipk_io *io);
/* ipk_io_caps: what the device provides, fixed at open; the pointer lives as long as
 * io (NULL for a NULL io). Give caps.offloads to ipk_config.caps and caps.mtu to
 * ipk_config.mtu. */
const struct ipk_io_caps *ipk_io_caps(const struct ipk_io *io);
/* A file descriptor that becomes readable when packets arrive (event-driven mode), or
 * -EOPNOTSUPP when the backend can only be polled (-EINVAL for a NULL io). The
 * backend owns the fd: do not close it. */
int ipk_io_fd(const struct ipk_io *io);
/* Before sleeping on ipk_io_fd: arm wake-ups (memlink) — returns 0, or 1 if packets
 * arrived meanwhile (don't sleep); -EINVAL for a NULL io. */
int ipk_io_arm(struct ipk_io *io);
/* Tell the backend the node's own address so it can steer traffic to us: afxdp
 * writes it into its XDP program's map (ARP for ip4_be and IPv4 to ip4_be go to
 * ipkit, everything else to the kernel; until it is set everything goes to the
 * kernel). mac may be NULL. The runtime calls it right after ipk_io_open. Backends
 * that see all of their device's traffic ignore it. Returns 0, -EINVAL for a NULL
 * io, or a negative errno when the backend could not apply it. */
int ipk_io_set_addr(struct ipk_io *io, uint32_t ip4_be, const uint8_t mac[6]);
/* ipk_io_set_addr6 flag: take Router Advertisements sent to all-nodes. */
#define IPK_IO_ADDR6_RA 0x1u
/* The same for IPv6 (the node calls it after ipk_io_set_addr when the core has IPv6
 * on): afxdp then also steers IPv6 to `addr` (a static address; NULL or :: = none)
 * and to every unicast address ending in the interface identifier of `mac` (the
 * core's link-local and SLAAC addresses: the modified EUI-64 of the MAC), and the
 * NS/NA whose target is one of those; with flags IPK_IO_ADDR6_RA also the Router
 * Advertisements sent to all-nodes (which the kernel on the same device then no
 * longer gets: an XDP program cannot give one frame to both). mac NULL: the one
 * given to ipk_io_set_addr. Other backends ignore it. Returns 0, -EINVAL for a NULL
 * io or no MAC known, or a negative errno when the backend could not apply it. */
int ipk_io_set_addr6(struct ipk_io *io, const uint8_t addr[16], const uint8_t mac[6],
                     uint32_t flags);
/* ipk_io_stats: copy the backend's counters into *st (a pcap wrapper reports the
 * backend it wraps; zeros for a NULL io, nothing for a NULL st). */
void ipk_io_stats(const struct ipk_io *io, struct ipk_io_stats *st);
/* ipk_io_name: the backend's name for logs ("tap:ipk0"); owned by io ("(no io)", a
 * static string, for a NULL io). */
const char *ipk_io_name(const struct ipk_io *io);

/*
 * DPDK's EAL, bench-iip style: `prog EAL-args -- app-args`. Looks for "--" in
 * argv[1..argc-1]; when found, starts EAL with argv[0..j-1] and returns j, the number
 * of arguments consumed up to the "--" (the caller goes on at argv[j + 1]); returns 0
 * and does nothing when there is no "--" (the first dpdk: spec then starts EAL with
 * defaults: --no-huge -m 256 --no-pci and a private --file-prefix). argv is not
 * modified. Errors: -ENOTSUP when this build has no DPDK and EAL args were given,
 * -EALREADY when EAL runs already, another negative errno when EAL init failed; a
 * one-line message in err. Call it once, before any thread is started.
 */
int ipk_io_dpdk_eal(int argc, char **argv, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
