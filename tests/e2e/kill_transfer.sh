#!/usr/bin/env bash
# A process SIGKILLed in the middle of an RC stream (Debian's perftest, run
# for a long duration): the survivor meets errors and exits by itself (it
# does not hang), and then 'softverbs stat' shows every object of both
# freed.
#   kill_transfer.sh CASE
#     write_bw_server  ib_write_bw: the server (the target of the writes)
#                      dies; the writer gets error completions
#     send_bw_server   ib_send_bw: the receiver dies; the sender gets errors
#     write_bw_client  ib_write_bw: the writer dies; the server, waiting on
#                      its peer, sees it gone and exits
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/peers.sh"

case "$1" in
write_bw_server) prog=ib_write_bw; victim=server ;;
send_bw_server)  prog=ib_send_bw;  victim=server ;;
write_bw_client) prog=ib_write_bw; victim=client ;;
*) fail "unknown case $1" ;;
esac
command -v "$prog" >/dev/null || fail "$prog is not installed (perftest)"

# a client of our own keeps the device up until the last check (it holds a
# PD and a completion channel, nothing else)
"$HOLD" --pd 1 --mr 0 --cq 0 >"$SV_TEST_DIR/hold.out" &
holder=$!
wait_for_line "$SV_TEST_DIR/hold.out" '^ready' || fail "holder never got ready"

port=$(free_port)
sout=$SV_TEST_DIR/server.out
cout=$SV_TEST_DIR/client.out
show() { echo "---- server"; cat "$sout"; echo "---- client"; cat "$cout"; }

# -D: run for a duration far longer than this test may take, so that only
# an error can end the survivor in time
# (stdbuf: perftest's stdout is a file here; its lines must show as they
# are printed)
"$SV" run -- stdbuf -oL "$prog" -d sv0 -x 0 -p "$port" -D 600 >"$sout" 2>&1 &
srv=$!
wait_listen "$port" $srv || { show; fail "$prog server never listened"; }
"$SV" run -- stdbuf -oL "$prog" -d sv0 -x 0 -p "$port" -D 600 localhost >"$cout" 2>&1 &
cli=$!

# under way: the client has printed its results header (perftest does so as
# the measured loop starts) and the device holds both sides' QPs
wait_for_line "$cout" '#bytes' 1200 || { show; fail "the transfer never started"; }
for _ in $(seq 1 400); do
	[ "$(stat_total qp)" -ge 2 ] 2>/dev/null && break
	sleep 0.025
done
"$SV" stat
[ "$(stat_total qp)" -ge 2 ] || fail "the device does not hold both QPs"

if [ $victim = server ]; then
	kill -KILL $srv
	wait $srv 2>/dev/null
	survivor=$cli; name=client; out=$cout
else
	kill -KILL $cli
	wait $cli 2>/dev/null
	survivor=$srv; name=server; out=$sout
fi
echo "killed the $victim"

if ! wait_job $survivor 40; then
	kill -KILL $survivor 2>/dev/null
	show
	fail "the $name still runs 40 s after its peer was killed (a hang)"
fi
show
[ "$wait_rc" != 0 ] || fail "the $name exited 0 although its peer was killed mid-transfer"
pass "the $name stopped by itself (status $wait_rc) after its peer was killed"

freed=
for _ in $(seq 1 400); do
	all=
	for t in channel pd cq mr srq qp ah; do
		all="$all$(stat_total $t)"
	done
	if [ "$all" = 1100000 ]; then   # the holder's channel and PD
		freed=1
		break
	fi
	sleep 0.025
done
"$SV" stat
[ -n "$freed" ] || fail "objects still held after both processes ended"
"$SV" stat | grep -q '^keys live: 0$' || fail "MR keys still live"
pass "every object of both processes freed"
kill $holder
wait $holder 2>/dev/null
exit 0
