#!/usr/bin/env bash
# A client SIGKILLed while holding PDs, MRs and CQs: the daemon frees every
# object it held and keeps serving the next client.
. "$(dirname "$0")/lib.sh"
out=$SV_TEST_DIR/hold.out

"$HOLD" --pd 3 --mr 5 --cq 2 >"$out" &
victim=$!
wait_for_line "$out" '^ready' || fail "client never got ready"

[ "$(stat_total pd)" = 3 ] || fail "stat shows $(stat_total pd) PDs, expected 3"
[ "$(stat_total mr)" = 5 ] || fail "stat shows $(stat_total mr) MRs, expected 5"
[ "$(stat_total cq)" = 2 ] || fail "stat shows $(stat_total cq) CQs, expected 2"
[ "$(stat_total channel)" = 1 ] || fail "expected 1 channel"
pass "stat counts the live client's objects"

kill -KILL $victim
wait $victim 2>/dev/null

freed=
for _ in $(seq 1 400); do
	if [ "$(stat_total pd)$(stat_total mr)$(stat_total cq)$(stat_total channel)" = 0000 ]; then
		freed=1
		break
	fi
	sleep 0.025
done
[ -n "$freed" ] || { "$SV" stat; fail "objects of the killed client were not freed"; }
"$SV" stat | grep -q '^keys live: 0$' || fail "MR keys still live after the kill"
grep -q 'objects freed' "$SV_TEST_DIR/softverbsd.log" || fail "teardown not logged"
pass "every object of the killed client freed"

"$HOLD" --pd 2 --mr 2 --cq 1 --once >"$out" || fail "second client not served"
grep -q '^ready' "$out" || fail "second client did not get ready"
pass "daemon keeps serving a second client"
