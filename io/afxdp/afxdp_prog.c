/*
 * Loading and attaching the afxdp XDP program (source: ipk_xdp.bpf.c).
 */
#include "afxdp_real.h"

#ifdef IPK_AFXDP_REAL

#include "afxdp_prog.h"
#include "io_internal.h"
#include "ipk_xdp_obj.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/if_link.h>
#include <string.h>

static int prog_err(char *err, size_t el, int e, const char *dev, const char *what)
{
	if (e == EPERM || e == EACCES)
		return ipk_io_err(err, el, e, "afxdp:%s: %s: permission denied; needs CAP_BPF and "
		                  "CAP_NET_ADMIN (e.g. run as root)", dev, what);
	return ipk_io_err(err, el, e, "afxdp:%s: %s: %s", dev, what, strerror(e));
}

static int prog_load(struct ipk_afxdp_prog *p, const char *dev, char *err, size_t el)
{
	struct bpf_program *prog;
	int rc;

	p->obj = bpf_object__open_mem(ipk_xdp_obj, sizeof ipk_xdp_obj, NULL);
	if (!p->obj) {
		rc = errno ? errno : EINVAL;
		return ipk_io_err(err, el, rc, "afxdp:%s: the embedded XDP object does not open: %s",
		                  dev, strerror(rc));
	}
	rc = bpf_object__load(p->obj);
	if (rc < 0)
		return prog_err(err, el, -rc, dev, "loading the XDP program");
	prog = bpf_object__find_program_by_name(p->obj, "ipk_xdp_prog");
	p->prog_fd = prog ? bpf_program__fd(prog) : -1;
	p->xsks_fd = bpf_object__find_map_fd_by_name(p->obj, "ipk_xsks");
	p->cfg_fd = bpf_object__find_map_fd_by_name(p->obj, "ipk_cfg");
	if (p->prog_fd < 0 || p->xsks_fd < 0 || p->cfg_fd < 0)
		return ipk_io_err(err, el, ENOENT, "afxdp:%s: the embedded XDP object lacks its "
		                  "program or maps", dev);
	return 0;
}

static int prog_try(struct ipk_afxdp_prog *p, int ifindex, uint32_t mode)
{
	int rc = bpf_xdp_attach(ifindex, p->prog_fd, XDP_FLAGS_UPDATE_IF_NOEXIST | mode, NULL);

	if (rc == 0) {
		p->ifindex = ifindex;
		p->xdp_flags = mode;
	}
	return rc;
}

int ipk_afxdp_prog_attach(struct ipk_afxdp_prog *p, int ifindex, int mode, const char *dev,
                          char *err, size_t el)
{
	int rc;

	memset(p, 0, sizeof *p);
	p->prog_fd = p->xsks_fd = p->cfg_fd = -1;
	if ((rc = prog_load(p, dev, err, el)) < 0)
		return rc;
	if (mode)
		rc = prog_try(p, ifindex, (uint32_t)mode);
	else if ((rc = prog_try(p, ifindex, XDP_FLAGS_DRV_MODE)) == -EOPNOTSUPP ||
	         rc == -EINVAL)
		rc = prog_try(p, ifindex, XDP_FLAGS_SKB_MODE);
	if (rc == -EBUSY || rc == -EEXIST)
		return ipk_io_err(err, el, EBUSY, "afxdp:%s: the interface already has an XDP "
		                  "program (remove it: ip link set dev %s xdp off)", dev, dev);
	if (rc == -EOPNOTSUPP || (rc == -EINVAL && mode == XDP_FLAGS_DRV_MODE))
		return ipk_io_err(err, el, EOPNOTSUPP, "afxdp:%s: XDP mode %s is not supported by "
		                  "this driver (try mode=skb)", dev,
		                  mode == XDP_FLAGS_DRV_MODE ? "drv" : "skb");
	if (rc < 0)
		return prog_err(err, el, -rc, dev, "attaching the XDP program");
	return 0;
}

int ipk_afxdp_prog_add_socket(struct ipk_afxdp_prog *p, uint32_t queue, int xsk_fd)
{
	return bpf_map_update_elem(p->xsks_fd, &queue, &xsk_fd, BPF_ANY) < 0 ? -errno : 0;
}

/* The modified EUI-64 interface identifier of a MAC (RFC 4291 App. A): the
 * universal/local bit flipped, ff:fe in the middle; the core's link-local and SLAAC
 * addresses end in it (docs/ipv6-core.md). */
static void prog_iid(uint8_t iid[8], const uint8_t mac[6])
{
	iid[0] = (uint8_t)(mac[0] ^ 2u);
	iid[1] = mac[1];
	iid[2] = mac[2];
	iid[3] = 0xff;
	iid[4] = 0xfe;
	iid[5] = mac[3];
	iid[6] = mac[4];
	iid[7] = mac[5];
}

static int prog_write(struct ipk_afxdp_prog *p)
{
	uint32_t zero = 0;

	if (p->cfg.flags6 & IPK_XDP6_ON)
		prog_iid(p->cfg.iid, p->cfg.mac);
	return bpf_map_update_elem(p->cfg_fd, &zero, &p->cfg, BPF_ANY) < 0 ? -errno : 0;
}

int ipk_afxdp_prog_set_addr(struct ipk_afxdp_prog *p, uint32_t ip4_be, const uint8_t mac[6])
{
	if (p->cfg_fd < 0)
		return -ENOTSUP; /* prog=0: libxdp's program takes everything anyway */
	p->cfg.ip4_be = ip4_be;
	if (mac)
		memcpy(p->cfg.mac, mac, 6);
	return prog_write(p);
}

int ipk_afxdp_prog_set_addr6(struct ipk_afxdp_prog *p, const uint8_t ip6[16],
                             const uint8_t mac[6], uint32_t flags)
{
	static const uint8_t zero_mac[6];

	if (p->cfg_fd < 0)
		return -ENOTSUP;
	if (mac)
		memcpy(p->cfg.mac, mac, 6);
	/* without a MAC there is no identifier: an all-zero one would match nothing
	 * real, but refuse rather than steer by a meaningless value */
	if (memcmp(p->cfg.mac, zero_mac, 6) == 0)
		return -EINVAL;
	if (ip6)
		memcpy(p->cfg.ip6, ip6, 16);
	else
		memset(p->cfg.ip6, 0, 16);
	p->cfg.flags6 = IPK_XDP6_ON | (flags & IPK_XDP6_RA);
	return prog_write(p);
}

void ipk_afxdp_prog_close(struct ipk_afxdp_prog *p)
{
	if (p->ifindex)
		bpf_xdp_detach(p->ifindex, p->xdp_flags, NULL);
	if (p->obj)
		bpf_object__close(p->obj);
	memset(p, 0, sizeof *p);
	p->prog_fd = p->xsks_fd = p->cfg_fd = -1;
}

#else
typedef int ipk_afxdp_prog_unused; /* ISO C: a translation unit declares something */
#endif
