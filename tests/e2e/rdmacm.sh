#!/usr/bin/env bash
# Debian's unmodified rdmacm-utils and perftest's -R on sv0's rdma_cm device
# (docs/DESIGN.md, "rdma_cm"): a server and a client process, each through
# 'softverbs run', connected by IP address on this host. Both must exit 0
# (and the data checks of each program pass); every wait is bounded.
#   rdmacm.sh CASE   CASE: rping_lo rping_host rping_v6 ucmatose
#                          ucmatose_migrate udaddy rdma_server rstream
#                          riostream cmtime ib_write_bw
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/peers.sh"

case=$1
sout=$SV_TEST_DIR/server.out
cout=$SV_TEST_DIR/client.out

# The host's own IPv4 address (not loopback), if it has one.
host_ipv4() {
	ip -4 -o addr show scope global 2>/dev/null |
		awk '{ sub(/\/.*/, "", $4); print $4; exit }'
}

# An rdma_cm port nobody uses now: rdma_cm ports are the daemon's own, so
# any free TCP port number will do (a fresh one per test).
port=$(free_port)

# Start the server, wait (bounded) until its id listens, run the client;
# both must end by themselves with status 0.
pair() { # "server cmd" "client cmd" [listening port]
	local srv cli i lport=${3:-$port}
	# exec: the job's pid is the program's (softverbs run execs it too),
	# so a bounded wait that gives up kills the program itself
	eval "exec $SV run -- $1" >"$sout" 2>&1 &
	srv=$!
	# no socket to watch: the daemon logs each id that starts listening
	for i in $(seq 1 400); do
		kill -0 $srv 2>/dev/null || break
		grep -q "listens on .*:$lport, " "$SV_TEST_DIR/softverbsd.log" \
			2>/dev/null && break
		sleep 0.05
	done
	eval "exec $SV run -- $2" >"$cout" 2>&1 &
	cli=$!
	wait_pair $cli $srv "$sout" "$cout" rdma_cm 60 30
}

# rping -v prints every ping; -V verifies each (exit 1 on a mismatch).
check_rping() { # count
	local n
	n=$(grep -c '^ping data: rdma-ping-' "$cout")
	[ "$n" = "$1" ] || fail "the client printed $n pings, not $1"
	n=$(grep -c '^server ping data: rdma-ping-' "$sout")
	[ "$n" = "$1" ] || fail "the server printed $n pings, not $1"
}

command -v rping >/dev/null || fail "rdmacm-utils is not installed"
case "$case" in
rping_lo)
	pair "rping -s -a 127.0.0.1 -p $port -C 100 -v -V" \
	     "rping -c -a 127.0.0.1 -p $port -C 100 -v -V"
	check_rping 100
	pass "rping over 127.0.0.1: 100 pings, data verified"
	;;
rping_host)
	addr=$(host_ipv4)
	if [ -z "$addr" ]; then
		echo "SKIP: this host has no IPv4 address but loopback"
		exit 0
	fi
	pair "rping -s -a $addr -p $port -C 100 -v -V" \
	     "rping -c -a $addr -p $port -C 100 -v -V"
	check_rping 100
	pass "rping over the host's $addr: 100 pings, data verified"
	;;
rping_v6)
	pair "rping -s -a ::1 -p $port -C 20 -v -V" \
	     "rping -c -a ::1 -p $port -C 20 -v -V"
	check_rping 20
	pass "rping over ::1: 20 pings, data verified"
	;;
ucmatose)
	# a holder keeps the daemon (and its counters) up after both are gone
	"$HOLD" --pd 1 --mr 0 --cq 0 >"$SV_TEST_DIR/hold.out" &
	wait_for_line "$SV_TEST_DIR/hold.out" '^ready' || fail "holder never got ready"
	pair "ucmatose -p $port -c 10 -C 20" \
	     "ucmatose -s 127.0.0.1 -p $port -c 10 -C 20"
	grep -q 'test complete' "$sout" && grep -q 'test complete' "$cout" ||
		fail "ucmatose did not complete"
	"$SV" stat | tee "$SV_TEST_DIR/stat.out" | grep '^rdma_cm:'
	# both processes gone: no file, no id left; 10 REQs, 10 REPs, each
	# connection established at both ends, 10 disconnects
	grep -Eq '^rdma_cm: 0 files, 0 ids open; since start [0-9]+ ids, 10 connects, 10 accepts, 20 established, 0 rejects, 10 disconnects$' \
		"$SV_TEST_DIR/stat.out" || fail "softverbs stat's rdma_cm counters"
	pass "ucmatose: 10 connections, 20 messages each, both ways; counters"
	;;
ucmatose_migrate)
	# rdma_migrate_id to a new event channel, and an ACK timeout option
	pair "ucmatose -p $port -c 4 -m" \
	     "ucmatose -s 127.0.0.1 -p $port -c 4 -m -a 14"
	grep -q 'migrating to new event channel' "$sout" ||
		fail "the server did not migrate its ids"
	pass "ucmatose -m: ids migrated between event channels"
	;;
udaddy)
	# UD ids: SIDR request and reply, datagrams both ways
	pair "udaddy" "udaddy -s 127.0.0.1" 7174
	grep -q 'test complete' "$cout" || fail "udaddy did not complete"
	pass "udaddy: UD connection by SIDR, data both ways"
	;;
rdma_server)
	pair "rdma_server -p $port" "rdma_client -s 127.0.0.1 -p $port"
	grep -q 'rdma_client: end 0' "$cout" || fail "rdma_client did not end 0"
	grep -q 'rdma_server: end 0' "$sout" || fail "rdma_server did not end 0"
	pass "rdma_server / rdma_client (rdma_create_ep, rdma_get_request)"
	;;
rstream|riostream)
	# rsockets (librdmacm's sockets over RDMA): 1000 transfers of 64 KiB,
	# blocking calls (completion channels), every byte verified by them.
	# (Their default run, every size with spinning calls, is a benchmark:
	# minutes on a loaded 2-core machine.)
	pair "$case -T b -T v -S 65536 -C 1000 -p $port" \
	     "$case -T b -T v -S 65536 -C 1000 -s 127.0.0.1 -p $port"
	grep -Eq '^custom +64k +1k ' "$cout" || fail "$case printed no result"
	pass "$case: rsockets over sv0's rdma_cm"
	;;
cmtime)
	# 1000 connections set up and torn down; cmtime's server never ends by
	# itself, so it is stopped once the client is done
	"$SV" run -- cmtime -p "$port" -c 1000 >"$sout" 2>&1 &
	srv=$!
	for i in $(seq 1 400); do
		grep -q "listens on .*:$port, " "$SV_TEST_DIR/softverbsd.log" \
			2>/dev/null && break
		sleep 0.05
	done
	timeout -k 2 60 "$SV" run -- cmtime -s 127.0.0.1 -p "$port" -c 1000 \
		>"$cout" 2>&1
	crc=$?
	kill -TERM $srv 2>/dev/null
	wait_job $srv 10 || kill -KILL $srv 2>/dev/null
	cat "$cout"
	[ $crc = 0 ] || fail "cmtime client exited with $crc"
	grep -Eq '^connect +:' "$cout" || fail "cmtime printed no connect step"
	pass "cmtime: 1000 connections set up and torn down"
	;;
ib_write_bw)
	command -v ib_write_bw >/dev/null || fail "perftest is not installed"
	pair "ib_write_bw -R -p $port -n 1000" \
	     "ib_write_bw -R -p $port -n 1000 127.0.0.1"
	grep -Eq '^ 65536 +1000 ' "$cout" || fail "ib_write_bw printed no result"
	pass "perftest ib_write_bw -R: connected through rdma_cm"
	;;
*)
	fail "unknown case $case"
	;;
esac
