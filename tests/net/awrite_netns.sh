#!/usr/bin/env bash
# ATOMIC WRITE between two hosts (tests/e2e/test_awrite.c): RoCEv2 opcode
# 0x1D, answered by a zero-length READ response (as Linux rxe answers it).
# The client in b writes with ibv_wr_atomic_write and ibv_post_send, races
# 300 atomic writes against 900 FETCH_ADDs on one word of the server in a
# (no FETCH_ADD may return a torn value), and gets a remote invalid request
# for an unaligned address and a remote access error for a read-only key.
#   awrite_netns.sh BUILD_DIR
export SV_BUILD_DIR=$1
. "$(dirname "$0")/lib.sh"

PROG=$SV_BUILD_DIR/bin/test_awrite
[ -x "$PROG" ] || fail "$PROG missing (build first)"
ns_pair_up "$(ns_prefix awrite)"
ns_daemons_up
port=18607

ns_server_client awrite "$PROG" $port "$SOCK_A"
[ "$crc" -eq 0 ] || fail "client exit $crc"
[ "$src" -eq 0 ] || fail "server exit $src"
grep -q "PASS: atomic write: the verbs, a race with FETCH_ADDs, errors" \
	"$cout" || fail "the client did not pass"
n=$(ns_sv "$NS_B" "$SOCK_B" timeout 5 "$SV" stat 2>/dev/null |
    awk '/^roce packets:/ { print $3 }')
[ -n "$n" ] && [ "$n" -ge 1200 ] ||
	fail "b sent ${n:-no} RoCE packets: the atomics did not cross the wire"
echo "b sent $n RoCEv2 packets"
pass "atomic write across hosts: the verbs, a race with FETCH_ADDs, errors"
