#!/usr/bin/env bash
# make demo: a real two-process RDMA transfer on the auto-started device.
# Debian's unmodified ibv_rc_pingpong runs as a server and as a client,
# each through 'softverbs run' (RoCE: GID index 0); the first one starts
# softverbsd, which leaves by itself once both are done.
#   demo.sh BUILD_DIR
set -u
build=$(cd "${1:-build}" && pwd) || exit 1
SV=$build/bin/softverbs
export SOFTVERBS_IDLE_EXIT=${SOFTVERBS_IDLE_EXIT:-2}
out=$(mktemp -d /tmp/softverbs-demo.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$out"' EXIT

port=$(/usr/bin/python3 -c 'import socket
s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
listening() {
	awk -v p=":$(printf '%04X' "$port")" \
		'$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 }
		 END { exit !f }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

already=
"$SV" stat >/dev/null 2>&1 && already=1

# 64 KiB messages, 1000 round trips, sleeping on completion events (-e:
# the two processes leave the CPUs to the device), every byte checked (-c)
args=(-g 0 -p "$port" -s 65536 -n 1000 -e -c)
echo "== softverbs run -- ibv_rc_pingpong ${args[*]}            (server)"
echo "== softverbs run -- ibv_rc_pingpong ${args[*]} localhost  (client)"
"$SV" run -- ibv_rc_pingpong "${args[@]}" >"$out/server" 2>&1 &
srv=$!
for _ in $(seq 1 400); do
	listening && break
	kill -0 $srv 2>/dev/null || break
	sleep 0.05
done
if ! listening; then
	cat "$out/server"
	echo "demo: the server never listened" >&2
	exit 1
fi
"$SV" run -- ibv_rc_pingpong "${args[@]}" localhost >"$out/client" 2>&1
crc=$?
wait $srv
src=$?
echo "-- server:"
sed 's/^/   /' "$out/server"
echo "-- client:"
sed 's/^/   /' "$out/client"
if [ $src -ne 0 ] || [ $crc -ne 0 ]; then
	echo "demo: FAILED (server $src, client $crc)" >&2
	exit 1
fi
echo "== two processes, one RC connection: 1000 round trips of 64 KiB, every"
echo "   byte checked (-c); each SEND is one process_vm_writev of the sender"
echo "   into the receiver (the direct path; with SOFTVERBS_DIRECT=0,"
echo "   softverbsd's process_vm_readv/writev)"

if [ -n "$already" ]; then
	echo "== (a softverbsd was already running; it stays)"
	exit 0
fi
# which daemon served us (one probe; probing again would keep it busy)
dpid=$("$SV" stat 2>/dev/null | sed -n 's/^daemon pid \([0-9]*\),.*/\1/p')
if [ -z "$dpid" ]; then
	echo "== the device started by itself and is gone again"
	exit 0
fi
for _ in $(seq 1 300); do
	if ! kill -0 "$dpid" 2>/dev/null ||
	   [ "$(awk '{print $3}' /proc/"$dpid"/stat 2>/dev/null)" = Z ]; then
		echo "== the device (softverbsd, pid $dpid) started by itself and is gone again"
		exit 0
	fi
	sleep 0.05
done
echo "demo: softverbsd (pid $dpid) still running 15 s after its last client" >&2
exit 1
