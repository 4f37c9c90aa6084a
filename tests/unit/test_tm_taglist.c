// SPDX-License-Identifier: MIT
/* Unit tests of a tag-matching SRQ's tag list (src/device/ctl/tm.c): posting
 * order, a full list, masks, the phase rule, TAG_DEL of what is gone or
 * busy, malformed ops, the count of TAG_ADDs given back. */
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

static uint32_t next_handle = 1;

/* One op; *d says what it did. */
static void op(struct sv_tm *tm, uint32_t opcode, uint32_t flags,
	       uint64_t tag, uint64_t mask, uint32_t handle, uint32_t unexp,
	       struct sv_tm_done *d)
{
	struct sv_tm_op o;

	memset(&o, 0, sizeof(o));
	o.wr_id = 7;
	o.opcode = opcode;
	o.flags = flags;
	o.tag = tag;
	o.mask = mask;
	o.recv_wr_id = tag;
	o.handle = handle;
	o.unexpected_cnt = unexp;
	o.num_sge = 1;
	o.sge.length = 64;
	sv_tm_apply(tm, &o, d);
}

/* TAG_ADD under a fresh handle: the handle. */
static uint32_t add(struct sv_tm *tm, uint64_t tag, uint64_t mask,
		    bool *sync_req)
{
	struct sv_tm_done d;
	uint32_t h = next_handle++;

	op(tm, IBV_WR_TAG_ADD, 0, tag, mask, h, 0, &d);
	assert_int_equal(d.opcode, IBV_WC_TM_ADD);
	assert_int_equal(d.status, IBV_WC_SUCCESS);
	if (sync_req)
		*sync_req = d.sync_req;
	return h;
}

static uint32_t del(struct sv_tm *tm, uint32_t h)
{
	struct sv_tm_done d;

	op(tm, IBV_WR_TAG_DEL, 0, 0, 0, h, 0, &d);
	assert_int_equal(d.opcode, IBV_WC_TM_DEL);
	return d.status;
}

static void test_order_and_full(void **state)
{
	struct sv_tm *tm = *state;
	uint32_t kdone = 0;
	struct sv_tm_done d;
	struct sv_tm_tag *t;
	uint32_t h[4];

	tm->kdone = &kdone;
	for (int i = 0; i < 4; i++)
		h[i] = add(tm, 5, ~0ull, NULL);
	assert_int_equal(tm->posted, 4);
	/* full: refused, and counted as given back at once */
	op(tm, IBV_WR_TAG_ADD, 0, 5, ~0ull, 99, 0, &d);
	assert_int_equal(d.status, IBV_WC_TM_ERR);
	assert_int_equal(kdone, 1);
	/* first posted, first matched */
	for (int i = 0; i < 4; i++) {
		t = sv_tm_match(tm, 5);
		assert_non_null(t);
		assert_int_equal(t->handle, h[i]);
		sv_tm_take(tm, t);
		assert_int_equal(kdone, 2 + i);
	}
	assert_null(sv_tm_match(tm, 5));
	assert_int_equal(tm->posted, 0);
	add(tm, 5, ~0ull, NULL);
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
	op(tm, IBV_WR_TAG_SYNC, 0, 0, 0, 0, 1, &d);
	assert_int_equal(d.status, IBV_WC_SUCCESS);
	assert_true(d.sync_req);
	assert_null(sv_tm_match(tm, 2));
	op(tm, IBV_WR_TAG_SYNC, IBV_OPS_TM_SYNC, 0, 0, 0, 1, &d);
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
	uint32_t h, h2;

	h = add(tm, 9, ~0ull, NULL);
	assert_int_equal(del(tm, h), IBV_WC_SUCCESS);
	assert_null(sv_tm_match(tm, 9));
	assert_int_equal(del(tm, h), IBV_WC_TM_ERR);
	/* the slot taken again: the old handle does not name the new tag */
	h2 = add(tm, 9, ~0ull, NULL);
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
	/* a handle never given */
	assert_int_equal(del(tm, 0xdead), IBV_WC_TM_ERR);
}

/* What the library never posts, a client that writes its ring may: each
 * fails and changes nothing. */
static void test_refused(void **state)
{
	struct sv_tm *tm = *state;
	struct sv_tm_op o;
	struct sv_tm_done d;

	op(tm, 99, 0, 0, 0, 0, 0, &d);
	assert_int_equal(d.status, IBV_WC_TM_ERR);
	op(tm, IBV_WR_TAG_ADD, 1u << 5, 1, ~0ull, 50, 0, &d);
	assert_int_equal(d.status, IBV_WC_TM_ERR);
	op(tm, IBV_WR_TAG_SYNC, IBV_OPS_TM_SYNC | 1u << 9, 0, 0, 0, 5, &d);
	assert_int_equal(d.status, IBV_WC_TM_ERR);
	assert_int_equal(tm->synced, 0);
	memset(&o, 0, sizeof(o));
	o.opcode = IBV_WR_TAG_ADD;
	o.num_sge = 2;
	sv_tm_apply(tm, &o, &d);
	assert_int_equal(d.status, IBV_WC_TM_ERR);
	o.num_sge = 0;
	o.rsvd = 1;
	sv_tm_apply(tm, &o, &d);
	assert_int_equal(d.status, IBV_WC_TM_ERR);
	assert_int_equal(tm->posted, 0);
	/* each refused TAG_ADD holds no place */
	assert_int_equal(tm->done, 3);
	/* a tag with no buffer is a tag */
	o.rsvd = 0;
	sv_tm_apply(tm, &o, &d);
	assert_int_equal(d.status, IBV_WC_SUCCESS);
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
