#!/usr/bin/env bash
# RC WRITE, READ and SEND traffic between two hosts, every byte checked
# (tests/net/sv_stress.c), with faults on the wire:
#   stress_netns.sh BUILD_DIR MODE BYTES [SECONDS]
#   MODE  clean   no faults
#         inject  both daemons' seeded injector: 1% drop, 1% duplicate,
#                 1% reorder, 0.1% corrupt ($SV_INJECT_SEED, default 1)
#         nft     nftables drops 1% of the RoCEv2 packets in namespace a
#         rnr     no faults; the server stops 600 ms after its first SEND
#                 with its receives used up, under a 4.2 ms local ACK
#                 timeout: the client's SENDs meet RNR NAKs for as long
#                 as 140 timeouts and must wait them out (rnr_retry 7)
#   BYTES each of WRITE, READ and SEND; SECONDS bounds the run (600).
# Passes when the client and the server both report every byte checked:
# nothing lost, nothing corrupted, no QP hung (a WQE with no completion for
# 60 s fails it). The daemons' wire counters are printed either way.
export SV_BUILD_DIR=$1
mode=${2:-clean}
bytes=${3:-$((64 << 20))}
limit=${4:-600}
. "$(dirname "$0")/lib.sh"

STRESS=$SV_BUILD_DIR/bin/sv_stress
[ -x "$STRESS" ] || fail "$STRESS missing (build first)"
seed=${SV_INJECT_SEED:-1}
case "$mode" in
clean) ;;
rnr) export SV_STRESS_TIMEOUT=10 SV_STRESS_RNR_STALL_MS=600 ;;
inject) NS_DAEMON_ARGS="--inject seed=$seed,drop=0.01,dup=0.01,reorder=0.01,corrupt=0.001" ;;
nft) ;;
*) fail "unknown mode '$mode'" ;;
esac

ns_pair_up "$(ns_prefix "st$mode")"
ns_daemons_up
[ "$mode" = nft ] && ns_drop_pct "$NS_A" 1
port=18600
# a local ACK timeout of 33.5 ms (IBA 13): with retry_cnt 7 a QP gives up
# after 8 timeouts without progress, 268 ms, so a peer whose packets wait
# ~150 ms on a loaded host (a daemon or softirq not scheduled; seen with
# 16.7 ms, 134 ms in all: IBV_WC_RETRY_EXC_ERR) still makes it; perftest's
# 67 ms would make each tail loss, a message's last packet or its ACK
# dropped (~1000 per 256 MiB), cost 67 ms
export SV_STRESS_TIMEOUT=${SV_STRESS_TIMEOUT:-13}
sout=$NS_DIR/stress-server.out cout=$NS_DIR/stress-client.out
ns_log "$sout" "sv_stress server"
ns_log "$cout" "sv_stress client"
echo "sv_stress $mode, $bytes bytes each way: server $NS_A ($IP_A), client $NS_B ($IP_B)"
start=$SECONDS
ns_sv "$NS_A" "$SOCK_A" env SV_STRESS_TIMEOUT="$SV_STRESS_TIMEOUT" \
	SV_STRESS_RNR_STALL_MS="${SV_STRESS_RNR_STALL_MS:-}" \
	timeout -k 2 $((limit + 10)) "$SV" run -- \
	"$STRESS" server $port >"$sout" 2>&1 &
spid=$!
NS_PIDS+=("$spid")
ns_wait_listen "$NS_A" $port "$spid" 20 || fail "the server does not listen"
ns_sv "$NS_B" "$SOCK_B" env SV_STRESS_TIMEOUT="$SV_STRESS_TIMEOUT" \
	timeout -k 2 "$limit" "$SV" run -- \
	"$STRESS" client "$IP_A" $port "$bytes" >"$cout" 2>&1
crc=$?
ns_wait_job "$spid" 30 || ns_end_job "$spid"
src=$wait_rc
for s in "$SOCK_A" "$SOCK_B"; do
	echo "---- wire counters of $(basename "$(dirname "$s")")"
	ns_sv "$NS_A" "$s" timeout 5 "$SV" stat 2>&1 | grep -E '^ *(roce|wire)' |
		tee "$NS_DIR/counters.$(basename "$(dirname "$s")")" || true
done
[ "$mode" = nft ] && echo "nftables dropped $(ns_dropped "$NS_A") packets"
cat "$sout" "$cout"
[ $crc -eq 0 ] || fail "client exit $crc after $(( SECONDS - start )) s"
[ "$src" -eq 0 ] || fail "server exit $src"
grep -q "every byte checked" "$cout" || fail "the client did not finish"
grep -q "none wrong" "$sout" || fail "the server did not finish"
# the stall made RNR NAKs, or this run tested nothing of them
if [ "$mode" = rnr ]; then
	rnr=$(sed -n 's/.*RNR NAKs: \([0-9]*\) sent.*/\1/p' "$NS_DIR/counters.a")
	[ "${rnr:-0}" -gt 0 ] || fail "a sent no RNR NAK: the stall did not happen"
	echo "a sent $rnr RNR NAKs during the server's stall"
fi
pass "sv_stress $mode: $bytes bytes each of WRITE, READ and SEND in $(( SECONDS - start )) s"
