// SPDX-License-Identifier: MIT
/* The device view's names (abi/sv_view.c): which paths are redirected and
 * where, the uverbs device, the counters. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "abi/sv_view.h"

#define ROOT "/run/user/1000/softverbs/view"

static void map_prefixes(void **state)
{
	static const char *const in[] = {
		"/dev/infiniband", "/dev/infiniband/", "/dev/infiniband/uverbs0",
		"/sys/class/infiniband", "/sys/class/infiniband/sv0/ports/1/gids/0",
		"/sys/class/infiniband_verbs/abi_version",
		"/sys/class/infiniband_mad/abi_version",
		"/sys/class/misc/rdma_cm/abi_version", "/dev/infiniband/rdma_cm",
	};
	char out[512], want[512];

	(void)state;
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		assert_int_equal(sv_view_map(ROOT, in[i], out, sizeof(out)), 1);
		snprintf(want, sizeof(want), "%s%s", ROOT, in[i]);
		assert_string_equal(out, want);
	}
}

static void map_others_untouched(void **state)
{
	static const char *const in[] = {
		"/dev/infinibandx", "/sys/class/infiniband_ucma/abi_version",
		"/sys/class/infinibandx", "/sys/class/misc/rdma_cmx",
		"/sys/class/misc", "/sys/class/misc/fuse/dev",
		"/sys/class/net/eth0", "dev/infiniband/uverbs0", "", "/",
		"/sys/class", "/dev",
	};
	char out[64] = "untouched";

	(void)state;
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		assert_int_equal(sv_view_map(ROOT, in[i], out, sizeof(out)), 0);
		assert_string_equal(out, "untouched");
	}
	assert_int_equal(sv_view_map(ROOT, NULL, out, sizeof(out)), 0);
}

static void map_too_long(void **state)
{
	char path[300], out[64];

	(void)state;
	memset(path, 'a', sizeof(path) - 1);
	path[sizeof(path) - 1] = 0;
	memcpy(path, "/dev/infiniband/", 16);
	assert_int_equal(sv_view_map(ROOT, path, out, sizeof(out)), -ENAMETOOLONG);
	/* exactly fits, and one byte short */
	assert_int_equal(sv_view_map("/r", "/dev/infiniband", out, 18), 1);
	assert_string_equal(out, "/r/dev/infiniband");
	assert_int_equal(sv_view_map("/r", "/dev/infiniband", out, 17),
			 -ENAMETOOLONG);
}

static void uverbs_names(void **state)
{
	(void)state;
	assert_int_equal(sv_view_uverbs("/dev/infiniband/uverbs0"), 0);
	assert_int_equal(sv_view_uverbs("/dev/infiniband/uverbs7"), 7);
	assert_int_equal(sv_view_uverbs("/dev/infiniband/uverbs31"), 31);
	assert_int_equal(sv_view_uverbs("/dev/infiniband/uverbs32"), -1);
	assert_int_equal(sv_view_uverbs("/dev/infiniband/uverbs"), -1);
	assert_int_equal(sv_view_uverbs("/dev/infiniband/uverbs01"), -1);
	assert_int_equal(sv_view_uverbs("/dev/infiniband/uverbs1x"), -1);
	assert_int_equal(sv_view_uverbs("/dev/infiniband/uverbs1/"), -1);
	assert_int_equal(sv_view_uverbs("/dev/infiniband/rdma_cm"), -1);
	assert_int_equal(sv_view_uverbs(NULL), -1);
}

static void counters(void **state)
{
	struct sv_rsp_stat_wire w;
	int i;

	(void)state;
	memset(&w, 0, sizeof(w));
	w.tx_pkts = 5;
	w.lo_msgs = 7;
	w.tx_bytes = 400;
	w.lo_bytes = 800;
	i = sv_view_counter_of("/sys/class/infiniband/sv0/ports/1/counters/"
			       "port_xmit_packets", "sv0");
	assert_true(i >= 0);
	assert_string_equal(sv_view_counters[i].name, "port_xmit_packets");
	assert_int_equal(sv_view_counter_value((unsigned int)i, &w), 12);
	i = sv_view_counter_of("/sys/class/infiniband/sv0/ports/1/counters/"
			       "port_xmit_data", "sv0");
	assert_int_equal(sv_view_counter_value((unsigned int)i, &w), 300);
	i = sv_view_counter_of("/sys/class/infiniband/sv0/ports/1/hw_counters/"
			       "sent_pkts", "sv0");
	assert_true(i >= 0);
	assert_string_equal(sv_view_counters[i].dir, "hw_counters");
	/* another device, port, folder or name is not ours */
	assert_int_equal(sv_view_counter_of("/sys/class/infiniband/rxe0/ports/1/"
					    "counters/port_xmit_packets", "sv0"), -1);
	assert_int_equal(sv_view_counter_of("/sys/class/infiniband/sv0/ports/2/"
					    "counters/port_xmit_packets", "sv0"), -1);
	assert_int_equal(sv_view_counter_of("/sys/class/infiniband/sv0/ports/1/"
					    "hw_counters/port_xmit_packets", "sv0"), -1);
	assert_int_equal(sv_view_counter_of("/sys/class/infiniband/sv0/ports/1/"
					    "counters/port_xmit_packets/", "sv0"), -1);
	assert_int_equal(sv_view_counter_of("/sys/class/infiniband/sv0/ports/1/"
					    "counters", "sv0"), -1);
	assert_int_equal(sv_view_counter_of(NULL, "sv0"), -1);
	assert_int_equal(sv_view_counter_of("/sys/class/infiniband/sv0/ports/1/"
					    "counters/port_xmit_packets", ""), -1);
	assert_int_equal(sv_view_counter_value(sv_view_ncounters, &w), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(map_prefixes),
		cmocka_unit_test(map_others_untouched),
		cmocka_unit_test(map_too_long),
		cmocka_unit_test(uverbs_names),
		cmocka_unit_test(counters),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
