// SPDX-License-Identifier: MIT
/* Unit tests of the device-wide key table (src/device/keys.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "device/keys.h"

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
	assert_int_equal(sv_keytab_init(&t, (1u << 24) - 1), 0);
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
		assert_true(SV_KEY_INDEX(k[i]) < t->nslots);
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
	assert_int_equal(SV_KEY_INDEX(x), 1);
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
		if (i & 1) /* small indices hit real slots */
			v = SV_KEY_MAKE(SV_KEY_INDEX(v) % (t->nslots + 4), v);
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
	assert_null(sv_keytab_lookup(t, SV_KEY_MAKE(t->nslots, 0)));
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
	assert_null(sv_keytab_by_index(t, SV_KEY_MAKE(t->nslots, 0), SV_KEY_MR));
	assert_null(sv_keytab_by_index(t, 0xffffffffu, SV_KEY_MR));
	assert_null(sv_keytab_by_index(t, SV_KEY_MAKE(SV_KEY_INDEX(kmr) + 2, 0),
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
			assert_true(SV_KEY_INDEX(k[i]) >= 1 &&
				    SV_KEY_INDEX(k[i]) <= N);
			assert_false(seen[SV_KEY_INDEX(k[i])]);
			seen[SV_KEY_INDEX(k[i])] = 1;
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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
