// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "abi/sv_sock.h"

int sv_sock_path(char *buf, size_t len)
{
	const char *env = getenv("SOFTVERBS_SOCKET");
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;

	if (env && *env)
		n = snprintf(buf, len, "%s", env);
	else if (xdg && *xdg)
		n = snprintf(buf, len, "%s/softverbs/%s", xdg, SV_SOCK_NAME);
	else if (geteuid() == 0)
		n = snprintf(buf, len, "/run/softverbs/%s", SV_SOCK_NAME);
	else
		n = snprintf(buf, len, "/tmp/softverbs-%u/%s",
			     (unsigned int)geteuid(), SV_SOCK_NAME);
	if (n < 0 || (size_t)n >= len ||
	    (size_t)n >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return -ENAMETOOLONG;
	return 0;
}

enum sv_sock_kind sv_sock_kind(const char *path)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char dir[256], own[256];
	int n;

	if (sv_sock_dir(path, dir, sizeof(dir)))
		return SV_SOCK_NAMED;
	snprintf(own, sizeof(own), "/tmp/softverbs-%u", (unsigned int)geteuid());
	if (!strcmp(dir, own))
		return SV_SOCK_USER;
	if (xdg && *xdg) {
		n = snprintf(own, sizeof(own), "%s/softverbs", xdg);
		if (n > 0 && (size_t)n < sizeof(own) && !strcmp(dir, own))
			return SV_SOCK_USER;
	}
	if (!strcmp(dir, "/run/softverbs"))
		return SV_SOCK_SYSTEM;
	return SV_SOCK_NAMED;
}

/* "uid N (name)", or "uid N" where no name is known. */
static void uid_text(uid_t uid, char *buf, size_t len)
{
	struct passwd pw, *res = NULL;
	char tmp[1024];

	if (!getpwuid_r(uid, &pw, tmp, sizeof(tmp), &res) && res &&
	    res->pw_name && *res->pw_name)
		snprintf(buf, len, "uid %u (%.64s)", (unsigned int)uid,
			 res->pw_name);
	else
		snprintf(buf, len, "uid %u", (unsigned int)uid);
}

static const char *err_name(int e)
{
	const char *n = strerrorname_np(e);

	return n ? n : "?";
}

int sv_sock_dir_check(const char *path, char *msg, size_t len)
{
	char dir[256], owner[96], me[96];
	struct stat st;

	if (len)
		msg[0] = 0;
	if (sv_sock_kind(path) != SV_SOCK_USER ||
	    sv_sock_dir(path, dir, sizeof(dir)))
		return 0;
	if (lstat(dir, &st)) {
		int e = errno;

		snprintf(msg, len, "its folder %s: %s (%s)", dir, strerror(e),
			 err_name(e));
		return -e;
	}
	uid_text(st.st_uid, owner, sizeof(owner));
	uid_text(geteuid(), me, sizeof(me));
	if (!S_ISDIR(st.st_mode)) {
		snprintf(msg, len, "%s is %s owned by %s, not a folder (EPERM): "
			 "remove it, or name a socket elsewhere "
			 "(SOFTVERBS_SOCKET)", dir,
			 S_ISLNK(st.st_mode) ? "a symbolic link" : "a file",
			 owner);
		return -EPERM;
	}
	if (st.st_uid != geteuid()) {
		snprintf(msg, len, "the folder %s belongs to %s, not to %s "
			 "(mode %04o; EPERM): remove it, or name a socket "
			 "elsewhere (SOFTVERBS_SOCKET)", dir, owner, me,
			 (unsigned int)(st.st_mode & 07777));
		return -EPERM;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(msg, len, "the folder %s (of %s) has mode %04o: others "
			 "may write in it (EPERM); chmod 700 it", dir, owner,
			 (unsigned int)(st.st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

int sv_sock_peer_check(int fd, const char *path, char *msg, size_t len)
{
	struct ucred cr;
	socklen_t l = sizeof(cr);
	char who[96], me[96];

	if (len)
		msg[0] = 0;
	if (sv_sock_kind(path) != SV_SOCK_USER)
		return 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l)) {
		int e = errno;

		snprintf(msg, len, "cannot tell whose daemon answers on it: "
			 "SO_PEERCRED: %s (%s)", strerror(e), err_name(e));
		return -EPERM;
	}
	if (cr.uid != geteuid()) {
		uid_text(cr.uid, who, sizeof(who));
		uid_text(geteuid(), me, sizeof(me));
		snprintf(msg, len, "the daemon answering on it (pid %d) runs as "
			 "%s, not as %s (EPERM); nothing was sent to it",
			 (int)cr.pid, who, me);
		return -EPERM;
	}
	return 0;
}

int sv_sock_dir(const char *path, char *dir, size_t len)
{
	const char *slash = strrchr(path, '/');
	size_t n;

	if (!slash) {
		if (len < 2)
			return -ENAMETOOLONG;
		strcpy(dir, ".");
		return 0;
	}
	n = (size_t)(slash - path);
	if (n == 0)
		n = 1; /* "/control" lives in "/" */
	if (n >= len)
		return -ENAMETOOLONG;
	memcpy(dir, path, n);
	dir[n] = 0;
	return 0;
}

int sv_sock_sibling(const char *path, const char *name, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	char dir[256];
	int n, ret;

	ret = sv_sock_dir(path, dir, sizeof(dir));
	if (ret)
		return ret;
	if (!strcmp(base, SV_SOCK_NAME) || !*base)
		n = snprintf(buf, len, "%s/%s", dir, name);
	else
		n = snprintf(buf, len, "%s/%s.%s", dir, base, name);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

int sv_sock_lock_path(const char *path, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s%s", path, SV_LOCK_SUFFIX);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int sv_send_msg(int sock, const void *buf, size_t len, int fd, int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (fd >= 0) {
		struct cmsghdr *cm;

		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof(ctl.buf);
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	do {
		n = sendmsg(sock, &msg, flags | MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

ssize_t sv_recv_msg(int sock, void *buf, size_t len, int *fd, int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf),
	};
	struct cmsghdr *cm;
	ssize_t n;

	*fd = -1;
	do {
		n = recvmsg(sock, &msg, flags | MSG_TRUNC | MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
		size_t nfd, i;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < nfd; i++) {
			int f;

			memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (*fd < 0)
				*fd = f;
			else
				close(f); /* one descriptor per message */
		}
	}
	if (msg.msg_flags & MSG_TRUNC && (size_t)n <= len)
		n = (ssize_t)len + 1; /* kernel did not report the real size */
	return n;
}

int sv_call(int sock, const struct sv_cmd *cmd, int fd_in, struct sv_rsp *rsp,
	    int *status, int *fd_out, bool skip_stale)
{
	int ret, fd = -1;
	ssize_t n;

	if (fd_out)
		*fd_out = -1;
	ret = sv_send_msg(sock, cmd, sizeof(*cmd), fd_in, 0);
	if (ret)
		return ret == -EPIPE || ret == -ECONNRESET ? -ENOTCONN : -EIO;
	n = sv_recv_msg(sock, rsp, sizeof(*rsp), &fd, 0);
	if (skip_stale && n == (ssize_t)sizeof(*rsp) &&
	    rsp->hdr.magic == SV_PROTO_MAGIC && rsp->hdr.seq != cmd->hdr.seq) {
		if (fd >= 0)
			close(fd);
		fd = -1;
		n = sv_recv_msg(sock, rsp, sizeof(*rsp), &fd, 0);
	}
	if (n == 0 || n == -ECONNRESET)
		ret = -ENOTCONN;
	else if (n != (ssize_t)sizeof(*rsp) || rsp->hdr.magic != SV_PROTO_MAGIC ||
		 rsp->hdr.seq != cmd->hdr.seq || rsp->hdr.op != cmd->hdr.op)
		ret = -EIO;
	if (ret) {
		if (fd >= 0)
			close(fd);
		return ret;
	}
	sv_rsp_take(rsp, fd, status, fd_out);
	return 0;
}

void sv_rsp_take(const struct sv_rsp *rsp, int fd, int *status, int *fd_out)
{
	*status = rsp->hdr.status;
	if (*status > 0 || *status < -4095)
		*status = -EIO;
	if (fd >= 0 && fd_out && !*status)
		*fd_out = fd;
	else if (fd >= 0)
		close(fd);
}
