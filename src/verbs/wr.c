// SPDX-License-Identifier: MIT
/*
 * The extended post API: struct ibv_qp_ex and the ibv_wr_* calls.
 *
 * A session (wr_start ... wr_complete or wr_abort) builds WQEs straight into
 * the QP's send ring, slot after slot, under the QP's send lock (none for a
 * single-threaded QP). Nothing is visible to the device until wr_complete
 * publishes the producer counter with one release store; an error in the
 * session (no room, too many SGEs, too much inline data, an operation the QP
 * may not do) is remembered, makes the rest of the session a no-op, and is
 * what wr_complete returns, publishing nothing. wr_abort drops the session
 * the same way.
 *
 * No allocation and no system call here; the doorbell (sv_doorbell_ring)
 * wakes a sleeping engine with the post path's one futex call.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "verbs/sv_post.h"
#include "verbs/sv_verbs.h"

/* The send flags a WQE takes from ibv_qp_ex.wr_flags, as ibv_post_send
 * (anything else is EINVAL). IBV_SEND_INLINE is allowed there but decided
 * here by the data setter used (wr_set_inline_data*). */
#define WR_FLAGS_OK SV_SEND_FLAGS_OK

/* where rdma-core 56's struct ibv_qp_ex holds wr_flush: right past 44's
 * (sv_verbs.h: past ex built against 44's verbs.h, ex's own against 56's) */
_Static_assert(offsetof(struct sv_qp, ex) == 0 &&
		       offsetof(struct sv_qp, wr_flush) == SV_QP_EX_44_END,
	       "wr_flush must follow rdma-core 44's struct ibv_qp_ex, as in 56");
/* and the verbs.h built against is 44's or 56's: ex ends there or with
 * wr_flush */
_Static_assert(sizeof(struct ibv_qp_ex) == SV_QP_EX_44_END ||
		       sizeof(struct ibv_qp_ex) ==
			       SV_QP_EX_44_END + sizeof(void (*)(void)),
	       "struct ibv_qp_ex is neither rdma-core 44's nor 56's");

static inline struct sv_qp *ex_to_qp(struct ibv_qp_ex *ex)
{
	return (struct sv_qp *)((char *)ex - offsetof(struct sv_qp, ex));
}

static inline void wr_fail(struct sv_qp *qp, int err)
{
	if (!qp->wr_err)
		qp->wr_err = err;
}

/* The WQE being built, or NULL when the session is dead or has none (a
 * setter without a builder before it is a caller's error). */
static inline struct sv_send_wqe *cur_wqe(struct sv_qp *qp)
{
	if (qp->wr_err)
		return NULL;
	if (!qp->wr_cur) {
		qp->wr_err = EINVAL;
		return NULL;
	}
	return qp->wr_cur;
}

/* Is the WQE being built complete? A UD send needs its address. */
static inline bool wr_cur_done(struct sv_qp *qp)
{
	const struct sv_send_wqe *w = qp->wr_cur;

	if (w && qp->ex.qp_base.qp_type == IBV_QPT_UD && !w->ud.ah) {
		wr_fail(qp, EINVAL);
		return false;
	}
	return true;
}

/*
 * Claim the next slot for a WQE of opcode and fill its header from
 * ex.wr_id / ex.wr_flags; NULL (and the session's error set) when the
 * session is dead or the queue is full.
 */
static inline struct sv_send_wqe *wr_claim(struct sv_qp *qp,
					   enum ibv_wr_opcode opcode)
{
	struct sv_send_wqe *w;
	unsigned int flags = qp->ex.wr_flags;

	if (qp->wr_err || !wr_cur_done(qp))
		return NULL;
	if (flags & ~WR_FLAGS_OK) {
		qp->wr_err = EINVAL;
		return NULL;
	}
	w = sv_sq_next_slot(qp);
	if (!w) {
		qp->wr_err = ENOMEM;
		return NULL;
	}
	qp->sq.prod++;
	qp->wr_cur = w;
	/* the whole header, so that nothing of the slot's last WQE stays */
	*w = (struct sv_send_wqe){
		.wr_id = qp->ex.wr_id,
		.opcode = (uint32_t)opcode,
		.flags = flags & ~(unsigned int)IBV_SEND_INLINE,
	};
	return w;
}

/* ---- session ---- */

static void wr_start(struct ibv_qp_ex *ex)
{
	struct sv_qp *qp = ex_to_qp(ex);

	sv_sq_lock(qp);
	qp->wr_start_prod = qp->sq.prod;
	qp->wr_cur = NULL;
	/* as ibv_post_send: nothing is posted before RTS, nor on a dead
	 * device */
	qp->wr_err = sv_qp_send_state_ok(qp) &&
		     !sv_ctx_dead(qp->ex.qp_base.context) ? 0 :
		     sv_post_refusal(qp);
}

static inline void wr_end(struct sv_qp *qp)
{
	qp->wr_cur = NULL;
	qp->wr_err = 0;
	sv_sq_unlock(qp);
}

static int wr_complete(struct ibv_qp_ex *ex)
{
	struct sv_qp *qp = ex_to_qp(ex);
	int err;

	wr_cur_done(qp);
	err = qp->wr_err;
	if (err) {
		/* nothing of the session was published: forget its slots */
		qp->sq.prod = qp->wr_start_prod;
	} else if (qp->sq.prod != qp->wr_start_prod) {
		/* one release store of prod, then the doorbell */
		sv_sq_publish(qp);
	}
	wr_end(qp);
	return err;
}

static void wr_abort(struct ibv_qp_ex *ex)
{
	struct sv_qp *qp = ex_to_qp(ex);

	qp->sq.prod = qp->wr_start_prod;
	wr_end(qp);
}

/* ---- builders ---- */

static void wr_send(struct ibv_qp_ex *ex)
{
	wr_claim(ex_to_qp(ex), IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *ex, __be32 imm_data)
{
	struct sv_send_wqe *w = wr_claim(ex_to_qp(ex), IBV_WR_SEND_WITH_IMM);

	if (w)
		w->imm = (uint32_t)imm_data;
}

static void wr_rdma_write(struct ibv_qp_ex *ex, uint32_t rkey,
			  uint64_t remote_addr)
{
	struct sv_send_wqe *w = wr_claim(ex_to_qp(ex), IBV_WR_RDMA_WRITE);

	if (w) {
		w->rkey = rkey;
		w->remote_addr = remote_addr;
	}
}

static void wr_rdma_write_imm(struct ibv_qp_ex *ex, uint32_t rkey,
			      uint64_t remote_addr, __be32 imm_data)
{
	struct sv_send_wqe *w =
		wr_claim(ex_to_qp(ex), IBV_WR_RDMA_WRITE_WITH_IMM);

	if (w) {
		w->rkey = rkey;
		w->remote_addr = remote_addr;
		w->imm = (uint32_t)imm_data;
	}
}

static void wr_rdma_read(struct ibv_qp_ex *ex, uint32_t rkey,
			 uint64_t remote_addr)
{
	struct sv_send_wqe *w = wr_claim(ex_to_qp(ex), IBV_WR_RDMA_READ);

	if (w) {
		w->rkey = rkey;
		w->remote_addr = remote_addr;
	}
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *ex, uint32_t rkey,
			      uint64_t remote_addr, uint64_t compare,
			      uint64_t swap)
{
	struct sv_send_wqe *w =
		wr_claim(ex_to_qp(ex), IBV_WR_ATOMIC_CMP_AND_SWP);

	if (w) {
		w->rkey = rkey;
		w->remote_addr = remote_addr;
		w->atomic.compare_add = compare;
		w->atomic.swap = swap;
	}
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *ex, uint32_t rkey,
				uint64_t remote_addr, uint64_t add)
{
	struct sv_send_wqe *w =
		wr_claim(ex_to_qp(ex), IBV_WR_ATOMIC_FETCH_AND_ADD);

	if (w) {
		w->rkey = rkey;
		w->remote_addr = remote_addr;
		w->atomic.compare_add = add;
	}
}

/* The memory-management builders take no setter after them: the WQE is
 * done (and a setter would be a caller's error, EINVAL, as one with no
 * builder before it). */
static inline void wr_done(struct sv_qp *qp)
{
	qp->wr_cur = NULL;
}

/* ATOMIC WRITE (issue 23): the 8 bytes at atomic_wr go in the WQE; no
 * setter follows (the WQE is done) */
static void wr_atomic_write(struct ibv_qp_ex *ex, uint32_t rkey,
			    uint64_t remote_addr, const void *atomic_wr)
{
	struct sv_qp *qp = ex_to_qp(ex);
	struct sv_send_wqe *w = wr_claim(qp, IBV_WR_ATOMIC_WRITE);

	if (!w)
		return;
	if (!atomic_wr) {
		wr_fail(qp, EINVAL);
		return;
	}
	w->rkey = rkey;
	w->remote_addr = remote_addr;
	memcpy(&w->atomic.swap, atomic_wr, 8);
	wr_done(qp);
}

/* RDMA FLUSH (rdma-core 56's ibv_wr_flush, as rxe: RC only): the range or
 * the MR, the placement type and the selectivity go in the WQE, checked by
 * the responder, as rxe's (a bad one: a remote error); no setter follows */
static void wr_flush(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t remote_addr,
		     size_t len, uint8_t type, uint8_t level)
{
	struct sv_qp *qp = ex_to_qp(ex);
	struct sv_send_wqe *w = wr_claim(qp, (enum ibv_wr_opcode)SV_WR_FLUSH);

	if (!w)
		return;
	w->rkey = rkey;
	w->remote_addr = remote_addr;
	w->atomic.compare_add = (uint64_t)len;
	w->atomic.swap = SV_FLUSH_WQE(type, level);
	wr_done(qp);
}

static void wr_local_inv(struct ibv_qp_ex *ex, uint32_t invalidate_rkey)
{
	struct sv_qp *qp = ex_to_qp(ex);
	struct sv_send_wqe *w = wr_claim(qp, IBV_WR_LOCAL_INV);

	if (w) {
		w->imm = invalidate_rkey; /* host order */
		wr_done(qp);
	}
}

static void wr_send_inv(struct ibv_qp_ex *ex, uint32_t invalidate_rkey)
{
	struct sv_send_wqe *w = wr_claim(ex_to_qp(ex), IBV_WR_SEND_WITH_INV);

	if (w)
		w->imm = invalidate_rkey; /* host order */
}

static void wr_bind_mw(struct ibv_qp_ex *ex, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *bind_info)
{
	struct sv_qp *qp = ex_to_qp(ex);
	struct sv_send_wqe *w;

	if (!qp->wr_err &&
	    sv_bind_wr_check(qp->ex.qp_base.context, mw, rkey, bind_info)) {
		qp->wr_err = EINVAL;
		return;
	}
	w = wr_claim(qp, IBV_WR_BIND_MW);
	if (w) {
		sv_fill_bind(w, rkey, bind_info, 0);
		mw->rkey = rkey;
		wr_done(qp);
	}
}

/* include/softverbs/softverbs.h: the builders of the device's own WQEs, for
 * any QP type that may post them (no send_ops_flags bit names them) */
static struct sv_send_wqe *wr_claim_exp(struct sv_qp *qp, uint32_t op)
{
	if (!qp->wr_err && !sv_exp_opcode_ok(qp->ex.qp_base.qp_type, op)) {
		qp->wr_err = EINVAL;
		return NULL;
	}
	if (!qp->wr_err && (sv_op_flags(op) & SV_OPF_MASKED))
		qp->wr_err = sv_masked_check(qp->ex.qp_base.context);
	return wr_claim(qp, (enum ibv_wr_opcode)op);
}

SV_EXPORT void ibv_exp_wr_fast_reg_mr(struct ibv_qp_ex *ex, struct ibv_mr *mr,
				      uint8_t key,
				      const struct ibv_exp_fast_reg_attr *attr)
{
	struct sv_qp *qp = ex_to_qp(ex);
	struct sv_send_wqe *w = wr_claim_exp(qp, SV_WR_FAST_REG_MR);

	if (!w)
		return;
	if (!attr || sv_fill_fast_reg(w, qp->ex.qp_base.context, mr, key, attr))
		wr_fail(qp, EINVAL);
	wr_done(qp);
}

SV_EXPORT void ibv_exp_wr_rdma_read_inv(struct ibv_qp_ex *ex, uint32_t rkey,
					uint64_t remote_addr,
					uint32_t invalidate_lkey)
{
	struct sv_send_wqe *w = wr_claim_exp(ex_to_qp(ex), SV_WR_RDMA_READ_INV);

	if (w) {
		w->rkey = rkey;
		w->remote_addr = remote_addr;
		w->imm = invalidate_lkey; /* host order */
	}
}

/* A masked atomic's WQE: cas or faa (NULL both: EINVAL). */
static void wr_masked(struct ibv_qp_ex *ex, uint32_t op, uint32_t rkey,
		      uint64_t remote_addr,
		      const struct ibv_exp_cmp_swap *cas,
		      const struct ibv_exp_fetch_add *faa)
{
	struct sv_qp *qp = ex_to_qp(ex);
	struct sv_send_wqe *w = wr_claim_exp(qp, op);

	if (!w)
		return;
	if (!cas && !faa)
		wr_fail(qp, EINVAL);
	else
		sv_fill_masked(w, rkey, remote_addr, cas, faa);
}

SV_EXPORT void ibv_exp_wr_masked_cmp_swp(struct ibv_qp_ex *ex, uint32_t rkey,
					 uint64_t remote_addr,
					 const struct ibv_exp_cmp_swap *op)
{
	wr_masked(ex, SV_WR_MASKED_CMP_SWAP, rkey, remote_addr, op, NULL);
}

SV_EXPORT void ibv_exp_wr_masked_fetch_add(struct ibv_qp_ex *ex, uint32_t rkey,
					   uint64_t remote_addr,
					   const struct ibv_exp_fetch_add *op)
{
	wr_masked(ex, SV_WR_MASKED_FETCH_ADD, rkey, remote_addr, NULL, op);
}

/* ---- setters of the current WQE ---- */

static void wr_set_sge(struct ibv_qp_ex *ex, uint32_t lkey, uint64_t addr,
		       uint32_t length)
{
	struct sv_qp *qp = ex_to_qp(ex);
	struct sv_send_wqe *w = cur_wqe(qp);
	struct sv_wqe_sge *sge;

	if (!w)
		return;
	if (qp->sq.max_sge < 1) {
		qp->wr_err = EINVAL;
		return;
	}
	sge = (struct sv_wqe_sge *)(w + 1);
	sge->addr = addr;
	sge->length = length;
	sge->lkey = lkey;
	w->num_sge = 1;
	w->flags &= ~(uint32_t)IBV_SEND_INLINE;
}

static void wr_set_sge_list(struct ibv_qp_ex *ex, size_t num_sge,
			    const struct ibv_sge *sg_list)
{
	struct sv_qp *qp = ex_to_qp(ex);
	struct sv_send_wqe *w = cur_wqe(qp);
	struct sv_wqe_sge *sge;
	size_t i;

	if (!w)
		return;
	if (num_sge > qp->sq.max_sge || (num_sge && !sg_list)) {
		qp->wr_err = EINVAL;
		return;
	}
	sge = (struct sv_wqe_sge *)(w + 1);
	for (i = 0; i < num_sge; i++) {
		sge[i].addr = sg_list[i].addr;
		sge[i].length = sg_list[i].length;
		sge[i].lkey = sg_list[i].lkey;
	}
	w->num_sge = (uint32_t)num_sge;
	w->flags &= ~(uint32_t)IBV_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *ex, void *addr,
			       size_t length)
{
	struct sv_qp *qp = ex_to_qp(ex);
	struct sv_send_wqe *w = cur_wqe(qp);

	if (!w)
		return;
	if (length > qp->sq.max_inline || (length && !addr) ||
	    !sv_send_opcode_has_payload(w->opcode)) {
		qp->wr_err = EINVAL;
		return;
	}
	if (length)
		memcpy(w + 1, addr, length);
	w->num_sge = (uint32_t)length;
	w->flags |= IBV_SEND_INLINE;
}

static void wr_set_inline_data_list(struct ibv_qp_ex *ex, size_t num_buf,
				    const struct ibv_data_buf *buf_list)
{
	struct sv_qp *qp = ex_to_qp(ex);
	struct sv_send_wqe *w = cur_wqe(qp);
	size_t i, len = 0;
	char *dst;

	if (!w)
		return;
	if ((num_buf && !buf_list) || !sv_send_opcode_has_payload(w->opcode)) {
		qp->wr_err = EINVAL;
		return;
	}
	dst = (char *)(w + 1);
	for (i = 0; i < num_buf; i++) {
		size_t n = buf_list[i].length;

		if (n > qp->sq.max_inline - len ||
		    (n && !buf_list[i].addr)) {
			qp->wr_err = EINVAL;
			return;
		}
		if (n)
			memcpy(dst + len, buf_list[i].addr, n);
		len += n;
	}
	w->num_sge = (uint32_t)len;
	w->flags |= IBV_SEND_INLINE;
}

static void wr_set_ud_addr(struct ibv_qp_ex *ex, struct ibv_ah *ah,
			   uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct sv_qp *qp = ex_to_qp(ex);
	struct sv_send_wqe *w = cur_wqe(qp);

	if (!w)
		return;
	if (!ah || ah->context != qp->ex.qp_base.context) {
		qp->wr_err = EINVAL;
		return;
	}
	w->ud.ah = to_sv_ah(ah)->handle;
	w->ud.remote_qkey = remote_qkey;
	w->remote_qpn = remote_qpn;
}

static void wr_set_xrc_srqn(struct ibv_qp_ex *ex, uint32_t remote_srqn)
{
	struct sv_send_wqe *w = cur_wqe(ex_to_qp(ex));

	if (w)
		w->remote_qpn = remote_srqn;   /* XRC: the remote SRQ */
}

/* ---- what this QP may not do: the session fails ---- */

#define WR_REFUSE(name, err, ...)                                            \
	static void name(struct ibv_qp_ex *ex, ##__VA_ARGS__)                \
	{                                                                    \
		wr_fail(ex_to_qp(ex), err);                                  \
	}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"

/* operations the QP type or send_ops_flags rule out: EINVAL, as
 * ibv_post_send refuses such an opcode */
WR_REFUSE(inval_send, EINVAL)
WR_REFUSE(inval_send_imm, EINVAL, __be32 imm)
WR_REFUSE(inval_rdma_write, EINVAL, uint32_t rkey, uint64_t raddr)
WR_REFUSE(inval_rdma_write_imm, EINVAL, uint32_t rkey, uint64_t raddr,
	  __be32 imm)
WR_REFUSE(inval_rdma_read, EINVAL, uint32_t rkey, uint64_t raddr)
WR_REFUSE(inval_cmp_swp, EINVAL, uint32_t rkey, uint64_t raddr,
	  uint64_t compare, uint64_t swap)
WR_REFUSE(inval_fetch_add, EINVAL, uint32_t rkey, uint64_t raddr,
	  uint64_t add)
WR_REFUSE(inval_ud_addr, EINVAL, struct ibv_ah *ah, uint32_t qpn,
	  uint32_t qkey)

WR_REFUSE(inval_send_inv, EINVAL, uint32_t rkey)
WR_REFUSE(inval_local_inv, EINVAL, uint32_t rkey)
WR_REFUSE(inval_bind_mw, EINVAL, struct ibv_mw *mw, uint32_t rkey,
	  const struct ibv_mw_bind_info *info)

/* operations the device does not do through this API: EOPNOTSUPP */
WR_REFUSE(nosup_send_tso, EOPNOTSUPP, void *hdr, uint16_t hdr_sz,
	  uint16_t mss)
WR_REFUSE(inval_xrc_srqn, EINVAL, uint32_t srqn)
WR_REFUSE(nosup_atomic_write, EOPNOTSUPP, uint32_t rkey, uint64_t raddr,
	  const void *data)
/* ibv_wr_flush (rdma-core 56) on a QP created without it */
WR_REFUSE(inval_flush, EINVAL, uint32_t rkey, uint64_t raddr, size_t len,
	  uint8_t type, uint8_t level)

#pragma GCC diagnostic pop
#undef WR_REFUSE

void sv_qp_init_wr_ops(struct sv_qp *qp)
{
	struct ibv_qp_ex *ex = &qp->ex;
	uint64_t ok = qp->send_ops_flags &
		      sv_send_ops_ok(qp->ex.qp_base.qp_type);

#define PICK(flag, fn, refuse) ((ok & (flag)) ? (fn) : (refuse))
	ex->wr_start = wr_start;
	ex->wr_complete = wr_complete;
	ex->wr_abort = wr_abort;

	ex->wr_send = PICK(IBV_QP_EX_WITH_SEND, wr_send, inval_send);
	ex->wr_send_imm = PICK(IBV_QP_EX_WITH_SEND_WITH_IMM, wr_send_imm,
			       inval_send_imm);
	ex->wr_rdma_write = PICK(IBV_QP_EX_WITH_RDMA_WRITE, wr_rdma_write,
				 inval_rdma_write);
	ex->wr_rdma_write_imm = PICK(IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
				     wr_rdma_write_imm, inval_rdma_write_imm);
	ex->wr_rdma_read = PICK(IBV_QP_EX_WITH_RDMA_READ, wr_rdma_read,
				inval_rdma_read);
	ex->wr_atomic_cmp_swp = PICK(IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP,
				     wr_atomic_cmp_swp, inval_cmp_swp);
	ex->wr_atomic_fetch_add = PICK(IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
				       wr_atomic_fetch_add, inval_fetch_add);
	ex->wr_send_inv = PICK(IBV_QP_EX_WITH_SEND_WITH_INV, wr_send_inv,
			       inval_send_inv);
	ex->wr_local_inv = PICK(IBV_QP_EX_WITH_LOCAL_INV, wr_local_inv,
				inval_local_inv);
	ex->wr_bind_mw = PICK(IBV_QP_EX_WITH_BIND_MW, wr_bind_mw,
			      inval_bind_mw);

	ex->wr_set_sge = wr_set_sge;
	ex->wr_set_sge_list = wr_set_sge_list;
	ex->wr_set_inline_data = wr_set_inline_data;
	ex->wr_set_inline_data_list = wr_set_inline_data_list;
	ex->wr_set_ud_addr = qp->ex.qp_base.qp_type == IBV_QPT_UD ?
				     wr_set_ud_addr :
				     inval_ud_addr;

	ex->wr_send_tso = nosup_send_tso;
	ex->wr_set_xrc_srqn = qp->ex.qp_base.qp_type == IBV_QPT_XRC_SEND ?
				      wr_set_xrc_srqn : inval_xrc_srqn;
	ex->wr_atomic_write = PICK(IBV_QP_EX_WITH_ATOMIC_WRITE,
				   wr_atomic_write, nosup_atomic_write);
	qp->wr_flush = PICK(SV_QP_EX_WITH_FLUSH, wr_flush, inval_flush);
#undef PICK

	qp->wr_cur = NULL;
	qp->wr_err = 0;
}
