/*
 * One benchmark connection (a UDP flow or a TCP connection), independent of the
 * transport, so ipkit-bench and ipkit-bench-linux run the same client logic.
 *
 * Requests are numbered. With a generated payload (no -m) request k carries k in its
 * first 8 bytes (XORed over a fixed pattern), so an echo that is out of order, stale
 * or from another request is caught, not only a flipped byte. Ping-pong: a request is
 * admitted (timestamped) when depth and the rate allow, transmitted as the transport
 * takes it, and completed when its echo has fully arrived and matched. Burst: it is
 * completed when the transport took its last byte.
 *
 * Ownership: a flow owns only its sent_ns ring (bench_flow_init/free); the transport
 * handle is the caller's.
 */
#ifndef IPKIT_BENCH_FLOW_H
#define IPKIT_BENCH_FLOW_H

#include <stdint.h>

#include "bench_opts.h"
#include "bench_report.h"
#include "hist.h"

struct bench_payload {
	uint8_t *base;    /* -m bytes, or the generated pattern */
	uint32_t len;
	int seq_mixed;    /* generated: request number XORed into bytes 0..7 */
};

int bench_payload_init(struct bench_payload *p, const struct bench_opts *o);
void bench_payload_free(struct bench_payload *p);

struct bench_flow {
	uint64_t admitted;         /* requests admitted so far */
	uint64_t tx_seq;           /* request being transmitted ... */
	uint32_t tx_off;           /* ... and its next byte */
	uint64_t rx_seq;           /* request whose echo is arriving ... */
	uint32_t rx_off;           /* ... and its next byte */
	int rx_bad;                /* rx_seq already counted as a mismatch */
	uint64_t timed_out;        /* rx_seq + 1 when its timeout was counted (TCP) */
	uint64_t *sent_ns;         /* admit time, indexed by request % depth */
	int open;                  /* connected and not closed */
	int busy;                  /* the transport is inside its send loop (re-entrancy) */
	void *handle;              /* the transport's */
	uint64_t cid;              /* the transport's connection id, where it has one */
	uint32_t idx;              /* position in the worker's array */
};

/* The state every worker (thread) of either program keeps. */
struct bench_worker {
	const struct bench_opts *o;
	struct bench_payload pay;
	struct bench_flow *flows;
	uint32_t nflows;
	struct bench_counters c;
	struct hist lat;
	/* rate limit (-r, per worker): token bucket refilled from the clock */
	double tokens;
	uint64_t tokens_ns;
	int starved;               /* a flow had room but no token: rescan on tick */
	uint32_t cursor;           /* round-robin start of that rescan */
	uint64_t next_timeout_scan;
	int stopping;              /* duration over: admit nothing more */
};

/* nflows flows (0 for a server, whose flows the transport makes with
 * bench_flow_new). Returns 0 or -1 (out of memory). */
int bench_worker_init(struct bench_worker *w, const struct bench_opts *o, uint32_t nflows);
void bench_worker_free(struct bench_worker *w);
struct bench_flow *bench_flow_new(const struct bench_worker *w); /* NULL: no memory */
void bench_flow_free(struct bench_flow *f);

/* Admit what depth and tokens allow on f; returns requests admitted. */
uint32_t bench_worker_admit(struct bench_worker *w, struct bench_flow *f, uint64_t now);
/* Periodic work: when a flow was starved (no token, or the transport refused a send:
 * the kick sets w->starved), rescan the flows and call kick on each that got new
 * requests or still has some to send; count timeouts. Returns the flows kicked. */
uint32_t bench_worker_tick(struct bench_worker *w, uint64_t now,
                           void (*kick)(struct bench_worker *, struct bench_flow *, void *),
                           void *arg);

/* Transmit side: copy up to cap bytes still to send into buf (stops at the end of a
 * request when one_request, for datagrams); bench_flow_tx_done records n sent. */
uint32_t bench_flow_tx_fill(const struct bench_worker *w, const struct bench_flow *f,
                            uint8_t *buf, uint32_t cap, int one_request);
void bench_flow_tx_done(struct bench_worker *w, struct bench_flow *f, uint32_t n);
int bench_flow_tx_pending(const struct bench_worker *w, const struct bench_flow *f);

/* Zero-copy transmit (ipkit-bench --zerocopy). The sender lays the payload out once in
 * a buffer of its own (cap bytes); every stretch of a request after its numbered
 * bytes is then a slice of that buffer, queued without a copy, and only the numbered
 * bytes (at most BENCH_SEQ_BYTES per request) are copied.
 * bench_payload_zc_layout fills buf; -1 when the payload does not fit (a -m payload
 * longer than cap, or cap shorter than two periods of the generated pattern). */
#define BENCH_SEQ_BYTES 8u
int bench_payload_zc_layout(const struct bench_payload *p, uint8_t *buf, uint32_t cap);
/* The next piece of f's stream, at most max bytes and never past the end of the
 * request: *ncopy numbered bytes to copy (bench_flow_tx_fill), then a slice of the
 * layout (cap bytes) at *pos. Returns the piece's length (0: nothing to send);
 * bench_flow_tx_done records it once sent. */
uint32_t bench_flow_tx_zc(const struct bench_worker *w, const struct bench_flow *f,
                          uint32_t cap, uint32_t max, uint32_t *ncopy, uint32_t *pos);

/* Client receive: check n echoed stream bytes, complete requests (latency at now). */
void bench_flow_rx(struct bench_worker *w, struct bench_flow *f, const uint8_t *data,
                   uint32_t n, uint64_t now);
/* Client receive of one datagram (must be exactly one whole request). */
void bench_flow_rx_datagram(struct bench_worker *w, struct bench_flow *f, const uint8_t *data,
                            uint32_t n, uint64_t now);
/* A client connection ended (normal: both FINs exchanged). One that never opened
 * counts as a failed connect; one the peer ended during the run as a close. */
void bench_flow_closed(struct bench_worker *w, struct bench_flow *f, int normal);
/* Server receive: count n bytes (stream) and the requests they complete. */
void bench_flow_server_rx(struct bench_worker *w, struct bench_flow *f, uint32_t n);
/* Echo bytes a server's transport did not take yet (it stops reading meanwhile, so
 * the peer is slowed by flow control and this stays within one receive window). */
struct bench_hold {
	uint8_t *p;
	uint32_t len, cap;
};
int bench_hold_add(struct bench_hold *h, const uint8_t *data, uint32_t n); /* -1: no memory */
void bench_hold_drop(struct bench_hold *h, uint32_t n); /* n bytes from the front went out */
void bench_hold_free(struct bench_hold *h);

/* Server echo, test only: with --corrupt-echo flip one byte of what goes back. */
void bench_flow_maybe_corrupt(const struct bench_worker *w, uint8_t *data, uint32_t n);

#endif
