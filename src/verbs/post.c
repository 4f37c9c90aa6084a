// SPDX-License-Identifier: MIT
/*
 * The post path: ibv_post_send, ibv_post_recv, ibv_post_srq_recv.
 *
 * Each WR is checked, then copied into the next free slot of its ring; once
 * the list is done (or stops at the first WR that cannot be posted), one
 * release store publishes the producer counter and the doorbell is rung.
 * No allocation, no system call except the FUTEX_WAKE of a sleeping engine;
 * a spinlock per queue.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "verbs/qp_ops.h"
#include "verbs/sv_post.h"

void sv_doorbell_ring(struct sv_doorbell *db)
{
	/* Order our prod store before the load of `sleeping`; the engine
	 * orders its store of `sleeping` before its last look at the rings.
	 * So either it sees our WQE or we see it asleep. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&db->sleeping, __ATOMIC_RELAXED)) {
		__atomic_fetch_add(&db->seq, 1, __ATOMIC_SEQ_CST);
		/* not FUTEX_PRIVATE: the page is shared with the daemon */
		syscall(SYS_futex, &db->seq, FUTEX_WAKE, 1, NULL, NULL, 0);
	}
}

/* 0 or the errno that refuses this send WR on this QP. */
static int check_send(const struct sv_qp *qp, const struct ibv_send_wr *wr)
{
	enum ibv_qp_type type = qp->ex.qp_base.qp_type;

	if (!sv_send_opcode_ok(type, wr->opcode))
		return EINVAL;
	if (wr->send_flags & ~SV_SEND_FLAGS_OK)
		return EINVAL;
	if (wr->num_sge < 0 || (wr->num_sge && !wr->sg_list))
		return EINVAL;
	if ((wr->send_flags & IBV_SEND_INLINE) &&
	    sv_send_opcode_has_payload(wr->opcode)) {
		uint64_t total = 0;

		for (int i = 0; i < wr->num_sge; i++)
			total += wr->sg_list[i].length;
		if (total > qp->sq.max_inline)
			return EINVAL;
	} else if ((uint32_t)wr->num_sge > qp->sq.max_sge) {
		return EINVAL;
	}
	if (type == IBV_QPT_UD &&
	    (!wr->wr.ud.ah || wr->wr.ud.ah->context != qp->ex.qp_base.context))
		return EINVAL;
	return 0;
}

/* Copy a checked WR into its slot. */
static void fill_send(const struct sv_qp *qp, struct sv_send_wqe *w,
		      const struct ibv_send_wr *wr)
{
	unsigned int flags = wr->send_flags;
	char *body = (char *)w + SV_SEND_WQE_HDR;

	memset(w, 0, sizeof(*w));
	w->wr_id = wr->wr_id;
	w->opcode = wr->opcode;
	switch (wr->opcode) {
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		w->imm = wr->imm_data; /* big-endian, as given */
		break;
	case IBV_WR_SEND_WITH_INV:
		w->imm = wr->invalidate_rkey;
		break;
	default:
		break;
	}
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		w->remote_addr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		w->remote_addr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->atomic.compare_add = wr->wr.atomic.compare_add;
		w->atomic.swap = wr->wr.atomic.swap;
		break;
	default:
		break;
	}
	if (qp->ex.qp_base.qp_type == IBV_QPT_UD) {
		w->ud.ah = to_sv_ah(wr->wr.ud.ah)->handle;
		w->remote_qpn = wr->wr.ud.remote_qpn;
		w->ud.remote_qkey = wr->wr.ud.remote_qkey;
	}
	if (!sv_send_opcode_has_payload(wr->opcode))
		flags &= ~(unsigned int)IBV_SEND_INLINE; /* READ, atomics */
	if (flags & IBV_SEND_INLINE) {
		uint32_t len = 0;

		for (int i = 0; i < wr->num_sge; i++) {
			uint32_t n = wr->sg_list[i].length;

			if (!n)
				continue;
			memcpy(body + len,
			       (const void *)(uintptr_t)wr->sg_list[i].addr, n);
			len += n;
		}
		w->num_sge = len;
	} else {
		if (wr->num_sge) /* sg_list may be NULL without SGEs */
			memcpy(body, wr->sg_list,
			       (size_t)wr->num_sge * sizeof(struct sv_wqe_sge));
		w->num_sge = (uint32_t)wr->num_sge;
	}
	w->flags = sv_wqe_send_flags(qp, flags);
}

_Static_assert(sizeof(struct ibv_sge) == sizeof(struct sv_wqe_sge), "sge");
_Static_assert(offsetof(struct ibv_sge, addr) ==
	       offsetof(struct sv_wqe_sge, addr), "sge addr");
_Static_assert(offsetof(struct ibv_sge, length) ==
	       offsetof(struct sv_wqe_sge, length), "sge length");
_Static_assert(offsetof(struct ibv_sge, lkey) ==
	       offsetof(struct sv_wqe_sge, lkey), "sge lkey");

int sv_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		 struct ibv_send_wr **bad_wr)
{
	struct sv_qp *qp = to_sv_qp(ibqp);
	struct sv_send_wqe *slot;
	uint32_t start;
	int err = 0;

	if (!sv_qp_send_state_ok(qp)) {
		*bad_wr = wr;
		return EINVAL;
	}
	sv_sq_lock(qp);
	start = qp->sq.prod;
	for (; wr; wr = wr->next) {
		err = check_send(qp, wr);
		if (err)
			break;
		slot = sv_sq_next_slot(qp);
		if (!slot) {
			err = ENOMEM;
			break;
		}
		fill_send(qp, slot, wr);
		qp->sq.prod++;
	}
	if (qp->sq.prod != start)
		sv_sq_publish(qp);
	sv_sq_unlock(qp);
	if (err)
		*bad_wr = wr;
	return err;
}

/* Check a receive WR against its ring and copy it into the slot at
 * wq->prod: 0, EINVAL or ENOMEM (the caller holds the ring's lock). */
static int put_recv(struct sv_wq *wq, uint32_t max_wr,
		    const struct ibv_recv_wr *wr)
{
	struct sv_recv_wqe *w;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > wq->max_sge ||
	    (wr->num_sge && !wr->sg_list))
		return EINVAL;
	if (!sv_wq_has_room(wq, max_wr))
		return ENOMEM;
	w = sv_wq_slot_at(wq, wq->prod);
	w->wr_id = wr->wr_id;
	w->num_sge = (uint32_t)wr->num_sge;
	w->rsvd = 0;
	if (wr->num_sge) /* sg_list may be NULL without SGEs */
		memcpy((char *)w + SV_RECV_WQE_HDR, wr->sg_list,
		       (size_t)wr->num_sge * sizeof(struct sv_wqe_sge));
	wq->prod++;
	return 0;
}

int sv_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		 struct ibv_recv_wr **bad_wr)
{
	struct sv_qp *qp = to_sv_qp(ibqp);
	uint32_t start;
	int err = 0;

	/* receives of a QP with an SRQ are posted to the SRQ */
	if (ibqp->srq || !sv_qp_recv_state_ok(qp)) {
		*bad_wr = wr;
		return EINVAL;
	}
	sv_rq_lock(qp);
	start = qp->rq.prod;
	for (; wr; wr = wr->next) {
		err = put_recv(&qp->rq, qp->max_recv_wr, wr);
		if (err)
			break;
	}
	/* rung even in ERR: the engine flushes the new receives */
	if (qp->rq.prod != start)
		sv_wq_publish(&qp->rq, qp->db);
	sv_rq_unlock(qp);
	if (err)
		*bad_wr = wr;
	return err;
}

int sv_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
		     struct ibv_recv_wr **bad_wr)
{
	struct sv_srq *srq = to_sv_srq(ibsrq);
	uint32_t start;
	int err = 0;

	pthread_spin_lock(&srq->lock);
	start = srq->rq.prod;
	for (; wr; wr = wr->next) {
		err = put_recv(&srq->rq, srq->max_wr, wr);
		if (err)
			break;
	}
	if (srq->rq.prod != start)
		sv_wq_publish(&srq->rq, srq->db);
	pthread_spin_unlock(&srq->lock);
	if (err)
		*bad_wr = wr;
	return err;
}
