/*
 * TCP: the public API, the connection hash, listeners, ISN and ephemeral ports, and
 * the one place connections are freed.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"
#include "wire/wire.h"

/* ---------------------------------------------------------------- hash */

/* A multiplicative mix keyed by a per-context random seed, so that a peer choosing
 * its addresses and ports cannot predict which bucket they fall in and pile its
 * connections into one chain (hash flooding). The inputs are network order, which
 * only permutes bits. */
static uint32_t tuple_hash(uint32_t seed, uint32_t lip, uint16_t lport, uint32_t pip,
                           uint16_t pport)
{
	uint32_t h = (pip ^ seed) * 0x9e3779b1u;

	h ^= ((uint32_t)pport << 16 | lport) * 0x85ebca77u;
	h ^= (lip + seed) * 0xc2b2ae3du;
	h ^= h >> 15;
	h *= 0x27d4eb2fu;
	h ^= h >> 13;
	return h;
}

static uint32_t bucket(const struct ipk_ctx *ctx, uint32_t h)
{
	return h & (ctx->cfg.conn_hash_buckets - 1u);
}

static int tuple_is(const struct ipk_conn *c, uint32_t lip, uint16_t lport, uint32_t pip,
                    uint16_t pport)
{
	return c->t.peer_ip4_be == pip && c->t.peer_port_be == pport &&
	       c->t.local_port_be == lport && c->t.local_ip4_be == lip;
}

/* A segment usually belongs to the connection the one before it did (a flow's
 * segments come in bursts): that one is compared first, and the keyed hash is
 * computed only when it is another. The cache holds only connections in the hash
 * (hash_remove clears it), so it finds nothing the hash would not. */
IPK_HOT struct ipk_conn *ipk_tcp_lookup(struct ipk_ctx *ctx, uint32_t lip, uint16_t lport, uint32_t pip,
                                uint16_t pport)
{
	struct ipk_conn *c = ctx->last_c;
	uint32_t h;

	if (c && tuple_is(c, lip, lport, pip, pport))
		return c;
	h = tuple_hash(ctx->conn_hash_seed, lip, lport, pip, pport);
	for (c = ctx->conn_hash[bucket(ctx, h)]; c; c = c->hash_next) {
		if (tuple_is(c, lip, lport, pip, pport)) {
			ctx->last_c = c;
			return c;
		}
	}
	return NULL;
}

/* The bucket of c's 4-tuple: computed again rather than kept in the connection
 * (4 bytes each; only insert and remove need it). */
static uint32_t conn_bucket(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	return bucket(ctx, tuple_hash(ctx->conn_hash_seed, c->t.local_ip4_be, c->t.local_port_be,
	                              c->t.peer_ip4_be, c->t.peer_port_be));
}

void ipk_tcp_hash_insert(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	uint32_t b = conn_bucket(ctx, c);

	c->hash_next = ctx->conn_hash[b];
	ctx->conn_hash[b] = c;
	c->fl |= IPK_TCPF_LINKED;
}

static void hash_remove(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	struct ipk_conn **pp;

	if (!(c->fl & IPK_TCPF_LINKED))
		return;
	pp = &ctx->conn_hash[conn_bucket(ctx, c)];
	for (; *pp; pp = &(*pp)->hash_next) {
		if (*pp == c) {
			*pp = c->hash_next;
			break;
		}
	}
	c->hash_next = NULL;
	c->fl &= ~IPK_TCPF_LINKED;
	if (ctx->last_c == c)
		ctx->last_c = NULL;
}

/* ------------------------------------------------------------- ISN, ports */

/* RFC 6528 §3: ISN = M + F(4-tuple, secret), M a timer ticking every 4 us. */
uint32_t ipk_tcp_isn(struct ipk_ctx *ctx, const struct ipk_tuple *t)
{
	uint32_t m = (uint32_t)(ctx->now / 4000u);
	uint32_t f;
	struct ipk_tuple k;

	if (IPK_OPS(ctx)->isn_hash) {
		ipk_tcp6_key(ctx, t, &k); /* IPv6: the addresses, folded */
		f = IPK_OPS(ctx)->isn_hash(&k, IPK_OPQ(ctx));
	} else {
		f = IPK_OPS(ctx)->random(IPK_OPQ(ctx));
	}
	return m + f;
}

/* With RSS, does the peer's segment to local port `be` hash to our queue? An IPv6
 * connection's tuple holds the mark and its address pair's index (tcp6.c): the NIC
 * hashes the pair's real addresses. */
static int eph_rss_ok(const struct ipk_ctx *ctx, uint32_t lip, uint32_t pip,
                      uint16_t pport, uint16_t be)
{
	const struct ipk_tcp6_pair *pr;

	if (pip != IPK_TCP6_MARK)
		return ipk_rss_port_ok(ctx, pip, pport, be);
	pr = ipk_tcp6_pair(ctx, lip);
	return pr && ipk_rss_port_ok6(ctx, pr->local, pr->peer, pport, be);
}

/* Pick a local port whose 4-tuple is free (and, with RSS, whose incoming hash lands
 * on our queue), starting at ctx->eph_next; bounded by the size of the range.
 * Returns the port in network order or 0 when none fits. */
static uint16_t eph_pick(struct ipk_ctx *ctx, uint32_t lip, uint32_t pip, uint16_t pport)
{
	uint32_t lo = ctx->cfg.eph_port_lo, hi = ctx->cfg.eph_port_hi;
	uint32_t n = hi - lo + 1u, i, p = ctx->eph_next;

	if (lo == 0 || hi < lo)
		return 0;
	if (p < lo || p > hi)
		p = lo;
	for (i = 0; i < n; i++) {
		uint16_t be = ipk_htons((uint16_t)p);
		uint32_t next = p == hi ? lo : p + 1u;

		if (eph_rss_ok(ctx, lip, pip, pport, be) &&
		    !ipk_tcp_lookup(ctx, lip, be, pip, pport)) {
			ctx->eph_next = (uint16_t)next;
			return be;
		}
		p = next;
	}
	return 0;
}

/* ------------------------------------------------------- state, freeing */

void ipk_tcp_enter(struct ipk_ctx *ctx, struct ipk_conn *c, enum ipk_tcp_state st)
{
	IPK_UNUSED(ctx);
	c->state = (uint8_t)st;
	ipk_tcp_fast_clear(c); /* set again after the event when ESTABLISHED */
}

void ipk_tcp_backlog_release(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	int idx;

	if (!(c->fl & IPK_TCPF_BACKLOG))
		return;
	c->fl &= ~IPK_TCPF_BACKLOG;
	if (ctx->synrecv_n > 0)
		ctx->synrecv_n--;
	/* one listener per port: the slot is found again rather than kept per connection */
	idx = ipk_tcp_listener_find(ctx, c->t.local_port_be);
	if (idx >= 0 && ctx->listeners[idx].pending > 0)
		ctx->listeners[idx].pending--;
}

int ipk_tcp_listener_find(const struct ipk_ctx *ctx, uint16_t port_be)
{
	uint32_t i;

	for (i = 0; i < ctx->cfg.max_listeners; i++) {
		if (ctx->listeners[i].port_be == port_be)
			return (int)i;
	}
	return -1;
}

void ipk_tcp_report_closed(struct ipk_ctx *ctx, struct ipk_conn *c, enum ipk_close_reason why)
{
	int tell = (c->fl & (IPK_TCPF_ANNOUNCED | IPK_TCPF_ACTIVE)) != 0;

	if (c->fl & IPK_TCPF_REPORTED)
		return;
	c->fl |= IPK_TCPF_REPORTED;
	if (tell && IPK_OPS(ctx)->tcp_closed) {
		ipk_tcp_hold(c);
		IPK_OPS(ctx)->tcp_closed(ctx, c, c->user, why, IPK_OPQ(ctx));
		c->busy--;
	}
}

static void conn_free(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	if (ipk_tcp_is6(&c->t))
		ipk_tcp6_put(ctx, c->t.local_ip4_be);
	c->magic = 0;
	c->state = IPK_TCP_CLOSED;
	ipk_tcp_fast_clear(c);
	ipk_conn_put(ctx, c);
}

/*
 * The one way out. Unhooks the connection from the hash, the timers and the backlog,
 * frees its queues, reports tcp_closed once when the application knows the handle
 * (announced, or an active open), and returns it to the pool unless core code up the
 * stack still holds it (then the last ipk_tcp_release frees it).
 * SYN-RECEIVED connections never announced die silently (RFC 9293 §3.10.7.4: back to
 * LISTEN, which for us means just gone).
 */
void ipk_tcp_destroy(struct ipk_ctx *ctx, struct ipk_conn *c, enum ipk_close_reason why)
{
	if (c->fl & IPK_TCPF_ZOMBIE)
		return;
	hash_remove(ctx, c);
	ipk_tcp_tw_unlink(ctx, c);
	ipk_tcp_timers_remove(ctx, c);
	ipk_tcp_backlog_release(ctx, c);
	ipk_tcp_queues_free(ctx, c);
	c->state = IPK_TCP_CLOSED;
	ipk_tcp_fast_clear(c);
	ipk_tcp_report_closed(ctx, c, why);
	if (c->busy) {
		c->fl |= IPK_TCPF_ZOMBIE;
		return;
	}
	conn_free(ctx, c);
}

void ipk_tcp_release_last(struct ipk_ctx *ctx, struct ipk_conn *c) { conn_free(ctx, c); }

/* RFC 9293 §3.7.1 MSS and RFC 7323 §2.2 window scale from the peer's SYN. */
void ipk_tcp_syn_opts(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_opts *o)
{
	uint32_t ours = ipk_tcp_mss_ours(ctx, &c->t);
	uint32_t m = o->has_mss ? o->mss : IPK_TCP_DEFAULT_MSS;

	if (m > ours)
		m = ours;
	if (m < IPK_TCP_MIN_MSS)
		m = IPK_TCP_MIN_MSS;
	c->mss = m;
	if (o->has_ws) {
		c->fl |= IPK_TCPF_PEER_WS;
		c->snd_wscale = (uint8_t)IPK_MIN(o->ws, IPK_TCP_MAX_WSCALE);
	}
	/* Both sides must send it (§2.2); for an active open our SYN always did. */
	if (o->has_ws && ctx->cfg.tcp_wscale > 0) {
		c->fl |= IPK_TCPF_WS_OK;
		c->rcv_wscale = (uint8_t)IPK_MIN(ctx->cfg.tcp_wscale, IPK_TCP_MAX_WSCALE);
	} else {
		c->fl &= ~IPK_TCPF_WS_OK;
		c->snd_wscale = 0;
		c->rcv_wscale = 0;
	}
	/* RFC 2018 §2: SACK only when both SYNs carry SACK-permitted. */
	if (o->has_sack_perm && ctx->cfg.tcp_sack)
		c->fl |= IPK_TCPF_SACK_OK;
	else
		c->fl &= ~IPK_TCPF_SACK_OK;
	ipk_tcp_ts_syn(ctx, c, o);
	if (c->fl & IPK_TCPF_TS_OK)
		c->mss -= IPK_TCP_TS_LEN; /* RFC 7323 §3.2: room for TS in every segment */
	ipk_tcp_cc_init(ctx, c); /* the initial window is in units of the real MSS */
}

/* ------------------------------------------------------------ handles */

/* A handle the application may use: live, and tcp_closed not yet reported. */
static int conn_check(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	if (!ctx || !c)
		return IPK_EINVAL;
	if (c->magic != IPK_TCP_MAGIC || (c->fl & (IPK_TCPF_REPORTED | IPK_TCPF_ZOMBIE)) ||
	    c->state == IPK_TCP_CLOSED)
		return IPK_ECLOSED;
	return IPK_OK;
}

static int conn_check_ro(const struct ipk_conn *c)
{
	if (!c)
		return IPK_EINVAL;
	if (c->magic != IPK_TCP_MAGIC || c->state == IPK_TCP_CLOSED)
		return IPK_ECLOSED;
	return IPK_OK;
}

int ipk_tcp_conn_setup(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tuple *t)
{
	c->t = *t;
	if (ipk_tcp_is6(t) && ipk_tcp6_hold(ctx, &c->t) != IPK_OK)
		return IPK_ENOMEM;
	t = &c->t;
	c->magic = IPK_TCP_MAGIC;
	c->mss = IPK_TCP_DEFAULT_MSS;
	c->rto_us = ipk_tcp_ns_to_us(ctx->cfg.tcp_rto_init_ns);
	c->sndbuf = ctx->cfg.tcp_sndbuf;
	c->iss = ipk_tcp_isn(ctx, t);
	c->snd_una = c->snd_nxt = c->snd_max = c->iss;
	c->sq_seq = c->iss + 1u;
	if (ctx->iss_floor_on)
		ipk_tcp_iss_above(c, ctx->iss_floor);
	if (ctx->cfg.tcp_nagle)
		c->fl |= IPK_TCPF_NAGLE;
	if (ctx->cfg.tcp_keepalive)
		c->fl |= IPK_TCPF_KEEPALIVE;
	c->quickack = ctx->cfg.tcp_quickack;
	c->cc_algo = ctx->cfg.tcp_cc;
	c->reo_mult = 1; /* RFC 8985 §6.2: RACK.reo_wnd_mult starts at 1 */
	ipk_tcp_cc_init(ctx, c);
	return IPK_OK;
}

/* ------------------------------------------------------------- listen */

int ipk_tcp_listen(struct ipk_ctx *ctx, uint16_t port_be, uint16_t backlog)
{
	return ipk_tcp_listen_family(ctx, port_be, backlog, 0);
}

int ipk_tcp_listen_family(struct ipk_ctx *ctx, uint16_t port_be, uint16_t backlog,
                          unsigned family)
{
	struct ipk_listener *freel = NULL;
	uint32_t i;

	/* Received data goes to ops->tcp_payload: without it, it would vanish and the
	 * window never reopen. */
	if (!ctx || port_be == 0 || backlog == 0 || !IPK_OPS(ctx)->tcp_payload ||
	    (family != 0 && family != IPK_AF_INET && family != IPK_AF_INET6) ||
	    (family == IPK_AF_INET6 && !ctx->cfg.ip6_enable))
		return IPK_EINVAL;
	for (i = 0; i < ctx->cfg.max_listeners; i++) {
		struct ipk_listener *l = &ctx->listeners[i];

		if (l->port_be == port_be)
			return IPK_EADDRINUSE;
		if (l->port_be == 0 && !freel)
			freel = l;
	}
	if (!freel)
		return IPK_ENOMEM;
	freel->port_be = port_be;
	freel->backlog = IPK_MIN(backlog, ctx->cfg.tcp_backlog_max);
	freel->pending = 0;
	freel->family = (uint16_t)family;
	return IPK_OK;
}

int ipk_tcp_unlisten(struct ipk_ctx *ctx, uint16_t port_be)
{
	uint32_t i;

	if (!ctx || port_be == 0)
		return IPK_EINVAL;
	for (i = 0; i < ctx->cfg.max_listeners; i++) {
		if (ctx->listeners[i].port_be == port_be) {
			/* Connections still in SYN-RECEIVED complete normally; their
			 * backlog release sees the port changed and does nothing. */
			ctx->listeners[i].port_be = 0;
			ctx->listeners[i].pending = 0;
			return IPK_OK;
		}
	}
	return IPK_ENOENT;
}

/* ------------------------------------------------------------ connect */

static int active_open(struct ipk_ctx *ctx, struct ipk_tuple *t, void *user,
                       struct ipk_conn **out);

int ipk_tcp_connect(struct ipk_ctx *ctx, uint32_t peer_ip4_be, uint16_t peer_port_be,
                    uint16_t local_port_be, void *user, struct ipk_conn **out, uint64_t now)
{
	struct ipk_tuple t;

	if (out)
		*out = NULL;
	/* RFC 1122 §4.2.3.10: no TCP to the limited broadcast (which also marks IPv6
	 * connections, tcp6.c) */
	if (!ctx || !out || peer_ip4_be == 0 || peer_ip4_be == IPK_TCP6_MARK || peer_port_be == 0 ||
	    !IPK_OPS(ctx)->tcp_payload)
		return IPK_EINVAL;
	/* Off-link with no gateway: every SYN would be dropped (IPK_DROP_NO_ROUTE) until
	 * the retries ran out; say so now, as Linux's connect() does (ENETUNREACH there;
	 * one code here, as ipk_udp_sendto). An on-link peer whose ARP is unresolved is
	 * not refused: resolution is asynchronous and the SYN waits for it. */
	if (ipk_ip4_next_hop(ctx, peer_ip4_be) == 0)
		return IPK_EHOSTUNREACH;
	now = ipk_clock(ctx, now);
	t.local_ip4_be = ctx->cfg.ip4_be;
	t.peer_ip4_be = peer_ip4_be;
	t.local_port_be = local_port_be;
	t.peer_port_be = peer_port_be;
	return active_open(ctx, &t, user, out);
}

/* The 4-tuple t for an active open (local port 0: an ephemeral one, a TIME_WAIT
 * 4-tuple when none is free), then the SYN. */
static int active_open(struct ipk_ctx *ctx, struct ipk_tuple *t, void *user,
                       struct ipk_conn **out)
{
	struct ipk_conn *c;
	uint32_t floor = 0;
	int reused = 0;

	if (t->local_port_be == 0) {
		t->local_port_be = eph_pick(ctx, t->local_ip4_be, t->peer_ip4_be, t->peer_port_be);
		if (t->local_port_be == 0) {
			t->local_port_be = ipk_tcp_tw_eph(ctx, t->local_ip4_be, t->peer_ip4_be,
			                                  t->peer_port_be, &floor);
			reused = t->local_port_be != 0;
		}
	} else {
		c = ipk_tcp_lookup(ctx, t->local_ip4_be, t->local_port_be, t->peer_ip4_be,
		                   t->peer_port_be);
		reused = c ? ipk_tcp_tw_take(ctx, c, &floor) : 0;
		if (c && !reused)
			t->local_port_be = 0;
	}
	if (t->local_port_be == 0)
		return IPK_EADDRINUSE;
	c = ipk_tcp_conn_take(ctx);
	if (!c)
		return IPK_ENOMEM;
	if (ipk_tcp_conn_setup(ctx, c, t) != IPK_OK) {
		ipk_conn_put(ctx, c);
		return IPK_ENOMEM;
	}
	if (reused)
		ipk_tcp_iss_above(c, floor);
	c->user = user;
	c->fl |= IPK_TCPF_ACTIVE;
	ipk_tcp_enter(ctx, c, IPK_TCP_SYN_SENT);
	ipk_tcp_hash_insert(ctx, c);
	ctx->cnt.tcp_active_opens++;
	*out = c;
	/* RFC 9293 §3.10.1: send SYN; if no packet is free now the retry timer sends it. */
	ipk_tcp_hold(c);
	ipk_tcp_output(ctx, c);
	ipk_tcp_release(ctx, c);
	ipk_link_flush(ctx);
	return IPK_OK;
}

/* A peer TCP over IPv6 may go to: unicast, not ::1, not IPv4-mapped (RFC 4291
 * §2.5.5.2: those are never routed as IPv6; IPv4 is IPK_AF_INET). */
static int tcp6_peer_ok(const uint8_t a[16])
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	static const uint8_t lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

	return !ipk_ip6_is_unspecified(a) && !ipk_ip6_is_multicast(a) &&
	       ipk_memcmp(a, mapped, 12) != 0 && ipk_memcmp(a, lo, 16) != 0;
}

int ipk_tcp_connect_addr(struct ipk_ctx *ctx, const struct ipk_addr *peer,
                         uint16_t peer_port_be, uint16_t local_port_be, void *user,
                         struct ipk_conn **out, uint64_t now)
{
	struct ipk_tuple t;
	uint8_t src[16], nh[16];
	uint32_t ip4, pair;
	int rc;

	if (out)
		*out = NULL;
	if (!ctx || !peer)
		return IPK_EINVAL;
	if (peer->family == IPK_AF_INET) {
		ipk_memcpy(&ip4, peer->a, 4);
		return ipk_tcp_connect(ctx, ip4, peer_port_be, local_port_be, user, out, now);
	}
	if (!out || peer->family != IPK_AF_INET6 || !ctx->cfg.ip6_enable || peer_port_be == 0 ||
	    !IPK_OPS(ctx)->tcp_payload || !tcp6_peer_ok(peer->a))
		return IPK_EINVAL;
	if (!ipk_ip6_src_select(ctx, peer->a, src) || !ipk_ip6_route(ctx, peer->a, nh))
		return IPK_EHOSTUNREACH;
	now = ipk_clock(ctx, now);
	pair = ipk_tcp6_pair_take(ctx, src, peer->a);
	if (pair == IPK_TCP6_NONE)
		return IPK_ENOMEM;
	t.local_ip4_be = pair;
	t.peer_ip4_be = IPK_TCP6_MARK;
	t.local_port_be = local_port_be;
	t.peer_port_be = peer_port_be;
	/* held across the open: reusing a TIME_WAIT 4-tuple frees the old connection,
	 * which may be the pair's only other holder */
	ipk_tcp6_hold(ctx, &t);
	rc = active_open(ctx, &t, user, out);
	ipk_tcp6_put(ctx, pair); /* freed here when the open failed and nothing else holds it */
	return rc;
}

/* --------------------------------------------------------------- send */

static int can_send(const struct ipk_conn *c)
{
	if (c->fl & IPK_TCPF_FIN_QUEUED)
		return 0;
	return c->state == IPK_TCP_ESTABLISHED || c->state == IPK_TCP_CLOSE_WAIT ||
	       c->state == IPK_TCP_SYN_SENT || c->state == IPK_TCP_SYN_RECEIVED;
}

uint32_t ipk_tcp_sndbuf_free(const struct ipk_conn *c)
{
	if (conn_check_ro(c) != IPK_OK || !can_send(c))
		return 0;
	return c->sndbuf > c->sq_bytes ? c->sndbuf - c->sq_bytes : 0;
}

static void sq_append(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_pb *pb)
{
	ctx->wmem += pb->len;
	pb->next = NULL;
	if (c->sq_tail)
		c->sq_tail->next = pb;
	else
		c->sq_head = pb;
	c->sq_tail = pb;
	c->sq_bytes += pb->len;
}

/* Data or a FIN was queued (or an ACK is owed): send now, or, when the call comes from
 * a callback of c's own input event, leave it to that event's one output pass, so the
 * reply goes out once, with the ACK on it (tcp_in.c ipk_tcp_input_conn). */
static void after_queue(struct ipk_ctx *ctx, struct ipk_conn *c, uint64_t now)
{
	if (ctx->in_event_c == c)
		return;
	now = ipk_clock(ctx, now);
	ipk_tcp_hold(c);
	ipk_tcp_output(ctx, c);
	ipk_tcp_release(ctx, c);
	ipk_link_flush(ctx);
}

/*
 * A zero-copy send pins the application's packets until acknowledged, so it is
 * charged by what it pins, as Linux charges sk_wmem by truesize: at least half a
 * buffer per packet (Linux doubles SO_SNDBUF for the same overhead), so 1-byte
 * sends cannot pin tcp_sndbuf buffers. The charge beyond the bytes comes off
 * c->sndbuf until the pb is freed (tcp_out.c ipk_tcp_sq_release). ipk_tcp_write's
 * own packets, topped up as they go, are charged by bytes.
 */
static uint32_t sq_overhead(struct ipk_ctx *ctx, void *pkt, uint32_t len)
{
	uint64_t half = 0;

	for (; pkt; pkt = ipk_pkt_chain_next(ctx, pkt))
		half += ctx->cfg.pkt_buf_size / 2u;
	return half > len ? (uint32_t)IPK_MIN(half - len, 0xffffffffull) : 0u;
}

/*
 * The context's send memory (cfg.wmem_max, Linux's tcp_mem): what one more call may
 * queue on c. Every connection may have IPK_WMEM_MIN_BUFS buffers' worth queued
 * whatever the others hold (Linux guarantees tcp_wmem[0] the same way), so peers
 * that never ACK cannot stop the others, and no wake-up is lost: a connection is
 * refused only with data queued, and the tcp_acked event of that data tells it
 * when to try again.
 */
#define IPK_WMEM_MIN_BUFS 4u

void ipk_wmem_limit_set(struct ipk_ctx *ctx)
{
	if (ctx->cfg.wmem_max)
		ctx->wmem_lim = ctx->cfg.wmem_max;
	else
		ctx->wmem_lim = (uint64_t)ctx->pb_total * ctx->cfg.pkt_buf_size / 4u;
}

/* What c has queued in wmem's unit (bytes plus sq_overhead's charges), counted up
 * to `min` only: every pb costs at least half a buffer (sq_overhead), so at most
 * 2 * IPK_WMEM_MIN_BUFS pbs are looked at. The charges are not kept as a sum (the
 * connection object has no room left; autotuning moves the buffer they come off). */
static uint64_t wmem_mine(const struct ipk_conn *c, uint64_t min)
{
	const struct ipk_pb *pb;
	uint64_t mine = c->sq_bytes;

	for (pb = c->sq_head; pb && mine < min; pb = pb->next)
		mine += IPK_TCP_PB_OV(pb);
	return mine;
}

static uint64_t wmem_room(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	uint64_t lim = ctx->wmem_lim, left = lim > ctx->wmem ? lim - ctx->wmem : 0u, min, mine;

	min = (uint64_t)IPK_WMEM_MIN_BUFS * ctx->cfg.pkt_buf_size;
	if (left >= min)
		return left; /* the guarantee cannot add to it */
	mine = wmem_mine(c, min);
	min = min > mine ? min - mine : 0u;
	return IPK_MAX(left, min);
}

/* What ipk_tcp_write may queue of `want` bytes under the context's limit. */
static uint32_t wmem_cut(struct ipk_ctx *ctx, const struct ipk_conn *c, uint32_t want)
{
	uint64_t w = wmem_room(ctx, c);

	if (w >= want)
		return want;
	ctx->cnt.tcp_wmem_limited++;
	return (uint32_t)w;
}

/* Zero-copy send: on success the pb holds the application's chain until acknowledged. */
int ipk_tcp_send(struct ipk_ctx *ctx, struct ipk_conn *c, void *pkt, uint64_t now)
{
	struct ipk_pb *pb;
	uint32_t len, ov;
	uint64_t room;
	int rc = conn_check(ctx, c);

	if (rc != IPK_OK)
		return rc;
	if (!pkt)
		return IPK_EINVAL;
	if (!can_send(c))
		return IPK_ENOTCONN;
	len = ipk_pkt_chain_len(ctx, pkt);
	if (len == 0)
		return IPK_EINVAL;
	ov = sq_overhead(ctx, pkt, len);
	room = c->sndbuf > c->sq_bytes ? c->sndbuf - c->sq_bytes : 0u;
	if ((uint64_t)len + ov > room) { /* room <= the send buffer <= INT32_MAX */
		ctx->cnt.tcp_sndbuf_full++;
		return IPK_EAGAIN;
	}
	if ((uint64_t)len + ov > wmem_room(ctx, c)) {
		ctx->cnt.tcp_wmem_limited++;
		return IPK_EAGAIN;
	}
	pb = ipk_pb_get(ctx);
	if (!pb)
		return IPK_ENOMEM;
	pb->pkt = pkt;
	pb->off = 0;
	pb->len = len;
	pb->seq = ipk_tcp_data_end(c);
	pb->aux = 0;
	IPK_TCP_PB_OV(pb) = ov;
	c->sndbuf -= ov;
	ctx->wmem += ov; /* and len in sq_append */
	sq_append(ctx, c, pb);
	after_queue(ctx, c, now);
	return (int)len;
}

/* Bytes one copy-packet of the send queue holds. With TSO and scatter-gather a
 * segment is cut from the queue by sequence whatever the packets' sizes (sq_attach
 * clones each packet's part of it; retransmissions and SACK work on sequence ranges
 * too), so a packet is filled to its buffer: fewer packets, pbs, clones, payload
 * events at an LRO receiver and frees per byte (2048-byte buffers: 1.4x fewer than
 * one per MSS). Otherwise one packet per MSS: with SG alone every segment is then
 * one clone, not two. */
static uint32_t write_cap(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	const uint32_t tso_sg = IPK_CAP_TSO | IPK_CAP_SG;

	if ((ctx->cfg.caps & tso_sg) == tso_sg)
		return ctx->cfg.pkt_buf_size;
	return IPK_MIN(c->mss, ctx->cfg.pkt_buf_size);
}

/* Copy what fits into the tail packet when it is one of ours (ipk_tcp_write's) and
 * has room; returns the bytes taken. An acknowledged head moved pb->off on, not the
 * packet's start: the room left is what the buffer has after the packet's end. */
static uint32_t write_topup(struct ipk_ctx *ctx, struct ipk_conn *c, const uint8_t *buf,
                            uint32_t len, uint32_t cap)
{
	struct ipk_pb *pb = c->sq_tail;
	uint32_t have, n;

	if (!pb || !(pb->aux & IPK_TCP_PB_COPY) || pb->len >= cap)
		return 0;
	have = ipk_pkt_len(ctx, pb->pkt);
	if (have >= ctx->cfg.pkt_buf_size)
		return 0;
	n = IPK_MIN(IPK_MIN(len, cap - pb->len), ctx->cfg.pkt_buf_size - have);
	/* Bytes after the old end are new; clones already sent never see them. */
	ipk_pkt_set_len(ctx, pb->pkt, have + n);
	ipk_memcpy(ipk_pkt_data(ctx, pb->pkt) + have, buf, n);
	pb->len += n;
	c->sq_bytes += n;
	ctx->wmem += n;
	return n;
}

/* Top up the tail packet, then fresh packets of up to write_cap bytes each. */
static uint32_t write_copy(struct ipk_ctx *ctx, struct ipk_conn *c, const uint8_t *buf,
                           uint32_t len)
{
	uint32_t cap = write_cap(ctx, c), done = write_topup(ctx, c, buf, len, cap);

	while (done < len) {
		uint32_t n = IPK_MIN(len - done, cap);
		void *p = ipk_tcp_pkt_take(ctx);
		struct ipk_pb *pb;

		if (!p) {
			ipk_drop(ctx, IPK_DROP_NO_PKT);
			break;
		}
		pb = ipk_pb_get(ctx);
		if (!pb) {
			ipk_pkt_free(ctx, p);
			break;
		}
		ipk_pkt_set_len(ctx, p, n);
		ipk_copy_short(ipk_pkt_data(ctx, p), buf + done, n);
		pb->pkt = p;
		pb->off = 0;
		pb->len = n;
		pb->seq = ipk_tcp_data_end(c);
		pb->aux = IPK_TCP_PB_COPY;
		IPK_TCP_PB_OV(pb) = 0;
		sq_append(ctx, c, pb); /* counts n in sq_bytes and wmem */
		done += n;
	}
	return done;
}

IPK_HOT int ipk_tcp_write(struct ipk_ctx *ctx, struct ipk_conn *c, const void *buf, uint32_t len,
                  uint64_t now)
{
	uint32_t room, want, n;
	int rc = conn_check(ctx, c);

	if (rc != IPK_OK)
		return rc;
	if (!buf && len)
		return IPK_EINVAL;
	if (!can_send(c))
		return IPK_ENOTCONN;
	/* c->sndbuf: the send buffer less the zero-copy packets' charge (sq_overhead) */
	room = c->sndbuf > c->sq_bytes ? c->sndbuf - c->sq_bytes : 0;
	want = IPK_MIN(len, room);
	if (ctx->wmem + want > ctx->wmem_lim) /* the context's limit: rarely reached */
		want = wmem_cut(ctx, c, want);
	n = write_copy(ctx, c, (const uint8_t *)buf, want);
	if (n == 0 && want > 0)
		return IPK_ENOBUFS;
	if (n > 0)
		after_queue(ctx, c, now);
	return (int)n;
}

IPK_HOT int ipk_tcp_recved(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t bytes, uint64_t now)
{
	uint32_t buf, wnd, thresh, cur;
	int rc = conn_check(ctx, c);

	if (rc != IPK_OK)
		return rc;
	if (bytes > c->rcv_unread)
		return IPK_EINVAL;
	now = ipk_clock(ctx, now);
	c->rcv_unread -= bytes;
	if (!ipk_tcp_synced(c) || (c->fl & IPK_TCPF_FIN_RCVD))
		return IPK_OK;
	/* RFC 9293 §3.8.6.2.2: tell the peer at once only when the window grew by
	 * min(buffer/2, MSS) and what it may still send is below half the buffer;
	 * otherwise the next ACK carries the new edge. The buffer is what the window
	 * field can announce: without window scaling (RFC 7323 §2.2) at most 65535
	 * bytes of a larger tcp_rcvbuf, or every read would look like an opening.
	 * The second test first, against tcp_rcvbuf/2 (>= buf/2): an application
	 * that reads as data comes (a bulk receiver, one call per packet of an LRO
	 * chain) leaves more than that announced and stops here. */
	cur = ipk_seq_gt(c->rcv_adv, c->rcv_nxt) ? c->rcv_adv - c->rcv_nxt : 0;
	if (cur >= ctx->cfg.tcp_rcvbuf / 2u)
		return IPK_OK;
	buf = IPK_MIN(ctx->cfg.tcp_rcvbuf, (uint32_t)0xffffu << c->rcv_wscale);
	wnd = IPK_MIN(ctx->cfg.tcp_rcvbuf - c->rcv_unread, buf);
	thresh = IPK_MIN(buf / 2u, ipk_tcp_rcv_mss(ctx));
	if (ipk_seq_ge(c->rcv_nxt + wnd, c->rcv_adv + thresh) && cur < buf / 2u) {
		c->fl |= IPK_TCPF_ACK_NOW;
		after_queue(ctx, c, now);
	}
	return IPK_OK;
}

/* ------------------------------------------------------------- closing */

int ipk_tcp_close(struct ipk_ctx *ctx, struct ipk_conn *c, uint64_t now)
{
	int rc = conn_check(ctx, c);

	if (rc != IPK_OK)
		return rc;
	now = ipk_clock(ctx, now);
	switch (c->state) {
	case IPK_TCP_SYN_SENT:
		/* RFC 9293 §3.10.4: nothing to tell the peer yet. */
		ipk_tcp_destroy(ctx, c, IPK_CLOSE_ABORTED);
		return IPK_OK;
	case IPK_TCP_SYN_RECEIVED:
	case IPK_TCP_ESTABLISHED:
	case IPK_TCP_CLOSE_WAIT:
		if (c->fl & IPK_TCPF_FIN_QUEUED)
			return IPK_ENOTCONN;
		c->fl |= IPK_TCPF_FIN_QUEUED;
		ipk_tcp_fast_clear(c);
		if (c->state == IPK_TCP_ESTABLISHED)
			ipk_tcp_enter(ctx, c, IPK_TCP_FIN_WAIT_1);
		else if (c->state == IPK_TCP_CLOSE_WAIT)
			ipk_tcp_enter(ctx, c, IPK_TCP_LAST_ACK);
		after_queue(ctx, c, now);
		return IPK_OK;
	default:
		return IPK_ENOTCONN;
	}
}

int ipk_tcp_abort(struct ipk_ctx *ctx, struct ipk_conn *c, uint64_t now)
{
	int rc = conn_check(ctx, c);

	if (rc != IPK_OK)
		return rc;
	now = ipk_clock(ctx, now);
	/* RFC 9293 §3.10.5: RST in the synchronized states (and SYN-RECEIVED). */
	if (c->state != IPK_TCP_SYN_SENT)
		ipk_tcp_send_rst_conn(ctx, c);
	ipk_tcp_destroy(ctx, c, IPK_CLOSE_ABORTED);
	ipk_link_flush(ctx);
	return IPK_OK;
}

/* ------------------------------------------------------------ accessors */

void *ipk_tcp_user(const struct ipk_conn *c)
{
	return conn_check_ro(c) == IPK_OK ? c->user : NULL;
}

void ipk_tcp_set_user(struct ipk_conn *c, void *user)
{
	if (conn_check_ro(c) == IPK_OK)
		c->user = user;
}

int ipk_tcp_tuple(const struct ipk_conn *c, struct ipk_tuple *t)
{
	int rc = conn_check_ro(c);

	if (rc != IPK_OK)
		return rc;
	if (!t)
		return IPK_EINVAL;
	*t = c->t;
	if (ipk_tcp_is6(&c->t)) {
		t->local_ip4_be = t->peer_ip4_be = 0;
		return IPK_EINVAL;
	}
	return IPK_OK;
}

int ipk_tcp_atuple(const struct ipk_ctx *ctx, const struct ipk_conn *c, struct ipk_atuple *t)
{
	int rc = conn_check_ro(c);

	if (rc != IPK_OK)
		return rc;
	if (!ctx || !t)
		return IPK_EINVAL;
	return ipk_tcp6_atuple(ctx, &c->t, t);
}

int ipk_tcp_set_nagle(struct ipk_conn *c, int on)
{
	int rc = conn_check_ro(c);

	if (rc != IPK_OK)
		return rc;
	if (on)
		c->fl |= IPK_TCPF_NAGLE;
	else
		c->fl &= ~IPK_TCPF_NAGLE;
	return IPK_OK;
}

int ipk_tcp_set_cc(struct ipk_conn *c, unsigned algo)
{
	int rc = conn_check_ro(c);
	const struct ipk_cc_algo *a = ipk_tcp_cc_algo(algo);

	if (rc != IPK_OK)
		return rc;
	if (!a)
		return IPK_EINVAL;
	c->cc_algo = (uint8_t)algo;
	a->init(c);
	return IPK_OK;
}

int ipk_tcp_set_keepalive(struct ipk_ctx *ctx, struct ipk_conn *c, int on, uint64_t now)
{
	int rc = conn_check(ctx, c);

	if (rc != IPK_OK)
		return rc;
	now = ipk_clock(ctx, now);
	if (on)
		c->fl |= IPK_TCPF_KEEPALIVE;
	else
		c->fl &= ~IPK_TCPF_KEEPALIVE;
	ipk_tcp_keepalive_restart(ctx, c);
	ipk_tcp_timers_update(ctx, c);
	return IPK_OK;
}

enum ipk_tcp_state ipk_tcp_state(const struct ipk_conn *c)
{
	if (conn_check_ro(c) != IPK_OK)
		return IPK_TCP_CLOSED;
	return (enum ipk_tcp_state)c->state;
}

int ipk_tcp_info(const struct ipk_conn *c, struct ipk_tcp_info *info)
{
	int rc = conn_check_ro(c);

	if (rc != IPK_OK)
		return rc;
	if (!info)
		return IPK_EINVAL;
	ipk_memset(info, 0, sizeof(*info));
	info->state = (enum ipk_tcp_state)c->state;
	info->mss = c->mss;
	info->cwnd = c->cwnd;
	info->ssthresh = c->ssthresh;
	info->snd_wnd = c->snd_wnd;
	info->rcv_wnd = c->rcv_adv - c->rcv_nxt;
	info->inflight = c->snd_nxt - c->snd_una;
	info->srtt_ns = ipk_tcp_srtt_ns(c);
	info->rttvar_ns = (uint64_t)c->rttvar_us * IPK_TCP_NS_PER_US;
	info->rto_ns = ipk_tcp_rto_ns(c);
	info->retransmits = c->retransmits;
	info->snd_wscale = c->snd_wscale;
	info->rcv_wscale = c->rcv_wscale;
	info->cc_algo = c->cc_algo;
	info->ecn = (c->fl & IPK_TCPF_ECN) ? 1u : 0u;
	info->sack_ok = (c->fl & IPK_TCPF_SACK_OK) ? 1 : 0;
	info->ts_ok = (c->fl & IPK_TCPF_TS_OK) ? 1 : 0;
	info->sacked_bytes = ipk_tcp_sb_sacked_bytes(c);
	return IPK_OK;
}
