#!/usr/bin/env bash
# Masked atomics between two hosts (tests/e2e/test_masked.c): the server in
# namespace a holds the words, the client in b runs the model worker and
# four workers on disjoint fields of one word, over the MaskedAtomicETH
# opcodes (docs/ROCE.md), then errors (bad rkey, unaligned address, short
# SGE: each fails cleanly, nothing is written). Then a's device is replaced
# by one started with --no-masked-atomics, a device without them: the
# client's masked CAS must complete with remote invalid request (the peer's
# NAK), not hang.
#   masked_netns.sh BUILD_DIR
export SV_BUILD_DIR=$1
. "$(dirname "$0")/lib.sh"

PROG=$SV_BUILD_DIR/bin/test_masked
[ -x "$PROG" ] || fail "$PROG missing (build first)"
ns_pair_up "$(ns_prefix masked)"
ns_daemons_up
port=18602

# run_pair SOCK_OF_A TAG [client mode]: the server in a, the client in b
run_pair() { ns_server_client "masked-$2" "$PROG" $port "$1" ${3:-}; }

run_pair "$SOCK_A" both
[ "$crc" -eq 0 ] || fail "client exit $crc"
[ "$src" -eq 0 ] || fail "server exit $src"
grep -q "PASS: masked atomics: model and disjoint fields" "$cout" ||
	fail "the client did not pass"
n=$(ns_sv "$NS_B" "$SOCK_B" timeout 5 "$SV" stat 2>/dev/null |
    awk '/^roce packets:/ { print $3 }')
[ -n "$n" ] && [ "$n" -ge 11000 ] ||
	fail "b sent ${n:-no} RoCE packets: the atomics did not cross the wire"
echo "b sent $n RoCEv2 packets"

# errors across: a bad rkey, an unaligned address, a short SGE
run_pair "$SOCK_A" errors errors
[ "$crc" -eq 0 ] || fail "client exit $crc (errors)"
[ "$src" -eq 0 ] || fail "server exit $src (errors)"
grep -q "PASS: masked atomics: errors fail cleanly" "$cout" ||
	fail "the errors did not fail as they must"

# a device without masked atomics in a's place
kill -TERM "$PID_A"
ns_wait_job "$PID_A" 10 || fail "a's daemon does not stop"
NS_DAEMON_ARGS=--no-masked-atomics ns_daemon "$NS_A" "$IP_A" "$NS_DIR/a2/control"
run_pair "$NS_DIR/a2/control" nak nak
[ "$crc" -eq 0 ] || fail "client exit $crc (a masked atomic to a device without them)"
grep -q "remote invalid request" "$cout" || fail "no invalid-request NAK"
pass "masked atomics across hosts: model, disjoint fields, errors, and a clean NAK from a device without them"
