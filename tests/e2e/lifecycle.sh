#!/usr/bin/env bash
# The daemon's life: no autostart when told so, --help everywhere, a daemon
# started by hand serves clients, and SIGTERM shuts it down cleanly with a
# client still connected (the client's objects are freed, the socket goes).
. "$(dirname "$0")/lib.sh"
out=$SV_TEST_DIR/out

for c in "" run stat devinfo daemon top inject why capture bench; do
	"$SV" $c --help >"$out" 2>&1 || fail "softverbs $c --help failed"
	grep -q usage "$out" || fail "softverbs $c --help prints no usage"
done
"$SV_BUILD_DIR/bin/softverbsd" --help | grep -q -- --idle-exit || fail "softverbsd --help"
"$SV" nonsense >/dev/null 2>&1 && fail "unknown command accepted"
# a bad number is refused with a word, before any device is asked
for a in "-s abc" "-d 0" "-c -1" "-W 2000" "-o 300"; do
	"$SV" capture -w "$out.pcapng" $a >"$out" 2>&1
	[ $? = 2 ] && grep -q "bad" "$out" || fail "capture $a: $(cat "$out")"
done
pass "--help on every command"

SOFTVERBS_NO_AUTOSTART=1 "$SV" run -- ibv_devices >"$out" 2>&1
grep -q sv0 "$out" && fail "a device appeared with autostart off"
[ -e "$SOFTVERBS_SOCKET" ] && fail "a daemon was started with autostart off"
"$SV" stat >/dev/null 2>&1 && fail "stat found a daemon that should not exist"
pass "SOFTVERBS_NO_AUTOSTART=1 starts nothing"

"$SV" daemon --socket "$SOFTVERBS_SOCKET" 2>"$SV_TEST_DIR/daemon.err" &
d=$!
for _ in $(seq 1 200); do [ -S "$SOFTVERBS_SOCKET" ] && break; sleep 0.025; done
[ -S "$SOFTVERBS_SOCKET" ] || fail "daemon did not create its socket"
SOFTVERBS_NO_AUTOSTART=1 "$HOLD" --pd 2 --mr 2 --cq 1 >"$out" &
h=$!
wait_for_line "$out" '^ready' || fail "client not served by the hand-started daemon"
[ "$(sed -n 's/^daemon_pid=//p' "$out")" = "$d" ] || fail "client on another daemon"
"$SV" devinfo | grep -q 'port 1:   ACTIVE' || fail "softverbs devinfo"

kill -TERM $d
wait $d
rc=$?
[ $rc -eq 0 ] || fail "daemon exited $rc on SIGTERM"
[ -e "$SOFTVERBS_SOCKET" ] && fail "socket left behind after SIGTERM"
grep -q 'shutting down' "$SV_TEST_DIR/daemon.err" || fail "shutdown not logged"
grep -q '6 objects freed' "$SV_TEST_DIR/daemon.err" || fail "client objects not freed at shutdown"
kill $h 2>/dev/null
wait $h 2>/dev/null
pass "SIGTERM: clean shutdown with a client connected"
