/*
 * svc_tool's chaos mode (included by svc_tool.c): a randomized hostile application
 * (docs/fuzzing.md, "ipkitd's submission path"). It opens a few sockets it then
 * drives by hand, writing what any process mapping its region can write: random
 * SQEs (any opcode, flags, offsets, lengths, ids, addresses) published with sane or
 * corrupt SQ tails, corrupt CQ heads, random ready-bitmap words and summary bits,
 * scribbles over SQE slots and over its rings' daemon-written header line. Between
 * two such rounds a NOP on a socket it leaves alone must complete with 0 (the
 * daemon serves it still, within the tool's 30 s wait), and at the end, its rings
 * repaired and the hand-driven sockets closed, a new socket's NOP must too. The
 * caller checks that the daemon stayed up and that another application's transfer
 * finished with equal SHA-256 digests. Bounded by ROUNDS, reproducible by SEED.
 *
 *   svc_tool [--socket PATH] chaos SEED ROUNDS PEER_IP
 */

#define CH_SOCKS 6

struct ch_sock {
	struct ipk_svc_sock *so;
	struct ipk_svc_ring *r;       /* its ring header in the region */
	struct ipk_svc_sqe *sqes;     /* as the daemon placed them (saved at start) */
	uint32_t sq_entries;
	uint32_t idx;                 /* its index in the ready bitmap (saved at start) */
	uint32_t tail;                /* what this tool published last */
};

static uint64_t ch_rng;

static uint64_t ch_next(void)
{
	/* xorshift64*: reproducible from SEED */
	ch_rng ^= ch_rng >> 12;
	ch_rng ^= ch_rng << 25;
	ch_rng ^= ch_rng >> 27;
	return ch_rng * 2685821657736338717ull;
}

static uint32_t ch_u32(void) { return (uint32_t)(ch_next() >> 32); }

/* A random SQE, biased to the operations a socket ring takes and to offsets and
 * lengths near the buffer area's edges. */
static void ch_sqe(struct ipk_svc_sqe *e, uint64_t size, uint64_t buf_off, uint32_t peer_be)
{
	uint32_t k = ch_u32();
	memset(e, 0, sizeof *e);
	e->opcode = (uint8_t)(k % 4 == 0 ? ch_u32() : ch_u32() % IPK_SVC_OP__COUNT);
	e->flags = (uint8_t)(ch_u32() % 4 == 0 ? ch_u32() : 0);
	e->prio = (uint16_t)ch_u32();
	e->arg = ch_u32() % 2 ? ch_u32() % 64 : ch_u32();
	e->user_data = ch_next();
	switch (ch_u32() % 6) {
	case 0: e->buf_off = buf_off + ch_u32() % 65536; break;
	case 1: e->buf_off = ch_next(); break;
	case 2: e->buf_off = ch_u32() % 4096; break; /* the header */
	case 3: e->buf_off = size - ch_u32() % 64; break;
	case 4: e->buf_off = UINT64_MAX - ch_u32() % 16; break;
	default: e->buf_off = buf_off; break;
	}
	switch (ch_u32() % 4) {
	case 0: e->len = ch_u32() % 2048; break;
	case 1: e->len = ch_u32(); break;
	case 2: e->len = 0xffffffffu; break;
	default: e->len = 0; break;
	}
	e->arg2 = ch_u32() % 2 ? 1u << (ch_u32() % 12) : ch_u32();
	e->addr.family = (uint16_t)(ch_u32() % 4);
	e->addr.port_be = ch_u32() % 2 ? htons(7) : (uint16_t)ch_u32();
	if (ch_u32() % 2)
		memcpy(e->addr.addr, &peer_be, 4);
	else
		for (k = 0; k < 16; k++)
			e->addr.addr[k] = (uint8_t)ch_u32();
}

static void ch_bump(struct ipk_svc_region *h)
{
	__atomic_add_fetch(&h->submit_seq.v, 1, __ATOMIC_RELEASE);
}

/* Announce socket index idx in the ready bitmap (as the library does). */
static void ch_ready(struct ipk_svc_region *h, uint32_t idx)
{
	uint64_t *sum = (uint64_t *)((uint8_t *)h + h->ready_off);
	__atomic_fetch_or(&sum[h->ready_sum_words + idx / 64], 1ull << (idx % 64), __ATOMIC_SEQ_CST);
	__atomic_fetch_or(&sum[idx / 64 / 64], 1ull << (idx / 64 % 64), __ATOMIC_SEQ_CST);
}

/* Publish up to n random SQEs on s with a sane tail. */
static void ch_publish(struct ipk_svc_region *h, struct ch_sock *s, uint32_t n, uint64_t size,
                       uint64_t buf_off, uint32_t peer_be)
{
	uint32_t head = IPK_SVC_LOAD_ACQ(&s->r->sq_head.v), i;
	if (s->tail - head > s->sq_entries) /* after a corrupt tail: start from the head */
		s->tail = head;
	for (i = 0; i < n && s->tail - head < s->sq_entries; i++, s->tail++)
		ch_sqe(&s->sqes[s->tail & (s->sq_entries - 1)], size, buf_off, peer_be);
	IPK_SVC_STORE_REL(&s->r->sq_tail.v, s->tail);
	ch_ready(h, s->idx);
}

/* The daemon served this app (a NOP on the untouched socket). */
static void ch_nop(struct ipk_svc_sock *clean, uint32_t *nops)
{
	struct ipk_svc_sqe e;
	int rc;
	memset(&e, 0, sizeof e);
	ipk_svc_prep_nop(&e);
	rc = one(clean, &e, NULL);
	CHECK(rc == 0, "NOP on the untouched socket between rounds: %d", rc);
	if (rc != 0 && getenv("SVC_CHAOS_TRACE"))
		fprintf(stderr, "NOP failed\n");
	*nops += rc == 0;
}

static int mode_chaos(struct ipk_svc *svc, uint64_t seed, uint32_t rounds, uint32_t peer_be)
{
	struct ipk_svc_region *h = (struct ipk_svc_region *)ipk_svc_region(svc, NULL);
	struct ch_sock cs[CH_SOCKS];
	struct ipk_svc_sock *clean, *x;
	struct ipk_svc_stats st;
	uint64_t size, buf_off;
	uint8_t *buf;
	uint32_t i, round, nops = 0, acts[8] = {0};
	struct ipk_svc_sqe e;

	ipk_svc_region(svc, &size);
	ch_rng = seed ? seed : 1;
	buf = (uint8_t *)ipk_svc_buf_alloc(svc, 65536);
	if (!buf || ipk_svc_socket(svc, IPK_SVC_TCP, 16, 32, &clean) < 0)
		return 1;
	buf_off = (uint64_t)(buf - (uint8_t *)h);
	memset(buf, 'c', 65536);
	for (i = 0; i < CH_SOCKS; i++) {
		if (ipk_svc_socket(svc, i % 2 ? IPK_SVC_UDP : IPK_SVC_TCP, 8, 16, &cs[i].so) < 0)
			return 1;
		cs[i].r = (struct ipk_svc_ring *)((uint8_t *)h + ipk_svc_sock_ring_off(cs[i].so));
		cs[i].sqes = (struct ipk_svc_sqe *)((uint8_t *)cs[i].r + cs[i].r->sqes_off);
		cs[i].sq_entries = cs[i].r->sq_entries;
		cs[i].idx = cs[i].r->sock & 0xffffffu;
		cs[i].tail = cs[i].r->sq_tail.v;
	}
	for (round = 0; round < rounds; round++) {
		struct ch_sock *s = &cs[ch_u32() % CH_SOCKS];
		uint32_t a = ch_u32() % 8, k;
		uint64_t *words = (uint64_t *)((uint8_t *)h + h->ready_off);
		acts[a]++;
		if (getenv("SVC_CHAOS_TRACE"))
			fprintf(stderr, "round %u sock %u action %u\n", round, (unsigned)(s - cs), a);
		switch (a) {
		case 0: case 1: case 2: /* random SQEs, sane tail */
			ch_publish(h, s, 1 + ch_u32() % s->sq_entries, size, buf_off, peer_be);
			break;
		case 3: /* a corrupt SQ tail; repaired after the daemon had a pass */
			IPK_SVC_STORE_REL(&s->r->sq_tail.v, ch_u32());
			ch_ready(h, s->idx);
			ch_bump(h);
			ch_nop(clean, &nops);
			s->tail = IPK_SVC_LOAD_ACQ(&s->r->sq_head.v);
			IPK_SVC_STORE_REL(&s->r->sq_tail.v, s->tail);
			break;
		case 4: /* a corrupt CQ head; then every completion taken */
			IPK_SVC_STORE_REL(&s->r->cq_head.v, ch_u32());
			ch_publish(h, s, 1, size, buf_off, peer_be);
			ch_bump(h);
			ch_nop(clean, &nops);
			IPK_SVC_STORE_REL(&s->r->cq_head.v, IPK_SVC_LOAD_ACQ(&s->r->cq_tail.v));
			break;
		case 5: /* random ready-bitmap bits (any index) and summary bits. A bitmap
		         * word's bits go with its summary bit: a word left with bits and no
		         * summary bit is never looked at, and as the library sets the
		         * summary only when the word was empty, the app's sockets in it
		         * starve: the app's own harm (proto.h), not the daemon's */
			for (k = 0; k < 4; k++) {
				uint32_t w = ch_u32() % (h->ready_sum_words + h->ready_words);
				__atomic_fetch_or(&words[w], ch_next(), __ATOMIC_SEQ_CST);
				if (w >= h->ready_sum_words) {
					w -= h->ready_sum_words;
					__atomic_fetch_or(&words[w / 64], 1ull << (w % 64), __ATOMIC_SEQ_CST);
				}
			}
			break;
		case 6: /* scribbles: an unpublished SQE slot, the daemon's header line */
			for (k = 0; k < sizeof(struct ipk_svc_sqe); k++)
				((uint8_t *)&s->sqes[ch_u32() & (s->sq_entries - 1)])[k] = (uint8_t)ch_u32();
			((uint32_t *)s->r)[ch_u32() % 6] = ch_u32();
			break;
		default: /* the app reads late: take every completion now */
			IPK_SVC_STORE_REL(&s->r->cq_head.v, IPK_SVC_LOAD_ACQ(&s->r->cq_tail.v));
			break;
		}
		ch_bump(h);
		ch_nop(clean, &nops);
	}
	/* repaired and closed; the daemon still answers this app */
	for (i = 0; i < CH_SOCKS; i++) {
		IPK_SVC_STORE_REL(&cs[i].r->sq_tail.v, IPK_SVC_LOAD_ACQ(&cs[i].r->sq_head.v));
		IPK_SVC_STORE_REL(&cs[i].r->cq_head.v, IPK_SVC_LOAD_ACQ(&cs[i].r->cq_tail.v));
		CHECK(ipk_svc_close(cs[i].so) == 0, "close hand-driven socket %u", i);
	}
	CHECK(ipk_svc_close(clean) == 0, "close the untouched socket");
	CHECK(ipk_svc_socket(svc, IPK_SVC_TCP, 8, 16, &x) == 0, "a socket after the chaos");
	if (!fails) {
		memset(&e, 0, sizeof e);
		ipk_svc_prep_nop(&e);
		CHECK(one(x, &e, NULL) == 0, "NOP on a new socket after the chaos");
		ipk_svc_close(x);
	}
	ipk_svc_stats(svc, &st);
	printf("chaos seed %llu rounds %u nops %u actions %u/%u/%u/%u/%u/%u bad_sqe %llu bad_index %llu\n",
	       (unsigned long long)seed, rounds, nops, acts[0] + acts[1] + acts[2], acts[3], acts[4],
	       acts[5], acts[6], acts[7], (unsigned long long)st.bad_sqe,
	       (unsigned long long)st.bad_index);
	return fails ? 1 : 0;
}
