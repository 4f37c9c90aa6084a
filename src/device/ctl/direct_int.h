/* SPDX-License-Identifier: MIT */
/*
 * What the direct path's two daemon files share (direct.h is their face to
 * the rest of the daemon): direct.c owns the tables, the guards and
 * revocation; direct_recv.c the receive side of direct SENDs (DIRECT_RECV,
 * DIRECT_NOTIFY's peer, an SRQ's word, the claims a sender left). All under
 * sv_dev.lock.
 */
#ifndef SV_DEVICE_CTL_DIRECT_INT_H
#define SV_DEVICE_CTL_DIRECT_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "abi/sv_direct.h"
#include "device/sv_dev.h"

#define QP_SLOTS (1u << SV_MAX_QP_BITS)
#define QP_MASK  (QP_SLOTS - 1)

/* The guards of one uid's QPs (sv_direct.h); kept for the daemon's life. */
struct gtab {
	struct gtab *next;
	uid_t uid;
	int memfd;
	struct sv_direct_guard *guard; /* [QP_SLOTS] */
	struct sv_direct_riov *riov;   /* [QP_SLOTS] */
	struct sv_direct_claim *claim; /* [QP_SLOTS] */
	struct sv_direct_srq *srq;     /* [SV_DIRECT_SRQ_SLOTS] */
};

/* uid's guard table, made the first time one of its clients asks (make):
 * NULL when there is none, or it cannot be made. */
struct gtab *sv_dgtab_get(uid_t uid, bool make);
/* qp's guard slot, in its owner's uid's table (NULL: no table, nothing
 * held); *tp the table, when tp. */
struct sv_direct_guard *sv_dguard_of(const struct sv_qp *qp,
				      struct gtab **tp);
/* QP qpn (exactly), or NULL */
struct sv_qp *sv_dqp_at(uint32_t qpn);
/* Slot i's guard, when it is held by a copy that may have read an entry
 * older than epoch e (NULL otherwise). */
struct sv_direct_guard *sv_dguard_busy(uint32_t i, uint64_t e);
/* The ring header that holds qp's receive side (its receive ring's, or,
 * on an SRQ, its send ring's), and its completion side's producer (into
 * *xprod when not NULL); NULL when it has no completion side
 * (direct_recv.c). */
struct sv_wq_ring *sv_drx_hdr(const struct sv_qp *qp, uint32_t *xprod);
/* A command of the direct path with a part up to max: 0, or its refusal
 * (reserved bits, no such part, the path off). */
int sv_direct_args(struct sv_req *r, uint32_t rsvd, uint32_t part,
		   uint32_t max);

#endif /* SV_DEVICE_CTL_DIRECT_INT_H */
