#!/usr/bin/env bash
# The harness works: one guest boot in which
#   - rxe0 shows in the guest's ibv_devinfo, GID 1 = ::ffff:10.88.0.2,
#   - the host namespace pings the guest (busybox ping, from the guest build),
#   - a TCP connection from the host namespace reaches an ibv_rc_pingpong
#     server in the guest: the host sends it a pingpong address message
#     (the 52-byte "LID:QPN:PSN:GID") and reads the server's own back, which
#     must carry rxe0's IPv4-mapped GID. The server then fails ("done" never
#     comes): expected, no RDMA traffic is involved here.
# No softverbs in this one: it checks the peer, not us.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

bash "$here/build-guest.sh" || fail "building the guest"
ig_setup harness
cmd=$IG_RUN/cmd.in
cat >"$cmd" <<'EOF'
ibv_devinfo -d rxe0 -v | grep -E 'hca_id|transport|state|active_mtu|link_layer|GID\[ *[01]\]'
timeout 60 ibv_rc_pingpong -d rxe0 -g 1 >/tmp/srv.out 2>&1 &
p=$!
sv_wait_listen 18515 $p 30 || { cat /tmp/srv.out; say "FAIL no listener"; exit 1; }
say "listening 18515"
wait $p
rc=$?
cat /tmp/srv.out
say "server exited rc=$rc"
exit 0
EOF
ig_capture
ig_boot "$cmd"
ig_wait_ready
t=$(date +%s.%N)
ig_ns "$IG_GUEST/busybox" ping -c 3 -W 10 "$IG_GUEST_IP" >"$IG_RUN/ping.log" 2>&1 ||
	{ ig_log "$IG_RUN/ping.log" ping; fail "the host namespace cannot ping the guest"; }
ig_say "ping: $(grep -a 'packets transmitted' "$IG_RUN/ping.log"), $(grep -a 'round-trip' "$IG_RUN/ping.log")"
ig_wait "listening 18515"
# our address message: LID 0, QPN 0x11, PSN 1, GID ::ffff:10.88.0.1
msg='0000:000011:000001:00000000000000000000ffff0a580001'
t=$(date +%s.%N)
reply=$(ig_ns timeout 30 bash -c "exec 3<>/dev/tcp/$IG_GUEST_IP/18515 || exit 1
	printf '%s\0' '$msg' >&3
	head -c 52 <&3 | tr -d '\\0'") ||
	fail "no TCP exchange with the pingpong server in the guest"
ig_say "TCP to the guest's ibv_rc_pingpong server ($(_ig_since "$t") s): sent $msg, got $reply"
case "$reply" in
0000:[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]:[0-9a-f]*:00000000000000000000ffff0a580002) ;;
*) fail "the server's answer is not an address with GID ::ffff:10.88.0.2: '$reply'" ;;
esac
ig_wait "server exited"
ig_end
ig_output | sed 's/^/  guest| /'
[ "$IG_RC" -eq 0 ] || fail "the guest command failed ($IG_RC)"
ig_output | grep -q 'GID\[ *1\]:.*::ffff:10.88.0.2' || fail "rxe0's GID 1 is not ::ffff:10.88.0.2"
ig_output | grep -q 'state:.*PORT_ACTIVE' || fail "rxe0's port is not active"
ig_say "timings: ready $IG_T_READY s after qemu started, powered off at $IG_T_END s"
pass "rxe peer up: rxe0 in ibv_devinfo, ping, TCP to its pingpong server"
ig_passed
