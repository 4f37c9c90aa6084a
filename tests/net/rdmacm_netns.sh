#!/usr/bin/env bash
# rdma_cm across hosts (docs/DESIGN.md, "rdma_cm"): Debian's unmodified
# rdmacm-utils between two network namespaces, each with its own
# softverbsd; the connection manager's MADs go over the veth on QP1
# (RoCEv2), then the data on the connected QPs. The server runs in a on
# a's daemon, the client in b; both must exit 0 (and pass their own
# checks) within bounded time.
#   rdmacm_netns.sh BUILD_DIR CASE
#   CASE: rping ucmatose udaddy cmtime rdma_server rstream riostream
#         rping_v6 rping_loss refused timeout
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
	# cmtime's server never ends by itself: stopped once the client is done
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
	grep -Eq '^connect +:' "$cout" || fail "cmtime printed no connect step"
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
*)
	fail "unknown case '$case'"
	;;
esac
