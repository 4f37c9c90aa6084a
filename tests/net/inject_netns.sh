#!/usr/bin/env bash
# softverbs inject's wire faults at run time (issue 24, Deliver 2), with
# Debian's unmodified ibv_rc_pingpong between two hosts:
#   - wire drop=1 on the client's host: nothing it sends arrives, and the
#     client's first SEND ends in a transport retry error (the pingpong
#     fails and says so);
#   - wire drop=1,qp=N: only what goes to QP N is lost: that server's
#     client fails, a pingpong of other QPs goes through untouched;
#   - wire drop=1 pid=P: only what process P's QPs send is lost: that
#     server's client fails, a pair of other processes goes through;
#   - rnr pid=P count=2 for a pingpong server in b: its client in a meets
#     two RNR NAKs across the wire, retries through them (rnr_retry 7) and
#     completes; access pid=P for an ib_write_bw server in b: its client's
#     WRITEs end in a remote access error (perftest fails and says so);
#   - wire delay=100000: each packet b sends leaves 100 ms later: its
#     SENDs are retransmitted (the ACK timeout is shorter), every round
#     trip takes at least the delay, and the pingpong completes;
#   - wire seed=7,drop=0.02,dup=0.02,reorder=0.02,corrupt=0.005: an
#     ib_write_bw of 300 8 KiB WRITEs completes (RC recovers), and the
#     injector's counts and the retransmissions show it was at work;
#   - wire "" turns it off: a clean pingpong, no more injected;
#   - port down on the client's host: its pingpong fails with a transport
#     retry error; port up: one goes through again.
#   inject_netns.sh BUILD_DIR
export SV_BUILD_DIR=$1
. "$(dirname "$0")/lib.sh"

command -v ibv_rc_pingpong >/dev/null || fail "ibv_rc_pingpong is not installed"
command -v ib_write_bw >/dev/null || fail "ib_write_bw is not installed (perftest)"
ns_pair_up "$(ns_prefix inj)"
ns_daemons_up
port=18515
inj_b() { ns_sv "$NS_B" "$SOCK_B" timeout 5 "$SV" inject "$@"; }
stat_b() { ns_sv "$NS_B" "$SOCK_B" timeout 5 "$SV" stat --json; }
field() { # json path...
	/usr/bin/python3 -c 'import json, sys
d = json.load(sys.stdin)
for k in sys.argv[1:]:
    d = d[k]
print(d)' "$@"
}

# ARGS through softverbs run inside NS on SOCK's daemon, 30 s at most
sv_in() { # ns sock args...
	local ns=$1 sock=$2
	shift 2
	timeout -k 2 30 ip netns exec "$ns" env SOFTVERBS_SOCKET="$sock" \
		SOFTVERBS_NO_AUTOSTART=1 "$SV" run -- "$@"
}
# A pingpong server (5 iterations on $port) in NS on SOCK's daemon, once it
# listens: its output in $srv_out, its job in $srv_job.
server_in() { # ns sock name
	srv_out=$NS_DIR/$3-server.out
	ns_log "$srv_out" "$3: the server in $1"
	sv_in "$1" "$2" stdbuf -oL ibv_rc_pingpong -g 0 -p "$port" -n 5 \
		>"$srv_out" 2>&1 &
	srv_job=$!
	ns_wait_listen "$1" "$port" "$srv_job" 10 || fail "$3: the server does not listen"
}
# The client's output says it failed with a transport retry error.
retry_failed() { # file what
	grep -Eqi 'retry|status 12|Failed status' "$1" ||
		fail "$2: the client did not report a transport retry error"
}
# A pingpong of other QPs and processes through the armed fault (WHAT):
# it completes, and nothing of it is dropped.
untouched() { # port what
	local d0 d1
	d0=$(stat_b | field roce injected drop)
	ns_run_pair "$1" ibv_rc_pingpong -g 0 -p "$1" -n 100 ||
		fail "a pingpong of others through $2: $NS_WHY"
	d1=$(stat_b | field roce injected drop)
	[ "$d0" = "$d1" ] || fail "$2 dropped $((d1 - d0)) packets of others"
}

# 1. every packet lost: the requester gives up
inj_b wire drop=1 || fail "inject wire drop=1"
if ns_run_pair $port ibv_rc_pingpong -g 0 -p $port -n 5; then
	fail "a pingpong went through a wire that drops everything"
fi
cat "$NS_COUT"
retry_failed "$NS_COUT" "drop=1"
echo "drop=1: the client failed as a NIC's would: $(grep -Ei 'status' "$NS_COUT" | head -n 1)"

# 1b. one connection of several: drop=1,qp=N drops only what b sends to
# QP N. A server's QP in a: its client in b fails; a pingpong whose QPs
# are not N goes through, and nothing of it is dropped.
port=$((port + 1))
qc=$NS_DIR/qp-client.out
ns_log "$qc" "qp=: the client in b"
server_in "$NS_A" "$SOCK_A" qp=
sqpn=$(sed -n 's/.*local address:.*QPN \(0x[0-9a-f]*\).*/\1/p' "$srv_out" | head -n 1)
[ -n "$sqpn" ] || fail "qp=: the server printed no QPN"
inj_b wire "drop=1,qp=$sqpn" || fail "inject wire drop=1,qp=$sqpn"
if sv_in "$NS_B" "$SOCK_B" ibv_rc_pingpong -g 0 -p $port -n 5 "$IP_A" >"$qc" 2>&1; then
	fail "a pingpong went through a wire that drops every packet to its server's QP $sqpn"
fi
retry_failed "$qc" "qp="
ns_end_job "$srv_job"   # it waits for what never came
echo "drop=1,qp=$sqpn: the client of that QP failed: $(grep -Ei 'status' "$qc" | head -n 1)"
port=$((port + 1))
inj_b wire "drop=1,qp=0xfffffe" || fail "inject wire drop=1,qp=0xfffffe"
untouched $port "drop=1,qp=0xfffffe"
inj_b wire "drop=1,qp=0x1000000" && fail "a QPN over 24 bits was taken"

# 1b'. one process of several: drop=1 pid=P drops only what P's QPs send.
# A pingpong server in b (its QP made before the fault): its client in a
# gets no ACK and fails; then, with the fault still armed for that (now
# gone) process, a pair of other processes loses nothing.
port=$((port + 1))
pc=$NS_DIR/pid-client.out
ns_log "$pc" "pid=: the client in a"
server_in "$NS_B" "$SOCK_B" pid=
spid=
for p in $(pgrep -x ibv_rc_pingpong); do
	tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "-p $port " && spid=$p
done
[ -n "$spid" ] || fail "pid=: no server process"
inj_b wire drop=1 pid="$spid" || fail "inject wire drop=1 pid=$spid"
if sv_in "$NS_A" "$SOCK_A" ibv_rc_pingpong -g 0 -p $port -n 5 "$IP_B" >"$pc" 2>&1; then
	fail "a pingpong went through a wire that drops every packet of its server's process $spid"
fi
retry_failed "$pc" "pid="
ns_end_job "$srv_job"
echo "drop=1 pid=$spid: the client of that process failed: $(grep -Ei 'status' "$pc" | head -n 1)"
port=$((port + 1))
untouched $port "drop=1 pid=$spid"
inj_b wire "" || fail "inject wire \"\""

# 1d. responder faults of a process, across the wire: armed for a server
# in b, they reach its QP, which a client in a's device talks to.
srv_pid() { # prog: the pid of PROG serving $port
	local p
	for p in $(pgrep -x "$1"); do
		tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "-p $port" &&
			echo "$p" && return 0
	done
	return 1
}
inj_count() { # kind: how many of it b's device has injected
	inj_b status | sed -n "s/.*[:,] $1 \([0-9]*\).*/\1/p"
}
port=$((port + 1))
server_in "$NS_B" "$SOCK_B" rnr-pid
spid=$(srv_pid ibv_rc_pingpong) || fail "rnr pid=: no server process"
n0=$(inj_count rnr)
inj_b rnr pid="$spid" count=2 || fail "inject rnr pid=$spid"
rc=$NS_DIR/rnr-pid-client.out
sv_in "$NS_A" "$SOCK_A" ibv_rc_pingpong -g 0 -p $port -n 5 "$IP_B" >"$rc" 2>&1 ||
	{ cat "$rc"; fail "rnr pid=: the client did not retry through two RNR NAKs"; }
ns_wait_job "$srv_job" 20 || fail "rnr pid=: the server did not finish"
n1=$(inj_count rnr)
[ $((n1 - n0)) = 2 ] || fail "rnr pid=: $((n1 - n0)) RNR NAKs injected, not 2"
echo "rnr pid=$spid count=2: two RNR NAKs across the wire, retried through"
port=$((port + 1))
srv_out=$NS_DIR/access-pid-server.out
ns_log "$srv_out" "access pid=: ib_write_bw's server in b"
sv_in "$NS_B" "$SOCK_B" ib_write_bw -d sv0 -x 0 -p $port -n 20 >"$srv_out" 2>&1 &
srv_job=$!
ns_wait_listen "$NS_B" "$port" "$srv_job" 10 || fail "access pid=: the server does not listen"
spid=$(srv_pid ib_write_bw) || fail "access pid=: no server process"
n0=$(inj_count access)
inj_b access pid="$spid" || fail "inject access pid=$spid"
ac=$NS_DIR/access-pid-client.out
if sv_in "$NS_A" "$SOCK_A" ib_write_bw -d sv0 -x 0 -p $port -n 20 "$IP_B" >"$ac" 2>&1; then
	fail "ib_write_bw went through a remote access error armed for its server"
fi
grep -Eqi 'remote access|status 10|completion with error' "$ac" ||
	{ cat "$ac"; fail "access pid=: the client did not report a remote access error"; }
ns_end_job "$srv_job"
n1=$(inj_count access)
[ $((n1 - n0)) = 1 ] || fail "access pid=: $((n1 - n0)) access errors injected, not 1"
echo "access pid=$spid: the client's WRITE failed: $(grep -Ei 'status|error' "$ac" | head -n 1)"
inj_b clear || fail "inject clear"

# 1c. a slow wire: delay=100000 holds every packet b sends for 100 ms,
# longer than the pingpong's ACK timeout (timeout 14: 67 ms). Each SEND
# of b's is sent again before its ACK can come, and each round trip takes
# at least the delay; the pingpong completes.
port=$((port + 1))
inj_b wire "delay=100000" || fail "inject wire delay=100000"
j=$(stat_b)
d0=$(echo "$j" | field roce injected delay)
r0=$(echo "$j" | field roce retransmits)
ns_run_pair $port ibv_rc_pingpong -g 0 -p $port -n 10 ||
	fail "a pingpong over a wire with a 100 ms delay: $NS_WHY"
j=$(stat_b)
d1=$(echo "$j" | field roce injected delay)
r1=$(echo "$j" | field roce retransmits)
us=$(sed -n 's/.*iters in .* seconds = \([0-9.]*\) usec\/iter.*/\1/p' "$NS_COUT")
echo "delay=100000: $((d1 - d0)) packets delayed, $((r1 - r0)) retransmitted, $us usec/iter"
[ $((d1 - d0)) -ge 10 ] || fail "delay: only $((d1 - d0)) packets were held back"
[ $((r1 - r0)) -ge 10 ] || fail "delay: only $((r1 - r0)) retransmissions past a 67 ms timeout"
/usr/bin/python3 -c 'import sys; sys.exit(float(sys.argv[1]) < 100000)' "${us:-0}" ||
	fail "delay: $us usec per iteration, under the 100 ms delay"
inj_b wire "" || fail "inject wire \"\""

# 2. a lossy, reordering, duplicating, corrupting wire: RC recovers. (Not
# ibv_rc_pingpong: on a lossy wire its last ACK may be lost after the peer
# has exited, and the sender then rightly gives up; perftest's ends meet
# over TCP once the traffic is done.)
port=$((port + 1))
inj_b wire seed=7,drop=0.02,dup=0.02,reorder=0.02,corrupt=0.005 ||
	fail "inject wire with probabilities"
before=$(stat_b | field roce retransmits)
ns_run_pair $port ib_write_bw -d sv0 -x 0 -p $port -n 300 -s 8192 ||
	fail "ib_write_bw over an injected wire: $NS_WHY"
j=$(stat_b)
drops=$(echo "$j" | field roce injected drop)
dups=$(echo "$j" | field roce injected dup)
retx=$(( $(echo "$j" | field roce retransmits) - before ))
echo "injected on b: $drops dropped, $dups duplicated; b retransmitted $retx packets"
[ "$drops" -gt 0 ] && [ "$dups" -gt 0 ] || fail "the injector did nothing"
[ "$retx" -gt 0 ] || fail "nothing was retransmitted"

# 3. off again
port=$((port + 1))
inj_b wire "" || fail "inject wire \"\""
d0=$(stat_b | field roce injected drop)
ns_run_pair $port ibv_rc_pingpong -g 0 -p $port -n 500 ||
	fail "a pingpong after the injector was turned off: $NS_WHY"
d1=$(stat_b | field roce injected drop)
[ "$d0" = "$d1" ] || fail "the injector dropped $((d1 - d0)) packets after it was turned off"
inj_b wire nonsense=1 && fail "a bad spec was taken"

# 4. the port down, then up
port=$((port + 1))
inj_b port down || fail "inject port down"
if ns_run_pair $port ibv_rc_pingpong -g 0 -p $port -n 5; then
	fail "a pingpong went through a port that is down"
fi
grep -q 'retry counter exceeded' "$NS_COUT" ||
	{ cat "$NS_COUT"; fail "the client behind a port that is down did not report a retry error"; }
port=$((port + 1))
inj_b port up || fail "inject port up"
ns_run_pair $port ibv_rc_pingpong -g 0 -p $port -n 100 ||
	fail "a pingpong after the port came up: $NS_WHY"
pass "wire faults and the port injected at run time: loss and a port that is down fail the requester, recoverable faults are recovered"
