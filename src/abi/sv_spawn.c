// SPDX-License-Identifier: MIT
/*
 * Reaching the daemon, and starting one when none answers. Two processes
 * doing this at once each start one; the daemons settle on one between
 * themselves (see device/main.c), and both connect to it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
	static const char *const rel[] = {
		"../bin/softverbsd", "softverbsd", "../libexec/softverbs/softverbsd",
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

/*
 * Start a daemon, detached: fork twice so it is nobody's child here (no
 * zombie, no SIGCHLD for the application), in its own session, with none of
 * the application's descriptors. Between fork and exec only async-signal-safe
 * calls: this may run in any thread of any program.
 */
void sv_spawn_daemon(const char *sock_path)
{
	char exe[PATH_MAX], log[PATH_MAX], dir[PATH_MAX], idle[16];
	const char *env_idle = getenv("SOFTVERBS_IDLE_EXIT");
	char *argv[10];
	int argc = 0;
	pid_t pid;

	find_daemon(exe, sizeof(exe));
	snprintf(idle, sizeof(idle), "%s",
		 env_idle && *env_idle ? env_idle : SV_DEFAULT_IDLE_EXIT);
	argv[argc++] = exe;
	argv[argc++] = "--idle-exit";
	argv[argc++] = idle;
	argv[argc++] = "--socket";
	argv[argc++] = (char *)sock_path;
	if (!sv_sock_sibling(sock_path, SV_LOG_NAME, log, sizeof(log))) {
		argv[argc++] = "--log";
		argv[argc++] = log;
	}
	argv[argc] = NULL;
	if (!sv_sock_dir(sock_path, dir, sizeof(dir)))
		mkdir(dir, 0700); /* so the log can open before the daemon runs */

	pid = fork();
	if (pid < 0)
		return;
	if (pid == 0) {
		int nul, err;

		setsid();
		if (fork() != 0)
			_exit(0);
		nul = open("/dev/null", O_RDWR);
		/* stderr to the log: whatever the daemon says on the way out
		 * (a sanitizer's report too) stays readable */
		err = argc > 5 ? open(log, O_WRONLY | O_APPEND | O_CREAT, 0600) : -1;
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
			dup2(err >= 0 ? err : nul, 2);
		}
		syscall(SYS_close_range, 3, ~0u, 0);
		if (strchr(exe, '/'))
			execv(exe, argv);
		else
			execvp(exe, argv);
		_exit(127);
	}
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int sv_daemon_open(const char *path, bool autostart,
		   int (*greet)(int fd, void *arg), void *arg)
{
	long deadline = now_ms() + SV_CONNECT_TIMEOUT_MS;
	int fd, ret, tries = 0;

	for (;;) {
		fd = sv_sock_connect(path);
		if (fd >= 0) {
			ret = greet(fd, arg);
			if (!ret)
				return fd;
			close(fd);
			if (ret != -ENOTCONN && ret != -EIO)
				return ret;
			/* a daemon on its way out closed on us: again */
		} else if (!autostart) {
			return fd;
		}
		if (now_ms() > deadline)
			return -ETIMEDOUT;
		/* start one now and then while waiting; extra daemons leave */
		if (autostart && tries++ % 200 == 0)
			sv_spawn_daemon(path);
		usleep(tries < 50 ? 2000 : 10000);
	}
}
