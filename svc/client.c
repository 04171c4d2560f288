/*
 * libipkit-client: the application side of ipkitd (include/ipkit/svc.h).
 * The protocol is svc/proto.h; the design svc/README.md.
 */
#include "proto.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define SVC_DEFAULT_PATH "/run/ipkitd.sock"
#define SVC_CLASSES 32 /* 2^6 .. 2^37 bytes */
#define SVC_MIN_SHIFT 6

/* Size-class allocator: a stack of free offsets per class, a bump pointer for
 * fresh blocks. O(1) amortised (a stack grows by doubling). */
struct svc_class {
	uint64_t *free;
	uint32_t n, cap;
};

struct ipk_svc_sock {
	struct ipk_svc *svc;
	struct ipk_svc_sock *prev, *next; /* the application's handles (svc->socks) */
	struct ipk_svc_ring *ring;
	struct ipk_svc_sqe *sqes;
	struct ipk_svc_cqe *cqes;
	uint32_t sq_mask, cq_mask;
	uint32_t sq_tail;   /* private: entries taken by get_sqe */
	uint32_t sq_pub;    /* published */
	uint32_t id;
	uint64_t ready_mask, sum_mask, *ready_word, *ready_sum; /* this socket's ready bit */
	pthread_mutex_t lock;
};

struct ipk_svc {
	int ctl_fd, bell_fd;
	int ev_fd;               /* the app's wake eventfd, or -1 (an older daemon) */
	uint8_t *base;
	uint64_t size;
	struct ipk_svc_region *hdr;
	struct ipk_svc_sock ctl; /* the control rings */
	struct ipk_svc_sock *socks; /* every handle, freed by ipk_svc_close_all */
	pthread_mutex_t lock;    /* control ring, allocator */
	struct svc_class cls[SVC_CLASSES];
	uint64_t bump;           /* next fresh byte of the buffer area (offset in it) */
	int dead;
	/* callback mode */
	pthread_t cb_thread;
	ipk_svc_cb cb_fn;
	void *cb_arg;
	int cb_running;
	int cb_stop;             /* atomic: set by stop, read by the thread */
};

void ipk_svc_opts_default(struct ipk_svc_opts *o)
{
	if (!o)
		return;
	o->buf_bytes = 16u << 20;
	o->ring_bytes = 4u << 20;
	o->ctl_entries = 64;
	o->flags = 0;
}

static int svc_connect_ctl(const char *path)
{
	struct sockaddr_un sa;
	int fd;
	if (!path)
		path = getenv("IPKITD_SOCKET");
	if (!path)
		path = SVC_DEFAULT_PATH;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, strlen(path));
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

/* Receive the welcome and its two fds. Returns 0 or -errno. */
static int svc_recv_welcome(int fd, struct ipk_svc_welcome *w, int fds[3])
{
	char cbuf[CMSG_SPACE(3 * sizeof(int))];
	struct iovec iov = {w, sizeof *w};
	struct msghdr mh;
	struct cmsghdr *c;
	ssize_t r;
	memset(&mh, 0, sizeof mh);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cbuf;
	mh.msg_controllen = sizeof cbuf;
	do
		r = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	if ((size_t)r != sizeof *w || w->magic != IPK_SVC_MAGIC)
		return -EPROTO;
	if (w->status < 0)
		return w->status;
	if (w->version != IPK_SVC_VERSION)
		return -EPROTO;
	c = CMSG_FIRSTHDR(&mh);
	/* two (an older daemon: no wake eventfd) or three */
	if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
	    (c->cmsg_len != CMSG_LEN(2 * sizeof(int)) && c->cmsg_len != CMSG_LEN(3 * sizeof(int))))
		return -EPROTO;
	memcpy(fds, CMSG_DATA(c), c->cmsg_len - CMSG_LEN(0));
	return 0;
}

/* Point a socket handle at its rings (checked against the ring area: the daemon is
 * trusted, but a stale or foreign cqe is not). */
static int svc_sock_init(struct ipk_svc *svc, struct ipk_svc_sock *so, uint64_t ring_off)
{
	const struct ipk_svc_region *h = svc->hdr;
	struct ipk_svc_ring *r;
	if (ring_off < h->ring_area_off || ring_off % IPK_SVC_CL ||
	    ring_off + sizeof *r > h->ring_area_off + h->ring_area_size)
		return -EPROTO;
	r = (struct ipk_svc_ring *)(svc->base + ring_off);
	if (ring_off + ipk_svc_ring_bytes(r->sq_entries, r->cq_entries) >
	    h->ring_area_off + h->ring_area_size)
		return -EPROTO;
	so->svc = svc;
	so->ring = r;
	so->sqes = (struct ipk_svc_sqe *)((uint8_t *)r + r->sqes_off);
	so->cqes = (struct ipk_svc_cqe *)((uint8_t *)r + r->cqes_off);
	so->sq_mask = r->sq_entries - 1;
	so->cq_mask = r->cq_entries - 1;
	so->sq_tail = so->sq_pub = IPK_SVC_LOAD_RLX(&r->sq_tail.v);
	so->id = r->sock;
	{
		/* the socket's bit in the ready bitmap (svc/proto.h, line 6); the
		 * control ring (index 0) needs none: the daemon looks at it always */
		uint32_t idx = so->id & 0xffffffu, w = idx / 64;
		uint64_t *sum = (uint64_t *)(svc->base + h->ready_off);
		so->ready_word = NULL;
		if (idx && w < h->ready_words) {
			so->ready_sum = sum + w / 64;
			so->ready_word = sum + h->ready_sum_words + w;
			so->ready_mask = 1ull << (idx % 64);
			so->sum_mask = 1ull << (w % 64);
		}
	}
	pthread_mutex_init(&so->lock, NULL);
	return 0;
}

static int svc_map(struct ipk_svc *svc, int memfd, uint64_t size)
{
	const struct ipk_svc_region *h;
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (p == MAP_FAILED)
		return -errno;
	svc->base = (uint8_t *)p;
	svc->size = size;
	svc->hdr = (struct ipk_svc_region *)p;
	h = svc->hdr;
	if (h->magic != IPK_SVC_MAGIC || h->version != IPK_SVC_VERSION ||
	    h->hdr_size != sizeof *h || h->region_size != size ||
	    h->buf_area_off + h->buf_area_size > size || h->ready_off < sizeof *h ||
	    h->ready_off + ((uint64_t)h->ready_words + h->ready_sum_words) * 8 > h->ring_area_off ||
	    (uint64_t)h->ready_sum_words * 64 < h->ready_words)
		return -EPROTO;
	return svc_sock_init(svc, &svc->ctl, h->ctl_ring_off);
}

static int svc_handshake(struct ipk_svc *svc, const struct ipk_svc_opts *o)
{
	struct ipk_svc_hello hi;
	struct ipk_svc_welcome w;
	int fds[3] = {-1, -1, -1}, rc;
	memset(&hi, 0, sizeof hi);
	hi.magic = IPK_SVC_MAGIC;
	hi.version = IPK_SVC_VERSION;
	hi.ctl_entries = o->ctl_entries;
	hi.flags = o->flags;
	hi.buf_bytes = o->buf_bytes;
	hi.ring_bytes = o->ring_bytes;
	/* a daemon that refuses us (allow-list) may answer and hang up before our
	 * hello arrives: read its answer even when the send failed */
	rc = send(svc->ctl_fd, &hi, sizeof hi, MSG_NOSIGNAL) == (ssize_t)sizeof hi ? 0 : -errno;
	memset(&w, 0, sizeof w);
	if (svc_recv_welcome(svc->ctl_fd, &w, fds) < 0 || w.status < 0)
		return w.magic == IPK_SVC_MAGIC && w.status < 0 ? w.status : rc < 0 ? rc : -EPROTO;
	svc->bell_fd = fds[1];
	svc->ev_fd = fds[2];
	rc = svc_map(svc, fds[0], w.region_size);
	close(fds[0]);
	return rc;
}

struct ipk_svc *ipk_svc_open(const char *path, const struct ipk_svc_opts *o, int *err)
{
	struct ipk_svc_opts def;
	struct ipk_svc *svc;
	int rc;
	if (!o) {
		ipk_svc_opts_default(&def);
		o = &def;
	}
	svc = (struct ipk_svc *)calloc(1, sizeof *svc);
	if (!svc) {
		if (err)
			*err = -ENOMEM;
		return NULL;
	}
	svc->bell_fd = -1;
	svc->ev_fd = -1;
	pthread_mutex_init(&svc->lock, NULL);
	rc = svc->ctl_fd = svc_connect_ctl(path);
	if (rc >= 0)
		rc = svc_handshake(svc, o);
	if (rc < 0) {
		if (err)
			*err = rc;
		ipk_svc_close_all(svc);
		return NULL;
	}
	if (err)
		*err = 0;
	return svc;
}

void ipk_svc_close_all(struct ipk_svc *svc)
{
	int i;
	if (!svc)
		return;
	if (svc->cb_running)
		ipk_svc_callback_stop(svc);
	if (svc->base)
		munmap(svc->base, svc->size);
	if (svc->ctl_fd >= 0)
		close(svc->ctl_fd);
	if (svc->ev_fd >= 0)
		close(svc->ev_fd);
	if (svc->bell_fd >= 0)
		close(svc->bell_fd);
	for (i = 0; i < SVC_CLASSES; i++)
		free(svc->cls[i].free);
	while (svc->socks) {
		struct ipk_svc_sock *so = svc->socks;
		svc->socks = so->next;
		pthread_mutex_destroy(&so->lock);
		free(so);
	}
	pthread_mutex_destroy(&svc->lock);
	free(svc);
}

/* ------------------------------------------------------------ submission */

struct ipk_svc_sqe *ipk_svc_get_sqe(struct ipk_svc_sock *so)
{
	struct ipk_svc_sqe *e;
	/* acquire: the daemon's head store comes after it copied the entries out, so
	 * the slots it frees are not overwritten while it still reads them */
	uint32_t head = IPK_SVC_LOAD_ACQ(&so->ring->sq_head.v);
	if (so->sq_tail - head > so->sq_mask)
		return NULL;
	e = &so->sqes[so->sq_tail & so->sq_mask];
	so->sq_tail++;
	memset(e, 0, sizeof *e);
	return e;
}

static void svc_doorbell(struct ipk_svc *svc, int ring)
{
	uint64_t one = 1;
	__atomic_add_fetch(&svc->hdr->submit_seq.v, 1, __ATOMIC_RELEASE);
	if (!ring)
		return; /* quiet: the daemon's next pass takes it (its sleep check
		         * re-reads submit_seq, so one about to sleep does now) */
	/* seq_cst: forbids reading daemon_sleeping before the tail and submit_seq
	 * stores are visible; paired with the daemon's fence between setting the
	 * flag and re-reading submit_seq, one of the two sides always sees the other */
	IPK_SVC_FENCE();
	if (IPK_SVC_LOAD_RLX(&svc->hdr->daemon_sleeping.v)) {
		ssize_t r = write(svc->bell_fd, &one, sizeof one);
		(void)r; /* EAGAIN: the counter is saturated, the daemon wakes anyway */
	}
}

static int svc_submit(struct ipk_svc_sock *so, int ring)
{
	int n = (int)(so->sq_tail - so->sq_pub);
	if (so->svc->dead)
		return -EPIPE;
	if (n == 0)
		return 0;
	/* release: the entries' contents are visible before the new tail */
	IPK_SVC_STORE_REL(&so->ring->sq_tail.v, so->sq_tail);
	so->sq_pub = so->sq_tail;
	/* the socket's ready bit, then the summary bit if the word was empty
	 * (svc/proto.h): seq_cst read-modify-writes, ordered after the tail store
	 * (release) so the daemon that takes the bit sees the tail */
	if (so->ready_word && __atomic_fetch_or(so->ready_word, so->ready_mask, __ATOMIC_SEQ_CST) == 0)
		__atomic_fetch_or(so->ready_sum, so->sum_mask, __ATOMIC_SEQ_CST);
	svc_doorbell(so->svc, ring);
	return n;
}

int ipk_svc_submit(struct ipk_svc_sock *so) { return svc_submit(so, 1); }

void ipk_svc_ring(struct ipk_svc *svc)
{
	uint64_t one = 1;
	if (!svc || svc->dead)
		return;
	/* seq_cst: as svc_doorbell, daemon_sleeping is read after the quiet
	 * submits' stores are visible (the daemon re-reads submit_seq after raising
	 * it, so one of the two sides sees the other) */
	IPK_SVC_FENCE();
	if (IPK_SVC_LOAD_RLX(&svc->hdr->daemon_sleeping.v)) {
		ssize_t r = write(svc->bell_fd, &one, sizeof one);
		(void)r; /* EAGAIN: the counter is saturated, the daemon wakes anyway */
	}
}
int ipk_svc_submit_quiet(struct ipk_svc_sock *so) { return svc_submit(so, 0); }

/* ------------------------------------------------------------ completion */

int ipk_svc_peek_cqe(struct ipk_svc_sock *so, struct ipk_svc_cqe **cqe)
{
	uint32_t head = IPK_SVC_LOAD_RLX(&so->ring->cq_head.v);
	/* acquire: the entry's contents are read only after the tail that covers it */
	uint32_t tail = IPK_SVC_LOAD_ACQ(&so->ring->cq_tail.v);
	if (head == tail)
		return -EAGAIN;
	*cqe = &so->cqes[head & so->cq_mask];
	return 0;
}

void ipk_svc_cqe_seen(struct ipk_svc_sock *so, struct ipk_svc_cqe *cqe)
{
	uint32_t head = IPK_SVC_LOAD_RLX(&so->ring->cq_head.v);
	(void)cqe;
	/* release: our reads of the entry finish before the daemon may reuse the slot */
	IPK_SVC_STORE_REL(&so->ring->cq_head.v, head + 1);
}

static int svc_futex_wait(uint32_t *w, uint32_t val, int64_t timeout_ns)
{
	struct timespec ts, *tp = NULL;
	if (timeout_ns >= 0) {
		ts.tv_sec = (time_t)(timeout_ns / 1000000000);
		ts.tv_nsec = (long)(timeout_ns % 1000000000);
		tp = &ts;
	}
	/* shared futex (no FUTEX_PRIVATE_FLAG): the word is in a MAP_SHARED memfd */
	if (syscall(SYS_futex, w, FUTEX_WAIT, val, tp, NULL, 0) < 0 && errno == ETIMEDOUT)
		return -ETIME;
	return 0;
}

static int svc_dead(struct ipk_svc *svc)
{
	char b;
	if (svc->dead)
		return 1;
	/* the daemon never writes to the control socket after the welcome: readable
	 * means hang-up */
	if (recv(svc->ctl_fd, &b, 1, MSG_DONTWAIT | MSG_PEEK) == 0)
		svc->dead = 1;
	return svc->dead;
}

static uint64_t svc_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sleep on the futex `word` until `ready` says there is work, or timeout; `waiting`
 * counts the threads about to sleep on it, which the daemon reads after posting to
 * decide whether to FUTEX_WAKE (svc/proto.h: the app-wide word, or one socket's CQ
 * tail). Sleeps in slices of at most 100 ms to notice the daemon's death. The
 * hang-up check (a recv on the control socket) runs only after a slice that ran
 * out with nothing posted: a sleep the daemon's wake-up ends (every one while it
 * is busy) costs no system call for it, and a dead daemon is still seen within one
 * slice (a closed control socket also fails the next submit with -EPIPE). */
static int svc_sleep_on(struct ipk_svc *svc, uint32_t *word, uint32_t *waiting,
                        int (*ready)(void *), void *arg, int64_t timeout_ns)
{
	uint64_t end = timeout_ns < 0 ? UINT64_MAX : svc_now() + (uint64_t)timeout_ns;
	int quiet = 0; /* the last slice ran out with the word unchanged */
	for (;;) {
		uint32_t v = IPK_SVC_LOAD_ACQ(word);
		uint64_t now;
		int64_t slice = 100000000;
		if (ready(arg))
			return 0;
		if ((quiet || svc->dead) && svc_dead(svc))
			return -EPIPE;
		now = svc_now();
		if (now >= end)
			return -ETIME;
		if (end - now < (uint64_t)slice)
			slice = (int64_t)(end - now);
		__atomic_add_fetch(waiting, 1, __ATOMIC_RELAXED);
		/* seq_cst: forbids checking the CQ before `waiting` is visible; the
		 * daemon fences between posting and reading it (Dekker) */
		IPK_SVC_FENCE();
		quiet = 0;
		if (!ready(arg)) /* a word past v makes the wait return at once */
			quiet = svc_futex_wait(word, v, slice) == -ETIME;
		__atomic_sub_fetch(waiting, 1, __ATOMIC_RELAXED);
	}
}

/* The whole application: the app-wide futex word. */
static int svc_block(struct ipk_svc *svc, int (*ready)(void *), void *arg, int64_t timeout_ns)
{
	struct ipk_svc_region *h = svc->hdr;
	return svc_sleep_on(svc, &h->app_futex.v, &h->app_waiting.v, ready, arg, timeout_ns);
}

static int svc_sock_ready(void *arg)
{
	struct ipk_svc_sock *so = (struct ipk_svc_sock *)arg;
	return IPK_SVC_LOAD_ACQ(&so->ring->cq_tail.v) != IPK_SVC_LOAD_RLX(&so->ring->cq_head.v);
}

/* Sleep on this socket's own futex word (its CQ tail) until it has a completion:
 * only this socket's completions wake us (svc/proto.h, struct ipk_svc_cqh). */
static int svc_sock_block(struct ipk_svc_sock *so, int64_t timeout_ns)
{
	struct ipk_svc_ring *r = so->ring;
	return svc_sleep_on(so->svc, &r->cq_tail.v, &r->cq_head.waiting, svc_sock_ready, so,
	                    timeout_ns);
}

int ipk_svc_wait_cqe(struct ipk_svc_sock *so, struct ipk_svc_cqe **cqe, int64_t timeout_ns)
{
	int rc = ipk_svc_peek_cqe(so, cqe);
	if (rc == 0)
		return 0;
	rc = svc_sock_block(so, timeout_ns);
	if (rc < 0)
		return rc;
	return ipk_svc_peek_cqe(so, cqe);
}

struct svc_any {
	struct ipk_svc *svc;
	uint32_t v0;
};
static int svc_any_ready(void *arg)
{
	struct svc_any *a = (struct svc_any *)arg;
	return IPK_SVC_LOAD_ACQ(&a->svc->hdr->app_futex.v) != a->v0;
}

uint32_t ipk_svc_wake_count(const struct ipk_svc *svc)
{
	return svc ? IPK_SVC_LOAD_ACQ(&svc->hdr->app_futex.v) : 0;
}

int ipk_svc_wait_from(struct ipk_svc *svc, uint32_t seen, int64_t timeout_ns)
{
	struct svc_any a;
	if (!svc)
		return -EINVAL;
	a.svc = svc;
	a.v0 = seen;
	return svc_block(svc, svc_any_ready, &a, timeout_ns);
}

int ipk_svc_wait(struct ipk_svc *svc, int64_t timeout_ns)
{
	return ipk_svc_wait_from(svc, ipk_svc_wake_count(svc), timeout_ns);
}

/* ------------------------------------------------------------ callback mode */

/* Deliver what every socket has now; the list lock is dropped around each call so
 * that fn may create sockets (new ones are linked at the head, seen next round). */
static int svc_cb_round(struct ipk_svc *svc)
{
	struct ipk_svc_sock *so;
	int n = 0;
	pthread_mutex_lock(&svc->lock);
	for (so = svc->socks; so; so = so->next) {
		struct ipk_svc_cqe *c;
		while (ipk_svc_peek_cqe(so, &c) == 0) {
			struct ipk_svc_cqe copy = *c;
			ipk_svc_cqe_seen(so, c);
			pthread_mutex_unlock(&svc->lock);
			svc->cb_fn(so, &copy, svc->cb_arg);
			pthread_mutex_lock(&svc->lock);
			n++;
		}
	}
	pthread_mutex_unlock(&svc->lock);
	return n;
}

static void *svc_cb_main(void *arg)
{
	struct ipk_svc *svc = (struct ipk_svc *)arg;
	while (!__atomic_load_n(&svc->cb_stop, __ATOMIC_ACQUIRE)) {
		uint32_t v = IPK_SVC_LOAD_ACQ(&svc->hdr->app_futex.v);
		struct svc_any a;
		if (svc_cb_round(svc) > 0)
			continue;
		/* sleep until the futex moves past v (a completion posted after our
		 * round), bounded so that stop and the daemon's death are noticed */
		a.svc = svc;
		a.v0 = v;
		if (svc_block(svc, svc_any_ready, &a, 100000000) == -EPIPE)
			break;
	}
	return NULL;
}

int ipk_svc_callback_start(struct ipk_svc *svc, ipk_svc_cb fn, void *arg)
{
	int rc;
	if (!svc || !fn)
		return -EINVAL;
	if (svc->cb_running)
		return -EBUSY;
	svc->cb_fn = fn;
	svc->cb_arg = arg;
	svc->cb_stop = 0;
	rc = pthread_create(&svc->cb_thread, NULL, svc_cb_main, svc);
	if (rc)
		return -rc;
	svc->cb_running = 1;
	return 0;
}

int ipk_svc_callback_stop(struct ipk_svc *svc)
{
	if (!svc || !svc->cb_running)
		return -EINVAL;
	__atomic_store_n(&svc->cb_stop, 1, __ATOMIC_RELEASE);
	pthread_join(svc->cb_thread, NULL);
	svc->cb_running = 0;
	return 0;
}

void ipk_svc_sock_lock(struct ipk_svc_sock *so) { pthread_mutex_lock(&so->lock); }
void ipk_svc_sock_unlock(struct ipk_svc_sock *so) { pthread_mutex_unlock(&so->lock); }
uint32_t ipk_svc_sock_id(const struct ipk_svc_sock *so) { return so ? so->id : 0; }

int ipk_svc_sock_local(const struct ipk_svc_sock *so, struct ipk_svc_addr *out)
{
	struct ipk_svc_addr a;
	if (!so || !out)
		return -EINVAL;
	/* written before the ACCEPT completion that announced the socket was
	 * posted (its tail store is a release; the reader's load an acquire) and
	 * never again: a plain copy */
	memcpy(&a, &so->ring->local, sizeof a);
	if (a.family != IPK_SVC_AF_INET && a.family != IPK_SVC_AF_INET6)
		return -ENODATA;
	*out = a;
	return 0;
}

/* ------------------------------------------------------------ control ops */

/* One synchronous operation on the control ring (under svc->lock). */
static int svc_ctl(struct ipk_svc *svc, const struct ipk_svc_sqe *in, struct ipk_svc_cqe *out)
{
	struct ipk_svc_sqe *e;
	struct ipk_svc_cqe *c;
	int rc;
	pthread_mutex_lock(&svc->lock);
	e = ipk_svc_get_sqe(&svc->ctl);
	if (!e) {
		pthread_mutex_unlock(&svc->lock);
		return -EBUSY;
	}
	*e = *in;
	rc = ipk_svc_submit(&svc->ctl);
	if (rc >= 0)
		rc = ipk_svc_wait_cqe(&svc->ctl, &c, -1);
	if (rc == 0) {
		*out = *c;
		ipk_svc_cqe_seen(&svc->ctl, c);
	}
	pthread_mutex_unlock(&svc->lock);
	return rc;
}

static int svc_sock_new(struct ipk_svc *svc, uint64_t ring_off, struct ipk_svc_sock **out)
{
	struct ipk_svc_sock *so = (struct ipk_svc_sock *)calloc(1, sizeof *so);
	int rc;
	if (!so)
		return -ENOMEM;
	rc = svc_sock_init(svc, so, ring_off);
	if (rc < 0) {
		free(so);
		return rc;
	}
	pthread_mutex_lock(&svc->lock);
	so->next = svc->socks;
	if (so->next)
		so->next->prev = so;
	svc->socks = so;
	pthread_mutex_unlock(&svc->lock);
	*out = so;
	return 0;
}

int ipk_svc_socket(struct ipk_svc *svc, int type, uint32_t sq_entries, uint32_t cq_entries,
                   struct ipk_svc_sock **out)
{
	return ipk_svc_socket_prio(svc, type, sq_entries, cq_entries, 0xffffu, out);
}

int ipk_svc_socket_prio(struct ipk_svc *svc, int type, uint32_t sq_entries,
                        uint32_t cq_entries, unsigned level, struct ipk_svc_sock **out)
{
	struct ipk_svc_sqe e;
	struct ipk_svc_cqe c;
	int rc;
	if (!svc || !out)
		return -EINVAL;
	memset(&e, 0, sizeof e);
	e.opcode = IPK_SVC_OP_SOCKET;
	e.prio = level >= 0xffffu ? 0 : (uint16_t)(level + 1);
	e.arg = (uint32_t)type;
	e.len = sq_entries;
	e.arg2 = cq_entries;
	rc = svc_ctl(svc, &e, &c);
	if (rc < 0)
		return rc;
	if (c.res < 0)
		return c.res;
	return svc_sock_new(svc, c.ring_off, out);
}

int ipk_svc_adopt(struct ipk_svc *svc, uint32_t parent_id, uint32_t sq_entries,
                  uint32_t cq_entries, struct ipk_svc_sock **out)
{
	return ipk_svc_adopt_from(svc, 0, parent_id, sq_entries, cq_entries, out);
}

int ipk_svc_adopt_from(struct ipk_svc *svc, uint32_t app_id, uint32_t sock_id,
                       uint32_t sq_entries, uint32_t cq_entries, struct ipk_svc_sock **out)
{
	struct ipk_svc_sqe e;
	struct ipk_svc_cqe c;
	int rc;
	if (!svc || !out)
		return -EINVAL;
	memset(&e, 0, sizeof e);
	e.opcode = IPK_SVC_OP_ADOPT;
	e.arg = sock_id;
	e.buf_off = app_id; /* 0: the parent process's application, as before */
	e.len = sq_entries;
	e.arg2 = cq_entries;
	rc = svc_ctl(svc, &e, &c);
	if (rc < 0)
		return rc;
	if (c.res < 0)
		return c.res;
	return svc_sock_new(svc, c.ring_off, out);
}

int ipk_svc_accepted(struct ipk_svc *svc, const struct ipk_svc_cqe *cqe,
                     struct ipk_svc_sock **out)
{
	if (!svc || !cqe || !out || cqe->res < 0 || cqe->sock == 0)
		return -EINVAL;
	return svc_sock_new(svc, cqe->ring_off, out);
}

static int svc_close_id(struct ipk_svc *svc, uint32_t id, uint8_t flags)
{
	struct ipk_svc_sqe e;
	struct ipk_svc_cqe c;
	int rc;
	if (!svc)
		return -EINVAL;
	memset(&e, 0, sizeof e);
	e.opcode = IPK_SVC_OP_CLOSE;
	e.flags = flags;
	e.arg = id;
	rc = svc_ctl(svc, &e, &c);
	return rc < 0 ? rc : c.res;
}

int ipk_svc_close_id(struct ipk_svc *svc, uint32_t id) { return svc_close_id(svc, id, 0); }

static int svc_close(struct ipk_svc_sock *so, uint8_t flags)
{
	struct ipk_svc *svc;
	int rc;
	if (!so)
		return -EINVAL;
	rc = svc_close_id(so->svc, so->id, flags);
	svc = so->svc;
	pthread_mutex_lock(&svc->lock);
	if (so->prev)
		so->prev->next = so->next;
	else
		svc->socks = so->next;
	if (so->next)
		so->next->prev = so->prev;
	pthread_mutex_unlock(&svc->lock);
	pthread_mutex_destroy(&so->lock);
	free(so);
	return rc;
}

int ipk_svc_close(struct ipk_svc_sock *so) { return svc_close(so, 0); }

int ipk_svc_abort(struct ipk_svc_sock *so) { return svc_close(so, IPK_SVC_SQE_F_ABORT); }

int ipk_svc_close_flags(struct ipk_svc_sock *so, unsigned flags)
{
	if (flags & ~(IPK_SVC_SQE_F_ABORT | IPK_SVC_SQE_F_RST_UNREAD))
		return -EINVAL;
	return svc_close(so, (uint8_t)flags);
}

/* ------------------------------------------------------------ buffers */

static unsigned svc_class_of(uint32_t len)
{
	unsigned c = 0;
	while (((uint64_t)1 << (c + SVC_MIN_SHIFT)) < len)
		c++;
	return c;
}

static int svc_push_free(struct svc_class *k, uint64_t off)
{
	if (k->n == k->cap) {
		uint32_t cap = k->cap ? 2 * k->cap : 64;
		uint64_t *f = (uint64_t *)realloc(k->free, cap * sizeof *f);
		if (!f)
			return -ENOMEM;
		k->free = f;
		k->cap = cap;
	}
	k->free[k->n++] = off;
	return 0;
}

void *ipk_svc_buf_alloc(struct ipk_svc *svc, uint32_t len)
{
	const struct ipk_svc_region *h;
	unsigned c;
	uint64_t off, sz;
	void *p = NULL;
	if (!svc || len == 0)
		return NULL;
	h = svc->hdr;
	c = svc_class_of(len);
	sz = (uint64_t)1 << (c + SVC_MIN_SHIFT);
	pthread_mutex_lock(&svc->lock);
	if (svc->cls[c].n) {
		off = svc->cls[c].free[--svc->cls[c].n];
		p = svc->base + h->buf_area_off + off;
	} else {
		/* fresh blocks are aligned to their size (or 4 KiB), so a page-sized
		 * buffer never straddles two pages */
		uint64_t al = sz < 4096 ? sz : 4096;
		off = (svc->bump + al - 1) & ~(al - 1);
		if (off + sz <= h->buf_area_size) {
			svc->bump = off + sz;
			p = svc->base + h->buf_area_off + off;
		}
	}
	pthread_mutex_unlock(&svc->lock);
	return p;
}

void ipk_svc_buf_free(struct ipk_svc *svc, void *buf, uint32_t len)
{
	const struct ipk_svc_region *h;
	uint8_t *b = (uint8_t *)buf;
	unsigned c;
	if (!svc || !buf || len == 0)
		return;
	h = svc->hdr;
	c = svc_class_of(len);
	if (b < svc->base + h->buf_area_off ||
	    b + ((uint64_t)1 << (c + SVC_MIN_SHIFT)) > svc->base + h->buf_area_off + h->buf_area_size)
		return;
	pthread_mutex_lock(&svc->lock);
	svc_push_free(&svc->cls[c], (uint64_t)(b - svc->base - h->buf_area_off));
	pthread_mutex_unlock(&svc->lock);
}

/* ------------------------------------------------------------ prep */

/* Offset of a buffer in the region; a pointer outside it becomes an offset the
 * daemon refuses with -EFAULT. */
static uint64_t svc_off(const struct ipk_svc_sock *so, const void *buf)
{
	const uint8_t *b = (const uint8_t *)buf;
	if (!b || b < so->svc->base || b >= so->svc->base + so->svc->size)
		return UINT64_MAX;
	return (uint64_t)(b - so->svc->base);
}

void ipk_svc_prep_nop(struct ipk_svc_sqe *sqe) { sqe->opcode = IPK_SVC_OP_NOP; }

void ipk_svc_prep_bind(struct ipk_svc_sqe *sqe, const struct ipk_svc_addr *local)
{
	sqe->opcode = IPK_SVC_OP_BIND;
	sqe->addr = *local;
}

void ipk_svc_prep_bind_reuse(struct ipk_svc_sqe *sqe, const struct ipk_svc_addr *local)
{
	ipk_svc_prep_bind(sqe, local);
	sqe->flags = IPK_SVC_SQE_F_REUSEPORT;
}

void ipk_svc_prep_listen(struct ipk_svc_sqe *sqe, uint32_t backlog)
{
	sqe->opcode = IPK_SVC_OP_LISTEN;
	sqe->arg = backlog;
}

void ipk_svc_prep_accept(struct ipk_svc_sqe *sqe, uint32_t sq_entries, uint32_t cq_entries)
{
	sqe->opcode = IPK_SVC_OP_ACCEPT;
	sqe->len = sq_entries;
	sqe->arg2 = cq_entries;
}

void ipk_svc_prep_connect(struct ipk_svc_sqe *sqe, const struct ipk_svc_addr *peer)
{
	sqe->opcode = IPK_SVC_OP_CONNECT;
	sqe->addr = *peer;
}

void ipk_svc_prep_send(struct ipk_svc_sock *so, struct ipk_svc_sqe *sqe, const void *buf,
                       uint32_t len)
{
	sqe->opcode = IPK_SVC_OP_SEND;
	sqe->buf_off = svc_off(so, buf);
	sqe->len = len;
}

void ipk_svc_prep_recv(struct ipk_svc_sock *so, struct ipk_svc_sqe *sqe, void *buf,
                       uint32_t len)
{
	sqe->opcode = IPK_SVC_OP_RECV;
	sqe->buf_off = svc_off(so, buf);
	sqe->len = len;
}

void ipk_svc_prep_shutdown(struct ipk_svc_sqe *sqe) { sqe->opcode = IPK_SVC_OP_SHUTDOWN; }

void ipk_svc_prep_sendto(struct ipk_svc_sock *so, struct ipk_svc_sqe *sqe, const void *buf,
                         uint32_t len, const struct ipk_svc_addr *to)
{
	sqe->opcode = IPK_SVC_OP_SENDTO;
	sqe->buf_off = svc_off(so, buf);
	sqe->len = len;
	sqe->addr = *to;
}

void ipk_svc_prep_recvfrom(struct ipk_svc_sock *so, struct ipk_svc_sqe *sqe, void *buf,
                           uint32_t len)
{
	sqe->opcode = IPK_SVC_OP_RECVFROM;
	sqe->buf_off = svc_off(so, buf);
	sqe->len = len;
}

void ipk_svc_addr_ip4(struct ipk_svc_addr *a, uint32_t ip4_be, uint16_t port)
{
	uint8_t pb[2] = {(uint8_t)(port >> 8), (uint8_t)port};
	memset(a, 0, sizeof *a);
	a->family = IPK_SVC_AF_INET;
	/* network order on any host: the bytes, high first */
	memcpy(&a->port_be, pb, 2);
	memcpy(a->addr, &ip4_be, 4);
}

void ipk_svc_addr_ip6(struct ipk_svc_addr *a, const uint8_t ip6[16], uint16_t port)
{
	uint8_t pb[2] = {(uint8_t)(port >> 8), (uint8_t)port};
	memset(a, 0, sizeof *a);
	a->family = IPK_SVC_AF_INET6;
	memcpy(&a->port_be, pb, 2);
	memcpy(a->addr, ip6, 16);
}

void ipk_svc_stats(const struct ipk_svc *svc, struct ipk_svc_stats *st)
{
	if (!st)
		return;
	memset(st, 0, sizeof *st);
	if (!svc)
		return;
	st->tx_copied = IPK_SVC_LOAD_RLX(&svc->hdr->tx_copied);
	st->rx_copied = IPK_SVC_LOAD_RLX(&svc->hdr->rx_copied);
	st->bad_sqe = IPK_SVC_LOAD_RLX(&svc->hdr->bad_sqe);
	st->bad_index = IPK_SVC_LOAD_RLX(&svc->hdr->bad_index);
	st->sock_visits = IPK_SVC_LOAD_RLX(&svc->hdr->sock_visits);
	st->low_held_max = IPK_SVC_LOAD_RLX(&svc->hdr->low_held_max);
	st->low_rwnd_max = IPK_SVC_LOAD_RLX(&svc->hdr->low_rwnd_max);
	st->futex_wakes = IPK_SVC_LOAD_RLX(&svc->hdr->futex_wakes);
	st->tx_zc = IPK_SVC_LOAD_RLX(&svc->hdr->tx_zc);
	st->sends_zc = IPK_SVC_LOAD_RLX(&svc->hdr->sends_zc);
	st->sends_copied = IPK_SVC_LOAD_RLX(&svc->hdr->sends_copied);
	st->ev_wakes = IPK_SVC_LOAD_RLX(&svc->hdr->ev_wakes);
	st->urgent_wakes = IPK_SVC_LOAD_RLX(&svc->hdr->urgent_wakes);
}

uint32_t ipk_svc_features(const struct ipk_svc *svc)
{
	return svc ? IPK_SVC_LOAD_RLX(&svc->hdr->features) : 0;
}

void *ipk_svc_region(const struct ipk_svc *svc, uint64_t *size)
{
	if (size)
		*size = svc ? svc->size : 0;
	return svc ? svc->base : NULL;
}

uint64_t ipk_svc_sock_ring_off(const struct ipk_svc_sock *so)
{
	return so ? (uint64_t)((uint8_t *)so->ring - so->svc->base) : 0;
}

/* The ABI's sizes, checked at compile time (C99: a negative array size fails). */
typedef char svc_sqe_is_64[sizeof(struct ipk_svc_sqe) == 64 ? 1 : -1];
typedef char svc_cqe_is_64[sizeof(struct ipk_svc_cqe) == 64 ? 1 : -1];
typedef char svc_region_lines[sizeof(struct ipk_svc_region) == 7 * IPK_SVC_CL ? 1 : -1];
typedef char svc_ring_lines[sizeof(struct ipk_svc_ring) == 5 * IPK_SVC_CL ? 1 : -1];

/* ------------------------------------------------------------ for the POSIX shim */

static int svc_move_fd(int *fd, int min_fd)
{
	int n = fcntl(*fd, F_DUPFD_CLOEXEC, min_fd);
	if (n < 0)
		return -errno;
	close(*fd);
	*fd = n;
	return 0;
}

int ipk_svc_move_fds(struct ipk_svc *svc, int min_fd)
{
	int rc;
	if (!svc || min_fd < 0)
		return -EINVAL;
	rc = svc_move_fd(&svc->ctl_fd, min_fd);
	if (rc == 0)
		rc = svc_move_fd(&svc->bell_fd, min_fd);
	if (rc == 0 && svc->ev_fd >= 0)
		rc = svc_move_fd(&svc->ev_fd, min_fd);
	return rc;
}

uint32_t ipk_svc_app_id(const struct ipk_svc *svc)
{
	return svc ? svc->hdr->app_id : 0;
}

int ipk_svc_keep_on_exec(struct ipk_svc *svc)
{
	if (!svc)
		return -EINVAL;
	if (fcntl(svc->ctl_fd, F_SETFD, 0) < 0)
		return -errno;
	return svc->ctl_fd;
}

int ipk_svc_wake_fd(const struct ipk_svc *svc)
{
	return svc ? svc->ev_fd : -1;
}

void ipk_svc_wake_fd_arm(struct ipk_svc *svc, int on)
{
	uint32_t *ev;
	if (!svc || svc->ev_fd < 0)
		return;
	ev = &svc->hdr->app_waiting.ev;
	if (!on) {
		__atomic_sub_fetch(ev, 1, __ATOMIC_RELAXED);
		return;
	}
	__atomic_add_fetch(ev, 1, __ATOMIC_RELAXED);
	/* seq_cst: forbids the caller's re-check of its completions before `ev` is
	 * visible; the daemon fences between posting and reading it (Dekker) */
	IPK_SVC_FENCE();
}

void ipk_svc_wake_fd_lazy(struct ipk_svc *svc, int on)
{
	/* relaxed: a later submit's release store orders it before the SENDs it
	 * publishes (a SEND that fills a queue is submitted after lazy 0) */
	if (svc && svc->ev_fd >= 0)
		IPK_SVC_STORE_RLX(&svc->hdr->app_waiting.ev_lazy, on ? 1u : 0u);
}

int ipk_svc_hung_up(struct ipk_svc *svc)
{
	return svc ? svc_dead(svc) : 1;
}
