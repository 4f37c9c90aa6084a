/* SPDX-License-Identifier: MIT */
/*
 * Inside the RoCEv2 wire: a wire QP's state and what dev.c, req.c
 * (requester), comp.c (completer) and resp.c, resp_exec.c, resp_recv.c
 * (responder) share. Everything here is under sv_dev.lock.
 */
#ifndef SV_DEVICE_ROCE_INT_H
#define SV_DEVICE_ROCE_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "abi/sv_tm.h"
#include "device/exec/exec_int.h"
#include "device/exec/transport.h"
#include "device/roce/build.h"
#include "device/roce/net.h"
#include "device/roce/roce.h"
#include "device/roce/wire.h"

/* WQEs in flight per QP (copied out of the ring until they complete) and
 * unacknowledged packets per QP at most: the bounded window of the issue.
 * Within it, a congestion window (cwnd, AIMD as TCP Reno's) of at least
 * SV_CWND_MIN packets: halved on a loss (a sequence NAK, a READ response
 * gap), SV_CWND_MIN after a timeout, grown again by ACKs; a loss costs
 * go-back-N of at most what the congestion window let out. */
#define SV_RQ_WIN       64u
#define SV_PKT_WIN      512u
#define SV_CWND_MIN     64u
/* A long message asks for an ACK this often at most (the last packet
 * always; req.c asks more often in a small congestion window). */
#define SV_ACKREQ_EVERY 128u
/* SV_READ_CHUNK: build.h */
/* Packets one engine step sends at most (one sendmmsg). */
#define SV_TX_BATCH     64u
/* Room of one packet buffer: headers + 4096 + pad + ICRC. */
#define SV_PKT_BYTES    (4096u + 128u)

/* One send WQE in flight (the requester's window; req.c, comp.c). */
struct sv_rwin {
	struct swqe w;
	uint32_t psn;              /* its first PSN */
	uint32_t npkts;            /* PSNs it takes (READ: its responses) */
	uint64_t len;              /* message bytes */
	uint64_t got;              /* READ: bytes landed, in order */
	bool done;                 /* READ, atomic: the answer arrived */
	bool rd;                   /* a READ or an atomic */
};

/* A READ or atomic the responder served: duplicates are answered from it. */
struct sv_rres {
	bool valid;
	bool atomic;
	bool rdack;                /* FLUSH, ATOMIC WRITE: answered (again)
				    * by a zero-length READ response */
	uint32_t psn, npkts;
	uint64_t va;
	uint32_t rkey;
	uint32_t len;
	uint64_t orig;             /* atomic: the value it returned */
};

enum { SV_IN_NONE = 0, SV_IN_SEND, SV_IN_WRITE };

struct sv_roce_qp {
	struct sv_qp *qp;
	uint8_t sgid[16], dgid[16];
	uint16_t sport;
	uint32_t mtu;              /* path MTU in bytes */
	uint32_t dqpn;

	/* requester (engine) and completer (wire thread) */
	struct sv_rwin *win;       /* SV_RQ_WIN entries, by WQE number */
	uint32_t head;             /* oldest WQE in flight (== qp->sq.cons) */
	uint32_t tail;             /* next WQE to take from the ring */
	uint32_t cur;              /* the WQE being sent */
	uint32_t cur_pkt;          /* its next packet */
	uint32_t next_psn;         /* first PSN of the next WQE taken */
	uint32_t una;              /* oldest unacknowledged PSN */
	uint32_t snd;              /* the PSN after the last one sent */
	uint64_t rto;              /* retransmission deadline, 0: none */
	uint64_t hold_until;       /* RNR NAK: send nothing before */
	/* RNR NAK: the retry is the NAKed packet alone, asking for an ACK,
	 * until one moves una (the rest of a 64-packet SEND sent after every
	 * RNR wait was dropped by the responder, ahead of the PSN it waits
	 * for, and took the CPU of the receiver that is to post receives) */
	bool rnr_probe;
	uint32_t retry_left, rnr_left;
	uint32_t cwnd, ssthresh;   /* congestion window, packets */
	uint32_t cwnd_acc;         /* ACKed packets towards cwnd + 1 */
	uint32_t recover;          /* no second cut before una passes it */
	uint32_t rewound_at;       /* READ gap: re-requested from here once */
	bool rewound;

	/* responder (wire thread) */
	uint32_t epsn;             /* expected PSN */
	uint32_t msn;
	bool nak_sent;             /* a sequence NAK for epsn is out */
	uint8_t in;                /* message in progress: SV_IN_* */
	bool rx_taken;             /* rx holds a receive WQE taken off the ring */
	struct rwqe rx;
	uint64_t rx_off;
	/* a SEND into a tag-matching SRQ in progress (rx_taken;
	 * sv_roce_resp_tm_take): its completion's opcode (0: not one), flags
	 * and TMH; the tag it matched (busy; rx is made of it) or
	 * SV_TM_NONE; an unexpected one (counted once received) */
	uint32_t tm_op;
	uint32_t tm_flags;
	uint32_t tm_tag;
	bool tm_unexp;
	bool tm_rndv;
	struct ibv_tmh tm_tmh;
	uint64_t wr_va, wr_len, wr_off;
	uint32_t wr_rkey;
	struct sv_rres res[SV_MAX_RD_ATOM];
	uint32_t res_next;
	bool ack_due;              /* an ACK to send at the end of the batch */
	uint32_t ack_psn;
};

/* WQE n of rq's window. */
static inline struct sv_rwin *sv_rwin(const struct sv_roce_qp *rq, uint32_t n)
{
	return &rq->win[n & (SV_RQ_WIN - 1)];
}

/* RC and XRC initiators: acknowledged, retried */
static inline bool sv_roce_reliable(const struct sv_qp *qp)
{
	return qp->type == IBV_QPT_RC || qp->type == IBV_QPT_XRC_SEND;
}

/* qp's local ACK timeout in ns (UINT64_MAX: none) */
static inline uint64_t sv_roce_timeout_ns(const struct sv_qp *qp)
{
	return sv_ack_timeout_ns(qp->attr.timeout);
}

/* resp_exec.c: the WRITE payloads of one QP that a receive batch
 * gathered, to be placed with one process_vm_writev before anything could
 * see them. */
#define SV_WB_PKTS SV_NET_RX_BATCH
#define SV_WB_IOVS 256u
struct sv_roce_wbatch {
	struct sv_qp *t;           /* NULL: nothing waits */
	pid_t pid;                 /* the target's process */
	unsigned int n, nrem;
	struct {
		uint32_t psn, rkey;
		uint64_t va;
	} pkt[SV_WB_PKTS];         /* each packet's key, to copy it alone */
	struct iovec loc[SV_WB_PKTS]; /* its payload */
	struct iovec rem[SV_WB_IOVS];
};

/* comp.c: the in-order response payloads of one READ that a receive batch
 * gathered, to be landed with one copy before anything could see them. */
struct sv_roce_land {
	struct sv_qp *qp;
	struct sv_roce_qp *rq;
	struct sv_rwin *e;
	uint32_t psn;              /* e's, to know it is still the same */
	uint64_t off, len;         /* where the first payload goes; bytes */
	unsigned int n;
	struct iovec v[SV_IOV_WINDOW];
};

/*
 * A thread's batches (one per thread, sv_roce_tx_get): the packets it
 * sends; and in the thread that receives (the wire thread), what a receive
 * batch leaves to do before its packet buffers are used again: WRITE
 * payloads to place (resp_exec.c) and READ response payloads to land
 * (comp.c).
 * The responder and the completer keep no state of their own beyond the
 * QPs'.
 */
struct sv_roce_tx {
	struct sv_net_tx pkt[SV_TX_BATCH];
	uint8_t sgid[SV_TX_BATCH][16];
	uint8_t *buf;              /* SV_TX_BATCH * SV_PKT_BYTES */
	unsigned int n;
	struct sv_roce_wbatch wb;
	struct sv_roce_land land;
};

/* The ops of sv_roce_transport (exec/transport.h, dev.c). req.c: the
 * requester's readiness (as sv_exec_ready), one step of it (as
 * sv_exec_step), and sv_exec_sq_owes for a wire QP: WQEs below upto not
 * yet taken, or taken with packets not yet sent, and no RNR hold or
 * retransmission timeout since the last acknowledged progress. */
int sv_roce_ready(const struct sv_qp *qp, uint64_t now, uint64_t *timer);
int sv_roce_step(struct sv_exec *x, struct sv_qp *qp);
int sv_roce_sq_owes(const struct sv_qp *qp, uint32_t upto, uint64_t now);
/* resp_recv.c: in ERR, what the wire holds of qp (a receive taken by a message
 * in progress): is there any, finish it. XRC: srq goes; a message target
 * t was receiving into it ends (a flush completion on srq's CQ). */
int sv_roce_flush_pending(const struct sv_qp *qp);
/* qp goes with a message half received into a tag: the tag is no longer
 * busy (resp_recv.c) */
void sv_roce_tm_release(struct sv_qp *qp);
int sv_roce_flush(struct sv_qp *qp);
int sv_roce_srq_gone(struct sv_qp *t, const struct sv_srq *srq);
/* dev.c: a UD datagram to a peer of another host: one packet. payload:
 * the message as a span (exec/exec_int.h) of len <= path MTU. A completion
 * status. */
int sv_roce_ud_send(struct sv_exec *x, struct sv_qp *qp,
		    const struct sv_ah *ah, uint32_t remote_qpn, uint32_t qkey,
		    bool imm, uint32_t imm_data, bool solicited,
		    const struct span *payload, uint64_t len);

/* dev.c */
extern struct sv_roce_stats sv_roce_stats;

/* A received packet dropped, and why (enum sv_rx_drop): every drop of the
 * receive path counts once, here (the wire thread, under the device lock). */
static inline void sv_roce_drop(enum sv_rx_drop why)
{
	sv_roce_stats.rx_drop++;
	sv_roce_stats.drop_why[why]++;
}
/* An execution context for the wire's copies (under sv_dev.lock, never
 * unlocked): this thread's bounce buffer, the time now. */
void sv_roce_exec(struct sv_exec *x);
/* This thread's tx batch (allocated once per thread). */
struct sv_roce_tx *sv_roce_tx_get(void);
/* The next free packet buffer (flushes a full batch first). */
uint8_t *sv_roce_tx_next(struct sv_roce_tx *tx);
/* Queue the packet written in the buffer sv_roce_tx_next gave: its headers
 * are at buf with hdr+payload bytes (the payload may still be written
 * until the flush); pad and ICRC are added at the flush. lqpn: the local
 * QP that sends it (the injector's per-process faults). */
void sv_roce_tx_push(struct sv_roce_tx *tx, size_t hdr_plus_payload,
		     const uint8_t sgid[16], const uint8_t dgid[16],
		     uint16_t sport, uint32_t lqpn);
void sv_roce_tx_flush(struct sv_roce_tx *tx);
/* What the wire thread does with the packets rx[0..n) sv_net_recv gave
 * (touched: room for SV_NET_RX_BATCH QPs): each to the responder or
 * the completer under sv_dev.lock, then the WRITE payloads placed, the
 * ACKs owed and the batch in tx sent. Also the fuzzer's way in
 * (tests/fuzz/fuzz_roce.c), with a transport that is not a socket. */
void sv_roce_rx_batch(const struct sv_net_rx *rx, unsigned int n,
		      struct sv_qp **touched, struct sv_roce_tx *tx);
/* Does device GID k have a transport (a UDP socket)? */
bool sv_roce_has_net(unsigned int k);

/* mcast.c: the groups' sockets (an epoll set) for the wire thread. start:
 * before the thread, 0 or -errno; stop: after it. rx: read what the
 * groups' sockets hold (takes sv_dev.lock), the datagrams read. */
int sv_roce_mcast_start(uint16_t port);
void sv_roce_mcast_stop(void);
int sv_roce_mcast_fd(void);
unsigned int sv_roce_mcast_rx(struct sv_roce_tx *tx);
/* A response without payload from responder rq into tx: an ACK, a NAK
 * (syndrome) or an atomic ACK (orig). */
void sv_roce_send_resp(struct sv_roce_tx *tx, struct sv_roce_qp *rq,
		       uint8_t opcode, uint8_t syndrome, uint32_t psn,
		       uint64_t orig);
/* An ACK or NAK from responder rq (syndrome, psn) into tx. */
void sv_roce_send_ack(struct sv_roce_tx *tx, struct sv_roce_qp *rq,
		      uint8_t syndrome, uint32_t psn);

/* comp.c: the completer's packets (ACK, NAK, READ response, atomic ACK);
 * READ payloads wait in tx->land */
void sv_roce_comp_rx(struct sv_qp *qp, const struct sv_roce_pkt *p,
		     struct sv_roce_tx *tx);
/* Land the READ response payloads gathered in this receive batch (comp.c):
 * before the batch's buffers are used again. */
void sv_roce_comp_flush(struct sv_roce_tx *tx);
/* comp.c: complete the head WQE of qp's window with status (the ring's
 * head is the window's); an error empties the window (the QP is in ERR or
 * SQE: the ring's flush completes the rest). */
void sv_roce_complete_head(struct sv_qp *qp, uint32_t status);
/* comp.c: qp's retransmission timer expired (the requester's step): go
 * back to the oldest unacknowledged PSN, or retry exceeded. */
void sv_roce_timed_out(struct sv_qp *qp);
/* resp.c: a request whose opcode is unknown (BTH only): NAK or drop */
void sv_roce_resp_unknown(struct sv_qp *qp, const struct sv_roce_pkt *p,
			  const struct sv_roce_ip *ip, struct sv_roce_tx *tx);
void sv_roce_resp_rx(struct sv_qp *qp, const struct sv_roce_pkt *p,
		     const struct sv_roce_ip *ip, struct sv_roce_tx *tx);
/* resp_exec.c: place the WRITE payloads that wait (before the ACKs of a batch,
 * and before the lock is let go): false if one failed (answered). */
bool sv_roce_resp_place(struct sv_roce_tx *tx);
/* resp.c: the end of a receive batch: the ACKs it owes */
void sv_roce_resp_flush_ack(struct sv_qp *qp, struct sv_roce_tx *tx);

/* ---- what the responder's files share (resp.c: the steps; resp_exec.c:
 * the execution; resp_recv.c: the receive WQEs) ---- */
/* RC and XRC targets: acknowledged */
static inline bool sv_roce_resp_is_rc(const struct sv_qp *qp)
{
	return qp->type == IBV_QPT_RC || qp->type == IBV_QPT_XRC_RECV;
}
/* resp.c: answer request psn with outcome o: its NAK (RC), and ERR where
 * o says so */
void sv_roce_resp_nak(struct sv_qp *t, struct sv_roce_tx *tx,
		      enum sv_outcome o, uint32_t psn);
/* resp_exec.c: a request behind the expected PSN, answered again */
void sv_roce_resp_duplicate(struct sv_qp *t, const struct sv_roce_pkt *p,
			    struct sv_roce_tx *tx);
/* resp_exec.c: RESPST_EXECUTE; true when the packet may ask for an ACK */
bool sv_roce_resp_execute(struct sv_qp *t, const struct sv_roce_pkt *p,
			  struct sv_roce_tx *tx);
/* resp_recv.c: the connected QP's message in progress completes its
 * receive WQE (or its tag) */
void sv_roce_resp_msg_rx_done(struct sv_qp *t, uint32_t status,
			      uint32_t opcode, uint32_t byte_len,
			      const struct sv_roce_pkt *p);
/* resp_recv.c: copy len bytes to byte off of taken receive WQE r: a
 * status */
uint32_t sv_roce_resp_rx_put(struct sv_qp *t, struct rwqe *r, uint64_t off,
			     const void *data, uint32_t len);
/* resp_recv.c: take a receive WQE for the message of packet psn: true; or
 * false, answered (an RNR NAK, or a NAK and ERR) */
bool sv_roce_resp_take_or_nak(struct sv_qp *t, struct sv_roce_tx *tx,
			      uint32_t psn);
/* resp_recv.c: the first packet of a SEND into a tag-matching SRQ: true,
 * taken (*skip: its bytes not placed); false: answered */
bool sv_roce_resp_tm_take(struct sv_qp *t, const struct sv_roce_pkt *p,
			  struct sv_roce_tx *tx, uint32_t *skip);
/* resp_recv.c: UD, one datagram; trouble drops it silently */
void sv_roce_resp_ud_recv(struct sv_qp *t, const struct sv_roce_pkt *p,
			  const struct sv_roce_ip *ip);

/* The opcode base of qp's transport (wire.h): RC 0, UC 0x20, XRC 0xa0. */
static inline uint32_t sv_roce_op_base(const struct sv_qp *qp)
{
	return qp->type == IBV_QPT_UC ? 0x20u :
	       qp->type == IBV_QPT_XRC_SEND ? SV_OP_XRC_BASE : 0x00u;
}

/* The packets of a message of len bytes (an empty one is one packet). */
static inline uint32_t sv_roce_pkts(uint64_t len, uint32_t mtu)
{
	return len ? (uint32_t)((len + mtu - 1) / mtu) : 1;
}

static inline uint32_t sv_psn_add(uint32_t psn, uint32_t n)
{
	return (psn + n) & SV_PSN_MASK;
}

/* The PSN before psn. */
static inline uint32_t sv_psn_prev(uint32_t psn)
{
	return sv_psn_add(psn, SV_PSN_MASK);
}

/* diag/capture.c: is a capture on (a relaxed load), and one packet to it
 * (dir SV_CAP_OUT or SV_CAP_IN) */
extern bool sv_cap_on;
void sv_capture_pkt(unsigned int dir, const struct sv_roce_ip *ip,
		    const uint8_t *buf, uint32_t len);
/* The packets this thread handed over since the last call go to the
 * reader, in one message (after each batch of sv_capture_pkt). */
void sv_capture_flush(void);

#endif
