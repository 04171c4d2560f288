/*
 * libFuzzer target: the IPv6 wire layer (core/wire/ip6.c, icmp6.c, nd.c, the IPv6
 * checksums), chosen by the input's first byte (modulo 7), the rest being the bytes
 * to parse. No context, no set-up, like fuzz_wire.
 *
 * Invariants (a violation aborts, libFuzzer's crash):
 *  - IPv6 header: a parse that succeeds has 40 + payload length within the buffer,
 *    and emit(parse(x)) gives back the 40 bytes;
 *  - the extension-header walk (the input is a datagram; the walk runs with the
 *    destination unicast and multicast): the verdict is a known one; on OK the
 *    upper layer lies within the datagram past 40 + at most IPK_IP6_EXT_MAX_LEN
 *    bytes of at most IPK_IP6_EXT_MAX_COUNT headers, the byte at nh_off names it,
 *    proto is not an extension header unless a fragment ended the walk, and the two
 *    walks agree on everything but whether to send an ICMP; a Parameter Problem
 *    pointer lies inside the datagram; an action-10 option error is answered to
 *    multicast too, every other error never is;
 *  - the options walk's pointer lies inside the header;
 *  - ICMPv6: parse -> emit -> parse keeps the fields; an error built with the input
 *    as quote verifies and carries min(quote, room, 1232) bytes; the quote parse
 *    reports only fields that lie inside the quote;
 *  - ND: what parses has its options inside the message, counts within their
 *    bounds, and re-emits to a fixed part that parses to the same fields;
 *  - checksums: ipk_csum_l4_6 = ipk_csum_pseudo6 + ipk_csum_add whole or cut
 *    anywhere; ipk_udp6_csum is never 0 and refuses a zero field;
 *  - MLDv2: a report of groups from the input parses back record by record.
 *
 *   selector 0 ip6 header, 1 extension walk, 2 options walk, 3 icmp6 (+ error and
 *   quote), 4 nd, 5 checksums, 6 mld2
 */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz_host.h"
#include "wire/wire.h"
#include "../wire/linux_frames6.h"

#define WHO "fuzz_wire6"

static void need(int ok, const char *what)
{
	if (!ok)
		fz_fail(WHO, what);
}

static void fz_ip6(const uint8_t *p, uint32_t n)
{
	struct ipk_ip6_hdr h;
	uint8_t out[IPK_IP6_HLEN];
	int rc = ipk_ip6_parse(p, n, &h);

	if (rc < 0) {
		need(n < IPK_IP6_HLEN || (p[0] >> 4) != 6 || ipk_rd16(p + 4) > n - 40,
		     "ip6: parse refused a good header");
		return;
	}
	need(rc == IPK_IP6_HLEN && IPK_IP6_HLEN + (uint32_t)h.plen <= n, "ip6: lengths");
	need(h.flow <= 0xfffff, "ip6: flow label over 20 bits");
	need(ipk_ip6_emit(out, sizeof(out), &h) == IPK_IP6_HLEN, "ip6: emit length");
	need(!memcmp(out, p, IPK_IP6_HLEN), "ip6: emit(parse(x)) != x");
}

static void walk_ok(const uint8_t *p, uint32_t n, const struct ipk_ip6_ext *x)
{
	need(x->off >= IPK_IP6_HLEN && x->off <= n, "walk: upper layer outside the datagram");
	need(x->nhdrs <= IPK_IP6_EXT_MAX_COUNT, "walk: over the count bound");
	need(x->off - IPK_IP6_HLEN <= IPK_IP6_EXT_MAX_LEN, "walk: over the length bound");
	need(x->nh_off < x->off && p[x->nh_off] == x->proto, "walk: nh_off does not name proto");
	need(x->has_frag || !ipk_ip6_is_ext(x->proto), "walk: stopped on an extension header");
	need((x->nhdrs == 0) == (x->off == IPK_IP6_HLEN), "walk: headers without length");
	if (x->has_frag)
		need(x->frag_hoff + 8u == x->off && (x->frag_off & 7) == 0, "walk: fragment fields");
}

static void fz_walk(const uint8_t *p, uint32_t n)
{
	struct ipk_ip6_ext u, m;
	enum ipk_ip6x vu, vm;

	if (n < IPK_IP6_HLEN)
		return;
	vu = ipk_ip6_ext_walk(p, n, p[6], 0, &u);
	vm = ipk_ip6_ext_walk(p, n, p[6], 1, &m);
	need(vu == vm, "walk: verdict depends on multicast");
	need(vu <= IPK_IP6X_FRAG_SIZE, "walk: unknown verdict");
	need(u.proto == m.proto && u.off == m.off && u.nhdrs == m.nhdrs, "walk: walks differ");
	if (vu == IPK_IP6X_OK) {
		need(!u.icmp && !m.icmp, "walk: OK with an ICMP error");
		walk_ok(p, n, &u);
		return;
	}
	if (u.icmp)
		need(u.icmp_ptr < n && u.icmp_code <= 2, "walk: Parameter Problem pointer or code");
	if (m.icmp) /* RFC 4443 §2.4(e): only option action 10 to multicast */
		need(vm == IPK_IP6X_OPT_UNKNOWN && m.icmp_code == 2 && (p[m.icmp_ptr] >> 6) == 2,
		     "walk: ICMP error to multicast");
}

static void fz_opts(const uint8_t *p, uint32_t n)
{
	uint32_t bad = 0xdead, ra = 0;
	enum ipk_ip6_optact a;

	if (n > 2048)
		n = 2048;
	a = ipk_ip6_opts_walk(p, n, &bad, &ra);
	need(a <= IPK_IP6_OPT_MALFORMED, "opts: unknown action");
	if (a != IPK_IP6_OPT_SKIP)
		need(bad >= 2 && bad < n, "opts: pointer outside the header");
	if (a == IPK_IP6_OPT_DISCARD || a == IPK_IP6_OPT_ICMP || a == IPK_IP6_OPT_ICMP_UCAST)
		need((uint32_t)(p[bad] >> 6) == (uint32_t)a, "opts: action is not the type's bits");
	need(ra <= 0x10000u, "opts: router alert value");
}

static void fz_icmp6(const uint8_t *p, uint32_t n)
{
	static const uint8_t s[16] = {0xfe, 0x80, [15] = 1}, d[16] = {0xfd, [15] = 2};
	static uint8_t out[1400];
	struct ipk_icmp6_hdr h, h2;
	struct ipk_icmp6_quote q;
	uint32_t len, room, want;
	int rc;

	if (ipk_icmp6_parse(p, n, &h) < 0)
		return;
	need(ipk_icmp6_emit(out, 8, &h) == 8, "icmp6: emit length");
	need(ipk_icmp6_parse(out, 8, &h2) == 8, "icmp6: re-parse");
	need(h2.type == h.type && h2.code == h.code && h2.csum == h.csum && h2.param == h.param,
	     "icmp6: fields changed");
	need(!memcmp(out, p, 8), "icmp6: emit(parse(x)) != x");
	/* the rest of the input as an invoking packet, quoted in an error */
	h.type &= 0x7f;
	room = 8 + (p[1] * 7u) % sizeof(out);
	if (room > sizeof(out))
		room = sizeof(out);
	len = ipk_icmp6_error_emit(out, room, &h, p + 8, n - 8, s, d);
	want = n - 8;
	if (want > IPK_ICMP6_ERR_QUOTE_MAX)
		want = IPK_ICMP6_ERR_QUOTE_MAX;
	if (want > room - 8)
		want = room - 8;
	need(len == 8 + want, "icmp6: error length");
	need(ipk_csum_l4_6(s, d, IPK_IPPROTO_ICMP6, out, len) == 0, "icmp6: error checksum");
	rc = ipk_icmp6_quote_parse(p + 8, n - 8, &q);
	if (rc < 0)
		return;
	need(q.off >= IPK_IP6_HLEN && q.off <= n - 8, "icmp6: quote offset");
	if (q.has_ports)
		need(q.off + 4u <= n - 8 && (q.proto == 6 || q.proto == 17), "icmp6: quote ports");
	if (q.has_seq)
		need(q.off + 8u <= n - 8 && q.proto == 6, "icmp6: quote seq");
	if (q.has_echo)
		need(q.off + 8u <= n - 8 && q.proto == 58, "icmp6: quote echo");
}

static void fz_nd(const uint8_t *p, uint32_t n)
{
	static const uint8_t ll[16] = {0xfe, 0x80, [15] = 1}, mc[16] = {0xff, 2, [15] = 1};
	struct ipk_nd_msg m, m2;
	struct ipk_ip6_hdr ip;
	uint8_t out[40];
	int rc = ipk_nd_parse(p, n, &m);
	uint32_t fixed;

	if (rc < 0)
		return;
	fixed = (uint32_t)rc;
	need(fixed == m.opt_off && fixed <= n && m.len == n, "nd: lengths");
	need(m.opts.nprefix <= IPK_ND_MAX_PREFIX && m.opts.nrdnss <= IPK_ND_MAX_RDNSS &&
	     m.opts.nprefix <= m.opts.nprefix_seen, "nd: option counts");
	if (m.opts.has_redir)
		need(m.opts.redir_off + (uint32_t)m.opts.redir_len <= n - fixed, "nd: redirected header");
	need(ipk_nd_emit(out, sizeof(out), &m) == fixed, "nd: emit length");
	need(ipk_nd_parse(out, fixed, &m2) == rc, "nd: re-parse");
	need(m2.type == m.type && m2.code == m.code && m2.flags == m.flags &&
	     m2.cur_hlim == m.cur_hlim && m2.router_lifetime == m.router_lifetime &&
	     m2.reachable == m.reachable && m2.retrans == m.retrans &&
	     !memcmp(m2.target, m.target, 16) && !memcmp(m2.dest, m.dest, 16), "nd: fields changed");
	memset(&ip, 0, sizeof(ip));
	memcpy(ip.src, ll, 16);
	memcpy(ip.dst, mc, 16);
	ip.hlim = p[0] & 1 ? 255 : p[1];
	if (ipk_nd_check(&ip, &m) == IPK_ND_OK)
		need(ip.hlim == 255 && m.code == 0, "nd: check took a bad hop limit or code");
}

static void fz_csum6(const uint8_t *p, uint32_t n)
{
	uint32_t cut, s;
	uint16_t a, c;
	int odd = 0;

	if (n < 33)
		return;
	cut = p[32];
	p += 33;
	n -= 33;
	if (n > 65535)
		n = 65535;
	a = ipk_csum_l4_6(p - 33, p - 17, IPK_IPPROTO_TCP, p, n);
	c = ipk_csum_fold(ipk_csum_add(ipk_csum_pseudo6(p - 33, p - 17, IPK_IPPROTO_TCP, n), p, n, &odd));
	need(a == c, "csum6: csum_l4_6 disagrees with pseudo6 + csum_add");
	if (cut > n)
		cut = n;
	odd = 0;
	s = ipk_csum_add(ipk_csum_pseudo6(p - 33, p - 17, IPK_IPPROTO_TCP, n), p, cut, &odd);
	s = ipk_csum_add(s, p + cut, n - cut, &odd);
	need(ipk_csum_fold(s) == a, "csum6: a sum in two pieces differs");
	if (n >= 8) {
		need(ipk_udp6_csum(p - 33, p - 17, p, n) != 0, "csum6: udp6 checksum 0");
		if (ipk_rd16(p + 6) == 0)
			need(!ipk_udp6_csum_ok(p - 33, p - 17, p, n), "csum6: zero UDP checksum taken");
	}
}

static void fz_mld(const uint8_t *p, uint32_t n)
{
	static uint8_t out[8 + 20 * 64];
	static const uint8_t src[16] = {0};
	struct ipk_mld2_rec r;
	uint32_t k = n / 16, i, len;

	if (k > 64)
		k = 64;
	len = ipk_mld2_report_emit(out, sizeof(out), IPK_MLD2_CHANGE_TO_EXCLUDE,
	                           (const uint8_t(*)[16])p, k, src);
	need(len == 8 + 20 * k, "mld: report length");
	need(ipk_csum_l4_6(src, ipk_ip6_all_mldv2_routers, 58, out, len) == 0, "mld: checksum");
	for (i = 0; i < k; i++) {
		need(ipk_mld2_rec_parse(out + 8 + 20 * i, len - 8 - 20 * i, &r) == 20, "mld: record");
		need(!memcmp(r.group, p + 16 * i, 16) && r.nsrc == 0, "mld: group");
	}
	if (n >= 20) /* any bytes as a record */
		if (ipk_mld2_rec_parse(p, n, &r) > 0)
			need(20u + 16u * r.nsrc + 4u * p[1] <= n, "mld: record past the buffer");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t n;

	if (size < 1)
		return 0;
	n = size - 1 > 70000 ? 70000 : (uint32_t)(size - 1);
	switch (data[0] % 7) {
	case 0: fz_ip6(data + 1, n); break;
	case 1: fz_walk(data + 1, n); break;
	case 2: fz_opts(data + 1, n); break;
	case 3: fz_icmp6(data + 1, n); break;
	case 4: fz_nd(data + 1, n); break;
	case 5: fz_csum6(data + 1, n); break;
	default: fz_mld(data + 1, n); break;
	}
	return 0;
}

/* ------------------------------------------------------------ seed corpus */

static int seed(const char *dir, const char *name, uint8_t sel, const uint8_t *b, uint32_t n)
{
	static uint8_t buf[2048];

	if (n + 1 > sizeof(buf))
		n = sizeof(buf) - 1;
	buf[0] = sel;
	memcpy(buf + 1, b, n);
	return fz_put_file(dir, name, buf, n + 1);
}

/* Linux's frames (tests/wire/linux_frames6.h) as datagrams for the walk and the
 * header, their ICMPv6 messages for the ICMPv6 and ND parsers. */
int fuzz_make_corpus(const char *dir)
{
	static const uint8_t chain[] = {
		0x60, 0, 0, 0, 0, 48, 0, 64, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
		0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
		60, 0, 5, 2, 0, 0, 1, 0, 43, 0, 4, 0, 0, 0, 0, 0, 44, 0, 0, 0, 0, 0, 0, 9,
		6, 0, 0x9e, 1, 0, 0xde, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
	char name[64];
	size_t i;
	int n = 0;

	for (i = 0; i < sizeof(linux_frames6) / sizeof(linux_frames6[0]); i++) {
		const struct linux_frame6 *f = &linux_frames6[i];
		const uint8_t *l3 = f->bytes + 14;
		uint32_t len = f->len - 14;
		snprintf(name, sizeof(name), "ip6-%s", f->name);
		n += seed(dir, name, 0, l3, len);
		snprintf(name, sizeof(name), "walk-%s", f->name);
		n += seed(dir, name, 1, l3, len);
		if (f->icmp_type && !f->frag_nxt) {
			uint32_t off = f->hbh_nxt ? 48 : 40;
			snprintf(name, sizeof(name), "icmp6-%s", f->name);
			n += seed(dir, name, (uint8_t)(f->icmp_type >= 133 && f->icmp_type <= 137 ? 4 : 3),
			          l3 + off, len - off);
		}
	}
	n += seed(dir, "walk-chain", 1, chain, sizeof(chain));
	n += seed(dir, "opts-hbh", 2, chain + 40, 8);
	n += seed(dir, "opts-unknown", 2, chain + 64, 16);
	n += seed(dir, "csum6", 5, chain, sizeof(chain));
	n += seed(dir, "mld2", 6, chain + 8, 32);
	return n;
}
