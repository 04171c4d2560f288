/*
 * The same forwarder on DPDK: two net_virtio_user ports (the vdevs given to EAL),
 * rte_eth_rx_burst on one, rte_eth_tx_burst on the other, unsent mbufs freed.
 *
 *   dpdk-virtio-fwd EAL-ARGS -- BATCH SECONDS
 */
#include "fwd_common.h"

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <stdlib.h>
#include <string.h>

#define MAXB 256

static int port_up(uint16_t port, struct rte_mempool *mp)
{
	struct rte_eth_conf conf;

	memset(&conf, 0, sizeof(conf));
	if (rte_eth_dev_configure(port, 1, 1, &conf) < 0 ||
	    rte_eth_rx_queue_setup(port, 0, 256, rte_socket_id(), NULL, mp) < 0 ||
	    rte_eth_tx_queue_setup(port, 0, 256, rte_socket_id(), NULL) < 0 ||
	    rte_eth_dev_start(port) < 0)
		return -1;
	return 0;
}

static int fwd_step(uint16_t src, uint16_t dst, int batch, struct fwd_meter *m)
{
	struct rte_mbuf *pk[MAXB];
	uint64_t t = __rdtsc();
	uint16_t n = rte_eth_rx_burst(src, 0, pk, (uint16_t)batch), k;

	if (n == 0)
		return 0;
	k = rte_eth_tx_burst(dst, 0, pk, n);
	if (k < n)
		rte_pktmbuf_free_bulk(pk + k, n - k);
	m->pkts += k;
	m->drops += (uint64_t)(n - k);
	fwd_sample(m, __rdtsc() - t, (unsigned)n);
	return n;
}

int main(int argc, char **argv)
{
	struct rte_mempool *mp;
	struct fwd_meter m = { 0 };
	int used = rte_eal_init(argc, argv), batch, started = 0;
	double secs, end;

	if (used < 0 || argc - used != 3) {
		fprintf(stderr, "usage: dpdk-virtio-fwd EAL-ARGS -- BATCH SECONDS\n");
		return 2;
	}
	batch = atoi(argv[used + 1]);
	secs = atof(argv[used + 2]);
	if (batch < 1 || batch > MAXB || secs <= 0 || rte_eth_dev_count_avail() < 2)
		return 2;
	mp = rte_pktmbuf_pool_create("fwd", 4095, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
	                             rte_socket_id());
	if (!mp || port_up(0, mp) < 0 || port_up(1, mp) < 0) {
		fprintf(stderr, "dpdk-virtio-fwd: port set-up failed\n");
		return 1;
	}
	fwd_start(&m);
	end = fwd_now() + 30;
	for (;;) {
		int got = fwd_step(0, 1, batch, &m) + fwd_step(1, 0, batch, &m);

		if (!started && got) {
			started = 1;
			fwd_start(&m);
			end = m.t0 + secs;
		}
		if ((++m.polls & 1023) == 0 && fwd_now() >= end)
			break;
	}
	if (started)
		fwd_print(&m, "dpdk", batch);
	rte_eth_dev_stop(0);
	rte_eth_dev_stop(1);
	rte_eth_dev_close(0);
	rte_eth_dev_close(1);
	rte_eal_cleanup();
	return started ? 0 : 1;
}
