// SPDX-License-Identifier: MIT
/*
 * The UDP transport of RoCEv2 (net.h): the receive socket, the lazily
 * created source-port sockets, sendmmsg batching and the fault injector.
 *
 * Send path. sv_net_send turns each packet into one or more "emissions"
 * (a datagram to hand to the kernel: the caller's bytes, maybe with one
 * byte replaced by its bit-flipped copy, to a destination sockaddr, from a
 * socket slot) in a staging array inside struct sv_net. A flush groups the
 * staged emissions by socket (a counting sort, so each socket's packets
 * keep their order) and gives each group to one sendmmsg. A corrupted
 * packet is sent without copying it: its iovec is [bytes before the
 * flipped byte] [the flipped byte] [bytes after]. A packet the injector
 * holds back (reorder) must outlive the caller's buffer, so it is copied
 * into the hold buffer, the only copy on the send path. With GSO, a run of
 * staged packets the caller marked cont becomes one datagram: their iovecs
 * one after the other and a UDP_SEGMENT control message with the first
 * one's length.
 *
 * Receive path. recvmmsg fills up to SV_NET_RX_MSGS buffers of
 * RX_MSG_BYTES; a GRO datagram (its UDP_GRO control message gives the
 * packet length) is handed out a packet at a time, across calls when the
 * caller's array is full, before the next recvmmsg.
 *
 * Nothing here allocates after sv_net_open, and nothing blocks: every
 * socket is nonblocking and every call passes MSG_DONTWAIT.
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
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "device/roce/net.h"

#define unlikely(x) __builtin_expect(!!(x), 0)

/* Emissions staged before a flush; one packet makes at most 4 (itself and
 * its duplicate, then the held packet and its duplicate). */
#define STAGE 256u
#define EMIT_MAX_PER_PKT 4u
#define NO_FLIP UINT32_MAX
/* Socket buffers we ask for (rmem_max/wmem_max cap them without
 * CAP_NET_ADMIN). */
#define SOCK_BUF_BYTES (4 << 20)
/* The range a taken source port moves in (RoCEv2's per-QP source ports). */
#define SPORT_LO 0xc000u
#define SPORT_HI 0xffffu
/* A receive buffer: a whole GRO datagram (or one packet without GRO). */
#define RX_MSG_BYTES 65536u

#ifndef SOL_UDP
#define SOL_UDP 17
#endif

union sv_sa {
	struct sockaddr sa;
	struct sockaddr_in v4;
	struct sockaddr_in6 v6;
};

struct emit {
	const uint8_t *buf;
	uint32_t len;
	uint32_t flip;         /* index of the replaced byte, or NO_FLIP */
	uint8_t flipped;       /* its value */
	uint8_t slot;          /* source socket */
	bool primary;          /* counts in sv_net_send's return value */
	bool cont;             /* GSO: joins the datagram before it */
	union sv_sa dst;
};

/* The injector's settings (an inject string, parsed). */
struct inj_cfg {
	bool inj;                       /* any probability above 0 */
	double p_drop, p_dup, p_reorder, p_corrupt;
	uint64_t rng;
	bool has_qp;                    /* only packets to QP qpn (BTH) */
	uint32_t qpn;
	const uint8_t *qps;             /* only packets of these local QPs */
	uint32_t qps_mask;
	uint64_t delay_ns;              /* hold every packet back so long */
};

/* wire delay=US: the packets the injector lets through wait in a ring, in
 * order, and leave with the first send or tick after their time. */
#define DELAY_SLOTS 256u
#define DELAY_MAX_US 10000000u
struct delayed {
	uint64_t due;                   /* CLOCK_MONOTONIC ns */
	uint32_t len;
	uint8_t slot;
	union sv_sa dst;
	uint8_t *buf;                   /* SV_NET_MAX_PKT bytes */
};

struct sv_net {
	bool v4;                    /* AF_INET sockets (else AF_INET6) */
	uint8_t addr[16];
	uint16_t port;
	uint32_t scope;             /* interface of a link-local IPv6 addr */
	uint32_t ifindex;           /* the address's interface (0: unknown) */
	int rx_fd;

	/* ---- send side (one thread) ---- */
	struct {
		int fd;
		uint16_t port;      /* as bound */
	} sock[SV_NET_MAX_SOCKS];
	unsigned int nsock;
	/* requested or bound source port -> slot + 1 (0: none yet) */
	uint8_t by_port[65536];

	bool gso;                   /* UDP GSO: cont packets join */
	struct emit stage[STAGE];
	unsigned int nstage;
	struct mmsghdr txmsg[STAGE];
	struct iovec txiov[STAGE * 3];
	uint16_t txfirst[STAGE];        /* a datagram's first in the group */
	uint16_t txnseg[STAGE];         /* and its packets */
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} txctl[STAGE];
	uint16_t order[STAGE];
	unsigned int tx_lost_primary;   /* of the flush: primaries not sent */

	/* injector: ij is the send side's; sv_net_set_inject (any thread)
	 * leaves a new one in ij_new and bumps ij_gen, and the next
	 * sv_net_send takes it */
	struct inj_cfg ij, ij_new;
	uint32_t ij_gen, ij_seen;
	pthread_mutex_t ij_mu;
	struct {
		uint8_t *buf;           /* SV_NET_MAX_PKT bytes */
		uint32_t len;
		uint8_t copies;         /* 1, or 2 when duplicated too */
		uint8_t slot;
		bool held;              /* waiting for the next packet */
		bool staged;            /* buf is referenced by the stage */
		union sv_sa dst;
	} hold;
	/* delay=US (the send side's; made by sv_net_set_inject or open
	 * under ij_mu, taken with the settings, freed by close) */
	struct delayed *dq, *dq_made;
	uint32_t dq_head;
	uint32_t dq_n;                  /* atomic: the wire thread looks */

	/* ---- receive side (one thread) ---- */
	bool gro;                   /* UDP GRO on the receive socket */
	uint8_t *rxbuf;             /* SV_NET_RX_MSGS * RX_MSG_BYTES */
	struct mmsghdr rxmsg[SV_NET_RX_MSGS];
	struct iovec rxiov[SV_NET_RX_MSGS];
	union sv_sa rxname[SV_NET_RX_MSGS];
	union {
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo)) +
			 CMSG_SPACE(sizeof(struct in_pktinfo)) +
			 CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} rxctl[SV_NET_RX_MSGS];
	/* the datagrams of the last recvmmsg not yet handed out: rx_cur of
	 * rx_n, rx_off bytes of rx_cur done (its packets rx_seg long) */
	unsigned int rx_n, rx_cur;
	bool rx_short;              /* the last recvmmsg did not fill them */
	uint32_t rx_off, rx_seg;
	struct sv_roce_ip rx_ip;        /* rx_cur's addresses */

	/* Each counter has one writer (its side's thread); sv_net_stats
	 * reads them from anywhere. */
	struct sv_net_stats st;
};

/* A single writer's counter, readable (relaxed) by other threads. */
static inline void ctr_add(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, *c + v, __ATOMIC_RELAXED);
}

static bool gid_is_v4(const uint8_t gid[16])
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					    0xff, 0xff };

	return memcmp(gid, prefix, sizeof(prefix)) == 0;
}

static bool gid_is_linklocal(const uint8_t gid[16])
{
	return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80;
}

static void gid_from_v4(uint8_t gid[16], const struct in_addr *a)
{
	memset(gid, 0, 10);
	gid[10] = 0xff;
	gid[11] = 0xff;
	memcpy(gid + 12, &a->s_addr, 4);
}

/* The socket address of gid:port in the net's family; socklen. */
static socklen_t sa_make(const struct sv_net *n, union sv_sa *sa,
			 const uint8_t gid[16], uint16_t port)
{
	memset(sa, 0, sizeof(*sa));
	if (n->v4) {
		sa->v4.sin_family = AF_INET;
		sa->v4.sin_port = htons(port);
		memcpy(&sa->v4.sin_addr.s_addr, gid + 12, 4);
		return sizeof(sa->v4);
	}
	sa->v6.sin6_family = AF_INET6;
	sa->v6.sin6_port = htons(port);
	memcpy(&sa->v6.sin6_addr, gid, 16);
	if (gid_is_linklocal(gid))
		sa->v6.sin6_scope_id = n->scope;
	return sizeof(sa->v6);
}

/* ================= the injector ================= */

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

/* ================= receive ================= */

/* The destination address of a received datagram, from its pktinfo. */
static void rx_dst(const struct sv_net *n, struct msghdr *h, uint8_t dst[16])
{
	struct cmsghdr *c;

	memcpy(dst, n->addr, 16);       /* without pktinfo: ours */
	for (c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			gid_from_v4(dst, &pi.ipi_addr);
			return;
		}
		if (c->cmsg_level == IPPROTO_IPV6 &&
		    c->cmsg_type == IPV6_PKTINFO) {
			struct in6_pktinfo pi;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			memcpy(dst, &pi.ipi6_addr, 16);
			return;
		}
	}
}

/* The packet length of a received datagram: its GRO segment size, or
 * all of it. */
static uint32_t rx_seg(struct msghdr *h, uint32_t len)
{
	struct cmsghdr *c;

	for (c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c))
		if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
			int seg;

			memcpy(&seg, CMSG_DATA(c), sizeof(seg));
			if (seg > 0 && (uint32_t)seg < len)
				return (uint32_t)seg;
		}
	return len;
}

/* Begin datagram rx_cur: its addresses and packet length; false when it
 * is to be dropped. */
static bool rx_begin(struct sv_net *n)
{
	struct msghdr *h = &n->rxmsg[n->rx_cur].msg_hdr;
	const union sv_sa *src = &n->rxname[n->rx_cur];
	uint32_t len = n->rxmsg[n->rx_cur].msg_len;
	struct sv_roce_ip *ip = &n->rx_ip;

	n->rx_off = 0;
	if (unlikely(h->msg_flags & MSG_TRUNC)) {
		ctr_add(&n->st.rx_err, 1);
		return false;
	}
	n->rx_seg = rx_seg(h, len);
	if (unlikely(n->rx_seg > SV_NET_MAX_PKT)) {
		ctr_add(&n->st.rx_err, 1);
		return false;
	}
	if (n->rx_seg < len)
		ctr_add(&n->st.rx_gro, 1);
	memset(ip, 0, sizeof(*ip));
	if (src->sa.sa_family == AF_INET) {
		gid_from_v4(ip->src, &src->v4.sin_addr);
		ip->sport = ntohs(src->v4.sin_port);
	} else {
		memcpy(ip->src, &src->v6.sin6_addr, 16);
		ip->sport = ntohs(src->v6.sin6_port);
	}
	rx_dst(n, h, ip->dst);
	ip->dport = n->port;
	ip->ip_id = 0;
	ip->df = true;
	return true;
}

/* recvmmsg into the buffers: false when nothing came. */
static bool rx_fill(struct sv_net *n)
{
	unsigned int i;
	int r;

	for (i = 0; i < SV_NET_RX_MSGS; i++) {
		struct msghdr *h = &n->rxmsg[i].msg_hdr;

		h->msg_namelen = sizeof(n->rxname[i]);
		h->msg_controllen = sizeof(n->rxctl[i]);
		h->msg_flags = 0;
	}
	do
		r = recvmmsg(n->rx_fd, n->rxmsg, SV_NET_RX_MSGS, MSG_DONTWAIT,
			     NULL);
	while (r < 0 && errno == EINTR);
	if (r <= 0) {
		if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			ctr_add(&n->st.rx_err, 1);
		n->rx_short = true;
		return false;
	}
	n->rx_short = (unsigned int)r < SV_NET_RX_MSGS;
	n->rx_n = (unsigned int)r;
	n->rx_cur = 0;
	return true;
}

bool sv_net_rx_idle(const struct sv_net *n)
{
	return n->rx_cur == n->rx_n && n->rx_short;
}

unsigned sv_net_recv(struct sv_net *n, struct sv_net_rx *out, unsigned max)
{
	unsigned int k = 0;

	if (max > SV_NET_RX_BATCH)
		max = SV_NET_RX_BATCH;
	/* one recvmmsg per call, and only once the last one's packets
	 * are all out */
	if (max && n->rx_cur == n->rx_n) {
		if (!rx_fill(n))
			return 0;
		while (n->rx_cur < n->rx_n && !rx_begin(n))
			n->rx_cur++;
	}
	while (k < max && n->rx_cur < n->rx_n) {
		uint32_t len = n->rxmsg[n->rx_cur].msg_len;
		uint32_t seg = len - n->rx_off < n->rx_seg ? len - n->rx_off
							  : n->rx_seg;
		struct sv_net_rx *o = &out[k++];

		o->buf = (uint8_t *)n->rxiov[n->rx_cur].iov_base + n->rx_off;
		o->len = seg;
		o->ip = n->rx_ip;
		ctr_add(&n->st.rx_bytes, seg);
		n->rx_off += seg;
		if (n->rx_off >= len) {
			/* the next datagram to hand out */
			n->rx_cur++;
			while (n->rx_cur < n->rx_n && !rx_begin(n))
				n->rx_cur++;
		}
	}
	ctr_add(&n->st.rx_pkts, k);
	return k;
}
