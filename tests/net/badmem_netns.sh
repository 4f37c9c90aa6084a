#!/usr/bin/env bash
# A WRITE from unreadable memory among good ones in one posted list, across
# the wire (tests/net/sv_badmem_wire.c), RC and UC: the WRITEs before it
# land and complete, it completes with IBV_WC_LOC_PROT_ERR, the rest are
# flushed, and nothing of it or after it reaches the server's memory.
#   badmem_netns.sh BUILD_DIR
export SV_BUILD_DIR=$1
. "$(dirname "$0")/lib.sh"

PROG=$SV_BUILD_DIR/bin/sv_badmem_wire
[ -x "$PROG" ] || fail "$PROG missing (build first)"
ns_pair_up "$(ns_prefix badmem)"
ns_daemons_up
port=18613
ns_server_client badmem "$PROG" $port "$SOCK_A"
echo "$(ns_roce_count)"
[ $crc -eq 0 ] || fail "client exit $crc"
[ "$src" -eq 0 ] || fail "server exit $src"
grep -q "^PASS: server" "$sout" || fail "the server did not finish"
[ "$(grep -c '^round .*nothing after it landed' "$cout")" = 8 ] ||
	fail "the client did not finish its 8 rounds"
pass "a WRITE from unreadable memory among good ones, RC and UC: the ones before it done, it LOC_PROT_ERR, the rest flushed, nothing of it or after it landed"
