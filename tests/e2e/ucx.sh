#!/usr/bin/env bash
# Debian's unmodified UCX (1.13; Debian 13's 1.18) on sv0, two processes
# on this host through 'softverbs run' (docs/DESIGN.md, "Middleware"):
#   ucx.sh TL TEST    ucx_perftest's UCP test TEST (ucp_put_bw ucp_get
#                     ucp_am_bw tag_lat tag_bw ucp_add) over transport TL
#                     (rc_verbs, ud_verbs) on sv0:1: server and client, the
#                     out-of-band exchange over TCP, 1000 iterations of each
#                     size the test takes
#   ucx.sh TL sleep   tag_lat and tag_bw with -E sleep: both sides sleep in
#                     ucp_worker_wait between messages (completion channels,
#                     ibv_req_notify_cq)
#   ucx.sh TL uct     the UCT tests of what TL advertises on sv0:1 (put
#                     short/bcopy/zcopy, get bcopy/zcopy, am short/bcopy/
#                     zcopy, 64-bit atomics), each layout explicitly
#   ucx.sh TL rdmacm  io_demo (ucx-utils), which connects by socket address:
#                     UCX's rdmacm connection manager on sv0's rdma_cm
#                     device, reads and writes with every byte checked (-q)
# Both processes must exit 0 within their bounds, the client must print its
# results, and UCX's transport selection (UCX_LOG_LEVEL=info, "ep_cfg";
# 1.18: "intra-node cfg#N") must show TL on sv0:1 carrying every lane: no
# tuning variable, only UCX_TLS naming the transport under test and
# UCX_NET_DEVICES=sv0:1.
# rc_verbs runs as UCX_TLS=rc_verbs,ud_verbs:aux: connecting RC endpoints
# by exchanged addresses needs an auxiliary transport for UCX's wire-up
# messages (UCX's own 'rc_v' alias is the same), on any verbs device;
# through the rdmacm CM rc_verbs runs alone.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/peers.sh"

tl=${1:-} what=${2:-}
case "$tl" in
rc_verbs) tls=rc_verbs,ud_verbs:aux ;;
ud_verbs) tls=ud_verbs ;;
*) fail "unknown transport '$tl' (rc_verbs, ud_verbs)" ;;
esac
command -v ucx_perftest >/dev/null || fail "ucx_perftest is not installed (ucx-utils)"
export UCX_NET_DEVICES=sv0:1 UCX_TLS=$tls
# nothing of the caller's UCX tuning
for v in $(env | sed -n 's/^\(UCX_[A-Z0-9_]*\)=.*/\1/p'); do
	case "$v" in UCX_NET_DEVICES|UCX_TLS) ;; *) unset "$v" ;; esac
done

# UCX 1.18's ucx_perftest is built with MPI: -P 0 runs it without (1.13
# has no -P); its server wants the test's parameters too (1.13's takes the
# client's and ignores its own)
perf_p=()
ucx_perftest -h 2>&1 | grep -q -- '-P <0|1>' && perf_p=(-P 0)

sout=$SV_TEST_DIR/server.out
cout=$SV_TEST_DIR/client.out
n=0

show() { echo "---- server"; cat "$sout"; echo "---- client"; cat "$cout"; }

# Wait (bounded) for the client, then its server; both must exit 0.
end_pair() { # cli_pid srv_pid what
	local crc src
	wait_job "$1" 70 || { kill -KILL "$1" "$2" 2>/dev/null; show; fail "$3: client still running after 70 s"; }
	crc=$wait_rc
	wait_job "$2" 20 || { kill -KILL "$2" 2>/dev/null; show; fail "$3: server still running 20 s after the client"; }
	src=$wait_rc
	[ "$crc" = 0 ] && [ "$src" = 0 ] || { show; fail "$3: client status $crc, server $src"; }
}

# Every lane of every endpoint configuration UCX printed in FILE is TL on
# sv0:1 ("ep_cfg[0]: tag(rc_verbs/sv0:1) rma(rc_verbs/sv0:1)"; 1.18:
# "intra-node cfg#0 tag(rc_verbs/sv0:1) ..."), and there is at least one.
check_lanes() { # file what
	local lanes bad
	lanes=$(grep -oE '(ep_cfg\[[0-9]*\]:|(intra|inter)-node cfg#[0-9]+) .*' "$1" |
		sed -E 's/^(ep_cfg\[[0-9]*\]:|(intra|inter)-node cfg#[0-9]+) //' |
		grep -o '([^)]*)' | tr -d '()' | sort -u)
	[ -n "$lanes" ] || { show; fail "$2: UCX printed no endpoint configuration"; }
	bad=$(echo "$lanes" | grep -v "^$tl/sv0:1\$")
	[ -z "$bad" ] || { show; fail "$2: lanes on $(echo "$bad" | tr '\n' ' ')(not $tl/sv0:1)"; }
}

# One ucx_perftest run: the server, then the client with ARGS; both bounded.
perf() { # args...
	local port srv cli
	port=$(free_port)
	n=$((n + 1))
	timeout -k 2 90 "$SV" run -- ucx_perftest "${perf_p[@]}" -p "$port" \
		-w 100 -n 1000 "$@" >"$sout" 2>&1 &
	srv=$!
	wait_listen "$port" $srv || { show; fail "ucx_perftest server never listened"; }
	UCX_LOG_LEVEL=info timeout -k 2 60 "$SV" run -- \
		ucx_perftest "${perf_p[@]}" 127.0.0.1 -p "$port" -w 100 -n 1000 \
		"$@" >"$cout" 2>&1 &
	cli=$!
	end_pair $cli $srv "ucx_perftest $*"
	grep -q '^Final:' "$cout" || { show; fail "ucx_perftest $*: no results"; }
	echo "$tl ucx_perftest $*: $(grep '^Final:' "$cout" | tr -s ' ')"
}

case "$what" in
ucp_put_bw|ucp_get|ucp_am_bw|tag_bw) sizes="4096 65536" ;;
tag_lat) sizes="8 4096" ;;
ucp_add) sizes="8 4" ;;
sleep|uct|rdmacm) sizes= ;;
*) fail "unknown case '$what'" ;;
esac

case "$what" in
sleep)
	perf -t tag_lat -s 8 -E sleep
	check_lanes "$cout" "tag_lat -E sleep"
	perf -t tag_bw -s 65536 -E sleep
	check_lanes "$cout" "tag_bw -E sleep"
	pass "$tl: tag_lat and tag_bw with -E sleep"
	;;
uct)
	# what ucx_info -d lists for TL on sv0:1, layout by layout
	if [ "$tl" = rc_verbs ]; then
		set -- "put_lat -D short -s 8" "put_bw -D short -s 64" \
			"put_bw -D bcopy -s 4096" "put_bw -D zcopy -s 65536" \
			"get -D bcopy -s 4096" "get -D zcopy -s 65536" \
			"am_lat -D short -s 8" "am_bw -D bcopy -s 4096" \
			"am_bw -D zcopy -s 4096" "add_lat -s 8" "add_mr -s 8" \
			"fadd -s 8" "cswap -s 8"
	else
		set -- "am_lat -D short -s 8" "am_bw -D short -s 64" \
			"am_bw -D bcopy -s 1000" "am_bw -D zcopy -s 1000"
	fi
	for t in "$@"; do
		# shellcheck disable=SC2086
		perf -x "$tl" -d sv0:1 -t $t
	done
	pass "$tl: $n UCT tests on sv0:1"
	;;
rdmacm)
	command -v io_demo >/dev/null || fail "io_demo is not installed (ucx-utils)"
	export UCX_TLS=$tl UCX_SOCKADDR_TLS_PRIORITY=rdmacm
	port=$(free_port)
	timeout -k 2 90 "$SV" run -- io_demo -p "$port" -q -d 1024:65536 >"$sout" 2>&1 &
	srv=$!
	# its listener is an rdma_cm id (no TCP socket): its own word for it
	wait_for_line "$sout" 'started listener' 800 || { show; fail "io_demo server never listened"; }
	UCX_LOG_LEVEL=info timeout -k 2 60 "$SV" run -- io_demo -p "$port" -q \
		-d 1024:65536 -i 1000 -o read,write -c 1 127.0.0.1 >"$cout" 2>&1 &
	cli=$!
	if ! wait_job $cli 70; then
		show
		fail "io_demo client still running after 70 s"
	fi
	crc=$wait_rc
	stat=$("$SV" stat)
	kill -TERM $srv 2>/dev/null
	wait_job $srv 10 || kill -KILL $srv 2>/dev/null
	[ "$crc" = 0 ] && grep -q "Client exit with status 'OK'" "$cout" ||
		{ show; fail "io_demo client: status $crc"; }
	check_lanes "$cout" "io_demo"
	# the connection went through the rdma_cm device
	echo "$stat" | grep '^rdma_cm:'
	echo "$stat" | grep -Eq '^rdma_cm:.* [1-9][0-9]* connects, [1-9][0-9]* accepts, [1-9][0-9]* established' ||
		{ echo "$stat"; fail "no rdma_cm connection counted"; }
	grep -E '\[DEMO\] total ' "$cout" | tail -n 1
	pass "$tl: io_demo through UCX's rdmacm CM, 1000 checked reads and writes"
	;;
*)
	for s in $sizes; do
		perf -t "$what" -s "$s"
		check_lanes "$cout" "$what -s $s"
	done
	pass "$tl: ucx_perftest $what ($sizes bytes)"
	;;
esac
