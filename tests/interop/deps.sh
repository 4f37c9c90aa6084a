#!/usr/bin/env bash
# The host packages 'make interop' needs beyond scripts/deps.sh, kept apart
# so that 'make check' never pulls qemu: qemu-system-x86 (the emulator),
# iproute2 (ip netns, ss). Like scripts/deps.sh: as root it runs apt-get for
# the missing ones, otherwise it prints the command and stops. The guest's
# own packages are not installed here: build-guest.sh downloads them (apt-get
# download) into the build folder. No cpio is needed (the guest's static
# busybox writes the archive); tshark is used when present (a capture of the
# tap), never required.
set -eu

pkgs=(qemu-system-x86 iproute2 coreutils)

missing=()
for p in "${pkgs[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[ "$status" = "install ok installed" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
	echo "make interop needs these Debian packages: ${missing[*]}" >&2
	echo "run:  sudo apt-get update && sudo $cmd" >&2
	exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
$cmd
