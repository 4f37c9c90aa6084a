// SPDX-License-Identifier: MIT
/*
 * A CQ's life: create (ibv_create_cq, ibv_create_cq_ex, ibv_exp_create_cq
 * with its resource domain), resize and destroy, each a command to the
 * daemon. Create and resize get the ring's memfd back, which the library
 * maps (over a block of a parent domain's allocator, if the CQ was made on
 * one that has it: td.c); a CQ made joins its context's list, which a dead
 * device's channel walks (cq.c). On a resize the daemon moves the
 * completions not polled into the new ring, and the private ring's stamps
 * move with them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "verbs/cq_int.h"

#define SV_CQ_WC_FLAGS_SUPPORTED                                             \
	(IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |       \
	 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK | IBV_WC_EX_WITH_TM_INFO)

/* Map the ring of a create or resize response (in a block of the parent
 * domain's allocator, if the CQ was made on one that has it) and switch to
 * it, unmapping the ring it replaces. */
static int map_ring(struct sv_cq *cq, int fd, const struct sv_rsp_cq *r)
{
	struct sv_pd *pd = cq->parent ? to_sv_pd(cq->parent) : NULL;
	struct sv_ring_mem m;
	struct stat st;
	int ret;

	if (fd < 0 || r->ring_entries == 0 ||
	    (r->ring_entries & (r->ring_entries - 1)) ||
	    r->ring_bytes != sv_cq_ring_bytes(r->ring_entries) ||
	    r->ring_offset % 4096)
		return -EIO;
	/* at ring_offset of the memfd: a pool of rings */
	if (fstat(fd, &st))
		return -errno;
	if (r->ring_offset > (uint64_t)st.st_size ||
	    (uint64_t)st.st_size - r->ring_offset < r->ring_bytes)
		return -EIO;
	ret = sv_ring_map(&m, pd && pd->alloc ? pd : NULL, SV_RES_TYPE_CQ, fd,
			  r->ring_offset, r->ring_bytes);
	if (ret)
		return ret;
	sv_ring_unmap(&cq->mem);
	cq->mem = m;
	cq->ring = m.map;
	cq->ring_bytes = r->ring_bytes;
	cq->entries = r->ring_entries;
	cq->cons = __atomic_load_n(&cq->ring->cons, __ATOMIC_RELAXED);
	cq->arm_sn = cq->ring->arm_sn;
	cq->ex.cqe = (int)r->cqe;
	return 0;
}

static void ctx_add_cq(struct sv_context *ctx, struct sv_cq *cq)
{
	pthread_mutex_lock(&ctx->lock);
	cq->next = ctx->cqs;
	ctx->cqs = cq;
	pthread_mutex_unlock(&ctx->lock);
}

static void ctx_del_cq(struct sv_context *ctx, struct sv_cq *cq)
{
	pthread_mutex_lock(&ctx->lock);
	for (struct sv_cq **p = &ctx->cqs; *p; p = &(*p)->next) {
		if (*p == cq) {
			*p = cq->next;
			break;
		}
	}
	pthread_mutex_unlock(&ctx->lock);
}

struct ibv_cq_ex *sv_create_cq_ex(struct ibv_context *context,
				  struct ibv_cq_init_attr_ex *attr)
{
	return sv_create_cq_in(context, attr, NULL);
}

struct ibv_cq_ex *sv_create_cq_in(struct ibv_context *context,
				  struct ibv_cq_init_attr_ex *attr,
				  struct sv_res_domain *rd)
{
	struct sv_context *ctx = to_sv_ctx(context);
	struct sv_cq *cq;
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret, fd;

	if (attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS |
					  IBV_CQ_INIT_ATTR_MASK_PD))
		return sv_err_ptr(-EOPNOTSUPP);
	if (attr->wc_flags & ~(uint64_t)SV_CQ_WC_FLAGS_SUPPORTED)
		return sv_err_ptr(-EOPNOTSUPP);
	/* a CQ on a parent domain: single-threaded when it has a td */
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
	    (!attr->parent_domain || attr->parent_domain->context != context ||
	     !to_sv_pd(attr->parent_domain)->parent))
		return sv_err_ptr(-EINVAL);
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return sv_err_ptr(-ENOMEM);
	if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD)
		cq->parent = attr->parent_domain; /* its allocator, if any */
	sv_cmd_init(&cmd, SV_CMD_CREATE_CQ);
	cmd.u.create_cq.cookie = (uintptr_t)cq;
	cmd.u.create_cq.channel = attr->channel ?
		((struct sv_channel *)attr->channel)->handle : 0;
	cmd.u.create_cq.cqe = attr->cqe;
	cmd.u.create_cq.comp_vector = attr->comp_vector;
	if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS)
		cmd.u.create_cq.flags = attr->flags;
	ret = sv_conn_call(&ctx->conn, &cmd, -1, &rsp, &fd);
	if (ret)
		goto err_free;
	cq->handle = rsp.u.cq.handle;
	ret = map_ring(cq, fd, &rsp.u.cq);
	if (fd >= 0)
		close(fd);
	if (ret)
		goto err_destroy;
	cq->ex_flags = (uint32_t)attr->wc_flags;
	cq->single_threaded =
		((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
		 (attr->flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED)) ||
		((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
		 sv_pd_single_threaded(attr->parent_domain)) ||
		(rd && rd->thread_model != IBV_EXP_THREAD_SAFE);
	/* the references it holds: its domain's (the caller's, handed
	 * over) and its parent domain's */
	cq->rd = rd;
	if (cq->parent)
		sv_pd_get(cq->parent);
	cq_spin_init(cq);
	pthread_mutex_init(&cq->ex.mutex, NULL);
	pthread_cond_init(&cq->ex.cond, NULL);
	cq->ex.context = context;
	cq->ex.channel = attr->channel;
	if (attr->channel)
		__atomic_fetch_add(&attr->channel->refcnt, 1, __ATOMIC_RELAXED);
	cq->ex.cq_context = attr->cq_context;
	cq->ex.handle = (uint32_t)cq->handle;
	sv_cq_set_ex_ops(&cq->ex);
	/* without it the direct path passes this CQ by (the daemon's ring
	 * takes every completion) */
	(void)sv_direct_cq_init(ctx, cq);
	ctx_add_cq(ctx, cq);
	return &cq->ex;

err_destroy:
	sv_cmd_init(&cmd, SV_CMD_DESTROY_CQ);
	cmd.u.handle.handle = cq->handle;
	sv_conn_call(&ctx->conn, &cmd, -1, &rsp, NULL);
err_free:
	free(cq);
	return sv_err_ptr(ret);
}

SV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe,
				       void *cq_context,
				       struct ibv_comp_channel *channel,
				       int comp_vector)
{
	struct ibv_cq_init_attr_ex attr = {
		.cqe = (uint32_t)cqe,
		.cq_context = cq_context,
		.channel = channel,
		.comp_vector = (uint32_t)comp_vector,
	};
	struct ibv_cq_ex *ex;

	if (cqe < 1 || comp_vector < 0) {
		errno = EINVAL;
		return NULL;
	}
	ex = sv_create_cq_ex(context, &attr);
	return ex ? ibv_cq_ex_to_cq(ex) : NULL;
}

#define SV_EXP_CQ_INIT_KNOWN                                                 \
	((uint32_t)(IBV_EXP_CQ_INIT_ATTR_FLAGS |                             \
		    IBV_EXP_CQ_INIT_ATTR_RES_DOMAIN))

SV_EXPORT struct ibv_cq *ibv_exp_create_cq(struct ibv_context *context,
					   int cqe, void *cq_context,
					   struct ibv_comp_channel *channel,
					   int comp_vector,
					   struct ibv_exp_cq_init_attr *attr)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = (uint32_t)cqe,
		.cq_context = cq_context,
		.channel = channel,
		.comp_vector = (uint32_t)comp_vector,
	};
	struct sv_res_domain *rd = NULL;
	struct ibv_cq_ex *ex;

	if (!context || cqe < 1 || comp_vector < 0)
		return sv_err_ptr(-EINVAL);
	if (attr) {
		if (attr->comp_mask & ~SV_EXP_CQ_INIT_KNOWN)
			return sv_err_ptr(-EINVAL);
		if (attr->comp_mask & IBV_EXP_CQ_INIT_ATTR_FLAGS) {
			/* as ibv_create_cq_ex's flags */
			ca.comp_mask |= IBV_CQ_INIT_ATTR_MASK_FLAGS;
			ca.flags = attr->flags;
		}
		if (attr->comp_mask & IBV_EXP_CQ_INIT_ATTR_RES_DOMAIN) {
			if (!attr->res_domain ||
			    attr->res_domain->context != context)
				return sv_err_ptr(-EINVAL);
			rd = to_sv_rd(attr->res_domain);
		}
	}
	if (rd)
		sv_rd_get(rd);
	ex = sv_create_cq_in(context, &ca, rd);
	if (!ex) {
		if (rd) {
			int err = errno;

			sv_rd_put(to_sv_ctx(context), rd);
			errno = err;
		}
		return NULL;
	}
	return ibv_cq_ex_to_cq(ex);
}

/* The daemon moved the completions not polled, from old_cons on, to the
 * new ring's consumer counter on (ibv_resize_cq): the stamps move with
 * them (dlock held). */
static void dring_renumber(struct sv_cq *cq, uint32_t old_cons)
{
	for (uint32_t i = cq->dcons; i != cq->dprod; i++) {
		uint32_t *st = &cq->dstamp[i & cq->dmask];

		if ((int32_t)(*st - old_cons) <= 0)
			*st = cq->cons;
		else
			*st = *st - old_cons + cq->cons;
	}
}

SV_EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct sv_cq *cq = to_sv_cq(ibcq);
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret, fd;

	if (cqe < 1)
		return EINVAL;
	/* Pollers spin for one daemon round trip: the daemon moves the
	 * completions not yet consumed into the new ring, so nobody may
	 * consume while it does. Resizing is rare; polling stays lock-light. */
	cq_lock(cq);
	/* what senders of this host put in our QPs' completion rings, with
	 * stamps of the ring that goes: into the private ring, whose stamps
	 * are renumbered below */
	if (cq->xqps)
		sv_direct_xdrain(cq);
	sv_cmd_init(&cmd, SV_CMD_RESIZE_CQ);
	cmd.u.resize_cq.cq = cq->handle;
	cmd.u.resize_cq.cqe = (uint32_t)cqe;
	ret = sv_conn_call(&to_sv_ctx(ibcq->context)->conn, &cmd, -1, &rsp, &fd);
	if (!ret) {
		/* the direct path's posters look at the ring under dlock */
		uint32_t old_cons = cq->cons;

		if (cq->dring)
			sv_spin_lock(&cq->dlock);
		ret = map_ring(cq, fd, &rsp.u.cq);
		if (!ret && cq->dring)
			dring_renumber(cq, old_cons);
		if (!ret && cq->dring)
			__atomic_store_n(&cq->ring->dused, cq->dheld,
					 __ATOMIC_RELAXED);
		if (cq->dring)
			sv_spin_unlock(&cq->dlock);
		if (fd >= 0)
			close(fd);
		/* the senders map the new ring */
		if (!ret)
			sv_direct_cq_moved(cq);
	}
	cq_unlock(cq);
	return -ret;
}

SV_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct sv_cq *cq = to_sv_cq(ibcq);
	struct sv_context *ctx = to_sv_ctx(ibcq->context);
	int ret = sv_destroy_obj(ibcq->context, SV_CMD_DESTROY_CQ, cq->handle);

	if (ret)
		return ret;
	ctx_del_cq(ctx, cq);
	if (ibcq->channel)
		__atomic_fetch_sub(&ibcq->channel->refcnt, 1, __ATOMIC_RELAXED);
	/* the verbs contract: wait until every event handed out is acked */
	pthread_mutex_lock(&ibcq->mutex);
	while (ibcq->comp_events_completed != cq->comp_events ||
	       ibcq->async_events_completed != cq->async_events)
		pthread_cond_wait(&ibcq->cond, &ibcq->mutex);
	pthread_mutex_unlock(&ibcq->mutex);
	sv_ring_unmap(&cq->mem);
	if (cq->rd)
		sv_rd_put(ctx, cq->rd);
	if (cq->parent)
		sv_pd_put(cq->parent);
	pthread_mutex_destroy(&ibcq->mutex);
	pthread_cond_destroy(&ibcq->cond);
	sv_direct_cq_fini(cq);
	free(cq);
	return 0;
}
