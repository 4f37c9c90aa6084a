// SPDX-License-Identifier: MIT
/*
 * Protection domains and memory regions. Registration is one command: the
 * daemon checks the range against the process's mappings and pins nothing.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "verbs/sv_verbs.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

/* A PD struct for the device's PD that cmd (ALLOC_PD, or IMPORT_OBJ of a
 * PD) gives: its handle from the response. */
static struct ibv_pd *pd_from(struct ibv_context *context, struct sv_cmd *cmd)
{
	bool alloc = cmd->hdr.op == SV_CMD_ALLOC_PD;
	struct sv_rsp rsp;
	struct sv_pd *pd;
	int ret;

	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return sv_err_ptr(-ENOMEM);
	ret = sv_conn_call(sv_conn_of(context), cmd, -1, &rsp, NULL);
	if (ret) {
		free(pd);
		return sv_err_ptr(ret);
	}
	pd->handle = alloc ? rsp.u.obj.handle : rsp.u.import.handle;
	pd->ibpd.context = context;
	pd->ibpd.handle = (uint32_t)pd->handle;
	return &pd->ibpd;
}

SV_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct sv_cmd cmd;

	sv_cmd_init(&cmd, SV_CMD_ALLOC_PD);
	return pd_from(context, &cmd);
}

SV_EXPORT int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
	struct sv_pd *pd = to_sv_pd(ibpd);
	int ret;

	/* a parent domain goes without the daemon (its PD is its parent's);
	 * a PD that still has parent domains is busy */
	if (pd->parent || pd->refs)
		return -sv_dealloc_parent_domain(pd);
	ret = sv_destroy_obj(ibpd->context, SV_CMD_DEALLOC_PD, pd->handle);
	if (!ret)
		free(pd);
	return ret;
}

int sv_import_obj(struct ibv_context *context, unsigned int type,
		  uint32_t handle, uint64_t pd, struct sv_rsp *rsp, int *fd)
{
	struct sv_cmd cmd;

	sv_cmd_init(&cmd, SV_CMD_IMPORT_OBJ);
	cmd.u.import_obj.type = type;
	cmd.u.import_obj.handle = handle;
	cmd.u.import_obj.pd = pd;
	return sv_conn_call(sv_conn_of(context), &cmd, -1, rsp, fd);
}

/* The PD of context's (imported) context named by pd_handle: the same PD
 * (ibv_dealloc_pd frees it for every holder; ibv_unimport_pd frees only
 * this struct). */
SV_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *context,
				       uint32_t pd_handle)
{
	struct sv_cmd cmd;

	if (!context)
		return sv_err_ptr(-EINVAL);
	sv_cmd_init(&cmd, SV_CMD_IMPORT_OBJ);
	cmd.u.import_obj.type = SV_OBJ_PD;
	cmd.u.import_obj.handle = pd_handle;
	return pd_from(context, &cmd);
}

SV_EXPORT void ibv_unimport_pd(struct ibv_pd *ibpd)
{
	struct sv_pd *pd = to_sv_pd(ibpd);

	/* a parent domain is not a PD the device knows */
	if (pd && !pd->parent)
		free(pd);
}

/* The MR named by mr_handle, which must lie in pd. As rdma-core's, its addr
 * is NULL: the memory is wherever the exporter registered it (iova is
 * what keys name). */
SV_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *ibpd,
				       uint32_t mr_handle)
{
	struct sv_rsp rsp;
	struct sv_mr *mr;
	int ret;

	if (!ibpd || to_sv_pd(ibpd)->parent)
		return sv_err_ptr(-EINVAL);
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return sv_err_ptr(-ENOMEM);
	ret = sv_import_obj(ibpd->context, SV_OBJ_MR, mr_handle,
			    to_sv_pd(ibpd)->handle, &rsp, NULL);
	if (ret || rsp.u.import.length > SIZE_MAX) {
		free(mr);
		return sv_err_ptr(ret ? ret : -EPROTO);
	}
	mr->handle = rsp.u.import.handle;
	mr->ibmr.context = ibpd->context;
	mr->ibmr.pd = ibpd;
	mr->ibmr.length = (size_t)rsp.u.import.length;
	mr->ibmr.handle = (uint32_t)mr->handle;
	mr->ibmr.lkey = rsp.u.import.lkey;
	mr->ibmr.rkey = rsp.u.import.rkey;
	return &mr->ibmr;
}

SV_EXPORT void ibv_unimport_mr(struct ibv_mr *ibmr)
{
	free((struct sv_mr *)ibmr);  /* ibmr is its first member */
}

struct ibv_mr *sv_mr_create(struct ibv_pd *pd, struct sv_cmd *cmd,
			     void *addr, uint64_t length)
{
	struct sv_rsp rsp;
	struct sv_mr *mr;
	int ret;

	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return sv_err_ptr(-ENOMEM);
	ret = sv_conn_call(sv_conn_of(pd->context), cmd, -1, &rsp, NULL);
	if (ret) {
		free(mr);
		return sv_err_ptr(ret);
	}
	mr->handle = rsp.u.mr.handle;
	mr->ibmr.context = pd->context;
	mr->ibmr.pd = pd;
	mr->ibmr.addr = addr;
	mr->ibmr.length = length;
	mr->ibmr.handle = (uint32_t)mr->handle;
	mr->ibmr.lkey = rsp.u.mr.lkey;
	mr->ibmr.rkey = rsp.u.mr.rkey;
	return &mr->ibmr;
}

SV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *ibpd, void *addr,
					  size_t length, uint64_t iova,
					  unsigned int access)
{
	struct sv_cmd cmd;

	if (!ibpd)
		return sv_err_ptr(-EINVAL);
	sv_cmd_init(&cmd, SV_CMD_REG_MR);
	cmd.u.reg_mr.pd = to_sv_pd(ibpd)->handle;
	cmd.u.reg_mr.addr = (uintptr_t)addr;
	cmd.u.reg_mr.length = length;
	cmd.u.reg_mr.iova = iova;
	cmd.u.reg_mr.access = sv_mr_access(access);
	return sv_mr_create(ibpd, &cmd, addr, length);
}

SV_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr,
					 size_t length, uint64_t iova,
					 int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned int)access);
}

SV_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr,
				    size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr,
				(unsigned int)access);
}

SV_EXPORT int ibv_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *pd,
			   void *addr, size_t length, int access)
{
	struct sv_mr *mr = (struct sv_mr *)ibmr;
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret;

	/* a DM MR's translation is its DM's; the kernel refuses to rereg it */
	if (mr->dm) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (!flags || flags & ~(IBV_REREG_MR_CHANGE_TRANSLATION |
				IBV_REREG_MR_CHANGE_PD |
				IBV_REREG_MR_CHANGE_ACCESS) ||
	    ((flags & IBV_REREG_MR_CHANGE_PD) && !pd) ||
	    ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || !length))) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	sv_cmd_init(&cmd, SV_CMD_REREG_MR);
	cmd.u.rereg_mr.mr = mr->handle;
	cmd.u.rereg_mr.flags = (uint32_t)flags;
	if (flags & IBV_REREG_MR_CHANGE_PD)
		cmd.u.rereg_mr.pd = to_sv_pd(pd)->handle;
	cmd.u.rereg_mr.addr = (uintptr_t)addr;
	cmd.u.rereg_mr.length = length;
	cmd.u.rereg_mr.iova = (uintptr_t)addr;
	cmd.u.rereg_mr.access = sv_mr_access((unsigned int)access);
	ret = sv_conn_call(sv_conn_of(ibmr->context), &cmd, -1, &rsp, NULL);
	if (ret) {
		errno = -ret;
		return IBV_REREG_MR_ERR_CMD;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD)
		ibmr->pd = pd;
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		ibmr->addr = addr;
		ibmr->length = length;
	}
	ibmr->lkey = rsp.u.mr.lkey;
	ibmr->rkey = rsp.u.mr.rkey;
	return 0;
}

SV_EXPORT int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct sv_mr *mr = (struct sv_mr *)ibmr;
	int ret = sv_destroy_obj(ibmr->context, SV_CMD_DEREG_MR, mr->handle);

	if (ret)
		return ret;
	if (mr->dm)
		__atomic_sub_fetch(&mr->dm->mrs, 1, __ATOMIC_ACQ_REL);
	free(mr);
	return ret;
}

/*
 * ibv_advise_mr on on-demand MRs (issue 23, Deliver 1). The device checks
 * each range against its MR (ADVISE_MR); a prefetch is then this process
 * faulting the pages in itself (MADV_POPULATE_READ / _WRITE): the device
 * pins nothing, and what it reaches later it reaches through these pages.
 * PREFETCH_NO_FAULT asks for pages that are there already: nothing to do.
 * Without IBV_ADVISE_MR_FLAG_FLUSH the advice may fail quietly (the
 * kernel's is asynchronous); with it, a range that cannot be faulted in
 * (not mapped, no access, or not writable for PREFETCH_WRITE) is EFAULT.
 * On a kernel older than MADV_POPULATE_* (5.14) a prefetch does nothing.
 */
/* Does this kernel know MADV_POPULATE_READ (5.14)? Its EINVAL then means
 * the range (no access, a special mapping), not an unknown advice. */
static bool populate_known(void)
{
	static int known = -1;
	static char probe[1];

	if (known < 0)
		known = !madvise((void *)((uintptr_t)probe &
					  ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1)),
				 1, MADV_POPULATE_READ);
	return known;
}

int sv_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		 uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge)
{
	long pg = sysconf(_SC_PAGESIZE);

	if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return EOPNOTSUPP;
	if ((flags & ~(uint32_t)IBV_ADVISE_MR_FLAG_FLUSH) || !num_sge ||
	    !sg_list)
		return EINVAL;
	for (uint32_t i = 0; i < num_sge; i++) {
		struct sv_cmd cmd;
		struct sv_rsp rsp;
		uintptr_t start, end;
		int ret;

		sv_cmd_init(&cmd, SV_CMD_ADVISE_MR);
		cmd.u.advise_mr.pd = to_sv_pd(pd)->handle;
		cmd.u.advise_mr.lkey = sg_list[i].lkey;
		cmd.u.advise_mr.addr = sg_list[i].addr;
		cmd.u.advise_mr.length = sg_list[i].length;
		ret = sv_conn_call(sv_conn_of(pd->context), &cmd, -1, &rsp,
				   NULL);
		if (ret)
			return -ret;
		if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT ||
		    !sg_list[i].length)
			continue;
		start = (uintptr_t)rsp.u.advise.va & ~(uintptr_t)(pg - 1);
		end = (uintptr_t)rsp.u.advise.va + sg_list[i].length;
		if (end < start)
			return EFAULT;
		if (madvise((void *)start, end - start,
			    advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE ?
				    MADV_POPULATE_WRITE : MADV_POPULATE_READ) &&
		    (flags & IBV_ADVISE_MR_FLAG_FLUSH) &&
		    (errno != EINVAL || populate_known()))
			return EFAULT;
	}
	return 0;
}
