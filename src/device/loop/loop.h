/* SPDX-License-Identifier: MIT */
/*
 * What the same-host requester (req.c) and responder (resp.c)
 * share: the message that goes from one to the other, the responder's
 * answers that are not a completion status, and the grant fence both
 * sides wait in. Private to those two files and the dispatcher (exec/exec.c).
 * Under sv_dev.lock.
 */
#ifndef SV_DEVICE_LOOP_H
#define SV_DEVICE_LOOP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "abi/sv_tm.h"
#include "device/exec/engine.h"
#include "device/exec/exec_int.h"
#include "device/sv_dev.h"

/* Responder outcomes that are not a completion status. */
#define RES_RNR   (-1)    /* no receive WQE: wait the target's RNR timer */
#define RES_NOACK (-2)    /* no answer: wait the transport timeout */
#define RES_BUSY  (-3)    /* the target's receive queue is being filled by
			   * another engine's unlocked copy: try again */
#define RES_LOST  (-4)    /* the requester changed (destroyed, new state)
			   * during an unlocked copy or a fence: forget
			   * this attempt */

/* The opcode rules are abi/sv_op.h's table, which the library reads too. */

/* A rendezvous that matched a tag (resp.c): what is left to do once
 * the requester's SEND has completed. */
struct tm_rndv {
	uint32_t tqpn;             /* the responder */
	uint32_t num_sge;
	uint64_t wr_id;            /* the tag's recv_wr_id */
	struct sv_wqe_sge sge;     /* the tagged buffer */
	struct ibv_tmh tmh;
	struct ibv_rvh rvh;
};

/* One message on its way from requester to responder. */
struct msg {
	struct sv_qp *qp;          /* requester */
	const struct swqe *w;
	uint32_t opcode;           /* enum ibv_wr_opcode */
	uint64_t len;
	struct span local;         /* source (SEND, WRITE) or sink (READ, atomic) */
	struct sv_map lmap[SV_MAX_SGE];
	struct iovec liov[SV_IOV_WINDOW];
	struct sv_ah *ah;          /* UD */
	uint64_t rnr_ns;           /* out: the target's RNR timer */
	int lost;                  /* out: see msg_copy (resp.c) */
	bool rndv_due;             /* out: rndv is to run (sv_loop_tm_rndv) */
	struct tm_rndv rndv;
};

/* The Q_Key a UD send WQE h of qp sends. */
static inline uint32_t sv_ud_qkey(const struct sv_qp *qp,
				  const struct sv_send_wqe *h)
{
	return (h->ud.remote_qkey & SV_QKEY_USE_QP) ? qp->attr.qkey :
						      h->ud.remote_qkey;
}

/* ---- resp.c: the responder ---- */

/* Hand message m to the QP it is addressed to: the requester's completion
 * status, or RES_*. */
int sv_loop_deliver(struct sv_exec *x, struct msg *m);
/* A tag-matching rendezvous (m->rndv_due), after the requester's SEND
 * completed: READ the data into the tagged buffer, the FIN, the data's
 * completion. */
void sv_loop_tm_rndv(struct sv_exec *x, struct msg *m);
/* A UD send to a multicast GID (m->ah's): every QP of the group here,
 * then the wire. f: the opcode's SV_OPF_* flags. */
int sv_loop_mcast(struct sv_exec *x, struct msg *m, uint32_t f);

/* The grant fence: must an operation that ended a grant wait for other
 * engines' unlocked copies (seen: their copy_seq)? Then wait, without the
 * lock, for each to move on. */
bool sv_grant_fence_needed(const struct sv_exec *x,
			   uint32_t seen[SV_DB_PAGES]);
void sv_grant_fence_wait(struct sv_exec *x, const uint32_t seen[SV_DB_PAGES]);

/* ---- diag/capture.c ---- */

/* softverbs capture is on (one relaxed load; roce_int.h too). */
extern bool sv_cap_on;
/* Message m ran with res (sq_run's result): render the packets a NIC
 * would have sent for it, both ways, to the capture. */
void sv_capture_loop(struct sv_exec *x, const struct msg *m, int res);
/* diag/capture.c: a rendezvous of m's after it ran (sv_loop_tm_rndv): t's READ
 * and its answer by st, then, when st is a success, t's FIN, answered when
 * fin (it landed). */
void sv_capture_rndv(struct sv_exec *x, const struct msg *m, struct sv_qp *t,
		     uint32_t st, bool fin);

/* ---- req.c: the requester ---- */

/* LOCAL_INV, and the invalidation of RDMA_READ_INV: a completion status,
 * or RES_LOST (the fence let the lock go and the WQE is no longer ours). */
int sv_loop_local_inv(struct sv_exec *x, struct sv_qp *qp, uint32_t key);

#endif /* SV_DEVICE_LOOP_H */
