// SPDX-License-Identifier: MIT
/* Unit tests of the command codec (src/abi/sv_cmd.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "abi/sv_cmd.h"

static void test_names(void **state)
{
	static const struct {
		unsigned int op;
		const char *name;
	} want[] = {
#define SV_X(name, num) { num, #name },
		SV_CMD_LIST(SV_X)
#undef SV_X
	};
	unsigned int i, j;

	(void)state;
	assert_int_equal(sizeof(want) / sizeof(want[0]), SV_CMD_MAX - 1);
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		assert_string_equal(sv_cmd_name(want[i].op), want[i].name);
		for (j = 0; j < i; j++)
			assert_string_not_equal(sv_cmd_name(want[i].op),
						sv_cmd_name(want[j].op));
	}
	assert_string_equal(sv_cmd_name(SV_CMD_HELLO), "HELLO");
	assert_string_equal(sv_cmd_name(SV_CMD_DESTROY_CQ), "DESTROY_CQ");
	assert_string_equal(sv_cmd_name(SV_CMD_STAT), "STAT");
	assert_string_equal(sv_cmd_name(0), "unknown");
	assert_string_equal(sv_cmd_name(SV_CMD_MAX), "unknown");
	assert_string_equal(sv_cmd_name(SV_CMD_MAX + 1), "unknown");
	assert_string_equal(sv_cmd_name(0xffff), "unknown");
	assert_string_equal(sv_cmd_name(~0u), "unknown");
}

static void test_init(void **state)
{
	struct sv_cmd cmd;
	unsigned int i;

	(void)state;
	memset(&cmd, 0xa5, sizeof(cmd));
	sv_cmd_init(&cmd, SV_CMD_REG_MR);
	assert_int_equal(cmd.hdr.magic, SV_PROTO_MAGIC);
	assert_int_equal(cmd.hdr.op, SV_CMD_REG_MR);
	assert_int_equal(cmd.hdr.version, SV_PROTO_VERSION);
	assert_int_equal(cmd.hdr.seq, 0);
	assert_int_equal(cmd.hdr.chan, 0);
	for (i = 0; i < sizeof(cmd.u.raw); i++)
		assert_int_equal(cmd.u.raw[i], 0);
	assert_int_equal(sv_cmd_check(&cmd, sizeof(cmd)), SV_CMD_OK);
}

static void test_verdicts(void **state)
{
	struct sv_cmd cmd;
	unsigned int op;

	(void)state;
	sv_cmd_init(&cmd, SV_CMD_HELLO);
	assert_int_equal(sv_cmd_check(&cmd, sizeof(cmd)), SV_CMD_OK);
	assert_int_equal(sv_cmd_check(&cmd, 0), SV_CMD_SHORT);
	assert_int_equal(sv_cmd_check(&cmd, sizeof(cmd.hdr)), SV_CMD_SHORT);
	assert_int_equal(sv_cmd_check(&cmd, sizeof(cmd) - 1), SV_CMD_SHORT);
	assert_int_equal(sv_cmd_check(&cmd, sizeof(cmd) + 1), SV_CMD_LONG);
	assert_int_equal(sv_cmd_check(&cmd, SIZE_MAX), SV_CMD_LONG);
	/* the size is judged without reading the header */
	assert_int_equal(sv_cmd_check(NULL, 3), SV_CMD_SHORT);
	assert_int_equal(sv_cmd_check(NULL, sizeof(cmd) * 2), SV_CMD_LONG);

	cmd.hdr.magic = SV_PROTO_MAGIC ^ 1;
	assert_int_equal(sv_cmd_check(&cmd, sizeof(cmd)), SV_CMD_BAD_MAGIC);
	cmd.hdr.magic = 0;
	cmd.hdr.version = 0; /* magic is checked first */
	assert_int_equal(sv_cmd_check(&cmd, sizeof(cmd)), SV_CMD_BAD_MAGIC);
	cmd.hdr.magic = SV_PROTO_MAGIC;
	assert_int_equal(sv_cmd_check(&cmd, sizeof(cmd)), SV_CMD_BAD_VERSION);
	cmd.hdr.version = SV_PROTO_VERSION + 1;
	assert_int_equal(sv_cmd_check(&cmd, sizeof(cmd)), SV_CMD_BAD_VERSION);
	cmd.hdr.version = SV_PROTO_VERSION;

	for (op = 0; op <= 0xffff; op++) {
		cmd.hdr.op = op;
		assert_int_equal(sv_cmd_check(&cmd, sizeof(cmd)),
				 op >= 1 && op < SV_CMD_MAX ? SV_CMD_OK :
							      SV_CMD_BAD_OP);
	}
}

static void test_verdict_str(void **state)
{
	static const enum sv_cmd_verdict all[] = {
		SV_CMD_OK, SV_CMD_SHORT, SV_CMD_LONG, SV_CMD_BAD_MAGIC,
		SV_CMD_BAD_VERSION, SV_CMD_BAD_OP,
	};
	unsigned int i, j;

	(void)state;
	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		assert_non_null(sv_cmd_verdict_str(all[i]));
		assert_string_not_equal(sv_cmd_verdict_str(all[i]), "unknown");
		for (j = 0; j < i; j++)
			assert_string_not_equal(sv_cmd_verdict_str(all[i]),
						sv_cmd_verdict_str(all[j]));
	}
	assert_string_equal(sv_cmd_verdict_str(SV_CMD_OK), "ok");
	assert_string_equal(sv_cmd_verdict_str((enum sv_cmd_verdict)99),
			    "unknown");
	assert_string_equal(sv_cmd_verdict_str((enum sv_cmd_verdict)-1),
			    "unknown");
}

static void test_rsp_init(void **state)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	unsigned int i;

	(void)state;
	sv_cmd_init(&cmd, SV_CMD_CREATE_CQ);
	cmd.hdr.seq = 0xdeadbeef;
	memset(&rsp, 0x5a, sizeof(rsp));
	sv_rsp_init(&rsp, &cmd, -EINVAL);
	assert_int_equal(rsp.hdr.magic, SV_PROTO_MAGIC);
	assert_int_equal(rsp.hdr.version, SV_PROTO_VERSION);
	assert_int_equal(rsp.hdr.op, SV_CMD_CREATE_CQ);
	assert_int_equal(rsp.hdr.seq, 0xdeadbeef);
	assert_int_equal(rsp.hdr.status, -EINVAL);
	for (i = 0; i < sizeof(rsp.u.raw); i++)
		assert_int_equal(rsp.u.raw[i], 0);

	/* echoes even a refused command's op and seq */
	cmd.hdr.op = 0xfff0;
	cmd.hdr.seq = 7;
	sv_rsp_init(&rsp, &cmd, 0);
	assert_int_equal(rsp.hdr.op, 0xfff0);
	assert_int_equal(rsp.hdr.seq, 7);
	assert_int_equal(rsp.hdr.status, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_init),
		cmocka_unit_test(test_verdicts),
		cmocka_unit_test(test_verdict_str),
		cmocka_unit_test(test_rsp_init),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
