// SPDX-License-Identifier: MIT
/*
 * UD multicast on the wire: receiving the datagrams of the groups QPs of
 * this daemon are attached to (the group table is ../ctl/mcast.c; sending is
 * sv_roce_ud_send to the group's address).
 *
 * A socket bound to a unicast address never sees multicast, and the
 * unicast socket of a transport takes no SO_REUSEADDR (a second daemon on
 * the address must fail), so each group gets a socket of its own: bound to
 * group:4791 (SO_REUSEADDR: other receivers of the group on this host may
 * bind it too), IP_MULTICAST_ALL off (only the groups it joined), joined
 * (IP_ADD_MEMBERSHIP / IPV6_JOIN_GROUP) on the interface of every address
 * of the group's family the device serves. Closing it leaves the group.
 *
 * The sockets sit in one epoll set, which the wire thread polls with its
 * transports; it reads them under sv_dev.lock (the control thread opens
 * and closes them under it too) and hands each datagram, once checked, to
 * every QP attached to the group. A datagram whose source is one of our
 * own addresses is dropped: this daemon delivered it to its own QPs when
 * it was sent (the send sockets have IP_MULTICAST_LOOP off as well).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "device/roce/roce_int.h"

#ifndef IP_MULTICAST_ALL
#define IP_MULTICAST_ALL 49
#endif
#ifndef IPV6_MULTICAST_ALL
#define IPV6_MULTICAST_ALL 29
#endif

#define MC_RX_BURST 32u         /* datagrams per group and wire pass */

static struct {
	bool started;
	int epfd;
	uint16_t port;
	uint32_t nopen;            /* sockets open (read by the wire thread) */
	bool open[SV_MAX_MCAST_GRP];
	int fd[SV_MAX_MCAST_GRP];
	uint8_t gid[SV_MAX_MCAST_GRP][16];
} mc;

int sv_roce_mcast_start(uint16_t port)
{
	mc.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (mc.epfd < 0)
		return -errno;
	mc.port = port;
	mc.started = true;
	return 0;
}

int sv_roce_mcast_fd(void)
{
	return mc.started ? mc.epfd : -1;
}

void sv_roce_mcast_stop(void)
{
	if (!mc.started)
		return;
	for (unsigned int i = 0; i < SV_MAX_MCAST_GRP; i++)
		sv_roce_mcast_leave(i);
	close(mc.epfd);
	mc.epfd = -1;
	mc.started = false;
}

/* Join gid on the interface of device address k (same family): 0 or
 * -errno. */
static int join_on(int fd, bool v4, const uint8_t gid[16], unsigned int k)
{
	const struct sv_rsp_gid *a = &sv_dev.gid[k];
	int r;

	if (v4) {
		struct ip_mreqn m;

		memset(&m, 0, sizeof(m));
		memcpy(&m.imr_multiaddr.s_addr, gid + 12, 4);
		memcpy(&m.imr_address.s_addr, a->gid + 12, 4);
		m.imr_ifindex = (int)a->ndev_ifindex;
		r = setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m,
			       sizeof(m));
	} else {
		struct ipv6_mreq m;

		memset(&m, 0, sizeof(m));
		memcpy(&m.ipv6mr_multiaddr, gid, 16);
		m.ipv6mr_interface = a->ndev_ifindex;
		r = setsockopt(fd, IPPROTO_IPV6, IPV6_JOIN_GROUP, &m,
			       sizeof(m));
	}
	/* two addresses on one interface: joined there already */
	return r < 0 && errno != EADDRINUSE ? -errno : 0;
}

int sv_roce_mcast_join(unsigned int idx, const uint8_t gid[16])
{
	bool v4 = sv_gid_is_v4(gid);
	int one = 1, zero = 0, buf = 4 << 20, fd, ret = -EADDRNOTAVAIL;
	struct epoll_event ev;
	struct sockaddr_in6 s6;
	struct sockaddr_in s4;
	unsigned int joined = 0;

	if (!mc.started || idx >= SV_MAX_MCAST_GRP)
		return 0;
	sv_roce_mcast_leave(idx);
	fd = socket(v4 ? AF_INET : AF_INET6,
		    SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	if (v4) {
		setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero,
			   sizeof(zero));
		memset(&s4, 0, sizeof(s4));
		s4.sin_family = AF_INET;
		s4.sin_port = htons(mc.port);
		memcpy(&s4.sin_addr.s_addr, gid + 12, 4);
		if (bind(fd, (struct sockaddr *)&s4, sizeof(s4)) < 0)
			goto fail_errno;
	} else {
		if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one,
			       sizeof(one)) < 0)
			goto fail_errno;
		setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_ALL, &zero,
			   sizeof(zero));
		memset(&s6, 0, sizeof(s6));
		s6.sin6_family = AF_INET6;
		s6.sin6_port = htons(mc.port);
		memcpy(&s6.sin6_addr, gid, 16);
		/* a group of interface- or link-local scope needs one: the
		 * interface of our first IPv6 address */
		if ((gid[1] & 0x0f) <= 2)
			for (unsigned int k = 0; k < SV_GID_TBL_LEN; k++)
				if (sv_dev.gid[k].valid && sv_roce_has_net(k) &&
				    !sv_gid_is_v4(sv_dev.gid[k].gid)) {
					s6.sin6_scope_id =
						sv_dev.gid[k].ndev_ifindex;
					break;
				}
		if (bind(fd, (struct sockaddr *)&s6, sizeof(s6)) < 0)
			goto fail_errno;
	}
	for (unsigned int k = 0; k < SV_GID_TBL_LEN; k++) {
		if (!sv_dev.gid[k].valid || !sv_roce_has_net(k) ||
		    sv_gid_is_v4(sv_dev.gid[k].gid) != v4)
			continue;
		ret = join_on(fd, v4, gid, k);
		if (ret)
			sv_log(SV_LOG_WARN, "mcast: cannot join on gid[%u]: %s",
			       k, strerror(-ret));
		else
			joined++;
	}
	if (!joined)
		goto fail;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.u32 = idx;
	if (epoll_ctl(mc.epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		goto fail_errno;
	mc.fd[idx] = fd;
	memcpy(mc.gid[idx], gid, 16);
	mc.open[idx] = true;
	__atomic_store_n(&mc.nopen, mc.nopen + 1, __ATOMIC_RELEASE);
	return 0;
fail_errno:
	ret = -errno;
fail:
	close(fd);
	return ret;
}

void sv_roce_mcast_leave(unsigned int idx)
{
	if (idx >= SV_MAX_MCAST_GRP || !mc.open[idx])
		return;
	epoll_ctl(mc.epfd, EPOLL_CTL_DEL, mc.fd[idx], NULL);
	close(mc.fd[idx]);          /* leaves the group */
	mc.open[idx] = false;
	mc.fd[idx] = -1;
	__atomic_store_n(&mc.nopen, mc.nopen - 1, __ATOMIC_RELEASE);
}

/* One datagram of group slot idx from src:sport. */
static void mc_one(unsigned int idx, const uint8_t *buf, size_t len,
		   const uint8_t src[16], uint16_t sport,
		   struct sv_roce_tx *tx)
{
	const struct sv_mcast_grp *g;
	struct sv_roce_pkt p;
	struct sv_roce_ip ip;

	sv_roce_stats.rx_pkts++;
	memset(&ip, 0, sizeof(ip));
	memcpy(ip.src, src, 16);
	memcpy(ip.dst, mc.gid[idx], 16);
	ip.sport = sport;
	ip.dport = mc.port;
	ip.df = true;
	/* our own, looped back: delivered here when it was sent */
	if (sv_roce_gid_local(ip.src))
		return;
	if (!sv_roce_icrc_ok(&ip, buf, len)) {
		sv_roce_drop(SV_RX_DROP_ICRC);
		return;
	}
	if (sv_roce_parse(buf, len, &p)) {
		sv_roce_drop(SV_RX_DROP_MALFORMED);
		return;
	}
	if (p.pkey != SV_PKEY_DEFAULT) {
		sv_roce_drop(SV_RX_DROP_PKEY);
		return;
	}
	if (p.dqpn != SV_MCAST_QPN || !(p.flags & SV_RF_UD)) {
		sv_roce_drop(SV_RX_DROP_QPN);
		return;
	}
	g = sv_mcast_find(ip.dst);
	if (!g) {
		sv_roce_drop(SV_RX_DROP_QPN);
		return;
	}
	for (uint32_t i = 0; i < g->nqp; i++)
		if (!g->qp[i]->dead)
			sv_roce_resp_rx(g->qp[i], &p, &ip, tx);
}

unsigned int sv_roce_mcast_rx(struct sv_roce_tx *tx)
{
	static uint8_t buf[SV_NET_MAX_PKT];
	struct epoll_event ev[16];
	unsigned int got = 0;
	int n;

	if (!mc.started || !__atomic_load_n(&mc.nopen, __ATOMIC_ACQUIRE))
		return 0;
	n = epoll_wait(mc.epfd, ev, 16, 0);
	if (n <= 0)
		return 0;
	sv_dev_lock(false);
	for (int e = 0; e < n; e++) {
		unsigned int idx = ev[e].data.u32;

		for (unsigned int k = 0; k < MC_RX_BURST; k++) {
			union {
				struct sockaddr_in v4;
				struct sockaddr_in6 v6;
			} from;
			socklen_t flen = sizeof(from);
			uint8_t src[16];
			uint16_t sport;
			ssize_t r;

			/* closed, or its slot reused, since epoll said so */
			if (idx >= SV_MAX_MCAST_GRP || !mc.open[idx])
				break;
			r = recvfrom(mc.fd[idx], buf, sizeof(buf), MSG_TRUNC,
				     (struct sockaddr *)&from, &flen);
			if (r < 0)
				break;
			got++;
			if ((size_t)r > sizeof(buf)) {
				sv_roce_drop(SV_RX_DROP_MALFORMED);
				continue;
			}
			if (from.v4.sin_family == AF_INET) {
				memset(src, 0, 10);
				src[10] = src[11] = 0xff;
				memcpy(src + 12, &from.v4.sin_addr.s_addr, 4);
				sport = ntohs(from.v4.sin_port);
			} else if (from.v6.sin6_family == AF_INET6) {
				memcpy(src, &from.v6.sin6_addr, 16);
				sport = ntohs(from.v6.sin6_port);
			} else {
				continue;
			}
			mc_one(idx, buf, (size_t)r, src, sport, tx);
		}
	}
	(void)sv_roce_resp_place(tx);
	sv_roce_tx_flush(tx);
	sv_dev_unlock();
	return got;
}
