/* SHA-256 (used by ipkit-nc --sha256) against FIPS 180-4 / NIST example vectors,
 * fed in uneven pieces so block boundaries inside updates are exercised. */
#include "sha256.h"

#include <stdio.h>
#include <string.h>

static int failures;

static void check(const char *what, const void *msg, size_t len, size_t piece, const char *want)
{
	struct sha256 s;
	char got[65];
	size_t off;
	sha256_init(&s);
	for (off = 0; off < len; off += piece)
		sha256_update(&s, (const char *)msg + off, len - off < piece ? len - off : piece);
	sha256_hex(&s, got);
	if (strcmp(got, want) != 0) {
		printf("FAIL %s: got %s want %s\n", what, got, want);
		failures++;
	}
}

/* The NIST vectors with one implementation (plain C or SHA-NI). */
static void vectors(const char *impl)
{
	static char million[1000000];
	const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	memset(million, 'a', sizeof(million));
	printf("sha256: vectors with %s\n", impl);
	check("empty", "", 0, 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	check("abc", "abc", 3, 1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	check("two blocks", two, strlen(two), 7,
	      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	check("million a", million, sizeof(million), 333,
	      "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* Both implementations agree on non-repeating data of every length 0..300 and on
 * 256 KiB fed in pieces of 1..1500 bytes (the vectors' data is too regular to exercise
 * every word of the SHA-NI message schedule alone). */
static void agree(void)
{
	static uint8_t buf[256 * 1024];
	char c_hex[65], ni_hex[65];
	struct sha256 a, b;
	uint32_t x = 2463534242u;
	size_t i, len, off, piece = 1;
	for (i = 0; i < sizeof(buf); i++) {
		x ^= x << 13; x ^= x >> 17; x ^= x << 5; /* xorshift32 */
		buf[i] = (uint8_t)x;
	}
	for (len = 0; len <= sizeof(buf); len = len < 300 ? len + 1 : sizeof(buf)) {
		sha256_accel(0);
		sha256_init(&a);
		for (off = 0; off < len; off += piece, piece = piece % 1500 + 37)
			sha256_update(&a, buf + off, len - off < piece ? len - off : piece);
		sha256_hex(&a, c_hex);
		sha256_accel(1);
		sha256_init(&b);
		sha256_update(&b, buf, len);
		sha256_hex(&b, ni_hex);
		if (strcmp(c_hex, ni_hex) != 0) {
			printf("FAIL %zu bytes: plain C %s, SHA-NI %s\n", len, c_hex, ni_hex);
			failures++;
		}
		if (len == sizeof(buf))
			break;
	}
}

/* A build for x86-64 carries the SHA-NI path; others (i686, s390x in the portability
 * gate's cross runs, on this same x86-64 CPU) have only plain C, whatever the CPU. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SHA256_BUILT_WITH_SHA_NI 1
#else
#define SHA256_BUILT_WITH_SHA_NI 0
#endif

/* 1 when Linux lists the sha_ni flag for this CPU, 0 when not or unknown. */
static int cpuinfo_sha_ni(void)
{
	char line[4096];
	int found = 0;
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		found = strncmp(line, "flags", 5) == 0 && strstr(line, " sha_ni") != NULL;
	fclose(f);
	return found;
}

int main(void)
{
	sha256_accel(0);
	vectors("plain C");
	if (sha256_accel(1)) {
		vectors("SHA-NI");
		agree();
	} else if (SHA256_BUILT_WITH_SHA_NI && cpuinfo_sha_ni()) {
		/* issue 16: plain C SHA-256 was over half of ipkit-nc's CPU through the
		 * relay; a CPU with the instructions must get them (a broken CPUID check
		 * would silently fall back) */
		printf("FAIL the CPU has sha_ni (/proc/cpuinfo) but sha256_accel(1) said no\n");
		failures++;
	} else {
		printf("sha256: no SHA-NI on this CPU, plain C only\n");
	}
	if (failures)
		return 1;
	printf("sha256: ok\n");
	return 0;
}
