/*
 * libipkit-preload: data (read .. recvmsg), completions, close/shutdown/dup,
 * fcntl/ioctl, names and options.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <time.h>
#include <unistd.h>

#include "preload.h"

#define PL_ERR(e) (errno = (e), -1)
#define PL_CHUNK_TX (64u << 10) /* one SEND at most */

static int64_t pl_now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int pl_wait_tv(struct pl_sock *s, int out, const struct timeval *tv, int64_t *dl)
{
	int64_t ms = (int64_t)tv->tv_sec * 1000 + (tv->tv_usec + 999) / 1000, left;
	if (ms <= 0)
		return pl_wait(s, out, -1);
	if (!*dl)
		*dl = pl_now_ms() + ms;
	left = *dl - pl_now_ms();
	if (left <= 0)
		return -EAGAIN;
	return pl_wait(s, out, left > 0x7fffffff ? 0x7fffffff : (int)left);
}

/* ------------------------------------------------------------ completions */

uint32_t pl_rx_avail(const struct pl_sock *s)
{
	return s->rx[0].len - s->rx[0].pos + s->rx[1].len - s->rx[1].pos;
}

/* Keep a RECV posted into every empty buffer, in reading order (head first):
 * RECVs complete in submission order, so the data stays in order. */
int pl_post_recv(struct pl_sock *s)
{
	int k;
	if (s->type == SOCK_DGRAM)
		return pl_udp_post(s);
	for (k = 0; k < 2; k++) {
		int i = s->rx_head ^ k;
		struct pl_rx *r = &s->rx[i];
		struct ipk_svc_sqe *e;
		if (r->posted || r->len > r->pos)
			continue;
		if (s->eof || !s->so)
			return 0;
		if (!r->b)
			r->b = (uint8_t *)ipk_svc_buf_alloc(pl_svc(), PL_RXBUF);
		e = r->b ? ipk_svc_get_sqe(s->so) : NULL;
		if (!e && !s->rx[s->rx_head].posted && pl_rx_avail(s) == 0) {
			/* nothing will ever arrive: say so rather than leave the reader
			 * asleep (the region's buffer area is exhausted) */
			s->so_error = ENOBUFS;
			PL_COUNT(rx_starved, 1);
		}
		if (!e)
			return -ENOBUFS;
		ipk_svc_prep_recv(s->so, e, r->b, PL_RXBUF);
		ipk_svc_sqe_set_data(e, (uint64_t)PL_OP_RECV << 60 | (uint64_t)i);
		r->posted = 1;
		r->len = r->pos = 0;
		/* with the other buffer's RECV still in flight, data arriving completes
		 * that one: this one needs no doorbell (one system call less per request
		 * when ipkitd sleeps between requests; the next SEND rings for both) */
		if ((s->rx[i ^ 1].posted ? ipk_svc_submit_quiet(s->so) : pl_submit_data(s->so)) < 0)
			return -ENETDOWN;
	}
	return 0;
}

static void pl_cqe_accept(struct pl_sock *s, const struct ipk_svc_cqe *c)
{
	struct ipk_svc_sock *so;
	struct pl_acc *a;
	if (!(c->flags & IPK_SVC_CQE_F_MORE))
		s->acc_armed = 0; /* re-armed by the next accept() */
	if (c->res < 0 || ipk_svc_accepted(pl_svc(), c, &so) < 0)
		return;
	a = (struct pl_acc *)calloc(1, sizeof *a);
	if (!a) {
		ipk_svc_close(so);
		return;
	}
	a->so = so;
	pl_sa_from_svc(&a->peer, s->domain, &c->addr);
	if (s->acc_t)
		s->acc_t->next = a;
	else
		s->acc_h = a;
	s->acc_t = a;
	s->acc_n++;
}

static void pl_cqe_send(struct pl_sock *s, const struct ipk_svc_cqe *c)
{
	struct pl_txq *q;
	if (s->tx_ops == 0) { /* a completion for nothing we sent */
		PL_COUNT(bad_cqe, 1);
		return;
	}
	q = &s->txq[s->txq_head];
	s->txq_head = (s->txq_head + 1) % PL_TXOPS;
	ipk_svc_buf_free(pl_svc(), q->b, q->len);
	s->tx_bytes -= q->len;
	s->tx_ops--;
	if (s->tx_bytes < PL_TXMAX && s->tx_ops < PL_TXOPS)
		pl_txfull(s, 0);
	if (c->res < 0)
		PL_COUNT(tx_failed, q->len);
	else if ((uint32_t)c->res < q->len)
		PL_COUNT(tx_failed, q->len - (uint32_t)c->res);
	if (c->res < 0 && !s->so_error && !s->eof)
		s->so_error = -c->res;
}

/* A RECV's result: bytes within the buffer, 0, or an error. */
static void pl_cqe_recv(struct pl_sock *s, const struct ipk_svc_cqe *c)
{
	struct pl_rx *r = &s->rx[c->user_data & 1];
	if (r->posted && c->res == -EXDEV) { /* another process took it (p_fork.c) */
		r->posted = 0;
		s->away = 1;
		return;
	}
	if (!r->posted || c->res > (int32_t)PL_RXBUF) {
		PL_COUNT(bad_cqe, 1);
		if (!r->posted)
			return;
		r->posted = 0;
		s->eof = 1;
		s->so_error = EIO; /* the stream cannot be trusted past this */
		return;
	}
	r->posted = 0;
	if (c->res > 0) {
		r->len = (uint32_t)c->res;
		r->pos = 0;
		PL_COUNT(rx_ipk, (uint64_t)c->res);
	} else {
		s->eof = 1;
		if (c->res < 0)
			s->so_error = -c->res;
	}
}

void pl_on_cqe(struct pl_sock *s, const struct ipk_svc_cqe *c)
{
	int edge = 0;
	if (c->flags & IPK_SVC_CQE_F_MOVED) { /* give back what we had (p_fork.c) */
		pl_fam_moved(s);
		pl_levels(s, 0);
		return;
	}
	switch ((unsigned)(c->user_data >> 60)) {
	case PL_OP_RECV:
		if (s->type == SOCK_DGRAM)
			pl_udp_on_recv(s, c);
		else
			pl_cqe_recv(s, c);
		edge = 1;
		break;
	case PL_OP_SEND: pl_cqe_send(s, c); break;
	case PL_OP_GB: pl_fam_gb_done(s, c->user_data); break;
	case PL_OP_ACCEPT: pl_cqe_accept(s, c); edge = 1; break;
	case PL_OP_CONNECT:
		if (c->res == 0) {
			s->state = PL_CONNECTED;
			s->conn_unseen = 1;
			if (c->addr.family == IPK_SVC_AF_INET ||
			    c->addr.family == IPK_SVC_AF_INET6) /* getsockname: the real one */
				pl_sa_from_svc(&s->local, s->domain, &c->addr);
			pl_post_recv(s);
		} else {
			s->state = PL_FAILED;
			s->so_error = -c->res;
			s->conn_noroom = (c->flags & IPK_SVC_CQE_F_NOROOM) != 0;
		}
		break;
	case PL_OP_BIND:
		s->sync_res = c->res;
		s->sync_done = 1;
		pthread_cond_broadcast(&s->cv);
		break;
	default: break;
	}
	pl_levels(s, edge);
}

/* ------------------------------------------------------------ receive */

/* One receive into [buf, len): bytes, 0 at the end, or -errno. */
static ssize_t pl_recv1(struct pl_sock *s, uint8_t *buf, size_t len, int flags)
{
	ssize_t n;
	if (!s->so)
		return -EBADF;
	if (s->state != PL_CONNECTED && s->state != PL_FAILED)
		return -ENOTCONN;
	n = 0;
	while ((size_t)n < len && pl_rx_avail(s) > 0) {
		struct pl_rx *r = &s->rx[s->rx_head];
		size_t k = r->len - r->pos;
		if (k == 0)
			break; /* cannot happen: the head completes first (see pl_post_recv) */
		if (k > len - (size_t)n)
			k = len - (size_t)n;
		memcpy(buf + n, r->b + r->pos, k);
		n += (ssize_t)k;
		if (flags & MSG_PEEK)
			break; /* a peek sees the head buffer only */
		r->pos += (uint32_t)k;
		if (r->pos == r->len && !r->posted) {
			r->pos = r->len = 0;
			s->rx_head ^= 1; /* the other buffer is next in order */
		}
	}
	if (n > 0) {
		if (!(flags & MSG_PEEK)) {
			pl_post_recv(s);
			pl_levels(s, 0);
		}
		return n;
	}
	if (s->so_error) {
		int e = s->so_error;
		s->so_error = 0;
		pl_levels(s, 0);
		return -e;
	}
	if (s->eof || s->rd_shut)
		return 0;
	return -EAGAIN;
}

static ssize_t pl_recv(struct pl_sock *s, void *buf, size_t len, int flags)
{
	size_t got = 0;
	int64_t dl = 0;
	if (len == 0)
		return 0;
	if (s->away && pl_fam_claim(s) < 0)
		return -ECONNRESET;
	for (;;) {
		ssize_t n;
		int w;
		pthread_mutex_lock(&s->mu);
		n = pl_recv1(s, (uint8_t *)buf + got, len - got, flags);
		pthread_mutex_unlock(&s->mu);
		if (n > 0) {
			got += (size_t)n;
			if (!(flags & MSG_WAITALL) || got == len || (flags & MSG_PEEK))
				return (ssize_t)got;
			continue;
		}
		if (n != -EAGAIN || s->nonblock || (flags & MSG_DONTWAIT))
			return got ? (ssize_t)got : n;
		w = pl_wait_tv(s, 0, &s->rcvtimeo, &dl);
		if (w < 0)
			return got ? (ssize_t)got : w;
	}
}

/* ------------------------------------------------------------ send */

/* Queue up to len bytes as SENDs while the socket is writable: bytes queued, or
 * -EAGAIN (nothing fits now), or -errno. Under s->mu. */
static ssize_t pl_send1(struct pl_sock *s, const uint8_t *buf, size_t len)
{
	size_t done = 0;
	if (!s->so)
		return -EBADF;
	if (s->wr_shut)
		return -EPIPE;
	if (s->so_error) {
		int e = s->so_error;
		s->so_error = 0;
		return -e;
	}
	if (s->state != PL_CONNECTED)
		return s->state == PL_FAILED ? -EPIPE : -ENOTCONN;
	while (done < len && s->tx_bytes < PL_TXMAX && s->tx_ops < PL_TXOPS) {
		uint32_t n = (uint32_t)(len - done < PL_CHUNK_TX ? len - done : PL_CHUNK_TX);
		uint8_t *b;
		struct ipk_svc_sqe *e;
		if (n > PL_TXMAX - s->tx_bytes)
			n = PL_TXMAX - s->tx_bytes;
		b = (uint8_t *)ipk_svc_buf_alloc(pl_svc(), n);
		e = b ? ipk_svc_get_sqe(s->so) : NULL;
		if (!e) {
			if (b)
				ipk_svc_buf_free(pl_svc(), b, n);
			break;
		}
		memcpy(b, buf + done, n);
		ipk_svc_prep_send(s->so, e, b, n);
		ipk_svc_sqe_set_data(e, (uint64_t)PL_OP_SEND << 60);
		s->txq[(s->txq_head + s->tx_ops) % PL_TXOPS].b = b;
		s->txq[(s->txq_head + s->tx_ops) % PL_TXOPS].len = n;
		s->tx_bytes += n;
		s->tx_ops++;
		done += n;
		PL_COUNT(tx_ipk, n); /* what the program wrote, as send() said */
	}
	/* full now: SEND completions must wake an armed sleeper (its EPOLLOUT),
	 * said before they are published */
	if (!(s->tx_bytes < PL_TXMAX && s->tx_ops < PL_TXOPS))
		pl_txfull(s, 1);
	if (done && pl_submit_data(s->so) < 0)
		return -ENETDOWN;
	pl_levels(s, 0);
	return done ? (ssize_t)done : -EAGAIN;
}

static ssize_t pl_send(struct pl_sock *s, const void *buf, size_t len, int flags)
{
	size_t done = 0;
	int64_t dl = 0;
	if (s->away && pl_fam_claim(s) < 0)
		return -ECONNRESET;
	for (;;) {
		ssize_t n;
		int w;
		pthread_mutex_lock(&s->mu);
		n = len ? pl_send1(s, (const uint8_t *)buf + done, len - done) : 0;
		pthread_mutex_unlock(&s->mu);
		if (n > 0)
			done += (size_t)n;
		if (n == -EPIPE && !(flags & MSG_NOSIGNAL))
			raise(SIGPIPE); /* Linux: EPIPE on a stream raises SIGPIPE */
		if (done == len || (n < 0 && n != -EAGAIN))
			return done ? (ssize_t)done : n;
		if (s->nonblock || (flags & MSG_DONTWAIT))
			return done ? (ssize_t)done : -EAGAIN;
		w = pl_wait_tv(s, 1, &s->sndtimeo, &dl);
		if (w < 0)
			return done ? (ssize_t)done : w;
	}
}

/* ------------------------------------------------------------ the calls */

#define PL_RET(x) do { ssize_t r_ = (x); pl_put(s); \
	return r_ < 0 ? PL_ERR((int)-r_) : r_; } while (0)

/* A datagram: its sender into (a, alen) when asked, MSG_TRUNC in *mflags when cut. */
static ssize_t pl_dgram_in(struct pl_sock *s, void *buf, size_t len, int flags,
                           struct sockaddr *a, socklen_t *alen, int *mflags)
{
	union pl_sa from;
	int trunc = 0;
	ssize_t n = pl_udp_recv(s, buf, len, flags, &from, &trunc);
	if (n >= 0 && a && alen)
		pl_sa_out(a, alen, &from);
	if (n >= 0 && mflags && trunc)
		*mflags |= MSG_TRUNC;
	return n;
}

static ssize_t pl_dgram_out(struct pl_sock *s, const void *buf, size_t len,
                            const struct sockaddr *a, socklen_t alen)
{
	union pl_sa to;
	int rc;
	if (!a)
		return pl_udp_send(s, buf, len, NULL);
	rc = pl_sa_in(a, alen, s->domain, &to);
	if (rc < 0)
		return rc;
	return pl_udp_send(s, buf, len, &to);
}

#define PL_IN(s, buf, len, flags, a, alen) ((s)->type == SOCK_DGRAM ? \
	pl_dgram_in(s, buf, len, flags, a, alen, NULL) : pl_recv(s, buf, len, flags))
#define PL_OUT(s, buf, len, flags, a, alen) ((s)->type == SOCK_DGRAM ? \
	pl_dgram_out(s, buf, len, a, alen) : pl_send(s, buf, len, flags))

ssize_t read(int fd, void *buf, size_t len)
{
	struct pl_sock *s = pl_get(fd);
	if (!s)
		return pl_r.read(fd, buf, len);
	PL_RET(PL_IN(s, buf, len, 0, NULL, NULL));
}

ssize_t write(int fd, const void *buf, size_t len)
{
	struct pl_sock *s = pl_get(fd);
	if (!s)
		return pl_r.write(fd, buf, len);
	PL_RET(PL_OUT(s, buf, len, 0, NULL, 0));
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	struct pl_sock *s = pl_get(fd);
	if (!s)
		return pl_r.recv(fd, buf, len, flags);
	PL_RET(PL_IN(s, buf, len, flags, NULL, NULL));
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	struct pl_sock *s = pl_get(fd);
	if (!s)
		return pl_r.send(fd, buf, len, flags);
	PL_RET(PL_OUT(s, buf, len, flags, NULL, 0));
}

ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *a, socklen_t *alen)
{
	struct pl_sock *s = pl_get(fd);
	if (!s)
		return pl_r.recvfrom(fd, buf, len, flags, a, alen);
	if (s->type == SOCK_DGRAM)
		PL_RET(pl_dgram_in(s, buf, len, flags, a, alen, NULL));
	if (a && alen)
		*alen = 0; /* a stream names no sender (Linux leaves the address empty) */
	PL_RET(pl_recv(s, buf, len, flags));
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *a,
               socklen_t alen)
{
	struct pl_sock *s = pl_get(fd);
	union pl_sa to;
	if (!s)
		return pl_r.sendto(fd, buf, len, flags, a, alen);
	if (s->type == SOCK_DGRAM && a && pl_sa_in(a, alen, s->domain, &to) == 0 &&
	    pl_udp_loop_kernel(s, fd, &to)) {
		pl_put(s);
		return pl_r.sendto(fd, buf, len, flags, a, alen);
	}
	PL_RET(PL_OUT(s, buf, len, flags, a, alen)); /* TCP ignores the address (Linux) */
}

/* Vectors: the first element with the call's blocking rule, the rest only while
 * they complete at once (a stream returns what it has). */
static ssize_t pl_recvv(struct pl_sock *s, const struct iovec *iov, int n, int flags)
{
	ssize_t got = 0;
	int i;
	for (i = 0; i < n; i++) {
		ssize_t r;
		if (iov[i].iov_len == 0)
			continue;
		r = pl_recv(s, iov[i].iov_base, iov[i].iov_len, got ? flags | MSG_DONTWAIT : flags);
		if (r <= 0)
			return got ? got : r;
		got += r;
		if ((size_t)r < iov[i].iov_len)
			break;
	}
	return got;
}

#define PL_GATHER 4096 /* a writev up to this size is one SEND */

/* A small writev (nginx: the headers and a small body) as one SEND: one TCP
 * segment and one frame through ipkitd instead of one per element, as Linux's
 * writev makes one skb of it. 0: too large or stream socket not used so. */
static ssize_t pl_sendv_small(struct pl_sock *s, const struct iovec *iov, int n, int flags)
{
	char b[PL_GATHER];
	size_t len = 0;
	int i;
	if (s->type != SOCK_STREAM || n < 2)
		return 0;
	for (i = 0; i < n; i++) {
		if (iov[i].iov_len > PL_GATHER - len)
			return 0;
		len += iov[i].iov_len;
	}
	for (i = 0, len = 0; i < n; i++) {
		memcpy(b + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	return len ? pl_send(s, b, len, flags) : 0;
}

static ssize_t pl_sendv(struct pl_sock *s, const struct iovec *iov, int n, int flags)
{
	ssize_t done = pl_sendv_small(s, iov, n, flags);
	int i;
	if (done != 0)
		return done;
	for (i = 0; i < n; i++) {
		ssize_t r;
		if (iov[i].iov_len == 0)
			continue;
		r = pl_send(s, iov[i].iov_base, iov[i].iov_len, done ? flags | MSG_NOSIGNAL : flags);
		if (r < 0)
			return done ? done : r;
		done += r;
		if ((size_t)r < iov[i].iov_len)
			break;
	}
	return done;
}

/* A datagram through iovecs: gathered into / scattered from one buffer. */
static ssize_t pl_dgram_msg(struct pl_sock *s, struct msghdr *m, int flags, int out)
{
	enum { DSZ = 65536 };
	uint8_t *d = (uint8_t *)pl_scratch(PL_SCR_DGRAM, DSZ);
	size_t len = 0, i, off = 0;
	ssize_t n;
	if (!d)
		return -ENOMEM;
	for (i = 0; i < m->msg_iovlen; i++)
		len += m->msg_iov[i].iov_len;
	if (len > DSZ)
		len = DSZ;
	if (out) {
		for (i = 0; i < m->msg_iovlen && off < len; i++) {
			size_t k = m->msg_iov[i].iov_len < len - off ? m->msg_iov[i].iov_len : len - off;
			memcpy(d + off, m->msg_iov[i].iov_base, k);
			off += k;
		}
		return pl_dgram_out(s, d, len, (struct sockaddr *)m->msg_name, m->msg_namelen);
	}
	n = pl_dgram_in(s, d, len, flags, (struct sockaddr *)m->msg_name,
	                m->msg_name ? &m->msg_namelen : NULL, &m->msg_flags);
	for (i = 0; n > 0 && i < m->msg_iovlen && off < (size_t)n && off < len; i++) {
		size_t lim = (size_t)n < len ? (size_t)n : len;
		size_t k = m->msg_iov[i].iov_len < lim - off ? m->msg_iov[i].iov_len : lim - off;
		memcpy(m->msg_iov[i].iov_base, d + off, k);
		off += k;
	}
	return n;
}

static ssize_t pl_dgram_v(struct pl_sock *s, const struct iovec *iov, int n, int out)
{
	struct msghdr m;
	memset(&m, 0, sizeof m);
	m.msg_iov = (struct iovec *)iov;
	m.msg_iovlen = (size_t)n;
	return pl_dgram_msg(s, &m, 0, out);
}

ssize_t readv(int fd, const struct iovec *iov, int n)
{
	struct pl_sock *s = pl_get(fd);
	if (!s)
		return pl_r.readv(fd, iov, n);
	if (n >= 0 && s->type == SOCK_DGRAM)
		PL_RET(pl_dgram_v(s, iov, n, 0));
	PL_RET(n < 0 ? -EINVAL : pl_recvv(s, iov, n, 0));
}

ssize_t writev(int fd, const struct iovec *iov, int n)
{
	struct pl_sock *s = pl_get(fd);
	if (!s)
		return pl_r.writev(fd, iov, n);
	if (n >= 0 && s->type == SOCK_DGRAM)
		PL_RET(pl_dgram_v(s, iov, n, 1));
	PL_RET(n < 0 ? -EINVAL : pl_sendv(s, iov, n, 0));
}

ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	struct pl_sock *s = pl_get(fd);
	if (!s)
		return pl_r.recvmsg(fd, m, flags);
	if (s->type == SOCK_DGRAM) {
		m->msg_controllen = 0;
		m->msg_flags = 0;
		PL_RET(pl_dgram_msg(s, m, flags, 0));
	}
	m->msg_namelen = 0;
	m->msg_controllen = 0;
	m->msg_flags = 0;
	PL_RET(pl_recvv(s, m->msg_iov, (int)m->msg_iovlen, flags));
}

ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	struct pl_sock *s = pl_get(fd);
	if (!s)
		return pl_r.sendmsg(fd, m, flags);
	if (s->type == SOCK_DGRAM)
		PL_RET(pl_dgram_msg(s, (struct msghdr *)m, flags, 1));
	PL_RET(pl_sendv(s, m->msg_iov, (int)m->msg_iovlen, flags));
}

/* _FORTIFY_SOURCE entry points Debian's binaries call instead of read/recv. */
ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen);
ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	(void)buflen;
	pl_resolve();
	return read(fd, buf, len);
}

ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
	(void)buflen;
	pl_resolve();
	return recv(fd, buf, len, flags);
}

ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
                       struct sockaddr *a, socklen_t *alen);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
                       struct sockaddr *a, socklen_t *alen)
{
	(void)buflen;
	pl_resolve();
	return recvfrom(fd, buf, len, flags, a, alen);
}

/* ------------------------------------------------------------ shutdown, close */

int shutdown(int fd, int how)
{
	struct pl_sock *s = pl_get(fd);
	int rc = 0;
	if (!s)
		return pl_r.shutdown(fd, how);
	if (s->away && how != SHUT_RD)
		pl_fam_claim(s); /* a FIN goes after the holder's bytes */
	pthread_mutex_lock(&s->mu);
	if (how < SHUT_RD || how > SHUT_RDWR)
		rc = -EINVAL;
	else if (s->state != PL_CONNECTED && s->state != PL_LISTEN)
		rc = -ENOTCONN;
	if (rc == 0 && how != SHUT_WR)
		s->rd_shut = 1;
	if (rc == 0 && how != SHUT_RD && !s->wr_shut && s->state == PL_CONNECTED &&
	    s->type == SOCK_STREAM) {
		struct ipk_svc_sqe *e = s->so ? ipk_svc_get_sqe(s->so) : NULL;
		if (e) {
			ipk_svc_prep_shutdown(e);
			ipk_svc_sqe_set_data(e, (uint64_t)PL_OP_SHUT << 60);
			ipk_svc_submit(s->so);
		}
		s->wr_shut = 1;
	}
	pl_levels(s, 0);
	pthread_mutex_unlock(&s->mu);
	PL_RET(rc);
}

/* Drop one name of an ipkit socket; the last name closes it. */
static void pl_drop_name(int fd, int close_fd)
{
	int last;
	struct pl_sock *s = pl_tbl_take(fd, &last);
	if (!s)
		return;
	if (close_fd)
		pl_r.close(fd);
	if (last)
		pl_sock_release(s);
	pl_put(s);
}

int close(int fd)
{
	pl_resolve();
	if (!pl_is_ipk(fd)) {
		pl_ep_forget(fd);
		return pl_r.close(fd);
	}
	pl_drop_name(fd, 1);
	pl_ring(); /* its last writes go out now, not at the next wait */
	return 0;
}

/* ------------------------------------------------------------ dup */

static int pl_dup_done(int nfd, struct pl_sock *s)
{
	if (nfd >= 0)
		pl_tbl_set(nfd, s);
	pl_put(s);
	return nfd;
}

int dup(int fd)
{
	struct pl_sock *s = pl_get(fd);
	if (!s)
		return pl_r.dup(fd);
	return pl_dup_done(pl_r.dup(fd), s);
}

int dup3(int old, int nfd, int flags)
{
	struct pl_sock *s = pl_get(old);
	int r;
	pl_resolve();
	if (old == nfd) {
		if (s)
			pl_put(s);
		return pl_r.dup3(old, nfd, flags); /* EINVAL, as Linux */
	}
	r = pl_r.dup3(old, nfd, flags);
	if (r >= 0)
		pl_drop_name(nfd, 0); /* the kernel closed what nfd was */
	if (!s)
		return r;
	return pl_dup_done(r, s);
}

int dup2(int old, int nfd)
{
	pl_resolve();
	if (old == nfd)
		return pl_r.dup2(old, nfd);
	return dup3(old, nfd, 0);
}

/* ------------------------------------------------------------ fcntl, ioctl */

static int pl_fcntl(struct pl_sock *s, int fd, int cmd, void *arg)
{
	switch (cmd) {
	case F_GETFL:
		return O_RDWR | (s->nonblock ? O_NONBLOCK : 0);
	case F_SETFL:
		s->nonblock = !!((long)arg & O_NONBLOCK);
		return 0;
	case F_DUPFD:
	case F_DUPFD_CLOEXEC: {
		int r = pl_r.fcntl(fd, cmd, (long)arg);
		if (r >= 0)
			pl_tbl_set(r, s);
		return r;
	}
	default: /* F_GETFD/F_SETFD and the rest: the descriptor's own */
		return pl_r.fcntl(fd, cmd, arg);
	}
}

int fcntl(int fd, int cmd, ...)
{
	struct pl_sock *s;
	va_list ap;
	void *arg;
	int r;
	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	pl_resolve();
	s = pl_get(fd);
	if (!s)
		return pl_r.fcntl(fd, cmd, arg);
	r = pl_fcntl(s, fd, cmd, arg);
	pl_put(s);
	return r;
}

/* The other name of fcntl: with _FILE_OFFSET_BITS=64 (meson's default, and most
 * of Debian) <fcntl.h> names the function above fcntl64 and programs built
 * without it call plain fcntl; without it, the reverse. Both must be ours. */
#if defined _FILE_OFFSET_BITS && _FILE_OFFSET_BITS == 64
#define PL_FCNTL_OTHER "fcntl"
#define PL_SENDFILE_OTHER "sendfile"
#else
#define PL_FCNTL_OTHER "fcntl64"
#define PL_SENDFILE_OTHER "sendfile64"
#endif
int pl_fcntl_other(int fd, int cmd, ...) __asm__(PL_FCNTL_OTHER);
int pl_fcntl_other(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;
	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl(fd, cmd, arg);
}

int ioctl(int fd, unsigned long req, ...)
{
	struct pl_sock *s;
	va_list ap;
	void *arg;
	int rc = 0;
	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	pl_resolve();
	s = pl_get(fd);
	if (!s)
		return pl_r.ioctl(fd, req, arg);
	pthread_mutex_lock(&s->mu);
	if (req == FIONBIO && arg)
		s->nonblock = *(int *)arg != 0;
	else if (req == FIONREAD && arg && s->type == SOCK_DGRAM)
		*(int *)arg = s->rx[s->rx_head].full ? (int)s->rx[s->rx_head].len : 0;
	else if (req == FIONREAD && arg && s->state != PL_LISTEN)
		*(int *)arg = (int)pl_rx_avail(s);
	else if (req == TIOCOUTQ && arg && s->state != PL_LISTEN)
		*(int *)arg = (int)s->tx_bytes;
	else
		rc = req == FIONREAD || req == TIOCOUTQ ? -EINVAL : -ENOTTY;
	pthread_mutex_unlock(&s->mu);
	pl_put(s);
	return rc < 0 ? PL_ERR(-rc) : 0;
}

/* ------------------------------------------------------------ names */

int getsockname(int fd, struct sockaddr *a, socklen_t *len)
{
	struct pl_sock *s = pl_get(fd);
	union pl_sa in;
	if (!s)
		return pl_r.getsockname(fd, a, len);
	in = s->local;
	in.sa.sa_family = (sa_family_t)s->domain;
	pl_put(s);
	if (!a || !len)
		return PL_ERR(EFAULT);
	pl_sa_out(a, len, &in);
	return 0;
}

int getpeername(int fd, struct sockaddr *a, socklen_t *len)
{
	struct pl_sock *s = pl_get(fd);
	union pl_sa in;
	int ok;
	if (!s)
		return pl_r.getpeername(fd, a, len);
	in = s->peer;
	ok = s->state == PL_CONNECTED;
	pl_put(s);
	if (!ok)
		return PL_ERR(ENOTCONN);
	if (!a || !len)
		return PL_ERR(EFAULT);
	pl_sa_out(a, len, &in);
	return 0;
}

/* ------------------------------------------------------------ sendfile */

/* sendfile from a file to an ipkit socket: the file's bytes are read with pread
 * (so the file offset moves by what was sent, not by what was read) and sent as by
 * send; a non-blocking socket takes what fits. Returns bytes sent or -errno. */
static ssize_t pl_sendfile(struct pl_sock *s, int in, off_t *offp, size_t count)
{
	enum { CSZ = 64 << 10 };
	uint8_t *chunk = (uint8_t *)pl_scratch(PL_SCR_SENDFILE, CSZ);
	off_t off = offp ? *offp : lseek(in, 0, SEEK_CUR);
	size_t done = 0;
	if (off < 0)
		return -errno == -ESPIPE ? -EINVAL : -errno; /* pipes: splice, next landing */
	if (!chunk)
		return -ENOMEM;
	while (done < count) {
		size_t want = count - done < CSZ ? count - done : CSZ;
		ssize_t r = pread(in, chunk, want, off + (off_t)done), w;
		if (r < 0 && !done)
			return -errno;
		if (r <= 0)
			break;
		w = pl_send(s, chunk, (size_t)r, done ? MSG_NOSIGNAL : 0);
		if (w < 0 && !done)
			return w;
		if (w <= 0)
			break;
		done += (size_t)w;
		if (w < r)
			break;
	}
	if (offp)
		*offp = off + (off_t)done;
	else
		lseek(in, off + (off_t)done, SEEK_SET);
	return (ssize_t)done;
}

ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	struct pl_sock *s = pl_get(out);
	if (!s) {
		static ssize_t (*r_sendfile)(int, int, off_t *, size_t);
		if (!r_sendfile) {
			void *p = dlsym(RTLD_NEXT, "sendfile64");
			memcpy(&r_sendfile, &p, sizeof p);
		}
		return r_sendfile(out, in, off, count);
	}
	PL_RET(pl_sendfile(s, in, off, count));
}

/* The other name of sendfile (see fcntl above; off_t is 64 bits either way on
 * 64-bit Linux, the only target of the shim). */
ssize_t pl_sendfile_other(int out, int in, off_t *off, size_t count) __asm__(PL_SENDFILE_OTHER);
ssize_t pl_sendfile_other(int out, int in, off_t *off, size_t count)
{
	return sendfile(out, in, off, count);
}
