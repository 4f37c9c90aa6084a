/* SPDX-License-Identifier: MIT */
/*
 * The send-queue fast path shared by post.c (ibv_post_send) and wr.c (the
 * ibv_wr_* calls of struct ibv_qp_ex). Everything here is inline: no call, no
 * allocation, no system call except the doorbell's FUTEX_WAKE when the engine
 * sleeps.
 *
 * Producing WQEs, under the SQ lock (sv_sq_lock):
 *   slot = sv_sq_next_slot(qp);      NULL: the queue is full (ENOMEM)
 *   ... fill the slot (a struct sv_send_wqe, then SGEs or inline bytes) ...
 *   qp->sq.prod++;                   private: the device does not see it yet
 *   ... more WQEs ...
 *   sv_sq_publish(qp);               one release store of prod + doorbell
 * Dropping WQEs built but not published (ibv_wr_abort) is setting qp->sq.prod
 * back: the device never saw them.
 */
#ifndef SV_VERBS_POST_H
#define SV_VERBS_POST_H

#include <stdbool.h>
#include <stdint.h>

#include "verbs/sv_lock.h"
#include "verbs/sv_verbs.h"

/* wr.c: fill qp->ex.wr_* (called by create_qp_ex when the QP has_ex). */
void sv_qp_init_wr_ops(struct sv_qp *qp);

static inline struct sv_ah *to_sv_ah(struct ibv_ah *ah)
{
	return (struct sv_ah *)ah;
}

/* Send flags a WQE may carry. */
#define SV_SEND_FLAGS_OK                                                     \
	((uint32_t)(IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | \
		    IBV_SEND_INLINE))

/* Send opcodes this device executes, per QP type (ibv_post_send). */
static inline bool sv_send_opcode_ok(enum ibv_qp_type type,
				     enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		return type == IBV_QPT_RC || type == IBV_QPT_UC ||
		       type == IBV_QPT_UD;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return type == IBV_QPT_RC || type == IBV_QPT_UC;
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return type == IBV_QPT_RC;
	default:
		return false; /* memory-management WRs: not yet */
	}
}

/* The ibv_qp_ex send_ops_flags matching sv_send_opcode_ok. */
static inline uint64_t sv_send_ops_ok(enum ibv_qp_type type)
{
	uint64_t f = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;

	if (type == IBV_QPT_RC || type == IBV_QPT_UC)
		f |= IBV_QP_EX_WITH_RDMA_WRITE |
		     IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
	if (type == IBV_QPT_RC)
		f |= IBV_QP_EX_WITH_RDMA_READ |
		     IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
		     IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	return f;
}

/* Whether the opcode carries data out of local SGEs (so may be inline). */
static inline bool sv_send_opcode_has_payload(enum ibv_wr_opcode op)
{
	return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM ||
	       op == IBV_WR_SEND_WITH_INV || op == IBV_WR_RDMA_WRITE ||
	       op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

/* ibv_post_send is refused (EINVAL) in RESET, INIT and RTR; accepted in RTS,
 * SQD, SQE and ERR (the last two flush). The library's view of the state is
 * ibv_qp.state, which only modify/query change. */
static inline bool sv_qp_send_state_ok(const struct sv_qp *qp)
{
	enum ibv_qp_state s = __atomic_load_n(&qp->ex.qp_base.state,
					      __ATOMIC_RELAXED);

	return s == IBV_QPS_RTS || s == IBV_QPS_SQD || s == IBV_QPS_SQE ||
	       s == IBV_QPS_ERR;
}

/* ibv_post_recv is refused (EINVAL) only in RESET (and unknown states). */
static inline bool sv_qp_recv_state_ok(const struct sv_qp *qp)
{
	enum ibv_qp_state s = __atomic_load_n(&qp->ex.qp_base.state,
					      __ATOMIC_RELAXED);

	return s == IBV_QPS_INIT || s == IBV_QPS_RTR || s == IBV_QPS_RTS ||
	       s == IBV_QPS_SQD || s == IBV_QPS_SQE || s == IBV_QPS_ERR;
}

static inline void sv_sq_lock(struct sv_qp *qp)
{
	if (!qp->single_threaded)
		sv_spin_lock(&qp->sq_lock);
}

static inline void sv_sq_unlock(struct sv_qp *qp)
{
	if (!qp->single_threaded)
		sv_spin_unlock(&qp->sq_lock);
}

static inline void sv_rq_lock(struct sv_qp *qp)
{
	if (!qp->single_threaded)
		sv_spin_lock(&qp->rq_lock);
}

static inline void sv_rq_unlock(struct sv_qp *qp)
{
	if (!qp->single_threaded)
		sv_spin_unlock(&qp->rq_lock);
}

/* Is there room for one more WQE at wq->prod, with at most max outstanding?
 * The acquire load of cons pairs with the device's release store: a slot is
 * rewritten only after the device copied it out. */
static inline bool sv_wq_has_room(const struct sv_wq *wq, uint32_t max)
{
	return wq->prod - __atomic_load_n(&wq->hdr->cons, __ATOMIC_ACQUIRE) <
	       max;
}

static inline void *sv_wq_slot_at(const struct sv_wq *wq, uint32_t idx)
{
	return sv_wq_slot(wq->hdr, wq->entries, wq->stride, idx);
}

/* The slot for the next send WQE (at qp->sq.prod), or NULL when the SQ
 * already holds max_send_wr WQEs the device has not finished. */
static inline struct sv_send_wqe *sv_sq_next_slot(struct sv_qp *qp)
{
	if (!sv_wq_has_room(&qp->sq, qp->max_send_wr))
		return NULL;
	return sv_wq_slot_at(&qp->sq, qp->sq.prod);
}

/* Make every WQE up to wq->prod visible to the device and wake its engine. */
static inline void sv_wq_publish(struct sv_wq *wq, struct sv_doorbell *db)
{
	/* release: the slots are written before the device sees prod */
	__atomic_store_n(&wq->hdr->prod, wq->prod, __ATOMIC_RELEASE);
	sv_doorbell_ring(db);
}

static inline void sv_sq_publish(struct sv_qp *qp)
{
	sv_wq_publish(&qp->sq, qp->db);
}

#endif
