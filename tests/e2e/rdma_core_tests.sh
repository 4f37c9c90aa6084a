#!/usr/bin/env bash
# rdma-core's own test suite, unmodified, against sv0: Debian's
# python3-pyverbs ships it in /usr/share/doc/rdma-core/tests (some modules
# gzipped); a copy is unpacked here and run_tests.py runs every module
# through 'softverbs run' (the vendor modules, test_mlx5_* and test_efa*,
# skip themselves on a device that is not theirs). Fails if any test fails
# or errors, or if the suite does not finish; a skip is fine (a feature
# sv0 lacks, the way rxe lacks it: raw packet QPs, dma-buf). Device
# memory, on-demand paging, importing and tag matching are not skipped:
# their tests (test_device's DMTest and SharedDMTest, test_mr's
# DeviceMemoryAPITest, test_odp's OdpTestCase, test_shared_pd,
# test_tag_matching's TMTest, and from rdma-core 56 on test_qpex's FLUSH
# tests and test_srq's resize) must run and pass when the whole suite runs.
# Prints each module's passes, skips and failures, and the skips' reasons
# with their counts.
#   rdma_core_tests.sh [NAME...]   unittest names only (tests.test_qp, ...)
# $RDMA_CORE_TESTS: another copy of the suite's folder.
. "$(dirname "$0")/lib.sh"

src=${RDMA_CORE_TESTS:-/usr/share/doc/rdma-core/tests}
[ -f "$src/run_tests.py" ] ||
	fail "$src/run_tests.py is missing (Debian's python3-pyverbs ships it)"
work=$SV_TEST_DIR/rdma-core
mkdir -p "$work"
cp -r "$src" "$work/tests" || fail "cannot copy $src"
for z in "$work"/tests/*.gz; do
	[ -e "$z" ] || break
	gunzip -f "$z" || fail "cannot gunzip $z"
done
out=$SV_TEST_DIR/rdma_core.out

# unittest's verbose lines: 'name (tests.module.Class.name)', the result
# on that line or the next (after a docstring's first line, or the test's
# own output), then the totals at the end
summary() {
	/usr/bin/python3 - "$out" <<'PY'
import collections, re, sys
lines = open(sys.argv[1], errors='replace').read().splitlines()
start = re.compile(r'^\S+ \((tests\.(\w+)\.[\w.]+)\)')
result = re.compile(r"(?:^|\.\.\. )(ok|FAIL|ERROR|skipped '(.*)'|skipped \"(.*)\"|"
                    r"expected failure|unexpected success)$")
mods = collections.OrderedDict()
reasons = collections.Counter()
cur = None
for ln in lines:
    m = start.match(ln)
    if m:
        cur = m.group(2)
        mods.setdefault(cur, collections.Counter())
    r = result.search(ln)
    if r and cur:
        what = r.group(1)
        if what.startswith('skipped'):
            mods[cur]['skip'] += 1
            reasons[r.group(2) or r.group(3) or '?'] += 1
        elif what in ('ok', 'expected failure'):
            mods[cur]['pass'] += 1
        else:
            mods[cur]['FAIL' if what != 'ERROR' else 'ERROR'] += 1
        cur = None
print('%-26s %5s %5s %5s' % ('module', 'pass', 'skip', 'fail'))
tot = collections.Counter()
for mod, c in mods.items():
    print('%-26s %5d %5d %5d' % (mod, c['pass'], c['skip'],
                                 c['FAIL'] + c['ERROR']))
    tot.update(c)
print('%-26s %5d %5d %5d' % ('total', tot['pass'], tot['skip'],
                             tot['FAIL'] + tot['ERROR']))
print('skipped, by reason:')
for why, n in reasons.most_common():
    print('%5d  %s' % (n, why))
PY
}

start=$(date +%s)
(cd "$work/tests" &&
	"$SV" run -- /usr/bin/python3 run_tests.py --dev sv0 -v "$@") \
	>"$out" 2>&1
rc=$?
secs=$(($(date +%s) - start))
summary || fail "cannot read the suite's output"
last=$(grep -E '^(OK|FAILED)( |$)' "$out" | tail -n 1)
ran=$(grep -E '^Ran [0-9]+ tests? in' "$out" | tail -n 1)
if [ $rc -ne 0 ] || [ -z "$ran" ] || [ "${last%% *}" != OK ]; then
	echo "---- the suite's output"
	cat "$out"
	echo "---- failed:"
	grep -E '^(FAIL|ERROR): ' "$out"
	fail "rdma-core's tests on sv0: ${last:-did not finish} (exit $rc)"
fi
# what sv0 has must not be skipped (issue 23: device memory, ODP,
# importing, tag matching)
if [ $# -eq 0 ]; then
	for t in DMTest.test_multi_process_alloc_dm DMTest.test_dm_write_bad_flow \
		SharedDMTest.test_import_dm \
		SharedPDTestCase.test_imported_rc_ex_rdma_write \
		DeviceMemoryAPITest.test_create_dm_mr \
		DeviceMemoryAPITest.test_dm_bad_access \
		OdpTestCase.test_odp_rc_traffic OdpTestCase.test_odp_ud_traffic \
		OdpTestCase.test_odp_xrc_traffic OdpTestCase.test_odp_rc_srq_traffic \
		OdpTestCase.test_odp_implicit_rc_traffic \
		OdpTestCase.test_odp_rc_atomic_fetch_and_add \
		OdpTestCase.test_odp_rc_rdma_read \
		OdpTestCase.test_odp_sync_prefetch_rc_traffic \
		OdpTestCase.test_odp_implicit_async_prefetch_rc_traffic \
		TMTest.test_tm_traffic TMTest.test_tm_unexpected_tag \
		TMTest.test_tm_no_tag TMTest.test_tm_rndv \
		QpExTestCase.test_qp_ex_rc_flush \
		QpExTestCase.test_qp_ex_rc_flush_type_violate \
		SrqTestCase.test_resize_srq; do
		# a test this release of the suite does not have (rdma-core
		# 56 has no test_odp_rc_srq_traffic) is not asked for: its
		# name is defined in none of the suite's files
		grep -rqE "def ${t#*.}\(" "$work/tests" || {
			echo "(not in this suite: $t)"
			continue
		}
		# its result: on its own line, or a later one (after a
		# docstring, and whatever the test printed)
		awk -v t=".$t)" '
			BEGIN { r = "(^|\\.\\.\\. )(ok|FAIL|ERROR|skipped .*)$" }
			found && $0 ~ r { exit !($0 ~ /(^|\.\.\. )ok$/) }
			index($0, t) { found = 1
				       if ($0 ~ r) exit !($0 ~ /\.\.\. ok$/) }
			END { if (!found) exit 1 }' "$out" ||
			fail "rdma-core's $t did not run and pass"
	done
fi
pass "rdma-core's tests on sv0: $ran: $last (${secs} s)"
