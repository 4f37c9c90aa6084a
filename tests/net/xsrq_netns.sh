#!/usr/bin/env bash
# XRC between two hosts: Debian's unmodified ibv_xsrq_pingpong, the server
# in namespace a on a's softverbsd, the client in namespace b on b's, over
# RoCEv2 (XRC opcodes, an XRCETH naming the remote SRQ). Both must exit 0
# within NS_STEP seconds and print "success"; RoCEv2 packets must have
# crossed the veth. On failure: both outputs and both daemons' logs.
#   xsrq_netns.sh BUILD_DIR [--drop PCT] [--clients N] [ARGS...]
#   --drop PCT: b drops PCT % of the RoCEv2 packets it sends or receives
#   (the requester's retransmissions and the responder's duplicates)
#   --clients N: N clients in b (the server's -c N). The server sends to
#   client i's SRQ through the target QP of client (i + k) % N: across the
#   wire into one process's QP, on into another's SRQ, by b's shared domain.
export SV_BUILD_DIR=$1
shift
drop=0 clients=1
while :; do
	case "${1:-}" in
	--drop) drop=$2; shift 2 ;;
	--clients) clients=$2; shift 2 ;;
	*) break ;;
	esac
done
. "$(dirname "$0")/lib.sh"

prog=ibv_xsrq_pingpong
command -v $prog >/dev/null || skip "$prog is not installed (ibverbs-utils)"

ns_pair_up "$(ns_prefix xsrq)" 1500
ns_daemons_up
[ "$drop" = 0 ] || ns_drop_pct "$NS_B" "$drop"
port=18515   # the namespace is ours: any port is free
echo "$prog $*: server $NS_A ($IP_A), client $NS_B ($IP_B)"
start=$SECONDS
if [ "$clients" = 1 ]; then
	if ! ns_run_pair $port $prog -g 0 -p $port "$@"; then
		fail "$prog across namespaces: $NS_WHY after" \
			"$(( SECONDS - start )) s (the logs follow)"
	fi
	outs=("$NS_SOUT" "$NS_COUT")
else
	# one server in a, N clients in b at once (ns_run_pair runs one)
	sout=$NS_DIR/server.out
	ns_log "$sout" "server in $NS_A"
	timeout -k 2 $(( NS_STEP + 5 )) ip netns exec "$NS_A" env \
		SOFTVERBS_SOCKET="$SOCK_A" SOFTVERBS_NO_AUTOSTART=1 \
		"$SV" run -- stdbuf -oL $prog -g 0 -p $port -c "$clients" "$@" \
		>"$sout" 2>&1 &
	srv=$!
	ns_wait_listen "$NS_A" $port $srv 10 ||
		fail "the server never listened on port $port"
	cli=() outs=("$sout")
	for ((k = 0; k < clients; k++)); do
		o=$NS_DIR/client$k.out
		ns_log "$o" "client $k in $NS_B"
		outs+=("$o")
		timeout -k 2 "$NS_STEP" ip netns exec "$NS_B" env \
			SOFTVERBS_SOCKET="$SOCK_B" SOFTVERBS_NO_AUTOSTART=1 \
			"$SV" run -- stdbuf -oL $prog -g 0 -p $port "$@" "$IP_A" \
			>"$o" 2>&1 &
		cli+=($!)
	done
	for ((k = 0; k < clients; k++)); do
		ns_wait_job "${cli[$k]}" $(( NS_STEP + 5 )) ||
			ns_end_job "${cli[$k]}"
		[ "$wait_rc" = 0 ] || fail "client $k: exit $wait_rc"
	done
	ns_wait_job $srv 5 || ns_end_job $srv
	[ "$wait_rc" = 0 ] || fail "server: exit $wait_rc"
fi
for f in "${outs[@]}"; do
	echo "---- $(basename "$f")"; cat "$f"
	grep -qx success "$f" || fail "no 'success' line in $(basename "$f")"
done
count=$(ns_roce_count)
echo "$count"
[[ $count =~ sent\ ([0-9]+),\ received\ ([0-9]+) ]] &&
	[ "${BASH_REMATCH[1]}" -gt 0 ] && [ "${BASH_REMATCH[2]}" -gt 0 ] ||
	fail "no RoCEv2 packets crossed the veth"
pass "$prog $* between two namespaces ($(( SECONDS - start )) s)"
