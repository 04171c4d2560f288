/*
 * The harnesses step each connection's request offset with im_req_next instead of
 * computing im_req_off per request; the two must agree (im_common.h), across the
 * wrap at IM_PAT too, or a harness would check a different byte sequence than the
 * one im_req_off defines for every stack.
 */
#include <stdio.h>

#include "im_common.h"

int main(void)
{
	uint32_t id, bad = 0;

	for (id = 0; id < 64; id++) {
		uint32_t off = im_req_off(id, 0);
		uint64_t k;

		for (k = 0; k < 3u * IM_PAT; k++) { /* three wraps of the pattern */
			if (off >= IM_PAT || off != im_req_off(id, k)) {
				if (bad++ < 5)
					fprintf(stderr, "id %u request %llu: stepped %u, im_req_off %u\n", id,
					        (unsigned long long)k, off, im_req_off(id, k));
			}
			off = im_req_next(off);
		}
	}
	if (bad)
		fprintf(stderr, "test_im_common: %u mismatches\n", bad);
	return bad ? 1 : 0;
}
