/*
 * The backend a worker's node sees (runtime/workers_int.h).
 *
 * IPK_STEER_QUEUES: a thin wrapper around the worker's own queue of the real backend.
 * IPK_STEER_SOFT: four SPSC rings to the reader thread (steer.c):
 *   rx     reader -> worker  received frames (the reader's packets)
 *   rxret  worker -> reader  those packets once copied into the worker's pool
 *   tx     worker -> reader  frames to send (the worker's packets)
 *   txret  reader -> worker  those packets once copied into the reader's pool
 * Every pool is touched by one thread only (pools are not thread-safe), at the price
 * of one copy per frame each way, done on the worker's core for received frames.
 *
 * Both kinds hash every received IPv4 and IPv6 frame and count the ones that belong
 * to another worker (ipk_worker_stats.wrong_queue): the proof that steering and the
 * RSS-aware port choice agree.
 *
 * The pollable fd is the worker's eventfd (SOFT), or an epoll set of the queue's fd
 * and that eventfd (QUEUES), so a sleeping networking thread wakes for frames and for
 * application commands alike.
 */
#include "workers_int.h"

#include "../io/io_internal.h"
#include "../io/dpdk/dpdk_rss.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define ETH_HLEN 14
#define ETHERTYPE_ARP 0x0806
#define ETHERTYPE_IP6 0x86dd
#define ARP_ETH_IP4_LEN 42 /* Ethernet header + RFC 826 packet for IPv4 */

struct wio_priv {
	struct wk *w;
};

static struct wk *wio_wk(const struct ipk_io *io)
{
	return ((const struct wio_priv *)io->priv)->w;
}

/* ------------------------------------------------------- classification */

/* ICMPv6 Neighbor Discovery (RFC 4861 §4: RS 133, RA 134, NS 135, NA 136, Redirect
 * 137) goes to every worker (-1), not the one the address hash picks: every worker's
 * core keeps its own neighbour cache, default routers and prefixes, and runs its own
 * resolution, so like ARP these messages must reach them all (an NA answering worker
 * 1's NS would otherwise land on worker 0, which never asked). Echo and the ICMPv6
 * errors keep the NIC's address hash, as ICMP over IPv4 does. The parsing and the
 * hash are the core's (ipk_rss_hash_packet), the same the memlink backend uses to
 * play a NIC. */
int wk_frame_worker(const struct ipk_workers *ws, const struct ipk_pkt *k, uint8_t link)
{
	uint32_t h;

	if (ipk_rss_hash_packet(ws->key, ws->fields, ipk_pkt_mtod(k), k->len, link, &h) !=
	    IPK_RSS_PKT_HASHED)
		return -1;
	return ipk_rss_queue(ws->reta, ws->reta_size, h);
}

static void wio_check(struct wk *w, struct ipk_pkt **pkts, int n, uint8_t link)
{
	int i, q;

	for (i = 0; i < n; i++) {
		q = wk_frame_worker(w->ws, pkts[i], link);
		if (q >= 0 && (unsigned)q != w->idx)
			WK_INC(w->st.wrong_queue);
	}
	WK_ADD(w->st.rx_frames, (uint64_t)n);
}

int wk_net_pending(struct wk *w)
{
	if (wk_stopping(w->ws))
		return 1;
	return w->ws->cfg.model != IPK_MODEL_UNIFIED && !spsc_empty(&w->cmd);
}

/* ------------------------------------------------------------ SOFT rings */

/* Our packets the reader has sent: free them (our pool, our thread). */
static void wio_reap_tx(struct wk *w)
{
	uint32_t n = spsc_cons_avail(&w->txret), i;

	for (i = 0; i < n; i++)
		ipk_pkt_free(*(struct ipk_pkt **)spsc_cons_slot(&w->txret, i));
	if (n)
		spsc_cons_release(&w->txret, n);
}

/* A flat copy of the reader's frame in our pool, or NULL (counted) when it does not
 * fit or the pool is empty. A coalesced super-frame (the backend's LRO) goes to our
 * pool's large companion, as the backend did on the reader's side. */
static struct ipk_pkt *wio_copy_in(struct wk *w, struct ipk_pool *pool, const struct ipk_pkt *src)
{
	uint32_t room = ipk_pool_buf_size(pool) - ipk_pool_headroom(pool);
	uint32_t total = ipk_pkt_chain_len(src);
	struct ipk_pkt *d;

	if (total > room && (pool = ipk_pool_large(pool)) != NULL)
		room = ipk_pool_buf_size(pool) - ipk_pool_headroom(pool);
	if (!pool || total > room || !(d = ipk_pkt_alloc(pool))) {
		WK_INC_MT(w->st.steer_drops);
		return NULL;
	}
	d->len = ipk_pkt_linearize(src, ipk_pkt_mtod(d), room);
	d->rx_csum = src->rx_csum;
	return d;
}

static int wio_soft_rx(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct wk *w = wio_wk(io);
	uint32_t avail, room, m, i;
	int got = 0;

	wio_reap_tx(w);
	avail = spsc_cons_avail(&w->rx);
	if (avail == 0)
		return 0;
	/* take only what we can hand back: rxret never overflows */
	room = spsc_prod_room(&w->rxret);
	m = avail < room ? avail : room;
	if (m > (uint32_t)n)
		m = (uint32_t)n;
	for (i = 0; i < m; i++) {
		struct ipk_pkt *src = *(struct ipk_pkt **)spsc_cons_slot(&w->rx, i);
		struct ipk_pkt *d = wio_copy_in(w, io->pool, src);

		spsc_push_ptr(&w->rxret, src);
		if (d)
			pkts[got++] = d;
	}
	spsc_cons_release(&w->rx, m);
	spsc_prod_commit(&w->rxret);
	io->st.rx_pkts += (uint64_t)got;
	wio_check(w, pkts, got, io->caps.link);
	return got;
}

static int wio_soft_tx(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct wk *w = wio_wk(io);
	int i;

	wio_reap_tx(w);
	for (i = 0; i < n; i++)
		if (spsc_push_ptr(&w->tx, pkts[i]) < 0)
			break;
	spsc_prod_commit(&w->tx);
	io->st.tx_pkts += (uint64_t)i;
	return i;
}

static int wio_soft_flush(struct ipk_io *io)
{
	steer_kick(wio_wk(io)->ws->steer);
	return 0;
}

static int wio_soft_fd(const struct ipk_io *io)
{
	return wio_wk(io)->net_wake.efd;
}

static int wio_soft_arm(struct ipk_io *io)
{
	struct wk *w = wio_wk(io);

	waker_arm(&w->net_wake);
	return !spsc_empty(&w->rx) || wk_net_pending(w);
}

static void wio_soft_close(struct ipk_io *io)
{
	struct wk *w = wio_wk(io);
	uint32_t n, i;

	/* Our packets still queued for the reader (it has stopped): ours to free. The
	 * reader's packets in rx / rxret are freed by steer_destroy. */
	n = spsc_cons_avail(&w->tx);
	for (i = 0; i < n; i++)
		ipk_pkt_free_chain(*(struct ipk_pkt **)spsc_cons_slot(&w->tx, i));
	spsc_cons_release(&w->tx, n);
	wio_reap_tx(w);
}

/* ---------------------------------------------------------- QUEUES wrap */

/*
 * ARP (and IPv6 Neighbor Discovery, see wk_frame_worker) across queues. A NIC hashes
 * only IP frames, so ARP lands on one queue (queue 0 for memlink and most NICs), and
 * ND on the queue of its addresses, while every worker's core keeps its own neighbour
 * table (RFC 826: a host learns the sender's mapping from each ARP packet it gets).
 * The worker that receives an ARP frame copies it into each other worker's inbox
 * from it (w->arp_in[sender], SPSC); those workers take it in with their next burst
 * and feed it to their core like any received frame.
 */
int wio_arp_init(struct wk *w)
{
	unsigned j, n = w->ws->n;

	w->arp_in = (struct spsc *)calloc(n, sizeof(struct spsc));
	if (!w->arp_in)
		return -ENOMEM;
	for (j = 0; j < n; j++)
		if (j != w->idx && spsc_init(&w->arp_in[j], WK_ARP_SLOTS, sizeof(struct wk_arp)) < 0)
			return -ENOMEM;
	return 0;
}

void wio_arp_fini(struct wk *w)
{
	unsigned j;

	if (!w->arp_in)
		return;
	for (j = 0; j < w->ws->n; j++)
		spsc_fini(&w->arp_in[j]);
	free(w->arp_in);
	w->arp_in = NULL;
}

/* 1 for a frame every worker needs: ARP, or Neighbor Discovery (IPv6 is Ethernet
 * only in the core). ND is recognised here without hashing (this runs on every
 * received frame, and a second Toeplitz hash would double the check's cost): ICMPv6
 * right after the fixed header, types 133..137. The core's parser also finds ND
 * behind extension headers; such a message (no sender needs one) reaches only the
 * worker the NIC chose and is not counted against it (wk_frame_worker says -1). */
static int wio_is_arp(const struct ipk_pkt *k, uint8_t link)
{
	const uint8_t *f = ipk_pkt_mtod(k);
	uint32_t et;

	if (link != IPK_LINK_ETH || k->len < ETH_HLEN)
		return 0;
	et = (uint32_t)f[12] << 8 | f[13];
	if (et == ETHERTYPE_ARP)
		return k->len >= ARP_ETH_IP4_LEN;
	/* RFC 8200 §3: Next Header at byte 6; RFC 4861 §4: the ICMPv6 type first */
	return et == ETHERTYPE_IP6 && k->len >= ETH_HLEN + 40 + 1 && (f[ETH_HLEN] >> 4) == 6 &&
	       f[ETH_HLEN + 6] == 58 && f[ETH_HLEN + 40] >= 133 && f[ETH_HLEN + 40] <= 137;
}

/* A copy of the ARP (or ND) frame k for every other worker. */
static void wio_arp_forward(struct wk *w, const struct ipk_pkt *k)
{
	struct ipk_workers *ws = w->ws;
	uint32_t len = k->len < WK_ARP_MAX ? k->len : WK_ARP_MAX;
	const uint8_t *f = ipk_pkt_mtod(k);
	unsigned j;

	/* ARP's padding may be cut; an IPv6 packet cut short would be dropped by every
	 * core as truncated, so do not send it at all (ND retries). */
	if (len < k->len && f[12] == (ETHERTYPE_IP6 >> 8) && f[13] == (ETHERTYPE_IP6 & 0xff)) {
		WK_INC_MT(w->st.steer_drops);
		return;
	}

	for (j = 0; j < ws->n; j++) {
		struct wk *d = &ws->w[j];
		struct wk_arp *a;

		if (j == w->idx)
			continue;
		a = (struct wk_arp *)spsc_prod_slot(&d->arp_in[w->idx]);
		if (!a) {
			WK_INC_MT(w->st.steer_drops);
			continue;
		}
		a->len = (uint16_t)len;
		memcpy(a->b, ipk_pkt_mtod(k), len);
		spsc_prod_commit(&d->arp_in[w->idx]);
		waker_kick(&d->net_wake);
		WK_INC(w->st.arp_forwarded);
	}
}

/* ARP frames the other workers forwarded to us, into our pool: at most n. */
static int wio_arp_take(struct wk *w, struct ipk_pool *pool, struct ipk_pkt **pkts, int n)
{
	unsigned j;
	int got = 0;

	for (j = 0; j < w->ws->n && got < n; j++) {
		struct spsc *r = &w->arp_in[j];
		uint32_t avail = j == w->idx ? 0 : spsc_cons_avail(r), i;

		for (i = 0; i < avail && got < n; i++) {
			const struct wk_arp *a = (const struct wk_arp *)spsc_cons_slot(r, i);
			struct ipk_pkt *k = ipk_pkt_alloc(pool);

			if (!k) {
				WK_INC_MT(w->st.steer_drops);
				continue;
			}
			memcpy(ipk_pkt_mtod(k), a->b, a->len);
			k->len = a->len;
			pkts[got++] = k;
		}
		if (i)
			spsc_cons_release(r, i);
	}
	return got;
}

static int wio_arp_waiting(const struct wk *w)
{
	unsigned j;

	for (j = 0; w->arp_in && j < w->ws->n; j++)
		if (j != w->idx && !spsc_empty(&w->arp_in[j]))
			return 1;
	return 0;
}

static int wio_q_rx(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct wk *w = wio_wk(io);
	int fwd = w->arp_in ? wio_arp_take(w, io->pool, pkts, n) : 0;
	int got = ipk_io_rx_burst(w->inner, pkts + fwd, n - fwd), i;

	if (got < 0) /* the device failed: still hand over the forwarded frames */
		return fwd ? fwd : got;
	for (i = fwd; w->arp_in && i < fwd + got; i++)
		if (wio_is_arp(pkts[i], io->caps.link))
			wio_arp_forward(w, pkts[i]);
	got += fwd;
	if (got > 0)
		wio_check(w, pkts, got, io->caps.link);
	return got;
}

static int wio_q_tx(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	return ipk_io_tx_burst(wio_wk(io)->inner, pkts, n);
}

static int wio_q_flush(struct ipk_io *io)
{
	return ipk_io_flush(wio_wk(io)->inner);
}

static int wio_q_fd(const struct ipk_io *io)
{
	return wio_wk(io)->epfd;
}

static int wio_q_arm(struct ipk_io *io)
{
	struct wk *w = wio_wk(io);

	if (ipk_io_arm(w->inner) > 0)
		return 1;
	waker_arm(&w->net_wake);
	return wk_net_pending(w) || wio_arp_waiting(w);
}

static void wio_q_close(struct ipk_io *io)
{
	struct wk *w = wio_wk(io);

	ipk_io_close(w->inner);
	w->inner = NULL;
	io->inner = NULL;
	if (w->epfd >= 0)
		close(w->epfd);
	w->epfd = -1;
}

static const struct ipk_io_backend wio_soft_backend = {
	"worker", sizeof(struct wio_priv), NULL, wio_soft_rx, wio_soft_tx, wio_soft_flush,
	wio_soft_fd, wio_soft_arm, wio_soft_close,
};
static const struct ipk_io_backend wio_q_backend = {
	"worker", sizeof(struct wio_priv), NULL, wio_q_rx, wio_q_tx, wio_q_flush,
	wio_q_fd, wio_q_arm, wio_q_close,
};

/* ------------------------------------------------------------------ open */

static int wio_epoll(struct wk *w, char *err, size_t errlen)
{
	struct epoll_event ev;
	int fds[2], i;

	fds[0] = ipk_io_fd(w->inner);
	fds[1] = w->net_wake.efd;
	w->epfd = -1;
	if (fds[0] < 0)
		return 0; /* a backend that can only be polled: the node naps, then polls */
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epfd < 0)
		return ipk_io_err(err, errlen, errno, "worker %u: epoll_create1: %s", w->idx,
		                  strerror(errno));
	for (i = 0; i < 2; i++) {
		memset(&ev, 0, sizeof(ev));
		ev.events = EPOLLIN;
		if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fds[i], &ev) < 0)
			return ipk_io_err(err, errlen, errno, "worker %u: epoll_ctl: %s", w->idx,
			                  strerror(errno));
	}
	return 0;
}

/*
 * IPK_STEER_QUEUES on a DPDK port: the first queue opened configured the port, so
 * its RSS is known now, before any worker's core is configured (the node opens its
 * backend first). Every worker takes the port's key, table and hash fields. A port
 * without usable RSS fails the start with no_port_rss set: ipk_workers_start then
 * falls back to software steering. Other backends keep the configured RSS.
 */
static int wio_port_rss(struct wk *w, char *err, size_t errlen)
{
	struct ipk_workers *ws = w->ws;
	struct ipk_dpdk_rss *r;
	char why[160];
	int rc;

	if (w->idx != 0 || ws->n < 2)
		return 0;
	r = (struct ipk_dpdk_rss *)malloc(sizeof(*r));
	if (!r)
		return ipk_io_err(err, errlen, ENOMEM, "workers: out of memory");
	rc = ipk_dpdk_rss_get(w->inner, r, why, sizeof(why));
	if (rc == -ENOTSUP)
		rc = 0;
	else if (rc < 0) {
		ws->no_port_rss = 1;
		rc = ipk_io_err(err, errlen, -rc, "%s: the port has no usable RSS (%s)",
		                ws->cfg.node.io_spec, why);
	} else if ((rc = wk_rss_install(ws, r->key, r->fields, r->reta, r->reta_size, err,
	                                errlen)) == 0) {
		fprintf(stderr, "workers: queue steering by the port's RSS (key and %u-entry "
		        "table read back from the port)\n", (unsigned)r->reta_size);
	}
	free(r);
	return rc;
}

/* IPK_STEER_QUEUES: this worker's queue of the real backend. */
static int wio_open_queue(struct wk *w, struct ipk_pool *pool, char *err, size_t errlen)
{
	const char *spec = w->ws->cfg.node.io_spec;
	char buf[600];

	if (!spec)
		return ipk_io_err(err, errlen, EINVAL, "workers: no backend given");
	if (w->ws->n > 1 && !strstr(spec, "queue="))
		snprintf(buf, sizeof(buf), "%s,queue=%u", spec, w->idx);
	else
		snprintf(buf, sizeof(buf), "%s", spec);
	w->inner = ipk_io_open(buf, pool, err, errlen);
	if (!w->inner)
		return -EINVAL;
	if (wio_port_rss(w, err, errlen) < 0)
		return -EINVAL;
	return wio_epoll(w, err, errlen);
}

struct ipk_io *wio_open(struct ipk_pool *pool, void *arg, char *err, size_t errlen)
{
	struct wk *w = (struct wk *)arg;
	int soft = w->ws->soft;
	size_t sz = (sizeof(struct ipk_io) + 63) & ~(size_t)63;
	struct ipk_io *io = (struct ipk_io *)calloc(1, sz + sizeof(struct wio_priv));

	if (!io) {
		ipk_io_err(err, errlen, ENOMEM, "workers: out of memory");
		return NULL;
	}
	io->be = soft ? &wio_soft_backend : &wio_q_backend;
	io->pool = pool;
	io->priv = (uint8_t *)io + sz;
	((struct wio_priv *)io->priv)->w = w;
	snprintf(io->name, sizeof(io->name), "worker%u:%s", w->idx,
	         w->ws->cfg.node.io_spec ? w->ws->cfg.node.io_spec : "");
	if (soft) {
		/* Transmit: the reader copies each frame into one of its buffers, so no
		 * chains (SG) and no TSO super-frames; checksum offloads pass through.
		 * Receive: coalesced frames (LRO) are copied whole (wio_copy_in). */
		io->caps = *steer_caps(w->ws->steer);
		io->caps.offloads &= IPK_CAP_RX_CSUM_IP4 | IPK_CAP_RX_CSUM_L4 | IPK_CAP_LRO |
		                     IPK_CAP_TX_CSUM_IP4 | IPK_CAP_TX_CSUM_TCP | IPK_CAP_TX_CSUM_UDP;
		io->caps.nqueues = 1;
		return io;
	}
	w->epfd = -1;
	if (wio_open_queue(w, pool, err, errlen) < 0) {
		wio_q_close(io);
		free(io);
		return NULL;
	}
	io->caps = *ipk_io_caps(w->inner);
	/* as the pcap wrapper does: ipk_io_set_addr and ipk_io_stats reach the device */
	io->inner = w->inner;
	return io;
}
