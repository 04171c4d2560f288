/*
 * What every in-memory harness shares (ipkit-inmem and the lwIP peer): the command
 * line, the data pattern both ends check against, the clock, and the report (text
 * and JSON Lines). The smoltcp peer (Rust) implements the same CLI and output.
 *
 * Workloads (one thread, two stacks, frames handed over as-is):
 *   pingpong  each of C connections sends a request of L bytes, the server echoes it,
 *             the client checks every echoed byte and sends the next request;
 *   bulk      one connection, the client writes messages of M bytes, the server
 *             checks every byte against the pattern at its stream offset.
 */
#ifndef IPKIT_BENCH_IM_COMMON_H
#define IPKIT_BENCH_IM_COMMON_H

#include <stdint.h>

/* The pattern repeats every IM_PAT bytes (a prime, so segment boundaries drift
 * across it); IM_PAT_TAIL more bytes follow so any slice up to that length starting
 * anywhere in the period is contiguous. */
#define IM_PAT 65521u
#define IM_PAT_TAIL 65536u
#define IM_MAX_LEN 65536u
#define IM_MAX_CONNS 4096

struct im_opts {
	int bulk;              /* 0 ping-pong, 1 bulk */
	int conns;             /* -c */
	uint32_t len;          /* -l: request bytes (ping-pong) */
	uint32_t msg;          /* -m: message bytes per write (bulk) */
	uint64_t requests;     /* -n: requests to complete (ping-pong) */
	uint64_t bytes;        /* -b: bytes to deliver (bulk) */
	int offload;           /* --profile offload */
	int real_clock;        /* --clock real */
	double max_seconds;    /* -t: wall-clock bound of the measured part */
	uint64_t corrupt_at;   /* --corrupt K: flip a byte in the K-th data frame (0 off) */
	uint64_t max_rtx;      /* --max-rtx N: more retransmissions fail the run */
	uint64_t max_conn_bytes; /* --max-conn-bytes N: a larger conn_bytes fails the run */
	int zerocopy;          /* --zerocopy: bulk sender queues the pattern itself (ipkit) */
	int op_calls;          /* --op-calls: no ipk_config.pkt_fields (ipkit) */
	int handoff;           /* --wire handoff: the frame object itself goes to the
	                        * receiver (no copy); default --wire copy: the wire copies
	                        * every frame into a fresh receive buffer, as a NIC's DMA */
	const char *json;      /* --json FILE ("-" = stdout) */
	int quiet;             /* -q: no text line */
	int ip6;               /* --ip6: TCP over IPv6 (ipkit, sw profile) */
};

struct im_result {
	const char *stack;     /* "ipkit", "lwip", "smoltcp" */
	const char *build;     /* "lib", "unity", ... */
	uint64_t requests;     /* completed and verified */
	uint64_t bytes;        /* payload bytes verified (one direction for bulk, both for ping-pong) */
	double seconds;        /* wall time of the measured part (connections already open) */
	double conn_bytes;     /* engine bytes per idle established connection (0 = unknown) */
	uint64_t csum_drops;   /* frames the receiving stack dropped for a bad checksum */
	uint64_t retransmits;  /* segments sent again, both stacks */
	uint64_t corrupted;    /* frames the wire corrupted on purpose */
	uint64_t frames[2];    /* frames the wire carried, [0] client to server, [1] back
	                        * (whole run: handshakes included) */
	uint64_t wire_bytes[2]; /* their bytes (Ethernet header on, no FCS) */
	const char *error;     /* NULL when the run verified */
};

/* Parse argv into o (defaults filled first). Returns 0, or exits with 2 after a
 * usage message (0 for --help). */
void im_parse(int argc, char **argv, struct im_opts *o, const char *stack);
/* The pattern: IM_PAT + IM_PAT_TAIL bytes, built on first use. */
const uint8_t *im_pattern(void);
/* Offset into the pattern of request k on connection id (ping-pong). */
uint32_t im_req_off(uint32_t id, uint64_t k);
/* Request k + 1 starts IM_REQ_STEP bytes after request k (mod IM_PAT), so a harness
 * keeps each connection's offset and steps it without a division:
 * im_req_next(im_req_off(id, k)) == im_req_off(id, k + 1). */
#define IM_REQ_STEP 1u
static inline uint32_t im_req_next(uint32_t off)
{
	off += IM_REQ_STEP;
	return off >= IM_PAT ? off - IM_PAT : off;
}
/* Monotonic wall clock, ns. */
uint64_t im_wall_ns(void);
/* Print the text line and write the JSON object (--json). Returns the exit status:
 * 0 when the run verified, 1 otherwise. */
int im_report(const struct im_opts *o, const struct im_result *r);

#endif
