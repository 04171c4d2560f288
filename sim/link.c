/*
 * Point-to-point links: a drop-tail transmit queue drained at the link rate, a
 * propagation delay, and impairments drawn from the link's own generator. Ports:
 * the NIC end of a link (gather, offload, MTU check) and raw injection points.
 */
#include "sim_int.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* A frame in flight: the simulator's copy, freed on arrival. */
struct sim_frame {
	struct sim_port *dst;
	int dir;
	uint32_t len;
	uint8_t data[];
};

/* room for the largest TSO super-frame (64 KiB payload) plus headers */
#define SIM_SCRATCH (65536u + 256u)

void sim_link_cfg_default(struct sim_link_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->rate_bps = 100000000ull;
	c->delay_ns = SIM_MS(5);
	c->queue_bytes = 1000000u;
	c->reorder_delay_ns = SIM_MS(1);
	c->ge_loss_bad = 1.0;
}

/* ------------------------------------------------------------ ports */

int sim_port_init(struct sim_port *p, struct sim *s, uint8_t linktype, uint16_t mtu,
                  uint32_t caps)
{
	memset(p, 0, sizeof(*p));
	p->sim = s;
	p->linktype = linktype;
	p->mtu = mtu;
	p->caps = caps;
	p->scratch_size = SIM_SCRATCH;
	p->scratch = (uint8_t *)malloc(2 * (size_t)SIM_SCRATCH);
	return p->scratch ? 0 : -1;
}

void sim_port_fini(struct sim_port *p)
{
	free(p->scratch);
	p->scratch = NULL;
}

static uint32_t port_l2_len(const struct sim_port *p)
{
	return p->linktype == IPK_LINK_ETH ? 14u : 0u;
}

struct sim_port *sim_port_raw(struct sim *s, uint8_t linktype, uint16_t mtu,
                              sim_raw_rx_fn rx, void *arg)
{
	struct sim_port *p = (struct sim_port *)malloc(sizeof(*p));

	if (!p)
		return NULL;
	if (sim_port_init(p, s, linktype, mtu, 0) ||
	    sim_grow((void **)&s->ports, &s->capports, s->nports + 1, sizeof(*s->ports))) {
		sim_port_fini(p);
		free(p);
		return NULL;
	}
	p->raw_rx = rx;
	p->raw_arg = arg;
	s->ports[s->nports++] = p;
	return p;
}

int sim_port_inject(struct sim_port *p, const uint8_t *frame, uint32_t len)
{
	p->st.tx_frames++;
	if (!p->link) {
		p->st.tx_unattached++;
		return -1;
	}
	sim_link_enter(p, frame, len);
	return 0;
}

/* A finished frame leaves the NIC: a real NIC refuses frames above its MTU. */
static void port_emit(const uint8_t *f, uint32_t len, void *arg)
{
	struct sim_port *p = (struct sim_port *)arg;

	if (len > port_l2_len(p) + p->mtu) {
		p->st.tx_oversize++;
		return;
	}
	sim_link_enter(p, f, len);
}

/* Copy a chain into the gather buffer; returns bytes or 0 when it does not fit. */
static uint32_t port_gather(struct sim_port *p, const struct sim_pkt *k)
{
	uint32_t at = 0;

	for (; k; k = k->next) {
		if (k->len > p->scratch_size - at)
			return 0;
		memcpy(p->scratch + at, sim_pkt_data((struct sim_pkt *)k), k->len);
		at += k->len;
	}
	return at;
}

void sim_port_tx_pkt(struct sim_port *p, struct sim_pkt *k)
{
	struct ipk_tx_meta meta = k->meta;
	uint32_t len;

	p->st.tx_frames++;
	if (k->next) {
		p->st.tx_linearized++;
		if (!(p->caps & IPK_CAP_SG))
			p->st.tx_chain_no_sg++;
	}
	len = port_gather(p, k);
	sim_pkt_free_chain(k);
	if (!p->link) {
		p->st.tx_unattached++;
		return;
	}
	if (len == 0) {
		p->st.tx_oversize++;
		return;
	}
	if (meta.flags == 0) {
		port_emit(p->scratch, len, p);
		return;
	}
	if (sim_nic_tx(p->scratch, len, &meta, p->scratch + p->scratch_size, p->scratch_size,
	               port_emit, p, &p->st) < 0)
		p->st.tx_bad_meta++;
}

/* ------------------------------------------------------------ links */

struct sim_link *sim_link_create(struct sim *s, struct sim_port *a, struct sim_port *b,
                                 const struct sim_link_cfg *cfg)
{
	struct sim_link *l;

	if (!a || !b || a == b || a->link || b->link)
		return NULL;
	if (sim_grow((void **)&s->links, &s->caplinks, s->nlinks + 1, sizeof(*s->links)))
		return NULL;
	l = (struct sim_link *)calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->sim = s;
	l->index = s->nlinks;
	l->port[0] = a;
	l->port[1] = b;
	l->cfg[0] = l->cfg[1] = *cfg;
	/* per-link stream: independent of node draws and of other links */
	sim_rng_seed(&l->rng, s->seed ^ (0x4c494e4b00000000ull + l->index));
	a->link = b->link = l;
	a->side = 0;
	b->side = 1;
	s->links[s->nlinks++] = l;
	return l;
}

void sim_link_set_cfg(struct sim_link *l, int dir, const struct sim_link_cfg *cfg)
{
	l->cfg[dir & 1] = *cfg;
}

void sim_link_destroy(struct sim_link *l)
{
	if (l->pcap)
		fclose(l->pcap);
	free(l);
}

void sim_frame_free(void *frame)
{
	free(frame);
}

void sim_link_totals(const struct sim_link *l, struct sim_link_stats *o)
{
	const struct sim_link_stats *a = &l->st[0], *b = &l->st[1];
	int i;

	o->sent = a->sent + b->sent;
	o->sent_bytes = a->sent_bytes + b->sent_bytes;
	o->delivered = a->delivered + b->delivered;
	o->delivered_bytes = a->delivered_bytes + b->delivered_bytes;
	for (i = 0; i < SIM_LDROP__COUNT; i++)
		o->drop[i] = a->drop[i] + b->drop[i];
	o->duplicated = a->duplicated + b->duplicated;
	o->reordered = a->reordered + b->reordered;
	o->corrupted = a->corrupted + b->corrupted;
}

/* Bytes still waiting to be serialized in direction d (fluid model of the queue). */
static uint64_t link_backlog(const struct sim_link *l, int d, uint64_t now)
{
	uint64_t rate = l->cfg[d].rate_bps;

	if (rate == 0 || l->busy_until[d] <= now)
		return 0;
	/* rate in kbit/s keeps the product in 64 bits for hours of backlog at 100 Gbit/s */
	return (l->busy_until[d] - now) * (rate / 1000u) / 8000000u;
}

static uint64_t ser_ns(uint64_t rate, uint32_t len)
{
	if (rate == 0)
		return 0;
	return ((uint64_t)len * 8u * 1000000000u + rate - 1) / rate;
}

/* Loss verdict for one frame; advances the Gilbert-Elliott chain. */
static int link_lose(struct sim_link *l, int d)
{
	const struct sim_link_cfg *c = &l->cfg[d];

	if (c->ge_p_gb > 0.0) {
		if (!l->ge_bad[d])
			l->ge_bad[d] = sim_rng_chance(&l->rng, c->ge_p_gb);
		else
			l->ge_bad[d] = !sim_rng_chance(&l->rng, c->ge_p_bg);
		if (l->ge_bad[d] && sim_rng_chance(&l->rng, c->ge_loss_bad)) {
			l->st[d].drop[SIM_LDROP_BURST]++;
			return 1;
		}
	}
	if (sim_rng_chance(&l->rng, c->loss)) {
		l->st[d].drop[SIM_LDROP_LOSS]++;
		return 1;
	}
	return 0;
}

static void pcap_put(struct sim_link *l, const uint8_t *b, uint32_t n)
{
	sha256_update(&l->pcap_sha, b, n);
	l->pcap_bytes += n;
	if (l->pcap)
		fwrite(b, 1, n, l->pcap);
}

static void pcap_frame(struct sim_link *l, uint64_t t, const uint8_t *f, uint32_t len)
{
	uint8_t hdr[16];

	if (!l->pcap_on)
		return;
	pcap_put(l, hdr, sim_pcap_record_header(hdr, t, len, len));
	pcap_put(l, f, len);
}

static int link_schedule(struct sim_link *l, int d, uint64_t t, const uint8_t *f,
                         uint32_t len, int corrupt)
{
	struct sim_frame *fr = (struct sim_frame *)malloc(offsetof(struct sim_frame, data) + len);
	uint32_t l2 = port_l2_len(l->port[d]);

	if (!fr)
		return -1;
	fr->dst = l->port[!d];
	fr->dir = d;
	fr->len = len;
	memcpy(fr->data, f, len);
	/* Damage the Ethernet FCS would miss is damage inside the IP packet: the
	 * engine's IPv4/TCP/UDP/ICMP checksums must catch it (RFC 1071). */
	if (corrupt && len > l2) {
		uint32_t at = l2 + (uint32_t)sim_rng_below(&l->rng, len - l2);
		fr->data[at] ^= (uint8_t)(1u << sim_rng_below(&l->rng, 8));
		l->st[d].corrupted++;
	}
	if (sim_ev_push(l->sim, t, SIM_EV_ARRIVE, 0, fr, NULL)) {
		free(fr);
		return -1;
	}
	return 0;
}

void sim_link_enter(struct sim_port *p, const uint8_t *f, uint32_t len)
{
	struct sim_link *l = p->link;
	int d = p->side;
	const struct sim_link_cfg *c = &l->cfg[d];
	uint64_t now = l->sim->now, start, arrive;

	l->st[d].sent++;
	l->st[d].sent_bytes += len;
	if (c->queue_bytes && link_backlog(l, d, now) + len > c->queue_bytes) {
		l->st[d].drop[SIM_LDROP_QUEUE]++;
		return;
	}
	start = l->busy_until[d] > now ? l->busy_until[d] : now;
	l->busy_until[d] = start + ser_ns(c->rate_bps, len);
	arrive = l->busy_until[d] + c->delay_ns;
	pcap_frame(l, now, f, len);
	if (link_lose(l, d))
		return;
	if (sim_rng_chance(&l->rng, c->reorder)) {
		arrive += c->reorder_delay_ns;
		l->st[d].reordered++;
	}
	link_schedule(l, d, arrive, f, len, sim_rng_chance(&l->rng, c->corrupt));
	if (sim_rng_chance(&l->rng, c->dup)) {
		l->st[d].duplicated++;
		link_schedule(l, d, arrive, f, len, 0);
	}
}

void sim_link_arrive(struct sim *s, void *frame)
{
	struct sim_frame *fr = (struct sim_frame *)frame;
	struct sim_port *p = fr->dst;

	(void)s;
	p->link->st[fr->dir].delivered++;
	p->link->st[fr->dir].delivered_bytes += fr->len;
	if (p->node)
		sim_node_rx(p->node, fr->data, fr->len);
	else if (p->raw_rx)
		p->raw_rx(p, fr->data, fr->len, p->raw_arg);
	free(fr);
}

/* ------------------------------------------------------------ pcap */

int sim_link_pcap(struct sim_link *l, const char *path)
{
	uint8_t hdr[24];
	uint32_t lt = l->port[0]->linktype == IPK_LINK_ETH ? SIM_LINKTYPE_ETHERNET
	                                                   : SIM_LINKTYPE_RAW;

	if (l->pcap_on)
		return -1;
	if (path) {
		l->pcap = fopen(path, "wb");
		if (!l->pcap)
			return -1;
	}
	l->pcap_on = 1;
	sha256_init(&l->pcap_sha);
	pcap_put(l, hdr, sim_pcap_file_header(hdr, lt, 262144u));
	return 0;
}

void sim_link_pcap_digest(const struct sim_link *l, uint8_t out[SHA256_DIGEST_LEN])
{
	struct sha256 copy = l->pcap_sha;

	if (l->pcap)
		fflush(l->pcap);
	sha256_final(&copy, out);
}
