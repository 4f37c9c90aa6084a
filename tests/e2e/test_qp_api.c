// SPDX-License-Identifier: MIT
/*
 * API-level tests of QPs, SRQs and AHs through the standard verbs API:
 * creation with capabilities, the state machine as ibv_modify_qp sees it,
 * what ibv_post_send / ibv_post_recv / ibv_post_srq_recv refuse (and the
 * *bad_wr they name), full queues, SRQ limits, AHs, and ibv_init_ah_from_wc
 * on hand-built GRH buffers.
 *
 * Nothing here depends on the engine executing anything: send WRs that are
 * accepted are posted to QPs in SQD (queued, not started) and receive WRs to
 * queues that no one sends to, so "full" is exact, not timing.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <infiniband/verbs.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static struct ibv_device **g_list;
static struct ibv_context *g_ctx;
static struct ibv_pd *g_pd;
static struct ibv_cq *g_cq;
static struct ibv_device_attr g_attr;
static union ibv_gid g_gid0;

/* ---- helpers ---- */

static struct ibv_qp *make_qp(enum ibv_qp_type type, uint32_t send_wr,
			      uint32_t recv_wr, uint32_t send_sge,
			      uint32_t recv_sge, uint32_t inl,
			      struct ibv_srq *srq)
{
	struct ibv_qp_init_attr a = {
		.send_cq = g_cq,
		.recv_cq = g_cq,
		.srq = srq,
		.cap = { send_wr, recv_wr, send_sge, recv_sge, inl },
		.qp_type = type,
	};
	struct ibv_qp *qp = ibv_create_qp(g_pd, &a);

	assert_non_null(qp);
	return qp;
}

/* Creation must fail with exactly this errno. */
static void create_refused(struct ibv_qp_init_attr_ex *a, int err)
{
	struct ibv_qp *qp;

	errno = 0;
	qp = ibv_create_qp_ex(g_ctx, a);
	if (qp)
		ibv_destroy_qp(qp);
	assert_null(qp);
	assert_int_equal(errno, err);
}

static struct ibv_qp_init_attr_ex init_ex(enum ibv_qp_type type)
{
	struct ibv_qp_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.send_cq = g_cq;
	a.recv_cq = g_cq;
	a.cap.max_send_wr = 4;
	a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	a.qp_type = type;
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = g_pd;
	return a;
}

static void to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = 0x11111111;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_READ;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	assert_int_equal(ibv_modify_qp(qp, &a, mask), 0);
	assert_int_equal(qp->state, IBV_QPS_INIT);
}

/* INIT -> RTR, connected to itself (RC, UC). */
static void to_rtr(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	int mask = IBV_QP_STATE;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (qp->qp_type != IBV_QPT_UD) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = qp->qp_num;
		a.rq_psn = 0x123;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = g_gid0;
		a.ah_attr.grh.sgid_index = 0;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN;
		if (qp->qp_type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = 1;
			a.min_rnr_timer = 12;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC |
				IBV_QP_MIN_RNR_TIMER;
		}
	}
	assert_int_equal(ibv_modify_qp(qp, &a, mask), 0);
	assert_int_equal(qp->state, IBV_QPS_RTR);
}

static void to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x123;
	if (qp->qp_type == IBV_QPT_RC) {
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	}
	assert_int_equal(ibv_modify_qp(qp, &a, mask), 0);
	assert_int_equal(qp->state, IBV_QPS_RTS);
}

/* RTS -> SQD: send WRs are accepted and queued, none is started. */
static void to_sqd(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_SQD;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	assert_int_equal(qp->state, IBV_QPS_SQD);
}

static void to_state(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = s;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	assert_int_equal(qp->state, s);
}

static struct ibv_qp *make_sqd_qp(enum ibv_qp_type type, uint32_t send_wr,
				  uint32_t send_sge, uint32_t inl)
{
	struct ibv_qp *qp = make_qp(type, send_wr, 4, send_sge, 1, inl, NULL);

	to_init(qp);
	to_rtr(qp);
	to_rts(qp);
	to_sqd(qp);
	return qp;
}

static struct ibv_ah *make_ah(void)
{
	struct ibv_ah_attr a;
	struct ibv_ah *ah;

	memset(&a, 0, sizeof(a));
	a.is_global = 1;
	a.grh.dgid = g_gid0;
	a.grh.hop_limit = 64;
	a.port_num = 1;
	ah = ibv_create_ah(g_pd, &a);
	assert_non_null(ah);
	return ah;
}

/* A send WR of opcode with sge[0..n) (lengths len, no lkey needed: never
 * executed). */
static void send_wr(struct ibv_send_wr *wr, struct ibv_sge *sge, int n,
		    enum ibv_wr_opcode op, uint64_t wr_id)
{
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = wr_id;
	wr->sg_list = sge;
	wr->num_sge = n;
	wr->opcode = op;
	wr->send_flags = IBV_SEND_SIGNALED;
}

static int post_send1(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;
	int ret = ibv_post_send(qp, wr, &bad);

	if (ret)
		assert_ptr_equal(bad, wr);
	else
		assert_null(bad);
	return ret;
}

static int post_recv1(struct ibv_qp *qp, struct ibv_recv_wr *wr)
{
	struct ibv_recv_wr *bad = NULL;
	int ret = ibv_post_recv(qp, wr, &bad);

	if (ret)
		assert_ptr_equal(bad, wr);
	else
		assert_null(bad);
	return ret;
}

/* ---- fixtures ---- */

#define WATCHDOG_S 20

static void watchdog_fired(int sig)
{
	static const char msg[] = "test_qp_api: watchdog: a verb hung\n";

	(void)sig;
	fflush(stdout);
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(2);
	_exit(1);
}

static int watchdog_arm(void **state)
{
	(void)state;
	alarm(WATCHDOG_S);
	return 0;
}

static int watchdog_disarm(void **state)
{
	(void)state;
	alarm(0);
	return 0;
}

static int group_setup(void **state)
{
	(void)state;
	signal(SIGALRM, watchdog_fired);
	g_list = ibv_get_device_list(NULL);
	if (!g_list || !g_list[0])
		return -1;
	g_ctx = ibv_open_device(g_list[0]);
	if (!g_ctx)
		return -1;
	if (ibv_query_device(g_ctx, &g_attr) ||
	    ibv_query_gid(g_ctx, 1, 0, &g_gid0))
		return -1;
	g_pd = ibv_alloc_pd(g_ctx);
	g_cq = g_pd ? ibv_create_cq(g_ctx, 1024, NULL, NULL, 0) : NULL;
	return g_cq ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	if (g_cq)
		ibv_destroy_cq(g_cq);
	if (g_pd)
		ibv_dealloc_pd(g_pd);
	if (g_ctx)
		ibv_close_device(g_ctx);
	if (g_list)
		ibv_free_device_list(g_list);
	return 0;
}

/* ---- tests ---- */

static void test_device_caps(void **state)
{
	(void)state;
	assert_true(g_attr.max_qp >= 1024);
	assert_true(g_attr.max_qp_wr >= 1024);
	assert_true(g_attr.max_sge >= 16);
	assert_true(g_attr.max_sge_rd >= 1);
	assert_true(g_attr.max_srq >= 64);
	assert_true(g_attr.max_srq_wr >= 1024);
	assert_true(g_attr.max_srq_sge >= 16);
	assert_true(g_attr.max_ah >= 1024);
	assert_true(g_attr.max_qp_rd_atom >= 1);
	assert_true(g_attr.max_qp_init_rd_atom >= 1);
	assert_int_equal(g_attr.atomic_cap, IBV_ATOMIC_HCA);
	/* SRQs resize (ibv_modify_srq with IBV_SRQ_MAX_WR: test_srq_resize) */
	assert_true(g_attr.device_cap_flags & IBV_DEVICE_SRQ_RESIZE);
}

static void test_create_query_destroy(void **state)
{
	static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC,
						  IBV_QPT_UD };

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(types); i++) {
		struct ibv_qp_init_attr a = {
			.qp_context = (void *)0x1234,
			.send_cq = g_cq,
			.recv_cq = g_cq,
			.cap = { 10, 20, 2, 3, 64 },
			.qp_type = types[i],
			.sq_sig_all = 1,
		};
		struct ibv_qp_init_attr qi;
		struct ibv_qp_attr qa;
		struct ibv_qp *qp = ibv_create_qp(g_pd, &a);

		assert_non_null(qp);
		assert_true(qp->qp_num > 1 && qp->qp_num <= 0xffffff);
		assert_int_equal(qp->state, IBV_QPS_RESET);
		assert_int_equal(qp->qp_type, types[i]);
		assert_ptr_equal(qp->context, g_ctx);
		assert_ptr_equal(qp->pd, g_pd);
		assert_ptr_equal(qp->send_cq, g_cq);
		assert_ptr_equal(qp->recv_cq, g_cq);
		assert_null(qp->srq);
		assert_ptr_equal(qp->qp_context, (void *)0x1234);
		/* the real capacities, at least what was asked */
		assert_true(a.cap.max_send_wr >= 10);
		assert_true(a.cap.max_recv_wr >= 20);
		assert_true(a.cap.max_send_sge >= 2);
		assert_true(a.cap.max_recv_sge >= 3);
		assert_true(a.cap.max_inline_data >= 64);
		/* not created with ibv_wr_* ops */
		assert_null(ibv_qp_to_qp_ex(qp));

		memset(&qa, 0xa5, sizeof(qa));
		memset(&qi, 0xa5, sizeof(qi));
		assert_int_equal(ibv_query_qp(qp, &qa, IBV_QP_STATE | IBV_QP_CAP,
					      &qi), 0);
		assert_int_equal(qa.qp_state, IBV_QPS_RESET);
		assert_int_equal(qa.cap.max_send_wr, a.cap.max_send_wr);
		assert_int_equal(qa.cap.max_recv_wr, a.cap.max_recv_wr);
		assert_int_equal(qa.cap.max_send_sge, a.cap.max_send_sge);
		assert_int_equal(qa.cap.max_recv_sge, a.cap.max_recv_sge);
		assert_int_equal(qa.cap.max_inline_data, a.cap.max_inline_data);
		assert_memory_equal(&qi.cap, &a.cap, sizeof(a.cap));
		assert_int_equal(qi.qp_type, types[i]);
		assert_int_equal(qi.sq_sig_all, 1);
		assert_ptr_equal(qi.send_cq, g_cq);
		assert_ptr_equal(qi.recv_cq, g_cq);
		assert_ptr_equal(qi.qp_context, (void *)0x1234);
		assert_null(qi.srq);
		assert_int_equal(ibv_destroy_qp(qp), 0);
	}
}

static void test_create_ex(void **state)
{
	struct ibv_qp_init_attr_ex a = init_ex(IBV_QPT_RC);
	struct ibv_qp_ex *qpx;
	struct ibv_qp *qp;

	(void)state;
	/* PD only: the plain path */
	qp = ibv_create_qp_ex(g_ctx, &a);
	assert_non_null(qp);
	assert_null(ibv_qp_to_qp_ex(qp));
	assert_int_equal(ibv_destroy_qp(qp), 0);

	/* with send ops: an ibv_qp_ex */
	a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
			   IBV_QP_EX_WITH_RDMA_READ;
	qp = ibv_create_qp_ex(g_ctx, &a);
	assert_non_null(qp);
	qpx = ibv_qp_to_qp_ex(qp);
	assert_non_null(qpx);
	assert_ptr_equal(&qpx->qp_base, qp);
	assert_non_null(qpx->wr_start);
	assert_non_null(qpx->wr_complete);
	assert_int_equal(qp->state, IBV_QPS_RESET);
	assert_int_equal(ibv_destroy_qp(qp), 0);

	/* zero create flags are fine */
	a = init_ex(IBV_QPT_UD);
	a.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
	qp = ibv_create_qp_ex(g_ctx, &a);
	assert_non_null(qp);
	assert_int_equal(ibv_destroy_qp(qp), 0);
}

static void test_create_refused(void **state)
{
	struct ibv_qp_init_attr_ex a;

	(void)state;
	/* XRC_RECV needs a domain, XRC_SEND takes no SRQ (test_xrc has the
	 * rest) */
	a = init_ex(IBV_QPT_XRC_RECV);
	create_refused(&a, EINVAL);
	{
		struct ibv_srq_init_attr sa = { .attr = { 4, 1, 0 } };
		struct ibv_srq *srq = ibv_create_srq(g_pd, &sa);

		assert_non_null(srq);
		a = init_ex(IBV_QPT_XRC_SEND);
		a.srq = srq;
		create_refused(&a, EINVAL);
		assert_int_equal(ibv_destroy_srq(srq), 0);
	}
	a = init_ex(IBV_QPT_RAW_PACKET);
	create_refused(&a, EOPNOTSUPP);
	a = init_ex((enum ibv_qp_type)77);
	create_refused(&a, EINVAL);
	a = init_ex(IBV_QPT_RC);
	a.send_cq = NULL;
	create_refused(&a, EINVAL);
	a = init_ex(IBV_QPT_RC);
	a.recv_cq = NULL;
	create_refused(&a, EINVAL);
	a = init_ex(IBV_QPT_RC);
	a.cap.max_send_wr = (uint32_t)g_attr.max_qp_wr + 1;
	create_refused(&a, EINVAL);
	a = init_ex(IBV_QPT_RC);
	a.cap.max_recv_sge = (uint32_t)g_attr.max_sge + 1;
	create_refused(&a, EINVAL);
	a = init_ex(IBV_QPT_RC);
	a.cap.max_inline_data = 1u << 20;
	create_refused(&a, EINVAL);
	/* creation flags: none offered */
	a = init_ex(IBV_QPT_UD);
	a.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
	a.create_flags = IBV_QP_CREATE_SOURCE_QPN;
	create_refused(&a, EOPNOTSUPP);
	/* send ops the type cannot do */
	a = init_ex(IBV_QPT_UD);
	a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
	create_refused(&a, EOPNOTSUPP);
	a = init_ex(IBV_QPT_UC);
	a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	a.send_ops_flags = IBV_QP_EX_WITH_RDMA_READ;
	create_refused(&a, EOPNOTSUPP);
	/* an init-attr bit the library does not know */
	a = init_ex(IBV_QPT_RC);
	a.comp_mask |= 1u << 20;
	create_refused(&a, EINVAL);
	/* known, not offered */
	a = init_ex(IBV_QPT_RC);
	a.comp_mask |= IBV_QP_INIT_ATTR_MAX_TSO_HEADER;
	create_refused(&a, EOPNOTSUPP);
}

static void test_modify_rc(void **state)
{
	struct ibv_qp *qp = make_qp(IBV_QPT_RC, 4, 4, 1, 1, 0, NULL);
	struct ibv_qp_init_attr qi;
	struct ibv_qp_attr a;

	(void)state;
	/* RESET -> RTS is not a transition */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL);
	assert_int_equal(qp->state, IBV_QPS_RESET);
	/* RESET -> INIT without the required attributes */
	a.qp_state = IBV_QPS_INIT;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL);
	/* a QKEY is not an RC attribute */
	a.port_num = 1;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE |
					       IBV_QP_PKEY_INDEX |
					       IBV_QP_PORT |
					       IBV_QP_ACCESS_FLAGS |
					       IBV_QP_QKEY),
			 EINVAL);
	/* no such port */
	a.port_num = 2;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE |
					       IBV_QP_PKEY_INDEX |
					       IBV_QP_PORT |
					       IBV_QP_ACCESS_FLAGS),
			 EINVAL);
	assert_int_equal(qp->state, IBV_QPS_RESET);
	to_init(qp);

	/* INIT -> RTR without the address vector */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PATH_MTU |
					       IBV_QP_DEST_QPN |
					       IBV_QP_RQ_PSN |
					       IBV_QP_MAX_DEST_RD_ATOMIC |
					       IBV_QP_MIN_RNR_TIMER),
			 EINVAL);
	assert_int_equal(qp->state, IBV_QPS_INIT);
	to_rtr(qp);

	memset(&a, 0, sizeof(a));
	assert_int_equal(ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV |
						  IBV_QP_DEST_QPN |
						  IBV_QP_PATH_MTU,
				      &qi), 0);
	assert_int_equal(a.qp_state, IBV_QPS_RTR);
	assert_int_equal(a.dest_qp_num, qp->qp_num);
	assert_int_equal(a.path_mtu, IBV_MTU_1024);
	assert_int_equal(a.rq_psn, 0x123);
	assert_int_equal(a.ah_attr.is_global, 1);
	assert_int_equal(a.ah_attr.port_num, 1);
	assert_int_equal(a.ah_attr.grh.hop_limit, 64);
	assert_memory_equal(a.ah_attr.grh.dgid.raw, g_gid0.raw, 16);
	assert_int_equal(a.max_dest_rd_atomic, 1);
	assert_int_equal(a.min_rnr_timer, 12);

	to_rts(qp);
	memset(&a, 0, sizeof(a));
	assert_int_equal(ibv_query_qp(qp, &a, IBV_QP_STATE, &qi), 0);
	assert_int_equal(a.qp_state, IBV_QPS_RTS);
	assert_int_equal(a.sq_psn, 0x123);
	assert_int_equal(a.timeout, 14);
	assert_int_equal(a.retry_cnt, 7);
	assert_int_equal(a.rnr_retry, 7);
	assert_int_equal(a.max_rd_atomic, 1);

	/* RTS -> RTS: an optional attribute in place */
	memset(&a, 0, sizeof(a));
	a.min_rnr_timer = 20;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_MIN_RNR_TIMER), 0);
	/* ... but not a required-only one */
	a.dest_qp_num = 5;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_DEST_QPN), EINVAL);
	/* cur_qp_state must be the state the QP is in */
	a.qp_state = IBV_QPS_ERR;
	a.cur_qp_state = IBV_QPS_INIT;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE |
					       IBV_QP_CUR_STATE),
			 EINVAL);
	assert_int_equal(qp->state, IBV_QPS_RTS);

	to_sqd(qp);
	to_state(qp, IBV_QPS_ERR);
	to_state(qp, IBV_QPS_RESET);
	/* and around again */
	to_init(qp);
	to_rtr(qp);
	to_rts(qp);
	assert_int_equal(ibv_destroy_qp(qp), 0);
}

static void test_modify_ud(void **state)
{
	struct ibv_qp *qp = make_qp(IBV_QPT_UD, 4, 4, 1, 1, 0, NULL);
	struct ibv_qp_init_attr qi;
	struct ibv_qp_attr a;

	(void)state;
	/* UD needs its Q_Key into INIT, and no access flags */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE |
					       IBV_QP_PKEY_INDEX |
					       IBV_QP_PORT),
			 EINVAL);
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE |
					       IBV_QP_PKEY_INDEX |
					       IBV_QP_PORT | IBV_QP_QKEY |
					       IBV_QP_ACCESS_FLAGS),
			 EINVAL);
	to_init(qp);
	to_rtr(qp);
	to_rts(qp);
	memset(&a, 0, sizeof(a));
	assert_int_equal(ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_QKEY, &qi),
			 0);
	assert_int_equal(a.qp_state, IBV_QPS_RTS);
	assert_int_equal(a.qkey, 0x11111111);
	assert_int_equal(ibv_destroy_qp(qp), 0);
}

static void test_post_refused_by_state(void **state)
{
	struct ibv_qp *qp = make_qp(IBV_QPT_RC, 4, 4, 1, 1, 0, NULL);
	struct ibv_send_wr swr;
	struct ibv_recv_wr rwr;

	(void)state;
	send_wr(&swr, NULL, 0, IBV_WR_SEND, 1);
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 2;

	/* RESET: neither */
	assert_int_equal(post_send1(qp, &swr), EINVAL);
	assert_int_equal(post_recv1(qp, &rwr), EINVAL);
	/* INIT: receives only */
	to_init(qp);
	assert_int_equal(post_send1(qp, &swr), EINVAL);
	assert_int_equal(post_recv1(qp, &rwr), 0);
	/* RTR: receives only */
	to_rtr(qp);
	assert_int_equal(post_send1(qp, &swr), EINVAL);
	assert_int_equal(post_recv1(qp, &rwr), 0);
	/* SQD: both (sends queued) */
	to_rts(qp);
	to_sqd(qp);
	assert_int_equal(post_send1(qp, &swr), 0);
	assert_int_equal(post_recv1(qp, &rwr), 0);
	/* back in RESET, refused again */
	to_state(qp, IBV_QPS_RESET);
	assert_int_equal(post_send1(qp, &swr), EINVAL);
	assert_int_equal(post_recv1(qp, &rwr), EINVAL);
	assert_int_equal(ibv_destroy_qp(qp), 0);
}

static void test_send_queue_full(void **state)
{
	struct ibv_send_wr wr[64], *bad;
	struct ibv_qp *qp;
	uint32_t cap;
	int n;

	(void)state;
	qp = make_sqd_qp(IBV_QPT_RC, 4, 1, 0);
	{
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr qi;

		assert_int_equal(ibv_query_qp(qp, &a, IBV_QP_CAP, &qi), 0);
		cap = qi.cap.max_send_wr;
	}
	assert_true(cap >= 4 && cap < ARRAY_SIZE(wr));
	n = (int)cap + 2;
	for (int i = 0; i < n; i++) {
		send_wr(&wr[i], NULL, 0, IBV_WR_RDMA_WRITE, (uint64_t)i);
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	/* one list: cap WRs go in, the next is the bad one */
	bad = NULL;
	assert_int_equal(ibv_post_send(qp, &wr[0], &bad), ENOMEM);
	assert_ptr_equal(bad, &wr[cap]);
	/* and the queue stays full */
	wr[cap].next = NULL;
	assert_int_equal(post_send1(qp, &wr[cap]), ENOMEM);
	assert_int_equal(ibv_destroy_qp(qp), 0);

	/* a bad WR in the middle: the ones before it stay posted */
	qp = make_sqd_qp(IBV_QPT_RC, 4, 1, 0);
	for (int i = 0; i < 3; i++) {
		send_wr(&wr[i], NULL, 0, IBV_WR_SEND, (uint64_t)i);
		wr[i].next = i + 1 < 3 ? &wr[i + 1] : NULL;
	}
	wr[1].opcode = (enum ibv_wr_opcode)99;
	bad = NULL;
	assert_int_equal(ibv_post_send(qp, &wr[0], &bad), EINVAL);
	assert_ptr_equal(bad, &wr[1]);
	/* cap - 1 more fit, then the queue is full */
	for (uint32_t i = 0; i + 1 < cap; i++) {
		send_wr(&wr[0], NULL, 0, IBV_WR_SEND, 100 + i);
		assert_int_equal(post_send1(qp, &wr[0]), 0);
	}
	send_wr(&wr[0], NULL, 0, IBV_WR_SEND, 200);
	assert_int_equal(post_send1(qp, &wr[0]), ENOMEM);
	assert_int_equal(ibv_destroy_qp(qp), 0);
}

static void test_recv_queue_full(void **state)
{
	struct ibv_qp *qp = make_qp(IBV_QPT_UD, 4, 8, 1, 2, 0, NULL);
	struct ibv_qp_init_attr qi;
	struct ibv_qp_attr a;
	struct ibv_recv_wr wr[64], *bad;
	struct ibv_sge sge[4];
	char buf[64];
	uint32_t cap;
	int n;

	(void)state;
	assert_int_equal(ibv_query_qp(qp, &a, IBV_QP_CAP, &qi), 0);
	cap = qi.cap.max_recv_wr;
	assert_true(cap >= 8 && cap + 2 < ARRAY_SIZE(wr));
	to_init(qp);
	for (size_t i = 0; i < ARRAY_SIZE(sge); i++)
		sge[i] = (struct ibv_sge){ (uintptr_t)buf, sizeof(buf), 0 };
	/* too many SGEs */
	memset(&wr[0], 0, sizeof(wr[0]));
	wr[0].sg_list = sge;
	wr[0].num_sge = (int)qi.cap.max_recv_sge + 1;
	assert_int_equal(post_recv1(qp, &wr[0]), EINVAL);
	/* fill it in one list */
	n = (int)cap + 2;
	for (int i = 0; i < n; i++) {
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].wr_id = (uint64_t)i;
		wr[i].sg_list = sge;
		wr[i].num_sge = 1;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	bad = NULL;
	assert_int_equal(ibv_post_recv(qp, &wr[0], &bad), ENOMEM);
	assert_ptr_equal(bad, &wr[cap]);
	assert_int_equal(ibv_destroy_qp(qp), 0);
}

static void test_post_send_refused(void **state)
{
	struct ibv_qp *rc = make_sqd_qp(IBV_QPT_RC, 4, 2, 32);
	struct ibv_qp *uc = make_sqd_qp(IBV_QPT_UC, 4, 2, 32);
	struct ibv_qp *ud = make_sqd_qp(IBV_QPT_UD, 4, 2, 32);
	struct ibv_qp_init_attr qi;
	struct ibv_qp_attr a;
	struct ibv_send_wr wr;
	struct ibv_sge sge[40];
	static char buf[4096];
	struct ibv_ah *ah = make_ah();
	uint32_t max_sge, max_inl;

	(void)state;
	assert_int_equal(ibv_query_qp(rc, &a, IBV_QP_CAP, &qi), 0);
	max_sge = qi.cap.max_send_sge;
	max_inl = qi.cap.max_inline_data;
	assert_true(max_sge + 1 <= ARRAY_SIZE(sge));
	assert_true(max_inl + 1 <= sizeof(buf));
	for (size_t i = 0; i < ARRAY_SIZE(sge); i++)
		sge[i] = (struct ibv_sge){ (uintptr_t)buf, 1, 0 };

	/* opcodes the QP type cannot do */
	send_wr(&wr, NULL, 0, IBV_WR_RDMA_READ, 1);
	assert_int_equal(post_send1(uc, &wr), EINVAL);
	assert_int_equal(post_send1(ud, &wr), EINVAL);
	send_wr(&wr, NULL, 0, IBV_WR_ATOMIC_FETCH_AND_ADD, 1);
	assert_int_equal(post_send1(uc, &wr), EINVAL);
	send_wr(&wr, NULL, 0, IBV_WR_RDMA_WRITE, 1);
	assert_int_equal(post_send1(ud, &wr), EINVAL);
	send_wr(&wr, NULL, 0, (enum ibv_wr_opcode)99, 1);
	assert_int_equal(post_send1(rc, &wr), EINVAL);
	/* unknown send flags */
	send_wr(&wr, NULL, 0, IBV_WR_SEND, 1);
	wr.send_flags |= 1u << 20;
	assert_int_equal(post_send1(rc, &wr), EINVAL);
	/* too many SGEs */
	send_wr(&wr, sge, (int)max_sge + 1, IBV_WR_SEND, 1);
	assert_int_equal(post_send1(rc, &wr), EINVAL);
	send_wr(&wr, sge, -1, IBV_WR_SEND, 1);
	assert_int_equal(post_send1(rc, &wr), EINVAL);
	/* too much inline data, in one SGE or spread over several */
	sge[0].length = max_inl + 1;
	send_wr(&wr, sge, 1, IBV_WR_SEND, 1);
	wr.send_flags |= IBV_SEND_INLINE;
	assert_int_equal(post_send1(rc, &wr), EINVAL);
	sge[0].length = max_inl;
	sge[1].length = 1;
	send_wr(&wr, sge, 2, IBV_WR_RDMA_WRITE, 1);
	wr.send_flags |= IBV_SEND_INLINE;
	assert_int_equal(post_send1(uc, &wr), EINVAL);
	/* exactly max_inline is fine, and inline ignores max_sge */
	send_wr(&wr, sge, 1, IBV_WR_SEND, 1);
	wr.send_flags |= IBV_SEND_INLINE;
	assert_int_equal(post_send1(rc, &wr), 0);
	sge[0].length = 1;
	send_wr(&wr, sge, (int)max_sge + 1, IBV_WR_SEND, 1);
	wr.send_flags |= IBV_SEND_INLINE;
	assert_int_equal(post_send1(rc, &wr), 0);
	/* UD needs an AH */
	send_wr(&wr, sge, 1, IBV_WR_SEND, 1);
	assert_int_equal(post_send1(ud, &wr), EINVAL);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = ud->qp_num;
	wr.wr.ud.remote_qkey = 0x11111111;
	assert_int_equal(post_send1(ud, &wr), 0);
	send_wr(&wr, sge, 1, IBV_WR_SEND_WITH_IMM, 1);
	wr.imm_data = htobe32(7);
	wr.wr.ud.ah = ah;
	assert_int_equal(post_send1(ud, &wr), 0);
	/* what RC and UC may do */
	send_wr(&wr, sge, 2, IBV_WR_RDMA_WRITE_WITH_IMM, 1);
	assert_int_equal(post_send1(uc, &wr), 0);
	send_wr(&wr, sge, 1, IBV_WR_ATOMIC_CMP_AND_SWP, 1);
	sge[0].length = 8;
	assert_int_equal(post_send1(rc, &wr), 0);

	assert_int_equal(ibv_destroy_qp(rc), 0);
	assert_int_equal(ibv_destroy_qp(uc), 0);
	assert_int_equal(ibv_destroy_qp(ud), 0);
	assert_int_equal(ibv_destroy_ah(ah), 0);
}

static void test_srq(void **state)
{
	struct ibv_srq_init_attr sa = { .attr = { 16, 2, 99 } };
	struct ibv_srq_init_attr_ex sx;
	struct ibv_srq_attr q;
	struct ibv_recv_wr wr[64], *bad;
	struct ibv_sge sge = { 0, 0, 0 };
	struct ibv_srq *srq, *s2;
	struct ibv_qp *qp;
	struct ibv_qp_init_attr qi;
	struct ibv_qp_attr qa;
	uint32_t num = 0, max_wr;
	int n;

	(void)state;
	sa.srq_context = (void *)0x55;
	srq = ibv_create_srq(g_pd, &sa);
	assert_non_null(srq);
	assert_ptr_equal(srq->context, g_ctx);
	assert_ptr_equal(srq->pd, g_pd);
	assert_ptr_equal(srq->srq_context, (void *)0x55);
	assert_true(sa.attr.max_wr >= 16);
	assert_true(sa.attr.max_sge >= 2);
	max_wr = sa.attr.max_wr;
	assert_true(max_wr + 2 < ARRAY_SIZE(wr));

	/* srq_limit is not an input of create */
	memset(&q, 0xff, sizeof(q));
	assert_int_equal(ibv_query_srq(srq, &q), 0);
	assert_int_equal(q.max_wr, max_wr);
	assert_int_equal(q.max_sge, sa.attr.max_sge);
	assert_int_equal(q.srq_limit, 0);

	/* arm the limit */
	q.srq_limit = 4;
	assert_int_equal(ibv_modify_srq(srq, &q, IBV_SRQ_LIMIT), 0);
	memset(&q, 0, sizeof(q));
	assert_int_equal(ibv_query_srq(srq, &q), 0);
	assert_int_equal(q.srq_limit, 4);
	/* beyond max_wr, a resize below the armed limit, unknown bits
	 * (resizes: test_srq_resize) */
	q.srq_limit = max_wr + 1;
	assert_int_equal(ibv_modify_srq(srq, &q, IBV_SRQ_LIMIT), EINVAL);
	q.max_wr = 3;
	assert_int_equal(ibv_modify_srq(srq, &q, IBV_SRQ_MAX_WR), EINVAL);
	assert_int_equal(ibv_modify_srq(srq, &q, 1 << 5), EINVAL);
	assert_int_equal(ibv_get_srq_num(srq, &num), 0);

	/* a QP on the SRQ: no receive queue of its own */
	qp = make_qp(IBV_QPT_RC, 4, 4, 1, 1, 0, srq);
	assert_ptr_equal(qp->srq, srq);
	assert_int_equal(ibv_query_qp(qp, &qa, IBV_QP_CAP, &qi), 0);
	assert_int_equal(qi.cap.max_recv_wr, 0);
	assert_ptr_equal(qi.srq, srq);
	to_init(qp);
	memset(&wr[0], 0, sizeof(wr[0]));
	assert_int_equal(post_recv1(qp, &wr[0]), EINVAL);
	/* the SRQ is busy while a QP uses it */
	assert_int_equal(ibv_destroy_srq(srq), EBUSY);

	/* fill the SRQ: one list, max_wr go in */
	n = (int)max_wr + 2;
	for (int i = 0; i < n; i++) {
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].wr_id = (uint64_t)i;
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	bad = NULL;
	assert_int_equal(ibv_post_srq_recv(srq, &wr[0], &bad), ENOMEM);
	assert_ptr_equal(bad, &wr[max_wr]);
	/* too many SGEs */
	wr[0].next = NULL;
	wr[0].num_sge = (int)sa.attr.max_sge + 1;
	bad = NULL;
	assert_int_equal(ibv_post_srq_recv(srq, &wr[0], &bad), EINVAL);
	assert_ptr_equal(bad, &wr[0]);

	assert_int_equal(ibv_destroy_qp(qp), 0);
	assert_int_equal(ibv_destroy_srq(srq), 0);

	/* the extended call: a basic SRQ; XRC needs a domain and a CQ
	 * (test_xrc) */
	memset(&sx, 0, sizeof(sx));
	sx.attr.max_wr = 8;
	sx.attr.max_sge = 1;
	sx.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	sx.srq_type = IBV_SRQT_BASIC;
	sx.pd = g_pd;
	s2 = ibv_create_srq_ex(g_ctx, &sx);
	assert_non_null(s2);
	assert_int_equal(ibv_destroy_srq(s2), 0);
	sx.srq_type = IBV_SRQT_XRC;
	errno = 0;
	assert_null(ibv_create_srq_ex(g_ctx, &sx));
	assert_int_equal(errno, EINVAL);
	/* TM: needs its limits and a CQ (e2e_test_tm) */
	sx.srq_type = IBV_SRQT_TM;
	errno = 0;
	assert_null(ibv_create_srq_ex(g_ctx, &sx));
	assert_int_equal(errno, EINVAL);
	/* too big */
	sa.attr.max_wr = (uint32_t)g_attr.max_srq_wr + 1;
	sa.attr.max_sge = 1;
	errno = 0;
	assert_null(ibv_create_srq(g_pd, &sa));
	assert_int_equal(errno, EINVAL);
}

/* A QP on an SRQ that goes to ERR reports IBV_EVENT_QP_LAST_WQE_REACHED:
 * the event names the QP, and its ack lets the QP be destroyed. */
static void test_qp_async_event(void **state)
{
	struct ibv_srq_init_attr sa = { .attr = { 8, 1, 0 } };
	struct ibv_async_event ev;
	struct ibv_srq *srq;
	struct ibv_qp *qp;

	(void)state;
	srq = ibv_create_srq(g_pd, &sa);
	assert_non_null(srq);
	qp = make_qp(IBV_QPT_RC, 4, 0, 1, 0, 0, srq);
	to_init(qp);
	to_state(qp, IBV_QPS_ERR);
	/* blocks until the event comes (the watchdog bounds a hang) */
	assert_int_equal(ibv_get_async_event(g_ctx, &ev), 0);
	assert_int_equal(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
	assert_ptr_equal(ev.element.qp, qp);
	ibv_ack_async_event(&ev);
	assert_int_equal(qp->events_completed, 1);
	assert_int_equal(ibv_destroy_qp(qp), 0);
	assert_int_equal(ibv_destroy_srq(srq), 0);
}

static void test_ah(void **state)
{
	struct ibv_ah_attr a;
	struct ibv_ah *ah;

	(void)state;
	ah = make_ah();
	assert_ptr_equal(ah->context, g_ctx);
	assert_ptr_equal(ah->pd, g_pd);
	assert_int_equal(ibv_destroy_ah(ah), 0);
	/* RoCE: no GRH, no address */
	memset(&a, 0, sizeof(a));
	a.port_num = 1;
	errno = 0;
	assert_null(ibv_create_ah(g_pd, &a));
	assert_int_equal(errno, EINVAL);
	/* no such port */
	a.is_global = 1;
	a.grh.dgid = g_gid0;
	a.port_num = 3;
	errno = 0;
	assert_null(ibv_create_ah(g_pd, &a));
	assert_int_equal(errno, EINVAL);
}

/* An IPv4 header in the last 20 bytes of a 40-byte GRH buffer. */
static void build_ipv4_grh(uint8_t *b, const uint8_t saddr[4],
			   const uint8_t daddr[4], uint8_t tos, bool good_sum)
{
	uint8_t *ip = b + 20;
	uint32_t sum = 0;

	memset(b, 0, 40);
	ip[0] = 0x45;
	ip[1] = tos;
	ip[2] = 0;
	ip[3] = 60;  /* total length */
	ip[8] = 64;  /* TTL */
	ip[9] = 17;  /* UDP */
	memcpy(ip + 12, saddr, 4);
	memcpy(ip + 16, daddr, 4);
	for (int i = 0; i < 20; i += 2)
		sum += (uint32_t)ip[i] << 8 | ip[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	sum = ~sum & 0xffff;
	if (!good_sum)
		sum ^= 1;
	ip[10] = (uint8_t)(sum >> 8);
	ip[11] = (uint8_t)sum;
}

static void test_ah_from_wc(void **state)
{
	static const uint8_t peer[4] = { 10, 1, 2, 3 };
	uint8_t buf[40];
	struct ibv_grh *grh = (struct ibv_grh *)buf;
	struct ibv_ah_attr a;
	struct ibv_wc wc;
	struct ibv_ah *ah;
	union ibv_gid want;

	(void)state;
	/* gid 0 is IPv4-mapped: the packet's destination is our address */
	assert_int_equal(g_gid0.raw[10], 0xff);
	assert_int_equal(g_gid0.raw[11], 0xff);
	memset(&want, 0, sizeof(want));
	want.raw[10] = want.raw[11] = 0xff;
	memcpy(&want.raw[12], peer, 4);

	memset(&wc, 0, sizeof(wc));
	wc.wc_flags = IBV_WC_GRH;
	wc.sl = 0;
	wc.src_qp = 0x77;

	/* RoCEv2 over IPv4 */
	build_ipv4_grh(buf, peer, &g_gid0.raw[12], 0x28, true);
	memset(&a, 0xa5, sizeof(a));
	assert_int_equal(ibv_init_ah_from_wc(g_ctx, 1, &wc, grh, &a), 0);
	assert_int_equal(a.is_global, 1);
	assert_memory_equal(a.grh.dgid.raw, want.raw, 16);
	assert_int_equal(a.grh.sgid_index, 0);
	assert_int_equal(a.grh.hop_limit, 0xff);
	assert_int_equal(a.grh.traffic_class, 0x28);
	assert_int_equal(a.grh.flow_label, 0);
	assert_int_equal(a.port_num, 1);
	assert_int_equal(a.dlid, 0);
	ah = ibv_create_ah_from_wc(g_pd, &wc, grh, 1);
	assert_non_null(ah);
	assert_int_equal(ibv_destroy_ah(ah), 0);

	/* an IPv6 GRH (RoCEv2 over IPv6, or IB): the source GID answers */
	memset(buf, 0, sizeof(buf));
	grh->version_tclass_flow = htobe32(6u << 28 | 0x22u << 20 | 0x12345u);
	grh->hop_limit = 3;
	grh->sgid.raw[0] = 0xfe;
	grh->sgid.raw[1] = 0x80;
	grh->sgid.raw[15] = 0x42;
	grh->dgid = g_gid0;
	memset(&a, 0xa5, sizeof(a));
	assert_int_equal(ibv_init_ah_from_wc(g_ctx, 1, &wc, grh, &a), 0);
	assert_int_equal(a.is_global, 1);
	assert_memory_equal(a.grh.dgid.raw, grh->sgid.raw, 16);
	assert_int_equal(a.grh.flow_label, 0x12345);
	assert_int_equal(a.grh.traffic_class, 0x22);
	assert_int_equal(a.grh.hop_limit, 0xff);
	assert_int_equal(a.grh.sgid_index, 0);
	assert_int_equal(a.port_num, 1);
	/* received on a GID we do not have: index 0 */
	grh->dgid.raw[0] = 0x20;
	assert_int_equal(ibv_init_ah_from_wc(g_ctx, 1, &wc, grh, &a), 0);
	assert_int_equal(a.grh.sgid_index, 0);

	/* a bad IPv4 checksum and no IPv6 version: not a header */
	build_ipv4_grh(buf, peer, &g_gid0.raw[12], 0, false);
	errno = 0;
	assert_int_equal(ibv_init_ah_from_wc(g_ctx, 1, &wc, grh, &a), -1);
	assert_int_equal(errno, EINVAL);
	/* RoCE without a GRH */
	wc.wc_flags = 0;
	errno = 0;
	assert_int_equal(ibv_init_ah_from_wc(g_ctx, 1, &wc, grh, &a), -1);
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(ibv_create_ah_from_wc(g_pd, &wc, grh, 1));
	assert_int_equal(errno, EINVAL);
}

static void test_many_qps(void **state)
{
	struct ibv_qp *qp[64];
	uint32_t qpn[64];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(qp); i++) {
		qp[i] = make_qp(i % 3 == 0 ? IBV_QPT_RC :
				i % 3 == 1 ? IBV_QPT_UC : IBV_QPT_UD,
				1, 1, 1, 1, 0, NULL);
		qpn[i] = qp[i]->qp_num;
		for (size_t j = 0; j < i; j++)
			assert_int_not_equal(qpn[i], qpn[j]);
	}
	for (size_t i = 0; i < ARRAY_SIZE(qp); i++)
		assert_int_equal(ibv_destroy_qp(qp[i]), 0);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, watchdog_arm, watchdog_disarm)
	const struct CMUnitTest tests[] = {
		T(test_device_caps),
		T(test_create_query_destroy),
		T(test_create_ex),
		T(test_create_refused),
		T(test_modify_rc),
		T(test_modify_ud),
		T(test_post_refused_by_state),
		T(test_send_queue_full),
		T(test_recv_queue_full),
		T(test_post_send_refused),
		T(test_srq),
		T(test_qp_async_event),
		T(test_ah),
		T(test_ah_from_wc),
		T(test_many_qps),
	};
#undef T
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
