/* SPDX-License-Identifier: MIT */
/*
 * The daemon's side of a work queue ring (struct sv_wq): what is posted,
 * which slot holds WQE n, consuming the head. The ring steps under the
 * work-queue plumbing (wq.c, exec_int.h), the same-host path and the
 * RoCEv2 requester (roce/req.c). The library writes the slots and prod;
 * nothing read here is trusted until copied out.
 */
#ifndef SV_DEVICE_WQ_H
#define SV_DEVICE_WQ_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "abi/sv_ring.h"
#include "device/sv_dev.h"

static inline uint32_t wq_prod(const struct sv_wq *wq)
{
	/* acquire: pairs with the library's release store after the WQE */
	return __atomic_load_n(&wq->hdr->prod, __ATOMIC_ACQUIRE);
}

/* A consumer counter c someone else moved, against prod p: forward from
 * ours, never past prod (a client that moves it only skips its own
 * WQEs; ours may be any number of WQEs behind). */
static inline bool wq_cons_ok(const struct sv_wq *wq, uint32_t c, uint32_t p)
{
	return p - c <= wq->entries && c - wq->cons <= p - wq->cons;
}

/* An SRQ's word w (wq->dsrq) carries its tag (held or not). */
static inline bool wq_dsrq_ours(const struct sv_wq *wq, uint64_t w)
{
	return (sv_dsrq_tag(w) & ~SV_DSRQ_HELD) == wq->dsrq_tag;
}

/* A receive queue a same-host sender takes WQEs of too (xword): its
 * completion side's xprod says how many it took, which we follow
 * forward, never back and never past prod (a client that moves it only
 * skips its own WQEs). */
static inline uint32_t wq_cons_now(const struct sv_wq *wq)
{
	uint32_t c, p;

	if (wq->dsrq) {
		/* an SRQ's: its word, when it carries the SRQ's tag */
		uint64_t w = __atomic_load_n(wq->dsrq, __ATOMIC_ACQUIRE);

		if (!wq_dsrq_ours(wq, w))
			return wq->cons;
		c = sv_dsrq_cons(w);
	} else if (!wq->xword || !wq->hdr) {
		return wq->cons;
	} else {
		c = wq->xbase +
		    sv_xside_prod(__atomic_load_n(wq->xword, __ATOMIC_ACQUIRE));
	}
	p = wq_prod(wq);
	return wq_cons_ok(wq, c, p) ? c : wq->cons;
}

static inline void wq_sync_cons(struct sv_wq *wq)
{
	wq->cons = wq_cons_now(wq);
}

/* WQEs waiting in wq; *corrupt when prod is more than a ring ahead. */
static inline uint32_t wq_pending(const struct sv_wq *wq, bool *corrupt)
{
	uint32_t n;

	if (!wq->hdr || !wq->entries) {
		*corrupt = false;
		return 0;
	}
	n = wq_prod(wq) - wq_cons_now(wq);
	*corrupt = n > wq->entries;
	return *corrupt ? 0 : n;
}

static inline void wq_consume(struct sv_wq *wq)
{
	wq->cons++;
	/* a queue with a completion side: our takes, where the owner and
	 * its sender read them (the counter with cons) */
	if (wq->xword)
		__atomic_store_n(&wq->hdr->xbase, ++wq->xbase,
				 __ATOMIC_RELEASE);
	/* an SRQ's word: the head we held, let go one further on */
	if (wq->dsrq)
		__atomic_store_n(wq->dsrq, sv_dsrq_word(wq->cons,
							wq->dsrq_tag),
				 __ATOMIC_RELEASE);
	/* release: the slot may be reused once the library sees this */
	__atomic_store_n(&wq->hdr->cons, wq->cons, __ATOMIC_RELEASE);
}

/*
 * An SRQ that same-host senders take WQEs of too (wq->dsrq): hold its head
 * WQE for the device (src/abi/sv_direct.h struct sv_direct_srq), so that
 * none of them takes it while we fill it; wq->cons is that head then. 0,
 * -ENOENT when none is posted, -EIO when the word is not the SRQ's any
 * more or runs outside the ring (a scribbler of the owner's uid).
 */
static inline int wq_srq_hold(struct sv_wq *wq)
{
	for (int tries = 0; tries < 64; tries++) {
		uint64_t w = __atomic_load_n(wq->dsrq, __ATOMIC_ACQUIRE);
		uint32_t tag = sv_dsrq_tag(w), c = sv_dsrq_cons(w);
		uint32_t p = wq_prod(wq);

		if (!wq_dsrq_ours(wq, w) || !wq_cons_ok(wq, c, p))
			return -EIO;
		wq->cons = c;
		if (tag & SV_DSRQ_HELD)
			return 0;  /* ours: a head peeked and left */
		if (c == p)
			return -ENOENT;
		if (__atomic_compare_exchange_n(wq->dsrq, &w,
						sv_dsrq_word(c, tag |
							     SV_DSRQ_HELD),
						false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			return 0;
	}
	return -ENOENT;    /* senders took each head we saw: none now */
}

/* The slot of WQE n (free-running number, n - cons < pending). */
static inline void *wq_slot(const struct sv_wq *wq, uint32_t n)
{
	return sv_wq_slot(wq->hdr, wq->entries, wq->stride, n);
}

/* The head WQE's slot (its header not yet validated). */
static inline void *wq_head(const struct sv_wq *wq)
{
	return wq_slot(wq, wq->cons);
}

#endif /* SV_DEVICE_WQ_H */
