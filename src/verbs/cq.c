// SPDX-License-Identifier: MIT
/*
 * Completion queues: a ring the daemon writes and the library reads.
 *
 * Polling touches only shared memory: an acquire load of the device's
 * producer counter (pairs with the engine's release store after it wrote the
 * CQE), copies, then a release store of our consumer counter (pairs with the
 * engine's acquire load before it reuses a slot). No system call, no
 * allocation; a spinlock unless the CQ was created single-threaded
 * (IBV_CREATE_CQ_ATTR_SINGLE_THREADED, a parent domain with a thread domain,
 * or a resource domain whose thread model is not SAFE). On a parent domain
 * with allocator callbacks the ring is mapped over a block they gave (td.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "abi/sv_lock.h"
#include "abi/sv_op.h"
#include "verbs/sv_verbs.h"

#define SV_CQ_WC_FLAGS_SUPPORTED                                             \
	(IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |       \
	 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK | IBV_WC_EX_WITH_TM_INFO)

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

/* A CQE is laid out as the head of struct ibv_wc: one copy of 48 bytes
 * (the last two are padding in both). */
_Static_assert(sizeof(struct ibv_wc) == 48, "ibv_wc");
_Static_assert(sizeof(struct sv_cqe) >= 48, "cqe");
#define SAME_FIELD(f)                                                        \
	_Static_assert(offsetof(struct ibv_wc, f) ==                         \
			       offsetof(struct sv_cqe, f) &&                 \
		       sizeof(((struct ibv_wc *)0)->f) ==                    \
			       sizeof(((struct sv_cqe *)0)->f),              \
		       "cqe field " #f)
SAME_FIELD(wr_id);
SAME_FIELD(status);
SAME_FIELD(opcode);
SAME_FIELD(vendor_err);
SAME_FIELD(byte_len);
SAME_FIELD(imm_data);
SAME_FIELD(qp_num);
SAME_FIELD(src_qp);
SAME_FIELD(wc_flags);
SAME_FIELD(pkey_index);
SAME_FIELD(slid);
SAME_FIELD(sl);
SAME_FIELD(dlid_path_bits);
_Static_assert(offsetof(struct ibv_wc, dlid_path_bits) + 1 == 46 &&
	       offsetof(struct sv_cqe, dev_flags) == 46, "cqe tail");

static inline void cqe_to_wc(const struct sv_cqe *e, struct ibv_wc *wc)
{
	memcpy(wc, e, sizeof(*wc));
}

/*
 * ---- a dead device drains ----
 *
 * Once the library knows the daemon is gone (sv_ctx_dead: a command, the
 * async socket or a channel found it), nobody else produces into the CQ
 * rings, and the library completes, as a NIC in its fatal state does, every
 * WQE posted and never completed with IBV_WC_WR_FLUSH_ERR: those between the
 * device's consumer counter and the published producer counter of each send
 * ring and receive ring (not an SRQ's: its WQEs belong to no QP, hence to no
 * CQ; they go with the SRQ). The work is done by a poll that finds its CQ
 * empty, as much as the CQ has room for, under the CQ's lock: each ring is
 * flushed into one CQ (its QP's send or receive CQ), so the CQ lock orders
 * the flushes of a ring. The QPs are found on the context's list, under its
 * lock, which destroy takes to unlink them before unmapping their rings.
 * docs/DESIGN.md "A dead device drains".
 */

/* The completion opcode of a send WQE's opcode (enum ibv_wr_opcode or
 * SV_WR_*; softverbs.h's IBV_EXP_WC_* for the device's own). */
static uint32_t flush_opcode(uint32_t wr_opcode)
{
	return sv_op_wc(wr_opcode);
}

/* WQEs of wq still to flush: those the device never finished. */
static uint32_t wq_unfinished(const struct sv_wq *wq)
{
	uint32_t n;

	if (!wq->hdr || !wq->entries)
		return 0;
	/* acquire: pairs with the poster's release store of prod */
	n = __atomic_load_n(&wq->hdr->prod, __ATOMIC_ACQUIRE) -
	    __atomic_load_n(&wq->hdr->cons, __ATOMIC_ACQUIRE);
	return n > wq->entries ? 0 : n; /* a ring that lies: nothing */
}

/* Complete up to room WQEs of wq with flush errors into cq's ring at
 * *prod: how many (CQ lock and context lock held). */
static uint32_t flush_wq(struct sv_cq *cq, uint32_t *prod, struct ibv_qp *qp,
			 struct sv_wq *wq, bool send, uint32_t room)
{
	uint32_t n = wq_unfinished(wq);
	uint32_t cons = __atomic_load_n(&wq->hdr->cons, __ATOMIC_RELAXED);
	struct timespec ts;

	if (n > room)
		n = room;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	for (uint32_t i = 0; i < n; i++) {
		const void *slot = sv_wq_slot(wq->hdr, wq->entries, wq->stride,
					      cons + i);
		struct sv_cqe *e = sv_cq_slot(cq->ring, cq->entries, *prod);

		memset(e, 0, sizeof(*e));
		if (send) {
			const struct sv_send_wqe *w = slot;

			e->wr_id = w->wr_id;
			e->opcode = flush_opcode(w->opcode);
		} else {
			e->wr_id = ((const struct sv_recv_wqe *)slot)->wr_id;
			e->opcode = IBV_WC_RECV;
		}
		e->status = IBV_WC_WR_FLUSH_ERR;
		e->qp_num = qp->qp_num;
		e->timestamp = (uint64_t)ts.tv_sec * 1000000000ull +
			       (uint64_t)ts.tv_nsec;
		(*prod)++;
	}
	/* the device's counter, now ours: these WQEs are done */
	__atomic_store_n(&wq->hdr->cons, cons + n, __ATOMIC_RELEASE);
	return n;
}

/* The QPs of ctx that complete into cq: for each, its rings flushed into
 * cq (flush) or whether one has WQEs to flush (!flush). Context lock held. */
static uint32_t cq_dead_walk(struct sv_context *ctx, struct sv_cq *cq,
			     bool flush)
{
	struct ibv_cq *ibcq = ibv_cq_ex_to_cq(&cq->ex);
	uint32_t prod = __atomic_load_n(&cq->ring->prod, __ATOMIC_ACQUIRE);
	uint32_t used = prod - cq->cons, room, done = 0;

	room = used >= cq->entries ? 0 : cq->entries - used;
	for (struct sv_evtarget *t = ctx->evtargets; t; t = t->next) {
		struct ibv_qp *ibqp = t->obj;
		struct sv_qp *qp = to_sv_qp(ibqp);

		if (t->kind != SV_EVT_QP)
			continue;
		if (!flush) {
			if ((ibqp->send_cq == ibcq && wq_unfinished(&qp->sq)) ||
			    (ibqp->recv_cq == ibcq && !ibqp->srq &&
			     wq_unfinished(&qp->rq)))
				return 1;
			continue;
		}
		if (ibqp->send_cq == ibcq && done < room)
			done += flush_wq(cq, &prod, ibqp, &qp->sq, true,
					 room - done);
		if (ibqp->recv_cq == ibcq && !ibqp->srq && done < room)
			done += flush_wq(cq, &prod, ibqp, &qp->rq, false,
					 room - done);
	}
	if (done)
		/* release: the CQEs before the counter, for our own pollers */
		__atomic_store_n(&cq->ring->prod, prod, __ATOMIC_RELEASE);
	return done;
}

/* An empty poll on a dead device: the flush completions due (CQ lock
 * held). Out of line: the live fast path pays one load and a branch. */
static __attribute__((noinline, cold)) void cq_flush_dead(struct sv_cq *cq)
{
	struct sv_context *ctx = to_sv_ctx(cq->ex.context);

	pthread_mutex_lock(&ctx->lock);
	cq_dead_walk(ctx, cq, true);
	pthread_mutex_unlock(&ctx->lock);
}

/* Completions ready to poll (CQ lock held); on a dead device an empty CQ
 * first gets the flushes due. */
static inline uint32_t cq_ready(struct sv_cq *cq)
{
	uint32_t n = cq_avail(cq);

	if (unlikely(!n) && unlikely(sv_ctx_dead(cq->ex.context))) {
		cq_flush_dead(cq);
		n = cq_avail(cq);
	}
	return n;
}

struct sv_cq *sv_cq_dead_event(struct sv_context *ctx,
			       struct ibv_comp_channel *channel)
{
	struct sv_cq *cq;

	pthread_mutex_lock(&ctx->lock);
	for (cq = ctx->cqs; cq; cq = cq->next) {
		uint32_t sn = __atomic_load_n(&cq->arm_sn, __ATOMIC_RELAXED);

		if (cq->ex.channel != channel || cq->dead_arm_sn == sn)
			continue;
		if (__atomic_load_n(&cq->ring->prod, __ATOMIC_ACQUIRE) !=
			    __atomic_load_n(&cq->ring->cons, __ATOMIC_RELAXED) ||
		    cq_dead_walk(ctx, cq, false)) {
			cq->dead_arm_sn = sn; /* one event per arm */
			break;
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	return cq;
}

/*
 * ---- the private ring (direct.c) ----
 *
 * Completions of WRs the library ran itself. A WR goes direct only when
 * the daemon finished every WQE of its QP before it, and its completion
 * carries a stamp: the daemon ring's position past the last completion the
 * daemon wrote for the QP. The poller takes a private completion only once
 * its consumer counter reached the stamp, daemon completions first, so
 * each QP's completions come in posting order. Producers write a slot
 * under dlock once they hold a credit (dheld); the poller gives the
 * credits back after it read the slots.
 */

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

/* A sender of this host put completions in the completion ring of one of
 * the CQ's QPs (direct.c, sv_direct_xdrain): a look without the lock. */
static inline uint32_t xhint(const struct sv_cq *cq)
{
	/* a plain load, which the compiler folds into sv_poll_cq's first
	 * test (issue 22's budget): read once per call, of a word senders
	 * set through the kernel and our drain clears; the race with that
	 * clear is benign (a hint seen late is seen at the next poll). Under
	 * ThreadSanitizer the atomic load, as everywhere else. */
#if defined(__SANITIZE_THREAD__)
	return __atomic_load_n(&cq->xhint, __ATOMIC_RELAXED);
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
	return __atomic_load_n(&cq->xhint, __ATOMIC_RELAXED);
#else
	return cq->xhint;
#endif
#else
	return cq->xhint;
#endif
}

void sv_cq_xadd(struct sv_cq *cq, struct sv_qp *qp)
{
	cq_lock(cq);
	sv_spin_lock(&cq->dlock);
	qp->xnext = cq->xqps;
	cq->xqps = qp;
	sv_spin_unlock(&cq->dlock);
	cq_unlock(cq);
}

void sv_cq_xdel(struct sv_cq *cq, struct sv_qp *qp)
{
	cq_lock(cq);
	sv_spin_lock(&cq->dlock);
	for (struct sv_qp **pp = &cq->xqps; *pp; pp = &(*pp)->xnext)
		if (*pp == qp) {
			*pp = qp->xnext;
			break;
		}
	sv_spin_unlock(&cq->dlock);
	cq_unlock(cq);
}

/* May the private ring's completion at dcons + i go now: has our consumer
 * counter of the daemon's ring reached its stamp? (CQ lock held) */
static inline bool dring_due(const struct sv_cq *cq, uint32_t i)
{
	return (int32_t)(cq->cons - cq->dstamp[(cq->dcons + i) & cq->dmask]) >=
	       0;
}

/* Up to n completions of the private ring that are due into wc (force: the
 * first even if it is not): how many. */
static __attribute__((noinline)) uint32_t poll_dring(struct sv_cq *cq,
						     uint32_t n,
						     struct ibv_wc *wc,
						     bool force)
{
	uint32_t avail = dring_avail_locked(cq), i;

	if (avail > n)
		avail = n;
	for (i = 0; i < avail && ((force && !i) || dring_due(cq, i)); i++)
		cqe_to_wc(&cq->dring[(cq->dcons + i) & cq->dmask], &wc[i]);
	if (i)
		dring_consume(cq, i);
	return i;
}

/* The avail completions of the ring from cons into wc, their slots given
 * back to the engine (CQ lock held). */
static inline __attribute__((always_inline)) void
ring_take(struct sv_cq *cq, struct sv_cq_ring *ring, uint32_t cons,
	  uint32_t avail, struct ibv_wc *wc)
{
	const struct sv_cqe *slots =
		(const struct sv_cqe *)((char *)ring + SV_RING_HDR_BYTES);
	uint32_t mask = cq->entries - 1;

	for (uint32_t i = 0; i < avail; i++)
		cqe_to_wc(&slots[(cons + i) & mask], &wc[i]);
	cq->cons = cons + avail;
	/* release: the engine may reuse the slots only after we read them */
	__atomic_store_n(&ring->cons, cons + avail, __ATOMIC_RELEASE);
}

static int poll_cq(struct sv_cq *cq, int n, struct ibv_wc *wc);
static int poll_cq_locked(struct sv_cq *cq, int n, struct ibv_wc *wc,
			  uint32_t prod);

/*
 * Both rings merged (CQ lock held): each private completion after the
 * daemon's below its stamp, until n are taken or the private ring is
 * empty (the daemon's rest is the caller's). Daemon completions are taken
 * only below prod, loaded before the private ring was looked at (poll_cq).
 * A stamp the daemon's ring never reaches (none can: the daemon wrote up
 * to it before the poster read it) would not hold a completion back for
 * ever: it goes anyway.
 */
static __attribute__((noinline)) uint32_t poll_merged(struct sv_cq *cq,
						      uint32_t n,
						      struct ibv_wc *wc,
						      uint32_t prod)
{
	struct sv_cq_ring *ring = cq->ring;
	uint32_t got = 0, avail, upto, p2;
	unsigned int reloads = 0;

	while (got < n) {
		got += poll_dring(cq, n - got, wc + got, false);
		if (got == n)
			break;
		if (!dring_avail_locked(cq)) {
			/* completion rings' completions left behind (the
			 * private ring was full): in now, before the
			 * daemon's that follow them */
			if (!cq->xcapped)
				break;
			sv_direct_xdrain(cq);
			if (!dring_avail_locked(cq))
				break;
		}
		/* the daemon's completions below the next one's stamp */
		upto = cq->dstamp[cq->dcons & cq->dmask] - cq->cons;
		if (cq->xcapped && (int32_t)(cq->xcap - cq->cons) < (int32_t)upto)
			upto = (int32_t)(cq->xcap - cq->cons) > 0 ?
			       cq->xcap - cq->cons : 0;
		avail = prod - cq->cons;
		if (avail > cq->entries)
			avail = cq->entries;
		if (avail > upto)
			avail = upto;
		if (avail > n - got)
			avail = n - got;
		if (!avail) {
			/* the daemon's completions below the head's stamp
			 * were written before it was pushed: load prod again
			 * (and the completion rings after it, see
			 * sv_poll_cq) rather than take the head before them */
			p2 = __atomic_load_n(&ring->prod, __ATOMIC_ACQUIRE);
			if (p2 != prod && reloads++ < 8) {
				prod = p2;
				sv_direct_xdrain(cq);
				continue;
			}
			got += poll_dring(cq, n - got, wc + got, true);
			continue;
		}
		ring_take(cq, ring, cq->cons, avail, wc + got);
		got += avail;
	}
	return got;
}

/* A poll of the fast path below that takes more than one completion: the
 * copy loop lives here, so that a poll of one completion (the common case)
 * passes no loop, nor the padding that gcc 14 puts before a small loop it
 * aligns to a cache line (issue 22's budget). */
static __attribute__((noinline)) int poll_cq_many(struct sv_cq *cq,
						  struct sv_cq_ring *ring,
						  uint32_t cons, uint32_t avail,
						  struct ibv_wc *wc)
{
	ring_take(cq, ring, cons, avail, wc);
	cq_unlock(cq);
	return (int)avail;
}

/* Everything the fast path below leaves: a lock taken by another thread,
 * a dead device, a count no CQ holds. */
static __attribute__((noinline)) int poll_cq_slow(struct sv_cq *cq, int n,
						  struct ibv_wc *wc)
{
	return poll_cq(cq, n, wc);
}

/* ... and the private ring, with the lock held and prod loaded. */
static __attribute__((noinline)) int poll_cq_direct(struct sv_cq *cq, int n,
						    struct ibv_wc *wc,
						    uint32_t prod)
{
	return poll_cq_locked(cq, n, wc, prod);
}

/*
 * The common poll, with no call on its way but tail calls, so that it needs
 * no callee-saved register (issue 22's instruction budget): the ring's
 * completions under a lock that was free, or nothing.
 *
 * The private ring (and the hint of the completion rings) is looked at
 * after the daemon ring's prod is loaded (acquire): a direct completion
 * that must come before a daemon one (of a later WR of its QP) was
 * published before the daemon wrote that one, so a poll that sees the
 * daemon's sees it too, and merges (poll_cq).
 */
int sv_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct sv_cq *cq = to_sv_cq(ibcq);
	struct sv_cq_ring *ring;
	uint32_t avail, cons, prod;

	if (unlikely(n <= 0))
		return 0;
	if (!cq->single_threaded &&
	    unlikely(__atomic_exchange_n(&cq->lock, 1, __ATOMIC_ACQUIRE)))
		return poll_cq_slow(cq, n, wc);
	ring = cq->ring;
	cons = cq->cons;
	/* acquire: pairs with the engine's release store of prod */
	prod = __atomic_load_n(&ring->prod, __ATOMIC_ACQUIRE);
	avail = prod - cons;
	if (unlikely(dring_avail(cq) | xhint(cq)))
		return poll_cq_direct(cq, n, wc, prod);
	if (unlikely(avail - 1 >= cq->entries)) {
		/* none (or a producer count no CQ of this size holds) */
		bool plain = !avail && !sv_ctx_dead(cq->ex.context);

		cq_unlock(cq);
		return plain ? 0 : poll_cq_slow(cq, n, wc);
	}
	if (avail > (uint32_t)n)
		avail = (uint32_t)n;
	if (avail != 1)
		return poll_cq_many(cq, ring, cons, avail, wc);
	ring_take(cq, ring, cons, 1, wc);
	cq_unlock(cq);
	return 1;
}

static int poll_cq(struct sv_cq *cq, int n, struct ibv_wc *wc)
{
	if (unlikely(n <= 0))
		return 0;
	cq_lock(cq);
	/* acquire: pairs with the engine's release store of prod; before
	 * the look at the private ring (sv_poll_cq) */
	return poll_cq_locked(cq, n, wc,
			      __atomic_load_n(&cq->ring->prod,
					      __ATOMIC_ACQUIRE));
}

/* poll_cq with the lock held and the daemon ring's prod loaded: the
 * private ring merged in, then the daemon's completions below prod. */
static int poll_cq_locked(struct sv_cq *cq, int n, struct ibv_wc *wc,
			  uint32_t prod)
{
	struct sv_cq_ring *ring = cq->ring;
	uint32_t avail, got = 0;

	if (cq->dring) {
		if (unlikely(xhint(cq)))
			sv_direct_xdrain(cq);
		if (dring_avail_locked(cq)) {
			got = poll_merged(cq, (uint32_t)n, wc, prod);
			if (got == (uint32_t)n) {
				cq_unlock(cq);
				return n;
			}
			n -= (int)got;
			wc += got;
		}
	}
	avail = prod - cq->cons;
	if (unlikely(avail > cq->entries))
		avail = cq->entries;
	if (unlikely(!avail) && unlikely(sv_ctx_dead(cq->ex.context)))
		avail = cq_ready(cq);
	if (avail > (uint32_t)n)
		avail = (uint32_t)n;
	if (avail)
		ring_take(cq, ring, cq->cons, avail, wc);
	cq_unlock(cq);
	return (int)(got + avail);
}

/*
 * Drops the completions of one QP that are not polled yet: a QP moved to
 * RESET or destroyed leaves nothing behind in its CQs, as mlx4's and mlx5's
 * providers do (mlx5_cq_clean). Only the slots between our consumer counter
 * and the producer counter we read are touched, which the engine never
 * writes again: the survivors move up towards prod, then cons passes the
 * freed slots (release: the engine reuses them only after the moves). The
 * caller made sure the daemon produces nothing more for the QP. Returns how
 * many it dropped.
 */
uint32_t sv_cq_clean(struct ibv_cq *ibcq, uint32_t qp_num)
{
	struct sv_cq *cq = to_sv_cq(ibcq);
	uint32_t n, cons, prod, freed = 0, dropped;
	struct sv_cqe *e;

	cq_lock(cq);
	cons = cq->cons;
	n = cq_avail(cq);
	while (n--) {
		e = sv_cq_slot(cq->ring, cq->entries, cons + n);
		if (e->qp_num == qp_num)
			freed++;
		else if (freed)
			*sv_cq_slot(cq->ring, cq->entries, cons + n + freed) =
				*e;
	}
	if (freed)
		cq_consume(cq, freed);
	dropped = freed;
	if (cq->dring) {
		/* and the private ring's, the producers held off meanwhile */
		sv_spin_lock(&cq->dlock);
		cons = cq->dcons;
		n = cq->dprod - cons;
		freed = 0;
		while (n--) {
			e = &cq->dring[(cons + n) & cq->dmask];
			if (e->qp_num == qp_num) {
				freed++;
			} else if (freed) {
				uint32_t to = (cons + n + freed) & cq->dmask;

				cq->dring[to] = *e;
				cq->dstamp[to] =
					cq->dstamp[(cons + n) & cq->dmask];
			}
		}
		/* the daemon's completions that stay moved up by at most
		 * the number dropped: each stamp moves as far (never past
		 * the producer), so nothing it held back gets ahead */
		prod = __atomic_load_n(&cq->ring->prod, __ATOMIC_ACQUIRE);
		for (uint32_t i = 0; dropped && i < cq->dprod - cons; i++) {
			uint32_t *st = &cq->dstamp[(cons + i) & cq->dmask];

			*st = sv_stamp_clamp(*st + dropped, prod);
		}
		dropped += freed;
		if (freed) {
			__atomic_store_n(&cq->dcons, cq->dcons + freed,
					 __ATOMIC_RELAXED);
			cq->dheld -= freed;
			__atomic_store_n(&cq->ring->dused, cq->dheld,
					 __ATOMIC_RELAXED);
		}
		sv_spin_unlock(&cq->dlock);
	}
	cq_unlock(cq);
	return dropped;
}

/* Would a completion not polled yet fire this arm? */
static bool cq_arm_due(struct sv_cq *cq, int solicited_only)
{
	uint32_t prod = __atomic_load_n(&cq->ring->prod, __ATOMIC_ACQUIRE);
	uint32_t n = prod - cq->cons;

	if (!n)
		return false;
	if (!solicited_only)
		return true;
	if (n > cq->entries)
		n = cq->entries;
	for (uint32_t i = 0; i < n; i++) {
		const struct sv_cqe *e = sv_cq_slot(cq->ring, cq->entries,
						    cq->cons + i);

		if ((e->dev_flags & SV_CQE_F_SOLICITED) ||
		    e->status != IBV_WC_SUCCESS)
			return true;
	}
	return false;
}

/*
 * Arm: the next completion (or the next solicited one) sends an event on
 * the CQ's channel. A completion already in the CQ and not polled fires
 * the arm at once if no event announced it: UCX arms after its last poll
 * found nothing and then sleeps, so a completion that arrived between the
 * two must wake it; perftest's -e re-arms the CQ that woke it before it
 * polls it, and must not be woken again for that completion (the device
 * decides, it knows what it announced). The common case, an empty CQ,
 * stays two stores and a fence; otherwise the device is asked (NOTIFY_CQ)
 * to send the event unless the engine sent it meanwhile.
 */
/* Completions of the private ring that no event announced, not polled
 * (a NEXT arm of a channel's CQ, after its fence): they are announced now
 * (dlock orders it with the posters, cq_arm_to_fire in direct.c). */
static bool dring_unannounced(struct sv_cq *cq, int solicited_only,
			      bool *solicited)
{
	uint32_t prod, from, i;
	bool due;

	*solicited = false;
	if (!cq->dring)
		return false;
	sv_direct_xdrain(cq);
	sv_spin_lock(&cq->dlock);
	prod = cq->dprod;
	due = prod != cq->dcons && prod != cq->dannounced;
	if (due && solicited_only) {
		/* a SOLICITED arm: a solicited message's (a direct SEND's)
		 * among those no event announced */
		from = (int32_t)(cq->dannounced - cq->dcons) > 0 ?
		       cq->dannounced : cq->dcons;
		for (i = from; i != prod; i++)
			if (cq->dring[i & cq->dmask].dev_flags &
			    SV_CQE_F_SOLICITED)
				break;
		due = *solicited = i != prod;
	}
	if (due)
		cq->dannounced = prod;
	sv_spin_unlock(&cq->dlock);
	return due;
}

int sv_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct sv_cq *cq = to_sv_cq(ibcq);
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	uint32_t sn;
	bool due, direct = false, sol = false;

	cq_lock(cq);
	cq->ring->arm_flags = solicited_only ? SV_CQ_ARM_SOLICITED :
					       SV_CQ_ARM_NEXT;
	/* release: the engine reads the flags after it sees the new arm_sn */
	sn = ++cq->arm_sn;
	__atomic_store_n(&cq->ring->arm_sn, sn, __ATOMIC_RELEASE);
	/* Dekker with the engine (store prod, fence, load arm_sn): either it
	 * sees this arm, or we see its CQE here */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	due = ibcq->channel && cq_arm_due(cq, solicited_only);
	/* the private ring's: successful WRITEs, READs and receives of
	 * direct SENDs (those fire a SOLICITED arm when solicited) */
	if (ibcq->channel && dring_unannounced(cq, solicited_only, &sol))
		due = direct = true;
	cq_unlock(cq);
	/* a dead device: the arm stays ours, and a channel's reader learns
	 * of the completions due when the channel reads EOF (events.c) */
	if (!due || sv_ctx_dead(ibcq->context))
		return 0;
	sv_cmd_init(&cmd, SV_CMD_NOTIFY_CQ);
	cmd.u.notify_cq.cq = cq->handle;
	cmd.u.notify_cq.arm_sn = sn;
	cmd.u.notify_cq.flags = (direct ? SV_NOTIFY_DIRECT : 0) |
				(sol ? SV_NOTIFY_SOLICITED : 0);
	return -sv_conn_call(&to_sv_ctx(ibcq->context)->conn, &cmd, -1, &rsp,
			     NULL);
}

int sv_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr)
{
	(void)cq;
	(void)attr;
	return EOPNOTSUPP; /* no completion moderation yet */
}

/* ---- the extended polling API ---- */

static inline struct sv_cq *ex_to_sv(struct ibv_cq_ex *ex)
{
	return (struct sv_cq *)ex;
}

/* The next completion to read, from the private ring first (see
 * sv_poll_cq): false when there is none. */
static inline bool ex_load(struct sv_cq *cq)
{
	/* the daemon's first (acquire), then the private ring (see
	 * sv_poll_cq) */
	uint32_t ready = cq_ready(cq);

	if (unlikely(xhint(cq)))
		sv_direct_xdrain(cq);
	/* a head not due with none of the daemon's loaded: those below its
	 * stamp were written before it, loaded again (poll_merged) */
	if (unlikely(dring_avail_locked(cq)) && !ready && !dring_due(cq, 0)) {
		ready = cq_ready(cq);
		if (ready && xhint(cq))
			sv_direct_xdrain(cq);
	}
	/* the private ring's next, once the daemon's below its stamp are
	 * read (poll_merged) */
	if (unlikely(dring_avail_locked(cq)) &&
	    (dring_due(cq, 0) || !ready ||
	     (cq->xcapped && (int32_t)(cq->cons - cq->xcap) >= 0))) {
		cq->cur = &cq->dring[cq->dcons & cq->dmask];
		cq->cur_direct = true;
	} else if (ready) {
		cq->cur = sv_cq_slot(cq->ring, cq->entries, cq->cons);
		cq->cur_direct = false;
	} else {
		return false;
	}
	cq->ex.status = (enum ibv_wc_status)cq->cur->status;
	cq->ex.wr_id = cq->cur->wr_id;
	return true;
}

/* The completion read is consumed. */
static inline void ex_consume(struct sv_cq *cq)
{
	if (unlikely(cq->cur_direct))
		dring_consume(cq, 1);
	else
		cq_consume(cq, 1);
}

static int ex_start_poll(struct ibv_cq_ex *ex, struct ibv_poll_cq_attr *attr)
{
	struct sv_cq *cq = ex_to_sv(ex);

	if (attr && attr->comp_mask)
		return EINVAL;
	cq_lock(cq);
	if (!ex_load(cq)) {
		cq_unlock(cq);
		return ENOENT; /* and the caller must not call end_poll */
	}
	return 0;
}

static int ex_next_poll(struct ibv_cq_ex *ex)
{
	struct sv_cq *cq = ex_to_sv(ex);

	ex_consume(cq);
	if (!ex_load(cq)) {
		cq->cur = NULL;
		return ENOENT;
	}
	return 0;
}

static void ex_end_poll(struct ibv_cq_ex *ex)
{
	struct sv_cq *cq = ex_to_sv(ex);

	if (cq->cur)
		ex_consume(cq);
	cq->cur = NULL;
	cq_unlock(cq);
}

#define SV_EX_READER(name, type, expr)                                       \
	static type ex_read_##name(struct ibv_cq_ex *ex)                    \
	{                                                                    \
		const struct sv_cqe *e = ex_to_sv(ex)->cur;                  \
		return (type)(expr);                                         \
	}

SV_EX_READER(opcode, enum ibv_wc_opcode, e->opcode)
SV_EX_READER(vendor_err, uint32_t, e->vendor_err)
SV_EX_READER(byte_len, uint32_t, e->byte_len)
SV_EX_READER(imm_data, __be32, e->imm_data)
SV_EX_READER(qp_num, uint32_t, e->qp_num)
SV_EX_READER(src_qp, uint32_t, e->src_qp)
SV_EX_READER(wc_flags, unsigned int, e->wc_flags)
SV_EX_READER(slid, uint32_t, e->slid)
SV_EX_READER(sl, uint8_t, e->sl)
SV_EX_READER(dlid_path_bits, uint8_t, e->dlid_path_bits)
SV_EX_READER(completion_ts, uint64_t, e->timestamp)

static uint16_t ex_read_cvlan(struct ibv_cq_ex *ex)
{
	(void)ex;
	return 0; /* no VLANs on this device */
}

static uint32_t ex_read_flow_tag(struct ibv_cq_ex *ex)
{
	(void)ex;
	return 0; /* no flow steering */
}

static uint64_t ex_read_wallclock_ns(struct ibv_cq_ex *ex)
{
	/* CQE timestamps are CLOCK_MONOTONIC ns; translate to real time */
	struct timespec m, r;
	const struct sv_cqe *e = ex_to_sv(ex)->cur;

	clock_gettime(CLOCK_MONOTONIC, &m);
	clock_gettime(CLOCK_REALTIME, &r);
	return e->timestamp + ((uint64_t)r.tv_sec * 1000000000ull + r.tv_nsec) -
	       ((uint64_t)m.tv_sec * 1000000000ull + m.tv_nsec);
}

/* A receive that matched a tag (IBV_WC_TM_MATCH; a rendezvous left to
 * software too): its TMH's tag and app_ctx; any other completion: 0. */
static void ex_read_tm_info(struct ibv_cq_ex *ex, struct ibv_wc_tm_info *tm)
{
	const struct sv_cqe *e = ex_to_sv(ex)->cur;
	bool match = (e->status == IBV_WC_SUCCESS ||
		      e->status == IBV_WC_TM_RNDV_INCOMPLETE) &&
		     (e->wc_flags & IBV_WC_TM_MATCH);

	memset(tm, 0, sizeof(*tm));
	tm->tag = match ? e->tm_tag : 0;
	tm->priv = match ? e->tm_priv : 0;
}

static void set_ex_ops(struct ibv_cq_ex *ex)
{
	ex->start_poll = ex_start_poll;
	ex->next_poll = ex_next_poll;
	ex->end_poll = ex_end_poll;
	ex->read_opcode = ex_read_opcode;
	ex->read_vendor_err = ex_read_vendor_err;
	ex->read_byte_len = ex_read_byte_len;
	ex->read_imm_data = ex_read_imm_data;
	ex->read_qp_num = ex_read_qp_num;
	ex->read_src_qp = ex_read_src_qp;
	ex->read_wc_flags = ex_read_wc_flags;
	ex->read_slid = ex_read_slid;
	ex->read_sl = ex_read_sl;
	ex->read_dlid_path_bits = ex_read_dlid_path_bits;
	ex->read_completion_ts = ex_read_completion_ts;
	ex->read_cvlan = ex_read_cvlan;
	ex->read_flow_tag = ex_read_flow_tag;
	ex->read_tm_info = ex_read_tm_info;
	ex->read_completion_wallclock_ns = ex_read_wallclock_ns;
}

/* ---- create, resize, destroy ---- */

/* Map the ring of a create or resize response (in a block of the parent
 * domain's allocator, if the CQ was made on one that has it) and switch to
 * it, unmapping the ring it replaces. */
static int map_ring(struct sv_cq *cq, int fd, const struct sv_rsp_cq *r)
{
	struct sv_pd *pd = cq->parent ? to_sv_pd(cq->parent) : NULL;
	struct sv_ring_mem m;
	struct stat st;
	int ret;

	if (fd < 0 || r->ring_entries == 0 ||
	    (r->ring_entries & (r->ring_entries - 1)) ||
	    r->ring_bytes != sv_cq_ring_bytes(r->ring_entries) ||
	    r->ring_offset % 4096)
		return -EIO;
	/* at ring_offset of the memfd: a pool of rings */
	if (fstat(fd, &st))
		return -errno;
	if (r->ring_offset > (uint64_t)st.st_size ||
	    (uint64_t)st.st_size - r->ring_offset < r->ring_bytes)
		return -EIO;
	ret = sv_ring_map(&m, pd && pd->alloc ? pd : NULL, SV_RES_TYPE_CQ, fd,
			  r->ring_offset, r->ring_bytes);
	if (ret)
		return ret;
	sv_ring_unmap(&cq->mem);
	cq->mem = m;
	cq->ring = m.map;
	cq->ring_bytes = r->ring_bytes;
	cq->entries = r->ring_entries;
	cq->cons = __atomic_load_n(&cq->ring->cons, __ATOMIC_RELAXED);
	cq->arm_sn = cq->ring->arm_sn;
	cq->ex.cqe = (int)r->cqe;
	return 0;
}

static void ctx_add_cq(struct sv_context *ctx, struct sv_cq *cq)
{
	pthread_mutex_lock(&ctx->lock);
	cq->next = ctx->cqs;
	ctx->cqs = cq;
	pthread_mutex_unlock(&ctx->lock);
}

static void ctx_del_cq(struct sv_context *ctx, struct sv_cq *cq)
{
	pthread_mutex_lock(&ctx->lock);
	for (struct sv_cq **p = &ctx->cqs; *p; p = &(*p)->next) {
		if (*p == cq) {
			*p = cq->next;
			break;
		}
	}
	pthread_mutex_unlock(&ctx->lock);
}

struct ibv_cq_ex *sv_create_cq_ex(struct ibv_context *context,
				  struct ibv_cq_init_attr_ex *attr)
{
	return sv_create_cq_in(context, attr, NULL);
}

struct ibv_cq_ex *sv_create_cq_in(struct ibv_context *context,
				  struct ibv_cq_init_attr_ex *attr,
				  struct sv_res_domain *rd)
{
	struct sv_context *ctx = to_sv_ctx(context);
	struct sv_cq *cq;
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret, fd;

	if (attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS |
					  IBV_CQ_INIT_ATTR_MASK_PD))
		return sv_err_ptr(-EOPNOTSUPP);
	if (attr->wc_flags & ~(uint64_t)SV_CQ_WC_FLAGS_SUPPORTED)
		return sv_err_ptr(-EOPNOTSUPP);
	/* a CQ on a parent domain: single-threaded when it has a td */
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
	    (!attr->parent_domain || attr->parent_domain->context != context ||
	     !to_sv_pd(attr->parent_domain)->parent))
		return sv_err_ptr(-EINVAL);
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return sv_err_ptr(-ENOMEM);
	if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD)
		cq->parent = attr->parent_domain; /* its allocator, if any */
	sv_cmd_init(&cmd, SV_CMD_CREATE_CQ);
	cmd.u.create_cq.cookie = (uintptr_t)cq;
	cmd.u.create_cq.channel = attr->channel ?
		((struct sv_channel *)attr->channel)->handle : 0;
	cmd.u.create_cq.cqe = attr->cqe;
	cmd.u.create_cq.comp_vector = attr->comp_vector;
	if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS)
		cmd.u.create_cq.flags = attr->flags;
	ret = sv_conn_call(&ctx->conn, &cmd, -1, &rsp, &fd);
	if (ret)
		goto err_free;
	cq->handle = rsp.u.cq.handle;
	ret = map_ring(cq, fd, &rsp.u.cq);
	if (fd >= 0)
		close(fd);
	if (ret)
		goto err_destroy;
	cq->ex_flags = (uint32_t)attr->wc_flags;
	cq->single_threaded =
		((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
		 (attr->flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED)) ||
		((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
		 sv_pd_single_threaded(attr->parent_domain)) ||
		(rd && rd->thread_model != IBV_EXP_THREAD_SAFE);
	/* the references it holds: its domain's (the caller's, handed
	 * over) and its parent domain's */
	cq->rd = rd;
	if (cq->parent)
		sv_pd_get(cq->parent);
	cq_spin_init(cq);
	pthread_mutex_init(&cq->ex.mutex, NULL);
	pthread_cond_init(&cq->ex.cond, NULL);
	cq->ex.context = context;
	cq->ex.channel = attr->channel;
	if (attr->channel)
		__atomic_fetch_add(&attr->channel->refcnt, 1, __ATOMIC_RELAXED);
	cq->ex.cq_context = attr->cq_context;
	cq->ex.handle = (uint32_t)cq->handle;
	set_ex_ops(&cq->ex);
	/* without it the direct path passes this CQ by (the daemon's ring
	 * takes every completion) */
	(void)sv_direct_cq_init(ctx, cq);
	ctx_add_cq(ctx, cq);
	return &cq->ex;

err_destroy:
	sv_cmd_init(&cmd, SV_CMD_DESTROY_CQ);
	cmd.u.handle.handle = cq->handle;
	sv_conn_call(&ctx->conn, &cmd, -1, &rsp, NULL);
err_free:
	free(cq);
	return sv_err_ptr(ret);
}

SV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe,
				       void *cq_context,
				       struct ibv_comp_channel *channel,
				       int comp_vector)
{
	struct ibv_cq_init_attr_ex attr = {
		.cqe = (uint32_t)cqe,
		.cq_context = cq_context,
		.channel = channel,
		.comp_vector = (uint32_t)comp_vector,
	};
	struct ibv_cq_ex *ex;

	if (cqe < 1 || comp_vector < 0) {
		errno = EINVAL;
		return NULL;
	}
	ex = sv_create_cq_ex(context, &attr);
	return ex ? ibv_cq_ex_to_cq(ex) : NULL;
}

#define SV_EXP_CQ_INIT_KNOWN                                                 \
	((uint32_t)(IBV_EXP_CQ_INIT_ATTR_FLAGS |                             \
		    IBV_EXP_CQ_INIT_ATTR_RES_DOMAIN))

SV_EXPORT struct ibv_cq *ibv_exp_create_cq(struct ibv_context *context,
					   int cqe, void *cq_context,
					   struct ibv_comp_channel *channel,
					   int comp_vector,
					   struct ibv_exp_cq_init_attr *attr)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = (uint32_t)cqe,
		.cq_context = cq_context,
		.channel = channel,
		.comp_vector = (uint32_t)comp_vector,
	};
	struct sv_res_domain *rd = NULL;
	struct ibv_cq_ex *ex;

	if (!context || cqe < 1 || comp_vector < 0)
		return sv_err_ptr(-EINVAL);
	if (attr) {
		if (attr->comp_mask & ~SV_EXP_CQ_INIT_KNOWN)
			return sv_err_ptr(-EINVAL);
		if (attr->comp_mask & IBV_EXP_CQ_INIT_ATTR_FLAGS) {
			/* as ibv_create_cq_ex's flags */
			ca.comp_mask |= IBV_CQ_INIT_ATTR_MASK_FLAGS;
			ca.flags = attr->flags;
		}
		if (attr->comp_mask & IBV_EXP_CQ_INIT_ATTR_RES_DOMAIN) {
			if (!attr->res_domain ||
			    attr->res_domain->context != context)
				return sv_err_ptr(-EINVAL);
			rd = to_sv_rd(attr->res_domain);
		}
	}
	if (rd)
		sv_rd_get(rd);
	ex = sv_create_cq_in(context, &ca, rd);
	if (!ex) {
		if (rd) {
			int err = errno;

			sv_rd_put(to_sv_ctx(context), rd);
			errno = err;
		}
		return NULL;
	}
	return ibv_cq_ex_to_cq(ex);
}

/* The daemon moved the completions not polled, from old_cons on, to the
 * new ring's consumer counter on (ibv_resize_cq): the stamps move with
 * them (dlock held). */
static void dring_renumber(struct sv_cq *cq, uint32_t old_cons)
{
	for (uint32_t i = cq->dcons; i != cq->dprod; i++) {
		uint32_t *st = &cq->dstamp[i & cq->dmask];

		if ((int32_t)(*st - old_cons) <= 0)
			*st = cq->cons;
		else
			*st = *st - old_cons + cq->cons;
	}
}

SV_EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct sv_cq *cq = to_sv_cq(ibcq);
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret, fd;

	if (cqe < 1)
		return EINVAL;
	/* Pollers spin for one daemon round trip: the daemon moves the
	 * completions not yet consumed into the new ring, so nobody may
	 * consume while it does. Resizing is rare; polling stays lock-light. */
	cq_lock(cq);
	/* what senders of this host put in our QPs' completion rings, with
	 * stamps of the ring that goes: into the private ring, whose stamps
	 * are renumbered below */
	if (cq->xqps) {
		__atomic_store_n(&cq->xhint, 1, __ATOMIC_RELAXED);
		sv_direct_xdrain(cq);
	}
	sv_cmd_init(&cmd, SV_CMD_RESIZE_CQ);
	cmd.u.resize_cq.cq = cq->handle;
	cmd.u.resize_cq.cqe = (uint32_t)cqe;
	ret = sv_conn_call(&to_sv_ctx(ibcq->context)->conn, &cmd, -1, &rsp, &fd);
	if (!ret) {
		/* the direct path's posters look at the ring under dlock */
		uint32_t old_cons = cq->cons;

		if (cq->dring)
			sv_spin_lock(&cq->dlock);
		ret = map_ring(cq, fd, &rsp.u.cq);
		if (!ret && cq->dring)
			dring_renumber(cq, old_cons);
		if (!ret && cq->dring)
			__atomic_store_n(&cq->ring->dused, cq->dheld,
					 __ATOMIC_RELAXED);
		if (cq->dring)
			sv_spin_unlock(&cq->dlock);
		if (fd >= 0)
			close(fd);
		/* the senders map the new ring */
		if (!ret)
			sv_direct_cq_moved(cq);
	}
	cq_unlock(cq);
	return -ret;
}

SV_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct sv_cq *cq = to_sv_cq(ibcq);
	struct sv_context *ctx = to_sv_ctx(ibcq->context);
	int ret = sv_destroy_obj(ibcq->context, SV_CMD_DESTROY_CQ, cq->handle);

	if (ret)
		return ret;
	ctx_del_cq(ctx, cq);
	if (ibcq->channel)
		__atomic_fetch_sub(&ibcq->channel->refcnt, 1, __ATOMIC_RELAXED);
	/* the verbs contract: wait until every event handed out is acked */
	pthread_mutex_lock(&ibcq->mutex);
	while (ibcq->comp_events_completed != cq->comp_events ||
	       ibcq->async_events_completed != cq->async_events)
		pthread_cond_wait(&ibcq->cond, &ibcq->mutex);
	pthread_mutex_unlock(&ibcq->mutex);
	sv_ring_unmap(&cq->mem);
	if (cq->rd)
		sv_rd_put(ctx, cq->rd);
	if (cq->parent)
		sv_pd_put(cq->parent);
	pthread_mutex_destroy(&ibcq->mutex);
	pthread_cond_destroy(&ibcq->cond);
	sv_direct_cq_fini(cq);
	free(cq);
	return 0;
}
