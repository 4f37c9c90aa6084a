#!/usr/bin/env bash
# Configuration errors fail fast and clearly (issue 21, item 3):
#  1. two sockets in one folder: both daemons serve (one lock per socket);
#  2. autostart where no socket can be made: fails at once with the
#     daemon's reason, no daemon left;
#  3. autostart where the lock is held by a process that is not a daemon:
#     fails within the grace time naming the holder's pid, no daemon left;
#  4. a stale socket of a SIGKILLed daemon is taken over;
#  5. another uid gets EACCES and "permission denied: the device at SOCKET
#     belongs to uid N" within a second (socket mode open, as in a shared
#     runtime folder, and closed), and the daemon logs the refusal once.
. "$(dirname "$0")/lib.sh"
SVD=$SV_BUILD_DIR/bin/softverbsd
T=$SV_TEST_DIR

ms() { date +%s%3N; }
# no softverbsd serves socket $1 (pgrep only looks)
none_left() { ! pgrep -f -- "--socket $1( |$)" >/dev/null; }

# ---- 1 ----
mkdir "$T/two"
"$SVD" --socket "$T/two/a" --idle-exit 60 --no-roce --log "$T/two/a.log" &
pa=$!
"$SVD" --socket "$T/two/b" --idle-exit 60 --no-roce --log "$T/two/b.log" &
pb=$!
wait_for_line "$T/two/a.log" 'info: serving' 200 || fail "daemon a does not serve"
wait_for_line "$T/two/b.log" 'info: serving' 200 ||
	fail "daemon b does not serve beside a ($(tail -1 "$T/two/b.log"))"
for s in a b; do
	SOFTVERBS_SOCKET=$T/two/$s SOFTVERBS_NO_AUTOSTART=1 timeout 10 \
		"$HOLD" --once >/dev/null || fail "no device on $T/two/$s"
done
[ -e "$T/two/a.lock" ] && [ -e "$T/two/b.lock" ] || fail "not one lock per socket"
kill -TERM $pa $pb
wait $pa $pb
pass "two sockets in one folder both serve"

# ---- 2 ----
touch "$T/file"
sock=$T/file/control
t0=$(ms)
SOFTVERBS_SOCKET=$sock timeout 30 "$HOLD" --once >/dev/null 2>"$T/2.err" &&
	fail "a device where none can be"
dt=$(($(ms) - t0))
cat "$T/2.err"
grep -q "cannot start the device at $sock: .*$T/file" "$T/2.err" ||
	fail "no clear reason"
[ $dt -lt 5000 ] || fail "took $dt ms"
none_left "$sock" || fail "a daemon was left behind for $sock"
pass "autostart where no socket can be made fails in $dt ms, nothing left"

# ---- 3 ----
mkdir "$T/held"
sock=$T/held/control
python3 -c '
import fcntl, sys, time
f = open(sys.argv[1], "w")
fcntl.flock(f, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)' "$sock.lock" >"$T/held/holder.out" &
holder=$!
wait_for_line "$T/held/holder.out" held || fail "no lock holder"
t0=$(ms)
SOFTVERBS_SOCKET=$sock timeout 30 "$HOLD" --once >/dev/null 2>"$T/3.err" &&
	fail "a device with its lock held"
dt=$(($(ms) - t0))
kill $holder
cat "$T/3.err"
grep -q "held by pid $holder" "$T/3.err" || fail "the holder is not named"
[ $dt -lt 8000 ] || fail "took $dt ms"
none_left "$sock" || fail "a daemon was left behind for $sock"
pass "autostart with the lock held by pid $holder fails in $dt ms, nothing left"

# ---- 4 ----
# a client holds the daemon (no idle exit) while it is killed
"$HOLD" >"$T/4.out" &
h=$!
wait_for_line "$T/4.out" '^daemon_pid=' || fail "no autostart"
p1=$(sed -n 's/^daemon_pid=//p' "$T/4.out")
kill -KILL "$p1" || fail "cannot kill daemon $p1"
wait_gone "$p1" || fail "daemon $p1 survived SIGKILL"
kill $h
wait $h
[ -S "$SOFTVERBS_SOCKET" ] || fail "no stale socket left to take over"
p2=$("$HOLD" --once | sed -n 's/^daemon_pid=//p')
[ -n "$p2" ] && [ "$p2" != "$p1" ] || fail "stale socket not taken over"
pass "the stale socket of SIGKILLed daemon $p1 taken over by $p2"

# ---- 5 ----
if ! command -v setpriv >/dev/null || [ "$(id -u)" != 0 ]; then
	echo "SKIP: another uid needs root and setpriv"
	exit 0
fi
chmod 755 "$T"
mkdir -m 755 "$T/shared"
sock=$T/shared/control
"$SVD" --socket "$sock" --idle-exit 60 --no-roce --log "$T/shared/d.log" &
pd=$!
wait_for_line "$T/shared/d.log" 'info: serving' 200 || fail "no daemon"
for mode in 666 600; do
	chmod $mode "$sock"
	t0=$(ms)
	setpriv --reuid=65534 --regid=65534 --clear-groups \
		env SOFTVERBS_SOCKET="$sock" timeout 30 "$HOLD" --once \
		>/dev/null 2>"$T/5.err" && fail "another uid got the device"
	dt=$(($(ms) - t0))
	cat "$T/5.err"
	grep -q "permission denied: the device at $sock belongs to uid 0" \
		"$T/5.err" || fail "socket mode $mode: no clear word"
	grep -q "Permission denied" "$T/5.err" || fail "socket mode $mode: not EACCES"
	[ $dt -lt 1000 ] || fail "socket mode $mode: took $dt ms"
	pass "socket mode $mode: uid 65534 refused with EACCES in $dt ms"
done
n=$(grep -c 'refused pid' "$T/shared/d.log")
[ "$n" = 1 ] || fail "the refusal logged $n times"
none_left "$sock" && fail "the refused uid's autostart killed the daemon"
# (a daemon for this socket: another test, e2e_deb, may run one as uid
# 65534 for a socket of its own at the same time)
pgrep -u 65534 -f -- "softverbsd.*--socket $sock" >/dev/null &&
	fail "uid 65534 started a daemon"
kill -TERM $pd
wait $pd
pass "the refusal logged once"
