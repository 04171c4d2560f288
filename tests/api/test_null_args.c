/*
 * Misuse of the public API gets a documented answer, never a crash (issue 14: "an
 * integrator cannot misuse it by accident"): every function of core.h, io.h and
 * runtime.h called with NULL handles and NULL pointer arguments, and a live pool with
 * NULL or out-of-range arguments. A crash fails the test (the process dies); each
 * return is the one the header states. Before this test ipk_io_rx_burst / tx_burst /
 * flush / fd / arm / stats, ipk_pkt_clone, ipk_pkt_alloc, the pool accessors, the
 * *_cfg_default functions, ipk_rss_key_symmetric and the echo queue crashed on NULL.
 */
#include <errno.h>
#include <ipkit/core.h>
#include <ipkit/io.h>
#include <ipkit/runtime.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int all_zero(const void *p, size_t n)
{
	const unsigned char *b = (const unsigned char *)p;
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

static void test_core_null_handles(void)
{
	struct ipk_tuple tu;
	struct ipk_tcp_info ti;
	uint8_t key[IPK_RSS_KEY_LEN];
	uint16_t reta[4] = {0};

	CHECK(ipk_strerror(12345) != NULL);
	CHECK(ipk_drop_name((enum ipk_drop)9999) != NULL);
	ipk_config_default(NULL);
	CHECK(ipk_config_check(NULL, NULL, NULL) < 0);
	CHECK(ipk_ctx_init(NULL, 0, NULL, NULL) == NULL);
	CHECK_EQ(ipk_add_conns(NULL, NULL, 1), IPK_EINVAL);
	CHECK_EQ(ipk_add_pbs(NULL, NULL, 1), IPK_EINVAL);
	CHECK_EQ(ipk_conns_free(NULL), 0);
	CHECK_EQ(ipk_pbs_free(NULL), 0);
	ipk_run(NULL, NULL, 3, 0);
	ipk_counters(NULL);
	CHECK_EQ(ipk_pkt_copy(NULL, NULL, 0, NULL, 4), 0);
	CHECK_EQ(ipk_arp_announce(NULL, 0), IPK_EINVAL);
	CHECK_EQ(ipk_arp_add_static(NULL, 1, NULL), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_listen(NULL, 1, 1), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_unlisten(NULL, 1), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_connect(NULL, 1, 1, 0, NULL, NULL, 0), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_send(NULL, NULL, NULL, 0), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_write(NULL, NULL, NULL, 4, 0), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_sndbuf_free(NULL), 0);
	CHECK_EQ(ipk_tcp_recved(NULL, NULL, 1, 0), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_close(NULL, NULL, 0), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_abort(NULL, NULL, 0), IPK_EINVAL);
	CHECK(ipk_tcp_user(NULL) == NULL);
	ipk_tcp_set_user(NULL, NULL);
	CHECK_EQ(ipk_tcp_tuple(NULL, &tu), IPK_EINVAL);
	CHECK(ipk_tcp_tuple(NULL, NULL) < 0);
	CHECK_EQ(ipk_tcp_set_nagle(NULL, 1), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_set_cc(NULL, 1), IPK_EINVAL);
	CHECK_EQ(ipk_tcp_set_keepalive(NULL, NULL, 1, 0), IPK_EINVAL);
	ipk_tcp_state(NULL);
	CHECK(ipk_tcp_info(NULL, &ti) < 0);
	CHECK(ipk_tcp_info(NULL, NULL) < 0);
	CHECK_EQ(ipk_udp_bind(NULL, 1), IPK_EINVAL);
	CHECK_EQ(ipk_udp_unbind(NULL, 1), IPK_EINVAL);
	CHECK_EQ(ipk_udp_send(NULL, 1, 1, 1, NULL, 0), IPK_EINVAL);
	CHECK_EQ(ipk_icmp_echo(NULL, 1, 1, 1, 8, 0), IPK_EINVAL);
	memset(key, 0, sizeof(key));
	ipk_rss_key_symmetric(NULL);
	ipk_rss_key_symmetric(key);
	CHECK_EQ(key[0], 0x6d);
	CHECK_EQ(ipk_rss_toeplitz(NULL, 40, NULL, 8), 0);
	CHECK_EQ(ipk_rss_toeplitz(key, 4, key, 8), 0); /* key too short for the input */
	ipk_rss_hash_ip4(NULL, 1, 2, 3, 4);
	CHECK_EQ(ipk_rss_queue(reta, 0, 1), IPK_EINVAL);
	ipk_rss_hash_frame4(NULL, 0xff, 6, 0, 1, 2, 3, 4);
}

static void test_io_null_handles(void)
{
	struct ipk_pool_stats ps;
	struct ipk_io_stats ios;
	struct ipk_pkt *pkts[4] = {NULL};
	size_t sz = 99;
	uint32_t u1 = 9, u2 = 9;
	uint8_t buf[8];

	ipk_pool_cfg_default(NULL);
	ipk_pool_destroy(NULL);
	CHECK(ipk_pool_area(NULL, &sz) == NULL);
	CHECK_EQ(sz, 0);
	CHECK_EQ(ipk_pool_buf_size(NULL), 0);
	CHECK_EQ(ipk_pool_headroom(NULL), 0);
	CHECK(ipk_pkt_alloc(NULL) == NULL);
	CHECK(ipk_pkt_attach(NULL, 0, 0, 0) == NULL);
	CHECK(ipk_pkt_attach_ext(NULL, NULL, 0, 0, NULL) == NULL);
	CHECK_EQ(ipk_pool_buf_get(NULL), -EINVAL);
	ipk_pool_buf_put(NULL, 0);
	ipk_pkt_free(NULL);
	ipk_pkt_free_chain(NULL);
	CHECK(ipk_pkt_clone(NULL) == NULL);
	CHECK_EQ(ipk_pkt_chain_len(NULL), 0);
	ipk_pool_usage(NULL, &u1, &u2);
	CHECK_EQ(u1, 0);
	CHECK_EQ(u2, 0);
	ipk_pool_set_reserve(NULL, 1);
	CHECK_EQ(ipk_pool_low(NULL), 0);
	CHECK_EQ(ipk_pool_pkt_low(NULL), 0);
	ipk_pool_fill_ops(NULL);
	CHECK_EQ(ipk_pkt_linearize(NULL, buf, 4), 0);
	CHECK_EQ(ipk_pkt_copy_out(NULL, 0, buf, 4), 0);
	CHECK_EQ(ipk_pkt_buf_refcnt(NULL), 0);
	CHECK(ipk_pool_large(NULL) == NULL);
	memset(&ps, 0xff, sizeof(ps));
	ipk_pool_stats(NULL, &ps);
	CHECK(all_zero(&ps, sizeof(ps)));
	ipk_pool_stats(NULL, NULL);
	CHECK(ipk_io_open(NULL, NULL, NULL, 0) == NULL);
	CHECK_EQ(ipk_io_spec_buf_size(NULL), 0);
	ipk_io_close(NULL);
	CHECK_EQ(ipk_io_rx_burst(NULL, pkts, 4), -EINVAL);
	CHECK_EQ(ipk_io_rx_burst(NULL, NULL, 0), 0);
	CHECK_EQ(ipk_io_tx_burst(NULL, pkts, 4), 0);
	CHECK_EQ(ipk_io_flush(NULL), -EINVAL);
	CHECK(ipk_io_caps(NULL) == NULL);
	CHECK_EQ(ipk_io_fd(NULL), -EINVAL);
	CHECK_EQ(ipk_io_arm(NULL), -EINVAL);
	CHECK_EQ(ipk_io_set_addr(NULL, 1, NULL), -EINVAL);
	CHECK_EQ(ipk_io_set_addr6(NULL, NULL, NULL, 0), -EINVAL);
	memset(&ios, 0xff, sizeof(ios));
	ipk_io_stats(NULL, &ios);
	CHECK(all_zero(&ios, sizeof(ios)));
	ipk_io_stats(NULL, NULL);
	CHECK(ipk_io_name(NULL) != NULL);
}

/* A live pool: NULL output pointers, foreign indexes, out-of-range sizes. */
static void test_pool_bad_args(void)
{
	char err[256];
	struct ipk_pool *p = ipk_pool_create(NULL, err, sizeof(err));
	struct ipk_pool_cfg c;
	struct ipk_pkt *k;
	uint32_t bufs, descs;

	CHECK(p != NULL);
	if (!p)
		return;
	k = ipk_pkt_alloc(p);
	CHECK(k != NULL);
	ipk_pool_stats(p, NULL);
	CHECK(ipk_pool_area(p, NULL) != NULL);
	ipk_pool_usage(p, NULL, NULL);
	CHECK_EQ(ipk_pkt_copy_out(k, 0, NULL, 4), 0);
	CHECK_EQ(ipk_pkt_linearize(k, NULL, 4), 0);
	CHECK(ipk_pkt_attach(p, 0xffffffffu, 0, 0) == NULL);
	ipk_pool_buf_put(p, 0xffffffffu);
	ipk_pkt_free(k);
	ipk_pool_usage(p, &bufs, &descs);
	CHECK_EQ(bufs, 0);
	CHECK_EQ(descs, 0);
	ipk_pool_destroy(p);
	ipk_pool_cfg_default(&c);
	c.buf_size = 3; /* not a power of two */
	CHECK(ipk_pool_create(&c, NULL, 0) == NULL);
	memset(&c, 0xff, sizeof(c));
	CHECK(ipk_pool_create(&c, err, sizeof(err)) == NULL);
	c.nbufs = 0;
	CHECK(ipk_pool_create(&c, err, sizeof(err)) == NULL);
	CHECK(ipk_io_open(",,,=,=", NULL, err, sizeof(err)) == NULL);
}

static void test_runtime_null_handles(void)
{
	struct ipk_node_stats ns;
	struct ipk_worker_stats ws;
	uint64_t a = 1, b = 1;
	uint8_t buf[4] = {0};

	ipk_node_cfg_default(NULL);
	CHECK(ipk_node_create(NULL, NULL, 0) == NULL);
	ipk_node_destroy(NULL);
	CHECK(ipk_node_poll(NULL, 0) < 0);
	CHECK(ipk_node_run(NULL, NULL) < 0);
	CHECK(ipk_node_ctx(NULL) == NULL);
	CHECK(ipk_node_io(NULL) == NULL);
	CHECK(ipk_node_pool(NULL) == NULL);
	ipk_node_now(NULL);
	CHECK(ipk_node_app(NULL) == NULL);
	CHECK(ipk_node_from(NULL) == NULL);
	CHECK_EQ(ipk_node_tx_drops(NULL), 0);
	memset(&ns, 0xff, sizeof(ns));
	ipk_node_stats(NULL, &ns);
	CHECK(all_zero(&ns, sizeof(ns)));
	ipk_node_stats(NULL, NULL);
	CHECK_EQ(ipk_node_set_spin(NULL, 1), -EINVAL);
	CHECK(ipk_app_listen(NULL, 1) < 0);
	CHECK(ipk_app_connect(NULL, 1, 1, NULL) < 0);
	CHECK(ipk_app_send(NULL, 1, buf, 4) < 0);
	CHECK(ipk_app_release(NULL, 1, NULL, 4) < 0);
	CHECK(ipk_app_close(NULL, 1) < 0);
	CHECK(ipk_app_udp_bind(NULL, 1) < 0);
	CHECK(ipk_app_udp_send(NULL, 1, 1, 1, buf, 4, NULL) < 0);
	ipk_app_echoq_add(NULL, 1, NULL, NULL);
	CHECK_EQ(ipk_app_echoq_sent(NULL, 1, NULL, 4), IPK_EINVAL);
	ipk_app_echoq_drop(NULL, 1, NULL);
	ipk_app_set_state(NULL, NULL);
	CHECK(ipk_app_state(NULL) == NULL);
	ipk_app_worker(NULL);
	CHECK(ipk_app_arg(NULL) == NULL);
	ipk_workers_cfg_default(NULL);
	CHECK(ipk_workers_start(NULL, NULL, 0) == NULL);
	ipk_workers_stop(NULL);
	ipk_workers_destroy(NULL);
	ipk_workers_request_stop(NULL);
	CHECK_EQ(ipk_workers_stats(NULL, 0, &ws), IPK_EINVAL);
	CHECK(ipk_workers_node(NULL, 0) == NULL);
	ipk_workers_steering(NULL);
	ipk_workers_steer_stats(NULL, &a, &b);
	CHECK_EQ(ipk_model_parse(NULL), -EINVAL);
}

int main(void)
{
	RUN(test_core_null_handles);
	RUN(test_io_null_handles);
	RUN(test_pool_bad_args);
	RUN(test_runtime_null_handles);
	return check_summary();
}
