#!/usr/bin/env bash
# The host packages 'make interop' needs beyond scripts/deps.sh, kept apart
# so that 'make check' never pulls qemu: qemu-system-x86 (the emulator),
# iproute2 (ip netns, ss), through scripts/deps.sh: as root it runs apt-get
# for the missing ones, otherwise it prints the command and stops. The guest's
# own packages are not installed here: build-guest.sh downloads them (apt-get
# download) into the build folder. No cpio is needed (the guest's static
# busybox writes the archive); tshark is used when present (a capture of the
# tap), never required.
set -eu

exec "$(dirname "$0")/../../scripts/deps.sh" qemu-system-x86 iproute2 coreutils
