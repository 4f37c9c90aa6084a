#!/usr/bin/env bash
# Build the Linux rxe peer: a Debian 12 kernel and an initramfs with busybox,
# the modules rdma_rxe and virtio-net need, and Debian's rdma-core user space
# (libibverbs, the rxe provider, ibverbs-utils, perftest, the 'rdma' tool).
#
#   tests/interop/build-guest.sh [--force]
#
# Everything goes under $INTEROP_DIR (default: build/interop in the repo):
#   cache/debs/   the .deb files (apt-get download; kept, never fetched twice)
#                 and closure.txt (the package list resolved once)
#   guest/        vmlinuz, initrd.cpio (the base initramfs), busybox (static,
#                 also used on the host: cpio, ping), kernel, stamp
# The extracted packages and the initramfs tree are scratch (removed).
# A second run with the same inputs does nothing (the stamp). --force
# rebuilds the initramfs from the cached .debs (still no download).
# INTEROP_KERNEL=linux-image-6.1.0-N-amd64 picks a kernel package; otherwise
# a kernel already in the cache is used, else the one linux-image-amd64
# depends on now.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
INTEROP_DIR=${INTEROP_DIR:-$repo/build/interop}
debs=$INTEROP_DIR/cache/debs
stage=$INTEROP_DIR/cache/stage
guest=$INTEROP_DIR/guest
force=0
[ "${1:-}" = --force ] && force=1

say() { echo "build-guest: $*"; }
die() { echo "build-guest: error: $*" >&2; exit 1; }

# The user space: these packages and, recursively, the library packages
# (lib*, zlib1g) they depend on. Only what the shipped programs need (their ELF
# NEEDED closure) goes into the initramfs.
roots=(busybox-static libibverbs1 ibverbs-providers ibverbs-utils iproute2 perftest
       rdmacm-utils)
# Modules loaded at boot (dependencies come from modules.dep).
# crc32_generic: rdma_rxe asks the crypto API for "crc32" at 'rdma link add'
# and nothing autoloads it in an initramfs without udev/modprobe helpers.
# rdma_ucm: the kernel's rdma_cm for user space (/dev/infiniband/rdma_cm),
# with rdma_cm and ib_cm beneath it.
modules=(virtio_pci virtio_net crc32_generic rdma_rxe rdma_ucm)

for t in apt-get apt-cache dpkg-deb tar readelf sha256sum; do
	command -v "$t" >/dev/null || die "$t is missing (run tests/interop/deps.sh)"
done

mkdir -p "$debs" "$guest"

# ---- the kernel package name -------------------------------------------
kpkg=${INTEROP_KERNEL:-}
if [ -z "$kpkg" ]; then
	# shellcheck disable=SC2012
	k=$(ls "$debs"/linux-image-6.1.0-*-amd64_*.deb 2>/dev/null | sort -V | tail -n 1 || true)
	if [ -n "$k" ]; then
		kpkg=$(basename "$k"); kpkg=${kpkg%%_*}
	fi
fi

apt_ready() { apt-cache show busybox-static >/dev/null 2>&1; }
need_apt_lists() {
	apt_ready && return 0
	if [ "$(id -u)" -eq 0 ]; then
		say "apt has no package lists: apt-get update"
		apt-get update -qq
		apt_ready && return 0
	fi
	die "apt-cache knows no packages: run 'apt-get update' (as root)"
}

# The stamp: what the initramfs is made of. The package closure is only
# resolved (apt-cache, local) when the stamp does not match.
stamp_of() { # kpkg
	{
		echo "kernel $1"
		echo "roots ${roots[*]}"
		echo "modules ${modules[*]}"
		sha256sum "$here/build-guest.sh" "$here/init" | cut -d' ' -f1
	} | sha256sum | cut -d' ' -f1
}
if [ $force -eq 0 ] && [ -n "$kpkg" ] && [ -f "$guest/stamp" ] &&
   [ -f "$guest/initrd.cpio" ] && [ -f "$guest/vmlinuz" ] && [ -x "$guest/busybox" ] &&
   [ "$(cat "$guest/stamp")" = "$(stamp_of "$kpkg")" ]; then
	say "up to date ($guest, $kpkg)"
	exit 0
fi

t0=$(date +%s)
if [ -z "$kpkg" ]; then
	need_apt_lists
	kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
		sed -n 's/^ *Depends: \(linux-image-6\.1\.0-[0-9]*-amd64\)$/\1/p' | head -n 1)
	[ -n "$kpkg" ] || die "no linux-image-6.1.0-*-amd64 behind linux-image-amd64"
fi

# ---- the package closure --------------------------------------------------
have_deb() { compgen -G "$debs/${1}_*_amd64.deb" >/dev/null || compgen -G "$debs/${1}_*_all.deb" >/dev/null; }
closure_file=$debs/closure.txt
if [ -f "$closure_file" ] && [ "$(head -n 1 "$closure_file")" = "# ${roots[*]} (lib*|zlib1g)" ]; then
	mapfile -t pkgs < <(tail -n +2 "$closure_file")
else
	need_apt_lists
	declare -A seen=()
	pkgs=() todo=("${roots[@]}")
	while [ ${#todo[@]} -gt 0 ]; do
		next=()
		for p in "${todo[@]}"; do
			[ -n "${seen[$p]:-}" ] && continue
			seen[$p]=1 pkgs+=("$p")
		done
		# Depends and Pre-Depends; of alternatives ("|Depends" then
		# "Depends") the first; virtual packages (<...>) are skipped.
		while read -r d; do
			case "$d" in lib*|zlib1g) [ -z "${seen[$d]:-}" ] && next+=("$d") ;; esac
		done < <(apt-cache depends --no-recommends --no-suggests --no-conflicts \
			--no-breaks --no-replaces --no-enhances "${todo[@]}" 2>/dev/null |
			awk '/^ *\|?(Pre)?Depends: [^<]/ { if (!alt) print $2; alt = ($1 ~ /^\|/); next }
			     /^ *\|?(Pre)?Depends: </ { alt = ($1 ~ /^\|/); next }
			     { alt = 0 }' | sort -u)
		todo=("${next[@]}")
	done
	{ echo "# ${roots[*]} (lib*|zlib1g)"; printf '%s\n' "${pkgs[@]}"; } > "$closure_file"
fi

# ---- download what the cache lacks --------------------------------------
missing=()
for p in "$kpkg" "${pkgs[@]}"; do have_deb "$p" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
	need_apt_lists
	say "downloading ${#missing[@]} packages: ${missing[*]}"
	sandbox=()
	[ "$(id -u)" -eq 0 ] && sandbox=(-o APT::Sandbox::User=root)
	(cd "$debs" && apt-get "${sandbox[@]}" -q download "${missing[@]}") ||
		die "apt-get download failed"
	for p in "${missing[@]}"; do have_deb "$p" || die "$p: not downloaded"; done
fi
deb_of() { # pkg -> the newest cached .deb
	{ compgen -G "$debs/${1}_*_amd64.deb"; compgen -G "$debs/${1}_*_all.deb"; true; } | sort -V | tail -n 1
}

# ---- extract the user space ----------------------------------------------
rm -rf "$stage"
mkdir -p "$stage"
for p in "${pkgs[@]}"; do dpkg-deb -x "$(deb_of "$p")" "$stage"; done
bb=$stage/bin/busybox
[ -x "$bb" ] || die "busybox-static did not provide bin/busybox"

# ---- the kernel: vmlinuz, modules.dep (busybox depmod over the whole
# tree, extracted into a scratch folder and removed afterwards) --------------
kdeb=$(deb_of "$kpkg")
kver=${kpkg#linux-image-}
ktmp=$INTEROP_DIR/cache/kernel-tmp
rm -rf "$ktmp" && mkdir -p "$ktmp"
dpkg-deb --fsys-tarfile "$kdeb" | tar -x -C "$ktmp" --wildcards './boot/vmlinuz-*' './lib/modules/*'
[ -f "$ktmp/boot/vmlinuz-$kver" ] || die "$kdeb: no boot/vmlinuz-$kver"
"$bb" depmod -b "$ktmp" "$kver"
mdir=$ktmp/lib/modules/$kver
[ -s "$mdir/modules.dep" ] || die "depmod wrote no modules.dep"

root=$guest/rootfs
rm -rf "$root"
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,tmp,run,root,lib64} "$root/lib/modules/$kver"

# Module load order: dependencies first (depth first over modules.dep).
declare -A mpath=() mdeps=() loaded=()
while IFS= read -r line; do
	f=${line%%:*} n=$(basename "$f" .ko)
	mpath[${n//-/_}]=$f mdeps[${n//-/_}]=${line#*:}
done < "$mdir/modules.dep"
order=()
add_mod() { # name
	local n=${1//-/_} d
	[ -n "${loaded[$n]:-}" ] && return 0
	if [ -z "${mpath[$n]:-}" ]; then
		grep -q "/$1.ko$" "$mdir/modules.builtin" && { loaded[$n]=1; return 0; }
		die "module $1: not in modules.dep nor built in"
	fi
	loaded[$n]=1
	for d in ${mdeps[$n]}; do add_mod "$(basename "$d" .ko)"; done
	order+=("${mpath[$n]}")
}
for m in "${modules[@]}"; do add_mod "$m"; done
: > "$root/lib/modules/$kver/modules.dep"
for f in "${order[@]}"; do
	mkdir -p "$root/lib/modules/$kver/$(dirname "$f")"
	cp "$mdir/$f" "$root/lib/modules/$kver/$f"
	grep "^$f:" "$mdir/modules.dep" >> "$root/lib/modules/$kver/modules.dep"
	echo "$f" >> "$root/lib/modules/$kver/load.order"
done
cp "$ktmp/boot/vmlinuz-$kver" "$guest/vmlinuz"
rm -rf "$ktmp"

# ---- the user space: programs, the rxe provider, their libraries -----------
cp "$bb" "$root/bin/busybox"
for a in $("$bb" --list); do
	[ -e "$root/bin/$a" ] || ln -s busybox "$root/bin/$a"
done
elfs=()
ship() { # path relative to the stage (symlinks followed)
	mkdir -p "$root/$(dirname "$1")"
	cp -L "$stage/$1" "$root/$1"
	elfs+=("$1")
}
for f in "$stage"/usr/bin/ibv_* "$stage"/usr/bin/ib_* "$stage"/usr/bin/rdma "$stage"/sbin/rdma \
	"$stage"/usr/bin/rping "$stage"/usr/bin/ucmatose "$stage"/usr/bin/udaddy "$stage"/usr/bin/ibv_devinfo; do
	[ -e "$f" ] && [ ! -e "$root/${f#"$stage"/}" ] && ship "${f#"$stage"/}"
done
[ -e "$root/usr/bin/ibv_devinfo" ] || die "ibv_devinfo missing from ibverbs-utils"
[ -e "$root/sbin/rdma" ] || [ -e "$root/usr/bin/rdma" ] || die "the rdma tool is missing from iproute2"
prov=$(cd "$stage" && compgen -G 'usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so' | head -n 1 || true)
[ -n "$prov" ] || die "ibverbs-providers has no librxe"
ship "$prov"
mkdir -p "$root/etc/libibverbs.d"
cp "$stage/etc/libibverbs.d/rxe.driver" "$root/etc/libibverbs.d/" || die "no rxe.driver"
# The dynamic loader, then the NEEDED closure of every shipped ELF.
ship lib64/ld-linux-x86-64.so.2
libdirs=(lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu lib usr/lib)
declare -A have=()
i=0
while [ $i -lt ${#elfs[@]} ]; do
	e=${elfs[$i]}; i=$((i + 1))
	for so in $(readelf -d "$root/$e" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
		[ -n "${have[$so]:-}" ] && continue
		found=
		for d in "${libdirs[@]}"; do
			if [ -e "$stage/$d/$so" ]; then found=$d/$so; break; fi
		done
		[ -n "$found" ] || die "$e needs $so: in no downloaded package (add its package to roots)"
		have[$so]=1
		ship "$found"
	done
done
# glibc loads libgcc_s at pthread_exit/cancellation (rping's threads end
# so): not a NEEDED entry, shipped by name
for d in "${libdirs[@]}"; do
	if [ -e "$stage/$d/libgcc_s.so.1" ]; then
		[ -e "$root/$d/libgcc_s.so.1" ] || ship "$d/libgcc_s.so.1"
		break
	fi
done
find "$root" -name libgcc_s.so.1 | grep -q . ||
	die "libgcc_s.so.1 is in no downloaded package (add libgcc-s1 to roots)"
printf '%s\n' /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu > "$root/etc/ld.so.conf"
echo "127.0.0.1 localhost" > "$root/etc/hosts"
echo "hosts: files" > "$root/etc/nsswitch.conf"
echo "root:x:0:0:root:/root:/bin/sh" > "$root/etc/passwd"
echo "root:x:0:" > "$root/etc/group"
install -m 0755 "$here/init" "$root/init"

# ---- the archive (newc, by the cached busybox: no host cpio needed) -------
(cd "$root" && find . -mindepth 1 | LC_ALL=C sort | "$bb" cpio -o -H newc 2>/dev/null) > "$guest/initrd.cpio.tmp"
mv "$guest/initrd.cpio.tmp" "$guest/initrd.cpio"
cp "$bb" "$guest/busybox.tmp" && mv "$guest/busybox.tmp" "$guest/busybox"
rm -rf "$stage" "$root"
stamp_of "$kpkg" > "$guest/stamp"
echo "$kpkg" > "$guest/kernel"
say "built in $(( $(date +%s) - t0 )) s: $kpkg, $(( $(stat -c %s "$guest/initrd.cpio") / 1024 )) KiB initramfs, ${#elfs[@]} ELF files, ${#order[@]} modules"
