/* SPDX-License-Identifier: MIT */
/*
 * The masked atomics (include/softverbs/softverbs.h), written one bit at a
 * time: the reference model the device is checked against (tests/unit
 * test_atomic, tests/e2e test_masked). Deliberately unlike the device's
 * word-wide code (src/device/exec/atomic.h).
 */
#ifndef SV_TESTS_ATOMIC_REF_H
#define SV_TESTS_ATOMIC_REF_H

#include <stdint.h>

/* The word after a masked compare and swap of orig. */
static inline uint64_t ref_masked_cas(uint64_t orig, uint64_t cmp,
				      uint64_t cmask, uint64_t swap,
				      uint64_t smask)
{
	uint64_t out = orig;

	for (int i = 0; i < 64; i++)
		if ((cmask >> i & 1) && ((orig >> i & 1) != (cmp >> i & 1)))
			return orig;
	for (int i = 0; i < 64; i++) {
		if (!(smask >> i & 1))
			continue;
		out &= ~(1ull << i);
		out |= (swap >> i & 1) << i;
	}
	return out;
}

/* The word after a masked fetch and add of b to a: a ripple-carry adder
 * whose carry stops at every bit set in ends. */
static inline uint64_t ref_masked_faa(uint64_t a, uint64_t b, uint64_t ends)
{
	uint64_t r = 0, carry = 0;

	for (int i = 0; i < 64; i++) {
		uint64_t s = (a >> i & 1) + (b >> i & 1) + carry;

		r |= (s & 1) << i;
		carry = (ends >> i & 1) ? 0 : s >> 1;
	}
	return r;
}

/* xorshift64: the same operands on every run and every host. */
static inline uint64_t ref_rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A mask of any density: none, all, sparse, dense, even. */
static inline uint64_t ref_rnd_mask(uint64_t *s)
{
	switch (ref_rnd(s) % 6) {
	case 0:
		return 0;
	case 1:
		return ~0ull;
	case 2:
		return ref_rnd(s) & ref_rnd(s) & ref_rnd(s);
	case 3:
		return ref_rnd(s) | ref_rnd(s) | ref_rnd(s);
	default:
		return ref_rnd(s);
	}
}

#endif
