/* SPDX-License-Identifier: MIT */
/*
 * Memory-management extensions inside softverbsd: how a key becomes memory,
 * and the operations that change what a key grants (mem.c, mw.c). WQE
 * execution calls these while it runs WQEs; every function here runs under
 * sv_dev.lock and never allocates (fast-register MRs get their block array
 * at ALLOC_MR).
 *
 * Keys (keys.h): 24-bit index << 8 | 8-bit consumer key, the index a secret
 * permutation of the key table slot. A slot holds an MR or an MW. Lookups
 * compare all 32 bits: a stale consumer key, an invalidated MR, a free or
 * unbound MW, a deregistered or deallocated object never resolves.
 *
 * An MR maps its addresses [iova, iova + length) (iova 0 when zero-based)
 * onto one contiguous range of its owner's memory (ibv_reg_mr) or onto a
 * list of blocks (fast register, REG_MR_LIST). A window maps its addresses
 * (from 0 when zero-based, else the MR addresses it was bound to) onto a
 * part of one MR.
 */
#ifndef SV_DEVICE_MM_H
#define SV_DEVICE_MM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "abi/sv_qp.h"

struct sv_mr;
struct sv_pd;
struct sv_qp;

/* A resolved range: len bytes from byte off of mr's bytes (offset in the
 * MR, not an address), in the memory of process pid. */
struct sv_map {
	const struct sv_mr *mr;
	uint64_t off;
	uint64_t len;
	int pid;
};

/*
 * A local SGE: lkey must name a valid MR of pd, [addr, addr + len) must lie
 * in it, and write (the SGE is a sink) needs IBV_ACCESS_LOCAL_WRITE.
 * IBV_WC_SUCCESS and *out, or IBV_WC_LOC_PROT_ERR.
 */
uint32_t sv_lkey_map(uint32_t lkey, const struct sv_pd *pd, uint64_t addr,
		     uint64_t len, bool write, struct sv_map *out);

/*
 * A remote access by the peer of responder QP t: rkey names a valid MR of
 * t's PD with access (one of IBV_ACCESS_REMOTE_READ/WRITE/ATOMIC), or a
 * bound window that grants access and passes its type's checks (type 1:
 * t's PD; 2A: bound to t; 2B: bound to t and t's PD) over a still-valid MR;
 * [addr, addr + len) must lie in the MR's or the window's range.
 * true and *out, or false (the remote access error).
 */
bool sv_rkey_map(uint32_t rkey, const struct sv_qp *t, uint64_t addr,
		 uint64_t len, uint32_t access, struct sv_map *out);

/*
 * Up to max iovecs for len bytes from byte off of mr (as sv_map gives
 * them), adjacent blocks merged: the count written, *done = the bytes they
 * cover (< len only when max ran out: call again from off + *done).
 */
unsigned int sv_mr_iov(const struct sv_mr *mr, uint64_t off, uint64_t len,
		       struct iovec *iov, unsigned int max, uint64_t *done);

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
