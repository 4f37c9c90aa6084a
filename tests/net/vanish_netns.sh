#!/usr/bin/env bash
# A peer that vanishes mid-transfer: RC traffic between two hosts
# (tests/net/sv_stress.c), then host a's daemon is killed (SIGKILL: nothing
# answers for a's QPs any more). The client on b must end with the transport
# retry-exceeded error after its retries (retry_cnt 7, timeout 16 ms), not
# hang.
#   vanish_netns.sh BUILD_DIR
export SV_BUILD_DIR=$1
. "$(dirname "$0")/lib.sh"

STRESS=$SV_BUILD_DIR/bin/sv_stress
[ -x "$STRESS" ] || fail "$STRESS missing (build first)"
ns_pair_up "$(ns_prefix vanish)"
ns_daemons_up
port=18601
export SV_STRESS_TIMEOUT=12
sout=$NS_DIR/vanish-server.out cout=$NS_DIR/vanish-client.out
ns_log "$sout" "sv_stress server"
ns_log "$cout" "sv_stress client"
ns_sv "$NS_A" "$SOCK_A" env SV_STRESS_TIMEOUT=12 timeout -k 2 120 "$SV" run -- \
	"$STRESS" server $port >"$sout" 2>&1 &
spid=$!
NS_PIDS+=("$spid")
ns_wait_listen "$NS_A" $port "$spid" 20 || fail "the server does not listen"
# far more than it can send before the kill
ns_sv "$NS_B" "$SOCK_B" env SV_STRESS_TIMEOUT=12 timeout -k 2 120 "$SV" run -- \
	"$STRESS" client "$IP_A" $port $((1 << 40)) >"$cout" 2>&1 &
cpid=$!
NS_PIDS+=("$cpid")
# the transfer is under way once b has sent packets (bounded wait)
moving=0
for _ in $(seq 1 200); do
	n=$(ns_sv "$NS_B" "$SOCK_B" timeout 5 "$SV" stat 2>/dev/null |
	    awk '/^roce packets:/ { print $3 }')
	if [ -n "$n" ] && [ "$n" -gt 2000 ]; then moving=1; break; fi
	_ns_gone "$cpid" && break
	sleep 0.1
done
[ $moving = 1 ] || fail "the transfer did not start"
echo "b sent $n packets; killing a's daemon ($PID_A)"
kill -KILL "$PID_A"
ns_wait_job "$cpid" 60 || fail "the client still waits 60 s after its peer vanished: hung"
crc=$wait_rc
cat "$cout"
ns_sv "$NS_B" "$SOCK_B" timeout 5 "$SV" stat 2>&1 | grep '^roce' || true
[ "$crc" -ne 0 ] || fail "the client succeeded against a vanished peer"
grep -q "retry counter exceeded" "$cout" ||
	fail "the client did not end with the retry-exceeded error"
pass "a vanished peer: the client's WQE completed with retry exceeded"
