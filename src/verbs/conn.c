// SPDX-License-Identifier: MIT
/*
 * The library's connection to softverbsd, and the embedded default: when no
 * daemon answers, start one (softverbsd --idle-exit) and wait for its socket.
 * Two processes doing this at once each start one; the daemons settle on one
 * between themselves (see device/main.c), and both clients connect to it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "abi/sv_sock.h"
#include "verbs/sv_verbs.h"

#define SV_CONNECT_TIMEOUT_MS 10000
#define SV_DEFAULT_IDLE_EXIT  "5"

static int try_connect(const char *path)
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

/* Where is softverbsd? $SOFTVERBSD, else beside this library's build or
 * install tree, else $PATH. */
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
static void spawn_daemon(const char *sock_path)
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

static int hello(struct sv_conn *c, uint32_t flags, struct sv_rsp_hello *out)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret;

	sv_cmd_init(&cmd, SV_CMD_HELLO);
	cmd.u.hello.abi = SV_PROTO_VERSION;
	cmd.u.hello.flags = flags;
	ret = sv_conn_call(c, &cmd, -1, &rsp, NULL);
	if (!ret && out)
		*out = rsp.u.hello;
	return ret;
}

int sv_conn_open(struct sv_conn *c, uint32_t hello_flags,
		 struct sv_rsp_hello *out)
{
	const char *no_auto = getenv("SOFTVERBS_NO_AUTOSTART");
	bool autostart = !(no_auto && *no_auto && strcmp(no_auto, "0"));
	long deadline = now_ms() + SV_CONNECT_TIMEOUT_MS;
	char path[108];
	int ret, tries = 0;

	ret = sv_sock_path(path, sizeof(path));
	if (ret)
		return ret;
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	for (;;) {
		c->fd = try_connect(path);
		c->dead = false;
		if (c->fd >= 0) {
			struct ucred cr;
			socklen_t len = sizeof(cr);

			/* Yama: let the daemon reach our memory (its "DMA") */
			if (!getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
				prctl(PR_SET_PTRACER, cr.pid, 0, 0, 0);
			ret = hello(c, hello_flags, out);
			if (ret != -ENOTCONN && ret != -EIO)
				break;
			/* a daemon on its way out closed on us: again */
			close(c->fd);
			c->fd = -1;
		} else if (!autostart) {
			ret = c->fd;
			break;
		}
		if (now_ms() > deadline) {
			ret = -ETIMEDOUT;
			break;
		}
		/* start one now and then while waiting; extra daemons leave */
		if (autostart && tries++ % 200 == 0)
			spawn_daemon(path);
		usleep(tries < 50 ? 2000 : 10000);
	}
	if (ret) {
		if (c->fd >= 0)
			close(c->fd);
		c->fd = -1;
		pthread_mutex_destroy(&c->lock);
	}
	return ret;
}

void sv_conn_close(struct sv_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	pthread_mutex_destroy(&c->lock);
}

int sv_conn_call(struct sv_conn *c, struct sv_cmd *cmd, int fd_in,
		 struct sv_rsp *rsp, int *fd_out)
{
	int ret, status = -EIO;

	if (fd_out)
		*fd_out = -1;
	pthread_mutex_lock(&c->lock);
	if (c->dead) {
		ret = -EIO; /* as a disassociated device reports, every time */
	} else {
		cmd->hdr.seq = ++c->seq;
		ret = sv_call(c->fd, cmd, fd_in, rsp, &status, fd_out);
		if (ret) {
			c->dead = true; /* the daemon is gone: EIO from now on */
			ret = -EIO;
		} else {
			ret = status;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return ret;
}
