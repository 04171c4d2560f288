/*
 * io_probe SPEC IP SECONDS COUNT: open a backend and answer ARP requests for IP and
 * ICMP echo requests to IP directly on the frames (no core), until COUNT echo replies
 * were sent or SECONDS passed. Prints "open: <caps>" at start, "replied N" and the
 * backend stats at the end; exits 0 when COUNT replies went out, 1 on timeout, 2 when
 * the backend did not open (its message on stderr, verbatim). Backend smoke tests run
 * it with Linux as the peer (tests/interop/test_io_backends.py).
 */
#include <ipkit/io.h>

#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint16_t csum(const uint8_t *p, uint32_t n)
{
	uint32_t s = 0, i;

	for (i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* ARP request for ip -> reply in place. Returns 1 when the frame became a reply. */
static int arp_answer(uint8_t *f, uint32_t len, const uint8_t ip[4], const uint8_t mac[6])
{
	if (len < 42 || f[12] != 0x08 || f[13] != 0x06 || f[20] != 0 || f[21] != 1 ||
	    memcmp(f + 38, ip, 4) != 0)
		return 0;
	memcpy(f, f + 6, 6);
	memcpy(f + 6, mac, 6);
	f[21] = 2;
	memcpy(f + 32, f + 22, 10); /* target = requester */
	memcpy(f + 22, mac, 6);
	memcpy(f + 28, ip, 4);
	return 1;
}

/* IPv4 ICMP echo request to ip at f + l2 -> echo reply in place. */
static int icmp_answer(uint8_t *f, uint32_t len, uint32_t l2, const uint8_t ip[4],
                       const uint8_t mac[6])
{
	uint8_t *h = f + l2, tmp[6];
	uint32_t ihl, tot;
	uint16_t c;

	if (len < l2 + 28 || (l2 && (f[12] != 0x08 || f[13] != 0x00)) || (h[0] >> 4) != 4)
		return 0;
	ihl = (uint32_t)(h[0] & 15) * 4;
	tot = (uint32_t)(h[2] << 8 | h[3]);
	if (ihl < 20 || tot < ihl + 8 || l2 + tot > len || h[9] != 1 || h[ihl] != 8 ||
	    memcmp(h + 16, ip, 4) != 0)
		return 0;
	memcpy(tmp, h + 12, 4);
	memcpy(h + 12, h + 16, 4);
	memcpy(h + 16, tmp, 4);
	h[ihl] = 0;
	h[ihl + 2] = h[ihl + 3] = 0;
	c = csum(h + ihl, tot - ihl);
	h[ihl + 2] = (uint8_t)(c >> 8);
	h[ihl + 3] = (uint8_t)c;
	if (l2) {
		memcpy(tmp, f, 6);
		memcpy(f, f + 6, 6);
		memcpy(f + 6, mac, 6);
		(void)tmp;
	}
	return 2;
}

int main(int argc, char **argv)
{
	struct ipk_pool *pool;
	struct ipk_io *io;
	const struct ipk_io_caps *caps;
	struct ipk_io_stats st;
	char err[256];
	uint8_t ip[4];
	uint64_t end;
	long want, replied = 0;

	if (argc != 5 || inet_pton(AF_INET, argv[2], ip) != 1) {
		fprintf(stderr, "usage: io_probe SPEC IP SECONDS COUNT\n");
		return 2;
	}
	end = now_ms() + (uint64_t)atol(argv[3]) * 1000u;
	want = atol(argv[4]);
	pool = ipk_pool_create(NULL, err, sizeof(err));
	if (!pool) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	io = ipk_io_open(argv[1], pool, err, sizeof(err));
	if (!io) {
		fprintf(stderr, "%s\n", err);
		ipk_pool_destroy(pool);
		return 2;
	}
	caps = ipk_io_caps(io);
	printf("open: %s mtu=%u offloads=0x%x link=%u fd=%d\n", ipk_io_name(io), caps->mtu,
	       caps->offloads, caps->link, ipk_io_fd(io));
	fflush(stdout);
	while (replied < want && now_ms() < end) {
		struct ipk_pkt *rx[32], *tx[32];
		struct pollfd pfd;
		int n, i, k = 0;

		pfd.fd = ipk_io_fd(io);
		pfd.events = POLLIN;
		if (pfd.fd >= 0)
			(void)poll(&pfd, 1, 50);
		n = ipk_io_rx_burst(io, rx, 32);
		for (i = 0; i < n; i++) {
			uint8_t *f = ipk_pkt_mtod(rx[i]);
			uint32_t l2 = caps->link == IPK_LINK_ETH ? 14 : 0;
			int r = l2 ? arp_answer(f, rx[i]->len, ip, caps->mac) : 0;

			if (!r)
				r = icmp_answer(f, rx[i]->len, l2, ip, caps->mac);
			if (r) {
				rx[i]->rx_csum = 0;
				tx[k++] = rx[i];
				replied += r == 2;
			} else {
				ipk_pkt_free(rx[i]);
			}
		}
		n = ipk_io_tx_burst(io, tx, k);
		for (i = n > 0 ? n : 0; i < k; i++)
			ipk_pkt_free(tx[i]);
		ipk_io_flush(io);
	}
	ipk_io_stats(io, &st);
	printf("replied %ld\nstats rx=%llu tx=%llu rx_drops=%llu tx_drops=%llu\n", replied,
	       (unsigned long long)st.rx_pkts, (unsigned long long)st.tx_pkts,
	       (unsigned long long)st.rx_drops, (unsigned long long)st.tx_drops);
	ipk_io_close(io);
	{
		uint32_t b, d;

		ipk_pool_usage(pool, &b, &d);
		if (b || d)
			printf("leak bufs=%u descs=%u\n", b, d);
	}
	ipk_pool_destroy(pool);
	return replied >= want ? 0 : 1;
}
