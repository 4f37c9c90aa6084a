#!/usr/bin/env bash
# Build softverbs_VERSION_ARCH.deb from a build tree (make deb): the tree
# installed with DESTDIR under prefix /usr, a control file, dpkg-deb. The
# package installs beside Debian's rdma-core: our libibverbs.so.1 lives in
# /usr/lib/softverbs, chosen by `softverbs run` (or by the ld.so.conf.d
# drop-in in /usr/share/softverbs, copied to /etc by whoever wants it).
#   scripts/mkdeb.sh BUILD_DIR [OUT_DIR]   prints the .deb's path
set -eu
build=$(cd "$1" && pwd)
out=${2:-$build}
mkdir -p "$out"
out=$(cd "$out" && pwd)
ver=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
[ -n "$ver" ] || { echo "mkdeb: no version in $build/CMakeCache.txt" >&2; exit 1; }
arch=$(dpkg --print-architecture)
root=$(mktemp -d "$out/deb-root.XXXXXX")
trap 'rm -rf "$root"' EXIT
DESTDIR=$root cmake --install "$build" --prefix /usr >/dev/null
if objdump -p "$root/usr/lib/softverbs/libibverbs.so.1" | grep -q 'NEEDED.*libasan'; then
	echo "mkdeb: $build is a sanitized build; package a plain one" >&2
	exit 1
fi
# the shared libraries the binaries need, as Debian names their packages,
# each at least at the upstream version this build linked against (a
# package built on Debian 13 needs its glibc 2.41: dpkg refuses it on
# Debian 12 instead of a binary failing there)
deps=$(cd "$root" && for f in usr/bin/softverbs usr/libexec/softverbs/* \
	usr/lib/softverbs/*.so.1 usr/lib/softverbs/*preload.so; do
		objdump -p "$f" | awk '$1 == "NEEDED" { print $2 }'
	done | sort -u | while read -r lib; do
		[ "$lib" = libibverbs.so.1 ] && continue   # our own
		p=$(dpkg -S "*/$lib" 2>/dev/null | head -n 1 | cut -d: -f1)
		[ -n "$p" ] || continue
		v=$(dpkg-query -W -f '${Version}' "$p" 2>/dev/null)
		if [ -n "$v" ]; then echo "$p (>= ${v%-*})"; else echo "$p"; fi
	done | sort -u | paste -sd, | sed 's/,/, /g')
size=$(du -sk "$root/usr" | cut -f1)
mkdir -p "$root/DEBIAN"
cat >"$root/DEBIAN/control" <<CTL
Package: softverbs
Version: $ver
Architecture: $arch
Maintainer: softverbs developers <softverbs@localhost>
Installed-Size: $size
Depends: ${deps:-libc6}
Recommends: ibverbs-utils
Section: net
Priority: optional
Homepage: https://softverbs.invalid/
Description: software RDMA NIC in user space (device sv0)
 softverbs is an RDMA NIC written in software: a daemon is the hardware
 and its own libibverbs.so.1 the driver. Programs built against rdma-core
 run on it unmodified (softverbs run -- PROGRAM), between processes of one
 host or across hosts over RoCEv2, with no RDMA hardware, no kernel module
 and no privileges. Its libibverbs lives in /usr/lib/softverbs, beside
 rdma-core's, never over it.
CTL
deb=$out/softverbs_${ver}_${arch}.deb
dpkg-deb --root-owner-group --build "$root" "$deb" >/dev/null
echo "$deb"
