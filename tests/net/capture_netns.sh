#!/usr/bin/env bash
# softverbs capture (issue 24, Deliver 1): while Debian's ibv_rc_pingpong
# (3000-byte messages: SEND FIRST, MIDDLE, LAST at MTU 1024) and
# ibv_ud_pingpong run between two hosts, and then ibv_rc_pingpong,
# ibv_ud_pingpong and ib_read_bw between two processes of the client's host,
# `softverbs capture` on that host writes a pcapng of its device's packets,
# the same-host ones rendered as a NIC would have sent them:
#   - tshark decodes every packet as InfiniBand, none malformed or in
#     error; both directions of the wire are marked (epb_flags); wire
#     packets are on interface 0 (sv0), same-host ones on 1 (sv0-local);
#   - the RC requests each client sent to its server's QP are the posted
#     SENDs, in order: PSNs consecutive from the client's first PSN, and
#     opcodes SEND_FIRST, SEND_MIDDLE, SEND_LAST for each message; on the
#     same host each message is acknowledged at its last PSN;
#   - the same-host READs: each request's responses carry its PSNs, the
#     next request starts after them;
#   - each frame's comment names its QPs and processes (the wire client's
#     requests: its own QPN);
#   - UD SENDs are there too, across hosts and on one host;
#   - every packet's ICRC verifies against the IP header written for it
#     (unit_roce_wire --pcap, on the capture converted to pcap);
#   - -o keeps one opcode only; -q of a QPN nobody has keeps nothing of
#     what the device hands over; -p keeps the packets of one process
#     (either end) of two pairs running on the host.
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
cq=$(sed -n 's/.*local address:.*QPN \(0x[0-9a-f]*\).*/\1/p' "$NS_COUT" | head -n 1)
ns_run_pair 18516 ibv_ud_pingpong -g 0 -p 18516 -n 20 -s 512 ||
	fail "ud pingpong: $NS_WHY"
# two processes of b's host
ns_run_pair_in "$NS_B" "$SOCK_B" "$NS_B" "$SOCK_B" "$IP_B" 18520 \
	ibv_rc_pingpong -g 0 -p 18520 -n 50 -s 3000 || fail "same-host rc pingpong: $NS_WHY"
lsq=$(sed -n 's/.*remote address:.*QPN \(0x[0-9a-f]*\).*/\1/p' "$NS_COUT" | head -n 1)
lcq=$(sed -n 's/.*local address:.*QPN \(0x[0-9a-f]*\).*/\1/p' "$NS_COUT" | head -n 1)
lpsn=$(sed -n 's/.*local address:.*PSN \(0x[0-9a-f]*\).*/\1/p' "$NS_COUT" | head -n 1)
[ -n "$lsq" ] && [ -n "$lcq" ] && [ -n "$lpsn" ] || fail "no QPN or PSN in the same-host client's output"
ns_run_pair_in "$NS_B" "$SOCK_B" "$NS_B" "$SOCK_B" "$IP_B" 18521 \
	ibv_ud_pingpong -g 0 -p 18521 -n 20 -s 512 || fail "same-host ud pingpong: $NS_WHY"
ns_run_pair_in "$NS_B" "$SOCK_B" "$NS_B" "$SOCK_B" "$IP_B" 18522 \
	ib_read_bw -d sv0 -x 0 -p 18522 -n 20 -s 5000 || fail "same-host ib_read_bw: $NS_WHY"
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
tshark -r "$cap" -Y "frame.interface_id == 0 && frame.packet_flags_direction == 2 && infiniband.bth.destqp == $sq && infiniband.bth.opcode <= 5" \
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
ud=$(tshark -r "$cap" -Y 'infiniband.bth.opcode == 100 && frame.interface_id == 0' 2>/dev/null | wc -l)
[ "$ud" -ge 20 ] || fail "only $ud UD SENDs captured from the wire"
lud=$(tshark -r "$cap" -Y 'infiniband.bth.opcode == 100 && frame.interface_id == 1' 2>/dev/null | wc -l)
[ "$lud" -ge 40 ] || fail "only $lud same-host UD SENDs captured"

# interfaces and comments: every same-host frame on sv0-local and saying
# so; the wire client's requests name its QP
tshark -r "$cap" -T fields -E separator='|' -e frame.interface_id -e infiniband.bth.opcode \
	-e infiniband.bth.destqp -e infiniband.bth.psn -e frame.comment 2>/dev/null >"$NS_DIR/all.txt"
/usr/bin/python3 - "$NS_DIR/all.txt" "$sq" "$cq" "$lsq" "$lcq" "$lpsn" <<'PY' || fail "the same-host frames are not what was posted"
import re, sys
rows = [l.rstrip('\n').split('|') for l in open(sys.argv[1]) if l.strip()]
sq, cq, lsq, lcq, lpsn = (int(v, 16) for v in sys.argv[2:7])
local = [r for r in rows if r[0] == '1']
wire = [r for r in rows if r[0] == '0']
assert local and wire, ('frames', len(local), len(wire))
for r in local:
    assert r[4].startswith('same-host: pid '), ('local comment', r)
for r in wire:
    assert re.match(r'(in|out): ', r[4]), ('wire comment', r)
# the wire client's requests are of its QP (resolved by the tool)
named = [r for r in wire if int(r[2], 16) == sq and int(r[1]) <= 5 and 'pid' in r[4]]
assert named, 'no wire request of the client names its process'
for r in named:
    m = re.search(r'qp (0x[0-9a-f]+)', r[4])
    assert m and int(m.group(1), 16) == cq, ('wire request of qp', r)
# same-host RC: the client's SENDs to the server, and the ACKs back
req = [(int(r[1]), int(r[3])) for r in local if int(r[2], 16) == lsq and int(r[1]) <= 5]
assert len(req) == 150, ('same-host requests', len(req))
for k, (op, psn) in enumerate(req):
    assert psn == (lpsn + k) & 0xffffff and op == k % 3, (k, op, hex(psn))
    pass
acks = [int(r[3]) for r in local if int(r[2], 16) == lcq and int(r[1]) == 17]
assert acks == [(lpsn + 3 * k + 2) & 0xffffff for k in range(50)], ('acks', acks[:4])
for r in local:
    if int(r[2], 16) == lsq and int(r[1]) <= 5:
        m = re.search(r'qp (0x[0-9a-f]+) -> pid \d+ qp (0x[0-9a-f]+)', r[4])
        assert m and int(m.group(1), 16) == lcq and int(m.group(2), 16) == lsq, r
# same-host READs: requests (12), each answered with its PSNs in order
# (13 FIRST, 14 MIDDLE, 15 LAST, 16 ONLY)
reads = [(int(r[1]), int(r[3]), int(r[2], 16)) for r in local if int(r[1]) in (12, 13, 14, 15, 16)]
assert sum(1 for r in reads if r[0] == 12) >= 20, 'same-host READ requests'
want = None
for op, psn, dq in reads:
    if op == 12:
        assert want is None, ('a READ request before the last was answered', hex(psn))
        want = psn
    else:
        assert want is not None and psn == want, ('READ response', op, hex(psn), want)
        want = None if op in (15, 16) else (psn + 1) & 0xffffff
print('%d same-host frames (150 SENDs in PSN order and their 50 ACKs, %d READ packets); '
      '%d wire frames, %d of the client named' % (len(local), len(reads), len(wire), len(named)))
PY

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
# -p: the packets of one process (a same-host server, either end), while
# another pair runs on the host too
ns_sv "$NS_B" "$SOCK_B" timeout -k 2 30 "$SV" run -- ibv_rc_pingpong -g 0 -p 18530 -n 10 -s 3000 \
	>"$NS_DIR/p-server.out" 2>&1 &
psrv=$!
ns_log "$NS_DIR/p-server.out" "-p: the server"
ns_wait_listen "$NS_B" 18530 "$psrv" 10 || fail "-p: the server did not listen"
spid=
for p in $(pgrep -x ibv_rc_pingpong); do
	tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- '-p 18530' && spid=$p
done
[ -n "$spid" ] || fail "-p: no server process"
ns_sv "$NS_B" "$SOCK_B" timeout -k 2 60 "$SV" capture -w "$NS_DIR/p.pcapng" -p "$spid" \
	2>"$NS_DIR/p.err" &
ppid=$!
for _ in $(seq 1 200); do grep -q capturing "$NS_DIR/p.err" && break; sleep 0.025; done
ns_sv "$NS_B" "$SOCK_B" timeout -k 2 30 "$SV" run -- ibv_rc_pingpong -g 0 -p 18530 -n 10 -s 3000 "$IP_B" \
	>"$NS_DIR/p-client.out" 2>&1 || { cat "$NS_DIR/p-client.out"; fail "-p: the client"; }
ns_run_pair_in "$NS_B" "$SOCK_B" "$NS_B" "$SOCK_B" "$IP_B" 18531 \
	ibv_ud_pingpong -g 0 -p 18531 -n 10 -s 512 || fail "-p: the other pair: $NS_WHY"
ns_wait_job "$psrv" 10 || fail "-p: the server did not end"
stop_capture "$NS_DIR/p.pcapng" "$ppid" "$NS_DIR/p.err"
cat "$NS_DIR/p.err"
n=$(tshark -r "$NS_DIR/p.pcapng" 2>/dev/null | wc -l)
mine=$(tshark -r "$NS_DIR/p.pcapng" -Y "frame.comment contains \"pid $spid \"" 2>/dev/null | wc -l)
seen=$(sed -n 's/.*packets written (\([0-9]*\) seen).*/\1/p' "$NS_DIR/p.err")
echo "-p $spid: $n packets kept, $mine of them name it, of $seen seen"
[ "$n" -ge 80 ] && [ "$mine" -eq "$n" ] && [ "$seen" -gt "$n" ] ||
	fail "-p kept $n packets ($mine of pid $spid, 80 expected) of $seen"
pass "$total packets captured by softverbs capture, wire and same-host, decode in tshark, none malformed, in posting order, ICRCs verify; -q -o -p filter"
