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

int main(void)
{
	static char million[1000000];
	const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	memset(million, 'a', sizeof(million));
	check("empty", "", 0, 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	check("abc", "abc", 3, 1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	check("two blocks", two, strlen(two), 7,
	      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	check("million a", million, sizeof(million), 333,
	      "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	if (failures)
		return 1;
	printf("sha256: ok\n");
	return 0;
}
