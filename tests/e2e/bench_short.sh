#!/usr/bin/env bash
# make bench, short, so that it cannot rot: bench/run.sh --short into a
# folder of its own must exit 0 and leave results.json (every part there and
# well-formed), table.txt (the ratios and the issue's targets), the two PNG
# plots, and no process behind it. Timings are printed, never checked.
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=$SV_TEST_DIR/bench
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

start=$(date +%s)
bash "$repo/bench/run.sh" --short "$out"
rc=$?
echo "(bench/run.sh --short: $(( $(date +%s) - start )) s)"
[ $rc = 0 ] || fail "bench/run.sh --short exited with $rc"

# softverbs bench is part of it once this build has it
has_bench=0
"$SV" bench --help >/dev/null 2>&1 && has_bench=1

"$PY" - "$out" "$has_bench" <<'EOF' || fail "the results are incomplete"
import json, os, sys

out, has_bench = sys.argv[1], sys.argv[2] == "1"
errors = []

def need(cond, what):
    if not cond:
        errors.append(what)

R = json.load(open(os.path.join(out, "results.json")))
m = R.get("machine") or {}
need(m.get("nproc", 0) >= 1 and m.get("kernel"), "machine: nproc, kernel")
need(all(s["status"] in ("ok", "skipped") for s in R["steps"]),
     "steps: %s" % [s for s in R["steps"] if s["status"] not in ("ok", "skipped")])

def rows_ok(rows, key, what):
    need(bool(rows) and all((r.get(key) or 0) > 0 for r in rows),
         "%s: rows with %s > 0" % (what, key))

L = R.get("limits") or {}
for k in ("memcpy", "process_vm_writev", "readv_writev_bounce"):
    rows_ok(L.get(k), "bw_MBps", "limits " + k)
for k in ("shm_spin", "pipe"):
    need(((L.get("pingpong") or {}).get(k) or {}).get("lat_p50_us", 0) > 0,
         "limits pingpong " + k)

if has_bench:
    for t in ("write", "read", "send", "atomic"):
        sv = R["softverbs"]
        rows_ok((sv.get(t + "_bw") or {}).get("results"), "bw_MBps",
                "softverbs %s bw" % t)
        rows_ok((sv.get(t + "_lat") or {}).get("results"), "lat_p50_us",
                "softverbs %s lat" % t)

pt = R.get("perftest") or {}
rows_ok((pt.get("ib_write_bw") or {}).get("results"), "bw_MBps", "ib_write_bw")
for p in ("ib_write_lat", "ib_read_lat", "ib_send_lat"):
    rows_ok((pt.get(p) or {}).get("results"), "lat_p50_us", p)

U = R.get("ucx") or {}
rows_ok(U.get("put_bw"), "bw_MBps", "ucx put_bw")
rows_ok(U.get("put_lat"), "lat_p50_us", "ucx put_lat")
rows_ok(U.get("am_bw"), "msg_rate_Mpps", "ucx am_bw")

rc = R.get("regcost") or {}
need(rc.get("reg_4k_us", 0) > 0 and rc.get("reg_1g_us", 0) > 0
     and rc.get("ratio_reg_1g_4k", 0) > 0, "regcost")

st = {s["step"]: s["status"] for s in R["steps"]}
if st.get("budgets") == "ok":
    b = R.get("budgets") or {}
    need(all(b.get(k, 0) > 0 for k in ("post_send_ir", "poll_cq_ir",
                                       "engine_wqe_ir")), "budgets")
else:
    need(st.get("budgets") in ("skipped", "missing"), "budgets step")

T = R.get("targets") or []
need(len(T) == 5, "five targets")
if has_bench:
    need(all(t["value"] is not None for t in T[:3]),
         "the targets against process_vm_writev and ucx are measured")

table = open(os.path.join(out, "table.txt")).read()
for s in ("Bandwidth (MB/s)", "Latency (us p50)", "Targets of issue 4",
          "Registration", "Instructions"):
    need(s in table, "table.txt: " + s)

for png in ("bw_vs_size.png", "lat_vs_size.png"):
    p = os.path.join(out, png)
    need(os.path.exists(p) and os.path.getsize(p) > 2000
         and open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n", png)

for e in errors:
    print("missing or malformed:", e, file=sys.stderr)
sys.exit(1 if errors else 0)
EOF

# Nothing it started is left: every such process carries our private socket
# in its environment (but the daemon, which leaves by itself once idle, and
# this test's own ancestors).
"$PY" - "$SOFTVERBS_SOCKET" "$(daemon_pid)" <<'EOF' || fail "processes left behind"
import os, sys, time

mark = ("SOFTVERBS_SOCKET=" + sys.argv[1]).encode()
daemon = sys.argv[2]
mine = set()
p = os.getpid()
while p > 1:
    mine.add(p)
    try:
        st = open("/proc/%d/stat" % p).read()
        p = int(st.rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        break

def left():
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) in mine or d == daemon:
            continue
        try:
            env = open("/proc/%s/environ" % d, "rb").read().split(b"\0")
            st = open("/proc/%s/stat" % d).read()
        except OSError:
            continue
        if mark in env and st.rsplit(")", 1)[1].split()[0] != "Z":
            found.append("%s %s" % (d, open("/proc/%s/cmdline" % d, "rb")
                                    .read().replace(b"\0", b" ").decode()))
    return found

for _ in range(40):
    f = left()
    if not f:
        sys.exit(0)
    time.sleep(0.05)
print("left behind:\n  " + "\n  ".join(f), file=sys.stderr)
sys.exit(1)
EOF
pass "make bench --short: results.json, table.txt, bw_vs_size.png, lat_vs_size.png; nothing left behind"
