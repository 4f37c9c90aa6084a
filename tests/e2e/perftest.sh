#!/usr/bin/env bash
# Debian's unmodified perftest: one default run of an ib_* benchmark, server
# and client processes on this host through 'softverbs run', device sv0,
# GID index 0 (RoCE), a TCP port of their own. Both must exit 0, and each
# that measures must print its results table (the '#bytes' header and a row
# of numbers).
#   perftest.sh PROG   (ib_write_bw ib_write_lat ib_read_bw ib_read_lat
#                       ib_send_bw ib_send_lat ib_atomic_bw ib_atomic_lat)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/peers.sh"

prog=$1
case "$prog" in
ib_write_bw|ib_write_lat|ib_read_bw|ib_read_lat|ib_send_bw|ib_send_lat|\
ib_atomic_bw|ib_atomic_lat) ;;
*) fail "unknown benchmark $prog" ;;
esac
command -v "$prog" >/dev/null || fail "$prog is not installed (perftest)"

port=$(free_port)
sout=$SV_TEST_DIR/server.out
cout=$SV_TEST_DIR/client.out
show() { echo "---- server"; cat "$sout"; echo "---- client"; cat "$cout"; }

"$SV" run -- "$prog" -d sv0 -x 0 -p "$port" >"$sout" 2>&1 &
srv=$!
wait_listen "$port" $srv || { show; fail "$prog server never listened"; }
start=$(date +%s)
"$SV" run -- "$prog" -d sv0 -x 0 -p "$port" localhost >"$cout" 2>&1 &
cli=$!
if ! wait_job $cli 90; then
	kill -KILL $cli $srv 2>/dev/null
	show
	fail "$prog client still running after 90 s"
fi
crc=$wait_rc
if ! wait_job $srv 20; then
	kill -KILL $srv 2>/dev/null
	show
	fail "$prog server still running 20 s after the client ended"
fi
src=$wait_rc
show
echo "($prog: $(( $(date +%s) - start )) s)"
[ "$crc" = 0 ] || fail "$prog client exited with $crc"
[ "$src" = 0 ] || fail "$prog server exited with $src"

# the results: the header, then a row that starts with the message size; in
# ib_read_lat and ib_atomic_lat the server is passive and only the client
# measures (perftest prints nothing on that server)
files=("$cout" "$sout")
case "$prog" in ib_read_lat|ib_atomic_lat) files=("$cout") ;; esac
for f in "${files[@]}"; do
	awk '/#bytes/ { hdr = 1; next }
	     hdr && $1 ~ /^[0-9]+$/ && NF >= 3 { ok = 1 }
	     END { exit !ok }' "$f" ||
		fail "no results table in $(basename "$f")"
done
pass "$prog: a default run between two processes, results on both sides"
