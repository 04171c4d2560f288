/*
 * lwip-inmem: the in-memory harness with two lwIP 2.1.3 instances (raw API, NO_SYS)
 * in place of the two ipkit engines: same workloads, same checks, same command line
 * and output (bench/inmem/im_common.h). Built only by `make bench-peers`
 * (bench/peers/lwip/build.sh), from Debian's lwip source package.
 *
 * The wire hands each frame to the other instance with one copy (into one of its
 * PBUF_POOL buffers, as a NIC's receive DMA would; --wire copy, the default), or by
 * reference (--wire handoff: a PBUF_REF pbuf over the sender's frame, lw_inst.c). Per idle connection lwIP keeps one struct tcp_pcb (the
 * pcb lists are linked lists: no per-connection table).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "im_common.h"
#include "lw_inst.h"

#define LW_RXQ 32768u
#define LW_PORT 5001

struct lw_side {
	const struct lwi_api *api;
	void **rxq, **batch;
	uint32_t rxn;
	int ready;
};

static struct lw_side side[2];
static struct lwi_shared sh;
static struct im_opts opts;
static uint64_t vnow = 1000000000ull, wall_end;

static void lw_fail(const char *why)
{
	if (!sh.error)
		sh.error = why;
}

/* Frames sent before the other instance exists (the gratuitous ARP of netif_set_up)
 * find no receiver. */
static void *lw_peer_alloc(int from, uint32_t len, uint8_t **payload)
{
	if (!side[1 - from].ready)
		return NULL;
	return side[1 - from].api->rx_alloc(len, payload);
}

static void *lw_peer_wrap(int from, void *orig, uint8_t *bytes, uint32_t len)
{
	if (!side[1 - from].ready)
		return NULL;
	return side[1 - from].api->rx_wrap(orig, side[from].api, bytes, len);
}

static void lw_peer_queue(int from, void *frame)
{
	struct lw_side *p = &side[1 - from];

	if (p->rxn == LW_RXQ) {
		lw_fail("wire queue overflow"); /* the frame leaks: the run is over anyway */
		return;
	}
	p->rxq[p->rxn++] = frame;
}

static uint64_t lw_now(void) { return opts.real_clock ? im_wall_ns() : vnow; }

static uint32_t lw_step(struct lw_side *s, uint64_t now)
{
	uint32_t got = s->rxn, i;
	void **b = s->rxq;

	s->rxq = s->batch;
	s->batch = b;
	s->rxn = 0;
	s->api->poll(now);
	for (i = 0; i < got; i++)
		s->api->input(b[i]);
	return got;
}

/* Both instances until done(); idle rounds move the virtual clock to lwIP's next
 * timer (its TCP timers tick every 250 ms while connections exist). */
static void lw_loop(int (*done)(void))
{
	uint32_t rounds = 0;

	while (!sh.error && !done()) {
		uint64_t now = lw_now();
		uint32_t moved = lw_step(&side[0], now) + lw_step(&side[1], now);

		vnow += 1000;
		if ((++rounds & 1023) == 0 && im_wall_ns() > wall_end) {
			lw_fail("time bound exceeded");
			return;
		}
		if (!moved && !side[0].rxn && !side[1].rxn && !opts.real_clock)
			vnow += 10000000; /* idle: 10 ms towards the next lwIP timer */
	}
}

static int lw_connected(void)
{
	return sh.connected == opts.conns && sh.accepted == opts.conns;
}

static int lw_done(void)
{
	return opts.bulk ? sh.rx_bytes >= opts.bytes : sh.done >= opts.requests;
}

static int lw_quiet(void)
{
	return !side[0].rxn && !side[1].rxn && side[0].api->quiet() && side[1].api->quiet();
}

int main(int argc, char **argv)
{
	struct im_result r;
	uint64_t t0;
	int i;

	im_parse(argc, argv, &opts, "lwip");
	memset(&r, 0, sizeof(r));
	r.stack = "lwip";
	r.build = lwi_a_api.stats ? "raw-nosys-stats" : "raw-nosys";
	if (opts.corrupt_at && !lwi_a_api.stats) {
		fprintf(stderr, "lwip-inmem: --corrupt needs the counters: use lwip-inmem-stats\n");
		return 2;
	}
	sh.o = &opts;
	sh.pat = im_pattern();
	sh.peer_alloc = lw_peer_alloc;
	sh.peer_queue = lw_peer_queue;
	sh.peer_wrap = lw_peer_wrap;
	wall_end = im_wall_ns() + (uint64_t)(opts.max_seconds * 1e9);
	side[0].api = &lwi_a_api;
	side[1].api = &lwi_b_api;
	for (i = 0; i < 2; i++) {
		side[i].rxq = (void **)calloc(LW_RXQ, sizeof(void *));
		side[i].batch = (void **)calloc(LW_RXQ, sizeof(void *));
		if (!side[i].rxq || !side[i].batch || side[i].api->init(&sh, i, opts.offload) != 0) {
			fprintf(stderr, "lwip-inmem: init failed\n");
			return 1;
		}
		side[i].ready = 1;
	}
	if (side[1].api->listen(LW_PORT) != 0 || side[0].api->connect(opts.conns, LW_PORT) != 0)
		lw_fail("listen/connect failed");
	lw_loop(lw_connected);
	t0 = im_wall_ns();
	if (!sh.error)
		side[0].api->start();
	lw_loop(lw_done);
	r.seconds = (double)(im_wall_ns() - t0) / 1e9;
	r.requests = sh.done;
	r.bytes = opts.bulk ? sh.rx_bytes : 2 * sh.rx_bytes;
	if (!sh.error)
		lw_loop(lw_quiet);
	r.conn_bytes = side[0].api->pcb_size;
	for (i = 0; i < 2; i++) {
		r.csum_drops += side[i].api->csum_drops();
		r.retransmits += side[i].api->retransmits();
	}
	r.corrupted = sh.corrupted;
	for (i = 0; i < 2; i++) {
		r.frames[i] = sh.frames[i];
		r.wire_bytes[i] = sh.wire_bytes[i];
	}
	if (!sh.error && sh.closed)
		lw_fail("a connection closed during the run");
	if (!sh.error && opts.corrupt_at && (!r.corrupted || r.csum_drops != r.corrupted))
		lw_fail("corrupted frame not dropped as a checksum error");
	r.error = sh.error;
	return im_report(&opts, &r);
}
