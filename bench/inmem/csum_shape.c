/*
 * csum_shape: what the shape of the Internet checksum loop costs per 1460 B on this
 * machine, for the bulk analysis in bench/inmem/README.md (issue 15). Compares
 * ipkit's checksum (core/wire/csum.c, included as is: 64-bit words, carries counted
 * apart, two add/add-with-carry chains) with the shape smoltcp uses
 * (wire/ip.rs checksum::data: 16-bit words into a 32-bit accumulator, no carry
 * between them, which compilers vectorise), written here in C and compiled with the
 * same flags. Both must give the same folded sum on every length and alignment
 * checked, or the program exits 1.
 *
 *   csum_shape [--check]   (--check: the agreement check only, for make test)
 * Output: ns per 1460 B for each (best of 50 rounds of 20,000 sums), instructions
 * are in callgrind (bench/inmem/instr.sh) and do not show the difference.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "wire/csum.c"

/* smoltcp's shape: 16-bit words (host order) summed into 32-bit lanes; at most
 * 65535 bytes here, so the 32-bit sum of at most 32767 words cannot overflow. */
/* gcc vectorises this loop at -O3 only (at -O2 its cost model declines); clang does at
 * -O2 and has no optimize attribute */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))
#endif
static uint32_t lanes_sum(const uint8_t *p, uint32_t len)
{
	uint32_t acc = 0, i;

	for (i = 0; i + 2 <= len; i += 2) {
		uint16_t w;

		memcpy(&w, p + i, 2);
		acc += w;
	}
	if (i < len)
		acc += p[i]; /* little-endian host: the odd byte is the low half */
	return acc;
}

/* Both as the checksum field's value, host order (RFC 1071 fold, complement). */
static uint16_t fold_lanes(uint32_t acc)
{
	uint16_t f;

	acc = (acc & 0xffffu) + (acc >> 16);
	acc = (acc & 0xffffu) + (acc >> 16);
	f = (uint16_t)acc;
	f = (uint16_t)((f << 8) | (f >> 8)); /* host (little-endian) words -> big-endian sum */
	return (uint16_t)~f;
}

static uint16_t ipk_sum(const uint8_t *p, uint32_t len)
{
	int odd = 0;

	return ipk_csum_fold(ipk_csum_add(0, p, len, &odd));
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static volatile uint32_t sink;

static double best_ns(int lanes, const uint8_t *buf)
{
	double best = 1e30;
	int r, k;

	for (r = 0; r < 50; r++) {
		double t0 = now_ns(), t;

		for (k = 0; k < 20000; k++)
			sink += lanes ? lanes_sum(buf + (k & 7) * 2, 1460) : ipk_sum(buf + (k & 7) * 2, 1460);
		t = (now_ns() - t0) / 20000;
		if (t < best)
			best = t;
	}
	return best;
}

int main(int argc, char **argv)
{
	static uint8_t buf[4096];
	uint32_t x = 0x12345678u, i, len, off;

	for (i = 0; i < sizeof(buf); i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		buf[i] = (uint8_t)(x >> 24);
	}
	if (!csum_host_le()) {
		printf("csum_shape: little-endian hosts only\n");
		return 77;
	}
	for (off = 0; off < 8; off++)
		for (len = 0; len <= 1600; len++)
			if (ipk_sum(buf + off, len) != fold_lanes(lanes_sum(buf + off, len))) {
				printf("csum_shape: FAIL: sums differ at offset %u length %u\n", off, len);
				return 1;
			}
	printf("csum_shape: the two shapes agree on lengths 0..1600 at 8 offsets\n");
	if (argc > 1 && strcmp(argv[1], "--check") == 0)
		return 0;
	printf("ipkit (add/adc chains): %.1f ns per 1460 B\n", best_ns(0, buf));
	printf("16-bit lanes (smoltcp's shape, compiler-vectorised): %.1f ns per 1460 B\n",
	       best_ns(1, buf));
	return 0;
}
