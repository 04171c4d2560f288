/*
 * svc_tool's hostile mode (included by svc_tool.c): an application that writes
 * garbage into its own region. Each request must come back as an error completion
 * (never a daemon crash or hang), and afterwards the daemon must still serve this
 * application and, checked by the caller, every other one.
 */

static struct ipk_svc_ring *h_ring(struct ipk_svc *svc, struct ipk_svc_sock *so)
{
	return (struct ipk_svc_ring *)((uint8_t *)ipk_svc_region(svc, NULL) +
	                               ipk_svc_sock_ring_off(so));
}

static int h_op(struct ipk_svc_sock *so, uint8_t opcode, uint64_t off, uint32_t len)
{
	struct ipk_svc_sqe e;
	memset(&e, 0, sizeof e);
	e.opcode = opcode;
	e.buf_off = off;
	e.len = len;
	e.user_data = 0xbad;
	ipk_svc_addr_ip4(&e.addr, 0x0100007fu, 9); /* a valid address: the buffer is the fault */
	return one(so, &e, NULL);
}

/* Bad offsets, lengths and opcodes on a socket's own ring. */
static void h_bad_sqes(struct ipk_svc *svc, struct ipk_svc_sock *u)
{
	uint64_t size;
	ipk_svc_region(svc, &size);
	CHECK(h_op(u, IPK_SVC_OP_SENDTO, size + 4096, 10) == -EFAULT, "sendto past the region");
	CHECK(h_op(u, IPK_SVC_OP_SENDTO, 0, 64) == -EFAULT, "sendto from the header");
	CHECK(h_op(u, IPK_SVC_OP_RECVFROM, UINT64_MAX - 8, 64) == -EFAULT, "offset wraps");
	CHECK(h_op(u, IPK_SVC_OP_RECVFROM, size - 16, 0xffffffffu) == -EFAULT, "length past end");
	CHECK(h_op(u, 200, 0, 0) == -EINVAL, "unknown opcode");
	CHECK(h_op(u, IPK_SVC_OP_SOCKET, 0, 0) == -EINVAL, "SOCKET on a socket ring");
	CHECK(h_op(u, IPK_SVC_OP_SEND, 0, 0) == -EOPNOTSUPP, "TCP send on a UDP socket");
}

/* Sockets it does not own, ports it may not have. */
static void h_foreign(struct ipk_svc *svc, struct ipk_svc_sock *t1, uint32_t other_id)
{
	struct ipk_svc_sock *t2;
	struct ipk_svc_sqe e;
	struct ipk_svc_addr a;
	CHECK(ipk_svc_close_id(svc, 0x00777777u) == -EBADF, "close a socket never created");
	CHECK(ipk_svc_close_id(svc, ipk_svc_sock_id(t1) + (1u << 24)) == -EBADF,
	      "close with a wrong generation");
	/* ids are per application: another app's sockets cannot even be named; every
	 * id this app does not hold is refused (the other app checks its own socket
	 * still works afterwards: svc_tool hold) */
	for (uint32_t id = 100; id < 200; id++)
		CHECK(ipk_svc_close_id(svc, id) == -EBADF, "close id %u this app does not hold", id);
	(void)other_id;
	ipk_svc_addr_ip4(&a, 0, 80);
	memset(&e, 0, sizeof e);
	ipk_svc_prep_bind(&e, &a);
	CHECK(one(t1, &e, NULL) == -EACCES, "bind port 80 without permission");
	ipk_svc_addr_ip4(&a, 0, 40123);
	memset(&e, 0, sizeof e);
	ipk_svc_prep_bind(&e, &a);
	CHECK(one(t1, &e, NULL) == 0, "bind 40123");
	if (ipk_svc_socket(svc, IPK_SVC_TCP, 8, 16, &t2) == 0) {
		CHECK(one(t2, &e, NULL) == -EADDRINUSE, "bind a taken port");
		ipk_svc_close(t2);
	}
	a.family = IPK_SVC_AF_INET6;
	memset(&e, 0, sizeof e);
	ipk_svc_prep_connect(&e, &a);
	CHECK(one(t1, &e, NULL) == -EAFNOSUPPORT, "IPv6 address");
}

/* Announce a socket in the ready bitmap by hand (svc/proto.h, line 6), as a
 * client that lies about its tail still does: the daemon only looks at sockets a
 * bit names. */
static void h_ready(struct ipk_svc *svc, struct ipk_svc_sock *so)
{
	struct ipk_svc_region *h = (struct ipk_svc_region *)ipk_svc_region(svc, NULL);
	uint64_t *sum = (uint64_t *)((uint8_t *)h + h->ready_off);
	uint32_t idx = h_ring(svc, so)->sock & 0xffffffu;
	__atomic_fetch_or(&sum[h->ready_sum_words + idx / 64], 1ull << (idx % 64), __ATOMIC_SEQ_CST);
	__atomic_fetch_or(&sum[idx / 64 / 64], 1ull << (idx / 64 % 64), __ATOMIC_SEQ_CST);
}

/* Corrupted ring indices: an SQ tail far ahead, then a sane one again. */
static void h_indices(struct ipk_svc *svc, struct ipk_svc_sock *so)
{
	struct ipk_svc_ring *r = h_ring(svc, so);
	struct ipk_svc_stats st0, st1;
	struct ipk_svc_cqe c;
	struct ipk_svc_sqe e;
	uint32_t tail = r->sq_tail.v, cqh = r->cq_head.v;
	ipk_svc_stats(svc, &st0);
	IPK_SVC_STORE_REL(&r->sq_tail.v, tail + 100000);
	h_ready(svc, so);
	/* bump submit_seq by hand (no bell: the daemon looks at least once a second) */
	__atomic_add_fetch(&((struct ipk_svc_region *)ipk_svc_region(svc, NULL))->submit_seq.v, 1,
	                   __ATOMIC_RELEASE);
	{
		int rc = take(so, &c);
		CHECK(rc == 0 && c.res == -EBADMSG && (c.flags & IPK_SVC_CQE_F_RINGERR),
		      "corrupted SQ tail gets a ring-error completion (rc %d res %d flags %u)", rc,
		      c.res, c.flags);
	}
	IPK_SVC_STORE_REL(&r->sq_tail.v, tail);
	/* CQ head claiming room that does not exist: treated as full, counted */
	IPK_SVC_STORE_REL(&r->cq_head.v, cqh + 7777);
	memset(&e, 0, sizeof e);
	ipk_svc_prep_nop(&e);
	{
		struct ipk_svc_sqe *p = ipk_svc_get_sqe(so);
		*p = e;
		ipk_svc_submit(so);
	}
	usleep(50000);
	IPK_SVC_STORE_REL(&r->cq_head.v, cqh + 1); /* the RINGERR entry was seen */
	CHECK(take(so, &c) == 0 && c.res == 0, "NOP after the indices were repaired");
	ipk_svc_stats(svc, &st1);
	CHECK(st1.bad_index >= st0.bad_index + 2, "bad indices counted (%llu -> %llu)",
	      (unsigned long long)st0.bad_index, (unsigned long long)st1.bad_index);
}

/* Every bit of the ready bitmap set (sockets that do not exist, indices beyond the
 * table): the daemon looks at its own table's sockets only and goes on. */
static void h_bits(struct ipk_svc *svc)
{
	struct ipk_svc_region *h = (struct ipk_svc_region *)ipk_svc_region(svc, NULL);
	uint64_t *w = (uint64_t *)((uint8_t *)h + h->ready_off);
	uint32_t i;
	for (i = 0; i < h->ready_sum_words + h->ready_words; i++)
		__atomic_store_n(&w[i], ~0ull, __ATOMIC_RELEASE);
	__atomic_add_fetch(&h->submit_seq.v, 1, __ATOMIC_SEQ_CST);
	usleep(20000);
}

/* Reap every completion there is now (after a first bounded wait). */
static int h_reap(struct ipk_svc_sock *so)
{
	struct ipk_svc_cqe c, *p;
	int got = 0;
	if (take_t(so, &c, 1000000000) < 0)
		return 0;
	got++;
	while (ipk_svc_peek_cqe(so, &p) == 0) {
		ipk_svc_cqe_seen(so, p);
		got++;
	}
	return got;
}

/* A flood of NOPs on a small CQ the app reads late: bounded by the app's own rings
 * (the daemon stops taking entries while its completions have nowhere to go), and
 * nothing lost. */
static void h_flood(struct ipk_svc *svc)
{
	struct ipk_svc_sock *so;
	int i, got = 0, rounds = 0;
	if (ipk_svc_socket(svc, IPK_SVC_TCP, 8, 8, &so) < 0) {
		CHECK(0, "flood socket");
		return;
	}
	for (i = 0; i < 4000; i++) {
		struct ipk_svc_sqe *e = ipk_svc_get_sqe(so);
		while (!e && rounds++ < 20000) {
			ipk_svc_submit(so);
			got += h_reap(so);
			e = ipk_svc_get_sqe(so);
		}
		if (!e)
			break;
		ipk_svc_prep_nop(e);
	}
	ipk_svc_submit(so);
	while (got < 4000 && rounds++ < 20000) {
		int g = h_reap(so);
		if (!g)
			break;
		got += g;
	}
	CHECK(got == 4000, "flood: %d of 4000 NOPs completed", got);
	ipk_svc_close(so);
}

/* The fork-sharing operations (svc/d_family.c) from a process with no ipkitd
 * parent: ADOPT of any id is refused, CLAIM and GIVEBACK only touch its own
 * sockets, and the bytes given back are capped (1 MiB per connection): past the
 * cap -ENOBUFS, the daemon's memory does not grow. */
static void h_family(struct ipk_svc *svc, struct ipk_svc_sock *u, struct ipk_svc_sock *t)
{
	struct ipk_svc_sock *x;
	struct ipk_svc_sqe e;
	uint8_t *b = (uint8_t *)ipk_svc_buf_alloc(svc, 512u << 10);
	uint64_t off = b ? (uint64_t)(b - (uint8_t *)ipk_svc_region(svc, NULL)) : 0;
	CHECK(ipk_svc_adopt(svc, ipk_svc_sock_id(t), 16, 32, &x) == -EBADF, "adopt own socket");
	for (uint32_t id = 1; id < 64; id++)
		CHECK(ipk_svc_adopt(svc, id, 16, 32, &x) == -EBADF, "adopt id %u, no parent", id);
	CHECK(h_op(u, IPK_SVC_OP_CLAIM, 0, 0) == -EOPNOTSUPP, "claim on a UDP socket");
	CHECK(h_op(t, IPK_SVC_OP_CLAIM, 0, 0) == 0, "claim of a socket it holds");
	CHECK(h_op(t, IPK_SVC_OP_GIVEBACK, 0, 64) == -EFAULT, "giveback from the header");
	CHECK(b != NULL, "a 512 KiB buffer");
	if (!b)
		return;
	memset(b, 'g', 512u << 10);
	CHECK(h_op(t, IPK_SVC_OP_GIVEBACK, off, 512u << 10) == 0, "giveback 512 KiB");
	CHECK(h_op(t, IPK_SVC_OP_GIVEBACK, off, 512u << 10) == 0, "giveback 1 MiB in all");
	for (int i = 0; i < 100; i++)
		CHECK(h_op(t, IPK_SVC_OP_GIVEBACK, off, 512u << 10) == -ENOBUFS,
		      "giveback past 1 MiB, %d", i);
	ipk_svc_buf_free(svc, b, 512u << 10);
	memset(&e, 0, sizeof e);
	ipk_svc_prep_nop(&e);
	CHECK(one(t, &e, NULL) == 0, "NOP after the give-backs");
}

static int mode_hostile(struct ipk_svc *svc, uint32_t other_id)
{
	struct ipk_svc_sock *u, *t;
	struct ipk_svc_sqe e;
	if (ipk_svc_socket(svc, IPK_SVC_UDP, 16, 32, &u) < 0 ||
	    ipk_svc_socket(svc, IPK_SVC_TCP, 16, 32, &t) < 0)
		return 1;
	{
		struct ipk_svc_sock *x;
		CHECK(ipk_svc_socket(svc, 99, 16, 32, &x) == -EINVAL, "bad socket type");
		CHECK(ipk_svc_socket(svc, IPK_SVC_TCP, 12, 32, &x) == -EINVAL, "SQ not a power of 2");
		CHECK(ipk_svc_socket(svc, IPK_SVC_TCP, 1u << 30, 32, &x) == -EINVAL, "huge SQ");
		/* above the level the configuration allows it (default 1): refused */
		CHECK(ipk_svc_socket_prio(svc, IPK_SVC_TCP, 8, 16, 0, &x) == -EPERM, "level 0");
		CHECK(ipk_svc_socket_prio(svc, IPK_SVC_TCP, 8, 16, 9, &x) == -EINVAL, "level 9");
	}
	h_bad_sqes(svc, u);
	h_foreign(svc, t, other_id);
	h_indices(svc, u);
	h_bits(svc);
	h_flood(svc);
	h_family(svc, u, t);
	memset(&e, 0, sizeof e);
	ipk_svc_prep_nop(&e);
	CHECK(one(u, &e, NULL) == 0, "NOP after all of it");
	{
		struct ipk_svc_stats st;
		ipk_svc_stats(svc, &st);
		printf("hostile bad_sqe %llu bad_index %llu\n", (unsigned long long)st.bad_sqe,
		       (unsigned long long)st.bad_index);
	}
	return fails ? 1 : 0;
}
