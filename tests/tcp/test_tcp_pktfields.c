/*
 * ipk_config.pkt_fields: packet descriptor members the integrator declares (the
 * length and the chain link of sim_pkt here) are read in place, so the library
 * build makes no pkt_len / pkt_chain_next call at all during a transfer, and the
 * transfer is still correct byte for byte, with software checksums and with
 * TSO/SG/LRO chains. Undeclared members (sim_pkt has no data pointer) still go
 * through their op. With IPK_PKT_FIELD_LEN_SET the core also stores new lengths in
 * the member itself (no pkt_set_len call). Overlapping or unknown declarations, and
 * LEN_SET without LEN, are refused.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "wire/wire.h"

#define MS 1000000ull

static uint32_t (*orig_len)(void *, void *);
static void *(*orig_next)(void *, void *);
static uint8_t *(*orig_data)(void *, void *);
static void (*orig_set_len)(void *, uint32_t, void *);
static void *(*orig_alloc)(void *);
static uint64_t n_len, n_next, n_data, n_set_len, n_alloc;

static uint32_t count_len(void *p, void *o) { n_len++; return orig_len(p, o); }
static void *count_next(void *p, void *o) { n_next++; return orig_next(p, o); }
static uint8_t *count_data(void *p, void *o) { n_data++; return orig_data(p, o); }
static void count_set_len(void *p, uint32_t n, void *o) { n_set_len++; orig_set_len(p, n, o); }
static void *count_alloc(void *o) { n_alloc++; return orig_alloc(o); }

static void count_ops(struct th *t)
{
	/* the context keeps a pointer to t->ops */
	orig_len = t->ops.pkt_len;
	orig_next = t->ops.pkt_chain_next;
	orig_data = t->ops.pkt_data;
	orig_set_len = t->ops.pkt_set_len;
	orig_alloc = t->ops.pkt_alloc;
	t->ops.pkt_alloc = count_alloc;
	t->ops.pkt_len = count_len;
	t->ops.pkt_set_len = count_set_len;
	t->ops.pkt_chain_next = count_next;
	t->ops.pkt_data = count_data;
}

static void declare(struct ipk_config *c)
{
	c->pkt_fields = IPK_PKT_FIELD_LEN | IPK_PKT_FIELD_NEXT;
	c->pkt_len_off = (uint16_t)offsetof(struct sim_pkt, len);
	c->pkt_next_off = (uint16_t)offsetof(struct sim_pkt, next);
}

static void declare_offloads(struct ipk_config *c)
{
	declare(c);
	c->caps = IPK_CAP_TSO | IPK_CAP_SG | IPK_CAP_LRO;
}

/* sim's pkt_set_len also checks the buffer's capacity (bad_set_len); declaring
 * LEN_SET says the core's own bounds suffice, which the transfer's bytes and the
 * counter (transfer checks it stays 0 on both pools) then show. */
static void declare_set(struct ipk_config *c)
{
	declare(c);
	c->pkt_fields |= IPK_PKT_FIELD_LEN_SET;
}

static void declare_set_offloads(struct ipk_config *c)
{
	declare_set(c);
	c->caps = IPK_CAP_TSO | IPK_CAP_SG | IPK_CAP_LRO;
}

/* IPK_PKT_RECYCLE: sim's pool keeps no reserve and a packet it would free is as good
 * as a fresh one once its length is set. */
static void declare_recycle(struct ipk_config *c) { c->pkt_fields = IPK_PKT_RECYCLE; }

static void declare_recycle_offloads(struct ipk_config *c)
{
	declare_set_offloads(c);
	c->pkt_fields |= IPK_PKT_RECYCLE;
}

static uint8_t pattern(uint32_t i) { return (uint8_t)((i * 2654435761u) >> 13); }

/* b connects to a and writes total bytes, a echoes nothing and checks them. */
static void transfer(void (*tweak)(struct ipk_config *), uint32_t total)
{
	struct th *a, *b;
	struct ipk_conn *c = NULL;
	uint8_t *src = (uint8_t *)malloc(total);
	uint32_t sent = 0, i;
	int iter;

	for (i = 0; i < total; i++)
		src[i] = pattern(i);
	th_pair(&a, &b, tweak);
	count_ops(a);
	count_ops(b);
	n_len = n_next = n_data = n_set_len = n_alloc = 0;
	a->auto_recved = 1;
	CHECK_EQ(ipk_tcp_listen(a->ctx, ipk_htons(80), 8), IPK_OK);
	CHECK_EQ(ipk_tcp_connect(b->ctx, a->ip_be, ipk_htons(80), 0, NULL, &c, 0), IPK_OK);
	th_pump(a, b);
	CHECK_EQ(b->connected, 1);
	for (iter = 0; iter < 100000 && (sent < total || a->rxlen < total); iter++) {
		while (sent < total) {
			int rc = ipk_tcp_write(b->ctx, c, src + sent, IPK_MIN(total - sent, 3000u), b->now);

			if (rc <= 0)
				break;
			sent += (uint32_t)rc;
		}
		th_pump(a, b);
		a->now += MS;
		b->now = a->now;
		ipk_run(a->ctx, NULL, 0, a->now);
		ipk_run(b->ctx, NULL, 0, b->now);
	}
	CHECK_EQ(a->rxlen, total);
	CHECK(memcmp(a->rx, src, total) == 0);
	CHECK_EQ(a->pool->bad_set_len, 0);
	CHECK_EQ(b->pool->bad_set_len, 0);
	ipk_tcp_abort(b->ctx, c, b->now);
	th_pump(a, b);
	free(src);
	th_free(a);
	th_free(b);
}

static void test_declared_fields_make_no_op_calls(void)
{
	transfer(declare, 300000);
	CHECK_EQ(n_len, 0);
	CHECK_EQ(n_next, 0);
	CHECK(n_data > 0); /* not declared: still the op */
	CHECK(n_set_len > 0); /* LEN_SET not declared: still the op */
}

static void test_declared_len_set_makes_no_set_len_calls(void)
{
	transfer(declare_set, 300000);
	CHECK_EQ(n_set_len, 0);
	CHECK_EQ(n_len, 0);
	CHECK_EQ(n_next, 0);
}

static void test_declared_len_set_with_tso_sg_lro_chains(void)
{
	transfer(declare_set_offloads, 300000);
	CHECK_EQ(n_set_len, 0);
	CHECK_EQ(n_len, 0);
}

static void test_declared_fields_with_tso_sg_lro_chains(void)
{
	transfer(declare_offloads, 300000);
	CHECK_EQ(n_len, 0);
	CHECK_EQ(n_next, 0);
}

/* The control: without the declaration the same transfer calls both ops (so the
 * counters above can fail). */
static void test_undeclared_fields_call_the_ops(void)
{
	transfer(NULL, 300000);
	CHECK(n_len > 0);
	CHECK(n_next > 0);
}

#define ROUNDS 200u

/* a echoes (from its payload event, inside ipk_run), b sends one byte a round and
 * waits for it back; returns a's pkt_alloc calls over the rounds. */
static uint64_t echo_rounds(void (*tweak)(struct ipk_config *))
{
	struct th *a, *b;
	struct ipk_conn *c = NULL;
	uint64_t before;
	uint32_t i;

	th_pair(&a, &b, tweak);
	count_ops(a);
	a->echo = 1;
	a->auto_recved = 1;
	b->auto_recved = 1;
	CHECK_EQ(ipk_tcp_listen(a->ctx, ipk_htons(80), 8), IPK_OK);
	CHECK_EQ(ipk_tcp_connect(b->ctx, a->ip_be, ipk_htons(80), 0, NULL, &c, 0), IPK_OK);
	th_pump(a, b);
	CHECK_EQ(b->connected, 1);
	before = n_alloc;
	for (i = 0; i < ROUNDS; i++) {
		uint8_t byte = pattern(i);

		CHECK_EQ(ipk_tcp_write(b->ctx, c, &byte, 1, b->now), 1);
		th_pump(a, b);
		CHECK_EQ(b->rxlen, i + 1u);
	}
	before = n_alloc - before;
	for (i = 0; i < ROUNDS; i++)
		CHECK_EQ(b->rx[i], pattern(i));
	ipk_tcp_abort(b->ctx, c, b->now);
	th_pump(a, b);
	CHECK(th_no_leaks(a)); /* nothing kept past ipk_run */
	CHECK(th_no_leaks(b));
	th_free(a);
	th_free(b);
	return before;
}

/* An echo's write reuses the packet of the echo the request acknowledged: about one
 * pkt_alloc a round (the frame) instead of two (not every round: a request whose
 * ACK came alone leaves nothing to reuse), the bytes right, nothing leaked. */
static void test_recycle_saves_an_alloc_per_echo(void)
{
	uint64_t plain = echo_rounds(NULL), recycled = echo_rounds(declare_recycle);

	CHECK(plain >= 2u * ROUNDS);
	CHECK(recycled + ROUNDS / 2u <= plain); /* 400 -> 217 when written */
}

/* With TSO/SG/LRO a sent clone shares the write's buffer: such packets are not
 * reused (IPK_TCP_PB_CLONED), and the transfer stays right byte for byte. */
static void test_recycle_with_tso_sg_lro_chains(void)
{
	transfer(declare_recycle_offloads, 300000);
	transfer(declare_recycle, 300000);
}

static void test_overlapping_or_unknown_fields_refused(void)
{
	struct ipk_config c;
	const char *why = NULL;

	ipk_config_default(&c);
	declare(&c);
	CHECK_EQ(ipk_config_check(&c, NULL, &why), IPK_OK);
	c.pkt_next_off = (uint16_t)(c.pkt_len_off + 2u);
	CHECK_EQ(ipk_config_check(&c, NULL, &why), IPK_EINVAL);
	CHECK(strstr(why, "pkt_len_off") != NULL);
	CHECK_EQ(ipk_ctx_size(&c), 0);
	ipk_config_default(&c);
	c.pkt_fields = IPK_PKT_FIELD_DATA | IPK_PKT_FIELD_LEN;
	c.pkt_data_off = 4; /* a pointer over the length at 8 (on 64-bit) or 4 */
	c.pkt_len_off = 4;
	CHECK_EQ(ipk_config_check(&c, NULL, &why), IPK_EINVAL);
	ipk_config_default(&c);
	c.pkt_fields = 32;
	CHECK_EQ(ipk_config_check(&c, NULL, &why), IPK_EINVAL);
	CHECK(strstr(why, "pkt_fields") != NULL);
	ipk_config_default(&c); /* LEN_SET needs the member LEN declares */
	c.pkt_fields = IPK_PKT_FIELD_LEN_SET;
	CHECK_EQ(ipk_config_check(&c, NULL, &why), IPK_EINVAL);
	CHECK(strstr(why, "IPK_PKT_FIELD_LEN_SET") != NULL);
	declare_set(&c);
	CHECK_EQ(ipk_config_check(&c, NULL, &why), IPK_OK);
}

int main(void)
{
	RUN(test_declared_fields_make_no_op_calls);
	RUN(test_declared_fields_with_tso_sg_lro_chains);
	RUN(test_declared_len_set_makes_no_set_len_calls);
	RUN(test_declared_len_set_with_tso_sg_lro_chains);
	RUN(test_recycle_saves_an_alloc_per_echo);
	RUN(test_recycle_with_tso_sg_lro_chains);
	RUN(test_undeclared_fields_call_the_ops);
	RUN(test_overlapping_or_unknown_fields_refused);
	return check_summary();
}
