/*
 * dpdk: one queue of a DPDK port (physical NIC or vdev: net_tap, net_memif,
 * net_af_packet, net_vhost/net_virtio_user, net_ring, ...).
 *
 *   dpdk:PORT[,queue=Q][,queues=N][,offload=0|1][,txzc=0|1][,lro=0|1][,rxd=N][,txd=N]
 *        [,VDEV-ARG=...]
 *
 * PORT is a port id or a device name. A name EAL does not know yet (e.g. net_tap0) is
 * hot-plugged as a vdev, with every option ipkit does not know passed on as its
 * devargs: dpdk:net_memif0,role=server,socket=/tmp/m.sock.
 *
 * Packets. Transmit is zero-copy: every descriptor of an ipkit chain becomes an mbuf
 * whose data is the ipkit buffer itself (rte_pktmbuf_attach_extbuf; the shared-info
 * block comes from a per-instance slab, its free callback releases the ipkit
 * descriptor when the PMD is done). The pool area is registered with EAL
 * (rte_extmem_register) and mapped for DMA where the device needs it. txzc=0 copies
 * instead (for comparison). Receive copies each mbuf into a pool packet: the ipkit
 * pool has its own free lists, so letting the NIC fill its buffers would need the
 * pool to be an rte_mempool; one copy on receive is what the vdevs here cost anyway
 * (net_tap, net_memif and net_af_packet copy between the kernel or the peer and the
 * mbuf), and it frees the mbuf at once so the rx ring never starves.
 *
 * Offloads: see dpdk_port.c (probed per port, one line printed on stderr at start).
 * Wake-ups (dp_arm): for DP_SPIN_US after the last frame received or sent the queue is
 * polled without sleeping (a reply usually comes within that, so a ping-pong runs at
 * busy-poll latency); after that the runtime sleeps on ipk_io_fd, an epoll set of the
 * queue's rx interrupt fd (where the PMD has one) and a timerfd. Without an interrupt
 * (22.11's net_memif) the timer wakes the loop to poll, each nap twice the last, from
 * DP_NAP_MIN_NS up to DP_NAP_MAX_NS, so an idle queue costs about 1,000 polls a second.
 * --busy-poll never sleeps.
 */
#include "dpdk_internal.h"

#ifdef IPK_DPDK_REAL

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ip.h>
#include <rte_memory.h>

#define DP_PENDING 256 /* built mbufs the device did not take yet (ipkit gave them to us) */
#define DP_MAX_SEGS 64
#define DP_SPIN_US 100u          /* poll without sleeping this long after traffic */
#define DP_NAP_MIN_NS 20000u     /* no rx interrupt: first nap after the spin ... */
#define DP_NAP_MAX_NS 1000000u   /* ... doubling up to this (idle: ~1,000 polls/s) */

/* The shared-info block of one zero-copy buffer. It must outlive every mbuf that
 * points at the buffer: a PMD may attach indirect mbufs to ours (net_tap's GSO does)
 * and free our mbuf first, so it cannot sit in the mbuf's private area. */
struct dp_sh {
	struct rte_mbuf_ext_shared_info sh;
	struct ipk_pkt *k;
	struct dp_priv *owner;
	struct dp_sh *next_free;
};

struct dp_priv {
	struct ipk_dpdk_port *port;
	uint16_t port_id, queue;
	int txzc;
	int extmem;                  /* the pool area is registered with EAL */
	int dma_mapped;              /* ... and DMA-mapped for the device */
	void *area;
	size_t area_size;
	struct rte_mempool *tx_mp;   /* mbuf headers for zero-copy tx, buffers for copies */
	struct rte_mbuf *pend[DP_PENDING];
	uint32_t npend;
	int rx_fd;                   /* rx interrupt fd, -1: poll only */
	int rx_fd_eventfd;           /* ... an eventfd, drained before sleeping */
	int no_intr;                 /* the PMD gave no interrupt fd: poll */
	int armed;                   /* interrupt enabled (until the next rx_burst) */
	int epfd;                    /* ipk_io_fd: rx_fd (when known) + tfd */
	int tfd;                     /* timerfd: the naps of a queue without interrupt */
	int ep_rx_fd;                /* the rx_fd in epfd, -1: none yet */
	uint64_t busy_tsc;           /* TSC of the last frame received or sent */
	uint32_t nap_ns;             /* next nap without interrupt */
	uint64_t spin_tsc;           /* DP_SPIN_US in TSC cycles */
	struct rte_mbuf *stash[IPK_DPDK_BURST]; /* received by arm, handed out next */
	uint16_t nstash;
	uint64_t stall_since;        /* TSC when the device last refused everything pending */
	struct dp_sh *sh_slab;       /* one per tx mbuf */
	struct dp_sh *sh_free;
	uint32_t sh_n;
};

static struct dp_priv *dp_priv(const struct ipk_io *io) { return (struct dp_priv *)io->priv; }

/* ------------------------------------------------------------------ rx */

static uint32_t dp_rx_csum(uint64_t ol)
{
	uint32_t r = 0;

	if ((ol & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_GOOD)
		r |= IPK_RXCSUM_IP4_GOOD;
	else if ((ol & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_BAD)
		r |= IPK_RXCSUM_IP4_BAD;
	/* NONE: the sender left the checksum field partial (virtio's NEEDS_CSUM, e.g.
	 * net_vhost receiving from a virtio_user that offloads its tx checksum) and the
	 * data came over memory, so it is intact: good, and checking it would fail. */
	if ((ol & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_GOOD ||
	    (ol & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_NONE)
		r |= IPK_RXCSUM_L4_GOOD;
	else if ((ol & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_BAD)
		r |= IPK_RXCSUM_L4_BAD;
	return r;
}

/* Copy one received mbuf (maybe a chain: scatter, LRO) into a pool packet. */
static struct ipk_pkt *dp_rx_copy(struct ipk_io *io, const struct rte_mbuf *m)
{
	struct ipk_pkt *k = ipk_pkt_alloc(io->pool);
	uint32_t room;
	uint8_t *dst;

	if (!k)
		return NULL;
	room = ipk_pool_buf_size(io->pool) - k->off;
	if (m->pkt_len > room || m->pkt_len == 0) {
		ipk_pkt_free(k);
		return NULL;
	}
	dst = ipk_pkt_mtod(k);
	for (; m; m = m->next) {
		memcpy(dst, rte_pktmbuf_mtod(m, const uint8_t *), m->data_len);
		dst += m->data_len;
	}
	k->len = (uint32_t)(dst - ipk_pkt_mtod(k));
	return k;
}

/* Traffic: keep polling for DP_SPIN_US, and start the naps short again. */
static void dp_busy(struct dp_priv *p)
{
	p->busy_tsc = rte_get_tsc_cycles();
	p->nap_ns = DP_NAP_MIN_NS;
}

static int dp_rx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct dp_priv *p = dp_priv(io);
	struct rte_mbuf *ms[IPK_DPDK_BURST];
	uint16_t got, i;
	int k = 0;

	if (p->armed) {
		/* awake: no interrupts while we poll (memif's peer would kick per burst) */
		(void)rte_eth_dev_rx_intr_disable(p->port_id, p->queue);
		p->armed = 0;
	}
	if (n > IPK_DPDK_BURST)
		n = IPK_DPDK_BURST;
	if (p->nstash) {
		got = p->nstash < n ? p->nstash : (uint16_t)n;
		memcpy(ms, p->stash, got * sizeof(ms[0]));
		memmove(p->stash, p->stash + got, (p->nstash - got) * sizeof(ms[0]));
		p->nstash = (uint16_t)(p->nstash - got);
	} else {
		got = rte_eth_rx_burst(p->port_id, p->queue, ms, (uint16_t)n);
	}
	for (i = 0; i < got; i++) {
		/* a chain longer than what nb_segs says is the PMD's bug, not ours to
		 * follow: the copy stops at pkt_len bytes of room anyway */
		struct ipk_pkt *pk = dp_rx_copy(io, ms[i]);

		if (!pk) {
			io->st.rx_drops++;
			continue;
		}
		if (io->caps.offloads & (IPK_CAP_RX_CSUM_IP4 | IPK_CAP_RX_CSUM_L4))
			pk->rx_csum = dp_rx_csum(ms[i]->ol_flags);
		io->st.rx_pkts++;
		io->st.rx_bytes += pk->len;
		pkts[k++] = pk;
	}
	if (got) {
		rte_pktmbuf_free_bulk(ms, got);
		dp_busy(p);
	}
	return k;
}

/* ------------------------------------------------------------------ tx */

/* The PMD (or GSO) released the last mbuf pointing at an ipkit buffer. Runs on the
 * thread that frees the mbuf: the instance's own, as DPDK frees tx mbufs inside
 * rte_eth_tx_burst / tx_done_cleanup / queue release. */
static void dp_extbuf_free(void *addr, void *opaque)
{
	struct dp_sh *s = (struct dp_sh *)opaque;

	(void)addr;
	ipk_pkt_free(s->k);
	s->k = NULL;
	s->next_free = s->owner->sh_free;
	s->owner->sh_free = s;
}

static rte_iova_t dp_iova(const void *va)
{
	if (rte_eal_iova_mode() == RTE_IOVA_VA)
		return (rte_iova_t)(uintptr_t)va;
	return rte_mem_virt2iova(va);
}

/* The mbuf for one ipkit descriptor: its buffer attached, no copy. The descriptor
 * now belongs to the mbuf (freed by dp_extbuf_free). */
static void dp_attach(struct rte_mbuf *m, struct ipk_pkt *s, struct dp_sh *slot)
{
	uint8_t *data = ipk_pkt_mtod(s);

	slot->k = s;
	slot->sh.free_cb = dp_extbuf_free;
	slot->sh.fcb_opaque = slot;
	rte_mbuf_ext_refcnt_set(&slot->sh, 1);
	rte_pktmbuf_attach_extbuf(m, data, dp_iova(data), (uint16_t)s->len, &slot->sh);
	m->data_off = 0;
	m->data_len = (uint16_t)s->len;
	m->pkt_len = s->len;
}

static uint32_t dp_nsegs(const struct ipk_pkt *k)
{
	uint32_t n = 0;

	for (; k; k = k->next)
		n++;
	return n;
}

/* Zero-copy chain: NULL when mbufs ran out (nothing taken). */
static struct rte_mbuf *dp_tx_zc(struct dp_priv *p, struct ipk_pkt *k, uint32_t nseg)
{
	struct rte_mbuf *ms[DP_MAX_SEGS];
	struct dp_sh *slot[DP_MAX_SEGS];
	uint32_t i;

	for (i = 0; i < nseg && p->sh_free; i++) {
		slot[i] = p->sh_free;
		p->sh_free = slot[i]->next_free;
	}
	if (i < nseg || rte_pktmbuf_alloc_bulk(p->tx_mp, ms, nseg) != 0) {
		while (i-- > 0) {
			slot[i]->next_free = p->sh_free;
			p->sh_free = slot[i];
		}
		return NULL;
	}
	for (i = 0; i < nseg; i++) {
		struct ipk_pkt *next = k->next;

		dp_attach(ms[i], k, slot[i]);
		k->next = NULL;
		if (i) {
			ms[i - 1]->next = ms[i];
			ms[0]->pkt_len += ms[i]->data_len;
		}
		k = next;
	}
	ms[0]->nb_segs = (uint16_t)nseg;
	return ms[0];
}

/* Copy into mbuf data rooms (a chain of them when the frame is larger than one and
 * the port takes multi-segment frames). NULL when out of mbufs. */
static struct rte_mbuf *dp_tx_copy(struct dp_priv *p, const struct ipk_pkt *k, uint32_t len,
                                   int multi)
{
	uint32_t room = rte_pktmbuf_data_room_size(p->tx_mp) - RTE_PKTMBUF_HEADROOM;
	uint32_t nseg = (len + room - 1) / room, i, done = 0, at = 0;
	struct rte_mbuf *ms[DP_MAX_SEGS];

	if (nseg == 0)
		nseg = 1;
	if ((nseg > 1 && !multi) || nseg > DP_MAX_SEGS || nseg > p->port->nb_seg_max ||
	    rte_pktmbuf_alloc_bulk(p->tx_mp, ms, nseg) != 0)
		return NULL;
	for (i = 0; i < nseg; i++) {
		uint32_t n = len - done < room ? len - done : room;
		uint8_t *d = rte_pktmbuf_mtod(ms[i], uint8_t *);
		uint32_t got = 0;

		/* walk the ipkit chain from where the previous mbuf stopped */
		while (got < n && k) {
			uint32_t c = k->len - at < n - got ? k->len - at : n - got;

			memcpy(d + got, ipk_pkt_mtod(k) + at, c);
			got += c;
			at += c;
			if (at == k->len) {
				k = k->next;
				at = 0;
			}
		}
		ms[i]->data_len = (uint16_t)n;
		done += n;
		if (i)
			ms[i - 1]->next = ms[i];
	}
	ms[0]->pkt_len = len;
	ms[0]->nb_segs = (uint16_t)nseg;
	return ms[0];
}

/* Offload marks: the core's ipk_tx_meta in mbuf terms. */
static void dp_tx_flags(struct ipk_io *io, struct rte_mbuf *m, const struct ipk_tx_meta *t)
{
	uint64_t ol = 0;

	if (!t->flags)
		return;
	if (t->flags & IPK_TXOFF_IP4_CSUM)
		ol |= RTE_MBUF_F_TX_IP_CKSUM;
	if (t->flags & IPK_TXOFF_TCP_CSUM)
		ol |= RTE_MBUF_F_TX_TCP_CKSUM;
	if (t->flags & IPK_TXOFF_UDP_CSUM)
		ol |= RTE_MBUF_F_TX_UDP_CKSUM;
	if ((t->flags & IPK_TXOFF_TSO) &&
	    (io->caps.offloads & ((t->flags & IPK_TXOFF_IP6) ? IPK_CAP_TSO6 : IPK_CAP_TSO))) {
		uint32_t hdrs = (uint32_t)t->l2_len + t->l3_len + t->l4_len;
		const struct ipk_dpdk_port *pt = dp_priv(io)->port;

		ol |= RTE_MBUF_F_TX_TCP_SEG | RTE_MBUF_F_TX_TCP_CKSUM;
		m->tso_segsz = t->mss;
		if (pt->tso_sw && t->mss + hdrs > pt->mtu && pt->mtu > hdrs)
			m->tso_segsz = (uint16_t)(pt->mtu - hdrs);
	}
	/* the family the PMD sums the pseudo-header of (no IPv6 header checksum) */
	m->ol_flags |= ol | ((t->flags & IPK_TXOFF_IP6) ? RTE_MBUF_F_TX_IPV6 : RTE_MBUF_F_TX_IPV4);
	m->l2_len = t->l2_len;
	m->l3_len = t->l3_len;
	m->l4_len = t->l4_len;
}

/* DPDK wants the TCP checksum field of a TSO frame to hold the pseudo-header sum
 * without the length (each segment's length is added by the device); the core wrote
 * it with the whole frame's length. Headers are in the first segment (checked). */
static int dp_tso_phdr(struct rte_mbuf *m)
{
	uint8_t *ip;
	uint16_t sum;

	if (!(m->ol_flags & RTE_MBUF_F_TX_TCP_SEG))
		return 0;
	if ((uint32_t)m->l2_len + m->l3_len + m->l4_len > m->data_len || m->l4_len < 20)
		return -1;
	ip = rte_pktmbuf_mtod(m, uint8_t *) + m->l2_len;
	if (m->ol_flags & RTE_MBUF_F_TX_IPV6) /* RFC 8200 §8.1's pseudo-header */
		sum = rte_ipv6_phdr_cksum((const struct rte_ipv6_hdr *)(void *)ip, m->ol_flags);
	else
		sum = rte_ipv4_phdr_cksum((const struct rte_ipv4_hdr *)(void *)ip, m->ol_flags);
	memcpy(ip + m->l3_len + 16, &sum, 2);
	return 0;
}

/* 1 when no piece of chain k is an external buffer (ipk_pkt_attach_ext): such
 * memory is not in the area registered with EAL (rte_extmem_register), so it has no
 * IOVA a device may use: that chain is copied. */
static int dp_no_ext(const struct ipk_pkt *k)
{
	for (; k; k = k->next)
		if (k->idx == IPK_PKT_IDX_EXT)
			return 0;
	return 1;
}

/* Build the mbuf for k. NULL: no mbufs now (k stays the caller's). */
static struct rte_mbuf *dp_tx_build(struct ipk_io *io, struct ipk_pkt *k, int *drop)
{
	struct dp_priv *p = dp_priv(io);
	uint32_t nseg = dp_nsegs(k), len = ipk_pkt_chain_len(k);
	int multi = (io->caps.offloads & IPK_CAP_SG) != 0;
	struct ipk_tx_meta meta = k->meta;
	struct rte_mbuf *m;

	*drop = 0;
	if (p->txzc && nseg <= DP_MAX_SEGS && nseg <= p->port->nb_seg_max &&
	    (nseg == 1 || multi) && k->pool == io->pool && dp_no_ext(k) &&
	    !(p->port->tso_sw && (meta.flags & IPK_TXOFF_TSO))) {
		m = dp_tx_zc(p, k, nseg);
	} else {
		m = dp_tx_copy(p, k, len, multi);
		if (!m && (len > RTE_MBUF_DEFAULT_DATAROOM || nseg > DP_MAX_SEGS)) {
			*drop = 1; /* can never be sent: taken and dropped */
			ipk_pkt_free_chain(k);
			return NULL;
		}
		if (m)
			ipk_pkt_free_chain(k);
	}
	if (m) {
		dp_tx_flags(io, m, &meta);
		if (dp_tso_phdr(m) < 0) {
			rte_pktmbuf_free(m);
			*drop = 1;
			return NULL;
		}
	}
	return m;
}

static int dp_stalled(struct dp_priv *p)
{
	uint64_t now = rte_get_tsc_cycles();

	if (!p->stall_since) {
		p->stall_since = now;
		return 0;
	}
	return now - p->stall_since > rte_get_tsc_hz();
}

/* Give pending mbufs to the device, keep the rest in order. */
static void dp_push(struct ipk_io *io)
{
	struct dp_priv *p = dp_priv(io);
	uint16_t ok, sent;

	if (!p->npend)
		return;
	ok = rte_eth_tx_prepare(p->port_id, p->queue, p->pend, (uint16_t)p->npend);
	if (ok < p->npend) {
		/* the PMD rejects this frame's offload request: drop it (the core
		 * retransmits) rather than retry it forever */
		io->st.tx_errors++;
		rte_pktmbuf_free(p->pend[ok]);
		memmove(p->pend + ok, p->pend + ok + 1, (p->npend - ok - 1) * sizeof(p->pend[0]));
		p->npend--;
	}
	sent = rte_eth_tx_burst(p->port_id, p->queue, p->pend, ok);
	if (sent == 0 && dp_stalled(p)) {
		/* A PMD that refuses one frame for good (it does not say so) would block
		 * the queue forever: after a second without progress drop the head frame
		 * and count it; TCP retransmits it. */
		io->st.tx_errors++;
		rte_pktmbuf_free(p->pend[0]);
		sent = 1;
	}
	if (sent)
		p->stall_since = 0;
	if (sent < p->npend)
		memmove(p->pend, p->pend + sent, (p->npend - sent) * sizeof(p->pend[0]));
	p->npend -= sent;
}

static int dp_tx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct dp_priv *p = dp_priv(io);
	int i;

	dp_push(io);
	for (i = 0; i < n && p->npend < DP_PENDING; i++) {
		uint32_t len = ipk_pkt_chain_len(pkts[i]);
		int drop;
		struct rte_mbuf *m = dp_tx_build(io, pkts[i], &drop);

		if (drop) {
			io->st.tx_errors++;
			continue;
		}
		if (!m)
			break;
		p->pend[p->npend++] = m;
		io->st.tx_pkts++;
		io->st.tx_bytes += len;
	}
	io->st.tx_drops += (uint64_t)(n - i);
	dp_push(io);
	if (i)
		dp_busy(p);
	return i;
}

static int dp_flush(struct ipk_io *io)
{
	dp_push(io);
	return 0;
}

static void dp_rx_fd(struct dp_priv *p);

static int dp_fd(const struct ipk_io *io)
{
	struct dp_priv *p = dp_priv(io);

	dp_rx_fd(p);
	return p->epfd;
}

/* Interrupt mode: enable the queue's interrupt, then look once more, since frames
 * that arrived before the enable raised none. What the look finds is kept for the
 * next rx_burst and the runtime does not sleep. */
static int dp_arm_intr(struct dp_priv *p)
{
	uint64_t v;

	if (p->rx_fd_eventfd)
		while (read(p->rx_fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
			;
	if (!p->armed && rte_eth_dev_rx_intr_enable(p->port_id, p->queue) == 0)
		p->armed = 1;
	p->nstash = rte_eth_rx_burst(p->port_id, p->queue, p->stash, IPK_DPDK_BURST);
	return p->nstash ? 1 : 0;
}

/* No interrupt: look once, then let the timer end the sleep after the next nap. */
static int dp_arm_nap(struct dp_priv *p)
{
	struct itimerspec its;

	p->nstash = rte_eth_rx_burst(p->port_id, p->queue, p->stash, IPK_DPDK_BURST);
	if (p->nstash)
		return 1;
	memset(&its, 0, sizeof(its));
	its.it_value.tv_nsec = (long)p->nap_ns;
	if (timerfd_settime(p->tfd, 0, &its, NULL) < 0)
		return 1; /* cannot sleep safely: poll on */
	if (p->nap_ns < DP_NAP_MAX_NS)
		p->nap_ns = p->nap_ns * 2u < DP_NAP_MAX_NS ? p->nap_ns * 2u : DP_NAP_MAX_NS;
	return 0;
}

/* Before the runtime sleeps on the fd. Within DP_SPIN_US of traffic: do not sleep,
 * only yield (under the merge model the application thread shares this CPU and
 * must get to run). */
static int dp_arm(struct ipk_io *io)
{
	struct dp_priv *p = dp_priv(io);
	uint64_t v;

	if (p->nstash)
		return 1;
	if (rte_get_tsc_cycles() - p->busy_tsc < p->spin_tsc) {
		sched_yield();
		return 1;
	}
	while (read(p->tfd, &v, sizeof(v)) == (ssize_t)sizeof(v))
		; /* an expired nap */
	/* the interrupt fd may come only with the link (memif, vhost): callers that took
	 * ipk_io_fd once (the workers' epoll sets) still get it through epfd */
	dp_rx_fd(p);
	return p->rx_fd >= 0 ? dp_arm_intr(p) : dp_arm_nap(p);
}

/* A new rx interrupt fd joins the epoll set (the old one, if any, was closed by the
 * PMD, which took it out of the set). */
static void dp_ep_add(struct dp_priv *p)
{
	struct epoll_event ev;

	if (p->rx_fd < 0 || p->rx_fd == p->ep_rx_fd)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->rx_fd, &ev) == 0 || errno == EEXIST)
		p->ep_rx_fd = p->rx_fd;
	else
		p->rx_fd = -1; /* cannot wait on it: nap and poll instead */
}

/* The queue's interrupt fd when the PMD has one (an eventfd, or a device fd such as
 * net_tap's). Some PMDs make it only once connected (and anew on a reconnect), so it
 * is asked for whenever the link is up. Only an eventfd is drained before sleeping:
 * reading a device fd would eat a frame. */
static void dp_rx_fd(struct dp_priv *p)
{
	struct rte_eth_link lk;
	char path[64], link[64];
	ssize_t n;
	int fl, fd;

	if (!p->port->rxq_intr || p->no_intr || rte_eth_link_get_nowait(p->port_id, &lk) != 0 ||
	    lk.link_status != RTE_ETH_LINK_UP) {
		p->rx_fd = -1;
		return;
	}
	fd = rte_eth_dev_rx_intr_ctl_q_get_fd(p->port_id, p->queue);
	if (fd < 0 || p->epfd < 0) {
		/* configured, link up, still no fd (22.11's memif): poll from now on */
		p->rx_fd = -1;
		p->no_intr = 1;
		return;
	}
	if (fd == p->rx_fd && fd == p->ep_rx_fd)
		return;
	p->rx_fd = fd;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p->rx_fd);
	n = readlink(path, link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = 0;
	p->rx_fd_eventfd = strstr(link, "eventfd") != NULL;
	fl = fcntl(p->rx_fd, F_GETFL);
	if (p->rx_fd_eventfd && fl >= 0)
		(void)fcntl(p->rx_fd, F_SETFL, fl | O_NONBLOCK);
	dp_ep_add(p);
}

/* The epoll set ipk_io_fd returns, with the nap timer in it. */
static int dp_wait_init(struct ipk_io *io, char *err, size_t el)
{
	struct dp_priv *p = dp_priv(io);
	struct epoll_event ev;

	p->spin_tsc = rte_get_tsc_hz() / 1000000u * DP_SPIN_US;
	p->nap_ns = DP_NAP_MIN_NS;
	p->ep_rx_fd = -1;
	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	p->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (p->epfd < 0 || p->tfd < 0)
		return ipk_io_err(err, el, errno, "dpdk:%s: epoll/timerfd: %s", p->port->name,
		                  strerror(errno));
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->tfd, &ev) < 0)
		return ipk_io_err(err, el, errno, "dpdk:%s: epoll_ctl: %s", p->port->name,
		                  strerror(errno));
	return 0;
}

/* --------------------------------------------------------------- set-up */

/* EAL must know the pool area for IOVA lookups, and a device doing DMA must have it
 * mapped. vdevs copy in software and need neither: failures there are harmless, so
 * they only turn zero-copy off when the IOVA cannot be known. */
static void dp_extmem(struct ipk_io *io)
{
	struct dp_priv *p = dp_priv(io);
	struct rte_eth_dev_info info;
	long pg = sysconf(_SC_PAGESIZE);

	p->area = ipk_pool_area(io->pool, &p->area_size);
	if (p->port->tx_copy && p->txzc) {
		fprintf(stderr, "dpdk:%s: the vhost-user peer sees only EAL memory; transmit "
		        "copies (txzc=0)\n", p->port->name);
		p->txzc = 0;
	}
	if (p->port->vhost_user)
		return;
	if (rte_extmem_register(p->area, p->area_size, NULL, 0, (size_t)pg) == 0)
		p->extmem = 1;
	if (p->extmem && rte_eth_dev_info_get(p->port_id, &info) == 0 && info.device &&
	    rte_dev_dma_map(info.device, p->area, (uint64_t)(uintptr_t)p->area,
	                    p->area_size) == 0)
		p->dma_mapped = 1;
	if (rte_eal_iova_mode() != RTE_IOVA_VA && p->txzc) {
		fprintf(stderr, "dpdk:%s: IOVA mode is PA; transmit copies (txzc=0)\n",
		        p->port->name);
		p->txzc = 0;
	}
}

static void dp_close(struct ipk_io *io)
{
	struct dp_priv *p = dp_priv(io);
	struct rte_eth_dev_info info;

	if (!p->port)
		return;
	rte_pktmbuf_free_bulk(p->pend, p->npend); /* frees the ipkit descriptors too */
	p->npend = 0;
	rte_pktmbuf_free_bulk(p->stash, p->nstash);
	p->nstash = 0;
	/* Frames still in the tx ring hold pool buffers: let the PMD release them. */
	(void)rte_eth_tx_done_cleanup(p->port_id, p->queue, 0);
	if (p->dma_mapped && rte_eth_dev_info_get(p->port_id, &info) == 0 && info.device)
		(void)rte_dev_dma_unmap(info.device, p->area, (uint64_t)(uintptr_t)p->area,
		                        p->area_size);
	ipk_dpdk_port_release(p->port, p->queue);
	if (p->extmem)
		(void)rte_extmem_unregister(p->area, p->area_size);
	rte_mempool_free(p->tx_mp);
	free(p->sh_slab);
	p->sh_slab = NULL;
	p->port = NULL;
	if (p->epfd >= 0)
		close(p->epfd);
	if (p->tfd >= 0)
		close(p->tfd);
	p->epfd = p->tfd = -1;
}

struct dp_opts {
	long queue, queues, rxd, txd;
	int offload, txzc, lro;
	char devargs[256];
};

static int dp_known(const char *key)
{
	static const char *const known[] = { "queue", "queues", "offload", "txzc", "lro", "rxd",
	                                     "txd", NULL };
	int i;

	for (i = 0; known[i]; i++)
		if (strcmp(known[i], key) == 0)
			return 1;
	return 0;
}

/* ipkit's options; the others become vdev devargs (only for a net_* name). */
static int dp_parse(const struct ipk_io_args *a, struct dp_opts *o, char *err, size_t el)
{
	size_t at = 0;
	int i;

	for (i = 0; i < a->nkv; i++) {
		if (dp_known(a->kv[i].key))
			continue;
		if (strncmp(a->dev, "net_", 4) != 0)
			return ipk_io_err(err, el, EINVAL, "dpdk: unknown option '%s'", a->kv[i].key);
		at += (size_t)snprintf(o->devargs + at, sizeof(o->devargs) - at, "%s%s=%s",
		                       at ? "," : "", a->kv[i].key, a->kv[i].val);
		if (at >= sizeof(o->devargs))
			return ipk_io_err(err, el, EINVAL, "dpdk:%s: vdev options too long", a->dev);
	}
	o->queue = ipk_io_arg_int(a, "queue", 0, err, el);
	o->queues = ipk_io_arg_int(a, "queues", o->queue >= 0 ? o->queue + 1 : 1, err, el);
	o->rxd = ipk_io_arg_int(a, "rxd", 0, err, el);
	o->txd = ipk_io_arg_int(a, "txd", 0, err, el);
	o->offload = ipk_io_arg_bool(a, "offload", 1, err, el);
	o->txzc = ipk_io_arg_bool(a, "txzc", 1, err, el);
	o->lro = ipk_io_arg_bool(a, "lro", 0, err, el);
	if (o->queue < 0 || o->queues < 0 || o->rxd < 0 || o->txd < 0 || o->offload < 0 ||
	    o->txzc < 0 || o->lro < 0)
		return -EINVAL;
	if (o->queues < 1 || o->queues > IPK_DPDK_MAX_QUEUES || o->queue >= o->queues)
		return ipk_io_err(err, el, EINVAL, "dpdk:%s: need queue < queues <= %d (queue=%ld "
		                  "queues=%ld)", a->dev, IPK_DPDK_MAX_QUEUES, o->queue, o->queues);
	if (o->rxd > 32768 || o->txd > 32768)
		return ipk_io_err(err, el, EINVAL, "dpdk:%s: rxd/txd at most 32768", a->dev);
	return 0;
}

static int dp_tx_pool(struct ipk_io *io, const struct dp_opts *o, char *err, size_t el)
{
	struct dp_priv *p = dp_priv(io);
	char name[RTE_MEMPOOL_NAMESIZE];
	static unsigned seq;
	unsigned i, n = 2u * (o->txd ? (unsigned)o->txd : 1024u) + DP_PENDING * 4u;

	snprintf(name, sizeof(name), "ipk_tx_%u_%u_%u", (unsigned)p->port_id, (unsigned)p->queue,
	         __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
	p->tx_mp = rte_pktmbuf_pool_create(name, n, 64, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
	                                   (int)rte_socket_id());
	if (!p->tx_mp)
		return ipk_io_err(err, el, ENOMEM, "dpdk:%s: no memory for %u tx mbufs (%s); give "
		                  "EAL more with -m MB", p->port->name, n, rte_strerror(rte_errno));
	p->sh_slab = (struct dp_sh *)calloc(n, sizeof(*p->sh_slab));
	if (!p->sh_slab)
		return ipk_io_err(err, el, ENOMEM, "dpdk:%s: out of memory", p->port->name);
	p->sh_n = n;
	for (i = 0; i < n; i++) {
		p->sh_slab[i].owner = p;
		p->sh_slab[i].next_free = i + 1 < n ? &p->sh_slab[i + 1] : NULL;
	}
	p->sh_free = p->sh_slab;
	return 0;
}

static int dp_open_inner(struct ipk_io *io, const struct ipk_io_args *a, char *err, size_t el)
{
	struct dp_priv *p = dp_priv(io);
	struct ipk_dpdk_req req;
	struct dp_opts o;
	char line[512];
	int rc;

	p->epfd = p->tfd = -1; /* dp_close on failure must not close fd 0 */
	memset(&o, 0, sizeof(o));
	if ((rc = dp_parse(a, &o, err, el)) < 0 || (rc = ipk_dpdk_eal_ensure(err, el)) < 0)
		return rc;
	memset(&req, 0, sizeof(req));
	req.nqueues = (uint16_t)o.queues;
	req.rxd = (uint16_t)o.rxd;
	req.txd = (uint16_t)o.txd;
	req.offload = o.offload;
	req.lro = o.lro;
	req.rx_room = ipk_pool_buf_size(io->pool) - ipk_pool_headroom(io->pool);
	rc = ipk_dpdk_port_acquire(a->dev, o.devargs, (uint16_t)o.queue, &req, &p->port, err, el);
	if (rc < 0)
		return rc;
	p->port_id = p->port->port_id;
	p->queue = (uint16_t)o.queue;
	p->txzc = o.txzc;
	if ((rc = dp_tx_pool(io, &o, err, el)) < 0)
		return rc;
	dp_extmem(io);
	p->rx_fd = -1;
	if ((rc = dp_wait_init(io, err, el)) < 0)
		return rc;
	dp_rx_fd(p);
	io->caps.offloads = p->port->caps;
	io->caps.tso_max = p->port->tso_max;
	io->caps.mtu = p->port->mtu;
	io->caps.nqueues = 1;
	io->caps.link = IPK_LINK_ETH;
	memcpy(io->caps.mac, p->port->mac, 6);
	ipk_dpdk_port_describe(p->port, line, sizeof(line));
	fprintf(stderr, "%s; queue=%u tx=%s\n", line, (unsigned)p->queue,
	        p->txzc ? "zero-copy" : "copy");
	return 0;
}

static int dp_open(struct ipk_io *io, const struct ipk_io_args *a, char *err, size_t el)
{
	int rc = dp_open_inner(io, a, err, el);

	if (rc < 0)
		dp_close(io);
	return rc;
}

/* dpdk_rss.h */
int ipk_dpdk_rss_get(const struct ipk_io *io, struct ipk_dpdk_rss *out, char *why,
                     size_t wl)
{
	const struct ipk_dpdk_port *pt;

	while (io && io->be != &ipk_io_dpdk_backend)
		io = io->inner; /* the pcap wrapper */
	if (!io || !dp_priv(io)->port)
		return ipk_io_err(why, wl, ENOTSUP, "not a DPDK port");
	pt = dp_priv(io)->port;
	if (!pt->rss)
		return ipk_io_err(why, wl, ENOENT, "%s", pt->rss_why);
	memcpy(out, pt->rss, sizeof(*out));
	return 0;
}

const struct ipk_io_backend ipk_io_dpdk_backend = {
	"dpdk", sizeof(struct dp_priv), dp_open, dp_rx_burst, dp_tx_burst, dp_flush,
	dp_fd, dp_arm, dp_close,
};

#else  /* !IPK_DPDK_REAL: dpdk_stub.c stands in */
typedef int ipk_dpdk_dpdk_unused_;
#endif
