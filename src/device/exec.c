// SPDX-License-Identifier: MIT
/*
 * The dispatcher of WQE execution: what an engine does with a QP at each
 * step, by the QP's state. In RTS and SQD its requester runs (the
 * same-host one, loop_req.c, or a wire QP's, roce/req.c); in SQE and ERR
 * its rings are flushed (wq.c), after what the wire holds of it; SQD ends
 * with the SQ_DRAINED event, ERR with LAST_WQE_REACHED for a QP on an SRQ.
 * sv_exec_ready says whether a step would do anything (the engine sleeps
 * otherwise), sv_exec_sq_owes whether a destroy must wait for the engine.
 * Under sv_dev.lock.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "device/engine.h"
#include "device/exec_int.h"
#include "device/loop.h"
#include "device/roce/roce.h"
#include "device/sv_dev.h"

#define unlikely(x) __builtin_expect(!!(x), 0)

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

/*
 * The SQ drain point: the WQEs posted before a QP entered SQD still run (a
 * NIC would have started them when their doorbell rang); later ones wait.
 */
void sv_exec_enter_sqd(struct sv_qp *qp)
{
	qp->sqd_prod = qp->sq.hdr ? wq_prod(&qp->sq) : qp->sq.cons;
	qp->sqd_armed = true;
}

/* In SQD: may the head WQE start? (it was posted before the drain began) */
static bool sqd_may_start(const struct sv_qp *qp, uint32_t pending)
{
	uint32_t n;

	if (!qp->sqd_armed)
		return false;
	n = qp->sqd_prod - qp->sq.cons;
	return n && n <= pending;
}

bool sv_exec_ready(const struct sv_qp *qp, uint64_t now, uint64_t *timer)
{
	bool corrupt, rcorrupt;
	uint32_t n;

	if (unlikely(qp->roce)) {
		/* a wire QP: its requester (an XRC target has none) */
		if ((qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD) &&
		    qp->type != IBV_QPT_XRC_RECV)
			return sv_roce_ready(qp, now, timer);
		if (qp->state == IBV_QPS_ERR && sv_roce_has_flush(qp))
			return true;
	}
	/* an XRC target has no work queue of its own */
	if (unlikely(qp->type == IBV_QPT_XRC_RECV))
		return false;

	switch (qp->state) {
	case IBV_QPS_RTS:
		n = wq_pending(&qp->sq, &corrupt);
		if (corrupt)
			return true;
		return n && head_due(qp, now, timer);
	case IBV_QPS_SQD:
		n = wq_pending(&qp->sq, &corrupt);
		if (n && (qp->head_started || sqd_may_start(qp, n)))
			return head_due(qp, now, timer);
		return !qp->sq_drained_sent;
	case IBV_QPS_SQE:
		return wq_pending(&qp->sq, &corrupt) != 0;
	case IBV_QPS_ERR:
		if (wq_pending(&qp->sq, &corrupt) ||
		    (!qp->rx_busy && wq_pending(&qp->rq, &rcorrupt)))
			return true;
		return qp->srq && !qp->last_wqe_sent;
	default:
		return false;
	}
}

bool sv_exec_sq_owes(const struct sv_qp *qp, uint32_t upto, uint64_t now)
{
	bool corrupt;
	uint32_t n, owed;

	if (qp->type == IBV_QPT_XRC_RECV ||
	    (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD))
		return false;
	if (unlikely(qp->roce))
		return sv_roce_sq_owes(qp, upto, now);
	n = wq_pending(&qp->sq, &corrupt);
	owed = upto - qp->sq.cons;
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

bool sv_exec_step(struct sv_exec *x, struct sv_qp *qp)
{
	bool corrupt;
	uint32_t n;

	if (unlikely(qp->roce)) {
		if ((qp->state == IBV_QPS_RTS || qp->state == IBV_QPS_SQD) &&
		    qp->type != IBV_QPT_XRC_RECV)
			return sv_roce_step(x, qp);
		if (qp->state == IBV_QPS_ERR && sv_roce_flush(qp))
			return true;
	}
	if (unlikely(qp->type == IBV_QPT_XRC_RECV))
		return false;

	switch (qp->state) {
	case IBV_QPS_RTS:
		n = wq_pending(&qp->sq, &corrupt);
		if (corrupt) {
			sv_qp_error(qp, IBV_EVENT_QP_FATAL);
			return true;
		}
		if (!n || !head_due(qp, x->now, NULL))
			return false;
		sq_execute(x, qp);
		return true;
	case IBV_QPS_SQD:
		/* finish what is in flight and what was posted before the
		 * drain began; start nothing newer */
		n = wq_pending(&qp->sq, &corrupt);
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
	case IBV_QPS_SQE:
		if (!wq_pending(&qp->sq, &corrupt))
			return false;
		sv_sq_flush_one(qp);
		return true;
	case IBV_QPS_ERR:
		if (wq_pending(&qp->sq, &corrupt)) {
			sv_sq_flush_one(qp);
			return true;
		}
		/* not the WQE another engine fills right now (msg_copy) */
		if (!qp->rx_busy && wq_pending(&qp->rq, &corrupt)) {
			sv_rq_flush_one(qp);
			return true;
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

bool sv_exec_local_head(struct sv_exec *x, struct sv_qp *qp)
{
	bool corrupt;

	if (!wq_pending(&qp->sq, &corrupt) || !head_due(qp, x->now, NULL))
		return false;
	sq_execute(x, qp);
	return true;
}
