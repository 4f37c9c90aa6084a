// SPDX-License-Identifier: MIT
/*
 * The library's connection to softverbsd. When no daemon answers, one is
 * started (abi/sv_spawn.c, shared with the preload library).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "abi/sv_sock.h"
#include "abi/sv_spawn.h"
#include "verbs/sv_verbs.h"

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
	pthread_mutex_init(&c->lock, NULL);
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
	pthread_mutex_destroy(&c->lock);
}

int sv_conn_call(struct sv_conn *c, struct sv_cmd *cmd, int fd_in,
		 struct sv_rsp *rsp, int *fd_out)
{
	int ret, status = -EIO;

	if (fd_out)
		*fd_out = -1;
	pthread_mutex_lock(&c->lock);
	if (__atomic_load_n(&c->dead, __ATOMIC_RELAXED)) {
		ret = -EIO; /* as a disassociated device reports, every time */
	} else {
		cmd->hdr.seq = ++c->seq;
		ret = sv_call(c->fd, cmd, fd_in, rsp, &status, fd_out);
		if (ret) {
			/* the daemon is gone: EIO from now on (read
			 * without the lock by sv_ctx_dead) */
			__atomic_store_n(&c->dead, true, __ATOMIC_RELEASE);
			ret = -EIO;
		} else {
			ret = status;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return ret;
}
