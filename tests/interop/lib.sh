# shellcheck shell=bash
# The Linux rxe peer under qemu, for the interop scripts (sourced). Needs
# root (ip netns, tap), qemu-system-x86_64 (tests/interop/deps.sh) and the
# guest built by build-guest.sh.
#
#   ig_setup NAME         a run folder $IG_RUN under $INTEROP_DIR/runs (logs,
#                         console, capture; runs/latest points to it), a
#                         network namespace $IG_NS with a tap $IG_TAP in it,
#                         10.88.0.1/24 on the tap ($IG_HOST_IP); the guest
#                         will be $IG_GUEST_IP. Cleanup is trapped (EXIT, INT,
#                         TERM): whatever happens, qemu and our host processes
#                         are killed (by pid) and the namespace is deleted.
#   ig_boot CMDFILE       boot the guest in the namespace, running CMDFILE
#                         (a busybox sh script, see init) after rxe0 is up;
#                         the console goes to $IG_RUN/console.log
#   ig_ns CMD [ARGS]      CMD inside the namespace
#   ig_bg LOG CMD [ARGS]  CMD inside the namespace in the background, output
#                         to LOG, killed at cleanup; its pid in $IG_PID
#   ig_wait MARKER [S]    wait (bounded, S s, default $IG_STEP) until the
#                         console says "SV-GUEST: MARKER..."; fails at once if
#                         the guest is gone; the line in $IG_LINE
#   ig_go [WORD]          the guest's sv_wait_go returns (bounded)
#   ig_end [S]            wait (bounded) for the guest to power off; the
#                         status of its command in $IG_RC (255: none)
#   ig_output             the command's output (BEGIN CMD .. END CMD), no CR
#   ig_capture            tshark (when installed) on the tap into
#                         $IG_RUN/tap.pcapng, stopped by ig_capture_stop or
#                         at cleanup
#   ig_log FILE [NAME]    print FILE's tail when the script fails
set -u

IG_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
IG_REPO=$(cd "$IG_HERE/../.." && pwd)
INTEROP_DIR=${INTEROP_DIR:-$IG_REPO/build/interop}
IG_GUEST=$INTEROP_DIR/guest
IG_HOST_IP=10.88.0.1
IG_GUEST_IP=10.88.0.2
IG_STEP=${IG_STEP:-60}          # seconds for one step (a marker, a program)
IG_BOOT=${IG_BOOT:-180}         # seconds until the guest says ready
IG_TIMEOUT=${IG_TIMEOUT:-900}   # hard limit on the whole qemu run
IG_MEM=${IG_MEM:-512}
IG_CTL_PORT=7000

IG_NS='' IG_TAP='' IG_RUN='' IG_QEMU_PID='' IG_PID='' IG_LINE='' IG_RC=255
# shellcheck disable=SC2034 # read by the scripts
IG_T_BOOT='' IG_T_READY='' IG_T_END=''
IG_PIDS=()
IG_LOGS=()
_ig_ok=0
_ig_cleaned=0

ig_say() { echo "[$(date +%T)] $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "PASS: $*"; }
skip() { echo "SKIP: $*"; exit 77; }
ig_log() { IG_LOGS+=("$1|${2:-$(basename "$1")}"); }

_ig_alive() { # pid
	local st
	st=$(awk '{print $3}' /proc/"$1"/stat 2>/dev/null)
	[ -n "$st" ] && [ "$st" != Z ]
}

# TERM, then KILL (bounded): only the pids we started.
_ig_kill() { # pid...
	local p _
	for p in "$@"; do _ig_alive "$p" && kill -TERM "$p" 2>/dev/null; done
	for _ in $(seq 1 40); do
		local any=0
		for p in "$@"; do _ig_alive "$p" && any=1; done
		[ $any -eq 0 ] && return 0
		sleep 0.05
	done
	for p in "$@"; do _ig_alive "$p" && kill -KILL "$p" 2>/dev/null; done
	return 0
}

ig_cleanup() {
	local rc=$? e f n
	[ $_ig_cleaned -eq 1 ] && return 0
	_ig_cleaned=1
	trap - EXIT INT TERM
	if [ $rc -ne 0 ] && [ $_ig_ok -eq 0 ]; then
		for e in "${IG_LOGS[@]}"; do
			f=${e%%|*} n=${e#*|}
			[ -f "$f" ] || continue
			echo "---- $n ($f) ----" >&2
			tail -n 60 "$f" | tr -d '\r' >&2
		done
	fi
	local q
	[ -n "$IG_RUN" ] && [ -f "$IG_RUN/qemu.pid" ] && q=$(cat "$IG_RUN/qemu.pid" 2>/dev/null) &&
		[ -n "$q" ] && IG_PIDS+=("$q")
	[ ${#IG_PIDS[@]} -eq 0 ] || _ig_kill "${IG_PIDS[@]}"
	[ -n "$IG_NS" ] && ip netns del "$IG_NS" 2>/dev/null
	[ -n "$IG_RUN" ] && rm -f "$IG_RUN/initrd.cpio" "$IG_RUN/cmd.cpio"
	[ -n "$IG_RUN" ] && echo "logs: $IG_RUN" >&2
	return $rc
}

ig_setup() { # name
	local name=$1
	[ "$(id -u)" -eq 0 ] || skip "needs root (network namespace, tap)"
	command -v qemu-system-x86_64 >/dev/null ||
		fail "qemu-system-x86_64 is missing: run tests/interop/deps.sh"
	[ -f "$IG_GUEST/initrd.cpio" ] && [ -f "$IG_GUEST/vmlinuz" ] && [ -x "$IG_GUEST/busybox" ] ||
		fail "no guest in $IG_GUEST: run tests/interop/build-guest.sh"
	[ -c /dev/net/tun ] || fail "/dev/net/tun is missing"
	# the newest IG_KEEP_RUNS (20) run folders stay, older ones go
	find "$INTEROP_DIR/runs" -mindepth 1 -maxdepth 1 -type d -printf '%T@ %p\n' 2>/dev/null |
		sort -rn | tail -n +"${IG_KEEP_RUNS:-20}" | cut -d' ' -f2- | xargs -r rm -rf --
	IG_RUN=$INTEROP_DIR/runs/$name-$(date +%Y%m%d-%H%M%S)-$$
	mkdir -p "$IG_RUN" || fail "mkdir $IG_RUN"
	ln -sfn "$(basename "$IG_RUN")" "$INTEROP_DIR/runs/latest"
	trap ig_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	IG_NS=svi-$$-$RANDOM
	IG_TAP=svtap$$
	ip netns add "$IG_NS" || { IG_NS=; fail "ip netns add"; }
	ig_ns ip link set lo up &&
	ig_ns ip tuntap add dev "$IG_TAP" mode tap &&
	ig_ns ip addr add "$IG_HOST_IP/24" dev "$IG_TAP" &&
	ig_ns ip link set "$IG_TAP" up || fail "tap $IG_TAP in $IG_NS"
	ig_say "namespace $IG_NS, tap $IG_TAP $IG_HOST_IP/24, run folder $IG_RUN"
}

ig_ns() { ip netns exec "$IG_NS" "$@"; }

ig_bg() { # log cmd...
	local log=$1
	shift
	# 'ip netns exec' execs the command: $! is the command itself
	ip netns exec "$IG_NS" "$@" </dev/null >"$log" 2>&1 &
	IG_PID=$!
	IG_PIDS+=("$IG_PID")
}

IG_TSHARK_PID=
ig_capture() {
	command -v tshark >/dev/null || { ig_say "tshark not installed: no capture"; return 0; }
	local _
	ig_bg "$IG_RUN/tshark.log" tshark -i "$IG_TAP" -w "$IG_RUN/tap.pcapng" -q
	IG_TSHARK_PID=$IG_PID
	for _ in $(seq 1 200); do
		grep -q "Capturing on" "$IG_RUN/tshark.log" 2>/dev/null && {
			ig_say "capturing the tap into $IG_RUN/tap.pcapng"
			return 0
		}
		_ig_alive "$IG_PID" || break
		sleep 0.05
	done
	ig_say "tshark did not start (see $IG_RUN/tshark.log): no capture"
}

# Stop the capture (the file is complete afterwards).
ig_capture_stop() {
	[ -n "$IG_TSHARK_PID" ] && _ig_kill "$IG_TSHARK_PID"
	IG_TSHARK_PID=
}

ig_boot() { # cmdfile
	local bb=$IG_GUEST/busybox d
	d=$IG_RUN/cmdroot
	rm -rf "$d" && mkdir -p "$d" && cp "$1" "$d/cmd.sh" || fail "copy $1"
	(cd "$d" && echo cmd.sh | "$bb" cpio -o -H newc 2>/dev/null) >"$IG_RUN/cmd.cpio" ||
		fail "cpio of the command"
	cat "$IG_GUEST/initrd.cpio" "$IG_RUN/cmd.cpio" >"$IG_RUN/initrd.cpio"
	cp "$1" "$IG_RUN/cmd.sh"
	ig_log "$IG_RUN/console.log" "guest console"
	: >"$IG_RUN/console.log"
	IG_T_BOOT=$(date +%s.%N)
	ip netns exec "$IG_NS" timeout -k 5 "$IG_TIMEOUT" qemu-system-x86_64 \
		-accel tcg -m "$IG_MEM" -nographic -no-reboot \
		-pidfile "$IG_RUN/qemu.pid" \
		-kernel "$IG_GUEST/vmlinuz" -initrd "$IG_RUN/initrd.cpio" \
		-append "console=ttyS0 quiet panic=-1 sv.ip=$IG_GUEST_IP/24" \
		-netdev "tap,id=n0,ifname=$IG_TAP,script=no,downscript=no" \
		-device virtio-net-pci,netdev=n0,mac=52:54:00:88:00:02 \
		</dev/null >"$IG_RUN/console.log" 2>&1 &
	IG_QEMU_PID=$!   # timeout's pid; qemu's own is in qemu.pid
	IG_PIDS+=("$IG_QEMU_PID")
	ig_say "booting the guest (qemu -accel tcg), console: $IG_RUN/console.log"
}

_ig_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

ig_wait() { # marker [seconds]
	local _ n=$(( ${2:-$IG_STEP} * 20 ))
	for _ in $(seq 1 $n); do
		IG_LINE=$(tr -d '\r' <"$IG_RUN/console.log" | grep -a -m 1 -o "SV-GUEST: $1.*") && return 0
		if grep -a -q "SV-GUEST: FATAL" "$IG_RUN/console.log"; then
			IG_LINE=$(tr -d '\r' <"$IG_RUN/console.log" | grep -a -m 1 -o "SV-GUEST: FATAL.*")
			fail "guest setup failed: $IG_LINE"
		fi
		_ig_alive "$IG_QEMU_PID" || {
			sleep 0.2
			IG_LINE=$(tr -d '\r' <"$IG_RUN/console.log" | grep -a -m 1 -o "SV-GUEST: $1.*") && return 0
			fail "the guest is gone before saying '$1'"
		}
		sleep 0.05
	done
	fail "the guest did not say '$1' within ${2:-$IG_STEP} s"
}

ig_wait_ready() {
	ig_wait "ready" "$IG_BOOT"
	IG_T_READY=$(_ig_since "$IG_T_BOOT")
	ig_say "guest ready after $IG_T_READY s: ${IG_LINE#SV-GUEST: }"
}

ig_go() { # [word]
	local _
	for _ in $(seq 1 $(( IG_STEP * 10 ))); do
		ip netns exec "$IG_NS" bash -c \
			"echo ${1:-go} >/dev/tcp/$IG_GUEST_IP/$IG_CTL_PORT" 2>/dev/null && return 0
		_ig_alive "$IG_QEMU_PID" || fail "the guest is gone (waiting to say go)"
		sleep 0.1
	done
	fail "the guest never listened for go on port $IG_CTL_PORT"
}

ig_end() { # [seconds]
	local _
	for _ in $(seq 1 $(( ${1:-$IG_STEP} * 20 ))); do
		if ! _ig_alive "$IG_QEMU_PID"; then
			wait "$IG_QEMU_PID" 2>/dev/null
			IG_RC=$(tr -d '\r' <"$IG_RUN/console.log" |
				sed -n 's/.*SV-GUEST: END CMD rc=\([0-9]*\).*/\1/p' | head -n 1)
			IG_RC=${IG_RC:-255}
			# shellcheck disable=SC2034 # read by the scripts
			IG_T_END=$(_ig_since "$IG_T_BOOT")
			return 0
		fi
		sleep 0.05
	done
	fail "the guest did not power off within ${1:-$IG_STEP} s"
}

ig_output() {
	tr -d '\r' <"$IG_RUN/console.log" |
		sed -n '/SV-GUEST: BEGIN CMD/,/SV-GUEST: END CMD/{/SV-GUEST: \(BEGIN\|END\) CMD/d;p}'
}

ig_passed() { _ig_ok=1; }
