/* Neighbor Discovery messages and options (RFC 4861 §4), RDNSS (RFC 8106), and the
 * MLDv2 report (RFC 3810 §5.2). */
#include "wire/wire.h"

const uint8_t ipk_ip6_all_mldv2_routers[16] = {0xff, 0x02, 0, 0, 0, 0, 0, 0,
                                               0, 0, 0, 0, 0, 0, 0, 0x16};

/* ------------------------------------------------------------ options */

static void nd_opts_clear(struct ipk_nd_opts *o)
{
	o->has_slla = o->has_tlla = o->has_mtu = o->has_redir = 0;
	o->mtu = 0;
	o->nprefix = o->nprefix_seen = 0;
	o->redir_off = o->redir_len = 0;
	o->nrdnss = 0;
	o->rdnss_lifetime = 0;
}

/* §4.6.2: p at the option's first byte, 32 bytes present. */
static void nd_opt_prefix(const uint8_t *p, struct ipk_nd_opts *o)
{
	struct ipk_nd_prefix *pf;

	if (o->nprefix_seen < 255)
		o->nprefix_seen++;
	if (o->nprefix >= IPK_ND_MAX_PREFIX)
		return;
	pf = &o->prefix[o->nprefix++];
	pf->plen = p[2];
	pf->flags = p[3];
	pf->valid = ipk_rd32(p + 4);
	pf->preferred = ipk_rd32(p + 8);
	__builtin_memcpy(pf->prefix, p + 16, 16);
}

/* RFC 8106 §5.1: lifetime, then (length - 1) / 2 addresses. */
static void nd_opt_rdnss(const uint8_t *p, uint32_t olen, struct ipk_nd_opts *o)
{
	uint32_t i, n = (olen - 8) / 16;

	o->rdnss_lifetime = ipk_rd32(p + 4);
	for (i = 0; i < n && o->nrdnss < IPK_ND_MAX_RDNSS; i++)
		__builtin_memcpy(o->rdnss[o->nrdnss++], p + 8 + 16 * i, 16);
}

/* One option of units 8-byte units at p + off; 0, or IPK_WIRE_EOPT for a known
 * option whose length is not its own. */
static int nd_opt_one(const uint8_t *p, uint32_t off, uint32_t units, struct ipk_nd_opts *o)
{
	const uint8_t *q = p + off;

	switch (q[0]) {
	case IPK_NDOPT_SLLA:
	case IPK_NDOPT_TLLA: /* RFC 2464 §6: Ethernet, one unit */
		if (units != 1)
			return IPK_WIRE_EOPT;
		if (q[0] == IPK_NDOPT_SLLA) {
			o->has_slla = 1;
			__builtin_memcpy(o->slla, q + 2, 6);
		} else {
			o->has_tlla = 1;
			__builtin_memcpy(o->tlla, q + 2, 6);
		}
		return 0;
	case IPK_NDOPT_PREFIX:
		if (units != 4)
			return IPK_WIRE_EOPT;
		nd_opt_prefix(q, o);
		return 0;
	case IPK_NDOPT_REDIRECTED: /* §4.6.3: 6 reserved bytes, then the IP packet */
		o->has_redir = 1;
		o->redir_off = (uint16_t)(off + 8);
		o->redir_len = (uint16_t)(units * 8 - 8);
		return 0;
	case IPK_NDOPT_MTU:
		if (units != 1)
			return IPK_WIRE_EOPT;
		o->has_mtu = 1;
		o->mtu = ipk_rd32(q + 4);
		return 0;
	case IPK_NDOPT_RDNSS:
		if (units < 3 || !(units & 1))
			return IPK_WIRE_EOPT;
		nd_opt_rdnss(q, units * 8, o);
		return 0;
	default: /* §4.6: unknown options are silently ignored */
		return 0;
	}
}

int ipk_nd_opts_parse(const uint8_t *p, uint32_t len, struct ipk_nd_opts *o)
{
	uint32_t off = 0, units;
	int rc;

	nd_opts_clear(o);
	while (off < len) {
		if (len - off < 2)
			return IPK_WIRE_EOPT;
		units = p[off + 1];
		/* §4.6: "Nodes MUST silently discard an ND packet that contains an option
		 * with length zero" (and a walk over it would never end). */
		if (units == 0 || units * 8 > len - off)
			return IPK_WIRE_EOPT;
		rc = nd_opt_one(p, off, units, o);
		if (rc < 0)
			return rc;
		off += units * 8;
	}
	return 0;
}

/* ------------------------------------------------------------ messages */

/* Fixed part of each ND message (ICMPv6 header included), 0 for other types. */
static uint32_t nd_fixed_len(uint8_t type)
{
	switch (type) {
	case IPK_ICMP6_ND_RS: return 8;   /* §4.1 */
	case IPK_ICMP6_ND_RA: return 16;  /* §4.2 */
	case IPK_ICMP6_ND_NS: return 24;  /* §4.3 */
	case IPK_ICMP6_ND_NA: return 24;  /* §4.4 */
	case IPK_ICMP6_ND_REDIRECT: return 40; /* §4.5 */
	default: return 0;
	}
}

static void nd_fields(const uint8_t *p, struct ipk_nd_msg *m)
{
	m->flags = 0;
	m->cur_hlim = 0;
	m->router_lifetime = 0;
	m->reachable = m->retrans = 0;
	__builtin_memset(m->target, 0, 16);
	__builtin_memset(m->dest, 0, 16);
	if (m->type == IPK_ICMP6_ND_RA) {
		m->cur_hlim = p[4];
		m->flags = p[5]; /* M, O, and bits later RFCs define (RFC 4191 §2.2) */
		m->router_lifetime = ipk_rd16(p + 6);
		m->reachable = ipk_rd32(p + 8);
		m->retrans = ipk_rd32(p + 12);
	} else if (m->type == IPK_ICMP6_ND_NA) {
		m->flags = p[4] & (IPK_ND_NA_ROUTER | IPK_ND_NA_SOLICITED | IPK_ND_NA_OVERRIDE);
	}
	if (m->type >= IPK_ICMP6_ND_NS)
		__builtin_memcpy(m->target, p + 8, 16);
	if (m->type == IPK_ICMP6_ND_REDIRECT)
		__builtin_memcpy(m->dest, p + 24, 16);
}

int ipk_nd_parse(const uint8_t *p, uint32_t len, struct ipk_nd_msg *m)
{
	uint32_t fixed;
	int rc;

	if (len < IPK_ICMP6_HLEN)
		return IPK_WIRE_ESHORT;
	fixed = nd_fixed_len(p[0]);
	if (fixed == 0)
		return IPK_WIRE_EVERSION;
	if (len < fixed)
		return IPK_WIRE_ESHORT;
	m->type = p[0];
	m->code = p[1];
	m->csum = ipk_rd16(p + 2);
	m->len = len;
	m->opt_off = (uint16_t)fixed;
	nd_fields(p, m);
	rc = ipk_nd_opts_parse(p + fixed, len - fixed, &m->opts);
	return rc < 0 ? rc : (int)fixed;
}

/* §6.1.1, §7.1.1: an unspecified source may not name a link-layer address; §7.1.1:
 * and (DAD) it goes to a solicited-node group. */
static enum ipk_nd_bad nd_check_unspec(const struct ipk_ip6_hdr *ip, const struct ipk_nd_msg *m)
{
	if (!ipk_ip6_is_unspecified(ip->src))
		return IPK_ND_OK;
	if (m->opts.has_slla)
		return IPK_ND_BAD_SRC;
	if (m->type == IPK_ICMP6_ND_NS && !ipk_ip6_is_solicited_node(ip->dst))
		return IPK_ND_BAD_SRC;
	return IPK_ND_OK;
}

/* §8.1: the destination is not multicast, and the target is a router's link-local
 * address or the destination itself (which is then on-link). */
static enum ipk_nd_bad nd_check_redirect(const struct ipk_nd_msg *m)
{
	if (ipk_ip6_is_multicast(m->dest))
		return IPK_ND_BAD_TARGET;
	if (!ipk_ip6_is_linklocal(m->target) && __builtin_memcmp(m->target, m->dest, 16) != 0)
		return IPK_ND_BAD_TARGET;
	return IPK_ND_OK;
}

/* A link-layer address a neighbour entry may hold: unicast, not all zero. */
static int nd_lla_ok(const uint8_t mac[6])
{
	return !(mac[0] & 1) && (mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5]) != 0;
}

enum ipk_nd_bad ipk_nd_check(const struct ipk_ip6_hdr *ip, const struct ipk_nd_msg *m)
{
	/* §6.1, §7.1, §8.1: hop limit 255 proves the sender is on the link. */
	if (ip->hlim != IPK_ND_HOP_LIMIT)
		return IPK_ND_BAD_HLIM;
	if (m->code != 0)
		return IPK_ND_BAD_CODE;
	if ((m->opts.has_slla && !nd_lla_ok(m->opts.slla)) ||
	    (m->opts.has_tlla && !nd_lla_ok(m->opts.tlla)))
		return IPK_ND_BAD_LLA;
	switch (m->type) {
	case IPK_ICMP6_ND_RA: /* §6.1.2: from a router's link-local address */
	case IPK_ICMP6_ND_REDIRECT: /* §8.1 */
		if (!ipk_ip6_is_linklocal(ip->src))
			return IPK_ND_BAD_SRC;
		if (m->type == IPK_ICMP6_ND_REDIRECT)
			return nd_check_redirect(m);
		return IPK_ND_OK;
	case IPK_ICMP6_ND_NS: /* §7.1.1 */
		if (ipk_ip6_is_multicast(m->target))
			return IPK_ND_BAD_TARGET;
		return nd_check_unspec(ip, m);
	case IPK_ICMP6_ND_NA: /* §7.1.2 */
		if (ipk_ip6_is_multicast(m->target))
			return IPK_ND_BAD_TARGET;
		if (ipk_ip6_is_multicast(ip->dst) && (m->flags & IPK_ND_NA_SOLICITED))
			return IPK_ND_BAD_SOLICITED;
		return IPK_ND_OK;
	default: /* RS, §6.1.1 */
		return nd_check_unspec(ip, m);
	}
}

uint32_t ipk_nd_emit(uint8_t *p, uint32_t cap, const struct ipk_nd_msg *m)
{
	uint32_t fixed = nd_fixed_len(m->type);

	if (fixed == 0 || cap < fixed)
		return 0;
	__builtin_memset(p, 0, fixed);
	p[0] = m->type;
	p[1] = m->code;
	ipk_wr16(p + 2, m->csum);
	if (m->type == IPK_ICMP6_ND_RA) {
		p[4] = m->cur_hlim;
		p[5] = m->flags;
		ipk_wr16(p + 6, m->router_lifetime);
		ipk_wr32(p + 8, m->reachable);
		ipk_wr32(p + 12, m->retrans);
	} else if (m->type == IPK_ICMP6_ND_NA) {
		p[4] = m->flags & (IPK_ND_NA_ROUTER | IPK_ND_NA_SOLICITED | IPK_ND_NA_OVERRIDE);
	}
	if (m->type >= IPK_ICMP6_ND_NS)
		__builtin_memcpy(p + 8, m->target, 16);
	if (m->type == IPK_ICMP6_ND_REDIRECT)
		__builtin_memcpy(p + 24, m->dest, 16);
	return fixed;
}

uint32_t ipk_nd_opt_lla_emit(uint8_t *p, uint32_t cap, uint8_t type, const uint8_t mac[6])
{
	if (cap < 8)
		return 0;
	p[0] = type;
	p[1] = 1;
	__builtin_memcpy(p + 2, mac, 6);
	return 8;
}

uint32_t ipk_nd_opt_prefix_emit(uint8_t *p, uint32_t cap, const struct ipk_nd_prefix *pf)
{
	if (cap < 32)
		return 0;
	p[0] = IPK_NDOPT_PREFIX;
	p[1] = 4;
	p[2] = pf->plen;
	p[3] = pf->flags & (IPK_ND_PFX_ONLINK | IPK_ND_PFX_AUTO);
	ipk_wr32(p + 4, pf->valid);
	ipk_wr32(p + 8, pf->preferred);
	ipk_wr32(p + 12, 0);
	__builtin_memcpy(p + 16, pf->prefix, 16);
	return 32;
}

uint32_t ipk_nd_opt_mtu_emit(uint8_t *p, uint32_t cap, uint32_t mtu)
{
	if (cap < 8)
		return 0;
	p[0] = IPK_NDOPT_MTU;
	p[1] = 1;
	ipk_wr16(p + 2, 0);
	ipk_wr32(p + 4, mtu);
	return 8;
}

/* --------------------------------------------------------------- MLDv2 */

uint32_t ipk_mld2_report_emit(uint8_t *p, uint32_t cap, uint8_t rec_type,
                              const uint8_t (*groups)[16], uint32_t n, const uint8_t src[16])
{
	uint32_t i, len;

	/* §5.2: 8-byte header, 20 bytes per record without sources */
	if (n > 0xffffu || cap < 8 || (cap - 8) / 20 < n)
		return 0;
	len = 8 + 20 * n;
	p[0] = IPK_ICMP6_MLD2_REPORT;
	p[1] = 0;
	ipk_wr16(p + 4, 0);
	ipk_wr16(p + 6, (uint16_t)n);
	for (i = 0; i < n; i++) {
		uint8_t *r = p + 8 + 20 * i;
		r[0] = rec_type;
		r[1] = 0; /* aux data length */
		ipk_wr16(r + 2, 0); /* number of sources */
		__builtin_memcpy(r + 4, groups[i], 16);
	}
	ipk_icmp6_csum_fill(p, len, src, ipk_ip6_all_mldv2_routers);
	return len;
}

/* --------------------------------------------------------------- MLDv1 */

uint32_t ipk_mld1_report_emit(uint8_t *p, uint32_t cap, const uint8_t group[16],
                              const uint8_t src[16])
{
	if (cap < IPK_MLD1_LEN)
		return 0;
	p[0] = IPK_ICMP6_MLD1_REPORT;
	p[1] = 0;
	ipk_wr16(p + 4, 0); /* Maximum Response Delay: 0 in a report */
	ipk_wr16(p + 6, 0);
	__builtin_memcpy(p + 8, group, 16);
	ipk_icmp6_csum_fill(p, IPK_MLD1_LEN, src, group);
	return IPK_MLD1_LEN;
}

int ipk_mld2_rec_parse(const uint8_t *p, uint32_t len, struct ipk_mld2_rec *r)
{
	uint32_t rlen;

	if (len < 20)
		return IPK_WIRE_ESHORT;
	r->type = p[0];
	r->nsrc = ipk_rd16(p + 2);
	/* §5.2.6: aux data length counts 32-bit words */
	rlen = 20 + 16u * r->nsrc + 4u * p[1];
	if (rlen > len)
		return IPK_WIRE_ESHORT;
	__builtin_memcpy(r->group, p + 4, 16);
	return (int)rlen;
}
