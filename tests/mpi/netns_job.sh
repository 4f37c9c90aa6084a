# shellcheck shell=bash
# An MPI job over the two hosts of tests/net/lib.sh (two network namespaces
# joined by a veth, a softverbsd in each): the launcher runs in a and
# reaches b the way a cluster reaches another host, through an rsh agent
# (written here) that enters b's namespace, gives it a hostname and a
# boot_id of its own (UCX takes one boot_id for one host), points softverbs
# at b's daemon and runs the launcher's command under 'softverbs run'.
# Sourced after lib.sh, once ns_pair_up and ns_daemons_up have run, by
# tests/mpi/mpi_netns.sh and bench/middleware.sh. docs/MIDDLEWARE.md has the
# recipe.
#
#   mpi_mode MODE        MPI_KIND (ompi, mpich) and MPI_LAUNCHER for MODE;
#                        returns 1 for an unknown one. MODE:
#     ompi-ucx-rc   Open MPI, pml ucx, UCX_TLS=rc_verbs,ud_verbs:aux,sm,self
#     ompi-ucx-ud   Open MPI, pml ucx, UCX_TLS=ud_verbs,self
#     ompi-ofi      Open MPI, pml cm + mtl ofi, FI_PROVIDER=verbs;ofi_rxm
#     mpich-ucx-rc  MPICH (ch4:ucx), UCX_TLS=rc_verbs,ud_verbs:aux,sm,self
#     mpich-ucx-ud  MPICH (ch4:ucx), UCX_TLS=ud_verbs,sm,self
#     ompi-tcp      Open MPI, pml ob1, btl tcp,self (every pair over TCP)
#     ompi-tcp-sm   Open MPI, pml ob1, btl tcp,vader,self (TCP between the
#                   hosts, shared memory within one, as pml ucx does)
#   mpi_hosts_up MODE    the hosts' boot_ids, their /etc/hosts (ompi-ofi:
#                        docs/MIDDLEWARE.md, finding 4) and the agent
#                        ($MPI_AGENT, its calls logged); HOST_A, HOST_B
#   mpi_counters_up      nftables in a counts the bytes crossing veth0,
#                        RoCEv2 (UDP 4791) and TCP apart, both directions
#   mpi_bytes roce|tcp   those bytes so far
#   mpi_job_cmd MODE PER_HOST PROG [ARGS...]
#                        MPI_CMD: the launcher's command line, PER_HOST
#                        ranks in a (the first ones), as many in b;
#                        MPI_LAUNCHER_ARGS (words) go before PROG
#   mpi_job_start OUT SECONDS
#                        MPI_CMD in a through the agent, in the background
#                        under timeout(1), its output in OUT; MPI_JOB (the
#                        pid, in NS_PIDS)
MPI_KIND='' MPI_LAUNCHER='' MPI_AGENT='' MPI_JOB='' HOST_A='' HOST_B=''
MPI_CMD=()

mpi_mode() { # mode
	case $1 in
	ompi-ucx-rc|ompi-ucx-ud|ompi-ofi|ompi-tcp|ompi-tcp-sm)
		MPI_KIND=ompi MPI_LAUNCHER=mpirun.openmpi ;;
	mpich-ucx-rc|mpich-ucx-ud)
		MPI_KIND=mpich MPI_LAUNCHER=mpiexec.hydra ;;
	*) return 1 ;;
	esac
}

mpi_hosts_up() { # mode
	local h hosts_a='' hosts_b=''
	HOST_A=sv-mpi-a HOST_B=sv-mpi-b
	# a boot_id of its own for each host
	for h in a b; do
		cat /proc/sys/kernel/random/uuid >"$NS_DIR/boot_id.$h" || fail "uuid"
	done
	# libfabric's verbs provider names an endpoint by binding "localhost"
	# (docs/MIDDLEWARE.md): sv0 accepts 127.0.0.1, Linux's rdma_cm does
	# not (ENODEV: no GID table holds it) and libfabric then takes the
	# device's interface address. Until the device answers as Linux does,
	# a libfabric host's "localhost" is its own address (in its mount
	# namespace).
	if [ "$1" = ompi-ofi ]; then
		hosts_a=$NS_DIR/hosts.a hosts_b=$NS_DIR/hosts.b
		printf '%s localhost\n%s %s\n%s %s\n' "$IP_A" "$IP_A" "$HOST_A" "$IP_B" "$HOST_B" >"$hosts_a"
		printf '%s localhost\n%s %s\n%s %s\n' "$IP_B" "$IP_A" "$HOST_A" "$IP_B" "$HOST_B" >"$hosts_b"
	fi
	# The agent: "agent HOST CMD..." runs CMD (a shell command line, as ssh
	# would) on HOST; "agent --exec HOST PROG ARGS..." runs PROG with its
	# arguments as they are (the launcher itself, in a). Both as a host
	# would: inside the namespace, with its hostname and boot_id, on its
	# daemon, under softverbs run. Every call is logged.
	MPI_AGENT=$NS_DIR/agent
	cat >"$MPI_AGENT" <<EOF
#!/bin/bash
exec_argv=0
[ "\$1" = --exec ] && { exec_argv=1; shift; }
# options an ssh-style caller may put before the host
while [ \$# -gt 0 ] && [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
case \$host in
$IP_A|$HOST_A) ns=$NS_A sock=$SOCK_A name=$HOST_A boot=$NS_DIR/boot_id.a hosts=$hosts_a ;;
$IP_B|$HOST_B) ns=$NS_B sock=$SOCK_B name=$HOST_B boot=$NS_DIR/boot_id.b hosts=$hosts_b ;;
*) echo "agent: unknown host '\$host'" >&2; exit 255 ;;
esac
echo "\$(date +%T.%N) \$host: \$*" >>$NS_DIR/agent.log
if [ \$exec_argv = 0 ]; then set -- /bin/sh -c "\$*"; fi
exec ip netns exec "\$ns" unshare --uts -- /bin/bash -c '
	hostname "\$1" && mount --bind "\$2" /proc/sys/kernel/random/boot_id || exit 255
	if [ -n "\$4" ]; then mount --bind "\$4" /etc/hosts || exit 255; fi
	export SOFTVERBS_SOCKET=\$3 SOFTVERBS_NO_AUTOSTART=1 SOFTVERBSD=/nonexistent/softverbsd
	shift 4
	exec "$SV" run -- "\$@"' agent "\$name" "\$boot" "\$sock" "\$hosts" "\$@"
EOF
	chmod +x "$MPI_AGENT" || fail "the agent"
	ns_log "$NS_DIR/agent.log" "the rsh agent's calls"
}

mpi_counters_up() {
	ip netns exec "$NS_A" nft -f - <<-EOF || fail "nft byte counters in $NS_A"
	table inet svmpi {
		counter roce_in {}
		counter roce_out {}
		counter tcp_in {}
		counter tcp_out {}
		chain in { type filter hook input priority -5; iifname "veth0" udp dport 4791 counter name roce_in; iifname "veth0" meta l4proto tcp counter name tcp_in; }
		chain out { type filter hook output priority -5; oifname "veth0" udp dport 4791 counter name roce_out; oifname "veth0" meta l4proto tcp counter name tcp_out; }
	}
	EOF
}

_mpi_counter() { # name
	ip netns exec "$NS_A" nft list counter inet svmpi "$1" 2>/dev/null |
		awk '{ for (i = 1; i < NF; i++) if ($i == "bytes") b = $(i + 1) }
		     END { print b + 0 }'
}

mpi_bytes() { # roce|tcp
	echo $(( $(_mpi_counter "$1_in") + $(_mpi_counter "$1_out") ))
}

mpi_job_cmd() { # mode per_host prog [args...]
	local mode=$1 per=$2 e hostfile=$NS_DIR/hosts
	local -a ucx_env=(UCX_LOG_LEVEL=info UCX_NET_DEVICES=sv0:1) args=()
	shift 2
	mpi_mode "$mode" || fail "unknown MPI mode '$mode'"
	# the hosts: PER_HOST slots each, a first, b second
	case $MPI_KIND in
	ompi) printf '%s slots=%s\n' "$IP_A" "$per" "$IP_B" "$per" >"$hostfile" ;;
	mpich) printf '%s:%s\n' "$IP_A" "$per" "$IP_B" "$per" >"$hostfile" ;;
	esac
	case $mode in
	*-ucx-rc) ucx_env+=("UCX_TLS=rc_verbs,ud_verbs:aux,sm,self") ;;
	# Open MPI's osc ucx (4.1.4, UCX 1.13.1) loses pieces of an MPI_Get
	# whose target shares the host when only shared memory carries it,
	# with or without sv0 (docs/MIDDLEWARE.md, finding 11): its ud job
	# keeps every pair of ranks on sv0, within a host too.
	ompi-ucx-ud) ucx_env+=("UCX_TLS=ud_verbs,self") ;;
	*-ucx-ud) ucx_env+=("UCX_TLS=ud_verbs,sm,self") ;;
	esac
	case $mode in
	ompi-ucx-*)
		args=(--mca pml ucx --mca osc ucx --mca btl self --mca pml_ucx_verbose 1)
		for e in "${ucx_env[@]}"; do args+=(-x "$e"); done ;;
	ompi-ofi)
		args=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "verbs;ofi_rxm"
		      --mca btl self --mca osc pt2pt --mca mtl_base_verbose 10
		      -x "FI_PROVIDER=verbs;ofi_rxm" -x FI_LOG_LEVEL="${MPI_FI_LOG_LEVEL:-warn}") ;;
	ompi-tcp)
		args=(--mca pml ob1 --mca btl 'tcp,self' --mca btl_tcp_if_include veth0
		      --mca osc pt2pt) ;;
	ompi-tcp-sm)
		args=(--mca pml ob1 --mca btl 'tcp,vader,self' --mca btl_tcp_if_include veth0
		      --mca osc pt2pt) ;;
	mpich-*)
		args=(-genvnone)
		for e in "${ucx_env[@]}"; do args+=(-genv "${e%%=*}" "${e#*=}"); done ;;
	esac
	# Open MPI's ranks yield the CPU when they poll in vain: 8 ranks on the
	# machine's 2 cores would otherwise starve the daemons, which do the
	# device's work (the job takes 2.5 times as long; docs/MIDDLEWARE.md).
	case $MPI_KIND in
	ompi)
		MPI_CMD=("$MPI_LAUNCHER" --allow-run-as-root -np $(( per * 2 )) --hostfile "$hostfile"
			 --mca plm_rsh_agent "$MPI_AGENT" --mca plm_rsh_no_tree_spawn 1
			 --mca oob_tcp_if_include veth0 --map-by slot --bind-to none
			 --mca mpi_yield_when_idle 1
			 --tag-output "${args[@]}") ;;
	mpich)
		MPI_CMD=("$MPI_LAUNCHER" -n $(( per * 2 )) -f "$hostfile" -launcher rsh
			 -launcher-exec "$MPI_AGENT" -iface veth0 -prepend-rank "${args[@]}") ;;
	esac
	# shellcheck disable=SC2206
	MPI_CMD+=(${MPI_LAUNCHER_ARGS:-} "$@")
}

# The launcher's stdin: an empty pipe that stays open, as a terminal with
# nothing typed. A background job's /dev/null is at its end at once, and
# MPICH 4.0's hydra then fails now and then on its own, with no device
# involved ("process reading stdin too slowly; can't keep up", even for
# 'mpiexec.hydra -n 2 hostname </dev/null'). The FIFO is held open for
# writing by this shell (fd MPI_STDIN_FD) and goes with it.
mpi_stdin() { # dir: the FIFO's path on stdout (made if need be)
	local f=$1/launcher.stdin
	[ -p "$f" ] || mkfifo "$f"
	echo "$f"
}

mpi_job_start() { # out seconds
	local in
	in=$(mpi_stdin "$(dirname "$1")")
	[ -n "${MPI_STDIN_FD:-}" ] || exec {MPI_STDIN_FD}<>"$in"
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
		timeout -k 5 "$2" "$MPI_AGENT" --exec "$IP_A" "${MPI_CMD[@]}" >"$1" 2>&1 <"$in" &
	MPI_JOB=$!
	NS_PIDS+=("$MPI_JOB")
}
