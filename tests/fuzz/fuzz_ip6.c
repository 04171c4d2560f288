/*
 * libFuzzer target: IPv6 into a live context (issue 19's core/ip6.c, frag6.c, nd.c,
 * mld.c, tcp6.c). One context with IPv6 on (link-local + 2001:db8::1/64, DAD done),
 * a UDP bind on port 53 and one TCP connection to [2001:db8::2]:80 opened by a real
 * exchange (NS/NA, SYN, SYN-ACK), snapshotted once, reset by memory copy. The input:
 *
 *   header: 2 bytes, T (& 0x3fff): the UDP lengths the fragmented datagrams of
 *           identification 0..3 declare are T + 8, T + 1008, T / 2 + 8 and 1400
 *   op:     a byte, op % 8 picks, then per op:
 *     0 time passes: next byte * 100 ms, or with op bit 7 next byte * 4 s
 *     1 a fragment of UDP datagram id (flags byte: bits 0-1 id, bit 2 M, bit 3 a
 *       second source address, bit 4 "last": length to the declared end, M clear,
 *       bit 5 a hop-by-hop header before the fragment header, bit 6 offset * 256
 *       instead of * 8), offset byte, length byte (* 16, + 1 with an odd low bit)
 *     2 a Neighbor Discovery message: kind (% 5: RS RA NS NA Redirect), addresses
 *       byte (bits 0-1 source: peer's link-local, peer's global, router fe80::1, ::;
 *       bits 2-3 destination: our link-local, our global, ff02::1, our solicited-node;
 *       bit 4 hop limit 254; bits 5-7 flags), target byte (peer, router, ours,
 *       2001:db8::N for N = the next byte), then up to 3 options (type byte, then
 *       per type: LLA a MAC byte, prefix flags / prefix / lifetimes, MTU 2 bytes,
 *       anything else a length byte and that many 8-byte units of input)
 *     3 an MLD query: version / flags byte, group byte, 2 bytes max response, for v2
 *       the S/QRV and QQIC bytes and up to 3 sources
 *     4 an ICMPv6 error (type % 4 + 1, code, 2 bytes of MTU / pointer) quoting a
 *       segment of the live connection (sequence near snd_una) or a UDP datagram of
 *       ours, cut to a length byte
 *     5 a raw datagram: next header, hop limit, destination selector, length, that
 *       many input bytes as the payload (extension headers and all); the upper
 *       layer's checksum is fixed when the walk finds one
 *     6 the application: UDP to the peer or to 2001:db8::N, a TCP write, an echo
 *       request (ND resolution and the frames queued on it)
 *     7 the peer ACKs the connection's data (and sends some)
 *
 * Invariants, after every op: pool counters in range; every neighbour entry's queue
 * holds qlen <= IPK_ND_QLEN pbs, a free entry none; every reassembly slot's pieces
 * sorted, disjoint, their count npieces <= IPK_REASM6_PIECES and bytes `have`; the
 * connection's sequence numbers ordered and its MSS within the IPv6 floor and the
 * negotiated value. Every datagram delivered to port 53 has a declared length and
 * the byte pattern of its offsets. Every frame sent parses as IPv6 from one of our
 * addresses (or :: for DAD and MLD), walks, checksums (fragments: offsets and
 * lengths legal), goes to the group MAC of a multicast destination, ND with hop
 * limit 255 passing ipk_nd_check, and no ICMPv6 error answers an ICMPv6 error. At
 * the end, the connection aborted and time run past every timer (reassembly 60 s,
 * ND retransmits), every packet and pb is back and the connection is free.
 */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz_host.h"
#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

#define WHO "fuzz_ip6"
#define MAX_OPS 48
#define UDP_PORT 53
#define UDP_SPORT 5353
#define TCP_LPORT 40000
#define TCP_PPORT 80
#define PEER_ISS 7000000u
#define FRAG_ID_BASE 0x51000u
#define SEC 1000000000ull

static const uint8_t ip_us_g[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
static const uint8_t ip_peer_g[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
static const uint8_t ip_peer2_g[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3};
static const uint8_t ip_peer_ll[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
static const uint8_t ip_router_ll[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
static const uint8_t ip_all_nodes[16] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
static const uint8_t ip_zero[16];
static const uint8_t mac_router[6] = {2, 0, 0, 0, 0, 0x11};

static struct {
	struct fz_host h;
	int ok;
	uint8_t us_ll[16];
	struct ipk_conn *c;
	uint32_t iss;
	uint32_t mss0;      /* the connection's MSS after the handshake */
	uint32_t peer_nxt;  /* the peer's next sequence number */
	uint32_t total[4];  /* declared UDP length per identification */
	uint16_t csum[8];   /* UDP checksum per identification and source */
	uint32_t csum_ok;
	uint32_t recved;
	int setup_phase;
	uint32_t syn_seq;
	int syn_seen;
	uint8_t udp[65536];
} F;

static void need(int ok, const char *what)
{
	if (!ok)
		fz_fail(WHO, what);
}

static uint8_t pattern(uint32_t i) { return (uint8_t)((i * 29u + (i >> 8)) ^ 0xa5); }

struct rd {
	const uint8_t *p;
	size_t n, at;
};
static uint8_t rd8(struct rd *r) { return r->at < r->n ? r->p[r->at++] : 0; }
static uint16_t rd16(struct rd *r)
{
	uint16_t v = (uint16_t)(rd8(r) << 8);
	return (uint16_t)(v | rd8(r));
}

/* ------------------------------------------------------------ frames in */

/* Ethernet (peer's MAC, or the router's for a router source) + IPv6 header; returns
 * 54, the payload's offset. */
static uint32_t eth_ip6(uint8_t *f, const uint8_t src[16], const uint8_t dst[16], uint8_t next,
                        uint32_t plen, uint8_t hlim)
{
	struct ipk_ip6_hdr h;

	if (ipk_ip6_is_multicast(dst))
		ipk_ip6_mcast_mac(f, dst);
	else
		memcpy(f, fz_mac_us, 6);
	memcpy(f + 6, memcmp(src, ip_router_ll, 16) == 0 ? mac_router : fz_mac_peer, 6);
	ipk_wr16(f + 12, IPK_ETHERTYPE_IP6);
	memset(&h, 0, sizeof(h));
	h.plen = (uint16_t)plen;
	h.next = next;
	h.hlim = hlim;
	memcpy(h.src, src, 16);
	memcpy(h.dst, dst, 16);
	ipk_ip6_emit(f + 14, IPK_IP6_HLEN, &h);
	return 14 + IPK_IP6_HLEN;
}

/* The upper layer's checksum of a whole (unfragmented) datagram in f, if the walk
 * finds TCP, UDP or ICMPv6 there. */
static void fix_l4(uint8_t *f, uint32_t len)
{
	struct ipk_ip6_hdr h;
	struct ipk_ip6_ext x;
	uint8_t *l4;
	uint32_t l4len, at;

	if (ipk_ip6_parse(f + 14, len - 14, &h) < 0)
		return;
	memset(&x, 0, sizeof(x));
	if (ipk_ip6_ext_walk(f + 14, IPK_IP6_HLEN + h.plen, h.next, ipk_ip6_is_multicast(h.dst),
	                     &x) != IPK_IP6X_OK || x.has_frag)
		return;
	l4 = f + 14 + x.off;
	l4len = IPK_IP6_HLEN + h.plen - x.off;
	if (x.proto == IPK_IPPROTO_TCP && l4len >= 20)
		at = 16;
	else if (x.proto == IPK_IPPROTO_UDP && l4len >= 8)
		at = 6;
	else if (x.proto == IPK_IPPROTO_ICMP6 && l4len >= 4)
		at = 2;
	else
		return;
	ipk_wr16(l4 + at, 0);
	ipk_wr16(l4 + at, ipk_csum_l4_6(h.src, h.dst, x.proto, l4, l4len));
	if (x.proto == IPK_IPPROTO_UDP && ipk_rd16(l4 + at) == 0)
		ipk_wr16(l4 + at, 0xffff);
}

static void rx(uint8_t *f, uint32_t len) { fz_host_rx(&F.h, f, len); }

/* The checksum of UDP datagram id from source s (header with checksum 0, then the
 * pattern), computed once per input. */
static uint16_t udp_csum(uint32_t id, uint32_t s)
{
	static uint8_t d[0x3fff + 1100];
	uint32_t i, t = F.total[id], k = id * 2 + s;
	uint16_t v;

	if (F.csum_ok & (1u << k))
		return F.csum[k];
	for (i = 0; i < t; i++)
		d[i] = pattern(i);
	ipk_wr16(d, UDP_SPORT);
	ipk_wr16(d + 2, UDP_PORT);
	ipk_wr16(d + 4, (uint16_t)t);
	ipk_wr16(d + 6, 0);
	v = ipk_csum_l4_6(s ? ip_peer2_g : ip_peer_g, ip_us_g, IPK_IPPROTO_UDP, d, t);
	F.csum[k] = v ? v : 0xffff;
	F.csum_ok |= 1u << k;
	return F.csum[k];
}

static void op_frag(struct rd *r)
{
	static uint8_t f[1600];
	uint8_t fl = rd8(r), b;
	uint32_t id = fl & 3u, off, len, i, at, s = (fl >> 3) & 1u;
	uint8_t hdr[8];
	int more = (fl & 4) != 0;

	off = (uint32_t)rd8(r) * (fl & 0x40 ? 256u : 8u);
	b = rd8(r);
	len = (uint32_t)(b >> 1) * 16u + (b & 1u);
	if (fl & 0x10) {
		len = F.total[id] > off ? F.total[id] - off : 0;
		more = 0;
	}
	if (len > 1400)
		len = 1400;
	at = eth_ip6(f, s ? ip_peer2_g : ip_peer_g, ip_us_g,
	             fl & 0x20 ? IPK_IPPROTO_HOPOPTS : IPK_IPPROTO_FRAGMENT, 0, 64);
	if (fl & 0x20)
		at += ipk_ip6_hbh_ra_emit(f + at, 8, IPK_IPPROTO_FRAGMENT);
	at += ipk_ip6_frag_emit(f + at, 8, IPK_IPPROTO_UDP, off & ~7u, more, FRAG_ID_BASE + id);
	for (i = 0; i < len; i++)
		f[at + i] = pattern(off + i);
	ipk_wr16(hdr, UDP_SPORT);
	ipk_wr16(hdr + 2, UDP_PORT);
	ipk_wr16(hdr + 4, (uint16_t)F.total[id]);
	ipk_wr16(hdr + 6, udp_csum(id, s));
	for (i = 0; i < 8; i++)
		if (off <= i && i < off + len)
			f[at + i - off] = hdr[i];
	ipk_wr16(f + 14 + 4, (uint16_t)(at + len - 14 - IPK_IP6_HLEN));
	rx(f, at + len);
}

static const uint8_t *pick_src(uint8_t s)
{
	switch (s & 3) {
	case 0: return ip_peer_ll;
	case 1: return ip_peer_g;
	case 2: return ip_router_ll;
	default: return ip_zero;
	}
}

static void pick_dst(uint8_t s, uint8_t out[16])
{
	switch (s & 3) {
	case 0: memcpy(out, F.us_ll, 16); break;
	case 1: memcpy(out, ip_us_g, 16); break;
	case 2: memcpy(out, ip_all_nodes, 16); break;
	default: ipk_ip6_solicited_node(out, ip_us_g); break;
	}
}

static void pick_target(struct rd *r, uint8_t out[16])
{
	uint8_t t = rd8(r);

	switch (t % 6) {
	case 0: memcpy(out, ip_peer_g, 16); break;
	case 1: memcpy(out, ip_peer_ll, 16); break;
	case 2: memcpy(out, ip_router_ll, 16); break;
	case 3: memcpy(out, ip_us_g, 16); break;
	case 4: memcpy(out, F.us_ll, 16); break;
	default:
		memcpy(out, ip_us_g, 16);
		out[15] = rd8(r);
		out[14] = (uint8_t)(t >> 7);
		break;
	}
}

/* Up to 3 options at p (cap bytes); returns bytes written. */
static uint32_t nd_options(struct rd *r, uint8_t *p, uint32_t cap)
{
	uint32_t n = 0, k, nopt = rd8(r) % 4, i;

	for (k = 0; k < nopt; k++) {
		uint8_t t = rd8(r);

		if (t == 1 || t == 2) {
			uint8_t mac[6];
			uint8_t m = rd8(r);
			memcpy(mac, m & 1 ? mac_router : fz_mac_peer, 6);
			if (m & 2)
				mac[5] = m;
			if (m & 4)
				mac[0] |= 1; /* a multicast MAC */
			n += ipk_nd_opt_lla_emit(p + n, cap - n, t, mac);
		} else if (t == 3) {
			struct ipk_nd_prefix pf;
			uint8_t fl = rd8(r);
			memset(&pf, 0, sizeof(pf));
			memcpy(pf.prefix, ip_us_g, 16);
			pf.prefix[15] = 0;
			pf.prefix[7] = rd8(r);
			pf.plen = fl & 0x10 ? rd8(r) : 64;
			pf.flags = fl & 0xc0;
			pf.valid = (uint32_t)rd8(r) * 10u;
			pf.preferred = (uint32_t)rd8(r) * 10u;
			if (fl & 0x20)
				pf.valid = pf.preferred = 0xffffffffu;
			n += ipk_nd_opt_prefix_emit(p + n, cap - n, &pf);
		} else if (t == 5) {
			n += ipk_nd_opt_mtu_emit(p + n, cap - n, rd16(r));
		} else {
			uint32_t units = rd8(r) % 4;
			if (n + 2 + units * 8 > cap)
				break;
			p[n] = t;
			p[n + 1] = (uint8_t)units;
			for (i = 2; i < units * 8; i++)
				p[n + i] = rd8(r);
			n += units ? units * 8 : 2; /* length 0: malformed, as sent */
		}
	}
	return n;
}

static void op_nd(struct rd *r)
{
	static uint8_t f[1600];
	uint8_t kind = rd8(r) % 5, a = rd8(r), dst[16];
	const uint8_t *src = pick_src(a);
	uint8_t *m;
	uint32_t at, n = 0;
	static const uint8_t types[5] = {IPK_ICMP6_ND_RS, IPK_ICMP6_ND_RA, IPK_ICMP6_ND_NS,
	                                 IPK_ICMP6_ND_NA, IPK_ICMP6_ND_REDIRECT};

	pick_dst((uint8_t)(a >> 2), dst);
	at = eth_ip6(f, src, dst, IPK_IPPROTO_ICMP6, 0, a & 0x10 ? 254 : 255);
	m = f + at;
	memset(m, 0, 48);
	m[0] = types[kind];
	switch (kind) {
	case 0: n = 8; break;
	case 1: /* RA: hop limit, flags, router lifetime, reachable, retrans */
		m[4] = rd8(r);
		m[5] = a & 0xe0;
		ipk_wr16(m + 6, rd16(r));
		ipk_wr32(m + 8, (uint32_t)rd8(r) * 1000u);
		ipk_wr32(m + 12, (uint32_t)rd8(r) * 100u);
		n = 16;
		break;
	case 2:
		pick_target(r, m + 8);
		n = 24;
		break;
	case 3:
		m[4] = a & 0xe0;
		pick_target(r, m + 8);
		n = 24;
		break;
	default:
		pick_target(r, m + 8);
		pick_target(r, m + 24);
		n = 40;
		break;
	}
	n += nd_options(r, m + n, 1400 - n);
	ipk_wr16(f + 18, (uint16_t)n);
	ipk_icmp6_csum_fill(m, n, src, dst);
	rx(f, at + n);
}

static void op_mld(struct rd *r)
{
	static uint8_t f[400];
	uint8_t v = rd8(r), g = rd8(r), group[16], dst[16];
	uint8_t *m;
	uint32_t at, n, k, ns = 0;

	memset(group, 0, 16);
	if ((g & 3) == 1)
		ipk_ip6_solicited_node(group, F.us_ll);
	else if ((g & 3) == 2)
		memcpy(group, ip_all_nodes, 16);
	else if ((g & 3) == 3) {
		group[0] = 0xff;
		group[1] = 0x05;
		group[15] = (uint8_t)(g >> 2);
	}
	if (ipk_ip6_is_unspecified(group) || (v & 8))
		memcpy(dst, ip_all_nodes, 16);
	else
		memcpy(dst, group, 16);
	at = eth_ip6(f, v & 16 ? ip_peer_g : ip_router_ll, dst,
	             v & 2 ? IPK_IPPROTO_ICMP6 : IPK_IPPROTO_HOPOPTS, 0, v & 4 ? 255 : 1);
	if (!(v & 2))
		at += ipk_ip6_hbh_ra_emit(f + at, 8, IPK_IPPROTO_ICMP6);
	m = f + at;
	memset(m, 0, 28 + 48);
	m[0] = IPK_ICMP6_MLD_QUERY;
	ipk_wr16(m + 4, rd16(r));
	memcpy(m + 8, group, 16);
	n = IPK_MLD1_LEN;
	if (v & 1) { /* MLDv2: S/QRV, QQIC, sources */
		m[24] = rd8(r);
		m[25] = rd8(r);
		ns = rd8(r) % 4;
		ipk_wr16(m + 26, (uint16_t)(v & 0x20 ? 200 : ns)); /* a count past the message */
		for (k = 0; k < ns; k++) {
			memcpy(m + 28 + 16 * k, ip_peer_g, 16);
			m[28 + 16 * k + 15] = rd8(r);
		}
		n = 28 + 16 * ns;
	}
	ipk_wr16(f + 18, (uint16_t)(at + n - 14 - IPK_IP6_HLEN));
	ipk_icmp6_csum_fill(m, n, v & 16 ? ip_peer_g : ip_router_ll, dst);
	rx(f, at + n);
}

static void op_icmp_err(struct rd *r)
{
	static uint8_t f[1600];
	uint8_t type = (uint8_t)(rd8(r) % 4 + 1), code = rd8(r), w = rd8(r), cut = rd8(r);
	uint16_t val = rd16(r);
	struct ipk_ip6_hdr q;
	uint8_t *m, *qp;
	uint32_t at, qlen, n;
	int tcp = !(w & 1);

	at = eth_ip6(f, w & 2 ? ip_router_ll : ip_peer_g, w & 4 ? F.us_ll : ip_us_g,
	             IPK_IPPROTO_ICMP6, 0, 64);
	m = f + at;
	memset(m, 0, 8);
	m[0] = type;
	m[1] = (uint8_t)(code % 8);
	ipk_wr32(m + 4, type == IPK_ICMP6_PKT_TOO_BIG ? (uint32_t)val : (uint32_t)(val & 0xff));
	qp = m + 8;
	memset(&q, 0, sizeof(q));
	q.next = tcp ? IPK_IPPROTO_TCP : IPK_IPPROTO_UDP;
	q.hlim = 64;
	q.plen = tcp ? 20 + 100 : 8 + 100;
	memcpy(q.src, w & 8 ? F.us_ll : ip_us_g, 16);
	memcpy(q.dst, ip_peer_g, 16);
	ipk_ip6_emit(qp, IPK_IP6_HLEN, &q);
	memset(qp + 40, 0, 120);
	if (tcp) {
		struct ipk_conn *c = F.c;
		uint32_t seq = F.iss + 1, span;
		if (!F.h.watch_closed) {
			span = c->snd_nxt - c->snd_una + 1;
			seq = c->snd_una + (uint32_t)(w >> 4) * 97u % span;
		}
		ipk_wr16(qp + 40, TCP_LPORT);
		ipk_wr16(qp + 42, w & 0x80 ? 81 : TCP_PPORT);
		ipk_wr32(qp + 44, seq);
		qp[52] = 5 << 4;
		qp[53] = IPK_TCP_ACK;
	} else {
		ipk_wr16(qp + 40, UDP_PORT);
		ipk_wr16(qp + 42, w & 0x80 ? 9 : 7);
		ipk_wr16(qp + 44, 108);
	}
	qlen = cut % 161;
	n = 8 + qlen;
	ipk_wr16(f + 18, (uint16_t)n);
	ipk_icmp6_csum_fill(m, n, w & 2 ? ip_router_ll : ip_peer_g, w & 4 ? F.us_ll : ip_us_g);
	rx(f, at + n);
}

static void op_raw(struct rd *r)
{
	static uint8_t f[1600];
	uint8_t next = rd8(r), hlim = rd8(r), d = rd8(r), dst[16];
	uint32_t len = rd8(r) * 2u, at, i;
	struct ipk_ip6_ext x;

	pick_dst(d, dst);
	at = eth_ip6(f, pick_src((uint8_t)(d >> 2)), dst, next, len, hlim);
	for (i = 0; i < len; i++)
		f[at + i] = rd8(r);
	/* keep the pattern datagrams ours: a raw fragment never joins them and no
	 * raw UDP reaches port 53 */
	memset(&x, 0, sizeof(x));
	if (ipk_ip6_ext_walk(f + 14, IPK_IP6_HLEN + len, next, ipk_ip6_is_multicast(dst), &x) ==
	    IPK_IP6X_OK) {
		if (x.has_frag && (x.frag_id & ~3u) == FRAG_ID_BASE)
			f[14 + x.frag_hoff + 4] ^= 0x80;
		if (x.proto == IPK_IPPROTO_UDP && x.off + 4u <= IPK_IP6_HLEN + len &&
		    ipk_rd16(f + 14 + x.off + 2) == UDP_PORT)
			f[14 + x.off + 3] ^= 1;
	}
	if (d & 0x40)
		fix_l4(f, at + len);
	rx(f, at + len);
}

static void op_app(struct rd *r)
{
	static uint8_t buf[255 * 40];
	uint8_t k = rd8(r), b = rd8(r);
	struct ipk_addr a;

	memset(&a, 0, sizeof(a));
	a.family = IPK_AF_INET6;
	memcpy(a.a, ip_us_g, 16);
	a.a[15] = b;
	if (k & 0x80)
		memcpy(a.a, ip_peer_ll, 16);
	switch (k & 3) {
	case 0:
		ipk_udp_sendto_addr(F.h.ctx, ipk_htons(UDP_PORT), &a, ipk_htons(7), buf,
		                    (uint32_t)(k >> 2) * 40u, F.h.now);
		break;
	case 1:
		if (!F.h.watch_closed)
			ipk_tcp_write(F.h.ctx, F.c, buf, (uint32_t)b * 37u, F.h.now);
		break;
	case 2:
		ipk_icmp6_echo(F.h.ctx, a.a, ipk_htons(1), ipk_htons(b), (uint32_t)(k >> 2) * 20u,
		               F.h.now);
		break;
	default:
		memcpy(a.a, ip_peer_g, 16);
		ipk_udp_sendto_addr(F.h.ctx, ipk_htons(UDP_PORT), &a, ipk_htons(7), buf, b, F.h.now);
		break;
	}
}

static void send_seg(uint8_t flags, uint32_t seq, uint32_t ack, uint32_t dlen, const uint8_t *opt,
                     uint32_t optlen)
{
	static uint8_t f[1600];
	uint32_t at = eth_ip6(f, ip_peer_g, ip_us_g, IPK_IPPROTO_TCP, 20 + optlen + dlen, 64), i;
	uint8_t *t = f + at;

	memset(t, 0, 20);
	ipk_wr16(t, TCP_PPORT);
	ipk_wr16(t + 2, TCP_LPORT);
	ipk_wr32(t + 4, seq);
	ipk_wr32(t + 8, ack);
	t[12] = (uint8_t)(((20 + optlen) / 4) << 4);
	t[13] = flags;
	ipk_wr16(t + 14, 65535);
	if (optlen)
		memcpy(t + 20, opt, optlen);
	for (i = 0; i < dlen; i++)
		t[20 + optlen + i] = (uint8_t)i;
	fix_l4(f, at + 20 + optlen + dlen);
	rx(f, at + 20 + optlen + dlen);
}

static void op_ack(struct rd *r)
{
	uint32_t dlen = (uint32_t)rd8(r) * 4u;

	if (F.h.watch_closed)
		return;
	send_seg(IPK_TCP_ACK, F.peer_nxt, F.c->snd_nxt, dlen, NULL, 0);
	if (F.c->rcv_nxt == F.peer_nxt + dlen)
		F.peer_nxt += dlen;
	if (!F.h.watch_closed && F.h.ev.tcp_payload_bytes > F.recved) {
		ipk_tcp_recved(F.h.ctx, F.c, F.h.ev.tcp_payload_bytes - F.recved, F.h.now);
		F.recved = F.h.ev.tcp_payload_bytes;
	}
}

/* ------------------------------------------------------------ frames out */

static int is_ours(const uint8_t a[16])
{
	uint8_t l[IPK_IP6_ADDRS][16];
	int i, n = ipk_ip6_addrs(F.h.ctx, l, IPK_IP6_ADDRS);

	if (memcmp(a, F.us_ll, 16) == 0 || memcmp(a, ip_us_g, 16) == 0)
		return 1;
	for (i = 0; i < n; i++)
		if (memcmp(a, l[i], 16) == 0)
			return 1;
	/* a SLAAC address still tentative sends nothing but DAD (from ::) */
	for (i = 0; i < IPK_IP6_ADDRS; i++)
		if (F.h.ctx->ip6.addr[i].state != IPK_A6_FREE &&
		    memcmp(a, F.h.ctx->ip6.addr[i].a, 16) == 0)
			return 1;
	return 0;
}

static void on_tx(struct fz_host *h, const uint8_t *f, uint32_t len)
{
	struct ipk_ip6_hdr ip;
	struct ipk_ip6_ext x;
	const uint8_t *l4;
	uint32_t l4len;

	(void)h;
	if (len < 14 || ipk_rd16(f + 12) != IPK_ETHERTYPE_IP6)
		return;
	need(ipk_ip6_parse(f + 14, len - 14, &ip) > 0, "sent an IPv6 header that does not parse");
	need(!ipk_ip6_is_multicast(ip.src), "sent from a multicast source");
	need(is_ours(ip.src) || ipk_ip6_is_unspecified(ip.src), "sent from an address not ours");
	if (ipk_ip6_is_multicast(ip.dst)) {
		uint8_t mac[6];
		ipk_ip6_mcast_mac(mac, ip.dst);
		need(memcmp(f, mac, 6) == 0, "multicast destination not to its group MAC");
	} else {
		need(!(f[0] & 1), "unicast destination to a group MAC");
	}
	need(memcmp(f + 6, fz_mac_us, 6) == 0, "sent from a MAC not ours");
	memset(&x, 0, sizeof(x));
	need(ipk_ip6_ext_walk(f + 14, IPK_IP6_HLEN + ip.plen, ip.next, ipk_ip6_is_multicast(ip.dst),
	                      &x) == IPK_IP6X_OK,
	     "sent a datagram our own walk refuses");
	l4 = f + 14 + x.off;
	l4len = IPK_IP6_HLEN + ip.plen - x.off;
	if (x.has_frag) {
		need(!x.frag_more || l4len % 8 == 0, "sent a fragment not a multiple of 8");
		need(x.frag_off + l4len <= 65535, "sent a fragment past 65535");
		return;
	}
	if (x.proto == IPK_IPPROTO_UDP)
		need(ipk_udp6_csum_ok(ip.src, ip.dst, l4, l4len), "sent UDP that does not checksum");
	if (x.proto == IPK_IPPROTO_TCP || x.proto == IPK_IPPROTO_ICMP6)
		need(ipk_csum_l4_6(ip.src, ip.dst, x.proto, l4, l4len) == 0,
		     "sent TCP/ICMPv6 that does not checksum");
	if (x.proto == IPK_IPPROTO_TCP && F.setup_phase && l4len >= 20 && (l4[13] & IPK_TCP_SYN)) {
		F.syn_seq = ipk_rd32(l4 + 4);
		F.syn_seen = 1;
	}
	if (x.proto != IPK_IPPROTO_ICMP6 || l4len < 4)
		return;
	if (l4[0] >= IPK_ICMP6_ND_RS && l4[0] <= IPK_ICMP6_ND_REDIRECT) {
		struct ipk_nd_msg m;
		need(ip.hlim == IPK_ND_HOP_LIMIT, "sent ND with a hop limit other than 255");
		need(ipk_nd_parse(l4, l4len, &m) >= 0 && ipk_nd_check(&ip, &m) == IPK_ND_OK,
		     "sent ND that ipk_nd_check refuses");
	}
	if (ipk_icmp6_is_error(l4[0])) {
		struct ipk_icmp6_quote q;
		need(IPK_IP6_HLEN + ip.plen <= IPK_IP6_MIN_MTU, "ICMPv6 error above 1280 bytes");
		need(!ipk_ip6_is_multicast(ip.dst) && !ipk_ip6_is_unspecified(ip.dst),
		     "ICMPv6 error to a multicast or unspecified address");
		memset(&q, 0, sizeof(q));
		if (l4len >= 8 + 40 && ipk_icmp6_quote_parse(l4 + 8, l4len - 8, &q) > 0 &&
		    q.proto == IPK_IPPROTO_ICMP6 && q.off + 1u <= l4len - 8)
			need(!ipk_icmp6_is_error(l4[8 + q.off]), "an ICMPv6 error answered an error");
	}
}

/* ------------------------------------------------------------ delivery */

static void on_udp6(struct ipk_ctx *ctx, const struct ipk_atuple *t, void *pkt, uint32_t off,
                    uint32_t len, void *opaque)
{
	uint32_t i, k, got;
	int declared = 0;

	(void)opaque;
	got = ipk_pkt_copy(ctx, pkt, off, F.udp, len < sizeof(F.udp) ? len : (uint32_t)sizeof(F.udp));
	need(got == len, "udp_recv6: the packet holds fewer bytes than its length");
	F.h.ev.udp_dgrams++;
	if (ipk_ntohs(t->peer_port_be) != UDP_SPORT)
		return;
	for (k = 0; k < 4; k++)
		declared |= F.total[k] == len + 8;
	need(declared, "delivered a datagram of a length nobody declared");
	for (i = 0; i < len; i++)
		need(F.udp[i] == pattern(8 + i), "delivered datagram bytes out of place");
}

/* ------------------------------------------------------------ state checks */

static void check_state(void)
{
	struct ipk_ctx *c = F.h.ctx;
	uint32_t i;

	fz_host_check(&F.h, WHO);
	for (i = 0; i < IPK_ND_ENTRIES; i++) {
		const struct ipk_nd_entry *e = &c->ip6.nd[i];
		const struct ipk_pb *pb;
		uint32_t n = 0;

		need(e->state <= IPK_ND_PROBE, "neighbour entry in an unknown state");
		for (pb = e->q; pb && n <= IPK_ND_QLEN + 1; pb = pb->next)
			n++;
		need(n == e->qlen && n <= IPK_ND_QLEN, "neighbour queue longer than its bound");
		need(e->state != IPK_ND_FREE || !e->q, "a free neighbour entry holds packets");
	}
	for (i = 0; i < IPK_REASM6_SLOTS; i++) {
		const struct ipk_reasm6 *r = &c->ip6.reasm[i];
		const struct ipk_pb *pb;
		uint32_t n = 0, have = 0, end = 0;

		need(r->used || !r->pieces, "a free reassembly slot holds pieces");
		for (pb = r->pieces; pb && n <= IPK_REASM6_PIECES + 1; pb = pb->next) {
			need(pb->seq >= end, "reassembly pieces overlap or out of order");
			end = pb->seq + pb->len;
			have += pb->len;
			n++;
		}
		need(n == r->npieces && n <= IPK_REASM6_PIECES, "reassembly pieces above the bound");
		need(have == r->have, "reassembly byte count differs from its pieces");
		need(end <= 65535, "reassembly piece past 65535");
	}
	if (!F.h.watch_closed) {
		const struct ipk_conn *k = F.c;
		need(ipk_seq_le(k->snd_una, k->snd_nxt), "snd_una > snd_nxt");
		need(ipk_seq_le(k->snd_nxt, k->snd_max), "snd_nxt > snd_max");
		need(k->mss <= F.mss0 && k->mss >= IPK_TCP_MIN_MSS, "MSS out of range");
	}
}

/* ------------------------------------------------------------ set-up */

static int handshake(void)
{
	static uint8_t f[200];
	struct ipk_addr a;
	uint8_t *m;
	uint32_t at, n;
	static const uint8_t mss[4] = {2, 4, 0x05, 0xa0}; /* 1440 */

	memset(&a, 0, sizeof(a));
	a.family = IPK_AF_INET6;
	memcpy(a.a, ip_peer_g, 16);
	if (ipk_tcp_connect_addr(F.h.ctx, &a, ipk_htons(TCP_PPORT), ipk_htons(TCP_LPORT), NULL, &F.c,
	                         F.h.now) < 0)
		return -1;
	/* the NS for the peer: answer it (solicited, override, the peer's MAC) */
	at = eth_ip6(f, ip_peer_g, ip_us_g, IPK_IPPROTO_ICMP6, 0, 255);
	m = f + at;
	memset(m, 0, 32);
	m[0] = IPK_ICMP6_ND_NA;
	m[4] = IPK_ND_NA_SOLICITED | IPK_ND_NA_OVERRIDE;
	memcpy(m + 8, ip_peer_g, 16);
	n = 24 + ipk_nd_opt_lla_emit(m + 24, 8, 2, fz_mac_peer);
	ipk_wr16(f + 18, (uint16_t)n);
	ipk_icmp6_csum_fill(m, n, ip_peer_g, ip_us_g);
	F.h.now += 1000000;
	rx(f, at + n);
	if (!F.syn_seen)
		return -1;
	F.iss = F.syn_seq;
	F.h.now += 1000000;
	send_seg(IPK_TCP_SYN | IPK_TCP_ACK, PEER_ISS, F.iss + 1, 0, mss, 4);
	F.peer_nxt = PEER_ISS + 1;
	if (ipk_tcp_state(F.c) != IPK_TCP_ESTABLISHED)
		return -1;
	F.mss0 = F.c->mss;
	return 0;
}

static int setup(void)
{
	struct ipk_config cfg;
	uint8_t l[IPK_IP6_ADDRS][16];

	fz_host_config(&cfg);
	cfg.ip6_enable = 1;
	memcpy(cfg.ip6_addr, ip_us_g, 16);
	cfg.ip6_prefix_len = 64;
	cfg.ip6_dad_transmits = 1;
	cfg.ip6_rs_count = 1;
	cfg.tcp_max_retries = 3;
	cfg.tcp_syn_retries = 2;
	cfg.tcp_time_wait_ns = SEC;
	if (fz_host_init(&F.h, &cfg, 4, 128, 192) || ipk_udp_bind(F.h.ctx, ipk_htons(UDP_PORT)) < 0)
		return -1;
	F.h.ops.udp_recv6 = on_udp6;
	F.h.on_tx = on_tx;
	F.setup_phase = 1;
	fz_host_advance(&F.h, 1000000);
	fz_host_advance(&F.h, 3 * SEC); /* DAD done */
	if (ipk_ip6_addrs(F.h.ctx, l, IPK_IP6_ADDRS) < 2)
		return -1;
	memcpy(F.us_ll, l[0], 16);
	if (!ipk_ip6_is_linklocal(F.us_ll) || handshake())
		return -1;
	F.setup_phase = 0;
	F.h.watch = F.c;
	fz_host_snapshot(&F.h);
	F.ok = 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rd r;
	uint32_t t, released = 0;
	int i;

	if (!F.ok && setup())
		fz_fail(WHO, "set-up failed"); /* a world not built would fuzz nothing */
	fz_host_restore(&F.h);
	F.peer_nxt = PEER_ISS + 1;
	F.recved = 0;
	F.csum_ok = 0;
	r.p = data;
	r.n = size;
	r.at = 0;
	t = rd16(&r) & 0x3fffu;
	F.total[0] = t + 8;
	F.total[1] = t + 1008;
	F.total[2] = t / 2 + 8;
	F.total[3] = 1400;
	for (i = 0; i < MAX_OPS && r.at < r.n; i++) {
		uint8_t op = rd8(&r);

		switch (op % 8) {
		case 0:
			fz_host_advance(&F.h, (uint64_t)rd8(&r) * (op & 0x80 ? 4 * SEC : SEC / 10));
			break;
		case 1: op_frag(&r); break;
		case 2: op_nd(&r); break;
		case 3: op_mld(&r); break;
		case 4: op_icmp_err(&r); break;
		case 5: op_raw(&r); break;
		case 6: op_app(&r); break;
		default: op_ack(&r); break;
		}
		check_state();
	}
	if (getenv("FUZZ_TRACE")) {
		const struct ipk_counters *k = ipk_counters(F.h.ctx);
		printf("ops %d frags %llu reassembled %llu udp %u nd_rx %llu nd_tx %llu mld_q %llu "
		       "frames_tx %u tcp_closed %u\n",
		       i, (unsigned long long)k->ip6_frags_rx, (unsigned long long)k->ip6_reassembled,
		       F.h.ev.udp_dgrams, (unsigned long long)k->nd_rx, (unsigned long long)k->nd_tx,
		       (unsigned long long)k->mld_queries, F.h.ev.tx_frames, F.h.ev.tcp_closed);
		for (i = 0; i < IPK_DROP__COUNT; i++)
			if (k->drop[i])
				printf("drop %d: %llu\n", i, (unsigned long long)k->drop[i]);
		printf("pool descs_out %u bufs_out %u (start %u %u) pbs_free %u (start %u)\n",
		       F.h.pool->descs_out, F.h.pool->bufs_out, F.h.snap.pool.descs_out,
		       F.h.snap.pool.bufs_out, ipk_pbs_free(F.h.ctx), F.h.snap.pbs_free);
		fflush(stdout);
	}
	if (!F.h.watch_closed)
		ipk_tcp_abort(F.h.ctx, F.c, F.h.now);
	need(F.h.watch_closed, "ipk_tcp_abort did not close the connection");
	released = 1;
	/* past reassembly (60 s) and every neighbour's retransmits (one RetransTimer
	 * apart, as an RA may have set it), twice: a Time Exceeded sent at the
	 * reassembly timeout starts a resolution of its own */
	for (i = 0; i < 2; i++) {
		int k;

		fz_host_advance(&F.h, 61 * SEC);
		for (k = 0; k < 8; k++)
			fz_host_advance(&F.h, F.h.ctx->ip6.retrans_ns + 1000000);
	}
	check_state();
	if (getenv("FUZZ_TRACE")) {
		int j;
		for (j = 0; j < IPK_ND_ENTRIES; j++) {
			const struct ipk_nd_entry *e = &F.h.ctx->ip6.nd[j];
			if (e->state)
				printf("nd %d: ..%02x%02x state %u qlen %u t %llu now %llu\n", j, e->ip[14], e->ip[15], e->state, e->qlen, (unsigned long long)e->t, (unsigned long long)F.h.now);
		}
		for (j = 0; j < IPK_REASM6_SLOTS; j++)
			printf("reasm %d used %u n %u\n", j, F.h.ctx->ip6.reasm[j].used, F.h.ctx->ip6.reasm[j].npieces);
		printf("pool descs_out %u pbs_free %u deadline %llu\n", F.h.pool->descs_out, ipk_pbs_free(F.h.ctx), (unsigned long long)F.h.ctx->ip6.deadline);
		fflush(stdout);
	}
	fz_host_check_at_start(&F.h, WHO, released);
	for (i = 0; i < IPK_REASM6_SLOTS; i++)
		need(!F.h.ctx->ip6.reasm[i].used, "a reassembly slot outlived its timeout");
	return 0;
}

/* ------------------------------------------------------------ seed corpus */

int fuzz_make_corpus(const char *dir)
{
	/* T = 1992: datagram 0 is 2000 bytes in three pieces 0..976, 976..1952, the rest */
	static const uint8_t inorder[] = {0x07, 0xc8, 1, 0x04, 0, 122, 1, 0x04, 122, 122,
	                                  1, 0x10, 244, 0};
	/* the same in reverse, behind a hop-by-hop header, then time passes */
	static const uint8_t reverse[] = {0x07, 0xc8, 1, 0x30, 244, 0, 1, 0x24, 122, 122,
	                                  1, 0x24, 0, 122, 0, 10};
	/* overlapping pieces: dropped (RFC 5722) */
	static const uint8_t overlap[] = {0x07, 0xc8, 1, 0x04, 0, 122, 1, 0x04, 120, 122,
	                                  1, 0x10, 242, 0};
	/* unfinished datagrams on every id and both sources, then the 60 s timeout */
	static const uint8_t unfinished[] = {0x10, 0, 1, 0x04, 0, 100, 1, 0x05, 0, 100,
	                                     1, 0x06, 0, 100, 1, 0x0f, 0, 100, 0x80, 20};
	/* odd-length piece with M, a piece past 65535 */
	static const uint8_t badfrag[] = {0x3f, 0xff, 1, 0x04, 0, 101, 1, 0x44, 255, 184};
	/* RA with a prefix (SLAAC, on-link), MTU option, the router's LLA; then time */
	static const uint8_t ra[] = {0, 0, 2, 1, 0x02 | 0x08, 64, 0x07, 0x08, 0, 30, 10, 3,
	                             3, 0xc0, 5, 200, 100, 5, 0x05, 0x00, 1, 1, 0, 0x80, 1};
	/* an NS for our global address from the peer, with its LLA; an unsolicited NA
	 * changing the peer's MAC; a DAD NS from :: for our address */
	static const uint8_t ns_na[] = {0, 0, 2, 2, 0x05, 3, 1, 1, 0, 2, 3, 0x21, 0, 1,
	                                2, 0x02, 2, 0x0c, 3, 1, 2, 0xa3, 2, 0x0f, 3, 0};
	/* UDP to five unknown neighbours (NS, queued frames), one answered, time passes */
	static const uint8_t resolve[] = {0, 0, 6, 0x10, 9, 6, 0x10, 9, 6, 0x10, 10, 6, 0x10, 11,
	                                  6, 0x10, 12, 6, 0x10, 13, 2, 3, 0x04, 5, 9, 1, 2, 2,
	                                  0, 30, 0x80, 2};
	/* a Redirect from the router for the peer to the router; then UDP to the peer */
	static const uint8_t redirect[] = {0, 0, 2, 4, 0x02, 2, 0, 1, 2, 1, 6, 3, 40, 7, 0};
	/* MLDv1 and MLDv2 queries (general and for our solicited-node group) */
	static const uint8_t mld[] = {0, 0, 3, 0, 0, 0x03, 0xe8, 3, 1, 1, 0x01, 0xf4, 2, 10, 2,
	                              1, 2, 0, 50, 3, 0x11, 2, 0, 10, 0, 0, 0};
	/* data on the connection, then every ICMPv6 error against it and the UDP socket */
	static const uint8_t errors[] = {0, 0, 6, 1, 40, 4, 1, 0, 0x10, 160, 0x05, 0x00,
	                                 4, 0, 4, 0x20, 160, 0, 0, 4, 2, 0, 0x30, 100, 0, 0,
	                                 4, 3, 1, 0, 160, 0, 40, 4, 0, 1, 1, 160, 0, 0,
	                                 4, 1, 0, 0x80, 160, 0x04, 0xd0, 7, 0};
	/* raw datagrams: destination options with an unknown option, routing type 0,
	 * an ICMPv6 echo request with its checksum fixed */
	static const uint8_t raw[] = {0, 0, 5, 60, 64, 0x41, 4, 17, 0, 0x80, 1, 0, 0, 0, 0,
	                              5, 43, 64, 0x41, 4, 59, 0, 0, 1, 0, 0, 0, 0,
	                              5, 58, 64, 0x41, 4, 128, 0, 0, 0, 0, 1, 0, 1};
	int n = 0;

	n += fz_put_file(dir, "frag-in-order", inorder, sizeof(inorder));
	n += fz_put_file(dir, "frag-reverse-hbh", reverse, sizeof(reverse));
	n += fz_put_file(dir, "frag-overlap", overlap, sizeof(overlap));
	n += fz_put_file(dir, "frag-unfinished-timeout", unfinished, sizeof(unfinished));
	n += fz_put_file(dir, "frag-bad", badfrag, sizeof(badfrag));
	n += fz_put_file(dir, "nd-ra-prefix-mtu", ra, sizeof(ra));
	n += fz_put_file(dir, "nd-ns-na", ns_na, sizeof(ns_na));
	n += fz_put_file(dir, "nd-resolve-queue", resolve, sizeof(resolve));
	n += fz_put_file(dir, "nd-redirect", redirect, sizeof(redirect));
	n += fz_put_file(dir, "mld-queries", mld, sizeof(mld));
	n += fz_put_file(dir, "icmp6-errors", errors, sizeof(errors));
	n += fz_put_file(dir, "raw-ext-headers", raw, sizeof(raw));
	return n;
}
