// SPDX-License-Identifier: MIT
/*
 * Device memory (issue 23, Deliver 2): ibv_alloc_dm, ibv_free_dm,
 * ibv_memcpy_to_dm / ibv_memcpy_from_dm and ibv_reg_dm_mr.
 *
 * The device's ALLOC_DM hands us a sealed memfd (src/device/ctl/dm.c); we map
 * it and keep its descriptor, which is how the device knows an MR over the
 * mapping to be memory both sides map (its direct copies are plain loads
 * and stores). The copies to and from DM are memcpy through our mapping.
 * A DM MR is a zero-based MR over [map + dm_offset, + length): addr NULL,
 * as rdma-core's ibv_cmd_reg_dm_mr leaves it (the mapping is not the
 * application's to see); length 0 is taken, as mlx5 takes it. A DM with MRs over it is busy (EBUSY), as the
 * kernel's usecnt makes it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "verbs/sv_verbs.h"

static struct sv_dm *to_sv_dm(struct ibv_dm *dm)
{
	return (struct sv_dm *)dm;
}

/* [off, off + len) within the DM's length? */
static bool dm_range_ok(const struct sv_dm *dm, uint64_t off, uint64_t len)
{
	return off <= dm->length && len <= dm->length - off;
}

/* A copy's check, as mlx5 makes it (DM is reached in 4-byte words): EFAULT
 * past the end, EINVAL for an offset or length not a multiple of 4. */
static int dm_copy_check(const struct sv_dm *dm, uint64_t off, size_t len,
			 const void *host)
{
	if (!dm_range_ok(dm, off, len))
		return EFAULT;
	if ((off | len) & 3)
		return EINVAL;
	if (len && !host)
		return EFAULT;
	return 0;
}

static int dm_memcpy_to(struct ibv_dm *ibdm, uint64_t off, const void *host,
			size_t len)
{
	struct sv_dm *dm = to_sv_dm(ibdm);
	int ret = dm_copy_check(dm, off, len, host);

	if (!ret && len)
		memcpy((char *)dm->map + off, host, len);
	return ret;
}

static int dm_memcpy_from(void *host, struct ibv_dm *ibdm, uint64_t off,
			  size_t len)
{
	struct sv_dm *dm = to_sv_dm(ibdm);
	int ret = dm_copy_check(dm, off, len, host);

	if (!ret && len)
		memcpy(host, (const char *)dm->map + off, len);
	return ret;
}

/* Map the DM's memfd fd (bytes long; length as allocated) into dm and fill
 * its verbs part; takes fd on success. */
static int dm_setup(struct sv_dm *dm, struct ibv_context *context,
		    uint64_t handle, int fd, uint64_t bytes, uint64_t length)
{
	void *map;

	if (fd < 0 || bytes < length || !length || bytes > SIZE_MAX)
		return -EPROTO;
	map = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
		   fd, 0);
	if (map == MAP_FAILED)
		return -errno;
	dm->ibdm.context = context;
	dm->ibdm.memcpy_to_dm = dm_memcpy_to;
	dm->ibdm.memcpy_from_dm = dm_memcpy_from;
	dm->ibdm.comp_mask = IBV_DM_MASK_HANDLE;
	dm->ibdm.handle = (uint32_t)handle;
	dm->handle = handle;
	dm->map = map;
	dm->bytes = (size_t)bytes;
	dm->length = length;
	dm->fd = fd;
	return 0;
}

struct ibv_dm *sv_alloc_dm(struct ibv_context *context,
			   struct ibv_alloc_dm_attr *attr)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	struct sv_dm *dm;
	int ret, fd = -1;

	if (!attr || attr->comp_mask || !attr->length)
		return sv_err_ptr(-EINVAL);
	dm = calloc(1, sizeof(*dm));
	if (!dm)
		return sv_err_ptr(-ENOMEM);
	sv_cmd_init(&cmd, SV_CMD_ALLOC_DM);
	cmd.u.alloc_dm.length = attr->length;
	cmd.u.alloc_dm.log_align = attr->log_align_req;
	ret = sv_conn_call(sv_conn_of(context), &cmd, -1, &rsp, &fd);
	if (ret) {
		free(dm);
		return sv_err_ptr(ret);
	}
	ret = dm_setup(dm, context, rsp.u.dm.handle, fd, rsp.u.dm.bytes,
		       attr->length);
	if (!ret)
		return &dm->ibdm;
	if (fd >= 0)
		close(fd);
	sv_destroy_obj(context, SV_CMD_FREE_DM, rsp.u.dm.handle);
	free(dm);
	return sv_err_ptr(ret);
}

/* The DM of context's (imported) context named by dm_handle, mapped here
 * too; ibv_free_dm frees it for all, ibv_unimport_dm only here. */
SV_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *context,
				       uint32_t dm_handle)
{
	struct sv_rsp rsp;
	struct sv_dm *dm;
	int ret, fd = -1;

	if (!context)
		return sv_err_ptr(-EINVAL);
	dm = calloc(1, sizeof(*dm));
	if (!dm)
		return sv_err_ptr(-ENOMEM);
	ret = sv_import_obj(context, SV_OBJ_DM, dm_handle, 0, &rsp, &fd);
	if (!ret)
		ret = dm_setup(dm, context, rsp.u.import.handle, fd,
			       rsp.u.import.bytes, rsp.u.import.length);
	if (!ret)
		return &dm->ibdm;
	if (fd >= 0)
		close(fd);
	free(dm);
	return sv_err_ptr(ret);
}

SV_EXPORT void ibv_unimport_dm(struct ibv_dm *ibdm)
{
	struct sv_dm *dm = to_sv_dm(ibdm);

	if (!ibdm)
		return;
	munmap(dm->map, dm->bytes);
	close(dm->fd);
	free(dm);
}

int sv_free_dm(struct ibv_dm *ibdm)
{
	struct sv_dm *dm = to_sv_dm(ibdm);
	int ret;

	if (__atomic_load_n(&dm->mrs, __ATOMIC_ACQUIRE))
		return EBUSY;
	ret = sv_destroy_obj(ibdm->context, SV_CMD_FREE_DM, dm->handle);
	if (ret)
		return ret;
	munmap(dm->map, dm->bytes);
	close(dm->fd);
	free(dm);
	return 0;
}

struct ibv_mr *sv_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *ibdm,
			    uint64_t dm_offset, size_t length,
			    unsigned int access)
{
	struct sv_dm *dm = to_sv_dm(ibdm);
	struct ibv_mr *mr;
	struct sv_cmd cmd;

	/* zero-based always: the mapping is not the application's to see */
	if (!pd || !ibdm || pd->context != ibdm->context ||
	    !(access & IBV_ACCESS_ZERO_BASED) ||
	    !dm_range_ok(dm, dm_offset, length))
		return sv_err_ptr(-EINVAL);
	sv_cmd_init(&cmd, SV_CMD_REG_MR);
	cmd.u.reg_mr.pd = to_sv_pd(pd)->handle;
	cmd.u.reg_mr.addr = (uintptr_t)dm->map + dm_offset;
	cmd.u.reg_mr.length = length;
	cmd.u.reg_mr.iova = 0;
	cmd.u.reg_mr.access = sv_mr_access(access);
	cmd.u.reg_mr.flags = SV_REG_MR_DM;
	cmd.u.reg_mr.dm = dm->handle;
	__atomic_add_fetch(&dm->mrs, 1, __ATOMIC_ACQ_REL);
	mr = sv_mr_create(pd, &cmd, NULL, length);
	if (!mr) {
		int e = errno;

		__atomic_sub_fetch(&dm->mrs, 1, __ATOMIC_ACQ_REL);
		errno = e;
		return NULL;
	}
	((struct sv_mr *)mr)->dm = dm;
	return mr;
}
