/*
 * MLDv2 for a host (RFC 3810): ipkit listens to the solicited-node group of every
 * address it holds or checks (RFC 4861 §7.2.1, RFC 4862 §5.4.2: joined before DAD)
 * and to ff02::1, which is never reported (§6). A snooping switch forwards a group
 * only to ports that reported it, so:
 *   - joining a group sends an unsolicited report (CHANGE_TO_EXCLUDE, no sources:
 *     ipk_nd_send_mld, at DAD start);
 *   - a query from the link's querier is answered with a current-state report
 *     (MODE_IS_EXCLUDE, no sources) of the groups it asks about, after a random
 *     delay below its Maximum Response Delay (§6.2), so the switch keeps
 *     delivering NS for our addresses after its membership timeout.
 * One pending response per context: a General Query asks for every group, a
 * Multicast-Address-Specific (or -and-Source-Specific) one for its group; a new
 * query only moves the pending time earlier (§6.2's rules 1-3, merged: a report
 * never goes later than a querier asked). Queries not meeting §6.2's checks
 * (link-local source, hop limit 1, router alert) are dropped and counted
 * (mld_invalid).
 *
 * MLDv1 compatibility (§8): a 24-byte query (§8.1) comes from an MLDv1 querier
 * (RFC 2710), which does not understand MLDv2 reports. Hearing one puts the context
 * in MLDv1 compatibility mode for the Older Version Querier Present Timeout (§9.12:
 * Robustness Variable x Query Interval + Query Response Interval, 2 x 125 s + 10 s
 * with the defaults an MLDv1 query cannot change), each further one restarting it
 * (§8.2.1). In that mode every report is MLDv1 (RFC 2710 §3): one 24-byte report
 * per group, sent to the group itself; queries of either version are answered so.
 * A change of mode cancels the pending response (§8.2.1). MLDv1 report suppression
 * (RFC 2710 §4, hearing another listener's report) is not done: an extra report
 * costs the link 24 bytes and cannot make a router forget a group.
 */
#include "internal.h"
#include "wire/wire.h"

#define MLD_QUERY_LEN 28u /* §5.1: the MLDv2 query without sources */
/* §9.12 with §9.1's Robustness Variable 2, §9.2's Query Interval 125 s and §9.3's
 * Query Response Interval 10 s: an MLDv1 query carries none of them */
#define MLD_V1_PRESENT_NS (2ull * 125u * 1000000000u + 10ull * 1000000000u)

/* Is the context in MLDv1 compatibility mode at c->now (§8.2.1)? */
static int mld_v1(const struct ipk_ctx *c)
{
	return c->ip6.mld_v1_until != 0 && c->now < c->ip6.mld_v1_until;
}

/* §5.1.3: the Maximum Response Delay in ns from the Maximum Response Code: the
 * code in ms below 32768, else a floating-point value (3-bit exponent, 12-bit
 * mantissa). */
static uint64_t mld_max_delay_ns(uint16_t code)
{
	uint32_t ms = code;

	if (code >= 0x8000u)
		ms = ((uint32_t)(code & 0x0fffu) | 0x1000u) << (((code >> 12) & 7u) + 3u);
	return (uint64_t)ms * 1000000u;
}

/* Does address slot a make us a member of its solicited-node group? Every address
 * we hold or check (§7.2.1): not a free or duplicate one. */
static int mld_member(const struct ipk_ip6_laddr *a)
{
	return a->state != IPK_A6_FREE && a->state != IPK_A6_DUPLICATE;
}

/* The solicited-node groups of the addresses in `want` (a bit per slot), each once
 * (a link-local and a SLAAC address with the same identifier share one). */
static uint32_t mld_groups(const struct ipk_ctx *c, uint32_t want,
                           uint8_t (*g)[16])
{
	uint32_t n = 0, i, k;

	for (i = 0; i < IPK_IP6_ADDRS; i++) {
		if (!(want & (1u << i)) || !mld_member(&c->ip6.addr[i]))
			continue;
		ipk_ip6_solicited_node(g[n], c->ip6.addr[i].a);
		for (k = 0; k < n && !ipk_ip6_eq(g[k], g[n]); k++)
			;
		if (k == n)
			n++;
	}
	return n;
}

/* MLDv1 mode: one report per group, to the group, from our link-local (or ::
 * while none is up, RFC 3590 §4), hop limit 1 with a router alert (RFC 2710 §3). */
static void mld1_reports(struct ipk_ctx *c, const uint8_t (*g)[16], uint32_t n)
{
	static const uint8_t any[16] = {0};
	uint8_t src[16], *p;
	uint32_t i, len;
	void *out;

	for (i = 0; i < n; i++) {
		if (!ipk_ip6_src_select(c, g[i], src))
			ipk_memcpy(src, any, 16);
		out = ipk_ip6_alloc(c, 8u + IPK_MLD1_LEN, 1);
		if (!out)
			return; /* the pool is dry: the next query asks again */
		p = ipk_pkt_data(c, out) + ipk_l4_off6(c);
		ipk_ip6_hbh_ra_emit(p, 8, IPK_IPPROTO_ICMP6);
		len = ipk_mld1_report_emit(p + 8, IPK_MLD1_LEN, g[i], src);
		ipk_pkt_set_len(c, out, ipk_l4_off6(c) + 8 + len);
		c->cnt.mld1_tx++;
		ipk_ip6_output(c, out, src, g[i], IPK_IPPROTO_HOPOPTS, 8 + len, 1);
	}
}

/* An MLDv2 report of records rec_type for n groups to ff02::16, from our
 * link-local (or :: while none is up, §5.2.13), hop limit 1 with a router alert
 * (§5); in MLDv1 compatibility mode MLDv1 reports of the same groups instead
 * (§8.2.1: a join and a current-state record are both a report there). */
static void mld_report(struct ipk_ctx *c, uint8_t rec_type, const uint8_t (*g)[16], uint32_t n)
{
	static const uint8_t any[16] = {0};
	uint32_t cap = 8u + 8u + 20u * n, len;
	uint8_t src[16], *p;
	void *out;

	if (n == 0)
		return;
	if (mld_v1(c)) {
		mld1_reports(c, g, n);
		return;
	}
	if (!ipk_ip6_src_select(c, ipk_ip6_all_mldv2_routers, src))
		ipk_memcpy(src, any, 16);
	out = ipk_ip6_alloc(c, cap, 1);
	if (!out)
		return; /* the pool is dry: the next query asks again */
	p = ipk_pkt_data(c, out) + ipk_l4_off6(c);
	ipk_ip6_hbh_ra_emit(p, 8, IPK_IPPROTO_ICMP6);
	len = ipk_mld2_report_emit(p + 8, cap - 8, rec_type, g, n, src);
	ipk_pkt_set_len(c, out, ipk_l4_off6(c) + 8 + len);
	c->cnt.mld_tx++;
	ipk_ip6_output(c, out, src, ipk_ip6_all_mldv2_routers, IPK_IPPROTO_HOPOPTS, 8 + len, 1);
}

/* RFC 3810 §5.2, RFC 4862 §5.4.2: the unsolicited report joining addr's
 * solicited-node group, so snooping switches deliver the DAD NS. */
void ipk_nd_send_mld(struct ipk_ctx *c, const uint8_t addr[16])
{
	uint8_t g[1][16];

	ipk_ip6_solicited_node(g[0], addr);
	mld_report(c, IPK_MLD2_CHANGE_TO_EXCLUDE, (const uint8_t (*)[16])g, 1);
}

/* §6.2's checks on a query (the ICMPv6 checksum was checked), RFC 2710 §3's for an
 * MLDv1 one (the same three): -1 when it is one to answer, else the drop reason. */
static int mld_query_check(const struct ipk_rx6 *rx, const uint8_t *m)
{
	uint32_t nsrc;

	if (rx->ip.hlim != 1 || !ipk_ip6_is_linklocal(rx->ip.src) || !rx->ra || m[1] != 0)
		return IPK_DROP_MLD_INVALID;
	if (rx->l4_len == IPK_MLD1_LEN) /* §8.1: MLDv1 */
		return ipk_ip6_is_unspecified(m + 8) || ipk_ip6_is_multicast(m + 8) ?
		       -1 : IPK_DROP_MLD_INVALID;
	if (rx->l4_len < MLD_QUERY_LEN) /* §8.1: 25-27 bytes is neither version */
		return IPK_DROP_MLD_INVALID;
	nsrc = ipk_rd16(m + 26);
	if (MLD_QUERY_LEN + 16u * nsrc > rx->l4_len)
		return IPK_DROP_MLD_INVALID;
	/* §5.1.5: a specific query names a group; the unspecified address is general */
	if (!ipk_ip6_is_unspecified(m + 8) && !ipk_ip6_is_multicast(m + 8))
		return IPK_DROP_MLD_INVALID;
	return -1;
}

/* §8.2.1: an MLDv1 query starts (or restarts) the Older Version Querier Present
 * timer; entering the mode cancels the pending MLDv2 response. */
static void mld_v1_heard(struct ipk_ctx *c)
{
	if (!mld_v1(c)) {
		c->ip6.mld_want = 0;
		c->ip6.mld_at = IPK_NO_DEADLINE;
	}
	c->cnt.mld1_queries++;
	c->ip6.mld_v1_until = c->now + MLD_V1_PRESENT_NS;
	ipk_ip6_arm(c, c->ip6.mld_v1_until);
}

int ipk_mld_input(struct ipk_ctx *c, const struct ipk_rx6 *rx, const uint8_t *m)
{
	uint64_t max, at;
	uint32_t want = 0, i;
	uint8_t g[16];
	int why;

	if (m[0] != IPK_ICMP6_MLD_QUERY)
		return -1; /* a report from another listener: hosts ignore them (§6) */
	why = mld_query_check(rx, m);
	if (why >= 0)
		return why;
	if (rx->l4_len == IPK_MLD1_LEN) {
		mld_v1_heard(c);
		max = (uint64_t)ipk_rd16(m + 4) * 1000000u; /* RFC 2710 §3.4: in ms */
	} else {
		max = mld_max_delay_ns(ipk_rd16(m + 4));
	}
	if (ipk_ip6_is_unspecified(m + 8)) {
		want = (1u << IPK_IP6_ADDRS) - 1u;
	} else {
		for (i = 0; i < IPK_IP6_ADDRS; i++) {
			if (!mld_member(&c->ip6.addr[i]))
				continue;
			ipk_ip6_solicited_node(g, c->ip6.addr[i].a);
			if (ipk_ip6_eq(g, m + 8))
				want |= 1u << i;
		}
		if (!want)
			return -1; /* a group we are not in: nothing to say (§6.2) */
	}
	c->cnt.mld_queries++;
	at = c->now + (max ? IPK_OPS(c)->random(IPK_OPQ(c)) % max : 0u);
	c->ip6.mld_want |= want;
	if (at < c->ip6.mld_at)
		c->ip6.mld_at = at;
	ipk_ip6_arm(c, c->ip6.mld_at);
	return -1;
}

uint64_t ipk_mld_timer(struct ipk_ctx *c, uint64_t now)
{
	uint8_t g[IPK_IP6_ADDRS][16];
	uint32_t n;

	if (c->ip6.mld_v1_until != 0 && now >= c->ip6.mld_v1_until) {
		/* §8.2.1: the MLDv1 querier is gone: back to MLDv2, nothing pending */
		c->ip6.mld_v1_until = 0;
		c->ip6.mld_want = 0;
		c->ip6.mld_at = IPK_NO_DEADLINE;
	}
	if (c->ip6.mld_at > now)
		return c->ip6.mld_v1_until ? IPK_MIN(c->ip6.mld_at, c->ip6.mld_v1_until)
		                           : c->ip6.mld_at;
	n = mld_groups(c, c->ip6.mld_want, g);
	c->ip6.mld_want = 0;
	c->ip6.mld_at = IPK_NO_DEADLINE;
	mld_report(c, IPK_MLD2_MODE_IS_EXCLUDE, (const uint8_t (*)[16])g, n);
	return c->ip6.mld_v1_until ? c->ip6.mld_v1_until : IPK_NO_DEADLINE;
}
