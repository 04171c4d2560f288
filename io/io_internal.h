/*
 * What every backend implements. io.c parses the spec string, finds the backend by
 * its kind, allocates the struct ipk_io (with priv_size bytes after it for the
 * backend) and calls open; the public ipk_io_* functions dispatch through `be`.
 */
#ifndef IPKIT_IO_INTERNAL_H
#define IPKIT_IO_INTERNAL_H

#include <ipkit/io.h>

#define IPK_IO_MAX_KV 16

/* A parsed spec: "<kind>:<dev>[,key=value...]". */
struct ipk_io_args {
	char kind[16];
	char dev[128];          /* virtio:vhost-user=PATH needs a socket path */
	int nkv;
	struct { char key[32]; char val[192]; } kv[IPK_IO_MAX_KV];
};
/* Value of key, or NULL. */
const char *ipk_io_arg(const struct ipk_io_args *a, const char *key);
/* Integer value of key (decimal), or def when absent; -1 plus an err message when
 * malformed. */
long ipk_io_arg_int(const struct ipk_io_args *a, const char *key, long def, char *err,
                    size_t errlen);

/* Parse a spec into a (zeroed first). Rejects: no kind or device, a kind that is not
 * [a-z0-9_]+, an option without '=' or with an empty key/value, a repeated key, more
 * than IPK_IO_MAX_KV options, parts too long. 0 or -EINVAL with a message. */
int ipk_io_parse(const char *spec, struct ipk_io_args *a, char *err, size_t errlen);
/* -EINVAL with "<kind>: unknown option 'x'" when a key is not in the NULL-ended list. */
int ipk_io_arg_check(const struct ipk_io_args *a, const char *const *known, char *err,
                     size_t errlen);
/* 0/1 value of key, def when absent, -1 plus a message when not 0 or 1. */
int ipk_io_arg_bool(const struct ipk_io_args *a, const char *key, int def, char *err,
                    size_t errlen);
/* Open from parsed args (no pcap handling); spec is kept as the name. */
struct ipk_io *ipk_io_open_args(const struct ipk_io_args *a, const char *spec,
                                struct ipk_pool *pool, char *err, size_t errlen);
/* Wrap an open backend in a pcap writer (pcap.c). Takes io; on failure closes it and
 * returns NULL. */
struct ipk_io *ipk_io_pcap_wrap(struct ipk_io *io, const char *file, char *err,
                                size_t errlen);

struct ipk_io_backend {
	const char *kind;       /* "tap", "tun", "afpacket", "afxdp", "memlink" */
	size_t priv_size;
	/* Fill io->caps; return 0 or a negative errno with a one-line message in err. */
	int (*open)(struct ipk_io *io, const struct ipk_io_args *a, char *err, size_t errlen);
	int (*rx_burst)(struct ipk_io *io, struct ipk_pkt **pkts, int n);
	int (*tx_burst)(struct ipk_io *io, struct ipk_pkt **pkts, int n);
	int (*flush)(struct ipk_io *io);
	int (*fd)(const struct ipk_io *io);
	int (*arm)(struct ipk_io *io);  /* may be NULL: nothing to arm */
	void (*close)(struct ipk_io *io);
};

struct ipk_io {
	const struct ipk_io_backend *be;
	struct ipk_pool *pool;
	struct ipk_io_caps caps;
	struct ipk_io_stats st;
	char name[96];          /* the spec it was opened with (for messages) */
	struct ipk_io *inner;   /* pcap wrapper: the wrapped backend */
	void *priv;             /* backend state (priv_size bytes, zeroed) */
};

/* Backends compiled in (io/<kind>/meson.build adds -DIPK_IO_HAVE_<KIND>). */
extern const struct ipk_io_backend ipk_io_tap_backend;      /* kinds tap and tun */
extern const struct ipk_io_backend ipk_io_tun_backend;
extern const struct ipk_io_backend ipk_io_afpacket_backend;
extern const struct ipk_io_backend ipk_io_afxdp_backend;
extern const struct ipk_io_backend ipk_io_memlink_backend;
extern const struct ipk_io_backend ipk_io_dpdk_backend;
extern const struct ipk_io_backend ipk_io_virtio_backend;
struct ipk_vq_stats;
struct ipk_virtio_drops;
/* virtio: the driver's drop counters by reason (io/virtio/virtio.h); -EINVAL when io
 * is not a virtio backend. Any output may be NULL. */
int ipk_io_virtio_counters(const struct ipk_io *io, struct ipk_vq_stats *rxq,
                           struct ipk_vq_stats *txq, struct ipk_virtio_drops *drops);

/* ipk_io_set_addr for the afxdp backend (io_addr.c dispatches by backend; a vtable
 * member would break the positional initializers of the other backends). */
int ipk_io_afxdp_set_addr(struct ipk_io *io, uint32_t ip4_be, const uint8_t mac[6]);
int ipk_io_afxdp_set_addr6(struct ipk_io *io, const uint8_t addr[16], const uint8_t mac[6],
                           uint32_t flags);

/* Error text helper: snprintf into err (NULL-safe); returns -errnum. */
int ipk_io_err(char *err, size_t errlen, int errnum, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 4, 5)))
#endif
	;

#endif
