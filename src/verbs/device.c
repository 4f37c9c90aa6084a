// SPDX-License-Identifier: MIT
/*
 * Discovery: the device list, names, GUID and index, and the sysfs files
 * verbs tools read (board_id, fw_ver, GID types ...), from the device view
 * the daemon writes (abi/sv_view.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi/sv_sock.h"
#include "abi/sv_view.h"
#include "verbs/sv_verbs.h"

struct sv_device sv_device0;
static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static bool have_device;
/* Where the daemon's device view lies (abi/sv_view.h), once probed. */
static char view_root[256];

/* Ask the daemon who it is. The device struct is filled once and lives as
 * long as the process, so contexts outlive ibv_free_device_list. */
static int probe_device(void)
{
	struct sv_rsp_hello h;
	struct sv_conn c;
	char sock[108];
	int ret;

	ret = sv_conn_open(&c, SV_HELLO_PROBE, &h);
	/* a process at its share of connections still sees the device it
	 * found before (ibv_open_device then fails with EMFILE) */
	if (ret == -EMFILE && have_device)
		return 0;
	if (ret)
		return ret;
	sv_conn_close(&c);
	if (have_device)
		return 0;
	h.dev_name[sizeof(h.dev_name) - 1] = 0;
	if (sv_sock_path(sock, sizeof(sock)) ||
	    sv_view_root(sock, view_root, sizeof(view_root)))
		view_root[0] = 0;
	sv_device0.ibdev.node_type = IBV_NODE_CA;
	sv_device0.ibdev.transport_type = IBV_TRANSPORT_IB;
	snprintf(sv_device0.ibdev.name, sizeof(sv_device0.ibdev.name), "%s",
		 h.dev_name);
	snprintf(sv_device0.ibdev.dev_name, sizeof(sv_device0.ibdev.dev_name),
		 "uverbs%u", h.uverbs);
	snprintf(sv_device0.ibdev.dev_path, sizeof(sv_device0.ibdev.dev_path),
		 "/sys/class/infiniband_verbs/uverbs%u", h.uverbs);
	snprintf(sv_device0.ibdev.ibdev_path,
		 sizeof(sv_device0.ibdev.ibdev_path), SV_SYSFS_PREFIX "%s",
		 h.dev_name);
	sv_device0.guid = h.node_guid;
	sv_device0.index = (int)h.dev_index;
	have_device = true;
	return 0;
}

int sv_device_probe(void)
{
	int ret;

	pthread_mutex_lock(&list_lock);
	ret = probe_device();
	pthread_mutex_unlock(&list_lock);
	return ret;
}

SV_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	struct ibv_device **list;
	int ret;

	if (num)
		*num = 0;
	pthread_mutex_lock(&list_lock);
	ret = probe_device();
	pthread_mutex_unlock(&list_lock);
	list = calloc(2, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	if (ret) {
		/* no device is not an error: an empty list, errno saying why
		 * (EACCES: the device is another user's) */
		if (getenv("SOFTVERBS_DEBUG"))
			fprintf(stderr, "softverbs: no device: %s\n",
				strerror(-ret));
		errno = -ret;
		return list;
	}
	list[0] = &sv_device0.ibdev;
	if (num)
		*num = 1;
	return list;
}

SV_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

SV_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device ? device->name : NULL;
}

SV_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	return device == &sv_device0.ibdev ? sv_device0.guid : 0;
}

SV_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	return device == &sv_device0.ibdev ? sv_device0.index : -1;
}

static const char *sysfs_path;
static pthread_once_t sysfs_once = PTHREAD_ONCE_INIT;

/* rdma-core's rule: SYSFS_PATH from the environment (trailing slashes
 * dropped) unless the program runs set-uid, else "/sys"; fixed for the life
 * of the process. */
static void sysfs_path_init(void)
{
	const char *env = getuid() == geteuid() ? getenv("SYSFS_PATH") : NULL;
	char *dup;
	size_t len;

	sysfs_path = "/sys";
	if (!env)
		return;
	dup = strndup(env, IBV_SYSFS_PATH_MAX);
	if (!dup)
		return;
	len = strlen(dup);
	while (len > 0 && dup[len - 1] == '/')
		dup[--len] = 0;
	sysfs_path = dup;
}

SV_EXPORT const char *ibv_get_sysfs_path(void)
{
	pthread_once(&sysfs_once, sysfs_path_init);
	return sysfs_path;
}

/* Where path lies in the device view: 1 and buf set, 0 (not a view path,
 * or no device), -ENAMETOOLONG. */
static int sv_sysfs_path(const char *path, char *buf, size_t size)
{
	if (!have_device || !view_root[0])
		return 0;
	return sv_view_map(view_root, path, buf, size);
}

/* A sysfs file's contents as rdma-core returns them: the length read, the
 * trailing newline replaced by NUL; -1 when the file cannot be read or
 * fills buf with no room left to terminate it. The device view's files are
 * read where the daemon wrote them, with or without the preload library. */
static int read_sysfs_at(int dirfd, const char *file, char *buf, size_t size)
{
	char mapped[IBV_SYSFS_PATH_MAX * 2 + 256];
	ssize_t n;
	int fd;

	if (sv_sysfs_path(file, mapped, sizeof(mapped)) > 0)
		file = mapped;
	fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, size);
	close(fd);
	if (n < 0)
		return -1;
	if (n > 0) {
		if (buf[n - 1] == '\n')
			buf[--n] = 0;
		else if ((size_t)n < size)
			buf[n] = 0;
		else
			return -1;
	}
	return (int)n;
}

SV_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
				  size_t size)
{
	char path[IBV_SYSFS_PATH_MAX * 2];

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return read_sysfs_at(AT_FDCWD, path, buf, size);
}

/* rdma-core's helper for providers: a file under the device's sysfs
 * directory, named by a format. */
SV_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size,
					struct verbs_sysfs_dev *sysfs_dev,
					const char *fnfmt, ...)
{
	char rel[IBV_SYSFS_PATH_MAX];
	va_list ap;
	int n;

	if (!sysfs_dev || !fnfmt) {
		errno = EINVAL;
		return -1;
	}
	va_start(ap, fnfmt);
	n = vsnprintf(rel, sizeof(rel), fnfmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(rel)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return ibv_read_sysfs_file(sysfs_dev->ibdev_path, rel, buf, size);
}

SV_EXPORT int ibv_fork_init(void)
{
	return 0; /* nothing is pinned: fork is always safe */
}

SV_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

SV_EXPORT int ibv_dontfork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}

SV_EXPORT int ibv_dofork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}
