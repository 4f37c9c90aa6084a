// SPDX-License-Identifier: MIT
/*
 * Atomics are atomic across the device (IBV_ATOMIC_HCA, issue 8): NPROC
 * processes, each with a QP of its own connected to a QP of the parent,
 * hammer two counters in the parent's memory at once:
 *   - FETCH_AND_ADD +1, NFAA times each, up to DEPTH in flight: the counter
 *     ends at NPROC * NFAA, and the values the adds returned are exactly
 *     0 .. NPROC * NFAA - 1, each once (no two adds saw the same value);
 *   - increments by COMPARE_AND_SWAP (expect v, swap v + 1; on a miss
 *     expect what came back), NCAS successes each: the second counter ends
 *     at NPROC * NCAS, and every process counts exactly NCAS successes.
 * A lost update, a torn value or an add that ran twice fails it. Each
 * child's QP is in a resource domain of its own: a doorbell page and an
 * engine thread of its own (checked), so the atomics really run on
 * several engines at once, not one after the other on one.
 *
 * Run under tests/e2e/isolated.sh (a device of its own).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <softverbs/softverbs.h>

#include "vu.h"

#define NPROC 4
#define NFAA  2000
#define NCAS  500
#define DEPTH 8

#define CHECK VU_CHECK

/* A QP of ctx in a resource domain of its own (its doorbell page: *db). */
static struct ibv_qp *domain_qp(struct ibv_context *ctx, struct ibv_pd *pd,
				struct ibv_cq *cq, uint32_t *db)
{
	struct ibv_exp_res_domain_init_attr da = {
		.comp_mask = IBV_EXP_RES_DOMAIN_THREAD_MODEL |
			     IBV_EXP_RES_DOMAIN_MSG_MODEL,
		.thread_model = IBV_EXP_THREAD_SINGLE,
		.msg_model = IBV_EXP_MSG_DEFAULT,
	};
	struct ibv_exp_res_domain *dom = ibv_exp_create_res_domain(ctx, &da);
	struct ibv_exp_qp_init_attr qa;
	struct ibv_qp *qp;

	CHECK(dom, "ibv_exp_create_res_domain");
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = cq;
	qa.cap.max_send_wr = 64;
	qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.qp_type = IBV_QPT_RC;
	qa.pd = pd;
	qa.res_domain = dom;
	qa.comp_mask = IBV_EXP_QP_INIT_ATTR_PD | IBV_EXP_QP_INIT_ATTR_RES_DOMAIN;
	qp = ibv_exp_create_qp(ctx, &qa);
	CHECK(qp && !sv_query_qp_db(qp, db), "ibv_exp_create_qp in a domain");
	return qp;
}

/* What the parent tells a child: its QP and the counters. */
struct target {
	struct vu_addr qp;
	uint64_t faa_addr, cas_addr;
	uint32_t rkey;
};

static void post_atomic(struct ibv_qp *qp, uint64_t id, uint64_t *res,
			uint32_t lkey, const struct target *t,
			enum ibv_wr_opcode op, uint64_t compare_add,
			uint64_t swap)
{
	struct ibv_sge sge = { .addr = (uintptr_t)res, .length = 8,
			       .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.atomic = {
			.remote_addr = op == IBV_WR_ATOMIC_FETCH_AND_ADD ?
					       t->faa_addr : t->cas_addr,
			.compare_add = compare_add, .swap = swap,
			.rkey = t->rkey },
	}, *bad;

	CHECK(!ibv_post_send(qp, &wr, &bad), "post an atomic");
}

static struct ibv_wc one_wc(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	CHECK(vu_poll(cq, &wc, 1, VU_WAIT_MS) == 1, "no completion");
	CHECK(wc.status == IBV_WC_SUCCESS, "an atomic completed with %s",
	      ibv_wc_status_str(wc.status));
	return wc;
}

/* A child: its QP towards the parent's, then the two rounds; the values
 * its adds returned go back through out. */
static void child(int in, int out)
{
	struct vu_conn c = vu_conn_default();
	static uint64_t res[NFAA], cas_res[DEPTH];
	uint64_t expect = 0, wins = 0, tries = 0;
	struct target t;
	struct vu_addr me;
	struct ibv_mr *mr, *cmr;
	struct { struct ibv_context *ctx; struct ibv_pd *pd;
		 struct ibv_cq *scq; struct ibv_qp *qp; } ep;
	unsigned int posted = 0, done = 0;
	uint32_t db;

	ep.ctx = vu_open();
	CHECK(ep.ctx, "no sv0");
	ep.pd = ibv_alloc_pd(ep.ctx);
	ep.scq = ibv_create_cq(ep.ctx, 128, NULL, NULL, 0);
	CHECK(ep.pd && ep.scq, "pd, cq");
	ep.qp = domain_qp(ep.ctx, ep.pd, ep.scq, &db);
	mr = ibv_reg_mr(ep.pd, res, sizeof(res), IBV_ACCESS_LOCAL_WRITE);
	cmr = ibv_reg_mr(ep.pd, cas_res, sizeof(cas_res),
			 IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr && cmr, "ibv_reg_mr");
	me = vu_addr_of(ep.qp, (uint32_t)(getpid() & 0xffffff));
	vu_xfer_all(out, &me, sizeof(me), true);
	vu_xfer_all(out, &db, sizeof(db), true);
	vu_xfer_all(in, &t, sizeof(t), false);
	CHECK(!vu_connect(ep.qp, &t.qp, &c), "connect");
	{
		char go;

		/* every process connected: all start together */
		vu_xfer_all(in, &go, 1, false);
	}

	/* fetch-and-add, DEPTH in flight */
	while (done < NFAA) {
		while (posted < NFAA && posted - done < DEPTH) {
			post_atomic(ep.qp, posted, &res[posted], mr->lkey, &t,
				    IBV_WR_ATOMIC_FETCH_AND_ADD, 1, 0);
			posted++;
		}
		one_wc(ep.scq);
		done++;
	}
	/* compare-and-swap increments, one at a time */
	while (wins < NCAS) {
		struct ibv_wc wc;

		post_atomic(ep.qp, 0, &cas_res[0], cmr->lkey, &t,
			    IBV_WR_ATOMIC_CMP_AND_SWP, expect, expect + 1);
		wc = one_wc(ep.scq);
		CHECK(wc.opcode == IBV_WC_COMP_SWAP, "not a CAS completion");
		tries++;
		if (cas_res[0] == expect) {
			wins++;
			expect++;
		} else {
			CHECK(cas_res[0] > expect ||
			      cas_res[0] < (uint64_t)NPROC * NCAS,
			      "the CAS counter went backwards");
			expect = cas_res[0];
		}
	}
	vu_xfer_all(out, res, sizeof(res), true);
	vu_xfer_all(out, &tries, sizeof(tries), true);
	exit(0);       /* the device frees what the process had */
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(void)
{
	struct vu_qp_caps caps = { .send_wr = 4, .recv_wr = 4, .cqe = 16 };
	struct vu_conn c = vu_conn_default();
	static uint64_t seen[NPROC * NFAA];
	uint64_t *counters, tries_all = 0;
	int to_child[NPROC][2], from_child[NPROC][2];
	struct vu_ep ep[NPROC];
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	pid_t pid[NPROC];
	uint32_t db[NPROC];

	for (int i = 0; i < NPROC; i++) {
		CHECK(!pipe(to_child[i]) && !pipe(from_child[i]), "pipe");
		pid[i] = fork();
		CHECK(pid[i] >= 0, "fork");
		if (!pid[i])
			child(to_child[i][0], from_child[i][1]);
	}
	/* the parent's verbs only after the forks */
	ctx = vu_open();
	CHECK(ctx, "no sv0");
	pd = ibv_alloc_pd(ctx);
	counters = aligned_alloc(4096, 4096);
	CHECK(pd && counters, "pd, memory");
	memset(counters, 0, 4096);
	mr = ibv_reg_mr(pd, counters, 4096,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
	CHECK(mr, "ibv_reg_mr");
	for (int i = 0; i < NPROC; i++) {
		struct target t = {
			.faa_addr = (uintptr_t)&counters[0],
			.cas_addr = (uintptr_t)&counters[8],
			.rkey = mr->rkey,
		};
		struct vu_addr peer;

		CHECK(!vu_ep_create(&ep[i], ctx, pd, IBV_QPT_RC, &caps),
		      "endpoint %d", i);
		vu_xfer_all(from_child[i][0], &peer, sizeof(peer), false);
		vu_xfer_all(from_child[i][0], &db[i], sizeof(db[i]), false);
		/* a page (and engine) of its own, no other child's */
		CHECK(db[i] != 0, "child %d's QP on the default page", i);
		for (int j = 0; j < i; j++)
			CHECK(db[j] != db[i], "children %d and %d share page %u",
			      j, i, db[i]);
		t.qp = vu_addr_of(ep[i].qp, 0x1000u + (uint32_t)i);
		CHECK(!vu_connect(ep[i].qp, &peer, &c), "connect %d", i);
		vu_xfer_all(to_child[i][1], &t, sizeof(t), true);
	}
	for (int i = 0; i < NPROC; i++) {
		char go = 1;

		vu_xfer_all(to_child[i][1], &go, 1, true);
	}
	for (int i = 0; i < NPROC; i++) {
		uint64_t tries;
		int st;

		vu_xfer_all(from_child[i][0], seen + (size_t)i * NFAA,
		     NFAA * sizeof(uint64_t), false);
		vu_xfer_all(from_child[i][0], &tries, sizeof(tries), false);
		tries_all += tries;
		CHECK(waitpid(pid[i], &st, 0) == pid[i] && WIFEXITED(st) &&
		      WEXITSTATUS(st) == 0, "child %d failed", i);
	}
	CHECK(__atomic_load_n(&counters[0], __ATOMIC_RELAXED) ==
	      (uint64_t)NPROC * NFAA, "FETCH_AND_ADD counter %llu, not %u",
	      (unsigned long long)counters[0], NPROC * NFAA);
	qsort(seen, NPROC * NFAA, sizeof(seen[0]), cmp_u64);
	for (uint64_t v = 0; v < (uint64_t)NPROC * NFAA; v++)
		CHECK(seen[v] == v, "the adds returned %llu where %llu was due "
		      "(a value seen twice or skipped)",
		      (unsigned long long)seen[v], (unsigned long long)v);
	CHECK(__atomic_load_n(&counters[8], __ATOMIC_RELAXED) ==
	      (uint64_t)NPROC * NCAS, "CAS counter %llu, not %u",
	      (unsigned long long)counters[8], NPROC * NCAS);
	printf("PASS: %d processes: %d fetch-and-adds each, every value "
	       "returned once, counter %d; %d CAS increments each (%llu "
	       "tries), counter %d\n", NPROC, NFAA, NPROC * NFAA, NCAS,
	       (unsigned long long)tries_all, NPROC * NCAS);
	for (int i = 0; i < NPROC; i++)
		vu_ep_destroy(&ep[i]);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(counters);
	return 0;
}
