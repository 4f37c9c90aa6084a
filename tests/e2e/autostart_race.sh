#!/usr/bin/env bash
# Two processes started at the same instant with no daemon running share one
# auto-started daemon, which exits after its idle time.
. "$(dirname "$0")/lib.sh"
go=$SV_TEST_DIR/go
[ -S "$SOFTVERBS_SOCKET" ] && fail "a daemon is already there"

"$HOLD" --once --barrier "$go" >"$SV_TEST_DIR/a.out" &
a=$!
"$HOLD" --once --barrier "$go" >"$SV_TEST_DIR/b.out" &
b=$!
sleep 0.2
touch "$go"         # both start now
wait $a || fail "client A failed"
wait $b || fail "client B failed"

pa=$(sed -n 's/^daemon_pid=//p' "$SV_TEST_DIR/a.out")
pb=$(sed -n 's/^daemon_pid=//p' "$SV_TEST_DIR/b.out")
[ -n "$pa" ] && [ "$pa" = "$pb" ] || fail "clients on different daemons: '$pa' '$pb'"
[ "$(grep -c 'info: serving' "$SV_TEST_DIR/softverbsd.log")" = 1 ] ||
	fail "more than one daemon served"
pass "both clients on daemon $pa"

wait_gone "$pa" 400 || fail "daemon $pa did not exit after its idle time"
grep -q 'idle for 1s: exiting' "$SV_TEST_DIR/softverbsd.log" ||
	fail "daemon did not log its idle exit"
pass "daemon exited after its idle time"
