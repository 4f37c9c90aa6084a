#!/usr/bin/env bash
# Install the Debian 12 packages that softverbs' build and tests need, when
# they are missing. As root this runs apt-get; otherwise it prints the exact
# command to run and stops.
#   scripts/deps.sh [PKG...]   those packages instead of the build's and tests'
#                              (tests/interop/deps.sh: make interop's own)
set -eu

pkgs=(
	gcc make cmake binutils pkg-config procps     # build, objdump, pgrep
	libibverbs-dev librdmacm-dev                  # the verbs and rdma_cm ABI headers, librdmacm.so
	libcmocka-dev                                 # unit tests
	clang libclang-rt-14-dev                      # libFuzzer targets (tests/fuzz)
	ibverbs-utils perftest python3-pyverbs python3 # unmodified consumers
	ucx-utils valgrind gnuplot-nox                # make bench: peer, budgets, plots
	rdmacm-utils libfabric-bin infiniband-diags   # more unmodified consumers (rdma_cm, libfabric, umad)
	iproute2 nftables iperf3 tshark               # tests/net: namespaces, drops, TCP peer, decode
	curl python3-jsonschema python3-prometheus-client # stat --json's schema, --serve's text format
	systemd man-db groff-base                     # the installed units (verify, socket activation), man pages
	debootstrap                                   # make deb's test: a fresh Debian 12 root
	busybox-static                                # run --ns: a static program (tests/e2e/view.sh ns)
)
[ $# -gt 0 ] && pkgs=("$@")

missing=()
for p in "${pkgs[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[ "$status" = "install ok installed" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
	echo "softverbs needs these Debian packages: ${missing[*]}" >&2
	echo "run:  sudo apt-get update && sudo $cmd" >&2
	exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
$cmd
