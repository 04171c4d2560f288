/* Per-second lines and the summary (formats in bench_report.h). */
#include "bench_report.h"

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

static double us(uint64_t ns)
{
	return (double)ns / 1000.0;
}

static void summary_json(struct bench_report *r, const struct bench_counters *c,
                         const struct hist *lat, uint64_t ns)
{
	fprintf(r->out, "{\"type\":\"summary\",\"prog\":\"%s\",\"role\":\"%s\",\"proto\":\"%s\","
	        "\"mode\":\"%s\",\"conns\":%u,\"depth\":%u,\"len\":%u,\"threads\":%u,"
	        "\"seconds\":%.3f,\"requests\":%llu,\"req_per_s\":%.0f,\"rx_gbps\":%.4f,"
	        "\"tx_gbps\":%.4f,", bench_prog_name(r->o->prog), role(r->o),
	        r->o->proto == 17 ? "udp" : "tcp", r->o->mode == BENCH_BURST ? "burst" : "pingpong",
	        r->o->conns, r->o->depth, r->o->len, r->o->threads, (double)ns / NS_PER_S,
	        (unsigned long long)c->requests, ns ? (double)c->requests * NS_PER_S / (double)ns : 0,
	        gbps(c->rx_bytes, ns), gbps(c->tx_bytes, ns));
	if (lat && lat->count)
		fprintf(r->out, "\"lat_us\":{\"p50\":%.2f,\"p90\":%.2f,\"p99\":%.2f,\"p999\":%.2f,"
		        "\"max\":%.2f,\"mean\":%.2f},", us(hist_quantile(lat, 0.5)),
		        us(hist_quantile(lat, 0.9)), us(hist_quantile(lat, 0.99)),
		        us(hist_quantile(lat, 0.999)), us(lat->max), us(hist_mean(lat)));
	fprintf(r->out, "\"mismatches\":%llu,\"closes\":%llu,\"timeouts\":%llu,"
	        "\"connect_fails\":%llu,\"errors\":%llu}\n", (unsigned long long)c->mismatches,
	        (unsigned long long)c->closes, (unsigned long long)c->timeouts,
	        (unsigned long long)c->connect_fails, (unsigned long long)bench_errors(c));
}

static void summary_text(struct bench_report *r, const struct bench_counters *c,
                         const struct hist *lat, uint64_t ns)
{
	fprintf(r->out, "summary (%s %s, %s, -c %u -d %u -l %u -T %u): %.3f s, %llu requests, "
	        "%.0f req/s, rx %.4f Gbit/s, tx %.4f Gbit/s\n", bench_prog_name(r->o->prog),
	        role(r->o), r->o->proto == 17 ? "udp" : "tcp",
	        r->o->conns, r->o->depth, r->o->len, r->o->threads, (double)ns / NS_PER_S,
	        (unsigned long long)c->requests, ns ? (double)c->requests * NS_PER_S / (double)ns : 0,
	        gbps(c->rx_bytes, ns), gbps(c->tx_bytes, ns));
	if (lat && lat->count)
		fprintf(r->out, "latency us: p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.2f  "
		        "mean %.2f (histogram error <= 0.2%%)\n", us(hist_quantile(lat, 0.5)),
		        us(hist_quantile(lat, 0.9)), us(hist_quantile(lat, 0.99)),
		        us(hist_quantile(lat, 0.999)), us(lat->max), us(hist_mean(lat)));
	fprintf(r->out, "errors %llu: mismatches %llu, closes %llu, timeouts %llu, "
	        "connect fails %llu\n", (unsigned long long)bench_errors(c),
	        (unsigned long long)c->mismatches, (unsigned long long)c->closes,
	        (unsigned long long)c->timeouts, (unsigned long long)c->connect_fails);
}

void bench_report_summary(struct bench_report *r, const struct bench_counters *c,
                          const struct hist *lat, uint64_t now_ns)
{
	uint64_t ns = now_ns - r->start_ns;
	if (r->o->json)
		summary_json(r, c, lat, ns);
	else
		summary_text(r, c, lat, ns);
	fflush(r->out);
}

int bench_exit_status(const struct bench_opts *o, const struct bench_counters *c)
{
	if (!o->client)
		return BENCH_EXIT_OK;
	return bench_errors(c) || !c->requests ? BENCH_EXIT_FAIL : BENCH_EXIT_OK;
}
