/* Two nodes on one link, the setup most simulation tests share. */
#ifndef IPKIT_TEST_SIM_WORLD_H
#define IPKIT_TEST_SIM_WORLD_H

#include <string.h>

#include "../common/check.h"
#include "apps.h"
#include "sim.h"

struct world {
	struct sim *s;
	struct sim_node *a, *b; /* 10.0.0.1, 10.0.0.2 */
	struct sim_link *l;
	struct ipk_config ca, cb;
};

/* A test may set this to change the nodes' config before they are created. */
static void (*world_cfg_tweak)(struct ipk_config *c, uint32_t index);

/* cfg tweaks every test wants: short TIME_WAIT keeps virtual runs short. */
static inline void world_cfg(struct ipk_config *c, uint32_t index, uint32_t caps)
{
	sim_node_config(c, index);
	c->caps = caps;
	c->tcp_time_wait_ns = SIM_SEC(2);
	if (world_cfg_tweak)
		world_cfg_tweak(c, index);
}

static inline int world_init_res(struct world *w, uint64_t seed, const struct sim_link_cfg *lc,
                                 uint32_t caps_a, uint32_t caps_b,
                                 const struct sim_node_res *ra, const struct sim_node_res *rb)
{
	struct sim_link_cfg def;

	memset(w, 0, sizeof(*w));
	if (!lc) {
		sim_link_cfg_default(&def);
		lc = &def;
	}
	w->s = sim_create(seed);
	world_cfg(&w->ca, 1, caps_a);
	world_cfg(&w->cb, 2, caps_b);
	w->a = sim_node_create(w->s, &w->ca, ra);
	w->b = sim_node_create(w->s, &w->cb, rb);
	if (!w->a || !w->b)
		return -1;
	w->l = sim_connect(w->s, w->a, w->b, lc);
	return w->l ? 0 : -1;
}

static inline int world_init(struct world *w, uint64_t seed, const struct sim_link_cfg *lc,
                             uint32_t caps)
{
	return world_init_res(w, seed, lc, caps, caps, NULL, NULL);
}

static inline int node_idle(const struct sim_node *n)
{
	return ipk_conns_free(n->ctx) == n->res.conns && ipk_pbs_free(n->ctx) == n->res.pbs &&
	       n->pool->descs_out == 0 && n->pool->bufs_out == 0;
}

static int world_idle_pred(void *arg)
{
	struct world *w = (struct world *)arg;
	return node_idle(w->a) && node_idle(w->b);
}

/* Let TIME_WAIT and every timer run out, then prove nothing leaked. */
static inline void world_check_no_leak(struct world *w)
{
	sim_run(w->s, w->s->now + SIM_SEC(120), world_idle_pred, w);
	CHECK_EQ(ipk_conns_free(w->a->ctx), w->a->res.conns);
	CHECK_EQ(ipk_conns_free(w->b->ctx), w->b->res.conns);
	CHECK_EQ(ipk_pbs_free(w->a->ctx), w->a->res.pbs);
	CHECK_EQ(ipk_pbs_free(w->b->ctx), w->b->res.pbs);
	CHECK_EQ(w->a->pool->descs_out, 0);
	CHECK_EQ(w->a->pool->bufs_out, 0);
	CHECK_EQ(w->b->pool->descs_out, 0);
	CHECK_EQ(w->b->pool->bufs_out, 0);
}

static inline void world_fini(struct world *w)
{
	sim_destroy(w->s);
}

#endif
