#!/usr/bin/env bash
# Guessing rkeys on one host (issue 21, 7): tests/net/sv_keyguess.c with the
# server and the attacking client on the same device, so that the keys are
# checked by the same-host path instead of the wire: 10,000 MRs over one
# buffer of canary cells, every consumer key of the 4 indices each side of
# a known rkey, then DRAWS random keys, by RDMA WRITE and READ from a peer QP
# of the PD. At most 3 accepted (about 0.04 expected by chance; on
# sequential indices the neighbours are 8 live MRs), no cell changed but by
# an accepted WRITE.
#   keyguess.sh [DRAWS]
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/peers.sh"

draws=${1:-10000}
PROG=$SV_BUILD_DIR/bin/sv_keyguess
[ -x "$PROG" ] || fail "$PROG missing (build first)"
port=$(free_port)
sout=$SV_TEST_DIR/server.out
cout=$SV_TEST_DIR/client.out
"$SV" run -- "$PROG" server "$port" >"$sout" 2>&1 &
srv=$!
wait_listen "$port" $srv || { cat "$sout"; fail "sv_keyguess server never listened"; }
"$SV" run -- "$PROG" client 127.0.0.1 "$port" "$draws" >"$cout" 2>&1 &
cli=$!
wait_pair $cli $srv "$sout" "$cout" sv_keyguess 100 30
grep -q "^PASS: server" "$sout" || fail "the server did not finish"
"$SV" stat >/dev/null || fail "the daemon does not answer"
pass "$(grep -h 'accepted' "$cout" | tr '\n' ' ')"
