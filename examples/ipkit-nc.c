/*
 * ipkit-nc: netcat over ipkit. One TCP stream between stdin/stdout and a peer.
 *
 *   ipkit-nc --io tap:ipk0 --ip 10.7.0.2/24 HOST PORT      connect
 *   ipkit-nc --io tap:ipk0 --ip 10.7.0.2/24 -l PORT        accept one connection
 *
 * Sends stdin (or --send-size bytes of a fixed pattern), half-closes at its end, writes
 * what arrives to stdout until the peer closes. --sha256 prints the SHA-256 of what was
 * sent and of what was received on stderr:
 *   sent BYTES sha256 HEX
 *   received BYTES sha256 HEX
 * --stats prints the TCP loss-recovery counters as one line on stderr (key=value):
 *   tcp_stats retransmits=N rto=N fast_retransmits=N ... ooo_segs=N dup_segs=N
 * and the congestion control the connection ran, read back from it (ipk_tcp_info) once
 * established and again when the stream ends, like the relay tests' Linux sender:
 *   cc ESTABLISHED END              (cubic or newreno each)
 * and where the process's time went (node polls and sleeps, getrusage):
 *   loop polls=N sleeps=N rx_frames=N tx_frames=N user_us=N sys_us=N vcsw=N ivcsw=N
 * --cc cubic|newreno picks it (ipk_config.tcp_cc; without it the core's default, newreno),
 * --sndbuf / --rcvbuf BYTES size the connection's buffers (ipk_config.tcp_sndbuf/rcvbuf);
 * --sndbuf fixes the send buffer (like SO_SNDBUF on Linux) unless --sndbuf-max BYTES
 * lets autotuning grow it (ipk_config.tcp_sndbuf_max; 0 = fixed).
 * --trace MS prints the window state and the loop's polls and sleeps every MS ms.
 * Exit 0 when the stream ended normally (both FINs), 1 on reset, timeout or refusal.
 */
#include "app.h"
#include "sha256.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define NC_CHUNK 65536

struct nc_app {
	struct ipk_conn *c;
	int established, closed, fin_sent, in_eof, in_idle;
	enum ipk_close_reason why;
	int listen, sha, no_out, stats;
	int cc_first, cc_last;       /* IPK_CC_* read back from the connection; -1 not yet */
	uint16_t listen_port_be;
	uint64_t send_size;          /* 0: stdin */
	uint64_t sent, received, last_progress;
	struct sha256 sha_tx, sha_rx;
	uint8_t pend[NC_CHUNK];
	uint32_t pend_off, pend_len;
	uint64_t trace_ns, trace_next; /* --trace: interval, next sample; 0 off */
};

static uint64_t nc_clock(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Options that go into the core's configuration (app_node's tweak). */
struct nc_core_opts {
	int cc;                      /* IPK_CC_*; -1: the core's default (NewReno) */
	uint64_t sndbuf, rcvbuf;     /* 0: the core's default */
	int64_t sndbuf_max;          /* -1: --sndbuf's value if given, else the core's default */
};
static struct nc_core_opts nc_core = {-1, 0, 0, -1};

static void nc_tweak(struct ipk_config *cfg, void *app)
{
	(void)app;
	if (nc_core.cc >= 0)
		cfg->tcp_cc = (uint8_t)nc_core.cc;
	if (nc_core.sndbuf)
		cfg->tcp_sndbuf = cfg->tcp_sndbuf_max = (uint32_t)nc_core.sndbuf;
	if (nc_core.sndbuf_max >= 0)
		cfg->tcp_sndbuf_max = (uint32_t)nc_core.sndbuf_max;
	if (nc_core.rcvbuf)
		cfg->tcp_rcvbuf = (uint32_t)nc_core.rcvbuf;
}

static const char *nc_cc_name(int algo)
{
	return algo == (int)IPK_CC_CUBIC ? "cubic" : algo == (int)IPK_CC_NEWRENO ? "newreno" : "?";
}

/* "cubic" or "newreno" to IPK_CC_*; -1 otherwise. */
static int nc_cc_parse(const char *s)
{
	if (strcmp(s, "cubic") == 0)
		return (int)IPK_CC_CUBIC;
	if (strcmp(s, "newreno") == 0)
		return (int)IPK_CC_NEWRENO;
	return -1;
}

/* A buffer size: 1 KiB to 1 GiB (RFC 7323 §2.3: a window scale of 14 at most, so a
 * larger receive window could not be advertised; the core takes at most INT32_MAX for
 * the send buffer). 0 ok, -1 malformed or out of range. */
static int nc_buf_parse(const char *s, uint64_t *out)
{
	uint64_t v;
	if (app_parse_size(s, &v) < 0 || v < 1024 || v > (1ull << 30))
		return -1;
	*out = v;
	return 0;
}

/* The algorithm the connection runs now, kept as the first and the latest seen. */
static void nc_cc_sample(struct nc_app *a)
{
	struct ipk_tcp_info ti;
	if (!a->c || ipk_tcp_info(a->c, &ti) != 0)
		return;
	if (a->cc_first < 0)
		a->cc_first = ti.cc_algo;
	a->cc_last = ti.cc_algo;
}

/* The --send-size pattern: a byte stream that differs from position to position,
 * byte x = x ^ x >> 8 ^ x >> 16 ^ 0x5a. Within 256 aligned bytes only the low byte of x
 * changes, so each such run is the bytes 0..255 (from lo) XOR one constant, done eight
 * bytes at a time (byte by byte it cost ~8% of a sender's CPU at 1.4 Gbit/s, and gcc
 * -O2 does not vectorize that loop). */
static void nc_pattern(uint64_t pos, uint8_t *p, uint32_t n)
{
	static uint8_t iota[256 + 8];
	uint32_t i;
	if (iota[1] == 0)
		for (i = 0; i < sizeof(iota); i++)
			iota[i] = (uint8_t)i;
	while (n > 0) {
		uint32_t lo = (uint32_t)(pos & 255u), run = 256u - lo;
		uint8_t c = (uint8_t)((pos >> 8) ^ (pos >> 16) ^ 0x5a);
		uint64_t c8 = c * 0x0101010101010101ull, w;
		if (run > n)
			run = n;
		for (i = 0; i + 8 <= run; i += 8) {
			memcpy(&w, iota + lo + i, 8);
			w ^= c8;
			memcpy(p + i, &w, 8);
		}
		for (; i < run; i++)
			p[i] = (uint8_t)((lo + i) ^ c);
		pos += run;
		p += run;
		n -= run;
	}
}

/* Refill the pending chunk from the source; sets in_eof / in_idle. */
static void nc_fill(struct nc_app *a, uint32_t max)
{
	ssize_t r;
	if (max > NC_CHUNK)
		max = NC_CHUNK;
	a->pend_off = 0;
	a->pend_len = 0;
	a->in_idle = 0;
	if (a->send_size) {
		uint64_t left = a->send_size - a->sent;
		uint32_t n = left < max ? (uint32_t)left : max;
		if (n == 0) {
			a->in_eof = 1;
			return;
		}
		nc_pattern(a->sent, a->pend, n);
		a->pend_len = n;
		return;
	}
	r = read(0, a->pend, max);
	if (r > 0)
		a->pend_len = (uint32_t)r;
	else if (r == 0)
		a->in_eof = 1;
	else if (errno == EAGAIN || errno == EINTR)
		a->in_idle = 1;
	else
		a->in_eof = 1;
}

/* Move source bytes into the send buffer while it has room; FIN at the end. */
static void nc_pump(struct ipk_node *n, struct nc_app *a)
{
	struct ipk_ctx *ctx = ipk_node_ctx(n);
	uint64_t now = ipk_node_now(n);
	int rounds;
	if (!a->established || a->closed || a->fin_sent)
		return;
	for (rounds = 0; rounds < 64; rounds++) {
		uint32_t room = ipk_tcp_sndbuf_free(a->c);
		int w;
		if (a->pend_off == a->pend_len) {
			if (a->in_eof || room == 0)
				break;
			nc_fill(a, room);
			if (a->pend_len == 0)
				break;
		}
		w = ipk_tcp_write(ctx, a->c, a->pend + a->pend_off, a->pend_len - a->pend_off, now);
		if (w <= 0)
			break;
		/* hashing costs more than the stack: only when asked, and for --send-size
		 * after the stream (nc_sent_digest) */
		if (a->sha && !a->send_size)
			sha256_update(&a->sha_tx, a->pend + a->pend_off, (size_t)w);
		a->pend_off += (uint32_t)w;
		a->sent += (uint64_t)w;
		a->last_progress = nc_clock();
	}
	if (a->in_eof && a->pend_off == a->pend_len) {
		nc_cc_sample(a);
		a->fin_sent = 1;
		ipk_tcp_close(ctx, a->c, now);
	}
}

static int nc_accept(struct ipk_ctx *ctx, const struct ipk_tuple *t, void *opaque)
{
	struct nc_app *a = (struct nc_app *)ipk_node_app(opaque);
	(void)ctx;
	(void)t;
	return a->c == NULL; /* one stream only */
}

/* The same for a SYN over IPv6 (listeners take both families). */
static int nc_accept6(struct ipk_ctx *ctx, const struct ipk_atuple *t, void *opaque)
{
	struct nc_app *a = (struct nc_app *)ipk_node_app(opaque);
	(void)ctx;
	(void)t;
	return a->c == NULL;
}

static void *nc_accepted(struct ipk_ctx *ctx, struct ipk_conn *c, void *opaque)
{
	struct nc_app *a = (struct nc_app *)ipk_node_app(opaque);
	if (a->c) {
		ipk_tcp_abort(ctx, c, ipk_node_now(ipk_node_from(opaque)));
		return NULL;
	}
	a->c = c;
	a->established = 1;
	nc_cc_sample(a);
	ipk_tcp_unlisten(ctx, a->listen_port_be); /* one stream: nobody else gets in */
	return a;
}

static void nc_connected(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *opaque)
{
	struct nc_app *a = (struct nc_app *)ipk_node_app(opaque);
	(void)ctx;
	(void)c;
	(void)user;
	a->established = 1;
	nc_cc_sample(a);
}

static int nc_write_all(const uint8_t *p, uint32_t len)
{
	while (len > 0) {
		ssize_t w = write(1, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		len -= (uint32_t)w;
	}
	return 0;
}

static void nc_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                       uint32_t off, uint32_t len, void *opaque)
{
	struct nc_app *a = (struct nc_app *)ipk_node_app(opaque);
	const uint8_t *p;
	(void)user;
	if (c != a->c)
		return;
	if (!pkt) {
		nc_cc_sample(a);
		return; /* peer finished; tcp_closed follows once we finish too */
	}
	p = ipk_pkt_mtod((struct ipk_pkt *)pkt) + off;
	if (!a->no_out && nc_write_all(p, len) < 0)
		a->no_out = 1; /* stdout gone: keep the stream and the digest going */
	if (a->sha)
		sha256_update(&a->sha_rx, p, len);
	a->received += len;
	a->last_progress = nc_clock();
	ipk_tcp_recved(ctx, c, len, ipk_node_now(ipk_node_from(opaque)));
}

static void nc_closed(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
                      enum ipk_close_reason why, void *opaque)
{
	struct nc_app *a = (struct nc_app *)ipk_node_app(opaque);
	(void)ctx;
	(void)user;
	if (c != a->c)
		return;
	a->closed = 1;
	a->why = why;
}

static const struct ipk_ops nc_events = {
	.tcp_accept = nc_accept,
	.tcp_accept6 = nc_accept6,
	.tcp_accepted = nc_accepted,
	.tcp_connected = nc_connected,
	.tcp_payload = nc_payload,
	.tcp_closed = nc_closed,
};

/* IPv6: wait (bounded, 5 s) until DAD gave us a global address to connect from
 * (ipk_tcp_connect_addr says IPK_EHOSTUNREACH before). */
static void nc_wait_addr6(struct ipk_node *n)
{
	uint8_t addrs[4][16];
	uint64_t end = ipk_node_now(n) + 5000000000ull;

	while (ipk_ip6_addrs(ipk_node_ctx(n), addrs, 4) < 2 && ipk_node_now(n) < end)
		ipk_node_poll(n, 1);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: ipkit-nc --io SPEC --ip A.B.C.D/N [options] HOST PORT\n"
	           "       ipkit-nc --io SPEC --ip A.B.C.D/N [options] -l PORT\n"
	           "One TCP stream between stdin/stdout and a peer. HOST is A.B.C.D, or an\n"
	           "IPv6 address with --ip6 (a listener takes both families).\n\n"
	           "  -l PORT          listen and accept one connection\n"
	           "  --send-size N    send N bytes of a fixed pattern instead of stdin (k/M/G)\n"
	           "  --no-output      do not write received bytes to stdout\n"
	           "  --sha256         print SHA-256 of sent and received bytes on stderr\n"
	           "  --stats          print TCP loss-recovery counters on stderr at the end\n"
	           "  --timeout S      give up after S seconds without progress (default 30)\n"
	           "  --cc ALGO        congestion control: cubic or newreno (the core's default)\n"
	           "  --sndbuf BYTES   send buffer per connection (k/M suffix; core default 256k)\n"
	           "  --sndbuf-max B   let autotuning grow it up to B (0: fixed, the core's\n"
	           "                   default; Linux's ceiling is 4M)\n"
	           "  --rcvbuf BYTES   receive window ceiling (k/M suffix; core default 256k)\n"
	           "  --trace MS       every MS ms print cwnd, inflight, windows, send buffer\n"
	           "                   room and the node's polls/sleeps on stderr\n%s",
	        app_common_help);
}

static const char *nc_reason(enum ipk_close_reason why)
{
	static const char *const names[] = {"normal", "reset by peer", "refused", "timed out",
	                                    "aborted", "unreachable"};
	return (unsigned)why < 6 ? names[why] : "?";
}

/* --trace: one line per interval on stderr, to tell a sender limited by its window
 * (inflight near cwnd or snd_wnd), by its send buffer (sndbuf_free 0 with inflight
 * below cwnd) or by CPU/wake-ups (the node's sleeps and polls):
 *   trace T_US cwnd=B inflight=B snd_wnd=B rcv_wnd=B sndbuf_free=B srtt_us=N sent=B
 *         received=B polls=N sleeps=N rx_frames=N tx_frames=N */
static void nc_trace(struct ipk_node *n, struct nc_app *a, uint64_t t0)
{
	struct ipk_tcp_info ti;
	struct ipk_node_stats st;
	uint64_t now = nc_clock();
	if (now < a->trace_next)
		return;
	a->trace_next = now + a->trace_ns;
	memset(&ti, 0, sizeof(ti));
	if (a->c)
		(void)ipk_tcp_info(a->c, &ti);
	ipk_node_stats(n, &st);
	fprintf(stderr, "trace %llu cwnd=%u inflight=%u snd_wnd=%u rcv_wnd=%u sndbuf_free=%u "
	        "srtt_us=%llu sent=%llu received=%llu polls=%llu sleeps=%llu rx_frames=%llu "
	        "tx_frames=%llu\n", (unsigned long long)((now - t0) / 1000u), ti.cwnd, ti.inflight,
	        ti.snd_wnd, ti.rcv_wnd, a->c && a->established ? ipk_tcp_sndbuf_free(a->c) : 0,
	        (unsigned long long)(ti.srtt_ns / 1000u), (unsigned long long)a->sent,
	        (unsigned long long)a->received, (unsigned long long)st.polls,
	        (unsigned long long)st.sleeps, (unsigned long long)st.rx_frames,
	        (unsigned long long)st.tx_frames);
}

static int nc_loop(struct ipk_node *n, struct nc_app *a, volatile int *stop, uint64_t timeout_ns)
{
	uint64_t t0 = nc_clock();
	a->last_progress = t0;
	while (!*stop && !a->closed) {
		nc_pump(n, a);
		if (a->trace_ns)
			nc_trace(n, a, t0);
		/* with stdin idle we cannot sleep on it through the node: nap briefly */
		ipk_node_poll(n, a->in_idle ? 1 : 100);
		if (nc_clock() - a->last_progress > timeout_ns) {
			fprintf(stderr, "ipkit-nc: no progress for %llu s, giving up\n",
			        (unsigned long long)(timeout_ns / 1000000000ull));
			return APP_EXIT_FAIL;
		}
	}
	if (!a->closed)
		return APP_EXIT_FAIL;
	if (a->why != IPK_CLOSE_NORMAL) {
		fprintf(stderr, "ipkit-nc: connection ended: %s\n", nc_reason(a->why));
		return APP_EXIT_FAIL;
	}
	return APP_EXIT_OK;
}

/* The --send-size stream's digest, computed once the stream is over from the same
 * generator that fed it: nc_fill makes every chunk at position `sent` and nc_pump
 * writes chunks whole and in order, so bytes 0..sent of the pattern are what was
 * written. Hashing them inside the loop cost a quarter of a sender's CPU (SHA-NI; over
 * half with plain C) and competed with the transfer it measures; the relay tests'
 * Linux sender likewise hashes its file outside the transfer. The receiver's digest of
 * what arrived is still compared with this one end to end. */
static void nc_sent_digest(struct nc_app *a)
{
	uint64_t pos;
	for (pos = 0; pos < a->sent; pos += NC_CHUNK) {
		uint32_t n = a->sent - pos < NC_CHUNK ? (uint32_t)(a->sent - pos) : NC_CHUNK;
		nc_pattern(pos, a->pend, n);
		sha256_update(&a->sha_tx, a->pend, n);
	}
}

/* One parseable line, so tests can check that loss really made TCP recover. */
static void nc_stats(const struct ipk_counters *c)
{
	fprintf(stderr, "tcp_stats retransmits=%llu rto=%llu fast_retransmits=%llu "
	        "sack_recoveries=%llu rto_episodes=%llu tlp_probes=%llu ooo_segs=%llu "
	        "dup_segs=%llu dsack_rx=%llu dsack_tx=%llu spurious_rtx=%llu reordering_seen=%llu "
	        "dsack_undo=%llu tlp_new_data=%llu tlp_recovery=%llu rto_undo=%llu frto_undo=%llu "
	        "sndbuf_grow=%llu\n",
	        (unsigned long long)c->tcp_retransmits, (unsigned long long)c->tcp_rto,
	        (unsigned long long)c->tcp_fast_retransmits,
	        (unsigned long long)c->tcp_sack_recovery_episodes,
	        (unsigned long long)c->tcp_rto_episodes, (unsigned long long)c->tcp_tlp_probes,
	        (unsigned long long)c->tcp_ooo_segs, (unsigned long long)c->tcp_dup_segs,
	        (unsigned long long)c->tcp_dsack_rx, (unsigned long long)c->tcp_dsack_tx,
	        (unsigned long long)c->tcp_spurious_rtx, (unsigned long long)c->tcp_reordering_seen,
	        (unsigned long long)c->tcp_dsack_undo, (unsigned long long)c->tcp_tlp_new_data,
	        (unsigned long long)c->tcp_tlp_recovery, (unsigned long long)c->tcp_rto_undo,
	        (unsigned long long)c->tcp_frto_undo, (unsigned long long)c->tcp_sndbuf_grow);
}

/* Where the process's time went (issue 16: a sender through the relay shares 2 CPUs
 * with the relay and the receiver, so its CPU and wake-ups are what it costs them):
 *   loop polls=N sleeps=N rx_frames=N tx_frames=N user_us=N sys_us=N vcsw=N ivcsw=N
 * polls/sleeps/frames from the node, the rest getrusage of the whole process (the
 * --sha256 digest of a --send-size stream, made after the stream, included). */
static unsigned long long nc_us(const struct timeval *tv)
{
	return (unsigned long long)tv->tv_sec * 1000000ull + (unsigned long long)tv->tv_usec;
}

static void nc_loop_stats(struct ipk_node *n)
{
	struct ipk_node_stats st;
	struct rusage ru;
	ipk_node_stats(n, &st);
	memset(&ru, 0, sizeof(ru));
	(void)getrusage(RUSAGE_SELF, &ru);
	fprintf(stderr, "loop polls=%llu sleeps=%llu rx_frames=%llu tx_frames=%llu user_us=%llu "
	        "sys_us=%llu vcsw=%llu ivcsw=%llu\n", (unsigned long long)st.polls,
	        (unsigned long long)st.sleeps, (unsigned long long)st.rx_frames,
	        (unsigned long long)st.tx_frames, nc_us(&ru.ru_utime), nc_us(&ru.ru_stime),
	        (unsigned long long)ru.ru_nvcsw, (unsigned long long)ru.ru_nivcsw);
}

int main(int argc, char **argv)
{
	static struct nc_app a;
	struct app_opts o;
	struct ipk_node *n;
	const char *host = NULL, *port = NULL;
	uint32_t peer_be = 0;
	struct ipk_addr peer6;
	uint64_t timeout_s = 30;
	long portnum;
	int i, rc;

	app_opts_default(&o);
	a.cc_first = a.cc_last = -1;
	for (i = 1; i < argc; i++) {
		const char *v;
		int r;
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return APP_EXIT_OK;
		}
		if ((r = app_opt(&o, argc, argv, &i)) != 0) {
			if (r < 0)
				return APP_EXIT_USAGE;
			continue;
		}
		if ((r = app_arg("-l", argc, argv, &i, &v)) != 0) {
			if (r < 0)
				return APP_EXIT_USAGE;
			a.listen = 1;
			port = v;
		} else if ((r = app_arg("--send-size", argc, argv, &i, &v)) != 0) {
			if (r < 0 || app_parse_size(v, &a.send_size) < 0 || a.send_size == 0) {
				fprintf(stderr, "ipkit-nc: bad --send-size\n");
				return APP_EXIT_USAGE;
			}
		} else if ((r = app_arg("--timeout", argc, argv, &i, &v)) != 0) {
			if (r < 0 || app_parse_size(v, &timeout_s) < 0 || timeout_s == 0) {
				fprintf(stderr, "ipkit-nc: bad --timeout\n");
				return APP_EXIT_USAGE;
			}
		} else if ((r = app_arg("--cc", argc, argv, &i, &v)) != 0) {
			if (r < 0)
				return APP_EXIT_USAGE; /* app_arg said why */
			nc_core.cc = nc_cc_parse(v);
			if (nc_core.cc < 0) {
				fprintf(stderr, "ipkit-nc: bad --cc '%s' (cubic or newreno)\n", v);
				return APP_EXIT_USAGE;
			}
		} else if ((r = app_arg("--sndbuf", argc, argv, &i, &v)) != 0) {
			if (r < 0)
				return APP_EXIT_USAGE;
			if (nc_buf_parse(v, &nc_core.sndbuf) < 0) {
				fprintf(stderr, "ipkit-nc: bad --sndbuf (1k to 1G bytes)\n");
				return APP_EXIT_USAGE;
			}
		} else if ((r = app_arg("--sndbuf-max", argc, argv, &i, &v)) != 0) {
			uint64_t m = 0;

			if (r < 0)
				return APP_EXIT_USAGE;
			if (strcmp(v, "0") != 0 && nc_buf_parse(v, &m) < 0) {
				fprintf(stderr, "ipkit-nc: bad --sndbuf-max (0, or 1k to 1G bytes)\n");
				return APP_EXIT_USAGE;
			}
			nc_core.sndbuf_max = (int64_t)m;
		} else if ((r = app_arg("--rcvbuf", argc, argv, &i, &v)) != 0) {
			if (r < 0)
				return APP_EXIT_USAGE;
			if (nc_buf_parse(v, &nc_core.rcvbuf) < 0) {
				fprintf(stderr, "ipkit-nc: bad --rcvbuf (1k to 1G bytes)\n");
				return APP_EXIT_USAGE;
			}
		} else if ((r = app_arg("--trace", argc, argv, &i, &v)) != 0) {
			uint64_t ms;
			if (r < 0 || app_parse_size(v, &ms) < 0 || ms == 0 || ms > 60000) {
				fprintf(stderr, "ipkit-nc: bad --trace (1..60000 ms)\n");
				return APP_EXIT_USAGE;
			}
			a.trace_ns = ms * 1000000ull;
		} else if (strcmp(argv[i], "--sha256") == 0) {
			a.sha = 1;
		} else if (strcmp(argv[i], "--stats") == 0) {
			a.stats = 1;
		} else if (strcmp(argv[i], "--no-output") == 0) {
			a.no_out = 1;
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "ipkit-nc: unknown option '%s' (see --help)\n", argv[i]);
			return APP_EXIT_USAGE;
		} else if (!a.listen && !host) {
			host = argv[i];
		} else if (!port) {
			port = argv[i];
		} else {
			fprintf(stderr, "ipkit-nc: too many arguments (see --help)\n");
			return APP_EXIT_USAGE;
		}
	}
	if (!port || (!a.listen && !host)) {
		fprintf(stderr, "ipkit-nc: give HOST PORT or -l PORT (see --help)\n");
		return APP_EXIT_USAGE;
	}
	portnum = strtol(port, NULL, 10);
	memset(&peer6, 0, sizeof(peer6));
	if (host && strchr(host, ':')) {
		peer6.family = IPK_AF_INET6;
		if (inet_pton(AF_INET6, host, peer6.a) != 1 || !o.ip6) {
			fprintf(stderr, "ipkit-nc: an IPv6 HOST needs --ip6 (see --help)\n");
			return APP_EXIT_USAGE;
		}
	}
	if (portnum <= 0 || portnum > 65535 ||
	    (host && !peer6.family && app_parse_ip4(host, &peer_be, NULL) < 0)) {
		fprintf(stderr, "ipkit-nc: bad host or port (HOST is A.B.C.D or IPv6)\n");
		return APP_EXIT_USAGE;
	}
	sha256_init(&a.sha_tx);
	sha256_init(&a.sha_rx);
	if (!a.send_size)
		fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
	{
		volatile int *stop = app_stop_flag();
		n = app_node(&o, &nc_events, &a, nc_tweak);
		a.listen_port_be = ipk_htons((uint16_t)portnum);
		if (a.listen) {
			rc = ipk_tcp_listen(ipk_node_ctx(n), a.listen_port_be, 1);
		} else if (peer6.family) {
			nc_wait_addr6(n);
			rc = ipk_tcp_connect_addr(ipk_node_ctx(n), &peer6, ipk_htons((uint16_t)portnum),
			                          0, &a, &a.c, ipk_node_now(n));
		} else {
			rc = ipk_tcp_connect(ipk_node_ctx(n), peer_be, ipk_htons((uint16_t)portnum), 0,
			                     &a, &a.c, ipk_node_now(n));
		}
		if (rc < 0) {
			fprintf(stderr, "ipkit-nc: cannot %s: %s\n", a.listen ? "listen" : "connect",
			        ipk_strerror(rc));
			ipk_node_destroy(n);
			return APP_EXIT_SETUP;
		}
		rc = nc_loop(n, &a, stop, timeout_s * 1000000000ull);
	}
	if (a.sha) {
		char hex[65];
		if (a.send_size)
			nc_sent_digest(&a);
		sha256_hex(&a.sha_tx, hex);
		fprintf(stderr, "sent %llu sha256 %s\n", (unsigned long long)a.sent, hex);
		sha256_hex(&a.sha_rx, hex);
		fprintf(stderr, "received %llu sha256 %s\n", (unsigned long long)a.received, hex);
	}
	if (a.stats) {
		nc_stats(ipk_counters(ipk_node_ctx(n)));
		nc_loop_stats(n);
		fprintf(stderr, "cc %s %s\n", nc_cc_name(a.cc_first), nc_cc_name(a.cc_last));
	}
	if (o.verbose)
		app_report(n, "ipkit-nc");
	ipk_node_destroy(n);
	return rc;
}
