/*
 * SYN cookies (RFC 4987 §3.6): when the SYN queue is full, answer a SYN with a
 * SYN-ACK whose ISS encodes what the connection needs, keep no state, and build the
 * connection when an ACK returns the cookie.
 *
 * The cookie (our ISS), 32 bits:
 *   bits 31..29  index into cookie_mss[] (the largest entry not above the peer's MSS)
 *   bits 28..0   SipHash-2-4 (128-bit key drawn from ops->random on first use) of the
 *                4-tuple, the peer's ISN, a coarse time counter and the MSS index.
 * The time counter ticks every 2^36 ns (about 69 s); a cookie checks against the
 * current tick and the one before, so it lives 69..137 s. The peer's ISN in the hash
 * ties the cookie to the SYN: an ACK with another sequence number does not check.
 *
 * When the SYN carries timestamps (RFC 7323) the SYN-ACK offers them too, and the
 * low IPK_COOKIE_OPT_BITS bits of our TSval carry the rest of the peer's SYN options
 * (the peer echoes TSval in the ACK's TSecr; Linux does the same, this layout is
 * ours):
 *   bits 3..0  the peer's window-scale shift (0..14), 15 = no window scale option
 *   bit  4     SACK-permitted (the peer offered it and cfg.tcp_sack is on)
 *   bit  5     ECN setup (RFC 3168 §6.1.1: ECE|CWR in the SYN and cfg.tcp_ecn on)
 * The TSval is our clock with those bits replaced, never ahead of the clock. The
 * option bits also enter the hash (with a bit saying timestamps were on), so an ACK
 * cannot claim options the SYN-ACK did not grant. Without timestamps a cookie has
 * nowhere to keep them: no window scale (a 64 KiB window), no SACK, no ECN.
 * The SYN-ACK is not retransmitted: a lost one costs the peer its SYN
 * retransmission timeout.
 *
 * Cookies are checked only while they are being sent (mode 2, or within two ticks of
 * the last cookie sent), so an attacker cannot guess at one at any other time.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

#define IPK_COOKIE_TICK_SHIFT 36
#define IPK_COOKIE_HASH_MASK 0x1fffffffu
/* option bits in the low bits of a cookie SYN-ACK's TSval (see above) */
#define IPK_COOKIE_OPT_BITS 6u
#define IPK_COOKIE_OPT_MASK 0x3fu
#define IPK_COOKIE_WS_NONE 0xfu
#define IPK_COOKIE_SACK 0x10u
#define IPK_COOKIE_ECN 0x20u
/* hashed with the option bits: timestamps were negotiated */
#define IPK_COOKIE_TS 0x40u

/* MSS values a cookie can name: common path MSS values (Ethernet 1460, PPPoE 1452,
 * tunnels 1400..1360, IPv6 minimum 1220), the RFC 9293 default 536, and our floor. */
static const uint16_t cookie_mss[8] = {64, 536, 1220, 1360, 1400, 1440, 1452, 1460};

/* ------------------------------------------------------------ SipHash-2-4 */

static uint64_t sip_rotl(uint64_t x, unsigned b)
{
	return (x << b) | (x >> (64u - b));
}

struct sip_state {
	uint64_t v0, v1, v2, v3;
};

static void sip_round(struct sip_state *s)
{
	s->v0 += s->v1;
	s->v1 = sip_rotl(s->v1, 13) ^ s->v0;
	s->v0 = sip_rotl(s->v0, 32);
	s->v2 += s->v3;
	s->v3 = sip_rotl(s->v3, 16) ^ s->v2;
	s->v0 += s->v3;
	s->v3 = sip_rotl(s->v3, 21) ^ s->v0;
	s->v2 += s->v1;
	s->v1 = sip_rotl(s->v1, 17) ^ s->v2;
	s->v2 = sip_rotl(s->v2, 32);
}

static void sip_word(struct sip_state *s, uint64_t m)
{
	s->v3 ^= m;
	sip_round(s);
	sip_round(s);
	s->v0 ^= m;
}

/* SipHash-2-4 of n 64-bit words (the message is whole words; the length byte goes
 * in the final block as the algorithm specifies). */
static uint64_t sip_hash(const uint64_t key[2], const uint64_t *m, uint32_t n)
{
	struct sip_state s;
	uint32_t i;

	s.v0 = key[0] ^ 0x736f6d6570736575ull;
	s.v1 = key[1] ^ 0x646f72616e646f6dull;
	s.v2 = key[0] ^ 0x6c7967656e657261ull;
	s.v3 = key[1] ^ 0x7465646279746573ull;
	for (i = 0; i < n; i++)
		sip_word(&s, m[i]);
	sip_word(&s, (uint64_t)(n * 8u) << 56);
	s.v2 ^= 0xffu;
	for (i = 0; i < 4; i++)
		sip_round(&s);
	return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

/* ------------------------------------------------------------ the cookie */

static void cookie_key(struct ipk_ctx *ctx)
{
	const struct ipk_ops *ops = IPK_OPS(ctx);
	uint32_t i;

	if (ctx->cookie_keyed)
		return;
	for (i = 0; i < 2; i++) {
		uint64_t hi = ops->random(IPK_OPQ(ctx));

		ctx->cookie_key[i] = hi << 32 | ops->random(IPK_OPQ(ctx));
	}
	ctx->cookie_keyed = 1;
}

/* opts: IPK_COOKIE_TS | option bits when timestamps carry options, else 0 */
static uint32_t cookie_hash(const struct ipk_ctx *ctx, const struct ipk_tuple *t, uint32_t irs,
                            uint64_t tick, uint32_t idx, uint32_t opts)
{
	uint64_t m[4];
	struct ipk_tuple k;

	/* IPv6: the pair's addresses, not its index (the SYN's is the scratch pair) */
	ipk_tcp6_key(ctx, t, &k);
	t = &k;
	m[0] = (uint64_t)t->local_ip4_be << 32 | t->peer_ip4_be;
	m[1] = (uint64_t)t->local_port_be << 48 | (uint64_t)t->peer_port_be << 32 | irs;
	m[2] = tick;
	m[3] = (uint64_t)opts << 8 | idx;
	return (uint32_t)sip_hash(ctx->cookie_key, m, 4) & IPK_COOKIE_HASH_MASK;
}

static uint32_t cookie_make(const struct ipk_ctx *ctx, const struct ipk_tuple *t, uint32_t irs,
                            uint32_t idx, uint32_t opts)
{
	uint64_t tick = ctx->now >> IPK_COOKIE_TICK_SHIFT;

	return idx << 29 | cookie_hash(ctx, t, irs, tick, idx, opts);
}

/* The MSS index for a cookie, or -1 when it does not check. */
static int cookie_verify(const struct ipk_ctx *ctx, const struct ipk_tuple *t, uint32_t irs,
                         uint32_t cookie, uint32_t opts)
{
	uint64_t tick = ctx->now >> IPK_COOKIE_TICK_SHIFT;
	uint32_t idx = cookie >> 29, h = cookie & IPK_COOKIE_HASH_MASK;

	if (h == cookie_hash(ctx, t, irs, tick, idx, opts))
		return (int)idx;
	if (tick > 0 && h == cookie_hash(ctx, t, irs, tick - 1u, idx, opts))
		return (int)idx;
	return -1;
}

/* The option bits for the peer's SYN, IPK_COOKIE_TS included; 0 when the SYN has no
 * timestamps (or we do not use them): then nothing can be carried. */
static uint32_t syn_opt_bits(const struct ipk_ctx *ctx, const struct ipk_tcp_seg *s)
{
	uint32_t b = IPK_COOKIE_TS;

	if (!s->o.has_ts || !ctx->cfg.tcp_timestamps)
		return 0;
	if (s->o.has_ws && ctx->cfg.tcp_wscale > 0)
		b |= IPK_MIN(s->o.ws, IPK_TCP_MAX_WSCALE);
	else
		b |= IPK_COOKIE_WS_NONE;
	if (s->o.has_sack_perm && ctx->cfg.tcp_sack)
		b |= IPK_COOKIE_SACK;
	if (ctx->cfg.tcp_ecn &&
	    (s->h.flags & (IPK_TCP_ECE | IPK_TCP_CWR)) == (IPK_TCP_ECE | IPK_TCP_CWR))
		b |= IPK_COOKIE_ECN;
	return b;
}

/* RFC 7323 §5.4 TSval of the connection the cookie stands for (clock + ISS, as
 * ipk_tcp_ts_now), low bits replaced by the options and kept at or below the clock,
 * so that the connection's later TSvals never run backwards. */
static uint32_t cookie_tsval(const struct ipk_ctx *ctx, uint32_t iss, uint32_t bits)
{
	uint32_t now = (uint32_t)(ctx->now / 1000000u) + iss;
	uint32_t v = (now & ~IPK_COOKIE_OPT_MASK) | (bits & IPK_COOKIE_OPT_MASK);

	if (ipk_seq_gt(v, now))
		v -= 1u << IPK_COOKIE_OPT_BITS;
	return v;
}

static uint32_t mss_index(const struct ipk_tcp_opts *o)
{
	uint32_t m = o->has_mss ? o->mss : IPK_TCP_DEFAULT_MSS, i = 7;

	while (i > 0 && cookie_mss[i] > m)
		i--;
	return i;
}

static void seg_tuple(const struct ipk_tcp_seg *s, struct ipk_tuple *t)
{
	t->local_ip4_be = s->dst_be;
	t->peer_ip4_be = s->src_be;
	t->local_port_be = s->h.dport_be;
	t->peer_port_be = s->h.sport_be;
}

/* ------------------------------------------------------------ entry points */

static uint32_t synrecv_cap(const struct ipk_ctx *ctx)
{
	return IPK_MIN(ctx->cfg.tcp_synrecv_max, ctx->conn_total / 2u);
}

int ipk_tcp_cookie_wanted(const struct ipk_ctx *ctx, int idx)
{
	if (ctx->cfg.tcp_syncookies == 2)
		return 1;
	if (ctx->cfg.tcp_syncookies == 0)
		return 0;
	/* With the pool empty a cookie would only defer the failure to the ACK, where
	 * a peer that waits for us to speak first would hang: drop the SYN instead so
	 * that the peer retransmits it. */
	return ipk_tcp_synq_full(ctx, idx) && ipk_tcp_conn_room(ctx);
}

int ipk_tcp_synq_full(const struct ipk_ctx *ctx, int idx)
{
	const struct ipk_listener *l = &ctx->listeners[idx];

	return l->pending >= l->backlog || ctx->synrecv_n >= synrecv_cap(ctx);
}

void ipk_tcp_cookie_synack(struct ipk_ctx *ctx, struct ipk_tcp_seg *s)
{
	struct ipk_tuple t;
	struct ipk_tcp_opts o;
	uint32_t idx = mss_index(&s->o), ours, iss;
	uint32_t bits;
	uint8_t flags = IPK_TCP_SYN | IPK_TCP_ACK;

	cookie_key(ctx);
	seg_tuple(s, &t);
	ours = ipk_tcp_mss_ours(ctx, &t);
	bits = syn_opt_bits(ctx, s);
	iss = cookie_make(ctx, &t, s->h.seq, idx, bits);
	ipk_memset(&o, 0, sizeof(o));
	o.has_mss = 1;
	o.mss = (uint16_t)ours;
	if (bits) {
		/* RFC 7323 §2.2, RFC 2018 §2, RFC 3168 §6.1.1: answer what the SYN offered */
		o.has_ts = 1;
		o.tsval = cookie_tsval(ctx, iss, bits);
		o.tsecr = s->o.tsval;
		if ((bits & IPK_COOKIE_WS_NONE) != IPK_COOKIE_WS_NONE) {
			o.has_ws = 1;
			o.ws = (uint8_t)IPK_MIN(ctx->cfg.tcp_wscale, IPK_TCP_MAX_WSCALE);
		}
		o.has_sack_perm = (uint8_t)((bits & IPK_COOKIE_SACK) != 0);
		if (bits & IPK_COOKIE_ECN)
			flags |= IPK_TCP_ECE;
	}
	ctx->cookie_until = ctx->now + (2ull << IPK_COOKIE_TICK_SHIFT);
	ctx->cnt.tcp_syncookies_sent++;
	/* RFC 7323 §2.2: the window of a SYN segment is never scaled */
	ipk_tcp_send_raw(ctx, &t, iss, s->h.seq + 1u, flags,
	                 (uint16_t)IPK_MIN(ctx->cfg.tcp_rcvbuf, 0xffffu), &o);
}

static int cookies_live(const struct ipk_ctx *ctx)
{
	if (ctx->cfg.tcp_syncookies == 2)
		return ctx->cookie_keyed;
	return ctx->cfg.tcp_syncookies == 1 && ctx->now < ctx->cookie_until;
}

/* The connection a checked cookie stands for, in SYN-RECEIVED as if our SYN-ACK had
 * been sent from it, so that the ACK completes it by the normal rules. */
static struct ipk_conn *cookie_conn(struct ipk_ctx *ctx, const struct ipk_tcp_seg *s,
                                    const struct ipk_tuple *t, uint32_t idx, uint32_t bits)
{
	struct ipk_tcp_opts o;
	struct ipk_conn *c = ipk_tcp_conn_take(ctx);

	if (!c) {
		ipk_drop(ctx, IPK_DROP_NO_CONN_MEM);
		return NULL;
	}
	if (ipk_tcp_conn_setup(ctx, c, t) != IPK_OK) {
		ipk_conn_put(ctx, c); /* the pair table is full (counted) */
		return NULL;
	}
	c->iss = c->snd_una = s->h.ack - 1u;
	c->snd_nxt = c->snd_max = c->sq_seq = s->h.ack;
	c->rcv_nxt = s->h.seq;
	c->rcv_adv = c->rcv_nxt + IPK_MIN(ctx->cfg.tcp_rcvbuf, 0xffffu);
	ipk_memset(&o, 0, sizeof(o));
	o.has_mss = 1;
	o.mss = cookie_mss[idx];
	if (bits) {
		/* what the SYN offered, from the echoed TSval */
		o.has_ts = 1;
		o.tsval = s->o.tsval;
		o.has_ws = (uint8_t)((bits & IPK_COOKIE_WS_NONE) != IPK_COOKIE_WS_NONE);
		o.ws = (uint8_t)(bits & IPK_COOKIE_WS_NONE);
		o.has_sack_perm = (uint8_t)((bits & IPK_COOKIE_SACK) != 0);
		if (bits & IPK_COOKIE_ECN)
			c->fl |= IPK_TCPF_ECN;
		/* the SYN-ACK's TSval was no clock reading: no RTT from its echo */
		c->fl |= IPK_TCPF_TS_NO_RTT;
	}
	ipk_tcp_syn_opts(ctx, c, &o);
	c->snd_wl1 = s->h.seq - 1u; /* the SYN's */
	ipk_tcp_enter(ctx, c, IPK_TCP_SYN_RECEIVED);
	ipk_tcp_hash_insert(ctx, c);
	ctx->cnt.tcp_passive_opens++;
	return c;
}

int ipk_tcp_cookie_check(struct ipk_ctx *ctx, const struct ipk_tcp_seg *s, struct ipk_conn **out)
{
	struct ipk_tuple t;
	uint32_t bits = 0;
	int mi;

	*out = NULL;
	if (!cookies_live(ctx))
		return 0;
	seg_tuple(s, &t);
	/* The ACK echoes our TSval when timestamps were on (RFC 7323 §3.2: once both
	 * SYNs carried them, every segment does); the hash says whether they were. */
	if (s->o.has_ts && ctx->cfg.tcp_timestamps)
		bits = IPK_COOKIE_TS | (s->o.tsecr & IPK_COOKIE_OPT_MASK);
	mi = cookie_verify(ctx, &t, s->h.seq - 1u, s->h.ack - 1u, bits);
	if (mi < 0) {
		ctx->cnt.tcp_syncookies_failed++;
		return 0;
	}
	/* Out of connections: drop without a RST; the peer's retransmission of this
	 * segment carries the cookie again. */
	*out = cookie_conn(ctx, s, &t, (uint32_t)mi, bits);
	if (*out)
		ctx->cnt.tcp_syncookies_ok++;
	return 1;
}
