#!/usr/bin/env bash
# The middleware people run, on sv0 across two hosts, beside the TCP path it
# replaces on the same link (issue 20): two network namespaces joined by a
# veth, a softverbsd in each (tests/net/lib.sh); server (or the first
# ranks) in a, client in b. Sections:
#   ucx  Debian's ucx_perftest (UCX 1.13), one batch per transport: put
#        bandwidth (64 KiB, 1 MiB) and 8 B put latency, tag bandwidth and
#        8 B tag latency, am message rate of 8 B messages; over
#        UCX_TLS=rc_verbs,ud_verbs:aux on sv0:1 (through 'softverbs run')
#        beside UCX_TLS=tcp on veth0;
#   mpi  bench/mpi_bench.c under Debian's Open MPI 4.1, launched through
#        tests/mpi/netns_job.sh's rsh agent: ping-pong (8 B latency, 1 MiB
#        bandwidth) between one rank in each host, and allreduce of 8 B and
#        1 MiB over 8 ranks (4 a host); pml ucx (rc_verbs on sv0, shared
#        memory within a host) beside pml ob1 with btl tcp,vader,self (TCP
#        between the hosts, shared memory within one);
#   fi   libfabric 1.17's fi_pingpong (Debian has no fabtests): 8 B latency
#        and 1 MiB ping-pong bandwidth, msg endpoints over 'verbs' beside
#        'tcp', rdm endpoints over 'verbs;ofi_rxm' beside 'tcp;ofi_rxm'.
# One JSON object on stdout ({"bench": "middleware", SECTION: {...}, ...,
# "error": null or what failed}; a run that fails leaves its figures null
# and says why, the rest still runs), its table on stderr
# (bench/report_mw.py). Exit 0 once the JSON is out (1 with --strict if
# anything failed), 1 if the harness itself failed, 77 when not root or
# every section asked for was skipped (a tool missing).
#   bench/middleware.sh BUILD_DIR [--short] [--strict] [--keep DIR] [SECTION...]
# No SECTION: all three. --short: a few iterations of each (make check runs
# it through bench/run.sh --short). --keep DIR: the raw outputs kept there.
# Needs root, iproute2, nftables, util-linux (unshare). Timings are
# reported, never asserted; other work on the machine moves every figure.
set -u
exec 3>&1 1>&2   # stdout: the JSON only

usage() { echo "usage: bench/middleware.sh BUILD_DIR [--short] [--strict] [--keep DIR] [ucx|mpi|fi...]" >&2; exit 2; }
[ $# -ge 1 ] || usage
case "$1" in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
build=$(cd "$1" 2>/dev/null && pwd) || { echo "bench/middleware.sh: no build folder $1" >&2; exit 1; }
shift
here=$(cd "$(dirname "$0")" && pwd)
short=0 strict=0 keep='' sections=()
while [ $# -gt 0 ]; do
	case "$1" in
	--short) short=1; shift ;;
	--strict) strict=1; shift ;;
	--keep) [ $# -ge 2 ] || usage; keep=$2; shift 2 ;;
	ucx|mpi|fi) sections+=("$1"); shift ;;
	*) usage ;;
	esac
done
[ ${#sections[@]} -gt 0 ] || sections=(ucx mpi "fi")
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

# iterations: ucx (lat, bw 64 KiB, bw 1 MiB, am), fi (8 B, 1 MiB), mpi
# ping-pong and allreduce (8 B, 1 MiB); a bound on one run
if [ $short = 1 ]; then
	ucx_n=(1000 200 50 20000) fi_n=(200 20) mpi_pp=(500 20) mpi_ar=(200 5)
	step_s=40
else
	ucx_n=(20000 4000 500 200000) fi_n=(5000 300) mpi_pp=(10000 300)
	mpi_ar=(2000 50) step_s=150
fi

# Each section's files (outputs, "errors" and "skipped": one line each) in
# its own folder of $raw; bench/report_mw.py makes the JSON of them.
raw=$(mktemp -d /tmp/softverbs-mw.XXXXXX) || exit 1
trap 'rm -rf "$raw"' EXIT
cut -d' ' -f1 /proc/loadavg >"$raw/load_start"
emit() {
	"$PY" "$here/report_mw.py" --collect "$raw" --short "$short" \
		--sections "${sections[*]}" >&3
	"$PY" "$here/report_mw.py" --table "$raw" --short "$short" \
		--sections "${sections[*]}" >&2
}
err() { # section what
	mkdir -p "$raw/$1" && echo "$2" >>"$raw/$1/errors"
	echo "error: $1: $2"
}
skipped() { # section why
	mkdir -p "$raw/$1" && echo "$2" >>"$raw/$1/skipped"
	echo "skipped: $1: $2"
}
if [ "$(id -u)" != 0 ]; then
	for s in "${sections[@]}"; do skipped "$s" "needs root (network namespaces)"; done
	emit
	rm -rf "$raw"
	exit 77
fi
for s in "${sections[@]}"; do mkdir -p "$raw/$s"; done
# what each section needs
has() { command -v "$1" >/dev/null; }
for s in "${sections[@]}"; do
	case $s in
	ucx) has ucx_perftest || skipped ucx "ucx_perftest is not installed (ucx-utils)" ;;
	mpi) if ! has mpirun.openmpi; then skipped mpi "no mpirun.openmpi (openmpi-bin: tests/mpi/deps.sh)"
	     elif [ ! -x "$build/bin/mpi_bench_ompi" ]; then skipped mpi "no $build/bin/mpi_bench_ompi (built when mpicc.openmpi exists)"
	     elif ! has unshare || ! has nft; then skipped mpi "no unshare or nft"; fi ;;
	"fi") has fi_pingpong || skipped "fi" "fi_pingpong is not installed (libfabric-bin)" ;;
	esac
done
todo=()
for s in "${sections[@]}"; do [ -s "$raw/$s/skipped" ] || todo+=("$s"); done
if [ ${#todo[@]} = 0 ]; then
	emit
	rm -rf "$raw"
	exit 77
fi

export SV_BUILD_DIR=$build
# shellcheck source=../tests/net/lib.sh
. "$here/../tests/net/lib.sh"
# shellcheck source=../tests/mpi/netns_job.sh
. "$here/../tests/mpi/netns_job.sh"
# lib.sh's cleanup on exit, and our folder with it
trap 'rc_=$?; rm -rf "$raw"; ns_cleanup $rc_; exit $?' EXIT
# the harness failing: the JSON says so too (lib.sh's functions call it)
# shellcheck disable=SC2317
fail() {
	echo "FAIL: $*" >&2
	err harness "$*"
	emit
	[ -n "$keep" ] && mkdir -p "$keep" && cp -r "$raw"/. "$keep"/
	rm -rf "$raw"
	exit 1
}
# the results are on stdout: no log dump at exit unless the harness failed
# shellcheck disable=SC2034
NS_LOGS=()

ns_pair_up "$(ns_prefix mw)"
# the daemons stay for the whole run (lib.sh's --idle-exit 30 would end
# them during a long TCP run; its cleanup ends them)
NS_DAEMON_ARGS="${NS_DAEMON_ARGS:-} --idle-exit 0"
ns_daemons_up
echo "pair $NS_A ($IP_A) -- $NS_B ($IP_B); sections: ${todo[*]}"

# run_pair SECTION NAME PORT SERVER... :: CLIENT...: the server in a
# (background, bounded), once it listens on PORT the client in b, each on
# its namespace's daemon. Outputs SECTION/NAME.server and SECTION/NAME.out.
# Returns 0 when both exited 0.
run_pair() {
	local sec=$1 name=$2 port=$3 srv crc src
	local -a s=() c=()
	shift 3
	while [ "$1" != :: ]; do s+=("$1"); shift; done
	shift
	c=("$@")
	local so=$raw/$sec/$name.server co=$raw/$sec/$name.out
	timeout -k 2 $(( step_s + 10 )) ip netns exec "$NS_A" env \
		SOFTVERBS_SOCKET="$SOCK_A" SOFTVERBS_NO_AUTOSTART=1 \
		SOFTVERBSD=/nonexistent/softverbsd "${s[@]}" >"$so" 2>&1 &
	srv=$!
	NS_PIDS+=("$srv")
	if ! ns_wait_listen "$NS_A" "$port" "$srv" 15; then
		ns_end_job "$srv"
		err "$sec" "$name: the server never listened on port $port ($(ns_why "$wait_rc"))"
		tail -n 10 "$so"
		return 1
	fi
	timeout -k 2 "$step_s" ip netns exec "$NS_B" env \
		SOFTVERBS_SOCKET="$SOCK_B" SOFTVERBS_NO_AUTOSTART=1 \
		SOFTVERBSD=/nonexistent/softverbsd "${c[@]}" >"$co" 2>&1
	crc=$?
	ns_wait_job "$srv" 15 || ns_end_job "$srv"
	src=$wait_rc
	[ "$crc" = 0 ] && [ "$src" = 0 ] && return 0
	err "$sec" "$name: client $(ns_why "$crc"), server $(ns_why "$src")"
	echo "---- server ($NS_A):"; tail -n 10 "$so"
	echo "---- client ($NS_B):"; tail -n 10 "$co"
	return 1
}

port=14100
next_port() { port=$(( port + 1 )); }

# ---- ucx_perftest: one batch for each transport, the same file both sides
sec_ucx() {
	local batch=$raw/ucx/batch t tls dev ns ok
	local -a pre
	# UCX's tcp takes a new veth for a while after it is up (about a
	# second): wait (bounded) until it lists veth0 in both hosts
	for ns in "$NS_A" "$NS_B"; do
		ok=0
		for _ in $(seq 1 50); do
			ip netns exec "$ns" env UCX_TLS=tcp timeout 10 ucx_info -d 2>/dev/null |
				grep -q 'Device: veth0' && { ok=1; break; }
			sleep 0.2
		done
		[ "$ok" = 1 ] || err ucx "UCX's tcp does not list veth0 in $ns after 10 s"
	done
	printf '%s\n' \
		"put_bw_65536 -t ucp_put_bw -s 65536 -n ${ucx_n[1]} -w $(( ucx_n[1] / 10 ))" \
		"put_bw_1048576 -t ucp_put_bw -s 1048576 -n ${ucx_n[2]} -w $(( ucx_n[2] / 10 ))" \
		"put_lat_8 -t ucp_put_lat -s 8 -n ${ucx_n[0]} -w $(( ucx_n[0] / 10 ))" \
		"tag_bw_65536 -t tag_bw -s 65536 -n ${ucx_n[1]} -w $(( ucx_n[1] / 10 ))" \
		"tag_bw_1048576 -t tag_bw -s 1048576 -n ${ucx_n[2]} -w $(( ucx_n[2] / 10 ))" \
		"tag_lat_8 -t tag_lat -s 8 -n ${ucx_n[0]} -w $(( ucx_n[0] / 10 ))" \
		"am_bw_8 -t ucp_am_bw -s 8 -n ${ucx_n[3]} -w $(( ucx_n[3] / 10 ))" \
		>"$batch"
	# UCX 1.18's (Debian 13) is built with MPI: -P 0, without (1.13 has no -P)
	local -a perf_p=()
	ucx_perftest -h 2>&1 | grep -q -- '-P <0|1>' && perf_p=(-P 0)
	for t in sv0 tcp; do
		if [ "$t" = sv0 ]; then
			tls=rc_verbs,ud_verbs:aux dev=sv0:1 pre=("$SV" run --)
		else
			tls=tcp dev=veth0 pre=()
		fi
		next_port
		# UCX_LOG_LEVEL=info: the lanes UCX chose (ep_cfg; 1.18:
		# "inter-node cfg#N"), in the client's output beside the CSV lines
		run_pair ucx "$t" "$port" env UCX_TLS="$tls" UCX_NET_DEVICES="$dev" \
			"${pre[@]}" ucx_perftest "${perf_p[@]}" -p "$port" -b "$batch" -f -v :: \
			env UCX_TLS="$tls" UCX_NET_DEVICES="$dev" UCX_LOG_LEVEL=info \
			"${pre[@]}" ucx_perftest "${perf_p[@]}" "$IP_A" -p "$port" -b "$batch" -f -v
	done
}

# ---- fi_pingpong: 8 B and 1 MiB, msg and rdm endpoints, sv0 and tcp
sec_fi() {
	local p e s n name
	# The verbs provider's server names itself by binding "localhost"
	# (docs/MIDDLEWARE.md, finding 4): in the server's own mount namespace
	# "localhost" is a's address
	printf '%s localhost\n' "$IP_A" >"$NS_DIR/hosts.a"
	local -a pre
	for pe in "verbs msg sv0_msg" "tcp msg tcp_msg" \
		  "verbs;ofi_rxm rdm sv0_rdm" "tcp;ofi_rxm rdm tcp_rdm"; do
		read -r p e name <<<"$pe"
		pre=()
		[ "${name%_*}" = sv0 ] && pre=("$SV" run --)
		for s in 8 1048576; do
			n=${fi_n[0]}
			[ "$s" = 8 ] || n=${fi_n[1]}
			next_port
			# shellcheck disable=SC2016
			run_pair "fi" "$name.$s" "$port" sh -c \
				'mount --bind "$0" /etc/hosts && exec "$@"' "$NS_DIR/hosts.a" \
				"${pre[@]}" fi_pingpong -p "$p" -e "$e" -I "$n" -S "$s" -B "$port" :: \
				"${pre[@]}" fi_pingpong -p "$p" -e "$e" -I "$n" -S "$s" -P "$port" "$IP_A"
		done
	done
}

# ---- MPI: ping-pong (2 ranks) and allreduce (8), over UCX on sv0 and TCP
sec_mpi() {
	local mode t job out what per
	local -a it
	mpi_counters_up
	for mode in ompi-ucx-rc ompi-tcp-sm; do
		t=sv0
		[ "$mode" = ompi-tcp-sm ] && t=tcp
		mpi_hosts_up "$mode"
		for what in pingpong allreduce; do
			per=1 it=("${mpi_pp[@]}")
			[ "$what" = allreduce ] && per=4 it=("${mpi_ar[@]}")
			out=$raw/mpi/$t.$what.out
			mpi_job_cmd "$mode" "$per" "$build/bin/mpi_bench_ompi" "$what" \
				--iters-small "${it[0]}" --iters-large "${it[1]}"
			echo "${MPI_CMD[*]}" >"$raw/mpi/$t.$what.cmd"
			local roce0 tcp0 t0
			roce0=$(mpi_bytes roce) tcp0=$(mpi_bytes tcp)
			t0=$(date +%s.%N)
			mpi_job_start "$out" "$step_s"
			job=$MPI_JOB
			ns_wait_job "$job" $(( step_s + 10 )) || ns_end_job "$job"
			printf 'roce_bytes %s\ntcp_bytes %s\nseconds %s\n' \
				$(( $(mpi_bytes roce) - roce0 )) $(( $(mpi_bytes tcp) - tcp0 )) \
				"$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')" \
				>"$raw/mpi/$t.$what.bytes"
			if [ "$wait_rc" != 0 ]; then
				err mpi "$t $what: the job $(ns_why "$wait_rc")"
				grep -v 'UCX  INFO' "$out" | tail -n 15
			fi
		done
	done
}

for s in "${todo[@]}"; do
	echo "== $s"
	"sec_$s"
done
# a daemon that crashed under a run is an error of its own
for p in "$PID_A" "$PID_B"; do
	if _ns_gone "$p"; then
		err harness "softverbsd $p died"
		tail -n 30 "$NS_DIR"/[ab]/softverbsd.log
	fi
done

emit
[ -n "$keep" ] && mkdir -p "$keep" && cp -r "$raw"/. "$keep"/
nerr=$(cat "$raw"/*/errors 2>/dev/null | wc -l)
rm -rf "$raw"
[ $strict = 1 ] && [ "$nerr" -gt 0 ] && exit 1
exit 0
