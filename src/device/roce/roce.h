/* SPDX-License-Identifier: MIT */
/*
 * The RoCEv2 wire of softverbsd (daemon-private): what the rest of the
 * daemon calls. A QP whose peer is not on this daemon (its address vector
 * names a GID the device does not serve) is a "wire QP": its WQEs become
 * packets (req.c: requester), what comes back is the completer's
 * (comp.c), and the packets that arrive for it are served by resp.c,
 * resp_exec.c and resp_recv.c (responder). QPs of the same daemon keep the same-host path (loop/req.c,
 * loop/resp.c), with no packets.
 *
 * Threads: the requester runs in the QP's engine (sv_exec_step calls
 * sv_roce_transport.step); one wire thread (dev.c) receives packets and
 * runs the responder and the completer. Both under sv_dev.lock.
 */
#ifndef SV_DEVICE_ROCE_H
#define SV_DEVICE_ROCE_H

#include <stdbool.h>
#include <stdint.h>

#include "abi/sv_cmd.h"
#include "device/exec/engine.h"
#include "device/roce/wire.h"
#include "device/sv_dev.h"

struct sv_roce_stats {
	uint64_t tx_pkts, rx_pkts;
	uint64_t rx_drop;          /* every drop: the sum of drop_why */
	uint64_t drop_why[SV_RX_DROP_MAX]; /* enum sv_rx_drop (abi/sv_cmd.h) */
	uint64_t retransmits;      /* packets sent again */
	uint64_t timeouts;         /* retransmission timer expiries */
	uint64_t naks_sent, naks_rcvd;   /* PSN sequence, access, invalid */
	uint64_t rnr_naks_sent, rnr_naks_rcvd;
	uint64_t dup_reqs;         /* duplicate requests served again */
	uint64_t retry_exceeded;
};

/* Open the UDP port on the device's GID 0 address and start the wire
 * thread. port 0: 4791. inject: NULL or the fault injector's settings
 * (net.h); no_offload: no UDP GSO/GRO (net.h). 0, or -errno (the daemon
 * then runs without a wire). */
int sv_roce_start(uint16_t port, const char *inject, bool no_offload);
/* New fault-injector settings for every address served (softverbs
 * inject wire=SPEC): 0, -EINVAL (a bad spec: nothing changed), -ENODEV
 * (no RoCEv2 port). qps: NULL, or a bitmap of the local QPs (by qpn_tab
 * slot) whose packets alone the faults touch (net.h). */
int sv_roce_inject(const char *spec, const uint8_t *qps);
void sv_roce_stop(void);
bool sv_roce_running(void);
void sv_roce_get_stats(struct sv_roce_stats *out);
/* The STAT_WIRE command's answer (abi/sv_cmd.h). */
struct sv_rsp_stat_wire;
void sv_roce_stat_fill(struct sv_rsp_stat_wire *out);

/* Is gid one the device serves (a peer on this daemon)? */
bool sv_roce_gid_local(const uint8_t gid[16]);

/* ctl/qp.c, under sv_dev.lock: qp moves from state cur to next (its attributes
 * already applied). Sets up, resets or drops qp's wire state. 0 or -errno
 * (the modify fails; nothing changed). */
int sv_roce_qp_modify(struct sv_qp *qp, uint32_t cur, uint32_t next,
		      const char **why);
/* qp is destroyed (under sv_dev.lock). */
void sv_roce_qp_destroy(struct sv_qp *qp);

/* What a wire QP's execution does (exec/transport.h: the requester, what the
 * wire holds of a QP in ERR, a UD datagram to a peer of another host) is
 * sv_roce_transport's. */

/* mcast.c (roce), under sv_dev.lock: group slot idx (of sv_mcast_grp's
 * table) got its first QP / lost its last: receive its datagrams from the
 * wire, or stop. Join: 0 or -errno (no wire: 0, nothing to do). */
int sv_roce_mcast_join(unsigned int idx, const uint8_t gid[16]);
void sv_roce_mcast_leave(unsigned int idx);

/* dev.c: QP1, the connection manager's datagrams (src/device/cm/wire.c).
 * The wire thread puts every packet for QP1 (its ICRC checked) in a
 * bounded inbox; the control thread drains it when sv_roce_gsi_fd() is
 * readable (-1: no wire). */
#define SV_GSI_MAX_PKT 512
struct sv_gsi_pkt {
	struct sv_roce_ip ip;
	uint32_t len;
	uint8_t buf[SV_GSI_MAX_PKT];
};
int sv_roce_gsi_fd(void);
unsigned int sv_roce_gsi_recv(struct sv_gsi_pkt *out, unsigned int max);
uint64_t sv_roce_gsi_drops(void);  /* the inbox was full */
/* Send a MAD (len bytes) as a UD datagram from QP1 at sgid (one of the
 * device's GIDs) to QP1 at dgid. The control thread; takes sv_dev.lock.
 * 0 or -errno (-ENODEV: no wire; -EADDRNOTAVAIL: sgid has no port). */
int sv_roce_gsi_send(const uint8_t sgid[16], const uint8_t dgid[16],
		     const uint8_t *mad, size_t len);

#endif
