#!/usr/bin/env bash
# ib_write_bw across two namespaces alone and then beside a RoCEv2 flood
# (tests/net/flood_netns.sh, issue 21, 6), RUNS times: prints each run's
# rates and ratio, and the runs whose flooded rate fell under half the rate
# alone. The issue asks for >= 0.5; on a machine whose cores the flooder,
# both daemons and perftest share, the ratio moves with the load, so it is
# measured here, not asserted in make check (net_flood checks survival,
# completion and the drop counters). Exit 1 if any run failed or fell under
# 0.5, with --strict; else 0. Needs root and perftest.
#   bench/flood.sh BUILD_DIR [RUNS] [SECS] [--strict]
set -u
build=${1:?usage: bench/flood.sh BUILD_DIR [RUNS] [SECS] [--strict]}
runs=${2:-3} secs=${3:-3} strict=0
[ "${4:-}" = --strict ] && strict=1
here=$(dirname "$0")
under=0 failed=0
for i in $(seq 1 "$runs"); do
	out=$(bash "$here/../tests/net/flood_netns.sh" "$build" "$secs" 3000000 0 2>&1)
	rc=$?
	[ $rc = 77 ] && { echo "skipped: $(echo "$out" | tail -1)"; exit 77; }
	line=$(echo "$out" | sed -n 's/^ib_write_bw: //p')
	fl=$(echo "$out" | sed -n 's/^flood: //p')
	if [ $rc != 0 ] || [ -z "$line" ]; then
		failed=$((failed + 1))
		echo "run $i: failed: $(echo "$out" | grep FAIL | tail -1)"
		continue
	fi
	r=$(echo "$line" | awk '{ printf "%.2f", $4 / $1 }')
	awk -v r="$r" 'BEGIN { exit !(r < 0.5) }' && under=$((under + 1))
	echo "run $i: $line, ratio $r; flood $fl"
done
echo "$runs runs: $failed failed, $under under 0.5"
[ $strict = 1 ] && [ $((failed + under)) -gt 0 ] && exit 1
exit 0
