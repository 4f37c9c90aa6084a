#!/usr/bin/env bash
# Run a libFuzzer target for SECONDS over its seed corpus, growing a work
# corpus (new inputs go to CORPUS, never into the source tree), and say
# what it did: executions (and their rate), coverage, peak memory and
# crashes. A crash (a leak, a timeout, a sanitizer report too) leaves its
# input in CORPUS/../crash-NAME-*; add it to SEEDS as a regression input
# once fixed.
#   run.sh FUZZER SEEDS CORPUS SECONDS
set -u
fuzzer=$1 seeds=$2 corpus=$3 secs=$4
name=$(basename "$fuzzer")
[ -x "$fuzzer" ] || { echo "FAIL: $fuzzer is not built" >&2; exit 1; }
mkdir -p "$corpus"
art=$(dirname "$corpus")/crash-$name-
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$fuzzer" -max_total_time="$secs" -print_final_stats=1 -timeout=10 \
	-rss_limit_mb=2048 -artifact_prefix="$art" "$corpus" "$seeds" \
	>"$log" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log")
cov=$(grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -n 1 |
	grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9a-zA-Z]+')
crashes=$(ls "$art"* 2>/dev/null | wc -l)
echo "$name: ${secs}s, ${execs:-?} executions (${rate:-?}/s)," \
     "${cov:-coverage ?}, peak RSS ${rss:-?} MB, $crashes crash files," \
     "exit $rc"
if [ $rc -ne 0 ]; then
	tail -n 60 "$log"
	echo "FAIL: $name found a crash (input: ${art}*)" >&2
	exit 1
fi
