// SPDX-License-Identifier: MIT
/*
 * Reaching the daemon, and starting one when none answers. Two processes
 * doing this at once each start one; the daemons settle on one between
 * themselves (see device/socket.c), and both connect to it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "abi/sv_sock.h"
#include "abi/sv_spawn.h"

int sv_sock_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool sv_autostart_allowed(void)
{
	const char *no_auto = getenv("SOFTVERBS_NO_AUTOSTART");

	return !(no_auto && *no_auto && strcmp(no_auto, "0"));
}

/* Where is softverbsd? $SOFTVERBSD, else beside the build or install tree
 * of the shared object this code is in (our libibverbs, or the preload
 * library), else $PATH. */
static void find_daemon(char *buf, size_t len)
{
#ifndef SV_LIB_TO_LIBEXEC
#define SV_LIB_TO_LIBEXEC "../../libexec/softverbs"
#endif
	/* the build tree's bin, beside, an installed tree's LIBEXECDIR */
	static const char *const rel[] = {
		"../bin/softverbsd", "softverbsd",
		SV_LIB_TO_LIBEXEC "/softverbsd",
	};
	const char *env = getenv("SOFTVERBSD");
	Dl_info info;

	if (env && *env) {
		snprintf(buf, len, "%s", env);
		return;
	}
	if (dladdr((void *)find_daemon, &info) && info.dli_fname) {
		char dir[PATH_MAX];
		char *slash;

		snprintf(dir, sizeof(dir), "%s", info.dli_fname);
		slash = strrchr(dir, '/');
		if (slash) {
			*slash = 0;
			for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
				snprintf(buf, len, "%s/%s", dir, rel[i]);
				if (access(buf, X_OK) == 0)
					return;
			}
		}
	}
	snprintf(buf, len, "softverbsd");
}

/* Wait for the daemon's one-line report on fd: "0", or "-ERRNO reason". */
static int read_report(int fd, long deadline_ms, char *msg, size_t msglen)
{
	char buf[512];
	size_t got = 0;
	char *end;
	long e;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		long left = deadline_ms - now_ms();
		ssize_t n;

		if (left <= 0) {
			snprintf(msg, msglen, "softverbsd did not report in time");
			return -ETIMEDOUT;
		}
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			return -errno;
		if (!p.revents)
			continue;
		n = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || (got += (size_t)n) == sizeof(buf) - 1)
			break;
		if (memchr(buf, '\n', got))
			break;
	}
	buf[got] = 0;
	if (!got) {
		snprintf(msg, msglen, "softverbsd exited without a word");
		return -EIO;
	}
	e = strtol(buf, &end, 10);
	if (end == buf || e > 0 || e < -4095)
		e = -EIO;
	if (*end == ' ')
		end++;
	end[strcspn(end, "\n")] = 0;
	snprintf(msg, msglen, "%s", end);
	return (int)e;
}

/* A daemon that gave up keeps its end of the report pipe until it has
 * exited: wait (until deadline_ms) for that end, so that none is left
 * behind when the caller hears why. */
static void wait_gone(int fd, long deadline_ms)
{
	char b[64];

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		long left = deadline_ms - now_ms();

		if (left <= 0)
			return;
		if (poll(&p, 1, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		if (!p.revents)
			continue;
		if (read(fd, b, sizeof(b)) <= 0 && errno != EINTR)
			return;
	}
}

/*
 * Start a daemon, detached: fork twice so it is nobody's child here (no
 * zombie, no SIGCHLD for the application), in its own session, with none of
 * the application's descriptors but the write end of its report pipe (as
 * descriptor 3). Between fork and exec only async-signal-safe calls: this
 * may run in any thread of any program.
 */
int sv_spawn_daemon(const char *sock_path, long deadline_ms, char *msg,
		    size_t msglen)
{
	char exe[PATH_MAX], log[PATH_MAX], dir[PATH_MAX], idle[16];
	const char *env_idle = getenv("SOFTVERBS_IDLE_EXIT");
	char *argv[12];
	int argc = 0, pfd[2], ret;
	pid_t pid;

	msg[0] = 0;
	find_daemon(exe, sizeof(exe));
	snprintf(idle, sizeof(idle), "%s",
		 env_idle && *env_idle ? env_idle : SV_DEFAULT_IDLE_EXIT);
	argv[argc++] = exe;
	argv[argc++] = "--idle-exit";
	argv[argc++] = idle;
	argv[argc++] = "--socket";
	argv[argc++] = (char *)sock_path;
	argv[argc++] = "--ready-fd";
	argv[argc++] = "3";
	if (!sv_sock_sibling(sock_path, SV_LOG_NAME, log, sizeof(log))) {
		argv[argc++] = "--log";
		argv[argc++] = log;
	}
	argv[argc] = NULL;
	if (!sv_sock_dir(sock_path, dir, sizeof(dir)))
		mkdir(dir, 0700); /* so the log can open before the daemon runs */
	/* a default per-user folder that is not ours (made by another user
	 * before us) gets neither our daemon nor our log */
	ret = sv_sock_dir_check(sock_path, msg, msglen);
	if (ret)
		return ret;
	if (pipe2(pfd, O_CLOEXEC))
		return -errno;

	pid = fork();
	if (pid < 0) {
		ret = -errno;
		close(pfd[0]);
		close(pfd[1]);
		return ret;
	}
	if (pid == 0) {
		int nul, err;

		setsid();
		if (fork() != 0)
			_exit(0);
		nul = open("/dev/null", O_RDWR);
		/* stderr to the log: whatever the daemon says on the way out
		 * (a sanitizer's report too) stays readable */
		err = argc > 7 ? open(log, O_WRONLY | O_APPEND | O_CREAT |
				      O_NOFOLLOW, 0600) : -1;
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
			dup2(err >= 0 ? err : nul, 2);
		}
		/* the report pipe as descriptor 3, kept across exec */
		if (pfd[1] == 3)
			fcntl(3, F_SETFD, 0);
		else if (dup2(pfd[1], 3) != 3)
			_exit(127);
		syscall(SYS_close_range, 4, ~0u, 0);
		if (strchr(exe, '/'))
			execv(exe, argv);
		else
			execvp(exe, argv);
		_exit(127);
	}
	close(pfd[1]);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	ret = read_report(pfd[0], deadline_ms, msg, msglen);
	if (ret < 0 && ret != -ETIMEDOUT)
		wait_gone(pfd[0], deadline_ms);
	close(pfd[0]);
	if (ret == -EIO && !strcmp(msg, "softverbsd exited without a word"))
		snprintf(msg, msglen, "cannot run %s (or it died starting)", exe);
	return ret;
}

/* The device at path belongs to another uid: say so, once per call. */
static int denied(const char *path, int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	struct stat st;
	long uid = -1;

	if (fd >= 0 && !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		uid = (long)cr.uid;
	else if (!stat(path, &st))
		uid = (long)st.st_uid;
	if (uid >= 0)
		fprintf(stderr, "softverbs: permission denied: the device at %s "
			"belongs to uid %ld\n", path, uid);
	else
		fprintf(stderr, "softverbs: permission denied: the device at %s "
			"belongs to another user\n", path);
	return -EACCES;
}

/* The folder or the daemon at path is not the user's: say why. */
static int refused(const char *path, int err, const char *why)
{
	fprintf(stderr, "softverbs: refusing the device at %s: %s\n", path, why);
	return err;
}

int sv_daemon_open(const char *path, bool autostart,
		   int (*greet)(int fd, void *arg), void *arg)
{
	long deadline = now_ms() + SV_CONNECT_TIMEOUT_MS;
	int fd, ret, tries = 0;
	char msg[512];

	/* a default per-user folder must be the user's before anything in it
	 * is used (none yet: the daemon we start makes it) */
	ret = sv_sock_dir_check(path, msg, sizeof(msg));
	if (ret && ret != -ENOENT)
		return refused(path, ret, msg);
	for (;;) {
		fd = sv_sock_connect(path);
		if (fd >= 0) {
			/* whose daemon is it? asked before a byte is sent */
			ret = sv_sock_peer_check(fd, path, msg, sizeof(msg));
			if (ret) {
				close(fd);
				return refused(path, ret, msg);
			}
			ret = greet(fd, arg);
			if (ret == -EACCES)
				ret = denied(path, fd);
			if (!ret)
				return fd;
			close(fd);
			if (ret != -ENOTCONN && ret != -EIO)
				return ret;
			/* a daemon on its way out closed on us: again */
		} else if (fd == -EACCES) {
			/* the socket is another user's: no daemon we start
			 * can serve it either */
			return denied(path, -1);
		} else if (!autostart) {
			return fd;
		}
		if (now_ms() > deadline)
			return -ETIMEDOUT;
		/* none answers: start one, and hear from it whether it serves
		 * (a daemon that cannot says why, and is gone) */
		if (autostart && fd < 0 && tries++ % 200 == 0) {
			ret = sv_spawn_daemon(path, deadline, msg, sizeof(msg));
			if (ret && ret != -ETIMEDOUT) {
				fprintf(stderr, "softverbs: cannot start the device "
					"at %s: %s\n", path, msg);
				return ret;
			}
		}
		usleep(tries < 50 ? 2000 : 10000);
	}
}
