#!/bin/bash
# SPDX-License-Identifier: MIT
#
# check_prototypes.sh LIB SRCDIR PRIVATE_NUM [CC] - every function that LIB
# (our libibverbs.so.1) exports has the prototype of the rdma-core that
# added it (44, 56 or 65: rdma_private.h's "since" column):
#  (a) each exported name, data and functions of every default version
#      node, is declared by the installed public headers
#      (<infiniband/verbs.h>, <infiniband/sa.h>), by our own extension API
#      (<softverbs/softverbs.h>) or by the reference list of rdma-core's
#      private prototypes (src/verbs/rdma_private.h);
#  (b) every source of the library compiles with all of those in scope, so
#      a definition whose signature differs from its declaration is an
#      error ("conflicting types");
#  (c) the check can fail: the old definition of ibv_get_sysfs_path, which
#      crashed librdmacm, and a const-qualified parameter where rdma-core
#      has none, are both refused.
# Exits 1 listing what is wrong.

set -o pipefail
export LC_ALL=C    # the compiler's messages in ASCII quotes

lib=$1
src=$2
pnum=$3
cc=${4:-cc}

if [[ -z $lib || -z $src || -z $pnum ]]; then
	echo "usage: $0 LIB SRCDIR PRIVATE_NUM [CC]" >&2
	exit 2
fi

work=$(mktemp -d /tmp/sv-proto.XXXXXX)
trap 'rm -rf "$work"' EXIT

flags=(-std=gnu11 -D_GNU_SOURCE -DSV_PRIVATE_NUM="$pnum"
       -I"$src/include" -I"$src/src" -fsyntax-only)
refs=(-include infiniband/verbs.h -include infiniband/sa.h
      -include softverbs/softverbs.h -include verbs/rdma_private.h)
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# (a) Exported names of the default version nodes (name@@VER), functions
# and data; the compat copies (name@VER) carry rdma-core's old ABIs, which
# no installed header declares.
names=$(objdump -T "$lib" | awk '
	$0 ~ /\*UND\*/ || NF < 7 { next }
	$NF == $(NF - 1) { next }              # a version node itself
	($3 == "DF" || $3 == "DO") && $(NF - 1) !~ /^\(/ { print $NF }' |
	sort -u)
count=$(wc -l <<<"$names")
[[ $count -gt 100 ]] || bad "only $count exported names found in $lib"
{
	echo 'static const void *const sv_exported[] = {'
	while read -r n; do
		echo "	(const void *)&$n,"
	done <<<"$names"
	echo '};'
	echo 'const void *const *sv_exported_p = sv_exported;'
} >"$work/exported.c"
if ! "$cc" "${flags[@]}" -Werror=implicit-function-declaration \
	"${refs[@]}" "$work/exported.c" 2>"$work/a.log"; then
	grep -o "'[a-zA-Z_0-9]*' undeclared" "$work/a.log" | sort -u |
		while read -r l; do echo "  not declared: $l"; done
	bad "(a) exported names without a public or reference declaration"
fi

# (b) Every source of the library against the declarations. Warnings are
# the build's business (-Werror there); errors are what this checks.
nsrc=0
for f in "$src"/src/verbs/*.c; do
	nsrc=$((nsrc + 1))
	if ! "$cc" "${flags[@]}" -w "${refs[@]}" "$f" 2>"$work/b.log"; then
		grep -E 'error' "$work/b.log" | head -n 20
		bad "(b) ${f##*/} does not compile against rdma-core's prototypes"
	fi
done
[[ $nsrc -gt 10 ]] || bad "only $nsrc library sources found under $src/src/verbs"

# (c) The check refuses a wrong signature.
cat >"$work/old.c" <<'EOF'
#include <stdio.h>
int ibv_get_sysfs_path(char *buf, size_t size)
{
	return snprintf(buf, size, "/sys") < 0 ? -1 : 0;
}
EOF
cat >"$work/const.c" <<'EOF'
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst,
			       const struct ibv_sa_path_rec *src)
{
	(void)dst;
	(void)src;
}
EOF
for t in old const; do
	if "$cc" "${flags[@]}" -w "${refs[@]}" "$work/$t.c" 2>/dev/null; then
		bad "(c) a wrong prototype ($t.c) was accepted"
	fi
done

echo "prototypes: $count exported names, $nsrc sources, $fails failed"
[[ $fails -eq 0 ]]
