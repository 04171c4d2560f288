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

struct ipk_afxdp_prog {
	struct bpf_object *obj;
	int ifindex;          /* 0 until attached by us */
	uint32_t xdp_flags;   /* mode actually used */
	int prog_fd, xsks_fd, cfg_fd;
};

/* mode: 0 tries native (drv) then generic (skb); or XDP_FLAGS_DRV_MODE / _SKB_MODE.
 * 0 or a negative errno with a one-line message. */
int ipk_afxdp_prog_attach(struct ipk_afxdp_prog *p, int ifindex, int mode, const char *dev,
                          char *err, size_t errlen);
int ipk_afxdp_prog_add_socket(struct ipk_afxdp_prog *p, uint32_t queue, int xsk_fd);
int ipk_afxdp_prog_set_addr(struct ipk_afxdp_prog *p, uint32_t ip4_be, const uint8_t mac[6]);
/* Detach (only what we attached) and free; safe on a zeroed struct. */
void ipk_afxdp_prog_close(struct ipk_afxdp_prog *p);

#endif
