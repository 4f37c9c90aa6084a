#!/usr/bin/env bash
# Bounded logging (issue 21, item 2): a same-uid client that sends refused
# commands as fast as it can, for a bounded count, leaves the log under its
# cap (rotated once past it), the log says how many lines it suppressed and
# still holds the reason of the first refusal, and the daemon still answers.
#   log_flood.sh [fifo]   fifo: the log is a named pipe (as /dev/null is a
#   device): written past the cap, it is never renamed or replaced (a log
#   at /dev/null was once renamed to /dev/null.1, by a root daemon)
. "$(dirname "$0")/lib.sh"
log=$SV_TEST_DIR/softverbsd.log
cap=65536
count=${SV_FLOOD_COUNT:-100000}
mode=${1:-file}
seen=$log
if [ "$mode" = fifo ]; then
	mkfifo "$log" || fail "mkfifo"
	seen=$SV_TEST_DIR/fifo.out
	cat "$log" >"$seen" &
fi

"$SV_BUILD_DIR/bin/softverbsd" --socket "$SOFTVERBS_SOCKET" --idle-exit 60 \
	--no-roce --log "$log" --log-max-bytes $cap &
daemon=$!
wait_for_line "$seen" 'info: serving' || fail "the daemon did not start"

# 64 connections, one refused command after another on each in turn (each
# answered: a client that does not read its answers is dropped).
python3 - "$SOFTVERBS_SOCKET" "$count" <<'EOF' || fail "the flood client failed"
import os, socket, struct, sys, time
path, count = sys.argv[1], int(sys.argv[2])
socks = []
for _ in range(64):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)
    socks.append(s)
MAGIC, VERSION = 0x31435653, 8
end = time.monotonic() + 30
sent = 0
while sent < count and time.monotonic() < end:
    # an op no daemon knows, or a bad magic: refused
    kind = sent % 2
    op = 0x7fff if kind == 0 else 1
    magic = MAGIC if kind == 0 else 0xdeadbeef
    cmd = struct.pack("<IHHII", magic, op, VERSION, sent + 1, 0)
    cmd += os.urandom(256 - len(cmd))
    s = socks[sent % len(socks)]
    s.send(cmd)
    rsp = s.recv(1024)
    if not rsp:
        sys.exit("the daemon closed the connection after %d" % sent)
    sent += 1
print("sent %d refused commands" % sent)
EOF

# the daemon still answers
"$SV" devinfo >/dev/null || fail "the daemon no longer answers"
if [ "$mode" = fifo ]; then
	wait_for_line "$seen" 'similar messages suppressed' 200 ||
		fail "the log does not say what it suppressed"
	got=$(stat -c %s "$seen")
	[ -p "$log" ] || fail "the named pipe was replaced"
	[ ! -e "$log.1" ] || fail "the named pipe was renamed to $log.1"
	[ "$got" -gt $cap ] || fail "only $got bytes logged: the cap was never reached"
	kill -TERM $daemon
	wait $daemon || fail "the daemon did not stop cleanly"
	rm -f "$log"    # (isolated.sh reads the log: a pipe would block it)
	pass "a log on a named pipe, $got bytes past a cap of $cap: left as it is"
	exit 0
fi
# the suppression counts are written within about a second
wait_for_line "$log" 'similar messages suppressed' 200 ||
	fail "the log does not say what it suppressed"
size=$(stat -c %s "$log")
old=$(stat -c %s "$log.1" 2>/dev/null || echo 0)
echo "log: $size bytes, rotated: $old bytes (cap $cap)"
[ "$size" -le $cap ] && [ "$old" -le $cap ] || fail "the log passed its cap"
total=$(cat "$log.1" "$log" 2>/dev/null |
	sed -n 's/.* \([0-9]*\) similar messages suppressed.*/\1/p' |
	awk '{ s += $1 } END { print s + 0 }')
lines=$(cat "$log.1" "$log" 2>/dev/null | grep -c 'refused')
echo "refusal lines written: $lines, suppressed (counted in the log): $total"
[ "$total" -gt 0 ] || fail "no suppression count"
cat "$log.1" "$log" 2>/dev/null | grep -q 'refused: .*(.*)' ||
	fail "the reason of the first refusal is not in the log"
pass "a flood of $count refused commands: the log stayed under $cap bytes"
kill -TERM $daemon
wait $daemon || fail "the daemon did not stop cleanly"
