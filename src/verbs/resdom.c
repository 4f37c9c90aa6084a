// SPDX-License-Identifier: MIT
/*
 * Resource domains, the experimental form (seed 001) and the index form
 * (seed 000): include/softverbs/softverbs.h.
 *
 * Each domain is a daemon DOMAIN object (a doorbell page and its engine,
 * dedicated while the device has a free one, else shared) plus the thread
 * model, which is the library's alone: CQs and QPs made in a domain whose
 * model is UNSAFE or SINGLE post and poll without locks.
 *
 * The index form names a domain by a number in [0, max_resource_domains):
 * the first QP that names an index makes a hidden domain for it (DEFAULT
 * message model; locks kept, since an index says nothing about threads),
 * the QPs that name it share it, and the last one to go destroys it. The
 * context's list of hidden domains and their counts are under its lock.
 *
 * Thread domains (ibv_alloc_td, td.c) use the daemon side of this file too.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs/sv_verbs.h"

#define SV_RD_INIT_KNOWN                                                     \
	((uint32_t)(IBV_EXP_RES_DOMAIN_THREAD_MODEL |                        \
		    IBV_EXP_RES_DOMAIN_MSG_MODEL))

/* ---- the daemon's side ---- */

int sv_domain_create(struct sv_context *ctx, uint32_t msg_model,
		     uint32_t flags, struct sv_rsp_domain *out)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret;

	sv_cmd_init(&cmd, SV_CMD_CREATE_DOMAIN);
	cmd.u.create_domain.msg_model = msg_model;
	cmd.u.create_domain.flags = flags;
	ret = sv_conn_call(&ctx->conn, &cmd, -1, &rsp, NULL);
	if (ret)
		return ret;
	/* a page the context cannot see is a protocol error: undo it */
	if (rsp.u.domain.db_index >= ctx->db_pages ||
	    rsp.u.domain.dedicated > 1) {
		sv_domain_destroy(ctx, rsp.u.domain.handle);
		return -EPROTO;
	}
	*out = rsp.u.domain;
	return 0;
}

int sv_domain_destroy(struct sv_context *ctx, uint64_t handle)
{
	return -sv_destroy_obj(&ctx->vctx.context, SV_CMD_DESTROY_DOMAIN,
			       handle);
}

/* ---- references from CQs and QPs ---- */

void sv_rd_get(struct sv_res_domain *rd)
{
	__atomic_fetch_add(&rd->refs, 1, __ATOMIC_ACQ_REL);
}

void sv_rd_put(struct sv_context *ctx, struct sv_res_domain *rd)
{
	if (!rd->hidden) {
		__atomic_fetch_sub(&rd->refs, 1, __ATOMIC_ACQ_REL);
		return;
	}
	pthread_mutex_lock(&ctx->lock);
	if (--rd->refs == 0) {
		for (struct sv_res_domain **p = &ctx->idx_domains; *p;
		     p = &(*p)->next) {
			if (*p == rd) {
				*p = rd->next;
				break;
			}
		}
		/* its last QP is gone at the daemon: this cannot be busy */
		sv_domain_destroy(ctx, rd->handle);
		free(rd);
	}
	pthread_mutex_unlock(&ctx->lock);
}

struct sv_res_domain *sv_rd_of_index(struct sv_context *ctx, uint32_t idx)
{
	struct sv_res_domain *rd;
	struct sv_rsp_domain r;
	int ret;

	if (idx >= ctx->attr.max_resource_domains)
		return sv_err_ptr(-EINVAL);
	pthread_mutex_lock(&ctx->lock);
	for (rd = ctx->idx_domains; rd; rd = rd->next)
		if (rd->index == idx)
			break;
	if (rd) {
		rd->refs++;
		goto out;
	}
	rd = calloc(1, sizeof(*rd));
	if (!rd) {
		ret = -ENOMEM;
		goto err;
	}
	ret = sv_domain_create(ctx, SV_MSG_DEFAULT, 0, &r);
	if (ret) {
		free(rd);
		goto err;
	}
	rd->ibrd.context = &ctx->vctx.context;
	rd->handle = r.handle;
	rd->db_index = r.db_index;
	rd->dedicated = r.dedicated;
	rd->thread_model = IBV_EXP_THREAD_SAFE;
	rd->msg_model = IBV_EXP_MSG_DEFAULT;
	rd->refs = 1;
	rd->hidden = true;
	rd->index = idx;
	rd->next = ctx->idx_domains;
	ctx->idx_domains = rd;
out:
	pthread_mutex_unlock(&ctx->lock);
	return rd;
err:
	pthread_mutex_unlock(&ctx->lock);
	return sv_err_ptr(ret);
}

/* ---- the experimental API ---- */

SV_EXPORT struct ibv_exp_res_domain *
ibv_exp_create_res_domain(struct ibv_context *context,
			  struct ibv_exp_res_domain_init_attr *attr)
{
	enum ibv_exp_thread_model tm = IBV_EXP_THREAD_SAFE;
	enum ibv_exp_msg_model mm = IBV_EXP_MSG_DEFAULT;
	uint32_t msg, flags = 0;
	struct sv_res_domain *rd;
	struct sv_rsp_domain r;
	int ret;

	if (!context || !attr || (attr->comp_mask & ~SV_RD_INIT_KNOWN))
		return sv_err_ptr(-EINVAL);
	/* the enums may be unsigned: compare as unsigned values */
	if (attr->comp_mask & IBV_EXP_RES_DOMAIN_THREAD_MODEL) {
		if ((uint32_t)attr->thread_model > IBV_EXP_THREAD_SINGLE)
			return sv_err_ptr(-EINVAL);
		tm = attr->thread_model;
	}
	if (attr->comp_mask & IBV_EXP_RES_DOMAIN_MSG_MODEL) {
		if ((uint32_t)attr->msg_model > IBV_EXP_MSG_FORCE_LOW_LATENCY)
			return sv_err_ptr(-EINVAL);
		mm = attr->msg_model;
	}
	switch (mm) {
	case IBV_EXP_MSG_LOW_LATENCY:
		msg = SV_MSG_LOW_LATENCY;
		break;
	case IBV_EXP_MSG_HIGH_BW:
		msg = SV_MSG_HIGH_BW;
		break;
	case IBV_EXP_MSG_FORCE_LOW_LATENCY:
		/* a page of its own or nothing (the daemon: ENOMEM) */
		msg = SV_MSG_LOW_LATENCY;
		flags = SV_DOMAIN_DEDICATED;
		break;
	default:
		msg = SV_MSG_DEFAULT;
		break;
	}
	rd = calloc(1, sizeof(*rd));
	if (!rd)
		return sv_err_ptr(-ENOMEM);
	ret = sv_domain_create(to_sv_ctx(context), msg, flags, &r);
	if (ret) {
		free(rd);
		return sv_err_ptr(ret);
	}
	rd->ibrd.context = context;
	rd->handle = r.handle;
	rd->db_index = r.db_index;
	rd->dedicated = r.dedicated;
	rd->thread_model = tm;
	rd->msg_model = mm;
	return &rd->ibrd;
}

SV_EXPORT int ibv_exp_destroy_res_domain(struct ibv_context *context,
					 struct ibv_exp_res_domain *res_dom,
					 struct ibv_exp_destroy_res_domain_attr *attr)
{
	struct sv_res_domain *rd;
	int ret;

	if (!context || !res_dom || res_dom->context != context ||
	    (attr && attr->comp_mask))
		return EINVAL;
	rd = to_sv_rd(res_dom);
	if (rd->hidden)
		return EINVAL; /* not the application's */
	if (__atomic_load_n(&rd->refs, __ATOMIC_ACQUIRE))
		return EBUSY;
	ret = sv_domain_destroy(to_sv_ctx(context), rd->handle);
	if (ret)
		return -ret;
	free(rd);
	return 0;
}

/* ---- queries ---- */

SV_EXPORT int sv_query_res_domain(struct ibv_exp_res_domain *res_dom,
				  struct sv_res_domain_info *info)
{
	struct sv_res_domain *rd;

	if (!res_dom || !info)
		return EINVAL;
	rd = to_sv_rd(res_dom);
	memset(info, 0, sizeof(*info));
	info->db_index = rd->db_index;
	info->dedicated = rd->dedicated;
	info->thread_model = rd->thread_model;
	info->msg_model = rd->msg_model;
	return 0;
}

SV_EXPORT int sv_query_qp_db(struct ibv_qp *qp, uint32_t *db_index)
{
	if (!qp || !db_index)
		return EINVAL;
	/* the page its doorbell pointer is in */
	*db_index = (uint32_t)(((char *)to_sv_qp(qp)->db -
				(char *)to_sv_ctx(qp->context)->db_map) /
			       SV_DB_PAGE_BYTES);
	return 0;
}
