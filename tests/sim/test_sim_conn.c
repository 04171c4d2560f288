/*
 * Connection life cycle and the non-TCP paths over the simulator: handshake,
 * active/passive/simultaneous close, 1,000 connections, connection- and
 * packet-pool exhaustion, ARP with queued packets, IPv4 fragments from a raw
 * sender, UDP echo, ICMP echo.
 */
#include <stdio.h>
#include <string.h>

#include "frames.h"
#include "world.h"

#define LPORT 7000

/* ------------------------------------------------------------ probe app */

struct probe {
	struct ipk_conn *c;
	int accepted, connected, fin, closed;
	enum ipk_close_reason why;
	uint64_t t_accepted, t_connected;
	uint64_t rx;
};

static void *pr_accepted(struct sim_node *n, struct ipk_conn *c, void *arg)
{
	struct probe *p = (struct probe *)arg;

	(void)n;
	p->c = c;
	p->accepted++;
	p->t_accepted = n->sim->now;
	return p;
}

static void pr_connected(struct sim_node *n, struct ipk_conn *c, void *user, void *arg)
{
	(void)c;
	(void)user;
	((struct probe *)arg)->connected++;
	((struct probe *)arg)->t_connected = n->sim->now;
}

static void pr_payload(struct sim_node *n, struct ipk_conn *c, void *user, void *pkt,
                       uint32_t off, uint32_t len, void *arg)
{
	struct probe *p = (struct probe *)arg;

	(void)user;
	(void)off;
	if (!pkt) {
		p->fin++;
		return;
	}
	p->rx += len;
	ipk_tcp_recved(n->ctx, c, len, n->sim->now);
}

static void pr_closed(struct sim_node *n, struct ipk_conn *c, void *user,
                      enum ipk_close_reason why, void *arg)
{
	struct probe *p = (struct probe *)arg;

	(void)n;
	(void)c;
	(void)user;
	p->closed++;
	p->why = why;
	p->c = NULL;
}

static void probe_attach(struct sim_node *n, struct probe *p)
{
	struct sim_handlers h;

	memset(p, 0, sizeof(*p));
	memset(&h, 0, sizeof(h));
	h.tcp_accepted = pr_accepted;
	h.tcp_connected = pr_connected;
	h.tcp_payload = pr_payload;
	h.tcp_closed = pr_closed;
	sim_node_set_handlers(n, &h, p);
}

struct pair {
	struct world w;
	struct probe pa, pb; /* A connects, B accepts */
};

static int pair_up(void *arg)
{
	struct pair *p = (struct pair *)arg;
	return p->pa.connected && p->pb.accepted;
}

static int pair_closed(void *arg)
{
	struct pair *p = (struct pair *)arg;
	return p->pa.closed && p->pb.closed;
}

static int pair_open(struct pair *p)
{
	if (world_init(&p->w, 3, NULL, 0))
		return -1;
	probe_attach(p->w.a, &p->pa);
	probe_attach(p->w.b, &p->pb);
	if (ipk_tcp_listen(p->w.b->ctx, ipk_htons(LPORT), 8) < 0 ||
	    ipk_tcp_connect(p->w.a->ctx, p->w.cb.ip4_be, ipk_htons(LPORT), 0, &p->pa, &p->pa.c,
	                    0) < 0)
		return -1;
	sim_node_kick(p->w.a);
	return sim_run(p->w.s, SIM_SEC(5), pair_up, p) == SIM_DONE ? 0 : -1;
}

static void run_for(struct world *w, uint64_t ns)
{
	sim_run(w->s, w->s->now + ns, NULL, NULL);
}

static struct pair P;

static void test_listen_syn_handshake_establishes_both(void)
{
	CHECK_EQ(pair_open(&P), 0);
	/* ARP exchange, then SYN / SYN-ACK: two round trips of 10 ms; the ACK half a
	 * round trip later */
	CHECK(P.pa.t_connected >= SIM_MS(20) && P.pa.t_connected < SIM_MS(21));
	CHECK(P.pb.t_accepted >= SIM_MS(25) && P.pb.t_accepted < SIM_MS(26));
	CHECK_EQ(ipk_tcp_state(P.pa.c), IPK_TCP_ESTABLISHED);
	run_for(&P.w, SIM_MS(6));
	CHECK_EQ(ipk_tcp_state(P.pb.c), IPK_TCP_ESTABLISHED);
	CHECK_EQ(sim_node_counters(P.w.a)->tcp_active_opens, 1);
	CHECK_EQ(sim_node_counters(P.w.b)->tcp_passive_opens, 1);
	ipk_tcp_abort(P.w.a->ctx, P.pa.c, P.w.s->now);
	sim_node_kick(P.w.a);
	CHECK_EQ(sim_run(P.w.s, P.w.s->now + SIM_SEC(1), pair_closed, &P), SIM_DONE);
	CHECK_EQ(P.pa.why, IPK_CLOSE_ABORTED);
	CHECK_EQ(P.pb.why, IPK_CLOSE_RESET);
	world_check_no_leak(&P.w);
	world_fini(&P.w);
}

/* The closer goes FIN_WAIT_1 -> FIN_WAIT_2 -> TIME_WAIT -> closed; the other side
 * CLOSE_WAIT -> LAST_ACK -> closed (RFC 9293 §3.3.2, Figure 5). */
static void close_sequence(int client_first)
{
	struct sim_node *first, *second;
	struct probe *pf = client_first ? &P.pa : &P.pb, *ps = client_first ? &P.pb : &P.pa;

	CHECK_EQ(pair_open(&P), 0);
	first = client_first ? P.w.a : P.w.b;
	second = client_first ? P.w.b : P.w.a;
	run_for(&P.w, SIM_MS(10));
	CHECK_EQ(ipk_tcp_close(first->ctx, pf->c, P.w.s->now), 0);
	sim_node_kick(first);
	run_for(&P.w, SIM_MS(1));
	CHECK_EQ(ipk_tcp_state(pf->c), IPK_TCP_FIN_WAIT_1);
	run_for(&P.w, SIM_MS(60)); /* FIN there, ACK back (delayed ACK included) */
	CHECK_EQ(ps->fin, 1);
	CHECK_EQ(ipk_tcp_state(pf->c), IPK_TCP_FIN_WAIT_2);
	CHECK_EQ(ipk_tcp_state(ps->c), IPK_TCP_CLOSE_WAIT);
	CHECK_EQ(ipk_tcp_close(second->ctx, ps->c, P.w.s->now), 0);
	sim_node_kick(second);
	run_for(&P.w, SIM_MS(1));
	CHECK_EQ(ipk_tcp_state(ps->c), IPK_TCP_LAST_ACK);
	run_for(&P.w, SIM_MS(30));
	CHECK_EQ(ps->closed, 1);
	CHECK_EQ(ps->why, IPK_CLOSE_NORMAL);
	/* end of stream reached the closer: as a FIN event, or (engine choice when
	 * FIN_WAIT_2 goes straight to TIME_WAIT) as a normal close */
	CHECK(pf->fin == 1 || (pf->closed && pf->why == IPK_CLOSE_NORMAL));
	if (!pf->closed) /* the handle lives on through TIME_WAIT */
		CHECK_EQ(ipk_tcp_state(pf->c), IPK_TCP_TIME_WAIT);
	CHECK(ipk_conns_free(first->ctx) < first->res.conns); /* held for 2*MSL */
	run_for(&P.w, SIM_SEC(3));
	CHECK_EQ(pf->closed, 1);
	CHECK_EQ(pf->why, IPK_CLOSE_NORMAL);
	world_check_no_leak(&P.w);
	world_fini(&P.w);
}

static void test_established_active_close_by_client_time_wait_then_free(void)
{
	close_sequence(1);
}

static void test_established_active_close_by_server_time_wait_then_free(void)
{
	close_sequence(0);
}

static void test_established_simultaneous_close_both_closing_then_free(void)
{
	CHECK_EQ(pair_open(&P), 0);
	run_for(&P.w, SIM_MS(10));
	CHECK_EQ(ipk_tcp_close(P.w.a->ctx, P.pa.c, P.w.s->now), 0);
	CHECK_EQ(ipk_tcp_close(P.w.b->ctx, P.pb.c, P.w.s->now), 0);
	sim_node_kick(P.w.a);
	sim_node_kick(P.w.b);
	run_for(&P.w, SIM_MS(1));
	CHECK_EQ(ipk_tcp_state(P.pa.c), IPK_TCP_FIN_WAIT_1);
	CHECK_EQ(ipk_tcp_state(P.pb.c), IPK_TCP_FIN_WAIT_1);
	/* the FINs cross: each arrives in FIN_WAIT_1 (RFC 9293 §3.6 simultaneous close) */
	run_for(&P.w, SIM_US(4500));
	CHECK_EQ(ipk_tcp_state(P.pa.c), IPK_TCP_CLOSING);
	CHECK_EQ(ipk_tcp_state(P.pb.c), IPK_TCP_CLOSING);
	run_for(&P.w, SIM_MS(60));
	CHECK_EQ(P.pa.fin + P.pb.fin, 2);
	if (!P.pa.closed)
		CHECK_EQ(ipk_tcp_state(P.pa.c), IPK_TCP_TIME_WAIT);
	if (!P.pb.closed)
		CHECK_EQ(ipk_tcp_state(P.pb.c), IPK_TCP_TIME_WAIT);
	run_for(&P.w, SIM_SEC(3));
	CHECK_EQ(P.pa.closed + P.pb.closed, 2);
	CHECK_EQ(P.pa.why, IPK_CLOSE_NORMAL);
	CHECK_EQ(P.pb.why, IPK_CLOSE_NORMAL);
	world_check_no_leak(&P.w);
	world_fini(&P.w);
}

/* ------------------------------------------------------------ many connections */

struct many {
	struct world w;
	struct sim_bulk cli, srv;
	uint32_t started, target;
	int connect_err;
};
static struct many M;

static void many_next(struct sim_bulk *app, struct sim_bulk_conn *bc)
{
	struct many *m = (struct many *)app->hook_arg;

	(void)bc;
	if (m->started < m->target) {
		m->started++;
		if (sim_bulk_connect(app, m->w.cb.ip4_be, ipk_htons(LPORT), NULL) < 0)
			m->connect_err++;
	}
}

static int many_done(void *arg)
{
	struct many *m = (struct many *)arg;
	return m->cli.closed >= m->target || m->connect_err;
}

static void test_thousand_connections_open_close_no_leak(void)
{
	struct sim_link_cfg lc;
	uint32_t i;

	sim_link_cfg_default(&lc);
	lc.delay_ns = SIM_US(100);
	memset(&M, 0, sizeof(M));
	CHECK_EQ(world_init(&M.w, 4, &lc, 0), 0);
	M.target = 1000;
	CHECK_EQ(sim_bulk_init(&M.srv, M.w.b, ipk_htons(LPORT), 3000, 9), 0);
	CHECK_EQ(sim_bulk_init(&M.cli, M.w.a, 0, 0, 0), 0);
	sim_bulk_expect(&M.cli, 3000, 9);
	M.cli.recycle = M.srv.recycle = 1;
	M.cli.on_closed = many_next;
	M.cli.hook_arg = &M;
	for (i = 0; i < 16; i++)
		many_next(&M.cli, NULL); /* 16 in flight; each close starts the next */
	CHECK_EQ(sim_run(M.w.s, SIM_SEC(600), many_done, &M), SIM_DONE);
	CHECK_EQ(M.connect_err, 0);
	CHECK_EQ(M.cli.closed, 1000);
	CHECK_EQ(M.cli.ok_transfers, 1000);
	CHECK_EQ(M.cli.failed, 0);
	CHECK_EQ(sim_node_counters(M.w.a)->tcp_active_opens, 1000);
	world_check_no_leak(&M.w);
	CHECK_EQ(M.srv.closed, 1000);
	world_fini(&M.w);
}

/* ------------------------------------------------------------ exhaustion */

/* SYN cookies off: this test is about the pool. With cookies, a completed handshake
 * that finds the pool empty is dropped, and a peer waiting for the server to speak
 * first would wait (the RFC 4987 §3.6 trade-off). */
static void no_cookies(struct ipk_config *c, uint32_t index)
{
	(void)index;
	c->tcp_syncookies = 0;
}

/* A server with 4 connection objects, 12 clients at once. Its SYN queue (half the
 * pool) drops SYNs at first; each served connection ends in TIME_WAIT on the
 * server (it closes first), and the clients' retransmitted SYNs take those
 * connections' objects (tcp_tw_recycled): all 12 are served within seconds. Before,
 * TIME_WAIT held the pool for 2*MSL (60 s) and SYNs met an empty pool. */
static void test_conn_pool_exhausted_server_drops_syn_then_recovers(void)
{
	struct sim_node_res rb;
	const struct ipk_counters *cb;
	uint32_t i;

	memset(&rb, 0, sizeof(rb));
	rb.conns = 4;
	memset(&M, 0, sizeof(M));
	world_cfg_tweak = no_cookies;
	CHECK_EQ(world_init_res(&M.w, 5, NULL, 0, 0, NULL, &rb), 0);
	world_cfg_tweak = NULL;
	CHECK_EQ(sim_bulk_init(&M.srv, M.w.b, ipk_htons(LPORT), 20000, 3), 0);
	CHECK_EQ(sim_bulk_init(&M.cli, M.w.a, 0, 0, 0), 0);
	sim_bulk_expect(&M.cli, 20000, 3);
	M.target = 12;
	for (i = 0; i < 12; i++)
		CHECK_EQ(sim_bulk_connect(&M.cli, M.w.cb.ip4_be, ipk_htons(LPORT), NULL), 0);
	CHECK_EQ(sim_run(M.w.s, SIM_SEC(300), many_done, &M), SIM_DONE);
	cb = sim_node_counters(M.w.b);
	CHECK(cb->drop[IPK_DROP_TCP_BACKLOG] + cb->drop[IPK_DROP_NO_CONN_MEM] > 0);
	CHECK(cb->tcp_tw_recycled > 0);
	CHECK(sim_now(M.w.s) < SIM_SEC(30)); /* long before any TIME_WAIT ran out */
	CHECK_EQ(M.cli.ok_transfers, 12); /* SYN retransmission got the rest in later */
	world_check_no_leak(&M.w);
	world_fini(&M.w);
}

static void test_conn_pool_exhausted_client_connect_fails_then_succeeds(void)
{
	struct sim_node_res ra;

	memset(&ra, 0, sizeof(ra));
	ra.conns = 2;
	memset(&M, 0, sizeof(M));
	CHECK_EQ(world_init_res(&M.w, 6, NULL, 0, 0, &ra, NULL), 0);
	CHECK_EQ(sim_bulk_init(&M.srv, M.w.b, ipk_htons(LPORT), 1000, 3), 0);
	CHECK_EQ(sim_bulk_init(&M.cli, M.w.a, 0, 0, 0), 0);
	sim_bulk_expect(&M.cli, 1000, 3);
	CHECK_EQ(sim_bulk_connect(&M.cli, M.w.cb.ip4_be, ipk_htons(LPORT), NULL), 0);
	CHECK_EQ(sim_bulk_connect(&M.cli, M.w.cb.ip4_be, ipk_htons(LPORT), NULL), 0);
	CHECK_EQ(sim_bulk_connect(&M.cli, M.w.cb.ip4_be, ipk_htons(LPORT), NULL), IPK_ENOMEM);
	M.target = 2;
	CHECK_EQ(sim_run(M.w.s, SIM_SEC(30), many_done, &M), SIM_DONE);
	/* the client closed second (passive close): no TIME_WAIT, its objects are free */
	CHECK_EQ(ipk_conns_free(M.w.a->ctx), 2);
	CHECK_EQ(sim_bulk_connect(&M.cli, M.w.cb.ip4_be, ipk_htons(LPORT), NULL), 0);
	M.target = 3;
	CHECK_EQ(sim_run(M.w.s, SIM_SEC(30), many_done, &M), SIM_DONE);
	CHECK_EQ(M.cli.ok_transfers, 3);
	world_check_no_leak(&M.w);
	world_fini(&M.w);
}

static void test_pkt_pool_fault_injection_transfer_still_matches(void)
{
	struct sim_bulk_conn *bc = NULL;

	memset(&M, 0, sizeof(M));
	CHECK_EQ(world_init(&M.w, 7, NULL, 0), 0);
	CHECK_EQ(sim_bulk_init(&M.srv, M.w.b, ipk_htons(LPORT), 2u << 20, 4), 0);
	CHECK_EQ(sim_bulk_init(&M.cli, M.w.a, 0, 0, 0), 0);
	sim_bulk_expect(&M.cli, 2u << 20, 4);
	M.w.a->pool->fail_every = 37;
	M.w.b->pool->fail_every = 41;
	CHECK_EQ(sim_bulk_connect(&M.cli, M.w.cb.ip4_be, ipk_htons(LPORT), &bc), 0);
	M.target = 1;
	CHECK_EQ(sim_run(M.w.s, SIM_SEC(300), many_done, &M), SIM_DONE);
	CHECK_EQ(M.cli.ok_transfers, 1);
	CHECK(M.w.a->pool->alloc_fail > 0 && M.w.b->pool->alloc_fail > 0);
	/* refusals surfaced as counted drops (engine side) or NIC rx drops */
	CHECK(sim_node_counters(M.w.b)->drop[IPK_DROP_NO_PKT] + M.w.a->port.st.rx_nobuf +
	          M.w.b->port.st.rx_nobuf > 0);
	M.w.a->pool->fail_every = M.w.b->pool->fail_every = 0;
	world_check_no_leak(&M.w);
	world_fini(&M.w);
}

/* ------------------------------------------------------------ UDP / ICMP / ARP */

struct udp_rx {
	uint32_t n, bad;
	uint64_t bytes;
	uint32_t echo_n;
	uint16_t echo_id[8], echo_seq[8];
	uint32_t echo_len[8];
	uint8_t last[4096];
	uint32_t last_len;
};
static struct udp_rx U;

static void u_recv(struct sim_node *n, const struct ipk_tuple *t, void *pkt, uint32_t off,
                   uint32_t len, void *arg)
{
	struct udp_rx *u = (struct udp_rx *)arg;
	uint32_t i;

	(void)t;
	u->n++;
	u->bytes += len;
	u->last_len = ipk_pkt_copy(n->ctx, pkt, off, u->last, len < 4096 ? len : 4096);
	for (i = 0; i < u->last_len; i++)
		if (u->last[i] != (uint8_t)(len + i))
			u->bad++;
}

static void u_echo_reply(struct sim_node *n, uint32_t from, uint16_t id_be, uint16_t seq_be,
                         uint32_t len, void *arg)
{
	struct udp_rx *u = (struct udp_rx *)arg;

	(void)n;
	(void)from;
	if (u->echo_n < 8) {
		u->echo_id[u->echo_n] = ipk_ntohs(id_be);
		u->echo_seq[u->echo_n] = ipk_ntohs(seq_be);
		u->echo_len[u->echo_n] = len;
	}
	u->echo_n++;
}

static void udp_client(struct world *w)
{
	struct sim_handlers h;

	memset(&U, 0, sizeof(U));
	memset(&h, 0, sizeof(h));
	h.udp_recv = u_recv;
	h.icmp_echo_reply = u_echo_reply;
	sim_node_set_handlers(w->a, &h, &U);
	CHECK_EQ(ipk_udp_bind(w->a->ctx, ipk_htons(6000)), 0);
}

static int udp_send_pattern(struct world *w, uint32_t len)
{
	uint8_t buf[2048];
	uint32_t i;

	for (i = 0; i < len; i++)
		buf[i] = (uint8_t)(len + i);
	i = (uint32_t)ipk_udp_sendto(w->a->ctx, ipk_htons(6000), w->cb.ip4_be, ipk_htons(7), buf,
	                             len, w->s->now);
	sim_node_kick(w->a);
	return (int)i;
}

static void test_arp_unresolved_queues_packets_then_sends_all(void)
{
	static struct world w;
	static struct sim_echo e;

	CHECK_EQ(world_init(&w, 8, NULL, 0), 0);
	CHECK_EQ(sim_echo_init(&e, w.b, 0, ipk_htons(7)), 0);
	udp_client(&w);
	/* three datagrams before any ARP: they wait for the reply, none is lost */
	CHECK(udp_send_pattern(&w, 100) >= 0);
	CHECK(udp_send_pattern(&w, 200) >= 0);
	CHECK(udp_send_pattern(&w, 300) >= 0);
	run_for(&w, SIM_MS(100));
	CHECK_EQ(U.n, 3);
	CHECK_EQ(U.bad, 0);
	CHECK_EQ(e.udp_datagrams, 3);
	CHECK(sim_node_counters(w.a)->arp_tx >= 1);
	CHECK(sim_node_counters(w.b)->arp_rx >= 1);
	CHECK_EQ(sim_node_counters(w.a)->drop[IPK_DROP_ARP_QUEUE_FULL], 0);
	/* B learned A from the request: it never had to ask */
	CHECK_EQ(sim_node_counters(w.b)->arp_tx, 1);
	world_check_no_leak(&w);
	world_fini(&w);
}

static void test_udp_echo_roundtrip_sizes_intact(void)
{
	static struct world w;
	static struct sim_echo e;
	/* 1473 and 2000: above mtu - 28, sent as fragments both ways */
	static const uint32_t sizes[] = {0, 1, 7, 100, 512, 1000, 1471, 1472, 1473, 2000};
	uint32_t i;

	CHECK_EQ(world_init(&w, 9, NULL, 0), 0);
	CHECK_EQ(sim_echo_init(&e, w.b, 0, ipk_htons(7)), 0);
	udp_client(&w);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		CHECK(udp_send_pattern(&w, sizes[i]) >= 0);
		run_for(&w, SIM_MS(30));
		CHECK_EQ(U.n, i + 1);
		CHECK_EQ(U.last_len, sizes[i]);
	}
	CHECK_EQ(U.bad, 0);
	CHECK_EQ(sim_node_counters(w.a)->ip4_fragmented, 2);
	world_check_no_leak(&w);
	world_fini(&w);
}

static void test_icmp_echo_request_gets_reply_event(void)
{
	static struct world w;
	uint16_t s;

	CHECK_EQ(world_init(&w, 10, NULL, 0), 0);
	udp_client(&w);
	for (s = 1; s <= 3; s++) {
		CHECK(ipk_icmp_echo(w.a->ctx, w.cb.ip4_be, ipk_htons(0x1234), ipk_htons(s), 56,
		                    w.s->now) >= 0);
		sim_node_kick(w.a);
		run_for(&w, SIM_MS(30));
	}
	CHECK_EQ(U.echo_n, 3);
	for (s = 0; s < 3; s++) {
		CHECK_EQ(U.echo_id[s], 0x1234);
		CHECK_EQ(U.echo_seq[s], s + 1);
		CHECK_EQ(U.echo_len[s], 56);
	}
	CHECK_EQ(sim_node_counters(w.b)->icmp_rx, 3);
	world_check_no_leak(&w);
	world_fini(&w);
}

/* ------------------------------------------------------------ fragments */

static const uint8_t MAC_R[6] = {2, 0, 0, 0, 0, 0x63};

/* Inject one fragment of the IP payload `dgram` (UDP header + data) from 10.0.0.99. */
static void frag_send(struct sim_port *r, const uint8_t *mac_b, const uint8_t *dgram,
                      uint16_t id, uint32_t off, uint32_t len, int more)
{
	uint8_t f[1600];

	tf_eth(f, mac_b, MAC_R, 0x0800);
	tf_ip4(f + 14, 0x0a000063, 0x0a000002, 17, (uint16_t)(20 + len), id,
	       (uint16_t)((more ? 0x2000 : 0) | (off / 8)));
	memcpy(f + 34, dgram + off, len);
	sim_port_inject(r, f, 34 + len);
}

/* A UDP datagram to port 9000 with 3000 bytes of pattern (len + i). */
static uint32_t big_udp(uint8_t *d, uint8_t salt)
{
	uint8_t ph[20];
	uint32_t i, n = 3000;

	tf_wr16(d, 4444);
	tf_wr16(d + 2, 9000);
	tf_wr16(d + 4, (uint16_t)(8 + n));
	tf_wr16(d + 6, 0);
	for (i = 0; i < n; i++)
		d[8 + i] = (uint8_t)(n + i + salt);
	/* checksum via a scratch pseudo IPv4 header */
	tf_ip4(ph, 0x0a000063, 0x0a000002, 17, (uint16_t)(20 + 8 + n), 0, 0);
	{
		uint32_t s = sim_csum_add(0, ph + 12, 8) + 17 + 8 + n;
		uint16_t c = sim_csum_fold(sim_csum_add(s, d, 8 + n));
		tf_wr16(d + 6, c ? c : 0xffff);
	}
	return 8 + n;
}

static void test_ip4_fragments_in_order_out_of_order_and_overlap(void)
{
	static struct world w;
	static uint8_t d[3100];
	struct sim *s = sim_create(11);
	struct ipk_config cb;
	struct sim_node *b;
	struct sim_port *r;
	struct sim_link_cfg lc;
	struct sim_handlers h;

	sim_link_cfg_default(&lc);
	world_cfg(&cb, 2, 0);
	b = sim_node_create(s, &cb, NULL);
	r = sim_port_raw(s, IPK_LINK_ETH, 1500, NULL, NULL);
	CHECK(b && r && sim_link_create(s, r, &b->port, &lc));
	memset(&U, 0, sizeof(U));
	memset(&h, 0, sizeof(h));
	h.udp_recv = u_recv;
	sim_node_set_handlers(b, &h, &U);
	CHECK_EQ(ipk_udp_bind(b->ctx, ipk_htons(9000)), 0);
	big_udp(d, 0);
	/* in order */
	frag_send(r, cb.mac, d, 1, 0, 1480, 1);
	frag_send(r, cb.mac, d, 1, 1480, 1480, 1);
	frag_send(r, cb.mac, d, 1, 2960, 48, 0);
	sim_run(s, s->now + SIM_MS(50), NULL, NULL);
	CHECK_EQ(U.n, 1);
	CHECK_EQ(U.last_len, 3000);
	CHECK_EQ(U.bad, 0);
	/* last first, then the rest backwards */
	frag_send(r, cb.mac, d, 2, 2960, 48, 0);
	frag_send(r, cb.mac, d, 2, 1480, 1480, 1);
	frag_send(r, cb.mac, d, 2, 0, 1480, 1);
	sim_run(s, s->now + SIM_MS(50), NULL, NULL);
	CHECK_EQ(U.n, 2);
	CHECK_EQ(U.bad, 0);
	CHECK(ipk_counters(b->ctx)->ip4_reassembled >= 2);
	/* overlapping pieces with different bytes: never delivered (RFC 5722 spirit) */
	frag_send(r, cb.mac, d, 3, 0, 1480, 1);
	big_udp(d, 1);
	frag_send(r, cb.mac, d, 3, 1000, 1480, 1);
	frag_send(r, cb.mac, d, 3, 2480, 528, 0);
	sim_run(s, s->now + SIM_MS(50), NULL, NULL);
	CHECK_EQ(U.n, 2);
	CHECK(ipk_counters(b->ctx)->drop[IPK_DROP_FRAG_OVERLAP] >= 1);
	/* a lone fragment times out and is freed */
	frag_send(r, cb.mac, d, 4, 0, 1480, 1);
	sim_run(s, s->now + SIM_SEC(40), NULL, NULL);
	CHECK_EQ(U.n, 2);
	CHECK(ipk_counters(b->ctx)->drop[IPK_DROP_FRAG_TIMEOUT] >= 1);
	CHECK_EQ(b->pool->descs_out, 0);
	CHECK_EQ(b->pool->bufs_out, 0);
	CHECK_EQ(ipk_pbs_free(b->ctx), b->res.pbs);
	sim_destroy(s);
	(void)w;
}

int main(void)
{
	RUN(test_listen_syn_handshake_establishes_both);
	RUN(test_established_active_close_by_client_time_wait_then_free);
	RUN(test_established_active_close_by_server_time_wait_then_free);
	RUN(test_established_simultaneous_close_both_closing_then_free);
	RUN(test_thousand_connections_open_close_no_leak);
	RUN(test_conn_pool_exhausted_server_drops_syn_then_recovers);
	RUN(test_conn_pool_exhausted_client_connect_fails_then_succeeds);
	RUN(test_pkt_pool_fault_injection_transfer_still_matches);
	RUN(test_arp_unresolved_queues_packets_then_sends_all);
	RUN(test_udp_echo_roundtrip_sizes_intact);
	RUN(test_icmp_echo_request_gets_reply_event);
	RUN(test_ip4_fragments_in_order_out_of_order_and_overlap);
	return check_summary();
}
