/*
 * stack.c: the context (configuration, memory layout, pools), the ipk_run driver
 * that feeds received frames to the link layer and fans timers out to the modules,
 * counters, and packet-chain helpers every module shares.
 */
#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tcp.h"

#define IPK_NS_PER_MS 1000000ull
#define IPK_NS_PER_S 1000000000ull

/* ---------------------------------------------------------------- config */

static void config_default_tcp(struct ipk_config *cfg)
{
	cfg->tcp_sndbuf = 256u * 1024u;
	cfg->tcp_rcvbuf = 256u * 1024u;
	cfg->tcp_ooo_max = 0; /* follow tcp_rcvbuf (tcp_in.c ooo_limit) */
	cfg->tcp_rmem_max = 0; /* 2 * tcp_rcvbuf (tcp_mem.c) */
	cfg->rmem_max = 0;     /* from the pb pool (tcp_mem.c) */
	cfg->wmem_max = 0;     /* from the pb pool (tcp.c wmem_room) */
	cfg->tcp_sndbuf_max = 0; /* autotuning off: see core.h and tcp_mem.c */
	cfg->tcp_rto_min_ns = 200 * IPK_NS_PER_MS;
	cfg->tcp_rto_max_ns = 60 * IPK_NS_PER_S;
	cfg->tcp_rto_init_ns = 1 * IPK_NS_PER_S;
	cfg->tcp_max_retries = 12;
	cfg->tcp_syn_retries = 6;
	cfg->tcp_time_wait_ns = 60 * IPK_NS_PER_S;
	cfg->tcp_delack_ns = 40 * IPK_NS_PER_MS;
	cfg->tcp_nagle = 0;
	cfg->tcp_wscale = 7;
	cfg->tcp_backlog_max = 128;
	cfg->tcp_challenge_ack_limit = 1000;
	cfg->tcp_invalid_ratelimit_ns = 500 * IPK_NS_PER_MS;
	cfg->tcp_rst_limit = 1000;
	cfg->tcp_synrecv_max = 256;
	cfg->tcp_syncookies = 1;
	cfg->tcp_tw_max = 4096;
	cfg->tcp_sack = 1;
	cfg->tcp_timestamps = 1;
	cfg->tcp_rack = 1;
	cfg->tcp_frto = 1;
	cfg->eph_port_lo = 49152;
	cfg->eph_port_hi = 65535;
	cfg->tcp_cc = IPK_CC_NEWRENO;
	cfg->tcp_ack_every = 2;
	cfg->tcp_quickack = 16;
	cfg->tcp_ecn = 0;
	cfg->tcp_keepalive = 0;
	cfg->tcp_keepalive_cnt = 9;
	cfg->tcp_keepalive_idle_ns = 7200 * IPK_NS_PER_S;
	cfg->tcp_keepalive_intvl_ns = 75 * IPK_NS_PER_S;
	cfg->ip6_prefix_len = 64;
	cfg->ip6_hop_limit = 64;
	cfg->ip6_slaac = 1;
	cfg->ip6_dad_transmits = 1;
	cfg->ip6_rs_count = 3;
}

void ipk_config_default(struct ipk_config *cfg)
{
	if (!cfg)
		return;
	ipk_memset(cfg, 0, sizeof(*cfg));
	cfg->version = IPK_CONFIG_VERSION;
	cfg->link = IPK_LINK_ETH;
	cfg->mtu = 1500;
	cfg->pkt_buf_size = 2048;
	cfg->tso_max = 65535 - 40;
	cfg->conn_hash_buckets = 1024;
	cfg->max_listeners = 16;
	cfg->max_udp_binds = 16;
	cfg->arp_entries = 64;
	cfg->frag_slots = 8;
	cfg->arp_ttl_ns = 60 * IPK_NS_PER_S;
	cfg->arp_retry_ns = 1 * IPK_NS_PER_S;
	cfg->arp_retries = 3;
	cfg->arp_queue_per_entry = 8;
	cfg->ttl = 64;
	cfg->frag_timeout_ns = 30 * IPK_NS_PER_S; /* RFC 791: 15 s lower bound; Linux uses 30 s */
	cfg->frag_max_bytes = 65535;
	cfg->frag_max_pieces = 64;
	config_default_tcp(cfg);
	ipk_rss_key_symmetric(cfg->rss_key);
}

/*
 * Configuration rules, one reason each (ipk_config_check). Each returns NULL when its
 * part is sound, else a static string naming the first field at fault.
 */
/* IPv6 (docs/ipv6-core.md): Ethernet only (ND needs a link layer), RFC 8200 §5's
 * minimum link MTU of 1280. */
static const char *config_why_ip6(const struct ipk_config *cfg)
{
	if (!cfg->ip6_enable)
		return NULL;
	if (cfg->link != IPK_LINK_ETH)
		return "ip6_enable needs link IPK_LINK_ETH";
	if (cfg->mtu < IPK_IP6_MIN_MTU)
		return "ip6_enable needs mtu >= 1280 (RFC 8200 §5)";
	if (cfg->ip6_prefix_len > 128 || cfg->ip6_hop_limit == 0)
		return "ip6_prefix_len above 128 or ip6_hop_limit 0";
	return NULL;
}

static const char *config_why_link(const struct ipk_config *cfg)
{
	uint32_t l2;

	if (cfg->version != IPK_CONFIG_VERSION)
		return "version is not IPK_CONFIG_VERSION (call ipk_config_default first)";
	if (cfg->link != IPK_LINK_ETH && cfg->link != IPK_LINK_RAWIP)
		return "link is neither IPK_LINK_ETH nor IPK_LINK_RAWIP";
	l2 = cfg->link == IPK_LINK_ETH ? IPK_ETH_HLEN : 0;
	/* RFC 791: every host must accept 576-byte datagrams. A frame larger than one
	 * packet buffer needs chains both ways: IPK_CAP_SG to send it, IPK_CAP_LRO to
	 * take it whole on receive (e.g. AF_XDP multi-buffer). */
	if (cfg->mtu < 576)
		return "mtu is below 576 (RFC 791)";
	if (cfg->pkt_buf_size < l2 + 576u)
		return "pkt_buf_size is below 576 plus the link header";
	if (cfg->mtu > cfg->pkt_buf_size - l2 &&
	    (cfg->caps & (IPK_CAP_SG | IPK_CAP_LRO)) != (IPK_CAP_SG | IPK_CAP_LRO))
		return "mtu exceeds one packet buffer without both IPK_CAP_SG and IPK_CAP_LRO";
	return config_why_ip6(cfg);
}

static const char *config_why_tables(const struct ipk_config *cfg)
{
	if (cfg->conn_hash_buckets == 0 ||
	    (cfg->conn_hash_buckets & (cfg->conn_hash_buckets - 1)) != 0)
		return "conn_hash_buckets is not a power of two";
	if (cfg->max_listeners == 0)
		return "max_listeners is 0";
	if (cfg->max_udp_binds == 0)
		return "max_udp_binds is 0";
	if (cfg->arp_entries == 0)
		return "arp_entries is 0";
	if (cfg->frag_slots == 0)
		return "frag_slots is 0";
	if (cfg->frag_max_pieces == 0)
		return "frag_max_pieces is 0";
	if (cfg->frag_max_bytes == 0)
		return "frag_max_bytes is 0";
	if (cfg->arp_retries == 0)
		return "arp_retries is 0";
	if (cfg->arp_queue_per_entry == 0)
		return "arp_queue_per_entry is 0";
	if (cfg->ttl == 0)
		return "ttl is 0";
	return NULL;
}

static const char *config_why_rss(const struct ipk_config *cfg)
{
	if (cfg->eph_port_lo == 0)
		return "eph_port_lo is 0";
	if (cfg->eph_port_lo > cfg->eph_port_hi)
		return "eph_port_lo is above eph_port_hi";
	if (cfg->rss_reta_size && !cfg->rss_reta)
		return "rss_reta is NULL with rss_reta_size set";
	if (cfg->rss_reta_size && cfg->rss_fields > IPK_RSS_F_DEFAULT)
		return "rss_fields has bits other than IPK_RSS_F_*";
	if (!ipk_rss_config_valid(cfg))
		return "rss_queue appears nowhere in rss_reta";
	return NULL;
}

static const char *config_why_tcp(const struct ipk_config *cfg)
{
	if (cfg->tcp_sndbuf == 0)
		return "tcp_sndbuf is 0";
	/* ipk_tcp_write / ipk_tcp_send return the bytes queued as an int: a send
	 * buffer above INT32_MAX would let a count look like an error code. */
	if (cfg->tcp_sndbuf > 0x7fffffffu)
		return "tcp_sndbuf is above INT32_MAX";
	if (cfg->tcp_sndbuf_max > 0x7fffffffu)
		return "tcp_sndbuf_max is above INT32_MAX";
	if (cfg->tcp_rcvbuf == 0)
		return "tcp_rcvbuf is 0";
	if (cfg->tcp_rto_init_ns == 0)
		return "tcp_rto_init_ns is 0";
	if (cfg->tcp_rto_min_ns > cfg->tcp_rto_max_ns)
		return "tcp_rto_min_ns is above tcp_rto_max_ns";
	if (cfg->tcp_syncookies > 2)
		return "tcp_syncookies is not 0, 1 or 2";
	if (!ipk_tcp_cc_algo(cfg->tcp_cc))
		return "tcp_cc is not an IPK_CC_* algorithm";
	if (cfg->tcp_prr > IPK_PRR_OFF)
		return "tcp_prr is not an IPK_PRR_* value";
	if (cfg->tcp_ack_every == 0)
		return "tcp_ack_every is 0";
	if (cfg->tcp_keepalive_cnt == 0)
		return "tcp_keepalive_cnt is 0";
	if (cfg->tcp_keepalive_idle_ns == 0)
		return "tcp_keepalive_idle_ns is 0";
	if (cfg->tcp_keepalive_intvl_ns == 0)
		return "tcp_keepalive_intvl_ns is 0";
	return NULL;
}

/* [a, a + na) and [b, b + nb) share a byte */
static int spans_overlap(uint32_t a, uint32_t na, uint32_t b, uint32_t nb)
{
	return a < b + nb && b < a + na;
}

/* The packet descriptor members declared in pkt_fields must not overlap. */
static const char *config_why_pkt_fields(const struct ipk_config *cfg)
{
	uint32_t f = cfg->pkt_fields, p = (uint32_t)sizeof(void *);
	uint32_t d = cfg->pkt_data_off, l = cfg->pkt_len_off, n = cfg->pkt_next_off;
	const uint32_t all = IPK_PKT_FIELD_DATA | IPK_PKT_FIELD_LEN | IPK_PKT_FIELD_NEXT |
	                     IPK_PKT_FIELD_LEN_SET | IPK_PKT_RECYCLE;

	if (f & ~all)
		return "pkt_fields has bits other than IPK_PKT_FIELD_* and IPK_PKT_RECYCLE";
	if ((f & IPK_PKT_FIELD_LEN_SET) && !(f & IPK_PKT_FIELD_LEN))
		return "pkt_fields has IPK_PKT_FIELD_LEN_SET without IPK_PKT_FIELD_LEN";
	if ((f & IPK_PKT_FIELD_DATA) && (f & IPK_PKT_FIELD_LEN) && spans_overlap(d, p, l, 4))
		return "pkt_data_off and pkt_len_off overlap";
	if ((f & IPK_PKT_FIELD_DATA) && (f & IPK_PKT_FIELD_NEXT) && spans_overlap(d, p, n, p))
		return "pkt_data_off and pkt_next_off overlap";
	if ((f & IPK_PKT_FIELD_LEN) && (f & IPK_PKT_FIELD_NEXT) && spans_overlap(l, 4, n, p))
		return "pkt_len_off and pkt_next_off overlap";
	return NULL;
}

static const char *config_why(const struct ipk_config *cfg)
{
	const char *why;

	if (!cfg)
		return "config is NULL";
	why = config_why_link(cfg);
	if (!why)
		why = config_why_tables(cfg);
	if (!why)
		why = config_why_rss(cfg);
	if (!why)
		why = config_why_tcp(cfg);
	if (!why)
		why = config_why_pkt_fields(cfg);
	return why;
}

/* The ops every context calls (packet ops, tx, random) and those its caps need.
 * tcp_payload and udp_recv are checked where TCP and UDP are first used
 * (ipk_tcp_listen, ipk_tcp_connect, ipk_udp_bind). */
#define OPS_REQUIRE(o, f)                                 \
	do {                                              \
		if (!(o)->f)                              \
			return "ops->" #f " is NULL (required)"; \
	} while (0)

static const char *ops_why_pkt(const struct ipk_ops *o)
{
	OPS_REQUIRE(o, pkt_alloc);
	OPS_REQUIRE(o, pkt_free);
	OPS_REQUIRE(o, pkt_data);
	OPS_REQUIRE(o, pkt_len);
	OPS_REQUIRE(o, pkt_set_len);
	OPS_REQUIRE(o, pkt_adj_head);
	OPS_REQUIRE(o, pkt_trim_tail);
	OPS_REQUIRE(o, pkt_clone);
	OPS_REQUIRE(o, pkt_chain_append);
	OPS_REQUIRE(o, pkt_chain_next);
	OPS_REQUIRE(o, pkt_chain_cut);
	return NULL;
}

static const char *ops_why(const struct ipk_ops *o, const struct ipk_config *cfg)
{
	const uint32_t tx_caps = IPK_CAP_TX_CSUM_IP4 | IPK_CAP_TX_CSUM_TCP |
	                         IPK_CAP_TX_CSUM_UDP | IPK_CAP_TSO | IPK_CAP_TX_CSUM_TCP6 |
	                         IPK_CAP_TSO6;
	const uint32_t rx_caps = IPK_CAP_RX_CSUM_IP4 | IPK_CAP_RX_CSUM_L4;
	const char *why;

	if (!o)
		return "ops is NULL";
	why = ops_why_pkt(o);
	if (why)
		return why;
	OPS_REQUIRE(o, tx);
	OPS_REQUIRE(o, random);
	if ((cfg->caps & tx_caps) && !o->tx_offload)
		return "ops->tx_offload is NULL with a transmit offload in caps";
	if ((cfg->caps & rx_caps) && !o->rx_csum)
		return "ops->rx_csum is NULL with IPK_CAP_RX_CSUM_* in caps";
	return NULL;
}

int ipk_config_check(const struct ipk_config *cfg, const struct ipk_ops *ops, const char **why)
{
	const char *w = config_why(cfg);

#ifdef IPK_OPS_STATIC
	ops = &(IPK_OPS_STATIC);
#endif
	if (!w && ops)
		w = ops_why(ops, cfg);
	if (why)
		*why = w ? w : "ok";
	return w ? IPK_EINVAL : IPK_OK;
}

/* ---------------------------------------------------------------- layout */

static size_t align8(size_t n) { return (n + 7u) & ~(size_t)7u; }

/* Offsets of the tables carved after struct ipk_ctx; returns the total size. */
struct ctx_layout {
	size_t hash, listeners, udp, arp, frags, tcp6, total;
};

static void ctx_layout(const struct ipk_config *cfg, struct ctx_layout *l)
{
	size_t at = align8(sizeof(struct ipk_ctx));

	l->hash = at;
	at += align8((size_t)cfg->conn_hash_buckets * sizeof(struct ipk_conn *));
	l->listeners = at;
	at += align8((size_t)cfg->max_listeners * sizeof(struct ipk_listener));
	l->udp = at;
	at += align8((size_t)cfg->max_udp_binds * sizeof(struct ipk_udp_bind));
	l->arp = at;
	at += align8((size_t)cfg->arp_entries * sizeof(struct ipk_arp_entry));
	l->frags = at;
	at += align8((size_t)cfg->frag_slots * sizeof(struct ipk_frag));
	l->tcp6 = at;
	at += align8(ipk_tcp6_mem_size(cfg));
	l->total = at;
}

size_t ipk_ctx_size(const struct ipk_config *cfg)
{
	struct ctx_layout l;

	if (ipk_config_check(cfg, NULL, NULL) != IPK_OK)
		return 0;
	ctx_layout(cfg, &l);
	return l.total;
}

size_t ipk_conn_size(void) { return align8(sizeof(struct ipk_conn)); }
size_t ipk_pb_size(void) { return align8(sizeof(struct ipk_pb)); }

/* A start value for ctx->src_ok_be (internal.h): an address the source rule
 * passes under this configuration (the gateway, or the subnet's first or second
 * host), so the memo matches no source that would fail, 0.0.0.0 included; 0 when
 * none of them passes (a /32 without a gateway, a martian subnet). */
static uint32_t src_ok_start(const struct ipk_ctx *c)
{
	uint32_t net = c->cfg.ip4_be & c->cfg.netmask_be;
	const uint32_t cand[3] = {c->cfg.gateway_be, net | ipk_htonl(1), net | ipk_htonl(2)};
	int i;

	for (i = 0; i < 3; i++)
		if (ipk_ip4_src_check(c, cand[i], 0) < 0)
			return cand[i];
	return 0;
}

static void ctx_start_values(struct ipk_ctx *c)
{
	uint32_t span = (uint32_t)c->cfg.eph_port_hi - c->cfg.eph_port_lo + 1u;

	c->l2_len = c->cfg.link == IPK_LINK_ETH ? IPK_ETH_HLEN : 0;
	c->arp_deadline = IPK_NO_DEADLINE;
	c->frag_deadline = IPK_NO_DEADLINE;
	c->eph_next = (uint16_t)(c->cfg.eph_port_lo + IPK_OPS(c)->random(IPK_OPQ(c)) % span);
	c->conn_hash_seed = IPK_OPS(c)->random(IPK_OPQ(c));
	c->ip_id = (uint16_t)IPK_OPS(c)->random(IPK_OPQ(c));
	c->ip_frag_id = (uint16_t)IPK_OPS(c)->random(IPK_OPQ(c));
	c->icmp_tokens = IPK_ICMP_RATE_BURST;
	c->tt_cur = &c->tt_slot[IPK_TT_SLOTS]; /* never owned (tcp_out.c txf_*) */
	c->rto_min_us = ipk_tcp_ns_to_us(c->cfg.tcp_rto_min_ns);
	c->rto_max_us = ipk_tcp_ns_to_us(c->cfg.tcp_rto_max_ns);
	c->ts_rtt_max_ms = c->cfg.tcp_rto_max_ns / 1000000u;
	c->ip4_has_bcast = (uint8_t)ipk_ip4_subnet_has_bcast(&c->cfg);
	c->ip4_self_ok = c->cfg.ip4_be != 0 && !ipk_ip4_is_bcast(c, c->cfg.ip4_be);
	c->src_ok_be = src_ok_start(c);
	if (c->src_ok_be == 0)
		c->ip4_self_ok = 0; /* no start value: the receive shortcuts stay off */
}

void ipk_fast_off(struct ipk_ctx *ctx)
{
	ctx->fast_off = 1;
	ctx->ip4_self_ok = 0;
	ctx->tcp_dl_ok = 0;
}

struct ipk_ctx *ipk_ctx_init(void *mem, size_t size, const struct ipk_config *cfg,
                             const struct ipk_ops *ops)
{
	struct ctx_layout l;
	struct ipk_ctx *c;
	uint8_t *base = (uint8_t *)mem;

#ifdef IPK_OPS_STATIC
	ops = &(IPK_OPS_STATIC);
#endif
	/* ops == NULL must fail here, not be read as "config only" */
	if (!mem || ((uintptr_t)mem & 7u) != 0 || !ops ||
	    ipk_config_check(cfg, ops, NULL) != IPK_OK)
		return NULL;
	ctx_layout(cfg, &l);
	if (size < l.total)
		return NULL;
	ipk_memset(mem, 0, l.total);
	c = (struct ipk_ctx *)mem;
	c->cfg = *cfg;
	c->ops = ops;
	c->conn_hash = (struct ipk_conn **)(void *)(base + l.hash);
	c->listeners = (struct ipk_listener *)(void *)(base + l.listeners);
	c->udp_binds = (struct ipk_udp_bind *)(void *)(base + l.udp);
	c->arp = (struct ipk_arp_entry *)(void *)(base + l.arp);
	c->frags = (struct ipk_frag *)(void *)(base + l.frags);
	ctx_start_values(c);
	ipk_tcp6_init(c, base + l.tcp6);
	ipk_ip6_start(c);
	ipk_wmem_limit_set(c);
	return c;
}

/* ----------------------------------------------------------------- pools */

int ipk_add_conns(struct ipk_ctx *ctx, void *mem, uint32_t count)
{
	uint8_t *p = (uint8_t *)mem;
	uint32_t i;

	/* The count comes back as an int: above INT32_MAX it would read as an error. */
	if (!ctx || !mem || ((uintptr_t)mem & 7u) != 0 || count > 0x7fffffffu)
		return IPK_EINVAL;
	for (i = 0; i < count; i++)
		ipk_conn_put(ctx, (struct ipk_conn *)(void *)(p + (size_t)i * ipk_conn_size()));
	ctx->conn_total += count;
	return (int)count;
}

int ipk_add_pbs(struct ipk_ctx *ctx, void *mem, uint32_t count)
{
	uint8_t *p = (uint8_t *)mem;
	uint32_t i;

	if (!ctx || !mem || ((uintptr_t)mem & 7u) != 0 || count > 0x7fffffffu)
		return IPK_EINVAL;
	for (i = 0; i < count; i++)
		ipk_pb_put(ctx, (struct ipk_pb *)(void *)(p + (size_t)i * ipk_pb_size()));
	ctx->pb_total += count;
	ipk_wmem_limit_set(ctx);
	return (int)count;
}

uint32_t ipk_conns_free(const struct ipk_ctx *ctx) { return ctx ? ctx->conn_nfree : 0; }
uint32_t ipk_pbs_free(const struct ipk_ctx *ctx) { return ctx ? ctx->pb_nfree : 0; }

struct ipk_conn *ipk_conn_get(struct ipk_ctx *c)
{
	struct ipk_conn *conn = c->conn_free;

	if (!conn)
		return NULL;
	c->conn_free = conn->hash_next;
	c->conn_nfree--;
	ipk_memset(conn, 0, sizeof(*conn));
	return conn;
}

void ipk_conn_put(struct ipk_ctx *c, struct ipk_conn *conn)
{
	conn->hash_next = c->conn_free;
	c->conn_free = conn;
	c->conn_nfree++;
}

/* ------------------------------------------------------------------- run */

void ipk_link_flush(struct ipk_ctx *c)
{
	if (c->tx_queued == 0)
		return;
	c->tx_queued = 0;
	if (IPK_OPS(c)->tx_flush)
		IPK_OPS(c)->tx_flush(IPK_OPQ(c));
}

static void run_timers(struct ipk_ctx *c, uint64_t now)
{
	if (c->arp_deadline <= now) {
		/* neighbor timers of both families: IPv6's ride on ARP's (ipk_ip6_arm) */
		c->arp_deadline = ipk_arp_timer(c, now);
		if (c->ip6.deadline <= now) {
			/* what the timer's own sends arm (a Time Exceeded or an MLD report
			 * that makes a neighbour entry) lowers the deadline meanwhile:
			 * keep it, else that entry and its queue wait for another event */
			uint64_t next;

			c->ip6.deadline = IPK_NO_DEADLINE;
			next = ipk_ip6_timer(c, now);
			c->ip6.deadline = IPK_MIN(c->ip6.deadline, next);
		}
		c->arp_deadline = IPK_MIN(c->arp_deadline, c->ip6.deadline);
	}
	if (c->frag_deadline <= now)
		c->frag_deadline = ipk_ip4_frag_timer(c, now);
	if (c->tcp_deadline <= now)
		c->tcp_deadline = ipk_tcp_timer(c, now);
}

IPK_HOT uint64_t ipk_run(struct ipk_ctx *ctx, void **pkts, uint32_t n, uint64_t now)
{
	uint64_t next;
	uint32_t i;

	if (!ctx)
		return IPK_NO_DEADLINE;
	now = ipk_clock(ctx, now);
	for (i = 0; pkts && i < n; i++) {
		uint32_t len;
		void *more;

		if (!pkts[i])
			continue;
		/* Chains only from a NIC declared to coalesce (IPK_CAP_LRO); ip4.c takes
		 * them for TCP alone. */
		more = ipk_pkt_chain_next(ctx, pkts[i]);
		if (more) {
			if (!(ctx->cfg.caps & IPK_CAP_LRO)) {
				ipk_drop_pkt(ctx, pkts[i], IPK_DROP_CHAIN);
				continue;
			}
			ctx->cnt.rx_bytes += ipk_pkt_chain_len(ctx, pkts[i]) - ipk_pkt_len(ctx, pkts[i]);
		}
		len = ipk_pkt_len(ctx, pkts[i]);
		ctx->cnt.rx_frames++;
		ctx->cnt.rx_bytes += len;
		ctx->rx_more = i + 1u < n;
		/* The established segment in one function; everything else (and every
		 * drop) through the layers. */
		if (more || !ipk_tcp_rx_one(ctx, pkts[i], len))
			ipk_link_input(ctx, pkts[i]);
	}
	ctx->rx_more = 0;
	if (ctx->ack_c) /* an ACK held for the end of the batch (tcp_ack.c) */
		ipk_tcp_ack_batch_end(ctx);
	run_timers(ctx, now);
	if (ctx->pkt_spare) { /* IPK_PKT_RECYCLE: nothing kept past the call */
		ipk_pkt_free(ctx, ctx->pkt_spare);
		ctx->pkt_spare = NULL;
	}
	ipk_link_flush(ctx);
	next = IPK_MIN(ctx->arp_deadline, ctx->frag_deadline);
	return IPK_MIN(next, ctx->tcp_deadline);
}

/* -------------------------------------------------------------- counters */

const struct ipk_counters *ipk_counters(const struct ipk_ctx *ctx)
{
	return ctx ? &ctx->cnt : NULL;
}

const char *ipk_drop_name(enum ipk_drop reason)
{
	static const char *const names[IPK_DROP__COUNT] = {
		"runt", "ethertype", "not_for_us", "arp_malformed", "ip4_malformed",
		"ip4_csum", "ip4_options", "ip4_proto", "ip4_bad_src", "frag_nomem",
		"frag_overlap", "frag_timeout", "frag_too_big", "icmp_malformed", "icmp_type",
		"udp_malformed", "udp_csum", "udp_no_port", "tcp_malformed", "tcp_csum",
		"tcp_no_conn", "tcp_out_of_window", "tcp_bad_ack", "tcp_bad_flags",
		"tcp_ooo_full", "tcp_backlog", "tcp_refused", "no_conn_mem", "no_pb",
		"arp_queue_full", "arp_timeout", "no_pkt", "chain", "no_route",
		"tcp_paws", "tcp_rmem", "tcp_no_ts", "ip4_land", "ip4_src_no_route", "arp_bad_sender",
		"frag_evicted", "arp_evicted",
		"ip6_malformed", "ip6_not_for_us", "ip6_bad_src", "ip6_ext", "ip6_proto",
		"ip6_frag", "icmp6_malformed", "icmp6_type", "nd_invalid", "nd_queue_full",
		"nd_timeout", "tcp6_pairs", "ip6_v4mapped", "mld_invalid",
	};
	unsigned r = (unsigned)reason;

	if (r >= (unsigned)IPK_DROP__COUNT || !names[r])
		return "unknown";
	return names[r];
}

/* The IPK_E* codes are negative Linux errno values (core.h); io and runtime return
 * other -errno values in the same space, the common ones named here too so that one
 * function prints any ipkit error. A switch, not a table: the numbers are sparse. */
const char *ipk_strerror(int err)
{
	if (err >= 0)
		return "ok";
	switch (err) {
	case IPK_ENOENT: return "nothing bound or listening there (ENOENT)";
	case IPK_EAGAIN: return "no room now, retry after an event (EAGAIN)";
	case IPK_ENOMEM: return "pool empty: no connection or descriptor free (ENOMEM)";
	case IPK_EINVAL: return "invalid argument (EINVAL)";
	case IPK_ECLOSED: return "connection closed (EPIPE)";
	case IPK_EMSGSIZE: return "message too long for the path (EMSGSIZE)";
	case IPK_EADDRINUSE: return "address or port in use (EADDRINUSE)";
	case IPK_ENOBUFS: return "no packet buffer (ENOBUFS)";
	case IPK_ENOTCONN: return "connection not in a state that allows this (ENOTCONN)";
	case IPK_EHOSTUNREACH: return "host unreachable: no route or no ARP answer (EHOSTUNREACH)";
	case -1: return "operation not permitted (EPERM)";
	case -4: return "interrupted (EINTR)";
	case -5: return "I/O error (EIO)";
	case -6: return "no such device or address (ENXIO)";
	case -13: return "permission denied (EACCES)";
	case -16: return "device busy (EBUSY)";
	case -17: return "already exists (EEXIST)";
	case -19: return "no such device (ENODEV)";
	case -95: return "not supported (EOPNOTSUPP)";
	case -100: return "network is down (ENETDOWN)";
	case -110: return "timed out (ETIMEDOUT)";
	case -114: return "already in progress (EALREADY)";
	default: return "unknown error";
	}
}

/* ---------------------------------------------------------- packet helpers */

void ipk_pkt_free_chain(struct ipk_ctx *c, void *p)
{
	/* Bounded by the chain's length: each step frees one descriptor. */
	while (p) {
		void *next = ipk_pkt_chain_cut(c, p);
		ipk_pkt_free(c, p);
		p = next;
	}
}

uint32_t ipk_pkt_chain_len(struct ipk_ctx *c, void *p)
{
	uint32_t n = 0;

	for (; p; p = ipk_pkt_chain_next(c, p))
		n += ipk_pkt_len(c, p);
	return n;
}

uint32_t ipk_pkt_copy(struct ipk_ctx *ctx, void *pkt, uint32_t off, void *dst, uint32_t len)
{
	uint8_t *out = (uint8_t *)dst;
	uint32_t done = 0;

	if (!ctx || !dst)
		return 0;
	for (; pkt && done < len; pkt = ipk_pkt_chain_next(ctx, pkt)) {
		uint32_t plen = ipk_pkt_len(ctx, pkt), n;

		if (off >= plen) {
			off -= plen;
			continue;
		}
		n = IPK_MIN(plen - off, len - done);
		ipk_memcpy(out + done, ipk_pkt_data(ctx, pkt) + off, n);
		done += n;
		off = 0;
	}
	return done;
}

uint32_t ipk_csum_chain(struct ipk_ctx *c, void *p, uint32_t off, uint32_t len, uint32_t sum,
                        int *odd)
{
	for (; p && len > 0; p = ipk_pkt_chain_next(c, p)) {
		uint32_t plen = ipk_pkt_len(c, p), n;

		if (off >= plen) {
			off -= plen;
			continue;
		}
		n = IPK_MIN(plen - off, len);
		sum = ipk_csum_add(sum, ipk_pkt_data(c, p) + off, n, odd);
		len -= n;
		off = 0;
	}
	return sum;
}

void ipk_drop_pkt(struct ipk_ctx *c, void *pkt, enum ipk_drop why)
{
	ipk_drop(c, why);
	ipk_pkt_free_chain(c, pkt);
}
