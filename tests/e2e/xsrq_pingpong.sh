#!/usr/bin/env bash
# Debian's unmodified ibv_xsrq_pingpong (ibverbs-utils): XRC through the
# standard API. A server and a client process on one device, both opening
# the XRC domain of /tmp/xrc_domain (one domain, shared through the file),
# each with an XRC SRQ, an XRC_SEND and an XRC_RECV QP. Both must exit 0 and
# print "success".
#   xsrq_pingpong.sh [ARGS...]   e.g. -n 100 -s 1, -e, -c 2 (two clients)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/peers.sh"

prog=ibv_xsrq_pingpong
command -v $prog >/dev/null || fail "$prog is not installed (ibverbs-utils)"
clients=1
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
	[ "${args[$i]}" = -c ] && clients=${args[$((i + 1))]}
done

port=$(free_port)
sout=$SV_TEST_DIR/server.out
"$SV" run -- stdbuf -oL $prog -g 0 -p "$port" "${args[@]}" >"$sout" 2>&1 &
srv=$!
wait_listen "$port" $srv || { cat "$sout"; fail "$prog server never listened"; }
cli=()
# the client takes no -c
cargs=()
for ((i = 0; i < ${#args[@]}; i++)); do
	if [ "${args[$i]}" = -c ]; then i=$((i + 1)); continue; fi
	cargs+=("${args[$i]}")
done
for ((k = 0; k < clients; k++)); do
	"$SV" run -- stdbuf -oL $prog -g 0 -p "$port" "${cargs[@]}" localhost \
		>"$SV_TEST_DIR/client$k.out" 2>&1 &
	cli+=($!)
done
dump() {
	echo "---- server"; cat "$sout"
	local j
	for ((j = 0; j < clients; j++)); do
		echo "---- client $j"; cat "$SV_TEST_DIR/client$j.out"
	done
}
for ((k = 0; k < clients; k++)); do
	if ! wait_job "${cli[$k]}" 50; then
		kill -KILL "${cli[@]}" $srv 2>/dev/null
		dump; fail "$prog client $k still running after 50 s"
	fi
	[ "$wait_rc" = 0 ] || { dump; fail "$prog client $k exited with $wait_rc"; }
done
if ! wait_job $srv 20; then
	kill -KILL $srv 2>/dev/null
	dump; fail "$prog server still running 20 s after the clients ended"
fi
[ "$wait_rc" = 0 ] || { dump; fail "$prog server exited with $wait_rc"; }
dump
for f in "$sout" "$SV_TEST_DIR"/client*.out; do
	grep -qx success "$f" || fail "no 'success' line in $(basename "$f")"
done
pass "$prog ${args[*]}: server and $clients client(s) done"
