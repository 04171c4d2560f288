/*
 * Issue 20, item 3(a): programs written against iip's documented API only, two at a
 * time in memory (tests/compat/iipt_mem.h), under every combination of the NIC
 * features the feature callbacks can declare (2^9: each node declares the same set):
 *   - TCP echo server + client (every byte checked, both sides see tcp_closed),
 *   - UDP echo server + client,
 *   - bulk sender (TSO marks when declared) + receiver (pattern checked),
 *   - ARP request / reply and ICMP echo (request crafted by the app, reply shown).
 * Then the semantics iip.h chooses, once: a held tcp_payload packet and the window,
 * close twice, send after close, send beyond the peer's window, a refused SYN,
 * rxbuf_consumed beyond what was delivered. Every pool (packets, connections, pbs)
 * must be back at its start at the end.
 *
 *   build/tests/compat/test_iip_mem [--quick]   (--quick: 8 feature sets, not 512)
 */
#include "compat/iip/iip.c"
#include "iipt_mem.h"
static void tap_write(struct iipt_node *n, const uint8_t *f, uint32_t len) { (void)n; (void)f; (void)len; }

/* ------------------------------------------------------------ helpers */
static uint8_t pat(uint64_t i) { return (uint8_t)(i * 7u + i / 251u); }

struct hdrs {
	const uint8_t *ip, *l4, *pay;
	uint32_t plen;
};
/* Parse an IPv4/TCP-or-UDP frame the way an iip application does: the L2 header
 * through its own L2 callbacks (whatever the link, iipt_mem.h). */
static int parse(void *pkt, struct hdrs *h)
{
	const uint8_t *d = (const uint8_t *)iip_ops_pkt_get_data(pkt, NULL);
	uint32_t len = iip_ops_pkt_get_len(pkt, NULL), ihl, l4h, hl = iip_ops_l2_hdr_len(pkt, NULL);

	if (len < hl + 20u || iip_ops_l2_ethertype_be(pkt, NULL) != htons_(0x0800))
		return -1;
	h->ip = d + hl;
	ihl = (h->ip[0] & 15u) * 4u;
	h->l4 = h->ip + ihl;
	l4h = h->ip[9] == 6 ? (h->l4[12] >> 4) * 4u : 8u;
	h->pay = h->l4 + l4h;
	h->plen = get16(h->ip + 2) - ihl - l4h;
	return 0;
}

struct app_state {
	/* TCP */
	uint64_t total, sent, rcvd, echoed;
	void *conn;
	int connected, closed, closed_null, acked_calls, eagain, mode, closing;
	void *unacked[2048];   /* client: packets sent, not yet shown to tcp_acked */
	uint32_t un_head, un_n;
	uint16_t port;
	/* UDP */
	int udp_sent, udp_rcvd;
	/* ARP/ICMP */
	int arp_replies, icmp_replies;
	/* semantics */
	int hold;              /* server: keep payload clones, do not consume */
	void *held[4096];
	int nheld;
};

static struct tpkt *make_payload(uint64_t off, uint32_t n)
{
	struct tpkt *k = (struct tpkt *)iip_ops_pkt_alloc(NULL);
	uint32_t i;

	if (!k)
		return NULL;
	for (i = 0; i < n; i++)
		k->b->mem[i] = pat(off + i);
	k->len = n;
	return k;
}

/* ------------------------------------------------------------ TCP echo */
static uint8_t srv_accept(struct iipt_node *n, void *pkt)
{
	struct hdrs h;
	struct app_state *st = (struct app_state *)n->app_state;

	if (parse(pkt, &h) || !(h.l4[13] & 0x02))
		return 0;
	return get16(h.l4 + 2) == st->port; /* only our port */
}
static void *srv_accepted(struct iipt_node *n, void *hd, void *pkt)
{
	struct hdrs h;

	CHECK(pkt && !parse(pkt, &h) && (h.l4[13] & 0x02) && get16(h.l4 + 2) == 7,
	      "tcp_accepted: packet with the SYN and our port");
	((struct app_state *)n->app_state)->conn = hd;
	return n->app_state;
}
/* Echo what arrived, as it arrived (one packet per payload callback). */
static void srv_payload(struct iipt_node *n, void *hd, void *pkt, void *to, uint16_t ho,
                        uint16_t tl)
{
	struct app_state *st = (struct app_state *)n->app_state;
	uint32_t len = iip_ops_pkt_get_len(pkt, n) - ho - tl;
	const uint8_t *p = (const uint8_t *)iip_ops_pkt_get_data(pkt, n) + ho;
	struct tpkt *k;

	CHECK(to == st, "tcp_payload: tcp_opaque is what tcp_accepted returned");
	if (st->hold) {
		st->held[st->nheld++] = iip_ops_pkt_clone(pkt, n);
		st->rcvd += len;
		return;
	}
	if (st->mode == 1) { /* bulk receiver: check, consume */
		uint32_t i;
		for (i = 0; i < len; i++)
			if (p[i] != pat(st->rcvd + i)) {
				CHECK(0, "bulk byte %llu", (unsigned long long)(st->rcvd + i));
				break;
			}
		st->rcvd += len;
		iip_tcp_rxbuf_consumed(n->ws, hd, 1, n);
		return;
	}
	k = (struct tpkt *)iip_ops_pkt_alloc(n);
	memcpy(k->b->mem, p, len);
	k->len = len;
	CHECK(iip_tcp_send(n->ws, hd, k, 0, n) == 0, "echo send");
	st->rcvd += len;
	iip_tcp_rxbuf_consumed(n->ws, hd, 1, n);
}
static void any_closed(struct iipt_node *n, void *hd, uint32_t pi, uint16_t lp, uint16_t pp,
                       void *to)
{
	struct app_state *st = (struct app_state *)n->app_state;

	(void)hd; (void)pi; (void)lp; (void)pp;
	st->closed++;
	if (!to)
		st->closed_null++;
}

static void cli_fill(struct iipt_node *n)
{
	struct app_state *st = (struct app_state *)n->app_state;

	while (st->connected && st->sent < st->total) {
		uint32_t chunk = 1 + (uint32_t)((st->sent * 2654435761u) % 1900u);
		struct tpkt *k;
		uint16_t rc;

		if (chunk > st->total - st->sent)
			chunk = (uint32_t)(st->total - st->sent);
		k = make_payload(st->sent, chunk);
		if (!k)
			return;
		rc = iip_tcp_send(n->ws, st->conn, k, 0, n);
		if (rc) {
			CHECK(rc == 11, "send: %u (EAGAIN expected)", rc);
			st->eagain++;
			iip_ops_pkt_free(k, n); /* still ours on failure */
			return;
		}
		st->sent += chunk;
		if (st->un_n < 2048)
			st->unacked[(st->un_head + st->un_n++) % 2048] = k;
	}
}
static void *cli_connected(struct iipt_node *n, void *hd, void *pkt)
{
	struct app_state *st = (struct app_state *)n->app_state;
	struct hdrs h;

	CHECK(pkt && !parse(pkt, &h) && (h.l4[13] & 0x12) == 0x12, "tcp_connected: a SYN-ACK frame");
	st->conn = hd;
	st->connected = 1;
	cli_fill(n);
	return st;
}
static void cli_payload(struct iipt_node *n, void *hd, void *pkt, void *to, uint16_t ho,
                        uint16_t tl)
{
	struct app_state *st = (struct app_state *)n->app_state;
	uint32_t len = iip_ops_pkt_get_len(pkt, n) - ho - tl, i;
	const uint8_t *p = (const uint8_t *)iip_ops_pkt_get_data(pkt, n) + ho;

	CHECK(to == st, "client tcp_opaque");
	for (i = 0; i < len; i++)
		if (p[i] != pat(st->echoed + i)) {
			CHECK(0, "echo byte %llu", (unsigned long long)(st->echoed + i));
			break;
		}
	st->echoed += len;
	iip_tcp_rxbuf_consumed(n->ws, hd, 1, n);
	if (st->echoed == st->total && !st->closing) {
		st->closing = 1;
		CHECK(iip_tcp_close(n->ws, hd, n) == 0, "close");
	}
}
static void cli_acked(struct iipt_node *n, void *hd, void *pkt, void *to)
{
	struct app_state *st = (struct app_state *)n->app_state;

	(void)hd; (void)to;
	CHECK(pkt != NULL, "tcp_acked packet");
	/* iip.h: "pkt is that packet": the object given to iip_tcp_send, in order. */
	CHECK(st->un_n && pkt == st->unacked[st->un_head], "tcp_acked shows the sent packet itself");
	if (st->un_n) {
		st->un_head = (st->un_head + 1) % 2048;
		st->un_n--;
	}
	st->acked_calls++;
	cli_fill(n);
}

static const struct iipt_app app_tcp_srv = {srv_accept, srv_accepted, NULL, srv_payload, NULL,
                                            any_closed, NULL, NULL, NULL};
static const struct iipt_app app_tcp_cli = {NULL, NULL, cli_connected, cli_payload, cli_acked,
                                            any_closed, NULL, NULL, NULL};

/* ------------------------------------------------------------ UDP echo, ARP, ICMP */
static void udp_srv(struct iipt_node *n, void *pkt)
{
	struct hdrs h;
	struct tpkt *k;
	uint16_t sport, dport;
	uint32_t src;
	uint8_t mac[6];

	if (parse(pkt, &h))
		return;
	memcpy(&src, h.ip + 12, 4);
	memcpy(&sport, h.l4, 2);
	memcpy(&dport, h.l4 + 2, 2);
	memset(mac, 0, sizeof(mac));
	if (iip_ops_l2_hdr_src_ptr(pkt, n))
		memcpy(mac, iip_ops_l2_hdr_src_ptr(pkt, n), iip_ops_l2_addr_len(n));
	k = make_payload(0, 0);
	memcpy(k->b->mem, h.pay, h.plen);
	k->len = h.plen;
	CHECK(iip_udp_send(n->ws, n->mac, n->ip_be, dport, mac, src, sport, k, n) == 0, "udp echo");
}
static void udp_cli(struct iipt_node *n, void *pkt)
{
	struct hdrs h;
	struct app_state *st = (struct app_state *)n->app_state;
	uint32_t i;

	CHECK(!parse(pkt, &h) && h.plen == 1u + 20u * (uint32_t)st->udp_rcvd, "udp reply length");
	for (i = 0; i < h.plen; i++)
		if (h.pay[i] != pat(i)) {
			CHECK(0, "udp byte %u", i);
			break;
		}
	st->udp_rcvd++;
}
static void arp_cli(struct iipt_node *n, void *pkt)
{
	const uint8_t *d = (const uint8_t *)iip_ops_pkt_get_data(pkt, n) + iip_ops_l2_hdr_len(pkt, n);
	uint32_t spa;

	memcpy(&spa, d + 14, 4);
	CHECK(d[7] == 2 && spa == n->peer->ip_be && !memcmp(d + 8, n->peer->mac, 6),
	      "arp reply from the peer");
	((struct app_state *)n->app_state)->arp_replies++;
}
static void icmp_cli(struct iipt_node *n, void *pkt)
{
	struct hdrs h;

	CHECK(!parse(pkt, &h) && h.ip[9] == 1 && h.l4[0] == 0 && get16(h.l4 + 4) == 0x1234,
	      "icmp echo reply");
	((struct app_state *)n->app_state)->icmp_replies++;
}
static const struct iipt_app app_udp_srv = {NULL, NULL, NULL, srv_payload, NULL, NULL, udp_srv,
                                            NULL, NULL};
static const struct iipt_app app_udp_cli = {NULL, NULL, NULL, cli_payload, NULL, NULL, udp_cli,
                                            arp_cli, icmp_cli};

/* An ICMP echo request written by the application and pushed on its own NIC. */
static void send_ping(struct iipt_node *n, uint16_t seq)
{
	struct tpkt *k = (struct tpkt *)iip_ops_pkt_alloc(n);
	uint8_t *f = k->b->mem, *ip = f + g_l2h;

	memset(f, 0, g_l2h + 20 + 8 + 32);
	iip_ops_l2_hdr_craft(k, n->mac, n->peer->mac, htons_(0x0800), n);
	ip[0] = 0x45;
	put16(ip + 2, 20 + 8 + 32);
	ip[8] = 64;
	ip[9] = 1;
	memcpy(ip + 12, &n->ip_be, 4);
	memcpy(ip + 16, &n->peer->ip_be, 4);
	fill_ip4(f);
	ip[20] = 8;
	put16(ip + 24, 0x1234);
	put16(ip + 26, seq);
	put16(ip + 22, csum_fold(csum_add(0, ip + 20, 40)));
	k->len = g_l2h + 20 + 8 + 32;
	iip_ops_l2_push(k, n);
}

/* ------------------------------------------------------------ scenarios */
static int run_until(struct iipt_node *a, struct iipt_node *b, int (*done)(void *), void *arg,
                     int max_rounds)
{
	int r;

	for (r = 0; r < max_rounds; r++) {
		if (done(arg))
			return 1;
		world_round(a, b);
	}
	return done(arg);
}
struct pair { struct app_state *c, *s; };
static int tcp_done(void *p)
{
	struct pair *x = (struct pair *)p;
	return x->c->closed && x->s->closed;
}
static int tcp_rcvd_done(void *p)
{
	struct pair *x = (struct pair *)p;
	return x->s->rcvd == x->c->total && x->c->closed && x->s->closed;
}
static void settle(struct iipt_node *a, struct iipt_node *b)
{
	int r;

	g_clock_ns += 70ull * 1000000000ull; /* past TIME_WAIT (60 s) */
	for (r = 0; r < 50; r++)
		world_round(a, b);
}
static void check_pools(struct iipt_node *a, struct iipt_node *b, const char *what)
{
	CHECK(iip_compat_conns_free(a->ws) == a->nconn && iip_compat_conns_free(b->ws) == b->nconn,
	      "%s: connections back (%u/%u, %u/%u)", what, iip_compat_conns_free(a->ws), a->nconn,
	      iip_compat_conns_free(b->ws), b->nconn);
	CHECK(iip_compat_pbs_free(a->ws) == a->npb && iip_compat_pbs_free(b->ws) == b->npb,
	      "%s: pbs back", what);
	CHECK(g_nfree_pkts == IIPT_NPKT && g_nfree_bufs == IIPT_NPKT, "%s: packets back (%u %u)",
	      what, g_nfree_pkts, g_nfree_bufs);
	{
		const struct iip_compat_stats *x = iip_compat_stats(a->ws), *y = iip_compat_stats(b->ws);

		CHECK(!x->l2_dropped && !y->l2_dropped && !x->l2_tx_failed && !y->l2_tx_failed &&
		      !x->l2_no_addr && !y->l2_no_addr && !x->l2_shown_raw && !y->l2_shown_raw,
		      "%s: L2 drops/failures/broadcasts (%u %u %u %u %u %u %u %u)", what,
		      x->l2_dropped, y->l2_dropped, x->l2_tx_failed, y->l2_tx_failed, x->l2_no_addr,
		      y->l2_no_addr, x->l2_shown_raw, y->l2_shown_raw);
	}
}

/* TCP echo (mode 0) or bulk (mode 1) between a client and a server node. */
static void scenario_tcp(uint32_t features, int mode, uint64_t total)
{
	struct iipt_node a, b;
	struct app_state cs, ss;
	struct pair x = {&cs, &ss};

	memset(&cs, 0, sizeof(cs));
	memset(&ss, 0, sizeof(ss));
	node_init(&a, 1, features, &app_tcp_cli, 4, 1024);
	node_init(&b, 2, features, &app_tcp_srv, 4, 1024);
	a.peer = &b;
	b.peer = &a;
	a.app_state = &cs;
	b.app_state = &ss;
	ss.port = 7;
	ss.mode = mode;
	cs.total = total;
	if (mode == 1) /* the bulk receiver echoes nothing: the client closes once sent */
		cs.echoed = 0;
	iip_run(b.ws, b.mac, b.ip_be, NULL, 0, NULL, &b);
	CHECK(iip_tcp_connect(a.ws, a.mac, a.ip_be, htons_(40000), b.mac, b.ip_be, htons_(7), &a) == 0,
	      "connect");
	if (mode == 1) {
		int r;
		for (r = 0; r < 200000 && ss.rcvd < total; r++)
			world_round(&a, &b);
		CHECK(ss.rcvd == total, "bulk: %llu of %llu", (unsigned long long)ss.rcvd,
		      (unsigned long long)total);
		CHECK(iip_tcp_close(a.ws, cs.conn, &a) == 0, "bulk close");
		run_until(&a, &b, tcp_rcvd_done, &x, 20000);
		/* Without scatter-gather a TSO frame is what one 2 KiB packet holds: one
		 * MSS, so no TSO frame; with it, the core sends large ones. */
		if ((features & (F_TSO | F_SG)) == (F_TSO | F_SG))
			CHECK(a.tso_frames > 0 && a.marks_tso > 0, "TSO declared but no TSO frame");
		else
			CHECK(a.tso_frames == 0, "TSO frames without the feature");
	} else {
		run_until(&a, &b, tcp_done, &x, 200000);
		CHECK(cs.echoed == total && ss.rcvd == total, "echo: %llu/%llu echoed",
		      (unsigned long long)cs.echoed, (unsigned long long)total);
	}
	CHECK(cs.closed == 1 && ss.closed == 1, "tcp_closed once each (%d %d)", cs.closed, ss.closed);
	CHECK(cs.acked_calls > 0, "tcp_acked called");
	settle(&a, &b);
	check_pools(&a, &b, mode ? "bulk" : "echo");
	node_free(&a);
	node_free(&b);
}

static int arp_done(void *p) { return ((struct app_state *)p)->arp_replies == 1; }
static int icmp_done(void *p) { return ((struct app_state *)p)->icmp_replies == 2; }

static void scenario_udp_arp_icmp(uint32_t features)
{
	struct iipt_node a, b;
	struct app_state cs, ss;
	int i, r;

	memset(&cs, 0, sizeof(cs));
	memset(&ss, 0, sizeof(ss));
	node_init(&a, 1, features, &app_udp_cli, 2, 256);
	node_init(&b, 2, features, &app_udp_srv, 2, 256);
	a.peer = &b;
	b.peer = &a;
	a.app_state = &cs;
	b.app_state = &ss;
	iip_run(b.ws, b.mac, b.ip_be, NULL, 0, NULL, &b);
	if (iip_ops_l2_addr_len(&a)) { /* a link with addresses (iipt_mem.h) */
		iip_arp_request(a.ws, a.mac, a.ip_be, b.ip_be, &a);
		CHECK(run_until(&a, &b, arp_done, &cs, 100), "arp reply");
	}
	/* One at a time (a port is bound when its first datagram is seen; alone, a
	 * 1-byte datagram, shorter than a TCP header, must bind it too). */
	for (i = 0; i < 8; i++) {
		CHECK(iip_udp_send(a.ws, a.mac, a.ip_be, htons_(5000), b.mac, b.ip_be, htons_(7),
		                   make_payload(0, 1u + 20u * (uint32_t)i), &a) == 0, "udp send");
		for (r = 0; r < 20 && cs.udp_rcvd <= i; r++)
			world_round(&a, &b);
	}
	CHECK(cs.udp_rcvd == 8, "udp echo: %d of 8", cs.udp_rcvd);
	send_ping(&a, 1);
	send_ping(&a, 2);
	CHECK(run_until(&a, &b, icmp_done, &cs, 100), "icmp replies: %d", cs.icmp_replies);
	settle(&a, &b);
	check_pools(&a, &b, "udp/arp/icmp");
	node_free(&a);
	node_free(&b);
}

/* ------------------------------------------------------------ semantics (iip.h) */
static void scenario_semantics(void)
{
	struct iipt_node a, b;
	struct app_state cs, ss;
	struct pair x = {&cs, &ss};
	int r, i;
	uint64_t stalled;
	uint16_t rc;

	memset(&cs, 0, sizeof(cs));
	memset(&ss, 0, sizeof(ss));
	node_init(&a, 1, 0, &app_tcp_cli, 4, 2048);
	node_init(&b, 2, 0, &app_tcp_srv, 4, 2048);
	a.peer = &b;
	b.peer = &a;
	a.app_state = &cs;
	b.app_state = &ss;
	iip_run(b.ws, b.mac, b.ip_be, NULL, 0, NULL, &b);

	/* A SYN the application refuses: RST, the client's tcp_closed with no opaque. */
	ss.port = 9;
	CHECK(iip_tcp_connect(a.ws, a.mac, a.ip_be, htons_(40001), b.mac, b.ip_be, htons_(7), &a) == 0,
	      "connect");
	for (r = 0; r < 50 && !cs.closed; r++)
		world_round(&a, &b);
	CHECK(cs.closed == 1 && cs.closed_null == 1 && !cs.connected && ss.closed == 0,
	      "refused SYN: closed %d null %d", cs.closed, cs.closed_null);

	/* Held payload: the server keeps every payload packet (a clone) and consumes
	 * nothing: the window closes, the client's data waits in its send buffer
	 * (sends beyond the peer's window succeed up to it, then EAGAIN). */
	memset(&cs, 0, sizeof(cs));
	ss.port = 7;
	ss.hold = 1;
	cs.total = 900000;
	CHECK(iip_tcp_connect(a.ws, a.mac, a.ip_be, htons_(40002), b.mac, b.ip_be, htons_(7), &a) == 0,
	      "connect 2");
	for (r = 0; r < 3000; r++)
		world_round(&a, &b);
	stalled = ss.rcvd;
	CHECK(stalled > 0 && stalled <= 300000, "held: window bounds delivery (%llu)",
	      (unsigned long long)stalled);
	CHECK(cs.sent > stalled, "sends beyond the peer's window are queued (%llu > %llu)",
	      (unsigned long long)cs.sent, (unsigned long long)stalled);
	CHECK(cs.eagain > 0, "EAGAIN once the send side is full");
	/* The held clones still hold the bytes as they arrived. */
	{
		uint64_t off = 0;
		for (i = 0; i < ss.nheld; i++) {
			struct hdrs h;
			CHECK(!parse(ss.held[i], &h), "held frame parses");
			CHECK(h.pay[0] == pat(off), "held payload %d intact", i);
			off += h.plen;
		}
	}
	/* Consume: the window opens and the rest arrives (the server checks it). */
	ss.hold = 0;
	ss.mode = 1;
	for (i = 0; i < ss.nheld; i++)
		iip_ops_pkt_free(ss.held[i], &b);
	iip_tcp_rxbuf_consumed(b.ws, ss.conn, (uint16_t)ss.nheld, &b);
	ss.nheld = 0;
	for (r = 0; r < 200000 && (ss.rcvd < cs.total || cs.sent < cs.total); r++) {
		cli_fill(&a);
		world_round(&a, &b);
	}
	CHECK(ss.rcvd == cs.total, "held then consumed: %llu of %llu arrived",
	      (unsigned long long)ss.rcvd, (unsigned long long)cs.total);
	CHECK(iip_tcp_close(a.ws, cs.conn, &a) == 0, "close after bulk");
	run_until(&a, &b, tcp_done, &x, 20000);
	CHECK(cs.closed == 1 && ss.closed == 1, "held scenario closed");
	ss.mode = 0;

	/* The peer's FIN while the server still holds data: our side stays open until
	 * the held packets are consumed, so the answer to them can still go out. */
	memset(&cs, 0, sizeof(cs));
	ss.closed = 0;
	ss.hold = 1;
	ss.nheld = 0;
	ss.rcvd = 0;
	cs.total = 100;
	CHECK(iip_tcp_connect(a.ws, a.mac, a.ip_be, htons_(40004), b.mac, b.ip_be, htons_(7), &a) == 0,
	      "connect 4");
	for (r = 0; r < 20 && ss.rcvd < 100; r++)
		world_round(&a, &b);
	cs.closing = 1;
	CHECK(iip_tcp_close(a.ws, cs.conn, &a) == 0, "client close with data held");
	for (r = 0; r < 200; r++)
		world_round(&a, &b);
	CHECK(ss.closed == 0 && ss.rcvd == 100, "server still open while holding (closed %d)",
	      ss.closed);
	ss.hold = 0;
	for (i = 0; i < ss.nheld; i++) {
		struct hdrs h;
		struct tpkt *k;
		parse(ss.held[i], &h);
		k = make_payload(0, 0);
		memcpy(k->b->mem, h.pay, h.plen);
		k->len = h.plen;
		CHECK(iip_tcp_send(b.ws, ss.conn, k, 0, &b) == 0, "answer after the FIN");
		iip_ops_pkt_free(ss.held[i], &b);
	}
	iip_tcp_rxbuf_consumed(b.ws, ss.conn, (uint16_t)ss.nheld, &b);
	ss.nheld = 0;
	run_until(&a, &b, tcp_done, &x, 2000);
	CHECK(cs.echoed == 100 && cs.closed == 1 && ss.closed == 1,
	      "answer after the FIN arrived (%llu), both closed",
	      (unsigned long long)cs.echoed);

	/* Close twice, send after close, consumed beyond delivered. */
	memset(&cs, 0, sizeof(cs));
	ss.closed = 0;
	cs.total = 10;
	CHECK(iip_tcp_connect(a.ws, a.mac, a.ip_be, htons_(40003), b.mac, b.ip_be, htons_(7), &a) == 0,
	      "connect 3");
	for (r = 0; r < 20 && cs.echoed < 10; r++)
		world_round(&a, &b);
	rc = iip_tcp_close(a.ws, cs.conn, &a); /* cli_payload closed it already */
	CHECK(rc == 107, "second close: ENOTCONN (%u)", rc);
	{
		struct tpkt *k = make_payload(0, 5);
		rc = iip_tcp_send(a.ws, cs.conn, k, 0, &a);
		CHECK(rc == 107, "send after close: ENOTCONN (%u)", rc);
		iip_ops_pkt_free(k, &a);
	}
	i = (int)iip_compat_stats(a.ws)->consumed_excess;
	iip_tcp_rxbuf_consumed(a.ws, cs.conn, 5, &a);
	CHECK((int)iip_compat_stats(a.ws)->consumed_excess == i + 1, "consumed excess counted");
	run_until(&a, &b, tcp_done, &x, 1000);
	CHECK(cs.closed == 1 && ss.closed == 1, "closed after double close");
	settle(&a, &b);
	check_pools(&a, &b, "semantics");
	node_free(&a);
	node_free(&b);
}

/* iip_l2: the same programs over links that are not Ethernet II (TUN's packet
 * information, 802.1Q, no header at all), then received chains (LRO) on Ethernet,
 * under feature sets that change the adapter's path (none, all, TSO+SG, rx only). */
static int run_l2_lro(void)
{
	static const uint32_t fs[] = {0, F_ALL, F_SG | F_TSO | F_TCP_TX | F_IP4_TX,
	                              F_IP4_RX | F_TCP_RX | F_UDP_RX};
	static const char *const name[] = {"eth", "tun", "vlan", "raw"};
	int l2;
	uint32_t i, runs = 0;

	for (l2 = L2_TUN; l2 <= L2_RAW + 1 && !g_fail; l2++) {
		if (l2 <= L2_RAW)
			l2_set(l2);
		else { /* LRO, on Ethernet */
			l2_set(L2_ETH);
			g_lro = 1;
		}
		for (i = 0; i < sizeof(fs) / sizeof(fs[0]) && !g_fail; i++) {
			scenario_tcp(fs[i], 0, 20000);
			scenario_tcp(fs[i], 1, 300000);
			scenario_udp_arp_icmp(fs[i]);
			runs++;
		}
		if (g_lro)
			CHECK(g_chains > 0 && g_chains_big > 0, "LRO: %llu chains, %llu over 2 KiB",
			      (unsigned long long)g_chains, (unsigned long long)g_chains_big);
		printf("iip_l2: %s%s: %s\n", name[g_lro ? 0 : l2], g_lro ? " with LRO chains" : "",
		       g_fail ? "FAIL" : "ok");
	}
	g_lro = 0;
	l2_set(L2_ETH);
	return g_fail ? 1 : 0;
}

int main(int argc, char **argv)
{
	int quick = argc > 1 && !strcmp(argv[1], "--quick");
	uint32_t f, step = quick ? 73 : 1, combos = 0;

	pool_init();
	if (argc > 1 && !strcmp(argv[1], "--l2"))
		return run_l2_lro();
	scenario_semantics();
	for (f = 0; f <= F_ALL && !g_fail; f += step) {
		scenario_tcp(f, 0, 20000);
		scenario_tcp(f, 1, 300000);
		scenario_udp_arp_icmp(f);
		combos++;
	}
	printf("test_iip_mem: %u feature sets x (echo, bulk, udp/arp/icmp) + semantics: %s\n",
	       combos, g_fail ? "FAIL" : "ok");
	return g_fail ? 1 : 0;
}
