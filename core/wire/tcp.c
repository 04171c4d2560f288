/* TCP header (RFC 9293 §3.1) and its options: MSS (RFC 9293 §3.2), window scale and
 * timestamps (RFC 7323), SACK-permitted and SACK (RFC 2018). */
#include "wire/wire.h"

#define TCPOPT_MAX IPK_TCP_MAX_OPT

int ipk_tcp_parse(const uint8_t *p, uint32_t len, struct ipk_tcp_hdr *h)
{
	uint32_t doff;

	if (len < IPK_TCP_HLEN)
		return IPK_WIRE_ESHORT;
	doff = (uint32_t)(p[12] >> 4) * 4;
	if (doff < IPK_TCP_HLEN)
		return IPK_WIRE_ELEN;
	if (doff > len)
		return IPK_WIRE_ESHORT;
	ipk_tcp_hdr_fill(p, doff, h);
	return (int)doff;
}

/* Also returns 0 when h->doff is not a multiple of 4 in 20..60: such a header cannot
 * be expressed on the wire. */
uint32_t ipk_tcp_emit(uint8_t *p, uint32_t cap, const struct ipk_tcp_hdr *h)
{
	if (cap < IPK_TCP_HLEN)
		return 0;
	if (h->doff < IPK_TCP_HLEN || h->doff > IPK_TCP_HLEN + TCPOPT_MAX || (h->doff & 3))
		return 0;
	ipk_tcp_hdr_put(p, h);
	return IPK_TCP_HLEN;
}

/* ------------------------------------------------------------- options in */

/* One option of kind k whose total length l (kind and length bytes included) lies
 * within the buffer; v points at its value. */
static int opt_take(struct ipk_tcp_opts *o, uint8_t k, uint32_t l, const uint8_t *v)
{
	uint32_t i, n;

	switch (k) {
	case IPK_TCPOPT_MSS:
		if (l != 4)
			return IPK_WIRE_EOPT;
		o->has_mss = 1;
		o->mss = ipk_rd16(v);
		return 0;
	case IPK_TCPOPT_WSCALE:
		if (l != 3)
			return IPK_WIRE_EOPT;
		o->has_ws = 1;
		o->ws = v[0];
		return 0;
	case IPK_TCPOPT_SACK_PERM:
		if (l != 2)
			return IPK_WIRE_EOPT;
		o->has_sack_perm = 1;
		return 0;
	case IPK_TCPOPT_TS:
		if (l != 10)
			return IPK_WIRE_EOPT;
		o->has_ts = 1;
		o->tsval = ipk_rd32(v);
		o->tsecr = ipk_rd32(v + 4);
		return 0;
	case IPK_TCPOPT_SACK:
		/* RFC 2018 §3: 2 + 8n bytes; 40 bytes of option space allow at most 4. */
		n = (l - 2) / 8;
		if (l < 10 || (l - 2) % 8 != 0 || n > IPK_TCP_MAX_SACK)
			return IPK_WIRE_EOPT;
		for (i = 0; i < n; i++) {
			o->sack[i][0] = ipk_rd32(v + 8 * i);
			o->sack[i][1] = ipk_rd32(v + 8 * i + 4);
		}
		o->nsack = (uint8_t)n;
		return 0;
	default:
		return 0; /* RFC 9293 §3.1: unknown options are skipped by their length */
	}
}

int ipk_tcp_opts_parse(const uint8_t *p, uint32_t len, struct ipk_tcp_opts *o)
{
	uint32_t i = 0, l;
	int rc;

	__builtin_memset(o, 0, sizeof(*o));
	/* RFC 7323 Appendix A: the layout established segments carry almost always,
	 * NOP,NOP,TS, taken in one step. */
	if (len == IPK_TCP_TS_OPT_LEN && p[0] == IPK_TCPOPT_NOP && p[1] == IPK_TCPOPT_NOP &&
	    p[2] == IPK_TCPOPT_TS && p[3] == 10) {
		ipk_tcp_ts_fill(p, o);
		return 0;
	}
	/* Every pass advances i by at least 1, so the loop ends after len passes. */
	while (i < len) {
		if (p[i] == IPK_TCPOPT_EOL)
			break;
		if (p[i] == IPK_TCPOPT_NOP) {
			i++;
			continue;
		}
		if (len - i < 2)
			return IPK_WIRE_EOPT;
		l = p[i + 1];
		if (l < 2 || l > len - i)
			return IPK_WIRE_EOPT;
		rc = opt_take(o, p[i], l, p + i + 2);
		if (rc < 0)
			return rc;
		i += l;
	}
	return 0;
}

/* ------------------------------------------------------------ options out */

/* The layout is the one Linux uses, so every option lands 4-byte aligned and a SYN
 * with all four options takes 20 bytes: MSS; SACK-permitted folded into the two
 * bytes before TS (else NOP,NOP,TS); NOP,WS; NOP,NOP,SACK-permitted when there is
 * no TS; NOP,NOP,SACK blocks, as many as fit in the 40 bytes. */
static uint32_t opts_size(const struct ipk_tcp_opts *o, uint32_t *nsack)
{
	uint32_t n = 0, room;

	n += o->has_mss ? 4 : 0;
	n += o->has_ts ? 12 : 0;
	n += o->has_ws ? 4 : 0;
	n += (o->has_sack_perm && !o->has_ts) ? 4 : 0;
	*nsack = 0;
	if (o->nsack > 0 && n + 12 <= TCPOPT_MAX) {
		room = (TCPOPT_MAX - n - 4) / 8;
		*nsack = o->nsack < room ? o->nsack : room;
		if (*nsack > IPK_TCP_MAX_SACK)
			*nsack = IPK_TCP_MAX_SACK;
		n += 4 + 8 * *nsack;
	}
	return n;
}

static uint8_t *opt_put_ts(uint8_t *q, const struct ipk_tcp_opts *o)
{
	if (o->has_sack_perm) {
		q[0] = IPK_TCPOPT_SACK_PERM;
		q[1] = 2;
	} else {
		q[0] = IPK_TCPOPT_NOP;
		q[1] = IPK_TCPOPT_NOP;
	}
	q[2] = IPK_TCPOPT_TS;
	q[3] = 10;
	ipk_wr32(q + 4, o->tsval);
	ipk_wr32(q + 8, o->tsecr);
	return q + 12;
}

static uint8_t *opt_put_sack(uint8_t *q, const struct ipk_tcp_opts *o, uint32_t n)
{
	uint32_t i;

	q[0] = IPK_TCPOPT_NOP;
	q[1] = IPK_TCPOPT_NOP;
	q[2] = IPK_TCPOPT_SACK;
	q[3] = (uint8_t)(2 + 8 * n);
	for (i = 0; i < n; i++) {
		ipk_wr32(q + 4 + 8 * i, o->sack[i][0]);
		ipk_wr32(q + 8 + 8 * i, o->sack[i][1]);
	}
	return q + 4 + 8 * n;
}

uint32_t ipk_tcp_opts_len(const struct ipk_tcp_opts *o)
{
	uint32_t nsack;

	if (!(o->has_mss | o->has_ws | o->has_sack_perm | o->nsack))
		return o->has_ts ? IPK_TCP_TS_OPT_LEN : 0u;
	return opts_size(o, &nsack);
}

uint32_t ipk_tcp_opts_emit(uint8_t *p, uint32_t cap, const struct ipk_tcp_opts *o)
{
	uint32_t nsack, n;
	uint8_t *q = p;

	/* The common established segment: timestamps alone (NOP,NOP,TS). */
	if (o->has_ts && !(o->has_mss | o->has_ws | o->has_sack_perm | o->nsack)) {
		if (cap < IPK_TCP_TS_OPT_LEN)
			return 0;
		return (uint32_t)(opt_put_ts(q, o) - q);
	}
	n = opts_size(o, &nsack);
	if (n > cap)
		return 0;
	if (o->has_mss) {
		q[0] = IPK_TCPOPT_MSS;
		q[1] = 4;
		ipk_wr16(q + 2, o->mss);
		q += 4;
	}
	if (o->has_ts)
		q = opt_put_ts(q, o);
	if (o->has_ws) {
		q[0] = IPK_TCPOPT_NOP;
		q[1] = IPK_TCPOPT_WSCALE;
		q[2] = 3;
		q[3] = o->ws;
		q += 4;
	}
	if (o->has_sack_perm && !o->has_ts) {
		q[0] = IPK_TCPOPT_NOP;
		q[1] = IPK_TCPOPT_NOP;
		q[2] = IPK_TCPOPT_SACK_PERM;
		q[3] = 2;
		q += 4;
	}
	if (nsack > 0)
		q = opt_put_sack(q, o, nsack);
	return (uint32_t)(q - p);
}
