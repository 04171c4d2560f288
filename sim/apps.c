/* Bulk-transfer and echo applications on top of the node handlers. */
#include "apps.h"

#include <string.h>

/* ------------------------------------------------------------ stream */

/* Word i of the stream: splitmix64 of the seed mixed with i (inlined here: the
 * stream feeds every byte of every bulk transfer, so it is on the sim's hot path). */
static inline uint64_t stream_word(uint64_t seed, uint64_t i)
{
	uint64_t z = (seed ^ (i * 0xd1342543de82ef95ull)) + 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Byte b of word w is bits 8b..8b+7 (little-endian order on every host). */
static inline void stream_put_word(uint8_t *buf, uint64_t w)
{
	uint32_t b;

	for (b = 0; b < 8; b++)
		buf[b] = (uint8_t)(w >> (8 * b));
}

void sim_stream_fill(uint64_t seed, uint64_t pos, uint8_t *buf, uint32_t len)
{
	while (len && (pos & 7)) {
		*buf++ = (uint8_t)(stream_word(seed, pos >> 3) >> (8 * (pos & 7)));
		pos++;
		len--;
	}
	for (; len >= 8; len -= 8, pos += 8, buf += 8)
		stream_put_word(buf, stream_word(seed, pos >> 3));
	for (; len; len--, pos++)
		*buf++ = (uint8_t)(stream_word(seed, pos >> 3) >> (8 * (pos & 7)));
}

void sim_stream_digest(uint64_t seed, uint64_t n, uint8_t out[SHA256_DIGEST_LEN])
{
	uint8_t buf[4096];
	struct sha256 s;
	uint64_t pos = 0;

	sha256_init(&s);
	while (pos < n) {
		uint32_t k = n - pos < sizeof(buf) ? (uint32_t)(n - pos) : (uint32_t)sizeof(buf);
		sim_stream_fill(seed, pos, buf, k);
		sha256_update(&s, buf, k);
		pos += k;
	}
	sha256_final(&s, out);
}

/* ------------------------------------------------------------ bulk */

static struct sim_bulk_conn *slot_get(struct sim_bulk *app)
{
	uint32_t i;

	for (i = 0; i < SIM_BULK_MAXCONN; i++) {
		struct sim_bulk_conn *bc = &app->conns[i];
		if (!bc->in_use) {
			memset(bc, 0, sizeof(*bc));
			bc->in_use = 1;
			bc->app = app;
			sha256_init(&bc->sha);
			bc->t_start = app->node->sim->now;
			return bc;
		}
	}
	return NULL;
}

/* Queue as much of the stream as the send buffer takes; FIN after the last byte. */
static void bulk_pump(struct sim_bulk_conn *bc)
{
	struct sim_bulk *app = bc->app;
	struct sim_node *n = app->node;
	uint8_t buf[16384];

	while (bc->c && bc->pos < bc->total) {
		uint64_t left = bc->total - bc->pos;
		uint32_t want = app->write_chunk < sizeof(buf) ? app->write_chunk : sizeof(buf);
		int w;

		uint32_t room = ipk_tcp_sndbuf_free(bc->c);

		if (left < want)
			want = (uint32_t)left;
		/* the write takes no more than the room: fill only that much */
		if (room < want)
			want = room;
		if (want == 0)
			return;
		sim_stream_fill(app->stream_seed, bc->pos, buf, want);
		w = ipk_tcp_write(n->ctx, bc->c, buf, want, n->sim->now);
		if (w <= 0)
			return;
		if (!app->no_tx_digest)
			sha256_update(&bc->sha, buf, (uint32_t)w);
		bc->pos += (uint32_t)w;
		app->tx_bytes += (uint32_t)w;
	}
	if (bc->c && !bc->fin_sent && bc->pos == bc->total) {
		bc->fin_sent = 1;
		sha256_final(&bc->sha, bc->digest);
		bc->have_digest = 1;
		ipk_tcp_close(n->ctx, bc->c, n->sim->now);
	}
}

static void *bulk_accepted(struct sim_node *n, struct ipk_conn *c, void *arg)
{
	struct sim_bulk *app = (struct sim_bulk *)arg;
	struct sim_bulk_conn *bc = slot_get(app);

	if (!bc) {
		app->no_slot++;
		ipk_tcp_abort(n->ctx, c, n->sim->now);
		return NULL;
	}
	app->accepted++;
	bc->c = c;
	bc->server = 1;
	bc->connected = 1;
	bc->t_connected = n->sim->now;
	bc->total = app->serve_bytes;
	bulk_pump(bc);
	return bc;
}

static void bulk_connected(struct sim_node *n, struct ipk_conn *c, void *user, void *arg)
{
	struct sim_bulk_conn *bc = (struct sim_bulk_conn *)user;

	(void)c;
	(void)arg;
	if (!bc)
		return;
	bc->connected = 1;
	bc->t_connected = n->sim->now;
	bc->app->connected++;
}

static void bulk_eof(struct sim_node *n, struct sim_bulk_conn *bc)
{
	struct sim_bulk *app = bc->app;

	bc->eof = 1;
	bc->t_eof = n->sim->now;
	if (bc->server)
		return; /* the server closes when its stream is queued */
	sha256_final(&bc->sha, bc->digest);
	bc->have_digest = 1;
	if (app->expect_bytes || app->expect_seed) {
		if (bc->pos == app->expect_bytes &&
		    memcmp(bc->digest, app->expect_digest, SHA256_DIGEST_LEN) == 0)
			app->ok_transfers++;
		else
			app->bad_transfers++;
	}
	if (bc->c)
		ipk_tcp_close(n->ctx, bc->c, n->sim->now);
}

static void bulk_payload(struct sim_node *n, struct ipk_conn *c, void *user, void *pkt,
                         uint32_t off, uint32_t len, void *arg)
{
	struct sim_bulk_conn *bc = (struct sim_bulk_conn *)user;

	(void)arg;
	if (!pkt) {
		if (bc && !bc->eof)
			bulk_eof(n, bc);
		return;
	}
	if (bc && !bc->server) {
		sha256_update(&bc->sha, sim_pkt_data((struct sim_pkt *)pkt) + off, len);
		bc->pos += len;
	}
	if (bc)
		bc->app->rx_bytes += len;
	ipk_tcp_recved(n->ctx, c, len, n->sim->now);
}

static void bulk_acked(struct sim_node *n, struct ipk_conn *c, void *user, uint32_t bytes,
                       void *arg)
{
	struct sim_bulk_conn *bc = (struct sim_bulk_conn *)user;

	(void)n;
	(void)c;
	(void)bytes;
	(void)arg;
	if (bc && bc->server)
		bulk_pump(bc);
}

static void bulk_closed(struct sim_node *n, struct ipk_conn *c, void *user,
                        enum ipk_close_reason why, void *arg)
{
	struct sim_bulk_conn *bc = (struct sim_bulk_conn *)user;
	struct sim_bulk *app = (struct sim_bulk *)arg;

	(void)c;
	if (!bc)
		return;
	bc->c = NULL;
	bc->closed = 1;
	bc->why = why;
	bc->t_closed = n->sim->now;
	app->closed++;
	if (why != IPK_CLOSE_NORMAL)
		app->failed++;
	if (app->on_closed)
		app->on_closed(app, bc);
	if (app->recycle)
		bc->in_use = 0;
}

int sim_bulk_init(struct sim_bulk *app, struct sim_node *n, uint16_t port_be,
                  uint64_t serve_bytes, uint64_t stream_seed)
{
	struct sim_handlers h;

	memset(app, 0, sizeof(*app));
	app->node = n;
	app->port_be = port_be;
	app->serve_bytes = serve_bytes;
	app->stream_seed = stream_seed;
	app->write_chunk = 16384;
	memset(&h, 0, sizeof(h));
	h.tcp_accepted = bulk_accepted;
	h.tcp_connected = bulk_connected;
	h.tcp_payload = bulk_payload;
	h.tcp_acked = bulk_acked;
	h.tcp_closed = bulk_closed;
	sim_node_set_handlers(n, &h, app);
	if (port_be) {
		int r = ipk_tcp_listen(n->ctx, port_be, 64);
		if (r < 0)
			return r;
		sim_node_kick(n);
	}
	return 0;
}

void sim_bulk_expect(struct sim_bulk *app, uint64_t bytes, uint64_t seed)
{
	app->expect_bytes = bytes;
	app->expect_seed = seed;
	sim_stream_digest(seed, bytes, app->expect_digest);
}

int sim_bulk_connect(struct sim_bulk *app, uint32_t peer_ip4_be, uint16_t port_be,
                     struct sim_bulk_conn **out)
{
	struct ipk_addr peer;

	/* ipk_tcp_connect_addr hands an IPv4 address straight to ipk_tcp_connect */
	memset(&peer, 0, sizeof(peer));
	peer.family = IPK_AF_INET;
	memcpy(peer.a, &peer_ip4_be, 4);
	return sim_bulk_connect_addr(app, &peer, port_be, out);
}

int sim_bulk_connect_addr(struct sim_bulk *app, const struct ipk_addr *peer, uint16_t port_be,
                          struct sim_bulk_conn **out)
{
	struct sim_node *n = app->node;
	struct sim_bulk_conn *bc = slot_get(app);
	int r;

	if (out)
		*out = NULL;
	if (!bc)
		return IPK_ENOMEM;
	r = ipk_tcp_connect_addr(n->ctx, peer, port_be, 0, bc, &bc->c, n->sim->now);
	if (r < 0) {
		bc->in_use = 0;
		return r;
	}
	sim_node_kick(n);
	if (out)
		*out = bc;
	return 0;
}

uint32_t sim_bulk_live(const struct sim_bulk *app)
{
	uint32_t i, k = 0;

	for (i = 0; i < SIM_BULK_MAXCONN; i++)
		if (app->conns[i].in_use && app->conns[i].c)
			k++;
	return k;
}

/* ------------------------------------------------------------ echo */

static void *echo_accepted(struct sim_node *n, struct ipk_conn *c, void *arg)
{
	struct sim_echo *e = (struct sim_echo *)arg;

	(void)n;
	(void)c;
	e->tcp_accepted++;
	return e;
}

/* Echo what fits in the send buffer; a shortfall is counted (tests keep requests
 * well below the buffer, so it means the engine refused room it advertised). */
static void echo_payload(struct sim_node *n, struct ipk_conn *c, void *user, void *pkt,
                         uint32_t off, uint32_t len, void *arg)
{
	struct sim_echo *e = (struct sim_echo *)arg;
	int w;

	(void)user;
	if (!pkt) {
		ipk_tcp_close(n->ctx, c, n->sim->now);
		return;
	}
	w = ipk_tcp_write(n->ctx, c, sim_pkt_data((struct sim_pkt *)pkt) + off, len, n->sim->now);
	if (w > 0)
		e->tcp_bytes += (uint32_t)w;
	if (w < 0 || (uint32_t)w < len)
		e->tcp_short++;
	ipk_tcp_recved(n->ctx, c, len, n->sim->now);
}

static void echo_closed(struct sim_node *n, struct ipk_conn *c, void *user,
                        enum ipk_close_reason why, void *arg)
{
	(void)n;
	(void)c;
	(void)user;
	(void)why;
	((struct sim_echo *)arg)->tcp_closed++;
}

static void echo_udp(struct sim_node *n, const struct ipk_tuple *t, void *pkt, uint32_t off,
                     uint32_t len, void *arg)
{
	struct sim_echo *e = (struct sim_echo *)arg;
	uint8_t buf[65536];
	uint32_t got = ipk_pkt_copy(n->ctx, pkt, off, buf, len < sizeof(buf) ? len : sizeof(buf));

	e->udp_datagrams++;
	e->udp_bytes += got;
	if (ipk_udp_sendto(n->ctx, t->local_port_be, t->peer_ip4_be, t->peer_port_be, buf, got,
	                   n->sim->now) < 0)
		e->udp_send_fail++;
}

int sim_echo_init(struct sim_echo *e, struct sim_node *n, uint16_t tcp_port_be,
                  uint16_t udp_port_be)
{
	struct sim_handlers h;
	int r;

	memset(e, 0, sizeof(*e));
	e->node = n;
	e->tcp_port_be = tcp_port_be;
	e->udp_port_be = udp_port_be;
	memset(&h, 0, sizeof(h));
	h.tcp_accepted = echo_accepted;
	h.tcp_payload = echo_payload;
	h.tcp_closed = echo_closed;
	h.udp_recv = echo_udp;
	sim_node_set_handlers(n, &h, e);
	if (tcp_port_be && (r = ipk_tcp_listen(n->ctx, tcp_port_be, 64)) < 0)
		return r;
	if (udp_port_be && (r = ipk_udp_bind(n->ctx, udp_port_be)) < 0)
		return r;
	sim_node_kick(n);
	return 0;
}
