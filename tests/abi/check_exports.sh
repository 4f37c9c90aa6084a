#!/bin/bash
# SPDX-License-Identifier: MIT
#
# check_exports.sh LIB - check that LIB (our libibverbs.so.1) can stand in
# for the system's rdma-core libibverbs.so.1:
#  (a) every symbol the system library defines is defined by LIB with the
#      same version, default (name@@VER) or compat (name@VER) alike, and
#      every version node it defines exists in LIB;
#  (b) LIB's SONAME is libibverbs.so.1;
#  (c) every IBVERBS_* symbol and version imported by any program or
#      library on this machine that links libibverbs.so.1 (ibverbs-utils,
#      perftest, rdmacm-utils, the providers, librdmacm, libfabric, UCX,
#      pyverbs ...) is defined by LIB.
# Exits 1 listing what is missing.
#
# SV_SYSTEM_IBVERBS overrides the reference library's path.
# SV_ROOT=DIR checks another system's root instead (a Debian 13 or sid root
# made by tests/distros/mkroot.sh): its libibverbs is the reference, its
# programs and libraries the consumers, and the dynamic linker of that
# root relocates them (chroot: needs root), LIB copied into it.

set -o pipefail

lib=$1
root=${SV_ROOT:-}
root=${root%/}
sys=${SV_SYSTEM_IBVERBS:-$root/usr/lib/x86_64-linux-gnu/libibverbs.so.1}
libdir=$root/usr/lib/x86_64-linux-gnu

if [[ -z $lib ]]; then
	echo "usage: $0 path/to/libibverbs.so.1" >&2
	exit 2
fi
for f in "$lib" "$sys"; do
	if [[ ! -r $f ]]; then
		echo "check_exports: cannot read $f" >&2
		exit 1
	fi
done

# Defined dynamic symbols as name@@VER (default) or name@VER (compat).
defs() {
	objdump -T "$1" | awk '
		$0 ~ /\*UND\*/ || NF < 6 { next }
		{
			ver = $(NF - 1); name = $NF
			if (ver ~ /^\(.*\)$/) {
				gsub(/[()]/, "", ver)
				print name "@" ver
			} else if (ver != name && ver != "Base") {
				print name "@@" ver
			}
		}'
}

# Version nodes a file defines (objdump -p "Version definitions").
verdefs() {
	objdump -p "$1" | awk '
		/^Version definitions:/ { on = 1; next }
		/^$/ || /^Version References:/ { on = 0 }
		on && NF == 4 && $2 != "0x01" { print $4 }'
}

# IBVERBS_* imports of a file, as name@VER.
imports() {
	objdump -T "$1" 2>/dev/null | awk '
		$0 ~ /\*UND\*/ && $(NF - 1) ~ /IBVERBS_/ {
			ver = $(NF - 1); gsub(/[()]/, "", ver)
			print $NF "@" ver
		}'
}

# IBVERBS_* versions a file requires from libibverbs.so.1.
verneeds() {
	objdump -p "$1" 2>/dev/null | awk '
		/required from / { on = ($3 == "libibverbs.so.1:"); next }
		on && $NF ~ /^IBVERBS_/ { print $NF }'
}

ours_defs=$(defs "$lib") || { echo "check_exports: objdump failed on $lib" >&2; exit 1; }
ours_vers=$(verdefs "$lib")
sys_defs=$(defs "$sys") || { echo "check_exports: objdump failed on $sys" >&2; exit 1; }
sys_vers=$(verdefs "$sys")

# Any definition of name@VER, default or compat, satisfies an import.
ours_any=$(sort -u <<<"${ours_defs//@@/@}")
ours_defs=$(sort -u <<<"$ours_defs")
ours_vers=$(sort -u <<<"$ours_vers")

checked=0
missing=()

# want LIST HAVE WHAT: every line of LIST must be a line of HAVE.
want() {
	local item

	while read -r item; do
		[[ -z $item ]] && continue
		checked=$((checked + 1))
		grep -qxF -- "$item" <<<"$2" || missing+=("$3 $item")
	done <<<"$1"
}

# (a) the system library's definitions and version nodes. A name has one
# default version: our library serves two private nodes (34, and 65 for
# rdma-core 65), so the other node's copy is name@NODE, which binds a
# versioned import all the same.
ours_priv=$(sed -E 's/([^@])@(IBVERBS_PRIVATE_[0-9]+)$/\1@@\2/' <<<"$ours_defs" | sort -u)
want "$(sort -u <<<"$sys_defs")" "$ours_priv" "symbol"
want "$(sort -u <<<"$sys_vers")" "$ours_vers" "version"

# (b) SONAME.
checked=$((checked + 1))
soname=$(objdump -p "$lib" | awk '$1 == "SONAME" { print $2 }')
[[ $soname == libibverbs.so.1 ]] || missing+=("soname libibverbs.so.1 (has '${soname}')")

# (c) consumers present on this machine: every program and library of the
# system that links libibverbs.so.1 (ibverbs-utils, perftest, rdmacm-utils,
# the providers, librdmacm, libfabric, UCX's modules, pyverbs ...).
links_ibverbs() {    # (no grep -q on a pipe: pipefail and SIGPIPE)
	[[ $(objdump -p "$1" 2>/dev/null) =~ NEEDED\ +libibverbs\.so\.1($'\n'|$) ]]
}
consumers=()
while IFS= read -r -d '' f; do
	[[ -L $f ]] && continue
	grep -qsF libibverbs.so.1 "$f" && links_ibverbs "$f" && consumers+=("$f")
done < <(find "$root/usr/bin" "$root/usr/sbin" "$libdir" \
	      "$root/usr/lib/python3/dist-packages" \
	      -maxdepth 4 -type f \( -perm -u+x -o -name '*.so*' \) -print0 \
	      2>/dev/null)
for need in librdmacm.so.1 libmlx5.so.1 libefa.so.1; do
	[[ ! -e $libdir/$need ]] || [[ " ${consumers[*]} " == *"/${need%%.so*}."* ]] ||
		missing+=("consumer $libdir/$need not found")
done
[[ ${#consumers[@]} -ge 10 ]] || missing+=("only ${#consumers[@]} consumers found")

for f in "${consumers[@]}"; do
	want "$(imports "$f" | sort -u)" "$ours_any" "import(${f##*/})"
	want "$(verneeds "$f" | sort -u)" "$ours_vers" "version(${f##*/})"
done

# (d) the dynamic linker agrees: each consumer, relocated in full (ldd -r)
# with LIB first on the path, loads LIB and finds no symbol or version
# missing. A consumer's own misses, the same with the system's
# libibverbs (a plugin whose symbols its host program brings, as Open
# MPI's libmca_common_verbs takes opal_* from libopen-pal), are not ours.
libdir_ours=$(cd "$(dirname "$lib")" && pwd)
ldd_in() {    # ldd -r FILE as the checked system's dynamic linker sees it
	if [[ -n $root ]]; then
		chroot "$root" env -i PATH=/usr/bin:/bin "$@"
	else
		env "$@"
	fi
}
if [[ -n $root ]]; then
	# LIB inside the root, where its loader can find it
	inlib=/tmp/sv-check-exports-lib
	rm -rf "$root$inlib" && mkdir -p "$root$inlib" &&
		cp "$lib" "$root$inlib/libibverbs.so.1" ||
		{ echo "check_exports: cannot copy $lib into $root" >&2; exit 1; }
	trap 'rm -rf "$root$inlib"' EXIT
	libdir_ours=$inlib
fi
for f in "${consumers[@]}"; do
	checked=$((checked + 1))
	out=$(ldd_in LD_LIBRARY_PATH=$libdir_ours${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
	      ldd -r "${f#"$root"}" 2>&1)
	grep -q "libibverbs.so.1 => $libdir_ours/" <<<"$out" ||
		missing+=("load(${f##*/}) does not load $libdir_ours/libibverbs.so.1")
	own=$(ldd_in ldd -r "${f#"$root"}" 2>&1 | grep -E 'undefined symbol|not found' || true)
	while read -r l; do
		[[ -n $l ]] || continue
		grep -qxF -- "$l" <<<"$own" && continue
		missing+=("load(${f##*/}) $l")
	done < <(grep -E 'undefined symbol|not found' <<<"$out")
done

for m in "${missing[@]}"; do
	echo "missing: $m"
done
echo "exports${root:+ ($root)}: $checked checked (${#consumers[@]} consumers), ${#missing[@]} missing"
[[ ${#missing[@]} -eq 0 ]]
