/*
 * The virtio PCI transport (virtio 1.x §4.1), in user space as ixy does it: the
 * device is found through sysfs, its registers are reached through the sysfs
 * resource files (a modern device's memory BAR mapped, a legacy device's I/O BAR
 * read and written with pread/pwrite), and DMA memory comes from hugepages whose
 * physical addresses are read from /proc/self/pagemap.
 *
 * No IOMMU is involved: the device sees physical addresses. That is only right
 * where there is no IOMMU between the device and memory (a QEMU guest without a
 * vIOMMU, which is where the tests run), and it needs root (pagemap hides physical
 * addresses from others, the resource files are root-only).
 *
 * The driver never takes a device away from a kernel driver: a device with a
 * `driver` link in sysfs is refused with -EBUSY (unbinding is the administrator's
 * decision). Registers and everything read from the device are untrusted: the
 * capability list is walked with a bound, every capability is checked against the
 * BAR it points into before use.
 *
 * Errors: 0 or a count, a negative errno and a one-line message in err.
 */
#ifndef IPKIT_IO_VIRTIO_PCI_H
#define IPKIT_IO_VIRTIO_PCI_H

#include <stddef.h>
#include <stdint.h>

#include "virtq.h"

#define IPK_VPCI_VENDOR 0x1af4u
#define IPK_VPCI_DEV_NET_LEGACY 0x1000u  /* §4.1.2.3: transitional network device */
#define IPK_VPCI_DEV_NET_MODERN 0x1041u  /* §4.1.2.1: 0x1040 + device id 1 */

/* §2.1 device status bits */
#define IPK_VPCI_S_ACKNOWLEDGE 1u
#define IPK_VPCI_S_DRIVER 2u
#define IPK_VPCI_S_DRIVER_OK 4u
#define IPK_VPCI_S_FEATURES_OK 8u
#define IPK_VPCI_S_FAILED 128u

/* §4.1.4 PCI capability cfg_type values */
#define IPK_VPCI_CAP_COMMON 1u
#define IPK_VPCI_CAP_NOTIFY 2u
#define IPK_VPCI_CAP_ISR 3u
#define IPK_VPCI_CAP_DEVICE 4u

#define IPK_VPCI_HUGE (2u << 20)     /* 2 MiB hugepages */
#define IPK_VPCI_MAX_HUGE 64u     /* 128 MiB: qsize 4096 needs 32 MiB of buffers */

/* A located register block: BAR, offset, length (modern capabilities). */
struct ipk_vpci_region {
	uint8_t bar, found;
	uint32_t off, len;
	uint8_t *p;                  /* mapped address (off applied) */
};

struct ipk_vpci {
	char dir[160];               /* <sysfs>/bus/pci/devices/ADDR */
	char addr[16];
	int legacy;                  /* 1: I/O BAR 0 (0x1000 device, §4.1.4.10) */
	uint32_t legacy_cfg;         /* legacy: device config offset, 0x14 (0x18 with MSI-X) */
	int io_fd;                   /* legacy: resource0 */
	int cfg_fd;                  /* the PCI config space file */
	uint8_t *bar[6];             /* modern: mapped memory BARs */
	size_t bar_len[6];
	struct ipk_vpci_region common, notify, isr, device;
	uint32_t notify_mult;        /* notify_off_multiplier (§4.1.4.4) */
	uint64_t offered;            /* device features, read by get_features */
	uint16_t notify_off[4];      /* per queue, read at queue setup */
	/* DMA memory: hugepages, bump allocated */
	uint8_t *dma;
	size_t dma_len, dma_used;
	uint64_t dma_phys[IPK_VPCI_MAX_HUGE];
	long huge_added;             /* hugepages we reserved (given back at close) */
	char huge_path[128];         /* nr_hugepages file we wrote */
};

/* Open the device at sysfs_root/bus/pci/devices/addr (sysfs_root "/sys" in real
 * use, a fake tree in tests): checks vendor and device id, refuses a device a
 * kernel driver holds (-EBUSY), parses the capabilities (modern) and maps the BARs
 * or opens the I/O BAR (legacy), enables memory/I/O decoding and bus mastering.
 * -ENODEV for no such device or not a virtio-net one, -EBUSY, -EINVAL for a
 * malformed capability list, -EACCES/-EPERM without root. */
int ipk_vpci_open(struct ipk_vpci *d, const char *sysfs_root, const char *addr, char *err,
                  size_t errlen);
/* Reset the device (so it stops using our memory), unmap, give back hugepages. */
void ipk_vpci_close(struct ipk_vpci *d);

/* §3.1.1 steps. */
int ipk_vpci_reset(struct ipk_vpci *d);
uint8_t ipk_vpci_status(struct ipk_vpci *d);
void ipk_vpci_set_status(struct ipk_vpci *d, uint8_t s);
uint64_t ipk_vpci_device_features(struct ipk_vpci *d);
void ipk_vpci_driver_features(struct ipk_vpci *d, uint64_t f);
/* Byte i of the device-specific configuration (virtio-net: MAC at 0..5). */
uint8_t ipk_vpci_cfg8(struct ipk_vpci *d, uint32_t i);

/* The queue size to use for qid: legacy the device's (fixed), modern min(max, want).
 * 0 when the queue does not exist. */
uint16_t ipk_vpci_queue_size(struct ipk_vpci *d, uint16_t qid, uint16_t want);
/* Tell the device where queue vq lives and enable it (§4.1.5.1.3). */
int ipk_vpci_queue_setup(struct ipk_vpci *d, const struct ipk_vq *vq);

/* ipk_virtio_pci_open (virtio.h) is this transport behind struct ipk_virtio_tops:
 * open, §3.1.1 steps 1-3, DMA memory for the device layer's pool and rings. */

/* DMA memory: map `bytes` of hugepages (reserving them when too few are free) and
 * read their physical addresses. 0 or a negative errno with a message. */
int ipk_vpci_dma_init(struct ipk_vpci *d, size_t bytes, char *err, size_t errlen);

#endif
