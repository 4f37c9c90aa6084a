// SPDX-License-Identifier: MIT
/*
 * Addresses for the connection manager: IPv4 and IPv6 socket addresses,
 * which of them belong to this host, and the GID of sv0 that stands for
 * them. An IPv4-mapped IPv6 address is the IPv4 address it maps.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>
#include <string.h>

#include "device/cm/cm.h"
#include "device/sv_dev.h"

socklen_t sv_cm_addr_size(const struct sockaddr *sa)
{
	switch (sa->sa_family) {
	case AF_INET:
		return sizeof(struct sockaddr_in);
	case AF_INET6:
		return sizeof(struct sockaddr_in6);
	default:
		return 0;
	}
}

/* The IPv4 address of sa in network order, when it is one (or maps one). */
static bool v4_of(const struct sockaddr *sa, struct in_addr *out)
{
	const struct sockaddr_in6 *s6 = (const void *)sa;

	if (sa->sa_family == AF_INET) {
		*out = ((const struct sockaddr_in *)sa)->sin_addr;
		return true;
	}
	if (sa->sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
		memcpy(out, &s6->sin6_addr.s6_addr[12], 4);
		return true;
	}
	return false;
}

bool sv_cm_addr_any(const struct sockaddr *sa)
{
	struct in_addr a;

	if (v4_of(sa, &a))
		return a.s_addr == htonl(INADDR_ANY);
	return sa->sa_family == AF_INET6 &&
	       IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

bool sv_cm_addr_loopback(const struct sockaddr *sa)
{
	struct in_addr a;

	if (v4_of(sa, &a))
		return (ntohl(a.s_addr) >> 24) == 127;
	return sa->sa_family == AF_INET6 &&
	       IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

uint16_t sv_cm_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return 0;
}

void sv_cm_set_port(struct sockaddr *sa, uint16_t port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = htons(port);
	else if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
}

bool sv_cm_addr_eq(const struct sockaddr *a, const struct sockaddr *b)
{
	struct in_addr x, y;
	bool xv = v4_of(a, &x), yv = v4_of(b, &y);

	if (xv || yv)
		return xv && yv && x.s_addr == y.s_addr;
	if (a->sa_family != AF_INET6 || b->sa_family != AF_INET6)
		return false;
	return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		       &((const struct sockaddr_in6 *)b)->sin6_addr, 16);
}

bool sv_cm_addr_local(const struct sockaddr *sa)
{
	struct ifaddrs *ifa, *i;
	bool found = false;

	if (sv_cm_addr_loopback(sa))
		return true;
	if (sv_cm_addr_any(sa) || getifaddrs(&ifa))
		return false;
	for (i = ifa; i && !found; i = i->ifa_next)
		if (i->ifa_addr && (i->ifa_addr->sa_family == AF_INET ||
				    i->ifa_addr->sa_family == AF_INET6))
			found = sv_cm_addr_eq(i->ifa_addr, sa);
	freeifaddrs(ifa);
	return found;
}

bool sv_cm_addr_mine(const struct sockaddr *sa)
{
	uint8_t gid[16];

	sv_cm_addr_to_gid(sa, gid);
	if (sv_cm_gid_index(gid) >= 0)
		return true;
	if (!sv_cm_addr_local(sa))
		return false;
	if (!sv_dev.addrs_given)
		return true;
	/* a daemon told what to serve: another address of this host may be
	 * another daemon's; loopback is ours unless we serve a loopback
	 * address ourselves (then the others are other daemons') */
	if (!sv_cm_addr_loopback(sa))
		return false;
	for (unsigned int i = 0; i < SV_GID_TBL_LEN; i++) {
		struct sockaddr_storage g;

		if (!sv_dev.gid[i].valid)
			continue;
		sv_cm_gid_to_addr(sv_dev.gid[i].gid, &g);
		if (sv_cm_addr_loopback((const struct sockaddr *)&g))
			return false;
	}
	return true;
}

/* Every address of this host is sv0's: a QP whose peer GID is one the
 * device serves takes the same-host path, so the GID is always gid[0]. */
void sv_cm_gid(const struct sockaddr *sa, uint8_t gid[16])
{
	(void)sa;
	memcpy(gid, sv_dev.gid[0].gid, 16);
}

const char *sv_cm_addr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, a,
			  sizeof(a));
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, a,
			  sizeof(a));
	snprintf(buf, len, sa->sa_family == AF_INET6 ? "[%s]:%u" : "%s:%u", a,
		 sv_cm_port(sa));
	return buf;
}

void sv_cm_addr_to_gid(const struct sockaddr *sa, uint8_t gid[16])
{
	struct in_addr a;

	memset(gid, 0, 16);
	if (v4_of(sa, &a)) {
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, &a, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(gid, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	}
}

void sv_cm_gid_to_addr(const uint8_t gid[16], struct sockaddr_storage *ss)
{
	static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };

	memset(ss, 0, sizeof(*ss));
	if (!memcmp(gid, mapped, 12)) {
		struct sockaddr_in *s4 = (void *)ss;

		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, gid + 12, 4);
	} else {
		struct sockaddr_in6 *s6 = (void *)ss;

		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, gid, 16);
	}
}

int sv_cm_route_src(const struct sockaddr *dst, struct sockaddr_storage *src)
{
	struct sockaddr_storage d;
	socklen_t n = sizeof(*src);
	int s, ret = 0;

	memset(&d, 0, sizeof(d));
	memcpy(&d, dst, sv_cm_addr_size(dst));
	/* any port will do: connect() on UDP only picks the route */
	sv_cm_set_port((struct sockaddr *)&d, 4791);
	s = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (connect(s, (struct sockaddr *)&d, sv_cm_addr_size(dst)) ||
	    getsockname(s, (struct sockaddr *)src, &n))
		ret = -errno;
	close(s);
	if (!ret)
		sv_cm_set_port((struct sockaddr *)src, 0);
	return ret;
}
