/*
 * The virtio PCI transport in user space: sysfs discovery, capabilities, register
 * access for legacy and modern devices, hugepage DMA memory. The contract is in
 * pci.h; section numbers are the virtio 1.2 specification's.
 */
#include "pci.h"
#include "virtio.h"
#include "io_internal.h"   /* ipk_io_err */

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ sysfs */

/* First line of dir/name as a number (sysfs vendor/device: "0x1af4"). -1 on error. */
static long sysfs_num(const char *dir, const char *name)
{
	char path[256], buf[32];
	ssize_t r;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r <= 0)
		return -1;
	buf[r] = '\0';
	return strtol(buf, NULL, 0);
}

/* The kernel driver bound to the device, or "" when none (its `driver` link). */
static void sysfs_driver(const char *dir, char *out, size_t cap)
{
	char path[256], link[PATH_MAX];
	ssize_t r;

	out[0] = '\0';
	snprintf(path, sizeof(path), "%s/driver", dir);
	r = readlink(path, link, sizeof(link) - 1);
	if (r <= 0)
		return;
	link[r] = '\0';
	snprintf(out, cap, "%.63s", strrchr(link, '/') ? strrchr(link, '/') + 1 : link);
}

/* -------------------------------------------------------- config space */

static int cfg_read(struct ipk_vpci *d, uint32_t off, void *buf, size_t n)
{
	return pread(d->cfg_fd, buf, n, off) == (ssize_t)n ? 0 : -EIO;
}

/* PCI command register (PCI 3.0 §6.2.2): I/O space, memory space, bus master. */
static int cfg_enable(struct ipk_vpci *d)
{
	uint8_t c[2];

	if (cfg_read(d, 4, c, 2) < 0)
		return -EIO;
	c[0] |= (uint8_t)(d->legacy ? 0x1 : 0x2) | 0x4;
	return pwrite(d->cfg_fd, c, 2, 4) == 2 ? 0 : -errno;
}

static uint32_t le32_at(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Map memory BAR `bar` (its resourceN file) once. */
static int bar_map(struct ipk_vpci *d, uint8_t bar)
{
	char path[256];
	struct stat st;
	void *p;
	int fd;

	if (bar > 5)
		return -EINVAL;
	if (d->bar[bar])
		return 0;
	snprintf(path, sizeof(path), "%s/resource%u", d->dir, bar);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || st.st_size <= 0) {
		close(fd);
		return -EINVAL;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -errno;
	d->bar[bar] = (uint8_t *)p;
	d->bar_len[bar] = (size_t)st.st_size;
	return 0;
}

/* One virtio vendor capability (§4.1.4: struct virtio_pci_cap at cap[0..15],
 * notify_off_multiplier at 16 for the notify one). */
static int cap_take(struct ipk_vpci *d, const uint8_t *cap, uint32_t caplen)
{
	struct ipk_vpci_region *r;
	uint8_t type = cap[3], bar = cap[4];
	uint32_t off = le32_at(cap + 8), len = le32_at(cap + 12);
	int rc;

	switch (type) {
	case IPK_VPCI_CAP_COMMON: r = &d->common; break;
	case IPK_VPCI_CAP_NOTIFY: r = &d->notify; break;
	case IPK_VPCI_CAP_ISR: r = &d->isr; break;
	case IPK_VPCI_CAP_DEVICE: r = &d->device; break;
	default: return 0; /* PCI cfg access and unknown types: not used */
	}
	/* §4.1.4.1: the driver uses the first capability of each type it can use */
	if (r->found || bar > 5)
		return 0;
	if (type == IPK_VPCI_CAP_NOTIFY) {
		if (caplen < 20)
			return -EINVAL;
		d->notify_mult = le32_at(cap + 16);
	}
	rc = bar_map(d, bar);
	if (rc < 0)
		return rc;
	/* the region must lie inside the BAR we mapped */
	if (len == 0 || off > d->bar_len[bar] || len > d->bar_len[bar] - off)
		return -EINVAL;
	r->bar = bar;
	r->off = off;
	r->len = len;
	r->p = d->bar[bar] + off;
	r->found = 1;
	return 0;
}

/* Walk the capability list (PCI 3.0 §6.7): at most 48 entries (the 192 bytes
 * after the header hold no more), each inside the 256-byte config space. */
static int caps_parse(struct ipk_vpci *d, char *err, size_t errlen)
{
	uint8_t cfg[256];
	uint32_t ptr;
	int i, rc;

	memset(cfg, 0, sizeof(cfg));
	if (pread(d->cfg_fd, cfg, sizeof(cfg), 0) < 64)
		return ipk_io_err(err, errlen, EIO,
		                  "virtio-pci %s: cannot read config space", d->addr);
	if (!(cfg[6] & 0x10))
		return ipk_io_err(err, errlen, EINVAL,
		                  "virtio-pci %s: no capability list", d->addr);
	ptr = cfg[0x34] & 0xfcu;
	for (i = 0; i < 48 && ptr; i++) {
		uint32_t caplen;

		if (ptr < 0x40 || ptr > 256 - 16)
			return ipk_io_err(err, errlen, EINVAL,
			                  "virtio-pci %s: capability pointer 0x%x out of range",
			                  d->addr, ptr);
		caplen = cfg[ptr + 2];
		if (cfg[ptr] == 0x09) { /* vendor specific: a virtio capability */
			if (caplen < 16 || ptr + caplen > 256)
				return ipk_io_err(err, errlen, EINVAL,
				                  "virtio-pci %s: capability at 0x%x has length %u",
				                  d->addr, ptr, caplen);
			rc = cap_take(d, cfg + ptr, caplen);
			if (rc < 0)
				return ipk_io_err(err, errlen, -rc,
				                  "virtio-pci %s: capability type %u at 0x%x: "
				                  "BAR %u: %s", d->addr, cfg[ptr + 3], ptr,
				                  cfg[ptr + 4],
				                  rc == -EINVAL ? "region outside the BAR" :
				                                  strerror(-rc));
		}
		ptr = cfg[ptr + 1] & 0xfcu;
	}
	if (ptr)
		return ipk_io_err(err, errlen, EINVAL,
		                  "virtio-pci %s: capability list does not end", d->addr);
	if (!d->common.found || !d->notify.found || !d->isr.found || !d->device.found)
		return ipk_io_err(err, errlen, ENODEV,
		                  "virtio-pci %s: missing virtio capability (common %d "
		                  "notify %d isr %d device %d)", d->addr, d->common.found,
		                  d->notify.found, d->isr.found, d->device.found);
	/* §4.1.4.3: the common configuration is 0x38 bytes; §4.1.4.8 ISR 1 byte */
	if (d->common.len < 0x38 || d->device.len < 6)
		return ipk_io_err(err, errlen, EINVAL,
		                  "virtio-pci %s: common/device config too short", d->addr);
	return 0;
}

/* §4.1.4.10: a legacy device's configuration starts at 0x14, or at 0x18 when MSI-X
 * is enabled (two vector registers come first). MSI-X is on when its capability
 * (id 0x11, PCI 3.0 §6.8.2) has bit 15 of Message Control set; a kernel driver's
 * removal switches it off, but an administrator may have left it on. */
static uint32_t legacy_cfg_off(struct ipk_vpci *d)
{
	uint8_t cfg[256];
	uint32_t ptr;
	int i;

	memset(cfg, 0, sizeof(cfg));
	if (pread(d->cfg_fd, cfg, sizeof(cfg), 0) < 64 || !(cfg[6] & 0x10))
		return 0x14;
	ptr = cfg[0x34] & 0xfcu;
	for (i = 0; i < 48 && ptr >= 0x40 && ptr <= 256 - 4; i++) {
		if (cfg[ptr] == 0x11)
			return (cfg[ptr + 3] & 0x80) ? 0x18 : 0x14;
		ptr = cfg[ptr + 1] & 0xfcu;
	}
	return 0x14;
}

int ipk_vpci_open(struct ipk_vpci *d, const char *sysfs_root, const char *addr, char *err,
                  size_t errlen)
{
	char path[256], drv[64];
	long ven, dev;
	int rc;

	memset(d, 0, sizeof(*d));
	d->io_fd = d->cfg_fd = -1;
	if (!sysfs_root || !addr || strlen(addr) >= sizeof(d->addr) || strchr(addr, '/'))
		return ipk_io_err(err, errlen, EINVAL, "virtio-pci: bad PCI address");
	snprintf(d->addr, sizeof(d->addr), "%s", addr);
	snprintf(d->dir, sizeof(d->dir), "%s/bus/pci/devices/%s", sysfs_root, addr);
	ven = sysfs_num(d->dir, "vendor");
	dev = sysfs_num(d->dir, "device");
	if (ven < 0)
		return ipk_io_err(err, errlen, ENODEV,
		                  "virtio-pci %s: no such PCI device (%s)", addr,
		                  d->dir);
	if (ven != IPK_VPCI_VENDOR ||
	    (dev != IPK_VPCI_DEV_NET_LEGACY && dev != IPK_VPCI_DEV_NET_MODERN))
		return ipk_io_err(err, errlen, ENODEV,
		                  "virtio-pci %s: %04lx:%04lx is not a virtio-net device "
		                  "(1af4:1000 or 1af4:1041)", addr, ven, dev);
	sysfs_driver(d->dir, drv, sizeof(drv));
	if (drv[0])
		return ipk_io_err(err, errlen, EBUSY,
		                  "virtio-pci %s: bound to kernel driver %s (EBUSY); ipkit "
		                  "does not unbind it: an administrator must", addr, drv);
	d->legacy = dev == IPK_VPCI_DEV_NET_LEGACY;
	snprintf(path, sizeof(path), "%s/config", d->dir);
	d->cfg_fd = open(path, O_RDWR | O_CLOEXEC);
	if (d->cfg_fd < 0) {
		rc = errno;
		ipk_vpci_close(d);
		return ipk_io_err(err, errlen, rc, "virtio-pci %s: %s: %s (needs root)", addr, path,
		                  strerror(rc));
	}
	if (d->legacy) {
		/* §4.1.4.10: legacy registers are in I/O BAR 0; sysfs serves port I/O on
		 * its resource file with pread/pwrite of 1, 2 or 4 bytes */
		snprintf(path, sizeof(path), "%s/resource0", d->dir);
		d->io_fd = open(path, O_RDWR | O_CLOEXEC);
		if (d->io_fd < 0) {
			rc = errno;
			ipk_vpci_close(d);
			return ipk_io_err(err, errlen, rc, "virtio-pci %s: %s: %s", addr, path,
			                  strerror(rc));
		}
		d->legacy_cfg = legacy_cfg_off(d);
	} else {
		rc = caps_parse(d, err, errlen);
		if (rc < 0) {
			ipk_vpci_close(d);
			return rc;
		}
	}
	rc = cfg_enable(d);
	if (rc < 0) {
		ipk_vpci_close(d);
		return ipk_io_err(err, errlen, -rc,
		                  "virtio-pci %s: cannot enable bus mastering: %s",
		                  addr, strerror(-rc));
	}
	return 0;
}

void ipk_vpci_close(struct ipk_vpci *d)
{
	int i;

	/* the device must stop using our memory before it is unmapped (§2.1: status 0
	 * resets it) */
	if (d->io_fd >= 0 || d->common.found)
		(void)ipk_vpci_reset(d);
	for (i = 0; i < 6; i++)
		if (d->bar[i])
			munmap(d->bar[i], d->bar_len[i]);
	if (d->io_fd >= 0)
		close(d->io_fd);
	if (d->cfg_fd >= 0)
		close(d->cfg_fd);
	if (d->dma)
		munmap(d->dma, d->dma_len);
	if (d->huge_added > 0) {
		/* give back what we reserved */
		FILE *f = fopen(d->huge_path, "r+");
		long now = 0;

		if (f) {
			if (fscanf(f, "%ld", &now) == 1 && now >= d->huge_added) {
				rewind(f);
				fprintf(f, "%ld\n", now - d->huge_added);
			}
			fclose(f);
		}
	}
	memset(d, 0, sizeof(*d));
	d->io_fd = d->cfg_fd = -1;
}

/* ------------------------------------------------------------ registers */

/* §4.1.4.10 legacy I/O BAR layout (no MSI-X: device config at 0x14) */
#define LEG_HOST_FEATURES 0x00
#define LEG_GUEST_FEATURES 0x04
#define LEG_QUEUE_PFN 0x08
#define LEG_QUEUE_SIZE 0x0c
#define LEG_QUEUE_SEL 0x0e
#define LEG_QUEUE_NOTIFY 0x10
#define LEG_STATUS 0x12

/* §4.1.4.3 struct virtio_pci_common_cfg */
#define COM_DFSELECT 0x00
#define COM_DF 0x04
#define COM_GFSELECT 0x08
#define COM_GF 0x0c
#define COM_NUM_QUEUES 0x12
#define COM_STATUS 0x14
#define COM_Q_SELECT 0x16
#define COM_Q_SIZE 0x18
#define COM_Q_MSIX 0x1a
#define COM_Q_ENABLE 0x1c
#define COM_Q_NOFF 0x1e
#define COM_Q_DESC 0x20
#define COM_Q_DRIVER 0x28
#define COM_Q_DEVICE 0x30

/* Legacy registers are in the guest's native byte order (§4.1.4.10 and §2.7.2
 * "Legacy Interfaces"); sysfs hands an I/O read or write of 1, 2 or 4 bytes over as
 * a native value of that width. */
static uint32_t io_rd(struct ipk_vpci *d, uint32_t off, int n)
{
	uint8_t v8 = 0;
	uint16_t v16 = 0;
	uint32_t v32 = 0;
	void *p = n == 1 ? (void *)&v8 : n == 2 ? (void *)&v16 : (void *)&v32;

	if (pread(d->io_fd, p, (size_t)n, off) != n)
		return 0;
	return n == 1 ? v8 : n == 2 ? v16 : v32;
}

static void io_wr(struct ipk_vpci *d, uint32_t off, int n, uint32_t v)
{
	uint8_t v8 = (uint8_t)v;
	uint16_t v16 = (uint16_t)v;
	const void *p = n == 1 ? (const void *)&v8 : n == 2 ? (const void *)&v16 : (const void *)&v;

	(void)!pwrite(d->io_fd, p, (size_t)n, off);
}

/* Modern registers: MMIO through the mapping, one access of the register's width
 * (volatile: the compiler must neither merge nor drop them), little-endian
 * (§4.1.3.1) whatever the CPU. */
static uint32_t mm_rd(const struct ipk_vpci_region *r, uint32_t off, int n)
{
	volatile uint8_t *p = r->p + off;

	if (n == 1)
		return *p;
	if (n == 2)
		return le16toh(*(volatile uint16_t *)(volatile void *)p);
	return le32toh(*(volatile uint32_t *)(volatile void *)p);
}

static void mm_wr(const struct ipk_vpci_region *r, uint32_t off, int n, uint32_t v)
{
	volatile uint8_t *p = r->p + off;

	if (n == 1)
		*p = (uint8_t)v;
	else if (n == 2)
		*(volatile uint16_t *)(volatile void *)p = htole16((uint16_t)v);
	else
		*(volatile uint32_t *)(volatile void *)p = htole32(v);
}

uint8_t ipk_vpci_status(struct ipk_vpci *d)
{
	return (uint8_t)(d->legacy ? io_rd(d, LEG_STATUS, 1) : mm_rd(&d->common, COM_STATUS, 1));
}

void ipk_vpci_set_status(struct ipk_vpci *d, uint8_t s)
{
	if (d->legacy)
		io_wr(d, LEG_STATUS, 1, s);
	else
		mm_wr(&d->common, COM_STATUS, 1, s);
}

/* §4.1.4.3.2: writing 0 resets; the reset is complete when status reads back 0.
 * Bounded: a device that never finishes is reported, not waited for forever. */
int ipk_vpci_reset(struct ipk_vpci *d)
{
	int i;

	ipk_vpci_set_status(d, 0);
	for (i = 0; i < 1000; i++) {
		if (ipk_vpci_status(d) == 0)
			return 0;
		usleep(1000);
	}
	return -ETIMEDOUT;
}

uint64_t ipk_vpci_device_features(struct ipk_vpci *d)
{
	uint64_t lo, hi;

	if (d->legacy)
		return io_rd(d, LEG_HOST_FEATURES, 4); /* 32 bits only */
	mm_wr(&d->common, COM_DFSELECT, 4, 0);
	lo = mm_rd(&d->common, COM_DF, 4);
	mm_wr(&d->common, COM_DFSELECT, 4, 1);
	hi = mm_rd(&d->common, COM_DF, 4);
	return lo | hi << 32;
}

void ipk_vpci_driver_features(struct ipk_vpci *d, uint64_t f)
{
	if (d->legacy) {
		io_wr(d, LEG_GUEST_FEATURES, 4, (uint32_t)f);
		return;
	}
	mm_wr(&d->common, COM_GFSELECT, 4, 0);
	mm_wr(&d->common, COM_GF, 4, (uint32_t)f);
	mm_wr(&d->common, COM_GFSELECT, 4, 1);
	mm_wr(&d->common, COM_GF, 4, (uint32_t)(f >> 32));
}

uint8_t ipk_vpci_cfg8(struct ipk_vpci *d, uint32_t i)
{
	if (d->legacy)
		return (uint8_t)io_rd(d, d->legacy_cfg + i, 1);
	return i < d->device.len ? (uint8_t)mm_rd(&d->device, i, 1) : 0;
}

uint16_t ipk_vpci_queue_size(struct ipk_vpci *d, uint16_t qid, uint16_t want)
{
	uint16_t max;

	if (d->legacy) {
		io_wr(d, LEG_QUEUE_SEL, 2, qid);
		max = (uint16_t)io_rd(d, LEG_QUEUE_SIZE, 2);
		/* §4.1.5.1.3.1 legacy: the device's size is the size; a bad one (not a
		 * power of two) is refused by the caller's ring set-up */
		return max;
	}
	if (qid >= mm_rd(&d->common, COM_NUM_QUEUES, 2))
		return 0;
	mm_wr(&d->common, COM_Q_SELECT, 2, qid);
	max = (uint16_t)mm_rd(&d->common, COM_Q_SIZE, 2);
	return want < max ? want : max;
}

int ipk_vpci_queue_setup(struct ipk_vpci *d, const struct ipk_vq *vq)
{
	uint32_t noff;

	if (d->legacy) {
		/* §4.1.5.1.3.1 legacy: one page frame number for the whole ring, laid
		 * out as virtq.c does it (4096-byte alignment of the used ring) */
		if (vq->desc_dev & 4095u || (vq->desc_dev >> 12) > 0xffffffffu)
			return -EINVAL;
		io_wr(d, LEG_QUEUE_SEL, 2, vq->qid);
		io_wr(d, LEG_QUEUE_PFN, 4, (uint32_t)(vq->desc_dev >> 12));
		return 0;
	}
	if (vq->qid >= 4)
		return -EINVAL;
	mm_wr(&d->common, COM_Q_SELECT, 2, vq->qid);
	mm_wr(&d->common, COM_Q_SIZE, 2, vq->size);
	mm_wr(&d->common, COM_Q_MSIX, 2, 0xffff); /* VIRTIO_MSI_NO_VECTOR: we poll */
	mm_wr(&d->common, COM_Q_DESC, 4, (uint32_t)vq->desc_dev);
	mm_wr(&d->common, COM_Q_DESC + 4, 4, (uint32_t)(vq->desc_dev >> 32));
	mm_wr(&d->common, COM_Q_DRIVER, 4, (uint32_t)vq->avail_dev);
	mm_wr(&d->common, COM_Q_DRIVER + 4, 4, (uint32_t)(vq->avail_dev >> 32));
	mm_wr(&d->common, COM_Q_DEVICE, 4, (uint32_t)vq->used_dev);
	mm_wr(&d->common, COM_Q_DEVICE + 4, 4, (uint32_t)(vq->used_dev >> 32));
	noff = mm_rd(&d->common, COM_Q_NOFF, 2);
	/* §4.1.4.4: the queue's notify address must lie inside the notify region */
	if ((uint64_t)noff * d->notify_mult + 2 > d->notify.len)
		return -EINVAL;
	d->notify_off[vq->qid] = (uint16_t)noff;
	mm_wr(&d->common, COM_Q_ENABLE, 2, 1);
	return 0;
}

/* §4.1.5.2 (modern) / §4.1.4.10 (legacy): write the queue index. */
static int vpci_notify(void *ctx, uint16_t qid)
{
	struct ipk_vpci *d = (struct ipk_vpci *)ctx;

	if (d->legacy)
		return pwrite(d->io_fd, &qid, 2, LEG_QUEUE_NOTIFY) == 2 ? 0 : -EIO;
	if (qid >= 4)
		return -EINVAL;
	mm_wr(&d->notify, (uint32_t)d->notify_off[qid] * d->notify_mult, 2, qid);
	return 0;
}

/* ---------------------------------------------------------------- DMA */

/* Physical address of the page at virt (/proc/self/pagemap: one 64-bit entry per
 * 4 KiB page, bit 63 present, bits 0-54 the frame number, zero for non-root). */
static int virt_to_phys(const void *virt, uint64_t *phys)
{
	uint64_t e = 0, page = (uint64_t)(uintptr_t)virt / 4096u;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	ssize_t r;

	if (fd < 0)
		return -errno;
	r = pread(fd, &e, sizeof(e), (off_t)(page * sizeof(e)));
	close(fd);
	if (r != (ssize_t)sizeof(e) || !(e >> 63))
		return -EIO;
	e &= (1ull << 55) - 1;
	if (e == 0)
		return -EPERM;
	*phys = e * 4096u + ((uint64_t)(uintptr_t)virt & 4095u);
	return 0;
}

static long read_long(const char *path)
{
	FILE *f = fopen(path, "r");
	long v = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* Make sure `need` 2 MiB hugepages are free: when fewer are, raise nr_hugepages by
 * the shortfall (given back at close). */
static int huge_reserve(struct ipk_vpci *d, long need)
{
	const char *dir = "/sys/kernel/mm/hugepages/hugepages-2048kB";
	char path[128];
	long fr, total;
	FILE *f;

	snprintf(path, sizeof(path), "%s/free_hugepages", dir);
	fr = read_long(path);
	if (fr >= need)
		return 0;
	snprintf(d->huge_path, sizeof(d->huge_path), "%s/nr_hugepages", dir);
	total = read_long(d->huge_path);
	if (fr < 0 || total < 0)
		return -ENOENT;
	f = fopen(d->huge_path, "w");
	if (!f)
		return -errno;
	fprintf(f, "%ld\n", total + need - fr);
	if (fclose(f) != 0)
		return -ENOMEM;
	d->huge_added = read_long(d->huge_path) - total;
	if (d->huge_added < 0)
		d->huge_added = 0;
	return 0;
}

int ipk_vpci_dma_init(struct ipk_vpci *d, size_t bytes, char *err, size_t errlen)
{
	size_t n = (bytes + IPK_VPCI_HUGE - 1) / IPK_VPCI_HUGE, i;
	void *p;
	int rc;

	if (n == 0 || n > IPK_VPCI_MAX_HUGE)
		return ipk_io_err(err, errlen, EINVAL,
		                  "virtio-pci: DMA size %zu out of range", bytes);
	rc = huge_reserve(d, (long)n);
	if (rc < 0)
		return ipk_io_err(err, errlen, -rc,
		                  "virtio-pci %s: cannot reserve %zu hugepages: %s",
		                  d->addr, n, strerror(-rc));
	/* Shared: a fork must not copy-on-write the pages away from the device. */
	p = mmap(NULL, n * IPK_VPCI_HUGE, PROT_READ | PROT_WRITE,
	         MAP_SHARED | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE | MAP_LOCKED, -1, 0);
	if (p == MAP_FAILED)
		return ipk_io_err(err, errlen, errno,
		                  "virtio-pci %s: no %zu free 2 MiB hugepages (%s): "
		                  "echo %zu > /proc/sys/vm/nr_hugepages", d->addr, n,
		                  strerror(errno), n);
	d->dma = (uint8_t *)p;
	d->dma_len = n * IPK_VPCI_HUGE;
	memset(p, 0, d->dma_len);
	/* a hugepage is physically contiguous: one translation per hugepage */
	for (i = 0; i < n; i++) {
		rc = virt_to_phys(d->dma + i * IPK_VPCI_HUGE, &d->dma_phys[i]);
		if (rc < 0)
			return ipk_io_err(err, errlen, -rc,
			                  "virtio-pci %s: no physical address in "
			                  "/proc/self/pagemap (needs root): %s", d->addr,
			                  strerror(-rc));
	}
	return 0;
}

/* Bump allocation; a block never crosses a hugepage when align divides 2 MiB (the
 * ring code's blocks: buffers aligned to their size, rings to a power of two). */
static void *vpci_alloc(void *ctx, size_t size, size_t align)
{
	struct ipk_vpci *d = (struct ipk_vpci *)ctx;
	size_t off = (d->dma_used + align - 1) & ~(align - 1);

	if (align > IPK_VPCI_HUGE || off > d->dma_len || size > d->dma_len - off)
		return NULL;
	/* a block larger than its alignment must not cross a hugepage boundary either */
	if (size <= IPK_VPCI_HUGE && off / IPK_VPCI_HUGE != (off + size - 1) / IPK_VPCI_HUGE) {
		off = (off + IPK_VPCI_HUGE - 1) & ~((size_t)IPK_VPCI_HUGE - 1);
		if (off > d->dma_len || size > d->dma_len - off)
			return NULL;
	}
	d->dma_used = off + size;
	return d->dma + off;
}

static uint64_t vpci_dev_addr(void *ctx, const void *virt)
{
	struct ipk_vpci *d = (struct ipk_vpci *)ctx;
	size_t off = (size_t)((const uint8_t *)virt - d->dma);

	return d->dma_phys[off / IPK_VPCI_HUGE] + off % IPK_VPCI_HUGE;
}


/* ------------------------------------------------- the device layer's view */

static int tp_get_features(void *ctx, uint64_t *f, char *err, size_t el)
{
	struct ipk_vpci *d = (struct ipk_vpci *)ctx;

	(void)err;
	(void)el;
	*f = d->offered = ipk_vpci_device_features(d);
	return 0;
}

/* §3.1.1 steps 5-6; a legacy device has no FEATURES_OK (§3.1.2). */
static int tp_set_features(void *ctx, uint64_t f, char *err, size_t el)
{
	struct ipk_vpci *d = (struct ipk_vpci *)ctx;
	uint8_t s = IPK_VPCI_S_ACKNOWLEDGE | IPK_VPCI_S_DRIVER;

	if (!d->legacy && !(f & IPK_VIRTIO_BIT(IPK_VIRTIO_F_VERSION_1)))
		return ipk_io_err(err, el, ENOTSUP,
		                  "virtio-pci %s: modern device without VIRTIO_F_VERSION_1",
		                  d->addr);
	ipk_vpci_driver_features(d, f);
	if (d->legacy)
		return 0;
	ipk_vpci_set_status(d, s | IPK_VPCI_S_FEATURES_OK);
	if (!(ipk_vpci_status(d) & IPK_VPCI_S_FEATURES_OK))
		return ipk_io_err(err, el, ENOTSUP, "virtio-pci %s: device refused features 0x%llx",
		                  d->addr, (unsigned long long)f);
	return 0;
}

static uint16_t tp_queue_max(void *ctx, uint16_t qid)
{
	return ipk_vpci_queue_size((struct ipk_vpci *)ctx, qid, 0xffff);
}

static int tp_queue_setup(void *ctx, struct ipk_vq *vq, char *err, size_t el)
{
	struct ipk_vpci *d = (struct ipk_vpci *)ctx;
	uint16_t dev = ipk_vpci_queue_size(d, vq->qid, 0xffff);

	/* §4.1.5.1.3.1: a legacy device's queue size cannot be changed */
	if (d->legacy && vq->size != dev)
		return ipk_io_err(err, el, EINVAL,
		                  "virtio-pci %s: legacy device fixes queue %u at %u "
		                  "entries (qsize=%u)", d->addr, vq->qid, dev, vq->size);
	if (ipk_vpci_queue_setup(d, vq) < 0)
		return ipk_io_err(err, el, EINVAL, "virtio-pci %s: queue %u set-up refused (ring "
		                  "address or notify offset out of range)", d->addr, vq->qid);
	return 0;
}

/* §3.1.1 step 8. The receive queue was filled before: tell the device. */
static int tp_start(void *ctx, char *err, size_t el)
{
	struct ipk_vpci *d = (struct ipk_vpci *)ctx;

	ipk_vpci_set_status(d, (uint8_t)(ipk_vpci_status(d) | IPK_VPCI_S_DRIVER_OK));
	if (ipk_vpci_status(d) & IPK_VPCI_S_FAILED)
		return ipk_io_err(err, el, EIO, "virtio-pci %s: device set FAILED", d->addr);
	return vpci_notify(d, 0); /* the filled receive queue */
}

/* Polling only: with no kernel driver on the device, an interrupt could reach us
 * only through VFIO's eventfds (see README). */
static int tp_queue_fd(void *ctx, uint16_t qid)
{
	(void)ctx;
	(void)qid;
	return -EOPNOTSUPP;
}

/* §5.1.4: mac is in the device configuration when the device offers F_MAC. */
static int tp_mac(void *ctx, uint8_t mac[6])
{
	struct ipk_vpci *d = (struct ipk_vpci *)ctx;
	uint32_t i;

	if (!(d->offered & IPK_VIRTIO_BIT(IPK_VIRTIO_NET_F_MAC)))
		return -EOPNOTSUPP;
	for (i = 0; i < 6; i++)
		mac[i] = ipk_vpci_cfg8(d, i);
	if (mac[0] & 1)
		return -EINVAL; /* a multicast address is no station's: keep the random one */
	return 0;
}

static void tp_close(void *ctx)
{
	ipk_vpci_close((struct ipk_vpci *)ctx);
	free(ctx);
}

#define VPCI_TOPS(nm) { nm, tp_get_features, tp_set_features, tp_queue_max, tp_queue_setup, \
	tp_start, tp_queue_fd, tp_mac, tp_close, { vpci_alloc, vpci_dev_addr, vpci_notify, NULL } }
static const struct ipk_virtio_tops vpci_tops_legacy = VPCI_TOPS("pci-legacy");
static const struct ipk_virtio_tops vpci_tops_modern = VPCI_TOPS("pci-modern");

int ipk_virtio_pci_open(const char *addr, const struct ipk_virtio_opts *o,
                        const struct ipk_virtio_tops **tops, void **ctx, char *err, size_t el)
{
	struct ipk_vpci *d = (struct ipk_vpci *)calloc(1, sizeof(*d));
	int rc;

	if (!d)
		return ipk_io_err(err, el, ENOMEM, "virtio-pci: out of memory");
	rc = ipk_vpci_open(d, "/sys", addr, err, el);
	if (rc < 0) {
		free(d);
		return rc;
	}
	/* §3.1.1 steps 1-3: reset, ACKNOWLEDGE, DRIVER */
	if (ipk_vpci_reset(d) < 0) {
		rc = ipk_io_err(err, el, ETIMEDOUT, "virtio-pci %s: reset did not finish", addr);
		goto fail;
	}
	ipk_vpci_set_status(d, IPK_VPCI_S_ACKNOWLEDGE);
	ipk_vpci_set_status(d, IPK_VPCI_S_ACKNOWLEDGE | IPK_VPCI_S_DRIVER);
	rc = ipk_vpci_dma_init(d, ipk_virtio_mem_bytes(o), err, el);
	if (rc < 0)
		goto fail;
	*tops = d->legacy ? &vpci_tops_legacy : &vpci_tops_modern;
	*ctx = d;
	return 0;
fail:
	ipk_vpci_set_status(d, IPK_VPCI_S_FAILED);
	tp_close(d);
	return rc;
}
