// SPDX-License-Identifier: MIT
/*
 * The dispatcher of WQE execution: what an engine does with a QP at each
 * step, by the QP's state. In RTS and SQD the requester of the QP's
 * transport runs (transport.h: the same-host one, loop/req.c, or a wire
 * QP's, roce/req.c); in SQE and ERR the rings are flushed (wq.c), after
 * what the transport holds of the QP; ERR ends with LAST_WQE_REACHED for
 * a QP on an SRQ. sv_exec_ready says whether a step would do anything (the
 * engine sleeps otherwise), sv_exec_sq_owes whether a destroy must wait
 * for the engine. Under sv_dev.lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "device/ctl/direct.h"
#include "device/exec/engine.h"
#include "device/exec/exec_int.h"
#include "device/exec/transport.h"
#include "device/sv_dev.h"

#define unlikely(x) __builtin_expect(!!(x), 0)

/* How soon an engine looks again at a receive queue it could not flush
 * while a same-host sender held its guard */
#define SV_DRECV_RECHECK_NS 20000ull

/*
 * The SQ drain point: the WQEs posted before a QP entered SQD still run (a
 * NIC would have started them when their doorbell rang); later ones wait.
 */
void sv_exec_enter_sqd(struct sv_qp *qp)
{
	qp->sqd_prod = qp->sq.hdr ? wq_prod(&qp->sq) : qp->sq.cons;
	qp->sqd_armed = true;
}

bool sv_exec_ready(const struct sv_qp *qp, uint64_t now, uint64_t *timer)
{
	const struct sv_transport *tr = sv_transport_of(qp);
	bool corrupt, rcorrupt;

	switch (qp->state) {
	case IBV_QPS_RTS:
	case IBV_QPS_SQD:
		/* an XRC target has no requester */
		if (unlikely(qp->type == IBV_QPT_XRC_RECV))
			return false;
		return tr->ready(qp, now, timer) > 0;
	case IBV_QPS_SQE:
		/* (nor a work queue of its own) */
		if (unlikely(qp->type == IBV_QPT_XRC_RECV))
			return false;
		return wq_pending(&qp->sq, &corrupt) != 0;
	case IBV_QPS_ERR:
		if (tr->flush_pending(qp) > 0)
			return true;
		if (unlikely(qp->type == IBV_QPT_XRC_RECV))
			return false;
		if (wq_pending(&qp->sq, &corrupt))
			return true;
		/* not while a same-host sender may still take a receive
		 * WQE directly (a look again soon) */
		if (!qp->rx_busy && wq_pending(&qp->rq, &rcorrupt)) {
			if (!sv_direct_rq_held(qp))
				return true;
			if (timer && now + SV_DRECV_RECHECK_NS < *timer)
				*timer = now + SV_DRECV_RECHECK_NS;
		}
		/* on an SRQ: a WQE its peer claimed for it directly, flushed
		 * (and only then its last WQE reached) */
		if (qp->srq && qp->drecv) {
			if (sv_direct_rq_held(qp)) {
				if (timer &&
				    now + SV_DRECV_RECHECK_NS < *timer)
					*timer = now + SV_DRECV_RECHECK_NS;
				return false;
			}
			if (!qp->srq->rx_busy &&
			    (qp->dclaim.valid || sv_direct_claim_due(qp)))
				return true;
		}
		return qp->srq && !qp->last_wqe_sent;
	default:
		return false;
	}
}

bool sv_exec_sq_owes(const struct sv_qp *qp, uint32_t upto, uint64_t now)
{
	if (qp->type == IBV_QPT_XRC_RECV ||
	    (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD))
		return false;
	return sv_transport_of(qp)->sq_owes(qp, upto, now) > 0;
}

bool sv_exec_step(struct sv_exec *x, struct sv_qp *qp)
{
	const struct sv_transport *tr = sv_transport_of(qp);
	bool corrupt;

	switch (qp->state) {
	case IBV_QPS_RTS:
	case IBV_QPS_SQD:
		if (unlikely(qp->type == IBV_QPT_XRC_RECV))
			return false;
		return tr->step(x, qp) > 0;
	case IBV_QPS_SQE:
		if (unlikely(qp->type == IBV_QPT_XRC_RECV) ||
		    !wq_pending(&qp->sq, &corrupt))
			return false;
		sv_sq_flush_one(qp);
		return true;
	case IBV_QPS_ERR:
		/* no sender of this host completes a receive from now on */
		sv_direct_xside_close(qp);
		if (tr->flush(qp) > 0)
			return true;
		if (unlikely(qp->type == IBV_QPT_XRC_RECV))
			return false;
		if (wq_pending(&qp->sq, &corrupt)) {
			sv_sq_flush_one(qp);
			return true;
		}
		/* not the WQE another engine fills right now (msg_copy),
		 * nor one a same-host sender may take (the direct path) */
		if (!qp->rx_busy && wq_pending(&qp->rq, &corrupt) &&
		    !sv_direct_rq_held(qp)) {
			sv_rq_flush_one(qp);
			return true;
		}
		if (qp->srq && qp->drecv) {
			if (sv_direct_rq_held(qp) || qp->srq->rx_busy)
				return false;
			sv_direct_claim_take(qp);
			if (qp->dclaim.valid) {
				sv_rq_flush_claim(qp);
				return true;
			}
		}
		if (qp->srq && !qp->last_wqe_sent) {
			qp->last_wqe_sent = true;
			sv_qp_event(qp, IBV_EVENT_QP_LAST_WQE_REACHED);
			return true;
		}
		return false;
	default:
		return false;
	}
}

/* ---- the default stubs of transport.h: an op a transport lacks ---- */

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"

int sv_tr_nosup_ready(const struct sv_qp *qp, uint64_t now, uint64_t *timer)
{
	return -EOPNOTSUPP;
}

int sv_tr_nosup_step(struct sv_exec *x, struct sv_qp *qp)
{
	return -EOPNOTSUPP;
}

int sv_tr_nosup_sq_owes(const struct sv_qp *qp, uint32_t upto, uint64_t now)
{
	return -EOPNOTSUPP;
}

int sv_tr_nosup_flush_pending(const struct sv_qp *qp)
{
	return -EOPNOTSUPP;
}

int sv_tr_nosup_flush(struct sv_qp *qp)
{
	return -EOPNOTSUPP;
}

int sv_tr_nosup_srq_gone(struct sv_qp *t, const struct sv_srq *srq)
{
	return -EOPNOTSUPP;
}

int sv_tr_nosup_ud_send(struct sv_exec *x, struct sv_qp *qp,
			const struct sv_ah *ah, uint32_t remote_qpn,
			uint32_t qkey, bool imm, uint32_t imm_data,
			bool solicited, const struct span *payload,
			uint64_t len)
{
	return -EOPNOTSUPP;
}

#pragma GCC diagnostic pop
