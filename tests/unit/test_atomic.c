// SPDX-License-Identifier: MIT
/*
 * src/device/exec/atomic.h against a reference model written bit by bit: masked
 * compare-and-swap and masked fetch-and-add over random operands, masks and
 * field boundaries, plus the standard forms and hand-checked cases.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../e2e/atomic_ref.h"
#include "device/exec/atomic.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	return ref_rnd(&rng);
}

static uint64_t rnd_mask(void)
{
	return ref_rnd_mask(&rng);
}

/* The store a device would make (orig when it stores nothing). */
static uint64_t run(uint8_t kind, uint64_t orig, uint64_t ca, uint64_t sw,
		    uint64_t cm, uint64_t sm)
{
	struct sv_atomic_op op = { .kind = kind, .compare_add = ca,
				   .swap = sw, .compare_mask = cm,
				   .swap_mask = sm };
	uint64_t val = 0xdeadbeefull;

	return sv_atomic_apply(&op, orig, &val) ? val : orig;
}

static void test_masked_cas_model(void **state)
{
	(void)state;
	for (int n = 0; n < 200000; n++) {
		uint64_t orig = rnd(), cm = rnd_mask(), sm = rnd_mask();
		/* half the compares are made to agree under the mask */
		uint64_t cmp = (n & 1) ? (orig & cm) | (rnd() & ~cm) : rnd();
		uint64_t swap = rnd(), want;

		want = ref_masked_cas(orig, cmp, cm, swap, sm);
		assert_int_equal(run(SV_ATOMIC_MASKED_CMP_SWAP, orig, cmp,
				     swap, cm, sm), want);
	}
}

static void test_masked_faa_model(void **state)
{
	(void)state;
	for (int n = 0; n < 200000; n++) {
		uint64_t a = rnd(), b = rnd(), ends = rnd_mask();

		/* and operands near the carries: all-ones fields */
		if (n % 4 == 0)
			a |= rnd_mask();
		assert_int_equal(run(SV_ATOMIC_MASKED_FETCH_ADD, a, b, ends, 0,
				     0),
				 ref_masked_faa(a, b, ends));
	}
}

static void test_standard(void **state)
{
	(void)state;
	for (int n = 0; n < 10000; n++) {
		uint64_t o = rnd(), a = rnd(), s = rnd();

		assert_int_equal(run(SV_ATOMIC_FETCH_ADD, o, a, 0, 0, 0), o + a);
		assert_int_equal(run(SV_ATOMIC_CMP_SWAP, o, a, s, 0, 0),
				 o == a ? s : o);
		assert_int_equal(run(SV_ATOMIC_CMP_SWAP, o, o, s, 0, 0), s);
		/* masked FAA without boundaries is the standard one */
		assert_int_equal(run(SV_ATOMIC_MASKED_FETCH_ADD, o, a, 0, 0, 0),
				 o + a);
		/* masked CAS with full masks is the standard one */
		assert_int_equal(run(SV_ATOMIC_MASKED_CMP_SWAP, o, a, s, ~0ull,
				     ~0ull), o == a ? s : o);
	}
}

static void test_cases(void **state)
{
	(void)state;
	/* eight byte counters: 0xff + 1 wraps within its byte */
	assert_int_equal(run(SV_ATOMIC_MASKED_FETCH_ADD, 0x00000000000000ffull,
			     0x0101010101010101ull, 0x8080808080808080ull, 0, 0),
			 0x0101010101010100ull);
	/* two 32-bit counters */
	assert_int_equal(run(SV_ATOMIC_MASKED_FETCH_ADD, 0xffffffffffffffffull,
			     0x0000000100000001ull, 1ull << 31, 0, 0), 0);
	/* every bit its own field: xor */
	assert_int_equal(run(SV_ATOMIC_MASKED_FETCH_ADD, 0xf0f0ull, 0xff00ull,
			     ~0ull, 0, 0), 0x0ff0ull);
	/* compare the low byte only, swap the high byte only */
	assert_int_equal(run(SV_ATOMIC_MASKED_CMP_SWAP, 0x1100000000000042ull,
			     0xff42ull, 0xab00000000000000ull, 0xffull,
			     0xff00000000000000ull), 0xab00000000000042ull);
	assert_int_equal(run(SV_ATOMIC_MASKED_CMP_SWAP, 0x1100000000000043ull,
			     0xff42ull, 0xab00000000000000ull, 0xffull,
			     0xff00000000000000ull), 0x1100000000000043ull);
	/* no compare bits: always swaps */
	assert_int_equal(run(SV_ATOMIC_MASKED_CMP_SWAP, 5, 7, 0xf0, 0, 0xff),
			 0xf0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_masked_cas_model),
		cmocka_unit_test(test_masked_faa_model),
		cmocka_unit_test(test_standard),
		cmocka_unit_test(test_cases),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
