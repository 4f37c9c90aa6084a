/* SPDX-License-Identifier: MIT */
/*
 * What WQE execution shares among its parts, whichever transport carries
 * the message: the dispatcher (exec.c), the same-host requester and
 * responder (loop/req.c, loop/resp.c) and the RoCEv2 wire (src/device/roce/).
 * The private copies of WQEs, the resolved memory of a side of a copy
 * (span.c), and the work-queue plumbing (wq.c): QP state changes and
 * events, completions, the receive queue. Private to the daemon;
 * everything here runs under sv_dev.lock.
 */
#ifndef SV_DEVICE_EXEC_INT_H
#define SV_DEVICE_EXEC_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "abi/sv_qp.h"
#include "abi/sv_ring.h"
#include "device/ctl/direct.h"
#include "device/exec/engine.h"
#include "device/exec/keymap.h"
#include "device/exec/mm.h"
#include "device/exec/wq.h"
#include "device/roce/wire.h"
#include "device/sv_dev.h"

/* A send WQE copied out of its slot. */
struct swqe {
	struct sv_send_wqe h;
	union {
		struct sv_wqe_sge sge[SV_MAX_SGE];
		uint8_t data[SV_MAX_INLINE];
	} u;
};

/*
 * One side of a copy: the bytes of one process, as the pieces that keys
 * granted (struct sv_map: a range of an MR) or as one range of the daemon's
 * own memory (raw: inline data, a GRH, an atomic's operand).
 *
 * A piece of an MR over a page or block list may cover any number of runs
 * (up to SV_MAX_PAGE_LIST per MR, and SV_MAX_SGE pieces per side). When a
 * side is resolved, its pieces are also turned into iovecs, up to
 * SV_IOV_WINDOW of them (the caller's array): that is every byte of a side
 * over plain MRs or a few runs ("whole"), and the copy is then one
 * sv_mem_copy, as cheap as ever. Only a side that needs more is copied a
 * window at a time (struct round, on the stack), expanding its pieces with
 * sv_mr_iov as the copy goes: no cap, no allocation, nothing that grows with
 * the lists. (Scratch arrays sized for the worst case would take SV_MAX_SGE
 * * SV_MAX_PAGE_LIST iovecs, 32 MiB, per side and engine.)
 *
 * iovecs are made from an MR only under sv_dev.lock: its block array is the
 * daemon's, and fast register rewrites it once the MR is invalid. A copy
 * without the lock (msg_copy_unlocked) reads only its own iovecs; over
 * several windows it takes the lock back between two, and checks its keys
 * again (span_regrant): a grant that ended meanwhile stops the copy there,
 * as a fault of that side.
 */
struct span {
	struct sv_mem mem;         /* the bytes as iovecs, when `whole` */
	bool whole;                /* mem covers every byte (else: windows) */
	struct sv_map *map;        /* the pieces; NULL: raw */
	unsigned int nmap;
	struct iovec raw;          /* the daemon's memory (map NULL) */
	/* how SGEs were granted, to ask again (span_regrant; a remote range
	 * is asked again from its message) */
	const struct sv_wqe_sge *sge;   /* NULL: a remote range */
	uint32_t nsge;
	bool write;
	const struct sv_pd *pd;    /* the PD the SGEs' MRs must be of */
};

/* A receive WQE copied out, and what it resolves to. */
struct rwqe {
	struct sv_recv_wqe h;
	struct sv_wqe_sge sge[SV_MAX_SGE];
	struct sv_wq *wq;          /* the ring it came from */
	struct sv_srq *srq;        /* or NULL */
	struct sv_qp *claimed;     /* a WQE of srq claimed for this QP by a
				    * same-host sender (its dclaim), or NULL */
	struct sv_map map[SV_MAX_SGE];
	struct iovec iov[SV_IOV_WINDOW];
	struct span mem;
	uint64_t cap;              /* bytes the buffers hold */
};

/* The remote side of an RDMA or atomic operation. */
struct rspan {
	struct span s;
	struct sv_map map;
	struct iovec iov[SV_IOV_WINDOW];
};

/* ---- span.c: the memory of a side of a copy ---- */

static inline void sv_span_raw(struct span *s, void *p, size_t len)
{
	s->map = NULL;
	s->raw.iov_base = p;
	s->raw.iov_len = len;
	s->mem.pid = 0;
	s->mem.iov = &s->raw;
	s->mem.niov = 1;
	s->whole = true;
}

/* Resolve n local SGEs of pd into s (pieces in map, iovecs in iov): a
 * completion status, and *total their bytes. Zero-length SGEs are skipped
 * (no key is checked for them). */
uint32_t sv_span_sges(struct span *s, struct sv_map *map, struct iovec *iov,
		      const struct sv_wqe_sge *sge, uint32_t n,
		      const struct sv_pd *pd, bool write, uint64_t *total);

/* The responder t's memory that rkey grants for len bytes at addr with
 * access, into r. */
static inline __attribute__((always_inline)) bool
sv_span_remote(struct rspan *r, uint32_t rkey, const struct sv_qp *t,
	       uint64_t addr, uint64_t len, uint32_t access)
{
	struct span *s = &r->s;
	const struct sv_mr *mr;
	uint64_t done;

	if (!sv_rkey_map(rkey, t, addr, len, access, &r->map))
		return false;
	mr = r->map.mr;
	s->mem.iov = r->iov;
	s->mem.pid = r->map.pid;
	if (__builtin_expect(!mr->nblocks, 1)) {     /* map_iov's common case */
		r->iov[0].iov_base = (void *)(uintptr_t)(mr->addr + r->map.off);
		r->iov[0].iov_len = len;
		s->mem.niov = 1;
		s->whole = true;
	} else {
		s->mem.niov = sv_mr_iov(mr, r->map.off, len, r->iov,
					SV_IOV_WINDOW, &done);
		s->whole = done == len;
	}
	s->map = &r->map;
	s->nmap = 1;
	s->sge = NULL;
	return true;
}

/* A position in a span: the piece, and the byte in it. */
struct spos {
	unsigned int idx;
	uint64_t off;
};

/* Move p n bytes on; false past the end of s. */
bool sv_span_seek(const struct span *s, struct spos *p, uint64_t n);

/* One window of a copy: iovecs for the next bytes of one side. */
struct round {
	struct iovec v[SV_IOV_WINDOW];
	struct sv_mem mem;
};

/* The next window of a copy of left bytes from s at sp to d at dp: the
 * bytes both sides' iovecs cover, or 0 and *err (a side ran out). */
uint64_t sv_span_round(struct round *rs, const struct span *s, struct spos sp,
		       struct round *rd, const struct span *d, struct spos dp,
		       uint64_t left, int *err);
/* sv_span_copy of sides that are not whole: a window at a time. */
int sv_span_copy_windows(const struct sv_exec *x, const struct span *d,
			 uint64_t doff, const struct span *s, uint64_t soff,
			 uint64_t len);

/* Copy len bytes from byte soff of s to byte doff of d, under the lock. */
static inline int sv_span_copy(const struct sv_exec *x,
			       const struct span *d, uint64_t doff,
			       const struct span *s, uint64_t soff,
			       uint64_t len)
{
	if (__builtin_expect(d->whole && s->whole, 1))
		return sv_mem_copy(&d->mem, doff, &s->mem, soff, len,
				   x->bounce, x->bounce_bytes);
	return sv_span_copy_windows(x, d, doff, s, soff, len);
}

/* ---- wq.c: the outcome of a request at its responder ---- */

/*
 * What a responder makes of a request, whichever transport brought it,
 * and the one table (sv_outcome_tab, wq.c) that says what each outcome is
 * to everyone: the requester's completion status (for RNR, NOACK and SEQ,
 * once its retries are spent), the AETH syndrome that carries it on the
 * wire (RoCEv2), and the responder's QP: whether it goes to ERR, and the
 * async event that says why (0: none; for RECV_*, the receive WQE's own
 * error completion says why). The same-host responder (loop/resp.c) and
 * the wire's (roce/resp.c) answer with an outcome; the wire's completer
 * (roce/comp.c) turns a NAK back into the status (sv_nak_status).
 */
enum sv_outcome {
	SV_OUTCOME_OK,             /* done */
	SV_OUTCOME_RNR,            /* no receive WQE posted: RNR NAK (with the
				    * responder's timer), try again */
	SV_OUTCOME_NOACK,          /* no answer (the target gone, not ready,
				    * in error): the transport timeout */
	SV_OUTCOME_SEQ,            /* wire: a PSN ahead of the expected one */
	SV_OUTCOME_INV_REQ,        /* malformed, not allowed by the QP's
				    * access flags, or unsupported */
	SV_OUTCOME_ACCESS,         /* the rkey, its bounds or rights; the
				    * target's memory */
	SV_OUTCOME_RECV_LEN,       /* the receive WQE is too small (it
				    * completes with IBV_WC_LOC_LEN_ERR) */
	SV_OUTCOME_RECV_ERR,       /* the receive WQE failed otherwise (its
				    * buffers, its ring, a key it may not
				    * invalidate) */
	SV_OUTCOME_NO_SRQ,         /* XRC: no such SRQ in the target's domain
				    * (the target, which the domain shares,
				    * stays) */
	SV_OUTCOME_MAX
};

struct sv_outcome_info {
	const char *name;
	uint32_t status;           /* enum ibv_wc_status, at the requester */
	uint8_t aeth;              /* AETH syndrome; SV_AETH_NONE: no answer */
	uint32_t event;            /* enum ibv_event_type of the responder's
				    * QP as it goes to ERR; 0: none */
	bool qp_err;               /* the responder's QP goes to ERR */
};

extern const struct sv_outcome_info sv_outcome_tab[SV_OUTCOME_MAX];

static inline const struct sv_outcome_info *sv_outcome(enum sv_outcome o)
{
	return &sv_outcome_tab[o];
}

/*
 * RDMA FLUSH at responder t (IBTA 1.5, as Linux rxe's process_flush), the
 * one check of both transports (loop/resp.c, roce/resp.c): placement type
 * plt (SV_FLUSH_* bits), selectivity sel (SV_FLUSH_SEL_*), the range of
 * len bytes at va (RANGE; MR: any address of the MR, len ignored). A bad
 * type or selectivity is an invalid request; the rkey must grant the
 * FLUSH right of each type asked for over the range, as rxe's check_rkey.
 * No memory is persistent here (mm.c refuses FLUSH_PERSISTENT on MRs, as
 * rxe does for memory that is not pmem), so a PERSISTENT flush is a
 * remote access error. Placement is a system call that has returned, or a
 * store under sv_dev.lock: global visibility needs a fence only (rxe's
 * wmb). SV_OUTCOME_OK: done.
 */
static inline enum sv_outcome sv_flush_run(const struct sv_qp *t, uint32_t plt,
					   uint32_t sel, uint32_t rkey,
					   uint64_t va, uint64_t len)
{
	uint32_t access = 0;
	struct rspan r;

	if (!plt || (plt & ~(SV_FLUSH_GLOBAL | SV_FLUSH_PERSISTENT)) ||
	    sel > SV_FLUSH_SEL_MR)
		return SV_OUTCOME_INV_REQ;
	if (plt & SV_FLUSH_GLOBAL)
		access |= SV_ACCESS_FLUSH_GLOBAL;
	if (plt & SV_FLUSH_PERSISTENT)
		access |= SV_ACCESS_FLUSH_PERSISTENT;
	if (!sv_span_remote(&r, rkey, t, va, sel == SV_FLUSH_SEL_MR ? 0 : len,
			    access))
		return SV_OUTCOME_ACCESS;
	/* rxe's rxe_flush_pmem_iova on memory that is not persistent */
	if (plt & SV_FLUSH_PERSISTENT)
		return SV_OUTCOME_ACCESS;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return SV_OUTCOME_OK;
}

/* A FLUSH WQE's own checks at the requester (both transports): no SGE
 * nor inline data; a range no longer than a message (the RETH's length).
 * IBV_WC_SUCCESS: it may go. */
static inline uint32_t sv_flush_wqe_status(const struct sv_send_wqe *h)
{
	if (h->num_sge || (h->flags & IBV_SEND_INLINE))
		return IBV_WC_LOC_QP_OP_ERR;
	if (SV_FLUSH_WQE_LEVEL(h->atomic.swap) == SV_FLUSH_SEL_RANGE &&
	    h->atomic.compare_add > SV_MAX_MSG_SZ)
		return IBV_WC_LOC_LEN_ERR;
	return IBV_WC_SUCCESS;
}

/* The requester's completion status for a NAK of syndrome syn: the
 * status of the outcomes that send it; IBV_WC_REM_OP_ERR for one that
 * none sends (a reserved code, an invalid RD request). */
uint32_t sv_nak_status(uint8_t syn);

/* ---- wq.c: the work-queue plumbing ---- */

/* A reliable connection: RC, or XRC (here an XRC_SEND QP is only ever a
 * requester, an XRC_RECV one only a responder). */
static inline bool sv_qp_reliable(const struct sv_qp *qp)
{
	return qp->type == IBV_QPT_RC || qp->type == IBV_QPT_XRC_SEND ||
	       qp->type == IBV_QPT_XRC_RECV;
}

/* The QP goes to ERR; event (if not 0) says why. */
void sv_qp_error(struct sv_qp *qp, uint32_t event);
/* An async event of qp (to every process that has an XRC target open). */
void sv_qp_event(struct sv_qp *qp, uint32_t type);
/* May t take a message (in a state with a receive queue at work)?
 * (Inline, with sv_comm_est and sv_swqe_body: every WQE asks.) */
static inline bool sv_qp_can_receive(const struct sv_qp *t)
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
static inline void sv_comm_est(struct sv_qp *t)
{
	if (t->state == IBV_QPS_RTR && !t->comm_est_sent &&
	    t->type != IBV_QPT_UD) {
		t->comm_est_sent = true;
		sv_direct_qp(t);
		sv_qp_event(t, IBV_EVENT_COMM_EST);
	}
}
/* In SQD, with nothing left in flight: the drain is over (the
 * SQ_DRAINED event if asked for), once per SQD. */
void sv_sq_drained(struct sv_qp *qp);
/* A copy into or out of t's memory failed: did its process go away? */
bool sv_target_gone(const struct sv_qp *t);

/* A CQE of status and opcode (enum ibv_wc_opcode) for qpn, the rest 0. */
void sv_cqe_init(struct sv_cqe *e, uint64_t wr_id, uint32_t status,
		 uint32_t opcode, uint32_t qpn);
/* Push a CQE for qp into cq (NULL: none); an overrun puts qp in ERR. */
void sv_qp_push(struct sv_qp *qp, struct sv_cq *cq, const struct sv_cqe *e,
		bool solicited);

/* Copy the body of the head send WQE (its header is in w) from body, where
 * room bytes are (its slot, or the mailbox's copy): as much as the header
 * says, bounded by the QP's private limits. false: the WQE is malformed. */
static inline bool sv_swqe_body(const struct sv_qp *qp, struct swqe *w,
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
/* Finish the head WQE of qp's SQ (w its copy) with status; errors move the
 * QP to ERR (RC, XRC) or SQE. */
void sv_sq_complete(struct sv_qp *qp, const struct swqe *w, uint32_t status,
		    uint64_t len);

/* The responder's receive queue: look at the next receive WQE of t (0,
 * -ENOENT none, -EIO the ring is corrupt: t is in ERR already), resolve
 * its buffers (a completion status), take it off the ring. */
int sv_rq_peek(struct sv_qp *t, struct rwqe *r);
uint32_t sv_rq_resolve(struct sv_qp *t, struct rwqe *r);
void sv_rq_commit(struct rwqe *r);
/* srq below its armed limit: IBV_EVENT_SRQ_LIMIT_REACHED, disarmed */
void sv_srq_limit_check(struct sv_srq *srq);
/* The WQE a same-host sender claimed for qp and never filled, flushed */
void sv_rq_flush_claim(struct sv_qp *qp);

/* The CQ of a receive at t from r: an XRC SRQ's own, else t's. */
static inline struct sv_cq *sv_recv_cq(const struct sv_qp *t,
				       const struct rwqe *r)
{
	return r->srq && r->srq->cq ? r->srq->cq : t->recv_cq;
}

/* Flush the head WQE of qp's send queue, or of its own receive queue
 * (IBV_WC_WR_FLUSH_ERR). */
void sv_sq_flush_one(struct sv_qp *qp);
void sv_rq_flush_one(struct sv_qp *qp);

/* exec.c: run the head send WQE on the same-host path (a wire QP's local
 * operations: LOCAL_INV, BIND_MW, FAST_REG_MR). true if it ran. */
bool sv_exec_local_head(struct sv_exec *x, struct sv_qp *qp);

#endif
