// SPDX-License-Identifier: MIT
/*
 * Address handles: the control side, and the check of every address
 * vector (an AH's, a QP's primary and alternate path). An AH is the
 * daemon's alone: its PD and address vector, which the engine looks up
 * by handle when it runs a UD WQE; so DESTROY_AH first lets the WQEs
 * posted before it that name the AH run (qp_int.h, SV_DRAIN_NS).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "device/ctl/qp_int.h"
#include "device/exec/engine.h"
#include "device/exec/wq.h"
#include "device/sv_dev.h"

/* Checks an address vector; 0 or -EINVAL with *why. RoCE needs a GRH. */
int sv_ah_check(const struct sv_wire_ah *ah, const char **why)
{
	if (ah->port_num != 1) {
		*why = "address vector: no such port";
		return -EINVAL;
	}
	if (!ah->is_global) {
		*why = "address vector without GRH (RoCE needs a GID)";
		return -EINVAL;
	}
	if (ah->sgid_index >= SV_GID_TBL_LEN ||
	    !sv_dev.gid[ah->sgid_index].valid) {
		*why = "address vector: sgid_index names no GID";
		return -EINVAL;
	}
	return 0;
}

int sv_cmd_create_ah(struct sv_req *r)
{
	const struct sv_cmd_create_ah *a = &r->cmd->u.create_ah;
	struct sv_pd *pd = sv_req_obj(r, a->pd, SV_OBJ_PD);
	struct sv_ah *ah;
	int ret;

	if (!pd)
		return -EINVAL;
	ret = sv_ah_check(&a->attr, &r->why);
	if (ret)
		return ret;
	if (sv_dev.total[SV_OBJ_AH] >= SV_MAX_AH) {
		r->why = "max_ah reached";
		return -ENOMEM;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return -ENOMEM;
	ret = sv_client_add_obj(r, SV_OBJ_AH, ah, &ah->handle);
	if (ret) {
		free(ah);
		return ret;
	}
	ah->owner = r->client;
	ah->pd = pd;
	ah->attr = a->attr;
	pd->refs++;
	r->rsp->u.obj.handle = ah->handle;
	return 0;
}

void sv_ah_destroy(struct sv_ah *ah)
{
	ah->pd->refs--;
	free(ah);
}

/* One past the last WQE posted on qp (a UD QP) that names the AH handle
 * ah; cons when none does. The slots are the client's to write: what is
 * read here only decides how long to wait. */
static uint32_t ah_upto(const struct sv_qp *qp, uint64_t ah)
{
	bool corrupt;
	uint32_t n = wq_pending(&qp->sq, &corrupt), upto = qp->sq.cons;

	for (uint32_t i = 0; i < n; i++) {
		const struct sv_send_wqe *w = wq_slot(&qp->sq, qp->sq.cons + i);
		uint64_t h;

		memcpy(&h, &w->ud.ah, sizeof(h));
		if (h == ah)
			upto = qp->sq.cons + i + 1;
	}
	return upto;
}

/* The engine looks a UD WQE's AH up when it runs it: the WQEs posted
 * before DESTROY_AH that name it (on the owner's UD QPs of its PD) run
 * first. */
static void ah_drain(const struct sv_ah *ah)
{
	uint64_t deadline = sv_now_ns() + SV_DRAIN_NS;

	for (unsigned int i = 0; i < SV_DB_PAGES; i++) {
		struct sv_engine *e = sv_dev.engine[i];
		struct sv_qp *qp = e ? e->qps : NULL;

		if (!qp)
			continue;
		do {
			if (qp->owner == ah->owner && qp->type == IBV_QPT_UD &&
			    qp->pd == ah->pd &&
			    (qp->state == IBV_QPS_RTS ||
			     qp->state == IBV_QPS_SQD))
				sv_qp_sq_drain(qp, ah_upto(qp, ah->handle),
					       deadline);
			qp = qp->eng_next;
		} while (qp != e->qps);
	}
}

int sv_cmd_destroy_ah(struct sv_req *r)
{
	uint64_t h = r->cmd->u.handle.handle;
	struct sv_ah *ah = sv_req_obj(r, h, SV_OBJ_AH);

	if (!ah)
		return -EINVAL;
	ah_drain(ah);
	sv_client_del_obj(r->client, SV_OBJ_AH, h);
	sv_ah_destroy(ah);
	return 0;
}
