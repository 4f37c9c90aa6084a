// SPDX-License-Identifier: MIT
/*
 * The library's connection to softverbsd. When no daemon answers, one is
 * started (abi/sv_spawn.c, shared with the preload library).
 *
 * Processes that share the connection since a fork each read their own
 * responses: the opener on the socket, any other on a reply channel of its
 * own (docs/DESIGN.md "A context shared by fork"). Every command has a time
 * limit (SOFTVERBS_CMD_TIMEOUT): a daemon that does not answer within it is
 * declared dead, as one that has gone.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "abi/sv_sock.h"
#include "abi/sv_spawn.h"
#include "verbs/sv_verbs.h"

#define CMD_TIMEOUT_MS 60000   /* mlx5's firmware commands: 60 s */
#define SLICE_MS       200     /* the most a stop can count towards it */

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

struct greet_arg {
	struct sv_conn *c;
	uint32_t flags;
	struct sv_rsp_hello *out;
};

static int greet(int fd, void *arg)
{
	struct greet_arg *g = arg;
	struct ucred cr;
	socklen_t len = sizeof(cr);

	g->c->fd = fd;
	g->c->dead = false;
	/* Yama: let the daemon reach our memory (its "DMA") */
	if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		prctl(PR_SET_PTRACER, cr.pid, 0, 0, 0);
	return hello(g->c, g->flags, g->out);
}

/* SOFTVERBS_CMD_TIMEOUT: seconds (a decimal number); 0: no limit. Anything
 * else that is not a number leaves the default. */
static int cmd_timeout_ms(void)
{
	const char *s = getenv("SOFTVERBS_CMD_TIMEOUT");
	char *end;
	double v;

	if (!s || !*s)
		return CMD_TIMEOUT_MS;
	v = strtod(s, &end);
	if (end == s || *end || !(v >= 0))
		return CMD_TIMEOUT_MS;
	if (v == 0)
		return -1;
	if (v > 86400.0 * 24)
		v = 86400.0 * 24;
	return v * 1000 < 1 ? 1 : (int)(v * 1000);
}

/* This process's side of c, fresh: its lock, no reply channel yet. */
static void local_init(struct sv_conn *c)
{
	pthread_mutexattr_t ma;

	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&c->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	c->reply_fd = -1;
	c->chan = 0;
}

/*
 * Make c's process side this process's: after a fork the child's copy of it
 * is its parent's (its lock may even be held, by a thread the child does not
 * have). The first thread of the new process to get here takes it over
 * (c->pid holds -pid meanwhile); the others wait for it. No lock that a fork
 * could copy held.
 */
static void local_adopt(struct sv_conn *c)
{
	pid_t me = getpid();

	for (;;) {
		pid_t p = __atomic_load_n(&c->pid, __ATOMIC_ACQUIRE);

		if (p == me)
			return;
		if (p == -me) {
			sched_yield();
			continue;
		}
		if (__atomic_compare_exchange_n(&c->pid, &p, -me, false,
						__ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED)) {
			/* the parent's channel is not ours to read */
			if (c->reply_fd >= 0)
				close(c->reply_fd);
			local_init(c);
			__atomic_store_n(&c->pid, me, __ATOMIC_RELEASE);
			return;
		}
	}
}

int sv_conn_open(struct sv_conn *c, uint32_t hello_flags,
		 struct sv_rsp_hello *out)
{
	struct greet_arg g = { .c = c, .flags = hello_flags, .out = out };
	char path[108];
	int fd, ret;

	ret = sv_sock_path(path, sizeof(path));
	if (ret)
		return ret;
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->timeout_ms = cmd_timeout_ms();
	c->opener = c->pid = getpid();
	local_init(c);
	fd = sv_daemon_open(path, sv_autostart_allowed(), greet, &g);
	if (fd < 0) {
		c->fd = -1;
		pthread_mutex_destroy(&c->lock);
		return fd;
	}
	c->fd = fd;
	return 0;
}

void sv_conn_close(struct sv_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	/* its reply channel (or this process's copy of its parent's) */
	if (c->reply_fd >= 0)
		close(c->reply_fd);
	c->reply_fd = -1;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

/*
 * Wait for p[0] (and p[1], where n is 2: the socket, for a hang-up only),
 * spending *left ms of the command's time (-1: no limit). Waits in slices,
 * and a slice counts for no more than its length: time this process spends
 * stopped (SIGSTOP, a debugger) is not the daemon's. 0, -ETIMEDOUT, or
 * -errno.
 */
static int wait_fd(struct pollfd *p, nfds_t n, long *left)
{
	for (;;) {
		long slice = *left < 0 ? -1 :
			     *left < SLICE_MS ? *left : SLICE_MS;
		long t0 = now_ms(), spent;
		int r = poll(p, n, (int)slice);

		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (*left < 0)
			continue;
		if (r == 0 && slice == 0)
			return -ETIMEDOUT;
		spent = r == 0 ? slice : now_ms() - t0;
		*left -= spent < 0 ? 0 : spent > slice ? slice : spent;
	}
}

static int send_cmd(struct sv_conn *c, const struct sv_cmd *cmd, int fd_in,
		    long *left)
{
	struct pollfd p = { .fd = c->fd, .events = POLLOUT };
	int ret;

	for (;;) {
		ret = sv_send_msg(c->fd, cmd, sizeof(*cmd), fd_in,
				  MSG_DONTWAIT);
		if (ret != -EAGAIN)
			break;
		/* the daemon's queue is full: it is busy, or not there */
		ret = wait_fd(&p, 1, left);
		if (ret)
			return ret;
	}
	if (ret == -EPIPE || ret == -ECONNRESET || ret == -ENOTCONN)
		return -ENOTCONN;
	return ret ? -EIO : 0;
}

/*
 * The response to cmd, from this process's reply channel (or the socket, in
 * the opener). skip_stale: a thread of this process that died between its
 * command and its response left that response behind, which is dropped.
 * 0, -ENOTCONN (the daemon has gone), -ETIMEDOUT or -EIO.
 */
static int recv_rsp(struct sv_conn *c, const struct sv_cmd *cmd,
		    struct sv_rsp *rsp, int *fd, bool skip_stale, long *left)
{
	int rfd = c->reply_fd >= 0 ? c->reply_fd : c->fd;
	/* a channel's process also watches the socket: shut (by a process
	 * whose command timed out) or closed, the device has gone */
	struct pollfd p[2] = {
		{ .fd = rfd, .events = POLLIN },
		{ .fd = c->fd, .events = 0 },
	};
	ssize_t n;
	int ret;

	for (;;) {
		n = sv_recv_msg(rfd, rsp, sizeof(*rsp), fd, MSG_DONTWAIT);
		if (n == -EAGAIN) {
			ret = wait_fd(p, rfd == c->fd ? 1 : 2, left);
			if (ret)
				return ret;
			if (rfd != c->fd && !p[0].revents && p[1].revents)
				return -ENOTCONN;
			continue;
		}
		if (n == 0 || n == -ECONNRESET)
			return -ENOTCONN;
		if (n == (ssize_t)sizeof(*rsp) && skip_stale &&
		    rsp->hdr.magic == SV_PROTO_MAGIC &&
		    rsp->hdr.seq != cmd->hdr.seq) {
			if (*fd >= 0)
				close(*fd);
			*fd = -1;
			skip_stale = false;
			continue;
		}
		if (n != (ssize_t)sizeof(*rsp) ||
		    rsp->hdr.magic != SV_PROTO_MAGIC ||
		    rsp->hdr.seq != cmd->hdr.seq ||
		    rsp->hdr.op != cmd->hdr.op) {
			if (*fd >= 0)
				close(*fd);
			*fd = -1;
			return -EIO;
		}
		return 0;
	}
}

/* One exchange on c, under its lock: 0 and *status (the response's), or a
 * transport error as recv_rsp's. */
static int exchange(struct sv_conn *c, struct sv_cmd *cmd, int fd_in,
		    struct sv_rsp *rsp, int *status, int *fd_out,
		    bool skip_stale, long *left)
{
	int ret, fd = -1;

	cmd->hdr.seq = ++c->seq;
	cmd->hdr.chan = c->chan;
	ret = send_cmd(c, cmd, fd_in, left);
	if (!ret)
		ret = recv_rsp(c, cmd, rsp, &fd, skip_stale, left);
	if (ret)
		return ret;
	sv_rsp_take(rsp, fd, status, fd_out);
	return 0;
}

/* This process (not the opener) gets its reply channel: 0 and *status (0,
 * or why not: the command fails with it, the next one tries again), or a
 * transport error. */
static int open_channel(struct sv_conn *c, int *status, long *left)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int sp[2], ret;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp)) {
		*status = errno == EMFILE || errno == ENFILE ? -errno : -ENOMEM;
		return 0;
	}
	sv_cmd_init(&cmd, SV_CMD_REPLY_CHANNEL);
	/* answered on the channel itself */
	c->reply_fd = sp[0];
	ret = exchange(c, &cmd, sp[1], &rsp, status, NULL, false, left);
	close(sp[1]);
	if (!ret && !*status && (!rsp.u.obj.handle ||
				 rsp.u.obj.handle > SV_MAX_REPLY_CHANS))
		ret = -EIO;
	if (ret || *status) {
		close(sp[0]);
		c->reply_fd = -1;
		return ret;
	}
	c->chan = (uint32_t)rsp.u.obj.handle;
	return 0;
}

/* The commands that make an object that a destroy command (sv_destroy_obj)
 * ends: counted in c->objs. */
static bool makes_obj(unsigned int op)
{
	switch (op) {
	case SV_CMD_ALLOC_PD:
	case SV_CMD_REG_MR:
	case SV_CMD_CREATE_CHANNEL:
	case SV_CMD_CREATE_CQ:
	case SV_CMD_CREATE_QP:
	case SV_CMD_CREATE_SRQ:
	case SV_CMD_CREATE_AH:
	case SV_CMD_CREATE_DOMAIN:
	case SV_CMD_ALLOC_MR:
	case SV_CMD_ALLOC_PAGE_LIST:
	case SV_CMD_REG_MR_LIST:
	case SV_CMD_ALLOC_MW:
	case SV_CMD_OPEN_XRCD:
	case SV_CMD_OPEN_QP:
	case SV_CMD_ALLOC_DM:
	case SV_CMD_IMPORT_OBJ:
		return true;
	default:
		return false;
	}
}

/* No response in time: the device is declared dead, in every process that
 * shares the connection (its socket is shut), and the context hears of it
 * as of a daemon that has gone. */
static void wedge(struct sv_conn *c)
{
	if (__atomic_exchange_n(&c->dead, true, __ATOMIC_ACQ_REL))
		return;
	shutdown(c->fd, SHUT_RDWR);
	if (c->wedged)
		c->wedged(c);
}

int sv_conn_call(struct sv_conn *c, struct sv_cmd *cmd, int fd_in,
		 struct sv_rsp *rsp, int *fd_out)
{
	int ret, status = -EIO;
	long left = c->timeout_ms;
	bool stale = false;

	if (fd_out)
		*fd_out = -1;
	if (__atomic_load_n(&c->dead, __ATOMIC_ACQUIRE))
		return -EIO; /* as a disassociated device reports, every time */
	local_adopt(c);
	/* one command at a time in this process; a thread that died holding
	 * the lock may have left its response behind */
	ret = pthread_mutex_lock(&c->lock);
	if (ret == EOWNERDEAD) {
		pthread_mutex_consistent(&c->lock);
		stale = true;
	}
	if (__atomic_load_n(&c->dead, __ATOMIC_ACQUIRE)) {
		ret = -EIO;
		goto out;
	}
	ret = 0;
	status = 0;
	if (c->pid != c->opener && c->reply_fd < 0)
		ret = open_channel(c, &status, &left);
	if (!ret && !status)
		ret = exchange(c, cmd, fd_in, rsp, &status, fd_out, stale,
			       &left);
	if (ret == -ETIMEDOUT) {
		wedge(c);
	} else if (ret == -ENOTCONN || ret == -EIO) {
		/* the daemon is gone: EIO from now on (read without the lock
		 * by sv_ctx_dead) */
		__atomic_store_n(&c->dead, true, __ATOMIC_RELEASE);
		ret = -EIO;
	} else if (!ret) {
		ret = status;
		if (!ret && makes_obj(cmd->hdr.op))
			__atomic_add_fetch(&c->objs, 1, __ATOMIC_RELAXED);
	}
out:
	pthread_mutex_unlock(&c->lock);
	return ret;
}
