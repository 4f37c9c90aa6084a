// SPDX-License-Identifier: MIT
/*
 * The stat family of the preload library: the path mapped as in
 * preload.c, and the view's /dev/infiniband/uverbsN (a plain file there,
 * since mknod needs privileges) reported as the character device the
 * kernel would show: major 231, minor 192 + N.
 */
#define _GNU_SOURCE
#include "preload/preload.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "abi/sv_ucma.h"
#include "abi/sv_view.h"

static void as_chardev(const char *path, struct stat *st)
{
	int n = svp_uverbs(path);

	if (svp_ucma_path(path) && S_ISREG(st->st_mode)) {
		svp_ucma_stat(st);
		return;
	}
	if (n < 0 || !S_ISREG(st->st_mode))
		return;
	st->st_mode = S_IFCHR | (st->st_mode & 07777);
	st->st_rdev = makedev(SV_UVERBS_MAJOR, SV_UVERBS_MINOR_BASE + (unsigned int)n);
	st->st_size = 0;
	st->st_blocks = 0;
}

#define STAT_BODY(call, st)                                                   \
	char buf[SVP_PATH_MAX];                                               \
	const char *q = svp_map(path, buf);                                   \
	int ret;                                                              \
	if (!q && !svp_null(path))                                                       \
		return -1;                                                    \
	ret = call;                                                           \
	if (!ret && q != path)                                                \
		as_chardev(path, (struct stat *)(st));                        \
	return ret

/* struct stat and struct stat64 are one layout on x86_64 and aarch64 */
_Static_assert(sizeof(struct stat) == sizeof(struct stat64), "stat64");

SVP_EXPORT int stat(const char *path, struct stat *st)
{
	SVP_REAL(stat);
	STAT_BODY(real_stat(q, st), st);
}

SVP_EXPORT int stat64(const char *path, struct stat64 *st)
{
	SVP_REAL(stat64);
	STAT_BODY(real_stat64(q, st), st);
}

SVP_EXPORT int lstat(const char *path, struct stat *st)
{
	SVP_REAL(lstat);
	STAT_BODY(real_lstat(q, st), st);
}

SVP_EXPORT int lstat64(const char *path, struct stat64 *st)
{
	SVP_REAL(lstat64);
	STAT_BODY(real_lstat64(q, st), st);
}

SVP_EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	SVP_REAL(fstatat);
	char buf[SVP_PATH_MAX];
	const char *q = svp_map(path, buf);
	int ret;

	if (!q && !svp_null(path))
		return -1;
	ret = real_fstatat(dirfd, q, st, flags);
	if (!ret && q != path)
		as_chardev(path, st);
	else if (!ret && (flags & AT_EMPTY_PATH) && q && !*q && svp_is_ucma(dirfd))
		svp_ucma_stat(st);
	else if (!ret && (flags & AT_EMPTY_PATH) && q && !*q)
		svp_uverbs_fstat(st);
	return ret;
}

SVP_EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st,
			 int flags)
{
	SVP_REAL(fstatat64);
	STAT_BODY(real_fstatat64(dirfd, q, st, flags), st);
}

/* A descriptor of /dev/infiniband/rdma_cm is an eventfd: fstat says
 * what the kernel's character device would (librdmacm checks S_ISCHR). */
SVP_EXPORT int fstat(int fd, struct stat *st)
{
	SVP_REAL(fstat);
	int ret = real_fstat(fd, st);

	if (!ret && svp_is_ucma(fd))
		svp_ucma_stat(st);
	else if (!ret)
		svp_uverbs_fstat(st);
	return ret;
}

SVP_EXPORT int fstat64(int fd, struct stat64 *st)
{
	SVP_REAL(fstat64);
	int ret = real_fstat64(fd, st);

	if (!ret && svp_is_ucma(fd))
		svp_ucma_stat((struct stat *)st);
	else if (!ret)
		svp_uverbs_fstat((struct stat *)st);
	return ret;
}

/* glibc before 2.33 compiled stat() into calls of these. */
typedef int (*xstat_fn)(int, const char *, struct stat *);
typedef int (*fxstatat_fn)(int, int, const char *, struct stat *, int);
int __xstat(int ver, const char *path, struct stat *st);
int __xstat64(int ver, const char *path, struct stat *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __lxstat64(int ver, const char *path, struct stat *st);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat *st,
		 int flags);

#define SVP_GLIBC_OLD "GLIBC_2.2.5"

#define XSTAT(name)                                                           \
	SVP_EXPORT int name(int ver, const char *path, struct stat *st)       \
	{                                                                     \
		SVP_REAL_V(xstat_fn, name, SVP_GLIBC_OLD);                    \
		if (!real_##name) {                                           \
			errno = ENOSYS;                                       \
			return -1;                                            \
		}                                                             \
		STAT_BODY(real_##name(ver, q, st), st);                       \
	}
XSTAT(__xstat)
XSTAT(__xstat64)
XSTAT(__lxstat)
XSTAT(__lxstat64)

#define FXSTATAT(name)                                                        \
	SVP_EXPORT int name(int ver, int dirfd, const char *path,             \
			    struct stat *st, int flags)                       \
	{                                                                     \
		SVP_REAL_V(fxstatat_fn, name, SVP_GLIBC_OLD);                 \
		if (!real_##name) {                                           \
			errno = ENOSYS;                                       \
			return -1;                                            \
		}                                                             \
		STAT_BODY(real_##name(ver, dirfd, q, st, flags), st);         \
	}
FXSTATAT(__fxstatat)
FXSTATAT(__fxstatat64)

SVP_EXPORT int statx(int dirfd, const char *path, int flags, unsigned int mask,
		     struct statx *stx)
{
	SVP_REAL(statx);
	char buf[SVP_PATH_MAX];
	const char *q = svp_map(path, buf);
	int ret, n;

	if (!q && !svp_null(path))
		return -1;
	ret = real_statx(dirfd, q, flags, mask, stx);
	if (!ret && (flags & AT_EMPTY_PATH) && q && !*q && svp_is_ucma(dirfd)) {
		stx->stx_mode = (uint16_t)(S_IFCHR | 0666);
		stx->stx_rdev_major = SV_UCMA_MAJOR;
		stx->stx_rdev_minor = SV_UCMA_MINOR;
		stx->stx_size = 0;
		stx->stx_blocks = 0;
		return ret;
	}
	if (!ret && (flags & AT_EMPTY_PATH) && q && !*q && S_ISREG(stx->stx_mode)) {
		/* a descriptor of the view's uverbs file */
		struct stat st = { .st_mode = stx->stx_mode, .st_ino = stx->stx_ino,
				   .st_dev = makedev(stx->stx_dev_major,
						     stx->stx_dev_minor) };

		svp_uverbs_fstat(&st);
		if (S_ISCHR(st.st_mode)) {
			stx->stx_mode = (uint16_t)st.st_mode;
			stx->stx_rdev_major = major(st.st_rdev);
			stx->stx_rdev_minor = minor(st.st_rdev);
			stx->stx_size = 0;
			stx->stx_blocks = 0;
		}
		return ret;
	}
	if (ret || q == path || !S_ISREG(stx->stx_mode))
		return ret;
	if (svp_ucma_path(path)) {
		stx->stx_mode = (uint16_t)(S_IFCHR | (stx->stx_mode & 07777));
		stx->stx_rdev_major = SV_UCMA_MAJOR;
		stx->stx_rdev_minor = SV_UCMA_MINOR;
		stx->stx_size = 0;
		stx->stx_blocks = 0;
		return ret;
	}
	if ((n = svp_uverbs(path)) < 0)
		return ret;
	stx->stx_mode = (uint16_t)(S_IFCHR | (stx->stx_mode & 07777));
	stx->stx_rdev_major = SV_UVERBS_MAJOR;
	stx->stx_rdev_minor = SV_UVERBS_MINOR_BASE + (unsigned int)n;
	stx->stx_size = 0;
	stx->stx_blocks = 0;
	return ret;
}
