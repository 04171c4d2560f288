/*
 * DPDK ports: lookup (id, device name, or a vdev hot-plugged from the spec), the
 * offload probe, multi-queue set-up with a symmetric RSS key, start and stop.
 *
 * The probe asks the PMD what it offers (rte_eth_dev_info_get), enables what ipkit can
 * use, and maps it to IPK_CAP_*:
 *   rx IPv4/TCP/UDP checksum  -> IPK_CAP_RX_CSUM_IP4 / _L4 (mbuf ol_flags GOOD/BAD)
 *   tx IPv4/TCP/UDP checksum  -> IPK_CAP_TX_CSUM_IP4 / _TCP / _UDP
 *   tx multi-segment          -> IPK_CAP_SG (zero-copy chains)
 *   tx TSO (with multi-seg and TCP checksum) -> IPK_CAP_TSO
 *   rx LRO (lro=1 and buffers big enough; the core takes single buffers only)
 *                             -> IPK_CAP_LRO
 * Each feature falls back on its own: what the PMD lacks is done in software by the
 * core. If the PMD refuses the configuration with offloads, it is retried without.
 *
 * RSS (queues > 1): configured with the core's symmetric key over IPv4, TCP and UDP,
 * then read back (dp_rss_read), because a PMD may keep its own key or table: the
 * runtime gives the core what the port really applies (dpdk_rss.h).
 */
#include "dpdk_internal.h"

#ifdef IPK_DPDK_REAL

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf_pool_ops.h>

/* Offloads ipkit can use (anything else stays off). */
#define DP_RX_CSUM (RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_TCP_CKSUM | \
                    RTE_ETH_RX_OFFLOAD_UDP_CKSUM)
#define DP_TX_CSUM (RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_TCP_CKSUM | \
                    RTE_ETH_TX_OFFLOAD_UDP_CKSUM)
/* IPv6 too (issue 19): the fixed header's addresses and the ports, never the _EX
 * types (addresses from a routing header or home-address option, which ipkit's
 * software hash does not read). */
#define DP_RSS_HF (RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_NONFRAG_IPV4_TCP | \
                   RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_IPV6 | \
                   RTE_ETH_RSS_NONFRAG_IPV6_TCP | RTE_ETH_RSS_NONFRAG_IPV6_UDP)
#define DP_RSS_IP4 (RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_FRAG_IPV4 | RTE_ETH_RSS_NONFRAG_IPV4_OTHER)
#define DP_RSS_IP6 (RTE_ETH_RSS_IPV6 | RTE_ETH_RSS_FRAG_IPV6 | RTE_ETH_RSS_NONFRAG_IPV6_OTHER)
#define DP_RSS_PARTIAL (RTE_ETH_RSS_L3_SRC_ONLY | RTE_ETH_RSS_L3_DST_ONLY | \
                        RTE_ETH_RSS_L4_SRC_ONLY | RTE_ETH_RSS_L4_DST_ONLY)
#define DP_TSO_MAX 64000u     /* TCP payload per TSO frame: below 64 KiB with headers */
#define DP_LRO_MIN_ROOM 9000u /* LRO only pays with buffers that hold several segments */

static pthread_mutex_t port_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ipk_dpdk_port *port_tab[RTE_MAX_ETHPORTS];

/* The core's symmetric Toeplitz key (hash(a->b) == hash(b->a), so both directions
 * of a connection land on one queue, which one context per queue needs), repeated
 * when the NIC's key is longer than the core's: the pattern has a 2-byte period. */
static void dp_rss_key(uint8_t *key, size_t len)
{
	uint8_t k[IPK_RSS_KEY_LEN];
	size_t i;

	ipk_rss_key_symmetric(k);
	for (i = 0; i < len; i++)
		key[i] = k[i % IPK_RSS_KEY_LEN];
}

/* ----------------------------------------------------------------- lookup */

static int dp_is_number(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

/* A vdev named in the spec that EAL does not have yet is probed with the spec's
 * remaining options as its devargs (dpdk:net_tap0,iface=x == --vdev=net_tap0,iface=x). */
static int dp_hotplug(const char *dev, const char *devargs, uint16_t *port, char *err,
                      size_t el)
{
	char spec[512];
	int rc;

	snprintf(spec, sizeof(spec), "%s%s%s", dev, *devargs ? "," : "", devargs);
	rc = rte_dev_probe(spec);
	if (rc < 0)
		return ipk_io_err(err, el, ENODEV, "dpdk:%s: no such port, and probing it as a "
		                  "vdev ('%s') failed: %s", dev, spec, rte_strerror(-rc));
	if (rte_eth_dev_get_port_by_name(dev, port) != 0)
		return ipk_io_err(err, el, ENODEV, "dpdk:%s: the vdev was probed but made no "
		                  "ethernet port", dev);
	return 1;
}

/* Port id from a number or a device name; 1 when we hot-plugged it, 0 otherwise. */
static int dp_resolve(const char *dev, const char *devargs, uint16_t *port, char *err,
                      size_t el)
{
	if (dp_is_number(dev)) {
		unsigned long id = strtoul(dev, NULL, 10);

		if (id >= RTE_MAX_ETHPORTS || !rte_eth_dev_is_valid_port((uint16_t)id))
			return ipk_io_err(err, el, ENODEV, "dpdk:%s: no such port (%u ports "
			                  "available; add one with --vdev= before '--')", dev,
			                  (unsigned)rte_eth_dev_count_avail());
		*port = (uint16_t)id;
		return 0;
	}
	if (rte_eth_dev_get_port_by_name(dev, port) == 0)
		return *devargs ? ipk_io_err(err, el, EEXIST, "dpdk:%s: the port exists already; "
		                             "vdev options cannot change it", dev) : 0;
	if (strncmp(dev, "net_", 4) == 0)
		return dp_hotplug(dev, devargs, port, err, el);
	return ipk_io_err(err, el, ENODEV, "dpdk:%s: no such port (give a port id or a "
	                  "device name such as net_tap0)", dev);
}

/* ------------------------------------------------------------ offloads */

/* What to enable on rx and tx from what the PMD offers. */
static void dp_pick_offloads(struct ipk_dpdk_port *p, const struct rte_eth_dev_info *info,
                             const struct ipk_dpdk_req *req)
{
	uint64_t tx;

	p->rx_capa = info->rx_offload_capa;
	p->tx_capa = info->tx_offload_capa;
	p->rx_on = p->tx_on = 0;
	if (!req->offload)
		return;
	p->rx_on = p->rx_capa & DP_RX_CSUM;
	tx = p->tx_capa & (DP_TX_CSUM | RTE_ETH_TX_OFFLOAD_MULTI_SEGS);
	/* TSO frames are chains and need the TCP checksum filled per segment. */
	if ((p->tx_capa & RTE_ETH_TX_OFFLOAD_TCP_TSO) && (tx & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) &&
	    (tx & RTE_ETH_TX_OFFLOAD_TCP_CKSUM) && (tx & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM))
		tx |= RTE_ETH_TX_OFFLOAD_TCP_TSO;
	p->tx_on = tx;
	if (req->lro && (p->rx_capa & RTE_ETH_RX_OFFLOAD_TCP_LRO) && req->rx_room >= DP_LRO_MIN_ROOM)
		p->rx_on |= RTE_ETH_RX_OFFLOAD_TCP_LRO |
		            (p->rx_capa & RTE_ETH_RX_OFFLOAD_SCATTER);
}

static uint32_t dp_caps(const struct ipk_dpdk_port *p)
{
	uint32_t c = 0;

	if (p->rx_on & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM)
		c |= IPK_CAP_RX_CSUM_IP4;
	if (p->rx_on & (RTE_ETH_RX_OFFLOAD_TCP_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM))
		c |= IPK_CAP_RX_CSUM_L4;
	if (p->tx_on & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM)
		c |= IPK_CAP_TX_CSUM_IP4;
	/* RTE_ETH_TX_OFFLOAD_TCP_CKSUM covers both families (RTE_MBUF_F_TX_IPV4 / _IPV6
	 * on the mbuf, dpdk.c dp_tx_flags) */
	if (p->tx_on & RTE_ETH_TX_OFFLOAD_TCP_CKSUM)
		c |= IPK_CAP_TX_CSUM_TCP | IPK_CAP_TX_CSUM_TCP6;
	if (p->tx_on & RTE_ETH_TX_OFFLOAD_UDP_CKSUM)
		c |= IPK_CAP_TX_CSUM_UDP | IPK_CAP_TX_CSUM_UDP6;
	if (p->tx_on & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
		c |= IPK_CAP_SG;
	/* net_tap's TSO is librte_gso, which cuts TCP over IPv4 only (tso_sw): IPv6
	 * frames from it stay MSS-sized */
	if (p->tx_on & RTE_ETH_TX_OFFLOAD_TCP_TSO)
		c |= IPK_CAP_TSO | (p->tso_sw ? 0u : IPK_CAP_TSO6);
	if (p->rx_on & RTE_ETH_RX_OFFLOAD_TCP_LRO)
		c |= IPK_CAP_LRO;
	return c;
}

/* "name on|off|n/a" for one feature: on = enabled, off = offered but not enabled,
 * n/a = the PMD does not offer it. */
static size_t dp_feat(char *buf, size_t len, const char *name, uint64_t capa, uint64_t on,
                      uint64_t mask)
{
	const char *s = (on & mask) == mask ? "on" : (capa & mask) == mask ? "off" : "n/a";
	int n = snprintf(buf, len, " %s=%s", name, s);

	return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}

void ipk_dpdk_port_describe(const struct ipk_dpdk_port *p, char *buf, size_t len)
{
	size_t at;

	at = (size_t)snprintf(buf, len, "dpdk:%s (port %u, %s): offloads", p->name,
	                      (unsigned)p->port_id, p->driver);
	if (at >= len)
		return;
	at += dp_feat(buf + at, len - at, "rx-ip4-csum", p->rx_capa, p->rx_on,
	              RTE_ETH_RX_OFFLOAD_IPV4_CKSUM);
	at += dp_feat(buf + at, len - at, "rx-tcp-csum", p->rx_capa, p->rx_on,
	              RTE_ETH_RX_OFFLOAD_TCP_CKSUM);
	at += dp_feat(buf + at, len - at, "rx-udp-csum", p->rx_capa, p->rx_on,
	              RTE_ETH_RX_OFFLOAD_UDP_CKSUM);
	at += dp_feat(buf + at, len - at, "lro", p->rx_capa, p->rx_on, RTE_ETH_RX_OFFLOAD_TCP_LRO);
	at += dp_feat(buf + at, len - at, "tx-ip4-csum", p->tx_capa, p->tx_on,
	              RTE_ETH_TX_OFFLOAD_IPV4_CKSUM);
	at += dp_feat(buf + at, len - at, "tx-tcp-csum", p->tx_capa, p->tx_on,
	              RTE_ETH_TX_OFFLOAD_TCP_CKSUM);
	at += dp_feat(buf + at, len - at, "tx-udp-csum", p->tx_capa, p->tx_on,
	              RTE_ETH_TX_OFFLOAD_UDP_CKSUM);
	at += dp_feat(buf + at, len - at, "tso", p->tx_capa, p->tx_on, RTE_ETH_TX_OFFLOAD_TCP_TSO);
	at += dp_feat(buf + at, len - at, "multi-seg", p->tx_capa, p->tx_on,
	              RTE_ETH_TX_OFFLOAD_MULTI_SEGS);
	if (at < len && p->rss)
		snprintf(buf + at, len - at, "; queues=%u rss=port (key and %u-entry table "
		         "read back, hashes%s%s%s%s%s%s)", (unsigned)p->nqueues,
		         (unsigned)p->rss->reta_size, p->rss->fields & IPK_RSS_F_IP4 ? " ip4" : "",
		         p->rss->fields & IPK_RSS_F_TCP4 ? " tcp4" : "",
		         p->rss->fields & IPK_RSS_F_UDP4 ? " udp4" : "",
		         p->rss->fields & IPK_RSS_F_IP6 ? " ip6" : "",
		         p->rss->fields & IPK_RSS_F_TCP6 ? " tcp6" : "",
		         p->rss->fields & IPK_RSS_F_UDP6 ? " udp6" : "");
	else if (at < len)
		snprintf(buf + at, len - at, "; queues=%u rss=off (%s)", (unsigned)p->nqueues,
		         p->rss_why);
}

/* ------------------------------------------------------------------ RSS */

static uint8_t dp_rss_fields(uint64_t hf)
{
	uint8_t f = 0;

	if (hf & DP_RSS_IP4)
		f |= IPK_RSS_F_IP4;
	if (hf & RTE_ETH_RSS_NONFRAG_IPV4_TCP)
		f |= IPK_RSS_F_TCP4;
	if (hf & RTE_ETH_RSS_NONFRAG_IPV4_UDP)
		f |= IPK_RSS_F_UDP4;
	if (hf & DP_RSS_IP6)
		f |= IPK_RSS_F_IP6;
	if (hf & RTE_ETH_RSS_NONFRAG_IPV6_TCP)
		f |= IPK_RSS_F_TCP6;
	if (hf & RTE_ETH_RSS_NONFRAG_IPV6_UDP)
		f |= IPK_RSS_F_UDP6;
	return f;
}

/* Every entry names one of the port's queues and every queue is named: a queue in
 * no entry would get no flow, and its worker no active open. */
static int dp_rss_reta(const struct rte_eth_rss_reta_entry64 *reta, uint32_t n,
                       uint16_t nqueues, uint16_t *out, char *why, size_t wl)
{
	uint8_t seen[IPK_DPDK_MAX_QUEUES];
	uint32_t i;

	memset(seen, 0, sizeof(seen));
	for (i = 0; i < n; i++) {
		uint16_t q = reta[i / RTE_ETH_RETA_GROUP_SIZE].reta[i % RTE_ETH_RETA_GROUP_SIZE];

		if (q >= nqueues || q >= IPK_DPDK_MAX_QUEUES) {
			snprintf(why, wl, "table entry %u names queue %u of %u", i, q, nqueues);
			return -1;
		}
		seen[q] = 1;
		out[i] = q;
	}
	for (i = 0; i < nqueues; i++)
		if (!seen[i]) {
			snprintf(why, wl, "queue %u is in no table entry", i);
			return -1;
		}
	return 0;
}

int ipk_dpdk_rss_translate(const uint8_t *key, uint32_t key_len, uint64_t rss_hf,
                           const struct rte_eth_rss_reta_entry64 *reta, uint32_t reta_size,
                           uint16_t nqueues, struct ipk_dpdk_rss *out, char *why, size_t wl)
{
	/* the 12-byte IPv4 4-tuple slides a 32-bit window over 96 bits: 16 key bytes */
	if (!key || key_len < 16) {
		snprintf(why, wl, "key of %u bytes (IPv4 needs 16)", key ? key_len : 0);
		return -1;
	}
	if (rss_hf & DP_RSS_PARTIAL) {
		snprintf(why, wl, "the port hashes source or destination only (rss_hf 0x%llx)",
		         (unsigned long long)rss_hf);
		return -1;
	}
	out->fields = dp_rss_fields(rss_hf);
	if (key_len < IPK_RSS_KEY_LEN &&
	    (out->fields & (IPK_RSS_F_IP6 | IPK_RSS_F_TCP6 | IPK_RSS_F_UDP6))) {
		/* the 36-byte IPv6 4-tuple needs a 40-byte key: ipkit cannot follow
		 * what such a port does with IPv6, so it must not pretend to */
		snprintf(why, wl, "key of %u bytes hashes IPv6 (IPv6 needs 40)", key_len);
		return -1;
	}
	if (!(out->fields & IPK_RSS_F_TCP4)) {
		/* without ports in the hash a worker cannot choose where its answers land */
		snprintf(why, wl, "the port does not hash TCP ports over IPv4 (rss_hf 0x%llx)",
		         (unsigned long long)rss_hf);
		return -1;
	}
	if (!reta || reta_size == 0 || reta_size > IPK_DPDK_RETA_MAX) {
		snprintf(why, wl, "a %u-entry redirection table", reta ? reta_size : 0);
		return -1;
	}
	if (dp_rss_reta(reta, reta_size, nqueues, out->reta, why, wl) < 0)
		return -1;
	out->reta_size = reta_size;
	memset(out->key, 0, sizeof(out->key));
	memcpy(out->key, key, key_len < IPK_RSS_KEY_LEN ? key_len : IPK_RSS_KEY_LEN);
	return 0;
}

/* Ask for the usual table, entry i -> queue i % nqueues (what NICs start with, but
 * a PMD may start with another: 22.11's net_null keeps all zeros). A refusal is
 * fine: the read-back tells what the port uses. */
static void dp_rss_reta_set(const struct ipk_dpdk_port *p, uint32_t n)
{
	struct rte_eth_rss_reta_entry64 reta[IPK_DPDK_RETA_MAX / RTE_ETH_RETA_GROUP_SIZE];
	uint32_t i;

	memset(reta, 0, sizeof(reta));
	for (i = 0; i < n; i++) {
		reta[i / RTE_ETH_RETA_GROUP_SIZE].mask |= 1ull << (i % RTE_ETH_RETA_GROUP_SIZE);
		reta[i / RTE_ETH_RETA_GROUP_SIZE].reta[i % RTE_ETH_RETA_GROUP_SIZE] =
			(uint16_t)(i % p->nqueues);
	}
	(void)rte_eth_dev_rss_reta_update(p->port_id, reta, (uint16_t)n);
}

/* What the port applies after start (p->rss), or why not (p->rss_why). */
static void dp_rss_read(struct ipk_dpdk_port *p, const struct rte_eth_dev_info *info)
{
	struct rte_eth_rss_reta_entry64 reta[IPK_DPDK_RETA_MAX / RTE_ETH_RETA_GROUP_SIZE];
	struct rte_eth_rss_conf conf;
	uint8_t key[256];
	uint32_t n = info->reta_size, g;
	int rc;

	if (p->nqueues < 2 || !p->rss_hf) {
		snprintf(p->rss_why, sizeof(p->rss_why), p->nqueues < 2 ? "one queue" :
		         "the port offers no IPv4 RSS");
		return;
	}
	memset(&conf, 0, sizeof(conf));
	conf.rss_key = key;
	conf.rss_key_len = info->hash_key_size ? info->hash_key_size : 40;
	rc = rte_eth_dev_rss_hash_conf_get(p->port_id, &conf);
	if (rc < 0) {
		snprintf(p->rss_why, sizeof(p->rss_why), "rss_hash_conf_get: %s", rte_strerror(-rc));
		return;
	}
	if (n == 0 || n > IPK_DPDK_RETA_MAX) {
		snprintf(p->rss_why, sizeof(p->rss_why), "a %u-entry redirection table", n);
		return;
	}
	dp_rss_reta_set(p, n);
	memset(reta, 0, sizeof(reta));
	for (g = 0; g < (n + RTE_ETH_RETA_GROUP_SIZE - 1) / RTE_ETH_RETA_GROUP_SIZE; g++)
		reta[g].mask = ~0ull;
	rc = rte_eth_dev_rss_reta_query(p->port_id, reta, (uint16_t)n);
	if (rc < 0) {
		snprintf(p->rss_why, sizeof(p->rss_why), "rss_reta_query: %s", rte_strerror(-rc));
		return;
	}
	p->rss = (struct ipk_dpdk_rss *)calloc(1, sizeof(*p->rss));
	if (!p->rss) {
		snprintf(p->rss_why, sizeof(p->rss_why), "out of memory");
		return;
	}
	if (ipk_dpdk_rss_translate(key, conf.rss_key_len, conf.rss_hf, reta, n, p->nqueues,
	                           p->rss, p->rss_why, sizeof(p->rss_why)) < 0) {
		free(p->rss);
		p->rss = NULL;
	}
}


/* -------------------------------------------------------------- set-up */

static void dp_conf(struct ipk_dpdk_port *p, const struct rte_eth_dev_info *info,
                    const struct ipk_dpdk_req *req, struct rte_eth_conf *conf, uint8_t *key)
{
	memset(conf, 0, sizeof(*conf));
	conf->rxmode.offloads = p->rx_on;
	conf->txmode.offloads = p->tx_on;
	if (p->rx_on & RTE_ETH_RX_OFFLOAD_TCP_LRO)
		conf->rxmode.max_lro_pkt_size = req->rx_room < info->max_lro_pkt_size ?
		                                req->rx_room : info->max_lro_pkt_size;
	p->rss_hf = p->nqueues > 1 ? info->flow_type_rss_offloads & DP_RSS_HF : 0;
	if (p->rss_hf) {
		uint8_t klen = info->hash_key_size ? info->hash_key_size : 40;

		dp_rss_key(key, klen);
		conf->rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf->rx_adv_conf.rss_conf.rss_key = key;
		conf->rx_adv_conf.rss_conf.rss_key_len = klen;
		conf->rx_adv_conf.rss_conf.rss_hf = p->rss_hf;
	}
}

static int dp_configure(struct ipk_dpdk_port *p, const struct rte_eth_dev_info *info,
                        const struct ipk_dpdk_req *req, char *err, size_t el)
{
	struct rte_eth_conf conf;
	uint8_t key[64];
	int rc;

	dp_conf(p, info, req, &conf, key);
	/* rx interrupts give the runtime an fd to sleep on; PMDs without them refuse */
	conf.intr_conf.rxq = 1;
	rc = rte_eth_dev_configure(p->port_id, p->nqueues, p->nqueues, &conf);
	p->rxq_intr = rc == 0;
	if (rc < 0) {
		conf.intr_conf.rxq = 0;
		rc = rte_eth_dev_configure(p->port_id, p->nqueues, p->nqueues, &conf);
	}
	if (rc < 0 && (p->rx_on || p->tx_on || p->rss_hf)) {
		/* Per-feature probing happened above; a PMD that still refuses gets the plain
		 * configuration, and the core does everything in software. */
		fprintf(stderr, "dpdk:%s: configuration with offloads refused (%s); retrying "
		        "without\n", p->name, rte_strerror(-rc));
		p->rx_on = p->tx_on = 0;
		memset(&conf, 0, sizeof(conf));
		p->rss_hf = 0;
		rc = rte_eth_dev_configure(p->port_id, p->nqueues, p->nqueues, &conf);
	}
	if (rc < 0)
		return ipk_io_err(err, el, -rc, "dpdk:%s: configure failed: %s", p->name,
		                  rte_strerror(-rc));
	return 0;
}

/* The rx mempool of one queue. net_af_xdp (22.11, built with unaligned chunks) turns
 * this pool into the AF_XDP umem: it registers populated_size * object-size bytes from
 * the first object's page on, i.e. it assumes the objects lie back to back. A default
 * pool under --no-huge (4 KiB pages) keeps every object inside one page for IOVA
 * contiguity, one 2.3 KiB mbuf per 4 KiB page, so the upper ~40% of the objects lie
 * beyond the registered umem: the kernel rejects them as fill entries (silently) and
 * as tx descriptors (tx_invalid_descs), never completes them, and each such mbuf is
 * gone for good. Bulk traffic drains the pool in a few hundred KB, after which rx has
 * no buffers to refill with and nothing passes in either direction. AF_XDP copy mode
 * needs no IOVA contiguity, so pack the objects (RTE_MEMPOOL_F_NO_IOVA_CONTIG), as
 * rte_pktmbuf_pool_create_by_ops would with that flag. Other PMDs DMA into the buffers
 * and keep the default. */
#define IPK_AFXDP_RING 2048u /* 22.11's ETH_AF_XDP_DFLT_NUM_DESCS: fill and tx rings */

static struct rte_mempool *dp_rx_pool(const char *name, unsigned n, int sock, int packed)
{
	struct rte_pktmbuf_pool_private priv = { .mbuf_data_room_size = RTE_MBUF_DEFAULT_BUF_SIZE };
	struct rte_mempool *mp;

	if (!packed)
		return rte_pktmbuf_pool_create(name, n, 64, 0, RTE_MBUF_DEFAULT_BUF_SIZE, sock);
	mp = rte_mempool_create_empty(name, n, sizeof(struct rte_mbuf) + RTE_MBUF_DEFAULT_BUF_SIZE,
	                              64, sizeof(priv), sock, RTE_MEMPOOL_F_NO_IOVA_CONTIG);
	if (!mp)
		return NULL;
	if (rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), NULL) != 0)
		goto fail;
	rte_pktmbuf_pool_init(mp, &priv);
	if (rte_mempool_populate_default(mp) < 0)
		goto fail;
	rte_mempool_obj_iter(mp, rte_pktmbuf_init, NULL);
	return mp;
fail:
	rte_mempool_free(mp);
	return NULL;
}

static int dp_queues(struct ipk_dpdk_port *p, const struct rte_eth_dev_info *info,
                     const struct ipk_dpdk_req *req, char *err, size_t el)
{
	uint16_t rxd = req->rxd ? req->rxd : 1024, txd = req->txd ? req->txd : 1024, q;
	struct rte_eth_rxconf rxc = info->default_rxconf;
	struct rte_eth_txconf txc = info->default_txconf;
	int sock = rte_eth_dev_socket_id(p->port_id), rc;
	char name[RTE_MEMPOOL_NAMESIZE];
	int af_xdp = info->driver_name && strcmp(info->driver_name, "net_af_xdp") == 0;

	if (sock < 0)
		sock = (int)rte_socket_id();
	rc = rte_eth_dev_adjust_nb_rx_tx_desc(p->port_id, &rxd, &txd);
	if (rc < 0)
		return ipk_io_err(err, el, -rc, "dpdk:%s: descriptor counts rxd=%u txd=%u refused: "
		                  "%s", p->name, (unsigned)rxd, (unsigned)txd, rte_strerror(-rc));
	rxc.offloads = p->rx_on;
	txc.offloads = p->tx_on;
	for (q = 0; q < p->nqueues; q++) {
		snprintf(name, sizeof(name), "ipk_rx_%u_%u", (unsigned)p->port_id, (unsigned)q);
		/* rx ring + a burst in flight per queue; mbufs go back as soon as copied.
		 * net_af_xdp ignores rxd: it keeps 2048 mbufs in the fill ring and takes
		 * every tx frame (2048-entry ring) from this pool too. */
		p->rx_mp[q] = dp_rx_pool(name, af_xdp ? 2u * IPK_AFXDP_RING + 2u * IPK_DPDK_BURST :
		                         2u * rxd + 2u * IPK_DPDK_BURST, sock, af_xdp);
		if (!p->rx_mp[q])
			return ipk_io_err(err, el, ENOMEM, "dpdk:%s: no memory for %u rx mbufs (%s); "
			                  "give EAL more with -m MB", p->name, 2u * rxd,
			                  rte_strerror(rte_errno));
		rc = rte_eth_rx_queue_setup(p->port_id, q, rxd, (unsigned)sock, &rxc, p->rx_mp[q]);
		if (rc == 0)
			rc = rte_eth_tx_queue_setup(p->port_id, q, txd, (unsigned)sock, &txc);
		if (rc < 0)
			return ipk_io_err(err, el, -rc, "dpdk:%s: queue %u set-up failed: %s",
			                  p->name, (unsigned)q, rte_strerror(-rc));
	}
	return 0;
}

/* Device facts after start: MAC, MTU, segment limit. */
static void dp_facts(struct ipk_dpdk_port *p, const struct rte_eth_dev_info *info)
{
	struct rte_ether_addr mac;

	if (rte_eth_macaddr_get(p->port_id, &mac) == 0)
		memcpy(p->mac, mac.addr_bytes, 6);
	if (rte_eth_dev_get_mtu(p->port_id, &p->mtu) != 0 || p->mtu == 0)
		p->mtu = 1500;
	p->nb_seg_max = info->tx_desc_lim.nb_mtu_seg_max ? info->tx_desc_lim.nb_mtu_seg_max : 64;
	if (info->tx_desc_lim.nb_seg_max && info->tx_desc_lim.nb_seg_max < p->nb_seg_max)
		p->nb_seg_max = info->tx_desc_lim.nb_seg_max;
	p->tso_max = DP_TSO_MAX;
	snprintf(p->driver, sizeof(p->driver), "%s", info->driver_name ? info->driver_name : "?");
	/* 22.11's net_tap does TSO with librte_gso, which (a) checks tso_segsz plus all
	 * headers, Ethernet included, against the IP MTU and refuses a frame over it
	 * without freeing it, and (b) drops its reference to the input mbufs with a bare
	 * refcount decrement, wrong for mbufs with an external buffer (crashes in
	 * rte_pktmbuf_free_bulk). dpdk.c cuts segments under the MTU and copies TSO
	 * frames for such a port. */
	p->tso_sw = strcmp(p->driver, "net_tap") == 0;
	/* vhost-user (22.11, --no-huge): virtio_user sends the vhost process a memory table
	 * of EAL's segments by fd (a memfd each with --no-huge; hugepage files otherwise),
	 * and vhost reads transmitted frames through it. ipkit's pool is not in it, so a
	 * zero-copy frame from virtio_user points where vhost cannot look: it copies. On
	 * both ends, once the pool was registered with rte_extmem_register no frame went
	 * through at all (measured: ping 100% loss; without the registration 0%), so it
	 * is not registered there: neither PMD does DMA or needs the IOVA. */
	p->vhost_user = strcmp(p->driver, "net_vhost") == 0 ||
	                strcmp(p->driver, "net_virtio_user") == 0;
	p->tx_copy = strcmp(p->driver, "net_virtio_user") == 0;
}

static int dp_setup(struct ipk_dpdk_port *p, const struct ipk_dpdk_req *req, char *err,
                    size_t el)
{
	struct rte_eth_dev_info info;
	int rc = rte_eth_dev_info_get(p->port_id, &info);

	if (rc < 0)
		return ipk_io_err(err, el, -rc, "dpdk:%s: cannot read device info: %s", p->name,
		                  rte_strerror(-rc));
	if (req->nqueues > info.max_rx_queues || req->nqueues > info.max_tx_queues)
		return ipk_io_err(err, el, EINVAL, "dpdk:%s: too few queues: the port has %u rx "
		                  "and %u tx queues, queues=%u asked", p->name,
		                  (unsigned)info.max_rx_queues, (unsigned)info.max_tx_queues,
		                  (unsigned)req->nqueues);
	/* 22.11's net_tap passes one fd per queue in a multi-process message that holds
	 * 8 (RTE_MP_MAX_FD_NUM) and overruns its stack with more */
	if (info.driver_name && strcmp(info.driver_name, "net_tap") == 0 && req->nqueues > 8)
		return ipk_io_err(err, el, EINVAL, "dpdk:%s: too few queues: net_tap takes at most "
		                  "8 here, queues=%u asked", p->name, (unsigned)req->nqueues);
	p->nqueues = req->nqueues;
	dp_pick_offloads(p, &info, req);
	if ((rc = dp_configure(p, &info, req, err, el)) < 0 ||
	    (rc = dp_queues(p, &info, req, err, el)) < 0)
		return rc;
	rc = rte_eth_dev_start(p->port_id);
	if (rc < 0)
		return ipk_io_err(err, el, -rc, "dpdk:%s: start failed: %s", p->name,
		                  rte_strerror(-rc));
	/* vdevs such as net_tap see only their own MAC otherwise; failure is harmless */
	(void)rte_eth_promiscuous_enable(p->port_id);
	dp_facts(p, &info);
	p->caps = dp_caps(p);
	dp_rss_read(p, &info);
	return 0;
}

static void dp_free(struct ipk_dpdk_port *p)
{
	uint16_t q;

	for (q = 0; q < IPK_DPDK_MAX_QUEUES; q++)
		rte_mempool_free(p->rx_mp[q]);
	free(p->rss);
	free(p);
}

/* Stop and close; a vdev we probed is removed again (net_tap deletes its device). */
static void dp_teardown(struct ipk_dpdk_port *p)
{
	(void)rte_eth_dev_stop(p->port_id);
	(void)rte_eth_dev_close(p->port_id);
	if (p->hotplugged)
		(void)rte_eal_hotplug_remove("vdev", p->name);
	dp_free(p);
}

static int dp_new(const char *dev, const char *devargs, const struct ipk_dpdk_req *req,
                  struct ipk_dpdk_port **out, char *err, size_t el)
{
	struct ipk_dpdk_port *p;
	uint16_t id;
	int rc = dp_resolve(dev, devargs, &id, err, el);

	if (rc < 0)
		return rc;
	if (port_tab[id]) {
		*out = port_tab[id];
		return 0;
	}
	p = (struct ipk_dpdk_port *)calloc(1, sizeof(*p));
	if (!p)
		return ipk_io_err(err, el, ENOMEM, "dpdk:%s: out of memory", dev);
	p->port_id = id;
	p->hotplugged = rc;
	if (rte_eth_dev_get_name_by_port(id, p->name) != 0)
		snprintf(p->name, sizeof(p->name), "%s", dev);
	rc = dp_setup(p, req, err, el);
	if (rc < 0) {
		dp_teardown(p);
		return rc;
	}
	port_tab[id] = p;
	*out = p;
	return 0;
}

int ipk_dpdk_port_acquire(const char *dev, const char *devargs, uint16_t queue,
                          const struct ipk_dpdk_req *req, struct ipk_dpdk_port **out,
                          char *err, size_t el)
{
	struct ipk_dpdk_port *p = NULL;
	int rc;

	if (req->nqueues == 0 || req->nqueues > IPK_DPDK_MAX_QUEUES)
		return ipk_io_err(err, el, EINVAL, "dpdk:%s: queues=%u must be 1..%d", dev,
		                  (unsigned)req->nqueues, IPK_DPDK_MAX_QUEUES);
	pthread_mutex_lock(&port_lock);
	rc = dp_new(dev, devargs, req, &p, err, el);
	if (rc == 0 && queue >= p->nqueues)
		rc = ipk_io_err(err, el, EINVAL, "dpdk:%s: too few queues: queue=%u asked, the "
		                "port was started with queues=%u", dev, (unsigned)queue,
		                (unsigned)p->nqueues);
	else if (rc == 0 && (p->queue_taken & (1u << queue)))
		rc = ipk_io_err(err, el, EBUSY, "dpdk:%s: queue %u is already served in this "
		                "process", dev, (unsigned)queue);
	if (rc == 0) {
		p->queue_taken |= 1u << queue;
		p->refs++;
		*out = p;
	}
	pthread_mutex_unlock(&port_lock);
	return rc;
}

void ipk_dpdk_port_release(struct ipk_dpdk_port *p, uint16_t queue)
{
	pthread_mutex_lock(&port_lock);
	p->queue_taken &= ~(1u << queue);
	if (--p->refs == 0) {
		port_tab[p->port_id] = NULL;
		dp_teardown(p);
	}
	pthread_mutex_unlock(&port_lock);
}

#else  /* !IPK_DPDK_REAL: dpdk_stub.c stands in */
typedef int ipk_dpdk_dpdk_port_unused_;
#endif
