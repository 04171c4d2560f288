/*
 * ipkitd: ports. One table per protocol (65,536 entries, O(1)); an entry is a
 * group of sockets on the port, linked in a circle (d_sock.port_next), usually
 * of one. Sharing (svc/README.md, "Port sharing"): a port takes another socket
 * only when every socket on it, the new one included, asked for it at bind
 * (IPK_SVC_SQE_F_REUSEPORT) and belongs to an application of the same uid, as
 * SO_REUSEPORT in Linux (one user cannot take another's traffic). A TCP port's
 * connections go to its listening sockets in turn; a UDP port's datagrams to
 * one socket per sender, chosen by a hash of the sender's address and port.
 */
#include "daemon.h"

#include <errno.h>

static struct d_sock **d_port_tab(struct d_daemon *d, int type)
{
	return type == IPK_SVC_TCP ? d->tcp_port : d->udp_port;
}

/* Do s and every socket on the port serve disjoint families (an AF_INET socket
 * and an AF_INET6 one with IPV6_V6ONLY, as redis's default `bind * -::*` opens:
 * Linux lets them share the port)? */
static int d_port_fam_apart(const struct d_sock *head, const struct d_sock *s)
{
	const struct d_sock *m = head;
	if (!s->fam)
		return 0;
	do {
		if (!m->fam || (m->fam & s->fam))
			return 0;
		m = m->port_next;
	} while (m != head);
	return 1;
}

/* May s join the sockets on the port (head of the circle)? */
static int d_port_share_ok(const struct d_sock *head, const struct d_sock *s)
{
	const struct d_sock *m = head;
	if (d_port_fam_apart(head, s))
		return 1;
	if (s->inherit)
		return d_family_share_ok(head, s);
	if (!s->reuse)
		return 0;
	do {
		if (!m->reuse || m->app->uid != s->app->uid)
			return 0;
		m = m->port_next;
	} while (m != head);
	return 1;
}

static int d_port_claim_locked(struct d_daemon *d, struct d_sock *s, uint16_t port_be,
                               int wait);

/* Check-and-insert in one critical section of the port lock: two applications on
 * two workers cannot both win a port (svc_w2_workers_bind_race). */
int d_port_claim(struct d_daemon *d, struct d_sock *s, uint16_t port_be, int wait)
{
	int rc;
	d_plock(d);
	rc = d_port_claim_locked(d, s, port_be, wait);
	if (rc >= 0)
		d_pcache_bump(d); /* a port of one may be a port of two now */
	d_punlock(d);
	return rc;
}

static int d_port_claim_locked(struct d_daemon *d, struct d_sock *s, uint16_t port_be,
                               int wait)
{
	struct d_sock **tab = d_port_tab(d, s->type), *h;
	int rc = 0;
	if (port_be == 0)
		return -EINVAL;
	/* ports below 1024 need a configured permission (--low-ports-uid) */
	if (ipk_ntohs(port_be) < 1024 && !s->app->low_ports)
		return -EACCES;
	h = tab[port_be];
	if (h && !d_port_share_ok(h, s))
		return -EADDRINUSE;
	if (!h && s->type == IPK_SVC_UDP) {
		/* every worker's context: a datagram lands on the worker its 4-tuple
		 * hashes to (the others' by message, d_pinst.c; 1: answers awaited) */
		rc = d_pinst_add(d, s, port_be, 0, wait);
		if (rc < 0)
			return rc;
	}
	if (h) { /* into the circle, after the head */
		s->port_next = h->port_next;
		h->port_next = s;
	} else {
		s->port_next = s;
		tab[port_be] = s;
	}
	s->port_member = 1;
	s->lport_be = port_be;
	return rc;
}

/* Another socket on s's port listening already (the core has one listener per
 * port: only the first LISTEN asks it, only the last one leaving unlistens)?
 * Under the port lock. */
int d_port_listened(const struct d_sock *s)
{
	const struct d_sock *m;
	if (!s->port_member)
		return 0;
	for (m = s->port_next; m != s; m = m->port_next)
		if (m->listening)
			return 1;
	return 0;
}

/* s leaves its port: out of the circle, and the core's listener or UDP binding
 * goes when nobody on the port needs it any more. */
void d_port_release(struct d_daemon *d, struct d_sock *s)
{
	struct d_sock **tab = d_port_tab(d, s->type), *prev;
	uint16_t p;
	int alone;
	d_plock(d);
	p = s->lport_be;
	alone = s->port_next == s;
	if (!s->port_member) {
		d_punlock(d);
		return;
	}
	/* bound and listened on every worker: removed from each (d_pinst.c) */
	if ((s->type == IPK_SVC_TCP && s->listening && !d_port_listened(s)) ||
	    (s->type == IPK_SVC_UDP && alone))
		d_pinst_del(d, s, p);
	for (prev = s; prev->port_next != s; prev = prev->port_next)
		;
	prev->port_next = s->port_next;
	if (tab[p] == s)
		tab[p] = alone ? NULL : s->port_next;
	s->port_next = NULL;
	s->port_member = 0;
	s->listening = 0;
	d_pcache_bump(d); /* before s can be freed: no cache names it any more */
	d_punlock(d);
}

/* The sockets of the port's group a lookup of family fam chooses from, in the
 * order both the port cache (d_pcache.c) and the slow path count them: from the
 * circle's head, for TCP only listeners. Their number (0: none), or -1 when the
 * group is not chosen from such a list: more than max sockets, or (TCP) a member
 * of a fork family (IPK_SVC_SQE_F_INHERIT: d_family_waiting prefers the process
 * that waits in ACCEPT, a state only the port lock may read). Under the port
 * lock. */
int d_port_members(struct d_daemon *d, int type, uint16_t port_be, unsigned fam,
                   struct d_sock **out, unsigned max)
{
	struct d_sock *h = d_port_tab(d, type)[port_be], *m;
	unsigned n = 0;
	if (!h)
		return 0;
	m = h;
	do {
		if (type == IPK_SVC_TCP && m->inherit)
			return -1;
		if (d_fam_ok(m, fam) && (type != IPK_SVC_TCP || m->listening)) {
			if (n == max)
				return -1;
			out[n++] = m;
		}
		m = m->port_next;
	} while (m != h);
	return (int)n;
}

/* The turn of a TCP port's group: which listener (counted as d_port_members
 * does) takes the next connection. take: the connection is taken, the turn moves
 * on. One counter per port for every worker (relaxed atomics: only the
 * distribution depends on it, never what a socket may read), so connections
 * alternate over the group whichever worker their flow lands on, with the port
 * lock (slow path) or without it (cache hit). */
uint32_t d_port_turn(struct d_daemon *d, uint16_t port_be, int take)
{
	uint32_t *t = &d->tturn[port_be];
	return take ? __atomic_fetch_add(t, 1, __ATOMIC_RELAXED)
	            : __atomic_load_n(t, __ATOMIC_RELAXED);
}

/* --workers N: a group of listeners chosen by the port's turn (d_port_turn), the
 * first from it with room in its backlog; 1 with *out set (NULL: none has
 * room), 0: not such a group (the circle's rotation decides, below). */
static int d_port_listener_turn(struct d_daemon *d, uint16_t port_be, int take, unsigned fam,
                                struct d_sock **out)
{
	struct d_sock *g[D_PCE_MEMB];
	int n = d->tturn ? d_port_members(d, IPK_SVC_TCP, port_be, fam, g, D_PCE_MEMB) : -1;
	uint32_t t, i;
	if (n < 2)
		return 0;
	t = d_port_turn(d, port_be, take);
	*out = NULL;
	for (i = 0; i < (uint32_t)n; i++)
		if (d_acc_room(g[(t + i) % (uint32_t)n])) {
			*out = g[(t + i) % (uint32_t)n];
			return 1;
		}
	return 1;
}

/* The listening socket on the port to take the next connection (one with room in
 * its backlog), or NULL. take: this one takes it, the turn moves on (the circle's
 * head advances past it), so connections go round the listeners. Under the port
 * lock, held while the caller reads the listener (another worker's socket: its
 * close leaves the port, under this lock, before it is freed). */
struct d_sock *d_port_listener(struct d_daemon *d, uint16_t port_be, int take, unsigned fam)
{
	struct d_sock *h = d->tcp_port[port_be], *m;
	int forked = 0;
	if (!h)
		return NULL;
	if (d_port_listener_turn(d, port_be, take, fam, &m))
		return m;
	if (take && (m = d_family_waiting(d, port_be, fam)) != NULL)
		return m;
	/* A fork family (a member joined with IPK_SVC_SQE_F_INHERIT): only a
	 * listener whose program waits for connections (an ACCEPT armed) takes one.
	 * On Linux the family shares one queue that any process may take from; here
	 * a connection given to a listener that never accepts (nginx's master) would
	 * wait there forever. So while none waits with room the port has no room:
	 * the SYN, or the handshake's last ACK, is dropped and comes again (a full
	 * backlog, d_net.c d_syn_ok), by when a worker waits. */
	m = h;
	do {
		forked |= m->inherit;
		m = m->port_next;
	} while (m != h);
	do {
		if (m->listening && d_acc_room(m) && d_fam_ok(m, fam) &&
		    (!forked || d_acc_armed(m))) {
			if (take)
				d->tcp_port[port_be] = m->port_next;
			return m;
		}
		m = m->port_next;
	} while (m != h);
	return NULL;
}

/* Whether a listener of the port serves family fam (room or not). Under the port
 * lock. */
int d_port_listening(struct d_daemon *d, uint16_t port_be, unsigned fam)
{
	struct d_sock *h = d->tcp_port[port_be], *m;
	if (!h)
		return 0;
	m = h;
	do {
		if (m->listening && d_fam_ok(m, fam))
			return 1;
		m = m->port_next;
	} while (m != h);
	return 0;
}

/* Which of n sockets (counted from the head, those taking the family) the
 * datagrams from ip:port go to: the same sender always gets the same one. */
unsigned d_port_udp_pick(uint32_t from_ip_be, uint16_t from_port_be, unsigned n)
{
	uint32_t x = from_ip_be ^ ((uint32_t)from_port_be << 16 | from_port_be);
	x ^= x >> 16;
	x *= 0x45d9f3bu; /* a multiplicative mix: consecutive ports spread */
	x ^= x >> 16;
	return x % n;
}

/* The UDP socket on the port for a datagram of family fam (D_FAM4/6) from
 * ip:port, or NULL: one sender always reaches the same socket while the group
 * does not change. Sockets that do not serve fam are passed over. Under the port
 * lock, held while the caller reads the socket (as d_port_listener's). */
struct d_sock *d_port_udp(struct d_daemon *d, uint16_t port_be, uint32_t from_ip_be,
                          uint16_t from_port_be, unsigned fam)
{
	struct d_sock *h = d->udp_port[port_be], *m;
	uint32_t n = 0, k;
	if (!h)
		return NULL;
	if (h->port_next == h)
		return d_fam_ok(h, fam) ? h : NULL;
	/* the head does not move for UDP, so walking from it is stable */
	m = h;
	do {
		n += (uint32_t)d_fam_ok(m, fam);
		m = m->port_next;
	} while (m != h);
	if (n == 0)
		return NULL;
	while (!d_fam_ok(m, fam))
		m = m->port_next;
	for (k = d_port_udp_pick(from_ip_be, from_port_be, n); k; k--)
		do
			m = m->port_next;
		while (!d_fam_ok(m, fam));
	return m;
}
