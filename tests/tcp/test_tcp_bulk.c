/*
 * Bulk transfers between two contexts back to back (tx of one into ipk_run of the
 * other), content verified byte for byte, with and without loss, copying and
 * zero-copy, software checksums and offloads.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "wire/wire.h"

#define MS 1000000ull
#define SEC 1000000000ull

static uint8_t pattern(uint32_t i) { return (uint8_t)((i * 2654435761u) >> 13); }

static void step(struct th *a, struct th *b, uint64_t dt)
{
	a->now += dt;
	b->now = a->now;
	ipk_run(a->ctx, NULL, 0, a->now);
	ipk_run(b->ctx, NULL, 0, b->now);
	th_pump(a, b);
}

/* b connects to a and sends `total` bytes; a verifies them. */
static void transfer(void (*tweak)(struct ipk_config *), uint32_t total, int zero_copy,
                     int drop_every)
{
	struct th *a, *b;
	struct ipk_conn *c = NULL;
	uint8_t *src = (uint8_t *)malloc(total);
	uint32_t sent = 0, i;
	int iter;

	for (i = 0; i < total; i++)
		src[i] = pattern(i);
	th_pair(&a, &b, tweak);
	a->auto_recved = 1;
	CHECK_EQ(ipk_tcp_listen(a->ctx, ipk_htons(80), 8), IPK_OK);
	CHECK_EQ(ipk_tcp_connect(b->ctx, a->ip_be, ipk_htons(80), 0, NULL, &c, 0), IPK_OK);
	th_pump(a, b);
	CHECK_EQ(b->connected, 1);
	CHECK_EQ(a->accepted, 1);
	a->drop_every = drop_every;
	b->drop_every = drop_every;
	for (iter = 0; iter < 200000 && (sent < total || a->rxlen < total); iter++) {
		while (sent < total) {
			uint32_t n = IPK_MIN(total - sent, 1400u);
			int rc;

			if (zero_copy) {
				struct sim_pkt *k = sim_pkt_from(b->pool, src + sent, n);

				if (!k)
					break;
				rc = ipk_tcp_send(b->ctx, c, k, b->now);
				if (rc < 0)
					sim_pkt_free(k);
			} else {
				rc = ipk_tcp_write(b->ctx, c, src + sent, n, b->now);
			}
			if (rc <= 0)
				break;
			sent += (uint32_t)rc;
		}
		th_pump(a, b);
		step(a, b, 5 * MS);
	}
	CHECK_EQ(sent, total);
	CHECK_EQ(a->rxlen, total);
	CHECK(memcmp(a->rx, src, total) == 0);
	if (drop_every)
		CHECK(b->ctx->cnt.tcp_retransmits > 0);
	a->drop_every = b->drop_every = 0;
	/* orderly close both ways */
	CHECK_EQ(ipk_tcp_close(b->ctx, c, b->now), IPK_OK);
	th_pump(a, b);
	CHECK_EQ(a->fins, 1);
	CHECK_EQ(ipk_tcp_close(a->ctx, a->conn, a->now), IPK_OK);
	th_pump(a, b);
	CHECK_EQ(a->closed, 1);
	CHECK_EQ(b->closed, 1);
	CHECK_EQ(b->why, IPK_CLOSE_NORMAL);
	for (iter = 0; iter < 100; iter++)
		step(a, b, SEC);
	CHECK(th_no_leaks(a));
	CHECK(th_no_leaks(b));
	th_free(a);
	th_free(b);
	free(src);
}

static void plain(struct ipk_config *c) { (void)c; }

static void offloads(struct ipk_config *c)
{
	c->caps = IPK_CAP_SG | IPK_CAP_TX_CSUM_TCP | IPK_CAP_TX_CSUM_IP4;
}

static void small_bufs(struct ipk_config *c)
{
	c->tcp_rcvbuf = 16384;
	c->tcp_sndbuf = 32768;
	c->tcp_wscale = 0;
}

static void test_bulk_copy_3mib(void) { transfer(plain, 3u << 20, 0, 0); }
static void test_bulk_zero_copy_sg_offload_2mib(void) { transfer(offloads, 2u << 20, 1, 0); }
static void test_bulk_with_loss_1mib(void) { transfer(plain, 1u << 20, 0, 37); }
static void test_bulk_small_windows_with_loss(void) { transfer(small_bufs, 512u << 10, 0, 23); }

int main(void)
{
	RUN(test_bulk_copy_3mib);
	RUN(test_bulk_zero_copy_sg_offload_2mib);
	RUN(test_bulk_with_loss_1mib);
	RUN(test_bulk_small_windows_with_loss);
	return check_summary();
}
