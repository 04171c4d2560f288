/*
 * IPv6 in the simulator (issue 19): nodes with IPv6 addresses (sim_node_config6), DAD
 * in virtual time, UDP over IPv6 echoed with every byte checked (sizes up to 3000, so
 * fragments both ways), ping6 over link-local and global addresses, the same under
 * 5% loss with retries, and a DAD conflict between two nodes (a late node whose
 * address is taken, and two nodes probing the same address at once).
 *
 * With an argument, the echo run's pcap goes to that file (tests/sim/pcap6_tshark.py
 * reads it with tshark: IPv6 frames must decode cleanly).
 */
#include <stdio.h>
#include <string.h>

#include "world.h"

static const char *pcap_path;

static void tweak6(struct ipk_config *c, uint32_t index)
{
	c->ip6_enable = 1;
	sim_node_ip6(c->ip6_addr, index);
	c->ip6_prefix_len = 64;
}

static int addrs_of(const struct sim_node *n)
{
	uint8_t a[8][16];

	return ipk_ip6_addrs(n->ctx, a, 8);
}

static int has_addr(const struct sim_node *n, const uint8_t want[16])
{
	uint8_t a[8][16];
	int i, k = ipk_ip6_addrs(n->ctx, a, 8);

	for (i = 0; i < k; i++)
		if (memcmp(a[i], want, 16) == 0)
			return 1;
	return 0;
}

static int both_up(void *arg)
{
	struct world *w = (struct world *)arg;

	return addrs_of(w->a) == 2 && addrs_of(w->b) == 2;
}

static int world6(struct world *w, uint64_t seed, const struct sim_link_cfg *lc)
{
	world_cfg_tweak = tweak6;
	if (world_init(w, seed, lc, 0) < 0)
		return -1;
	world_cfg_tweak = NULL;
	return 0;
}

/* ------------------------------------------------------------ UDP echo */

struct u6 {
	uint32_t sent, got, bad, echoed, pings;
	uint8_t buf[4096];
};
static struct u6 U;

static void pattern(uint8_t *b, uint32_t len, uint32_t salt)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		b[i] = (uint8_t)(len * 7 + i + salt);
}

/* B: echo every datagram back to where it came from. */
static void b_echo(struct sim_node *n, const struct ipk_atuple *t, void *pkt, uint32_t off,
                   uint32_t len, void *arg)
{
	struct u6 *u = (struct u6 *)arg;
	uint32_t got = ipk_pkt_copy(n->ctx, pkt, off, u->buf, len < 4096 ? len : 4096);

	if (ipk_udp_sendto_addr(n->ctx, t->local_port_be, &t->peer, t->peer_port_be, u->buf, got,
	                        n->sim->now) >= 0)
		u->echoed++;
}

/* A: the echo must carry the bytes sent (the salt is the destination port's low byte
 * of the request: all requests use one pattern per length). */
static void a_recv(struct sim_node *n, const struct ipk_atuple *t, void *pkt, uint32_t off,
                   uint32_t len, void *arg)
{
	struct u6 *u = (struct u6 *)arg;
	uint8_t want[4096];
	uint32_t got = ipk_pkt_copy(n->ctx, pkt, off, u->buf, len < 4096 ? len : 4096);

	pattern(want, got, 0);
	if (t->peer.family != IPK_AF_INET6 || got != len || memcmp(want, u->buf, got) != 0)
		u->bad++;
	else
		u->got++;
}

static void a_pong(struct sim_node *n, const uint8_t from[16], uint16_t id_be, uint16_t seq_be,
                   uint32_t payload_len, void *arg)
{
	(void)n;
	(void)from;
	(void)id_be;
	(void)seq_be;
	(void)payload_len;
	((struct u6 *)arg)->pings++;
}

static void handlers(struct world *w)
{
	struct sim_handlers h;

	memset(&U, 0, sizeof(U));
	memset(&h, 0, sizeof(h));
	h.udp_recv6 = b_echo;
	sim_node_set_handlers(w->b, &h, &U);
	memset(&h, 0, sizeof(h));
	h.udp_recv6 = a_recv;
	h.icmp6_echo_reply = a_pong;
	sim_node_set_handlers(w->a, &h, &U);
	CHECK_EQ(ipk_udp_bind(w->b->ctx, ipk_htons(7)), 0);
	CHECK_EQ(ipk_udp_bind(w->a->ctx, ipk_htons(6000)), 0);
}

static int send6(struct world *w, const uint8_t dst[16], uint32_t len)
{
	static uint8_t b[4096];
	struct ipk_addr to;
	int rc;

	memset(&to, 0, sizeof(to));
	to.family = IPK_AF_INET6;
	memcpy(to.a, dst, 16);
	pattern(b, len, 0);
	rc = ipk_udp_sendto_addr(w->a->ctx, ipk_htons(6000), &to, ipk_htons(7), b, len, w->s->now);
	sim_node_kick(w->a);
	if (rc >= 0)
		U.sent++;
	return rc;
}

static int all_back(void *arg)
{
	(void)arg;
	return U.got + U.bad >= U.sent;
}

static const uint32_t sizes[] = {1, 100, 512, 1200, 1452, 1453, 3000};

static void test_sim_ip6_udp_echo_and_ping_data_intact(void)
{
	static struct world w;
	uint8_t dst[16], ll_b[8][16];
	uint32_t i, k;

	CHECK_EQ(world6(&w, 61, NULL), 0);
	if (pcap_path)
		CHECK_EQ(sim_link_pcap(w.l, pcap_path), 0);
	handlers(&w);
	/* DAD: one probe, RetransTimer 1 s, then link-local and the static address */
	CHECK_EQ(sim_run(w.s, SIM_SEC(5), both_up, &w), SIM_DONE);
	CHECK(sim_node_counters(w.a)->ip6_addrs_up >= 2);
	sim_node_ip6(dst, 2);
	for (k = 0; k < 3; k++)
		for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			CHECK(send6(&w, dst, sizes[i]) >= 0);
			CHECK_EQ(sim_run(w.s, w.s->now + SIM_SEC(2), all_back, NULL), SIM_DONE);
		}
	CHECK_EQ(U.bad, 0);
	CHECK_EQ(U.got, 3 * sizeof(sizes) / sizeof(sizes[0]));
	CHECK_EQ(U.echoed, U.got);
	CHECK(sim_node_counters(w.b)->ip6_reassembled >= 3);
	/* ping6 to B's global address and to its link-local one (first in the list) */
	CHECK_EQ(ipk_ip6_addrs(w.b->ctx, ll_b, 8), 2);
	CHECK_EQ(ll_b[0][0], 0xfe);
	CHECK_EQ(ipk_icmp6_echo(w.a->ctx, dst, ipk_htons(1), ipk_htons(1), 56, w.s->now), 0);
	CHECK_EQ(ipk_icmp6_echo(w.a->ctx, ll_b[0], ipk_htons(1), ipk_htons(2), 56, w.s->now), 0);
	sim_node_kick(w.a);
	sim_run(w.s, w.s->now + SIM_SEC(1), NULL, NULL);
	CHECK_EQ(U.pings, 2);
	CHECK(sim_node_counters(w.a)->nd_rx >= 1);
	world_check_no_leak(&w);
	world_fini(&w);
}

/* 5% loss each way: every datagram is retried until its echo comes (bounded), and
 * every echo that arrives is intact; ND recovers from lost solicitations. */
static void test_sim_ip6_udp_echo_under_loss_retried(void)
{
	static struct world w;
	struct sim_link_cfg lc;
	uint8_t dst[16];
	uint32_t i, tries = 0;

	sim_link_cfg_default(&lc);
	lc.loss = 0.05;
	CHECK_EQ(world6(&w, 62, &lc), 0);
	handlers(&w);
	CHECK_EQ(sim_run(w.s, SIM_SEC(10), both_up, &w), SIM_DONE);
	sim_node_ip6(dst, 2);
	for (i = 0; i < 100; i++) {
		uint32_t before = U.got;

		while (U.got == before && tries < 1000) {
			tries++;
			CHECK(send6(&w, dst, 1 + (i * 37) % 1400) >= 0);
			sim_run(w.s, w.s->now + SIM_MS(300), all_back, NULL);
			U.sent = U.got + U.bad; /* a lost one is not waited for again */
		}
	}
	CHECK_EQ(U.got, 100);
	CHECK_EQ(U.bad, 0);
	CHECK(tries < 1000);
	CHECK(tries > 100); /* the loss did bite: some were sent again */
	world_fini(&w);
}

/* ------------------------------------------------------------ DAD */

static int a_up(void *arg) { return addrs_of((struct sim_node *)arg) == 2; }

/* B comes up later with A's address: A (which holds it) answers B's DAD probe, B
 * marks the address duplicate and never uses it, keeps its link-local, and A keeps
 * the address and still answers on it. */
static void test_sim_ip6_dad_conflict_late_node_loses(void)
{
	struct ipk_config ca, cb;
	struct sim_link_cfg lc;
	struct sim *s = sim_create(63);
	struct sim_node *a, *b;
	uint8_t x[16], lla[8][16];

	sim_node_config6(&ca, 1);
	sim_node_config6(&cb, 2);
	memcpy(cb.ip6_addr, ca.ip6_addr, 16); /* the same address, another MAC */
	memcpy(x, ca.ip6_addr, 16);
	a = sim_node_create(s, &ca, NULL);
	CHECK(a != NULL);
	/* A alone (its frames go nowhere): DAD passes */
	CHECK_EQ(sim_run(s, SIM_SEC(5), a_up, a), SIM_DONE);
	CHECK(has_addr(a, x));
	b = sim_node_create(s, &cb, NULL);
	CHECK(b != NULL);
	sim_link_cfg_default(&lc);
	CHECK(sim_connect(s, a, b, &lc) != NULL);
	sim_run(s, s->now + SIM_SEC(5), NULL, NULL);
	CHECK_EQ(sim_node_counters(b)->ip6_dad_conflicts, 1);
	CHECK_EQ(sim_node_counters(a)->ip6_dad_conflicts, 0);
	CHECK(!has_addr(b, x));
	CHECK_EQ(addrs_of(b), 1); /* its link-local only */
	CHECK(has_addr(a, x));
	/* A still uses the address: B pings it over B's link-local source */
	CHECK_EQ(ipk_ip6_addrs(a->ctx, lla, 8), 2);
	memset(&U, 0, sizeof(U));
	{
		struct sim_handlers h;

		memset(&h, 0, sizeof(h));
		h.icmp6_echo_reply = a_pong;
		sim_node_set_handlers(b, &h, &U);
	}
	CHECK_EQ(ipk_icmp6_echo(b->ctx, lla[0], ipk_htons(9), ipk_htons(1), 8, s->now), 0);
	sim_node_kick(b);
	sim_run(s, s->now + SIM_SEC(1), NULL, NULL);
	CHECK_EQ(U.pings, 1);
	sim_destroy(s);
}

/* Two nodes probing the same address at the same time each see the other's probe
 * (an NS from :: for a tentative address, RFC 4862 §5.4.3): neither uses it. */
static void test_sim_ip6_dad_conflict_simultaneous_both_give_up(void)
{
	struct ipk_config ca, cb;
	struct sim_link_cfg lc;
	struct sim *s = sim_create(64);
	struct sim_node *a, *b;
	uint8_t x[16];

	sim_node_config6(&ca, 1);
	sim_node_config6(&cb, 2);
	memcpy(cb.ip6_addr, ca.ip6_addr, 16);
	memcpy(x, ca.ip6_addr, 16);
	a = sim_node_create(s, &ca, NULL);
	b = sim_node_create(s, &cb, NULL);
	CHECK(a && b);
	sim_link_cfg_default(&lc);
	CHECK(sim_connect(s, a, b, &lc) != NULL);
	sim_run(s, SIM_SEC(5), NULL, NULL);
	CHECK_EQ(sim_node_counters(a)->ip6_dad_conflicts, 1);
	CHECK_EQ(sim_node_counters(b)->ip6_dad_conflicts, 1);
	CHECK(!has_addr(a, x));
	CHECK(!has_addr(b, x));
	CHECK_EQ(addrs_of(a), 1);
	CHECK_EQ(addrs_of(b), 1);
	sim_destroy(s);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		pcap_path = argv[1];
	RUN(test_sim_ip6_udp_echo_and_ping_data_intact);
	if (pcap_path) /* the pcap run only */
		return check_summary();
	RUN(test_sim_ip6_udp_echo_under_loss_retried);
	RUN(test_sim_ip6_dad_conflict_late_node_loses);
	RUN(test_sim_ip6_dad_conflict_simultaneous_both_give_up);
	return check_summary();
}
