// SPDX-License-Identifier: MIT
/*
 * libsoftverbs_preload.so: the device view (docs/DESIGN.md, "The device
 * view") at /dev/infiniband, /sys/class/infiniband, /sys/class/infiniband_verbs
 * and /sys/class/infiniband_mad. Every libc entry a program names a path
 * with is wrapped here (stat and its kin in preload_stat.c): a path under
 * those prefixes is redirected into the tree the daemon writes beside its
 * socket; every other path goes to libc untouched, errno and all. glibc's
 * calls to itself are not interposable, so each entry (fopen, opendir,
 * scandir, realpath ...) is wrapped on its own.
 *
 * The first redirected path connects to the daemon (starting one, as the
 * library does) and keeps that probe connection for the life of the
 * process: the daemon and its view stay while the program runs, and the
 * counter files are rendered from the daemon's live counters at each open.
 * No daemon and none to start: nothing is redirected.
 */
#define _GNU_SOURCE
#include "preload/preload.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/netlink.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/socket.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "abi/sv_cmd.h"
#include "abi/sv_sock.h"
#include "abi/sv_spawn.h"
#include "abi/sv_view.h"

static struct {
	pthread_mutex_t lock;
	int state;                   /* 0: not yet looked, 1: on, -1: off */
	int fd;                      /* the probe connection, held */
	uint32_t seq;
	uint32_t uverbs;
	char dev[SV_DEV_NAME_MAX];
	char root[300];
	char sock[108];
} v = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

/* The daemon itself sees the real files (it inherits LD_PRELOAD from the
 * program that started it). */
static bool is_daemon(void)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	const char *base;

	if (n <= 0)
		return false;
	exe[n] = 0;
	base = strrchr(exe, '/');
	return !strcmp(base ? base + 1 : exe, "softverbsd");
}

static int greet(int fd, void *arg)
{
	struct sv_rsp_hello *out = arg;
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret, status;

	sv_cmd_init(&cmd, SV_CMD_HELLO);
	cmd.hdr.seq = ++v.seq;
	cmd.u.hello.abi = SV_PROTO_VERSION;
	cmd.u.hello.flags = SV_HELLO_PROBE;
	ret = sv_call(fd, &cmd, -1, &rsp, &status, NULL, false);
	if (ret)
		return ret;
	if (!status)
		*out = rsp.u.hello;
	return status;
}

/* Is the view on? The first call finds (or starts) the daemon. */
static bool view_on(void)
{
	const char *env;
	struct sv_rsp_hello h;
	char sock[108];
	int fd;

	if (__atomic_load_n(&v.state, __ATOMIC_ACQUIRE))
		return v.state > 0;
	pthread_mutex_lock(&v.lock);
	if (v.state) {
		pthread_mutex_unlock(&v.lock);
		return v.state > 0;
	}
	env = getenv("SOFTVERBS_VIEW");
	fd = -1;
	if (!(env && !strcmp(env, "0")) && !is_daemon() &&
	    !sv_sock_path(sock, sizeof(sock)) &&
	    !sv_view_root(sock, v.root, sizeof(v.root)))
		fd = sv_daemon_open(sock, sv_autostart_allowed(), greet, &h);
	if (fd >= 0) {
		v.fd = fd;
		v.uverbs = h.uverbs;
		memcpy(v.dev, h.dev_name, sizeof(v.dev));
		v.dev[sizeof(v.dev) - 1] = 0;
		memcpy(v.sock, sock, sizeof(v.sock));
	}
	__atomic_store_n(&v.state, fd >= 0 ? 1 : -1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&v.lock);
	return fd >= 0;
}

static bool ours(const char *p)
{
	return !strncmp(p, "/sys/class/infiniband", 21) ||
	       !strncmp(p, "/dev/infiniband", 15) ||
	       !strncmp(p, "/sys/class/misc/rdma_cm", 23);
}

const char *svp_canon(const char *p, char *buf)
{
	if (svp_null(p) || p[0] != '/' || ours(p) ||
	    (!strstr(p, "//") && !strstr(p, "/.")) || strlen(p) >= SVP_PATH_MAX ||
	    sv_view_normalize(p, buf, SVP_PATH_MAX))
		return p;
	return buf;
}

const char *svp_map(const char *p, char *buf)
{
	char norm[SVP_PATH_MAX];
	int ret;

	/* cheap test first: most paths are not ours */
	if (svp_null(p) || p[0] != '/')
		return p;
	if (!ours(p)) {
		/* "//sys/...", "/dev/./infiniband", "/sys/class/x/../infiniband":
		 * ours once read lexically */
		if (!strstr(p, "//") && !strstr(p, "/."))
			return p;
		if (strlen(p) >= sizeof(norm) ||
		    sv_view_normalize(p, norm, sizeof(norm)) || !ours(norm))
			return p;
		if (!view_on())
			return p;
		ret = sv_view_map(v.root, norm, buf, SVP_PATH_MAX);
		if (ret < 0) {
			errno = -ret;
			return NULL;
		}
		return ret ? buf : p;
	}
	if (!view_on())
		return p;
	ret = sv_view_map(v.root, p, buf, SVP_PATH_MAX);
	if (ret < 0) {
		errno = -ret;
		return NULL;
	}
	return ret ? buf : p;
}

int svp_sock_path(char *buf, size_t len)
{
	if (!view_on() || strlen(v.sock) >= len)
		return -1;
	memcpy(buf, v.sock, strlen(v.sock) + 1);
	return 0;
}

int svp_uverbs(const char *p)
{
	char cb[SVP_PATH_MAX];
	int n = sv_view_uverbs(svp_canon(p, cb));

	return n >= 0 && view_on() && (uint32_t)n == v.uverbs ? n : -1;
}

/* A descriptor of the view's /dev/infiniband/uverbsN (a plain file there):
 * its stat made the character device's, as stat() of its path is. Only
 * once the view is on (fstat never starts a daemon); the file's identity
 * is looked up once. */
void svp_uverbs_fstat(struct stat *st)
{
	static dev_t dev;
	static ino_t ino;
	static int looked;         /* 0 not yet, 1 found, -1 none */
	char path[SVP_PATH_MAX], rel[64];
	struct stat us;
	SVP_REAL(stat);

	if (!S_ISREG(st->st_mode) || __atomic_load_n(&v.state, __ATOMIC_ACQUIRE) <= 0)
		return;
	if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
		snprintf(rel, sizeof(rel), "/dev/infiniband/uverbs%u", v.uverbs);
		if (sv_view_map(v.root, rel, path, sizeof(path)) == 1 &&
		    !real_stat(path, &us)) {
			dev = us.st_dev;
			ino = us.st_ino;
			__atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
		} else {
			__atomic_store_n(&looked, -1, __ATOMIC_RELEASE);
		}
	}
	if (__atomic_load_n(&looked, __ATOMIC_ACQUIRE) != 1 ||
	    st->st_dev != dev || st->st_ino != ino)
		return;
	st->st_mode = S_IFCHR | (st->st_mode & 07777);
	st->st_rdev = makedev(SV_UVERBS_MAJOR, SV_UVERBS_MINOR_BASE + v.uverbs);
	st->st_size = 0;
	st->st_blocks = 0;
}

/* A counter file of our device opened for reading: a memfd holding the
 * daemon's value now; -1 to open the file instead. */
static int counter_fd(const char *p, int flags)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	char text[32];
	int i, ret, status, fd, n;

	if ((flags & O_ACCMODE) != O_RDONLY || svp_null(p) || !view_on())
		return -1;
	{
		char cb[SVP_PATH_MAX];

		i = sv_view_counter_of(svp_canon(p, cb), v.dev);
	}
	if (i < 0)
		return -1;
	pthread_mutex_lock(&v.lock);
	sv_cmd_init(&cmd, SV_CMD_STAT_WIRE);
	cmd.hdr.seq = ++v.seq;
	ret = sv_call(v.fd, &cmd, -1, &rsp, &status, NULL, false);
	pthread_mutex_unlock(&v.lock);
	if (ret || status)
		return -1;
	n = snprintf(text, sizeof(text), "%llu\n", (unsigned long long)
		     sv_view_counter_value((unsigned int)i, &rsp.u.stat_wire));
	fd = memfd_create("softverbs-counter", flags & O_CLOEXEC ? MFD_CLOEXEC : 0);
	if (fd < 0)
		return -1;
	if (write(fd, text, (size_t)n) != n || lseek(fd, 0, SEEK_SET)) {
		close(fd);
		return -1;
	}
	return fd;
}

static bool wants_mode(int flags)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

#define MODE_ARG(flags, mode)                                                 \
	do {                                                                  \
		if (wants_mode(flags)) {                                      \
			va_list ap;                                           \
			va_start(ap, flags);                                  \
			mode = va_arg(ap, mode_t);                            \
			va_end(ap);                                           \
		}                                                             \
	} while (0)

/* The open family: (dirfd, path) mapped, a counter rendered, else libc. */
#define OPEN_BODY(call)                                                       \
	char buf[SVP_PATH_MAX];                                               \
	const char *q = svp_map(path, buf);                                   \
	int cfd;                                                              \
	if (!q && !svp_null(path))                                                       \
		return -1;                                                    \
	if (q != path && svp_ucma_path(path))                                 \
		return svp_ucma_open(flags);                                  \
	if (q != path && (cfd = counter_fd(path, flags)) >= 0)                \
		return cfd;                                                   \
	return call

SVP_EXPORT int open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	SVP_REAL(open);

	MODE_ARG(flags, mode);
	OPEN_BODY(real_open(q, flags, mode));
}

SVP_EXPORT int open64(const char *path, int flags, ...)
{
	mode_t mode = 0;
	SVP_REAL(open64);

	MODE_ARG(flags, mode);
	OPEN_BODY(real_open64(q, flags, mode));
}

SVP_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	SVP_REAL(openat);

	MODE_ARG(flags, mode);
	OPEN_BODY(real_openat(dirfd, q, flags, mode));
}

SVP_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	SVP_REAL(openat64);

	MODE_ARG(flags, mode);
	OPEN_BODY(real_openat64(dirfd, q, flags, mode));
}

/* _FORTIFY_SOURCE's forms: no mode (O_CREAT without one is their error,
 * which libc's own reports). */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

SVP_EXPORT int __open_2(const char *path, int flags)
{
	SVP_REAL(__open_2);
	OPEN_BODY(real___open_2(q, flags));
}

SVP_EXPORT int __open64_2(const char *path, int flags)
{
	SVP_REAL(__open64_2);
	OPEN_BODY(real___open64_2(q, flags));
}

SVP_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	SVP_REAL(__openat_2);
	OPEN_BODY(real___openat_2(dirfd, q, flags));
}

SVP_EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	SVP_REAL(__openat64_2);
	OPEN_BODY(real___openat64_2(dirfd, q, flags));
}

/* The rest of the path calls: the path mapped (a mapping too long for the
 * buffer is -1 with errno set), else libc's answer for the path as given. */
#define PATH_CALL(call)                                                       \
	char buf[SVP_PATH_MAX];                                               \
	const char *q = svp_map(path, buf);                                   \
	return !q && !svp_null(path) ? -1 : call

SVP_EXPORT int creat(const char *path, mode_t mode)
{
	SVP_REAL(creat);
	PATH_CALL(real_creat(q, mode));
}

SVP_EXPORT int creat64(const char *path, mode_t mode)
{
	SVP_REAL(creat64);
	PATH_CALL(real_creat64(q, mode));
}

/* fopen's read-only modes ("r", "rb", "re" ...) of a counter: the memfd. */
static FILE *counter_file(const char *path, const char *mode)
{
	int fd;
	FILE *f;

	if (!mode || mode[0] != 'r' || strchr(mode, '+'))
		return NULL;
	fd = counter_fd(path, O_RDONLY | (strchr(mode, 'e') ? O_CLOEXEC : 0));
	if (fd < 0)
		return NULL;
	f = fdopen(fd, mode);
	if (!f)
		close(fd);
	return f;
}

#define FOPEN_BODY(real)                                                      \
	char buf[SVP_PATH_MAX];                                               \
	const char *q = svp_map(path, buf);                                   \
	FILE *f;                                                              \
	if (!q && !svp_null(path))                                                       \
		return NULL;                                                  \
	if (q != path && (f = counter_file(path, mode)))                      \
		return f;                                                     \
	return real(q, mode)

SVP_EXPORT FILE *fopen(const char *path, const char *mode)
{
	SVP_REAL(fopen);
	FOPEN_BODY(real_fopen);
}

SVP_EXPORT FILE *fopen64(const char *path, const char *mode)
{
	SVP_REAL(fopen64);
	FOPEN_BODY(real_fopen64);
}

SVP_EXPORT FILE *freopen(const char *path, const char *mode, FILE *stream)
{
	SVP_REAL(freopen);
	char buf[SVP_PATH_MAX];
	const char *q = svp_map(path, buf);

	return !q && !svp_null(path) ? NULL : real_freopen(q, mode, stream);
}

SVP_EXPORT int access(const char *path, int how)
{
	SVP_REAL(access);
	PATH_CALL(real_access(q, how));
}

SVP_EXPORT int faccessat(int dirfd, const char *path, int how, int flags)
{
	SVP_REAL(faccessat);
	PATH_CALL(real_faccessat(dirfd, q, how, flags));
}

SVP_EXPORT int euidaccess(const char *path, int how)
{
	SVP_REAL(euidaccess);
	PATH_CALL(real_euidaccess(q, how));
}

SVP_EXPORT int eaccess(const char *path, int how)
{
	SVP_REAL(eaccess);
	PATH_CALL(real_eaccess(q, how));
}

SVP_EXPORT DIR *opendir(const char *path)
{
	SVP_REAL(opendir);
	char buf[SVP_PATH_MAX];
	const char *q = svp_map(path, buf);

	return !q && !svp_null(path) ? NULL : real_opendir(q);
}

SVP_EXPORT int chdir(const char *path)
{
	SVP_REAL(chdir);
	PATH_CALL(real_chdir(q));
}

SVP_EXPORT int scandir(const char *path, struct dirent ***list,
		       int (*sel)(const struct dirent *),
		       int (*cmp)(const struct dirent **, const struct dirent **))
{
	SVP_REAL(scandir);
	PATH_CALL(real_scandir(q, list, sel, cmp));
}

SVP_EXPORT int scandir64(const char *path, struct dirent64 ***list,
			 int (*sel)(const struct dirent64 *),
			 int (*cmp)(const struct dirent64 **,
				    const struct dirent64 **))
{
	SVP_REAL(scandir64);
	PATH_CALL(real_scandir64(q, list, sel, cmp));
}

SVP_EXPORT ssize_t readlink(const char *path, char *out, size_t len)
{
	SVP_REAL(readlink);
	PATH_CALL(real_readlink(q, out, len));
}

SVP_EXPORT ssize_t readlinkat(int dirfd, const char *path, char *out, size_t len)
{
	SVP_REAL(readlinkat);
	PATH_CALL(real_readlinkat(dirfd, q, out, len));
}

ssize_t __readlink_chk(const char *path, char *out, size_t len, size_t outlen);
ssize_t __readlinkat_chk(int dirfd, const char *path, char *out, size_t len,
			 size_t outlen);

SVP_EXPORT ssize_t __readlink_chk(const char *path, char *out, size_t len,
				  size_t outlen)
{
	SVP_REAL(__readlink_chk);
	PATH_CALL(real___readlink_chk(q, out, len, outlen));
}

SVP_EXPORT ssize_t __readlinkat_chk(int dirfd, const char *path, char *out,
				    size_t len, size_t outlen)
{
	SVP_REAL(__readlinkat_chk);
	PATH_CALL(real___readlinkat_chk(dirfd, q, out, len, outlen));
}

/* realpath and its kin answer with the view's real place: every later
 * use of that name reaches the same files, with or without us. */
SVP_EXPORT char *realpath(const char *path, char *out)
{
	SVP_REAL(realpath);
	char buf[SVP_PATH_MAX];
	const char *q = svp_map(path, buf);

	return !q && !svp_null(path) ? NULL : real_realpath(q, out);
}

char *__realpath_chk(const char *path, char *out, size_t outlen);

SVP_EXPORT char *__realpath_chk(const char *path, char *out, size_t outlen)
{
	SVP_REAL(__realpath_chk);
	char buf[SVP_PATH_MAX];
	const char *q = svp_map(path, buf);

	return !q && !svp_null(path) ? NULL : real___realpath_chk(q, out, outlen);
}

SVP_EXPORT char *canonicalize_file_name(const char *path)
{
	SVP_REAL(canonicalize_file_name);
	char buf[SVP_PATH_MAX];
	const char *q = svp_map(path, buf);

	return !q && !svp_null(path) ? NULL : real_canonicalize_file_name(q);
}

/* ls -l asks for ACLs and security labels by path. */
#define XATTR_GET(name)                                                       \
	SVP_EXPORT ssize_t name(const char *path, const char *key, void *val, \
				size_t len)                                   \
	{                                                                     \
		SVP_REAL(name);                                               \
		char buf[SVP_PATH_MAX];                                       \
		const char *q = svp_map(path, buf);                           \
		return !q && !svp_null(path) ? -1 : real_##name(q, key, val, len);      \
	}
XATTR_GET(getxattr)
XATTR_GET(lgetxattr)

#define XATTR_LIST(name)                                                      \
	SVP_EXPORT ssize_t name(const char *path, char *list, size_t len)     \
	{                                                                     \
		SVP_REAL(name);                                               \
		char buf[SVP_PATH_MAX];                                       \
		const char *q = svp_map(path, buf);                           \
		return !q && !svp_null(path) ? -1 : real_##name(q, list, len);          \
	}
XATTR_LIST(listxattr)
XATTR_LIST(llistxattr)

/* The rdma_cm files: write() is a command, close() ends the file. A
 * NETLINK_RDMA socket: write() is a send. Any other descriptor: libc, after
 * one table check each. */
SVP_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	SVP_REAL(write);

	if (__builtin_expect(svp_is_nl(fd), 0))
		return svp_nl_send(fd, buf, len, 0, NULL, 0);
	if (__builtin_expect(!svp_is_ucma(fd), 1))
		return real_write(fd, buf, len);
	return svp_ucma_write(fd, buf, len);
}

/* The rdma_cm file has no read (the kernel's ucma says EINVAL); a
 * NETLINK_RDMA socket reads as itself. */
SVP_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	SVP_REAL(read);

	if (__builtin_expect(svp_is_ucma(fd), 0)) {
		errno = EINVAL;
		return -1;
	}
	return real_read(fd, buf, len);
}

ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen);
SVP_EXPORT ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	SVP_REAL(__read_chk);

	if (__builtin_expect(svp_is_ucma(fd), 0)) {
		if (len > buflen)
			abort();   /* what glibc's check does */
		errno = EINVAL;
		return -1;
	}
	return real___read_chk(fd, buf, len, buflen);
}

/* A duplicate of an rdma_cm or NETLINK_RDMA descriptor names the same
 * file; one that replaces such a descriptor (dup2, dup3) closes it first,
 * as the kernel does. */
static int duped(int fd, int newfd)
{
	if (newfd >= 0 && newfd != fd) {
		svp_ucma_dup(fd, newfd);
		svp_nl_dup(fd, newfd);
	}
	return newfd;
}

static void replaced(int oldfd, int newfd)
{
	if (newfd == oldfd)
		return;
	if (__builtin_expect(svp_is_ucma(newfd), 0))
		svp_ucma_close(newfd);
	if (__builtin_expect(svp_is_nl(newfd), 0))
		svp_nl_close(newfd);
}

SVP_EXPORT int dup(int fd)
{
	SVP_REAL(dup);

	return duped(fd, real_dup(fd));
}

SVP_EXPORT int dup2(int fd, int newfd)
{
	SVP_REAL(dup2);
	int ret;

	ret = real_dup2(fd, newfd);
	if (ret >= 0) {
		replaced(fd, newfd);
		duped(fd, ret);
	}
	return ret;
}

SVP_EXPORT int dup3(int fd, int newfd, int flags)
{
	SVP_REAL(dup3);
	int ret;

	ret = real_dup3(fd, newfd, flags);
	if (ret >= 0) {
		replaced(fd, newfd);
		duped(fd, ret);
	}
	return ret;
}

#define FCNTL_BODY(real)                                                      	va_list ap;                                                           	void *arg;                                                            	int ret;                                                              	va_start(ap, cmd);                                                    	arg = va_arg(ap, void *);                                             	va_end(ap);                                                           	ret = real(fd, cmd, arg);                                             	if (ret >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))           		duped(fd, ret);                                               	return ret

SVP_EXPORT int fcntl(int fd, int cmd, ...)
{
	SVP_REAL(fcntl);
	FCNTL_BODY(real_fcntl);
}

int fcntl64(int fd, int cmd, ...);
SVP_EXPORT int fcntl64(int fd, int cmd, ...)
{
	SVP_REAL(fcntl64);
	if (!real_fcntl64) {
		SVP_REAL(fcntl);
		FCNTL_BODY(real_fcntl);
	}
	FCNTL_BODY(real_fcntl64);
}

SVP_EXPORT int close(int fd)
{
	SVP_REAL(close);

	if (__builtin_expect(svp_is_ucma(fd), 0))
		svp_ucma_close(fd);
	if (__builtin_expect(svp_is_nl(fd), 0))
		svp_nl_close(fd);
	return real_close(fd);
}

/* ---- NETLINK_RDMA (preload_nl.c) ---- */

SVP_EXPORT int socket(int domain, int type, int protocol)
{
	char sock[108];
	SVP_REAL(socket);

	if (__builtin_expect(domain == AF_NETLINK && protocol == NETLINK_RDMA, 0) &&
	    !svp_sock_path(sock, sizeof(sock)))
		return svp_nl_socket(type);
	return real_socket(domain, type, protocol);
}

SVP_EXPORT int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	SVP_REAL(bind);

	if (__builtin_expect(svp_is_nl(fd), 0))
		return svp_nl_bind(fd, addr, len);
	return real_bind(fd, addr, len);
}

SVP_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	SVP_REAL(connect);

	if (__builtin_expect(svp_is_nl(fd), 0))
		return svp_nl_connect(fd, addr, len);
	return real_connect(fd, addr, len);
}

SVP_EXPORT int getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	SVP_REAL(getsockname);

	if (__builtin_expect(svp_is_nl(fd), 0))
		return svp_nl_getsockname(fd, addr, len);
	return real_getsockname(fd, addr, len);
}

SVP_EXPORT int getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	SVP_REAL(getpeername);

	if (__builtin_expect(svp_is_nl(fd), 0))
		return svp_nl_getpeername(fd, addr, len);
	return real_getpeername(fd, addr, len);
}

SVP_EXPORT int setsockopt(int fd, int level, int name, const void *val,
			  socklen_t len)
{
	SVP_REAL(setsockopt);

	if (__builtin_expect(svp_is_nl(fd), 0))
		return svp_nl_setsockopt(fd, level, name, val, len);
	return real_setsockopt(fd, level, name, val, len);
}

SVP_EXPORT int getsockopt(int fd, int level, int name, void *val,
			  socklen_t *len)
{
	SVP_REAL(getsockopt);

	if (__builtin_expect(svp_is_nl(fd), 0))
		return svp_nl_getsockopt(fd, level, name, val, len);
	return real_getsockopt(fd, level, name, val, len);
}

SVP_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	SVP_REAL(send);

	if (__builtin_expect(svp_is_nl(fd), 0))
		return svp_nl_send(fd, buf, len, flags, NULL, 0);
	return real_send(fd, buf, len, flags);
}

SVP_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
			  const struct sockaddr *to, socklen_t tolen)
{
	SVP_REAL(sendto);

	if (__builtin_expect(svp_is_nl(fd), 0))
		return svp_nl_send(fd, buf, len, flags, to, tolen);
	return real_sendto(fd, buf, len, flags, to, tolen);
}

SVP_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	SVP_REAL(sendmsg);

	if (__builtin_expect(svp_is_nl(fd), 0))
		return svp_nl_sendmsg(fd, msg, flags);
	return real_sendmsg(fd, msg, flags);
}

SVP_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	SVP_REAL(recvmsg);

	if (__builtin_expect(svp_is_nl(fd), 0))
		return svp_nl_recvmsg(fd, msg, flags);
	return real_recvmsg(fd, msg, flags);
}

SVP_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags,
			    struct sockaddr *from, socklen_t *fromlen)
{
	SVP_REAL(recvfrom);

	if (__builtin_expect(svp_is_nl(fd), 0))
		return svp_nl_recvfrom(fd, buf, len, flags, from, fromlen);
	return real_recvfrom(fd, buf, len, flags, from, fromlen);
}

ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
		       struct sockaddr *from, socklen_t *fromlen);
SVP_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen,
				  int flags, struct sockaddr *from,
				  socklen_t *fromlen)
{
	SVP_REAL(__recvfrom_chk);

	if (__builtin_expect(svp_is_nl(fd), 0)) {
		if (len > buflen)
			abort();   /* what glibc's check does */
		return svp_nl_recvfrom(fd, buf, len, flags, from, fromlen);
	}
	return real___recvfrom_chk(fd, buf, len, buflen, flags, from, fromlen);
}
