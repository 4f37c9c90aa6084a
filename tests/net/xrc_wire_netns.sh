#!/usr/bin/env bash
# XRC on the wire, every operation (tests/net/sv_xrc_wire.c): SEND, WRITE,
# WRITE with immediate, READ and FETCH_AND_ADD from an XRC_SEND QP in b to
# an XRC_RECV QP and XRC SRQ in a, then an SRQ number a does not have (the
# WQE fails with IBV_WC_REM_INV_REQ_ERR, a's target stays in RTR).
#   xrc_wire_netns.sh BUILD_DIR [drop PCT]
export SV_BUILD_DIR=$1
drop=${3:-0}
. "$(dirname "$0")/lib.sh"

PROG=$SV_BUILD_DIR/bin/sv_xrc_wire
[ -x "$PROG" ] || fail "$PROG missing (build first)"
ns_pair_up "$(ns_prefix xrcw)"
ns_daemons_up
[ "$drop" = 0 ] || ns_drop_pct "$NS_B" "$drop"
port=18610
sout=$NS_DIR/xrc-server.out cout=$NS_DIR/xrc-client.out
ns_log "$sout" "sv_xrc_wire server"
ns_log "$cout" "sv_xrc_wire client"
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
pass "XRC SEND, WRITE, WRITE with immediate, READ, FETCH_AND_ADD and a bad SRQ number across namespaces"
