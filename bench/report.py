#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""make bench's report: reads the raw logs that bench/run.sh left in
OUTDIR/raw and writes OUTDIR/results.json (everything, machine-readable),
OUTDIR/table.txt (softverbs next to the limits and peers of the same run,
the issue's targets met or missed and by how much) and the plots
OUTDIR/bw_vs_size.png and OUTDIR/lat_vs_size.png (gnuplot).

Units: MB/s with 1 MB = 1e6 bytes everywhere (perftest and ucx_perftest
print MiB/s; they are converted). Latency in microseconds: one-way (half a
round trip) for write, send and put ping-pongs, a full round trip for read
and atomic, as perftest and 'softverbs bench' report them.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys

import report_mw

MIB = 1048576 / 1e6       # MiB/s -> MB/s

# The targets (never asserted; reported).
TARGET_PVW = 0.9           # write 1 MiB bw >= 0.9 x one process_vm_writev
TARGET_UCX_BW = 1.0        # write 1 MiB bw >= 1.0 x ucx put bw
TARGET_UCX_LAT = 1.2       # write 8 B lat <= 1.2 x ucx put lat
TARGET_POST = 150          # instructions per ibv_post_send
TARGET_POLL = 80           # instructions per ibv_poll_cq returning a CQE
TARGET_SINGLE_FEWER = 20   # issue 5: post+poll under SINGLE, % fewer than SAFE
# issue 22: the same-host direct path, domains, the wire
T22_PVW = 0.9              # WRITE 1 MiB (malloc'd) >= 0.9 x one process_vm_writev
T22_MEMFD = 0.7            # WRITE 1 MiB between memfd MRs >= 0.7 x memcpy
T22_LAT_PVW = 2.0          # 8 B WRITE latency <= 2 x one process_vm_writev call
T22_RATE_UCX = 0.12        # 8 B WRITE rate >= 0.12 x UCX put rate
T22_LL = 1.0               # LOW_LATENCY domain latency <= 1.0 x no domain
T22_DOMAINS = 1.0          # two QPs in two domains >= 1.0 x in one domain
T22_WIRE_BW = 0.8          # RoCEv2 1 MiB WRITE >= 0.8 x iperf3
T22_WIRE_LAT = 8.0         # RoCEv2 ib_send_lat 2 B <= 8 us
T22_WIRE_RATE = 2.0        # RoCEv2 64 B WRITE rate >= 2 M/s
T22_POST, T22_POLL = 119, 47  # instructions when the issue was filed
# issue 23: the verbs the other devices have
T23_DM = 0.7               # WRITE 1 MiB between DM MRs >= 0.7 x memcpy


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def read_json(path):
    """The one JSON object in a file (text around it is tolerated)."""
    text = read(path)
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    a, b = text.find("{"), text.rfind("}")
    if a < 0 or b < a:
        return None
    try:
        return json.loads(text[a:b + 1])
    except ValueError:
        return None


def run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True,
                              timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


# ---- the machine and the build ----

def machine():
    m = {"nproc": len(os.sched_getaffinity(0)),
         "online_cpus": os.cpu_count(),
         "cpu_model": None,
         "kernel": platform.release(),
         "arch": platform.machine()}
    for line in (read("/proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            m["cpu_model"] = line.split(":", 1)[1].strip()
            break
    for line in (read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            m["mem_gib"] = round(int(line.split()[1]) / 1048576, 1)
    os_release = read("/etc/os-release") or ""
    g = re.search(r'^PRETTY_NAME="?([^"\n]*)', os_release, re.M)
    m["os"] = g.group(1) if g else None
    m["load_avg_at_end"] = list(os.getloadavg())
    return m


def build_info(build, repo):
    cache = read(os.path.join(build, "CMakeCache.txt")) or ""

    def cached(key):
        g = re.search(r"^%s:[A-Z]+=(.*)$" % re.escape(key), cache, re.M)
        return g.group(1) if g else None
    rev = run(["git", "-C", repo, "rev-parse", "--short", "HEAD"])
    dirty = run(["git", "-C", repo, "status", "--porcelain",
                 "--untracked-files=no"])
    ucx = run(["ucx_info", "-v"]).splitlines()
    return {"dir": build,
            "type": cached("CMAKE_BUILD_TYPE"),
            "sanitized": cached("SV_SANITIZE") == "ON",
            "compiler": run([cached("CMAKE_C_COMPILER") or "cc",
                             "--version"]).split("\n")[0] or None,
            "git": (rev + ("+dirty" if dirty else "")) if rev else None,
            "perftest": run(["dpkg-query", "-W", "-f=${Version}",
                             "perftest"]) or None,
            "ucx": ucx[0].replace("# Version ", "") if ucx else None,
            "valgrind": run(["valgrind", "--version"]) or None}


# ---- parsers ----

def steps(raw):
    out = []
    for line in (read(os.path.join(raw, "steps.tsv")) or "").splitlines()[1:]:
        f = line.split("\t")
        if len(f) >= 3:
            out.append({"step": f[0], "status": f[1],
                        "seconds": float(f[2] or 0),
                        "note": f[3] if len(f) > 3 else ""})
    return out


def softverbs(raw, name):
    """'softverbs bench --json' of one test and mode: sv_NAME.out, or its
    groups of sizes sv_NAME.GROUP.out merged (in the order of the sizes)."""
    files = sorted(f for f in os.listdir(raw)
                   if f == "sv_%s.out" % name or
                   (f.startswith("sv_%s." % name) and f.endswith(".out")))
    merged = None
    for f in files:
        j = read_json(os.path.join(raw, f))
        if not j or not isinstance(j.get("results"), list):
            continue
        if merged is None:
            merged = dict(j, results=[])
        merged["results"] += j["results"]
    if merged:
        merged["results"].sort(key=lambda r: r.get("size", 0))
    return merged


def perftest(path, bw):
    """Rows of perftest's results table (after the '#bytes' header)."""
    text = read(path)
    if not text:
        return None
    rows, hdr = [], False
    for line in text.splitlines():
        if "#bytes" in line:
            hdr = True
            continue
        f = line.split()
        if not hdr or len(f) < 5 or not f[0].isdigit():
            continue
        try:
            v = [float(x) for x in f]
        except ValueError:
            continue
        if bw:
            rows.append({"size": int(v[0]), "iters": int(v[1]),
                         "bw_peak_MBps": v[2] * MIB, "bw_MBps": v[3] * MIB,
                         "msg_rate_Mpps": v[4]})
        elif len(v) >= 9:
            rows.append({"size": int(v[0]), "iters": int(v[1]),
                         "lat_min_us": v[2], "lat_max_us": v[3],
                         "lat_p50_us": v[4], "lat_avg_us": v[5],
                         "lat_stdev_us": v[6], "lat_p99_us": v[7],
                         "lat_p999_us": v[8]})
    return {"results": rows} if rows else None


def ucx(path):
    """ucx_perftest -b BATCH -f -v: one CSV line per test, named by label."""
    text = read(path)
    if not text:
        return None
    res = {"put_bw": [], "put_lat": [], "am_bw": []}
    for line in text.splitlines():
        f = [x.strip() for x in line.split(",")]
        if len(f) < 9:
            continue
        g = re.match(r"^(put_bw|put_lat|am_bw)_(\d+)$", f[0])
        if not g:
            continue
        try:
            v = [float(x) for x in f[1:9]]
        except ValueError:
            continue
        res[g.group(1)].append({
            "size": int(g.group(2)), "iters": int(v[0]),
            "lat_p50_us": v[1], "lat_avg_us": v[2],
            "bw_MBps": v[5] * MIB, "msg_rate_Mpps": v[7] / 1e6})
    return res if any(res.values()) else None


def check_outputs(R, raw):
    """A step that exited 0 but left no figures has failed (ucx_perftest,
    for one, exits 0 when every test of its batch failed). Marks such steps
    failed in R["steps"]; returns their names."""
    def has_rows(j):
        return bool(j and isinstance(j.get("results"), list) and j["results"])

    batch = read(os.path.join(raw, "ucx_batch.txt")) or ""
    ucx_want = len([l for l in batch.splitlines() if l.strip()])
    ucx_got = sum(len(v) for v in (R["ucx"] or {}).values())
    b = R["budgets"] or {}
    hollow = []
    for st in R["steps"]:
        n = st["step"]
        if st["status"] != "ok":
            continue
        if n == "limits":
            ok = bool((R["limits"] or {}).get("process_vm_writev"))
        elif n.startswith("sv_"):
            ok = has_rows(read_json(os.path.join(raw, n + ".out")))
        elif n.startswith("pt_"):
            ok = n[3:] in R["perftest"]
        elif n == "ucx":
            ok = ucx_want > 0 and ucx_got == ucx_want
        elif n == "regcost" or n.startswith("regcost_maps"):
            ok = bool((read_json(os.path.join(raw, n + ".out")) or {})
                      .get("reg_4k_us"))
        elif n == "mm_cycle":
            ok = bool(((R.get("mm_cycle") or {}).get("results")))
        elif n == "qpscale":
            ok = bool(((R.get("qpscale") or {}).get("points")))
        elif n == "netns":
            ok = (R.get("netns") or {}).get("iperf3_tcp_gbps") is not None
        elif n == "cmtime":
            lo = ((R.get("cmtime") or {}).get("paths") or {}).get("loopback")
            ok = all(((lo or {}).get(k) or {}).get("setup_cps")
                     for k in ("sv0", "tcp"))
        elif n.startswith("mw_"):
            S = (R.get("middleware") or {}).get(n[3:]) or {}
            ok = bool(S.get("figures")) and all(
                f["sv0"] is not None and f["tcp"] is not None
                for f in S["figures"])
        elif n == "budgets":
            ok = "error" not in b and bool(b.get("post_send_ir"))
        elif n == "flood":
            ok = bool((R.get("flood") or {}).get("runs"))
        else:
            ok = True
        if not ok:
            st["status"] = "failed"
            st["note"] = "exited 0 but left no figures (see raw/%s.*)" % n
            hollow.append(n)
    return hollow


def regcost_maps(raw):
    """sv_regcost --mappings N with the daemon's maps query and with its
    maps text (SOFTVERBSD_MAPS_TEXT=1), in alternating rounds: the best
    round of each, their ratio, and whether this kernel has the query."""
    q, t, maps = [], [], None
    for r in range(1, 10):
        a = read_json(os.path.join(raw, "regcost_maps_%d.out" % r))
        b = read_json(os.path.join(raw, "regcost_maps_text_%d.out" % r))
        if a and a.get("reg_4k_us"):
            q.append(a["reg_4k_us"])
            maps = a.get("mappings")
        if b and b.get("reg_4k_us"):
            t.append(b["reg_4k_us"])
    if not q or not t:
        return None
    rel = os.uname().release
    m = re.match(r"(\d+)\.(\d+)", rel)
    has = bool(m) and (int(m.group(1)), int(m.group(2))) >= (6, 11)
    return {"mappings": maps, "rounds": min(len(q), len(t)),
            "query_us": min(q), "text_us": min(t),
            "ratio": min(t) / min(q) if min(q) > 0 else None,
            "kernel": rel, "kernel_has_query": has}


# ---- resource domains (issue 5) ----

def median(v):
    v = sorted(x for x in v if x is not None)
    if not v:
        return None
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def res_domains(R, raw):
    """The runs sv_rd_KIND.CONFIG.rROUND.out of bench/run.sh (KIND: lat,
    rate, q2, q4; CONFIG: none or THREAD_MSG for lat and rate, none, one or
    per-qp for qN) merged: per kind, configuration and size the median over
    the rounds and the figures of each round; with the instructions of
    the budgets (SAFE against SINGLE) and the ratios asked for."""
    runs = {}
    for f in sorted(os.listdir(raw)):
        g = re.match(r"^sv_rd_(lat|rate|q\d+)\.([^.]+)\.r(\d+)\.out$", f)
        if not g:
            continue
        j = read_json(os.path.join(raw, f))
        if not j or not isinstance(j.get("results"), list):
            continue
        kind, cfg = g.group(1), g.group(2)
        runs.setdefault(kind, {}).setdefault(cfg, []).append(j)

    def merged(kind, cfg, key):
        """[{size, KEY (median), runs: [...], qp_db}] over the rounds."""
        js = (runs.get(kind) or {}).get(cfg) or []
        sizes = sorted({r.get("size") for j in js for r in j["results"]})
        out = []
        for s in sizes:
            v = [at(j["results"], s, key) for j in js]
            out.append({"size": s, key: median(v),
                        "runs": [x for x in v if x is not None]})
        if not js:
            return None
        return {"results": out,
                "outstanding": js[0].get("outstanding"),
                "domains": js[0].get("domains"),
                "res_domain": js[0].get("res_domain"),
                "qp_db": [j.get("qp_db") for j in js],
                "max_resource_domains": js[0].get("max_resource_domains")}

    def ratios(a, b, key):
        ra = (a or {}).get("results") or []
        rb = (b or {}).get("results") or []
        return [{"size": r["size"],
                 "ratio": ratio(r.get(key), at(rb, r["size"], key))}
                for r in ra if at(rb, r["size"], key) is not None]

    D = {"rounds": max([len(c) for k in runs.values() for c in k.values()]
                       or [0])}
    b = (R["budgets"] or {}).get("res_domains")
    D["instructions"] = b
    lat = {c: merged("lat", c, "lat_p50_us")
           for c in ("none", "safe_low_latency", "safe_high_bw")}
    D["latency"] = {"configs": lat,
                    "low_latency_vs_high_bw": ratios(
                        lat["safe_low_latency"], lat["safe_high_bw"],
                        "lat_p50_us")}
    rate = {c: merged("rate", c, "msg_rate_Mpps")
            for c in ("none", "safe_default", "safe_high_bw")}
    D["msg_rate"] = {"configs": rate,
                     "high_bw_vs_default": ratios(
                         rate["safe_high_bw"], rate["safe_default"],
                         "msg_rate_Mpps")}
    D["qps"] = {}
    for kind in sorted(runs):
        if not kind.startswith("q"):
            continue
        n = int(kind[1:])
        cf = {c: merged(kind, c, "msg_rate_Mpps")
              for c in ("none", "one", "per-qp")}
        get = lambda c: at((cf[c] or {}).get("results"), 8, "msg_rate_Mpps")
        D["qps"][str(n)] = {
            "configs": cf,
            "per_qp_vs_one": ratio(get("per-qp"), get("one")),
            "per_qp_vs_none": ratio(get("per-qp"), get("none")),
            "one_vs_none": ratio(get("one"), get("none"))}
    has = bool(runs) or bool(b)
    return D if has else None


# ---- memory-management extensions (issue 6) ----

def mm_cycle(raw):
    """sv_mm_cycle's JSON: per size the cycles/s of ibv_reg_mr +
    ibv_dereg_mr (reg), of fast register + local invalidate one cycle at
    a time (fr_sync) and pipelined (fr_pipe), and the ratios."""
    j = read_json(os.path.join(raw, "mm_cycle.out"))
    if not j or not isinstance(j.get("results"), list):
        return None
    rows = [r for r in j["results"]
            if all((r.get(k) or 0) > 0
                   for k in ("size", "reg_cps", "fr_sync_cps", "fr_pipe_cps"))]
    for r in rows:
        r["ratio_fr_sync_vs_reg"] = ratio(r["fr_sync_cps"], r["reg_cps"])
        r["ratio_fr_pipe_vs_reg"] = ratio(r["fr_pipe_cps"], r["reg_cps"])
    return dict(j, results=rows) if rows else None


def table_head(R, key, title):
    """A table's first lines and its part of the results: ([title, "not
    measured"], None) when the part is missing."""
    D = R.get(key)
    L = [title]
    if not D:
        L.append("  not measured")
    return L, D


def table_mm(R):
    L, M = table_head(R, "mm_cycle", "Memory-management extensions (issue 6)")
    if not M:
        return L
    L.append("  %-40s %10s %12s %10s %8s %8s"
             % ("cycles/s (median of %d run%s)"
                % (M.get("rounds") or 0,
                   "" if M.get("rounds") == 1 else "s"),
                "reg+dereg", "fr+inv sync", "fr+inv", "sync/reg",
                "fr/reg"))
    for r in M["results"]:
        L.append("    %-38s %s %s %s %s %s"
                 % (size_str(r["size"]), num(r["reg_cps"], 10),
                    num(r["fr_sync_cps"], 12), num(r["fr_pipe_cps"], 10),
                    times(r["ratio_fr_sync_vs_reg"]),
                    times(r["ratio_fr_pipe_vs_reg"])))
    L.extend(wrap("  (reg+dereg: ibv_reg_mr + ibv_dereg_mr of the buffer; fr+inv:"
                  " a fast-register work request and a local invalidate of"
                  " one MR over the buffer's pages, the application waiting"
                  " for each cycle (sync) or %s cycles per posted list, two"
                  " lists in flight)" % (M.get("batch") or "?")))
    return L


def flood(path):
    """bench/flood.sh's lines: "run I: A MB/s alone, F MB/s flooded,
    ratio R; flood ..." or "run I: failed: ..."."""
    text = read(path)
    if text is None:
        return None
    runs = []
    for line in text.splitlines():
        m = re.match(r"run (\d+): (failed: .*|.*ratio ([0-9.]+).*)$", line)
        if not m:
            continue
        runs.append({"run": int(m.group(1)), "line": m.group(2),
                     "ratio": float(m.group(3)) if m.group(3) else None})
    return {"runs": runs}


def table_flood(R):
    """ib_write_bw beside a RoCEv2 flood (bench/flood.sh, issue 21)."""
    L, F = table_head(R, "flood",
                      "ib_write_bw beside a RoCEv2 flood (issue 21, 6)")
    if not F:
        return L
    for r in F.get("runs") or []:
        L.append("  run %d: %s" % (r["run"], r["line"]))
    got = [r["ratio"] for r in F.get("runs") or [] if r["ratio"] is not None]
    L.append("  %-40s %10s   (target >= 0.5)" % (
        "flooded / alone, median", "-" if not got else "%.2f" % median(got)))
    return L


def table_netns(R):
    """RoCEv2 between two network namespaces (bench/netns.sh)."""
    L, N = table_head(R, "netns", "RoCEv2 across two network namespaces (issue 7)")
    if not N:
        return L
    rows = [("iperf3 TCP, one stream", N.get("iperf3_tcp_gbps"), "Gb/s"),
            ("ib_write_bw 1 MiB", N.get("write_bw_1m_gbps"), "Gb/s"),
            ("ib_write_bw 64 B, message rate", N.get("write_rate_64b_mpps"),
             "Mpps"),
            ("ib_send_lat 2 B, typical", N.get("send_lat_2b_typical_us"), "us"),
            ("ib_send_lat 2 B, average", N.get("send_lat_2b_avg_us"), "us"),
            ("UDP 2 B round trip, both sleeping (p50)",
             N.get("udp_rtt_block_us"), "us"),
            ("UDP 2 B round trip, both spinning (p50)",
             N.get("udp_rtt_spin_us"), "us")]
    for name, v, unit in rows:
        L.append("  %-40s %10s %s" % (name, "-" if v is None else
                                      ("%.3f" % v), unit))
    r = N.get("write_bw_1m_vs_iperf3")
    L.append("  %-40s %10s   (target >= 0.5)" % (
        "ib_write_bw 1 MiB / iperf3", "-" if r is None else "%.3f" % r))
    if N.get("error"):
        L.extend(wrap("  error: %s" % N["error"]))
    return L


def table_cmtime(R):
    """rdma_cm connection setup: cmtime on sv0 against TCP (bench/cmtime.sh)."""
    L, C = table_head(R, "cmtime", "rdma_cm connection setup (issue 19):"
                      " Debian's cmtime on sv0 against TCP connect/accept")
    if not C:
        return L
    P = C.get("paths") or {}
    paths = [(k, P[k]) for k in ("loopback", "host")
             if (P.get(k) or {}).get("addr")]
    n, rounds = C.get("connections"), C.get("rounds")
    L.append("  %d connections at a time, median of %d run%s; one connection"
             " alone, median of %d" % (n or 0, rounds or 0,
                                       "" if rounds == 1 else "s",
                                       C.get("single_runs") or 0))
    L.append(("  %-32s" % "" + "".join("%29s" % ("%s " % p["addr"])
                                       for _, p in paths)).rstrip())
    L.append(("  %-32s" % "" + "".join("%9s %9s %8s " % ("sv0", "TCP",
                                                          "sv0/TCP")
                                       for _ in paths)).rstrip())

    def row(title, get, rat):
        cells = ""
        for _, p in paths:
            sv, tcp = get(p.get("sv0") or {}), get(p.get("tcp") or {})
            cells += "%s %s %s " % (num(sv, 9), num(tcp, 9),
                                    times(rat(p, sv, tcp)))
        L.append("    %-30s%s" % (title, cells.rstrip()))

    def r_of(key):
        return lambda p, a, b: (p.get("ratio_sv0_tcp") or {}).get(key)

    L.append("  connections per second")
    row("setup (create id .. both ends)", lambda x: x.get("setup_cps"),
        r_of("setup_cps"))
    row("connect (sv0) / accept (TCP)", lambda x: x.get("connect_cps"),
        r_of("connect_cps"))
    row("teardown (disconnect+destroy)", lambda x: x.get("teardown_cps"),
        r_of("teardown_cps"))
    L.append("  us per connection (step total / %s)" % n)
    steps = []
    for _, p in paths:
        for side in ("sv0", "tcp"):
            for s in ((p.get(side) or {}).get("steps") or {}):
                if s not in steps:
                    steps.append(s)
    order = ["create id", "bind addr", "resolve addr", "resolve route",
             "create qp", "connect", "accept", "disconnect", "destroy"]
    steps.sort(key=lambda s: order.index(s) if s in order else len(order))
    for s in steps:
        row(s + (" (TCP: handshake)" if s == "connect" else
                 " (TCP: server)" if s == "accept" else ""),
            lambda x, s=s: ((x.get("steps") or {}).get(s) or {})
            .get("us_per_conn"),
            lambda p, a, b: ratio(a, b))
    L.append("  one connection alone, us")
    row("setup", lambda x: x.get("single_setup_us"),
        r_of("single_setup_us"))
    row("connect (sv0) / accept (TCP)", lambda x: x.get("single_connect_us"),
        r_of("single_connect_us"))
    row("teardown", lambda x: x.get("single_teardown_us"),
        r_of("single_teardown_us"))
    for name, p in sorted(P.items()):
        if not p.get("addr"):
            L.append("  %s: %s" % (name, p.get("skipped")))
    L.extend(wrap("  (sv0: Debian's cmtime, server and client through"
                  " 'softverbs run'; TCP: sv_tcp_connect, cmtime's steps"
                  " over TCP between two processes. sv0's connect ends at"
                  " ESTABLISHED, after the server's rdma_accept; TCP's"
                  " handshake needs no server code, its accept is the"
                  " server's accept() returning: established at both ends."
                  " Rates: sv0/TCP < 1x is fewer per second; times: > 1x"
                  " is longer)"))
    if C.get("error"):
        L.extend(wrap("  error: %s" % C["error"]))
    return L


def targets5(R):
    D = R.get("res_domains") or {}
    v = ((D.get("instructions") or {}).get("single_vs_safe") or {})
    pct = v.get("post_poll_fewer_pct")
    t = {"target": "post+poll instructions per WR: SINGLE >= %d%% fewer"
         " than SAFE" % TARGET_SINGLE_FEWER,
         "goal": ">= %d%% fewer" % TARGET_SINGLE_FEWER, "value": pct,
         "detail": "callgrind"}
    if pct is None:
        t.update(met=None, by="not measured")
    elif pct >= TARGET_SINGLE_FEWER:
        t.update(met=True, by="%.1f%% fewer (SINGLE / SAFE = %.3fx)"
                 % (pct, v.get("post_poll")))
    else:
        t.update(met=False, by="%.1f%% fewer (SINGLE / SAFE = %.3fx), %.1f"
                 " points short" % (pct, v.get("post_poll"),
                                    TARGET_SINGLE_FEWER - pct))
    return [t]


def table_res_domains(R):
    L, D = table_head(R, "res_domains", "Resource domains (issue 5)")
    if not D:
        return L
    ins = D.get("instructions") or {}
    if ins.get("safe") or ins.get("plain"):
        L.append("  %-40s %10s %12s %10s"
                 % ("instructions per WR (callgrind)", "post", "poll",
                    "post+poll"))
        for m, title in (("plain", "no domain"), ("safe", "SAFE"),
                         ("unsafe", "UNSAFE"), ("single", "SINGLE")):
            x = ins.get(m)
            if x:
                L.append("    %-38s %s %s %s"
                         % (title, num(x.get("post_send_ir"), 10),
                            num(x.get("poll_cq_ir"), 12),
                            num(x.get("post_poll_ir"), 10)))
        for k, title in (("single_vs_safe", "SINGLE / SAFE"),
                         ("unsafe_vs_safe", "UNSAFE / SAFE")):
            v = ins.get(k)
            if v:
                L.append("    %-38s %s %s %s  (%s%% fewer)"
                         % (title, times(v.get("post_send"), 10),
                            times(v.get("poll_cq"), 12),
                            times(v.get("post_poll"), 10),
                            num(v.get("post_poll_fewer_pct"), 0)))
    if ins.get("error"):
        L.extend(wrap("    resource-domain instructions not measured: %s"
                      % ins["error"]))
    rounds = D.get("rounds") or 0
    med = "median of %d run%s" % (rounds, "" if rounds == 1 else "s")

    def rows_of(cfg):
        return (cfg or {}).get("results")

    lat = (D.get("latency") or {}).get("configs") or {}
    if any(lat.values()):
        L.append("  %-40s %10s %12s %10s %8s"
                 % ("write latency (us p50, %s)" % med, "no domain",
                    "low_latency", "high_bw", "ll/hb"))
        sizes = sorted({r["size"] for c in lat.values()
                        for r in rows_of(c) or []})
        for s in sizes:
            ll = at(rows_of(lat.get("safe_low_latency")), s, "lat_p50_us")
            hb = at(rows_of(lat.get("safe_high_bw")), s, "lat_p50_us")
            L.append("    %-38s %s %s %s %s"
                     % (size_str(s), num(at(rows_of(lat.get("none")), s,
                                            "lat_p50_us"), 10),
                        num(ll, 12), num(hb, 10), times(ratio(ll, hb))))
    rate = (D.get("msg_rate") or {}).get("configs") or {}
    if any(rate.values()):
        outst = (rate.get("safe_default") or rate.get("none")
                 or {}).get("outstanding")
        L.append("  %-40s %10s %12s %10s %8s"
                 % ("write msg rate (Mpps%s)"
                    % (", -o %d" % outst if outst else ""), "no domain",
                    "default", "high_bw", "hb/def"))
        sizes = sorted({r["size"] for c in rate.values()
                        for r in rows_of(c) or []})
        for s in sizes:
            df = at(rows_of(rate.get("safe_default")), s, "msg_rate_Mpps")
            hb = at(rows_of(rate.get("safe_high_bw")), s, "msg_rate_Mpps")
            L.append("    %-38s %s %s %s %s"
                     % (size_str(s), num(at(rows_of(rate.get("none")), s,
                                            "msg_rate_Mpps"), 10),
                        num(df, 12), num(hb, 10), times(ratio(hb, df))))
    qs = D.get("qps") or {}
    if qs:
        oq = [(c or {}).get("outstanding") for q in qs.values()
              for c in (q.get("configs") or {}).values() if c]
        L.append("  %-40s %10s %12s %10s %8s %8s"
                 % ("N QPs, aggregate Mpps (8 B%s)"
                    % (", -o %d" % oq[0] if oq and oq[0] else ""),
                    "no domain", "one domain",
                    "per-qp", "pq/one", "pq/none"))
        for n in sorted(qs, key=int):
            q = qs[n]
            cf = q.get("configs") or {}
            get = lambda c: at(rows_of(cf.get(c)), 8, "msg_rate_Mpps")
            L.append("    %-38s %s %s %s %s %s"
                     % ("%s QPs" % n, num(get("none"), 10),
                        num(get("one"), 12), num(get("per-qp"), 10),
                        times(q.get("per_qp_vs_one")),
                        times(q.get("per_qp_vs_none"))))
        pages = []
        for n in sorted(qs, key=int):
            for c in ("none", "one", "per-qp"):
                dbs = ((qs[n].get("configs") or {}).get(c) or {}).get("qp_db")
                if dbs and dbs[0] is not None:
                    pages.append("%s QPs %s: %s" % (
                        n, c, ",".join(str(x) for x in dbs[0])))
        if pages:
            L.extend(wrap("    doorbell pages of the client's QPs: "
                          + "; ".join(pages)))
    L.append("  (latency and rate: the QPs and CQs of each process in one"
             " domain, thread model SAFE, against the model in the column;"
             " N QPs: domains safe,default; a ratio > 1x is more latency or"
             " more rate; timings move with the load)")
    return L


# ---- lookups ----

def at(rows, size, key):
    for r in rows or []:
        if r.get("size") == size and r.get(key) is not None:
            return r[key]
    return None


def sv_rows(R, test, mode, events=False):
    name = "%s_%s%s" % (test, mode, "_events" if events else "")
    return (R["softverbs"].get(name) or {}).get("results")


def pt_rows(R, prog):
    return (R["perftest"].get(prog) or {}).get("results")


def lim_rows(R, kind):
    return (R["limits"] or {}).get(kind)


def ucx_rows(R, kind):
    return (R["ucx"] or {}).get(kind)


def ratio(a, b):
    return a / b if a is not None and b else None


# ---- formatting ----

def size_str(s):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if s >= (1 << shift) and s % (1 << shift) == 0:
            return "%d %s" % (s >> shift, unit)
    return "%d B" % s


def num(v, width=10):
    if v is None:
        return "-".rjust(width)
    a = abs(v)
    if a >= 1000:
        s = "%.0f" % v
    elif a >= 100:
        s = "%.1f" % v
    elif a >= 1:
        s = "%.2f" % v
    else:
        s = "%.3f" % v
    return s.rjust(width)


def times(v, width=8):
    if v is None:
        return "-".rjust(width)
    return (num(v, 0) + "x").rjust(width)


# ---- targets ----

def target_ge(name, value, goal, detail):
    t = {"target": name, "goal": ">= %.2fx" % goal, "value": value,
         "detail": detail}
    if value is None:
        t.update(met=None, by="not measured")
    elif value >= goal:
        t.update(met=True, by="%.2fx, %.0f%% above the goal"
                 % (value, (value / goal - 1) * 100))
    else:
        t.update(met=False, by="%.2fx, %.0f%% short (it needs %.2fx more)"
                 % (value, (1 - value / goal) * 100, goal / value))
    return t


def target_le(name, value, goal, detail, unit="x"):
    t = {"target": name, "goal": "<= %g%s" % (goal, unit), "value": value,
         "detail": detail}
    if value is None:
        t.update(met=None, by="not measured")
    elif value <= goal:
        t.update(met=True, by="%s%s, within the bound"
                 % (num(value, 0), unit))
    else:
        t.update(met=False, by="%s%s, %sx the bound"
                 % (num(value, 0), unit, num(value / goal, 0)))
    return t


def targets(R):
    out = []
    sv_w1m = at(sv_rows(R, "write", "bw"), 1 << 20, "bw_MBps")
    pvw1m = at(lim_rows(R, "process_vm_writev"), 1 << 20, "bw_MBps")
    ucx1m = at(ucx_rows(R, "put_bw"), 1 << 20, "bw_MBps")
    out.append(target_ge(
        "write 1 MiB bw >= %.1fx one process_vm_writev" % TARGET_PVW,
        ratio(sv_w1m, pvw1m), TARGET_PVW,
        "softverbs %s MB/s, process_vm_writev %s MB/s"
        % (num(sv_w1m, 0), num(pvw1m, 0))))
    out.append(target_ge(
        "write 1 MiB bw >= %.1fx ucx put bw" % TARGET_UCX_BW,
        ratio(sv_w1m, ucx1m), TARGET_UCX_BW,
        "softverbs %s MB/s, ucx put %s MB/s" % (num(sv_w1m, 0), num(ucx1m, 0))))
    # what bounds it, measured in the same run: the engine's two copies
    bnc1m = at(lim_rows(R, "readv_writev_bounce"), 1 << 20, "bw_MBps")
    if bnc1m and pvw1m:
        out[0]["context"] = (
            "the engine's way, process_vm_readv + process_vm_writev through"
            " a bounce buffer, reaches %s MB/s = %s of one process_vm_writev"
            % (num(bnc1m, 0), times(ratio(bnc1m, pvw1m), 0)))
    mc1m = at(lim_rows(R, "memcpy"), 1 << 20, "bw_MBps")
    if ucx1m and mc1m:
        out[1]["context"] = (
            "ucx put over shared memory is a memcpy into a segment both"
            " processes map (no kernel, no third process): %s MB/s = %s of"
            " memcpy" % (num(ucx1m, 0), times(ratio(ucx1m, mc1m), 0)))
    sv_l8 = at(sv_rows(R, "write", "lat"), 8, "lat_p50_us")
    ucx_l8 = at(ucx_rows(R, "put_lat"), 8, "lat_p50_us")
    out.append(target_le(
        "write 8 B latency <= %.1fx ucx put latency" % TARGET_UCX_LAT,
        ratio(sv_l8, ucx_l8), TARGET_UCX_LAT,
        "softverbs %s us, ucx put %s us" % (num(sv_l8, 0), num(ucx_l8, 0))))
    pp = (R["limits"] or {}).get("pingpong") or {}
    pvw8 = at(lim_rows(R, "process_vm_writev"), 8, "op_us")
    out[-1]["context"] = (
        "floors in this run: one 8-byte process_vm_writev call %s us,"
        " a cache line between two spinning processes %s us, a pipe"
        " wake-up %s us; %d CPUs for the client, the server and the engine"
        % (num(pvw8, 0), num((pp.get("shm_spin") or {}).get("lat_p50_us"), 0),
           num((pp.get("pipe") or {}).get("lat_p50_us"), 0),
           R["machine"]["nproc"]))
    b = R["budgets"] or {}
    out.append(target_le("instructions per ibv_post_send <= %d" % TARGET_POST,
                         b.get("post_send_ir"), TARGET_POST,
                         "callgrind", unit=""))
    out.append(target_le("instructions per ibv_poll_cq (a CQE) <= %d"
                         % TARGET_POLL, b.get("poll_cq_ir"), TARGET_POLL,
                         "callgrind", unit=""))
    return out


def targets22(R):
    """Issue 22's table: each figure a ratio of two measured in this run."""
    out = []
    lim = lambda k: lim_rows(R, k)
    sv_w1m = at(sv_rows(R, "write", "bw"), 1 << 20, "bw_MBps")
    pvw1m = at(lim("process_vm_writev"), 1 << 20, "bw_MBps")
    out.append(target_ge(
        "WRITE 1 MiB (malloc'd) / one process_vm_writev of 1 MiB",
        ratio(sv_w1m, pvw1m), T22_PVW,
        "softverbs %s MB/s, process_vm_writev %s MB/s"
        % (num(sv_w1m, 0), num(pvw1m, 0))))
    mfd = (R["softverbs"].get("write_bw_memfd") or {}).get("results")
    sv_m1m = at(mfd, 1 << 20, "bw_MBps")
    mc1m = at(lim("memcpy"), 1 << 20, "bw_MBps")
    out.append(target_ge(
        "WRITE 1 MiB between memfd MRs / memcpy of 1 MiB",
        ratio(sv_m1m, mc1m), T22_MEMFD,
        "softverbs %s MB/s, memcpy %s MB/s" % (num(sv_m1m, 0),
                                              num(mc1m, 0))))
    sv_l8 = at(sv_rows(R, "write", "lat"), 8, "lat_p50_us")
    pvw8 = at(lim("process_vm_writev"), 8, "op_us")
    out.append(target_le(
        "8 B WRITE latency / one process_vm_writev call",
        ratio(sv_l8, pvw8), T22_LAT_PVW,
        "softverbs %s us one way, process_vm_writev of 8 B %s us"
        % (num(sv_l8, 0), num(pvw8, 0))))
    # the best of no domain, a HIGH_BW domain (as the issue allows) and
    # memory both sides map (what UCX's shared-memory put writes into)
    D = R.get("res_domains") or {}
    hb = (((D.get("msg_rate") or {}).get("configs") or {})
          .get("safe_high_bw") or {}).get("results")
    rates = {"malloc'd": at(sv_rows(R, "write", "bw"), 8, "msg_rate_Mpps"),
             "HIGH_BW domain": at(hb, 8, "msg_rate_Mpps"),
             "sealed memfds": at(mfd, 8, "msg_rate_Mpps")}
    rates = {k: v for k, v in rates.items() if v is not None}
    best = max(rates, key=rates.get) if rates else None
    sv_r8 = rates.get(best)
    ucx_r8 = at(ucx_rows(R, "put_bw"), 8, "msg_rate_Mpps")
    out.append(target_ge(
        "8 B WRITE rate / UCX put rate (HIGH_BW domain allowed)",
        ratio(sv_r8, ucx_r8), T22_RATE_UCX,
        "softverbs %s M/s (%s; %s), ucx put %s M/s"
        % (num(sv_r8, 0), best,
           ", ".join("%s %s" % (k, num(v, 0)) for k, v in rates.items()),
           num(ucx_r8, 0))))
    lat = (D.get("latency") or {}).get("configs") or {}
    ll = at((lat.get("safe_low_latency") or {}).get("results"), 8,
            "lat_p50_us")
    nd = at((lat.get("none") or {}).get("results"), 8, "lat_p50_us")
    out.append(target_le(
        "LOW_LATENCY domain 8 B WRITE latency / no domain",
        ratio(ll, nd), T22_LL,
        "%s us against %s us (median of the rounds)" % (num(ll, 0),
                                                         num(nd, 0))))
    q2 = (D.get("qps") or {}).get("2") or {}
    out.append(target_ge(
        "two QPs in two domains / two QPs in one domain (8 B rate)",
        q2.get("per_qp_vs_one"), T22_DOMAINS, "median of the rounds"))
    N = R.get("netns") or {}
    out.append(target_ge(
        "RoCEv2 1 MiB WRITE / iperf3 on the same veth",
        N.get("write_bw_1m_vs_iperf3"), T22_WIRE_BW,
        "ib_write_bw %s Gb/s, iperf3 %s Gb/s"
        % (num(N.get("write_bw_1m_gbps"), 0),
           num(N.get("iperf3_tcp_gbps"), 0))))
    out.append(target_le(
        "RoCEv2 ib_send_lat 2 B", N.get("send_lat_2b_typical_us"),
        T22_WIRE_LAT, "typical (perftest); the kernel's UDP round trip "
        "over the same veth: %s us sleeping, %s us spinning"
        % (num(N.get("udp_rtt_block_us"), 1), num(N.get("udp_rtt_spin_us"), 1)),
        unit=" us"))
    r64 = N.get("write_rate_64b_mpps")
    t = target_ge("RoCEv2 64 B WRITE rate (M/s)", r64, T22_WIRE_RATE,
                  "ib_write_bw 64 B")
    t["goal"] = ">= %g M/s" % T22_WIRE_RATE
    out.append(t)
    b = R["budgets"] or {}
    out.append(target_le("ibv_post_send, one 8 B inline WR (instructions)",
                         b.get("post_send_ir"), T22_POST,
                         "callgrind; the daemon path", unit=""))
    out.append(target_le("ibv_poll_cq, one CQE (instructions)",
                         b.get("poll_cq_ir"), T22_POLL,
                         "callgrind; the daemon path", unit=""))
    dr = b.get("direct") or {}
    if dr.get("post_send_ir"):
        out[-1]["context"] = (
            "on the direct path: ibv_post_send %s instructions around its"
            " one process_vm_writev, ibv_poll_cq of its completion %s"
            % (num(dr.get("post_send_ir"), 0),
               num(dr.get("poll_cq_ir"), 0)))
    return out


def targets23(R):
    """Issue 23's figure: WRITE 1 MiB between DM MRs against memcpy."""
    dm = (R["softverbs"].get("write_bw_dm") or {}).get("results")
    sv = at(dm, 1 << 20, "bw_MBps")
    mc = at(lim_rows(R, "memcpy"), 1 << 20, "bw_MBps")
    return [target_ge("WRITE 1 MiB between DM MRs / memcpy of 1 MiB",
                      ratio(sv, mc), T23_DM,
                      "softverbs %s MB/s, memcpy %s MB/s"
                      % (num(sv, 0), num(mc, 0)))]


CAP_CONFIGS = ("off", "nodirect", "on")


def capture_cost(raw):
    """bench/capture.sh: the medians of its rounds, per configuration:
    WRITE latency p50 at 8 B and 4 KiB, bandwidth at 64 KiB; and what the
    capture wrote and lost."""
    out = {"rounds": 0}
    for c in CAP_CONFIGS:
        lat8, lat4k, bw = [], [], []
        for f in sorted(os.listdir(raw)):
            if not f.endswith(".json"):
                continue
            if f.startswith("cap_lat.%s.r" % c):
                rows = (read_json(os.path.join(raw, f)) or {}).get("results")
                v8, v4 = at(rows, 8, "lat_p50_us"), at(rows, 4096, "lat_p50_us")
                if v8 is not None:
                    lat8.append(v8)
                if v4 is not None:
                    lat4k.append(v4)
            elif f.startswith("cap_bw.%s.r" % c):
                rows = (read_json(os.path.join(raw, f)) or {}).get("results")
                v = at(rows, 65536, "bw_MBps")
                if v is not None:
                    bw.append(v)
        out[c] = {"lat8_us": median(lat8), "lat4k_us": median(lat4k),
                  "bw64k_MBps": median(bw)}
        out["rounds"] = max(out["rounds"], len(bw))
    written = lost = 0
    for f in os.listdir(raw):
        if f.startswith("cap_on.r") and f.endswith(".err"):
            m = re.search(r"(\d+) packets written.*lost (\d+)",
                          read(os.path.join(raw, f)) or "")
            if m:
                written += int(m.group(1))
                lost += int(m.group(2))
    out["packets_written"], out["packets_lost"] = written, lost
    return out if out["rounds"] else None


def users(raw):
    """bench/users.sh: one JSON object per line, the reference first."""
    text = read(os.path.join(raw, "users.out"))
    if not text:
        return None
    out = {"ref": None, "cases": []}
    for line in text.splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if "reference" in d:
            out["ref"] = d
        elif "case" in d:
            out["cases"].append(d)
    return out if out["cases"] else None


def table_users(R):
    U = R.get("users")
    L = ["Issue 38: the programs users run, as they run them, two processes"
         " of this host (bench/users.sh); direct = WRs the initiator ran"
         " itself"]
    if not U:
        return L + ["  not measured"]
    ref = U.get("ref") or {}
    pv = {r["size"]: r for r in ref.get("process_vm_writev") or []}
    by = {c["case"]: c for c in U["cases"]}
    L.append("  %-34s %22s %12s %11s  %s" % ("", "figure",
             "/ 1 pv_writev", "direct", "sent to the daemon"))
    for c in U["cases"]:
        if "missing" in c:
            L.append("  %-34s not installed: %s" % (c["case"], c["missing"]))
            continue
        size = c.get("bytes")
        figs, r = [], None
        if "lat_typical_us" in c:
            figs.append("%.2f us" % c["lat_typical_us"])
            r = ratio(c["lat_typical_us"], (pv.get(size) or {}).get("op_us"))
        if "bw_MBps" in c:
            figs.append("%.0f MB/s" % c["bw_MBps"])
            bsize = c.get("bytes_bw", size)
            r = ratio(c["bw_MBps"], (pv.get(bsize) or {}).get("bw_MBps"))
        if c.get("rc"):
            figs.append("(rc %s)" % c["rc"])
        if c["case"].startswith("mpi_"):
            r = None    # against vader below
        wrs, d = c.get("wrs"), c.get("direct")
        share = ("%d/%d" % (d, wrs)) if wrs else "-"
        ref_ = [k + " " + str(v) for k, v in
                sorted((c.get("refused") or {}).items()) if v]
        cmd = c.get("command", c["case"])
        if len(cmd) > 34:
            cmd = c["case"]
        L.append("  %-34s %22s %12s %11s  %s"
                 % (cmd, ", ".join(figs) or "failed",
                    times(r).strip() if r else "", share,
                    ", ".join(ref_) or "-"))
    L.append("  (/ 1 pv_writev: bandwidth against one process_vm_writev of"
             " the size, higher is better; latency against one call, lower"
             " is better; measured in this run)")

    def get(case, key):
        return (by.get(case) or {}).get(key)

    def pct(case):
        c = by.get(case) or {}
        return (100.0 * c["direct"] / c["wrs"]) if c.get("wrs") else None

    pv1m = (pv.get(1 << 20) or {}).get("bw_MBps")
    pv8 = (pv.get(8) or {}).get("op_us")
    targets = [
        ("ib_write_bw -s 1M: 100% direct, >= 0.9x pv_writev",
         pct("write_bw_1m"), ratio(get("write_bw_1m", "bw_MBps"), pv1m),
         lambda p, x: p == 100 and x >= 0.9),
        ("-s 64K -q 2 >= 99% direct", pct("write_bw_64k_q2"), None,
         lambda p, x: p >= 99),
        ("-s 64K -D 3 >= 99% direct", pct("write_bw_64k_D3"), None,
         lambda p, x: p >= 99),
        ("ib_read_bw -s 1M >= 99% direct", pct("read_bw_1m"), None,
         lambda p, x: p >= 99),
        ("ib_send_bw -s 1M >= 0.8x pv_writev", None,
         ratio(get("send_bw_1m", "bw_MBps"), pv1m), lambda p, x: x >= 0.8),
        ("ib_send_lat -s 8 <= 2x one 8 B pv_writev", None,
         ratio(get("send_lat_8", "lat_typical_us"), pv8),
         lambda p, x: x <= 2),
        ("UCX ucp_put_bw 1M >= 0.8x pv_writev", None,
         ratio(get("ucx_put_bw_1m", "bw_MBps"), pv1m), lambda p, x: x >= 0.8),
        ("UCX tag_bw 64K >= 0.5x ib_write_bw -s 64K", None,
         ratio(get("ucx_tag_bw_64k", "bw_MBps"),
               get("write_bw_64k_q2", "bw_MBps")), lambda p, x: x >= 0.5),
        ("Open MPI 1M bw >= 0.5x vader", None,
         ratio(get("mpi_ucx_sv0", "bw_MBps"), get("mpi_vader", "bw_MBps")),
         lambda p, x: x >= 0.5),
        ("Open MPI 8 B lat <= 5x vader", None,
         ratio(get("mpi_ucx_sv0", "lat_typical_us"),
               get("mpi_vader", "lat_typical_us")), lambda p, x: x <= 5),
        ("fi_pingpong msg 1M >= 0.5x ib_write_bw -s 1M", None,
         ratio(get("fi_msg_1m", "bw_MBps"), get("write_bw_1m", "bw_MBps")),
         lambda p, x: x >= 0.5),
    ]
    L.append("  Targets of issue 38 (this run):")
    for name, p, x, ok in targets:
        try:
            mark = "met" if ok(p, x) else "MISSED"
        except TypeError:       # a figure this run lacks
            mark = "n/a"
        what = []
        if p is not None:
            what.append("%.1f%% direct" % p)
        if x is not None:
            what.append(times(x).strip())
        L.append("    [%-6s] %s: %s" % (mark, name, ", ".join(what) or "-"))
    return L


def table_capture(R):
    C = R.get("capture")
    L = ["Issue 24: the cost of softverbs capture (WRITE between two QPs"
         " of this host; medians of interleaved rounds)"]
    if not C:
        return L + ["  not measured"]
    L.append("  %-38s %11s %11s %13s" % ("", "lat 8 B", "lat 4 KiB",
                                         "bw 64 KiB"))
    names = {"off": "as usual (direct path on)",
             "nodirect": "direct path off (what capture does)",
             "on": "capture on, 64 B of each packet"}
    for c in CAP_CONFIGS:
        v = C.get(c) or {}
        L.append("  %-38s %8s us %8s us %8s MB/s"
                 % (names[c], num(v.get("lat8_us"), 0).strip(),
                    num(v.get("lat4k_us"), 0).strip(),
                    num(v.get("bw64k_MBps"), 0).strip()))
    on, off, nd = C.get("on") or {}, C.get("off") or {}, C.get("nodirect") or {}
    L.append("  capture on / off: lat 8 B %s, bw 64 KiB %s; on / direct path"
             " off: lat 8 B %s, bw 64 KiB %s"
             % (times(ratio(on.get("lat8_us"), off.get("lat8_us"))).strip(),
                times(ratio(on.get("bw64k_MBps"), off.get("bw64k_MBps"))).strip(),
                times(ratio(on.get("lat8_us"), nd.get("lat8_us"))).strip(),
                times(ratio(on.get("bw64k_MBps"), nd.get("bw64k_MBps"))).strip()))
    L.append("  %d rounds; the capture wrote %d packets and lost %d to a full"
             " socket" % (C["rounds"], C["packets_written"],
                          C["packets_lost"]))
    return L


def table23(R):
    L = ["Issue 23: device memory (ratio of this run)"]
    for t in R.get("targets_issue23") or []:
        mark = {True: "met", False: "MISSED", None: "-"}[t["met"]]
        L.append("  [%-6s] %s (goal %s): %s" % (mark, t["target"],
                                                t["goal"], t["by"]))
        L.extend(wrap("           " + t["detail"]))
    return L


def table22(R):
    L = ["Issue 22: the direct path, domains and the wire (ratios of this run)"]
    for t in R.get("targets_issue22") or []:
        mark = {True: "met", False: "MISSED", None: "-"}[t["met"]]
        L.append("  [%-6s] %s (goal %s): %s" % (mark, t["target"],
                                                t["goal"], t["by"]))
        L.extend(wrap("           " + t["detail"]))
        if t.get("context"):
            L.extend(wrap("           " + t["context"]))
    return L


# ---- comparisons (every softverbs figure with its limit and peers) ----

def comparisons(R):
    out = []

    def add(figure, unit, value, refs):
        c = {"figure": figure, "unit": unit, "softverbs": value, "vs": {}}
        for name, v in refs.items():
            if v is not None:
                c["vs"][name] = {"value": v, "ratio": ratio(value, v)}
        out.append(c)

    for t in ("write", "read", "send"):
        for r in sv_rows(R, t, "bw") or []:
            s = r["size"]
            add("%s bw %s" % (t, size_str(s)), "MB/s", r.get("bw_MBps"), {
                "process_vm_writev": at(lim_rows(R, "process_vm_writev"), s,
                                        "bw_MBps"),
                "readv_writev_bounce": at(lim_rows(R, "readv_writev_bounce"),
                                          s, "bw_MBps"),
                "memcpy": at(lim_rows(R, "memcpy"), s, "bw_MBps"),
                "perftest ib_%s_bw" % t: at(pt_rows(R, "ib_%s_bw" % t), s,
                                            "bw_MBps"),
                "ucx put bw": at(ucx_rows(R, "put_bw"), s, "bw_MBps")
                if t == "write" else None})
        for r in sv_rows(R, t, "lat") or []:
            s = r["size"]
            add("%s lat %s" % (t, size_str(s)), "us p50", r.get("lat_p50_us"), {
                "perftest ib_%s_lat" % t: at(pt_rows(R, "ib_%s_lat" % t), s,
                                             "lat_p50_us"),
                "ucx put lat": at(ucx_rows(R, "put_lat"), s, "lat_p50_us")
                if t == "write" else None,
                "process_vm_writev call": at(lim_rows(R, "process_vm_writev"),
                                             s, "op_us")})
    for r in sv_rows(R, "atomic", "lat") or []:
        add("atomic lat 8 B", "us p50", r.get("lat_p50_us"), {})
    w8 = at(sv_rows(R, "write", "bw"), 8, "msg_rate_Mpps")
    add("write msg rate 8 B", "Mpps", w8, {
        "ucx am rate 8 B": at(ucx_rows(R, "am_bw"), 8, "msg_rate_Mpps"),
        "ucx put rate 8 B": at(ucx_rows(R, "put_bw"), 8, "msg_rate_Mpps"),
        "perftest ib_write_bw 8 B": at(pt_rows(R, "ib_write_bw"), 8,
                                       "msg_rate_Mpps")})
    return [c for c in out if c["softverbs"] is not None]


# ---- the table ----

def wrap(line, width=100):
    """Split a long line at spaces, continuing with its indentation."""
    ind = " " * (len(line) - len(line.lstrip()))
    out, cur = [], ""
    for w in line.split():
        if cur and len(cur) + 1 + len(w) > width:
            out.append(cur)
            cur = ind + "  " + w
        else:
            cur = (cur + " " + w) if cur else ind + w
    return out + [cur] if cur else out


def table(R):
    L = []
    m, b = R["machine"], R["build"]
    L.append("softverbs: make bench%s, %s, %.0f s"
             % (" --short" if R["short"] else "", R["date"], R["seconds"]))
    L.append("machine: %d CPUs (%s), Linux %s, %s GiB; build %s%s, git %s"
             % (m["nproc"], m.get("cpu_model") or "?", m["kernel"],
                m.get("mem_gib", "?"), b.get("type") or "?",
                " +ASan" if b.get("sanitized") else "", b.get("git") or "?"))
    la = R.get("load_avg_at_start")
    L.append("load average %s at the start, %.2f at the end (other work on"
             " this machine moves every figure)"
             % ("%.2f" % la[0] if la else "?", m["load_avg_at_end"][0]))
    L.append("peers: perftest %s, UCX %s (UCX_TLS=%s)"
             % (b.get("perftest") or "-", b.get("ucx") or "-",
                R["ucx_tls"]))
    L.append("units: MB/s = 1e6 B/s; latency p50 in us, one-way for write,"
             " send and put, a round trip for read and atomic")
    L.append("")

    sizes = [8, 4096, 65536, 1 << 20, 8 << 20]

    def present(rows_list, s, key):
        return any(at(rows, s, key) is not None for rows in rows_list)

    # bandwidth
    L.append("%-18s %9s %9s %9s %9s %9s %9s %7s %7s"
             % ("Bandwidth (MB/s)", "softverbs", "perftest", "pv_writev",
                "2 copies", "memcpy", "ucx put", "sv/pvw", "sv/ucx"))
    for t in ("write", "read", "send"):
        svr = sv_rows(R, t, "bw")
        ptr = pt_rows(R, "ib_%s_bw" % t)
        for s in sizes:
            if not present([svr, ptr], s, "bw_MBps"):
                continue
            sv = at(svr, s, "bw_MBps")
            pvw = at(lim_rows(R, "process_vm_writev"), s, "bw_MBps")
            ux = at(ucx_rows(R, "put_bw"), s, "bw_MBps") \
                if t == "write" else None
            L.append("  %-6s %9s %s %s %s %s %s %s %s %s"
                     % (t, size_str(s), num(sv, 9),
                        num(at(ptr, s, "bw_MBps"), 9), num(pvw, 9),
                        num(at(lim_rows(R, "readv_writev_bounce"), s,
                               "bw_MBps"), 9),
                        num(at(lim_rows(R, "memcpy"), s, "bw_MBps"), 9),
                        num(ux, 9), times(ratio(sv, pvw), 7),
                        times(ratio(sv, ux), 7)))
    a8 = at(sv_rows(R, "atomic", "bw"), 8, "msg_rate_Mpps")
    L.append("")

    # latency
    L.append("%-18s %10s %10s %10s %10s %8s"
             % ("Latency (us p50)", "softverbs", "perftest", "ucx put",
                "pvw call", "sv/ucx"))
    for t in ("write", "read", "send", "atomic"):
        svr = sv_rows(R, t, "lat")
        ptr = pt_rows(R, "ib_%s_lat" % t)
        for s in sizes[:4]:
            if not present([svr, ptr], s, "lat_p50_us"):
                continue
            sv = at(svr, s, "lat_p50_us")
            ux = at(ucx_rows(R, "put_lat"), s, "lat_p50_us") \
                if t == "write" else None
            L.append("  %-6s %9s %s %s %s %s %s"
                     % (t, size_str(s), num(sv),
                        num(at(ptr, s, "lat_p50_us")), num(ux),
                        num(at(lim_rows(R, "process_vm_writev"), s, "op_us")),
                        times(ratio(sv, ux))))
    for r in sv_rows(R, "write", "lat", events=True) or []:
        L.append("  %-6s %9s %s %s   (completion events, -e)"
                 % ("write", size_str(r["size"]), num(r.get("lat_p50_us")),
                    "-".rjust(10)))
    pp = (R["limits"] or {}).get("pingpong") or {}
    L.append("  floors between two processes, one-way p50: spinning on a"
             " shared cache line %s us, a pipe (sleep + wake-up) %s us"
             % (num((pp.get("shm_spin") or {}).get("lat_p50_us"), 0),
                num((pp.get("pipe") or {}).get("lat_p50_us"), 0)))
    L.append("")

    # message rate
    w8 = at(sv_rows(R, "write", "bw"), 8, "msg_rate_Mpps")
    L.append("Message rate (Mpps): write 8 B %s, atomic 8 B %s;"
             " perftest ib_write_bw 8 B %s; ucx am 8 B %s, ucx put 8 B %s"
             % (num(w8, 0), num(a8, 0),
                num(at(pt_rows(R, "ib_write_bw"), 8, "msg_rate_Mpps"), 0),
                num(at(ucx_rows(R, "am_bw"), 8, "msg_rate_Mpps"), 0),
                num(at(ucx_rows(R, "put_bw"), 8, "msg_rate_Mpps"), 0)))

    # registration
    rc = R["regcost"]
    if rc:
        L.append("Registration (median us): ibv_reg_mr 4 KiB %s, 1 MiB %s,"
                 " 1 GiB %s: 1 GiB / 4 KiB = %s (dereg %s)"
                 % (num(rc.get("reg_4k_us"), 0), num(rc.get("reg_1m_us"), 0),
                    num(rc.get("reg_1g_us"), 0),
                    times(rc.get("ratio_reg_1g_4k"), 0),
                    times(rc.get("ratio_dereg_1g_4k"), 0)))
    else:
        L.append("Registration: not measured")
    rm = R.get("regcost_maps") or {}
    if rm.get("query_us") is not None and rm.get("text_us") is not None:
        L.append("Registration in a process of %d more mappings (median us"
                 " of ibv_reg_mr 4 KiB, best of %d rounds): the daemon's"
                 " check by the maps query %s, by the maps text %s: text /"
                 " query = %s (kernel %s%s)"
                 % (rm["mappings"], rm["rounds"], num(rm["query_us"], 0),
                    num(rm["text_us"], 0), times(rm["ratio"], 1),
                    rm["kernel"], "" if rm["kernel_has_query"] else
                    ": no maps query before 6.11, both read the text"))
    else:
        L.append("Registration in a process of many mappings: not measured")
    qs = (R.get("qpscale") or {}).get("points") or []
    if qs:
        L.append("QP creation, one process, the last %d of each count"
                 " (QPs/s, median us each, daemon bytes per QP): %s"
                 % (R["qpscale"].get("window", 0),
                    "; ".join("%d live: %s/s, %s us, %s B"
                              % (p["qps"], num(p.get("per_s"), 0),
                                 num(p.get("median_us"), 1),
                                 num(p.get("daemon_bytes_per_qp"), 0))
                              for p in qs)))
    else:
        L.append("QP creation at scale: not measured")

    # instructions
    bu = R["budgets"]
    if bu:
        L.append("Instructions (callgrind, per call): ibv_post_send %s,"
                 " ibv_poll_cq %s (empty %s), engine per WQE %s"
                 % (num(bu.get("post_send_ir"), 0),
                    num(bu.get("poll_cq_ir"), 0),
                    num(bu.get("poll_cq_empty_ir"), 0),
                    num(bu.get("engine_wqe_ir"), 0)))
    else:
        st = [s for s in R["steps"] if s["step"] == "budgets"]
        L.append("Instructions (callgrind): not measured (%s)"
                 % (st[0]["note"] if st else "no budgets step"))
    L.append("")

    # targets
    L.append("Targets of issue 4")
    for t in R["targets"]:
        mark = {True: "met", False: "MISSED", None: "n/a"}[t["met"]]
        L.append("  [%-6s] %s: %s" % (mark, t["target"], t["by"]))
        if t["met"] is not None and t["detail"] != "callgrind":
            L.append("           %s" % t["detail"])
        if t.get("context"):
            L.extend(wrap("           " + t["context"]))
    L.append("")
    L.extend(table_res_domains(R))
    L.append("")
    L.append("Targets of issue 5")
    for t in R.get("targets_issue5") or []:
        mark = {True: "met", False: "MISSED", None: "n/a"}[t["met"]]
        L.append("  [%-6s] %s: %s" % (mark, t["target"], t["by"]))
    L.append("")
    L.extend(table22(R))
    L.append("")
    L.extend(table23(R))
    L.append("")
    L.extend(table_capture(R))
    L.append("")
    L.extend(table_users(R))
    L.append("")
    L.extend(table_mm(R))
    L.append("")
    L.extend(table_netns(R))
    L.append("")
    L.extend(table_flood(R))
    L.append("")
    L.extend(table_cmtime(R))
    L.append("")
    L.extend(report_mw.table_mw(R.get("middleware"), wrap))
    L.append("")
    bad = [s for s in R["steps"] if s["status"] not in ("ok",)]
    L.append("Steps: %d ok%s" % (
        sum(1 for s in R["steps"] if s["status"] == "ok"),
        "".join("; %s %s (%s)" % (s["step"], s["status"], s["note"])
                for s in bad)))
    return "\n".join(w for line in L
                     for w in (wrap(line) if len(line) > 100 else [line])) + "\n"


# ---- plots ----

def plots(R, out):
    raw = os.path.join(out, "raw")
    bw, lat = [], []

    def series(store, title, rows, key, scale=1.0):
        pts = [(r["size"], r[key] * scale) for r in rows or []
               if r.get(key) is not None and r[key] > 0]
        if not pts:
            return
        name = "plot_%s_%d.dat" % ("bw" if store is bw else "lat", len(store))
        with open(os.path.join(raw, name), "w") as f:
            for s, v in sorted(pts):
                f.write("%d %.6g\n" % (s, v))
        store.append((title, os.path.join(raw, name)))

    for t in ("write", "read", "send"):
        series(bw, "softverbs %s" % t, sv_rows(R, t, "bw"), "bw_MBps")
    series(bw, "perftest ib_write_bw", pt_rows(R, "ib_write_bw"), "bw_MBps")
    series(bw, "ucx put (shm)", ucx_rows(R, "put_bw"), "bw_MBps")
    series(bw, "process_vm_writev", lim_rows(R, "process_vm_writev"),
           "bw_MBps")
    series(bw, "readv+writev (2 copies)", lim_rows(R, "readv_writev_bounce"),
           "bw_MBps")
    series(bw, "memcpy", lim_rows(R, "memcpy"), "bw_MBps")
    for t in ("write", "read", "send"):
        series(lat, "softverbs %s" % t, sv_rows(R, t, "lat"), "lat_p50_us")
    for p in ("ib_write_lat", "ib_read_lat", "ib_send_lat"):
        series(lat, "perftest %s" % p, pt_rows(R, p), "lat_p50_us")
    series(lat, "ucx put (shm)", ucx_rows(R, "put_lat"), "lat_p50_us")
    series(lat, "one process_vm_writev", lim_rows(R, "process_vm_writev"),
           "op_us")

    gp = shutil.which("gnuplot")
    if not gp:
        return "gnuplot is not installed"
    term = "pngcairo noenhanced size 1000,650 font ',10'"
    if subprocess.run([gp, "-e", "set terminal pngcairo"],
                      capture_output=True).returncode != 0:
        term = "png noenhanced size 1000,650"
    sub = "%s, %d CPUs, %s" % (R["date"], R["machine"]["nproc"],
                               "short run" if R["short"] else "full run")
    tics = ", ".join('"%s" %d' % (size_str(1 << k).replace(" ", "")
                                  .replace("iB", "").replace("B", ""),
                                  1 << k) for k in range(1, 24, 2))
    script = ["set terminal %s" % term,
              "set logscale x 2", "set logscale y 10", "set grid",
              "set key outside right top", "set xtics (%s)" % tics,
              "set xlabel 'message size (bytes)'"]

    def one(png, title, ylabel, store):
        script.append("set output '%s'" % os.path.join(out, png))
        script.append("set title \"%s\\n%s\"" % (title, sub))
        script.append("set ylabel '%s'" % ylabel)
        if not store:
            script.append("set label 1 'no data' at graph 0.45, graph 0.5")
            script.append("plot [1:16777216] [1:10] 1/0 notitle")
            script.append("unset label 1")
            return
        script.append("plot " + ", ".join(
            "'%s' using 1:2 with linespoints title '%s'" % (f, t)
            for t, f in store))

    one("bw_vs_size.png", "Bandwidth vs message size", "MB/s (1 MB = 1e6 B)",
        bw)
    one("lat_vs_size.png", "Latency vs message size (p50)",
        "us (one-way; read: round trip)", lat)
    script.append("unset output")
    gpfile = os.path.join(raw, "plots.gp")
    with open(gpfile, "w") as f:
        f.write("\n".join(script) + "\n")
    p = subprocess.run([gp, gpfile], capture_output=True, text=True)
    if p.returncode != 0:
        return "gnuplot failed: " + p.stderr.strip()[-500:]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument("--short", action="store_true")
    ap.add_argument("--load-start", default="")
    a = ap.parse_args()
    raw = os.path.join(a.out, "raw")

    R = {"schema": 1, "tool": "make bench",
         "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S"),
         "short": a.short, "seconds": a.seconds,
         "machine": machine(), "build": build_info(a.build, a.repo),
         "load_avg_at_start": [float(x) for x in a.load_start.split()]
         if a.load_start else None,
         "steps": steps(raw),
         "units": {"bw": "MB/s, 1 MB = 1e6 bytes",
                   "lat": "us; one-way for write/send/put ping-pongs,"
                          " a full round trip for read and atomic"},
         "ucx_tls": os.environ.get("SV_BENCH_UCX_TLS", "shm,self")}
    R["limits"] = read_json(os.path.join(raw, "limits.out"))
    R["softverbs"] = {}
    for name in ("write_bw", "write_lat", "read_bw", "read_lat", "send_bw",
                 "send_lat", "atomic_bw", "atomic_lat", "write_lat_events",
                 "write_bw_memfd", "write_bw_dm"):
        j = softverbs(raw, name)
        if j:
            R["softverbs"][name] = j
    R["perftest"] = {}
    for p in ("ib_write_bw", "ib_write_lat", "ib_read_lat", "ib_send_lat"):
        j = perftest(os.path.join(raw, "pt_%s.out" % p), p.endswith("_bw"))
        if j:
            R["perftest"][p] = j
    R["ucx"] = ucx(os.path.join(raw, "ucx.out"))
    R["regcost"] = read_json(os.path.join(raw, "regcost.out"))
    R["regcost_maps"] = regcost_maps(raw)
    R["qpscale"] = read_json(os.path.join(raw, "qpscale.out"))
    R["budgets"] = read_json(os.path.join(raw, "budgets.out"))
    R["mm_cycle"] = mm_cycle(raw)
    R["netns"] = read_json(os.path.join(raw, "netns.out"))
    R["flood"] = flood(os.path.join(raw, "flood.out"))
    R["cmtime"] = read_json(os.path.join(raw, "cmtime.out"))
    R["middleware"] = report_mw.merge(
        read_json(os.path.join(raw, "mw_%s.out" % s))
        for s in report_mw.SECTIONS)
    hollow = check_outputs(R, raw)
    R["comparisons"] = comparisons(R)
    R["targets"] = targets(R)
    R["res_domains"] = res_domains(R, raw)
    R["targets_issue5"] = targets5(R)
    R["targets_issue22"] = targets22(R)
    R["targets_issue23"] = targets23(R)
    R["capture"] = capture_cost(raw)
    R["users"] = users(raw)
    R["plots_error"] = plots(R, a.out)

    text = table(R)
    if R["plots_error"]:
        text += "Plots: %s\n" % R["plots_error"]
    with open(os.path.join(a.out, "table.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(R, f, indent=1)
        f.write("\n")
    if R["plots_error"]:
        return 1
    return 3 if hollow else 0


if __name__ == "__main__":
    sys.exit(main())
