/*
 * icmp4.c: ICMP for IPv4 (RFC 792, RFC 1122 §3.2.2): echo both ways, errors we
 * send (port / protocol unreachable, reassembly time exceeded) and errors we
 * receive (passed to TCP).
 *
 * Echo requests to a broadcast address are ignored (counted as IPK_DROP_ICMP_TYPE),
 * as Linux does by default: RFC 1122 §3.2.2.6 allows it and it avoids smurf
 * amplification.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* RFC 1812 §4.3.2.3 / Linux: quote as much as fits in a 576-byte datagram. */
#define ICMP_ERR_MAX_DGRAM 576u
#define ICMP_SOURCE_QUENCH 4
#define ICMP_REDIRECT 5
#define ICMP_PARAMPROB 12

static int icmp_csum_ok(const uint8_t *p, uint32_t len)
{
	int odd = 0;

	return ipk_csum_fold(ipk_csum_add(0, p, len, &odd)) == 0;
}

static void icmp_set_csum(uint8_t *p, uint32_t len)
{
	int odd = 0;

	ipk_wr16(p + 2, 0);
	ipk_wr16(p + 2, ipk_csum_fold(ipk_csum_add(0, p, len, &odd)));
}

/* The checksum field of the ICMP message at l4 bytes from ipk_l4_off(c) of pkt
 * (the first packet holds the header), computed over the whole chain. */
static void icmp_set_csum_chain(struct ipk_ctx *c, void *pkt, uint32_t l4)
{
	uint8_t *p = ipk_pkt_data(c, pkt) + ipk_l4_off(c);
	int odd = 0;

	ipk_wr16(p + 2, 0);
	ipk_wr16(p + 2, ipk_csum_fold(ipk_csum_chain(c, pkt, ipk_l4_off(c), l4, 0, &odd)));
}

/* RFC 792: echo reply is the request with type 0, sent back from the address the
 * request was sent to. RFC 1122 §3.2.2.6: the data comes back whole, whatever its
 * size: a reassembled request larger than one buffer is answered from its chain
 * (ipk_ip4_output fragments it, with IPK_CAP_SG or by copy). Takes ownership of
 * pkt; reuses it in place. */
static void icmp_echo_reply(struct ipk_ctx *c, void *pkt, const struct ipk_rx *rx)
{
	uint32_t strip = rx->l4_off - ipk_l4_off(c);
	uint8_t *p;

	if (rx->is_bcast) {
		ipk_drop_pkt(c, pkt, IPK_DROP_ICMP_TYPE);
		return;
	}
	/* Drop any received IP options: the reply carries a plain 20-byte header. */
	ipk_pkt_adj_head(c, pkt, strip);
	p = ipk_pkt_data(c, pkt) + ipk_l4_off(c);
	p[0] = IPK_ICMP_ECHO_REPLY;
	if (ipk_pkt_chain_next(c, pkt)) {
		icmp_set_csum_chain(c, pkt, rx->l4_len);
	} else {
		ipk_pkt_set_len(c, pkt, ipk_l4_off(c) + rx->l4_len);
		icmp_set_csum(p, rx->l4_len);
	}
	c->cnt.icmp_tx++;
	ipk_ip4_output(c, pkt, rx->src_be, IPK_IPPROTO_ICMP, rx->l4_len, NULL);
}

/* An error about a datagram we sent: pass TCP's to TCP once the quote is long
 * enough to hold the ports (RFC 1122 §3.2.2: IP header + 8 bytes). */
static void icmp_error_in(struct ipk_ctx *c, const uint8_t *p, uint32_t len,
                          const struct ipk_icmp_hdr *h)
{
	const uint8_t *q = p + IPK_ICMP_HLEN;
	uint32_t qlen = len - IPK_ICMP_HLEN, ihl;

	if (qlen < IPK_IP4_HLEN || (q[0] >> 4) != 4) {
		ipk_drop(c, IPK_DROP_ICMP_MALFORMED);
		return;
	}
	ihl = (uint32_t)(q[0] & 0x0fu) * 4u;
	if (ihl < IPK_IP4_HLEN || qlen < ihl + 8u || ipk_rdbe32(q + 12) != c->cfg.ip4_be) {
		ipk_drop(c, IPK_DROP_ICMP_MALFORMED);
		return;
	}
	if (q[9] == IPK_IPPROTO_TCP)
		ipk_tcp_icmp_error(c, h->type, h->code, h->mtu, q, qlen);
}

/* Header parsed from the first packet, lengths and checksum (RFC 792) over the
 * whole message, flat or chained. */
static int icmp_rx_ok(struct ipk_ctx *c, void *pkt, const struct ipk_rx *rx, int chain,
                      struct ipk_icmp_hdr *h)
{
	uint32_t first = ipk_pkt_len(c, pkt);
	const uint8_t *p = ipk_pkt_data(c, pkt) + rx->l4_off;
	int odd = 0;

	if (first < rx->l4_off || ipk_icmp_parse(p, first - rx->l4_off, h) < 0)
		return 0;
	if (!chain)
		return first >= rx->l4_off + rx->l4_len && icmp_csum_ok(p, rx->l4_len);
	return ipk_pkt_chain_len(c, pkt) >= rx->l4_off + rx->l4_len &&
	       ipk_csum_fold(ipk_csum_chain(c, pkt, rx->l4_off, rx->l4_len, 0, &odd)) == 0;
}

/* Takes ownership of pkt: flat, or a chain when ip4.c reassembled more than one
 * buffer holds (then only echo messages are taken: errors quote 576 bytes at
 * most, RFC 1812 §4.3.2.3, and are parsed flat). */
void ipk_icmp_input(struct ipk_ctx *c, void *pkt, const struct ipk_rx *rx)
{
	struct ipk_icmp_hdr h;
	int chain = ipk_pkt_chain_next(c, pkt) != NULL;
	uint8_t *p;

	c->cnt.icmp_rx++;
	if (!icmp_rx_ok(c, pkt, rx, chain, &h)) {
		ipk_drop_pkt(c, pkt, IPK_DROP_ICMP_MALFORMED);
		return;
	}
	if (chain && h.type != IPK_ICMP_ECHO && h.type != IPK_ICMP_ECHO_REPLY) {
		ipk_drop_pkt(c, pkt, IPK_DROP_CHAIN);
		return;
	}
	p = ipk_pkt_data(c, pkt) + rx->l4_off;
	switch (h.type) {
	case IPK_ICMP_ECHO:
		icmp_echo_reply(c, pkt, rx);
		return;
	case IPK_ICMP_ECHO_REPLY:
		if (IPK_OPS(c)->icmp_echo_reply)
			IPK_OPS(c)->icmp_echo_reply(c, rx->src_be, ipk_rdbe16(p + 4),
			                            ipk_rdbe16(p + 6),
			                            rx->l4_len - IPK_ICMP_HLEN, IPK_OPQ(c));
		break;
	case IPK_ICMP_UNREACH:
	case IPK_ICMP_TIME_EXCEEDED:
		icmp_error_in(c, p, rx->l4_len, &h);
		break;
	default:
		ipk_drop(c, IPK_DROP_ICMP_TYPE);
		break;
	}
	ipk_pkt_free_chain(c, pkt);
}

int ipk_icmp_echo(struct ipk_ctx *ctx, uint32_t dst_ip4_be, uint16_t id_be, uint16_t seq_be,
                  uint32_t len, uint64_t now)
{
	uint32_t l4 = IPK_ICMP_HLEN + len, i;
	uint8_t *p;
	void *pkt;
	int rc;

	if (!ctx || dst_ip4_be == 0)
		return IPK_EINVAL;
	/* One flat packet: within the MTU and within one buffer (an MTU above the
	 * buffer, with IPK_CAP_SG and IPK_CAP_LRO, does not make a packet larger). */
	if (len > (uint32_t)ctx->cfg.mtu - IPK_IP4_HLEN - IPK_ICMP_HLEN ||
	    len > ctx->cfg.pkt_buf_size - ipk_l4_off(ctx) - IPK_ICMP_HLEN)
		return IPK_EMSGSIZE;
	now = ipk_clock(ctx, now);
	pkt = ipk_ip4_alloc(ctx);
	if (!pkt)
		return IPK_ENOBUFS;
	ipk_pkt_set_len(ctx, pkt, ipk_l4_off(ctx) + l4);
	p = ipk_pkt_data(ctx, pkt) + ipk_l4_off(ctx);
	p[0] = IPK_ICMP_ECHO;
	p[1] = 0;
	ipk_wrbe16(p + 4, id_be);
	ipk_wrbe16(p + 6, seq_be);
	for (i = 0; i < len; i++)
		p[IPK_ICMP_HLEN + i] = (uint8_t)i;
	icmp_set_csum(p, l4);
	ctx->cnt.icmp_tx++;
	rc = ipk_ip4_output(ctx, pkt, dst_ip4_be, IPK_IPPROTO_ICMP, l4, NULL);
	ipk_link_flush(ctx);
	return rc;
}

/* ------------------------------------------------------------ errors out */

static int icmp_is_error_type(uint8_t type)
{
	return type == IPK_ICMP_UNREACH || type == ICMP_SOURCE_QUENCH || type == ICMP_REDIRECT ||
	       type == IPK_ICMP_TIME_EXCEEDED || type == ICMP_PARAMPROB;
}

/* RFC 1122 §3.2.2: never an error about an ICMP error, a broadcast or multicast
 * (IP or link layer), a non-first fragment, or a source that is not one host (the
 * receive paths' source rule, internal.h ipk_ip4_src_check: no error to ourselves,
 * to a martian, or to where no route leads). The destination must be our unicast
 * address: a datagram to any other was never ours to judge. */
static int icmp_error_allowed(struct ipk_ctx *c, void *pkt, uint32_t l3_off,
                              const uint8_t *ip, uint32_t have)
{
	uint32_t ihl;
	uint8_t l2dst0 = 0;

	if (have < IPK_IP4_HLEN) /* before ip[0]: only `have` bytes were copied */
		return 0;
	ihl = (uint32_t)(ip[0] & 0x0fu) * 4u;
	if ((ip[0] >> 4) != 4 || ihl < IPK_IP4_HLEN || ihl > have)
		return 0;
	if ((ipk_rd16(ip + 6) & IPK_IP4_OFFMASK) != 0)
		return 0;
	if (ipk_ip4_src_check(c, ipk_rdbe32(ip + 12), 0) >= 0 || c->cfg.ip4_be == 0 ||
	    ipk_rdbe32(ip + 16) != c->cfg.ip4_be)
		return 0;
	if (c->cfg.link == IPK_LINK_ETH && l3_off >= IPK_ETH_HLEN &&
	    ipk_pkt_copy(c, pkt, l3_off - IPK_ETH_HLEN, &l2dst0, 1) == 1 && (l2dst0 & 1u))
		return 0;
	if (ip[9] == IPK_IPPROTO_ICMP && (have <= ihl || icmp_is_error_type(ip[ihl])))
		return 0;
	return 1;
}

/* Token bucket: IPK_ICMP_RATE_BURST errors at once, then one per IPK_ICMP_RATE_NS. */
static int icmp_rate_ok(struct ipk_ctx *c)
{
	uint64_t elapsed = c->now - c->icmp_tokens_t;

	if (c->now < c->icmp_tokens_t)
		elapsed = 0;
	if (elapsed >= IPK_ICMP_RATE_NS) {
		uint64_t add = elapsed / IPK_ICMP_RATE_NS;

		c->icmp_tokens_t += add * IPK_ICMP_RATE_NS;
		if (add >= IPK_ICMP_RATE_BURST || c->icmp_tokens + add >= IPK_ICMP_RATE_BURST) {
			c->icmp_tokens = IPK_ICMP_RATE_BURST;
			c->icmp_tokens_t = c->now;
		} else {
			c->icmp_tokens += (uint32_t)add;
		}
	}
	if (c->icmp_tokens == 0)
		return 0;
	c->icmp_tokens--;
	return 1;
}

/* pkt stays the caller's: the quote is copied out of it. */
void ipk_icmp_send_error(struct ipk_ctx *c, void *pkt, uint32_t l3_off, uint8_t type,
                         uint8_t code)
{
	uint8_t ip[IPK_IP4_HLEN + 41];
	uint32_t have, qlen, cap, l4;
	uint8_t *p;
	void *out;

	have = ipk_pkt_copy(c, pkt, l3_off, ip, sizeof(ip) - 1);
	if (!icmp_error_allowed(c, pkt, l3_off, ip, have) || !icmp_rate_ok(c))
		return;
	qlen = ipk_pkt_chain_len(c, pkt) - l3_off;
	qlen = IPK_MIN(qlen, (uint32_t)ipk_rd16(ip + 2));
	cap = IPK_MIN(ICMP_ERR_MAX_DGRAM, (uint32_t)c->cfg.mtu) - IPK_IP4_HLEN - IPK_ICMP_HLEN;
	qlen = IPK_MIN(qlen, cap);
	out = ipk_ip4_alloc_ctl(c);
	if (!out)
		return;
	l4 = IPK_ICMP_HLEN + qlen;
	ipk_pkt_set_len(c, out, ipk_l4_off(c) + l4);
	p = ipk_pkt_data(c, out) + ipk_l4_off(c);
	ipk_memset(p, 0, IPK_ICMP_HLEN);
	p[0] = type;
	p[1] = code;
	ipk_pkt_copy(c, pkt, l3_off, p + IPK_ICMP_HLEN, qlen);
	icmp_set_csum(p, l4);
	c->cnt.icmp_tx++;
	ipk_ip4_output(c, out, ipk_rdbe32(ip + 12), IPK_IPPROTO_ICMP, l4, NULL);
}
