/* SPDX-License-Identifier: MIT */
/*
 * What the library's CQ files share: the CQ lock, the counters of the
 * daemon's ring and of the private ring, and a dead device's flushes on an
 * empty poll. Static inline, so that each poll path inlines them as it did
 * when the three files were one (sv_poll_cq's instruction budget, issue
 * 22; bench/budgets.sh).
 *
 *   cq.c      polling: the fast path, the merge with the private ring, a
 *             dead device's flushes, clean, arm (notify)
 *   cq_ex.c   the extended polling API: ibv_cq_ex's start_poll,
 *             next_poll, end_poll and read_* ops
 *   cq_ctl.c  create, resize, destroy
 */
#ifndef SV_VERBS_CQ_INT_H
#define SV_VERBS_CQ_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "abi/sv_lock.h"
#include "verbs/sv_verbs.h"

/* The CQ lock (sv_lock.h), unless the CQ was made single-threaded. */
static inline void cq_spin_init(struct sv_cq *cq)
{
	sv_spin_init(&cq->lock);
}

static inline void cq_lock(struct sv_cq *cq)
{
	if (!cq->single_threaded)
		sv_spin_lock(&cq->lock);
}

static inline void cq_unlock(struct sv_cq *cq)
{
	if (!cq->single_threaded)
		sv_spin_unlock(&cq->lock);
}

static inline uint32_t cq_avail(struct sv_cq *cq)
{
	/* acquire: pairs with the engine's release store of prod */
	uint32_t n = __atomic_load_n(&cq->ring->prod, __ATOMIC_ACQUIRE) -
		     cq->cons;

	return n > cq->entries ? cq->entries : n;
}

static inline void cq_consume(struct sv_cq *cq, uint32_t n)
{
	cq->cons += n;
	/* release: the engine may reuse the slots only after we read them */
	__atomic_store_n(&cq->ring->cons, cq->cons, __ATOMIC_RELEASE);
}

/* ---- a dead device drains (cq.c) ---- */

/* An empty poll on a dead device: the flush completions due (CQ lock
 * held). Out of line: the live fast path pays one load and a branch. */
void sv_cq_flush_dead(struct sv_cq *cq) __attribute__((cold));

/* Completions ready to poll (CQ lock held); on a dead device an empty CQ
 * first gets the flushes due. */
static inline uint32_t cq_ready(struct sv_cq *cq)
{
	uint32_t n = cq_avail(cq);

	if (unlikely(!n) && unlikely(sv_ctx_dead(cq->ex.context))) {
		sv_cq_flush_dead(cq);
		n = cq_avail(cq);
	}
	return n;
}

/* ---- the private ring (cq.c, "the private ring") ---- */

/* Completions waiting in the private ring, a look without the CQ lock
 * (sv_poll_cq's first): dcons changes under the lock, stored atomically,
 * so it is loaded atomically here (relaxed: a plain move on x86). */
static inline uint32_t dring_avail(const struct sv_cq *cq)
{
	/* acquire: pairs with the producer's release store of dprod */
	return __atomic_load_n(&cq->dprod, __ATOMIC_ACQUIRE) -
	       __atomic_load_n(&cq->dcons, __ATOMIC_RELAXED);
}

/* The same with the CQ lock held: no other thread writes dcons. */
static inline uint32_t dring_avail_locked(const struct sv_cq *cq)
{
	return __atomic_load_n(&cq->dprod, __ATOMIC_ACQUIRE) - cq->dcons;
}

/* n completions of the private ring were read: their slots go back. */
static inline void dring_consume(struct sv_cq *cq, uint32_t n)
{
	/* the lock orders our reads of the slots before their reuse */
	sv_spin_lock(&cq->dlock);
	__atomic_store_n(&cq->dcons, cq->dcons + n, __ATOMIC_RELAXED);
	cq->dheld -= n;
	__atomic_store_n(&cq->ring->dused, cq->dheld, __ATOMIC_RELAXED);
	sv_spin_unlock(&cq->dlock);
}

/* Has one of the CQ's QPs a completion side, where senders of this host
 * put completions (sv_direct_xdrain)? A plain load of the list, which the
 * compiler folds into sv_poll_cq's first test (issue 22's budget); the
 * list changes under the CQ lock, which the caller holds. */
static inline uintptr_t xsides(const struct sv_cq *cq)
{
	return (uintptr_t)cq->xqps;
}

/* ... and did a sender put one there since poll took the last? By the
 * head slot's number (SV_XCQE_SEQ), and once in 256 looks by the words. */
static inline bool xnews(struct sv_cq *cq)
{
	for (const struct sv_qp *qp = cq->xqps; unlikely(qp != NULL);
	     qp = qp->xnext)
		if (__atomic_load_n(&SV_XCQE_SEQ(&qp->xring[qp->xcons &
							   qp->xmask]),
				    __ATOMIC_ACQUIRE) == qp->xcons + 1)
			return true;
	if (cq->xlook)
		return true;
	if (!cq->xqps || (++cq->xlooks & 255))
		return false;
	return sv_direct_xwords(cq);
}

/* May the private ring's completion at dcons + i go now: has our consumer
 * counter of the daemon's ring reached its stamp? (CQ lock held) */
static inline bool dring_due(const struct sv_cq *cq, uint32_t i)
{
	return (int32_t)(cq->cons - cq->dstamp[(cq->dcons + i) & cq->dmask]) >=
	       0;
}

/* cq_ex.c: ex's polling ops (start/next/end_poll, read_*) */
void sv_cq_set_ex_ops(struct ibv_cq_ex *ex);

#endif
