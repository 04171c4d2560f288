/*
 * A node: one core context driven over one backend queue (include/ipkit/runtime.h).
 *
 * Transmit path: the core's ops->tx appends to a small batch; ops->tx_flush (called at
 * the end of every core entry point; inside ipk_run deferred to the end of the round)
 * hands the batch to ipk_io_tx_burst and kicks the device. What the backend does not take stays queued for the next poll; when the
 * batch is full the oldest packets are dropped and counted, so a stuck device costs
 * memory bounded by the batch size, never the pool.
 */
#include <ipkit/runtime.h>

#include "addr6.h"
#include "siphash.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define NODE_RX_BURST 32
#define NODE_TXQ 512
#define NODE_RAND_WORDS 64
/* backends without a pollable fd: nap this long at most between polls */
#define NODE_NOFD_NAP_NS 50000u
/* A device that refuses frames (ring or queue full) is tried again after 1 ms,
 * doubled while it takes nothing, up to 64 ms: a device that never drains (a
 * memlink peer gone, a stuck NIC ring) costs a few wake-ups a second, not 1000
 * (issue 14, the class of the core's packet-less retry). */
#define NODE_TX_RETRY_NS 1000000ull
#define NODE_TX_RETRY_MAX_NS 64000000ull
/* Issue 14: the share of the packet pool the core may hold as out-of-order data
 * (ipk_config.rmem_max), and the buffers kept for receive alone (ipk_pool_set_reserve):
 * whatever a peer sends, the rest of the pool stays for receive and transmit. */
#define NODE_RMEM_SHARE 4u
/* ... and the share its send queues may hold (ipk_config.wmem_max, counted in bytes
 * queued, a zero-copy packet as at least half a buffer), so connections whose peers
 * never ACK cannot take the pool from the others (issue 14). */
#define NODE_WMEM_SHARE 4u
#define NODE_RX_RESERVE_SHARE 16u

struct ipk_node {
	struct ipk_pool *pool; /* first: ipk_pool_fill_ops finds the pool through opaque */
	struct ipk_io *io;
	struct ipk_ctx *ctx;
	void *ctx_mem, *conn_mem, *pb_mem;
	struct ipk_ops ops;
	struct ipk_node_cfg cfg;
	uint64_t now, deadline;
	uint64_t last_rx;      /* n->now of the last step that received frames */
	struct ipk_pkt *txq[NODE_TXQ];
	uint32_t txn;
	uint64_t tx_wait;      /* next wait for a full device (0: NODE_TX_RETRY_NS) */
	int in_run;            /* inside ipk_run: flushes wait for the end of the round */
	uint64_t tx_drops;
	struct ipk_node_stats st;
	uint64_t sip_key[2];
	uint32_t rand_buf[NODE_RAND_WORDS];
	uint32_t rand_left;
};

void ipk_node_cfg_default(struct ipk_node_cfg *cfg)
{
	if (!cfg)
		return;
	memset(cfg, 0, sizeof(*cfg));
	cfg->prefix_len = 24;
	cfg->cpu = -1;
	cfg->conns = 1024;
	cfg->pbs = 16384;
	ipk_pool_cfg_default(&cfg->pool);
}

static uint64_t node_clock(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Fill buf with kernel randomness; getrandom(2) may return short for large requests
 * or be interrupted, so retry a bounded number of times. */
static int node_getrandom(void *buf, size_t len)
{
	uint8_t *p = (uint8_t *)buf;
	int tries;
	for (tries = 0; len > 0 && tries < 16; tries++) {
		ssize_t r = getrandom(p, len, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r;
		len -= (size_t)r;
	}
	return len == 0 ? 0 : -EIO;
}

/* ------------------------------------------------------------------ ops */

static uint32_t node_random(void *opaque)
{
	struct ipk_node *n = (struct ipk_node *)opaque;
	if (n->rand_left == 0) {
		if (node_getrandom(n->rand_buf, sizeof(n->rand_buf)) < 0) {
			/* never fails on Linux >= 3.17 once the pool is seeded; stir what we
			 * have with the clock rather than hand out a constant */
			uint64_t t = node_clock();
			uint32_t i;
			for (i = 0; i < NODE_RAND_WORDS; i++)
				n->rand_buf[i] ^= (uint32_t)ipk_siphash24(n->sip_key, &t, sizeof(t)) + i;
		}
		n->rand_left = NODE_RAND_WORDS;
	}
	return n->rand_buf[--n->rand_left];
}

/* RFC 6528 §3: ISN = M + F(localip, localport, remoteip, remoteport, secretkey);
 * the core adds the clock M, we provide F as SipHash under a per-node random key. */
static uint32_t node_isn_hash(const struct ipk_tuple *t, void *opaque)
{
	struct ipk_node *n = (struct ipk_node *)opaque;
	uint8_t m[12];
	memcpy(m, &t->local_ip4_be, 4);
	memcpy(m + 4, &t->peer_ip4_be, 4);
	memcpy(m + 8, &t->local_port_be, 2);
	memcpy(m + 10, &t->peer_port_be, 2);
	return (uint32_t)ipk_siphash24(n->sip_key, m, sizeof(m));
}

/* Hand the batch to the backend; keep what it refused, in order. */
static void node_txq_push(struct ipk_node *n)
{
	int took;
	if (n->txn == 0)
		return;
	took = ipk_io_tx_burst(n->io, n->txq, (int)n->txn);
	if (took < 0)
		took = 0;
	if (took > 0)
		n->tx_wait = 0; /* the device moves: the back-off starts over */
	if ((uint32_t)took < n->txn)
		memmove(n->txq, n->txq + took, (n->txn - (uint32_t)took) * sizeof(n->txq[0]));
	n->txn -= (uint32_t)took;
	n->st.tx_pushes++;
	n->st.tx_frames += (uint64_t)took;
	ipk_io_flush(n->io);
}

static void node_tx(void *pkt, void *opaque)
{
	struct ipk_node *n = (struct ipk_node *)opaque;
	if (n->txn == NODE_TXQ)
		node_txq_push(n);
	if (n->txn == NODE_TXQ) {
		/* device stuck: drop the newest; TCP retransmits, UDP is best effort */
		ipk_pkt_free_chain((struct ipk_pkt *)pkt);
		n->tx_drops++;
		return;
	}
	n->txq[n->txn++] = (struct ipk_pkt *)pkt;
}

/* The core flushes at the end of every entry point, so an application answering
 * inside a callback (ipk_tcp_send from tcp_payload) would cost one device kick per
 * reply. Inside ipk_run the node pushes once, after the whole burst. */
static void node_tx_flush(void *opaque)
{
	struct ipk_node *n = (struct ipk_node *)opaque;
	if (!n->in_run)
		node_txq_push(n);
}

static void node_tx_offload(void *pkt, const struct ipk_tx_meta *meta, void *opaque)
{
	(void)opaque;
	((struct ipk_pkt *)pkt)->meta = *meta;
}

static uint32_t node_rx_csum(void *pkt, void *opaque)
{
	(void)opaque;
	return ((struct ipk_pkt *)pkt)->rx_csum;
}

static void node_ops_init(struct ipk_node *n)
{
	const struct ipk_ops *ev = n->cfg.events;
	memset(&n->ops, 0, sizeof(n->ops));
	ipk_pool_fill_ops(&n->ops);
	n->ops.pkt_low = ipk_pool_pkt_low;
	n->ops.tx = node_tx;
	n->ops.tx_flush = node_tx_flush;
	n->ops.tx_offload = node_tx_offload;
	n->ops.rx_csum = node_rx_csum;
	n->ops.random = node_random;
	n->ops.isn_hash = node_isn_hash;
	if (!ev)
		return;
	n->ops.arp_learned = ev->arp_learned;
	n->ops.tcp_accept = ev->tcp_accept;
	n->ops.tcp_accept6 = ev->tcp_accept6;
	n->ops.tcp_room = ev->tcp_room;
	n->ops.tcp_accepted = ev->tcp_accepted;
	n->ops.tcp_connected = ev->tcp_connected;
	n->ops.tcp_payload = ev->tcp_payload;
	n->ops.tcp_acked = ev->tcp_acked;
	n->ops.tcp_closed = ev->tcp_closed;
	n->ops.udp_recv = ev->udp_recv;
	n->ops.icmp_echo_reply = ev->icmp_echo_reply;
	n->ops.udp_recv6 = ev->udp_recv6;
	n->ops.icmp6_echo_reply = ev->icmp6_echo_reply;
	n->ops.udp_error6 = ev->udp_error6;
}

/* --------------------------------------------------------------- create */

static uint32_t node_netmask_be(uint8_t prefix_len)
{
	uint32_t m = prefix_len == 0 ? 0 : 0xffffffffu << (32 - prefix_len);
	return ipk_htonl(m);
}

/* Core config from the backend's capabilities, then the node config, then the
 * application's tweak. */
static int node_core_config(struct ipk_node *n, struct ipk_config *c, char *err, size_t errlen)
{
	const struct ipk_io_caps *caps = ipk_io_caps(n->io);
	const struct ipk_node_cfg *cfg = &n->cfg;
	uint32_t room = ipk_pool_buf_size(n->pool) - cfg->pool.headroom;

	ipk_config_default(c);
	c->opaque = n;
	c->link = caps->link;
	c->mtu = caps->mtu ? caps->mtu : 1500;
	c->caps = caps->offloads;
	if (caps->offloads & IPK_CAP_TSO)
		c->tso_max = caps->tso_max;
	c->pkt_buf_size = room;
	c->ip4_be = cfg->ip4_be;
	c->netmask_be = node_netmask_be(cfg->prefix_len);
	c->gateway_be = cfg->gateway_be;
	/* a quarter of the buffers, in the core's unit (pkt_buf_size per packet held) */
	c->rmem_max = (uint64_t)(cfg->pool.nbufs / NODE_RMEM_SHARE) * room;
	c->wmem_max = (uint64_t)(cfg->pool.nbufs / NODE_WMEM_SHARE) * room;
	if (cfg->mac) {
		memcpy(c->mac, cfg->mac, 6);
	} else if (caps->link == IPK_LINK_ETH) {
		static const uint8_t zero[6] = {0};
		if (memcmp(caps->mac, zero, 6) != 0) {
			memcpy(c->mac, caps->mac, 6);
		} else {
			uint32_t r1 = node_random(n), r2 = node_random(n);
			/* locally administered, unicast (IEEE 802 §8.2.2) */
			c->mac[0] = (uint8_t)((r1 & 0xfc) | 0x02);
			memcpy(c->mac + 1, &r1, 3);
			memcpy(c->mac + 4, &r2, 2);
		}
	}
	if (cfg->core_tweak)
		cfg->core_tweak(c, cfg->tweak_arg ? cfg->tweak_arg : cfg->app);
	if (ipk_ctx_size(c) == 0) {
		snprintf(err, errlen, "core rejected the configuration for %s (MTU %u, buffer room %u)",
		         ipk_io_name(n->io), (unsigned)c->mtu, (unsigned)c->pkt_buf_size);
		return -EINVAL;
	}
	return 0;
}

static int node_core_init(struct ipk_node *n, char *err, size_t errlen)
{
	struct ipk_config c;
	size_t size;
	int rc = node_core_config(n, &c, err, errlen);
	if (rc < 0)
		return rc;
	size = ipk_ctx_size(&c);
	n->ctx_mem = calloc(1, size);
	n->conn_mem = calloc(n->cfg.conns, ipk_conn_size());
	n->pb_mem = calloc(n->cfg.pbs, ipk_pb_size());
	if (!n->ctx_mem || !n->conn_mem || !n->pb_mem) {
		snprintf(err, errlen, "out of memory for the core context and pools");
		return -ENOMEM;
	}
	n->ctx = ipk_ctx_init(n->ctx_mem, size, &c, &n->ops);
	if (!n->ctx) {
		snprintf(err, errlen, "core context init failed (bad configuration)");
		return -EINVAL;
	}
	/* Backends that steer by address (AF_XDP's program) pass the host's traffic
	 * through until they know ours. */
	rc = ipk_io_set_addr(n->io, c.ip4_be, c.mac);
	if (rc >= 0)
		rc = rt_io_set_addr6(n->io, &c);
	if (rc < 0) {
		snprintf(err, errlen, "%s: cannot set the address filter: %s", ipk_io_name(n->io),
		         strerror(-rc));
		return rc;
	}
	if (ipk_add_conns(n->ctx, n->conn_mem, n->cfg.conns) < 0 ||
	    ipk_add_pbs(n->ctx, n->pb_mem, n->cfg.pbs) < 0) {
		snprintf(err, errlen, "core refused the connection / pb pools");
		return -EINVAL;
	}
	return 0;
}

static int node_check_cfg(const struct ipk_node_cfg *cfg, char *err, size_t errlen)
{
	if (!cfg->io_open && (!cfg->io_spec || !cfg->io_spec[0])) {
		snprintf(err, errlen, "no backend given (e.g. tap:ipk0, afpacket:veth1)");
		return -EINVAL;
	}
	if (cfg->ip4_be == 0 || cfg->prefix_len > 32) {
		snprintf(err, errlen, "an IPv4 address with a prefix length 0..32 is required");
		return -EINVAL;
	}
	if (cfg->spin_us > 10000u) {
		snprintf(err, errlen, "spin_us %u is above 10000 (10 ms)", (unsigned)cfg->spin_us);
		return -EINVAL;
	}
	if (cfg->conns == 0 || cfg->pbs == 0 || cfg->pool.headroom >= cfg->pool.buf_size) {
		snprintf(err, errlen, "pool sizes must be nonzero and headroom below buf_size");
		return -EINVAL;
	}
	return 0;
}

static void node_open_spec(struct ipk_node *n, char *spec, size_t speclen)
{
	/* cfg.queue selects the backend queue for kinds that have one */
	if (n->cfg.queue > 0 && !strstr(n->cfg.io_spec, "queue="))
		snprintf(spec, speclen, "%s,queue=%d", n->cfg.io_spec, n->cfg.queue);
	else
		snprintf(spec, speclen, "%s", n->cfg.io_spec);
}

struct ipk_node *ipk_node_create(const struct ipk_node_cfg *cfg, char *err, size_t errlen)
{
	struct ipk_node *n;
	char spec[512];
	char dummy[1];

	if (!err || errlen == 0) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = 0;
	if (!cfg) {
		snprintf(err, errlen, "no node configuration");
		return NULL;
	}
	if (node_check_cfg(cfg, err, errlen) < 0)
		return NULL;
	n = (struct ipk_node *)calloc(1, sizeof(*n));
	if (!n) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	n->cfg = *cfg;
	if (node_getrandom(n->sip_key, sizeof(n->sip_key)) < 0) {
		snprintf(err, errlen, "getrandom failed: %s", strerror(errno));
		goto fail;
	}
	node_ops_init(n);
	/* afxdp's frame=N: a UMEM frame is one pool buffer */
	if (!n->cfg.io_open && ipk_io_spec_buf_size(n->cfg.io_spec) > n->cfg.pool.buf_size)
		n->cfg.pool.buf_size = ipk_io_spec_buf_size(n->cfg.io_spec);
	n->pool = ipk_pool_create(&n->cfg.pool, err, errlen);
	if (!n->pool)
		goto fail;
	ipk_pool_set_reserve(n->pool, n->cfg.pool.nbufs / NODE_RX_RESERVE_SHARE);
	if (n->cfg.io_open)
		n->io = n->cfg.io_open(n->pool, n->cfg.io_open_arg, err, errlen);
	else {
		node_open_spec(n, spec, sizeof(spec));
		n->io = ipk_io_open(spec, n->pool, err, errlen);
	}
	if (!n->io)
		goto fail;
	if (node_core_init(n, err, errlen) < 0)
		goto fail;
	n->now = node_clock();
	n->deadline = 0;
	if (ipk_io_caps(n->io)->link == IPK_LINK_ETH)
		ipk_arp_announce(n->ctx, n->now); /* RFC 5227 §2.3: tell the link who we are */
	return n;
fail:
	ipk_node_destroy(n);
	return NULL;
}

void ipk_node_destroy(struct ipk_node *n)
{
	uint32_t i;
	if (!n)
		return;
	for (i = 0; i < n->txn; i++)
		ipk_pkt_free_chain(n->txq[i]);
	n->txn = 0;
	if (n->io)
		ipk_io_close(n->io);
	/* the core holds packets (send buffers, ARP queue) inside its context memory;
	 * the pool owns their storage, so destroying the pool releases them */
	free(n->ctx_mem);
	free(n->conn_mem);
	free(n->pb_mem);
	if (n->pool)
		ipk_pool_destroy(n->pool);
	free(n);
}

/* ----------------------------------------------------------------- loop */

/* rx burst -> core -> tx; returns frames received or a negative errno */
static int node_step(struct ipk_node *n)
{
	struct ipk_pkt *pkts[NODE_RX_BURST];
	int got;

	node_txq_push(n); /* what the backend refused last time goes first */
	got = ipk_io_rx_burst(n->io, pkts, NODE_RX_BURST);
	if (got < 0)
		return got;
	n->st.polls++;
	n->now = node_clock();
	if (got > 0) {
		n->st.rx_polls++;
		n->st.rx_frames += (uint64_t)got;
		n->last_rx = n->now;
	}
	n->in_run = 1;
	n->deadline = ipk_run(n->ctx, (void **)pkts, (uint32_t)got, n->now);
	n->in_run = 0;
	node_txq_push(n);
	return got;
}

static void node_ts(struct timespec *ts, uint64_t ns)
{
	ts->tv_sec = (time_t)(ns / 1000000000ull);
	ts->tv_nsec = (long)(ns % 1000000000ull);
}

/* Sleep until traffic, the core's deadline, or timeout_ms (-1: no bound). */
static void node_sleep(struct ipk_node *n, int timeout_ms)
{
	uint64_t now = node_clock(), wait = UINT64_MAX;
	struct timespec ts;
	struct pollfd pfd;
	int fd = ipk_io_fd(n->io);

	/* Frames the backend took but could not hand on (a refused kick: AF_XDP's sendto
	 * answering EAGAIN/EBUSY) would otherwise wait for our next transmit, and a node
	 * waiting for answers to them makes none: every connection would stall until its
	 * RTO. Kick once more before sleeping; with nothing pending it costs no syscall. */
	ipk_io_flush(n->io);
	if (n->deadline != UINT64_MAX)
		wait = n->deadline > now ? n->deadline - now : 0;
	if (timeout_ms >= 0 && (uint64_t)timeout_ms * 1000000ull < wait)
		wait = (uint64_t)timeout_ms * 1000000ull;
	if (n->txn > 0) {
		/* device was full: retry soon, later each time it took nothing */
		uint64_t retry = n->tx_wait ? n->tx_wait : NODE_TX_RETRY_NS;

		if (wait > retry)
			wait = retry;
		n->tx_wait = retry < NODE_TX_RETRY_MAX_NS / 2 ? 2 * retry : NODE_TX_RETRY_MAX_NS;
	}
	if (wait == 0)
		return;
	if (fd < 0) {
		node_ts(&ts, wait < NODE_NOFD_NAP_NS ? wait : NODE_NOFD_NAP_NS);
		nanosleep(&ts, NULL);
		return;
	}
	if (ipk_io_arm(n->io) > 0)
		return;
	n->st.sleeps++;
	pfd.fd = fd;
	pfd.events = POLLIN;
	pfd.revents = 0;
	if (wait == UINT64_MAX) {
		ppoll(&pfd, 1, NULL, NULL);
	} else {
		node_ts(&ts, wait);
		ppoll(&pfd, 1, &ts, NULL);
	}
}

/* The spin window: poll until frames come, spin_us after the last traffic has passed,
 * or timeout_ms (every step also runs the core's timers). Returns what the last step
 * returned; 0 means "sleep now". Entered only within spin_us of traffic, so an idle
 * node never spins. */
static int node_spin(struct ipk_node *n, int timeout_ms)
{
	uint64_t spin = (uint64_t)n->cfg.spin_us * 1000u, until = n->last_rx + spin;
	int got = 0;

	if (spin == 0 || n->now - n->last_rx >= spin)
		return 0;
	if (timeout_ms > 0 && n->now + (uint64_t)timeout_ms * 1000000ull < until)
		until = n->now + (uint64_t)timeout_ms * 1000000ull;
	n->st.spins++;
	while (got == 0 && n->now < until)
		got = node_step(n);
	if (got > 0)
		n->st.spin_hits++;
	return got;
}

int ipk_node_poll(struct ipk_node *n, int timeout_ms)
{
	int got;
	if (!n)
		return -EINVAL;
	got = node_step(n);
	if (got != 0 || timeout_ms == 0 || n->cfg.busy_poll)
		return got;
	got = node_spin(n, timeout_ms);
	if (got != 0)
		return got;
	node_sleep(n, timeout_ms);
	return node_step(n);
}

int ipk_node_set_spin(struct ipk_node *n, uint32_t spin_us)
{
	if (!n || spin_us > 10000u)
		return -EINVAL;
	n->cfg.spin_us = spin_us;
	return 0;
}

static void node_pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0)
		fprintf(stderr, "ipkit: cannot pin to CPU %d: %s (running unpinned)\n", cpu,
		        strerror(errno));
}

int ipk_node_run(struct ipk_node *n, volatile int *stop)
{
	if (!n || !stop)
		return -EINVAL;
	if (n->cfg.cpu >= 0)
		node_pin(n->cfg.cpu);
	while (!*stop) {
		/* bounded sleeps so a signal that lands just before ppoll is seen soon */
		int rc = ipk_node_poll(n, 100);
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN)
			return rc;
	}
	return 0;
}

struct ipk_ctx *ipk_node_ctx(struct ipk_node *n) { return n ? n->ctx : NULL; }
struct ipk_io *ipk_node_io(struct ipk_node *n) { return n ? n->io : NULL; }
struct ipk_pool *ipk_node_pool(struct ipk_node *n) { return n ? n->pool : NULL; }
uint64_t ipk_node_now(struct ipk_node *n) { return n ? n->now : 0; }
uint64_t ipk_node_deadline(const struct ipk_node *n) { return n ? n->deadline : UINT64_MAX; }
void *ipk_node_app(void *opaque) { return opaque ? ((struct ipk_node *)opaque)->cfg.app : NULL; }
struct ipk_node *ipk_node_from(void *opaque) { return (struct ipk_node *)opaque; }
uint64_t ipk_node_tx_drops(const struct ipk_node *n) { return n ? n->tx_drops : 0; }

void ipk_node_stats(const struct ipk_node *n, struct ipk_node_stats *st)
{
	if (!st)
		return;
	if (n)
		*st = n->st;
	else
		memset(st, 0, sizeof(*st));
}
