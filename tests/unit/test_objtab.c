// SPDX-License-Identifier: MIT
/* Unit tests of the per-client object tables (src/device/ctl/objtab.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "device/ctl/objtab.h"

#define H_IDX1(h) ((uint32_t)((h) & 0xffffff))
#define H_TYPE(h) ((unsigned int)(((h) >> 24) & 0xff))
#define H_GEN(h)  ((uint32_t)((h) >> 32))

static int objs[64];

static int setup(void **state)
{
	struct sv_objtab *t = malloc(sizeof(*t));

	if (!t || sv_objtab_init(t, 1000))
		return -1;
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	sv_objtab_fini(*state);
	free(*state);
	return 0;
}

static void test_init_limits(void **state)
{
	struct sv_objtab t;

	(void)state;
	assert_int_equal(sv_objtab_init(&t, 0), -EINVAL);
	assert_int_equal(sv_objtab_init(&t, 1u << 24), -EINVAL);
	assert_int_equal(sv_objtab_init(&t, (1u << 24) - 1), 0);
	sv_objtab_fini(&t);
	assert_int_equal(sv_objtab_init(&t, 1), 0);
	sv_objtab_fini(&t);
}

static void test_insert_lookup_remove(void **state)
{
	struct sv_objtab *t = *state;
	uint64_t h;

	assert_int_equal(sv_objtab_insert(t, SV_OBJ_PD, &objs[0], &h), 0);
	assert_int_not_equal(h, 0);
	assert_int_equal(H_TYPE(h), SV_OBJ_PD);
	assert_int_not_equal(H_IDX1(h), 0);
	assert_ptr_equal(sv_objtab_lookup(t, h, SV_OBJ_PD), &objs[0]);
	assert_int_equal(t->live, 1);
	assert_int_equal(t->count[SV_OBJ_PD], 1);
	assert_ptr_equal(sv_objtab_remove(t, h, SV_OBJ_PD), &objs[0]);
	assert_null(sv_objtab_lookup(t, h, SV_OBJ_PD));
	assert_null(sv_objtab_remove(t, h, SV_OBJ_PD));
	assert_int_equal(t->live, 0);
	assert_int_equal(t->count[SV_OBJ_PD], 0);
}

static void test_bad_insert(void **state)
{
	struct sv_objtab *t = *state;
	uint64_t h = 0;

	assert_int_equal(sv_objtab_insert(t, SV_OBJ_NONE, &objs[0], &h),
			 -EINVAL);
	assert_int_equal(sv_objtab_insert(t, SV_OBJ_TYPE_MAX, &objs[0], &h),
			 -EINVAL);
	assert_int_equal(sv_objtab_insert(t, 0x1ff, &objs[0], &h), -EINVAL);
	assert_int_equal(sv_objtab_insert(t, SV_OBJ_PD, NULL, &h), -EINVAL);
	assert_int_equal(t->live, 0);
}

static void test_wrong_type(void **state)
{
	struct sv_objtab *t = *state;
	unsigned int type;
	uint64_t h, forged;

	assert_int_equal(sv_objtab_insert(t, SV_OBJ_CQ, &objs[1], &h), 0);
	for (type = 0; type < 300; type++) {
		if (type == SV_OBJ_CQ)
			continue;
		assert_null(sv_objtab_lookup(t, h, type));
		assert_null(sv_objtab_remove(t, h, type));
	}
	/* the type byte of the handle itself is checked too */
	forged = (h & ~(0xffull << 24)) | (uint64_t)SV_OBJ_QP << 24;
	assert_null(sv_objtab_lookup(t, forged, SV_OBJ_QP));
	assert_null(sv_objtab_lookup(t, forged, SV_OBJ_CQ));
	assert_ptr_equal(sv_objtab_lookup(t, h, SV_OBJ_CQ), &objs[1]);
	assert_int_equal(t->live, 1);
}

static void test_stale_handle(void **state)
{
	struct sv_objtab *t = *state;
	uint64_t h1, h2;

	assert_int_equal(sv_objtab_insert(t, SV_OBJ_MR, &objs[0], &h1), 0);
	assert_non_null(sv_objtab_remove(t, h1, SV_OBJ_MR));
	/* the freed slot is reused, with a new generation */
	assert_int_equal(sv_objtab_insert(t, SV_OBJ_MR, &objs[1], &h2), 0);
	assert_int_equal(H_IDX1(h1), H_IDX1(h2));
	assert_int_not_equal(H_GEN(h1), H_GEN(h2));
	assert_null(sv_objtab_lookup(t, h1, SV_OBJ_MR));
	assert_null(sv_objtab_remove(t, h1, SV_OBJ_MR));
	assert_ptr_equal(sv_objtab_lookup(t, h2, SV_OBJ_MR), &objs[1]);
}

static void test_generation_zero_never_valid(void **state)
{
	struct sv_objtab *t = *state;
	uint64_t h;

	assert_int_equal(sv_objtab_insert(t, SV_OBJ_PD, &objs[0], &h), 0);
	assert_int_not_equal(H_GEN(h), 0);
	assert_null(sv_objtab_lookup(t, h & 0xffffffffull, SV_OBJ_PD));
	/* force a wrap of the slot's generation: the bump skips 0 */
	t->slots[H_IDX1(h) - 1].gen = UINT32_MAX;
	h = (uint64_t)UINT32_MAX << 32 | (h & 0xffffffffull);
	assert_ptr_equal(sv_objtab_remove(t, h, SV_OBJ_PD), &objs[0]);
	assert_int_equal(sv_objtab_insert(t, SV_OBJ_PD, &objs[1], &h), 0);
	assert_int_equal(H_GEN(h), 1);
}

static void test_garbage_handles(void **state)
{
	struct sv_objtab *t = *state;
	uint64_t h, issued[20], v;
	unsigned int i, j, type;

	for (i = 0; i < 20; i++)
		assert_int_equal(sv_objtab_insert(t, 1 + i % (SV_OBJ_TYPE_MAX - 1),
						  &objs[i], &issued[i]), 0);
	h = issued[0];
	for (type = 0; type < SV_OBJ_TYPE_MAX; type++) {
		assert_null(sv_objtab_lookup(t, 0, type));
		assert_null(sv_objtab_lookup(t, ~0ull, type));
		/* index 0 (idx+1 == 0) */
		assert_null(sv_objtab_lookup(t, h & ~0xffffffull, type));
		/* just past the slots, and the largest index */
		v = (h & ~0xffffffull) | (t->nslots + 1);
		assert_null(sv_objtab_lookup(t, v, type));
		assert_null(sv_objtab_lookup(t, (h & ~0xffffffull) | 0xffffff,
					     type));
		assert_null(sv_objtab_remove(t, v, type));
	}
	/* random values: never issued, so never resolve (and never crash) */
	srand(12345);
	for (i = 0; i < 200000; i++) {
		v = (uint64_t)rand() << 62 ^ (uint64_t)rand() << 31 ^ rand();
		if (i & 1) /* keep a plausible low half to hit real slots */
			v = (v & ~0xffffffffull) | (issued[i % 20] & 0xffffffff);
		for (j = 0; j < 20; j++)
			if (v == issued[j])
				break;
		if (j < 20)
			continue;
		type = H_TYPE(v) < SV_OBJ_TYPE_MAX ? H_TYPE(v) : i % 300;
		assert_null(sv_objtab_lookup(t, v, type));
	}
	assert_int_equal(t->live, 20);
}

static void test_never_issued(void **state)
{
	struct sv_objtab *t = *state;
	struct sv_objtab b;
	uint64_t h[8], v;
	unsigned int i;

	for (i = 0; i < 8; i++)
		assert_int_equal(sv_objtab_insert(t, SV_OBJ_PD, &objs[i], &h[i]),
				 0);
	/* neighbours of an issued handle in every field */
	for (i = 0; i < 8; i++) {
		v = h[i] + (1ull << 32);
		assert_null(sv_objtab_lookup(t, v, SV_OBJ_PD));
		v = h[i] - (1ull << 32);
		assert_null(sv_objtab_lookup(t, v, SV_OBJ_PD));
		v = h[i] ^ (1ull << 63);
		assert_null(sv_objtab_lookup(t, v, SV_OBJ_PD));
	}
	/* a slot allocated (by growth) but never filled */
	v = (h[0] & ~0xffffffull) | (H_IDX1(h[7]) + 1);
	assert_true(H_IDX1(v) <= t->nslots);
	assert_null(sv_objtab_lookup(t, v, SV_OBJ_PD));

	/* a second table that issued fewer handles resolves none of the rest */
	assert_int_equal(sv_objtab_init(&b, 100), 0);
	assert_int_equal(sv_objtab_insert(&b, SV_OBJ_PD, &objs[0], &v), 0);
	for (i = 1; i < 8; i++)
		assert_null(sv_objtab_lookup(&b, h[i], SV_OBJ_PD));
	sv_objtab_fini(&b);
}

static void test_enospc_and_growth(void **state)
{
	struct sv_objtab t;
	uint64_t h[100], x;
	unsigned int i;

	(void)state;
	assert_int_equal(sv_objtab_init(&t, 100), 0);
	for (i = 0; i < 100; i++) {
		assert_int_equal(sv_objtab_insert(&t, SV_OBJ_CQ, &objs[i % 64],
						  &h[i]), 0);
		assert_true(t.nslots <= 100);
		assert_true(t.nslots >= t.live);
	}
	assert_int_equal(t.nslots, 100);
	assert_int_equal(sv_objtab_insert(&t, SV_OBJ_CQ, &objs[0], &x),
			 -ENOSPC);
	assert_int_equal(sv_objtab_insert(&t, SV_OBJ_PD, &objs[0], &x),
			 -ENOSPC);
	/* every handle still resolves after all the reallocs */
	for (i = 0; i < 100; i++)
		assert_ptr_equal(sv_objtab_lookup(&t, h[i], SV_OBJ_CQ),
				 &objs[i % 64]);
	/* one free makes room for exactly one */
	assert_non_null(sv_objtab_remove(&t, h[42], SV_OBJ_CQ));
	assert_int_equal(sv_objtab_insert(&t, SV_OBJ_PD, &objs[0], &x), 0);
	assert_int_equal(H_IDX1(x), H_IDX1(h[42]));
	assert_int_equal(sv_objtab_insert(&t, SV_OBJ_PD, &objs[0], &x),
			 -ENOSPC);
	sv_objtab_fini(&t);

	assert_int_equal(sv_objtab_init(&t, 1), 0);
	assert_int_equal(sv_objtab_insert(&t, SV_OBJ_AH, &objs[0], &x), 0);
	assert_int_equal(sv_objtab_insert(&t, SV_OBJ_AH, &objs[0], &x),
			 -ENOSPC);
	sv_objtab_fini(&t);
}

static void test_slot_reuse(void **state)
{
	struct sv_objtab *t = *state;
	uint64_t h[10], n;
	uint32_t nslots;
	unsigned int i, round;

	for (i = 0; i < 10; i++)
		assert_int_equal(sv_objtab_insert(t, SV_OBJ_QP, &objs[i], &h[i]),
				 0);
	nslots = t->nslots;
	/* churn: the table does not grow while slots are free */
	for (round = 0; round < 1000; round++) {
		i = round % 10;
		assert_ptr_equal(sv_objtab_remove(t, h[i], SV_OBJ_QP), &objs[i]);
		assert_int_equal(sv_objtab_insert(t, SV_OBJ_QP, &objs[i], &n),
				 0);
		assert_int_equal(H_IDX1(n), H_IDX1(h[i]));
		assert_int_equal(H_GEN(n), H_GEN(h[i]) + 1);
		assert_null(sv_objtab_lookup(t, h[i], SV_OBJ_QP));
		h[i] = n;
	}
	assert_int_equal(t->nslots, nslots);
	assert_int_equal(t->live, 10);
	for (i = 0; i < 10; i++)
		assert_ptr_equal(sv_objtab_lookup(t, h[i], SV_OBJ_QP), &objs[i]);
}

static void test_counts(void **state)
{
	struct sv_objtab *t = *state;
	uint64_t h[SV_OBJ_TYPE_MAX][3];
	unsigned int type, i;

	for (type = 1; type < SV_OBJ_TYPE_MAX; type++)
		for (i = 0; i < type % 3 + 1; i++)
			assert_int_equal(sv_objtab_insert(t, type, &objs[type],
							  &h[type][i]), 0);
	for (type = 1; type < SV_OBJ_TYPE_MAX; type++)
		assert_int_equal(t->count[type], type % 3 + 1);
	assert_int_equal(t->count[SV_OBJ_NONE], 0);
	for (type = 1; type < SV_OBJ_TYPE_MAX; type++)
		assert_non_null(sv_objtab_remove(t, h[type][0], type));
	for (type = 1; type < SV_OBJ_TYPE_MAX; type++)
		assert_int_equal(t->count[type], type % 3);
}

struct visit {
	unsigned int n;
	unsigned int type[64];
	void *obj[64];
	uint64_t handle[64];
};

static void visit_fn(void *arg, unsigned int type, void *obj, uint64_t handle)
{
	struct visit *v = arg;

	assert_true(v->n < 64);
	v->type[v->n] = type;
	v->obj[v->n] = obj;
	v->handle[v->n] = handle;
	v->n++;
}

static void test_foreach_order(void **state)
{
	static const unsigned int order[] = {
		SV_OBJ_PD, SV_OBJ_QP, SV_OBJ_CQ, SV_OBJ_AH, SV_OBJ_PD,
		SV_OBJ_CHANNEL, SV_OBJ_MR, SV_OBJ_QP, SV_OBJ_SRQ, SV_OBJ_MW,
		SV_OBJ_XRCD, SV_OBJ_CQ,
	};
	struct sv_objtab *t = *state;
	struct visit v = { 0 };
	uint64_t h[12];
	unsigned int i, j;

	sv_objtab_foreach(t, visit_fn, &v);
	assert_int_equal(v.n, 0);
	for (i = 0; i < 12; i++)
		assert_int_equal(sv_objtab_insert(t, order[i], &objs[i], &h[i]),
				 0);
	assert_non_null(sv_objtab_remove(t, h[7], SV_OBJ_QP));
	sv_objtab_foreach(t, visit_fn, &v);
	assert_int_equal(v.n, 11);
	for (i = 1; i < v.n; i++)
		assert_true(v.type[i - 1] >= v.type[i]);
	assert_int_equal(v.type[0], SV_OBJ_AH);
	assert_int_equal(v.type[v.n - 1], SV_OBJ_CHANNEL);
	/* every visit is a live object with its own handle, each once */
	for (i = 0; i < v.n; i++) {
		for (j = 0; j < 12; j++)
			if (h[j] == v.handle[i])
				break;
		assert_true(j < 12 && j != 7);
		assert_ptr_equal(v.obj[i], &objs[j]);
		assert_int_equal(v.type[i], order[j]);
		for (j = i + 1; j < v.n; j++)
			assert_int_not_equal(v.handle[i], v.handle[j]);
	}
}

/* An importer's table: handles carry SV_OBJTAB_IMPORT_BIT, and neither
 * table answers the other's handles; widen finds a live handle from its
 * low 32 bits only. */
static void test_import_tables(void **state)
{
	struct sv_objtab *t = *state, imp;
	uint64_t h, hi;

	assert_int_equal(sv_objtab_init(&imp, 1000), 0);
	assert_int_equal(sv_objtab_insert(&imp, SV_OBJ_PD, &objs[1], &hi), 0);
	assert_int_equal(sv_objtab_mark_import(&imp), -EBUSY);
	assert_non_null(sv_objtab_remove(&imp, hi, SV_OBJ_PD));
	assert_int_equal(sv_objtab_mark_import(&imp), 0);
	assert_int_equal(sv_objtab_insert(t, SV_OBJ_PD, &objs[0], &h), 0);
	assert_int_equal(sv_objtab_insert(&imp, SV_OBJ_PD, &objs[1], &hi), 0);
	assert_true(hi & SV_OBJTAB_IMPORT_BIT);
	assert_false(h & SV_OBJTAB_IMPORT_BIT);
	assert_ptr_equal(sv_objtab_lookup(&imp, hi, SV_OBJ_PD), &objs[1]);
	assert_null(sv_objtab_lookup(&imp, h, SV_OBJ_PD));
	assert_null(sv_objtab_lookup(t, hi, SV_OBJ_PD));
	assert_null(sv_objtab_lookup(&imp, hi & ~(uint64_t)SV_OBJTAB_IMPORT_BIT,
				     SV_OBJ_PD));
	/* widen: the whole handle, only for a live object of that type */
	assert_int_equal(sv_objtab_widen(t, (uint32_t)h, SV_OBJ_PD), h);
	assert_int_equal(sv_objtab_widen(&imp, (uint32_t)hi, SV_OBJ_PD), hi);
	assert_int_equal(sv_objtab_widen(t, (uint32_t)h, SV_OBJ_MR), 0);
	assert_int_equal(sv_objtab_widen(t, (uint32_t)hi, SV_OBJ_PD), 0);
	assert_int_equal(sv_objtab_widen(t, 0, SV_OBJ_PD), 0);
	assert_int_equal(sv_objtab_widen(t, 0xffffffffu, SV_OBJ_PD), 0);
	assert_non_null(sv_objtab_remove(t, h, SV_OBJ_PD));
	assert_int_equal(sv_objtab_widen(t, (uint32_t)h, SV_OBJ_PD), 0);
	sv_objtab_fini(&imp);
	/* a table too large for the bit cannot be an importer's */
	assert_int_equal(sv_objtab_init(&imp, (1u << 24) - 1), 0);
	assert_int_equal(sv_objtab_mark_import(&imp), -EINVAL);
	sv_objtab_fini(&imp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_limits),
		cmocka_unit_test_setup_teardown(test_insert_lookup_remove, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bad_insert, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wrong_type, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_handle, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_generation_zero_never_valid,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_garbage_handles, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_never_issued, setup,
						teardown),
		cmocka_unit_test(test_enospc_and_growth),
		cmocka_unit_test_setup_teardown(test_slot_reuse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_foreach_order, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_import_tables, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
