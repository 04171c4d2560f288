/*
 * libFuzzer target: IPv4 reassembly (RFC 791 §3.2, RFC 815). One context with a
 * UDP bind on port 53 and a static ARP entry for the peer, snapshotted once; each
 * input is a sequence of fragments and pauses into that context:
 *
 *   header: 4 bytes, the UDP total length (host order, 16 bits, & 0x3fff) the
 *           datagrams of identification 1 and 2 declare (3 and 4 use 1's and 2's
 *           plus 1000)
 *   op:     a flags byte, then per flags:
 *           flags & 0xc0 == 0xc0: time passes, the next byte * 50 ms
 *           else a fragment: flags bits 0-1 identification (1..4), bit 2 MF,
 *           bit 3 source (peer or 10.0.0.3), bit 4 protocol (UDP, or else an ICMP
 *           echo request for identifications 1 and 3, TCP for 2 and 4), bit 5
 *           "last": the length runs to the declared end (with MF clear); then the
 *           offset byte (with bit 6 of flags: * 32, reaching the 65,535 limit) and
 *           the length byte (* 8, or + 1 with an odd low bit)
 *
 * Every datagram byte at offset i is pattern(i) (the 8 bytes at offset 0 are the
 * UDP header: ports 5353 -> 53, the declared length, checksum 0; or an ICMP echo
 * header whose checksum covers the whole declared datagram), so overlaps
 * carry the same bytes and any misplaced piece shows. Invariants: every datagram
 * delivered has a declared length and the pattern's bytes, the packet and pb
 * counts stay in range after each fragment, and after the input time runs past
 * the reassembly timeout and every held fragment, packet and pb must be back.
 */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz_host.h"
#include "wire/wire.h"

#define WHO "fuzz_ip4frag"
#define MAX_OPS 64

static struct {
	struct fz_host h;
	int ok;
	uint32_t total[5]; /* declared UDP length per identification 1..4 */
	uint16_t csum[5];  /* ICMP checksum per identification (icmp_csum) */
	uint32_t csum_ok;
} F;

static void need(int ok, const char *what)
{
	if (!ok)
		fz_fail(WHO, what);
}

static uint8_t pattern(uint32_t i) { return (uint8_t)((i * 31u + (i >> 8)) ^ 0x5a); }

static void on_udp(struct fz_host *h, const uint8_t *p, uint32_t len)
{
	uint32_t i, k;
	int declared = 0;

	(void)h;
	for (k = 1; k <= 4; k++)
		declared |= F.total[k] == len + 8;
	need(declared, "delivered a datagram of a length nobody declared");
	for (i = 0; i < len; i++)
		need(p[i] == pattern(8 + i), "delivered datagram bytes out of place");
}

static void on_tx(struct fz_host *h, const uint8_t *f, uint32_t len)
{
	struct ipk_ip4_hdr ip;

	(void)h;
	if (len < 14 || ipk_rd16(f + 12) != IPK_ETHERTYPE_IP4)
		return;
	need(ipk_ip4_parse(f + 14, len - 14, &ip) > 0 && ipk_ip4_csum_ok(f + 14, ip.ihl),
	     "sent an IPv4 header that does not parse or check");
}

struct rd {
	const uint8_t *p;
	size_t n, at;
};
static uint8_t rd8(struct rd *r) { return r->at < r->n ? r->p[r->at++] : 0; }

/* The checksum of the whole ICMP echo request of identification id (header with
 * checksum 0, then the pattern), computed once per input: the reassembled datagram
 * must check (RFC 792), so the first piece carries it. */
static uint16_t icmp_csum(uint32_t id)
{
	static uint8_t d[0x3fff + 1000 + 8];
	uint32_t i, t = F.total[id];
	int odd = 0;

	if (F.csum_ok & (1u << id))
		return F.csum[id];
	for (i = 0; i < t; i++)
		d[i] = pattern(i);
	memset(d, 0, 8);
	d[0] = IPK_ICMP_ECHO;
	ipk_wr16(d + 4, 0x1234);
	ipk_wr16(d + 6, 1);
	F.csum[id] = ipk_csum_fold(ipk_csum_add(0, d, t, &odd));
	F.csum_ok |= 1u << id;
	return F.csum[id];
}

/* The first 8 bytes of datagram id: a UDP header, an ICMP echo header, or (TCP)
 * the pattern. */
static void l4_header(uint8_t proto, uint32_t id, uint8_t hdr[8])
{
	uint32_t i;

	for (i = 0; i < 8; i++)
		hdr[i] = pattern(i);
	if (proto == IPK_IPPROTO_UDP) {
		ipk_wr16(hdr, 5353);
		ipk_wr16(hdr + 2, 53);
		ipk_wr16(hdr + 4, (uint16_t)F.total[id]);
		ipk_wr16(hdr + 6, 0);
	} else if (proto == IPK_IPPROTO_ICMP) {
		hdr[0] = IPK_ICMP_ECHO;
		hdr[1] = 0;
		ipk_wr16(hdr + 2, icmp_csum(id));
		ipk_wr16(hdr + 4, 0x1234);
		ipk_wr16(hdr + 6, 1);
	}
}

static void send_frag(uint8_t fl, uint32_t off, uint32_t len)
{
	static uint8_t f[1600];
	uint32_t id = (fl & 3u) + 1, i, h;
	uint8_t proto = IPK_IPPROTO_UDP, hdr[8];
	uint16_t frag;

	if (fl & 0x10) /* not UDP: ICMP echo for identifications 1 and 3, TCP for 2 and 4 */
		proto = id & 1 ? IPK_IPPROTO_ICMP : IPK_IPPROTO_TCP;
	if (fl & 0x20) { /* the last piece, to the declared end */
		len = F.total[id] > off ? F.total[id] - off : 0;
		fl = (uint8_t)(fl & ~4u);
	}
	if (len > 1480)
		len = 1480;
	frag = (uint16_t)((off / 8) | (fl & 4 ? IPK_IP4_MF : 0));
	h = fz_eth_ip(f, proto, len, frag, (uint16_t)id);
	if (fl & 8)
		ipk_wrbe32(f + 26, IPK_IP4(10, 0, 0, 3));
	for (i = 0; i < len; i++)
		f[h + i] = pattern(off + i);
	l4_header(proto, id, hdr);
	for (i = 0; i < 8; i++) /* the header where this piece covers it */
		if (off <= i && i < off + len)
			f[h + i - off] = hdr[i];
	if (frag) {
		ipk_wr16(f + 24, 0);
		ipk_wr16(f + 24, ipk_csum_fold(ipk_csum_hdr20(f + 14)));
	} else {
		fz_fix_csums(f, h + len); /* a whole datagram: its L4 checksum too */
	}
	fz_host_rx(&F.h, f, h + len);
}

static void run_op(struct rd *r)
{
	uint8_t fl = rd8(r), b;
	uint32_t off, len;

	if ((fl & 0xc0) == 0xc0) {
		fz_host_advance(&F.h, (uint64_t)rd8(r) * 50000000ull);
		return;
	}
	off = (uint32_t)rd8(r) * (fl & 0x40 ? 256u : 8u);
	b = rd8(r);
	len = (uint32_t)(b >> 1) * 16u + (b & 1u);
	send_frag(fl, off, len);
}

static int setup(void)
{
	struct ipk_config cfg;

	fz_host_config(&cfg);
	cfg.frag_timeout_ns = 2000000000ull;
	cfg.frag_slots = 3;
	cfg.frag_max_pieces = 16;
	if (fz_host_init(&F.h, &cfg, 2, 96, 160) ||
	    ipk_arp_add_static(F.h.ctx, FZ_IP_PEER, fz_mac_peer) ||
	    ipk_arp_add_static(F.h.ctx, IPK_IP4(10, 0, 0, 3), fz_mac_peer) ||
	    ipk_udp_bind(F.h.ctx, ipk_htons(53)) < 0)
		return -1;
	F.h.on_udp = on_udp;
	F.h.on_tx = on_tx;
	fz_host_snapshot(&F.h);
	F.ok = 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rd r;
	int i;

	if (!F.ok && setup())
		fz_fail(WHO, "set-up failed"); /* a world not built would fuzz nothing */
	fz_host_restore(&F.h);
	r.p = data;
	r.n = size;
	r.at = 0;
	F.total[1] = (uint32_t)((rd8(&r) << 8) | rd8(&r)) & 0x3fffu;
	F.total[2] = (uint32_t)((rd8(&r) << 8) | rd8(&r)) & 0x3fffu;
	F.total[3] = F.total[1] + 1000;
	F.total[4] = F.total[2] + 1000;
	F.csum_ok = 0;
	for (i = 0; i < MAX_OPS && r.at < r.n; i++) {
		run_op(&r);
		fz_host_check(&F.h, WHO);
	}
	if (getenv("FUZZ_TRACE")) {
		const struct ipk_counters *k = ipk_counters(F.h.ctx);
		printf("frags %llu reassembled %llu delivered %u icmp_tx %llu frames_tx %u overlap %llu "
		       "timeout %llu too_big %llu nomem %llu malformed %llu\n",
		       (unsigned long long)k->ip4_frags_rx, (unsigned long long)k->ip4_reassembled,
		       F.h.ev.udp_dgrams, (unsigned long long)k->icmp_tx, F.h.ev.tx_frames,
		       (unsigned long long)k->drop[IPK_DROP_FRAG_OVERLAP],
		       (unsigned long long)k->drop[IPK_DROP_FRAG_TIMEOUT],
		       (unsigned long long)k->drop[IPK_DROP_FRAG_TOO_BIG],
		       (unsigned long long)k->drop[IPK_DROP_FRAG_NOMEM],
		       (unsigned long long)k->drop[IPK_DROP_IP4_MALFORMED]);
	}
	fz_host_advance(&F.h, 3000000000ull); /* past the reassembly timeout */
	fz_host_advance(&F.h, 3000000000ull);
	fz_host_check_at_start(&F.h, WHO, 0);
	need(ipk_counters(F.h.ctx)->ip4_reassembled <= ipk_counters(F.h.ctx)->ip4_frags_rx,
	     "more datagrams reassembled than fragments received");
	return 0;
}

/* ------------------------------------------------------------ seed corpus */

int fuzz_make_corpus(const char *dir)
{
	/* 2000-byte datagram (id 1) in three pieces: 0..976, 976..1952, the rest */
	static const uint8_t inorder[] = {0x07, 0xd0, 0, 100, 0x04, 0, 122, 0x04, 122, 122,
	                                  0x20, 244, 0};
	/* the same in reverse order, then a pause */
	static const uint8_t reverse[] = {0x07, 0xd0, 0, 100, 0x20, 244, 0, 0x04, 122, 122,
	                                  0x04, 0, 122, 0xc0, 4};
	/* overlapping pieces (same bytes): the datagram is dropped (RFC 5722 practice) */
	static const uint8_t overlap[] = {0x07, 0xd0, 0, 100, 0x04, 0, 122, 0x04, 120, 122,
	                                  0x20, 242, 0};
	/* unfinished datagrams on every identification and source, then timeout */
	static const uint8_t unfinished[] = {0x10, 0, 0x10, 0, 0x04, 0, 100, 0x05, 0, 100,
	                                     0x06, 0, 100, 0x07, 0, 100, 0x0c, 0, 100, 0xc0, 60};
	/* a piece past 65,535 bytes */
	static const uint8_t toobig[] = {0x3f, 0xff, 0, 100, 0x44, 255, 184, 0x04, 0, 184};
	/* a 2000-byte ping (id 1) in three pieces: reassembled, linearised, checked,
	 * answered with a fragmented echo reply */
	static const uint8_t ping[] = {0x07, 0xd0, 0, 100, 0x14, 0, 122, 0x14, 122, 122,
	                               0x34, 244, 0};
	/* the same at 3000 bytes (id 3): more than one packet buffer, so ICMP (which
	 * takes flat packets) drops it as too big */
	static const uint8_t ping3k[] = {0x07, 0xd0, 0, 100, 0x16, 0, 122, 0x16, 122, 122,
	                                 0x36, 244, 0};
	/* odd-length non-last piece, zero-length piece, a TCP fragment */
	static const uint8_t odd[] = {0x04, 0, 0, 100, 0x04, 0, 101, 0x04, 0, 0, 0x14, 0, 100};
	int n = 0;

	n += fz_put_file(dir, "in-order", inorder, sizeof(inorder));
	n += fz_put_file(dir, "reverse", reverse, sizeof(reverse));
	n += fz_put_file(dir, "overlap-same-bytes", overlap, sizeof(overlap));
	n += fz_put_file(dir, "unfinished-timeout", unfinished, sizeof(unfinished));
	n += fz_put_file(dir, "too-big", toobig, sizeof(toobig));
	n += fz_put_file(dir, "odd-and-empty", odd, sizeof(odd));
	n += fz_put_file(dir, "icmp-echo-2000", ping, sizeof(ping));
	n += fz_put_file(dir, "icmp-echo-3000-too-big", ping3k, sizeof(ping3k));
	return n;
}
