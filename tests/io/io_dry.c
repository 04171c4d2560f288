/*
 * io_dry SPEC FRAMES: a backend whose pool is empty must drain its device, not spin
 * on it (issue 14 item 1: the node burnt a core on a TAP fd that stayed readable
 * because no buffer could take the frame waiting there).
 *
 * Takes every buffer of a small pool, prints "dry", then polls the device as the node
 * does: when it is readable, a receive burst. Once FRAMES frames were dropped
 * (rx_drops) the device must turn quiet (poll times out); then the buffers go back,
 * "freed" is printed, and the next frame must be received in a packet. Exits 0 when
 * both happened within 10 s, 1 otherwise; prints the polls that found the device
 * readable and the bursts that got nothing (a spin shows as millions). Run by
 * tests/interop/test_hostile_ooo.py, which sends the frames.
 */
#include <ipkit/io.h>

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NBUFS 64u

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* One poll of up to ms and a burst when readable; returns packets received (freed). */
static int step(struct ipk_io *io, int ms, uint64_t *readable, uint64_t *empty, int *quiet)
{
	struct pollfd pfd = {ipk_io_fd(io), POLLIN, 0};
	struct ipk_pkt *pkts[32];
	int got, i;

	*quiet = poll(&pfd, 1, ms) == 0;
	if (*quiet)
		return 0;
	(*readable)++;
	got = ipk_io_rx_burst(io, pkts, 32);
	if (got <= 0) {
		(*empty)++;
		return 0;
	}
	for (i = 0; i < got; i++)
		ipk_pkt_free_chain(pkts[i]);
	return got;
}

int main(int argc, char **argv)
{
	struct ipk_pkt *held[NBUFS];
	struct ipk_pool_cfg pc;
	struct ipk_io_stats st;
	struct ipk_pool *pool;
	struct ipk_io *io;
	char err[256];
	uint64_t end, readable = 0, empty = 0;
	uint32_t n = 0, i, frames;
	int quiet = 0, drained = 0, got = 0;

	if (argc != 3)
		return 2;
	frames = (uint32_t)strtoul(argv[2], NULL, 10);
	ipk_pool_cfg_default(&pc);
	pc.nbufs = NBUFS;
	pc.ndescs = 2 * NBUFS;
	pool = ipk_pool_create(&pc, err, sizeof(err));
	io = pool ? ipk_io_open(argv[1], pool, err, sizeof(err)) : NULL;
	if (!io) {
		fprintf(stderr, "io_dry: %s\n", err);
		return 2;
	}
	while (n < NBUFS && (held[n] = ipk_pkt_alloc(pool)) != NULL)
		n++;
	printf("dry %u\n", n);
	fflush(stdout);
	for (end = now_ms() + 10000; now_ms() < end && !drained;) {
		step(io, 100, &readable, &empty, &quiet);
		ipk_io_stats(io, &st);
		drained = quiet && st.rx_drops >= frames;
	}
	for (i = 0; i < n; i++)
		ipk_pkt_free(held[i]);
	printf("freed\n");
	fflush(stdout);
	while (drained && now_ms() < end && got == 0)
		got = step(io, 100, &readable, &empty, &quiet);
	ipk_io_stats(io, &st);
	printf("drained %d received %d rx_drops %llu readable %llu empty %llu\n", drained, got,
	       (unsigned long long)st.rx_drops, (unsigned long long)readable,
	       (unsigned long long)empty);
	ipk_io_close(io);
	ipk_pool_destroy(pool);
	return drained && got > 0 ? 0 : 1;
}
