// SPDX-License-Identifier: MIT
/*
 * Device memory (issue 23, Deliver 2; docs/DESIGN.md "Device memory"): a
 * zero-filled memfd the device makes, sealed so that it can neither shrink
 * nor grow, that the owning process maps. What the verbs call DM is memory
 * on the NIC that the host reaches by loads and stores; here it is memory
 * the device hands out and counts, which both the process and the device
 * can map. An MR over it (ibv_reg_dm_mr) is an ordinary zero-based MR over
 * the process's mapping, so every path (the engines, RoCEv2, the direct
 * path) works on it as it works on any MR; being a sealed memfd the process
 * holds a descriptor of, it is also what the direct path copies with plain
 * loads and stores (mrfile.c).
 *
 * The device keeps its own descriptor of each DM (the memory lives as long
 * as the DM does, whatever the process does to its mapping) and counts the
 * bytes of all of them against SV_DM_MAX_BYTES, which it reports as
 * max_dm_size.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "device/sv_dev.h"

static uint64_t dm_bytes;          /* of every DM on the device */

int sv_cmd_alloc_dm(struct sv_req *r)
{
	const struct sv_cmd_alloc_dm *a = &r->cmd->u.alloc_dm;
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE), bytes;
	struct sv_dm *dm;
	int fd, ret;

	if (!a->length) {
		r->why = "length 0";
		return -EINVAL;
	}
	if (a->log_align >= 64 || a->rsvd) {
		r->why = a->rsvd ? "reserved field set" : "alignment out of range";
		return -EINVAL;
	}
	if (a->length > SV_DM_MAX_BYTES) {
		r->why = "more than max_dm_size";
		return -EINVAL;     /* as mlx5 says it */
	}
	bytes = (a->length + pg - 1) & ~(pg - 1);
	if (bytes > SV_DM_MAX_BYTES - dm_bytes) {
		r->why = "device memory used up";
		return -ENOMEM;
	}
	dm = calloc(1, sizeof(*dm));
	if (!dm)
		return -ENOMEM;
	ret = sv_req_charge(r, bytes);
	if (ret) {
		free(dm);
		return ret;
	}
	fd = sv_memfd_sealed("softverbs-dm", bytes);
	if (fd < 0) {
		ret = fd;
		sv_client_uncharge(r->client, bytes);
		free(dm);
		r->why = "cannot allocate the memory";
		return ret;
	}
	dm->owner = r->client;
	dm->fd = fd;
	dm->bytes = bytes;
	dm->length = a->length;
	ret = sv_client_add_obj(r, SV_OBJ_DM, dm, &dm->handle);
	if (ret) {
		close(fd);
		sv_client_uncharge(r->client, bytes);
		free(dm);
		return ret;
	}
	dm_bytes += bytes;
	/* the client gets a descriptor of its own; the device keeps this one */
	r->fd_out = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (r->fd_out < 0) {
		ret = -errno;
		sv_client_del_obj(r->client, SV_OBJ_DM, dm->handle);
		sv_dm_destroy(dm);
		return ret;
	}
	r->rsp->u.dm.handle = dm->handle;
	r->rsp->u.dm.bytes = bytes;
	return 0;
}

void sv_dm_destroy(struct sv_dm *dm)
{
	dm_bytes -= dm->bytes;
	sv_client_uncharge(dm->owner, dm->bytes);
	close(dm->fd);
	free(dm);
}

int sv_cmd_free_dm(struct sv_req *r)
{
	uint64_t h = r->cmd->u.handle.handle;
	struct sv_dm *dm = sv_req_obj(r, h, SV_OBJ_DM);

	if (!dm)
		return -EINVAL;
	sv_client_del_obj(r->client, SV_OBJ_DM, h);
	sv_dm_destroy(dm);
	return 0;
}
