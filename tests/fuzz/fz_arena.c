/*
 * A snapshot arena for the simulator's heap (fuzz_frames): the libFuzzer build
 * compiles the simulator with malloc, calloc, realloc and free renamed to the
 * functions below (meson.build). While the arena is on, they bump-allocate from
 * one static block (free does nothing), so a world built once can be copied aside
 * and copied back before each input: every pointer stays valid because every
 * object is back at its old address. Off (the default, and always under ASan,
 * which must see each object's own bounds) they are the C library's.
 *
 * The pools' buffer memory is large and mostly free: a region excluded with
 * fz_arena_exclude is not copied; the caller restores the buffers that matter.
 */
/* the C library's own, whatever the build renamed (before any header declares them) */
#undef malloc
#undef calloc
#undef realloc
#undef free

#include "fz_arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define FZ_ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FZ_ARENA_ASAN 1
#endif
#endif

#define ARENA_SIZE (24u << 20)
#define HDR 16u /* each block: its size, then the bytes (16-byte aligned) */
#define MAX_EXCL 8

static uint8_t arena[ARENA_SIZE] __attribute__((aligned(64)));
static size_t used, snap_used;
static int on;
static uint8_t *snap;
static struct {
	size_t lo, hi;
} excl[MAX_EXCL];
static int nexcl;

static int in_arena(const void *p)
{
	return (const uint8_t *)p >= arena && (const uint8_t *)p < arena + ARENA_SIZE;
}

int fz_arena_on(void)
{
#ifdef FZ_ARENA_ASAN
	return 0;
#else
	on = 1;
	return 1;
#endif
}

void *fz_malloc(size_t n)
{
	size_t need = HDR + ((n + 15) & ~(size_t)15);

	if (!on || need > ARENA_SIZE - used)
		return malloc(n);
	memcpy(arena + used, &n, sizeof(n));
	used += need;
	return arena + used - need + HDR;
}

void *fz_calloc(size_t n, size_t m)
{
	void *p;

	if (m && n > (size_t)-1 / m)
		return NULL;
	p = fz_malloc(n * m);
	if (p)
		memset(p, 0, n * m); /* an arena block may hold an earlier input's bytes */
	return p;
}

void fz_free(void *p)
{
	if (p && !in_arena(p))
		free(p);
}

void *fz_realloc(void *p, size_t n)
{
	size_t old;
	void *q;

	if (!p)
		return fz_malloc(n);
	if (!in_arena(p))
		return realloc(p, n);
	memcpy(&old, (uint8_t *)p - HDR, sizeof(old));
	q = fz_malloc(n);
	if (q)
		memcpy(q, p, old < n ? old : n);
	return q;
}

void fz_arena_exclude(const void *p, size_t n)
{
	if (!in_arena(p) || nexcl == MAX_EXCL)
		return;
	excl[nexcl].lo = (size_t)((const uint8_t *)p - arena);
	excl[nexcl].hi = excl[nexcl].lo + n;
	nexcl++;
}

/* Copy the snapshot's span of the arena one way or the other, skipping the
 * excluded regions. */
static void copy_range(int to_arena)
{
	size_t at = 0;

	while (at < snap_used) {
		size_t end = snap_used, skip_to = 0;
		int i;

		for (i = 0; i < nexcl; i++) {
			if (excl[i].lo <= at && at < excl[i].hi) {
				skip_to = excl[i].hi;
				break;
			}
			if (excl[i].lo > at && excl[i].lo < end)
				end = excl[i].lo;
		}
		if (skip_to) {
			at = skip_to;
			continue;
		}
		if (to_arena)
			memcpy(arena + at, snap + at, end - at);
		else
			memcpy(snap + at, arena + at, end - at);
		at = end;
	}
}

void fz_arena_snapshot(void)
{
	snap_used = used;
	snap = (uint8_t *)malloc(snap_used ? snap_used : 1);
	if (!snap)
		abort(); /* harness memory at start-up, not input */
	copy_range(0);
}

void fz_arena_restore(void)
{
	copy_range(1);
	used = snap_used;
}
