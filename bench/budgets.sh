#!/usr/bin/env bash
# Instruction budgets of the fast paths, counted by callgrind (instructions,
# not time: the same on a noisy machine, run after run).
#
#   bench/budgets.sh [--quick] [--build DIR] [--iters N] [--keep DIR]
#
# One softverbsd of this build runs under callgrind on a private socket,
# collecting only sq_execute (the engine executing one send WQE). The workload
# bench/budget_post.c runs under callgrind too, collecting only the library's
# sv_post_send (behind ibv_post_send) and sv_poll_cq (behind ibv_poll_cq): N
# times, post one signaled 8-byte inline RDMA WRITE on an RC pair and poll
# until its completion; then N polls of the empty CQ. Callgrind cuts its
# counts where each phase begins (--dump-before), so the warm-up is left out.
#
#   post_send_ir      library instructions per ibv_post_send
#   poll_cq_ir        ... per ibv_poll_cq that returns one CQE
#   poll_cq_empty_ir  ... per ibv_poll_cq that finds nothing
#   engine_wqe_ir     daemon instructions per WQE executed (sq_execute: copy
#                     the WQE out, check it, resolve the rkey, copy the data,
#                     write the CQE; the kernel's share of process_vm_writev
#                     is not counted)
#
# How many polls miss before the CQE is there depends on timing; an empty
# poll costs the same every time, so the misses are taken out exactly. The
# engine spins (SOFTVERBSD_SPIN_US) through the run, so no post finds it
# asleep: the doorbell's FUTEX_WAKE is not part of the figure.
#
# stdout: one JSON object; stderr: a short table. --quick: fewer iterations
# (make check). --keep DIR: leave the callgrind files and logs there.
set -u

here=$(cd "$(dirname "$0")" && pwd)
build=${SV_BUILD_DIR:-$here/../build}
iters=1000
keep=
while [ $# -gt 0 ]; do
	case $1 in
	--quick) iters=100 ;;
	--build) build=$2; shift ;;
	--iters) iters=$2; shift ;;
	--keep) keep=$2; shift ;;
	-h|--help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//;/^set -u/d'; exit 0 ;;
	*) echo "budgets.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
build=$(cd "$build" 2>/dev/null && pwd) || { echo "budgets.sh: no build folder" >&2; exit 2; }

fail() {
	echo "budgets.sh: $*" >&2
	printf '{"error": "%s"}\n' "$*"
	exit 1
}

for t in valgrind python3; do
	command -v $t >/dev/null || fail "$t not found (scripts/deps.sh installs it)"
done
for f in bin/softverbsd bin/softverbs bin/budget_post; do
	[ -x "$build/$f" ] || fail "$build/$f missing (build first)"
done

dir=$(mktemp -d /tmp/sv-budgets.XXXXXX)
daemon_pid=
cleanup() {
	if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
		kill -TERM "$daemon_pid" 2>/dev/null
		wait "$daemon_pid" 2>/dev/null
	fi
	if [ -n "$keep" ]; then
		mkdir -p "$keep" && cp -p "$dir"/*.out* "$dir"/*.log "$keep"/ 2>/dev/null
	fi
	rm -rf "$dir"
}
trap cleanup EXIT

sock=$dir/control
# lazy binding would put the dynamic linker into the first calls' counts
export LD_BIND_NOW=1
cg=(valgrind -q --tool=callgrind --collect-atstart=no)

# The device: spins instead of sleeping for as long as the run lasts, leaves
# 1 s after its last client.
SOFTVERBSD_SPIN_US=10000000 \
	"${cg[@]}" --callgrind-out-file="$dir/engine.out" \
	--toggle-collect=sq_execute \
	"$build/bin/softverbsd" --socket "$sock" --idle-exit 1 \
	>"$dir/daemon.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 1 300); do
	[ -S "$sock" ] && break
	kill -0 "$daemon_pid" 2>/dev/null || break
	sleep 0.1
done
[ -S "$sock" ] || fail "softverbsd did not start (see its log: $(tail -n 3 "$dir/daemon.log" | tr -d '"' | tr '\n' ' '))"

SOFTVERBS_SOCKET=$sock SOFTVERBS_NO_AUTOSTART=1 \
	"$build/bin/softverbs" run -- \
	"${cg[@]}" --callgrind-out-file="$dir/client.out" \
	--toggle-collect=sv_post_send --toggle-collect=sv_poll_cq \
	'--dump-before=budget_phase_*' \
	"$build/bin/budget_post" -n "$iters" -e "$iters" \
	>"$dir/client.log" 2>&1 ||
	fail "budget_post failed: $(tail -n 3 "$dir/client.log" | tr -d '"' | tr '\n' ' ')"

# the daemon leaves once idle, writing its counts on the way out
for _ in $(seq 1 300); do
	kill -0 "$daemon_pid" 2>/dev/null || break
	sleep 0.1
done
if kill -0 "$daemon_pid" 2>/dev/null; then
	kill -TERM "$daemon_pid" 2>/dev/null
fi
wait "$daemon_pid" 2>/dev/null
daemon_pid=

python3 - "$dir" <<'EOF' || fail "could not read callgrind's output"
import json, re, sys

d = sys.argv[1]


names = {}  # callgrind compresses names across the dumps of one run


def load(path):
    """Per function name: inclusive Ir (its own lines plus the calls it makes)
    and how many calls reached it. Dumps of one run must be loaded in order."""
    incl, calls = {}, {}
    fn = cfn = None
    for line in open(path):
        line = line.rstrip('\n')
        m = re.match(r'^(c?fn)=\((\d+)\)(?: (.*))?$', line)
        if m:
            key, ident, name = m.groups()
            if name is not None:
                names[ident] = name
            if key == 'fn':
                fn = names.get(ident, ident)
            else:
                cfn = names.get(ident, ident)
            continue
        if line.startswith('calls='):
            n = int(line[6:].split()[0])
            calls[cfn] = calls.get(cfn, 0) + n
            continue
        if fn is not None and line and (line[0].isdigit() or line[0] in '+-*'):
            parts = line.split()
            ir = int(parts[1]) if len(parts) > 1 else 0
            incl[fn] = incl.get(fn, 0) + ir
    return incl, calls


def client_dumps(base):
    # .1: before the warm-up, .2: the warm-up, .3: the loop; the final file
    # (no suffix): the empty polls
    load(base + '.1')
    load(base + '.2')
    loop = load(base + '.3')
    return loop, load(base)


def run_info():
    text = open(d + '/client.log').read()
    m = re.search(r'iters=(\d+) misses=(\d+) empty=(\d+)', text)
    if not m:
        raise SystemExit('no summary line from budget_post')
    return tuple(int(x) for x in m.groups())

n, misses, k = run_info()
(loop, loop_calls), (empty, empty_calls) = client_dumps(d + '/client.out')

post = loop.get('sv_post_send', 0)
poll = loop.get('sv_poll_cq', 0)
if loop_calls.get('sv_post_send') != n or loop_calls.get('sv_poll_cq') != n + misses:
    raise SystemExit('call counts do not match the run: %r' % loop_calls)
if empty_calls.get('sv_poll_cq') != k:
    raise SystemExit('empty-poll count does not match: %r' % empty_calls)
empty_ir = empty['sv_poll_cq'] / k
hit_ir = (poll - misses * empty_ir) / n

names.clear()
eng, eng_calls = load(d + '/engine.out')
wqes = eng_calls.get('sq_execute', 0)
if wqes:
    eng_ir = eng['sq_execute'] / wqes
else:
    # a compiler that inlines sq_execute leaves callgrind nothing to name
    sys.stderr.write('budgets.sh: no calls of sq_execute counted in the '
                     'daemon; engine_wqe_ir left out\n')
    eng_ir = None


def r(x):
    return None if x is None else round(x, 1)

out = {
    'post_send_ir': r(post / n),
    'poll_cq_ir': r(hit_ir),
    'poll_cq_empty_ir': r(empty_ir),
    'engine_wqe_ir': r(eng_ir),
    'iters': n,
    'targets': {'post_send_ir': 150, 'poll_cq_ir': 80},
}
print(json.dumps(out))

def row(name, v, target=None):
    if v is None:
        sys.stderr.write('%-38s %8s\n' % (name, '-'))
        return
    t = '' if target is None else '%6d  %s' % (
        target, 'met' if v <= target else 'MISSED by %.1f' % (v - target))
    sys.stderr.write('%-38s %8.1f  %s\n' % (name, v, t))

sys.stderr.write('%-38s %8s  %6s\n' % ('instructions (callgrind, %d iters)' % n, 'Ir', 'target'))
row('ibv_post_send, 8-byte inline WRITE', out['post_send_ir'], 150)
row('ibv_poll_cq returning one CQE', out['poll_cq_ir'], 80)
row('ibv_poll_cq on an empty CQ', out['poll_cq_empty_ir'])
row('engine, per WQE executed (%d)' % wqes, out['engine_wqe_ir'])
EOF
