// SPDX-License-Identifier: MIT
/*
 * XRC domains (ibv_open_xrcd, ibv_close_xrcd).
 *
 * A domain opened with a file descriptor is the domain of that file: the
 * library sends the descriptor with the command and the daemon keys the
 * domain by the file's (st_dev, st_ino), so that every process opening the
 * same file shares one domain. fd -1 (or no
 * IBV_XRCD_INIT_ATTR_FD) makes a private domain. Without O_CREAT in
 * oflags, a file that names no domain yet is ENOENT; O_EXCL with a domain
 * that exists already is EEXIST.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "verbs/qp_ops.h"

#define SV_XRCD_INIT_KNOWN                                                   \
	((uint32_t)(IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS))

struct ibv_xrcd *sv_open_xrcd(struct ibv_context *context,
			      struct ibv_xrcd_init_attr *attr)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	struct sv_xrcd *x;
	int fd = -1, oflags = 0, ret;

	if (!attr || (attr->comp_mask & ~SV_XRCD_INIT_KNOWN))
		return sv_err_ptr(-EINVAL);
	if (attr->comp_mask & IBV_XRCD_INIT_ATTR_FD)
		fd = attr->fd;
	if (attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS)
		oflags = attr->oflags;
	if (oflags & ~(O_CREAT | O_EXCL))
		return sv_err_ptr(-EINVAL);
	sv_cmd_init(&cmd, SV_CMD_OPEN_XRCD);
	if (fd != -1) {
		struct stat st;

		if (fd < 0 || fstat(fd, &st))
			return sv_err_ptr(-EBADF);
		cmd.u.open_xrcd.flags = SV_XRCD_SHARED |
			((oflags & O_CREAT) ? SV_XRCD_CREATE : 0) |
			((oflags & O_EXCL) ? SV_XRCD_EXCL : 0);
	}
	x = calloc(1, sizeof(*x));
	if (!x)
		return sv_err_ptr(-ENOMEM);
	ret = sv_conn_call(&to_sv_ctx(context)->conn, &cmd, fd, &rsp, NULL);
	if (ret) {
		free(x);
		return sv_err_ptr(ret);
	}
	x->handle = rsp.u.obj.handle;
	x->ibxrcd.context = context;
	return &x->ibxrcd;
}

int sv_close_xrcd(struct ibv_xrcd *ibxrcd)
{
	struct sv_xrcd *x = to_sv_xrcd(ibxrcd);
	int ret = sv_destroy_obj(ibxrcd->context, SV_CMD_CLOSE_XRCD, x->handle);

	if (ret)
		return ret;     /* EBUSY: SRQs or QPs still use it */
	free(x);
	return 0;
}
