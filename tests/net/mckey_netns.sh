#!/usr/bin/env bash
# rdma_cm multicast across two hosts: Debian's unmodified mckey, a receiver
# in namespace a (two ids, each its own UD QP attached to the group) and a
# receiver beside the sender in namespace b. Each id resolves the group from
# its own daemon's address and joins on that daemon (no CM message crosses);
# the sender's datagrams reach b's receiver through b's daemon, and a's
# across the veth as IP multicast. Every receiving QP must get all 10
# messages (mckey polls until it has them), and a's nftables counters show
# the group's datagrams coming in and nothing going out.
# mckey's sender destroys its AH and QP right after posting its sends
# unsignaled; what it posted before still goes out (docs/DESIGN.md, "The
# data path", work posted before a destroy): one sender run must do.
#   mckey_netns.sh BUILD_DIR
export SV_BUILD_DIR=$1
. "$(dirname "$0")/lib.sh"

command -v mckey >/dev/null || skip "rdmacm-utils is not installed"
GROUP=239.5.6.7 NMSG=10

ns_pair_up "$(ns_prefix mckey)"
ns_daemons_up
ip netns exec "$NS_A" nft reset counters table inet svcount >/dev/null 2>&1

# mckey receiving in NS on SOCK's daemon, bound to IP, with N ids; its
# output line-buffered into OUT (a "joined" line per id: its QP attached).
# Sets rpid.
receiver() { # ns sock ip n out
	ns_log "$5" "mckey receiver in $1"
	ns_sv "$1" "$2" timeout -k 2 90 "$SV" run -- stdbuf -oL \
		mckey -m $GROUP -b "$3" -c "$4" -C $NMSG >"$5" 2>&1 &
	rpid=$!
}

# Bounded wait until OUT has N "joined" lines, or PID is gone.
joined() { # out n pid
	local i
	for i in $(seq 1 400); do
		[ "$(grep -c '^mckey: joined dgid' "$1")" -ge "$2" ] && return 0
		_ns_gone "$3" && return 1
		sleep 0.05
	done
	return 1
}

ra=$NS_DIR/receiver-a.out rb=$NS_DIR/receiver-b.out so=$NS_DIR/sender.out
receiver "$NS_A" "$SOCK_A" "$IP_A" 2 "$ra"
pa=$rpid
receiver "$NS_B" "$SOCK_B" "$IP_B" 1 "$rb"
pb=$rpid
joined "$ra" 2 "$pa" || fail "the receiver in $NS_A did not join"
joined "$rb" 1 "$pb" || fail "the receiver in $NS_B did not join"

ns_log "$so" "mckey sender in $NS_B"
ns_sv "$NS_B" "$SOCK_B" timeout -k 2 30 "$SV" run -- \
	mckey -m $GROUP -b "$IP_B" -s -C $NMSG >"$so" 2>&1
rc=$?
[ $rc = 0 ] || fail "the sender: $(ns_why $rc)"
ok=1
for p in "$pa:$NS_A" "$pb:$NS_B"; do
	ns_wait_job "${p%%:*}" 30 || ns_end_job "${p%%:*}"
	[ "$wait_rc" = 0 ] || { echo "the receiver in ${p#*:}: $(ns_why "$wait_rc")" >&2; ok=0; }
done
[ $ok = 1 ] || fail "multicast across the pair (one sender run)"
cat "$ra" "$rb" "$so"
for f in "$ra" "$rb"; do
	grep -q '^data transfers complete' "$f" || fail "$f: no transfers"
done
[ "$(grep -c "^mckey: joined dgid: ::ffff:$GROUP mlid 0x0 sl 0\$" "$ra" "$rb" "$so" |
	awk -F: '{ s += $2 } END { print s }')" = 4 ] || fail "the joins' address handles"

count=$(ns_roce_count)
echo "$count"
[[ $count =~ sent\ 0,\ received\ ([0-9]+)\  ]] && [ "${BASH_REMATCH[1]}" -ge $NMSG ] ||
	fail "expected the group's datagrams into $NS_A and none out: $count"
pass "mckey across the pair (group $GROUP): 2 receiving QPs in $NS_A, 1 beside the sender in $NS_B, $NMSG messages each, one sender run"
