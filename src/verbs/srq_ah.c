// SPDX-License-Identifier: MIT
/*
 * Shared receive queues and address handles.
 *
 * An SRQ is one receive ring in a sealed memfd from the daemon, used like a
 * QP's: the library keeps private copies of its sizes and posts into it
 * (post.c). An AH is a daemon object naming a path; UD send WQEs carry its
 * handle.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi/sv_tm.h"
#include "verbs/qp_ops.h"
#include "verbs/sv_post.h"

#define SV_SRQ_INIT_ATTR_KNOWN                                               \
	((uint32_t)(IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |          \
		    IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ |          \
		    IBV_SRQ_INIT_ATTR_TM))
#define SV_SANE_SGE (1u << 16)

/* ---- shared receive queues ---- */

static int map_srq_ring(struct sv_context *ctx, struct sv_srq *srq, int fd,
			const struct sv_rsp_srq *r)
{
	struct stat st;
	void *map;
	int ret;

	if (fd < 0 || !r->entries || (r->entries & (r->entries - 1)) ||
	    r->max_wr > r->entries || r->max_sge > SV_SANE_SGE ||
	    r->stride < sv_recv_stride(r->max_sge) ||
	    r->db_index >= ctx->db_pages || r->ring_bytes > SIZE_MAX ||
	    r->ring_bytes < sv_wq_ring_bytes(r->entries, r->stride))
		return -EPROTO;
	if (fstat(fd, &st))
		return -errno;
	/* at ring_offset of the memfd: a pool of rings */
	if (r->ring_offset % 4096 || r->ring_offset > (uint64_t)st.st_size ||
	    (uint64_t)st.st_size - r->ring_offset < r->ring_bytes)
		return -EPROTO;
	ret = sv_ring_map(&srq->mem, NULL, 0, fd, r->ring_offset,
			  r->ring_bytes);
	if (ret)
		return ret;
	map = srq->mem.map;
	srq->ring = map;
	srq->ring_bytes = r->ring_bytes;
	srq->rq.hdr = map;
	srq->rq.entries = r->entries;
	srq->rq.stride = r->stride;
	srq->rq.max_sge = r->max_sge;
	srq->rq.max_inline = 0;
	srq->rq.prod = __atomic_load_n(&srq->rq.hdr->prod, __ATOMIC_RELAXED);
	srq->db = (struct sv_doorbell *)((char *)ctx->db_map +
					 (size_t)r->db_index * SV_DB_PAGE_BYTES);
	srq->srqn = r->srqn;
	srq->max_wr = r->max_wr;
	if (r->tm_ops_entries) {
		/* the ops ring, behind the receive ring */
		if ((r->tm_ops_entries & (r->tm_ops_entries - 1)) ||
		    r->tm_ops_offset < sv_wq_ring_bytes(r->entries, r->stride) ||
		    r->tm_ops_offset > r->ring_bytes ||
		    r->ring_bytes - r->tm_ops_offset <
		    sv_wq_ring_bytes(r->tm_ops_entries, SV_TM_OP_STRIDE)) {
			sv_ring_unmap(&srq->mem);
			return -EPROTO;
		}
		srq->tm_ops.hdr = (struct sv_wq_ring *)((char *)map +
							r->tm_ops_offset);
		srq->tm_ops.entries = r->tm_ops_entries;
		srq->tm_ops.stride = SV_TM_OP_STRIDE;
		srq->tm_ops.prod = __atomic_load_n(&srq->tm_ops.hdr->prod,
						   __ATOMIC_RELAXED);
	}
	return 0;
}

/* xrcd and cq: an XRC SRQ's (else NULL); tm: a tag-matching SRQ's
 * limits (else NULL), and then cq is its CQ */
static struct ibv_srq *create_srq(struct ibv_pd *pd, void *srq_context,
				  struct ibv_srq_attr *attr,
				  struct ibv_xrcd *xrcd, struct ibv_cq *cq,
				  const struct ibv_tm_cap *tm)
{
	struct sv_context *ctx = to_sv_ctx(pd->context);
	struct sv_srq *srq;
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret, fd = -1;

	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return sv_err_ptr(-ENOMEM);
	sv_cmd_init(&cmd, SV_CMD_CREATE_SRQ);
	cmd.u.create_srq.cookie = (uintptr_t)&srq->ibsrq;
	cmd.u.create_srq.pd = to_sv_pd(pd)->handle;
	cmd.u.create_srq.srq_type = xrcd ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
	if (xrcd) {
		cmd.u.create_srq.xrcd = to_sv_xrcd(xrcd)->handle;
		cmd.u.create_srq.cq = to_sv_cq(cq)->handle;
	} else if (tm) {
		cmd.u.create_srq.srq_type = IBV_SRQT_TM;
		cmd.u.create_srq.cq = to_sv_cq(cq)->handle;
		cmd.u.create_srq.max_num_tags = tm->max_num_tags;
		cmd.u.create_srq.max_ops = tm->max_ops;
	}
	cmd.u.create_srq.max_wr = attr->max_wr;
	cmd.u.create_srq.max_sge = attr->max_sge;
	/* srq_limit is not an input of create (the verbs contract): armed by
	 * ibv_modify_srq only */
	cmd.u.create_srq.srq_limit = 0;
	ret = sv_conn_call(&ctx->conn, &cmd, -1, &rsp, &fd);
	if (ret)
		goto err_free;
	srq->handle = rsp.u.srq.handle;
	ret = map_srq_ring(ctx, srq, fd, &rsp.u.srq);
	if (fd >= 0)
		close(fd);
	if (!ret && !tm != !srq->tm_ops.hdr)
		ret = -EPROTO;     /* an ops ring for a TM SRQ, and only there */
	if (ret)
		goto err_destroy;
	if (tm)
		srq->tm_max_tags = tm->max_num_tags;
	sv_spin_init(&srq->lock);
	srq->ibsrq.context = pd->context;
	srq->ibsrq.srq_context = srq_context;
	srq->ibsrq.pd = pd;
	srq->ibsrq.handle = (uint32_t)srq->handle;
	pthread_mutex_init(&srq->ibsrq.mutex, NULL);
	pthread_cond_init(&srq->ibsrq.cond, NULL);
	srq->ibsrq.events_completed = 0;
	attr->max_wr = rsp.u.srq.max_wr;
	attr->max_sge = rsp.u.srq.max_sge;
	sv_ctx_add_evtarget(ctx, &srq->ev, SV_EVT_SRQ, &srq->ibsrq,
			    &srq->ibsrq.mutex, &srq->ibsrq.cond,
			    &srq->ibsrq.events_completed);
	return &srq->ibsrq;

err_destroy:
	sv_ring_unmap(&srq->mem);
	sv_cmd_init(&cmd, SV_CMD_DESTROY_SRQ);
	cmd.u.handle.handle = srq->handle;
	sv_conn_call(&ctx->conn, &cmd, -1, &rsp, NULL);
err_free:
	free(srq);
	return sv_err_ptr(ret);
}

SV_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
					 struct ibv_srq_init_attr *attr)
{
	if (!pd || !attr)
		return sv_err_ptr(-EINVAL);
	return create_srq(pd, attr->srq_context, &attr->attr, NULL, NULL,
			  NULL);
}

struct ibv_srq *sv_create_srq_ex(struct ibv_context *context,
				 struct ibv_srq_init_attr_ex *a)
{
	bool xrc = (a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
		   a->srq_type == IBV_SRQT_XRC;
	bool tm = (a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
		  a->srq_type == IBV_SRQT_TM;

	if (a->comp_mask & ~SV_SRQ_INIT_ATTR_KNOWN)
		return sv_err_ptr(-EINVAL);
	if ((a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
	    a->srq_type != IBV_SRQT_BASIC && !xrc && !tm)
		return sv_err_ptr(-EINVAL);
	if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd ||
	    a->pd->context != context)
		return sv_err_ptr(-EINVAL);
	/* XRC: a domain and a CQ of this context */
	if (xrc && (!(a->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !a->xrcd ||
		    a->xrcd->context != context ||
		    !(a->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !a->cq ||
		    a->cq->context != context))
		return sv_err_ptr(-EINVAL);
	/* tag matching: its limits and a CQ of this context */
	if (tm && (!(a->comp_mask & IBV_SRQ_INIT_ATTR_TM) ||
		   !(a->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !a->cq ||
		   a->cq->context != context ||
		   !a->tm_cap.max_num_tags ||
		   a->tm_cap.max_num_tags > SV_TM_MAX_TAGS ||
		   a->tm_cap.max_ops > SV_TM_MAX_OPS))
		return sv_err_ptr(-EINVAL);
	return create_srq(a->pd, a->srq_context, &a->attr,
			  xrc ? a->xrcd : NULL, xrc || tm ? a->cq : NULL,
			  tm ? &a->tm_cap : NULL);
}

/* Is op wr one the device takes (it refuses the rest, as a failed op)? */
static bool ops_wr_ok(const struct ibv_ops_wr *wr)
{
	if (wr->flags & ~(IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC))
		return false;
	switch (wr->opcode) {
	case IBV_WR_TAG_ADD:
		return wr->tm.add.num_sge >= 0 &&
		       wr->tm.add.num_sge <= (int)SV_TM_MAX_SGE &&
		       (!wr->tm.add.num_sge || wr->tm.add.sg_list);
	case IBV_WR_TAG_DEL:
	case IBV_WR_TAG_SYNC:
		return true;
	default:
		return false;
	}
}

/*
 * ibv_post_srq_ops: each op goes into a slot of the SRQ's ops ring, as a
 * receive goes into the receive ring; the ring is published and the
 * doorbell rung once (src/abi/sv_tm.h). A TAG_ADD's handle is given here;
 * one that would make the list hold more than max_num_tags tags (counting
 * those the device has not given back yet), or a full ops ring, is ENOMEM;
 * a malformed op EINVAL; the list stops there, *bad_wr at it, the ops
 * before it posted.
 */
int sv_post_srq_ops(struct ibv_srq *ibsrq, struct ibv_ops_wr *wr,
		    struct ibv_ops_wr **bad_wr)
{
	struct sv_srq *srq = to_sv_srq(ibsrq);
	struct sv_wq *wq = &srq->tm_ops;
	uint32_t start;
	int ret = 0;

	if (!wq->hdr) {
		if (bad_wr)
			*bad_wr = wr;
		return wr ? EINVAL : 0;
	}
	sv_spin_lock(&srq->lock);
	start = wq->prod;
	for (; wr; wr = wr->next) {
		struct sv_tm_op *o;

		if (!ops_wr_ok(wr)) {
			ret = EINVAL;
			break;
		}
		/* acquire: pairs with the device's release of `done` */
		if (wr->opcode == IBV_WR_TAG_ADD &&
		    srq->tm_adds - __atomic_load_n(&wq->hdr->done,
						   __ATOMIC_ACQUIRE) >=
		    srq->tm_max_tags) {
			ret = ENOMEM;
			break;
		}
		if (!sv_wq_has_room(wq, wq->entries)) {
			ret = ENOMEM;
			break;
		}
		o = sv_wq_slot_at(wq, wq->prod);
		memset(o, 0, sizeof(*o));
		o->wr_id = wr->wr_id;
		o->opcode = (uint32_t)wr->opcode;
		o->flags = (uint32_t)wr->flags;
		o->unexpected_cnt = wr->tm.unexpected_cnt;
		o->handle = wr->tm.handle;
		if (wr->opcode == IBV_WR_TAG_ADD) {
			if (!++srq->tm_handle)
				srq->tm_handle = 1;
			wr->tm.handle = o->handle = srq->tm_handle;
			srq->tm_adds++;
			o->recv_wr_id = wr->tm.add.recv_wr_id;
			o->tag = wr->tm.add.tag;
			o->mask = wr->tm.add.mask;
			o->num_sge = (uint32_t)wr->tm.add.num_sge;
			if (o->num_sge) {
				o->sge.addr = wr->tm.add.sg_list[0].addr;
				o->sge.length = wr->tm.add.sg_list[0].length;
				o->sge.lkey = wr->tm.add.sg_list[0].lkey;
			}
		}
		wq->prod++;
	}
	if (wq->prod != start)
		sv_wq_publish(wq, srq->db);
	sv_spin_unlock(&srq->lock);
	if (ret && bad_wr)
		*bad_wr = wr;
	return ret;
}

int sv_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num)
{
	*srq_num = to_sv_srq(srq)->srqn;
	return 0;
}

/*
 * IBV_SRQ_MAX_WR: the device copies the receives posted and not yet taken
 * into a new ring (their numbers kept) and switches to it; the response
 * brings the new ring, mapped here in place of the old. The post lock is
 * held throughout, so no receive lands in the old ring meanwhile. A ring
 * that cannot be mapped after the device switched leaves the SRQ taking no
 * receives (ENOMEM to a post) rather than losing them.
 */
static int resize_srq(struct sv_srq *srq, struct sv_cmd *cmd)
{
	struct sv_context *ctx = to_sv_ctx(srq->ibsrq.context);
	struct sv_srq n;
	struct sv_rsp rsp;
	int ret, fd = -1;

	memset(&n, 0, sizeof(n));
	sv_spin_lock(&srq->lock);
	ret = sv_conn_call(&ctx->conn, cmd, -1, &rsp, &fd);
	if (ret)
		goto out;
	ret = map_srq_ring(ctx, &n, fd, &rsp.u.srq);
	if (!ret && (n.srqn != srq->srqn || n.tm_ops.hdr ||
		     n.rq.stride != srq->rq.stride ||
		     n.rq.prod != srq->rq.prod)) {
		sv_ring_unmap(&n.mem);
		ret = -EPROTO;
	}
	if (ret) {
		srq->max_wr = 0;
		goto out;
	}
	sv_ring_unmap(&srq->mem);
	srq->mem = n.mem;
	srq->ring = n.ring;
	srq->ring_bytes = n.ring_bytes;
	srq->rq = n.rq;
	srq->max_wr = n.max_wr;
out:
	sv_spin_unlock(&srq->lock);
	if (fd >= 0)
		close(fd);
	return -ret;
}

SV_EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
			     int attr_mask)
{
	struct sv_srq *srq = to_sv_srq(ibsrq);
	struct sv_cmd cmd;
	struct sv_rsp rsp;

	if (!attr || attr_mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return EINVAL;
	if (!attr_mask)
		return 0;
	sv_cmd_init(&cmd, SV_CMD_MODIFY_SRQ);
	cmd.u.modify_srq.srq = srq->handle;
	cmd.u.modify_srq.attr_mask = (uint32_t)attr_mask;
	cmd.u.modify_srq.srq_limit = attr->srq_limit;
	if (attr_mask & IBV_SRQ_MAX_WR) {
		cmd.u.modify_srq.max_wr = attr->max_wr;
		return resize_srq(srq, &cmd);
	}
	return -sv_conn_call(sv_conn_of(ibsrq->context), &cmd, -1, &rsp, NULL);
}

SV_EXPORT int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct sv_srq *srq = to_sv_srq(ibsrq);
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	int ret;

	if (!attr)
		return EINVAL;
	sv_cmd_init(&cmd, SV_CMD_QUERY_SRQ);
	cmd.u.handle.handle = srq->handle;
	ret = sv_conn_call(sv_conn_of(ibsrq->context), &cmd, -1, &rsp, NULL);
	if (ret)
		return -ret;
	attr->max_wr = rsp.u.query_srq.max_wr;
	attr->max_sge = rsp.u.query_srq.max_sge;
	attr->srq_limit = rsp.u.query_srq.srq_limit;
	return 0;
}

SV_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct sv_srq *srq = to_sv_srq(ibsrq);
	struct sv_context *ctx = to_sv_ctx(ibsrq->context);
	int ret = sv_destroy_obj(ibsrq->context, SV_CMD_DESTROY_SRQ,
				 srq->handle);

	if (ret)
		return ret; /* e.g. EBUSY: QPs still use it */
	sv_ctx_del_evtarget(ctx, &srq->ev); /* waits for its events' acks */
	sv_ring_unmap(&srq->mem);
	pthread_mutex_destroy(&ibsrq->mutex);
	pthread_cond_destroy(&ibsrq->cond);
	free(srq);
	return 0;
}

/* ---- address handles ---- */

SV_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd,
				       struct ibv_ah_attr *attr)
{
	struct sv_cmd cmd;
	struct sv_rsp rsp;
	struct sv_ah *ah;
	int ret;

	if (!pd || !attr)
		return sv_err_ptr(-EINVAL);
	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return sv_err_ptr(-ENOMEM);
	sv_cmd_init(&cmd, SV_CMD_CREATE_AH);
	cmd.u.create_ah.pd = to_sv_pd(pd)->handle;
	sv_ah_to_wire(attr, &cmd.u.create_ah.attr);
	ret = sv_conn_call(sv_conn_of(pd->context), &cmd, -1, &rsp, NULL);
	if (ret) {
		free(ah);
		return sv_err_ptr(ret);
	}
	ah->handle = rsp.u.obj.handle;
	ah->ibah.context = pd->context;
	ah->ibah.pd = pd;
	ah->ibah.handle = (uint32_t)ah->handle;
	return &ah->ibah;
}

SV_EXPORT int ibv_destroy_ah(struct ibv_ah *ibah)
{
	struct sv_ah *ah = to_sv_ah(ibah);
	int ret = sv_destroy_obj(ibah->context, SV_CMD_DESTROY_AH, ah->handle);

	if (ret)
		return ret;
	free(ah);
	return 0;
}

/* The RoCEv2 IPv4 case: the 40-byte GRH buffer holds the packet's IPv4
 * header in its last 20 bytes (the first 20 are undefined). Is that a header
 * without options whose checksum is right? */
static bool grh_is_ipv4(const uint8_t *b)
{
	const uint8_t *ip = b + 20;
	uint32_t sum = 0;

	if (ip[0] != 0x45)
		return false;
	for (int i = 0; i < 20; i += 2)
		sum += (uint32_t)ip[i] << 8 | ip[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff;
}

static void ipv4_mapped(union ibv_gid *gid, const uint8_t *addr)
{
	memset(gid, 0, sizeof(*gid));
	gid->raw[10] = 0xff;
	gid->raw[11] = 0xff;
	memcpy(&gid->raw[12], addr, 4);
}

/* The index of our GID equal to gid on port, 0 when none is. */
static uint8_t find_sgid_index(struct ibv_context *context, uint8_t port,
			       uint32_t tbl_len, const union ibv_gid *gid)
{
	for (uint32_t i = 0; i < tbl_len && i <= UINT8_MAX; i++) {
		struct ibv_gid_entry e;

		if (_ibv_query_gid_ex(context, port, i, &e, 0, sizeof(e)))
			continue;
		if (!memcmp(e.gid.raw, gid->raw, sizeof(gid->raw)))
			return (uint8_t)i;
	}
	return 0;
}

SV_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context,
				  uint8_t port_num, struct ibv_wc *wc,
				  struct ibv_grh *grh,
				  struct ibv_ah_attr *ah_attr)
{
	struct ibv_port_attr port;
	union ibv_gid local;
	int ret;

	if (!context || !wc || !ah_attr) {
		errno = EINVAL;
		return -1;
	}
	ret = sv_query_port(context, port_num, &port, sizeof(port));
	if (ret) {
		errno = ret;
		return -1;
	}
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = (uint16_t)wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	if (!(wc->wc_flags & IBV_WC_GRH)) {
		if (port.link_layer == IBV_LINK_LAYER_ETHERNET) {
			errno = EINVAL; /* RoCE addresses by GID only */
			return -1;
		}
		return 0;
	}
	if (!grh) {
		errno = EINVAL;
		return -1;
	}
	if (grh_is_ipv4((const uint8_t *)grh)) {
		const uint8_t *ip = (const uint8_t *)grh + 20;

		ipv4_mapped(&ah_attr->grh.dgid, ip + 12); /* its source */
		ipv4_mapped(&local, ip + 16);             /* its destination */
		ah_attr->grh.traffic_class = ip[1];
	} else {
		uint32_t vtf = be32toh(grh->version_tclass_flow);

		if (vtf >> 28 != 6) {
			errno = EINVAL; /* neither an IPv4 header nor a GRH */
			return -1;
		}
		ah_attr->grh.dgid = grh->sgid;
		local = grh->dgid;
		ah_attr->grh.flow_label = vtf & 0xfffff;
		ah_attr->grh.traffic_class = (vtf >> 20) & 0xff;
	}
	ah_attr->is_global = 1;
	ah_attr->grh.hop_limit = 0xff;
	ah_attr->grh.sgid_index =
		find_sgid_index(context, port_num, (uint32_t)port.gid_tbl_len,
				&local);
	return 0;
}

SV_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd,
					       struct ibv_wc *wc,
					       struct ibv_grh *grh,
					       uint8_t port_num)
{
	struct ibv_ah_attr attr;

	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
		return NULL;
	return ibv_create_ah(pd, &attr);
}
