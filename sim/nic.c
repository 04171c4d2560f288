/*
 * The NIC model: what hardware with transmit checksum offload, TSO and receive
 * checksum verification does to frames. It is written independently of the core's
 * wire layer on purpose, so a mistake in one shows up as a checksum drop in the
 * other instead of cancelling out.
 */
#include "sim.h"

#include <string.h>

#define TCP_FIN 0x01
#define TCP_PSH 0x08
#define TCP_CWR 0x80

static uint16_t rd16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static uint32_t rd32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static void wr32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* RFC 1071: 16-bit big-endian words, an odd last byte padded with zero. */
uint32_t sim_csum_add(uint32_t sum, const uint8_t *p, uint32_t len)
{
	uint64_t acc = sum;
	uint32_t i;

	for (i = 0; i + 1 < len; i += 2)
		acc += (uint32_t)rd16(p + i);
	if (len & 1)
		acc += (uint32_t)p[len - 1] << 8;
	while (acc >> 32)
		acc = (acc & 0xffffffffu) + (acc >> 32);
	return (uint32_t)acc;
}

uint16_t sim_csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffffu) + (sum >> 16);
	return (uint16_t)~sum;
}

/* RFC 9293 §3.1 / RFC 768 pseudo-header: addresses, zero, protocol, L4 length. */
static uint32_t pseudo(const uint8_t *ip, uint8_t proto, uint32_t l4len)
{
	uint32_t s = sim_csum_add(0, ip + 12, 8);

	return s + proto + l4len;
}

static void ip_csum_fill(uint8_t *ip, uint32_t ihl)
{
	wr16(ip + 10, 0);
	wr16(ip + 10, sim_csum_fold(sim_csum_add(0, ip, ihl)));
}

/* TCP/UDP checksum from scratch (field zeroed first). */
static void l4_csum_fill(uint8_t *ip, uint32_t ihl, uint32_t l4len, uint8_t proto)
{
	uint8_t *l4 = ip + ihl;
	uint32_t at = proto == 6 ? 16 : 6;
	uint16_t v;

	wr16(l4 + at, 0);
	v = sim_csum_fold(sim_csum_add(pseudo(ip, proto, l4len), l4, l4len));
	if (proto == 17 && v == 0)
		v = 0xffff; /* RFC 768: 0 means "no checksum" */
	wr16(l4 + at, v);
}

/* Checksum offload as hardware does it: the engine left the folded pseudo-header
 * sum in the field; the NIC sums the whole L4 segment over it and complements. */
static void l4_csum_offload(uint8_t *l4, uint32_t l4len, uint32_t at, int udp)
{
	uint16_t v = sim_csum_fold(sim_csum_add(0, l4, l4len));

	if (udp && v == 0)
		v = 0xffff;
	wr16(l4 + at, v);
}

/* The IPv4 packet inside a frame: returns its total length, 0 if the marks or
 * headers are inconsistent. */
static uint32_t ip_len(const uint8_t *f, uint32_t len, const struct ipk_tx_meta *m)
{
	const uint8_t *ip = f + m->l2_len;
	uint32_t tot;

	if (m->l3_len < 20 || (uint32_t)m->l2_len + m->l3_len > len)
		return 0;
	if ((ip[0] >> 4) != 4 || (uint32_t)(ip[0] & 15) * 4 != m->l3_len)
		return 0;
	tot = rd16(ip + 2);
	if (tot < m->l3_len || tot > len - m->l2_len)
		return 0;
	return tot;
}

static int tx_csum(uint8_t *f, uint32_t len, const struct ipk_tx_meta *m,
                   struct sim_port_stats *st)
{
	uint8_t *ip = f + m->l2_len;
	uint32_t tot = ip_len(f, len, m), l4len;

	if (tot == 0)
		return -1;
	l4len = tot - m->l3_len;
	if ((m->flags & IPK_TXOFF_TCP_CSUM) && (ip[9] != 6 || l4len < 20))
		return -1;
	if ((m->flags & IPK_TXOFF_UDP_CSUM) && (ip[9] != 17 || l4len < 8))
		return -1;
	if (m->flags & IPK_TXOFF_TCP_CSUM) {
		l4_csum_offload(ip + m->l3_len, l4len, 16, 0);
		st->tx_csum_filled++;
	}
	if (m->flags & IPK_TXOFF_UDP_CSUM) {
		l4_csum_offload(ip + m->l3_len, l4len, 6, 1);
		st->tx_csum_filled++;
	}
	if (m->flags & IPK_TXOFF_IP4_CSUM) {
		ip_csum_fill(ip, m->l3_len);
		st->tx_csum_filled++;
	}
	return 0;
}

/* One TSO segment: headers copied from the super-frame, then fixed up the way
 * RFC 7414-era NICs (and Linux GSO) do: IP length/ID/checksum, TCP sequence,
 * FIN/PSH only on the last segment, CWR only on the first, full TCP checksum. */
static uint32_t tso_seg(uint8_t *out, const uint8_t *f, const struct ipk_tx_meta *m,
                        uint32_t hdrs, uint32_t off, uint32_t plen, int first, int last,
                        uint32_t idx)
{
	uint8_t *ip = out + m->l2_len, *tcp = ip + m->l3_len;

	memcpy(out, f, hdrs);
	memcpy(out + hdrs, f + hdrs + off, plen);
	wr16(ip + 2, (uint16_t)(m->l3_len + m->l4_len + plen));
	wr16(ip + 4, (uint16_t)(rd16(ip + 4) + idx));
	ip_csum_fill(ip, m->l3_len);
	wr32(tcp + 4, rd32(tcp + 4) + off);
	if (!last)
		tcp[13] &= (uint8_t)~(TCP_FIN | TCP_PSH);
	if (!first)
		tcp[13] &= (uint8_t)~TCP_CWR;
	l4_csum_fill(ip, m->l3_len, m->l4_len + plen, 6);
	return hdrs + plen;
}

static int tx_tso(uint8_t *f, uint32_t len, const struct ipk_tx_meta *m, uint8_t *scratch,
                  uint32_t scratch_size,
                  void (*emit)(const uint8_t *, uint32_t, void *), void *arg,
                  struct sim_port_stats *st)
{
	uint32_t tot = ip_len(f, len, m), hdrs, payload, off, n = 0;
	const uint8_t *tcp;

	if (tot == 0 || f[m->l2_len + 9] != 6 || m->l4_len < 20 || m->mss == 0 ||
	    (uint32_t)m->l3_len + m->l4_len > tot)
		return -1;
	tcp = f + m->l2_len + m->l3_len;
	if ((uint32_t)(tcp[12] >> 4) * 4 != m->l4_len)
		return -1;
	hdrs = m->l2_len + m->l3_len + m->l4_len;
	payload = tot - m->l3_len - m->l4_len;
	if (hdrs + m->mss > scratch_size)
		return -1;
	st->tx_tso_frames++;
	for (off = 0; off < payload || (payload == 0 && n == 0); off += m->mss) {
		uint32_t plen = payload - off < m->mss ? payload - off : m->mss;
		uint32_t flen = tso_seg(scratch, f, m, hdrs, off, plen, off == 0,
		                        off + plen >= payload, n);
		emit(scratch, flen, arg);
		st->tx_tso_segs++;
		n++;
	}
	return (int)n;
}

/* ---- IPv6 (IPK_TXOFF_IP6, issue 19): the same jobs over a 40-byte header with
 * no extension header, as NICs that advertise TSO6 / IPv6 checksum do. */

/* RFC 8200 §8.1 pseudo-header: addresses, 32-bit upper-layer length, next header. */
static uint32_t pseudo6(const uint8_t *ip, uint8_t proto, uint32_t l4len)
{
	return sim_csum_add(0, ip + 8, 32) + (l4len >> 16) + (l4len & 0xffffu) + proto;
}

/* The IPv6 TCP packet inside a frame: its payload length, or -1 if the marks or
 * the header are inconsistent (TCP straight after the fixed header). */
static int32_t ip6_tcp_plen(const uint8_t *f, uint32_t len, const struct ipk_tx_meta *m)
{
	const uint8_t *ip = f + m->l2_len;
	uint32_t plen;

	if (m->l3_len != 40 || (uint32_t)m->l2_len + 40u > len || (ip[0] >> 4) != 6 || ip[6] != 6)
		return -1;
	plen = rd16(ip + 4);
	if (plen < 20 || plen > len - m->l2_len - 40u)
		return -1;
	return (int32_t)plen;
}

static int tx_csum6(uint8_t *f, uint32_t len, const struct ipk_tx_meta *m,
                    struct sim_port_stats *st)
{
	int32_t plen = ip6_tcp_plen(f, len, m);

	if (plen < 0 || (m->flags & (IPK_TXOFF_IP4_CSUM | IPK_TXOFF_UDP_CSUM)))
		return -1;
	if (m->flags & IPK_TXOFF_TCP_CSUM) {
		l4_csum_offload(f + m->l2_len + 40, (uint32_t)plen, 16, 0);
		st->tx_csum_filled++;
	}
	return 0;
}

/* One IPv6 TSO segment: headers copied, Payload Length and sequence fixed, FIN/PSH
 * on the last only, CWR on the first only, the TCP checksum in full. */
static uint32_t tso6_seg(uint8_t *out, const uint8_t *f, const struct ipk_tx_meta *m,
                         uint32_t hdrs, uint32_t off, uint32_t plen, int first, int last)
{
	uint8_t *ip = out + m->l2_len, *tcp = ip + 40;
	uint32_t l4len = m->l4_len + plen;

	memcpy(out, f, hdrs);
	memcpy(out + hdrs, f + hdrs + off, plen);
	wr16(ip + 4, (uint16_t)l4len);
	wr32(tcp + 4, rd32(tcp + 4) + off);
	if (!last)
		tcp[13] &= (uint8_t)~(TCP_FIN | TCP_PSH);
	if (!first)
		tcp[13] &= (uint8_t)~TCP_CWR;
	wr16(tcp + 16, 0);
	wr16(tcp + 16, sim_csum_fold(sim_csum_add(pseudo6(ip, 6, l4len), tcp, l4len)));
	return hdrs + plen;
}

static int tx_tso6(uint8_t *f, uint32_t len, const struct ipk_tx_meta *m, uint8_t *scratch,
                   uint32_t scratch_size,
                   void (*emit)(const uint8_t *, uint32_t, void *), void *arg,
                   struct sim_port_stats *st)
{
	int32_t l4 = ip6_tcp_plen(f, len, m);
	uint32_t hdrs, payload, off, n = 0;

	if (l4 < 0 || m->l4_len < 20 || m->mss == 0 || m->l4_len > (uint32_t)l4 ||
	    (uint32_t)(f[m->l2_len + 40 + 12] >> 4) * 4 != m->l4_len)
		return -1;
	hdrs = m->l2_len + 40u + m->l4_len;
	payload = (uint32_t)l4 - m->l4_len;
	if (hdrs + m->mss > scratch_size)
		return -1;
	st->tx_tso_frames++;
	for (off = 0; off < payload || (payload == 0 && n == 0); off += m->mss) {
		uint32_t plen = payload - off < m->mss ? payload - off : m->mss;

		emit(scratch, tso6_seg(scratch, f, m, hdrs, off, plen, off == 0, off + plen >= payload),
		     arg);
		st->tx_tso_segs++;
		n++;
	}
	return (int)n;
}

int sim_nic_tx(uint8_t *frame, uint32_t len, const struct ipk_tx_meta *meta,
               uint8_t *scratch, uint32_t scratch_size,
               void (*emit)(const uint8_t *f, uint32_t len, void *arg), void *arg,
               struct sim_port_stats *st)
{
	if ((meta->flags & (IPK_TXOFF_TSO | IPK_TXOFF_IP6)) == (IPK_TXOFF_TSO | IPK_TXOFF_IP6))
		return tx_tso6(frame, len, meta, scratch, scratch_size, emit, arg, st);
	if (meta->flags & IPK_TXOFF_TSO)
		return tx_tso(frame, len, meta, scratch, scratch_size, emit, arg, st);
	if ((meta->flags & IPK_TXOFF_IP6) ? tx_csum6(frame, len, meta, st) < 0 :
	    tx_csum(frame, len, meta, st) < 0)
		return -1;
	emit(frame, len, arg);
	return 1;
}

static uint32_t rx_l4(const uint8_t *ip, uint32_t ihl, uint32_t tot)
{
	uint32_t l4len = tot - ihl;
	uint8_t proto = ip[9];

	if (rd16(ip + 6) & 0x3fff)
		return 0; /* a fragment: the L4 checksum covers the whole datagram */
	if (proto == 6 && l4len >= 20)
		;
	else if (proto == 17 && l4len >= 8 && rd16(ip + ihl + 6) != 0)
		;
	else
		return 0;
	return sim_csum_fold(sim_csum_add(pseudo(ip, proto, l4len), ip + ihl, l4len)) == 0
	               ? IPK_RXCSUM_L4_GOOD
	               : IPK_RXCSUM_L4_BAD;
}

/* IPv6 receive: TCP or UDP straight after the fixed header (a NIC that does not
 * walk extension headers reports nothing for the rest). */
static uint32_t rx_csum6(const uint8_t *ip, uint32_t avail, uint32_t caps)
{
	uint32_t plen;
	uint8_t proto = ip[6];

	if (!(caps & IPK_CAP_RX_CSUM_L4) || avail < 40 || (ip[0] >> 4) != 6)
		return 0;
	plen = rd16(ip + 4);
	if (plen > avail - 40 || !((proto == 6 && plen >= 20) || (proto == 17 && plen >= 8)))
		return 0;
	return sim_csum_fold(sim_csum_add(pseudo6(ip, proto, plen), ip + 40, plen)) == 0
	               ? IPK_RXCSUM_L4_GOOD
	               : IPK_RXCSUM_L4_BAD;
}

uint32_t sim_nic_rx_csum(const uint8_t *f, uint32_t len, uint32_t l2_len, uint32_t caps)
{
	const uint8_t *ip = f + l2_len;
	uint32_t ihl, tot, r = 0;

	if (l2_len == 14 && len >= 14 && rd16(f + 12) == 0x86dd)
		return rx_csum6(ip, len - 14, caps);
	if (len < l2_len + 20 || (l2_len == 14 && rd16(f + 12) != 0x0800))
		return 0;
	ihl = (uint32_t)(ip[0] & 15) * 4;
	tot = rd16(ip + 2);
	if ((ip[0] >> 4) != 4 || ihl < 20 || tot < ihl || tot > len - l2_len)
		return 0;
	if (caps & IPK_CAP_RX_CSUM_IP4)
		r |= sim_csum_fold(sim_csum_add(0, ip, ihl)) == 0 ? IPK_RXCSUM_IP4_GOOD
		                                                  : IPK_RXCSUM_IP4_BAD;
	if (caps & IPK_CAP_RX_CSUM_L4)
		r |= rx_l4(ip, ihl, tot);
	return r;
}
