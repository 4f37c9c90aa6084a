#!/usr/bin/env bash
# Tag matching across two hosts (tests/e2e/test_tm.c, server and client
# modes): the server in namespace a holds a tag-matching SRQ with tags
# posted, the client in b sends EAGER messages of several packets into
# them, two into tags of one value (taken in posting order), an unexpected
# one, a NO_TAG, a rendezvous (left to software across the wire:
# IBV_WC_TM_RNDV_INCOMPLETE) and one too long for its tag.
#   tm_netns.sh BUILD_DIR
export SV_BUILD_DIR=$1
. "$(dirname "$0")/lib.sh"

PROG=$SV_BUILD_DIR/bin/test_tm
[ -x "$PROG" ] || fail "$PROG missing (build first)"
ns_pair_up "$(ns_prefix tm)"
ns_daemons_up
port=18615

ns_server_client tm "$PROG" $port "$SOCK_A"
[ "$crc" -eq 0 ] || fail "client exit $crc"
[ "$src" -eq 0 ] || fail "server exit $src"
grep -q "PASS: tag matching across the wire" "$cout" ||
	fail "the client did not pass"
grep -q "server: tag matching across the wire" "$sout" ||
	fail "the server did not check its completions"
n=$(ns_sv "$NS_B" "$SOCK_B" timeout 5 "$SV" stat 2>/dev/null |
    awk '/^roce packets:/ { print $3 }')
[ -n "$n" ] && [ "$n" -ge 48 ] ||
	fail "b sent ${n:-no} RoCE packets, not the 48 of its messages"
echo "b sent $n RoCEv2 packets"
pass "tag matching across hosts: expected, in order, unexpected, NO_TAG, rendezvous left to software, too long"
