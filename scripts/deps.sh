#!/usr/bin/env bash
# Install the Debian packages that softverbs' build and tests need (on
# Debian 12 and 13), when they are missing. As root this runs apt-get;
# otherwise it prints the exact command to run and stops. A|B: the first of
# the names that is installed, else the first that this release's apt
# knows (names that differ between releases).
#   scripts/deps.sh [PKG...]   those packages instead of the build's and tests'
#                              (tests/interop/deps.sh: make interop's own)
set -eu

pkgs=(
	gcc make cmake binutils pkg-config procps     # build, objdump, pgrep
	libibverbs-dev librdmacm-dev                  # the verbs and rdma_cm ABI headers, librdmacm.so
	libcmocka-dev                                 # unit tests
	clang 'libclang-rt-dev|libclang-rt-14-dev'    # libFuzzer targets (tests/fuzz): the default clang's
	ibverbs-utils perftest python3-pyverbs python3 # unmodified consumers
	ucx-utils valgrind gnuplot-nox                # make bench: peer, budgets, plots
	rdmacm-utils libfabric-bin infiniband-diags   # more unmodified consumers (rdma_cm, libfabric, umad)
	iproute2 nftables iperf3 tshark               # tests/net: namespaces, drops, TCP peer, decode
	curl python3-jsonschema python3-prometheus-client # stat --json's schema, --serve's text format
	systemd man-db groff-base                     # the installed units (verify, socket activation), man pages
	debootstrap                                   # make deb's test: a fresh root of this Debian release
	busybox-static                                # run --ns: a static program (tests/e2e/view.sh ns)
)
[ $# -gt 0 ] && pkgs=("$@")

installed() {
	[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" = "install ok installed" ]
}
# apt's candidate for a name, empty when it has none
candidate() {
	apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: //p' | grep -v '^(none)$' || true
}

missing=() alts=()
for p in "${pkgs[@]}"; do
	if [ "${p#*|}" = "$p" ]; then
		installed "$p" || missing+=("$p")
		continue
	fi
	have=
	for a in ${p//|/ }; do
		installed "$a" && { have=1; break; }
	done
	[ -n "$have" ] || alts+=("$p")
done
[ ${#missing[@]} -eq 0 ] && [ ${#alts[@]} -eq 0 ] && exit 0

updated=
if [ ${#alts[@]} -gt 0 ]; then
	# the choice needs apt's lists: a fresh root has none
	if [ "$(id -u)" -eq 0 ]; then
		DEBIAN_FRONTEND=noninteractive apt-get update -qq
		updated=1
	fi
	for p in "${alts[@]}"; do
		pick=
		for a in ${p//|/ }; do
			[ -n "$(candidate "$a")" ] && { pick=$a; break; }
		done
		missing+=("${pick:-${p%%|*}}")
	done
fi

cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
	echo "softverbs needs these Debian packages: ${missing[*]}" >&2
	echo "run:  sudo apt-get update && sudo $cmd" >&2
	exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
[ -n "$updated" ] || apt-get update -qq
$cmd
