// SPDX-License-Identifier: MIT
/*
 * Shared receive queues: the control side. An SRQ is pages of a memfd the
 * daemon creates and seals (one of its client's ring pools, ring.c): its
 * receive ring, a header page and power-of-two slots (src/abi/sv_qp.h),
 * and a tag-matching SRQ's ops ring after it, plus daemon-private state:
 * its SRQ number (xrc.c), its limit, its CQ and XRC domain. CREATE_SRQ,
 * MODIFY_SRQ (the limit; IBV_SRQ_MAX_WR resizes the ring), QUERY_SRQ and
 * DESTROY_SRQ run under sv_dev.lock, so no engine takes a WQE from a ring
 * that is changing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi/sv_tm.h"
#include "device/ctl/direct.h"
#include "device/ctl/qp_int.h"
#include "device/exec/engine.h"
#include "device/exec/wq.h"
#include "device/sv_dev.h"

/* A CREATE_SRQ as its steps see it: the command, the objects it names,
 * its rings' sizes. */
struct srq_create {
	const struct sv_cmd_create_srq *a;
	struct sv_pd *pd;
	struct sv_xrcd *xrcd;
	struct sv_cq *cq;
	uint32_t entries, stride, sge, ops;
	size_t bytes, ops_off;
	int out;
};

/* Validation: the type and what it takes, the sizes, the PD and room for
 * one more SRQ; then the receive ring's size. Nothing made. */
static int srq_validate(struct sv_req *r, struct srq_create *s)
{
	const struct sv_cmd_create_srq *a = s->a;

	if (a->srq_type == IBV_SRQT_TM) {
		/* its ops' completions (and its receives') go to its CQ */
		s->cq = sv_req_obj(r, a->cq, SV_OBJ_CQ);
		if (!s->cq || a->xrcd)
			return -EINVAL;
		if (!a->max_num_tags || a->max_num_tags > SV_TM_MAX_TAGS ||
		    a->max_ops > SV_TM_MAX_OPS) {
			r->why = "max_num_tags or max_ops out of range";
			return -EINVAL;
		}
	} else if (a->srq_type == IBV_SRQT_XRC) {
		s->xrcd = sv_req_obj(r, a->xrcd, SV_OBJ_XRCD);
		s->cq = s->xrcd ? sv_req_obj(r, a->cq, SV_OBJ_CQ) : NULL;
		if (!s->cq)
			return -EINVAL;
	} else if (a->srq_type != IBV_SRQT_BASIC || a->cq || a->xrcd) {
		r->why = "unknown SRQ type, or cq/xrcd for a basic SRQ";
		return -EINVAL;
	}
	if (!a->max_wr || a->max_wr > SV_MAX_SRQ_WR ||
	    a->max_sge > SV_MAX_SGE) {
		r->why = "max_wr or max_sge out of range";
		return -EINVAL;
	}
	s->pd = sv_req_obj(r, a->pd, SV_OBJ_PD);
	if (!s->pd)
		return -EINVAL;
	if (sv_dev.total[SV_OBJ_SRQ] >= SV_MAX_SRQ) {
		r->why = "max_srq reached";
		return -ENOMEM;
	}
	s->entries = pow2_at_least(a->max_wr);
	s->stride = sv_recv_stride(a->max_sge ? a->max_sge : 1);
	s->sge = (s->stride - SV_RECV_WQE_HDR) /
		 (uint32_t)sizeof(struct sv_wqe_sge);
	if (s->sge > SV_MAX_SGE)
		s->sge = SV_MAX_SGE;
	return 0;
}

/* Allocation: the SRQ (a tag-matching one's lists), its rings (charged to
 * the client), its number and its handle; *srqp once all are had, else
 * each undone. */
static int srq_alloc(struct sv_req *r, struct srq_create *s,
		     struct sv_srq **srqp)
{
	const struct sv_cmd_create_srq *a = s->a;
	struct sv_client *c = r->client;
	struct sv_srq *srq;
	int ret;

	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return -ENOMEM;
	if (a->srq_type == IBV_SRQT_TM) {
		srq->tm = sv_tm_new(a->max_num_tags, a->max_ops);
		if (!srq->tm) {
			free(srq);
			return -ENOMEM;
		}
	}
	s->bytes = page_up(sv_wq_ring_bytes(s->entries, s->stride));
	if (srq->tm) {
		/* the ops ring, after the receive ring */
		s->ops_off = s->bytes;
		s->ops = pow2_at_least(a->max_ops ? a->max_ops : 1);
		s->bytes += page_up(sv_wq_ring_bytes(s->ops, SV_TM_OP_STRIDE));
	}
	ret = sv_req_charge(r, s->bytes);
	if (ret) {
		free(srq->tm);
		free(srq);
		return ret;
	}
	ret = sv_ring_get(c, "softverbs-srq", s->bytes, &srq->loc, &srq->ring,
			  &s->out);
	if (ret) {
		sv_client_uncharge(c, s->bytes);
		free(srq->tm);
		free(srq);
		r->why = "cannot allocate the ring";
		return ret;
	}
	srq->ring_bytes = s->bytes;
	ret = sv_srqn_alloc(srq);
	if (ret) {
		close(s->out);
		r->why = "no SRQ number left";
		goto err_ring;
	}
	ret = sv_client_add_obj(r, SV_OBJ_SRQ, srq, &srq->handle);
	if (ret) {
		sv_srqn_free(srq);
		close(s->out);
		goto err_ring;
	}
	*srqp = srq;
	return 0;

err_ring:
	sv_client_uncharge(c, srq->ring_bytes);
	sv_ring_put(&srq->loc, srq->ring, srq->ring_bytes);
	free(srq->tm);
	free(srq);
	return ret;
}

/* Publication: the SRQ filled in, holding what it names (a tag-matching
 * one on its engine), and the answer. Nothing fails from here. */
static void srq_publish(struct sv_req *r, const struct srq_create *s,
			struct sv_srq *srq)
{
	const struct sv_cmd_create_srq *a = s->a;

	srq->owner = r->client;
	srq->cookie = a->cookie;
	srq->pd = s->pd;
	srq->type = a->srq_type;
	srq->xrcd = s->xrcd;
	srq->cq = s->cq;
	if (s->xrcd)
		s->xrcd->refs++;
	if (s->cq)
		s->cq->refs++;
	srq->max_wr = s->entries;
	srq->limit = 0; /* ibv_create_srq ignores srq_limit; modify arms it */
	sv_qp_wq_init(&srq->rq, srq->ring, s->entries, s->stride, s->sge, 0);
	srq->rq.hdr->qp_state = 0;
	if (srq->tm) {
		sv_qp_wq_init(&srq->tm_ops, (char *)srq->ring + s->ops_off,
			      s->ops, SV_TM_OP_STRIDE, 0, 0);
		srq->tm->kdone = &srq->tm_ops.hdr->done;
		sv_engine_add_srq(srq);
	}
	s->pd->refs++;
	r->rsp->u.srq = (struct sv_rsp_srq){
		.handle = srq->handle,
		.srqn = srq->srqn,
		.db_index = 0,
		.max_wr = s->entries,
		.max_sge = s->sge,
		.entries = s->entries,
		.stride = s->stride,
		.ring_bytes = s->bytes,
		.tm_ops_offset = s->ops_off,
		.tm_ops_entries = s->ops,
		.ring_offset = srq->loc.offset,
	};
	r->fd_out = s->out;
}

int sv_cmd_create_srq(struct sv_req *r)
{
	struct srq_create s = { .a = &r->cmd->u.create_srq };
	struct sv_srq *srq;
	int ret;

	ret = srq_validate(r, &s);
	if (ret)
		return ret;
	ret = srq_alloc(r, &s, &srq);
	if (ret)
		return ret;
	srq_publish(r, &s, srq);
	return 0;
}

/*
 * Resize srq's receive ring to hold max_wr (IBV_SRQ_MAX_WR, as rxe's
 * rxe_queue_resize): a new ring of pow2_at_least(max_wr) slots, the WQEs
 * posted and not yet taken copied into it under the same free-running
 * numbers (prod and cons carry over, so a head WQE an engine has peeked,
 * and fills unlocked meanwhile, is still the head it commits), then the
 * daemon's view switched; all under sv_dev.lock, so no engine takes a WQE
 * meanwhile. The library holds its post lock across the command and maps
 * the new ring from the response (as CREATE_SRQ's). A max_wr below the
 * WQEs posted is -EINVAL. The old ring goes back to the pool once no
 * engine can be looking at it.
 */
static int srq_resize(struct sv_req *r, struct sv_srq *srq, uint32_t max_wr,
		      uint32_t limit)
{
	struct sv_client *c = r->client;
	uint32_t entries, prod, pending, cons = srq->rq.cons;
	struct sv_ring_loc loc, old_loc = srq->loc;
	void *ring, *old_ring = srq->ring;
	size_t bytes, old_bytes = srq->ring_bytes;
	struct sv_wq nw;
	bool corrupt;
	int ret, out;

	/* senders of this host that take its WQEs: none through the old
	 * ring from here on (a word a scribbler changed starts again at
	 * our own cons) */
	(void)sv_direct_srq_moved(srq, false, &cons);
	pending = wq_pending(&srq->rq, &corrupt);
	if (corrupt || srq->in_error) {
		r->why = "the SRQ is in error";
		return -EINVAL;
	}
	prod = cons + pending;
	if (max_wr < pending) {
		r->why = "max_wr below the receives posted";
		return -EINVAL;
	}
	entries = pow2_at_least(max_wr);
	bytes = page_up(sv_wq_ring_bytes(entries, srq->rq.stride));
	ret = sv_req_charge(r, bytes);
	if (ret)
		return ret;
	ret = sv_ring_get(c, "softverbs-srq", bytes, &loc, &ring, &out);
	if (ret) {
		sv_client_uncharge(c, bytes);
		r->why = "cannot allocate the ring";
		return ret;
	}
	sv_qp_wq_init(&nw, ring, entries, srq->rq.stride, srq->rq.max_sge, 0);
	nw.hdr->qp_state = 0;
	for (uint32_t n = cons; n != prod; n++)
		memcpy(sv_wq_slot(nw.hdr, entries, nw.stride, n),
		       wq_slot(&srq->rq, n), nw.stride);
	nw.cons = cons;
	nw.hdr->cons = cons;
	nw.hdr->srq_limit = limit;
	nw.dsrq = srq->rq.dsrq;
	nw.dsrq_tag = srq->rq.dsrq_tag;
	__atomic_store_n(&nw.hdr->prod, prod, __ATOMIC_RELEASE);
	/* the switch: engines find the ring through srq->rq only */
	srq->rq = nw;
	srq->loc = loc;
	srq->ring = ring;
	srq->ring_bytes = bytes;
	srq->max_wr = entries;
	srq->limit = limit;
	r->rsp->u.srq = (struct sv_rsp_srq){
		.handle = srq->handle,
		.srqn = srq->srqn,
		.db_index = 0,
		.max_wr = entries,
		.max_sge = srq->rq.max_sge,
		.entries = entries,
		.stride = srq->rq.stride,
		.ring_bytes = bytes,
		.ring_offset = loc.offset,
	};
	r->fd_out = out;
	sv_engine_quiesce();   /* a copy still looking at the old ring */
	sv_client_uncharge(c, old_bytes);
	sv_ring_put(&old_loc, old_ring, old_bytes);
	return 0;
}

int sv_cmd_modify_srq(struct sv_req *r)
{
	const struct sv_cmd_modify_srq *a = &r->cmd->u.modify_srq;
	struct sv_srq *srq =
		sv_req_obj(r, a->srq, SV_OBJ_SRQ);
	uint32_t limit, max_wr;

	if (!srq) {
		r->why = "no such srq";
		return -EINVAL;
	}
	if (a->attr_mask & ~(uint32_t)(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT) ||
	    a->rsvd) {
		r->why = "unknown srq attribute";
		return -EINVAL;
	}
	/* checked as a whole before anything changes (rxe_srq_chk_attr):
	 * the limit, new or armed, may not pass the new size */
	limit = a->attr_mask & IBV_SRQ_LIMIT ? a->srq_limit : srq->limit;
	max_wr = srq->max_wr;
	if (a->attr_mask & IBV_SRQ_MAX_WR) {
		if (srq->tm) {
			/* its ops ring shares the mapping, ops in flight */
			r->why = "a tag-matching SRQ is not resized";
			return -EOPNOTSUPP;
		}
		if (!a->max_wr || a->max_wr > SV_MAX_SRQ_WR) {
			r->why = "max_wr out of range";
			return -EINVAL;
		}
		max_wr = a->max_wr;
	}
	if (limit > max_wr) {
		r->why = a->attr_mask & IBV_SRQ_LIMIT ?
			 "srq_limit above max_wr" :
			 "max_wr below the armed srq_limit";
		return -EINVAL;
	}
	if (a->attr_mask & IBV_SRQ_MAX_WR)
		return srq_resize(r, srq, max_wr, limit);
	if (a->attr_mask & IBV_SRQ_LIMIT) {
		srq->limit = a->srq_limit;
		__atomic_store_n(&srq->rq.hdr->srq_limit, a->srq_limit,
				 __ATOMIC_RELEASE);
	}
	return 0;
}

int sv_cmd_query_srq(struct sv_req *r)
{
	struct sv_srq *srq = sv_req_obj(r, r->cmd->u.handle.handle, SV_OBJ_SRQ);

	if (!srq)
		return -EINVAL;
	r->rsp->u.query_srq.max_wr = srq->max_wr;
	r->rsp->u.query_srq.max_sge = srq->rq.max_sge;
	r->rsp->u.query_srq.srq_limit = srq->limit;
	return 0;
}

void sv_srq_destroy(struct sv_srq *srq)
{
	uint32_t cons;

	(void)sv_direct_srq_moved(srq, true, &cons); /* no claim through it */
	sv_srqn_free(srq);     /* no message finds it now */
	sv_engine_remove_srq(srq);
	sv_engine_quiesce();   /* a receive being filled from its ring */
	srq->pd->refs--;
	if (srq->xrcd)
		srq->xrcd->refs--;
	if (srq->cq)
		srq->cq->refs--;
	sv_client_uncharge(srq->owner, srq->ring_bytes);
	sv_ring_put(&srq->loc, srq->ring, srq->ring_bytes);
	free(srq->tm);
	free(srq);
}

int sv_cmd_destroy_srq(struct sv_req *r)
{
	uint64_t h = r->cmd->u.handle.handle;
	struct sv_srq *srq = sv_req_obj(r, h, SV_OBJ_SRQ);

	if (!srq)
		return -EINVAL;
	if (srq->refs) {
		r->why = "srq still has QPs";
		return -EBUSY;
	}
	sv_client_del_obj(r->client, SV_OBJ_SRQ, h);
	sv_srq_destroy(srq);
	return 0;
}
