// SPDX-License-Identifier: MIT
/*
 * Unit tests of the RoCEv2 UDP transport (src/device/roce/net*.c) over the
 * loopback interface: two sv_net on 127.0.0.1 and 127.0.0.2 (same port,
 * different addresses), batches both ways, the addresses and ports the
 * receiver sees, source-port sockets, a 9000-byte datagram, IPv6 on ::1,
 * the injector's rates over 100k packets and its determinism, and the
 * inject strings it refuses.
 *
 * Nothing waits on time: a receive loop waits in poll() with a generous
 * timeout only so that a lost packet fails the test instead of hanging it.
 * The sender is pinned to one CPU so that loopback delivers its packets in
 * the order it sent them (one backlog queue).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "device/roce/net.h"

#define POLL_MS 20000   /* a lost packet, not a slow machine */

static void gid_v4(uint8_t gid[16], const char *ip)
{
	memset(gid, 0, 16);
	gid[10] = gid[11] = 0xff;
	assert_int_equal(inet_pton(AF_INET, ip, gid + 12), 1);
}

/* Two nets on 127.0.0.1 and 127.0.0.2 with the same free port. */
static uint16_t open_pair(struct sv_net **a, struct sv_net **b,
			  const char *inject_a)
{
	unsigned int t;

	for (t = 0; t < 200; t++) {
		uint16_t port = (uint16_t)(20000 + (getpid() * 7 + t * 131) %
					   20000);
		struct sv_net_cfg ca = { .port = port, .inject = inject_a };
		struct sv_net_cfg cb = { .port = port };
		int rc;

		gid_v4(ca.addr, "127.0.0.1");
		gid_v4(cb.addr, "127.0.0.2");
		rc = sv_net_open(a, &ca);
		if (rc == -EADDRINUSE)
			continue;
		assert_int_equal(rc, 0);
		rc = sv_net_open(b, &cb);
		if (rc == -EADDRINUSE) {
			sv_net_close(*a);
			continue;
		}
		assert_int_equal(rc, 0);
		return port;
	}
	fail_msg("no free port pair");
	return 0;
}

/* Receive exactly want packets into cb (poll between empty reads). */
static void recv_n(struct sv_net *n, unsigned int want,
		   void (*cb)(const struct sv_net_rx *, void *), void *arg)
{
	static struct sv_net_rx rx[SV_NET_RX_BATCH];
	unsigned int got = 0;

	while (got < want) {
		unsigned int k = sv_net_recv(n, rx, SV_NET_RX_BATCH), i;

		if (!k) {
			struct pollfd p = { .fd = sv_net_fd(n),
					    .events = POLLIN };

			assert_int_equal(poll(&p, 1, POLL_MS), 1);
			continue;
		}
		for (i = 0; i < k; i++)
			cb(&rx[i], arg);
		got += k;
	}
	assert_true(got == want);
}

static void pin_cpu(void)
{
	cpu_set_t set;
	int cpu = sched_getcpu();

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);   /* best effort */
}

/* ---- inject strings ---- */

static void test_config(void **state)
{
	static const char *const bad[] = {
		"drop", "drop=", "=0.1", "drop=2", "drop=1.5", "drop=-0.1",
		"drop=abc", "drop=0.1x", "drop=nan", "drop=inf", "drop= 0.1",
		"drop=0.1,", ",drop=0.1", "drop=0.1,,dup=0.1", "foo=0.1",
		"drop=0.1,drop=0.2", "seed=", "seed=-1", "seed=x", "seed=1.5",
		"seed=99999999999999999999999", "DROP=0.1", "drop=0.1;dup=0.1",
		"seed=0x", "reorder=+0.5", "qp=", "qp=0x1000000", "qp=-1",
		"qp=1,qp=2", "qp=x", "delay=10000001", "delay=-1", "delay=1.5",
		"delay=",
	};
	static const char *const good[] = {
		"", "seed=7", "drop=0", "drop=1", "drop=0.25,dup=0.5",
		"corrupt=1e-3,reorder=.5,seed=0x1234,dup=0,drop=0.01",
		"qp=7", "drop=1,qp=0xffffff", "qp=0x10,dup=0.5", "delay=0",
		"delay=10000000", "delay=500,qp=3,drop=0.5",
	};
	struct sv_net_cfg c = { .port = 0 };
	struct sv_net *n;
	unsigned int i;

	(void)state;
	gid_v4(c.addr, "127.0.0.1");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		c.inject = bad[i];
		n = NULL;
		if (sv_net_open(&n, &c) != -EINVAL)
			fail_msg("accepted \"%s\"", bad[i]);
		assert_null(n);
	}
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		c.inject = good[i];
		if (sv_net_open(&n, &c) != 0)
			fail_msg("refused \"%s\"", good[i]);
		sv_net_close(n);
	}
	c.inject = NULL;
	assert_int_equal(sv_net_open(&n, &c), 0);
	sv_net_close(n);
}

/* ---- batches both ways ---- */

#define NB 150

struct expect {
	const uint8_t *src, *dst;          /* GIDs */
	uint16_t port;
	uint16_t sport[2];                 /* the two bound source ports */
	unsigned int next[2];              /* per sport: next index */
	uint8_t (*data)[1500];
	uint32_t *len;
	unsigned int seen;
};

static void check_batch(const struct sv_net_rx *r, void *arg)
{
	struct expect *e = arg;
	unsigned int s, i;

	assert_memory_equal(r->ip.src, e->src, 16);
	assert_memory_equal(r->ip.dst, e->dst, 16);
	assert_int_equal(r->ip.dport, e->port);
	assert_int_equal(r->ip.ip_id, 0);
	assert_true(r->ip.df);
	assert_true(r->ip.sport == e->sport[0] || r->ip.sport == e->sport[1]);
	s = r->ip.sport == e->sport[1];
	/* packets alternate sports: those of one sport arrive in order */
	i = e->next[s];
	e->next[s] = i + 2;
	assert_true(i < NB);
	assert_int_equal(r->len, e->len[i]);
	assert_memory_equal(r->buf, e->data[i], r->len);
	e->seen++;
}

static void one_way(struct sv_net *from, struct sv_net *to,
		    const char *sip, const char *dip, uint16_t port,
		    unsigned int salt)
{
	static uint8_t data[NB][1500];
	static uint32_t len[NB];
	struct sv_net_tx tx[NB];
	uint8_t sgid[16], dgid[16];
	struct expect e = { .src = sgid, .dst = dgid, .port = port,
			    .next = { 0, 1 }, .data = data, .len = len };
	int p0, p1;
	unsigned int i, j;

	gid_v4(sgid, sip);
	gid_v4(dgid, dip);
	p0 = sv_net_sport(from, 0xc123);
	p1 = sv_net_sport(from, 0xc456);
	assert_true(p0 > 0 && p1 > 0 && p0 != p1);
	e.sport[0] = (uint16_t)p0;
	e.sport[1] = (uint16_t)p1;
	for (i = 0; i < NB; i++) {
		len[i] = 1 + (i * 37 + salt) % 1500;
		for (j = 0; j < len[i]; j++)
			data[i][j] = (uint8_t)(i * 131 + j * 7 + salt);
		tx[i].buf = data[i];
		tx[i].len = len[i];
		memcpy(tx[i].dst, dgid, 16);
		tx[i].sport = (uint16_t)(i & 1 ? p1 : p0);
		tx[i].cont = false;
	}
	/* three calls: one packet, a full batch, the rest */
	assert_int_equal(sv_net_send(from, tx, 1), 1);
	assert_int_equal(sv_net_send(from, tx + 1, 100), 100);
	assert_int_equal(sv_net_send(from, tx + 101, NB - 101), NB - 101);
	recv_n(to, NB, check_batch, &e);
	assert_int_equal(e.seen, NB);
	assert_int_equal(e.next[0], NB);
	assert_int_equal(e.next[1], NB + 1);
}

static void test_batches(void **state)
{
	struct sv_net *a, *b;
	struct sv_net_stats sa, sb;
	uint16_t port;

	(void)state;
	pin_cpu();
	port = open_pair(&a, &b, NULL);
	one_way(a, b, "127.0.0.1", "127.0.0.2", port, 1);
	one_way(b, a, "127.0.0.2", "127.0.0.1", port, 2);
	one_way(a, b, "127.0.0.1", "127.0.0.2", port, 3);
	sv_net_stats(a, &sa);
	sv_net_stats(b, &sb);
	assert_int_equal(sa.tx_pkts, 2 * NB);
	assert_int_equal(sa.rx_pkts, NB);
	assert_int_equal(sb.tx_pkts, NB);
	assert_int_equal(sb.rx_pkts, 2 * NB);
	assert_int_equal(sa.tx_bytes, sb.rx_bytes);
	assert_int_equal(sb.tx_bytes, sa.rx_bytes);
	assert_int_equal(sa.tx_drop_full + sa.tx_err + sa.rx_err, 0);
	assert_int_equal(sa.inj_drop + sa.inj_dup + sa.inj_reorder +
			 sa.inj_corrupt, 0);
	sv_net_close(a);
	sv_net_close(b);
}

/* ---- UDP GSO and GRO ---- */

#define NG 300

struct gro_expect {
	uint8_t (*data)[1100];
	uint32_t *len;
	unsigned int next;
};

static void check_gro(const struct sv_net_rx *r, void *arg)
{
	struct gro_expect *e = arg;

	assert_true(e->next < NG);
	assert_int_equal(r->len, e->len[e->next]);
	assert_memory_equal(r->buf, e->data[e->next], r->len);
	e->next++;
}

/*
 * Runs of packets marked cont (one sport, so they arrive in order): each
 * packet arrives alone and whole, in order, whether the runs went as GSO
 * datagrams (and came whole through GRO on lo) or, with no_offload, one
 * datagram per packet. A cont that breaks the rules (longer than its
 * run's first, after a shorter one, the 65th, to another peer) starts a
 * datagram of its own.
 */
static void gso_round(bool offload)
{
	static uint8_t data[NG][1100];
	static uint32_t len[NG];
	struct sv_net_tx tx[NG];
	struct gro_expect e = { .data = data, .len = len };
	struct sv_net_stats sa, sb;
	struct sv_net *a, *b;
	struct sv_net_cfg ca, cb;
	uint16_t port = 0;
	int sp;

	for (unsigned int t = 0; t < 200 && !port; t++) {
		port = (uint16_t)(20000 + (getpid() * 11 + t * 137) % 20000);
		memset(&ca, 0, sizeof(ca));
		memset(&cb, 0, sizeof(cb));
		ca.port = cb.port = port;
		ca.no_offload = cb.no_offload = !offload;
		gid_v4(ca.addr, "127.0.0.1");
		gid_v4(cb.addr, "127.0.0.2");
		if (sv_net_open(&a, &ca)) {
			port = 0;
			continue;
		}
		if (sv_net_open(&b, &cb)) {
			sv_net_close(a);
			port = 0;
		}
	}
	assert_int_not_equal(port, 0);
	assert_int_equal(sv_net_gso(a), offload);
	sp = sv_net_sport(a, 0xc321);
	assert_true(sp > 0);
	for (unsigned int i = 0; i < NG; i++) {
		/* runs of 1040-byte packets, each ending shorter; now and
		 * then a packet longer than its run's */
		len[i] = i % 50 == 49 ? 300 + i : i % 97 == 96 ? 1090 : 1040;
		for (uint32_t j = 0; j < len[i]; j++)
			data[i][j] = (uint8_t)(i * 31 + j * 13);
		tx[i].buf = data[i];
		tx[i].len = len[i];
		gid_v4(tx[i].dst, "127.0.0.2");
		tx[i].sport = (uint16_t)sp;
		tx[i].cont = offload && i % 50 != 0;
	}
	assert_int_equal(sv_net_send(a, tx, 100), 100);
	assert_int_equal(sv_net_send(a, tx + 100, NG - 100), NG - 100);
	recv_n(b, NG, check_gro, &e);
	assert_int_equal(e.next, NG);
	sv_net_stats(a, &sa);
	sv_net_stats(b, &sb);
	assert_int_equal(sa.tx_pkts, NG);
	assert_int_equal(sb.rx_pkts, NG);
	assert_int_equal(sa.tx_bytes, sb.rx_bytes);
	assert_int_equal(sa.tx_drop_full + sa.tx_err + sb.rx_err, 0);
	if (offload) {
		/* runs of up to 50 packets, cut at the long ones and at
		 * the 64-segment limit: several datagrams of many */
		assert_true(sa.tx_gso >= 6);
		if (sv_net_gro(b))
			assert_true(sb.rx_gro >= 1);
		print_message("%u packets: %llu GSO datagrams sent, %llu GRO "
			      "datagrams received\n", NG,
			      (unsigned long long)sa.tx_gso,
			      (unsigned long long)sb.rx_gro);
	} else {
		assert_int_equal(sa.tx_gso + sb.rx_gro, 0);
		assert_false(sv_net_gro(b));
	}
	sv_net_close(a);
	sv_net_close(b);
}

static void test_gso(void **state)
{
	(void)state;
	gso_round(true);
	gso_round(false);
}

/* ---- source ports ---- */

struct last { uint16_t sport; uint32_t len; };

static void keep_last(const struct sv_net_rx *r, void *arg)
{
	struct last *l = arg;

	l->sport = r->ip.sport;
	l->len = r->len;
}

static void test_sports(void **state)
{
	struct sv_net *a, *b;
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct sv_net_tx tx = { .buf = (const uint8_t *)"x", .len = 1 };
	struct last l;
	int s, p, i, fd, ports[SV_NET_MAX_SOCKS];

	(void)state;
	open_pair(&a, &b, NULL);
	gid_v4(tx.dst, "127.0.0.2");

	/* a taken port moves to the next free one, for good */
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(fd >= 0);
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	for (s = 0xd000; s < 0xd100; s++) {
		sin.sin_port = htons((uint16_t)s);
		if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0)
			break;
	}
	assert_true(s < 0xd100);
	p = sv_net_sport(a, (uint16_t)s);
	assert_true(p >= 0xc000 && p != s);
	assert_int_equal(sv_net_sport(a, (uint16_t)s), p);
	assert_int_equal(sv_net_sport(a, (uint16_t)p), p);
	tx.sport = (uint16_t)s;
	assert_int_equal(sv_net_send(a, &tx, 1), 1);
	recv_n(b, 1, keep_last, &l);
	assert_int_equal(l.sport, p);
	close(fd);

	/* 64 sockets at most (slot 0 is the one above, 1..63 these); then
	 * a port shares the socket of slot (port % 64) */
	for (i = 0; i < (int)SV_NET_MAX_SOCKS - 1; i++) {
		ports[i + 1] = sv_net_sport(a, (uint16_t)(0xe000 + i));
		assert_true(ports[i + 1] > 0);
	}
	ports[0] = p;
	for (i = SV_NET_MAX_SOCKS - 1; i < (int)SV_NET_MAX_SOCKS + 70; i++)
		assert_int_equal(sv_net_sport(a, (uint16_t)(0xe000 + i)),
				 ports[(0xe000 + i) % SV_NET_MAX_SOCKS]);
	p = ports[(0xe000 + SV_NET_MAX_SOCKS + 5) % SV_NET_MAX_SOCKS];
	/* the shared socket's port is the one on the wire */
	tx.sport = (uint16_t)(0xe000 + SV_NET_MAX_SOCKS + 5);
	assert_int_equal(sv_net_send(a, &tx, 1), 1);
	recv_n(b, 1, keep_last, &l);
	assert_int_equal(l.sport, p);
	sv_net_close(a);
	sv_net_close(b);
}

/* ---- 9000 bytes, and what is refused ---- */

static void test_jumbo(void **state)
{
	static uint8_t big[SV_NET_MAX_PKT + 1];
	struct sv_net *a, *b;
	struct sv_net_tx tx = { .buf = big, .len = 9000, .sport = 0xc777 };
	struct sv_net_stats st;
	struct sv_net_rx rx[4];
	struct last l;
	unsigned int i;

	(void)state;
	open_pair(&a, &b, NULL);
	for (i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 251 + (i >> 8));
	gid_v4(tx.dst, "127.0.0.2");
	assert_int_equal(sv_net_send(a, &tx, 1), 1);
	recv_n(b, 1, keep_last, &l);
	assert_int_equal(l.len, 9000);
	/* recv_n's buffers are b's: compare the bytes too */
	tx.len = SV_NET_MAX_PKT;
	assert_int_equal(sv_net_send(a, &tx, 1), 1);
	{
		struct pollfd p = { .fd = sv_net_fd(b), .events = POLLIN };

		assert_int_equal(poll(&p, 1, POLL_MS), 1);
	}
	assert_int_equal(sv_net_recv(b, rx, 4), 1);
	assert_int_equal(rx[0].len, SV_NET_MAX_PKT);
	assert_memory_equal(rx[0].buf, big, SV_NET_MAX_PKT);

	/* too long, the wrong family: refused, counted, nothing sent */
	tx.len = SV_NET_MAX_PKT + 1;
	assert_int_equal(sv_net_send(a, &tx, 1), 0);
	tx.len = 10;
	memset(tx.dst, 0, 16);
	tx.dst[15] = 1;                                  /* ::1 */
	assert_int_equal(sv_net_send(a, &tx, 1), 0);
	sv_net_stats(a, &st);
	assert_int_equal(st.tx_err, 2);
	assert_int_equal(st.tx_pkts, 2);
	assert_int_equal(st.tx_bytes, 9000 + SV_NET_MAX_PKT);
	assert_int_equal(sv_net_recv(b, rx, 4), 0);
	sv_net_close(a);
	sv_net_close(b);
}

/* ---- IPv6 on ::1 (skipped where the host has no IPv6) ---- */

static void test_ipv6(void **state)
{
	struct sv_net_cfg c = { .port = 0 };
	struct sv_net *n = NULL;
	struct sv_net_tx tx = { .buf = (const uint8_t *)"hello6", .len = 6,
				.sport = 0xc066 };
	struct sv_net_rx rx[2];
	struct pollfd p;
	unsigned int t;
	int rc = -EADDRINUSE, sport;

	(void)state;
	c.addr[15] = 1;
	for (t = 0; t < 200 && rc == -EADDRINUSE; t++) {
		c.port = (uint16_t)(20000 + (getpid() * 11 + t * 97) % 20000);
		rc = sv_net_open(&n, &c);
	}
	if (rc == -EADDRNOTAVAIL || rc == -EAFNOSUPPORT)
		skip();
	assert_int_equal(rc, 0);
	memcpy(tx.dst, c.addr, 16);
	sport = sv_net_sport(n, 0xc066);
	assert_true(sport > 0);
	assert_int_equal(sv_net_send(n, &tx, 1), 1);
	p = (struct pollfd){ .fd = sv_net_fd(n), .events = POLLIN };
	assert_int_equal(poll(&p, 1, POLL_MS), 1);
	assert_int_equal(sv_net_recv(n, rx, 2), 1);
	assert_int_equal(rx[0].len, 6);
	assert_memory_equal(rx[0].buf, "hello6", 6);
	assert_memory_equal(rx[0].ip.src, c.addr, 16);
	assert_memory_equal(rx[0].ip.dst, c.addr, 16);
	assert_int_equal(rx[0].ip.sport, sport);
	assert_int_equal(rx[0].ip.dport, c.port);
	/* an IPv4 destination on an IPv6 net is refused */
	gid_v4(tx.dst, "127.0.0.1");
	assert_int_equal(sv_net_send(n, &tx, 1), 0);
	sv_net_close(n);
}

/* ---- the injector ---- */

#define NPKT 100000u
#define PLEN 32u
#define BATCH 64u

/* Packet seq: seq twice, then bytes derived from it. */
static void make_pkt(uint8_t *b, uint32_t seq)
{
	unsigned int i;

	memcpy(b, &seq, 4);
	memcpy(b + 4, &seq, 4);
	for (i = 8; i < PLEN; i++)
		b[i] = (uint8_t)(seq * 2654435761u >> (i & 15)) ^ (uint8_t)i;
}

static unsigned int hamming(const uint8_t *a, const uint8_t *b, size_t n)
{
	unsigned int d = 0;

	while (n--)
		d += (unsigned int)__builtin_popcount(a[n] ^ b[n]);
	return d;
}

struct inj_log {
	uint32_t *ev;                  /* seq << 9 | flipped bit + 1 (0: none) */
	unsigned int nev;
	uint8_t *copies;               /* per seq */
	uint8_t *corrupt;              /* per seq: received corrupted */
	uint32_t max_seen;
	bool any;
	unsigned int reordered;        /* first arrivals after a later seq */
};

static void inj_rx(const struct sv_net_rx *r, void *arg)
{
	struct inj_log *g = arg;
	uint8_t want[PLEN];
	uint32_t s0, s1, seq;
	unsigned int flip = 0, i;

	assert_int_equal(r->len, PLEN);
	memcpy(&s0, r->buf, 4);
	memcpy(&s1, r->buf + 4, 4);
	/* one bit at most is flipped: one of the two copies of seq holds */
	seq = s0;
	if (s0 != s1) {
		make_pkt(want, s0);
		if (s0 >= NPKT || hamming(want, r->buf, PLEN) != 1)
			seq = s1;
	}
	assert_true(seq < NPKT);
	make_pkt(want, seq);
	switch (hamming(want, r->buf, PLEN)) {
	case 0:
		break;
	case 1:
		for (i = 0; i < PLEN * 8; i++)
			if ((want[i / 8] ^ r->buf[i / 8]) >> (i % 8) & 1)
				flip = i + 1;
		g->corrupt[seq] = 1;
		break;
	default:
		fail_msg("packet %u: more than one bit changed", seq);
	}
	if (!g->copies[seq] && g->any && seq < g->max_seen)
		g->reordered++;
	if (!g->any || seq > g->max_seen)
		g->max_seen = seq;
	g->any = true;
	assert_true(g->copies[seq] < 2);
	g->copies[seq]++;
	g->ev[g->nev++] = seq << 9 | flip;
}

/* NPKT packets a -> b through the injector; the log and a's counters. */
static void inj_run(const char *inject, struct inj_log *g,
		    struct sv_net_stats *st)
{
	static uint8_t bufs[BATCH][PLEN];
	struct sv_net_tx tx[BATCH];
	struct sv_net *a, *b;
	uint64_t received = 0;
	unsigned int i, seq = 0;

	memset(g, 0, sizeof(*g));
	g->ev = calloc(2 * NPKT, sizeof(*g->ev));
	g->copies = calloc(NPKT, 1);
	g->corrupt = calloc(NPKT, 1);
	assert_non_null(g->ev);
	assert_non_null(g->copies);
	assert_non_null(g->corrupt);
	open_pair(&a, &b, inject);
	for (i = 0; i < BATCH; i++) {
		tx[i].buf = bufs[i];
		tx[i].len = PLEN;
		gid_v4(tx[i].dst, "127.0.0.2");
		tx[i].sport = 0xc0de;
		tx[i].cont = false;
	}
	while (seq < NPKT) {
		unsigned int k = NPKT - seq < BATCH ? NPKT - seq : BATCH;

		for (i = 0; i < k; i++)
			make_pkt(bufs[i], seq + i);
		/* dropped and held packets count as taken */
		assert_int_equal(sv_net_send(a, tx, k), k);
		seq += k;
		/* wait for everything the kernel took so far */
		sv_net_stats(a, st);
		recv_n(b, (unsigned int)(st->tx_pkts - received), inj_rx, g);
		received = st->tx_pkts;
	}
	sv_net_stats(a, st);
	assert_int_equal(st->tx_drop_full + st->tx_err, 0);
	assert_int_equal(g->nev, st->tx_pkts);
	sv_net_close(a);
	sv_net_close(b);
}

static void inj_free(struct inj_log *g)
{
	free(g->ev);
	free(g->copies);
	free(g->corrupt);
}

static void in_range(uint64_t v, double mean, double sd, const char *what)
{
	/* six standard deviations: with a fixed seed the outcome is fixed,
	 * the bounds only say the generator behaves like one */
	if ((double)v < mean - 6 * sd || (double)v > mean + 6 * sd)
		fail_msg("%s: %llu, expected %.0f +- %.0f", what,
			 (unsigned long long)v, mean, 6 * sd);
}

static void test_injector(void **state)
{
	const char *cfg = "seed=42,drop=0.1,dup=0.1,reorder=0.1,corrupt=0.1";
	struct sv_net_stats st, st2;
	struct inj_log g, g2;
	unsigned int i, missing = 0, twice = 0, corrupted = 0;
	double kept = NPKT * 0.9, pr = 0.1 / 1.1;

	(void)state;
	pin_cpu();
	inj_run(cfg, &g, &st);
	for (i = 0; i < NPKT; i++) {
		missing += !g.copies[i];
		twice += g.copies[i] == 2;
		corrupted += g.corrupt[i];
	}
	/* every decision is visible at the receiver (a packet held at the
	 * end of a call goes out at its end, in order, and is not counted
	 * as reordered) */
	assert_int_equal(missing, st.inj_drop);
	assert_int_equal(twice, st.inj_dup);
	assert_int_equal(corrupted, st.inj_corrupt);
	assert_int_equal(g.reordered, st.inj_reorder);
	assert_int_equal(st.tx_pkts, g.nev);
	print_message("injector, seed 42, %u packets: drop %llu dup %llu "
		      "reorder %llu corrupt %llu, sent %llu\n", NPKT,
		      (unsigned long long)st.inj_drop,
		      (unsigned long long)st.inj_dup,
		      (unsigned long long)st.inj_reorder,
		      (unsigned long long)st.inj_corrupt,
		      (unsigned long long)st.tx_pkts);
	/* rates: drop on every packet; corrupt and dup on the kept ones;
	 * reorder on the kept ones while nothing is held (p / (1 + p)),
	 * less those held last in a call (about one call in ten) */
	in_range(st.inj_drop, NPKT * 0.1, 94.9, "drop");
	in_range(st.inj_dup, kept * 0.1, 90.5, "dup");
	in_range(st.inj_corrupt, kept * 0.1, 90.5, "corrupt");
	in_range(st.inj_reorder, kept * pr, 86.3, "reorder");

	/* the same seed: the same decisions, packet for packet */
	inj_run(cfg, &g2, &st2);
	assert_memory_equal(&st, &st2, sizeof(st));
	assert_int_equal(g.nev, g2.nev);
	assert_memory_equal(g.ev, g2.ev, g.nev * sizeof(*g.ev));
	inj_free(&g2);

	/* another seed: other decisions */
	inj_run("seed=43,drop=0.1,dup=0.1,reorder=0.1,corrupt=0.1", &g2,
		&st2);
	assert_true(g.nev != g2.nev ||
		    memcmp(g.ev, g2.ev, g.nev * sizeof(*g.ev)) != 0);
	inj_free(&g2);
	inj_free(&g);
}

/* drop=1 drops everything; corrupt=1 flips exactly one bit of each. */
static void test_injector_extremes(void **state)
{
	struct sv_net_stats st;
	struct inj_log g;
	unsigned int i;

	(void)state;
	pin_cpu();
	inj_run("drop=1", &g, &st);
	assert_int_equal(st.inj_drop, NPKT);
	assert_int_equal(g.nev, 0);
	inj_free(&g);
	inj_run("corrupt=1,seed=5", &g, &st);
	assert_int_equal(st.inj_corrupt, NPKT);
	assert_int_equal(g.nev, NPKT);
	for (i = 0; i < NPKT; i++)
		assert_true(g.corrupt[i] && (g.ev[i] & 0x1ff) != 0);
	inj_free(&g);
	/* qp=: only the packets whose BTH names that QP (make_pkt's bytes
	 * 5..7 are seq's bytes 1..3: QP 0x010000 is seq 256..511) */
	inj_run("drop=1,qp=0x010000", &g, &st);
	assert_int_equal(st.inj_drop, 256);
	assert_int_equal(g.nev, NPKT - 256);
	for (i = 0; i < NPKT; i++)
		assert_int_equal(g.copies[i], i >= 256 && i < 512 ? 0 : 1);
	inj_free(&g);
}

/* delay=US: what is sent waits in the net (nothing reaches the socket
 * until it is due and a send or tick lets it go), then arrives whole and
 * in order; a send meanwhile goes behind it. */
static void rx_seq(const struct sv_net_rx *r, void *arg)
{
	uint32_t **next = arg, seq;

	assert_int_equal(r->len, PLEN);
	memcpy(&seq, r->buf, 4);
	*(*next)++ = seq;
}

static void test_delay(void **state)
{
	struct sv_net *a, *b;
	struct sv_net_tx tx[8];
	static uint8_t bufs[16][PLEN];
	struct sv_net_rx rx[SV_NET_RX_BATCH];
	struct sv_net_stats st;
	uint32_t got[16], *next = got;
	unsigned int i;

	(void)state;
	open_pair(&a, &b, "delay=20000");
	for (i = 0; i < 16; i++)
		make_pkt(bufs[i], i);
	for (i = 0; i < 8; i++) {
		tx[i].len = PLEN;
		gid_v4(tx[i].dst, "127.0.0.2");
		tx[i].sport = 0xc0de;
		tx[i].cont = false;
		tx[i].buf = bufs[i];
	}
	assert_int_equal(sv_net_send(a, tx, 8), 8);
	assert_int_equal(sv_net_delayed(a), 8);
	/* not on the wire: the net holds them */
	assert_int_equal(sv_net_recv(b, rx, SV_NET_RX_BATCH), 0);
	for (i = 0; i < 8; i++)
		tx[i].buf = bufs[8 + i];
	assert_int_equal(sv_net_send(a, tx, 8), 8);
	/* ticks (bounded) until all have left: the wait says how long */
	for (i = 0; i < 1000 && sv_net_delayed(a); i++) {
		uint64_t w = sv_net_tick(a);

		assert_true(w <= 20000000u);
		if (w)
			usleep((useconds_t)(w / 1000 + 1));
	}
	assert_int_equal(sv_net_delayed(a), 0);
	recv_n(b, 16, rx_seq, &next);
	for (i = 0; i < 16; i++)
		assert_int_equal(got[i], i);
	sv_net_stats(a, &st);
	assert_int_equal(st.inj_delay, 16);
	assert_int_equal(st.tx_pkts, 16);
	sv_net_close(a);
	sv_net_close(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config),
		cmocka_unit_test(test_batches),
		cmocka_unit_test(test_gso),
		cmocka_unit_test(test_sports),
		cmocka_unit_test(test_jumbo),
		cmocka_unit_test(test_ipv6),
		cmocka_unit_test(test_injector),
		cmocka_unit_test(test_injector_extremes),
		cmocka_unit_test(test_delay),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
