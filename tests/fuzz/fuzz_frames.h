/* The frame fuzz target shared by the libFuzzer build and the replay driver. */
#ifndef IPKIT_FUZZ_FRAMES_H
#define IPKIT_FUZZ_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Write the seed corpus (valid and malformed frames) into dir; returns files written. */
int fuzz_frames_make_corpus(const char *dir);

#ifdef __cplusplus
}
#endif
#endif
