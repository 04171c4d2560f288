/*
 * libFuzzer target: arbitrary frames into an engine that holds established TCP
 * connections, a listener and a UDP bind.
 *
 *   build (clang):  meson setup build-fuzz -Dc_args=-fsanitize=address,undefined \
 *                   && ninja -C build-fuzz tests/fuzz/fuzz_frames
 *   run:            ./build-fuzz/tests/fuzz/fuzz_frames -max_total_time=60 tests/fuzz/corpus/
 *   replay (gcc):   ./build/tests/fuzz/fuzz_frames_replay tests/fuzz/corpus/ crash-1234
 *
 * Input: one flags byte, then frames, each a 2-byte big-endian length and that many
 * bytes. Flags bit 0: fix the IPv4/TCP/UDP/ICMP checksums of each frame before it
 * goes in (so the fuzzer reaches past checksum checks); bit 1: let timers run
 * between frames; bits 2-3: which connection's current sequence numbers patch a
 * TCP frame's seq/ack (so in-window segments are easy to reach); bit 4: hand each
 * frame in as a chain of three packets (A declares IPK_CAP_LRO), the first cut at
 * the offset bits 5-7 choose (inside or after the Ethernet, IPv4 or TCP header),
 * the second halfway through the rest.
 *
 * The world (engine A with a listener on 80, UDP 53, and three connections opened
 * by a peer engine B over a simulated link) is the same for every input, so every
 * input replays exactly: the replay build rebuilds it from the same seed, the
 * libFuzzer build builds it once and copies it back (fz_world below). After the frames, virtual time runs
 * on (retransmissions, TIME_WAIT, reassembly timeouts) and the pool invariants are
 * checked; a violation aborts, which libFuzzer reports as a crash.
 */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#ifdef FZ_ARENA
#include "fz_arena.h"
#endif

#define NCONN 3

struct fz {
	struct sim *s;
	struct sim_node *a, *b;
	struct sim_link *l;
	struct ipk_conn *bc[NCONN];
	struct ipk_config ca, cb;
};

static int fz_all_up(void *arg)
{
	struct fz *f = (struct fz *)arg;
	int i;

	for (i = 0; i < NCONN; i++)
		if (!f->bc[i] || ipk_tcp_state(f->bc[i]) != IPK_TCP_ESTABLISHED)
			return 0;
	return 1;
}

static void fz_cfg(struct ipk_config *c, uint32_t idx)
{
	sim_node_config(c, idx);
	c->tcp_time_wait_ns = SIM_SEC(1);
	c->tcp_syn_retries = 2;
	c->tcp_max_retries = 3;
	c->frag_timeout_ns = SIM_SEC(2);
	if (idx == 1) {
		c->caps |= IPK_CAP_LRO; /* chains in (flags bit 4) */
		/* IPv6 on A (issue 19): fd00::1/64, no DAD or RS so the world is ready
		 * at once and the same for every input */
		c->ip6_enable = 1;
		c->ip6_addr[0] = 0xfd;
		c->ip6_addr[15] = 1;
		c->ip6_dad_transmits = 0;
		c->ip6_rs_count = 0;
	}
}

static int fz_build(struct fz *f)
{
	struct sim_node_res r;
	struct sim_link_cfg lc;
	int i;

	memset(f, 0, sizeof(*f));
	memset(&r, 0, sizeof(r));
	r.conns = 16;
	r.pbs = 512;
	r.pkts = 512;
	f->s = sim_create(12345);
	fz_cfg(&f->ca, 1);
	fz_cfg(&f->cb, 2);
	f->a = sim_node_create(f->s, &f->ca, &r);
	f->b = sim_node_create(f->s, &f->cb, &r);
	sim_link_cfg_default(&lc);
	lc.delay_ns = SIM_US(50);
	if (!f->a || !f->b || !(f->l = sim_connect(f->s, f->a, f->b, &lc)) ||
	    ipk_tcp_listen(f->a->ctx, ipk_htons(80), 8) < 0 || ipk_udp_bind(f->a->ctx, ipk_htons(53)) < 0)
		return -1;
	for (i = 0; i < NCONN; i++)
		if (ipk_tcp_connect(f->b->ctx, f->ca.ip4_be, ipk_htons(80), ipk_htons((uint16_t)(40000 + i)),
		                    NULL, &f->bc[i], 0) < 0)
			return -1;
	sim_node_kick(f->b);
	if (sim_run(f->s, SIM_SEC(5), fz_all_up, f) != SIM_DONE)
		return -1;
	for (i = 0; i < NCONN; i++)
		ipk_tcp_write(f->b->ctx, f->bc[i], "hello fuzz", 10, f->s->now);
	sim_node_kick(f->b);
	sim_run(f->s, f->s->now + SIM_MS(100), NULL, NULL);
	return 0;
}

/* ------------------------------------------------------------ frame fix-ups */

static uint16_t rd16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* Returns the IPv4 header offset, or 0 when the frame is not a sane IPv4 frame. */
static uint32_t ip_at(const uint8_t *f, uint32_t len, uint32_t *ihl, uint32_t *tot)
{
	if (len < 34 || rd16(f + 12) != 0x0800 || (f[14] >> 4) != 4)
		return 0;
	*ihl = (uint32_t)(f[14] & 15) * 4;
	*tot = rd16(f + 16);
	if (*ihl < 20 || *tot < *ihl || *tot > len - 14)
		return 0;
	return 14;
}

/* IPv6 with ICMPv6, UDP or TCP right after the 40-byte header: its checksum
 * (RFC 8200 §8.1 pseudo-header), so TCP over IPv6 reaches the state machine. */
static void fix_csum6(uint8_t *f, uint32_t len)
{
	uint8_t *ip = f + 14, *l4 = f + 54, nh;
	uint32_t plen, sum, at, hl;

	if (len < 54 || (ip[0] >> 4) != 6)
		return;
	plen = rd16(ip + 4);
	if (plen > len - 54)
		return;
	nh = ip[6];
	if (nh == 0 && plen >= 8) { /* one hop-by-hop header first (MLD's router alert) */
		hl = 8u * (l4[1] + 1u);
		if (hl > plen)
			return;
		nh = l4[0];
		l4 += hl;
		plen -= hl;
	}
	if (nh == 58 && plen >= 4)
		at = 2;
	else if (nh == 17 && plen >= 8)
		at = 6;
	else if (nh == 6 && plen >= 20)
		at = 16;
	else
		return;
	wr16(l4 + at, 0);
	sum = sim_csum_add(0, ip + 8, 32) + nh + plen;
	wr16(l4 + at, sim_csum_fold(sim_csum_add(sum, l4, plen)));
}

static void fix_csums(uint8_t *f, uint32_t len)
{
	uint32_t ihl, tot, l4len, at, sum;
	uint8_t *ip, *l4;

	if (len >= 14 && rd16(f + 12) == 0x86dd) {
		fix_csum6(f, len);
		return;
	}
	if (!ip_at(f, len, &ihl, &tot))
		return;
	ip = f + 14;
	l4 = ip + ihl;
	l4len = tot - ihl;
	wr16(ip + 10, 0);
	wr16(ip + 10, sim_csum_fold(sim_csum_add(0, ip, ihl)));
	if (rd16(ip + 6) & 0x3fff)
		return; /* fragment: the datagram checksum spans pieces */
	if (ip[9] == 6 && l4len >= 20)
		at = 16;
	else if (ip[9] == 17 && l4len >= 8)
		at = 6;
	else if (ip[9] == 1 && l4len >= 4)
		at = 2;
	else
		return;
	wr16(l4 + at, 0);
	sum = ip[9] == 1 ? 0 : sim_csum_add(0, ip + 12, 8) + ip[9] + l4len;
	wr16(l4 + at, sim_csum_fold(sim_csum_add(sum, l4, l4len)));
}

/* Aim a TCP frame at connection `which` by giving it that connection's ports
 * (sequence numbers stay the fuzzer's; the corpus carries in-window ones). */
static void aim_tcp(struct fz *f, uint8_t *fr, uint32_t len, int which)
{
	struct ipk_tuple t;
	uint32_t ihl, tot;
	uint8_t *tcp;

	if (!ip_at(fr, len, &ihl, &tot) || fr[14 + 9] != 6 || tot - ihl < 20 || !f->bc[which])
		return;
	if (ipk_tcp_tuple(f->bc[which], &t) < 0)
		return;
	tcp = fr + 14 + ihl;
	/* B's tuple seen from A: B's local port is A's peer port */
	memcpy(tcp, &t.local_port_be, 2);
	memcpy(tcp + 2, &t.peer_port_be, 2);
}

/* Frame fr as a packet, or (flags bit 4) a chain of up to three packets cut at a
 * header boundary or inside a header; NULL when the pool is empty. */
static struct sim_pkt *fz_pkt(struct fz *f, const uint8_t *fr, uint32_t len, uint8_t flags)
{
	static const uint32_t first_cut[8] = {14, 24, 34, 42, 54, 66, 74, 0};
	uint32_t c1 = first_cut[flags >> 5], c2, i;
	uint32_t at[4];
	struct sim_pkt *head = NULL, **tail = &head;

	if (!(flags & 0x10))
		return sim_pkt_from(f->a->pool, fr, len);
	if (c1 == 0 || c1 > len)
		c1 = len / 2;
	c2 = c1 + (len - c1) / 2;
	at[0] = 0;
	at[1] = c1;
	at[2] = c2;
	at[3] = len;
	for (i = 0; i < 3; i++) {
		struct sim_pkt *k = sim_pkt_from(f->a->pool, fr + at[i], at[i + 1] - at[i]);

		if (!k) {
			while (head) {
				struct sim_pkt *nx = head->next;
				sim_pkt_free(head);
				head = nx;
			}
			return NULL;
		}
		*tail = k;
		tail = &k->next;
	}
	return head;
}

/* ------------------------------------------------------------ invariants */

static void check_node(const struct sim_node *n)
{
	if (n->pool->descs_out > n->pool->ndescs || n->pool->bufs_out > n->pool->nbufs ||
	    n->pool->bufs_out > n->pool->descs_out || ipk_conns_free(n->ctx) > n->res.conns ||
	    ipk_pbs_free(n->ctx) > n->res.pbs) {
		fprintf(stderr, "fuzz_frames: pool invariant broken on node %u\n", n->index);
		abort();
	}
}

/* ------------------------------------------------------------ the world */

#ifdef FZ_ARENA
/* libFuzzer build: the world is built once in the snapshot arena (fz_arena.c) and
 * copied back before each input; the pools' buffer memory is left out of the copy
 * and only the buffers in use when the world was built are put back. Under ASan the
 * arena is off and the world is built for every input, as in the replay build. */
struct live {
	struct sim_pool *pool;
	uint32_t n, *idx;
	uint8_t *bytes;
};
static struct fz world;
static struct live live[2];
static int world_state = -1; /* -1 not tried, 0 no arena, 1 snapshot taken */

static void live_take(struct live *l, struct sim_pool *p)
{
	uint32_t i;

	l->pool = p;
	l->idx = (uint32_t *)malloc(sizeof(uint32_t) * p->nbufs);
	l->bytes = (uint8_t *)malloc((size_t)p->nbufs * p->buf_size);
	if (!l->idx || !l->bytes)
		abort(); /* harness memory at start-up, not input */
	for (l->n = 0, i = 0; i < p->nbufs; i++)
		if (p->bufs[i].refcnt) {
			memcpy(l->bytes + (size_t)l->n * p->buf_size, p->bufs[i].mem, p->buf_size);
			l->idx[l->n++] = i;
		}
	fz_arena_exclude(p->mem, (size_t)p->nbufs * p->buf_size);
}

static void live_put(const struct live *l)
{
	uint32_t i;

	for (i = 0; i < l->n; i++)
		memcpy(l->pool->bufs[l->idx[i]].mem, l->bytes + (size_t)i * l->pool->buf_size,
		       l->pool->buf_size);
}

static int fz_world(struct fz *f)
{
	if (world_state < 0) {
		world_state = 0;
		if (fz_arena_on()) {
			if (fz_build(&world))
				return -1;
			live_take(&live[0], world.a->pool);
			live_take(&live[1], world.b->pool);
			fz_arena_snapshot();
			world_state = 1;
		}
	}
	if (world_state == 0)
		return fz_build(f);
	fz_arena_restore();
	live_put(&live[0]);
	live_put(&live[1]);
	*f = world;
	return 0;
}

static void fz_world_done(struct fz *f)
{
	if (world_state == 0)
		sim_destroy(f->s);
	f->s = NULL;
}
#else
static int fz_world(struct fz *f) { return fz_build(f); }
static void fz_world_done(struct fz *f)
{
	sim_destroy(f->s);
	f->s = NULL;
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fz f;
	uint8_t flags, frame[2048];
	size_t at = 1;
	int nframes = 0;

	if (size < 1)
		return 0;
	if (fz_world(&f)) {
		fz_world_done(&f);
		return 0;
	}
	flags = data[0];
	while (at + 2 <= size && nframes < 64) {
		uint32_t len = (uint32_t)(data[at] << 8 | data[at + 1]);
		struct sim_pkt *k;
		void *pkts[1];

		at += 2;
		if (len > size - at)
			len = (uint32_t)(size - at);
		if (len > sizeof(frame))
			len = sizeof(frame);
		memcpy(frame, data + at, len);
		at += len;
		nframes++;
		if (flags & 0x0c)
			aim_tcp(&f, frame, len, ((flags >> 2) & 3) % NCONN);
		if (flags & 1)
			fix_csums(frame, len);
		k = fz_pkt(&f, frame, len, flags);
		if (!k)
			continue;
		pkts[0] = k;
		ipk_run(f.a->ctx, pkts, 1, f.s->now);
		sim_node_kick(f.a);
		check_node(f.a);
		if (flags & 2)
			sim_run(f.s, f.s->now + SIM_MS(300), NULL, NULL);
	}
	/* let every timer that the frames armed fire: RTOs, TIME_WAIT, reassembly */
	sim_run(f.s, f.s->now + SIM_SEC(10), NULL, NULL);
	check_node(f.a);
	check_node(f.b);
	fz_world_done(&f);
	return 0;
}

/* ------------------------------------------------------------ seed corpus */

static int put_file(const char *dir, const char *name, uint8_t flags, const uint8_t *fr,
                    uint32_t len)
{
	char path[1024];
	uint8_t hdr[3];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fp = fopen(path, "wb");
	if (!fp)
		return 0;
	hdr[0] = flags;
	hdr[1] = (uint8_t)(len >> 8);
	hdr[2] = (uint8_t)len;
	fwrite(hdr, 1, 3, fp);
	fwrite(fr, 1, len, fp);
	fclose(fp);
	return 1;
}

/* Frames B sends right after the world is built, captured from the link's pcap:
 * exactly in window when replayed into a freshly built world. */
static int corpus_live(const char *dir)
{
	static struct fz f;
	const char *tmp = "fuzz_corpus_tmp.pcap";
	uint8_t rec[16], fr[2048];
	int n = 0, k = 0;
	FILE *fp;

	if (fz_build(&f) || sim_link_pcap(f.l, tmp))
		return 0;
	ipk_tcp_write(f.b->ctx, f.bc[0], "data segment", 12, f.s->now);
	ipk_tcp_close(f.b->ctx, f.bc[1], f.s->now);
	ipk_icmp_echo(f.b->ctx, f.ca.ip4_be, ipk_htons(7), ipk_htons(1), 32, f.s->now);
	ipk_udp_sendto(f.b->ctx, ipk_htons(5353), f.ca.ip4_be, ipk_htons(53), "query", 5, f.s->now);
	ipk_tcp_connect(f.b->ctx, f.ca.ip4_be, ipk_htons(80), ipk_htons(41000), NULL, NULL, f.s->now);
	sim_node_kick(f.b);
	sim_run(f.s, f.s->now + SIM_US(20), NULL, NULL); /* sent, not yet arrived */
	sim_destroy(f.s);
	fp = fopen(tmp, "rb");
	if (!fp || fread(rec, 1, 8, fp) != 8 || fseek(fp, 24, SEEK_SET)) {
		if (fp)
			fclose(fp);
		return 0;
	}
	while (fread(rec, 1, 16, fp) == 16) {
		uint32_t len = rec[8] | rec[9] << 8 | (uint32_t)rec[10] << 16 | (uint32_t)rec[11] << 24;
		char name[64];
		if (len > sizeof(fr) || fread(fr, 1, len, fp) != len)
			break;
		if (fr[11] != 2) /* only frames from B (MAC ...:02) */
			continue;
		snprintf(name, sizeof(name), "live-%02d", k++);
		n += put_file(dir, name, 0, fr, len);
	}
	fclose(fp);
	remove(tmp);
	return n;
}

static uint32_t eth_ip(uint8_t *fr, uint8_t proto, uint32_t l4len, uint16_t frag)
{
	static const uint8_t a[6] = {2, 0, 0, 0, 0, 1}, b[6] = {2, 0, 0, 0, 0, 2};
	uint8_t *ip = fr + 14;

	memcpy(fr, a, 6);
	memcpy(fr + 6, b, 6);
	wr16(fr + 12, 0x0800);
	memset(ip, 0, 20);
	ip[0] = 0x45;
	wr16(ip + 2, (uint16_t)(20 + l4len));
	wr16(ip + 4, 99);
	wr16(ip + 6, frag);
	ip[8] = 64;
	ip[9] = proto;
	ip[12] = 10; ip[15] = 2; /* 10.0.0.2 -> 10.0.0.1 */
	ip[16] = 10; ip[19] = 1;
	return 34;
}

static int corpus_crafted(const char *dir)
{
	uint8_t fr[1600];
	uint32_t h;
	int n = 0;

	/* ARP request for 10.0.0.1 */
	memset(fr, 0, sizeof(fr));
	memset(fr, 0xff, 6);
	fr[6] = 2; fr[11] = 2;
	wr16(fr + 12, 0x0806);
	wr16(fr + 14, 1); wr16(fr + 16, 0x0800); fr[18] = 6; fr[19] = 4; wr16(fr + 20, 1);
	fr[22] = 2; fr[27] = 2; fr[28] = 10; fr[31] = 2; fr[38] = 10; fr[41] = 1;
	n += put_file(dir, "arp-request", 0, fr, 42);
	n += put_file(dir, "arp-short", 0, fr, 30);
	/* SYN to the listener with MSS, WS, SACK-permitted, timestamps (checksums fixed) */
	memset(fr, 0, sizeof(fr));
	h = eth_ip(fr, 6, 40, 0);
	wr16(fr + h, 45000); wr16(fr + h + 2, 80); fr[h + 7] = 1; fr[h + 12] = 10 << 4;
	fr[h + 13] = 0x02; wr16(fr + h + 14, 65535);
	{
		static const uint8_t opt[20] = {2, 4, 5, 0xb4, 1, 3, 3, 7, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0};
		memcpy(fr + h + 20, opt, 20);
	}
	n += put_file(dir, "tcp-syn", 1, fr, h + 40);
	fr[h + 20 + 1] = 0; /* option length 0: malformed */
	n += put_file(dir, "tcp-syn-bad-option", 1, fr, h + 40);
	fr[h + 12] = 15 << 4; /* data offset past the end */
	n += put_file(dir, "tcp-bad-doff", 1, fr, h + 40);
	/* fragments of a UDP datagram to port 53, second half first */
	memset(fr, 0, sizeof(fr));
	h = eth_ip(fr, 17, 800, 0x2000 | 100);
	memset(fr + h, 0xab, 800);
	n += put_file(dir, "ip-frag-tail-first", 1, fr, h + 800);
	h = eth_ip(fr, 17, 800, 0x2000);
	wr16(fr + h, 5353); wr16(fr + h + 2, 53); wr16(fr + h + 4, 1608);
	n += put_file(dir, "ip-frag-head", 1, fr, h + 800);
	/* ping with options-sized IHL but no room */
	memset(fr, 0, sizeof(fr));
	h = eth_ip(fr, 1, 16, 0);
	fr[h] = 8;
	n += put_file(dir, "icmp-echo", 1, fr, h + 16);
	fr[14] = 0x4f;
	n += put_file(dir, "ip-bad-ihl", 0, fr, h + 16);
	fr[14] = 0x45;
	wr16(fr + 16, 9000); /* total length past the frame */
	n += put_file(dir, "ip-bad-totlen", 0, fr, h + 16);
	n += put_file(dir, "runt", 0, fr, 10);
	/* a 1200-byte TCP segment to connection 0 as a chain (IPK_CAP_LRO), cut after
	 * the TCP header (0x80: first cut at 54) and inside the IPv4 header (0x20: 24) */
	memset(fr, 0, sizeof(fr));
	h = eth_ip(fr, 6, 1220, 0x4000);
	fr[h + 7] = 1; fr[h + 12] = 5 << 4; fr[h + 13] = 0x18; wr16(fr + h + 14, 65535);
	memset(fr + h + 20, 0x5c, 1200);
	n += put_file(dir, "tcp-lro-chain", 0x01 | 0x04 | 0x10 | 0x80, fr, h + 1220);
	n += put_file(dir, "tcp-lro-chain-split-ip", 0x01 | 0x04 | 0x10 | 0x20, fr, h + 1220);
	return n;
}

/* Ethernet + IPv6 fd00::2 -> fd00::1 (or dst, a group) with next header nh. */
static uint32_t eth_ip6(uint8_t *fr, uint8_t nh, uint32_t plen, uint8_t hlim, int to_group)
{
	static const uint8_t a[6] = {2, 0, 0, 0, 0, 1}, b[6] = {2, 0, 0, 0, 0, 2};
	static const uint8_t sn[6] = {0x33, 0x33, 0xff, 0, 0, 1};
	uint8_t *ip = fr + 14;

	memcpy(fr, to_group ? sn : a, 6);
	memcpy(fr + 6, b, 6);
	wr16(fr + 12, 0x86dd);
	memset(ip, 0, 40);
	ip[0] = 0x60;
	wr16(ip + 4, (uint16_t)plen);
	ip[6] = nh;
	ip[7] = hlim;
	ip[8] = 0xfd; ip[23] = 2;
	if (to_group) { /* ff02::1:ff00:1, fd00::1's solicited-node group */
		ip[24] = 0xff; ip[25] = 2; ip[35] = 1; ip[36] = 0xff; ip[39] = 1;
	} else {
		ip[24] = 0xfd; ip[39] = 1;
	}
	return 54;
}

/* fr's IPv6 source made fe80::2 and its destination dst (with its group MAC). */
static void ip6_ll_to(uint8_t *fr, const uint8_t dst[16])
{
	fr[14 + 8] = 0xfe; fr[14 + 9] = 0x80;
	memcpy(fr + 14 + 24, dst, 16);
	if (dst[0] == 0xff) {
		fr[0] = 0x33; fr[1] = 0x33;
		memcpy(fr + 2, dst + 12, 4);
	}
}

/* MLD (core/mld.c) and Redirect seeds: a General Query to ff02::1 and a specific one
 * to fd00::1's solicited-node group (hop-by-hop router alert, hop limit 1, from
 * fe80::2), another listener's MLDv2 report, a Redirect with a TLLA option. */
static int corpus_ip6_mld(const char *dir)
{
	static const uint8_t alln[16] = {0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	static const uint8_t sn1[16] = {0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 1};
	static const uint8_t mldr[16] = {0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x16};
	uint8_t fr[160];
	uint32_t h;
	int n = 0;

	memset(fr, 0, sizeof(fr));
	h = eth_ip6(fr, 0, 8 + 28, 1, 0);
	ip6_ll_to(fr, alln);
	fr[h] = 58; fr[h + 2] = 5; fr[h + 3] = 2;         /* HbH: router alert 0 */
	fr[h + 6] = 1;                                    /* PadN */
	fr[h + 8] = 130; wr16(fr + h + 12, 1000);         /* query, 1 s */
	fr[h + 8 + 24] = 2; fr[h + 8 + 25] = 125;         /* QRV, QQIC */
	n += put_file(dir, "ip6-mld-query", 1, fr, h + 36);
	memcpy(fr + h + 16, sn1, 16);                     /* about fd00::1's group */
	ip6_ll_to(fr, sn1);
	n += put_file(dir, "ip6-mld-query-specific", 1, fr, h + 36);
	memset(fr, 0, sizeof(fr));
	h = eth_ip6(fr, 0, 8 + 28, 1, 0);
	ip6_ll_to(fr, mldr);
	fr[h] = 58; fr[h + 2] = 5; fr[h + 3] = 2; fr[h + 6] = 1;
	fr[h + 8] = 143; fr[h + 15] = 1;                  /* report, 1 record */
	fr[h + 16] = 4; memcpy(fr + h + 20, sn1, 16);     /* CHANGE_TO_EXCLUDE */
	n += put_file(dir, "ip6-mld-report", 1, fr, h + 36);
	memset(fr, 0, sizeof(fr));
	h = eth_ip6(fr, 58, 48, 255, 0);
	fr[14 + 8] = 0xfe; fr[14 + 9] = 0x80;             /* from fe80::2 */
	fr[h] = 137;                                      /* Redirect */
	fr[h + 8] = 0xfe; fr[h + 9] = 0x80; fr[h + 23] = 7; /* target fe80::7 */
	fr[h + 24] = 0x20; fr[h + 25] = 1; fr[h + 39] = 9;  /* destination 2001::9 */
	fr[h + 40] = 2; fr[h + 41] = 1; fr[h + 42] = 2; fr[h + 47] = 7; /* TLLA */
	n += put_file(dir, "ip6-redirect", 1, fr, h + 48);
	return n;
}

/* TCP over IPv6 and an NA (checksums fixed by fix_csum6). */
static int corpus_ip6_more(const char *dir)
{
	static const uint8_t opt[20] = {2, 4, 5, 0xa0, 1, 3, 3, 7, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0};
	uint8_t fr[128];
	uint32_t h;
	int n = 0;

	memset(fr, 0, sizeof(fr));
	h = eth_ip6(fr, 6, 40, 64, 0);
	wr16(fr + h, 45001); wr16(fr + h + 2, 80); fr[h + 7] = 1; fr[h + 12] = 10 << 4;
	fr[h + 13] = 0x02; wr16(fr + h + 14, 65535);
	memcpy(fr + h + 20, opt, 20);
	n += put_file(dir, "ip6-tcp-syn", 1, fr, h + 40);
	memset(fr, 0, sizeof(fr));
	h = eth_ip6(fr, 58, 32, 255, 0);
	fr[h] = 136; fr[h + 4] = 0x20;                    /* NA, Override */
	fr[h + 8] = 0xfd; fr[h + 23] = 2;                 /* target fd00::2 */
	fr[h + 24] = 2; fr[h + 25] = 1; fr[h + 26] = 2; fr[h + 31] = 2; /* TLLA */
	n += put_file(dir, "ip6-na", 1, fr, h + 32);
	return n + corpus_ip6_mld(dir);
}

/* IPv6 seeds: echo, NS, UDP, a fragment pair, RH0, a long options chain, an RA,
 * a TCP SYN to the dual-stack listener, an unsolicited NA, MLD queries and a
 * report, a Redirect. */
static int corpus_ip6(const char *dir)
{
	uint8_t fr[1600];
	uint32_t h, i;
	int n = 0;

	memset(fr, 0, sizeof(fr));
	h = eth_ip6(fr, 58, 16, 64, 0);
	fr[h] = 128;
	n += put_file(dir, "ip6-echo", 1, fr, h + 16);
	memset(fr, 0, sizeof(fr));
	h = eth_ip6(fr, 58, 32, 255, 1);
	fr[h] = 135; fr[h + 8] = 0xfd; fr[h + 23] = 1;     /* NS for fd00::1 */
	fr[h + 24] = 1; fr[h + 25] = 1; fr[h + 26] = 2; fr[h + 31] = 2; /* SLLA */
	n += put_file(dir, "ip6-ns", 1, fr, h + 32);
	memset(fr, 0, sizeof(fr));
	h = eth_ip6(fr, 17, 13, 64, 0);
	wr16(fr + h, 5353); wr16(fr + h + 2, 53); wr16(fr + h + 4, 13);
	memcpy(fr + h + 8, "query", 5);
	n += put_file(dir, "ip6-udp", 1, fr, h + 13);
	memset(fr, 0, sizeof(fr));
	h = eth_ip6(fr, 44, 8 + 800, 64, 0);
	fr[h] = 17; wr16(fr + h + 2, 1); fr[h + 7] = 9;   /* offset 0, M, id 9 */
	wr16(fr + h + 8, 5353); wr16(fr + h + 10, 53); wr16(fr + h + 12, 1600);
	n += put_file(dir, "ip6-frag-head", 0, fr, h + 808);
	wr16(fr + h + 2, 800);                            /* offset 800, last */
	n += put_file(dir, "ip6-frag-tail", 0, fr, h + 808);
	memset(fr, 0, sizeof(fr));
	h = eth_ip6(fr, 43, 24, 64, 0);
	fr[h] = 59; fr[h + 1] = 2; fr[h + 3] = 1;         /* RH0, 1 segment left */
	n += put_file(dir, "ip6-rh0", 0, fr, h + 24);
	memset(fr, 0, sizeof(fr));
	h = eth_ip6(fr, 60, 8 * 20, 64, 0);
	for (i = 0; i < 20; i++) {
		fr[h + 8 * i] = i + 1 < 20 ? 60 : 59;
		fr[h + 8 * i + 2] = 1; fr[h + 8 * i + 3] = 4;   /* PadN */
	}
	n += put_file(dir, "ip6-ext-chain", 0, fr, h + 160);
	memset(fr, 0, sizeof(fr));
	h = eth_ip6(fr, 58, 48, 255, 0);
	fr[14 + 8] = 0xfe; fr[14 + 9] = 0x80;             /* from fe80::2 */
	fr[h] = 134; fr[h + 4] = 64; wr16(fr + h + 6, 1800);
	fr[h + 16] = 3; fr[h + 17] = 4; fr[h + 18] = 64; fr[h + 19] = 0xc0;
	fr[h + 23] = 0xff; fr[h + 27] = 0xff; fr[h + 32] = 0xfd; /* prefix fd00::/64 */
	n += put_file(dir, "ip6-ra", 1, fr, h + 48);
	return n + corpus_ip6_more(dir);
}

int fuzz_make_corpus(const char *dir)
{
	return corpus_live(dir) + corpus_crafted(dir) + corpus_ip6(dir);
}
