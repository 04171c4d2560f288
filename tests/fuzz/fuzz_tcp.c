/*
 * libFuzzer target: stateful TCP. One connection, opened once per process (our
 * active open to 10.0.0.2:80, SYN-ACK with MSS, window scale, SACK-permitted and
 * timestamps), snapshotted; every input starts from that snapshot (fz_host.h: a
 * memory copy, no set-up) and is a sequence of operations on the connection:
 *
 *   op byte % 9:
 *   0, 1  a segment from the peer: flags, seq and ack as signed 16-bit deltas from
 *         the connection's own rcv_nxt and snd_una (so in-window and just-outside
 *         values are easy to reach), window, option selector (TS with TSecr echoing
 *         our last TSval, SACK blocks relative to snd_una, or raw option bytes),
 *         payload length; checksums right (op 1: the IPv4 and TCP checksums left
 *         as the fuzzer wrote them is not useful, so op 1 instead sends the segment
 *         as two IPv4 fragments)
 *   2     the application writes n * 97 bytes
 *   3     the application consumes everything delivered so far (ipk_tcp_recved)
 *   4     time passes: b ms, or with b's top bit (b & 127) * 500 ms
 *   5     the application closes (FIN)
 *   6     the application aborts (RST), or toggles CUBIC / keep-alive
 *   7     a raw TCP segment (header, options and payload from the input) aimed at
 *         the connection's ports, or at a listener on port 8080 (SYN-RECEIVED,
 *         SYN cookies, passive opens; see op_raw), checksums fixed
 *   8     an ICMP error quoting the connection (fragmentation needed with a fuzzed
 *         MTU, other unreachables, time exceeded, ...), sequence relative to snd_una
 *
 * Invariants after every operation while the connection lives: its magic is
 * intact, snd_una <= snd_nxt <= snd_max (sequence space), snd_max - snd_una within
 * the send buffer (+ SYN and FIN), the queued bytes within the send buffer, the
 * advertised right edge rcv_adv at or past rcv_nxt and at most the receive buffer
 * (scaled, + one window unit) ahead, undelivered bytes within the receive buffer,
 * the MSS between the PMTU floor and what was negotiated;
 * every frame we send parses, has right checksums and (the connection's) a sequence
 * number within snd_una..snd_max (+ the FIN). At the end the connection and every
 * passive open are aborted if they still live, time runs on past every timer
 * (TIME_WAIT, RTO, SYN-RECEIVED), and every pool (packets, pbs, connections) must
 * be back at its start.
 */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz_host.h"
#include "tcp.h"
#include "wire/wire.h"

#define WHO "fuzz_tcp"
#define PEER_ISS 1000000u
#define MAX_OPS 48
#define LISTEN_PORT 8080

struct tcp_fz {
	struct fz_host h;
	struct ipk_conn *c;
	int ok;                  /* set-up done */
	uint32_t iss;            /* ours, from the SYN */
	uint32_t our_tsval;      /* last TSval we sent */
	uint32_t snap_tsval;     /* ... at the snapshot */
	uint32_t peer_ts;        /* the peer's TS clock */
	uint32_t recved;         /* bytes the application gave back */
	uint32_t tx_max_end;     /* highest sequence end (FIN counted) we sent */
	int tx_seen;
	uint16_t sport, dport;   /* our port, the peer's (host order) */
	uint16_t ip_id;
	/* our last SYN-ACK from the listener: its seq, ack and the peer's port */
	uint32_t synack_seq, synack_ack;
	uint16_t synack_port;
};

static struct tcp_fz T;

static void need(int ok, const char *what)
{
	if (!ok)
		fz_fail(WHO, what);
}

static int alive(void) { return !T.h.watch_closed; }

/* Every frame we send: well formed, right checksums, sequence within what the
 * connection has sent; remember our TSval. */
static void on_tx(struct fz_host *h, const uint8_t *f, uint32_t len)
{
	struct ipk_ip4_hdr ip;
	struct ipk_tcp_hdr th;
	struct ipk_tcp_opts o;
	const uint8_t *l4;
	uint32_t l4len;

	(void)h;
	if (len < 14 || ipk_rd16(f + 12) != IPK_ETHERTYPE_IP4)
		return; /* ARP: the peer is a static entry, none expected, not checked */
	need(ipk_ip4_parse(f + 14, len - 14, &ip) > 0, "sent an IPv4 header that does not parse");
	need(ipk_ip4_csum_ok(f + 14, ip.ihl), "sent a bad IPv4 checksum");
	if (ip.proto != IPK_IPPROTO_TCP)
		return;
	l4 = f + 14 + ip.ihl;
	l4len = ip.tot_len - ip.ihl;
	need(ipk_tcp_parse(l4, l4len, &th) > 0, "sent a TCP header that does not parse");
	need(ipk_csum_l4(ip.src_be, ip.dst_be, IPK_IPPROTO_TCP, l4, l4len) == 0,
	     "sent a bad TCP checksum");
	need(ipk_tcp_opts_parse(l4 + 20, th.doff - 20u, &o) == 0, "sent options that do not parse");
	if (o.has_ts)
		T.our_tsval = o.tsval;
	if ((th.flags & (IPK_TCP_SYN | IPK_TCP_ACK)) == (IPK_TCP_SYN | IPK_TCP_ACK) &&
	    ipk_ntohs(th.sport_be) == LISTEN_PORT) {
		T.synack_seq = th.seq;
		T.synack_ack = th.ack;
		T.synack_port = ipk_ntohs(th.dport_be);
	}
	if (ipk_ntohs(th.sport_be) != T.sport || ipk_ntohs(th.dport_be) != T.dport)
		return; /* a passive open's segment */
	if (T.ok && alive() && !(th.flags & (IPK_TCP_SYN | IPK_TCP_RST)) && T.c->state != IPK_TCP_TIME_WAIT) {
		uint32_t end = th.seq + (l4len - th.doff) + (th.flags & IPK_TCP_FIN ? 1u : 0u);
		/* a keep-alive or window probe may sit at snd_una - 1 (RFC 1122 §4.2.3.6) */
		need(ipk_seq_le(T.c->snd_una - 1, th.seq), "sent a sequence below snd_una - 1");
		/* snd_max moves after the frame is handed over: checked after the operation */
		if (!T.tx_seen || ipk_seq_lt(T.tx_max_end, end))
			T.tx_max_end = end;
		T.tx_seen = 1;
	}
}

/* ------------------------------------------------------------ segments */

struct seg {
	uint8_t flags;
	uint32_t seq, ack;
	uint16_t wnd;
	uint8_t opt[40];
	uint32_t optlen;
	uint32_t paylen;
	int frag;               /* send as two IPv4 fragments */
};

static uint32_t build(uint8_t *f, const struct seg *s)
{
	uint32_t doff = 20 + ((s->optlen + 3) & ~3u), l4len = doff + s->paylen, h;
	uint8_t *t;

	memset(f, 0, 34 + doff);
	h = fz_eth_ip(f, IPK_IPPROTO_TCP, l4len, 0, ++T.ip_id);
	t = f + h;
	ipk_wr16(t, T.dport);
	ipk_wr16(t + 2, T.sport);
	ipk_wr32(t + 4, s->seq);
	ipk_wr32(t + 8, s->ack);
	t[12] = (uint8_t)((doff / 4) << 4);
	t[13] = s->flags;
	ipk_wr16(t + 14, s->wnd);
	memcpy(t + 20, s->opt, s->optlen);
	memset(t + doff, 0x61, s->paylen);
	fz_fix_csums(f, h + l4len);
	return h + l4len;
}

static void send_seg(const struct seg *s)
{
	uint8_t f[1600], g[1600];
	uint32_t len = build(f, s), half, ihl = 20;

	if (!s->frag || len - 34 < 16) {
		fz_host_rx(&T.h, f, len);
		return;
	}
	/* two fragments of the datagram (RFC 791 §3.2), the first a multiple of 8 */
	half = ((len - 34) / 2) & ~7u;
	memcpy(g, f, 34);
	memcpy(g + 34, f + 34 + half, len - 34 - half);
	ipk_wr16(f + 16, (uint16_t)(ihl + half));
	ipk_wr16(f + 20, IPK_IP4_MF);
	ipk_wr16(g + 16, (uint16_t)(ihl + len - 34 - half));
	ipk_wr16(g + 20, (uint16_t)(half / 8));
	fz_fix_csums(f, 34 + half);
	fz_fix_csums(g, len - half);
	fz_host_rx(&T.h, g, len - half); /* the tail first */
	fz_host_rx(&T.h, f, 34 + half);
}

/* Input reader: bytes past the end read as 0. */
struct rd {
	const uint8_t *p;
	size_t n, at;
};
static uint8_t rd8(struct rd *r) { return r->at < r->n ? r->p[r->at++] : 0; }
static uint16_t rd16i(struct rd *r)
{
	uint16_t v = (uint16_t)(rd8(r) << 8);
	return (uint16_t)(v | rd8(r));
}

static void opt_ts(struct seg *s, uint8_t step)
{
	T.peer_ts += step;
	ipk_tcp_ts_put(s->opt + s->optlen, T.peer_ts, T.our_tsval);
	s->optlen += 12;
}

static void opt_sack(struct seg *s, struct rd *r, uint32_t nblocks)
{
	uint8_t *q = s->opt + s->optlen;
	uint32_t i;

	q[0] = q[1] = IPK_TCPOPT_NOP;
	q[2] = IPK_TCPOPT_SACK;
	q[3] = (uint8_t)(2 + 8 * nblocks);
	for (i = 0; i < nblocks; i++) {
		/* edges as multiples of 100 bytes from snd_una, signed, so holes line up
		 * with segments often enough */
		uint32_t l = T.c->snd_una + (uint32_t)((int8_t)rd8(r) * 100);
		uint32_t w = (uint32_t)rd8(r) * 100;
		ipk_wr32(q + 4 + 8 * i, l);
		ipk_wr32(q + 8 + 8 * i, l + w);
	}
	s->optlen += 4 + 8 * nblocks;
}

static void op_segment(struct rd *r, int frag)
{
	struct seg s;
	uint8_t sel;

	memset(&s, 0, sizeof(s));
	s.flags = rd8(r);
	s.seq = T.c->rcv_nxt + (uint32_t)(int16_t)rd16i(r);
	s.ack = T.c->snd_una + (uint32_t)(int16_t)rd16i(r);
	s.wnd = rd16i(r);
	sel = rd8(r);
	s.paylen = (uint32_t)rd8(r) * 6; /* up to 1530: past the MSS of 1460 */
	if (s.paylen > 1460)
		s.paylen = 1460;
	s.frag = frag;
	if (sel & 3) /* TS in 3 of 4: the connection negotiated it */
		opt_ts(&s, (uint8_t)(sel >> 5));
	if (sel & 4)
		opt_sack(&s, r, 1u + ((sel >> 3) & 1) + (s.optlen ? 0 : ((sel >> 4) & 1)));
	if ((sel & 3) == 0 && (sel & 0x80)) { /* raw option bytes instead */
		uint32_t n = rd8(r) % 41, i;
		for (i = 0; i < n && s.optlen < 40; i++)
			s.opt[s.optlen++] = rd8(r);
	}
	send_seg(&s);
}

/* A raw segment: the fuzzer's header (flags, offsets, options) and payload on our
 * connection's ports, or (bit 7 of the length byte) to the listener on 8080 from
 * peer port 50000 + the sport byte's low 2 bits; with bit 6 it goes to the port
 * our last SYN-ACK went to, and sequence and acknowledgment numbers are made
 * relative to that SYN-ACK (seq = its ack + d, ack = its seq + 1 + d), so
 * handshakes, SYN-cookie checks and passive opens are easy to complete. */
static void op_raw(struct rd *r)
{
	uint8_t f[1600], n8 = rd8(r);
	uint32_t n = n8 & 0x3fu, i, h;
	uint8_t *t;

	n = n < 20 ? 20 : n + 20;
	memset(f, 0, sizeof(f));
	h = fz_eth_ip(f, IPK_IPPROTO_TCP, n, 0, ++T.ip_id);
	t = f + h;
	for (i = 0; i < n; i++)
		t[i] = rd8(r);
	if (!(n8 & 0x80)) {
		ipk_wr16(t, T.dport);
		ipk_wr16(t + 2, T.sport);
	} else if (!(n8 & 0x40)) {
		ipk_wr16(t, (uint16_t)(50000u + (t[1] & 3u)));
		ipk_wr16(t + 2, LISTEN_PORT);
	} else {
		int8_t d = (int8_t)t[4];
		ipk_wr16(t, T.synack_port);
		ipk_wr16(t + 2, LISTEN_PORT);
		ipk_wr32(t + 4, T.synack_ack + (uint32_t)(int32_t)d);
		ipk_wr32(t + 8, T.synack_seq + 1u + (uint32_t)(int32_t)(int8_t)t[8]);
	}
	fz_fix_csums(f, h + n);
	fz_host_rx(&T.h, f, h + n);
}

/* An ICMP error quoting the connection's own datagram (RFC 792, RFC 5927): from the
 * peer or a router, type and code from sel (fragmentation needed with the MTU
 * given, another unreachable, time exceeded, parameter problem, source quench), the
 * quoted TCP sequence number relative to snd_una. */
static void op_icmp(struct rd *r)
{
	static const uint8_t types[4] = {IPK_ICMP_UNREACH, IPK_ICMP_UNREACH, IPK_ICMP_TIME_EXCEEDED, 12};
	uint8_t f[128], sel = rd8(r), *ic, *q;
	uint16_t mtu = rd16i(r);
	uint32_t h = fz_eth_ip(f, IPK_IPPROTO_ICMP, 8 + 20 + 8, 0, ++T.ip_id);

	if (sel & 0x80)
		ipk_wrbe32(f + 26, IPK_IP4(10, 0, 0, 254)); /* a router on the path */
	ic = f + h;
	memset(ic, 0, 8 + 20 + 8);
	ic[0] = (sel & 0x40) ? 4 /* source quench */ : types[sel & 3];
	ic[1] = (sel & 3) == 0 ? IPK_ICMP_UNREACH_NEEDFRAG : (uint8_t)((sel >> 2) & 15);
	ipk_wr16(ic + 6, mtu);
	q = ic + 8; /* the datagram we sent: us -> peer, TCP */
	q[0] = 0x45;
	ipk_wr16(q + 2, 40);
	q[8] = 64;
	q[9] = IPK_IPPROTO_TCP;
	ipk_wrbe32(q + 12, FZ_IP_US);
	ipk_wrbe32(q + 16, FZ_IP_PEER);
	ipk_wr16(q + 20, T.sport);
	ipk_wr16(q + 22, T.dport);
	ipk_wr32(q + 24, T.c->snd_una + (uint32_t)(int16_t)rd16i(r));
	fz_fix_csums(f, h + 36);
	fz_host_rx(&T.h, f, h + 36);
}

static void op_write(uint32_t n)
{
	static uint8_t buf[64 * 1024];

	if (n > sizeof(buf))
		n = sizeof(buf);
	ipk_tcp_write(T.h.ctx, T.c, buf, n, T.h.now);
}

/* ------------------------------------------------------------ invariants */

static void check_conn(void)
{
	const struct ipk_conn *c = T.c;
	uint32_t rcvbuf = T.h.cfg.tcp_rcvbuf, sndbuf = T.h.cfg.tcp_sndbuf;

	fz_host_check(&T.h, WHO);
	if (!alive())
		return;
	need(c->magic == IPK_TCP_MAGIC, "live connection lost its magic");
	need(c->state >= IPK_TCP_ESTABLISHED && c->state <= IPK_TCP_TIME_WAIT,
	     "connection left the synchronised states");
	need(ipk_seq_le(c->snd_una, c->snd_nxt), "snd_una > snd_nxt");
	need(ipk_seq_le(c->snd_nxt, c->snd_max), "snd_nxt > snd_max");
	need(c->snd_max - c->snd_una <= sndbuf + 2, "more in flight than the send buffer");
	need(!T.tx_seen || ipk_seq_le(T.tx_max_end, c->snd_max), "sent a sequence past snd_max");
	need(c->sq_bytes <= sndbuf, "send queue above the send buffer");
	need(c->rcv_unread <= rcvbuf, "undelivered bytes above the receive buffer");
	need(ipk_seq_le(c->rcv_nxt, c->rcv_adv) || c->rcv_adv == 0,
	     "rcv_nxt passed the advertised window's right edge");
	need(c->rcv_adv - c->rcv_nxt <= rcvbuf + (1u << c->rcv_wscale),
	     "advertised window above the receive buffer");
	/* RFC 1191 §5 / RFC 5927: an ICMP error can lower the MSS, to a floor, never raise it */
	need(c->mss >= IPK_TCP_PMTU_MIN_MSS - IPK_TCP_TS_LEN && c->mss <= 1460, "MSS out of range");
}

/* ------------------------------------------------------------ set-up */

static int handshake(void)
{
	struct seg s;
	struct ipk_tcp_hdr th;

	if (ipk_tcp_connect(T.h.ctx, FZ_IP_PEER, ipk_htons(80), ipk_htons(40000), NULL, &T.c, 0) < 0 ||
	    T.h.tx_len < 54 || ipk_tcp_parse(T.h.tx + 34, T.h.tx_len - 34, &th) < 0)
		return -1;
	T.iss = th.seq;
	T.sport = 40000;
	T.dport = 80;
	T.h.now = 1000000; /* 1 ms */
	memset(&s, 0, sizeof(s));
	s.flags = IPK_TCP_SYN | IPK_TCP_ACK;
	s.seq = PEER_ISS;
	s.ack = T.iss + 1;
	s.wnd = 65535;
	{
		static const uint8_t o[8] = {2, 4, 5, 0xb4, 1, 3, 3, 7}; /* MSS 1460, WS 7 */
		memcpy(s.opt, o, 8);
		s.optlen = 8;
	}
	s.opt[s.optlen++] = IPK_TCPOPT_SACK_PERM;
	s.opt[s.optlen++] = 2;
	T.peer_ts = 5000;
	opt_ts(&s, 0);
	send_seg(&s);
	return ipk_tcp_state(T.c) == IPK_TCP_ESTABLISHED ? 0 : -1;
}

static int setup(void)
{
	struct ipk_config cfg;

	fz_host_config(&cfg);
	cfg.tcp_time_wait_ns = 1000000000ull;
	cfg.tcp_max_retries = 3;
	cfg.tcp_syn_retries = 2;
	cfg.tcp_challenge_ack_limit = 100;
	cfg.tcp_ooo_max = 16;
	cfg.tcp_synrecv_max = 4;
	if (fz_host_init(&T.h, &cfg, 8, 128, 160) ||
	    ipk_arp_add_static(T.h.ctx, FZ_IP_PEER, fz_mac_peer) ||
	    ipk_tcp_listen(T.h.ctx, ipk_htons(LISTEN_PORT), 2) < 0)
		return -1;
	T.h.on_tx = on_tx;
	if (handshake())
		return -1;
	T.h.watch = T.c;
	fz_host_snapshot(&T.h);
	T.snap_tsval = T.our_tsval;
	T.ok = 1;
	return 0;
}

static void run_op(struct rd *r)
{
	uint8_t op = rd8(r), b;

	switch (op % 9) {
	case 0: op_segment(r, 0); break;
	case 1: op_segment(r, 1); break;
	case 2: op_write((uint32_t)rd8(r) * 97u); break;
	case 3:
		if (T.h.ev.tcp_payload_bytes > T.recved) {
			ipk_tcp_recved(T.h.ctx, T.c, T.h.ev.tcp_payload_bytes - T.recved, T.h.now);
			T.recved = T.h.ev.tcp_payload_bytes;
		}
		break;
	case 4:
		b = rd8(r);
		fz_host_advance(&T.h, b & 0x80 ? (uint64_t)(b & 127) * 500000000ull
		                               : (uint64_t)b * 1000000ull);
		break;
	case 5: ipk_tcp_close(T.h.ctx, T.c, T.h.now); break;
	case 6:
		b = rd8(r);
		if (b < 32)
			ipk_tcp_abort(T.h.ctx, T.c, T.h.now);
		else if (b & 1)
			ipk_tcp_set_cc(T.c, (b >> 1) & 1 ? IPK_CC_CUBIC : IPK_CC_NEWRENO);
		else
			ipk_tcp_set_keepalive(T.h.ctx, T.c, (b >> 1) & 1, T.h.now);
		break;
	case 7: op_raw(r); break;
	default: op_icmp(r); break;
	}
}

/* FUZZ_TRACE=1 in the environment: one line per operation (for writing seeds). */
static void trace(int i)
{
	static int on = -1;

	if (on < 0)
		on = getenv("FUZZ_TRACE") != NULL;
	if (!on)
		return;
	if (!alive()) {
		printf("op %d: closed, reason %d\n", i, T.h.ev.last_close_reason);
		return;
	}
	printf("accepted %u open %u ", T.h.ev.tcp_accepted, T.h.naccepted);
	printf("op %d: state %u snd_una +%u snd_nxt +%u snd_max +%u rcv_nxt +%u delivered %u "
	       "fin %u tx %u mss %u rtx %u\n",
	       i, T.c->state, T.c->snd_una - T.iss, T.c->snd_nxt - T.iss, T.c->snd_max - T.iss,
	       T.c->rcv_nxt - PEER_ISS, T.h.ev.tcp_payload_bytes, T.h.ev.tcp_fin, T.h.ev.tx_frames,
	       T.c->mss, T.c->retransmits);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rd r;
	int i;

	if (!T.ok && setup())
		fz_fail(WHO, "set-up failed"); /* a world not built would fuzz nothing */
	fz_host_restore(&T.h);
	T.our_tsval = T.snap_tsval;
	T.recved = 0;
	T.tx_seen = 0;
	T.synack_seq = T.synack_ack = 0;
	T.synack_port = 50000;
	T.peer_ts = 5000;
	T.ip_id = 100;
	r.p = data;
	r.n = size;
	r.at = 0;
	for (i = 0; i < MAX_OPS && r.at < r.n && alive(); i++) {
		run_op(&r);
		check_conn();
		trace(i);
	}
	if (alive())
		ipk_tcp_abort(T.h.ctx, T.c, T.h.now);
	need(T.h.watch_closed, "ipk_tcp_abort did not call tcp_closed");
	fz_host_abort_accepted(&T.h);
	/* past every timer the connection or the context could hold */
	for (i = 0; i < 4; i++)
		fz_host_advance(&T.h, 60ull * 1000000000ull);
	fz_host_check_at_start(&T.h, WHO, 1);
	return 0;
}

/* ------------------------------------------------------------ seed corpus */

int fuzz_make_corpus(const char *dir)
{
	/* in-order data with TS (op 0: ACK|PSH, seq +0, ack +0, wnd 512, TS, 1200 bytes),
	 * consume, FIN from the peer, time passes */
	static const uint8_t data_fin[] = {0, 0x18, 0, 0, 0, 0, 2, 0, 1, 200, 3,
	                                   0, 0x11, 0, 0, 0, 0, 2, 0, 1, 0, 4, 0x85};
	/* we write 3 segments, the peer SACKs the second and third: recovery */
	static const uint8_t sack[] = {2, 50, 0, 0x10, 0, 0, 0, 0, 2, 0, 0x05, 0, 15, 30,
	                               0, 0x10, 0, 0, 0, 0, 2, 0, 0x05, 0, 15, 30,
	                               0, 0x10, 0, 0, 0, 0, 2, 0, 0x05, 0, 15, 30, 4, 250};
	/* out of order data then the hole filled */
	static const uint8_t ooo[] = {0, 0x18, 0x04, 0xb0, 0, 0, 2, 0, 1, 100,
	                              0, 0x18, 0, 0, 0, 0, 2, 0, 1, 200, 3};
	/* RST in window (challenge ACK), SYN in window, then an exact RST */
	static const uint8_t rst[] = {0, 0x04, 0, 10, 0, 0, 2, 0, 0, 0,
	                              0, 0x02, 0, 0, 0, 0, 2, 0, 0, 0,
	                              0, 0x04, 0, 0, 0, 0, 2, 0, 0, 0};
	/* our close, the peer's FIN+ACK: TIME_WAIT */
	static const uint8_t close_[] = {5, 0, 0x11, 0, 0, 0, 1, 2, 0, 1, 0, 4, 0x84};
	/* data, RTOs with no answer until the connection times out */
	static const uint8_t rto[] = {2, 200, 4, 0x84, 4, 0x88, 4, 0x90, 4, 0xa0, 4, 0xff};
	/* fragmented data segment, a zero window then a window update */
	static const uint8_t frag[] = {1, 0x18, 0, 0, 0, 0, 0, 0, 1, 200, 2, 100,
	                               0, 0x10, 0, 0, 0, 0, 0, 0, 1, 0, 4, 0x82,
	                               0, 0x10, 0, 0, 0, 0, 2, 0, 1, 0};
	/* raw segment with malformed options */
	static const uint8_t raw[] = {7, 28, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x70, 0x10, 2, 0,
	                              0, 0, 0, 0, 2, 0, 8, 1, 0, 0};
	/* a SYN to the listener (MSS, SACK-permitted, TS, WS), then the handshake's ACK
	 * relative to our SYN-ACK, then data on the passive open */
	static const uint8_t passive[] = {7, 0x80 | 20, 0xc3, 0x51, 0x1f, 0x90, 0, 0, 0, 7, 0, 0, 0, 0,
	                                  0xa0, 0x02, 0xff, 0xff, 0, 0, 0, 0,
	                                  2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
	                                  7, 0xc0 | 30, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 0x18,
	                                  0xff, 0xff, 0, 0, 0, 0, 'h', 'e', 'l', 'l', 'o', ' ', 'l', 'i',
	                                  's', 't', 'e', 'n', 'e', 'r', '.', '.', '.', '.', '.', '.', '.',
	                                  '.', '.', '.', '.', '.', '.', '.', '.', '.'};
	/* a SYN flood on the listener: backlog and SYN-RECEIVED limits, SYN cookies */
	static const uint8_t flood[] = {7, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
	                                7, 0x80, 0, 1, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
	                                7, 0x80, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
	                                7, 0x80, 0, 3, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
	                                7, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0};
	/* data in flight, then "fragmentation needed" at MTU 1000 quoting snd_una, and one
	 * with MTU 0 (old routers) quoting a sequence out of flight */
	static const uint8_t needfrag[] = {2, 30, 8, 0, 0x03, 0xe8, 0, 0, 8, 0x80, 0, 0, 0x7f, 0xff,
	                                   4, 10};
	int n = 0;

	n += fz_put_file(dir, "icmp-needfrag", needfrag, sizeof(needfrag));
	n += fz_put_file(dir, "passive-open", passive, sizeof(passive));
	n += fz_put_file(dir, "syn-flood-cookie", flood, sizeof(flood));
	n += fz_put_file(dir, "data-fin", data_fin, sizeof(data_fin));
	n += fz_put_file(dir, "sack-recovery", sack, sizeof(sack));
	n += fz_put_file(dir, "ooo-fill", ooo, sizeof(ooo));
	n += fz_put_file(dir, "rst-syn-challenge", rst, sizeof(rst));
	n += fz_put_file(dir, "close-time-wait", close_, sizeof(close_));
	n += fz_put_file(dir, "rto-timeout", rto, sizeof(rto));
	n += fz_put_file(dir, "frag-zero-window", frag, sizeof(frag));
	n += fz_put_file(dir, "raw-bad-options", raw, sizeof(raw));
	return n;
}
