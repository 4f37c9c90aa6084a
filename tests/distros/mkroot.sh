#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# mkroot.sh SUITE ROOT - a Debian SUITE root made by debootstrap (minbase)
# with the libibverbs consumers of issue 36 installed: ibverbs-utils,
# perftest, rdmacm-utils, python3-pyverbs, ucx-utils, openmpi-bin,
# libfabric-bin. Kept as a cache: a root that finished (ROOT/.sv-ready
# names its suite) is reused as it is; an unfinished one is made again.
# Needs root and Debian's mirror (SV_DEBIAN_MIRROR). A mirror's Release may be
# older than its Valid-Until (a frozen copy): apt is told not to check.
set -u
suite=$1
root=$2
mirror=${SV_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# (iproute2: rdma-core 56's test suite asks `rdma link` for netdevs;
# python3-mpi4py: an MPI job with no compiler in the root)
pkgs="ibverbs-utils perftest rdmacm-utils python3-pyverbs ucx-utils openmpi-bin libfabric-bin iproute2 python3-mpi4py"

# the stamp names the suite and the packages; a root of that suite with
# other packages only gets them installed
stamp="$suite $pkgs"
have=$(cat "$root/.sv-ready" 2>/dev/null)
[ "$have" = "$stamp" ] && exit 0
[ "$(id -u)" = 0 ] || { echo "mkroot: needs root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "mkroot: debootstrap is missing" >&2; exit 1; }
# never rm -rf a root with something mounted in it
if grep -qF " $root/" /proc/mounts; then
	echo "mkroot: something is mounted under $root" >&2
	exit 1
fi
log=$root.log
if [ "${have%% *}" != "$suite" ]; then
	rm -rf "$root"
	mkdir -p "$(dirname "$root")"
	echo "mkroot: debootstrap $suite into $root (log $log)"
	# in a mount namespace of its own (tests/e2e/deb.sh): what
	# debootstrap mounts goes with it, even if it is killed
	timeout 1200 unshare -m --propagation private \
		debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$log" 2>&1 ||
		{ tail -n 30 "$log"; echo "mkroot: debootstrap $suite failed" >&2; exit 1; }
else
	echo "mkroot: $suite: installing the packages that changed (log $log)"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
# the installs, with proc and dev in the root's own mount namespace
timeout 1200 unshare -m --propagation private sh -c "
	mount -t proc proc '$root/proc' && mount --bind /dev '$root/dev' &&
	chroot '$root' env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		DEBIAN_FRONTEND=noninteractive sh -c '
		apt-get -o Acquire::Check-Valid-Until=false update &&
		apt-get install -y --no-install-recommends $pkgs &&
		apt-get clean'
" >>"$log" 2>&1 ||
	{ tail -n 30 "$log"; echo "mkroot: installing into $suite failed" >&2; exit 1; }
echo "$stamp" >"$root/.sv-ready"
echo "mkroot: $suite ready ($(du -sm "$root" | cut -f1) MiB)"
