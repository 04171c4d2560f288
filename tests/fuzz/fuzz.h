/* What every fuzz target provides: the libFuzzer entry and a seed-corpus writer
 * (used by the replay driver, fuzz_replay.c, so corpora can be regenerated). */
#ifndef IPKIT_FUZZ_H
#define IPKIT_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Write the target's seed corpus into dir; returns files written. */
int fuzz_make_corpus(const char *dir);

#ifdef __cplusplus
}
#endif
#endif
