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
ns_server_client xrc "$PROG" $port "$SOCK_A"
echo "$(ns_roce_count)"
[ $crc -eq 0 ] || fail "client exit $crc"
[ "$src" -eq 0 ] || fail "server exit $src"
pass "XRC SEND, WRITE, WRITE with immediate, READ, FETCH_AND_ADD and a bad SRQ number across namespaces"
