#!/usr/bin/env bash
# The device view (docs/DESIGN.md, "The device view"): consumers that look
# for an RDMA device in /dev/infiniband and /sys/class/infiniband* find sv0
# there when run through 'softverbs run', with what the verbs queries say.
#   view.sh CASE   CASE: ucx fi_info rping ibstat sysfs counters container gaps
#                  ns placement
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/peers.sh"
out=$SV_TEST_DIR/out

# A program's exit status says it ended by itself, not by a signal or our
# timeout.
not_signalled() { # rc what
	[ "$1" -lt 124 ] || fail "$2 ended with status $1 (signal or timeout)"
}

# ucx_info -d (UCX_TLS unset): rc_verbs and ud_verbs on device sv0:1.
check_ucx() { # file
	for tl in rc_verbs ud_verbs; do
		awk -v tl="$tl" '$2 == "Transport:" && $3 == tl { t = 1; next }
			t && $2 == "Device:" { if ($3 == "sv0:1") f = 1; t = 0 }
			END { exit !f }' "$1" || { cat "$1"; fail "ucx_info lists no $tl on sv0:1"; }
		grep -A1 "Transport: $tl" "$1" | head -n 2
	done
}

# The node GUID as ibv_devinfo prints it (xxxx:xxxx:xxxx:xxxx).
devinfo_guid() {
	"$SV" run -- ibv_devinfo | awk '$1 == "node_guid:" { print $2; exit }'
}

case "$1" in
placement)
	# what frameworks read to place the device (issue 40, Deliver 4): NCCL
	# resolves /sys/class/infiniband/DEV/device and reads the PCI ids,
	# class and link there, UCX reads device/numa_node and local_cpus: the
	# values of the PCI function under the port's interface, as rxe's
	# device/ (the interface's parent) gives them; and ports/1/rate agrees
	# with ibv_devinfo's active width and speed
	"$SV" run -- ibv_devinfo -v >"$out" 2>&1 || { cat "$out"; fail "ibv_devinfo -v"; }
	"$SV" run -- /usr/bin/python3 - >"$out.py" 2>&1 <<'PY' || { cat "$out.py"; fail "reading device/ as NCCL and UCX do"; }
import os
d = os.path.realpath('/sys/class/infiniband/sv0/device')
assert os.path.isdir(d), d
def rd(n):
    with open(os.path.join(d, n)) as f:
        return f.read().strip()
print('numa_node', rd('numa_node'))
print('local_cpulist', rd('local_cpulist'))
print('local_cpus', rd('local_cpus'))
for n in ('vendor', 'device', 'subsystem_vendor', 'subsystem_device', 'class'):
    if os.path.exists(os.path.join(d, n)):
        print(n, rd(n))
print('net', ' '.join(sorted(os.listdir(os.path.join(d, 'net')))))
PY
	cat "$out.py"
	ndev=$(awk '$1 == "net" { print $2 }' "$out.py")
	[ -n "$ndev" ] || fail "device/net names no interface"
	# the PCI function under the interface, if any (a VM's or a host's NIC)
	pci=$(realpath "/sys/class/net/$ndev/device" 2>/dev/null)
	while [ -n "$pci" ] && [ "$pci" != / ] &&
	      ! basename "$pci" | grep -Eq '^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$'; do
		pci=$(dirname "$pci")
	done
	[ "$pci" = / ] && pci=
	if [ -n "$pci" ]; then
		for f in numa_node local_cpulist local_cpus vendor device subsystem_vendor subsystem_device class; do
			[ -e "$pci/$f" ] || continue
			[ "$(awk -v f=$f '$1 == f { print $2 }' "$out.py")" = "$(cat "$pci/$f")" ] ||
				fail "device/$f is not $pci/$f ($(cat "$pci/$f"))"
		done
		where="the PCI function $(basename "$pci") under $ndev"
	else
		grep -qx 'numa_node -1' "$out.py" || fail "no PCI function under $ndev, yet a NUMA node"
		! grep -q '^vendor ' "$out.py" || fail "no PCI function under $ndev, yet a vendor"
		where="no PCI function under $ndev: node -1, no ids"
	fi
	# rate = lanes x per-lane speed, as ibv_devinfo gives them
	lanes=$(sed -n 's/^[[:space:]]*active_width:[[:space:]]*\([0-9]*\)X.*/\1/p' "$out" | head -n 1)
	gbps=$(sed -n 's/^[[:space:]]*active_speed:[[:space:]]*\([0-9.]*\) Gbps.*/\1/p' "$out" | head -n 1)
	rate=$("$SV" run -- cat /sys/class/infiniband/sv0/ports/1/rate)
	want=$(awk -v l="$lanes" -v g="$gbps" 'BEGIN { printf "%g", l * g }')
	case "$rate" in
	"$want Gb/sec ("*) ;;
	*) fail "ports/1/rate '$rate' is not ${lanes}X ${gbps} Gbps = $want Gb/sec" ;;
	esac
	pass "device/ as NCCL and UCX read it ($where); rate $rate"
	;;
ns)
	# softverbs run --ns: the view mounted at the kernel's paths in a user
	# and mount namespace, so a static program (busybox-static) sees it
	# through its raw system calls, as the user and as nobody; a dynamic
	# verbs program works there too (issue 40, Deliver 3)
	bb=$(command -v busybox) || fail "busybox is missing (busybox-static)"
	ldd "$bb" 2>&1 | grep -q "not a dynamic executable" ||
		fail "$bb is not statically linked (busybox-static)"
	gid0=$("$SV" run -- cat /sys/class/infiniband/sv0/ports/1/gids/0) ||
		fail "the preload's view: no gid 0"
	# without --ns a static program sees nothing (the preload cannot reach it)
	! "$SV" run -- "$bb" ls /sys/class/infiniband >/dev/null 2>&1 ||
		[ -d /sys/class/infiniband/sv0 ] ||
		fail "a static program saw the view without --ns: the test proves nothing"
	nsrun() { # out, then CMD: busybox's view of sv0
		local o=$1; shift
		"$@" "$bb" sh -c "$bb ls /sys/class/infiniband /dev/infiniband &&
			$bb cat /sys/class/infiniband/sv0/ports/1/state \
				/sys/class/infiniband/sv0/ports/1/gids/0 &&
			$bb ls /sys/class/net /dev/null" >"$o" 2>&1
	}
	check() { # out who
		grep -qx sv0 "$1" && grep -qx uverbs0 "$1" && grep -qx "4: ACTIVE" "$1" &&
			grep -qx "$gid0" "$1" && grep -qx /dev/null "$1" ||
			{ cat "$1"; fail "busybox under run --ns ($2) does not see sv0"; }
	}
	nsrun "$out.user" timeout 30 "$SV" run --ns -- || { cat "$out.user"; fail "run --ns"; }
	check "$out.user" "$(id -un)"
	timeout 30 "$SV" run --ns -- ibv_devinfo >"$out.devinfo" 2>&1 &&
		grep -q PORT_ACTIVE "$out.devinfo" || { cat "$out.devinfo"; fail "ibv_devinfo under run --ns"; }
	# as nobody, with a device of its own (its folder, its daemon)
	nob=$SV_TEST_DIR/nobody
	mkdir -p "$nob" && chown nobody: "$nob" && chmod 700 "$nob" ||
		fail "cannot make nobody's folder"
	chmod o+x "$SV_TEST_DIR"
	nsrun "$out.nobody" setpriv --reuid=nobody --regid=nogroup --clear-groups \
		env SOFTVERBS_SOCKET="$nob/control" SOFTVERBS_IDLE_EXIT=1 \
		timeout 30 "$SV" run --ns -- || { cat "$out.nobody"; fail "run --ns as nobody"; }
	check "$out.nobody" nobody
	npid=$(tr -d '\n' <"$nob/control.lock" 2>/dev/null)
	[ -z "$npid" ] || wait_gone "$npid" || fail "nobody's daemon $npid did not leave"
	pass "run --ns: static busybox and ibv_devinfo see sv0, as $(id -un) and as nobody"
	;;
gaps)
	# glob, nftw/ftw, "//" "." ".." paths, fstat of a uverbs descriptor,
	# the rdma_cm descriptor across read, dup, dup2, fcntl and fork, a
	# NETLINK_RDMA socket's duplicate (issue 40, Deliver 3)
	"$SV" run -- "$SV_BUILD_DIR/bin/test_viewgaps" || fail "test_viewgaps"
	pass "the view through glob, nftw, odd paths, fstat, dup and fork"
	;;
ucx)
	command -v ucx_info >/dev/null || fail "ucx_info is not installed (ucx-utils)"
	unset UCX_TLS
	timeout 60 "$SV" run -- ucx_info -d >"$out" 2>&1
	rc=$?
	not_signalled $rc "ucx_info -d"
	[ $rc -eq 0 ] || { cat "$out"; fail "ucx_info -d: status $rc"; }
	check_ucx "$out"
	pass "ucx_info -d lists rc_verbs and ud_verbs on sv0:1"
	;;
fi_info)
	command -v fi_info >/dev/null || fail "fi_info is not installed (libfabric-bin)"
	timeout 60 "$SV" run -- fi_info -p verbs >"$out" 2>&1
	rc=$?
	cat "$out"
	not_signalled $rc "fi_info -p verbs"
	grep -Eq '^[[:space:]]*domain: sv0' "$out" || fail "fi_info lists no verbs domain on sv0"
	pass "fi_info -p verbs lists a domain on sv0 (status $rc)"
	;;
rping)
	# the rdma_cm device: a character device 10:58 with abi_version 4, and
	# an rping client with no server is refused at once (rdmacm.sh and
	# test_rdmacm.c run the connections themselves)
	command -v rping >/dev/null || fail "rping is not installed (rdmacm-utils)"
	[ "$("$SV" run -- stat -c '%F %t:%T' /dev/infiniband/rdma_cm)" = \
	  "character special file a:3a" ] || fail "/dev/infiniband/rdma_cm is not 10:58"
	[ "$("$SV" run -- cat /sys/class/misc/rdma_cm/abi_version)" = 4 ] ||
		fail "/sys/class/misc/rdma_cm/abi_version is not 4"
	timeout 30 "$SV" run -- rping -c -a 127.0.0.1 -p "$(free_port)" -C 1 >"$out" 2>&1
	rc=$?
	cat "$out"
	# rping exits with -1 (255) when refused; 124 and up else is a signal
	[ $rc -lt 124 ] || [ $rc -eq 255 ] || fail "rping -c ended with status $rc"
	[ $rc -ne 0 ] || fail "rping -c with no server succeeded"
	grep -q 'RDMA_CM_EVENT_REJECTED' "$out" || fail "rping -c was not rejected"
	pass "rdma_cm is a character device, abi 4; rping -c with no server is rejected"
	;;
ibstat)
	guid=$(devinfo_guid)
	[ -n "$guid" ] || fail "ibv_devinfo gives no node GUID"
	timeout 30 "$SV" run -- ibstat >"$out" 2>&1 || { cat "$out"; fail "ibstat"; }
	cat "$out"
	grep -q "^CA 'sv0'" "$out" || fail "ibstat shows no sv0"
	grep -Eq 'State: Active$' "$out" || fail "ibstat: port not Active"
	grep -Eq 'Physical state: LinkUp$' "$out" || fail "ibstat: not LinkUp"
	grep -Eq 'Link layer: Ethernet$' "$out" || fail "ibstat: link layer not Ethernet"
	grep -q "Node GUID: 0x${guid//:/}$" "$out" ||
		fail "ibstat's node GUID is not ibv_devinfo's ($guid)"
	timeout 30 "$SV" run -- ibstatus >"$out" 2>&1 || { cat "$out"; fail "ibstatus"; }
	cat "$out"
	grep -q "device 'sv0' port 1" "$out" || fail "ibstatus shows no sv0 port 1"
	grep -Eq 'state:[[:space:]]+4: ACTIVE' "$out" || fail "ibstatus: not ACTIVE"
	grep -Eq 'phys state:[[:space:]]+5: LinkUp' "$out" || fail "ibstatus: not LinkUp"
	grep -Eq 'link_layer:[[:space:]]+Ethernet' "$out" || fail "ibstatus: not Ethernet"
	pass "ibstat and ibstatus show sv0, port 1 Active/LinkUp, Ethernet, GUID $guid"
	;;
sysfs)
	# a client keeps one daemon up for every read
	"$HOLD" --pd 1 --mr 0 --cq 0 >"$SV_TEST_DIR/hold.out" &
	wait_for_line "$SV_TEST_DIR/hold.out" '^ready' || fail "holder never got ready"
	"$SV" run -- ibv_devinfo -v >"$out" 2>&1 || { cat "$out"; fail "ibv_devinfo -v"; }
	sys=/sys/class/infiniband/sv0
	rd() { "$SV" run -- cat "$@"; }
	[ "$(rd $sys/node_guid)" = "$(devinfo_guid)" ] || fail "node_guid differs from ibv_devinfo's"
	[ "$(rd $sys/node_type)" = "1: CA" ] || fail "node_type"
	[ "$(rd $sys/ports/1/state)" = "4: ACTIVE" ] || fail "state is not 4: ACTIVE"
	[ "$(rd $sys/ports/1/phys_state)" = "5: LinkUp" ] || fail "phys_state"
	[ "$(rd $sys/ports/1/link_layer)" = "Ethernet" ] || fail "link_layer"
	fw=$(sed -n 's/^[[:space:]]*fw_ver:[[:space:]]*//p' "$out")
	[ "$(rd $sys/fw_ver)" = "$fw" ] || fail "fw_ver differs from ibv_devinfo's ($fw)"
	# every GID of ibv_devinfo -v, at its index, of type RoCE v2
	n=0
	while read -r idx gid type; do
		# eight groups of four hex digits, as the kernel writes a GID
		# (Python 3.13's exploded writes an IPv4-mapped one's dotted)
		full=$(/usr/bin/python3 -c 'import ipaddress, sys
p = ipaddress.ip_address(sys.argv[1]).packed
print(":".join(p[i:i + 2].hex() for i in range(0, 16, 2)))' "$gid")
		[ "$(rd $sys/ports/1/gids/$idx)" = "$full" ] ||
			fail "gids/$idx is not $full"
		[ "$(rd $sys/ports/1/gid_attrs/types/$idx)" = "$type" ] ||
			fail "gid_attrs/types/$idx is not $type"
		ndev=$(rd $sys/ports/1/gid_attrs/ndevs/$idx)
		"$SV" run -- ls $sys/device/net | grep -qx "$ndev" ||
			fail "device/net has no $ndev (the netdev of GID $idx)"
		n=$((n + 1))
	done < <(sed -n 's/^[[:space:]]*GID\[ *\([0-9]*\)\]:[[:space:]]*\([^,]*\), \(RoCE v2\)$/\1 \2 \3/p' "$out")
	[ $n -gt 0 ] || { cat "$out"; fail "ibv_devinfo -v lists no RoCE v2 GID"; }
	# the uverbs device, as UCX checks it, and the verbs class
	dev=$(sed -n 's/^[[:space:]]*dev_name:[[:space:]]*//p' "$out")
	[ -z "$dev" ] && dev=uverbs0
	st=$("$SV" run -- stat -c '%F %t %T' /dev/infiniband/$dev)
	m=$(( 0xc0 + ${dev#uverbs} ))
	[ "$st" = "character special file e7 $(printf %x $m)" ] ||
		fail "/dev/infiniband/$dev: $st"
	"$SV" run -- bash -c "test -c /dev/infiniband/$dev -a -r /dev/infiniband/$dev -a -w /dev/infiniband/$dev" ||
		fail "/dev/infiniband/$dev is not a readable, writable character device"
	[ "$(rd /sys/class/infiniband_verbs/$dev/ibdev)" = sv0 ] || fail "$dev/ibdev"
	[ "$(rd /sys/class/infiniband_verbs/$dev/dev)" = "231:$m" ] || fail "$dev/dev"
	[ "$(rd /sys/class/infiniband_verbs/abi_version)" = 6 ] || fail "verbs abi_version"
	[ "$(rd /sys/class/infiniband_mad/abi_version)" = 5 ] || fail "mad abi_version"
	"$SV" run -- ls /sys/class/infiniband | grep -qx sv0 || fail "ls shows no sv0"
	"$SV" run -- cat $sys/device/numa_node >/dev/null || fail "no numa_node"
	# outside the prefixes nothing changes, errors included
	"$SV" run -- cat /sys/class/infiniband_nosuch 2>&1 | grep -q 'No such file' ||
		fail "a path beside the prefixes is not passed through"
	"$SV" run -- ls /sys/class/net >/dev/null || fail "/sys/class/net unreadable"
	kill %1
	pass "sysfs: GUID, fw_ver, $n GIDs (RoCE v2), state, link layer, $dev as 231:$m"
	;;
counters)
	"$HOLD" --pd 1 --mr 0 --cq 0 >"$SV_TEST_DIR/hold.out" &
	wait_for_line "$SV_TEST_DIR/hold.out" '^ready' || fail "holder never got ready"
	c=/sys/class/infiniband/sv0/ports/1
	rd() { "$SV" run -- cat "$c/$1"; }
	tx0=$(rd counters/port_xmit_packets); rx0=$(rd counters/port_rcv_packets)
	d0=$(rd counters/port_xmit_data); hw0=$(rd hw_counters/sent_pkts)
	run_pair ibv_rc_pingpong -n 20
	tx1=$(rd counters/port_xmit_packets); rx1=$(rd counters/port_rcv_packets)
	d1=$(rd counters/port_xmit_data); hw1=$(rd hw_counters/sent_pkts)
	echo "port_xmit_packets $tx0 -> $tx1, port_rcv_packets $rx0 -> $rx1," \
	     "port_xmit_data $d0 -> $d1, sent_pkts $hw0 -> $hw1"
	[ "$tx1" -ge $((tx0 + 40)) ] || fail "port_xmit_packets did not count 40 messages"
	[ "$rx1" -ge $((rx0 + 40)) ] || fail "port_rcv_packets did not count 40 messages"
	[ "$d1" -gt "$d0" ] || fail "port_xmit_data did not move"
	[ "$hw1" -ge $((hw0 + 40)) ] || fail "hw_counters/sent_pkts did not move"
	kill %1
	pass "counters move with traffic"
	;;
container)
	# an unprivileged user, no user namespace, no mounts: a copy of the
	# tool, the daemon and the libraries it can read, a socket folder it
	# owns, and nothing of ours on its paths
	command -v setpriv >/dev/null || fail "setpriv is not installed (util-linux)"
	[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root to become nobody"; exit 0; }
	box=$(mktemp -d /tmp/softverbs-box.XXXXXX)
	cleanup_box() {
		local pid
		pid=$(tr -d '\n' 2>/dev/null < "$box/run/control.lock")
		if [ -n "$pid" ] && ! wait_gone "$pid" 400; then
			kill -TERM "$pid" 2>/dev/null
			echo "FAIL: the unprivileged daemon $pid outlived the test" >&2
			rm -rf "$box"
			exit 1
		fi
		rm -rf "$box"
	}
	trap 'kill $(jobs -p) 2>/dev/null; cleanup_box' EXIT
	mkdir -p "$box/bin" "$box/lib" "$box/run"
	cp "$SV_BUILD_DIR/bin/softverbs" "$SV_BUILD_DIR/bin/softverbsd" "$box/bin/"
	cp -P "$SV_BUILD_DIR"/lib/libibverbs.so* "$SV_BUILD_DIR/lib/libsoftverbs_preload.so" "$box/lib/"
	chmod -R a+rX "$box"
	chown 65534:65534 "$box/run"
	chmod 700 "$box/run"
	asuser() {
		timeout 60 setpriv --reuid=65534 --regid=65534 --clear-groups \
			env -u SOFTVERBSD -u XDG_RUNTIME_DIR -u LD_LIBRARY_PATH \
			-u LD_PRELOAD HOME="$box/run" SOFTVERBS_SOCKET="$box/run/control" \
			SOFTVERBS_IDLE_EXIT=1 "$box/bin/softverbs" run -- "$@"
	}
	cd "$box/run" || fail "cd"
	[ "$(setpriv --reuid=65534 --regid=65534 --clear-groups id -u)" = 65534 ] ||
		fail "cannot become nobody"
	asuser ibstat >"$box/o" 2>&1 || { cat "$box/o"; fail "ibstat as nobody"; }
	grep -q "^CA 'sv0'" "$box/o" || { cat "$box/o"; fail "ibstat as nobody: no sv0"; }
	grep -q 'State: Active$' "$box/o" || fail "ibstat as nobody: not Active"
	asuser ucx_info -d >"$box/o" 2>&1
	rc=$?
	not_signalled $rc "ucx_info -d as nobody"
	check_ucx "$box/o"
	[ "$(asuser cat /sys/class/infiniband/sv0/ports/1/gid_attrs/types/0)" = "RoCE v2" ] ||
		fail "gid type as nobody"
	asuser ibv_devinfo >"$box/o" 2>&1 || { cat "$box/o"; fail "ibv_devinfo as nobody"; }
	asuser fi_info -p verbs >"$box/o" 2>&1
	not_signalled $? "fi_info as nobody"
	grep -Eq 'domain: sv0' "$box/o" || { cat "$box/o"; fail "fi_info as nobody: no sv0"; }
	asuser rping -c -a 127.0.0.1 -C 1 >"$box/o" 2>&1
	rc=$?
	[ $rc -lt 124 ] || [ $rc -eq 255 ] || fail "rping as nobody ended with status $rc"
	grep -q 'RDMA_CM_EVENT_REJECTED' "$box/o" || { cat "$box/o"; fail "rping as nobody"; }
	[ "$(stat -c %U "$box/run/control.lock")" = nobody ] ||
		fail "the daemon did not run as nobody"
	cd / || true
	pass "as nobody, from a copy: ibstat, ucx_info, sysfs, ibv_devinfo, fi_info, rping"
	;;
*)
	fail "unknown case $1"
	;;
esac
