/*
 * IPK_AFXDP_REAL: the afxdp backend is compiled for real only when libxdp/libbpf
 * headers exist and the compiler targets the machine meson configured libbpf for
 * (pointer size and byte order passed by io/afxdp/meson.build). A cross compile of
 * the same sources (the portability gate's i686/s390x builds) gets the stub backend,
 * which has nothing to link against.
 */
#ifndef IPKIT_AFXDP_REAL_H
#define IPKIT_AFXDP_REAL_H

#if defined(__has_include) && defined(IPK_AFXDP_PTR_SIZE) && defined(IPK_AFXDP_BIG_ENDIAN)
#if __has_include(<xdp/xsk.h>) && __has_include(<bpf/libbpf.h>) && \
	IPK_AFXDP_PTR_SIZE == __SIZEOF_POINTER__ && \
	IPK_AFXDP_BIG_ENDIAN == (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)
#define IPK_AFXDP_REAL 1
#endif
#endif

#endif
