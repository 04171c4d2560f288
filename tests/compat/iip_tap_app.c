/*
 * Issue 20, item 3(b): programs written against iip's documented API on a TAP device,
 * Linux as the peer (tests/compat/test_iip_tap.py). The backend is this file's own
 * (open the TAP, read frames into iip packets, push frames with write), as iip's
 * backends are; the NIC features it declares are implemented in software here (the
 * marks of iipt_mem.h: checksums filled, TSO cut at the mss, received checksums
 * verified and reported), so every feature set runs on a plain TAP.
 *
 *   iip_tap_app TAP IP FEATURES server
 *       TCP echo on port 7, HTTP on port 80 (GET /N -> N bytes of a pattern, then
 *       close), UDP echo on port 7; ARP and ICMP echo answered by the stack.
 *       Prints "ready" on stderr; runs until SIGTERM.
 *   iip_tap_app TAP IP FEATURES send PEER_IP PORT BYTES
 *       ARP for PEER_IP (iip_arp_request, the reply through iip_ops_arp_reply),
 *       connect, send BYTES of the pattern (TSO marks when declared), close; exit 0
 *       when the connection closed cleanly after every byte was acknowledged.
 * FEATURES: a number, the F_* bits of iipt_mem.h.
 * TAP "tun:NAME": a TUN device with its packet information (4 bytes: flags, then the
 * EtherType) as the L2, through iip's L2 callbacks (iipt_mem.h L2_TUN): a link that
 * is not Ethernet, with no addresses and no ARP (issue 20, iip_l2).
 */
#include "compat/iip/iip.c"
#include "iipt_mem.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t g_stop;
static void on_term(int sig) { (void)sig; g_stop = 1; }

static void tap_write(struct iipt_node *n, const uint8_t *f, uint32_t len)
{
	if (write(n->tap_fd, f, len) != (ssize_t)len)
		fprintf(stderr, "tap write: %s\n", strerror(errno));
}

static int tap_open(const char *name)
{
	struct ifreq ifr;
	int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK), tun = !strncmp(name, "tun:", 4);

	if (fd < 0)
		return -1;
	if (tun) {
		name += 4;
		l2_set(L2_TUN);
	}
	memset(&ifr, 0, sizeof(ifr));
	/* TUN keeps its packet information header: that is this link's L2 */
	ifr.ifr_flags = tun ? IFF_TUN : IFF_TAP | IFF_NO_PI;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static uint8_t pat(uint64_t i) { return (uint8_t)(i * 7u + i / 251u); }

/* ------------------------------------------------------------ server apps */
struct conn_app {
	int http;             /* port 80 */
	uint64_t to_send, sent_total;
	char req[512];
	uint32_t req_len;
	struct tpkt *pend_head, *pend_tail; /* echo data the send side refused, in order */
};
static struct conn_app g_conns[64];
static struct iipt_node g_node;

static uint8_t s_accept(struct iipt_node *n, void *pkt)
{
	const uint8_t *d = (const uint8_t *)iip_ops_pkt_get_data(pkt, n) + iip_ops_l2_hdr_len(pkt, n);
	uint32_t ihl = (d[0] & 15u) * 4u;
	uint16_t port = get16(d + ihl + 2);

	return port == 7 || port == 80;
}
static void *s_accepted(struct iipt_node *n, void *h, void *pkt)
{
	const uint8_t *d = pkt ? (const uint8_t *)iip_ops_pkt_get_data(pkt, n) + iip_ops_l2_hdr_len(pkt, n) : NULL;
	int i;

	(void)h;
	for (i = 0; i < 64; i++)
		if (!g_conns[i].http && !g_conns[i].to_send && !g_conns[i].req_len &&
		    !g_conns[i].sent_total) {
			memset(&g_conns[i], 0, sizeof(g_conns[i]));
			g_conns[i].http = d && get16(d + (d[0] & 15u) * 4u + 2) == 80;
			g_conns[i].sent_total = 1; /* in use */
			return &g_conns[i];
		}
	return NULL;
}
/* HTTP: write the body while the send side has room (tcp_acked calls again). */
static void http_fill(struct iipt_node *n, void *h, struct conn_app *c)
{
	while (c->to_send) {
		uint32_t chunk = c->to_send < 1400 ? (uint32_t)c->to_send : 1400u, i;
		struct tpkt *k = (struct tpkt *)iip_ops_pkt_alloc(n);

		if (!k)
			return;
		for (i = 0; i < chunk; i++)
			k->b->mem[i] = pat(c->sent_total - 1 + i);
		k->len = chunk;
		if (iip_tcp_send(n->ws, h, k, 0, n)) {
			iip_ops_pkt_free(k, n);
			return;
		}
		c->sent_total += chunk;
		c->to_send -= chunk;
		if (!c->to_send)
			iip_tcp_close(n->ws, h, n);
	}
}
static void s_payload(struct iipt_node *n, void *h, void *pkt, void *to, uint16_t ho,
                      uint16_t tl)
{
	struct conn_app *c = (struct conn_app *)to;
	uint32_t len = iip_ops_pkt_get_len(pkt, n) - ho - tl;
	const uint8_t *p = (const uint8_t *)iip_ops_pkt_get_data(pkt, n) + ho;

	if (c && c->http) {
		uint32_t take = len < sizeof(c->req) - 1 - c->req_len ? len
		                                                         : (uint32_t)sizeof(c->req) - 1 - c->req_len;
		memcpy(c->req + c->req_len, p, take);
		c->req_len += take;
		c->req[c->req_len] = 0;
		if (strstr(c->req, "\r\n\r\n") && !c->to_send && c->sent_total == 1) {
			unsigned long long nbytes = strtoull(c->req + 5, NULL, 10);
			char hdr[160];
			int hl = snprintf(hdr, sizeof(hdr), "HTTP/1.1 200 OK\r\nContent-Length: %llu\r\n"
			                  "Connection: close\r\n\r\n", nbytes);
			struct tpkt *k = (struct tpkt *)iip_ops_pkt_alloc(n);

			memcpy(k->b->mem, hdr, (size_t)hl);
			k->len = (uint32_t)hl;
			if (iip_tcp_send(n->ws, h, k, 0, n))
				iip_ops_pkt_free(k, n);
			c->to_send = nbytes;
			if (!nbytes)
				iip_tcp_close(n->ws, h, n);
			http_fill(n, h, c);
		}
	} else {
		/* Echo: a copy goes out, or waits (not consumed: the window stays closed
		 * for it) until tcp_acked says the send side has room again. */
		struct tpkt *k = (struct tpkt *)iip_ops_pkt_alloc(n);
		if (k) {
			memcpy(k->b->mem, p, len);
			k->len = len;
			if (c && (c->pend_head || iip_tcp_send(n->ws, h, k, 0, n))) {
				if (c->pend_tail)
					c->pend_tail->next = k;
				else
					c->pend_head = k;
				c->pend_tail = k;
				return;
			}
		}
	}
	iip_tcp_rxbuf_consumed(n->ws, h, 1, n);
}

static void echo_flush(struct iipt_node *n, void *h, struct conn_app *c)
{
	while (c->pend_head) {
		struct tpkt *k = c->pend_head, *nx = k->next;

		k->next = NULL;
		if (iip_tcp_send(n->ws, h, k, 0, n)) {
			k->next = nx;
			return;
		}
		c->pend_head = nx;
		if (!nx)
			c->pend_tail = NULL;
		iip_tcp_rxbuf_consumed(n->ws, h, 1, n);
	}
}
static void s_acked(struct iipt_node *n, void *h, void *pkt, void *to)
{
	(void)pkt;
	if (to && ((struct conn_app *)to)->http)
		http_fill(n, h, (struct conn_app *)to);
	else if (to)
		echo_flush(n, h, (struct conn_app *)to);
}
static void s_closed(struct iipt_node *n, void *h, uint32_t pi, uint16_t lp, uint16_t pp, void *to)
{
	(void)h; (void)pi; (void)lp; (void)pp;
	if (to) {
		struct conn_app *c = (struct conn_app *)to;
		while (c->pend_head) {
			struct tpkt *k = c->pend_head;
			c->pend_head = k->next;
			k->next = NULL;
			iip_ops_pkt_free(k, n);
		}
		memset(to, 0, sizeof(struct conn_app));
	}
}
static void s_udp(struct iipt_node *n, void *pkt)
{
	const uint8_t *ip = (const uint8_t *)iip_ops_pkt_get_data(pkt, n) + iip_ops_l2_hdr_len(pkt, n);
	const uint8_t *uh = ip + (ip[0] & 15u) * 4u;
	uint32_t plen = get16(uh + 4) - 8u, src;
	uint16_t sport, dport;
	uint8_t mac[6];
	struct tpkt *k = (struct tpkt *)iip_ops_pkt_alloc(n);

	if (!k)
		return;
	memcpy(&src, ip + 12, 4);
	memcpy(&sport, uh, 2);
	memcpy(&dport, uh + 2, 2);
	memset(mac, 0, sizeof(mac));
	if (iip_ops_l2_hdr_src_ptr(pkt, n))
		memcpy(mac, iip_ops_l2_hdr_src_ptr(pkt, n), 6);
	memcpy(k->b->mem, uh + 8, plen);
	k->len = plen;
	if (iip_udp_send(n->ws, n->mac, n->ip_be, dport, mac, src, sport, k, n))
		iip_ops_pkt_free(k, n);
}
static const struct iipt_app app_server = {s_accept, s_accepted, NULL, s_payload, s_acked,
                                           s_closed, s_udp, NULL, NULL};

/* ------------------------------------------------------------ sender app */
static struct {
	uint64_t total, sent, acked_pkts, sent_pkts;
	void *conn;
	int connected, closed, have_mac, close_sent;
	uint8_t peer_mac[6];
	uint32_t peer_ip;
} g_tx;

static void c_fill(struct iipt_node *n)
{
	while (g_tx.connected && g_tx.sent < g_tx.total) {
		uint32_t chunk = g_tx.total - g_tx.sent < 2000 ? (uint32_t)(g_tx.total - g_tx.sent) : 2000u, i;
		struct tpkt *k = (struct tpkt *)iip_ops_pkt_alloc(n);

		if (!k)
			return;
		for (i = 0; i < chunk; i++)
			k->b->mem[i] = pat(g_tx.sent + i);
		k->len = chunk;
		if (iip_tcp_send(n->ws, g_tx.conn, k, 0, n)) {
			iip_ops_pkt_free(k, n);
			return;
		}
		g_tx.sent += chunk;
		g_tx.sent_pkts++;
	}
	if (g_tx.connected && g_tx.sent == g_tx.total && !g_tx.close_sent) {
		g_tx.close_sent = 1;
		iip_tcp_close(n->ws, g_tx.conn, n);
	}
}
static void *c_connected(struct iipt_node *n, void *h, void *pkt)
{
	(void)pkt;
	g_tx.conn = h;
	g_tx.connected = 1;
	c_fill(n);
	return &g_tx;
}
static void c_payload(struct iipt_node *n, void *h, void *pkt, void *to, uint16_t ho, uint16_t tl)
{
	(void)pkt; (void)to; (void)ho; (void)tl;
	iip_tcp_rxbuf_consumed(n->ws, h, 1, n);
}
static void c_acked(struct iipt_node *n, void *h, void *pkt, void *to)
{
	(void)h; (void)pkt; (void)to;
	g_tx.acked_pkts++;
	c_fill(n);
}
static void c_closed(struct iipt_node *n, void *h, uint32_t pi, uint16_t lp, uint16_t pp, void *to)
{
	(void)n; (void)h; (void)pi; (void)lp; (void)pp; (void)to;
	g_tx.closed = 1;
}
static void c_arp(struct iipt_node *n, void *pkt)
{
	const uint8_t *d = (const uint8_t *)iip_ops_pkt_get_data(pkt, n) + iip_ops_l2_hdr_len(pkt, n);
	uint32_t spa;

	memcpy(&spa, d + 14, 4);
	if (spa == g_tx.peer_ip) {
		memcpy(g_tx.peer_mac, d + 8, 6);
		g_tx.have_mac = 1;
	}
}
static const struct iipt_app app_sender = {NULL, NULL, c_connected, c_payload, c_acked, c_closed,
                                           NULL, c_arp, NULL};

/* ------------------------------------------------------------ loop */
static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One pass: read what the TAP has (up to 64 frames), run the stack. */
static void pass(struct iipt_node *n, int wait_ms)
{
	struct pollfd pfd = {n->tap_fd, POLLIN, 0};
	void *batch[64];
	uint32_t cnt = 0, next_us;

	(void)poll(&pfd, 1, wait_ms);
	while (cnt < 64) {
		struct tpkt *k = (struct tpkt *)iip_ops_pkt_alloc(n);
		ssize_t r;

		if (!k)
			break;
		r = read(n->tap_fd, k->b->mem, IIPT_BUF);
		if (r <= 0) {
			iip_ops_pkt_free(k, n);
			break;
		}
		k->len = (uint32_t)r;
		rx_verdicts(k, k->b->mem, (uint32_t)r);
		batch[cnt++] = k;
	}
	g_clock_ns = mono_ns();
	iip_run(n->ws, n->mac, n->ip_be, batch, (uint16_t)cnt, &next_us, n);
}

int main(int argc, char **argv)
{
	struct iipt_node *n = &g_node;
	uint32_t features;
	uint64_t deadline;
	int fd;

	if (argc < 5)
		return 2;
	fd = tap_open(argv[1]);
	if (fd < 0) {
		fprintf(stderr, "tap %s: %s\n", argv[1], strerror(errno));
		return 3;
	}
	features = (uint32_t)strtoul(argv[3], NULL, 0);
	pool_init();
	g_clock_ns = mono_ns();
	node_init(n, 2, features, !strcmp(argv[4], "server") ? &app_server : &app_sender, 64, 4096);
	n->tap_fd = fd;
	inet_pton(AF_INET, argv[2], &n->ip_be);
	n->mac[0] = 0x02; n->mac[1] = 0x69; n->mac[2] = 0x69; n->mac[3] = 0x70;
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	if (!strcmp(argv[4], "server")) {
		pass(n, 0);
		fprintf(stderr, "ready\n");
		while (!g_stop)
			pass(n, 1);
		return 0;
	}
	if (argc < 8)
		return 2;
	inet_pton(AF_INET, argv[5], &g_tx.peer_ip);
	g_tx.total = strtoull(argv[7], NULL, 10);
	deadline = mono_ns() + 60ull * 1000000000ull;
	g_tx.have_mac = iip_ops_l2_addr_len(n) == 0; /* TUN: nothing to resolve */
	while (!g_tx.have_mac && mono_ns() < deadline) {
		iip_arp_request(n->ws, n->mac, n->ip_be, g_tx.peer_ip, n);
		pass(n, 200);
	}
	if (!g_tx.have_mac) {
		fprintf(stderr, "no ARP reply\n");
		return 1;
	}
	if (iip_tcp_connect(n->ws, n->mac, n->ip_be, htons((uint16_t)(40000 + getpid() % 20000)),
	                    g_tx.peer_mac, g_tx.peer_ip, htons((uint16_t)atoi(argv[6])), n)) {
		fprintf(stderr, "connect refused\n");
		return 1;
	}
	while (!g_tx.closed && !g_stop && mono_ns() < deadline)
		pass(n, 1);
	fprintf(stderr, "sent %llu of %llu, %llu of %llu packets acked, tso frames %llu, %s\n",
	        (unsigned long long)g_tx.sent, (unsigned long long)g_tx.total,
	        (unsigned long long)g_tx.acked_pkts, (unsigned long long)g_tx.sent_pkts,
	        (unsigned long long)n->tso_frames, g_tx.closed ? "closed" : "not closed");
	return g_tx.closed && g_tx.sent == g_tx.total && g_tx.acked_pkts == g_tx.sent_pkts ? 0 : 1;
}
