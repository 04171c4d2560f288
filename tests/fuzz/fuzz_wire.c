/*
 * libFuzzer target: every core/wire parser and the RSS hash, chosen by the input's
 * first byte (modulo 9), the rest being the bytes to parse. No context, no set-up:
 * each input costs only its parse, so this target runs at about a million
 * executions per second.
 *
 * Invariants (a violation aborts, libFuzzer's crash):
 *  - a parse that succeeds returns a length within the buffer and fields within
 *    their documented ranges (IHL 20..60 <= total length <= buffer, ...);
 *  - parse then emit gives back the bytes parsed (Ethernet, ARP, UDP, the TCP fixed
 *    header; IPv4 without options, whose emitted checksum must equal the RFC 1071
 *    sum over the parsed bytes); ICMP re-parses to the same fields;
 *  - TCP options: emit(parse(x)) re-parses to the same options (SACK blocks cut to
 *    what fits), ipk_tcp_opts_len agrees with emit, and the inline NOP,NOP,TS fast
 *    parse agrees with the general one;
 *  - the checksum routines agree with each other: ipk_csum_l4, the inline
 *    ipk_csum_l4_small, the pseudo-header sum plus ipk_csum_add whole or in two
 *    pieces cut anywhere (odd offsets included), ipk_csum_hdr20.
 *
 *   selector 0 eth, 1 arp, 2 ip4, 3 icmp, 4 udp, 5 tcp (+ options), 6 checksums,
 *   7 TCP options alone, 8 RSS (Toeplitz against its definition, the 4-tuple hash,
 *   the symmetric key)
 */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz_host.h"
#include "wire/wire.h"

#define WHO "fuzz_wire"

static void need(int ok, const char *what)
{
	if (!ok)
		fz_fail(WHO, what);
}

static void fz_eth(const uint8_t *p, uint32_t n)
{
	struct ipk_eth_hdr h;
	uint8_t out[IPK_ETH_HLEN];
	int rc = ipk_eth_parse(p, n, &h);

	if (rc < 0) {
		need(n < IPK_ETH_HLEN, "eth: parse refused a long enough buffer");
		return;
	}
	need(rc == IPK_ETH_HLEN, "eth: parse length");
	need(ipk_eth_emit(out, sizeof(out), &h) == IPK_ETH_HLEN, "eth: emit length");
	need(!memcmp(out, p, IPK_ETH_HLEN), "eth: emit(parse(x)) != x");
	need(ipk_eth_emit(out, IPK_ETH_HLEN - 1, &h) == 0, "eth: emit into a short buffer");
}

static void fz_arp(const uint8_t *p, uint32_t n)
{
	struct ipk_arp_hdr h;
	uint8_t out[IPK_ARP_LEN];
	int rc = ipk_arp_parse(p, n, &h);

	if (rc < 0)
		return;
	need(rc == IPK_ARP_LEN && n >= IPK_ARP_LEN, "arp: parse length");
	need(ipk_arp_emit(out, sizeof(out), &h) == IPK_ARP_LEN, "arp: emit length");
	need(!memcmp(out, p, IPK_ARP_LEN), "arp: emit(parse(x)) != x");
}

static void fz_ip4(const uint8_t *p, uint32_t n)
{
	struct ipk_ip4_hdr h;
	uint8_t out[IPK_IP4_HLEN];
	int rc = ipk_ip4_parse(p, n, &h), odd = 0;
	uint32_t sum;

	if (rc < 0)
		return;
	need(rc == h.ihl && h.ihl >= 20 && h.ihl <= 60 && (h.ihl & 3) == 0, "ip4: ihl");
	need(h.ihl <= h.tot_len && h.tot_len <= n, "ip4: total length");
	/* the checksum verdict must be the RFC 1071 sum over ihl bytes */
	sum = ipk_csum_fold(ipk_csum_add(0, p, h.ihl, &odd));
	need(ipk_ip4_csum_ok(p, h.ihl) == (sum == 0), "ip4: csum_ok disagrees with csum_add");
	if (h.ihl != IPK_IP4_HLEN)
		return;
	need(ipk_csum_fold(ipk_csum_hdr20(p)) == sum, "ip4: csum_hdr20 disagrees with csum_add");
	need(ipk_ip4_emit(out, sizeof(out), &h, 0) == IPK_IP4_HLEN, "ip4: emit length");
	need(!memcmp(out, p, 10) && !memcmp(out + 12, p + 12, 8), "ip4: emit(parse(x)) != x");
	ipk_ip4_emit(out, sizeof(out), &h, 1);
	odd = 0;
	need(ipk_csum_fold(ipk_csum_add(0, out, 20, &odd)) == 0, "ip4: emitted checksum wrong");
}

static void fz_icmp(const uint8_t *p, uint32_t n)
{
	struct ipk_icmp_hdr h, h2;
	uint8_t out[IPK_ICMP_HLEN];

	if (ipk_icmp_parse(p, n, &h) < 0)
		return;
	need(ipk_icmp_emit(out, sizeof(out), &h) == IPK_ICMP_HLEN, "icmp: emit length");
	need(ipk_icmp_parse(out, sizeof(out), &h2) == IPK_ICMP_HLEN, "icmp: re-parse");
	need(h2.type == h.type && h2.code == h.code && h2.csum == h.csum, "icmp: type/code/csum");
	if (h.type == IPK_ICMP_ECHO || h.type == IPK_ICMP_ECHO_REPLY)
		need(h2.id == h.id && h2.seq == h.seq, "icmp: echo id/seq");
	else if (h.type == IPK_ICMP_UNREACH && h.code == IPK_ICMP_UNREACH_NEEDFRAG)
		need(h2.mtu == h.mtu && (h2.rest >> 16) == 0, "icmp: next-hop MTU");
	else
		need(h2.rest == h.rest && !memcmp(out, p, IPK_ICMP_HLEN), "icmp: rest of header");
}

static void fz_udp(const uint8_t *p, uint32_t n)
{
	struct ipk_udp_hdr h;
	uint8_t out[IPK_UDP_HLEN];
	int rc = ipk_udp_parse(p, n, &h);

	if (rc < 0)
		return;
	need(rc == IPK_UDP_HLEN && h.len >= 8 && h.len <= n, "udp: length");
	need(ipk_udp_emit(out, sizeof(out), &h) == IPK_UDP_HLEN, "udp: emit length");
	need(!memcmp(out, p, IPK_UDP_HLEN), "udp: emit(parse(x)) != x");
}

static void opts_same(const struct ipk_tcp_opts *a, const struct ipk_tcp_opts *b, uint32_t nsack)
{
	uint32_t i;

	need(a->has_mss == b->has_mss && (!a->has_mss || a->mss == b->mss), "tcp opts: MSS");
	need(a->has_ws == b->has_ws && (!a->has_ws || a->ws == b->ws), "tcp opts: WS");
	need(a->has_sack_perm == b->has_sack_perm, "tcp opts: SACK-permitted");
	need(a->has_ts == b->has_ts && (!a->has_ts || (a->tsval == b->tsval && a->tsecr == b->tsecr)),
	     "tcp opts: TS");
	need(b->nsack == nsack, "tcp opts: SACK block count");
	for (i = 0; i < nsack; i++)
		need(a->sack[i][0] == b->sack[i][0] && a->sack[i][1] == b->sack[i][1],
		     "tcp opts: SACK block");
}

static void fz_tcp_opts(const uint8_t *p, uint32_t n)
{
	struct ipk_tcp_opts o, o2;
	uint8_t out[IPK_TCP_MAX_OPT];
	uint32_t len, nsack;

	if (n > IPK_TCP_MAX_OPT)
		n = IPK_TCP_MAX_OPT;
	if (ipk_tcp_opts_parse(p, n, &o) < 0)
		return;
	need(o.nsack <= IPK_TCP_MAX_SACK, "tcp opts: nsack above 4");
	len = ipk_tcp_opts_emit(out, sizeof(out), &o);
	need(len <= IPK_TCP_MAX_OPT && (len & 3) == 0, "tcp opts: emit length");
	need(len == ipk_tcp_opts_len(&o), "tcp opts: opts_len disagrees with emit");
	need(ipk_tcp_opts_put(out, &o) == len, "tcp opts: opts_put disagrees with emit");
	need(ipk_tcp_opts_parse(out, len, &o2) == 0, "tcp opts: emitted options do not parse");
	nsack = o2.nsack;
	need(nsack <= o.nsack, "tcp opts: emit invented SACK blocks");
	if (o.nsack && !nsack) /* only when no room was left at all */
		need(len + 12 > IPK_TCP_MAX_OPT, "tcp opts: SACK blocks dropped with room left");
	opts_same(&o, &o2, nsack);
}

static void fz_tcp(const uint8_t *p, uint32_t n)
{
	struct ipk_tcp_hdr h, h2;
	struct ipk_tcp_opts o, o2;
	uint8_t out[IPK_TCP_HLEN];
	int rc = ipk_tcp_parse(p, n, &h);

	if (rc < 0)
		return;
	need(rc == h.doff && h.doff >= 20 && h.doff <= 60 && h.doff <= n, "tcp: data offset");
	need(ipk_tcp_emit(out, sizeof(out), &h) == IPK_TCP_HLEN, "tcp: emit length");
	/* byte 12's low nibble (reserved bits) is not kept */
	need(!memcmp(out, p, 12) && out[12] == (p[12] & 0xf0) && !memcmp(out + 13, p + 13, 7),
	     "tcp: emit(parse(x)) != x");
	if (ipk_tcp_parse_ts(p, n, &h2, &o2)) {
		need(!memcmp(&h, &h2, sizeof(h)), "tcp: parse_ts header disagrees with parse");
		need(ipk_tcp_opts_parse(p + 20, h.doff - 20u, &o) == 0, "tcp: parse_ts took bad options");
		opts_same(&o, &o2, 0);
	}
	fz_tcp_opts(p + 20, h.doff - 20u);
}

static void fz_csum(const uint8_t *p, uint32_t n)
{
	uint32_t src, dst, cut, s1, s2;
	uint16_t a, b, c;
	int odd = 0;

	if (n < 10)
		return;
	src = ipk_rdbe32(p);
	dst = ipk_rdbe32(p + 4);
	cut = p[8];
	p += 9;
	n -= 9;
	if (n > 65535)
		n = 65535;
	a = ipk_csum_l4(src, dst, IPK_IPPROTO_TCP, p, n);
	b = ipk_csum_l4_small(src, dst, IPK_IPPROTO_TCP, p, n);
	c = ipk_csum_fold(ipk_csum_add(ipk_csum_pseudo(src, dst, IPK_IPPROTO_TCP, n), p, n, &odd));
	need(a == b, "csum: csum_l4_small disagrees with csum_l4");
	need(a == c, "csum: csum_l4 disagrees with pseudo + csum_add");
	if (cut > n)
		cut = n;
	odd = 0;
	s1 = ipk_csum_add(0, p, cut, &odd);
	s1 = ipk_csum_add(s1, p + cut, n - cut, &odd);
	odd = 0;
	s2 = ipk_csum_add(0, p, n, &odd);
	need(ipk_csum_fold(s1) == ipk_csum_fold(s2), "csum: a sum in two pieces differs");
	if (n >= 20) {
		odd = 0;
		need(ipk_csum_fold(ipk_csum_hdr20(p)) == ipk_csum_fold(ipk_csum_add(0, p, 20, &odd)),
		     "csum: csum_hdr20 disagrees with csum_add");
	}
}

/* Toeplitz by its definition (Microsoft RSS spec): for every set input bit j (most
 * significant first), XOR in the 32 key bits starting at bit j. */
static uint32_t toeplitz_ref(const uint8_t *key, uint32_t keylen, const uint8_t *in, uint32_t n)
{
	uint32_t h = 0, j, k;

	for (j = 0; j < n * 8; j++) {
		uint32_t w = 0;
		if (!(in[j / 8] & (0x80u >> (j % 8))))
			continue;
		for (k = 0; k < 32; k++) {
			uint32_t bit = j + k;
			w = w << 1 | (bit / 8 < keylen ? (key[bit / 8] >> (7 - bit % 8)) & 1u : 0u);
		}
		h ^= w;
	}
	return h;
}

/* RSS (core/rss.c): the Toeplitz hash against its definition, the IPv4 4-tuple hash
 * against the hash of its bytes, and the symmetric key's promise (both directions of
 * a flow hash alike). Input: key length byte, then key, then hash input. */
static void fz_rss(const uint8_t *p, uint32_t n)
{
	uint8_t sym[IPK_RSS_KEY_LEN], in[12];
	uint32_t keylen, len, src, dst, h;
	uint16_t sp, dp;

	if (n < 1)
		return;
	keylen = p[0] % 53;
	if (n - 1 < keylen)
		return;
	len = n - 1 - keylen > 16 ? 16 : n - 1 - keylen;
	h = ipk_rss_toeplitz(p + 1, keylen, p + 1 + keylen, len);
	if (keylen < 4 || len > keylen - 4)
		need(h == 0, "rss: a key too short for the input must give 0");
	else
		need(h == toeplitz_ref(p + 1, keylen, p + 1 + keylen, len),
		     "rss: toeplitz disagrees with its definition");
	if (len < 12 || keylen < IPK_RSS_KEY_LEN)
		return;
	memcpy(in, p + 1 + keylen, 12);
	memcpy(&src, in, 4);
	memcpy(&dst, in + 4, 4);
	memcpy(&sp, in + 8, 2);
	memcpy(&dp, in + 10, 2);
	need(ipk_rss_hash_ip4(p + 1, src, dst, sp, dp) == ipk_rss_toeplitz(p + 1, IPK_RSS_KEY_LEN, in, 12),
	     "rss: hash_ip4 differs from the hash of the tuple's bytes");
	ipk_rss_key_symmetric(sym);
	need(ipk_rss_hash_ip4(sym, src, dst, sp, dp) == ipk_rss_hash_ip4(sym, dst, src, dp, sp),
	     "rss: the symmetric key hashes the two directions of a flow apart");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t n;

	if (size < 1)
		return 0;
	n = size - 1 > 70000 ? 70000 : (uint32_t)(size - 1);
	switch (data[0] % 9) {
	case 0: fz_eth(data + 1, n); break;
	case 1: fz_arp(data + 1, n); break;
	case 2: fz_ip4(data + 1, n); break;
	case 3: fz_icmp(data + 1, n); break;
	case 4: fz_udp(data + 1, n); break;
	case 5: fz_tcp(data + 1, n); break;
	case 6: fz_csum(data + 1, n); break;
	case 7: fz_tcp_opts(data + 1, n); break;
	default: fz_rss(data + 1, n); break;
	}
	return 0;
}

/* ------------------------------------------------------------ seed corpus */

static int seed(const char *dir, const char *name, uint8_t sel, const uint8_t *b, uint32_t n)
{
	uint8_t buf[256];

	buf[0] = sel;
	memcpy(buf + 1, b, n);
	return fz_put_file(dir, name, buf, n + 1);
}

int fuzz_make_corpus(const char *dir)
{
	static const uint8_t eth[14] = {2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 8, 0};
	static const uint8_t arp[28] = {0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 2, 10, 0, 0, 2,
	                                0, 0, 0, 0, 0, 0, 10, 0, 0, 1};
	static const uint8_t ip[24] = {0x46, 0, 0, 24, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 2,
	                               10, 0, 0, 1, 1, 1, 1, 0};
	static const uint8_t icmp[8] = {3, 4, 0, 0, 0, 0, 5, 0xdc};
	static const uint8_t udp[12] = {0x14, 0xe9, 0, 53, 0, 12, 0, 0, 'q', 'u', 'e', 'r'};
	static const uint8_t tcp_ts[32] = {0xaf, 0xc8, 0, 80, 0, 0, 0, 1, 0, 0, 0, 2, 0x80, 0x10,
	                                   1, 0, 0, 0, 0, 0, 1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 7};
	static const uint8_t tcp_syn[40] = {0xaf, 0xc8, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0xa0, 0x02,
	                                    0xff, 0xff, 0, 0, 0, 0, 2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0,
	                                    0, 1, 0, 0, 0, 0, 1, 3, 3, 7};
	static const uint8_t sack[40] = {1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 7, 1, 1, 5, 26, 0, 0,
	                                 0, 10, 0, 0, 0, 20, 0, 0, 0, 30, 0, 0, 0, 40, 0, 0, 0, 50,
	                                 0, 0, 0, 60};
	uint8_t cs[64];
	int n = 0;
	uint32_t i;

	n += seed(dir, "eth", 0, eth, sizeof(eth));
	n += seed(dir, "arp-request", 1, arp, sizeof(arp));
	n += seed(dir, "ip4-options", 2, ip, sizeof(ip));
	memcpy(cs, ip, 20);
	cs[0] = 0x45;
	cs[3] = 20;
	n += seed(dir, "ip4-plain", 2, cs, 20);
	n += seed(dir, "icmp-needfrag", 3, icmp, sizeof(icmp));
	n += seed(dir, "udp", 4, udp, sizeof(udp));
	n += seed(dir, "tcp-ts", 5, tcp_ts, sizeof(tcp_ts));
	n += seed(dir, "tcp-syn", 5, tcp_syn, sizeof(tcp_syn));
	for (i = 0; i < sizeof(cs); i++)
		cs[i] = (uint8_t)(i * 37 + 11);
	cs[8] = 13; /* odd cut */
	n += seed(dir, "csum", 6, cs, sizeof(cs));
	n += seed(dir, "opts-ts-sack", 7, sack, sizeof(sack));
	cs[0] = IPK_RSS_KEY_LEN;
	ipk_rss_key_symmetric(cs + 1);
	for (i = 0; i < 12; i++)
		cs[1 + IPK_RSS_KEY_LEN + i] = (uint8_t)(10 + i);
	n += seed(dir, "rss-symmetric", 8, cs, 1 + IPK_RSS_KEY_LEN + 12);
	return n;
}
