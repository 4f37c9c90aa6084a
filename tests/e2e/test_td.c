// SPDX-License-Identifier: MIT
/*
 * Thread domains and parent domains (ibv_alloc_td, ibv_alloc_parent_domain):
 * QPs and CQs made on a parent domain (with and without a thread domain,
 * whose objects post and poll without locks) move data like any other;
 * domains still in use refuse to go with EBUSY; bad attributes get EINVAL.
 * (That the locks are gone is measured, not tested: issue 5's budgets.)
 * A thread domain's QPs get a doorbell page of their own (not page 0). The
 * allocator callbacks of a parent domain make the memory of its QPs' and
 * CQs' rings: called with whole pages, page-aligned, the softverbs resource
 * types; free gets the block back at destroy; USE_DEFAULT and NULL.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <infiniband/verbs.h>
#include <softverbs/softverbs.h>

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

/* ---- doorbell pages of thread domains ---- */

static uint32_t qp_db(struct ibv_qp *qp)
{
	uint32_t db = 0xdeadbeef;

	assert_int_equal(sv_query_qp_db(qp, &db), 0);
	return db;
}

/* Two thread domains: two pages, neither the default one; a parent domain
 * without a td and a plain PD: page 0. */
static void test_td_pages(void **state)
{
	struct ibv_td_init_attr tda = { 0 };
	struct ibv_td *t1, *t2;
	struct ibv_pd *pd, *p1, *p2, *p0;
	struct ibv_cq *cq;
	struct ibv_qp *q1, *q1b, *q2, *q0, *qp;

	(void)state;
	pd = ibv_alloc_pd(ctx);
	assert_non_null(pd);
	t1 = ibv_alloc_td(ctx, &tda);
	t2 = ibv_alloc_td(ctx, &tda);
	assert_non_null(t1);
	assert_non_null(t2);
	{
		struct ibv_parent_domain_init_attr a = { .pd = pd, .td = t1 };

		p1 = ibv_alloc_parent_domain(ctx, &a);
		a.td = t2;
		p2 = ibv_alloc_parent_domain(ctx, &a);
		a.td = NULL;
		p0 = ibv_alloc_parent_domain(ctx, &a);
	}
	assert_non_null(p1);
	assert_non_null(p2);
	assert_non_null(p0);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	assert_non_null(cq);
	q1 = qp_on(p1, cq);
	q1b = qp_on(p1, cq);
	q2 = qp_on(p2, cq);
	q0 = qp_on(p0, cq);
	qp = qp_on(pd, cq);
	assert_non_null(q1);
	assert_non_null(q1b);
	assert_non_null(q2);
	assert_non_null(q0);
	assert_non_null(qp);
	assert_int_not_equal(qp_db(q1), 0);
	assert_int_equal(qp_db(q1), qp_db(q1b));
	assert_int_not_equal(qp_db(q2), 0);
	assert_int_not_equal(qp_db(q1), qp_db(q2));
	assert_int_equal(qp_db(q0), 0);
	assert_int_equal(qp_db(qp), 0);
	/* a parent domain with QPs is busy */
	assert_int_equal(ibv_dealloc_pd(p1), EBUSY);
	assert_int_equal(ibv_destroy_qp(q1), 0);
	assert_int_equal(ibv_destroy_qp(q1b), 0);
	assert_int_equal(ibv_destroy_qp(q2), 0);
	assert_int_equal(ibv_destroy_qp(q0), 0);
	assert_int_equal(ibv_destroy_qp(qp), 0);
	assert_int_equal(ibv_destroy_cq(cq), 0);
	assert_int_equal(ibv_dealloc_pd(p1), 0);
	assert_int_equal(ibv_dealloc_pd(p2), 0);
	assert_int_equal(ibv_dealloc_pd(p0), 0);
	assert_int_equal(ibv_dealloc_td(t1), 0);
	assert_int_equal(ibv_dealloc_td(t2), 0);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
}

/* ---- the allocator callbacks ---- */


enum alloc_mode { A_BLOCK, A_DEFAULT, A_NULL, A_MISALIGNED };

struct alloc_rec {
	uint64_t type;
	size_t size, alignment;
	void *ptr;
	bool freed;
};

struct alloc_log {
	enum alloc_mode mode;
	struct ibv_pd *pd;         /* the parent domain: what pd must be */
	int n;
	struct alloc_rec rec[16];
	int frees;
	int bad_frees;             /* of something not handed out */
};

static void *log_alloc(struct ibv_pd *pd, void *pd_context, size_t size,
		       size_t alignment, uint64_t resource_type)
{
	struct alloc_log *l = pd_context;
	struct alloc_rec *r;
	void *p = NULL;

	if (l->pd && pd != l->pd)
		return NULL;
	if (l->n == (int)(sizeof(l->rec) / sizeof(l->rec[0])))
		return NULL;
	r = &l->rec[l->n++];
	memset(r, 0, sizeof(*r));
	r->type = resource_type;
	r->size = size;
	r->alignment = alignment;
	switch (l->mode) {
	case A_DEFAULT:
		return IBV_ALLOCATOR_USE_DEFAULT;
	case A_NULL:
		return NULL;
	case A_BLOCK:
		if (posix_memalign(&p, alignment, size))
			return NULL;
		/* what was there before must not show through */
		memset(p, 0xab, size);
		break;
	case A_MISALIGNED:
		if (posix_memalign(&p, alignment, size + alignment))
			return NULL;
		p = (char *)p + 64;
		break;
	}
	r->ptr = p;
	return p;
}

static void log_free(struct ibv_pd *pd, void *pd_context, void *ptr,
		     uint64_t resource_type)
{
	struct alloc_log *l = pd_context;

	(void)pd;
	l->frees++;
	for (int i = 0; i < l->n; i++) {
		struct alloc_rec *r = &l->rec[i];

		if (r->ptr == ptr && !r->freed && r->type == resource_type) {
			r->freed = true;
			free(l->mode == A_MISALIGNED ? (char *)ptr - 64 : ptr);
			return;
		}
	}
	l->bad_frees++;
}

static struct ibv_pd *pd_with_log(struct ibv_pd *pd, struct ibv_td *td,
				  struct alloc_log *l)
{
	struct ibv_parent_domain_init_attr a = {
		.pd = pd, .td = td,
		.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
			     IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
		.alloc = log_alloc, .free = log_free, .pd_context = l,
	};
	struct ibv_pd *p = ibv_alloc_parent_domain(ctx, &a);

	assert_non_null(p);
	l->pd = p;
	return p;
}

static bool in_block(const struct alloc_rec *r, const void *p)
{
	return (const char *)p >= (const char *)r->ptr &&
	       (const char *)p < (const char *)r->ptr + r->size;
}

/* Rings in the allocator's blocks: sizes, alignment, types; the rings are
 * really there (the fill is gone, data moves); free at destroy. With and
 * without a thread domain. */
static void test_allocator_blocks(void **state)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct ibv_td_init_attr tda = { 0 };
	struct alloc_log la = { .mode = A_BLOCK }, lb = { .mode = A_BLOCK };
	struct ibv_pd *pd, *pa, *pb;
	struct ibv_td *td;
	struct ibv_cq *ca, *cb;
	struct ibv_qp *qa, *qb;
	struct ibv_mr *mr;
	struct vu_conn c = vu_conn_default();
	static uint8_t buf[8192];

	(void)state;
	pd = ibv_alloc_pd(ctx);
	assert_non_null(pd);
	td = ibv_alloc_td(ctx, &tda);
	assert_non_null(td);
	pa = pd_with_log(pd, td, &la);
	pb = pd_with_log(pd, NULL, &lb);
	ca = cq_on(pa);
	assert_non_null(ca);
	assert_int_equal(la.n, 1);
	assert_int_equal(la.rec[0].type, SV_RES_TYPE_CQ);
	assert_int_equal(la.rec[0].alignment, page);
	assert_int_equal(la.rec[0].size % page, 0);
	/* a header (SV_RING_HDR_BYTES) and 64-byte CQEs for at least cqe
	 * of them */
	assert_true(la.rec[0].size >= 512 + (size_t)ca->cqe * 64);
	assert_true(la.rec[0].size <= page + 4 * ((size_t)ca->cqe + 1) * 64 +
				      page);
	/* the ring shows through the block: the fill is gone from its
	 * header (the counters are 0 on a fresh ring) */
	assert_int_equal(((uint8_t *)la.rec[0].ptr)[0], 0);
	cb = cq_on(pb);
	assert_non_null(cb);
	assert_int_equal(lb.n, 1);
	assert_int_equal(lb.rec[0].type, SV_RES_TYPE_CQ);

	qa = qp_on(pa, ca);
	assert_non_null(qa);
	assert_int_equal(la.n, 2);
	assert_int_equal(la.rec[1].type, SV_RES_TYPE_QP);
	assert_int_equal(la.rec[1].alignment, page);
	assert_int_equal(la.rec[1].size % page, 0);
	/* two rings, each a 512-byte header and 16 slots at least */
	assert_true(la.rec[1].size >= 2 * 512 + 2 * 16 * 16);
	assert_int_equal(((uint8_t *)la.rec[1].ptr)[0], 0);
	assert_int_not_equal(qp_db(qa), 0);
	qb = qp_on(pb, cb);
	assert_non_null(qb);
	assert_int_equal(lb.n, 2);
	assert_int_equal(lb.rec[1].type, SV_RES_TYPE_QP);
	assert_int_equal(qp_db(qb), 0);
	assert_false(in_block(&la.rec[0], la.rec[1].ptr));

	mr = ibv_reg_mr(pd, buf, sizeof(buf),
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_ATOMIC);
	assert_non_null(mr);
	assert_int_equal(vu_connect_pair(qa, qb, &c), 0);
	for (int i = 0; i < 65; i++) {
		bool a_to_b = i & 2;
		struct ibv_qp *qs = a_to_b ? qa : qb, *qr = a_to_b ? qb : qa;
		struct ibv_cq *cs = a_to_b ? ca : cb, *cr = a_to_b ? cb : ca;
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
		struct ibv_wc wc;

		if (i == 64) {
			/* and an atomic, which only the device runs: its
			 * completion in the CQ's ring (the others may all
			 * have run in the library, the direct path) */
			ss.length = 8;
			sw.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			sw.wr.atomic.remote_addr = (uintptr_t)(buf + 7168);
			sw.wr.atomic.rkey = mr->rkey;
			sw.wr.atomic.compare_add = 1;
			assert_int_equal(ibv_post_send(qa, &sw, &sbad), 0);
			assert_int_equal(vu_poll(ca, &wc, 1, VU_WAIT_MS), 1);
			assert_int_equal(wc.status, IBV_WC_SUCCESS);
			break;
		}
		memset(buf, i + 1, 64);
		if (!(i & 1))
			assert_int_equal(ibv_post_recv(qr, &rw, &rbad), 0);
		assert_int_equal(ibv_post_send(qs, &sw, &sbad), 0);
		assert_int_equal(vu_poll(cs, &wc, 1, VU_WAIT_MS), 1);
		assert_int_equal(wc.status, IBV_WC_SUCCESS);
		if (!(i & 1)) {
			assert_int_equal(vu_poll(cr, &wc, 1, VU_WAIT_MS), 1);
			assert_int_equal(wc.status, IBV_WC_SUCCESS);
			assert_int_equal(wc.byte_len, 64);
			assert_int_equal(buf[4096 + 63], (uint8_t)(i + 1));
		} else {
			assert_int_equal(buf[6144 + 63], (uint8_t)(i + 1));
		}
	}
	/* the CQ's and the send ring's counters moved in the blocks the
	 * allocator gave: that is where the rings are */
	assert_int_not_equal(*(uint32_t *)la.rec[0].ptr, 0);
	assert_int_not_equal(*(uint32_t *)la.rec[1].ptr, 0);

	/* a CQ resized in a parent domain with an allocator: a new block,
	 * the old one freed */
	assert_int_equal(ibv_resize_cq(cb, 200), 0);
	assert_int_equal(lb.n, 3);
	assert_int_equal(lb.rec[2].type, SV_RES_TYPE_CQ);
	assert_true(lb.rec[2].size >= page + 200 * 64);
	assert_true(lb.rec[0].freed);
	assert_int_equal(lb.frees, 1);

	assert_int_equal(ibv_dealloc_pd(pa), EBUSY); /* its QP and CQ */
	assert_int_equal(la.frees, 0);
	assert_int_equal(ibv_destroy_qp(qa), 0);
	assert_int_equal(la.frees, 1);
	assert_true(la.rec[1].freed);
	assert_int_equal(ibv_destroy_cq(ca), 0);
	assert_int_equal(la.frees, 2);
	assert_true(la.rec[0].freed);
	assert_int_equal(ibv_destroy_qp(qb), 0);
	assert_int_equal(ibv_destroy_cq(cb), 0);
	assert_int_equal(lb.frees, 3);
	assert_true(lb.rec[1].freed && lb.rec[2].freed);
	assert_int_equal(la.bad_frees + lb.bad_frees, 0);
	assert_int_equal(ibv_dereg_mr(mr), 0);
	assert_int_equal(ibv_dealloc_pd(pa), 0);
	assert_int_equal(ibv_dealloc_pd(pb), 0);
	assert_int_equal(ibv_dealloc_td(td), 0);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
}

/* USE_DEFAULT: the library maps the ring itself (and never calls free);
 * NULL: ENOMEM; a block not aligned to the page: EINVAL, and it is freed. */
static void test_allocator_answers(void **state)
{
	struct alloc_log l = { .mode = A_DEFAULT };
	struct ibv_pd *pd, *p;
	struct ibv_cq *cq, *plain;
	struct ibv_qp *qp;

	(void)state;
	pd = ibv_alloc_pd(ctx);
	assert_non_null(pd);
	p = pd_with_log(pd, NULL, &l);
	cq = cq_on(p);
	assert_non_null(cq);
	qp = qp_on(p, cq);
	assert_non_null(qp);
	assert_int_equal(l.n, 2);
	assert_int_equal(l.rec[0].type, SV_RES_TYPE_CQ);
	assert_int_equal(l.rec[1].type, SV_RES_TYPE_QP);
	assert_int_equal(ibv_destroy_qp(qp), 0);
	assert_int_equal(ibv_destroy_cq(cq), 0);
	assert_int_equal(l.frees, 0);

	plain = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	assert_non_null(plain);
	l.mode = A_NULL;
	l.n = 0;
	errno = 0;
	assert_null(cq_on(p));
	assert_int_equal(errno, ENOMEM);
	errno = 0;
	assert_null(qp_on(p, plain));
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(l.n, 2);
	assert_int_equal(l.frees, 0);

	l.mode = A_MISALIGNED;
	l.n = 0;
	errno = 0;
	assert_null(cq_on(p));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(qp_on(p, plain));
	assert_int_equal(errno, EINVAL);
	assert_int_equal(l.n, 2);
	assert_int_equal(l.frees, 2);
	assert_true(l.rec[0].freed && l.rec[1].freed);
	assert_int_equal(l.bad_frees, 0);

	/* nothing failed above holds the parent domain */
	assert_int_equal(ibv_destroy_cq(plain), 0);
	assert_int_equal(ibv_dealloc_pd(p), 0);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_transfer),
		cmocka_unit_test(test_bad_attrs),
		cmocka_unit_test(test_td_pages),
		cmocka_unit_test(test_allocator_blocks),
		cmocka_unit_test(test_allocator_answers),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
