/*
 * The virtio PCI transport's discovery on fake sysfs trees (no real device, no
 * root needed): a device a kernel driver holds is refused with -EBUSY and left
 * bound; a modern device's capabilities are found and mapped; malformed capability
 * lists (a loop, a region past its BAR, a pointer into the header, a short
 * capability, a missing one) are refused; a legacy device's I/O BAR is read and
 * written through its resource file (its configuration after the MSI-X vectors when
 * MSI-X is on); a nonexistent address (0000:ff:1f.7) and a
 * foreign device are -ENODEV.
 */
#include "pci.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures;

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, \
			        __LINE__, #c);                                 \
			failures++;                                            \
		}                                                              \
	} while (0)

static char root[64];

static void put_file(const char *dir, const char *name, const void *data, size_t n)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(data, 1, n, f) != n) {
		perror(path);
		exit(2);
	}
	fclose(f);
}

static void put_text(const char *dir, const char *name, const char *s)
{
	put_file(dir, name, s, strlen(s));
}

/* A device directory ADDR under root with vendor/device files. */
static void mkdev(const char *addr, const char *ven, const char *dev, char *dir, size_t cap)
{
	char cmd[600];

	snprintf(dir, cap, "%s/bus/pci/devices/%s", root, addr);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", dir);
	if (system(cmd) != 0)
		exit(2);
	put_text(dir, "vendor", ven);
	put_text(dir, "device", dev);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* One virtio capability (§4.1.4) at cfg[at], linked to next. */
static void cap(uint8_t *cfg, uint32_t at, uint32_t next, uint8_t type, uint8_t bar,
                uint32_t off, uint32_t len, uint8_t caplen)
{
	cfg[at] = 0x09;
	cfg[at + 1] = (uint8_t)next;
	cfg[at + 2] = caplen;
	cfg[at + 3] = type;
	cfg[at + 4] = bar;
	put_le32(cfg + at + 8, off);
	put_le32(cfg + at + 12, len);
	if (type == IPK_VPCI_CAP_NOTIFY)
		put_le32(cfg + at + 16, 4);
}

/* A modern device's config space: common, ISR, device, notify in BAR 4 (16 KiB). */
static void modern_cfg(uint8_t *cfg)
{
	memset(cfg, 0, 256);
	cfg[6] = 0x10;          /* status: capability list */
	cfg[0x34] = 0x40;
	cap(cfg, 0x40, 0x54, IPK_VPCI_CAP_COMMON, 4, 0x0000, 0x1000, 16);
	cap(cfg, 0x54, 0x68, IPK_VPCI_CAP_ISR, 4, 0x1000, 0x1000, 16);
	cap(cfg, 0x68, 0x7c, IPK_VPCI_CAP_DEVICE, 4, 0x2000, 0x1000, 16);
	cap(cfg, 0x7c, 0x00, IPK_VPCI_CAP_NOTIFY, 4, 0x3000, 0x1000, 20);
}

static void modern_dev(const char *addr, const uint8_t *cfg, char *dir, size_t cap_)
{
	static uint8_t bar[16384];

	mkdev(addr, "0x1af4\n", "0x1041\n", dir, cap_);
	put_file(dir, "config", cfg, 256);
	memset(bar, 0, sizeof(bar));
	put_le32(bar + 0x04, 0x00000001); /* device_feature (both halves read the same) */
	bar[0x12] = 2;                   /* num_queues */
	bar[0x18] = 0x00;                /* queue_size 256 */
	bar[0x19] = 0x01;
	memcpy(bar + 0x2000, "\x52\x54\x00\x21\x00\x05", 6);
	put_file(dir, "resource4", bar, sizeof(bar));
}

static void test_missing_and_foreign(void)
{
	struct ipk_vpci d;
	char err[256], dir[400];

	CHECK(ipk_vpci_open(&d, root, "0000:ff:1f.7", err, sizeof(err)) == -ENODEV);
	CHECK(strstr(err, "no such PCI device") != NULL);
	mkdev("0000:00:02.0", "0x8086\n", "0x100e\n", dir, sizeof(dir));
	CHECK(ipk_vpci_open(&d, root, "0000:00:02.0", err, sizeof(err)) == -ENODEV);
	CHECK(strstr(err, "not a virtio-net device") != NULL);
	CHECK(ipk_vpci_open(&d, root, "../../etc", err, sizeof(err)) == -EINVAL);
}

/* A kernel driver holds it: -EBUSY, one line naming the driver, and nothing
 * written to the driver's unbind file. */
static void test_bound_refused(void)
{
	struct ipk_vpci d;
	uint8_t cfg[256];
	char err[256], dir[400], path[600], drv[400];
	struct stat st;

	modern_cfg(cfg);
	modern_dev("0000:00:03.0", cfg, dir, sizeof(dir));
	snprintf(drv, sizeof(drv), "%s/bus/pci/drivers/virtio-pci", root);
	snprintf(path, sizeof(path), "mkdir -p '%s'", drv);
	CHECK(system(path) == 0);
	put_text(drv, "unbind", "");
	snprintf(path, sizeof(path), "%s/driver", dir);
	CHECK(symlink("../../../bus/pci/drivers/virtio-pci", path) == 0);
	CHECK(ipk_vpci_open(&d, root, "0000:00:03.0", err, sizeof(err)) == -EBUSY);
	CHECK(strstr(err, "bound to kernel driver virtio-pci (EBUSY)") != NULL);
	CHECK(strchr(err, '\n') == NULL);
	CHECK(lstat(path, &st) == 0 && S_ISLNK(st.st_mode));
	snprintf(path, sizeof(path), "%s/unbind", drv);
	CHECK(stat(path, &st) == 0 && st.st_size == 0);
}

static void test_modern_caps(void)
{
	struct ipk_vpci d;
	uint8_t cfg[256], cmd[2];
	char err[256], dir[400], path[600];
	int fd;

	modern_cfg(cfg);
	modern_dev("0000:00:05.0", cfg, dir, sizeof(dir));
	CHECK(ipk_vpci_open(&d, root, "0000:00:05.0", err, sizeof(err)) == 0);
	CHECK(!d.legacy);
	CHECK(d.common.found && d.common.bar == 4 && d.common.off == 0 && d.common.len == 0x1000);
	CHECK(d.isr.found && d.isr.off == 0x1000);
	CHECK(d.device.found && d.device.off == 0x2000);
	CHECK(d.notify.found && d.notify.off == 0x3000 && d.notify_mult == 4);
	CHECK(ipk_vpci_device_features(&d) == 0x100000001ull);
	CHECK(ipk_vpci_queue_size(&d, 0, 128) == 128);
	CHECK(ipk_vpci_queue_size(&d, 1, 1024) == 256);
	CHECK(ipk_vpci_queue_size(&d, 2, 256) == 0); /* num_queues 2 */
	CHECK(ipk_vpci_cfg8(&d, 0) == 0x52 && ipk_vpci_cfg8(&d, 5) == 0x05);
	ipk_vpci_close(&d);
	/* memory decoding and bus mastering were switched on (command register) */
	snprintf(path, sizeof(path), "%s/config", dir);
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0 && pread(fd, cmd, 2, 4) == 2 && (cmd[0] & 0x6) == 0x6);
	if (fd >= 0)
		close(fd);
}

/* Each malformed list is refused with its errno (and the open leaves nothing). */
static void test_bad_caps(void)
{
	struct {
		const char *what;
		uint32_t at;      /* byte to patch */
		uint8_t val;
		int want;
	} bad[] = {
		{"list loops back", 0x7c + 1, 0x40, -EINVAL},
		{"pointer into the header", 0x34, 0x20, -EINVAL},
		{"pointer past the end", 0x7c + 1, 0xf8, -EINVAL},
		{"short capability", 0x54 + 2, 8, -EINVAL},
		{"notify capability without multiplier", 0x7c + 2, 16, -EINVAL},
		{"region past its BAR", 0x7c + 13, 0x20, -EINVAL},  /* length 0x2000 at 0x3000 */
		{"BAR index 6", 0x68 + 4, 6, -ENODEV},              /* device cfg unusable */
		{"no notify capability", 0x7c + 3, 5, -ENODEV},     /* type 5: PCI cfg access */
		{"no capability list", 6, 0x00, -EINVAL},
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ipk_vpci d;
		uint8_t cfg[256];
		char err[256], dir[400], addr[16];
		int rc;

		modern_cfg(cfg);
		cfg[bad[i].at] = bad[i].val;
		snprintf(addr, sizeof(addr), "0000:00:1%zx.0", i);
		modern_dev(addr, cfg, dir, sizeof(dir));
		rc = ipk_vpci_open(&d, root, addr, err, sizeof(err));
		if (rc != bad[i].want) {
			fprintf(stderr, "%s: got %d want %d (%s)\n", bad[i].what, rc,
			        bad[i].want, err);
			failures++;
		}
		CHECK(d.cfg_fd == -1 && d.io_fd == -1 && d.bar[4] == NULL);
	}
}

static void test_legacy_io_bar(void)
{
	struct ipk_vpci d;
	uint8_t io[32];
	char err[256], dir[400];

	mkdev("0000:00:04.0", "0x1af4\n", "0x1000\n", dir, sizeof(dir));
	uint32_t feat = 0x79bf8064u;
	uint16_t qsz = 256;

	memset(io, 0, sizeof(io));
	put_file(dir, "config", io, sizeof(io)); /* 32 bytes suffice: no caps read */
	/* legacy registers are in the CPU's own byte order (§4.1.4.10) */
	memcpy(io + 0x00, &feat, 4);             /* host features */
	memcpy(io + 0x0c, &qsz, 2);              /* queue size */
	memcpy(io + 0x14, "\x52\x54\x00\x21\x00\x04", 6);
	put_file(dir, "resource0", io, sizeof(io));
	CHECK(ipk_vpci_open(&d, root, "0000:00:04.0", err, sizeof(err)) == 0);
	CHECK(d.legacy);
	CHECK(ipk_vpci_device_features(&d) == 0x79bf8064u);
	CHECK(ipk_vpci_queue_size(&d, 0, 64) == 256); /* fixed by a legacy device */
	CHECK(ipk_vpci_cfg8(&d, 0) == 0x52 && ipk_vpci_cfg8(&d, 5) == 0x04);
	ipk_vpci_set_status(&d, IPK_VPCI_S_ACKNOWLEDGE | IPK_VPCI_S_DRIVER);
	CHECK(ipk_vpci_status(&d) == 3);
	CHECK(ipk_vpci_reset(&d) == 0 && ipk_vpci_status(&d) == 0);
	ipk_vpci_close(&d);
}

/* A legacy device with MSI-X left enabled has its configuration at 0x18. */
static void test_legacy_msix_cfg(void)
{
	struct ipk_vpci d;
	uint8_t io[32], cfg[256];
	char err[256], dir[400];

	mkdev("0000:00:06.0", "0x1af4\n", "0x1000\n", dir, sizeof(dir));
	memset(cfg, 0, sizeof(cfg));
	cfg[6] = 0x10;
	cfg[0x34] = 0x98;
	cfg[0x98] = 0x11;        /* MSI-X */
	cfg[0x98 + 3] = 0x80;    /* Message Control bit 15: enabled */
	put_file(dir, "config", cfg, sizeof(cfg));
	memset(io, 0, sizeof(io));
	memcpy(io + 0x14, "\xff\xff\xff\xff", 4); /* the two MSI-X vector registers */
	memcpy(io + 0x18, "\x52\x54\x00\x21\x00\x06", 6);
	put_file(dir, "resource0", io, sizeof(io));
	CHECK(ipk_vpci_open(&d, root, "0000:00:06.0", err, sizeof(err)) == 0);
	CHECK(d.legacy_cfg == 0x18);
	CHECK(ipk_vpci_cfg8(&d, 0) == 0x52 && ipk_vpci_cfg8(&d, 5) == 0x06);
	ipk_vpci_close(&d);
}

int main(void)
{
	char cmd[300];

	snprintf(root, sizeof(root), "/tmp/ipk-pci-sysfs-%d", (int)getpid());
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s'", root, root);
	if (system(cmd) != 0)
		return 2;
	test_missing_and_foreign();
	test_bound_refused();
	test_modern_caps();
	test_bad_caps();
	test_legacy_io_bar();
	test_legacy_msix_cfg();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		failures++;
	if (failures) {
		fprintf(stderr, "%d checks failed\n", failures);
		return 1;
	}
	printf("pci_sysfs: all checks passed\n");
	return 0;
}
