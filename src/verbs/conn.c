// SPDX-License-Identifier: MIT
/*
 * The library's connection to softverbsd. When no daemon answers, one is
 * started (abi/sv_spawn.c, shared with the preload library).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
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

/* The shared lock and sequence (struct sv_conn_shared): 0 or -errno. */
static int conn_shared_init(struct sv_conn *c)
{
	pthread_mutexattr_t ma;
	void *p;

	p = mmap(NULL, sizeof(*c->sh), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	c->sh = p;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&c->sh->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	return 0;
}

static void conn_shared_fini(struct sv_conn *c)
{
	if (!c->sh)
		return;
	/* another process may still share it: its mapping stays its own */
	munmap(c->sh, sizeof(*c->sh));
	c->sh = NULL;
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
	ret = conn_shared_init(c);
	if (ret)
		return ret;
	fd = sv_daemon_open(path, sv_autostart_allowed(), greet, &g);
	if (fd < 0) {
		c->fd = -1;
		conn_shared_fini(c);
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
	conn_shared_fini(c);
}

int sv_conn_call(struct sv_conn *c, struct sv_cmd *cmd, int fd_in,
		 struct sv_rsp *rsp, int *fd_out)
{
	int ret, status = -EIO;
	bool stale = false;

	if (fd_out)
		*fd_out = -1;
	/* one command at a time on the socket, whichever thread or process
	 * (of those that share it since a fork) sends it. A holder that died
	 * may have left its response behind: ours is the one with our seq. */
	ret = pthread_mutex_lock(&c->sh->lock);
	if (ret == EOWNERDEAD) {
		pthread_mutex_consistent(&c->sh->lock);
		stale = true;
	}
	if (__atomic_load_n(&c->dead, __ATOMIC_RELAXED)) {
		ret = -EIO; /* as a disassociated device reports, every time */
	} else {
		cmd->hdr.seq = ++c->sh->seq;
		ret = sv_call(c->fd, cmd, fd_in, rsp, &status, fd_out, stale);
		if (ret) {
			/* the daemon is gone: EIO from now on (read
			 * without the lock by sv_ctx_dead) */
			__atomic_store_n(&c->dead, true, __ATOMIC_RELEASE);
			ret = -EIO;
		} else {
			ret = status;
		}
	}
	pthread_mutex_unlock(&c->sh->lock);
	return ret;
}
