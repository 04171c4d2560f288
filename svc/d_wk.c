/*
 * ipkitd --workers N (svc/README.md, "Workers"): the runtime's worker threads run
 * d_wk_run, one node each, each under its own lock (W[i]; the lock split below).
 * With one worker none of this runs except the no-op lock calls: the main thread
 * is the worker (ipkitd.c d_loop).
 */
#include "daemon.h"

#include <errno.h>
#include <stdlib.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

static void d_wk_run(struct ipk_workers *ws, unsigned idx, void *arg);

/* The locks (--workers > 1, svc/README.md "Workers: the lock split"):
 *  - W[i] (d->wk[i].mu): worker i holds it for its pass and its node's poll and
 *    lets it go to sleep; nobody else takes it but the control thread and, for a
 *    rare control operation that touches other workers' sockets, worker 0
 *    (d_world_stop). So in the common case it is uncontended and the workers'
 *    passes run in parallel.
 *  - the control thread (set-up, death, shutdown) takes every W in index order
 *    (d_lock): it may touch any state, as the big lock let it.
 *  - the port lock (d->pmu, d_plock): the port tables and what the circles read
 *    of their members; taken inside a W.
 *  - an application's lock (a->amu, d_alock): its socket table, ring allocator
 *    and zero-copy records; taken inside a W (and inside the port lock).
 * Lock order: W[0] < W[1] < ... < port lock < application lock. A worker never
 * takes a lower-numbered W than its own, so no cycle.
 * IPKITD_BIG_LOCK=1 makes every W the same mutex (wk[0].mu): the passes are
 * serialised again, for comparison (d_wmu). */
static pthread_mutex_t *d_wmu(struct d_wk *w)
{
	return w->d->big ? &w->d->wk[0].mu : &w->mu;
}

static struct d_wk *d_wmu_owner(struct d_wk *w)
{
	return w->d->big ? &w->d->wk[0] : w;
}

void d_wlock(struct d_wk *w)
{
	struct d_wk *o;
	if (!w->d->mt)
		return;
	o = d_wmu_owner(w);
	__atomic_add_fetch(&o->waiters, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&o->mu);
	__atomic_sub_fetch(&o->waiters, 1, __ATOMIC_RELAXED);
}

void d_wunlock(struct d_wk *w)
{
	if (w->d->mt)
		pthread_mutex_unlock(d_wmu(w));
}

/* The control thread: every worker excluded (W in index order). */
void d_lock(struct d_daemon *d)
{
	unsigned i;
	if (!d->mt)
		return;
	for (i = 0; i < (d->big ? 1u : d->nw); i++)
		d_wlock(&d->wk[i]);
}

void d_unlock(struct d_daemon *d)
{
	unsigned i;
	if (!d->mt)
		return;
	for (i = d->big ? 1u : d->nw; i-- > 0;)
		d_wunlock(&d->wk[i]);
}

/* Worker wk (0: the control ring's) excludes the other workers for an operation
 * that touches their sockets (ADOPT of a parent's connection): the higher W in
 * order, so the lock order holds. Rare: not on any per-operation path. */
void d_world_stop(struct d_daemon *d, unsigned wk)
{
	unsigned i;
	if (!d->mt || d->big)
		return;
	for (i = wk + 1; i < d->nw; i++)
		d_wlock(&d->wk[i]);
}

void d_world_start(struct d_daemon *d, unsigned wk)
{
	unsigned i;
	if (!d->mt || d->big)
		return;
	for (i = d->nw; i-- > wk + 1;)
		d_wunlock(&d->wk[i]);
}

/* The port lock may be asked again by a function the holder calls (a release
 * inside a reclaim, a claim inside an autobind): a per-thread depth makes the
 * nesting free instead of a recursive mutex. */
static __thread unsigned d_pdepth;

void d_plock(struct d_daemon *d)
{
	if (d->mt && d_pdepth++ == 0)
		pthread_mutex_lock(&d->pmu);
}

void d_punlock(struct d_daemon *d)
{
	if (d->mt && --d_pdepth == 0)
		pthread_mutex_unlock(&d->pmu);
}

void d_alock(struct d_app *a)
{
	if (a->d->mt && a->amu_ok)
		pthread_mutex_lock(&a->amu);
}

void d_aunlock(struct d_app *a)
{
	if (a->d->mt && a->amu_ok)
		pthread_mutex_unlock(&a->amu);
}

/* Between two turns of a worker that keeps going: if another thread waits for its
 * W (the control thread, or worker 0 stopping the world), let it in. A mutex lets
 * the thread that unlocks take it straight back (the waiter is still waking up),
 * so wait until the waiter has it, bounded by 2 ms (then go on: the waiter gets
 * it at the next turn). */
static void d_relax(struct d_wk *w)
{
	struct d_wk *o = d_wmu_owner(w);
	uint64_t t0;
	if (!__atomic_load_n(&o->waiters, __ATOMIC_RELAXED))
		return;
	d_wunlock(w);
	t0 = d_now();
	while (__atomic_load_n(&o->waiters, __ATOMIC_RELAXED) && d_now() - t0 < 2000000)
		sched_yield();
	d_wlock(w);
}

/* Wake worker w if it sleeps: it has work another thread gave it. The caller
 * published the work first (a message, a hand-off bit, an active socket); seq_cst
 * here and in d_wk_sleep_ok forbid both sides reading the other's old value (the
 * kicker sees sleeping 0 while the sleeper missed the work). A no-op with one
 * thread. */
static __thread int d_cur_wk = -1; /* the worker this thread runs, or -1 */

void d_kick(struct d_wk *w)
{
	uint64_t one = 1;
	if (!w->d->mt || (int)w->idx == d_cur_wk)
		return; /* a running worker is not asleep */
	/* seq_cst fence: the caller's publication (a release store, a ring commit)
	 * may not pass this load of `sleeping` (store-load order) */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&w->sleeping, __ATOMIC_SEQ_CST))
		return;
	if (write(w->kick_fd, &one, sizeof one) < 0) {
		/* EAGAIN: the counter is already non-zero, it wakes anyway */
	}
}

void d_kick_all(struct d_daemon *d)
{
	unsigned i;
	for (i = 0; i < d->nw; i++)
		d_kick(&d->wk[i]);
}

/* The worker a TCP flow from our address and lport to peer:pport reaches: the
 * hash the steering computes for its frames (runtime/wio.c wk_frame_worker: the
 * same key, fields and table), so a CONNECT from a bound port runs on the worker
 * that will receive the replies. */
unsigned d_flow_worker(const struct d_daemon *d, uint32_t peer_be, uint16_t pport_be,
                       uint16_t lport_be)
{
	uint32_t h = ipk_rss_hash_frame4(d->rss_key, 0, 6, 0, peer_be, d->cfg.ip4_be, pport_be,
	                                 lport_be);
	int q = ipk_rss_queue(d->reta, 128, h);
	return q < 0 || (unsigned)q >= d->nw ? 0 : (unsigned)q;
}

/* As d_flow_worker for a TCP flow over IPv6 from our address src (the core's
 * choice for the peer, ipk_ip6_src_select) and lport to peer:pport: the
 * steering's hash of the frames that will come back (symmetric key: either
 * direction hashes alike). */
unsigned d_flow_worker6(const struct d_daemon *d, const uint8_t peer[16], uint16_t pport_be,
                        const uint8_t src[16], uint16_t lport_be)
{
	uint32_t h = ipk_rss_hash_frame6(d->rss_key, 0, 6, 0, peer, src, pport_be, lport_be);
	int q = ipk_rss_queue(d->reta, 128, h);
	return q < 0 || (unsigned)q >= d->nw ? 0 : (unsigned)q;
}

/* --workers N > 1: the runtime's workers run d_wk_run, one node each. The lock is
 * held until every worker's node is known, so no worker starts its loop early. */
int d_start_workers(struct d_daemon *d, char *err, size_t errlen)
{
	struct ipk_workers_cfg wc;
	void *apps[IPK_WORKERS_MAX];
	unsigned i;
	ipk_workers_cfg_default(&wc);
	d_node_template(d, &wc.node);
	wc.nworkers = d->nw;
	wc.steer = d->cfg.steer >= 0 ? d->cfg.steer
	                             : strstr(d->cfg.io_spec, "queues=") ? IPK_STEER_QUEUES
	                                                                 : IPK_STEER_SOFT;
	wc.cpus = d->cfg.ncpus ? d->cfg.cpus : NULL;
	wc.ncpus = d->cfg.ncpus;
	ipk_rss_key_symmetric(d->rss_key);
	for (i = 0; i < 128; i++)
		d->reta[i] = (uint16_t)(i % d->nw);
	wc.rss_key = d->rss_key;
	wc.reta = d->reta;
	wc.reta_size = 128;
	for (i = 0; i < d->nw; i++) {
		struct d_wk *w = &d->wk[i];
		apps[i] = w;
		w->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		w->ep = epoll_create1(EPOLL_CLOEXEC);
		if (w->kick_fd < 0 || w->ep < 0) {
			snprintf(err, errlen, "worker %u: %s", i, strerror(errno));
			return -1;
		}
		w->ev_kick.kind = D_EV_KICK;
		d_ep_add_to(w->ep, w->kick_fd, &w->ev_kick, EPOLLIN);
		w->pc = (struct d_pce *)calloc(D_PCACHE, sizeof *w->pc);
		if (!w->pc) {
			snprintf(err, errlen, "workers: out of memory");
			return -1;
		}
	}
	d->port_gen = 1; /* an empty cache entry (gen 0) never matches */
	d->tturn = (uint32_t *)calloc(1u << 16, sizeof *d->tturn);
	if (!d->tturn) {
		snprintf(err, errlen, "workers: out of memory");
		return -1;
	}
	if (d_msg_init(d) < 0) {
		snprintf(err, errlen, "workers: out of memory");
		return -1;
	}
	wc.node_apps = apps;
	wc.run = d_wk_run;
	wc.run_arg = d;
	for (i = 0; i < d->nw; i++)
		pthread_mutex_init(&d->wk[i].mu, NULL);
	pthread_mutex_init(&d->pmu, NULL);
	d->big = getenv("IPKITD_BIG_LOCK") && atoi(getenv("IPKITD_BIG_LOCK")) == 1;
	d->mt = 1;
	d->awake = d->nw;
	d_lock(d);
	d->ws = ipk_workers_start(&wc, err, errlen);
	for (i = 0; d->ws && i < d->nw; i++) {
		d->wk[i].node = ipk_workers_node(d->ws, i);
		d->wk[i].ctx = ipk_node_ctx(d->wk[i].node);
		d_ep_node(&d->wk[i], d->wk[i].ep);
	}
	d_unlock(d);
	if (!d->ws) {
		d->mt = 0;
		for (i = 0; i < d->nw; i++)
			pthread_mutex_destroy(&d->wk[i].mu);
		pthread_mutex_destroy(&d->pmu);
		return -1;
	}
	fprintf(stderr, "ipkitd: %u workers, %s steering, %s\n", d->nw,
	        ipk_workers_steering(d->ws) == IPK_STEER_SOFT ? "soft" : "queue",
	        d->big ? "one lock (IPKITD_BIG_LOCK=1)" : "a lock per worker");
	return 0;
}

/* Priorities per daemon, not per worker: before worker wk serves level lvl, does
 * another worker have active sockets of a higher level? Then wk yields (kicks it
 * and leaves its own lower levels for its next pass), but only until that worker
 * has had one pass: so a higher level anywhere goes first, and a lower level still
 * gets its share at least once per pass of the worker it yields to (no level
 * starves, as within one worker). Under W[wk]; the other workers' counts are
 * atomics read as hints. */
int d_defer(struct d_daemon *d, unsigned wk, unsigned lvl)
{
	struct d_wk *w = &d->wk[wk];
	unsigned j, l;
	int defer = 0;
	for (j = 0; j < d->nw; j++) {
		struct d_wk *o = &d->wk[j];
		/* active there (or being served: d_serve_level holds the count over a
		 * socket's turn), or handed to it and not taken yet (d_ho_give). The
		 * mask first (acquire: cleared only after its sockets were counted) */
		uint32_t ho = __atomic_load_n(&o->ho_lvls, __ATOMIC_ACQUIRE);
		if (j == wk)
			continue;
		for (l = 0; l < lvl && !__atomic_load_n(&o->act_lvl[l], __ATOMIC_ACQUIRE) &&
		            !(ho >> l & 1);
		     l++)
			;
		/* the yield lasts until a pass of o that began after it has ended: the
		 * mark is o's passes begun, so a pass already under way when we yielded
		 * (past its own level 0, before it took our hand-off) does not count
		 * (begun is not enough either: the higher level may still be being
		 * served). passes_done never passes passes; both wrap alike */
		if (l == lvl || (w->defer_on[j] &&
		                 (int32_t)(__atomic_load_n(&o->passes_done, __ATOMIC_ACQUIRE) -
		                           w->defer_mark[j]) > 0)) {
			w->defer_on[j] = 0; /* nothing higher there, or it had its pass */
			continue;
		}
		if (!w->defer_on[j]) {
			w->defer_on[j] = 1;
			w->defer_mark[j] = __atomic_load_n(&o->passes, __ATOMIC_ACQUIRE);
		}
		d_kick(o);
		defer = 1;
	}
	return defer;
}

/* One service pass of worker wk over the sockets it owns: level 0 without a limit
 * (each socket at most D_PASS_BUDGET entries), then each lower level with its
 * guaranteed share, prio_share doubled per level above the lowest: a flood at a
 * low level costs the high levels at most that share per pass, and no level ever
 * gets nothing. With several workers a lower level waits for a higher one on
 * another worker (d_defer); a deferral counts as work (the loop comes back). */
/* Where worker wk's pass starts in the application list: one worker rotates the
 * list itself (d_apps_rotate); several each start one application further every
 * pass, so the applications take turns on every worker. O(applications). */
struct d_app *d_first(struct d_daemon *d, unsigned wk)
{
	struct d_app *a = d->apps;
	uint32_t k;
	if (d->nw == 1 || !d->napps)
		return a;
	for (k = d->wk[wk].rot++ % d->napps; a && k; k--)
		a = a->next;
	return a ? a : d->apps;
}

/* A worker's sleep (--workers > 1), without its lock: its node, its kick and
 * (worker 0) the doorbells. Doorbells only say "look": the pass that follows takes
 * the bitmap. */
static void d_wk_sleep(struct d_wk *w, int timeout_ms)
{
	struct epoll_event ev[64];
	uint64_t v;
	int i, n = epoll_wait(w->ep, ev, 64, timeout_ms);
	/* every tag here is the worker's or the daemon's (d->ev_bell), never an
	 * application's: the control thread may have freed one meanwhile. A doorbell
	 * is edge-triggered and never read (d_app_event's reason); submit_seq tells
	 * the pass which application rang. */
	for (i = 0; i < n; i++)
		if (ev[i].data.ptr == &w->ev_kick && read(w->kick_fd, &v, sizeof v) < 0) {
			/* EAGAIN: drained already */
		}
}

/* Work of worker wk's own left (no sleep): sockets to look at again, hand-offs,
 * messages. *ovf: a CQ was full or an outbox waits (sleep at most 1 ms). */
static int d_wk_busy(struct d_daemon *d, unsigned wk, int *ovf)
{
	struct d_app *a;
	*ovf = d->wk[wk].ob_h != NULL;
	for (a = d->apps; a; a = a->next) {
		*ovf |= a->ready && a->pw[wk].ovf_wait;
		if (a->ready && (a->pw[wk].rescan || d_ho_pending(&a->pw[wk])))
			return 1;
	}
	return d_msg_pending(d, wk);
}

/* Worker w is awake again (or did not go to sleep after all): the first one
 * awake lowers daemon_sleeping (applications stop ringing). */
static void d_wk_woke(struct d_daemon *d, struct d_wk *w)
{
	__atomic_store_n(&w->sleeping, 0, __ATOMIC_SEQ_CST);
	if (__atomic_fetch_add(&d->awake, 1, __ATOMIC_SEQ_CST) == 0)
		d_awake(d);
}

/* May worker w sleep? Two Dekker pairs, now that no lock orders the workers:
 *  - against a kicker: `sleeping` is stored (seq_cst) before w looks for work
 *    once more; a kicker publishes its work before it reads `sleeping` (d_kick).
 *    Either w sees the work, or the kicker sees w sleeping and writes the kick
 *    fd (which stays readable until w's epoll_wait).
 *  - against the applications: the worker that takes `awake` to 0 is the last
 *    one awake and raises daemon_sleeping everywhere before its last look at
 *    submit_seq (d_sleep_flags); a worker that wakes from 0 lowers them. A
 *    worker awake when the flags are up costs only needless doorbells; all
 *    asleep with a flag down cannot happen (whoever lowered it is awake and
 *    raises it when it is the last to go).
 * 1: committed (sleeping set, awake counted down); 0: go round again. */
static int d_wk_sleep_ok(struct d_daemon *d, struct d_wk *w, int *ovf)
{
	if (d_wk_busy(d, w->idx, ovf))
		return 0;
	__atomic_store_n(&w->sleeping, 1, __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (d_wk_busy(d, w->idx, ovf)) {
		__atomic_store_n(&w->sleeping, 0, __ATOMIC_SEQ_CST);
		return 0;
	}
	if (__atomic_sub_fetch(&d->awake, 1, __ATOMIC_SEQ_CST) == 0 &&
	    !d_sleep_flags(d, w->idx)) {
		d_wk_woke(d, w);
		return 0;
	}
	return 1;
}

/* Both passes inside their critical sections at once: counted per worker at the
 * start and the end of its pass (in_pass is stored under its W, so with the big
 * lock no other worker can be seen inside: 0 by construction). */
static void d_overlap_look(struct d_daemon *d, struct d_wk *w, int *seen)
{
	unsigned j;
	for (j = 0; j < d->nw && !*seen; j++)
		if (j != w->idx && __atomic_load_n(&d->wk[j].in_pass, __ATOMIC_RELAXED))
			*seen = 1;
}

/* Worker idx's loop (runtime/workers.c calls it on the worker's thread): the same
 * turn as d_loop over the sockets this worker owns, under its own W. */
static void d_wk_run(struct ipk_workers *ws, unsigned idx, void *arg)
{
	struct d_daemon *d = (struct d_daemon *)arg;
	struct d_wk *w = &d->wk[idx];
	uint64_t last_work = 0, spin = (uint64_t)d->cfg.spin_us * 1000u;
	unsigned dumped = d_dump_gen();
	d_cur_wk = (int)idx;
	d_wlock(w);
	while (!ipk_workers_stopping(ws)) {
		int work = 0, ovf, seen = 0;
		if (d_dump_gen() != dumped) { /* SIGUSR1: our own context, under W */
			dumped = d_dump_gen();
			d_stack_report(d, idx);
		}
		__atomic_store_n(&w->in_pass, 1, __ATOMIC_RELAXED);
		d_overlap_look(d, w, &seen);
		work += d_serve(d, idx);
		work += ipk_node_poll(w->node, 0) > 0;
		d_wake_apps(d, idx);
		d_overlap_look(d, w, &seen);
		__atomic_store_n(&w->in_pass, 0, __ATOMIC_RELAXED);
		w->overlap += (uint64_t)seen;
		if (work && spin)
			last_work = d_now();
		if (work || d->cfg.busy_poll || (spin && d_now() - last_work < spin)) {
			d_relax(w);
			continue;
		}
		if (ipk_io_arm(ipk_node_io(w->node)) > 0 || !d_wk_sleep_ok(d, w, &ovf)) {
			d_relax(w);
			continue;
		}
		d_wunlock(w);
		d_wk_sleep(w, d_timeout_ms(w, ovf));
		d_wlock(w);
		d_wk_woke(d, w);
	}
	d_wunlock(w);
}

void d_wk_report(struct d_daemon *d)
{
	unsigned i;
	for (i = 0; i < d->nw; i++) {
		struct ipk_worker_stats st;
		struct d_wk *w = &d->wk[i];
		memset(&st, 0, sizeof st);
		ipk_workers_stats(d->ws, i, &st);
		fprintf(stderr, "ipkitd: worker %u: sockets %llu entries %llu accepted %llu "
		        "connected %llu datagrams %llu rx_frames %llu wrong_queue %llu "
		        "handed_in %llu handed_out %llu msgs_in %llu msgs_out %llu msg_gone %llu "
		        "msg_full %llu acc_out %llu acc_in %llu acc_done %llu acc_reaped %llu loop_cross %llu "
		        "port_in %llu overlap %llu passes %llu pc_hit %llu pc_miss %llu "
		        "adopt_pair %llu adopt_world %llu urgent_wakes %llu\n", i,
		        (unsigned long long)w->socks, (unsigned long long)w->sqes,
		        (unsigned long long)w->accepted, (unsigned long long)w->connected,
		        (unsigned long long)w->udp_rx, (unsigned long long)st.rx_frames,
		        (unsigned long long)st.wrong_queue, (unsigned long long)w->handed_in,
		        (unsigned long long)w->handed_out, (unsigned long long)w->msgs_in,
		        (unsigned long long)w->msgs_out, (unsigned long long)w->msg_gone,
		        (unsigned long long)w->msg_full, (unsigned long long)w->acc_out,
		        (unsigned long long)w->acc_in, (unsigned long long)w->acc_done,
		        (unsigned long long)w->acc_reaped,
		        (unsigned long long)w->loop_cross, (unsigned long long)w->port_in,
		        (unsigned long long)w->overlap, (unsigned long long)w->passes,
		        (unsigned long long)w->pc_hit, (unsigned long long)w->pc_miss,
		        (unsigned long long)w->adopt_pair, (unsigned long long)w->adopt_world,
		        (unsigned long long)w->urgent_wakes);
	}
}
