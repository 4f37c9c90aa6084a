// SPDX-License-Identifier: MIT
/*
 * softverbs run --ns (issue 40, Deliver 3; docs/DESIGN.md, "The device
 * view"): the view without the preload's limits. The program runs in a
 * user and mount namespace of its own, unprivileged, where the view the
 * daemon writes beside its socket is mounted at the kernel's paths:
 * /dev/infiniband and /sys/class/infiniband* (and /sys/class/misc/rdma_cm)
 * are the view's, every other entry of /dev and /sys/class the host's
 * (bound one by one onto a tmpfs that covers the folder). Every file
 * access sees it, a static binary's raw system calls included; what the
 * view's files cannot be (the character devices, the rdma_cm commands,
 * RDMA netlink, the counters rendered at each open) still needs the
 * preload, which `run` adds as always: a static program reads the view
 * but cannot use verbs through it.
 *
 * The daemon is started (or found) before the namespaces are made, and a
 * probe connection to it is left open across exec, so that the device
 * and its view stay while the program runs, as the preload's does.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi/sv_cmd.h"
#include "abi/sv_sock.h"
#include "abi/sv_spawn.h"
#include "abi/sv_view.h"
#include "tools/tool.h"

static int greet(int fd, void *arg)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret, status;

	(void)arg;
	sv_cmd_init(&cmd, SV_CMD_HELLO);
	cmd.hdr.seq = 1;
	cmd.u.hello.abi = SV_PROTO_VERSION;
	cmd.u.hello.flags = SV_HELLO_PROBE;
	ret = sv_call(fd, &cmd, -1, &rsp, &status, NULL, false);
	return ret ? ret : status;
}

static int put_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -EIO;
}

/* One entry of the covered folder at stage/name: the host's (real) or the
 * view's, bound; a link made again with its target. 0, or -errno. */
static int place(const char *src, const char *dst)
{
	struct stat st;
	char target[PATH_MAX];
	ssize_t n;
	int fd;

	if (lstat(src, &st))
		return -errno;
	if (S_ISLNK(st.st_mode)) {
		n = readlink(src, target, sizeof(target) - 1);
		if (n < 0)
			return -errno;
		target[n] = 0;
		return symlink(target, dst) ? -errno : 0;
	}
	if (S_ISDIR(st.st_mode)) {
		if (mkdir(dst, 0755) && errno != EEXIST)
			return -errno;
	} else {
		fd = open(dst, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
		if (fd < 0)
			return -errno;
		close(fd);
	}
	return mount(src, dst, NULL, MS_BIND | MS_REC, NULL) ? -errno : 0;
}

static bool is_dir(const char *p)
{
	struct stat st;

	return !lstat(p, &st) && S_ISDIR(st.st_mode);
}

/*
 * stage (a folder of the tmpfs) gets real's entries and view's: an entry
 * in both that is a folder in both is made here and filled the same way;
 * otherwise the view's wins. Entries that cannot be bound are counted in
 * *lost (the program runs without them).
 */
static int fill(const char *stage, const char *real, const char *view, int *lost)
{
	char s[PATH_MAX], r[PATH_MAX], v[PATH_MAX];
	struct dirent *e;
	DIR *d;
	int ret = 0;

	/* the view's first: what it has, the host's same name yields to */
	d = opendir(view);
	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(s, sizeof(s), "%s/%s", stage, e->d_name);
		snprintf(r, sizeof(r), "%s/%s", real, e->d_name);
		snprintf(v, sizeof(v), "%s/%s", view, e->d_name);
		if (is_dir(v) && is_dir(r)) {
			if (mkdir(s, 0755))
				ret = -errno;
			else
				ret = fill(s, r, v, lost);
		} else {
			ret = place(v, s);
		}
		if (ret)
			break;
	}
	if (d)
		closedir(d);
	if (ret)
		return ret;
	d = opendir(real);
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(s, sizeof(s), "%s/%s", stage, e->d_name);
		if (!lstat(s, &st))
			continue;          /* the view's */
		snprintf(r, sizeof(r), "%s/%s", real, e->d_name);
		if (place(r, s))
			(*lost)++;
	}
	closedir(d);
	return 0;
}

/* Cover the host's folder real with a tmpfs holding its entries and the
 * view's (view: the same folder in the view's tree). */
static int cover(const char *real, const char *view, char *why, size_t len)
{
	char stage[] = "/tmp/softverbs-ns-XXXXXX";
	int lost = 0, ret;

	if (!is_dir(view))
		return 0;                  /* nothing of ours there */
	if (!mkdtemp(stage)) {
		snprintf(why, len, "mkdtemp: %s", strerror(errno));
		return -errno;
	}
	if (mount("softverbs", stage, "tmpfs", MS_NOSUID, "mode=0755")) {
		ret = -errno;
		snprintf(why, len, "a tmpfs for %s: %s", real, strerror(errno));
		rmdir(stage);
		return ret;
	}
	ret = fill(stage, real, view, &lost);
	if (!ret && mount(NULL, stage, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID, NULL))
		ret = -errno;
	if (!ret && mount(stage, real, NULL, MS_MOVE, NULL))
		ret = -errno;
	if (ret) {
		snprintf(why, len, "covering %s: %s", real, strerror(-ret));
		umount2(stage, MNT_DETACH);
	}
	rmdir(stage);
	if (!ret && lost && getenv("SOFTVERBS_NS_VERBOSE"))
		fprintf(stderr, "softverbs run --ns: %d entries of %s could not "
			"be shown\n", lost, real);
	return ret;
}

int sv_tool_ns_enter(void)
{
	char sock[108], root[PATH_MAX], rv[PATH_MAX + 16], why[PATH_MAX + 64];
	char map[64];
	uid_t uid = getuid();
	gid_t gid = getgid();
	int fd, ret;

	if (sv_sock_path(sock, sizeof(sock)) || sv_view_root(sock, root, sizeof(root))) {
		fprintf(stderr, "softverbs run --ns: the socket's path is too long\n");
		return -ENAMETOOLONG;
	}
	fd = sv_daemon_open(sock, sv_autostart_allowed(), greet, NULL);
	if (fd < 0) {
		fprintf(stderr, "softverbs run --ns: no device: %s\n", strerror(-fd));
		return fd;
	}
	/* held across exec: the device and its view stay while the program
	 * runs */
	fcntl(fd, F_SETFD, 0);
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS)) {
		ret = -errno;
		fprintf(stderr, "softverbs run --ns: no user namespace: %s (the "
			"kernel's user.max_user_namespaces, its "
			"unprivileged_userns_clone, or a container's seccomp "
			"profile may forbid it; plain 'softverbs run' needs none)\n",
			strerror(errno));
		return ret;
	}
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	ret = put_file("/proc/self/setgroups", "deny");
	ret = ret ? ret : put_file("/proc/self/uid_map", map);
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	ret = ret ? ret : put_file("/proc/self/gid_map", map);
	if (!ret && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		ret = -errno;
	if (ret) {
		fprintf(stderr, "softverbs run --ns: mapping the user: %s\n",
			strerror(-ret));
		return ret;
	}
	snprintf(rv, sizeof(rv), "%s/dev", root);
	ret = cover("/dev", rv, why, sizeof(why));
	snprintf(rv, sizeof(rv), "%s/sys/class", root);
	if (!ret)
		ret = cover("/sys/class", rv, why, sizeof(why));
	if (ret) {
		fprintf(stderr, "softverbs run --ns: %s\n", why);
		return ret;
	}
	return 0;
}
