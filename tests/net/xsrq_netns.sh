#!/usr/bin/env bash
# XRC between two hosts: Debian's unmodified ibv_xsrq_pingpong, the server
# in namespace a on a's softverbsd, the client in namespace b on b's, over
# RoCEv2 (XRC opcodes, an XRCETH naming the remote SRQ). Both must exit 0
# within NS_STEP seconds and print "success"; RoCEv2 packets must have
# crossed the veth. On failure: both outputs and both daemons' logs.
#   xsrq_netns.sh BUILD_DIR [--drop PCT] [ARGS...]
#   --drop PCT: b drops PCT % of the RoCEv2 packets it sends or receives
#   (the requester's retransmissions and the responder's duplicates)
export SV_BUILD_DIR=$1
shift
drop=0
if [ "${1:-}" = --drop ]; then drop=$2; shift 2; fi
. "$(dirname "$0")/lib.sh"

prog=ibv_xsrq_pingpong
command -v $prog >/dev/null || skip "$prog is not installed (ibverbs-utils)"

ns_pair_up "$(ns_prefix xsrq)" 1500
ns_daemons_up
[ "$drop" = 0 ] || ns_drop_pct "$NS_B" "$drop"
port=18515   # the namespace is ours: any port is free
echo "$prog $*: server $NS_A ($IP_A), client $NS_B ($IP_B)"
start=$SECONDS
if ! ns_run_pair $port $prog -g 0 -p $port "$@"; then
	fail "$prog across namespaces: $NS_WHY after $(( SECONDS - start )) s" \
		"(the logs follow)"
fi
echo "---- server"; cat "$NS_SOUT"; echo "---- client"; cat "$NS_COUT"
for f in "$NS_SOUT" "$NS_COUT"; do
	grep -qx success "$f" || fail "no 'success' line in $(basename "$f")"
done
count=$(ns_roce_count)
echo "$count"
[[ $count =~ sent\ ([0-9]+),\ received\ ([0-9]+) ]] &&
	[ "${BASH_REMATCH[1]}" -gt 0 ] && [ "${BASH_REMATCH[2]}" -gt 0 ] ||
	fail "no RoCEv2 packets crossed the veth"
pass "$prog $* between two namespaces ($(( SECONDS - start )) s)"
