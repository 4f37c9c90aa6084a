#!/usr/bin/env bash
# softverbs bench: a short run of every test in both modes, busy polling and
# with completion events, several QPs, size lists and sweeps, resource
# domains (--res-domain, --domains), each as --json checked for the shared
# format and sane numbers (never for speed) and the domains for where their
# QPs went; the table; bad arguments give a clear error and exit 2.
. "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || fail "python3 is needed to read the JSON"
out=$SV_TEST_DIR/bench.json
err=$SV_TEST_DIR/bench.err

# check FILE TEST MODE QPS OUTSTANDING EVENTS SIZES(a,b,..) ITERS [DOMAINS
# [THREAD,MSG]]: DOMAINS none (the default), one or per-qp
check() {
	python3 - "$@" <<'EOF'
import json, math, os, sys
f, test, mode, qps, outst, events, sizes, iters = sys.argv[1:9]
domains = sys.argv[9] if len(sys.argv) > 9 else "none"
res_domain = sys.argv[10] if len(sys.argv) > 10 else \
    (None if domains == "none" else "safe,default")
qps, outst, iters = int(qps), int(outst), int(iters)
sizes = [int(s) for s in sizes.split(",")]
d = json.load(open(f))
def need(cond, what):
    if not cond:
        sys.exit("bad JSON (%s): %s" % (what, json.dumps(d)[:2000]))
need(set(d) == {"tool", "test", "mode", "qps", "outstanding", "events",
                "memfd", "dm", "domains", "res_domain", "qp_db",
                "max_resource_domains", "results"}, "top-level keys")
need(d["memfd"] is (os.environ.get("BENCH_MEMFD") == "1"), "memfd")
need(d["dm"] is (os.environ.get("BENCH_DM") == "1"), "dm")
need(d["tool"] == "softverbs bench", "tool")
need(d["test"] == test and d["mode"] == mode, "test and mode")
need(d["qps"] == qps and d["outstanding"] == outst, "qps, outstanding")
need(d["events"] is (events == "true"), "events")
# resource domains: as asked, and the QPs where they say (sv_query_qp_db:
# page 0 is the shared default, 1 .. max_resource_domains domain pages)
need(d["domains"] == domains and d["res_domain"] == res_domain,
     "domains, res_domain")
mx, db = d["max_resource_domains"], d["qp_db"]
need(isinstance(mx, int) and mx >= 1, "max_resource_domains")
need(isinstance(db, list) and len(db) == qps and
     all(isinstance(x, int) and 0 <= x <= mx for x in db), "qp_db")
if domains == "none":
    need(all(x == 0 for x in db), "no domain: the default page")
else:
    need(all(x >= 1 for x in db), "in a domain: a domain page")
if domains == "one":
    need(len(set(db)) == 1, "one domain: one page")
if domains == "per-qp" and 2 * qps <= mx:
    # both processes' domains fit: each got a page of its own
    need(len(set(db)) == qps, "a domain per QP: a page per QP")
res = d["results"]
need([r["size"] for r in res] == sizes, "sizes")
num = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) \
    and math.isfinite(v)
for r in res:
    keys = {"size", "iters", "seconds"}
    keys |= {"bw_MBps", "msg_rate_Mpps"} if mode == "bw" else \
        {"lat_p50_us", "lat_p99_us", "lat_max_us", "lat_min_us"}
    need(set(r) == keys, "result keys")
    need(all(num(r[k]) for k in keys), "numbers")
    need(r["iters"] == iters and r["seconds"] > 0, "iters, seconds")
    if mode == "bw":
        need(r["bw_MBps"] > 0 and r["msg_rate_Mpps"] > 0, "positive")
        msgs = r["iters"] * qps / r["seconds"]
        need(abs(r["msg_rate_Mpps"] - msgs / 1e6) <= 1e-3 * msgs / 1e6,
             "message rate = messages / seconds")
        need(abs(r["bw_MBps"] - msgs * r["size"] / 1e6) <=
             1e-3 * msgs * r["size"] / 1e6, "bandwidth = rate x size")
    else:
        need(0 < r["lat_min_us"] <= r["lat_p50_us"] <= r["lat_p99_us"]
             <= r["lat_max_us"], "min <= p50 <= p99 <= max")
EOF
}

# run NAME ARGS...: softverbs bench ARGS --json into $out, must exit 0
run() {
	local name=$1; shift
	"$SV" bench "$@" --json >"$out" 2>"$err"
	local rc=$?
	[ $rc = 0 ] || { cat "$err" "$out"; fail "$name: exit $rc"; }
	[ -s "$err" ] && { cat "$err"; fail "$name: messages on stderr"; }
	return 0
}

n=0
for t in write read send atomic; do
	s=64
	[ $t = atomic ] && s=8
	for m in bw lat; do
		for e in "" -e; do
			ev=false
			[ -n "$e" ] && ev=true
			o=64
			[ $m = lat ] && o=1
			run "$t $m $e" -t $t -m $m -s $s -n 200 $e
			check "$out" $t $m 1 $o $ev $s 200 ||
				fail "$t $m $e: bad output"
			n=$((n + 1))
		done
	done
done
pass "$n runs: every test and mode, busy polling and -e"

# buffers in sealed memfds (the direct path's plain copies)
for t in write read; do
	for m in bw lat; do
		run "$t $m --memfd" -t $t -m $m -s 4096 -n 200 --memfd
		BENCH_MEMFD=1 check "$out" $t $m 1 $([ $m = bw ] && echo 64 || echo 1) \
			false 4096 200 || fail "$t $m --memfd: bad output"
	done
done
pass "--memfd: write and read, bw and lat"

# buffers in device memory (issue 23): bw only; lat is refused
for t in write read send; do
	run "$t bw --dm" -t $t -m bw -s 4096 -n 200 --dm
	BENCH_DM=1 check "$out" $t bw 1 64 false 4096 200 ||
		fail "$t bw --dm: bad output"
done
"$SV" bench -t write -m lat --dm >/dev/null 2>&1
[ $? -eq 2 ] || fail "-m lat --dm was not refused as a bad argument"
pass "--dm: write, read and send bw; lat refused"

for t in write read send atomic; do
	s=4096
	[ $t = atomic ] && s=8
	run "$t -q 2" -t $t -q 2 -o 16 -s $s -n 300
	check "$out" $t bw 2 16 false $s 300 || fail "$t -q 2: bad output"
done
run "send -q 3 -e" -t send -q 3 -o 4 -s 100 -n 100 -e
check "$out" send bw 3 4 true 100 100 || fail "send -q 3 -e: bad output"
pass "several QPs and outstanding WRs, every test"

run "--sizes" -t write --sizes 2,4096,65536 -n 50
check "$out" write bw 1 64 false 2,4096,65536 50 || fail "--sizes bw"
run "--sizes lat" -t send -m lat --sizes 1K,1,3000 -n 50
check "$out" send lat 1 1 false 1024,1,3000 50 || fail "--sizes lat"
sweep=$(python3 -c 'print(",".join(str(2 << i) for i in range(23)))')
run "-a" -t write -a -n 3
check "$out" write bw 1 64 false "$sweep" 3 || fail "-a: not 2 .. 8 MiB"
run "-a atomic" -t atomic -m lat -a -n 20
check "$out" atomic lat 1 1 false 8 20 || fail "-a atomic: not 8 only"
pass "size lists and sweeps"

# resource domains: every test, both modes, the three placements, the
# thread and message models, busy polling and -e
run "rd write" -t write -q 2 -o 16 -s 64 -n 200 --domains per-qp
check "$out" write bw 2 16 false 64 200 per-qp || fail "write --domains per-qp"
run "rd read" -t read -q 4 -o 8 -s 4096 -n 100 --domains one
check "$out" read bw 4 8 false 4096 100 one || fail "read --domains one"
run "rd send" -t send -q 3 -o 4 -s 100 -n 100 -e --domains per-qp \
	--res-domain single,high_bw
check "$out" send bw 3 4 true 100 100 per-qp single,high_bw ||
	fail "send -e --domains per-qp --res-domain single,high_bw"
run "rd atomic" -t atomic -q 2 -n 100 --res-domain unsafe,default
check "$out" atomic bw 2 64 false 8 100 one unsafe,default ||
	fail "atomic --res-domain unsafe,default"
run "rd write lat" -t write -m lat --sizes 2,64 -n 50 \
	--res-domain safe,low_latency
check "$out" write lat 1 1 false 2,64 50 one safe,low_latency ||
	fail "write lat --res-domain safe,low_latency"
run "rd write lat -e" -t write -m lat -s 8 -n 50 -e \
	--res-domain single,force_low_latency
check "$out" write lat 1 1 true 8 50 one single,force_low_latency ||
	fail "write lat -e --res-domain single,force_low_latency"
run "rd send lat" -t send -m lat -s 8 -n 50 --domains per-qp \
	--res-domain unsafe,high_bw
check "$out" send lat 1 1 false 8 50 per-qp unsafe,high_bw ||
	fail "send lat --domains per-qp --res-domain unsafe,high_bw"
run "rd read lat" -t read -m lat -s 8 -n 50 --domains none
check "$out" read lat 1 1 false 8 50 none || fail "read lat --domains none"
pass "resource domains: placements and models, the QPs where they say"

# the table: a header and a row per size, no progress bar off a terminal
"$SV" bench -t read --sizes 8,16 -n 20 >"$out" 2>"$err" ||
	{ cat "$err"; fail "table run failed"; }
[ -s "$err" ] && { cat "$err"; fail "table run: messages on stderr"; }
cat "$out"
grep -q '#bytes' "$out" || fail "no table header"
[ "$(awk '$1 ~ /^[0-9]+$/ && $2 == 20' "$out" | wc -l)" = 2 ] ||
	fail "not one row per size"
"$SV" bench -m lat -s 8 -n 20 --no-progress >"$out" 2>"$err" &&
	grep -q 't_p99' "$out" || { cat "$err" "$out"; fail "lat table"; }
grep -q 'busy polling, domains none' "$out" || fail "lat table: no domains"
"$SV" bench -q 2 -s 8 -n 20 --domains per-qp --no-progress >"$out" \
	2>"$err" || { cat "$err" "$out"; fail "table with domains"; }
cat "$out"
grep -q 'domains per-qp safe,default' "$out" &&
	grep -q 'doorbell pages of the QPs: [1-9][0-9]* [1-9]' "$out" ||
	fail "table: no domains or pages in the header"
pass "the table"

# bad arguments: a message naming the problem, exit 2, no output
bad() { # PATTERN ARGS...
	local pat=$1; shift
	"$SV" bench "$@" >"$out" 2>"$err"
	local rc=$?
	[ $rc = 2 ] || { cat "$err"; fail "bench $*: exit $rc, not 2"; }
	[ -s "$out" ] && fail "bench $*: output on stdout"
	grep -q "^softverbs bench: .*$pat" "$err" ||
		{ cat "$err"; fail "bench $*: no clear message ($pat)"; }
	return 0
}
bad "unknown test 'foo'" -t foo
bad "unknown mode 'x'" -m x
bad "-s: 0 is out of range" -s 0
bad "'12Q' is not a size" -s 12Q
bad "-n: 0 is out of range" -n 0
bad "'many' is not a number" -n many
bad "-q: 0 is out of range" -q 0
bad "-o: 0 is out of range" -o 0
bad "exclude each other" -a -s 64
bad "atomic operands are 8 bytes" -t atomic -s 64
bad "-q applies to -m bw" -m lat -q 2
bad "more than 32768 WRs" -q 128 -o 1024
bad "unknown option '--bogus'" --bogus
bad "-s needs a value" -s
bad "unexpected argument 'x'" x
bad "unknown thread model 'fast'" --res-domain fast
bad "unknown thread model ''" --res-domain ,high_bw
bad "unknown message model 'quick'" --res-domain safe,quick
bad "unknown message model 'high_bw,x'" --res-domain single,high_bw,x
bad "--domains: unknown value 'all'" --domains all
bad "--res-domain and --domains none exclude each other" \
	--res-domain safe --domains none
bad "--res-domain needs a value" --res-domain
"$SV" bench --help | grep -q '^usage: softverbs bench' ||
	fail "bench --help"
pass "bad arguments: clear errors, exit 2"
