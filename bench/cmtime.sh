#!/usr/bin/env bash
# rdma_cm connection setup on sv0 against TCP's connect/accept over the same
# path, in one run (issue 19): Debian's unmodified cmtime (rdmacm-utils), a
# server and a client process through 'softverbs run', and
# build/bin/sv_tcp_connect (bench/tcp_connect.c: cmtime's steps over TCP, a
# server and a client process, cmtime's table), each over 127.0.0.1 and over
# the host's own IPv4 address (if it has one):
#   - CONNS connections at a time, ROUNDS times, the two interleaved: the
#     time of each step for all of them (cmtime's "total ms"), so
#     connections per second and microseconds per connection; the
#     median over the rounds;
#   - one connection at a time (-c 1), SERIAL times each, interleaved: how
#     long one connection takes alone, step by step; the median.
# cmtime's steps: create id, resolve addr, resolve route, create qp, connect
# (rdma_connect until ESTABLISHED: REQ, the server's QP and rdma_accept,
# REP, RTR/RTS, RTU), disconnect (DREQ until DISCONNECTED: the server's
# DREP), destroy. rdma-core 56's cmtime (Debian 13) prints more steps, in
# microseconds: its "init qp attr" and "init qp" (the client's QP to INIT,
# which 44's create qp did) count in the setup, its "cm connect" is the
# connect, its "destroy qp" and "destroy id" make the destroy (their max
# and min are left out); its server serves one client run with as many
# connections and leaves, so each run has a server of its own. TCP's:
# create id (socket), connect (the kernel's handshake), accept (the server
# process accept()ed it: established at both ends, the figure to hold
# against cmtime's connect), disconnect (FIN until the server's FIN),
# destroy (close).
# One JSON object on stdout: per path, each step's figures (median and every
# round) for sv0 and TCP, the rates of setup (every step up to established
# at both ends), connect and teardown (disconnect + destroy), and the ratios
# sv0 / TCP (a rate ratio below 1: sv0 sets up fewer connections per
# second; a time ratio above 1: sv0 takes longer); "error": null or what
# failed (a failed run leaves its figures out, the rest still runs). A short
# table on stderr. Exit 0 when every run succeeded, 1 otherwise, 2 on bad
# arguments.
#   bench/cmtime.sh BUILD_DIR [--short] [--keep DIR] [-c CONNS]
#                   [--rounds ROUNDS] [--serial SERIAL]
# Defaults: 1000 connections, 3 rounds, 20 single connections; --short: 200,
# 1, 3; CONNS at most 2000 (sv0 holds 4096 ids, and each connection is two).
# --keep DIR: every program's output stays in DIR. The device is a
# private one (its own socket, idle exit after 1 s, gone when this ends)
# unless SOFTVERBS_SOCKET is set. Timings are reported, never asserted:
# other work on the machine moves every figure.
set -u
exec 3>&1 1>&2   # stdout: the JSON only

usage() {
	echo "usage: bench/cmtime.sh BUILD_DIR [--short] [--keep DIR] [-c CONNS] [--rounds ROUNDS] [--serial SERIAL]" >&2
	exit 2
}
[ $# -ge 1 ] || usage
case "$1" in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
build=$(cd "$1" 2>/dev/null && pwd) || { echo "bench/cmtime.sh: no build folder $1" >&2; exit 2; }
shift
conns='' rounds='' serial='' keep=''
short=0
while [ $# -gt 0 ]; do
	case "$1" in
	--short) short=1; shift ;;
	--keep) [ $# -ge 2 ] || usage; keep=$2; shift 2 ;;
	-c) [ $# -ge 2 ] || usage; conns=$2; shift 2 ;;
	--rounds) [ $# -ge 2 ] || usage; rounds=$2; shift 2 ;;
	--serial) [ $# -ge 2 ] || usage; serial=$2; shift 2 ;;
	*) usage ;;
	esac
done
if [ $short = 1 ]; then
	conns=${conns:-200} rounds=${rounds:-1} serial=${serial:-3}
else
	conns=${conns:-1000} rounds=${rounds:-3} serial=${serial:-20}
fi
for v in "$conns" "$rounds" "$serial"; do
	case "$v" in ''|*[!0-9]*) usage ;; esac
done
[ "$conns" -ge 1 ] && [ "$conns" -le 2000 ] && [ "$rounds" -ge 1 ] || usage
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
SV=$build/bin/softverbs
TCP=$build/bin/sv_tcp_connect
# a run's limit: generous, a hung run must still end
limit=$(( 60 + conns / 10 ))

errors=()
if [ -n "$keep" ]; then
	mkdir -p "$keep" || exit 1
	logs=$(cd "$keep" && pwd)
	rm -f "$logs"/*.txt
else
	logs=$(mktemp -d /tmp/softverbs-cmtime.XXXXXX)
fi

# ---- a device of our own unless one is given, and nothing left behind
own_dev=0
if [ -z "${SOFTVERBS_SOCKET:-}" ]; then
	devdir=$(mktemp -d /tmp/softverbs-cmtime-dev.XXXXXX)
	export SOFTVERBS_SOCKET=$devdir/control
	own_dev=1
fi
export SOFTVERBS_IDLE_EXIT=${SOFTVERBS_IDLE_EXIT:-1}
export SOFTVERBSD=${SOFTVERBSD:-$build/bin/softverbsd}
unset SOFTVERBS_NO_AUTOSTART
devlog=$(dirname "$SOFTVERBS_SOCKET")/softverbsd.log

# Every program runs under timeout(1), which leads a process group of its
# own; it is stopped by that group. The cmtime server never ends by itself.
# Clients run in the background and are waited for, so that a signal to
# this script is handled at once (and ends them too).
srv='' cli=''
alive() { # pid: there, and not a zombie waiting to be reaped
	local st
	st=$(awk '{ print $3 }' /proc/"$1"/stat 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ]
}
stop_groups() { # pid...: TERM, up to 2 s, then KILL
	local p any
	for p; do kill -TERM -- -"$p" 2>/dev/null; done
	for _ in $(seq 1 40); do
		any=0
		for p; do alive "$p" && any=1; done
		[ $any = 0 ] && break
		sleep 0.05
	done
	for p; do kill -KILL -- -"$p" 2>/dev/null; done
	return 0
}
stop_server() {
	[ -n "$srv" ] || return 0
	stop_groups "$srv"
	wait "$srv" 2>/dev/null
	srv=''
}
cleanup() {
	# timeout(1) signals us twice (us, then its group): once is enough
	trap '' INT TERM
	# shellcheck disable=SC2086
	[ -n "$cli$srv" ] && stop_groups $cli $srv
	[ -z "$keep" ] && rm -rf "$logs"
	if [ $own_dev = 1 ]; then
		# the daemon leaves by itself once idle
		local dpid
		dpid=$(tr -d '\n' < "$devdir/control.lock" 2>/dev/null)
		if [ -n "$dpid" ]; then
			for _ in $(seq 1 200); do
				kill -0 "$dpid" 2>/dev/null || break
				[ "$(awk '{print $3}' /proc/"$dpid"/stat 2>/dev/null)" = Z ] && break
				sleep 0.05
			done
			if kill -0 "$dpid" 2>/dev/null &&
			   [ "$(awk '{print $3}' /proc/"$dpid"/stat 2>/dev/null)" != Z ]; then
				echo "bench/cmtime.sh: softverbsd $dpid still running 10 s after the last client; killed" >&2
				kill -TERM "$dpid" 2>/dev/null
			fi
		fi
		[ -n "$keep" ] && cp "$devlog" "$logs/softverbsd.log" 2>/dev/null
		rm -rf "$devdir"
	fi
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
	"$PY" -c 'import socket
s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

# The host's own IPv4 address (not loopback), if it has one.
host_ipv4() {
	ip -4 -o addr show scope global 2>/dev/null |
		awk '{ sub(/\/.*/, "", $4); print $4; exit }'
}

# run FILE CMD...: one client run under timeout; it must exit 0 and print
# cmtime's table (a connect row: rdma-core 56's "cm connect"), and no error
# line of cmtime's
run() {
	local f=$1 rc
	shift
	timeout -k 5 "$limit" "$@" >"$f" 2>&1 &
	cli=$!
	wait "$cli"
	rc=$?
	cli=
	if [ $rc != 0 ]; then
		errors+=("$(basename "$f" .txt): exit status $rc")
	elif ! grep -Eq '^(connect +: |cm connect +[0-9])' "$f"; then
		errors+=("$(basename "$f" .txt): no connect step in the output")
	elif grep -Eq '^(event: |RDMA_CM_EVENT_|failure|failing)' "$f"; then
		errors+=("$(basename "$f" .txt): $(grep -Em1 '^(event: |RDMA_CM_EVENT_|failure|failing)' "$f")")
	else
		return 0
	fi
	echo "---- $f" >&2
	tail -n 20 "$f" >&2
	mv "$f" "${f%.txt}.failed"
	return 1
}

# sv0 FILE ADDR N: one cmtime run of N connections, with a server of its
# own (on a fresh port, N connections too: rdma-core 56's server serves
# one run of as many and leaves; 44's never leaves), stopped after
sv0() {
	local f=$1 addr=$2 n=$3 port
	port=$(free_port)
	timeout -k 5 $(( limit + 10 )) \
		"$SV" run -- cmtime -b "$addr" -p "$port" -c "$n" \
		>"${f%.txt}.server.log" 2>&1 &
	srv=$!
	# no socket to watch: the daemon logs each id that starts listening
	for _ in $(seq 1 400); do
		grep -q "listens on .*:$port, " "$devlog" 2>/dev/null && break
		kill -0 "$srv" 2>/dev/null || break
		sleep 0.05
	done
	if ! grep -q "listens on .*:$port, " "$devlog" 2>/dev/null; then
		errors+=("$(basename "$f" .txt): the cmtime server never listened on $addr port $port")
		stop_server
		return 1
	fi
	run "$f" "$SV" run -- cmtime -s "$addr" -p "$port" -c "$n"
	# 56's leaves by itself once its client is done
	for _ in $(seq 1 40); do
		alive "$srv" || break
		sleep 0.05
	done
	stop_server
}

# one path: NAME ADDR
path() {
	local name=$1 addr=$2 r
	# CONNS at a time, ROUNDS times, the order alternating
	for r in $(seq 1 "$rounds"); do
		if [ $((r % 2)) = 1 ]; then
			sv0 "$logs/$name.sv0.r$r.txt" "$addr" "$conns"
			run "$logs/$name.tcp.r$r.txt" "$TCP" -s "$addr" -c "$conns"
		else
			run "$logs/$name.tcp.r$r.txt" "$TCP" -s "$addr" -c "$conns"
			sv0 "$logs/$name.sv0.r$r.txt" "$addr" "$conns"
		fi
	done
	# one connection at a time
	for r in $(seq 1 "$serial"); do
		sv0 "$logs/$name.sv0.one$r.txt" "$addr" 1
		run "$logs/$name.tcp.one$r.txt" "$TCP" -s "$addr" -c 1
	done
}

command -v cmtime >/dev/null || errors+=("cmtime is not installed (rdmacm-utils)")
[ -x "$TCP" ] || errors+=("$TCP is missing (make build)")
[ -x "$SV" ] || errors+=("$SV is missing (make build)")
host=
if [ ${#errors[@]} = 0 ]; then
	echo "bench/cmtime.sh: $conns connections x $rounds, 1 x $serial;" \
	     "sv0 (cmtime) and TCP (sv_tcp_connect)"
	path loopback 127.0.0.1
	host=$(host_ipv4)
	[ -n "$host" ] && path host "$host"
fi

# ---- the JSON, from the outputs
"$PY" - "$logs" "$conns" "$rounds" "$serial" "$host" "${errors[@]}" <<'PY' >&3
import json, os, re, sys

logs, conns, rounds, serial, host = sys.argv[1:6]
conns, rounds, serial = int(conns), int(rounds), int(serial)
errors = sys.argv[6:]
ROW = re.compile(r"^([a-z ]+?)\s*:\s*(-?[\d.]+)\s+(-?[\d.]+)\s+(-?[\d.]+)"
                 r"\s+(-?[\d.]+)\s*$")
# rdma-core 56: step, avg/iter (total / connections), total(us), us/conn
# (sum / connections), sum(us), max(us), min(us)
ROW56 = re.compile(r"^([a-z ]+?)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)"
                   r"\s+(\d+)\s*$")
SV_SETUP = ("create id", "bind addr", "resolve addr", "resolve route",
            "create qp", "init qp attr", "init qp", "connect")
TCP_SETUP = ("create id", "bind addr", "accept")
TEARDOWN = ("disconnect", "destroy")


def table(path, n):
    """cmtime's table: step -> figures (us / conn times n is the step's
    total with cmtime's two decimals of a microsecond)."""
    try:
        text = open(path).read()
    except OSError:
        return None
    steps = {}
    tables = 0
    for line in text.splitlines():
        if line.startswith("step "):
            tables += 1
        g = ROW.match(line)
        if g:
            v = [float(x) for x in g.groups()[1:]]
            steps[g.group(1)] = {"total_ms": v[3] * n / 1000,
                                 "max_ms": v[1], "min_us": v[2],
                                 "us_per_conn": v[3]}
            continue
        g = ROW56.match(line)
        # 56's first table (its second is a run without QPs)
        if g and tables == 1:
            v = [float(x) for x in g.groups()[1:]]
            steps[g.group(1)] = {"total_ms": v[1] / 1000,
                                 "max_ms": v[4] / 1000, "min_us": v[5],
                                 "us_per_conn": v[1] / n}
    if "cm connect" in steps:
        steps["connect"] = steps.pop("cm connect")
        steps.pop("full connect", None)
        d = [steps.pop(s) for s in ("destroy qp", "destroy id") if s in steps]
        if d:
            steps["destroy"] = {
                "total_ms": sum(x["total_ms"] for x in d),
                "max_ms": None, "min_us": None,
                "us_per_conn": sum(x["us_per_conn"] for x in d)}
    return steps if "connect" in steps else None


def median(v):
    v = sorted(x for x in v if x is not None)
    if not v:
        return None
    k = len(v)
    return v[k // 2] if k % 2 else (v[k // 2 - 1] + v[k // 2]) / 2


def rnd(v, d=3):
    return None if v is None else round(v, d)


def ratio(a, b):
    return round(a / b, 3) if a is not None and b else None


def total_s(steps, names):
    """the seconds of these steps, all present ones; None without the
    last (the one that ends the setup or teardown)"""
    if names[-1] not in steps:
        return None
    return sum(steps[s]["total_ms"] for s in names if s in steps) / 1000


def side(name, kind):
    runs = [table(os.path.join(logs, "%s.%s.r%d.txt" % (name, kind, r)),
                  conns) for r in range(1, rounds + 1)]
    runs = [t for t in runs if t]
    ones = [table(os.path.join(logs, "%s.%s.one%d.txt" % (name, kind, r)), 1)
            for r in range(1, serial + 1)]
    ones = [t for t in ones if t]
    if not runs and not ones:
        return None
    order = []
    for t in runs + ones:
        order += [s for s in t if s not in order]
    setup = SV_SETUP if kind == "sv0" else TCP_SETUP
    out = {"runs": len(runs), "single_runs": len(ones), "steps": {},
           "single_us": {}}
    for s in order:
        rows = [t[s] for t in runs if s in t]
        if rows:
            out["steps"][s] = {k: rnd(median([x[k] for x in rows]))
                               for k in ("total_ms", "max_ms", "min_us",
                                         "us_per_conn")}
            out["steps"][s]["runs_us_per_conn"] = [x["us_per_conn"]
                                                   for x in rows]
        v = [t[s]["us_per_conn"] for t in ones if s in t]
        if v:
            out["single_us"][s] = rnd(median(v))

    def rate(names):
        v = [total_s(t, names) for t in runs]
        v = [conns / x for x in v if x]
        return rnd(median(v), 1)

    def one(names):
        v = [total_s(t, names) for t in ones]
        return rnd(median([x * 1e6 for x in v if x is not None]))
    out["setup_cps"] = rate(setup)
    out["connect_cps"] = rate(("connect",) if kind == "sv0" else ("accept",))
    out["teardown_cps"] = rate(TEARDOWN)
    out["single_setup_us"] = one(setup)
    out["single_connect_us"] = out["single_us"].get(
        "connect" if kind == "sv0" else "accept")
    out["single_teardown_us"] = one(TEARDOWN)
    if kind == "tcp":
        out["handshake_cps"] = rate(("connect",))
    return out


paths = {}
for name, addr in (("loopback", "127.0.0.1"), ("host", host or None)):
    if addr is None:
        paths[name] = {"addr": None,
                       "skipped": "this host has no IPv4 address but loopback"}
        continue
    sv, tcp = side(name, "sv0"), side(name, "tcp")
    p = {"addr": addr, "sv0": sv, "tcp": tcp}
    sv, tcp = sv or {}, tcp or {}
    p["ratio_sv0_tcp"] = {
        # rates: below 1, sv0 sets up fewer per second
        "setup_cps": ratio(sv.get("setup_cps"), tcp.get("setup_cps")),
        "connect_cps": ratio(sv.get("connect_cps"), tcp.get("connect_cps")),
        "teardown_cps": ratio(sv.get("teardown_cps"),
                              tcp.get("teardown_cps")),
        # times: above 1, sv0 takes longer
        "single_setup_us": ratio(sv.get("single_setup_us"),
                                 tcp.get("single_setup_us")),
        "single_connect_us": ratio(sv.get("single_connect_us"),
                                   tcp.get("single_connect_us")),
        "single_teardown_us": ratio(sv.get("single_teardown_us"),
                                    tcp.get("single_teardown_us")),
        "us_per_conn": {s: ratio(sv["steps"][s]["us_per_conn"],
                                 tcp["steps"][s]["us_per_conn"])
                        for s in (sv.get("steps") or {})
                        if s in (tcp.get("steps") or {})}}
    paths[name] = p

out = {"bench": "cmtime", "connections": conns, "rounds": rounds,
       "single_runs": serial,
       "sv0": "Debian's cmtime (rdmacm-utils) through 'softverbs run'",
       "tcp": "sv_tcp_connect (bench/tcp_connect.c)",
       "paths": paths, "error": "; ".join(errors) if errors else None}
print(json.dumps(out, indent=1))

# the short table
for name, p in paths.items():
    if not p.get("addr"):
        print("%s: %s" % (name, p.get("skipped")), file=sys.stderr)
        continue
    sv, tcp, r = p["sv0"] or {}, p["tcp"] or {}, p["ratio_sv0_tcp"]
    print("%s (%s), %d connections, median of %d: conn/s sv0 / TCP"
          % (name, p["addr"], conns, rounds), file=sys.stderr)
    for k in ("setup_cps", "connect_cps", "teardown_cps"):
        print("  %-14s %10s %10s %8s" % (k, sv.get(k), tcp.get(k), r[k]),
              file=sys.stderr)
    for k in ("single_setup_us", "single_connect_us", "single_teardown_us"):
        print("  %-18s %6s %10s %8s" % (k, sv.get(k), tcp.get(k), r[k]),
              file=sys.stderr)
PY
rc=$?
[ $rc = 0 ] || exit 1
[ ${#errors[@]} = 0 ] || exit 1
exit 0
