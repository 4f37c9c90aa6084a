#!/usr/bin/env bash
# The Debian package (issue 24, Deliver 4): `make deb`'s script packages
# this build, and the package installs in a fresh root of the Debian
# release it was built on (12, bookworm, or 13, trixie) made by
# debootstrap (minbase, with Debian's ibverbs-utils, so rdma-core's own
# libibverbs is there too), entered with unshare and chroot:
#   - dpkg -i installs it beside rdma-core's libibverbs, which stays;
#   - an unprivileged user (nobody) runs the unmodified ibv_rc_pingpong of
#     that root, server and client, through `softverbs run`: the daemon
#     starts by itself from /usr/libexec/softverbs, no kernel module, no
#     privileges;
#   - dpkg -r removes every file it brought;
#   - then dist/Dockerfile's instructions, carried out one by one in that
#     root as a container engine would (none runs here): its command, as
#     the unprivileged user it names, shows sv0 with its port active.
# Needs root (debootstrap, chroot) and Debian's mirror.
#   deb.sh BUILD_DIR
. "$(dirname "$0")/lib.sh"
build=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || fail "this test needs root (debootstrap and chroot)"
command -v debootstrap >/dev/null || fail "debootstrap is missing"
T=$SV_TEST_DIR/deb
mkdir -p "$T"
deb=$("$src/scripts/mkdeb.sh" "$build" "$T") || fail "mkdeb.sh"
echo "built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"
root=$T/root
mirror=${SV_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# the package needs the libc of the release it was built on
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
case "$suite" in
bookworm) ver=12 ;;
trixie) ver=13 ;;
*) fail "the package installs on the Debian release it was built on: bookworm or trixie, not '$suite'" ;;
esac
# in a mount namespace of its own: what debootstrap mounts in the root
# (proc, or the host's /dev nodes bound in a container) goes with it even
# if it is killed, and no later rm -rf of the root reaches the host's
timeout 900 unshare -m --propagation private \
	debootstrap --variant=minbase --include=ibverbs-utils "$suite" \
	"$root" "$mirror" >"$T/debootstrap.log" 2>&1 ||
	{ tail -n 30 "$T/debootstrap.log"; fail "debootstrap $suite from $mirror"; }
cp "$deb" "$root/tmp/"
sys_lib=$(chroot "$root" sh -c 'ls /usr/lib/*/libibverbs.so.1' 2>/dev/null)
[ -n "$sys_lib" ] || fail "rdma-core's libibverbs is not in the root"

cat >"$root/tmp/inside.sh" <<'IN'
set -eu
dpkg -i /tmp/softverbs_*.deb
test -e /usr/lib/softverbs/libibverbs.so.1
test -x /usr/libexec/softverbs/softverbsd
ls /usr/lib/*/libibverbs.so.1 >/dev/null      # rdma-core's is still there
mkdir -p /tmp/nobody && chown nobody: /tmp/nobody
cat >/tmp/pp.sh <<'PP'
set -u
export XDG_RUNTIME_DIR=/tmp/nobody HOME=/tmp/nobody
timeout 60 softverbs run -- ibv_rc_pingpong -g 0 -p 18515 -n 100 >/tmp/nobody/srv 2>&1 &
srv=$!
for i in $(seq 1 400); do
	grep -q ':4853 ' /proc/net/tcp /proc/net/tcp6 2>/dev/null && break
	sleep 0.025
done
timeout 60 softverbs run -- ibv_rc_pingpong -g 0 -p 18515 -n 100 127.0.0.1 \
	>/tmp/nobody/cli 2>&1
crc=$?
test $crc = 0 || kill $srv 2>/dev/null
wait $srv
src=$?
cat /tmp/nobody/srv /tmp/nobody/cli
test $crc = 0 && test $src = 0
grep -q 'iters in' /tmp/nobody/cli
PP
setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all \
	sh /tmp/pp.sh
# the daemon it started is the package's, and it leaves when idle
pid=$(cat /tmp/nobody/softverbs/control.lock 2>/dev/null | tr -d '\n')
test -n "$pid"
for i in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
! kill -0 "$pid" 2>/dev/null
dpkg -r softverbs
! test -e /usr/lib/softverbs/libibverbs.so.1
! test -e /usr/bin/softverbs
echo inside: done
IN
unshare -m --propagation private sh -c "
	mount -t proc proc '$root/proc' &&
	mount --bind /dev '$root/dev' &&
	chroot '$root' env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin sh /tmp/inside.sh
" >"$T/inside.log" 2>&1
rc=$?
cat "$T/inside.log"
[ $rc = 0 ] || fail "inside the fresh Debian $ver root: status $rc"
grep -q 'inside: done' "$T/inside.log" || fail "the steps inside did not finish"

# dist/Dockerfile, step by step, in the same root (the package removed
# again): no container engine runs here, so each instruction is carried
# out as an engine would in an image of FROM's root: RUN in a chroot as
# root, COPY from the build context (the folder the package is in), USER
# and ENV for what follows, and CMD run last as that user with that
# environment: it must show sv0, its port active. An instruction this
# does not know fails the test.
/usr/bin/python3 - "$src/dist/Dockerfile" "$T" "$root" "$ver" "$suite" \
	>"$T/docker.sh" <<'PY' ||
import json, shlex, sys, glob, os
df, ctx, root, ver, suite = sys.argv[1:6]
# ARG's defaults; DEBIAN_VERSION as `docker build --build-arg` sets it for
# a package of this release
args = {}
lines, cur = [], ''
for l in open(df):
    l = l.rstrip('\n')
    if not cur and (not l.strip() or l.lstrip().startswith('#')):
        continue
    if l.endswith('\\'):
        cur += l[:-1] + ' '
        continue
    lines.append(cur + l)
    cur = ''
out = ['set -eu']
user, env = 'root', {}
for l in lines:
    ins, _, arg = l.strip().partition(' ')
    ins = ins.upper()
    if ins == 'ARG':
        k, _, v = arg.strip().partition('=')
        args[k] = ver if k == 'DEBIAN_VERSION' else v
    elif ins == 'FROM':
        image = arg.strip()
        for k, v in args.items():
            image = image.replace('${%s}' % k, v).replace('$' + k, v)
        assert image in ('debian:%s-slim' % ver, 'debian:%s' % ver,
                         'debian:%s' % suite, 'debian:%s-slim' % suite), \
            ('FROM', arg, image)
    elif ins == 'RUN':
        out.append('echo "RUN %s"' % arg.replace('"', "'")[:60])
        out.append('chroot_run sh -c %s' % shlex.quote(arg))
    elif ins == 'COPY':
        srcs, dst = arg.split()[:-1], arg.split()[-1]
        for sp in srcs:
            hits = glob.glob(os.path.join(ctx, sp))
            assert hits, ('COPY finds nothing', sp)
            for h in hits:
                out.append('cp %s %s' % (shlex.quote(h),
                                         shlex.quote(root + '/' + dst.lstrip('/'))))
    elif ins == 'USER':
        user = arg.strip()
    elif ins == 'ENV':
        for kv in shlex.split(arg):
            k, _, v = kv.partition('=')
            env[k] = v
    elif ins == 'CMD':
        cmd = json.loads(arg)
        envs = ' '.join(shlex.quote('%s=%s' % kv) for kv in env.items())
        out.append('echo "CMD %s as %s"' % (' '.join(cmd), user))
        out.append('chroot_run setpriv --reuid=%s --regid=nogroup --clear-groups '
                   '--inh-caps=-all env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin %s %s'
                   ' >%s/tmp/cmd.out 2>&1'
                   % (shlex.quote(user), envs, ' '.join(shlex.quote(c) for c in cmd),
                      shlex.quote(root)))
        # the daemon the command started leaves by itself once idle
        lock = root + env.get('XDG_RUNTIME_DIR', '/run') + '/softverbs/control.lock'
        out.append('pid=$(tr -d "\\n" <%s)' % shlex.quote(lock))
        out.append('for i in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done')
        out.append('if kill -0 "$pid" 2>/dev/null; then kill "$pid"; echo "daemon $pid still there"; exit 1; fi')
    else:
        sys.exit('dist/Dockerfile: %s is not an instruction this test runs' % ins)
print('\n'.join(out))
PY
	fail "dist/Dockerfile could not be followed"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null
unshare -m --propagation private bash -c "
	mount -t proc proc '$root/proc' && mount --bind /dev '$root/dev' || exit 1
	chroot_run() { chroot '$root' \"\$@\"; }
	. '$T/docker.sh'
" >"$T/docker.log" 2>&1
rc=$?
tail -n 20 "$T/docker.log"
[ $rc = 0 ] || fail "dist/Dockerfile's steps: status $rc"
cat "$root/tmp/cmd.out"
grep -q 'hca_id:[[:space:]]*sv0' "$root/tmp/cmd.out" &&
	grep -q 'PORT_ACTIVE' "$root/tmp/cmd.out" ||
	fail "the image's command did not show sv0 with its port active"
pass "the package installs in a fresh Debian $ver root beside rdma-core, runs ibv_rc_pingpong unprivileged, and removes cleanly; dist/Dockerfile's steps build that root into the image, whose command shows sv0 to an unprivileged user"
