/*
 * Fuzz target: the RSS packet parser (core/rss.c ipk_rss_hash_packet), which the
 * workers' software steering and memlink's RSS emulation run on every received frame
 * before any other check. Input: one selector byte (bit 0: raw IP instead of
 * Ethernet; bits 1..6: the hash fields, 0 = default), then the frame, copied into a
 * heap buffer of exactly its length so a read past the end trips ASan. Properties:
 * the result is one of IPK_RSS_PKT_*, and the same bytes give the same answer (no
 * state, nothing read outside the frame).
 */
#include "fuzz.h"

#include <ipkit/core.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fz_host.h"
#include "../wire/linux_frames6.h"

static uint8_t key[IPK_RSS_KEY_LEN];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *f;
	uint32_t len, h1 = 0, h2 = 0, fields;
	uint8_t link;
	int r1, r2;

	if (size < 1 || size > 4096)
		return 0;
	if (!key[0])
		ipk_rss_key_symmetric(key);
	link = data[0] & 1 ? IPK_LINK_RAWIP : IPK_LINK_ETH;
	fields = (uint32_t)(data[0] >> 1) & IPK_RSS_F_DEFAULT;
	len = (uint32_t)size - 1;
	f = (uint8_t *)malloc(len ? len : 1);
	if (!f)
		return 0;
	memcpy(f, data + 1, len);
	r1 = ipk_rss_hash_packet(key, fields, f, len, link, &h1);
	r2 = ipk_rss_hash_packet(key, fields, f, len, link, &h2);
	if (r1 < IPK_RSS_PKT_NONE || r1 > IPK_RSS_PKT_ND || r1 != r2 ||
	    (r1 != IPK_RSS_PKT_NONE && h1 != h2))
		abort();
	free(f);
	return 0;
}

static int seed(const char *dir, const char *name, uint8_t sel, const uint8_t *b, uint32_t n)
{
	static uint8_t buf[2048];

	if (n + 1 > sizeof(buf))
		n = sizeof(buf) - 1;
	buf[0] = sel;
	memcpy(buf + 1, b, n);
	return fz_put_file(dir, name, buf, n + 1);
}

/* Linux's IPv6 frames (tests/wire/linux_frames6.h) as Ethernet and as raw IP, and
 * an IPv4 TCP frame. */
int fuzz_make_corpus(const char *dir)
{
	static const uint8_t tcp4[14 + 24] = {
		0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0x08, 0x00, 0x45, 0, 0, 24, 0, 0, 0, 0, 64, 6,
		0, 0, 10, 0, 0, 1, 10, 0, 0, 2, 0x9c, 0x40, 0, 7};
	char name[64];
	size_t i;
	int n = 0;

	for (i = 0; i < sizeof(linux_frames6) / sizeof(linux_frames6[0]); i++) {
		const struct linux_frame6 *fr = &linux_frames6[i];

		snprintf(name, sizeof(name), "eth-%s", fr->name);
		n += seed(dir, name, 0, fr->bytes, fr->len);
		snprintf(name, sizeof(name), "raw-%s", fr->name);
		n += seed(dir, name, 1, fr->bytes + 14, fr->len - 14);
	}
	n += seed(dir, "eth-tcp4", 0, tcp4, sizeof(tcp4));
	n += seed(dir, "eth-tcp4-fields-ip-only", (uint8_t)(IPK_RSS_F_IP4 << 1), tcp4,
	          sizeof(tcp4));
	return n;
}
