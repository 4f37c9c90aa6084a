#!/usr/bin/env bash
# softverbs capture (issue 24, Deliver 1, RoCEv2 part): while Debian's
# ibv_rc_pingpong (3000-byte messages: SEND FIRST, MIDDLE, LAST at MTU
# 1024) and ibv_ud_pingpong run between two hosts, `softverbs capture` on
# the client's host writes a pcapng of its device's packets:
#   - tshark decodes every packet as InfiniBand, none malformed or in
#     error; both directions are marked (epb_flags);
#   - the RC requests the client sent to the server's QP are the posted
#     SENDs, in order: PSNs consecutive from the client's first PSN, and
#     opcodes SEND_FIRST, SEND_MIDDLE, SEND_LAST for each message;
#   - UD SENDs are there too;
#   - every packet's ICRC verifies against the IP header written for it
#     (unit_roce_wire --pcap, on the capture converted to pcap);
#   - -o keeps one opcode only; -q of a QPN nobody has keeps nothing of
#     what the device hands over.
#   capture_netns.sh BUILD_DIR
export SV_BUILD_DIR=$1
. "$(dirname "$0")/lib.sh"

command -v tshark >/dev/null || fail "tshark is not installed"
command -v editcap >/dev/null || fail "editcap is not installed (wireshark-common)"
# SIGTERM to the capture itself ($! is the subshell of the ns_sv function),
# then its last line, bounded.
stop_capture() { # file pid errfile
	pkill -TERM -f "capture -w $1" || fail "no capture writes $1"
	ns_wait_job "$2" 20 || fail "capture did not stop"
	grep -q 'packets written' "$3" || { cat "$3"; fail "capture did not finish its file"; }
}

ns_pair_up "$(ns_prefix cap)"
ns_daemons_up
cap=$NS_DIR/b.pcapng
ns_log "$NS_DIR/capture.err" "softverbs capture in b"
ns_sv "$NS_B" "$SOCK_B" timeout -k 2 120 "$SV" capture -w "$cap" \
	2>"$NS_DIR/capture.err" &
cpid=$!
NS_PIDS+=("$cpid")
for _ in $(seq 1 200); do grep -q capturing "$NS_DIR/capture.err" && break; sleep 0.025; done
grep -q capturing "$NS_DIR/capture.err" || fail "capture did not start"

ns_run_pair 18515 ibv_rc_pingpong -g 0 -p 18515 -n 50 -s 3000 ||
	fail "rc pingpong: $NS_WHY"
sq=$(sed -n 's/.*remote address:.*QPN \(0x[0-9a-f]*\).*/\1/p' "$NS_COUT" | head -n 1)
spsn=$(sed -n 's/.*local address:.*PSN \(0x[0-9a-f]*\).*/\1/p' "$NS_COUT" | head -n 1)
[ -n "$sq" ] && [ -n "$spsn" ] || fail "no QPN or PSN in the client's output"
ns_run_pair 18516 ibv_ud_pingpong -g 0 -p 18516 -n 20 -s 512 ||
	fail "ud pingpong: $NS_WHY"
stop_capture "$cap" "$cpid" "$NS_DIR/capture.err"
cat "$NS_DIR/capture.err"

total=$(tshark -r "$cap" 2>/dev/null | wc -l)
ib=$(tshark -r "$cap" -Y infiniband 2>/dev/null | wc -l)
bad=$(tshark -r "$cap" -Y '_ws.malformed || _ws.expert.severity >= error' 2>/dev/null | wc -l)
out=$(tshark -r "$cap" -Y 'frame.packet_flags_direction == 2' 2>/dev/null | wc -l)
in=$(tshark -r "$cap" -Y 'frame.packet_flags_direction == 1' 2>/dev/null | wc -l)
echo "capture: $total packets, $ib InfiniBand, $bad malformed or in error; $out out, $in in"
tshark -r "$cap" -Y infiniband -T fields -e infiniband.bth.opcode 2>/dev/null |
	sort -n | uniq -c | sed 's/^/  opcode /'
[ "$total" -gt 150 ] || fail "only $total packets captured"
[ "$ib" -eq "$total" ] || fail "$((total - ib)) packets did not decode as InfiniBand"
[ "$bad" -eq 0 ] || { tshark -r "$cap" -Y '_ws.malformed || _ws.expert.severity >= error' -V | head -n 60; fail "$bad malformed packets"; }
[ "$out" -gt 0 ] && [ "$in" -gt 0 ] && [ $((out + in)) -eq "$total" ] ||
	fail "directions: $out out, $in in, of $total"

# the client's RC requests to the server's QP: what it posted, in order
tshark -r "$cap" -Y "frame.packet_flags_direction == 2 && infiniband.bth.destqp == $sq && infiniband.bth.opcode <= 5" \
	-T fields -e infiniband.bth.opcode -e infiniband.bth.psn 2>/dev/null >"$NS_DIR/req.txt"
/usr/bin/python3 - "$NS_DIR/req.txt" "$spsn" <<'PY' || fail "the RC requests are not the posted SENDs"
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
first = int(sys.argv[2], 16)
seen = {}
for op, psn in rows:
    seen.setdefault(int(psn), int(op))   # a retransmission repeats one
assert len(seen) == 150, ('requests', len(seen))
for k in range(150):
    psn = (first + k) & 0xffffff
    assert psn in seen, ('missing psn', hex(psn))
    assert seen[psn] == k % 3, ('psn', hex(psn), 'opcode', seen[psn])
print('50 SENDs of 3 packets, PSNs %#x..%#x in order' % (first, (first + 149) & 0xffffff))
PY
ud=$(tshark -r "$cap" -Y 'infiniband.bth.opcode == 100' 2>/dev/null | wc -l)
[ "$ud" -ge 20 ] || fail "only $ud UD SENDs captured"

editcap -F pcap "$cap" "$NS_DIR/b.pcap" || fail "editcap"
"$SV_BUILD_DIR/bin/unit_roce_wire" --pcap "$NS_DIR/b.pcap" ||
	fail "a captured packet's ICRC does not verify"

# -o: one opcode only (SEND LAST: the 50 the client sends, the 50 it gets)
ns_sv "$NS_B" "$SOCK_B" timeout -k 2 60 "$SV" capture -w "$NS_DIR/o.pcapng" -o 2 \
	2>"$NS_DIR/o.err" &
opid=$!
for _ in $(seq 1 200); do grep -q capturing "$NS_DIR/o.err" && break; sleep 0.025; done
ns_run_pair 18517 ibv_rc_pingpong -g 0 -p 18517 -n 50 -s 3000 || fail "rc pingpong 2: $NS_WHY"
stop_capture "$NS_DIR/o.pcapng" "$opid" "$NS_DIR/o.err"
cat "$NS_DIR/o.err"
n=$(tshark -r "$NS_DIR/o.pcapng" 2>/dev/null | wc -l)
other=$(tshark -r "$NS_DIR/o.pcapng" -Y "infiniband.bth.opcode != 2" 2>/dev/null | wc -l)
[ "$n" -ge 100 ] && [ "$other" -eq 0 ] || fail "-o 2 kept $n packets, $other of another opcode"
# -q: a QPN nobody has: the device hands packets over, none is kept
ns_sv "$NS_B" "$SOCK_B" timeout -k 2 60 "$SV" capture -w "$NS_DIR/q.pcapng" -q 0xfffffe \
	2>"$NS_DIR/q.err" &
qpid=$!
for _ in $(seq 1 200); do grep -q capturing "$NS_DIR/q.err" && break; sleep 0.025; done
ns_run_pair 18518 ibv_rc_pingpong -g 0 -p 18518 -n 20 || fail "rc pingpong 3: $NS_WHY"
stop_capture "$NS_DIR/q.pcapng" "$qpid" "$NS_DIR/q.err"
cat "$NS_DIR/q.err"
grep -Eq '^0 packets written \([1-9][0-9]* seen\)' "$NS_DIR/q.err" ||
	fail "-q of a QPN nobody has kept packets, or saw none"
pass "$total RoCEv2 packets captured by softverbs capture decode in tshark, none malformed, in posting order, ICRCs verify"
