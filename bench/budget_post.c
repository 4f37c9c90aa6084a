// SPDX-License-Identifier: MIT
/*
 * budget_post: the workload behind bench/budgets.sh (instruction budgets).
 *
 * One process, one context, two RC QPs on sv0 connected to each other. After
 * a warm-up it runs three phases, each in a function of its own so that
 * callgrind can cut its counts at their borders (--dump-before/--dump-after):
 *
 *   budget_phase_loop   ITERS times: post one signaled 8-byte inline RDMA
 *                       WRITE, then call ibv_poll_cq until it returns that
 *                       CQE. Polls that find nothing ("misses") are counted.
 *   budget_phase_empty  EMPTY calls of ibv_poll_cq on the CQ, now empty.
 *
 * The number of misses depends on timing; nothing else does. The script
 * takes an empty poll's cost from the second phase and subtracts the misses
 * from the first, so what it reports is reproducible.
 *
 * With -d safe|unsafe|single, the CQ and both QPs are made in one resource
 * domain of that thread model (message model DEFAULT) by ibv_exp_create_cq
 * and ibv_exp_create_qp (include/softverbs/softverbs.h); -d plain (the
 * default) makes them with ibv_create_cq and ibv_create_qp.
 *
 * Output, one line on stdout:
 *   iters=N misses=M empty=K domain=D db=P
 * (P: the doorbell page the QPs got, sv_query_qp_db).
 *
 * Run it with `softverbs run -- budget_post`.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>
#include <softverbs/softverbs.h>

#define BUF_BYTES 4096
#define MSG_BYTES 8
#define WARMUP    64
#define WAIT_S    60        /* a completion that never comes: fail, not hang */

struct pair {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *a, *b;
	struct ibv_mr *mr;
	struct ibv_exp_res_domain *dom;   /* NULL: -d plain */
	uint8_t *buf;             /* [0, 2048): source; [2048, 4096): target */
	union ibv_gid gid;
};

static long now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

static int die(const char *what, int err)
{
	fprintf(stderr, "budget_post: %s: %s\n", what, strerror(err));
	exit(1);
}

static struct ibv_context *open_sv0(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int n = 0;

	list = ibv_get_device_list(&n);
	if (!list)
		die("ibv_get_device_list", errno);
	for (int i = 0; i < n && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "sv0"))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx)
		die("no device sv0 (run me through `softverbs run`)", ENODEV);
	return ctx;
}

static struct ibv_qp *make_qp(struct pair *p)
{
	struct ibv_qp_cap cap = {
		.max_send_wr = 64,
		.max_recv_wr = 1,
		.max_send_sge = 1,
		.max_recv_sge = 1,
		.max_inline_data = 64,
	};
	struct ibv_qp *qp;

	if (p->dom) {
		struct ibv_exp_qp_init_attr xa;

		memset(&xa, 0, sizeof(xa));
		xa.send_cq = p->cq;
		xa.recv_cq = p->cq;
		xa.qp_type = IBV_QPT_RC;
		xa.cap = cap;
		xa.comp_mask = IBV_EXP_QP_INIT_ATTR_PD |
			       IBV_EXP_QP_INIT_ATTR_RES_DOMAIN;
		xa.pd = p->pd;
		xa.res_domain = p->dom;
		qp = ibv_exp_create_qp(p->ctx, &xa);
		if (!qp)
			die("ibv_exp_create_qp", errno);
	} else {
		struct ibv_qp_init_attr ia;

		memset(&ia, 0, sizeof(ia));
		ia.send_cq = p->cq;
		ia.recv_cq = p->cq;
		ia.qp_type = IBV_QPT_RC;
		ia.cap = cap;
		qp = ibv_create_qp(p->pd, &ia);
		if (!qp)
			die("ibv_create_qp", errno);
	}
	return qp;
}

/* RESET -> INIT -> RTR -> RTS towards the QP numbered peer. */
static void connect_qp(struct pair *p, struct ibv_qp *qp, uint32_t peer)
{
	struct ibv_port_attr pa;
	struct ibv_qp_attr a;
	int ret;

	memset(&pa, 0, sizeof(pa));
	if (ibv_query_port(p->ctx, 1, &pa))
		pa.active_mtu = IBV_MTU_1024;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (ret)
		die("modify to INIT", ret);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = pa.active_mtu;
	a.dest_qp_num = peer;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = p->gid;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					    IBV_QP_MAX_DEST_RD_ATOMIC |
					    IBV_QP_MIN_RNR_TIMER);
	if (ret)
		die("modify to RTR", ret);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
					    IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					    IBV_QP_RNR_RETRY |
					    IBV_QP_MAX_QP_RD_ATOMIC);
	if (ret)
		die("modify to RTS", ret);
}

/* thread_model < 0: no domain */
static void setup(struct pair *p, int thread_model)
{
	memset(p, 0, sizeof(*p));
	p->ctx = open_sv0();
	if (thread_model >= 0) {
		struct ibv_exp_res_domain_init_attr a = {
			.comp_mask = IBV_EXP_RES_DOMAIN_THREAD_MODEL |
				     IBV_EXP_RES_DOMAIN_MSG_MODEL,
			.thread_model = (enum ibv_exp_thread_model)thread_model,
			.msg_model = IBV_EXP_MSG_DEFAULT,
		};

		p->dom = ibv_exp_create_res_domain(p->ctx, &a);
		if (!p->dom)
			die("ibv_exp_create_res_domain", errno);
	}
	if (ibv_query_gid(p->ctx, 1, 0, &p->gid))
		die("ibv_query_gid", errno);
	p->pd = ibv_alloc_pd(p->ctx);
	if (!p->pd)
		die("ibv_alloc_pd", errno);
	p->buf = aligned_alloc(4096, BUF_BYTES);
	if (!p->buf)
		die("aligned_alloc", ENOMEM);
	memset(p->buf, 0, BUF_BYTES);
	p->mr = ibv_reg_mr(p->pd, p->buf, BUF_BYTES,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!p->mr)
		die("ibv_reg_mr", errno);
	if (p->dom) {
		struct ibv_exp_cq_init_attr ca = {
			.comp_mask = IBV_EXP_CQ_INIT_ATTR_RES_DOMAIN,
			.res_domain = p->dom,
		};

		p->cq = ibv_exp_create_cq(p->ctx, 256, NULL, NULL, 0, &ca);
		if (!p->cq)
			die("ibv_exp_create_cq", errno);
	} else {
		p->cq = ibv_create_cq(p->ctx, 256, NULL, NULL, 0);
		if (!p->cq)
			die("ibv_create_cq", errno);
	}
	p->a = make_qp(p);
	p->b = make_qp(p);
	connect_qp(p, p->a, p->b->qp_num);
	connect_qp(p, p->b, p->a->qp_num);
}

static void teardown(struct pair *p)
{
	ibv_destroy_qp(p->a);
	ibv_destroy_qp(p->b);
	ibv_destroy_cq(p->cq);
	if (p->dom) {
		int err = ibv_exp_destroy_res_domain(p->ctx, p->dom, NULL);

		if (err)
			die("ibv_exp_destroy_res_domain", err);
	}
	ibv_dereg_mr(p->mr);
	ibv_dealloc_pd(p->pd);
	ibv_close_device(p->ctx);
	free(p->buf);
}

/* The measured pair of calls: one post, polls until its CQE. Misses (polls
 * that return nothing) are added to *misses. */
static void write_once(struct pair *p, uint64_t id, uint64_t *misses)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)p->buf,
		.length = MSG_BYTES,
		.lkey = p->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE,
		.wr.rdma = {
			.remote_addr = (uintptr_t)p->buf + BUF_BYTES / 2,
			.rkey = p->mr->rkey,
		},
	};
	struct ibv_send_wr *bad = NULL;
	struct ibv_wc wc;
	long deadline = 0;
	int ret;

	memcpy(p->buf, &id, sizeof(id));
	ret = ibv_post_send(p->a, &wr, &bad);
	if (ret)
		die("ibv_post_send", ret);
	for (;;) {
		ret = ibv_poll_cq(p->cq, 1, &wc);
		if (ret > 0)
			break;
		if (ret < 0)
			die("ibv_poll_cq", EIO);
		/* leave the CPU to the device now and then (under callgrind
		 * both are slow, and two cores are shared); look at the clock
		 * once in a while */
		if ((++*misses & 0x3f) == 0)
			sched_yield();
		if ((*misses & 0xfff) == 0) {
			if (!deadline)
				deadline = now_s() + WAIT_S;
			else if (now_s() > deadline)
				die("no completion", ETIMEDOUT);
		}
	}
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != id ||
	    wc.opcode != IBV_WC_RDMA_WRITE)
		die("bad completion", EIO);
}

/* Phases: never inlined nor cloned (a clone would rename the symbol), so
 * callgrind sees where each begins and ends. */
#if defined(__clang__)
#define PHASE __attribute__((noinline, used))
#else
#define PHASE __attribute__((noipa, used))
#endif

PHASE void budget_phase_warmup(struct pair *p, uint64_t n, uint64_t *misses)
{
	for (uint64_t i = 0; i < n; i++)
		write_once(p, i, misses);
}

PHASE void budget_phase_loop(struct pair *p, uint64_t n, uint64_t *misses)
{
	for (uint64_t i = 0; i < n; i++)
		write_once(p, 1000000 + i, misses);
}

PHASE void budget_phase_empty(struct pair *p, uint64_t n)
{
	struct ibv_wc wc;

	for (uint64_t i = 0; i < n; i++)
		if (ibv_poll_cq(p->cq, 1, &wc) != 0)
			die("a completion nobody asked for", EIO);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: budget_post [-n ITERS] [-e EMPTY_POLLS] "
		   "[-d plain|safe|unsafe|single]\n"
		   "  ITERS 8-byte inline RDMA WRITEs on an RC pair of sv0, each\n"
		   "  polled to its completion; then EMPTY_POLLS empty polls.\n"
		   "  -d: the CQ and QPs in no resource domain (plain), or in\n"
		   "  one of that thread model\n");
}

int main(int argc, char **argv)
{
	uint64_t iters = 1000, empty = 1000, warm_misses = 0, misses = 0;
	struct pair p;
	const char *dname = "plain";
	int c, model = -1;
	uint32_t db = 0;
	uint64_t got;

	while ((c = getopt(argc, argv, "n:e:d:h")) != -1) {
		switch (c) {
		case 'n':
			iters = strtoull(optarg, NULL, 10);
			break;
		case 'e':
			empty = strtoull(optarg, NULL, 10);
			break;
		case 'd':
			dname = optarg;
			if (!strcmp(optarg, "plain"))
				model = -1;
			else if (!strcmp(optarg, "safe"))
				model = IBV_EXP_THREAD_SAFE;
			else if (!strcmp(optarg, "unsafe"))
				model = IBV_EXP_THREAD_UNSAFE;
			else if (!strcmp(optarg, "single"))
				model = IBV_EXP_THREAD_SINGLE;
			else {
				usage(stderr);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!iters || !empty) {
		usage(stderr);
		return 2;
	}
	setup(&p, model);
	c = sv_query_qp_db(p.a, &db);
	if (c)
		die("sv_query_qp_db", c);
	budget_phase_warmup(&p, WARMUP, &warm_misses);
	budget_phase_loop(&p, iters, &misses);
	budget_phase_empty(&p, empty);
	memcpy(&got, p.buf + BUF_BYTES / 2, sizeof(got));
	if (got != 1000000 + iters - 1)
		die("the last write did not land", EIO);
	teardown(&p);
	printf("iters=%llu misses=%llu empty=%llu domain=%s db=%u\n",
	       (unsigned long long)iters, (unsigned long long)misses,
	       (unsigned long long)empty, dname, db);
	return 0;
}
