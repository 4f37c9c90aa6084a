#!/usr/bin/env bash
# Debian's unmodified ibverbs-utils and pyverbs, run through 'softverbs run'.
. "$(dirname "$0")/lib.sh"
out=$SV_TEST_DIR/out

case "$1" in
ibv_devices)
	"$SV" run -- ibv_devices >"$out" 2>&1 || { cat "$out"; fail "ibv_devices"; }
	cat "$out"
	grep -Eq '^[[:space:]]+sv0[[:space:]]+[0-9a-f]{16}$' "$out" ||
		fail "ibv_devices does not list sv0 with its GUID"
	pass "ibv_devices lists sv0"
	;;
ibv_devinfo)
	"$SV" run -- ibv_devinfo -v >"$out" 2>&1 || { cat "$out"; fail "ibv_devinfo -v"; }
	cat "$out"
	grep -q $'^hca_id:\tsv0$' "$out" || fail "no hca_id sv0"
	grep -Eq 'state:[[:space:]]+PORT_ACTIVE \(4\)' "$out" || fail "port not ACTIVE"
	grep -Eq 'link_layer:[[:space:]]+Ethernet' "$out" || fail "link layer not Ethernet"
	grep -Eq 'GID\[  0\]:[[:space:]]+::ffff:[0-9.]+, RoCE v2' "$out" ||
		fail "no RoCEv2 GID at index 0"
	grep -Eq 'node_guid:[[:space:]]+[0-9a-f]{4}:' "$out" || fail "no node GUID"
	# device memory (issue 23): what ibv_query_device_ex says, in bytes
	grep -Eq 'maximum available device memory:[[:space:]]+[1-9][0-9]*Bytes' \
		"$out" || fail "no device memory shown"
	# on-demand paging (issue 23): the general caps, RC's bits
	grep -A3 'general_odp_caps:' "$out" | grep -q 'ODP_SUPPORT_IMPLICIT' ||
		fail "no implicit ODP shown"
	grep -A7 'rc_odp_caps:' "$out" | grep -q 'SUPPORT_ATOMIC' ||
		fail "no RC ODP atomics shown"
	# tag matching (issue 23): the limits, and RC
	grep -Eq 'max_num_tags:[[:space:]]+[1-9][0-9]*$' "$out" ||
		fail "no tag-matching limits shown"
	grep -A6 'max_rndv_hdr_size:' "$out" | grep -q 'IBV_TM_CAP_RC' ||
		fail "no tag matching on RC shown"
	pass "ibv_devinfo -v shows sv0, port ACTIVE, a GID, device memory, ODP, tag matching"
	;;
pyverbs)
	"$SV" run -- /usr/bin/python3 - >"$out" 2>&1 <<'PY' || { cat "$out"; fail "pyverbs"; }
import pyverbs.device as d
from pyverbs.device import Context
devs = d.get_device_list()
names = [x.name.decode() if isinstance(x.name, bytes) else x.name for x in devs]
print("devices:", names)
assert names == ["sv0"], names
ctx = Context(name="sv0")
port = ctx.query_port(1)
print("port state", port.state)
assert port.state == 4
gid = ctx.query_gid(1, 0)
print("gid", gid)
assert str(gid).startswith("0000:0000:0000:0000:0000:ffff:"), gid
ctx.close()
PY
	cat "$out"
	pass "pyverbs lists and opens sv0"
	;;
pyverbs_xrc)
	# XRC through Debian's pyverbs: a domain of a file, an XRC SRQ, an
	# XRC_SEND QP that sends into it through an XRC_RECV QP
	"$SV" run -- /usr/bin/python3 - >"$out" 2>&1 <<'PY' || { cat "$out"; fail "pyverbs XRC"; }
import os
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.xrcd import XRCD, XRCDInitAttr
from pyverbs.srq import SRQ, SrqInitAttrEx
from pyverbs.qp import QP, QPInitAttrEx, QPCap, QPAttr
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.wr import SendWR, RecvWR, SGE
import pyverbs.enums as e
ctx = Context(name="sv0")
pd = PD(ctx)
cq = CQ(ctx, 16)
fd = os.open(os.path.join(os.environ.get("SV_TEST_DIR", "/tmp"), "pyxrc"),
             os.O_RDONLY | os.O_CREAT, 0o600)
xrcd = XRCD(ctx, XRCDInitAttr(e.IBV_XRCD_INIT_ATTR_FD |
                              e.IBV_XRCD_INIT_ATTR_OFLAGS, os.O_CREAT, fd))
sa = SrqInitAttrEx(max_wr=8, max_sge=1)
sa.srq_type = e.IBV_SRQT_XRC
sa.pd = pd
sa.xrcd = xrcd
sa.cq = cq
sa.comp_mask = (e.IBV_SRQ_INIT_ATTR_TYPE | e.IBV_SRQ_INIT_ATTR_PD |
                e.IBV_SRQ_INIT_ATTR_CQ | e.IBV_SRQ_INIT_ATTR_XRCD)
srq = SRQ(ctx, sa)
srqn = srq.get_srq_num()
tgt = QP(ctx, QPInitAttrEx(qp_type=e.IBV_QPT_XRC_RECV,
                           comp_mask=e.IBV_QP_INIT_ATTR_XRCD, xrcd=xrcd))
ini = QP(ctx, QPInitAttrEx(qp_type=e.IBV_QPT_XRC_SEND,
                           comp_mask=e.IBV_QP_INIT_ATTR_PD, pd=pd, scq=cq,
                           cap=QPCap(max_send_wr=4, max_recv_wr=0,
                                     max_recv_sge=0)))
gid = ctx.query_gid(1, 0)
def path(a, dqpn):
    gr = GlobalRoute(dgid=gid, sgid_index=0)
    a.ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
    a.dest_qp_num = dqpn
    a.path_mtu = e.IBV_MTU_1024
a = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
a.qp_access_flags = 0
tgt.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT |
           e.IBV_QP_ACCESS_FLAGS)
ini.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT |
           e.IBV_QP_ACCESS_FLAGS)
a = QPAttr(qp_state=e.IBV_QPS_RTR)
path(a, ini.qp_num)
a.rq_psn = 0
a.min_rnr_timer = 1
tgt.modify(a, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU |
           e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN |
           e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
a = QPAttr(qp_state=e.IBV_QPS_RTR)
path(a, tgt.qp_num)
ini.modify(a, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU |
           e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN)
a = QPAttr(qp_state=e.IBV_QPS_RTS)
a.timeout = 14
a.retry_cnt = 7
a.rnr_retry = 7
a.sq_psn = 0
ini.modify(a, e.IBV_QP_STATE | e.IBV_QP_TIMEOUT | e.IBV_QP_SQ_PSN |
           e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY | e.IBV_QP_MAX_QP_RD_ATOMIC)
mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
mr.write(b"pyverbs over XRC", 16, 0)
srq.post_recv(RecvWR(wr_id=7, num_sge=1,
                     sg=[SGE(mr.buf + 2048, 64, mr.lkey)]))
wr = SendWR(wr_id=8, opcode=e.IBV_WR_SEND, num_sge=1,
            sg=[SGE(mr.buf, 16, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
wr.set_qp_type_xrc(srqn)
ini.post_send(wr)
import time
got, t0 = [], time.time()
while len(got) < 2 and time.time() - t0 < 20:
    n, wcs = cq.poll(2)
    got += wcs[:n]
assert len(got) == 2, got
for wc in got:
    assert wc.status == e.IBV_WC_SUCCESS, wc
rx = [w for w in got if w.opcode == e.IBV_WC_RECV][0]
assert rx.wr_id == 7 and rx.qp_num == tgt.qp_num and rx.byte_len == 16, rx
assert mr.read(16, 2048) == b"pyverbs over XRC"
print("srq", srqn, "tgt", hex(tgt.qp_num), "ini", hex(ini.qp_num),
      "received", mr.read(16, 2048))
for o in (ini, tgt, srq, mr, xrcd, cq, pd, ctx):
    o.close()
os.close(fd)
print("pyverbs XRC ok")
PY
	cat "$out"
	grep -q "pyverbs XRC ok" "$out" || fail "pyverbs XRC did not finish"
	pass "pyverbs: XRC domain, SRQ and QPs, a SEND into the SRQ"
	;;
pyverbs_semantics)
	# issue 18's acceptance (tests/e2e/pyverbs_semantics.py). Its huge
	# pages: as root with none free, one is reserved for the run and given
	# back; SV_NEED_HUGE makes their absence a failure then
	nr=/proc/sys/vm/nr_hugepages saved=
	free=$(awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo)
	if [ "${free:-0}" -eq 0 ] && [ "$(id -u)" -eq 0 ] && saved=$(cat $nr) &&
	   echo $((saved + 1)) >$nr 2>/dev/null; then
		trap 'echo "$saved" >'$nr'; kill $(jobs -p) 2>/dev/null' EXIT
	else
		saved=
	fi
	free=$(awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo)
	[ "${free:-0}" -gt 0 ] && export SV_NEED_HUGE=1
	"$SV" run -- /usr/bin/python3 "$(dirname "$0")/pyverbs_semantics.py" \
		>"$out" 2>&1 || { cat "$out"; fail "pyverbs semantics"; }
	cat "$out"
	[ "$(grep -c '^PASS:' "$out")" -eq 9 ] || fail "not every check passed"
	pass "pyverbs: identity, windows, rereg, data_in_order, MW type, dmabuf, huge-page parent domain"
	;;
*)
	fail "unknown case $1"
	;;
esac
