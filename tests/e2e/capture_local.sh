#!/usr/bin/env bash
# softverbs capture of traffic between two processes of this host (issue
# 24, Deliver 1), with the operations and outcomes net_capture does not
# reach, each checked frame by frame in tshark:
#   - Debian's ib_write_bw (3000-byte WRITEs at MTU 1024): WRITE FIRST with
#     its RETH (the length), MIDDLE, LAST, PSNs consecutive from the
#     client's; each WRITE acknowledged at its last PSN;
#   - ib_atomic_bw: each FETCH_ADD answered by an ATOMIC ACKNOWLEDGE at the
#     request's PSN;
#   - `softverbs inject rnr qp=N count=2` on an ibv_rc_pingpong server's
#     QP: the client's first SEND is answered by two RNR NAKs at its PSN,
#     then goes again with the same PSN and is acknowledged (rnr_retry 7);
#   - test_tm's tag-matching rendezvous (256 KiB - 64 bytes): after the
#     RNDV SEND, the TM QP's READ request for the RVH's range, the READ
#     responses at consecutive PSNs carrying every byte, then its FIN (a
#     16-byte SEND ONLY, TMH opcode FIN) and the ACK of it;
#   - every frame on sv0-local, decoded, none malformed; every ICRC
#     verifies; the daemon's log names no error.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/peers.sh"
command -v tshark >/dev/null || fail "tshark is not installed"
command -v editcap >/dev/null || fail "editcap is not installed (wireshark-common)"
command -v ib_write_bw >/dev/null || fail "ib_write_bw is not installed (perftest)"
out=$SV_TEST_DIR
cap=$out/c.pcapng

# a client that keeps the device up while the capture runs
"$HOLD" --pd 1 >"$out/hold" 2>&1 &
wait_for_line "$out/hold" '^ready' 800 || { cat "$out/hold"; fail "hold did not start"; }
"$SV" capture -w "$cap" 2>"$out/cap.err" &
cpid=$!
wait_for_line "$out/cap.err" capturing || { cat "$out/cap.err"; fail "capture did not start"; }

# PROG ARGS -p PORT as a server, then as a client of localhost: both exit 0.
pair() { # name prog args...
	local name=$1 port srv cli
	shift
	port=$(free_port)
	"$SV" run -- stdbuf -oL "$@" -p "$port" >"$out/$name.s" 2>&1 &
	srv=$!
	wait_listen "$port" $srv || { cat "$out/$name.s"; fail "$name: the server did not listen"; }
	"$SV" run -- stdbuf -oL "$@" -p "$port" localhost >"$out/$name.c" 2>&1 &
	cli=$!
	wait_pair $cli $srv "$out/$name.s" "$out/$name.c" "$name" 50 20 >/dev/null
}
field() { # file label (QPN or PSN of "local address")
	sed -n "s/.*local address:.*$2 \(0x[0-9a-f]*\).*/\1/p" "$1" | head -n 1
}

pair write ib_write_bw -d sv0 -x 0 -n 20 -s 3000 -m 1024
wq=$(field "$out/write.c" QPN) wpsn=$(field "$out/write.c" PSN)
pair atomic ib_atomic_bw -d sv0 -x 0 -n 20 -m 1024
aq=$(field "$out/atomic.c" QPN)

# the pingpong's server first: its QP gets the RNR fault before the client
port=$(free_port)
"$SV" run -- stdbuf -oL ibv_rc_pingpong -g 0 -p "$port" -n 3 -s 1000 >"$out/rnr.s" 2>&1 &
srv=$!
wait_listen "$port" $srv || { cat "$out/rnr.s"; fail "rnr: the server did not listen"; }
sq=$(field "$out/rnr.s" QPN)
[ -n "$sq" ] || fail "rnr: the server printed no QPN"
"$SV" inject rnr qp="$sq" count=2 || fail "inject rnr qp=$sq"
"$SV" run -- stdbuf -oL ibv_rc_pingpong -g 0 -p "$port" -n 3 -s 1000 localhost >"$out/rnr.c" 2>&1 &
cli=$!
wait_pair $cli $srv "$out/rnr.s" "$out/rnr.c" rnr 50 20 >/dev/null
rq=$(field "$out/rnr.c" QPN) rpsn=$(field "$out/rnr.c" PSN)

# a tag-matching rendezvous (and the rest of test_tm) between QPs of one
# process
"$SV_BUILD_DIR/bin/test_tm" >"$out/tm" 2>&1 || { cat "$out/tm"; fail "test_tm under a capture"; }

kill -TERM $cpid
wait_job $cpid 20 || fail "capture did not stop"
cat "$out/cap.err"
kill $(jobs -p) 2>/dev/null

total=$(tshark -r "$cap" 2>/dev/null | wc -l)
bad=$(tshark -r "$cap" -Y '_ws.malformed || _ws.expert.severity >= error || frame.interface_id != 1' 2>/dev/null | wc -l)
[ "$total" -gt 0 ] && [ "$bad" -eq 0 ] || fail "$bad of $total frames malformed, in error or not on sv0-local"
editcap -F pcap "$cap" "$out/c.pcap" || fail "editcap"
"$SV_BUILD_DIR/bin/unit_roce_wire" --pcap "$out/c.pcap" >/dev/null ||
	fail "a rendered packet's ICRC does not verify"
tshark -r "$cap" -T fields -E separator='|' -e infiniband.bth.opcode -e infiniband.bth.destqp \
	-e infiniband.bth.psn -e infiniband.reth.dmalen -e infiniband.aeth.syndrome \
	-e frame.comment 2>/dev/null >"$out/rows"
/usr/bin/python3 - "$out/rows" "$wq" "$wpsn" "$aq" "$sq" "$rq" "$rpsn" <<'PY' || fail "the capture is not what was posted"
import re, sys
rows = [l.rstrip('\n').split('|') for l in open(sys.argv[1]) if l.strip()]
wq, wpsn, aq, sq, rq, rpsn = (int(v, 16) for v in sys.argv[2:8])
def by(qpn):
    # frames of the connection whose comment names qpn as the sender
    return [r for r in rows if re.search(r'qp %#x ->' % qpn, r[5])]
def num(v):
    return int(v, 0) if v else None
# WRITEs: FIRST (6, RETH 3000), MIDDLE (7), LAST (8) from wpsn on
w = [(int(r[0]), int(r[2]), num(r[3])) for r in by(wq)]
reqs = [x for x in w if x[0] in (6, 7, 8)]
assert len(reqs) >= 60, ('writes', len(reqs))
for k, (op, psn, dl) in enumerate(reqs[:60]):
    assert op == 6 + k % 3 and psn == (wpsn + k) & 0xffffff, (k, op, hex(psn))
    assert (dl == 3000) if op == 6 else dl is None, (k, op, dl)
acks = [int(r[2]) for r in rows if int(r[0]) == 17 and num(r[1]) == wq]
assert acks[:20] == [(wpsn + 3 * k + 2) & 0xffffff for k in range(20)], acks[:5]
# atomics: each FETCH_ADD (20) answered by an ATOMIC ACK (18) at its PSN
a = [(int(r[0]), int(r[2])) for r in by(aq) if int(r[0]) == 20]
back = {int(r[2]) for r in rows if int(r[0]) == 18 and num(r[1]) == aq}
assert len(a) >= 20 and all(psn in back for _, psn in a), ('atomics', len(a), len(back))
# RNR: two NAKs (syndrome 0x20-0x3f) at the client's first PSN, then that
# SEND again, and its ACK
s = [(int(r[0]), int(r[2])) for r in by(rq) if int(r[0]) <= 5]
naks = [(int(r[2]), int(r[4], 0)) for r in rows
        if int(r[0]) == 17 and num(r[1]) == rq and r[4] and int(r[4], 0) >> 5 == 1]
assert [p for p, _ in naks] == [rpsn, rpsn], ('rnr naks', naks)
assert [p for _, p in s[:3]] == [rpsn] * 3 and s[3][1] == (rpsn + 1) & 0xffffff, ('sends', s[:4])
ok = [int(r[2]) for r in rows if int(r[0]) == 17 and num(r[1]) == rq and r[4] and int(r[4], 0) >> 5 == 0]
assert ok and ok[0] == rpsn, ('ack after rnr', ok[:3])
print('%d frames: %d WRITE packets and %d ACKs, %d atomics answered, '
      'RNR NAKs at %#x then the SEND again' % (len(rows), len(reqs), len(acks), len(a), rpsn))
PY
tshark -r "$cap" -T fields -E separator='|' -e infiniband.bth.opcode -e infiniband.bth.destqp \
	-e infiniband.bth.psn -e infiniband.reth.dmalen -e data.len -e data.data \
	-e frame.comment 2>/dev/null >"$out/tmrows"
/usr/bin/python3 - "$out/tmrows" <<'PY' || fail "the rendezvous is not what a NIC would send"
import re, sys
rows = [l.rstrip('\n').split('|') for l in open(sys.argv[1]) if l.strip()]
LEN = 256 * 1024 - 64
def sender(r):
    return int(re.search(r'qp (0x[0-9a-f]+) ->', r[6]).group(1), 16)
# the READ as the requester asks for it: requests of SV_READ_CHUNK (64)
# responses at most, whose lengths add up to the RVH's
def run(i):
    n, k = 0, i
    while k < len(rows) and rows[k][0] == '12' and sender(rows[k]) == sender(rows[i]):
        n += int(rows[k][3] or 0)
        k += 1
    return n, k
reads = [i for i, r in enumerate(rows)
         if r[0] == '12' and (i == 0 or rows[i - 1][0] != '12') and run(i)[0] == LEN]
assert len(reads) == 1, ('rendezvous READs', len(reads))
i = reads[0]
a, b, psn = sender(rows[i]), int(rows[i][1], 0), int(rows[i][2])
i = run(i)[1] - 1
# the RNDV SEND came first, from b to a (TMH opcode 1)
assert any(sender(r) == b and int(r[1], 0) == a and r[5][:2] == '01'
           for r in rows[:i]), 'no RNDV SEND before the READ'
resp, got = [], 0
for r in rows[i + 1:]:
    if sender(r) == b and int(r[0]) in (13, 14, 15, 16):
        resp.append(r)
        got += int(r[4] or 0)
        if int(r[0]) in (15, 16) and got >= LEN:
            break
assert resp and int(resp[0][0]) in (13, 16), ('first response', resp[:1])
assert [int(r[2]) for r in resp] == [(psn + k) & 0xffffff for k in range(len(resp))], 'response PSNs'
assert sum(int(r[4] or 0) for r in resp) == LEN, ('bytes read', sum(int(r[4] or 0) for r in resp))
j = rows.index(resp[-1])
fin = [r for r in rows[j + 1:] if sender(r) == a and r[0] == '4']
assert fin and int(fin[0][2]) == (psn + len(resp)) & 0xffffff, ('FIN PSN', fin[:1])
assert fin[0][4] == '16' and fin[0][5][:2] == '02', ('FIN', fin[0][4:6])
k = rows.index(fin[0])
ack = [r for r in rows[k + 1:] if sender(r) == b and r[0] == '17']
assert ack and int(ack[0][2]) == int(fin[0][2]), 'no ACK of the FIN'
print('rendezvous: READ of %d bytes by qp %#x, %d responses, FIN at PSN %s, acknowledged'
      % (LEN, a, len(resp), fin[0][2]))
PY
pass "same-host WRITEs, atomics, RNR NAKs and a TM rendezvous captured as a NIC would have sent them, decoded by tshark, ICRCs verify"
