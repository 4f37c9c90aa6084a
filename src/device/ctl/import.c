// SPDX-License-Identifier: MIT
/*
 * Importing a context and its objects (ibv_import_device, ibv_import_pd,
 * ibv_import_mr, ibv_import_dm): docs/DESIGN.md "Importing objects".
 *
 * A context's cmd_fd is its token: a memfd of no size, sealed, that the
 * device made for it and keeps open, so that its inode names that context
 * and no other while the context lives. Whoever holds a descriptor of it was
 * given it (dup, SCM_RIGHTS, pidfd_getfd), as the kernel's uverbs file is
 * given: holding it is the right to import. A forged or foreign descriptor
 * matches no token and is refused.
 *
 * An importer is a connection of its own (its own rings, doorbells and
 * events) that also sees the exporter's object table: a handle without
 * SV_OBJTAB_IMPORT_BIT is the exporter's, one with it the importer's own.
 * What the importer makes goes in its own table and goes with it. When the
 * exporter's connection goes, its importers' objects go first (they may
 * hold the exporter's PDs and MRs), and the importers are orphaned.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "device/sv_dev.h"

int sv_cmd_context_token(struct sv_req *r)
{
	struct sv_client *c = r->client->exporter ? r->client->exporter :
						    r->client;
	struct stat st;
	int fd;

	if (c->token_fd < 0) {
		fd = memfd_create("softverbs-context", MFD_CLOEXEC |
						       MFD_ALLOW_SEALING);
		if (fd < 0)
			return -errno;
		if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
					   F_SEAL_WRITE | F_SEAL_SEAL) ||
		    fstat(fd, &st)) {
			int e = -errno;

			close(fd);
			return e;
		}
		c->token_fd = fd;
		c->token_dev = st.st_dev;
		c->token_ino = st.st_ino;
	}
	r->fd_out = fcntl(c->token_fd, F_DUPFD_CLOEXEC, 0);
	return r->fd_out < 0 ? -errno : 0;
}

int sv_cmd_import_context(struct sv_req *r)
{
	struct sv_client *c = r->client, *x;
	struct stat st;
	int ret;

	if (r->fd_in < 0 || fstat(r->fd_in, &st)) {
		r->why = "no descriptor";
		return -EINVAL;
	}
	for (x = sv_dev.clients.next; x != &sv_dev.clients; x = x->next)
		if (!x->dead && x->token_fd >= 0 &&
		    x->token_dev == (uint64_t)st.st_dev &&
		    x->token_ino == (uint64_t)st.st_ino)
			break;
	if (x == &sv_dev.clients) {
		r->why = "the descriptor is no context's cmd_fd";
		return -EINVAL;
	}
	if (x == c) {
		r->why = "a context cannot import itself";
		return -EINVAL;
	}
	if (c->exporter || c->token_fd >= 0 || c->orphan) {
		r->why = "the context is shared already";
		return -EINVAL;
	}
	ret = sv_objtab_mark_import(&c->objs);
	if (ret) {
		r->why = "the context has objects of its own";
		return ret == -EBUSY ? -EINVAL : ret;
	}
	c->exporter = x;
	sv_log(SV_LOG_INFO, "client %llu (pid %d) imported client %llu (pid %d)",
	       (unsigned long long)c->id, (int)c->pid,
	       (unsigned long long)x->id, (int)x->pid);
	return 0;
}

int sv_cmd_import_obj(struct sv_req *r)
{
	const struct sv_cmd_import_obj *a = &r->cmd->u.import_obj;
	struct sv_rsp_import *o = &r->rsp->u.import;
	struct sv_objtab *t = sv_client_tab(r->client, a->handle);
	uint64_t h;

	if (a->type != SV_OBJ_PD && a->type != SV_OBJ_MR &&
	    a->type != SV_OBJ_DM) {
		r->why = "only PDs, MRs and DMs are imported";
		return -EINVAL;
	}
	if (a->type != SV_OBJ_MR && a->pd) {
		r->why = "reserved fields set";
		return -EINVAL;
	}
	h = sv_objtab_widen(t, a->handle, a->type);
	if (!h) {
		r->why = "the handle names no such object";
		return -EINVAL;
	}
	o->handle = h;
	if (a->type == SV_OBJ_MR) {
		const struct sv_mr *mr = sv_objtab_lookup(t, h, SV_OBJ_MR);
		const struct sv_pd *pd = sv_req_obj(r, a->pd, SV_OBJ_PD);

		if (!pd)
			return -EINVAL;
		if (mr->pd != pd) {
			r->why = "the MR lies in another PD";
			return -EINVAL;
		}
		o->length = mr->length;
		o->iova = mr->iova;
		o->lkey = mr->key;
		o->rkey = mr->key;
		o->access = mr->access;
	} else if (a->type == SV_OBJ_DM) {
		const struct sv_dm *dm = sv_objtab_lookup(t, h, SV_OBJ_DM);

		o->length = dm->length;
		o->bytes = dm->bytes;
		r->fd_out = fcntl(dm->fd, F_DUPFD_CLOEXEC, 0);
		if (r->fd_out < 0)
			return -errno;
	}
	return 0;
}
