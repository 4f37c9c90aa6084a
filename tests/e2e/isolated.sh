#!/usr/bin/env bash
# Run one test against a device of its own, and make sure that device is gone
# afterwards: a private socket folder, a short idle exit, the daemon from this
# build. Fails if the test fails or if a daemon outlives it.
#   isolated.sh BUILD_DIR CMD [ARGS...]
set -u
build=$1; shift
dir=$(mktemp -d /tmp/softverbs-test.XXXXXX)
export SOFTVERBS_SOCKET=$dir/control
export SOFTVERBS_IDLE_EXIT=${SOFTVERBS_IDLE_EXIT:-1}
export SOFTVERBSD=$build/bin/softverbsd
export SV_TEST_DIR=$dir
export SV_BUILD_DIR=$build
unset SOFTVERBS_NO_AUTOSTART

"$@"
rc=$?

# every daemon this test started leaves by itself once idle
pid=$(cat "$dir/control.lock" 2>/dev/null | tr -d '\n')
if [ -n "$pid" ]; then
	for _ in $(seq 1 200); do
		kill -0 "$pid" 2>/dev/null || break
		# a zombie has left already
		[ "$(awk '{print $3}' /proc/"$pid"/stat 2>/dev/null)" = Z ] && break
		sleep 0.05
	done
	# (read once: a zombie reaped between two looks has no state at all;
	# where PID 1 is a shell, as in make distros-build's root, that is
	# when it gets round to it)
	st=$(awk '{print $3}' /proc/"$pid"/stat 2>/dev/null)
	if [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]; then
		echo "isolated.sh: daemon $pid still running 10 s after the test" >&2
		kill -TERM "$pid" 2>/dev/null
		rc=1
	fi
fi
# a sanitized daemon reports into its log (its stderr)
if grep -Eq 'ERROR: (Address|Leak)Sanitizer|runtime error:|WARNING: ThreadSanitizer' "$dir/softverbsd.log" 2>/dev/null; then
	echo "isolated.sh: the daemon's sanitizer reported errors" >&2
	rc=1
fi
if [ $rc -ne 0 ] && [ -f "$dir/softverbsd.log" ]; then
	echo "---- softverbsd.log ----" >&2
	tail -n 60 "$dir/softverbsd.log" >&2
fi
rm -rf "$dir"
exit $rc
