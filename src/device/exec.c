// SPDX-License-Identifier: MIT
/*
 * WQE execution: what the NIC does with a work request.
 *
 * All QPs live on this one daemon, so a message goes from the requester's
 * send queue straight to the target QP ("loopback"); deliver() is the one
 * place that plays the responder, so that RoCE can later put a wire between
 * the two halves. Semantics follow the IBA and Linux rxe:
 *
 *  - the requester validates its WQE and its local SGEs, then the responder
 *    checks, in order: reachability, the operation against the QP's access
 *    flags, a receive WQE (RNR when none), length, rkey; only then is
 *    anything written to the target;
 *  - RC errors put the QP in ERR; UC/UD send errors put it in SQE; remote
 *    trouble on UC/UD drops the message and the sender succeeds;
 *  - an RC target that does not answer (gone, not ready, in error) costs the
 *    transport timeout, retry_cnt times; a missing receive WQE the target's
 *    RNR timer, rnr_retry times (7: forever).
 *
 * Execution is synchronous and in order: a WQE is finished (or waits as the
 * head of its queue) before the next starts. So IBV_SEND_FENCE and the
 * max_rd_atomic / max_dest_rd_atomic limits (at most one READ or atomic is
 * ever outstanding per QP) are honoured by construction, and a LOCAL_INV
 * behind a READ runs once the READ's data has landed. Atomics run under
 * sv_dev.lock, so they are atomic with respect to each other across the whole
 * device (IBV_ATOMIC_HCA).
 *
 * Keys become memory through mm.h (MRs, fast-register MRs over page or block
 * lists, memory windows); the memory-management work requests (FAST_REG_MR,
 * LOCAL_INV, BIND_MW, and the invalidation of SEND_WITH_INV and
 * RDMA_READ_INV) change what keys grant. One that ends a grant completes only
 * once no copy that may still use the old grant runs (grant_fence_needed).
 *
 * Nothing a client wrote is trusted: a WQE slot is copied out of the ring
 * before any field is looked at, and every index, count, length, key and
 * handle is checked against daemon-private state.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <infiniband/verbs.h>

#include "abi/sv_op.h"
#include "device/atomic.h"
#include "device/direct.h"
#include "device/engine.h"
#include "device/exec_int.h"
#include "device/roce/roce.h"
#include "device/mm.h"
#include "device/sv_dev.h"

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* ================= WQE execution ================= */

/*
 * A copy into or out of the target's memory failed: was it because its
 * process has exited or is exiting (and its teardown has not run yet)?
 * Then the target gives no answer, as a vanished host would, and the
 * requester sees the transport timeout and retry-exceeded (or the CM's
 * DREQ), not an access error. Only on the error path.
 */
static bool target_gone(const struct sv_qp *t)
{
	/* the memory is its SRQ's owner's (another process's for XRC) */
	const struct sv_client *c = t->srq ? t->srq->owner : t->owner;

	return c->dead || sv_proc_gone(c->pid, c->pidfd);
}

/* Responder outcomes that are not a completion status. */
#define RES_RNR   (-1)    /* no receive WQE: wait the target's RNR timer */
#define RES_NOACK (-2)    /* no answer: wait the transport timeout */
#define RES_BUSY  (-3)    /* the target's receive queue is being filled by
			   * another engine's unlocked copy: try again */
#define RES_LOST  (-4)    /* the requester changed (destroyed, new state)
			   * during an unlocked copy or a fence: forget
			   * this attempt */

/* The opcode rules are abi/sv_op.h's table, which the library reads too. */

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
	int lost;                  /* out: see msg_copy */
};

/* The lock was let go: do s's keys still grant what they did? The pieces
 * are made again (the same count and lengths: they come from the WQE). A
 * remote range is m's, at responder t. */
static bool span_regrant(struct span *s, const struct msg *m,
			 const struct sv_qp *t)
{
	const struct sv_send_wqe *h = &m->w->h;
	uint64_t total;

	if (!s->map)
		return true;
	if (s->sge)
		return sv_span_sges(s, s->map, (struct iovec *)s->mem.iov, s->sge,
				 s->nsge, s->pd, s->write,
				 &total) == IBV_WC_SUCCESS;
	/* atomics never go unlocked: a WRITE or a READ */
	return sv_rkey_map(h->rkey, t, h->remote_addr, m->len,
			   (sv_op_flags(m->opcode) & SV_OPF_SINK) ?
			   IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE,
			   s->map);
}

/* What changed during an unlocked copy. */
#define LOST_REQ  1       /* the requester QP */
#define LOST_RESP 2       /* the responder QP */

/* Is t's receive queue (its own or its SRQ's) being filled unlocked? */
static bool *rx_busy_of(struct sv_qp *t)
{
	return t->srq ? &t->srq->rx_busy : &t->rx_busy;
}

/* The lock is back after a while without it: m->lost says whether the
 * requester or the responder was destroyed or changed state meanwhile. */
static void msg_check(struct msg *m, const struct sv_qp *t, uint32_t qgen,
		      uint32_t tgen)
{
	if (m->qp->dead || m->qp->state_gen != qgen)
		m->lost = LOST_REQ;
	else if (t->dead || t->state_gen != tgen)
		m->lost = LOST_RESP;
}

/* t's receive queue is no longer filled by us (busy from rx_busy_of). */
static void rx_release(const struct msg *m, struct sv_qp *t, bool *busy)
{
	*busy = false;
	/* t's engine may have left a flush for later */
	if (t->engine != m->qp->engine)
		sv_engine_kick(t->engine);
}

/*
 * Copy a message's bytes between requester and responder. Up to
 * SV_UNLOCKED_COPY bytes, under sv_dev.lock like everything else; larger
 * ones without it, a window at a time (struct span), so that the engines of
 * other domains, and commands, go on meanwhile. Then:
 *  - copy_seq is odd while a window is copied: whoever frees an object
 *    waits for it to be even again (sv_engine_quiesce), so qp, t, their SRQ
 *    and CQs, and the memory of every MR resolved before the window outlive
 *    it; and an operation that ends a grant waits for it (grant_fence);
 *  - between two windows, with the lock: the keys are checked again, and a
 *    grant that ended stops the copy (a fault of that side);
 *  - rx (the copy fills t's head receive WQE): the receive queue is marked
 *    busy, so no other engine takes, fills or flushes that WQE meanwhile;
 *  - the lock is held again on return, and m->lost says whether the
 *    requester or the responder was destroyed or changed state meanwhile:
 *    the caller then drops what it was doing.
 */
static __attribute__((noinline)) int
msg_copy_unlocked(struct sv_exec *x, struct msg *m, struct sv_qp *t, bool rx,
		  struct span *d, uint64_t doff, struct span *s, uint64_t soff,
		  uint64_t len)
{
	uint32_t qgen = m->qp->state_gen, tgen = t->state_gen;
	bool *busy = rx ? rx_busy_of(t) : NULL;
	bool whole = d->whole && s->whole;
	struct spos sp = { 0, 0 }, dp = { 0, 0 };
	struct round rs, rd;
	int ret = SV_COPY_OK;

	if (!whole) {
		if (!sv_span_seek(s, &sp, soff))
			return SV_COPY_SRC_FAULT;
		if (!sv_span_seek(d, &dp, doff))
			return SV_COPY_DST_FAULT;
	}
	if (busy)
		*busy = true;
	for (;;) {
		const struct sv_mem *dm = &d->mem, *sm = &s->mem;
		uint64_t n = len, o1 = doff, o2 = soff;

		if (!whole) {
			n = sv_span_round(&rs, s, sp, &rd, d, dp, len, &ret);
			if (!n)
				break;
			dm = &rd.mem;
			sm = &rs.mem;
			o1 = o2 = 0;
		}
		__atomic_store_n(x->copy_seq, *x->copy_seq + 1,
				 __ATOMIC_RELEASE);
		sv_dev_unlock();
		ret = sv_mem_copy(dm, o1, sm, o2, n, x->bounce,
				  x->bounce_bytes);
		sv_dev_lock(false);
		__atomic_store_n(x->copy_seq, *x->copy_seq + 1,
				 __ATOMIC_RELEASE);
		msg_check(m, t, qgen, tgen);
		if (m->lost || ret)
			break;
		len -= n;
		if (!len)
			break;
		sv_span_seek(s, &sp, n);
		sv_span_seek(d, &dp, n);
		if (!span_regrant(s, m, t)) {
			ret = SV_COPY_SRC_FAULT;
			break;
		}
		if (!span_regrant(d, m, t)) {
			ret = SV_COPY_DST_FAULT;
			break;
		}
	}
	if (busy)
		rx_release(m, t, busy);
	return ret;
}

static inline int msg_copy(struct sv_exec *x, struct msg *m, struct sv_qp *t,
			   bool rx, struct span *d, uint64_t doff,
			   struct span *s, uint64_t soff, uint64_t len)
{
	if (unlikely(len >= SV_UNLOCKED_COPY && x->copy_seq))
		return msg_copy_unlocked(x, m, t, rx, d, doff, s, soff, len);
	return sv_span_copy(x, d, doff, s, soff, len);
}

/* The responder's answer once an unlocked copy found things changed. */
static int lost_res(const struct msg *m)
{
	return m->lost == LOST_REQ ? RES_LOST : RES_NOACK;
}

/*
 * The fence rule. An operation that ended a grant (invalidated an MR or a
 * window, rebound or unbound a type 1 window) must not complete while a
 * copy that resolved the old grant may still run: that is, an unlocked copy
 * of another engine (ours is not running; copies under the lock resolved
 * after the change). grant_fence_needed takes the copy_seq of every other
 * engine in the middle of a copy (not of those waiting in a fence
 * themselves: two fences never wait for each other); grant_fence_wait waits,
 * without the lock, for each to move on. Meanwhile our own copy_seq is odd,
 * so that sv_engine_quiesce waits for us and what the caller holds (QPs,
 * CQs, a receive WQE) outlives the wait; the caller then looks at its QPs
 * again, as after an unlocked copy.
 */
static bool grant_fence_needed(const struct sv_exec *x,
			       uint32_t seen[SV_DB_PAGES])
{
	bool busy = false;

	if (!x->copy_seq || !x->fencing)
		return false;   /* never unlocks (unit tests) */
	for (unsigned int i = 0; i < SV_DB_PAGES; i++) {
		const struct sv_engine *e = sv_dev.engine[i];

		seen[i] = 0;
		if (!e || &e->copy_seq == x->copy_seq || e->fencing)
			continue;
		seen[i] = __atomic_load_n(&e->copy_seq, __ATOMIC_ACQUIRE);
		busy |= (seen[i] & 1) != 0;
	}
	return busy;
}

static __attribute__((noinline)) void
grant_fence_wait(struct sv_exec *x, const uint32_t seen[SV_DB_PAGES])
{
	*x->fencing = true;
	__atomic_store_n(x->copy_seq, *x->copy_seq + 1, __ATOMIC_RELEASE);
	sv_dev_unlock();
	for (unsigned int i = 0; i < SV_DB_PAGES; i++)
		if (seen[i] & 1)
			sv_seq_wait(&sv_dev.engine[i]->copy_seq, seen[i]);
	sv_dev_lock(false);
	__atomic_store_n(x->copy_seq, *x->copy_seq + 1, __ATOMIC_RELEASE);
	*x->fencing = false;
}

/* A reliable connection: RC, or XRC (here an XRC_SEND QP is only ever a
 * requester, an XRC_RECV one only a responder). */
static inline bool reliable(const struct sv_qp *qp)
{
	return qp->type == IBV_QPT_RC || qp->type == IBV_QPT_XRC_SEND ||
	       qp->type == IBV_QPT_XRC_RECV;
}

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

static void qp_event(struct sv_qp *qp, uint32_t type)
{
	sv_async_event(qp->owner, type, qp->cookie, qp->handle);
	/* an XRC target's events go to every process that has it open */
	for (const struct sv_qp *op = qp->opens; op; op = op->open_next)
		sv_async_event(op->owner, type, op->cookie, op->handle);
}

/* The QP goes to ERR; event (if not 0) says why. */
static void qp_error(struct sv_qp *qp, uint32_t event)
{
	if (qp->state == IBV_QPS_ERR || qp->state == IBV_QPS_RESET)
		return;
	qp_set_state(qp, IBV_QPS_ERR);
	if (event)
		qp_event(qp, event);
}

static void srq_error(struct sv_srq *srq)
{
	if (srq->in_error)
		return;
	srq->in_error = true;
	sv_async_event(srq->owner, IBV_EVENT_SRQ_ERR, srq->cookie,
		       srq->handle);
}

static void cqe_init(struct sv_cqe *e, uint64_t wr_id, uint32_t status,
		     uint32_t opcode, uint32_t qpn)
{
	memset(e, 0, sizeof(*e));
	e->wr_id = wr_id;
	e->status = status;
	e->opcode = opcode;
	e->qp_num = qpn;
	e->timestamp = sv_now_ns();
}

/* Push a CQE for qp; a CQ overrun is fatal to the QP. */
static void qp_push(struct sv_qp *qp, struct sv_cq *cq, const struct sv_cqe *e,
		    bool solicited)
{
	if (!cq)
		return;
	if (sv_cq_push(cq, e, solicited) == -ENOSPC)
		qp_error(qp, IBV_EVENT_QP_FATAL);
}

/* ---- the send queue ---- */

/* Finish the head WQE of qp's SQ with status. */
static void sq_complete(struct sv_qp *qp, const struct swqe *w,
			uint32_t status, uint64_t len)
{
	bool signaled = (w->h.flags & IBV_SEND_SIGNALED) || qp->sq_sig_all;

	/* the slot is free before the completion says so */
	wq_consume(&qp->sq);
	qp->head_started = false;
	qp->wait_until_ns = 0;
	qp->rnr_left = qp->retry_left = 0;
	sv_dev.wqes++;
	if (status != IBV_WC_SUCCESS || signaled) {
		struct sv_cqe e;

		cqe_init(&e, w->h.wr_id, status, sv_op_wc(w->h.opcode),
			 qp->qpn);
		e.byte_len = (uint32_t)len;
		qp_push(qp, qp->send_cq, &e, false);
	}
	if (status != IBV_WC_SUCCESS) {
		if (reliable(qp))
			qp_error(qp, 0);
		else if (qp->state != IBV_QPS_ERR)
			qp_set_state(qp, IBV_QPS_SQE);
	}
	sv_direct_sq_done(qp);
}

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

/* Copy the body of the head send WQE (its header is in w) from body, where
 * room bytes are (its slot, or the mailbox's copy): as much as the header
 * says, bounded by the QP's private limits. false: the WQE is malformed. */
static bool swqe_body(const struct sv_qp *qp, struct swqe *w,
		      const uint8_t *body, uint32_t room)
{
	size_t need;

	if (w->h.flags & IBV_SEND_INLINE) {
		if (w->h.num_sge > qp->sq.max_inline ||
		    w->h.num_sge > SV_MAX_INLINE)
			return false;
		need = w->h.num_sge;
	} else {
		if (w->h.num_sge > qp->sq.max_sge ||
		    w->h.num_sge > SV_MAX_SGE)
			return false;
		need = (size_t)w->h.num_sge * sizeof(struct sv_wqe_sge);
	}
	if (need > room)
		return false;
	memcpy(&w->u, body, need);
	return true;
}

/* ---- the responder ---- */

static bool can_receive(const struct sv_qp *t)
{
	switch (t->state) {
	case IBV_QPS_RTR:
	case IBV_QPS_RTS:
	case IBV_QPS_SQD:
	case IBV_QPS_SQE:
		return true;
	default:
		return false;
	}
}

/* The first message a connected QP takes in RTR establishes it. */
static void comm_est(struct sv_qp *t)
{
	if (t->state == IBV_QPS_RTR && !t->comm_est_sent &&
	    t->type != IBV_QPT_UD) {
		t->comm_est_sent = true;
		sv_direct_qp(t);
		qp_event(t, IBV_EVENT_COMM_EST);
	}
}

/* RC: the responder refuses the request as invalid; its QP goes to ERR. */
static int resp_inv_req(struct sv_qp *t)
{
	if (reliable(t))
		qp_error(t, IBV_EVENT_QP_REQ_ERR);
	return IBV_WC_REM_INV_REQ_ERR;
}

/* RC: a remote access violation; the responder's QP goes to ERR. */
static int resp_access(struct sv_qp *t)
{
	if (reliable(t))
		qp_error(t, IBV_EVENT_QP_ACCESS_ERR);
	return IBV_WC_REM_ACCESS_ERR;
}

/*
 * Look at (do not take) the next receive WQE of t: 0, -ENOENT when there is
 * none, -EIO when the ring is corrupt (t or its SRQ is in error already).
 */
static int rq_peek(struct sv_qp *t, struct rwqe *r)
{
	struct sv_wq *wq;
	bool corrupt;
	uint32_t n;
	const uint8_t *slot;

	r->srq = t->srq;
	if (r->srq) {
		if (r->srq->in_error) {
			qp_error(t, 0);
			return -EIO;
		}
		wq = &r->srq->rq;
	} else {
		wq = &t->rq;
	}
	r->wq = wq;
	n = wq_pending(wq, &corrupt);
	if (corrupt) {
		if (r->srq)
			srq_error(r->srq);
		qp_error(t, r->srq ? 0 : IBV_EVENT_QP_FATAL);
		return -EIO;
	}
	if (!n)
		return -ENOENT;
	slot = wq_head(wq);
	memcpy(&r->h, slot, sizeof(r->h));
	if (r->h.num_sge > wq->max_sge || r->h.num_sge > SV_MAX_SGE ||
	    SV_RECV_WQE_HDR + (size_t)r->h.num_sge * sizeof(struct sv_wqe_sge) >
	    wq->stride)
		r->h.num_sge = UINT32_MAX;      /* malformed: see rq_resolve */
	else
		memcpy(r->sge, slot + SV_RECV_WQE_HDR,
		       (size_t)r->h.num_sge * sizeof(struct sv_wqe_sge));
	return 0;
}

/* Check the receive buffers: a completion status for the receive WQE. */
static uint32_t rq_resolve(struct sv_qp *t, struct rwqe *r)
{
	struct sv_pd *pd = r->srq ? r->srq->pd : t->pd;

	if (r->h.num_sge == UINT32_MAX)
		return IBV_WC_LOC_QP_OP_ERR;
	return sv_span_sges(&r->mem, r->map, r->iov, r->sge, r->h.num_sge, pd,
			 true, &r->cap);
}

/* Take the peeked WQE off its ring. */
static void rq_commit(struct rwqe *r)
{
	struct sv_srq *srq = r->srq;

	wq_consume(r->wq);
	if (srq && srq->limit) {
		bool corrupt;
		uint32_t left = wq_pending(&srq->rq, &corrupt);

		if (!corrupt && left < srq->limit) {
			srq->limit = 0;
			__atomic_store_n(&srq->rq.hdr->srq_limit, 0,
					 __ATOMIC_RELAXED);
			sv_async_event(srq->owner,
				       IBV_EVENT_SRQ_LIMIT_REACHED,
				       srq->cookie, srq->handle);
		}
	}
}

/* Complete the taken receive WQE at t; an error puts t in ERR. */
static void rq_complete(struct sv_qp *t, struct rwqe *r, uint32_t status,
			uint32_t opcode, const struct msg *m, uint32_t byte_len)
{
	struct sv_cqe e;
	bool solicited = false;

	rq_commit(r);
	cqe_init(&e, r->h.wr_id, status, opcode, t->qpn);
	e.byte_len = byte_len;
	e.src_qp = m->qp->qpn;
	if (status == IBV_WC_SUCCESS) {
		uint32_t f = sv_op_flags(m->opcode);

		if (f & (SV_OPF_IMM | SV_OPF_INV)) {
			/* immediate data as sent (big-endian), or the key
			 * invalidated (host order) */
			e.imm_data = m->w->h.imm;
			e.wc_flags |= (f & SV_OPF_IMM) ? IBV_WC_WITH_IMM :
						      IBV_WC_WITH_INV;
		}
		solicited = (m->w->h.flags & IBV_SEND_SOLICITED) != 0;
	}
	if (m->ah) {
		/* a datagram: its network header type, as on the wire */
		e.sl = sv_grh_wc_sl(sv_dev.gid[m->ah->attr.sgid_index %
					      SV_GID_TBL_LEN].gid);
		if (status == IBV_WC_SUCCESS)
			e.wc_flags |= IBV_WC_GRH;
	} else {
		e.sl = m->qp->attr.ah_attr.sl;
	}
	qp_push(t, sv_x_recv_cq(t, r), &e, solicited);
	if (status != IBV_WC_SUCCESS)
		qp_error(t, 0);
}

/* The receive WQE a message consumes, looked at (rq_peek): 0, or the
 * responder's answer when there is none to take: RES_BUSY (another engine
 * fills the head one), RES_RNR (none posted; m->rnr_ns set), RES_NOACK (the
 * target just went to ERR). */
static inline __attribute__((always_inline)) int
rq_next(struct sv_qp *t, struct rwqe *r, struct msg *m)
{
	int ret;

	if (*rx_busy_of(t))
		return RES_BUSY;
	ret = rq_peek(t, r);
	if (ret == -ENOENT) {
		m->rnr_ns = sv_rnr_timer_ns(t->attr.min_rnr_timer);
		return RES_RNR;
	}
	return ret ? RES_NOACK : 0;
}

/*
 * SEND_WITH_INV, once its data has landed: t invalidates the key, and the
 * receive completes after the fence (grant_fence_needed), during which
 * nobody else takes that receive WQE. 0, or the answer of a copy that lost
 * its QPs (the invalidation stays: a retry is then refused).
 */
static __attribute__((noinline)) int
remote_inv(struct sv_exec *x, struct msg *m, struct sv_qp *t)
{
	uint32_t seen[SV_DB_PAGES], qgen = m->qp->state_gen,
		 tgen = t->state_gen;
	bool *busy;

	sv_mm_remote_inv(t, m->w->h.imm);
	if (!grant_fence_needed(x, seen))
		return 0;
	busy = rx_busy_of(t);
	*busy = true;
	grant_fence_wait(x, seen);
	rx_release(m, t, busy);
	msg_check(m, t, qgen, tgen);
	return m->lost ? lost_res(m) : 0;
}

/* Take a receive WQE and fill it with the message (SEND, SEND_WITH_IMM,
 * SEND_WITH_INV). */
static int deliver_send(struct sv_exec *x, struct sv_qp *t, struct msg *m)
{
	struct rwqe r;
	uint8_t grh[SV_GRH_BYTES];
	uint64_t hdr = m->ah ? SV_GRH_BYTES : 0;
	uint32_t st;
	int ret;

	ret = rq_next(t, &r, m);
	if (ret)
		return ret;
	st = rq_resolve(t, &r);
	if (st != IBV_WC_SUCCESS) {
		rq_complete(t, &r, st, IBV_WC_RECV, m, 0);
		return IBV_WC_REM_OP_ERR;
	}
	if (r.cap < hdr + m->len) {
		rq_complete(t, &r, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, m, 0);
		return IBV_WC_REM_INV_REQ_ERR;
	}
	/* a key t may not invalidate: refused before anything lands */
	if (unlikely(m->opcode == IBV_WR_SEND_WITH_INV) &&
	    !sv_mm_remote_inv_ok(t, m->w->h.imm)) {
		rq_complete(t, &r, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, m, 0);
		return IBV_WC_REM_OP_ERR;
	}
	if (m->ah) {
		const struct sv_wire_ah *ah = &m->ah->attr;
		const uint8_t *sgid = sv_dev.gid[ah->sgid_index %
						 SV_GID_TBL_LEN].gid;
		struct span g;

		sv_grh_build(grh, sgid, ah->dgid, ah->traffic_class,
			     ah->flow_label, ah->hop_limit, (uint32_t)m->len,
			     (sv_op_flags(m->opcode) & SV_OPF_IMM) != 0);
		sv_span_raw(&g, grh, sizeof(grh));
		if (sv_span_copy(x, &r.mem, 0, &g, 0, sizeof(grh)) !=
		    SV_COPY_OK) {
			rq_complete(t, &r, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV,
				    m, 0);
			return IBV_WC_REM_OP_ERR;
		}
	}
	ret = msg_copy(x, m, t, true, &r.mem, hdr, &m->local, 0, m->len);
	if (m->lost)
		return lost_res(m);
	switch (ret) {
	case SV_COPY_SRC_FAULT:
		/* the requester's memory: the receive WQE stays posted */
		return IBV_WC_LOC_PROT_ERR;
	case SV_COPY_DST_FAULT:
		if (target_gone(t))
			return RES_NOACK;
		rq_complete(t, &r, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, m, 0);
		return IBV_WC_REM_OP_ERR;
	default:
		break;
	}
	if (unlikely(m->opcode == IBV_WR_SEND_WITH_INV)) {
		ret = remote_inv(x, m, t);
		if (ret)
			return ret;
	}
	rq_complete(t, &r, IBV_WC_SUCCESS, IBV_WC_RECV, m,
		    (uint32_t)(hdr + m->len));
	return IBV_WC_SUCCESS;
}

static int deliver_write(struct sv_exec *x, struct sv_qp *t, struct msg *m)
{
	const struct sv_send_wqe *h = &m->w->h;
	bool imm = m->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	struct rspan rmem;
	struct rwqe r;
	int ret;

	if (!(t->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE))
		return resp_inv_req(t);
	if (imm) {
		ret = rq_next(t, &r, m);
		if (ret)
			return ret;
	}
	if (m->len) {
		if (!sv_span_remote(&rmem, h->rkey, t, h->remote_addr,
				 m->len, IBV_ACCESS_REMOTE_WRITE))
			return resp_access(t);
		ret = msg_copy(x, m, t, imm, &rmem.s, 0, &m->local, 0, m->len);
		if (m->lost)
			return lost_res(m);
		switch (ret) {
		case SV_COPY_SRC_FAULT:
			return IBV_WC_LOC_PROT_ERR;
		case SV_COPY_DST_FAULT:
			return target_gone(t) ? RES_NOACK : resp_access(t);
		default:
			break;
		}
	}
	if (imm)
		rq_complete(t, &r, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
			    m, (uint32_t)m->len);
	return IBV_WC_SUCCESS;
}

static int local_inv(struct sv_exec *x, struct sv_qp *qp, uint32_t key);

static int deliver_read(struct sv_exec *x, struct sv_qp *t, struct msg *m)
{
	const struct sv_send_wqe *h = &m->w->h;
	struct rspan rmem;
	int ret;

	if (!(t->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ))
		return resp_inv_req(t);
	if (m->len) {
		if (!sv_span_remote(&rmem, h->rkey, t, h->remote_addr,
				 m->len, IBV_ACCESS_REMOTE_READ))
			return resp_access(t);
		ret = msg_copy(x, m, t, false, &m->local, 0, &rmem.s, 0, m->len);
		if (m->lost)
			return lost_res(m);
		switch (ret) {
		case SV_COPY_SRC_FAULT:
			return target_gone(t) ? RES_NOACK : resp_access(t);
		case SV_COPY_DST_FAULT:
			return IBV_WC_LOC_PROT_ERR;
		default:
			break;
		}
	}
	/* RDMA_READ_INV: the requester's own step, once the data has landed
	 * (here, where only READs pay for the test) */
	if (m->opcode == SV_WR_RDMA_READ_INV)
		return local_inv(x, m->qp, h->imm);
	return IBV_WC_SUCCESS;
}

/* The atomic a WQE asks for (an SV_OPF_ATOMIC opcode), and its rkey. */
static uint32_t atomic_of(const struct sv_send_wqe *h, struct sv_atomic_op *op)
{
	switch (h->opcode) {
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		*op = (struct sv_atomic_op){
			.kind = h->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ?
				SV_ATOMIC_CMP_SWAP : SV_ATOMIC_FETCH_ADD,
			.compare_add = h->atomic.compare_add,
			.swap = h->atomic.swap,
		};
		return h->rkey;
	default:
		*op = (struct sv_atomic_op){
			.kind = h->opcode == SV_WR_MASKED_CMP_SWAP ?
				SV_ATOMIC_MASKED_CMP_SWAP :
				SV_ATOMIC_MASKED_FETCH_ADD,
			.compare_add = h->masked.compare_add,
			.swap = h->masked.swap,
			.compare_mask = h->masked.compare_mask,
			.swap_mask = h->masked.swap_mask,
		};
		return h->imm;
	}
}

static int deliver_atomic(struct sv_exec *x, struct sv_qp *t, struct msg *m)
{
	const struct sv_send_wqe *h = &m->w->h;
	struct sv_atomic_op op;
	uint64_t orig, val;
	struct rspan rmem;
	struct span lmem, vmem;
	uint32_t rkey = atomic_of(h, &op);
	bool store;

	if (!(t->attr.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC) ||
	    (h->remote_addr & 7))
		return resp_inv_req(t);
	if (!sv_span_remote(&rmem, rkey, t, h->remote_addr,
			 sizeof(uint64_t), IBV_ACCESS_REMOTE_ATOMIC))
		return resp_access(t);
	sv_span_raw(&lmem, &orig, sizeof(orig));
	sv_span_raw(&vmem, &val, sizeof(val));
	/* atomic with respect to every other atomic: we hold sv_dev.lock */
	if (sv_span_copy(x, &lmem, 0, &rmem.s, 0, sizeof(orig)) != SV_COPY_OK)
		return target_gone(t) ? RES_NOACK : resp_access(t);
	store = sv_atomic_apply(&op, orig, &val);
	if (store && sv_span_copy(x, &rmem.s, 0, &vmem, 0, sizeof(val)) !=
	    SV_COPY_OK)
		return target_gone(t) ? RES_NOACK : resp_access(t);
	if (sv_span_copy(x, &m->local, 0, &lmem, 0, sizeof(orig)) != SV_COPY_OK)
		return IBV_WC_LOC_PROT_ERR;
	return IBV_WC_SUCCESS;
}

/*
 * The responder: hand message m to the QP it is addressed to. Returns the
 * requester's completion status, RES_RNR or RES_NOACK, as an RC requester
 * would see it (the caller turns remote trouble into success for UC/UD).
 * Everything the target sees (receive completions, its state, its events)
 * happens here.
 */
static int deliver(struct sv_exec *x, struct msg *m)
{
	struct sv_qp *qp = m->qp, *t;

	if (qp->type == IBV_QPT_UD) {
		const struct sv_send_wqe *h = &m->w->h;
		uint32_t qkey = (h->ud.remote_qkey & 0x80000000u) ?
				qp->attr.qkey : h->ud.remote_qkey;

		t = sv_qp_lookup(h->remote_qpn & 0xffffff);
		if (!t || t->type != IBV_QPT_UD || !can_receive(t) ||
		    t->attr.qkey != qkey)
			return IBV_WC_SUCCESS;  /* a datagram is just lost */
	} else {
		t = sv_qp_lookup(qp->attr.dest_qp_num);
		/* a connected responder takes only its own peer's packets */
		if (!t || t->type != (qp->type == IBV_QPT_XRC_SEND ?
				      IBV_QPT_XRC_RECV : qp->type) ||
		    !can_receive(t) || t->attr.dest_qp_num != qp->qpn)
			return RES_NOACK;
		/* XRC: the SRQ the message names, of the target's domain */
		if (unlikely(qp->type == IBV_QPT_XRC_SEND) &&
		    !sv_xrc_bind(t, m->w->h.remote_qpn))
			return IBV_WC_REM_INV_REQ_ERR;
	}
	comm_est(t);
	sv_dev.lo_msgs++;
	sv_dev.lo_bytes += m->len;
	switch (m->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_SEND_WITH_INV:
		return deliver_send(x, t, m);
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return deliver_write(x, t, m);
	case IBV_WR_RDMA_READ:
	case SV_WR_RDMA_READ_INV:
		return deliver_read(x, t, m);
	default:
		return deliver_atomic(x, t, m);
	}
}

/*
 * A UD send to a multicast GID: one copy to every QP of this daemon
 * attached to the group whose qkey matches (the sender too, unless it was
 * created with IBV_QP_CREATE_BLOCK_SELF_MCAST_LB), each through
 * deliver_send as a unicast datagram would go; then, with a wire, one
 * datagram to the IP group. A receiver without a receive WQE, or in
 * trouble, loses its copy alone. The destination QPN must be the
 * multicast QPN. A UD message fits the path MTU, so no copy lets the
 * lock go, and the group does not change under the loop.
 */
static __attribute__((noinline)) int mcast_send(struct sv_exec *x,
						struct msg *m, uint32_t f)
{
	struct sv_qp *qp = m->qp;
	const struct sv_send_wqe *h = &m->w->h;
	uint32_t qkey = (h->ud.remote_qkey & 0x80000000u) ?
			qp->attr.qkey : h->ud.remote_qkey;
	const struct sv_mcast_grp *g;

	if ((h->remote_qpn & 0xffffff) != SV_MCAST_QPN)
		return IBV_WC_SUCCESS;  /* nobody takes it: lost */
	g = sv_mcast_find(m->ah->attr.dgid);
	for (uint32_t i = 0; g && i < g->nqp; i++) {
		struct sv_qp *t = g->qp[i];

		if (t == qp &&
		    (qp->create_flags & IBV_QP_CREATE_BLOCK_SELF_MCAST_LB))
			continue;
		if (t->dead || t->type != IBV_QPT_UD || !can_receive(t) ||
		    t->attr.qkey != qkey)
			continue;
		if (deliver_send(x, t, m) == RES_LOST)
			return RES_LOST;
	}
	if (sv_roce_running())
		return (int)sv_roce_ud_send(x, qp, m->ah, SV_MCAST_QPN, qkey,
			(f & SV_OPF_IMM) != 0, h->imm,
			(h->flags & IBV_SEND_SOLICITED) != 0, &m->local,
			m->len);
	return IBV_WC_SUCCESS;
}

/* ---- the requester ---- */

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

	if (!grant_fence_needed(x, seen))
		return IBV_WC_SUCCESS;
	grant_fence_wait(x, seen);
	return head_still_ours(qp) ? IBV_WC_SUCCESS : RES_LOST;
}

/* LOCAL_INV, and the invalidation of RDMA_READ_INV. */
static int local_inv(struct sv_exec *x, struct sv_qp *qp, uint32_t key)
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
		return local_inv(x, qp, w->h.imm);
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
	if (!sv_op_flags_ok(qp->type, f))
		return IBV_WC_LOC_QP_OP_ERR;
	if (unlikely(f & SV_OPF_LOCAL))
		return sq_local(x, qp, w);
	if (!swqe_body(qp, w, body, room))
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
			/* a device started without them */
			if ((op == SV_WR_MASKED_CMP_SWAP ||
			     op == SV_WR_MASKED_FETCH_ADD) &&
			    !(sv_dev.attr.exp_cap_flags &
			      SV_EXP_CAP_MASKED_ATOMICS))
				return IBV_WC_LOC_QP_OP_ERR;
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
		m->ah = sv_objtab_lookup(&qp->owner->objs, w->h.ud.ah,
					 SV_OBJ_AH);
		if (!m->ah || m->ah->pd != qp->pd)
			return IBV_WC_LOC_QP_OP_ERR;
		if (m->len > sv_mtu_bytes(sv_dev.port.active_mtu))
			return IBV_WC_LOC_LEN_ERR;
		if (unlikely(sv_gid_is_mcast(m->ah->attr.dgid)))
			return mcast_send(x, m, f);
		if (sv_roce_running() && !sv_roce_gid_local(m->ah->attr.dgid)) {
			/* a peer on another host: one datagram on the wire */
			const struct sv_send_wqe *h = &w->h;

			return (int)sv_roce_ud_send(x, qp, m->ah,
				h->remote_qpn,
				(h->ud.remote_qkey & 0x80000000u) ?
					qp->attr.qkey : h->ud.remote_qkey,
				(f & SV_OPF_IMM) != 0, h->imm,
				(h->flags & IBV_SEND_SOLICITED) != 0,
				&m->local, m->len);
		}
	}
	return deliver(x, m);
}

/* retry_left once the last transport retry is on its way */
#define RETRY_FINAL UINT32_MAX

/* Execute (or retry) the head WQE of qp's send queue. */
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
		sq_complete(qp, &w, IBV_WC_RETRY_EXC_ERR, 0);
		return;
	}
	qp->wait_until_ns = 0;
	m.rnr_ns = 0;
	m.len = 0;
	m.lost = 0;
	res = sq_run(x, qp, &w, &m);
	if (res == RES_BUSY || res == RES_LOST)
		return;         /* the head stays; next pass, or the flush */
	if (!reliable(qp)) {
		/* no acknowledgements: remote trouble is invisible */
		if (res == RES_RNR || res == RES_NOACK ||
		    res == IBV_WC_REM_INV_REQ_ERR ||
		    res == IBV_WC_REM_ACCESS_ERR || res == IBV_WC_REM_OP_ERR)
			res = IBV_WC_SUCCESS;
	}
	if (res == RES_RNR) {
		if (qp->attr.rnr_retry != 7) {
			if (!qp->rnr_left) {
				sq_complete(qp, &w, IBV_WC_RNR_RETRY_EXC_ERR, 0);
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
	sq_complete(qp, &w, (uint32_t)res, res == IBV_WC_SUCCESS ? m.len : 0);
}

/* Complete the head WQE of wq with IBV_WC_WR_FLUSH_ERR. */
static void sq_flush_one(struct sv_qp *qp)
{
	struct sv_send_wqe h;
	struct sv_cqe e;

	memcpy(&h, wq_head(&qp->sq), sizeof(h));
	wq_consume(&qp->sq);
	qp->head_started = false;
	qp->wait_until_ns = 0;
	cqe_init(&e, h.wr_id, IBV_WC_WR_FLUSH_ERR, sv_op_wc(h.opcode),
		 qp->qpn);
	/* a full CQ: the completion is lost, the WQE still goes */
	qp_push(qp, qp->send_cq, &e, false);
	sv_direct_sq_done(qp);
}

static void rq_flush_one(struct sv_qp *qp)
{
	struct sv_recv_wqe h;
	struct sv_cqe e;

	memcpy(&h, wq_head(&qp->rq), sizeof(h));
	wq_consume(&qp->rq);
	cqe_init(&e, h.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, qp->qpn);
	qp_push(qp, qp->recv_cq, &e, false);
}

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

static void sqd_disarm(struct sv_qp *qp)
{
	qp->sqd_armed = false;
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
			qp_error(qp, IBV_EVENT_QP_FATAL);
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
		sv_x_sq_drained(qp);
		return true;
	case IBV_QPS_SQE:
		if (!wq_pending(&qp->sq, &corrupt))
			return false;
		sq_flush_one(qp);
		return true;
	case IBV_QPS_ERR:
		if (wq_pending(&qp->sq, &corrupt)) {
			sq_flush_one(qp);
			return true;
		}
		/* not the WQE another engine fills right now (msg_copy) */
		if (!qp->rx_busy && wq_pending(&qp->rq, &corrupt)) {
			rq_flush_one(qp);
			return true;
		}
		if (qp->srq && !qp->last_wqe_sent) {
			qp->last_wqe_sent = true;
			qp_event(qp, IBV_EVENT_QP_LAST_WQE_REACHED);
			return true;
		}
		return false;
	default:
		return false;
	}
}

/* ================= what the wire borrows (exec_int.h) ================= */

bool sv_x_swqe_body(const struct sv_qp *qp, const void *slot, struct swqe *w)
{
	return swqe_body(qp, w, (const uint8_t *)slot + SV_SEND_WQE_HDR,
			 qp->sq.stride - SV_SEND_WQE_HDR);
}

void sv_x_sq_complete(struct sv_qp *qp, const struct swqe *w, uint32_t status,
		      uint64_t len)
{
	sq_complete(qp, w, status, len);
}

bool sv_x_op_sink(uint32_t op)
{
	return (sv_op_flags(op) & SV_OPF_SINK) != 0;
}

bool sv_x_op_atomic(uint32_t op)
{
	return (sv_op_flags(op) & SV_OPF_ATOMIC) != 0;
}

uint32_t sv_x_wc_opcode(uint32_t op)
{
	return sv_op_wc(op);
}

int sv_x_rq_peek(struct sv_qp *t, struct rwqe *r)
{
	return rq_peek(t, r);
}

uint32_t sv_x_rq_resolve(struct sv_qp *t, struct rwqe *r)
{
	return rq_resolve(t, r);
}

void sv_x_rq_commit(struct rwqe *r)
{
	rq_commit(r);
}

bool sv_x_can_receive(const struct sv_qp *t)
{
	return can_receive(t);
}

void sv_x_comm_est(struct sv_qp *t)
{
	comm_est(t);
}

void sv_x_qp_error(struct sv_qp *qp, uint32_t event)
{
	qp_error(qp, event);
}

void sv_x_sq_drained(struct sv_qp *qp)
{
	if (qp->sq_drained_sent)
		return;
	sqd_disarm(qp);
	qp->sq_drained_sent = true;
	if (qp->attr.en_sqd_async_notify)
		qp_event(qp, IBV_EVENT_SQ_DRAINED);
}

void sv_x_cqe_init(struct sv_cqe *e, uint64_t wr_id, uint32_t status,
		   uint32_t opcode, uint32_t qpn)
{
	cqe_init(e, wr_id, status, opcode, qpn);
}

void sv_x_qp_push(struct sv_qp *qp, struct sv_cq *cq, const struct sv_cqe *e,
		  bool solicited)
{
	qp_push(qp, cq, e, solicited);
}

bool sv_x_target_gone(const struct sv_qp *t)
{
	return target_gone(t);
}

bool sv_exec_local_head(struct sv_exec *x, struct sv_qp *qp)
{
	bool corrupt;

	if (!wq_pending(&qp->sq, &corrupt) || !head_due(qp, x->now, NULL))
		return false;
	sq_execute(x, qp);
	return true;
}
