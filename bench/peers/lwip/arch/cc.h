/* lwIP port definitions for the in-memory harness: a hosted Linux build. */
#ifndef IM_LWIP_ARCH_CC_H
#define IM_LWIP_ARCH_CC_H
#include <stdio.h>
#include <stdlib.h>
#define LWIP_PLATFORM_DIAG(x) do { printf x; } while (0)
#define LWIP_PLATFORM_ASSERT(x) do { fprintf(stderr, "lwip assert: %s\n", x); abort(); } while (0)
#define LWIP_NO_STDDEF_H 0
#define LWIP_NO_STDINT_H 0
#define LWIP_NO_INTTYPES_H 0
#define LWIP_NO_LIMITS_H 0
#define LWIP_NO_CTYPE_H 0
/* Byte swaps as compiler builtins (one bswap instruction, inlined), as lwIP's def.h
 * asks a port to provide for speed; without them lwip_htons/lwip_htonl are out-of-line
 * calls into def.c on every header field. lwIP's arch.h assumes a little-endian host
 * unless BYTE_ORDER is set; the builtins are used only when the compiler agrees. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define lwip_htons(x) ((u16_t)__builtin_bswap16((u16_t)(x)))
#define lwip_htonl(x) ((u32_t)__builtin_bswap32((u32_t)(x)))
#endif
#endif
