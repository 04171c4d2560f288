/*
 * One lwIP 2.1.3 instance (raw API, NO_SYS=1) running the in-memory workloads; built
 * twice with different LWI_API names (see lw_inst.h and build.sh). Frames leave
 * through linkoutput, which copies the pbuf chain into a receive pbuf of the other
 * instance: lwIP keeps transmitted pbufs for retransmission and its input path edits
 * the pbuf it is given, so a frame cannot be shared between two instances.
 */
#include <string.h>

#include "lwip/etharp.h"
#include "lwip/init.h"
#include "lwip/netif.h"
#include "lwip/pbuf.h"
#include "lwip/stats.h"
#include "lwip/tcp.h"
#include "lwip/timeouts.h"
#include "netif/ethernet.h"

#include "lw_inst.h"

struct lwc {
	struct tcp_pcb *pcb;
	uint32_t id;
	uint64_t k;        /* ping-pong: current request; bulk sender: bytes written */
	uint32_t off;      /* ping-pong client: im_req_off(id, k), stepped by im_req_next */
	uint32_t got;      /* ping-pong: bytes of the current reply */
	uint64_t rx_total; /* bulk receiver: bytes checked */
};

static struct lwi_shared *sh;
static struct netif nif;
static int me;
static u32_t now_ms;
static struct lwc conns[IM_MAX_CONNS];
static int nconns;

u32_t sys_now(void) { return now_ms; }

static void fail(const char *why)
{
	if (!sh->error)
		sh->error = why;
}

/* --wire handoff: one pbuf (every frame of these workloads: tcp_write copies into
 * one PBUF_RAM segment with room for the headers) goes over by reference */
static int lw_handoff(struct pbuf *p)
{
	const uint8_t *b = (const uint8_t *)p->payload;
	uint32_t hl;
	void *f;

	if (!sh->o->handoff || p->next || sh->o->corrupt_at || p->len < 14 + 20 + 20 ||
	    b[12] != 0x08 || b[13] != 0x00 || b[23] != 6)
		return 0;
	hl = 14u + (b[14] & 15u) * 4u;
	if (hl + 20 > p->len)
		return 0;
	hl += (uint32_t)(b[hl + 12] >> 4) * 4u;
	if (hl > p->len)
		return 0;
	pbuf_ref(p); /* released by the receiver (lw_ref_free), or at once without payload */
	f = sh->peer_wrap(me, p, (uint8_t *)p->payload, (uint32_t)p->len | hl << 16);
	if (!f) {
		pbuf_free(p); /* the reference taken above; the frame is copied instead */
		return 0;
	}
	sh->peer_queue(me, f);
	return 1;
}

static err_t lw_linkoutput(struct netif *n, struct pbuf *p)
{
	uint8_t *dst;
	void *f;

	(void)n;
	sh->frames[me]++;
	sh->wire_bytes[me] += p->tot_len;
	if (lw_handoff(p))
		return ERR_OK;
	f = sh->peer_alloc(me, p->tot_len, &dst);
	if (!f) {
		if (sh->connected) /* before that: frames to an instance not yet up */
			fail("wire: no receive buffer");
		return ERR_MEM;
	}
	pbuf_copy_partial(p, dst, p->tot_len, 0);
	if (sh->o->corrupt_at && p->tot_len > 14 + 20 + 20 && ++sh->data_frames == sh->o->corrupt_at) {
		dst[p->tot_len - 1] ^= 0x5a;
		sh->corrupted++;
	}
	sh->peer_queue(me, f);
	return ERR_OK;
}

static err_t lw_netif_init(struct netif *n)
{
	static const u8_t mac[2][6] = {{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}};

	n->hwaddr_len = 6;
	memcpy(n->hwaddr, mac[me], 6);
	n->mtu = 1500;
	n->flags = NETIF_FLAG_BROADCAST | NETIF_FLAG_ETHARP | NETIF_FLAG_ETHERNET | NETIF_FLAG_LINK_UP;
	n->output = etharp_output;
	n->linkoutput = lw_linkoutput;
	n->name[0] = 'i';
	n->name[1] = (char)('a' + me);
	return ERR_OK;
}

static int lwi_init(struct lwi_shared *s, int idx, int offload)
{
	static const u8_t mac[2][6] = {{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}};
	ip4_addr_t ip, mask, gw, peer;
	struct eth_addr pm;

	sh = s;
	me = idx;
	lwip_init();
	IP4_ADDR(&ip, 10, 0, 0, 1 + idx);
	IP4_ADDR(&peer, 10, 0, 0, 2 - idx);
	IP4_ADDR(&mask, 255, 255, 255, 0);
	IP4_ADDR(&gw, 0, 0, 0, 0);
	if (!netif_add(&nif, &ip, &mask, &gw, NULL, lw_netif_init, ethernet_input))
		return -1;
	NETIF_SET_CHECKSUM_CTRL(&nif, offload ? NETIF_CHECKSUM_DISABLE_ALL : NETIF_CHECKSUM_ENABLE_ALL);
	netif_set_default(&nif);
	netif_set_up(&nif);
	memcpy(pm.addr, mac[1 - idx], 6);
	return etharp_add_static_entry(&peer, &pm) == ERR_OK ? 0 : -1;
}

static void *lwi_rx_alloc(uint32_t len, uint8_t **payload)
{
	struct pbuf *p = pbuf_alloc(PBUF_RAW, (u16_t)len, PBUF_POOL);

	if (!p)
		return NULL;
	if (p->next) { /* PBUF_POOL_BUFSIZE holds a whole frame */
		pbuf_free(p);
		return NULL;
	}
	*payload = (uint8_t *)p->payload;
	return p;
}

/* Handoff frames: custom pbufs from a free list (one per frame in flight). */
#define LW_NREF 32768
struct lw_ref {
	struct pbuf_custom pc; /* first: lwIP hands the pbuf back to lw_ref_free */
	void *orig;
	const struct lwi_api *owner;
	struct lw_ref *next;
};
static struct lw_ref refs[LW_NREF], *free_refs;
static int refs_ready;

static void lw_ref_free(struct pbuf *p)
{
	struct lw_ref *r = (struct lw_ref *)(void *)p;

	r->owner->unref(r->orig);
	r->next = free_refs;
	free_refs = r;
}

static void *lwi_rx_wrap(void *orig, const struct lwi_api *owner, uint8_t *bytes, uint32_t lens)
{
	uint32_t len = lens & 0xffffu, hl = lens >> 16;
	struct pbuf *h;
	struct lw_ref *r;
	int i;

	if (!refs_ready) {
		for (i = LW_NREF; i-- > 0;) {
			refs[i].next = free_refs;
			free_refs = &refs[i];
		}
		refs_ready = 1;
	}
	h = pbuf_alloc(PBUF_RAW, (u16_t)hl, PBUF_POOL);
	if (!h)
		return NULL;
	memcpy(h->payload, bytes, hl);
	if (hl == len) { /* no payload: the headers are the frame */
		owner->unref(orig);
		return h;
	}
	r = free_refs;
	if (!r) {
		pbuf_free(h);
		return NULL;
	}
	free_refs = r->next;
	r->orig = orig;
	r->owner = owner;
	r->pc.custom_free_function = lw_ref_free;
	pbuf_cat(h, pbuf_alloced_custom(PBUF_RAW, (u16_t)(len - hl), PBUF_REF, &r->pc, bytes + hl,
	                                (u16_t)(len - hl)));
	return h;
}

static void lwi_unref(void *orig) { pbuf_free((struct pbuf *)orig); }

static void lwi_input(void *frame)
{
	struct pbuf *p = (struct pbuf *)frame;

	if (nif.input(p, &nif) != ERR_OK)
		pbuf_free(p);
}

static void lwi_poll(uint64_t now_ns)
{
	now_ms = (u32_t)(now_ns / 1000000u);
	sys_check_timeouts();
}

static void send_req(struct lwc *e)
{
	const struct im_opts *o = sh->o;

	if (tcp_write(e->pcb, sh->pat + e->off, (u16_t)o->len,
	              TCP_WRITE_FLAG_COPY) != ERR_OK)
		fail("request did not fit the send buffer");
	tcp_output(e->pcb);
	sh->issued++;
}

static void bulk_pump(struct lwc *e)
{
	const struct im_opts *o = sh->o;

	while (e->k < o->bytes) {
		uint64_t left = o->bytes - e->k;
		u32_t n = left < o->msg ? (u32_t)left : o->msg, room = tcp_sndbuf(e->pcb);

		if (n > room)
			n = room;
		if (n > 0xffffu)
			n = 0xffffu;
		if (n == 0 || tcp_write(e->pcb, sh->pat + e->k % IM_PAT, (u16_t)n,
		                        TCP_WRITE_FLAG_COPY) != ERR_OK)
			break;
		e->k += n;
	}
	tcp_output(e->pcb);
}

static err_t srv_recv(void *arg, struct tcp_pcb *pcb, struct pbuf *p, err_t err)
{
	struct lwc *e = (struct lwc *)arg;
	struct pbuf *q;

	(void)err;
	if (!p) {
		fail("unexpected FIN");
		return ERR_OK;
	}
	for (q = p; q; q = q->next) {
		if (sh->o->bulk) {
			if (memcmp(q->payload, sh->pat + e->rx_total % IM_PAT, q->len) != 0)
				fail("bulk data mismatch");
			e->rx_total += q->len;
			sh->rx_bytes += q->len;
		} else if (tcp_write(pcb, q->payload, q->len, TCP_WRITE_FLAG_COPY) != ERR_OK) {
			fail("echo did not fit the send buffer");
		}
	}
	tcp_recved(pcb, p->tot_len);
	pbuf_free(p);
	return ERR_OK;
}

static err_t cli_recv(void *arg, struct tcp_pcb *pcb, struct pbuf *p, err_t err)
{
	struct lwc *e = (struct lwc *)arg;
	const struct im_opts *o = sh->o;
	struct pbuf *q;

	(void)err;
	if (!p) {
		fail("unexpected FIN");
		return ERR_OK;
	}
	for (q = p; q; q = q->next) {
		if (e->got + q->len > o->len ||
		    memcmp(q->payload, sh->pat + e->off + e->got, q->len) != 0) {
			fail("echo mismatch");
			break;
		}
		e->got += q->len;
		sh->rx_bytes += q->len;
	}
	tcp_recved(pcb, p->tot_len);
	pbuf_free(p);
	if (e->got == o->len) {
		e->got = 0;
		e->k++;
		e->off = im_req_next(e->off);
		sh->done++;
		if (sh->issued < o->requests)
			send_req(e);
	}
	return ERR_OK;
}

static err_t cli_sent(void *arg, struct tcp_pcb *pcb, u16_t len)
{
	(void)pcb;
	(void)len;
	if (sh->o->bulk)
		bulk_pump((struct lwc *)arg);
	return ERR_OK;
}

static void on_err(void *arg, err_t err)
{
	struct lwc *e = (struct lwc *)arg;

	(void)err;
	if (e)
		e->pcb = NULL; /* lwIP freed it */
	sh->closed++;
}

static err_t on_accept(void *arg, struct tcp_pcb *pcb, err_t err)
{
	struct lwc *e;

	(void)arg;
	if (err != ERR_OK || !pcb || nconns >= IM_MAX_CONNS)
		return ERR_VAL;
	e = &conns[nconns];
	e->pcb = pcb;
	e->id = (uint32_t)nconns++;
	tcp_arg(pcb, e);
	tcp_recv(pcb, srv_recv);
	tcp_err(pcb, on_err);
	tcp_nagle_disable(pcb);
	sh->accepted++;
	return ERR_OK;
}

static int lwi_listen(uint16_t port)
{
	struct tcp_pcb *pcb = tcp_new(), *l;

	if (!pcb || tcp_bind(pcb, IP_ADDR_ANY, port) != ERR_OK)
		return -1;
	l = tcp_listen_with_backlog(pcb, 255);
	if (!l)
		return -1;
	tcp_accept(l, on_accept);
	return 0;
}

static err_t on_connected(void *arg, struct tcp_pcb *pcb, err_t err)
{
	(void)arg;
	(void)pcb;
	if (err == ERR_OK)
		sh->connected++;
	return ERR_OK;
}

static int lwi_connect(int n, uint16_t port)
{
	ip4_addr_t peer;
	int i;

	IP4_ADDR(&peer, 10, 0, 0, 2);
	for (i = 0; i < n; i++) {
		struct lwc *e = &conns[i];

		e->pcb = tcp_new();
		e->id = (uint32_t)i;
		e->off = im_req_off(e->id, 0);
		if (!e->pcb)
			return -1;
		tcp_arg(e->pcb, e);
		tcp_recv(e->pcb, cli_recv);
		tcp_sent(e->pcb, cli_sent);
		tcp_err(e->pcb, on_err);
		tcp_nagle_disable(e->pcb);
		if (tcp_connect(e->pcb, &peer, port, on_connected) != ERR_OK)
			return -1;
	}
	nconns = n;
	return 0;
}

static void lwi_start(void)
{
	int i;

	if (sh->o->bulk) {
		bulk_pump(&conns[0]);
		return;
	}
	for (i = 0; i < nconns && sh->issued < sh->o->requests; i++)
		send_req(&conns[i]);
}

static int lwi_quiet(void)
{
	int i;

	for (i = 0; i < nconns; i++)
		if (conns[i].pcb && (conns[i].pcb->unacked || conns[i].pcb->unsent ||
		                     (conns[i].pcb->flags & TF_ACK_DELAY)))
			return 0;
	return 1;
}

#if LWIP_STATS
static uint64_t lwi_csum_drops(void) { return lwip_stats.tcp.chkerr; }
static uint64_t lwi_retransmits(void) { return lwip_stats.mib2.tcpretranssegs; }
#else
static uint64_t lwi_csum_drops(void) { return 0; }
static uint64_t lwi_retransmits(void) { return 0; }
#endif

__attribute__((visibility("default"))) const struct lwi_api LWI_API = {
	lwi_init, lwi_rx_alloc, lwi_input, lwi_rx_wrap, lwi_unref, lwi_poll, lwi_listen,
	lwi_connect, lwi_start, lwi_quiet, lwi_csum_drops, lwi_retransmits,
	(uint32_t)sizeof(struct tcp_pcb), LWIP_STATS,
};
