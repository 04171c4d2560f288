/*
 * Unit tests of the simulator's own parts (no engine traffic): SHA-256, the PRNG,
 * the event queue, links and their impairments over raw ports, the pcap writer and
 * the NIC offload model.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/check.h"
#include "frames.h"
#include "sim.h"

static const uint8_t MAC_A[6] = {2, 0, 0, 0, 0, 1}, MAC_B[6] = {2, 0, 0, 0, 0, 2};

static int hex_is(const uint8_t d[32], const char *hex)
{
	char h[65];
	sha256_hex(d, h);
	return strcmp(h, hex) == 0;
}

/* ------------------------------------------------------------ SHA-256 */

static void test_sha256_fips_180_4_vectors(void)
{
	static const char m448[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	uint8_t d[32];
	struct sha256 s;
	char *mil = (char *)malloc(1000000);
	int i;

	sha256("abc", 3, d);
	CHECK(hex_is(d, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
	sha256("", 0, d);
	CHECK(hex_is(d, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
	sha256(m448, 56, d);
	CHECK(hex_is(d, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
	memset(mil, 'a', 1000000);
	sha256(mil, 1000000, d);
	CHECK(hex_is(d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
	/* the same million in uneven pieces */
	sha256_init(&s);
	for (i = 0; i < 1000000;) {
		int k = 1 + (i * 7) % 131;
		if (k > 1000000 - i)
			k = 1000000 - i;
		sha256_update(&s, mil + i, (size_t)k);
		i += k;
	}
	sha256_final(&s, d);
	CHECK(hex_is(d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
	free(mil);
}

/* ------------------------------------------------------------ PRNG */

static void test_rng_same_seed_same_stream(void)
{
	struct sim_rng a, b, c;
	int i, same = 1, differ = 0;

	sim_rng_seed(&a, 42);
	sim_rng_seed(&b, 42);
	sim_rng_seed(&c, 43);
	for (i = 0; i < 1000; i++) {
		uint64_t x = sim_rng_next(&a), y = sim_rng_next(&b), z = sim_rng_next(&c);
		same &= x == y;
		differ |= x != z;
	}
	CHECK(same);
	CHECK(differ);
}

static void test_rng_below_and_chance_bounds(void)
{
	struct sim_rng r;
	int i, hits = 0, ok = 1;

	sim_rng_seed(&r, 7);
	for (i = 0; i < 10000; i++) {
		ok &= sim_rng_below(&r, 10) < 10;
		ok &= !sim_rng_chance(&r, 0.0);
		ok &= sim_rng_chance(&r, 1.0);
		hits += sim_rng_chance(&r, 0.25);
	}
	CHECK(ok);
	CHECK_EQ(sim_rng_below(&r, 0), 0);
	CHECK(hits > 2300 && hits < 2700);
}

/* ------------------------------------------------------------ events */

struct order { int seen[8]; int n; uint64_t t[8]; };
static struct order g_order;

static void ev_note(struct sim *s, void *arg)
{
	g_order.t[g_order.n] = s->now;
	g_order.seen[g_order.n++] = (int)(intptr_t)arg;
}

static void test_events_run_by_time_then_insertion(void)
{
	struct sim *s = sim_create(1);

	memset(&g_order, 0, sizeof(g_order));
	sim_at(s, 300, ev_note, (void *)(intptr_t)1);
	sim_at(s, 100, ev_note, (void *)(intptr_t)2);
	sim_at(s, 300, ev_note, (void *)(intptr_t)3);
	sim_at(s, 100, ev_note, (void *)(intptr_t)4);
	sim_at(s, 200, ev_note, (void *)(intptr_t)5);
	CHECK_EQ(sim_run(s, 1000, NULL, NULL), SIM_IDLE);
	CHECK_EQ(g_order.n, 5);
	CHECK_EQ(g_order.seen[0], 2);
	CHECK_EQ(g_order.seen[1], 4);
	CHECK_EQ(g_order.seen[2], 5);
	CHECK_EQ(g_order.seen[3], 1);
	CHECK_EQ(g_order.seen[4], 3);
	CHECK_EQ(g_order.t[4], 300);
	sim_destroy(s);
}

static int pred_two(void *arg)
{
	(void)arg;
	return g_order.n >= 2;
}

static void test_run_stops_at_predicate_time_and_limit(void)
{
	struct sim *s = sim_create(1);
	int i;

	memset(&g_order, 0, sizeof(g_order));
	for (i = 0; i < 5; i++)
		sim_at(s, 100 * (uint64_t)(i + 1), ev_note, NULL);
	CHECK_EQ(sim_run(s, 1000, pred_two, NULL), SIM_DONE);
	CHECK_EQ(s->now, 200);
	CHECK_EQ(sim_run(s, 350, NULL, NULL), SIM_TIME);
	CHECK_EQ(s->now, 350);
	CHECK_EQ(g_order.n, 3);
	s->max_events = 1;
	CHECK_EQ(sim_run(s, 1000, NULL, NULL), SIM_LIMIT);
	CHECK_EQ(g_order.n, 4);
	sim_destroy(s);
}

/* ------------------------------------------------------------ links */

struct rxlog {
	uint32_t n;
	uint64_t t[64];
	uint32_t len[64];
	uint8_t first[64];
	uint8_t data[64][64];
};

static void rx_record(struct sim_port *p, const uint8_t *f, uint32_t len, void *arg)
{
	struct rxlog *r = (struct rxlog *)arg;

	if (r->n < 64) {
		r->t[r->n] = p->sim->now;
		r->len[r->n] = len;
		r->first[r->n] = len > 14 ? f[14] : 0;
		memcpy(r->data[r->n], f, len < 64 ? len : 64);
	}
	r->n++;
}

static void rx_count(struct sim_port *p, const uint8_t *f, uint32_t len, void *arg)
{
	(void)p;
	(void)f;
	(void)len;
	(*(uint32_t *)arg)++;
}

static void test_link_serialization_and_delay(void)
{
	struct sim *s = sim_create(1);
	struct rxlog rb;
	struct sim_port *a, *b;
	struct sim_link_cfg lc;
	uint8_t f[1000];

	memset(&rb, 0, sizeof(rb));
	memset(f, 0, sizeof(f));
	sim_link_cfg_default(&lc);
	lc.rate_bps = 8000000; /* 1000 bytes = 1 ms */
	lc.delay_ns = SIM_MS(5);
	a = sim_port_raw(s, IPK_LINK_ETH, 1500, NULL, NULL);
	b = sim_port_raw(s, IPK_LINK_ETH, 1500, rx_record, &rb);
	CHECK(sim_link_create(s, a, b, &lc) != NULL);
	CHECK_EQ(sim_port_inject(a, f, sizeof(f)), 0);
	CHECK_EQ(sim_port_inject(a, f, sizeof(f)), 0);
	sim_run(s, SIM_SEC(1), NULL, NULL);
	CHECK_EQ(rb.n, 2);
	CHECK_EQ(rb.t[0], SIM_MS(6));
	CHECK_EQ(rb.t[1], SIM_MS(7));
	CHECK_EQ(a->link->st[0].delivered, 2);
	CHECK_EQ(a->link->st[0].delivered_bytes, 2000);
	sim_destroy(s);
}

static void test_link_drop_tail_queue_limit(void)
{
	struct sim *s = sim_create(1);
	uint32_t got = 0;
	struct sim_port *a, *b;
	struct sim_link_cfg lc;
	struct sim_link *l;
	uint8_t f[1000];
	int i;

	memset(f, 0, sizeof(f));
	sim_link_cfg_default(&lc);
	lc.rate_bps = 8000000;
	lc.queue_bytes = 3000;
	a = sim_port_raw(s, IPK_LINK_ETH, 1500, NULL, NULL);
	b = sim_port_raw(s, IPK_LINK_ETH, 1500, rx_count, &got);
	l = sim_link_create(s, a, b, &lc);
	for (i = 0; i < 10; i++)
		sim_port_inject(a, f, sizeof(f));
	sim_run(s, SIM_SEC(1), NULL, NULL);
	CHECK_EQ(got, 3);
	CHECK_EQ(l->st[0].drop[SIM_LDROP_QUEUE], 7);
	CHECK_EQ(l->st[0].sent, 10);
	sim_destroy(s);
}

static void test_link_loss_rate_near_probability(void)
{
	struct sim *s = sim_create(9);
	uint32_t got = 0;
	struct sim_port *a, *b;
	struct sim_link_cfg lc;
	struct sim_link *l;
	uint8_t f[100];
	int i;

	memset(f, 0, sizeof(f));
	sim_link_cfg_default(&lc);
	lc.rate_bps = 0;
	lc.queue_bytes = 0;
	lc.loss = 0.1;
	a = sim_port_raw(s, IPK_LINK_ETH, 1500, NULL, NULL);
	b = sim_port_raw(s, IPK_LINK_ETH, 1500, rx_count, &got);
	l = sim_link_create(s, a, b, &lc);
	for (i = 0; i < 10000; i++)
		sim_port_inject(a, f, sizeof(f));
	sim_run(s, SIM_SEC(1), NULL, NULL);
	CHECK(l->st[0].drop[SIM_LDROP_LOSS] > 900 && l->st[0].drop[SIM_LDROP_LOSS] < 1100);
	CHECK_EQ(got + l->st[0].drop[SIM_LDROP_LOSS], 10000);
	sim_destroy(s);
}

/* Returns how many runs of consecutive losses there were among 20000 frames. */
static uint32_t loss_runs(double p_gb, double p_bg, double loss, uint64_t *lost)
{
	struct sim *s = sim_create(5);
	struct rxlog rb;
	struct sim_port *a, *b;
	struct sim_link_cfg lc;
	struct sim_link *l;
	uint8_t f[20];
	uint32_t i, runs = 0, prev_lost = 0;

	memset(&rb, 0, sizeof(rb));
	sim_link_cfg_default(&lc);
	lc.rate_bps = 0;
	lc.queue_bytes = 0;
	lc.loss = loss;
	lc.ge_p_gb = p_gb;
	lc.ge_p_bg = p_bg;
	a = sim_port_raw(s, IPK_LINK_ETH, 1500, NULL, NULL);
	b = sim_port_raw(s, IPK_LINK_ETH, 1500, NULL, NULL);
	l = sim_link_create(s, a, b, &lc);
	memset(f, 0, sizeof(f));
	for (i = 0; i < 20000; i++) {
		uint64_t before = l->st[0].drop[SIM_LDROP_LOSS] + l->st[0].drop[SIM_LDROP_BURST];
		uint32_t now_lost;
		sim_port_inject(a, f, sizeof(f));
		now_lost = l->st[0].drop[SIM_LDROP_LOSS] + l->st[0].drop[SIM_LDROP_BURST] != before;
		runs += now_lost && !prev_lost;
		prev_lost = now_lost;
	}
	*lost = l->st[0].drop[SIM_LDROP_LOSS] + l->st[0].drop[SIM_LDROP_BURST];
	sim_destroy(s);
	return runs;
}

static void test_link_gilbert_elliott_losses_come_in_bursts(void)
{
	uint64_t lost_ge, lost_ind;
	uint32_t runs_ge = loss_runs(0.01, 0.2, 0.0, &lost_ge);
	uint32_t runs_ind = loss_runs(0.0, 0.0, 0.047, &lost_ind);

	/* same average loss (~4.8%), but GE losses cluster: mean burst ~5 frames */
	CHECK(lost_ge > 500 && lost_ind > 500);
	CHECK(lost_ge / runs_ge >= 3);
	CHECK(lost_ind / runs_ind < 2);
}

static void test_link_dup_reorder_corrupt(void)
{
	struct sim *s = sim_create(3);
	struct rxlog rb;
	struct sim_port *a, *b;
	struct sim_link_cfg lc;
	struct sim_link *l;
	uint8_t f[60];
	uint32_t i, nbitdiff = 0, order_broken = 0;

	memset(&rb, 0, sizeof(rb));
	sim_link_cfg_default(&lc);
	lc.rate_bps = 0;
	lc.dup = 0.2;
	lc.reorder = 0.2;
	lc.reorder_delay_ns = 500;
	lc.corrupt = 0.2;
	a = sim_port_raw(s, IPK_LINK_ETH, 1500, NULL, NULL);
	b = sim_port_raw(s, IPK_LINK_ETH, 1500, rx_record, &rb);
	l = sim_link_create(s, a, b, &lc);
	for (i = 0; i < 40; i++) {
		memset(f, 0, sizeof(f));
		f[14] = (uint8_t)i;
		sim_port_inject(a, f, sizeof(f));
		sim_run(s, s->now + 100, NULL, NULL);
	}
	sim_run(s, SIM_SEC(1), NULL, NULL);
	CHECK_EQ(rb.n, 40 + l->st[0].duplicated);
	CHECK(l->st[0].duplicated > 0 && l->st[0].reordered > 0 && l->st[0].corrupted > 0);
	for (i = 0; i < rb.n && i < 64; i++) {
		uint32_t j, bits = 0;
		/* compare against the clean frame with this frame's tag */
		uint8_t clean[60];
		memset(clean, 0, sizeof(clean));
		clean[14] = rb.data[i][14];
		for (j = 0; j < 60; j++) {
			uint8_t x = (uint8_t)(clean[j] ^ rb.data[i][j]);
			for (; x; x &= (uint8_t)(x - 1))
				bits++;
			if (x == 0 && j < 14 && clean[j] != rb.data[i][j])
				bits += 100; /* link header damaged: not allowed */
		}
		nbitdiff += bits != 0;
		CHECK(bits <= 1 || rb.data[i][14] != clean[14]);
		if (i > 0 && rb.first[i] < rb.first[i - 1])
			order_broken++;
	}
	CHECK(nbitdiff > 0);
	CHECK(order_broken > 0);
	sim_destroy(s);
}

/* ------------------------------------------------------------ NIC */

/* Ethernet + IPv4 + TCP (20-byte header) + payload, TCP checksum field holding the
 * pseudo-header sum, IP checksum zero: what an engine hands a NIC with offloads. */
static uint32_t offload_frame(uint8_t *f, uint32_t plen, uint8_t flags, uint32_t seq)
{
	uint8_t *ip = f + 14, *tcp = ip + 20;
	uint32_t i;

	tf_eth(f, MAC_B, MAC_A, 0x0800);
	tf_ip4(ip, 0x0a000001, 0x0a000002, 6, (uint16_t)(40 + plen), 1000, 0x4000);
	tf_wr16(ip + 10, 0);
	memset(tcp, 0, 20);
	tf_wr16(tcp, 1234);
	tf_wr16(tcp + 2, 80);
	tf_wr32(tcp + 4, seq);
	tf_wr32(tcp + 8, 77);
	tcp[12] = 5 << 4;
	tcp[13] = flags;
	tf_wr16(tcp + 14, 65535);
	for (i = 0; i < plen; i++)
		tcp[20 + i] = (uint8_t)(i * 13 + 1);
	tf_wr16(tcp + 16, tf_pseudo_fold(ip, 20 + plen));
	return 54 + plen;
}

struct segs {
	uint32_t n;
	uint8_t buf[8][1600];
	uint32_t len[8];
};

static void seg_emit(const uint8_t *f, uint32_t len, void *arg)
{
	struct segs *s = (struct segs *)arg;

	if (s->n < 8 && len <= 1600) {
		memcpy(s->buf[s->n], f, len);
		s->len[s->n] = len;
	}
	s->n++;
}

static void test_nic_fills_ip_and_tcp_checksums(void)
{
	static uint8_t f[2000], scratch[70000];
	struct ipk_tx_meta m;
	struct sim_port_stats st;
	struct segs out;
	uint32_t len = offload_frame(f, 100, 0x18, 5);

	memset(&m, 0, sizeof(m));
	memset(&st, 0, sizeof(st));
	memset(&out, 0, sizeof(out));
	m.flags = IPK_TXOFF_IP4_CSUM | IPK_TXOFF_TCP_CSUM;
	m.l2_len = 14;
	m.l3_len = 20;
	m.l4_len = 20;
	CHECK_EQ(sim_nic_rx_csum(f, len, 14, IPK_CAP_RX_CSUM_IP4 | IPK_CAP_RX_CSUM_L4),
	         IPK_RXCSUM_IP4_BAD | IPK_RXCSUM_L4_BAD);
	CHECK_EQ(sim_nic_tx(f, len, &m, scratch, sizeof(scratch), seg_emit, &out, &st), 1);
	CHECK_EQ(out.n, 1);
	CHECK_EQ(st.tx_csum_filled, 2);
	CHECK_EQ(sim_nic_rx_csum(out.buf[0], out.len[0], 14,
	                         IPK_CAP_RX_CSUM_IP4 | IPK_CAP_RX_CSUM_L4),
	         IPK_RXCSUM_IP4_GOOD | IPK_RXCSUM_L4_GOOD);
	CHECK_EQ(tf_l4_csum(out.buf[0] + 14, 120), 0);
	/* one flipped payload bit is caught */
	out.buf[0][100] ^= 4;
	CHECK_EQ(sim_nic_rx_csum(out.buf[0], out.len[0], 14, IPK_CAP_RX_CSUM_L4),
	         IPK_RXCSUM_L4_BAD);
}

static void test_nic_tso_splits_into_mss_segments(void)
{
	static uint8_t f[8000], scratch[70000];
	struct ipk_tx_meta m;
	struct sim_port_stats st;
	static struct segs out;
	uint32_t len = offload_frame(f, 4000, 0x18 | 0x01 | 0x80, 1000000), i, got = 0;
	uint8_t orig[4000];

	memcpy(orig, f + 54, 4000);
	memset(&m, 0, sizeof(m));
	memset(&st, 0, sizeof(st));
	memset(&out, 0, sizeof(out));
	m.flags = IPK_TXOFF_TSO | IPK_TXOFF_IP4_CSUM | IPK_TXOFF_TCP_CSUM;
	m.l2_len = 14;
	m.l3_len = 20;
	m.l4_len = 20;
	m.mss = 1460;
	CHECK_EQ(sim_nic_tx(f, len, &m, scratch, sizeof(scratch), seg_emit, &out, &st), 3);
	CHECK_EQ(st.tx_tso_frames, 1);
	CHECK_EQ(st.tx_tso_segs, 3);
	for (i = 0; i < out.n && i < 3; i++) {
		const uint8_t *ip = out.buf[i] + 14, *tcp = ip + 20;
		uint32_t plen = i < 2 ? 1460 : 4000 - 2 * 1460;
		CHECK_EQ(out.len[i], 54 + plen);
		CHECK_EQ(tf_rd16(ip + 2), 40 + plen);
		CHECK_EQ(tf_rd16(ip + 4), 1000 + i);
		CHECK_EQ(tf_rd32(tcp + 4), 1000000 + i * 1460);
		CHECK_EQ(tcp[13] & 0x01, i == 2 ? 0x01 : 0);
		CHECK_EQ(tcp[13] & 0x08, i == 2 ? 0x08 : 0);
		CHECK_EQ(tcp[13] & 0x80, i == 0 ? 0x80 : 0);
		CHECK_EQ(sim_nic_rx_csum(out.buf[i], out.len[i], 14,
		                         IPK_CAP_RX_CSUM_IP4 | IPK_CAP_RX_CSUM_L4),
		         IPK_RXCSUM_IP4_GOOD | IPK_RXCSUM_L4_GOOD);
		CHECK(memcmp(tcp + 20, orig + got, plen) == 0);
		got += plen;
	}
}

static void test_nic_rejects_marks_that_do_not_fit(void)
{
	static uint8_t f[2000], scratch[70000];
	struct ipk_tx_meta m;
	struct sim_port_stats st;
	struct segs out;
	uint32_t len = offload_frame(f, 10, 0x10, 1);

	memset(&m, 0, sizeof(m));
	memset(&st, 0, sizeof(st));
	memset(&out, 0, sizeof(out));
	m.flags = IPK_TXOFF_UDP_CSUM; /* a TCP frame marked for UDP */
	m.l2_len = 14;
	m.l3_len = 20;
	CHECK_EQ(sim_nic_tx(f, len, &m, scratch, sizeof(scratch), seg_emit, &out, &st), -1);
	m.flags = IPK_TXOFF_TCP_CSUM;
	m.l3_len = 24; /* IHL says 20 */
	CHECK_EQ(sim_nic_tx(f, len, &m, scratch, sizeof(scratch), seg_emit, &out, &st), -1);
	m.l3_len = 20;
	m.l2_len = 1500; /* past the end */
	CHECK_EQ(sim_nic_tx(f, len, &m, scratch, sizeof(scratch), seg_emit, &out, &st), -1);
	CHECK_EQ(out.n, 0);
}

/* ------------------------------------------------------------ pcap */

static void test_pcap_header_is_classic_nanosecond_format(void)
{
	uint8_t h[24], r[16];

	CHECK_EQ(sim_pcap_file_header(h, SIM_LINKTYPE_ETHERNET, 65535), 24);
	CHECK(h[0] == 0x4d && h[1] == 0x3c && h[2] == 0xb2 && h[3] == 0xa1);
	CHECK(h[4] == 2 && h[6] == 4 && h[20] == 1);
	CHECK_EQ(sim_pcap_record_header(r, SIM_SEC(3) + 7, 60, 60), 16);
	CHECK(r[0] == 3 && r[4] == 7 && r[8] == 60 && r[12] == 60);
}

/* A UDP datagram in an Ethernet frame with correct checksums. */
static uint32_t udp_frame(uint8_t *f, uint16_t id)
{
	uint8_t *ip = f + 14, *udp = ip + 20;

	tf_eth(f, MAC_B, MAC_A, 0x0800);
	tf_ip4(ip, 0x0a000001, 0x0a000002, 17, 20 + 8 + 12, id, 0);
	tf_wr16(udp, 5000);
	tf_wr16(udp + 2, 40000);
	tf_wr16(udp + 4, 20);
	tf_wr16(udp + 6, 0);
	memcpy(udp + 8, "hello, pcap!", 12);
	tf_wr16(udp + 6, tf_l4_csum(ip, 20));
	return 14 + 40;
}

static void test_pcap_file_reads_back_in_tshark(void)
{
	const char *path = "sim_unit_test.pcap";
	struct sim *s = sim_create(2);
	struct sim_port *a = sim_port_raw(s, IPK_LINK_ETH, 1500, NULL, NULL);
	struct sim_port *b = sim_port_raw(s, IPK_LINK_ETH, 1500, NULL, NULL);
	struct sim_link_cfg lc;
	struct sim_link *l;
	uint8_t f[100];
	char cmd[256], line[512];
	FILE *p;
	int i, lines = 0, bad = 0;

	sim_link_cfg_default(&lc);
	l = sim_link_create(s, a, b, &lc);
	CHECK_EQ(sim_link_pcap(l, path), 0);
	for (i = 0; i < 5; i++) {
		uint32_t n = udp_frame(f, (uint16_t)i);
		sim_port_inject(i & 1 ? b : a, f, n);
		sim_run(s, s->now + SIM_MS(1), NULL, NULL);
	}
	CHECK_EQ(l->pcap_bytes, 24 + 5 * (16 + 54));
	sim_destroy(s); /* closes the file */
	if (system("command -v tshark >/dev/null 2>&1") != 0) {
		printf("note: tshark not installed; pcap read-back check skipped\n");
		remove(path);
		return;
	}
	snprintf(cmd, sizeof(cmd), "tshark -n -r %s 2>&1; echo rc=$?", path);
	p = popen(cmd, "r");
	CHECK(p != NULL);
	while (p && fgets(line, sizeof(line), p)) {
		if (strncmp(line, "rc=", 3) == 0) {
			CHECK_EQ(atoi(line + 3), 0);
			continue;
		}
		if (strncmp(line, "Running as user", 15) == 0)
			continue; /* tshark's note when run as root */
		lines++;
		if (strstr(line, "alformed") || strstr(line, "rror") || !strstr(line, "UDP"))
			bad++;
	}
	if (p)
		pclose(p);
	if (bad)
		system(cmd);
	CHECK_EQ(lines, 5);
	CHECK_EQ(bad, 0);
	remove(path);
}

int main(void)
{
	RUN(test_sha256_fips_180_4_vectors);
	RUN(test_rng_same_seed_same_stream);
	RUN(test_rng_below_and_chance_bounds);
	RUN(test_events_run_by_time_then_insertion);
	RUN(test_run_stops_at_predicate_time_and_limit);
	RUN(test_link_serialization_and_delay);
	RUN(test_link_drop_tail_queue_limit);
	RUN(test_link_loss_rate_near_probability);
	RUN(test_link_gilbert_elliott_losses_come_in_bursts);
	RUN(test_link_dup_reorder_corrupt);
	RUN(test_nic_fills_ip_and_tcp_checksums);
	RUN(test_nic_tso_splits_into_mss_segments);
	RUN(test_nic_rejects_marks_that_do_not_fit);
	RUN(test_pcap_header_is_classic_nanosecond_format);
	RUN(test_pcap_file_reads_back_in_tshark);
	return check_summary();
}
