// SPDX-License-Identifier: MIT
/*
 * The same-host requester: the head WQE of a send queue whose peer is on
 * this daemon (or a UD datagram to anyone) is copied out of its slot (or
 * the ring's mailbox), validated against abi/sv_op.h's opcode table and
 * the QP, its local SGEs resolved, and handed to the same-host responder
 * (resp.c) as one message. Its answer decides the WQE: complete it,
 * wait the target's RNR timer or the transport timeout (retry_cnt,
 * rnr_retry), or leave it at the head (RES_BUSY, RES_LOST). This is the
 * same-host transport's requester (sv_loop_transport, exec/transport.h, at the
 * end), SQD's drain included.
 *
 * The operations that run at the requester alone (LOCAL_INV, BIND_MW,
 * FAST_REG_MR) run here for every transport: a wire QP's requester hands
 * them over (sv_exec_local_head).
 *
 * Execution is synchronous and in order: a WQE is finished (or waits as the
 * head of its queue) before the next starts. So IBV_SEND_FENCE and the
 * max_rd_atomic / max_dest_rd_atomic limits (at most one READ or atomic is
 * ever outstanding per QP) are honoured by construction, and a LOCAL_INV
 * behind a READ runs once the READ's data has landed.
 *
 * Nothing a client wrote is trusted: a WQE slot is copied out of the ring
 * before any field is looked at, and every index, count, length, key and
 * handle is checked against daemon-private state. Under sv_dev.lock.
 */
#define _GNU_SOURCE
#include <string.h>

#include <infiniband/verbs.h>

#include "abi/sv_op.h"
#include "device/exec/engine.h"
#include "device/exec/exec_int.h"
#include "device/exec/mm.h"
#include "device/exec/transport.h"
#include "device/loop/loop.h"
#include "device/roce/roce.h"
#include "device/sv_dev.h"

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/*
 * The send ring's mailbox (src/abi/sv_qp.h): when it holds WQE n (mb_seq ==
 * n + 1, not 0) and was not rewritten while we copied it (a seqlock read),
 * its header is in w->h and its SV_WQ_MB_BODY bytes of body in body: true.
 * false: read the slot (the truth; w->h may hold garbage). One look at
 * prod's lines instead of the slot's; validated as a slot copy would be.
 */
static inline bool sq_mailbox(const struct sv_qp *qp, uint32_t n,
			      struct swqe *w, uint8_t body[SV_WQ_MB_BODY])
{
	const struct sv_wq_ring *hdr = qp->sq.hdr;
	/* relaxed: the acquire load of prod (which the library stores after
	 * mb_seq) already made the mailbox of WQE n visible; the fence and
	 * the second look below catch a rewrite for a later WQE */
	uint32_t seq = __atomic_load_n(&hdr->mb_seq, __ATOMIC_RELAXED);

	if (likely(seq != n + 1) || !seq)
		return false;
	memcpy(&w->h, hdr->mb, SV_SEND_WQE_HDR);
	memcpy(body, hdr->mb + SV_SEND_WQE_HDR, SV_WQ_MB_BODY);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return __atomic_load_n(&hdr->mb_seq, __ATOMIC_RELAXED) == seq;
}

/*
 * After a fence that let the lock go: may qp's head WQE still complete?
 * Not when qp was destroyed, reset (the ring was emptied), or moved to a
 * state that flushes it; yes when it merely went to SQD or back to RTS (the
 * WQE in flight finishes there, and its effect cannot be done twice).
 */
static bool head_still_ours(const struct sv_qp *qp)
{
	return !qp->dead && qp->head_started &&
	       (qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD);
}

/* qp ended a grant: complete once no copy that may use it runs. */
static int requester_fence(struct sv_exec *x, struct sv_qp *qp)
{
	uint32_t seen[SV_DB_PAGES];

	if (!sv_grant_fence_needed(x, seen))
		return IBV_WC_SUCCESS;
	sv_grant_fence_wait(x, seen);
	return head_still_ours(qp) ? IBV_WC_SUCCESS : RES_LOST;
}

/* LOCAL_INV, and the invalidation of RDMA_READ_INV. */
int sv_loop_local_inv(struct sv_exec *x, struct sv_qp *qp, uint32_t key)
{
	uint32_t st = sv_mm_local_inv(qp, key);

	if (st != IBV_WC_SUCCESS)
		return (int)st;
	return requester_fence(x, qp);
}

/*
 * The operations that run at the requester alone (header only: FAST_REG_MR's
 * num_sge counts page-list entries, not SGEs). FAST_REG_MR needs an invalid
 * MR, so it ends no grant; a type 2 bind needs a free window; a type 1 bind
 * or unbind ends the window's previous binding.
 */
static __attribute__((noinline)) int
sq_local(struct sv_exec *x, struct sv_qp *qp, const struct swqe *w)
{
	uint32_t st;

	switch (w->h.opcode) {
	case IBV_WR_LOCAL_INV:
		return sv_loop_local_inv(x, qp, w->h.imm);
	case IBV_WR_BIND_MW:
		st = sv_mm_bind_mw(qp, &w->h.reg);
		if (st != IBV_WC_SUCCESS || !(w->h.reg.flags & SV_REG_TYPE1))
			return (int)st;
		return requester_fence(x, qp);
	default:
		return (int)sv_mm_fast_reg(qp, &w->h.reg, w->h.num_sge);
	}
}

/* Validate the head WQE and run it: a completion status, RES_RNR,
 * RES_NOACK, RES_BUSY or RES_LOST. IBV_SEND_FENCE needs nothing more:
 * execution is in order. */
static int sq_run(struct sv_exec *x, struct sv_qp *qp, struct swqe *w,
		  struct msg *m)
{
	uint32_t op, st, f;
	uint8_t mbody[SV_WQ_MB_BODY];
	const uint8_t *body = mbody;    /* the WQE's body: mailbox or slot */
	uint32_t room = SV_WQ_MB_BODY;  /* bytes there */

	if (likely(!sq_mailbox(qp, qp->sq.cons, w, mbody))) {
		const uint8_t *slot = wq_head(&qp->sq);

		memcpy(&w->h, slot, sizeof(w->h));
		body = slot + SV_SEND_WQE_HDR;
		room = qp->sq.stride - SV_SEND_WQE_HDR;
	}
	op = w->h.opcode;
	m->qp = qp;
	m->w = w;
	m->opcode = op;
	m->ah = NULL;
	m->len = 0;
	f = sv_op_flags(op);
	st = sv_op_req_status(qp->type, op, (sv_dev.attr.exp_cap_flags &
					     SV_EXP_CAP_MASKED_ATOMICS) != 0);
	if (st != IBV_WC_SUCCESS)
		return (int)st;
	if (unlikely(f & SV_OPF_LOCAL))
		return sq_local(x, qp, w);
	if (unlikely(f & SV_OPF_FLUSH) &&
	    (st = sv_flush_wqe_status(&w->h)) != IBV_WC_SUCCESS)
		return (int)st;
	if (!sv_swqe_body(qp, w, body, room))
		return IBV_WC_LOC_QP_OP_ERR;
	if (w->h.flags & IBV_SEND_INLINE) {
		if (f & SV_OPF_SINK)
			return IBV_WC_LOC_QP_OP_ERR;
		sv_span_raw(&m->local, w->u.data, w->h.num_sge);
		m->len = w->h.num_sge;
	} else {
		if (f & SV_OPF_ATOMIC) {
			if (w->h.num_sge != 1 || w->u.sge[0].length != 8)
				return IBV_WC_LOC_LEN_ERR;
		}
		st = sv_span_sges(&m->local, m->lmap, m->liov, w->u.sge,
				  w->h.num_sge, qp->pd, (f & SV_OPF_SINK) != 0,
				  &m->len);
		if (st != IBV_WC_SUCCESS)
			return (int)st;
	}
	if (m->len > SV_MAX_MSG_SZ)
		return IBV_WC_LOC_LEN_ERR;
	if (qp->type == IBV_QPT_UD) {
		m->ah = sv_objtab_lookup(sv_client_tab(qp->owner, w->h.ud.ah),
					 w->h.ud.ah,
					 SV_OBJ_AH);
		if (!m->ah || m->ah->pd != qp->pd)
			return IBV_WC_LOC_QP_OP_ERR;
		if (m->len > sv_mtu_bytes(sv_dev.port.active_mtu))
			return IBV_WC_LOC_LEN_ERR;
		if (unlikely(sv_gid_is_mcast(m->ah->attr.dgid)))
			return sv_loop_mcast(x, m, f);
		if (sv_roce_running() && !sv_roce_gid_local(m->ah->attr.dgid)) {
			/* a peer on another host: one datagram on the wire */
			const struct sv_send_wqe *h = &w->h;

			return sv_roce_transport.ud_send(x, qp, m->ah,
				h->remote_qpn,
				sv_ud_qkey(qp, h),
				(f & SV_OPF_IMM) != 0, h->imm,
				(h->flags & IBV_SEND_SOLICITED) != 0,
				&m->local, m->len);
		}
	}
	return sv_loop_deliver(x, m);
}

/* retry_left once the last transport retry is on its way */
#define RETRY_FINAL UINT32_MAX

/* Execute (or retry) the head WQE of qp's send queue. (bench/budgets.sh
 * counts the daemon's instructions per WQE inside this function, by name.) */
static void sq_execute(struct sv_exec *x, struct sv_qp *qp)
{
	struct swqe w;
	struct msg m;
	int res;

	if (!qp->head_started) {
		qp->head_started = true;
		qp->rnr_left = qp->attr.rnr_retry;
		qp->retry_left = qp->attr.retry_cnt;
	} else if (qp->retry_left == RETRY_FINAL) {
		/* the last transmission timed out too */
		memcpy(&w.h, wq_head(&qp->sq), sizeof(w.h));
		sv_sq_complete(qp, &w, sv_outcome(SV_OUTCOME_NOACK)->status,
			       0);
		return;
	}
	qp->wait_until_ns = 0;
	m.rnr_ns = 0;
	m.len = 0;
	m.lost = 0;
	m.rndv_due = false;
	res = sq_run(x, qp, &w, &m);
	if (res == RES_BUSY || res == RES_LOST)
		return;         /* the head stays; next pass, or the flush */
	if (unlikely(__atomic_load_n(&sv_cap_on, __ATOMIC_RELAXED)))
		sv_capture_loop(x, &m, res);
	if (!sv_qp_reliable(qp)) {
		/* no acknowledgements: remote trouble is invisible */
		if (res == RES_RNR || res == RES_NOACK ||
		    res == IBV_WC_REM_INV_REQ_ERR ||
		    res == IBV_WC_REM_ACCESS_ERR || res == IBV_WC_REM_OP_ERR)
			res = IBV_WC_SUCCESS;
	}
	if (res == RES_RNR) {
		if (qp->attr.rnr_retry != 7) {
			if (!qp->rnr_left) {
				sv_sq_complete(qp, &w,
					sv_outcome(SV_OUTCOME_RNR)->status, 0);
				return;
			}
			qp->rnr_left--;
		}
		qp->wait_until_ns = x->now + m.rnr_ns;
		return;
	}
	if (res == RES_NOACK) {
		uint64_t t = sv_ack_timeout_ns(qp->attr.timeout);

		if (t != UINT64_MAX) {
			/* the error shows when the last try's timer expires */
			if (!qp->retry_left)
				qp->retry_left = RETRY_FINAL;
			else
				qp->retry_left--;
		}
		/* timeout 0: no timer, the WQE waits until the QP changes */
		qp->wait_until_ns = t == UINT64_MAX ? UINT64_MAX : x->now + t;
		return;
	}
	sv_sq_complete(qp, &w, (uint32_t)res, res == IBV_WC_SUCCESS ? m.len : 0);
	/* a tag-matching rendezvous goes on after the SEND completed */
	if (__builtin_expect(m.rndv_due, 0))
		sv_loop_tm_rndv(x, &m);
}

/* ---- the same-host transport (exec/transport.h) ---- */

/* Is the head WQE free to run at now? (not waiting on RNR or a timeout) */
static bool head_due(const struct sv_qp *qp, uint64_t now, uint64_t *timer)
{
	if (!qp->head_started || !qp->wait_until_ns)
		return true;
	if (qp->wait_until_ns == UINT64_MAX)
		return false;
	if (now >= qp->wait_until_ns)
		return true;
	if (timer && qp->wait_until_ns < *timer)
		*timer = qp->wait_until_ns;
	return false;
}

/* In SQD: may the head WQE start? (it was posted before the drain began,
 * sv_exec_enter_sqd) */
static bool sqd_may_start(const struct sv_qp *qp, uint32_t pending)
{
	uint32_t n;

	if (!qp->sqd_armed)
		return false;
	n = qp->sqd_prod - qp->sq.cons;
	return n && n <= pending;
}

static int loop_ready(const struct sv_qp *qp, uint64_t now, uint64_t *timer)
{
	bool corrupt;
	uint32_t n = wq_pending(&qp->sq, &corrupt);

	if (qp->state == IBV_QPS_SQD) {
		if (n && (qp->head_started || sqd_may_start(qp, n)))
			return head_due(qp, now, timer);
		return !qp->sq_drained_sent;
	}
	if (corrupt)
		return true;
	return n && head_due(qp, now, timer);
}

static int loop_step(struct sv_exec *x, struct sv_qp *qp)
{
	bool corrupt;
	uint32_t n = wq_pending(&qp->sq, &corrupt);

	if (qp->state == IBV_QPS_SQD) {
		/* finish what is in flight and what was posted before the
		 * drain began; start nothing newer */
		if (n && (qp->head_started || sqd_may_start(qp, n))) {
			if (!head_due(qp, x->now, NULL))
				return false;
			sq_execute(x, qp);
			return true;
		}
		qp->head_started = false;
		if (qp->sq_drained_sent)
			return false;
		sv_sq_drained(qp);
		return true;
	}
	if (corrupt) {
		sv_qp_error(qp, IBV_EVENT_QP_FATAL);
		return true;
	}
	if (!n || !head_due(qp, x->now, NULL))
		return false;
	sq_execute(x, qp);
	return true;
}

static int loop_sq_owes(const struct sv_qp *qp, uint32_t upto, uint64_t now)
{
	bool corrupt;
	uint32_t n = wq_pending(&qp->sq, &corrupt), owed = upto - qp->sq.cons;

	(void)now;
	/* upto reached, or not ahead of cons within what is posted */
	if (corrupt || !owed || owed > n)
		return false;
	/* the head waits out an RNR NAK or a transport timeout: the
	 * network's business, not the device's */
	if (qp->head_started && qp->wait_until_ns)
		return false;
	if (qp->state == IBV_QPS_SQD)
		return qp->head_started || sqd_may_start(qp, n);
	return true;
}

bool sv_exec_local_head(struct sv_exec *x, struct sv_qp *qp)
{
	bool corrupt;

	if (!wq_pending(&qp->sq, &corrupt) || !head_due(qp, x->now, NULL))
		return false;
	sq_execute(x, qp);
	return true;
}

/* Same-host QPs hold nothing between two steps (a receive WQE is taken
 * and completed in one), and a datagram to another host goes on the wire
 * (sq_run). */
const struct sv_transport sv_loop_transport = {
	.name = "loop",
	.ready = loop_ready,
	.step = loop_step,
	.sq_owes = loop_sq_owes,
	.flush_pending = sv_tr_nosup_flush_pending,
	.flush = sv_tr_nosup_flush,
	.srq_gone = sv_tr_nosup_srq_gone,
	.ud_send = sv_tr_nosup_ud_send,
};
