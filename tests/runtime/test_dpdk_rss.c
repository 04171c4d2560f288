/*
 * io/dpdk/dpdk_port.c ipk_dpdk_rss_translate: what a port reports after configuration
 * (rte_eth_dev_rss_hash_conf_get, rte_eth_dev_rss_reta_query) turned into the core's
 * RSS (key, redirection table, hash fields), with the values real NICs report:
 *   ixgbe (82599): 40-byte key, the Microsoft verification key by default, 128-entry
 *     table; hash types IPv4, IPv4/TCP, IPv4/UDP;
 *   i40e (X710): 52-byte key, 512-entry table.
 * Then the hash the core computes with the result must name the queue the NIC's
 * table gives for the published verification vector (Microsoft "Verifying the RSS
 * Hash Calculation": 66.9.149.187:2794 -> 161.142.100.80:1766, hash 0x51ccc178).
 * And what the core cannot model is refused with a reason (the runtime then falls
 * back to software steering): a short key, source- or destination-only hashing, no
 * TCP ports in the hash, a table naming a queue the port lacks or leaving one out.
 * net_null (22.11) is the one vdev here that answers both reads; the interop test
 * test_dpdk_rss.py runs it, this test covers the NIC values no vdev here reports.
 */
#include "dpdk_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef IPK_DPDK_REAL
#include "check.h"

static const uint8_t ms_key[40] = {
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
	0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
	0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
};

#define HF_NIC (RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_NONFRAG_IPV4_TCP | RTE_ETH_RSS_NONFRAG_IPV4_UDP)

static struct rte_eth_rss_reta_entry64 reta[IPK_DPDK_RETA_MAX / RTE_ETH_RETA_GROUP_SIZE];
static struct ipk_dpdk_rss out;
static char why[160];

/* A table as the query returns it: entry i -> f(i), in 64-entry groups. */
static void fill(uint32_t n, uint16_t nq, uint16_t shift)
{
	uint32_t i;

	memset(reta, 0, sizeof(reta));
	for (i = 0; i < n; i++)
		reta[i / 64].reta[i % 64] = (uint16_t)((i + shift) % nq);
}

static uint32_t vec_hash(const uint8_t *key)
{
	return ipk_rss_hash_frame4(key, out.fields, 6, 0, IPK_IP4(66, 9, 149, 187),
	                           IPK_IP4(161, 142, 100, 80), ipk_htons(2794), ipk_htons(1766));
}

static void test_ixgbe_default_key_128_entries(void)
{
	fill(128, 2, 0);
	CHECK_EQ(ipk_dpdk_rss_translate(ms_key, 40, HF_NIC, reta, 128, 2, &out, why, sizeof(why)),
	         0);
	CHECK(memcmp(out.key, ms_key, 40) == 0);
	CHECK_EQ(out.reta_size, 128);
	CHECK_EQ(out.fields, IPK_RSS_F_IP4 | IPK_RSS_F_TCP4 | IPK_RSS_F_UDP4);
	CHECK_EQ(vec_hash(out.key), 0x51ccc178u);
	/* 0x51ccc178 % 128 = 120, entry 120 -> queue 0 */
	CHECK_EQ(ipk_rss_queue(out.reta, out.reta_size, vec_hash(out.key)), 0);
}

static void test_i40e_52_byte_key_512_entries(void)
{
	uint8_t key52[52];
	uint32_t i;

	/* the Microsoft key followed by 12 more bytes: IPv4 uses the first 16 only */
	memcpy(key52, ms_key, 40);
	for (i = 40; i < 52; i++)
		key52[i] = (uint8_t)(0xa5 ^ i);
	fill(512, 4, 1); /* a table the driver rotated: entry i -> (i + 1) % 4 */
	CHECK_EQ(ipk_dpdk_rss_translate(key52, 52, HF_NIC | RTE_ETH_RSS_FRAG_IPV4, reta, 512, 4,
	                                &out, why, sizeof(why)), 0);
	CHECK_EQ(out.reta_size, 512);
	CHECK_EQ(out.reta[0], 1);
	CHECK_EQ(out.reta[511], 0);
	CHECK_EQ(out.reta[300], 1);
	/* 0x51ccc178 % 512 = 376 -> (376 + 1) % 4 = 1 */
	CHECK_EQ(ipk_rss_queue(out.reta, out.reta_size, vec_hash(out.key)), 1);
}

static void test_tcp_only_port_hashes_udp_on_nothing(void)
{
	fill(128, 2, 0);
	CHECK_EQ(ipk_dpdk_rss_translate(ms_key, 40, RTE_ETH_RSS_NONFRAG_IPV4_TCP, reta, 128, 2,
	                                &out, why, sizeof(why)), 0);
	CHECK_EQ(out.fields, IPK_RSS_F_TCP4);
}

#define HF_NIC6 (HF_NIC | RTE_ETH_RSS_IPV6 | RTE_ETH_RSS_NONFRAG_IPV6_TCP | \
                 RTE_ETH_RSS_NONFRAG_IPV6_UDP)

/* A port hashing IPv6 too: the fields say so and the hash of the Microsoft IPv6
 * vector (3ffe:2501:200:1fff::7 :2794 -> 3ffe:2501:200:3::1 :1766, IPv6 with TCP)
 * is the published one; a fragment-only IPv6 type counts as the address hash. */
static void test_port_hashing_ip6_reports_ip6_fields(void)
{
	static const uint8_t s6[16] = {0x3f, 0xfe, 0x25, 0x01, 0x02, 0x00, 0x1f, 0xff, 0, 0, 0,
	                               0, 0, 0, 0, 7};
	static const uint8_t d6[16] = {0x3f, 0xfe, 0x25, 0x01, 0x02, 0x00, 0x00, 0x03, 0, 0, 0,
	                               0, 0, 0, 0, 1};

	fill(128, 2, 0);
	CHECK_EQ(ipk_dpdk_rss_translate(ms_key, 40, HF_NIC6, reta, 128, 2, &out, why, sizeof(why)),
	         0);
	CHECK_EQ(out.fields, IPK_RSS_F_DEFAULT);
	CHECK_EQ(ipk_rss_hash_frame6(out.key, out.fields, 6, 0, s6, d6, ipk_htons(2794),
	                             ipk_htons(1766)),
	         0x40207d3du);
	CHECK_EQ(ipk_dpdk_rss_translate(ms_key, 40, HF_NIC | RTE_ETH_RSS_FRAG_IPV6, reta, 128, 2,
	                                &out, why, sizeof(why)), 0);
	CHECK_EQ(out.fields, IPK_RSS_F_IP4 | IPK_RSS_F_TCP4 | IPK_RSS_F_UDP4 | IPK_RSS_F_IP6);
	/* IPv4 needs 16 key bytes, IPv6 40: a short key that hashes IPv6 is refused */
	CHECK_EQ(ipk_dpdk_rss_translate(ms_key, 16, HF_NIC, reta, 128, 2, &out, why, sizeof(why)),
	         0);
	CHECK_EQ(ipk_dpdk_rss_translate(ms_key, 16, HF_NIC6, reta, 128, 2, &out, why, sizeof(why)),
	         -1);
	CHECK(strstr(why, "IPv6 needs 40") != NULL);
}

static void test_refusals_say_why(void)
{
	fill(128, 2, 0);
	CHECK_EQ(ipk_dpdk_rss_translate(ms_key, 8, HF_NIC, reta, 128, 2, &out, why, sizeof(why)),
	         -1);
	CHECK(strstr(why, "key of 8 bytes") != NULL);
	CHECK_EQ(ipk_dpdk_rss_translate(ms_key, 40, HF_NIC | RTE_ETH_RSS_L3_SRC_ONLY, reta, 128,
	                                2, &out, why, sizeof(why)), -1);
	CHECK(strstr(why, "source or destination only") != NULL);
	CHECK_EQ(ipk_dpdk_rss_translate(ms_key, 40, RTE_ETH_RSS_IPV4, reta, 128, 2, &out, why,
	                                sizeof(why)), -1);
	CHECK(strstr(why, "TCP ports") != NULL);
	CHECK_EQ(ipk_dpdk_rss_translate(ms_key, 40, HF_NIC, reta, 0, 2, &out, why, sizeof(why)),
	         -1);
	CHECK_EQ(ipk_dpdk_rss_translate(ms_key, 40, HF_NIC, reta, IPK_DPDK_RETA_MAX + 64, 2, &out,
	                                why, sizeof(why)), -1);
	/* a table over 4 queues on a 2-queue port */
	fill(128, 4, 0);
	CHECK_EQ(ipk_dpdk_rss_translate(ms_key, 40, HF_NIC, reta, 128, 2, &out, why, sizeof(why)),
	         -1);
	CHECK(strstr(why, "names queue 2 of 2") != NULL);
	/* net_null's table before anyone sets it: all zeros, queue 1 never gets a flow */
	fill(128, 1, 0);
	CHECK_EQ(ipk_dpdk_rss_translate(ms_key, 40, HF_NIC, reta, 128, 2, &out, why, sizeof(why)),
	         -1);
	CHECK(strstr(why, "queue 1 is in no table entry") != NULL);
}

int main(void)
{
	RUN(test_ixgbe_default_key_128_entries);
	RUN(test_i40e_52_byte_key_512_entries);
	RUN(test_tcp_only_port_hashes_udp_on_nothing);
	RUN(test_port_hashing_ip6_reports_ip6_fields);
	RUN(test_refusals_say_why);
	return check_summary();
}

#else /* a cross build of this test (portability gate): no DPDK for the target */
int main(void)
{
	puts("test_dpdk_rss: no DPDK headers for this target, nothing to test");
	return 0;
}
#endif
