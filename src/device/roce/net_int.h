/* SPDX-License-Identifier: MIT */
/*
 * Inside the UDP transport (net.h): struct sv_net and what its three files
 * share. net.c opens and closes it (the receive socket, the buffers) and
 * parses the injector's settings; net_tx.c is the send side (source-port
 * sockets, staging, sendmmsg and GSO, the injector's per-packet faults and
 * its delay ring); net_rx.c the receive side (recvmmsg, GRO datagrams cut
 * into packets). Each side is one thread (net.h, "Threads").
 *
 * The files that include this define _GNU_SOURCE first (struct mmsghdr,
 * struct in6_pktinfo).
 */
#ifndef SV_DEVICE_ROCE_NET_INT_H
#define SV_DEVICE_ROCE_NET_INT_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

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

static inline bool gid_is_v4(const uint8_t gid[16])
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					    0xff, 0xff };

	return memcmp(gid, prefix, sizeof(prefix)) == 0;
}

static inline bool gid_is_linklocal(const uint8_t gid[16])
{
	return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80;
}

/* The socket address of gid:port in the net's family; socklen. */
static inline socklen_t sa_make(const struct sv_net *n, union sv_sa *sa,
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

#endif
