/* SPDX-License-Identifier: MIT */
/*
 * The direct path's daemon side (direct.c; the layout is
 * src/abi/sv_direct.h, the design docs/DESIGN.md "The direct path"): what
 * the daemon publishes for the library to execute same-host WQEs itself,
 * and how it takes a grant back. Every call is a no-op when the direct
 * path is off (softverbsd --no-direct, or before sv_direct_init). All under
 * sv_dev.lock.
 */
#ifndef SV_DEVICE_DIRECT_H
#define SV_DEVICE_DIRECT_H

#include <stdbool.h>
#include <stdint.h>

struct sv_cq;
struct sv_mr;
struct sv_qp;
struct sv_req;
struct sv_srq;

/* Make the tables (after the key table exists): 0 or -errno. */
int sv_direct_init(void);
void sv_direct_fini(void);
bool sv_direct_enabled(void);

/* mr's entry as it is now (a grant, or less: follow a lesser one with
 * sv_direct_revoke). */
void sv_direct_mr(const struct sv_mr *mr);
/* The entry of key says nothing any more (before the key is freed). */
void sv_direct_key_clear(uint32_t key);

/* qp's entry as it is now: its state, flags, access, PD and peer. */
void sv_direct_qp(struct sv_qp *qp);
/* qp leaves its slot (destroy). */
void sv_direct_qp_clear(const struct sv_qp *qp);
/* softverbs capture (diag/capture.c): off, no QP takes the direct path (each
 * entry rewritten, and a copy under way waited for); on again, the QPs
 * not withdrawn for their own reason have it back. Control thread. */
void sv_direct_all_off(bool off);
/* qp's guard slot starts clear (create, destroy). */
void sv_direct_guard_reset(const struct sv_qp *qp);
/* The engine finished qp's SQ up to sq.cons (completions written, state
 * changed): publish done and cq_mark in its send ring. */
void sv_direct_sq_done(struct sv_qp *qp);

/* Might a same-host sender still be taking a WQE of t's receive queue
 * directly, having read t's entry from before its last change (a flush of
 * that queue waits)? */
bool sv_direct_rq_held(const struct sv_qp *t);

/* The completions of qp's receive queue that a same-host sender wrote to
 * its completion ring and its owner has not taken yet: cq (qp's receive
 * CQ) holds them too, when it decides an overrun. */
uint32_t sv_direct_rq_held_cqes(const struct sv_qp *qp,
				const struct sv_cq *cq);

/* An entry was made less permissive: complete only once no direct copy
 * that may have read the old entry runs. Control thread only; may let
 * sv_dev.lock go while it waits. */
void sv_direct_revoke(void);

/* The WQEs (their bytes, and those copied between mapped memfds) that
 * processes ran directly, and those they sent to the daemon instead by
 * reason (refused[SV_DREF_MAX]), QPs gone included. */
void sv_direct_counts(uint64_t *msgs, uint64_t *bytes, uint64_t *mapped,
		      uint64_t *refused);
/* Add to a QP's counters what its processes ran directly: WQEs it sent,
 * messages its receive queue took (softverbs stat's per QP). */
void sv_direct_qp_counts(const struct sv_qp *qp, uint64_t *sends,
			 uint64_t *recvs);
/* Counters: revocations, those that waited for a guard, copies fenced. */
void sv_direct_stat(uint64_t *revokes, uint64_t *waits, uint64_t *fenced);

/* OPEN_DIRECT, MR_FILE, DIRECT_EST, DIRECT_RECV */
int sv_cmd_open_direct(struct sv_req *r);
int sv_cmd_mr_file(struct sv_req *r);
int sv_cmd_direct_est(struct sv_req *r);
int sv_cmd_direct_recv(struct sv_req *r);
/* DIRECT_NOTIFY's peer (ctl/cq.c sends the event): the caller's QP's
 * peer, which took WQEs directly, its xannounced set to xprod (with
 * SV_NOTIFY_SRQ_LIMIT instead: its SRQ's limit looked at); NULL with *err
 * and r->why otherwise. */
struct sv_qp *sv_direct_notify_peer(struct sv_req *r, uint64_t handle,
				    uint32_t xprod, uint32_t flags, int *err);

/* qp's completion side (struct sv_xside, src/abi/sv_qp.h), made anew as
 * it enters RTR: its memfd into r->fd_out, for MODIFY_QP's response
 * (nothing where the direct path does not apply); always 0. */
int sv_direct_xside_make(struct sv_req *r, struct sv_qp *qp);
/* No sender publishes into qp's side after this (before its flush). */
void sv_direct_xside_close(struct sv_qp *qp);
/* ... and it is gone (RESET, destroy). */
void sv_direct_xside_free(struct sv_qp *qp);

/* A QP on an SRQ (its peer's process may claim the SRQ's WQEs): adopt the
 * WQE its peer s claimed for it and never filled (struct sv_direct_claim),
 * when s's poster has let its guard go or force (s goes: its copy was
 * waited for or fenced). A QP in ERR flushes it at once. */
void sv_direct_adopt(struct sv_qp *s, bool force);
/* Does t's peer hold a claim for t that t's flush must adopt first? */
bool sv_direct_claim_due(const struct sv_qp *t);
/* ... adopt it (t's flush: no copy of its peer's is under way). */
void sv_direct_claim_take(struct sv_qp *t);
/* srq's ring changes (resize: its ring's generation; destroy): no
 * sender's claim through the old one succeeds after this. 0, or -EIO for
 * a word that is not the SRQ's (*cons the device's own then). */
int sv_direct_srq_moved(struct sv_srq *srq, bool gone, uint32_t *cons);

#endif /* SV_DEVICE_DIRECT_H */
