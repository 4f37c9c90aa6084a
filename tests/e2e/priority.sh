#!/usr/bin/env bash
# The device's priority (src/device/main.c, device_priority): every thread
# of a daemon started at nice 0 runs at nice -20 where the system allows it
# (root here, CI's case), else at 0 with the refusal in its log; one
# started at another nice value keeps it; --nice N and $SOFTVERBSD_NICE set
# it; a bad value is refused before anything starts.
. "$(dirname "$0")/lib.sh"
SVD=$SV_BUILD_DIR/bin/softverbsd
sock=$SV_TEST_DIR/prio/control
mkdir -p "$(dirname "$sock")"

# The nice values of every thread of pid, sorted and unique, once the
# engine thread is there (the first thread the daemon starts).
nices_of() { # pid
	local t i
	for i in $(seq 1 200); do
		for t in /proc/"$1"/task/*; do
			[ "$(cat "$t/comm" 2>/dev/null)" = sv-engine0 ] && break 2
		done
		sleep 0.025
	done
	for t in /proc/"$1"/task/*; do
		awk '{ print $19 }' "$t/stat" 2>/dev/null
	done | sort -u | tr '\n' ' '
}

# Start a daemon on $sock (extra arguments and a command prefix in $pre),
# record the nice values of its threads in $got, stop it.
run_daemon() {
	local d
	rm -f "$SV_TEST_DIR/prio.log"
	$pre "$SVD" --socket "$sock" --idle-exit 30 --no-roce "$@" \
		>"$SV_TEST_DIR/prio.log" 2>&1 &
	d=$!
	for _ in $(seq 1 200); do [ -S "$sock" ] && break; sleep 0.025; done
	[ -S "$sock" ] || { cat "$SV_TEST_DIR/prio.log"; fail "daemon $* did not serve"; }
	got=$(nices_of $d)
	kill -TERM $d
	wait $d || fail "daemon $* exited $? on SIGTERM"
}

pre=
run_daemon
if [ "$(id -u)" = 0 ]; then
	[ "$got" = "-20 " ] || fail "root's daemon threads at nice '$got', not -20"
	pass "a daemon started at nice 0 runs every thread at nice -20"
else
	[ "$got" = "0 " ] || fail "an unprivileged daemon's threads at nice '$got'"
	grep -q 'runs at nice 0: nice -20 refused' "$SV_TEST_DIR/prio.log" ||
		fail "the refused priority is not logged"
	pass "an unprivileged daemon stays at nice 0 and says why"
fi

# and as another user, where this root test can be one: refused, logged
# (setpriv execs the daemon: $! is the daemon itself)
nobody=$(id -u nobody 2>/dev/null)
if [ "$(id -u)" = 0 ] && [ -n "$nobody" ] && command -v setpriv >/dev/null; then
	udir=$(mktemp -d /tmp/softverbs-prio.XXXXXX)
	chmod 755 "$udir"
	chown nobody "$udir"
	osock=$sock sock=$udir/control
	pre="setpriv --reuid=$nobody --regid=$(id -g nobody) --clear-groups"
	run_daemon
	sock=$osock
	rm -rf "$udir"
	[ "$got" = "0 " ] || fail "nobody's daemon threads at nice '$got'"
	grep -q 'runs at nice 0: nice -20 refused' "$SV_TEST_DIR/prio.log" ||
		fail "nobody's daemon does not log the refused priority"
	pass "an unprivileged daemon stays at nice 0 and says why"
fi

pre="nice -n 3"
run_daemon
[ "$got" = "3 " ] || fail "a daemon started at nice 3 runs at '$got'"
pass "a daemon started at nice 3 keeps it"

pre=
run_daemon --nice 2
[ "$got" = "2 " ] || fail "--nice 2 gave '$got'"
SOFTVERBSD_NICE=4 run_daemon
[ "$got" = "4 " ] || fail "SOFTVERBSD_NICE=4 gave '$got'"
pass "--nice and \$SOFTVERBSD_NICE set every thread's nice value"

for bad in 20 -21 x ""; do
	"$SVD" --socket "$sock" --nice "$bad" >/dev/null 2>&1
	[ $? = 2 ] || fail "--nice '$bad' not refused"
done
[ -e "$sock" ] && fail "a refused --nice left a socket"
pass "a bad --nice is refused before anything starts"
