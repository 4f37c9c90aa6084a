#!/usr/bin/env bash
# Boot the Linux rxe peer once and run a command in it.
#
#   tests/interop/run-guest.sh [--host 'HOST CMD'] 'GUEST CMD'
#   tests/interop/run-guest.sh [--host 'HOST CMD'] -f SCRIPT
#
# A network namespace of its own with a tap in it (10.88.0.1/24 on the host
# side), qemu -accel tcg on the tap, the guest at 10.88.0.2/24 with rxe0 on
# eth0. The guest command (busybox sh; the rdma-core programs, perftest and
# 'rdma' are there) runs once rxe0 is up; its output is printed, and this
# script exits with its status. --host runs HOST CMD (bash) inside the
# namespace once the guest is ready, while the guest command runs; a failing
# HOST CMD fails the run too. The console log and the rest stay in
# $INTEROP_DIR/runs/run-*/ (runs/latest). Builds the guest first if needed.
# Bounds: IG_BOOT (180 s to boot), IG_STEP (60 s for the command after it),
# IG_TIMEOUT (900 s for qemu in all).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

host_cmd=
while [ $# -gt 0 ]; do
	case "$1" in
	--host) host_cmd=$2; shift 2 ;;
	-f) guest_file=$2; shift 2 ;;
	-h|--help) sed -n '2,17p' "$0"; exit 0 ;;
	*) guest_cmd=$1; shift ;;
	esac
done
[ -n "${guest_file:-}${guest_cmd:-}" ] || { sed -n '2,17p' "$0" >&2; exit 2; }

bash "$here/build-guest.sh" >&2 || fail "building the guest"
ig_setup run
cmd=$IG_RUN/cmd.in
if [ -n "${guest_file:-}" ]; then cp "$guest_file" "$cmd"; else printf '%s\n' "$guest_cmd" >"$cmd"; fi
ig_boot "$cmd"
ig_wait_ready
host_rc=0
if [ -n "$host_cmd" ]; then
	ig_say "host: $host_cmd"
	ig_ns bash -c "$host_cmd" || host_rc=$?
fi
ig_end "$IG_STEP"
ig_say "guest powered off after $IG_T_END s, its command's status $IG_RC"
ig_output
[ $host_rc -eq 0 ] || fail "the host command failed ($host_rc)"
[ "$IG_RC" -eq 0 ] || fail "the guest command failed ($IG_RC)"
ig_passed
exit 0
