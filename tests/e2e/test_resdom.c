// SPDX-License-Identifier: MIT
/*
 * Resource domains, the experimental form (seed 001) and the index form
 * (seed 000), include/softverbs/softverbs.h:
 *  - every thread model x message model: a domain, CQs and RC QPs in it,
 *    a connected pair moving data both ways (SEND/RECV, RDMA WRITE); the
 *    QPs use their domain's doorbell page;
 *  - pages: two dedicated domains get two pages, a QP without a domain
 *    page 0; a domain in use refuses to go (EBUSY);
 *  - exhaustion: beyond max_resource_domains domains share pages (and
 *    still move data), FORCE_LOW_LATENCY fails with ENOMEM until a page is
 *    free again;
 *  - the index form: same index same page, different indices different
 *    pages;
 *  - bad arguments: EINVAL;
 *  - two domains moving large messages at once (their engines copy in
 *    parallel where the machine has the cores) while commands come and go;
 *  - every page in use: no more engine threads than CPUs - 1 (at least 1);
 *  - LOW_LATENCY's mailbox: many WQEs in flight behind a head that waits
 *    for a receive (so the mailbox is rewritten while earlier WQEs are
 *    pending and they must come from the ring), single WRs (which fill the
 *    mailbox), WR lists and ibv_exp_post_send (which do not), inline and
 *    not; then free-running bursts of single WRs.
 * The test runs on a device of its own (isolated.sh), so every page is free
 * when it starts.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <softverbs/softverbs.h>

#include "vu.h"

#define BUF_BYTES 8192
#define MSG_BYTES 100

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static uint32_t max_rd;            /* max_resource_domains */

static int setup(void **state)
{
	struct ibv_exp_device_attr da = {
		.comp_mask = IBV_EXP_DEVICE_ATTR_RESOURCE_DOMAINS,
	};

	(void)state;
	ctx = vu_open();
	if (!ctx)
		return -1;
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		return -1;
	if (ibv_exp_query_device(ctx, &da) ||
	    da.comp_mask != IBV_EXP_DEVICE_ATTR_RESOURCE_DOMAINS) {
		fprintf(stderr, "ibv_exp_query_device failed\n");
		return -1;
	}
	max_rd = da.max_resource_domains;
	if (max_rd < 2) {
		fprintf(stderr, "max_resource_domains %u: 2 at least wanted\n",
			max_rd);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	ibv_dealloc_pd(pd);
	return ibv_close_device(ctx);
}

static struct ibv_exp_res_domain *rd_new(enum ibv_exp_thread_model tm,
					 enum ibv_exp_msg_model mm)
{
	struct ibv_exp_res_domain_init_attr a = {
		.comp_mask = IBV_EXP_RES_DOMAIN_THREAD_MODEL |
			     IBV_EXP_RES_DOMAIN_MSG_MODEL,
		.thread_model = tm,
		.msg_model = mm,
	};

	return ibv_exp_create_res_domain(ctx, &a);
}

static struct sv_res_domain_info rd_info(struct ibv_exp_res_domain *rd)
{
	struct sv_res_domain_info i;

	memset(&i, 0xff, sizeof(i));
	assert_int_equal(sv_query_res_domain(rd, &i), 0);
	return i;
}

static uint32_t qp_db(struct ibv_qp *qp)
{
	uint32_t db = 0xdeadbeef;

	assert_int_equal(sv_query_qp_db(qp, &db), 0);
	return db;
}

static struct ibv_cq *cq_in(struct ibv_exp_res_domain *rd)
{
	struct ibv_exp_cq_init_attr a = { 0 };

	if (rd) {
		a.comp_mask = IBV_EXP_CQ_INIT_ATTR_RES_DOMAIN;
		a.res_domain = rd;
	}
	return ibv_exp_create_cq(ctx, 64, NULL, NULL, 0, &a);
}

static void qp_attr_init(struct ibv_exp_qp_init_attr *a, struct ibv_cq *cq)
{
	memset(a, 0, sizeof(*a));
	a->send_cq = cq;
	a->recv_cq = cq;
	a->cap.max_send_wr = 16;
	a->cap.max_recv_wr = 16;
	a->cap.max_send_sge = 1;
	a->cap.max_recv_sge = 1;
	a->cap.max_inline_data = 64;
	a->qp_type = IBV_QPT_RC;
	a->comp_mask = IBV_EXP_QP_INIT_ATTR_PD;
	a->pd = pd;
}

static struct ibv_qp *qp_in(struct ibv_exp_res_domain *rd, struct ibv_cq *cq)
{
	struct ibv_exp_qp_init_attr a;

	qp_attr_init(&a, cq);
	if (rd) {
		a.comp_mask |= IBV_EXP_QP_INIT_ATTR_RES_DOMAIN;
		a.res_domain = rd;
	}
	return ibv_exp_create_qp(ctx, &a);
}

static struct ibv_qp *qp_at_index(uint32_t idx, struct ibv_cq *cq)
{
	struct ibv_exp_qp_init_attr a;

	qp_attr_init(&a, cq);
	a.comp_mask |= IBV_EXP_QP_INIT_ATTR_RES_DOMAIN_INDEX;
	a.resource_domain = idx;
	return ibv_exp_create_qp(ctx, &a);
}

/* One message from (qs, cs) to (qr, cr): a SEND into a posted RECV, or an
 * RDMA WRITE; the bytes and the completions are checked. */
static void one_way(struct ibv_qp *qs, struct ibv_cq *cs, uint8_t *sbuf,
		    struct ibv_qp *qr, struct ibv_cq *cr, uint8_t *rbuf,
		    struct ibv_mr *mr, bool write, uint8_t fill)
{
	struct ibv_sge rs = { (uintptr_t)rbuf, MSG_BYTES, mr->lkey };
	struct ibv_recv_wr rw = { .wr_id = 0x5151, .sg_list = &rs,
				  .num_sge = 1 }, *rbad;
	struct ibv_sge ss = { (uintptr_t)sbuf, MSG_BYTES, mr->lkey };
	struct ibv_send_wr sw = {
		.wr_id = 0x5e5e, .sg_list = &ss, .num_sge = 1,
		.opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { (uintptr_t)rbuf, mr->rkey },
	}, *sbad;
	struct ibv_wc wc;

	memset(sbuf, fill, MSG_BYTES);
	memset(rbuf, 0, MSG_BYTES);
	if (!write)
		assert_int_equal(ibv_post_recv(qr, &rw, &rbad), 0);
	assert_int_equal(ibv_post_send(qs, &sw, &sbad), 0);
	assert_int_equal(vu_poll(cs, &wc, 1, VU_WAIT_MS), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.wr_id, 0x5e5e);
	assert_int_equal(wc.opcode, write ? IBV_WC_RDMA_WRITE : IBV_WC_SEND);
	if (!write) {
		assert_int_equal(vu_poll(cr, &wc, 1, VU_WAIT_MS), 1);
		assert_int_equal(wc.status, IBV_WC_SUCCESS);
		assert_int_equal(wc.wr_id, 0x5151);
		assert_int_equal(wc.opcode, IBV_WC_RECV);
		assert_int_equal(wc.byte_len, MSG_BYTES);
	}
	for (int i = 0; i < MSG_BYTES; i++)
		if (rbuf[i] != fill)
			fail_msg("byte %d: %#x, not %#x", i, rbuf[i], fill);
	/* nothing more than that came */
	assert_int_equal(ibv_poll_cq(cs, 1, &wc), 0);
	assert_int_equal(ibv_poll_cq(cr, 1, &wc), 0);
}

/* Connect a and b (each with its CQ) and move data both ways, several
 * rounds: SEND/RECV and RDMA WRITE. */
static void pair_transfer(struct ibv_qp *a, struct ibv_cq *ca, struct ibv_qp *b,
			  struct ibv_cq *cb)
{
	static uint8_t buf[BUF_BYTES];
	struct vu_conn c = vu_conn_default();
	struct ibv_mr *mr;

	mr = ibv_reg_mr(pd, buf, sizeof(buf),
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	assert_non_null(mr);
	assert_int_equal(vu_connect_pair(a, b, &c), 0);
	for (int r = 0; r < 4; r++) {
		uint8_t f = (uint8_t)(0x10 + r * 4);

		one_way(a, ca, buf, b, cb, buf + 1024, mr, false, f);
		one_way(b, cb, buf + 2048, a, ca, buf + 3072, mr, false, f + 1);
		one_way(a, ca, buf, b, cb, buf + 4096, mr, true, f + 2);
		one_way(b, cb, buf + 2048, a, ca, buf + 5120, mr, true, f + 3);
	}
	assert_int_equal(ibv_dereg_mr(mr), 0);
}

/* A CQ and an RC QP in ra, another pair in rb (may be ra): each QP on its
 * domain's page, data both ways, then gone. */
static void domains_pair(struct ibv_exp_res_domain *ra,
			 struct ibv_exp_res_domain *rb)
{
	struct ibv_cq *ca = cq_in(ra), *cb = cq_in(rb);
	struct ibv_qp *a, *b;

	assert_non_null(ca);
	assert_non_null(cb);
	a = qp_in(ra, ca);
	b = qp_in(rb, cb);
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(qp_db(a), rd_info(ra).db_index);
	assert_int_equal(qp_db(b), rd_info(rb).db_index);
	pair_transfer(a, ca, b, cb);
	assert_int_equal(ibv_destroy_qp(a), 0);
	assert_int_equal(ibv_destroy_qp(b), 0);
	assert_int_equal(ibv_destroy_cq(ca), 0);
	assert_int_equal(ibv_destroy_cq(cb), 0);
}

/* ---- every thread model x message model ---- */

static const enum ibv_exp_thread_model tms[] = {
	IBV_EXP_THREAD_SAFE, IBV_EXP_THREAD_UNSAFE, IBV_EXP_THREAD_SINGLE,
};
static const enum ibv_exp_msg_model mms[] = {
	IBV_EXP_MSG_DEFAULT, IBV_EXP_MSG_LOW_LATENCY, IBV_EXP_MSG_HIGH_BW,
	IBV_EXP_MSG_FORCE_LOW_LATENCY,
};

static void test_models(void **state)
{
	(void)state;
	for (size_t t = 0; t < VU_ARRAY_SIZE(tms); t++) {
		for (size_t m = 0; m < VU_ARRAY_SIZE(mms); m++) {
			struct ibv_exp_res_domain *rd = rd_new(tms[t], mms[m]);
			struct sv_res_domain_info i;

			if (!rd)
				fail_msg("domain %zu/%zu: %s", t, m,
					 strerror(errno));
			assert_ptr_equal(rd->context, ctx);
			i = rd_info(rd);
			assert_int_equal(i.thread_model, tms[t]);
			assert_int_equal(i.msg_model, mms[m]);
			/* every page is free: each domain gets one */
			assert_int_equal(i.dedicated, 1);
			assert_true(i.db_index >= 1 && i.db_index <= max_rd);
			domains_pair(rd, rd);
			assert_int_equal(ibv_exp_destroy_res_domain(ctx, rd,
								    NULL), 0);
		}
	}
}

/* Two QPs in two different domains talk to each other; a QP without a
 * domain, on page 0, talks to one in a domain. */
/* Every domain page in use, each with a QP moving data: still no more
 * engine threads than the machine has CPUs less one (at least one), so a
 * domain never competes with its own application for a core. */
static void test_threads(void **state)
{
	enum { N = 8 };
	struct ibv_exp_res_domain *rd[N];
	struct ibv_cq *cq[N];
	struct ibv_qp *qp[N];
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	long most = ncpu > 2 ? ncpu - 1 : 1;
	pid_t pid = vu_daemon_pid();
	int n;

	(void)state;
	assert_true(pid > 0);
	for (int i = 0; i < N; i++) {
		rd[i] = rd_new(IBV_EXP_THREAD_SAFE, i & 1 ? IBV_EXP_MSG_HIGH_BW :
			       IBV_EXP_MSG_LOW_LATENCY);
		assert_non_null(rd[i]);
		assert_int_equal(rd_info(rd[i]).dedicated, 1);
		cq[i] = cq_in(rd[i]);
		assert_non_null(cq[i]);
		qp[i] = qp_in(rd[i], cq[i]);
		assert_non_null(qp[i]);
	}
	for (int i = 0; i + 1 < N; i += 2)
		pair_transfer(qp[i], cq[i], qp[i + 1], cq[i + 1]);
	n = vu_threads_named(pid, "sv-engine", NULL);
	printf("%d engine threads for %d dedicated domains on %ld CPUs\n", n,
	       N, ncpu);
	assert_true(n >= 1);
	assert_true(n <= most);
	for (int i = 0; i < N; i++) {
		assert_int_equal(ibv_destroy_qp(qp[i]), 0);
		assert_int_equal(ibv_destroy_cq(cq[i]), 0);
		assert_int_equal(ibv_exp_destroy_res_domain(ctx, rd[i], NULL), 0);
	}
}

static void test_pages(void **state)
{
	struct ibv_exp_res_domain *r1, *r2;
	struct sv_res_domain_info i1, i2;
	struct ibv_cq *c1, *c2, *c0;
	struct ibv_qp *q1, *q2, *q0, *q3;

	(void)state;
	r1 = rd_new(IBV_EXP_THREAD_SINGLE, IBV_EXP_MSG_FORCE_LOW_LATENCY);
	r2 = rd_new(IBV_EXP_THREAD_SAFE, IBV_EXP_MSG_HIGH_BW);
	assert_non_null(r1);
	assert_non_null(r2);
	i1 = rd_info(r1);
	i2 = rd_info(r2);
	assert_int_equal(i1.dedicated, 1);
	assert_int_equal(i2.dedicated, 1);
	assert_int_not_equal(i1.db_index, 0);
	assert_int_not_equal(i2.db_index, 0);
	assert_int_not_equal(i1.db_index, i2.db_index);
	c1 = cq_in(r1);
	c2 = cq_in(r2);
	c0 = cq_in(NULL);
	assert_non_null(c1);
	assert_non_null(c2);
	assert_non_null(c0);
	q1 = qp_in(r1, c1);
	q2 = qp_in(r2, c2);
	q0 = qp_in(NULL, c0);
	assert_non_null(q1);
	assert_non_null(q2);
	assert_non_null(q0);
	assert_int_equal(qp_db(q1), i1.db_index);
	assert_int_equal(qp_db(q2), i2.db_index);
	assert_int_equal(qp_db(q0), 0);
	/* a plain ibv_create_qp: page 0 too */
	{
		struct ibv_qp_init_attr a = {
			.send_cq = c0, .recv_cq = c0,
			.cap = { .max_send_wr = 4, .max_recv_wr = 4,
				 .max_send_sge = 1, .max_recv_sge = 1 },
			.qp_type = IBV_QPT_RC,
		};

		q3 = ibv_create_qp(pd, &a);
		assert_non_null(q3);
		assert_int_equal(qp_db(q3), 0);
		assert_int_equal(ibv_destroy_qp(q3), 0);
	}
	pair_transfer(q1, c1, q2, c2);
	assert_int_equal(ibv_destroy_qp(q2), 0);
	q2 = qp_in(r2, c2);
	assert_non_null(q2);
	pair_transfer(q0, c0, q2, c2);
	assert_int_equal(ibv_destroy_qp(q0), 0);
	assert_int_equal(ibv_destroy_qp(q1), 0);
	assert_int_equal(ibv_destroy_qp(q2), 0);
	assert_int_equal(ibv_destroy_cq(c0), 0);
	assert_int_equal(ibv_destroy_cq(c1), 0);
	assert_int_equal(ibv_destroy_cq(c2), 0);
	assert_int_equal(ibv_exp_destroy_res_domain(ctx, r1, NULL), 0);
	assert_int_equal(ibv_exp_destroy_res_domain(ctx, r2, NULL), 0);
}

/* A domain with a CQ, or with a QP, refuses to go; it goes after them. */
static void test_busy(void **state)
{
	struct ibv_exp_destroy_res_domain_attr da = { 0 };
	struct ibv_exp_res_domain *rd;
	struct ibv_cq *cq, *plain;
	struct ibv_qp *qp;

	(void)state;
	rd = rd_new(IBV_EXP_THREAD_UNSAFE, IBV_EXP_MSG_DEFAULT);
	assert_non_null(rd);
	cq = cq_in(rd);
	assert_non_null(cq);
	assert_int_equal(ibv_exp_destroy_res_domain(ctx, rd, NULL), EBUSY);
	assert_int_equal(ibv_destroy_cq(cq), 0);

	plain = cq_in(NULL);
	assert_non_null(plain);
	qp = qp_in(rd, plain);
	assert_non_null(qp);
	assert_int_equal(ibv_exp_destroy_res_domain(ctx, rd, &da), EBUSY);
	assert_int_equal(ibv_destroy_qp(qp), 0);

	/* both at once: busy until the last one goes */
	cq = cq_in(rd);
	assert_non_null(cq);
	qp = qp_in(rd, cq);
	assert_non_null(qp);
	assert_int_equal(ibv_exp_destroy_res_domain(ctx, rd, NULL), EBUSY);
	assert_int_equal(ibv_destroy_qp(qp), 0);
	assert_int_equal(ibv_exp_destroy_res_domain(ctx, rd, NULL), EBUSY);
	assert_int_equal(ibv_destroy_cq(cq), 0);
	assert_int_equal(ibv_exp_destroy_res_domain(ctx, rd, &da), 0);
	assert_int_equal(ibv_destroy_cq(plain), 0);
}

/* More domains than pages: the first max_resource_domains get one each,
 * the rest share (and work); FORCE_LOW_LATENCY gets ENOMEM until a page is
 * free again. */
static void test_exhaustion(void **state)
{
	uint32_t n = max_rd + 3;
	struct ibv_exp_res_domain **rds = calloc(n, sizeof(*rds));
	uint8_t *seen = calloc(max_rd + 1, 1);
	struct ibv_exp_res_domain *force;
	struct sv_res_domain_info i;

	(void)state;
	assert_non_null(rds);
	assert_non_null(seen);
	for (uint32_t k = 0; k < n; k++) {
		rds[k] = rd_new(IBV_EXP_THREAD_SAFE, k & 1 ?
				IBV_EXP_MSG_HIGH_BW : IBV_EXP_MSG_DEFAULT);
		if (!rds[k])
			fail_msg("domain %u: %s", k, strerror(errno));
		i = rd_info(rds[k]);
		assert_true(i.db_index >= 1 && i.db_index <= max_rd);
		if (k < max_rd) {
			assert_int_equal(i.dedicated, 1);
			assert_int_equal(seen[i.db_index], 0);
			seen[i.db_index] = 1;
		} else {
			assert_int_equal(i.dedicated, 0);
		}
	}
	/* two shared domains still move data */
	domains_pair(rds[max_rd], rds[max_rd + 1]);

	/* no page to dedicate */
	errno = 0;
	assert_null(rd_new(IBV_EXP_THREAD_SINGLE,
			   IBV_EXP_MSG_FORCE_LOW_LATENCY));
	assert_int_equal(errno, ENOMEM);
	/* a domain that holds a page alone goes (not one whose page a shared
	 * domain uses too): the page is free for one */
	{
		uint32_t victim = n;

		for (uint32_t k = max_rd; k < n; k++)
			seen[rd_info(rds[k]).db_index] = 2;
		for (uint32_t k = 0; k < max_rd && victim == n; k++)
			if (seen[rd_info(rds[k]).db_index] == 1)
				victim = k;
		if (victim == n) {
			/* every page is shared: the shared domains go first */
			for (uint32_t k = max_rd; k < n; k++) {
				assert_int_equal(ibv_exp_destroy_res_domain(
							 ctx, rds[k], NULL), 0);
				rds[k] = NULL;
			}
			victim = 0;
		}
		assert_int_equal(ibv_exp_destroy_res_domain(ctx, rds[victim],
							    NULL), 0);
		rds[victim] = NULL;
	}
	force = rd_new(IBV_EXP_THREAD_SINGLE, IBV_EXP_MSG_FORCE_LOW_LATENCY);
	if (!force)
		fail_msg("FORCE_LOW_LATENCY after a page was freed: %s",
			 strerror(errno));
	i = rd_info(force);
	assert_int_equal(i.dedicated, 1);
	assert_true(i.db_index >= 1 && i.db_index <= max_rd);
	/* and it works */
	domains_pair(force, force);
	errno = 0;
	assert_null(rd_new(IBV_EXP_THREAD_SAFE, IBV_EXP_MSG_FORCE_LOW_LATENCY));
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(ibv_exp_destroy_res_domain(ctx, force, NULL), 0);
	for (uint32_t k = 0; k < n; k++)
		if (rds[k])
			assert_int_equal(ibv_exp_destroy_res_domain(ctx, rds[k],
								    NULL), 0);
	free(seen);
	free(rds);
}

/* The index form: QPs of one index share a page, of two indices do not;
 * they move data; the page of an index is free again once its QPs go. */
static void test_index(void **state)
{
	struct ibv_cq *ca, *cb, *cc;
	struct ibv_qp *a, *b, *c;
	uint32_t last = max_rd - 1;

	(void)state;
	ca = cq_in(NULL);
	cb = cq_in(NULL);
	cc = cq_in(NULL);
	assert_non_null(ca);
	assert_non_null(cb);
	assert_non_null(cc);
	a = qp_at_index(0, ca);
	b = qp_at_index(0, cb);
	c = qp_at_index(last, cc);
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(c);
	assert_int_not_equal(qp_db(a), 0);
	assert_int_equal(qp_db(a), qp_db(b));
	assert_int_not_equal(qp_db(c), 0);
	assert_int_not_equal(qp_db(a), qp_db(c));
	pair_transfer(a, ca, b, cb);        /* within one domain */
	assert_int_equal(ibv_destroy_qp(b), 0);
	b = qp_at_index(0, cb);             /* index 0 still lives (a) */
	assert_non_null(b);
	assert_int_equal(qp_db(a), qp_db(b));
	assert_int_equal(ibv_destroy_qp(a), 0);
	pair_transfer(b, cb, c, cc);        /* across two domains */
	/* every index gets a page of its own while pages are free */
	{
		struct ibv_qp **qs = calloc(max_rd, sizeof(*qs));
		uint8_t *seen = calloc(max_rd + 1, 1);

		assert_non_null(qs);
		assert_non_null(seen);
		for (uint32_t k = 0; k < max_rd; k++) {
			uint32_t db;

			qs[k] = qp_at_index(k, ca);
			assert_non_null(qs[k]);
			db = qp_db(qs[k]);
			assert_true(db >= 1 && db <= max_rd);
			if (k == 0)
				assert_int_equal(db, qp_db(b));
			if (k == last)
				assert_int_equal(db, qp_db(c));
			assert_int_equal(seen[db], 0);
			seen[db] = 1;
		}
		for (uint32_t k = 0; k < max_rd; k++)
			assert_int_equal(ibv_destroy_qp(qs[k]), 0);
		free(seen);
		free(qs);
	}
	assert_int_equal(ibv_destroy_qp(b), 0);
	assert_int_equal(ibv_destroy_qp(c), 0);
	/* every hidden domain is gone: a FORCE_LOW_LATENCY domain per page */
	{
		struct ibv_exp_res_domain **rds = calloc(max_rd, sizeof(*rds));

		assert_non_null(rds);
		for (uint32_t k = 0; k < max_rd; k++) {
			rds[k] = rd_new(IBV_EXP_THREAD_SAFE,
					IBV_EXP_MSG_FORCE_LOW_LATENCY);
			if (!rds[k])
				fail_msg("domain %u: %s", k, strerror(errno));
		}
		for (uint32_t k = 0; k < max_rd; k++)
			assert_int_equal(ibv_exp_destroy_res_domain(ctx, rds[k],
								    NULL), 0);
		free(rds);
	}
	assert_int_equal(ibv_destroy_cq(ca), 0);
	assert_int_equal(ibv_destroy_cq(cb), 0);
	assert_int_equal(ibv_destroy_cq(cc), 0);
}

/* ---- bad arguments ---- */

#define EXPECT_NULL_ERRNO(call, e)                                           \
	do {                                                                 \
		errno = 0;                                                   \
		assert_null(call);                                           \
		assert_int_equal(errno, (e));                                \
	} while (0)

static void test_bad_args(void **state)
{
	struct ibv_exp_res_domain_init_attr ra = { 0 };
	struct ibv_exp_destroy_res_domain_attr da = { .comp_mask = 1 };
	struct ibv_exp_cq_init_attr ca = { 0 };
	struct ibv_exp_qp_init_attr qa;
	struct ibv_exp_device_attr dev = { 0 };
	struct ibv_exp_res_domain *rd, *other_rd;
	struct ibv_context *other;
	struct ibv_cq *cq;

	(void)state;
	/* create_res_domain */
	EXPECT_NULL_ERRNO(ibv_exp_create_res_domain(ctx, NULL), EINVAL);
	ra.comp_mask = IBV_EXP_RES_DOMAIN_RESERVED;
	EXPECT_NULL_ERRNO(ibv_exp_create_res_domain(ctx, &ra), EINVAL);
	ra.comp_mask = 1u << 31;
	EXPECT_NULL_ERRNO(ibv_exp_create_res_domain(ctx, &ra), EINVAL);
	ra.comp_mask = IBV_EXP_RES_DOMAIN_THREAD_MODEL;
	ra.thread_model = (enum ibv_exp_thread_model)9;
	EXPECT_NULL_ERRNO(ibv_exp_create_res_domain(ctx, &ra), EINVAL);
	ra.thread_model = (enum ibv_exp_thread_model)-1;
	EXPECT_NULL_ERRNO(ibv_exp_create_res_domain(ctx, &ra), EINVAL);
	ra.comp_mask = IBV_EXP_RES_DOMAIN_MSG_MODEL;
	ra.msg_model = (enum ibv_exp_msg_model)9;
	EXPECT_NULL_ERRNO(ibv_exp_create_res_domain(ctx, &ra), EINVAL);
	/* fields without their mask bit are not read */
	ra.comp_mask = 0;
	rd = ibv_exp_create_res_domain(ctx, &ra);
	assert_non_null(rd);
	assert_int_equal(rd_info(rd).thread_model, IBV_EXP_THREAD_SAFE);
	assert_int_equal(rd_info(rd).msg_model, IBV_EXP_MSG_DEFAULT);

	/* destroy */
	assert_int_equal(ibv_exp_destroy_res_domain(ctx, rd, &da), EINVAL);
	assert_int_equal(ibv_exp_destroy_res_domain(ctx, NULL, NULL), EINVAL);

	/* create_cq */
	ca.comp_mask = IBV_EXP_CQ_INIT_ATTR_RESERVED;
	EXPECT_NULL_ERRNO(ibv_exp_create_cq(ctx, 4, NULL, NULL, 0, &ca),
			  EINVAL);
	ca.comp_mask = IBV_EXP_CQ_INIT_ATTR_RES_DOMAIN; /* and no domain */
	EXPECT_NULL_ERRNO(ibv_exp_create_cq(ctx, 4, NULL, NULL, 0, &ca),
			  EINVAL);
	EXPECT_NULL_ERRNO(ibv_exp_create_cq(ctx, 0, NULL, NULL, 0, NULL),
			  EINVAL);
	ca.comp_mask = IBV_EXP_CQ_INIT_ATTR_FLAGS;
	ca.flags = 1u << 20;                        /* no such flag */
	errno = 0;
	assert_null(ibv_exp_create_cq(ctx, 4, NULL, NULL, 0, &ca));
	assert_int_not_equal(errno, 0);
	ca.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
	cq = ibv_exp_create_cq(ctx, 4, NULL, NULL, 0, &ca);
	assert_non_null(cq);
	assert_int_equal(ibv_destroy_cq(cq), 0);
	cq = ibv_exp_create_cq(ctx, 4, NULL, NULL, 0, NULL);
	assert_non_null(cq);

	/* create_qp */
	EXPECT_NULL_ERRNO(ibv_exp_create_qp(ctx, NULL), EINVAL);
	qp_attr_init(&qa, cq);
	qa.comp_mask = 0;                           /* no PD */
	EXPECT_NULL_ERRNO(ibv_exp_create_qp(ctx, &qa), EINVAL);
	qp_attr_init(&qa, cq);
	qa.pd = NULL;
	EXPECT_NULL_ERRNO(ibv_exp_create_qp(ctx, &qa), EINVAL);
	qp_attr_init(&qa, cq);
	qa.comp_mask |= IBV_EXP_QP_INIT_ATTR_XRCD;
	EXPECT_NULL_ERRNO(ibv_exp_create_qp(ctx, &qa), EINVAL);
	qp_attr_init(&qa, cq);
	qa.comp_mask |= IBV_EXP_QP_INIT_ATTR_RESERVED;
	EXPECT_NULL_ERRNO(ibv_exp_create_qp(ctx, &qa), EINVAL);
	qp_attr_init(&qa, cq);
	qa.comp_mask |= IBV_EXP_QP_INIT_ATTR_RES_DOMAIN |
			IBV_EXP_QP_INIT_ATTR_RES_DOMAIN_INDEX;
	qa.res_domain = rd;
	qa.resource_domain = 0;
	EXPECT_NULL_ERRNO(ibv_exp_create_qp(ctx, &qa), EINVAL);
	qp_attr_init(&qa, cq);
	qa.comp_mask |= IBV_EXP_QP_INIT_ATTR_RES_DOMAIN;  /* and none */
	EXPECT_NULL_ERRNO(ibv_exp_create_qp(ctx, &qa), EINVAL);
	qp_attr_init(&qa, cq);
	qa.comp_mask |= IBV_EXP_QP_INIT_ATTR_RES_DOMAIN_INDEX;
	qa.resource_domain = max_rd;
	EXPECT_NULL_ERRNO(ibv_exp_create_qp(ctx, &qa), EINVAL);
	qa.resource_domain = 0xffffffffu;
	EXPECT_NULL_ERRNO(ibv_exp_create_qp(ctx, &qa), EINVAL);
	/* a bad QP in a good index: no domain left behind (below) */
	qa.resource_domain = 0;
	qa.qp_type = (enum ibv_qp_type)77;
	EXPECT_NULL_ERRNO(ibv_exp_create_qp(ctx, &qa), EINVAL);
	/* a create flag: as create_qp_ex (none is offered) */
	qp_attr_init(&qa, cq);
	qa.comp_mask |= IBV_EXP_QP_INIT_ATTR_CREATE_FLAGS;
	qa.exp_create_flags = IBV_QP_CREATE_SCATTER_FCS;
	EXPECT_NULL_ERRNO(ibv_exp_create_qp(ctx, &qa), EOPNOTSUPP);
	/* a failed create leaves the domain free to go */
	qp_attr_init(&qa, cq);
	qa.comp_mask |= IBV_EXP_QP_INIT_ATTR_RES_DOMAIN;
	qa.res_domain = rd;
	qa.cap.max_send_wr = 1u << 30;
	errno = 0;
	assert_null(ibv_exp_create_qp(ctx, &qa));
	assert_int_not_equal(errno, 0);

	/* objects of another context */
	other = vu_open();
	assert_non_null(other);
	other_rd = ibv_exp_create_res_domain(other, &ra);
	assert_non_null(other_rd);
	ca.comp_mask = IBV_EXP_CQ_INIT_ATTR_RES_DOMAIN;
	ca.res_domain = other_rd;
	EXPECT_NULL_ERRNO(ibv_exp_create_cq(ctx, 4, NULL, NULL, 0, &ca),
			  EINVAL);
	qp_attr_init(&qa, cq);
	qa.comp_mask |= IBV_EXP_QP_INIT_ATTR_RES_DOMAIN;
	qa.res_domain = other_rd;
	EXPECT_NULL_ERRNO(ibv_exp_create_qp(ctx, &qa), EINVAL);
	assert_int_equal(ibv_exp_destroy_res_domain(ctx, other_rd, NULL),
			 EINVAL);
	assert_int_equal(ibv_exp_destroy_res_domain(other, other_rd, NULL), 0);
	assert_int_equal(ibv_close_device(other), 0);

	/* the query: what is asked and known */
	dev.comp_mask = 0;
	dev.max_resource_domains = 12345;
	assert_int_equal(ibv_exp_query_device(ctx, &dev), 0);
	assert_int_equal(dev.comp_mask, 0);
	assert_int_equal(dev.max_resource_domains, 12345);
	dev.comp_mask = IBV_EXP_DEVICE_ATTR_RESOURCE_DOMAINS |
			IBV_EXP_DEVICE_ATTR_RESERVED;
	assert_int_equal(ibv_exp_query_device(ctx, &dev), 0);
	assert_int_equal(dev.comp_mask, IBV_EXP_DEVICE_ATTR_RESOURCE_DOMAINS);
	assert_int_equal(dev.max_resource_domains, max_rd);
	assert_int_equal(ibv_exp_query_device(ctx, NULL), EINVAL);
	assert_int_equal(sv_query_res_domain(NULL, NULL), EINVAL);
	assert_int_equal(sv_query_qp_db(NULL, NULL), EINVAL);

	assert_int_equal(ibv_destroy_cq(cq), 0);
	assert_int_equal(ibv_exp_destroy_res_domain(ctx, rd, NULL), 0);
	/* nothing failed above left a domain behind: every page is free */
	{
		struct ibv_exp_res_domain **rds = calloc(max_rd, sizeof(*rds));

		assert_non_null(rds);
		for (uint32_t k = 0; k < max_rd; k++) {
			rds[k] = rd_new(IBV_EXP_THREAD_SAFE,
					IBV_EXP_MSG_FORCE_LOW_LATENCY);
			if (!rds[k])
				fail_msg("domain %u: %s", k, strerror(errno));
		}
		for (uint32_t k = 0; k < max_rd; k++)
			assert_int_equal(ibv_exp_destroy_res_domain(ctx, rds[k],
								    NULL), 0);
		free(rds);
	}
}

/* ---- two domains at once: large messages copied in parallel ---- */

#define PAR_MSG (256u * 1024u)     /* past the daemon's unlocked-copy size */
#define PAR_N   8                  /* WRITEs and SENDs per pair, each */

struct par_pair {
	struct ibv_exp_res_domain *rd;
	struct ibv_cq *ca, *cb;
	struct ibv_qp *a, *b;
	uint8_t *src, *dst;            /* 2 * PAR_N messages each */
	struct ibv_mr *smr, *dmr;
};

static void par_fill(struct par_pair *p, uint8_t seed)
{
	for (size_t i = 0; i < 2u * PAR_N * PAR_MSG; i++)
		p->src[i] = (uint8_t)(seed + i * 13 + i / 4093);
	memset(p->dst, 0, 2u * PAR_N * PAR_MSG);
}

static void par_post(struct par_pair *p)
{
	for (unsigned int i = 0; i < PAR_N; i++) {
		uint8_t *w = p->src + (size_t)i * PAR_MSG;
		uint8_t *sd = p->src + (size_t)(PAR_N + i) * PAR_MSG;
		uint8_t *rd = p->dst + (size_t)(PAR_N + i) * PAR_MSG;
		struct ibv_sge ws = { (uintptr_t)w, PAR_MSG, p->smr->lkey };
		struct ibv_sge ss = { (uintptr_t)sd, PAR_MSG, p->smr->lkey };
		struct ibv_sge rs = { (uintptr_t)rd, PAR_MSG, p->dmr->lkey };
		struct ibv_recv_wr rw = { .wr_id = i, .sg_list = &rs,
					  .num_sge = 1 }, *rbad;
		struct ibv_send_wr ww = {
			.wr_id = 100 + i, .sg_list = &ws, .num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { (uintptr_t)(p->dst + (size_t)i * PAR_MSG),
				     p->dmr->rkey },
		}, sw = {
			.wr_id = 200 + i, .sg_list = &ss, .num_sge = 1,
			.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
		}, *sbad;

		assert_int_equal(ibv_post_recv(p->b, &rw, &rbad), 0);
		assert_int_equal(ibv_post_send(p->a, &ww, &sbad), 0);
		assert_int_equal(ibv_post_send(p->a, &sw, &sbad), 0);
	}
}

static void par_check(struct par_pair *p)
{
	struct ibv_wc wc[2 * PAR_N];
	int n = 0;

	while (n < 2 * PAR_N) {
		int k = vu_poll(p->ca, wc + n, 2 * PAR_N - n, VU_WAIT_MS);

		assert_true(k > 0);
		n += k;
	}
	for (int i = 0; i < n; i++)
		assert_int_equal(wc[i].status, IBV_WC_SUCCESS);
	assert_int_equal(vu_poll(p->cb, wc, PAR_N, VU_WAIT_MS), PAR_N);
	for (int i = 0; i < PAR_N; i++) {
		assert_int_equal(wc[i].status, IBV_WC_SUCCESS);
		assert_int_equal(wc[i].wr_id, (uint64_t)i); /* in order */
		assert_int_equal(wc[i].byte_len, PAR_MSG);
	}
	assert_memory_equal(p->src, p->dst, 2u * PAR_N * PAR_MSG);
}

/* Two pairs in two dedicated domains (two engines) move 4 MiB each at
 * once while the control thread deregisters memory and destroys a QP of a
 * third domain: every byte arrives, every completion is right. */
static void test_parallel(void **state)
{
	struct vu_conn c = vu_conn_default();
	struct par_pair p[2];
	enum ibv_exp_msg_model mm[2] = { IBV_EXP_MSG_HIGH_BW,
					 IBV_EXP_MSG_DEFAULT };
	size_t bytes = 2u * PAR_N * PAR_MSG;
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

	(void)state;
	for (int k = 0; k < 2; k++) {
		p[k].rd = rd_new(IBV_EXP_THREAD_SINGLE, mm[k]);
		assert_non_null(p[k].rd);
		assert_int_equal(rd_info(p[k].rd).dedicated, 1);
		p[k].ca = cq_in(p[k].rd);
		p[k].cb = cq_in(p[k].rd);
		assert_non_null(p[k].ca);
		assert_non_null(p[k].cb);
		p[k].a = qp_in(p[k].rd, p[k].ca);
		p[k].b = qp_in(p[k].rd, p[k].cb);
		assert_non_null(p[k].a);
		assert_non_null(p[k].b);
		p[k].src = malloc(bytes);
		p[k].dst = malloc(bytes);
		assert_non_null(p[k].src);
		assert_non_null(p[k].dst);
		p[k].smr = ibv_reg_mr(pd, p[k].src, bytes, access);
		p[k].dmr = ibv_reg_mr(pd, p[k].dst, bytes, access);
		assert_non_null(p[k].smr);
		assert_non_null(p[k].dmr);
		assert_int_equal(vu_connect_pair(p[k].a, p[k].b, &c), 0);
		par_fill(&p[k], (uint8_t)(0x31 * (k + 1)));
	}
	assert_int_not_equal(qp_db(p[0].a), qp_db(p[1].a));
	for (int round = 0; round < 3; round++) {
		struct ibv_exp_res_domain *rd3;
		struct ibv_cq *cq3;
		struct ibv_qp *qp3;
		struct ibv_mr *other;

		par_post(&p[0]);
		par_post(&p[1]);
		/* commands meanwhile: a registration comes and goes, a QP of
		 * a third domain too */
		other = ibv_reg_mr(pd, p[0].src, bytes, IBV_ACCESS_LOCAL_WRITE);
		assert_non_null(other);
		rd3 = rd_new(IBV_EXP_THREAD_SAFE, IBV_EXP_MSG_LOW_LATENCY);
		assert_non_null(rd3);
		cq3 = cq_in(rd3);
		assert_non_null(cq3);
		qp3 = qp_in(rd3, cq3);
		assert_non_null(qp3);
		assert_int_equal(ibv_dereg_mr(other), 0);
		assert_int_equal(ibv_destroy_qp(qp3), 0);
		assert_int_equal(ibv_destroy_cq(cq3), 0);
		assert_int_equal(ibv_exp_destroy_res_domain(ctx, rd3, NULL), 0);
		par_check(&p[0]);
		par_check(&p[1]);
		par_fill(&p[0], (uint8_t)(round * 7 + 1));
		par_fill(&p[1], (uint8_t)(round * 11 + 2));
	}
	for (int k = 0; k < 2; k++) {
		assert_int_equal(ibv_destroy_qp(p[k].a), 0);
		assert_int_equal(ibv_destroy_qp(p[k].b), 0);
		assert_int_equal(ibv_destroy_cq(p[k].ca), 0);
		assert_int_equal(ibv_destroy_cq(p[k].cb), 0);
		assert_int_equal(ibv_dereg_mr(p[k].smr), 0);
		assert_int_equal(ibv_dereg_mr(p[k].dmr), 0);
		assert_int_equal(ibv_exp_destroy_res_domain(ctx, p[k].rd, NULL),
				 0);
		free(p[k].src);
		free(p[k].dst);
	}
}

/* ---- LOW_LATENCY: the send ring's mailbox ---- */

#define MB_ROUNDS 6
#define MB_N      40               /* WQEs behind the waiting head */
#define MB_SLOT   64               /* bytes of source and target per WQE */
#define MB_BYTES  (2u * (MB_N + 1) * MB_SLOT)

struct mb_pair {
	struct ibv_cq *ca, *cb;
	struct ibv_qp *a, *b;
	uint8_t *src, *dst;            /* MB_BYTES each */
	struct ibv_mr *mr_s, *mr_d;
	uint64_t wr_ids[2 * MB_N + 2]; /* as posted, in order */
	uint32_t lens[2 * MB_N + 2];
	int n;                         /* WQEs posted this round */
};

static struct ibv_cq *mb_cq(struct ibv_exp_res_domain *rd)
{
	struct ibv_exp_cq_init_attr a = { 0 };

	if (rd) {
		a.comp_mask = IBV_EXP_CQ_INIT_ATTR_RES_DOMAIN;
		a.res_domain = rd;
	}
	return ibv_exp_create_cq(ctx, 256, NULL, NULL, 0, &a);
}

static struct ibv_qp *mb_qp(struct ibv_exp_res_domain *rd, struct ibv_cq *cq)
{
	struct ibv_exp_qp_init_attr a;

	qp_attr_init(&a, cq);
	a.cap.max_send_wr = 2 * MB_N + 8;
	a.cap.max_send_sge = 2;
	if (rd) {
		a.comp_mask |= IBV_EXP_QP_INIT_ATTR_RES_DOMAIN;
		a.res_domain = rd;
	}
	return ibv_exp_create_qp(ctx, &a);
}

/* WQE k of the round writes len bytes from src slot k to dst slot k (the
 * second half of the buffers: slot k + MB_N + 1 for the list's second WR). */
static void mb_wr(struct mb_pair *p, struct ibv_send_wr *w, struct ibv_sge *s,
		  unsigned int k, uint32_t len, bool inl, uint64_t id)
{
	s->addr = (uintptr_t)(p->src + (size_t)k * MB_SLOT);
	s->length = len;
	s->lkey = p->mr_s->lkey;
	memset(w, 0, sizeof(*w));
	w->wr_id = id;
	w->sg_list = s;
	w->num_sge = 1;
	w->opcode = IBV_WR_RDMA_WRITE;
	w->send_flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0);
	w->wr.rdma.remote_addr = (uintptr_t)(p->dst + (size_t)k * MB_SLOT);
	w->wr.rdma.rkey = p->mr_d->rkey;
	p->wr_ids[p->n] = id;
	p->lens[p->n] = len;
	p->n++;
}

/* One round: a SEND that waits (no receive yet), MB_N WQEs behind it in
 * four posting styles, then the receive; every completion in order and
 * every byte where it belongs. */
static void mb_round(struct mb_pair *p, unsigned int round)
{
	struct ibv_sge rs = { (uintptr_t)(p->dst + (size_t)MB_N * MB_SLOT),
			      MB_SLOT, p->mr_d->lkey };
	struct ibv_recv_wr rw = { .wr_id = 0xbeef, .sg_list = &rs,
				  .num_sge = 1 }, *rbad;
	struct ibv_send_wr w[2], *bad;
	struct ibv_sge s[2];
	struct ibv_wc wc[2 * MB_N + 2];
	int got = 0;

	for (size_t i = 0; i < MB_BYTES; i++)
		p->src[i] = (uint8_t)(round * 31 + i * 7 + i / 251);
	memset(p->dst, 0, MB_BYTES);
	p->n = 0;
	/* the head: a SEND from src slot MB_N into the receive posted last */
	mb_wr(p, &w[0], &s[0], MB_N, 48, false, 1000 * round);
	w[0].opcode = IBV_WR_SEND;
	p->lens[0] = 48;
	assert_int_equal(ibv_post_send(p->a, &w[0], &bad), 0);
	for (unsigned int k = 0; k < MB_N; k++) {
		uint64_t id = 1000 * round + 1 + k;
		uint32_t len = 1 + (k * 5 + round) % MB_SLOT;

		switch (k % 4) {
		case 0: /* one WR, one SGE: post_one, the mailbox */
			mb_wr(p, &w[0], &s[0], k, len, false, id);
			assert_int_equal(ibv_post_send(p->a, &w[0], &bad), 0);
			break;
		case 1: /* one WR, <= 16 inline bytes: the mailbox */
			mb_wr(p, &w[0], &s[0], k, 1 + (k + round) % 16, true,
			      id);
			assert_int_equal(ibv_post_send(p->a, &w[0], &bad), 0);
			break;
		case 2: /* a list (inline past 16 bytes second): the ring */
			mb_wr(p, &w[0], &s[0], k, len, false, id);
			mb_wr(p, &w[1], &s[1], k + MB_N + 1, 17 + k % 40, true,
			      id + 500);
			w[0].next = &w[1];
			assert_int_equal(ibv_post_send(p->a, &w[0], &bad), 0);
			break;
		default: /* ibv_exp_post_send: the ring */
		{
			struct ibv_exp_send_wr x, *xbad;

			mb_wr(p, &w[0], &s[0], k, len, false, id);
			memset(&x, 0, sizeof(x));
			x.wr_id = w[0].wr_id;
			x.sg_list = &s[0];
			x.num_sge = 1;
			x.exp_opcode = IBV_EXP_WR_RDMA_WRITE;
			x.exp_send_flags = IBV_SEND_SIGNALED;
			x.wr.rdma.remote_addr = w[0].wr.rdma.remote_addr;
			x.wr.rdma.rkey = w[0].wr.rdma.rkey;
			assert_int_equal(ibv_exp_post_send(p->a, &x, &xbad), 0);
			break;
		}
		}
	}
	/* the head cannot have completed: nothing could */
	assert_int_equal(ibv_poll_cq(p->ca, 1, wc), 0);
	assert_int_equal(ibv_post_recv(p->b, &rw, &rbad), 0);
	while (got < p->n) {
		int k = vu_poll(p->ca, wc + got, p->n - got, VU_WAIT_MS);

		assert_true(k > 0);
		got += k;
	}
	for (int i = 0; i < p->n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id != p->wr_ids[i])
			fail_msg("round %u, WQE %d: status %d wr_id %llu, "
				 "not %llu", round, i, wc[i].status,
				 (unsigned long long)wc[i].wr_id,
				 (unsigned long long)p->wr_ids[i]);
	}
	assert_int_equal(vu_poll(p->cb, wc, 1, VU_WAIT_MS), 1);
	assert_int_equal(wc[0].status, IBV_WC_SUCCESS);
	assert_int_equal(wc[0].wr_id, 0xbeef);
	assert_int_equal(wc[0].byte_len, 48);
	/* every target slot holds its source's first len bytes, then zeros */
	for (int i = 0; i < p->n; i++) {
		uint64_t id = p->wr_ids[i] - 1000 * round;
		unsigned int k = i == 0 ? MB_N : id > 500 ? (unsigned)(id - 501) +
			MB_N + 1 : (unsigned)(id - 1);
		const uint8_t *sp = p->src + (size_t)k * MB_SLOT;
		const uint8_t *dp = p->dst + (size_t)k * MB_SLOT;

		if (memcmp(sp, dp, p->lens[i]))
			fail_msg("round %u, WQE %d (slot %u): data differs",
				 round, i, k);
		for (uint32_t j = p->lens[i]; j < MB_SLOT; j++)
			if (dp[j])
				fail_msg("round %u, slot %u: byte %u written",
					 round, k, j);
	}
}

/* Single WRs back to back while the engine takes them: whatever the
 * interleaving (mailbox fresh, rewritten meanwhile, or behind), each WQE
 * runs once, as posted. */
static void mb_burst(struct mb_pair *p, unsigned int round)
{
	struct ibv_send_wr w, *bad;
	struct ibv_sge s;
	struct ibv_wc wc[MB_N];
	int got = 0;

	for (size_t i = 0; i < MB_BYTES; i++)
		p->src[i] = (uint8_t)(round * 13 + i * 3 + 1);
	memset(p->dst, 0, MB_BYTES);
	p->n = 0;
	for (unsigned int k = 0; k < MB_N; k++) {
		mb_wr(p, &w, &s, k, k % 2 ? 8 : 16, k % 3 == 0, 7000 + k);
		assert_int_equal(ibv_post_send(p->a, &w, &bad), 0);
	}
	while (got < MB_N) {
		int k = vu_poll(p->ca, wc + got, MB_N - got, VU_WAIT_MS);

		assert_true(k > 0);
		got += k;
	}
	for (unsigned int k = 0; k < MB_N; k++) {
		assert_int_equal(wc[k].status, IBV_WC_SUCCESS);
		assert_int_equal(wc[k].wr_id, 7000 + k);
		assert_memory_equal(p->src + (size_t)k * MB_SLOT,
				    p->dst + (size_t)k * MB_SLOT, p->lens[k]);
	}
}

static void test_mailbox(void **state)
{
	static const struct {
		enum ibv_exp_thread_model tm;
		enum ibv_exp_msg_model mm;
	} cases[] = {
		{ IBV_EXP_THREAD_SAFE, IBV_EXP_MSG_LOW_LATENCY },
		{ IBV_EXP_THREAD_SINGLE, IBV_EXP_MSG_LOW_LATENCY },
		{ IBV_EXP_THREAD_UNSAFE, IBV_EXP_MSG_FORCE_LOW_LATENCY },
		{ IBV_EXP_THREAD_SAFE, IBV_EXP_MSG_DEFAULT }, /* no mailbox */
	};
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

	(void)state;
	for (size_t c = 0; c < VU_ARRAY_SIZE(cases); c++) {
		struct ibv_exp_res_domain *rd = rd_new(cases[c].tm,
						       cases[c].mm);
		struct vu_conn conn = vu_conn_default();
		struct mb_pair p;

		assert_non_null(rd);
		memset(&p, 0, sizeof(p));
		p.ca = mb_cq(rd);
		p.cb = mb_cq(rd);
		assert_non_null(p.ca);
		assert_non_null(p.cb);
		p.a = mb_qp(rd, p.ca);
		p.b = mb_qp(rd, p.cb);
		assert_non_null(p.a);
		assert_non_null(p.b);
		p.src = malloc(MB_BYTES);
		p.dst = malloc(MB_BYTES);
		assert_non_null(p.src);
		assert_non_null(p.dst);
		p.mr_s = ibv_reg_mr(pd, p.src, MB_BYTES, access);
		p.mr_d = ibv_reg_mr(pd, p.dst, MB_BYTES, access);
		assert_non_null(p.mr_s);
		assert_non_null(p.mr_d);
		/* the head waits for its receive: RNR, retried forever */
		assert_int_equal(conn.rnr_retry, 7);
		assert_int_equal(vu_connect_pair(p.a, p.b, &conn), 0);
		for (unsigned int r = 1; r <= MB_ROUNDS; r++) {
			mb_round(&p, r);
			mb_burst(&p, r);
		}
		assert_int_equal(ibv_destroy_qp(p.a), 0);
		assert_int_equal(ibv_destroy_qp(p.b), 0);
		assert_int_equal(ibv_destroy_cq(p.ca), 0);
		assert_int_equal(ibv_destroy_cq(p.cb), 0);
		assert_int_equal(ibv_dereg_mr(p.mr_s), 0);
		assert_int_equal(ibv_dereg_mr(p.mr_d), 0);
		free(p.src);
		free(p.dst);
		assert_int_equal(ibv_exp_destroy_res_domain(ctx, rd, NULL), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_models),
		cmocka_unit_test(test_pages),
		cmocka_unit_test(test_busy),
		cmocka_unit_test(test_exhaustion),
		cmocka_unit_test(test_index),
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_parallel),
		cmocka_unit_test(test_mailbox),
		cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
