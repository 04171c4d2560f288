/*
 * One error space for every layer (issue 14 item 12): the core's IPK_E* codes are the
 * negative Linux errno values, so a code from the core, io or runtime means the same
 * thing wherever it comes from, and ipk_strerror names all of them.
 *
 * The compile-time checks fail the build when a constant drifts from its errno
 * (the test cannot be run with the old numbering: IPK_EINVAL was -1 == -EPERM). The
 * run-time checks cover ipk_strerror and the public functions that used to return
 * a bare -1 (ipk_pool_buf_get, ipk_model_parse, ipk_io_fd).
 */
#include <errno.h>
#include <ipkit/core.h>
#include <ipkit/io.h>
#include <ipkit/runtime.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

/* C99 has no _Static_assert: a negative array size stops the build instead. */
#define SAME_AS_ERRNO(code, e) typedef char same_as_errno_##e[((code) == -(e)) ? 1 : -1]
SAME_AS_ERRNO(IPK_ENOENT, ENOENT);
SAME_AS_ERRNO(IPK_EAGAIN, EAGAIN);
SAME_AS_ERRNO(IPK_ENOMEM, ENOMEM);
SAME_AS_ERRNO(IPK_EINVAL, EINVAL);
SAME_AS_ERRNO(IPK_ECLOSED, EPIPE);
SAME_AS_ERRNO(IPK_EMSGSIZE, EMSGSIZE);
SAME_AS_ERRNO(IPK_EADDRINUSE, EADDRINUSE);
SAME_AS_ERRNO(IPK_ENOBUFS, ENOBUFS);
SAME_AS_ERRNO(IPK_ENOTCONN, ENOTCONN);
SAME_AS_ERRNO(IPK_EHOSTUNREACH, EHOSTUNREACH);

static const int codes[] = {
	IPK_ENOENT, IPK_EAGAIN, IPK_ENOMEM, IPK_EINVAL, IPK_ECLOSED, IPK_EMSGSIZE,
	IPK_EADDRINUSE, IPK_ENOBUFS, IPK_ENOTCONN, IPK_EHOSTUNREACH,
};
#define NCODES (sizeof(codes) / sizeof(codes[0]))

static void test_errors_are_negative_errno(void)
{
	unsigned i;

	for (i = 0; i < NCODES; i++) {
		CHECK(codes[i] < 0);
		/* libc knows each one: the number is a real errno, not an invented one */
		CHECK(strncmp(strerror(-codes[i]), "Unknown error", 13) != 0);
	}
	CHECK_EQ(IPK_OK, 0);
}

static void test_strerror_names_every_core_code(void)
{
	unsigned i, j;

	for (i = 0; i < NCODES; i++) {
		const char *s = ipk_strerror(codes[i]);
		CHECK(s != NULL);
		CHECK(strcmp(s, "unknown error") != 0);
		for (j = 0; j < i; j++)
			CHECK(strcmp(s, ipk_strerror(codes[j])) != 0);
	}
	CHECK(strstr(ipk_strerror(IPK_EINVAL), "EINVAL") != NULL);
	CHECK(strstr(ipk_strerror(-EPERM), "EPERM") != NULL);
	CHECK(strstr(ipk_strerror(-EOPNOTSUPP), "EOPNOTSUPP") != NULL);
}

static void test_strerror_edges(void)
{
	CHECK(strcmp(ipk_strerror(0), "ok") == 0);
	CHECK(strcmp(ipk_strerror(42), "ok") == 0); /* a count is not an error */
	CHECK(strcmp(ipk_strerror(-9999), "unknown error") == 0);
	CHECK(strcmp(ipk_strerror(-2147483647 - 1), "unknown error") == 0);
}

static void test_core_bad_args_give_einval(void)
{
	/* NULL handles: the core's checks answer with the errno-valued code */
	CHECK_EQ(ipk_tcp_listen(NULL, ipk_htons(80), 4), -EINVAL);
	CHECK_EQ(ipk_udp_bind(NULL, ipk_htons(53)), -EINVAL);
	CHECK_EQ(ipk_rss_queue(NULL, 0, 1), -EINVAL);
}

static void test_io_runtime_share_the_space(void)
{
	struct ipk_pool_cfg pc;
	struct ipk_pool *p;
	char err[128];
	int64_t idx;

	CHECK_EQ(ipk_model_parse("nonsense"), -EINVAL);
	CHECK_EQ(ipk_model_parse(NULL), -EINVAL);
	CHECK_EQ(ipk_model_parse("split"), IPK_MODEL_SPLIT);

	ipk_pool_cfg_default(&pc);
	pc.nbufs = 1;
	pc.ndescs = 1;
	p = ipk_pool_create(&pc, err, sizeof(err));
	CHECK(p != NULL);
	if (!p)
		return;
	idx = ipk_pool_buf_get(p);
	CHECK(idx >= 0);
	CHECK_EQ(ipk_pool_buf_get(p), -ENOBUFS); /* was -1, i.e. -EPERM */
	CHECK_EQ(ipk_pool_buf_get(p), IPK_ENOBUFS);
	if (idx >= 0)
		ipk_pool_buf_put(p, (uint32_t)idx);
	ipk_pool_destroy(p);
}

/* A backend that can only be polled has no fd: -EOPNOTSUPP, not a bare -1 (-EPERM).
 * memlink with busypoll=1 opens no socket; role=a creates and removes its region. */
static void test_io_fd_without_fd_is_eopnotsupp(void)
{
	struct ipk_pool *p = ipk_pool_create(NULL, NULL, 0);
	struct ipk_io *io;
	char spec[96], err[256] = "";

	CHECK(p != NULL);
	if (!p)
		return;
	snprintf(spec, sizeof(spec), "memlink:ipkerr%ld,role=a,busypoll=1", (long)getpid());
	io = ipk_io_open(spec, p, err, sizeof(err));
	if (!io)
		fprintf(stderr, "%s: %s\n", spec, err);
	CHECK(io != NULL);
	if (io) {
		CHECK_EQ(ipk_io_fd(io), -EOPNOTSUPP);
		ipk_io_close(io);
	}
	ipk_pool_destroy(p);
}

/* Counts share the int with error codes: none may grow into the negative range. */
static void *no_alloc(void *o) { (void)o; return NULL; }
static void no_free(void *p, void *o) { (void)p; (void)o; }
static uint8_t *no_data(void *p, void *o) { (void)p; (void)o; return NULL; }
static uint32_t no_len(void *p, void *o) { (void)p; (void)o; return 0; }
static void no_set(void *p, uint32_t n, void *o) { (void)p; (void)n; (void)o; }
static void *no_clone(void *p, void *o) { (void)p; (void)o; return NULL; }
static void no_append(void *h, void *t, void *o) { (void)h; (void)t; (void)o; }
static void *no_next(void *p, void *o) { (void)p; (void)o; return NULL; }
static uint32_t no_random(void *o) { (void)o; return 4; }

static const struct ipk_ops stub_ops = {
	.pkt_alloc = no_alloc, .pkt_free = no_free, .pkt_data = no_data, .pkt_len = no_len,
	.pkt_set_len = no_set, .pkt_adj_head = no_set, .pkt_trim_tail = no_set,
	.pkt_clone = no_clone, .pkt_chain_append = no_append, .pkt_chain_next = no_next,
	.pkt_chain_cut = no_next, .tx = no_free, .random = no_random,
};

static void test_counts_never_look_like_errors(void)
{
	static uint64_t conns[64], pbs[64]; /* 8-byte aligned, never written below */
	struct ipk_config cfg;
	struct ipk_ctx *ctx;
	void *mem;
	size_t size;

	ipk_config_default(&cfg);
	cfg.ip4_be = IPK_IP4(10, 0, 0, 1);
	cfg.tcp_sndbuf = 0x80000000u; /* ipk_tcp_write could return it as a negative int */
	CHECK_EQ(ipk_ctx_size(&cfg), 0);
	cfg.tcp_sndbuf = 0x7fffffffu;
	CHECK(ipk_ctx_size(&cfg) > 0);

	ipk_config_default(&cfg);
	cfg.ip4_be = IPK_IP4(10, 0, 0, 1);
	size = ipk_ctx_size(&cfg);
	mem = size ? calloc(1, size) : NULL;
	CHECK(mem != NULL);
	if (!mem)
		return;
	ctx = ipk_ctx_init(mem, size, &cfg, &stub_ops);
	CHECK(ctx != NULL);
	if (ctx) {
		/* refused before the core writes a single object: a count the int result
		 * cannot carry (without the check: 2^31 objects written past the array) */
		CHECK_EQ(ipk_add_conns(ctx, conns, 0x80000000u), IPK_EINVAL);
		CHECK_EQ(ipk_add_pbs(ctx, pbs, 0xffffffffu), IPK_EINVAL);
		CHECK_EQ(ipk_conns_free(ctx), 0);
		CHECK_EQ(ipk_pbs_free(ctx), 0);
	}
	free(mem);
}

int main(void)
{
	RUN(test_errors_are_negative_errno);
	RUN(test_strerror_names_every_core_code);
	RUN(test_strerror_edges);
	RUN(test_core_bad_args_give_einval);
	RUN(test_io_runtime_share_the_space);
	RUN(test_counts_never_look_like_errors);
	RUN(test_io_fd_without_fd_is_eopnotsupp);
	return check_summary();
}
