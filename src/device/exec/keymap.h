/* SPDX-License-Identifier: MIT */
/*
 * The key check inside softverbsd: how a key becomes memory (keymap.c).
 * WQE execution calls these for every local SGE and every remote access;
 * every function here runs under sv_dev.lock and never allocates.
 *
 * Keys (ctl/keys.h): 24-bit index << 8 | 8-bit consumer key, the index a
 * secret permutation of the key table slot. A slot holds an MR or an MW.
 * Lookups compare all 32 bits: a stale consumer key, an invalidated MR, a
 * free or unbound MW, a deregistered or deallocated object never resolves.
 *
 * An MR maps its addresses [iova, iova + length) (iova 0 when zero-based)
 * onto one contiguous range of its owner's memory (ibv_reg_mr) or onto a
 * list of blocks (fast register, REG_MR_LIST). A window maps its addresses
 * (from 0 when zero-based, else the MR addresses it was bound to) onto a
 * part of one MR.
 */
#ifndef SV_DEVICE_KEYMAP_H
#define SV_DEVICE_KEYMAP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

struct sv_mr;
struct sv_pd;
struct sv_qp;

/* Is [addr, addr + len) inside [base, base + size)? Never overflows. */
static inline bool sv_in_range(uint64_t base, uint64_t size, uint64_t addr,
			       uint64_t len)
{
	return addr >= base && len <= size && addr - base <= size - len;
}

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

#endif
