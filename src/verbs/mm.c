// SPDX-License-Identifier: MIT
/*
 * The memory-management extensions' objects and verbs (docs/DESIGN.md,
 * include/softverbs/softverbs.h): memory windows and ibv_bind_mw,
 * fast-register MRs, page lists in memory shared with the device,
 * block-list registration. The work requests that use them are posted by
 * post.c and wr.c (shared pieces in sv_post.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "verbs/sv_post.h"
#include "verbs/sv_verbs.h"

/* ---- memory windows ---- */

struct ibv_mw *sv_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	struct sv_mw *mw;
	uint32_t sv_type;
	int ret;

	if (!pd)
		return sv_err_ptr(-EINVAL);
	switch ((int)type) {
	case IBV_MW_TYPE_1:
		sv_type = SV_MW_TYPE_1;
		break;
	case IBV_MW_TYPE_2:
		sv_type = SV_MW_TYPE_2B;
		break;
	case (int)IBV_EXP_MW_TYPE_2A:
		sv_type = SV_MW_TYPE_2A;
		break;
	default:
		return sv_err_ptr(-EINVAL);
	}
	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return sv_err_ptr(-ENOMEM);
	sv_cmd_init(&cmd, SV_CMD_ALLOC_MW);
	cmd.u.alloc_mw.pd = to_sv_pd(pd)->handle;
	cmd.u.alloc_mw.type = sv_type;
	ret = sv_conn_call(sv_conn_of(pd->context), &cmd, -1, &rsp, NULL);
	if (ret) {
		free(mw);
		return sv_err_ptr(ret);
	}
	mw->handle = rsp.u.mr.handle;
	mw->ibmw.context = pd->context;
	mw->ibmw.pd = pd;
	mw->ibmw.rkey = rsp.u.mr.rkey;
	mw->ibmw.handle = (uint32_t)mw->handle;
	/* 2A and 2B are both type 2 to the application */
	mw->ibmw.type = sv_type == SV_MW_TYPE_1 ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2;
	return &mw->ibmw;
}

int sv_dealloc_mw(struct ibv_mw *ibmw)
{
	struct sv_mw *mw = (struct sv_mw *)ibmw;
	int ret = sv_destroy_obj(ibmw->context, SV_CMD_DEALLOC_MW, mw->handle);

	if (!ret)
		free(mw);
	return ret;
}

/*
 * ibv_bind_mw (the inline verb checked the window's type and the MR's PD):
 * a BIND_MW WQE of a type 1 window with the next consumer key, on the send
 * queue like any WR; mw->rkey is the new key from now on. No MR, or length
 * 0, unbinds. 0 or an errno value.
 */
int sv_bind_mw(struct ibv_qp *ibqp, struct ibv_mw *mw,
	       struct ibv_mw_bind *mw_bind)
{
	struct sv_qp *qp = to_sv_qp(ibqp);
	const struct ibv_mw_bind_info *bi;
	struct sv_send_wqe *w;
	uint32_t key;

	if (!ibqp || !mw || !mw_bind || mw->context != ibqp->context ||
	    mw->type != IBV_MW_TYPE_1)
		return EINVAL;
	bi = &mw_bind->bind_info;
	if ((bi->mr && bi->mr->context != ibqp->context) ||
	    (mw_bind->send_flags & ~SV_SEND_FLAGS_OK) ||
	    !sv_send_opcode_ok(ibqp->qp_type, IBV_WR_BIND_MW) ||
	    !sv_qp_send_state_ok(qp))
		return EINVAL;
	sv_sq_lock(qp);
	w = sv_sq_next_slot(qp);
	if (!w) {
		sv_sq_unlock(qp);
		return ENOMEM;
	}
	key = ibv_inc_rkey(mw->rkey);
	sv_wqe_head(w, mw_bind->wr_id, IBV_WR_BIND_MW, mw_bind->send_flags, 0,
		    0);
	sv_fill_bind(w, key, bi, SV_REG_TYPE1);
	mw->rkey = key;
	qp->sq.prod++;
	sv_sq_publish(qp);
	sv_sq_unlock(qp);
	return 0;
}

/* ---- fast-register MRs ---- */

SV_EXPORT struct ibv_mr *ibv_exp_alloc_fast_reg_mr(struct ibv_pd *pd,
						   int max_page_list_len)
{
	struct sv_cmd cmd;

	if (!pd || max_page_list_len < 1)
		return sv_err_ptr(-EINVAL);
	sv_cmd_init(&cmd, SV_CMD_ALLOC_MR);
	cmd.u.alloc_mr.pd = to_sv_pd(pd)->handle;
	cmd.u.alloc_mr.max_entries = (uint32_t)max_page_list_len;
	/* no memory yet: addr and length 0; ibv_dereg_mr frees it */
	return sv_mr_create(pd, &cmd, NULL, 0);
}

/* ---- page lists ---- */

/* The daemon's PAGE_LIST of max entries, mapped: 0 or -errno. */
static int page_list_alloc(struct ibv_context *context, uint32_t max,
			   struct sv_page_list *out)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	void *map;
	int ret, fd = -1;

	sv_cmd_init(&cmd, SV_CMD_ALLOC_PAGE_LIST);
	cmd.u.alloc_page_list.max_entries = max;
	ret = sv_conn_call(sv_conn_of(context), &cmd, -1, &rsp, &fd);
	if (ret)
		return ret;
	if (fd < 0 || rsp.u.page_list.max_entries != max ||
	    rsp.u.page_list.bytes < (uint64_t)max * 16) {
		ret = -EPROTO;
		goto err;
	}
	map = mmap(NULL, (size_t)rsp.u.page_list.bytes, PROT_READ | PROT_WRITE,
		   MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		ret = -errno;
		goto err;
	}
	close(fd);
	memset(out, 0, sizeof(*out));
	out->handle = rsp.u.page_list.handle;
	out->bytes = (size_t)rsp.u.page_list.bytes;
	out->pl.context = context;
	out->pl.page_list = map;
	out->pl.blocks = map;
	out->pl.max_page_list_len = max;
	return 0;

err:
	if (fd >= 0)
		close(fd);
	sv_destroy_obj(context, SV_CMD_FREE_PAGE_LIST,
		       rsp.u.page_list.handle);
	return ret;
}

/* FREE_PAGE_LIST, then unmap: 0 or a positive errno (still mapped). */
static int page_list_free(struct sv_page_list *l)
{
	int ret = sv_destroy_obj(l->pl.context, SV_CMD_FREE_PAGE_LIST,
				 l->handle);

	if (!ret)
		munmap(l->pl.page_list, l->bytes);
	return ret;
}

SV_EXPORT struct ibv_exp_fast_reg_page_list *
ibv_exp_alloc_fast_reg_page_list(struct ibv_context *context,
				 int max_page_list_len)
{
	struct sv_page_list *l;
	int ret;

	if (!context || max_page_list_len < 1)
		return sv_err_ptr(-EINVAL);
	l = calloc(1, sizeof(*l));
	if (!l)
		return sv_err_ptr(-ENOMEM);
	ret = page_list_alloc(context, (uint32_t)max_page_list_len, l);
	if (ret) {
		free(l);
		return sv_err_ptr(ret);
	}
	return &l->pl;
}

SV_EXPORT int ibv_exp_free_fast_reg_page_list(struct ibv_exp_fast_reg_page_list *pl)
{
	struct sv_page_list *l = to_sv_page_list(pl);
	int ret;

	if (!pl)
		return EINVAL;
	ret = page_list_free(l);
	if (!ret)
		free(l);
	return ret;
}

/* ---- block-list registration ---- */

/*
 * A temporary page list holds the blocks while REG_MR_LIST registers the
 * MR over them (the daemon keeps its own copy), then goes.
 */
SV_EXPORT struct ibv_mr *ibv_exp_reg_mr_blocks(struct ibv_pd *pd,
					       const struct ibv_exp_mem_block *blocks,
					       int nblocks, uint64_t iova,
					       unsigned int access)
{
	struct sv_page_list l;
	struct sv_cmd cmd;
	struct ibv_mr *mr;
	uint64_t total = 0;
	int ret;

	if (!pd || !blocks || nblocks < 1)
		return sv_err_ptr(-EINVAL);
	for (int i = 0; i < nblocks; i++) {
		if (!blocks[i].length || blocks[i].length > UINT64_MAX - total)
			return sv_err_ptr(-EINVAL);
		total += blocks[i].length;
	}
	ret = page_list_alloc(pd->context, (uint32_t)nblocks, &l);
	if (ret)
		return sv_err_ptr(ret);
	_Static_assert(sizeof(struct ibv_exp_mem_block) ==
			       sizeof(struct sv_mem_block),
		       "mem block");
	memcpy(l.pl.blocks, blocks, (size_t)nblocks * sizeof(*blocks));
	sv_cmd_init(&cmd, SV_CMD_REG_MR_LIST);
	cmd.u.reg_mr_list.pd = to_sv_pd(pd)->handle;
	cmd.u.reg_mr_list.list = l.handle;
	cmd.u.reg_mr_list.length = total;
	cmd.u.reg_mr_list.iova = iova;
	cmd.u.reg_mr_list.nentries = (uint32_t)nblocks;
	cmd.u.reg_mr_list.access = sv_mr_access(access);
	cmd.u.reg_mr_list.flags = SV_REG_BLOCKS;
	mr = sv_mr_create(pd, &cmd,
			  (void *)(uintptr_t)(access & IBV_ACCESS_ZERO_BASED ?
						      0 :
						      iova),
			  total);
	/* the daemon copied the blocks (or failed): the list goes either way */
	ret = errno;
	page_list_free(&l);
	errno = ret;
	return mr;
}
