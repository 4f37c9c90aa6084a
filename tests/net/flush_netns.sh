#!/usr/bin/env bash
# RDMA FLUSH from a raw RoCEv2 peer (issue 23; tests/net/sv_flush_wire.c):
# a device in namespace a only; in b, no device, the peer program owns UDP
# port 4791 and sends the packets Linux 6.2+ rxe sends (BTH, FETH, RETH;
# opcode 0x1C) to an RC QP of a's: a WRITE, FLUSHes of its range and of the
# MR (each answered by a zero-length READ response), a duplicate (answered
# again, not executed again), and one to an MR without the FLUSH_GLOBAL
# right (a NAK remote access error, the QP in error).
#   flush_netns.sh BUILD_DIR
export SV_BUILD_DIR=$1
. "$(dirname "$0")/lib.sh"

PROG=$SV_BUILD_DIR/bin/sv_flush_wire
[ -x "$PROG" ] || fail "$PROG missing (build first)"
ns_pair_up "$(ns_prefix flush)"
SOCK_A=$NS_DIR/a/control
ns_daemon "$NS_A" "$IP_A" "$SOCK_A"
psn=4660 dqpn=291

fifo=$NS_DIR/flush.in
mkfifo "$fifo" || fail "mkfifo"
sout=$NS_DIR/flush-server.out
ns_log "$sout" "sv_flush_wire server (a)"
ns_sv "$NS_A" "$SOCK_A" timeout -k 2 30 "$SV" run -- "$PROG" server \
	"$IP_B" $dqpn $psn <"$fifo" >"$sout" 2>&1 &
spid=$!
NS_PIDS+=("$spid")
exec 7>"$fifo"
line=
for _ in $(seq 1 100); do
	line=$(head -n 1 "$sout" 2>/dev/null)
	[ -n "$line" ] && break
	_ns_gone "$spid" && break
	sleep 0.1
done
[ -n "$line" ] || { cat "$sout"; fail "the server did not start"; }
read -r qpn va rkey va2 rkey2 <<<"$line"
echo "server: qpn $qpn, MR $va/$rkey, MR without flush $va2/$rkey2"
timeout 20 ip netns exec "$NS_B" "$PROG" peer "$IP_B" "$IP_A" $dqpn $psn \
	"$qpn" "$va" "$rkey" "$va2" "$rkey2"
prc=$?
[ $prc -eq 0 ] || ns_sv "$NS_A" "$SOCK_A" timeout 5 "$SV" stat
echo check >&7
exec 7>&-
ns_wait_job "$spid" 20 || ns_end_job "$spid"
cat "$sout"
[ $prc -eq 0 ] || fail "the peer failed ($prc)"
[ "$wait_rc" -eq 0 ] || fail "the server failed ($wait_rc)"
grep -q "server: the WRITE landed" "$sout" || fail "the server did not check"
pass "flush from a raw RoCEv2 peer: range, MR, duplicate, no right"
