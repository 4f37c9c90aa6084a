#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Issue 38: the programs users run, as they run them, on one host, and how
# much of their traffic took the direct path. Debian's unmodified perftest
# with a single size and its default flags (tx depth, CQ moderation,
# iterations), server and client through `softverbs run`, one device of
# this script's own; beside each figure, from `softverbs stat --json` taken
# around it, the WRs the initiating process ran itself (direct) out of all
# same-host WRs, and those of a direct opcode the library sent to the
# daemon instead, by reason. The reference, measured in the same run: one
# process_vm_writev of the same size (sv_limits), what the direct path's
# copy is. Prints one JSON object per line (bench/report.py, "Issue 38").
#   users.sh BUILD_DIR
set -u
build=$(cd "${1:?usage: users.sh BUILD_DIR}" && pwd) || exit 2
SV=$build/bin/softverbs
dir=$(mktemp -d /tmp/softverbs-users.XXXXXX)
export SOFTVERBS_SOCKET=$dir/control
export SOFTVERBS_IDLE_EXIT=10
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
"$build/bin/sv_limits" --sizes 8,65536,1048576 --min-time 0.5 \
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

# one case: NAME PROG ARGS... (the server and the client get the same)
run_case() {
	local name=$1 prog=$2 port s c rc
	shift 2
	port=$(free_port)
	stat_json >"$dir/$name.before.json"
	"$SV" run -- "$prog" -d sv0 -x 0 -p "$port" "$@" \
		>"$dir/$name.server" 2>&1 &
	s=$!
	pids+=("$s")
	for _ in $(seq 1 200); do
		ss -ltn "sport = :$port" 2>/dev/null | grep -q LISTEN && break
		sleep 0.05
	done
	timeout 120 "$SV" run -- "$prog" -d sv0 -x 0 -p "$port" "$@" localhost \
		>"$dir/$name.client" 2>&1
	rc=$?
	timeout 20 tail --pid="$s" -f /dev/null
	kill "$s" 2>/dev/null
	wait "$s" 2>/dev/null
	stat_json >"$dir/$name.after.json"
	python3 - "$name" "$prog $*" "$rc" "$dir/$name.client" \
		"$dir/$name.before.json" "$dir/$name.after.json" <<'PY'
import json, sys
name, cmd, rc, client, before, after = sys.argv[1:7]
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
rows, hdr = [], None
for line in open(client, errors="replace"):
    f = line.split()
    if f and f[0] == "#bytes":
        hdr = f
    elif hdr and f and f[0].isdigit() and len(f) >= 4:
        rows.append(f)
if rows:
    f = rows[-1]
    out["bytes"] = int(f[0])
    if "_lat" in cmd.split()[0]:
        # #bytes #iterations t_min t_max t_typical ...
        out["lat_typical_us"] = float(f[4])
    else:
        # #bytes #iterations BW peak BW average (MB/sec: 2^20 bytes) ...
        out["bw_MBps"] = float(f[3]) * 1.048576
if a and b:
    out["wrs"] = a["messages"] - b["messages"]
    out["direct"] = a["direct_messages"] - b["direct_messages"]
    out["refused"] = {k: a["direct_refused"][k] - b["direct_refused"].get(k, 0)
                      for k in a["direct_refused"]}
print(json.dumps(out))
PY
}

run_case write_bw_1m ib_write_bw -s 1048576
run_case write_bw_64k_q2 ib_write_bw -s 65536 -q 2
run_case write_bw_64k_D3 ib_write_bw -s 65536 -D 3
run_case read_bw_1m ib_read_bw -s 1048576
run_case send_bw_1m ib_send_bw -s 1048576
run_case write_lat_8 ib_write_lat -s 8
run_case send_lat_8 ib_send_lat -s 8
exit 0
