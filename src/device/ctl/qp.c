// SPDX-License-Identifier: MIT
/*
 * Queue pairs: the control side (srq.c has shared receive queues, ah.c
 * address handles, qp_int.h what the three share).
 *
 * A QP is pages of a memfd the daemon creates and seals (one of its client's
 * ring pools, ring.c), holding the send ring and (without an SRQ) the
 * receive ring, each a header page and power-of-two
 * slots (src/abi/sv_qp.h), plus daemon-private state: the QPN, the state of
 * the IBA state machine and the attributes MODIFY_QP set. Every handler runs
 * under sv_dev.lock, so the engine never sees a half-made change.
 *
 * QPNs are 24 bits: the low SV_MAX_QP_BITS index the device's QPN table
 * (slots 0 and 1 are never used, so QPNs 0 and 1 never appear), the upper
 * bits change with each creation, so a QPN that named a destroyed QP does not
 * name the next QP in its slot (a vanished peer stays vanished).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "abi/sv_op.h"
#include "abi/sv_tm.h"
#include "device/ctl/direct.h"
#include "device/ctl/qp_int.h"
#include "device/ctl/qp_state.h"
#include "device/exec/engine.h"
#include "device/exec/exec_int.h"
#include "device/exec/wq.h"
#include "device/roce/roce.h"
#include "device/sv_dev.h"

#define QPN_MASK ((1u << SV_MAX_QP_BITS) - 1)

/* The remote rights a QP grants; the MR-only bits that programs pass along
 * with them (rdma-core's ODP tests give a QP their MR's access, ON_DEMAND
 * included, and the kernel takes it) are taken and mean nothing here; the
 * FLUSH rights too (rdma-core 56's test_qpex sets them on RC QPs; a FLUSH
 * is checked against its MR's rights). */
#define SV_QP_ACCESS_OK                                                      \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                  \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |                 \
	 IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND | \
	 IBV_ACCESS_HUGETLB | SV_ACCESS_FLUSH_GLOBAL |                      \
	 SV_ACCESS_FLUSH_PERSISTENT)

static uint32_t qpn_cursor = 2;

/* ---- the QPN table ---- */

static int qpn_alloc(struct sv_qp *qp)
{
	for (uint32_t i = 0; i <= QPN_MASK; i++) {
		uint32_t slot = (qpn_cursor + i) & QPN_MASK;

		if (slot < 2 || sv_dev.qpn_tab[slot])
			continue;
		sv_dev.qpn_gen++;
		qp->qpn = ((sv_dev.qpn_gen << SV_MAX_QP_BITS) | slot) & SV_QPN_MASK;
		sv_dev.qpn_tab[slot] = qp;
		qpn_cursor = slot + 1;
		return 0;
	}
	return -ENOMEM;
}

struct sv_qp *sv_qp_lookup(uint32_t qpn)
{
	struct sv_qp *qp;

	if (qpn > SV_QPN_MASK)
		return NULL;
	qp = sv_dev.qpn_tab[qpn & QPN_MASK];
	return qp && qp->qpn == qpn ? qp : NULL;
}

/* ---- helpers ---- */

void sv_qp_wq_init(struct sv_wq *wq, void *hdr, uint32_t entries,
		   uint32_t stride, uint32_t max_sge, uint32_t max_inline)
{
	wq->hdr = hdr;
	wq->entries = entries;
	wq->stride = stride;
	wq->max_sge = max_sge;
	wq->max_inline = max_inline;
	wq->cons = 0;
	/* (DIRECT_RECV sets them for a QP's own receive queue, an SRQ's) */
	wq->xword = NULL;
	wq->xbase = 0;
	wq->dsrq = NULL;
	wq->dsrq_tag = 0;
	wq->hdr->entries = entries;
	wq->hdr->stride = stride;
	wq->hdr->max_sge = max_sge;
	wq->hdr->max_inline = max_inline;
	wq->hdr->qp_state = IBV_QPS_RESET;
}

/* Drop every posted WQE without a completion (a move to RESET). */
static void wq_discard(struct sv_wq *wq)
{
	if (!wq->entries)
		return;
	wq->cons = __atomic_load_n(&wq->hdr->prod, __ATOMIC_ACQUIRE);
	__atomic_store_n(&wq->hdr->cons, wq->cons, __ATOMIC_RELEASE);
}

static void qp_set_state(struct sv_qp *qp, uint32_t state)
{
	qp->state = state;
	qp->state_gen++;
	__atomic_store_n(&qp->sq.hdr->qp_state, state, __ATOMIC_RELEASE);
	if (qp->rq.entries)
		__atomic_store_n(&qp->rq.hdr->qp_state, state,
				 __ATOMIC_RELEASE);
	sv_direct_qp(qp);
}

/* A QP that could take or make direct copies changed: none that read its
 * old entry runs once the command answers. */
static void qp_revoke(uint32_t old_state)
{
	if (old_state == IBV_QPS_RTR || old_state == IBV_QPS_RTS ||
	    old_state == IBV_QPS_SQD || old_state == IBV_QPS_SQE)
		sv_direct_revoke();
}

/* ---- QPs ---- */

static int qp_caps(const struct sv_cmd_create_qp *a, bool has_rq,
		   uint32_t *sq_entries, uint32_t *sq_stride,
		   uint32_t *rq_entries, uint32_t *rq_stride,
		   struct sv_wire_qp_cap *cap, const char **why)
{
	const struct sv_wire_qp_cap *c = &a->cap;
	uint32_t body, sge;

	if (c->max_send_wr > SV_MAX_QP_WR ||
	    (has_rq && c->max_recv_wr > SV_MAX_QP_WR)) {
		*why = "max_send_wr or max_recv_wr above max_qp_wr";
		return -EINVAL;
	}
	if (c->max_send_sge > SV_MAX_SGE ||
	    (has_rq && c->max_recv_sge > SV_MAX_SGE)) {
		*why = "max_send_sge or max_recv_sge above max_sge";
		return -EINVAL;
	}
	if (c->max_inline_data > SV_MAX_INLINE) {
		*why = "max_inline_data above the device's";
		return -EINVAL;
	}
	*sq_entries = pow2_at_least(c->max_send_wr ? c->max_send_wr : 1);
	*sq_stride = sv_send_stride(c->max_send_sge ? c->max_send_sge : 1,
				    c->max_inline_data);
	/* report what a slot really holds, within the device's limits */
	body = *sq_stride - SV_SEND_WQE_HDR;
	sge = body / (uint32_t)sizeof(struct sv_wqe_sge);
	cap->max_send_wr = *sq_entries;
	cap->max_send_sge = sge < SV_MAX_SGE ? sge : SV_MAX_SGE;
	cap->max_inline_data = body < SV_MAX_INLINE ? body : SV_MAX_INLINE;
	if (has_rq) {
		*rq_entries = pow2_at_least(c->max_recv_wr ? c->max_recv_wr : 1);
		*rq_stride = sv_recv_stride(c->max_recv_sge ? c->max_recv_sge
							    : 1);
		sge = (*rq_stride - SV_RECV_WQE_HDR) /
		      (uint32_t)sizeof(struct sv_wqe_sge);
		cap->max_recv_wr = *rq_entries;
		cap->max_recv_sge = sge < SV_MAX_SGE ? sge : SV_MAX_SGE;
	} else {
		*rq_entries = 0;
		*rq_stride = 0;
		cap->max_recv_wr = 0;
		cap->max_recv_sge = 0;
	}
	return 0;
}

/* A CREATE_QP as its steps see it: the command (an XRC target's a copy
 * with no caps), the objects it names, its rings' sizes. */
struct qp_create {
	const struct sv_cmd_create_qp *a;
	struct sv_cmd_create_qp xa;    /* XRC_RECV */
	struct sv_pd *pd;
	struct sv_cq *scq, *rcq;
	struct sv_srq *srq;
	struct sv_domain *dom;
	struct sv_xrcd *xrcd;          /* XRC_RECV */
	uint32_t sq_entries, sq_stride, rq_entries, rq_stride;
	struct sv_wire_qp_cap cap;
	size_t rq_off, bytes;
	int out;
};

/* The QP type and the flags it may take. */
static int qp_check_type(struct sv_req *r, const struct sv_cmd_create_qp *a)
{
	switch (a->qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_UD:
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		break;
	case IBV_QPT_RAW_PACKET:
	case IBV_QPT_DRIVER:
		r->why = "QP type not supported";
		return -EOPNOTSUPP;
	default:
		r->why = "unknown QP type";
		return -EINVAL;
	}
	if (a->create_flags & ~(uint32_t)IBV_QP_CREATE_BLOCK_SELF_MCAST_LB) {
		r->why = "create_flags not supported";
		return -EOPNOTSUPP;
	}
	/* BLOCK_SELF_MCAST_LB: taken by every type, only UD sends
	 * multicast */
	/* the opcode table's, for the QP's type (abi/sv_op.h) */
	if (a->send_ops_flags & ~sv_op_ex_flags(a->qp_type)) {
		r->why = "send_ops_flags not supported";
		return -EOPNOTSUPP;
	}
	if (a->sq_sig_all > 1) {
		r->why = "sq_sig_all is not 0 or 1";
		return -EINVAL;
	}
	if (a->rsvd || a->rsvd2) {
		r->why = "reserved fields set";
		return -EINVAL;
	}
	return 0;
}

/* An XRC target: its XRC domain, and the command as one with no caps. */
static int qp_find_xrc_target(struct sv_req *r, struct qp_create *q)
{
	const struct sv_cmd_create_qp *a = q->a;

	/* a target: no PD, CQs, SRQ or work queues of its own (a
	 * one-slot send ring that nothing runs keeps the layout) */
	if (a->pd || a->send_cq || a->recv_cq || a->srq || a->domain ||
	    a->send_ops_flags) {
		r->why = "XRC_RECV takes an xrcd only";
		return -EINVAL;
	}
	q->xrcd = sv_req_obj(r, a->xrcd, SV_OBJ_XRCD);
	if (!q->xrcd)
		return -EINVAL;
	q->xa = *a;
	memset(&q->xa.cap, 0, sizeof(q->xa.cap));
	q->a = &q->xa;
	q->pd = NULL;
	q->scq = q->rcq = NULL;
	return 0;
}

/* Every other type: its PD, CQs, SRQ and domain. */
static int qp_find_objs(struct sv_req *r, struct qp_create *q)
{
	const struct sv_cmd_create_qp *a = q->a;
	struct sv_client *c = r->client;

	if (a->xrcd) {
		r->why = "xrcd given for a QP type that takes none";
		return -EINVAL;
	}
	if (a->qp_type == IBV_QPT_XRC_SEND &&
	    (a->recv_cq || a->srq || a->cap.max_recv_wr ||
	     a->cap.max_recv_sge)) {
		r->why = "an XRC_SEND QP has no receive side";
		return -EINVAL;
	}
	q->pd = sv_objtab_lookup(sv_client_tab(c, a->pd), a->pd, SV_OBJ_PD);
	q->scq = sv_objtab_lookup(sv_client_tab(c, a->send_cq), a->send_cq,
				  SV_OBJ_CQ);
	q->rcq = a->qp_type == IBV_QPT_XRC_SEND ? NULL :
		 sv_objtab_lookup(sv_client_tab(c, a->recv_cq), a->recv_cq,
				  SV_OBJ_CQ);
	if (!q->pd || !q->scq ||
	    (!q->rcq && a->qp_type != IBV_QPT_XRC_SEND)) {
		r->why = !q->pd ? "no such pd" : "no such cq";
		return -EINVAL;
	}
	if (a->srq) {
		q->srq = sv_req_obj(r, a->srq, SV_OBJ_SRQ);
		if (!q->srq)
			return -EINVAL;
		/* a tag-matching SRQ serves RC QPs (ibv_tm_caps: RC) */
		if (q->srq->type != IBV_SRQT_BASIC &&
		    !(q->srq->type == IBV_SRQT_TM && a->qp_type == IBV_QPT_RC)) {
			r->why = "srq type does not fit the QP";
			return -EINVAL;
		}
	}
	if (a->domain) {
		q->dom = sv_req_obj(r, a->domain, SV_OBJ_DOMAIN);
		if (!q->dom)
			return -EINVAL;
	}
	return 0;
}

/* Validation: the command, the objects it names, the caps it asks and
 * room for one more QP. Nothing made, nothing to undo. */
static int qp_validate(struct sv_req *r, struct qp_create *q)
{
	int ret;

	ret = qp_check_type(r, q->a);
	if (ret)
		return ret;
	if (q->a->qp_type == IBV_QPT_XRC_RECV)
		ret = qp_find_xrc_target(r, q);
	else
		ret = qp_find_objs(r, q);
	if (ret)
		return ret;
	ret = qp_caps(q->a, !q->srq && q->a->qp_type != IBV_QPT_XRC_SEND &&
			    q->a->qp_type != IBV_QPT_XRC_RECV,
		      &q->sq_entries, &q->sq_stride, &q->rq_entries,
		      &q->rq_stride, &q->cap, &r->why);
	if (ret)
		return ret;
	if (q->xrcd)
		memset(&q->cap, 0, sizeof(q->cap));   /* nothing to post to */
	if (sv_dev.nqp >= SV_MAX_QP) {
		r->why = "max_qp reached";
		return -ENOMEM;
	}
	return 0;
}

/* Allocation: the QP, its rings (charged to the client), its QPN and its
 * handle; *qpp once all are had, else each undone. */
static int qp_alloc(struct sv_req *r, struct qp_create *q,
		    struct sv_qp **qpp)
{
	struct sv_client *c = r->client;
	struct sv_qp *qp;
	size_t sq_bytes;
	int ret;

	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	qp->loc.memfd = -1;
	qp->xs_fd = -1;
	/* the receive ring on the cache line after the send ring's last
	 * slot: small queues share one page */
	sq_bytes = sv_wq_ring_bytes(q->sq_entries, q->sq_stride);
	q->rq_off = (sq_bytes + SV_CACHELINE - 1) &
		    ~(size_t)(SV_CACHELINE - 1);
	q->bytes = page_up(q->rq_off + (!q->rq_entries ? 0 :
		sv_wq_ring_bytes(q->rq_entries, q->rq_stride)));
	ret = sv_req_charge(r, q->bytes);
	if (ret) {
		free(qp);
		return ret;
	}
	ret = sv_ring_get(c, "softverbs-qp", q->bytes, &qp->loc, &qp->ring,
			  &q->out);
	if (ret) {
		sv_client_uncharge(c, q->bytes);
		free(qp);
		r->why = "cannot allocate the rings";
		return ret;
	}
	qp->ring_bytes = q->bytes;
	ret = qpn_alloc(qp);
	if (ret) {
		r->why = "no QPN left";
		goto err_out;
	}
	ret = sv_client_add_obj(r, SV_OBJ_QP, qp, &qp->handle);
	if (ret) {
		sv_dev.qpn_tab[qp->qpn & QPN_MASK] = NULL;
		goto err_out;
	}
	*qpp = qp;
	return 0;

err_out:
	close(q->out);
	sv_client_uncharge(c, qp->ring_bytes);
	sv_ring_put(&qp->loc, qp->ring, qp->ring_bytes);
	free(qp);
	if (!r->why)
		r->why = "cannot create the QP";
	return ret;
}

/* Publication: the QP filled in, in RESET, holding what it names, on its
 * engine, and the answer. Nothing fails from here. */
static void qp_publish(struct sv_req *r, const struct qp_create *q,
		       struct sv_qp *qp)
{
	const struct sv_cmd_create_qp *a = q->a;

	qp->owner = r->client;
	sv_inject_qp_new(qp);
	qp->cookie = a->cookie;
	qp->type = a->qp_type;
	qp->pd = q->pd;
	qp->send_cq = q->scq;
	qp->recv_cq = q->rcq;
	qp->srq = q->srq;
	qp->domain = q->dom;
	qp->sq_sig_all = a->sq_sig_all;
	qp->create_flags = a->create_flags;
	qp->send_ops_flags = a->send_ops_flags;
	qp->cap = q->cap;
	sv_direct_guard_reset(qp);
	sv_qp_wq_init(&qp->sq, qp->ring, q->sq_entries, q->sq_stride,
		      q->cap.max_send_sge, q->cap.max_inline_data);
	if (q->rq_entries)
		sv_qp_wq_init(&qp->rq, (char *)qp->ring + q->rq_off,
			      q->rq_entries, q->rq_stride, q->cap.max_recv_sge,
			      0);
	qp_set_state(qp, IBV_QPS_RESET);
	qp->xrcd = q->xrcd;
	if (q->xrcd)
		q->xrcd->refs++;
	if (q->pd)
		q->pd->refs++;
	if (q->scq)
		q->scq->refs++;
	if (q->rcq)
		q->rcq->refs++;
	if (q->srq)
		q->srq->refs++;
	if (q->dom)
		q->dom->refs++;
	sv_dev.nqp++;
	sv_engine_add_qp(qp, q->dom ? q->dom->engine : NULL);

	r->rsp->u.qp = (struct sv_rsp_qp){
		.handle = qp->handle,
		.qpn = qp->qpn,
		.db_index = sv_engine_index(qp->engine),
		.cap = q->cap,
		.sq_entries = q->sq_entries,
		.sq_stride = q->sq_stride,
		.rq_entries = q->rq_entries,
		.rq_stride = q->rq_stride,
		.sq_offset = 0,
		.rq_offset = q->rq_entries ? q->rq_off : 0,
		.ring_bytes = q->bytes,
		.ring_offset = qp->loc.offset,
	};
	r->fd_out = q->out;
}

int sv_cmd_create_qp(struct sv_req *r)
{
	struct qp_create q = { .a = &r->cmd->u.create_qp };
	struct sv_qp *qp;
	int ret;

	ret = qp_validate(r, &q);
	if (ret)
		return ret;
	ret = qp_alloc(r, &q, &qp);
	if (ret)
		return ret;
	qp_publish(r, &q, qp);
	return 0;
}

/* The value checks that the state table leaves to us. */
static int check_attr_values(const struct sv_qp *qp,
			     const struct sv_wire_qp_attr *at, uint32_t mask,
			     const char **why)
{
	if ((mask & IBV_QP_PORT) && at->port_num != 1) {
		*why = "no such port";
		return -EINVAL;
	}
	if ((mask & IBV_QP_PKEY_INDEX) &&
	    at->pkey_index >= sv_dev.port.pkey_tbl_len) {
		*why = "pkey_index out of range";
		return -EINVAL;
	}
	if ((mask & IBV_QP_ALT_PATH) &&
	    (at->alt_port_num != 1 ||
	     at->alt_pkey_index >= sv_dev.port.pkey_tbl_len ||
	     at->alt_timeout > 31 || sv_ah_check(&at->alt_ah_attr, why))) {
		if (!*why)
			*why = "alternate path out of range";
		return -EINVAL;
	}
	if ((mask & IBV_QP_ACCESS_FLAGS) &&
	    (at->qp_access_flags & ~(uint32_t)SV_QP_ACCESS_OK)) {
		*why = "unknown qp_access_flags";
		return -EINVAL;
	}
	if ((mask & IBV_QP_AV) && sv_ah_check(&at->ah_attr, why))
		return -EINVAL;
	if ((mask & IBV_QP_PATH_MTU) &&
	    (at->path_mtu < IBV_MTU_256 || at->path_mtu > sv_dev.port.max_mtu)) {
		*why = "path_mtu out of range";
		return -EINVAL;
	}
	if ((mask & IBV_QP_TIMEOUT) && at->timeout > 31) {
		*why = "timeout above 31";
		return -EINVAL;
	}
	if ((mask & IBV_QP_RETRY_CNT) && at->retry_cnt > 7) {
		*why = "retry_cnt above 7";
		return -EINVAL;
	}
	if ((mask & IBV_QP_RNR_RETRY) && at->rnr_retry > 7) {
		*why = "rnr_retry above 7";
		return -EINVAL;
	}
	if ((mask & IBV_QP_MIN_RNR_TIMER) && at->min_rnr_timer > 31) {
		*why = "min_rnr_timer above 31";
		return -EINVAL;
	}
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) &&
	    at->max_rd_atomic > SV_MAX_RD_ATOM) {
		*why = "max_rd_atomic above max_qp_init_rd_atom";
		return -EINVAL;
	}
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) &&
	    at->max_dest_rd_atomic > SV_MAX_RD_ATOM) {
		*why = "max_dest_rd_atomic above max_qp_rd_atom";
		return -EINVAL;
	}
	if ((mask & IBV_QP_DEST_QPN) && at->dest_qp_num > SV_QPN_MASK) {
		*why = "dest_qp_num is not 24 bits";
		return -EINVAL;
	}
	if ((mask & IBV_QP_PATH_MIG_STATE) &&
	    at->path_mig_state > IBV_MIG_ARMED) {
		*why = "unknown path_mig_state";
		return -EINVAL;
	}
	if ((mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) && at->en_sqd_async_notify > 1) {
		*why = "en_sqd_async_notify is not 0 or 1";
		return -EINVAL;
	}
	(void)qp;
	return 0;
}

static void apply_attrs(struct sv_qp *qp, const struct sv_wire_qp_attr *at,
			uint32_t mask)
{
	struct sv_wire_qp_attr *q = &qp->attr;

	if (mask & IBV_QP_PKEY_INDEX)
		q->pkey_index = at->pkey_index;
	if (mask & IBV_QP_PORT)
		q->port_num = at->port_num;
	if (mask & IBV_QP_QKEY)
		q->qkey = at->qkey;
	if (mask & IBV_QP_ACCESS_FLAGS)
		q->qp_access_flags = at->qp_access_flags;
	if (mask & IBV_QP_AV)
		q->ah_attr = at->ah_attr;
	if (mask & IBV_QP_PATH_MTU)
		q->path_mtu = at->path_mtu;
	if (mask & IBV_QP_TIMEOUT)
		q->timeout = at->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		q->retry_cnt = at->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		q->rnr_retry = at->rnr_retry;
	if (mask & IBV_QP_RQ_PSN)
		q->rq_psn = at->rq_psn & SV_PSN_MASK;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		q->max_rd_atomic = at->max_rd_atomic;
	if (mask & IBV_QP_ALT_PATH) {
		q->alt_ah_attr = at->alt_ah_attr;
		q->alt_port_num = at->alt_port_num;
		q->alt_pkey_index = at->alt_pkey_index;
		q->alt_timeout = at->alt_timeout;
	}
	if (mask & IBV_QP_MIN_RNR_TIMER)
		q->min_rnr_timer = at->min_rnr_timer;
	if (mask & IBV_QP_SQ_PSN)
		q->sq_psn = at->sq_psn & SV_PSN_MASK;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		q->max_dest_rd_atomic = at->max_dest_rd_atomic;
	if (mask & IBV_QP_PATH_MIG_STATE)
		q->path_mig_state = at->path_mig_state;
	if (mask & IBV_QP_DEST_QPN)
		q->dest_qp_num = at->dest_qp_num;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		q->en_sqd_async_notify = at->en_sqd_async_notify;
	if (mask & IBV_QP_RATE_LIMIT)
		q->rate_limit = at->rate_limit;
}

static void qp_reset(struct sv_qp *qp)
{
	/* (before its receive queue: the side's takes are its cons) */
	sv_direct_xside_free(qp);
	wq_discard(&qp->sq);
	wq_discard(&qp->rq);
	if (qp->sq.entries)
		sv_direct_sq_done(qp);
	memset(&qp->attr, 0, sizeof(qp->attr));
	qp->wait_until_ns = 0;
	qp->rnr_left = 0;
	qp->retry_left = 0;
	qp->head_started = false;
	qp->comm_est_sent = false;
	qp->last_wqe_sent = false;
	qp->sq_drained_sent = false;
	qp->sqd_armed = false;
}

int sv_cmd_modify_qp(struct sv_req *r)
{
	const struct sv_cmd_modify_qp *a = &r->cmd->u.modify_qp;
	const struct sv_wire_qp_attr *at = &a->attr;
	struct sv_qp *qp = sv_req_obj(r, a->qp, SV_OBJ_QP);
	uint32_t mask = a->attr_mask, cur, next;
	struct sv_wire_qp_attr saved;
	int ret;

	if (!qp)
		return -EINVAL;
	qp = sv_qp_resolve(qp);     /* an OPEN_QP handle: its target */
	if (a->rsvd) {
		r->why = "reserved fields set";
		return -EINVAL;
	}
	cur = qp->state;
	if ((mask & IBV_QP_CUR_STATE) && at->cur_qp_state != cur) {
		r->why = "cur_qp_state is not the QP's state";
		return -EINVAL;
	}
	next = (mask & IBV_QP_STATE) ? at->qp_state : cur;
	ret = sv_qp_check_modify(qp->type, cur, next, (int)mask, &r->why);
	if (ret)
		return ret;
	ret = check_attr_values(qp, at, mask, &r->why);
	if (ret)
		return ret;
	if (next == IBV_QPS_RESET) {
		sv_roce_qp_modify(qp, cur, next, &r->why);
		qp_reset(qp);
		qp_set_state(qp, IBV_QPS_RESET);
		/* the application may reuse its buffers once this returns */
		qp_revoke(cur);
		sv_engine_quiesce();
		sv_engine_kick(qp->engine);
		return 0;
	}
	saved = qp->attr;
	apply_attrs(qp, at, mask);
	if (next != cur) {
		/* a peer on another host: the wire takes the QP */
		ret = sv_roce_qp_modify(qp, cur, next, &r->why);
		if (ret) {
			qp->attr = saved;
			return ret;
		}
		if (next == IBV_QPS_SQD) {
			qp->sq_drained_sent = false;
			sv_exec_enter_sqd(qp);
		}
		if (cur == IBV_QPS_RESET)
			qp->comm_est_sent = false;
		qp_set_state(qp, next);
		/* a connection: the completion side senders of this host
		 * write (its memfd comes with the response) */
		if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR)
			sv_direct_xside_make(r, qp);
		/* (and the engine's flush closes it, whatever errs it) */
		if (next == IBV_QPS_ERR)
			sv_direct_xside_close(qp);
		if (next == IBV_QPS_ERR)
			sv_engine_quiesce();
		sv_engine_kick(qp->engine);
	} else {
		sv_direct_qp(qp);      /* its attributes */
	}
	qp_revoke(cur);
	return 0;
}

/* DIRECT_EST (abi/sv_cmd.h): the direct path's first WRITE to a peer in
 * RTR establishes it, as a first message does (src/verbs/direct.c). */
int sv_cmd_direct_est(struct sv_req *r)
{
	const struct sv_cmd_direct_est *a = &r->cmd->u.direct_est;
	struct sv_qp *qp = sv_req_obj(r, a->qp, SV_OBJ_QP), *t;

	if (!qp)
		return -EINVAL;
	if (qp->opened || qp->roce || qp->state != IBV_QPS_RTS ||
	    (qp->type != IBV_QPT_RC && qp->type != IBV_QPT_UC)) {
		r->why = "not a connected QP in RTS with its peer on this host";
		return -EINVAL;
	}
	t = sv_qp_lookup(qp->attr.dest_qp_num);
	if (!t || t == qp || t->opened || t->roce || t->type != qp->type ||
	    t->attr.dest_qp_num != qp->qpn) {
		r->why = "its peer is no QP of this host connected to it";
		return -ENOENT;
	}
	/* as the first message would (nothing when it is not in RTR, or
	 * established already) */
	sv_comm_est(t);
	return 0;
}

int sv_cmd_query_qp(struct sv_req *r)
{
	const struct sv_cmd_query_qp *a = &r->cmd->u.query_qp;
	struct sv_qp *qp = sv_req_obj(r, a->qp, SV_OBJ_QP);
	struct sv_rsp_query_qp *q = &r->rsp->u.query_qp;

	if (!qp)
		return -EINVAL;
	qp = sv_qp_resolve(qp);     /* an OPEN_QP handle: its target */
	if (a->rsvd) {
		r->why = "reserved fields set";
		return -EINVAL;
	}
	q->attr = qp->attr;
	q->attr.qp_state = qp->state;
	q->attr.cur_qp_state = qp->state;
	q->attr.sq_draining = 0; /* WQEs run to completion: SQD is drained */
	q->cap = qp->cap;
	q->qp_type = qp->type;
	q->sq_sig_all = qp->sq_sig_all;
	return 0;
}

/*
 * Let qp's engine run its send queue up to WQE number upto, or until it
 * cannot (sv_exec_sq_owes) or deadline passes: false then. The lock is
 * dropped while waiting; only the control thread (this one) creates and
 * frees objects or changes the engines' QP lists, so qp, and the list it
 * is in, stay.
 */
bool sv_qp_sq_drain(struct sv_qp *qp, uint32_t upto, uint64_t deadline)
{
	if (!qp->engine)
		return true;           /* nothing would run it */
	for (unsigned int round = 0;; round++) {
		uint64_t now = sv_now_ns();

		if (!sv_exec_sq_owes(qp, upto, now))
			return true;
		if (now >= deadline) {
			sv_log(SV_LOG_WARN, "qp %#x: WQEs still to run after "
			       "%llu ms: destroyed without them", qp->qpn,
			       (unsigned long long)(SV_DRAIN_NS / 1000000u));
			return false;
		}
		sv_engine_kick(qp->engine);
		sv_engine_ctl_pause(round);
	}
}

void sv_qp_destroy(struct sv_qp *qp)
{
	if (qp->opened) {
		sv_qp_open_close(qp);
		return;
	}
	/* an XRC target lives on while another process has it open */
	if (qp->type == IBV_QPT_XRC_RECV && sv_qp_pass_on(qp))
		return;
	sv_mcast_qp_destroy(qp);
	sv_engine_remove_qp(qp);
	if (sv_dev.qpn_tab[qp->qpn & QPN_MASK] == qp) {
		sv_dev.qpn_tab[qp->qpn & QPN_MASK] = NULL;
		sv_inject_qp_gone(qp);
	}
	/* unreachable now; an engine may still be copying for it, or the
	 * owner (directly) */
	qp->dead = true;
	sv_direct_qp_clear(qp);
	if (!qp->opened) {
		sv_direct_revoke();
		/* a WQE it claimed from its peer's SRQ and did not fill */
		sv_direct_adopt(qp, true);
		sv_direct_guard_reset(qp);
	}
	sv_direct_xside_free(qp);
	sv_engine_quiesce();
	sv_roce_qp_destroy(qp);
	sv_dev.nqp--;
	if (qp->domain)
		qp->domain->refs--;
	if (qp->type == IBV_QPT_XRC_RECV) {
		/* its pd and srq were borrowed per message */
		qp->xrcd->refs--;
	} else {
		qp->pd->refs--;
		qp->send_cq->refs--;
		if (qp->recv_cq)
			qp->recv_cq->refs--;
		if (qp->srq)
			qp->srq->refs--;
	}
	sv_client_uncharge(qp->owner, qp->ring_bytes);
	sv_ring_put(&qp->loc, qp->ring, qp->ring_bytes);
	free(qp);
}

int sv_cmd_destroy_qp(struct sv_req *r)
{
	uint64_t h = r->cmd->u.handle.handle;
	struct sv_qp *qp = sv_req_obj(r, h, SV_OBJ_QP);

	if (!qp)
		return -EINVAL;
	/* an OPEN_QP handle (an XRC target's) has no send queue */
	if (!qp->opened && qp->sq.hdr)
		sv_qp_sq_drain(qp, wq_prod(&qp->sq), sv_now_ns() + SV_DRAIN_NS);
	sv_client_del_obj(r->client, SV_OBJ_QP, h);
	sv_qp_destroy(qp);
	return 0;
}
