/*
 * Issue 20, item 2: every function iip's README documents exists with the documented
 * signature. Each one's address goes into a pointer of the documented type; built
 * with -Werror as C and as C++ (test_iip_signatures.cpp includes this file), so a
 * missing function or any difference in a parameter or result type fails the build.
 * The stub callbacks are the README's compile-test set, with the adapter included
 * first as iip's main.c is there. Run, it checks the sizes are usable.
 */
#ifdef IIP_COMPAT_LIBRARY
/* The library build (libipkit-iip.a): the callbacks are defined non-static and the
 * functions come from the archive (test_iip_signatures_lib). */
#include "ipkit/compat/iip.h"
#include <stddef.h>
#define OPS_DEF
#else
#include "compat/iip/iip.c"
#define OPS_DEF static
#endif

OPS_DEF void *iip_ops_pkt_alloc(void *opaque) { return opaque; }
OPS_DEF void iip_ops_pkt_free(void *pkt, void *opaque) { (void)pkt; (void)opaque; }
OPS_DEF void *iip_ops_pkt_get_data(void *pkt, void *opaque) { (void)opaque; return pkt; }
OPS_DEF uint16_t iip_ops_pkt_get_len(void *pkt, void *opaque) { (void)pkt; (void)opaque; return 0; }
OPS_DEF void iip_ops_pkt_set_len(void *pkt, uint16_t len, void *opaque) { (void)pkt; (void)len; (void)opaque; }
OPS_DEF void iip_ops_pkt_increment_head(void *pkt, uint16_t len, void *opaque) { (void)pkt; (void)len; (void)opaque; }
OPS_DEF void iip_ops_pkt_decrement_tail(void *pkt, uint16_t len, void *opaque) { (void)pkt; (void)len; (void)opaque; }
OPS_DEF void *iip_ops_pkt_clone(void *pkt, void *opaque) { (void)pkt; (void)opaque; return NULL; }
OPS_DEF void iip_ops_pkt_scatter_gather_chain_append(void *h, void *t, void *opaque) { (void)h; (void)t; (void)opaque; }
OPS_DEF void *iip_ops_pkt_scatter_gather_chain_get_next(void *h, void *opaque) { (void)h; (void)opaque; return NULL; }
OPS_DEF void iip_ops_util_now_ns(uint32_t t[3], void *opaque) { (void)t; (void)opaque; }
OPS_DEF uint16_t iip_ops_l2_hdr_len(void *pkt, void *opaque) { (void)pkt; (void)opaque; return 0; }
OPS_DEF uint8_t *iip_ops_l2_hdr_src_ptr(void *pkt, void *opaque) { (void)opaque; return (uint8_t *)pkt; }
OPS_DEF uint8_t *iip_ops_l2_hdr_dst_ptr(void *pkt, void *opaque) { (void)pkt; (void)opaque; return NULL; }
OPS_DEF uint16_t iip_ops_l2_ethertype_be(void *pkt, void *opaque) { (void)pkt; (void)opaque; return 0; }
OPS_DEF uint16_t iip_ops_l2_addr_len(void *opaque) { (void)opaque; return 0; }
OPS_DEF void iip_ops_l2_broadcast_addr(uint8_t bcaddr[], void *opaque) { (void)bcaddr; (void)opaque; }
OPS_DEF void iip_ops_l2_hdr_craft(void *pkt, uint8_t src[], uint8_t dst[], uint16_t ethertype_be, void *opaque) { (void)pkt; (void)src; (void)dst; (void)ethertype_be; (void)opaque; }
OPS_DEF uint8_t iip_ops_l2_skip(void *pkt, void *opaque) { (void)pkt; (void)opaque; return 0; }
OPS_DEF void iip_ops_l2_flush(void *opaque) { (void)opaque; }
OPS_DEF void iip_ops_l2_push(void *pkt, void *opaque) { (void)pkt; (void)opaque; }
OPS_DEF uint8_t iip_ops_nic_feature_offload_tx_scatter_gather(void *opaque) { (void)opaque; return 0; }
OPS_DEF uint8_t iip_ops_nic_feature_offload_ip4_rx_checksum(void *opaque) { (void)opaque; return 0; }
OPS_DEF uint8_t iip_ops_nic_feature_offload_ip4_tx_checksum(void *opaque) { (void)opaque; return 0; }
OPS_DEF uint8_t iip_ops_nic_offload_ip4_rx_checksum(void *m, void *opaque) { (void)m; (void)opaque; return 0; }
OPS_DEF uint8_t iip_ops_nic_offload_tcp_rx_checksum(void *m, void *opaque) { (void)m; (void)opaque; return 0; }
OPS_DEF uint8_t iip_ops_nic_offload_udp_rx_checksum(void *m, void *opaque) { (void)m; (void)opaque; return 0; }
OPS_DEF void iip_ops_nic_offload_ip4_tx_checksum_mark(void *m, void *opaque) { (void)m; (void)opaque; }
OPS_DEF uint8_t iip_ops_nic_feature_offload_tcp_rx_checksum(void *opaque) { (void)opaque; return 0; }
OPS_DEF uint8_t iip_ops_nic_feature_offload_tcp_tx_checksum(void *opaque) { (void)opaque; return 0; }
OPS_DEF uint8_t iip_ops_nic_feature_offload_tcp_tx_tso(void *opaque) { (void)opaque; return 0; }
OPS_DEF void iip_ops_nic_offload_tcp_tx_checksum_mark(void *m, void *opaque) { (void)m; (void)opaque; }
OPS_DEF void iip_ops_nic_offload_tcp_tx_tso_mark(void *m, void *opaque) { (void)m; (void)opaque; }
OPS_DEF uint8_t iip_ops_nic_feature_offload_udp_rx_checksum(void *opaque) { (void)opaque; return 0; }
OPS_DEF uint8_t iip_ops_nic_feature_offload_udp_tx_checksum(void *opaque) { (void)opaque; return 0; }
OPS_DEF uint8_t iip_ops_nic_feature_offload_udp_tx_tso(void *opaque) { (void)opaque; return 0; }
OPS_DEF void iip_ops_nic_offload_udp_tx_checksum_mark(void *m, void *opaque) { (void)m; (void)opaque; }
OPS_DEF void iip_ops_nic_offload_udp_tx_tso_mark(void *m, void *opaque) { (void)m; (void)opaque; }
OPS_DEF uint8_t iip_ops_arp_lhw(void *opaque) { (void)opaque; return 0; }
OPS_DEF uint8_t iip_ops_arp_lproto(void *opaque) { (void)opaque; return 0; }
OPS_DEF void iip_ops_arp_reply(void *ctx, void *m, void *opaque) { (void)ctx; (void)m; (void)opaque; }
OPS_DEF void iip_ops_icmp_reply(void *ctx, void *m, void *opaque) { (void)ctx; (void)m; (void)opaque; }
OPS_DEF uint8_t iip_ops_tcp_accept(void *ctx, void *m, void *opaque) { (void)ctx; (void)m; (void)opaque; return 0; }
OPS_DEF void *iip_ops_tcp_accepted(void *ctx, void *h, void *m, void *opaque) { (void)ctx; (void)h; (void)m; (void)opaque; return NULL; }
OPS_DEF void *iip_ops_tcp_connected(void *ctx, void *h, void *m, void *opaque) { (void)ctx; (void)h; (void)m; (void)opaque; return NULL; }
OPS_DEF void iip_ops_tcp_payload(void *ctx, void *h, void *m, void *to, uint16_t ho, uint16_t tl, void *opaque) { (void)ctx; (void)h; (void)m; (void)to; (void)ho; (void)tl; (void)opaque; }
OPS_DEF void iip_ops_tcp_acked(void *ctx, void *h, void *m, void *to, void *opaque) { (void)ctx; (void)h; (void)m; (void)to; (void)opaque; }
OPS_DEF void iip_ops_tcp_closed(void *h, uint8_t lm[], uint32_t li, uint16_t lp, uint8_t pm[], uint32_t pi, uint16_t pp, void *to, void *opaque) { (void)h; (void)lm; (void)li; (void)lp; (void)pm; (void)pi; (void)pp; (void)to; (void)opaque; }
OPS_DEF void iip_ops_udp_payload(void *ctx, void *m, void *opaque) { (void)ctx; (void)m; (void)opaque; }

#include <stdio.h>

/* The documented signatures, written out again here (not taken from the header). */
typedef uint32_t (*sig_size)(void);
typedef void (*sig_add)(void *, void *);
typedef void (*sig_arp_request)(void *, uint8_t[], uint32_t, uint32_t, void *);
typedef uint16_t (*sig_tcp_connect)(void *, uint8_t[], uint32_t, uint16_t, uint8_t[], uint32_t,
                                    uint16_t, void *);
typedef uint16_t (*sig_tcp_close)(void *, void *, void *);
typedef uint16_t (*sig_tcp_send)(void *, void *, void *, uint16_t, void *);
typedef void (*sig_rxbuf_consumed)(void *, void *, uint16_t, void *);
typedef uint16_t (*sig_udp_send)(void *, uint8_t[], uint32_t, uint16_t, uint8_t[], uint32_t,
                                 uint16_t, void *, void *);
typedef uint16_t (*sig_run)(void *, uint8_t[], uint32_t, void *[], uint16_t, uint32_t *, void *);

int main(void)
{
	sig_size workspace_size = iip_workspace_size;
	sig_size tcp_conn_size = iip_tcp_conn_size;
	sig_size pb_size = iip_pb_size;
	sig_add add_tcp_conn = iip_add_tcp_conn;
	sig_add add_pb = iip_add_pb;
	sig_arp_request arp_request = iip_arp_request;
	sig_tcp_connect tcp_connect = iip_tcp_connect;
	sig_tcp_close tcp_close = iip_tcp_close;
	sig_tcp_send tcp_send = iip_tcp_send;
	sig_rxbuf_consumed rxbuf_consumed = iip_tcp_rxbuf_consumed;
	sig_udp_send udp_send = iip_udp_send;
	sig_run run = iip_run;
	int bad = 0;

	(void)add_tcp_conn; (void)add_pb; (void)arp_request; (void)tcp_connect;
	(void)tcp_close; (void)tcp_send; (void)rxbuf_consumed; (void)udp_send; (void)run;
#ifdef IIP_COMPAT_LIBRARY
	if (workspace_size() == 0 || tcp_conn_size() % 8 || pb_size() % 8)
		bad = 1;
#else
	if (workspace_size() < sizeof(struct iipk_state) || tcp_conn_size() < ipk_conn_size() ||
	    pb_size() < ipk_pb_size() || tcp_conn_size() % 8 || pb_size() % 8)
		bad = 1;
#endif
	printf("iip signatures: 12 functions; workspace %u, conn %u, pb %u bytes: %s\n",
	       (unsigned)workspace_size(), (unsigned)tcp_conn_size(), (unsigned)pb_size(),
	       bad ? "FAIL" : "ok");
	return bad;
}
