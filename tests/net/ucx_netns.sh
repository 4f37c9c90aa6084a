#!/usr/bin/env bash
# Debian's unmodified UCX (1.13; Debian 13's 1.18) between two hosts: the
# server in namespace a on a's softverbsd, the client in namespace b on
# b's, RoCEv2 over the veth (docs/DESIGN.md, "Middleware"). The
# out-of-band exchange is TCP, as across real hosts.
#   ucx_netns.sh BUILD_DIR TL         ucx_perftest's UCP tests ucp_put_bw,
#                                     ucp_get, ucp_am_bw, tag_lat, tag_bw,
#                                     ucp_add over TL (rc_verbs, ud_verbs),
#                                     1000 iterations per size, and tag_lat
#                                     with -E sleep
#   ucx_netns.sh BUILD_DIR TL rdmacm  io_demo through UCX's rdmacm
#                                     connection manager (the CM's MADs on
#                                     QP1 across), every byte checked
# Each run: both exit 0 in time, the client prints its results, UCX's
# selection (ep_cfg; UCX 1.18: "inter-node cfg#N") shows TL on sv0:1 for
# every lane, and RoCEv2 packets crossed the veth. rc_verbs by address
# exchange runs as UCX_TLS=rc_verbs,ud_verbs:aux (ud_verbs for UCX's
# wire-up messages only, UCX's 'rc_v'); through the CM rc_verbs runs alone.
export SV_BUILD_DIR=$1
tl=${2:-} what=${3:-perftest}
. "$(dirname "$0")/lib.sh"

case "$tl" in
rc_verbs) tls=rc_verbs,ud_verbs:aux ;;
ud_verbs) tls=ud_verbs ;;
*) fail "unknown transport '$tl' (rc_verbs, ud_verbs)" ;;
esac
case "$what" in perftest|rdmacm) ;; *) fail "unknown case '$what'" ;; esac
command -v ucx_perftest >/dev/null || skip "ucx_perftest is not installed (ucx-utils)"
command -v io_demo >/dev/null || skip "io_demo is not installed (ucx-utils)"
for v in $(env | sed -n 's/^\(UCX_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
# UCX 1.18's ucx_perftest is built with MPI: -P 0 runs it without (1.13
# has no -P); its server takes the test's parameters too (1.13's ignores
# them and takes the client's)
perf_p=()
ucx_perftest -h 2>&1 | grep -q -- '-P <0|1>' && perf_p=(-P 0)

ns_pair_up "$(ns_prefix "ucx${tl%_verbs}${what:0:1}")"
ns_daemons_up
sout=$NS_DIR/server.out cout=$NS_DIR/client.out
ns_log "$sout" "server in $NS_A"
ns_log "$cout" "client in $NS_B"
port=13337

# Every lane UCX printed is TL on sv0:1, and there is one. UCX 1.13 prints
# "ep_cfg[N]: tag(TL/DEV) ...", 1.18 "inter-node cfg#N tag(TL/DEV) ...".
check_lanes() { # file what
	local lanes bad
	lanes=$(grep -oE '(ep_cfg\[[0-9]*\]:|(intra|inter)-node cfg#[0-9]+) .*' "$1" |
		sed -E 's/^(ep_cfg\[[0-9]*\]:|(intra|inter)-node cfg#[0-9]+) //' |
		grep -o '([^)]*)' | tr -d '()' | sort -u)
	[ -n "$lanes" ] || fail "$2: UCX printed no endpoint configuration"
	bad=$(echo "$lanes" | grep -v "^$tl/sv0:1\$")
	[ -z "$bad" ] || fail "$2: lanes on $(echo "$bad" | tr '\n' ' ')(not $tl/sv0:1)"
}

# A server in a (background, bounded), then the client in b; both through
# softverbs run on their namespace's daemon. Sets crc, src.
pair() { # tls server-cmd... -- client-cmd...
	local t=$1 scmd=() spid
	shift
	while [ "$1" != -- ]; do scmd+=("$1"); shift; done
	shift
	port=$((port + 1))
	ip netns exec "$NS_A" nft reset counters table inet svcount >/dev/null 2>&1
	ns_sv "$NS_A" "$SOCK_A" env UCX_TLS="$t" UCX_NET_DEVICES=sv0:1 \
		UCX_SOCKADDR_TLS_PRIORITY=rdmacm timeout -k 2 90 \
		"$SV" run -- "${scmd[@]}" -p $port >"$sout" 2>&1 &
	spid=$!
	# io_demo listens on an rdma_cm id (no TCP socket): its own word
	if [ "${scmd[0]}" = io_demo ]; then
		for _ in $(seq 1 200); do
			grep -q 'started listener' "$sout" 2>/dev/null && break
			_ns_gone $spid && break
			sleep 0.1
		done
		grep -q 'started listener' "$sout" || fail "io_demo: the server does not listen"
	else
		ns_wait_listen "$NS_A" $port $spid 20 || fail "ucx_perftest: the server does not listen"
	fi
	ns_sv "$NS_B" "$SOCK_B" env UCX_TLS="$t" UCX_NET_DEVICES=sv0:1 \
		UCX_SOCKADDR_TLS_PRIORITY=rdmacm UCX_LOG_LEVEL=info \
		timeout -k 2 60 "$SV" run -- "$@" -p $port >"$cout" 2>&1
	crc=$?
	if [ "${scmd[0]}" = io_demo ]; then
		kill -TERM $spid 2>/dev/null   # it serves until stopped
		ns_wait_job $spid 10 || ns_end_job $spid
		src=0
	else
		ns_wait_job $spid 20 || ns_end_job $spid
		src=$wait_rc
	fi
}

start=$SECONDS
if [ "$what" = perftest ]; then
	set -- "ucp_put_bw 4096" "ucp_put_bw 65536" "ucp_get 4096" \
		"ucp_get 65536" "ucp_am_bw 4096" "ucp_am_bw 65536" \
		"tag_lat 8" "tag_lat 4096" "tag_bw 4096" "tag_bw 65536" \
		"ucp_add 8" "ucp_add 4" "tag_lat 8 -E sleep"
	for c in "$@"; do
		read -r t s more <<<"$c"
		# shellcheck disable=SC2086
		pair "$tls" ucx_perftest "${perf_p[@]}" -t "$t" -s "$s" -w 100 \
			-n 1000 $more -- ucx_perftest "${perf_p[@]}" "$IP_A" -t "$t" \
			-s "$s" -w 100 -n 1000 $more
		[ "$crc" = 0 ] && [ "$src" = 0 ] ||
			fail "ucx_perftest -t $c: client $(ns_why "$crc"), server $(ns_why "$src")"
		grep -q '^Final:' "$cout" || fail "ucx_perftest -t $c: no results"
		check_lanes "$cout" "$c"
		echo "$tl $c: $(grep '^Final:' "$cout" | tr -s ' '); $(ns_roce_count)"
		ns_roce_count | grep -q 'sent 0,' && fail "$c: no RoCEv2 packet crossed"
	done
	pass "$tl: $# ucx_perftest runs between two namespaces ($(( SECONDS - start )) s)"
else
	pair "$tl" io_demo -q -d 1024:65536 -- io_demo -q -d 1024:65536 \
		-i 1000 -o read,write "$IP_A"
	[ "$crc" = 0 ] && grep -q "Client exit with status 'OK'" "$cout" ||
		fail "io_demo: client $(ns_why "$crc")"
	check_lanes "$cout" "io_demo"
	ns_roce_count | grep -q 'sent 0,' && fail "io_demo: no RoCEv2 packet crossed"
	# the connection: the listener in a's log, REQ and REP on the wire
	grep -q "listens on .*:$port" "$NS_DIR/a/softverbsd.log" ||
		fail "a's daemon logged no rdma_cm listener on port $port"
	stat=$(ns_sv "$NS_B" "$SOCK_B" "$SV" stat)
	echo "$stat" | grep '^rdma_cm'
	echo "$stat" | grep -Eq '^rdma_cm:.* [1-9][0-9]* connects,' ||
		fail "b's daemon counted no rdma_cm connect"
	echo "$(grep -E '\[DEMO\] total ' "$cout" | tail -n 1); $(ns_roce_count)"
	pass "$tl: io_demo through UCX's rdmacm CM between two namespaces ($(( SECONDS - start )) s)"
fi
