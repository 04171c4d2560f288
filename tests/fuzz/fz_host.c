/* The resettable engine of the fuzz targets (see fz_host.h). */
#include "fz_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

const uint8_t fz_mac_us[6] = {2, 0, 0, 0, 0, 1};
const uint8_t fz_mac_peer[6] = {2, 0, 0, 0, 0, 2};

void fz_fail(const char *who, const char *what)
{
	fprintf(stderr, "%s: invariant broken: %s\n", who, what);
	abort();
}

static struct fz_host *host_of(void *opaque) { return (struct fz_host *)opaque; }

static void op_tx(void *pkt, void *opaque)
{
	struct fz_host *h = host_of(opaque);
	struct sim_pkt *k = (struct sim_pkt *)pkt, *p;
	uint32_t n = 0;

	for (p = k; p; p = p->next) {
		uint32_t take = p->len;
		if (take > FZ_FRAME_MAX - n)
			take = FZ_FRAME_MAX - n;
		memcpy(h->tx + n, sim_pkt_data(p), take);
		n += take;
	}
	h->tx_len = n;
	h->ev.tx_frames++;
	sim_pkt_free_chain(k);
	if (h->on_tx)
		h->on_tx(h, h->tx, n);
}

/* xorshift32: deterministic, and part of the snapshot */
static uint32_t op_random(void *opaque)
{
	struct fz_host *h = host_of(opaque);
	uint32_t x = h->rng;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	h->rng = x;
	return x;
}

static void op_payload(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *pkt,
                       uint32_t off, uint32_t len, void *opaque)
{
	struct fz_host *h = host_of(opaque);

	(void)ctx; (void)c; (void)user; (void)off;
	if (!pkt && len == 0)
		h->ev.tcp_fin++;
	h->ev.tcp_payload_bytes += len;
}

static void op_closed(struct ipk_ctx *ctx, struct ipk_conn *c, void *user,
                      enum ipk_close_reason why, void *opaque)
{
	struct fz_host *h = host_of(opaque);

	uint32_t i;

	(void)ctx; (void)user;
	h->ev.tcp_closed++;
	h->ev.last_close_reason = (int)why;
	if (c == h->watch)
		h->watch_closed = 1;
	for (i = 0; i < h->naccepted; i++)
		if (h->accepted[i] == c) {
			h->accepted[i] = h->accepted[--h->naccepted];
			break;
		}
}

static void *op_accepted(struct ipk_ctx *ctx, struct ipk_conn *c, void *opaque)
{
	struct fz_host *h = host_of(opaque);

	(void)ctx;
	h->ev.tcp_accepted++;
	if (h->naccepted < sizeof(h->accepted) / sizeof(h->accepted[0]))
		h->accepted[h->naccepted++] = c;
	else
		fz_fail("fz_host", "more open passive connections than the pool holds");
	return NULL;
}

static void op_connected(struct ipk_ctx *ctx, struct ipk_conn *c, void *user, void *opaque)
{
	(void)ctx; (void)c; (void)user;
	host_of(opaque)->ev.tcp_connected++;
}

static void op_udp_recv(struct ipk_ctx *ctx, const struct ipk_tuple *t, void *pkt, uint32_t off,
                        uint32_t len, void *opaque)
{
	struct fz_host *h = host_of(opaque);

	(void)t;
	h->ev.udp_dgrams++;
	h->ev.udp_bytes += len;
	h->udp_len = ipk_pkt_copy(ctx, pkt, off, h->udp_data,
	                          len < sizeof(h->udp_data) ? len : (uint32_t)sizeof(h->udp_data));
	if (h->udp_len != len)
		fz_fail("fz_host", "udp_recv: the packet holds fewer bytes than its length");
	if (h->on_udp)
		h->on_udp(h, h->udp_data, h->udp_len);
}

static void op_echo(struct ipk_ctx *ctx, uint32_t from, uint16_t id, uint16_t seq, uint32_t len,
                    void *opaque)
{
	(void)ctx; (void)from; (void)id; (void)seq; (void)len;
	host_of(opaque)->ev.echo_replies++;
}

static void op_learned(uint32_t ip, const uint8_t mac[6], void *opaque)
{
	struct fz_host *h = host_of(opaque);

	(void)mac;
	h->ev.arp_learned++;
	h->ev.arp_learned_ip_be = ip;
}

void fz_host_config(struct ipk_config *cfg)
{
	ipk_config_default(cfg);
	memcpy(cfg->mac, fz_mac_us, 6);
	cfg->ip4_be = FZ_IP_US;
	cfg->netmask_be = IPK_IP4(255, 255, 255, 0);
	cfg->conn_hash_buckets = 16;
	cfg->max_listeners = 2;
	cfg->max_udp_binds = 2;
	cfg->arp_entries = 8;
	cfg->frag_slots = 4;
	cfg->tcp_sndbuf = 64 * 1024;
	cfg->tcp_rcvbuf = 64 * 1024;
}

int fz_host_init(struct fz_host *h, const struct ipk_config *cfg, uint32_t nconns,
                 uint32_t npbs, uint32_t npkts)
{
	memset(h, 0, sizeof(*h));
	h->cfg = *cfg;
	h->cfg.opaque = h;
	h->rng = 0x12345678u;
	sim_pkt_ops(&h->ops);
	h->ops.tx = op_tx;
	h->ops.random = op_random;
	h->ops.tcp_payload = op_payload;
	h->ops.tcp_closed = op_closed;
	h->ops.tcp_accepted = op_accepted;
	h->ops.tcp_connected = op_connected;
	h->ops.udp_recv = op_udp_recv;
	h->ops.icmp_echo_reply = op_echo;
	h->ops.arp_learned = op_learned;
	h->mem_size = ipk_ctx_size(&h->cfg);
	h->nconns = nconns;
	h->npbs = npbs;
	h->pool = sim_pool_create(npkts, h->cfg.pkt_buf_size, npkts * 2);
	h->mem = aligned_alloc(64, (h->mem_size + 63) & ~(size_t)63);
	h->conns = aligned_alloc(64, ((size_t)nconns * ipk_conn_size() + 63) & ~(size_t)63);
	h->pbs = aligned_alloc(64, ((size_t)npbs * ipk_pb_size() + 63) & ~(size_t)63);
	if (!h->mem_size || !h->pool || !h->mem || !h->conns || !h->pbs)
		return -1;
	h->ctx = ipk_ctx_init(h->mem, h->mem_size, &h->cfg, &h->ops);
	if (!h->ctx || ipk_add_conns(h->ctx, h->conns, nconns) < 0 ||
	    ipk_add_pbs(h->ctx, h->pbs, npbs) < 0)
		return -1;
	return 0;
}

static void *dup_of(const void *p, size_t n)
{
	void *d = malloc(n ? n : 1);

	if (!d)
		abort(); /* harness memory, not input: out of memory at start-up */
	memcpy(d, p, n);
	return d;
}

void fz_host_snapshot(struct fz_host *h)
{
	struct sim_pool *p = h->pool;
	uint32_t i, n = 0;

	h->snap.mem = dup_of(h->mem, h->mem_size);
	h->snap.conns = dup_of(h->conns, (size_t)h->nconns * ipk_conn_size());
	h->snap.pbs = dup_of(h->pbs, (size_t)h->npbs * ipk_pb_size());
	h->snap.bufs = dup_of(p->bufs, (size_t)p->nbufs * sizeof(*p->bufs));
	h->snap.descs = dup_of(p->descs, (size_t)p->ndescs * sizeof(*p->descs));
	h->snap.pool = *p;
	h->snap.live = (uint32_t *)malloc(sizeof(uint32_t) * p->nbufs);
	for (i = 0; i < p->nbufs; i++)
		if (p->bufs[i].refcnt)
			h->snap.live[n++] = i;
	h->snap.nlive = n;
	h->snap.live_bytes = (uint8_t *)malloc((size_t)(n ? n : 1) * p->buf_size);
	for (i = 0; i < n; i++)
		memcpy(h->snap.live_bytes + (size_t)i * p->buf_size, p->bufs[h->snap.live[i]].mem,
		       p->buf_size);
	h->snap.now = h->now;
	h->snap.rng = h->rng;
	h->snap.conns_free = ipk_conns_free(h->ctx);
	h->snap.pbs_free = ipk_pbs_free(h->ctx);
}

void fz_host_restore(struct fz_host *h)
{
	struct sim_pool *p = h->pool;
	uint32_t i;

	memcpy(h->mem, h->snap.mem, h->mem_size);
	memcpy(h->conns, h->snap.conns, (size_t)h->nconns * ipk_conn_size());
	memcpy(h->pbs, h->snap.pbs, (size_t)h->npbs * ipk_pb_size());
	memcpy(p->bufs, h->snap.bufs, (size_t)p->nbufs * sizeof(*p->bufs));
	memcpy(p->descs, h->snap.descs, (size_t)p->ndescs * sizeof(*p->descs));
	*p = h->snap.pool;
	for (i = 0; i < h->snap.nlive; i++)
		memcpy(p->bufs[h->snap.live[i]].mem, h->snap.live_bytes + (size_t)i * p->buf_size,
		       p->buf_size);
	h->now = h->snap.now;
	h->rng = h->snap.rng;
	h->watch_closed = 0;
	h->naccepted = 0;
	memset(&h->ev, 0, sizeof(h->ev));
	h->tx_len = 0;
	h->udp_len = 0;
}

void fz_host_rx(struct fz_host *h, const uint8_t *f, uint32_t len)
{
	struct sim_pkt *k = sim_pkt_from(h->pool, f, len);
	void *pkts[1];

	if (!k)
		return;
	pkts[0] = k;
	ipk_run(h->ctx, pkts, 1, h->now);
}

void fz_host_abort_accepted(struct fz_host *h)
{
	uint32_t guard = 0;

	/* ipk_tcp_abort calls tcp_closed, which takes the handle off the list */
	while (h->naccepted && guard++ < 64)
		ipk_tcp_abort(h->ctx, h->accepted[h->naccepted - 1], h->now);
	if (h->naccepted)
		fz_fail("fz_host", "ipk_tcp_abort did not call tcp_closed");
}

void fz_host_advance(struct fz_host *h, uint64_t ns)
{
	h->now += ns;
	ipk_run(h->ctx, NULL, 0, h->now);
}

void fz_host_check(const struct fz_host *h, const char *who)
{
	const struct sim_pool *p = h->pool;

	if (p->descs_out > p->ndescs || p->bufs_out > p->nbufs || p->bufs_out > p->descs_out)
		fz_fail(who, "packet pool counters out of range");
	if (ipk_conns_free(h->ctx) > h->nconns || ipk_pbs_free(h->ctx) > h->npbs)
		fz_fail(who, "connection / pb pool counters out of range");
}

void fz_host_check_at_start(const struct fz_host *h, const char *who, uint32_t conns_released)
{
	fz_host_check(h, who);
	if (h->pool->descs_out != h->snap.pool.descs_out || h->pool->bufs_out != h->snap.pool.bufs_out)
		fz_fail(who, "packets not returned to the pool");
	if (ipk_conns_free(h->ctx) != h->snap.conns_free + conns_released)
		fz_fail(who, "connections not returned to the pool");
	if (ipk_pbs_free(h->ctx) != h->snap.pbs_free)
		fz_fail(who, "pb descriptors not returned to the pool");
}

/* ------------------------------------------------------------ frames */

void fz_fix_csums(uint8_t *f, uint32_t len)
{
	uint32_t ihl, tot, l4len, at;
	uint8_t *ip, *l4;
	int odd = 0;

	if (len < 34 || ipk_rd16(f + 12) != 0x0800 || (f[14] >> 4) != 4)
		return;
	ihl = (uint32_t)(f[14] & 15) * 4;
	tot = ipk_rd16(f + 16);
	if (ihl < 20 || tot < ihl || tot > len - 14)
		return;
	ip = f + 14;
	l4 = ip + ihl;
	l4len = tot - ihl;
	ipk_wr16(ip + 10, 0);
	ipk_wr16(ip + 10, ipk_csum_fold(ipk_csum_add(0, ip, ihl, &odd)));
	if (ipk_rd16(ip + 6) & 0x3fff)
		return; /* fragment: the datagram's checksum spans pieces */
	if (ip[9] == 6 && l4len >= 20)
		at = 16;
	else if (ip[9] == 17 && l4len >= 8)
		at = 6;
	else if (ip[9] == 1 && l4len >= 4)
		at = 2;
	else
		return;
	ipk_wr16(l4 + at, 0);
	odd = 0;
	if (ip[9] == 1)
		ipk_wr16(l4 + at, ipk_csum_fold(ipk_csum_add(0, l4, l4len, &odd)));
	else
		ipk_wr16(l4 + at, ipk_csum_l4(ipk_rdbe32(ip + 12), ipk_rdbe32(ip + 16), ip[9], l4,
		                              l4len));
}

uint32_t fz_eth_ip(uint8_t *f, uint8_t proto, uint32_t l4len, uint16_t frag, uint16_t id)
{
	uint8_t *ip = f + 14;

	memcpy(f, fz_mac_us, 6);
	memcpy(f + 6, fz_mac_peer, 6);
	ipk_wr16(f + 12, 0x0800);
	memset(ip, 0, 20);
	ip[0] = 0x45;
	ipk_wr16(ip + 2, (uint16_t)(20 + l4len));
	ipk_wr16(ip + 4, id);
	ipk_wr16(ip + 6, frag);
	ip[8] = 64;
	ip[9] = proto;
	ipk_wrbe32(ip + 12, FZ_IP_PEER);
	ipk_wrbe32(ip + 16, FZ_IP_US);
	return 34;
}

int fz_put_file(const char *dir, const char *name, const uint8_t *b, uint32_t len)
{
	char path[1024];
	FILE *fp;
	int ok;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fp = fopen(path, "wb");
	if (!fp)
		return 0;
	ok = fwrite(b, 1, len, fp) == len;
	return fclose(fp) == 0 && ok;
}
