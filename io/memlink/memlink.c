/*
 * memlink: an Ethernet link between two processes on one machine through shared
 * memory, with no kernel on the data path.
 *
 *   memlink:NAME,role=a|b[,busypoll=0|1][,slots=N][,mtu=M][,wait=MS][,queues=N][,queue=Q]
 *
 * role=a creates the region, a memfd sealed against resizing, and publishes it
 * through the door file /dev/shm/ipkit-ml-NAME (replacing a stale one; ml_ring.h);
 * role=b attaches to it, waiting up to `wait` ms (default 5000) for the creator,
 * refuses a region that is not sealed, and checks magic, version and every size on a
 * private copy of the header, which is all it uses afterwards. Frames are copied once each way
 * (why: ml_ring.h). MACs are fixed: 02:49:50:4b:00:0a for a, ...:0b for b.
 *
 * Wake-up: each side binds a unix datagram socket /dev/shm/ipkit-ml-NAME.<role>.sock;
 * ipk_io_fd returns it. Before sleeping the runtime calls ipk_io_arm, which sets the
 * ring's need_wakeup flag; a producer that finds the flag set after publishing
 * clears it and sends one datagram to the peer's socket. With busypoll=1 no socket
 * exists (ipk_io_fd: -EOPNOTSUPP), the flag is never set and the data path makes no system
 * call at all.
 *
 * Queues (queues=N, 1..16, the same on both sides): N independent queue pairs, queue
 * q in its own region /dev/shm/ipkit-ml-NAME.qQ (sockets NAME.qQ.a/.b.sock; with N = 1
 * the names above). An open with queue=Q serves that pair only (one worker each, as
 * with a NIC queue) and sends every frame on it. An open without queue= serves all N:
 * it receives from every queue and emulates a receiving RSS NIC on the peer's behalf,
 * placing each frame it sends on queue reta[hash % 128] with reta[i] = i % N and the
 * hash of ipk_rss_hash_packet under the symmetric key (the runtime's defaults, so a
 * peer's workers with IPK_STEER_QUEUES receive each flow on its own worker): IPv4 and
 * IPv6 TCP/UDP by the 4-tuple, fragments and other protocols by the addresses,
 * everything else (ARP) to queue 0.
 */
#include "io_internal.h"
#include "ml_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define ML_MAX_QUEUES 16
#define ML_RETA_SIZE 128

/* One queue pair: a region of its own. */
struct ml_q {
	uint8_t *base;
	size_t size;
	int region_fd;       /* the region's memfd */
	int sock;            /* our wake-up socket, -1 with busypoll */
	int armed;
	int attached;        /* role b holds the region's attached flag */
	struct ml_ring tx, rx;
	/* The region's geometry, private: role a's own choice, or role b's copy of the
	 * header it validated. Never re-read from shared memory, where the peer may
	 * change it at any time (issue 14 item 13). */
	uint32_t nslots, slot_size, mtu;
	struct sockaddr_un peer;
	char door[96];       /* /dev/shm/ipkit-ml-NAME: where role b finds the region */
	char sock_path[108];
	uint64_t bad_seen;   /* ring errors already added to the stats */
};

struct ml_priv {
	int role;            /* 0 = a, 1 = b */
	int nq;              /* queue pairs this open serves */
	int epfd;            /* several queues: epoll over their sockets, else -1 */
	unsigned rx_next;    /* receive round-robin start */
	struct ml_q q[ML_MAX_QUEUES];
	uint8_t key[IPK_RSS_KEY_LEN];
	uint16_t reta[ML_RETA_SIZE];
};

static struct ml_priv *ml_priv(const struct ipk_io *io) { return (struct ml_priv *)io->priv; }

static int ml_name_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > 48)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.'))
			return 0;
	}
	return 1;
}

static void ml_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Parsed and checked spec values. */
struct ml_opts {
	int role, busypoll;
	long slots, mtu, wait_ms, queues, queue; /* queue -1: all */
	int mtu_given;
};

static int ml_parse(const struct ipk_io_args *a, struct ml_opts *o, char *err, size_t el)
{
	const char *role = ipk_io_arg(a, "role");

	if (!ml_name_ok(a->dev))
		return ipk_io_err(err, el, EINVAL,
		                  "memlink: name '%s' must be 1-48 characters of [A-Za-z0-9._-]",
		                  a->dev);
	if (!role || (strcmp(role, "a") && strcmp(role, "b")))
		return ipk_io_err(err, el, EINVAL, "memlink:%s: role=a (creates) or role=b "
		                  "(attaches) is required", a->dev);
	o->role = role[0] == 'b';
	o->busypoll = (int)ipk_io_arg_int(a, "busypoll", 0, err, el);
	o->slots = ipk_io_arg_int(a, "slots", 1024, err, el);
	o->mtu = ipk_io_arg_int(a, "mtu", 1500, err, el);
	o->wait_ms = ipk_io_arg_int(a, "wait", 5000, err, el);
	o->mtu_given = ipk_io_arg(a, "mtu") != NULL;
	o->queues = ipk_io_arg_int(a, "queues", 1, err, el);
	o->queue = ipk_io_arg(a, "queue") ? ipk_io_arg_int(a, "queue", 0, err, el) : -1;
	if (o->busypoll < 0 || o->slots < 0 || o->mtu < 0 || o->wait_ms < 0)
		return -EINVAL;
	if (o->queues < 1 || o->queues > ML_MAX_QUEUES || o->queue >= o->queues ||
	    (ipk_io_arg(a, "queue") && o->queue < 0))
		return ipk_io_err(err, el, EINVAL, "memlink:%s: queues=%ld must be 1..%d and "
		                  "queue=Q below it", a->dev, o->queues, ML_MAX_QUEUES);
	if (o->busypoll > 1)
		return ipk_io_err(err, el, EINVAL, "memlink:%s: busypoll must be 0 or 1", a->dev);
	if (o->slots < (long)ML_MIN_SLOTS || o->slots > (long)ML_MAX_SLOTS ||
	    (o->slots & (o->slots - 1)))
		return ipk_io_err(err, el, EINVAL, "memlink:%s: slots=%ld must be a power of two "
		                  "in %u..%u", a->dev, o->slots, ML_MIN_SLOTS, ML_MAX_SLOTS);
	if (o->mtu < 68 || o->mtu > (long)ML_MAX_MTU)
		return ipk_io_err(err, el, EINVAL, "memlink:%s: mtu=%ld out of range 68..%u",
		                  a->dev, o->mtu, ML_MAX_MTU);
	if (o->wait_ms > 600000)
		return ipk_io_err(err, el, EINVAL, "memlink:%s: wait=%ld ms is more than 600000",
		                  a->dev, o->wait_ms);
	return 0;
}

/* Publish the region for role b: the door record, written to a temporary file and
 * renamed over the door so role b never reads half of one. */
static int ml_door_write(struct ml_q *p, const char *dev, char *err, size_t el)
{
	struct ml_door d;
	char tmp[128];
	int fd, rc = 0;

	memset(&d, 0, sizeof d);
	d.magic = ML_DOOR_MAGIC;
	d.version = ML_VERSION;
	d.door_size = sizeof d;
	d.pid = (uint32_t)getpid();
	d.fd = p->region_fd;
	d.region_size = p->size;
	snprintf(tmp, sizeof tmp, "%s.tmp%d", p->door, (int)getpid());
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return ipk_io_err(err, el, errno, "memlink:%s: cannot create %s: %s", dev, tmp,
		                  strerror(errno));
	if (write(fd, &d, sizeof d) != (ssize_t)sizeof d)
		rc = ipk_io_err(err, el, EIO, "memlink:%s: cannot write %s", dev, tmp);
	close(fd);
	if (rc == 0 && rename(tmp, p->door) < 0)
		rc = ipk_io_err(err, el, errno, "memlink:%s: cannot rename %s to %s: %s", dev, tmp,
		                p->door, strerror(errno));
	if (rc < 0)
		unlink(tmp);
	return rc;
}

/* The region as a memfd sealed at its size: neither side can shrink it (a mapping
 * past the end of its file raises SIGBUS) or grow it. */
static int ml_region_new(struct ml_q *p, size_t size, const char *dev, char *err, size_t el)
{
	p->region_fd = memfd_create(p->door + 9, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (p->region_fd < 0)
		return ipk_io_err(err, el, errno, "memlink:%s: memfd_create: %s", dev,
		                  strerror(errno));
	if (ftruncate(p->region_fd, (off_t)size) < 0)
		return ipk_io_err(err, el, errno, "memlink:%s: cannot size the region to %zu "
		                  "bytes: %s", dev, size, strerror(errno));
	if (fcntl(p->region_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		return ipk_io_err(err, el, errno, "memlink:%s: cannot seal the region: %s", dev,
		                  strerror(errno));
	return 0;
}

static int ml_create(struct ml_q *p, const struct ml_opts *o, const char *dev, char *err,
                     size_t el)
{
	uint32_t slot = ml_slot_size((uint32_t)o->mtu);
	size_t size = ml_region_size((uint32_t)o->slots, slot);
	struct ml_hdr *h;
	int rc;

	unlink(p->door); /* a stale door from a run that crashed */
	if ((rc = ml_region_new(p, size, dev, err, el)) < 0)
		return rc;
	p->base = (uint8_t *)mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, p->region_fd, 0);
	if (p->base == MAP_FAILED) {
		p->base = NULL;
		return ipk_io_err(err, el, errno, "memlink:%s: mmap: %s", dev, strerror(errno));
	}
	p->size = size;
	p->nslots = (uint32_t)o->slots;
	p->slot_size = slot;
	p->mtu = (uint32_t)o->mtu;
	h = (struct ml_hdr *)p->base;
	h->version = ML_VERSION;
	h->hdr_size = ML_HDR_SIZE;
	h->nslots = p->nslots;
	h->slot_size = slot;
	h->mtu = p->mtu;
	h->total_size = size;
	h->pid[0] = (uint32_t)getpid();
	/* release: the attacher acquires the magic and then reads the fields above. */
	__atomic_store_n(&h->magic, ML_MAGIC, __ATOMIC_RELEASE);
	return ml_door_write(p, dev, err, el);
}

/* Check a header written by the creator; never trust a field it holds. */
static int ml_check_hdr(const struct ml_hdr *h, size_t file_size, const struct ml_opts *o,
                        const char *dev, char *err, size_t el)
{
	uint32_t n = h->nslots, mtu = h->mtu;

	if (h->version != ML_VERSION || h->hdr_size != ML_HDR_SIZE)
		return ipk_io_err(err, el, EPROTO, "memlink:%s: region has version %u (header %u "
		                  "bytes), this build speaks version %u", dev, h->version,
		                  h->hdr_size, ML_VERSION);
	if (n < ML_MIN_SLOTS || n > ML_MAX_SLOTS || (n & (n - 1)) || mtu < 68 ||
	    mtu > ML_MAX_MTU || h->slot_size != ml_slot_size(mtu) || h->flags != 0 ||
	    h->total_size != ml_region_size(n, h->slot_size) || h->total_size != file_size)
		return ipk_io_err(err, el, EPROTO, "memlink:%s: region header is inconsistent "
		                  "(slots %u, mtu %u, size %zu); recreate it with role=a", dev, n,
		                  mtu, file_size);
	if (o->mtu_given && (uint32_t)o->mtu != mtu)
		return ipk_io_err(err, el, EINVAL, "memlink:%s: MTU mismatch: role a uses mtu=%u, "
		                  "this side asked for mtu=%ld", dev, mtu, o->mtu);
	return 0;
}

/* Read the creator's header into *h, a private copy: 1 when it is there, 0 when not
 * yet (no file, too short, no magic), negative when it is wrong. The magic first, on
 * its own: the creator stores it last, so a copy taken after seeing it holds the
 * fields written before (each read is a system call, a full barrier). */
static int ml_read_hdr(int fd, struct ml_hdr *h, size_t *file_size, const struct ml_opts *o,
                       const char *dev, char *err, size_t el)
{
	struct stat st;
	uint32_t magic = 0;
	int rc;

	if (fstat(fd, &st) < 0 || (size_t)st.st_size < ML_HDR_SIZE ||
	    pread(fd, &magic, sizeof magic, 0) != (ssize_t)sizeof magic || magic != ML_MAGIC)
		return 0;
	if (pread(fd, h, sizeof *h, 0) != (ssize_t)sizeof *h)
		return 0;
	*file_size = (size_t)st.st_size;
	rc = ml_check_hdr(h, *file_size, o, dev, err, el);
	return rc < 0 ? rc : 1;
}

/* The region role a published: its memfd through /proc, once the door is there.
 * 0 with region_fd set, 0 with region_fd -1 when not yet (no door, or a stale one
 * whose process is gone), negative when what the door leads to must be refused. */
static int ml_door_open(struct ml_q *p, const char *dev, char *err, size_t el)
{
	const int need = F_SEAL_SHRINK | F_SEAL_GROW;
	struct ml_door d;
	char path[64];
	int fd = open(p->door, O_RDONLY | O_CLOEXEC), seals;
	ssize_t n = fd >= 0 ? pread(fd, &d, sizeof d, 0) : -1;

	if (fd >= 0)
		close(fd);
	if (n >= 4 && d.magic == ML_MAGIC)
		return ipk_io_err(err, el, EPROTO, "memlink:%s: %s is a region of version 1 "
		                  "(an older ipkit); this build speaks version %u", dev, p->door,
		                  ML_VERSION);
	if (n != (ssize_t)sizeof d || d.magic != ML_DOOR_MAGIC)
		return 0;
	if (d.version != ML_VERSION || d.door_size != sizeof d)
		return ipk_io_err(err, el, EPROTO, "memlink:%s: %s has version %u, this build "
		                  "speaks version %u", dev, p->door, d.version, ML_VERSION);
	snprintf(path, sizeof path, "/proc/%u/fd/%d", d.pid, (int)d.fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return 0;
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & need) != need) {
		close(fd);
		return ipk_io_err(err, el, EPERM, "memlink:%s: the region behind %s is not sealed "
		                  "against resizing; refusing it", dev, p->door);
	}
	p->region_fd = fd;
	return 0;
}

/* Attach to the creator's region once it exists and carries the magic (bounded
 * wait): validate a private copy of its header, keep the geometry from that copy
 * only, and map exactly the size it implies. */
static int ml_attach(struct ml_q *p, const struct ml_opts *o, const char *dev, char *err,
                     size_t el)
{
	long waited = 0;
	struct ml_hdr copy;
	struct ml_hdr *h;
	size_t file_size = 0;
	int rc;

	for (;;) {
		if (p->region_fd < 0 && (rc = ml_door_open(p, dev, err, el)) < 0)
			return rc;
		if (p->region_fd >= 0 &&
		    (rc = ml_read_hdr(p->region_fd, &copy, &file_size, o, dev, err, el)) != 0)
			break;
		if (waited >= o->wait_ms)
			return ipk_io_err(err, el, ENOENT, "memlink:%s: no role=a side created "
			                  "%s within %ld ms", dev, p->door, o->wait_ms);
		ml_sleep_ms(10);
		waited += 10;
	}
	if (rc < 0)
		return rc;
	p->nslots = copy.nslots;
	p->slot_size = copy.slot_size;
	p->mtu = copy.mtu;
	p->size = ml_region_size(p->nslots, p->slot_size);
	p->base = (uint8_t *)mmap(NULL, p->size, PROT_READ | PROT_WRITE, MAP_SHARED, p->region_fd, 0);
	if (p->base == MAP_FAILED) {
		p->base = NULL;
		return ipk_io_err(err, el, errno, "memlink:%s: mmap: %s", dev, strerror(errno));
	}
	h = (struct ml_hdr *)p->base;
	{
		uint32_t zero = 0;
		if (!__atomic_compare_exchange_n(&h->attached, &zero, 1, 0, __ATOMIC_ACQ_REL,
		                                 __ATOMIC_RELAXED))
			return ipk_io_err(err, el, EBUSY, "memlink:%s: a role=b side is already "
			                  "attached", dev);
	}
	p->attached = 1;
	__atomic_store_n(&h->pid[1], (uint32_t)getpid(), __ATOMIC_RELAXED);
	return 0;
}

/* Ring views from the private geometry (the header in shared memory is not read). */
static void ml_rings(struct ml_q *p, int me)
{
	uint32_t n = p->nslots, ss = p->slot_size;
	int peer = !me;

	/* ring r carries frames from side r to side !r, out of side r's slots */
	ml_ring_init(&p->tx, (struct ml_ring_ctl *)(p->base + ml_ring_ctl_off(me, n)),
	             (struct ml_desc *)(p->base + ml_ring_desc_off(me, n)),
	             p->base + ml_slots_off(me, n, ss), n, ss);
	ml_ring_init(&p->rx, (struct ml_ring_ctl *)(p->base + ml_ring_ctl_off(peer, n)),
	             (struct ml_desc *)(p->base + ml_ring_desc_off(peer, n)),
	             p->base + ml_slots_off(peer, n, ss), n, ss);
	/* A re-attaching b continues from the indices it left (checked like any). */
	p->tx.local = __atomic_load_n(&p->tx.ctl->prod, __ATOMIC_ACQUIRE);
	p->rx.local = __atomic_load_n(&p->rx.ctl->cons, __ATOMIC_ACQUIRE);
}

static int ml_sock_open(struct ml_q *p, const char *dev, char *err, size_t el)
{
	struct sockaddr_un sa;

	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", p->sock_path);
	p->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (p->sock < 0)
		return ipk_io_err(err, el, errno, "memlink:%s: socket: %s", dev, strerror(errno));
	unlink(p->sock_path);
	if (bind(p->sock, (struct sockaddr *)&sa, sizeof sa) < 0)
		return ipk_io_err(err, el, errno, "memlink:%s: bind %s: %s", dev, p->sock_path,
		                  strerror(errno));
	return 0;
}

/* Region and socket names of queue pair `qi` (of nqueues). */
static void ml_q_names(struct ml_q *q, const char *dev, int role, long qi, long nqueues)
{
	static const char role_ch[2] = { 'a', 'b' };
	char name[64];

	if (nqueues > 1)
		snprintf(name, sizeof name, "%s.q%ld", dev, qi);
	else
		snprintf(name, sizeof name, "%s", dev);
	snprintf(q->door, sizeof q->door, "/dev/shm/ipkit-ml-%s", name);
	snprintf(q->sock_path, sizeof q->sock_path, "/dev/shm/ipkit-ml-%s.%c.sock", name,
	         role_ch[role]);
	q->peer.sun_family = AF_UNIX;
	snprintf(q->peer.sun_path, sizeof q->peer.sun_path, "/dev/shm/ipkit-ml-%s.%c.sock",
	         name, role_ch[!role]);
}

static int ml_q_open(struct ml_priv *p, struct ml_q *q, const struct ml_opts *o,
                     const char *dev, char *err, size_t el)
{
	int rc = p->role ? ml_attach(q, o, dev, err, el) : ml_create(q, o, dev, err, el);

	if (rc < 0)
		return rc;
	ml_rings(q, p->role);
	return o->busypoll ? 0 : ml_sock_open(q, dev, err, el);
}

/* Several queues behind one fd: an epoll set of their sockets. */
static int ml_epoll(struct ml_priv *p, const char *dev, char *err, size_t el)
{
	struct epoll_event ev;
	int i;

	if (p->nq < 2 || p->q[0].sock < 0)
		return 0;
	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (p->epfd < 0)
		return ipk_io_err(err, el, errno, "memlink:%s: epoll_create1: %s", dev,
		                  strerror(errno));
	for (i = 0; i < p->nq; i++) {
		memset(&ev, 0, sizeof ev);
		ev.events = EPOLLIN;
		if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->q[i].sock, &ev) < 0)
			return ipk_io_err(err, el, errno, "memlink:%s: epoll_ctl: %s", dev,
			                  strerror(errno));
	}
	return 0;
}

/* The receiving NIC's RSS for the peer: the symmetric key, reta[i] = i % queues. */
static void ml_rss_init(struct ml_priv *p, long nqueues)
{
	uint32_t i;

	ipk_rss_key_symmetric(p->key);
	for (i = 0; i < ML_RETA_SIZE; i++)
		p->reta[i] = (uint16_t)(i % (uint32_t)nqueues);
}

static int ml_open_inner(struct ipk_io *io, const struct ipk_io_args *a, char *err, size_t el)
{
	struct ml_priv *p = ml_priv(io);
	struct ml_opts o;
	struct ipk_pkt *probe;
	uint32_t mtu;
	int rc, i;

	p->epfd = -1;
	for (i = 0; i < ML_MAX_QUEUES; i++)
		p->q[i].region_fd = p->q[i].sock = -1;
	memset(&o, 0, sizeof o);
	rc = ml_parse(a, &o, err, el);
	if (rc < 0)
		return rc;
	p->role = o.role;
	p->nq = o.queue >= 0 ? 1 : (int)o.queues;
	ml_rss_init(p, o.queues);
	for (i = 0; i < p->nq; i++) {
		ml_q_names(&p->q[i], a->dev, p->role, o.queue >= 0 ? o.queue : i, o.queues);
		if ((rc = ml_q_open(p, &p->q[i], &o, a->dev, err, el)) < 0)
			return rc;
	}
	if ((rc = ml_epoll(p, a->dev, err, el)) < 0)
		return rc;
	mtu = p->q[0].mtu;
	for (i = 1; i < p->nq; i++)
		if (p->q[i].mtu != mtu)
			return ipk_io_err(err, el, EPROTO, "memlink:%s: the queues' regions differ "
			                  "in MTU; recreate them with role=a", a->dev);
	probe = ipk_pkt_alloc(io->pool);
	if (!probe)
		return ipk_io_err(err, el, ENOMEM, "memlink:%s: the packet pool is empty", a->dev);
	rc = mtu + 18 > ipk_pool_buf_size(io->pool) - probe->off;
	ipk_pkt_free(probe);
	if (rc)
		return ipk_io_err(err, el, EMSGSIZE, "memlink:%s: mtu=%u does not fit the pool's "
		                  "%u-byte buffers; use a larger buf_size or a smaller mtu", a->dev,
		                  mtu, ipk_pool_buf_size(io->pool));
	io->caps.offloads = IPK_CAP_SG;
	io->caps.mtu = (uint16_t)mtu;
	io->caps.nqueues = (uint16_t)p->nq;
	io->caps.link = IPK_LINK_ETH;
	memcpy(io->caps.mac, "\x02\x49\x50\x4b\x00\x0a", 6);
	io->caps.mac[5] = (uint8_t)(0x0a + p->role);
	return 0;
}

/* Fold the rings' corruption counters into the stats (they count in the ring so the
 * ring stays testable on its own). */
static void ml_count_bad(struct ipk_io *io)
{
	struct ml_priv *p = ml_priv(io);
	int i;

	for (i = 0; i < p->nq; i++) {
		struct ml_q *q = &p->q[i];
		uint64_t bad = q->rx.bad_index + q->rx.bad_desc + q->tx.bad_index;

		if (bad != q->bad_seen) {
			io->st.rx_errors += bad - q->bad_seen;
			q->bad_seen = bad;
		}
	}
}

/* Up to n frames of one queue, copied into our pool. */
static int ml_q_rx(struct ipk_io *io, struct ml_q *q, struct ipk_pkt **pkts, int n)
{
	uint32_t avail = ml_ring_cons_avail(&q->rx), i;
	int got = 0;

	/* Stay armed while nothing came: woken by something else (ipkitd's
	 * applications), the next arm then finds no wake-up to drain (ml_q_arm). */
	if (q->armed && avail) {
		ml_ring_cons_disarm(&q->rx);
		q->armed = 0;
	}
	for (i = 0; i < avail && got < n; i++) {
		const uint8_t *data;
		long len = ml_ring_cons_peek(&q->rx, &data);
		struct ipk_pkt *k;

		ml_ring_cons_next(&q->rx);
		if (len < 0)
			continue;
		k = ipk_pkt_alloc(io->pool);
		if (!k || (uint32_t)len > ipk_pool_buf_size(io->pool) - k->off) {
			if (k)
				ipk_pkt_free(k);
			io->st.rx_drops++;
			continue;
		}
		memcpy(ipk_pkt_mtod(k), data, (size_t)len);
		k->len = (uint32_t)len;
		pkts[got++] = k;
		io->st.rx_pkts++;
		io->st.rx_bytes += (uint64_t)len;
	}
	if (i)
		ml_ring_cons_release(&q->rx);
	return got;
}

/* Every queue served, round robin from a moving start so none starves. */
static int ml_rx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct ml_priv *p = ml_priv(io);
	int got = 0, i;

	for (i = 0; i < p->nq && got < n; i++)
		got += ml_q_rx(io, &p->q[(p->rx_next + (unsigned)i) % (unsigned)p->nq], pkts + got,
		               n - got);
	p->rx_next++;
	ml_count_bad(io);
	return got;
}

static void ml_wake_peer(struct ml_q *q)
{
	char b = 1;
	/* Best effort: a missing peer socket (busypoll peer, not attached yet) or a full
	 * one (a wake-up is already pending) needs nothing more. */
	(void)sendto(q->sock, &b, 1, MSG_DONTWAIT,
	             (const struct sockaddr *)&q->peer, sizeof q->peer);
}

static void ml_q_publish(struct ml_q *q)
{
	if (ml_ring_prod_publish(&q->tx)) {
		if (q->sock < 0) {
			/* busy-polling side: a sleeping peer still needs its wake-up */
			int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
			char b = 1;
			if (s >= 0) {
				(void)sendto(s, &b, 1, MSG_DONTWAIT, (const struct sockaddr *)&q->peer,
				             sizeof q->peer);
				close(s);
			}
		} else {
			ml_wake_peer(q);
		}
	}
}

static int ml_publish(struct ipk_io *io)
{
	struct ml_priv *p = ml_priv(io);
	int i;

	for (i = 0; i < p->nq; i++)
		ml_q_publish(&p->q[i]);
	return 0;
}

/* The queue a receiving RSS NIC would put this frame on (see the top of the file):
 * the core's rule for IPv4 and IPv6 (ipk_rss_hash_packet, which the workers' steering
 * check shares). Reads only the first `len` bytes of the first segment; headers the
 * core builds are there. Anything not IP (ARP), or too short to tell, goes to queue
 * 0; Neighbor Discovery is hashed on its addresses as a NIC does (the receiving
 * workers share it among themselves). */
static int ml_frame_queue(const struct ml_priv *p, const uint8_t *f, uint32_t len)
{
	uint32_t h;

	if (ipk_rss_hash_packet(p->key, 0, f, len, IPK_LINK_ETH, &h) == IPK_RSS_PKT_NONE)
		return 0;
	return ipk_rss_queue(p->reta, ML_RETA_SIZE, h);
}

static struct ml_q *ml_tx_queue(struct ml_priv *p, const struct ipk_pkt *k)
{
	int qi;

	if (p->nq == 1)
		return &p->q[0];
	qi = ml_frame_queue(p, ipk_pkt_mtod(k), k->len);
	return &p->q[qi >= 0 && qi < p->nq ? qi : 0];
}

static int ml_tx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct ml_priv *p = ml_priv(io);
	int i;

	for (i = 0; i < n; i++) {
		struct ipk_pkt *k = pkts[i], *s;
		struct ml_q *q = ml_tx_queue(p, k);
		uint32_t total = ipk_pkt_chain_len(k), len = 0;
		uint8_t *dst;

		if (total == 0 || total > q->tx.slot_size) {
			io->st.tx_errors++;
			ipk_pkt_free_chain(k);
			continue;
		}
		/* a full queue stops the burst: the frames stay in order for the next try */
		if (ml_ring_prod_space(&q->tx) == 0)
			break;
		dst = ml_ring_prod_slot(&q->tx);
		for (s = k; s; s = s->next) {
			memcpy(dst + len, ipk_pkt_mtod(s), s->len);
			len += s->len;
		}
		ml_ring_prod_commit(&q->tx, len);
		io->st.tx_pkts++;
		io->st.tx_bytes += len;
		ipk_pkt_free_chain(k);
	}
	io->st.tx_drops += (uint64_t)(n - i);
	ml_publish(io);
	ml_count_bad(io);
	return i;
}

static int ml_flush(struct ipk_io *io) { return ml_publish(io); }

static int ml_fd(const struct ipk_io *io)
{
	const struct ml_priv *p = ml_priv(io);

	return p->nq > 1 ? p->epfd : p->q[0].sock;
}

static int ml_q_arm(struct ipk_io *io, struct ml_q *q)
{
	char buf[16];
	int i;

	/* Still armed with the flag still up: the peer has not taken it, so it sent
	 * no wake-up since our last drain and there is nothing to drain (a system call
	 * saved per sleep; at worst a stale wake-up costs one spurious poll). */
	if (q->armed && __atomic_load_n(&q->rx.ctl->need_wakeup, __ATOMIC_RELAXED))
		return ml_ring_cons_arm(&q->rx);
	/* Drain old wake-ups so poll() sleeps until the next one (bounded: the socket
	 * holds few datagrams, the peer sends one per arm). */
	for (i = 0; i < 64 && recv(q->sock, buf, sizeof buf, MSG_DONTWAIT) > 0; i++)
		;
	if (i)
		io->st.wakeups++;
	q->armed = 1;
	return ml_ring_cons_arm(&q->rx);
}

static int ml_arm(struct ipk_io *io)
{
	struct ml_priv *p = ml_priv(io);
	int i, ready = 0;

	if (p->q[0].sock < 0)
		return 1; /* busy-poll: never sleep */
	for (i = 0; i < p->nq; i++)
		ready |= ml_q_arm(io, &p->q[i]);
	return ready;
}

static void ml_q_close(struct ml_q *p, int role)
{
	if (p->base && p->attached)
		__atomic_store_n(&((struct ml_hdr *)p->base)->attached, 0, __ATOMIC_RELEASE);
	if (p->base)
		munmap(p->base, p->size);
	if (p->region_fd >= 0)
		close(p->region_fd);
	if (p->sock >= 0) {
		close(p->sock);
		unlink(p->sock_path);
	}
	if (role == 0 && p->door[0])
		unlink(p->door);
	p->base = NULL;
	p->region_fd = p->sock = -1;
	p->attached = 0;
	p->door[0] = 0;
}

static void ml_close(struct ipk_io *io)
{
	struct ml_priv *p = ml_priv(io);
	int i;

	for (i = 0; i < ML_MAX_QUEUES; i++)
		ml_q_close(&p->q[i], p->role);
	if (p->epfd >= 0)
		close(p->epfd);
	p->epfd = -1;
}

static int ml_open(struct ipk_io *io, const struct ipk_io_args *a, char *err, size_t el)
{
	int rc = ml_open_inner(io, a, err, el);

	if (rc < 0)
		ml_close(io); /* idempotent: safe if the caller closes again */
	return rc;
}

const struct ipk_io_backend ipk_io_memlink_backend = {
	"memlink", sizeof(struct ml_priv), ml_open, ml_rx_burst, ml_tx_burst, ml_flush, ml_fd,
	ml_arm, ml_close,
};
