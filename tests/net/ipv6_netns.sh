#!/usr/bin/env bash
# IPv6 and --netdev: both daemons serve every address of their veth
# (softverbsd --netdev veth0): GID 0 the IPv4 address, GID 1 a ULA IPv6
# address (fd5e::1 / ::2), GID 2 the link-local one. Debian's unmodified
# ibv_rc_pingpong, ibv_ud_pingpong and ib_write_bw run across over GID 1
# and ibv_rc_pingpong over GID 2 (IPv6 RoCEv2: the ICRC over the IPv6
# pseudo-header, the UD GRH an IPv6 header), counted by an ip6 nftables rule;
# ibv_rc_pingpong over GID 0 still runs IPv4 on the same daemons. The
# pingpongs check every byte they receive (-c).
#   ipv6_netns.sh BUILD_DIR
export SV_BUILD_DIR=$1
. "$(dirname "$0")/lib.sh"

for p in ibv_rc_pingpong ibv_ud_pingpong ib_write_bw; do
	command -v $p >/dev/null || skip "$p is not installed"
done
ns_pair_up "$(ns_prefix ipv6)"
# lib.sh turns IPv6 off; on again, addresses usable at once (no DAD)
V6_A=fd5e::1 V6_B=fd5e::2
for n in "$NS_A" "$NS_B"; do
	ip netns exec "$n" sysctl -qw net.ipv6.conf.veth0.accept_dad=0 \
		net.ipv6.conf.all.disable_ipv6=0 \
		net.ipv6.conf.veth0.disable_ipv6=0 || fail "IPv6 on in $n"
done
ip -n "$NS_A" addr add $V6_A/64 dev veth0 nodad || fail "IPv6 address in $NS_A"
ip -n "$NS_B" addr add $V6_B/64 dev veth0 nodad || fail "IPv6 address in $NS_B"
for n in "$NS_A" "$NS_B"; do
	for _ in $(seq 1 100); do
		ip -n "$n" -6 addr show dev veth0 scope link | grep -q 'inet6 fe80' &&
			break
		sleep 0.05
	done
	ip -n "$n" -6 addr show dev veth0 scope link | grep -q 'inet6 fe80' ||
		fail "no link-local address in $n"
done
err=$(ip netns exec "$NS_B" timeout 10 bash -c "exec 3<>/dev/tcp/$V6_A/9" 2>&1)
[[ $err == *"Connection refused"* ]] || fail "$NS_B does not reach $V6_A: $err"
# count the RoCEv2 packets over IPv6 that a receives
ip netns exec "$NS_A" nft -f - <<-NFT || fail "ip6 counter in $NS_A"
table ip6 sv6count {
	chain in { type filter hook input priority -10; udp dport 4791 counter; }
}
NFT
v6_count() {
	ip netns exec "$NS_A" nft list table ip6 sv6count |
		awk '/counter packets/ { for (i = 1; i < NF; i++)
			if ($i == "packets") print $(i + 1) }'
}

NS_DAEMON_ARGS="--netdev veth0 ${NS_DAEMON_ARGS:-}"
SOCK_A=$NS_DIR/a/control SOCK_B=$NS_DIR/b/control
ns_daemon "$NS_A" "" "$SOCK_A"
ns_daemon "$NS_B" "" "$SOCK_B"

# the GID tables
for side in a b; do
	if [ $side = a ]; then n=$NS_A ip=$IP_A v6=$V6_A s=$SOCK_A; else n=$NS_B ip=$IP_B v6=$V6_B s=$SOCK_B; fi
	out=$NS_DIR/devinfo.$side
	ns_log "$out" "ibv_devinfo -v in $n"
	ns_sv "$n" "$s" timeout 10 "$SV" run -- ibv_devinfo -v >"$out" 2>&1 ||
		fail "ibv_devinfo -v in $n"
	grep -Eq "GID\\[  0\\]:[[:space:]]+::ffff:${ip//./\\.}, RoCE v2" "$out" ||
		fail "$n: GID[0] is not ::ffff:$ip"
	grep -Eq "GID\\[  1\\]:[[:space:]]+$v6, RoCE v2" "$out" ||
		fail "$n: GID[1] is not $v6"
	grep -Eq "GID\\[  2\\]:[[:space:]]+fe80:" "$out" ||
		fail "$n: GID[2] is not link-local"
done
pass "GIDs: ::ffff:IPv4, $V6_A / $V6_B, fe80::"

run() { # what prog args...
	local what=$1 before after
	shift
	before=$(v6_count)
	ns_run_pair 18515 "$@" || fail "$what: $NS_WHY"
	after=$(v6_count)
	echo "$what: $((after - before)) RoCEv2 packets over IPv6 into $NS_A"
	V6_DELTA=$((after - before))
}
run "rc over GID 1" ibv_rc_pingpong -d sv0 -g 1 -n 200 -s 4096 -c
[ "$V6_DELTA" -gt 0 ] || fail "rc over GID 1 sent nothing over IPv6"
run "ud over GID 1" ibv_ud_pingpong -d sv0 -g 1 -n 200 -s 1024 -c
[ "$V6_DELTA" -gt 0 ] || fail "ud over GID 1 sent nothing over IPv6"
run "ib_write_bw over GID 1" ib_write_bw -d sv0 -x 1 -s 1048576 -n 200
[ "$V6_DELTA" -gt 0 ] || fail "ib_write_bw over GID 1 sent nothing over IPv6"
run "rc over GID 2 (link-local)" ibv_rc_pingpong -d sv0 -g 2 -n 100 -c
[ "$V6_DELTA" -gt 0 ] || fail "rc over GID 2 sent nothing over IPv6"
run "rc over GID 0" ibv_rc_pingpong -d sv0 -g 0 -n 100
[ "$V6_DELTA" = 0 ] || fail "rc over GID 0 went over IPv6"
pass "IPv6 RoCEv2 with --netdev: rc, ud, ib_write_bw over a ULA GID, rc over link-local, IPv4 alongside"
