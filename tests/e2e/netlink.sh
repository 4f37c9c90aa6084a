#!/usr/bin/env bash
# RDMA netlink (docs/DESIGN.md, "RDMA netlink") under `softverbs run`:
#  - test_netlink, a program that speaks NETLINK_RDMA itself: the socket
#    calls, the NLDEV answers against what verbs say, the kernel's rules
#    for malformed requests, and a daemon that outlives hostile clients;
#  - Debian's unmodified iproute2 `rdma`: dev, link (plain, -j, -d), system
#    and the resource summary while another process holds objects, each
#    figure checked against ibv_devinfo, the device view and the holder;
#    a port or device that is not there fails as on a kernel device.
. "$(dirname "$0")/lib.sh"
command -v rdma >/dev/null || fail "iproute2's rdma is missing"
T=$SV_TEST_DIR

"$SV" run -- "$SV_BUILD_DIR/bin/test_netlink" || fail "test_netlink"

"$SV" run -- ibv_devinfo -v >"$T/devinfo" 2>&1 || fail "ibv_devinfo"
guid=$(awk '/node_guid:/ { print $2; exit }' "$T/devinfo")
fw=$(awk '/fw_ver:/ { print $2; exit }' "$T/devinfo")

"$SV" run -- rdma dev >"$T/dev" 2>&1 || { cat "$T/dev"; fail "rdma dev"; }
cat "$T/dev"
# (iproute2 6.15, Debian 13's, names the protocol too)
grep -Eq "^0: sv0: node_type ca (protocol roce )?fw $fw node_guid $guid sys_image_guid $guid" "$T/dev" ||
	fail "rdma dev does not show sv0 as ibv_devinfo does (fw $fw, guid $guid)"

# the netdev: the one the device view shows under device/net
view=$("$SV" run -- ls /sys/class/infiniband/sv0/device/net 2>/dev/null | head -n 1)
"$SV" run -- rdma -j link show >"$T/link.json" 2>&1 || { cat "$T/link.json"; fail "rdma -j link"; }
cat "$T/link.json"; echo
/usr/bin/python3 - "$T/link.json" "$view" <<'PY' || fail "rdma -j link show: wrong"
import json, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == 1, rows
r = rows[0]
# what rdma-core's tests look for: ifname, port, netdev
assert r['ifname'] in ('sv0', 'sv0/1') and r['port'] == 1, r
assert r['state'] == 'ACTIVE' and r['physical_state'] == 'LINK_UP', r
if sys.argv[2]:
    assert r['netdev'] == sys.argv[2], (r, sys.argv[2])
PY
"$SV" run -- rdma link show sv0/1 >"$T/link" 2>&1 || fail "rdma link show sv0/1"
grep -q "^link sv0/1 state ACTIVE physical_state LINK_UP" "$T/link" ||
	{ cat "$T/link"; fail "rdma link show sv0/1"; }
"$SV" run -- rdma -d link >"$T/link.d" 2>&1 || fail "rdma -d link"
grep -q "caps: <.*CM" "$T/link.d" || { cat "$T/link.d"; fail "rdma -d link: no caps"; }
"$SV" run -- rdma sys >"$T/sys" 2>&1 || fail "rdma sys"
grep -q "netns shared" "$T/sys" || { cat "$T/sys"; fail "rdma sys"; }

# not there: a port, a device
! "$SV" run -- rdma link show sv0/2 >"$T/bad" 2>&1 || fail "rdma link show sv0/2 succeeded"
! "$SV" run -- rdma dev show nosuch >"$T/bad" 2>&1 || fail "rdma dev show nosuch succeeded"

# the resource summary while a holder keeps 2 PDs, 3 MRs, 1 CQ, 4 QPs
"$HOLD" --pd 2 --mr 3 --cq 1 --qp 4 >"$T/hold" 2>&1 &
holder=$!
wait_for_line "$T/hold" ready || { cat "$T/hold"; fail "holder not ready"; }
"$SV" run -- rdma res >"$T/res" 2>&1 || { cat "$T/res"; fail "rdma res"; }
cat "$T/res"
grep -q "^0: sv0: pd 2 cq 1 qp 4 cm_id 0 mr 3 ctx 1 srq 0" "$T/res" ||
	fail "rdma res does not count what the holder holds"
# the holder's objects one by one: its pid, its QPs in INIT on port 1
for k in qp cq mr pd ctx srq cm_id; do
	"$SV" run -- rdma res show $k >"$T/res.$k" 2>&1 || { cat "$T/res.$k"; fail "rdma res show $k"; }
	echo "rdma res show $k:"; cat "$T/res.$k"
done
[ "$(grep -c "pid $holder " "$T/res.qp")" = 4 ] || fail "rdma res show qp: not the holder's 4 QPs"
[ "$(grep -c "^link sv0/1 lqpn [0-9]* rqpn 0 type RC state INIT .*pid $holder comm sv_hold" "$T/res.qp")" = 4 ] ||
	fail "rdma res show qp: the QPs are not RC in INIT on sv0/1"
for q in $(sed -n 's/^qpn=//p' "$T/hold"); do
	grep -q "lqpn $q " "$T/res.qp" || fail "rdma res show qp: QP $q missing"
done
[ "$(grep -c "pid $holder " "$T/res.cq")" = 1 ] || fail "rdma res show cq: not the holder's CQ"
grep -q "users 8 " "$T/res.cq" || fail "rdma res show cq: 4 QPs send and receive on it (users 8)"
[ "$(grep -c "pid $holder " "$T/res.mr")" = 3 ] || fail "rdma res show mr: not the holder's 3 MRs"
[ "$(grep -c "pid $holder " "$T/res.pd")" = 2 ] || fail "rdma res show pd: not the holder's 2 PDs"
[ "$(grep -c "pid $holder " "$T/res.ctx")" = 1 ] || fail "rdma res show ctx: not the holder's context"
[ ! -s "$T/res.srq" ] && [ ! -s "$T/res.cm_id" ] || fail "rdma res show srq, cm_id: the holder has none"
"$SV" run -- rdma -j res show qp >"$T/res.qp.json" 2>&1 || { cat "$T/res.qp.json"; fail "rdma -j res show qp"; }
/usr/bin/python3 - "$T/res.qp.json" "$holder" "$T/hold" <<'PY' || fail "rdma -j res show qp: wrong"
import json, sys
rows = json.load(open(sys.argv[1]))
qpns = sorted(int(l[4:]) for l in open(sys.argv[3]) if l.startswith('qpn='))
assert sorted(r['lqpn'] for r in rows) == qpns, (rows, qpns)
for r in rows:
    assert r['ifname'] == 'sv0' and r['port'] == 1, r
    assert r['type'] == 'RC' and r['state'] == 'INIT', r
    assert r['pid'] == int(sys.argv[2]) and r['comm'] == 'sv_hold', r
PY
# one QP by its number, on its link (a doit)
q=$(sed -n 's/^qpn=//p' "$T/hold" | head -n 1)
"$SV" run -- rdma res show qp link sv0/1 lqpn "$q" >"$T/res.qp1" 2>&1 || { cat "$T/res.qp1"; fail "rdma res show qp lqpn $q"; }
[ "$(grep -c "lqpn $q " "$T/res.qp1")" = 1 ] || { cat "$T/res.qp1"; fail "rdma res show qp lqpn $q"; }

# the port's counters: the view's hw_counters
"$SV" run -- rdma statistic show >"$T/stat" 2>&1 || { cat "$T/stat"; fail "rdma statistic show"; }
cat "$T/stat"
v=$("$SV" run -- cat /sys/class/infiniband/sv0/ports/1/hw_counters/rcvd_seg_drop)
# (iproute2 6.1 prints a link's counters on its line, 6.15 (Debian 13)
# one a line under it)
tr -s '\n ' '  ' <"$T/stat" | grep -q "link sv0/1 .*rcvd_seg_drop $v " ||
	fail "rdma statistic show: not the view's counters"
"$SV" run -- rdma statistic show link sv0/1 >"$T/stat1" 2>&1 || { cat "$T/stat1"; fail "rdma statistic show link sv0/1"; }
tr -s '\n ' '  ' <"$T/stat1" | grep -q "^link sv0/1 .*sent_pkts" ||
	{ cat "$T/stat1"; fail "rdma statistic show link sv0/1"; }
"$SV" run -- rdma -j statistic show >"$T/stat.json" 2>&1 || { cat "$T/stat.json"; fail "rdma -j statistic show"; }
/usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r[0]["ifname"]=="sv0" and r[0]["port"]==1 and "sent_pkts" in r[0], r' \
	"$T/stat.json" || fail "rdma -j statistic show: wrong"
"$SV" run -- rdma statistic mode >"$T/mode" 2>&1 || { cat "$T/mode"; fail "rdma statistic mode"; }
cat "$T/mode"
"$SV" run -- rdma statistic qp show >"$T/statqp" 2>&1 || { cat "$T/statqp"; fail "rdma statistic qp show"; }
kill $holder
wait $holder 2>/dev/null
pass "RDMA netlink: test_netlink, and Debian's rdma dev, link, sys, res (summary and per object), statistic on sv0"
