#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

#define TH_NCONNS 8
#define TH_NPBS 512

/* ---------------------------------------------------------------- ops */

static uint32_t op_random(void *opaque)
{
	struct th *t = (struct th *)opaque;

	t->rnd = t->rnd * 1103515245u + 12345u;
	return t->rnd;
}

static void op_tx_offload(void *pkt, const struct ipk_tx_meta *meta, void *opaque)
{
	(void)opaque;
	((struct sim_pkt *)pkt)->meta = *meta;
}

static void capture(struct th *t, struct sim_pkt *k, struct sim_pkt *flat)
{
	struct tframe *f;

	if (t->ncap >= TH_CAP) {
		/* keep only what has not been looked at */
		int i, keep = t->ncap - t->next;

		for (i = 0; i < t->next; i++)
			free(t->cap[i].b);
		memmove(t->cap, t->cap + t->next, (size_t)keep * sizeof(t->cap[0]));
		t->ncap = keep;
		t->next = 0;
		if (t->ncap >= TH_CAP)
			return;
	}
	f = &t->cap[t->ncap++];
	f->len = flat->len;
	f->b = (uint8_t *)malloc(flat->len);
	memcpy(f->b, sim_pkt_data(flat), flat->len);
	f->flags = k->meta.flags;
	f->mss = k->meta.mss;
	f->chained = k->next != NULL;
}

/* The NIC of a linked pair finishes a TCP checksum offload so the peer sees it right. */
static void nic_finish(struct sim_pkt *k)
{
	uint8_t *p = sim_pkt_data(k);
	uint32_t l4 = (uint32_t)k->meta.l2_len + k->meta.l3_len;
	int odd = 0;

	if (k->meta.flags & IPK_TXOFF_IP4_CSUM) {
		ipk_wr16(p + k->meta.l2_len + 10, 0);
		ipk_wr16(p + k->meta.l2_len + 10,
		         ipk_csum_fold(ipk_csum_add(0, p + k->meta.l2_len, k->meta.l3_len, &odd)));
	}
	if (k->meta.flags & IPK_TXOFF_TCP_CSUM) {
		odd = 0;
		ipk_wr16(p + l4 + 16, ipk_csum_fold(ipk_csum_add(0, p + l4, k->len - l4, &odd)));
	}
}

/* IPK_TCPF_FAST may only be set while its conditions hold (tcp.h ipk_tcp_fast_ok):
 * every connection object of the context is looked at, live or not. */
static void fast_check(struct th *t)
{
	uint32_t i;

	for (i = 0; i < t->nconns; i++) {
		const struct ipk_conn *c =
		        (const struct ipk_conn *)(const void *)((const uint8_t *)t->conns +
		                                                i * ipk_conn_size());

		if ((c->fl & IPK_TCPF_FAST) && !ipk_tcp_fast_ok(c))
			t->fast_bad++;
	}
}

static void op_tx(void *pkt, void *opaque)
{
	struct th *t = (struct th *)opaque;
	struct sim_pkt *k = (struct sim_pkt *)pkt;
	struct sim_pkt *flat;
	uint32_t total = sim_pkt_chain_len(k);
	uint8_t *tmp = (uint8_t *)malloc(total + 1);
	uint32_t at = 0;
	struct sim_pkt *i;

	fast_check(t);

	/* Linearize outside the pool (frames may exceed a buffer with TSO). */
	for (i = k; i; i = i->next) {
		memcpy(tmp + at, sim_pkt_data(i), i->len);
		at += i->len;
	}
	{
		struct sim_pkt fake;
		struct sim_buf fb;

		memset(&fake, 0, sizeof(fake));
		fb.mem = tmp;
		fb.size = total;
		fake.buf = &fb;
		fake.len = total;
		capture(t, k, &fake);
	}
	t->sent_n++;
	if (t->link && t->qn < (int)(sizeof(t->q) / sizeof(t->q[0])) &&
	    !(t->drop_every && t->sent_n % (uint32_t)t->drop_every == 0) &&
	    total <= t->link->pool->buf_size) {
		flat = sim_pkt_from(t->link->pool, tmp, total);
		if (flat) {
			flat->meta = k->meta;
			nic_finish(flat);
			flat->meta.flags = 0;
			t->q[t->qn++] = flat;
		}
	}
	free(tmp);
	sim_pkt_free_chain(k);
}

static int op_accept(struct ipk_ctx *ctx, const struct ipk_tuple *tu, void *opaque)
{
	(void)ctx;
	(void)tu;
	int r = ((struct th *)opaque)->refuse;
	return r < 0 ? -1 : !r; /* refuse -1: "no room now" */
}

static int op_room(struct ipk_ctx *ctx, const struct ipk_atuple *tu, void *opaque)
{
	(void)ctx;
	(void)tu;
	return !((struct th *)opaque)->noroom;
}

static void *op_accepted(struct ipk_ctx *ctx, struct ipk_conn *c, void *opaque)
{
	struct th *t = (struct th *)opaque;

	(void)ctx;
	t->accepted++;
	t->conn = c;
	return t->user_tag;
}

static void op_connected(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *opaque)
{
	struct th *t = (struct th *)opaque;

	(void)ctx;
	(void)user;
	t->connected++;
	t->conn = c;
}

static void op_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                       uint32_t off, uint32_t len, void *opaque)
{
	struct th *t = (struct th *)opaque;
	struct sim_pkt *k = (struct sim_pkt *)pkt;

	(void)user;
	fast_check(t);
	if (!pkt) {
		t->fins++;
		t->state_at_fin = ipk_tcp_state(c);
		if (t->close_on_fin)
			ipk_tcp_close(ctx, c, t->now);
		return;
	}
	t->payload_calls++;
	t->last_off = off;
	t->last_len = len;
	if (k->next == NULL && off + len <= k->len && t->rxlen + len <= TH_RX_MAX) {
		memcpy(t->rx + t->rxlen, sim_pkt_data(k) + off, len);
		t->rxlen += len;
	}
	if (t->echo && k->next == NULL && off + len <= k->len)
		ipk_tcp_write(ctx, c, sim_pkt_data(k) + off, len, t->now);
	if (t->auto_recved)
		ipk_tcp_recved(ctx, c, len, t->now);
}

static void op_acked(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, uint32_t bytes,
                     void *opaque)
{
	(void)ctx;
	(void)c;
	(void)user;
	fast_check((struct th *)opaque);
	((struct th *)opaque)->acked += bytes;
}

static void op_closed(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
                      enum ipk_close_reason why, void *opaque)
{
	struct th *t = (struct th *)opaque;

	(void)ctx;
	(void)user;
	fast_check(t);
	t->closed++;
	t->why = why;
	t->closed_conn = c;
}

/* ------------------------------------------------------------- set-up */

static void mac_of(uint8_t m[6], int i)
{
	memset(m, 0, 6);
	m[0] = 2;
	m[5] = (uint8_t)i;
}

static struct th *th_make(int self, int peer, void (*tweak)(struct ipk_config *cfg))
{
	struct th *t = (struct th *)calloc(1, sizeof(*t));
	size_t sz;
	uint32_t i;

	t->pool = sim_pool_create(2048, 2048, 8192);
	t->rx = (uint8_t *)malloc(TH_RX_MAX);
	t->rnd = 12345u + (uint32_t)self;
	t->ip_be = IPK_IP4(10, 0, 0, self);
	t->peer_be = IPK_IP4(10, 0, 0, peer);
	mac_of(t->mac, self);
	mac_of(t->peer_mac, peer);
	sim_pkt_ops(&t->ops);
	t->ops.tx = op_tx;
	t->ops.tx_offload = op_tx_offload;
	t->ops.random = op_random;
	t->ops.tcp_accept = op_accept;
	t->ops.tcp_room = op_room;
	t->ops.tcp_accepted = op_accepted;
	t->ops.tcp_connected = op_connected;
	t->ops.tcp_payload = op_payload;
	t->ops.tcp_acked = op_acked;
	t->ops.tcp_closed = op_closed;
	ipk_config_default(&t->cfg);
	t->cfg.opaque = t;
	memcpy(t->cfg.mac, t->mac, 6);
	t->cfg.ip4_be = t->ip_be;
	t->cfg.netmask_be = IPK_IP4(255, 255, 255, 0);
	t->cfg.conn_hash_buckets = 64;
	t->nconns = TH_NCONNS;
	t->npbs = TH_NPBS;
	if (tweak)
		tweak(&t->cfg);
	sz = ipk_ctx_size(&t->cfg);
	t->mem = aligned_alloc(8, (sz + 7) & ~(size_t)7);
	t->ctx = ipk_ctx_init(t->mem, sz, &t->cfg, &t->ops);
	if (!t->ctx)
		abort();
	t->conns = calloc(t->nconns, ipk_conn_size());
	t->pbs = calloc(t->npbs, ipk_pb_size());
	ipk_add_conns(t->ctx, t->conns, t->nconns);
	ipk_add_pbs(t->ctx, t->pbs, t->npbs);
	ipk_arp_add_static(t->ctx, t->peer_be, t->peer_mac);
	for (i = 0; i < 1; i++)
		ipk_run(t->ctx, NULL, 0, 0);
	return t;
}

struct th *th_new(void (*tweak)(struct ipk_config *cfg))
{
	return th_make(1, 2, tweak);
}

void th_pair(struct th **a, struct th **b, void (*tweak)(struct ipk_config *cfg))
{
	*a = th_make(1, 2, tweak);
	*b = th_make(2, 1, tweak);
	(*a)->link = *b;
	(*b)->link = *a;
}

void th_clear(struct th *t)
{
	int i;

	for (i = 0; i < t->ncap; i++)
		free(t->cap[i].b);
	t->ncap = t->next = 0;
}

void th_free(struct th *t)
{
	int i;

	if (t->fast_bad) { /* every test ends here: the fast mark's invariant broke */
		fprintf(stderr, "harness: %u connection(s) seen marked IPK_TCPF_FAST without "
		                "ipk_tcp_fast_ok\n", t->fast_bad);
		abort();
	}
	th_clear(t);
	for (i = 0; i < t->qn; i++)
		sim_pkt_free(t->q[i]);
	sim_pool_destroy(t->pool);
	free(t->mem);
	free(t->conns);
	free(t->pbs);
	free(t->rx);
	free(t);
}

void th_advance(struct th *t, uint64_t dt)
{
	t->now += dt;
	ipk_run(t->ctx, NULL, 0, t->now);
}

void th_run_for(struct th *t, uint64_t dt)
{
	uint64_t end = t->now + dt;
	int i;

	for (i = 0; i < 100000 && t->now < end; i++) {
		uint64_t next = ipk_run(t->ctx, NULL, 0, t->now);

		if (next <= t->now)
			next = t->now + 1;
		t->now = next < end ? next : end;
	}
	ipk_run(t->ctx, NULL, 0, t->now);
}

static int deliver_q(struct th *from, struct th *to)
{
	int n = from->qn, i;
	struct sim_pkt *batch[TH_CAP * 4];

	memcpy(batch, from->q, (size_t)n * sizeof(batch[0]));
	from->qn = 0;
	for (i = 0; i < n; i++) {
		void *p = batch[i];

		ipk_run(to->ctx, &p, 1, to->now);
	}
	return n;
}

void th_pump(struct th *a, struct th *b)
{
	int round;

	for (round = 0; round < 10000; round++) {
		int moved = deliver_q(a, b) + deliver_q(b, a);

		if (!moved)
			break;
	}
}

/* -------------------------------------------------------- build, inject */

uint32_t th_frame(const struct th *t, uint8_t *p, uint16_t sport, uint16_t dport, uint8_t flags,
                  uint32_t seq, uint32_t ack, uint16_t wnd, const struct ipk_tcp_opts *o,
                  const void *payload, uint32_t len)
{
	uint8_t opt[40];
	uint32_t olen = o ? ipk_tcp_opts_emit(opt, sizeof(opt), o) : 0;
	uint32_t tl = IPK_TCP_HLEN + olen + len;
	struct ipk_eth_hdr e;
	struct ipk_ip4_hdr ih;
	struct ipk_tcp_hdr th;
	int odd = 0;
	uint32_t sum;

	memcpy(e.dst, t->mac, 6);
	memcpy(e.src, t->peer_mac, 6);
	e.type = IPK_ETHERTYPE_IP4;
	ipk_eth_emit(p, 14, &e);
	memset(&ih, 0, sizeof(ih));
	ih.ihl = 20;
	ih.tot_len = (uint16_t)(20 + tl);
	ih.id = 1;
	ih.frag = IPK_IP4_DF;
	ih.ttl = 64;
	ih.tos = t->tx_tos;
	ih.proto = IPK_IPPROTO_TCP;
	ih.src_be = t->peer_be;
	ih.dst_be = t->ip_be;
	ipk_ip4_emit(p + 14, 20, &ih, 1);
	memset(&th, 0, sizeof(th));
	th.sport_be = ipk_htons(sport);
	th.dport_be = ipk_htons(dport);
	th.seq = seq;
	th.ack = ack;
	th.doff = (uint8_t)(IPK_TCP_HLEN + olen);
	th.flags = flags;
	th.wnd = wnd;
	ipk_tcp_emit(p + 34, IPK_TCP_HLEN, &th);
	memcpy(p + 34 + IPK_TCP_HLEN, opt, olen);
	if (len)
		memcpy(p + 34 + IPK_TCP_HLEN + olen, payload, len);
	sum = ipk_csum_pseudo(t->peer_be, t->ip_be, IPK_IPPROTO_TCP, tl);
	ipk_wr16(p + 34 + 16, ipk_csum_fold(ipk_csum_add(sum, p + 34, tl, &odd)));
	return 34 + tl;
}

void th_send(struct th *t, uint16_t sport, uint16_t dport, uint8_t flags, uint32_t seq,
             uint32_t ack, uint16_t wnd, const struct ipk_tcp_opts *o, const void *payload,
             uint32_t len)
{
	uint32_t fe = t->pool->fail_every;
	struct sim_pkt *k;
	uint8_t *p;
	void *vp;

	t->pool->fail_every = 0; /* fault injection is for the core, not the script */
	k = sim_pkt_alloc(t->pool);
	t->pool->fail_every = fe;
	p = sim_pkt_data(k);
	vp = k;
	k->len = th_frame(t, p, sport, dport, flags, seq, ack, wnd, o, payload, len);
	if (t->corrupt_next == 1)
		p[34 + 16] ^= 0x55;
	if (t->corrupt_next == 2)
		p[34 + 12] = 0x10;
	t->corrupt_next = 0;
	ipk_run(t->ctx, &vp, 1, t->now);
}

void th_seg(struct th *t, uint8_t flags, uint32_t seq, uint32_t ack, uint16_t wnd,
            const void *payload, uint32_t len)
{
	th_send(t, TH_PEER_PORT, TH_LOCAL_PORT, flags, seq, ack, wnd, NULL, payload, len);
}

/* ------------------------------------------------------------- capture */

int th_pending(const struct th *t)
{
	int n = 0, i;

	for (i = t->next; i < t->ncap; i++) {
		const struct tframe *f = &t->cap[i];

		if (f->len >= 34 + 20 && ipk_rd16(f->b + 12) == IPK_ETHERTYPE_IP4 && f->b[23] == 6)
			n++;
	}
	return n;
}

static int parse_frame(const struct tframe *f, struct tseg *s)
{
	struct ipk_ip4_hdr ih;
	const uint8_t *p;
	uint32_t tl, sum;
	int odd = 0;

	if (f->len < 14 || ipk_rd16(f->b + 12) != IPK_ETHERTYPE_IP4)
		return 0;
	if (ipk_ip4_parse(f->b + 14, f->len - 14, &ih) < 0 || ih.proto != IPK_IPPROTO_TCP)
		return 0;
	p = f->b + 14 + ih.ihl;
	tl = ih.tot_len - ih.ihl;
	memset(s, 0, sizeof(*s));
	if (ipk_tcp_parse(p, tl, &s->h) < 0)
		return 0;
	ipk_tcp_opts_parse(p + 20, (uint32_t)s->h.doff - 20, &s->o);
	s->src_be = ih.src_be;
	s->tos = ih.tos;
	s->dst_be = ih.dst_be;
	s->payload = p + s->h.doff;
	s->len = tl - s->h.doff;
	s->txflags = f->flags;
	s->tso_mss = f->mss;
	s->chained = f->chained;
	if (f->flags & IPK_TXOFF_TCP_CSUM) {
		s->csum_ok = s->h.csum == ipk_csum_pseudo_fold(ih.src_be, ih.dst_be, 6, tl);
	} else {
		sum = ipk_csum_pseudo(ih.src_be, ih.dst_be, 6, tl);
		s->csum_ok = ipk_csum_fold(ipk_csum_add(sum, p, tl, &odd)) == 0;
	}
	return 1;
}

int th_next(struct th *t, struct tseg *s)
{
	while (t->next < t->ncap) {
		if (parse_frame(&t->cap[t->next++], s))
			return 1;
	}
	return 0;
}

int th_expect(struct th *t, struct tseg *s, uint8_t flags, uint32_t seq, uint32_t ack)
{
	if (!th_next(t, s))
		return 0;
	if (!s->csum_ok)
		return 0;
	if ((s->h.flags & ~(uint8_t)IPK_TCP_PSH) != (flags & ~(uint8_t)IPK_TCP_PSH))
		return 0;
	if (s->h.seq != seq)
		return 0;
	if ((flags & IPK_TCP_ACK) && s->h.ack != ack)
		return 0;
	return 1;
}

uint32_t th_accept(struct th *t, uint32_t irs, const struct ipk_tcp_opts *o, uint16_t wnd,
                   struct ipk_conn **c)
{
	struct tseg s;
	uint32_t iss;

	ipk_tcp_listen(t->ctx, ipk_htons(TH_LOCAL_PORT), 8);
	th_send(t, TH_PEER_PORT, TH_LOCAL_PORT, IPK_TCP_SYN, irs, 0, wnd, o, NULL, 0);
	if (!th_next(t, &s))
		return 0;
	iss = s.h.seq;
	if (o && o->has_ts && s.o.has_ts) {
		/* RFC 7323 §3.2: timestamps negotiated, so the ACK carries one too */
		struct ipk_tcp_opts ts = th_ts_opt(o->tsval, s.o.tsval);

		th_send(t, TH_PEER_PORT, TH_LOCAL_PORT, IPK_TCP_ACK, irs + 1, iss + 1, wnd, &ts,
		        NULL, 0);
	} else {
		th_seg(t, IPK_TCP_ACK, irs + 1, iss + 1, wnd, NULL, 0);
	}
	*c = t->conn;
	return iss;
}

int th_no_leaks(struct th *t)
{
	return t->fast_bad == 0 && t->pool->descs_out == (uint32_t)t->qn &&
	       t->pool->bufs_out == (uint32_t)t->qn &&
	       ipk_pbs_free(t->ctx) == t->npbs && ipk_conns_free(t->ctx) == t->nconns;
}

struct ipk_tcp_opts th_mss_opt(uint16_t mss)
{
	struct ipk_tcp_opts o;

	memset(&o, 0, sizeof(o));
	o.has_mss = 1;
	o.mss = mss;
	return o;
}

struct ipk_tcp_opts th_ts_opt(uint32_t tsval, uint32_t tsecr)
{
	struct ipk_tcp_opts o;

	memset(&o, 0, sizeof(o));
	o.has_ts = 1;
	o.tsval = tsval;
	o.tsecr = tsecr;
	return o;
}
