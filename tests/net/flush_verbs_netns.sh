#!/usr/bin/env bash
# RDMA FLUSH between two hosts from the verbs (tests/e2e/test_flush.c):
# the client in b posts ibv_wr_flush (RoCEv2 opcode 0x1C, the FETH as Linux
# rxe sends it), answered by a zero-length READ response, completing with
# IBV_WC_FLUSH: ranges and MRs after a WRITE, and the errors (a PERSISTENT
# flush, an MR without the right, a range past the MR, a bad key: remote
# access errors; a bad placement type: a remote invalid request).
#   flush_verbs_netns.sh BUILD_DIR
export SV_BUILD_DIR=$1
. "$(dirname "$0")/lib.sh"

PROG=$SV_BUILD_DIR/bin/test_flush
[ -x "$PROG" ] || fail "$PROG missing (build first)"
ns_pair_up "$(ns_prefix flushv)"
ns_daemons_up
port=18617

ns_server_client flushv "$PROG" $port "$SOCK_A"
[ "$crc" -eq 0 ] || fail "client exit $crc"
[ "$src" -eq 0 ] || fail "server exit $src"
grep -q "PASS: flush: ranges and MRs, ordering, errors" "$cout" ||
	fail "the client did not pass"
n=$(ns_sv "$NS_B" "$SOCK_B" timeout 5 "$SV" stat 2>/dev/null |
    awk '/^roce packets:/ { print $3 }')
[ -n "$n" ] && [ "$n" -ge 20 ] ||
	fail "b sent ${n:-no} RoCE packets: the FLUSHes did not cross the wire"
echo "b sent $n RoCEv2 packets"
pass "RDMA FLUSH across hosts from the verbs: ranges, MRs, errors"
