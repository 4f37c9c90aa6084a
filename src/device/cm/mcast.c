// SPDX-License-Identifier: MIT
/*
 * rdma_cm multicast (docs/DESIGN.md, "rdma_cm"): the ucma's JOIN_IP_MCAST,
 * JOIN_MCAST and LEAVE_MCAST, as the kernel's cma runs them on a RoCEv2
 * port, and the resolution of a multicast destination that comes first.
 *
 * On RoCE a join asks no one: there is no subnet administrator, and the
 * group is the IP multicast group itself. The join answers at once with a
 * handle of its own (a device-wide table, the lowest free number, as the
 * kernel's xarray gives) and queues MULTICAST_JOIN for it: the AH of the
 * group (GID ::ffff:a.b.c.d for the IPv4 group a.b.c.d, hop limit 64, the
 * source GID the id's address stands for), QPN 0xffffff and the id's Q_Key.
 * librdmacm attaches the QP to that GID itself (ibv_attach_mcast), and sv0's
 * UD multicast does the rest (../ctl/mcast.c, ../roce/mcast.c). A RoCEv2 port
 * joins IPv4 groups only: any other family is the kernel's ENOTSUPP (524).
 * The kernel does not check that the address is a multicast one; neither do
 * we (the attach then fails).
 *
 * A multicast's events carry its handle and uid; ucma.c counts them in the
 * multicast's events_reported (LEAVE_MCAST's answer, which librdmacm waits
 * for) as well as the id's. Leaving drops the events not yet read, and
 * destroying an id leaves its groups.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/ib.h>
#include <infiniband/verbs.h>

#include "device/cm/cm.h"
#include "device/sv_dev.h"

#define MC_PROBE_PORT 4791         /* any port: a route lookup sends nothing */

struct sv_cm_mc {
	uint32_t handle;
	uint64_t uid;
	struct sv_cm_id *id;
	struct sockaddr_storage addr;
	uint16_t join_flags;
	uint32_t events_reported;
};

static struct sv_cm_mc *mcs[SV_CM_MAX_MCAST];
static uint32_t nmcs;

static const char *mc_str(const struct sockaddr *sa, char *buf, size_t len)
{
	const void *a = sa->sa_family == AF_INET ?
		(const void *)&((const struct sockaddr_in *)sa)->sin_addr :
		(const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;

	if ((sa->sa_family != AF_INET && sa->sa_family != AF_INET6) ||
	    !inet_ntop(sa->sa_family, a, buf, (socklen_t)len))
		snprintf(buf, len, "(family %u)", sa->sa_family);
	return buf;
}

bool sv_cm_mc_addr(const struct sockaddr *sa)
{
	const struct sockaddr_in6 *s6 = (const void *)sa;

	if (sa->sa_family == AF_INET)
		return IN_MULTICAST(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
	if (sa->sa_family != AF_INET6)
		return false;
	if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
		return (s6->sin6_addr.s6_addr[12] & 0xf0) == 0xe0;
	return IN6_IS_ADDR_MULTICAST(&s6->sin6_addr);
}

/* ---- events ---- */

/* The multicast an event is for (NULL: an event of the id itself). */
static struct sv_cm_mc *mc_of(const struct sv_cm_event *e)
{
	struct sv_cm_mc *mc;

	if (e->resp.event != SV_EV_MULTICAST_JOIN &&
	    e->resp.event != SV_EV_MULTICAST_ERROR)
		return NULL;
	mc = e->resp.id < SV_CM_MAX_MCAST ? mcs[e->resp.id] : NULL;
	return mc && mc->id == e->id ? mc : NULL;
}

void sv_cm_mc_reported(const struct sv_cm_event *e, int delta)
{
	struct sv_cm_mc *mc = mc_of(e);

	if (mc)
		mc->events_reported += (uint32_t)delta;
}

/* ---- a multicast destination ---- */

/*
 * RESOLVE_IP/RESOLVE_ADDR to a multicast group (the id is bound and its
 * destination set; resolve.c's sv_cm_resolve_addr): the kernel looks up the
 * group's route from the bound address, or from the address the route
 * prefers when the id is bound to the wildcard, and the id takes that
 * source address. The same lookup here is a UDP socket's connect(): it
 * sends nothing. No route is ADDR_ERROR with the lookup's errno, as the
 * kernel's.
 */
int sv_cm_mc_resolve(struct sv_cm_id *id)
{
	struct sockaddr *s = (void *)&id->src;
	const struct sockaddr *d = (const void *)&id->dst;
	socklen_t n = sv_cm_addr_size(d), vn;
	struct sockaddr_storage b, to, via;
	char a[INET6_ADDRSTRLEN + 16];
	int fd, err = 0;

	fd = socket(d->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		err = -errno;
	if (!err && !sv_cm_addr_any(s)) {
		memset(&b, 0, sizeof(b));
		memcpy(&b, s, sv_cm_addr_size(s));
		sv_cm_set_port((struct sockaddr *)&b, 0);
		if (bind(fd, (struct sockaddr *)&b, sv_cm_addr_size(s)))
			err = -errno;
	}
	if (!err) {
		memset(&to, 0, sizeof(to));
		memcpy(&to, d, n);
		sv_cm_set_port((struct sockaddr *)&to, MC_PROBE_PORT);
		vn = sizeof(via);
		if (connect(fd, (struct sockaddr *)&to, n) ||
		    getsockname(fd, (struct sockaddr *)&via, &vn))
			err = -errno;
	}
	if (fd >= 0)
		close(fd);
	if (err) {
		sv_log(SV_LOG_INFO, "cm: id %u: resolve multicast %s: %s",
		       id->handle, mc_str(d, a, sizeof(a)), strerror(-err));
		sv_cm_ev_post(id, SV_EV_ADDR_ERROR, err);
		return 0;
	}
	if (sv_cm_addr_any(s)) {
		uint16_t port = sv_cm_port(s);

		memcpy(s, &via, n);
		sv_cm_set_port(s, port);
	}
	id->has_dev = true;
	id->state = CM_ADDR_RESOLVED;
	sv_cm_ev_post(id, SV_EV_ADDR_RESOLVED, 0);
	return 0;
}

/* ---- join and leave ---- */

/* cma_zero_addr: 0.0.0.0/8, ::, a zero AF_IB address. */
static bool zero_addr(const struct sockaddr *sa)
{
	static const uint8_t zero[16];

	switch (sa->sa_family) {
	case AF_INET:
		return !(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24);
	case AF_INET6:
		return !memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, zero, 16);
	case AF_IB:
		return !memcmp(&((const struct sockaddr_ib *)sa)->sib_addr, zero, 16);
	default:
		return false;
	}
}

/* The GID an address stands for (rdma_ip2gid). */
static void ip2gid(const struct sockaddr *sa, uint8_t gid[16])
{
	memset(gid, 0, 16);
	if (sa->sa_family == AF_INET) {
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(gid, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	}
}

/* The index of the id's source GID: the one its address stands for, else
 * GID 0 (every address of this host is sv0's, and resolve.c's routes use 0). */
static uint8_t sgid_index(const struct sv_cm_id *id)
{
	uint8_t gid[16];

	ip2gid((const void *)&id->src, gid);
	for (unsigned int i = 0; i < SV_GID_TBL_LEN; i++)
		if (sv_dev.gid[i].valid && !memcmp(sv_dev.gid[i].gid, gid, 16))
			return (uint8_t)i;
	return 0;
}

/* The lowest free handle, or SV_CM_MAX_MCAST. */
static uint32_t free_handle(void)
{
	uint32_t h;

	for (h = 0; h < SV_CM_MAX_MCAST && mcs[h]; h++)
		;
	return h;
}

int sv_cm_mc_join(struct sv_cm_file *f, uint32_t handle, uint64_t uid,
		  const struct sockaddr *addr, uint16_t join_flags, uint32_t *out)
{
	struct rdma_ucm_ud_param *u;
	struct sv_cm_event *e;
	struct sv_cm_mc *mc;
	struct sv_cm_id *id;
	char a[INET6_ADDRSTRLEN + 16];
	uint32_t h;
	int ret;

	/* ucma_get_ctx_dev: the id, of this file, with a device */
	ret = sv_cm_id_get(f, handle, &id);
	if (ret)
		return ret;
	if (!id->has_dev)
		return -EINVAL;
	h = free_handle();
	if (h == SV_CM_MAX_MCAST)
		return -ENOMEM;
	/* rdma_join_multicast: an address and no more, a UD id */
	if ((id->state != CM_ADDR_BOUND && id->state != CM_ADDR_RESOLVED) ||
	    id->qp_type != IBV_QPT_UD)
		return -EINVAL;
	/* cma_iboe_join_multicast on a RoCEv2 port */
	if (zero_addr(addr))
		return -EINVAL;
	if (addr->sa_family != AF_INET)
		return -SV_CM_ENOTSUPP;
	mc = calloc(1, sizeof(*mc));
	e = sv_cm_ev_new(id, SV_EV_MULTICAST_JOIN, 0);
	if (!mc || !e) {
		free(mc);
		free(e);
		return -ENOMEM;
	}
	mc->handle = h;
	mc->uid = uid;
	mc->id = id;
	mc->join_flags = join_flags;
	memcpy(&mc->addr, addr, sizeof(struct sockaddr_in));
	mcs[h] = mc;
	nmcs++;

	e->resp.uid = uid;
	e->resp.id = h;
	u = &e->resp.param.ud;
	ip2gid(addr, u->ah_attr.grh.dgid);
	u->ah_attr.grh.sgid_index = sgid_index(id);
	u->ah_attr.grh.hop_limit = SV_CM_HOP_LIMIT;
	u->ah_attr.is_global = 1;
	u->ah_attr.port_num = 1;
	u->qp_num = SV_MCAST_QPN;
	u->qkey = id->qkey ? id->qkey : SV_CM_UDP_QKEY;
	sv_cm_event_queue(f, e);
	sv_log(SV_LOG_INFO, "cm: id %u (pid %d) joins multicast %s%s, handle %u",
	       id->handle, (int)f->pid, mc_str(addr, a, sizeof(a)),
	       join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER ?
	       " (send only)" : "", h);
	*out = h;
	return 0;
}

static void mc_free(struct sv_cm_mc *mc)
{
	sv_cm_events_drop_mc(mc->id->file, mc->handle);
	mcs[mc->handle] = NULL;
	nmcs--;
	free(mc);
}

int sv_cm_mc_leave(struct sv_cm_file *f, uint32_t handle, uint32_t *events_reported)
{
	struct sv_cm_mc *mc = handle < SV_CM_MAX_MCAST ? mcs[handle] : NULL;
	char a[INET6_ADDRSTRLEN + 16];

	if (!mc)
		return -ENOENT;
	if (mc->id->file != f)
		return -EINVAL;
	*events_reported = mc->events_reported;
	sv_log(SV_LOG_DEBUG, "cm: id %u (pid %d) leaves multicast %s, handle %u",
	       mc->id->handle, (int)f->pid,
	       mc_str((const void *)&mc->addr, a, sizeof(a)), handle);
	mc_free(mc);
	return 0;
}

void sv_cm_mc_id_destroy(struct sv_cm_id *id)
{
	for (uint32_t h = 0; nmcs && h < SV_CM_MAX_MCAST; h++)
		if (mcs[h] && mcs[h]->id == id)
			mc_free(mcs[h]);
}
