#!/usr/bin/env bash
# Debian's unmodified ibv_*_pingpong (ibverbs-utils): a server and a client
# process through 'softverbs run', on the auto-started device, over a TCP
# port of their own. Both must exit 0 and print their result lines:
#   N bytes in S seconds = R Mbit/sec
#   N iters in S seconds = L usec/iter
#   pingpong.sh MODE   MODE: rc rc_events rc_1m rc_n1000 rc_new uc ud ud_default srq
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/peers.sh"

mode=$1
check=-c   # every pingpong validates the buffers it receives
case "$mode" in
rc)        prog=ibv_rc_pingpong;  args=() ;;
rc_events) prog=ibv_rc_pingpong;  args=(-e) ;;
rc_1m)     prog=ibv_rc_pingpong;  args=(-s 1048576) ;;
rc_new)    prog=ibv_rc_pingpong;  args=(-N) ;;  # the ibv_wr_* post API
rc_n1000)  prog=ibv_rc_pingpong;  args=(-n 1000 -s 4096) ;;
uc)        prog=ibv_uc_pingpong;  args=() ;;
# UD: a message must fit the port's active MTU (the pingpong checks, and
# refuses a larger -s itself), so -s is the MTU, the largest that fits (the
# GRH is not counted). Its help says the default is 2048, but Debian's
# rdma-core 44 sends 1024 by default: run that as it is too.
ud)        prog=ibv_ud_pingpong;  args=(-s "$(active_mtu)") ;;
ud_default) prog=ibv_ud_pingpong; args=() ;;
srq)       prog=ibv_srq_pingpong; args=() ;;
*)         fail "unknown mode $mode" ;;
esac
command -v "$prog" >/dev/null || fail "$prog is not installed (ibverbs-utils)"

run_pair "$prog" "${args[@]}" "$check"
pass "$prog ${args[*]}: both sides done, bytes and iterations reported"
