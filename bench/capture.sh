#!/usr/bin/env bash
# The cost of softverbs capture (issue 24; a step of make bench): WRITE
# latency (8 B, 4 KiB) and WRITE bandwidth (64 KiB) between two QPs of this
# host, ROUNDS rounds of three configurations, interleaved:
#   off       as usual (the direct path on, no capture);
#   nodirect  the direct path off (SOFTVERBS_DIRECT=0), which is what a
#             capture turns off: every message goes through the device;
#   on        `softverbs capture -s 64` writing the first 64 bytes of every
#             packet the device renders into a file.
# Each run's 'softverbs bench --json' goes to OUTDIR/cap_lat.CONFIG.rN.json
# and cap_bw.CONFIG.rN.json, the capture's last line (packets written,
# lost) to OUTDIR/cap_on.rN.err; bench/report.py takes the medians and the
# ratios. A private device (its own socket), stopped at the end.
#   bench/capture.sh BUILD OUTDIR ROUNDS LAT_ITERS BW_ITERS
set -u
[ $# -eq 5 ] || { echo "usage: bench/capture.sh BUILD OUTDIR ROUNDS LAT_ITERS BW_ITERS" >&2; exit 2; }
build=$1 out=$2 rounds=$3 lat_n=$4 bw_n=$5
SV=$build/bin/softverbs
dir=$(mktemp -d /tmp/softverbs-capbench.XXXXXX) || exit 1
dpid='' cpid=''
cleanup() {
	[ -n "$cpid" ] && kill -TERM "$cpid" 2>/dev/null && wait "$cpid" 2>/dev/null
	[ -n "$dpid" ] && kill -TERM "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

export SOFTVERBS_SOCKET=$dir/control SOFTVERBS_NO_AUTOSTART=1
"$build/bin/softverbsd" --socket "$SOFTVERBS_SOCKET" --idle-exit 30 \
	</dev/null >"$dir/softverbsd.log" 2>&1 &
dpid=$!
for _ in $(seq 1 200); do
	"$SV" devinfo >/dev/null 2>&1 && break
	sleep 0.05
done
"$SV" devinfo >/dev/null 2>&1 || { cat "$dir/softverbsd.log" >&2; echo "no device" >&2; exit 1; }

bench() { # config round
	local env=()
	[ "$1" = nodirect ] && env=(SOFTVERBS_DIRECT=0)
	env "${env[@]}" "$SV" bench -t write -m lat --sizes 8,4096 -n "$lat_n" \
		--json --no-progress >"$out/cap_lat.$1.r$2.json" || return 1
	env "${env[@]}" "$SV" bench -t write -m bw --sizes 65536 -n "$bw_n" \
		--json --no-progress >"$out/cap_bw.$1.r$2.json" || return 1
}

rc=0
for r in $(seq 1 "$rounds"); do
	for c in off nodirect on; do
		if [ $c = on ]; then
			"$SV" capture -s 64 -w "$dir/cap.pcapng" 2>"$out/cap_on.r$r.err" &
			cpid=$!
			for _ in $(seq 1 200); do
				grep -q capturing "$out/cap_on.r$r.err" && break
				sleep 0.025
			done
			grep -q capturing "$out/cap_on.r$r.err" || { echo "capture did not start" >&2; rc=1; }
		fi
		bench $c "$r" || { echo "bench $c round $r failed" >&2; rc=1; }
		if [ $c = on ]; then
			kill -TERM "$cpid" 2>/dev/null
			wait "$cpid" 2>/dev/null
			cpid=''
			echo "pcapng bytes $(stat -c %s "$dir/cap.pcapng" 2>/dev/null || echo 0)" \
				>>"$out/cap_on.r$r.err"
			rm -f "$dir/cap.pcapng"
		fi
	done
done
cat "$out"/cap_on.r*.err
exit $rc
