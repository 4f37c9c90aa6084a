/* SPDX-License-Identifier: MIT */
/*
 * libsoftverbs_preload.so: shows the daemon's device view (abi/sv_view.h)
 * at the kernel's paths, for programs that look for an RDMA device in
 * /dev/infiniband and /sys/class/infiniband* rather than through
 * libibverbs. Shared between its two files.
 */
#ifndef SV_PRELOAD_H
#define SV_PRELOAD_H

#undef _FORTIFY_SOURCE
#include <dlfcn.h>
#include <limits.h>

#define SVP_EXPORT __attribute__((visibility("default")))

/* Room for the view's root and a path of PATH_MAX. */
#define SVP_PATH_MAX (PATH_MAX + 320)

/* The next definition of a libc function (libc's own, or a sanitizer's
 * before us), looked up once. */
#define SVP_REAL(name)                                                        \
	static __typeof__(name) *real_##name;                                 \
	if (__builtin_expect(!real_##name, 0))                                \
		real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

/* Entry points that only old binaries call: libc keeps them as
 * compatibility symbols of one version. */
#define SVP_REAL_V(type, name, ver)                                           \
	static type real_##name;                                              \
	if (__builtin_expect(!real_##name, 0))                                \
		real_##name = (type)dlvsym(RTLD_NEXT, #name, ver)

/* Is p NULL? libc's headers declare paths nonnull, and the compiler would
 * drop the test; a NULL path must still reach libc, which answers as the
 * program expects (EFAULT, or its own crash). */
static inline int svp_null(const void *p)
{
	__asm__("" : "+r"(p));
	return !p;
}

/* Where a program's path p lies: p itself, or buf (SVP_PATH_MAX bytes)
 * holding its place in the device view. NULL with errno set when the view
 * path would be too long. p may be NULL (returned as is: libc decides). */
const char *svp_map(const char *p, char *buf);

/* p as the view reads it: p, or its lexical form in buf (SVP_PATH_MAX
 * bytes) where it has "//", "." or ".." components. */
const char *svp_canon(const char *p, char *buf);

/* N when p, a program's path, is the view's /dev/infiniband/uverbsN. */
int svp_uverbs(const char *p);

/* fstat's answer for a descriptor of the view's uverbs file: a character
 * device, as the kernel's (st untouched for any other file). */
struct stat;
void svp_uverbs_fstat(struct stat *st);

/* The control socket's path, once the view is on: 0, else -1. */
int svp_sock_path(char *buf, size_t len);

/* preload_fdtab.c: a table of our descriptors' entries, by fd, each entry
 * counted (every slot naming it, every call using it) */
#include <pthread.h>
#include <stdbool.h>
#define SVP_MAX_FD 65536
struct svp_fdent {
	unsigned int refs;         /* under the table's lock */
};
struct svp_fdtab {
	void **tab;                /* NULL until the first entry */
	pthread_mutex_t lock;
};
#define SVP_FDTAB_INIT { NULL, PTHREAD_MUTEX_INITIALIZER }
void *svp_fd_peek(struct svp_fdtab *t, int fd);    /* fd's entry, or NULL */
bool svp_fd_ready(struct svp_fdtab *t);            /* mapped: it can hold one */
void svp_fd_set(struct svp_fdtab *t, int fd, struct svp_fdent *e); /* refs 1 */
struct svp_fdent *svp_fd_get(struct svp_fdtab *t, int fd); /* a reference */
bool svp_fd_put(struct svp_fdtab *t, struct svp_fdent *e); /* true: the last */
void svp_fd_dup(struct svp_fdtab *t, int fd, int newfd);   /* newfd names it */
/* fd names nothing now: its entry when that was the last reference (the
 * caller frees it), else NULL */
struct svp_fdent *svp_fd_clear(struct svp_fdtab *t, int fd);

/* preload_ucma.c: /dev/infiniband/rdma_cm (docs/DESIGN.md, "rdma_cm") */
#include <sys/stat.h>
#include <sys/types.h>
bool svp_ucma_path(const char *p);        /* p names /dev/infiniband/rdma_cm */
bool svp_is_ucma(int fd);
int svp_ucma_open(int flags);              /* the new fd, or -1 and errno */
ssize_t svp_ucma_write(int fd, const void *buf, size_t len);
void svp_ucma_close(int fd);               /* forget fd's command socket */
void svp_ucma_dup(int fd, int newfd);      /* newfd names fd's file too */
void svp_ucma_stat(struct stat *st);       /* what fstat says of it */

/* preload_nl.c: NETLINK_RDMA sockets (docs/DESIGN.md, "RDMA netlink") */
#include <sys/socket.h>
int svp_nl_socket(int type);               /* the new fd, or -1 and errno */
bool svp_is_nl(int fd);
void svp_nl_close(int fd);
void svp_nl_dup(int fd, int newfd);
int svp_nl_bind(int fd, const struct sockaddr *addr, socklen_t len);
int svp_nl_connect(int fd, const struct sockaddr *addr, socklen_t len);
int svp_nl_getsockname(int fd, struct sockaddr *addr, socklen_t *len);
int svp_nl_getpeername(int fd, struct sockaddr *addr, socklen_t *len);
int svp_nl_setsockopt(int fd, int level, int name, const void *val,
		      socklen_t len);
int svp_nl_getsockopt(int fd, int level, int name, void *val, socklen_t *len);
ssize_t svp_nl_sendmsg(int fd, const struct msghdr *msg, int flags);
ssize_t svp_nl_send(int fd, const void *buf, size_t len, int flags,
		    const struct sockaddr *to, socklen_t tolen);
ssize_t svp_nl_recvmsg(int fd, struct msghdr *msg, int flags);
ssize_t svp_nl_recvfrom(int fd, void *buf, size_t len, int flags,
			struct sockaddr *from, socklen_t *fromlen);

#endif
