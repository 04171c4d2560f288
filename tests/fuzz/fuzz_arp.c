/*
 * libFuzzer target: ARP (RFC 826, RFC 5227) and the transmit path that waits on it.
 * One context with the built-in cache (8 entries, 3 tries, 4 frames queued per
 * entry), no static entries, a UDP bind, snapshotted once; each input is a sequence
 * of operations:
 *
 *   op & 7: 0-2  an ARP frame: opcode (request, reply, other), sender MAC and IP,
 *                target IP and Ethernet destination each picked from a table of
 *                ordinary and hostile values (ours, zero, broadcast, multicast,
 *                loopback, off-link), with a length variant (exact, padded, short)
 *           3    the application sends a UDP datagram to an address from the table
 *           4    an ICMP echo request arrives from an address of the table (the
 *                reply needs ARP)
 *           5    time passes: b * 100 ms
 *           6    gratuitous ARP (ipk_arp_announce) or ipk_icmp_echo to the table
 *           7    a raw ARP frame: the fuzzer's 28 bytes after an Ethernet header
 *
 * fuzz_arp_owned is the same target built with FZ_ARP_OWNED: the integrator owns the
 * table (ops->arp_resolve answers from the bindings ops->arp_learned reported) and
 * the core's cache only holds pending entries.
 *
 * Invariants: every ARP frame we send parses, has our MAC and address as sender
 * (RFC 826), requests go to broadcast and replies unicast to the asker; every
 * IPv4 frame goes from our MAC to a unicast MAC; ops->arp_learned never reports
 * our address, 0.0.0.0, a broadcast, multicast or loopback address or a multicast
 * MAC; every unicast IPv4 frame goes to the MAC last learned for its destination
 * (a model of the cache: a stale next-hop cache shows); requests we send are
 * bounded by arp_retries per address that needed one;
 * and after the input, once time passes every retry and entry life, every queued
 * frame, pb and packet is back.
 */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz_host.h"
#include "wire/wire.h"

#define WHO "fuzz_arp"
#define MAX_OPS 64

#define MAX_SENT 64

static struct {
	struct fz_host h;
	int ok;
	uint32_t requests_tx, needs; /* ARP requests we sent; events that may need one */
	uint32_t probes_tx, arp_in;  /* unicast probes sent; ARP frames fed (challenges) */
	uint32_t announces;
	/* the bindings ops->arp_learned reported, latest last (a model of the cache) */
	uint32_t learned_ip[32];
	uint8_t learned_mac[32][6];
	uint32_t nlearned;
	/* unicast IPv4 frames sent during the current operation: next hop, MAC */
	uint32_t sent_ip[MAX_SENT];
	uint8_t sent_mac[MAX_SENT][6];
	uint32_t nsent;
} A;

static const uint8_t macs[8][6] = {
	{2, 0, 0, 0, 0, 2}, {2, 0, 0, 0, 0, 3}, {0, 0, 0, 0, 0, 0}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	{1, 0, 0x5e, 0, 0, 1}, {2, 0, 0, 0, 0, 1} /* ours */, {0x33, 0x33, 0, 0, 0, 1},
	{0x0a, 0xbb, 0xcc, 0xdd, 0xee, 0xff}};

static uint32_t ip_of(uint8_t sel)
{
	switch (sel & 15) {
	case 0: return FZ_IP_PEER;
	case 1: return IPK_IP4(10, 0, 0, 3);
	case 2: return FZ_IP_US;
	case 3: return 0;
	case 4: return IPK_IP4(10, 0, 0, 255);
	case 5: return IPK_IP4(255, 255, 255, 255);
	case 6: return IPK_IP4(224, 0, 0, 1);
	case 7: return IPK_IP4(127, 0, 0, 1);
	case 8: return IPK_IP4(192, 168, 1, 1); /* off-link */
	case 9: return IPK_IP4(10, 0, 0, 0);   /* the network address */
	default: return IPK_IP4(10, 0, 0, 4 + (sel & 15)); /* more on-link hosts */
	}
}

static void need(int ok, const char *what)
{
	if (!ok)
		fz_fail(WHO, what);
}

static int is_bad_learn_ip(uint32_t ip_be)
{
	const uint8_t *b = (const uint8_t *)&ip_be;

	return ip_be == 0 || ip_be == FZ_IP_US || b[0] >= 224 || b[0] == 127 ||
	       ip_be == IPK_IP4(10, 0, 0, 255) || ip_be == IPK_IP4(10, 0, 0, 0);
}

static void on_tx(struct fz_host *h, const uint8_t *f, uint32_t len)
{
	struct ipk_arp_hdr a;

	(void)h;
	need(len >= 14 && !memcmp(f + 6, fz_mac_us, 6), "sent a frame not from our MAC");
	if (ipk_rd16(f + 12) == IPK_ETHERTYPE_IP4) {
		/* broadcast and multicast destinations go to group MACs (RFC 1112 §6.4) */
		need((f[0] & 1) == 0 || (len >= 34 && is_bad_learn_ip(ipk_rdbe32(f + 30)) &&
		                         ipk_rdbe32(f + 30) != FZ_IP_US),
		     "sent an IPv4 unicast frame to a multicast MAC");
		if ((f[0] & 1) == 0 && len >= 34 && A.nsent < MAX_SENT) {
			/* on-link, no gateway: the next hop is the destination */
			A.sent_ip[A.nsent] = ipk_rdbe32(f + 30);
			memcpy(A.sent_mac[A.nsent++], f, 6);
		}
		return;
	}
	need(ipk_rd16(f + 12) == IPK_ETHERTYPE_ARP, "sent an unknown EtherType");
	need(ipk_arp_parse(f + 14, len - 14, &a) == IPK_ARP_LEN, "sent an ARP that does not parse");
	need(!memcmp(a.sha, fz_mac_us, 6) && a.spa_be == FZ_IP_US, "sent an ARP not from us");
	if (a.op == IPK_ARP_REQUEST && (f[0] & 1) == 0) {
		/* RFC 1122 §2.3.2.1 unicast poll: a bound entry another MAC claims is
		 * probed at the MAC it holds, which must be the one last learned */
		uint32_t i;

		for (i = 0; i < A.nlearned && A.learned_ip[i] != a.tpa_be; i++)
			;
		need(i < A.nlearned && !memcmp(f, A.learned_mac[i], 6) &&
		         !memcmp(a.tha, A.learned_mac[i], 6),
		     "sent a unicast request to a MAC not bound to its target");
		A.probes_tx++;
	} else if (a.op == IPK_ARP_REQUEST) {
		need(!memcmp(f, macs[3], 6), "sent a request that is not broadcast");
		A.requests_tx++;
	} else {
		need(a.op == IPK_ARP_REPLY, "sent an ARP opcode other than request or reply");
		need(!memcmp(f, a.tha, 6) && (f[0] & 1) == 0, "sent a reply not unicast to the asker");
	}
}

static void on_learned(uint32_t ip_be, const uint8_t mac[6], void *opaque);

struct rd {
	const uint8_t *p;
	size_t n, at;
};
static uint8_t rd8(struct rd *r) { return r->at < r->n ? r->p[r->at++] : 0; }

static void arp_frame(struct rd *r, uint8_t op)
{
	uint8_t f[64], sel = rd8(r), sel2 = rd8(r);
	struct ipk_arp_hdr a;
	uint32_t len = 42;

	memset(f, 0, sizeof(f));
	memcpy(f, sel2 & 0x80 ? fz_mac_us : macs[3], 6);
	if ((sel2 & 0xc0) == 0x40)
		memcpy(f, macs[7], 6);                   /* someone else's unicast */
	a.op = op == 0 ? IPK_ARP_REQUEST : op == 1 ? IPK_ARP_REPLY : (uint16_t)rd8(r);
	memcpy(a.sha, macs[sel & 7], 6);
	memcpy(f + 6, a.sha, 6);
	a.spa_be = ip_of((uint8_t)(sel >> 3));
	memset(a.tha, 0, 6);
	if (op == 1)
		memcpy(a.tha, fz_mac_us, 6);
	a.tpa_be = ip_of(sel2);
	if ((sel2 & 0x30) == 0x30)
		a.tpa_be = a.spa_be;                     /* gratuitous / RFC 5227 probe shape */
	ipk_wr16(f + 12, IPK_ETHERTYPE_ARP);
	ipk_arp_emit(f + 14, 28, &a);
	if (sel & 0x80)
		len = (sel2 & 0x20) ? 60 : 41;           /* padded, or one byte short */
	A.arp_in++;
	fz_host_rx(&A.h, f, len);
}

static void raw_arp(struct rd *r)
{
	uint8_t f[42];
	uint32_t i;

	memcpy(f, macs[3], 6);
	memcpy(f + 6, macs[0], 6);
	ipk_wr16(f + 12, IPK_ETHERTYPE_ARP);
	for (i = 14; i < 42; i++)
		f[i] = rd8(r);
	A.arp_in++;
	fz_host_rx(&A.h, f, 42);
}

static void ping_in(uint8_t sel)
{
	uint8_t f[64];
	uint32_t h = fz_eth_ip(f, IPK_IPPROTO_ICMP, 16, 0, 7);

	ipk_wrbe32(f + 26, ip_of(sel));
	memcpy(f + 6, macs[sel >> 5], 6);
	memset(f + h, 0, 16);
	f[h] = IPK_ICMP_ECHO;
	fz_fix_csums(f, h + 16);
	A.needs++;
	fz_host_rx(&A.h, f, h + 16);
}

static void run_op(struct rd *r)
{
	static const uint8_t payload[16] = "datagram to arp";
	uint8_t op = rd8(r), b;

	switch (op & 7) {
	case 0: case 1: case 2: arp_frame(r, (uint8_t)(op & 7)); break;
	case 3:
		b = rd8(r);
		A.needs++;
		ipk_udp_sendto(A.h.ctx, ipk_htons(53), ip_of(b), ipk_htons(9), payload,
		              1u + (b >> 4), A.h.now);
		break;
	case 4: ping_in(rd8(r)); break;
	case 5: fz_host_advance(&A.h, (uint64_t)rd8(r) * 100000000ull); break;
	case 6:
		b = rd8(r);
		if (b & 1) {
			A.announces++;
			ipk_arp_announce(A.h.ctx, A.h.now);
		} else {
			A.needs++;
			ipk_icmp_echo(A.h.ctx, ip_of((uint8_t)(b >> 1)), ipk_htons(1), ipk_htons(2), 8, A.h.now);
		}
		break;
	default: raw_arp(r); break;
	}
}

static void on_learned(uint32_t ip_be, const uint8_t mac[6], void *opaque)
{
	uint32_t i;

	(void)opaque;
	A.h.ev.arp_learned++;
	need(!is_bad_learn_ip(ip_be), "learned a binding for a special address");
	need((mac[0] & 1) == 0, "learned a multicast MAC");
	for (i = 0; i < A.nlearned && A.learned_ip[i] != ip_be; i++)
		;
	if (i == A.nlearned) {
		if (A.nlearned == 32)
			return;
		A.nlearned++;
	}
	A.learned_ip[i] = ip_be;
	memcpy(A.learned_mac[i], mac, 6);
}

/* After each operation: every unicast IPv4 frame went to the MAC last learned for
 * its next hop (ARP flushes a queue before it reports the binding, so the check
 * waits for the operation's end). A stale next-hop cache or a frame sent to a MAC
 * never learned shows here. */
static void check_sent(void)
{
	uint32_t i, j;

	for (i = 0; i < A.nsent; i++) {
		for (j = 0; j < A.nlearned && A.learned_ip[j] != A.sent_ip[i]; j++)
			;
		need(j < A.nlearned, "sent IPv4 to an address no binding was learned for");
		need(!memcmp(A.learned_mac[j], A.sent_mac[i], 6),
		     "sent IPv4 to a MAC other than the one last learned");
	}
	A.nsent = 0;
}

#ifdef FZ_ARP_OWNED
/* The integrator's own table (ops->arp_resolve): the bindings ops->arp_learned gave. */
static int owned_resolve(uint32_t ip_be, uint8_t mac[6], void *opaque)
{
	uint32_t i;

	(void)opaque;
	for (i = 0; i < A.nlearned; i++)
		if (A.learned_ip[i] == ip_be) {
			memcpy(mac, A.learned_mac[i], 6);
			return 1;
		}
	return 0;
}
#endif

static int setup(void)
{
	struct ipk_config cfg;

	fz_host_config(&cfg);
	cfg.arp_entries = 8;
	cfg.arp_retries = 3;
	cfg.arp_retry_ns = 1000000000ull;
	cfg.arp_ttl_ns = 5000000000ull;
	cfg.arp_queue_per_entry = 4;
	if (fz_host_init(&A.h, &cfg, 2, 64, 96) || ipk_udp_bind(A.h.ctx, ipk_htons(53)) < 0)
		return -1;
	A.h.ops.arp_learned = on_learned;
#ifdef FZ_ARP_OWNED
	A.h.ops.arp_resolve = owned_resolve;
#endif
	A.h.on_tx = on_tx;
	fz_host_snapshot(&A.h);
	A.ok = 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rd r;
	int i;

	if (!A.ok && setup())
		fz_fail(WHO, "set-up failed"); /* a world not built would fuzz nothing */
	fz_host_restore(&A.h);
	A.requests_tx = A.needs = A.announces = A.probes_tx = A.arp_in = 0;
	A.nlearned = A.nsent = 0;
	r.p = data;
	r.n = size;
	r.at = 0;
	for (i = 0; i < MAX_OPS && r.at < r.n; i++) {
		run_op(&r);
		fz_host_check(&A.h, WHO);
		check_sent();
	}
	/* past every retry and every entry's life */
	for (i = 0; i < 3; i++) {
		fz_host_advance(&A.h, 10000000000ull);
		check_sent();
	}
	fz_host_check_at_start(&A.h, WHO, 0);
	/* each address that needed resolving costs at most arp_retries requests
	 * (a gratuitous ARP is a request too) */
	need(A.requests_tx <= A.needs * A.h.cfg.arp_retries + A.announces,
	     "more ARP requests than arp_retries per address");
	/* a challenge needs an ARP frame from the claimant and costs at most
	 * arp_retries probes */
	need(A.probes_tx <= A.arp_in * A.h.cfg.arp_retries, "more ARP probes than arp_retries per claim");
	return 0;
}

/* ------------------------------------------------------------ seed corpus */

int fuzz_make_corpus(const char *dir)
{
	/* request for us from the peer (sel: mac 0, ip 0; sel2: tpa 2 = us, to broadcast) */
	static const uint8_t req[] = {0, 0x00, 0x02};
	/* we send to 10.0.0.3 (queued), the reply arrives, we send again */
	static const uint8_t resolve[] = {3, 0x01, 1, 0x09, 0x82, 3, 0x01};
	/* unanswered: retries then timeout, queue dropped */
	static const uint8_t timeout[] = {3, 0x0e, 3, 0x0e, 3, 0x0e, 3, 0x0e, 3, 0x0e, 5, 50};
	/* hostile: learn ours, broadcast, multicast MAC, probe shape, short frame */
	static const uint8_t hostile[] = {0, 0x10, 0x02, 1, 0x2b, 0x82, 0, 0x04, 0x02, 0, 0x18, 0x32,
	                                  0, 0x80, 0x02, 2, 0x00, 0x82, 7};
	/* ping from an unknown host; a gratuitous ARP; echo to the network address */
	static const uint8_t ping[] = {4, 0x01, 6, 1, 6, 0x12, 5, 20};
	/* table full of pending entries, then more */
	static const uint8_t flood[] = {3, 0x0a, 3, 0x0b, 3, 0x0c, 3, 0x0d, 3, 0x0e, 3, 0x0f,
	                                3, 0x00, 3, 0x01, 3, 0x08, 3, 0x09};
	int n = 0;

	n += fz_put_file(dir, "request-for-us", req, sizeof(req));
	n += fz_put_file(dir, "resolve-and-send", resolve, sizeof(resolve));
	n += fz_put_file(dir, "unanswered", timeout, sizeof(timeout));
	n += fz_put_file(dir, "hostile-senders", hostile, sizeof(hostile));
	n += fz_put_file(dir, "ping-announce", ping, sizeof(ping));
	n += fz_put_file(dir, "pending-flood", flood, sizeof(flood));
	return n;
}
