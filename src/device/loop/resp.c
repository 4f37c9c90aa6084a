// SPDX-License-Identifier: MIT
/*
 * The same-host responder: a message from the same-host requester
 * (req.c) meets the QP it is addressed to, on this daemon, with no
 * packets. Semantics follow the IBA and Linux rxe:
 *
 *  - the requester has validated its WQE and its local SGEs; the responder
 *    checks, in order: reachability, the operation against the QP's access
 *    flags, a receive WQE (RNR when none), length, rkey; only then is
 *    anything written to the target;
 *  - RC errors put the QP in ERR; UC/UD send errors put it in SQE; remote
 *    trouble on UC/UD drops the message and the sender succeeds;
 *  - an RC target that does not answer (gone, not ready, in error) costs the
 *    transport timeout, retry_cnt times; a missing receive WQE the target's
 *    RNR timer, rnr_retry times (7: forever).
 *
 * Atomics run under sv_dev.lock, so they are atomic with respect to each
 * other across the whole device (IBV_ATOMIC_HCA).
 *
 * Keys become memory through exec/keymap.h (MRs, fast-register MRs over page or
 * block lists, memory windows); the memory-management work requests
 * (FAST_REG_MR, LOCAL_INV, BIND_MW, and the invalidation of SEND_WITH_INV and
 * RDMA_READ_INV) change what keys grant. One that ends a grant completes only
 * once no copy that may still use the old grant runs (the grant fence,
 * sv_grant_fence_needed).
 *
 * Large messages are copied without sv_dev.lock, a window at a time
 * (msg_copy_unlocked); the requester or the responder may change meanwhile.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include <infiniband/verbs.h>

#include "abi/sv_op.h"
#include "abi/sv_tm.h"
#include "device/ctl/direct.h"
#include "device/exec/atomic.h"
#include "device/exec/engine.h"
#include "device/exec/exec_int.h"
#include "device/exec/mm.h"
#include "device/exec/transport.h"
#include "device/loop/loop.h"
#include "device/roce/roce.h"
#include "device/sv_dev.h"

#define unlikely(x) __builtin_expect(!!(x), 0)

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
 * after the change). sv_grant_fence_needed takes the copy_seq of every
 * other engine in the middle of a copy (not of those waiting in a fence
 * themselves: two fences never wait for each other); sv_grant_fence_wait
 * waits, without the lock, for each to move on. Meanwhile our own copy_seq
 * is odd, so that sv_engine_quiesce waits for us and what the caller holds
 * (QPs, CQs, a receive WQE) outlives the wait; the caller then looks at its
 * QPs again, as after an unlocked copy.
 */
bool sv_grant_fence_needed(const struct sv_exec *x,
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

__attribute__((noinline)) void
sv_grant_fence_wait(struct sv_exec *x, const uint32_t seen[SV_DB_PAGES])
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

/* The responder t answers with outcome o (exec/exec_int.h's table): a reliable
 * responder's QP goes to ERR where o says so, with o's event; the
 * requester's completion status. */
static int answer(struct sv_qp *t, enum sv_outcome o)
{
	const struct sv_outcome_info *oi = sv_outcome(o);

	if (oi->qp_err && sv_qp_reliable(t))
		sv_qp_error(t, oi->event);
	return (int)oi->status;
}


/* Complete the taken receive WQE at t; an error puts t in ERR. */
static void rq_complete(struct sv_qp *t, struct rwqe *r, uint32_t status,
			uint32_t opcode, const struct msg *m, uint32_t byte_len)
{
	struct sv_cqe e;
	bool solicited = false;

	sv_rq_commit(r);
	sv_cqe_init(&e, r->h.wr_id, status, opcode, t->qpn);
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
	sv_qp_push(t, sv_recv_cq(t, r), &e, solicited);
	if (status != IBV_WC_SUCCESS)
		sv_qp_error(t, 0);
}

/* The receive WQE a message consumes, looked at (sv_rq_peek): 0, or the
 * responder's answer when there is none to take: RES_BUSY (another engine
 * fills the head one), RES_RNR (none posted; m->rnr_ns set), RES_NOACK (the
 * target just went to ERR). */
static inline __attribute__((always_inline)) int
rq_next(struct sv_qp *t, struct rwqe *r, struct msg *m)
{
	int ret;

	if (*rx_busy_of(t))
		return RES_BUSY;
	/* a WQE of t's SRQ its requester claimed directly and did not fill:
	 * this message, which came to us instead, fills it */
	if (unlikely(t->srq && t->drecv))
		sv_direct_adopt(m->qp, false);
	ret = sv_rq_peek(t, r);
	if (ret == -ENOENT) {
		m->rnr_ns = sv_rnr_timer_ns(t->attr.min_rnr_timer);
		return RES_RNR;
	}
	return ret ? RES_NOACK : 0;
}

/*
 * SEND_WITH_INV, once its data has landed: t invalidates the key, and the
 * receive completes after the fence (sv_grant_fence_needed), during which
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
	if (!sv_grant_fence_needed(x, seen))
		return 0;
	busy = rx_busy_of(t);
	*busy = true;
	sv_grant_fence_wait(x, seen);
	rx_release(m, t, busy);
	msg_check(m, t, qgen, tgen);
	return m->lost ? lost_res(m) : 0;
}

/* A copy into or out of t's memory failed: no answer when its process is
 * gone (sv_target_gone), else a remote access error. */
static int target_fault(struct sv_qp *t)
{
	return sv_target_gone(t) ? RES_NOACK : answer(t, SV_OUTCOME_ACCESS);
}

/* The receive WQE r of t, taken for m, fails with status st (t goes to
 * ERR): the responder answers with outcome o. */
static int recv_fail(struct sv_qp *t, struct rwqe *r, uint32_t st,
		     const struct msg *m, enum sv_outcome o)
{
	rq_complete(t, r, st, IBV_WC_RECV, m, 0);
	return answer(t, o);
}

/* Take a receive WQE and fill it with the message (SEND, SEND_WITH_IMM,
 * SEND_WITH_INV); it completes with opcode (enum ibv_wc_opcode). */
static int deliver_recv(struct sv_exec *x, struct sv_qp *t, struct msg *m,
			uint32_t opcode)
{
	struct rwqe r;
	uint8_t grh[SV_GRH_BYTES];
	uint64_t hdr = m->ah ? SV_GRH_BYTES : 0;
	uint32_t st;
	int ret;

	ret = rq_next(t, &r, m);
	if (ret)
		return ret;
	st = sv_rq_resolve(t, &r);
	if (st != IBV_WC_SUCCESS)
		return recv_fail(t, &r, st, m, SV_OUTCOME_RECV_ERR);
	if (r.cap < hdr + m->len)
		return recv_fail(t, &r, IBV_WC_LOC_LEN_ERR, m,
				 SV_OUTCOME_RECV_LEN);
	/* a key t may not invalidate: refused before anything lands */
	if (unlikely(sv_op_flags(m->opcode) & SV_OPF_INV) &&
	    !sv_mm_remote_inv_ok(t, m->w->h.imm))
		return recv_fail(t, &r, IBV_WC_LOC_PROT_ERR, m,
				 SV_OUTCOME_RECV_ERR);
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
		    SV_COPY_OK)
			return recv_fail(t, &r, IBV_WC_LOC_PROT_ERR, m,
					 SV_OUTCOME_RECV_ERR);
	}
	ret = msg_copy(x, m, t, true, &r.mem, hdr, &m->local, 0, m->len);
	if (m->lost)
		return lost_res(m);
	switch (ret) {
	case SV_COPY_SRC_FAULT:
		/* the requester's memory: the receive WQE stays posted */
		return IBV_WC_LOC_PROT_ERR;
	case SV_COPY_DST_FAULT:
		if (sv_target_gone(t))
			return RES_NOACK;
		return recv_fail(t, &r, IBV_WC_LOC_PROT_ERR, m,
				 SV_OUTCOME_RECV_ERR);
	default:
		break;
	}
	if (unlikely(sv_op_flags(m->opcode) & SV_OPF_INV)) {
		ret = remote_inv(x, m, t);
		if (ret)
			return ret;
	}
	rq_complete(t, &r, IBV_WC_SUCCESS, opcode, m,
		    (uint32_t)(hdr + m->len));
	return IBV_WC_SUCCESS;
}

/* ---- tag matching (ctl/tm.c; docs/DESIGN.md "Tag matching") ---- */

/* A completion of tag-matching SRQ t->srq's tagged buffer (wr_id): on the
 * SRQ's CQ; an error puts t in ERR. */
static void tm_complete(struct sv_qp *t, const struct msg *m, uint64_t wr_id,
			uint32_t status, uint32_t flags,
			const struct ibv_tmh *tmh, uint32_t byte_len)
{
	struct sv_cqe e;

	sv_cqe_init(&e, wr_id, status, IBV_WC_TM_RECV, t->qpn);
	e.byte_len = byte_len;
	e.src_qp = m->qp->qpn;
	e.sl = m->qp->attr.ah_attr.sl;
	if (status == IBV_WC_SUCCESS) {
		e.wc_flags = flags;
		if (flags & IBV_WC_TM_MATCH) {
			e.tm_tag = be64toh(tmh->tag);
			e.tm_priv = be32toh(tmh->app_ctx);
		}
		if (sv_op_flags(m->opcode) & SV_OPF_IMM) {
			e.imm_data = m->w->h.imm;
			e.wc_flags |= IBV_WC_WITH_IMM;
		}
	}
	sv_qp_push(t, t->srq->cq, &e, false);
	if (status != IBV_WC_SUCCESS)
		sv_qp_error(t, 0);
}

/* A tagged buffer (num_sge SV_TM_MAX_SGE at most) of srq, resolved into
 * s: a completion status, and *cap its bytes. */
static uint32_t tm_buffer(const struct sv_srq *srq,
			  const struct sv_wqe_sge *sge, uint32_t num_sge,
			  struct span *s, struct sv_map *map,
			  struct iovec *iov, uint64_t *cap)
{
	return sv_span_sges(s, map, iov, sge, num_sge, srq->pd, true, cap);
}

/* The FIN of a rendezvous, into the requester s's next receive WQE (as
 * a SEND from t would land); none posted, or one that fails: it is lost,
 * or the WQE's error completion says why. */
static bool tm_fin(struct sv_exec *x, struct sv_qp *s, const struct sv_qp *t,
		   const struct ibv_tmh *tmh)
{
	struct ibv_tmh fin = *tmh;
	struct sv_cqe e;
	struct span f;
	struct rwqe r;
	uint32_t st;

	fin.opcode = IBV_TMH_FIN;
	if (!sv_qp_can_receive(s) || *rx_busy_of(s) || sv_rq_peek(s, &r))
		return false;
	st = sv_rq_resolve(s, &r);
	sv_span_raw(&f, &fin, sizeof(fin));
	if (st == IBV_WC_SUCCESS && r.cap < sizeof(fin))
		st = IBV_WC_LOC_LEN_ERR;
	if (st == IBV_WC_SUCCESS &&
	    sv_span_copy(x, &r.mem, 0, &f, 0, sizeof(fin)) != SV_COPY_OK)
		st = IBV_WC_LOC_PROT_ERR;
	sv_rq_commit(&r);
	sv_cqe_init(&e, r.h.wr_id, st, IBV_WC_RECV, s->qpn);
	e.byte_len = st == IBV_WC_SUCCESS ? sizeof(fin) : 0;
	e.src_qp = t->qpn;
	sv_qp_push(s, sv_recv_cq(s, &r), &e, false);
	if (st != IBV_WC_SUCCESS)
		sv_qp_error(s, 0);
	return true;
}

/* The rendezvous READ goes a window at a time: the lock is let go (and
 * the keys granted again) between two. */
#define TM_RNDV_WINDOW (128u * 1024u)

/*
 * The rendezvous READ of v: its len bytes at the requester's va (its rkey,
 * the requester QP's REMOTE_READ) into the tagged buffer, a window at a
 * time. For each window, under the lock, both sides are resolved again
 * (the keys may have changed); a window of plain memory on both sides of
 * SV_UNLOCKED_COPY bytes or more is copied without the lock, as
 * msg_copy_unlocked does (copy_seq odd meanwhile, so that the QPs, the SRQ
 * and the memory resolved outlive it), then m->lost says whether a QP
 * changed meanwhile. A completion status for the tag.
 */
static uint32_t tm_rndv_copy(struct sv_exec *x, struct msg *m, struct sv_qp *t,
			     const struct tm_rndv *v, uint64_t len)
{
	struct sv_qp *s = m->qp;
	uint32_t qgen = s->state_gen, tgen = t->state_gen;
	struct sv_map map[SV_TM_MAX_SGE];
	struct iovec iov[SV_IOV_WINDOW];
	struct rspan rmem;
	struct span buf;
	uint64_t cap, n;
	uint32_t st;
	int ret;

	if (!(s->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ))
		return IBV_WC_REM_ACCESS_ERR;
	for (uint64_t off = 0; off < len; off += n) {
		n = len - off < TM_RNDV_WINDOW ? len - off : TM_RNDV_WINDOW;
		st = sv_span_sges(&buf, map, iov, &v->sge, v->num_sge,
				  t->srq->pd, true, &cap);
		if (st != IBV_WC_SUCCESS)
			return st;
		if (cap < len)
			return IBV_WC_LOC_LEN_ERR;
		if (!sv_span_remote(&rmem, be32toh(v->rvh.rkey), s,
				    be64toh(v->rvh.va) + off, n,
				    IBV_ACCESS_REMOTE_READ))
			return IBV_WC_REM_ACCESS_ERR;
		if (x->copy_seq && buf.whole && rmem.s.whole &&
		    n >= SV_UNLOCKED_COPY) {
			__atomic_store_n(x->copy_seq, *x->copy_seq + 1,
					 __ATOMIC_RELEASE);
			sv_dev_unlock();
			ret = sv_mem_copy(&buf.mem, off, &rmem.s.mem, 0, n,
					  x->bounce, x->bounce_bytes);
			sv_dev_lock(false);
			__atomic_store_n(x->copy_seq, *x->copy_seq + 1,
					 __ATOMIC_RELEASE);
			msg_check(m, t, qgen, tgen);
			if (m->lost)
				return IBV_WC_REM_ABORT_ERR;
		} else {
			ret = sv_span_copy(x, &buf, off, &rmem.s, 0, n);
		}
		if (ret == SV_COPY_SRC_FAULT)
			return IBV_WC_REM_ACCESS_ERR;
		if (ret != SV_COPY_OK)
			return IBV_WC_LOC_PROT_ERR;
	}
	return IBV_WC_SUCCESS;
}

/*
 * A rendezvous whose tag matched (that completion is written) and whose
 * SEND has completed at the requester, as its ACK would come first on a
 * wire: now the device READs the data into the tagged buffer
 * (tm_rndv_copy), sends the FIN back into the requester's receive queue
 * and completes the data (IBV_WC_TM_DATA_VALID). A responder that went
 * away (or changed state) meanwhile takes nothing; a requester that did
 * leaves the data incomplete (IBV_WC_REM_ABORT_ERR) and no FIN.
 */
void sv_loop_tm_rndv(struct sv_exec *x, struct msg *m)
{
	const struct tm_rndv *v = &m->rndv;
	struct sv_qp *t = sv_qp_lookup(v->tqpn);
	uint64_t len = be32toh(v->rvh.len);
	bool fin = false;
	uint32_t st;

	m->rndv_due = false;
	m->lost = 0;
	if (!t || t->dead || !t->srq || !t->srq->tm || !sv_qp_can_receive(t))
		return;
	st = tm_rndv_copy(x, m, t, v, len);
	if (m->lost == LOST_RESP)
		return;
	if (st == IBV_WC_SUCCESS)
		fin = tm_fin(x, m->qp, t, &v->tmh);
	if (unlikely(__atomic_load_n(&sv_cap_on, __ATOMIC_RELAXED)))
		sv_capture_rndv(x, m, t, st, fin);
	tm_complete(t, m, v->wr_id, st, IBV_WC_TM_DATA_VALID, &v->tmh,
		    st == IBV_WC_SUCCESS ? (uint32_t)len : 0);
}

/*
 * A SEND into a tag-matching SRQ: its first 16 bytes are a TMH. EAGER and
 * RNDV look for a tag (sv_tm_match): matched, the data after the TMH (or
 * the rendezvous READ) goes to the tagged buffer; unmatched, the whole
 * message is unexpected (an ordinary receive WQE, IBV_WC_TM_RECV, and the
 * device's unexpected count goes up). NO_TAG, a message too short for its
 * header, and any other opcode go to an ordinary receive WQE as
 * IBV_WC_TM_NO_TAG.
 */
static __attribute__((noinline)) int
deliver_tm(struct sv_exec *x, struct sv_qp *t, struct msg *m)
{
	struct sv_srq *srq = t->srq;
	struct ibv_tmh tmh;
	struct ibv_rvh rvh;
	struct sv_map map[SV_TM_MAX_SGE];
	struct iovec iov[SV_IOV_WINDOW];
	struct sv_tm_tag *g;
	struct span hs, buf;
	uint64_t cap, need, wr_id;
	uint32_t st;
	int ret;

	/* the ops posted before the message came apply first; an SRQ in
	 * error (a corrupt ring) takes nothing: sv_rq_peek says so */
	sv_tm_drain(srq);
	if (m->len < sizeof(tmh) || srq->in_error)
		return deliver_recv(x, t, m, IBV_WC_TM_NO_TAG);
	sv_span_raw(&hs, &tmh, sizeof(tmh));
	if (sv_span_copy(x, &hs, 0, &m->local, 0, sizeof(tmh)) != SV_COPY_OK)
		return IBV_WC_LOC_PROT_ERR;
	if (tmh.opcode == IBV_TMH_RNDV) {
		if (m->len < sizeof(tmh) + sizeof(rvh))
			return deliver_recv(x, t, m, IBV_WC_TM_NO_TAG);
		sv_span_raw(&hs, &rvh, sizeof(rvh));
		if (sv_span_copy(x, &hs, 0, &m->local, sizeof(tmh),
				 sizeof(rvh)) != SV_COPY_OK)
			return IBV_WC_LOC_PROT_ERR;
	} else if (tmh.opcode != IBV_TMH_EAGER) {
		return deliver_recv(x, t, m, IBV_WC_TM_NO_TAG);
	}
	g = sv_tm_match(srq->tm, be64toh(tmh.tag));
	if (!g) {
		ret = deliver_recv(x, t, m, IBV_WC_TM_RECV);
		if (ret == IBV_WC_SUCCESS)
			srq->tm->unexp++;
		return ret;
	}
	wr_id = g->wr_id;
	need = tmh.opcode == IBV_TMH_RNDV ? be32toh(rvh.len) :
					    m->len - sizeof(tmh);
	st = tm_buffer(srq, &g->sge, g->num_sge, &buf, map, iov, &cap);
	if (st == IBV_WC_SUCCESS && cap < need)
		st = IBV_WC_LOC_LEN_ERR;
	if (st != IBV_WC_SUCCESS) {
		sv_tm_take(srq->tm, g);
		tm_complete(t, m, wr_id, st, 0, &tmh, 0);
		return answer(t, st == IBV_WC_LOC_LEN_ERR ?
			      SV_OUTCOME_RECV_LEN : SV_OUTCOME_RECV_ERR);
	}
	if (tmh.opcode == IBV_TMH_RNDV) {
		m->rndv = (struct tm_rndv){
			.tqpn = t->qpn, .num_sge = g->num_sge, .wr_id = wr_id,
			.sge = g->sge, .tmh = tmh, .rvh = rvh,
		};
		m->rndv_due = true;
		sv_tm_take(srq->tm, g);
		tm_complete(t, m, wr_id, IBV_WC_SUCCESS, IBV_WC_TM_MATCH, &tmh,
			    (uint32_t)need);
		return IBV_WC_SUCCESS;
	}
	/* EAGER: no other message takes the tag while its data lands (the
	 * copy may let the lock go) */
	g->busy = true;
	ret = msg_copy(x, m, t, false, &buf, 0, &m->local, sizeof(tmh), need);
	g->busy = false;
	if (m->lost)
		return lost_res(m);
	switch (ret) {
	case SV_COPY_SRC_FAULT:
		/* the requester's memory: the tag stays posted */
		return IBV_WC_LOC_PROT_ERR;
	case SV_COPY_DST_FAULT:
		if (sv_target_gone(t))
			return RES_NOACK;
		sv_tm_take(srq->tm, g);
		tm_complete(t, m, wr_id, IBV_WC_LOC_PROT_ERR, 0, &tmh, 0);
		return answer(t, SV_OUTCOME_RECV_ERR);
	default:
		break;
	}
	sv_tm_take(srq->tm, g);
	tm_complete(t, m, wr_id, IBV_WC_SUCCESS,
		    IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID, &tmh,
		    (uint32_t)need);
	return IBV_WC_SUCCESS;
}

/* A SEND, SEND_WITH_IMM or SEND_WITH_INV into t's receive queue. */
static inline __attribute__((always_inline)) int
deliver_send(struct sv_exec *x, struct sv_qp *t, struct msg *m)
{
	/* SEND_WITH_INV goes to an ordinary buffer even there (see
	 * docs/DESIGN.md "Tag matching") */
	if (unlikely(t->srq && t->srq->tm) &&
	    !(sv_op_flags(m->opcode) & SV_OPF_INV))
		return deliver_tm(x, t, m);
	return deliver_recv(x, t, m, IBV_WC_RECV);
}

/* deliver_write, deliver_read and deliver_atomic are inlined into
 * sv_loop_deliver, as they were into the requester before the two halves
 * became two files: GCC's stack-frame growth limit declines it otherwise,
 * and each WQE would pay some 30 instructions more (bench/budgets.sh,
 * engine_wqe_ir). */
static inline __attribute__((always_inline)) int
deliver_write(struct sv_exec *x, struct sv_qp *t, struct msg *m)
{
	const struct sv_send_wqe *h = &m->w->h;
	bool imm = (sv_op_flags(m->opcode) & SV_OPF_IMM) != 0;
	struct rspan rmem;
	struct rwqe r;
	int ret;

	if (!(t->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE))
		return answer(t, SV_OUTCOME_INV_REQ);
	if (imm) {
		ret = rq_next(t, &r, m);
		if (ret)
			return ret;
	}
	if (m->len) {
		if (!sv_span_remote(&rmem, h->rkey, t, h->remote_addr,
				 m->len, IBV_ACCESS_REMOTE_WRITE))
			return answer(t, SV_OUTCOME_ACCESS);
		ret = msg_copy(x, m, t, imm, &rmem.s, 0, &m->local, 0, m->len);
		if (m->lost)
			return lost_res(m);
		switch (ret) {
		case SV_COPY_SRC_FAULT:
			return IBV_WC_LOC_PROT_ERR;
		case SV_COPY_DST_FAULT:
			return target_fault(t);
		default:
			break;
		}
	}
	if (imm)
		rq_complete(t, &r, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
			    m, (uint32_t)m->len);
	return IBV_WC_SUCCESS;
}

static inline __attribute__((always_inline)) int
deliver_read(struct sv_exec *x, struct sv_qp *t, struct msg *m)
{
	const struct sv_send_wqe *h = &m->w->h;
	struct rspan rmem;
	int ret;

	if (!(t->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ))
		return answer(t, SV_OUTCOME_INV_REQ);
	if (m->len) {
		if (!sv_span_remote(&rmem, h->rkey, t, h->remote_addr,
				 m->len, IBV_ACCESS_REMOTE_READ))
			return answer(t, SV_OUTCOME_ACCESS);
		ret = msg_copy(x, m, t, false, &m->local, 0, &rmem.s, 0, m->len);
		if (m->lost)
			return lost_res(m);
		switch (ret) {
		case SV_COPY_SRC_FAULT:
			return target_fault(t);
		case SV_COPY_DST_FAULT:
			return IBV_WC_LOC_PROT_ERR;
		default:
			break;
		}
	}
	/* RDMA_READ_INV: the requester's own step, once the data has landed
	 * (here, where only READs pay for the test) */
	if (sv_op_flags(m->opcode) & SV_OPF_LINV)
		return sv_loop_local_inv(x, m->qp, h->imm);
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

static inline __attribute__((always_inline)) int
deliver_atomic(struct sv_exec *x, struct sv_qp *t, struct msg *m)
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
		return answer(t, SV_OUTCOME_INV_REQ);
	if (!sv_span_remote(&rmem, rkey, t, h->remote_addr,
			 sizeof(uint64_t), IBV_ACCESS_REMOTE_ATOMIC))
		return answer(t, SV_OUTCOME_ACCESS);
	sv_span_raw(&lmem, &orig, sizeof(orig));
	sv_span_raw(&vmem, &val, sizeof(val));
	/* atomic with respect to every other atomic: we hold sv_dev.lock */
	if (sv_span_copy(x, &lmem, 0, &rmem.s, 0, sizeof(orig)) != SV_COPY_OK)
		return target_fault(t);
	store = sv_atomic_apply(&op, orig, &val);
	if (store && sv_span_copy(x, &rmem.s, 0, &vmem, 0, sizeof(val)) !=
	    SV_COPY_OK)
		return target_fault(t);
	if (sv_span_copy(x, &m->local, 0, &lmem, 0, sizeof(orig)) != SV_COPY_OK)
		return IBV_WC_LOC_PROT_ERR;
	return IBV_WC_SUCCESS;
}

/* ATOMIC WRITE (IBTA 1.5, issue 23): the WQE's 8 bytes stored at once at an
 * aligned address, under sv_dev.lock like every atomic (so no atomic of the
 * device sees half of it). The rights are a WRITE's, as rxe asks. */
static inline __attribute__((always_inline)) int
deliver_atomic_write(struct sv_exec *x, struct sv_qp *t, struct msg *m)
{
	const struct sv_send_wqe *h = &m->w->h;
	uint64_t val = h->atomic.swap;
	struct rspan rmem;
	struct span vmem;

	if (!(t->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE) ||
	    (h->remote_addr & 7))
		return answer(t, SV_OUTCOME_INV_REQ);
	if (!sv_span_remote(&rmem, h->rkey, t, h->remote_addr,
			    sizeof(uint64_t), IBV_ACCESS_REMOTE_WRITE))
		return answer(t, SV_OUTCOME_ACCESS);
	sv_span_raw(&vmem, &val, sizeof(val));
	if (sv_span_copy(x, &rmem.s, 0, &vmem, 0, sizeof(val)) != SV_COPY_OK)
		return target_fault(t);
	return IBV_WC_SUCCESS;
}

/* RDMA FLUSH (IBTA 1.5, as rxe; the checks: sv_flush_run): the range or
 * MR, the placement type and the selectivity are in the WQE. What this
 * device placed is placed already (copies under the lock, or unlocked
 * ones that finished before their WQE completed), so it is answered at
 * once. */
static inline __attribute__((always_inline)) int
deliver_flush(struct sv_qp *t, struct msg *m)
{
	const struct sv_send_wqe *h = &m->w->h;

	return answer(t, sv_flush_run(t, SV_FLUSH_WQE_TYPE(h->atomic.swap),
				      SV_FLUSH_WQE_LEVEL(h->atomic.swap),
				      h->rkey, h->remote_addr,
				      h->atomic.compare_add));
}

/*
 * The responder: hand message m to the QP it is addressed to. Returns the
 * requester's completion status, RES_RNR or RES_NOACK, as an RC requester
 * would see it (the caller turns remote trouble into success for UC/UD).
 * Everything the target sees (receive completions, its state, its events)
 * happens here.
 */
int sv_loop_deliver(struct sv_exec *x, struct msg *m)
{
	struct sv_qp *qp = m->qp, *t;
	uint32_t f = sv_op_flags(m->opcode);

	if (qp->type == IBV_QPT_UD) {
		const struct sv_send_wqe *h = &m->w->h;
		uint32_t qkey = sv_ud_qkey(qp, h);

		t = sv_qp_lookup(h->remote_qpn & SV_QPN_MASK);
		if (!t || t->type != IBV_QPT_UD || !sv_qp_can_receive(t) ||
		    t->attr.qkey != qkey)
			return IBV_WC_SUCCESS;  /* a datagram is just lost */
	} else {
		t = sv_qp_lookup(qp->attr.dest_qp_num);
		/* a connected responder takes only its own peer's packets */
		if (!t || t->type != (qp->type == IBV_QPT_XRC_SEND ?
				      IBV_QPT_XRC_RECV : qp->type) ||
		    !sv_qp_can_receive(t) || t->attr.dest_qp_num != qp->qpn)
			return RES_NOACK;
		/* XRC: the SRQ the message names, of the target's domain */
		if (unlikely(qp->type == IBV_QPT_XRC_SEND) &&
		    !sv_xrc_bind(t, m->w->h.remote_qpn))
			return answer(t, SV_OUTCOME_NO_SRQ);
	}
	sv_comm_est(t);
	if (unlikely(t->inj_lose | sv_inj_wide) && sv_inject_lose_take(t))
		return RES_NOACK;       /* softverbs inject: lost on the way */
	if (unlikely(t->inj_rnr | t->inj_access | sv_inj_wide) &&
	    qp->type != IBV_QPT_UD) {
		/* softverbs inject: an RNR NAK for a message that takes a
		 * receive WQE, a remote access error for an RDMA request */
		bool recv = (f & (SV_OPF_SEND | SV_OPF_IMM)) != 0;

		if (recv && sv_inject_resp(t, true)) {
			m->rnr_ns = sv_rnr_timer_ns(t->attr.min_rnr_timer);
			return RES_RNR;
		}
		if ((f & SV_OPF_REMOTE) && sv_inject_resp(t, false))
			return answer(t, SV_OUTCOME_ACCESS);
	}
	sv_dev.lo_msgs++;
	sv_dev.lo_bytes += m->len;
	/* what the message does, by its flags (abi/sv_op.h) */
	if (f & SV_OPF_SEND)
		return deliver_send(x, t, m);
	if (f & SV_OPF_PAYLOAD)
		return deliver_write(x, t, m);
	if (f & SV_OPF_READ)
		return deliver_read(x, t, m);
	if (f & SV_OPF_AWRITE)
		return deliver_atomic_write(x, t, m);
	if (f & SV_OPF_FLUSH)
		return deliver_flush(t, m);
	return deliver_atomic(x, t, m);
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
__attribute__((noinline)) int sv_loop_mcast(struct sv_exec *x, struct msg *m,
					   uint32_t f)
{
	struct sv_qp *qp = m->qp;
	const struct sv_send_wqe *h = &m->w->h;
	uint32_t qkey = sv_ud_qkey(qp, h);
	const struct sv_mcast_grp *g;

	if ((h->remote_qpn & SV_QPN_MASK) != SV_MCAST_QPN)
		return IBV_WC_SUCCESS;  /* nobody takes it: lost */
	g = sv_mcast_find(m->ah->attr.dgid);
	for (uint32_t i = 0; g && i < g->nqp; i++) {
		struct sv_qp *t = g->qp[i];

		if (t == qp &&
		    (qp->create_flags & IBV_QP_CREATE_BLOCK_SELF_MCAST_LB))
			continue;
		if (t->dead || t->type != IBV_QPT_UD || !sv_qp_can_receive(t) ||
		    t->attr.qkey != qkey)
			continue;
		if (deliver_send(x, t, m) == RES_LOST)
			return RES_LOST;
	}
	if (sv_roce_running())
		return sv_roce_transport.ud_send(x, qp, m->ah, SV_MCAST_QPN, qkey,
			(f & SV_OPF_IMM) != 0, h->imm,
			(h->flags & IBV_SEND_SOLICITED) != 0, &m->local,
			m->len);
	return IBV_WC_SUCCESS;
}
