// SPDX-License-Identifier: MIT
/*
 * Queue pairs: create, modify, query, destroy.
 *
 * The daemon creates a QP's rings in a sealed memfd (at ring_offset of it:
 * one memfd holds many rings of this connection's; then send ring at
 * sq_offset, receive ring at rq_offset) and says how big they are; the
 * library maps them, checks that the sizes it was told fit the mapping, and
 * from then on uses only its private copies of those sizes: the ring headers
 * live in memory the application can scribble on. (On a parent domain with
 * allocator callbacks, the mapping lies over a block they gave: td.c.)
 *
 * A QP is made in a daemon domain (its doorbell page and engine) when the
 * API names one: a thread domain through a parent domain, or, through
 * ibv_exp_create_qp, a resource domain or a domain index (resdom.c); the
 * latter win over the former. It posts without locks in a thread domain or
 * in a resource domain whose thread model is not SAFE.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "verbs/qp_ops.h"
#include "verbs/sv_post.h"

#define SV_QP_INIT_ATTR_KNOWN                                                \
	((uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |            \
		    IBV_QP_INIT_ATTR_CREATE_FLAGS |                          \
		    IBV_QP_INIT_ATTR_MAX_TSO_HEADER |                        \
		    IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH |  \
		    IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
#define SV_QP_INIT_ATTR_SUPPORTED                                            \
	((uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS |    \
		    IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_XRCD))

/* Bounds on the sizes a response may state, so that the stride arithmetic
 * cannot overflow whatever the daemon says. */
#define SV_SANE_SGE    (1u << 16)
#define SV_SANE_INLINE (1u << 24)

/* A ring of no entries (a QP whose receives go to an SRQ): always full, so
 * nothing ever writes it. */
static struct sv_wq_ring sv_empty_ring;

static bool is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

/* Does the ring of entries slots of stride bytes at offset fit in bytes? */
static bool ring_fits(uint64_t offset, uint32_t entries, uint32_t stride,
		      uint64_t bytes)
{
	if (offset % SV_CACHELINE || offset > bytes)
		return false;
	/* entries, stride < 2^32 each: the product fits in 64 bits */
	return (uint64_t)SV_RING_HDR_BYTES + (uint64_t)entries * stride <=
	       bytes - offset;
}

/* Check one work queue of the create response and point wq at its ring. */
static int setup_wq(struct sv_wq *wq, void *map, uint64_t map_bytes,
		    uint64_t offset, uint32_t entries, uint32_t stride,
		    uint32_t max_wr, uint32_t max_sge, uint32_t max_inline,
		    uint32_t need_stride)
{
	memset(wq, 0, sizeof(*wq));
	if (!entries) {
		if (max_wr)
			return -EPROTO;
		wq->hdr = &sv_empty_ring;
		return 0;
	}
	if (!is_pow2(entries) || max_wr > entries || stride < need_stride ||
	    !ring_fits(offset, entries, stride, map_bytes))
		return -EPROTO;
	wq->hdr = (struct sv_wq_ring *)((char *)map + offset);
	wq->entries = entries;
	wq->stride = stride;
	wq->max_sge = max_sge;
	wq->max_inline = max_inline;
	/* a fresh ring starts at the device's counter */
	wq->prod = __atomic_load_n(&wq->hdr->prod, __ATOMIC_RELAXED);
	return 0;
}

static int map_rings(struct sv_context *ctx, struct sv_qp *qp, int fd,
		     const struct sv_rsp_qp *r, bool has_srq,
		     struct sv_pd *alloc_pd)
{
	const struct sv_wire_qp_cap *cap = &r->cap;
	struct stat st;
	void *map;
	int ret;

	if (fd < 0 || r->ring_bytes < SV_RING_HDR_BYTES ||
	    r->ring_bytes > SIZE_MAX || r->db_index >= ctx->db_pages ||
	    cap->max_send_sge > SV_SANE_SGE || cap->max_recv_sge > SV_SANE_SGE ||
	    cap->max_inline_data > SV_SANE_INLINE ||
	    (has_srq && (r->rq_entries || cap->max_recv_wr)))
		return -EPROTO;
	if (fstat(fd, &st))
		return -errno;
	/* the rings lie at ring_offset of the memfd (a pool of rings) */
	if (r->ring_offset % 4096 || r->ring_offset > (uint64_t)st.st_size ||
	    (uint64_t)st.st_size - r->ring_offset < r->ring_bytes)
		return -EPROTO;
	/* our own mapping, or a block of the parent domain's allocator */
	ret = sv_ring_map(&qp->mem, alloc_pd, SV_RES_TYPE_QP, fd,
			  r->ring_offset, r->ring_bytes);
	if (ret)
		return ret;
	map = qp->mem.map;
	ret = setup_wq(&qp->sq, map, r->ring_bytes, r->sq_offset, r->sq_entries,
		       r->sq_stride, cap->max_send_wr, cap->max_send_sge,
		       cap->max_inline_data,
		       sv_send_stride(cap->max_send_sge, cap->max_inline_data));
	if (!ret)
		ret = setup_wq(&qp->rq, map, r->ring_bytes, r->rq_offset,
			       r->rq_entries, r->rq_stride, cap->max_recv_wr,
			       cap->max_recv_sge, 0,
			       sv_recv_stride(cap->max_recv_sge));
	if (ret) {
		sv_ring_unmap(&qp->mem);
		return ret;
	}
	qp->ring = map;
	qp->ring_bytes = r->ring_bytes;
	qp->db = (struct sv_doorbell *)((char *)ctx->db_map +
					(size_t)r->db_index * SV_DB_PAGE_BYTES);
	qp->max_send_wr = cap->max_send_wr;
	qp->max_recv_wr = cap->max_recv_wr;
	return 0;
}

/* What the caller asked for, before anything is sent: 0 or -errno. */
static int check_init_attr(struct ibv_context *context,
			   const struct ibv_qp_init_attr_ex *a)
{
	if (a->comp_mask & ~SV_QP_INIT_ATTR_KNOWN)
		return -EINVAL;
	if (a->comp_mask & ~SV_QP_INIT_ATTR_SUPPORTED)
		return -EOPNOTSUPP;
	switch (a->qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_UD:
	case IBV_QPT_XRC_SEND:
		break;
	case IBV_QPT_XRC_RECV:
		/* a target: an XRC domain, nothing else */
		if (!(a->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !a->xrcd ||
		    a->xrcd->context != context)
			return -EINVAL;
		if (((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
		     a->create_flags) ||
		    ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
		     a->send_ops_flags))
			return -EOPNOTSUPP;
		return 0;
	case IBV_QPT_RAW_PACKET:
	case IBV_QPT_DRIVER:
		return -EOPNOTSUPP;
	default:
		return -EINVAL;
	}
	if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd ||
	    a->pd->context != context)
		return -EINVAL;
	/* the one creation flag offered: a UD QP does not receive its own
	 * multicast sends */
	if ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
	    (a->create_flags & ~(uint32_t)IBV_QP_CREATE_BLOCK_SELF_MCAST_LB))
		return -EOPNOTSUPP;
	if ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    (a->send_ops_flags & ~sv_send_ops_ok(a->qp_type)))
		return -EOPNOTSUPP;
	if (a->qp_type == IBV_QPT_XRC_SEND) {
		/* an initiator: no receive side (a recv_cq is ignored) */
		if (a->srq)
			return -EINVAL;
		if (!a->send_cq || a->send_cq->context != context)
			return -EINVAL;
		return 0;
	}
	if (!a->send_cq || !a->recv_cq || a->send_cq->context != context ||
	    a->recv_cq->context != context)
		return -EINVAL;
	if (a->srq && a->srq->context != context)
		return -EINVAL;
	return 0;
}

/* The create command for a: XRC_RECV takes nothing but its domain, and a
 * is made to say so; XRC_SEND has no receive side. */
static void create_qp_cmd(struct ibv_context *context,
			  struct ibv_qp_init_attr_ex *a,
			  const struct sv_qp_dom *dom, struct ibv_qp *ibqp,
			  bool want_ex, struct sv_cmd *cmd)
{
	sv_cmd_init(cmd, SV_CMD_CREATE_QP);
	cmd->u.create_qp.cookie = (uintptr_t)ibqp;
	if (a->qp_type == IBV_QPT_XRC_RECV) {
		/* nothing but the domain (the rest of a is ignored); the
		 * QP still shows the PD it was given, as rdma-core's
		 * libibverbs keeps it in ibv_qp (librdmacm's XRC_RECV ids
		 * take their PD from their QP: rdma_create_srq) */
		cmd->u.create_qp.xrcd = to_sv_xrcd(a->xrcd)->handle;
		memset(&a->cap, 0, sizeof(a->cap));
		if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd ||
		    a->pd->context != context)
			a->pd = NULL;
		a->send_cq = a->recv_cq = NULL;
		a->srq = NULL;
		a->sq_sig_all = 0;
	} else {
		cmd->u.create_qp.pd = to_sv_pd(a->pd)->handle;
		cmd->u.create_qp.send_cq = to_sv_cq(a->send_cq)->handle;
		if (a->qp_type == IBV_QPT_XRC_SEND) {
			/* no receive side */
			a->recv_cq = NULL;
			a->cap.max_recv_wr = a->cap.max_recv_sge = 0;
		} else {
			cmd->u.create_qp.recv_cq =
				to_sv_cq(a->recv_cq)->handle;
		}
	}
	cmd->u.create_qp.srq = a->srq ? to_sv_srq(a->srq)->handle : 0;
	if (want_ex)
		cmd->u.create_qp.send_ops_flags = a->send_ops_flags;
	cmd->u.create_qp.qp_type = a->qp_type;
	cmd->u.create_qp.sq_sig_all = a->sq_sig_all ? 1 : 0;
	if (a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS)
		cmd->u.create_qp.create_flags = a->create_flags;
	cmd->u.create_qp.cap.max_send_wr = a->cap.max_send_wr;
	cmd->u.create_qp.cap.max_recv_wr = a->srq ? 0 : a->cap.max_recv_wr;
	cmd->u.create_qp.cap.max_send_sge = a->cap.max_send_sge;
	cmd->u.create_qp.cap.max_recv_sge = a->srq ? 0 : a->cap.max_recv_sge;
	cmd->u.create_qp.cap.max_inline_data = a->cap.max_inline_data;
	cmd->u.create_qp.domain = dom->domain;
}

/* The QP the daemon made, its rings mapped: its locks, how it posts, its
 * domains, and the ibv_qp the application sees (in RESET). */
static void init_qp(struct sv_context *ctx, struct sv_qp *qp,
		    struct ibv_context *context,
		    const struct ibv_qp_init_attr_ex *a,
		    const struct sv_qp_dom *dom, const struct sv_cmd *cmd,
		    const struct sv_rsp *rsp, bool want_ex)
{
	struct ibv_qp *ibqp = &qp->ex.qp_base;

	sv_spin_init(&qp->sq_lock);
	sv_spin_init(&qp->rq_lock);
	/* in a thread domain, or a resource domain not SAFE: no locks */
	qp->single_threaded = dom->single_threaded;
	/* LOW_LATENCY (and FORCE): small WQEs also go to the mailbox */
	qp->mailbox = dom->rd &&
		      (dom->rd->msg_model == IBV_EXP_MSG_LOW_LATENCY ||
		       dom->rd->msg_model == IBV_EXP_MSG_FORCE_LOW_LATENCY);
	qp->direct_ops = sv_direct_ops(ctx, a->qp_type);
	/* without its cache, the direct path copies with system calls only */
	(void)sv_direct_qp_init(qp);
	sv_qp_init_post(qp, a->qp_type);
	qp->rd = dom->rd;
	if (a->pd && to_sv_pd(a->pd)->parent) {
		sv_pd_get(a->pd);
		qp->pdom = a->pd;
	}
	qp->sq_sig_all = cmd->u.create_qp.sq_sig_all;
	qp->send_ops_flags = cmd->u.create_qp.send_ops_flags;
	ibqp->context = context;
	ibqp->qp_context = a->qp_context;
	ibqp->pd = a->pd;
	ibqp->send_cq = a->send_cq;
	ibqp->recv_cq = a->recv_cq;
	ibqp->srq = a->srq;
	ibqp->handle = (uint32_t)qp->handle;
	ibqp->qp_num = rsp->u.qp.qpn;
	ibqp->state = IBV_QPS_RESET;
	ibqp->qp_type = a->qp_type;
	pthread_mutex_init(&ibqp->mutex, NULL);
	pthread_cond_init(&ibqp->cond, NULL);
	ibqp->events_completed = 0;
	sv_direct_rq_init(qp);
	if (want_ex) {
		qp->has_ex = true;
		sv_qp_init_wr_ops(qp);
	}
}

/* The create path of every API, once the attributes are checked: the QP
 * goes in dom's daemon domain, takes over dom->rd's reference and a
 * reference on its parent domain, if it is made on one. */
static struct ibv_qp *create_qp(struct ibv_context *context,
				struct ibv_qp_init_attr_ex *a,
				const struct sv_qp_dom *dom)
{
	struct sv_context *ctx = to_sv_ctx(context);
	bool want_ex = a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	struct ibv_qp *ibqp;
	struct sv_qp *qp;
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret, fd = -1;

	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return sv_err_ptr(-ENOMEM);
	ibqp = &qp->ex.qp_base;

	create_qp_cmd(context, a, dom, ibqp, want_ex, &cmd);
	ret = sv_conn_call(&ctx->conn, &cmd, -1, &rsp, &fd);
	if (ret)
		goto err_free;
	qp->handle = rsp.u.qp.handle;
	ret = map_rings(ctx, qp, fd, &rsp.u.qp, a->srq != NULL, dom->alloc_pd);
	if (fd >= 0)
		close(fd);
	if (ret)
		goto err_destroy;

	init_qp(ctx, qp, context, a, dom, &cmd, &rsp, want_ex);

	/* what the QP really holds */
	a->cap.max_send_wr = rsp.u.qp.cap.max_send_wr;
	a->cap.max_recv_wr = rsp.u.qp.cap.max_recv_wr;
	a->cap.max_send_sge = rsp.u.qp.cap.max_send_sge;
	a->cap.max_recv_sge = rsp.u.qp.cap.max_recv_sge;
	a->cap.max_inline_data = rsp.u.qp.cap.max_inline_data;
	sv_ctx_add_evtarget(ctx, &qp->ev, SV_EVT_QP, ibqp, &ibqp->mutex,
			    &ibqp->cond, &ibqp->events_completed);
	return ibqp;

err_destroy:
	sv_cmd_init(&cmd, SV_CMD_DESTROY_QP);
	cmd.u.handle.handle = qp->handle;
	sv_conn_call(&ctx->conn, &cmd, -1, &rsp, NULL);
err_free:
	free(qp);
	return sv_err_ptr(ret);
}

/* The domain of a QP made on pd: a parent domain's thread domain (no locks)
 * and allocator, or nothing. */
static void dom_of_pd(struct ibv_pd *pd, struct sv_qp_dom *dom)
{
	struct sv_pd *p = to_sv_pd(pd);

	memset(dom, 0, sizeof(*dom));
	dom->domain = sv_pd_domain(pd);
	dom->single_threaded = sv_pd_single_threaded(pd);
	dom->alloc_pd = p->parent && p->alloc ? p : NULL;
}

struct ibv_qp *sv_create_qp_ex(struct ibv_context *context,
			       struct ibv_qp_init_attr_ex *a)
{
	struct sv_qp_dom dom;
	int ret;

	ret = check_init_attr(context, a);
	if (ret)
		return sv_err_ptr(ret);
	if (a->qp_type == IBV_QPT_XRC_RECV || a->qp_type == IBV_QPT_XRC_SEND) {
		/* what XRC ignores is dropped from a copy: the caller's
		 * attributes stay as they were, but for the caps */
		struct ibv_qp_init_attr_ex c = *a;
		struct ibv_qp *qp;

		if (a->qp_type == IBV_QPT_XRC_RECV)
			memset(&dom, 0, sizeof(dom));
		else
			dom_of_pd(a->pd, &dom);
		qp = create_qp(context, &c, &dom);
		if (qp)
			a->cap = c.cap;
		return qp;
	}
	dom_of_pd(a->pd, &dom);
	return create_qp(context, a, &dom);
}

/* ibv_open_qp: another handle on an XRC_RECV QP of an XRC domain we share.
 * It has no rings: it can be modified, queried and destroyed (which drops
 * the handle, not the QP). */
struct ibv_qp *sv_open_qp(struct ibv_context *context,
			  struct ibv_qp_open_attr *a)
{
	const uint32_t need = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
			      IBV_QP_OPEN_ATTR_TYPE;
	struct sv_context *ctx = to_sv_ctx(context);
	struct ibv_qp *ibqp;
	struct sv_qp *qp;
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret;

	if (!a || (a->comp_mask & ~(need | IBV_QP_OPEN_ATTR_CONTEXT)) ||
	    (a->comp_mask & need) != need || !a->xrcd ||
	    a->xrcd->context != context || a->qp_type != IBV_QPT_XRC_RECV)
		return sv_err_ptr(-EINVAL);
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return sv_err_ptr(-ENOMEM);
	ibqp = &qp->ex.qp_base;
	sv_cmd_init(&cmd, SV_CMD_OPEN_QP);
	cmd.u.open_qp.cookie = (uintptr_t)ibqp;
	cmd.u.open_qp.xrcd = to_sv_xrcd(a->xrcd)->handle;
	cmd.u.open_qp.qpn = a->qp_num;
	cmd.u.open_qp.qp_type = IBV_QPT_XRC_RECV;
	ret = sv_conn_call(&ctx->conn, &cmd, -1, &rsp, NULL);
	if (ret) {
		free(qp);
		return sv_err_ptr(ret);
	}
	qp->handle = rsp.u.qp.handle;
	qp->sq.hdr = &sv_empty_ring;
	qp->rq.hdr = &sv_empty_ring;
	sv_spin_init(&qp->sq_lock);
	sv_spin_init(&qp->rq_lock);
	sv_qp_init_post(qp, IBV_QPT_XRC_RECV);
	ibqp->context = context;
	ibqp->qp_context = (a->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) ?
			   a->qp_context : NULL;
	ibqp->handle = (uint32_t)qp->handle;
	ibqp->qp_num = rsp.u.qp.qpn;
	ibqp->state = IBV_QPS_RESET;
	ibqp->qp_type = IBV_QPT_XRC_RECV;
	pthread_mutex_init(&ibqp->mutex, NULL);
	pthread_cond_init(&ibqp->cond, NULL);
	sv_ctx_add_evtarget(ctx, &qp->ev, SV_EVT_QP, ibqp, &ibqp->mutex,
			    &ibqp->cond, &ibqp->events_completed);
	return ibqp;
}

/* ---- the experimental API (include/softverbs/softverbs.h) ---- */

#define SV_EXP_QP_INIT_KNOWN                                                 \
	((uint32_t)(IBV_EXP_QP_INIT_ATTR_PD | IBV_EXP_QP_INIT_ATTR_XRCD |    \
		    IBV_EXP_QP_INIT_ATTR_CREATE_FLAGS |                      \
		    IBV_EXP_QP_INIT_ATTR_RES_DOMAIN |                        \
		    IBV_EXP_QP_INIT_ATTR_RES_DOMAIN_INDEX))

SV_EXPORT struct ibv_qp *ibv_exp_create_qp(struct ibv_context *context,
					   struct ibv_exp_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ex;
	struct sv_res_domain *rd = NULL;
	struct sv_qp_dom dom;
	struct ibv_qp *qp;
	uint32_t m;
	int ret;

	if (!context || !attr)
		return sv_err_ptr(-EINVAL);
	m = attr->comp_mask;
	/* a PD is required; XRC QPs are not offered here (yet); one kind of
	 * domain at most */
	if ((m & ~SV_EXP_QP_INIT_KNOWN) || !(m & IBV_EXP_QP_INIT_ATTR_PD) ||
	    (m & IBV_EXP_QP_INIT_ATTR_XRCD) ||
	    ((m & IBV_EXP_QP_INIT_ATTR_RES_DOMAIN) &&
	     (m & IBV_EXP_QP_INIT_ATTR_RES_DOMAIN_INDEX)))
		return sv_err_ptr(-EINVAL);
	if ((m & IBV_EXP_QP_INIT_ATTR_RES_DOMAIN) &&
	    (!attr->res_domain || attr->res_domain->context != context))
		return sv_err_ptr(-EINVAL);
	if ((m & IBV_EXP_QP_INIT_ATTR_RES_DOMAIN_INDEX) &&
	    attr->resource_domain >=
		    to_sv_ctx(context)->attr.max_resource_domains)
		return sv_err_ptr(-EINVAL);

	memset(&ex, 0, sizeof(ex));
	ex.qp_context = attr->qp_context;
	ex.send_cq = attr->send_cq;
	ex.recv_cq = attr->recv_cq;
	ex.srq = attr->srq;
	ex.cap = attr->cap;
	ex.qp_type = attr->qp_type;
	ex.sq_sig_all = attr->sq_sig_all;
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = attr->pd;
	if (m & IBV_EXP_QP_INIT_ATTR_CREATE_FLAGS) {
		ex.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
		ex.create_flags = attr->exp_create_flags;
	}
	/* everything checked before a domain is made for an index */
	ret = check_init_attr(context, &ex);
	if (ret)
		return sv_err_ptr(ret);
	dom_of_pd(ex.pd, &dom);
	if (m & IBV_EXP_QP_INIT_ATTR_RES_DOMAIN) {
		rd = to_sv_rd(attr->res_domain);
		sv_rd_get(rd);
	} else if (m & IBV_EXP_QP_INIT_ATTR_RES_DOMAIN_INDEX) {
		rd = sv_rd_of_index(to_sv_ctx(context), attr->resource_domain);
		if (!rd)
			return NULL;
	}
	if (rd) {
		dom.domain = rd->handle;
		dom.rd = rd;
		if (rd->thread_model != IBV_EXP_THREAD_SAFE)
			dom.single_threaded = true;
	}
	qp = create_qp(context, &ex, &dom);
	if (!qp) {
		if (rd) {
			int err = errno;

			sv_rd_put(to_sv_ctx(context), rd);
			errno = err;
		}
		return NULL;
	}
	attr->cap = ex.cap;
	return qp;
}

SV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
				       struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ex;
	struct ibv_qp *qp;

	if (!pd || !attr)
		return sv_err_ptr(-EINVAL);
	memset(&ex, 0, sizeof(ex));
	ex.qp_context = attr->qp_context;
	ex.send_cq = attr->send_cq;
	ex.recv_cq = attr->recv_cq;
	ex.srq = attr->srq;
	ex.cap = attr->cap;
	ex.qp_type = attr->qp_type;
	ex.sq_sig_all = attr->sq_sig_all;
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd;
	qp = sv_create_qp_ex(pd->context, &ex);
	if (qp)
		attr->cap = ex.cap;
	return qp;
}

SV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *ibqp)
{
	struct sv_qp *qp = to_sv_qp(ibqp);

	/* as rdma-core: NULL (errno untouched) for a QP without the ops */
	return qp->has_ex ? &qp->ex : NULL;
}

/* ---- modify and query ---- */

void sv_ah_to_wire(const struct ibv_ah_attr *a, struct sv_wire_ah *w)
{
	memset(w, 0, sizeof(*w));
	memcpy(w->dgid, a->grh.dgid.raw, sizeof(w->dgid));
	w->flow_label = a->grh.flow_label;
	w->sgid_index = a->grh.sgid_index;
	w->hop_limit = a->grh.hop_limit;
	w->traffic_class = a->grh.traffic_class;
	w->dlid = a->dlid;
	w->sl = a->sl;
	w->src_path_bits = a->src_path_bits;
	w->static_rate = a->static_rate;
	w->is_global = a->is_global;
	w->port_num = a->port_num;
}

static void ah_from_wire(const struct sv_wire_ah *w, struct ibv_ah_attr *a)
{
	memset(a, 0, sizeof(*a));
	memcpy(a->grh.dgid.raw, w->dgid, sizeof(a->grh.dgid.raw));
	a->grh.flow_label = w->flow_label;
	a->grh.sgid_index = w->sgid_index;
	a->grh.hop_limit = w->hop_limit;
	a->grh.traffic_class = w->traffic_class;
	a->dlid = w->dlid;
	a->sl = w->sl;
	a->src_path_bits = w->src_path_bits;
	a->static_rate = w->static_rate;
	a->is_global = w->is_global;
	a->port_num = w->port_num;
}

/* Copy the attributes the mask names (only those: the rest of the caller's
 * struct may be uninitialized). */
static void qp_attr_to_wire(const struct ibv_qp_attr *a, int mask,
			    struct sv_wire_qp_attr *w)
{
	memset(w, 0, sizeof(*w));
	if (mask & IBV_QP_STATE)
		w->qp_state = a->qp_state;
	if (mask & IBV_QP_CUR_STATE)
		w->cur_qp_state = a->cur_qp_state;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		w->en_sqd_async_notify = a->en_sqd_async_notify;
	if (mask & IBV_QP_ACCESS_FLAGS)
		w->qp_access_flags = a->qp_access_flags;
	if (mask & IBV_QP_PKEY_INDEX)
		w->pkey_index = a->pkey_index;
	if (mask & IBV_QP_PORT)
		w->port_num = a->port_num;
	if (mask & IBV_QP_QKEY)
		w->qkey = a->qkey;
	if (mask & IBV_QP_AV)
		sv_ah_to_wire(&a->ah_attr, &w->ah_attr);
	if (mask & IBV_QP_PATH_MTU)
		w->path_mtu = a->path_mtu;
	if (mask & IBV_QP_TIMEOUT)
		w->timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		w->retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		w->rnr_retry = a->rnr_retry;
	if (mask & IBV_QP_RQ_PSN)
		w->rq_psn = a->rq_psn;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		w->max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_ALT_PATH) {
		sv_ah_to_wire(&a->alt_ah_attr, &w->alt_ah_attr);
		w->alt_pkey_index = a->alt_pkey_index;
		w->alt_port_num = a->alt_port_num;
		w->alt_timeout = a->alt_timeout;
	}
	if (mask & IBV_QP_MIN_RNR_TIMER)
		w->min_rnr_timer = a->min_rnr_timer;
	if (mask & IBV_QP_SQ_PSN)
		w->sq_psn = a->sq_psn;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		w->max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & IBV_QP_PATH_MIG_STATE)
		w->path_mig_state = a->path_mig_state;
	if (mask & IBV_QP_DEST_QPN)
		w->dest_qp_num = a->dest_qp_num;
	if (mask & IBV_QP_RATE_LIMIT)
		w->rate_limit = a->rate_limit;
}

static void qp_attr_from_wire(const struct sv_wire_qp_attr *w,
			      const struct sv_wire_qp_cap *cap,
			      struct ibv_qp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = (enum ibv_qp_state)w->qp_state;
	a->cur_qp_state = (enum ibv_qp_state)w->cur_qp_state;
	a->path_mtu = (enum ibv_mtu)w->path_mtu;
	a->path_mig_state = (enum ibv_mig_state)w->path_mig_state;
	a->qkey = w->qkey;
	a->rq_psn = w->rq_psn;
	a->sq_psn = w->sq_psn;
	a->dest_qp_num = w->dest_qp_num;
	a->qp_access_flags = w->qp_access_flags;
	a->cap.max_send_wr = cap->max_send_wr;
	a->cap.max_recv_wr = cap->max_recv_wr;
	a->cap.max_send_sge = cap->max_send_sge;
	a->cap.max_recv_sge = cap->max_recv_sge;
	a->cap.max_inline_data = cap->max_inline_data;
	ah_from_wire(&w->ah_attr, &a->ah_attr);
	ah_from_wire(&w->alt_ah_attr, &a->alt_ah_attr);
	a->pkey_index = w->pkey_index;
	a->alt_pkey_index = w->alt_pkey_index;
	a->en_sqd_async_notify = w->en_sqd_async_notify;
	a->sq_draining = w->sq_draining;
	a->max_rd_atomic = w->max_rd_atomic;
	a->max_dest_rd_atomic = w->max_dest_rd_atomic;
	a->min_rnr_timer = w->min_rnr_timer;
	a->port_num = w->port_num;
	a->timeout = w->timeout;
	a->retry_cnt = w->retry_cnt;
	a->rnr_retry = w->rnr_retry;
	a->alt_port_num = w->alt_port_num;
	a->alt_timeout = w->alt_timeout;
	a->rate_limit = w->rate_limit;
}

/* Drops the QP's completions not polled yet from its CQs (sv_cq_clean).
 * Under SOFTVERBS_DEBUG it says so on stderr: a completion the program
 * never polled, gone with its QP, is what a consumer that tears a
 * connection down before reaping its CQ loses (docs/MIDDLEWARE.md). */
static void qp_clean_cqs(struct ibv_qp *ibqp, const char *why)
{
	static int debug = -1;
	uint32_t n = 0;

	sv_direct_rq_clean(to_sv_qp(ibqp));
	if (ibqp->recv_cq)
		n += sv_cq_clean(ibqp->recv_cq, ibqp->qp_num);
	if (ibqp->send_cq && ibqp->send_cq != ibqp->recv_cq)
		n += sv_cq_clean(ibqp->send_cq, ibqp->qp_num);
	if (!n)
		return;
	if (__atomic_load_n(&debug, __ATOMIC_RELAXED) < 0)
		__atomic_store_n(&debug, getenv("SOFTVERBS_DEBUG") != NULL,
				 __ATOMIC_RELAXED);
	if (__atomic_load_n(&debug, __ATOMIC_RELAXED))
		fprintf(stderr,
			"softverbs: QP 0x%06x %s: %u completion%s not polled "
			"dropped\n", ibqp->qp_num, why, n, n == 1 ? "" : "s");
}

SV_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
			    int attr_mask)
{
	struct sv_qp *qp = to_sv_qp(ibqp);
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret, fd;

	if (!attr || attr_mask < 0)
		return EINVAL;
	sv_cmd_init(&cmd, SV_CMD_MODIFY_QP);
	cmd.u.modify_qp.qp = qp->handle;
	cmd.u.modify_qp.attr_mask = (uint32_t)attr_mask;
	qp_attr_to_wire(attr, attr_mask, &cmd.u.modify_qp.attr);
	ret = sv_conn_call(sv_conn_of(ibqp->context), &cmd, -1, &rsp, &fd);
	if (ret)
		return -ret;
	/* into RTR: the completion side of this connection (the direct
	 * path's receive side) */
	if (fd >= 0)
		sv_direct_xside_set(qp, fd);
	if (attr_mask & IBV_QP_STATE)
		__atomic_store_n(&ibqp->state, attr->qp_state,
				 __ATOMIC_RELAXED);
	/* the SL a direct SEND's receive completion says, as the device's */
	if (attr_mask & IBV_QP_AV)
		qp->dsl = attr->ah_attr.sl;
	/* RESET: the daemon produces nothing more for the QP (it quiesced
	 * its engines), and what it left in the CQs goes too */
	if ((attr_mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET)
		qp_clean_cqs(ibqp, "reset");
	return 0;
}

SV_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
			   int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	struct sv_qp *qp = to_sv_qp(ibqp);
	const struct sv_rsp_query_qp *q;
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret;

	if (!attr || !init_attr)
		return EINVAL;
	sv_cmd_init(&cmd, SV_CMD_QUERY_QP);
	cmd.u.query_qp.qp = qp->handle;
	cmd.u.query_qp.attr_mask = (uint32_t)attr_mask;
	ret = sv_conn_call(sv_conn_of(ibqp->context), &cmd, -1, &rsp, NULL);
	if (ret)
		return -ret;
	q = &rsp.u.query_qp;
	qp_attr_from_wire(&q->attr, &q->cap, attr);
	memset(init_attr, 0, sizeof(*init_attr));
	init_attr->qp_context = ibqp->qp_context;
	init_attr->send_cq = ibqp->send_cq;
	init_attr->recv_cq = ibqp->recv_cq;
	init_attr->srq = ibqp->srq;
	init_attr->cap = attr->cap;
	init_attr->qp_type = ibqp->qp_type;
	init_attr->sq_sig_all = qp->sq_sig_all ? 1 : 0;
	/* the device's state, which it may have moved (to SQE or ERR) */
	if (attr_mask & IBV_QP_STATE)
		__atomic_store_n(&ibqp->state, attr->qp_state,
				 __ATOMIC_RELAXED);
	return 0;
}

SV_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct sv_qp *qp = to_sv_qp(ibqp);
	struct sv_context *ctx = to_sv_ctx(ibqp->context);
	int ret = sv_destroy_obj(ibqp->context, SV_CMD_DESTROY_QP, qp->handle);

	if (ret)
		return ret;
	/* off the context's list first: a dead device's flushes (cq.c) find
	 * the QPs there, and must put nothing in its CQs after the clean */
	sv_ctx_del_evtarget(ctx, &qp->ev); /* waits for its events' acks */
	sv_direct_rq_fini(qp);
	qp_clean_cqs(ibqp, "destroyed");
	sv_ring_unmap(&qp->mem);
	if (qp->rd)
		sv_rd_put(ctx, qp->rd);
	if (qp->pdom)
		sv_pd_put(qp->pdom);
	pthread_mutex_destroy(&ibqp->mutex);
	pthread_cond_destroy(&ibqp->cond);
	sv_direct_qp_fini(qp);
	free(qp);
	return 0;
}

/* ibv_attach_mcast / ibv_detach_mcast: a UD QP joins or leaves a multicast
 * group (the daemon checks the QP type and the GID; lid means nothing on
 * Ethernet). */
static int qp_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid,
		    uint16_t lid, unsigned int op)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;

	if (!ibqp || !gid)
		return EINVAL;
	sv_cmd_init(&cmd, op);
	cmd.u.mcast.qp = to_sv_qp(ibqp)->handle;
	memcpy(cmd.u.mcast.gid, gid->raw, sizeof(cmd.u.mcast.gid));
	cmd.u.mcast.lid = lid;
	return -sv_conn_call(sv_conn_of(ibqp->context), &cmd, -1, &rsp, NULL);
}

SV_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
			       uint16_t lid)
{
	return qp_mcast(qp, gid, lid, SV_CMD_ATTACH_MCAST);
}

SV_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
			       uint16_t lid)
{
	return qp_mcast(qp, gid, lid, SV_CMD_DETACH_MCAST);
}
