#!/usr/bin/env bash
# The CM's protocol from a host that writes its MADs by hand (cm_forged.c):
# a's softverbsd answers a REQ for a port nobody listens on with a REJ,
# reason 8, and drops (and counts) malformed and forged MADs without an
# answer; afterwards it still serves: rping between the two namespaces.
#   cm_forged_netns.sh BUILD_DIR
export SV_BUILD_DIR=$1
. "$(dirname "$0")/lib.sh"
FORGE=$SV_BUILD_DIR/bin/sv_cm_forged
[ -x "$FORGE" ] || fail "no $FORGE (build first)"

ns_pair_up "$(ns_prefix cmforged)"
SOCK_A=$NS_DIR/a/control SOCK_B=$NS_DIR/b/control
ns_daemon "$NS_A" "$IP_A" "$SOCK_A"
out=$NS_DIR/forged.out
ns_log "$out" "cm_forged in $NS_B"
timeout 30 ip netns exec "$NS_B" "$FORGE" "$IP_B" "$IP_A" >"$out" 2>&1
rc=$?
cat "$out"
[ $rc = 0 ] || fail "cm_forged: $(ns_why $rc)"
stat=$(ns_sv "$NS_A" "$SOCK_A" "$SV" stat)
echo "$stat" | grep -E '^(rdma_cm|roce)'
read -r sent rcvd _ _ dropped <<<"$(echo "$stat" |
	awk '/^rdma_cm MADs:/ { print $3, $5, $7, $9, $12 }')"
# 3 REJs sent; 5 messages received (3 REQs, the REP, the DREQ), 5 MADs
# dropped: the class version, the attribute and the Get (no message), the
# REP and the DREQ (for no id). The short datagram and the bad ICRC never
# reach the CM: the wire drops them, as any malformed packet.
[ "$sent" = 3 ] || fail "a's CM sent $sent MADs, not 3 REJs"
[ "$rcvd" = 5 ] || fail "a's CM received $rcvd messages, not 5"
[ "$dropped" = 5 ] || fail "a's CM dropped $dropped MADs, not 5"
# and it still serves
ns_daemon "$NS_B" "$IP_B" "$SOCK_B"
srv_out=$NS_DIR/rping-s.out cli_out=$NS_DIR/rping-c.out
ns_log "$srv_out" "rping server"; ns_log "$cli_out" "rping client"
ns_sv "$NS_A" "$SOCK_A" timeout -k 2 30 "$SV" run -- rping -s -a "$IP_A" -p 7471 -C 10 -V \
	>"$srv_out" 2>&1 &
spid=$!
NS_PIDS+=("$spid")
for _ in $(seq 1 200); do
	grep -q "listens on .*:7471, " "$NS_DIR/a/softverbsd.log" && break
	sleep 0.05
done
ns_sv "$NS_B" "$SOCK_B" timeout -k 2 30 "$SV" run -- rping -c -a "$IP_A" -p 7471 -C 10 -V \
	>"$cli_out" 2>&1 || fail "rping after the forged MADs: $(ns_why $?)"
ns_wait_job "$spid" 10 || fail "the rping server did not end"
[ "$wait_rc" = 0 ] || fail "the rping server: $(ns_why "$wait_rc")"
pass "forged CM MADs: REJ 8 for no listener, 5 dropped and counted, the CM still serves"
