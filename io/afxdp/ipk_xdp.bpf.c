/*
 * The XDP program of the afxdp backend: hands ipkit only the frames addressed to it
 * and passes everything else to the kernel, so the host keeps its own connectivity
 * on the same interface.
 *
 * Redirected to the AF_XDP socket of the receiving queue (ipk_xsks[rx_queue_index]):
 *   - ARP whose target protocol address is ipkit's IPv4 address (RFC 826: requests
 *     for us and replies to us; both carry our address as the target),
 *   - IPv4 whose destination is ipkit's address (a VLAN tag is not looked through).
 * Everything else, and everything while no address is set (ipk_cfg[0].ip4_be == 0),
 * gets XDP_PASS. Built with clang -target bpf by meson and embedded in the library
 * (io/afxdp/embed.py), so no file has to be found at run time.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

struct ipk_xdp_cfg {
	__u32 ip4_be;   /* ipkit's address in network order, 0 = none yet */
	__u8 mac[6];    /* ipkit's MAC (informational; not matched: ARP is broadcast) */
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} ipk_xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ipk_xdp_cfg);
} ipk_cfg SEC(".maps");

/* Read a 32-bit big-endian field at p as the same bytes in memory (compared with a
 * network-order value, so no byte swap). */
static __always_inline __u32 ld32(const __u8 *p)
{
	__u32 v;
	__builtin_memcpy(&v, p, 4);
	return v;
}

static __always_inline int for_us(const __u8 *d, const __u8 *end, __u32 ip4_be)
{
	__u16 type;

	if (d + 14 > end)
		return 0;
	type = (__u16)((d[12] << 8) | d[13]);
	if (type == ETH_P_ARP) {
		/* RFC 826 for Ethernet/IPv4: target protocol address at bytes 24..27 */
		if (d + 14 + 28 > end)
			return 0;
		return ld32(d + 14 + 24) == ip4_be;
	}
	if (type == ETH_P_IP) {
		/* RFC 791: destination address at bytes 16..19 of the header */
		if (d + 14 + 20 > end)
			return 0;
		return ld32(d + 14 + 16) == ip4_be;
	}
	return 0;
}

/* "xdp.frags" (BPF_F_XDP_HAS_FRAGS): the program reads only the first 42 bytes,
 * which sit in the first buffer, so it is safe on multi-buffer frames; veth refuses
 * native XDP without it once the peer's MTU exceeds one page's frame (about 3.5 KiB),
 * and frame=4096 runs at MTU 3822. Without sg=1 (XDP_USE_SG) the socket gets each
 * frame copied whole into one UMEM frame; with it, spread over several. */
SEC("xdp.frags")
int ipk_xdp_prog(struct xdp_md *ctx)
{
	const __u8 *d = (const __u8 *)(long)ctx->data;
	const __u8 *end = (const __u8 *)(long)ctx->data_end;
	__u32 zero = 0;
	struct ipk_xdp_cfg *cfg = bpf_map_lookup_elem(&ipk_cfg, &zero);

	if (!cfg || cfg->ip4_be == 0 || !for_us(d, end, cfg->ip4_be))
		return XDP_PASS;
	/* XDP_PASS when no socket is bound on this queue */
	return bpf_redirect_map(&ipk_xsks, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "GPL";
