// SPDX-License-Identifier: MIT
/*
 * Memory windows: ALLOC_MW and DEALLOC_MW. A window has an rkey from the
 * device key table from the start; binding it (through the send queue:
 * sv_mm_bind_mw in exec/mm.c) gives it a part of an MR, a new consumer key and,
 * for type 2, the QP it is bound to.
 */
#include <errno.h>
#include <stdlib.h>

#include "device/sv_dev.h"

int sv_cmd_alloc_mw(struct sv_req *r)
{
	const struct sv_cmd_alloc_mw *a = &r->cmd->u.alloc_mw;
	struct sv_pd *pd;
	struct sv_mw *mw;
	int ret;

	pd = sv_req_obj(r, a->pd, SV_OBJ_PD);
	if (!pd)
		return -EINVAL;
	if (a->type < SV_MW_TYPE_1 || a->type > SV_MW_TYPE_2B) {
		r->why = "unknown window type";
		return -EINVAL;
	}
	if (a->rsvd) {
		r->why = "reserved field set";
		return -EINVAL;
	}
	if (sv_dev.total[SV_OBJ_MW] >= SV_MAX_MW) {
		r->why = "max_mw reached";
		return -ENOMEM;
	}
	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return -ENOMEM;
	mw->owner = r->client;
	mw->pd = pd;
	mw->type = a->type;
	ret = sv_keytab_alloc_kind(&sv_dev.keys, mw, SV_KEY_MW, &mw->key);
	if (ret) {
		r->why = "no free key";
		goto err_free;
	}
	ret = sv_client_add_obj(r, SV_OBJ_MW, mw, &mw->handle);
	if (ret)
		goto err_key;
	pd->refs++;
	r->rsp->u.mr.handle = mw->handle;
	r->rsp->u.mr.lkey = 0;
	r->rsp->u.mr.rkey = mw->key;
	return 0;

err_key:
	sv_keytab_free(&sv_dev.keys, mw->key);
err_free:
	free(mw);
	return ret;
}

void sv_mw_destroy(struct sv_mw *mw)
{
	bool bound = mw->bound;

	sv_keytab_free(&sv_dev.keys, mw->key);
	sv_mw_unbind(mw);
	/* a copy that resolved the window's grant ends before the reply */
	if (bound)
		sv_engine_quiesce();
	mw->pd->refs--;
	free(mw);
}

int sv_cmd_dealloc_mw(struct sv_req *r)
{
	uint64_t h = r->cmd->u.handle.handle;
	struct sv_mw *mw = sv_req_obj(r, h, SV_OBJ_MW);

	if (!mw)
		return -EINVAL;
	sv_client_del_obj(r->client, SV_OBJ_MW, h);
	sv_mw_destroy(mw);
	return 0;
}
