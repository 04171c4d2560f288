/*
 * The shim's socket addresses (issues 17/18, IPv6): an AF_INET socket holds
 * sockaddr_in, an AF_INET6 one sockaddr_in6, in the union pl_sa. IPv4 peers of a
 * dual-stack AF_INET6 socket (IPV6_V6ONLY 0, Linux's default) are reported as
 * ::ffff:a.b.c.d (RFC 4291 §2.5.5.2), as Linux reports them; ipkitd takes such a
 * mapped address as the IPv4 one it carries.
 */
#include "preload.h"

#include <errno.h>
#include <string.h>

static const uint8_t pl_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

socklen_t pl_sa_len(const union pl_sa *a)
{
	return a->sa.sa_family == AF_INET6 ? (socklen_t)sizeof a->in6 : (socklen_t)sizeof a->in;
}

void pl_sa_any(union pl_sa *a, int domain)
{
	memset(a, 0, sizeof *a);
	a->sa.sa_family = (sa_family_t)domain;
}

void pl_sa_from_svc(union pl_sa *a, int domain, const struct ipk_svc_addr *x)
{
	pl_sa_any(a, domain);
	a->in.sin_port = x->port_be; /* the same offset in both */
	if (domain == AF_INET) {
		memcpy(&a->in.sin_addr, x->addr, 4);
	} else if (x->family == IPK_SVC_AF_INET) {
		memcpy(a->in6.sin6_addr.s6_addr, pl_mapped, 12);
		memcpy(a->in6.sin6_addr.s6_addr + 12, x->addr, 4);
	} else {
		memcpy(a->in6.sin6_addr.s6_addr, x->addr, 16);
		a->in6.sin6_scope_id = x->scope_id; /* ipkitd's link index, link-local only */
	}
}

void pl_sa_to_svc(struct ipk_svc_addr *x, const union pl_sa *a)
{
	if (a->sa.sa_family == AF_INET6) {
		ipk_svc_addr_ip6(x, a->in6.sin6_addr.s6_addr, ntohs(a->in6.sin6_port));
		x->scope_id = a->in6.sin6_scope_id; /* ipkitd checks it (include/ipkit/svc.h) */
	} else {
		ipk_svc_addr_ip4(x, a->in.sin_addr.s_addr, ntohs(a->in.sin_port));
	}
}

int pl_sa_mapped(const union pl_sa *a)
{
	return a->sa.sa_family == AF_INET6 && !memcmp(a->in6.sin6_addr.s6_addr, pl_mapped, 12);
}

int pl_sa_loopback(const union pl_sa *a)
{
	static const uint8_t lo6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	if (a->sa.sa_family == AF_INET)
		return (ntohl(a->in.sin_addr.s_addr) >> 24) == 127;
	if (a->sa.sa_family != AF_INET6)
		return 0;
	if (pl_sa_mapped(a))
		return a->in6.sin6_addr.s6_addr[12] == 127;
	return !memcmp(a->in6.sin6_addr.s6_addr, lo6, 16);
}

/* The user's address for a socket of `domain`, checked in Linux's order
 * (inet_bind, inet6_bind, tcp_v6_connect): too short -EINVAL (an AF_INET6
 * socket takes the 24 bytes of RFC 2133's sockaddr_in6, without sin6_scope_id),
 * then another family -EAFNOSUPPORT. */
int pl_sa_in(const struct sockaddr *a, socklen_t len, int domain, union pl_sa *out)
{
	socklen_t need = domain == AF_INET6 ? 24 : (socklen_t)sizeof out->in;
	socklen_t take = domain == AF_INET6 ? (socklen_t)sizeof out->in6 : (socklen_t)sizeof out->in;
	if (!a || len < need)
		return -EINVAL;
	if (a->sa_family != domain)
		return -EAFNOSUPPORT;
	pl_sa_any(out, domain);
	memcpy(out, a, len < take ? len : take);
	return 0;
}

void pl_sa_out(struct sockaddr *to, socklen_t *len, const union pl_sa *a)
{
	socklen_t n = pl_sa_len(a);
	if (!to || !len)
		return;
	memcpy(to, a, *len < n ? *len : n);
	*len = n;
}
