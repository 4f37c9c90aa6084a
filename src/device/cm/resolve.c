// SPDX-License-Identifier: MIT
/*
 * Address and route resolution (RESOLVE_ADDR, RESOLVE_ROUTE): a
 * destination on this daemon (the same-host path), on another host or
 * daemon (over RoCEv2: the source the host's routing picks, which sv0 must
 * serve; the GIDs of both ends), or a multicast group (mcast.c). The
 * addresses of this host are addr.c's.
 *
 * Owns nothing. Calls addr.c, bind.c (an unbound id is bound first),
 * wire.c (the GID index), mcast.c and id.c (the events); called by ucma.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <infiniband/verbs.h>

#include "device/cm/cm.h"
#include "device/cm/cm_int.h"
#include "device/roce/roce.h"
#include "device/sv_dev.h"

/* A destination on another host: the source address the host's routing
 * picks (or the one bound), which must be one sv0 serves with a RoCEv2
 * port (the kernel's "no RDMA device on that interface" is ENODEV). */
static int resolve_remote(struct sv_cm_id *id)
{
	struct sockaddr *s = (void *)&id->src, *d = (void *)&id->dst;
	struct sockaddr_storage via;
	uint8_t gid[16], dg[16];
	int ret, k;

	sv_cm_addr_to_gid(d, dg);
	ret = sv_cm_route_src(d, &via);
	if (ret)
		return ret;
	if (!sv_cm_addr_any(s))
		sv_cm_addr_to_gid(s, gid);
	else
		sv_cm_addr_to_gid((const void *)&via, gid);
	k = sv_cm_gid_index(gid);
	if (k < 0 && sv_cm_addr_any(s) && sv_cm_addr_local(d)) {
		/* another daemon of this host: from our own address (the
		 * host routes its addresses from 127.0.0.1 or themselves) */
		for (unsigned int i = 0; i < SV_GID_TBL_LEN && k < 0; i++)
			if (sv_dev.gid[i].valid &&
			    sv_gid_is_v4(sv_dev.gid[i].gid) == sv_gid_is_v4(dg))
				k = (int)i;
		if (k >= 0) {
			memcpy(gid, sv_dev.gid[k].gid, 16);
			sv_cm_gid_to_addr(gid, &via);
		}
	}
	if (k < 0 || !sv_roce_running())
		return -ENODEV;
	if (sv_cm_addr_any(s)) {
		uint16_t port = sv_cm_port(s);
		uint32_t scope = s->sa_family == AF_INET6 ?
				 ((struct sockaddr_in6 *)s)->sin6_scope_id : 0;

		memcpy(s, &via, sv_cm_addr_size((const void *)&via));
		sv_cm_set_port(s, port);
		if (s->sa_family == AF_INET6 && scope)
			((struct sockaddr_in6 *)s)->sin6_scope_id = scope;
	}
	id->wire = true;
	id->has_dev = true;
	id->sgid_index = (uint8_t)k;
	memcpy(id->lgid, gid, 16);
	memcpy(id->rgid, dg, 16);
	return 0;
}

int sv_cm_resolve_addr(struct sv_cm_id *id, const struct sockaddr *src,
		       const struct sockaddr *dst)
{
	struct sockaddr *s = (void *)&id->src, *d = (void *)&id->dst;
	socklen_t n = sv_cm_addr_size(dst);
	char a[64];
	int ret;

	if (!n)
		return -EAFNOSUPPORT;
	if (id->state == CM_IDLE) {
		struct sockaddr_storage any;

		memset(&any, 0, sizeof(any));
		if (src && src->sa_family)
			memcpy(&any, src, sv_cm_addr_size(src));
		else {
			any.ss_family = dst->sa_family;
			if (dst->sa_family == AF_INET6)
				((struct sockaddr_in6 *)&any)->sin6_scope_id =
					((const struct sockaddr_in6 *)dst)->sin6_scope_id;
		}
		ret = sv_cm_bind(id, (struct sockaddr *)&any);
		if (ret)
			return ret;
	}
	if (id->src.ss_family != dst->sa_family)
		return -EINVAL;
	if (id->state != CM_ADDR_BOUND)
		return -EINVAL;
	memset(&id->dst, 0, sizeof(id->dst));
	memcpy(&id->dst, dst, n);
	if (sv_cm_addr_any(d)) {
		/* no destination: this host (cma_resolve_loopback) */
		if (d->sa_family == AF_INET)
			((struct sockaddr_in *)d)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		else
			((struct sockaddr_in6 *)d)->sin6_addr = in6addr_loopback;
	}
	if (sv_cm_mc_addr(d))
		return sv_cm_mc_resolve(id);
	if (!sv_cm_addr_mine(d)) {
		ret = resolve_remote(id);
		if (ret) {
			sv_log(SV_LOG_INFO, "cm: id %u: resolve %s: %s", id->handle,
			       sv_cm_addr_str(d, a, sizeof(a)), strerror(-ret));
			sv_cm_ev_post(id, SV_EV_ADDR_ERROR, ret);
			return 0;
		}
		id->state = CM_ADDR_RESOLVED;
		sv_cm_ev_post(id, SV_EV_ADDR_RESOLVED, 0);
		return 0;
	}
	id->wire = false;
	if (sv_cm_addr_any(s)) {
		uint16_t port = sv_cm_port(s);

		memcpy(s, d, n);
		sv_cm_set_port(s, port);
	}
	id->has_dev = true;
	id->state = CM_ADDR_RESOLVED;
	sv_cm_ev_post(id, SV_EV_ADDR_RESOLVED, 0);
	return 0;
}

int sv_cm_resolve_route(struct sv_cm_id *id)
{
	if (id->state != CM_ADDR_RESOLVED)
		return -EINVAL;
	id->state = CM_ROUTE_RESOLVED;
	sv_cm_ev_post(id, SV_EV_ROUTE_RESOLVED, 0);
	return 0;
}
