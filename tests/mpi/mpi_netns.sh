#!/usr/bin/env bash
# An MPI job over two hosts: two network namespaces joined by a veth, a
# softverbsd in each (tests/net/lib.sh), 8 ranks of tests/mpi/mpi_check.c,
# 4 in each namespace. The launcher runs in a and reaches b the way a
# cluster reaches another host: through an rsh agent (netns_job.sh) that
# enters b's namespace, gives it a hostname of its own (a UTS namespace),
# points softverbs at b's daemon and runs the launcher's command under
# 'softverbs run'. docs/MIDDLEWARE.md has the recipe and the findings.
#
#   mpi_netns.sh BUILD_DIR MODE [kill]
#   MODE  ompi-ucx-rc   Open MPI, pml ucx, UCX_TLS=rc_verbs,ud_verbs:aux,sm,self
#         ompi-ucx-ud   Open MPI, pml ucx, UCX_TLS=ud_verbs,self
#         ompi-ofi      Open MPI, pml cm + mtl ofi, FI_PROVIDER=verbs;ofi_rxm
#         mpich-ucx-rc  MPICH (ch4:ucx), UCX_TLS=rc_verbs,ud_verbs:aux,sm,self
#         mpich-ucx-ud  MPICH (ch4:ucx), UCX_TLS=ud_verbs,sm,self
#         ompi-tcp      the baseline: Open MPI, pml ob1, btl tcp,self
#   kill  instead of the checks' end: the job loops, rank 5 (in b) is
#         killed (SIGKILL); the launcher must end, non-zero, within
#         MPI_KILL_WAIT seconds (60) and every rank with it.
#
# Each namespace is a host for shared memory too: the agent bind-mounts a
# boot_id of its own over /proc/sys/kernel/random/boot_id in the
# namespace's mount namespace, since UCX (and hence MPICH and Open MPI's pml
# ucx) takes "same boot_id" to mean "same host" and would otherwise join the
# namespaces through /dev/shm and CMA.
#
# Proof that sv0 carried the traffic between the hosts: nftables in a
# counts the bytes that cross the veth, RoCEv2 (UDP 4791) and TCP apart.
# An RDMA mode must move at least MPI_MIN_ROCE_MIB (200) MiB as RoCEv2 and
# at most MPI_MAX_TCP_MIB (8) MiB as TCP (the launchers' own control
# connections); the TCP baseline the other way round. The transports each
# stack chose are printed from its own log (UCX_LOG_LEVEL=info's ep_cfg
# lines, FI_LOG_LEVEL=info), and the daemons' RoCE counters are shown.
#
# Bounded: the job has MPI_JOB_SECONDS (300); everything is torn down on
# exit (lib.sh's ns_cleanup kills what is left in the namespaces).
export SV_BUILD_DIR=$1
mode=${2:-}
kill_test=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../net/lib.sh
. "$here/../net/lib.sh"
# shellcheck source=netns_job.sh
. "$here/netns_job.sh"

JOB_S=${MPI_JOB_SECONDS:-300}
KILL_WAIT=${MPI_KILL_WAIT:-60}
MIN_ROCE_MIB=${MPI_MIN_ROCE_MIB:-200}
MAX_TCP_MIB=${MPI_MAX_TCP_MIB:-8}
CHECK_ARGS=${MPI_CHECK_ARGS:-}
PER_HOST=${MPI_RANKS_PER_HOST:-4}

mpi_mode "$mode" ||
	fail "usage: mpi_netns.sh BUILD_DIR ompi-ucx-rc|ompi-ucx-ud|ompi-ofi|mpich-ucx-rc|mpich-ucx-ud|ompi-tcp [kill]"
mpi=$MPI_KIND launcher=$MPI_LAUNCHER
bin=$SV_BUILD_DIR/bin/mpi_check_$mpi
command -v "$launcher" >/dev/null || skip "no $launcher (Debian's ${mpi/ompi/openmpi-bin})"
[ -x "$bin" ] || skip "no $bin (built when mpicc.${mpi/ompi/openmpi} exists)"
command -v unshare >/dev/null || skip "no unshare (util-linux)"
command -v nft >/dev/null || skip "no nft (nftables): the traffic is counted with it"

ns_pair_up "$(ns_prefix mpi)"
ns_daemons_up
mpi_counters_up
mpi_hosts_up "$mode"

[ "$kill_test" = kill ] && CHECK_ARGS="$CHECK_ARGS --loop $JOB_S"
# shellcheck disable=SC2086
mpi_job_cmd "$mode" "$PER_HOST" "$bin" $CHECK_ARGS
cmd=("${MPI_CMD[@]}")

out=$NS_DIR/job.out
ns_log "$out" "the job ($mode)"
echo "job: ${cmd[*]}"
roce0=$(mpi_bytes roce) tcp0=$(mpi_bytes tcp)
t0=$(date +%s.%N)
mpi_job_start "$out" "$JOB_S"
job=$MPI_JOB
# MPI_KEEP=DIR: the job's whole output kept as DIR/MODE.out
# shellcheck disable=SC2154
[ -n "${MPI_KEEP:-}" ] && trap 'rc_=$?; mkdir -p "$MPI_KEEP" && cp "$out" "$MPI_KEEP/$mode${kill_test:+-kill}.out"; ns_cleanup $rc_; exit $?' EXIT

if [ "$kill_test" = kill ]; then
	# every rank in the loop, then rank 5 (b) killed
	for _ in $(seq 1 $(( JOB_S * 10 ))); do
		n=$(grep -c 'looping' "$out")
		[ "$n" -ge 8 ] && break
		_ns_gone "$job" && break
		sleep 0.1
	done
	[ "$n" -ge 8 ] || fail "only $n of 8 ranks reached the loop"
	victim=$(sed -n 's/.*rank 5 pid \([0-9]*\) looping.*/\1/p' "$out" | head -n 1)
	[ -n "$victim" ] || fail "no pid for rank 5"
	ip netns pids "$NS_B" | grep -qx "$victim" || fail "rank 5 (pid $victim) is not in $NS_B"
	sleep 1
	echo "killing rank 5 (pid $victim, in $NS_B) with SIGKILL"
	tk=$(date +%s.%N)
	kill -KILL "$victim"
	if ! ns_wait_job "$job" "$KILL_WAIT"; then
		ns_end_job "$job"
		fail "the job still ran $KILL_WAIT s after rank 5 was killed"
	fi
	rc=$wait_rc
	t=$(echo "$(date +%s.%N) - $tk" | bc)
	cat "$out"
	[ "$rc" != 0 ] || fail "the launcher exited 0 although rank 5 was killed"
	# (Open MPI exits 128 + the signal of a rank killed by one: 137)
	[ "$(echo "$(date +%s.%N) - $t0 < $JOB_S" | bc)" = 1 ] ||
		fail "the job had to be stopped (timeout, $JOB_S s)"
	echo "the launcher exited $rc, $t s after the kill"
	# what the others were told
	grep -E 'MPI error|noticed that process|exited on signal|BAD TERMINATION|KILLED BY SIGNAL|Connection|ERROR|error' "$out" | head -n 12
	# no rank, launcher or agent is left in either namespace
	for _ in $(seq 1 100); do
		left=$(for n in "$NS_A" "$NS_B"; do ip netns pids "$n"; done |
			grep -vxE "$PID_A|$PID_B" | tr '\n' ' ')
		[ -z "$left" ] && break
		sleep 0.1
	done
	[ -z "$left" ] || { ps -o pid,args -p "${left// /,}" >&2; fail "processes left behind: $left"; }
	# the daemons are still there and hold nothing for the job
	for s in "$SOCK_A" "$SOCK_B"; do
		st=$(SOFTVERBS_SOCKET=$s SOFTVERBS_NO_AUTOSTART=1 timeout 10 "$SV" stat 2>&1) ||
			fail "a daemon does not answer after the kill: $st"
	done
	pass "$mode: rank 5 killed, the job ended (exit $rc) ${t}s later, nothing left behind"
	exit 0
fi

if ! ns_wait_job "$job" $(( JOB_S + 10 )); then
	ns_end_job "$job"
fi
rc=$wait_rc
t=$(echo "$(date +%s.%N) - $t0" | bc)
roce=$(( $(mpi_bytes roce) - roce0 ))
tcp=$(( $(mpi_bytes tcp) - tcp0 ))

grep -E '^(\[[^]]*\]<stdout>:|\[0\] )?mpi_check' "$out" | sed 's/^[^m]*mpi_check/mpi_check/'
echo "--- transports chosen (one line per distinct choice) ---"
# UCX: "ep_cfg[N]: tag(rc_verbs/sv0:1 ...)"; libfabric: the provider
grep -oE 'ep_cfg\[[0-9]+\]: .*' "$out" | sed 's/ep_cfg\[[0-9]*\]: //' | sort | uniq -c | head -n 20
grep -oE 'mtl:ofi:provider: [^ ]*|provider: (verbs|ofi_rxm|tcp|shm|udp|sockets)[^ ]*' "$out" | sort | uniq -c | head -n 10
for s in a b; do
	sock=$NS_DIR/$s/control
	echo "--- softverbs stat in $s: RoCE counters ---"
	SOFTVERBS_SOCKET=$sock SOFTVERBS_NO_AUTOSTART=1 timeout 10 "$SV" stat 2>&1 |
		grep -iE 'roce|packets|bytes|retrans|nak' | head -n 12
done
mib() { echo $(( $1 / 1048576 )); }
echo "across the veth: RoCEv2 $(mib "$roce") MiB, TCP $(mib "$tcp") MiB ($roce / $tcp bytes); the job took $t s"

[ "$rc" = 0 ] || fail "$mode: the job exited $(ns_why "$rc")"
grep -q 'mpi_check: all checks passed' "$out" || fail "$mode: no 'all checks passed'"
if [ "$mode" = ompi-tcp ]; then
	[ "$roce" = 0 ] || fail "$mode: $roce bytes of RoCEv2 in the TCP baseline"
	[ $(( tcp >> 20 )) -ge "$MIN_ROCE_MIB" ] ||
		fail "$mode: only $(mib "$tcp") MiB of TCP crossed (expected >= $MIN_ROCE_MIB)"
else
	[ $(( roce >> 20 )) -ge "$MIN_ROCE_MIB" ] ||
		fail "$mode: only $(mib "$roce") MiB of RoCEv2 crossed the veth (expected >= $MIN_ROCE_MIB)"
	[ $(( tcp >> 20 )) -le "$MAX_TCP_MIB" ] ||
		fail "$mode: $(mib "$tcp") MiB of TCP crossed the veth (at most $MAX_TCP_MIB expected)"
	# what UCX chose between the hosts: no tcp, and the namespaces not
	# joined by shared memory (a rank's peers in the other host must be
	# on the verbs transport)
	if [[ $mode == *ucx* ]]; then
		grep -qE 'ep_cfg\[[0-9]+\]:.*(rc_verbs|ud_verbs)' "$out" ||
			fail "$mode: UCX's log names no verbs transport"
		! grep -qE 'ep_cfg\[[0-9]+\]:.*tcp/' "$out" || fail "$mode: UCX chose tcp"
		# the endpoints to the other host: sv0 alone for tagged messages
		grep -qE 'ep_cfg\[[0-9]+\]: tag\((rc|ud)_verbs/sv0:1\)' "$out" ||
			fail "$mode: no endpoint with tag(verbs on sv0:1) alone (the other host's ranks)"
	fi
fi
pass "$mode: 8 ranks over two hosts, every check passed in $t s; RoCEv2 $(mib "$roce") MiB, TCP $(mib "$tcp") MiB across"
