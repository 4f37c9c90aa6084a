#!/usr/bin/env bash
# Debian's unmodified ibv_*_pingpong between two hosts: the server in
# namespace a on a's softverbsd, the client in namespace b on b's, RoCEv2
# over the veth between them (-g 0: GID index 0, ::ffff:10.X.Y.Z). Both must
# exit 0 within NS_STEP (20) seconds and print their result lines. On
# failure: both programs' outputs and both daemons' logs.
#   pingpong_netns.sh BUILD_DIR MODE
#   MODE: rc uc ud srq rc_1m rc_events rc_jumbo (rc, 1 MiB, veth MTU 9000)
export SV_BUILD_DIR=$1
mode=${2:-}
. "$(dirname "$0")/lib.sh"

mtu=1500
case "$mode" in
rc)        prog=ibv_rc_pingpong;  args=() ;;
rc_1m)     prog=ibv_rc_pingpong;  args=(-s 1048576 -n 100) ;;
rc_events) prog=ibv_rc_pingpong;  args=(-e) ;;
rc_jumbo)  prog=ibv_rc_pingpong;  args=(-s 1048576 -n 100 -m 4096) mtu=9000 ;;
uc)        prog=ibv_uc_pingpong;  args=() ;;
ud)        prog=ibv_ud_pingpong;  args=(-s 1024) ;;  # the MTU of a 1500 link
srq)       prog=ibv_srq_pingpong; args=() ;;
*)         fail "unknown mode '$mode'" ;;
esac
command -v "$prog" >/dev/null || skip "$prog is not installed (ibverbs-utils)"

ns_pair_up "$(ns_prefix "pp$mode")" $mtu
ns_daemons_up
port=18515   # the namespace is ours: any port is free
echo "$prog ${args[*]}: server $NS_A ($IP_A), client $NS_B ($IP_B)"
start=$SECONDS
if ! ns_run_pair $port "$prog" -g 0 -p $port -c "${args[@]}"; then
	fail "$prog across namespaces: $NS_WHY after $(( SECONDS - start )) s" \
		"(the logs follow)"
fi
echo "---- server"; cat "$NS_SOUT"; echo "---- client"; cat "$NS_COUT"
for f in "$NS_SOUT" "$NS_COUT"; do
	grep -Eq '^[0-9]+ bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec$' "$f" ||
		fail "no 'bytes in ... seconds' line in $(basename "$f")"
	grep -Eq '^[0-9]+ iters in [0-9.]+ seconds = [0-9.]+ usec/iter$' "$f" ||
		fail "no 'iters in ... seconds' line in $(basename "$f")"
done
pass "$prog ${args[*]} between two namespaces ($(( SECONDS - start )) s)"
