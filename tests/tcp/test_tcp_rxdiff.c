/*
 * Differential test of the receive shortcuts (the one receive function
 * ipk_tcp_rx_one, the IPv4 fast path, header prediction, timers_update's tick test,
 * the RTO kept while the RTT estimate stands): the same seeded exchange runs twice
 * between two engines, once as built and once with every shortcut off
 * (ipk_fast_off), and must give the same frames on the wire, byte for byte and in
 * order, the same connection state and the same counters. A shortcut that reached a
 * state the general RFC 9293 §3.10.7.4 processing would not shows up as a differing
 * frame (an ACK, window, timestamp or retransmission) or field. The second test
 * puts a damaged copy before some frames (a flipped byte, a bad IPv4 or TCP
 * checksum alone, a source that cannot be a host (each kind the one source rule
 * names: loopback, 0/8, class E, broadcast, land, no route back), a broadcast MAC, Ethernet padding,
 * a fragment, IPv4 options, each other IPv4 acceptance rule with the header
 * checksum made right): each must be judged as the layers judge it, dropped and
 * counted by the same reason or taken as the same duplicate.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "internal.h"
#include "sha256.h"

enum { ROUNDS = 400, MAXMSG = 24000 };

struct digest {
	/* every frame each engine sent, in order, and its connection's state after
	 * each frame it received */
	uint8_t wire[2][SHA256_DIGEST_LEN];
	uint8_t rx[SHA256_DIGEST_LEN];      /* the echo stream the client received */
	uint8_t conn[2][sizeof(struct ipk_conn)];
	struct ipk_counters cnt[2];
	uint64_t fast[2]; /* segments header prediction took */
	uint64_t one[2];  /* frames ipk_tcp_rx_one took */
	uint32_t frames, rxlen;
};

static uint32_t lcg(uint32_t *r)
{
	*r = *r * 1664525u + 1013904223u;
	return *r >> 8;
}

/* One run's exchange: the two engines, a digest per engine of what it sent and of
 * its connection's state after every frame it received, and the generator. */
struct run {
	struct th *e[2]; /* e[0] = a, the server; e[1] = b, the client */
	struct sha256 h[2];
	uint32_t r, frames;
	int snap;   /* hash connection state after each frame (while both live) */
	int mutate; /* put a damaged copy (mutate_frame) before one frame in 4 */
	uint32_t mr; /* the mutations' own generator (u.r stays the exchange's) */
};

/* The connection's state without its addresses (pointers differ between runs). */
static void conn_state(const struct ipk_conn *c, uint8_t out[sizeof(struct ipk_conn)])
{
	struct ipk_conn k = *c;

	k.hash_next = k.timer_next = k.timer_prev = NULL;
	k.user = NULL;
	k.sq_head = k.sq_tail = NULL;
	k.x = NULL;
	memcpy(out, &k, sizeof(k));
}

/* Hash the frames engine i captured since the last call (and forget them). */
static void drain(struct run *u, int i)
{
	struct th *t = u->e[i];
	int f;

	for (f = 0; f < t->ncap; f++) {
		uint32_t len = t->cap[f].len;

		sha256_update(&u->h[i], &len, sizeof(len));
		sha256_update(&u->h[i], t->cap[f].b, len);
		u->frames++;
	}
	th_clear(t);
}

/* The IPv4 header checksum of frame f (Ethernet II + 20-byte header) made right. */
static void fix_ip4(uint8_t *f)
{
	f[24] = f[25] = 0;
	ipk_wr16(f + 24, ipk_csum_fold(ipk_csum_hdr20(f + 14)));
}

/* The TCP checksum of frame f (20-byte IPv4 header) made right. */
static void fix_tcp(uint8_t *f)
{
	uint32_t src_be, dst_be, len = ipk_rd16(f + 16) + 14u;

	memcpy(&src_be, f + 26, 4);
	memcpy(&dst_be, f + 30, 4);
	f[50] = f[51] = 0;
	ipk_wr16(f + 50, ipk_csum_l4(src_be, dst_be, IPK_IPPROTO_TCP, f + 34, len - 34));
}

/* A damaged copy of frame b (len bytes) in out (room for len + 8); its length. */
static uint32_t mutate_frame(uint32_t *r, const uint8_t *b, uint32_t len, uint8_t *out)
{
	uint32_t k = lcg(r) % 12u, at = lcg(r) % len;

	memcpy(out, b, len);
	switch (k) {
	case 0: /* a flipped byte anywhere */
		out[at] ^= (uint8_t)(1u + lcg(r) % 255u);
		break;
	case 1: /* IPv4 header checksum wrong, TCP's right (ID is not in the pseudo-header) */
		out[18] ^= 0x40;
		break;
	case 2: /* TCP checksum wrong alone */
		out[50] ^= 0x01;
		break;
	case 3: /* a source that cannot be a host (internal.h ipk_ip4_src_check),
		 * checksums right: loopback, 0/8, class E, limited broadcast, our own
		 * address (land), our subnet's broadcast, off-link with no route back */
		switch (lcg(r) % 7u) {
		case 0: out[26] = 127; break;
		case 1: /* 0/8, or 0.0.0.0 itself (by at: no draw, the
			 * sequence stays) */
			if (at & 1u)
				memset(out + 26, 0, 4);
			else
				out[26] = 0;
			break;
		case 2: out[26] = (uint8_t)(240u + lcg(r) % 15u); break;
		case 3: memset(out + 26, 0xff, 4); break;
		case 4: memcpy(out + 26, out + 30, 4); break;
		case 5: out[29] = 255; break;
		default: out[26] = 192; out[27] = 168; break;
		}
		fix_ip4(out);
		fix_tcp(out);
		break;
	case 4: /* to the broadcast MAC: taken by link.c all the same */
		memset(out, 0xff, 6);
		break;
	case 5: /* Ethernet padding past the datagram */
		memset(out + len, 0, 8);
		len += 8;
		break;
	case 6: /* a first fragment (MF set): held for reassembly */
		out[20] |= 0x20;
		fix_ip4(out);
		break;
	case 7: /* IPv4 options: one NOP word (ihl 6) */
		memmove(out + 38, out + 34, len - 34);
		memset(out + 34, 1, 4); /* RFC 791 §3.1: option 1, no operation */
		out[14] = 0x46;
		ipk_wr16(out + 16, (uint16_t)(ipk_rd16(out + 16) + 4u));
		len += 4;
		fix_ip4(out);
		break;
	case 9: /* every other rule of ipk_ip4_fast_accept against ip4_check, the
		 * header checksum made right: version, header length, total length
		 * (short, past the frame, below 40), a fragment offset, another
		 * destination, our subnet's broadcast, the limited broadcast */
		switch (lcg(r) % 8u) {
		case 0: out[14] = 0x65; break;
		case 1: out[14] = 0x44; break;
		case 2: ipk_wr16(out + 16, (uint16_t)(len - 14u + 1u + lcg(r) % 64u)); break;
		case 3: ipk_wr16(out + 16, (uint16_t)(20u + lcg(r) % 20u)); break;
		case 4: out[21] = (uint8_t)(out[21] + 1u + lcg(r) % 200u); break;
		case 5: out[33] = (uint8_t)(out[33] ^ (1u + lcg(r) % 200u)); break;
		case 6: out[33] = 255; break;
		default: memset(out + 30, 0xff, 4); break;
		}
		fix_ip4(out);
		break;
	case 10: /* a source that can be a host but is no peer (10.0.0.77), RST set (no
		  * answer for no connection): passes the source rule and replaces the
		  * remembered one (ctx->src_ok_be), so the next frame from the peer is
		  * tested in full again */
		out[29] = 77;
		out[47] |= IPK_TCP_RST;
		fix_ip4(out);
		fix_tcp(out);
		break;
	case 8: /* an older ACK (ignored, or beyond the window's age: a challenge) */
		ipk_wr32(out + 42, ipk_rd32(out + 42) - (1u + lcg(r) % (1u << 20)));
		fix_tcp(out);
		break;
	default: /* window, urgent pointer or flags other than FIN, SYN, RST changed
		  * (not what would end the exchange the test checks), checksums right */
		at = (const uint32_t[]){47, 48, 49, 52, 53}[at % 5u];
		out[at] ^= (uint8_t)((1u + lcg(r) % 255u) & (at == 47u ? 0xf8u : 0xffu));
		fix_tcp(out);
		break;
	}
	return len;
}

/* Run a damaged copy of k through engine t (same clock) and hash what it sent. */
static void bad_frame(struct run *u, struct th *t, struct sim_pkt *k)
{
	uint8_t out[2048 + 16];
	uint32_t len;
	void *p;

	if (k->len < 54 || k->len > 2048 || sim_pkt_chain_len(k) != k->len)
		return;
	len = mutate_frame(&u->mr, sim_pkt_data(k), k->len, out);
	p = sim_pkt_from(t->pool, out, len);
	if (!p)
		return;
	ipk_run(t->ctx, &p, 1, t->now);
	drain(u, t == u->e[0] ? 0 : 1);
}

/* Deliver engine `from`'s queued frames to the other, its clock moving 20-100 µs
 * before each, so RTT samples vary and the estimate moves or stands; after each,
 * what it sent and (with snap) its connection's state. */
static int step(struct run *u, int from)
{
	struct sim_pkt *batch[TH_CAP * 4];
	int n = u->e[from]->qn, i, to = !from;
	struct th *t = u->e[to];

	memcpy(batch, u->e[from]->q, (size_t)n * sizeof(batch[0]));
	u->e[from]->qn = 0;
	for (i = 0; i < n; i++) {
		void *p = batch[i];

		uint64_t next;

		t->now += 20000u + lcg(&u->r) % 80000u;
		if (u->mutate && lcg(&u->mr) % 4u == 0)
			bad_frame(u, t, (struct sim_pkt *)p);
		next = ipk_run(t->ctx, &p, 1, t->now);
		sha256_update(&u->h[to], &next, sizeof(next));
		drain(u, to);
		if (u->snap && t->conn) {
			uint8_t st[sizeof(struct ipk_conn)];

			conn_state(t->conn, st);
			sha256_update(&u->h[to], st, sizeof(st));
		}
	}
	return n;
}

static void pump(struct run *u)
{
	int round;

	for (round = 0; round < 10000; round++) {
		int moved = step(u, 0);

		moved += step(u, 1);
		if (!moved)
			break;
	}
}

/* Both clocks forward by dt in steps to each deadline the engine returns (delayed
 * ACKs, RTOs and probes fire on time), each deadline hashed, then what that sent. */
static void idle(struct run *u, uint64_t dt)
{
	int i, k;

	for (i = 0; i < 2; i++) {
		struct th *t = u->e[i];
		uint64_t end = t->now + dt, next = ipk_run(t->ctx, NULL, 0, t->now);

		for (k = 0; k < 1000 && next <= end; k++) {
			t->now = next > t->now ? next : t->now + 1;
			next = ipk_run(t->ctx, NULL, 0, t->now);
			sha256_update(&u->h[i], &next, sizeof(next));
			drain(u, i);
		}
		t->now = end;
		next = ipk_run(t->ctx, NULL, 0, t->now);
		sha256_update(&u->h[i], &next, sizeof(next));
		drain(u, i);
	}
	pump(u);
}

/* One seeded exchange: the client (b) writes messages of 1 byte to 24 kB, one or
 * two at a time, sometimes holding its receive window shut; the server (a) echoes
 * every delivery from the payload event; now and then both sides idle long enough
 * for delayed ACKs and window probes. */
static void run(int fast_off, int mutate, struct digest *d)
{
	struct run u;
	struct th *a, *b;
	struct ipk_conn *c = NULL;
	struct sha256 hwant;
	uint8_t *msg = (uint8_t *)malloc(MAXMSG);
	uint8_t want[SHA256_DIGEST_LEN];
	uint32_t i, j, unread = 0, sent = 0;

	memset(d, 0, sizeof(*d));
	memset(&u, 0, sizeof(u));
	u.r = 2024u;
	u.mr = 77u;
	u.mutate = mutate;
	sha256_init(&u.h[0]);
	sha256_init(&u.h[1]);
	sha256_init(&hwant);
	th_pair(&a, &b, NULL);
	u.e[0] = a;
	u.e[1] = b;
	if (fast_off) {
		ipk_fast_off(a->ctx);
		ipk_fast_off(b->ctx);
	}
	a->echo = 1;
	a->auto_recved = 1;
	CHECK_EQ(ipk_tcp_listen(a->ctx, ipk_htons(80), 8), IPK_OK);
	CHECK_EQ(ipk_tcp_connect(b->ctx, a->ip_be, ipk_htons(80), 0, NULL, &c, b->now), IPK_OK);
	drain(&u, 1);
	pump(&u);
	CHECK(c != NULL && a->conn != NULL && b->conn == c);
	u.snap = 1;
	for (i = 0; i < ROUNDS && c && a->conn; i++) {
		uint32_t k = lcg(&u.r) % 8u, n = k == 0 ? 2u : 1u;

		for (j = 0; j < n; j++) {
			uint32_t len = (lcg(&u.r) % 3u == 0) ? 1u + lcg(&u.r) % MAXMSG :
			                                      1u + lcg(&u.r) % 1400u;
			int32_t w;
			uint32_t x;

			for (x = 0; x < len; x++)
				msg[x] = (uint8_t)(sent + x * 7u + i);
			w = ipk_tcp_write(b->ctx, c, msg, len, b->now);
			if (w > 0) {
				sha256_update(&hwant, msg, (size_t)w);
				sent += (uint32_t)w;
			}
			drain(&u, 1);
		}
		/* the client reads at once, or holds its window for a few rounds */
		b->auto_recved = (i / 16u) % 4u != 3u;
		pump(&u);
		if (b->auto_recved && b->rxlen > unread) {
			ipk_tcp_recved(b->ctx, c, b->rxlen - unread, b->now);
			drain(&u, 1);
		}
		unread = b->rxlen;
		if (k == 7)
			idle(&u, 50000000u + lcg(&u.r) % 200000000u);
		pump(&u);
	}
	/* the echo stream must be what the client wrote */
	b->auto_recved = 1;
	if (c && b->rxlen > unread)
		ipk_tcp_recved(b->ctx, c, b->rxlen - unread, b->now);
	drain(&u, 1);
	for (i = 0; i < 20 && b->rxlen < sent; i++)
		idle(&u, 300000000u);
	CHECK_EQ(b->rxlen, sent);
	sha256_final(&hwant, want);
	sha256(b->rx, b->rxlen, d->rx);
	CHECK(memcmp(want, d->rx, sizeof(want)) == 0);
	d->rxlen = b->rxlen;

	CHECK(c != NULL && a->conn != NULL);
	if (c && a->conn) {
		conn_state(a->conn, d->conn[0]);
		conn_state(c, d->conn[1]);
	}
	d->cnt[0] = *ipk_counters(a->ctx);
	d->cnt[1] = *ipk_counters(b->ctx);
	d->fast[0] = d->cnt[0].tcp_fast_path;
	d->fast[1] = d->cnt[1].tcp_fast_path;
	d->one[0] = a->ctx->rx_one_n;
	d->one[1] = b->ctx->rx_one_n;
	d->cnt[0].tcp_fast_path = d->cnt[1].tcp_fast_path = 0;
	d->frames = u.frames;
	sha256_final(&u.h[0], d->wire[0]);
	sha256_final(&u.h[1], d->wire[1]);
	u.snap = 0;
	if (c)
		ipk_tcp_abort(b->ctx, c, b->now);
	drain(&u, 1);
	pump(&u);
	/* fragments (mutate_frame) wait for reassembly until it times out; the ICMP
	 * time-exceeded it sends (RFC 792) is delivered, not left queued */
	ipk_run(a->ctx, NULL, 0, a->now + 2 * a->cfg.frag_timeout_ns);
	ipk_run(b->ctx, NULL, 0, b->now + 2 * b->cfg.frag_timeout_ns);
	drain(&u, 0);
	drain(&u, 1);
	pump(&u);
	CHECK(th_no_leaks(a) && th_no_leaks(b));
	th_free(a);
	th_free(b);
	free(msg);
}

/* Both runs did real work, only the first took the shortcuts, and they match. */
static void compare(const struct digest *on, const struct digest *off)
{
	CHECK(on->frames > 2000);
	CHECK(on->rxlen > 1000000);
	CHECK(on->fast[0] > on->frames / 4 && on->fast[1] > 0);
	CHECK_EQ(off->fast[0] + off->fast[1], 0);
	/* the one receive function took most frames on both sides (the rest: the
	 * handshake's SYNs, frames with SACK blocks), and none with the shortcuts off */
	CHECK(on->one[0] > on->frames / 4 && on->one[1] > on->frames / 4);
	CHECK_EQ(off->one[0] + off->one[1], 0);
	CHECK_EQ(on->frames, off->frames);
	CHECK(memcmp(on->wire, off->wire, sizeof(on->wire)) == 0);
	CHECK(memcmp(on->rx, off->rx, sizeof(on->rx)) == 0);
	CHECK(memcmp(on->conn[0], off->conn[0], sizeof(on->conn[0])) == 0);
	CHECK(memcmp(on->conn[1], off->conn[1], sizeof(on->conn[1])) == 0);
	CHECK(memcmp(on->cnt, off->cnt, sizeof(on->cnt)) == 0);
}

static void test_established_rx_shortcuts_match_general_path(void)
{
	struct digest *on = (struct digest *)malloc(sizeof(*on));
	struct digest *off = (struct digest *)malloc(sizeof(*off));

	run(0, 0, on);
	run(1, 0, off);
	compare(on, off);
	free(on);
	free(off);
}

static void test_damaged_frames_judged_as_general_path(void)
{
	struct digest *on = (struct digest *)malloc(sizeof(*on));
	struct digest *off = (struct digest *)malloc(sizeof(*off));
	int i;

	run(0, 1, on);
	run(1, 1, off);
	compare(on, off);
	/* the damage reached each rule on both engines */
	for (i = 0; i < 2; i++) {
		CHECK(on->cnt[i].drop[IPK_DROP_IP4_CSUM] > 10);
		CHECK(on->cnt[i].drop[IPK_DROP_TCP_CSUM] > 10);
		CHECK(on->cnt[i].drop[IPK_DROP_IP4_BAD_SRC] > 10);
		CHECK(on->cnt[i].drop[IPK_DROP_IP4_LAND] > 2);
		CHECK(on->cnt[i].drop[IPK_DROP_IP4_MALFORMED] > 5);
		CHECK(on->cnt[i].drop[IPK_DROP_NOT_FOR_US] > 2);
		CHECK(on->cnt[i].drop[IPK_DROP_IP4_SRC_NO_ROUTE] > 2);
		CHECK(on->cnt[i].drop[IPK_DROP_TCP_NO_CONN] > 2); /* case 10 */
		CHECK(on->cnt[i].tcp_dup_segs > 10);
	}
	free(on);
	free(off);
}

int main(void)
{
	RUN(test_established_rx_shortcuts_match_general_path);
	RUN(test_damaged_frames_judged_as_general_path);
	return check_summary();
}
