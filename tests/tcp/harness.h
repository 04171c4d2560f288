/*
 * Scripted TCP test harness: ONE context under test (10.0.0.1, MAC ..:01) whose
 * ops->tx captures every frame, a virtual clock, and a scripted peer (10.0.0.2) whose
 * segments are built with the wire emit functions (correct checksums) and injected
 * with ipk_run. th_expect pops the next captured segment and checks it.
 *
 * Two harnesses can also be wired back to back (th_link): then frames one sends are
 * queued for the other and th_pump delivers them (for bulk transfers).
 */
#ifndef IPKIT_TESTS_TCP_HARNESS_H
#define IPKIT_TESTS_TCP_HARNESS_H

#include <ipkit/core.h>
#include <stdint.h>

#include "pkt.h"
#include "tcp.h"

#define TH_CAP 256
#define TH_RX_MAX (8u << 20)
#define TH_PEER_PORT 5000
#define TH_LOCAL_PORT 80

struct tframe {
	uint8_t *b;
	uint32_t len;
	uint32_t flags; /* IPK_TXOFF_* marks */
	uint16_t mss;   /* meta.mss */
	int chained;
};

/* A parsed captured segment. */
struct tseg {
	struct ipk_tcp_hdr h;
	struct ipk_tcp_opts o;
	uint32_t src_be, dst_be;
	const uint8_t *payload;
	uint32_t len;
	uint32_t txflags;
	uint16_t tso_mss;
	int chained;
	int csum_ok; /* software checksum verified (or offload-marked with the pseudo fold) */
	uint8_t tos; /* IPv4 TOS byte (ECN field in the low two bits) */
};

struct th {
	struct sim_pool *pool; /* first: sim_pkt_ops finds the pool through opaque */
	struct ipk_ctx *ctx;
	void *mem, *conns, *pbs;
	uint32_t nconns, npbs;
	struct ipk_ops ops;
	struct ipk_config cfg;
	uint64_t now;
	uint32_t rnd;
	uint32_t ip_be, peer_be;
	uint8_t mac[6], peer_mac[6];

	/* capture */
	struct tframe cap[TH_CAP];
	int ncap, next;

	/* back to back */
	struct th *link;
	struct sim_pkt *q[TH_CAP * 4];
	int qn;
	int drop_every; /* with link: drop every Nth frame sent (0 = none) */
	int corrupt_next; /* th_send: 1 = bad TCP checksum, 2 = data offset 4 (bad) */
	uint32_t sent_n;
	uint8_t tx_tos; /* th_send: IPv4 TOS byte of injected segments */

	/* events */
	struct ipk_conn *conn;  /* last accepted/connected */
	int accepted, connected, closed, fins, refuse;
	int noroom; /* ops->tcp_room answers 0 */
	enum ipk_close_reason why;
	struct ipk_conn *closed_conn;
	uint8_t *rx;            /* payload received, in order */
	uint32_t rxlen;
	uint32_t payload_calls, last_off, last_len;
	uint64_t acked;
	int auto_recved;        /* call ipk_tcp_recved for each delivery */
	int close_on_fin;       /* call ipk_tcp_close from the end-of-stream event */
	int echo;               /* write each delivery back from the payload event */
	enum ipk_tcp_state state_at_fin; /* connection state seen by that event */
	void *user_tag;
	/* connections seen marked IPK_TCPF_FAST while ipk_tcp_fast_ok did not hold,
	 * checked on every frame sent and every event (th_no_leaks fails on any) */
	uint32_t fast_bad;
};

/* A context with caps/tweaks applied by `tweak` (may be NULL) before init. */
struct th *th_new(void (*tweak)(struct ipk_config *cfg));
/* Two contexts back to back: a = 10.0.0.1, b = 10.0.0.2. */
void th_pair(struct th **a, struct th **b, void (*tweak)(struct ipk_config *cfg));
void th_free(struct th *t);

/* Advance the clock by dt and run timers. */
void th_advance(struct th *t, uint64_t dt);
/* Advance by dt in steps, each to the next deadline the context returns. */
void th_run_for(struct th *t, uint64_t dt);
/* Deliver queued frames between linked harnesses until quiet (bounded rounds). */
void th_pump(struct th *a, struct th *b);

/* Write that segment's whole frame (Ethernet, IPv4, TCP, correct checksums) to p,
 * which holds 94 + len bytes; returns the frame's length. */
uint32_t th_frame(const struct th *t, uint8_t *p, uint16_t sport, uint16_t dport, uint8_t flags,
                  uint32_t seq, uint32_t ack, uint16_t wnd, const struct ipk_tcp_opts *o,
                  const void *payload, uint32_t len);
/* Inject a segment from the peer (10.0.0.2:sport) to us (10.0.0.1:dport). */
void th_send(struct th *t, uint16_t sport, uint16_t dport, uint8_t flags, uint32_t seq,
             uint32_t ack, uint16_t wnd, const struct ipk_tcp_opts *o, const void *payload,
             uint32_t len);
/* Same on the default ports (peer 5000 -> us 80). */
void th_seg(struct th *t, uint8_t flags, uint32_t seq, uint32_t ack, uint16_t wnd,
            const void *payload, uint32_t len);

/* Pop the next captured TCP segment; 0 when none. */
int th_next(struct th *t, struct tseg *s);
/* Pop and check flags/seq/ack (ack checked only when ACK is set); returns 1 on match. */
int th_expect(struct th *t, struct tseg *s, uint8_t flags, uint32_t seq, uint32_t ack);
/* Captured segments not yet popped. */
int th_pending(const struct th *t);
void th_clear(struct th *t);

/* Run a passive handshake on the default ports: SYN (isn irs, with opts) -> expect
 * SYN-ACK -> ACK. Returns our ISS; *c gets the accepted connection. */
uint32_t th_accept(struct th *t, uint32_t irs, const struct ipk_tcp_opts *o, uint16_t wnd,
                   struct ipk_conn **c);

/* Option sets for scripted peers: MSS only; timestamps only. */
struct ipk_tcp_opts th_mss_opt(uint16_t mss);
struct ipk_tcp_opts th_ts_opt(uint32_t tsval, uint32_t tsecr);

/* Nothing leaked: packets back in the pool (apart from captured copies, which the
 * harness keeps outside it), pbs and conns back in the context; and no connection
 * was ever seen marked IPK_TCPF_FAST without its conditions (fast_bad). */
int th_no_leaks(struct th *t);

#endif
