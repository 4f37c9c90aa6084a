#!/usr/bin/env bash
# The default per-user socket folder is the user's own (issue 35, item 2).
# With neither SOFTVERBS_SOCKET nor XDG_RUNTIME_DIR set, a user's device
# lives in /tmp/softverbs-UID, a name any other user can take first. Acting
# as uid 65534 against the default folder of a victim, a free uid V:
#  1. 65534 made the folder (mode 0777), its softverbsd.log a link to a file
#     of V's: V's autostart (the library, and the preload library) refuses
#     the folder naming its owner, starts no daemon, writes nothing there,
#     and the file is untouched; softverbsd started by V on its default
#     socket exits saying the same; a --log that is a link is not opened;
#  2. 65534's own daemon serves there: V refuses the folder naming its
#     owner and never connects (that daemon logs no refusal);
#  3. a daemon of uid 65534 answers on a socket in V's own folder (0700;
#     a hard link to its socket): V asks its uid (SO_PEERCRED) and sends
#     it nothing;
#  4. V's own folders work: /tmp/softverbs-V made 0700 by the autostart,
#     and $XDG_RUNTIME_DIR/softverbs, which is refused when it is 65534's.
# (A socket V names, SOFTVERBS_SOCKET, may be another uid's: see
# config_errors.sh, 5.)
. "$(dirname "$0")/lib.sh"
SVD=$SV_BUILD_DIR/bin/softverbsd
T=$SV_TEST_DIR

if ! command -v setpriv >/dev/null || [ "$(id -u)" != 0 ]; then
	echo "SKIP: acting as other uids needs root and setpriv"
	exit 0
fi
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)

NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
# (in the background too: "${NOBODY[@]}" CMD & makes $! the command itself)
as_nobody() { "${NOBODY[@]}" "$@"; }
# the victim: no socket named, no runtime folder, its own home
as_victim() {
	setpriv --reuid="$V" --regid="$V" --clear-groups \
		env -u SOFTVERBS_SOCKET -u XDG_RUNTIME_DIR HOME="$T/home" "$@"
}

# a uid with no account, no process and no folder in /tmp: V's, whose
# folder 65534 takes first (mkdir: one run of this test per uid)
V='' F=''
for _ in $(seq 1 100); do
	c=$((30000 + RANDOM % 30000))
	getent passwd "$c" >/dev/null && continue
	pgrep -u "$c" >/dev/null && continue
	[ -e "/tmp/softverbs-$c" ] && continue
	if as_nobody mkdir -m 0777 "/tmp/softverbs-$c" 2>/dev/null; then
		V=$c
		break
	fi
done
[ -n "$V" ] || fail "no free uid for the victim"
F=/tmp/softverbs-$V
cleanup() {
	local p
	kill $(jobs -p) 2>/dev/null
	# whatever ran as V (a daemon a failing run started) is gone or goes
	for p in $(pgrep -u "$V"); do
		wait_gone "$p" 200 || kill -TERM "$p" 2>/dev/null
	done
	rm -rf "$F"
}
trap cleanup EXIT
echo "victim uid $V, default folder $F"

chmod 711 "$T"
mkdir -m 700 "$T/home"
echo "the victim's notes" >"$T/home/notes"
chown -R "$V:$V" "$T/home"
chmod 600 "$T/home/notes"
notes() { sha256sum <"$T/home/notes"; }
n0=$(notes)
# (a daemon that left may stay a zombie where nothing reaps orphans)
victim_procs() {
	local p st
	for p in $(pgrep -u "$V"); do
		# (gone since pgrep: no state; a zombie: gone too)
		st=$(awk '{print $3}' /proc/"$p"/stat 2>/dev/null)
		[ -z "$st" ] || [ "$st" = Z ] || [ "$st" = X ] ||
			echo "$p $(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null)"
	done
}
no_victim_process() { [ -z "$(victim_procs)" ]; }
owner_word="the folder $F belongs to uid 65534"

# ---- 1 ----
as_nobody ln -s "$T/home/notes" "$F/softverbsd.log" || fail "cannot link"
as_victim timeout 30 "$HOLD" --once >"$T/1.out" 2>"$T/1.err" &&
	fail "V got a device in a folder of uid 65534"
cat "$T/1.err"
grep -q "refusing the device at $F/control: $owner_word.*mode 0777" "$T/1.err" ||
	fail "the library: no clear word naming the folder's owner and mode"
as_victim timeout 30 "$SV" run -- cat /sys/class/infiniband_verbs/abi_version \
	>/dev/null 2>"$T/1p.err"
grep -q "refusing the device at $F/control: $owner_word" "$T/1p.err" ||
	{ cat "$T/1p.err"; fail "the preload library: no clear word"; }
as_victim timeout 30 "$SVD" --idle-exit 1 --no-roce >"$T/1d.out" 2>&1
rc=$?
cat "$T/1d.out"
[ $rc = 1 ] || fail "softverbsd on V's default socket in 65534's folder: rc $rc"
grep -q "cannot serve $F/control: $owner_word" "$T/1d.out" ||
	fail "softverbsd: no clear word naming the folder's owner"
[ "$(notes)" = "$n0" ] || fail "V's file was written through 65534's link"
left=$(find "$F" -user "$V")
[ -z "$left" ] || fail "V made files in 65534's folder: $left"
no_victim_process || fail "a process of V's was left: $(victim_procs)"
# the daemon's --log is never opened through a link, wherever it is
mkdir -m 700 "$T/h/"
ln -s "$T/home/notes" "$T/h/link.log"
timeout 30 "$SVD" --socket "$T/h/control" --idle-exit 1 --no-roce \
	--log "$T/h/link.log" >"$T/1l.out" 2>&1
rc=$?
cat "$T/1l.out"
[ $rc = 1 ] && grep -q "cannot open the log $T/h/link.log" "$T/1l.out" ||
	fail "a --log that is a link: rc $rc"
[ "$(notes)" = "$n0" ] || fail "the daemon wrote its log through a link"
pass "65534's folder (0777, a linked log): refused naming its owner; nothing written, nothing started"

# ---- 2 ----
rm -rf "$F"
as_nobody mkdir -m 0755 "$F" || fail "65534 cannot make $F"
"${NOBODY[@]}" "$SVD" --socket "$F/control" --idle-exit 60 --no-roce \
	--log "$F/nobody.log" &
pd=$!
wait_for_line "$F/nobody.log" 'info: serving' 200 || fail "no daemon of 65534"
as_victim timeout 30 "$HOLD" --once >/dev/null 2>"$T/2.err" &&
	fail "V took 65534's device for its own"
cat "$T/2.err"
grep -q "refusing the device at $F/control: $owner_word.*mode 0755" "$T/2.err" ||
	fail "no clear word naming the folder's owner"
grep 'refused pid' "$F/nobody.log" && fail "V connected to 65534's daemon"
kill -TERM $pd
wait $pd
wait_gone $pd || fail "65534's daemon $pd did not leave"
no_victim_process || fail "a process of V's was left: $(victim_procs)"
pass "65534's daemon in V's default folder: refused naming its owner, never reached"

# ---- 3 ----
rm -rf "$F"
as_victim mkdir -m 0700 "$F" || fail "V cannot make $F"
mkdir -m 755 "$T/evil"
chown 65534:65534 "$T/evil"
# a daemon of 65534's that counts what it is sent on its first connection
"${NOBODY[@]}" timeout 30 "$PY" -c '
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
s.listen(4)
open(sys.argv[2] + ".ready", "w").close()
c, _ = s.accept()
n = len(c.recv(65536))
with open(sys.argv[2], "w") as f:
    f.write("%d\n" % n)' "$T/evil/control" "$T/evil/got" &
pf=$!
for _ in $(seq 1 400); do [ -e "$T/evil/got.ready" ] && break; sleep 0.025; done
[ -e "$T/evil/got.ready" ] || fail "no daemon of 65534"
ln "$T/evil/control" "$F/control" || fail "cannot link the socket into $F"
as_victim env SOFTVERBS_NO_AUTOSTART=1 timeout 30 "$HOLD" --once \
	>/dev/null 2>"$T/3.err" && fail "V took 65534's daemon for its own"
wait $pf
cat "$T/3.err"
got=$(cat "$T/evil/got" 2>/dev/null)
[ "$got" = 0 ] || fail "V sent ${got:-?} bytes to a daemon of uid 65534"
grep -q "refusing the device at $F/control: the daemon answering on it (pid [0-9]*) runs as uid 65534" \
	"$T/3.err" || fail "no clear word naming the daemon's uid"
pass "a daemon of 65534 on a socket in V's own folder: asked its uid, sent nothing"

# ---- 4 ----
rm -rf "$F"
as_victim env SOFTVERBS_IDLE_EXIT=1 timeout 30 "$HOLD" --once >"$T/4.out" \
	2>"$T/4.err" || { cat "$T/4.err"; fail "no device in V's own default folder"; }
[ "$(stat -c '%u %a' "$F")" = "$V 700" ] ||
	fail "the autostart made $F as $(stat -c '%u %a' "$F")"
p=$(tr -d '\n' <"$F/control.lock")
[ -n "$p" ] && wait_gone "$p" || fail "V's daemon did not leave when idle"
grep -Eq 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$F/softverbsd.log" &&
	fail "V's daemon: the sanitizer reported errors"
X=$T/home/run
as_victim mkdir -m 0700 "$X"
as_victim env XDG_RUNTIME_DIR="$X" SOFTVERBS_IDLE_EXIT=1 timeout 30 "$HOLD" \
	--once >/dev/null 2>"$T/4x.err" ||
	{ cat "$T/4x.err"; fail "no device in V's \$XDG_RUNTIME_DIR"; }
p=$(tr -d '\n' <"$X/softverbs/control.lock")
[ -n "$p" ] && wait_gone "$p" || fail "V's daemon did not leave when idle"
rm -rf "$X/softverbs"
mkdir -m 0700 "$X/softverbs"
chown 65534:65534 "$X/softverbs"
as_victim env XDG_RUNTIME_DIR="$X" timeout 30 "$HOLD" --once >/dev/null \
	2>"$T/4y.err" && fail "V got a device in 65534's \$XDG_RUNTIME_DIR/softverbs"
grep -q "refusing the device at $X/softverbs/control: the folder $X/softverbs belongs to uid 65534" \
	"$T/4y.err" || { cat "$T/4y.err"; fail "no clear word for \$XDG_RUNTIME_DIR"; }
no_victim_process || fail "a process of V's was left: $(victim_procs)"
pass "V's own folders serve: $F made 0700, \$XDG_RUNTIME_DIR/softverbs; 65534's refused"
