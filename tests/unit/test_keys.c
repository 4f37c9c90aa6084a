// SPDX-License-Identifier: MIT
/* Unit tests of the device-wide key table (src/device/keys.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
