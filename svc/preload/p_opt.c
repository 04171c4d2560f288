/*
 * libipkit-preload: getsockopt / setsockopt. The options ipkit serves are kept on
 * the socket and answered as Linux answers them (SO_RCVBUF doubled on set, TCP
 * keep-alive defaults 7200/75/9); unknown options of a known level are accepted
 * and ignored on set, ENOPROTOOPT on get.
 */
#include <errno.h>
#include <netinet/tcp.h>
#include <string.h>

#include "preload.h"

#define PL_ERR(e) (errno = (e), -1)

static int *pl_intopt(struct pl_sock *s, int level, int name)
{
	if (level == SOL_SOCKET) {
		switch (name) {
		case SO_REUSEADDR: return &s->reuseaddr;
		case SO_REUSEPORT: return &s->reuseport;
		case SO_KEEPALIVE: return &s->keepalive;
		case SO_RCVBUF: return &s->rcvbuf;
		case SO_SNDBUF: return &s->sndbuf;
		default: return NULL;
		}
	}
	if (level == IPPROTO_IPV6 && name == IPV6_V6ONLY && s->domain == AF_INET6)
		return &s->v6only; /* takes effect at bind (IPK_SVC_SQE_F_V6ONLY) */
	if (level == IPPROTO_TCP) {
		switch (name) {
		case TCP_NODELAY: return &s->nodelay;
		case TCP_KEEPIDLE: return &s->kidle;
		case TCP_KEEPINTVL: return &s->kintvl;
		case TCP_KEEPCNT: return &s->kcnt;
		default: return NULL;
		}
	}
	return NULL;
}

static int pl_put_int(void *v, socklen_t *len, int x)
{
	if (!v || !len || *len < (socklen_t)sizeof(int))
		return -EINVAL;
	memcpy(v, &x, sizeof x);
	*len = sizeof x;
	return 0;
}

static int pl_put_any(void *v, socklen_t *len, const void *x, socklen_t n)
{
	if (!v || !len)
		return -EFAULT;
	memcpy(v, x, *len < n ? *len : n);
	*len = *len < n ? *len : n;
	return 0;
}

/* TCP_INFO with the fields the shim knows: the state (TCP_ESTABLISHED = 1,
 * TCP_SYN_SENT = 2, TCP_LISTEN = 10, TCP_CLOSE = 7), the rest zero. */
static int pl_tcp_info(struct pl_sock *s, void *v, socklen_t *len)
{
	struct tcp_info ti;
	memset(&ti, 0, sizeof ti);
	ti.tcpi_state = s->state == PL_CONNECTED ? 1 : s->state == PL_CONNECTING ? 2 :
	                s->state == PL_LISTEN ? 10 : 7;
	ti.tcpi_unacked = s->tx_ops;
	return pl_put_any(v, len, &ti, sizeof ti);
}

static int pl_getopt(struct pl_sock *s, int level, int name, void *v, socklen_t *len)
{
	int *p = pl_intopt(s, level, name);
	if (p)
		return pl_put_int(v, len, *p);
	if (level == SOL_SOCKET) {
		switch (name) {
		case SO_ERROR: {
			int e = s->so_error;
			s->so_error = 0;
			pl_levels(s, 0);
			return pl_put_int(v, len, e);
		}
		case SO_TYPE: return pl_put_int(v, len, s->type);
		case SO_DOMAIN: return pl_put_int(v, len, s->domain);
		case SO_PROTOCOL:
			return pl_put_int(v, len, s->type == SOCK_DGRAM ? IPPROTO_UDP : IPPROTO_TCP);
		case SO_ACCEPTCONN: return pl_put_int(v, len, s->state == PL_LISTEN);
		case SO_LINGER: return pl_put_any(v, len, &s->linger, sizeof s->linger);
		case SO_RCVTIMEO: return pl_put_any(v, len, &s->rcvtimeo, sizeof s->rcvtimeo);
		case SO_SNDTIMEO: return pl_put_any(v, len, &s->sndtimeo, sizeof s->sndtimeo);
		default: return -ENOPROTOOPT;
		}
	}
	if (level == IPPROTO_TCP && name == TCP_INFO)
		return pl_tcp_info(s, v, len);
	return -ENOPROTOOPT;
}

static int pl_setopt(struct pl_sock *s, int level, int name, const void *v, socklen_t len)
{
	int *p = pl_intopt(s, level, name), x;
	if (level == SOL_SOCKET && (name == SO_RCVTIMEO || name == SO_SNDTIMEO)) {
		struct timeval tv;
		if (!v || len < (socklen_t)sizeof tv)
			return -EINVAL;
		memcpy(&tv, v, sizeof tv);
		if (tv.tv_usec < 0 || tv.tv_usec >= 1000000)
			return -EDOM;
		if (tv.tv_sec < 0)
			tv.tv_sec = tv.tv_usec = 0;
		*(name == SO_RCVTIMEO ? &s->rcvtimeo : &s->sndtimeo) = tv;
		return 0;
	}
	if (level == SOL_SOCKET && name == SO_LINGER) {
		if (!v || len < (socklen_t)sizeof s->linger)
			return -EINVAL;
		memcpy(&s->linger, v, sizeof s->linger);
		return 0;
	}
	if (!p)
		return level == SOL_SOCKET || level == IPPROTO_TCP || level == IPPROTO_IP ||
		       (level == IPPROTO_IPV6 && s->domain == AF_INET6) ? 0 :
		       -ENOPROTOOPT;
	if (!v || len < (socklen_t)sizeof(int))
		return -EINVAL;
	memcpy(&x, v, sizeof x);
	if (level == SOL_SOCKET && (name == SO_RCVBUF || name == SO_SNDBUF))
		x = x < 1152 ? 2304 : 2 * x; /* Linux doubles, with a floor */
	else if (level == SOL_SOCKET || name == TCP_NODELAY || level == IPPROTO_IPV6)
		x = x != 0;
	else if (x < 1)
		return -EINVAL;
	*p = x;
	return 0;
}

int getsockopt(int fd, int level, int name, void *v, socklen_t *len)
{
	struct pl_sock *s = pl_get(fd);
	int rc;
	if (!s)
		return pl_r.getsockopt(fd, level, name, v, len);
	pthread_mutex_lock(&s->mu);
	rc = pl_getopt(s, level, name, v, len);
	pthread_mutex_unlock(&s->mu);
	pl_put(s);
	return rc < 0 ? PL_ERR(-rc) : 0;
}

int setsockopt(int fd, int level, int name, const void *v, socklen_t len)
{
	struct pl_sock *s = pl_get(fd);
	int rc;
	if (!s)
		return pl_r.setsockopt(fd, level, name, v, len);
	pthread_mutex_lock(&s->mu);
	rc = pl_setopt(s, level, name, v, len);
	pthread_mutex_unlock(&s->mu);
	pl_put(s);
	return rc < 0 ? PL_ERR(-rc) : 0;
}
