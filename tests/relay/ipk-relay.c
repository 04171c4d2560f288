/*
 * ipk-relay: a seeded impairment relay that bridges Ethernet frames between two
 * interfaces with AF_PACKET sockets, the user-space stand-in for tc netem.
 *
 *   ipk-relay --a DEV --b DEV --seed N [--loss P] [--burst PGB,PBG[,H]]
 *             [--reorder P [--reorder-gap K] [--reorder-us D]] [--dup P]
 *             [--delay-us D] [--rate-mbit R] [--queue N] [--dir a2b|b2a|both]
 *             [--key segment|index] [--log FILE] [--pcap FILE] [--stats-every S]
 *
 * Each direction (a2b: frames received on A and sent on B; b2a the reverse) is
 * impaired independently. Every decision comes from a counter-based generator,
 * hash(seed, direction, key, decision). With --key segment (the default) the key of a
 * TCP/IPv4 frame is the segment's identity and how many times that identity passed
 * before (relay_key.h: relative sequence number and length for data, relative ACK
 * number and SACK blocks for pure ACKs), so the same segment meets the same fate in
 * every run however the frames interleave, and each retransmission an independent one;
 * other frames are keyed by their index i in the direction. With --key index every
 * frame is keyed by i (the relay's first mode: which segment is hit depends on the
 * order frames arrive in). Gilbert-Elliott bursts: in index mode the state steps once
 * per frame. In keyed mode only the first sightings of data segments step it, so
 * bursts hit the same new data every run (a sender sends new data in sequence order);
 * every other frame (retransmissions, ACKs, ARP) is lost independently, keyed, with the
 * chain's average loss rate H * G / (G + B). Stepping the chain with those frames too
 * made it follow their timing, and in a sparse direction (ACKs, retransmissions during
 * a timeout) one burst lasted for seconds: 14 frames in a row on the ACK path, the RTO
 * retransmissions' ACKs lost one after another, a 64 MiB transfer taking 30 s or never
 * ending. Only the time-based parts (release
 * of held frames after D us, delay, rate) depend on the clock.
 *
 * --log FILE writes one line per frame received on an impaired direction:
 *   DIR D REL LEN OCC ID FATE    TCP data: relative seq, payload length, occurrence
 *   DIR A REL NSACK OCC ID FATE  pure ACK: relative ACK number, SACK blocks, occurrence
 *   DIR - I - - - FATE           any other frame (or --key index): its index
 * ID is the identity's 64-bit hash in hex (it tells ACKs with other SACK blocks apart).
 * FATE is pass, drop (random loss) or bdrop (burst loss), with +dup / +reord appended.
 * --pcap FILE writes every frame the relay receives, both directions, as it arrived
 * (before any impairment; the first RELAY_PCAP_SNAP bytes: the headers), so a trace
 * shows what each sender did and when, and the log says what became of it.
 *
 * Per frame, in this order: Gilbert-Elliott burst loss (state change with PGB/PBG,
 * loss with H in the bad state), independent loss P, duplication (the frame is sent
 * twice), reordering (the frame is held back until K later frames went out or D us
 * passed). Frames then pass a FIFO "line" that adds the fixed delay and, with a rate,
 * serialises them at R Mbit/s; a full line drops at its tail (qdrop).
 *
 * The frames must be wire-like: turn off TSO/GSO/GRO and transmit checksum offload on
 * the veths that feed the relay (ethtool -K DEV tx off tso off gso off gro off).
 * Frames bigger than the MTU (GSO super-frames) are dropped and counted (big); frames
 * whose checksum the sender left to offload are forwarded and counted (partial). VLAN
 * tags the kernel strips on receive are not put back; use untagged links.
 *
 * Counters go to stdout as one line on exit (SIGTERM, SIGINT) and every S seconds:
 *   ipk-relay final a2b.seen=N a2b.sent=N ... b2a.seen=N ...
 * Per direction: seen + dup = sent + drop + bdrop + qdrop + big + txerr + left.
 * span_us is the time from the first to the last TCP/IPv4 frame received in the
 * direction (a transfer's duration on the wire, without the programs' start-up).
 * Exit status: 0 after a signal, 1 when the sockets cannot be set up, 2 on bad usage.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "relay_key.h"

#define RELAY_BATCH 32     /* frames per recvmmsg/sendmmsg */
#define RELAY_READS 4      /* batches read per socket per wake-up (fairness) */
#define RELAY_HOLD 64      /* frames held back for reordering, per direction */
#define RELAY_RCVBUF (8 << 20)
#define RELAY_RETRY_NS 100000ull /* back-off after ENOBUFS (no POLLOUT for that) */
#define NS_PER_US 1000ull
#define NS_PER_S 1000000000ull
#define RELAY_PCAP_SNAP 128u     /* bytes of each frame in --pcap: every header, no payload */

enum draw { DRAW_LOSS, DRAW_GE_STEP, DRAW_GE_LOSS, DRAW_DUP, DRAW_REORDER, DRAW__COUNT };

struct impair {
	double loss, dup, reorder;
	double ge_enter, ge_leave, ge_loss; /* Gilbert-Elliott: good->bad, bad->good, loss in bad */
	uint32_t reorder_gap;               /* release after this many later frames (0: time only) */
	uint64_t reorder_ns, delay_ns;
	uint64_t rate_bps;                  /* 0: unlimited */
};

struct counts {
	uint64_t seen, sent, drop, bdrop, reord, dup, qdrop, big, partial, txerr, kdrop;
};

struct frame {
	uint64_t due_ns;  /* line: when it may go; hold: when it must be released */
	uint32_t len;
	uint32_t gap;     /* hold: later frames still to go before release */
	uint8_t *data;
};

/* A FIFO of frame slots with their own storage. */
struct fifo {
	struct frame *f;
	uint32_t cap, head, n;
};

struct dir {
	const char *name;
	int in, out;              /* receive on in, send on out */
	int impaired;
	uint64_t salt;
	uint64_t idx;             /* frames seen: the generator's counter */
	int ge_bad;               /* Gilbert-Elliott state: in the bad state */
	struct rk_occ occ;        /* --key segment: sightings per identity */
	int blocked;              /* out socket full: wait for POLLOUT */
	uint64_t retry_ns;        /* device queue full (ENOBUFS): try again then */
	uint64_t link_free_ns;    /* rate limit: when the last queued frame has left */
	uint64_t tcp_first_ns, tcp_last_ns; /* first and last TCP frame received (span_us) */
	struct fifo line;
	struct frame hold[RELAY_HOLD];
	uint32_t nhold;
	struct counts c;
};

struct relay {
	const char *dev_a, *dev_b;
	uint64_t seed;
	struct impair im;
	uint32_t queue, slot;
	uint64_t stats_ns;
	struct dir d[2];          /* [0] a2b, [1] b2a */
	int keyed;                /* --key segment (1) or index (0) */
	FILE *log;                /* --log: one line per impaired frame */
	FILE *pcap;               /* --pcap: every received frame, as it arrived */
	uint64_t wall_off_ns;     /* CLOCK_REALTIME - CLOCK_MONOTONIC, for pcap times */
	struct rk_flows flows;    /* ISNs, shared: an ACK refers to the other direction's */
	uint8_t *rx_buf;          /* RELAY_BATCH slots for recvmmsg */
};

static volatile sig_atomic_t relay_stop;

static void on_signal(int sig)
{
	(void)sig;
	relay_stop = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ the generator */

/* splitmix64's finaliser: a bijective mix, good enough to make counters look random. */
static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Uniform in [0, 1) for decision `what` about the frame with draw key `key` (its index,
 * or rk_key() of its identity) in direction `d`. */
static double draw(const struct relay *r, const struct dir *d, uint64_t key, enum draw what)
{
	uint64_t x = mix64(mix64(r->seed ^ d->salt) + key * DRAW__COUNT + (uint64_t)what);
	return (double)(x >> 11) * (1.0 / 9007199254740992.0); /* 2^53 */
}

/* --------------------------------------------------------------- queues */

static int fifo_init(struct fifo *q, uint32_t cap, uint32_t slot)
{
	uint32_t i;
	uint8_t *mem = malloc((size_t)cap * slot);
	q->f = calloc(cap, sizeof(*q->f));
	if (!mem || !q->f) {
		free(mem);
		free(q->f);
		return -1;
	}
	for (i = 0; i < cap; i++)
		q->f[i].data = mem + (size_t)i * slot;
	q->cap = cap;
	q->head = q->n = 0;
	return 0;
}

static struct frame *fifo_at(struct fifo *q, uint32_t k)
{
	return &q->f[(q->head + k) % q->cap];
}

/* Queue a frame on the line: due after the fixed delay and, with a rate, after the
 * frames before it have been serialised. Returns 0, or -1 when the line is full. */
static int line_push(struct relay *r, struct dir *d, const uint8_t *p, uint32_t len,
                     uint64_t now)
{
	struct frame *f;
	uint64_t done = now;
	if (d->line.n == d->line.cap) {
		d->c.qdrop++;
		return -1;
	}
	if (d->impaired && r->im.rate_bps) {
		uint64_t start = d->link_free_ns > now ? d->link_free_ns : now;
		done = start + (uint64_t)len * 8u * NS_PER_S / r->im.rate_bps;
		d->link_free_ns = done;
	}
	f = fifo_at(&d->line, d->line.n++);
	memcpy(f->data, p, len);
	f->len = len;
	f->due_ns = done + (d->impaired ? r->im.delay_ns : 0);
	return 0;
}

static void hold_release(struct relay *r, struct dir *d, uint32_t k, uint64_t now)
{
	struct frame *h = &d->hold[k];
	uint8_t *data = h->data;
	line_push(r, d, h->data, h->len, now);
	d->c.reord++;
	/* keep the slots dense: the last one moves into the gap, its buffer swaps in */
	d->nhold--;
	d->hold[k] = d->hold[d->nhold];
	d->hold[d->nhold].data = data;
}

/* A frame went out on the line: held frames whose gap or time is up follow it. */
static void hold_tick(struct relay *r, struct dir *d, int counted, uint64_t now)
{
	uint32_t k = 0;
	while (k < d->nhold) {
		struct frame *h = &d->hold[k];
		if (counted && h->gap > 0)
			h->gap--;
		if ((counted && h->gap == 0 && r->im.reorder_gap) || h->due_ns <= now)
			hold_release(r, d, k, now); /* slot k now holds another frame */
		else
			k++;
	}
}

/* Hold a frame back; returns 0 when held, -1 when every hold slot is taken. */
static int hold_push(struct relay *r, struct dir *d, const uint8_t *p, uint32_t len,
                     uint64_t now)
{
	struct frame *h;
	if (d->nhold == RELAY_HOLD)
		return -1;
	h = &d->hold[d->nhold++];
	memcpy(h->data, p, len);
	h->len = len;
	h->gap = r->im.reorder_gap;
	h->due_ns = now + r->im.reorder_ns;
	return 0;
}

/* ---------------------------------------------------------- impairments */

/* Gilbert-Elliott: a frame that steps the chain (`step`) moves the state once, then is
 * lost with ge_loss in the bad state; any other frame is lost with the chain's
 * stationary loss rate, independently (see the top of the file). */
static int ge_lost(const struct relay *r, struct dir *d, uint64_t i, int step)
{
	const struct impair *im = &r->im;
	if (im->ge_enter <= 0)
		return 0;
	if (!step)
		return draw(r, d, i, DRAW_GE_LOSS) <
		       im->ge_loss * im->ge_enter / (im->ge_enter + im->ge_leave);
	if (!d->ge_bad && draw(r, d, i, DRAW_GE_STEP) < im->ge_enter)
		d->ge_bad = 1;
	else if (d->ge_bad && draw(r, d, i, DRAW_GE_STEP) < im->ge_leave)
		d->ge_bad = 0;
	return d->ge_bad && draw(r, d, i, DRAW_GE_LOSS) < im->ge_loss;
}

/* The draw key of a frame: its identity and occurrence in keyed mode (a TCP frame),
 * else its index. Writes the frame's --log prefix into `tag`, and into *step whether
 * it steps the burst chain: every frame in index mode, in keyed mode the first
 * sighting of a data segment only (new data goes out in sequence order, so the chain
 * meets the same segments in the same order every run). */
static uint64_t frame_key(struct relay *r, struct dir *d, const uint8_t *p, uint32_t len,
                          char *tag, size_t tagsz, int *step)
{
	uint64_t i = d->idx++, h;
	struct rk_id id;
	uint32_t occ;
	*step = !r->keyed;
	if (!r->keyed || !d->occ.key || rk_identity(&r->flows, p, len, &id) < 0) {
		snprintf(tag, tagsz, "%s - %llu - - -", d->name, (unsigned long long)i);
		return i;
	}
	h = rk_hash(&id);
	occ = rk_occ_next(&d->occ, h);
	*step = id.kind == RK_DATA && occ == 0;
	snprintf(tag, tagsz, "%s %c %u %u %u %016llx", d->name, id.kind == RK_DATA ? 'D' : 'A',
	         id.rel, id.kind == RK_DATA ? id.len : id.nsack, occ, (unsigned long long)h);
	return rk_key(h, occ);
}

static void log_fate(struct relay *r, const char *tag, const char *fate, int dup, int reord)
{
	if (r->log)
		fprintf(r->log, "%s %s%s%s\n", tag, fate, dup ? "+dup" : "", reord ? "+reord" : "");
}

/* A pcap record (libpcap format, host byte order, microseconds) of frame p. */
static void pcap_frame(struct relay *r, const uint8_t *p, uint32_t len, uint64_t now)
{
	uint64_t t = now + r->wall_off_ns;
	uint32_t rec[4];
	rec[0] = (uint32_t)(t / NS_PER_S);
	rec[1] = (uint32_t)(t % NS_PER_S / NS_PER_US);
	rec[2] = len < RELAY_PCAP_SNAP ? len : RELAY_PCAP_SNAP;
	rec[3] = len;
	if (fwrite(rec, sizeof(rec), 1, r->pcap) != 1 || fwrite(p, rec[2], 1, r->pcap) != 1) {
		fprintf(stderr, "ipk-relay: --pcap: write failed, trace stopped\n");
		fclose(r->pcap);
		r->pcap = NULL;
	}
}

static int pcap_open(struct relay *r, const char *path)
{
	/* magic, version 2.4, zone, sigfigs, snaplen, LINKTYPE_ETHERNET */
	uint32_t hdr[6] = {0xa1b2c3d4u, 2u | 4u << 16, 0, 0, RELAY_PCAP_SNAP, 1};
	struct timespec rt, mono;
	if (r->pcap)
		fclose(r->pcap);
	r->pcap = fopen(path, "wb");
	if (!r->pcap || fwrite(hdr, sizeof(hdr), 1, r->pcap) != 1)
		return -1;
	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	r->wall_off_ns = ((uint64_t)rt.tv_sec - (uint64_t)mono.tv_sec) * NS_PER_S +
	                 (uint64_t)rt.tv_nsec - (uint64_t)mono.tv_nsec;
	return 0;
}

/* Everything that happens to one received frame of direction d. */
static void relay_frame(struct relay *r, struct dir *d, const uint8_t *p, uint32_t len,
                        uint64_t now)
{
	char tag[80];
	uint64_t key;
	int copies, k, reord, step;
	struct rk_seg seg;
	d->c.seen++;
	if (r->pcap)
		pcap_frame(r, p, len, now);
	if (rk_parse(p, len, &seg) == 0) {
		if (!d->tcp_first_ns)
			d->tcp_first_ns = now;
		d->tcp_last_ns = now;
	}
	if (!d->impaired) {
		struct rk_id id;
		if (r->keyed) /* learn the ISNs an impaired direction's ACKs refer to */
			(void)rk_identity(&r->flows, p, len, &id);
		line_push(r, d, p, len, now);
		return;
	}
	key = frame_key(r, d, p, len, tag, sizeof(tag), &step);
	if (ge_lost(r, d, key, step)) {
		d->c.bdrop++;
		log_fate(r, tag, "bdrop", 0, 0);
		return;
	}
	if (draw(r, d, key, DRAW_LOSS) < r->im.loss) {
		d->c.drop++;
		log_fate(r, tag, "drop", 0, 0);
		return;
	}
	copies = draw(r, d, key, DRAW_DUP) < r->im.dup ? 2 : 1;
	d->c.dup += (uint64_t)(copies - 1);
	reord = draw(r, d, key, DRAW_REORDER) < r->im.reorder;
	log_fate(r, tag, "pass", copies > 1, reord);
	for (k = 0; k < copies; k++) {
		if (reord && hold_push(r, d, p, len, now) == 0)
			continue;
		if (line_push(r, d, p, len, now) == 0)
			hold_tick(r, d, 1, now);
	}
}

/* ------------------------------------------------------------- sockets */

static int packet_socket(const char *dev, int *ifindex, uint32_t *mtu)
{
	struct sockaddr_ll sll;
	struct packet_mreq mr;
	struct ifreq ifr;
	int one = 1, rcvbuf = RELAY_RCVBUF;
	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
	if (fd < 0) {
		fprintf(stderr, "ipk-relay: AF_PACKET socket: %s (needs CAP_NET_RAW)\n", strerror(errno));
		return -1;
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev);
	*ifindex = (int)if_nametoindex(dev);
	if (*ifindex == 0 || ioctl(fd, SIOCGIFMTU, &ifr) < 0) {
		fprintf(stderr, "ipk-relay: no interface '%s'\n", dev);
		close(fd);
		return -1;
	}
	*mtu = (uint32_t)ifr.ifr_mtu;
	memset(&sll, 0, sizeof(sll));
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(ETH_P_ALL);
	sll.sll_ifindex = *ifindex;
	memset(&mr, 0, sizeof(mr));
	mr.mr_ifindex = *ifindex;
	mr.mr_type = PACKET_MR_PROMISC; /* frames for the far end's MAC are ours to relay */
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0 ||
	    setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr)) < 0 ||
	    setsockopt(fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof(one)) < 0) {
		fprintf(stderr, "ipk-relay: set up %s: %s\n", dev, strerror(errno));
		close(fd);
		return -1;
	}
	/* our own transmissions would come back as PACKET_OUTGOING: not wanted (also
	 * checked per frame, for kernels without the option) */
	(void)setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
	/* a deep receive buffer so the kernel does not add loss of its own (kdrop) */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	return fd;
}

/* Frames the kernel dropped on this socket since the last call. */
static uint64_t kernel_drops(int fd)
{
	struct tpacket_stats st;
	socklen_t len = sizeof(st);
	if (getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) < 0)
		return 0;
	return st.tp_drops;
}

static int frame_partial(struct msghdr *m)
{
	struct cmsghdr *cm;
	for (cm = CMSG_FIRSTHDR(m); cm; cm = CMSG_NXTHDR(m, cm)) {
		if (cm->cmsg_level == SOL_PACKET && cm->cmsg_type == PACKET_AUXDATA) {
			struct tpacket_auxdata aux;
			memcpy(&aux, CMSG_DATA(cm), sizeof(aux));
			return (aux.tp_status & TP_STATUS_CSUMNOTREADY) != 0;
		}
	}
	return 0;
}

/* Read up to RELAY_READS batches from d->in. Returns -1 on a socket error. */
static int dir_receive(struct relay *r, struct dir *d)
{
	struct mmsghdr mm[RELAY_BATCH];
	struct iovec iov[RELAY_BATCH];
	struct sockaddr_ll from[RELAY_BATCH];
	union { char buf[CMSG_SPACE(sizeof(struct tpacket_auxdata))]; size_t align; }
		ctl[RELAY_BATCH]; /* size_t: cmsghdr's alignment (it has a flexible member) */
	int round, i, got;
	for (round = 0; round < RELAY_READS; round++) {
		uint64_t now;
		memset(mm, 0, sizeof(mm));
		for (i = 0; i < RELAY_BATCH; i++) {
			iov[i].iov_base = r->rx_buf + (size_t)i * r->slot;
			iov[i].iov_len = r->slot;
			mm[i].msg_hdr.msg_iov = &iov[i];
			mm[i].msg_hdr.msg_iovlen = 1;
			mm[i].msg_hdr.msg_name = &from[i];
			mm[i].msg_hdr.msg_namelen = sizeof(from[i]);
			mm[i].msg_hdr.msg_control = ctl[i].buf;
			mm[i].msg_hdr.msg_controllen = sizeof(ctl[i].buf);
		}
		got = recvmmsg(d->in, mm, RELAY_BATCH, MSG_DONTWAIT, NULL);
		if (got < 0)
			return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
		now = now_ns();
		for (i = 0; i < got; i++) {
			if (from[i].sll_pkttype == PACKET_OUTGOING)
				continue;
			if (mm[i].msg_hdr.msg_flags & MSG_TRUNC) {
				d->c.seen++;
				d->c.big++;
				continue;
			}
			if (frame_partial(&mm[i].msg_hdr))
				d->c.partial++;
			relay_frame(r, d, iov[i].iov_base, mm[i].msg_len, now);
		}
		if (got < RELAY_BATCH)
			break;
	}
	return 0;
}

/* Send the frames at the head of the line whose time has come. */
static void dir_send(struct dir *d, uint64_t now)
{
	struct mmsghdr mm[RELAY_BATCH];
	struct iovec iov[RELAY_BATCH];
	uint32_t n, k, guard;
	d->blocked = 0;
	if (now < d->retry_ns)
		return;
	for (guard = 0; guard <= d->line.cap / RELAY_BATCH + 1 && d->line.n > 0; guard++) {
		int sent;
		memset(mm, 0, sizeof(mm));
		for (n = 0; n < RELAY_BATCH && n < d->line.n; n++) {
			struct frame *f = fifo_at(&d->line, n);
			if (f->due_ns > now)
				break;
			iov[n].iov_base = f->data;
			iov[n].iov_len = f->len;
			mm[n].msg_hdr.msg_iov = &iov[n];
			mm[n].msg_hdr.msg_iovlen = 1;
		}
		if (n == 0)
			return;
		sent = sendmmsg(d->out, mm, n, MSG_DONTWAIT);
		if (sent < 0 && (errno == EAGAIN || errno == EINTR)) {
			d->blocked = 1; /* wait for POLLOUT, never spin */
			return;
		}
		if (sent < 0 && errno == ENOBUFS) {
			d->retry_ns = now + RELAY_RETRY_NS; /* poll cannot say when: back off */
			return;
		}
		if (sent < 0) {
			d->c.txerr++; /* e.g. the device went down: drop the head frame, go on */
			sent = 1;
		} else {
			d->c.sent += (uint64_t)sent;
		}
		for (k = 0; k < (uint32_t)sent; k++) {
			d->line.head = (d->line.head + 1) % d->line.cap;
			d->line.n--;
		}
	}
}

/* ------------------------------------------------------------ reporting */

static void print_counts(struct relay *r, const char *what)
{
	int k;
	printf("ipk-relay %s", what);
	for (k = 0; k < 2; k++) {
		struct dir *d = &r->d[k];
		const struct counts *c = &d->c;
		d->c.kdrop += kernel_drops(d->in);
		printf(" %s.seen=%llu %s.sent=%llu %s.drop=%llu %s.bdrop=%llu %s.reord=%llu"
		       " %s.dup=%llu %s.qdrop=%llu %s.big=%llu %s.partial=%llu %s.txerr=%llu"
		       " %s.kdrop=%llu %s.left=%llu %s.span_us=%llu",
		       d->name, (unsigned long long)c->seen, d->name, (unsigned long long)c->sent,
		       d->name, (unsigned long long)c->drop, d->name, (unsigned long long)c->bdrop,
		       d->name, (unsigned long long)c->reord, d->name, (unsigned long long)c->dup,
		       d->name, (unsigned long long)c->qdrop, d->name, (unsigned long long)c->big,
		       d->name, (unsigned long long)c->partial, d->name, (unsigned long long)c->txerr,
		       d->name, (unsigned long long)c->kdrop, d->name,
		       (unsigned long long)(d->line.n + d->nhold), d->name,
		       (unsigned long long)((d->tcp_last_ns - d->tcp_first_ns) / NS_PER_US));
	}
	printf("\n");
	fflush(stdout);
}

/* ----------------------------------------------------------------- loop */

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The earliest time something is due: a line head, a held frame, the stats line. */
static uint64_t next_deadline(const struct relay *r, uint64_t next_stats)
{
	uint64_t t = next_stats;
	uint32_t k, h;
	for (k = 0; k < 2; k++) {
		const struct dir *d = &r->d[k];
		if (d->line.n > 0 && !d->blocked) {
			uint64_t head = d->line.f[d->line.head].due_ns;
			t = min_u64(t, head > d->retry_ns ? head : d->retry_ns);
		}
		for (h = 0; h < d->nhold; h++)
			t = min_u64(t, d->hold[h].due_ns);
	}
	return t;
}

static int relay_loop(struct relay *r, const sigset_t *unblocked)
{
	uint64_t next_stats = r->stats_ns ? now_ns() + r->stats_ns : UINT64_MAX;
	while (!relay_stop) {
		struct pollfd pfd[2];
		struct timespec ts, *tsp = NULL;
		uint64_t now = now_ns(), due;
		int k, n;
		for (k = 0; k < 2; k++) {
			hold_tick(r, &r->d[k], 0, now);
			dir_send(&r->d[k], now);
		}
		if (now >= next_stats) {
			print_counts(r, "stats");
			next_stats = now + r->stats_ns;
		}
		/* pfd[0] is A: input of a2b, output of b2a; pfd[1] is B */
		pfd[0].fd = r->d[0].in;
		pfd[0].events = (short)(POLLIN | (r->d[1].blocked ? POLLOUT : 0));
		pfd[1].fd = r->d[1].in;
		pfd[1].events = (short)(POLLIN | (r->d[0].blocked ? POLLOUT : 0));
		due = next_deadline(r, next_stats);
		if (due != UINT64_MAX) {
			uint64_t wait = due > now ? due - now : 0;
			ts.tv_sec = (time_t)(wait / NS_PER_S);
			ts.tv_nsec = (long)(wait % NS_PER_S);
			tsp = &ts;
		}
		n = ppoll(pfd, 2, tsp, unblocked);
		if (n < 0 && errno != EINTR) {
			fprintf(stderr, "ipk-relay: poll: %s\n", strerror(errno));
			return -1;
		}
		for (k = 0; n > 0 && k < 2; k++) {
			if (pfd[k].revents & (POLLERR | POLLNVAL)) {
				fprintf(stderr, "ipk-relay: socket error on %s\n", k ? r->dev_b : r->dev_a);
				return -1;
			}
			if ((pfd[k].revents & POLLIN) && dir_receive(r, &r->d[k]) < 0) {
				fprintf(stderr, "ipk-relay: receive: %s\n", strerror(errno));
				return -1;
			}
		}
	}
	return 0;
}

/* ------------------------------------------------------------- options */

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: ipk-relay --a DEV --b DEV --seed N [impairments] [options]\n"
	        "Bridges Ethernet frames between DEV A and DEV B (AF_PACKET) and impairs them,\n"
	        "deterministically for a given seed. Turn offloads off on the veths feeding it.\n\n"
	        "  --loss P            drop each frame with probability P (0..1)\n"
	        "  --burst G,B[,H]     Gilbert-Elliott loss: enter the bad state with G per frame,\n"
	        "                      leave it with B, drop with H in it (default 1)\n"
	        "  --reorder P         hold a frame back with probability P ...\n"
	        "  --reorder-gap K     ... until K later frames went out (default 3; 0: time only)\n"
	        "  --reorder-us D      ... or at most D microseconds (default 1000)\n"
	        "  --dup P             send a frame twice with probability P\n"
	        "  --delay-us D        fixed one-way delay in microseconds\n"
	        "  --rate-mbit R       serialise at R Mbit/s (with --queue frames of buffer)\n"
	        "  --queue N           frames queued per direction, tail drop beyond (default 4096)\n"
	        "  --dir a2b|b2a|both  which directions are impaired (default both)\n"
	        "  --seed N            the seed (default 1)\n"
	        "  --key segment|index what a decision is drawn from (default segment):\n"
	        "                      segment: a TCP/IPv4 frame's identity, i.e. its sequence\n"
	        "                      number relative to the ISN and payload length (data) or\n"
	        "                      relative ACK number and SACK blocks (pure ACK), the\n"
	        "                      service port, and how many times that identity passed\n"
	        "                      before; the same segment meets the same fate in every run,\n"
	        "                      a retransmission an independent one; other frames by index.\n"
	        "                      index: frame i of the direction, as arrived (timing-dependent\n"
	        "                      for TCP). Bursts: index, the state steps per frame; keyed,\n"
	        "                      only new data steps it (the same new data is hit every\n"
	        "                      run), other frames are lost independently at the burst\n"
	        "                      model's average rate H*G/(G+B).\n"
	        "  --pcap FILE         every received frame (both directions, before impairment,\n"
	        "                      first 128 bytes) as a pcap, for tshark\n"
	        "  --log FILE          one line per impaired frame: DIR D|A|- REL LEN|NSACK OCC ID FATE\n"
	        "                      (D data, A pure ACK, - other; ID the identity's hash;\n"
	        "                      FATE pass|drop|bdrop, +dup, +reord)\n"
	        "  --stats-every S     print the counter line every S seconds too\n"
	        "  -h, --help          this text\n\n"
	        "On SIGTERM/SIGINT prints one line and exits 0:\n"
	        "  ipk-relay final a2b.seen=N a2b.sent=N a2b.drop=N ... b2a.seen=N ...\n");
}

static int parse_prob(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end != 0 || !(v >= 0.0 && v <= 1.0))
		return -1;
	*out = v;
	return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end != 0)
		return -1;
	*out = v;
	return 0;
}

static int parse_burst(const char *s, struct impair *im)
{
	char a[32], b[32], c[32];
	int n = sscanf(s, "%31[^,],%31[^,],%31s", a, b, c);
	im->ge_loss = 1.0;
	if (n < 2 || parse_prob(a, &im->ge_enter) < 0 || parse_prob(b, &im->ge_leave) < 0)
		return -1;
	return n == 3 ? parse_prob(c, &im->ge_loss) : 0;
}

enum opt { OPT_A = 256, OPT_B, OPT_SEED, OPT_LOSS, OPT_BURST, OPT_REORDER, OPT_GAP, OPT_RUS,
           OPT_DUP, OPT_DELAY, OPT_RATE, OPT_QUEUE, OPT_DIR, OPT_STATS, OPT_KEY, OPT_LOG,
           OPT_PCAP };

static const struct option relay_opts[] = {
	{"a", required_argument, NULL, OPT_A}, {"b", required_argument, NULL, OPT_B},
	{"seed", required_argument, NULL, OPT_SEED}, {"loss", required_argument, NULL, OPT_LOSS},
	{"burst", required_argument, NULL, OPT_BURST},
	{"reorder", required_argument, NULL, OPT_REORDER},
	{"reorder-gap", required_argument, NULL, OPT_GAP},
	{"reorder-us", required_argument, NULL, OPT_RUS}, {"dup", required_argument, NULL, OPT_DUP},
	{"delay-us", required_argument, NULL, OPT_DELAY},
	{"rate-mbit", required_argument, NULL, OPT_RATE},
	{"queue", required_argument, NULL, OPT_QUEUE}, {"dir", required_argument, NULL, OPT_DIR},
	{"stats-every", required_argument, NULL, OPT_STATS}, {"help", no_argument, NULL, 'h'},
	{"key", required_argument, NULL, OPT_KEY}, {"log", required_argument, NULL, OPT_LOG},
	{"pcap", required_argument, NULL, OPT_PCAP},
	{NULL, 0, NULL, 0}};

/* One option into r; returns 0, or -1 for a bad value. `dirs` gets the --dir mask. */
static int parse_one(struct relay *r, int opt, const char *v, int *dirs)
{
	uint64_t u = 0;
	switch (opt) {
	case OPT_A: r->dev_a = v; return 0;
	case OPT_B: r->dev_b = v; return 0;
	case OPT_SEED: return parse_u64(v, &r->seed);
	case OPT_LOSS: return parse_prob(v, &r->im.loss);
	case OPT_BURST: return parse_burst(v, &r->im);
	case OPT_REORDER: return parse_prob(v, &r->im.reorder);
	case OPT_DUP: return parse_prob(v, &r->im.dup);
	case OPT_DIR:
		*dirs = !strcmp(v, "a2b") ? 1 : !strcmp(v, "b2a") ? 2 : !strcmp(v, "both") ? 3 : 0;
		return *dirs ? 0 : -1;
	case OPT_KEY:
		r->keyed = !strcmp(v, "segment") ? 1 : !strcmp(v, "index") ? 0 : -1;
		return r->keyed < 0 ? -1 : 0;
	case OPT_LOG:
		if (r->log)
			fclose(r->log);
		r->log = fopen(v, "w");
		return r->log ? 0 : -1;
	case OPT_PCAP:
		return pcap_open(r, v);
	default: break;
	}
	if (parse_u64(v, &u) < 0)
		return -1;
	switch (opt) {
	case OPT_GAP: r->im.reorder_gap = (uint32_t)u; return u <= 1000000 ? 0 : -1;
	case OPT_RUS: r->im.reorder_ns = u * NS_PER_US; return u <= 10000000 ? 0 : -1;
	case OPT_DELAY: r->im.delay_ns = u * NS_PER_US; return u <= 10000000 ? 0 : -1;
	case OPT_RATE: r->im.rate_bps = u * 1000000u; return u <= 1000000 ? 0 : -1;
	case OPT_QUEUE: r->queue = (uint32_t)u; return (u >= 1 && u <= 1000000) ? 0 : -1;
	case OPT_STATS: r->stats_ns = u * NS_PER_S; return u <= 86400 ? 0 : -1;
	default: return -1;
	}
}

/* Returns -1 to exit with usage error, 1 to exit 0 (help), 0 to run. */
static int parse_args(struct relay *r, int argc, char **argv)
{
	int opt, dirs = 3;
	r->seed = 1;
	r->keyed = 1;
	r->queue = 4096;
	r->im.reorder_gap = 3;
	r->im.reorder_ns = 1000 * NS_PER_US;
	while ((opt = getopt_long(argc, argv, "h", relay_opts, NULL)) != -1) {
		if (opt == 'h') {
			usage(stdout);
			return 1;
		}
		if (opt == '?' || parse_one(r, opt, optarg, &dirs) < 0) {
			if (opt != '?')
				fprintf(stderr, "ipk-relay: bad value '%s' (see --help)\n", optarg);
			return -1;
		}
	}
	if (optind != argc || !r->dev_a || !r->dev_b || !strcmp(r->dev_a, r->dev_b)) {
		fprintf(stderr, "ipk-relay: give two different devices, --a DEV --b DEV (see --help)\n");
		return -1;
	}
	r->d[0].impaired = dirs & 1;
	r->d[1].impaired = (dirs >> 1) & 1;
	return 0;
}

/* ----------------------------------------------------------------- main */

static int dir_init(struct relay *r, struct dir *d, const char *name, int in, int out)
{
	uint32_t k;
	d->name = name;
	d->in = in;
	d->out = out;
	d->salt = mix64((uint64_t)name[0] << 8 | (uint64_t)name[2]); /* a2b and b2a differ */
	if (fifo_init(&d->line, r->queue, r->slot) < 0 || rk_occ_init(&d->occ, RK_OCC_INIT) < 0)
		return -1;
	d->hold[0].data = malloc((size_t)RELAY_HOLD * r->slot);
	if (!d->hold[0].data)
		return -1;
	for (k = 1; k < RELAY_HOLD; k++)
		d->hold[k].data = d->hold[0].data + (size_t)k * r->slot;
	return 0;
}

static int relay_open(struct relay *r)
{
	int ia, ib, fa, fb;
	uint32_t ma, mb;
	if ((fa = packet_socket(r->dev_a, &ia, &ma)) < 0)
		return -1;
	if ((fb = packet_socket(r->dev_b, &ib, &mb)) < 0)
		return -1;
	/* a slot holds a full frame of the larger MTU (+ Ethernet header and a VLAN tag);
	 * anything bigger is a super-frame from an offload left on */
	r->slot = (ma > mb ? ma : mb) + 18;
	r->rx_buf = malloc((size_t)RELAY_BATCH * r->slot);
	if (!r->rx_buf || dir_init(r, &r->d[0], "a2b", fa, fb) < 0 ||
	    dir_init(r, &r->d[1], "b2a", fb, fa) < 0) {
		fprintf(stderr, "ipk-relay: out of memory for %u-frame queues\n", r->queue);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct relay r; /* large; zeroed */
	struct sigaction sa;
	sigset_t block, unblocked;
	int rc = parse_args(&r, argc, argv);
	if (rc != 0)
		return rc < 0 ? 2 : 0;
	/* SIGTERM/SIGINT are blocked except inside ppoll, so a stop is never missed */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_BLOCK, &block, &unblocked);
	if (relay_open(&r) < 0)
		return 1;
	fprintf(stderr, "ipk-relay: relaying %s <-> %s, seed %llu\n", r.dev_a, r.dev_b,
	        (unsigned long long)r.seed);
	rc = relay_loop(&r, &unblocked);
	print_counts(&r, "final");
	if (r.log)
		fclose(r.log);
	if (r.pcap)
		fclose(r.pcap);
	return rc < 0 ? 1 : 0;
}
