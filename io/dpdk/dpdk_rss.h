/*
 * The RSS a DPDK port really applies, for the multi-core runtime (runtime/wio.c):
 * after configuring the port's RSS (symmetric key, all queues), dpdk_port.c reads
 * back what the PMD kept (rte_eth_dev_rss_hash_conf_get: key and hash types;
 * rte_eth_dev_rss_reta_query: the redirection table) and keeps it in the core's
 * terms, so active opens choose ports by the NIC's real key and table even when the
 * PMD ignored or changed ours. Declared apart from dpdk_internal.h: no DPDK headers.
 */
#ifndef IPKIT_IO_DPDK_RSS_H
#define IPKIT_IO_DPDK_RSS_H

#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

struct ipk_io;

/* Largest redirection table taken (ice has 2048 entries; i40e 512, ixgbe 128). */
#define IPK_DPDK_RETA_MAX 4096u

struct ipk_dpdk_rss {
	uint8_t key[IPK_RSS_KEY_LEN]; /* the port's key, first 40 bytes (IPv4 uses 16) */
	uint8_t fields;               /* IPK_RSS_F_* the port hashes */
	uint32_t reta_size;
	uint16_t reta[IPK_DPDK_RETA_MAX]; /* queue of each entry */
};

/* The RSS of the port behind io (a dpdk: backend, possibly wrapped by pcap). 0 and
 * *out filled; -ENOTSUP: io is not a DPDK port (or no DPDK in this build); -ENOENT:
 * the port has no usable RSS (one queue, no RSS offload, the read-back failed or
 * gave something the core cannot model), with the reason in why. */
int ipk_dpdk_rss_get(const struct ipk_io *io, struct ipk_dpdk_rss *out, char *why,
                     size_t whylen);

#endif
