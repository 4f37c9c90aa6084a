#!/usr/bin/env bash
# Several daemons on one host (docs/DESIGN.md, "rdma_cm", Addresses): two
# softverbsd in one namespace, serving 127.0.0.2 and 127.0.0.3 (--ip); a
# server on the first and a client on the second connect by those
# addresses: the CM's MADs and the data go over lo between the daemons.
#   rdmacm_daemons.sh BUILD_DIR
export SV_BUILD_DIR=$1
. "$(dirname "$0")/lib.sh"
command -v rping >/dev/null || fail "rdmacm-utils is not installed"

ns_pair_up "$(ns_prefix cmdaemons)"
ip -n "$NS_A" addr add 127.0.0.2/8 dev lo || fail "127.0.0.2 on lo"
ip -n "$NS_A" addr add 127.0.0.3/8 dev lo || fail "127.0.0.3 on lo"
SOCK_A=$NS_DIR/a/control SOCK_C=$NS_DIR/c/control
ns_daemon "$NS_A" 127.0.0.2 "$SOCK_A"
ns_daemon "$NS_A" 127.0.0.3 "$SOCK_C"
sout=$NS_DIR/server.out cout=$NS_DIR/client.out
ns_log "$sout" "rping server (127.0.0.2)"; ns_log "$cout" "rping client (127.0.0.3)"
ns_sv "$NS_A" "$SOCK_A" timeout -k 2 40 "$SV" run -- rping -s -a 127.0.0.2 -p 7471 \
	-C 100 -v -V >"$sout" 2>&1 &
spid=$!
NS_PIDS+=("$spid")
for _ in $(seq 1 200); do
	grep -q "listens on .*:7471, " "$NS_DIR/a/softverbsd.log" && break
	sleep 0.05
done
ns_sv "$NS_A" "$SOCK_C" timeout -k 2 30 "$SV" run -- rping -c -a 127.0.0.2 -p 7471 \
	-C 100 -v -V >"$cout" 2>&1
crc=$?
ns_wait_job "$spid" 10 || ns_end_job "$spid"
[ $crc = 0 ] && [ "$wait_rc" = 0 ] ||
	fail "rping between two daemons: client $(ns_why $crc), server $(ns_why "$wait_rc")"
[ "$(grep -c '^ping data: rdma-ping-' "$cout")" = 100 ] || fail "not 100 pings"
# the connection went between the daemons: each counted CM MADs
for s in "$SOCK_A" "$SOCK_C"; do
	read -r sent rcvd <<<"$(ns_sv "$NS_A" "$s" "$SV" stat |
		awk '/^rdma_cm MADs:/ { print $3, $5 }')"
	[ "${sent:-0}" -ge 2 ] && [ "${rcvd:-0}" -ge 2 ] ||
		fail "the daemon of $s sent $sent and received $rcvd CM MADs"
done
pass "rping -C 100 -v -V between two daemons of one host (127.0.0.3 -> 127.0.0.2)"
