#!/usr/bin/env bash
# ibv_rereg_mr across hosts (tests/net/sv_rereg_wire.c): the server in a
# re-registers its MR (access, translation, PD, all three) between the
# client's SENDs, WRITEs and READs from b, which cross the wire; a receive
# posted before the rereg takes the next message; every byte is checked.
#   rereg_netns.sh BUILD_DIR
export SV_BUILD_DIR=$1
. "$(dirname "$0")/lib.sh"

PROG=$SV_BUILD_DIR/bin/sv_rereg_wire
[ -x "$PROG" ] || fail "$PROG missing (build first)"
ns_pair_up "$(ns_prefix rereg)"
ns_daemons_up
port=18612
sout=$NS_DIR/rereg-server.out cout=$NS_DIR/rereg-client.out
ns_log "$sout" "sv_rereg_wire server"
ns_log "$cout" "sv_rereg_wire client"
ns_sv "$NS_A" "$SOCK_A" timeout -k 2 60 "$SV" run -- \
	"$PROG" server $port >"$sout" 2>&1 &
spid=$!
NS_PIDS+=("$spid")
ns_wait_listen "$NS_A" $port "$spid" 20 || fail "the server does not listen"
ns_sv "$NS_B" "$SOCK_B" timeout -k 2 50 "$SV" run -- \
	"$PROG" client "$IP_A" $port >"$cout" 2>&1
crc=$?
ns_wait_job "$spid" 30 || ns_end_job "$spid"
src=$wait_rc
cat "$sout" "$cout"
echo "$(ns_roce_count)"
[ $crc -eq 0 ] || fail "client exit $crc"
[ "$src" -eq 0 ] || fail "server exit $src"
grep -q "^PASS: server" "$sout" || fail "the server did not finish"
n=$(ns_sv "$NS_B" "$SOCK_B" timeout 5 "$SV" stat 2>/dev/null |
    awk '/^roce packets:/ { print $3 }')
[ -n "$n" ] && [ "$n" -ge 10 ] ||
	fail "b sent ${n:-no} RoCE packets: the traffic did not cross the wire"
pass "rereg of access, translation, PD and all three, each followed by traffic across namespaces"
