// SPDX-License-Identifier: MIT
/*
 * The UDP transport of RoCEv2 (net.h), its life and settings: sv_net_open
 * (the receive socket bound to addr:port, the buffers both sides use, the
 * interface of the address), sv_net_close, the accessors, and the
 * injector's settings (an inject string parsed, at open or from any thread
 * by sv_net_set_inject, for the send side to take). The send side is
 * net_tx.c, the receive side net_rx.c; struct sv_net is in net_int.h.
 *
 * Nothing here allocates after sv_net_open but the delay ring (once, when
 * delay=US is first asked for), and nothing blocks: every socket is
 * nonblocking and every call passes MSG_DONTWAIT.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "device/roce/net_int.h"

/* ================= the injector's settings ================= */

/* A nonzero xorshift state from any seed (splitmix64's finalizer). */
static uint64_t rng_seed(uint64_t seed)
{
	uint64_t z = seed + 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return z ? z : 0x9e3779b97f4a7c15ull;
}

/* One "key=value" of the inject string, value ending at end. */
static int inj_kv(struct inj_cfg *n, const char *key, size_t klen,
		  const char *val, const char *end, unsigned int *seen,
		  uint64_t *seed)
{
	static const char *const keys[] = { "seed", "drop", "dup", "reorder",
					    "corrupt", "qp", "delay" };
	double *probs[] = { NULL, &n->p_drop, &n->p_dup, &n->p_reorder,
			    &n->p_corrupt, NULL, NULL };
	unsigned int k;
	char *stop;

	for (k = 0; k < 7; k++)
		if (strlen(keys[k]) == klen && !memcmp(key, keys[k], klen))
			break;
	if (k == 7 || (*seen & 1u << k))
		return -EINVAL;         /* unknown, or given twice */
	*seen |= 1u << k;
	/* strtod/strtoull accept signs, spaces, "inf" and "nan": allow a
	 * digit or a point first, then let them parse */
	if (val == end || !((*val >= '0' && *val <= '9') || *val == '.'))
		return -EINVAL;
	errno = 0;
	if (k == 0 || k == 5 || k == 6) {
		bool hex = end - val > 2 && val[0] == '0' &&
			   (val[1] == 'x' || val[1] == 'X');
		uint64_t v = strtoull(val, &stop, hex ? 16 : 10);

		if (k == 0) {
			*seed = v;
		} else if (k == 5) {
			if (v > 0xffffffu)
				return -EINVAL;
			n->has_qp = true;
			n->qpn = (uint32_t)v;
		} else {
			if (v > DELAY_MAX_US)
				return -EINVAL;
			n->delay_ns = v * 1000u;
		}
	} else {
		double p = strtod(val, &stop);

		if (!(p >= 0.0 && p <= 1.0))
			return -EINVAL;
		*probs[k] = p;
	}
	if (errno || stop != end)
		return -EINVAL;
	return 0;
}

/* "seed=N,drop=P,dup=P,reorder=P,corrupt=P,qp=N,delay=US": any subset,
 * any order (qp: only the packets whose BTH names that destination QP;
 * delay: every packet let through leaves US microseconds later). */
static int inj_parse(struct inj_cfg *n, const char *s)
{
	unsigned int seen = 0;
	uint64_t seed = 1;

	n->p_drop = n->p_dup = n->p_reorder = n->p_corrupt = 0;
	n->has_qp = false;
	n->qpn = 0;
	n->delay_ns = 0;
	if (s && *s) {
		for (;;) {
			const char *end = strchr(s, ',');
			const char *eq;
			int rc;

			if (!end)
				end = s + strlen(s);
			eq = memchr(s, '=', (size_t)(end - s));
			if (!eq)
				return -EINVAL;
			rc = inj_kv(n, s, (size_t)(eq - s), eq + 1, end,
				    &seen, &seed);
			if (rc)
				return rc;
			if (!*end)
				break;
			s = end + 1;    /* a trailing ',' fails the next key */
		}
	}
	n->rng = rng_seed(seed);
	n->inj = n->p_drop > 0 || n->p_dup > 0 || n->p_reorder > 0 ||
		 n->p_corrupt > 0 || n->delay_ns > 0;
	return 0;
}

/* ================= open, close ================= */

/* The interface index of a link-local IPv6 address of ours (0: none). */
static uint32_t scope_of(const uint8_t addr[16])
{
	struct ifaddrs *ifs, *i;
	uint32_t scope = 0;

	if (getifaddrs(&ifs) < 0)
		return 0;
	for (i = ifs; i; i = i->ifa_next) {
		const struct sockaddr_in6 *a = (const void *)i->ifa_addr;

		if (a && a->sin6_family == AF_INET6 &&
		    !memcmp(&a->sin6_addr, addr, 16)) {
			scope = a->sin6_scope_id;
			break;
		}
	}
	freeifaddrs(ifs);
	return scope;
}

/* The interface index of an address of ours, either family (0: none). */
static uint32_t ifindex_of(const uint8_t addr[16], bool v4)
{
	struct ifaddrs *ifs, *i;
	uint32_t idx = 0;

	if (getifaddrs(&ifs) < 0)
		return 0;
	for (i = ifs; i && !idx; i = i->ifa_next) {
		const struct sockaddr *a = i->ifa_addr;

		if (!a || !i->ifa_name)
			continue;
		if (v4 && a->sa_family == AF_INET &&
		    !memcmp(&((const struct sockaddr_in *)(const void *)a)
				     ->sin_addr, addr + 12, 4))
			idx = if_nametoindex(i->ifa_name);
		else if (!v4 && a->sa_family == AF_INET6 &&
			 !memcmp(&((const struct sockaddr_in6 *)(const void *)a)
					  ->sin6_addr, addr, 16))
			idx = if_nametoindex(i->ifa_name);
	}
	freeifaddrs(ifs);
	return idx;
}

static int rx_open(struct sv_net *n)
{
	int one = 1, buf = SOCK_BUF_BYTES;
	union sv_sa sa;
	socklen_t len;
	int fd, rc;

	fd = socket(n->v4 ? AF_INET : AF_INET6,
		    SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (n->v4) {
		if (setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one,
			       sizeof(one)) < 0)
			goto fail;
	} else if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one,
			      sizeof(one)) < 0 ||
		   setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one,
			      sizeof(one)) < 0) {
		goto fail;
	}
	/* whole GSO datagrams in, when the kernel can: best effort */
	if (n->gro && setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) < 0)
		n->gro = false;
	/* no SO_REUSEADDR: a second daemon on addr:port must fail here */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	len = sa_make(n, &sa, n->addr, n->port);
	if (bind(fd, &sa.sa, len) < 0)
		goto fail;
	n->rx_fd = fd;
	return 0;
fail:
	rc = -errno;
	close(fd);
	return rc;
}

/* The delay ring, made once (under ij_mu, or before the net is shared):
 * 0 or -ENOMEM. */
static int delay_make(struct sv_net *n)
{
	struct delayed *q;
	uint8_t *mem;

	if (n->dq_made)
		return 0;
	q = calloc(DELAY_SLOTS, sizeof(*q));
	mem = malloc((size_t)DELAY_SLOTS * SV_NET_MAX_PKT);
	if (!q || !mem) {
		free(q);
		free(mem);
		return -ENOMEM;
	}
	for (unsigned int i = 0; i < DELAY_SLOTS; i++)
		q[i].buf = mem + (size_t)i * SV_NET_MAX_PKT;
	n->dq_made = q;
	return 0;
}

int sv_net_open(struct sv_net **out, const struct sv_net_cfg *cfg)
{
	struct sv_net *n;
	unsigned int i;
	int rc;

	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->rx_fd = -1;
	n->rx_short = true;
	pthread_mutex_init(&n->ij_mu, NULL);
	rc = inj_parse(&n->ij, cfg->inject);
	if (!rc && n->ij.delay_ns)
		rc = delay_make(n);
	if (rc)
		goto fail;
	n->dq = n->dq_made;
	memcpy(n->addr, cfg->addr, 16);
	n->port = cfg->port;
	n->v4 = gid_is_v4(cfg->addr);
	if (!n->v4 && gid_is_linklocal(cfg->addr)) {
		n->scope = scope_of(cfg->addr);
		if (!n->scope) {
			rc = -EADDRNOTAVAIL;
			goto fail;
		}
	}

	n->ifindex = ifindex_of(cfg->addr, n->v4);
	n->gso = n->gro = !cfg->no_offload;
	if (n->ij.inj)
		n->gso = false;         /* the injector works on packets */
	n->hold.buf = malloc(SV_NET_MAX_PKT);
	n->rxbuf = malloc((size_t)SV_NET_RX_MSGS * RX_MSG_BYTES);
	if (!n->hold.buf || !n->rxbuf) {
		rc = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < SV_NET_RX_MSGS; i++) {
		struct msghdr *h = &n->rxmsg[i].msg_hdr;

		n->rxiov[i].iov_base = n->rxbuf + (size_t)i * RX_MSG_BYTES;
		n->rxiov[i].iov_len = RX_MSG_BYTES;
		h->msg_iov = &n->rxiov[i];
		h->msg_iovlen = 1;
		h->msg_name = &n->rxname[i];
		h->msg_control = &n->rxctl[i];
	}
	rc = rx_open(n);
	if (rc)
		goto fail;
	*out = n;
	return 0;
fail:
	free(n->hold.buf);
	free(n->rxbuf);
	if (n->dq_made)
		free(n->dq_made[0].buf);
	free(n->dq_made);
	free(n);
	return rc;
}

void sv_net_close(struct sv_net *n)
{
	unsigned int i;

	if (!n)
		return;
	for (i = 0; i < n->nsock; i++)
		close(n->sock[i].fd);
	if (n->rx_fd >= 0)
		close(n->rx_fd);
	free(n->hold.buf);
	free(n->rxbuf);
	if (n->dq_made)
		free(n->dq_made[0].buf);
	free(n->dq_made);
	free(n);
}

int sv_net_fd(const struct sv_net *n)
{
	return n->rx_fd;
}

bool sv_net_gso(const struct sv_net *n)
{
	return __atomic_load_n(&n->gso, __ATOMIC_RELAXED);
}

bool sv_net_gro(const struct sv_net *n)
{
	return n->gro;
}

void sv_net_stats(const struct sv_net *n, struct sv_net_stats *out)
{
	const uint64_t *src = (const uint64_t *)&n->st;
	uint64_t *dst = (uint64_t *)out;
	size_t i;

	for (i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

/* ================= the injector, at run time ================= */

int sv_net_set_inject(struct sv_net *n, const char *spec, const uint8_t *qps,
		      uint32_t qps_mask)
{
	struct inj_cfg c;
	int rc = inj_parse(&c, spec);

	if (rc)
		return rc;
	c.qps = qps;
	c.qps_mask = qps_mask;
	pthread_mutex_lock(&n->ij_mu);
	if (c.delay_ns && delay_make(n)) {
		pthread_mutex_unlock(&n->ij_mu);
		return -ENOMEM;
	}
	n->ij_new = c;
	__atomic_store_n(&n->ij_gen, n->ij_gen + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&n->ij_mu);
	return 0;
}
