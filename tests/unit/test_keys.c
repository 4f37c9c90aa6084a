// SPDX-License-Identifier: MIT
/* Unit tests of the device-wide key table (src/device/ctl/keys.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "device/ctl/keys.h"

static int objs[300];

static int setup(void **state)
{
	struct sv_keytab *t = malloc(sizeof(*t));

	if (!t || sv_keytab_init(t, 1000))
		return -1;
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	sv_keytab_fini(*state);
	free(*state);
	return 0;
}

static void test_layout(void **state)
{
	(void)state;
	assert_int_equal(SV_KEY_MAKE(0xabcdef, 0x12), 0xabcdef12u);
	assert_int_equal(SV_KEY_INDEX(0xabcdef12u), 0xabcdef);
	assert_int_equal(SV_KEY_CONSUMER(0xabcdef12u), 0x12);
	assert_int_equal(SV_KEY_MAKE(1, 0x1ff), 0x1ffu);
	assert_int_equal(SV_KEY_INDEX(0xffffffffu), (1u << SV_KEY_INDEX_BITS) - 1);
}

static void test_init_limits(void **state)
{
	struct sv_keytab t;

	(void)state;
	assert_int_equal(sv_keytab_init(&t, 0), -EINVAL);
	assert_int_equal(sv_keytab_init(&t, 1u << 24), -EINVAL);
	/* index 0xffffff is never made: one slot fewer */
	assert_int_equal(sv_keytab_init(&t, (1u << 24) - 1), -EINVAL);
	assert_int_equal(sv_keytab_init(&t, (1u << 24) - 2), 0);
	sv_keytab_fini(&t);
}

static void test_alloc_lookup_free(void **state)
{
	struct sv_keytab *t = *state;
	uint32_t k[200];
	unsigned int i, j;

	for (i = 0; i < 200; i++) {
		assert_int_equal(sv_keytab_alloc(t, &objs[i], &k[i]), 0);
		assert_int_not_equal(k[i], 0);
		assert_int_not_equal(SV_KEY_INDEX(k[i]), 0);
		assert_int_not_equal(SV_KEY_INDEX(k[i]), 0xffffff);
		assert_true(sv_keyperm_inv(&t->perm, SV_KEY_INDEX(k[i])) <
			    t->nslots);
		for (j = 0; j < i; j++) {
			assert_int_not_equal(k[i], k[j]);
			assert_int_not_equal(SV_KEY_INDEX(k[i]),
					     SV_KEY_INDEX(k[j]));
		}
	}
	assert_int_equal(t->live, 200);
	for (i = 0; i < 200; i++)
		assert_ptr_equal(sv_keytab_lookup(t, k[i]), &objs[i]);
	for (i = 0; i < 200; i += 2)
		assert_int_equal(sv_keytab_free(t, k[i]), 0);
	assert_int_equal(t->live, 100);
	for (i = 0; i < 200; i++)
		if (i & 1)
			assert_ptr_equal(sv_keytab_lookup(t, k[i]), &objs[i]);
		else
			assert_null(sv_keytab_lookup(t, k[i]));
	assert_int_equal(sv_keytab_alloc(t, NULL, &k[0]), -EINVAL);
}

static void test_key_zero(void **state)
{
	struct sv_keytab *t = *state;
	uint32_t k;
	unsigned int i;

	for (i = 0; i < 300; i++) {
		assert_int_equal(sv_keytab_alloc(t, &objs[i], &k), 0);
		assert_int_not_equal(SV_KEY_INDEX(k), 0);
		if (i % 3 == 0)
			assert_int_equal(sv_keytab_free(t, k), 0);
	}
	for (i = 0; i < 256; i++)
		assert_null(sv_keytab_lookup(t, SV_KEY_MAKE(0, i)));
	assert_int_equal(sv_keytab_free(t, 0), -ENOENT);
	assert_int_equal(sv_keytab_rekey(t, 0, 5, &k), -ENOENT);
}

static void test_stale_consumer(void **state)
{
	struct sv_keytab *t = *state;
	uint32_t k, bad;
	unsigned int ck;

	assert_int_equal(sv_keytab_alloc(t, &objs[0], &k), 0);
	for (ck = 0; ck < 256; ck++) {
		bad = SV_KEY_MAKE(SV_KEY_INDEX(k), ck);
		if (bad == k)
			continue;
		assert_null(sv_keytab_lookup(t, bad));
		assert_int_equal(sv_keytab_free(t, bad), -ENOENT);
		assert_int_equal(sv_keytab_rekey(t, bad, 1, &bad), -ENOENT);
	}
	assert_ptr_equal(sv_keytab_lookup(t, k), &objs[0]);
	assert_int_equal(t->live, 1);
}

static void test_reuse_new_key(void **state)
{
	struct sv_keytab *t = *state;
	uint32_t k, n, seen[256];
	unsigned int i, j;

	assert_int_equal(sv_keytab_alloc(t, &objs[0], &k), 0);
	seen[0] = k;
	/* the same slot comes back with a new key for the next 255 reuses */
	for (i = 1; i < 256; i++) {
		assert_int_equal(sv_keytab_free(t, k), 0);
		assert_null(sv_keytab_lookup(t, k));
		assert_int_equal(sv_keytab_free(t, k), -ENOENT);
		assert_int_equal(sv_keytab_alloc(t, &objs[i], &n), 0);
		assert_int_equal(SV_KEY_INDEX(n), SV_KEY_INDEX(k));
		assert_int_not_equal(n, k);
		for (j = 0; j < i; j++) {
			assert_int_not_equal(n, seen[j]);
			assert_null(sv_keytab_lookup(t, seen[j]));
		}
		assert_ptr_equal(sv_keytab_lookup(t, n), &objs[i]);
		seen[i] = k = n;
	}
	assert_int_equal(t->live, 1);
}

static void test_rekey(void **state)
{
	struct sv_keytab *t = *state;
	uint32_t k, k2, n, other;

	assert_int_equal(sv_keytab_alloc(t, &objs[0], &k), 0);
	assert_int_equal(sv_keytab_alloc(t, &objs[1], &other), 0);
	assert_int_equal(sv_keytab_rekey(t, k, SV_KEY_CONSUMER(k) ^ 0x5a, &n),
			 0);
	assert_int_equal(SV_KEY_INDEX(n), SV_KEY_INDEX(k));
	assert_int_equal(SV_KEY_CONSUMER(n), SV_KEY_CONSUMER(k) ^ 0x5a);
	assert_null(sv_keytab_lookup(t, k));
	assert_ptr_equal(sv_keytab_lookup(t, n), &objs[0]);
	assert_ptr_equal(sv_keytab_lookup(t, other), &objs[1]);
	/* the old key no longer names the slot for anything */
	assert_int_equal(sv_keytab_rekey(t, k, 7, &k2), -ENOENT);
	assert_int_equal(sv_keytab_free(t, k), -ENOENT);
	/* rekey to the same consumer key is allowed */
	assert_int_equal(sv_keytab_rekey(t, n, SV_KEY_CONSUMER(n), &k2), 0);
	assert_int_equal(k2, n);
	/* a freed slot cannot be rekeyed */
	assert_int_equal(sv_keytab_free(t, n), 0);
	assert_int_equal(sv_keytab_rekey(t, n, 9, &k2), -ENOENT);
	assert_null(sv_keytab_lookup(t, SV_KEY_MAKE(SV_KEY_INDEX(n), 9)));
	/* the next tenant advances from the rekeyed consumer key */
	assert_int_equal(sv_keytab_alloc(t, &objs[2], &k2), 0);
	assert_int_equal(k2, SV_KEY_MAKE(SV_KEY_INDEX(n),
					 SV_KEY_CONSUMER(n) + 1));
	assert_null(sv_keytab_lookup(t, n));
}

static void test_enospc(void **state)
{
	struct sv_keytab t;
	uint32_t k[100], x;
	unsigned int i;

	(void)state;
	assert_int_equal(sv_keytab_init(&t, 100), 0);
	for (i = 0; i < 100; i++) {
		assert_int_equal(sv_keytab_alloc(&t, &objs[i], &k[i]), 0);
		assert_true(t.nslots <= 101);
	}
	assert_int_equal(sv_keytab_alloc(&t, &objs[0], &x), -ENOSPC);
	for (i = 0; i < 100; i++)
		assert_ptr_equal(sv_keytab_lookup(&t, k[i]), &objs[i]);
	assert_int_equal(sv_keytab_free(&t, k[17]), 0);
	assert_int_equal(sv_keytab_alloc(&t, &objs[0], &x), 0);
	assert_int_equal(SV_KEY_INDEX(x), SV_KEY_INDEX(k[17]));
	assert_int_equal(sv_keytab_alloc(&t, &objs[0], &x), -ENOSPC);
	sv_keytab_fini(&t);

	assert_int_equal(sv_keytab_init(&t, 1), 0);
	assert_int_equal(sv_keytab_alloc(&t, &objs[0], &x), 0);
	assert_int_equal(SV_KEY_INDEX(x), sv_keyperm_fwd(&t.perm, 1));
	assert_int_equal(sv_keytab_alloc(&t, &objs[0], &x), -ENOSPC);
	sv_keytab_fini(&t);
}

static void test_random_sweep(void **state)
{
	struct sv_keytab *t = *state;
	uint32_t k[64], v;
	unsigned int i, j;

	for (i = 0; i < 64; i++)
		assert_int_equal(sv_keytab_alloc(t, &objs[i], &k[i]), 0);
	for (i = 0; i < 64; i += 4)
		assert_int_equal(sv_keytab_free(t, k[i]), 0);
	srand(4242);
	for (i = 0; i < 1000000; i++) {
		v = (uint32_t)rand() << 16 ^ (uint32_t)rand();
		if (i & 1) /* the indices of real slots */
			v = SV_KEY_MAKE(sv_keyperm_fwd(&t->perm,
						       SV_KEY_INDEX(v) %
						       (t->nslots + 4)), v);
		for (j = 0; j < 64; j++)
			if (v == k[j])
				break;
		if (j < 64 && (j % 4)) {
			assert_ptr_equal(sv_keytab_lookup(t, v), &objs[j]);
			continue;
		}
		assert_null(sv_keytab_lookup(t, v));
		assert_int_equal(sv_keytab_free(t, v), -ENOENT);
	}
	/* the boundaries */
	assert_null(sv_keytab_lookup(t, 0xffffffffu));
	assert_null(sv_keytab_lookup(t, SV_KEY_MAKE(sv_keyperm_fwd(&t->perm,
								   t->nslots),
						    0)));
	assert_int_equal(t->live, 48);
}

/* A slot says which kind of object it holds. */
static void test_kinds(void **state)
{
	struct sv_keytab *t = *state;
	uint32_t kmr, kmw, x;
	unsigned int kind = 99;

	assert_int_equal(sv_keytab_alloc(t, &objs[0], &kmr), 0);
	assert_int_equal(sv_keytab_alloc_kind(t, &objs[1], SV_KEY_MW, &kmw), 0);
	assert_int_equal(sv_keytab_alloc_kind(t, &objs[2], 2, &x), -EINVAL);
	assert_int_equal(sv_keytab_alloc_kind(t, &objs[2], ~0u, &x), -EINVAL);
	assert_int_equal(sv_keytab_alloc_kind(t, NULL, SV_KEY_MW, &x), -EINVAL);
	assert_int_equal(t->live, 2);

	assert_ptr_equal(sv_keytab_find(t, kmr, &kind), &objs[0]);
	assert_int_equal(kind, SV_KEY_MR);
	assert_ptr_equal(sv_keytab_find(t, kmw, &kind), &objs[1]);
	assert_int_equal(kind, SV_KEY_MW);
	assert_ptr_equal(sv_keytab_lookup(t, kmw), &objs[1]);
	kind = 99;
	assert_null(sv_keytab_find(t, kmw ^ 1, &kind));
	assert_int_equal(kind, 99);             /* untouched on a miss */

	/* a freed MW slot reused for an MR reports the MR */
	assert_int_equal(sv_keytab_free(t, kmw), 0);
	assert_int_equal(sv_keytab_alloc(t, &objs[3], &x), 0);
	assert_int_equal(SV_KEY_INDEX(x), SV_KEY_INDEX(kmw));
	assert_ptr_equal(sv_keytab_find(t, x, &kind), &objs[3]);
	assert_int_equal(kind, SV_KEY_MR);
	assert_null(sv_keytab_by_index(t, x, SV_KEY_MW));
}

/* by index: the consumer byte does not matter, the kind and liveness do */
static void test_by_index(void **state)
{
	struct sv_keytab *t = *state;
	uint32_t kmr, kmw, n;
	unsigned int ck;

	assert_int_equal(sv_keytab_alloc(t, &objs[0], &kmr), 0);
	assert_int_equal(sv_keytab_alloc_kind(t, &objs[1], SV_KEY_MW, &kmw), 0);
	for (ck = 0; ck < 256; ck++) {
		uint32_t a = SV_KEY_MAKE(SV_KEY_INDEX(kmr), ck);
		uint32_t b = SV_KEY_MAKE(SV_KEY_INDEX(kmw), ck);

		assert_ptr_equal(sv_keytab_by_index(t, a, SV_KEY_MR), &objs[0]);
		assert_null(sv_keytab_by_index(t, a, SV_KEY_MW));
		assert_ptr_equal(sv_keytab_by_index(t, b, SV_KEY_MW), &objs[1]);
		assert_null(sv_keytab_by_index(t, b, SV_KEY_MR));
		/* ... while exact lookups want the current byte */
		if (a != kmr)
			assert_null(sv_keytab_lookup(t, a));
		if (b != kmw)
			assert_null(sv_keytab_lookup(t, b));
	}
	/* after a rekey, by index still finds it; the old key is refused */
	assert_int_equal(sv_keytab_rekey(t, kmw, SV_KEY_CONSUMER(kmw) + 7, &n), 0);
	assert_ptr_equal(sv_keytab_by_index(t, kmw, SV_KEY_MW), &objs[1]);
	assert_null(sv_keytab_lookup(t, kmw));
	assert_ptr_equal(sv_keytab_lookup(t, n), &objs[1]);
	/* index 0, past the table, free slots: nothing */
	for (ck = 0; ck < 256; ck++) {
		assert_null(sv_keytab_by_index(t, SV_KEY_MAKE(0, ck), SV_KEY_MR));
		assert_null(sv_keytab_by_index(t, SV_KEY_MAKE(0, ck), SV_KEY_MW));
	}
	assert_null(sv_keytab_by_index(t, SV_KEY_MAKE(sv_keyperm_fwd(&t->perm,
								     t->nslots),
						      0), SV_KEY_MR));
	assert_null(sv_keytab_by_index(t, 0xffffffffu, SV_KEY_MR));
	assert_null(sv_keytab_by_index(t, SV_KEY_MAKE(sv_keyperm_fwd(&t->perm,
		sv_keyperm_inv(&t->perm, SV_KEY_INDEX(kmr)) + 2), 0),
				       SV_KEY_MR));
	assert_int_equal(sv_keytab_free(t, kmr), 0);
	assert_null(sv_keytab_by_index(t, kmr, SV_KEY_MR));
	assert_null(sv_keytab_by_index(t, kmr, SV_KEY_MW));
}

/* The free list ends at index 0: fill a table to max through its growth,
 * free all, fill again: every slot comes back, none twice. */
static void test_free_list_full_cycle(void **state)
{
	enum { N = 300 };
	static uint8_t seen[N + 1];
	struct sv_keytab t;
	uint32_t k[N], x;
	unsigned int i, round;

	(void)state;
	assert_int_equal(sv_keytab_init(&t, N), 0);
	for (round = 0; round < 3; round++) {
		memset(seen, 0, sizeof(seen));
		for (i = 0; i < N; i++) {
			assert_int_equal(sv_keytab_alloc_kind(&t, &objs[i],
							      i & 1, &k[i]), 0);
			uint32_t slot = sv_keyperm_inv(&t.perm,
						       SV_KEY_INDEX(k[i]));

			assert_true(slot >= 1 && slot <= N);
			assert_false(seen[slot]);
			seen[slot] = 1;
		}
		assert_int_equal(sv_keytab_alloc(&t, &objs[0], &x), -ENOSPC);
		for (i = 0; i < N; i++) {
			unsigned int kind;

			assert_ptr_equal(sv_keytab_find(&t, k[i], &kind),
					 &objs[i]);
			assert_int_equal(kind, i & 1);
		}
		for (i = 0; i < N; i++)
			assert_int_equal(sv_keytab_free(&t, k[(i * 7) % N]), 0);
		assert_int_equal(t.live, 0);
	}
	sv_keytab_fini(&t);
}

/* ---- the secret permutation of the slots ---- */

/* Over the whole range, for two seeds: every slot gets an index in
 * [1, 2^24 - 2], no index twice, and the inverse takes it back; what is out
 * of range maps to 0 both ways. */
static void test_perm_bijective(void **state)
{
	static uint8_t seen[(1u << SV_KEY_INDEX_BITS) / 8];
	const uint64_t seeds[] = { 1, 0x5eedf00dcafeull };
	struct sv_keyperm p;

	(void)state;
	for (unsigned int s = 0; s < 2; s++) {
		uint32_t fixed = 0;

		sv_keyperm_seed(&p, seeds[s]);
		memset(seen, 0, sizeof(seen));
		for (uint32_t x = 1; x <= SV_KEY_SLOT_MAX; x++) {
			uint32_t y = sv_keyperm_fwd(&p, x);

			if (y == 0 || y > SV_KEY_SLOT_MAX)
				fail_msg("slot %#x -> index %#x", x, y);
			if (seen[y >> 3] & (1u << (y & 7)))
				fail_msg("index %#x twice (slot %#x)", y, x);
			seen[y >> 3] |= (uint8_t)(1u << (y & 7));
			if (sv_keyperm_inv(&p, y) != x)
				fail_msg("inv(fwd(%#x)) = %#x", x,
					 sv_keyperm_inv(&p, y));
			fixed += y == x;
		}
		/* a random permutation fixes about one point */
		assert_true(fixed < 16);
		assert_int_equal(sv_keyperm_fwd(&p, 0), 0);
		assert_int_equal(sv_keyperm_fwd(&p, 0xffffff), 0);
		assert_int_equal(sv_keyperm_fwd(&p, 1u << 24), 0);
		assert_int_equal(sv_keyperm_fwd(&p, ~0u), 0);
		assert_int_equal(sv_keyperm_inv(&p, 0), 0);
		assert_int_equal(sv_keyperm_inv(&p, 0xffffff), 0);
		assert_int_equal(sv_keyperm_inv(&p, 1u << 24), 0);
		assert_int_equal(sv_keyperm_inv(&p, ~0u), 0);
	}
}

/* Two devices (two seeds, or two tables from getrandom) give their first
 * slots different indices: the secret is per device. */
static void test_perm_per_device(void **state)
{
	struct sv_keytab a, b;
	unsigned int same = 0;

	(void)state;
	assert_int_equal(sv_keytab_init(&a, 100), 0);
	assert_int_equal(sv_keytab_init(&b, 100), 0);
	for (uint32_t x = 1; x <= 100; x++)
		same += sv_keyperm_fwd(&a.perm, x) == sv_keyperm_fwd(&b.perm, x);
	assert_true(same < 3);
	sv_keytab_fini(&a);
	sv_keytab_fini(&b);
	assert_int_equal(sv_keytab_init_seeded(&a, 100, 7), 0);
	assert_int_equal(sv_keytab_init_seeded(&b, 100, 7), 0);
	for (uint32_t x = 1; x <= 100; x++)
		assert_int_equal(sv_keyperm_fwd(&a.perm, x),
				 sv_keyperm_fwd(&b.perm, x));
	sv_keytab_fini(&a);
	sv_keytab_fini(&b);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static bool is_live(const uint32_t *sorted, unsigned int n, uint32_t k)
{
	return bsearch(&k, sorted, n, sizeof(k), cmp_u32) != NULL;
}

/*
 * A table of 10,000 live keys (as a device holding 10,000 MRs) under the
 * attacks a peer can make. With N live keys among 2^32, any key it tries
 * is live with probability N / 2^32 whatever the scheme, so a sweep of S
 * keys expects S * N / 2^32 hits by chance; the checks allow the chance
 * hits up to a bound the Poisson tail makes impossible in practice (and
 * the seeds are fixed, so the counts are too):
 *  - the neighbour sweep: from one live key, every consumer key of the 64
 *    indices around it, and of the indices 1 .. 1024 (the first slots):
 *    278,528 keys, 0.65 expected, at most 5 may resolve; with sequential
 *    indices (the table before the permutation) 1,088 resolve;
 *  - 10^6 uniformly random keys: 2.33 expected; at most 15 may resolve.
 */
static void test_guessing(void **state)
{
	enum { N = 10000, NEAR = 32, LOW = 1024, DRAWS = 1000000 };
	static uint32_t k[N], sorted[N];
	struct sv_keytab t;
	unsigned int near = 0, nrand = 0, far = 0;
	uint64_t rs = 0x243f6a8885a308d3ull;

	(void)state;
	assert_int_equal(sv_keytab_init_seeded(&t, N, 0xfeedbeef), 0);
	for (unsigned int i = 0; i < N; i++)
		assert_int_equal(sv_keytab_alloc(&t, &objs[i % 300], &k[i]), 0);
	memcpy(sorted, k, sizeof(k));
	qsort(sorted, N, sizeof(sorted[0]), cmp_u32);
	/* consecutive keys are not neighbours: their indices differ by more
	 * than 2^16 about 99% of the time when they look random */
	for (unsigned int i = 1; i < N; i++) {
		int32_t d = (int32_t)(SV_KEY_INDEX(k[i]) - SV_KEY_INDEX(k[i - 1]));

		far += d > 65536 || d < -65536;
	}
	print_message("consecutive keys %u apart of %u\n", far, N - 1);
	assert_true(far > (N - 1) * 95 / 100);

	for (int d = -NEAR; d <= NEAR; d++) {
		uint32_t idx = SV_KEY_INDEX(k[N / 2]) + (uint32_t)d;

		if (!d)
			continue;
		for (uint32_t ck = 0; ck < 256; ck++) {
			uint32_t v = SV_KEY_MAKE(idx, ck);

			if (sv_keytab_lookup(&t, v)) {
				assert_true(is_live(sorted, N, v));
				near++;
			}
		}
	}
	for (uint32_t idx = 1; idx <= LOW; idx++)
		for (uint32_t ck = 0; ck < 256; ck++)
			if (sv_keytab_lookup(&t, SV_KEY_MAKE(idx, ck)))
				near++;
	print_message("neighbour sweep: %u of %u keys live (%.2f expected "
		      "by chance)\n", near, (2 * NEAR + LOW) * 256,
		      (2.0 * NEAR + LOW) * 256 * N / 4294967296.0);
	assert_true(near <= 5);

	for (unsigned int i = 0; i < DRAWS; i++) {
		uint32_t v;

		rs ^= rs << 13;
		rs ^= rs >> 7;
		rs ^= rs << 17;
		v = (uint32_t)(rs >> 16);
		if (sv_keytab_lookup(&t, v)) {
			assert_true(is_live(sorted, N, v));
			nrand++;
		}
	}
	print_message("%u random keys: %u resolve (%.2f expected)\n", DRAWS,
		      nrand, (double)DRAWS * N / 4294967296.0);
	assert_true(nrand <= 15);
	sv_keytab_fini(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_init_limits),
		cmocka_unit_test_setup_teardown(test_alloc_lookup_free, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_key_zero, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_consumer, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reuse_new_key, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rekey, setup, teardown),
		cmocka_unit_test(test_enospc),
		cmocka_unit_test_setup_teardown(test_random_sweep, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_kinds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_by_index, setup, teardown),
		cmocka_unit_test(test_free_list_full_cycle),
		cmocka_unit_test(test_perm_bijective),
		cmocka_unit_test(test_perm_per_device),
		cmocka_unit_test(test_guessing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
