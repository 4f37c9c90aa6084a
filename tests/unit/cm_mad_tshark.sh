#!/usr/bin/env bash
# CM MADs as Wireshark sees them: test_cm_mad --pcap writes one RoCEv2
# datagram to QP1 per CM attribute (ClassPortInfo, REQ, MRA, REJ, REP,
# RTU, DREQ, DREP, SIDR_REQ, SIDR_REP, LAP, APR), built with the codec
# (src/device/cm/mad.c) and the RoCEv2 wire code (BTH, DETH, ICRC); tshark
# must decode every one as a CM MAD of the right attribute, on QP1 with
# the GSI Q_Key, with nothing malformed and no expert error, and show the
# service ID, communication IDs, QPNs, REJ reason and the RDMA CM header's
# addresses that were encoded; unit_roce_wire --pcap checks every ICRC
# against the IP header as written. Exit 77 (skipped) without tshark.
#   cm_mad_tshark.sh PATH/TO/test_cm_mad
set -u
bin=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v tshark >/dev/null || { echo "SKIP: tshark is not installed"; exit 77; }

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cap=$dir/cm.pcap
"$bin" --pcap "$cap" || fail "test_cm_mad --pcap"
ts() { tshark -r "$cap" "$@" 2>/dev/null; }

echo "tshark's view:"
ts | sed 's/^/  /'

total=$(ts | wc -l)
[ "$total" -eq 12 ] || fail "$total packets, want 12"
bad=$(ts -Y '_ws.malformed || _ws.expert.severity >= error' | wc -l)
if [ "$bad" -ne 0 ]; then
	ts -Y '_ws.malformed || _ws.expert.severity >= error' -V | head -n 80
	fail "$bad malformed packets"
fi

# every packet: class CM, to QP1 from QP1 with the GSI Q_Key, attributes
# in the order written
got=$(ts -T fields -E separator=' ' -e infiniband.bth.opcode \
	-e infiniband.bth.destqp -e infiniband.deth.srcqp \
	-e infiniband.deth.q_key -e infiniband.mad.mgmtclass \
	-e infiniband.mad.classversion -e infiniband.mad.attributeid)
want=""
for a in 0x0001 0x0010 0x0011 0x0012 0x0013 0x0014 0x0015 0x0016 0x0017 \
	 0x0018 0x0019 0x001a; do
	want+="100 0x000001 0x00000001 0x0000000080010000 0x07 0x02 $a"$'\n'
done
[ "$got"$'\n' = "$want" ] || fail "headers: got
$got
want
$want"

# fields tshark shows, against what was encoded (test_cm_mad.c sample_mad)
field() {   # field FRAME NAME WANT
	local v
	v=$(ts -Y "frame.number == $1" -T fields -e "$2")
	[ "$v" = "$3" ] || fail "frame $1 $2: tshark shows '$v', encoded '$3'"
	echo "  frame $1 $2 = $v"
}
echo "fields:"
field 2 infiniband.cm.req.serviceid 0x0000000001064853   # RDMA_PS_TCP, 18515
field 2 infiniband.cm.req.serviceid.protocol 0x06
field 2 infiniband.cm.req.serviceid.dport 0x4853
field 2 infiniband.cm.req 0x11223344                     # local comm ID
field 2 infiniband.cm.req.localqpn 0x000abc
field 2 infiniband.cm.req.pppmtu 0x03
field 2 infiniband.cm.req.transpsvctype 0x00
field 2 infiniband.cm.req.prim_localgid_ipv4 10.77.0.12
field 2 infiniband.cm.req.prim_remotegid_ipv4 10.77.0.11
field 2 infiniband.cm.req.ip_cm.ipv 0x04
field 2 infiniband.cm.req.ip_cm.sport 0xc350             # 50000
field 2 infiniband.cm.req.ip_cm.sip4 10.77.0.12
field 2 infiniband.cm.req.ip_cm.dip4 10.77.0.11
field 4 infiniband.cm.rej.localcommid 0x55667788
field 4 infiniband.cm.rej.remotecommid 0x11223344
field 4 infiniband.cm.rej.reason 0x0008                  # invalid service ID
field 5 infiniband.cm.rep 0x55667788
field 5 infiniband.cm.rep.remotecommid 0x11223344
field 5 infiniband.cm.rep.localqpn 0x000def
field 6 infiniband.cm.rtu.localcommid 0x11223344
field 6 infiniband.cm.rtu.remotecommid 0x55667788
field 7 infiniband.cm.dreq.localcommid 0x11223344
field 7 infiniband.cm.req.remoteqpneecn 0x000def         # DREQ's remote QPN
field 8 infiniband.cm.drsp.localcommid 0x55667788
field 8 infiniband.cm.drsp.remotecommid 0x11223344

# the ICRC of every packet, with its IP header as written
roce_wire=$(dirname "$bin")/unit_roce_wire
if [ -x "$roce_wire" ]; then
	"$roce_wire" --pcap "$cap" >"$dir/icrc.log" 2>&1 ||
		{ cat "$dir/icrc.log"; fail "an ICRC does not verify"; }
	echo "ICRC: $(grep -o '[0-9]* RoCEv2 packets, [0-9]* failed' "$dir/icrc.log")"
fi
echo "PASS: 12 CM MADs on RoCEv2 decode in tshark, none malformed, fields as encoded"
