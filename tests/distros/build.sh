#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Issue 36: the build works on Debian 13 as on Debian 12. A fresh SUITE
# (default trixie: gcc 14, CMake 3.31, rdma-core 56 headers) minbase root
# made by debootstrap, with only `make` added (what a user types the
# README's commands with); the current working tree copied in (every file
# git tracks, as it is now, and the untracked ones it does not ignore;
# nothing built, into /src/softverbs); then in that root, as root (its own
# mount and PID namespaces, entered with pivot_root as a container is),
# exactly the README's two commands: `make demo` (scripts/deps.sh installs
# the rest with apt, then the -Werror build, then the demo) and `make
# check` (every test, e2e_deb's own fresh root and distros_trixie's root
# included, then the daemon path alone, then ASan+UBSan). Both must pass.
# Nothing is skipped.
#  - The bare root is cached in BUILD/distros/SUITE-bare (its stamp
#    .sv-bare); each run copies it to BUILD/distros/SUITE-build, and
#    removes that copy again when everything passed (kept on a failure).
#  - One cache is seeded: distros_trixie's consumers root, made by
#    tests/distros/mkroot.sh in BUILD/distros/trixie (the same script the
#    inner test runs, which makes it here when `make distros` has not), is
#    copied to the inner build's build/distros/trixie, which mkroot.sh then
#    reuses as it does on any second run, instead of a second 5-minute
#    debootstrap.
#    e2e_deb's debootstrap (of the build's release) runs in full.
#  - Each line of the log (BUILD/distros/SUITE-build.log) is prefixed with
#    the seconds since the run began; the phases' times are printed last.
# Needs root (debootstrap, namespaces, pivot_root, mounts) and
# Debian's mirror (SV_DEBIAN_MIRROR; passed on to the tests inside). Run by
# `make distros-build` (not by .ci/run: it is a whole second make check).
# About 30 minutes on 2 cores with the caches cold, most of it `make check`
# itself.
#   build.sh BUILD_DIR [SUITE]
set -u
build=$(mkdir -p "${1:?usage: build.sh BUILD_DIR [SUITE]}" && cd "$1" && pwd) || exit 2
suite=${2:-trixie}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
cache=$build/distros
bare=$cache/$suite-bare
root=$cache/$suite-build
log=$root.log
mirror=${SV_DEBIAN_MIRROR:-http://deb.debian.org/debian}
limit=${SV_BUILD_TIMEOUT:-4500}
[ "$(id -u)" = 0 ] || { echo "distros-build: needs root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "distros-build: debootstrap is missing" >&2; exit 1; }
command -v git >/dev/null || { echo "distros-build: git is missing" >&2; exit 1; }
mkdir -p "$cache"
t0=$SECONDS
phase() { printf 'distros-build: %-28s %5d s\n' "$1" "$2"; }
mounted() { grep -qF " $1/" /proc/mounts || grep -qF " $1 " /proc/mounts; }
# never rm -rf a root with something mounted in it
remove_root() {
	if mounted "$1"; then
		echo "distros-build: something is mounted under $1, not removing it" >&2
		exit 1
	fi
	rm -rf "$1"
}

# 1. the bare root: minbase and make, nothing else
stamp="$suite minbase make $mirror"
if [ "$(cat "$bare/.sv-bare" 2>/dev/null)" != "$stamp" ]; then
	remove_root "$bare"
	echo "distros-build: debootstrap $suite (minbase, make) into $bare"
	t=$SECONDS
	timeout 1200 unshare -m --propagation private \
		debootstrap --variant=minbase --include=make "$suite" "$bare" "$mirror" \
		>"$bare.log" 2>&1 ||
		{ tail -n 30 "$bare.log"; echo "distros-build: debootstrap $suite failed" >&2; exit 1; }
	# what debootstrap fetched is not what a fresh machine has
	rm -rf "$bare"/var/cache/apt/archives/*.deb "$bare"/var/lib/apt/lists/*_* 2>/dev/null
	echo "$stamp" >"$bare/.sv-bare"
	phase "debootstrap $suite" $((SECONDS - t))
fi

# 2. distros_trixie's consumers root, seeded into the inner build below
t=$SECONDS
bash "$here/mkroot.sh" trixie "$cache/trixie" ||
	{ echo "distros-build: the trixie consumers root failed" >&2; exit 1; }
phase "consumers root (mkroot.sh)" $((SECONDS - t))

# 3. a fresh copy of the bare root, the working tree in it
t=$SECONDS
remove_root "$root"
cp -a "$bare" "$root" || exit 1
rm -f "$root/.sv-bare"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# apt in the root talks to the same mirror; a frozen copy's Release may be
# older than its Valid-Until
if [ -n "${SV_DEBIAN_MIRROR:-}" ]; then
	echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99sv-mirror"
fi
# (not under /root, 0700: tests run programs of the build as other users)
dst=/src/softverbs
mkdir -p "$root$dst"
(cd "$src" && git ls-files -z --cached --others --exclude-standard |
	while IFS= read -r -d '' f; do [ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"; done |
	tar --null -T - -cf -) | tar -xf - -C "$root$dst" ||
	{ echo "distros-build: copying the working tree failed" >&2; exit 1; }
echo "distros-build: $suite $(cat "$root/etc/debian_version"), $(cd "$root$dst" && find . -type f | wc -l) files of the working tree in $dst"
mkdir -p "$root$dst/build/distros"
cp -a "$cache/trixie" "$root$dst/build/distros/trixie" || exit 1
phase "fresh root and source" $((SECONDS - t))

# 4. in the root: the README's two commands, in a mount namespace and a
# PID namespace of their own (what is mounted goes with the first; every
# process left, a daemon that did not leave, with the second's first
# process). The root is the namespace's own root, entered with pivot_root,
# not chroot: a mount point (unshare --propagation and `ip netns exec`
# change its propagation) that a user namespace may be made under (the
# kernel refuses CLONE_NEWUSER to a chrooted process: softverbs run --ns).
# proc, sys, dev, a devpts and a /dev/shm of its own.
cat >"$root/tmp/sv-build.sh" <<'IN'
set -u
cd /src/softverbs
echo "== make demo"
make demo || { echo "== make demo: FAILED"; exit 1; }
echo "== make demo: done"
echo "== make check"
make check || { echo "== make check: FAILED"; exit 1; }
echo "== make check: done"
echo "== gcc $(gcc -dumpfullversion), $(cmake --version | head -n 1), rdma-core $(dpkg-query -W -f '${Version}' libibverbs-dev)"
IN
echo "distros-build: make demo, make check in $root$dst (log $log)"
t=$SECONDS
mkdir -p "$root/.sv-host"
timeout -k 10 "$limit" unshare -m -p --fork --kill-child --propagation private sh -c "
	mount --bind '$root' '$root' &&
	mount -t proc proc '$root/proc' && mount --bind /dev '$root/dev' &&
	mount -t devpts -o newinstance,ptmxmode=0666 devpts '$root/dev/pts' &&
	mount -t tmpfs -o mode=1777 tmpfs '$root/dev/shm' &&
	mount -t sysfs sysfs '$root/sys' &&
	cd '$root' && pivot_root . .sv-host && umount -l /.sv-host &&
	rmdir /.sv-host &&
	exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root USER=root LOGNAME=root SHELL=/bin/bash TERM=dumb \
		${SV_DEBIAN_MIRROR:+SV_DEBIAN_MIRROR=$SV_DEBIAN_MIRROR} \
		bash /tmp/sv-build.sh
" 2>&1 | while IFS= read -r l; do printf '[%5d] %s\n' $((SECONDS - t)) "$l"; done >"$log"
rc=${PIPESTATUS[0]}

# the phases, from the log's times
at() { sed -n "s/^\[ *\([0-9]*\)\] $1.*/\1/p" "$log" | head -n 1; }
d_inst=$(at 'installing: ')
d_b0=$(sed -n 's/^\[ *\([0-9]*\)\] \[ *[0-9]*%\] .*/\1/p' "$log" | head -n 1)
d_b1=$(at '== softverbs run')
d_demo=$(at '== make demo: done')
d_check=$(at '== make check: done')
[ -n "$d_b0" ] && phase "make deps (apt)" "$d_b0"
[ -n "$d_b0" ] && [ -n "$d_b1" ] && phase "build (cmake, gcc)" $((d_b1 - d_b0))
[ -n "$d_b1" ] && [ -n "$d_demo" ] && phase "demo" $((d_demo - d_b1))
[ -n "$d_demo" ] && [ -n "$d_check" ] && phase "make check" $((d_check - d_demo))
: "$d_inst"
grep -E '^\[ *[0-9]*\] (== |[0-9]+% tests passed|Total Test time|installing: |.*iters in)' "$log" | tail -n 20
phase "in all" $((SECONDS - t0))
if [ "$rc" != 0 ]; then
	echo "---- the log's last lines"
	tail -n 60 "$log"
	echo "distros-build: FAILED ($suite, status $rc; the root stays in $root, the log in $log)" >&2
	exit 1
fi
remove_root "$root"
echo "distros-build: PASS ($suite: make demo and make check in a fresh root)"
