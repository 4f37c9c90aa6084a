# Two-process helpers for the end-to-end shell tests (sourced after lib.sh):
# a free TCP port, waiting for a server to listen, a server/client pair of
# an unmodified verbs program through 'softverbs run'.
set -u

# A TCP port nobody listens on now (the kernel picks it).
free_port() {
	/usr/bin/python3 -c 'import socket
s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

# The port's active MTU in bytes, as Debian's ibv_devinfo sees it.
active_mtu() {
	"$SV" run -- ibv_devinfo 2>/dev/null |
		sed -n 's/.*active_mtu:[[:space:]]*\([0-9]*\).*/\1/p' | head -n 1
}

# Is anything listening on TCP port $1 (IPv4 or IPv6)?
listening() { # port
	local hex
	hex=$(printf '%04X' "$1")
	awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 }
		END { exit !f }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# Wait (bounded, 20 s) until pid listens on port, or is gone.
wait_listen() { # port pid
	local i
	for i in $(seq 1 800); do
		listening "$1" && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.025
	done
	return 1
}

# Wait (bounded) for a background job to end; its status in $wait_rc.
wait_rc=
wait_job() { # pid seconds
	local i
	for i in $(seq 1 $(( $2 * 20 ))); do
		if ! kill -0 "$1" 2>/dev/null; then
			wait "$1"
			wait_rc=$?
			return 0
		fi
		sleep 0.05
	done
	return 1
}

# Wait (bounded) for a client, then for its server, both our background
# jobs; print both outputs. Fails unless each ends in time with status 0.
wait_pair() { # cli_pid srv_pid sout cout what cli_secs srv_secs
	local cli=$1 srv=$2 sout=$3 cout=$4 what=$5 crc src
	if ! wait_job "$cli" "$6"; then
		kill -KILL "$cli" "$srv" 2>/dev/null
		echo "---- server"; cat "$sout"; echo "---- client"; cat "$cout"
		fail "$what client still running after $6 s"
	fi
	crc=$wait_rc
	if ! wait_job "$srv" "$7"; then
		kill -KILL "$srv" 2>/dev/null
		echo "---- server"; cat "$sout"; echo "---- client"; cat "$cout"
		fail "$what server still running $7 s after the client ended"
	fi
	src=$wait_rc
	echo "---- server"; cat "$sout"; echo "---- client"; cat "$cout"
	[ "$src" = 0 ] || fail "$what server exited with $src"
	[ "$crc" = 0 ] || fail "$what client exited with $crc"
}

# Run "PROG ARGS" as a server and "PROG ARGS localhost" as a client, both
# through softverbs run, with -g 0 and a fresh port. Both must exit 0 within
# 50 s and print the pingpong result lines.
run_pair() { # prog args...
	local prog=$1 port srv cli sout cout
	shift
	port=$(free_port)
	sout=$SV_TEST_DIR/server.out
	cout=$SV_TEST_DIR/client.out
	"$SV" run -- "$prog" -g 0 -p "$port" "$@" >"$sout" 2>&1 &
	srv=$!
	if ! wait_listen "$port" $srv; then
		cat "$sout"
		fail "$prog server never listened on port $port"
	fi
	"$SV" run -- "$prog" -g 0 -p "$port" "$@" localhost >"$cout" 2>&1 &
	cli=$!
	wait_pair $cli $srv "$sout" "$cout" "$prog" 50 20
	local f
	for f in "$sout" "$cout"; do
		grep -Eq '^[0-9]+ bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec$' "$f" ||
			fail "no 'bytes in ... seconds' line in $(basename "$f")"
		grep -Eq '^[0-9]+ iters in [0-9.]+ seconds = [0-9.]+ usec/iter$' "$f" ||
			fail "no 'iters in ... seconds' line in $(basename "$f")"
	done
}
