/*
 * One lwIP instance behind a table of functions. lwIP keeps its state in globals, so
 * the harness builds it twice (lw_inst.c + lwIP's sources, symbols hidden, linked
 * into one object per instance with `ld -r` and made local with `objcopy
 * --localize-hidden`); each object exports only its table (lwi_a_api, lwi_b_api).
 * No lwIP type crosses this header: frames are opaque pointers.
 */
#ifndef IPKIT_BENCH_LW_INST_H
#define IPKIT_BENCH_LW_INST_H

#include <stdint.h>

#include "im_common.h"

/* Owned by the harness; both instances update it. */
struct lwi_shared {
	const struct im_opts *o;
	const uint8_t *pat;
	uint64_t issued, done, rx_bytes;
	uint64_t data_frames, corrupted;
	uint64_t frames[2], wire_bytes[2]; /* sent by instance 0 (client) / 1 */
	int connected, accepted, closed;
	const char *error;
	/* The wire: a received-frame buffer of the other instance (len bytes of room at
	 * *payload), and queueing it there. Set by the harness. */
	void *(*peer_alloc)(int from, uint32_t len, uint8_t **payload);
	void (*peer_queue)(int from, void *frame);
	/* --wire handoff: a received frame of the other instance: a copy of the frame's
	 * first hlen bytes (its headers) chained to the rest by reference; orig (the
	 * sender's pbuf, one reference taken for the wire) is released when the receiver
	 * frees the frame. lens = frame length | hlen << 16. NULL: nothing taken. */
	void *(*peer_wrap)(int from, void *orig, uint8_t *bytes, uint32_t lens);
};

struct lwi_api {
	/* idx 0 = client (10.0.0.1), 1 = server (10.0.0.2); offload: no checksums */
	int (*init)(struct lwi_shared *sh, int idx, int offload);
	void *(*rx_alloc)(uint32_t len, uint8_t **payload); /* a PBUF_POOL frame */
	void (*input)(void *frame);                          /* hand it to the netif */
	/* peer_wrap's frame in this instance: headers in a PBUF_POOL pbuf, the payload a
	 * PBUF_REF custom pbuf whose free calls owner->unref(orig) */
	void *(*rx_wrap)(void *orig, const struct lwi_api *owner, uint8_t *bytes, uint32_t lens);
	void (*unref)(void *orig);                           /* pbuf_free in this instance */
	void (*poll)(uint64_t now_ns);                       /* timers */
	int (*listen)(uint16_t port);
	int (*connect)(int n, uint16_t port);                /* n client connections */
	void (*start)(void);                                 /* first requests / bulk writes */
	int (*quiet)(void);                                  /* nothing unacknowledged */
	uint64_t (*csum_drops)(void);
	uint64_t (*retransmits)(void);
	uint32_t pcb_size;                                   /* sizeof(struct tcp_pcb) */
	int stats;                                           /* counters built in (-stats) */
};

extern const struct lwi_api lwi_a_api, lwi_b_api;

#endif
