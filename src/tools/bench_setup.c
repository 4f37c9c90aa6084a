// SPDX-License-Identifier: MIT
/*
 * sv-bench: an endpoint made, connected and taken down (bench_run.c runs
 * it): the device, its PD, one buffer and its MR, the CQs (on completion
 * channels under -e), the resource domains of --domains, -q RC QPs, the
 * exchange of QPNs, GID, address and rkey with the peer over the socket,
 * and each run's WRs set up before it is timed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <softverbs/softverbs.h>

#include "tools/bench.h"
#include "tools/bench_ep.h"

/* ---- set-up ---- */

static struct ibv_context *open_dev(struct bt_ep *e)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int n = 0, i;

	list = ibv_get_device_list(&n);
	if (!list) {
		bt_errmsg(e, "ibv_get_device_list: %s", strerror(errno));
		return NULL;
	}
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "sv0"))
			break;
	if (i == n)
		i = 0;
	if (n == 0)
		bt_errmsg(e, "no RDMA device (is the softverbs library first on "
			  "the library path? 'softverbs bench' sees to it)");
	else if (!(ctx = ibv_open_device(list[i])))
		bt_errmsg(e, "ibv_open_device(%s): %s",
		       ibv_get_device_name(list[i]), strerror(errno));
	ibv_free_device_list(list);
	return ctx;
}

/* The domain of QP j and of its CQs (NULL: none). */
static struct ibv_exp_res_domain *dom_of(const struct bt_ep *e, uint32_t j)
{
	if (!e->ndom)
		return NULL;
	return e->dom[e->ndom == 1 ? 0 : j];
}

/* --domains one: one domain; per-qp: one per QP; every one of the models
 * of --res-domain. */
static int make_domains(struct bt_ep *e)
{
	struct ibv_exp_res_domain_init_attr a;

	e->ndom = e->o->domains == BT_DOM_NONE ? 0 :
		  e->o->domains == BT_DOM_ONE ? 1 : e->nqp;
	if (!e->ndom)
		return 0;
	e->dom = calloc(e->ndom, sizeof(*e->dom));
	if (!e->dom) {
		bt_errmsg(e, "out of memory");
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.comp_mask = IBV_EXP_RES_DOMAIN_THREAD_MODEL |
		      IBV_EXP_RES_DOMAIN_MSG_MODEL;
	a.thread_model = (enum ibv_exp_thread_model)e->o->thread_model;
	a.msg_model = (enum ibv_exp_msg_model)e->o->msg_model;
	for (unsigned int i = 0; i < e->ndom; i++) {
		e->dom[i] = ibv_exp_create_res_domain(e->ctx, &a);
		if (!e->dom[i]) {
			bt_errmsg(e, "ibv_exp_create_res_domain(%s,%s), domain %u "
				  "of %u: %s",
			       bt_thread_model_name(e->o->thread_model),
			       bt_msg_model_name(e->o->msg_model), i + 1,
			       e->ndom, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* n CQs of cqe entries each; CQ i in the domain of QP i (of all QPs when
 * n is 1). */
static int make_cqs(struct bt_ep *e, struct bt_cqs *s, unsigned int n,
		    int cqe)
{
	s->n = n;
	s->c = calloc(n, sizeof(*s->c));
	if (!s->c) {
		bt_errmsg(e, "out of memory");
		return -1;
	}
	if (e->o->events) {
		s->ch = ibv_create_comp_channel(e->ctx);
		if (!s->ch) {
			bt_errmsg(e, "ibv_create_comp_channel: %s",
			       strerror(errno));
			return -1;
		}
	}
	for (unsigned int i = 0; i < n; i++) {
		struct ibv_exp_res_domain *d = dom_of(e, i);
		struct bt_cq *c = &s->c[i];

		if (d) {
			struct ibv_exp_cq_init_attr ca;

			memset(&ca, 0, sizeof(ca));
			ca.comp_mask = IBV_EXP_CQ_INIT_ATTR_RES_DOMAIN;
			ca.res_domain = d;
			c->cq = ibv_exp_create_cq(e->ctx, cqe, c, s->ch, 0, &ca);
		} else {
			c->cq = ibv_create_cq(e->ctx, cqe, c, s->ch, 0);
		}
		if (!c->cq) {
			bt_errmsg(e, "%s(%d): %s", d ? "ibv_exp_create_cq" :
			       "ibv_create_cq", cqe, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* QP j with cap (updated with what it got), in its domain if it has one. */
static struct ibv_qp *create_qp(struct bt_ep *e, uint32_t j,
				struct ibv_qp_cap *cap)
{
	struct ibv_exp_res_domain *d = dom_of(e, j);
	struct ibv_cq *scq = e->scq.c[cq_of(&e->scq, j)].cq;
	struct ibv_cq *rcq = e->rcq.c[cq_of(&e->rcq, j)].cq;
	struct ibv_qp *qp;

	if (d) {
		struct ibv_exp_qp_init_attr xa;

		memset(&xa, 0, sizeof(xa));
		xa.send_cq = scq;
		xa.recv_cq = rcq;
		xa.qp_type = IBV_QPT_RC;
		xa.cap = *cap;
		xa.comp_mask = IBV_EXP_QP_INIT_ATTR_PD |
			       IBV_EXP_QP_INIT_ATTR_RES_DOMAIN;
		xa.pd = e->pd;
		xa.res_domain = d;
		qp = ibv_exp_create_qp(e->ctx, &xa);
		if (qp)
			*cap = xa.cap;
	} else {
		struct ibv_qp_init_attr ia;

		memset(&ia, 0, sizeof(ia));
		ia.send_cq = scq;
		ia.recv_cq = rcq;
		ia.qp_type = IBV_QPT_RC;
		ia.cap = *cap;
		qp = ibv_create_qp(e->pd, &ia);
		if (qp)
			*cap = ia.cap;
	}
	return qp;
}

static struct ibv_qp *make_qp(struct bt_ep *e, uint32_t j)
{
	struct ibv_qp_cap cap;
	struct ibv_qp *qp;

	memset(&cap, 0, sizeof(cap));
	cap.max_send_wr = e->sq_depth;
	cap.max_recv_wr = e->rq_depth;
	cap.max_send_sge = 1;
	cap.max_recv_sge = 1;
	cap.max_inline_data =
		e->o->test == BT_WRITE || e->o->test == BT_SEND ?
		BT_MAX_INLINE : 0;
	qp = create_qp(e, j, &cap);
	if (!qp && cap.max_inline_data) {
		/* a device with less inline room: go without */
		cap.max_inline_data = 0;
		qp = create_qp(e, j, &cap);
	}
	if (!qp) {
		bt_errmsg(e, "%s (%u send, %u receive WRs): %s",
		       dom_of(e, j) ? "ibv_exp_create_qp" : "ibv_create_qp",
		       e->sq_depth, e->rq_depth, strerror(errno));
		return NULL;
	}
	if (j == 0 || cap.max_inline_data < e->max_inline)
		e->max_inline = cap.max_inline_data;
	return qp;
}

static int qp_init(struct bt_ep *e, struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	int ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (ret)
		bt_errmsg(e, "QP %u to INIT: %s", qp->qp_num, strerror(ret));
	return ret ? -1 : 0;
}

static int qp_connect(struct bt_ep *e, struct ibv_qp *qp, uint32_t dqpn,
		      enum ibv_mtu mtu)
{
	struct ibv_qp_attr a;
	int ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = dqpn;
	a.rq_psn = BT_PSN;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;    /* RoCE: a GRH, GID index 0 */
	a.ah_attr.grh.dgid = e->rgid;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				    IBV_QP_MAX_DEST_RD_ATOMIC |
				    IBV_QP_MIN_RNR_TIMER);
	if (ret) {
		bt_errmsg(e, "QP %u to RTR: %s", qp->qp_num, strerror(ret));
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = BT_PSN;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;            /* the receiver reposts: wait for it */
	a.max_rd_atomic = 16;
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
				    IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				    IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
	if (ret)
		bt_errmsg(e, "QP %u to RTS: %s", qp->qp_num, strerror(ret));
	return ret ? -1 : 0;
}

static int exchange(struct bt_ep *e)
{
	struct bt_info mine, theirs;
	union ibv_gid gid;
	uint32_t *qpns = calloc(e->nqp, sizeof(*qpns));
	int ret = -1;

	if (!qpns)
		goto out;
	if (ibv_query_gid(e->ctx, 1, 0, &gid)) {
		bt_errmsg(e, "ibv_query_gid(port 1, index 0) failed");
		goto out;
	}
	memset(&mine, 0, sizeof(mine));
	mine.magic = BT_MAGIC;
	mine.nqp = e->nqp;
	mine.addr = e->rva;
	mine.len = e->half;
	mine.rkey = e->mr->rkey;
	mine.psn = BT_PSN;
	memcpy(mine.gid, gid.raw, sizeof(mine.gid));
	for (uint32_t j = 0; j < e->nqp; j++)
		qpns[j] = e->qp[j]->qp_num;
	if (bt_xwrite(e->fd, &mine, sizeof(mine)) ||
	    bt_xwrite(e->fd, qpns, e->nqp * sizeof(*qpns)) ||
	    bt_xread(e->fd, &theirs, sizeof(theirs)) ||
	    theirs.magic != BT_MAGIC || theirs.nqp != e->nqp ||
	    bt_xread(e->fd, e->rqpn, e->nqp * sizeof(*e->rqpn))) {
		bt_errmsg(e, "no answer from the other process");
		goto out;
	}
	e->raddr = theirs.addr;
	e->rkey = theirs.rkey;
	memcpy(e->rgid.raw, theirs.gid, sizeof(theirs.gid));
	ret = 0;
out:
	free(qpns);
	return ret;
}

static void cqs_destroy(struct bt_cqs *s)
{
	for (unsigned int i = 0; s->c && i < s->n; i++)
		if (s->c[i].cq)
			ibv_destroy_cq(s->c[i].cq);
	if (s->ch)
		ibv_destroy_comp_channel(s->ch);
	free(s->c);
}

/* Everything bt_ep_create made; -1 if a domain could not be destroyed (said
 * on stderr). */
int bt_ep_destroy(struct bt_ep *e)
{
	int ret = 0;

	for (uint32_t j = 0; e->qp && j < e->nqp; j++)
		if (e->qp[j])
			ibv_destroy_qp(e->qp[j]);
	cqs_destroy(&e->scq);
	cqs_destroy(&e->rcq);
	for (unsigned int i = 0; e->dom && i < e->ndom; i++) {
		int err;

		if (!e->dom[i])
			continue;
		err = ibv_exp_destroy_res_domain(e->ctx, e->dom[i], NULL);
		if (err) {
			bt_errmsg(e, "ibv_exp_destroy_res_domain: %s",
			       strerror(err));
			ret = -1;
		}
	}
	free(e->dom);
	if (e->mr)
		ibv_dereg_mr(e->mr);
	if (e->dm)
		ibv_free_dm(e->dm);
	if (e->pd)
		ibv_dealloc_pd(e->pd);
	if (e->ctx)
		ibv_close_device(e->ctx);
	if (e->buf)
		munmap(e->buf, 2 * e->half);
	if (e->memfd >= 0)
		close(e->memfd);
	free(e->qp);
	free(e->rqpn);
	free(e->swr);
	free(e->ssge);
	free(e->rwr);
	free(e->rsge);
	free(e->posted);
	free(e->done);
	free(e->unsig);
	free(e->samples);
	return ret;
}

/* bt_ep_create, step by step: a step that fails says why and returns -1,
 * leaving what was made for bt_ep_destroy */

/* Who receives, how deep each queue is, how often a send is signaled. */
static void plan_queues(struct bt_ep *e, const struct bt_opts *o,
			bool server)
{
	e->nqp = o->mode == BT_LAT ? 1 : o->qps;
	e->imm = o->mode == BT_LAT && o->test == BT_WRITE && o->events;
	/* who receives: both sides of a ping-pong by sends (or writes with
	 * immediate), the server of a send bw test */
	e->recvs = (o->test == BT_SEND || e->imm) &&
		   (o->mode == BT_LAT || server);
	if (o->mode == BT_BW) {
		e->sq_depth = o->outstanding;
		e->sig_every = o->outstanding / 4 ? o->outstanding / 4 : 1;
		/* the receiver of a send test keeps twice the sender's
		 * window posted, at least 128 (all in one CQ, so less with
		 * many QPs; never less than the window) */
		e->rq_depth = 1;
		if (e->recvs) {
			e->rq_depth = 2 * o->outstanding;
			if (e->rq_depth < 128)
				e->rq_depth = 128;
			if (e->rq_depth > BT_MAX_OUTST)
				e->rq_depth = BT_MAX_OUTST;
			if (e->rq_depth > BT_MAX_CQE / e->nqp)
				e->rq_depth = BT_MAX_CQE / e->nqp;
		}
	} else {
		e->sq_depth = BT_LAT_DEPTH;
		/* read and atomic: one round trip each, each signaled */
		e->sig_every = o->test == BT_READ || o->test == BT_ATOMIC ?
			       1 : BT_LAT_DEPTH / 2;
		e->rq_depth = e->recvs ? BT_LAT_DEPTH : 1;
	}
}

/* The buffer's half (the largest size, in whole pages); returns how many
 * samples the longest run takes. */
static uint64_t size_buffer(struct bt_ep *e, const struct bt_opts *o,
			    long page)
{
	uint64_t max_size = 8, max_samples = 0;

	for (unsigned int i = 0; i < o->nsizes; i++) {
		uint64_t n = bt_iters_for(o, o->sizes[i]);

		if (o->sizes[i] > max_size)
			max_size = o->sizes[i];
		n += bt_warmup_for(o, n);
		if (n > max_samples)
			max_samples = n;
	}
	e->half = (max_size + (uint64_t)page - 1) & ~((uint64_t)page - 1);
	return max_samples;
}

/* The per-QP arrays, and the latency client's samples. */
static int alloc_arrays(struct bt_ep *e, const struct bt_opts *o,
			bool server, uint64_t max_samples)
{
	e->qp = calloc(e->nqp, sizeof(*e->qp));
	e->rqpn = calloc(e->nqp, sizeof(*e->rqpn));
	e->swr = calloc(e->nqp, sizeof(*e->swr));
	e->ssge = calloc(e->nqp, sizeof(*e->ssge));
	e->rwr = calloc(e->nqp, sizeof(*e->rwr));
	e->rsge = calloc(e->nqp, sizeof(*e->rsge));
	e->posted = calloc(e->nqp, sizeof(*e->posted));
	e->done = calloc(e->nqp, sizeof(*e->done));
	e->unsig = calloc(e->nqp, sizeof(*e->unsig));
	if (o->mode == BT_LAT && !server)
		e->samples = calloc(max_samples + 1, sizeof(*e->samples));
	if (!e->qp || !e->rqpn || !e->swr || !e->ssge || !e->rwr ||
	    !e->rsge || !e->posted || !e->done || !e->unsig ||
	    (o->mode == BT_LAT && !server && !e->samples)) {
		bt_errmsg(e, "out of memory");
		return -1;
	}
	return 0;
}

/* Both halves, one mapping. */
static int map_buffer(struct bt_ep *e, const struct bt_opts *o)
{
	/* the buffer, touched now so no page fault lands in a timed loop;
	 * --memfd: in a sealed memfd (kept open: the device finds it by its
	 * descriptor) */
	if (o->memfd) {
		e->memfd = memfd_create("sv-bench", MFD_CLOEXEC |
					MFD_ALLOW_SEALING);
		if (e->memfd < 0 || ftruncate(e->memfd, (off_t)(2 * e->half)) ||
		    fcntl(e->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW)) {
			bt_errmsg(e, "cannot make a sealed memfd: %s",
			       strerror(errno));
			return -1;
		}
		e->buf = mmap(NULL, 2 * e->half, PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_POPULATE, e->memfd, 0);
	} else {
		e->buf = mmap(NULL, 2 * e->half, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1,
			      0);
	}
	if (e->buf == MAP_FAILED) {
		e->buf = NULL;
		bt_errmsg(e, "cannot map 2 x %zu bytes: %s", e->half,
		       strerror(errno));
		return -1;
	}
	memset(e->buf, 0, 2 * e->half);
	e->rbuf = e->buf;
	e->sbuf = e->buf + e->half;
	e->rva = (uintptr_t)e->rbuf;
	e->sva = (uintptr_t)e->sbuf;
	return 0;
}

/* The device, checked against the queue depths, and its port's MTU. */
static int open_device(struct bt_ep *e, struct ibv_device_attr *da,
		       enum ibv_mtu *mtu)
{
	struct ibv_port_attr pa;

	e->ctx = open_dev(e);
	if (!e->ctx)
		return -1;
	if (ibv_query_device(e->ctx, da)) {
		bt_errmsg(e, "ibv_query_device failed");
		return -1;
	}
	if (e->sq_depth > (uint32_t)da->max_qp_wr ||
	    e->rq_depth > (uint32_t)da->max_qp_wr) {
		bt_errmsg(e, "-o %u is more than the device's %d WRs per QP",
		       e->sq_depth, da->max_qp_wr);
		return -1;
	}
	memset(&pa, 0, sizeof(pa));
	if (ibv_query_port(e->ctx, 1, &pa) == 0)
		*mtu = pa.active_mtu;
	return 0;
}

/* The PD and the buffer's MR (under --dm, in device memory). */
static int register_buffer(struct bt_ep *e, const struct bt_opts *o)
{
	e->pd = ibv_alloc_pd(e->ctx);
	if (!e->pd) {
		bt_errmsg(e, "ibv_alloc_pd: %s", strerror(errno));
		return -1;
	}
	if (o->dm) {
		/* --dm: the same two halves in device memory, zero-based */
		struct ibv_alloc_dm_attr da_dm = { .length = 2 * e->half };

		e->dm = ibv_alloc_dm(e->ctx, &da_dm);
		if (!e->dm) {
			bt_errmsg(e, "ibv_alloc_dm(%zu bytes): %s", 2 * e->half,
			       strerror(errno));
			return -1;
		}
		e->mr = ibv_reg_dm_mr(e->pd, e->dm, 0, 2 * e->half,
				      IBV_ACCESS_LOCAL_WRITE |
				      IBV_ACCESS_REMOTE_WRITE |
				      IBV_ACCESS_REMOTE_READ |
				      IBV_ACCESS_REMOTE_ATOMIC |
				      IBV_ACCESS_ZERO_BASED);
		e->rva = 0;
		e->sva = e->half;
	} else {
		e->mr = ibv_reg_mr(e->pd, e->buf, 2 * e->half,
				   IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC);
	}
	if (!e->mr) {
		bt_errmsg(e, "ibv_reg_mr(%zu bytes): %s", 2 * e->half,
		       strerror(errno));
		return -1;
	}
	return 0;
}

/* The send and receive CQs (in the domains just made); a send CQ holds at
 * most one CQE per sig_every WRs per QP (plus the last of a run); a receive
 * CQ one per receive WR; per-qp: a pair of CQs for each QP */
static int make_send_recv_cqs(struct bt_ep *e, const struct bt_opts *o,
			      const struct ibv_device_attr *da)
{
	unsigned int ncq = o->domains == BT_DOM_PER_QP ? e->nqp : 1;
	uint64_t per = ncq == 1 ? e->nqp : 1;
	uint64_t scqe = per * (e->sq_depth / e->sig_every + 2);
	uint64_t rcqe = per * e->rq_depth;

	if (scqe > (uint64_t)da->max_cqe || rcqe > (uint64_t)da->max_cqe) {
		bt_errmsg(e, "-q %u x -o %u needs more CQEs than the "
			  "device's %d", e->nqp, e->sq_depth,
		       da->max_cqe);
		return -1;
	}
	if (make_cqs(e, &e->scq, ncq, (int)scqe) ||
	    make_cqs(e, &e->rcq, ncq, (int)rcqe))
		return -1;
	return 0;
}

/* The QPs, to INIT; the exchange with the peer; then each QP to RTS. */
static int make_and_connect_qps(struct bt_ep *e, enum ibv_mtu mtu)
{
	for (uint32_t j = 0; j < e->nqp; j++) {
		e->qp[j] = make_qp(e, j);
		if (!e->qp[j] || qp_init(e, e->qp[j]))
			return -1;
	}
	if (exchange(e))
		return -1;
	for (uint32_t j = 0; j < e->nqp; j++)
		if (qp_connect(e, e->qp[j], e->rqpn[j], mtu))
			return -1;
	return 0;
}

static void set_wrs(struct bt_ep *e, const struct bt_opts *o)
{
	/* the work requests, once; a run changes lengths and flags */
	for (uint32_t j = 0; j < e->nqp; j++) {
		struct ibv_send_wr *w = &e->swr[j];
		struct ibv_sge *s = &e->ssge[j];

		s->lkey = e->mr->lkey;
		s->addr = e->sva;
		w->sg_list = s;
		w->num_sge = 1;
		switch (o->test) {
		case BT_WRITE:
			w->opcode = e->imm ? IBV_WR_RDMA_WRITE_WITH_IMM :
					     IBV_WR_RDMA_WRITE;
			w->imm_data = htonl(BT_IMM);
			w->wr.rdma.remote_addr = e->raddr;
			w->wr.rdma.rkey = e->rkey;
			break;
		case BT_READ:
			/* into the local receive half */
			s->addr = e->rva;
			w->opcode = IBV_WR_RDMA_READ;
			w->wr.rdma.remote_addr = e->raddr;
			w->wr.rdma.rkey = e->rkey;
			break;
		case BT_SEND:
			w->opcode = IBV_WR_SEND;
			break;
		case BT_ATOMIC:
			w->opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			w->wr.atomic.remote_addr = e->raddr;
			w->wr.atomic.rkey = e->rkey;
			w->wr.atomic.compare_add = 1;
			s->length = 8;
			break;
		}
		e->rsge[j].addr = e->rva;
		e->rsge[j].length = (uint32_t)e->half;
		e->rsge[j].lkey = e->mr->lkey;
		e->rwr[j].wr_id = j;
		/* WRITE_WITH_IMM consumes a receive WR and no bytes */
		e->rwr[j].sg_list = e->imm ? NULL : &e->rsge[j];
		e->rwr[j].num_sge = e->imm ? 0 : 1;
	}
}

static int post_first_recvs(struct bt_ep *e)
{
	uint32_t nrecv;

	/* who receives keeps its receive queues full */
	nrecv = e->recvs ? e->rq_depth : 0;
	for (uint32_t j = 0; j < e->nqp; j++)
		for (uint32_t i = 0; i < nrecv; i++)
			if (bt_post_recv(e, j))
				return -1;
	return 0;
}

int bt_ep_create(struct bt_ep *e, const struct bt_opts *o, int fd,
		 bool server)
{
	uint64_t max_samples;
	long page = sysconf(_SC_PAGESIZE);
	struct ibv_device_attr da;
	enum ibv_mtu mtu = IBV_MTU_1024;

	memset(e, 0, sizeof(*e));
	e->memfd = -1;
	e->o = o;
	e->fd = fd;
	e->server = server;
	plan_queues(e, o, server);
	max_samples = size_buffer(e, o, page);
	if (alloc_arrays(e, o, server, max_samples) || map_buffer(e, o) ||
	    open_device(e, &da, &mtu) || register_buffer(e, o) ||
	    make_domains(e) || make_send_recv_cqs(e, o, &da) ||
	    make_and_connect_qps(e, mtu))
		return -1;
	set_wrs(e, o);
	return post_first_recvs(e);
}

/* Before a run of one size: lengths, flags, counters, a clean receive
 * half (the write ping-pong watches its last byte). */
void bt_prepare(struct bt_ep *e, uint64_t size, uint64_t iters)
{
	e->iters = iters;
	e->base_flags = 0;
	/* inline data is read from the SGE's address in this process, which
	 * a DM MR's (zero-based) addresses are not */
	if ((e->o->test == BT_WRITE || e->o->test == BT_SEND) &&
	    size <= e->max_inline && !e->o->dm)
		e->base_flags = IBV_SEND_INLINE;
	for (uint32_t j = 0; j < e->nqp; j++) {
		if (e->o->test != BT_ATOMIC)
			e->ssge[j].length = (uint32_t)size;
		e->posted[j] = e->done[j] = 0;
		e->unsig[j] = 0;
	}
	if (e->o->mode == BT_LAT && e->o->test == BT_WRITE)
		memset(e->rbuf, 0, size);
}

