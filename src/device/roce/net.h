/* SPDX-License-Identifier: MIT */
/*
 * The UDP transport of RoCEv2: what the NIC's Ethernet port is to a
 * hardware RNIC. One struct sv_net per daemon serves one address (IPv4 as
 * an IPv4-mapped GID ::ffff:a.b.c.d, or IPv6) and one UDP port (4791).
 *
 * Receive: one nonblocking socket bound to addr:port, read with recvmmsg
 * into buffers allocated at open; IP_PKTINFO / IPV6_RECVPKTINFO give each
 * packet's destination address.
 *
 * Send: one nonblocking socket per UDP source port (RoCEv2 puts a per-QP
 * hash there, and the ICRC covers it, so the port must be exactly the one
 * the ICRC was computed with). They are created lazily, bound to
 * addr:sport with SO_REUSEADDR; a port taken by someone else moves to the
 * next free one in 0xc000..0xffff, and beyond SV_NET_MAX_SOCKS sockets a
 * port shares the socket of slot sport % SV_NET_MAX_SOCKS. sv_net_sport()
 * tells which port a requested one really gets: compute the ICRC with that.
 * Packets are batched with sendmmsg, one call per source socket. IPv4
 * packets carry DF (IP_PMTUDISC_DO): the kernel then sends IP
 * identification 0 on these unconnected sockets (measured with tshark on
 * lo, kernel 6.18), which is what the ICRC assumes.
 *
 * Offloads (unless the config turns them off). Send: UDP GSO. A packet the
 * caller marks `cont` rides in the datagram of the packet before it, and
 * the kernel (or the NIC) cuts that datagram into packets again at the
 * length of its first packet; the caller marks a packet cont only while
 * sv_net_gso() says so, and only as sv_net_tx says. The segments of one
 * datagram get IP identifications 0, 1, 2, ... (the kernel's GSO counts up
 * from the first packet's 0): the caller computes segment k's ICRC with
 * k. Receive: UDP GRO. A datagram the kernel hands over whole (a peer's
 * GSO datagram, or packets its GRO merged) is cut into its packets here.
 * Either offload the kernel refuses is off from then on (a GSO datagram
 * refused at send goes out packet by packet).
 *
 * Injector (tests of loss recovery): a seeded xorshift PRNG decides, per
 * packet handed to sv_net_send, to drop it, corrupt it (flip one random bit
 * of the UDP payload), duplicate it, or reorder it (hold it back and send
 * it after the next packet). Same seed and same packets: same decisions.
 *
 * A held packet goes out after the next packet of the same sv_net_send,
 * or at the end of that call when it was the last one (held across calls,
 * a burst's last packet would wait for the next burst: a loss to a peer
 * that waits for it, not a reordering).
 *
 * Threads: the send side (sv_net_send, sv_net_sport) is one thread at a
 * time, and so is sv_net_recv; one thread may send while another receives.
 * sv_net_stats may be called anywhere (the counters are single-writer,
 * read relaxed). Neither send nor recv allocates.
 */
#ifndef SV_DEVICE_ROCE_NET_H
#define SV_DEVICE_ROCE_NET_H

#include <stdbool.h>
#include <stdint.h>

#include "device/roce/wire.h"

/* The largest UDP payload we send or receive (a 9000-byte jumbo frame's
 * worth); longer ones are refused on send and dropped on receive. */
#define SV_NET_MAX_PKT 9216u
/* Source-port sockets, at most. */
#define SV_NET_MAX_SOCKS 64u
/* The most packets one sv_net_recv returns. */
#define SV_NET_RX_BATCH 256u
/* Datagrams per recvmmsg; with GRO each may hold many packets. */
#define SV_NET_RX_MSGS 32u
/* One GSO datagram: at most this many packets (the kernel's
 * UDP_MAX_SEGMENTS of older kernels) and UDP payload bytes (IPv4's). */
#define SV_NET_GSO_SEGS 64u
#define SV_NET_GSO_BYTES 65507u

struct sv_net;   /* one per daemon */

struct sv_net_cfg {
	uint8_t addr[16];    /* the GID form of the address served */
	uint16_t port;       /* 4791; tests may use another */
	/* NULL (or "") or "seed=N,drop=P,dup=P,reorder=P,corrupt=P": any
	 * subset, any order, each key once, P in [0,1], N an unsigned
	 * integer (decimal or 0x hex; default 1). */
	const char *inject;
	/* No UDP GSO and GRO: one datagram per packet both ways. The
	 * injector works on packets and turns GSO off by itself. */
	bool no_offload;
};

/* Replace the injector's settings (an inject string as in sv_net_cfg; NULL
 * or "": none) from any thread: the next sv_net_send takes them, and the
 * seed starts its draws afresh. 0 or -EINVAL (nothing changed). qps, when
 * not NULL: the faults touch only the packets of the local QPs whose bit
 * (lqpn & qps_mask) is set there; the caller keeps the bitmap, and may
 * change its bits (relaxed bytes) while it is in use. */
int sv_net_set_inject(struct sv_net *n, const char *spec, const uint8_t *qps,
		      uint32_t qps_mask);

/* 0 or -errno (-EINVAL: a bad inject string; -EADDRINUSE, -EADDRNOTAVAIL:
 * from bind). Binds addr:port. */
int sv_net_open(struct sv_net **out, const struct sv_net_cfg *cfg);
void sv_net_close(struct sv_net *n);
/* The receive socket, for poll(). */
int sv_net_fd(const struct sv_net *n);

/*
 * The UDP source port that packets asked to leave from port want really
 * leave from (want, or the next free port, or the shared socket's port),
 * creating its socket if needed (a syscall: call it when a QP gets its
 * path, not per packet). The port, or -errno (the socket could not be
 * created; sends with that sport are then dropped as tx_err).
 */
int sv_net_sport(struct sv_net *n, uint16_t want);

struct sv_net_tx {
	const uint8_t *buf;
	uint32_t len;
	uint8_t dst[16];     /* GID form; same family as the net's address */
	uint16_t sport;      /* host order; see sv_net_sport */
	/* UDP GSO: this packet continues the datagram of the packet before
	 * it in the same sv_net_send. Only while sv_net_gso(); the same dst
	 * and sport; every earlier packet of the datagram as long as its
	 * first, this one no longer; at most SV_NET_GSO_SEGS packets and
	 * SV_NET_GSO_BYTES bytes in all. A cont that breaks a rule starts a
	 * datagram of its own. */
	bool cont;
	uint32_t lqpn;       /* the local QP that sends it (1: the GSI) */
};

/* May sv_net_send's caller mark packets cont now? */
bool sv_net_gso(const struct sv_net *n);
/* Does the receive socket take GRO datagrams? */
bool sv_net_gro(const struct sv_net *n);
/*
 * Send cnt packets (UDP to dst:port from addr:sport): batched with sendmmsg
 * (per source socket), never blocks (EAGAIN: the rest of that socket's
 * batch is dropped and counted in tx_drop_full), applies the injector.
 * Returns the packets handed to the kernel (or dropped or held back by the
 * injector). Never allocates. A packet longer than SV_NET_MAX_PKT, to the
 * other address family, or refused by the kernel (EMSGSIZE over a smaller
 * path MTU) is counted in tx_err.
 */
unsigned sv_net_send(struct sv_net *n, const struct sv_net_tx *pkts,
		     unsigned cnt);
/*
 * The injector's delay=US: packets held back now (any thread may look, a
 * relaxed load), and, on the send side (as sv_net_send), the held-back
 * packets whose time came sent: the ns until the next one's, 0 when none
 * waits. sv_net_send sends them too; a caller with nothing to send ticks
 * while any waits.
 */
uint32_t sv_net_delayed(const struct sv_net *n);
uint64_t sv_net_tick(struct sv_net *n);

struct sv_net_rx {
	uint8_t *buf;
	uint32_t len;
	/* src/dst/ports as received; ip_id 0 and df true (a UDP socket does
	 * not see them; sv_roce_icrc_ok ignores them). */
	struct sv_roce_ip ip;
};
/*
 * Receive up to max packets without blocking (recvmmsg into the net's own
 * buffers, valid until the next sv_net_recv; a GRO datagram's packets
 * one by one, the rest of it on the next call). Returns the count (0:
 * none). Truncated datagrams and packets longer than SV_NET_MAX_PKT are
 * dropped (rx_err).
 */
unsigned sv_net_recv(struct sv_net *n, struct sv_net_rx *out, unsigned max);
/*
 * Has everything the last recvmmsg returned been handed out, and did that
 * recvmmsg find fewer datagrams than it had room for (or none)? Then the
 * socket was empty when it was read: a caller may wait for it (poll)
 * rather than ask it once more. A net that never received is idle.
 */
bool sv_net_rx_idle(const struct sv_net *n);

struct sv_net_stats {
	uint64_t tx_pkts, tx_bytes;    /* datagrams the kernel took */
	uint64_t rx_pkts, rx_bytes;    /* datagrams returned by sv_net_recv */
	uint64_t tx_drop_full;         /* dropped on EAGAIN (socket full) */
	uint64_t inj_drop, inj_dup, inj_reorder, inj_corrupt;
	uint64_t inj_delay;            /* held back delay_us, then sent */
	uint64_t tx_err;               /* refused: see sv_net_send */
	uint64_t rx_err;               /* truncated or failed receives */
	uint64_t tx_gso, rx_gro;       /* datagrams of more than one packet */
};
void sv_net_stats(const struct sv_net *n, struct sv_net_stats *out);

#endif
