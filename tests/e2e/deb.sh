#!/usr/bin/env bash
# The Debian package (issue 24, Deliver 4): `make deb`'s script packages
# this build, and the package installs in a fresh Debian 12 root made by
# debootstrap (minbase, with Debian's ibverbs-utils, so rdma-core's own
# libibverbs is there too), entered with unshare and chroot:
#   - dpkg -i installs it beside rdma-core's libibverbs, which stays;
#   - an unprivileged user (nobody) runs the unmodified ibv_rc_pingpong of
#     that root, server and client, through `softverbs run`: the daemon
#     starts by itself from /usr/libexec/softverbs, no kernel module, no
#     privileges;
#   - dpkg -r removes every file it brought.
# Needs root (debootstrap, chroot) and Debian's mirror.
#   deb.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
build=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || fail "this test needs root (debootstrap and chroot)"
command -v debootstrap >/dev/null || fail "debootstrap is missing"
T=$SV_TEST_DIR/deb
mkdir -p "$T"
deb=$("$src/scripts/mkdeb.sh" "$build" "$T") || fail "mkdeb.sh"
echo "built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"
root=$T/root
mirror=${SV_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# in a mount namespace of its own: what debootstrap mounts in the root
# (proc, or the host's /dev nodes bound in a container) goes with it even
# if it is killed, and no later rm -rf of the root reaches the host's
timeout 900 unshare -m --propagation private \
	debootstrap --variant=minbase --include=ibverbs-utils bookworm \
	"$root" "$mirror" >"$T/debootstrap.log" 2>&1 ||
	{ tail -n 30 "$T/debootstrap.log"; fail "debootstrap bookworm from $mirror"; }
cp "$deb" "$root/tmp/"
sys_lib=$(chroot "$root" sh -c 'ls /usr/lib/*/libibverbs.so.1' 2>/dev/null)
[ -n "$sys_lib" ] || fail "rdma-core's libibverbs is not in the root"

cat >"$root/tmp/inside.sh" <<'IN'
set -eu
dpkg -i /tmp/softverbs_*.deb
test -e /usr/lib/softverbs/libibverbs.so.1
test -x /usr/libexec/softverbs/softverbsd
ls /usr/lib/*/libibverbs.so.1 >/dev/null      # rdma-core's is still there
mkdir -p /tmp/nobody && chown nobody: /tmp/nobody
cat >/tmp/pp.sh <<'PP'
set -u
export XDG_RUNTIME_DIR=/tmp/nobody HOME=/tmp/nobody
timeout 60 softverbs run -- ibv_rc_pingpong -g 0 -p 18515 -n 100 >/tmp/nobody/srv 2>&1 &
srv=$!
for i in $(seq 1 400); do
	grep -q ':4853 ' /proc/net/tcp /proc/net/tcp6 2>/dev/null && break
	sleep 0.025
done
timeout 60 softverbs run -- ibv_rc_pingpong -g 0 -p 18515 -n 100 127.0.0.1 \
	>/tmp/nobody/cli 2>&1
crc=$?
test $crc = 0 || kill $srv 2>/dev/null
wait $srv
src=$?
cat /tmp/nobody/srv /tmp/nobody/cli
test $crc = 0 && test $src = 0
grep -q 'iters in' /tmp/nobody/cli
PP
setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all \
	sh /tmp/pp.sh
# the daemon it started is the package's, and it leaves when idle
pid=$(cat /tmp/nobody/softverbs/control.lock 2>/dev/null | tr -d '\n')
test -n "$pid"
for i in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
! kill -0 "$pid" 2>/dev/null
dpkg -r softverbs
! test -e /usr/lib/softverbs/libibverbs.so.1
! test -e /usr/bin/softverbs
echo inside: done
IN
unshare -m --propagation private sh -c "
	mount -t proc proc '$root/proc' &&
	mount --bind /dev '$root/dev' &&
	chroot '$root' env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin sh /tmp/inside.sh
" >"$T/inside.log" 2>&1
rc=$?
cat "$T/inside.log"
[ $rc = 0 ] || fail "inside the fresh Debian 12 root: status $rc"
grep -q 'inside: done' "$T/inside.log" || fail "the steps inside did not finish"
pass "the package installs in a fresh Debian 12 root beside rdma-core, runs ibv_rc_pingpong unprivileged, and removes cleanly"
