/* The simulator's heap as a snapshot arena, for fuzz_frames (see fz_arena.c). */
#ifndef IPKIT_FZ_ARENA_H
#define IPKIT_FZ_ARENA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void *fz_malloc(size_t n);
void *fz_calloc(size_t n, size_t m);
void *fz_realloc(void *p, size_t n);
void fz_free(void *p);
/* Turn the arena on (allocations from now on go there); 0 when it cannot be used
 * (under ASan), and everything stays on the C library's heap. */
int fz_arena_on(void);
/* Leave [p, p + n) out of snapshots (pool buffer memory the caller restores). */
void fz_arena_exclude(const void *p, size_t n);
void fz_arena_snapshot(void);
void fz_arena_restore(void);

#ifdef __cplusplus
}
#endif
#endif
