#!/usr/bin/env bash
# UD multicast across two hosts: tests/e2e/test_mcast's sender in namespace
# a, with NLOCAL receiver processes beside it (a's daemon fans each message
# out locally) and NREMOTE receiver processes in namespace b (b's daemon
# takes the group's datagrams from the veth and fans them out). Every
# receiver gets each of the 401 numbered messages exactly once (windows
# acknowledged over TCP: pacing, not sleeps); the sender's QP created with
# IBV_QP_CREATE_BLOCK_SELF_MCAST_LB none of its own. a's nftables counters
# show one datagram per message on the wire (not one per receiver, and no
# copy looped back into a's daemon), and nothing coming back.
#   mcast_netns.sh BUILD_DIR
export SV_BUILD_DIR=$1
. "$(dirname "$0")/lib.sh"

PROG=$SV_BUILD_DIR/bin/test_mcast
[ -x "$PROG" ] || fail "no $PROG"
NLOCAL=2 NREMOTE=2 PORT=18515 GROUP=239.1.2.3 NMSG=401

ns_pair_up "$(ns_prefix mcast)"
ns_daemons_up
ip netns exec "$NS_A" nft reset counters table inet svcount >/dev/null 2>&1

sout=$NS_DIR/sender.out
ns_log "$sout" "sender in $NS_A"
timeout -k 2 60 ip netns exec "$NS_A" env SOFTVERBS_SOCKET="$SOCK_A" \
	SOFTVERBS_NO_AUTOSTART=1 "$PROG" sender $PORT $NLOCAL $NREMOTE $GROUP \
	>"$sout" 2>&1 &
spid=$!
ns_wait_listen "$NS_A" $PORT "$spid" 20 || fail "the sender never listened"
rpids=()
for i in $(seq 1 $NREMOTE); do
	out=$NS_DIR/receiver$i.out
	ns_log "$out" "receiver $i in $NS_B"
	timeout -k 2 60 ip netns exec "$NS_B" env SOFTVERBS_SOCKET="$SOCK_B" \
		SOFTVERBS_NO_AUTOSTART=1 "$PROG" receiver "$IP_A" $PORT $GROUP \
		>"$out" 2>&1 &
	rpids+=("$!")
done
ok=1
for i in "${!rpids[@]}"; do
	ns_wait_job "${rpids[$i]}" 70 || ns_end_job "${rpids[$i]}"
	[ "$wait_rc" = 0 ] || { echo "receiver $((i + 1)) in $NS_B: $(ns_why "$wait_rc")" >&2; ok=0; }
done
ns_wait_job "$spid" 70 || ns_end_job "$spid"
[ "$wait_rc" = 0 ] || { echo "sender: $(ns_why "$wait_rc")" >&2; ok=0; }
[ $ok = 1 ] || fail "multicast across the pair"
cat "$sout" "$NS_DIR"/receiver*.out
grep -q "to $((NLOCAL + NREMOTE)) receivers" "$sout" || fail "the sender's summary"
[ "$(grep -c "$NMSG messages, each once" "$sout" "$NS_DIR"/receiver*.out |
	awk -F: '{ s += $2 } END { print s }')" = $((NLOCAL + NREMOTE)) ] ||
	fail "not every receiver got every message once"

count=$(ns_roce_count)
echo "$count"
[[ $count == *"sent $NMSG, received 0 "* ]] ||
	fail "expected one datagram per message from a and none back: $count"
pass "multicast: $NLOCAL receivers beside the sender, $NREMOTE across the veth, each message once"
