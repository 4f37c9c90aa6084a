/* SPDX-License-Identifier: MIT */
/*
 * The secret permutation between a key table slot and the 24-bit index a
 * key shows (docs/DESIGN.md "Keys"): the daemon's key table (ctl/keys.c) makes
 * keys with it, and the library's direct path (src/verbs/direct.c) finds
 * the slot of a key in the table the daemon publishes with it, the round
 * keys coming in that table's header. One definition, here.
 *
 * A Feistel network of SV_KEYPERM_ROUNDS rounds over 24 bits (two 12-bit
 * halves, a 64-bit round key each), walked again while it lands on 0 or
 * 0xffffff (cycle walking: at most three steps, and still a bijection of
 * [1, SV_KEY_SLOT_MAX]). O(1) both ways.
 */
#ifndef SV_ABI_KEYPERM_H
#define SV_ABI_KEYPERM_H

#include <stdint.h>

#define SV_KEY_INDEX_BITS 24
#define SV_KEY_INDEX(k)   ((uint32_t)(k) >> 8)
#define SV_KEY_CONSUMER(k) ((uint32_t)(k) & 0xff)
#define SV_KEY_MAKE(idx, ck) (((uint32_t)(idx) << 8) | ((uint32_t)(ck) & 0xff))
/* The most slots (and visible indices): 1 .. 2^24 - 2 */
#define SV_KEY_SLOT_MAX ((1u << SV_KEY_INDEX_BITS) - 2)

#define SV_KEYPERM_ROUNDS 6
#define SV_KEYPERM_HALF_BITS (SV_KEY_INDEX_BITS / 2)
#define SV_KEYPERM_HALF_MASK ((1u << SV_KEYPERM_HALF_BITS) - 1)

struct sv_keyperm {
	uint64_t k[SV_KEYPERM_ROUNDS];
	uint64_t ck;           /* keys the first consumer key of each slot */
};

/* A bijective 64-bit mixer (splitmix64's finalizer): every input bit moves
 * about half the output bits. */
static inline uint64_t sv_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The round function: 12 bits of the mix of the half and the round key. */
static inline uint32_t sv_keyperm_f(uint64_t k, uint32_t half)
{
	return (uint32_t)(sv_mix64(k ^ half) >> (64 - SV_KEYPERM_HALF_BITS));
}

/* One pass of the network over 24 bits, and its inverse. */
static inline uint32_t sv_keyperm_once(const struct sv_keyperm *p, uint32_t x)
{
	uint32_t l = x >> SV_KEYPERM_HALF_BITS, r = x & SV_KEYPERM_HALF_MASK, n;

	for (unsigned int i = 0; i < SV_KEYPERM_ROUNDS; i++) {
		n = l ^ sv_keyperm_f(p->k[i], r);
		l = r;
		r = n;
	}
	return l << SV_KEYPERM_HALF_BITS | r;
}

static inline uint32_t sv_keyperm_unonce(const struct sv_keyperm *p,
					 uint32_t y)
{
	uint32_t l = y >> SV_KEYPERM_HALF_BITS, r = y & SV_KEYPERM_HALF_MASK, n;

	for (unsigned int i = SV_KEYPERM_ROUNDS; i-- > 0;) {
		n = r ^ sv_keyperm_f(p->k[i], l);
		r = l;
		l = n;
	}
	return l << SV_KEYPERM_HALF_BITS | r;
}

/* Neither 0 nor 0xffffff: the visible indices a key may have. */
static inline int sv_keyperm_index_ok(uint32_t v)
{
	return v && v <= SV_KEY_SLOT_MAX;
}

/* Round keys from seed (tests; the table takes them from getrandom). */
static inline void sv_keyperm_seed(struct sv_keyperm *p, uint64_t seed)
{
	for (unsigned int i = 0; i < SV_KEYPERM_ROUNDS; i++)
		p->k[i] = sv_mix64(seed += 0x9e3779b97f4a7c15ull);
	p->ck = sv_mix64(seed += 0x9e3779b97f4a7c15ull);
}

/* perm(slot) for slot in [1, SV_KEY_SLOT_MAX]; 0 for any other input.
 * Cycle walking: a step that lands on one of the two excluded values is
 * taken again from there. */
static inline uint32_t sv_keyperm_fwd(const struct sv_keyperm *p,
				      uint32_t slot)
{
	uint32_t y;

	if (!sv_keyperm_index_ok(slot))
		return 0;
	y = sv_keyperm_once(p, slot);
	while (!sv_keyperm_index_ok(y))
		y = sv_keyperm_once(p, y);
	return y;
}

/* The inverse: the slot whose visible index is idx, 0 if idx is 0, past
 * SV_KEY_SLOT_MAX or wider than 24 bits. */
static inline uint32_t sv_keyperm_inv(const struct sv_keyperm *p, uint32_t idx)
{
	uint32_t x;

	if (!sv_keyperm_index_ok(idx))
		return 0;
	x = sv_keyperm_unonce(p, idx);
	while (!sv_keyperm_index_ok(x))
		x = sv_keyperm_unonce(p, x);
	return x;
}

#endif /* SV_ABI_KEYPERM_H */
