/*
 * relay_key.h: the segment identity ipk-relay's keyed mode draws its decisions from.
 *
 * In index mode every decision about frame i of a direction comes from
 * hash(seed, direction, i, decision), so which segment meets which fate depends on the
 * order frames happen to arrive in. In keyed mode a TCP frame's draws come from
 * hash(seed, direction, identity, occurrence) instead:
 *
 *   data (payload, SYN or FIN)   sequence number relative to the sender's ISN, payload
 *                                length, SYN/FIN/RST flags
 *   pure ACK (or bare RST)       ACK number relative to the peer's ISN, the SACK blocks
 *                                (relative too), the flags
 *   both                         the connection's listening port (the SYN's destination)
 *   occurrence                   how many times this identity passed the relay before
 *
 * so the same segment meets the same fate in every run and its retransmission an
 * independent one. Relative numbers make identities independent of the random ISNs;
 * ephemeral ports and timestamps are left out for the same reason. The advertised
 * window is left out too: it depends on when the receiving application read, so a
 * window update of the same ACK number is the same identity seen again (its own draw).
 *
 * Hosted C for the relay and its unit test (tests/relay/test_relay_key.c); everything
 * read from a frame is bounds-checked, a frame that is not a well-formed IPv4 TCP
 * segment has no identity (the caller falls back to the frame index).
 */
#ifndef IPK_RELAY_KEY_H
#define IPK_RELAY_KEY_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RK_FLOWS 256u        /* connections tracked at once (open addressing) */
#define RK_PROBE 8u          /* slots probed before the home slot is reused */
#define RK_MAX_SACK 4u       /* RFC 2018 §3: at most 4 blocks fit the option space */
#define RK_OCC_INIT (1u << 14)

enum rk_kind { RK_DATA = 1, RK_ACK = 2 };

/* One side of a connection, as the relay learns it from the SYNs. */
struct rk_flow {
	uint32_t ip[2];      /* [0] the lower (address, port) endpoint, [1] the other */
	uint16_t port[2];
	uint32_t isn[2];     /* initial sequence number each endpoint sent */
	uint8_t known[2];    /* isn[k] came from a SYN, or from the first segment seen */
	uint8_t used;
	uint16_t listen;     /* the SYN's destination port: the service, not ephemeral */
};

struct rk_flows {
	struct rk_flow f[RK_FLOWS];
};

/* The identity of a TCP segment (see the top of this file). */
struct rk_id {
	uint8_t kind;        /* enum rk_kind */
	uint8_t flags;       /* SYN 0x02, FIN 0x01, RST 0x04 */
	uint16_t listen;
	uint32_t rel;        /* relative sequence (data) or acknowledgment (ACK) number */
	uint32_t len;        /* payload bytes (data) */
	uint32_t nsack;
	uint32_t sack[2 * RK_MAX_SACK]; /* relative left, right edges */
};

/* Occurrence counts per identity hash: open addressing, doubled at half load. */
struct rk_occ {
	uint64_t *key;
	uint32_t *cnt;       /* count + 1; 0 marks an empty slot */
	uint32_t cap, n;
};

static inline uint64_t rk_mix(uint64_t x)
{
	/* splitmix64's finaliser: a bijective mix */
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static inline uint32_t rk_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint16_t rk_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* A parsed TCP segment: the fields identities are made of. */
struct rk_seg {
	uint32_t src, dst, seq, ack, len;
	uint16_t sport, dport;
	uint8_t flags;
	const uint8_t *opt;
	uint32_t optlen;
};

/* Ethernet (one optional VLAN tag) / IPv4 without fragmentation / TCP. Returns 0 and
 * fills s, or -1 for anything else or anything malformed. */
static inline int rk_parse(const uint8_t *p, uint32_t n, struct rk_seg *s)
{
	uint32_t off = 14, ihl, tot, doff;
	uint16_t type;
	if (n < 14)
		return -1;
	type = rk_be16(p + 12);
	if (type == 0x8100) {
		if (n < 18)
			return -1;
		type = rk_be16(p + 16);
		off = 18;
	}
	if (type != 0x0800 || n < off + 20 || (p[off] >> 4) != 4)
		return -1;
	ihl = (uint32_t)(p[off] & 15) * 4;
	tot = rk_be16(p + off + 2);
	/* fragments carry no (or only part of a) TCP header: index key for them */
	if (ihl < 20 || tot < ihl || off + tot > n || p[off + 9] != 6 ||
	    (rk_be16(p + off + 6) & 0x3fff) != 0)
		return -1;
	s->src = rk_be32(p + off + 12);
	s->dst = rk_be32(p + off + 16);
	p += off + ihl;
	tot -= ihl;
	if (tot < 20)
		return -1;
	doff = (uint32_t)(p[12] >> 4) * 4;
	if (doff < 20 || doff > tot)
		return -1;
	s->sport = rk_be16(p);
	s->dport = rk_be16(p + 2);
	s->seq = rk_be32(p + 4);
	s->ack = rk_be32(p + 8);
	s->flags = p[13];
	s->len = tot - doff;
	s->opt = p + 20;
	s->optlen = doff - 20;
	return 0;
}

/* The flow of s; side gets the sender's endpoint index. A SYN without ACK starts the
 * flow afresh (a new connection may reuse the tuple). */
static inline struct rk_flow *rk_flow_get(struct rk_flows *t, const struct rk_seg *s, int *side)
{
	uint64_t a = (uint64_t)s->src << 16 | s->sport, b = (uint64_t)s->dst << 16 | s->dport;
	uint64_t lo = a < b ? a : b, hi = a < b ? b : a;
	uint32_t h = (uint32_t)rk_mix(lo * 0x100000001b3ull ^ hi), k;
	struct rk_flow *f = NULL;
	*side = a < b ? 0 : 1;
	for (k = 0; k < RK_PROBE; k++) {
		struct rk_flow *c = &t->f[(h + k) % RK_FLOWS];
		if (!c->used || (((uint64_t)c->ip[0] << 16 | c->port[0]) == lo &&
		                 ((uint64_t)c->ip[1] << 16 | c->port[1]) == hi)) {
			f = c;
			break;
		}
	}
	if (!f)
		f = &t->f[h % RK_FLOWS]; /* table crowded: the home slot is reused */
	if (!f->used || ((uint64_t)f->ip[0] << 16 | f->port[0]) != lo ||
	    ((uint64_t)f->ip[1] << 16 | f->port[1]) != hi) {
		memset(f, 0, sizeof(*f));
		f->used = 1;
		f->ip[0] = (uint32_t)(lo >> 16);
		f->port[0] = (uint16_t)lo;
		f->ip[1] = (uint32_t)(hi >> 16);
		f->port[1] = (uint16_t)hi;
	}
	return f;
}

/* Learn ISNs: from a SYN, or (joined mid-stream) the first sequence number seen. */
static inline void rk_flow_learn(struct rk_flow *f, const struct rk_seg *s, int side)
{
	int syn = (s->flags & 0x02) != 0, ack = (s->flags & 0x10) != 0;
	if (syn && !ack) {
		f->known[1 - side] = 0; /* a new connection on this tuple */
		f->listen = s->dport;
	}
	if (syn || !f->known[side]) {
		f->isn[side] = s->seq;
		f->known[side] = 1;
	}
	if (!f->listen)
		f->listen = s->sport < s->dport ? s->sport : s->dport;
}

/* SACK blocks (RFC 2018 §3) from the options, relative to base. Malformed options end
 * the walk: what was read so far counts. */
static inline void rk_sacks(const struct rk_seg *s, uint32_t base, struct rk_id *id)
{
	uint32_t i = 0, k;
	while (i < s->optlen) {
		uint8_t kind = s->opt[i];
		uint32_t len;
		if (kind == 0)
			return;
		if (kind == 1) {
			i++;
			continue;
		}
		if (i + 1 >= s->optlen || (len = s->opt[i + 1]) < 2 || i + len > s->optlen)
			return;
		if (kind == 5 && len >= 10 && (len - 2) % 8 == 0) {
			for (k = 0; k < (len - 2) / 8 && id->nsack < RK_MAX_SACK; k++) {
				id->sack[2 * id->nsack] = rk_be32(s->opt + i + 2 + 8 * k) - base;
				id->sack[2 * id->nsack + 1] = rk_be32(s->opt + i + 6 + 8 * k) - base;
				id->nsack++;
			}
		}
		i += len;
	}
}

/* The identity of frame p (n bytes). Returns 0 and fills id, or -1: not TCP/IPv4. */
static inline int rk_identity(struct rk_flows *t, const uint8_t *p, uint32_t n, struct rk_id *id)
{
	struct rk_seg s;
	struct rk_flow *f;
	int side;
	if (rk_parse(p, n, &s) < 0)
		return -1;
	f = rk_flow_get(t, &s, &side);
	rk_flow_learn(f, &s, side);
	memset(id, 0, sizeof(*id));
	id->flags = s.flags & 0x07;
	id->listen = f->listen;
	if (s.len > 0 || (s.flags & 0x03)) {
		id->kind = RK_DATA;
		id->rel = s.seq - f->isn[side];
		id->len = s.len;
		return 0;
	}
	id->kind = RK_ACK;
	if (s.flags & 0x10) {
		uint32_t base = f->known[1 - side] ? f->isn[1 - side] : 0;
		id->rel = s.ack - base;
		rk_sacks(&s, base, id);
	}
	return 0;
}

/* A 64-bit hash of an identity (never 0: 0 keys the index mode's frame 0). */
static inline uint64_t rk_hash(const struct rk_id *id)
{
	uint64_t h = rk_mix((uint64_t)id->kind << 40 | (uint64_t)id->flags << 32 | id->listen);
	uint32_t k;
	h = rk_mix(h ^ ((uint64_t)id->rel << 32 | id->len));
	for (k = 0; k < id->nsack; k++)
		h = rk_mix(h ^ ((uint64_t)id->sack[2 * k] << 32 | id->sack[2 * k + 1]));
	return h ? h : 1;
}

static inline int rk_occ_init(struct rk_occ *o, uint32_t cap)
{
	o->key = calloc(cap, sizeof(*o->key));
	o->cnt = calloc(cap, sizeof(*o->cnt));
	o->cap = cap;
	o->n = 0;
	if (!o->key || !o->cnt) {
		free(o->key);
		free(o->cnt);
		o->key = NULL;
		o->cnt = NULL;
		return -1;
	}
	return 0;
}

static inline void rk_occ_free(struct rk_occ *o)
{
	free(o->key);
	free(o->cnt);
	o->key = NULL;
	o->cnt = NULL;
}

static inline uint32_t *rk_occ_slot(struct rk_occ *o, uint64_t h)
{
	uint32_t i = (uint32_t)rk_mix(h) & (o->cap - 1);
	while (o->cnt[i] && o->key[i] != h)
		i = (i + 1) & (o->cap - 1);
	o->key[i] = h;
	return &o->cnt[i];
}

/* Double the table; on allocation failure keep the old one (it still has room). */
static inline void rk_occ_grow(struct rk_occ *o)
{
	struct rk_occ bigger;
	uint32_t i;
	if (o->cap >= (1u << 30) || rk_occ_init(&bigger, o->cap * 2) < 0)
		return;
	for (i = 0; i < o->cap; i++)
		if (o->cnt[i])
			*rk_occ_slot(&bigger, o->key[i]) = o->cnt[i];
	bigger.n = o->n;
	rk_occ_free(o);
	*o = bigger;
}

/* How many times h was seen before this call (and count this one). When the table is
 * full and cannot grow, counts saturate at the current value (still deterministic for
 * identities already in it). */
static inline uint32_t rk_occ_next(struct rk_occ *o, uint64_t h)
{
	uint32_t *c;
	if (2 * (o->n + 1) > o->cap)
		rk_occ_grow(o);
	if (o->n + 1 >= o->cap) {
		uint32_t i = (uint32_t)rk_mix(h) & (o->cap - 1), k;
		for (k = 0; k < o->cap && o->cnt[i]; k++, i = (i + 1) & (o->cap - 1))
			if (o->key[i] == h)
				return o->cnt[i]++ - 1;
		return 0;
	}
	c = rk_occ_slot(o, h);
	if (*c == 0) {
		o->n++;
		*c = 1;
	}
	return (*c)++ - 1;
}

/* The draw key of the occurrence-th sighting of identity hash h: never equal for two
 * occurrences, independent of the frame index. */
static inline uint64_t rk_key(uint64_t h, uint32_t occurrence)
{
	return rk_mix(h + 0x632be59bd9b4e019ull * ((uint64_t)occurrence + 1));
}

#endif
