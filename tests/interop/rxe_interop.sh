#!/usr/bin/env bash
# softverbs against Linux: Debian's unmodified ibv_rc_pingpong and
# ibv_ud_pingpong between the guest's rxe0 (the kernel's rdma_rxe, under
# qemu) and sv0 (softverbsd --ip 10.88.0.1 in the namespace, on the tap), in
# both directions, in one guest boot:
#   rc_gs  RC, server in the guest (rxe0, -g 1), client on sv0 (-g 0)
#   rc_gc  RC, client in the guest, server on sv0
#   ud_gs  UD, server in the guest
#   ud_gc  UD, client in the guest
#   rping_gs, rping_gc     rdmacm-utils' rping (-C 100 -v -V: data verified)
#                          through rdma_cm: the kernel's CM in the guest and
#                          sv0's, CM MADs on QP1; server in the guest / on sv0
#   ucma_gs, ucma_gc       ucmatose, 10 connections, 20 messages each way
#   udaddy_gs, udaddy_gc   udaddy: UD ids, SIDR_REQ/SIDR_REP, datagrams
# Both sides must exit 0 and print their result lines ("N iters in S
# seconds"; every ping; "test complete").
#
#   tests/interop/rxe_interop.sh [BUILD]     (BUILD: default $SV_BUILD_DIR, else build)
# INTEROP_CASES="rc_gs ud_gc" picks cases; INTEROP_ITERS (100), INTEROP_RC_SIZE
# (4096: four 1024-byte packets), INTEROP_UD_SIZE (1024), INTEROP_CASE_TIMEOUT
# (30 s for one program). First it checks that softverbsd has a UDP socket on
# port 4791 in the namespace: without one (no RoCE wire in this build) it
# stops at once; INTEROP_FORCE=1 runs the cases anyway. Logs, the console and
# the tap's capture (tap.pcapng, tshark) are in $INTEROP_DIR/runs/interop-*.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

BUILD=${1:-${SV_BUILD_DIR:-$IG_REPO/build}}
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || fail "no build folder ${1:-${SV_BUILD_DIR:-$IG_REPO/build}}"
SV=$BUILD/bin/softverbs
SVD=$BUILD/bin/softverbsd
[ -x "$SV" ] && [ -x "$SVD" ] || fail "no softverbs/softverbsd in $BUILD/bin (build first)"
cases=${INTEROP_CASES:-rc_gs rc_gc ud_gs ud_gc rping_gs rping_gc ucma_gs ucma_gc udaddy_gs udaddy_gc}
pings=${INTEROP_PINGS:-100}
CM_PORT=7471
iters=${INTEROP_ITERS:-100}
rc_size=${INTEROP_RC_SIZE:-4096}
ud_size=${INTEROP_UD_SIZE:-1024}
T=${INTEROP_CASE_TIMEOUT:-30}
PORT=18515

bash "$here/build-guest.sh" || fail "building the guest"
ig_setup interop

# ---- sv0 on the host side of the tap ------------------------------------
sock=$IG_RUN/sv/control
mkdir -p "$IG_RUN/sv"
ig_log "$IG_RUN/softverbsd.log" "softverbsd (10.88.0.1)"
ig_bg "$IG_RUN/softverbsd.log" "$SVD" --ip "$IG_HOST_IP" --socket "$sock" --idle-exit 600
svd_pid=$IG_PID
sv() { ig_ns env SOFTVERBS_SOCKET="$sock" SOFTVERBS_NO_AUTOSTART=1 SOFTVERBSD=/nonexistent "$@"; }
up=0
for _ in $(seq 1 200); do
	_ig_alive "$svd_pid" || fail "softverbsd exited at start"
	if [ -S "$sock" ] && sv timeout 5 "$SV" devinfo >"$IG_RUN/devinfo.txt" 2>&1; then up=1; break; fi
	sleep 0.05
done
[ $up -eq 1 ] || { ig_log "$IG_RUN/devinfo.txt" devinfo; fail "softverbsd does not answer on $sock"; }
ig_say "sv0 served by softverbsd (pid $svd_pid) on $IG_HOST_IP: $(grep -ai 'gid' "$IG_RUN/devinfo.txt" | head -n 2 | tr -s ' \t' ' ' | paste -sd ';')"
grep -aq '::ffff:10.88.0.1' "$IG_RUN/devinfo.txt" ||
	{ ig_log "$IG_RUN/devinfo.txt" "softverbs devinfo"; fail "sv0 has no GID ::ffff:10.88.0.1"; }

# ---- the RoCE wire: does the daemon listen on UDP 4791? --------------------
ig_ns ss -Hulnp >"$IG_RUN/udp-sockets.txt" 2>&1
if ! grep -q ":4791 " "$IG_RUN/udp-sockets.txt"; then
	echo "softverbsd (pid $svd_pid, --ip $IG_HOST_IP) has no UDP socket on port 4791 in the namespace:" >&2
	echo "this build has no RoCEv2 wire (src/device/roce), so rxe0 cannot reach sv0." >&2
	if [ "${INTEROP_FORCE:-0}" != 1 ]; then
		fail "no RoCE wire: stopping before the guest boots (INTEROP_FORCE=1 runs the cases anyway)"
	fi
	ig_say "INTEROP_FORCE=1: running the cases anyway"
fi

# ---- the guest's side of every case ---------------------------------------
# Each case: (a client first waits for the host's go: its server listens),
# the program in the background, its output straight on the console (a tty:
# line buffered, nothing lost when it is killed), and a watcher on the
# control port: the host's last word for the case is "end", or "abort" (kill
# the program now: the other side failed, no use waiting for the timeout).
prog_of() {
	case "$1" in
	rc_*) echo ibv_rc_pingpong ;; ud_*) echo ibv_ud_pingpong ;;
	rping_*) echo rping ;; ucma_*) echo ucmatose ;; udaddy_*) echo udaddy ;;
	esac
}
args_of() { case "$1" in rc_*) echo "-s $rc_size -n $iters -c" ;; ud_*) echo "-s $ud_size -n $iters -c" ;; esac; }
is_cm() { case "$1" in rping_*|ucma_*|udaddy_*) return 0 ;; esac; return 1; }
# the rdma_cm port a case's server listens on (udaddy's is fixed)
cm_port() { case "$1" in udaddy_*) echo 7174 ;; *) echo "$CM_PORT" ;; esac; }
# The rdma_cm programs' command lines: server and client, by address.
cm_server() { # case address
	case "$1" in
	rping_*) echo "rping -s -a $2 -p $CM_PORT -C $pings -v -V" ;;
	ucma_*) echo "ucmatose -b $2 -p $CM_PORT -c 10 -C 20" ;;
	udaddy_*) echo "udaddy -b $2" ;;
	esac
}
cm_client() { # case server-address
	case "$1" in
	rping_*) echo "rping -c -a $2 -p $CM_PORT -C $pings -v -V" ;;
	ucma_*) echo "ucmatose -s $2 -p $CM_PORT -c 10 -C 20" ;;
	udaddy_*) echo "udaddy -s $2" ;;
	esac
}
# The guest's and sv0's command of a case.
guest_cmd() { # case
	if ! is_cm "$1"; then
		local peer=
		case "$1" in *_gc) peer=$IG_HOST_IP ;; esac
		echo "$(prog_of "$1") -d rxe0 -g 1 -p $PORT $(args_of "$1") $peer"
	elif [ "${1%_gs}" != "$1" ]; then
		cm_server "$1" "$IG_GUEST_IP"
	else
		cm_client "$1" "$IG_HOST_IP"
	fi
}
host_cmd() { # case
	if ! is_cm "$1"; then
		local peer=
		case "$1" in *_gs) peer=$IG_GUEST_IP ;; esac
		echo "$(prog_of "$1") -d sv0 -g 0 -p $PORT $(args_of "$1") $peer"
	elif [ "${1%_gs}" != "$1" ]; then
		cm_client "$1" "$IG_GUEST_IP"
	else
		cm_server "$1" "$IG_HOST_IP"
	fi
}
cmd=$IG_RUN/cmd.in
: >"$cmd"
for c in $cases; do
	prog=$(prog_of "$c") args=$(args_of "$c") peer=
	[ -n "$prog" ] || fail "unknown case $c"
	echo "say 'case $c'" >>"$cmd"
	case "$c" in
	*_gs) ;;
	*_gc) peer=$IG_HOST_IP; echo "sv_wait_go $(( T * 4 + 60 )) >/dev/null" >>"$cmd" ;;
	*) fail "unknown case $c" ;;
	esac
	echo "timeout $T $(guest_cmd "$c") &" >>"$cmd"
	echo 'p=$!' >>"$cmd"
	case "$c" in
	*_gs)
		if is_cm "$c"; then
			echo "sv_cm_wait_listen $(cm_port "$c") \$p 30 && say 'listening $c'" >>"$cmd"
		else
			echo "sv_wait_listen $PORT \$p 30 && say 'listening $c'" >>"$cmd"
		fi
		;;
	esac
	cat >>"$cmd" <<EOF
( w=\$(sv_wait_go $(( T * 2 + 30 ))); [ "\$w" = abort ] && kill \$p 2>/dev/null ) &
w=\$!
wait \$p
rc=\$?
say "done $c rc=\$rc"
wait \$w
say "result $c rc=\$rc"
EOF
done
echo 'exit 0' >>"$cmd"

ig_capture
ig_boot "$cmd"
ig_wait_ready

# ---- the host's side --------------------------------------------------------
declare -A res=() secs=()
guest_rc() { # case -> the guest program's status ("" if none yet)
	tr -d '\r' <"$IG_RUN/console.log" | sed -n "s/.*SV-GUEST: done $1 rc=\([0-9]*\).*/\1/p" | head -n 1
}
host_listening() { ig_ns ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q .; }
check_out() { # case file -> the program's result lines are there
	case "$1" in
	rping_*) [ "$(tr -d '\r' <"$2" | grep -ac 'ping data: rdma-ping-')" = "$pings" ] ;;
	ucma_*|udaddy_*) grep -aq 'test complete' "$2" ;;
	*) grep -aq 'iters in .* seconds' "$2" && grep -aq 'bytes in .* seconds' "$2" ;;
	esac
}
# sv0's server of case $1 listens (rdma_cm: the daemon logs each listen;
# one more than before the case started)
cm_listens() { grep -c "listens on .*:$(cm_port "$c"), " "$IG_RUN/softverbsd.log"; }
host_ready() {
	if is_cm "$1"; then
		[ "$(cm_listens)" -gt "$listens0" ]
	else
		host_listening
	fi
}
sv_bg() { # log prog args... : on sv0 in the namespace, in the background
	local log=$1
	shift
	ig_bg "$log" env SOFTVERBS_SOCKET="$sock" SOFTVERBS_NO_AUTOSTART=1 SOFTVERBSD=/nonexistent \
		timeout "$T" "$SV" run -- stdbuf -oL -eL "$@"
}

for c in $cases; do
	prog=$(prog_of "$c") args=$(args_of "$c")
	hlog=$IG_RUN/$c.host.log
	t0=$(date +%s.%N)
	ig_wait "case $c" $(( T * 2 + 30 ))
	hpid='' host_rc=''
	# shellcheck disable=SC2086
	case "$c" in
	*_gs)
		ig_wait "\(listening\|done\) $c" $(( T + 30 ))
		if [ "${IG_LINE#SV-GUEST: listening}" != "$IG_LINE" ]; then
			ig_say "$c: the guest's $prog listens; on sv0: $(host_cmd "$c")"
			sv_bg "$hlog" $(host_cmd "$c")
			hpid=$IG_PID
		else
			echo "the guest's server did not start" >"$hlog"
			host_rc=255
		fi
		;;
	*_gc)
		listens0=$(cm_listens)
		ig_say "$c: on sv0: $(host_cmd "$c"); the client in the guest"
		sv_bg "$hlog" $(host_cmd "$c")
		hpid=$IG_PID
		for _ in $(seq 1 600); do
			host_ready "$c" && break
			_ig_alive "$hpid" || break
			sleep 0.05
		done
		ig_go go   # even when the server failed: the client then fails at once
		;;
	esac
	# Until both sides are done, or one of them failed (bounded).
	for _ in $(seq 1 $(( (T + 10) * 20 ))); do
		g=$(guest_rc "$c")
		if [ -n "$hpid" ] && ! _ig_alive "$hpid"; then
			wait "$hpid"; host_rc=$? hpid=
		fi
		[ -n "$g" ] && [ -n "$host_rc" ] && break
		[ -n "$g" ] && [ "$g" != 0 ] && break
		[ -n "$host_rc" ] && [ "$host_rc" != 0 ] && break
		sleep 0.05
	done
	if [ -n "$hpid" ]; then
		_ig_kill "$hpid"
		wait "$hpid"; host_rc="$?(killed)"
	fi
	g=$(guest_rc "$c")
	word=abort
	[ "$host_rc" = 0 ] && [ "$g" = 0 ] && word=end
	ig_go "$word"
	ig_wait "result $c" $(( T + 30 ))
	g=$(guest_rc "$c")
	tr -d '\r' <"$IG_RUN/console.log" |
		sed -n "/SV-GUEST: case $c\$/,/SV-GUEST: result $c /p" | grep -av 'SV-GUEST: ' >"$IG_RUN/$c.guest.log"
	secs[$c]=$(_ig_since "$t0")
	if [ "$host_rc" = 0 ] && [ "$g" = 0 ] && check_out "$c" "$hlog" &&
	   check_out "$c" "$IG_RUN/$c.guest.log"; then
		res[$c]=PASS
		ig_say "$c: PASS in ${secs[$c]} s: sv0 '$(grep -a 'iters in\|test complete\|rdma-ping-' "$hlog" | tail -n 1)', rxe0 '$(grep -a 'iters in\|test complete\|rdma-ping-' "$IG_RUN/$c.guest.log" | tail -n 1)'"
	else
		res[$c]="FAIL (sv0 side status ${host_rc:-none}, rxe0 side ${g:-none}; 124, 143: timed out, killed)"
		ig_say "$c: ${res[$c]} after ${secs[$c]} s"
		echo "---- $c: sv0 side ($(host_cmd "$c")), $hlog ----"
		tail -n 20 "$hlog"
		echo "---- $c: rxe0 side ($(guest_cmd "$c")), $IG_RUN/$c.guest.log ----"
		tail -n 20 "$IG_RUN/$c.guest.log"
	fi
done
ig_end $(( T + 30 ))
ig_capture_stop

# ---- what went over the tap ----------------------------------------------
if [ -s "$IG_RUN/tap.pcapng" ]; then
	ig_say "capture: $IG_RUN/tap.pcapng; RoCEv2 packets (UDP 4791) by sender and opcode:"
	roce='udp.dstport == 4791 && !icmp'
	tshark -r "$IG_RUN/tap.pcapng" --disable-protocol rpcordma -Y "$roce" -T fields \
		-e ip.src -e ip.dst -e _ws.col.Info 2>/dev/null | sed 's/ QP=.*//' |
		sort | uniq -c | sed 's/^/    /'
	n=$(tshark -r "$IG_RUN/tap.pcapng" -Y "$roce" 2>/dev/null | wc -l)
	[ "$n" -gt 0 ] || echo "    (none)"
	n=$(tshark -r "$IG_RUN/tap.pcapng" -Y 'icmp.type == 3 && udp.dstport == 4791' 2>/dev/null | wc -l)
	[ "$n" -eq 0 ] || echo "    and $n ICMP 'port unreachable' answers to UDP 4791 packets (no socket there)"
fi
ig_say "timings: guest ready ${IG_T_READY} s after qemu started, powered off at ${IG_T_END} s"
echo "softverbsd log: $IG_RUN/softverbsd.log"
nfail=0
for c in $cases; do
	printf '  %-6s %-6s s  %s\n' "$c" "${secs[$c]:-?}" "${res[$c]:-not run}"
	[ "${res[$c]:-}" = PASS ] || nfail=$((nfail + 1))
done
[ $nfail -eq 0 ] || fail "$nfail of $(echo $cases | wc -w) interop cases failed between rxe0 and sv0"
pass "rxe0 <-> sv0: $cases"
ig_passed
