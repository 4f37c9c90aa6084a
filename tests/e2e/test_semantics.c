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

/* nr_hugepages as it was before test_pd_hugetlb raised it, or -1 */
static long nr_huge_saved = -1;
static bool write_long(const char *path, long v);
#define NR_HUGE "/proc/sys/vm/nr_hugepages"

static int teardown(void **state)
{
	(void)state;
	if (nr_huge_saved >= 0)
		write_long(NR_HUGE, nr_huge_saved);
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
	/* on-demand paging (issue 23; e2e_test_odp uses each bit) */
	assert_int_equal(x.odp_caps.general_caps,
			 IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT);
	assert_int_not_equal(x.odp_caps.per_transport_caps.rc_odp_caps, 0);
	/* tag matching (issue 23; e2e_test_tm): RC, with these limits */
	assert_int_equal(x.tm_caps.flags, IBV_TM_CAP_RC);
	assert_int_equal(x.tm_caps.max_num_tags, 1024);
	assert_int_equal(x.tm_caps.max_ops, 1024);
	assert_int_equal(x.tm_caps.max_sge, 1);
	assert_int_equal(x.tm_caps.max_rndv_hdr_size, 64);
	/* device memory (issue 23): what ALLOC_DM gives in all */
	assert_int_equal(x.max_dm_size, 64ull << 20);
	assert_int_equal(x.pci_atomic_caps.fetch_add, 0);
	assert_int_equal(x.pci_atomic_caps.swap, 0);
	assert_int_equal(x.pci_atomic_caps.compare_swap, 0);
	assert_int_equal(x.tso_caps.max_tso, 0);
	assert_int_equal(x.rss_caps.supported_qpts, 0);
	assert_int_equal(x.packet_pacing_caps.qp_rate_limit_max, 0);
	assert_int_equal(x.max_wq_type_rq, 0);
	assert_int_equal(x.raw_packet_caps, 0);
	assert_int_equal(x.cq_mod_caps.max_cq_count, 0);
	/* the ex flags are the basic ones and, above them, ATOMIC WRITE
	 * (bit 40) and FLUSH of global visibility (38) (issue 23;
	 * e2e_test_awrite and net_flush use them): nothing it lacks (no
	 * IBV_DEVICE_RAW_IP_CSUM, PCI_WRITE_END_PADDING, FLUSH_PERSISTENT) */
	assert_int_equal(x.device_cap_flags_ex,
			 a.device_cap_flags | (1ull << 40) | (1ull << 38));
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

/* ---- ibv_rereg_mr ---- */

static void send_recv(struct pair *p, struct ibv_qp *from, struct ibv_qp *to,
		      void *src, uint32_t lkey_s, void *dst, uint32_t lkey_d,
		      uint32_t len)
{
	struct ibv_sge ss = { (uintptr_t)src, len, lkey_s };
	struct ibv_sge rs = { (uintptr_t)dst, len, lkey_d };
	struct ibv_recv_wr rw = { .wr_id = 21, .sg_list = &rs, .num_sge = 1 },
			   *rbad;
	struct ibv_send_wr sw = { .wr_id = 22, .sg_list = &ss, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *sbad;
	struct ibv_wc wc[2];
	int got = 0;

	assert_int_equal(ibv_post_recv(to, &rw, &rbad), 0);
	assert_int_equal(ibv_post_send(from, &sw, &sbad), 0);
	while (got < 2) {
		int n = vu_poll(p->cq, wc + got, 2 - got, VU_WAIT_MS);

		assert_true(n > 0);
		got += n;
	}
	for (int i = 0; i < 2; i++)
		if (wc[i].status != IBV_WC_SUCCESS)
			fail_msg("wr_id %llu: %s", (unsigned long long)wc[i].wr_id,
				 ibv_wc_status_str(wc[i].status));
}

/*
 * ibv_rereg_mr with each flag and combination of flags on the responder's
 * MR, then traffic through it with the keys ibv_mr now holds: an RDMA
 * WRITE into it (its rkey), a SEND received into it (its lkey) and an
 * RDMA READ out of it. The handle stays; the old keys no longer work.
 */
static void rereg_case(int flags)
{
	const unsigned int rw = IBV_ACCESS_LOCAL_WRITE |
				IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ;
	uint8_t *src = calloc(1, BUF), *b1 = calloc(1, BUF),
		*b2 = calloc(1, 2 * BUF);
	struct ibv_pd *pd2;
	struct ibv_mr *smr, *mr;
	struct pair p, q;
	uint32_t handle;
	uint8_t *dst;
	size_t len = BUF;
	int access = (flags & IBV_REREG_MR_CHANGE_ACCESS) ? (int)rw : 0;

	assert_non_null(src);
	assert_non_null(b1);
	assert_non_null(b2);
	pair_make(&p, false);
	/* q: a pair of another PD, for CHANGE_PD */
	pair_make(&q, false);
	pd2 = q.pd;
	smr = ibv_reg_mr(p.pd, src, BUF, IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(smr);
	/* with CHANGE_ACCESS it starts with local write only */
	mr = ibv_reg_mr(p.pd, b1, BUF, (flags & IBV_REREG_MR_CHANGE_ACCESS) ?
			IBV_ACCESS_LOCAL_WRITE : (int)rw);
	assert_non_null(mr);
	handle = mr->handle;
	/* traffic before, as an application's: a message into the MR, and
	 * the receive for the next one posted (with the MR's key) */
	fill(src, BUF, 99);
	send_recv(&p, p.a, p.b, src, smr->lkey, b1, mr->lkey, 1000);
	assert_memory_equal(b1, src, 1000);
	if (!(flags & ~IBV_REREG_MR_CHANGE_ACCESS)) {
		struct ibv_sge rs = { (uintptr_t)b1 + 2000, 1000, mr->lkey };
		struct ibv_recv_wr rw = { .wr_id = 40, .sg_list = &rs,
					  .num_sge = 1 }, *rbad;

		assert_int_equal(ibv_post_recv(p.b, &rw, &rbad), 0);
	}
	dst = b1;
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		dst = b2 + 4096 + 13;
		len = BUF + 100;
	}
	assert_int_equal(ibv_rereg_mr(mr, flags, pd2, dst, len, access), 0);
	assert_int_equal(mr->handle, handle);
	assert_ptr_equal(mr->pd, (flags & IBV_REREG_MR_CHANGE_PD) ? pd2 : p.pd);
	assert_ptr_equal(mr->addr, dst);
	assert_int_equal(mr->length, len);
	if (!(flags & ~IBV_REREG_MR_CHANGE_ACCESS)) {
		/* the receive posted before the rereg takes the next message */
		struct ibv_sge ss = { (uintptr_t)src, 1000, smr->lkey };
		struct ibv_send_wr sw = { .wr_id = 41, .sg_list = &ss,
					  .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED },
				   *sbad;
		struct ibv_wc wc[2];

		fill(src, BUF, 98);
		assert_int_equal(ibv_post_send(p.a, &sw, &sbad), 0);
		assert_int_equal(vu_poll(p.cq, wc, 2, VU_WAIT_MS), 2);
		assert_int_equal(wc[0].status, IBV_WC_SUCCESS);
		assert_int_equal(wc[1].status, IBV_WC_SUCCESS);
		assert_memory_equal(b1 + 2000, src, 1000);
	}
	{
		/* traffic on the pair of the MR's PD now */
		struct pair *t = (flags & IBV_REREG_MR_CHANGE_PD) ? &q : &p;
		struct ibv_mr *tsmr = smr;
		uint8_t *back = calloc(1, BUF);

		assert_non_null(back);
		if (t == &q) {
			tsmr = ibv_reg_mr(q.pd, src, BUF,
					  IBV_ACCESS_LOCAL_WRITE);
			assert_non_null(tsmr);
		}
		fill(src, BUF, (unsigned int)flags);
		rdma_write(t->a, 31, src, tsmr->lkey, 5000,
			   (uintptr_t)dst + 100, mr->rkey);
		expect_wc(t->cq, 31, IBV_WC_SUCCESS);
		assert_memory_equal(dst + 100, src, 5000);
		fill(src, BUF, (unsigned int)flags + 1);
		send_recv(t, t->a, t->b, src, tsmr->lkey, dst + 7000,
			  mr->lkey, 3000);
		assert_memory_equal(dst + 7000, src, 3000);
		{
			struct ibv_mr *bmr = ibv_reg_mr(t->pd, back, BUF,
							IBV_ACCESS_LOCAL_WRITE);
			struct ibv_sge s = { (uintptr_t)back, 4000, 0 };
			struct ibv_send_wr wr = {
				.wr_id = 33, .sg_list = &s, .num_sge = 1,
				.opcode = IBV_WR_RDMA_READ,
				.send_flags = IBV_SEND_SIGNALED,
				.wr.rdma = { (uintptr_t)dst + len - 4000,
					     mr->rkey },
			}, *bad;

			assert_non_null(bmr);
			s.lkey = bmr->lkey;
			memset(dst + len - 4000, 0x5c, 4000);
			assert_int_equal(ibv_post_send(t->a, &wr, &bad), 0);
			expect_wc(t->cq, 33, IBV_WC_SUCCESS);
			for (size_t i = 0; i < 4000; i++)
				assert_int_equal(back[i], 0x5c);
			assert_int_equal(ibv_dereg_mr(bmr), 0);
		}
		assert_int_equal(vu_qp_state(t->a), IBV_QPS_RTS);
		assert_int_equal(vu_qp_state(t->b), IBV_QPS_RTS);
		/* the MR is the new PD's now: through a QP of the old one,
		 * its key is a remote access error */
		if (t == &q) {
			rdma_write(p.a, 34, src, smr->lkey, 8, (uintptr_t)dst,
				   mr->rkey);
			expect_wc(p.cq, 34, IBV_WC_REM_ACCESS_ERR);
		}
		if (tsmr != smr)
			assert_int_equal(ibv_dereg_mr(tsmr), 0);
		free(back);
	}
	assert_int_equal(ibv_dereg_mr(mr), 0);
	assert_int_equal(ibv_dereg_mr(smr), 0);
	pair_free(&p);
	pair_free(&q);
	free(src);
	free(b1);
	free(b2);
}

static void test_rereg_access(void **state)
{
	(void)state;
	rereg_case(IBV_REREG_MR_CHANGE_ACCESS);
}

static void test_rereg_pd(void **state)
{
	(void)state;
	rereg_case(IBV_REREG_MR_CHANGE_PD);
}

static void test_rereg_translation(void **state)
{
	(void)state;
	rereg_case(IBV_REREG_MR_CHANGE_TRANSLATION);
}

static void test_rereg_combined(void **state)
{
	(void)state;
	rereg_case(IBV_REREG_MR_CHANGE_ACCESS | IBV_REREG_MR_CHANGE_PD);
	rereg_case(IBV_REREG_MR_CHANGE_ACCESS |
		   IBV_REREG_MR_CHANGE_TRANSLATION);
	rereg_case(IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_TRANSLATION);
	rereg_case(IBV_REREG_MR_CHANGE_ACCESS | IBV_REREG_MR_CHANGE_PD |
		   IBV_REREG_MR_CHANGE_TRANSLATION);
}

/* ---- ibv_query_qp_data_in_order ---- */

#ifndef IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS
#define IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS (1u << 0)
#endif

/* The device guarantees no in-order placement for any opcode (src/verbs/
 * query.c says why): 0 with flags 0, no capability bit with RETURN_CAPS,
 * 0 for flags it does not know; never an errno value. */
static void test_data_in_order(void **state)
{
	static const enum ibv_wr_opcode ops[] = {
		IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND,
		IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_READ,
		IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
		IBV_WR_LOCAL_INV, IBV_WR_BIND_MW, IBV_WR_SEND_WITH_INV,
		IBV_WR_TSO, IBV_WR_DRIVER1, (enum ibv_wr_opcode)77,
	};
	static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC,
						  IBV_QPT_UD };

	(void)state;
	for (size_t t = 0; t < VU_ARRAY_SIZE(types); t++) {
		struct vu_qp_caps caps = { 0 };
		struct vu_ep ep;

		assert_int_equal(vu_ep_create(&ep, ctx, NULL, types[t], &caps),
				 0);
		for (size_t i = 0; i < VU_ARRAY_SIZE(ops); i++) {
			assert_int_equal(ibv_query_qp_data_in_order(ep.qp,
								    ops[i], 0),
					 0);
			assert_int_equal(ibv_query_qp_data_in_order(ep.qp, ops[i],
					 IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS),
					 0);
			assert_int_equal(ibv_query_qp_data_in_order(ep.qp,
								    ops[i],
								    1u << 7),
					 0);
		}
		vu_ep_destroy(&ep);
	}
}

/* ---- a parent domain whose allocator serves huge pages ---- */

#define HUGE (2u << 20)

/* A bump allocator over one 2 MiB mapping. */
struct arena {
	uint8_t *base;
	size_t used, live;
	unsigned int calls;
};

static void *arena_alloc(struct ibv_pd *pd, void *pd_context, size_t size,
			 size_t alignment, uint64_t resource_type)
{
	struct arena *a = pd_context;
	size_t at;

	(void)pd;
	(void)resource_type;
	a->calls++;
	if (!alignment || (alignment & (alignment - 1)))
		return NULL;
	at = (a->used + alignment - 1) & ~(alignment - 1);
	if (at > HUGE || size > HUGE - at)
		return NULL;
	a->used = at + size;
	a->live++;
	return a->base + at;
}

static void arena_free(struct ibv_pd *pd, void *pd_context, void *ptr,
		       uint64_t resource_type)
{
	struct arena *a = pd_context;

	(void)pd;
	(void)resource_type;
	assert_true((uint8_t *)ptr >= a->base && (uint8_t *)ptr < a->base + HUGE);
	a->live--;
}

static long read_long(const char *path)
{
	FILE *f = fopen(path, "r");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static bool write_long(const char *path, long v)
{
	FILE *f = fopen(path, "w");
	bool ok;

	if (!f)
		return false;
	ok = fprintf(f, "%ld\n", v) > 0;
	return fclose(f) == 0 && ok;
}

/*
 * 2 MiB of huge pages (MAP_HUGETLB). When none are free and we are root,
 * reserve one more for the test (nr_huge_saved: the teardown restores
 * it). NULL when there are none to be had.
 */
static void *huge_map(void)
{
	void *p = mmap(NULL, HUGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	long n;

	if (p != MAP_FAILED)
		return p;
	n = read_long(NR_HUGE);
	if (n < 0 || geteuid() != 0 || !write_long(NR_HUGE, n + 1))
		return NULL;
	nr_huge_saved = n;
	p = mmap(NULL, HUGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/*
 * RC QPs and CQs on a parent domain whose allocator hands out memory from
 * one 2 MiB MAP_HUGETLB mapping are made, move data (SEND and RDMA WRITE,
 * every byte checked) and go; the allocator gets back all it gave. It
 * covers huge pages where the machine can give 2 MiB of them (as root it
 * reserves one for the test and gives it back); where none can be had it
 * says so and runs the same over an ordinary 2 MiB-aligned mapping of 2
 * MiB (the allocator's bounds, not the page kind).
 */
static void test_pd_hugetlb(void **state)
{
	struct vu_conn c = vu_conn_default();
	struct arena ar = { 0 };
	struct ibv_pd *pd, *par;
	struct ibv_cq *cq;
	struct ibv_qp *qa, *qb;
	struct ibv_mr *mr;
	uint8_t *buf = calloc(1, BUF), *plain = NULL;
	bool huge;

	(void)state;
	assert_non_null(buf);
	ar.base = huge_map();
	huge = ar.base != NULL;
	if (!huge) {
		/* 2 MiB aligned, 2 MiB long, ordinary pages */
		plain = mmap(NULL, 2 * HUGE, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		assert_true(plain != MAP_FAILED);
		ar.base = (uint8_t *)(((uintptr_t)plain + HUGE - 1) &
				      ~(uintptr_t)(HUGE - 1));
		print_message("no huge pages to be had: the allocator serves "
			      "an ordinary 2 MiB mapping (huge pages NOT "
			      "covered)\n");
	} else {
		print_message("the allocator serves 2 MiB of huge pages\n");
	}
	pd = ibv_alloc_pd(ctx);
	assert_non_null(pd);
	{
		struct ibv_parent_domain_init_attr a = {
			.pd = pd,
			.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
				     IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
			.alloc = arena_alloc, .free = arena_free,
			.pd_context = &ar,
		};
		par = ibv_alloc_parent_domain(ctx, &a);
		assert_non_null(par);
	}
	{
		struct ibv_cq_init_attr_ex ca = {
			.cqe = 64, .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD,
			.parent_domain = par,
		};
		struct ibv_cq_ex *x = ibv_create_cq_ex(ctx, &ca);

		assert_non_null(x);
		cq = ibv_cq_ex_to_cq(x);
	}
	qa = rc_qp(par, cq, false);
	assert_non_null(qa);
	qb = rc_qp(par, cq, false);
	assert_non_null(qb);
	assert_true(ar.calls >= 3);
	assert_int_equal(vu_connect_pair(qa, qb, &c), 0);
	mr = ibv_reg_mr(par, buf, BUF, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE);
	assert_non_null(mr);
	for (int i = 0; i < 40; i++) {
		struct pair p = { .pd = par, .cq = cq, .a = qa, .b = qb };

		fill(buf, 4096, (unsigned int)i);
		send_recv(&p, qa, qb, buf, mr->lkey, buf + 8192, mr->lkey,
			  4096);
		assert_memory_equal(buf + 8192, buf, 4096);
		rdma_write(qb, 50, buf + 8192, mr->lkey, 4096,
			   (uintptr_t)buf + 32768, mr->rkey);
		expect_wc(cq, 50, IBV_WC_SUCCESS);
		assert_memory_equal(buf + 32768, buf, 4096);
	}
	assert_int_equal(ibv_dereg_mr(mr), 0);
	assert_int_equal(ibv_destroy_qp(qa), 0);
	assert_int_equal(ibv_destroy_qp(qb), 0);
	assert_int_equal(ibv_destroy_cq(cq), 0);
	assert_int_equal(ar.live, 0);
	assert_int_equal(ibv_dealloc_pd(par), 0);
	assert_int_equal(ibv_dealloc_pd(pd), 0);
	if (huge)
		munmap(ar.base, HUGE);
	else
		munmap(plain, 2 * HUGE);
	if (nr_huge_saved >= 0 && write_long(NR_HUGE, nr_huge_saved))
		nr_huge_saved = -1;
	free(buf);
}

/* ---- what the device does not implement ---- */

#define NOSUP_PTR(call)                                                      \
	do {                                                                 \
		errno = 0;                                                   \
		assert_null(call);                                           \
		assert_int_equal(errno, EOPNOTSUPP);                         \
	} while (0)

/* Each verb the device lacks fails with EOPNOTSUPP (NULL and errno for
 * the pointer verbs): no crash, no silent success. */
static void test_unsupported(void **state)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct vu_qp_caps caps = { 0 };
	struct vu_ep ep;
	static uint8_t buf[4096];

	(void)state;
	assert_non_null(pd);
	assert_int_equal(vu_ep_create(&ep, ctx, pd, IBV_QPT_RC, &caps), 0);
	NOSUP_PTR(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, 0,
				    IBV_ACCESS_LOCAL_WRITE));
	NOSUP_PTR(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1, 0));
	NOSUP_PTR(ibv_alloc_null_mr(pd));
	{
		struct ibv_wq_init_attr a = { .wq_type = IBV_WQT_RQ,
					      .max_wr = 4, .max_sge = 1,
					      .pd = pd, .cq = ep.rcq };

		NOSUP_PTR(ibv_create_wq(ctx, &a));
	}
	{
		struct ibv_rwq_ind_table_init_attr a = { 0 };

		NOSUP_PTR(ibv_create_rwq_ind_table(ctx, &a));
	}
	{
		struct ibv_counters_init_attr a = { 0 };

		NOSUP_PTR(ibv_create_counters(ctx, &a));
	}
	{
		struct ibv_flow_attr a = { .size = sizeof(a), .port = 1 };

		NOSUP_PTR(ibv_create_flow(ep.qp, &a));
	}
	{
		struct ibv_flow_action_esp_attr a = { 0 };

		NOSUP_PTR(ibv_create_flow_action_esp(ctx, &a));
	}
	{
		struct ibv_qp_rate_limit_attr a = { .rate_limit = 1000 };

		assert_int_equal(ibv_modify_qp_rate_limit(ep.qp, &a),
				 EOPNOTSUPP);
	}
	{
		struct ibv_modify_cq_attr a = {
			.attr_mask = IBV_CQ_ATTR_MODERATE,
			.moderate = { .cq_count = 4, .cq_period = 10 },
		};

		assert_int_equal(ibv_modify_cq(ep.scq, &a), EOPNOTSUPP);
	}
	{
		struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };

		assert_int_equal(ibv_query_rt_values_ex(ctx, &v), EOPNOTSUPP);
	}
	{
		struct ibv_ece e = { 0 };

		assert_int_equal(ibv_query_ece(ep.qp, &e), EOPNOTSUPP);
		assert_int_equal(ibv_set_ece(ep.qp, &e), EOPNOTSUPP);
	}
	/* importing is supported (test_import): what is not a context's
	 * cmd_fd, or names no such object, is refused */
	errno = 0;
	assert_null(ibv_import_device(0));
	assert_int_equal(errno, EINVAL);
	assert_null(ibv_import_pd(ctx, 1));
	assert_int_equal(errno, EINVAL);
	assert_null(ibv_import_mr(pd, 1));
	assert_int_equal(errno, EINVAL);
	assert_null(ibv_import_dm(ctx, 1));
	assert_int_equal(errno, EINVAL);
	/* the context still works */
	{
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf),
					       IBV_ACCESS_LOCAL_WRITE);

		assert_non_null(mr);
		assert_int_equal(ibv_dereg_mr(mr), 0);
	}
	vu_ep_destroy(&ep);
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
		cmocka_unit_test(test_rereg_access),
		cmocka_unit_test(test_rereg_pd),
		cmocka_unit_test(test_rereg_translation),
		cmocka_unit_test(test_rereg_combined),
		cmocka_unit_test(test_data_in_order),
		cmocka_unit_test(test_pd_hugetlb),
		cmocka_unit_test(test_unsupported),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
