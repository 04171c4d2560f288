/* Transport-independent client and server logic (see bench_flow.h). */
#include "bench_flow.h"

#include <stdlib.h>
#include <string.h>

#define NS_PER_S 1000000000ull
#define TIMEOUT_SCAN_NS 10000000ull /* look for timeouts every 10 ms */
#define PAT_PERIOD 26u              /* the generated payload repeats 'a'..'z' */

int bench_payload_init(struct bench_payload *p, const struct bench_opts *o)
{
	uint32_t i;
	p->len = o->len;
	p->base = (uint8_t *)malloc(p->len);
	if (!p->base)
		return -1;
	p->seq_mixed = o->msg == NULL;
	if (o->msg) {
		memcpy(p->base, o->msg, p->len);
		return 0;
	}
	for (i = 0; i < p->len; i++)
		p->base[i] = (uint8_t)('a' + i % PAT_PERIOD);
	return 0;
}

void bench_payload_free(struct bench_payload *p)
{
	free(p->base);
	p->base = NULL;
}

/* Byte i of request seq: the pattern, with seq in the first 8 bytes. */
static uint8_t pay_byte(const struct bench_payload *p, uint64_t seq, uint32_t i)
{
	uint8_t b = p->base[i];
	if (p->seq_mixed && i < 8)
		b ^= (uint8_t)(seq >> (8 * i));
	return b;
}

static void pay_copy(const struct bench_payload *p, uint64_t seq, uint32_t off, uint8_t *dst,
                     uint32_t n)
{
	uint32_t i;
	memcpy(dst, p->base + off, n);
	if (p->seq_mixed)
		for (i = off; i < 8 && i < off + n; i++)
			dst[i - off] = pay_byte(p, seq, i);
}

static int pay_equal(const struct bench_payload *p, uint64_t seq, uint32_t off,
                     const uint8_t *src, uint32_t n)
{
	uint32_t i = off;
	if (p->seq_mixed)
		for (; i < 8 && i < off + n; i++)
			if (src[i - off] != pay_byte(p, seq, i))
				return 0;
	return memcmp(src + (i - off), p->base + i, n - (i - off)) == 0;
}

struct bench_flow *bench_flow_new(const struct bench_worker *w)
{
	struct bench_flow *f = (struct bench_flow *)calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->sent_ns = (uint64_t *)calloc(w->o->depth, sizeof(uint64_t));
	if (!f->sent_ns) {
		free(f);
		return NULL;
	}
	return f;
}

void bench_flow_free(struct bench_flow *f)
{
	if (!f)
		return;
	free(f->sent_ns);
	free(f);
}

int bench_worker_init(struct bench_worker *w, const struct bench_opts *o, uint32_t nflows)
{
	uint32_t i;
	memset(w, 0, sizeof(*w));
	w->o = o;
	hist_init(&w->lat);
	if (bench_payload_init(&w->pay, o) < 0)
		return -1;
	w->flows = (struct bench_flow *)calloc(nflows ? nflows : 1, sizeof(*w->flows));
	if (!w->flows)
		return -1;
	w->nflows = nflows;
	for (i = 0; i < nflows; i++) {
		w->flows[i].idx = i;
		w->flows[i].sent_ns = (uint64_t *)calloc(o->depth, sizeof(uint64_t));
		if (!w->flows[i].sent_ns)
			return -1;
	}
	w->tokens = 1;
	return 0;
}

void bench_worker_free(struct bench_worker *w)
{
	uint32_t i;
	for (i = 0; w->flows && i < w->nflows; i++)
		free(w->flows[i].sent_ns);
	free(w->flows);
	bench_payload_free(&w->pay);
	w->flows = NULL;
}

/* Token bucket: -r per second, at most 10 ms worth (and at least 1) banked, so a
 * stalled run does not make up for lost time with a burst. */
static uint64_t take_tokens(struct bench_worker *w, uint64_t now, uint64_t want)
{
	double cap;
	if (!w->o->rate)
		return want;
	cap = (double)w->o->rate / 100.0;
	if (cap < 1)
		cap = 1;
	if (now > w->tokens_ns) {
		w->tokens += (double)(now - w->tokens_ns) * (double)w->o->rate / NS_PER_S;
		w->tokens_ns = now;
	}
	if (w->tokens > cap)
		w->tokens = cap;
	if ((double)want > w->tokens)
		want = (uint64_t)w->tokens;
	w->tokens -= (double)want;
	return want;
}

static uint64_t in_flight(const struct bench_worker *w, const struct bench_flow *f)
{
	return f->admitted - (w->o->mode == BENCH_BURST ? f->tx_seq : f->rx_seq);
}

uint32_t bench_worker_admit(struct bench_worker *w, struct bench_flow *f, uint64_t now)
{
	uint64_t room, got, i;
	if (!f->open || w->stopping)
		return 0;
	room = w->o->depth - in_flight(w, f);
	if (!room)
		return 0;
	got = take_tokens(w, now, room);
	if (got < room)
		w->starved = 1;
	for (i = 0; i < got; i++)
		f->sent_ns[(f->admitted + i) % w->o->depth] = now;
	f->admitted += got;
	return (uint32_t)got;
}

static void check_timeout(struct bench_worker *w, struct bench_flow *f, uint64_t now)
{
	uint64_t t0;
	if (!f->open || w->o->mode == BENCH_BURST || f->rx_seq == f->admitted ||
	    f->tx_seq == f->rx_seq) /* not even transmitted: the transport is stuck, not the peer */
		return;
	t0 = f->sent_ns[f->rx_seq % w->o->depth];
	if (now - t0 < (uint64_t)w->o->timeout_ms * 1000000ull || f->timed_out == f->rx_seq + 1)
		return;
	w->c.timeouts++;
	if (w->o->proto == 17) { /* the datagram or its echo is lost: give up on it */
		f->rx_seq++;
		f->rx_off = 0;
		f->rx_bad = 0;
	} else {
		f->timed_out = f->rx_seq + 1;
	}
}

uint32_t bench_worker_tick(struct bench_worker *w, uint64_t now,
                           void (*kick)(struct bench_worker *, struct bench_flow *, void *),
                           void *arg)
{
	uint32_t i, kicked = 0;
	if (now >= w->next_timeout_scan) {
		for (i = 0; i < w->nflows; i++)
			check_timeout(w, &w->flows[i], now);
		w->next_timeout_scan = now + TIMEOUT_SCAN_NS;
	}
	if (!w->starved || !w->nflows)
		return 0;
	w->starved = 0;
	for (i = 0; i < w->nflows && !w->starved; i++) {
		struct bench_flow *f = &w->flows[(w->cursor + i) % w->nflows];
		/* admitted requests the transport refused before are retried here too */
		if (bench_worker_admit(w, f, now) || (f->open && bench_flow_tx_pending(w, f))) {
			kick(w, f, arg);
			kicked++;
		}
	}
	w->cursor = (w->cursor + i) % w->nflows;
	return kicked;
}

uint32_t bench_flow_tx_fill(const struct bench_worker *w, const struct bench_flow *f,
                            uint8_t *buf, uint32_t cap, int one_request)
{
	uint64_t seq = f->tx_seq;
	uint32_t off = f->tx_off, n = 0, len = w->pay.len;
	while (seq < f->admitted && n < cap) {
		uint32_t k = len - off;
		if (k > cap - n)
			k = cap - n;
		pay_copy(&w->pay, seq, off, buf + n, k);
		n += k;
		off += k;
		if (off == len) {
			seq++;
			off = 0;
			if (one_request)
				break;
		}
	}
	return n;
}

void bench_flow_tx_done(struct bench_worker *w, struct bench_flow *f, uint32_t n)
{
	uint64_t before = f->tx_seq;
	w->c.tx_bytes += n;
	f->tx_off += n % w->pay.len;
	f->tx_seq += n / w->pay.len;
	if (f->tx_off >= w->pay.len) {
		f->tx_off -= w->pay.len;
		f->tx_seq++;
	}
	if (w->o->mode == BENCH_BURST)
		w->c.requests += f->tx_seq - before;
}

int bench_flow_tx_pending(const struct bench_worker *w, const struct bench_flow *f)
{
	(void)w;
	return f->tx_seq < f->admitted;
}

int bench_payload_zc_layout(const struct bench_payload *p, uint8_t *buf, uint32_t cap)
{
	uint32_t i;
	if (!p->seq_mixed) {
		if (p->len > cap)
			return -1;
		memcpy(buf, p->base, p->len);
		return 0;
	}
	if (cap < 2 * PAT_PERIOD)
		return -1;
	for (i = 0; i < cap; i++)
		buf[i] = (uint8_t)('a' + i % PAT_PERIOD);
	return 0;
}

/* Request byte off (past the numbered bytes) in the layout: a -m payload lies there
 * whole; the generated one is periodic, so any phase of the period will do. */
static uint32_t zc_pos(const struct bench_payload *p, uint32_t off)
{
	return p->seq_mixed ? off % PAT_PERIOD : off;
}

uint32_t bench_flow_tx_zc(const struct bench_worker *w, const struct bench_flow *f,
                          uint32_t cap, uint32_t max, uint32_t *ncopy, uint32_t *pos)
{
	const struct bench_payload *p = &w->pay;
	uint32_t off = f->tx_off, n = 0, slice;
	*ncopy = 0;
	*pos = 0;
	if (f->tx_seq >= f->admitted || !max)
		return 0;
	if (p->seq_mixed && off < BENCH_SEQ_BYTES) {
		n = BENCH_SEQ_BYTES - off;
		if (n > p->len - off)
			n = p->len - off;
		if (n > max)
			n = max;
		*ncopy = n;
		off += n;
	}
	if (off == p->len || n == max)
		return n;
	*pos = zc_pos(p, off);
	slice = p->len - off;
	if (slice > max - n)
		slice = max - n;
	if (slice > cap - *pos)
		slice = cap - *pos;
	return n + slice;
}

static void complete(struct bench_worker *w, struct bench_flow *f, uint64_t now)
{
	if (f->rx_bad)
		w->c.mismatches++;
	else {
		w->c.requests++;
		hist_add(&w->lat, now - f->sent_ns[f->rx_seq % w->o->depth]);
	}
	f->rx_seq++;
	f->rx_off = 0;
	f->rx_bad = 0;
}

void bench_flow_rx(struct bench_worker *w, struct bench_flow *f, const uint8_t *data,
                   uint32_t n, uint64_t now)
{
	uint32_t len = w->pay.len;
	w->c.rx_bytes += n;
	if (w->o->mode == BENCH_BURST)
		return; /* a burst server should not answer; whatever it sends is dropped */
	while (n) {
		uint32_t k = len - f->rx_off;
		if (f->rx_seq >= f->tx_seq && !(f->rx_seq == f->tx_seq && f->rx_off < f->tx_off)) {
			/* bytes for a request we have not sent: the peer made them up */
			w->c.mismatches++;
			return;
		}
		if (k > n)
			k = n;
		if (!f->rx_bad && !pay_equal(&w->pay, f->rx_seq, f->rx_off, data, k))
			f->rx_bad = 1;
		f->rx_off += k;
		data += k;
		n -= k;
		if (f->rx_off == len)
			complete(w, f, now);
	}
}

void bench_flow_rx_datagram(struct bench_worker *w, struct bench_flow *f, const uint8_t *data,
                            uint32_t n, uint64_t now)
{
	w->c.rx_bytes += n;
	if (w->o->mode == BENCH_BURST)
		return;
	if (f->rx_seq >= f->tx_seq || n != w->pay.len) {
		w->c.mismatches++;
		return;
	}
	f->rx_bad = !pay_equal(&w->pay, f->rx_seq, 0, data, n);
	complete(w, f, now);
}

void bench_flow_closed(struct bench_worker *w, struct bench_flow *f, int normal)
{
	f->handle = NULL;
	if (!f->open) {
		w->c.connect_fails++;
		return;
	}
	f->open = 0;
	w->c.conns--;
	if (!w->stopping && !normal)
		w->c.closes++;
}

void bench_flow_server_rx(struct bench_worker *w, struct bench_flow *f, uint32_t n)
{
	uint32_t len = w->pay.len;
	w->c.rx_bytes += n;
	w->c.requests += (f->rx_off + n) / len;
	f->rx_off = (f->rx_off + n) % len;
}

void bench_flow_maybe_corrupt(const struct bench_worker *w, uint8_t *data, uint32_t n)
{
	if (w->o->corrupt_echo && n)
		data[n - 1] ^= 0x5a;
}

int bench_hold_add(struct bench_hold *h, const uint8_t *data, uint32_t n)
{
	if (h->len + n > h->cap) {
		uint32_t cap = (h->len + n) * 2;
		uint8_t *p = (uint8_t *)realloc(h->p, cap);
		if (!p)
			return -1;
		h->p = p;
		h->cap = cap;
	}
	memcpy(h->p + h->len, data, n);
	h->len += n;
	return 0;
}

void bench_hold_drop(struct bench_hold *h, uint32_t n)
{
	if (n > h->len)
		n = h->len;
	memmove(h->p, h->p + n, h->len - n);
	h->len -= n;
}

void bench_hold_free(struct bench_hold *h)
{
	free(h->p);
	h->p = NULL;
	h->len = h->cap = 0;
}
