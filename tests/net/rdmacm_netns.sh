#!/usr/bin/env bash
# rdma_cm across hosts (docs/DESIGN.md, "rdma_cm"): Debian's unmodified
# rdmacm-utils between two network namespaces, each with its own
# softverbsd; the connection manager's MADs go over the veth on QP1
# (RoCEv2), then the data on the connected QPs. The server runs in a on
# a's daemon, the client in b; both must exit 0 (and pass their own
# checks) within bounded time.
#   rdmacm_netns.sh BUILD_DIR CASE
#   CASE: rping ucmatose udaddy cmtime rdma_server rstream riostream
#         rping_v6 rping_loss refused timeout rcopy rdma_xserver_rc
#         rdma_xserver_xrc fi_pingpong_msg fi_pingpong_rdm peer_dies
#         server_dies ib_send_lat ib_write_bw ib_read_bw
export SV_BUILD_DIR=$1
case=${2:-}
. "$(dirname "$0")/lib.sh"

command -v rping >/dev/null || fail "rdmacm-utils is not installed"
NS_STEP=${NS_STEP:-60}
port=7471

# Start the server in a (through softverbs run), wait (bounded) until its
# id listens (a's daemon logs it), run the client in b against $dst.
cm_pair() { # "server cmd" "client cmd" [listening port]
	local lport=${3:-$port} srv cli i
	sout=$NS_DIR/server.out cout=$NS_DIR/client.out
	: >"$sout"; : >"$cout"
	ns_log "$sout" "server in $NS_A: $1"
	ns_log "$cout" "client in $NS_B: $2"
	# shellcheck disable=SC2086
	ns_sv "$NS_A" "$SOCK_A" timeout -k 2 $(( NS_STEP + 5 )) "$SV" run -- \
		stdbuf -oL -eL $1 >"$sout" 2>&1 &
	srv=$!
	NS_PIDS+=("$srv")
	for i in $(seq 1 200); do
		grep -q "listens on .*:$lport, " "$NS_DIR/a/softverbsd.log" && break
		_ns_gone "$srv" && break
		sleep 0.05
	done
	# shellcheck disable=SC2086
	ns_sv "$NS_B" "$SOCK_B" timeout -k 2 "$NS_STEP" "$SV" run -- \
		stdbuf -oL -eL $2 >"$cout" 2>&1 &
	cli=$!
	NS_PIDS+=("$cli")
	ns_wait_job "$cli" $(( NS_STEP + 5 )) || ns_end_job "$cli"
	cli_rc=$wait_rc
	ns_wait_job "$srv" 10 || ns_end_job "$srv"
	srv_rc=$wait_rc
}

# CMD inside NS on SOCK's daemon, in the background, its output in OUT,
# bounded by SECONDS: a simple command, so $! is timeout(1) itself (ip netns
# exec and env exec it), which passes a TERM on (ns_end_job) and KILLs 2 s
# later.
ns_bg() { # ns sock seconds out cmd...
	local ns=$1 sock=$2 secs=$3 out=$4
	shift 4
	ip netns exec "$ns" env SOFTVERBS_SOCKET="$sock" SOFTVERBS_NO_AUTOSTART=1 \
		SOFTVERBSD=/nonexistent/softverbsd timeout -k 2 "$secs" "$@" \
		>"$out" 2>&1 &
}

# A server that does not end by itself (or that a case ends): start it in a
# (bounded by $2 seconds), wait (bounded) until a's daemon logs its id
# listening on the port. Sets srv (timeout(1)'s pid) and sout. Returns 1
# when it never listened.
cm_server() { # "server cmd" seconds [listening port]
	local lport=${3:-$port} i
	sout=$NS_DIR/server.out
	ns_log "$sout" "server in $NS_A: $1"
	# shellcheck disable=SC2086
	ns_bg "$NS_A" "$SOCK_A" "$2" "$sout" "$SV" run -- stdbuf -oL -eL $1
	srv=$!
	NS_PIDS+=("$srv")
	for i in $(seq 1 200); do
		grep -q "listens on .*:$lport, " "$NS_DIR/a/softverbsd.log" && return 0
		_ns_gone "$srv" && return 1
		sleep 0.05
	done
	return 1
}

# The client in b, in the background (bounded by $2 seconds). Sets cli
# (timeout(1)'s pid) and cout.
cm_client() { # "client cmd" seconds
	cout=$NS_DIR/client.out
	ns_log "$cout" "client in $NS_B: $1"
	# shellcheck disable=SC2086
	ns_bg "$NS_B" "$SOCK_B" "$2" "$cout" "$SV" run -- stdbuf -oL -eL $1
	cli=$!
	NS_PIDS+=("$cli")
}

# The process named NAME under a background job (softverbs run and stdbuf
# exec the program under timeout(1)), found bounded.
job_prog() { # job pid name
	local i p q kids
	for i in $(seq 1 100); do
		kids=$1
		while [ -n "$kids" ]; do
			q=''
			for p in $kids; do
				[ "$(cat /proc/"$p"/comm 2>/dev/null)" = "$2" ] &&
					{ echo "$p"; return 0; }
				q="$q $(pgrep -P "$p" | tr '\n' ' ')"
			done
			kids=${q//[[:space:]]/}
			[ -z "$kids" ] || kids=$q
		done
		sleep 0.05
	done
	return 1
}

# Bounded wait until FILE has a line matching the regex.
wait_line() { # file regex tenths
	local i
	for i in $(seq 1 "${3:-200}"); do
		grep -Eq "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# Both ended 0, or fail with the reason.
cm_ok() { # what
	[ "$cli_rc" = 0 ] && [ "$srv_rc" = 0 ] && return 0
	fail "$1: client $(ns_why "$cli_rc"), server $(ns_why "$srv_rc")"
}

# The CM counters of a daemon: "sent received retried timedout dropped".
cm_mads() { # sock ns
	ns_sv "$2" "$1" "$SV" stat |
		awk '/^rdma_cm MADs:/ { print $3, $5, $7, $9, $12 }'
}

v6=0 args=()
case "$case" in
rping_v6) v6=1 ;;
timeout) NS_DAEMON_ARGS="--cm-timeout 14 --cm-retries 2" ;;
rping_loss) NS_DAEMON_ARGS="--cm-timeout 14" ;;
esac

ns_pair_up "$(ns_prefix "cm$case")"
if [ $v6 = 1 ]; then
	# IPv6 on the veth (lib.sh turns it off; no DAD: usable at once); the
	# daemons serve it (--ip)
	for n in "$NS_A" "$NS_B"; do
		ip netns exec "$n" sysctl -qw net.ipv6.conf.veth0.accept_dad=0 \
			net.ipv6.conf.all.disable_ipv6=0 \
			net.ipv6.conf.veth0.disable_ipv6=0 || fail "IPv6 on in $n"
	done
	ip -n "$NS_A" addr add fd00:5e::1/64 dev veth0 nodad || fail "IPv6 in a"
	ip -n "$NS_B" addr add fd00:5e::2/64 dev veth0 nodad || fail "IPv6 in b"
	IP_A=fd00:5e::1 IP_B=fd00:5e::2
fi
ns_daemons_up
start=$SECONDS

case "$case" in
rping|rping_v6)
	n=1000
	[ $v6 = 1 ] && n=200
	cm_pair "rping -s -a $IP_A -p $port -C $n -v -V" \
		"rping -c -a $IP_A -p $port -C $n -v -V"
	cm_ok "rping"
	c=$(grep -c '^ping data: rdma-ping-' "$cout")
	s=$(grep -c '^server ping data: rdma-ping-' "$sout")
	[ "$c" = $n ] && [ "$s" = $n ] ||
		fail "rping: the client printed $c pings, the server $s, not $n"
	read -r sent rcvd _ _ drop <<<"$(cm_mads "$SOCK_B" "$NS_B")"
	echo "b's CM MADs: $sent sent, $rcvd received, $drop dropped"
	[ "${sent:-0}" -ge 3 ] && [ "${rcvd:-0}" -ge 1 ] ||
		fail "b's daemon counted no CM MADs: the connection did not cross the wire"
	pass "rping -C $n -v -V between namespaces ($IP_B -> $IP_A), data verified"
	;;
rping_loss)
	# every other CM MAD that b sends, and every other one it receives,
	# is lost (nft, matching UDP to 4791 whose BTH names QP 1): the REQ,
	# the REP and the DREQ are sent again (--cm-timeout 14: about 0.6 s),
	# a lost RTU is sent again when the REP comes again
	ip netns exec "$NS_B" nft -f - <<-NFT || fail "nft in $NS_B"
	table inet svcmdrop {
		chain in {
			type filter hook input priority 0; policy accept;
			udp dport 4791 @th,104,24 1 numgen inc mod 2 0 counter drop
		}
		chain out {
			type filter hook output priority 0; policy accept;
			udp dport 4791 @th,104,24 1 numgen inc mod 2 0 counter drop
		}
	}
	NFT
	cm_pair "rping -s -a $IP_A -p $port -C 20 -v -V" \
		"rping -c -a $IP_A -p $port -C 20 -v -V"
	cm_ok "rping with CM MADs lost"
	[ "$(grep -c '^ping data: rdma-ping-' "$cout")" = 20 ] ||
		fail "rping with CM MADs lost: not 20 pings"
	ip netns exec "$NS_B" nft list table inet svcmdrop | grep counter
	read -r _ _ ra _ _ <<<"$(cm_mads "$SOCK_A" "$NS_A")"
	read -r _ _ rb _ _ <<<"$(cm_mads "$SOCK_B" "$NS_B")"
	echo "CM retries: a $ra, b $rb"
	[ "${ra:-0}" -ge 1 ] && [ "${rb:-0}" -ge 2 ] ||
		fail "expected the REP (a) and the REQ and DREQ (b) sent again"
	pass "rping -C 20 with every other CM MAD lost each way: retried"
	;;
ucmatose)
	cm_pair "ucmatose -p $port -c 10 -C 20" \
		"ucmatose -s $IP_A -p $port -c 10 -C 20"
	cm_ok "ucmatose"
	grep -q 'test complete' "$sout" && grep -q 'test complete' "$cout" ||
		fail "ucmatose did not complete"
	pass "ucmatose: 10 connections across namespaces, 20 messages each way"
	;;
udaddy)
	cm_pair "udaddy" "udaddy -s $IP_A" 7174
	cm_ok "udaddy"
	grep -q 'test complete' "$cout" || fail "udaddy did not complete"
	pass "udaddy: UD ids by SIDR across namespaces, datagrams both ways"
	;;
rdma_server)
	cm_pair "rdma_server -p $port" "rdma_client -s $IP_A -p $port"
	cm_ok "rdma_server/rdma_client"
	grep -q 'rdma_client: end 0' "$cout" || fail "rdma_client did not end 0"
	pass "rdma_server / rdma_client across namespaces"
	;;
rstream|riostream)
	cm_pair "$case -T b -T v -S 65536 -C 1000 -p $port" \
		"$case -T b -T v -S 65536 -C 1000 -s $IP_A -p $port"
	cm_ok "$case"
	grep -Eq '^custom +64k +1k ' "$cout" || fail "$case printed no result"
	pass "$case: rsockets across namespaces, 1000 x 64 KiB verified"
	;;
cmtime)
	# rdma-core 44's cmtime server never ends by itself: stopped once the
	# client is done (56's leaves after one client run of -c connections)
	sout=$NS_DIR/server.out cout=$NS_DIR/client.out
	ns_log "$sout" "cmtime server"; ns_log "$cout" "cmtime client"
	ns_sv "$NS_A" "$SOCK_A" timeout -k 2 120 "$SV" run -- \
		cmtime -b "$IP_A" -p "$port" -c 1000 >"$sout" 2>&1 &
	srv=$!
	NS_PIDS+=("$srv")
	for i in $(seq 1 200); do
		grep -q "listens on .*:$port, " "$NS_DIR/a/softverbsd.log" && break
		sleep 0.05
	done
	ns_sv "$NS_B" "$SOCK_B" timeout -k 2 110 "$SV" run -- \
		cmtime -s "$IP_A" -p "$port" -c 1000 >"$cout" 2>&1
	crc=$?
	ns_end_job "$srv"
	cat "$cout"
	[ $crc = 0 ] || fail "cmtime client: $(ns_why $crc)"
	# its connect row: 44's "connect :", 56's "cm connect"
	grep -Eq '^(connect +:|cm connect +[0-9])' "$cout" ||
		fail "cmtime printed no connect step"
	pass "cmtime: 1000 connections across namespaces set up and torn down"
	;;
refused)
	# nobody listens on the port: the server's CM answers the REQ with a
	# REJ, reason 8 (invalid service ID), as the kernel's does
	cm_pair "true" "rping -c -a $IP_A -p 7999 -C 1 -v" 7999
	grep -q 'RDMA_CM_EVENT_REJECTED, error 8$' "$cout" ||
		{ cat "$cout"; fail "rping was not told REJECTED"; }
	[ "$cli_rc" != 0 ] || fail "rping to a port nobody listens on exited 0"
	pass "a REQ for no listener across namespaces: REJECTED"
	;;
timeout)
	# a's side drops every packet: b's REQ goes unanswered and, after its
	# retries (4.096 us << 14, 2 retries here), the client is told
	# UNREACHABLE, -ETIMEDOUT
	ns_drop_pct "$NS_A" 100
	cm_pair "true" "rping -c -a $IP_A -p 7998 -C 1 -v" 7998
	ns_drop_pct "$NS_A" 0
	[ "$cli_rc" != 0 ] || fail "rping to a silent host exited 0"
	grep -q 'RDMA_CM_EVENT_UNREACHABLE, error -110$' "$cout" ||
		{ cat "$cout"; fail "rping was not told UNREACHABLE/ETIMEDOUT"; }
	read -r sent _ retried timedout _ <<<"$(cm_mads "$SOCK_B" "$NS_B")"
	[ "${retried:-0}" = 2 ] && [ "${timedout:-0}" = 1 ] ||
		fail "b's CM counted $retried retries and $timedout timeouts, not 2 and 1"
	pass "an unanswered REQ: 2 retries, then UNREACHABLE (ETIMEDOUT)"
	;;
rcopy)
	# rsockets streams: a 100 MiB file from b to a path on a (the server
	# writes it); rcopy's server never ends: stopped once it closed the file
	src=$NS_DIR/rcopy.src dst=$NS_DIR/rcopy.dst
	head -c $((100 << 20)) /dev/urandom >"$src" || fail "no source file"
	cm_server "rcopy -p $port" $(( NS_STEP + 30 )) || fail "rcopy's server never listened"
	cm_client "rcopy $src $IP_A:$dst -p $port" "$NS_STEP"
	ns_wait_job "$cli" $(( NS_STEP + 5 )) || ns_end_job "$cli"
	cli_rc=$wait_rc
	wait_line "$sout" 'closing\.\.\.done' 100 || echo "rcopy's server never printed 'closing...done'"
	ns_end_job "$srv"
	cat "$cout"
	[ "$cli_rc" = 0 ] || fail "rcopy's client: $(ns_why "$cli_rc")"
	grep -q '^104857600 bytes in ' "$cout" || fail "rcopy printed no result"
	cmp "$src" "$dst" || fail "the copy differs"
	rm -f "$src" "$dst"
	pass "rcopy: 100 MiB from $NS_B to $NS_A, identical"
	;;
rdma_xserver_rc|rdma_xserver_xrc)
	# rdma_create_ep and rdma_get_request; -c x: XRC (the client's
	# XRC_SEND initiator, the server's XRC_RECV target, its XRC SRQ number
	# in the REP's private data)
	t=r
	[ "$case" = rdma_xserver_xrc ] && t=x
	cm_pair "rdma_xserver -p $port -c $t" \
		"rdma_xclient -s $IP_A -p $port -c $t"
	cm_ok "rdma_xserver/rdma_xclient -c $t"
	grep -q 'rdma_xclient: end 0' "$cout" || fail "rdma_xclient did not end 0"
	grep -q 'rdma_xserver: end 0' "$sout" || fail "rdma_xserver did not end 0"
	pass "rdma_xserver / rdma_xclient -c $t across namespaces"
	;;
fi_pingpong_msg|fi_pingpong_rdm)
	# libfabric's verbs provider (msg endpoints are rdma_cm ids; rdm ones
	# through ofi_rxm on top): a TCP control port for the names, every
	# size, -c checks every buffer; SOFTVERBS_DEBUG: a QP destroyed with
	# completions never polled says so in the output
	command -v fi_pingpong >/dev/null || fail "libfabric-bin is not installed"
	export SOFTVERBS_DEBUG=1
	if [ "$case" = fi_pingpong_msg ]; then
		prov=verbs ep=msg
	else
		prov='verbs;ofi_rxm' ep=rdm
	fi
	# The server names no address: the verbs provider binds "localhost"
	# and, the id having a device (sv0 serves 127.0.0.1, the same-host
	# path), sends that address as its passive endpoint's name, which b
	# cannot reach. So in the server's own mount namespace (ip netns exec
	# makes one) "localhost" is a's address, nothing else changed.
	printf '%s localhost\n' "$IP_A" >"$NS_DIR/hosts.a"
	sout=$NS_DIR/server.out cout=$NS_DIR/client.out
	ns_log "$sout" "fi_pingpong server in $NS_A"
	ns_log "$cout" "fi_pingpong client in $NS_B"
	# shellcheck disable=SC2016
	ns_bg "$NS_A" "$SOCK_A" $(( NS_STEP + 5 )) "$sout" \
		sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$NS_DIR/hosts.a" \
		"$SV" run -- fi_pingpong -p "$prov" -e $ep -c -I 50 -B $port
	srv=$!
	NS_PIDS+=("$srv")
	ns_wait_listen "$NS_A" $port "$srv" 20 || fail "fi_pingpong's server has no control port"
	ns_bg "$NS_B" "$SOCK_B" "$NS_STEP" "$cout" \
		"$SV" run -- fi_pingpong -p "$prov" -e $ep -c -I 50 -P $port "$IP_A"
	cli=$!
	NS_PIDS+=("$cli")
	ns_wait_job "$cli" $(( NS_STEP + 5 )) || ns_end_job "$cli"
	cli_rc=$wait_rc
	ns_wait_job "$srv" 10 || ns_end_job "$srv"
	srv_rc=$wait_rc
	cat "$cout"
	cm_ok "fi_pingpong -p '$prov' -e $ep"
	for f in "$sout" "$cout"; do
		grep -Eq '^1m +50 +=50 ' "$f" || fail "no 1m result in $(basename "$f")"
	done
	pass "fi_pingpong -p '$prov' -e $ep across namespaces: every size, data checked"
	;;
ib_write_bw|ib_send_lat|ib_read_bw)
	# perftest -R: the hand-shake and the test's QPs through rdma_cm. The
	# server listens a second time, for the test's QPs, only once the
	# hand-shake's connection is up, and the client connects for them at
	# once; a REQ that comes first is held for its listener (docs/DESIGN.md
	# "perftest's -R races its own listener").
	command -v "$case" >/dev/null || fail "perftest is not installed"
	cm_pair "$case -R -p $port -n 1000" "$case -R -p $port -n 1000 $IP_A"
	rej=$(grep -c "REQ for $IP_A:$port refused" "$NS_DIR/a/softverbsd.log")
	echo "the client's REQs that came before the listener: $rej"
	cm_ok "$case -R"
	case $case in
	ib_send_lat) res='^ 2 +1000 ' ;;
	*) res='^ 65536 +1000 ' ;;
	esac
	grep -Eq "$res" "$cout" || fail "$case printed no result"
	grep -Eq "$res" "$sout" || fail "$case's server printed no result"
	pass "perftest $case -R across namespaces"
	;;
peer_dies|server_dies)
	# rping connected across, pinging without end (-C 0); after 20 pings
	# one end's process is killed (SIGKILL): its daemon closes the file and
	# destroys the id as DESTROY_ID would, sending a DREQ (again until
	# answered) to the other end, which must get DISCONNECTED and end
	# within bounded time (rping: "DISCONNECT EVENT", then it exits)
	cm_server "rping -s -a $IP_A -p $port -C 0" $(( NS_STEP + 30 )) ||
		fail "rping's server never listened"
	cm_client "rping -c -a $IP_A -p $port -C 0 -v" $(( NS_STEP + 30 ))
	wait_line "$cout" '^ping data: rdma-ping-19:' 200 ||
		fail "rping did not get 20 pings across"
	read -r _ rcvd_a0 _ _ _ <<<"$(cm_mads "$SOCK_A" "$NS_A")"
	read -r _ rcvd_b0 _ _ _ <<<"$(cm_mads "$SOCK_B" "$NS_B")"
	if [ "$case" = peer_dies ]; then
		victim=$cli victim_ns=$NS_B other=$srv other_out=$sout other_name=server
	else
		victim=$srv victim_ns=$NS_A other=$cli other_out=$cout other_name=client
	fi
	prog=$(job_prog "$victim" rping) || fail "no rping under the job $victim"
	kill -KILL "$prog"
	t0=$(date +%s%N)
	ns_wait_job "$victim" 10 || fail "the killed rping in $victim_ns is not gone"
	# the other end: DISCONNECTED and its end within 10 s
	if ns_wait_job "$other" 10; then
		other_rc=$wait_rc
	else
		ns_end_job "$other"
		fail "the $other_name still runs 10 s after its peer was killed"
	fi
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	tail -n 5 "$other_out"
	grep -q "$other_name DISCONNECT EVENT" "$other_out" ||
		fail "the $other_name was not told DISCONNECTED"
	# a dying process's QPs answer nothing, as a vanished host's: no
	# remote access or operation error NAK (rping prints the status)
	! grep -Eq 'cq completion failed status (9|10|11)$' "$other_out" ||
		fail "the $other_name got a NAK from the dying process's QP"
	read -r _ rcvd_a _ _ _ <<<"$(cm_mads "$SOCK_A" "$NS_A")"
	read -r _ rcvd_b _ _ _ <<<"$(cm_mads "$SOCK_B" "$NS_B")"
	echo "CM MADs received since the kill: a $((rcvd_a - rcvd_a0)), b $((rcvd_b - rcvd_b0))"
	if [ "$case" = peer_dies ]; then
		[ $((rcvd_a - rcvd_a0)) -ge 1 ] || fail "a's daemon received no DREQ"
	else
		[ $((rcvd_b - rcvd_b0)) -ge 1 ] || fail "b's daemon received no DREQ"
	fi
	pass "$case: the rping in $victim_ns killed, the $other_name told DISCONNECTED and ended ($(ns_why "$other_rc")) after $ms ms"
	;;
*)
	fail "unknown case '$case'"
	;;
esac
