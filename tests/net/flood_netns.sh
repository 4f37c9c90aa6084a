#!/usr/bin/env bash
# A flood from the network next to legitimate RoCEv2 traffic (issue 21, 6).
# Debian's ib_write_bw runs from b to a twice, back to back, for SECS
# seconds each: alone, then while a second process in b (tests/net/flood.c,
# from a second address of b's, so not the QP's peer) sends UDP/4791 to a's
# daemon as fast as it can, at most COUNT datagrams: random bytes, bad
# ICRCs, malformed headers, bad P_Keys, unknown QPNs, and requests and ACKs
# with correct ICRCs and random PSNs to the live QP of a's ib_write_bw.
# Asserts: a's daemon still answers 'softverbs stat'; the flooded
# ib_write_bw completes with its results; every flood datagram that reached
# a's socket is in a's drop counters (drops >= flood datagrams counted by
# nftables at a's input minus a's UDP receive-buffer overflows), each kind's
# reason among them; and, with RATIO (0.5) > 0, the flooded rate is at least
# RATIO times the one alone.
#   flood_netns.sh BUILD_DIR [SECS] [COUNT] [RATIO]
export SV_BUILD_DIR=$1
secs=${2:-3}
count=${3:-3000000}
ratio=${4:-0.5}
. "$(dirname "$0")/lib.sh"

FLOOD=$SV_BUILD_DIR/bin/sv_flood
[ -x "$FLOOD" ] || fail "$FLOOD missing (build first)"
command -v ib_write_bw >/dev/null || skip "ib_write_bw is not installed (perftest)"
ns_pair_up "$(ns_prefix flood)"
ns_daemons_up
IP_C=${IP_B%.*}.3
ip -n "$NS_B" addr add "$IP_C/24" dev veth0 || fail "second address in $NS_B"
# flood datagrams at a's input: counted by source address
ip netns exec "$NS_A" nft -f - <<EOF2 || fail "nft in $NS_A"
table inet svflood {
	chain in {
		type filter hook input priority -1; policy accept;
		ip saddr $IP_C udp dport 4791 counter
	}
}
EOF2

flood_in() {
	ip netns exec "$NS_A" nft list table inet svflood | awk '
		/counter packets/ { for (i = 1; i < NF; i++)
			if ($i == "packets") print $(i + 1) }'
}
rcvbuf_errors() { # UDP datagrams a's sockets had no room for
	ip netns exec "$NS_A" awk '/^Udp:/ { if (!h) { for (i = 1; i <= NF; i++)
		n[$i] = i; h = 1 } else print $n["RcvbufErrors"] }' /proc/net/snmp
}
# "dropped N" and each reason's count of a's 'softverbs stat'
a_stat() {
	ns_sv "$NS_A" "$SOCK_A" timeout 5 "$SV" stat >"$NS_DIR/stat.out" 2>&1 ||
		{ cat "$NS_DIR/stat.out" >&2; fail "a's daemon does not answer 'softverbs stat'"; }
	cat "$NS_DIR/stat.out"
}
drops_total() { awk '/^roce packets:/ { for (i = 1; i < NF; i++)
	if ($(i + 1) ~ /^dropped/) print $i }' "$NS_DIR/stat.out"; }
drop_of() { # reason text
	sed -n 's/^roce drops: //p' "$NS_DIR/stat.out" | tr ',' '\n' |
		awk -v r="$1" '{ n = $1; $1 = ""; sub(/^ /, ""); if ($0 == r) print n }'
}
wire_ticks() { # CPU clock ticks of a's wire thread (sv-wire) so far
	local t
	for t in /proc/"$PID_A"/task/*; do
		[ "$(cat "$t/comm" 2>/dev/null)" = sv-wire ] || continue
		awk '{ print $14 + $15 }' "$t/stat"
		return
	done
	echo 0
}
bw_of() { # perftest output: BW average (MB/sec) of its results row
	awk '/#bytes/ { hdr = 1; next }
	     hdr && $1 ~ /^[0-9]+$/ && NF >= 5 { print $4; exit }' "$1"
}

port=18641
bw_args=(ib_write_bw -d sv0 -x 0 -D "$secs" -s 65536)
echo "alone: ${bw_args[*]}"
ns_run_pair $port "${bw_args[@]}" -p $port ||
	fail "ib_write_bw alone: $NS_WHY"
cp "$NS_COUT" "$NS_DIR/alone.out"
bw0=$(bw_of "$NS_COUT")
[ -n "$bw0" ] || fail "no results of ib_write_bw alone"

a_stat >/dev/null
d0=$(drops_total) f0=$(flood_in) r0=$(rcvbuf_errors) w0=$(wire_ticks)
port=18642
echo "flooded: ${bw_args[*]}, sv_flood $IP_C -> $IP_A at most $count datagrams"
NS_SOUT=$NS_DIR/fserver.out NS_COUT=$NS_DIR/fclient.out FOUT=$NS_DIR/flood.out
ns_log "$NS_SOUT" "ib_write_bw server (flooded)"
ns_log "$NS_COUT" "ib_write_bw client (flooded)"
ns_log "$FOUT" "sv_flood"
timeout -k 2 $(( NS_STEP + 5 )) ip netns exec "$NS_A" env \
	SOFTVERBS_SOCKET="$SOCK_A" SOFTVERBS_NO_AUTOSTART=1 \
	"$SV" run -- stdbuf -oL -eL "${bw_args[@]}" -p $port >"$NS_SOUT" 2>&1 &
srv=$!
ns_wait_listen "$NS_A" $port "$srv" 10 || fail "the flooded server never listened"
timeout -k 2 "$NS_STEP" ip netns exec "$NS_B" env \
	SOFTVERBS_SOCKET="$SOCK_B" SOFTVERBS_NO_AUTOSTART=1 \
	"$SV" run -- stdbuf -oL -eL "${bw_args[@]}" -p $port "$IP_A" >"$NS_COUT" 2>&1 &
cli=$!
qpn=''
for _ in $(seq 1 100); do
	qpn=$(awk '/local address/ { for (i = 1; i < NF; i++)
		if ($i == "QPN") { print $(i + 1); exit } }' "$NS_SOUT")
	[ -n "$qpn" ] && break
	sleep 0.1
done
[ -n "$qpn" ] || fail "the flooded server did not show its QPN"
timeout -k 2 $(( secs + 10 )) ip netns exec "$NS_B" \
	"$FLOOD" "$IP_C" "$IP_A" "$count" $(( secs + 1 )) "$qpn" >"$FOUT" 2>&1 &
fl=$!
ns_wait_job "$cli" $(( NS_STEP + 5 )) || ns_end_job "$cli"
cli_rc=$wait_rc
ns_wait_job "$srv" 5 || ns_end_job "$srv"
srv_rc=$wait_rc
ns_wait_job "$fl" $(( secs + 12 )) || ns_end_job "$fl"
fl_rc=$wait_rc
cat "$FOUT"
[ "$fl_rc" = 0 ] || fail "sv_flood: $(ns_why "$fl_rc")"
[ "$cli_rc" = 0 ] && [ "$srv_rc" = 0 ] ||
	fail "flooded ib_write_bw: client $(ns_why "$cli_rc"), server $(ns_why "$srv_rc")"
bw1=$(bw_of "$NS_COUT")
[ -n "$bw1" ] || fail "no results of the flooded ib_write_bw"

a_stat
d1=$(drops_total) f1=$(flood_in) r1=$(rcvbuf_errors) w1=$(wire_ticks)
arrived=$(( f1 - f0 )) lost=$(( r1 - r0 )) drops=$(( d1 - d0 ))
echo "flood datagrams at a's input: $arrived; a's UDP receive-buffer overflows: $lost;" \
	"a's drops: $drops; a's wire thread: $(( (w1 - w0) * 1000 / $(getconf CLK_TCK) )) ms of CPU" \
	"(ib_write_bw's packets and the flood's)"
[ "$arrived" -gt 0 ] || fail "no flood datagram reached a"
[ $(( drops + lost )) -ge "$arrived" ] ||
	fail "$arrived flood datagrams reached a, $lost overflowed its socket, only $drops were counted as dropped"
for r in "bad ICRC" malformed "bad P_Key" "unknown QPN" "not from the QP's peer"; do
	n=$(drop_of "$r")
	[ -n "$n" ] && [ "$n" -gt 0 ] || fail "no drop counted as '$r'"
done
echo "ib_write_bw: ${bw0} MB/s alone, ${bw1} MB/s flooded"
if awk -v a="$bw0" -v b="$bw1" -v r="$ratio" 'BEGIN { exit !(r > 0 && b < r * a) }'; then
	fail "flooded ib_write_bw ran at ${bw1} MB/s, under $ratio x ${bw0} MB/s alone"
fi
pass "flood of $arrived datagrams at a, all counted ($drops drops); ib_write_bw ${bw0} -> ${bw1} MB/s"
