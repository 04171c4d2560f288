/*
 * ipkit-httpd: a small HTTP/1.1 server with keep-alive (the demo's server).
 *
 *   ipkit-httpd --io tap:ipk0 --ip 10.7.0.2/24 [--port 80] [--size 1k | --root DIR]
 *               [--idle-timeout SECONDS]
 *
 * Serves a fixed body of --size bytes for every path, or files under --root. GET and
 * HEAD; 400 for malformed requests, 404 for missing files, 405 for other methods,
 * 431 when a request head is longer than HTTPD_MAX_REQ, 413 when head and body are.
 * After 400, 413 and 431 the server closes the connection (it cannot tell where the
 * next request would start) and discards whatever the client still sends, so the
 * window stays open and the close completes with a FIN, not a reset racing the
 * response.
 *
 * No client holds a connection forever (issue 14 item 9): a connection that makes no
 * progress for --idle-timeout seconds (default 60; 0 = never) is ended: idle between
 * requests, closed; an unfinished request (slowloris), 408 and close; a response the
 * client does not read, or a close it does not complete, aborted. Progress is a
 * request answered or our data acknowledged, never a trickle of request bytes, so
 * a head sent a byte at a time still has one timeout to arrive in whole (as nginx's
 * client_header_timeout).
 *
 * Memory per connection is bounded: requests are parsed in place from a fixed input
 * buffer, and received bytes are released to TCP's window (ipk_tcp_recved) only when
 * the request they belong to has been answered. A pipelining client therefore cannot
 * push more than the window we advertise (the core's receive buffer is set to the
 * input buffer's size); responses go out one at a time, in order (RFC 9112 §9.3.2).
 */
#include "app.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define HTTPD_INBUF 16384
/* Largest request (head + body) we wait for: half the buffer. Why not all of it: the
 * window the core offers is rounded down to its scale unit (2^wscale bytes, 128 at
 * wscale 7), so the buffer's last bytes may never be offered and a request that
 * needs them would wait forever; and when a request is pipelined behind others,
 * answering those frees at least half the buffer, which is what the core's receiver
 * SWS avoidance (RFC 9293 §3.8.6.2.2: reopen by min(rcvbuf/2, MSS)) needs to
 * reopen the window for the rest of it. */
#define HTTPD_MAX_REQ (HTTPD_INBUF / 2)
#define HTTPD_SWEEP_NS 100000000ull /* idle check every 100 ms */
#define HTTPD_PATTERN 65536

struct httpd_app {
	uint16_t port_be;
	const char *root;
	uint64_t body_size;
	uint8_t pattern[HTTPD_PATTERN];
	uint64_t requests, conns;
	uint64_t idle_ns;            /* --idle-timeout, 0 = never */
	uint64_t idle_closed;        /* connections ended by the idle timeout */
	struct httpd_conn *all;      /* every open connection, for the idle sweep */
};

struct httpd_conn {
	struct ipk_conn *c;
	struct httpd_app *app;
	uint32_t in_len;
	uint32_t req_len;     /* bytes of the request being answered (0 = none) */
	char hdr[512];
	uint32_t hdr_len, hdr_off;
	int fd;               /* file being sent, or -1 for the pattern body */
	uint64_t body_off, body_end;
	int close_after;
	int closing;
	uint64_t last_ns;     /* last progress: accepted, request answered, data acked */
	struct httpd_conn *prev, *next;
	uint8_t in[HTTPD_INBUF];
};

/* ---------------------------------------------------------------- output */

static uint32_t httpd_body_chunk(struct httpd_conn *h, uint8_t *tmp, uint32_t max, const uint8_t **p)
{
	uint64_t left = h->body_end - h->body_off;
	uint32_t n = left < max ? (uint32_t)left : max;
	if (h->fd < 0) {
		uint32_t at = (uint32_t)(h->body_off % HTTPD_PATTERN);
		if (n > HTTPD_PATTERN - at)
			n = HTTPD_PATTERN - at;
		*p = h->app->pattern + at;
		return n;
	}
	{
		ssize_t r = pread(h->fd, tmp, n, (off_t)h->body_off);
		if (r <= 0)
			return 0;
		*p = tmp;
		return (uint32_t)r;
	}
}

static int httpd_next(struct httpd_conn *h);

/* Close after the last response: what the client sent beyond it is never answered,
 * so give it back to the window now (httpd_payload discards the rest as it comes). */
static void httpd_close(struct ipk_ctx *ctx, struct httpd_conn *h, uint64_t now)
{
	if (h->in_len) {
		ipk_tcp_recved(ctx, h->c, h->in_len, now);
		h->in_len = 0;
	}
	h->closing = 1;
	ipk_tcp_close(ctx, h->c, now);
}

/* Answer the buffered requests in order, as far as the send buffer takes them. */
static void httpd_serve(struct ipk_ctx *ctx, struct httpd_conn *h, uint64_t now)
{
	static uint8_t tmp[65536];
	for (;;) {
		int r;
		if (!h->req_len && !httpd_next(h))
			return;
		if (h->hdr_off < h->hdr_len) {
			r = ipk_tcp_write(ctx, h->c, h->hdr + h->hdr_off, h->hdr_len - h->hdr_off, now);
			if (r <= 0)
				return;
			h->hdr_off += (uint32_t)r;
			continue;
		}
		if (h->body_off < h->body_end) {
			const uint8_t *p = NULL;
			uint32_t room = ipk_tcp_sndbuf_free(h->c), n;
			if (room == 0)
				return;
			n = httpd_body_chunk(h, tmp, room < sizeof(tmp) ? room : sizeof(tmp), &p);
			if (n == 0) { /* file shrank under us: the length we promised is a lie now */
				ipk_tcp_abort(ctx, h->c, now);
				return;
			}
			r = ipk_tcp_write(ctx, h->c, p, n, now);
			if (r <= 0)
				return;
			h->body_off += (uint32_t)r;
			continue;
		}
		/* response queued: release the request's bytes and go on with the next */
		if (h->fd >= 0) {
			close(h->fd);
			h->fd = -1;
		}
		memmove(h->in, h->in + h->req_len, h->in_len - h->req_len);
		h->in_len -= h->req_len;
		ipk_tcp_recved(ctx, h->c, h->req_len, now);
		h->req_len = 0;
		h->last_ns = now;
		if (h->close_after) {
			httpd_close(ctx, h, now);
			return;
		}
	}
}

/* ----------------------------------------------------------------- input */

static const char *httpd_reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 413: return "Content Too Large";
	case 431: return "Request Header Fields Too Large";
	default: return "Error";
	}
}

static void httpd_respond(struct httpd_conn *h, int status, uint64_t len, int head_only,
                          const char *ctype)
{
	h->hdr_len = (uint32_t)snprintf(h->hdr, sizeof(h->hdr),
		"HTTP/1.1 %d %s\r\nServer: ipkit\r\nContent-Length: %llu\r\n"
		"Content-Type: %s\r\n%s\r\n", status, httpd_reason(status),
		(unsigned long long)len, ctype, h->close_after ? "Connection: close\r\n" : "");
	h->hdr_off = 0;
	h->body_off = 0;
	h->body_end = head_only ? 0 : len;
}

static void httpd_error(struct httpd_conn *h, int status, int head_only)
{
	if (status == 400 || status == 408 || status == 413 || status == 431)
		h->close_after = 1; /* we may not know where the next request starts */
	httpd_respond(h, status, 0, head_only, "text/plain");
}

/* A path under --root: no "..", no NUL; "/" serves index.html. */
static int httpd_open(struct httpd_conn *h, const char *path, uint64_t *size)
{
	char full[2200];
	struct stat st;
	int fd, len;
	if (path[0] != '/' || strstr(path, ".."))
		return -1;
	len = snprintf(full, sizeof(full), "%.1024s%.1024s%s", h->app->root, path,
	               path[strlen(path) - 1] == '/' ? "index.html" : "");
	if (len < 0 || (size_t)len >= sizeof(full))
		return -1;
	fd = open(full, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -1;
	}
	*size = (uint64_t)st.st_size;
	return fd;
}

/* Value of header `name` in the head [p, end) (lines end in CRLF), or NULL. */
static const char *httpd_header(const char *p, const char *end, const char *name, size_t *vlen)
{
	size_t nl = strlen(name);
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			break;
		if ((size_t)(eol - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			const char *v = p + nl + 1;
			while (v < eol && (*v == ' ' || *v == '\t'))
				v++;
			*vlen = (size_t)(eol - v);
			if (*vlen && v[*vlen - 1] == '\r')
				(*vlen)--;
			return v;
		}
		p = eol + 1;
	}
	return NULL;
}

static int httpd_token_is(const char *v, size_t n, const char *tok)
{
	return v && n == strlen(tok) && strncasecmp(v, tok, n) == 0;
}

/* Handle one complete request head of `head` bytes; returns the request's total
 * length (head + body) or 0 when the body has not fully arrived yet. */
static uint32_t httpd_request(struct httpd_conn *h, uint32_t head)
{
	char *s = (char *)h->in, *end = s + head;
	char method[16], target[1024], version[16];
	const char *v;
	size_t vlen;
	unsigned long long clen = 0;
	int head_only, n = 0;
	char *eol = memchr(s, '\n', head);
	char line[1100];
	size_t ll = eol ? (size_t)(eol - s) : 0;

	h->close_after = 0;
	if (!eol || ll >= sizeof(line)) {
		httpd_error(h, 400, 0);
		return head;
	}
	memcpy(line, s, ll);
	line[ll] = 0;
	if (sscanf(line, "%15s %1023s %15s%n", method, target, version, &n) != 3 ||
	    strncmp(version, "HTTP/1.", 7) != 0) {
		httpd_error(h, 400, 0);
		return head;
	}
	head_only = strcmp(method, "HEAD") == 0;
	v = httpd_header(eol + 1, end, "Connection", &vlen);
	if (httpd_token_is(v, vlen, "close") ||
	    (strcmp(version, "HTTP/1.0") == 0 && !httpd_token_is(v, vlen, "keep-alive")))
		h->close_after = 1;
	if (httpd_header(eol + 1, end, "Transfer-Encoding", &vlen)) {
		httpd_error(h, 400, head_only); /* no chunked request bodies here */
		return head;
	}
	v = httpd_header(eol + 1, end, "Content-Length", &vlen);
	if (v) {
		char num[24];
		char *e;
		if (vlen == 0 || vlen >= sizeof(num)) {
			httpd_error(h, 400, head_only);
			return head;
		}
		memcpy(num, v, vlen);
		num[vlen] = 0;
		clen = strtoull(num, &e, 10);
		if (*e || num[0] == '-' || clen > HTTPD_MAX_REQ - head) {
			/* RFC 9110 §15.5.14: 413 for a body larger than we take */
			httpd_error(h, *e || num[0] == '-' ? 400 : 413, head_only);
			return head;
		}
		if (h->in_len < head + clen)
			return 0;
	}
	h->app->requests++;
	if (!head_only && strcmp(method, "GET") != 0) {
		httpd_error(h, 405, 0);
	} else if (h->app->root) {
		uint64_t size = 0;
		char *q = strchr(target, '?');
		if (q)
			*q = 0;
		h->fd = httpd_open(h, target, &size);
		if (h->fd < 0)
			httpd_respond(h, 404, 0, head_only, "text/plain");
		else
			httpd_respond(h, 200, size, head_only, "application/octet-stream");
	} else {
		httpd_respond(h, 200, h->app->body_size, head_only, "text/plain");
	}
	return head + (uint32_t)clen;
}

/* Set up the answer to the next complete request in the buffer; 0 when there is none. */
static int httpd_next(struct httpd_conn *h)
{
	uint32_t i, len, scan = h->in_len < HTTPD_MAX_REQ ? h->in_len : HTTPD_MAX_REQ;
	if (h->req_len || h->closing || h->in_len < 4)
		return 0;
	for (i = 3; i < scan; i++)
		if (h->in[i] == '\n' && h->in[i - 1] == '\r' && h->in[i - 2] == '\n' && h->in[i - 3] == '\r')
			break;
	if (i >= scan) {
		/* RFC 6585 §5: a head we will not take answers 431 (and we close) */
		if (h->in_len < HTTPD_MAX_REQ)
			return 0;
		httpd_error(h, 431, 0);
		h->req_len = h->in_len;
		return 1;
	}
	len = httpd_request(h, i + 1);
	if (len == 0)
		return 0;
	h->req_len = len;
	return 1;
}

/* ------------------------------------------------------------ TCP events */

static void *httpd_accepted(struct ipk_ctx *ctx, struct ipk_conn *c, void *opaque)
{
	struct httpd_app *a = (struct httpd_app *)ipk_node_app(opaque);
	struct httpd_conn *h = (struct httpd_conn *)malloc(sizeof(*h));
	if (!h) {
		ipk_tcp_abort(ctx, c, ipk_node_now(ipk_node_from(opaque)));
		return NULL;
	}
	memset(h, 0, offsetof(struct httpd_conn, in));
	h->c = c;
	h->app = a;
	h->fd = -1;
	h->last_ns = ipk_node_now(ipk_node_from(opaque));
	h->next = a->all;
	if (a->all)
		a->all->prev = h;
	a->all = h;
	a->conns++;
	return h;
}

static void httpd_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                          uint32_t off, uint32_t len, void *opaque)
{
	struct httpd_conn *h = (struct httpd_conn *)user;
	uint64_t now = ipk_node_now(ipk_node_from(opaque));
	(void)c;
	if (!h)
		return;
	if (!pkt) { /* peer done sending: finish what we answer, then close */
		h->close_after = 1;
		if (!h->req_len && !h->closing) {
			h->closing = 1;
			ipk_tcp_close(ctx, h->c, now);
		}
		return;
	}
	if (h->closing) {
		/* answered and closing: discard, keep the window open until the peer's FIN */
		ipk_tcp_recved(ctx, h->c, len, now);
		return;
	}
	if (len > HTTPD_INBUF - h->in_len) {
		/* the peer sent beyond the window we advertised */
		ipk_tcp_abort(ctx, h->c, now);
		return;
	}
	memcpy(h->in + h->in_len, ipk_pkt_mtod((struct ipk_pkt *)pkt) + off, len);
	h->in_len += len;
	httpd_serve(ctx, h, now);
}

static void httpd_acked(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, uint32_t bytes,
                        void *opaque)
{
	struct httpd_conn *h = (struct httpd_conn *)user;
	(void)c;
	(void)bytes;
	if (!h)
		return;
	h->last_ns = ipk_node_now(ipk_node_from(opaque));
	httpd_serve(ctx, h, h->last_ns);
}

static void httpd_closed(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
                         enum ipk_close_reason why, void *opaque)
{
	struct httpd_conn *h = (struct httpd_conn *)user;
	(void)ctx;
	(void)c;
	(void)why;
	(void)opaque;
	if (!h)
		return;
	if (h->fd >= 0)
		close(h->fd);
	if (h->prev)
		h->prev->next = h->next;
	else
		h->app->all = h->next;
	if (h->next)
		h->next->prev = h->prev;
	free(h);
}

/* One connection that made no progress for the idle timeout. */
static void httpd_expire(struct ipk_ctx *ctx, struct httpd_conn *h, uint64_t now)
{
	h->app->idle_closed++;
	if (h->closing || h->req_len) {
		/* the peer does not read our response or finish the close: nothing
		 * graceful is left (the closed event frees h) */
		ipk_tcp_abort(ctx, h->c, now);
		return;
	}
	h->last_ns = now; /* one more period for the 408 and the close to complete */
	if (h->in_len) {
		/* RFC 9110 §15.5.9: a request that did not arrive in time */
		httpd_error(h, 408, 0);
		h->req_len = h->in_len;
		httpd_serve(ctx, h, now);
		return;
	}
	httpd_close(ctx, h, now);
}

/* End the connections idle longer than --idle-timeout. */
static void httpd_sweep(struct ipk_ctx *ctx, struct httpd_app *a, uint64_t now)
{
	struct httpd_conn *h = a->all, *next;
	while (h) {
		next = h->next; /* httpd_expire may free h (abort -> closed), never another */
		if (now - h->last_ns >= a->idle_ns)
			httpd_expire(ctx, h, now);
		h = next;
	}
}

/* ipk_node_run with an idle sweep every HTTPD_SWEEP_NS. */
static int httpd_run(struct ipk_node *n, struct httpd_app *a, volatile int *stop)
{
	uint64_t next_sweep = 0;
	while (!*stop) {
		int rc = ipk_node_poll(n, 100);
		uint64_t now = ipk_node_now(n);
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN)
			return rc;
		if (a->idle_ns && now >= next_sweep) {
			httpd_sweep(ipk_node_ctx(n), a, now);
			next_sweep = now + HTTPD_SWEEP_NS;
		}
	}
	return 0;
}

static const struct ipk_ops httpd_events = {
	.tcp_accepted = httpd_accepted,
	.tcp_payload = httpd_payload,
	.tcp_acked = httpd_acked,
	.tcp_closed = httpd_closed,
};

/* The window we advertise never exceeds what the input buffer can hold. */
static void httpd_tweak(struct ipk_config *c, void *app)
{
	(void)app;
	c->tcp_rcvbuf = HTTPD_INBUF;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: ipkit-httpd --io SPEC --ip A.B.C.D/N [options]\n"
	           "HTTP/1.1 keep-alive server: a fixed body, or files from a directory.\n\n"
	           "  --port N         TCP port (default 80)\n"
	           "  --size N[k|M|G]  body size for every path (default 1k; ignored with --root)\n"
	           "  --root DIR       serve files under DIR (/ serves DIR/index.html)\n"
	           "  --idle-timeout S end a connection that makes no progress for S seconds\n"
	           "                   (idle, unfinished request: 408, unread response;\n"
	           "                   default 60, 0 = never)\n%s",
	        app_common_help);
}

int main(int argc, char **argv)
{
	static struct httpd_app a;
	struct app_opts o;
	struct ipk_node *n;
	volatile int *stop;
	int i, rc;
	uint32_t k;

	app_opts_default(&o);
	a.port_be = ipk_htons(80);
	a.body_size = 1024;
	a.idle_ns = 60ull * 1000000000ull;
	for (i = 1; i < argc; i++) {
		const char *v;
		int r;
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return APP_EXIT_OK;
		}
		if ((r = app_opt(&o, argc, argv, &i)) != 0) {
			if (r < 0)
				return APP_EXIT_USAGE;
			continue;
		}
		if ((r = app_arg("--port", argc, argv, &i, &v)) != 0) {
			long p = r > 0 ? strtol(v, NULL, 10) : 0;
			if (p <= 0 || p > 65535) {
				fprintf(stderr, "ipkit-httpd: bad --port\n");
				return APP_EXIT_USAGE;
			}
			a.port_be = ipk_htons((uint16_t)p);
			continue;
		}
		if ((r = app_arg("--size", argc, argv, &i, &v)) != 0) {
			if (r < 0 || app_parse_size(v, &a.body_size) < 0) {
				fprintf(stderr, "ipkit-httpd: bad --size (e.g. 512, 4k, 1M)\n");
				return APP_EXIT_USAGE;
			}
			continue;
		}
		if ((r = app_arg("--idle-timeout", argc, argv, &i, &v)) != 0) {
			char *e = NULL;
			double secs = r > 0 ? strtod(v, &e) : -1;
			if (r < 0 || !e || *e || !(secs >= 0 && secs <= 86400)) {
				fprintf(stderr, "ipkit-httpd: bad --idle-timeout (seconds, 0..86400)\n");
				return APP_EXIT_USAGE;
			}
			a.idle_ns = (uint64_t)(secs * 1e9);
			continue;
		}
		if ((r = app_arg("--root", argc, argv, &i, &v)) != 0) {
			struct stat st;
			if (r < 0 || stat(v, &st) < 0 || !S_ISDIR(st.st_mode)) {
				fprintf(stderr, "ipkit-httpd: --root: not a directory\n");
				return APP_EXIT_USAGE;
			}
			a.root = v;
			continue;
		}
		fprintf(stderr, "ipkit-httpd: unknown argument '%s' (see --help)\n", argv[i]);
		return APP_EXIT_USAGE;
	}
	for (k = 0; k < HTTPD_PATTERN; k++)
		a.pattern[k] = (uint8_t)("ipkit says hello\n"[k % 17]);
	stop = app_stop_flag();
	n = app_node(&o, &httpd_events, &a, httpd_tweak);
	if (ipk_tcp_listen(ipk_node_ctx(n), a.port_be, 128) < 0) {
		fprintf(stderr, "ipkit-httpd: cannot listen on port %u\n", ipk_ntohs(a.port_be));
		ipk_node_destroy(n);
		return APP_EXIT_SETUP;
	}
	fprintf(stderr, "ipkit-httpd: serving on %s port %u\n", o.io, ipk_ntohs(a.port_be));
	rc = httpd_run(n, &a, stop);
	if (o.verbose) {
		fprintf(stderr, "ipkit-httpd: %llu connections, %llu requests, %llu ended idle\n",
		        (unsigned long long)a.conns, (unsigned long long)a.requests,
		        (unsigned long long)a.idle_closed);
		app_report(n, "ipkit-httpd");
	}
	ipk_node_destroy(n);
	return rc < 0 ? APP_EXIT_FAIL : APP_EXIT_OK;
}
