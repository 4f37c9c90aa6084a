#!/usr/bin/env bash
# make bench: softverbs side by side with the copy limits and its peers, in
# one invocation on this machine, into one results folder:
#   - the limits (build/bin/sv_limits): memcpy, one process_vm_writev into
#     another process, the engine's two copies through a bounce buffer, and
#     latency floors between two processes;
#   - 'softverbs bench': write/read/send/atomic, bandwidth and latency;
#   - resource domains (issue 5), each configuration run a few times,
#     interleaved (the report takes the median): write latency 2-64 B with
#     --res-domain safe,low_latency against safe,high_bw (and no domain);
#     write message rate of small messages with many WRs outstanding,
#     safe,high_bw against safe,default (and no domain); the aggregate
#     message rate of -q 2 and -q 4 QPs with --domains per-qp against one
#     and none. Their post+poll instructions per WR, SAFE against SINGLE,
#     come from the budgets below;
#   - Debian's unmodified perftest on sv0 (ib_write_bw, ib_write_lat,
#     ib_read_lat, ib_send_lat), server and client through 'softverbs run';
#   - perftest as users run it (one size, default flags), with the share
#     of WRs that took the direct path (bench/users.sh)
#   - UCX's ucx_perftest between two processes over shared memory: put
#     bandwidth, put latency, active-message rate;
#   - the callgrind instruction budgets (bench/budgets.sh) and the cost of
#     ibv_reg_mr of 4 KiB against 1 GiB (build/bin/sv_regcost), then in a
#     process of 8192 more mappings, with the daemon's check of them by
#     Linux 6.11's maps query and by the maps text (SOFTVERBSD_MAPS_TEXT=1,
#     a second device of its own), side by side;
#   - the memory-management extensions (issue 6, build/bin/sv_mm_cycle):
#     the fast-register + local-invalidate cycle rate (one cycle at a time,
#     and pipelined) against the ibv_reg_mr + ibv_dereg_mr cycle rate, same
#     buffer sizes, side by side;
#   - the cost of softverbs capture (issue 24, bench/capture.sh): WRITE
#     latency and bandwidth on one host as usual, with the direct path off
#     (which a capture turns off), and with a capture writing every
#     packet's first 64 bytes, in interleaved rounds;
#   - rdma_cm connection setup (issue 19, bench/cmtime.sh): Debian's cmtime
#     on sv0 (1000 connections at a time, and one alone) against TCP's
#     connect/accept of the same steps (build/bin/sv_tcp_connect) over
#     127.0.0.1 and the host's address, interleaved: connections per
#     second, microseconds per connection of each step, sv0 / TCP;
#   - the middleware across two network namespaces (issue 20,
#     bench/middleware.sh, root only): ucx_perftest (put, tag, am), an MPI
#     ping-pong and 8-rank allreduce (bench/mpi_bench.c, Open MPI) and
#     libfabric's fi_pingpong, each on sv0 beside the TCP path on the same
#     veth (UCX's tcp, Open MPI's btl tcp, libfabric's tcp provider).
# Then bench/report.py writes results.json, table.txt, bw_vs_size.png and
# lat_vs_size.png, and the table is printed. Raw logs are in OUTDIR/raw.
#   bench/run.sh [--short] OUTDIR
# --short: small sizes and few iterations (make check runs it, so that this
# cannot rot). The build used is $SV_BUILD_DIR, else ./build. The device is a
# private one (its own socket, idle exit after 1 s) unless SOFTVERBS_SOCKET
# is set. UCX's transports: $SV_BENCH_UCX_TLS, else shm,self. Timings are
# reported, never asserted: the exit status says only whether every part ran.
# Run it on a quiet machine: other work moves every figure.
set -u

short=0
while [ $# -gt 0 ]; do
	case "$1" in
	--short) short=1; shift ;;
	-h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	--) shift; break ;;
	-*) echo "bench/run.sh: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -eq 1 ] || { echo "usage: bench/run.sh [--short] OUTDIR" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
build=$(cd "${SV_BUILD_DIR:-$repo/build}" 2>/dev/null && pwd) || {
	echo "bench/run.sh: no build folder ${SV_BUILD_DIR:-$repo/build} (make build)" >&2
	exit 1
}
# a new folder, or one of ours from an earlier run (it is overwritten)
if [ -d "$1" ] && [ -n "$(ls -A "$1")" ] && [ ! -f "$1/raw/steps.tsv" ]; then
	echo "bench/run.sh: $1 is not empty and holds no earlier results" >&2
	exit 2
fi
mkdir -p "$1" || exit 1
out=$(cd "$1" && pwd)
raw=$out/raw
rm -rf "$raw"
rm -f "$out"/results.json "$out"/table.txt "$out"/bw_vs_size.png \
	"$out"/lat_vs_size.png
mkdir "$raw" || exit 1
SV=$build/bin/softverbs
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
for b in softverbs softverbsd sv_limits sv_regcost sv_mm_cycle sv_tcp_connect sv_qpscale; do
	[ -x "$build/bin/$b" ] || {
		echo "bench/run.sh: $build/bin/$b is missing (make build)" >&2
		exit 1
	}
done
sanitized=0
grep -q '^SV_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null && sanitized=1

# ---- a device of our own, and nothing left behind ----
own_dev=0
if [ -z "${SOFTVERBS_SOCKET:-}" ]; then
	devdir=$(mktemp -d /tmp/softverbs-bench.XXXXXX)
	export SOFTVERBS_SOCKET=$devdir/control
	own_dev=1
fi
export SOFTVERBS_IDLE_EXIT=${SOFTVERBS_IDLE_EXIT:-1}
export SOFTVERBSD=${SOFTVERBSD:-$build/bin/softverbsd}
unset SOFTVERBS_NO_AUTOSTART

# Every command runs under timeout(1), which leads a process group of its
# own: killing that group (by the timeout's pid) ends the command and all it
# started. The daemon is not in it: it leaves by itself once idle.
pids=()
kill_group() { # pid
	kill -TERM -- -"$1" 2>/dev/null || return 0
	for _ in $(seq 1 20); do
		kill -0 -- -"$1" 2>/dev/null || return 0
		sleep 0.05
	done
	kill -KILL -- -"$1" 2>/dev/null
	return 0
}
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill_group "$p"
	done
	# the daemon's log lies next to its socket
	cp "$(dirname "$SOFTVERBS_SOCKET")/softverbsd.log" \
		"$raw/softverbsd.log" 2>/dev/null
	[ $own_dev = 1 ] && rm -rf "$devdir"
	[ -n "${textdev:-}" ] && rm -rf "$textdev"
	[ -n "${scaledev:-}" ] && rm -rf "$scaledev"
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- steps: each logs to raw/NAME.out and raw/NAME.err ----
echo -e "step\tstatus\tseconds\tnote" > "$raw/steps.tsv"
failed=0
t_start=$(date +%s.%N)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
elapsed() { # since
	awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'
}
record() { # name status seconds note
	printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$raw/steps.tsv"
	printf '  %-28s %-8s %6s s  %s\n' "$1" "$2" "$3" "$4"
	[ "$2" = failed ] && failed=$((failed + 1))
	return 0
}

# bg LIMIT OUT ERR CMD...: start CMD under timeout in the background; its
# pid (the group's) in $bg_pid
bg_pid=
bg() {
	local limit=$1 o=$2 e=$3
	shift 3
	timeout -k 5 "$limit" "$@" >"$o" 2>"$e" &
	bg_pid=$!
	pids+=("$bg_pid")
}

# reaped PID: it is gone, forget it
reaped() {
	local p keep=()
	for p in "${pids[@]}"; do
		[ "$p" = "$1" ] || keep+=("$p")
	done
	pids=("${keep[@]}")
}

# step NAME TIMEOUT CMD...: one command, stdout and stderr kept apart
step() {
	local name=$1 limit=$2 t0 rc
	shift 2
	t0=$(date +%s.%N)
	bg "$limit" "$raw/$name.out" "$raw/$name.err" "$@"
	wait "$bg_pid"
	rc=$?
	reaped "$bg_pid"
	if [ $rc = 0 ]; then
		record "$name" ok "$(elapsed "$t0")" ""
	elif [ $rc = 124 ] || [ $rc = 137 ]; then
		record "$name" failed "$(elapsed "$t0")" "timed out after $limit s"
	elif [ $rc = 77 ]; then
		# a part that cannot run here (bench/middleware.sh: not root, a
		# tool missing) says why on its stderr
		record "$name" skipped "$(elapsed "$t0")" \
			"$(sed -n 's/^skipped: //p' "$raw/$name.err" | head -n 3 | tr '\n' ' ')"
	else
		# (what it said last, so that a failure in CI says why)
		record "$name" failed "$(elapsed "$t0")" \
			"exit status $rc: $(tail -n 3 "$raw/$name.err" 2>/dev/null | tr '\n' ' ')"
	fi
	return $rc
}

free_port() {
	"$PY" -c 'import socket
s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}
listening() { # port
	local hex
	hex=$(printf '%04X' "$1")
	awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 }
		END { exit !f }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
# wait (bounded) for a background pid; its status in $wait_rc
wait_rc=
wait_pid() { # pid seconds
	local i
	for i in $(seq 1 $(( $2 * 20 ))); do
		if ! kill -0 "$1" 2>/dev/null; then
			wait "$1"
			wait_rc=$?
			reaped "$1"
			return 0
		fi
		sleep 0.05
	done
	kill_group "$1"
	wait "$1" 2>/dev/null
	reaped "$1"
	wait_rc=137
	return 1
}

# pair NAME TIMEOUT PORT SERVER_CMD... :: CLIENT_CMD...: a server in the
# background (logs NAME.server.*), a client once the server listens on PORT
# (NAME.out / NAME.err); both must exit 0.
pair() {
	local name=$1 limit=$2 port=$3 srv t0 i src crc note=
	local -a scmd=() ccmd=()
	shift 3
	while [ $# -gt 0 ] && [ "$1" != :: ]; do scmd+=("$1"); shift; done
	shift
	ccmd=("$@")
	t0=$(date +%s.%N)
	bg $((limit + 10)) "$raw/$name.server.out" "$raw/$name.server.err" \
		"${scmd[@]}"
	srv=$bg_pid
	for i in $(seq 1 400); do
		listening "$port" && break
		kill -0 "$srv" 2>/dev/null || break
		sleep 0.05
	done
	if ! listening "$port"; then
		wait_pid "$srv" 1
		record "$name" failed "$(elapsed "$t0")" "the server never listened"
		return 1
	fi
	bg "$limit" "$raw/$name.out" "$raw/$name.err" "${ccmd[@]}"
	wait "$bg_pid"
	crc=$?
	reaped "$bg_pid"
	wait_pid "$srv" 20
	src=$wait_rc
	if [ $crc = 0 ] && [ $src = 0 ]; then
		record "$name" ok "$(elapsed "$t0")" ""
		return 0
	fi
	[ $crc = 124 ] && note="client timed out after $limit s; "
	record "$name" failed "$(elapsed "$t0")" "${note}client $crc, server $src"
	return 1
}

# ---- what to run ----
pow2() { # from to: the powers of two between, comma-separated
	local s o=
	for ((s = $1; s <= $2; s *= 2)); do o+=${o:+,}$s; done
	echo "$o"
}
if [ $short = 1 ]; then
	sizes=8,4096,65536,1048576
	lim_args=(--sizes $sizes --min-time 0.02 --lat-iters 2000)
	reg_iters=20
	qp_counts=100,1000
	# softverbs bench: one group of sizes; NAME SIZES BW_ITERS LAT_ITERS
	sv_groups=("all $sizes 500 200")
	sv_atomic=(-s 8 -n 200)
	pt_bw=(-s 1048576 -n 100)
	pt_lat=(-s 8 -n 200)
	ucx_bytes_bw=$((16 << 20)) ucx_bytes_lat=$((4 << 20))
	ucx_max_bw=2000 ucx_max_lat=1000 ucx_min=50 ucx_am=100000
	# resource domains: ROUNDS; lat SIZES ITERS; rate SIZES ITERS -o; -q
	# ITERS -o
	rd_rounds=1
	rd_lat=(2,64 100) rd_rate=(8 2000 256) rd_q=(1000 64)
	mm_args=(--sizes 4096,1048576 --min-time 0.02 --rounds 1)
	cap_args=(1 500 200)       # capture: ROUNDS LAT_ITERS BW_ITERS
	limit=60
else
	sizes=$(pow2 2 8388608)
	lim_args=(--min-time 0.1)
	reg_iters=200
	qp_counts=1000,16000,64000
	# the sweep of 'softverbs bench -a' in three groups, so that each size
	# runs long enough to be read on a noisy machine
	sv_groups=("small $(pow2 2 4096) 20000 2000"
		   "mid $(pow2 8192 262144) 2000 500"
		   "large $(pow2 524288 8388608) 200 100")
	sv_atomic=(-s 8 -n 20000)
	pt_bw=(-a -n 1000)
	pt_lat=(-a)
	ucx_bytes_bw=$((2048 << 20)) ucx_bytes_lat=$((256 << 20))
	ucx_max_bw=1000000 ucx_max_lat=100000 ucx_min=100 ucx_am=1000000
	rd_rounds=3
	rd_lat=($(pow2 2 64) 2000) rd_rate=(8,64 200000 1024) rd_q=(50000 256)
	mm_args=(--sizes 4096,65536,1048576 --min-time 0.5 --rounds 3)
	cap_args=(3 20000 5000)
	limit=300
fi

echo "== make bench$([ $short = 1 ] && echo ' --short'): $(nproc) CPUs," \
	"build $build, results in $out"

# -- the limits
step limits $limit "$build/bin/sv_limits" "${lim_args[@]}"

# -- softverbs bench (the command line and JSON agreed for issue 4)
if "$SV" bench --help >/dev/null 2>&1; then
	for t in write read send; do
		for m in bw lat; do
			for g in "${sv_groups[@]}"; do
				set -- $g
				n=$3
				[ $m = lat ] && n=$4
				step "sv_${t}_$m.$1" $limit "$SV" bench -t $t \
					-m $m --sizes $2 -n $n --json --no-progress
			done
		done
	done
	for m in bw lat; do
		step "sv_atomic_$m" $limit "$SV" bench -t atomic -m $m \
			"${sv_atomic[@]}" --json --no-progress
	done
	# between sealed memfds (the direct path's plain copies): 1 MiB
	# WRITEs, and 8 B for the message rate
	step sv_write_bw_memfd $limit "$SV" bench -t write -m bw --memfd \
		--sizes 8,1048576 --json --no-progress
	# between device memory MRs (issue 23): 1 MiB WRITEs
	step sv_write_bw_dm $limit "$SV" bench -t write -m bw --dm \
		--sizes 8,1048576 --json --no-progress
	# the cost of softverbs capture (issue 24): WRITE latency and
	# bandwidth as usual, with the direct path off, and with a capture on,
	# in interleaved rounds
	step capture $limit bash "$here/capture.sh" "$build" "$raw" \
		"${cap_args[@]}"
	if [ $short = 0 ]; then
		# sleeping on completion events instead of busy polling
		step sv_write_lat_events $limit "$SV" bench -t write -m lat \
			-e --sizes 8,65536,1048576 --json --no-progress
	fi
else
	record softverbs_bench missing 0 "'softverbs bench' is not in this build"
fi

# -- resource domains: each configuration rd_rounds times, interleaved
if "$SV" bench --help 2>/dev/null | grep -q -- --res-domain; then
	for r in $(seq 1 $rd_rounds); do
		# latency, small writes: LOW_LATENCY against HIGH_BW
		for c in none safe,low_latency safe,high_bw; do
			d=(--domains none)
			[ $c = none ] || d=(--res-domain $c)
			step "sv_rd_lat.${c/,/_}.r$r" $limit "$SV" bench -t write \
				-m lat --sizes "${rd_lat[0]}" -n "${rd_lat[1]}" \
				"${d[@]}" --json --no-progress
		done
		# message rate, small writes, many outstanding: HIGH_BW
		# against DEFAULT
		for c in none safe,default safe,high_bw; do
			d=(--domains none)
			[ $c = none ] || d=(--res-domain $c)
			step "sv_rd_rate.${c/,/_}.r$r" $limit "$SV" bench -t write \
				-m bw --sizes "${rd_rate[0]}" -n "${rd_rate[1]}" \
				-o "${rd_rate[2]}" "${d[@]}" --json --no-progress
		done
		# N QPs: a domain each, one for all, none
		for q in 2 4; do
			for dm in none one per-qp; do
				step "sv_rd_q$q.$dm.r$r" $limit "$SV" bench -t write \
					-m bw -s 8 -q $q -n "${rd_q[0]}" \
					-o "${rd_q[1]}" --domains $dm --json \
					--no-progress
			done
		done
	done
else
	record sv_rd missing 0 "'softverbs bench' has no --res-domain"
fi

# -- Debian's unmodified perftest on sv0
for p in ib_write_bw ib_write_lat ib_read_lat ib_send_lat; do
	if ! command -v $p >/dev/null; then
		record "pt_$p" missing 0 "$p is not installed (perftest)"
		continue
	fi
	args=("${pt_lat[@]}")
	case $p in *_bw) args=("${pt_bw[@]}") ;; esac
	port=$(free_port)
	pair "pt_$p" $limit "$port" \
		"$SV" run -- $p -d sv0 -x 0 -p "$port" "${args[@]}" :: \
		"$SV" run -- $p -d sv0 -x 0 -p "$port" "${args[@]}" localhost
done

# -- perftest as users run it, with each figure's direct share (issue 38)
ua=()
[ $short = 1 ] && ua+=(--short)
step users $limit bash "$here/users.sh" "${ua[@]}" "$build"

# -- UCX over shared memory: one batch, the same file on both sides
if command -v ucx_perftest >/dev/null; then
	batch=$raw/ucx_batch.txt
	: > "$batch"
	for s in ${sizes//,/ }; do
		n=$(( ucx_bytes_bw / s ))
		n=$(( n > ucx_max_bw ? ucx_max_bw : n < ucx_min ? ucx_min : n ))
		echo "put_bw_$s -t ucp_put_bw -s $s -n $n -w $(( n / 10 + 5 ))" >> "$batch"
	done
	for s in ${sizes//,/ }; do
		n=$(( ucx_bytes_lat / s ))
		n=$(( n > ucx_max_lat ? ucx_max_lat : n < ucx_min ? ucx_min : n ))
		echo "put_lat_$s -t ucp_put_lat -s $s -n $n -w $(( n / 10 + 5 ))" >> "$batch"
	done
	echo "am_bw_8 -t ucp_am_bw -s 8 -n $ucx_am -w $(( ucx_am / 10 ))" >> "$batch"
	port=$(free_port)
	export UCX_TLS=${SV_BENCH_UCX_TLS:-shm,self}
	# UCX 1.18's (Debian 13) is built with MPI: -P 0, without (1.13 has no -P)
	perf_p=()
	ucx_perftest -h 2>&1 | grep -q -- '-P <0|1>' && perf_p=(-P 0)
	pair ucx $limit "$port" \
		ucx_perftest "${perf_p[@]}" -p "$port" -b "$batch" -f -v :: \
		ucx_perftest "${perf_p[@]}" localhost -p "$port" -b "$batch" -f -v
	unset UCX_TLS
else
	record ucx missing 0 "ucx_perftest is not installed (ucx-utils)"
fi

# -- registration cost, on our library
step regcost $limit "$SV" run -- "$build/bin/sv_regcost" --iters $reg_iters
# in a process of many mappings: the query against the text, alternating
textdev=$(mktemp -d /tmp/softverbs-bench-text.XXXXXX)
for r in 1 2; do
	step regcost_maps_$r $limit "$SV" run -- "$build/bin/sv_regcost" \
		--iters $reg_iters --mappings 8192
	step regcost_maps_text_$r $limit env SOFTVERBSD_MAPS_TEXT=1 \
		SOFTVERBS_SOCKET="$textdev/control" "$SV" run -- \
		"$build/bin/sv_regcost" --iters $reg_iters --mappings 8192
done

# -- QPs at scale (issue 35): creations per second at 1k, 16k and 64k live
# QPs of one process, and the daemon's memory per QP, on a device of its
# own (so that its memory is the bench's QPs)
scaledev=$(mktemp -d /tmp/softverbs-bench-qps.XXXXXX)
step qpscale $limit env SOFTVERBS_SOCKET="$scaledev/control" "$SV" run -- \
	"$build/bin/sv_qpscale" --counts "$qp_counts"

# -- memory-management extensions: fast register + local invalidate
# against ibv_reg_mr + ibv_dereg_mr, cycles per second
step mm_cycle $limit "$SV" run -- "$build/bin/sv_mm_cycle" "${mm_args[@]}"

# -- rdma_cm connection setup (issue 19): Debian's cmtime on sv0 against
# TCP's connect/accept over the same addresses (one JSON object)
if ! command -v cmtime >/dev/null; then
	record cmtime missing 0 "cmtime is not installed (rdmacm-utils)"
else
	ca=("$build" --keep "$raw/cmtime")
	[ $short = 1 ] && ca+=(--short)
	step cmtime $limit bash "$here/cmtime.sh" "${ca[@]}"
fi

# -- RoCEv2 across two network namespaces (issue 7): iperf3 TCP over the
# same veth, ib_write_bw 1 MiB and 64 B, ib_send_lat, in one run
if [ "$(id -u)" != 0 ]; then
	record netns skipped 0 "not root: no network namespaces"
else
	na=("$build")
	[ $short = 1 ] && na+=(--short)
	step netns $limit bash "$here/netns.sh" "${na[@]}"
fi

# -- a RoCEv2 flood beside ib_write_bw across two namespaces (issue 21, 6,
# bench/flood.sh): the rate alone and flooded, three runs, each ratio
if [ "$(id -u)" != 0 ]; then
	record flood skipped 0 "not root: no network namespaces"
elif [ $short = 1 ]; then
	record flood skipped 0 "a short run (bench/flood.sh measures it alone)"
elif ! command -v ib_write_bw >/dev/null; then
	record flood missing 0 "perftest is not installed"
else
	step flood $limit bash "$here/flood.sh" "$build" 3 3
fi

# -- the middleware across two network namespaces (issue 20,
# bench/middleware.sh): ucx_perftest, an MPI ping-pong and allreduce, and
# fi_pingpong, each on sv0 beside the TCP path on the same veth; a step each
for s in ucx mpi fi; do
	if [ "$(id -u)" != 0 ]; then
		record "mw_$s" skipped 0 "not root: no network namespaces"
		continue
	fi
	# every MPI rank and UCX process under the sanitizers' preload takes
	# seconds to start: the short run of a sanitized build (make check's
	# e2e_bench_short, bounded to 120 s) leaves them to the plain build's
	if [ $short = 1 ] && [ $sanitized = 1 ]; then
		record "mw_$s" skipped 0 "a sanitized build's short run (the plain build's runs them)"
		continue
	fi
	ma=("$build" "$s" --keep "$raw/mw_$s")
	[ $short = 1 ] && ma+=(--short)
	step "mw_$s" $(( limit * 2 )) bash "$here/middleware.sh" "${ma[@]}"
done

# -- instruction budgets (bench/budgets.sh prints one JSON object)
if [ ! -f "$here/budgets.sh" ]; then
	record budgets missing 0 "bench/budgets.sh is not there yet"
elif [ $sanitized = 1 ]; then
	record budgets skipped 0 "a sanitized build: callgrind cannot run ASan code"
elif ! command -v valgrind >/dev/null; then
	record budgets missing 0 "valgrind is not installed"
else
	qa=(--build "$build" --keep "$raw/callgrind")
	[ $short = 1 ] && qa+=(--quick)
	step budgets $limit bash "$here/budgets.sh" "${qa[@]}"
fi

# ---- the daemon leaves by itself once idle
if [ $own_dev = 1 ]; then
	dpid=$(tr -d '\n' < "$devdir/control.lock" 2>/dev/null)
	if [ -n "$dpid" ]; then
		for _ in $(seq 1 200); do
			kill -0 "$dpid" 2>/dev/null || break
			[ "$(awk '{print $3}' /proc/"$dpid"/stat 2>/dev/null)" = Z ] && break
			sleep 0.05
		done
		# (one look: a zombie reaped between two has no state)
		st=$(awk '{print $3}' /proc/"$dpid"/stat 2>/dev/null)
		if [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]; then
			record daemon_exit failed 10 "softverbsd $dpid still running 10 s after the last client; killed"
			kill -TERM "$dpid" 2>/dev/null
		fi
	fi
fi

# ---- the report
total=$(elapsed "$t_start")
# (exit 3: it ran, but a step that exited 0 left no figures)
"$PY" "$here/report.py" --out "$out" --build "$build" --repo "$repo" \
	--seconds "$total" --load-start "$load_start" \
	$([ $short = 1 ] && echo --short)
rc=$?
if [ $rc = 3 ]; then
	failed=$((failed + 1))
elif [ $rc != 0 ]; then
	echo "bench/run.sh: the report failed" >&2
	[ -f "$out/table.txt" ] || exit 1
	failed=$((failed + 1))
fi
cat "$out/table.txt"
echo "== results: $out (results.json, table.txt, bw_vs_size.png," \
	"lat_vs_size.png, raw/) in $total s"
if [ $failed -gt 0 ]; then
	echo "bench/run.sh: something failed, see the steps above and raw/" >&2
	exit 1
fi
exit 0
