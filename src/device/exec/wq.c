// SPDX-License-Identifier: MIT
/*
 * The work-queue plumbing of WQE execution, whichever transport carries
 * the message: the QP's state changes and events that execution causes
 * (ERR, SQE, COMM_EST, SQ_DRAINED), completions (a CQE made and pushed,
 * the head of a send queue finished, flushes), a send WQE's body copied
 * out of its slot, and the receive queue (a receive WQE looked at, its
 * buffers resolved, taken). The same-host path (loop/req.c, loop/resp.c),
 * the RoCEv2 wire (roce/) and the dispatcher (exec.c) share these
 * (exec_int.h). Under sv_dev.lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "abi/sv_op.h"
#include "device/ctl/direct.h"
#include "device/exec/engine.h"
#include "device/exec/exec_int.h"
#include "device/sv_dev.h"

/*
 * A copy into or out of the target's memory failed: was it because its
 * process has exited or is exiting (and its teardown has not run yet)?
 * Then the target gives no answer, as a vanished host would, and the
 * requester sees the transport timeout and retry-exceeded (or the CM's
 * DREQ), not an access error. Only on the error path.
 */
bool sv_target_gone(const struct sv_qp *t)
{
	/* the memory is its SRQ's owner's (another process's for XRC) */
	const struct sv_client *c = t->srq ? t->srq->owner : t->owner;

	return c->dead || sv_proc_gone(c->pid, c->pidfd);
}

/* ---- the outcome table (exec_int.h) ---- */

#define OUTCOME(n, st, syn, ev, err)                                       \
	[SV_OUTCOME_##n] = { .name = #n, .status = st, .aeth = syn,        \
			     .event = ev, .qp_err = err }

const struct sv_outcome_info sv_outcome_tab[SV_OUTCOME_MAX] = {
	/*      outcome   requester's status        AETH syndrome
	 *                responder's event         responder to ERR */
	OUTCOME(OK,       IBV_WC_SUCCESS,           SV_AETH_ACK,
			  0,                        false),
	OUTCOME(RNR,      IBV_WC_RNR_RETRY_EXC_ERR, SV_AETH_RNR(0),
			  0,                        false),
	OUTCOME(NOACK,    IBV_WC_RETRY_EXC_ERR,     SV_AETH_NONE,
			  0,                        false),
	OUTCOME(SEQ,      IBV_WC_RETRY_EXC_ERR,     SV_AETH_NAK_SEQ,
			  0,                        false),
	OUTCOME(INV_REQ,  IBV_WC_REM_INV_REQ_ERR,   SV_AETH_NAK_INV,
			  IBV_EVENT_QP_REQ_ERR,     true),
	OUTCOME(ACCESS,   IBV_WC_REM_ACCESS_ERR,    SV_AETH_NAK_ACCESS,
			  IBV_EVENT_QP_ACCESS_ERR,  true),
	OUTCOME(RECV_LEN, IBV_WC_REM_INV_REQ_ERR,   SV_AETH_NAK_INV,
			  0,                        true),
	OUTCOME(RECV_ERR, IBV_WC_REM_OP_ERR,        SV_AETH_NAK_OP,
			  0,                        true),
	OUTCOME(NO_SRQ,   IBV_WC_REM_INV_REQ_ERR,   SV_AETH_NAK_INV,
			  0,                        false),
};

#undef OUTCOME

uint32_t sv_nak_status(uint8_t syn)
{
	if (SV_AETH_KIND(syn) == SV_AETH_KIND_NAK)
		for (unsigned int o = 0; o < SV_OUTCOME_MAX; o++)
			if (sv_outcome_tab[o].aeth == syn)
				return sv_outcome_tab[o].status;
	return IBV_WC_REM_OP_ERR;
}

/* ---- the QP's state and events ---- */

static void qp_set_state(struct sv_qp *qp, uint32_t state)
{
	qp->state = state;
	qp->state_gen++;
	if (qp->sq.hdr)
		__atomic_store_n(&qp->sq.hdr->qp_state, state, __ATOMIC_RELAXED);
	if (qp->rq.hdr && qp->rq.entries)
		__atomic_store_n(&qp->rq.hdr->qp_state, state, __ATOMIC_RELAXED);
	sv_direct_qp(qp);
	/* its engine flushes what is queued (it may be another engine) */
	sv_engine_kick(qp->engine);
}

void sv_qp_event(struct sv_qp *qp, uint32_t type)
{
	sv_async_event(qp->owner, type, qp->cookie, qp->handle);
	/* an XRC target's events go to every process that has it open */
	for (const struct sv_qp *op = qp->opens; op; op = op->open_next)
		sv_async_event(op->owner, type, op->cookie, op->handle);
}

/* The QP goes to ERR; event (if not 0) says why. */
void sv_qp_error(struct sv_qp *qp, uint32_t event)
{
	if (qp->state == IBV_QPS_ERR || qp->state == IBV_QPS_RESET)
		return;
	qp_set_state(qp, IBV_QPS_ERR);
	if (event)
		sv_qp_event(qp, event);
}

static void srq_error(struct sv_srq *srq)
{
	if (srq->in_error)
		return;
	srq->in_error = true;
	sv_async_event(srq->owner, IBV_EVENT_SRQ_ERR, srq->cookie,
		       srq->handle);
}

/* ---- completions ---- */

void sv_cqe_init(struct sv_cqe *e, uint64_t wr_id, uint32_t status,
		 uint32_t opcode, uint32_t qpn)
{
	memset(e, 0, sizeof(*e));
	e->wr_id = wr_id;
	e->status = status;
	e->opcode = opcode;
	e->qp_num = qpn;
	e->timestamp = sv_now_ns();
}

uint64_t sv_inj_done[SV_INJ_KIND_MAX];
struct sv_inj_fault sv_inj_wide_tab[SV_INJ_WIDE];
uint32_t sv_inj_wide;

/* One fault of kind armed for t's process or the device, taken: the count
 * left, or NULL when none reaches t. */
static uint32_t *wide_take(const struct sv_qp *t, unsigned int kind)
{
	if ((kind == SV_INJ_RNR || kind == SV_INJ_ACCESS) &&
	    t->type != IBV_QPT_RC && t->type != IBV_QPT_XRC_RECV)
		return NULL;
	for (unsigned int i = 0; i < SV_INJ_WIDE; i++) {
		struct sv_inj_fault *f = &sv_inj_wide_tab[i];

		if (!f->count || f->what != kind || !sv_inj_reaches(f->pid, t))
			continue;
		if (!--f->count)
			sv_inj_wide--;
		return &f->count;
	}
	return NULL;
}

bool sv_inject_resp_take(struct sv_qp *t, bool needs_recv)
{
	unsigned int kind = needs_recv ? SV_INJ_RNR : SV_INJ_ACCESS;
	uint32_t *left = needs_recv ? &t->inj_rnr : &t->inj_access;

	if (*left)
		--*left;
	else if (!sv_inj_wide || !(left = wide_take(t, kind)))
		return false;
	sv_inj_done[kind]++;
	sv_why_set("injected by softverbs inject (%s)",
		   needs_recv ? "rnr" : "access");
	sv_log(SV_LOG_INFO, "inject: qp %#x answers %s (%u more armed)",
	       t->qpn, needs_recv ? "an RNR NAK" : "a remote access error",
	       *left);
	return true;
}

bool sv_inject_lose_take(struct sv_qp *t)
{
	uint32_t *left = &t->inj_lose;

	if (*left)
		--*left;
	else if (!sv_inj_wide ||
		 !(left = wide_take(t, SV_INJ_LOSE)))
		return false;
	sv_inj_done[SV_INJ_LOSE]++;
	sv_why_set("injected by softverbs inject (lose)");
	sv_log(SV_LOG_INFO, "inject: qp %#x loses a message (%u more armed)",
	       t->qpn, *left);
	return true;
}

/* Push a CQE for qp; a CQ overrun is fatal to the QP. */
void sv_qp_push(struct sv_qp *qp, struct sv_cq *cq, const struct sv_cqe *e,
		bool solicited)
{
	if (e->opcode & IBV_WC_RECV)
		qp->st_recvs++;
	if (e->status != IBV_WC_SUCCESS && e->status != IBV_WC_WR_FLUSH_ERR) {
		qp->st_errors++;
		sv_why_cqe(qp, e);
	}
	if (!cq)
		return;
	if (sv_cq_push_held(cq, e, solicited, sv_direct_rq_held_cqes(qp, cq)) ==
	    -ENOSPC)
		sv_qp_error(qp, IBV_EVENT_QP_FATAL);
}

/* ---- the send queue ---- */

/* Finish the head WQE of qp's SQ with status. */
void sv_sq_complete(struct sv_qp *qp, const struct swqe *w, uint32_t status,
		    uint64_t len)
{
	bool signaled = (w->h.flags & IBV_SEND_SIGNALED) || qp->sq_sig_all;

	/* the slot is free before the completion says so */
	wq_consume(&qp->sq);
	qp->head_started = false;
	qp->wait_until_ns = 0;
	qp->rnr_left = qp->retry_left = 0;
	sv_dev.wqes++;
	qp->st_sends++;
	if (status != IBV_WC_SUCCESS || signaled) {
		struct sv_cqe e;

		sv_cqe_init(&e, w->h.wr_id, status, sv_op_wc(w->h.opcode),
			    qp->qpn);
		e.byte_len = (uint32_t)len;
		sv_qp_push(qp, qp->send_cq, &e, false);
	}
	if (status != IBV_WC_SUCCESS) {
		if (sv_qp_reliable(qp))
			sv_qp_error(qp, 0);
		else if (qp->state != IBV_QPS_ERR)
			qp_set_state(qp, IBV_QPS_SQE);
	}
	sv_direct_sq_done(qp);
}

/* ---- the receive queue ---- */

/*
 * Look at (do not take) the next receive WQE of t: 0, -ENOENT when there is
 * none, -EIO when the ring is corrupt (t or its SRQ is in error already).
 */
int sv_rq_peek(struct sv_qp *t, struct rwqe *r)
{
	struct sv_wq *wq;
	bool corrupt;
	uint32_t n;
	const uint8_t *slot;

	r->srq = t->srq;
	r->claimed = NULL;
	if (r->srq) {
		if (r->srq->in_error) {
			sv_qp_error(t, 0);
			return -EIO;
		}
		wq = &r->srq->rq;
		r->wq = wq;
		if (t->dclaim.valid) {
			/* the WQE a same-host sender claimed for t */
			r->claimed = t;
			r->h.wr_id = t->dclaim.wr_id;
			r->h.num_sge = t->dclaim.num_sge;
			r->h.rsvd = 0;
			memcpy(r->sge, t->dclaim.sge,
			       t->dclaim.num_sge * sizeof(r->sge[0]));
			return 0;
		}
		if (wq->dsrq) {
			int ret = wq_srq_hold(wq);

			if (ret == -ENOENT)
				return ret;
			if (ret) {
				srq_error(r->srq);
				sv_qp_error(t, 0);
				return -EIO;
			}
		}
	} else {
		wq = &t->rq;
		wq_sync_cons(wq);       /* what a direct sender took */
	}
	r->wq = wq;
	n = wq_pending(wq, &corrupt);
	if (corrupt) {
		if (r->srq)
			srq_error(r->srq);
		sv_qp_error(t, r->srq ? 0 : IBV_EVENT_QP_FATAL);
		return -EIO;
	}
	if (!n)
		return -ENOENT;
	slot = wq_head(wq);
	memcpy(&r->h, slot, sizeof(r->h));
	if (r->h.num_sge > wq->max_sge || r->h.num_sge > SV_MAX_SGE ||
	    SV_RECV_WQE_HDR + (size_t)r->h.num_sge * sizeof(struct sv_wqe_sge) >
	    wq->stride)
		r->h.num_sge = UINT32_MAX;      /* malformed: see sv_rq_resolve */
	else
		memcpy(r->sge, slot + SV_RECV_WQE_HDR,
		       (size_t)r->h.num_sge * sizeof(struct sv_wqe_sge));
	return 0;
}

/* Check the receive buffers: a completion status for the receive WQE. */
uint32_t sv_rq_resolve(struct sv_qp *t, struct rwqe *r)
{
	struct sv_pd *pd = r->srq ? r->srq->pd : t->pd;

	if (r->h.num_sge == UINT32_MAX)
		return IBV_WC_LOC_QP_OP_ERR;
	return sv_span_sges(&r->mem, r->map, r->iov, r->sge, r->h.num_sge, pd,
			    true, &r->cap);
}

/* Take the peeked WQE off its ring. */
void sv_rq_commit(struct rwqe *r)
{
	if (r->claimed)
		r->claimed->dclaim.valid = false;
	else
		wq_consume(r->wq);
	if (r->srq)
		sv_srq_limit_check(r->srq);
}

void sv_srq_limit_check(struct sv_srq *srq)
{
	bool corrupt;
	uint32_t left;

	if (!srq->limit)
		return;
	left = wq_pending(&srq->rq, &corrupt);
	if (!corrupt && left < srq->limit) {
		srq->limit = 0;
		__atomic_store_n(&srq->rq.hdr->srq_limit, 0,
				 __ATOMIC_RELAXED);
		sv_async_event(srq->owner, IBV_EVENT_SRQ_LIMIT_REACHED,
			       srq->cookie, srq->handle);
	}
}

/* The WQE a same-host sender claimed for qp (in ERR): flushed. */
void sv_rq_flush_claim(struct sv_qp *qp)
{
	struct sv_cqe e;

	qp->dclaim.valid = false;
	sv_cqe_init(&e, qp->dclaim.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV,
		    qp->qpn);
	sv_qp_push(qp, qp->recv_cq, &e, false);
}

/* ---- a tag-matching SRQ's ops ring (ctl/tm.c) ---- */

/*
 * Apply the ops of tag-matching SRQ srq's ring (its engine's pass, and
 * whoever delivers a message into it, first), in order, each copied out of
 * its slot before it is looked at; each op's completion on the SRQ's CQ
 * when it is signaled or failed. A corrupt ring (prod more than a ring
 * ahead) applies nothing more: IBV_EVENT_SRQ_ERR. true if any was applied.
 */
bool sv_tm_drain(struct sv_srq *srq)
{
	struct sv_wq *wq = &srq->tm_ops;
	bool corrupt;
	uint32_t n = wq_pending(wq, &corrupt);

	if (corrupt)
		srq_error(srq);
	for (uint32_t i = 0; i < n; i++) {
		struct sv_tm_op o;
		struct sv_tm_done d;
		struct sv_cqe e;

		memcpy(&o, wq_head(wq), sizeof(o));
		wq_consume(wq);
		sv_tm_apply(srq->tm, &o, &d);
		if (d.status == IBV_WC_SUCCESS &&
		    !(o.flags & IBV_OPS_SIGNALED))
			continue;
		memset(&e, 0, sizeof(e));
		e.wr_id = o.wr_id;
		e.status = d.status;
		e.opcode = d.opcode;
		e.wc_flags = d.sync_req ? IBV_WC_TM_SYNC_REQ : 0;
		e.timestamp = sv_now_ns();
		/* a full CQ raises its own error (IBV_EVENT_CQ_ERR); the op
		 * stays done, as a NIC's would */
		sv_cq_push(srq->cq, &e, false);
	}
	return n != 0;
}

/* ---- flushes (a QP in ERR, a send queue in SQE) ---- */

/* Complete the head WQE of qp's send queue with IBV_WC_WR_FLUSH_ERR. */
void sv_sq_flush_one(struct sv_qp *qp)
{
	struct sv_send_wqe h;
	struct sv_cqe e;

	memcpy(&h, wq_head(&qp->sq), sizeof(h));
	wq_consume(&qp->sq);
	qp->head_started = false;
	qp->wait_until_ns = 0;
	sv_cqe_init(&e, h.wr_id, IBV_WC_WR_FLUSH_ERR, sv_op_wc(h.opcode),
		    qp->qpn);
	/* a full CQ: the completion is lost, the WQE still goes */
	sv_qp_push(qp, qp->send_cq, &e, false);
	sv_direct_sq_done(qp);
}

/* ... and the head WQE of its own receive queue. */
void sv_rq_flush_one(struct sv_qp *qp)
{
	struct sv_recv_wqe h;
	struct sv_cqe e;

	/* (its caller saw one pending, wq_pending following a direct
	 * sender's cons) */
	wq_sync_cons(&qp->rq);
	memcpy(&h, wq_head(&qp->rq), sizeof(h));
	wq_consume(&qp->rq);
	sv_cqe_init(&e, h.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, qp->qpn);
	sv_qp_push(qp, qp->recv_cq, &e, false);
}

/* ---- SQD ---- */

void sv_sq_drained(struct sv_qp *qp)
{
	if (qp->sq_drained_sent)
		return;
	qp->sqd_armed = false;
	qp->sq_drained_sent = true;
	if (qp->attr.en_sqd_async_notify)
		sv_qp_event(qp, IBV_EVENT_SQ_DRAINED);
}

