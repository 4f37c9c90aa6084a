#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The middleware sections of make bench (issue 20, bench/middleware.sh):
ucx_perftest, an MPI ping-pong and allreduce, and libfabric's fi_pingpong,
each on sv0 across two network namespaces beside the TCP path on the same
veth.

  report_mw.py --collect RAW --short 0|1 --sections "ucx mpi fi"
      the JSON of bench/middleware.sh's raw folder (one subfolder per
      section: the programs' outputs, "errors", "skipped") on stdout;
  report_mw.py --table RAW ...
      its table.
bench/report.py imports table_mw() for make bench's table and merges the
sections of its three runs with merge().

Units: MB/s = 1e6 bytes/s (ucx_perftest prints MiB/s: converted);
latency in us, one-way (half a round trip) for every ping-pong here;
allreduce: us per call (the slowest rank's average); am rate: messages/s.
Ratios are sv0 / TCP: above 1 is more (bandwidth, rate) or longer (time).
"""
import argparse
import json
import os
import re
import sys

MIB = 1048576 / 1e6
SECTIONS = ("ucx", "mpi", "fi")
LINK = "veth between two network namespaces, MTU 1500"


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def lines_of(path):
    return [x.strip() for x in (read(path) or "").splitlines() if x.strip()]


def num_or_none(s):
    try:
        return float(s)
    except ValueError:
        return None


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 3)


def figure(name, unit, better, sv0, tcp):
    """One row: better is "higher" (bandwidth, rate) or "lower" (time)."""
    r = {"name": name, "unit": unit, "better": better, "sv0": sv0,
         "tcp": tcp, "ratio_sv0_tcp": ratio(sv0, tcp), "sv0_faster": None}
    if sv0 is not None and tcp is not None:
        r["sv0_faster"] = sv0 > tcp if better == "higher" else sv0 < tcp
    return r


# An endpoint configuration UCX printed (UCX_LOG_LEVEL=info): 1.13's
# "ep_cfg[N]: LANES", 1.18's "intra-node cfg#N LANES" or "inter-node ..."
EP_CFG = r"(?:ep_cfg\[\d+\]:|(?:intra|inter)-node cfg#\d+) (.*)"


def lanes(text):
    """The distinct lanes UCX printed in its endpoint configurations
    (EP_CFG), e.g. rc_verbs/sv0:1, tcp/veth0, sysv/memory."""
    out = set()
    for m in re.finditer(EP_CFG, text or ""):
        out.update(x.strip() for lane in re.findall(r"\(([^)]*)\)", m.group(1))
                   for x in lane.split())
    return sorted(out)


# ---- ucx_perftest ----

def ucx_batch(path):
    """ucx_perftest -b BATCH -f -v: a CSV line per test, named by its label
    (iterations, p50 lat, avg lat, overall lat, avg bw, overall bw, avg
    rate, overall rate), each after the ep_cfg lines of its endpoint."""
    res, seen = {}, []
    for line in (read(path) or "").splitlines():
        if re.search(EP_CFG, line):
            seen.append(line)
            continue
        f = [x.strip() for x in line.split(",")]
        if len(f) < 9 or not re.match(r"^[a-z_]+_\d+$", f[0]):
            continue
        try:
            v = [float(x) for x in f[1:9]]
        except ValueError:
            continue
        res[f[0]] = {"iters": int(v[0]), "lat_p50_us": v[1],
                     "lat_avg_us": v[2], "bw_MBps": round(v[5] * MIB, 2),
                     "msg_rate_ps": v[7], "lanes": lanes("\n".join(seen))}
        seen = []
    return res


def sec_ucx(d):
    T = {t: ucx_batch(os.path.join(d, t + ".out")) for t in ("sv0", "tcp")}

    def get(test, key):
        return [(T[t].get(test) or {}).get(key) for t in ("sv0", "tcp")]

    F = [figure("put bandwidth 64 KiB", "MB/s", "higher",
                *get("put_bw_65536", "bw_MBps")),
         figure("put bandwidth 1 MiB", "MB/s", "higher",
                *get("put_bw_1048576", "bw_MBps")),
         figure("put latency 8 B, p50", "us", "lower",
                *get("put_lat_8", "lat_p50_us")),
         figure("put latency 8 B, average", "us", "lower",
                *get("put_lat_8", "lat_avg_us")),
         figure("tag bandwidth 64 KiB", "MB/s", "higher",
                *get("tag_bw_65536", "bw_MBps")),
         figure("tag bandwidth 1 MiB", "MB/s", "higher",
                *get("tag_bw_1048576", "bw_MBps")),
         figure("tag latency 8 B, p50", "us", "lower",
                *get("tag_lat_8", "lat_p50_us")),
         figure("tag latency 8 B, average", "us", "lower",
                *get("tag_lat_8", "lat_avg_us")),
         figure("am rate 8 B", "msg/s", "higher",
                *get("am_bw_8", "msg_rate_ps"))]
    return {"program": "ucx_perftest (UCX 1.13), server in a, client in b",
            "sv0": {"UCX_TLS": "rc_verbs,ud_verbs:aux",
                    "UCX_NET_DEVICES": "sv0:1", "tests": T["sv0"]},
            "tcp": {"UCX_TLS": "tcp", "UCX_NET_DEVICES": "veth0",
                    "tests": T["tcp"]},
            "figures": F}


# ---- MPI ----

def mpi_job(d, t, what):
    text = read(os.path.join(d, "%s.%s.out" % (t, what))) or ""
    rows = {}
    for m in re.finditer(r"mpi_bench: (pingpong|allreduce) ([^\n]*)", text):
        kv = dict(x.split("=", 1) for x in m.group(2).split() if "=" in x)
        try:
            rows[int(kv["size"])] = {k: int(v) if k in ("size", "iters", "ranks")
                                     else float(v) for k, v in kv.items()}
        except (KeyError, ValueError):
            continue
    b = {}
    for line in lines_of(os.path.join(d, "%s.%s.bytes" % (t, what))):
        k, _, v = line.partition(" ")
        try:
            b[k] = float(v)
        except ValueError:
            pass
    return {"results": rows, "lanes": lanes(text),
            "roce_MiB": round(b["roce_bytes"] / 1048576, 1)
            if "roce_bytes" in b else None,
            "tcp_MiB": round(b["tcp_bytes"] / 1048576, 1)
            if "tcp_bytes" in b else None,
            "seconds": b.get("seconds"),
            "launcher": (read(os.path.join(d, "%s.%s.cmd" % (t, what)))
                         or "").strip() or None}


def sec_mpi(d):
    J = {t: {w: mpi_job(d, t, w) for w in ("pingpong", "allreduce")}
         for t in ("sv0", "tcp")}

    def get(what, size, key):
        return [((J[t][what]["results"]).get(size) or {}).get(key)
                for t in ("sv0", "tcp")]

    ranks = (J["sv0"]["allreduce"]["results"].get(8) or
             J["tcp"]["allreduce"]["results"].get(8) or {}).get("ranks")
    F = [figure("ping-pong 8 B latency", "us", "lower",
                *get("pingpong", 8, "lat_us")),
         figure("ping-pong 1 MiB bandwidth", "MB/s", "higher",
                *get("pingpong", 1048576, "bw_MBps")),
         figure("allreduce 8 B, %s ranks" % (int(ranks) if ranks else "8"),
                "us", "lower", *get("allreduce", 8, "us")),
         figure("allreduce 1 MiB, %s ranks" % (int(ranks) if ranks else "8"),
                "us", "lower", *get("allreduce", 1048576, "us"))]
    return {"program": "bench/mpi_bench.c, Open MPI 4.1; ping-pong: 1 rank"
                       " a host, allreduce: 4 ranks a host",
            "sv0": dict(J["sv0"], stack="pml ucx, UCX_TLS=rc_verbs,"
                        "ud_verbs:aux,sm,self, UCX_NET_DEVICES=sv0:1"),
            "tcp": dict(J["tcp"], stack="pml ob1, btl tcp,vader,self,"
                        " btl_tcp_if_include veth0"),
            "figures": F}


# ---- fi_pingpong ----

def fi_run(path):
    """fi_pingpong's result line: bytes #sent #ack total time MB/sec
    usec/xfer Mxfers/sec (MB/sec is bytes per microsecond; usec/xfer is
    one transfer one way)."""
    for line in (read(path) or "").splitlines():
        f = line.split()
        if len(f) == 8 and re.match(r"^\d+[kmg]?$", f[0]) and f[2].startswith("="):
            # counts print as 5k, 20k (powers of 1000)
            k = {"k": 1e3, "m": 1e6, "g": 1e9}.get(f[1][-1:], 1)
            try:
                return {"iters": int(float(f[1].rstrip("kmg")) * k),
                        "bw_MBps": float(f[5]), "lat_us": float(f[6])}
            except ValueError:
                return None
    return None


def sec_fi(d):
    R = {}
    for name in ("sv0_msg", "tcp_msg", "sv0_rdm", "tcp_rdm"):
        for s in (8, 1048576):
            R["%s.%d" % (name, s)] = fi_run(os.path.join(d, "%s.%d.out"
                                                         % (name, s)))

    def get(ep, s, key):
        return [(R.get("%s_%s.%d" % (t, ep, s)) or {}).get(key)
                for t in ("sv0", "tcp")]

    F = [figure("msg 8 B latency", "us", "lower", *get("msg", 8, "lat_us")),
         figure("msg 1 MiB bandwidth", "MB/s", "higher",
                *get("msg", 1048576, "bw_MBps")),
         figure("rdm 8 B latency", "us", "lower", *get("rdm", 8, "lat_us")),
         figure("rdm 1 MiB bandwidth", "MB/s", "higher",
                *get("rdm", 1048576, "bw_MBps"))]
    return {"program": "fi_pingpong (libfabric 1.17; Debian has no fabtests)",
            "sv0": {"msg": "-p verbs -e msg", "rdm": "-p 'verbs;ofi_rxm' -e rdm"},
            "tcp": {"msg": "-p tcp -e msg", "rdm": "-p 'tcp;ofi_rxm' -e rdm"},
            "runs": R, "figures": F}


def collect(raw, short, sections):
    out = {"bench": "middleware", "link": LINK, "short": short,
           "load_avg": [num_or_none((lines_of(os.path.join(raw, "load_start"))
                                     or [""])[0]),
                        num_or_none((read("/proc/loadavg") or "").split(" ")[0])]}
    errs = []
    for e in lines_of(os.path.join(raw, "harness", "errors")):
        errs.append("harness: " + e)
    for s in sections:
        d = os.path.join(raw, s)
        skip = lines_of(os.path.join(d, "skipped"))
        if skip:
            out[s] = {"skipped": "; ".join(skip), "figures": []}
            continue
        S = {"ucx": sec_ucx, "mpi": sec_mpi, "fi": sec_fi}[s](d)
        e = lines_of(os.path.join(d, "errors"))
        missing = [f["name"] for f in S["figures"]
                   if f["sv0"] is None or f["tcp"] is None]
        if missing and not e:
            e = ["no figure for " + ", ".join(missing)]
        S["skipped"] = None
        S["error"] = "; ".join(e) if e else None
        errs.extend("%s: %s" % (s, x) for x in e)
        out[s] = S
    out["error"] = "; ".join(errs) if errs else None
    return out


def merge(parts):
    """bench/run.sh runs each section apart: one object of them all."""
    out, errs = None, []
    for p in parts:
        if not p:
            continue
        if out is None:
            out = {k: p[k] for k in ("bench", "link", "short") if k in p}
            out["load_avg"] = {}
        for s in SECTIONS:
            if s in p:
                out[s] = p[s]
                out["load_avg"][s] = p.get("load_avg")
        if p.get("error"):
            errs.append(p["error"])
    if out is not None:
        out["error"] = "; ".join(errs) if errs else None
    return out


# ---- the table ----

def num(v):
    if v is None:
        return "-"
    if abs(v) >= 100000:
        return "%.0f" % v
    if abs(v) >= 100:
        return "%.1f" % v
    return "%.3g" % v if abs(v) < 1 else "%.2f" % v


def table_mw(M, wrap=None):
    """make bench's lines for the middleware sections (M: collect()'s or
    merge()'s object, None when not measured)."""
    wrap = wrap or (lambda s: [s])
    L = ["Middleware across two network namespaces (issue 20): sv0 beside"
         " TCP on the same veth"]
    if not M:
        L.append("  not measured")
        return L
    titles = {"ucx": "ucx_perftest: rc_verbs,ud_verbs:aux on sv0:1 / UCX's"
                     " tcp on veth0",
              "mpi": "MPI (Open MPI 4.1, mpi_bench): pml ucx on sv0 / pml ob1"
                     " btl tcp,vader",
              "fi": "fi_pingpong: verbs (msg), verbs;ofi_rxm (rdm) on sv0 /"
                    " tcp, tcp;ofi_rxm"}
    for s in SECTIONS:
        S = M.get(s)
        if S is None:
            continue
        L.append("  " + titles[s])
        L.append("    %-46s %10s %10s %8s  %s" % ("", "sv0", "TCP", "sv0/TCP",
                                                "faster"))
        if S.get("skipped"):
            L.append("    skipped: %s" % S["skipped"])
            continue
        for f in S["figures"]:
            fast = {True: "sv0", False: "TCP", None: "-"}[f["sv0_faster"]]
            r = f["ratio_sv0_tcp"]
            L.append("    %-46s %10s %10s %8s  %s" % (
                "%s (%s)" % (f["name"], f["unit"]), num(f["sv0"]),
                num(f["tcp"]), "-" if r is None else "%.3fx" % r, fast))
        if s == "mpi":
            for t in ("sv0", "tcp"):
                J = S.get(t) or {}
                L.append("    %s: across the veth RoCEv2 / TCP MiB:"
                         " ping-pong %s / %s, allreduce %s / %s" % (
                             t, *[num((J.get(w) or {}).get(k))
                                  for w in ("pingpong", "allreduce")
                                  for k in ("roce_MiB", "tcp_MiB")]))
        if S.get("error"):
            L.extend(wrap("    error: %s" % S["error"]))
    L.extend(wrap("  (latencies one-way, half a round trip; allreduce: us"
                  " per call; MB/s = 1e6 B/s. sv0/TCP above 1x is more"
                  " (bandwidth, rate) or longer (time); 'faster' names the"
                  " better of the two)"))
    la = M.get("load_avg")
    if isinstance(la, list) and None not in la:
        L.append("  load average %.2f at the start, %.2f at the end" % tuple(la))
    elif isinstance(la, dict):
        L.extend(wrap("  load average at each section's start and end: " +
                      ", ".join("%s %s" % (s, "-" if not v or None in v else
                                           "%.2f-%.2f" % tuple(v))
                                for s, v in la.items())))
    if M.get("short"):
        L.append("  (short run: few iterations, the figures are rough)")
    return L


def main():
    ap = argparse.ArgumentParser()
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--collect")
    g.add_argument("--table")
    ap.add_argument("--short", default="0")
    ap.add_argument("--sections", default=" ".join(SECTIONS))
    a = ap.parse_args()
    secs = [s for s in a.sections.split() if s in SECTIONS]
    M = collect(a.collect or a.table, a.short == "1", secs)
    if a.collect:
        print(json.dumps(M, indent=1))
    else:
        print("\n".join(table_mw(M)))
        if M.get("error"):
            print("error: %s" % M["error"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
