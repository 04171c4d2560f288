/*
 * Worker threads, one node each (include/ipkit/runtime.h, "workers").
 *
 * Start-up order: RSS table and key; for SOFT steering the reader's backend (its
 * capabilities shape the workers'); per worker the rings, the model's tables and the
 * node (whose backend is wio.c); then the threads: the reader, and per worker the
 * networking thread and (MERGE, SPLIT) the application thread. Stop reverses it: the
 * flag, a kick to every sleeper, joins, then frees.
 */
#include "workers_int.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#define WK_RETA_DEFAULT 128
#define WK_RING_DEFAULT 4096
#define WK_NET_SLEEP_MS 100

/* --------------------------------------------------------------- waker */

int waker_init(struct waker *w)
{
	w->armed = 0;
	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	return w->efd < 0 ? -errno : 0;
}

void waker_fini(struct waker *w)
{
	if (w->efd >= 0)
		close(w->efd);
	w->efd = -1;
}

void waker_arm(struct waker *w)
{
	uint64_t v;

	/* a kick from before is used up: reset the counter so poll blocks again */
	if (read(w->efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing was pending */
	}
	__atomic_store_n(&w->armed, 1, __ATOMIC_RELAXED);
	/* full fence: armed is visible before we re-check the queues (pairs with the
	 * fence in waker_kick; see struct waker) */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

void waker_disarm(struct waker *w)
{
	__atomic_store_n(&w->armed, 0, __ATOMIC_RELAXED);
}

void waker_kick(struct waker *w)
{
	uint64_t one = 1;

	/* full fence: the ring commit before it is visible before we look at armed */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&w->armed, __ATOMIC_RELAXED) &&
	    __atomic_exchange_n(&w->armed, 0, __ATOMIC_RELAXED)) {
		WK_INC_MT(w->wakeups); /* several producers may kick one sleeper */
		if (write(w->efd, &one, sizeof(one)) < 0) {
			/* EAGAIN: the counter is already nonzero, the sleeper wakes anyway */
		}
	}
}

/* -------------------------------------------------------------- config */

void ipk_workers_cfg_default(struct ipk_workers_cfg *cfg)
{
	if (!cfg)
		return;
	memset(cfg, 0, sizeof(*cfg));
	ipk_node_cfg_default(&cfg->node);
	cfg->nworkers = 1;
	cfg->model = IPK_MODEL_UNIFIED;
	cfg->steer = IPK_STEER_SOFT;
	cfg->reta_size = WK_RETA_DEFAULT;
	cfg->ring_slots = WK_RING_DEFAULT;
}

int ipk_model_parse(const char *name)
{
	if (!name)
		return -EINVAL;
	if (strcmp(name, "unified") == 0)
		return IPK_MODEL_UNIFIED;
	if (strcmp(name, "merge") == 0)
		return IPK_MODEL_MERGE;
	if (strcmp(name, "split") == 0)
		return IPK_MODEL_SPLIT;
	return -EINVAL;
}

static int wk_check_cfg(const struct ipk_workers_cfg *c, char *err, size_t errlen)
{
	const char *why = NULL;

	if (c->nworkers == 0 || c->nworkers > IPK_WORKERS_MAX)
		why = "nworkers must be 1..64";
	else if (c->model < IPK_MODEL_UNIFIED || c->model > IPK_MODEL_SPLIT)
		why = "unknown thread model";
	else if (c->steer != IPK_STEER_SOFT && c->steer != IPK_STEER_QUEUES)
		why = "unknown steering";
	else if (!c->app && !c->run)
		why = "no application (ipk_workers_cfg.app)";
	else if (c->reta_size == 0 || c->reta_size > 65536)
		why = "reta_size must be 1..65536";
	else if (c->rss_fields > IPK_RSS_F_DEFAULT)
		why = "unknown rss_fields";
	else if (c->ring_slots < 64 || (c->ring_slots & (c->ring_slots - 1)) != 0)
		why = "ring_slots must be a power of two >= 64";
	else if (!c->node.io_spec || !c->node.io_spec[0])
		why = "no backend given (e.g. tap:ipk0)";
	if (why) {
		snprintf(err, errlen, "workers: %s", why);
		return -EINVAL;
	}
	return 0;
}

/* The table for reta_size entries: reta's, or entry i -> worker i % N for NULL. */
static int wk_reta(struct ipk_workers *ws, const uint16_t *reta, uint32_t reta_size,
                   char *err, size_t errlen)
{
	uint16_t *t = (uint16_t *)calloc(reta_size, sizeof(uint16_t));
	uint32_t i;

	if (!t) {
		snprintf(err, errlen, "workers: out of memory");
		return -ENOMEM;
	}
	for (i = 0; i < reta_size; i++) {
		t[i] = reta ? reta[i] : (uint16_t)(i % ws->n);
		if (t[i] >= ws->n) {
			snprintf(err, errlen, "workers: reta[%u] = %u names no worker (%u workers)", i,
			         t[i], ws->n);
			free(t);
			return -EINVAL;
		}
	}
	free(ws->reta);
	ws->reta = t;
	ws->reta_size = reta_size;
	return 0;
}

/* Same key and table for every worker; worker i serves queue i. */
static int wk_rss(struct ipk_workers *ws, char *err, size_t errlen)
{
	if (ws->cfg.rss_key)
		memcpy(ws->key, ws->cfg.rss_key, IPK_RSS_KEY_LEN);
	else
		ipk_rss_key_symmetric(ws->key);
	ws->fields = ws->cfg.rss_fields;
	return wk_reta(ws, ws->cfg.reta, ws->cfg.reta_size, err, errlen);
}

int wk_rss_install(struct ipk_workers *ws, const uint8_t *key, uint8_t fields,
                   const uint16_t *reta, uint32_t reta_size, char *err, size_t errlen)
{
	int rc = wk_reta(ws, reta, reta_size, err, errlen);

	if (rc < 0)
		return rc;
	memcpy(ws->key, key, IPK_RSS_KEY_LEN);
	ws->fields = fields;
	return 0;
}

/* cfg.run: the app pointer worker i's node carries. */
static void *wk_node_app(const struct ipk_workers *ws, unsigned i)
{
	return ws->cfg.node_apps ? ws->cfg.node_apps[i] : ws->cfg.node.app;
}

/* The node's core config: the application's tweak first, RSS last. */
static void wk_core_tweak(struct ipk_config *c, void *app)
{
	struct wk *w = (struct wk *)app;
	struct ipk_workers *ws = w->ws;

	if (ws->cfg.node.core_tweak)
		ws->cfg.node.core_tweak(c, ws->cfg.run ? wk_node_app(ws, w->idx) : ws->cfg.node.app);
	memcpy(c->rss_key, ws->key, IPK_RSS_KEY_LEN);
	c->rss_fields = ws->fields;
	c->rss_reta = ws->reta;
	c->rss_reta_size = ws->reta_size;
	c->rss_queue = (uint16_t)w->idx;
	/* SOFT: the nodes' backends are rings; the device is the reader's, and a device
	 * that filters by address (afxdp) must learn the IPv6 the workers serve (all
	 * share worker 0's addresses and MAC). */
	if (ws->soft && ws->steer && w->idx == 0)
		ws->addr6_rc = steer_set_addr6(ws->steer, c);
}

/* ------------------------------------------------------------- threads */

static void *wk_net_thread(void *arg)
{
	struct wk *w = (struct wk *)arg;
	int split = w->ws->cfg.model == IPK_MODEL_SPLIT;

	if (w->net_cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(w->net_cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set) < 0)
			fprintf(stderr, "ipkit worker %u: cannot pin to CPU %d: %s\n", w->idx,
			        w->net_cpu, strerror(errno));
	}
	if (w->ws->cfg.run) { /* the caller's loop (ipkitd), no model */
		w->ws->cfg.run(w->ws, w->idx, w->ws->cfg.run_arg);
		return NULL;
	}
	if (w->ws->cfg.model == IPK_MODEL_UNIFIED)
		model_app_start_unified(w);
	while (!wk_stopping(w->ws)) {
		uint32_t did = model_net_turn(w);
		int got = ipk_node_poll(w->node, did || split ? 0 : WK_NET_SLEEP_MS);

		model_net_publish(w);
		if (w->held)
			model_net_retry(w);
		if (split && did == 0 && got == 0)
			sched_yield(); /* busy-polling: only lets others run when idle */
	}
	if (w->ws->cfg.model == IPK_MODEL_UNIFIED)
		model_app_stop_unified(w);
	return NULL;
}

/* The i-th CPU of the list (reused from its start when short), or -1. */
static int wk_cpu(const struct ipk_workers *ws, unsigned i)
{
	if (!ws->cfg.cpus || ws->cfg.ncpus == 0)
		return -1;
	return ws->cfg.cpus[i % ws->cfg.ncpus];
}

static void wk_assign_cpus(struct ipk_workers *ws)
{
	unsigned i, k = ws->soft ? 1 : 0;

	for (i = 0; i < ws->n; i++) {
		struct wk *w = &ws->w[i];

		w->net_cpu = wk_cpu(ws, k++);
		/* MERGE shares the networking thread's CPU; SPLIT takes the next one */
		w->app_cpu = ws->cfg.model == IPK_MODEL_SPLIT ? wk_cpu(ws, k++) : w->net_cpu;
	}
}

static int wk_threads(struct ipk_workers *ws, char *err, size_t errlen)
{
	unsigned i;
	int rc;

	wk_assign_cpus(ws);
	if (ws->soft && (rc = steer_start(ws->steer, wk_cpu(ws, 0))) < 0) {
		snprintf(err, errlen, "workers: cannot start the steering thread: %s", strerror(-rc));
		return rc;
	}
	for (i = 0; i < ws->n; i++) {
		struct wk *w = &ws->w[i];

		rc = pthread_create(&w->net_thr, NULL, wk_net_thread, w);
		if (rc == 0)
			w->net_started = 1;
		if (rc == 0 && ws->cfg.model != IPK_MODEL_UNIFIED) {
			rc = pthread_create(&w->app_thr, NULL, model_app_thread, w);
			if (rc == 0)
				w->app_started = 1;
		}
		if (rc != 0) {
			snprintf(err, errlen, "workers: pthread_create: %s", strerror(rc));
			return -rc;
		}
	}
	return 0;
}

/* ------------------------------------------------------------ start/stop */

static int wk_rings(struct ipk_workers *ws, struct wk *w, char *err, size_t errlen)
{
	uint32_t slots = ws->cfg.ring_slots;

	if (waker_init(&w->net_wake) < 0) {
		snprintf(err, errlen, "workers: eventfd: %s", strerror(errno));
		return -errno;
	}
	if (ws->soft &&
	    (spsc_init(&w->rx, slots, sizeof(void *)) < 0 ||
	     spsc_init(&w->rxret, slots, sizeof(void *)) < 0 ||
	     spsc_init(&w->tx, slots, sizeof(void *)) < 0 ||
	     spsc_init(&w->txret, slots, sizeof(void *)) < 0)) {
		snprintf(err, errlen, "workers: out of memory for the steering rings");
		return -ENOMEM;
	}
	if (!ws->soft && ws->n > 1 && wio_arp_init(w) < 0) {
		snprintf(err, errlen, "workers: out of memory for the ARP inboxes");
		return -ENOMEM;
	}
	return model_init(w, err, errlen);
}

/* All workers answer for one MAC: the device's, the template's, or one random
 * locally administered address chosen here (not one per node). */
static uint8_t *wk_mac(struct ipk_workers *ws, uint8_t mac[6])
{
	static const uint8_t zero[6] = {0};
	const struct ipk_io_caps *caps;

	if (ws->cfg.node.mac || !ws->soft)
		return NULL;
	caps = steer_caps(ws->steer);
	if (caps->link != IPK_LINK_ETH || memcmp(caps->mac, zero, 6) != 0)
		return NULL;
	if (getrandom(mac, 6, 0) != 6)
		memset(mac, 0x5a, 6);
	mac[0] = (uint8_t)((mac[0] & 0xfc) | 0x02); /* IEEE 802: local, unicast */
	return mac;
}

static int wk_nodes(struct ipk_workers *ws, char *err, size_t errlen)
{
	const uint8_t *m = wk_mac(ws, ws->mac);
	unsigned i;
	int rc;

	for (i = 0; i < ws->n; i++) {
		struct wk *w = &ws->w[i];
		struct ipk_node_cfg nc = ws->cfg.node;

		if ((rc = wk_rings(ws, w, err, errlen)) < 0)
			return rc;
		if (m)
			nc.mac = m;
		nc.events = ws->cfg.run ? ws->cfg.node.events : &model_events;
		nc.app = ws->cfg.run ? wk_node_app(ws, i) : w;
		nc.tweak_arg = w;
		nc.core_tweak = wk_core_tweak;
		nc.queue = (int)i;
		nc.cpu = -1; /* the thread pins itself */
		nc.io_open = wio_open;
		nc.io_open_arg = w;
		if (ws->cfg.model == IPK_MODEL_SPLIT)
			nc.busy_poll = 1;
		w->node = ipk_node_create(&nc, err, errlen);
		if (!w->node)
			return -EINVAL;
	}
	return 0;
}

/* The spec without queue= and queues= (the software path reads one queue). */
static char *wk_spec_one_queue(const char *spec)
{
	size_t n = strlen(spec);
	char *out = (char *)malloc(n + 1), *tok, *save = NULL, *copy = strdup(spec);
	size_t at = 0;

	if (!out || !copy) {
		free(out);
		free(copy);
		return NULL;
	}
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (at && (strncmp(tok, "queue=", 6) == 0 || strncmp(tok, "queues=", 7) == 0))
			continue;
		at += (size_t)snprintf(out + at, n + 1 - at, "%s%s", at ? "," : "", tok);
	}
	out[at] = 0;
	free(copy);
	return out;
}

static struct ipk_workers *wk_start(const struct ipk_workers_cfg *cfg, char *err,
                                    size_t errlen, int *no_port_rss);

/* SOFT: whether the reader's device took the workers' IPv6 (wk_core_tweak). */
static int wk_addr6_check(const struct ipk_workers *ws, char *err, size_t errlen)
{
	if (ws->addr6_rc >= 0)
		return 0;
	snprintf(err, errlen, "steering: cannot set the IPv6 address filter: %s",
	         strerror(-ws->addr6_rc));
	return ws->addr6_rc;
}

/* Queue steering on a DPDK port without usable RSS (wio.c found out when worker 0
 * opened its queue): everything is undone and started again with software steering
 * over queue 0 alone, and the program is told which path runs. */
static struct ipk_workers *wk_fallback(const struct ipk_workers_cfg *cfg, char *err,
                                       size_t errlen)
{
	struct ipk_workers_cfg c = *cfg;
	struct ipk_workers *ws;
	char *spec = wk_spec_one_queue(cfg->node.io_spec);
	int again = 0;

	if (!spec) {
		snprintf(err, errlen, "workers: out of memory");
		return NULL;
	}
	fprintf(stderr, "workers: %s; software steering (one reader thread) instead of the "
	        "port's queues\n", err);
	c.steer = IPK_STEER_SOFT;
	c.node.io_spec = spec;
	err[0] = 0;
	ws = wk_start(&c, err, errlen, &again);
	if (!ws)
		free(spec);
	else
		ws->spec_own = spec;
	return ws;
}

struct ipk_workers *ipk_workers_start(const struct ipk_workers_cfg *cfg, char *err,
                                      size_t errlen)
{
	struct ipk_workers *ws;
	int no_port_rss = 0;
	char dummy[1];

	if (!err || errlen == 0) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = 0;
	if (!cfg) {
		snprintf(err, errlen, "workers: no configuration");
		return NULL;
	}
	ws = wk_start(cfg, err, errlen, &no_port_rss);
	if (!ws && no_port_rss)
		ws = wk_fallback(cfg, err, errlen);
	return ws;
}

static struct ipk_workers *wk_start(const struct ipk_workers_cfg *cfg, char *err,
                                    size_t errlen, int *no_port_rss)
{
	struct ipk_workers *ws;
	unsigned i;

	if (wk_check_cfg(cfg, err, errlen) < 0)
		return NULL;
	ws = (struct ipk_workers *)calloc(1, sizeof(*ws));
	if (!ws || !(ws->w = (struct wk *)calloc(cfg->nworkers, sizeof(struct wk)))) {
		free(ws);
		snprintf(err, errlen, "workers: out of memory");
		return NULL;
	}
	ws->cfg = *cfg;
	if (cfg->run)
		ws->cfg.model = IPK_MODEL_UNIFIED; /* no application thread, no message rings */
	ws->n = cfg->nworkers;
	ws->soft = ws->n > 1 && cfg->steer == IPK_STEER_SOFT;
	for (i = 0; i < ws->n; i++) {
		ws->w[i].ws = ws;
		ws->w[i].idx = i;
		ws->w[i].net_wake.efd = ws->w[i].app_wake.efd = -1;
		ws->w[i].epfd = -1;
	}
	if (wk_rss(ws, err, errlen) < 0 ||
	    (ws->soft && !(ws->steer = steer_create(ws, err, errlen))) ||
	    wk_nodes(ws, err, errlen) < 0 || wk_addr6_check(ws, err, errlen) < 0 ||
	    wk_threads(ws, err, errlen) < 0) {
		*no_port_rss = ws->no_port_rss;
		ipk_workers_destroy(ws);
		return NULL;
	}
	return ws;
}

int ipk_workers_stopping(const struct ipk_workers *ws)
{
	return ws ? wk_stopping(ws) : 1;
}

void ipk_workers_request_stop(struct ipk_workers *ws)
{
	unsigned i;

	if (!ws)
		return;
	/* release: pairs with wk_stopping's acquire */
	__atomic_store_n(&ws->stop, 1, __ATOMIC_RELEASE);
	for (i = 0; i < ws->n; i++) {
		waker_kick(&ws->w[i].net_wake);
		waker_kick(&ws->w[i].app_wake);
	}
	if (ws->steer)
		steer_kick(ws->steer);
}

void ipk_workers_stop(struct ipk_workers *ws)
{
	unsigned i;

	if (!ws)
		return;
	ipk_workers_request_stop(ws);
	for (i = 0; i < ws->n; i++) {
		if (ws->w[i].app_started)
			pthread_join(ws->w[i].app_thr, NULL);
		if (ws->w[i].net_started)
			pthread_join(ws->w[i].net_thr, NULL);
		ws->w[i].app_started = ws->w[i].net_started = 0;
	}
	if (ws->steer)
		steer_stop(ws->steer);
}

void ipk_workers_destroy(struct ipk_workers *ws)
{
	unsigned i;

	if (!ws)
		return;
	ipk_workers_stop(ws);
	if (ws->steer)
		steer_destroy(ws->steer); /* frees its packets still in the rings */
	ws->steer = NULL;
	for (i = 0; i < ws->n; i++) {
		struct wk *w = &ws->w[i];

		if (w->small)
			ipk_pkt_free(w->small); /* refs still held keep the buffer */
		w->small = NULL;
		ipk_node_destroy(w->node);
		w->node = NULL;
		model_fini(w);
		spsc_fini(&w->rx);
		spsc_fini(&w->rxret);
		spsc_fini(&w->tx);
		spsc_fini(&w->txret);
		wio_arp_fini(w);
		waker_fini(&w->net_wake);
	}
	free(ws->reta);
	free(ws->w);
	free(ws->spec_own);
	free(ws);
}

int ipk_workers_stats(const struct ipk_workers *ws, unsigned i, struct ipk_worker_stats *st)
{
	const struct wk *w;

	if (!ws || !st || i >= ws->n)
		return IPK_EINVAL;
	w = &ws->w[i];
	st->rx_frames = WK_GET(w->st.rx_frames);
	st->wrong_queue = WK_GET(w->st.wrong_queue);
	st->accepted = WK_GET(w->st.accepted);
	st->connected = WK_GET(w->st.connected);
	st->closed = WK_GET(w->st.closed);
	st->events = WK_GET(w->st.events);
	st->commands = WK_GET(w->st.commands);
	st->app_wakeups = WK_GET(w->st.app_wakeups);
	st->steer_drops = WK_GET(w->st.steer_drops);
	st->arp_forwarded = WK_GET(w->st.arp_forwarded);
	st->udp_rx = WK_GET(w->st.udp_rx);
	st->udp_tx = WK_GET(w->st.udp_tx);
	st->udp_drops = WK_GET(w->st.udp_drops);
	return IPK_OK;
}

struct ipk_node *ipk_workers_node(struct ipk_workers *ws, unsigned i)
{
	return ws && i < ws->n ? ws->w[i].node : NULL;
}

int ipk_workers_steering(const struct ipk_workers *ws)
{
	return ws && ws->soft ? IPK_STEER_SOFT : IPK_STEER_QUEUES;
}

void ipk_workers_steer_stats(const struct ipk_workers *ws, uint64_t *rx, uint64_t *drops)
{
	*rx = *drops = 0;
	if (ws && ws->steer)
		steer_stats(ws->steer, rx, drops);
}
