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

#include "abi/sv_lock.h"
#include "abi/sv_op.h"
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

/*
 * The opcode rules are abi/sv_op.h's table, which the daemon reads too;
 * these are the library's questions to it.
 *
 * The data opcodes ibv_post_send's one-WR fast path (post.c post_one)
 * handles itself, per QP type (RC, UC, UD: an XRC_SEND QP posts through
 * the general path, which asks as RC); anything else goes to the general
 * path.
 */
static inline bool sv_send_opcode_fast(enum ibv_qp_type type,
				       enum ibv_wr_opcode op)
{
	uint32_t f = sv_op_flags((uint32_t)op);

	return (f & SV_OPF_FAST) && (uint32_t)type < 8 &&
	       (f & SV_OPF_QPT(type));
}

/* Whether op is a memory-management opcode (no SGEs, no data): LOCAL_INV,
 * BIND_MW and SV_WR_FAST_REG_MR. */
static inline bool sv_send_opcode_mm(uint32_t op)
{
	return (sv_op_flags(op) & SV_OPF_MM) != 0;
}

/* Send opcodes this device executes through ibv_post_send, per QP type. */
static inline bool sv_send_opcode_ok(enum ibv_qp_type type,
				     enum ibv_wr_opcode op)
{
	return sv_op_ok((uint32_t)type, (uint32_t)op, false);
}

/* ... and through ibv_exp_post_send: those and the device's own. */
static inline bool sv_exp_opcode_ok(enum ibv_qp_type type, uint32_t op)
{
	return sv_op_ok((uint32_t)type, op, true);
}

/* The ibv_qp_ex send_ops_flags matching sv_send_opcode_ok. */
static inline uint64_t sv_send_ops_ok(enum ibv_qp_type type)
{
	return sv_op_ex_flags((uint32_t)type);
}

/* Whether the opcode carries data out of local SGEs (so may be inline). */
static inline bool sv_send_opcode_has_payload(enum ibv_wr_opcode op)
{
	return (sv_op_flags((uint32_t)op) & SV_OPF_PAYLOAD) != 0;
}

/* ---- the memory-management WQEs (post.c, wr.c, mm.c) ---- */

/* The first half of a WQE's header. */
static inline void sv_wqe_head(struct sv_send_wqe *w, uint64_t wr_id,
			       uint32_t op, uint32_t flags, uint32_t imm,
			       uint32_t num_sge)
{
	w->wr_id = wr_id;
	w->opcode = op;
	w->flags = flags & ~(uint32_t)IBV_SEND_INLINE;
	w->imm = imm;
	w->num_sge = num_sge;
}

/*
 * A work request's bind of a type 2 window mw to rkey (IBV_WR_BIND_MW,
 * ibv_wr_bind_mw), as far as the library can tell: 0 or EINVAL. The window
 * and the MR must be of ctx, rkey must keep the window's index (the WQE
 * names the window by it), and the bind needs an MR. Type 1 windows are
 * bound by ibv_bind_mw only.
 */
static inline int sv_bind_wr_check(const struct ibv_context *ctx,
				   const struct ibv_mw *mw, uint32_t rkey,
				   const struct ibv_mw_bind_info *bi)
{
	if (!mw || mw->context != ctx || mw->type != IBV_MW_TYPE_2 || !bi ||
	    !bi->mr || bi->mr->context != ctx || (rkey ^ mw->rkey) >> 8)
		return EINVAL;
	return 0;
}

/* 0, or EOPNOTSUPP on a device without masked atomics. */
static inline int sv_masked_check(struct ibv_context *ctx)
{
	return (to_sv_ctx(ctx)->attr.exp_cap_flags &
		SV_EXP_CAP_MASKED_ATOMICS) ? 0 : EOPNOTSUPP;
}

/* The second half of a masked atomic's WQE (every byte of it): the rkey in
 * imm (host order), the operands of cas (a masked CMP_SWAP) or of faa (a
 * masked FETCH_ADD, no masks) in the masked overlay (src/abi/sv_qp.h). */
static inline void sv_fill_masked(struct sv_send_wqe *w, uint32_t rkey,
				  uint64_t remote_addr,
				  const struct ibv_exp_cmp_swap *cas,
				  const struct ibv_exp_fetch_add *faa)
{
	w->imm = rkey;
	w->masked.remote_addr = remote_addr;
	w->masked.compare_add = cas ? cas->compare_val : faa->add_val;
	w->masked.swap = cas ? cas->swap_val : faa->field_boundary;
	w->masked.compare_mask = cas ? cas->compare_mask : 0;
	w->masked.swap_mask = cas ? cas->swap_mask : 0;
}

/* The `reg` half of a BIND_MW WQE (every byte of it): window key, range,
 * access and MR (none: unbinding a type 1 window). */
static inline void sv_fill_bind(struct sv_send_wqe *w, uint32_t key,
				const struct ibv_mw_bind_info *bi,
				uint16_t reg_flags)
{
	w->reg.iova = bi->addr;
	w->reg.key = key;
	w->reg.access = bi->mw_access_flags;
	w->reg.length = bi->length;
	w->reg.list = bi->mr ? bi->mr->lkey : 0;
	w->reg.fbo = 0;
	w->reg.page_shift = 0;
	w->reg.rsvd = 0;
	w->reg.flags = reg_flags;
}

/*
 * The `reg` half and num_sge of a FAST_REG_MR WQE that makes mr valid with
 * consumer key `key` over a->page_list (ibv_exp_post_send,
 * ibv_exp_wr_fast_reg_mr); the MR's lkey and rkey become the new key.
 * 0, or EINVAL (and nothing changed but the slot) for what the WQE cannot
 * carry: objects of another context, a list longer than the page list, a
 * page size that is not a power of two, unknown flags. The device checks
 * the rest when it executes the WQE.
 */
static inline int sv_fill_fast_reg(struct sv_send_wqe *w,
				   const struct ibv_context *ctx,
				   struct ibv_mr *mr, uint8_t key,
				   const struct ibv_exp_fast_reg_attr *a)
{
	const struct ibv_exp_fast_reg_page_list *pl = a->page_list;
	bool blocks = a->flags & IBV_EXP_FAST_REG_BLOCK_LIST;
	uint32_t k;

	if (!mr || mr->context != ctx || !pl || pl->context != ctx ||
	    !a->page_list_len || a->page_list_len > pl->max_page_list_len ||
	    (a->flags & ~(uint32_t)IBV_EXP_FAST_REG_BLOCK_LIST) ||
	    (!blocks && (!a->page_size || (a->page_size & (a->page_size - 1)))))
		return EINVAL;
	k = ibv_exp_update_fast_reg_key(mr->lkey, key);
	w->num_sge = a->page_list_len;
	w->reg.iova = a->iova_start;
	w->reg.key = k;
	w->reg.access = (uint32_t)a->access_flags;
	w->reg.length = a->length;
	w->reg.list = to_sv_page_list(pl)->handle;
	w->reg.fbo = a->first_byte_offset;
	w->reg.page_shift =
		blocks ? 0 : (uint8_t)__builtin_ctz(a->page_size);
	w->reg.rsvd = 0;
	w->reg.flags = blocks ? SV_REG_BLOCKS : 0;
	mr->lkey = k;
	mr->rkey = k;
	return 0;
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

/* Why a send is refused: EIO once the device is dead (as a NIC in its fatal
 * state; docs/DESIGN.md "A dead device drains"), else EINVAL (a state that
 * takes no sends). */
static inline __attribute__((cold)) int sv_post_refusal(const struct sv_qp *qp)
{
	return sv_ctx_dead(qp->ex.qp_base.context) ? EIO : EINVAL;
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

/*
 * Make receive WQEs up to wq->prod visible; wake the engine only where it
 * has something to do with them. In INIT, RTR, RTS, SQD and SQE receives
 * are taken by whoever delivers a message (the wire thread, a loopback
 * sender's engine, which waits out an RNR on its own timer), never by the
 * QP's engine: ringing there woke an engine that found nothing, once per
 * message of a ping-pong (docs/PERFORMANCE.md). In ERR (or a state this
 * side does not know) the engine flushes them: it is rung. The device
 * stores qp_state and then fences before its engine looks at the ring;
 * we store prod and fence before we read qp_state: one of the two sees
 * the other's store.
 */
static inline void sv_rq_publish(struct sv_wq *wq, struct sv_doorbell *db)
{
	uint32_t s;

	__atomic_store_n(&wq->hdr->prod, wq->prod, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	s = __atomic_load_n(&wq->hdr->qp_state, __ATOMIC_RELAXED);
	if (s != IBV_QPS_INIT && s != IBV_QPS_RTR && s != IBV_QPS_RTS &&
	    s != IBV_QPS_SQD && s != IBV_QPS_SQE)
		sv_doorbell_ring(db);
}

static inline void sv_sq_publish(struct sv_qp *qp)
{
	sv_wq_publish(&qp->sq, qp->db);
}

#endif
