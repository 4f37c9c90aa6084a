// SPDX-License-Identifier: MIT
/*
 * The send side of the UDP transport (net.h, struct sv_net in net_int.h):
 * the lazily created source-port sockets, sendmmsg batching with UDP GSO,
 * and the fault injector's work on each packet (its settings are parsed in
 * net.c) with its delay ring. One thread at a time.
 *
 * sv_net_send turns each packet into one or more "emissions" (a datagram
 * to hand to the kernel: the caller's bytes, maybe with one byte replaced
 * by its bit-flipped copy, to a destination sockaddr, from a socket slot)
 * in a staging array inside struct sv_net. A flush groups the staged
 * emissions by socket (a counting sort, so each socket's packets keep
 * their order) and gives each group to one sendmmsg. A corrupted packet is
 * sent without copying it: its iovec is [bytes before the flipped byte]
 * [the flipped byte] [bytes after]. A packet the injector holds back
 * (reorder) must outlive the caller's buffer, so it is copied into the
 * hold buffer, the only copy on the send path. With GSO, a run of staged
 * packets the caller marked cont becomes one datagram: their iovecs one
 * after the other and a UDP_SEGMENT control message with the first one's
 * length.
 *
 * Nothing here allocates, and nothing blocks (MSG_DONTWAIT).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "device/roce/net_int.h"

/* ================= the injector's draws ================= */

/* xorshift64* (Vigna): small, fast, and good enough to draw decisions. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* Uniform in [0, 1): the top 53 bits. */
static double rng_unit(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) * 0x1p-53;
}

/* ================= source-port sockets ================= */

/* A send socket bound to addr:want, or to the next free port of
 * SPORT_LO..SPORT_HI. The fd (and *bound), or -errno. */
static int sock_new(struct sv_net *n, uint16_t want, uint16_t *bound)
{
	int fam = n->v4 ? AF_INET : AF_INET6;
	int one = 1, buf = SOCK_BUF_BYTES, small = 4096;
	uint32_t port = want, tries;
	union sv_sa sa;
	socklen_t len;
	int fd, rc;

	fd = socket(fam, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (n->v4) {
		/* DF on every packet; with it the kernel puts IP id 0 on an
		 * unconnected socket's packets, as the ICRC assumes */
		int pmtu = IP_PMTUDISC_DO;

		if (setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu,
			       sizeof(pmtu)) < 0)
			goto fail;
	} else {
		int pmtu = IPV6_PMTUDISC_DO;

		if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one,
			       sizeof(one)) < 0 ||
		    setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu,
			       sizeof(pmtu)) < 0)
			goto fail;
	}
	/* multicast (UD to a group) leaves from the address's interface and
	 * is not looped back to this host: the daemon delivered it to its
	 * own QPs already (best effort) */
	if (n->v4) {
		struct ip_mreqn m;
		int zero = 0;

		memset(&m, 0, sizeof(m));
		memcpy(&m.imr_address.s_addr, n->addr + 12, 4);
		m.imr_ifindex = (int)n->ifindex;
		setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &m, sizeof(m));
		setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &zero,
			   sizeof(zero));
	} else {
		int zero = 0, ifi = (int)n->ifindex;

		if (ifi)
			setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, &ifi,
				   sizeof(ifi));
		setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, &zero,
			   sizeof(zero));
	}
	/* best effort: a deep send queue, and little room for anything
	 * sent to a source port (nobody should) */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));

	/* want first, then the range (after want when want is in it),
	 * skipping ports we hold already: SO_REUSEADDR would let us bind
	 * them twice */
	for (tries = 0; tries <= SPORT_HI - SPORT_LO + 1; tries++) {
		if (tries) {
			port = port >= SPORT_LO && port < SPORT_HI ? port + 1
								   : SPORT_LO;
			if (n->by_port[port])
				continue;
		}
		len = sa_make(n, &sa, n->addr, (uint16_t)port);
		if (bind(fd, &sa.sa, len) == 0)
			break;
		if (errno != EADDRINUSE && errno != EACCES)
			goto fail;
	}
	if (tries > SPORT_HI - SPORT_LO + 1) {
		errno = EADDRINUSE;
		goto fail;
	}
	len = sizeof(sa);
	if (getsockname(fd, &sa.sa, &len) < 0)
		goto fail;
	*bound = ntohs(n->v4 ? sa.v4.sin_port : sa.v6.sin6_port);
	return fd;
fail:
	rc = -errno;
	close(fd);
	return rc;
}

/* The slot of source port want (creating its socket), or -errno. */
static int sock_slot(struct sv_net *n, uint16_t want)
{
	uint16_t bound;
	int fd;

	if (n->by_port[want])
		return n->by_port[want] - 1;
	if (n->nsock == SV_NET_MAX_SOCKS) {
		n->by_port[want] = (uint8_t)(want % SV_NET_MAX_SOCKS + 1);
		return want % SV_NET_MAX_SOCKS;
	}
	fd = sock_new(n, want, &bound);
	if (fd < 0)
		return fd;
	n->sock[n->nsock].fd = fd;
	n->sock[n->nsock].port = bound;
	n->nsock++;
	n->by_port[want] = (uint8_t)n->nsock;
	n->by_port[bound] = (uint8_t)n->nsock;
	return (int)n->nsock - 1;
}

int sv_net_sport(struct sv_net *n, uint16_t want)
{
	int slot = sock_slot(n, want);

	return slot < 0 ? slot : n->sock[slot].port;
}

/* ================= send ================= */

/* e's bytes as iovecs at v (a corrupted packet: three): how many. */
static unsigned int emit_iov(const struct emit *e, struct iovec *v)
{
	if (e->flip == NO_FLIP) {
		v[0].iov_base = (void *)e->buf;
		v[0].iov_len = e->len;
		return 1;
	}
	v[0].iov_base = (void *)e->buf;
	v[0].iov_len = e->flip;
	v[1].iov_base = (void *)&e->flipped;
	v[1].iov_len = 1;
	v[2].iov_base = (void *)(e->buf + e->flip + 1);
	v[2].iov_len = e->len - e->flip - 1;
	return 3;
}

/* May emission c (stage index ci) join the datagram of first (k packets,
 * bytes long so far, its last one at stage index ci - 1 and full)? */
static bool gso_joins(const struct sv_net *n, const struct emit *first,
		      const struct emit *c, unsigned int k, uint32_t bytes)
{
	return n->gso && c->cont && c->flip == NO_FLIP &&
	       first->flip == NO_FLIP && c->len && c->len <= first->len &&
	       k < SV_NET_GSO_SEGS && bytes + c->len <= SV_NET_GSO_BYTES &&
	       !memcmp(&c->dst, &first->dst, sizeof(c->dst));
}

/* The group's emissions order[0..cnt) as datagrams in txmsg: how many. */
static unsigned int build_msgs(struct sv_net *n, const uint16_t *order,
			       unsigned int cnt)
{
	unsigned int i = 0, nm = 0, nv = 0;

	while (i < cnt) {
		const struct emit *e = &n->stage[order[i]];
		struct msghdr *h = &n->txmsg[nm].msg_hdr;
		unsigned int k = 1, v0 = nv;
		uint32_t bytes = e->len, last = e->len;

		h->msg_name = (void *)&e->dst;
		h->msg_namelen = n->v4 ? sizeof(e->dst.v4) : sizeof(e->dst.v6);
		h->msg_flags = 0;
		nv += emit_iov(e, n->txiov + nv);
		/* packets staged one after the other, each earlier one as
		 * long as the first */
		while (i + k < cnt && order[i + k] == order[i + k - 1] + 1 &&
		       last == e->len &&
		       gso_joins(n, e, &n->stage[order[i + k]], k, bytes)) {
			const struct emit *c = &n->stage[order[i + k]];

			nv += emit_iov(c, n->txiov + nv);
			bytes += c->len;
			last = c->len;
			k++;
		}
		h->msg_iov = n->txiov + v0;
		h->msg_iovlen = nv - v0;
		if (k > 1) {
			struct cmsghdr *cm;
			uint16_t seg = (uint16_t)e->len;

			h->msg_control = n->txctl[nm].buf;
			h->msg_controllen = sizeof(n->txctl[nm].buf);
			cm = CMSG_FIRSTHDR(h);
			cm->cmsg_level = SOL_UDP;
			cm->cmsg_type = UDP_SEGMENT;
			cm->cmsg_len = CMSG_LEN(sizeof(seg));
			memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
		} else {
			h->msg_control = NULL;
			h->msg_controllen = 0;
		}
		n->txfirst[nm] = (uint16_t)i;
		n->txnseg[nm] = (uint16_t)k;
		nm++;
		i += k;
	}
	return nm;
}

/* Datagrams [from, to) of the group were not sent: count their packets
 * in *ctr and their primaries as lost. */
static void msgs_lost(struct sv_net *n, const uint16_t *order,
		      unsigned int from, unsigned int to, uint64_t *ctr)
{
	for (unsigned int m = from; m < to; m++) {
		ctr_add(ctr, n->txnseg[m]);
		for (unsigned int j = 0; j < n->txnseg[m]; j++)
			n->tx_lost_primary +=
				n->stage[order[n->txfirst[m] + j]].primary;
	}
}

/* Send one socket's group of staged emissions, order[0..cnt). */
static void flush_group(struct sv_net *n, int fd, const uint16_t *order,
			unsigned int cnt)
{
	struct mmsghdr *m = n->txmsg;
	unsigned int nm = build_msgs(n, order, cnt), done = 0;

	while (done < nm) {
		int r = sendmmsg(fd, m + done, nm - done, MSG_DONTWAIT);

		if (r > 0) {
			uint64_t bytes = 0, pkts = 0;

			for (unsigned int i = done; i < done + (unsigned int)r;
			     i++) {
				bytes += m[i].msg_len;
				pkts += n->txnseg[i];
				if (n->txnseg[i] > 1)
					ctr_add(&n->st.tx_gso, 1);
			}
			ctr_add(&n->st.tx_pkts, pkts);
			ctr_add(&n->st.tx_bytes, bytes);
			done += (unsigned int)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
			      errno == ENOBUFS)) {
			/* the socket (or the device queue) is full: the
			 * rest of the group is lost, as on a wire */
			msgs_lost(n, order, done, nm, &n->st.tx_drop_full);
			return;
		}
		if (n->txnseg[done] > 1 && r < 0 && errno != EMSGSIZE) {
			/* the kernel has no GSO for this (EIO: no checksum
			 * offload on the way; EINVAL, ENOPROTOOPT: too
			 * old): packet by packet from here on */
			__atomic_store_n(&n->gso, false, __ATOMIC_RELAXED);
			flush_group(n, fd, order + n->txfirst[done],
				    cnt - n->txfirst[done]);
			return;
		}
		/* this datagram was refused (EMSGSIZE: over the path MTU,
		 * with DF): skip it, send the rest */
		msgs_lost(n, order, done, done + 1, &n->st.tx_err);
		done++;
	}
}

/* Send everything staged, one sendmmsg group per socket. */
static void flush(struct sv_net *n)
{
	uint16_t start[SV_NET_MAX_SOCKS + 1] = { 0 };
	unsigned int i, s;

	if (!n->nstage)
		return;
	/* counting sort by slot: each socket's emissions, in order */
	for (i = 0; i < n->nstage; i++)
		start[n->stage[i].slot + 1]++;
	for (s = 0; s < SV_NET_MAX_SOCKS; s++)
		start[s + 1] += start[s];
	{
		uint16_t pos[SV_NET_MAX_SOCKS];

		memcpy(pos, start, sizeof(pos));
		for (i = 0; i < n->nstage; i++)
			n->order[pos[n->stage[i].slot]++] = (uint16_t)i;
	}
	for (s = 0; s < n->nsock; s++)
		if (start[s + 1] > start[s])
			flush_group(n, n->sock[s].fd, n->order + start[s],
				    start[s + 1] - start[s]);
	n->nstage = 0;
	n->hold.staged = false;
}

static void stage(struct sv_net *n, const uint8_t *buf, uint32_t len,
		  uint32_t flip, uint8_t flipped, uint8_t slot, bool primary,
		  const union sv_sa *dst)
{
	struct emit *e = &n->stage[n->nstage++];

	e->cont = false;

	e->buf = buf;
	e->len = len;
	e->flip = flip;
	e->flipped = flipped;
	e->slot = slot;
	e->primary = primary;
	e->dst = *dst;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A packet the injector lets through: staged, or with delay=US a copy of
 * it (its flipped byte in place) waits in the ring; a full ring sends it
 * now. */
static void emit_pkt(struct sv_net *n, const uint8_t *buf, uint32_t len,
		     uint32_t flip, uint8_t flipped, uint8_t slot,
		     bool primary, const union sv_sa *dst)
{
	struct delayed *d;

	if (!n->ij.delay_ns || !n->dq || n->dq_n == DELAY_SLOTS) {
		stage(n, buf, len, flip, flipped, slot, primary, dst);
		return;
	}
	d = &n->dq[(n->dq_head + n->dq_n) % DELAY_SLOTS];
	if (len)
		memcpy(d->buf, buf, len);
	if (flip != NO_FLIP)
		d->buf[flip] = flipped;
	d->len = len;
	d->slot = slot;
	d->dst = *dst;
	d->due = mono_ns() + n->ij.delay_ns;
	__atomic_store_n(&n->dq_n, n->dq_n + 1, __ATOMIC_RELAXED);
	ctr_add(&n->st.inj_delay, 1);
}

uint32_t sv_net_delayed(const struct sv_net *n)
{
	return __atomic_load_n(&n->dq_n, __ATOMIC_RELAXED);
}

uint64_t sv_net_tick(struct sv_net *n)
{
	uint64_t now;
	bool any = false;

	if (!n->dq_n)
		return 0;
	now = mono_ns();
	while (n->dq_n) {
		struct delayed *d = &n->dq[n->dq_head];

		if (d->due > now)
			break;
		if (n->nstage > STAGE - EMIT_MAX_PER_PKT)
			flush(n);
		stage(n, d->buf, d->len, NO_FLIP, 0, d->slot, false, &d->dst);
		n->dq_head = (n->dq_head + 1) % DELAY_SLOTS;
		__atomic_store_n(&n->dq_n, n->dq_n - 1, __ATOMIC_RELAXED);
		any = true;
	}
	/* sent before a slot released here can be written again */
	if (any)
		flush(n);
	return n->dq_n ? n->dq[n->dq_head].due - now : 0;
}

/* Stage the held packet (after the one just staged). */
static void release_hold(struct sv_net *n)
{
	unsigned int c;

	for (c = 0; c < n->hold.copies; c++)
		emit_pkt(n, n->hold.buf, n->hold.len, NO_FLIP, 0, n->hold.slot,
		      false, &n->hold.dst);
	n->hold.held = false;
	n->hold.staged = true;
}

/* Is p a RoCEv2 packet to QP qpn (its BTH's destination)? */
static bool to_qp(const struct sv_net_tx *p, uint32_t qpn)
{
	return p->len >= 8 &&
	       ((uint32_t)p->buf[5] << 16 | (uint32_t)p->buf[6] << 8 |
		p->buf[7]) == qpn;
}

/* Is local QP lqpn one of the injector's? */
static bool of_qps(const struct inj_cfg *c, uint32_t lqpn)
{
	uint32_t i = lqpn & c->qps_mask;

	return (__atomic_load_n(&c->qps[i >> 3], __ATOMIC_RELAXED) >>
		(i & 7)) & 1;
}

/* One packet through the injector: staged (0, 1 or 2 copies, maybe the
 * held packet after it), dropped, or held. */
static void inject(struct sv_net *n, const struct sv_net_tx *p,
		   uint8_t slot, const union sv_sa *dst)
{
	/* four draws per packet, whatever the outcome */
	bool drop = rng_unit(&n->ij.rng) < n->ij.p_drop;
	bool corrupt = rng_unit(&n->ij.rng) < n->ij.p_corrupt;
	bool dup = rng_unit(&n->ij.rng) < n->ij.p_dup;
	bool reorder = rng_unit(&n->ij.rng) < n->ij.p_reorder;
	uint32_t flip = NO_FLIP;
	uint8_t flipped = 0;
	unsigned int c, copies = dup ? 2 : 1;

	if (drop) {
		ctr_add(&n->st.inj_drop, 1);
		return;
	}
	if (corrupt && p->len) {
		uint64_t bit = rng_next(&n->ij.rng) % ((uint64_t)p->len * 8);

		flip = (uint32_t)(bit >> 3);
		flipped = (uint8_t)(p->buf[flip] ^ (1u << (bit & 7)));
		ctr_add(&n->st.inj_corrupt, 1);
	}
	if (dup)
		ctr_add(&n->st.inj_dup, 1);
	if (reorder && !n->hold.held) {
		/* the hold buffer may still be staged from its last use */
		if (n->hold.staged)
			flush(n);
		if (p->len)
			memcpy(n->hold.buf, p->buf, p->len);
		if (flip != NO_FLIP)
			n->hold.buf[flip] = flipped;
		n->hold.len = p->len;
		n->hold.copies = (uint8_t)copies;
		n->hold.slot = slot;
		n->hold.dst = *dst;
		n->hold.held = true;
		return;
	}
	for (c = 0; c < copies; c++)
		emit_pkt(n, p->buf, p->len, flip, flipped, slot, c == 0, dst);
	if (n->hold.held) {
		/* counted once it really went out of order */
		ctr_add(&n->st.inj_reorder, 1);
		release_hold(n);
	}
}
unsigned sv_net_send(struct sv_net *n, const struct sv_net_tx *pkts,
		     unsigned cnt)
{
	unsigned int i, taken = 0;

	n->tx_lost_primary = 0;
	if (unlikely(__atomic_load_n(&n->ij_gen, __ATOMIC_ACQUIRE) !=
		     n->ij_seen)) {
		pthread_mutex_lock(&n->ij_mu);
		n->ij = n->ij_new;
		n->ij_seen = n->ij_gen;
		n->dq = n->dq_made;
		pthread_mutex_unlock(&n->ij_mu);
		if (n->ij.inj)
			n->gso = false; /* the injector works on packets */
	}
	/* what waited its delay goes first */
	if (unlikely(n->dq_n))
		(void)sv_net_tick(n);
	for (i = 0; i < cnt; i++) {
		const struct sv_net_tx *p = &pkts[i];
		union sv_sa dst;
		int slot;

		if (unlikely(p->len > SV_NET_MAX_PKT ||
			     gid_is_v4(p->dst) != n->v4)) {
			ctr_add(&n->st.tx_err, 1);
			continue;
		}
		slot = sock_slot(n, p->sport);
		if (unlikely(slot < 0)) {
			ctr_add(&n->st.tx_err, 1);
			continue;
		}
		sa_make(n, &dst, p->dst, n->port);
		taken++;
		if (!n->ij.inj || (n->ij.has_qp && !to_qp(p, n->ij.qpn)) ||
		    (n->ij.qps && !of_qps(&n->ij, p->lqpn))) {
			stage(n, p->buf, p->len, NO_FLIP, 0, (uint8_t)slot,
			      true, &dst);
			n->stage[n->nstage - 1].cont = p->cont && i &&
				n->nstage > 1;
		} else
			inject(n, p, (uint8_t)slot, &dst);
		if (n->nstage > STAGE - EMIT_MAX_PER_PKT)
			flush(n);
	}
	/* Reordering is within a call: a packet still held goes out last.
	 * Held across calls, the last packet of a burst would wait for the
	 * next burst, and a peer that waits for it (an ACK, a message's last
	 * packet) would see a loss, not a reordering. */
	if (n->hold.held)
		release_hold(n);
	flush(n);
	return taken - n->tx_lost_primary;
}
