/*
 * The vhost-user transport, driver ("front-end") side: the role QEMU or DPDK's
 * virtio_user plays. The device (DPDK's net_vhost, a vhost-user-net back-end) listens
 * on a UNIX socket; we connect and configure it with messages (QEMU's
 * docs/interop/vhost-user.rst, "Front-end message types"):
 *
 *   SET_OWNER, GET_FEATURES, GET/SET_PROTOCOL_FEATURES, SET_FEATURES,
 *   SET_MEM_TABLE      our memory (one memfd) with its fd: the device maps it and
 *                      finds every ring and buffer address in it
 *   per queue: SET_VRING_CALL, SET_VRING_NUM, SET_VRING_BASE, SET_VRING_ADDR,
 *              SET_VRING_KICK, then SET_VRING_ENABLE
 *
 * "Guest physical" addresses (descriptor addresses) and "user" addresses (ring
 * addresses) are both our virtual addresses: the memory table maps each region with
 * guest_phys_addr == userspace_addr, so no translation is ever needed.
 *
 * Kick: an eventfd written per notification (usually skipped: DPDK's back-end polls
 * and sets VIRTQ_USED_F_NO_NOTIFY). Call: an eventfd the device writes when it used
 * buffers while the queue's interrupts are on (event mode).
 */
#include "virtio.h"
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum {
	VU_GET_FEATURES = 1, VU_SET_FEATURES = 2, VU_SET_OWNER = 3, VU_SET_MEM_TABLE = 5,
	VU_SET_VRING_NUM = 8, VU_SET_VRING_ADDR = 9, VU_SET_VRING_BASE = 10,
	VU_SET_VRING_KICK = 12, VU_SET_VRING_CALL = 13, VU_GET_PROTOCOL_FEATURES = 15,
	VU_SET_PROTOCOL_FEATURES = 16, VU_SET_VRING_ENABLE = 18,
};
#define VU_VERSION 0x1u
#define VU_FLAG_REPLY (1u << 2)
#define VU_FLAG_NEED_REPLY (1u << 3)
#define VU_F_PROTOCOL_FEATURES 30      /* a virtio feature bit only vhost-user uses */
#define VU_PROTO_REPLY_ACK 3
#define VU_VRING_NOFD (1u << 8)        /* SET_VRING_KICK/CALL: no fd, poll instead */
#define VU_MAX_REGIONS 8
#define VU_HDR 12u
#define VU_NQ 2

/* ------------------------------------------------------------ memory domain */

struct ipk_vu_mem {
	int fd;
	uint8_t *base;
	size_t size, used;
	int refs;
};

struct ipk_vu_mem *ipk_vu_mem_create(size_t size, char *err, size_t el)
{
	struct ipk_vu_mem *m = (struct ipk_vu_mem *)calloc(1, sizeof(*m));

	size = (size + 4095) & ~(size_t)4095;
	if (!m) {
		ipk_io_err(err, el, ENOMEM, "virtio: out of memory");
		return NULL;
	}
	m->fd = memfd_create("ipkit-virtio", MFD_CLOEXEC);
	if (m->fd < 0 || ftruncate(m->fd, (off_t)size) < 0) {
		ipk_io_err(err, el, errno, "virtio: memfd of %zu bytes: %s", size, strerror(errno));
		goto fail;
	}
	m->base = (uint8_t *)mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
	                          m->fd, 0);
	if (m->base == MAP_FAILED) {
		ipk_io_err(err, el, errno, "virtio: mmap of %zu bytes: %s", size, strerror(errno));
		m->base = NULL;
		goto fail;
	}
	m->size = size;
	m->refs = 1;
	return m;
fail:
	if (m->fd >= 0)
		close(m->fd);
	free(m);
	return NULL;
}

void ipk_vu_mem_put(struct ipk_vu_mem *m)
{
	if (!m || --m->refs > 0)
		return;
	munmap(m->base, m->size);
	close(m->fd);
	free(m);
}

/* ------------------------------------------------------------- transport */

struct vu {
	int sock;
	int reply_ack;                /* REPLY_ACK negotiated: every set is confirmed */
	uint64_t features;
	struct ipk_vu_mem *mem;
	int kick[VU_NQ], call[VU_NQ];
	struct ipk_vq *vq[VU_NQ];
	int event;
	char path[108];
};

/* One message: header, payload, and up to nfds descriptors as SCM_RIGHTS. */
static int vu_send(struct vu *u, uint32_t req, uint32_t flags, const void *body, uint32_t size,
                   const int *fds, int nfds)
{
	uint8_t buf[VU_HDR + 512];
	union { struct cmsghdr h; char c[CMSG_SPACE(sizeof(int) * VU_MAX_REGIONS)]; } cm;
	struct iovec iov = { buf, VU_HDR + size };
	struct msghdr mh;
	ssize_t r;

	if (size > sizeof(buf) - VU_HDR || nfds > VU_MAX_REGIONS)
		return -EINVAL;
	flags |= VU_VERSION;
	memcpy(buf, &req, 4);
	memcpy(buf + 4, &flags, 4);
	memcpy(buf + 8, &size, 4);
	if (size)
		memcpy(buf + VU_HDR, body, size);
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (nfds > 0) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.c;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		cm.h.cmsg_level = SOL_SOCKET;
		cm.h.cmsg_type = SCM_RIGHTS;
		cm.h.cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(&cm.h), fds, sizeof(int) * (size_t)nfds);
	}
	do
		r = sendmsg(u->sock, &mh, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	return r == (ssize_t)(VU_HDR + size) ? 0 : -EIO;
}

/* Read exactly n bytes within the reply time bound (the device is untrusted: a
 * device that never answers is an error, not a hang). */
static int vu_read_full(struct vu *u, uint8_t *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		struct pollfd pfd = { u->sock, POLLIN, 0 };
		ssize_t r;
		int pr = poll(&pfd, 1, 5000);

		if (pr == 0)
			return -ETIMEDOUT;
		if (pr < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		r = recv(u->sock, p + got, n - got, 0);
		if (r == 0)
			return -ECONNRESET;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)r;
	}
	return 0;
}

/* A reply to req carrying a u64: checked header (request, reply flag, size 8). */
static int vu_recv_u64(struct vu *u, uint32_t req, uint64_t *v)
{
	uint8_t b[VU_HDR + 8];
	uint32_t r, flags, size;
	int rc = vu_read_full(u, b, VU_HDR);

	if (rc < 0)
		return rc;
	memcpy(&r, b, 4);
	memcpy(&flags, b + 4, 4);
	memcpy(&size, b + 8, 4);
	if (r != req || !(flags & VU_FLAG_REPLY) || size != 8)
		return -EPROTO;
	rc = vu_read_full(u, b + VU_HDR, 8);
	if (rc < 0)
		return rc;
	memcpy(v, b + VU_HDR, 8);
	return 0;
}

static int vu_get_u64(struct vu *u, uint32_t req, uint64_t *v)
{
	int rc = vu_send(u, req, 0, NULL, 0, NULL, 0);

	return rc < 0 ? rc : vu_recv_u64(u, req, v);
}

/* A set message; with REPLY_ACK the device confirms it (0 = success). */
static int vu_set(struct vu *u, uint32_t req, const void *body, uint32_t size, const int *fds,
                  int nfds)
{
	uint64_t ack;
	int rc = vu_send(u, req, u->reply_ack ? VU_FLAG_NEED_REPLY : 0, body, size, fds, nfds);

	if (rc < 0 || !u->reply_ack)
		return rc;
	rc = vu_recv_u64(u, req, &ack);
	if (rc < 0)
		return rc;
	return ack == 0 ? 0 : -EIO;
}

static int vu_set_u64(struct vu *u, uint32_t req, uint64_t v)
{
	return vu_set(u, req, &v, 8, NULL, 0);
}

/* vring state: { u32 index, u32 num } */
static int vu_set_state(struct vu *u, uint32_t req, uint32_t idx, uint32_t num)
{
	uint32_t s[2] = { idx, num };

	return vu_set(u, req, s, 8, NULL, 0);
}

void *ipk_vu_mem_alloc(struct ipk_vu_mem *m, size_t size, size_t align)
{
	size_t at = (m->used + align - 1) & ~(align - 1);

	if (at > m->size || size > m->size - at)
		return NULL;
	m->used = at + size;
	memset(m->base + at, 0, size);
	return m->base + at;
}

static void *vu_alloc(void *ctx, size_t size, size_t align)
{
	return ipk_vu_mem_alloc(((struct vu *)ctx)->mem, size, align);
}

static uint64_t vu_dev_addr(void *ctx, const void *virt)
{
	(void)ctx;
	return (uint64_t)(uintptr_t)virt; /* guest_phys_addr == userspace_addr */
}

static int vu_notify(void *ctx, uint16_t qid)
{
	struct vu *u = (struct vu *)ctx;
	uint64_t one = 1;

	if (qid >= VU_NQ || u->kick[qid] < 0)
		return -EINVAL;
	return write(u->kick[qid], &one, 8) == 8 ? 0 : -errno;
}

static int vu_get_features(void *ctx, uint64_t *f, char *err, size_t el)
{
	struct vu *u = (struct vu *)ctx;
	int rc = vu_get_u64(u, VU_GET_FEATURES, f);

	if (rc < 0)
		return ipk_io_err(err, el, -rc, "virtio:vhost-user=%s: GET_FEATURES: %s", u->path,
		                  strerror(-rc));
	return 0;
}

/* With PROTOCOL_FEATURES offered we take it (rings then start disabled and need
 * SET_VRING_ENABLE) and ask for REPLY_ACK, so each set is confirmed. */
static int vu_set_features(void *ctx, uint64_t f, char *err, size_t el)
{
	struct vu *u = (struct vu *)ctx;
	uint64_t offered = 0, proto = 0;
	int rc;

	if ((rc = vu_get_u64(u, VU_GET_FEATURES, &offered)) < 0)
		goto fail;
	if (offered & IPK_VIRTIO_BIT(VU_F_PROTOCOL_FEATURES)) {
		f |= IPK_VIRTIO_BIT(VU_F_PROTOCOL_FEATURES);
		if ((rc = vu_get_u64(u, VU_GET_PROTOCOL_FEATURES, &proto)) < 0)
			goto fail;
		proto &= IPK_VIRTIO_BIT(VU_PROTO_REPLY_ACK);
		if ((rc = vu_set_u64(u, VU_SET_PROTOCOL_FEATURES, proto)) < 0)
			goto fail;
		u->reply_ack = proto != 0;
	}
	if ((rc = vu_set_u64(u, VU_SET_FEATURES, f)) < 0)
		goto fail;
	u->features = f;
	return 0;
fail:
	return ipk_io_err(err, el, -rc, "virtio:vhost-user=%s: feature negotiation: %s",
	                  u->path, strerror(-rc));
}

static uint16_t vu_queue_max(void *ctx, uint16_t qid)
{
	(void)ctx;
	/* vhost-user has no per-queue maximum; DPDK takes up to 32768 */
	return qid < VU_NQ ? 32768 : 0;
}

static int vu_queue_setup(void *ctx, struct ipk_vq *vq, char *err, size_t el)
{
	struct vu *u = (struct vu *)ctx;

	if (vq->qid >= VU_NQ)
		return ipk_io_err(err, el, EINVAL, "virtio:vhost-user: queue %u", vq->qid);
	u->vq[vq->qid] = vq;
	return 0;
}

/* Memory table: the whole domain as one region, guest address == our address. */
static int vu_mem_table(struct vu *u)
{
	uint64_t body[1 + 4 * VU_MAX_REGIONS];
	uint64_t va = (uint64_t)(uintptr_t)u->mem->base;

	memset(body, 0, sizeof(body));
	body[0] = 1;                 /* u32 nregions = 1, u32 padding */
	body[1] = va;                /* guest_phys_addr */
	body[2] = u->mem->size;      /* memory_size */
	body[3] = va;                /* userspace_addr */
	body[4] = 0;                 /* mmap_offset */
	return vu_set(u, VU_SET_MEM_TABLE, body, sizeof(body), &u->mem->fd, 1);
}

static int vu_vring(struct vu *u, struct ipk_vq *vq)
{
	uint32_t q = vq->qid;
	uint64_t addr[5];
	int rc;

	/* call first: the device may start the queue as soon as it has kick */
	if (u->call[q] >= 0)
		rc = vu_set(u, VU_SET_VRING_CALL, &(uint64_t){ q }, 8, &u->call[q], 1);
	else
		rc = vu_set_u64(u, VU_SET_VRING_CALL, q | VU_VRING_NOFD);
	if (rc < 0 || (rc = vu_set_state(u, VU_SET_VRING_NUM, q, vq->size)) < 0 ||
	    (rc = vu_set_state(u, VU_SET_VRING_BASE, q, 0)) < 0)
		return rc;
	/* { u32 index, u32 flags, u64 desc, u64 used, u64 avail, u64 log } */
	addr[0] = q;
	addr[1] = vq->desc_dev;
	addr[2] = vq->used_dev;
	addr[3] = vq->avail_dev;
	addr[4] = 0;
	if ((rc = vu_set(u, VU_SET_VRING_ADDR, addr, 40, NULL, 0)) < 0)
		return rc;
	if ((rc = vu_set(u, VU_SET_VRING_KICK, &(uint64_t){ q }, 8, &u->kick[q], 1)) < 0)
		return rc;
	if (u->features & IPK_VIRTIO_BIT(VU_F_PROTOCOL_FEATURES))
		rc = vu_set_state(u, VU_SET_VRING_ENABLE, q, 1);
	return rc;
}

static int vu_start(void *ctx, char *err, size_t el)
{
	struct vu *u = (struct vu *)ctx;
	int rc, q;

	if ((rc = vu_mem_table(u)) < 0)
		return ipk_io_err(err, el, -rc, "virtio:vhost-user=%s: SET_MEM_TABLE: %s", u->path,
		                  strerror(-rc));
	for (q = 0; q < VU_NQ; q++) {
		if (!u->vq[q])
			return ipk_io_err(err, el, EINVAL, "virtio:vhost-user: queue %d not set up", q);
		if ((rc = vu_vring(u, u->vq[q])) < 0)
			return ipk_io_err(err, el, -rc, "virtio:vhost-user=%s: queue %d set-up: %s",
			                  u->path, q, strerror(-rc));
	}
	return 0;
}

static int vu_queue_fd(void *ctx, uint16_t qid)
{
	struct vu *u = (struct vu *)ctx;

	return qid < VU_NQ && u->call[qid] >= 0 ? u->call[qid] : -EOPNOTSUPP;
}

static int vu_mac(void *ctx, uint8_t mac[6])
{
	(void)ctx;
	(void)mac;
	return -EOPNOTSUPP; /* no config space without the CONFIG protocol feature */
}

static void vu_close(void *ctx)
{
	struct vu *u = (struct vu *)ctx;
	int q;

	if (u->sock >= 0)
		close(u->sock); /* the device stops the rings on hang-up */
	for (q = 0; q < VU_NQ; q++) {
		if (u->kick[q] >= 0)
			close(u->kick[q]);
		if (u->call[q] >= 0)
			close(u->call[q]);
	}
	/* (-2: no call fd in poll-only mode) */
	ipk_vu_mem_put(u->mem);
	free(u);
}

static const struct ipk_virtio_tops vu_tops = {
	"vhost-user", vu_get_features, vu_set_features, vu_queue_max, vu_queue_setup, vu_start,
	vu_queue_fd, vu_mac, vu_close, { vu_alloc, vu_dev_addr, vu_notify, NULL },
};

static int vu_connect(struct vu *u, const char *path, int wait_ms, char *err, size_t el)
{
	struct sockaddr_un sa;
	int waited = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa.sun_path))
		return ipk_io_err(err, el, ENAMETOOLONG, "virtio:vhost-user=%s: path too long",
		                  path);
	memcpy(sa.sun_path, path, strlen(path));
	for (;;) {
		u->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (u->sock < 0)
			return ipk_io_err(err, el, errno, "virtio: socket: %s", strerror(errno));
		if (connect(u->sock, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return 0;
		close(u->sock);
		u->sock = -1;
		if ((errno != ENOENT && errno != ECONNREFUSED) || waited >= wait_ms)
			return ipk_io_err(err, el, errno, "virtio:vhost-user=%s: connect: %s (is the "
			                  "vhost-user device listening?)", path, strerror(errno));
		{
			struct timespec ts = { 0, 20 * 1000000L };
			nanosleep(&ts, NULL);
		}
		waited += 20;
	}
}

int ipk_vu_open(const char *path, struct ipk_vu_mem *mem, int wait_ms, int event,
                const struct ipk_virtio_tops **tops, void **ctx, char *err, size_t el)
{
	struct vu *u = (struct vu *)calloc(1, sizeof(*u));
	int q, rc;

	if (!u)
		return ipk_io_err(err, el, ENOMEM, "virtio: out of memory");
	u->sock = -1;
	for (q = 0; q < VU_NQ; q++)
		u->kick[q] = u->call[q] = -1;
	snprintf(u->path, sizeof(u->path), "%s", path);
	mem->refs++;
	u->mem = mem;
	for (q = 0; q < VU_NQ; q++) {
		u->kick[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		/* poll only (event 0): no call fd, the device is told to never signal */
		u->call[q] = event ? eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK) : -2;
		if (u->kick[q] < 0 || u->call[q] == -1) {
			rc = ipk_io_err(err, el, errno, "virtio: eventfd: %s", strerror(errno));
			goto fail;
		}
	}
	if ((rc = vu_connect(u, path, wait_ms, err, el)) < 0)
		goto fail;
	if ((rc = vu_send(u, VU_SET_OWNER, 0, NULL, 0, NULL, 0)) < 0) {
		rc = ipk_io_err(err, el, -rc, "virtio:vhost-user=%s: SET_OWNER: %s", path,
		                strerror(-rc));
		goto fail;
	}
	*tops = &vu_tops;
	*ctx = u;
	return 0;
fail:
	vu_close(u);
	return rc;
}
