/*
 * runtime/spsc.h: the ring the multi-core runtime passes packets and messages over.
 * Two threads move a numbered sequence through a small ring (so it wraps and fills
 * thousands of times, and the 32-bit indices are started near their wrap point); the
 * consumer checks order and content. Single-thread checks cover full/empty edges.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "spsc.h"

#define N_MSGS 500000u
#define DEADLINE_S 60

struct msg {
	uint32_t seq;
	uint32_t inv;
	uint64_t pad;
};

static struct spsc ring;
static unsigned long progress; /* commits + releases, both threads (relaxed atomics) */

/* Waiting side: let the other thread run (the machine may have fewer free cores than
 * threads); 0 once the other side has made no progress for DEADLINE_S seconds. The
 * bound is on a stall, not on the whole run: under qemu-user on a loaded machine
 * the 500,000 messages take longer than a minute, and that is no failure. */
static int wait_turn(unsigned long *seen, time_t *since)
{
	unsigned long now = __atomic_load_n(&progress, __ATOMIC_RELAXED);

	sched_yield();
	if (now != *seen || *since == 0) {
		*seen = now;
		*since = time(NULL);
		return 1;
	}
	return time(NULL) - *since < DEADLINE_S;
}

static void made_progress(void)
{
	__atomic_add_fetch(&progress, 1, __ATOMIC_RELAXED);
}

static void *producer(void *arg)
{
	uint32_t i = 0;
	unsigned long seen = 0;
	time_t since = 0;

	(void)arg;
	while (i < N_MSGS) {
		struct msg *m = (struct msg *)spsc_prod_slot(&ring);
		if (!m) {
			spsc_prod_commit(&ring);
			made_progress();
			if (!wait_turn(&seen, &since))
				break;
			continue;
		}
		m->seq = i;
		m->inv = ~i;
		i++;
		if ((i & 7) == 0) {
			spsc_prod_commit(&ring); /* batches of 8, as the runtime does */
			made_progress();
		}
	}
	spsc_prod_commit(&ring);
	return NULL;
}

static void test_spsc_two_threads_keep_order_and_content(void)
{
	pthread_t t;
	uint32_t next = 0, bad = 0;
	unsigned long seen = 0;
	time_t since = 0;

	CHECK_EQ(spsc_init(&ring, 64, sizeof(struct msg)), 0);
	/* start the free-running indices just below the 32-bit wrap */
	ring.head = ring.tail = ring.c_tail = ring.p_head = ring.p_pos = 0xffffff00u;
	CHECK_EQ(pthread_create(&t, NULL, producer, NULL), 0);
	while (next < N_MSGS) {
		uint32_t n = spsc_cons_avail(&ring), i;

		if (n == 0) {
			if (!wait_turn(&seen, &since))
				break;
			continue;
		}
		for (i = 0; i < n; i++) {
			const struct msg *m = (const struct msg *)spsc_cons_slot(&ring, i);
			if (m->seq != next || m->inv != ~next)
				bad++;
			next++;
		}
		spsc_cons_release(&ring, n);
		made_progress();
	}
	pthread_join(t, NULL);
	CHECK_EQ(next, N_MSGS);
	CHECK_EQ(bad, 0);
	spsc_fini(&ring);
}

static void test_spsc_full_and_empty_edges(void)
{
	struct spsc r;
	void *p = &r;
	uint32_t i;

	CHECK_EQ(spsc_init(&r, 3, 8), -1); /* not a power of two */
	CHECK_EQ(spsc_init(&r, 4, 0), -1);
	CHECK_EQ(spsc_init(&r, 4, sizeof(void *)), 0);
	CHECK(spsc_empty(&r));
	CHECK_EQ(spsc_prod_room(&r), 4);
	for (i = 0; i < 4; i++)
		CHECK_EQ(spsc_push_ptr(&r, p), 0);
	CHECK_EQ(spsc_push_ptr(&r, p), -1); /* full */
	CHECK_EQ(spsc_cons_avail(&r), 0);   /* nothing committed yet */
	spsc_prod_commit(&r);
	CHECK_EQ(spsc_cons_avail(&r), 4);
	CHECK(*(void **)spsc_cons_slot(&r, 3) == p);
	spsc_cons_release(&r, 1);
	CHECK_EQ(spsc_prod_room(&r), 1);
	CHECK_EQ(spsc_push_ptr(&r, p), 0);
	spsc_prod_commit(&r);
	/* the consumer reloads the producer's index only when it knows of no slot */
	CHECK_EQ(spsc_cons_avail(&r), 3);
	spsc_cons_release(&r, 3);
	CHECK_EQ(spsc_cons_avail(&r), 1);
	spsc_cons_release(&r, 1);
	CHECK(spsc_empty(&r));
	spsc_fini(&r);
}

int main(void)
{
	RUN(test_spsc_full_and_empty_edges);
	RUN(test_spsc_two_threads_keep_order_and_content);
	return check_summary();
}
