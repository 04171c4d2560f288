/*
 * memlink ring protocol on its own (no processes, no pool): wrap-around of the
 * free-running indices, full and empty rings, and a corrupted peer whose indices or
 * descriptors point outside the ring being rejected and counted.
 */
#include "check.h"
#include "ml_ring.h"

#include <stdlib.h>
#include <string.h>

#define NS 8u
#define SS 128u

struct mem {
	struct ml_ring_ctl ctl;
	struct ml_desc descs[NS];
	uint8_t slots[NS * SS];
};

static struct mem *mem_new(struct ml_ring *prod, struct ml_ring *cons, uint32_t start)
{
	struct mem *m = (struct mem *)calloc(1, sizeof *m);
	ml_ring_init(prod, &m->ctl, m->descs, m->slots, NS, SS);
	ml_ring_init(cons, &m->ctl, m->descs, m->slots, NS, SS);
	m->ctl.prod = m->ctl.cons = start;
	prod->local = cons->local = start;
	return m;
}

static void put_u32(struct ml_ring *r, uint32_t v)
{
	uint8_t *s = ml_ring_prod_slot(r);
	memcpy(s, &v, 4);
	ml_ring_prod_commit(r, 4 + (v % 60));
}

static void test_ring_wraps_around_index_limit(void)
{
	struct ml_ring p, c;
	struct mem *m = mem_new(&p, &c, 0xfffffff0u);
	uint32_t next_put = 0, next_get = 0, round;

	for (round = 0; round < 200; round++) {
		uint32_t k = 1 + round % NS, i, sp = ml_ring_prod_space(&p), av;
		for (i = 0; i < k && i < sp; i++)
			put_u32(&p, next_put++);
		ml_ring_prod_publish(&p);
		av = ml_ring_cons_avail(&c);
		CHECK_EQ(av, next_put - next_get);
		for (i = 0; i < av; i++) {
			const uint8_t *d;
			long len = ml_ring_cons_peek(&c, &d);
			uint32_t v = 0;
			CHECK_EQ(len, 4 + (next_get % 60));
			if (len >= 4)
				memcpy(&v, d, 4);
			CHECK_EQ(v, next_get);
			next_get++;
			ml_ring_cons_next(&c);
		}
		ml_ring_cons_release(&c);
	}
	CHECK(c.local < 0xfffffff0u); /* the indices really wrapped */
	CHECK_EQ(p.bad_index + c.bad_index + c.bad_desc, 0);
	free(m);
}

static void test_ring_full_then_empty(void)
{
	struct ml_ring p, c;
	struct mem *m = mem_new(&p, &c, 5);
	uint32_t i;

	CHECK_EQ(ml_ring_prod_space(&p), NS);
	CHECK_EQ(ml_ring_cons_avail(&c), 0);
	for (i = 0; i < NS; i++)
		put_u32(&p, i);
	CHECK_EQ(ml_ring_cons_avail(&c), 0); /* not published yet */
	ml_ring_prod_publish(&p);
	CHECK_EQ(ml_ring_prod_space(&p), 0);
	CHECK_EQ(ml_ring_cons_avail(&c), NS);
	ml_ring_cons_next(&c);
	ml_ring_cons_next(&c);
	CHECK_EQ(ml_ring_prod_space(&p), 0); /* consumed but not released */
	ml_ring_cons_release(&c);
	CHECK_EQ(ml_ring_prod_space(&p), 2);
	for (i = 2; i < NS; i++)
		ml_ring_cons_next(&c);
	ml_ring_cons_release(&c);
	CHECK_EQ(ml_ring_cons_avail(&c), 0);
	CHECK_EQ(ml_ring_prod_space(&p), NS);
	free(m);
}

static void test_ring_corrupt_prod_rejected_and_counted(void)
{
	struct ml_ring p, c;
	struct mem *m = mem_new(&p, &c, 100);

	m->ctl.prod = 100 + NS + 1;          /* more than the ring can hold */
	CHECK_EQ(ml_ring_cons_avail(&c), 0);
	CHECK_EQ(c.bad_index, 1);
	m->ctl.prod = 99;                    /* behind the consumer */
	CHECK_EQ(ml_ring_cons_avail(&c), 0);
	CHECK_EQ(c.bad_index, 2);
	m->ctl.prod = 100 + NS;              /* exactly full is legal */
	CHECK_EQ(ml_ring_cons_avail(&c), NS);
	CHECK_EQ(c.bad_index, 2);
	free(m);
}

static void test_ring_corrupt_cons_rejected_and_counted(void)
{
	struct ml_ring p, c;
	struct mem *m = mem_new(&p, &c, 7);

	put_u32(&p, 1);
	ml_ring_prod_publish(&p);
	m->ctl.cons = 9;                     /* consumer ahead of what was produced */
	CHECK_EQ(ml_ring_prod_space(&p), 0);
	CHECK_EQ(p.bad_index, 1);
	m->ctl.cons = 8;
	CHECK_EQ(ml_ring_prod_space(&p), NS);
	free(m);
}

static void test_ring_bad_descriptor_rejected_and_counted(void)
{
	struct ml_ring p, c;
	struct mem *m = mem_new(&p, &c, 0);
	const uint8_t *d = NULL;
	static const uint32_t bad[][2] = {
		{ 0, 0 },                 /* empty frame */
		{ 0, SS + 1 },            /* longer than a slot */
		{ NS * SS - 10, 11 },     /* runs past the slot area */
		{ 0xffffffffu, 2 },       /* offset wraps in 32 bits */
		{ 64, 0xffffffffu },      /* length wraps */
	};
	uint32_t i, n = (uint32_t)(sizeof bad / sizeof bad[0]);

	for (i = 0; i < n; i++)
		put_u32(&p, i);
	ml_ring_prod_publish(&p);
	for (i = 0; i < n; i++) {
		m->descs[i].off = bad[i][0];
		m->descs[i].len = bad[i][1];
	}
	CHECK_EQ(ml_ring_cons_avail(&c), n);
	for (i = 0; i < n; i++) {
		CHECK_EQ(ml_ring_cons_peek(&c, &d), -1);
		ml_ring_cons_next(&c);
	}
	CHECK_EQ(c.bad_desc, n);
	/* the last legal byte is fine */
	put_u32(&p, 0);
	ml_ring_prod_publish(&p);
	m->descs[n].off = NS * SS - 10;
	m->descs[n].len = 10;
	CHECK_EQ(ml_ring_cons_avail(&c), 1);
	CHECK_EQ(ml_ring_cons_peek(&c, &d), 10);
	CHECK(d == m->slots + NS * SS - 10);
	free(m);
}

static void test_ring_arm_and_wakeup_handshake(void)
{
	struct ml_ring p, c;
	struct mem *m = mem_new(&p, &c, 0);

	CHECK_EQ(ml_ring_cons_arm(&c), 0);   /* empty: may sleep */
	put_u32(&p, 1);
	CHECK_EQ(ml_ring_prod_publish(&p), 1); /* consumer asked: wake it */
	CHECK_EQ(ml_ring_prod_publish(&p), 0); /* only once per sleep */
	CHECK_EQ(ml_ring_cons_arm(&c), 1);   /* frames waiting: do not sleep */
	ml_ring_cons_disarm(&c);
	put_u32(&p, 2);
	CHECK_EQ(ml_ring_prod_publish(&p), 0); /* nobody sleeping: no system call */
	free(m);
}

static void test_layout_is_aligned_and_disjoint(void)
{
	uint32_t ss = ml_slot_size(1500), n = 1024;

	CHECK_EQ(ss % 64, 0);
	CHECK(ss >= 1518);
	CHECK_EQ(ml_ring_ctl_off(0, n) % 64, 0);
	CHECK_EQ(ml_ring_ctl_off(1, n) % 64, 0);
	CHECK(ml_ring_desc_off(0, n) + n * sizeof(struct ml_desc) <= ml_ring_ctl_off(1, n));
	CHECK(ml_ring_desc_off(1, n) + n * sizeof(struct ml_desc) <= ml_slots_off(0, n, ss));
	CHECK_EQ(ml_slots_off(0, n, ss) % 4096, 0);
	CHECK_EQ(ml_slots_off(1, n, ss) - ml_slots_off(0, n, ss), (size_t)n * ss);
	CHECK_EQ(sizeof(struct ml_hdr), ML_HDR_SIZE);
	CHECK_EQ(sizeof(struct ml_ring_ctl), 3 * ML_CACHELINE);
	CHECK_EQ(ml_slot_size(9000) % 64, 0);
}

int main(void)
{
	RUN(test_ring_wraps_around_index_limit);
	RUN(test_ring_full_then_empty);
	RUN(test_ring_corrupt_prod_rejected_and_counted);
	RUN(test_ring_corrupt_cons_rejected_and_counted);
	RUN(test_ring_bad_descriptor_rejected_and_counted);
	RUN(test_ring_arm_and_wakeup_handshake);
	RUN(test_layout_is_aligned_and_disjoint);
	return check_summary();
}
