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
	pass "ibv_devinfo -v shows sv0, port ACTIVE, a GID"
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
*)
	fail "unknown case $1"
	;;
esac
