/*
 * A pcap writer around any backend (",pcap=FILE"): every frame received and every frame
 * handed to the device is written as one record, chains linearised. Classic libpcap
 * format with nanosecond timestamps (magic 0xa1b23c4d, host byte order: readers detect
 * it from the magic), LINKTYPE_ETHERNET or LINKTYPE_RAW after the device's link type.
 *
 * Transmit goes to the inner backend one packet at a time so only frames it really took
 * are recorded (a taken packet may be freed at once, so the bytes are copied first).
 */
#include "io_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PCAP_MAGIC_NS 0xa1b23c4du
#define PCAP_LINKTYPE_ETHERNET 1u
#define PCAP_LINKTYPE_RAW 101u
#define PCAP_SNAPLEN 262144u
#define PCAP_FLUSH_NS 1000000000ull

struct pcap_priv {
	FILE *f;
	uint8_t *scratch;      /* PCAP_SNAPLEN bytes for linearising */
	uint64_t last_flush_ns;
	uint64_t short_writes;
};

struct pcap_file_hdr {
	uint32_t magic;
	uint16_t major, minor;
	int32_t thiszone;
	uint32_t sigfigs, snaplen, linktype;
};

struct pcap_rec_hdr {
	uint32_t sec, nsec, caplen, origlen;
};

static uint64_t pcap_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One record of the caplen bytes already in scratch. A failed write (disk full) loses
 * the record but never stops the traffic. */
static void pcap_record(struct pcap_priv *pp, uint64_t t_ns, uint32_t caplen, uint32_t origlen)
{
	struct pcap_rec_hdr h;

	h.sec = (uint32_t)(t_ns / 1000000000ull);
	h.nsec = (uint32_t)(t_ns % 1000000000ull);
	h.caplen = caplen;
	h.origlen = origlen;
	if (fwrite(&h, sizeof(h), 1, pp->f) == 1 && caplen)
		pp->short_writes += fwrite(pp->scratch, 1, caplen, pp->f) != caplen;
}

static void pcap_write(struct ipk_io *io, const struct ipk_pkt *k)
{
	struct pcap_priv *pp = (struct pcap_priv *)io->priv;
	uint32_t cap = ipk_pkt_linearize(k, pp->scratch, PCAP_SNAPLEN);

	pcap_record(pp, pcap_now_ns(), cap, ipk_pkt_chain_len(k));
}

static int pcap_rx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	int got = io->inner->be->rx_burst(io->inner, pkts, n), i;

	for (i = 0; i < got; i++)
		pcap_write(io, pkts[i]);
	return got;
}

static int pcap_tx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct pcap_priv *pp = (struct pcap_priv *)io->priv;
	int i;

	for (i = 0; i < n; i++) {
		uint64_t t = pcap_now_ns();
		uint32_t orig = ipk_pkt_chain_len(pkts[i]);
		uint32_t cap = ipk_pkt_linearize(pkts[i], pp->scratch, PCAP_SNAPLEN);
		int rc = io->inner->be->tx_burst(io->inner, &pkts[i], 1);

		if (rc != 1)
			return i > 0 ? i : rc;
		pcap_record(pp, t, cap, orig);
	}
	return n;
}

static int pcap_flush(struct ipk_io *io)
{
	struct pcap_priv *pp = (struct pcap_priv *)io->priv;
	uint64_t t = pcap_now_ns();

	/* Readers tailing the file see records within a second, without a write per
	 * burst. */
	if (t - pp->last_flush_ns > PCAP_FLUSH_NS) {
		fflush(pp->f);
		pp->last_flush_ns = t;
	}
	return io->inner->be->flush ? io->inner->be->flush(io->inner) : 0;
}

static int pcap_fd(const struct ipk_io *io)
{
	return io->inner->be->fd ? io->inner->be->fd(io->inner) : -1;
}

static int pcap_arm(struct ipk_io *io)
{
	return io->inner->be->arm ? io->inner->be->arm(io->inner) : 0;
}

static void pcap_close(struct ipk_io *io)
{
	struct pcap_priv *pp = (struct pcap_priv *)io->priv;

	if (pp->f)
		fclose(pp->f);
	free(pp->scratch);
	ipk_io_close(io->inner);
}

static int pcap_open(struct ipk_io *io, const struct ipk_io_args *a, char *err, size_t errlen)
{
	(void)io;
	(void)a;
	return ipk_io_err(err, errlen, EINVAL, "pcap: use ,pcap=FILE on another backend's spec");
}

static const struct ipk_io_backend pcap_backend = {
	"pcap", sizeof(struct pcap_priv), pcap_open, pcap_rx_burst, pcap_tx_burst,
	pcap_flush, pcap_fd, pcap_arm, pcap_close,
};

static int pcap_header(FILE *f, uint8_t link)
{
	struct pcap_file_hdr h;

	h.magic = PCAP_MAGIC_NS;
	h.major = 2;
	h.minor = 4;
	h.thiszone = 0;
	h.sigfigs = 0;
	h.snaplen = PCAP_SNAPLEN;
	h.linktype = link == IPK_LINK_RAWIP ? PCAP_LINKTYPE_RAW : PCAP_LINKTYPE_ETHERNET;
	return fwrite(&h, sizeof(h), 1, f) == 1 ? 0 : -1;
}

struct ipk_io *ipk_io_pcap_wrap(struct ipk_io *inner, const char *file, char *err,
                                size_t errlen)
{
	struct ipk_io *io = (struct ipk_io *)calloc(1, sizeof(*io) + sizeof(struct pcap_priv));
	struct pcap_priv *pp;
	int e;

	if (!io) {
		ipk_io_close(inner);
		ipk_io_err(err, errlen, ENOMEM, "pcap: out of memory");
		return NULL;
	}
	pp = (struct pcap_priv *)(io + 1);
	io->priv = pp;
	io->be = &pcap_backend;
	io->inner = inner;
	io->pool = inner->pool;
	io->caps = inner->caps;
	snprintf(io->name, sizeof(io->name), "%s", inner->name);
	pp->scratch = (uint8_t *)malloc(PCAP_SNAPLEN);
	pp->f = fopen(file, "wb");
	e = errno;
	if (!pp->scratch || !pp->f || pcap_header(pp->f, inner->caps.link) < 0) {
		ipk_io_err(err, errlen, pp->f ? EIO : e, "pcap: cannot write %s: %s", file,
		           strerror(pp->f ? EIO : e));
		pcap_close(io);
		free(io);
		return NULL;
	}
	return io;
}
