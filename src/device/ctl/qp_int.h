/* SPDX-License-Identifier: MIT */
/*
 * What the control side of QPs, SRQs and address handles shares (sv_dev.h
 * is their face to the rest of the daemon): qp.c owns QPs and the QPN
 * table, srq.c SRQs, ah.c address handles. All under sv_dev.lock.
 */
#ifndef SV_DEVICE_CTL_QP_INT_H
#define SV_DEVICE_CTL_QP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device/sv_dev.h"

/* Ring sizes: slots a power of two, bytes whole pages. */
static inline uint32_t pow2_at_least(uint32_t n)
{
	uint32_t e = 1;

	while (e < n)
		e <<= 1;
	return e;
}

static inline size_t page_up(size_t n)
{
	return (n + 4095u) & ~(size_t)4095u;
}

/* qp.c: wq, a work queue of the daemon's over the ring header hdr (a QP's
 * send or receive queue, an SRQ's receive queue or tag-matching ops), and
 * the header filled in, in RESET. */
void sv_qp_wq_init(struct sv_wq *wq, void *hdr, uint32_t entries,
		   uint32_t stride, uint32_t max_sge, uint32_t max_inline);

/* ah.c: checks an address vector (an AH's, a QP's path); 0 or -EINVAL
 * with *why. RoCE needs a GRH. */
int sv_ah_check(const struct sv_wire_ah *ah, const char **why);

/*
 * Work posted before a destroy runs first. A NIC has fetched and sent the
 * WQEs whose doorbell rang long before a destroy command reaches it (its
 * UD WQEs carry their address vector with them); sv0's engine may not have
 * run them yet when DESTROY_QP or DESTROY_AH comes (it sleeps once idle,
 * or runs other QPs' work first). So these commands let the engine run the
 * WQEs posted before them, as far as it can without the network (RNR NAKs
 * and transport timeouts are not waited out), at most SV_DRAIN_NS in all
 * (docs/DESIGN.md, "The data path"). A dying client's objects are not
 * drained: its memory is gone.
 */
#define SV_DRAIN_NS 1000000000ull

/* qp.c: let qp's engine run its send queue up to WQE number upto; false
 * when it cannot or deadline passes first (DESTROY_QP, DESTROY_AH). */
bool sv_qp_sq_drain(struct sv_qp *qp, uint32_t upto, uint64_t deadline);

#endif
