// SPDX-License-Identifier: MIT
/*
 * sv-bench: the measuring halves. Each process opens the device, makes its
 * PD, one buffer (receive half, send half) and its MR, a send CQ and a
 * receive CQ (the send CQs on one completion channel under -e, the receive
 * CQs on another) and -q RC QPs; the two exchange QPNs, GID, address and
 * rkey over their socket and connect. With --domains one, the CQs and QPs
 * are made in one resource domain (ibv_exp_create_cq, ibv_exp_create_qp);
 * with --domains per-qp, each QP has a domain and a send and a receive CQ
 * of its own, and the loops that serve every QP look at the CQs in turn.
 * Then the client leads, size by size:
 *
 *   client                               server
 *   RUN {size, iterations}  ---------->  prepares
 *                           <----------  READY
 *   measures (the server takes part in ping-pongs and receives sends)
 *   FINISH                  ---------->  finishes its part
 *                           <----------  DONE
 *   ... QUIT at the end.
 *
 * Everything the timed loops touch is made before RUN: work requests and
 * SGEs are built once per QP and only their lengths and flags change; the
 * loops neither allocate nor make system calls (except the blocking wait
 * for a completion event under -e).
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

uint64_t bt_progress_done;
unsigned int bt_progress_index;

#define BT_MAGIC      0x73766274u   /* "svbt" */
#define BT_PSN        0x2a2a
#define BT_WC_BATCH   32
#define BT_LAT_DEPTH  64            /* send and receive WRs of a lat QP */
#define BT_MAX_INLINE 512           /* asked for; the QP says what it got */
#define BT_REAP_SPINS (1u << 14)    /* spins between looks at the send CQ */
#define BT_IMM        0x5eb0b0e5u
#define BT_MAX_CQE    65535         /* the most CQEs one CQ is asked for */

enum { BT_RUN = 1, BT_READY, BT_FINISH, BT_DONE, BT_QUIT };

struct bt_msg {
	uint32_t op;
	uint32_t zero;
	uint64_t size;
	uint64_t iters;
};

/* What one side tells the other; nqp QPNs follow. */
struct bt_info {
	uint32_t magic;
	uint32_t nqp;
	uint64_t addr;
	uint64_t len;
	uint32_t rkey;
	uint32_t psn;
	uint8_t gid[16];
};

struct bt_cq {
	struct ibv_cq *cq;
	bool armed;              /* -e: a notification is requested */
};

/* The send CQs, or the receive CQs: one for all QPs, or one per QP
 * (--domains per-qp). Under -e they share one completion channel. */
struct bt_cqs {
	struct bt_cq *c;
	unsigned int n;
	unsigned int next;       /* where a look at all of them begins */
	struct ibv_comp_channel *ch;
};

struct bt_ep {
	const struct bt_opts *o;
	bool server;
	int fd;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct bt_cqs scq, rcq;
	struct ibv_qp **qp;
	unsigned int nqp;
	struct ibv_exp_res_domain **dom;   /* --domains one or per-qp */
	unsigned int ndom;
	char *buf;               /* 2 * half bytes: receive, then send */
	int memfd;               /* --memfd: the buffer's file, else -1 */
	size_t half;
	char *rbuf, *sbuf;
	uint64_t rva, sva;       /* their addresses in the MR (--dm: 0, half) */
	struct ibv_dm *dm;       /* --dm: the buffers */
	uint32_t max_inline;
	uint32_t sq_depth, rq_depth, sig_every;
	bool recvs;              /* receive WRs are posted and reposted */
	bool imm;                /* write ping-pong by WRITE_WITH_IMM (-e) */

	/* the peer */
	uint64_t raddr;
	uint32_t rkey;
	uint32_t *rqpn;
	union ibv_gid rgid;

	/* per QP, built once */
	struct ibv_send_wr *swr;
	struct ibv_sge *ssge;
	struct ibv_recv_wr *rwr;
	struct ibv_sge *rsge;
	uint64_t *posted, *done;
	uint32_t *unsig;
	unsigned int base_flags;
	uint64_t iters;          /* of the current run, per QP */

	uint64_t *samples;       /* lat: one round trip per iteration, ns */
	uint64_t nsamples;
	struct ibv_wc wc[BT_WC_BATCH];
};

static void errmsg(const struct bt_ep *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void errmsg(const struct bt_ep *e, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, BT_NAME " (%s): ", e->server ? "server" : "client");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *bt_test_name(enum bt_test t)
{
	switch (t) {
	case BT_WRITE: return "write";
	case BT_READ: return "read";
	case BT_SEND: return "send";
	case BT_ATOMIC: return "atomic";
	}
	return "?";
}

const char *bt_domains_name(enum bt_domains d)
{
	switch (d) {
	case BT_DOM_NONE: return "none";
	case BT_DOM_ONE: return "one";
	case BT_DOM_PER_QP: return "per-qp";
	}
	return "?";
}

const char *bt_thread_model_name(unsigned int m)
{
	switch (m) {
	case IBV_EXP_THREAD_SAFE: return "safe";
	case IBV_EXP_THREAD_UNSAFE: return "unsafe";
	case IBV_EXP_THREAD_SINGLE: return "single";
	}
	return "?";
}

const char *bt_msg_model_name(unsigned int m)
{
	switch (m) {
	case IBV_EXP_MSG_DEFAULT: return "default";
	case IBV_EXP_MSG_LOW_LATENCY: return "low_latency";
	case IBV_EXP_MSG_HIGH_BW: return "high_bw";
	case IBV_EXP_MSG_FORCE_LOW_LATENCY: return "force_low_latency";
	}
	return "?";
}

uint64_t bt_iters_for(const struct bt_opts *o, uint64_t size)
{
	uint64_t n;

	if (o->iters)
		return o->iters;
	/* 1000 up to 64 KiB, then about 64 MiB per QP and size, at least 32 */
	if (size <= 65536)
		return 1000;
	n = 1000ull * 65536 / size;
	return n < 32 ? 32 : n;
}

uint64_t bt_warmup_for(const struct bt_opts *o, uint64_t iters)
{
	uint64_t w = iters / 10;

	if (o->mode != BT_LAT)
		return 0;
	return w > 100 ? 100 : w;
}

/* ---- the socket between the two processes ---- */

static int xwrite(int fd, const void *p, size_t len)
{
	const char *c = p;

	while (len) {
		ssize_t n = write(fd, c, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		c += n;
		len -= (size_t)n;
	}
	return 0;
}

/* 0, or -1 (1 for a clean end of file before the first byte). */
static int xread(int fd, void *p, size_t len)
{
	char *c = p;
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, c + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 && got == 0)
			return 1;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

static int send_msg(struct bt_ep *e, uint32_t op, uint64_t size,
		    uint64_t iters)
{
	struct bt_msg m = { .op = op, .size = size, .iters = iters };

	if (xwrite(e->fd, &m, sizeof(m))) {
		errmsg(e, "the other process is gone");
		return -1;
	}
	return 0;
}

static int recv_msg(struct bt_ep *e, struct bt_msg *m)
{
	int r = xread(e->fd, m, sizeof(*m));

	if (r) {
		errmsg(e, "the other process is gone");
		return -1;
	}
	return 0;
}

static int expect_msg(struct bt_ep *e, uint32_t op)
{
	struct bt_msg m;

	if (recv_msg(e, &m))
		return -1;
	if (m.op != op) {
		errmsg(e, "protocol error: message %u, expected %u", m.op, op);
		return -1;
	}
	return 0;
}

/* ---- completions ---- */

/* The CQ of s that QP j uses. */
static inline unsigned int cq_of(const struct bt_cqs *s, uint32_t j)
{
	return s->n == 1 ? 0 : j;
}

/* Wait for at least one completion on the CQs [first, first + count) of
 * s (all of them in turn, from where the last look ended): how many
 * (<= max, in e->wc) or -1. Busy polling, or under -e: poll, arm those
 * not armed, poll again, sleep on the channel (an event for another CQ of
 * the set only disarms that one). */
static int cq_wait(struct bt_ep *e, struct bt_cqs *s, unsigned int first,
		   unsigned int count, int max)
{
	for (;;) {
		struct ibv_cq *ev_cq;
		void *ev_ctx;
		bool armed = false;

		for (unsigned int k = 0; k < count; k++) {
			unsigned int i = count == 1 ? first :
					 first + (s->next + k) % count;
			int n = ibv_poll_cq(s->c[i].cq, max, e->wc);

			if (n < 0) {
				errmsg(e, "ibv_poll_cq failed");
				return -1;
			}
			if (n) {
				if (count > 1)
					s->next = (i - first + 1) % count;
				return n;
			}
		}
		if (!s->ch)
			continue;
		for (unsigned int k = 0; k < count; k++) {
			struct bt_cq *c = &s->c[first + k];

			if (c->armed)
				continue;
			if (ibv_req_notify_cq(c->cq, 0)) {
				errmsg(e, "ibv_req_notify_cq failed");
				return -1;
			}
			c->armed = armed = true;
		}
		if (armed)
			continue;
		if (ibv_get_cq_event(s->ch, &ev_cq, &ev_ctx)) {
			errmsg(e, "ibv_get_cq_event: %s", strerror(errno));
			return -1;
		}
		ibv_ack_cq_events(ev_cq, 1);
		((struct bt_cq *)ev_ctx)->armed = false;
	}
}

static int wc_check(struct bt_ep *e, const struct ibv_wc *wc)
{
	if (wc->status == IBV_WC_SUCCESS)
		return 0;
	errmsg(e, "completion error on QP %u: %s (vendor error %u)", wc->qp_num,
	       ibv_wc_status_str(wc->status), wc->vendor_err);
	return -1;
}

/* Send completions: each signaled WR carries (QP index << 32 | the WRs it
 * retires). */
static int reap_send(struct bt_ep *e, const struct ibv_wc *wc, int n,
		     uint64_t *completed)
{
	for (int i = 0; i < n; i++) {
		uint32_t j = (uint32_t)(wc[i].wr_id >> 32);
		uint32_t c = (uint32_t)wc[i].wr_id;

		if (wc_check(e, &wc[i]))
			return -1;
		if (j >= e->nqp) {
			errmsg(e, "completion for an unknown WR %#" PRIx64,
			       (uint64_t)wc[i].wr_id);
			return -1;
		}
		e->done[j] += c;
		*completed += c;
	}
	return 0;
}

/* Post the next WR on QP j; every sig_every-th and the run's last are
 * signaled. */
static inline int post_one(struct bt_ep *e, uint32_t j)
{
	struct ibv_send_wr *wr = &e->swr[j], *bad;
	int ret;

	e->posted[j]++;
	wr->send_flags = e->base_flags;
	if (++e->unsig[j] >= e->sig_every || e->posted[j] == e->iters) {
		wr->send_flags |= IBV_SEND_SIGNALED;
		wr->wr_id = (uint64_t)j << 32 | e->unsig[j];
		e->unsig[j] = 0;
	}
	ret = ibv_post_send(e->qp[j], wr, &bad);
	if (ret) {
		errmsg(e, "ibv_post_send: %s", strerror(ret));
		return -1;
	}
	return 0;
}

/* Room for one more WR on QP j, waiting for send completions if needed. */
static inline int sq_room(struct bt_ep *e, uint32_t j)
{
	uint64_t dummy = 0;

	while (e->posted[j] - e->done[j] >= e->sq_depth) {
		int n = cq_wait(e, &e->scq, cq_of(&e->scq, j), 1,
				BT_WC_BATCH);

		if (n < 0 || reap_send(e, e->wc, n, &dummy))
			return -1;
	}
	return 0;
}

/* Wait until every WR posted is retired (untimed, between runs). */
static int sq_drain(struct bt_ep *e)
{
	uint64_t dummy = 0;

	for (uint32_t j = 0; j < e->nqp; j++)
		while (e->done[j] < e->posted[j]) {
			int n = cq_wait(e, &e->scq, cq_of(&e->scq, j), 1,
					BT_WC_BATCH);

			if (n < 0 || reap_send(e, e->wc, n, &dummy))
				return -1;
		}
	return 0;
}

/* A look at the send CQs while spinning on memory, so an error completion
 * ends the run instead of hanging it. */
static int sq_peek(struct bt_ep *e)
{
	uint64_t dummy = 0;

	for (unsigned int i = 0; i < e->scq.n; i++) {
		int n = ibv_poll_cq(e->scq.c[i].cq, BT_WC_BATCH, e->wc);

		if (n < 0) {
			errmsg(e, "ibv_poll_cq failed");
			return -1;
		}
		if (reap_send(e, e->wc, n, &dummy))
			return -1;
	}
	return 0;
}

static int post_recv(struct bt_ep *e, uint32_t j)
{
	struct ibv_recv_wr *bad;
	int ret = ibv_post_recv(e->qp[j], &e->rwr[j], &bad);

	if (ret) {
		errmsg(e, "ibv_post_recv: %s", strerror(ret));
		return -1;
	}
	return 0;
}

/* Wait for one receive completion (lat: one QP) and repost it. */
static inline int recv_one(struct bt_ep *e)
{
	int n = cq_wait(e, &e->rcq, 0, 1, 1);

	if (n < 0 || wc_check(e, &e->wc[0]))
		return -1;
	return post_recv(e, (uint32_t)e->wc[0].wr_id);
}

/* ---- set-up ---- */

static struct ibv_context *open_dev(struct bt_ep *e)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int n = 0, i;

	list = ibv_get_device_list(&n);
	if (!list) {
		errmsg(e, "ibv_get_device_list: %s", strerror(errno));
		return NULL;
	}
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "sv0"))
			break;
	if (i == n)
		i = 0;
	if (n == 0)
		errmsg(e, "no RDMA device (is the softverbs library first on "
			  "the library path? 'softverbs bench' sees to it)");
	else if (!(ctx = ibv_open_device(list[i])))
		errmsg(e, "ibv_open_device(%s): %s",
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
		errmsg(e, "out of memory");
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
			errmsg(e, "ibv_exp_create_res_domain(%s,%s), domain %u "
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
		errmsg(e, "out of memory");
		return -1;
	}
	if (e->o->events) {
		s->ch = ibv_create_comp_channel(e->ctx);
		if (!s->ch) {
			errmsg(e, "ibv_create_comp_channel: %s",
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
			errmsg(e, "%s(%d): %s", d ? "ibv_exp_create_cq" :
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
		errmsg(e, "%s (%u send, %u receive WRs): %s",
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
		errmsg(e, "QP %u to INIT: %s", qp->qp_num, strerror(ret));
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
		errmsg(e, "QP %u to RTR: %s", qp->qp_num, strerror(ret));
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
		errmsg(e, "QP %u to RTS: %s", qp->qp_num, strerror(ret));
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
		errmsg(e, "ibv_query_gid(port 1, index 0) failed");
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
	if (xwrite(e->fd, &mine, sizeof(mine)) ||
	    xwrite(e->fd, qpns, e->nqp * sizeof(*qpns)) ||
	    xread(e->fd, &theirs, sizeof(theirs)) ||
	    theirs.magic != BT_MAGIC || theirs.nqp != e->nqp ||
	    xread(e->fd, e->rqpn, e->nqp * sizeof(*e->rqpn))) {
		errmsg(e, "no answer from the other process");
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

/* Everything ep_create made; -1 if a domain could not be destroyed (said
 * on stderr). */
static int ep_destroy(struct bt_ep *e)
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
			errmsg(e, "ibv_exp_destroy_res_domain: %s",
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

static int ep_create(struct bt_ep *e, const struct bt_opts *o, int fd,
		     bool server)
{
	uint64_t max_size = 8, max_samples = 0;
	long page = sysconf(_SC_PAGESIZE);
	struct ibv_device_attr da;
	enum ibv_mtu mtu = IBV_MTU_1024;
	struct ibv_port_attr pa;
	uint32_t nrecv;

	memset(e, 0, sizeof(*e));
	e->memfd = -1;
	e->o = o;
	e->fd = fd;
	e->server = server;
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

	for (unsigned int i = 0; i < o->nsizes; i++) {
		uint64_t n = bt_iters_for(o, o->sizes[i]);

		if (o->sizes[i] > max_size)
			max_size = o->sizes[i];
		n += bt_warmup_for(o, n);
		if (n > max_samples)
			max_samples = n;
	}
	e->half = (max_size + (uint64_t)page - 1) & ~((uint64_t)page - 1);

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
		errmsg(e, "out of memory");
		return -1;
	}
	/* the buffer, touched now so no page fault lands in a timed loop;
	 * --memfd: in a sealed memfd (kept open: the device finds it by its
	 * descriptor) */
	if (o->memfd) {
		e->memfd = memfd_create("sv-bench", MFD_CLOEXEC |
					MFD_ALLOW_SEALING);
		if (e->memfd < 0 || ftruncate(e->memfd, (off_t)(2 * e->half)) ||
		    fcntl(e->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW)) {
			errmsg(e, "cannot make a sealed memfd: %s",
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
		errmsg(e, "cannot map 2 x %zu bytes: %s", e->half,
		       strerror(errno));
		return -1;
	}
	memset(e->buf, 0, 2 * e->half);
	e->rbuf = e->buf;
	e->sbuf = e->buf + e->half;
	e->rva = (uintptr_t)e->rbuf;
	e->sva = (uintptr_t)e->sbuf;

	e->ctx = open_dev(e);
	if (!e->ctx)
		return -1;
	if (ibv_query_device(e->ctx, &da)) {
		errmsg(e, "ibv_query_device failed");
		return -1;
	}
	if (e->sq_depth > (uint32_t)da.max_qp_wr ||
	    e->rq_depth > (uint32_t)da.max_qp_wr) {
		errmsg(e, "-o %u is more than the device's %d WRs per QP",
		       e->sq_depth, da.max_qp_wr);
		return -1;
	}
	memset(&pa, 0, sizeof(pa));
	if (ibv_query_port(e->ctx, 1, &pa) == 0)
		mtu = pa.active_mtu;
	e->pd = ibv_alloc_pd(e->ctx);
	if (!e->pd) {
		errmsg(e, "ibv_alloc_pd: %s", strerror(errno));
		return -1;
	}
	if (o->dm) {
		/* --dm: the same two halves in device memory, zero-based */
		struct ibv_alloc_dm_attr da_dm = { .length = 2 * e->half };

		e->dm = ibv_alloc_dm(e->ctx, &da_dm);
		if (!e->dm) {
			errmsg(e, "ibv_alloc_dm(%zu bytes): %s", 2 * e->half,
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
		errmsg(e, "ibv_reg_mr(%zu bytes): %s", 2 * e->half,
		       strerror(errno));
		return -1;
	}
	if (make_domains(e))
		return -1;
	/* a send CQ holds at most one CQE per sig_every WRs per QP (plus
	 * the last of a run); a receive CQ one per receive WR; per-qp: a
	 * pair of CQs for each QP */
	{
		unsigned int ncq = o->domains == BT_DOM_PER_QP ? e->nqp : 1;
		uint64_t per = ncq == 1 ? e->nqp : 1;
		uint64_t scqe = per * (e->sq_depth / e->sig_every + 2);
		uint64_t rcqe = per * e->rq_depth;

		if (scqe > (uint64_t)da.max_cqe || rcqe > (uint64_t)da.max_cqe) {
			errmsg(e, "-q %u x -o %u needs more CQEs than the "
				  "device's %d", e->nqp, e->sq_depth,
			       da.max_cqe);
			return -1;
		}
		if (make_cqs(e, &e->scq, ncq, (int)scqe) ||
		    make_cqs(e, &e->rcq, ncq, (int)rcqe))
			return -1;
	}
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
	/* who receives keeps its receive queues full */
	nrecv = e->recvs ? e->rq_depth : 0;
	for (uint32_t j = 0; j < e->nqp; j++)
		for (uint32_t i = 0; i < nrecv; i++)
			if (post_recv(e, j))
				return -1;
	return 0;
}

/* Before a run of one size: lengths, flags, counters, a clean receive
 * half (the write ping-pong watches its last byte). */
static void prepare(struct bt_ep *e, uint64_t size, uint64_t iters)
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

/* ---- the timed loops ---- */

/* bw warm-up WRs per QP before the clock starts (the engine awake, the
 * paths warm): up to 16, up to 8 MiB. Both sides know it (the receiver of
 * sends takes them too). */
static uint64_t bw_warmup(const struct bt_ep *e, uint64_t size)
{
	uint64_t w = (8ull << 20) / size;

	if (w > 16)
		w = 16;
	if (w > e->sq_depth)
		w = e->sq_depth;
	return w ? w : 1;
}

/* Keep -o WRs in flight on every QP until each has done e->iters. */
static int bw_pump(struct bt_ep *e, bool progress)
{
	uint64_t total = e->iters * e->nqp, completed = 0;

	for (uint32_t j = 0; j < e->nqp; j++)
		while (e->posted[j] < e->iters &&
		       e->posted[j] - e->done[j] < e->sq_depth)
			if (post_one(e, j))
				return -1;
	while (completed < total) {
		int n = cq_wait(e, &e->scq, 0, e->scq.n, BT_WC_BATCH);

		if (n < 0)
			return -1;
		for (int i = 0; i < n; i++) {
			uint32_t j = (uint32_t)(e->wc[i].wr_id >> 32);

			if (reap_send(e, &e->wc[i], 1, &completed))
				return -1;
			while (e->posted[j] < e->iters &&
			       e->posted[j] - e->done[j] < e->sq_depth)
				if (post_one(e, j))
					return -1;
		}
		if (progress)
			__atomic_store_n(&bt_progress_done, completed,
					 __ATOMIC_RELAXED);
	}
	return 0;
}

/* bw, the initiator: a warm-up, then iters WRs per QP against the clock
 * (from the first post to the last completion). */
static int bw_initiator(struct bt_ep *e, uint64_t size, uint64_t *ns)
{
	uint64_t iters = e->iters, t0, t1;

	e->iters = bw_warmup(e, size);
	if (bw_pump(e, false))
		return -1;
	for (uint32_t j = 0; j < e->nqp; j++)
		e->posted[j] = e->done[j] = e->unsig[j] = 0;
	e->iters = iters;
	t0 = now_ns();
	if (bw_pump(e, true))
		return -1;
	t1 = now_ns();
	*ns = t1 > t0 ? t1 - t0 : 1;
	return 0;
}

/* bw, the receiver of sends: take (warm-up + iters) x QPs messages,
 * reposting each receive WR as it completes. */
static int bw_receiver(struct bt_ep *e, uint64_t size)
{
	uint64_t total = (bw_warmup(e, size) + e->iters) * e->nqp, got = 0;

	while (got < total) {
		int n = cq_wait(e, &e->rcq, 0, e->rcq.n, BT_WC_BATCH);

		if (n < 0)
			return -1;
		for (int i = 0; i < n; i++) {
			if (wc_check(e, &e->wc[i]) ||
			    post_recv(e, (uint32_t)e->wc[i].wr_id))
				return -1;
		}
		got += (uint64_t)n;
	}
	return 0;
}

/* Spin until the last byte of the receive half says val. */
static inline int wait_byte(struct bt_ep *e, const uint8_t *p, uint8_t val)
{
	unsigned int spins = 0;

	while (__atomic_load_n(p, __ATOMIC_ACQUIRE) != val)
		if (++spins == BT_REAP_SPINS) {
			spins = 0;
			if (sq_peek(e))
				return -1;
		}
	return 0;
}

/* One ping (or pong): the last byte of the message says which. */
static inline int lat_post(struct bt_ep *e, uint64_t i, uint64_t size)
{
	if (e->o->test == BT_WRITE && !e->imm)
		e->sbuf[size - 1] = (char)(uint8_t)(i % 255 + 1);
	if (sq_room(e, 0))
		return -1;
	return post_one(e, 0);
}

/* Wait for the peer's ping (or pong) number i. */
static inline int lat_arrival(struct bt_ep *e, uint64_t i, uint64_t size)
{
	if (e->o->test == BT_WRITE && !e->imm)
		return wait_byte(e, (const uint8_t *)e->rbuf + size - 1,
				 (uint8_t)(i % 255 + 1));
	return recv_one(e);
}

/* lat, the client: samples[i] = the round trip of iteration i. */
static int lat_client(struct bt_ep *e, uint64_t size)
{
	uint64_t t = now_ns(), t1;

	for (uint64_t i = 0; i < e->iters; i++) {
		if (lat_post(e, i, size))
			return -1;
		if (e->o->test == BT_WRITE || e->o->test == BT_SEND) {
			if (lat_arrival(e, i, size))
				return -1;
		} else {
			/* read, atomic: the operation's own completion */
			uint64_t c = 0;
			int n = cq_wait(e, &e->scq, 0, 1, 1);

			if (n < 0 || reap_send(e, e->wc, n, &c))
				return -1;
		}
		t1 = now_ns();
		e->samples[i] = t1 - t;
		t = t1;
		__atomic_store_n(&bt_progress_done, i + 1,
				 __ATOMIC_RELAXED);
	}
	return 0;
}

/* lat, the server of a ping-pong: answer each ping. */
static int lat_server(struct bt_ep *e, uint64_t size)
{
	for (uint64_t i = 0; i < e->iters; i++)
		if (lat_arrival(e, i, size) || lat_post(e, i, size))
			return -1;
	return 0;
}

/* ---- results ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The nearest-rank percentile p (0 < p <= 100) of n sorted values. */
static uint64_t pct(const uint64_t *v, uint64_t n, unsigned int p)
{
	uint64_t rank = (n * p + 99) / 100;

	return v[rank ? rank - 1 : 0];
}

static void lat_result(struct bt_ep *e, uint64_t warm, struct bt_result *r)
{
	const uint64_t *v = e->samples + warm;
	uint64_t n = e->iters - warm, sum = 0;
	/* write and send ping-pongs: one way = half the round trip */
	double div = e->o->test == BT_WRITE || e->o->test == BT_SEND ?
		     2000.0 : 1000.0;

	for (uint64_t i = 0; i < n; i++)
		sum += v[i];
	qsort(e->samples + warm, n, sizeof(uint64_t), cmp_u64);
	r->iters = n;
	r->seconds = (double)sum / 1e9;
	r->lat_min_us = (double)v[0] / div;
	r->lat_p50_us = (double)pct(v, n, 50) / div;
	r->lat_p99_us = (double)pct(v, n, 99) / div;
	r->lat_max_us = (double)v[n - 1] / div;
}

/* ---- the two halves ---- */

int bt_client(const struct bt_opts *o, int fd, struct bt_result *res,
	      struct bt_placement *where)
{
	struct bt_ep e;
	int ret = 1;

	if (ep_create(&e, o, fd, false))
		goto out;
	/* where the QPs went (the doorbell page, whatever API put them
	 * there), and out of how many pages */
	{
		struct ibv_exp_device_attr xa;
		int err;

		memset(&xa, 0, sizeof(xa));
		xa.comp_mask = IBV_EXP_DEVICE_ATTR_RESOURCE_DOMAINS;
		err = ibv_exp_query_device(e.ctx, &xa);
		if (err || !(xa.comp_mask &
			     IBV_EXP_DEVICE_ATTR_RESOURCE_DOMAINS)) {
			errmsg(&e, "ibv_exp_query_device: %s",
			       err ? strerror(err) : "no max_resource_domains");
			goto out;
		}
		where->max_resource_domains = xa.max_resource_domains;
	}
	where->nqp = e.nqp;
	for (uint32_t j = 0; j < e.nqp; j++) {
		int err = sv_query_qp_db(e.qp[j], &where->qp_db[j]);

		if (err) {
			errmsg(&e, "sv_query_qp_db: %s", strerror(err));
			goto out;
		}
	}
	for (unsigned int s = 0; s < o->nsizes; s++) {
		uint64_t size = o->sizes[s], n = bt_iters_for(o, size);
		uint64_t warm = bt_warmup_for(o, n), ns = 0;
		struct bt_result *r = &res[s];

		memset(r, 0, sizeof(*r));
		r->size = size;
		prepare(&e, size, n + warm);
		__atomic_store_n(&bt_progress_done, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&bt_progress_index, s, __ATOMIC_RELAXED);
		if (send_msg(&e, BT_RUN, size, n + warm) ||
		    expect_msg(&e, BT_READY))
			goto out;
		if (o->mode == BT_BW) {
			if (bw_initiator(&e, size, &ns))
				goto out;
			r->iters = n;
			r->seconds = (double)ns / 1e9;
			r->bw_MBps = (double)(size * n * e.nqp) /
				     ((double)ns / 1e9) / 1e6;
			r->msg_rate_Mpps = (double)(n * e.nqp) /
					   ((double)ns / 1e9) / 1e6;
		} else {
			if (lat_client(&e, size))
				goto out;
			lat_result(&e, warm, r);
		}
		if (sq_drain(&e) || send_msg(&e, BT_FINISH, 0, 0) ||
		    expect_msg(&e, BT_DONE))
			goto out;
	}
	bt_server_may_exit = 1;
	if (send_msg(&e, BT_QUIT, 0, 0))
		goto out;
	ret = 0;
out:
	if (ep_destroy(&e))
		ret = 1;
	return ret;
}

int bt_server(const struct bt_opts *o, int fd)
{
	struct bt_ep e;
	struct bt_msg m;
	int ret = 1;

	if (ep_create(&e, o, fd, true))
		goto out;
	for (;;) {
		if (recv_msg(&e, &m))
			goto out;
		if (m.op == BT_QUIT)
			break;
		if (m.op != BT_RUN || m.size == 0 || m.size > e.half ||
		    m.iters == 0) {
			errmsg(&e, "protocol error: message %u", m.op);
			goto out;
		}
		prepare(&e, m.size, m.iters);
		if (send_msg(&e, BT_READY, 0, 0))
			goto out;
		if (o->mode == BT_LAT &&
		    (o->test == BT_WRITE || o->test == BT_SEND)) {
			if (lat_server(&e, m.size) || sq_drain(&e))
				goto out;
		} else if (o->mode == BT_BW && o->test == BT_SEND) {
			if (bw_receiver(&e, m.size))
				goto out;
		}
		/* read and atomic targets, write bw targets: passive */
		if (expect_msg(&e, BT_FINISH) || send_msg(&e, BT_DONE, 0, 0))
			goto out;
	}
	ret = 0;
out:
	if (ep_destroy(&e))
		ret = 1;
	return ret;
}
