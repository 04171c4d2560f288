/*
 * rss.c: the Toeplitz hash NICs use for receive-side scaling (RSS), so software can
 * predict which queue a flow lands on.
 *
 * Uses: a backend without RSS steers in software by the same hash; a context that
 * serves one queue of a multi-queue NIC picks, for an active open, a local port whose
 * incoming 4-tuple hashes to its own queue (ipk_tcp_connect), so the answer comes
 * back to the context that owns the connection.
 *
 * The hash (Microsoft "RSS hashing", also the Intel 82599 datasheet §7.1.2.8): for
 * every set bit of the input, most significant bit of the first byte first, XOR into
 * the result the 32 key bits that start at that bit's position. The input for
 * IPv4/TCP and IPv4/UDP is source address, destination address, source port,
 * destination port, each as it sits in the packet (network order); for IPv6/TCP and
 * IPv6/UDP the same order with 16-byte addresses (36 bytes, which with the 32-bit
 * window needs exactly the 40-byte key).
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

void ipk_rss_key_symmetric(uint8_t key[IPK_RSS_KEY_LEN])
{
	uint32_t i;

	if (!key)
		return;
	/* A key that repeats every 16 bits has the same 32-bit window at bit k and at
	 * bit k + 16. The source address sits at input bits 0..31 and the destination
	 * at 32..63, the ports at 64..79 and 80..95: swapping source and destination
	 * therefore XORs the same windows, and hash(a->b) == hash(b->a). The same holds
	 * for IPv6 (addresses at 0..127 and 128..255, ports at 256.. and 272..: every
	 * offset a multiple of 16). (Woo and
	 * Park, "Scalable TCP Session Monitoring with Symmetric Receive-side Scaling",
	 * 2012.) */
	for (i = 0; i < IPK_RSS_KEY_LEN; i += 2) {
		key[i] = 0x6d;
		key[i + 1] = 0x5a;
	}
}

uint32_t ipk_rss_toeplitz(const uint8_t *key, uint32_t keylen, const uint8_t *in, uint32_t n)
{
	uint32_t win, h = 0, i;
	int b;

	/* The window slides one bit per input bit, so the key must hold 32 bits for the
	 * first input bit plus one more per further input bit. */
	if (!key || !in || keylen < 4 || n > keylen - 4)
		return 0;
	win = (uint32_t)key[0] << 24 | (uint32_t)key[1] << 16 | (uint32_t)key[2] << 8 | key[3];
	for (i = 0; i < n; i++) {
		/* Next key byte to shift in after this input byte (0 past the key end:
		 * those bits are never used, by the length check above). */
		uint8_t next = i + 4 < keylen ? key[i + 4] : 0;

		for (b = 7; b >= 0; b--) {
			if (in[i] & (1u << b))
				h ^= win;
			win = win << 1 | ((uint32_t)(next >> b) & 1u);
		}
	}
	return h;
}

uint32_t ipk_rss_hash_ip4(const uint8_t *key, uint32_t src_be, uint32_t dst_be,
                          uint16_t sport_be, uint16_t dport_be)
{
	uint8_t in[12];

	/* The values are already in network order: copy them as the bytes of the packet. */
	ipk_memcpy(in, &src_be, 4);
	ipk_memcpy(in + 4, &dst_be, 4);
	ipk_memcpy(in + 8, &sport_be, 2);
	ipk_memcpy(in + 10, &dport_be, 2);
	return ipk_rss_toeplitz(key, IPK_RSS_KEY_LEN, in, sizeof(in));
}

uint32_t ipk_rss_hash_frame4(const uint8_t *key, uint32_t fields, uint8_t proto, int frag,
                             uint32_t src_be, uint32_t dst_be, uint16_t sport_be,
                             uint16_t dport_be)
{
	uint8_t in[8];
	uint32_t l4 = proto == 6 ? IPK_RSS_F_TCP4 : proto == 17 ? IPK_RSS_F_UDP4 : 0;

	if (fields == 0)
		fields = IPK_RSS_F_DEFAULT;
	/* Fragments carry no ports (or only the first one): NICs hash every fragment on
	 * the addresses, which keeps a datagram's fragments on one queue. */
	if (!frag && (fields & l4))
		return ipk_rss_hash_ip4(key, src_be, dst_be, sport_be, dport_be);
	/* A TCP/UDP type the port does not hash falls back to the IPv4 type, as the
	 * Microsoft RSS rules and DPDK's RTE_ETH_RSS_IPV4 define it. */
	if (!(fields & IPK_RSS_F_IP4))
		return 0;
	ipk_memcpy(in, &src_be, 4);
	ipk_memcpy(in + 4, &dst_be, 4);
	return ipk_rss_toeplitz(key, IPK_RSS_KEY_LEN, in, sizeof(in));
}

uint32_t ipk_rss_hash_ip6(const uint8_t *key, const uint8_t src[16], const uint8_t dst[16],
                          uint16_t sport_be, uint16_t dport_be)
{
	uint8_t in[36];

	if (!src || !dst)
		return 0;
	ipk_memcpy(in, src, 16);
	ipk_memcpy(in + 16, dst, 16);
	ipk_memcpy(in + 32, &sport_be, 2);
	ipk_memcpy(in + 34, &dport_be, 2);
	return ipk_rss_toeplitz(key, IPK_RSS_KEY_LEN, in, sizeof(in));
}

uint32_t ipk_rss_hash_frame6(const uint8_t *key, uint32_t fields, uint8_t proto, int frag,
                             const uint8_t src[16], const uint8_t dst[16], uint16_t sport_be,
                             uint16_t dport_be)
{
	uint8_t in[32];
	uint32_t l4 = proto == 6 ? IPK_RSS_F_TCP6 : proto == 17 ? IPK_RSS_F_UDP6 : 0;

	if (!src || !dst)
		return 0;
	if (fields == 0)
		fields = IPK_RSS_F_DEFAULT;
	/* As for IPv4: fragments hash on the addresses (a datagram's fragments stay on
	 * one queue), and a TCP/UDP type the port does not hash falls back to the IPv6
	 * type (Microsoft "RSS hashing types": NDIS_HASH_IPV6 covers what the
	 * TCP/UDP types do not). */
	if (!frag && (fields & l4))
		return ipk_rss_hash_ip6(key, src, dst, sport_be, dport_be);
	if (!(fields & IPK_RSS_F_IP6))
		return 0;
	ipk_memcpy(in, src, 16);
	ipk_memcpy(in + 16, dst, 16);
	return ipk_rss_toeplitz(key, IPK_RSS_KEY_LEN, in, sizeof(in));
}

int ipk_rss_queue(const uint16_t *reta, uint32_t reta_size, uint32_t hash)
{
	if (!reta || reta_size == 0)
		return IPK_EINVAL;
	return reta[hash % reta_size];
}

int ipk_rss_config_valid(const struct ipk_config *cfg)
{
	uint32_t i;

	if (cfg->rss_reta_size == 0)
		return 1;
	if (!cfg->rss_reta || cfg->rss_fields > IPK_RSS_F_DEFAULT)
		return 0;
	/* A queue that appears nowhere in the table would never receive a frame, and
	 * active opens could never find a port: refuse the configuration. */
	for (i = 0; i < cfg->rss_reta_size; i++)
		if (cfg->rss_reta[i] == cfg->rss_queue)
			return 1;
	return 0;
}

int ipk_rss_port_ok(const struct ipk_ctx *ctx, uint32_t peer_be, uint16_t peer_port_be,
                    uint16_t local_port_be)
{
	const struct ipk_config *cfg = &ctx->cfg;
	uint32_t h;

	if (cfg->rss_reta_size == 0)
		return 1;
	/* The NIC hashes the segments the peer sends us: source = peer, dest = us. */
	h = ipk_rss_hash_frame4(cfg->rss_key, cfg->rss_fields, 6, 0, peer_be, cfg->ip4_be,
	                        peer_port_be, local_port_be);
	return cfg->rss_reta[h % cfg->rss_reta_size] == cfg->rss_queue;
}

int ipk_rss_port_ok6(const struct ipk_ctx *ctx, const uint8_t local[16],
                     const uint8_t peer[16], uint16_t peer_port_be, uint16_t local_port_be)
{
	const struct ipk_config *cfg = &ctx->cfg;
	uint32_t h;

	if (cfg->rss_reta_size == 0)
		return 1;
	/* The NIC hashes what the peer sends: source = peer, destination = our address
	 * the connection uses (link-local or global: they hash differently). */
	h = ipk_rss_hash_frame6(cfg->rss_key, cfg->rss_fields, 6, 0, peer, local, peer_port_be,
	                        local_port_be);
	return cfg->rss_reta[h % cfg->rss_reta_size] == cfg->rss_queue;
}

/* The IPv4 datagram at ip (len bytes from it). */
static int rss_packet4(const uint8_t *key, uint32_t fields, const uint8_t *ip, uint32_t len,
                       uint32_t *hash)
{
	uint32_t ihl, src, dst;
	uint16_t ports[2] = {0, 0};
	int frag;

	if (len < 20 || (ip[0] >> 4) != 4)
		return IPK_RSS_PKT_NONE;
	ihl = (uint32_t)(ip[0] & 0x0f) * 4u;
	if (ihl < 20 || len < ihl)
		return IPK_RSS_PKT_NONE;
	/* RFC 791: fragments (MF set or an offset) carry no ports, or only in the
	 * first one; a TCP/UDP header cut short is hashed as a fragment. */
	frag = ((ip[6] & 0x3f) | ip[7]) != 0 || len < ihl + 4;
	ipk_memcpy(&src, ip + 12, 4);
	ipk_memcpy(&dst, ip + 16, 4);
	if (!frag)
		ipk_memcpy(ports, ip + ihl, 4);
	*hash = ipk_rss_hash_frame4(key, fields, ip[9], frag, src, dst, ports[0], ports[1]);
	return IPK_RSS_PKT_HASHED;
}

/* RFC 8200 §4: hop-by-hop (0), routing (43), destination options (60) carry their
 * length in 8-octet units after the first 8. */
static int rss_ext6(uint8_t nh) { return nh == 0 || nh == 43 || nh == 60; }

/* The IPv6 packet at ip (len bytes). */
static int rss_packet6(const uint8_t *key, uint32_t fields, const uint8_t *ip, uint32_t len,
                       uint32_t *hash)
{
	uint32_t off = 40, i;
	uint16_t ports[2] = {0, 0};
	uint8_t nh;
	int frag = 0, nd = 0;

	if (len < 40 || (ip[0] >> 4) != 6)
		return IPK_RSS_PKT_NONE;
	nh = ip[6];
	for (i = 0; i < 8 && rss_ext6(nh) && len >= off + 8; i++) {
		nh = ip[off];
		off += ((uint32_t)ip[off + 1] + 1u) * 8u;
	}
	if (nh == 44 || rss_ext6(nh) || off > len || len < off + 4)
		frag = 1;
	else if (nh == 58) /* ICMPv6: type first */
		nd = ip[off] >= 133 && ip[off] <= 137;
	if (!frag)
		ipk_memcpy(ports, ip + off, 4);
	*hash = ipk_rss_hash_frame6(key, fields, nh, frag, ip + 8, ip + 24, ports[0], ports[1]);
	return nd ? IPK_RSS_PKT_ND : IPK_RSS_PKT_HASHED;
}

int ipk_rss_hash_packet(const uint8_t *key, uint32_t fields, const uint8_t *f, uint32_t len,
                        uint8_t link, uint32_t *hash)
{
	uint32_t et;

	if (!f || !hash)
		return IPK_RSS_PKT_NONE;
	if (link != IPK_LINK_ETH) /* raw IP: the version nibble says which */
		return len >= 1 && (f[0] >> 4) == 6 ? rss_packet6(key, fields, f, len, hash) :
		                                      rss_packet4(key, fields, f, len, hash);
	if (len < 14)
		return IPK_RSS_PKT_NONE;
	et = (uint32_t)f[12] << 8 | f[13];
	if (et == 0x0800)
		return rss_packet4(key, fields, f + 14, len - 14, hash);
	if (et == 0x86dd)
		return rss_packet6(key, fields, f + 14, len - 14, hash);
	return IPK_RSS_PKT_NONE;
}
