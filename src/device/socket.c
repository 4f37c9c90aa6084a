// SPDX-License-Identifier: MIT
/*
 * The control socket: its folder, its lock and its listening socket.
 *
 * One daemon per socket path: a daemon holds an exclusive flock on the
 * socket's lock file (PATH.lock) for its whole life. A second one started at
 * the same time waits a little for that lock, finds a live daemon answering
 * and leaves quietly, so two clients that auto-start at once end up on one
 * daemon. One that finds the lock held by a process that does not answer on
 * the socket for SV_LOCK_GRACE_MS leaves with an error naming it, never
 * waits forever. Under systemd the listening socket may come ready-made
 * (socket activation).
 *
 * Owns nothing but d's socket fields. Calls the socket helpers of src/abi,
 * ctl/view.c, cm/ and nl/ (started once the lock is ours, stopped if listening
 * fails) and main.c (daemon_give_up); called by main.c (daemon.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "abi/sv_sock.h"
#include "device/daemon.h"
#include "device/cm/cm.h"
#include "device/nl/nl.h"

/* How long a lock held by a process that does not answer on the socket is
 * waited for: a daemon between its flock and its listen, or on its way out,
 * takes far less. */
#define SV_LOCK_GRACE_MS 3000

static int mkdir_p(const char *dir)
{
	char tmp[300];

	snprintf(tmp, sizeof(tmp), "%s", dir);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0700) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

/* Is a daemon answering on path? */
static bool daemon_alive(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	bool alive;

	if (fd < 0)
		return false;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	alive = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return alive;
}

static long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The pid that holds an flock on fd's file, from /proc/locks; else the pid
 * the file names (what a daemon writes there); else -1. */
static long lock_holder(int fd)
{
	struct stat st;
	char line[256], buf[32];
	long pid = -1;
	FILE *f;
	ssize_t n;

	if (!fstat(fd, &st) && (f = fopen("/proc/locks", "re"))) {
		while (pid < 0 && fgets(line, sizeof(line), f)) {
			unsigned int maj, min;
			unsigned long ino;
			long p;

			/* "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" */
			if (!strstr(line, "FLOCK") ||
			    sscanf(line, "%*s %*s %*s %*s %ld %x:%x:%lu", &p,
				   &maj, &min, &ino) != 4)
				continue;
			if (ino == (unsigned long)st.st_ino &&
			    maj == major(st.st_dev) && min == minor(st.st_dev) &&
			    p != (long)getpid())
				pid = p;
		}
		fclose(f);
	}
	if (pid < 0 && (n = pread(fd, buf, sizeof(buf) - 1, 0)) > 0) {
		buf[n] = 0;
		pid = strtol(buf, NULL, 10);
		if (pid <= 0)
			pid = -1;
	}
	return pid;
}

/* Take the socket's lock: 1 taken; 0 another daemon answers on the socket;
 * -EBUSY the holder does not answer within SV_LOCK_GRACE_MS; -errno. */
static int take_lock(void)
{
	long end = mono_ms() + SV_LOCK_GRACE_MS;

	for (;;) {
		if (!flock(d.lock_fd, LOCK_EX | LOCK_NB))
			return 1;
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK)
			return -errno;
		/* a daemon starting, serving, or on its way out holds it */
		if (daemon_alive(d.sock_path))
			return 0;
		if (mono_ms() > end)
			return -EBUSY;
		usleep(10000);
	}
}

/*
 * Socket activation (softverbsd.socket): systemd's listen-fds protocol
 * hands over one listening SOCK_SEQPACKET socket as descriptor 3, bound to
 * the control socket's path, which systemd owns (it is not unlinked here).
 * Its path replaces --socket. false when there is none.
 */
static bool take_activated(void)
{
	const char *pid = getenv("LISTEN_PID"), *n = getenv("LISTEN_FDS");
	struct sockaddr_un sa;
	socklen_t len = sizeof(sa);
	int type = 0, acc = 0;
	socklen_t tl = sizeof(type), al = sizeof(acc);

	if (!pid || !n || strtol(pid, NULL, 10) != (long)getpid() ||
	    strtol(n, NULL, 10) < 1)
		return false;
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	memset(&sa, 0, sizeof(sa));
	if (getsockopt(3, SOL_SOCKET, SO_TYPE, &type, &tl) ||
	    type != SOCK_SEQPACKET ||
	    getsockopt(3, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) || !acc ||
	    getsockname(3, (struct sockaddr *)&sa, &len) ||
	    sa.sun_family != AF_UNIX || !sa.sun_path[0]) {
		sv_log(SV_LOG_WARN, "socket activation: descriptor 3 is not a "
		       "listening SOCK_SEQPACKET socket with a path: ignored");
		return false;
	}
	snprintf(d.sock_path, sizeof(d.sock_path), "%s", sa.sun_path);
	fcntl(3, F_SETFD, FD_CLOEXEC);
	fcntl(3, F_SETFL, fcntl(3, F_GETFL) | O_NONBLOCK);
	d.listen_fd = 3;
	d.activated = true;
	return true;
}

void daemon_sock_unlink(void)
{
	if (!d.activated)
		unlink(d.sock_path);
}

int daemon_claim_socket(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int ret;

	take_activated();

	ret = sv_sock_lock_path(d.sock_path, d.lock_path, sizeof(d.lock_path));
	if (ret) {
		daemon_give_up(1, ret, "cannot serve %s: path too long",
			       d.sock_path);
		return ret;
	}
	d.lock_fd = open(d.lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
			 0600);
	if (d.lock_fd < 0) {
		ret = -errno;
		daemon_give_up(1, ret, "cannot serve %s: cannot open its lock "
			       "%s: %s", d.sock_path, d.lock_path,
			       strerror(-ret));
		return ret;
	}
	ret = take_lock();
	if (ret == -EBUSY) {
		long pid = lock_holder(d.lock_fd);

		if (pid > 0)
			daemon_give_up(1, ret, "cannot serve %s: its lock %s is "
				       "held by pid %ld, which does not answer "
				       "on the socket", d.sock_path,
				       d.lock_path, pid);
		else
			daemon_give_up(1, ret, "cannot serve %s: its lock %s is "
				       "held by a process that does not answer "
				       "on the socket", d.sock_path,
				       d.lock_path);
		return ret;
	}
	if (ret < 0) {
		daemon_give_up(1, ret, "cannot serve %s: cannot lock %s: %s",
			       d.sock_path, d.lock_path, strerror(-ret));
		return ret;
	}
	/* (an activated socket is ours: a connection to it would only wait
	 * in our own backlog) */
	if (ret == 0 || (!d.activated && daemon_alive(d.sock_path)))
		return 0;
	/* the lock file names the daemon that holds it (tests wait on it) */
	if (ftruncate(d.lock_fd, 0) == 0) {
		char pid[16];
		int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());

		if (pwrite(d.lock_fd, pid, (size_t)n, 0) != n)
			sv_log(SV_LOG_WARN, "cannot write %s", d.lock_path);
	}
	/* the view exists before anyone can connect: a client that reaches
	 * the daemon finds it */
	sv_view_publish(d.sock_path);
	ret = sv_cm_start(d.sock_path);
	if (ret)
		sv_log(SV_LOG_WARN, "no rdma_cm device: %s", strerror(-ret));
	ret = sv_nl_start(d.sock_path);
	if (ret)
		sv_log(SV_LOG_WARN, "no RDMA netlink: %s", strerror(-ret));
	if (d.activated) {
		sv_log(SV_LOG_INFO, "socket activation: serving the socket "
		       "systemd listens on");
		return 1;
	}
	unlink(d.sock_path);
	ret = 0;
	d.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC |
			     SOCK_NONBLOCK, 0);
	if (d.listen_fd < 0)
		ret = -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d.sock_path);
	if (d.listen_fd >= 0) {
		/* made 0600 as it is bound: no chmod by name afterwards, which
		 * would follow whatever took the name in between */
		mode_t um = umask(0177);

		if (bind(d.listen_fd, (struct sockaddr *)&sa, sizeof(sa)))
			ret = -errno;
		umask(um);
		if (!ret && listen(d.listen_fd, 128))
			ret = -errno;
	}
	if (ret < 0) {
		sv_cm_stop();
		sv_nl_stop();
		daemon_give_up(1, ret, "cannot serve %s: %s", d.sock_path,
			       strerror(-ret));
		return ret;
	}
	return 1;
}

/* The socket's folder, made and checked: 0, or main's status (said). */
int daemon_sock_folder(void)
{
	char dir[256], why[512];
	int e = sv_sock_dir(d.sock_path, dir, sizeof(dir));

	if (e || (e = mkdir_p(dir)))
		return daemon_give_up(1, e, "cannot serve %s: cannot create "
				      "its folder %s: %s", d.sock_path, dir,
				      strerror(-e));
	/* a default per-user folder made by another user is not served: its
	 * lock, log and socket would be theirs to swap */
	e = sv_sock_dir_check(d.sock_path, why, sizeof(why));
	if (e)
		return daemon_give_up(1, e, "cannot serve %s: %s", d.sock_path,
				      why);
	return 0;
}
