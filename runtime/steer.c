/*
 * Software steering (IPK_STEER_SOFT): one reader thread owns the single backend queue
 * and its pool, and plays the NIC's RSS for the workers.
 *
 *   receive:  each frame goes to worker reta[toeplitz(4-tuple) % size] over that
 *             worker's rx ring (wk_frame_worker, the same rule the workers check);
 *             frames without an IP hash (ARP) and IPv6 Neighbor Discovery (each
 *             worker's core resolves its own neighbours, wio.c wk_is_nd) go to
 *             every worker, as clones. The
 *             worker copies the frame into its own pool and returns ours on rxret.
 *   transmit: each worker's tx ring is copied into our pool and sent; the worker's
 *             packet goes back on txret for the worker to free.
 * Everything that cannot be queued (ring full, no buffer) is dropped and counted: TCP
 * recovers, and a stuck worker never blocks the others.
 *
 * The reader sleeps (epoll on the backend's fd and its own eventfd) when a turn found
 * no work; workers kick the eventfd after queueing frames to send, only when armed.
 */
#include "workers_int.h"

#include "addr6.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define STEER_BURST 32
#define STEER_TXB 256
#define STEER_SLEEP_MS 100

struct steer {
	struct ipk_workers *ws;
	struct ipk_pool *pool;
	struct ipk_io *io;
	struct waker wake;
	int epfd;
	pthread_t thr;
	int started, cpu;
	struct ipk_pkt *txb[STEER_TXB];
	uint32_t txn;
	uint64_t rx, drops;
};

/* ------------------------------------------------------------- receive */

/* Our packets the workers have copied: free them. */
static uint32_t steer_reap(struct steer *s)
{
	uint32_t total = 0, i, j, n;

	for (j = 0; j < s->ws->n; j++) {
		struct spsc *r = &s->ws->w[j].rxret;

		n = spsc_cons_avail(r);
		for (i = 0; i < n; i++)
			ipk_pkt_free_chain(*(struct ipk_pkt **)spsc_cons_slot(r, i));
		if (n)
			spsc_cons_release(r, n);
		total += n;
	}
	return total;
}

/* Queue k for worker j, or drop it. Returns 1 when queued. */
static int steer_give(struct steer *s, unsigned j, struct ipk_pkt *k)
{
	if (spsc_push_ptr(&s->ws->w[j].rx, k) == 0)
		return 1;
	ipk_pkt_free_chain(k);
	WK_INC(s->drops);
	return 0;
}

/* A frame for every worker: the last gets the original, the others clones. */
static uint64_t steer_broadcast(struct steer *s, struct ipk_pkt *k)
{
	uint64_t touched = 0;
	unsigned j, n = s->ws->n;

	for (j = 0; j < n; j++) {
		struct ipk_pkt *c = j + 1 == n ? k : ipk_pkt_clone(k);

		if (!c) {
			WK_INC(s->drops);
			continue;
		}
		if (steer_give(s, j, c))
			touched |= 1ull << j;
	}
	return touched;
}

static uint32_t steer_rx(struct steer *s)
{
	struct ipk_pkt *pkts[STEER_BURST];
	uint64_t touched = 0;
	uint8_t link = ipk_io_caps(s->io)->link;
	unsigned j;
	int got, i;

	got = ipk_io_rx_burst(s->io, pkts, STEER_BURST);
	if (got <= 0)
		return 0;
	WK_ADD(s->rx, (uint64_t)got);
	for (i = 0; i < got; i++) {
		int q = wk_frame_worker(s->ws, pkts[i], link);

		if (q < 0)
			touched |= steer_broadcast(s, pkts[i]);
		else if (steer_give(s, (unsigned)q, pkts[i]))
			touched |= 1ull << q;
	}
	for (j = 0; j < s->ws->n; j++) {
		if (!(touched & (1ull << j)))
			continue;
		spsc_prod_commit(&s->ws->w[j].rx);
		waker_kick(&s->ws->w[j].net_wake);
	}
	return (uint32_t)got;
}

/* ------------------------------------------------------------ transmit */

static struct ipk_pkt *steer_copy_out(struct steer *s, const struct ipk_pkt *src)
{
	uint32_t room = ipk_pool_buf_size(s->pool) - ipk_pool_headroom(s->pool);
	struct ipk_pkt *d;

	if (ipk_pkt_chain_len(src) > room || !(d = ipk_pkt_alloc(s->pool))) {
		WK_INC(s->drops);
		return NULL;
	}
	d->len = ipk_pkt_linearize(src, ipk_pkt_mtod(d), room);
	d->meta = src->meta;
	return d;
}

static void steer_push(struct steer *s)
{
	int took;

	if (s->txn == 0)
		return;
	took = ipk_io_tx_burst(s->io, s->txb, (int)s->txn);
	if (took < 0)
		took = 0;
	if ((uint32_t)took < s->txn)
		memmove(s->txb, s->txb + took, (s->txn - (uint32_t)took) * sizeof(s->txb[0]));
	s->txn -= (uint32_t)took;
	ipk_io_flush(s->io);
}

/* Copy worker j's queued frames into our batch (as far as it and txret have room). */
static uint32_t steer_tx_one(struct steer *s, struct wk *w)
{
	uint32_t avail = spsc_cons_avail(&w->tx), room, m, i;

	if (avail == 0)
		return 0;
	room = spsc_prod_room(&w->txret);
	m = avail < room ? avail : room;
	if (m > STEER_TXB - s->txn)
		m = STEER_TXB - s->txn;
	for (i = 0; i < m; i++) {
		struct ipk_pkt *src = *(struct ipk_pkt **)spsc_cons_slot(&w->tx, i);
		struct ipk_pkt *d = steer_copy_out(s, src);

		if (d)
			s->txb[s->txn++] = d;
		spsc_push_ptr(&w->txret, src);
	}
	spsc_cons_release(&w->tx, m);
	spsc_prod_commit(&w->txret);
	return m;
}

static uint32_t steer_tx(struct steer *s)
{
	uint32_t total = 0, j;

	steer_push(s); /* what the device refused last turn goes first */
	for (j = 0; j < s->ws->n; j++) {
		total += steer_tx_one(s, &s->ws->w[j]);
		if (s->txn == STEER_TXB)
			steer_push(s);
	}
	steer_push(s);
	return total;
}

/* --------------------------------------------------------------- loop */

static int steer_idle(struct steer *s)
{
	unsigned j;

	if (wk_stopping(s->ws))
		return 0;
	for (j = 0; j < s->ws->n; j++)
		if (!spsc_empty(&s->ws->w[j].tx))
			return 0;
	return 1;
}

static void steer_sleep(struct steer *s)
{
	struct epoll_event ev[2];
	int ms = s->txn ? 1 : STEER_SLEEP_MS; /* device was full: retry soon */

	waker_arm(&s->wake);
	if (steer_idle(s) && ipk_io_arm(s->io) == 0) {
		if (s->epfd >= 0) {
			epoll_wait(s->epfd, ev, 2, ms);
		} else {
			struct timespec ts = {0, 50000};
			nanosleep(&ts, NULL);
		}
	}
	waker_disarm(&s->wake);
}

static void *steer_thread(void *arg)
{
	struct steer *s = (struct steer *)arg;

	if (s->cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(s->cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set) < 0)
			fprintf(stderr, "ipkit: steering reader cannot pin to CPU %d: %s\n", s->cpu,
			        strerror(errno));
	}
	while (!wk_stopping(s->ws)) {
		uint32_t work = steer_reap(s);

		work += steer_rx(s);
		work += steer_tx(s);
		if (work == 0)
			steer_sleep(s);
	}
	return NULL;
}

/* ----------------------------------------------------------- lifecycle */

static int steer_epoll(struct steer *s, char *err, size_t errlen)
{
	struct epoll_event ev;
	int fds[2], i;

	fds[0] = ipk_io_fd(s->io);
	fds[1] = s->wake.efd;
	if (fds[0] < 0)
		return 0;
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->epfd < 0) {
		snprintf(err, errlen, "steering: epoll_create1: %s", strerror(errno));
		return -errno;
	}
	for (i = 0; i < 2; i++) {
		memset(&ev, 0, sizeof(ev));
		ev.events = EPOLLIN;
		if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fds[i], &ev) < 0) {
			snprintf(err, errlen, "steering: epoll_ctl: %s", strerror(errno));
			return -errno;
		}
	}
	return 0;
}

int steer_set_addr6(struct steer *s, const struct ipk_config *c)
{
	return rt_io_set_addr6(s->io, c);
}

struct steer *steer_create(struct ipk_workers *ws, char *err, size_t errlen)
{
	const struct ipk_node_cfg *nc = &ws->cfg.node;
	struct steer *s = (struct steer *)calloc(1, sizeof(*s));

	if (!s) {
		snprintf(err, errlen, "steering: out of memory");
		return NULL;
	}
	s->ws = ws;
	s->epfd = -1;
	s->wake.efd = -1;
	s->pool = ipk_pool_create(&nc->pool, err, errlen);
	if (!s->pool || waker_init(&s->wake) < 0)
		goto fail;
	s->io = ipk_io_open(nc->io_spec, s->pool, err, errlen);
	if (!s->io)
		goto fail;
	/* backends that filter by address (afxdp) must let our traffic through */
	if (ipk_io_set_addr(s->io, nc->ip4_be, nc->mac) < 0) {
		snprintf(err, errlen, "steering: %s: cannot set the address filter", nc->io_spec);
		goto fail;
	}
	if (steer_epoll(s, err, errlen) < 0)
		goto fail;
	return s;
fail:
	steer_destroy(s);
	return NULL;
}

int steer_start(struct steer *s, int cpu)
{
	int rc;

	s->cpu = cpu;
	rc = pthread_create(&s->thr, NULL, steer_thread, s);
	if (rc != 0)
		return -rc;
	s->started = 1;
	return 0;
}

void steer_kick(struct steer *s)
{
	waker_kick(&s->wake);
}

/* Free the reader's packets still in flight to or from a worker. */
static void steer_drain(struct steer *s)
{
	unsigned j;
	uint32_t n, i;

	for (j = 0; j < s->ws->n; j++) {
		struct spsc *r = &s->ws->w[j].rx;

		if (!r->slots)
			continue;
		n = spsc_cons_avail(r);
		for (i = 0; i < n; i++)
			ipk_pkt_free_chain(*(struct ipk_pkt **)spsc_cons_slot(r, i));
		spsc_cons_release(r, n);
	}
	if (s->ws->w[0].rxret.slots)
		steer_reap(s);
	for (n = 0; n < s->txn; n++)
		ipk_pkt_free_chain(s->txb[n]);
	s->txn = 0;
}

void steer_stop(struct steer *s)
{
	if (s->started) {
		waker_kick(&s->wake);
		pthread_join(s->thr, NULL);
		s->started = 0;
	}
}

void steer_destroy(struct steer *s)
{
	if (!s)
		return;
	steer_stop(s);
	steer_drain(s);
	if (s->epfd >= 0)
		close(s->epfd);
	ipk_io_close(s->io);
	waker_fini(&s->wake);
	if (s->pool)
		ipk_pool_destroy(s->pool);
	free(s);
}

const struct ipk_io_caps *steer_caps(const struct steer *s)
{
	return ipk_io_caps(s->io);
}

void steer_stats(const struct steer *s, uint64_t *rx, uint64_t *drops)
{
	*rx = WK_GET(s->rx);
	*drops = WK_GET(s->drops);
}
