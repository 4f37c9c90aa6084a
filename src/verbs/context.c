// SPDX-License-Identifier: MIT
/*
 * Device contexts. Each context is one connection to the daemon (one client
 * there, with its own object table) plus an async event socket.
 *
 * struct verbs_context is filled so that the inline calls of rdma-core's
 * <infiniband/verbs.h> reach us: abi_compat marks the context extended, sz
 * covers the whole struct, and every op is either ours or a typed stub that
 * returns EOPNOTSUPP, so no caller ever finds a NULL.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "verbs/qp_ops.h"
#include "verbs/sv_verbs.h"

void sv_context_set_ops(struct sv_context *ctx)
{
	struct verbs_context *v = &ctx->vctx;
	struct ibv_context *c = &v->context;

	sv_fill_unsupported_ops(v);
	c->ops.poll_cq = sv_poll_cq;
	c->ops.req_notify_cq = sv_req_notify_cq;
	v->query_port = sv_query_port;
	v->query_device_ex = sv_query_device_ex;
	v->create_cq_ex = sv_create_cq_ex;
	v->alloc_td = sv_alloc_td;
	v->dealloc_td = sv_dealloc_td;
	v->alloc_parent_domain = sv_alloc_parent_domain;
	v->modify_cq = sv_modify_cq;
	c->ops.post_send = sv_post_send;
	c->ops.post_recv = sv_post_recv;
	c->ops.post_srq_recv = sv_post_srq_recv;
	c->ops.alloc_mw = sv_alloc_mw;
	c->ops.dealloc_mw = sv_dealloc_mw;
	c->ops.bind_mw = sv_bind_mw;
	v->create_qp_ex = sv_create_qp_ex;
	v->create_srq_ex = sv_create_srq_ex;
	v->get_srq_num = sv_get_srq_num;
	v->post_srq_ops = sv_post_srq_ops;
	v->open_xrcd = sv_open_xrcd;
	v->close_xrcd = sv_close_xrcd;
	v->open_qp = sv_open_qp;
	v->alloc_dm = sv_alloc_dm;
	v->free_dm = sv_free_dm;
	v->reg_dm_mr = sv_reg_dm_mr;
	v->advise_mr = sv_advise_mr;
	v->sz = sizeof(*v);
	c->abi_compat = (void *)UINTPTR_MAX; /* __VERBS_ABI_IS_EXTENDED */
}

int sv_destroy_obj(struct ibv_context *context, unsigned int op,
		   uint64_t handle)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret;

	struct sv_conn *conn = &to_sv_ctx(context)->conn;
	uint32_t n;

	sv_cmd_init(&cmd, op);
	cmd.u.handle.handle = handle;
	ret = sv_conn_call(conn, &cmd, -1, &rsp, NULL);
	ret = ret == -ENOTCONN || ret == -EIO ? 0 : -ret;
	/* one object fewer (never below none: an object made otherwise) */
	n = __atomic_load_n(&conn->objs, __ATOMIC_RELAXED);
	while (!ret && n &&
	       !__atomic_compare_exchange_n(&conn->objs, &n, n - 1, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	return ret;
}

/* Connect and open a context: a new one with its own token (its cmd_fd),
 * or, with import_fd >= 0, one that imports the context whose token that
 * is (then import_fd becomes the cmd_fd). */
static int open_context(struct sv_context *ctx, int import_fd)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int sp[2], db_fd = -1, token = -1, ret;
	void *db;

	ret = sv_conn_open(&ctx->conn, 0, NULL);
	if (ret)
		return ret;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp)) {
		ret = -errno;
		goto err_conn;
	}
	sv_cmd_init(&cmd, SV_CMD_OPEN_CONTEXT);
	ret = sv_conn_call(&ctx->conn, &cmd, sp[1], &rsp, &db_fd);
	close(sp[1]);
	if (ret)
		goto err_sock;
	/* the doorbell pages of the device's engines */
	if (db_fd < 0 || !rsp.u.open_context.db_pages ||
	    rsp.u.open_context.db_bytes !=
		    (uint64_t)rsp.u.open_context.db_pages * SV_DB_PAGE_BYTES) {
		ret = -EPROTO;
		goto err_db;
	}
	db = mmap(NULL, rsp.u.open_context.db_bytes, PROT_READ | PROT_WRITE,
		  MAP_SHARED, db_fd, 0);
	if (db == MAP_FAILED) {
		ret = -errno;
		goto err_db;
	}
	close(db_fd);
	db_fd = -1;
	ctx->db_map = db;
	ctx->db_bytes = rsp.u.open_context.db_bytes;
	ctx->db_pages = rsp.u.open_context.db_pages;
	if (import_fd >= 0) {
		sv_cmd_init(&cmd, SV_CMD_IMPORT_CONTEXT);
		ret = sv_conn_call(&ctx->conn, &cmd, import_fd, &rsp, NULL);
		token = import_fd;
	} else {
		sv_cmd_init(&cmd, SV_CMD_CONTEXT_TOKEN);
		ret = sv_conn_call(&ctx->conn, &cmd, -1, &rsp, &token);
		if (!ret && token < 0)
			ret = -EPROTO;
	}
	if (ret)
		goto err_sock;
	sv_cmd_init(&cmd, SV_CMD_QUERY_DEVICE);
	ret = sv_conn_call(&ctx->conn, &cmd, -1, &rsp, NULL);
	if (ret)
		goto err_sock;
	ctx->attr = rsp.u.dev;
	sv_direct_open(ctx);
	ctx->vctx.context.async_fd = sp[0];
	ctx->vctx.context.cmd_fd = token;
	return 0;

err_db:
	if (db_fd >= 0)
		close(db_fd);
	if (ctx->db_map)
		munmap(ctx->db_map, ctx->db_bytes);
	ctx->db_map = NULL;
err_sock:
	if (token >= 0 && token != import_fd)
		close(token);
	close(sp[0]);
err_conn:
	sv_conn_close(&ctx->conn);
	return ret;
}

/* A command outlived its time limit (conn.c): the device is declared dead,
 * and the context hears of it as of a daemon that has gone: its async
 * socket and its completion channels read EOF (ibv_get_async_event:
 * IBV_EVENT_DEVICE_FATAL; ibv_get_cq_event: the flushes, then EIO). */
static void ctx_wedged(struct sv_conn *conn)
{
	struct sv_context *ctx = (struct sv_context *)((char *)conn -
		offsetof(struct sv_context, conn));
	struct sv_channel *ch;

	shutdown(ctx->vctx.context.async_fd, SHUT_RDWR);
	pthread_mutex_lock(&ctx->ch_lock);
	for (ch = ctx->channels; ch; ch = ch->next)
		shutdown(ch->ch.fd, SHUT_RDWR);
	pthread_mutex_unlock(&ctx->ch_lock);
}

static struct ibv_context *context_new(struct ibv_device *device,
				       int import_fd)
{
	struct sv_context *ctx;
	struct ibv_context *c;
	int ret;

	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return sv_err_ptr(-ENOMEM);
	ret = open_context(ctx, import_fd);
	if (ret) {
		free(ctx);
		return sv_err_ptr(ret == -ETIMEDOUT ? -ENODEV : ret);
	}
	c = &ctx->vctx.context;
	c->device = device;
	c->num_comp_vectors = (int)ctx->attr.max_comp_vectors;
	pthread_mutex_init(&c->mutex, NULL);
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_mutex_init(&ctx->ch_lock, NULL);
	ctx->conn.wedged = ctx_wedged;
	sv_context_set_ops(ctx);
	return c;
}

SV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	if (device != &sv_device0.ibdev)
		return sv_err_ptr(-ENODEV);
	return context_new(device, -1);
}

/* The context whose cmd_fd (a dup of it) cmd_fd is; the new context owns
 * cmd_fd from here on and closes it with itself. */
SV_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	int ret;

	if (cmd_fd < 0 || fcntl(cmd_fd, F_GETFD) < 0)
		return sv_err_ptr(-EBADF);
	ret = sv_device_probe();
	if (ret)
		return sv_err_ptr(ret);
	return context_new(&sv_device0.ibdev, cmd_fd);
}

/* Contexts closed with objects left: their memory is kept for good
 * (reachable from here), closed as any other, so that a destroy after the
 * close reads what it reads (the connection, closed: the destroy fails)
 * from memory that is still ours. rdma-core's libibverbs frees the context,
 * and such a destroy reads freed memory; pyverbs does it where Python's
 * collector frees a context before its CQ (rdma-core 56's tests under
 * Python 3.13, in check-asan). */
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sv_context *kept;

SV_EXPORT int ibv_close_device(struct ibv_context *context)
{
	struct sv_context *ctx = to_sv_ctx(context);
	bool keep = __atomic_load_n(&ctx->conn.objs, __ATOMIC_ACQUIRE) != 0;

	/* the daemon frees whatever the application left behind; so do we
	 * for the hidden domains of QPs left behind (resdom.c), unless the
	 * context is kept: a QP destroyed after the close lets go of its own */
	while (!keep && ctx->idx_domains) {
		struct sv_res_domain *rd = ctx->idx_domains;

		ctx->idx_domains = rd->next;
		free(rd);
	}
	close(context->async_fd);
	close(context->cmd_fd);
	sv_conn_close(&ctx->conn);
	sv_direct_close(ctx);
	if (ctx->db_map)
		munmap(ctx->db_map, ctx->db_bytes);
	if (keep) {
		pthread_mutex_lock(&kept_lock);
		ctx->kept_next = kept;
		kept = ctx;
		pthread_mutex_unlock(&kept_lock);
		return 0;
	}
	pthread_mutex_destroy(&context->mutex);
	pthread_mutex_destroy(&ctx->lock);
	pthread_mutex_destroy(&ctx->ch_lock);
	free(ctx);
	return 0;
}
