#!/usr/bin/env bash
# softverbs' RoCEv2 as Wireshark sees it: a capture of the veth between two
# hosts while Debian's ibv_rc_pingpong (SEND, ACKs), ib_read_lat (READ
# requests and responses), ib_atomic_bw (atomics and their ACKs),
# ib_write_bw (WRITE first/middle/last), ibv_ud_pingpong (UD, DETH) and
# ibv_xsrq_pingpong (XRC: XRCETH, XRC ACKs) run;
# every packet must decode as InfiniBand with no malformed packet and no
# expert error, and every packet's ICRC must verify with the IP header it
# had on the link (unit_roce_wire --pcap). The daemons send with UDP GSO;
# the veths cut GSO datagrams into packets before the capture point
# (gso_max_segs 1), as a NIC without UDP segmentation offload does, so the
# capture holds the packets as they go on a wire, with the IP
# identifications the kernel gave the segments.
#   tshark_netns.sh BUILD_DIR
export SV_BUILD_DIR=$1
. "$(dirname "$0")/lib.sh"

command -v tshark >/dev/null || fail "tshark is not installed (scripts/deps.sh)"
command -v dumpcap >/dev/null || fail "dumpcap is not installed (scripts/deps.sh)"
NS_PCAP=$NS_DIR/pcap
ns_pair_up "$(ns_prefix tshark)"
for n in "$NS_A" "$NS_B"; do
	ip -n "$n" link set veth0 gso_max_segs 1 || fail "gso_max_segs in $n"
done
ns_daemons_up
cap=$NS_PCAP/$(ls "$NS_PCAP" | head -n 1)
run() {
	ns_run_pair 18515 "$@" || fail "$1 across namespaces: $NS_WHY"
}
run ibv_rc_pingpong -d sv0 -g 0 -n 50 -s 3000
run ibv_ud_pingpong -d sv0 -g 0 -n 50 -s 512
run ib_read_lat -d sv0 -x 0 -n 50 -s 5000
run ib_atomic_bw -d sv0 -x 0 -n 50
run ibv_xsrq_pingpong -d sv0 -g 0 -n 20 -s 3000
run ib_write_bw -d sv0 -x 0 -n 20 -s 10000
# dumpcap writes as it goes; stop it so the file is complete
for p in "${NS_PIDS[@]}"; do
	[ "$(cat /proc/"$p"/comm 2>/dev/null)" = dumpcap ] && kill -TERM "$p"
done
sleep 1
total=$(tshark -r "$cap" -Y 'udp.dstport == 4791' 2>/dev/null | wc -l)
ib=$(tshark -r "$cap" -Y 'infiniband' 2>/dev/null | wc -l)
# (RoCEv2 packets only: a test's TCP exchange on an ephemeral port that
# some dissector claims, EtherCAT's 34980 say, is not ours to judge)
roce_bad='udp.port == 4791 && (_ws.malformed || _ws.expert.severity >= error)'
bad=$(tshark -r "$cap" -Y "$roce_bad" 2>/dev/null | wc -l)
echo "capture: $total RoCEv2 packets, $ib decoded as InfiniBand, $bad malformed or in error"
tshark -r "$cap" -Y infiniband -T fields -e infiniband.bth.opcode 2>/dev/null |
	sort -n | uniq -c | sed 's/^/  opcode /'
[ "$total" -gt 0 ] || fail "no RoCEv2 packet captured"
# XRC (ibv_xsrq_pingpong): requests with an XRCETH, XRC ACKs (Wireshark 4.0
# names the XRC opcodes; it shows the XRCETH as an unknown header, not as
# malformed)
xrc=$(tshark -r "$cap" -Y 'infiniband.bth.opcode >= 160 && infiniband.bth.opcode <= 183' 2>/dev/null | wc -l)
[ "$xrc" -gt 0 ] || fail "no XRC packet captured"
[ "$ib" -eq "$total" ] || fail "$((total - ib)) packets did not decode as InfiniBand"
if [ "$bad" -ne 0 ]; then
	tshark -r "$cap" -Y "$roce_bad" -V 2>/dev/null | head -n 80
	fail "$bad malformed packets"
fi
# GSO was used (the segments' ICRCs are then checked below)
stat=$(ns_sv "$NS_B" "$SOCK_B" "$SV" stat 2>&1)
echo "$stat" | grep '^roce offload'
gso=$(echo "$stat" | sed -n 's/^roce offload: GSO on (\([0-9]*\) datagrams.*/\1/p')
[ -n "$gso" ] && [ "$gso" -gt 0 ] || fail "b sent no GSO datagram: $stat"
"$SV_BUILD_DIR/bin/unit_roce_wire" --pcap "$cap" ||
	fail "a packet's ICRC does not verify with its IP header as captured"
pass "$total RoCEv2 packets of softverbs decode in tshark, none malformed, every ICRC verifies"
