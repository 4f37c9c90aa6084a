#!/usr/bin/env bash
# Debian's unmodified rdmacm-utils, perftest's -R and libfabric's
# fi_pingpong on sv0's rdma_cm device (docs/DESIGN.md, "rdma_cm"): a server
# and a client process, each through 'softverbs run', connected by IP
# address on this host. Both must exit 0 (and the data checks of each
# program pass), but servers that never end by themselves (cmtime, udpong,
# rcopy) are stopped once their client is done; every wait is bounded.
#   rdmacm.sh CASE   CASE: rping_lo rping_host rping_v6 ucmatose
#                          ucmatose_migrate udaddy rdma_server rstream
#                          riostream cmtime udpong udpong_v6 rcopy
#                          rdma_xserver_rc rdma_xserver_xrc ib_write_bw
#                          ib_send_lat ib_read_bw fi_pingpong_msg
#                          fi_pingpong_rdm mckey mckey_host mckey_v6
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

# A server that never ends by itself (udpong, rcopy): start it, wait
# (bounded) until 'ready' succeeds, run the client to its end (bounded),
# then (once the server printed 'line', if given) stop the server. The
# client must exit 0.
serve_client() { # "server cmd" "ready cmd" "client cmd" [line]
	local srv i crc
	eval "exec $SV run -- $1" >"$sout" 2>&1 &
	srv=$!
	for i in $(seq 1 400); do
		kill -0 $srv 2>/dev/null || break
		eval "$2" && break
		sleep 0.05
	done
	kill -0 $srv 2>/dev/null || { cat "$sout"; fail "the server is gone"; }
	eval "timeout -k 2 60 $SV run -- $3" >"$cout" 2>&1
	crc=$?
	# the server may still write (rcopy closes its file after answering)
	[ -z "${4:-}" ] || wait_for_line "$sout" "$4" 400 ||
		echo "the server never printed '$4'"
	kill -TERM $srv 2>/dev/null
	wait_job $srv 10 || kill -KILL $srv 2>/dev/null
	echo "---- server"; cat "$sout"; echo "---- client"; cat "$cout"
	[ $crc = 0 ] || fail "the client exited with $crc"
}

# A UDP port nobody uses now, and whether one is bound (IPv4 or IPv6).
free_udp_port() {
	/usr/bin/python3 -c 'import socket
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.bind(("::", 0))
print(s.getsockname()[1])'
}
udp_bound() { # port
	local hex
	hex=$(printf '%04X' "$1")
	awk -v p=":$hex" 'substr($2, length($2) - 4) == p { f = 1 }
		END { exit !f }' /proc/net/udp /proc/net/udp6 2>/dev/null
}

# mckey on a group: a receiver (its output line-buffered: once it printed
# a "joined" line per id, its QPs are attached), then one sender. mckey's
# sender destroys its AH and QP right after posting its sends unsignaled;
# what it posted before still goes out (docs/DESIGN.md, "The data path",
# work posted before a destroy), so one sender run must do: the receiver
# then ends by itself with every message. Both must exit 0.
mc_pair() { # group bind "receiver flags" njoins "sender flags"
	local rcv i
	eval "exec $SV run -- stdbuf -oL mckey -m $1 -b $2 $3" >"$sout" 2>&1 &
	rcv=$!
	for i in $(seq 1 400); do
		kill -0 $rcv 2>/dev/null || break
		[ "$(grep -c '^mckey: joined dgid' "$sout")" -ge "$4" ] && break
		sleep 0.05
	done
	timeout -k 2 30 "$SV" run -- mckey -m "$1" -b "$2" -s $5 >"$cout" 2>&1
	i=$?
	if [ $i != 0 ]; then
		kill -KILL $rcv 2>/dev/null
		echo "---- receiver"; cat "$sout"; echo "---- sender"; cat "$cout"
		fail "the mckey sender exited with $i"
	fi
	if ! wait_job $rcv 30; then
		kill -KILL $rcv 2>/dev/null
		echo "---- receiver"; cat "$sout"; echo "---- sender"; cat "$cout"
		fail "the mckey receiver still waits 30 s after the sender's run"
	fi
	echo "---- receiver"; cat "$sout"; echo "---- sender"; cat "$cout"
	[ "$wait_rc" = 0 ] || fail "the mckey receiver exited with $wait_rc"
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
	pair "stdbuf -oL rping -s -a 127.0.0.1 -p $port -C 1000 -v -V" \
	     "stdbuf -oL rping -c -a 127.0.0.1 -p $port -C 1000 -v -V"
	check_rping 1000
	pass "rping over 127.0.0.1: 1000 pings, data verified"
	;;
rping_host)
	addr=$(host_ipv4)
	if [ -z "$addr" ]; then
		echo "SKIP: this host has no IPv4 address but loopback"
		exit 0
	fi
	pair "stdbuf -oL rping -s -a $addr -p $port -C 100 -v -V" \
	     "stdbuf -oL rping -c -a $addr -p $port -C 100 -v -V"
	check_rping 100
	pass "rping over the host's $addr: 100 pings, data verified"
	;;
rping_v6)
	pair "stdbuf -oL rping -s -a ::1 -p $port -C 20 -v -V" \
	     "stdbuf -oL rping -c -a ::1 -p $port -C 20 -v -V"
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
	# 1000 connections set up and torn down; rdma-core 44's cmtime server
	# never ends by itself, so it is stopped once the client is done (56's
	# leaves after one client run of -c connections)
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
	# its connect row: 44's "connect :", 56's "cm connect"
	grep -Eq '^(connect +:|cm connect +[0-9])' "$cout" ||
		fail "cmtime printed no connect step"
	pass "cmtime: 1000 connections set up and torn down"
	;;
udpong|udpong_v6)
	# NOT in make check: rsockets datagrams need a GRH-less AH, which a RoCE
	# port refuses (docs/DESIGN.md, "Address handles"); this fails on sv0 as on rxe
	# rsockets datagrams: the first message goes by UDP to the server's
	# port, then UD QPs with address handles from rdma_cm's routes (and
	# each end's AH for its own QP: a GRH-less one for the port's own
	# LID). 1000 echoed messages of 1000 bytes; the server never ends.
	port=$(free_udp_port)
	if [ "$case" = udpong ]; then
		# blocking calls; the server on 127.0.0.1 (its default is ::1)
		serve_client "udpong -b 127.0.0.1 -p $port -T e -T b" \
			"udp_bound $port" \
			"udpong -s 127.0.0.1 -p $port -C 1000 -S 1000 -T e -T b"
	else
		# rpoll between calls
		serve_client "udpong -p $port -T e -T a" "udp_bound $port" \
			"udpong -s ::1 -p $port -C 1000 -S 1000 -T e -T a"
	fi
	# echo: every message came back (xfers counts both ways)
	grep -Eq '^custom +1000 +2k ' "$cout" || fail "udpong printed no result"
	pass "$case: rsockets datagrams, 1000 messages echoed"
	;;
rcopy)
	# rsockets streams: a 100 MiB file copied to a path the server writes,
	# byte for byte; the server never ends
	src=$SV_TEST_DIR/rcopy.src
	dst=$SV_TEST_DIR/rcopy.dst
	head -c $((100 << 20)) /dev/urandom >"$src" || fail "no source file"
	serve_client "rcopy -p $port" \
		"grep -q 'listens on .*:$port, ' '$SV_TEST_DIR/softverbsd.log' 2>/dev/null" \
		"rcopy '$src' '127.0.0.1:$dst' -p $port" 'closing\.\.\.done'
	grep -q '^104857600 bytes in ' "$cout" || fail "rcopy printed no result"
	cmp "$src" "$dst" || fail "the copy differs"
	rm -f "$src" "$dst"
	pass "rcopy: 100 MiB copied, identical"
	;;
rdma_xserver_rc|rdma_xserver_xrc)
	# rdma_create_ep and rdma_get_request; -c x: XRC, RDMA_PS_IB ids of
	# QP types XRC_SEND (the client's initiator) and XRC_RECV (the
	# server's target, its XRC SRQ numbered in the REP's private data)
	t=r
	[ "$case" = rdma_xserver_xrc ] && t=x
	pair "rdma_xserver -p $port -c $t" \
	     "rdma_xclient -s 127.0.0.1 -p $port -c $t"
	grep -q 'rdma_xclient: end 0' "$cout" || fail "rdma_xclient did not end 0"
	grep -q 'rdma_xserver: end 0' "$sout" || fail "rdma_xserver did not end 0"
	pass "rdma_xserver / rdma_xclient -c $t"
	;;
ib_write_bw|ib_send_lat|ib_read_bw)
	# perftest -R: not make check tests (its client races its server's
	# listener, docs/DESIGN.md)
	command -v "$case" >/dev/null || fail "perftest is not installed"
	pair "$case -R -p $port -n 1000" "$case -R -p $port -n 1000 127.0.0.1"
	case $case in
	ib_send_lat) res='^ 2 +1000 ' ;;
	*) res='^ 65536 +1000 ' ;;
	esac
	grep -Eq "$res" "$cout" || fail "$case printed no result"
	grep -Eq "$res" "$sout" || fail "$case's server printed no result"
	pass "perftest $case -R: connected through rdma_cm"
	;;
fi_pingpong_msg|fi_pingpong_rdm)
	# libfabric's verbs provider: msg endpoints on rdma_cm ids, rdm ones
	# through ofi_rxm on top of them; a TCP control port for the names;
	# -c checks every buffer; SOFTVERBS_DEBUG: a QP destroyed with
	# completions never polled says so in the output
	command -v fi_pingpong >/dev/null || fail "libfabric-bin is not installed"
	export SOFTVERBS_DEBUG=1
	if [ "$case" = fi_pingpong_msg ]; then
		args="-p verbs -e msg"
	else
		args="-p 'verbs;ofi_rxm' -e rdm"
	fi
	eval "exec $SV run -- fi_pingpong $args -c -I 50 -B $port" \
		>"$sout" 2>&1 &
	srv=$!
	wait_listen "$port" $srv || { cat "$sout"; fail "no control port"; }
	eval "exec $SV run -- fi_pingpong $args -c -I 50 -P $port 127.0.0.1" \
		>"$cout" 2>&1 &
	wait_pair $! $srv "$sout" "$cout" fi_pingpong 60 30
	for f in "$sout" "$cout"; do
		grep -Eq '^1m +50 +=50 ' "$f" ||
			fail "no 1m result in $(basename "$f")"
	done
	pass "fi_pingpong $args: every size, data checked"
	;;
mckey|mckey_host)
	# a receiver with two ids (each its own UD QP, both attached to the
	# group): each QP must get all 10 messages (mckey polls until it has
	# them). mckey_host binds the host's own address, and its sender joins
	# as a send-only member (-o: librdmacm does not attach its QP).
	group=239.$(( port >> 8 & 255 )).$(( port & 255 )).7
	bind=127.0.0.1 sflags=
	if [ "$case" = mckey_host ]; then
		bind=$(host_ipv4) sflags=-o
		if [ -z "$bind" ]; then
			echo "SKIP: this host has no IPv4 address but loopback"
			exit 0
		fi
	fi
	mc_pair "$group" "$bind" "-c 2 -C 10" 2 "-C 10 $sflags"
	n=$(grep -c "^mckey: joined dgid: ::ffff:$group mlid 0x0 sl 0\$" "$sout")
	[ "$n" = 2 ] || fail "the receiver's ids joined $n times, not 2"
	grep -q "^mckey: joined dgid: ::ffff:$group mlid 0x0 sl 0\$" "$cout" ||
		fail "the sender did not join"
	grep -q '^initiating data transfers' "$cout" || fail "the sender sent nothing"
	grep -q '^receiving data transfers' "$sout" &&
	grep -q '^data transfers complete' "$sout" ||
		fail "the receiver did not get its messages"
	[ "$(grep -c "cm: id .* joins multicast $group, handle" \
		"$SV_TEST_DIR/softverbsd.log")" -ge 3 ] || fail "the daemon's log of joins"
	pass "mckey over $bind, group $group: 2 receiving QPs got 10 messages each${sflags:+, send-only sender}, one sender run"
	;;
mckey_v6)
	# a RoCEv2 port joins IPv4 groups only: the kernel's cma refuses any
	# other family with ENOTSUPP (524), and so does sv0
	timeout -k 2 30 "$SV" run -- mckey -m ff0e::5:1 -b ::1 -C 0 >"$sout" 2>&1
	rc=$?
	cat "$sout"
	[ $rc != 0 ] || fail "mckey joined an IPv6 group on RoCEv2"
	grep -q 'mckey: failure joining: Unknown error 524' "$sout" ||
		fail "mckey's join did not fail with the kernel's ENOTSUPP"
	pass "mckey, IPv6 group on RoCEv2: ENOTSUPP (524), as the kernel's"
	;;
*)
	fail "unknown case $case"
	;;
esac
