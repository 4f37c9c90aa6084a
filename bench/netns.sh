#!/usr/bin/env bash
# softverbs between two hosts on this machine, against the kernel's TCP over
# the same link: two network namespaces joined by a veth (tests/net/lib.sh),
# a softverbsd in each; then
#   - iperf3 TCP, one stream, b -> a, DURATION seconds;
#   - ib_write_bw 1 MiB messages, DURATION seconds (Gb/s, as iperf3);
#   - ib_write_bw 64 B messages, DURATION seconds: the message rate;
#   - ib_send_lat 2 B, ITERS round trips: typical and average latency;
#   - a 2-byte UDP round trip over the same veth, ITERS times, both ends
#     sleeping and both spinning (sv_udp_pingpong): the kernel's floor;
# each Debian's unmodified perftest, server in a, client in b, through
# 'softverbs run'. One JSON object on stdout (the figures, write bandwidth /
# iperf3's ratio, and "error": null or what failed: a run that fails leaves
# its figures null and says why, the rest still runs); a short table and the
# failed runs' outputs on stderr. Exit 0 once the JSON is out (1 with
# --strict if anything failed), 1 if the harness itself failed, 77 not root.
#   bench/netns.sh BUILD_DIR [--short] [--strict] [--mtu 1500|9000]
# --short: 1 s runs, 1000 latency iterations (else 3 s and 10000).
# Needs root, iproute2, iperf3 (scripts/deps.sh). Timings are reported, never
# asserted; other work on the machine moves every figure.
set -u
exec 3>&1 1>&2   # stdout: the JSON only

usage() { echo "usage: bench/netns.sh BUILD_DIR [--short] [--strict] [--mtu 1500|9000]" >&2; exit 2; }
[ $# -ge 1 ] || usage
case "$1" in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
build=$(cd "$1" 2>/dev/null && pwd) || { echo "bench/netns.sh: no build folder $1" >&2; exit 1; }
shift
short=0 strict=0 mtu=1500
while [ $# -gt 0 ]; do
	case "$1" in
	--short) short=1; shift ;;
	--strict) strict=1; shift ;;
	--mtu) [ $# -ge 2 ] || usage; mtu=$2; shift 2 ;;
	*) usage ;;
	esac
done
case "$mtu" in 1500|9000) ;; *) usage ;; esac
if [ $short = 1 ]; then dur=1 iters=1000; else dur=3 iters=10000; fi
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

# The JSON, from the variables below (null when empty).
declare -A R=()
errors=()
emit() {
	local k args=()
	for k in "${!R[@]}"; do args+=("$k=${R[$k]}"); done
	"$PY" - "$mtu" "$dur" "$iters" "${#errors[@]}" "${errors[@]}" -- "${args[@]}" >&3 <<'PY'
import json, sys
a = sys.argv[1:]
mtu, dur, iters, ne = int(a[0]), int(a[1]), int(a[2]), int(a[3])
errs = a[4:4 + ne]
kv = dict(x.split("=", 1) for x in a[4 + ne + 1:])
def num(k):
    v = kv.get(k, "")
    try:
        return float(v)
    except ValueError:
        return None
out = {"bench": "netns", "link": "veth between two network namespaces",
       "mtu": mtu, "duration_s": dur, "lat_iters": iters}
for k in ("iperf3_tcp_gbps", "write_bw_1m_gbps", "write_rate_64b_mpps",
          "send_lat_2b_typical_us", "send_lat_2b_avg_us",
          "udp_rtt_block_us", "udp_rtt_spin_us"):
    out[k] = num(k)
bw, tcp = out["write_bw_1m_gbps"], out["iperf3_tcp_gbps"]
out["write_bw_1m_vs_iperf3"] = round(bw / tcp, 3) if bw and tcp else None
out["error"] = "; ".join(errs) if errs else None
print(json.dumps(out, indent=1))
PY
}

if [ "$(id -u)" != 0 ]; then
	errors+=("needs root (network namespaces)")
	emit
	exit 77
fi
command -v iperf3 >/dev/null || errors+=("iperf3 is not installed (scripts/deps.sh)")

export SV_BUILD_DIR=$build
. "$(dirname "$0")/../tests/net/lib.sh"
# the harness failing: say so in the JSON too (lib.sh's functions call it)
# shellcheck disable=SC2317
fail() {
	echo "FAIL: $*" >&2
	errors+=("harness: $*")
	emit
	exit 1
}
# the results are on stdout: no log dump at exit unless the harness failed
# shellcheck disable=SC2034
NS_LOGS=()

ns_pair_up "$(ns_prefix bench)" "$mtu"
echo "pair $NS_A ($IP_A) -- $NS_B ($IP_B), veth MTU $mtu, ${dur} s runs"

# ---- iperf3 TCP, b -> a ----
if command -v iperf3 >/dev/null; then
	ij=$NS_DIR/iperf3.json
	timeout -k 2 $(( dur + 20 )) ip netns exec "$NS_A" iperf3 -s -1 -B "$IP_A" -p 5201 \
		>"$NS_DIR/iperf3_server.out" 2>&1 &
	isrv=$!
	if ns_wait_listen "$NS_A" 5201 $isrv 10 &&
	   timeout -k 2 $(( dur + 15 )) ip netns exec "$NS_B" iperf3 -c "$IP_A" -p 5201 \
		-t "$dur" -J >"$ij" 2>"$NS_DIR/iperf3_client.err"; then
		R[iperf3_tcp_gbps]=$("$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(round(d["end"]["sum_received"]["bits_per_second"] / 1e9, 3))' "$ij" 2>/dev/null)
	fi
	ns_wait_job $isrv 5 || ns_end_job $isrv
	if [ -z "${R[iperf3_tcp_gbps]:-}" ]; then
		errors+=("iperf3 failed")
		tail -n 20 "$NS_DIR/iperf3_server.out" "$ij" "$NS_DIR/iperf3_client.err" 2>/dev/null
	fi
fi

# ---- the kernel's floor: a 2-byte UDP round trip over this veth, both
# ends sleeping in recv (as the daemons' wire threads sleep in poll), then
# both spinning (sv_udp_pingpong; p50 in microseconds) ----
UDPPP=$build/bin/sv_udp_pingpong
if [ -x "$UDPPP" ]; then
	for m in block spin; do
		timeout -k 2 60 ip netns exec "$NS_A" "$UDPPP" server "$IP_A" 18600 \
			"$iters" $m >"$NS_DIR/udp_$m.server" 2>&1 &
		usrv=$!
		sleep 0.2
		if out=$(timeout -k 2 60 ip netns exec "$NS_B" "$UDPPP" client "$IP_A" \
			 18600 "$iters" $m 2>&1); then
			R[udp_rtt_${m}_us]=$(awk '{print $1}' <<<"$out")
		else
			errors+=("udp_pingpong $m: $out")
		fi
		ns_wait_job $usrv 5 || ns_end_job $usrv
	done
else
	errors+=("$UDPPP missing (build first)")
fi

# ---- softverbs: one perftest pair; its client's table row in $row ----
ns_daemons_up
# shellcheck disable=SC2034
NS_STEP=$(( dur + 10 ))   # lib.sh's bound on one run
row=
perf() { # name prog args...
	local name=$1
	shift
	row=
	if ns_run_pair 18515 "$@" -d sv0 -x 0 -p 18515; then
		row=$(awk '/#bytes/ { hdr = 1; next }
			hdr && $1 ~ /^[0-9]+$/ && NF >= 3 { print; exit }' "$NS_COUT")
		[ -n "$row" ] && return 0
		NS_WHY="no results table"
	fi
	errors+=("$name: $NS_WHY")
	echo "---- $name failed: $NS_WHY; server ($NS_A):"
	tail -n 15 "$NS_SOUT"
	echo "---- client ($NS_B):"
	tail -n 15 "$NS_COUT"
	return 1
}
# columns: #bytes #iterations peak average msgrate
perf "ib_write_bw 1 MiB" ib_write_bw -s 1048576 -D "$dur" --report_gbits &&
	R[write_bw_1m_gbps]=$(awk '{print $4}' <<<"$row")
perf "ib_write_bw 64 B" ib_write_bw -s 64 -D "$dur" &&
	R[write_rate_64b_mpps]=$(awk '{print $5}' <<<"$row")
# columns: #bytes #iterations t_min t_max t_typical t_avg ...
perf "ib_send_lat 2 B" ib_send_lat -s 2 -n "$iters" &&
	{ R[send_lat_2b_typical_us]=$(awk '{print $5}' <<<"$row")
	  R[send_lat_2b_avg_us]=$(awk '{print $6}' <<<"$row"); }
# a daemon that crashed under a run is an error of its own
for p in "$PID_A" "$PID_B"; do
	_ns_gone "$p" && errors+=("softverbsd $p died (its log: above)") &&
		tail -n 30 "$NS_DIR"/[ab]/softverbsd.log
done

# ---- the table ----
v() { echo "${R[$1]:--}"; }
ratio=-
[ -n "${R[write_bw_1m_gbps]:-}" ] && [ -n "${R[iperf3_tcp_gbps]:-}" ] &&
	ratio=$(awk -v a="${R[write_bw_1m_gbps]}" -v b="${R[iperf3_tcp_gbps]}" \
		'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
printf '%-28s %12s\n' "iperf3 TCP (Gb/s)" "$(v iperf3_tcp_gbps)" \
	"ib_write_bw 1 MiB (Gb/s)" "$(v write_bw_1m_gbps)" \
	"  / iperf3" "$ratio" \
	"ib_write_bw 64 B (Mpps)" "$(v write_rate_64b_mpps)" \
	"ib_send_lat 2 B typ (us)" "$(v send_lat_2b_typical_us)" \
	"ib_send_lat 2 B avg (us)" "$(v send_lat_2b_avg_us)" \
	"UDP 2 B round trip, sleeping (us)" "$(v udp_rtt_block_us)" \
	"UDP 2 B round trip, spinning (us)" "$(v udp_rtt_spin_us)"
for e in "${errors[@]}"; do echo "error: $e"; done

emit
[ $strict = 1 ] && [ ${#errors[@]} -gt 0 ] && exit 1
exit 0
