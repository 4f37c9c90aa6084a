// SPDX-License-Identifier: MIT
/*
 * Thread domains and parent domains (ibv_alloc_td, ibv_alloc_parent_domain):
 * QPs and CQs made on a parent domain (with and without a thread domain,
 * whose objects post and poll without locks) move data like any other;
 * domains still in use refuse to go with EBUSY; bad attributes get EINVAL.
 * (That the locks are gone is measured, not tested: issue 5's budgets.)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <infiniband/verbs.h>

#include "vu.h"

static struct ibv_context *ctx;

static int setup(void **state)
{
	(void)state;
	ctx = vu_open();
	return ctx ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return ibv_close_device(ctx);
}

static void *my_alloc(struct ibv_pd *pd, void *pd_context, size_t size,
		      size_t alignment, uint64_t resource_type)
{
	(void)pd;
	(void)pd_context;
	(void)size;
	(void)alignment;
	(void)resource_type;
	return IBV_ALLOCATOR_USE_DEFAULT;
}

static void my_free(struct ibv_pd *pd, void *pd_context, void *ptr,
		    uint64_t resource_type)
{
	(void)pd;
	(void)pd_context;
	(void)ptr;
	(void)resource_type;
}

static struct ibv_cq *cq_on(struct ibv_pd *parent)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 64,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD,
		.parent_domain = parent,
	};
	struct ibv_cq_ex *cq = ibv_create_cq_ex(ctx, &ca);

	return cq ? ibv_cq_ex_to_cq(cq) : NULL;
}

static struct ibv_qp *qp_on(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex qa = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16,
			 .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = 64 },
		.qp_type = IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = pd,
	};

	return ibv_create_qp_ex(ctx, &qa);
}

/* A pair of RC QPs on parent domains (with and without a thread domain)
 * moves data both ways: SEND/RECV and RDMA WRITE. */
static void test_transfer(void **state)
{
	struct ibv_td_init_attr tda = { 0 };
	struct ibv_pd *pd, *pa, *pb;
	struct ibv_td *td;
	struct ibv_cq *ca, *cb;
	struct ibv_qp *qa, *qb;
	struct vu_conn c = vu_conn_default();
	struct ibv_mr *mr;
	struct ibv_wc wc;
	static uint8_t buf[8192];

	(void)state;
	pd = ibv_alloc_pd(ctx);
	assert_non_null(pd);
	td = ibv_alloc_td(ctx, &tda);
	assert_non_null(td);
	{
		struct ibv_parent_domain_init_attr a = {
			.pd = pd, .td = td,
			.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
				     IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
			.alloc = my_alloc, .free = my_free, .pd_context = buf,
		};
		pa = ibv_alloc_parent_domain(ctx, &a);
		assert_non_null(pa);
	}
	{
		struct ibv_parent_domain_init_attr a = { .pd = pd };

		pb = ibv_alloc_parent_domain(ctx, &a);
		assert_non_null(pb);
	}
	ca = cq_on(pa);
	cb = cq_on(pb);
	assert_non_null(ca);
	assert_non_null(cb);
	qa = qp_on(pa, ca);
	qb = qp_on(pb, cb);
	assert_non_null(qa);
	assert_non_null(qb);
	assert_ptr_equal(qa->pd, pa);
	/* memory registered on the parent PD serves both */
	mr = ibv_reg_mr(pd, buf, sizeof(buf),
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	assert_non_null(mr);
	assert_int_equal(vu_connect_pair(qa, qb, &c), 0);

	for (int i = 0; i < 100; i++) {
		struct ibv_sge rs = { (uintptr_t)(buf + 4096), 64, mr->lkey };
		struct ibv_recv_wr rw = { .wr_id = 7, .sg_list = &rs,
					  .num_sge = 1 }, *rbad;
		struct ibv_sge ss = { (uintptr_t)buf, 64, mr->lkey };
		struct ibv_send_wr sw = {
			.wr_id = 1, .sg_list = &ss, .num_sge = 1,
			.opcode = i & 1 ? IBV_WR_RDMA_WRITE : IBV_WR_SEND,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { (uintptr_t)(buf + 6144), mr->rkey },
		}, *sbad;

		memset(buf, i, 64);
		if (!(i & 1))
			assert_int_equal(ibv_post_recv(qb, &rw, &rbad), 0);
		assert_int_equal(ibv_post_send(qa, &sw, &sbad), 0);
		assert_int_equal(vu_poll(ca, &wc, 1, VU_WAIT_MS), 1);
		assert_int_equal(wc.status, IBV_WC_SUCCESS);
		if (!(i & 1)) {
			assert_int_equal(vu_poll(cb, &wc, 1, VU_WAIT_MS), 1);
			assert_int_equal(wc.status, IBV_WC_SUCCESS);
			assert_int_equal(wc.byte_len, 64);
			assert_int_equal(buf[4096 + 63], (uint8_t)i);
		} else {
			assert_int_equal(buf[6144 + 63], (uint8_t)i);
		}
	}

	/* in use: the td, the PD and the parent domains refuse to go */
	assert_int_equal(ibv_dealloc_td(td), EBUSY);
	assert_int_equal(ibv_dealloc_pd(pd), EBUSY);
	assert_int_equal(ibv_destroy_qp(qa), 0);
	assert_int_equal(ibv_destroy_qp(qb), 0);
	assert_int_equal(ibv_destroy_cq(ca), 0);
	assert_int_equal(ibv_destroy_cq(cb), 0);
	assert_int_equal(ibv_dereg_mr(mr), 0);
	assert_int_equal(ibv_dealloc_pd(pa), 0);
	assert_int_equal(ibv_dealloc_td(td), 0);  /* no parent domain now */
	assert_int_equal(ibv_dealloc_pd(pd), EBUSY); /* pb still on it */
	assert_int_equal(ibv_dealloc_pd(pb), 0);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
}

static void test_bad_attrs(void **state)
{
	struct ibv_td_init_attr tda = { .comp_mask = 1 };
	struct ibv_parent_domain_init_attr a = { 0 };
	struct ibv_cq_init_attr_ex ca = { .cqe = 4,
					  .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD };
	struct ibv_pd *pd, *pa;

	(void)state;
	errno = 0;
	assert_null(ibv_alloc_td(ctx, &tda));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(ibv_alloc_parent_domain(ctx, &a)); /* no pd */
	assert_int_equal(errno, EINVAL);
	pd = ibv_alloc_pd(ctx);
	assert_non_null(pd);
	a.pd = pd;
	a.comp_mask = 1u << 7;                          /* unknown bit */
	errno = 0;
	assert_null(ibv_alloc_parent_domain(ctx, &a));
	assert_int_equal(errno, EINVAL);
	a.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS; /* no callbacks */
	errno = 0;
	assert_null(ibv_alloc_parent_domain(ctx, &a));
	assert_int_equal(errno, EINVAL);
	/* a CQ on a plain PD (not a parent domain), and on none */
	ca.parent_domain = pd;
	errno = 0;
	assert_null(ibv_create_cq_ex(ctx, &ca));
	assert_int_equal(errno, EINVAL);
	ca.parent_domain = NULL;
	errno = 0;
	assert_null(ibv_create_cq_ex(ctx, &ca));
	assert_int_equal(errno, EINVAL);
	/* a parent domain of a parent domain */
	a.comp_mask = 0;
	pa = ibv_alloc_parent_domain(ctx, &a);
	assert_non_null(pa);
	a.pd = pa;
	errno = 0;
	assert_null(ibv_alloc_parent_domain(ctx, &a));
	assert_int_equal(errno, EINVAL);
	assert_int_equal(ibv_dealloc_pd(pa), 0);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_transfer),
		cmocka_unit_test(test_bad_attrs),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
