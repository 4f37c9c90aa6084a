/* SPDX-License-Identifier: MIT */
/*
 * What an atomic does to the 8-byte word it targets: the one definition the
 * same-host responder (loop/resp.c) and the wire responder (roce/resp.c) share.
 * Pure functions; the caller holds sv_dev.lock around read, compute and
 * write, which is what makes atomics atomic with respect to each other.
 *
 * The masked forms (include/softverbs/softverbs.h):
 *  - masked compare and swap: equal under compare_mask, then the bits of
 *    swap_mask are replaced by swap's;
 *  - masked fetch and add: bit i of `ends` set closes a field at bit i (the
 *    carry out of bit i is dropped); every field adds independently.
 */
#ifndef SV_DEVICE_ATOMIC_H
#define SV_DEVICE_ATOMIC_H

#include <stdbool.h>
#include <stdint.h>

/* One atomic's operands, whichever form. */
struct sv_atomic_op {
	uint8_t kind;              /* SV_ATOMIC_* */
	uint64_t compare_add;      /* compare value; add value */
	uint64_t swap;             /* swap value; FAA: field ends */
	uint64_t compare_mask;     /* masked CAS */
	uint64_t swap_mask;        /* masked CAS */
};

enum {
	SV_ATOMIC_CMP_SWAP,
	SV_ATOMIC_FETCH_ADD,
	SV_ATOMIC_MASKED_CMP_SWAP,
	SV_ATOMIC_MASKED_FETCH_ADD,
};

/* A sum in which no carry crosses from a bit set in ends into the next:
 * the high bit of each field is summed without carry-in to the next, by
 * adding with the field tops cleared and putting the tops back as a sum
 * modulo 2 (the classic SWAR add). */
static inline uint64_t sv_atomic_field_add(uint64_t a, uint64_t b,
					   uint64_t ends)
{
	uint64_t tops = ends | (1ull << 63);

	return ((a & ~tops) + (b & ~tops)) ^ ((a ^ b) & tops);
}

/* The value to store, given the original; false: store nothing (a compare
 * that failed). */
static inline bool sv_atomic_apply(const struct sv_atomic_op *op,
				   uint64_t orig, uint64_t *val)
{
	switch (op->kind) {
	case SV_ATOMIC_CMP_SWAP:
		*val = op->swap;
		return orig == op->compare_add;
	case SV_ATOMIC_FETCH_ADD:
		*val = orig + op->compare_add;
		return true;
	case SV_ATOMIC_MASKED_CMP_SWAP:
		*val = (orig & ~op->swap_mask) | (op->swap & op->swap_mask);
		return ((orig ^ op->compare_add) & op->compare_mask) == 0;
	default:
		*val = sv_atomic_field_add(orig, op->compare_add, op->swap);
		return true;
	}
}

#endif
