// SPDX-License-Identifier: MIT
/* Unit tests of a tag-matching SRQ's tag list (src/device/tm.c): handles,
 * posting order, masks, the phase rule, TAG_DEL of what is gone, busy
 * tags, refusals. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <infiniband/verbs.h>

#include "abi/sv_tm.h"
#include "device/sv_dev.h"

static int setup(void **state)
{
	*state = sv_tm_new(4, 16);
	return *state ? 0 : -1;
}

static int teardown(void **state)
{
	free(*state);
	return 0;
}

/* One op; its result, and *d. */
static int op(struct sv_tm *tm, uint32_t opcode, uint32_t flags,
	      uint64_t tag, uint64_t mask, uint32_t handle, uint32_t unexp,
	      struct sv_tm_done *d)
{
	struct sv_cmd_srq_ops a;
	const char *why = NULL;
	int ret;

	memset(&a, 0, sizeof(a));
	a.wr_id = 7;
	a.opcode = opcode;
	a.flags = flags;
	a.tag = tag;
	a.mask = mask;
	a.recv_wr_id = tag;
	a.handle = handle;
	a.unexpected_cnt = unexp;
	a.num_sge = 1;
	a.sge.length = 64;
	ret = sv_tm_op(tm, &a, d, &why);
	if (ret)
		assert_non_null(why);
	return ret;
}

static uint32_t add(struct sv_tm *tm, uint64_t tag, uint64_t mask,
		    bool *sync_req)
{
	struct sv_tm_done d;

	assert_int_equal(op(tm, IBV_WR_TAG_ADD, 0, tag, mask, 0, 0, &d), 0);
	assert_int_equal(d.opcode, IBV_WC_TM_ADD);
	assert_int_equal(d.status, IBV_WC_SUCCESS);
	if (sync_req)
		*sync_req = d.sync_req;
	return d.handle;
}

static uint32_t del(struct sv_tm *tm, uint32_t h)
{
	struct sv_tm_done d;

	assert_int_equal(op(tm, IBV_WR_TAG_DEL, 0, 0, 0, h, 0, &d), 0);
	assert_int_equal(d.opcode, IBV_WC_TM_DEL);
	return d.status;
}

static void test_order_and_full(void **state)
{
	struct sv_tm *tm = *state;
	struct sv_tm_done d;
	struct sv_tm_tag *t;
	uint32_t h[4];

	for (int i = 0; i < 4; i++)
		h[i] = add(tm, 5, ~0ull, NULL);
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < i; j++)
			assert_int_not_equal(h[i], h[j]);
	assert_int_equal(tm->posted, 4);
	assert_int_equal(op(tm, IBV_WR_TAG_ADD, 0, 5, ~0ull, 0, 0, &d),
			 -ENOMEM);
	/* first posted, first matched */
	for (int i = 0; i < 4; i++) {
		t = sv_tm_match(tm, 5);
		assert_non_null(t);
		assert_int_equal(sv_tm_handle((uint32_t)(t - tm->tag), t->gen),
				 h[i]);
		sv_tm_take(tm, t);
	}
	assert_null(sv_tm_match(tm, 5));
	assert_int_equal(tm->posted, 0);
	/* a slot freed is a slot to add again, under another handle */
	assert_int_not_equal(add(tm, 5, ~0ull, NULL), h[3]);
}

static void test_masks(void **state)
{
	struct sv_tm *tm = *state;

	add(tm, 0x12ab, 0xff00, NULL);
	add(tm, 0x7, ~0ull, NULL);
	assert_non_null(sv_tm_match(tm, 0x1200));
	assert_non_null(sv_tm_match(tm, 0x12ff));
	assert_null(sv_tm_match(tm, 0x13ab));
	assert_null(sv_tm_match(tm, 0x8));
	assert_int_equal(sv_tm_match(tm, 0x7)->tag, 0x7);
}

static void test_phase(void **state)
{
	struct sv_tm *tm = *state;
	struct sv_tm_done d;
	bool sync_req;

	add(tm, 1, ~0ull, &sync_req);
	assert_false(sync_req);
	tm->unexp++;                   /* a message no tag matched */
	add(tm, 2, ~0ull, &sync_req);
	assert_true(sync_req);
	/* the tag added before it still matches, the one after it not */
	assert_non_null(sv_tm_match(tm, 1));
	assert_null(sv_tm_match(tm, 2));
	/* a count without the SYNC flag changes nothing */
	assert_int_equal(op(tm, IBV_WR_TAG_SYNC, 0, 0, 0, 0, 1, &d), 0);
	assert_true(d.sync_req);
	assert_null(sv_tm_match(tm, 2));
	assert_int_equal(op(tm, IBV_WR_TAG_SYNC, IBV_OPS_TM_SYNC, 0, 0, 0, 1,
			    &d), 0);
	assert_int_equal(d.opcode, IBV_WC_TM_SYNC);
	assert_false(d.sync_req);
	assert_non_null(sv_tm_match(tm, 2));
	/* counts are free-running */
	tm->unexp = tm->synced = UINT32_MAX;
	add(tm, 3, ~0ull, &sync_req);
	assert_false(sync_req);
	tm->unexp++;
	assert_non_null(sv_tm_match(tm, 3));
}

static void test_del(void **state)
{
	struct sv_tm *tm = *state;
	struct sv_tm_done d;
	uint32_t h, h2;

	h = add(tm, 9, ~0ull, NULL);
	assert_int_equal(del(tm, h), IBV_WC_SUCCESS);
	assert_null(sv_tm_match(tm, 9));
	assert_int_equal(del(tm, h), IBV_WC_TM_ERR);
	/* the slot taken again: the old handle does not name the new tag */
	h2 = add(tm, 9, ~0ull, NULL);
	assert_int_equal(h2 & SV_TM_HANDLE_IDX_MASK, h & SV_TM_HANDLE_IDX_MASK);
	assert_int_equal(del(tm, h), IBV_WC_TM_ERR);
	assert_non_null(sv_tm_match(tm, 9));
	/* consumed: the verbs' concurrent consumption */
	sv_tm_take(tm, sv_tm_match(tm, 9));
	assert_int_equal(del(tm, h2), IBV_WC_TM_ERR);
	/* busy (its data landing): neither matched nor deleted */
	h = add(tm, 10, ~0ull, NULL);
	sv_tm_match(tm, 10)->busy = true;
	assert_null(sv_tm_match(tm, 10));
	assert_int_equal(del(tm, h), IBV_WC_TM_ERR);
	/* a handle of no slot */
	assert_int_equal(op(tm, IBV_WR_TAG_DEL, 0, 0, 0, 4, 0, &d), -EINVAL);
	assert_int_equal(op(tm, IBV_WR_TAG_DEL, 0, 0, 0, 0xffff, 0, &d),
			 -EINVAL);
}

static void test_refused(void **state)
{
	struct sv_tm *tm = *state;
	struct sv_cmd_srq_ops a;
	struct sv_tm_done d;
	const char *why;

	assert_int_equal(op(tm, 99, 0, 0, 0, 0, 0, &d), -EINVAL);
	assert_int_equal(op(tm, IBV_WR_TAG_SYNC, 1u << 5, 0, 0, 0, 0, &d),
			 -EINVAL);
	memset(&a, 0, sizeof(a));
	a.opcode = IBV_WR_TAG_ADD;
	a.num_sge = 2;
	assert_int_equal(sv_tm_op(tm, &a, &d, &why), -EINVAL);
	a.num_sge = 0;
	a.rsvd = 1;
	assert_int_equal(sv_tm_op(tm, &a, &d, &why), -EINVAL);
	/* a refused op changed nothing */
	assert_int_equal(tm->posted, 0);
	/* a tag with no buffer is a tag */
	a.rsvd = 0;
	assert_int_equal(sv_tm_op(tm, &a, &d, &why), 0);
	assert_int_equal(tm->posted, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_order_and_full, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_masks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_phase, setup, teardown),
		cmocka_unit_test_setup_teardown(test_del, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
