#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Issue 38: the programs users run, as they run them, on one host, and how
# much of their traffic took the direct path, one device of this script's
# own:
#   - Debian's unmodified perftest with a single size and its default
#     flags (tx depth, CQ moderation, iterations);
#   - UCX's ucx_perftest forced onto sv0 (UCX_TLS=rc_verbs,ud_verbs:aux,
#     self UCX_NET_DEVICES=sv0:1): ucp_put_bw 1 MiB, tag_bw 64 KiB,
#     tag_lat 8 B;
#   - Open MPI, two ranks, pml ucx forced onto sv0 the same way, against
#     Open MPI's own shared memory (pml ob1, btl vader) in the same run
#     (bench/mpi_bench.c pingpong: 8 B latency, 1 MiB bandwidth);
#   - libfabric's fi_pingpong over verbs msg endpoints, 1 MiB.
# Server and client (or mpirun) through `softverbs run`; beside each
# figure, from `softverbs stat --json` taken around it, the WRs the
# initiating process ran itself (direct) out of all same-host WRs, and
# those of a direct opcode the library sent to the daemon instead, by
# reason. The reference, measured in the same run: one process_vm_writev
# of the same size (sv_limits), what the direct path's copy is. Prints one
# JSON object per line (bench/report.py, "Issue 38"). A program that is
# not installed is left out (its line says so).
# --short (make check's bench run): two perftest cases, few iterations.
#   users.sh [--short] BUILD_DIR
set -u
short=0
[ "${1:-}" = --short ] && { short=1; shift; }
build=$(cd "${1:?usage: users.sh [--short] BUILD_DIR}" && pwd) || exit 2
SV=$build/bin/softverbs
dir=$(mktemp -d /tmp/softverbs-users.XXXXXX)
export SOFTVERBS_SOCKET=$dir/control
export SOFTVERBS_IDLE_EXIT=2
export SOFTVERBSD=$build/bin/softverbsd
unset SOFTVERBS_NO_AUTOSTART SOFTVERBS_DIRECT
pids=()
cleanup() {
	kill "${pids[@]}" 2>/dev/null
	local d
	d=$(tr -d '\n' <"$dir/control.lock" 2>/dev/null)
	if [ -n "$d" ]; then
		# it leaves by itself once idle; never left behind
		for _ in $(seq 1 300); do
			kill -0 "$d" 2>/dev/null || break
			sleep 0.05
		done
		kill -TERM "$d" 2>/dev/null
	fi
	rm -rf "$dir"
}
trap cleanup EXIT

command -v ib_write_bw >/dev/null || { echo "skipped: perftest is not installed" >&2; exit 77; }

# the reference: one process_vm_writev (and memcpy) per size
mt=0.5
[ $short = 1 ] && mt=0.1
"$build/bin/sv_limits" --sizes 8,65536,1048576 --min-time $mt \
	--lat-iters 2000 >"$dir/limits.txt" 2>&1 ||
	{ cat "$dir/limits.txt" >&2; exit 1; }
sed -n '/^{/,$p' "$dir/limits.txt" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(json.dumps({"reference": "sv_limits",
                  "process_vm_writev": d["process_vm_writev"],
                  "memcpy": d["memcpy"]}))'

free_port() {
	python3 -c 'import socket
s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

stat_json() { "$SV" stat --json 2>/dev/null; }

# The case's line: its figure from OUT (KIND: perftest, ucx, mpi, fi),
# its WRs from the stat files around it.
report() { # name command rc kind out before after
	python3 - "$@" <<'PY'
import json, re, sys
name, cmd, rc, kind, outf, before, after = sys.argv[1:8]
def same_host(p):
    try:
        return json.load(open(p))["same_host"]
    except Exception:
        return None
b, a = same_host(before), same_host(after)
if a and not b:
    # no device before (it starts with the case, or left idle): all of
    # its counts are the case's
    b = {"messages": 0, "direct_messages": 0, "direct_refused": {}}
out = {"case": name, "command": cmd, "rc": int(rc)}
text = open(outf, errors="replace").read()
if kind == "perftest":
    rows, hdr = [], False
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == "#bytes":
            hdr = True
        elif hdr and f and f[0].isdigit() and len(f) >= 4:
            rows.append(f)
    if rows:
        f = rows[-1]
        out["bytes"] = int(f[0])
        if "_lat" in cmd.split()[0]:
            # #bytes #iterations t_min t_max t_typical ...
            out["lat_typical_us"] = float(f[4])
        else:
            # #bytes #iterations BW peak BW average (2^20-byte MB) ...
            out["bw_MBps"] = float(f[3]) * 1.048576
elif kind == "ucx":
    # "Final:  iters  lat50 lat_avg lat_overall bw_avg(MB/s, 2^20) ..."
    m = re.search(r"^Final:\s+\d+\s+([\d.]+)\s+([\d.]+)\s+[\d.]+\s+([\d.]+)",
                  text, re.M)
    size = re.search(r"-s (\d+)", cmd)
    if m and size:
        out["bytes"] = int(size.group(1))
        if "_lat" in cmd:
            out["lat_typical_us"] = float(m.group(1))
        else:
            out["bw_MBps"] = float(m.group(3)) * 1.048576
elif kind == "mpi":
    for m in re.finditer(r"pingpong size=(\d+) iters=\d+ lat_us=([\d.]+)"
                         r"(?: bw_MBps=([\d.]+))?", text):
        if m.group(3):
            out["bytes_bw"] = int(m.group(1))
            out["bw_MBps"] = float(m.group(3))
        else:
            out["bytes"] = int(m.group(1))
            out["lat_typical_us"] = float(m.group(2))
elif kind == "fi":
    # "bytes iters total time MB/sec usec/xfer Mxfers/sec", 1m row
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 7 and f[0] == "1m":
            out["bytes"] = 1 << 20
            out["bw_MBps"] = float(f[5])
if a and b:
    out["wrs"] = a["messages"] - b["messages"]
    out["direct"] = a["direct_messages"] - b["direct_messages"]
    out["refused"] = {k: a["direct_refused"][k] - b["direct_refused"].get(k, 0)
                      for k in a["direct_refused"]}
print(json.dumps(out))
PY
}

wait_port() { # port
	for _ in $(seq 1 200); do
		ss -ltn "sport = :$1" 2>/dev/null | grep -q LISTEN && return 0
		sleep 0.05
	done
	return 1
}

# one server/client case: NAME KIND PROG ARGS... [:: SERVER... [:: CLIENT...]]
# (both get ARGS, then their own; @PORT@ is a free port)
pair_case() {
	local name=$1 kind=$2 prog=$3 port s rc
	local -a args=() sargs=() cargs=()
	shift 3
	while [ $# -gt 0 ] && [ "$1" != :: ]; do args+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	while [ $# -gt 0 ] && [ "$1" != :: ]; do sargs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	cargs=("$@")
	if ! command -v "$prog" >/dev/null; then
		echo "{\"case\": \"$name\", \"missing\": \"$prog\"}"
		return
	fi
	port=$(free_port)
	args=("${args[@]//@PORT@/$port}")
	sargs=("${sargs[@]//@PORT@/$port}")
	cargs=("${cargs[@]//@PORT@/$port}")
	stat_json >"$dir/$name.before.json"
	timeout 150 "$SV" run -- "$prog" "${args[@]}" "${sargs[@]}" \
		>"$dir/$name.server" 2>&1 &
	s=$!
	pids+=("$s")
	wait_port "$port"
	timeout 120 "$SV" run -- "$prog" "${args[@]}" "${cargs[@]}" \
		>"$dir/$name.client" 2>&1
	rc=$?
	timeout 20 tail --pid="$s" -f /dev/null
	kill "$s" 2>/dev/null
	wait "$s" 2>/dev/null
	stat_json >"$dir/$name.after.json"
	report "$name" "$prog ${args[*]} ${cargs[*]}" "$rc" "$kind" \
		"$dir/$name.client" "$dir/$name.before.json" "$dir/$name.after.json"
}

# perftest: NAME PROG ARGS... (one size, perftest's defaults otherwise)
run_case() {
	local name=$1 prog=$2
	shift 2
	pair_case "$name" perftest "$prog" -d sv0 -x 0 -p @PORT@ "$@" :: :: localhost
}

# one job of its own: NAME KIND CMD...
job_case() {
	local name=$1 kind=$2 rc
	shift 2
	stat_json >"$dir/$name.before.json"
	timeout 120 "$@" >"$dir/$name.out" 2>&1
	rc=$?
	stat_json >"$dir/$name.after.json"
	report "$name" "$*" "$rc" "$kind" "$dir/$name.out" \
		"$dir/$name.before.json" "$dir/$name.after.json"
}

if [ $short = 1 ]; then
	run_case write_bw_1m ib_write_bw -s 1048576 -n 200
	run_case send_lat_8 ib_send_lat -s 8 -n 200
	exit 0
fi
run_case write_bw_1m ib_write_bw -s 1048576
run_case write_bw_64k_q2 ib_write_bw -s 65536 -q 2
run_case write_bw_64k_D3 ib_write_bw -s 65536 -D 3
run_case read_bw_1m ib_read_bw -s 1048576
run_case send_bw_1m ib_send_bw -s 1048576
run_case write_lat_8 ib_write_lat -s 8
run_case send_lat_8 ib_send_lat -s 8

# UCX forced onto sv0 (nothing of UCX's own but these two variables)
for v in $(env | sed -n 's/^\(UCX_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
export UCX_TLS=rc_verbs,ud_verbs:aux,self UCX_NET_DEVICES=sv0:1
perf_p=()
ucx_perftest -h 2>&1 | grep -q -- '-P <0|1>' && perf_p=(-P 0)
pair_case ucx_put_bw_1m ucx ucx_perftest "${perf_p[@]}" -p @PORT@ -s 1048576 \
	-n 2000 :: :: localhost -t ucp_put_bw
pair_case ucx_tag_bw_64k ucx ucx_perftest "${perf_p[@]}" -p @PORT@ -s 65536 \
	-n 5000 :: :: localhost -t tag_bw
pair_case ucx_tag_lat_8 ucx ucx_perftest "${perf_p[@]}" -p @PORT@ -s 8 \
	-n 10000 :: :: localhost -t tag_lat

# Open MPI, two ranks of this host: pml ucx onto sv0, and its own shared
# memory (btl vader) beside it
if command -v mpirun.openmpi >/dev/null && [ -x "$build/bin/mpi_bench_ompi" ]; then
	mpi=(mpirun.openmpi --oversubscribe -np 2)
	[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
	job_case mpi_ucx_sv0 mpi "$SV" run -- "${mpi[@]}" --mca pml ucx \
		-x UCX_TLS -x UCX_NET_DEVICES "$build/bin/mpi_bench_ompi" pingpong
	job_case mpi_vader mpi "${mpi[@]}" --mca pml ob1 --mca btl self,vader \
		"$build/bin/mpi_bench_ompi" pingpong
else
	echo '{"case": "mpi_ucx_sv0", "missing": "mpirun.openmpi or mpi_bench_ompi"}'
fi
unset UCX_TLS UCX_NET_DEVICES

# libfabric's verbs provider, msg endpoints (rdma_cm), 1 MiB
pair_case fi_msg_1m fi fi_pingpong -p verbs -e msg -S 1048576 -I 500 \
	:: -B @PORT@ :: -P @PORT@ 127.0.0.1
exit 0
