// SPDX-License-Identifier: MIT
/*
 * The example of seed 001 ("Resource Domain Experimental Verbs": creating a
 * CQ and QP that may be called from one thread only), compiled and run.
 *
 * The seed's statements are kept as written, one per line, in their order;
 * the lines marked "elision" fill in its "…" (declarations, the device, the
 * zeroing of the attribute structs, what a QP needs) and, after its last
 * statement, a small transfer so that the CQ and QP it made really work:
 * the QP is connected to itself (RC loopback), receives its own SEND and
 * writes into its own memory with an RDMA WRITE. Exit status 0 when all of
 * it worked.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <softverbs/softverbs.h>

#include "vu.h"

/* The application context of the seed's ctx->context. */
struct app_context {
	struct ibv_context *context;
	struct ibv_pd *pd;
};

static void die(const char *what)
{
	fprintf(stderr, "seed001: %s: %s\n", what, strerror(errno));
	exit(1);
}

int main(void)
{
	struct ibv_exp_res_domain_init_attr res_domain_attr; struct ibv_exp_res_domain *res_domain; struct ibv_exp_cq_init_attr cq_attr; struct ibv_exp_qp_init_attr qp_attr;
	/* … elision 1: the seed's two typos compile as meant. "!_domain"
	 * tests the domain just made, so _domain names res_domain; in
	 * "num_ entries" the stray "num_ " vanishes, leaving the variable
	 * entries, the CQ's size. */
#define _domain res_domain /* the seed's "!_domain": !res_domain */
#define num_ /* the seed's "num_ entries": entries */
	struct app_context app, *ctx = &app;
	struct ibv_context *context;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int entries = 64;

	memset(&app, 0, sizeof(app));
	ctx->context = vu_open();
	if (!ctx->context)
		return 1;
	context = ctx->context;
	pd = ctx->pd = ibv_alloc_pd(context);
	if (!pd)
		die("ibv_alloc_pd");
	memset(&res_domain_attr, 0, sizeof(res_domain_attr));
	/* … end of elision 1 */
	res_domain_attr.comp_mask = IBV_EXP_RES_DOMAIN_THREAD_MODEL | IBV_EXP_RES_DOMAIN_MSG_MODEL;
	res_domain_attr.thread_model = IBV_EXP_THREAD_SINGLE;
	res_domain_attr.msg_model = IBV_EXP_MSG_HIGH_BW;
	res_domain = ibv_exp_create_res_domain(ctx->context, &res_domain_attr);
	if (!_domain) { fprintf(stderr, "Can't create resource domain\n"); exit(1); }
	/* … elision 2 */
	memset(&cq_attr, 0, sizeof(cq_attr));
	/* … end of elision 2 */
	cq_attr.res_domain = res_domain;
	cq_attr.comp_mask |= IBV_EXP_CQ_INIT_ATTR_RES_DOMAIN;
	cq = ibv_exp_create_cq(context, num_ entries, NULL, NULL, 0, &cq_attr);
	/* … elision 3 */
	if (!cq)
		die("ibv_exp_create_cq");
	memset(&qp_attr, 0, sizeof(qp_attr));
	qp_attr.send_cq = cq;
	qp_attr.recv_cq = cq;
	qp_attr.cap.max_send_wr = 16;
	qp_attr.cap.max_recv_wr = 16;
	qp_attr.cap.max_send_sge = 1;
	qp_attr.cap.max_recv_sge = 1;
	qp_attr.qp_type = IBV_QPT_RC;
	qp_attr.comp_mask = IBV_EXP_QP_INIT_ATTR_PD;
	qp_attr.pd = pd;
	/* … end of elision 3 */
	qp_attr.res_domain = res_domain;
	qp_attr.comp_mask |= IBV_EXP_QP_INIT_ATTR_RES_DOMAIN;
	qp = ibv_exp_create_qp(context, &qp_attr);

	/* after the seed: the QP works, on its domain's doorbell page */
	if (!qp)
		die("ibv_exp_create_qp");
	{
		static uint8_t buf[4096];
		struct vu_conn c = vu_conn_default();
		struct vu_addr self = vu_addr_of(qp, c.sq_psn);
		struct sv_res_domain_info info;
		uint32_t db;
		struct ibv_mr *mr;
		struct ibv_sge rs, ss;
		struct ibv_recv_wr rw, *rbad;
		struct ibv_send_wr sw, *sbad;
		struct ibv_wc wc[2];
		int n;

		if (sv_query_res_domain(res_domain, &info) ||
		    sv_query_qp_db(qp, &db))
			die("sv_query");
		if (db != info.db_index || db == 0) {
			fprintf(stderr, "seed001: QP on page %u, domain on %u\n",
				db, info.db_index);
			return 1;
		}
		mr = ibv_reg_mr(pd, buf, sizeof(buf),
				IBV_ACCESS_LOCAL_WRITE |
					IBV_ACCESS_REMOTE_WRITE);
		if (!mr)
			die("ibv_reg_mr");
		if ((errno = vu_connect(qp, &self, &c)))
			die("connect to itself");
		/* SEND into its own RECV */
		memset(buf, 0x5a, 64);
		rs = (struct ibv_sge){ (uintptr_t)(buf + 1024), 64, mr->lkey };
		rw = (struct ibv_recv_wr){ .wr_id = 2, .sg_list = &rs,
					   .num_sge = 1 };
		ss = (struct ibv_sge){ (uintptr_t)buf, 64, mr->lkey };
		sw = (struct ibv_send_wr){ .wr_id = 1, .sg_list = &ss,
					   .num_sge = 1,
					   .opcode = IBV_WR_SEND,
					   .send_flags = IBV_SEND_SIGNALED };
		if ((errno = ibv_post_recv(qp, &rw, &rbad)))
			die("ibv_post_recv");
		if ((errno = ibv_post_send(qp, &sw, &sbad)))
			die("ibv_post_send");
		n = vu_poll(cq, wc, 2, VU_WAIT_MS);
		if (n != 2 || wc[0].status || wc[1].status ||
		    buf[1024 + 63] != 0x5a) {
			fprintf(stderr, "seed001: SEND: %d completions\n", n);
			return 1;
		}
		/* RDMA WRITE into its own memory */
		memset(buf, 0xa5, 64);
		sw.opcode = IBV_WR_RDMA_WRITE;
		sw.wr.rdma.remote_addr = (uintptr_t)(buf + 2048);
		sw.wr.rdma.rkey = mr->rkey;
		if ((errno = ibv_post_send(qp, &sw, &sbad)))
			die("ibv_post_send");
		n = vu_poll(cq, wc, 1, VU_WAIT_MS);
		if (n != 1 || wc[0].status || buf[2048 + 63] != 0xa5) {
			fprintf(stderr, "seed001: RDMA WRITE: %d completions\n",
				n);
			return 1;
		}
		if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq) ||
		    ibv_dereg_mr(mr) ||
		    ibv_exp_destroy_res_domain(context, res_domain, NULL) ||
		    ibv_dealloc_pd(pd) || ibv_close_device(context)) {
			fprintf(stderr, "seed001: teardown failed\n");
			return 1;
		}
	}
	printf("seed001: CQ and QP in a SINGLE/HIGH_BW domain: ok\n");
	return 0;
}
