// SPDX-License-Identifier: MIT
/*
 * Ports: the ids that hold one (per port space), the kernel's rules for
 * taking one (cma_check_port: EADDRINUSE for the same address,
 * EADDRNOTAVAIL beside a wildcard, REUSEADDR, AFONLY and bindv6only, ports
 * below 1024 for root, port 0 from 32768-60999), BIND itself, and the
 * listener that a REQ's port and address lead to.
 *
 * Owns the list of bound ids. Calls addr.c and id.c (sv_cm_rand32); called
 * by resolve.c and listen.c (a bind on the way), id.c (unbind) and ucma.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "device/cm/cm.h"
#include "device/cm/cm_int.h"
#include "device/sv_dev.h"

static struct sv_cm_id *bound;     /* every id holding a port */

#define PORT_LO 32768              /* the kernel's ip_local_port_range */
#define PORT_HI 60999

void sv_cm_unbind(struct sv_cm_id *id)
{
	if (!id->bound)
		return;
	for (struct sv_cm_id **p = &bound; *p; p = &(*p)->port_next)
		if (*p == id) {
			*p = id->port_next;
			break;
		}
	id->bound = false;
}

/* Do the families of two bound addresses meet (kernel cma_check_port)? */
static bool families_meet(const struct sv_cm_id *a, const struct sv_cm_id *b)
{
	return !(a->afonly && b->afonly && a->src.ss_family != b->src.ss_family);
}

/* The listener a REQ is for: the best match on its port; *reason says why
 * none (no one on the port: an invalid service; no address matches: the
 * consumer's refusal, as cma's handler refuses it). */
struct sv_cm_id *sv_cm_find_listener(const struct sv_cm_msg *m, uint8_t *reason)
{
	const struct sockaddr *dst = (const void *)&m->dst;
	uint16_t port = sv_cm_port(dst);
	struct sv_cm_id *wild = NULL;

	*reason = SV_CM_REJ_INVALID_SERVICE_ID;
	for (struct sv_cm_id *l = bound; l; l = l->port_next) {
		const struct sockaddr *src = (const void *)&l->src;

		if (l->ps != m->ps || sv_cm_port(src) != port || l->state != CM_LISTEN)
			continue;
		*reason = SV_CM_REJ_CONSUMER_DEFINED;
		if (sv_cm_addr_eq(src, dst))
			return l;
		if (sv_cm_addr_any(src) && !wild &&
		    (src->sa_family == dst->sa_family ||
		     (src->sa_family == AF_INET6 && !l->afonly)))
			wild = l;
	}
	return wild;
}

static int bindv6only(void)
{
	static int v = -1;

	if (v < 0) {
		FILE *fp = fopen("/proc/sys/net/ipv6/bindv6only", "re");

		v = 0;
		if (fp) {
			if (fscanf(fp, "%d", &v) != 1)
				v = 0;
			fclose(fp);
		}
	}
	return v;
}

/* Can id take its port next to those bound (kernel cma_check_port)? */
int sv_cm_check_port(const struct sv_cm_id *id, uint16_t port, bool reuse)
{
	const struct sockaddr *a = (const void *)&id->src;

	for (struct sv_cm_id *b = bound; b; b = b->port_next) {
		const struct sockaddr *s = (const void *)&b->src;

		if (b == id || b->ps != id->ps || sv_cm_port(s) != port)
			continue;
		if (reuse && b->reuseaddr)
			continue;
		if (!families_meet(id, b))
			continue;
		if (sv_cm_addr_any(a) || sv_cm_addr_any(s))
			return -EADDRNOTAVAIL;
		if (sv_cm_addr_eq(a, s))
			return -EADDRINUSE;
	}
	return 0;
}

static bool port_free(uint16_t ps, uint16_t port)
{
	for (struct sv_cm_id *b = bound; b; b = b->port_next)
		if (b->ps == ps && sv_cm_port((const void *)&b->src) == port)
			return false;
	return true;
}

static int get_port(struct sv_cm_id *id, uid_t uid)
{
	struct sockaddr *a = (void *)&id->src;
	uint16_t port = sv_cm_port(a);
	int ret;

	if (!port) {
		uint32_t n = PORT_HI - PORT_LO + 1, start = sv_cm_rand32() % n;

		for (uint32_t i = 0; i < n && !port; i++) {
			uint16_t p = (uint16_t)(PORT_LO + (start + i) % n);

			if (port_free(id->ps, p))
				port = p;
		}
		if (!port)
			return -EADDRNOTAVAIL;
		sv_cm_set_port(a, port);
	} else {
		if (port < 1024 && uid != 0)
			return -EACCES;
		ret = sv_cm_check_port(id, port, id->reuseaddr);
		if (ret)
			return ret;
	}
	id->port_next = bound;
	bound = id;
	id->bound = true;
	return 0;
}

static bool linklocal_without_scope(const struct sockaddr *sa)
{
	const struct sockaddr_in6 *s6 = (const void *)sa;

	return sa->sa_family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr) &&
	       !s6->sin6_scope_id;
}

int sv_cm_bind(struct sv_cm_id *id, const struct sockaddr *sa)
{
	socklen_t n = sv_cm_addr_size(sa);
	int ret;

	if (!n)
		return -EAFNOSUPPORT;
	if (id->state != CM_IDLE)
		return -EINVAL;
	if (linklocal_without_scope(sa))
		return -EINVAL;
	if (!sv_cm_addr_any(sa) && !sv_cm_addr_local(sa))
		return -EADDRNOTAVAIL;
	memset(&id->src, 0, sizeof(id->src));
	memcpy(&id->src, sa, n);
	if (!id->afonly_set)
		id->afonly = sa->sa_family == AF_INET ? true : bindv6only() != 0;
	ret = get_port(id, id->file->uid);
	if (ret) {
		memset(&id->src, 0, sizeof(id->src));
		return ret;
	}
	id->has_dev = !sv_cm_addr_any(sa);
	id->state = CM_ADDR_BOUND;
	return 0;
}
