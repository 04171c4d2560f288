/* The pcap wrapper around a fake backend: records both directions (only frames the
 * backend took), linearises chains, writes the classic nanosecond format, and tshark
 * reads it back (skipped with a note when tshark is missing). */
#include "io_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

struct fake {
	int rx_left;   /* frames rx_burst still returns */
	int tx_room;   /* frames tx_burst still takes */
};

static int fake_rx(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct fake *f = (struct fake *)io->priv;
	int i = 0;

	/* An ARP request for 10.0.0.1 from 10.0.0.2 (42 bytes). */
	static const uint8_t arp[42] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 2, 0x08, 0x06,
		0, 1, 0x08, 0, 6, 4, 0, 1, 0x02, 0, 0, 0, 0, 2, 10, 0, 0, 2,
		0, 0, 0, 0, 0, 0, 10, 0, 0, 1 };

	for (; i < n && f->rx_left > 0; i++, f->rx_left--) {
		pkts[i] = ipk_pkt_alloc(io->pool);
		memcpy(ipk_pkt_mtod(pkts[i]), arp, sizeof(arp));
		pkts[i]->len = sizeof(arp);
	}
	return i;
}

static int fake_tx(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	struct fake *f = (struct fake *)io->priv;
	int i;

	for (i = 0; i < n && f->tx_room > 0; i++, f->tx_room--)
		ipk_pkt_free_chain(pkts[i]);
	return i;
}

static void fake_close(struct ipk_io *io)
{
	(void)io;
}

static const struct ipk_io_backend fake_be = {
	"fake", sizeof(struct fake), NULL, fake_rx, fake_tx, NULL, NULL, NULL, fake_close,
};

static struct ipk_io *fake_open(struct ipk_pool *p, int rx, int tx)
{
	struct ipk_io *io = (struct ipk_io *)calloc(1, sizeof(*io) + sizeof(struct fake));
	struct fake *f = (struct fake *)(io + 1);

	io->be = &fake_be;
	io->pool = p;
	io->priv = f;
	io->caps.link = IPK_LINK_ETH;
	f->rx_left = rx;
	f->tx_room = tx;
	return io;
}

static uint32_t rd32(const uint8_t *b)
{
	uint32_t v;

	memcpy(&v, b, 4);
	return v; /* the file is in host order */
}

static void test_pcap_records_rx_and_taken_tx_with_chains(void)
{
	struct ipk_pool *p = ipk_pool_create(NULL, NULL, 0);
	char path[] = "/tmp/ipk_test_pcap_XXXXXX";
	char err[256] = "";
	struct ipk_pkt *rx[4], *tx[3];
	struct ipk_io *io;
	uint8_t file[4096];
	size_t n;
	FILE *f;
	int fd = mkstemp(path), i;
	uint32_t bufs, descs;

	close(fd);
	io = ipk_io_pcap_wrap(fake_open(p, 2, 2), path, err, sizeof(err));
	CHECK(io != NULL);
	CHECK_EQ(ipk_io_rx_burst(io, rx, 4), 2);
	/* tx: a 2-part chain echoing the ARP frame, and two plain frames of which the
	 * backend takes only one. */
	for (i = 0; i < 3; i++) {
		tx[i] = ipk_pkt_clone(rx[0]);
		tx[i]->len = 20;
	}
	tx[0]->next = rx[1];
	rx[1]->off += 20;
	rx[1]->len = 22;
	CHECK_EQ(ipk_io_tx_burst(io, tx, 3), 2);
	ipk_pkt_free(tx[2]);
	ipk_pkt_free(rx[0]);
	ipk_io_close(io);
	ipk_pool_usage(p, &bufs, &descs);
	CHECK_EQ(bufs, 0);
	CHECK_EQ(descs, 0);

	f = fopen(path, "rb");
	n = fread(file, 1, sizeof(file), f);
	fclose(f);
	/* header + 2 rx of 42 + tx chain of 42 + tx of 20 */
	CHECK_EQ(n, 24 + 3 * (16 + 42) + 16 + 20);
	CHECK_EQ(rd32(file), 0xa1b23c4du);
	CHECK_EQ(rd32(file + 20), 1);
	CHECK_EQ(rd32(file + 24 + 8), 42);
	CHECK_EQ(rd32(file + 24 + 2 * 58 + 8), 42);
	CHECK(memcmp(file + 24 + 16, file + 24 + 2 * 58 + 16, 42) == 0); /* chain linearised */
	CHECK(rd32(file + 24 + 4) < 1000000000u);

	if (system("command -v tshark >/dev/null 2>&1") != 0) {
		printf("note: tshark not found, read-back skipped\n");
	} else {
		char cmd[512];
		char out[512] = "";
		FILE *pp;

		snprintf(cmd, sizeof(cmd),
		         "tshark -r %s -T fields -e arp.dst.proto_ipv4 2>/dev/null | tr '\\n' ' '",
		         path);
		pp = popen(cmd, "r");
		CHECK(pp != NULL);
		if (pp) {
			n = fread(out, 1, sizeof(out) - 1, pp);
			out[n] = '\0';
			pclose(pp);
		}
		CHECK(strncmp(out, "10.0.0.1 10.0.0.1 10.0.0.1 ", 27) == 0);
	}
	unlink(path);
	ipk_pool_destroy(p);
}

static void test_pcap_unwritable_file_reports_and_closes(void)
{
	struct ipk_pool *p = ipk_pool_create(NULL, NULL, 0);
	char err[256] = "";
	uint32_t bufs, descs;

	CHECK(ipk_io_pcap_wrap(fake_open(p, 0, 0), "/nonexistent-dir/x.pcap", err,
	                       sizeof(err)) == NULL);
	CHECK(strcmp(err, "pcap: cannot write /nonexistent-dir/x.pcap: No such file or directory") == 0);
	ipk_pool_usage(p, &bufs, &descs);
	CHECK_EQ(bufs + descs, 0);
	ipk_pool_destroy(p);
}

int main(void)
{
	RUN(test_pcap_records_rx_and_taken_tx_with_chains);
	RUN(test_pcap_unwritable_file_reports_and_closes);
	return check_summary();
}
