/*
 * The TCP connection object and the calls the tcp_*.c files make to each other.
 *
 * Files:  tcp.c           API, lookup hash, listeners, open/close/free, ISN, ports
 *         tcp_in.c        segment arrival (RFC 9293 §3.10.7), the established fast path
 *         tcp_out.c       segment construction and the send decision (§3.8.6, §3.10.4),
 *                         ACKs and RSTs, the transmit template
 *         tcp_timer.c     RTO (RFC 6298), SYN retries, persist, delayed ACK, TIME_WAIT,
 *                         timer list
 *         tcp_ack.c       when to ACK: quick-ACK, every Nth segment, end-of-batch ACKs
 *         tcp_cc.c        congestion control interface and NewReno (RFC 5681 / 6582)
 *         tcp_cubic.c     integer CUBIC (RFC 9438)
 *         tcp_prr.c       proportional rate reduction in fast recovery (RFC 6937)
 *         tcp_sack.c      receiver-side SACK and D-SACK blocks (RFC 2018 §4, RFC 2883)
 *         tcp_sb.c        sender scoreboard and SACK loss recovery (RFC 6675)
 *         tcp_rack.c      RACK-TLP loss detection and tail loss probes (RFC 8985)
 *         tcp_ts.c        timestamps, RTT samples and PAWS (RFC 7323)
 *         tcp_ecn.c       ECN negotiation and reaction (RFC 3168 §6.1)
 *         tcp_keepalive.c keep-alive probes (RFC 1122 §4.2.3.6)
 *         tcp_defence.c   challenge ACKs (RFC 5961) and the ACK-loop limit
 *         tcp_syncookie.c SYN cookies (RFC 4987 §3.6)
 *         tcp_tw.c        bounded TIME_WAIT and 4-tuple reuse (RFC 6191)
 *
 * stack.c includes this header for sizeof(struct ipk_conn) and links free
 * connections through hash_next (a free connection is in no hash chain).
 *
 * Sequence space: [iss] is our SYN; data bytes start at iss + 1. The send queue holds
 * every data byte from snd_una on (acknowledged bytes are released at once), so the
 * byte with sequence s lives at offset s - sq_seq of the queue. A queued FIN takes the
 * sequence number right after the last data byte.
 */
#ifndef IPKIT_CORE_TCP_H
#define IPKIT_CORE_TCP_H

#include "internal.h"

/* RFC 9293 §3.7.1: send MSS when the peer sent no MSS option. */
#define IPK_TCP_DEFAULT_MSS 536
/* Smallest peer MSS we accept: a tiny value would make us emit a segment per byte. */
#define IPK_TCP_MIN_MSS 64
/* Floor for an MSS lowered by ICMP fragmentation-needed (RFC 1191 §3 allows ignoring
 * implausibly small MTUs; 576 - 40 keeps a forged ICMP from crippling a connection). */
#define IPK_TCP_PMTU_MIN_MSS 536
/* RFC 7323 §2.3: the largest window-scale shift. */
#define IPK_TCP_MAX_WSCALE 14
/* RFC 6298 (2.4) clock granularity G. */
#define IPK_TCP_G_NS 1000000ull
/* Back-off before retrying output that failed for lack of packets or pbs: doubled for
 * each failure in a row (c->nretry) up to IPK_TCP_RETRY_NS << IPK_TCP_RETRY_MAX_SHIFT
 * (256 ms, about Linux's TCP_RESOURCE_PROBE_INTERVAL of 500 ms), so a pool that stays
 * dry costs each blocked connection a handful of tries a second, not a thousand. */
#define IPK_TCP_RETRY_NS 1000000ull
#define IPK_TCP_RETRY_MAX_SHIFT 8u
/* Segments one tcp_output call may emit (bounds the work of a single event). */
#define IPK_TCP_OUTPUT_BURST 64

/* c->fl bits */
#define IPK_TCPF_ACTIVE 0x0001u     /* we sent the first SYN (connect) */
#define IPK_TCPF_ANNOUNCED 0x0002u  /* tcp_accepted / tcp_connected was called */
#define IPK_TCPF_REPORTED 0x0004u   /* tcp_closed was called: handle is dead */
#define IPK_TCPF_BACKLOG 0x0008u    /* counted in a listener's pending */
#define IPK_TCPF_FIN_QUEUED 0x0010u /* application closed: FIN follows the data */
#define IPK_TCPF_ACK_NOW 0x0020u    /* an ACK must go out before the event ends */
#define IPK_TCPF_ACK_LATER 0x0040u  /* an ACK is owed (delayed-ACK timer) */
#define IPK_TCPF_WS_OK 0x0080u      /* both SYNs carried window scale */
#define IPK_TCPF_NAGLE 0x0100u      /* RFC 896 on */
#define IPK_TCPF_RTT_ON 0x0200u     /* a segment is being timed */
#define IPK_TCPF_RECOVERY 0x0400u   /* NewReno fast recovery */
#define IPK_TCPF_ZOMBIE 0x0800u     /* freed while busy: release when busy drops */
#define IPK_TCPF_PEER_WS 0x1000u    /* peer's SYN carried window scale */
#define IPK_TCPF_FIN_RCVD 0x2000u   /* peer's FIN consumed (rcv_nxt counts it) */
#define IPK_TCPF_LINKED 0x4000u     /* in ctx->conn_hash */
#define IPK_TCPF_ON_TIMERS 0x8000u  /* in ctx->timer_head list */
#define IPK_TCPF_KEEPALIVE 0x10000u /* RFC 1122 §4.2.3.6 keep-alives on */
#define IPK_TCPF_ECN 0x20000u       /* RFC 3168 negotiated on this connection */
#define IPK_TCPF_ECE_OUT 0x40000u   /* receiver: echo ECE until the peer sends CWR */
#define IPK_TCPF_CWR_OUT 0x80000u   /* sender: set CWR on the next new data segment */
#define IPK_TCPF_CC_EPOCH 0x100000u /* CUBIC: a congestion-avoidance epoch is running */
#define IPK_TCPF_TS_OK 0x200000u    /* RFC 7323 timestamps negotiated */
#define IPK_TCPF_SACK_OK 0x400000u  /* RFC 2018 SACK negotiated */
#define IPK_TCPF_SACK_RCVY 0x800000u /* RFC 6675 loss recovery (cwnd held at ssthresh) */
#define IPK_TCPF_TLP_OUT 0x1000000u /* RFC 8985 §7: a tail loss probe is unanswered */
#define IPK_TCPF_ECN_WND 0x2000000u /* an ECN reduction happened: ecn_high is valid */
#define IPK_TCPF_RTX_LOST 0x4000000u /* send-queue pbs wait as IPK_TCP_XMIT_LOST */
#define IPK_TCPF_TS_NO_RTT 0x8000000u /* SYN cookie: our SYN-ACK's TSval held options */
#define IPK_TCPF_DSACK_RND 0x10000000u /* RFC 8985 RACK.dsack_round is set (scoreboard) */
#define IPK_TCPF_TW_LINKED 0x20000000u /* on the ctx TIME_WAIT list (tcp_tw.c) */
/* The fast paths' per-connection conditions hold (ipk_tcp_fast_ok): header
 * prediction and txf_len test this one bit in place of the state, the extension
 * record, duplicate ACKs and the recovery flags. Set only after the full test
 * (tcp_in.c, end of a segment's event), cleared wherever one of the conditions can
 * stop holding (ipk_tcp_fast_clear); when clear, the fast paths make the full test,
 * so a bit left clear only costs time. */
#define IPK_TCPF_FAST 0x40000000u
#define IPK_TCPF_REORDER 0x80000000u /* RFC 8985 RACK.reordering_seen: the path reorders */

/* pb->aux flag for send-queue and out-of-order pbs */
/* Send queue: what the pb is charged beyond its bytes (tcp.c sq_overhead), taken
 * from c->sndbuf while it is queued. */
#define IPK_TCP_PB_OV(pb) ((pb)->pad_)
#define IPK_TCP_PB_COPY 0x1u /* send queue: packet filled by ipk_tcp_write (may grow) */
#define IPK_TCP_PB_FIN 0x2u  /* out-of-order queue: segment carried FIN */
#define IPK_TCP_PB_RECENT 0x4u /* out-of-order queue: the segment that arrived last */
#define IPK_TCP_PB_CLONED 0x8u /* send queue: a clone of the packet was sent (sq_attach) */

/* pb->xmit of a send-queue pb: 0 not sent, 1 sent once, 2 sent twice, or: */
#define IPK_TCP_XMIT_LOST 3u /* RFC 8985 §6.2: its retransmission was lost, send again */
#define IPK_TCP_XMIT_AGAIN 4u /* sent three times or more (tcp_rack.c rtx_too_soon) */

/* c->rtx_kind: what the one loss timer (rtx_at) does when it fires */
#define IPK_TCP_RTX_RTO 0u /* RFC 6298 retransmission timeout */
#define IPK_TCP_RTX_REO 1u /* RFC 8985 §6.3 RACK reordering timer */
#define IPK_TCP_RTX_TLP 2u /* RFC 8985 §7 probe timeout */
/* RFC 9293 §3.8.6.1 zero-window probe. Persist shares rtx_at with the loss timers:
 * it is armed only while none of them is (tcp_out.c: nothing unacknowledged is in
 * flight), and arming a loss timer replaces it, so the two never run together. */
#define IPK_TCP_RTX_PERSIST 3u
/*
 * The loss timer kept lazily (tcp_rack.c): a ping-pong stops it with every ACK that
 * acknowledges everything (RFC 6298 (5.2)) and starts it with every segment (5.1).
 * Rather than take rtx_at off and compute a new one each time, the deadline is left
 * in place and the kind records what it means; it may only be early, never late:
 * IDLE      stopped: rtx_at (if set) is a left-over deadline that does nothing when
 *           it is reached.
 * LAZY_RTO  running since rtt_t (the send that restarted it), as the RTO or PTO
 * LAZY_TLP  arm_loss_timer would have chosen then (tlp_allowed: LAZY_TLP); rtx_at is
 *           an earlier deadline, at which ipk_tcp_loss_settle computes the real
 *           one and re-arms for the rest, or fires.
 */
#define IPK_TCP_RTX_IDLE 4u
#define IPK_TCP_RTX_LAZY_RTO 5u
#define IPK_TCP_RTX_LAZY_TLP 6u

/* RFC 7323 §3.2: NOP,NOP,TS takes 12 bytes of every segment once negotiated. */
#define IPK_TCP_TS_LEN 12u
/* SACKed ranges the sender keeps per connection (tcp_sb.c): enough for every
 * whole-segment pattern the send buffer allows (sndbuf / MSS / 2 disjoint ranges),
 * at least IPK_TCP_SB_MIN and at most IPK_TCP_SB_MAX (which bounds the per-ACK work).
 * Blocks beyond it are not stored (treated as not SACKed). */
#define IPK_TCP_SB_MIN 16u
#define IPK_TCP_SB_MAX 4096u

/* Per-algorithm congestion-control state; one member per algorithm that needs any. */
union ipk_cc_state {
	struct {
		uint32_t w_max;     /* RFC 9438 W_max, bytes (0: take cwnd at epoch start) */
		uint32_t k_ms;      /* RFC 9438 K, milliseconds */
		uint32_t epoch_ms;  /* start of the congestion-avoidance epoch (ms, wraps) */
		uint32_t w_est;     /* RFC 9438 §4.3 Reno-friendly estimate, bytes */
	} cubic;
};

/* A stale-handle guard: set while the object is a live connection. */
#define IPK_TCP_MAGIC 0x706bu

struct ipk_conn {
	/* chain in ctx->conn_hash; while the object is free, stack.c's free list */
	struct ipk_conn *hash_next;
	/* ctx->timer_head list (IPK_TCPF_ON_TIMERS), or in TIME_WAIT the ctx TIME_WAIT
	 * list (IPK_TCPF_TW_LINKED): never both */
	struct ipk_conn *timer_next, *timer_prev;
	uint32_t fl;                /* IPK_TCPF_* */
	struct ipk_tuple t;
	uint16_t magic;             /* IPK_TCP_MAGIC while a live connection */
	uint8_t dupacks;            /* saturates at 0xff (only 3 matters, RFC 6582) */
	uint8_t nretry;             /* output retries in a row that found no packet */
	uint8_t state;              /* enum ipk_tcp_state */
	uint8_t snd_wscale;         /* shift applied to the peer's window field */
	uint8_t rcv_wscale;         /* shift the peer applies to ours */
	uint8_t busy;               /* nesting of core code running on this conn */
	uint8_t reo_mult;           /* RFC 8985 §6.2 step 4 RACK.reo_wnd_mult (1..16) */
	uint8_t reo_persist;        /* RACK.reo_wnd_persist: recoveries left before reset */
	uint8_t npersist;           /* persist back-off exponent */
	uint8_t nkeepalive;         /* keep-alive probes unanswered */
	/* send sequence variables, RFC 9293 §3.3.1 */
	uint32_t iss;
	void *user;
	uint32_t snd_una, snd_nxt;
	uint32_t snd_max;           /* highest sequence sent + 1 (acceptable ACK bound) */
	uint32_t snd_wnd;           /* peer's window in bytes (scaled) */
	uint32_t max_sndwnd;        /* largest window the peer offered (SWS §3.8.6.2.1) */
	uint32_t snd_wl1;           /* SND.WL1 (SND.WL2 is implied: ipk_tcp_wnd_newer) */
	uint32_t mss;               /* send MSS */
	uint32_t sndbuf;            /* the send buffer (cfg.tcp_sndbuf, grown by autotuning:
	                             * tcp_mem.c ipk_tcp_sndbuf_expand) less the truesize
	                             * charge of queued zero-copy packets (tcp.c
	                             * sq_overhead), each given back as its pb is freed */

	/* receive sequence variables */
	uint32_t rcv_nxt;           /* IRS + 1 until SYN-RECEIVED ends */
	uint32_t rcv_adv;           /* right edge of the window we advertised */
	uint32_t rcv_unread;        /* delivered, not yet ipk_tcp_recved */
	uint16_t segs_unacked;      /* in-order segments since our last ACK */
	uint16_t ooo_n;

	/* send queue of pbs (see internal.h): data from snd_una on; the out-of-order
	 * queue hangs off the extension record (ipk_tcp_ooo) */
	struct ipk_pb *sq_head, *sq_tail;
	uint32_t sq_seq;            /* sequence of the first queued data byte */
	uint32_t sq_bytes;

	/* timers: µs ticks (see "Connection time" below), 0 = off */
	uint32_t rtx_at;            /* rtx_kind's timer; in TIME_WAIT the end of TIME_WAIT */
	uint32_t delack_at;
	uint32_t retry_at;          /* output blocked on packets/pbs */

	/* RFC 6298, in µs (G is 1 ms, so nothing is lost); srtt_us == 0 until the
	 * first sample. Read them in ns with ipk_tcp_srtt_ns() and ipk_tcp_rto_ns(). */
	uint32_t srtt_us, rttvar_us, rto_us;
	uint32_t rtt_t;             /* µs tick when the timed segment was sent */
	uint32_t rtt_seq;           /* its ACK must cover this sequence */
	uint8_t nrtx;               /* RTOs in a row */
	uint8_t cc_algo;            /* IPK_CC_* */
	uint8_t quickack;           /* segments still ACKed at once (tcp_ack.c) */
	uint8_t rtx_kind;           /* IPK_TCP_RTX_*: meaning of rtx_at */

	/* congestion control (tcp_cc.c) */
	uint32_t cwnd, ssthresh;
	uint32_t recover;           /* RFC 6582 */
	uint32_t bytes_acked;       /* RFC 3465 counter; CUBIC's W_est counter */
	union ipk_cc_state cc;      /* per-algorithm state */

	uint32_t retransmits;
	/* RFC 8985 §6.2 min_RTT as a windowed minimum (tcp_rack.c): the smallest RTT of
	 * the current period of IPK_TCP_MINRTT_PERIOD_MS and of the one before, in us
	 * (0 = no sample), so a path whose RTT rises stops using the old minimum. */
	uint32_t min_rtt_cur_us, min_rtt_prev_us;
	uint32_t min_rtt_epoch_ms;  /* start of the current period, our ms clock */
	uint32_t keepalive_at;      /* next keep-alive probe, ms tick, 0 = off */

	/* defences (tcp_defence.c, tcp_tw.c) */
	uint32_t oow_until;         /* ms tick: no ACK to an unacceptable segment before it
	                             * (0 = none: ipk_tcp_ms_at never returns 0) */
	uint32_t ecn_high;          /* RFC 3168 §6.1.2: no new ECE reduction before this is acked */

	/* RFC 7323 §4.3 */
	uint32_t ts_recent;         /* TS.Recent */
	uint32_t ts_recent_ms;      /* our ms clock when TS.Recent was set (PAWS §5.5) */
	/* The extension record (below): state an idle or in-order connection does not
	 * need, drawn from the pb pool when first needed and returned when empty; NULL
	 * on an idle connection. One pointer in place of three (scoreboard, recovery
	 * episode, out-of-order queue) keeps the object at 248 B on LP64. */
	struct ipk_pb *x;
};

/*
 * The extension record c->x is a pb descriptor (tcp_sb.c draws and returns it):
 *   x->next  the out-of-order queue: received pbs sorted by seq, non-overlapping
 *   x->pkt   the scoreboard record (struct ipk_pb *), or NULL
 *   the rest the recovery-episode counters (IPK_RCVY_*), valid with IPK_RCVY_F_ON
 * It is returned as soon as all three are empty, so a connection that loses nothing
 * and receives in order never holds it. When the pool is empty no record can be
 * drawn: the scoreboard is not kept (recovery runs as NewReno without SACK state),
 * an episode runs without PRR (cwnd = ssthresh), and an out-of-order segment is
 * dropped (counted as a pb-pool miss) for the peer to resend; all as when the
 * scoreboard, episode or segment pb itself cannot be drawn.
 */
IPK_INLINE struct ipk_pb *ipk_tcp_ooo(const struct ipk_conn *c)
{
	return c->x ? c->x->next : NULL;
}
IPK_INLINE struct ipk_pb *ipk_tcp_sb(const struct ipk_conn *c)
{
	return c->x ? (struct ipk_pb *)c->x->pkt : NULL;
}
/* The extension record, drawn when the connection has none; NULL when the pool is
 * empty (counted by the pool). */
struct ipk_pb *ipk_tcp_x_get(struct ipk_ctx *ctx, struct ipk_conn *c);
/* The scoreboard record, drawn when there is none; NULL when the pool is empty. */
struct ipk_pb *ipk_tcp_sb_get(struct ipk_ctx *ctx, struct ipk_conn *c);
/* Return the extension record when it holds nothing. */
void ipk_tcp_x_trim(struct ipk_ctx *ctx, struct ipk_conn *c);
/* Packets the out-of-order queue holds (tcp_mem.c), kept in the extension record;
 * each queued pb keeps its own packet count in pb->xmit. */
#define IPK_X_RMEM(x) ((x)->pad_)

/* Receive memory (tcp_mem.c). ipk_tcp_rmem_admit makes room for `pkt` to be queued
 * out of order at `seq` (collapse, prune, reclaim); 0 = no room, the caller drops
 * the segment (counted here). Charge and uncharge follow each queued pb. */
int ipk_tcp_rmem_admit(struct ipk_ctx *ctx, struct ipk_conn *c, void *pkt, uint32_t seq);
void ipk_tcp_rmem_charge(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_pb *pb);
void ipk_tcp_rmem_uncharge(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_pb *pb);
/* Forget the whole queue's charge (the queue is being freed). */
void ipk_tcp_rmem_clear(struct ipk_ctx *ctx, struct ipk_conn *c);
/* Send-buffer autotuning (tcp_mem.c): grow c's send buffer toward 2 * cwnd. */
void ipk_tcp_sndbuf_expand(struct ipk_ctx *ctx, struct ipk_conn *c);

/*
 * The scoreboard record ipk_tcp_sb(c) is a pb descriptor whose fields hold the flight's
 * recovery state (named below); its `next` chain holds the SACKed ranges as
 * (pb->seq, pb->len), sorted and disjoint, at most ipk_tcp_sb_cap() of them.
 */
#define IPK_SB_HIGH_RXT(r) ((r)->seq) /* RFC 6675 HighRxt: holes below it were resent */
#define IPK_SB_LOST_END(r) ((r)->off) /* unSACKed bytes below it are lost */
#define IPK_SB_RACK_END(r) ((r)->len) /* RFC 8985 RACK.end_seq */
#define IPK_SB_RACK_RTT(r) ((r)->aux) /* RACK.rtt, us (0 = nothing delivered yet) */
#define IPK_SB_RACK_TS(r) ((r)->t)    /* RACK.xmit_ts, ns */
#define IPK_SB_DSACK_RND(r) ((r)->xmit) /* RACK.dsack_round, with IPK_TCPF_DSACK_RND */
#define IPK_SB_NRANGES(r) ((r)->pad_) /* ranges on the chain */
/* (r)->pkt: the undo record (tcp_undo.c), or NULL */

/* The recovery-episode counters, in the extension record (ipk_tcp_rcvy): RFC 6937's
 * counters, in bytes. */
#define IPK_RCVY_DELIVERED(r) ((r)->seq) /* prr_delivered */
#define IPK_RCVY_OUT(r) ((r)->off)       /* prr_out */
#define IPK_RCVY_FS(r) ((r)->len)        /* RecoverFS */
#define IPK_RCVY_FLAGS(r) ((r)->aux)     /* IPK_RCVY_F_* */
#define IPK_RCVY_RENO_SACKED(r) ((r)->xmit) /* NewReno: bytes duplicate ACKs stand for */
#define IPK_RCVY_F_RESCUED 0x1u          /* RFC 6675 §4 NextSeg (4): rescue sent */
#define IPK_RCVY_F_ON 0x2u               /* an episode is running: the counters hold */

/* The recovery-episode record (the extension record), NULL when no episode runs. */
IPK_INLINE struct ipk_pb *ipk_tcp_rcvy(const struct ipk_conn *c)
{
	return c->x && (IPK_RCVY_FLAGS(c->x) & IPK_RCVY_F_ON) ? c->x : NULL;
}

/* Flags no fast-path connection has: closing or closed, ECN (its marks go the full
 * way), loss recovery of any kind. */
#define IPK_TCPF_FAST_NOT (IPK_TCPF_ZOMBIE | IPK_TCPF_FIN_QUEUED | IPK_TCPF_ECN | \
                           IPK_TCPF_RECOVERY | IPK_TCPF_SACK_RCVY | IPK_TCPF_RTX_LOST)

/* The per-connection conditions of both fast paths (tcp_in.c predicted, tcp_out.c
 * txf_len), what IPK_TCPF_FAST stands for: ESTABLISHED, none of IPK_TCPF_FAST_NOT, no
 * extension record (nothing out of order, no scoreboard, no recovery episode), no
 * duplicate ACKs counted. */
IPK_INLINE int ipk_tcp_fast_ok(const struct ipk_conn *c)
{
	return c->state == IPK_TCP_ESTABLISHED && !(c->fl & IPK_TCPF_FAST_NOT) && !c->x &&
	       c->dupacks == 0;
}
/* One of ipk_tcp_fast_ok's conditions may stop holding: the fast paths test them all
 * until the end of the next segment's event sets the bit again. */
IPK_INLINE void ipk_tcp_fast_clear(struct ipk_conn *c) { c->fl &= ~IPK_TCPF_FAST; }

/*
 * Connection time. The engine's clock is ctx->now in ns (64-bit); a connection keeps
 * its deadlines and RTT times as 32-bit ticks of that clock, (now / unit) mod 2^32,
 * in µs (RTO, RACK, TLP, persist, delayed ACK, retry: sub-ms paths need µs) or in ms
 * (keep-alive, TIME_WAIT, ACK rate limit: minutes to hours). A tick is read as the
 * one within 2^31 ticks of now, so a deadline may lie at most IPK_TCP_TICK_MAX ticks
 * ahead: 35.8 minutes in µs, 24.8 days in ms; a longer interval is cut to that (its
 * timer fires early, at the cut). Deadlines round up to the next tick, so a timer
 * never fires before its time and at most one tick after it. A due deadline must be
 * served within 2^31 ticks, which the deadline ipk_run returns ensures; the tick
 * that wraps to 0 becomes 1 (0 means "off"), one tick late.
 */
#define IPK_TCP_NS_PER_US 1000ull
#define IPK_TCP_NS_PER_MS 1000000ull
#define IPK_TCP_TICK_MAX 0x7fffffffull

IPK_INLINE uint32_t ipk_tcp_tick(uint64_t now, uint64_t unit) { return (uint32_t)(now / unit); }

/* The tick of the time `after` ns from now, rounded up, never 0. */
IPK_INLINE uint32_t ipk_tcp_tick_at(uint64_t now, uint64_t after, uint64_t unit)
{
	uint32_t t;

	if (after > IPK_TCP_TICK_MAX * unit)
		after = IPK_TCP_TICK_MAX * unit;
	t = (uint32_t)((now + after + unit - 1u) / unit);
	return t ? t : 1u;
}

/* The time in ns of tick t (0 for 0 = off; at least 1 otherwise). */
IPK_INLINE uint64_t ipk_tcp_tick_ns(uint64_t now, uint32_t t, uint64_t unit)
{
	int32_t d = (int32_t)(t - ipk_tcp_tick(now, unit));
	uint64_t base = now - now % unit;

	if (t == 0)
		return 0;
	if (d >= 0)
		return base + (uint64_t)d * unit;
	if ((uint64_t)-(int64_t)d * unit >= base)
		return 1;
	return base - (uint64_t)-(int64_t)d * unit;
}

IPK_INLINE uint32_t ipk_tcp_us_at(const struct ipk_ctx *ctx, uint64_t after_ns)
{
	return ipk_tcp_tick_at(ctx->now, after_ns, IPK_TCP_NS_PER_US);
}
IPK_INLINE uint64_t ipk_tcp_us_ns(const struct ipk_ctx *ctx, uint32_t t)
{
	return ipk_tcp_tick_ns(ctx->now, t, IPK_TCP_NS_PER_US);
}
IPK_INLINE uint32_t ipk_tcp_ms_at(const struct ipk_ctx *ctx, uint64_t after_ns)
{
	return ipk_tcp_tick_at(ctx->now, after_ns, IPK_TCP_NS_PER_MS);
}
IPK_INLINE uint64_t ipk_tcp_ms_ns(const struct ipk_ctx *ctx, uint32_t t)
{
	return ipk_tcp_tick_ns(ctx->now, t, IPK_TCP_NS_PER_MS);
}
IPK_INLINE uint32_t ipk_tcp_now_ms(const struct ipk_ctx *ctx)
{
	return ipk_tcp_tick(ctx->now, IPK_TCP_NS_PER_MS);
}
/* Is the µs deadline t set and reached? */
IPK_INLINE int ipk_tcp_us_due(const struct ipk_ctx *ctx, uint32_t t)
{
	return t && ipk_tcp_us_ns(ctx, t) <= ctx->now;
}
IPK_INLINE uint64_t ipk_tcp_srtt_ns(const struct ipk_conn *c)
{
	return (uint64_t)c->srtt_us * IPK_TCP_NS_PER_US;
}
/* µs ticks since the timed segment was sent. */
IPK_INLINE uint32_t ipk_tcp_rtt_elapsed_us(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	return ipk_tcp_tick(ctx->now, IPK_TCP_NS_PER_US) - c->rtt_t;
}
IPK_INLINE uint64_t ipk_tcp_rto_ns(const struct ipk_conn *c)
{
	return (uint64_t)c->rto_us * IPK_TCP_NS_PER_US;
}
/* ns -> µs rounded up, at most IPK_TCP_TICK_MAX (an RTO bound stays a bound). */
IPK_INLINE uint32_t ipk_tcp_ns_to_us(uint64_t ns)
{
	uint64_t us = (ns + IPK_TCP_NS_PER_US - 1u) / IPK_TCP_NS_PER_US;

	return (uint32_t)(us > IPK_TCP_TICK_MAX ? IPK_TCP_TICK_MAX : us);
}

IPK_INLINE int ipk_seq_lt(uint32_t a, uint32_t b) { return (int32_t)(a - b) < 0; }

/*
 * RFC 9293 §3.10.7.4 fifth: the send window is updated when SND.WL1 < SEG.SEQ, or
 * SND.WL1 = SEG.SEQ and SND.WL2 =< SEG.ACK. SND.WL2 is not kept: it is always an
 * ACK already taken (SND.UNA moves up to it), so SND.WL2 =< SND.UNA, and an ACK
 * below SND.UNA is ignored before this test, so SND.WL2 =< SEG.ACK always holds.
 */
IPK_INLINE int ipk_tcp_wnd_newer(const struct ipk_conn *c, uint32_t seq)
{
	return !ipk_seq_lt(seq, c->snd_wl1);
}

/* rtx_at holds either a loss timer (RTO, RACK, TLP, possibly lazy) or the persist
 * timer, or a stopped loss timer's left-over deadline (IDLE). */
IPK_INLINE int ipk_tcp_loss_armed(const struct ipk_conn *c)
{
	return c->rtx_at && c->rtx_kind != IPK_TCP_RTX_PERSIST && c->rtx_kind != IPK_TCP_RTX_IDLE;
}
IPK_INLINE int ipk_tcp_persist_armed(const struct ipk_conn *c)
{
	return c->rtx_at && c->rtx_kind == IPK_TCP_RTX_PERSIST;
}
/* Stop the loss timer; a persist timer keeps running. Its deadline stays as an
 * IDLE one: the next send may restart the timer without moving it (tcp_out.c), and
 * when reached it only goes off the list. */
IPK_INLINE void ipk_tcp_loss_stop(struct ipk_conn *c)
{
	if (c->rtx_kind != IPK_TCP_RTX_PERSIST)
		c->rtx_kind = IPK_TCP_RTX_IDLE;
}
/* Is rtx_at free for the persist timer (neither a loss timer nor persist runs)? */
IPK_INLINE int ipk_tcp_rtx_free(const struct ipk_conn *c)
{
	return c->rtx_at == 0 || c->rtx_kind == IPK_TCP_RTX_IDLE;
}
/* Stop the persist timer; a loss timer keeps running. */
IPK_INLINE void ipk_tcp_persist_stop(struct ipk_conn *c)
{
	if (c->rtx_kind != IPK_TCP_RTX_PERSIST)
		return;
	c->rtx_at = 0;
	c->rtx_kind = IPK_TCP_RTX_RTO;
}
IPK_INLINE int ipk_seq_le(uint32_t a, uint32_t b) { return (int32_t)(a - b) <= 0; }
IPK_INLINE int ipk_seq_gt(uint32_t a, uint32_t b) { return (int32_t)(a - b) > 0; }
IPK_INLINE int ipk_seq_ge(uint32_t a, uint32_t b) { return (int32_t)(a - b) >= 0; }

/* A parsed arriving segment; the packet stays the caller's. */
struct ipk_tcp_seg {
	struct ipk_tcp_hdr h;
	struct ipk_tcp_opts o;
	void *pkt;
	uint32_t poff;   /* payload offset in pkt */
	uint32_t len;    /* payload bytes */
	uint32_t src_be, dst_be;
	uint8_t tos;     /* IPv4 TOS byte: RFC 3168 ECN field in the low two bits */
	uint8_t ts_only; /* options exactly NOP,NOP,TS (ipk_tcp_parse_ts took them) */
};

/* Sequence space a segment occupies (RFC 9293 §3.4: SYN and FIN count). */
IPK_INLINE uint32_t ipk_tcp_seg_len(const struct ipk_tcp_seg *s)
{
	return s->len + ((s->h.flags & IPK_TCP_SYN) ? 1u : 0u) + ((s->h.flags & IPK_TCP_FIN) ? 1u : 0u);
}

IPK_INLINE int ipk_tcp_synced(const struct ipk_conn *c)
{
	return c->state >= IPK_TCP_ESTABLISHED;
}

/* The MSS we advertise: the MTU less the IPv4 and TCP headers (RFC 9293 §3.7.1). */
IPK_INLINE uint32_t ipk_tcp_rcv_mss(const struct ipk_ctx *ctx) { return (uint32_t)ctx->cfg.mtu - 40u; }

/* ---- tcp6.c: TCP over IPv6 (internal.h IPK_TCP6_MARK) */
/* Is t (a connection's or a segment's) an IPv6 one? */
IPK_INLINE int ipk_tcp_is6(const struct ipk_tuple *t) { return t->peer_ip4_be == IPK_TCP6_MARK; }
/* A new connection's tuple takes its pair: the scratch pair is made a real one
 * (t->local_ip4_be rewritten). IPK_ENOMEM (counted) when the table is full. */
int ipk_tcp6_hold(struct ipk_ctx *ctx, struct ipk_tuple *t);
/* A connection gives its pair back (freed with its last holder). */
void ipk_tcp6_put(struct ipk_ctx *ctx, uint32_t pair);
/* ipk_tcp6_put for a pair held by more than the caller: the count goes down inline. */
IPK_INLINE void ipk_tcp6_put_fast(struct ipk_ctx *ctx, uint32_t i)
{
	if (i < ctx->tcp6_n && ctx->tcp6_pairs[i].refs > 1)
		ctx->tcp6_pairs[i].refs--;
	else
		ipk_tcp6_put(ctx, i);
}
/* Pair i (the scratch one included), NULL when there is none. */
IPK_INLINE const struct ipk_tcp6_pair *ipk_tcp6_pair(const struct ipk_ctx *ctx, uint32_t i)
{
	/* inline: txf_send6 asks for every segment it sends */
	return i <= ctx->tcp6_n && ctx->tcp6_n ? &ctx->tcp6_pairs[i] : NULL;
}
/* The index of the pair (l, p) some connection holds, IPK_TCP6_NONE when none. */
uint32_t ipk_tcp6_pair_find(struct ipk_ctx *ctx, const uint8_t l[16], const uint8_t p[16]);
/* The same, the last pair found tested inline first (the receive shortcut asks for
 * every segment). */
IPK_INLINE uint32_t ipk_tcp6_pair_find_last(struct ipk_ctx *ctx, const uint8_t l[16],
                                            const uint8_t p[16])
{
	uint32_t i = ctx->tcp6_last;

	if (i < ctx->tcp6_n && ctx->tcp6_pairs[i].refs && ipk_ip6_eq(ctx->tcp6_pairs[i].peer, p) &&
	    ipk_ip6_eq(ctx->tcp6_pairs[i].local, l))
		return i;
	return ipk_tcp6_pair_find(ctx, l, p);
}
/* The pair (l, p) for an active open, unheld (ipk_tcp6_pair_unused gives it back
 * when no connection came to hold it); IPK_TCP6_NONE (counted) when full. */
/* ipk_ip6_addr_check for the addresses of pair i (held or found), remembered. */
int ipk_tcp6_pair_addr_check(struct ipk_ctx *ctx, uint32_t i);
/* The same, the verdict kept in the pair tested inline first. */
IPK_INLINE int ipk_tcp6_pair_addr_check_kept(struct ipk_ctx *ctx, uint32_t i)
{
	const struct ipk_tcp6_pair *e = &ctx->tcp6_pairs[i];

	if (e->ok && e->ok_gen == ctx->ip6.addr_gen)
		return -1;
	return ipk_tcp6_pair_addr_check(ctx, i);
}
uint32_t ipk_tcp6_pair_take(struct ipk_ctx *ctx, const uint8_t l[16], const uint8_t p[16]);
void ipk_tcp6_pair_unused(struct ipk_ctx *ctx, uint32_t i);
/* The tuple a hash of the 4-tuple takes (RFC 6528 ISN, SYN cookies): t itself for
 * IPv4; for IPv6 the pair's addresses folded to 32 bits each, so the result
 * depends on the addresses, not on a table index. */
void ipk_tcp6_key(const struct ipk_ctx *ctx, const struct ipk_tuple *t, struct ipk_tuple *k);
/* t in either family as an ipk_atuple. */
int ipk_tcp6_atuple(const struct ipk_ctx *ctx, const struct ipk_tuple *t, struct ipk_atuple *a);
/* The largest segment payload toward pair's peer: path MTU - 60. */
uint32_t ipk_tcp_mss6(const struct ipk_ctx *ctx, uint32_t pair);
/* The MSS we offer and cap the peer's at for tuple t (RFC 9293 §3.7.1): the MTU
 * less the IPv4 and TCP headers, or the IPv6 path MTU less 60. */
IPK_INLINE uint32_t ipk_tcp_mss_ours(const struct ipk_ctx *ctx, const struct ipk_tuple *t)
{
	return ipk_tcp_is6(t) ? ipk_tcp_mss6(ctx, t->local_ip4_be) : (uint32_t)ctx->cfg.mtu - 40u;
}

/* Segments up to this many bytes are summed inline over IPv6 (below). */
#define IPK_TCP6_CSUM_INLINE_MAX 128u
/* RFC 8200 §8.1: the TCP checksum with the IPv6 pseudo-header (source, destination,
 * upper-layer length, next header) of a flat segment of len <= 128 bytes at p, in
 * 64-bit words: the value to store with ipk_wr16 (checksum field zero), or 0 over
 * a segment whose checksum is right. */
IPK_INLINE uint16_t ipk_tcp6_csum_small(const uint8_t src[16], const uint8_t dst[16],
                                        const uint8_t *p, uint32_t len)
{
	uint64_t s = ipk_csum_ph_word(IPK_IPPROTO_TCP, len);

	s = ipk_csum64_small(s, src, 16);
	s = ipk_csum64_small(s, dst, 16);
	return ipk_csum64_finish(ipk_csum64_small(s, p, len));
}

/* ---- tcp.c */
/* Slot of the listener on port_be in ctx->listeners, -1 when none. */
int ipk_tcp_listener_find(const struct ipk_ctx *ctx, uint16_t port_be);
struct ipk_conn *ipk_tcp_lookup(struct ipk_ctx *ctx, uint32_t lip, uint16_t lport, uint32_t pip,
                                uint16_t pport);
void ipk_tcp_hash_insert(struct ipk_ctx *ctx, struct ipk_conn *c);
uint32_t ipk_tcp_isn(struct ipk_ctx *ctx, const struct ipk_tuple *t);
/* Take the connection out of everything and return it to the pool. `why` is given
 * to tcp_closed when the application knows the connection (see tcp.c). */
void ipk_tcp_destroy(struct ipk_ctx *ctx, struct ipk_conn *c, enum ipk_close_reason why);
/* Report tcp_closed now (TIME_WAIT entry) while the object lives on. */
void ipk_tcp_report_closed(struct ipk_ctx *ctx, struct ipk_conn *c, enum ipk_close_reason why);
/* Leave SYN-RECEIVED: give the listener's backlog slot back. */
void ipk_tcp_backlog_release(struct ipk_ctx *ctx, struct ipk_conn *c);
/* Fill a fresh (zeroed) connection for tuple t: ISN, MSS, RTO, congestion state. */
/* A fresh connection's fields for 4-tuple t; IPK_ENOMEM when an IPv6 one finds the
 * pair table full (c is then still the caller's to put back). */
int ipk_tcp_conn_setup(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tuple *t);
void ipk_tcp_enter(struct ipk_ctx *ctx, struct ipk_conn *c, enum ipk_tcp_state st);
IPK_INLINE void ipk_tcp_hold(struct ipk_conn *c) { c->busy++; }
/* The last hold of a zombie went: free it (tcp.c). */
void ipk_tcp_release_last(struct ipk_ctx *ctx, struct ipk_conn *c);
/* Drop a hold; returns 1 when the connection was freed meanwhile (c is now invalid).
 * Inline: every segment and most API calls take and drop one. */
IPK_INLINE int ipk_tcp_release(struct ipk_ctx *ctx, struct ipk_conn *c)
{
	if (c->busy)
		c->busy--;
	if (c->busy == 0 && (c->fl & IPK_TCPF_ZOMBIE)) {
		ipk_tcp_release_last(ctx, c);
		return 1;
	}
	return (c->fl & IPK_TCPF_ZOMBIE) != 0;
}
/* Apply the peer's SYN options (MSS, window scale) */
void ipk_tcp_syn_opts(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_opts *o);

/* ---- tcp_out.c */
/* Send what the windows, Nagle and SWS avoidance allow, then an owed ACK. */
void ipk_tcp_output(struct ipk_ctx *ctx, struct ipk_conn *c);
/* Send one segment from the connection: `len` payload bytes from the send queue at
 * `seq`; SYN and FIN are derived from the sequence numbers. Returns the sequence
 * space used (payload + SYN + FIN) or a negative error (nothing sent). */
int ipk_tcp_xmit(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t seq, uint32_t len,
                 unsigned how);
#define IPK_TCP_X_FIN 0x1u   /* may carry our FIN when the segment reaches it */
#define IPK_TCP_X_PROBE 0x2u /* zero-window probe: outside the window, no RTO */
int ipk_tcp_send_ack(struct ipk_ctx *ctx, struct ipk_conn *c);
/* A segment with no connection behind it (a SYN cookie's SYN-ACK). */
int ipk_tcp_send_raw(struct ipk_ctx *ctx, const struct ipk_tuple *t, uint32_t seq, uint32_t ack,
                     uint8_t flags, uint16_t wnd, const struct ipk_tcp_opts *o);
int ipk_tcp_send_rst_conn(struct ipk_ctx *ctx, struct ipk_conn *c);
/* RFC 9293 §3.10.7.1: answer a segment that has no connection. */
void ipk_tcp_send_rst_for(struct ipk_ctx *ctx, const struct ipk_tcp_seg *s);
/* Window field value and the right edge it sets (receiver SWS, §3.8.6.2.2). */
uint32_t ipk_tcp_rcv_window(const struct ipk_ctx *ctx, const struct ipk_conn *c);
/* Free send-queue bytes now acknowledged up to `ack`; returns bytes released. */
uint32_t ipk_tcp_sq_release(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t ack);
/* ipk_tcp_sq_release's common case inline: the ACK covers exactly the one pb queued
 * (a request or a reply acknowledged whole). Anything else takes the loop. */
/* An acknowledged send-queue packet leaves the queue. With IPK_PKT_RECYCLE one
 * that ipk_tcp_write allocated (COPY) and no clone of which was ever sent (a clone
 * may outlive the ACK at a NIC or a receiver, sharing the buffer) is kept for the
 * next copy-write instead (ipk_tcp_pkt_take); the only caller is ACK input, inside
 * ipk_run, which frees what is still kept before it returns. */
/* The pb goes back to the free list (ipk_tcp_sq_kept says when it must not). */
IPK_INLINE void ipk_tcp_sq_pkt_done(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_pb *pb)
{
	(void)c;
	if ((pb->aux & (IPK_TCP_PB_COPY | IPK_TCP_PB_CLONED)) == IPK_TCP_PB_COPY &&
	    (ctx->cfg.pkt_fields & IPK_PKT_RECYCLE) && !ctx->pkt_spare) {
		ctx->pkt_spare = pb->pkt;
		return;
	}
	ipk_pkt_release(ctx, pb->pkt);
}
/* With ops->tcp_acked_pkt an acknowledged ipk_tcp_send packet is not freed: its pb
 * goes on ctx->tcp_acked_q (by the caller, which knows the queue's end) and new_ack
 * shows it (core.h). A static ops table without the op compiles the test away. */
IPK_INLINE int ipk_tcp_sq_kept(const struct ipk_ctx *ctx, const struct ipk_pb *pb)
{
	return !(pb->aux & IPK_TCP_PB_COPY) && IPK_OPS(ctx)->tcp_acked_pkt;
}
/* A packet for a copy-write: the kept one (ipk_tcp_sq_pkt_done) or pkt_alloc's. */
IPK_INLINE void *ipk_tcp_pkt_take(struct ipk_ctx *ctx)
{
	void *p = ctx->pkt_spare;

	if (!p)
		return ipk_pkt_alloc(ctx);
	ctx->pkt_spare = NULL;
	return p;
}
IPK_INLINE uint32_t ipk_tcp_sq_release_ack(struct ipk_ctx *ctx, struct ipk_conn *c,
                                           uint32_t ack)
{
	struct ipk_pb *pb = c->sq_head;
	uint32_t done = ack - c->sq_seq;

	if (!pb || pb != c->sq_tail || done == 0 || done != c->sq_bytes || pb->len != done)
		return ipk_tcp_sq_release(ctx, c, ack);
	c->sq_head = c->sq_tail = NULL;
	if (ctx->sq_hint_pb == pb)
		ctx->sq_hint_c = NULL;
	c->sndbuf += IPK_TCP_PB_OV(pb); /* tcp.c sq_overhead */
	ctx->wmem -= done + IPK_TCP_PB_OV(pb);
	if (ipk_tcp_sq_kept(ctx, pb)) {
		ctx->tcp_acked_q = pb; /* the queue's tail: its next is NULL */
	} else {
		ipk_tcp_sq_pkt_done(ctx, c, pb);
		ipk_pb_put(ctx, pb);
	}
	c->sq_seq = ack;
	c->sq_bytes = 0;
	return done;
}
/* The send-queue pb holding `seq` (NULL past the queue) and seq's offset in it. */
struct ipk_pb *ipk_tcp_sq_find(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t seq,
                               uint32_t *at);
void ipk_tcp_queues_free(struct ipk_ctx *ctx, struct ipk_conn *c);
IPK_INLINE uint32_t ipk_tcp_data_end(const struct ipk_conn *c) { return c->sq_seq + c->sq_bytes; }
IPK_INLINE int ipk_tcp_fin_sent(const struct ipk_conn *c)
{
	return (c->fl & IPK_TCPF_FIN_QUEUED) && ipk_seq_gt(c->snd_max, ipk_tcp_data_end(c));
}
IPK_INLINE int ipk_tcp_fin_acked(const struct ipk_conn *c)
{
	return (c->fl & IPK_TCPF_FIN_QUEUED) && ipk_seq_gt(c->snd_una, ipk_tcp_data_end(c));
}

/* ---- tcp_in.c: connection-level processing of one segment (pkt stays caller's) */
void ipk_tcp_input_conn(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_tcp_seg *s);
void ipk_tcp_input_listen(struct ipk_ctx *ctx, struct ipk_tcp_seg *s);

/* ---- tcp_timer.c */
void ipk_tcp_timers_update(struct ipk_ctx *ctx, struct ipk_conn *c);
void ipk_tcp_timers_remove(struct ipk_ctx *ctx, struct ipk_conn *c);
/* Take c off the timer list, keeping its deadlines (it moves to the TIME_WAIT list). */
void ipk_tcp_timers_unlink(struct ipk_ctx *ctx, struct ipk_conn *c);
void ipk_tcp_rtt_sample_us(struct ipk_ctx *ctx, struct ipk_conn *c, uint64_t r);
void ipk_tcp_rto_reset(struct ipk_ctx *ctx, struct ipk_conn *c);
void ipk_tcp_arm_rtx(struct ipk_ctx *ctx, struct ipk_conn *c);
/* Output found no packet or pb: the wait before the next try in ns (doubled per
 * failure in a row, capped), counted in tcp_tx_retries. */
uint64_t ipk_tcp_retry_ns(struct ipk_ctx *ctx, struct ipk_conn *c);
void ipk_tcp_arm_persist(struct ipk_ctx *ctx, struct ipk_conn *c);

/* ---- tcp_ack.c: the delayed-ACK policy */
/* `len` in-order bytes were accepted (hole_filled: they reached queued data). */
void ipk_tcp_ack_data(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t len, int hole_filled);
/* Out-of-order data arrived. */
void ipk_tcp_ack_ooo(struct ipk_ctx *ctx, struct ipk_conn *c);
/* End of ipk_run's receive batch: send the ACK a connection deferred to it. */
void ipk_tcp_ack_batch_end(struct ipk_ctx *ctx);

/* ---- tcp_ecn.c: RFC 3168 */
#define IPK_ECN_ECT0 0x2u
#define IPK_ECN_CE 0x3u
/* Flags to add to our SYN or SYN-ACK. */
uint8_t ipk_tcp_ecn_syn_flags(const struct ipk_ctx *ctx, const struct ipk_conn *c);
/* The peer's SYN (passive) or SYN-ACK (active) decides whether ECN is on. */
void ipk_tcp_ecn_syn_in(struct ipk_ctx *ctx, struct ipk_conn *c, uint8_t flags);
/* An acceptable segment in a synchronized state: CE and CWR as the receiver. */
void ipk_tcp_ecn_rx(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s);
/* An ACK was processed: ECE as the sender (at most one reduction per window). */
void ipk_tcp_ecn_ack(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s);
/* Flags and TOS for a non-SYN segment of `len` bytes at seq (how: IPK_TCP_X_*). */
uint8_t ipk_tcp_ecn_out(struct ipk_conn *c, uint32_t seq, uint32_t len, unsigned how,
                        uint8_t *tos);

/* ---- tcp_keepalive.c (RFC 1122 §4.2.3.6) */
/* The peer was heard from (or keep-alive switched): next probe after the idle time. */
void ipk_tcp_keepalive_restart(struct ipk_ctx *ctx, struct ipk_conn *c);
/* keepalive_at is due: probe, or close when the peer stayed silent; 1 = closed. */
int ipk_tcp_keepalive_fire(struct ipk_ctx *ctx, struct ipk_conn *c);

/* ---- tcp_cc.c: the congestion-control interface and NewReno (RFC 5681, 3465, 6582,
 * 6928). The loss-recovery code owns cwnd during recovery; an algorithm decides the
 * growth outside it and the reduction when congestion is signalled. */

/* cwnd never needs to exceed what a scaled window can use; the cap keeps additions
 * from overflowing 32 bits. */
#define IPK_TCP_CWND_MAX 0x40000000u

enum ipk_cc_event {
	IPK_CC_EV_LOSS = 0, /* fast retransmit / recovery entry: cwnd = ssthresh after */
	IPK_CC_EV_RTO,      /* retransmission timeout: cwnd = one segment after */
	IPK_CC_EV_ECN       /* RFC 3168 §6.1.2 ECE: cwnd = ssthresh after */
};

struct ipk_cc_algo {
	/* Reset the algorithm's state (c->cc); cwnd and ssthresh are left alone. */
	void (*init)(struct ipk_conn *c);
	/* `acked` new bytes delivered outside recovery; grow cwnd. */
	void (*on_ack)(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t acked, uint64_t rtt_ns);
	/* Congestion signalled: set ssthresh and cwnd as the event says. */
	void (*on_congestion)(struct ipk_ctx *ctx, struct ipk_conn *c, enum ipk_cc_event ev);
	/* Recovery ended (cwnd already set by the recovery code); may be NULL. */
	void (*on_recovery_exit)(struct ipk_ctx *ctx, struct ipk_conn *c);
};

extern const struct ipk_cc_algo ipk_cc_newreno;
extern const struct ipk_cc_algo ipk_cc_cubic;
/* The table for an IPK_CC_* id; NULL when unknown. */
const struct ipk_cc_algo *ipk_tcp_cc_algo(unsigned id);
/* Dispatch to the connection's algorithm. */
void ipk_tcp_cc_ack(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t acked);
void ipk_tcp_cc_congestion(struct ipk_ctx *ctx, struct ipk_conn *c, enum ipk_cc_event ev);
void ipk_tcp_cc_recovery_exit(struct ipk_ctx *ctx, struct ipk_conn *c);
/* RFC 5681 slow start with RFC 3465 byte counting, shared by the algorithms;
 * returns the bytes left over when slow start ended inside this ACK. */
uint32_t ipk_tcp_cc_slow_start(struct ipk_conn *c, uint32_t acked);

/* ---- tcp_cubic.c: integer CUBIC (RFC 9438), exposed for unit tests */
uint32_t ipk_cubic_cbrt(uint64_t x);
/* W_cubic(t) in bytes for t ms since the epoch (RFC 9438 eq. 1). */
uint32_t ipk_cubic_window(uint32_t w_max, uint32_t k_ms, uint32_t mss, uint32_t t_ms);
/* K in ms (RFC 9438 eq. 2) for a window reduced from w_max to cwnd_epoch. */
uint32_t ipk_cubic_k(uint32_t w_max, uint32_t cwnd_epoch, uint32_t mss);

void ipk_tcp_cc_init(struct ipk_ctx *ctx, struct ipk_conn *c);
/* New data acknowledged (acked bytes, snd_una not yet advanced). Returns 1 when a
 * partial ACK in recovery asks for the next hole to be retransmitted. */
int ipk_tcp_cc_on_ack(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t ack, uint32_t acked);
/* RFC 7661 §4.1: the flight is under half of cwnd, so an ACK does not grow cwnd
 * (tcp_cc.c tests it before any algorithm's on_ack). */
IPK_INLINE int ipk_tcp_cc_app_limited(const struct ipk_conn *c)
{
	return c->snd_max - c->snd_una < c->cwnd / 2u;
}
/* ipk_tcp_cc_on_ack for an ACK of new data outside NewReno recovery and the flight
 * application-limited (request/response): only the duplicate count ends, without
 * the call. Returns what ipk_tcp_cc_on_ack returns (1: a partial ACK to answer). */
IPK_INLINE int ipk_tcp_cc_ack_new(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t ack,
                                  uint32_t acked)
{
	if (!(c->fl & IPK_TCPF_RECOVERY) && ipk_tcp_cc_app_limited(c)) {
		c->dupacks = 0;
		return 0;
	}
	return ipk_tcp_cc_on_ack(ctx, c, ack, acked);
}
/* A duplicate ACK; returns 1 when fast retransmit is due now. */
int ipk_tcp_cc_on_dupack(struct ipk_ctx *ctx, struct ipk_conn *c);
void ipk_tcp_cc_on_rto(struct ipk_ctx *ctx, struct ipk_conn *c);
/* RFC 6675 §5 (4.2): a SACK loss episode starts (cwnd and ssthresh reduced once). */
void ipk_tcp_cc_sack_enter(struct ipk_ctx *ctx, struct ipk_conn *c);

/* ---- tcp_ts.c: RFC 7323 timestamps */
/* The timestamp clock: ctx->now in whole ms (RFC 7323 §5.4: a 1 ms tick). Inline with
 * the two users every segment has (the TSval sent, TS.Recent's age): the library
 * build would call into tcp_ts.c for a division by a constant. */
IPK_INLINE uint32_t ipk_tcp_ts_clock_ms(const struct ipk_ctx *ctx)
{
	return (uint32_t)(ctx->now / 1000000u);
}
/* Our TSval. The ISS offsets the clock per connection so TSval does not reveal the
 * host's uptime (§7.1 suggests a random offset). */
IPK_INLINE uint32_t ipk_tcp_ts_now(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	return ipk_tcp_ts_clock_ms(ctx) + c->iss;
}
/* Negotiate from the peer's SYN (our SYN offered TS when cfg.tcp_timestamps). */
void ipk_tcp_ts_syn(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_opts *o);
/* RFC 7323 §5.3 R1 and §3.2: 0 when the segment passes, else dropped and counted:
 * IPK_TCP_PAWS_OLD (TSval older than TS.Recent: the caller owes an ACK) or
 * IPK_TCP_TS_MISSING (a non-RST segment without the negotiated timestamp: silently). */
#define IPK_TCP_PAWS_OLD 1
#define IPK_TCP_TS_MISSING 2
int ipk_tcp_paws_reject(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s);
/* §4.3: remember the peer's TSval from an acceptable segment. */
void ipk_tcp_ts_recent(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s);
/* TS.Recent = tsval now; the caller made §4.3 (2)'s tests (header prediction has). */
IPK_INLINE void ipk_tcp_ts_recent_take(const struct ipk_ctx *ctx, struct ipk_conn *c,
                                       uint32_t tsval)
{
	c->ts_recent = tsval;
	c->ts_recent_ms = ipk_tcp_ts_clock_ms(ctx);
}
/* §4.1: RTT sample from TSecr on an ACK that advanced snd_una; 0 when none taken.
 * Every ACK that advances the left edge gives a sample, also across retransmissions,
 * because TSecr names the transmission that was acknowledged. Inline: new_ack's
 * every call (twice per request of a ping-pong) ends at the fixed-point test; only
 * a sample that moves the estimate calls out. */
IPK_INLINE int ipk_tcp_ts_rtt(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s)
{
	uint32_t ms;
	uint64_t r;

	if (!(c->fl & IPK_TCPF_TS_OK) || !s->o.has_ts || s->o.tsecr == 0)
		return 0;
	if (c->fl & IPK_TCPF_TS_NO_RTT) {
		/* the echo of a SYN cookie's TSval, whose low bits were options: no sample */
		c->fl &= ~IPK_TCPF_TS_NO_RTT;
		return 0;
	}
	ms = ipk_tcp_ts_now(ctx, c) - s->o.tsecr;
	/* An echo from the future or older than the RTO ceiling is forged or stale
	 * (ms * 10^6 > tcp_rto_max_ns, with the ceiling in whole ms from ipk_ctx_init). */
	if (ms > ctx->ts_rtt_max_ms)
		return 0;
	/* A 1 ms tick reads 0 for sub-ms paths: count half a tick. The sample in µs. */
	r = ms ? (uint64_t)ms * 1000u : 500u;
	/* RFC 6298 (2.3) at its fixed point: a sample equal to SRTT with RTTVAR 0 moves
	 * neither, and without a back-off the RTO stays (ipk_tcp_rtt_sample_us would
	 * return unchanged). The common case of a sub-ms path, whose every echo reads 0. */
	if (r == c->srtt_us && c->rttvar_us == 0 && c->nrtx == 0 && !ctx->fast_off)
		return 1;
	ipk_tcp_rtt_sample_us(ctx, c, r);
	return 1;
}

/* ---- tcp_sack.c: receiver side, RFC 2018 / RFC 2883 */
/* Options of a non-SYN segment: TS and SACK blocks. Returns 1 when any were set. */
int ipk_tcp_seg_opts(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_tcp_opts *o);
/* Report [l, r) as a duplicate in the next ACK (RFC 2883 §4). */
void ipk_tcp_dsack_note(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t l, uint32_t r);
/* The out-of-order pb pb arrived last: its block goes first (RFC 2018 §4). */
void ipk_tcp_sack_recent(struct ipk_conn *c, struct ipk_pb *pb);

/* ---- tcp_sb.c: sender scoreboard and RFC 6675 loss recovery */
/* Process an ACK's SACK blocks and cumulative ACK (after snd_una moved). Returns 1
 * for a duplicate ACK when no scoreboard could be drawn (pool empty): the caller then
 * runs NewReno's duplicate-ACK path (RFC 6582), which counts it in c->dupacks. */
int ipk_tcp_sb_on_ack(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s,
                       uint32_t prev_una, int dup);
/* Enter or leave RFC 6675 recovery as the lost holes and snd_una say. */
void ipk_tcp_sb_recover(struct ipk_ctx *ctx, struct ipk_conn *c);
uint32_t ipk_tcp_sb_sacked_bytes(const struct ipk_conn *c);
/* Bytes in flight as RFC 6675 §4 SetPipe counts them. */
uint32_t ipk_tcp_sb_pipe(const struct ipk_conn *c);
/* Retransmit lost holes while cwnd allows (RFC 6675 §5 (C), NextSeg rule 1). */
void ipk_tcp_sb_output(struct ipk_ctx *ctx, struct ipk_conn *c);
/* RFC 6675 §4 NextSeg (4): the one rescue retransmission of a recovery episode. */
void ipk_tcp_sb_rescue(struct ipk_ctx *ctx, struct ipk_conn *c);
/* RTO with SACK: everything not SACKed is lost; returns 0 when it cannot help. */
int ipk_tcp_sb_on_rto(struct ipk_ctx *ctx, struct ipk_conn *c);
int ipk_tcp_sb_sacked(const struct ipk_conn *c, uint32_t l, uint32_t r);
/* The same for walks in increasing l: *cur starts at ipk_tcp_sb_ranges(c) and
 * remembers where the last call stopped, so a walk over the send queue is linear. */
int ipk_tcp_sb_sacked_at(const struct ipk_pb **cur, uint32_t l, uint32_t r);
IPK_INLINE const struct ipk_pb *ipk_tcp_sb_ranges(const struct ipk_conn *c)
{
	const struct ipk_pb *sb = ipk_tcp_sb(c);

	return sb ? sb->next : NULL;
}
/* Bytes marked lost and not yet retransmitted in this recovery. */
uint32_t ipk_tcp_sb_lost_unsent(const struct ipk_conn *c);
/* The loss probe of a SACK recovery (tcp_rack.c tlp_send): send the first segment
 * RFC 6675 NextSeg rule (1) offers, a lost hole or a lost retransmission, whatever
 * cwnd says. Returns 1 when it went out, 0 when there was none, -1 when the send
 * failed (no packet). */
int ipk_tcp_sb_probe_lost(struct ipk_ctx *ctx, struct ipk_conn *c);
/* Most ranges the connection's scoreboard keeps. */
uint32_t ipk_tcp_sb_cap(const struct ipk_conn *c);
/* The end of the highest SACKed range (RACK.fack), snd_una when nothing is SACKed. */
uint32_t ipk_tcp_sb_fack(const struct ipk_conn *c);
void ipk_tcp_sb_free(struct ipk_ctx *ctx, struct ipk_conn *c);
/* Raise the lost boundary (holes below it are lost). */
void ipk_tcp_sb_mark_lost(struct ipk_conn *c, uint32_t end);

/* ---- tcp_prr.c: RFC 6937 proportional rate reduction */
/* Recovery starts (after ssthresh was set): start the episode's counters in the
 * extension record (drawn if needed). */
void ipk_tcp_prr_start(struct ipk_ctx *ctx, struct ipk_conn *c);
/* An ACK in recovery delivered `delivered` bytes; pipe is RFC 6675's pipe, base what
 * the send paths subtract from cwnd (pipe with a scoreboard, the flight without):
 * cwnd becomes base + sndcnt. */
void ipk_tcp_prr_ack(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t delivered, uint32_t pipe,
                     uint32_t base);
/* [seq, seq+len) went out during recovery: prr_out. */
void ipk_tcp_prr_sent(const struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t seq, uint32_t len);
/* PRR decides this episode's sending (an episode record and tcp_prr not off). */
IPK_INLINE int ipk_tcp_prr_active(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	return ipk_tcp_rcvy(c) != NULL && ctx->cfg.tcp_prr != IPK_PRR_OFF;
}
void ipk_tcp_prr_end(struct ipk_ctx *ctx, struct ipk_conn *c);
/* RFC 6937 §3 sndcnt for one ACK (pure; exposed for the unit tests). crb: PRR-CRB. */
uint32_t ipk_tcp_prr_sndcnt(uint32_t prr_delivered, uint32_t prr_out, uint32_t recover_fs,
                            uint32_t ssthresh, uint32_t pipe, uint32_t delivered, uint32_t mss,
                            int crb);

/* ---- tcp_undo.c: undo of spurious recoveries (RFC 3708), the retransmission log */
/* Logged retransmitted ranges per connection: a recovery's holes, merged when
 * adjacent; beyond it the oldest is forgotten (its D-SACK then counts nothing). With
 * the undo record, at most this + 1 descriptors per connection. */
#define IPK_TCP_UNDO_LOG_MAX 16u
/* [seq, seq + len) went out again (SACK connections): logged, and counted in a
 * running recovery's retransmissions. */
void ipk_tcp_undo_sent(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t seq, uint32_t len);
/* A SACK recovery begins (before cwnd and ssthresh are reduced): keep them. */
void ipk_tcp_undo_arm(struct ipk_ctx *ctx, struct ipk_conn *c);
/* An RTO: the running recovery can no longer be undone. */
void ipk_tcp_undo_cancel(struct ipk_conn *c);
/* The first RTO of an episode, before cwnd is cut: keep what an Eifel undo restores
 * (RFC 3522). Needs SACK and timestamps (the caller checks). */
void ipk_tcp_undo_rto_arm(struct ipk_ctx *ctx, struct ipk_conn *c);
/* A new ACK while backed off (nrtx != 0): undo the RTO when it was spurious. */
void ipk_tcp_undo_rto_ack(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s);
/* F-RTO (RFC 5682 §3.1), SACK without timestamps: an RTO fires (before cwnd is
 * cut, nrtx not yet raised); an ACK (from the scoreboard's ACK processing, before the
 * trim); 1 while retransmissions wait for the ACK of new data (step 2b). */
void ipk_tcp_frto_on_rto(struct ipk_ctx *ctx, struct ipk_conn *c);
void ipk_tcp_frto_ack(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t prev_una, int dup);
int ipk_tcp_frto_holds(const struct ipk_conn *c);
/* The SACK recovery ended (cwnd set): apply an undo that waited for it. */
void ipk_tcp_undo_rcvy_exit(struct ipk_ctx *ctx, struct ipk_conn *c);
/* A D-SACK of [l, r): 1 when it covers data we retransmitted (a needless
 * retransmission), 0 when not (a network duplicate of an original, or the log no
 * longer holds it). May undo the recovery. */
int ipk_tcp_undo_dsack(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t l, uint32_t r);
/* The scoreboard record sb goes back to the pool: free the undo state hung off it. */
void ipk_tcp_undo_free(struct ipk_ctx *ctx, struct ipk_pb *sb);

/* ---- tcp_rack.c: RFC 8985 RACK-TLP */
/* Payload [seq, seq+len) went out now: stamp the send-queue pbs. */
void ipk_tcp_rack_sent(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t seq, uint32_t len);
/* [l, r) was delivered, by the cumulative ACK (cum 1, before the scoreboard is
 * trimmed) or by SACK: §6.2 steps 1-3. */
void ipk_tcp_rack_delivered(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t l, uint32_t r,
                            int cum);
/* The cumulative ACK s covers [snd_una, ack) (called before snd_una moves and the
 * scoreboard is trimmed): §6.2 steps 1-3, with its TSecr for step 2. */
void ipk_tcp_rack_acked(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s);
/* §6.2 step 5: mark lost what the reordering window has expired on; returns the
 * ns until the next segment would expire (0 = none pending). */
uint64_t ipk_tcp_rack_detect(struct ipk_ctx *ctx, struct ipk_conn *c);
/* Arm rtx_at as RACK reorder timer, TLP or RTO, whichever applies (§6.3, §7.2). */
void ipk_tcp_arm_loss_timer(struct ipk_ctx *ctx, struct ipk_conn *c, uint64_t reo);
/* New data was sent while the loss timer runs: move the PTO (§7.2). */
void ipk_tcp_tlp_rearm(struct ipk_ctx *ctx, struct ipk_conn *c);
/* RFC 8985 §7.2: the worst-case delayed-ACK time the PTO adds when one segment is
 * out, in µs (tcp_rack.c). */
#define IPK_TCP_WC_DELACK_US 200000u

/* TLP's conditions (tcp_rack.c tlp_allowed) that a connection ESTABLISHED or
 * CLOSE-WAIT and outside loss recovery can fail: RACK on, an RTT estimate, no
 * back-off, SACK on, no probe out, no NewReno recovery. A lost segment waiting to
 * be resent is no reason to skip: the probe resends it (ipk_tcp_sb_probe_lost). */
IPK_INLINE int ipk_tcp_tlp_allowed_est(const struct ipk_ctx *ctx, const struct ipk_conn *c)
{
	if (!ctx->cfg.tcp_rack || c->srtt_us == 0 || c->nrtx)
		return 0;
	return (c->fl & (IPK_TCPF_SACK_OK | IPK_TCPF_TLP_OUT | IPK_TCPF_RECOVERY)) ==
	       IPK_TCPF_SACK_OK;
}

/*
 * Can a send restart the stopped loss timer lazily (RFC 6298 (5.1))? It must have
 * started RTT timing (the caller checks; rtt_t is then this send's µs tick) and leave
 * one segment of at most an MSS in flight, and the stopped timer's deadline must
 * still be set, no later than min(RTO, 2 * SRTT + the delayed-ACK allowance): with
 * one segment out neither the RTO nor the PTO (RFC 8985 §7.2, from the latest
 * transmission, this one) is shorter, so that deadline fires early, never late, and
 * ipk_tcp_loss_settle then finds the real one from rtt_t.
 */
IPK_INLINE int ipk_tcp_loss_lazy_ok(const struct ipk_conn *c)
{
	uint64_t pto = 2ull * c->srtt_us + IPK_TCP_WC_DELACK_US;
	uint32_t floor = pto < c->rto_us ? (uint32_t)pto : c->rto_us;

	return c->rtx_kind == IPK_TCP_RTX_IDLE && c->rtx_at != 0 &&
	       c->snd_max - c->snd_una <= c->mss && (int32_t)(c->rtx_at - c->rtt_t) <= (int32_t)floor &&
	       (c->fl & IPK_TCPF_ON_TIMERS);
}

/* A lazy loss timer (IPK_TCP_RTX_LAZY_*) made exact: rtx_at becomes the RTO or PTO
 * from rtt_t, its kind RTO or TLP. An IDLE deadline is cleared. */
void ipk_tcp_loss_settle(struct ipk_ctx *ctx, struct ipk_conn *c);
/* RFC 6298 (5.1) on a send that started RTT timing: when ipk_tcp_loss_lazy_ok, keep
 * the stopped timer's deadline as a lazy one (RTO or PTO as arm_loss_timer would
 * choose). Returns 0 when the caller must arm the timer. */
int ipk_tcp_loss_restart_lazy(struct ipk_ctx *ctx, struct ipk_conn *c);
/* The loss timer fired with kind REO or TLP. */
void ipk_tcp_rack_timer(struct ipk_ctx *ctx, struct ipk_conn *c);
/* A RACK RTT sample of r ns (§6.2 step 2): feed the windowed min_RTT. */
void ipk_tcp_min_rtt_sample(struct ipk_ctx *ctx, struct ipk_conn *c, uint64_t r);
/* RACK.min_RTT in us, 0 when there is no sample yet. */
uint32_t ipk_tcp_min_rtt_us(const struct ipk_conn *c);
/* §6.2 step 4: a D-SACK arrived (needs a scoreboard); widens reo_wnd once per round trip. */
void ipk_tcp_rack_dsack(struct ipk_conn *c);
/* §6.2 step 4: a fast or RTO recovery ended (counts down reo_wnd_persist). */
void ipk_tcp_rack_recovery_done(struct ipk_conn *c);

/*
 * The transmit time RACK keeps on a pb (RFC 8985 §6.2): ctx->now, or one ns after
 * the last one handed out when now has not moved, so that every transmission has
 * its own time in the order the segments left. RFC 8985 breaks equal times by
 * sequence, right for a burst of new data, but the engine stamps a whole poll with
 * one `now`, and a retransmission sent on a later ACK of the poll than new data
 * then counted as sent before it (tcp_rack.c sent_before). The drift is a few ns
 * per segment of a poll.
 */
IPK_INLINE uint64_t ipk_tcp_tx_stamp(struct ipk_ctx *ctx)
{
	uint64_t t = ctx->now > ctx->tx_stamp ? ctx->now : ctx->tx_stamp + 1u;

	ctx->tx_stamp = t;
	return t;
}

/* ---- tcp_defence.c: RFC 5961 challenge ACKs and the ACK-loop limit */
/* Owe a challenge ACK (RFC 5961 §3.2, §4.2, §5.2) unless a limit says no; counted. */
void ipk_tcp_challenge_ack(struct ipk_ctx *ctx, struct ipk_conn *c);
/* Owe the ACK RFC 9293 §3.10.7.4 asks for an unacceptable segment, rate limited per
 * connection when the segment carries no data (RFC 5961 §10 / ACK loops). */
void ipk_tcp_oow_ack(struct ipk_ctx *ctx, struct ipk_conn *c, const struct ipk_tcp_seg *s);
/* 1 when a duplicate SYN in SYN-RECEIVED may have its SYN-ACK now (one per
 * tcp_invalid_ratelimit_ns per connection); else counted in tcp_synack_dup_limited. */
int ipk_tcp_synack_again_allowed(struct ipk_ctx *ctx, struct ipk_conn *c);
/* 1 when a RST answering a segment may go now (cfg.tcp_rst_limit per second);
 * else counted in tcp_rst_limited. */
int ipk_tcp_rst_allowed(struct ipk_ctx *ctx);
/* RFC 5961 §5.2: 1 when SND.UNA - MAX.SND.WND <= SEG.ACK <= SND.MAX. */
int ipk_tcp_ack_valid(const struct ipk_conn *c, uint32_t ack);

/* ---- tcp_syncookie.c: RFC 4987 §3.6 */
/* Should a SYN for listener idx get a cookie instead of a SYN-RECEIVED entry? */
int ipk_tcp_cookie_wanted(const struct ipk_ctx *ctx, int idx);
/* Is the SYN queue full for listener idx (its backlog, or cfg.tcp_synrecv_max)? */
int ipk_tcp_synq_full(const struct ipk_ctx *ctx, int idx);
/* Answer the SYN with a stateless SYN-ACK carrying a cookie. */
void ipk_tcp_cookie_synack(struct ipk_ctx *ctx, struct ipk_tcp_seg *s);
/* An ACK for a listener: returns 1 when it carries a valid cookie, with *out the
 * connection it opened (SYN-RECEIVED, hashed, ready for the ACK to complete it) or
 * NULL when the pool is empty (dropped, counted); 0 when it is no cookie of ours. */
int ipk_tcp_cookie_check(struct ipk_ctx *ctx, const struct ipk_tcp_seg *s, struct ipk_conn **out);

/* ---- tcp_tw.c: TIME_WAIT bounds and reuse (RFC 6191) */
void ipk_tcp_tw_link(struct ipk_ctx *ctx, struct ipk_conn *c);
void ipk_tcp_tw_unlink(struct ipk_ctx *ctx, struct ipk_conn *c);
/* A zeroed connection object: a free one, else the oldest TIME_WAIT connection no
 * core code is running on, freed early (counted in tcp_tw_recycled). NULL: none. */
struct ipk_conn *ipk_tcp_conn_take(struct ipk_ctx *ctx);
/* Connection objects a new connection could have now (free or TIME_WAIT). */
IPK_INLINE int ipk_tcp_conn_room(const struct ipk_ctx *ctx)
{
	return ctx->conn_nfree > 0 || ctx->tw_n > 0;
}
/* A SYN for a TIME_WAIT connection: returns 1 when it started a new connection
 * (RFC 6191 §2) and the old one is gone. */
int ipk_tcp_tw_syn(struct ipk_ctx *ctx, struct ipk_conn *c, struct ipk_tcp_seg *s);
/* Active open on a 4-tuple held by c: frees c when it is in TIME_WAIT and may be
 * reused; returns 1 with *floor set to a sequence the new ISS must exceed. */
int ipk_tcp_tw_take(struct ipk_ctx *ctx, struct ipk_conn *c, uint32_t *floor);
/* No free ephemeral port: take a TIME_WAIT 4-tuple lip -> pip:pport; port or 0. */
uint16_t ipk_tcp_tw_eph(struct ipk_ctx *ctx, uint32_t lip, uint32_t pip, uint16_t pport,
                       uint32_t *floor);
/* Raise a fresh connection's ISS above floor (sequence space of a reused 4-tuple). */
void ipk_tcp_iss_above(struct ipk_conn *c, uint32_t floor);

#endif
