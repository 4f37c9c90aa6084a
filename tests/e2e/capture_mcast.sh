#!/usr/bin/env bash
# softverbs capture of multicast between processes of this host (issue 24,
# Deliver 1): Debian's unmodified mckey, a receiver and a sender bound to
# 127.0.0.1, on a device without a RoCEv2 port (--no-roce: nothing goes on
# a wire, so the device renders the group's datagrams itself, once per
# message, however many members take a copy). Each of the sender's
# messages is one frame on sv0-local: a UD SEND to QP 0xffffff, to the
# group's IP address and multicast MAC, from the sender's QP (the DETH's
# source QP is the one the frame's comment names); tshark finds nothing
# malformed, every ICRC verifies, and the receiver gets every message.
# (With a RoCEv2 port the datagram goes on the wire, and net_capture's
# wire capture shows it there.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/peers.sh"
command -v tshark >/dev/null || fail "tshark is not installed"
command -v editcap >/dev/null || fail "editcap is not installed (wireshark-common)"
command -v mckey >/dev/null || fail "mckey is not installed (rdmacm-utils)"
out=$SV_TEST_DIR
cap=$out/c.pcapng
GROUP=239.5.6.7 NMSG=5

# the device, without a wire, and no other started in its place; it leaves
# by itself once idle
export SOFTVERBS_NO_AUTOSTART=1
"$SV" daemon --no-roce --idle-exit 3 >"$out/daemon.out" 2>&1 &
for _ in $(seq 1 400); do
	"$SV" devinfo >/dev/null 2>&1 && break
	sleep 0.025
done
"$SV" devinfo >/dev/null 2>&1 || { cat "$out/daemon.out"; fail "the device did not start"; }

"$SV" run -- stdbuf -oL mckey -m $GROUP -b 127.0.0.1 -C $NMSG >"$out/recv" 2>&1 &
rpid=$!
wait_for_line "$out/recv" '^mckey: joined' 800 || { cat "$out/recv"; fail "the receiver did not join"; }
"$SV" capture -w "$cap" 2>"$out/cap.err" &
cpid=$!
wait_for_line "$out/cap.err" capturing || { cat "$out/cap.err"; fail "capture did not start"; }
timeout -k 2 30 "$SV" run -- mckey -m $GROUP -b 127.0.0.1 -s -C $NMSG >"$out/send" 2>&1 ||
	{ cat "$out/send"; fail "the sender failed"; }
wait_job $rpid 30 || { cat "$out/recv"; fail "the receiver did not get its $NMSG messages"; }
grep -q 'return status 0' "$out/recv" || { cat "$out/recv"; fail "the receiver failed"; }
kill -TERM $cpid
wait_job $cpid 20 || fail "capture did not stop"
cat "$out/cap.err"

total=$(tshark -r "$cap" 2>/dev/null | wc -l)
bad=$(tshark -r "$cap" -Y '_ws.malformed || _ws.expert.severity >= error || frame.interface_id != 1' 2>/dev/null | wc -l)
[ "$total" = $NMSG ] && [ "$bad" -eq 0 ] ||
	fail "$total frames ($NMSG sent), $bad malformed, in error or not on sv0-local"
editcap -F pcap "$cap" "$out/c.pcap" || fail "editcap"
"$SV_BUILD_DIR/bin/unit_roce_wire" --pcap "$out/c.pcap" >/dev/null ||
	fail "a rendered packet's ICRC does not verify"
tshark -r "$cap" -T fields -E separator='|' -e infiniband.bth.opcode -e infiniband.bth.destqp \
	-e infiniband.deth.srcqp -e ip.dst -e eth.dst -e frame.comment 2>/dev/null >"$out/rows"
/usr/bin/python3 - "$out/rows" "$GROUP" <<'PY' || fail "the capture is not what was sent"
import re, sys
rows = [l.rstrip('\n').split('|') for l in open(sys.argv[1]) if l.strip()]
group = sys.argv[2]
mac = '01:00:5e:%02x:%02x:%02x' % tuple(int(x) for x in group.split('.')[1:])
for op, dqp, sqp, dst, edst, comment in rows:
    # UD SEND only (100), or with immediate (101)
    assert int(op) in (100, 101), ('opcode', op)
    assert int(dqp, 0) == 0xffffff, ('dest qp', dqp)
    assert dst == group and edst == mac, (dst, edst)
    m = re.search(r"qp (0x[0-9a-f]+) -> the group's QPs", comment)
    assert m and int(m.group(1), 16) == int(sqp, 0), (comment, sqp)
print('%d frames, each a UD SEND to %s (%s), qp 0xffffff' % (len(rows), group, mac))
PY
pass "same-host multicast captured once per message, as a NIC would have sent it to the group"
