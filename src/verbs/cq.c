// SPDX-License-Identifier: MIT
/*
 * Completion queues: a ring the daemon writes and the library reads. This
 * file polls it (the fast path and the merge with the private ring of the
 * direct path), drains a dead device's rings into it, cleans a QP's
 * completions out of it and arms it; cq_ex.c has the extended polling API,
 * cq_ctl.c create, resize and destroy, cq_int.h what they share.
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
#include <string.h>
#include <time.h>

#include "abi/sv_lock.h"
#include "abi/sv_op.h"
#include "verbs/cq_int.h"

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
__attribute__((noinline, cold)) void sv_cq_flush_dead(struct sv_cq *cq)
{
	struct sv_context *ctx = to_sv_ctx(cq->ex.context);

	pthread_mutex_lock(&ctx->lock);
	cq_dead_walk(ctx, cq, true);
	pthread_mutex_unlock(&ctx->lock);
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
 * The private ring (and the completion sides of the CQ's QPs) is looked at
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
	if (unlikely(dring_avail(cq) | xsides(cq)))
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

/*
 * The completions senders of this host put in the sides of the CQ's QPs,
 * straight into wc, when nothing can be due before them: the private ring
 * empty, every daemon completion below prod polled, and each one's stamp
 * not past prod (the daemon's completions its sender saw are polled). The
 * rest go through the private ring (sv_direct_xdrain). How many (CQ lock
 * held).
 */
static uint32_t poll_xsides(struct sv_cq *cq, uint32_t n, struct ibv_wc *wc,
			    uint32_t prod)
{
	uint32_t got = 0;
	bool look = cq->xlook;

	if (cq->cons != prod || dring_avail_locked(cq))
		return 0;
	/* (what this leaves is found by its slot, or by a later look) */
	cq->xlook = false;
	for (struct sv_qp *qp = cq->xqps; qp && got < n; qp = qp->xnext) {
		uint32_t c = qp->xcons, xp = c + sv_direct_xavail(qp, look);

		for (; c != xp && got < n; c++) {
			struct sv_cqe e = qp->xring[c & qp->xmask];

			if ((int32_t)(SV_XCQE_STAMP(&e) - prod) > 0)
				break;
			e.tm_tag = 0;
			/* it is this QP's, whatever the sender said */
			e.qp_num = qp->ex.qp_base.qp_num;
			cqe_to_wc(&e, &wc[got++]);
		}
		sv_direct_xtaken(qp, c);
	}
	return got;
}

/* poll_cq with the lock held and the daemon ring's prod loaded: the
 * private ring merged in, then the daemon's completions below prod. */
static int poll_cq_locked(struct sv_cq *cq, int n, struct ibv_wc *wc,
			  uint32_t prod)
{
	struct sv_cq_ring *ring = cq->ring;
	uint32_t avail, got = 0;

	if (cq->dring) {
		if (unlikely(xnews(cq))) {
			got = poll_xsides(cq, (uint32_t)n, wc, prod);
			if (got == (uint32_t)n) {
				cq_unlock(cq);
				return n;
			}
			if (xnews(cq))
				sv_direct_xdrain(cq);
		}
		if (dring_avail_locked(cq))
			got += poll_merged(cq, (uint32_t)n - got, wc + got,
					   prod);
		if (got == (uint32_t)n) {
			cq_unlock(cq);
			return n;
		}
		n -= (int)got;
		wc += got;
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
