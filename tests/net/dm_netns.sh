#!/usr/bin/env bash
# Device memory between two hosts (tests/e2e/test_dm.c): the server in
# namespace a holds a DM MR, the client in b WRITEs from its DM into it,
# READs it into memory and into DM, SENDs from DM into a receive posted on
# DM, WRITEs from memory into DM, runs FETCH_ADD and CMP_SWAP on a word of
# it, and a WRITE past its end fails with a remote access error; the server
# then checks every byte of its DM. 32 KiB pieces: many packets each.
#   dm_netns.sh BUILD_DIR
export SV_BUILD_DIR=$1
. "$(dirname "$0")/lib.sh"

PROG=$SV_BUILD_DIR/bin/test_dm
[ -x "$PROG" ] || fail "$PROG missing (build first)"
ns_pair_up "$(ns_prefix dm)"
ns_daemons_up
port=18606

ns_server_client dm "$PROG" $port "$SOCK_A"
[ "$crc" -eq 0 ] || fail "client exit $crc"
[ "$src" -eq 0 ] || fail "server exit $src"
grep -q "PASS: device memory: WRITE, READ, SEND and atomics" "$cout" ||
	fail "the client did not pass"
grep -q "server: its DM holds what the client wrote and sent" "$sout" ||
	fail "the server did not check its DM"
n=$(ns_sv "$NS_B" "$SOCK_B" timeout 5 "$SV" stat 2>/dev/null |
    awk '/^roce packets:/ { print $3 }')
[ -n "$n" ] && [ "$n" -ge 60 ] ||
	fail "b sent ${n:-no} RoCE packets: the transfers did not cross the wire"
echo "b sent $n RoCEv2 packets"
pass "device memory across hosts: WRITE, READ, SEND and atomics to, from and between DM MRs"
