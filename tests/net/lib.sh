# shellcheck shell=bash
# Two hosts on one machine: a pair of network namespaces joined by a veth,
# one softverbsd in each (--ip, a socket of its own), and the verbs programs
# run inside a namespace through 'softverbs run' against that namespace's
# daemon. Sourced by the tests/net scripts and bench/netns.sh, with the build
# folder in $SV_BUILD_DIR. Needs root (ip netns, veth, nft).
#
#   ns_pair_up PREFIX [MTU]    namespaces PREFIX-a, PREFIX-b, veth 'veth0' in
#                              each, 10.X.Y.1/24 in a, 10.X.Y.2/24 in b (X, Y
#                              from PREFIX), MTU 1500 unless given, lo up.
#                              Sets NS_A NS_B IP_A IP_B.
#   ns_daemon NS IP SOCK       softverbsd --ip IP --socket SOCK --idle-exit 30
#                              inside NS (IP empty: no --ip; say what to serve
#                              in NS_DAEMON_ARGS), its log beside SOCK; waits
#                              (bounded) until it answers. Sets NS_DAEMON_PID.
#   ns_sv NS SOCK CMD [ARGS]   CMD inside NS, its verbs on SOCK's daemon, never
#                              starting another one (SOFTVERBS_NO_AUTOSTART)
#   ns_drop_pct NS PCT         drop PCT % (random) of the UDP packets to port
#                              4791 that NS sends or receives (nftables);
#                              PCT 0 removes the rule
#   ns_log FILE [NAME]         print FILE if the test fails
#   ns_cleanup                 kill what we started, delete the namespaces and
#                              our folder; runs by itself on exit, Ctrl-C, TERM
# Debugging: NS_PCAP=DIR keeps a capture of the veth (from a's side) as
# DIR/PREFIX.pcap; NS_DAEMON_ARGS="--verbose" adds to the daemons' options;
# NS_STEP=SECONDS bounds one program run (20).
# Every step is bounded; on failure the daemons' logs and the programs'
# outputs are printed, then everything is torn down.
set -u

SV=$SV_BUILD_DIR/bin/softverbs
SVD=$SV_BUILD_DIR/bin/softverbsd
NS_STEP=${NS_STEP:-20}   # seconds for one program run across the pair

NS_LIST=()      # namespaces we created
NS_PIDS=()      # processes we started (daemons), killed by id on cleanup
NS_LOGS=()      # "file|name" printed on failure
NS_DIR=$(mktemp -d /tmp/softverbs-net-$$.XXXXXX) || exit 1
NS_A='' NS_B='' IP_A='' IP_B=''
_ns_done=0

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "PASS: $*"; }
skip() { echo "SKIP: $*"; exit 77; }

ns_log() { NS_LOGS+=("$1|${2:-$(basename "$1")}"); }

_ns_show_logs() {
	local e f n
	for e in "${NS_LOGS[@]}"; do
		f=${e%%|*} n=${e#*|}
		[ -f "$f" ] || continue
		echo "---- $n ($f) ----" >&2
		tail -n 80 "$f" >&2
	done
}

# a process that is gone or a zombie
_ns_gone() { # pid
	local st
	st=$(awk '{print $3}' /proc/"$1"/stat 2>/dev/null)
	[ -z "$st" ] || [ "$st" = Z ]
}

# Bounded wait for processes to be gone (TERM, then KILL after tries/2).
_ns_kill() { # pid...
	local p i left
	[ $# -gt 0 ] || return 0
	kill -TERM "$@" 2>/dev/null
	for i in $(seq 1 100); do
		left=0
		for p in "$@"; do _ns_gone "$p" || left=1; done
		[ $left = 0 ] && return 0
		[ "$i" = 40 ] && kill -KILL "$@" 2>/dev/null
		sleep 0.05
	done
	return 1
}

_ns_del() { # ns
	local pids
	ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1" || return 0
	# anything still inside is ours (nobody else knows the namespace)
	pids=$(ip netns pids "$1" 2>/dev/null)
	# shellcheck disable=SC2086
	[ -z "$pids" ] || _ns_kill $pids
	ip netns del "$1" 2>/dev/null
}

ns_cleanup() {
	local rc=${1:-0} n p bad=0
	[ $_ns_done = 1 ] && return 0
	_ns_done=1
	trap - INT TERM HUP
	[ "$rc" != 0 ] && _ns_show_logs
	# our background jobs (the programs), then the daemons, then whatever
	# is left inside our namespaces
	# shellcheck disable=SC2046
	_ns_kill $(jobs -p) "${NS_PIDS[@]}"
	for n in "${NS_LIST[@]}"; do _ns_del "$n"; done
	for n in "${NS_LIST[@]}"; do
		if ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$n"; then
			echo "ns_cleanup: namespace $n is still there" >&2
			bad=1
		fi
	done
	for p in "${NS_PIDS[@]}"; do
		_ns_gone "$p" || { echo "ns_cleanup: process $p is still running" >&2; bad=1; }
	done
	# a sanitized daemon reports into its log
	if grep -Eq 'ERROR: (Address|Leak)Sanitizer|runtime error:' \
		"$NS_DIR"/*/softverbsd.log 2>/dev/null; then
		echo "ns_cleanup: a daemon's sanitizer reported errors:" >&2
		grep -E -A 30 'ERROR: (Address|Leak)Sanitizer|runtime error:' \
			"$NS_DIR"/*/softverbsd.log | head -n 80 >&2
		bad=1
	fi
	rm -rf "$NS_DIR"
	[ $bad = 1 ] && [ "$rc" = 0 ] && rc=1
	return "$rc"
}
trap 'ns_cleanup $?; exit $?' EXIT
trap 'echo "interrupted" >&2; exit 130' INT
trap 'echo "terminated" >&2; exit 143' TERM HUP

[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
command -v ip >/dev/null || skip "no 'ip' (iproute2)"
{ [ -x "$SVD" ] && [ -x "$SV" ]; } || fail "no softverbs build in $SV_BUILD_DIR"

# A prefix unique to this test run: svn-TAG-PID (the PID lets a later run
# recognise namespaces a killed run left behind).
ns_prefix() { echo "svn-$1-$$"; }

# Namespaces svn-*-PID-[ab] (and folders /tmp/softverbs-net-PID.*) whose PID
# is gone: a run killed (SIGKILL) before its trap could clean up.
ns_reap_stale() {
	local n pid
	for n in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		[[ $n =~ ^svn-.*-([0-9]+)-[ab]$ ]] || continue
		pid=${BASH_REMATCH[1]}
		[ -d /proc/"$pid" ] && continue
		echo "removing namespace $n left by an earlier run (pid $pid)" >&2
		_ns_del "$n"
	done
	for n in /tmp/softverbs-net-*.*; do
		[[ $n =~ ^/tmp/softverbs-net-([0-9]+)\.[A-Za-z0-9]+$ ]] || continue
		[ -d /proc/"${BASH_REMATCH[1]}" ] || rm -rf "$n"
	done
}

ns_pair_up() { # prefix [mtu]
	local p=$1 mtu=${2:-1500} h x y n
	h=$(printf '%s' "$p" | cksum | awk '{print $1}')
	x=$(( (h >> 8) % 250 + 1 )) y=$(( h % 250 + 1 ))
	NS_A=$p-a NS_B=$p-b IP_A=10.$x.$y.1 IP_B=10.$x.$y.2
	ns_reap_stale
	for n in "$NS_A" "$NS_B"; do
		_ns_del "$n"   # same prefix: ours, stale
		ip netns add "$n" || fail "ip netns add $n"
		NS_LIST+=("$n")
		ip -n "$n" link set lo up || fail "lo up in $n"
	done
	# created in the namespaces directly: no name in the root namespace
	ip link add veth0 netns "$NS_A" mtu "$mtu" type veth \
		peer name veth0 netns "$NS_B" mtu "$mtu" || fail "veth pair for $p"
	ip -n "$NS_A" addr add "$IP_A"/24 dev veth0 || fail "address in $NS_A"
	ip -n "$NS_B" addr add "$IP_B"/24 dev veth0 || fail "address in $NS_B"
	ip -n "$NS_A" link set veth0 up || fail "veth0 up in $NS_A"
	ip -n "$NS_B" link set veth0 up || fail "veth0 up in $NS_B"
	# no IPv6 DAD or router noise on the link
	for n in "$NS_A" "$NS_B"; do
		ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null
	done
	# the link carries traffic both ways: a TCP connect to a closed port
	# is refused (ARP, SYN, RST), bounded (veth comes up at once)
	local err
	err=$(ip netns exec "$NS_B" timeout 10 bash -c \
		"exec 3<>/dev/tcp/$IP_A/9" 2>&1)
	[[ $err == *"Connection refused"* ]] ||
		fail "$NS_B does not reach $IP_A across the veth: $err"
	# count the RoCEv2 packets a sends and receives (before any drop rule)
	if command -v nft >/dev/null; then
		ip netns exec "$NS_A" nft -f - <<-EOF || fail "nft counters in $NS_A"
		table inet svcount {
			chain in { type filter hook input priority -10; udp dport 4791 counter; }
			chain out { type filter hook output priority -10; udp dport 4791 counter; }
		}
		EOF
	fi
	[ -n "${NS_PCAP:-}" ] && ns_capture "$NS_PCAP/$p.pcap"
	return 0
}

# Capture everything on a's veth0 into FILE until cleanup (dumpcap, from
# Wireshark: TERM flushes it).
ns_capture() { # file
	local i
	command -v dumpcap >/dev/null || { echo "NS_PCAP: no dumpcap" >&2; return 0; }
	mkdir -p "$(dirname "$1")" && rm -f "$1"
	ip netns exec "$NS_A" dumpcap -q -P -i veth0 -w "$1" </dev/null >/dev/null 2>&1 &
	NS_PIDS+=("$!")
	for i in $(seq 1 100); do [ -s "$1" ] && break; sleep 0.05; done
	echo "capturing $NS_A veth0 into $1" >&2
}

# CMD inside NS against SOCK's daemon; bounded by NS_STEP unless the caller
# wraps it in its own timeout.
ns_sv() { # ns sock cmd...
	local ns=$1 sock=$2
	shift 2
	ip netns exec "$ns" env SOFTVERBS_SOCKET="$sock" SOFTVERBS_NO_AUTOSTART=1 \
		SOFTVERBSD=/nonexistent/softverbsd "$@"
}

ns_daemon() { # ns ip sock
	local ns=$1 ip=$2 sock=$3 log i out
	mkdir -p "$(dirname "$sock")" || fail "mkdir for $sock"
	log=$(dirname "$sock")/softverbsd.log
	ns_log "$log" "softverbsd in $ns ($ip)"
	# 'ip netns exec' execs the daemon: $! is the daemon itself
	# shellcheck disable=SC2086
	ip netns exec "$ns" "$SVD" ${ip:+--ip "$ip"} --socket "$sock" --idle-exit 30 \
		${NS_DAEMON_ARGS:-} </dev/null >>"$log" 2>&1 &
	NS_DAEMON_PID=$!
	NS_PIDS+=("$NS_DAEMON_PID")
	out=$NS_DIR/devinfo.$NS_DAEMON_PID
	for i in $(seq 1 200); do
		_ns_gone "$NS_DAEMON_PID" && fail "softverbsd in $ns exited at start"
		if [ -S "$sock" ] &&
		   ns_sv "$ns" "$sock" timeout 5 "$SV" devinfo >"$out" 2>&1; then
			return 0
		fi
		sleep 0.05
	done
	cat "$out" >&2
	fail "softverbsd in $ns does not answer on $sock after 10 s"
}

# Both daemons of the pair: sockets $SOCK_A, $SOCK_B, pids $PID_A, $PID_B.
# shellcheck disable=SC2034
ns_daemons_up() {
	SOCK_A=$NS_DIR/a/control SOCK_B=$NS_DIR/b/control
	ns_daemon "$NS_A" "$IP_A" "$SOCK_A"
	PID_A=$NS_DAEMON_PID
	ns_daemon "$NS_B" "$IP_B" "$SOCK_B"
	PID_B=$NS_DAEMON_PID
}

# Is anything listening on TCP port $2 inside NS $1?
ns_listening() { # ns port
	local hex
	hex=$(printf '%04X' "$2")
	ip netns exec "$1" awk -v p=":$hex" \
		'$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 }
		 END { exit !f }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# Bounded wait until pid listens on port inside ns, or is gone.
ns_wait_listen() { # ns port pid [seconds]
	local i
	for i in $(seq 1 $(( ${4:-10} * 10 ))); do
		ns_listening "$1" "$2" && return 0
		_ns_gone "$3" && return 1
		sleep 0.1
	done
	return 1
}

# Bounded wait for a background job; its status in $wait_rc.
wait_rc=
ns_wait_job() { # pid seconds
	local i
	for i in $(seq 1 $(( $2 * 20 ))); do
		if ! kill -0 "$1" 2>/dev/null; then
			wait "$1"
			wait_rc=$?
			return 0
		fi
		sleep 0.05
	done
	return 1
}

# End a background "timeout ... CMD" job: TERM to timeout(1), which passes it
# on to CMD and KILLs CMD 2 s later (-k 2); never orphans CMD. Status in
# $wait_rc (143 or 137 when ended here).
ns_end_job() { # pid
	kill -TERM "$1" 2>/dev/null
	ns_wait_job "$1" 10 || { kill -KILL "$1" 2>/dev/null; wait "$1" 2>/dev/null; wait_rc=137; }
}

# "PROG server PORT" in a against SOCK_OF_A's daemon and "PROG client IP_A
# PORT EXTRA..." in b, each through softverbs run, the outputs in
# $NS_DIR/NAME-server.out and NAME-client.out ($sout, $cout, both printed).
# The server has 60 s, the client 50 s, and the server 30 s more once the
# client has ended. Sets crc and src (the exit statuses).
ns_server_client() { # name prog port sock_of_a [client args...]
	local name=$1 prog=$2 port=$3 sock=$4 spid
	shift 4
	sout=$NS_DIR/$name-server.out cout=$NS_DIR/$name-client.out
	ns_log "$sout" "${prog##*/} server ($name)"
	ns_log "$cout" "${prog##*/} client ($name)"
	ns_sv "$NS_A" "$sock" timeout -k 2 60 "$SV" run -- \
		"$prog" server "$port" >"$sout" 2>&1 &
	spid=$!
	NS_PIDS+=("$spid")
	ns_wait_listen "$NS_A" "$port" "$spid" 20 || fail "the server does not listen"
	ns_sv "$NS_B" "$SOCK_B" timeout -k 2 50 "$SV" run -- \
		"$prog" client "$IP_A" "$port" "$@" >"$cout" 2>&1
	crc=$?
	ns_wait_job "$spid" 30 || ns_end_job "$spid"
	src=$wait_rc
	cat "$sout" "$cout"
}

# Run "PROG ARGS" as the server in a and "PROG ARGS IP_A" as the client in b,
# each through softverbs run on its namespace's daemon, output line-buffered
# (what they printed survives their end). The client has NS_STEP seconds; the
# server NS_STEP + 5, and 5 s once the client has ended. Sets srv_rc cli_rc
# (124: timed out); the outputs are $NS_SOUT and $NS_COUT. Returns 0 when
# both exited 0, else 1 with what went wrong in $NS_WHY.
ns_run_pair() { # port prog args...
	ns_run_pair_in "$NS_A" "$SOCK_A" "$NS_B" "$SOCK_B" "$IP_A" "$@"
}

# ns_run_pair with the server in SRV_NS on SRV_SOCK's daemon and the client
# in CLI_NS on CLI_SOCK's, connecting to PEER_IP (both in one namespace:
# two processes on one host).
ns_run_pair_in() { # srv_ns srv_sock cli_ns cli_sock peer_ip port prog args...
	local sns=$1 ssock=$2 cns=$3 csock=$4 peer=$5 port=$6 srv cli
	shift 6
	NS_SOUT=$NS_DIR/server.out NS_COUT=$NS_DIR/client.out
	: >"$NS_SOUT"; : >"$NS_COUT"
	ns_log "$NS_SOUT" "server in $sns: $*"
	ns_log "$NS_COUT" "client in $cns: $* $peer"
	srv_rc='' cli_rc=''
	ip netns exec "$sns" nft reset counters table inet svcount >/dev/null 2>&1
	timeout -k 2 $(( NS_STEP + 5 )) ip netns exec "$sns" env \
		SOFTVERBS_SOCKET="$ssock" SOFTVERBS_NO_AUTOSTART=1 \
		"$SV" run -- stdbuf -oL -eL "$@" >"$NS_SOUT" 2>&1 &
	srv=$!
	if ! ns_wait_listen "$sns" "$port" "$srv" 10; then
		ns_end_job "$srv"
		srv_rc=$wait_rc cli_rc=''
		NS_WHY="the server never listened on port $port (server $(ns_why "$srv_rc"))"
		return 1
	fi
	timeout -k 2 "$NS_STEP" ip netns exec "$cns" env \
		SOFTVERBS_SOCKET="$csock" SOFTVERBS_NO_AUTOSTART=1 \
		"$SV" run -- stdbuf -oL -eL "$@" "$peer" >"$NS_COUT" 2>&1 &
	cli=$!
	ns_wait_job "$cli" $(( NS_STEP + 5 )) || ns_end_job "$cli"
	cli_rc=$wait_rc
	if ! ns_wait_job "$srv" 5; then
		ns_end_job "$srv"
		echo "(server still running 5 s after the client ended: stopped)" >>"$NS_SOUT"
		wait_rc=124
	fi
	srv_rc=$wait_rc
	NS_WHY="client $(ns_why "$cli_rc"), server $(ns_why "$srv_rc"); $(ns_roce_count)"
	[ "$cli_rc" = 0 ] && [ "$srv_rc" = 0 ] && return 0
	# today's daemons have no wire: a client whose peer QP has its own QPN
	# may complete against itself, and the server waits for nothing
	[ "$cli_rc" = 0 ] && NS_WHY="$NS_WHY (the client finished alone)"
	return 1
}

# A status from timeout(1) in words.
ns_why() { # rc
	case "$1" in
	0) echo "exit 0" ;;
	124|137|143) echo "timed out" ;;
	*) echo "exit $1" ;;
	esac
}

# nftables: drop PCT % of the RoCEv2 packets NS sends or receives (each packet
# between the pair crosses one of NS's hooks once). PCT 0: no rule.
ns_drop_pct() { # ns pct
	local ns=$1 pct=$2
	{ [[ $pct =~ ^[0-9]+$ ]] && [ "$pct" -le 100 ]; } || fail "ns_drop_pct: bad PCT '$pct'"
	command -v nft >/dev/null || fail "ns_drop_pct: no nft (nftables)"
	ip netns exec "$ns" nft delete table inet svdrop 2>/dev/null
	[ "$pct" = 0 ] && return 0
	# (nft takes no "< 100" of "mod 100": all is all)
	local sel="numgen random mod 100 < $pct"
	[ "$pct" = 100 ] && sel=""
	ip netns exec "$ns" nft -f - <<EOF || fail "ns_drop_pct: nft in $ns"
table inet svdrop {
	chain in {
		type filter hook input priority 0; policy accept;
		udp dport 4791 $sel counter drop
	}
	chain out {
		type filter hook output priority 0; policy accept;
		udp dport 4791 $sel counter drop
	}
}
EOF
}

# "a sent S, received R RoCEv2 packets" (UDP to 4791, a's nft counters).
ns_roce_count() {
	ip netns exec "$NS_A" nft list table inet svcount 2>/dev/null | awk '
		/chain in/ { c = "in" } /chain out/ { c = "out" }
		/counter packets/ { for (i = 1; i < NF; i++)
			if ($i == "packets") n[c] = $(i + 1) }
		END { printf "%s sent %d, received %d RoCEv2 packets (UDP 4791)",
			ns, n["out"], n["in"] }' ns="$NS_A"
}

# Packets ns_drop_pct's rules dropped in NS so far.
ns_dropped() { # ns
	ip netns exec "$1" nft list table inet svdrop 2>/dev/null |
		awk '/counter packets/ { for (i = 1; i < NF; i++)
			if ($i == "packets") s += $(i + 1) } END { print s + 0 }'
}
