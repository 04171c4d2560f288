/*
 * io/dpdk internals: EAL start-up (dpdk_eal.c), the shared per-port state and the
 * offload probe (dpdk_port.c), and the backend proper (dpdk.c).
 *
 * One DPDK port may be served by several ipk_io instances (one per queue, each on its
 * own thread with its own ipkit pool). The first open of a port configures and starts
 * it with all its queues; later opens take one queue each; the last close stops and
 * closes it. The port table is the only shared state and is guarded by a mutex; the
 * packet path touches only the instance's own queue.
 */
#ifndef IPKIT_IO_DPDK_INTERNAL_H
#define IPKIT_IO_DPDK_INTERNAL_H

#include "io_internal.h"
#include "dpdk/dpdk_rss.h"

/* IPK_DPDK_REAL: compiled for real only when the DPDK headers are on the include path
 * (meson adds them from pkg-config) and the compiler targets the machine meson found
 * libdpdk for. A cross compile of the same sources (the portability gate's i686 and
 * s390x builds) gets the stubs in dpdk_stub.c, which have nothing to link against. */
#if defined(__has_include) && defined(IPK_DPDK_PTR_SIZE)
#if __has_include(<rte_ethdev.h>) && IPK_DPDK_PTR_SIZE == __SIZEOF_POINTER__
#define IPK_DPDK_REAL 1
#endif
#endif

#ifdef IPK_DPDK_REAL
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#define IPK_DPDK_MAX_QUEUES 16
#define IPK_DPDK_BURST 32

/* Requested port set-up, from the spec. */
struct ipk_dpdk_req {
	uint16_t nqueues;  /* queues=N (only the first open of a port decides) */
	uint16_t rxd, txd; /* descriptors per queue (0 = PMD's preference) */
	int offload;       /* offload=0 turns every offload off */
	int lro;           /* lro=1 asks for LRO (needs buffers that hold a coalesced frame) */
	uint32_t rx_room;  /* bytes an ipkit buffer holds after headroom (LRO needs >= 9000) */
};

/* What the probe enabled on the port (RTE_ETH_*_OFFLOAD_* masks) and the caps it maps to. */
struct ipk_dpdk_port {
	uint16_t port_id;
	uint16_t nqueues;
	int refs;                     /* open ipk_io instances */
	uint32_t queue_taken;         /* bit per queue already served */
	uint64_t rx_capa, tx_capa;    /* what the PMD reports */
	uint64_t rx_on, tx_on;        /* what we enabled */
	uint64_t rss_hf;              /* RSS hash functions enabled (0: no RSS) */
	struct ipk_dpdk_rss *rss;     /* what the port applies (read back), NULL: none */
	char rss_why[128];            /* ... and why not */
	uint32_t caps;                /* IPK_CAP_* */
	uint32_t tso_max;
	uint16_t mtu;
	uint16_t nb_seg_max;          /* tx segments per packet the PMD takes */
	int rxq_intr;                 /* rx queue interrupts configured (event-driven mode) */
	int tso_sw;                   /* net_tap: TSO by librte_gso in software, see dp_facts */
	int vhost_user;               /* net_vhost, net_virtio_user: no extmem, see dp_facts */
	int tx_copy;                  /* net_virtio_user: tx only from EAL memory */
	uint8_t mac[6];
	int hotplugged;               /* we probed the vdev: remove it at the last close */
	char name[RTE_ETH_NAME_MAX_LEN];
	char driver[32];
	struct rte_mempool *rx_mp[IPK_DPDK_MAX_QUEUES];
};

/* EAL: start it with defaults unless the program already did (ipk_io_dpdk_eal). */
int ipk_dpdk_eal_ensure(char *err, size_t errlen);

/* Find the port (id or device name; a vdev name with devargs is hot-plugged), set it
 * up with req on the first open, and take queue `queue`. */
int ipk_dpdk_port_acquire(const char *dev, const char *devargs, uint16_t queue,
                          const struct ipk_dpdk_req *req, struct ipk_dpdk_port **out,
                          char *err, size_t errlen);
void ipk_dpdk_port_release(struct ipk_dpdk_port *p, uint16_t queue);

/* The port's RSS in the core's terms: key (first IPK_RSS_KEY_LEN bytes of key_len,
 * at least 16), hash types rss_hf (RTE_ETH_RSS_*), reta_size entries of the table in
 * DPDK's 64-entry groups, checked against the port's nqueues (every entry names a
 * queue, every queue appears). 0, or -1 with the reason in why. */
int ipk_dpdk_rss_translate(const uint8_t *key, uint32_t key_len, uint64_t rss_hf,
                           const struct rte_eth_rss_reta_entry64 *reta, uint32_t reta_size,
                           uint16_t nqueues, struct ipk_dpdk_rss *out, char *why,
                           size_t whylen);

/* The one-line summary of what was enabled ("dpdk:net_tap0 (port 0, net_tap): ..."). */
void ipk_dpdk_port_describe(const struct ipk_dpdk_port *p, char *buf, size_t len);

#endif /* IPK_DPDK_REAL */
#endif
