/*
 * The backend registry: spec parsing ("<kind>:<dev>[,key=value...]"), lookup of the
 * compiled-in backends, and the public ipk_io_* calls dispatching through the vtable.
 */
#include "io_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ipk_io_err(char *err, size_t errlen, int errnum, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -errnum;
}

/* ---------------------------------------------------------------- specs */

static int is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

/* Copy [s, s+n) into dst (cap bytes incl. NUL); 0 or -1 when it does not fit. */
static int copy_part(char *dst, size_t cap, const char *s, size_t n)
{
	if (n >= cap)
		return -1;
	memcpy(dst, s, n);
	dst[n] = '\0';
	return 0;
}

static int parse_kv(struct ipk_io_args *a, const char *s, size_t n, char *err, size_t errlen)
{
	const char *eq = memchr(s, '=', n);
	size_t klen;
	int i;

	if (!eq)
		return ipk_io_err(err, errlen, EINVAL, "io: option '%.*s' is not key=value",
		                  (int)n, s);
	klen = (size_t)(eq - s);
	if (klen == 0 || eq + 1 == s + n)
		return ipk_io_err(err, errlen, EINVAL, "io: option '%.*s' needs a key and a value",
		                  (int)n, s);
	if (a->nkv >= IPK_IO_MAX_KV)
		return ipk_io_err(err, errlen, EINVAL, "io: more than %d options", IPK_IO_MAX_KV);
	for (i = 0; i < (int)klen; i++)
		if (!is_name_char(s[i]))
			return ipk_io_err(err, errlen, EINVAL, "io: bad option name '%.*s'",
			                  (int)klen, s);
	if (copy_part(a->kv[a->nkv].key, sizeof(a->kv[0].key), s, klen) < 0 ||
	    copy_part(a->kv[a->nkv].val, sizeof(a->kv[0].val), eq + 1, n - klen - 1) < 0)
		return ipk_io_err(err, errlen, EINVAL, "io: option '%.*s' too long", (int)klen, s);
	for (i = 0; i < a->nkv; i++)
		if (strcmp(a->kv[i].key, a->kv[a->nkv].key) == 0)
			return ipk_io_err(err, errlen, EINVAL, "io: option '%s' given twice",
			                  a->kv[i].key);
	a->nkv++;
	return 0;
}

int ipk_io_parse(const char *spec, struct ipk_io_args *a, char *err, size_t errlen)
{
	const char *colon, *p, *end;
	size_t i;

	memset(a, 0, sizeof(*a));
	if (!spec || !*spec)
		return ipk_io_err(err, errlen, EINVAL, "io: empty spec (expected kind:device[,key=value...])");
	colon = strchr(spec, ':');
	if (!colon || colon == spec)
		return ipk_io_err(err, errlen, EINVAL,
		                  "io: spec '%s' has no kind (expected kind:device[,key=value...])",
		                  spec);
	for (p = spec; p < colon; p++)
		if (!is_name_char(*p))
			return ipk_io_err(err, errlen, EINVAL, "io: bad backend kind '%.*s'",
			                  (int)(colon - spec), spec);
	if (copy_part(a->kind, sizeof(a->kind), spec, (size_t)(colon - spec)) < 0)
		return ipk_io_err(err, errlen, EINVAL, "io: backend kind too long in '%s'", spec);
	p = colon + 1;
	end = strchr(p, ',');
	if (!end)
		end = p + strlen(p);
	if (end == p)
		return ipk_io_err(err, errlen, EINVAL, "io: spec '%s' names no device", spec);
	/* virtio's device names a transport: vhost-user=/path/to.sock, pci=0000:00:03.0 */
	for (i = 0; p + i < end; i++)
		if (p[i] == ' ' || ((p[i] == '=' || p[i] == '/') && strcmp(a->kind, "virtio") != 0))
			return ipk_io_err(err, errlen, EINVAL, "io: bad device name '%.*s'",
			                  (int)(end - p), p);
	if (copy_part(a->dev, sizeof(a->dev), p, (size_t)(end - p)) < 0)
		return ipk_io_err(err, errlen, EINVAL, "io: device name too long in '%s'", spec);
	while (*end == ',') {
		int rc;

		p = end + 1;
		end = strchr(p, ',');
		if (!end)
			end = p + strlen(p);
		rc = parse_kv(a, p, (size_t)(end - p), err, errlen);
		if (rc < 0)
			return rc;
	}
	return 0;
}

const char *ipk_io_arg(const struct ipk_io_args *a, const char *key)
{
	int i;

	for (i = 0; i < a->nkv; i++)
		if (strcmp(a->kv[i].key, key) == 0)
			return a->kv[i].val;
	return NULL;
}

long ipk_io_arg_int(const struct ipk_io_args *a, const char *key, long def, char *err,
                    size_t errlen)
{
	const char *v = ipk_io_arg(a, key);
	long n = 0;

	if (!v)
		return def;
	if (!*v)
		goto bad;
	for (; *v; v++) {
		if (*v < '0' || *v > '9' || n > (0x7fffffffL - 9) / 10)
			goto bad;
		n = n * 10 + (*v - '0');
	}
	return n;
bad:
	ipk_io_err(err, errlen, EINVAL, "%s: option %s=%s is not a number in 0..2147483647",
	           a->kind, key, ipk_io_arg(a, key));
	return -1;
}

int ipk_io_arg_check(const struct ipk_io_args *a, const char *const *known, char *err,
                     size_t errlen)
{
	int i, j;

	for (i = 0; i < a->nkv; i++) {
		for (j = 0; known[j]; j++)
			if (strcmp(a->kv[i].key, known[j]) == 0)
				break;
		if (!known[j])
			return ipk_io_err(err, errlen, EINVAL, "%s: unknown option '%s'", a->kind,
			                  a->kv[i].key);
	}
	return 0;
}

int ipk_io_arg_bool(const struct ipk_io_args *a, const char *key, int def, char *err,
                    size_t errlen)
{
	const char *v = ipk_io_arg(a, key);

	if (!v)
		return def;
	if (strcmp(v, "0") == 0 || strcmp(v, "1") == 0)
		return v[0] - '0';
	ipk_io_err(err, errlen, EINVAL, "%s: option %s=%s must be 0 or 1", a->kind, key, v);
	return -1;
}

/* ------------------------------------------------------------- registry */

static const struct ipk_io_backend *const io_backends[] = {
#ifdef IPK_IO_HAVE_TAP
	&ipk_io_tap_backend,
	&ipk_io_tun_backend,
#endif
#ifdef IPK_IO_HAVE_AFPACKET
	&ipk_io_afpacket_backend,
#endif
#ifdef IPK_IO_HAVE_AFXDP
	&ipk_io_afxdp_backend,
#endif
#ifdef IPK_IO_HAVE_MEMLINK
	&ipk_io_memlink_backend,
#endif
#ifdef IPK_IO_HAVE_DPDK
	&ipk_io_dpdk_backend,
#endif
#ifdef IPK_IO_HAVE_VIRTIO
	&ipk_io_virtio_backend,
#endif
	NULL
};

/* Every kind the project knows, compiled in or not, so a missing one gets a better
 * message than "unknown". */
static const char *const io_known_kinds[] = { "tap", "tun", "afpacket", "afxdp", "memlink",
                                              "dpdk", "virtio", NULL };

static const struct ipk_io_backend *io_find(const char *kind)
{
	size_t i;

	for (i = 0; io_backends[i]; i++)
		if (strcmp(io_backends[i]->kind, kind) == 0)
			return io_backends[i];
	return NULL;
}

static int io_unknown_kind(const char *kind, char *err, size_t errlen)
{
	char list[128] = "";
	size_t i, at = 0;

	for (i = 0; io_known_kinds[i]; i++)
		if (strcmp(io_known_kinds[i], kind) == 0)
			return ipk_io_err(err, errlen, ENOTSUP,
			                  "io: backend '%s' is not compiled into this build", kind);
	for (i = 0; io_backends[i] && at < sizeof(list); i++)
		at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%s", i ? " " : "",
		                       io_backends[i]->kind);
	return ipk_io_err(err, errlen, EINVAL, "io: unknown backend kind '%s' (available: %s)",
	                  kind, at ? list : "none");
}

/* Allocate the handle with the backend's private state behind it and open. */
struct ipk_io *ipk_io_open_args(const struct ipk_io_args *a, const char *spec,
                                struct ipk_pool *pool, char *err, size_t errlen)
{
	const struct ipk_io_backend *be = io_find(a->kind);
	struct ipk_io *io;
	size_t sz;

	if (!be) {
		io_unknown_kind(a->kind, err, errlen);
		return NULL;
	}
	sz = (sizeof(struct ipk_io) + 63) & ~(size_t)63;
	io = (struct ipk_io *)calloc(1, sz + be->priv_size);
	if (!io) {
		ipk_io_err(err, errlen, ENOMEM, "io: out of memory");
		return NULL;
	}
	io->be = be;
	io->pool = pool;
	io->priv = be->priv_size ? (uint8_t *)io + sz : NULL;
	snprintf(io->name, sizeof(io->name), "%s", spec);
	if (be->open(io, a, err, errlen) < 0) {
		free(io);
		return NULL;
	}
	return io;
}

struct ipk_io *ipk_io_open(const char *spec, struct ipk_pool *pool, char *err, size_t errlen)
{
	struct ipk_io_args a;
	const char *pcap;
	struct ipk_io *io;
	char file[sizeof(a.kv[0].val)];
	int i;

	if (!pool) {
		ipk_io_err(err, errlen, EINVAL, "io: no packet pool given");
		return NULL;
	}
	if (ipk_io_parse(spec, &a, err, errlen) < 0)
		return NULL;
	pcap = ipk_io_arg(&a, "pcap");
	if (!pcap)
		return ipk_io_open_args(&a, spec, pool, err, errlen);
	/* The wrapper consumes pcap=; the backend never sees it. */
	snprintf(file, sizeof(file), "%s", pcap);
	for (i = 0; i < a.nkv; i++)
		if (strcmp(a.kv[i].key, "pcap") == 0) {
			a.kv[i] = a.kv[a.nkv - 1];
			a.nkv--;
			break;
		}
	io = ipk_io_open_args(&a, spec, pool, err, errlen);
	if (!io)
		return NULL;
	return ipk_io_pcap_wrap(io, file, err, errlen);
}

uint32_t ipk_io_spec_buf_size(const char *spec)
{
	struct ipk_io_args a;
	long frame;

	if (ipk_io_parse(spec, &a, NULL, 0) < 0 || strcmp(a.kind, "afxdp") != 0)
		return 0;
	frame = ipk_io_arg_int(&a, "frame", 0, NULL, 0);
	return frame > 0 ? (uint32_t)frame : 0;
}

void ipk_io_close(struct ipk_io *io)
{
	if (!io)
		return;
	io->be->close(io);
	free(io);
}

/* Misuse answers as io.h says (a NULL handle or array: -EINVAL, or 0 taken where the
 * return is a count of packets the caller keeps otherwise), never a crash; the checks
 * are per burst, not per packet. */
int ipk_io_rx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	if (n <= 0)
		return 0;
	if (!io || !pkts)
		return -EINVAL;
	return io->be->rx_burst(io, pkts, n);
}

int ipk_io_tx_burst(struct ipk_io *io, struct ipk_pkt **pkts, int n)
{
	if (n <= 0 || !io || !pkts)
		return 0;
	return io->be->tx_burst(io, pkts, n);
}

int ipk_io_flush(struct ipk_io *io)
{
	if (!io)
		return -EINVAL;
	return io->be->flush ? io->be->flush(io) : 0;
}

const struct ipk_io_caps *ipk_io_caps(const struct ipk_io *io)
{
	return io ? &io->caps : NULL;
}

int ipk_io_fd(const struct ipk_io *io)
{
	int fd;

	if (!io)
		return -EINVAL;
	fd = io->be->fd ? io->be->fd(io) : -1;
	return fd >= 0 ? fd : -EOPNOTSUPP; /* one error space: never a bare -1 (io.h) */
}

int ipk_io_arm(struct ipk_io *io)
{
	if (!io)
		return -EINVAL;
	return io->be->arm ? io->be->arm(io) : 0;
}

void ipk_io_stats(const struct ipk_io *io, struct ipk_io_stats *st)
{
	if (!st)
		return;
	if (!io) {
		memset(st, 0, sizeof(*st));
		return;
	}
	/* The pcap wrapper counts nothing itself: report the wrapped backend. */
	while (io->inner)
		io = io->inner;
	*st = io->st;
}

const char *ipk_io_name(const struct ipk_io *io)
{
	return io ? io->name : "(no io)";
}
