// SPDX-License-Identifier: MIT
/*
 * The per-object resources of RDMA_NL_NLDEV (device/nl/nl.h): RES_QP_GET,
 * RES_CM_ID_GET, RES_CQ_GET, RES_MR_GET, RES_PD_GET, RES_CTX_GET and
 * RES_SRQ_GET, as the kernel's res_get_common_dumpit/_doit answer them,
 * with its fill_res_*_entry attributes in its order.
 *
 *  - dump (DEV_INDEX required): per part one message, the device's
 *    handle then the kind's table (RES_QP ...) of entries (RES_QP_ENTRY
 *    ...); an entry that does not fit is taken back and the dump goes on
 *    from it in the next part; a part that visits no entry ends the dump.
 *    A PORT_INDEX keeps only the QPs and cm ids of that port.
 *  - doit: the object named by its id (RES_LQPN, RES_CM_IDN, RES_CQN,
 *    RES_MRN, RES_PDN, RES_CTXN, RES_SRQN): the handle and its
 *    attributes, no table. QPs and cm ids are per port (PORT_INDEX
 *    required), the others per device (PORT_INDEX refused): EINVAL
 *    otherwise, as the kernel; ENOENT for an id no live object has.
 *
 * The ids are device-wide and never 0: the QPN, the SRQN, and the ids PDs,
 * CQs, MRs, clients (contexts) and cm ids get when made. Keys and the PD's
 * local_dma_lkey go only to a program that had CAP_NET_ADMIN, as the
 * kernel's has_cap_net_admin. Everything runs on the main thread under
 * the device lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/socket.h>

#include "device/cm/cm.h"
#include "device/nl/nl.h"
#include "device/sv_dev.h"

/* One kind of object. A dump's cursor says where it is: [0] and [1] as
 * the kind's at() takes them. */
struct kind {
	uint32_t table, entry, id_attr;
	bool per_dev;              /* no PORT_INDEX in a doit */
	unsigned int obj_type;     /* objects in the clients' tables */
	/* the first object at or after the cursor (moved to it), or NULL */
	void *(*at)(const struct kind *k, uint64_t *cursor);
	/* the object of id, or NULL */
	void *(*by_id)(const struct kind *k, uint32_t id);
	/* its attributes: 0, or -EAGAIN where port filters it out */
	int (*fill)(struct sv_nl_ctx *ctx, struct sv_nlb *b, void *obj,
		    uint32_t port);
};

static void name_pid(struct sv_nlb *b, const struct sv_client *owner)
{
	if (!owner)
		sv_nlb_str(b, RDMA_NLDEV_ATTR_RES_KERN_NAME, "softverbsd");
	else if (owner->pid)
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_PID, (uint32_t)owner->pid);
}

/* ---- walking the objects ---- */

/* Objects in the clients' tables: cursor[0] the client's id (the list is
 * in the order of ids), cursor[1] the slot. */
static void *at_obj(const struct kind *k, uint64_t *cursor)
{
	for (struct sv_client *c = sv_dev.clients.next; c != &sv_dev.clients;
	     c = c->next) {
		if (c->id < cursor[0] || c->dead)
			continue;
		if (c->id > cursor[0]) {
			cursor[0] = c->id;
			cursor[1] = 0;
		}
		for (uint64_t i = cursor[1]; i < c->objs.nslots; i++) {
			const struct sv_objtab_slot *s = &c->objs.slots[i];

			if (s->obj && s->type == k->obj_type) {
				cursor[1] = i;
				return s->obj;
			}
		}
		cursor[0] = c->id + 1;
		cursor[1] = 0;
	}
	return NULL;
}

static uint32_t id_of(const struct kind *k, void *obj)
{
	switch (k->obj_type) {
	case SV_OBJ_PD:
		return ((struct sv_pd *)obj)->id;
	case SV_OBJ_CQ:
		return ((struct sv_cq *)obj)->id;
	case SV_OBJ_MR:
		return ((struct sv_mr *)obj)->id;
	default:
		return 0;
	}
}

static void *by_id_obj(const struct kind *k, uint32_t id)
{
	uint64_t cur[2] = { 0, 0 };
	void *o;

	while ((o = k->at(k, cur))) {
		if (id_of(k, o) == id)
			return o;
		cur[1]++;
	}
	return NULL;
}

/* QPs: cursor[0] the QPN table's slot */
static bool qp_listed(const struct sv_qp *qp)
{
	return qp && !qp->dead && !qp->opened;
}

static void *at_qp(const struct kind *k, uint64_t *cursor)
{
	const uint64_t slots = sizeof(sv_dev.qpn_tab) / sizeof(sv_dev.qpn_tab[0]);

	(void)k;
	for (; cursor[0] < slots; cursor[0]++)
		if (qp_listed(sv_dev.qpn_tab[cursor[0]]))
			return sv_dev.qpn_tab[cursor[0]];
	return NULL;
}

static void *by_id_qp(const struct kind *k, uint32_t id)
{
	struct sv_qp *qp = sv_qp_lookup(id);

	(void)k;
	return qp_listed(qp) ? qp : NULL;
}

/* SRQs are in the clients' tables; their number finds them */
static void *by_id_srq(const struct kind *k, uint32_t id)
{
	(void)k;
	return id ? sv_srq_lookup(id) : NULL;
}

/* contexts: the clients that opened one; cursor[0] the client's id */
static void *at_ctx(const struct kind *k, uint64_t *cursor)
{
	(void)k;
	for (struct sv_client *c = sv_dev.clients.next; c != &sv_dev.clients;
	     c = c->next) {
		if (c->id >= cursor[0] && !c->dead && c->async_fd >= 0) {
			cursor[0] = c->id;
			cursor[1] = 0;
			return c;
		}
	}
	return NULL;
}

static void *by_id_ctx(const struct kind *k, uint32_t id)
{
	(void)k;
	for (struct sv_client *c = sv_dev.clients.next; c != &sv_dev.clients;
	     c = c->next)
		if (c->ctxn == id && !c->dead && c->async_fd >= 0)
			return c;
	return NULL;
}

/* cm ids on sv0 (the kernel tracks an id once it has a device), and
 * listeners; cursor[0] the id's nl_id: the least at or after it */
static bool cm_listed(const struct sv_cm_id *id)
{
	return id->has_dev || id->state == CM_LISTEN;
}

static void *at_cm_id(const struct kind *k, uint64_t *cursor)
{
	struct sv_cm_file *head = sv_cm_files();
	struct sv_cm_id *best = NULL;

	(void)k;
	for (struct sv_cm_file *f = head->next; f != head; f = f->next) {
		if (f->dead)
			continue;
		for (struct sv_cm_id *id = f->ids; id; id = id->file_next)
			if (cm_listed(id) && id->nl_id >= cursor[0] &&
			    (!best || id->nl_id < best->nl_id))
				best = id;
	}
	if (best) {
		cursor[0] = best->nl_id;
		cursor[1] = 0;
	}
	return best;
}

static void *by_id_cm_id(const struct kind *k, uint32_t nl_id)
{
	uint64_t cur[2] = { nl_id, 0 };
	struct sv_cm_id *id = at_cm_id(k, cur);

	return id && id->nl_id == nl_id ? id : NULL;
}

/* ---- the entries: fill_res_*_entry ---- */

static int fill_qp(struct sv_nl_ctx *ctx, struct sv_nlb *b, void *obj,
		   uint32_t port)
{
	const struct sv_qp *qp = obj;
	const struct sv_wire_qp_attr *a = &qp->attr;
	uint32_t t = qp->type;

	(void)ctx;
	if (port && port != a->port_num)
		return -EAGAIN;
	/* a QP in RESET has no port yet */
	if (a->port_num)
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_PORT_INDEX, a->port_num);
	sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_LQPN, qp->qpn);
	/* an XRC_RECV QP borrows each message's PD: none of its own */
	if (qp->owner && qp->pd && t != IBV_QPT_XRC_RECV)
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_PDN, qp->pd->id);
	name_pid(b, qp->owner);
	if (t == IBV_QPT_RC || t == IBV_QPT_UC) {
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_RQPN, a->dest_qp_num);
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_RQ_PSN, a->rq_psn);
	}
	sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_SQ_PSN, a->sq_psn);
	if (t == IBV_QPT_RC || t == IBV_QPT_UC || t == IBV_QPT_XRC_SEND ||
	    t == IBV_QPT_XRC_RECV)
		sv_nlb_u8(b, RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE,
			  (uint8_t)a->path_mig_state);
	sv_nlb_u8(b, RDMA_NLDEV_ATTR_RES_TYPE, (uint8_t)t);
	sv_nlb_u8(b, RDMA_NLDEV_ATTR_RES_STATE, (uint8_t)qp->state);
	return 0;
}

static int fill_cm_id(struct sv_nl_ctx *ctx, struct sv_nlb *b, void *obj,
		      uint32_t port)
{
	const struct sv_cm_id *id = obj;
	uint32_t p = id->has_dev ? 1 : 0;

	(void)ctx;
	if (port && port != p)
		return -EAGAIN;
	if (p)
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_PORT_INDEX, p);
	if (id->qpn) {
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_LQPN, id->qpn);
		sv_nlb_u8(b, RDMA_NLDEV_ATTR_RES_TYPE, id->qp_type);
	}
	sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_PS, id->ps);
	/* the kernel's enum rdma_cm_state: the same numbering */
	sv_nlb_u8(b, RDMA_NLDEV_ATTR_RES_STATE, (uint8_t)id->state);
	_Static_assert(sizeof(id->src) == sizeof(struct __kernel_sockaddr_storage),
		       "sockaddr_storage as the kernel's");
	if (id->src.ss_family)
		sv_nlb_put(b, RDMA_NLDEV_ATTR_RES_SRC_ADDR, &id->src, sizeof(id->src));
	if (id->dst.ss_family)
		sv_nlb_put(b, RDMA_NLDEV_ATTR_RES_DST_ADDR, &id->dst, sizeof(id->dst));
	sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_CM_IDN, id->nl_id);
	if (id->file && id->file->pid)
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_PID, (uint32_t)id->file->pid);
	return 0;
}

static int fill_cq(struct sv_nl_ctx *ctx, struct sv_nlb *b, void *obj,
		   uint32_t port)
{
	const struct sv_cq *cq = obj;

	(void)ctx;
	(void)port;
	sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_CQE, cq->cqe);
	/* QPs (a send and a receive use each) and SRQs */
	sv_nlb_u64(b, RDMA_NLDEV_ATTR_RES_USECNT, cq->refs);
	/* POLL_CTX is a kernel CQ's; user CQs have no DIM */
	sv_nlb_u8(b, RDMA_NLDEV_ATTR_DEV_DIM, 0);
	sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_CQN, cq->id);
	if (cq->owner)
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_CTXN, cq->owner->ctxn);
	name_pid(b, cq->owner);
	return 0;
}

static int fill_mr(struct sv_nl_ctx *ctx, struct sv_nlb *b, void *obj,
		   uint32_t port)
{
	const struct sv_mr *mr = obj;

	(void)port;
	if (ctx->net_admin) {
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_RKEY, mr->key);
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_LKEY, mr->key);
	}
	sv_nlb_u64(b, RDMA_NLDEV_ATTR_RES_MRLEN, mr->length);
	sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_MRN, mr->id);
	if (mr->owner && mr->pd)
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_PDN, mr->pd->id);
	name_pid(b, mr->owner);
	return 0;
}

/* STAT_GET's MRs (fill_stat_mr_entry): the MRN, no counters of a driver */
static int fill_mr_stat(struct sv_nl_ctx *ctx, struct sv_nlb *b, void *obj,
			uint32_t port)
{
	(void)ctx;
	(void)port;
	sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_MRN, ((const struct sv_mr *)obj)->id);
	return 0;
}

static int fill_pd(struct sv_nl_ctx *ctx, struct sv_nlb *b, void *obj,
		   uint32_t port)
{
	const struct sv_pd *pd = obj;

	(void)port;
	/* a user PD's local_dma_lkey is 0 in the kernel; no PD of a program
	 * is IB_PD_UNSAFE_GLOBAL_RKEY */
	if (ctx->net_admin)
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_LOCAL_DMA_LKEY, 0);
	sv_nlb_u64(b, RDMA_NLDEV_ATTR_RES_USECNT, pd->refs);
	sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_PDN, pd->id);
	if (pd->owner)
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_CTXN, pd->owner->ctxn);
	name_pid(b, pd->owner);
	return 0;
}

static int fill_ctx(struct sv_nl_ctx *ctx, struct sv_nlb *b, void *obj,
		    uint32_t port)
{
	const struct sv_client *c = obj;

	(void)ctx;
	(void)port;
	sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_CTXN, c->ctxn);
	name_pid(b, c);
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* fill_res_range_qp_entry: one QP, or a range of QPNs */
static void qp_range(struct sv_nlb *b, uint32_t min, uint32_t max)
{
	long e;

	if (!min)
		return;
	e = sv_nlb_nest(b, RDMA_NLDEV_ATTR_RES_QP_ENTRY | NLA_F_NESTED);
	if (min == max) {
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_LQPN, min);
	} else {
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_MIN_RANGE, min);
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_MAX_RANGE, max);
	}
	sv_nlb_nest_end(b, e);
}

/* fill_res_srq_qps: the QPs that receive from srq, as ranges of QPNs */
static void srq_qps(struct sv_nlb *b, const struct sv_srq *srq)
{
	const uint32_t slots = sizeof(sv_dev.qpn_tab) / sizeof(sv_dev.qpn_tab[0]);
	uint32_t *qpn = srq->refs ? malloc(srq->refs * sizeof(*qpn)) : NULL;
	uint32_t n = 0, min = 0, prev = 0;
	long t = sv_nlb_nest(b, RDMA_NLDEV_ATTR_RES_QP | NLA_F_NESTED);

	for (uint32_t i = 0; qpn && i < slots && n < srq->refs; i++) {
		const struct sv_qp *qp = sv_dev.qpn_tab[i];

		if (qp_listed(qp) && qp->srq == srq)
			qpn[n++] = qp->qpn;
	}
	if (!qpn && srq->refs)
		b->full = true;    /* no memory: as a part too full */
	if (n)
		qsort(qpn, n, sizeof(*qpn), cmp_u32);
	for (uint32_t i = 0; i < n; i++) {
		if (!min) {
			min = qpn[i];
		} else if (qpn[i] > prev + 1) {
			qp_range(b, min, prev);
			min = qpn[i];
		}
		prev = qpn[i];
	}
	qp_range(b, min, prev);
	free(qpn);
	sv_nlb_nest_end(b, t);
}

static int fill_srq(struct sv_nl_ctx *ctx, struct sv_nlb *b, void *obj,
		    uint32_t port)
{
	const struct sv_srq *srq = obj;

	(void)ctx;
	(void)port;
	sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_SRQN, srq->srqn);
	sv_nlb_u8(b, RDMA_NLDEV_ATTR_RES_TYPE, (uint8_t)srq->type);
	if (srq->pd)
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_PDN, srq->pd->id);
	if ((srq->type == IBV_SRQT_XRC || srq->type == IBV_SRQT_TM) && srq->cq)
		sv_nlb_u32(b, RDMA_NLDEV_ATTR_RES_CQN, srq->cq->id);
	srq_qps(b, srq);
	name_pid(b, srq->owner);
	return 0;
}

/* ---- the kinds ---- */

static const struct kind k_qp = {
	RDMA_NLDEV_ATTR_RES_QP, RDMA_NLDEV_ATTR_RES_QP_ENTRY,
	RDMA_NLDEV_ATTR_RES_LQPN, false, SV_OBJ_QP, at_qp, by_id_qp, fill_qp };
static const struct kind k_cm_id = {
	RDMA_NLDEV_ATTR_RES_CM_ID, RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY,
	RDMA_NLDEV_ATTR_RES_CM_IDN, false, 0, at_cm_id, by_id_cm_id, fill_cm_id };
static const struct kind k_cq = {
	RDMA_NLDEV_ATTR_RES_CQ, RDMA_NLDEV_ATTR_RES_CQ_ENTRY,
	RDMA_NLDEV_ATTR_RES_CQN, true, SV_OBJ_CQ, at_obj, by_id_obj, fill_cq };
static const struct kind k_mr = {
	RDMA_NLDEV_ATTR_RES_MR, RDMA_NLDEV_ATTR_RES_MR_ENTRY,
	RDMA_NLDEV_ATTR_RES_MRN, true, SV_OBJ_MR, at_obj, by_id_obj, fill_mr };
static const struct kind k_mr_stat = {
	RDMA_NLDEV_ATTR_RES_MR, RDMA_NLDEV_ATTR_RES_MR_ENTRY,
	RDMA_NLDEV_ATTR_RES_MRN, true, SV_OBJ_MR, at_obj, by_id_obj, fill_mr_stat };
static const struct kind k_pd = {
	RDMA_NLDEV_ATTR_RES_PD, RDMA_NLDEV_ATTR_RES_PD_ENTRY,
	RDMA_NLDEV_ATTR_RES_PDN, true, SV_OBJ_PD, at_obj, by_id_obj, fill_pd };
static const struct kind k_ctx = {
	RDMA_NLDEV_ATTR_RES_CTX, RDMA_NLDEV_ATTR_RES_CTX_ENTRY,
	RDMA_NLDEV_ATTR_RES_CTXN, true, 0, at_ctx, by_id_ctx, fill_ctx };
static const struct kind k_srq = {
	RDMA_NLDEV_ATTR_RES_SRQ, RDMA_NLDEV_ATTR_RES_SRQ_ENTRY,
	RDMA_NLDEV_ATTR_RES_SRQN, true, SV_OBJ_SRQ, at_obj, by_id_srq, fill_srq };

/* The port a request filters by: 0 (none), or -EINVAL. */
static int port_filter(struct sv_nl_ctx *ctx, uint32_t *port)
{
	*port = 0;
	if (!ctx->tb[RDMA_NLDEV_ATTR_PORT_INDEX])
		return 0;
	return sv_nldev_port_of(ctx, port);
}

/* res_get_common_doit */
static int res_doit(struct sv_nl_ctx *ctx, struct sv_nlb *b, const struct kind *k)
{
	uint32_t port, id;
	void *obj;
	long at;
	int ret = sv_nldev_dev_of(ctx);

	if (ret)
		return ret;
	ret = sv_nl_attr_u32(ctx, (int)k->id_attr, &id);
	if (ret) {
		ctx->why = ret == -ENOENT ? "The object's id is missing" :
					    "The object's id is malformed";
		return -EINVAL;
	}
	ret = port_filter(ctx, &port);
	if (ret)
		return ret;
	if ((port && k->per_dev) || (!port && !k->per_dev)) {
		ctx->why = k->per_dev ? "This kind of object is per device: no port" :
					"This kind of object is per port: a port is needed";
		return -EINVAL;
	}
	obj = k->by_id(k, id);
	if (!obj)
		return -ENOENT;
	at = sv_nlb_msg(b, ctx, ctx->nlh->nlmsg_type & 0x3ff, 0);
	if (at < 0)
		return -EMSGSIZE;
	sv_nldev_handle(b);
	ret = k->fill(ctx, b, obj, port);
	if (ret)
		return ret;
	sv_nlb_msg_end(b, at);
	return 0;
}

/* res_get_common_dumpit: one message per part */
static int res_dump(struct sv_nl_ctx *ctx, struct sv_nlb *b, uint64_t *cursor,
		    const struct kind *k)
{
	size_t keep = b->len;
	bool visited = false, wrote = false, more = false;
	uint32_t port;
	long at, table;
	void *obj;
	int ret = sv_nldev_dev_of(ctx);

	if (ret)
		return ret;
	ret = port_filter(ctx, &port);
	if (ret)
		return ret;
	at = sv_nlb_msg(b, ctx, ctx->nlh->nlmsg_type & 0x3ff, NLM_F_MULTI);
	sv_nldev_handle(b);
	table = sv_nlb_nest(b, (uint16_t)k->table);
	if (at < 0 || b->full) {
		b->len = keep;
		b->full = false;
		return 1;
	}
	while ((obj = k->at(k, cursor))) {
		size_t e_keep = b->len;
		long e = sv_nlb_nest(b, (uint16_t)k->entry);

		visited = true;
		ret = b->full ? 0 : k->fill(ctx, b, obj, port);
		if (b->full) {
			/* the entry does not fit: taken back, the next part
			 * starts with it */
			b->len = e_keep;
			b->full = false;
			more = true;
			break;
		}
		if (ret == -EAGAIN) {
			b->len = e_keep;   /* filtered out */
		} else {
			sv_nlb_nest_end(b, e);
			wrote = true;
		}
		cursor[1]++;
		if (k->at == at_qp || k->at == at_ctx || k->at == at_cm_id)
			cursor[0]++;
	}
	if (!visited) {
		b->len = keep;
		return 0;
	}
	if (more && !wrote) {
		b->len = keep;
		if (keep)
			return 1;          /* a part of its own next time */
		ctx->why = "An entry larger than a message";
		return -EMSGSIZE;
	}
	sv_nlb_nest_end(b, table);
	sv_nlb_msg_end(b, at);
	return more ? 1 : 0;
}

#define RES_OPS(name)                                                         \
	int sv_nl_res_##name##_doit(struct sv_nl_ctx *ctx, struct sv_nlb *b)  \
	{                                                                     \
		return res_doit(ctx, b, &k_##name);                           \
	}                                                                     \
	int sv_nl_res_##name##_dump(struct sv_nl_ctx *ctx, struct sv_nlb *b,  \
				    uint64_t *cursor)                         \
	{                                                                     \
		return res_dump(ctx, b, cursor, &k_##name);                   \
	}

RES_OPS(qp)
RES_OPS(cm_id)
RES_OPS(cq)
RES_OPS(mr)
RES_OPS(pd)
RES_OPS(ctx)
RES_OPS(srq)

int sv_nl_res_mr_stat_doit(struct sv_nl_ctx *ctx, struct sv_nlb *b)
{
	return res_doit(ctx, b, &k_mr_stat);
}

int sv_nl_res_mr_stat_dump(struct sv_nl_ctx *ctx, struct sv_nlb *b,
			   uint64_t *cursor)
{
	return res_dump(ctx, b, cursor, &k_mr_stat);
}
