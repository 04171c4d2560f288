/*
 * svc_tool's scope6 mode (included by svc_tool.c): the zone (scope_id) of
 * link-local IPv6 addresses, include/ipkit/svc.h. ipkitd has one link; it takes
 * 0 or its index, refuses any other (BIND -ENODEV, CONNECT and SENDTO
 * -ENETUNREACH, Linux's answers for an index no interface has) and reports its
 * index with every link-local address it names (accept's peer, recvfrom's
 * sender, connect's local address), 0 with any other.
 *
 *   scope6 OUR_LL PEER_LL IDX [PORT]
 * OUR_LL: ipkitd's link-local address, PEER_LL: a UDP echo (port 7) and TCP
 * listener (PORT, default 7) on the link, IDX: ipkitd --link-index.
 * Prints one line per check and "scope6 ok" when all passed.
 */

static int sc_fail(const char *what, long got, long want)
{
	printf("scope6 FAIL %s: got %ld want %ld\n", what, got, want);
	fails++;
	return 0;
}

static int sc_check(const char *what, long got, long want)
{
	if (got != want)
		return sc_fail(what, got, want);
	printf("scope6 %s: %ld\n", what, got);
	return 1;
}

static void sc_addr(struct ipk_svc_addr *a, const uint8_t ip[16], uint16_t port, uint32_t zone)
{
	ipk_svc_addr_ip6(a, ip, port);
	a->scope_id = zone;
}

/* One operation's completion, whole. */
static int sc_one(struct ipk_svc_sock *so, struct ipk_svc_sqe *e, struct ipk_svc_cqe *c)
{
	memset(c, 0, sizeof *c);
	return one(so, e, c);
}

/* BIND of our link-local address with each zone. */
static void sc_bind(struct ipk_svc *svc, const uint8_t ours[16], uint32_t idx, uint16_t port)
{
	static const struct {
		const char *what;
		int zone; /* 0, 1: ours, 2: another */
		int want;
	} t[] = {{"bind ll zone 0", 0, 0}, {"bind ll our zone", 1, 0},
	         {"bind ll other zone", 2, -ENODEV}};
	size_t i;
	for (i = 0; i < sizeof t / sizeof t[0]; i++) {
		struct ipk_svc_sock *so;
		struct ipk_svc_sqe e;
		struct ipk_svc_cqe c;
		uint32_t z = t[i].zone == 0 ? 0 : t[i].zone == 1 ? idx : idx + 1;
		if (ipk_svc_socket(svc, IPK_SVC_UDP, 8, 16, &so) < 0) {
			sc_fail("socket", -1, 0);
			return;
		}
		memset(&e, 0, sizeof e);
		sc_addr(&e.addr, ours, (uint16_t)(port + i), z);
		ipk_svc_prep_bind(&e, &e.addr);
		sc_check(t[i].what, sc_one(so, &e, &c), t[i].want);
		ipk_svc_close(so);
	}
}

/* A listener on [::]:port of this application, its multishot ACCEPT armed. */
static struct ipk_svc_sock *sc_listen(struct ipk_svc *svc, uint16_t port)
{
	static const uint8_t any6[16];
	struct ipk_svc_sock *l;
	struct ipk_svc_sqe e;
	struct ipk_svc_cqe c;
	if (ipk_svc_socket(svc, IPK_SVC_TCP, 16, 64, &l) < 0)
		return NULL;
	memset(&e, 0, sizeof e);
	sc_addr(&e.addr, any6, port, 0);
	ipk_svc_prep_bind(&e, &e.addr);
	if (sc_one(l, &e, &c) != 0)
		return NULL;
	memset(&e, 0, sizeof e);
	ipk_svc_prep_listen(&e, 16);
	if (sc_one(l, &e, &c) != 0)
		return NULL;
	memset(&e, 0, sizeof e);
	ipk_svc_prep_accept(&e, 8, 16);
	*ipk_svc_get_sqe(l) = e;
	ipk_svc_submit(l);
	return l;
}

/* CONNECT to ip%zone:port: its result; the local address's zone in *lzone. */
static int sc_connect(struct ipk_svc *svc, const uint8_t ip[16], uint16_t port, uint32_t zone,
                      uint32_t *lzone, struct ipk_svc_sock **out)
{
	struct ipk_svc_sock *so;
	struct ipk_svc_sqe e;
	struct ipk_svc_cqe c;
	int rc;
	if (ipk_svc_socket(svc, IPK_SVC_TCP, 8, 16, &so) < 0)
		return -ENOMEM;
	memset(&e, 0, sizeof e);
	sc_addr(&e.addr, ip, port, zone);
	ipk_svc_prep_connect(&e, &e.addr);
	rc = sc_one(so, &e, &c);
	*lzone = c.addr.scope_id;
	if (rc == 0 && c.addr.family != IPK_SVC_AF_INET6)
		sc_fail("connect's local address family", c.addr.family, IPK_SVC_AF_INET6);
	if (out && rc == 0)
		*out = so;
	else
		ipk_svc_close(so);
	return rc;
}

/* Between two sockets of ipkitd (d_loop.c): connect to our link-local address
 * in each zone; the accept reports the peer's zone. */
static void sc_loop(struct ipk_svc *svc, const uint8_t ours[16], uint32_t idx, uint16_t port)
{
	struct ipk_svc_sock *l = sc_listen(svc, port), *so = NULL, *w;
	struct ipk_svc_cqe c;
	uint32_t lz = 0, z;
	int k;
	if (!l) {
		sc_fail("listen [::]", -1, 0);
		return;
	}
	sc_check("connect own ll other zone", sc_connect(svc, ours, port, idx + 1, &lz, NULL),
	         -ENETUNREACH);
	for (k = 0; k < 2; k++) {
		z = k ? idx : 0;
		so = NULL;
		if (!sc_check(k ? "connect own ll our zone" : "connect own ll zone 0",
		              sc_connect(svc, ours, port, z, &lz, &so), 0))
			continue;
		sc_check("  its local address's zone", lz, idx);
		if (take_t(l, &c, WAIT_NS) < 0 || c.res != 0) {
			sc_fail("accept", c.res, 0);
		} else {
			sc_check("  accept's peer zone", c.addr.scope_id, idx);
			if (ipk_svc_accepted(svc, &c, &w) == 0)
				ipk_svc_close(w);
		}
		ipk_svc_close(so);
	}
	ipk_svc_close(l);
}

/* A datagram to the peer's echo in zone zone: the SENDTO's result; the echo's
 * sender zone in *fz (none: UINT32_MAX). */
static int sc_udp(struct ipk_svc_sock *so, uint8_t *out, uint8_t *in, const uint8_t peer[16],
                  uint32_t zone, uint32_t *fz)
{
	struct ipk_svc_addr a;
	struct ipk_svc_sqe *e;
	struct ipk_svc_cqe c;
	int tries, res = 0, sent, echoed = 0;
	sc_addr(&a, peer, 7, zone);
	*fz = UINT32_MAX;
	for (tries = 0; tries < 20; tries++) { /* the first may wait for ND */
		sent = 0;
		e = ipk_svc_get_sqe(so);
		ipk_svc_prep_recvfrom(so, e, in, 2048);
		ipk_svc_sqe_set_data(e, 2);
		e = ipk_svc_get_sqe(so);
		ipk_svc_prep_sendto(so, e, out, 64, &a);
		ipk_svc_sqe_set_data(e, 1);
		ipk_svc_submit(so);
		while (take_t(so, &c, 300000000) == 0) {
			/* both this try's SENDTO completion and an echo (an earlier
			 * call's or try's echo may come first: the RECVFROMs they
			 * armed are still there) */
			if (c.user_data == 1) {
				res = c.res;
				sent = 1;
				if (res < 0)
					break;
			} else if (c.res == 64 && !memcmp(c.addr.addr, peer, 16)) {
				*fz = c.addr.scope_id;
				echoed = 1;
			}
			if (sent && echoed)
				return res;
		}
		if (res < 0) { /* the RECVFROM stays armed: cancelled by the close */
			return res;
		}
	}
	return res;
}

static void sc_udp_all(struct ipk_svc *svc, const uint8_t peer[16], uint32_t idx)
{
	struct ipk_svc_sock *so;
	uint8_t *out, *in;
	uint32_t fz;
	if (ipk_svc_socket(svc, IPK_SVC_UDP, 16, 32, &so) < 0) {
		sc_fail("udp socket", -1, 0);
		return;
	}
	out = (uint8_t *)ipk_svc_buf_alloc(svc, 64);
	in = (uint8_t *)ipk_svc_buf_alloc(svc, 2048);
	pattern(17, out, 64);
	sc_check("sendto peer ll our zone", sc_udp(so, out, in, peer, idx, &fz), 64);
	sc_check("  recvfrom's sender zone", fz, idx);
	sc_check("sendto peer ll zone 0", sc_udp(so, out, in, peer, 0, &fz), 64);
	sc_check("  recvfrom's sender zone", fz, idx);
	ipk_svc_close(so);
	if (ipk_svc_socket(svc, IPK_SVC_UDP, 16, 32, &so) < 0)
		return;
	sc_check("sendto peer ll other zone", sc_udp(so, out, in, peer, idx + 1, &fz),
	         -ENETUNREACH);
	ipk_svc_close(so);
}

static int mode_scope6(struct ipk_svc *svc, char **av, int argc)
{
	uint8_t ours[16], peer[16];
	uint32_t idx = (uint32_t)strtoul(av[2], NULL, 10), lz;
	uint16_t tport = argc > 3 ? (uint16_t)atoi(av[3]) : 7;
	struct ipk_svc_sock *so = NULL;
	if (inet_pton(AF_INET6, av[0], ours) != 1 || inet_pton(AF_INET6, av[1], peer) != 1 ||
	    idx == 0 || idx == UINT32_MAX)
		return 2;
	sc_bind(svc, ours, idx, 7600);
	sc_loop(svc, ours, idx, 7610);
	sc_udp_all(svc, peer, idx);
	/* over the wire: the local address the core chose is our link-local */
	if (sc_check("connect peer ll our zone", sc_connect(svc, peer, tport, idx, &lz, &so), 0)) {
		sc_check("  its local address's zone", lz, idx);
		ipk_svc_close(so);
	}
	sc_check("connect peer ll other zone", sc_connect(svc, peer, tport, idx + 7, &lz, NULL),
	         -ENETUNREACH);
	if (!fails)
		printf("scope6 ok\n");
	fflush(stdout);
	return fails ? 1 : 0;
}
