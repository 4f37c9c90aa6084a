/* SPDX-License-Identifier: MIT */
/*
 * Memory-management extensions inside softverbsd: the operations of the send
 * queue that change what a key grants (mm.c; the objects are ctl/mem.c's and
 * ctl/mw.c's). How a key becomes memory is keymap.h's. WQE execution calls
 * these while it runs WQEs; every function here runs under sv_dev.lock and
 * never allocates (fast-register MRs get their block array at ALLOC_MR).
 */
#ifndef SV_DEVICE_MM_H
#define SV_DEVICE_MM_H

#include <stdbool.h>
#include <stdint.h>

#include "abi/sv_qp.h"

struct sv_qp;

/*
 * The operations of the send queue of qp (an ibv_wc_status each:
 * IBV_WC_SUCCESS or the error the WQE completes with).
 *
 * FAST_REG_MR (n = the WQE's num_sge entries of the page list reg->list,
 * read from the list's shared memory and copied): the MR named by reg->key's
 * index must be a fast-register MR of qp's PD, invalid, with room for the
 * blocks; the list a PAGE_LIST of qp's client; pages aligned to the page
 * size, blocks non-empty, fbo and length inside; then the MR is valid with
 * key reg->key, the access, the iova (0 when zero-based). Errors:
 * IBV_WC_LOC_QP_OP_ERR.
 */
uint32_t sv_mm_fast_reg(struct sv_qp *qp, const struct sv_wqe_reg *reg,
			uint32_t n);

/*
 * LOCAL_INV (and the sink of RDMA_READ_INV): key must be exactly the key
 * of a valid fast-register MR of qp's PD, or of a bound type 2 window of
 * qp's PD (2A/2B: bound to qp). It becomes invalid (free). Errors:
 * IBV_WC_LOC_QP_OP_ERR (MRs, unknown keys), IBV_WC_MW_BIND_ERR (type 1
 * windows).
 */
uint32_t sv_mm_local_inv(struct sv_qp *qp, uint32_t key);

/*
 * BIND_MW: reg->key's index names a window of qp's client; type 1 only with
 * SV_REG_TYPE1 (length 0: unbind), type 2 only without it and only while
 * free, of qp's PD; reg->list the lkey of a valid MR of qp's PD with
 * IBV_ACCESS_MW_BIND whose range holds [iova, iova + length); remote write
 * or atomic access needs the MR's local write. Then the window has key
 * reg->key, is bound to that MR (type 2: and to qp). Errors:
 * IBV_WC_MW_BIND_ERR.
 */
uint32_t sv_mm_bind_mw(struct sv_qp *qp, const struct sv_wqe_reg *reg);

/*
 * SEND_WITH_INV at responder t: may rkey be invalidated by t's peer (the
 * rules of sv_mm_local_inv, with t)? Checked before the message lands;
 * sv_mm_remote_inv does it after.
 */
bool sv_mm_remote_inv_ok(const struct sv_qp *t, uint32_t rkey);
void sv_mm_remote_inv(struct sv_qp *t, uint32_t rkey);

#endif
