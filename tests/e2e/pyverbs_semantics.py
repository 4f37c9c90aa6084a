# SPDX-License-Identifier: MIT
"""
Issue 18's acceptance through Debian's unmodified pyverbs (run with
/usr/bin/python3 under 'softverbs run', tests/e2e/utils.sh): the device's
identity in the device and extended-device queries; memory windows of
type 1 and 2 bound with LOCAL_WRITE | REMOTE_WRITE, then an RDMA WRITE
through each; ibv_rereg_mr of access, PD and translation, each followed by
traffic; ibv_query_qp_data_in_order for each opcode; an unknown window
type refused; RC traffic on a parent domain whose allocator serves huge
pages; ibv_reg_dmabuf_mr refused with EOPNOTSUPP. Prints PASS lines; any
failure raises.
"""
import ctypes
import errno
import mmap
import os
import time

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ, CQEX, CqInitAttrEx
from pyverbs.device import Context
from pyverbs.mr import MR, MW, MWBind, MWBindInfo
from pyverbs.pd import PD, ParentDomain, ParentDomainContext, \
    ParentDomainInitAttr
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr, QPInitAttrEx
from pyverbs.wr import RecvWR, SendWR, SGE

ctx = Context(name="sv0")
gid = ctx.query_gid(1, 0)
RW = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
      e.IBV_ACCESS_REMOTE_READ)


def ok(what):
    print("PASS:", what, flush=True)


# ---- identity ----
a = ctx.query_device()
assert a.vendor_id != 0 and a.vendor_part_id != 0 and a.hw_ver != 0, \
    (a.vendor_id, a.vendor_part_id, a.hw_ver)
fw = a.fw_version.decode() if isinstance(a.fw_version, bytes) \
    else a.fw_version
assert fw.strip("\0"), fw
x = ctx.query_device_ex()
assert x.orig_attr.vendor_id == a.vendor_id
assert x.orig_attr.vendor_part_id == a.vendor_part_id
assert x.orig_attr.hw_ver == a.hw_ver
assert x.max_dm_size == 64 << 20, x.max_dm_size  # issue 23
assert x.odp_caps.general_caps == 3, x.odp_caps.general_caps  # ODP, implicit
assert x.tm_caps.flags == 1 and x.tm_caps.max_num_tags == 1024, \
    (x.tm_caps.flags, x.tm_caps.max_num_tags)  # tag matching, RC: issue 23
assert x.pci_atomic_caps.fetch_add == 0 and x.pci_atomic_caps.swap == 0 \
    and x.pci_atomic_caps.compare_swap == 0
# and, above them, ATOMIC WRITE (bit 40) and FLUSH_GLOBAL (38): issue 23
assert x.device_cap_flags_ex == a.device_cap_flags | 1 << 40 | 1 << 38, \
    (hex(x.device_cap_flags_ex), hex(a.device_cap_flags))
# completions carry timestamps: a clock and a mask are reported
assert x.hca_core_clock != 0 and x.completion_timestamp_mask != 0
ok("device 0x%x part %d hw %d fw %s; query_device_ex: DM, ODP, atomic "
   "write, flush; no TM, PCI atomics; timestamps at %d kHz" %
   (a.vendor_id, a.vendor_part_id, a.hw_ver, fw.strip("\0"),
    x.hca_core_clock))


# ---- an RC pair ----
class Pair:
    def __init__(self, pd, cq=None, qp_pd=None):
        self.pd = pd
        self.cq = cq if cq is not None else CQ(ctx, 64)
        qpd = qp_pd if qp_pd is not None else pd
        cap = QPCap(max_send_wr=16, max_recv_wr=16)
        if isinstance(qpd, ParentDomain):
            mk = lambda: QP(ctx, QPInitAttrEx(
                qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq, cap=cap,
                comp_mask=e.IBV_QP_INIT_ATTR_PD, pd=qpd))
        else:
            mk = lambda: QP(qpd, QPInitAttr(qp_type=e.IBV_QPT_RC,
                                            scq=self.cq, rcq=self.cq,
                                            cap=cap))
        self.a, self.b = mk(), mk()
        for q in (self.a, self.b):
            at = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
            at.qp_access_flags = (e.IBV_ACCESS_REMOTE_WRITE |
                                  e.IBV_ACCESS_REMOTE_READ |
                                  e.IBV_ACCESS_LOCAL_WRITE)
            q.to_init(at)
        for q, d in ((self.a, self.b), (self.b, self.a)):
            at = QPAttr(qp_state=e.IBV_QPS_RTR)
            at.ah_attr = AHAttr(gr=GlobalRoute(dgid=gid, sgid_index=0),
                                is_global=1, port_num=1)
            at.dest_qp_num = d.qp_num
            at.path_mtu = e.IBV_MTU_1024
            at.rq_psn = 0
            at.max_dest_rd_atomic = 1
            at.min_rnr_timer = 1
            q.to_rtr(at)
            at = QPAttr(qp_state=e.IBV_QPS_RTS)
            at.timeout = 14
            at.retry_cnt = 7
            at.rnr_retry = 7
            at.sq_psn = 0
            at.max_rd_atomic = 1
            q.to_rts(at)

    def poll(self, n=1):
        out = []
        end = time.time() + 20
        while len(out) < n and time.time() < end:
            _, wcs = self.cq.poll(n - len(out))
            out += wcs
        assert len(out) == n, "no completion"
        for wc in out:
            assert wc.status == e.IBV_WC_SUCCESS, \
                "wr_id %d: status %d" % (wc.wr_id, wc.status)
        return out

    def write(self, src, length, addr, rkey, qp=None, wr_id=1):
        wr = SendWR(wr_id=wr_id, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                    sg=[SGE(src.buf, length, src.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(rkey, addr)
        (qp or self.a).post_send(wr)
        self.poll()

    def send(self, src, length, dst_addr, dst_lkey):
        self.b.post_recv(RecvWR(wr_id=2, num_sge=1,
                                sg=[SGE(dst_addr, length, dst_lkey)]))
        self.a.post_send(SendWR(wr_id=3, opcode=e.IBV_WR_SEND, num_sge=1,
                                sg=[SGE(src.buf, length, src.lkey)],
                                send_flags=e.IBV_SEND_SIGNALED))
        self.poll(2)

    def states_ok(self):
        for q in (self.a, self.b):
            at, _ = q.query(e.IBV_QP_STATE)
            assert at.qp_state == e.IBV_QPS_RTS, at.qp_state


def pattern(n, seed):
    return bytes((seed * 131 + i * 7 + (i >> 8)) & 0xff for i in range(n))


# ---- memory windows with LOCAL_WRITE | REMOTE_WRITE ----
pd = PD(ctx)
p = Pair(pd)
src = MR(pd, 65536, e.IBV_ACCESS_LOCAL_WRITE)
dst = MR(pd, 65536, RW | e.IBV_ACCESS_MW_BIND)
bind_acc = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
for t in (e.IBV_MW_TYPE_1, e.IBV_MW_TYPE_2):
    mw = MW(pd, t)
    info = MWBindInfo(dst, dst.buf + 4096, 8192, bind_acc)
    if t == e.IBV_MW_TYPE_1:
        p.b.bind_mw(mw, MWBind(info, e.IBV_SEND_SIGNALED))
    else:
        wr = SendWR(wr_id=9, opcode=e.IBV_WR_BIND_MW,
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_bind_wr(mw, info)
        p.b.post_send(wr)
    p.poll()
    data = pattern(8192, t)
    src.write(data, 8192, 0)
    p.write(src, 8192, dst.buf + 4096, mw.rkey)
    assert dst.read(8192, 4096) == data
    p.states_ok()
    mw.close()
ok("MW type 1 and type 2 bound with LOCAL_WRITE|REMOTE_WRITE, RDMA WRITE "
   "through each lands")

# ---- an unknown window type ----
for t in (3, 4, 77):
    try:
        MW(pd, t)
    except PyverbsRDMAError as ex:
        assert ex.error_code == errno.EINVAL, ex.error_code
    else:
        raise AssertionError("a window of type %d was allocated" % t)
ok("ibv_alloc_mw of types 3, 4, 77: EINVAL")

# ---- rereg of access, PD, translation, each followed by traffic ----
m = MR(pd, 65536, e.IBV_ACCESS_LOCAL_WRITE)
h = m.handle
# traffic before, and a receive left posted with the MR's key
data = pattern(1000, 1)
src.write(data, 1000, 0)
p.send(src, 1000, m.buf, m.lkey)
p.b.post_recv(RecvWR(wr_id=2, num_sge=1, sg=[SGE(m.buf + 2000, 1000,
                                                 m.lkey)]))
m.rereg(e.IBV_REREG_MR_CHANGE_ACCESS, pd, 0, 0, RW)
assert m.handle == h
data = pattern(1000, 2)
src.write(data, 1000, 0)
p.a.post_send(SendWR(wr_id=3, opcode=e.IBV_WR_SEND, num_sge=1,
                     sg=[SGE(src.buf, 1000, src.lkey)],
                     send_flags=e.IBV_SEND_SIGNALED))
p.poll(2)
assert m.read(1000, 2000) == data
data = pattern(5000, 3)
src.write(data, 5000, 0)
p.write(src, 5000, m.buf + 100, m.rkey)
assert m.read(5000, 100) == data
p.states_ok()
ok("rereg CHANGE_ACCESS: the posted receive and an RDMA WRITE with the "
   "new rkey work")

pd2 = PD(ctx)
q = Pair(pd2)
src2 = MR(pd2, 65536, e.IBV_ACCESS_LOCAL_WRITE)
m.rereg(e.IBV_REREG_MR_CHANGE_PD, pd2, 0, 0, 0)
assert m.handle == h
data = pattern(6000, 4)
src2.write(data, 6000, 0)
q.write(src2, 6000, m.buf + 10, m.rkey)
assert m.read(6000, 10) == data
q.send(src2, 3000, m.buf + 20000, m.lkey)
assert m.read(3000, 20000) == data[:3000]
q.states_ok()
ok("rereg CHANGE_PD: WRITE and SEND through QPs of the new PD")

buf = mmap.mmap(-1, 1 << 17)
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
m.rereg(e.IBV_REREG_MR_CHANGE_TRANSLATION, pd2, addr + 4096, 65536, 0)
assert m.handle == h
data = pattern(7000, 5)
src2.write(data, 7000, 0)
q.write(src2, 7000, addr + 4096 + 300, m.rkey)
assert buf[4096 + 300:4096 + 300 + 7000] == data
q.send(src2, 2000, addr + 4096 + 40000, m.lkey)
assert buf[4096 + 40000:4096 + 42000] == data[:2000]
q.states_ok()
m.rereg(e.IBV_REREG_MR_CHANGE_TRANSLATION | e.IBV_REREG_MR_CHANGE_PD |
        e.IBV_REREG_MR_CHANGE_ACCESS, pd, src.buf + 8192, 8192, RW)
ok("rereg CHANGE_TRANSLATION (and all three): WRITE and SEND land in the "
   "new memory")
m.close()
src2.close()
for o in (q.a, q.b):
    o.close()

# ---- ibv_query_qp_data_in_order ----
ops = [e.IBV_WR_RDMA_WRITE, e.IBV_WR_RDMA_WRITE_WITH_IMM, e.IBV_WR_SEND,
       e.IBV_WR_SEND_WITH_IMM, e.IBV_WR_RDMA_READ,
       e.IBV_WR_ATOMIC_CMP_AND_SWP, e.IBV_WR_ATOMIC_FETCH_AND_ADD,
       e.IBV_WR_LOCAL_INV, e.IBV_WR_BIND_MW, e.IBV_WR_SEND_WITH_INV]
for op in ops:
    # the device guarantees no in-order placement (src/verbs/query.c)
    assert p.a.query_data_in_order(op, 0) == 0
    assert p.a.query_data_in_order(op, 1) == 0   # RETURN_CAPS: no caps
ok("ibv_query_qp_data_in_order: 0 for each of %d opcodes" % len(ops))

# ---- ibv_reg_dmabuf_mr ----
# pyverbs' DmaBufMR makes its dma-buf through a DRM render node first, which
# this machine may lack; so the verb is called through ctypes, on a PD of
# a context of its own (the same library pyverbs loaded).
lib = ctypes.CDLL("libibverbs.so.1", use_errno=True)
P = ctypes.c_void_p
lib.ibv_get_device_list.restype = ctypes.POINTER(P)
lib.ibv_get_device_list.argtypes = [ctypes.POINTER(ctypes.c_int)]
lib.ibv_open_device.restype = P
lib.ibv_open_device.argtypes = [P]
lib.ibv_alloc_pd.restype = P
lib.ibv_alloc_pd.argtypes = [P]
lib.ibv_dealloc_pd.argtypes = [P]
lib.ibv_close_device.argtypes = [P]
lib.ibv_free_device_list.argtypes = [ctypes.POINTER(P)]
lib.ibv_reg_dmabuf_mr.restype = P
lib.ibv_reg_dmabuf_mr.argtypes = [P, ctypes.c_uint64, ctypes.c_size_t,
                                  ctypes.c_uint64, ctypes.c_int,
                                  ctypes.c_int]
n = ctypes.c_int(0)
devs = lib.ibv_get_device_list(ctypes.byref(n))
assert n.value == 1
cctx = lib.ibv_open_device(devs[0])
cpd = lib.ibv_alloc_pd(cctx)
assert cctx and cpd
ctypes.set_errno(0)
r = lib.ibv_reg_dmabuf_mr(cpd, 0, 4096, 0, 0, e.IBV_ACCESS_LOCAL_WRITE)
assert r is None and ctypes.get_errno() == errno.EOPNOTSUPP, \
    (r, ctypes.get_errno())
assert lib.ibv_dealloc_pd(cpd) == 0
assert lib.ibv_close_device(cctx) == 0
lib.ibv_free_device_list(devs)
ok("ibv_reg_dmabuf_mr: NULL, EOPNOTSUPP")

# ---- a parent domain whose allocator serves huge pages ----
HUGE = 2 << 20
MAP_HUGETLB = getattr(mmap, "MAP_HUGETLB", 0x40000)
try:
    arena = mmap.mmap(-1, HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS |
                      MAP_HUGETLB)
    kind = "huge pages"
except OSError:
    if os.environ.get("SV_NEED_HUGE"):
        raise
    arena = mmap.mmap(-1, HUGE)
    kind = "ordinary pages (no huge pages to be had: huge pages NOT covered)"
base = ctypes.addressof(ctypes.c_char.from_buffer(arena))
state = {"used": 0, "live": 0}


def arena_alloc(pd, pd_ctx, size, alignment, resource_type):
    at = (state["used"] + alignment - 1) & ~(alignment - 1)
    if at + size > HUGE:
        return 0
    state["used"] = at + size
    state["live"] += 1
    return base + at


def arena_free(pd, pd_ctx, ptr, resource_type):
    assert base <= ptr < base + HUGE
    state["live"] -= 1


ppd = PD(ctx)
# pyverbs keeps only a raw pointer to the context: hold it (and the
# attributes) for the parent domain's life
pdc = ParentDomainContext(ppd, arena_alloc, arena_free)
pda = ParentDomainInitAttr(pd=ppd, pd_context=pdc)
par = ParentDomain(ctx, pda)
cqa = CqInitAttrEx(cqe=64, parent_domain=par,
                   comp_mask=e.IBV_CQ_INIT_ATTR_MASK_PD)
cq = CQEX(ctx, cqa)
hp = Pair(ppd, cq=CQ(ctx, 64), qp_pd=par)
hmr = MR(ppd, 65536, RW)
for i in range(20):
    data = pattern(4096, i)
    hmr.write(data, 4096, 0)
    hp.send(hmr, 4096, hmr.buf + 8192, hmr.lkey)
    assert hmr.read(4096, 8192) == data
    hp.write(hmr, 4096, hmr.buf + 32768, hmr.rkey)
    assert hmr.read(4096, 32768) == data
hp.states_ok()
assert state["used"] > 0
for o in (hp.a, hp.b, cq):
    o.close()
assert state["live"] == 0, state
ok("RC SEND and WRITE on a parent domain whose allocator serves %s" % kind)
ctx.close()
