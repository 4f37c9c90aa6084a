// SPDX-License-Identifier: MIT
/*
 * NETLINK_RDMA in user space (docs/DESIGN.md, "RDMA netlink"): the
 * preload's half. socket(AF_NETLINK, SOCK_RAW or SOCK_DGRAM, NETLINK_RDMA)
 * connects to the daemon's netlink socket and returns one end of a socket
 * pair whose other end the daemon writes the answers to (abi/sv_nl.h). The
 * calls a netlink program makes on it behave as on the kernel's socket:
 *  - bind, getsockname, getpeername and connect speak struct sockaddr_nl
 *    (the port id is the process's pid for its first socket, as the
 *    kernel's autobind gives, then -4096 downwards);
 *  - send, sendto, sendmsg and write hand the datagram to the daemon on the
 *    hidden request socket and return once it is answered, so the answer
 *    is queued when they return, as the kernel's;
 *  - recvmsg and recvfrom give the sender's address as the kernel's
 *    (AF_NETLINK, port 0); poll, epoll, select, read and recv work on the
 *    descriptor itself;
 *  - SOL_NETLINK options are kept here (CAP_ACK and EXT_ACK travel with each
 *    request); SO_DOMAIN, SO_TYPE and SO_PROTOCOL say netlink.
 * Every other descriptor costs these calls one table check.
 */
#define _GNU_SOURCE
#include "preload/preload.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/netlink.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "abi/sv_nl.h"
#include "abi/sv_sock.h"


#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

struct svp_nl {
	struct svp_fdent ent;      /* first: the table's count (dup) */
	int req;                   /* the hidden request socket */
	int type;                  /* SOCK_RAW or SOCK_DGRAM, as asked */
	uint32_t portid, groups;
	uint32_t flags;            /* SV_NL_F_* */
	int opt[16];               /* other SOL_NETLINK options, by number */
	pthread_mutex_t lock;      /* one request at a time */
};

static struct svp_fdtab tab = SVP_FDTAB_INIT;
static uint32_t rover = (uint32_t)-4096;

static struct svp_nl *nl_of(int fd)
{
	return svp_fd_peek(&tab, fd);
}

/* A port id no live socket of this process holds: the pid first. */
static uint32_t pick_portid(void)
{
	uint32_t pid = (uint32_t)getpid();
	bool taken = false;

	for (int fd = 0; fd < SVP_MAX_FD && !taken; fd++) {
		struct svp_nl *e = nl_of(fd);

		taken = e && e->portid == pid;
	}
	if (!taken)
		return pid;
	return __atomic_sub_fetch(&rover, 1, __ATOMIC_RELAXED);
}

static int cmd_timeout_ms(void)
{
	const char *s = getenv("SOFTVERBS_CMD_TIMEOUT");
	long v = s ? strtol(s, NULL, 10) : 0;

	return v > 0 && v < INT_MAX / 1000 ? (int)(v * 1000) : 60000;
}

int svp_nl_socket(int type)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct sv_nl_hello h = { SV_NL_MAGIC, SV_NL_VERSION };
	int pair[2] = { -1, -1 }, s = -1, fd = -1, kind = type & 0xf;
	char sock[108], path[300];
	struct svp_nl *e = NULL;

	if (kind != SOCK_RAW && kind != SOCK_DGRAM) {
		errno = ESOCKTNOSUPPORT;
		return -1;
	}
	if (svp_sock_path(sock, sizeof(sock)) ||
	    sv_sock_sibling(sock, SV_NL_SOCK_NAME, path, sizeof(path)) ||
	    strlen(path) >= sizeof(sa.sun_path) || !svp_fd_ready(&tab)) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) ||
	    sv_send_msg(s, &h, sizeof(h), pair[1], MSG_NOSIGNAL) ||
	    sv_recv_msg(s, &h, sizeof(h), &fd, 0) != sizeof(h) ||
	    h.magic != SV_NL_MAGIC || h.version != SV_NL_VERSION)
		goto nosupport;
	if (fd >= 0)
		close(fd);
	close(pair[1]);
	pair[1] = -1;
	fd = pair[0];
	if (fd >= SVP_MAX_FD) {
		errno = EMFILE;
		goto fail;
	}
	if ((!(type & SOCK_CLOEXEC) && fcntl(fd, F_SETFD, 0)) ||
	    ((type & SOCK_NONBLOCK) && fcntl(fd, F_SETFL, O_NONBLOCK)))
		goto fail;
	e = calloc(1, sizeof(*e));
	if (!e) {
		errno = ENOMEM;
		goto fail;
	}
	e->req = s;
	e->type = kind;
	pthread_mutex_init(&e->lock, NULL);
	e->portid = pick_portid();
	svp_fd_set(&tab, fd, &e->ent);
	return fd;
nosupport:
	errno = EPROTONOSUPPORT;
fail:
	if (pair[0] >= 0)
		close(pair[0]);
	if (pair[1] >= 0)
		close(pair[1]);
	if (s >= 0)
		close(s);
	return -1;
}

bool svp_is_nl(int fd)
{
	return nl_of(fd) != NULL;
}

/* newfd, a duplicate of fd (dup, dup2, fcntl F_DUPFD): the same socket */
void svp_nl_dup(int fd, int newfd)
{
	svp_fd_dup(&tab, fd, newfd);
}

void svp_nl_close(int fd)
{
	struct svp_nl *e = (struct svp_nl *)svp_fd_clear(&tab, fd);

	if (!e)                    /* not ours, or another descriptor's too */
		return;
	close(e->req);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

static void put_addr(struct sockaddr_nl *a, uint32_t pid, uint32_t groups)
{
	memset(a, 0, sizeof(*a));
	a->nl_family = AF_NETLINK;
	a->nl_pid = pid;
	a->nl_groups = groups;
}

/* Copy a struct sockaddr_nl out as the kernel's move_addr_to_user does:
 * truncated to *len, *len set to its full size. */
static void give_addr(void *addr, socklen_t *len, const struct sockaddr_nl *a)
{
	if (!addr || !len)
		return;
	memcpy(addr, a, *len < sizeof(*a) ? *len : sizeof(*a));
	*len = sizeof(*a);
}

int svp_nl_bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct svp_nl *e = nl_of(fd);
	struct sockaddr_nl a;

	if (!e) {
		errno = EBADF;
		return -1;
	}
	if (len < sizeof(a)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(&a, addr, sizeof(a));
	if (a.nl_family != AF_NETLINK) {
		errno = EINVAL;
		return -1;
	}
	/* multicast groups need CAP_NET_ADMIN for NETLINK_RDMA's notify
	 * group in the kernel too; a program that asks gets them recorded
	 * (no events are sent yet) */
	if (a.nl_pid && a.nl_pid != e->portid)
		e->portid = a.nl_pid;
	e->groups = a.nl_groups;
	return 0;
}

int svp_nl_getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct svp_nl *e = nl_of(fd);
	struct sockaddr_nl a;

	if (!e) {
		errno = EBADF;
		return -1;
	}
	put_addr(&a, e->portid, e->groups);
	give_addr(addr, len, &a);
	return 0;
}

int svp_nl_getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct sockaddr_nl a;

	if (!nl_of(fd)) {
		errno = EBADF;
		return -1;
	}
	put_addr(&a, 0, 0);
	give_addr(addr, len, &a);
	return 0;
}

int svp_nl_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct sockaddr_nl a;

	if (!nl_of(fd)) {
		errno = EBADF;
		return -1;
	}
	if (len < sizeof(sa_family_t)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(&a, addr, len < sizeof(a) ? len : sizeof(a));
	if (a.nl_family == AF_UNSPEC)
		return 0;
	if (a.nl_family != AF_NETLINK || len < sizeof(a)) {
		errno = EINVAL;
		return -1;
	}
	/* only the kernel (port 0) answers on NETLINK_RDMA */
	if (a.nl_pid || a.nl_groups) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

int svp_nl_setsockopt(int fd, int level, int name, const void *val,
		      socklen_t len)
{
	struct svp_nl *e = nl_of(fd);
	int v;

	if (!e) {
		errno = EBADF;
		return -1;
	}
	if (level != SOL_NETLINK) {
		SVP_REAL(setsockopt);
		return real_setsockopt(fd, level, name, val, len);
	}
	if (len < sizeof(int)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(&v, val, sizeof(v));
	switch (name) {
	case NETLINK_CAP_ACK:
		e->flags = v ? e->flags | SV_NL_F_CAP_ACK : e->flags & ~SV_NL_F_CAP_ACK;
		return 0;
	case NETLINK_EXT_ACK:
		e->flags = v ? e->flags | SV_NL_F_EXT_ACK : e->flags & ~SV_NL_F_EXT_ACK;
		return 0;
	case NETLINK_ADD_MEMBERSHIP:
		if (v > 0 && v <= 32)
			e->groups |= 1u << (v - 1);
		return 0;
	case NETLINK_DROP_MEMBERSHIP:
		if (v > 0 && v <= 32)
			e->groups &= ~(1u << (v - 1));
		return 0;
	case NETLINK_PKTINFO:
	case NETLINK_BROADCAST_ERROR:
	case NETLINK_NO_ENOBUFS:
	case NETLINK_LISTEN_ALL_NSID:
	case NETLINK_GET_STRICT_CHK:
		e->opt[name] = !!v;
		return 0;
	}
	errno = ENOPROTOOPT;
	return -1;
}

int svp_nl_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct svp_nl *e = nl_of(fd);
	int v;

	if (!e) {
		errno = EBADF;
		return -1;
	}
	if (level == SOL_SOCKET && (name == SO_DOMAIN || name == SO_TYPE ||
				    name == SO_PROTOCOL)) {
		v = name == SO_DOMAIN ? AF_NETLINK :
		    name == SO_TYPE ? e->type : NETLINK_RDMA;
	} else if (level != SOL_NETLINK) {
		SVP_REAL(getsockopt);
		return real_getsockopt(fd, level, name, val, len);
	} else {
		switch (name) {
		case NETLINK_CAP_ACK:
			v = !!(e->flags & SV_NL_F_CAP_ACK);
			break;
		case NETLINK_EXT_ACK:
			v = !!(e->flags & SV_NL_F_EXT_ACK);
			break;
		case NETLINK_PKTINFO:
		case NETLINK_BROADCAST_ERROR:
		case NETLINK_NO_ENOBUFS:
		case NETLINK_LISTEN_ALL_NSID:
		case NETLINK_GET_STRICT_CHK:
			v = e->opt[name];
			break;
		default:
			errno = ENOPROTOOPT;
			return -1;
		}
	}
	if (!len || *len < sizeof(int)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(val, &v, sizeof(v));
	*len = sizeof(v);
	return 0;
}

/* One datagram to the daemon, and its answer awaited. */
ssize_t svp_nl_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct svp_nl *e = nl_of(fd);
	struct sv_nl_req h = { .magic = SV_NL_MAGIC };
	struct iovec iov[UIO_MAXIOV];
	struct msghdr m = { .msg_iov = iov };
	struct sv_nl_done done;
	struct pollfd p;
	size_t total = 0;
	ssize_t n;
	int dfd = -1;

	(void)flags;
	if (!e) {
		errno = EBADF;
		return -1;
	}
	if (msg->msg_name && msg->msg_namelen) {
		struct sockaddr_nl a;

		if (msg->msg_namelen < sizeof(a)) {
			errno = EINVAL;
			return -1;
		}
		memcpy(&a, msg->msg_name, sizeof(a));
		if (a.nl_family != AF_NETLINK) {
			errno = EINVAL;
			return -1;
		}
		if (a.nl_pid || a.nl_groups) {
			errno = EPERM;
			return -1;
		}
	}
	if (msg->msg_iovlen > UIO_MAXIOV - 1) {
		errno = EMSGSIZE;
		return -1;
	}
	for (size_t i = 0; i < msg->msg_iovlen; i++) {
		iov[i + 1] = msg->msg_iov[i];
		total += msg->msg_iov[i].iov_len;
	}
	if (total > SV_NL_MAX_REQ) {
		errno = EMSGSIZE;
		return -1;
	}
	h.portid = e->portid;
	h.flags = e->flags;
	h.len = (uint32_t)total;
	iov[0].iov_base = &h;
	iov[0].iov_len = sizeof(h);
	m.msg_iovlen = msg->msg_iovlen + 1;
	pthread_mutex_lock(&e->lock);
	n = sendmsg(e->req, &m, MSG_NOSIGNAL);
	if (n < 0) {
		/* EFAULT for a bad buffer stays as the kernel says it */
		if (errno != EFAULT)
			errno = ECONNREFUSED;
		pthread_mutex_unlock(&e->lock);
		return -1;
	}
	p.fd = e->req;
	p.events = POLLIN;
	for (;;) {
		int r = poll(&p, 1, cmd_timeout_ms());

		if (r > 0)
			break;
		if (r < 0 && errno == EINTR)
			continue;
		pthread_mutex_unlock(&e->lock);
		errno = r ? errno : ETIMEDOUT;
		return -1;
	}
	n = sv_recv_msg(e->req, &done, sizeof(done), &dfd, 0);
	pthread_mutex_unlock(&e->lock);
	if (dfd >= 0)
		close(dfd);
	if (n != sizeof(done) || done.magic != SV_NL_MAGIC) {
		errno = ECONNREFUSED;
		return -1;
	}
	if (done.ret < 0) {
		errno = -done.ret;
		return -1;
	}
	return (ssize_t)total;
}

ssize_t svp_nl_send(int fd, const void *buf, size_t len, int flags,
		    const struct sockaddr *to, socklen_t tolen)
{
	struct iovec iov = { (void *)buf, len };
	struct msghdr m = { .msg_name = (void *)to, .msg_namelen = to ? tolen : 0,
			    .msg_iov = &iov, .msg_iovlen = 1 };

	return svp_nl_sendmsg(fd, &m, flags);
}

ssize_t svp_nl_recvmsg(int fd, struct msghdr *msg, int flags)
{
	void *name = msg->msg_name;
	socklen_t namelen = msg->msg_namelen;
	struct sockaddr_nl a;
	ssize_t n;
	SVP_REAL(recvmsg);

	msg->msg_name = NULL;
	msg->msg_namelen = 0;
	n = real_recvmsg(fd, msg, flags);
	msg->msg_name = name;
	msg->msg_namelen = namelen;
	if (n < 0)
		return n;
	msg->msg_controllen = 0;
	if (name) {
		put_addr(&a, 0, 0);
		give_addr(name, &msg->msg_namelen, &a);
	}
	return n;
}

ssize_t svp_nl_recvfrom(int fd, void *buf, size_t len, int flags,
			struct sockaddr *from, socklen_t *fromlen)
{
	struct iovec iov = { buf, len };
	struct msghdr m = { .msg_name = from, .msg_namelen = fromlen ? *fromlen : 0,
			    .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n = svp_nl_recvmsg(fd, &m, flags);

	if (n >= 0 && from && fromlen)
		*fromlen = m.msg_namelen;
	return n;
}
