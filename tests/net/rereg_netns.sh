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
ns_server_client rereg "$PROG" $port "$SOCK_A"
echo "$(ns_roce_count)"
[ $crc -eq 0 ] || fail "client exit $crc"
[ "$src" -eq 0 ] || fail "server exit $src"
grep -q "^PASS: server" "$sout" || fail "the server did not finish"
n=$(ns_sv "$NS_B" "$SOCK_B" timeout 5 "$SV" stat 2>/dev/null |
    awk '/^roce packets:/ { print $3 }')
[ -n "$n" ] && [ "$n" -ge 10 ] ||
	fail "b sent ${n:-no} RoCE packets: the traffic did not cross the wire"
pass "rereg of access, translation, PD and all three, each followed by traffic across namespaces"
