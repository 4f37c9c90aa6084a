#!/usr/bin/env bash
# make bench, short, so that it cannot rot: bench/run.sh --short into a
# folder of its own must exit 0 and leave results.json (every part there and
# well-formed, the resource-domain comparisons of issue 5 and the rdma_cm
# connection setup against TCP of issue 19 included), table.txt (the ratios
# and the issues' targets), the two PNG plots, and no process behind it.
# Timings are printed, never checked.
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

rm = R.get("regcost_maps") or {}
need(rm.get("mappings") == 8192 and (rm.get("query_us") or 0) > 0
     and (rm.get("text_us") or 0) > 0 and (rm.get("ratio") or 0) > 0,
     "regcost in a process of many mappings: maps query / text")

qs = (R.get("qpscale") or {}).get("points") or []
need([p.get("qps") for p in qs] == [100, 1000]
     and all((p.get("per_s") or 0) > 0 and (p.get("daemon_bytes_per_qp") or 0) > 0
             for p in qs), "qpscale: QPs per second and daemon bytes per QP at 100 and 1000")

st = {s["step"]: s["status"] for s in R["steps"]}
if st.get("budgets") == "ok":
    b = R.get("budgets") or {}
    need(all(b.get(k, 0) > 0 for k in ("post_send_ir", "poll_cq_ir",
                                       "engine_wqe_ir")), "budgets")
    dr = b.get("direct") or {}
    need((dr.get("post_send_ir") or 0) > 0 and
         (dr.get("poll_cq_ir") or 0) > 0, "budgets: the direct path's")
    rd = b.get("res_domains") or {}
    need("error" not in rd, "budgets: resource domains measured")
    for m in ("plain", "safe", "unsafe", "single"):
        x = rd.get(m) or {}
        need(all(x.get(k, 0) > 0 for k in ("post_send_ir", "poll_cq_ir"))
             and abs(x.get("post_poll_ir", 0) - x.get("post_send_ir", 0)
                     - x.get("poll_cq_ir", 0)) < 0.2,
             "budgets: %s post, poll, post+poll" % m)
        need(x.get("db") == 0 if m == "plain" else (x.get("db") or 0) >= 1,
             "budgets: %s doorbell page" % m)
    v = rd.get("single_vs_safe") or {}
    need(v.get("post_poll", 0) > 0 and v.get("post_poll_fewer_pct") is not None,
         "budgets: SINGLE against SAFE")
else:
    need(st.get("budgets") in ("skipped", "missing"), "budgets step")

# issue 24: capture's cost, each configuration measured, the capture wrote
# packets
if has_bench:
    C = R.get("capture") or {}
    need(C.get("rounds", 0) >= 1 and C.get("packets_written", 0) > 0 and
         all((C.get(c) or {}).get(k) for c in ("off", "nodirect", "on")
             for k in ("lat8_us", "lat4k_us", "bw64k_MBps")),
         "capture's cost: %s" % C)

# issue 22's table: every target named, a figure where its runs ran
T = R.get("targets_issue22") or []
need(len(T) >= 10 and all("target" in t and "met" in t for t in T),
     "targets_issue22")
if has_bench:
    mf = (R["softverbs"].get("write_bw_memfd") or {}).get("results")
    rows_ok(mf, "bw_MBps", "softverbs write bw --memfd")

# issue 23's figure: WRITE 1 MiB between DM MRs against memcpy
T = R.get("targets_issue23") or []
need(len(T) == 1 and all("target" in t and "met" in t for t in T),
     "targets_issue23")
if has_bench:
    rows_ok((R["softverbs"].get("write_bw_dm") or {}).get("results"),
            "bw_MBps", "softverbs write bw --dm")
    need(T and T[0].get("value") is not None, "issue 23: the DM ratio")

# resource domains (issue 5): every comparison there, the runs as asked
if has_bench:
    D = R.get("res_domains") or {}
    need(D.get("rounds", 0) >= 1, "res_domains: rounds")

    def cfg_ok(c, what, key, domains, res_domain, qps=1):
        rows = (c or {}).get("results")
        rows_ok(rows, key, "res_domains " + what)
        need(all(len(r.get("runs") or []) == D.get("rounds") for r in rows or []),
             "res_domains %s: a figure per round" % what)
        need((c or {}).get("domains") == domains and
             (c or {}).get("res_domain") == res_domain,
             "res_domains %s: domains %s, res_domain %s" % (what, domains,
                                                            res_domain))
        for db in (c or {}).get("qp_db") or [None]:
            ok = isinstance(db, list) and len(db) == qps
            if ok and domains == "none":
                ok = all(x == 0 for x in db)
            elif ok and domains == "one":
                ok = len(set(db)) == 1 and db[0] >= 1
            elif ok:
                # distinct pages while both processes' domains fit
                mx = (c or {}).get("max_resource_domains") or 0
                ok = min(db) >= 1 and (len(set(db)) == qps or 2 * qps > mx)
            need(ok, "res_domains %s: doorbell pages %r" % (what, db))

    lat = (D.get("latency") or {}).get("configs") or {}
    cfg_ok(lat.get("none"), "lat none", "lat_p50_us", "none", None)
    cfg_ok(lat.get("safe_low_latency"), "lat low_latency", "lat_p50_us",
           "one", "safe,low_latency")
    cfg_ok(lat.get("safe_high_bw"), "lat high_bw", "lat_p50_us", "one",
           "safe,high_bw")
    need(all((r.get("ratio") or 0) > 0 for r in
             (D.get("latency") or {}).get("low_latency_vs_high_bw") or [{}]),
         "res_domains: latency LOW_LATENCY / HIGH_BW")
    rate = (D.get("msg_rate") or {}).get("configs") or {}
    cfg_ok(rate.get("none"), "rate none", "msg_rate_Mpps", "none", None)
    cfg_ok(rate.get("safe_default"), "rate default", "msg_rate_Mpps", "one",
           "safe,default")
    cfg_ok(rate.get("safe_high_bw"), "rate high_bw", "msg_rate_Mpps", "one",
           "safe,high_bw")
    need(all((r.get("ratio") or 0) > 0 for r in
             (D.get("msg_rate") or {}).get("high_bw_vs_default") or [{}]),
         "res_domains: message rate HIGH_BW / DEFAULT")
    for n in ("2", "4"):
        q = (D.get("qps") or {}).get(n) or {}
        for c in ("none", "one", "per-qp"):
            cfg_ok((q.get("configs") or {}).get(c), "%s QPs %s" % (n, c),
                   "msg_rate_Mpps", c, None if c == "none" else "safe,default",
                   int(n))
        need((q.get("per_qp_vs_one") or 0) > 0 and
             (q.get("per_qp_vs_none") or 0) > 0,
             "res_domains: %s QPs, per-qp against one and none" % n)
    T5 = R.get("targets_issue5") or []
    need(len(T5) == 1 and (st.get("budgets") != "ok" or
                           T5[0]["value"] is not None),
         "the target of issue 5 (SINGLE against SAFE)")

# memory-management extensions (issue 6): both cycle rates, side by side
M = (R.get("mm_cycle") or {}).get("results")
need(st.get("mm_cycle") == "ok" and bool(M), "mm_cycle step")
for r in M or []:
    need(all((r.get(k) or 0) > 0 for k in
             ("reg_cps", "fr_sync_cps", "fr_pipe_cps",
              "ratio_fr_sync_vs_reg", "ratio_fr_pipe_vs_reg")),
         "mm_cycle %s: both rates and their ratios" % r.get("size"))

# rdma_cm connection setup (issue 19): cmtime on sv0 beside TCP
C = R.get("cmtime") or {}
need(st.get("cmtime") == "ok", "cmtime step")
lo = (C.get("paths") or {}).get("loopback") or {}
for side in ("sv0", "tcp"):
    x = lo.get(side) or {}
    need(all((x.get(k) or 0) > 0 for k in
             ("setup_cps", "connect_cps", "teardown_cps",
              "single_connect_us")),
         "cmtime loopback %s: the rates and one connection alone" % side)
need(all(((lo.get("ratio_sv0_tcp") or {}).get(k) or 0) > 0
         for k in ("setup_cps", "connect_cps", "single_connect_us")),
     "cmtime loopback: sv0 / TCP")

T = R.get("targets") or []
need(len(T) == 5, "five targets")
if has_bench:
    need(all(t["value"] is not None for t in T[:3]),
         "the targets against process_vm_writev and ucx are measured")

table = open(os.path.join(out, "table.txt")).read()
for s in ("Bandwidth (MB/s)", "Latency (us p50)", "Targets of issue 4",
          "Registration", "Registration in a process of 8192 more mappings",
          "Instructions", "Resource domains (issue 5)",
          "Targets of issue 5", "Memory-management extensions (issue 6)",
          "rdma_cm connection setup (issue 19)",
          "the cost of softverbs capture"):
    need(s in table, "table.txt: " + s)
if has_bench:
    for s in ("ll/hb", "hb/def", "pq/one"):
        need(s in table, "table.txt: " + s)
if st.get("budgets") == "ok":
    need("SINGLE / SAFE" in table, "table.txt: SINGLE / SAFE")

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
