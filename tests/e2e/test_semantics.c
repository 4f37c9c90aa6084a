// SPDX-License-Identifier: MIT
/*
 * rdma-core's semantics where the device once differed (issue 18): what
 * Debian's libibverbs, rxe and mlx5 do, the device does too.
 *
 * - identity: ibv_query_device / _ex say who the device is (nonzero vendor,
 *   part, hardware and firmware versions) and report only what it has;
 *   the completion timestamps they advertise are really there;
 * - a window bind whose access has IBV_ACCESS_LOCAL_WRITE beside the
 *   remote rights (type 1, type 2 by ibv_post_send and by ibv_wr_bind_mw)
 *   binds, and an RDMA WRITE through the window lands;
 * - ibv_alloc_mw of a type that does not exist is EINVAL;
 * - after ibv_rereg_mr (access, PD, translation, and their combinations)
 *   the MR keeps its handle and traffic with its new keys works;
 * - ibv_query_qp_data_in_order answers per opcode and flags;
 * - a parent domain whose allocator serves huge pages carries RC QPs and
 *   CQs that move data;
 * - verbs the device does not implement say EOPNOTSUPP.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>
#include <infiniband/verbs.h>
#include <softverbs/softverbs.h>

#include "vu.h"

#define BUF 65536

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

/* Two connected RC QPs of one PD: a is the requester, b the responder. */
struct pair {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *a, *b;
	struct ibv_qp_ex *ax;       /* a, made with ibv_create_qp_ex */
};

static struct ibv_qp *rc_qp(struct ibv_pd *pd, struct ibv_cq *cq, bool ex)
{
	struct ibv_qp_init_attr_ex qa = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 32, .max_recv_wr = 32,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = pd,
	};

	if (ex) {
		qa.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		qa.send_ops_flags = IBV_QP_EX_WITH_BIND_MW |
				    IBV_QP_EX_WITH_RDMA_WRITE |
				    IBV_QP_EX_WITH_SEND;
	}
	return ibv_create_qp_ex(ctx, &qa);
}

static void pair_make(struct pair *p, bool ex)
{
	struct vu_conn c = vu_conn_default();

	memset(p, 0, sizeof(*p));
	p->pd = ibv_alloc_pd(ctx);
	assert_non_null(p->pd);
	p->cq = ibv_create_cq(ctx, 128, NULL, NULL, 0);
	assert_non_null(p->cq);
	p->a = rc_qp(p->pd, p->cq, ex);
	assert_non_null(p->a);
	p->b = rc_qp(p->pd, p->cq, false);
	assert_non_null(p->b);
	if (ex) {
		p->ax = ibv_qp_to_qp_ex(p->a);
		assert_non_null(p->ax);
	}
	assert_int_equal(vu_connect_pair(p->a, p->b, &c), 0);
}

static void pair_free(struct pair *p)
{
	assert_int_equal(ibv_destroy_qp(p->a), 0);
	assert_int_equal(ibv_destroy_qp(p->b), 0);
	assert_int_equal(ibv_destroy_cq(p->cq), 0);
	assert_int_equal(ibv_dealloc_pd(p->pd), 0);
}

/* The next completion: it must be wr_id's, with status st. */
static void expect_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status st)
{
	struct ibv_wc wc;

	assert_int_equal(vu_poll(cq, &wc, 1, VU_WAIT_MS), 1);
	if (wc.status != st || wc.wr_id != wr_id)
		fail_msg("wr_id %llu: %s (%d), expected wr_id %llu %s",
			 (unsigned long long)wc.wr_id,
			 ibv_wc_status_str(wc.status), wc.status,
			 (unsigned long long)wr_id, ibv_wc_status_str(st));
}

static void rdma_write(struct ibv_qp *qp, uint64_t wr_id, void *src,
		       uint32_t lkey, uint32_t len, uint64_t raddr,
		       uint32_t rkey)
{
	struct ibv_sge s = { (uintptr_t)src, len, lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &s, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { raddr, rkey },
	}, *bad;

	assert_int_equal(ibv_post_send(qp, &wr, &bad), 0);
}

static void fill(uint8_t *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
}

/* ---- identity ---- */

static void test_identity(void **state)
{
	struct ibv_device_attr a;
	struct ibv_device_attr_ex x;

	(void)state;
	assert_int_equal(ibv_query_device(ctx, &a), 0);
	assert_int_not_equal(a.vendor_id, 0);
	assert_int_not_equal(a.vendor_part_id, 0);
	assert_int_not_equal(a.hw_ver, 0);
	assert_true(a.fw_ver[0] != 0);
	memset(&x, 0xa5, sizeof(x));
	assert_int_equal(ibv_query_device_ex(ctx, NULL, &x), 0);
	assert_memory_equal(&x.orig_attr, &a, sizeof(a));
	assert_int_equal(x.odp_caps.general_caps, 0);
	assert_int_equal(x.odp_caps.per_transport_caps.rc_odp_caps, 0);
	assert_int_equal(x.tm_caps.max_num_tags, 0);
	assert_int_equal(x.tm_caps.flags, 0);
	assert_int_equal(x.max_dm_size, 0);
	assert_int_equal(x.pci_atomic_caps.fetch_add, 0);
	assert_int_equal(x.pci_atomic_caps.swap, 0);
	assert_int_equal(x.pci_atomic_caps.compare_swap, 0);
	assert_int_equal(x.tso_caps.max_tso, 0);
	assert_int_equal(x.rss_caps.supported_qpts, 0);
	assert_int_equal(x.packet_pacing_caps.qp_rate_limit_max, 0);
	assert_int_equal(x.max_wq_type_rq, 0);
	assert_int_equal(x.raw_packet_caps, 0);
	assert_int_equal(x.cq_mod_caps.max_cq_count, 0);
	/* the ex flags are the basic ones: nothing it lacks (no
	 * IBV_DEVICE_RAW_IP_CSUM, PCI_WRITE_END_PADDING, ...) */
	assert_int_equal(x.device_cap_flags_ex, a.device_cap_flags);
	assert_int_equal(x.phys_port_cnt_ex, 1);
	/* it stamps completions: a clock and a mask */
	assert_int_not_equal(x.hca_core_clock, 0);
	assert_int_not_equal(x.completion_timestamp_mask, 0);
	/* a query with an unknown comp_mask bit in its input is refused */
	{
		struct ibv_query_device_ex_input in = { .comp_mask = 1 };

		assert_int_equal(ibv_query_device_ex(ctx, &in, &x), EINVAL);
	}
}

/* The timestamps query_device_ex advertises: a completion carries one,
 * from the clock the device reports, and so does its wall-clock form. */
static void test_timestamps(void **state)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 16,
		.wc_flags = IBV_WC_STANDARD_FLAGS |
			    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
			    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
	};
	struct ibv_poll_cq_attr pa = { 0 };
	struct vu_conn c = vu_conn_default();
	struct ibv_device_attr_ex x;
	struct ibv_cq_ex *cq;
	struct ibv_pd *pd;
	struct ibv_qp *a, *b;
	struct ibv_mr *mr;
	struct timespec t0, t1;
	uint64_t ts, wall, now;
	static uint8_t buf[4096];
	int ret = ENOENT;

	(void)state;
	assert_int_equal(ibv_query_device_ex(ctx, NULL, &x), 0);
	pd = ibv_alloc_pd(ctx);
	assert_non_null(pd);
	cq = ibv_create_cq_ex(ctx, &ca);
	assert_non_null(cq);
	a = rc_qp(pd, ibv_cq_ex_to_cq(cq), false);
	b = rc_qp(pd, ibv_cq_ex_to_cq(cq), false);
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(vu_connect_pair(a, b, &c), 0);
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE);
	assert_non_null(mr);
	clock_gettime(CLOCK_REALTIME, &t0);
	rdma_write(a, 1, buf, mr->lkey, 64, (uintptr_t)buf + 2048, mr->rkey);
	for (long end = vu_now_ms() + VU_WAIT_MS; vu_now_ms() < end;) {
		ret = ibv_start_poll(cq, &pa);
		if (ret != ENOENT)
			break;
	}
	assert_int_equal(ret, 0);
	clock_gettime(CLOCK_REALTIME, &t1);
	assert_int_equal(cq->status, IBV_WC_SUCCESS);
	ts = ibv_wc_read_completion_ts(cq);
	wall = ibv_wc_read_completion_wallclock_ns(cq);
	ibv_end_poll(cq);
	assert_int_not_equal(ts, 0);
	assert_int_equal(ts & ~x.completion_timestamp_mask, 0);
	now = (uint64_t)t1.tv_sec * 1000000000ull + (uint64_t)t1.tv_nsec;
	assert_true(wall <= now + 1000000 &&
		    wall + 1000000 >= (uint64_t)t0.tv_sec * 1000000000ull +
					      (uint64_t)t0.tv_nsec);
	assert_int_equal(ibv_dereg_mr(mr), 0);
	assert_int_equal(ibv_destroy_qp(a), 0);
	assert_int_equal(ibv_destroy_qp(b), 0);
	assert_int_equal(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
}

/* ---- memory windows ---- */

enum bind_how { BIND_TYPE1, BIND_POST, BIND_WR };

/* Bind a window over part of the responder's MR with LOCAL_WRITE beside
 * REMOTE_WRITE (rdma-core, rxe and mlx5 ignore local bits in a bind), then
 * RDMA WRITE through it: the bytes land where the window says. */
static void mw_local_write(enum bind_how how)
{
	const unsigned int acc = IBV_ACCESS_LOCAL_WRITE |
				 IBV_ACCESS_REMOTE_WRITE;
	uint8_t *src = calloc(1, BUF), *dst = calloc(1, BUF);
	struct ibv_mr *smr, *dmr;
	struct ibv_mw *mw;
	struct pair p;
	struct ibv_mw_bind_info bi;
	uint32_t rkey;

	assert_non_null(src);
	assert_non_null(dst);
	pair_make(&p, how == BIND_WR);
	smr = ibv_reg_mr(p.pd, src, BUF, IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(p.pd, dst, BUF, IBV_ACCESS_LOCAL_WRITE |
			 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND);
	assert_non_null(smr);
	assert_non_null(dmr);
	mw = ibv_alloc_mw(p.pd, how == BIND_TYPE1 ? IBV_MW_TYPE_1 :
						    IBV_MW_TYPE_2);
	assert_non_null(mw);
	bi = (struct ibv_mw_bind_info){ .mr = dmr,
					.addr = (uintptr_t)dst + 4096,
					.length = 8192,
					.mw_access_flags = acc };
	if (how == BIND_TYPE1) {
		/* the responder's window, bound on its own QP */
		struct ibv_mw_bind b = { .wr_id = 10,
					 .send_flags = IBV_SEND_SIGNALED,
					 .bind_info = bi };

		assert_int_equal(ibv_bind_mw(p.b, mw, &b), 0);
		expect_wc(p.cq, 10, IBV_WC_SUCCESS);
	} else if (how == BIND_POST) {
		struct ibv_send_wr wr = {
			.wr_id = 10, .opcode = IBV_WR_BIND_MW,
			.send_flags = IBV_SEND_SIGNALED,
			.bind_mw = { .mw = mw, .rkey = ibv_inc_rkey(mw->rkey),
				     .bind_info = bi },
		}, *bad;

		/* a type 2 window is bound to the QP that the peer's access
		 * comes in through: the responder's */
		assert_int_equal(ibv_post_send(p.b, &wr, &bad), 0);
		expect_wc(p.cq, 10, IBV_WC_SUCCESS);
	} else {
		/* ibv_wr_bind_mw on a's qp_ex; the window serves the access
		 * of b's writes to a (roles swapped for this one) */
		ibv_wr_start(p.ax);
		p.ax->wr_id = 10;
		p.ax->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_bind_mw(p.ax, mw, ibv_inc_rkey(mw->rkey), &bi);
		assert_int_equal(ibv_wr_complete(p.ax), 0);
		expect_wc(p.cq, 10, IBV_WC_SUCCESS);
	}
	rkey = mw->rkey;
	fill(src, 8192, 3);
	rdma_write(how == BIND_WR ? p.b : p.a, 11, src, smr->lkey, 8192,
		   (uintptr_t)dst + 4096, rkey);
	expect_wc(p.cq, 11, IBV_WC_SUCCESS);
	assert_memory_equal(dst + 4096, src, 8192);
	for (size_t i = 0; i < 4096; i++)
		assert_int_equal(dst[i] | dst[4096 + 8192 + i], 0);
	assert_int_equal(vu_qp_state(p.a), IBV_QPS_RTS);
	assert_int_equal(vu_qp_state(p.b), IBV_QPS_RTS);
	assert_int_equal(ibv_dealloc_mw(mw), 0);
	assert_int_equal(ibv_dereg_mr(smr), 0);
	assert_int_equal(ibv_dereg_mr(dmr), 0);
	pair_free(&p);
	free(src);
	free(dst);
}

static void test_mw1_local_write(void **state)
{
	(void)state;
	mw_local_write(BIND_TYPE1);
}

static void test_mw2_local_write_post(void **state)
{
	(void)state;
	mw_local_write(BIND_POST);
}

static void test_mw2_local_write_wr(void **state)
{
	(void)state;
	mw_local_write(BIND_WR);
}

static void test_alloc_mw_bad_type(void **state)
{
	static const int bad[] = { 0, 3, 4, 0x7f, -1, INT32_MAX };
	struct ibv_pd *pd = ibv_alloc_pd(ctx);

	(void)state;
	assert_non_null(pd);
	for (size_t i = 0; i < VU_ARRAY_SIZE(bad); i++) {
		errno = 0;
		assert_null(ibv_alloc_mw(pd, (enum ibv_mw_type)bad[i]));
		assert_int_equal(errno, EINVAL);
	}
	/* the real ones still work (2A is softverbs' own value) */
	{
		struct ibv_mw *m1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
		struct ibv_mw *m2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
		struct ibv_mw *m3 = ibv_alloc_mw(pd, IBV_EXP_MW_TYPE_2A);

		assert_non_null(m1);
		assert_non_null(m2);
		assert_non_null(m3);
		assert_int_equal(m1->type, IBV_MW_TYPE_1);
		assert_int_equal(m3->type, IBV_MW_TYPE_2);
		assert_int_equal(ibv_dealloc_mw(m1), 0);
		assert_int_equal(ibv_dealloc_mw(m2), 0);
		assert_int_equal(ibv_dealloc_mw(m3), 0);
	}
	assert_int_equal(ibv_dealloc_pd(pd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_identity),
		cmocka_unit_test(test_timestamps),
		cmocka_unit_test(test_mw1_local_write),
		cmocka_unit_test(test_mw2_local_write_post),
		cmocka_unit_test(test_mw2_local_write_wr),
		cmocka_unit_test(test_alloc_mw_bad_type),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
