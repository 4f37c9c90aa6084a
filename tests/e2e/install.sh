#!/usr/bin/env bash
# Installed like a package (issue 24, Deliver 4): `cmake --install` of this
# build to a staging prefix and with DESTDIR, then the installed tree used
# from where it lies, with nothing of the build tree:
#   - the FHS layout: softverbs in bin, softverbsd and sv-bench in
#     libexec/softverbs (softverbsd also in sbin, a link), our libibverbs
#     and the preload library in lib/softverbs (never over rdma-core's),
#     the header, softverbs.pc, three man pages, the systemd units, the
#     ld.so.conf.d drop-in;
#   - the staged softverbs runs an unmodified ibv_rc_pingpong pair, and the
#     daemon the library starts by itself is the staged one;
#   - a program built with `pkg-config --cflags --libs softverbs` against
#     the staged tree uses the extension API and runs without `softverbs
#     run` (the run path is in the .pc);
#   - the man pages render without a warning and man finds them;
#   - systemd-analyze verify passes the units (ExecStart pointed at the
#     staged daemon);
#   - socket activation: systemd-socket-activate hands the staged daemon a
#     listening socket, which it serves (and leaves in place).
#   install.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/peers.sh"
build=$1
T=$SV_TEST_DIR/inst
stage=$T/stage dest=$T/dest
mkdir -p "$T"
unset SOFTVERBSD            # the installed tree must find its own daemon

cmake --install "$build" --prefix "$stage" >"$T/install.log" 2>&1 ||
	{ cat "$T/install.log"; fail "cmake --install --prefix"; }
DESTDIR=$dest cmake --install "$build" --prefix /usr >>"$T/install.log" 2>&1 ||
	{ cat "$T/install.log"; fail "cmake --install with DESTDIR"; }
for root in "$stage" "$dest/usr"; do
	for f in bin/softverbs libexec/softverbs/softverbsd libexec/softverbs/sv-bench \
		sbin/softverbsd include/softverbs/softverbs.h \
		share/man/man1/softverbs.1 share/man/man8/softverbsd.8 \
		share/man/man3/softverbs.3 lib/systemd/system/softverbsd.service \
		lib/systemd/user/softverbsd.service lib/systemd/user/softverbsd.socket \
		share/softverbs/ld.so.conf.d/softverbs.conf; do
		[ -e "$root/$f" ] || fail "$root/$f was not installed"
	done
	ls "$root"/lib*/softverbs/libibverbs.so.1 "$root"/lib*/softverbs/libsoftverbs_preload.so \
		"$root"/lib*/pkgconfig/softverbs.pc >/dev/null ||
		fail "the libraries or softverbs.pc are missing under $root"
	[ -z "$(find "$root" -maxdepth 3 -name 'libibverbs.so*' -not -path '*/softverbs/*')" ] ||
		fail "a libibverbs outside its own folder under $root"
done
[ "$(readlink -f "$stage/sbin/softverbsd")" = "$(readlink -f "$stage/libexec/softverbs/softverbsd")" ] ||
	fail "sbin/softverbsd does not lead to the daemon"
echo "installed: $(find "$stage" -type f | wc -l) files under the prefix, the same under DESTDIR"

# the installed tree at work
SVI=$stage/bin/softverbs
port=$(free_port)
"$SVI" run -- ibv_rc_pingpong -g 0 -p "$port" -n 100 >"$T/srv" 2>&1 &
srv=$!
wait_listen "$port" "$srv" || { cat "$T/srv"; fail "the installed pingpong server does not listen"; }
"$SVI" run -- ibv_rc_pingpong -g 0 -p "$port" -n 100 localhost >"$T/cli" 2>&1 ||
	{ cat "$T/srv" "$T/cli"; fail "the installed pingpong client failed"; }
wait "$srv" || { cat "$T/srv"; fail "the installed pingpong server failed"; }
grep -q 'iters in' "$T/cli" || fail "the client printed no result"
dpid=$(daemon_pid)
[ -n "$dpid" ] || fail "no daemon"
exe=$(readlink -f "/proc/$dpid/exe")
[ "$exe" = "$(readlink -f "$stage/libexec/softverbs/softverbsd")" ] ||
	fail "the daemon the installed tree started is $exe"
"$SVI" stat >/dev/null || fail "the installed softverbs stat"
echo "pingpong through the installed tree; its daemon: $exe"

# pkg-config and the extension header
cat >"$T/ext.c" <<'C'
#include <stdio.h>
#include <infiniband/verbs.h>
#include <softverbs/softverbs.h>
int main(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *c = l && l[0] ? ibv_open_device(l[0]) : NULL;
	struct ibv_exp_device_attr a = { .comp_mask = IBV_EXP_DEVICE_ATTR_RESOURCE_DOMAINS };

	if (!c || ibv_exp_query_device(c, &a))
		return 1;
	printf("%s max_resource_domains %u\n", ibv_get_device_name(l[0]),
	       a.max_resource_domains);
	ibv_close_device(c);
	ibv_free_device_list(l);
	return 0;
}
C
pc=$(dirname "$(ls "$stage"/lib*/pkgconfig/softverbs.pc | head -n 1)")
flags=$(PKG_CONFIG_PATH=$pc pkg-config --cflags --libs softverbs) ||
	fail "pkg-config softverbs"
cc -o "$T/ext" "$T/ext.c" $flags || fail "cc $flags"
# (a sanitized build's library needs the ASan runtime first, as `softverbs
# run` arranges; a plain build's needs nothing)
asan=
if ldd "$build/lib/libibverbs.so.1" | grep -q libasan; then
	asan=$(cc -print-file-name=libasan.so)
fi
LD_PRELOAD=$asan ASAN_OPTIONS=detect_leaks=0 "$T/ext" >"$T/ext.out" 2>&1 ||
	{ cat "$T/ext.out"; fail "the extension program"; }
grep -Eq '^sv0 max_resource_domains [1-9]' "$T/ext.out" ||
	{ cat "$T/ext.out"; fail "the extension program did not reach sv0"; }
loaded=$(ldd "$T/ext" | awk '$1 == "libibverbs.so.1" { print $3 }')
[ "$(readlink -f "$loaded")" = "$(readlink -f "$stage"/lib*/softverbs/libibverbs.so.1)" ] ||
	fail "the program loads $loaded, not the staged libibverbs"
echo "pkg-config: $flags"

# man pages
for m in man1/softverbs.1 man8/softverbsd.8 man3/softverbs.3; do
	w=$(groff -man -Tutf8 -ww -z "$stage/share/man/$m" 2>&1)
	[ -z "$w" ] || fail "$m: $w"
done
MANPATH=$stage/share/man man -w softverbsd >/dev/null 2>&1 ||
	fail "man does not find softverbsd(8) under the prefix"

# systemd units
command -v systemd-analyze >/dev/null || fail "systemd-analyze is missing (systemd)"
command -v systemd-socket-activate >/dev/null || fail "systemd-socket-activate is missing (systemd)"
{
	for u in system/softverbsd.service user/softverbsd.service user/softverbsd.socket; do
		mkdir -p "$T/units/$(dirname "$u")"
		sed "s|^ExecStart=[^ ]*|ExecStart=$stage/libexec/softverbs/softverbsd|" \
			"$stage/lib/systemd/$u" >"$T/units/$u"
	done
	MANPATH=$stage/share/man systemd-analyze verify "$T/units/system/softverbsd.service" ||
		fail "systemd-analyze verify: the system unit"
	(cd "$T/units/user" && MANPATH=$stage/share/man systemd-analyze verify \
		./softverbsd.socket ./softverbsd.service) ||
		fail "systemd-analyze verify: the user units"
	grep -q '^ListenSequentialPacket=%t/softverbs/control$' "$T/units/user/softverbsd.socket" ||
		fail "the socket unit does not listen where the library looks"
}

# socket activation
{
	sa=$T/sa
	mkdir -p "$sa"
	systemd-socket-activate --seqpacket -l "$sa/control" \
		"$stage/libexec/softverbs/softverbsd" --idle-exit 1 >"$sa/log" 2>&1 &
	act=$!
	for _ in $(seq 1 200); do [ -S "$sa/control" ] && break; sleep 0.025; done
	SOFTVERBS_SOCKET=$sa/control SOFTVERBS_NO_AUTOSTART=1 \
		"$SVI" run -- ibv_devinfo >"$sa/out" 2>&1 ||
		{ cat "$sa/out" "$sa/log"; fail "no device through the activated socket"; }
	grep -q 'hca_id:.*sv0' "$sa/out" || fail "ibv_devinfo through the activated socket"
	grep -q 'socket activation' "$sa/log" || { cat "$sa/log"; fail "the daemon did not take the socket"; }
	for _ in $(seq 1 200); do kill -0 "$act" 2>/dev/null || break; sleep 0.05; done
	kill "$act" 2>/dev/null && fail "the activated daemon did not leave when idle"
	[ -S "$sa/control" ] || fail "the daemon removed the socket systemd owns"
	echo "socket activation: served, left when idle, socket left in place"
}
pass "installed with cmake --install (prefix and DESTDIR), and working from there"
