#!/usr/bin/env bash
# The two-host harness itself, before any RoCE traffic: a namespace pair, a
# softverbsd in each serving sv0 on its own address (--ip), Debian's
# ibv_devinfo inside each namespace seeing GID index 0 = ::ffff:<its address>
# and the active MTU the link's MTU allows, a pingpong server's TCP handshake
# port reachable from the other namespace, ns_drop_pct dropping what it
# says, and nothing left behind.
#   basics_netns.sh BUILD_DIR [MTU]     (MTU of the veth: 1500, or 9000)
export SV_BUILD_DIR=$1
mtu=${2:-1500}
. "$(dirname "$0")/lib.sh"

case "$mtu" in
1500) want_mtu=1024 ;;   # 1500 - headers: 1024 is the largest IB MTU
9000) want_mtu=4096 ;;
*) fail "MTU $mtu: 1500 or 9000" ;;
esac

ns_pair_up "$(ns_prefix "b$mtu")" "$mtu"
echo "pair $NS_A ($IP_A) -- $NS_B ($IP_B), MTU $mtu"
for n in "$NS_A" "$NS_B"; do
	got=$(ip -n "$n" -o link show veth0 | sed -n 's/.* mtu \([0-9]*\) .*/\1/p')
	[ "$got" = "$mtu" ] || fail "veth0 in $n has MTU '$got', not $mtu"
done
ip link show veth0 >/dev/null 2>&1 &&
	ip -o link show veth0 | grep -q "$NS_A\|$NS_B" &&
	fail "a veth of the pair is in the root namespace"

# ---- ns_drop_pct, before the daemons (a plain UDP receiver on 4791) ----
if command -v nft >/dev/null; then
	sent=2000 pct=30
	ns_drop_pct "$NS_A" "$pct"
	rx=$NS_DIR/udp_rx.out
	: >"$rx"
	ns_log "$rx" "UDP receiver"
	# the receiver counts until the sender's end marker (port 4792, not
	# dropped) then drains what is queued
	timeout 20 ip netns exec "$NS_A" /usr/bin/python3 -c '
import socket, sys, select
ip = sys.argv[1]
r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
r.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE
r.bind((ip, 4791))
m = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); m.bind((ip, 4792))
print("ready", flush=True)
n = 0
while True:
    rd, _, _ = select.select([r, m], [], [], 15)
    if not rd: break
    if r in rd: r.recv(2048); n += 1
    elif m in rd:
        m.recv(16)
        r.setblocking(False)
        try:
            while True: r.recv(2048); n += 1
        except BlockingIOError: pass
        break
print("received", n, flush=True)' "$IP_A" >"$rx" 2>&1 &
	rxpid=$!
	for _ in $(seq 1 200); do grep -q ready "$rx" && break; sleep 0.05; done
	grep -q ready "$rx" || fail "UDP receiver not ready"
	timeout 20 ip netns exec "$NS_B" /usr/bin/python3 -c '
import socket, sys
ip, n = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(n): s.sendto(b"x" * 64, (ip, 4791))
s.sendto(b"end", (ip, 4792))' "$IP_A" "$sent" || fail "UDP sender"
	ns_wait_job "$rxpid" 20 || fail "UDP receiver still running"
	got=$(awk '/^received/ {print $2}' "$rx")
	dropped=$(ns_dropped "$NS_A")
	echo "ns_drop_pct $pct: $sent sent, $got received, $dropped dropped by the rule"
	[ -n "$got" ] || fail "no count from the UDP receiver"
	[ $(( got + dropped )) = "$sent" ] ||
		fail "received $got + dropped $dropped != sent $sent"
	# 30 % of 2000: 600 expected, sd 20.5; 450..750 is > 7 sd
	{ [ "$dropped" -ge 450 ] && [ "$dropped" -le 750 ]; } ||
		fail "dropped $dropped of $sent, not about $pct %"
	count=$(ns_roce_count)
	echo "$count"
	[[ $count == *"received $sent "* ]] || fail "a's counters: $count"
	ns_drop_pct "$NS_A" 0
	ip netns exec "$NS_A" nft list tables | grep -q svdrop &&
		fail "ns_drop_pct 0 left the table"
	pass "ns_drop_pct drops about $pct % of UDP to 4791"
else
	echo "no nft: ns_drop_pct not checked"
fi

# ---- a daemon in each namespace, sv0 on its address ----
ns_daemons_up
for side in a b; do
	if [ $side = a ]; then n=$NS_A ip=$IP_A s=$SOCK_A; else n=$NS_B ip=$IP_B s=$SOCK_B; fi
	out=$NS_DIR/devinfo.$side
	ns_log "$out" "ibv_devinfo -v in $n"
	ns_sv "$n" "$s" timeout 10 "$SV" run -- ibv_devinfo -v >"$out" 2>&1 ||
		fail "ibv_devinfo -v in $n"
	grep -q $'^hca_id:\tsv0$' "$out" || fail "$n: no hca_id sv0"
	grep -Eq 'state:[[:space:]]+PORT_ACTIVE \(4\)' "$out" || fail "$n: port not ACTIVE"
	grep -Eq "GID\\[  0\\]:[[:space:]]+::ffff:${ip//./\\.}, RoCE v2" "$out" ||
		fail "$n: GID[0] is not ::ffff:$ip"
	grep -Eq "active_mtu:[[:space:]]+$want_mtu " "$out" ||
		fail "$n: active_mtu not $want_mtu on a $mtu-byte link"
	grep -E 'GID\[  0\]|active_mtu' "$out" | sed "s/^/$n: /"
done
[ "$(ns_sv "$NS_A" "$SOCK_A" "$SV" devinfo | grep -c "$IP_A")" -ge 1 ] ||
	fail "softverbs devinfo in $NS_A does not show $IP_A"
pass "each namespace's sv0 serves its own address, MTU $want_mtu"

# a client with no daemon on its socket fails, and starts none
nosock=$NS_DIR/none/control
mkdir -p "$(dirname "$nosock")"
ns_sv "$NS_A" "$nosock" timeout 10 "$SV" run -- ibv_devinfo >/dev/null 2>&1 &&
	fail "ibv_devinfo found a device with no daemon on $nosock"
[ -n "$(ls -A "$(dirname "$nosock")")" ] &&
	fail "a client auto-started a daemon despite SOFTVERBS_NO_AUTOSTART"
pass "with SOFTVERBS_NO_AUTOSTART=1 and no daemon, no device and none started"

# ---- the pingpong's TCP handshake port, across ----
port=18515
pout=$NS_DIR/pp_server.out
ns_log "$pout" "ibv_rc_pingpong server in $NS_A"
timeout -k 2 20 ip netns exec "$NS_A" env SOFTVERBS_SOCKET="$SOCK_A" \
	SOFTVERBS_NO_AUTOSTART=1 "$SV" run -- ibv_rc_pingpong -g 0 -p $port \
	>"$pout" 2>&1 &
pp=$!
ns_wait_listen "$NS_A" $port $pp 10 || fail "ibv_rc_pingpong server never listened"
ip netns exec "$NS_B" timeout 5 bash -c "exec 3<>/dev/tcp/$IP_A/$port" ||
	fail "$NS_B cannot connect to $IP_A:$port"
# the server saw a peer that sent nothing: it gives up by itself
ns_wait_job $pp 10 || fail "pingpong server did not end after the bare connect"
pass "$NS_B reaches the pingpong server's port $IP_A:$port"

# ---- an idle daemon with a RoCEv2 port sleeps: none of its threads (the
# control thread, the engine, the wire thread) runs across a quiet half
# second (a sleeping thread's CPU time and context switches do not move,
# however long the interval) ----
threads() { # pid: "tid comm ticks switches" per thread
	local t
	for t in /proc/"$1"/task/*; do
		echo "$(basename "$t") $(cat "$t/comm")" \
		     "$(awk '{print $14 + $15}' "$t/stat")" \
		     "$(awk '/^(non)?voluntary_ctxt_switches/ {n += $2} END {print n}' "$t/status")"
	done
}
grep -q sv-wire /proc/"$PID_A"/task/*/comm || fail "no sv-wire thread in $NS_A's daemon"
# the daemons settle (their last client went a moment ago)
sleep 0.5
before=$(threads "$PID_A")
sleep 0.5
after=$(threads "$PID_A")
if [ "$before" != "$after" ]; then
	echo "before: $before" >&2
	echo "after:  $after" >&2
	fail "an idle daemon's threads ran"
fi
pass "an idle daemon (engine, wire thread, control) does not run: $(echo "$after" | wc -l) threads asleep"

# ---- cleanup leaves nothing ----
pids=("${NS_PIDS[@]}")
ns_cleanup 0 || fail "cleanup"
for n in "$NS_A" "$NS_B"; do
	ip netns list | awk '{print $1}' | grep -qx "$n" && fail "$n still exists"
done
for p in "${pids[@]}"; do _ns_gone "$p" || fail "daemon $p still running"; done
[ -d "$NS_DIR" ] && fail "$NS_DIR still exists"
pass "cleanup: namespaces, daemons and files gone"
