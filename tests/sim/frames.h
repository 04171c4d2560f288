/* Hand-built frames for the simulator tests (independent of the core's wire layer). */
#ifndef IPKIT_TEST_SIM_FRAMES_H
#define IPKIT_TEST_SIM_FRAMES_H

#include <stdint.h>
#include <string.h>

#include "sim.h"

static inline void tf_wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static inline void tf_wr32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}
static inline uint16_t tf_rd16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t tf_rd32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Ethernet header (14 bytes) for IPv4 or ARP. */
static inline uint32_t tf_eth(uint8_t *f, const uint8_t dst[6], const uint8_t src[6],
                              uint16_t type)
{
	memcpy(f, dst, 6);
	memcpy(f + 6, src, 6);
	tf_wr16(f + 12, type);
	return 14;
}

/* IPv4 header (20 bytes, checksum filled). src/dst host order a.b.c.d. */
static inline void tf_ip4(uint8_t *ip, uint32_t src, uint32_t dst, uint8_t proto,
                          uint16_t tot_len, uint16_t id, uint16_t frag)
{
	memset(ip, 0, 20);
	ip[0] = 0x45;
	tf_wr16(ip + 2, tot_len);
	tf_wr16(ip + 4, id);
	tf_wr16(ip + 6, frag);
	ip[8] = 64;
	ip[9] = proto;
	tf_wr32(ip + 12, src);
	tf_wr32(ip + 16, dst);
	tf_wr16(ip + 10, sim_csum_fold(sim_csum_add(0, ip, 20)));
}

/* Checksum of an L4 segment behind a 20-byte IPv4 header at ip. */
static inline uint16_t tf_l4_csum(const uint8_t *ip, uint32_t l4len)
{
	uint32_t s = sim_csum_add(0, ip + 12, 8) + ip[9] + l4len;
	return sim_csum_fold(sim_csum_add(s, ip + 20, l4len));
}

/* Folded, non-complemented pseudo-header sum (what an engine leaves for offload). */
static inline uint16_t tf_pseudo_fold(const uint8_t *ip, uint32_t l4len)
{
	uint32_t s = sim_csum_add(0, ip + 12, 8) + ip[9] + l4len;
	return (uint16_t)~sim_csum_fold(s);
}

#endif
