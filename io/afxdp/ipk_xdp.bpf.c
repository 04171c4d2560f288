/*
 * The XDP program of the afxdp backend: hands ipkit only the frames addressed to it
 * and passes everything else to the kernel, so the host keeps its own connectivity
 * on the same interface.
 *
 * Redirected to the AF_XDP socket of the receiving queue (ipk_xsks[rx_queue_index]):
 *   - ARP whose target protocol address is ipkit's IPv4 address (RFC 826: requests
 *     for us and replies to us; both carry our address as the target),
 *   - IPv4 whose destination is ipkit's address (a VLAN tag is not looked through),
 *   - with IPv6 on (IPK_XDP6_ON): IPv6 whose destination is one of ipkit's unicast
 *     addresses, i.e. its static address or any address ending in its interface
 *     identifier (the link-local and every SLAAC address: fe80::/64 and each prefix
 *     + the modified EUI-64 of its MAC, RFC 4291 App. A, RFC 4862 §5.3); and from
 *     the multicast Neighbor Discovery (ICMPv6 right after the fixed header) the NS
 *     and NA whose target is such an address (RFC 4861 §4.3/§4.4: an NS for us goes
 *     to our solicited-node group, an NA answering our DAD to all-nodes), plus
 *     Router Advertisements to all-nodes when IPK_XDP6_RA says ipkit takes them.
 *     XDP cannot hand one frame to both ipkit and the kernel: an RA goes to one of
 *     them, MLD queries and other multicast stay with the kernel.
 * Everything else, and everything while no address is set, gets XDP_PASS. Built with
 * clang -target bpf by meson and embedded in the library (io/afxdp/embed.py), so no
 * file has to be found at run time.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

#define IPK_XDP6_ON 1u /* ipkit speaks IPv6: match ip6 and iid */
#define IPK_XDP6_RA 2u /* Router Advertisements to ff02::1 go to ipkit */

/* Must match struct ipk_xdp_cfg_user in afxdp_prog.h. */
struct ipk_xdp_cfg {
	__u32 ip4_be;   /* ipkit's address in network order, 0 = none yet */
	__u8 mac[6];    /* ipkit's MAC (informational; not matched: ARP is broadcast) */
	__u16 pad;
	__u8 ip6[16];   /* ipkit's static IPv6 address, :: = none */
	__u8 iid[8];    /* interface identifier of its link-local and SLAAC addresses */
	__u32 flags6;   /* IPK_XDP6_* */
	__u32 pad2;
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

/* One of ipkit's unicast IPv6 addresses: the static one, or any address (not
 * multicast) ending in its interface identifier. */
static __always_inline int ip6_ours(const struct ipk_xdp_cfg *c, const __u8 *a)
{
	if (a[0] == 0xff)
		return 0;
	if (ld32(a + 8) == ld32(c->iid) && ld32(a + 12) == ld32(c->iid + 4))
		return 1;
	return ld32(a) == ld32(c->ip6) && ld32(a + 4) == ld32(c->ip6 + 4) &&
	       ld32(a + 8) == ld32(c->ip6 + 8) && ld32(a + 12) == ld32(c->ip6 + 12) &&
	       (ld32(c->ip6) | ld32(c->ip6 + 4) | ld32(c->ip6 + 8) | ld32(c->ip6 + 12)) != 0;
}

/* IPv6 at ip (the Ethernet payload): see the file comment. */
static __always_inline int for_us6(const __u8 *ip, const __u8 *end,
                                   const struct ipk_xdp_cfg *c)
{
	const __u8 *icmp = ip + 40;

	if (ip + 40 > end || (ip[0] >> 4) != 6)
		return 0;
	/* RFC 8200 §3: destination address at bytes 24..39 */
	if (ip[24] != 0xff)
		return ip6_ours(c, ip + 24);
	/* multicast: only Neighbor Discovery, ICMPv6 (58) right after the header */
	if (ip[6] != 58 || icmp + 8 > end)
		return 0;
	if (icmp[0] == 134) /* RA: to ipkit only when it asked for them */
		return (c->flags6 & IPK_XDP6_RA) != 0;
	if (icmp[0] != 135 && icmp[0] != 136)
		return 0;
	/* NS / NA: Target Address at bytes 8..23 of the message */
	if (icmp + 24 > end)
		return 0;
	return ip6_ours(c, icmp + 8);
}

static __always_inline int for_us(const __u8 *d, const __u8 *end,
                                  const struct ipk_xdp_cfg *c)
{
	__u32 ip4_be = c->ip4_be;
	__u16 type;

	if (d + 14 > end)
		return 0;
	type = (__u16)((d[12] << 8) | d[13]);
	if (type == ETH_P_IPV6)
		return (c->flags6 & IPK_XDP6_ON) != 0 && for_us6(d + 14, end, c);
	if (ip4_be == 0)
		return 0;
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

/* "xdp.frags" (BPF_F_XDP_HAS_FRAGS): the program reads only the first 78 bytes,
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

	if (!cfg || !for_us(d, end, cfg))
		return XDP_PASS;
	/* XDP_PASS when no socket is bound on this queue */
	return bpf_redirect_map(&ipk_xsks, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "GPL";
