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
# v6: the daemons serve every address of the veth (--netdev), the group is
# IPv6 (ff0e::5:1, sent from the ULA GID), the side channel stays IPv4.
#   mcast_netns.sh BUILD_DIR [v4|v6]
export SV_BUILD_DIR=$1
fam=${2:-v4}
. "$(dirname "$0")/lib.sh"

PROG=$SV_BUILD_DIR/bin/test_mcast
[ -x "$PROG" ] || fail "no $PROG"
NLOCAL=2 NREMOTE=2 PORT=18515 NMSG=401
case "$fam" in
v4) GROUP=239.1.2.3 ;;
v6) GROUP=ff0e::5:1 ;;
*) fail "family $fam: v4 or v6" ;;
esac

ns_pair_up "$(ns_prefix "mc$fam")"
if [ "$fam" = v6 ]; then
	# lib.sh turns IPv6 off; on again, addresses usable at once (no DAD)
	for n in "$NS_A" "$NS_B"; do
		ip netns exec "$n" sysctl -qw net.ipv6.conf.veth0.accept_dad=0 \
			net.ipv6.conf.all.disable_ipv6=0 \
			net.ipv6.conf.veth0.disable_ipv6=0 || fail "IPv6 on in $n"
	done
	ip -n "$NS_A" addr add fd5e::1/64 dev veth0 nodad || fail "IPv6 in $NS_A"
	ip -n "$NS_B" addr add fd5e::2/64 dev veth0 nodad || fail "IPv6 in $NS_B"
	NS_DAEMON_ARGS="--netdev veth0 ${NS_DAEMON_ARGS:-}"
	SOCK_A=$NS_DIR/a/control SOCK_B=$NS_DIR/b/control
	ns_daemon "$NS_A" "" "$SOCK_A"
	ns_daemon "$NS_B" "" "$SOCK_B"
else
	ns_daemons_up
fi
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
pass "multicast ($fam, group $GROUP): $NLOCAL receivers beside the sender, $NREMOTE across the veth, each message once"
