// SPDX-License-Identifier: MIT
/*
 * /dev/infiniband/rdma_cm in user space (docs/DESIGN.md, "rdma_cm"): the
 * preload's half. open() of it connects to the daemon's rdma_cm socket and
 * returns the eventfd the daemon passes back (poll, epoll and select work
 * on it natively: it is readable while events are queued). Per such
 * descriptor a small table (indexed by fd, mapped at the first open) holds
 * its command socket. write() of one sends the bytes written to the daemon
 * and copies the response into the program with process_vm_writev on our
 * own pid, so a bad address is EFAULT, as the kernel's copy_to_user says,
 * never a crash. GET_EVENT first takes a token from the eventfd (blocking,
 * or EAGAIN under O_NONBLOCK, as the file is set), then fetches the event.
 * close() closes the command socket too: the daemon destroys the file's
 * ids. Every other descriptor costs write() and close() one table check.
 *
 * As the kernel's file, an entry outlives a close() that races a write()
 * in another thread (rping's event thread waits in GET_EVENT while its main
 * thread destroys the channel): each write() holds a reference, and waits
 * on a descriptor of its own (the entry's duplicate of the eventfd), not on
 * the number close() gives back for reuse. The socket and the duplicate go
 * with the last reference.
 */
#define _GNU_SOURCE
#include "preload/preload.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <rdma/rdma_user_cm.h>

#include "abi/sv_sock.h"
#include "abi/sv_ucma.h"

struct svp_ucma {
	struct svp_fdent ent;      /* first: the table's count */
	int sock;
	int efd;                   /* our own duplicate of the eventfd */
	uint64_t token;
	pthread_mutex_t lock;
};

static struct svp_fdtab tab = SVP_FDTAB_INIT;

bool svp_is_ucma(int fd)
{
	return svp_fd_peek(&tab, fd) != NULL;
}

/* fd's entry with a reference taken (ucma_put gives it back), or NULL. */
static struct svp_ucma *ucma_get(int fd)
{
	return (struct svp_ucma *)svp_fd_get(&tab, fd);
}

static void ucma_free(struct svp_ucma *e)
{
	close(e->sock);
	close(e->efd);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

static void ucma_put(struct svp_ucma *e)
{
	if (svp_fd_put(&tab, &e->ent))
		ucma_free(e);
}

bool svp_ucma_path(const char *p)
{
	char cb[SVP_PATH_MAX];

	return !svp_null(p) && !strcmp(svp_canon(p, cb), "/dev/infiniband/rdma_cm");
}

void svp_ucma_stat(struct stat *st)
{
	st->st_mode = S_IFCHR | 0666;
	st->st_rdev = makedev(SV_UCMA_MAJOR, SV_UCMA_MINOR);
	st->st_size = 0;
	st->st_blocks = 0;
}

int svp_ucma_open(int flags)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct sv_ucma_hello h;
	struct svp_ucma *e;
	char sock[108], path[300];
	int s, efd = -1;
	ssize_t n;

	if (svp_sock_path(sock, sizeof(sock)) ||
	    sv_sock_sibling(sock, SV_UCMA_SOCK_NAME, path, sizeof(path)) ||
	    strlen(path) >= sizeof(sa.sun_path) || !svp_fd_ready(&tab)) {
		errno = ENODEV;
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)))
		goto nodev;
	n = sv_recv_msg(s, &h, sizeof(h), &efd, 0);
	if (n != sizeof(h) || h.magic != SV_UCMA_MAGIC ||
	    h.version != SV_UCMA_VERSION || efd < 0)
		goto nodev;
	if (efd >= SVP_MAX_FD) {
		close(efd);
		close(s);
		errno = EMFILE;
		return -1;
	}
	/* the descriptor as open() would make it (it arrives close-on-exec) */
	if ((!(flags & O_CLOEXEC) && fcntl(efd, F_SETFD, 0)) ||
	    ((flags & O_NONBLOCK) && fcntl(efd, F_SETFL, O_NONBLOCK)))
		goto nodev;
	e = calloc(1, sizeof(*e));
	if (!e) {
		close(efd);
		close(s);
		errno = ENOMEM;
		return -1;
	}
	e->efd = fcntl(efd, F_DUPFD_CLOEXEC, 0);
	if (e->efd < 0) {
		free(e);
		goto nodev;
	}
	e->sock = s;
	e->token = h.token;
	pthread_mutex_init(&e->lock, NULL);
	svp_fd_set(&tab, efd, &e->ent);
	return efd;
nodev:
	if (efd >= 0)
		close(efd);
	close(s);
	errno = ENODEV;
	return -1;
}

/* One request and its response, in turn with the fd's other threads.
 * 0, or -errno when the daemon is gone. */
static int exchange(struct svp_ucma *e, const struct sv_ucma_req *q, size_t len,
		    struct sv_ucma_rsp *r)
{
	int fd = -1, ret = 0;
	ssize_t n;

	pthread_mutex_lock(&e->lock);
	if (sv_send_msg(e->sock, q, len, -1, MSG_NOSIGNAL))
		ret = -ENODEV;
	else {
		n = sv_recv_msg(e->sock, r, sizeof(*r), &fd, 0);
		if (fd >= 0)
			close(fd);
		if (n < SV_UCMA_RSP_HDR || r->magic != SV_UCMA_MAGIC ||
		    r->out_len > SV_UCMA_MAX_RSP || (size_t)n != SV_UCMA_RSP_HDR + r->out_len)
			ret = -ENODEV;
	}
	pthread_mutex_unlock(&e->lock);
	return ret;
}

/* Copy between the program's memory and ours as the kernel does: a bad
 * address is EFAULT, never a fault. */
static bool copy_in(void *dst, const void *src, size_t n)
{
	struct iovec l = { dst, n }, r = { (void *)(uintptr_t)src, n };

	return !n || process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)n;
}

static bool copy_out(uint64_t dst, const void *src, size_t n)
{
	struct iovec l = { (void *)(uintptr_t)src, n }, r = { (void *)(uintptr_t)dst, n };

	return !n || process_vm_writev(getpid(), &l, 1, &r, 1, 0) == (ssize_t)n;
}

/* The response could not be delivered: undo what the command did where
 * the kernel would (a new id is destroyed, a new multicast left, an event
 * stays queued). */
static void undo(struct svp_ucma *e, uint32_t cmd, const struct sv_ucma_rsp *r)
{
	static __thread struct sv_ucma_req q;
	struct sv_ucma_rsp rr;
	struct {
		struct rdma_ucm_cmd_hdr hdr;
		struct rdma_ucm_destroy_id c;
	} d;
	struct rdma_ucm_destroy_id_resp dresp;

	memset(&q, 0, SV_UCMA_REQ_HDR);
	q.magic = SV_UCMA_MAGIC;
	if (cmd == RDMA_USER_CM_CMD_GET_EVENT) {
		q.aux_kind = SV_UCMA_UNGET;
		exchange(e, &q, SV_UCMA_REQ_HDR, &rr);
	} else if ((cmd == RDMA_USER_CM_CMD_CREATE_ID ||
		    cmd == RDMA_USER_CM_CMD_JOIN_IP_MCAST ||
		    cmd == RDMA_USER_CM_CMD_JOIN_MCAST) &&
		   r->out_len >= sizeof(uint32_t)) {
		memset(&d, 0, sizeof(d));
		/* LEAVE_MCAST takes DESTROY_ID's struct */
		d.hdr.cmd = cmd == RDMA_USER_CM_CMD_CREATE_ID ?
			    RDMA_USER_CM_CMD_DESTROY_ID : RDMA_USER_CM_CMD_LEAVE_MCAST;
		d.hdr.in = sizeof(d.c);
		d.hdr.out = sizeof(dresp);
		d.c.response = (uintptr_t)&dresp;
		memcpy(&d.c.id, r->out, sizeof(d.c.id));
		q.wlen = q.nbytes = sizeof(d);
		memcpy(q.data, &d, sizeof(d));
		exchange(e, &q, SV_UCMA_REQ_HDR + sizeof(d), &rr);
	}
}

/* What a GET_EVENT will be refused for, checked before a token is taken. */
static bool event_cmd_ok(const struct rdma_ucm_cmd_hdr *h, size_t len)
{
	return h->cmd == RDMA_USER_CM_CMD_GET_EVENT &&
	       (size_t)h->in + sizeof(*h) <= len &&
	       h->out >= sizeof(struct rdma_ucm_event_resp) - sizeof(uint32_t) -
			 sizeof(struct rdma_ucm_ece);
}

static ssize_t ucma_write(struct svp_ucma *e, const void *buf, size_t len)
{
	static __thread struct sv_ucma_req q;
	static __thread struct sv_ucma_rsp r;
	struct rdma_ucm_cmd_hdr hdr;
	bool event;
	int ret;

	if (len < sizeof(hdr)) {
		errno = EINVAL;
		return -1;
	}
	memset(&q, 0, SV_UCMA_REQ_HDR);
	q.magic = SV_UCMA_MAGIC;
	q.wlen = len > UINT32_MAX ? UINT32_MAX : (uint32_t)len;
	q.nbytes = len < SV_UCMA_MAX_CMD ? (uint32_t)len : SV_UCMA_MAX_CMD;
	if (!copy_in(q.data, buf, q.nbytes)) {
		errno = EFAULT;
		return -1;
	}
	memcpy(&hdr, q.data, sizeof(hdr));
	if (hdr.cmd == RDMA_USER_CM_CMD_SET_OPTION &&
	    q.nbytes >= sizeof(hdr) + sizeof(struct rdma_ucm_set_option)) {
		struct rdma_ucm_set_option o;

		memcpy(&o, q.data + sizeof(hdr), sizeof(o));
		if (o.optlen <= SV_UCMA_MAX_OPT) {
			if (!copy_in(q.data + q.nbytes, (void *)(uintptr_t)o.optval,
				     o.optlen)) {
				errno = EFAULT;
				return -1;
			}
			q.optlen = o.optlen;
		}
	}
	if (hdr.cmd == RDMA_USER_CM_CMD_MIGRATE_ID &&
	    q.nbytes >= sizeof(hdr) + sizeof(struct rdma_ucm_migrate_id)) {
		struct rdma_ucm_migrate_id m;
		struct svp_ucma *cur;

		memcpy(&m, q.data + sizeof(hdr), sizeof(m));
		cur = ucma_get((int)m.fd);
		q.aux_kind = cur ? SV_UCMA_AUX_FILE :
			     fcntl((int)m.fd, F_GETFD) >= 0 ? SV_UCMA_AUX_NOT_UCMA :
			     SV_UCMA_AUX_BAD_FD;
		q.aux = cur ? cur->token : 0;
		if (cur)
			ucma_put(cur);
	}
	event = event_cmd_ok(&hdr, len);
	for (;;) {
		if (event) {
			uint64_t token;

			/* the file's own read (through our duplicate, which a
			 * close() elsewhere leaves open): blocks, or EAGAIN,
			 * as it is set */
			if (read(e->efd, &token, sizeof(token)) !=
			    sizeof(token))
				return -1;
		}
		ret = exchange(e, &q, SV_UCMA_REQ_HDR + q.nbytes + q.optlen, &r);
		if (ret) {
			errno = -ret;
			return -1;
		}
		if (!(event && r.ret == SV_UCMA_STALE))
			break;
	}
	if (r.ret < 0) {
		errno = -r.ret;
		return -1;
	}
	if (!copy_out(r.out_addr, r.out, r.out_len)) {
		undo(e, hdr.cmd, &r);
		errno = EFAULT;
		return -1;
	}
	return r.ret;
}

ssize_t svp_ucma_write(int fd, const void *buf, size_t len)
{
	struct svp_ucma *e = ucma_get(fd);
	ssize_t ret;

	if (!e) {
		errno = EBADF;
		return -1;
	}
	ret = ucma_write(e, buf, len);
	ucma_put(e);
	return ret;
}

/* newfd, a duplicate of fd (dup, dup2, fcntl F_DUPFD): the same file, as
 * a duplicated descriptor of the kernel's is */
void svp_ucma_dup(int fd, int newfd)
{
	svp_fd_dup(&tab, fd, newfd);
}

void svp_ucma_close(int fd)
{
	struct svp_ucma *e = (struct svp_ucma *)svp_fd_clear(&tab, fd);

	if (e)                     /* a write() under way keeps it */
		ucma_free(e);
}
