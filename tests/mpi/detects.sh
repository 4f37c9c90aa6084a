#!/usr/bin/env bash
# mpi_check's own test: on this host (no namespaces, no sv0), 2 ranks of
# each MPI that is built, first as they are (must pass), then with
# --corrupt (rank 1 changes a byte it received): the job must fail, naming
# the byte. Bounded (60 s a job).
#   detects.sh BUILD_DIR
set -u
b=$1/bin
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp /tmp/mpi-detects.XXXXXX) || exit 1
# the launchers' stdin: an empty pipe held open, as a terminal with nothing
# typed (hydra fails now and then on a /dev/null at its end: netns_job.sh)
in=$out.stdin
mkfifo "$in" || exit 1
exec 8<>"$in"
trap 'rm -f "$out" "$in"' EXIT
ran=0
for m in ompi mpich; do
	[ -x "$b/mpi_check_$m" ] || continue
	case $m in
	ompi) run=(mpirun.openmpi --oversubscribe -np 2 --mca pml ob1
		   --mca btl 'self,vader' --mca osc pt2pt) ;;
	mpich) run=(mpiexec.hydra -n 2) ;;
	esac
	args=(--max-size 65536 --iters 1)
	if ! timeout -k 5 60 "${run[@]}" "$b/mpi_check_$m" "${args[@]}" >"$out" 2>&1 <"$in"; then
		cat "$out"
		echo "FAIL: mpi_check_$m fails on this host without --corrupt"
		exit 1
	fi
	timeout -k 5 60 "${run[@]}" "$b/mpi_check_$m" "${args[@]}" --corrupt >"$out" 2>&1 <"$in"
	rc=$?
	if [ $rc = 0 ] || [ $rc = 124 ] || [ $rc = 137 ] ||
	   ! grep -q 'rank 1: p2p blocking: Send/Recv: 65536-byte message from rank 0: byte 21845 is' "$out"; then
		cat "$out"
		echo "FAIL: mpi_check_$m --corrupt: exit $rc, no mismatch reported"
		exit 1
	fi
	grep -m1 'mpi_check: rank 1' "$out"
	echo "PASS: mpi_check_$m reports a changed byte (exit $rc)"
	ran=$((ran + 1))
done
[ $ran -gt 0 ] || { echo "SKIP: no mpi_check built"; exit 77; }
