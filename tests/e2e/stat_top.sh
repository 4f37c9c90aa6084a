#!/usr/bin/env bash
# What the device shows of itself (issue 24, Deliver 3): 'softverbs stat
# --json' against its documented schema (docs/stat.schema.json, checked by
# python3-jsonschema), 'softverbs stat --prometheus' and the --serve
# endpoint through Prometheus' own text parser (python3-prometheus-client),
# and 'softverbs top' in a pseudo-terminal showing a QP this test made,
# with its sort keys and q to quit. A QP of a running ibv_rc_pingpong
# shows its completions (sends, recvs) and state RTS.
#   stat_top.sh CASE   CASE: json prometheus top traffic
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/peers.sh"
out=$SV_TEST_DIR/out
schema=$(dirname "$0")/../../docs/stat.schema.json
PY=/usr/bin/python3

# A client holding two RC QPs in INIT; their numbers in $qpns.
start_hold() {
	"$HOLD" --pd 1 --mr 1 --cq 1 --qp 2 >"$out.hold" 2>&1 &
	hold_pid=$!
	wait_for_line "$out.hold" '^ready' 800 || { cat "$out.hold"; fail "hold did not start"; }
	qpns=$(sed -n 's/^qpn=//p' "$out.hold" | tr '\n' ' ')
	[ -n "$qpns" ] || fail "hold printed no QPN"
}

case "$1" in
json)
	start_hold
	"$SV" stat --json >"$out" || fail "softverbs stat --json: status $?"
	"$PY" - "$schema" "$out" "$hold_pid" $qpns <<'PY' || fail "stat --json"
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
doc = json.load(open(sys.argv[2]))
jsonschema.Draft202012Validator.check_schema(schema)
jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)
pid = int(sys.argv[3])
want = {int(q) for q in sys.argv[4:]}
mine = {q['qpn']: q for q in doc['qps'] if q['pid'] == pid}
assert set(mine) == want, (mine, want)
for q in mine.values():
    assert q['type'] == 'RC' and q['state'] == 'INIT', q
    assert q['sq']['entries'] >= 16 and q['sq']['used'] == 0, q
    assert q['sends'] == 0 and q['errors'] == 0, q
assert doc['totals']['qps'] == len(doc['qps']) >= 2
held = [c for c in doc['clients'] if c['pid'] == pid]
assert len(held) == 1 and held[0]['objects']['qp'] == 2, held
assert held[0]['objects']['pd'] == 1 and held[0]['objects']['mr'] == 1
# a document that breaks the schema is refused by it (the check can fail)
bad = json.loads(json.dumps(doc)); bad['qps'][0]['state'] = 'FLYING'
try:
    jsonschema.validate(bad, schema, cls=jsonschema.Draft202012Validator)
    raise SystemExit('the schema took a QP state that does not exist')
except jsonschema.ValidationError:
    pass
print('qps', sorted(mine))
PY
	kill "$hold_pid"
	pass "stat --json validates against docs/stat.schema.json and lists the test's QPs"
	;;
prometheus)
	start_hold
	"$SV" stat --prometheus >"$out" || fail "softverbs stat --prometheus: status $?"
	"$SV" stat --serve 127.0.0.1:0 >"$out.serve" 2>&1 &
	srv=$!
	wait_for_line "$out.serve" '^serving http://' 800 || fail "stat --serve did not start"
	url=$(sed -n 's/^serving //p' "$out.serve")
	curl -s -f -m 10 -o "$out.http" "$url" || fail "GET $url failed"
	code=$(curl -s -o /dev/null -w '%{http_code}' -m 10 "${url%/metrics}/other")
	[ "$code" = 404 ] || fail "GET /other answered $code, not 404"
	for f in "$out" "$out.http"; do
		"$PY" - "$f" "$hold_pid" $qpns <<'PY' || fail "Prometheus text in $f"
import sys
from prometheus_client.parser import text_string_to_metric_families
text = open(sys.argv[1]).read()
fams = {f.name: f for f in text_string_to_metric_families(text)}
pid = sys.argv[2]
want = set(sys.argv[3:])
st = [s for s in fams['softverbs_qp_state'].samples if s.labels['pid'] == pid]
assert {s.labels['qpn'] for s in st} == want, st
assert all(s.labels['state'] == 'INIT' and s.labels['type'] == 'RC' for s in st)
assert fams['softverbs_qp_sends'].type == 'counter'
objs = {s.labels['kind']: s.value for s in fams['softverbs_objects'].samples}
assert objs['qp'] >= 2 and objs['pd'] >= 1, objs
for name in ('softverbs_clients', 'softverbs_roce_tx_packets'):
    assert name in fams, name
PY
	done
	kill "$srv" "$hold_pid"
	wait "$srv" 2>/dev/null
	pass "stat --prometheus and the --serve endpoint parse as Prometheus text with the test's QPs"
	;;
top)
	start_hold
	# not a terminal: -n frames, plain
	"$SV" top -n 2 -d 0.1 >"$out" || fail "softverbs top -n 2: status $?"
	for q in $qpns; do
		grep -Eq "^ +$q +$hold_pid +RC +INIT" "$out" || { cat "$out"; fail "top -n shows no QP $q"; }
	done
	"$PY" - "$SV" "$hold_pid" $qpns <<'PY' || fail "top in a pseudo-terminal"
import os, pty, re, select, sys, time
sv, pid, qpns = sys.argv[1], sys.argv[2], sys.argv[3:]
child, fd = pty.fork()
if child == 0:
    os.execv(sv, [sv, 'top', '-d', '0.2'])
buf = b''
def until(pat, secs=20):
    global buf
    end = time.monotonic() + secs
    while time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                buf += os.read(fd, 65536)
            except OSError:
                break
            if re.search(pat, buf):
                return True
    return False
for q in qpns:
    assert until(rb'\n +%s +%s +RC +INIT' % (q.encode(), pid.encode())), buf[-2000:]
assert b'sort: qpn' in buf and b'\033[2J' in buf, buf[-500:]
buf = b''
os.write(fd, b's')
assert until(rb'sort: pid'), buf[-500:]
os.write(fd, b'r')
assert until(rb'sort: pid \(reversed\)'), buf[-500:]
os.write(fd, b'q')
end = time.monotonic() + 20
while time.monotonic() < end:
    got, status = os.waitpid(child, os.WNOHANG)
    if got:
        break
    try:
        os.read(fd, 65536)
    except OSError:
        pass
    time.sleep(0.05)
else:
    os.kill(child, 9)
    raise SystemExit('top did not quit on q')
assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
PY
	kill "$hold_pid"
	pass "top shows the test's QPs in a pseudo-terminal, sorts on s and r, quits on q"
	;;
traffic)
	# a pingpong long enough to be seen running; bounded by its count
	port=$(free_port)
	"$SV" run -- ibv_rc_pingpong -g 0 -p "$port" -n 1000000 -s 64 >"$out.srv" 2>&1 &
	srv=$!
	wait_listen "$port" "$srv" || { cat "$out.srv"; fail "the pingpong server does not listen"; }
	"$SV" run -- ibv_rc_pingpong -g 0 -p "$port" -n 1000000 -s 64 127.0.0.1 >"$out.cli" 2>&1 &
	cli=$!
	seen=
	for _ in $(seq 1 400); do
		"$SV" stat --json >"$out" 2>/dev/null &&
		"$PY" - "$out" <<'PY' && { seen=1; break; }
import json, sys
qps = json.load(open(sys.argv[1]))['qps']
busy = [q for q in qps if q['state'] == 'RTS' and q['sends'] > 0 and q['recvs'] > 0]
sys.exit(0 if len(busy) >= 2 else 1)
PY
		kill -0 "$cli" 2>/dev/null || break
		sleep 0.05
	done
	kill "$cli" "$srv" 2>/dev/null
	wait "$cli" "$srv" 2>/dev/null
	[ -n "$seen" ] || { cat "$out" "$out.srv" "$out.cli"; fail "no running QP showed completions"; }
	pass "a running pingpong's QPs show state RTS and their sends and receives"
	;;
*)
	fail "unknown case $1"
	;;
esac
