/* Per-second lines and the summary (formats in bench_report.h). */
#include "bench_report.h"

#include <stddef.h>

#define NS_PER_S 1000000000ull

void bench_counters_add(struct bench_counters *a, const struct bench_counters *b)
{
	a->requests += b->requests;
	a->rx_bytes += b->rx_bytes;
	a->tx_bytes += b->tx_bytes;
	a->mismatches += b->mismatches;
	a->closes += b->closes;
	a->timeouts += b->timeouts;
	a->connect_fails += b->connect_fails;
	a->conns += b->conns;
}

void bench_counters_publish(struct bench_counters *pub, const struct bench_counters *c)
{
	const uint64_t *src = (const uint64_t *)(const void *)c;
	uint64_t *dst = (uint64_t *)(void *)pub;
	size_t i;
	for (i = 0; i < sizeof(*c) / sizeof(uint64_t); i++)
		__atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
}

void bench_counters_add_published(struct bench_counters *sum, const struct bench_counters *pub)
{
	struct bench_counters c;
	uint64_t *dst = (uint64_t *)(void *)&c;
	const uint64_t *src = (const uint64_t *)(const void *)pub;
	size_t i;
	for (i = 0; i < sizeof(c) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	bench_counters_add(sum, &c);
}

uint64_t bench_errors(const struct bench_counters *c)
{
	return c->mismatches + c->closes + c->timeouts + c->connect_fails;
}

void bench_report_start(struct bench_report *r, const struct bench_opts *o, FILE *out,
                        uint64_t now_ns)
{
	struct bench_counters zero = { 0, 0, 0, 0, 0, 0, 0, 0 };
	r->o = o;
	r->out = out;
	r->start_ns = r->last_ns = now_ns;
	r->last = zero;
	r->second = 0;
}

uint64_t bench_report_due_in(const struct bench_report *r, uint64_t now_ns)
{
	uint64_t due = r->last_ns + NS_PER_S;
	return now_ns >= due ? 0 : due - now_ns;
}

static double gbps(uint64_t bytes, uint64_t ns)
{
	return ns ? (double)bytes * 8.0 / (double)ns : 0.0;
}

static const char *role(const struct bench_opts *o)
{
	return o->client ? "client" : "server";
}

int bench_report_tick(struct bench_report *r, const struct bench_counters *c, uint64_t now_ns)
{
	uint64_t ns = now_ns - r->last_ns;
	uint64_t req = c->requests - r->last.requests;
	double rps;
	if (bench_report_due_in(r, now_ns))
		return 0;
	rps = (double)req * NS_PER_S / (double)ns;
	r->second++;
	if (r->o->json)
		fprintf(r->out, "{\"type\":\"second\",\"prog\":\"%s\",\"role\":\"%s\",\"t\":%u,"
		        "\"requests\":%llu,\"req_per_s\":%.0f,\"rx_gbps\":%.4f,\"tx_gbps\":%.4f,"
		        "\"conns\":%llu,\"errors\":%llu}\n", bench_prog_name(r->o->prog), role(r->o),
		        r->second, (unsigned long long)req, rps,
		        gbps(c->rx_bytes - r->last.rx_bytes, ns), gbps(c->tx_bytes - r->last.tx_bytes, ns),
		        (unsigned long long)c->conns, (unsigned long long)bench_errors(c));
	else
		fprintf(r->out, "[%4u%s%.0u s] %10.0f req/s  rx %8.4f Gbit/s  tx %8.4f Gbit/s  "
		        "conns %llu  errors %llu\n", r->second, r->o->duration_s ? "/" : "",
		        r->o->duration_s, rps, gbps(c->rx_bytes - r->last.rx_bytes, ns),
		        gbps(c->tx_bytes - r->last.tx_bytes, ns), (unsigned long long)c->conns,
		        (unsigned long long)bench_errors(c));
	fflush(r->out);
	r->last = *c;
	r->last_ns = now_ns;
	return 1;
}

/* What the summary says, computed once for either format. */
struct summary {
	double secs, rps, rx_gbps, tx_gbps;
	int has_lat;
	double lat_us[6]; /* p50 p90 p99 p99.9 max mean */
};

static void summary_compute(const struct bench_counters *c, const struct hist *lat,
                            uint64_t ns, struct summary *s)
{
	static const double q[4] = { 0.5, 0.9, 0.99, 0.999 };
	int i;
	s->secs = (double)ns / NS_PER_S;
	s->rps = ns ? (double)c->requests * NS_PER_S / (double)ns : 0;
	s->rx_gbps = gbps(c->rx_bytes, ns);
	s->tx_gbps = gbps(c->tx_bytes, ns);
	s->has_lat = lat && lat->count;
	for (i = 0; s->has_lat && i < 4; i++)
		s->lat_us[i] = (double)hist_quantile(lat, q[i]) / 1000.0;
	if (s->has_lat) {
		s->lat_us[4] = (double)lat->max / 1000.0;
		s->lat_us[5] = (double)hist_mean(lat) / 1000.0;
	}
}

static void summary_json(const struct bench_opts *o, FILE *f, const struct bench_counters *c,
                         const struct summary *s)
{
	fprintf(f, "{\"type\":\"summary\",\"prog\":\"%s\",\"role\":\"%s\",\"proto\":\"%s\","
	        "\"mode\":\"%s\",\"conns\":%u,\"depth\":%u,\"len\":%u,\"threads\":%u,",
	        bench_prog_name(o->prog), role(o), o->proto == 17 ? "udp" : "tcp",
	        o->mode == BENCH_BURST ? "burst" : "pingpong", o->conns, o->depth, o->len, o->threads);
	fprintf(f, "\"seconds\":%.3f,\"requests\":%llu,\"req_per_s\":%.0f,\"rx_gbps\":%.4f,"
	        "\"tx_gbps\":%.4f,", s->secs, (unsigned long long)c->requests, s->rps, s->rx_gbps,
	        s->tx_gbps);
	if (s->has_lat)
		fprintf(f, "\"lat_us\":{\"p50\":%.2f,\"p90\":%.2f,\"p99\":%.2f,\"p999\":%.2f,"
		        "\"max\":%.2f,\"mean\":%.2f},", s->lat_us[0], s->lat_us[1], s->lat_us[2],
		        s->lat_us[3], s->lat_us[4], s->lat_us[5]);
	fprintf(f, "\"mismatches\":%llu,\"closes\":%llu,\"timeouts\":%llu,"
	        "\"connect_fails\":%llu,\"errors\":%llu}\n", (unsigned long long)c->mismatches,
	        (unsigned long long)c->closes, (unsigned long long)c->timeouts,
	        (unsigned long long)c->connect_fails, (unsigned long long)bench_errors(c));
}

static void summary_text(const struct bench_opts *o, FILE *f, const struct bench_counters *c,
                         const struct summary *s)
{
	fprintf(f, "summary (%s %s, %s %s, -c %u -d %u -l %u -T %u): %.3f s, %llu requests, "
	        "%.0f req/s, rx %.4f Gbit/s, tx %.4f Gbit/s\n", bench_prog_name(o->prog), role(o),
	        o->proto == 17 ? "udp" : "tcp", o->mode == BENCH_BURST ? "burst" : "ping-pong",
	        o->conns, o->depth, o->len, o->threads, s->secs, (unsigned long long)c->requests,
	        s->rps, s->rx_gbps, s->tx_gbps);
	if (s->has_lat)
		fprintf(f, "latency us: p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.2f  mean %.2f "
		        "(histogram error <= 0.2%%)\n", s->lat_us[0], s->lat_us[1], s->lat_us[2],
		        s->lat_us[3], s->lat_us[4], s->lat_us[5]);
	fprintf(f, "errors %llu: mismatches %llu, closes %llu, timeouts %llu, connect fails %llu\n",
	        (unsigned long long)bench_errors(c), (unsigned long long)c->mismatches,
	        (unsigned long long)c->closes, (unsigned long long)c->timeouts,
	        (unsigned long long)c->connect_fails);
}

void bench_report_summary(struct bench_report *r, const struct bench_counters *c,
                          const struct hist *lat, uint64_t now_ns)
{
	struct summary s;
	summary_compute(c, lat, now_ns - r->start_ns, &s);
	if (r->o->json)
		summary_json(r->o, r->out, c, &s);
	else
		summary_text(r->o, r->out, c, &s);
	fflush(r->out);
}

int bench_exit_status(const struct bench_opts *o, const struct bench_counters *c)
{
	if (!o->client)
		return BENCH_EXIT_OK;
	return bench_errors(c) || !c->requests ? BENCH_EXIT_FAIL : BENCH_EXIT_OK;
}
