#!/usr/bin/env bash
# Guessing rkeys across the wire from inside the PD (tests/net/sv_keyguess.c,
# issue 21, 7): a's server holds 10,000 MRs over one buffer of canary cells;
# b's client, connected to it by RC QPs of that PD and told one live rkey,
# fires RDMA WRITEs and READs with every consumer key of the 4 indices on
# each side of it, then with DRAWS random keys. At most 3 may be accepted
# (the chance hits expected are printed, about 0.05), no cell changes but by
# a WRITE that was accepted, and both daemons stay up.
#   keyguess_netns.sh BUILD_DIR [DRAWS]
export SV_BUILD_DIR=$1
draws=${2:-20000}
. "$(dirname "$0")/lib.sh"

PROG=$SV_BUILD_DIR/bin/sv_keyguess
[ -x "$PROG" ] || fail "$PROG missing (build first)"
ns_pair_up "$(ns_prefix keys)"
ns_daemons_up
port=18631
ns_server_client keyguess "$PROG" $port "$SOCK_A" "$draws"
echo "$(ns_roce_count)"
[ $crc -eq 0 ] || fail "client exit $crc"
[ "$src" -eq 0 ] || fail "server exit $src"
grep -q "^PASS: server" "$sout" || fail "the server did not finish"
for s in "$NS_A|$SOCK_A" "$NS_B|$SOCK_B"; do
	ns_sv "${s%%|*}" "${s#*|}" timeout 5 "$SV" stat >/dev/null 2>&1 ||
		fail "the daemon of ${s%%|*} does not answer"
done
pass "$(grep -h 'accepted' "$cout" | tr '\n' ' ')"
