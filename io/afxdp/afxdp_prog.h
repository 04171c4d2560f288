/*
 * The afxdp backend's XDP program: load it from the object embedded at build time,
 * attach it to a device (native or generic mode), and fill its two maps (the XSK map
 * keyed by queue, and the address ipkit answers to).
 */
#ifndef IPKIT_AFXDP_PROG_H
#define IPKIT_AFXDP_PROG_H

#include <stddef.h>
#include <stdint.h>

struct bpf_object;

/* The program's address map entry; must match struct ipk_xdp_cfg in ipk_xdp.bpf.c. */
#define IPK_XDP6_ON 1u /* ipkit speaks IPv6 */
#define IPK_XDP6_RA 2u /* Router Advertisements to ff02::1 go to ipkit */
struct ipk_xdp_cfg_user {
	uint32_t ip4_be;
	uint8_t mac[6];
	uint16_t pad;
	uint8_t ip6[16];
	uint8_t iid[8];
	uint32_t flags6;
	uint32_t pad2;
};

struct ipk_afxdp_prog {
	struct bpf_object *obj;
	int ifindex;          /* 0 until attached by us */
	uint32_t xdp_flags;   /* mode actually used */
	int prog_fd, xsks_fd, cfg_fd;
	struct ipk_xdp_cfg_user cfg; /* what the map holds (set_addr and set_addr6
	                              * each change their part) */
};

/* mode: 0 tries native (drv) then generic (skb); or XDP_FLAGS_DRV_MODE / _SKB_MODE.
 * 0 or a negative errno with a one-line message. */
int ipk_afxdp_prog_attach(struct ipk_afxdp_prog *p, int ifindex, int mode, const char *dev,
                          char *err, size_t errlen);
int ipk_afxdp_prog_add_socket(struct ipk_afxdp_prog *p, uint32_t queue, int xsk_fd);
int ipk_afxdp_prog_set_addr(struct ipk_afxdp_prog *p, uint32_t ip4_be, const uint8_t mac[6]);
/* IPv6 on: steer ip6 (NULL or :: = none) and every address ending in the interface
 * identifier of the MAC set with set_addr (or given here, mac non-NULL), and ND for
 * them; flags IPK_XDP6_RA to take Router Advertisements to all-nodes. */
int ipk_afxdp_prog_set_addr6(struct ipk_afxdp_prog *p, const uint8_t ip6[16],
                             const uint8_t mac[6], uint32_t flags);
/* Detach (only what we attached) and free; safe on a zeroed struct. */
void ipk_afxdp_prog_close(struct ipk_afxdp_prog *p);

#endif
