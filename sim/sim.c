/* The simulator's clock, generators and event loop. */
#include "sim_int.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ PRNG */

uint64_t sim_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void sim_rng_seed(struct sim_rng *r, uint64_t seed)
{
	int i;

	for (i = 0; i < 4; i++)
		r->s[i] = sim_splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t sim_rng_next(struct sim_rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

uint64_t sim_rng_below(struct sim_rng *r, uint64_t n)
{
	uint64_t lim, v;

	if (n == 0)
		return 0;
	/* reject the top partial range so every value is equally likely */
	lim = UINT64_MAX - UINT64_MAX % n;
	do
		v = sim_rng_next(r);
	while (v >= lim);
	return v % n;
}

int sim_rng_chance(struct sim_rng *r, double p)
{
	uint64_t v;

	if (p <= 0.0)
		return 0;
	if (p >= 1.0)
		return 1;
	/* 53 random bits scaled to [0,1) are exact doubles: same verdict on every host */
	v = sim_rng_next(r) >> 11;
	return (double)v * (1.0 / 9007199254740992.0) < p;
}

uint64_t sim_rand_u64(struct sim *s) { return sim_rng_next(&s->rng); }
uint32_t sim_rand_u32(struct sim *s) { return (uint32_t)(sim_rng_next(&s->rng) >> 32); }
uint64_t sim_rand_below(struct sim *s, uint64_t n) { return sim_rng_below(&s->rng, n); }
int sim_rand_chance(struct sim *s, double p) { return sim_rng_chance(&s->rng, p); }

/* ------------------------------------------------------------ heap */

int sim_grow(void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
	uint32_t ncap;
	void *p;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 16;
	while (ncap < need)
		ncap *= 2;
	p = realloc(*arr, (size_t)ncap * elem);
	if (!p)
		return -1;
	*arr = p;
	*cap = ncap;
	return 0;
}

static int ev_before(const struct sim_ev *a, const struct sim_ev *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

int sim_ev_push(struct sim *s, uint64_t t, int type, uint32_t gen, void *p,
                void (*fn)(struct sim *, void *))
{
	struct sim_ev e;
	uint32_t i;

	if (sim_grow((void **)&s->heap, &s->capheap, s->nheap + 1, sizeof(*s->heap)))
		return -1;
	e.t = t < s->now ? s->now : t;
	e.seq = s->seq++;
	e.type = type;
	e.gen = gen;
	e.p = p;
	e.fn = fn;
	for (i = s->nheap++; i > 0; i = (i - 1) / 2) {
		if (!ev_before(&e, &s->heap[(i - 1) / 2]))
			break;
		s->heap[i] = s->heap[(i - 1) / 2];
	}
	s->heap[i] = e;
	return 0;
}

static struct sim_ev ev_pop(struct sim *s)
{
	struct sim_ev top = s->heap[0], last = s->heap[--s->nheap];
	uint32_t i = 0, n = s->nheap;

	for (;;) {
		uint32_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && ev_before(&s->heap[c + 1], &s->heap[c]))
			c++;
		if (!ev_before(&s->heap[c], &last))
			break;
		s->heap[i] = s->heap[c];
		i = c;
	}
	if (n)
		s->heap[i] = last;
	return top;
}

/* ------------------------------------------------------------ sim */

struct sim *sim_create(uint64_t seed)
{
	struct sim *s = (struct sim *)calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->seed = seed;
	sim_rng_seed(&s->rng, seed);
	s->max_events = 200000000ull;
	return s;
}

void sim_destroy(struct sim *s)
{
	uint32_t i;

	if (!s)
		return;
	/* frames in flight first: they point at ports */
	for (i = 0; i < s->nheap; i++)
		if (s->heap[i].type == SIM_EV_ARRIVE)
			sim_frame_free(s->heap[i].p);
	for (i = 0; i < s->nlinks; i++)
		sim_link_destroy(s->links[i]);
	for (i = 0; i < s->nnodes; i++)
		sim_node_destroy(s->nodes[i]);
	for (i = 0; i < s->nports; i++) {
		sim_port_fini(s->ports[i]);
		free(s->ports[i]);
	}
	free(s->heap);
	free(s->nodes);
	free(s->links);
	free(s->ports);
	free(s);
}

int sim_at(struct sim *s, uint64_t t, void (*fn)(struct sim *, void *), void *arg)
{
	return sim_ev_push(s, t, SIM_EV_CALL, 0, arg, fn);
}

static void ev_dispatch(struct sim *s, const struct sim_ev *e)
{
	struct sim_node *n;

	switch (e->type) {
	case SIM_EV_ARRIVE:
		sim_link_arrive(s, e->p);
		break;
	case SIM_EV_NODE:
		n = (struct sim_node *)e->p;
		if (e->gen == n->gen)
			sim_node_run(n);
		break;
	case SIM_EV_CALL:
		e->fn(s, e->p);
		break;
	default:
		break;
	}
}

enum sim_status sim_run(struct sim *s, uint64_t t_end, int (*pred)(void *), void *arg)
{
	uint64_t budget = s->max_events;

	if (pred && pred(arg))
		return SIM_DONE;
	while (budget--) {
		struct sim_ev e;

		if (s->nheap == 0)
			return SIM_IDLE;
		if (s->heap[0].t > t_end) {
			s->now = t_end;
			return SIM_TIME;
		}
		e = ev_pop(s);
		s->now = e.t;
		s->events++;
		ev_dispatch(s, &e);
		if (pred && pred(arg))
			return SIM_DONE;
	}
	return SIM_LIMIT;
}

const char *sim_status_name(enum sim_status st)
{
	switch (st) {
	case SIM_DONE: return "done";
	case SIM_TIME: return "time limit";
	case SIM_IDLE: return "idle";
	case SIM_LIMIT: return "event limit";
	}
	return "?";
}
