/*
 * A cheap, resettable engine for the fuzz targets: one context with its connection,
 * pb and packet pools, built once per process, snapshotted, and put back to the
 * snapshot before every input by copying its memory (the context's pointers all
 * point into that same memory or at static tables, so a byte copy at the same
 * addresses is an exact reset). Only packet buffers in use at the snapshot are
 * copied back: a free buffer's old bytes are never read before being written.
 *
 * Every transmitted frame is copied to `tx` (the last one) and handed to the
 * target's on_tx hook, then freed. Events are counted in `ev`, cleared on restore.
 */
#ifndef IPKIT_FZ_HOST_H
#define IPKIT_FZ_HOST_H

#include <ipkit/core.h>
#include <stddef.h>
#include <stdint.h>

#include "pkt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FZ_FRAME_MAX 2048u

struct fz_host;
typedef void (*fz_tx_hook)(struct fz_host *h, const uint8_t *f, uint32_t len);

struct fz_events {
	uint32_t tx_frames;
	uint32_t tcp_payload_bytes, tcp_fin, tcp_closed, tcp_accepted, tcp_connected;
	int last_close_reason;
	uint32_t udp_dgrams, udp_bytes;
	uint32_t echo_replies, arp_learned;
	uint32_t arp_learned_ip_be;
};

struct fz_host {
	struct sim_pool *pool; /* first: sim_pkt_ops finds the pool through opaque */
	struct ipk_ctx *ctx;
	struct ipk_config cfg;
	struct ipk_ops ops;
	void *mem, *conns, *pbs;
	size_t mem_size;
	uint32_t nconns, npbs;
	uint64_t now;
	uint32_t rng;
	struct fz_events ev;
	fz_tx_hook on_tx;
	fz_tx_hook on_udp;           /* each datagram's payload (udp_data, udp_len) */
	/* connections: one watched (the target's own: watch_closed once tcp_closed came
	 * for it) and the passive opens still open (tcp_accepted, not yet tcp_closed) */
	struct ipk_conn *watch;
	int watch_closed;
	struct ipk_conn *accepted[16];
	uint32_t naccepted;
	void *user;                  /* the target's own state */
	/* udp_recv: a copy of the last datagram's payload (chains linearised) */
	uint8_t udp_data[65536];
	uint32_t udp_len;
	/* the last transmitted frame, linearised */
	uint8_t tx[FZ_FRAME_MAX];
	uint32_t tx_len;
	/* snapshot */
	struct {
		void *mem, *conns, *pbs, *bufs, *descs;
		struct sim_pool pool;
		uint32_t *live;          /* indices of buffers in use at the snapshot */
		uint8_t *live_bytes;
		uint32_t nlive;
		uint64_t now;
		uint32_t rng;
		uint32_t conns_free, pbs_free;
	} snap;
};

/* Addresses every target uses: us 10.0.0.1 (MAC 02:00:00:00:00:01), peer 10.0.0.2
 * (02:00:00:00:00:02), /24. */
#define FZ_IP_US IPK_IP4(10, 0, 0, 1)
#define FZ_IP_PEER IPK_IP4(10, 0, 0, 2)
extern const uint8_t fz_mac_us[6], fz_mac_peer[6];

/* A config with small tables (so the context is cheap to copy) and our addresses;
 * the target changes what it needs before fz_host_init. */
void fz_host_config(struct ipk_config *cfg);
/* Build the context and pools. Returns 0, or -1 (the target then does nothing). */
int fz_host_init(struct fz_host *h, const struct ipk_config *cfg, uint32_t nconns,
                 uint32_t npbs, uint32_t npkts);
void fz_host_snapshot(struct fz_host *h);
void fz_host_restore(struct fz_host *h);

/* One received frame (copied into a pool packet) through ipk_run at h->now. */
void fz_host_rx(struct fz_host *h, const uint8_t *f, uint32_t len);
/* Abort every passive open still open (they hold pool entries). */
void fz_host_abort_accepted(struct fz_host *h);
/* Advance virtual time by ns and run the timers due. */
void fz_host_advance(struct fz_host *h, uint64_t ns);
/* Abort (abort() is libFuzzer's crash) when a pool counter is out of range. */
void fz_host_check(const struct fz_host *h, const char *who);
/* Abort unless every pool is back where the snapshot had it, but for
 * conns_released more free connections (ones the snapshot held, now closed). */
void fz_host_check_at_start(const struct fz_host *h, const char *who, uint32_t conns_released);
/* The fuzz crash: message to stderr, abort(). */
void fz_fail(const char *who, const char *what);

/* Fix the IPv4 header checksum and the TCP/UDP/ICMP checksum of an Ethernet
 * frame in place (not for fragments' L4), so inputs reach past checksum checks. */
void fz_fix_csums(uint8_t *f, uint32_t len);
/* Ethernet + 20-byte IPv4 header from peer to us; returns 34 (the L4 offset). */
uint32_t fz_eth_ip(uint8_t *f, uint8_t proto, uint32_t l4len, uint16_t frag, uint16_t id);

/* The replay driver's corpus writer: one file per seed. Returns 1 when written. */
int fz_put_file(const char *dir, const char *name, const uint8_t *b, uint32_t len);

#ifdef __cplusplus
}
#endif
#endif
