/*
 * svc_tool: a libipkit-client program for the svc tests (tests/svc/test_svc.py,
 * tests/interop/test_ipkitd.py). One mode per run; exit 0 when the mode's checks
 * pass, 1 when they fail, 2 on bad usage, 3 when ipkitd cannot be reached.
 *
 *   svc_tool [--socket PATH] nop N                 N NOP round trips; prints mean ns
 *   svc_tool [--socket PATH] connect IP PORT SIZE  send SIZE pattern bytes, half-close,
 *                                                  receive to the end; digests on stdout
 *   svc_tool [--socket PATH] listen PORT SIZE      accept one connection, same transfer
 *   svc_tool [--socket PATH] udp IP PORT N         N datagrams to an echo server, each
 *                                                  answer checked
 *   svc_tool [--socket PATH] hostile [ID]          bad requests: each must get its
 *                                                  error completion, then a NOP must work
 *                                                  (ID: another app's socket to try closing)
 *   svc_tool [--socket PATH] chaos SEED ROUNDS PEER_IP  random writes into its own
 *                                                  rings between NOPs that must work
 *                                                  (svc_chaos.h)
 *   svc_tool [--socket PATH] closex PORT N         N sockets (TCP listeners and bound UDP
 *                                                  on PORT..PORT+N-1) closed, closed again
 *                                                  (-EBADF), their ports bound again
 *   svc_tool [--socket PATH] lhold PORT GOFILE     listen on PORT, never accept; close
 *                                                  the listener once GOFILE exists (30 s),
 *                                                  then stay 10 s
 *   svc_tool [--socket PATH] abortpair IP PORT N   N loop pairs closed, abort or not
 *   svc_tool [--socket PATH] acceptn PORT N        N connections held open at once,
 *                                                   then each echoes its 4 bytes
 *   svc_tool [--socket PATH] hold SECONDS          one socket, prints "id N", sleeps
 *   svc_tool [--socket PATH] nopbench N spin|sleep NOP round trips, one at a time:
 *                                                  spinning on the CQ or sleeping in
 *                                                  ipk_svc_wait_cqe; mean and percentiles
 *   svc_tool [--socket PATH] prio NFLOOD N         N NOPs on a level-0 socket idle and
 *                                                  under a flood of NFLOOD level-2 sockets,
 *                                                  then a level-2 probe under the flood
 *   svc_tool [--socket PATH] prio-order DAEMON_PID the order levels are served in,
 *                                                  counted in entries (ipkitd stopped
 *                                                  while the rings fill)
 *   svc_tool [--socket PATH] many N                N sockets, a NOP on each at once,
 *                                                  every completion checked, all closed
 *   svc_tool [--socket PATH] callback N K          callback mode: N sockets, K NOPs each,
 *                                                  each answered from the callback
 *   svc_tool [--socket PATH] scale N K             N sockets, one NOP in flight each, K
 *                                                  round trips each: latency vs sockets
 *   svc_tool [--socket PATH] openloop N RATE SECS  RATE NOPs/s in all over N sockets
 *                                                  on a schedule (open loop): latency
 *                                                  from the scheduled time
 *   svc_tool [--socket PATH] herd K                a thread asleep on one socket, K NOPs
 *                                                  on another: the daemon's wake-ups
 *   svc_tool [--socket PATH] threads N MS          N threads, a socket each, one NOP in
 *                                                  flight each, sleeping: the thesis's
 *                                                  Table 6.4 shape
 *   svc_tool [--socket PATH] rr IP PORT CONNS SECS [sleep]  1-byte request/response
 *                                                  against an echo server: requests/s
 *                                                  and latency (spinning, or sleeping)
 *   svc_tool [--socket PATH] wake                  whole-application wait: no lost wake-up
 *   svc_tool [--socket PATH] flood NSOCK SECS      level-2 NOP flood; prints NOPs done
 *   svc_tool --socket PATH fair DAEMON_PID         a level's share taken in turns by two
 *                                                  applications (counted)
 *   svc_tool [--socket PATH] victim N SECS         N level-2 NOPs one at a time within SECS
 *   svc_tool [--socket PATH] scope6 OUR_LL PEER_LL IDX [PORT]  link-local zones
 *                                                  (scope_id): taken, refused, reported
 *   svc_tool --socket PATH adoptfork IP PORT N K   K forked children in turn ADOPT the
 *                                                  parent's N connections
 *   svc_tool futex-floor N                         two processes ping-pong through one
 *                                                  shared futex: the sleeping floor
 * Transfers print "sent BYTES sha256 HEX" and "received BYTES sha256 HEX".
 */
#include <ipkit/svc.h>
#include "proto.h"
#include "sha256.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 65536u
#define DEPTH 8u
#define T_SEND 1ull
#define T_RECV 2ull
#define T_SHUT 3ull
#define WAIT_NS 30000000000ll

static int fails;
/* SVC_TOOL_PRIO=L: connect, listen and rr sockets ask for level L - 1 (unset or 0: the
 * application's default level) */
static unsigned g_prio;

static int tool_socket(struct ipk_svc *svc, uint32_t sq, uint32_t cq, struct ipk_svc_sock **so)
{
	if (g_prio == 0)
		return ipk_svc_socket(svc, IPK_SVC_TCP, sq, cq, so);
	return ipk_svc_socket_prio(svc, IPK_SVC_TCP, sq, cq, g_prio - 1, so);
}
#define CHECK(cond, ...)                                   \
	do {                                                   \
		if (!(cond)) {                                     \
			fprintf(stderr, "svc_tool: FAIL: " __VA_ARGS__); \
			fputc('\n', stderr);                           \
			fails++;                                       \
		}                                                  \
	} while (0)

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void pattern(uint64_t pos, uint8_t *p, uint32_t n)
{
	uint32_t i;
	for (i = 0; i < n; i++) {
		uint64_t x = pos + i;
		p[i] = (uint8_t)(x ^ (x >> 8) ^ (x >> 16) ^ 0x5a);
	}
}

/* Take one completion (bounded wait); 0 or -errno. */
static int take(struct ipk_svc_sock *so, struct ipk_svc_cqe *out)
{
	struct ipk_svc_cqe *c;
	int rc = ipk_svc_wait_cqe(so, &c, WAIT_NS);
	if (rc < 0)
		return rc;
	*out = *c;
	ipk_svc_cqe_seen(so, c);
	return 0;
}

/* One op, submitted and awaited. Returns cqe.res or a wait error. */
static int one(struct ipk_svc_sock *so, struct ipk_svc_sqe *sqe_init, struct ipk_svc_cqe *out)
{
	struct ipk_svc_sqe *e = ipk_svc_get_sqe(so);
	struct ipk_svc_cqe c;
	int rc;
	if (!e)
		return -EBUSY;
	*e = *sqe_init;
	ipk_svc_submit(so);
	rc = take(so, &c);
	if (out)
		*out = c;
	return rc < 0 ? rc : c.res;
}

/* Bind l to 0.0.0.0:port and listen (backlog): 0 or the failing step's res. */
static int listen_any(struct ipk_svc_sock *l, uint16_t port, uint32_t backlog)
{
	struct ipk_svc_sqe e;
	struct ipk_svc_addr a;
	int rc;
	memset(&e, 0, sizeof e);
	ipk_svc_addr_ip4(&a, 0, port);
	ipk_svc_prep_bind(&e, &a);
	rc = one(l, &e, NULL);
	memset(&e, 0, sizeof e);
	ipk_svc_prep_listen(&e, backlog);
	if (rc == 0)
		rc = one(l, &e, NULL);
	return rc;
}

/* ------------------------------------------------------------ transfer */

/* SVC_TOOL_SCRIBBLE=1: connect / listen transfers overwrite every send buffer
 * right after submitting it (a hostile app under zero-copy SEND). */
static int g_scribble;

struct xfer {
	struct ipk_svc *svc;
	struct ipk_svc_sock *so;
	uint64_t size, queued, sent, received;
	uint8_t *tx[DEPTH], *rx[DEPTH];
	uint32_t tx_busy, rx_busy, rx_next;
	int shut, eof, err;
	struct sha256 sha_tx, sha_rx;
};

static void x_send_more(struct xfer *x)
{
	uint32_t i;
	for (i = 0; i < DEPTH && x->queued < x->size; i++) {
		struct ipk_svc_sqe *e;
		uint32_t n;
		if (x->tx_busy & (1u << i))
			continue;
		e = ipk_svc_get_sqe(x->so);
		if (!e)
			return;
		n = x->size - x->queued < CHUNK ? (uint32_t)(x->size - x->queued) : CHUNK;
		pattern(x->queued, x->tx[i], n);
		sha256_update(&x->sha_tx, x->tx[i], n);
		ipk_svc_prep_send(x->so, e, x->tx[i], n);
		ipk_svc_sqe_set_data(e, T_SEND << 32 | i);
		x->queued += n;
		x->tx_busy |= 1u << i;
	}
	if (x->queued == x->size && x->tx_busy == 0 && !x->shut) {
		struct ipk_svc_sqe *e = ipk_svc_get_sqe(x->so);
		if (e) {
			ipk_svc_prep_shutdown(e);
			ipk_svc_sqe_set_data(e, T_SHUT << 32);
			x->shut = 1;
		}
	}
}

/* Receives complete in submission order (the daemon keeps them FIFO), so the
 * buffers are reused round-robin and the digest stays in stream order. */
static void x_recv_more(struct xfer *x)
{
	while (!x->eof && x->rx_busy < DEPTH) {
		struct ipk_svc_sqe *e = ipk_svc_get_sqe(x->so);
		uint32_t i = (x->rx_next + x->rx_busy) % DEPTH;
		if (!e)
			return;
		ipk_svc_prep_recv(x->so, e, x->rx[i], CHUNK);
		ipk_svc_sqe_set_data(e, T_RECV << 32 | i);
		x->rx_busy++;
	}
}

static void x_complete(struct xfer *x, const struct ipk_svc_cqe *c)
{
	uint64_t kind = c->user_data >> 32;
	uint32_t i = (uint32_t)c->user_data;
	if (c->res < 0 && !x->err) {
		x->err = c->res;
		fprintf(stderr, "svc_tool: op %llu failed: %s\n", (unsigned long long)kind,
		        strerror(-c->res));
	}
	if (kind == T_SEND) {
		x->tx_busy &= ~(1u << i);
		if (c->res > 0)
			x->sent += (uint64_t)c->res;
	} else if (kind == T_RECV) {
		x->rx_busy--;
		x->rx_next = (x->rx_next + 1) % DEPTH;
		if (c->res > 0) {
			sha256_update(&x->sha_rx, x->rx[i], (size_t)c->res);
			x->received += (uint64_t)c->res;
		} else {
			x->eof = 1;
		}
	}
}

static int x_run(struct xfer *x)
{
	char h1[65], h2[65];
	uint32_t i;
	for (i = 0; i < DEPTH; i++) {
		x->tx[i] = (uint8_t *)ipk_svc_buf_alloc(x->svc, CHUNK);
		x->rx[i] = (uint8_t *)ipk_svc_buf_alloc(x->svc, CHUNK);
		if (!x->tx[i] || !x->rx[i])
			return -ENOMEM;
	}
	sha256_init(&x->sha_tx);
	sha256_init(&x->sha_rx);
	while (!x->err && !(x->eof && x->shut && x->tx_busy == 0)) {
		struct ipk_svc_cqe c;
		int rc;
		x_send_more(x);
		x_recv_more(x);
		ipk_svc_submit(x->so);
		if (g_scribble) /* hostile: rewrite what was handed over (issue 17, zero-copy) */
			for (i = 0; i < DEPTH; i++)
				if (x->tx_busy & (1u << i))
					memset(x->tx[i], 0xa5, CHUNK);
		rc = take(x->so, &c);
		if (rc < 0) {
			fprintf(stderr, "svc_tool: waiting: %s\n", strerror(-rc));
			return rc;
		}
		x_complete(x, &c);
	}
	sha256_hex(&x->sha_tx, h1);
	sha256_hex(&x->sha_rx, h2);
	printf("sent %llu sha256 %s\nreceived %llu sha256 %s\n", (unsigned long long)x->sent, h1,
	       (unsigned long long)x->received, h2);
	fflush(stdout);
	return x->err;
}

/* A.B.C.D or an IPv6 address (issue 17: ipkitd --ip6) */
static int parse_addr(const char *ip, const char *port, struct ipk_svc_addr *a)
{
	struct in_addr in;
	uint8_t in6[16];
	int p = atoi(port);
	if (p <= 0 || p > 65535)
		return -1;
	if (inet_pton(AF_INET, ip, &in) == 1)
		ipk_svc_addr_ip4(a, in.s_addr, (uint16_t)p);
	else if (inet_pton(AF_INET6, ip, in6) == 1)
		ipk_svc_addr_ip6(a, in6, (uint16_t)p);
	else
		return -1;
	return 0;
}

/* The wildcard a listener or UDP socket binds: 0.0.0.0, or with SVC_TOOL_FAMILY=6
 * the AF_INET6 :: (both families; SVC_TOOL_V6ONLY: IPv6 only). */
static void any_addr(struct ipk_svc_addr *a, uint16_t port)
{
	static const uint8_t any6[16];
	const char *f = getenv("SVC_TOOL_FAMILY");
	if (f && !strcmp(f, "6"))
		ipk_svc_addr_ip6(a, any6, port);
	else
		ipk_svc_addr_ip4(a, 0, port);
}

static void any_flags(struct ipk_svc_sqe *e)
{
	if (getenv("SVC_TOOL_V6ONLY"))
		e->flags |= IPK_SVC_SQE_F_V6ONLY;
	if (getenv("SVC_TOOL_REUSE")) /* share the port (listen, udpecho) */
		e->flags |= IPK_SVC_SQE_F_REUSEPORT;
}

/* "peer FAMILY ADDR PORT [scope N]" on stderr: what an accept or recvfrom
 * reported (the zone of a link-local address when ipkitd gave one) */
static void print_addr(const char *what, const struct ipk_svc_addr *a)
{
	char buf[64];
	uint8_t *pb = (uint8_t *)&a->port_be;
	inet_ntop(a->family == IPK_SVC_AF_INET6 ? AF_INET6 : AF_INET, a->addr, buf, sizeof buf);
	fprintf(stderr, "svc_tool: %s %u %s %u", what, a->family, buf, pb[0] << 8 | pb[1]);
	if (a->scope_id)
		fprintf(stderr, " scope %u", a->scope_id);
	fputc('\n', stderr);
}

static void print_peer(const struct ipk_svc_addr *a) { print_addr("peer", a); }

static int mode_connect(struct ipk_svc *svc, char **av)
{
	struct xfer x;
	struct ipk_svc_sqe e;
	struct ipk_svc_addr peer;
	int rc;
	memset(&x, 0, sizeof x);
	if (parse_addr(av[0], av[1], &peer) < 0)
		return 2;
	x.svc = svc;
	x.size = strtoull(av[2], NULL, 0);
	if (tool_socket(svc, 64, 128, &x.so) < 0)
		return 1;
	if (getenv("SVC_TOOL_LPORT")) { /* connect from this local port (bind first;
	                                   * SVC_TOOL_FAMILY=6: to ::) */
		struct ipk_svc_addr me;
		const char *f = getenv("SVC_TOOL_FAMILY");
		if (parse_addr(f && !strcmp(f, "6") ? "::" : "0.0.0.0", getenv("SVC_TOOL_LPORT"),
		               &me) < 0)
			return 2;
		memset(&e, 0, sizeof e);
		ipk_svc_prep_bind(&e, &me);
		rc = one(x.so, &e, NULL);
		if (rc < 0) {
			fprintf(stderr, "svc_tool: bind: %s\n", strerror(-rc));
			return 1;
		}
	}
	memset(&e, 0, sizeof e);
	ipk_svc_prep_connect(&e, &peer);
	rc = one(x.so, &e, NULL);
	if (rc < 0) {
		fprintf(stderr, "svc_tool: connect: %s\n", strerror(-rc));
		return 1;
	}
	rc = x_run(&x);
	ipk_svc_close(x.so);
	{ /* what the daemon let this app's low levels hold in its stack */
		struct ipk_svc_stats st;
		ipk_svc_stats(svc, &st);
		printf("low_held_max %llu\n", (unsigned long long)st.low_held_max);
		printf("low_rwnd_max %llu\n", (unsigned long long)st.low_rwnd_max);
		printf("tx_zc %llu tx_copied %llu sends_zc %llu sends_copied %llu\n",
		       (unsigned long long)st.tx_zc, (unsigned long long)st.tx_copied,
		       (unsigned long long)st.sends_zc, (unsigned long long)st.sends_copied);
	}
	return rc < 0 ? 1 : 0;
}

static int mode_listen(struct ipk_svc *svc, char **av)
{
	struct xfer x;
	struct ipk_svc_sqe e;
	struct ipk_svc_cqe c;
	struct ipk_svc_sock *l;
	int rc;
	memset(&x, 0, sizeof x);
	x.svc = svc;
	x.size = strtoull(av[1], NULL, 0);
	if (tool_socket(svc, 16, 32, &l) < 0) /* SVC_TOOL_PRIO applies */
		return 1;
	memset(&e, 0, sizeof e);
	{
		struct ipk_svc_addr a;
		any_addr(&a, (uint16_t)atoi(av[0]));
		ipk_svc_prep_bind(&e, &a);
		any_flags(&e);
	}
	rc = one(l, &e, NULL);
	memset(&e, 0, sizeof e);
	ipk_svc_prep_listen(&e, 16);
	if (rc == 0)
		rc = one(l, &e, NULL);
	if (rc == 0) { /* a client of the same daemon may connect from now on */
		printf("listening\n");
		fflush(stdout);
	}
	memset(&e, 0, sizeof e);
	ipk_svc_prep_accept(&e, 64, 128);
	if (rc == 0)
		rc = one(l, &e, &c);
	if (rc == 0)
		rc = ipk_svc_accepted(svc, &c, &x.so);
	if (rc < 0) {
		fprintf(stderr, "svc_tool: listen/accept: %s\n", strerror(-rc));
		return 1;
	}
	fprintf(stderr, "svc_tool: accepted\n");
	print_peer(&c.addr);
	{
		/* the accepted socket's own address (the listener's is 0.0.0.0 or
		 * ::); the listener has none to give */
		struct ipk_svc_addr me;
		int lr = ipk_svc_sock_local(x.so, &me);
		if (lr == 0)
			print_addr("local", &me);
		else
			fprintf(stderr, "svc_tool: local %d\n", lr);
		fprintf(stderr, "svc_tool: listener local %d\n", ipk_svc_sock_local(l, &me));
	}
	rc = x_run(&x);
	ipk_svc_close(x.so);
	ipk_svc_close(l);
	return rc < 0 ? 1 : 0;
}

/* ------------------------------------------------------------ udp */

static int take_t(struct ipk_svc_sock *so, struct ipk_svc_cqe *out, int64_t ns)
{
	struct ipk_svc_cqe *c;
	int rc = ipk_svc_wait_cqe(so, &c, ns);
	if (rc < 0)
		return rc;
	*out = *c;
	ipk_svc_cqe_seen(so, c);
	return 0;
}

/* One datagram, retried (the first may wait for ARP, any may be lost): 1 echoed. */
static int udp_one(struct ipk_svc_sock *so, const struct ipk_svc_addr *peer, uint8_t *out,
                   uint8_t *in, uint32_t len, int *pending)
{
	int tries;
	for (tries = 0; tries < 20; tries++) {
		struct ipk_svc_sqe *e;
		struct ipk_svc_cqe c;
		if (!*pending) {
			e = ipk_svc_get_sqe(so);
			ipk_svc_prep_recvfrom(so, e, in, 2048);
			ipk_svc_sqe_set_data(e, 2);
			*pending = 1;
		}
		e = ipk_svc_get_sqe(so);
		ipk_svc_prep_sendto(so, e, out, len, peer);
		ipk_svc_sqe_set_data(e, 1);
		ipk_svc_submit(so);
		while (take_t(so, &c, 300000000) == 0) {
			if (c.user_data != 2)
				continue; /* the sendto's own completion */
			*pending = 0;
			if (c.res == (int)len && !memcmp(in, out, len) &&
			    c.addr.port_be == peer->port_be && c.addr.family == peer->family &&
			    !memcmp(c.addr.addr, peer->addr,
			            peer->family == IPK_SVC_AF_INET6 ? 16 : 4))
				return 1;
			break; /* an echo of an earlier try: ask again */
		}
	}
	return 0;
}

static int mode_udp(struct ipk_svc *svc, char **av)
{
	struct ipk_svc_addr peer;
	struct ipk_svc_sock *so;
	uint8_t *out, *in;
	int n = atoi(av[2]), i, ok = 0, pending = 0;
	if (parse_addr(av[0], av[1], &peer) < 0 || n <= 0)
		return 2;
	if (ipk_svc_socket(svc, IPK_SVC_UDP, 16, 32, &so) < 0)
		return 1;
	out = (uint8_t *)ipk_svc_buf_alloc(svc, 1400);
	in = (uint8_t *)ipk_svc_buf_alloc(svc, 2048);
	for (i = 0; i < n; i++) {
		uint32_t len = 100 + (uint32_t)(i * 37 % 1200);
		pattern((uint64_t)i * 7919, out, len);
		ok += udp_one(so, &peer, out, in, len, &pending);
	}
	printf("udp %d/%d echoed\n", ok, n);
	ipk_svc_close(so);
	return ok == n ? 0 : 1;
}

/* UDP echo of n datagrams on port (another application is the client): each
 * datagram goes back to where it came from. Bounded: IDLE (default 200) waits of
 * 100 ms at most without a datagram. SVC_TOOL_REUSE=1 binds asking for reuse. */
static int mode_udpecho(struct ipk_svc *svc, char **av)
{
	struct ipk_svc_sock *so;
	struct ipk_svc_sqe e;
	struct ipk_svc_addr a;
	uint8_t *buf;
	int n = atoi(av[1]), done = 0, idle = 0, idle_max = av[2] ? atoi(av[2]) : 200;
	if (n <= 0 || ipk_svc_socket(svc, IPK_SVC_UDP, 16, 32, &so) < 0)
		return n <= 0 ? 2 : 1;
	buf = (uint8_t *)ipk_svc_buf_alloc(svc, 2048);
	memset(&e, 0, sizeof e);
	any_addr(&a, (uint16_t)atoi(av[0]));
	if (getenv("SVC_TOOL_REUSE"))
		ipk_svc_prep_bind_reuse(&e, &a);
	else
		ipk_svc_prep_bind(&e, &a);
	any_flags(&e);
	if (!buf || one(so, &e, NULL) != 0)
		return 1;
	printf("ready\n");
	fflush(stdout);
	while (done < n && idle < idle_max) {
		struct ipk_svc_sqe *q = ipk_svc_get_sqe(so);
		struct ipk_svc_cqe c;
		ipk_svc_prep_recvfrom(so, q, buf, 2048);
		ipk_svc_sqe_set_data(q, 2);
		ipk_svc_submit(so);
		while (take_t(so, &c, 100000000) < 0 && ++idle < idle_max)
			;
		if (idle >= idle_max || c.res < 0)
			break;
		q = ipk_svc_get_sqe(so);
		ipk_svc_prep_sendto(so, q, buf, (uint32_t)c.res, &c.addr);
		ipk_svc_sqe_set_data(q, 1);
		ipk_svc_submit(so);
		if (take_t(so, &c, 1000000000) < 0 || c.res < 0)
			break;
		done++;
		idle = 0;
	}
	printf("udpecho %d/%d\n", done, n);
	ipk_svc_close(so);
	return done == n ? 0 : 1;
}

/* Port sharing: bind PORT asking for reuse, listen, take connections until n came
 * or 3 s passed without one; print how many this listener got. */
static int mode_rlisten(struct ipk_svc *svc, char **av)
{
	struct ipk_svc_sock *l;
	struct ipk_svc_sqe e;
	struct ipk_svc_cqe c;
	struct ipk_svc_addr a;
	int n = atoi(av[1]), got = 0, rc;
	if (n <= 0 || ipk_svc_socket(svc, IPK_SVC_TCP, 16, 64, &l) < 0)
		return n <= 0 ? 2 : 1;
	memset(&e, 0, sizeof e);
	ipk_svc_addr_ip4(&a, 0, (uint16_t)atoi(av[0]));
	ipk_svc_prep_bind_reuse(&e, &a);
	rc = one(l, &e, NULL);
	memset(&e, 0, sizeof e);
	ipk_svc_prep_listen(&e, 64);
	if (rc == 0)
		rc = one(l, &e, NULL);
	if (rc < 0) {
		printf("rlisten bind/listen %d\n", rc);
		return 1;
	}
	printf("listening\n");
	fflush(stdout);
	memset(&e, 0, sizeof e);
	ipk_svc_prep_accept(&e, 8, 16);
	*ipk_svc_get_sqe(l) = e;
	ipk_svc_submit(l);
	while (got < n && take_t(l, &c, 3000000000) == 0 && c.res == 0) {
		struct ipk_svc_sock *w;
		if (ipk_svc_accepted(svc, &c, &w) == 0) {
			got++;
			ipk_svc_close(w);
		}
	}
	printf("rlisten got %d\n", got);
	ipk_svc_close(l);
	return 0;
}

/* n connections to ip:port one after the other, each closed once established. */
static int mode_connmany(struct ipk_svc *svc, char **av)
{
	struct ipk_svc_addr peer;
	int n = atoi(av[2]), i, ok = 0;
	if (parse_addr(av[0], av[1], &peer) < 0 || n <= 0)
		return 2;
	for (i = 0; i < n; i++) {
		struct ipk_svc_sock *so;
		struct ipk_svc_sqe e;
		if (ipk_svc_socket(svc, IPK_SVC_TCP, 8, 16, &so) < 0)
			return 1;
		memset(&e, 0, sizeof e);
		ipk_svc_prep_connect(&e, &peer);
		ok += one(so, &e, NULL) == 0;
		ipk_svc_close(so);
	}
	printf("connmany %d/%d\n", ok, n);
	return ok == n ? 0 : 1;
}

/* ------------------------------------------------------------ nop */

static int mode_nop(struct ipk_svc *svc, char **av)
{
	struct ipk_svc_sock *so;
	long n = atol(av[0]), i;
	uint64_t t0;
	if (n <= 0 || ipk_svc_socket(svc, IPK_SVC_TCP, 8, 16, &so) < 0)
		return n <= 0 ? 2 : 1;
	t0 = now_ns();
	for (i = 0; i < n; i++) {
		struct ipk_svc_sqe e;
		memset(&e, 0, sizeof e);
		ipk_svc_prep_nop(&e);
		e.user_data = (uint64_t)i;
		if (one(so, &e, NULL) != 0)
			return 1;
	}
	printf("nop %ld mean_ns %llu\n", n, (unsigned long long)((now_ns() - t0) / (uint64_t)n));
	ipk_svc_close(so);
	return 0;
}

/* Many sockets in one application: nothing caps them but configured memory. */
static int mode_many(struct ipk_svc *svc, char **av)
{
	long n = atol(av[0]), i, ok = 0;
	struct ipk_svc_sock **v = (struct ipk_svc_sock **)calloc((size_t)(n > 0 ? n : 1), sizeof *v);
	if (!v || n <= 0)
		return 2;
	for (i = 0; i < n; i++) {
		int rc = ipk_svc_socket(svc, i % 2 ? IPK_SVC_UDP : IPK_SVC_TCP, 8, 16, &v[i]);
		if (rc < 0) {
			fprintf(stderr, "svc_tool: socket %ld: %s\n", i, strerror(-rc));
			return 1;
		}
	}
	for (i = 0; i < n; i++) {
		struct ipk_svc_sqe *e = ipk_svc_get_sqe(v[i]);
		ipk_svc_prep_nop(e);
		ipk_svc_sqe_set_data(e, (uint64_t)i);
		ipk_svc_submit(v[i]);
	}
	for (i = 0; i < n; i++) {
		struct ipk_svc_cqe c;
		if (take(v[i], &c) == 0 && c.res == 0 && c.user_data == (uint64_t)i)
			ok++;
	}
	{
		/* with all n sockets open, 1,000 NOPs one at a time on one of them: the
		 * daemon's work (sockets looked at) follows the one that submits */
		struct ipk_svc_stats s0, s1;
		struct ipk_svc_sqe e;
		long k;
		ipk_svc_stats(svc, &s0);
		for (k = 0; k < 1000; k++) {
			memset(&e, 0, sizeof e);
			ipk_svc_prep_nop(&e);
			if (one(v[n / 2], &e, NULL) != 0)
				break;
		}
		ipk_svc_stats(svc, &s1);
		printf("many_visits %llu for %ld nops\n",
		       (unsigned long long)(s1.sock_visits - s0.sock_visits), k);
	}
	for (i = 0; i < n; i++)
		ipk_svc_close(v[i]);
	free(v);
	printf("many %ld/%ld\n", ok, n);
	return ok == n ? 0 : 1;
}

/* Callback mode: N sockets, each NOP answered by the library thread's callback with
 * the next NOP, K per socket; every socket must reach K, in its own order. */
struct cbstate {
	long k;
	long *count;
	struct ipk_svc_sock **v;
	long n;
	long total, bad;
};
static struct cbstate cbs;

static void on_cqe(struct ipk_svc_sock *so, const struct ipk_svc_cqe *c, void *arg)
{
	struct cbstate *st = (struct cbstate *)arg;
	long i = (long)(c->user_data >> 32), seq = (long)(uint32_t)c->user_data;
	if (i < 0 || i >= st->n || st->v[i] != so || seq != st->count[i] || c->res != 0) {
		__atomic_add_fetch(&st->bad, 1, __ATOMIC_RELAXED);
		return;
	}
	st->count[i]++;
	__atomic_add_fetch(&st->total, 1, __ATOMIC_RELEASE);
	if (st->count[i] < st->k) {
		struct ipk_svc_sqe *e = ipk_svc_get_sqe(so);
		ipk_svc_prep_nop(e);
		ipk_svc_sqe_set_data(e, (uint64_t)i << 32 | (uint64_t)st->count[i]);
		ipk_svc_submit(so);
	}
}

static int mode_callback(struct ipk_svc *svc, char **av)
{
	long i, spins = 0;
	cbs.n = atol(av[0]);
	cbs.k = atol(av[1]);
	if (cbs.n <= 0 || cbs.k <= 0)
		return 2;
	cbs.v = (struct ipk_svc_sock **)calloc((size_t)cbs.n, sizeof *cbs.v);
	cbs.count = (long *)calloc((size_t)cbs.n, sizeof *cbs.count);
	if (!cbs.v || !cbs.count)
		return 1;
	for (i = 0; i < cbs.n; i++)
		if (ipk_svc_socket(svc, IPK_SVC_TCP, 8, 16, &cbs.v[i]) < 0)
			return 1;
	/* the first NOPs go in before the thread starts: afterwards the callback is
	 * each socket's only submitter (svc.h's one-submitter rule; the order between
	 * a submit here and a callback there runs through the daemon, which a race
	 * detector cannot see) */
	for (i = 0; i < cbs.n; i++) {
		struct ipk_svc_sqe *e = ipk_svc_get_sqe(cbs.v[i]);
		ipk_svc_prep_nop(e);
		ipk_svc_sqe_set_data(e, (uint64_t)i << 32);
		ipk_svc_submit(cbs.v[i]);
	}
	if (ipk_svc_callback_start(svc, on_cqe, &cbs) != 0)
		return 1;
	CHECK(ipk_svc_callback_start(svc, on_cqe, &cbs) == -EBUSY, "second start");
	while (__atomic_load_n(&cbs.total, __ATOMIC_ACQUIRE) < cbs.n * cbs.k && spins++ < 30000)
		usleep(1000);
	ipk_svc_callback_stop(svc);
	printf("callback %ld/%ld bad %ld\n", cbs.total, cbs.n * cbs.k, cbs.bad);
	return cbs.total == cbs.n * cbs.k && cbs.bad == 0 ? 0 : 1;
}

/* The whole-application wait does not sleep through a completion posted while the
 * app was not waiting yet (scan first, then wait from the count read before). */
static int mode_wake(struct ipk_svc *svc)
{
	struct ipk_svc_sock *so;
	struct ipk_svc_cqe *c;
	uint32_t v;
	uint64_t t0;
	int rc, spins = 0;
	if (ipk_svc_socket(svc, IPK_SVC_TCP, 8, 16, &so) < 0)
		return 1;
	v = ipk_svc_wake_count(svc);
	ipk_svc_prep_nop(ipk_svc_get_sqe(so));
	ipk_svc_submit(so);
	while (ipk_svc_peek_cqe(so, &c) != 0 && spins++ < 10000000)
		; /* posted while nobody waited */
	t0 = now_ns();
	rc = ipk_svc_wait_from(svc, v, 2000000000ll);
	printf("wake rc %d after %llu us\n", rc, (unsigned long long)((now_ns() - t0) / 1000));
	CHECK(rc == 0, "wait_from slept through a completion posted before it (%d)", rc);
	CHECK(ipk_svc_wait(svc, 1000000) == -ETIME, "nothing new: a short wait times out");
	ipk_svc_close(so);
	return fails ? 1 : 0;
}

/* N sockets on ports PORT..: even ones TCP listeners, odd ones bound UDP (ipkitd
 * places new sockets round robin over its workers, so with --workers 2 half are
 * not the control ring's worker's). Each closed (0), closed again by id (-EBADF),
 * then every port bound again by a new socket: the CLOSE freed it, whatever worker
 * held it. Prints "closex N ok". */
static int closex_open(struct ipk_svc *svc, int i, uint16_t port, struct ipk_svc_sock **so)
{
	struct ipk_svc_sqe e;
	struct ipk_svc_addr a;
	int rc = ipk_svc_socket(svc, i % 2 ? IPK_SVC_UDP : IPK_SVC_TCP, 8, 16, so);
	if (rc < 0)
		return rc;
	memset(&e, 0, sizeof e);
	ipk_svc_addr_ip4(&a, 0, port);
	ipk_svc_prep_bind(&e, &a);
	rc = one(*so, &e, NULL);
	if (rc == 0 && i % 2 == 0) {
		memset(&e, 0, sizeof e);
		ipk_svc_prep_listen(&e, 4);
		rc = one(*so, &e, NULL);
	}
	return rc;
}

static int mode_closex(struct ipk_svc *svc, char **av)
{
	int port0 = atoi(av[0]), n = atoi(av[1]), i, round;
	struct ipk_svc_sock **v = (struct ipk_svc_sock **)calloc((size_t)(n > 0 ? n : 1), sizeof *v);
	uint32_t *ids = (uint32_t *)calloc((size_t)(n > 0 ? n : 1), sizeof *ids);
	if (!v || !ids || n <= 0 || port0 <= 0 || port0 + n > 65536)
		return 2;
	for (round = 0; round < 2; round++) {
		for (i = 0; i < n; i++) {
			int rc = closex_open(svc, i, (uint16_t)(port0 + i), &v[i]);
			CHECK(rc == 0, "round %d socket %d port %d: %d", round, i, port0 + i, rc);
			ids[i] = ipk_svc_sock_id(v[i]);
		}
		for (i = 0; i < n; i++) {
			int rc = ipk_svc_close(v[i]);
			CHECK(rc == 0, "round %d close %d: %d", round, i, rc);
		}
		for (i = 0; i < n; i++) {
			int rc = ipk_svc_close_id(svc, ids[i]);
			CHECK(rc == -EBADF, "round %d second close %d: %d", round, i, rc);
		}
	}
	free(v);
	free(ids);
	if (!fails)
		printf("closex %d ok\n", n);
	return fails ? 1 : 0;
}

/* abortpair IP PORT N: N pairs through ipkitd's own loop (a listener on PORT, a
 * client connecting to IP:PORT, both ours). Pair i: the client sends 3 bytes and
 * is closed, with ipk_svc_abort for even i and ipk_svc_close for odd i; the
 * accepted side then reads the 3 bytes and, after an abort, -ECONNRESET, after a
 * close 0 (the end of stream). With SVC_TOOL_RST_UNREAD set, the accepted side
 * closes instead, with IPK_SVC_SQE_F_RST_UNREAD, leaving the 3 bytes unread in
 * ipkitd (even i: the client reads -ECONNRESET) or after reading them (odd i: 0).
 * Prints "abortpair R/N resets E ends". With
 * --workers 2 the two ends of a pair may be different workers' sockets, so the
 * CLOSE and its ABORT flag cross between them (svc/d_msg.c D_MSG_CLOSE). */
static int mode_abortpair(struct ipk_svc *svc, char **av)
{
	struct ipk_svc_sock *l, *c, *w;
	struct ipk_svc_sqe e;
	struct ipk_svc_cqe q;
	struct ipk_svc_addr a;
	struct in_addr ip;
	int n = atoi(av[2]), i, resets = 0, ends = 0, rc;
	int rst_unread = getenv("SVC_TOOL_RST_UNREAD") != NULL;
	uint16_t port = (uint16_t)atoi(av[1]);
	uint8_t *buf = (uint8_t *)ipk_svc_buf_alloc(svc, 64);
	if (!buf || n <= 0 || inet_pton(AF_INET, av[0], &ip) != 1 ||
	    ipk_svc_socket(svc, IPK_SVC_TCP, 8, 64, &l) < 0)
		return 2;
	rc = listen_any(l, port, 16);
	CHECK(rc == 0, "bind/listen %d", rc);
	if (rc)
		return 1;
	memset(&e, 0, sizeof e);
	ipk_svc_prep_accept(&e, 8, 16); /* multishot: one completion per pair */
	*ipk_svc_get_sqe(l) = e;
	ipk_svc_submit(l);
	for (i = 0; i < n; i++) {
		int got;
		CHECK(ipk_svc_socket(svc, IPK_SVC_TCP, 8, 16, &c) == 0, "socket %d", i);
		memset(&e, 0, sizeof e);
		ipk_svc_addr_ip4(&a, ip.s_addr, port);
		ipk_svc_prep_connect(&e, &a);
		CHECK(one(c, &e, NULL) == 0, "connect %d", i);
		CHECK(take(l, &q) == 0 && q.res == 0 && ipk_svc_accepted(svc, &q, &w) == 0,
		      "accept %d", i);
		if (fails)
			return 1;
		memcpy(buf, "abc", 3);
		memset(&e, 0, sizeof e);
		ipk_svc_prep_send(c, &e, buf, 3);
		CHECK(one(c, &e, NULL) == 3, "send %d", i);
		if (rst_unread) {
			/* the other way round: c's bytes wait in ipkitd for w, which
			 * never reads them (pairs i even) or reads them first (odd);
			 * w closes with IPK_SVC_SQE_F_RST_UNREAD, c reads the end */
			if (i % 2) {
				memset(&e, 0, sizeof e);
				ipk_svc_prep_recv(w, &e, buf + 8, 8);
				CHECK(one(w, &e, NULL) == 3, "pair %d: read the 3 bytes", i);
			}
			CHECK(ipk_svc_close_flags(w, IPK_SVC_SQE_F_RST_UNREAD) == 0, "close %d", i);
			memset(&e, 0, sizeof e); /* c has no bytes coming: only the end */
			ipk_svc_prep_recv(c, &e, buf + 8, 8);
			rc = one(c, &e, NULL);
			if (i % 2 == 0 && rc == -ECONNRESET)
				resets++;
			if (i % 2 == 1 && rc == 0)
				ends++;
			ipk_svc_close(c);
			continue;
		}
		CHECK((i % 2 ? ipk_svc_close(c) : ipk_svc_abort(c)) == 0, "close %d", i);
		for (got = 0; got < 3;) { /* the bytes first, as Linux delivers them */
			memset(&e, 0, sizeof e);
			ipk_svc_prep_recv(w, &e, buf + 8, 8);
			rc = one(w, &e, NULL);
			if (rc <= 0)
				break;
			got += rc;
		}
		CHECK(got == 3, "pair %d: %d bytes before the end (%d)", i, got, rc);
		memset(&e, 0, sizeof e);
		ipk_svc_prep_recv(w, &e, buf + 8, 8);
		rc = one(w, &e, NULL);
		if (i % 2 == 0 && rc == -ECONNRESET)
			resets++;
		if (i % 2 == 1 && rc == 0)
			ends++;
		ipk_svc_close(w);
	}
	ipk_svc_close(l);
	printf("abortpair %d/%d resets %d ends\n", resets, (n + 1) / 2, ends);
	return resets == (n + 1) / 2 && ends == n / 2 && !fails ? 0 : 1;
}

/* A listener that never accepts: connections wait in its queue until GOFILE
 * appears (at most 30 s), then the listener is closed (they are reset). */
static int mode_lhold(struct ipk_svc *svc, char **av)
{
	struct ipk_svc_sock *l;
	int rc, i;
	if (ipk_svc_socket(svc, IPK_SVC_TCP, 8, 16, &l) < 0)
		return 1;
	rc = listen_any(l, (uint16_t)atoi(av[0]), 16);
	if (rc < 0) {
		printf("lhold bind/listen %d\n", rc);
		return 1;
	}
	printf("listening\n");
	fflush(stdout);
	for (i = 0; i < 3000 && access(av[1], F_OK) != 0; i++)
		usleep(10000);
	rc = ipk_svc_close(l);
	printf("closed %d\n", rc);
	fflush(stdout);
	sleep(10); /* alive: what the close did is not the work of our exit's reclaim */
	return rc == 0 ? 0 : 1;
}

/* acceptn PORT N: N connections open at once. A listener on 0.0.0.0:PORT accepts
 * N connections and holds every one open; then, on each, it reads the 4 bytes its
 * peer sent and sends them back, and closes it after the peer's end of stream.
 * Prints "acceptn N/N held" once all are in, "acceptn N/N answered" at the end. */
static int mode_acceptn(struct ipk_svc *svc, char **av)
{
	long n = atol(av[1]), got = 0, ok = 0, i;
	struct ipk_svc_sock *l, **v;
	struct ipk_svc_sqe e;
	uint8_t *buf;
	int rc;
	v = (struct ipk_svc_sock **)calloc((size_t)(n > 0 ? n : 1), sizeof *v);
	buf = (uint8_t *)ipk_svc_buf_alloc(svc, (uint32_t)(n > 0 ? n : 1) * 8u);
	if (!v || !buf || n <= 0 || ipk_svc_socket(svc, IPK_SVC_TCP, 8, 256, &l) < 0)
		return 2;
	rc = listen_any(l, (uint16_t)atoi(av[0]), 128);
	if (rc < 0) {
		printf("acceptn bind/listen %d\n", rc);
		return 1;
	}
	printf("listening\n");
	fflush(stdout);
	while (got < n) {
		struct ipk_svc_cqe c;
		memset(&e, 0, sizeof e);
		ipk_svc_prep_accept(&e, 4, 8); /* multishot: re-armed when it ends */
		*ipk_svc_get_sqe(l) = e;
		ipk_svc_submit(l);
		do {
			if (take_t(l, &c, 30000000000ll) < 0) {
				printf("acceptn %ld/%ld held (no more)\n", got, n);
				return 1;
			}
			if (c.res == 0 && ipk_svc_accepted(svc, &c, &v[got]) == 0)
				got++;
			else if (c.res < 0 && c.res != -EBUSY)
				fprintf(stderr, "svc_tool: accept %d\n", c.res);
		} while (got < n && (c.flags & IPK_SVC_CQE_F_MORE));
	}
	printf("acceptn %ld/%ld held\n", got, n);
	fflush(stdout);
	for (i = 0; i < n; i++) { /* every RECV posted first: the peers send when told */
		struct ipk_svc_sqe *r = ipk_svc_get_sqe(v[i]);
		ipk_svc_prep_recv(v[i], r, buf + 8 * i, 4);
		ipk_svc_submit(v[i]);
	}
	for (i = 0; i < n; i++) {
		struct ipk_svc_cqe c;
		if (take(v[i], &c) < 0 || c.res != 4)
			continue;
		memset(&e, 0, sizeof e);
		ipk_svc_prep_send(v[i], &e, buf + 8 * i, 4);
		if (one(v[i], &e, &c) == 4)
			ok++;
	}
	for (i = 0; i < n; i++) { /* the peer's end of stream, then ours */
		struct ipk_svc_sqe *r = ipk_svc_get_sqe(v[i]);
		struct ipk_svc_cqe c;
		ipk_svc_prep_recv(v[i], r, buf + 8 * i + 4, 4);
		ipk_svc_submit(v[i]);
		take(v[i], &c);
		ipk_svc_close(v[i]);
	}
	printf("acceptn %ld/%ld answered\n", ok, n);
	ipk_svc_close(l);
	return ok == n ? 0 : 1;
}

/* A socket for others to aim at (hostile's ID), kept SECONDS. */
static int mode_hold(struct ipk_svc *svc, char **av)
{
	struct ipk_svc_sock *so;
	if (ipk_svc_socket(svc, IPK_SVC_TCP, 8, 16, &so) < 0)
		return 1;
	struct ipk_svc_sqe e;
	int rc;
	printf("id %u\n", ipk_svc_sock_id(so));
	fflush(stdout);
	sleep((unsigned)atoi(av[0]));
	memset(&e, 0, sizeof e);
	ipk_svc_prep_nop(&e);
	rc = one(so, &e, NULL);
	CHECK(rc == 0, "held socket still works: %d", rc);
	rc = ipk_svc_close(so);
	CHECK(rc == 0, "held socket closes: %d", rc);
	printf("hold ok\n");
	return fails ? 1 : 0;
}

#include "svc_hostile.h"
#include "svc_chaos.h"
#include "svc_bench.h"
#include "svc_scope.h"
#include "svc_adopt.h"

int main(int argc, char **argv)
{
	const char *path = NULL;
	struct ipk_svc *svc;
	int err = 0, rc = 2, i = 1;
	g_scribble = getenv("SVC_TOOL_SCRIBBLE") != NULL;
	if (getenv("SVC_TOOL_PRIO"))
		g_prio = (unsigned)atoi(getenv("SVC_TOOL_PRIO"));
	if (argc > 2 && !strcmp(argv[1], "--socket")) {
		path = argv[2];
		i = 3;
	}
	if (i >= argc) {
		fprintf(stderr, "usage: svc_tool [--socket PATH] nop|connect|listen|udp|hostile ...\n");
		return 2;
	}
	if (!strcmp(argv[i], "futex-floor") && argc - i >= 2)
		return mode_futex_floor(argv + i + 1); /* needs no daemon */
	{
		struct ipk_svc_opts o;
		ipk_svc_opts_default(&o);
		o.ring_bytes = 16u << 20; /* room for svc_tool many's thousands of rings */
		svc = ipk_svc_open(path, &o, &err);
	}
	if (!svc) {
		fprintf(stderr, "svc_tool: cannot reach ipkitd: %s\n", strerror(-err));
		return 3;
	}
	if (!strcmp(argv[i], "nop") && argc - i >= 2)
		rc = mode_nop(svc, argv + i + 1);
	else if (!strcmp(argv[i], "connect") && argc - i >= 4)
		rc = mode_connect(svc, argv + i + 1);
	else if (!strcmp(argv[i], "listen") && argc - i >= 3)
		rc = mode_listen(svc, argv + i + 1);
	else if (!strcmp(argv[i], "udp") && argc - i >= 4)
		rc = mode_udp(svc, argv + i + 1);
	else if (!strcmp(argv[i], "udpecho") && argc - i >= 3)
		rc = mode_udpecho(svc, argv + i + 1);
	else if (!strcmp(argv[i], "rlisten") && argc - i >= 3)
		rc = mode_rlisten(svc, argv + i + 1);
	else if (!strcmp(argv[i], "connmany") && argc - i >= 4)
		rc = mode_connmany(svc, argv + i + 1);
	else if (!strcmp(argv[i], "hostile"))
		rc = mode_hostile(svc, argc - i >= 2 ? (uint32_t)strtoul(argv[i + 1], NULL, 0) : 0);
	else if (!strcmp(argv[i], "chaos") && argc - i >= 4)
		rc = mode_chaos(svc, strtoull(argv[i + 1], NULL, 0),
		                (uint32_t)strtoul(argv[i + 2], NULL, 0), inet_addr(argv[i + 3]));
	else if (!strcmp(argv[i], "fair") && argc - i >= 2 && path)
		rc = mode_fair(svc, (char *[]){argv[i + 1], (char *)path});
	else if (!strcmp(argv[i], "victim") && argc - i >= 3)
		rc = mode_victim(svc, argv + i + 1);
	else if (!strcmp(argv[i], "flood") && argc - i >= 3)
		rc = mode_flood(svc, argv + i + 1);
	else if (!strcmp(argv[i], "wake"))
		rc = mode_wake(svc);
	else if (!strcmp(argv[i], "rr") && argc - i >= 5)
		rc = mode_rr(svc, argv + i + 1);
	else if (!strcmp(argv[i], "herd") && argc - i >= 2)
		rc = mode_herd(svc, argv + i + 1);
	else if (!strcmp(argv[i], "threads") && argc - i >= 3)
		rc = mode_threads(svc, argv + i + 1);
	else if (!strcmp(argv[i], "openloop") && argc - i >= 4)
		rc = mode_openloop(svc, argv + i + 1);
	else if (!strcmp(argv[i], "scale") && argc - i >= 3)
		rc = mode_scale(svc, argv + i + 1);
	else if (!strcmp(argv[i], "callback") && argc - i >= 3)
		rc = mode_callback(svc, argv + i + 1);
	else if (!strcmp(argv[i], "many") && argc - i >= 2)
		rc = mode_many(svc, argv + i + 1);
	else if (!strcmp(argv[i], "prio-order") && argc - i >= 2)
		rc = mode_prio_order(svc, argv + i + 1);
	else if (!strcmp(argv[i], "prio") && argc - i >= 3)
		rc = mode_prio(svc, argv + i + 1);
	else if (!strcmp(argv[i], "nopbench") && argc - i >= 3)
		rc = mode_nopbench(svc, argv + i + 1);
	else if (!strcmp(argv[i], "nopspin") && argc - i >= 3)
		rc = mode_nopspin(svc, argv + i + 1, argc - i - 1);
	else if (!strcmp(argv[i], "bindrace") && argc - i >= 4)
		rc = mode_bindrace(svc, argv + i + 1, argc - i - 1);
	else if (!strcmp(argv[i], "closex") && argc - i >= 3)
		rc = mode_closex(svc, argv + i + 1);
	else if (!strcmp(argv[i], "lhold") && argc - i >= 3)
		rc = mode_lhold(svc, argv + i + 1);
	else if (!strcmp(argv[i], "adoptfork") && argc - i >= 5)
		rc = mode_adoptfork(svc, argv + i + 1, path);
	else if (!strcmp(argv[i], "scope6") && argc - i >= 4)
		rc = mode_scope6(svc, argv + i + 1, argc - i - 1);
	else if (!strcmp(argv[i], "abortpair") && argc - i >= 4)
		rc = mode_abortpair(svc, argv + i + 1);
	else if (!strcmp(argv[i], "acceptn") && argc - i >= 3)
		rc = mode_acceptn(svc, argv + i + 1);
	else if (!strcmp(argv[i], "hold") && argc - i >= 2)
		rc = mode_hold(svc, argv + i + 1);
	ipk_svc_close_all(svc);
	return rc ? rc : fails ? 1 : 0;
}
