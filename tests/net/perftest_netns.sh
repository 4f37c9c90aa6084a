#!/usr/bin/env bash
# Debian's unmodified perftest between two hosts: the server in namespace a
# on a's softverbsd, the client in namespace b on b's, device sv0, GID index
# 0 (RoCEv2 over the veth), a short run (-n ITERS). Both must exit 0 within
# NS_STEP (20) seconds, and each side that measures must print its results
# table. On failure: both programs' outputs and both daemons' logs.
#   perftest_netns.sh BUILD_DIR PROG [ARG...]
#   PROG: ib_write_bw ib_write_lat ib_read_bw ib_read_lat ib_send_bw
#         ib_send_lat ib_atomic_bw ib_atomic_lat
#   ARG: more perftest options for both sides (-e: completions by events)
export SV_BUILD_DIR=$1
prog=${2:-}
shift 2
. "$(dirname "$0")/lib.sh"

case "$prog" in
ib_write_bw|ib_read_bw|ib_send_bw|ib_atomic_bw) iters=1000 ;;
ib_write_lat|ib_read_lat|ib_send_lat|ib_atomic_lat) iters=1000 ;;
*) fail "unknown benchmark '$prog'" ;;
esac
command -v "$prog" >/dev/null || skip "$prog is not installed (perftest)"

ns_pair_up "$(ns_prefix "pt${prog#ib_}")"
ns_daemons_up
port=18515
echo "$prog -n $iters $*: server $NS_A ($IP_A), client $NS_B ($IP_B)"
start=$SECONDS
if ! ns_run_pair $port "$prog" -d sv0 -x 0 -p $port -n $iters "$@"; then
	fail "$prog across namespaces: $NS_WHY after $(( SECONDS - start )) s" \
		"(the logs follow)"
fi
echo "---- server"; cat "$NS_SOUT"; echo "---- client"; cat "$NS_COUT"
# the results: the header, then a row that starts with the message size; in
# ib_read_lat and ib_atomic_lat only the client measures
files=("$NS_COUT" "$NS_SOUT")
case "$prog" in ib_read_lat|ib_atomic_lat) files=("$NS_COUT") ;; esac
for f in "${files[@]}"; do
	awk '/#bytes/ { hdr = 1; next }
	     hdr && $1 ~ /^[0-9]+$/ && NF >= 3 { ok = 1 }
	     END { exit !ok }' "$f" ||
		fail "no results table in $(basename "$f")"
done
pass "$prog -n $iters $* between two namespaces ($(( SECONDS - start )) s)"
