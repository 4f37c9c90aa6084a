# Helpers for the end-to-end shell tests (sourced; run under isolated.sh).
set -u
# never leave a background client behind, pass or fail
trap 'kill $(jobs -p) 2>/dev/null' EXIT
SV=$SV_BUILD_DIR/bin/softverbs
HOLD=$SV_BUILD_DIR/bin/sv_hold

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "PASS: $*"; }

# Wait (bounded) until a file contains a line.
wait_for_line() { # file pattern [tries]
	local i
	for i in $(seq 1 "${3:-400}"); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.025
	done
	return 1
}

# Total of one object type in 'softverbs stat' (type name as in its header).
stat_total() { # type
	"$SV" stat | awk -v t="$1" '
		$1 == "client" { for (i = 4; i <= NF; i++) col[$i] = i - 2 }
		$1 == "total" { print $(col[t]); exit }'
}

daemon_pid() { tr -d '\n' < "$SV_TEST_DIR/control.lock" 2>/dev/null; }

# Wait (bounded) for a process that is not our child to be gone.
wait_gone() { # pid [tries]
	local i st
	for i in $(seq 1 "${2:-400}"); do
		st=$(awk '{print $3}' /proc/"$1"/stat 2>/dev/null)
		[ -z "$st" ] || [ "$st" = Z ] && return 0
		sleep 0.025
	done
	return 1
}
