// SPDX-License-Identifier: MIT
/*
 * End-to-end tests of the extended post API (struct ibv_qp_ex, ibv_wr_*) and
 * of extended CQ polling (ibv_start_poll / ibv_next_poll / ibv_end_poll and
 * the ibv_wc_read_* readers), through the standard API only, against a
 * daemon of its own (run under tests/e2e/isolated.sh).
 *
 * Each test gets a fresh pair of RC QPs in this process connected to each
 * other, two extended CQs (sends, receives) and two registered buffers. No
 * test waits for something NOT to happen: "nothing was published" is shown
 * by ordering (a send queue executes in order, so the first completion
 * names the first WQE the device saw). test_poll_threads polls one CQ from
 * two threads with ibv_poll_cq (make check-tsan runs it under
 * ThreadSanitizer).
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
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

#define WATCHDOG_S 20
#define BUF_BYTES (64u * 1024u)
#define GRH_BYTES 40u
#define UD_QKEY 0x11111111u

#define ALL_RC_OPS                                                           \
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |                \
	 IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |    \
	 IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |      \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

#define MR_ACCESS                                                            \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                  \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static struct ibv_device **g_list;
static struct ibv_context *g_ctx;
static struct ibv_pd *g_pd;
static union ibv_gid g_gid;

/* the per-test fixture: an RC pair a <-> b */
static struct {
	struct ibv_cq_ex *scq, *rcq;
	struct ibv_qp *a, *b;
	struct ibv_qp_ex *xa, *xb;
	struct ibv_qp_cap cap;     /* what a really got */
	uint8_t *buf_a, *buf_b;
	struct ibv_mr *mr_a, *mr_b;
} F;

/* one completion as the ibv_wc_read_* readers give it */
struct comp {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t byte_len;
	uint32_t imm;              /* big-endian, as read */
	uint32_t qp_num;
	uint32_t src_qp;
	unsigned int wc_flags;
};

/* ---- watchdog: a lost completion fails the test, it does not hang ---- */

static void watchdog_fired(int sig)
{
	static const char msg[] =
		"test_wr: watchdog: a test did not finish in time "
		"(a completion never came)\n";

	(void)sig;
	fflush(stdout);
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(2);
	_exit(1);
}

/* ---- helpers ---- */

static struct ibv_cq_ex *cq_new(void)
{
	struct ibv_cq_init_attr_ex attr;
	struct ibv_cq_ex *cq;

	memset(&attr, 0, sizeof(attr));
	attr.cqe = 256;
	attr.wc_flags = IBV_WC_STANDARD_FLAGS;
	cq = ibv_create_cq_ex(g_ctx, &attr);
	assert_non_null(cq);
	return cq;
}

static struct ibv_qp *qp_new(enum ibv_qp_type type, uint64_t ops,
			     uint32_t send_wr, uint32_t sge, uint32_t inl,
			     int sig_all, struct ibv_qp_cap *cap)
{
	struct ibv_qp_init_attr_ex attr;
	struct ibv_qp_ex *x;
	struct ibv_qp *qp;

	memset(&attr, 0, sizeof(attr));
	attr.send_cq = ibv_cq_ex_to_cq(F.scq);
	attr.recv_cq = ibv_cq_ex_to_cq(F.rcq);
	attr.qp_type = type;
	attr.sq_sig_all = sig_all;
	attr.cap.max_send_wr = send_wr;
	attr.cap.max_recv_wr = 32;
	attr.cap.max_send_sge = sge;
	attr.cap.max_recv_sge = 4;
	attr.cap.max_inline_data = inl;
	attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	attr.pd = g_pd;
	attr.send_ops_flags = ops;
	qp = ibv_create_qp_ex(g_ctx, &attr);
	if (!qp)
		fail_msg("ibv_create_qp_ex: %s", strerror(errno));
	assert_true(attr.cap.max_send_wr >= send_wr);
	assert_true(attr.cap.max_send_sge >= sge);
	assert_true(attr.cap.max_inline_data >= inl);
	if (cap)
		*cap = attr.cap;
	x = ibv_qp_to_qp_ex(qp);
	assert_non_null(x);
	assert_ptr_equal(&x->qp_base, qp);
	return qp;
}

static void modify(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	int ret = ibv_modify_qp(qp, attr, mask);

	if (ret)
		fail_msg("ibv_modify_qp to %d: %s", attr->qp_state,
			 strerror(ret));
}

/* RESET -> INIT -> RTR -> RTS, talking to dest */
static void rc_connect(struct ibv_qp *qp, uint32_t dest)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;
	modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			       IBV_QP_ACCESS_FLAGS);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = g_gid;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	modify(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			       IBV_QP_MAX_DEST_RD_ATOMIC |
			       IBV_QP_MIN_RNR_TIMER);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	modify(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			       IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			       IBV_QP_MAX_QP_RD_ATOMIC);
}

static void ud_ready(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qkey = UD_QKEY;
	modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			       IBV_QP_QKEY);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	modify(qp, &a, IBV_QP_STATE);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	modify(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

/* a fresh RC pair on the fixture's CQs */
static void rc_pair(uint32_t send_wr, int sig_all, struct ibv_qp **a,
		    struct ibv_qp **b, struct ibv_qp_cap *cap)
{
	*a = qp_new(IBV_QPT_RC, ALL_RC_OPS, send_wr, 4, 128, sig_all, cap);
	*b = qp_new(IBV_QPT_RC, ALL_RC_OPS, send_wr, 4, 128, sig_all, NULL);
	rc_connect(*a, (*b)->qp_num);
	rc_connect(*b, (*a)->qp_num);
}

static void post_recv(struct ibv_qp *qp, uint64_t wr_id, void *addr,
		      uint32_t len, struct ibv_mr *mr)
{
	struct ibv_sge sge = { (uintptr_t)addr, len, mr->lkey };
	struct ibv_recv_wr wr, *bad = NULL;
	int ret;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	ret = ibv_post_recv(qp, &wr, &bad);
	if (ret)
		fail_msg("ibv_post_recv: %s", strerror(ret));
}

static void read_comp(struct ibv_cq_ex *cq, struct comp *c)
{
	c->wr_id = cq->wr_id;
	c->status = cq->status;
	c->opcode = ibv_wc_read_opcode(cq);
	c->byte_len = ibv_wc_read_byte_len(cq);
	c->imm = ibv_wc_read_imm_data(cq);
	c->qp_num = ibv_wc_read_qp_num(cq);
	c->src_qp = ibv_wc_read_src_qp(cq);
	c->wc_flags = ibv_wc_read_wc_flags(cq);
}

/* Wait for n completions, through start_poll / next_poll / end_poll. */
static void poll_n(struct ibv_cq_ex *cq, int n, struct comp *out)
{
	struct ibv_poll_cq_attr pa;
	int got = 0, ret;

	memset(&pa, 0, sizeof(pa));
	while (got < n) {
		ret = ibv_start_poll(cq, &pa);
		if (ret == ENOENT) {
			sched_yield();
			continue;
		}
		assert_int_equal(ret, 0);
		read_comp(cq, &out[got++]);
		ret = 0;
		while (got < n) {
			ret = ibv_next_poll(cq);
			if (ret)
				break;
			read_comp(cq, &out[got++]);
		}
		ibv_end_poll(cq);
		if (ret != ENOENT)
			assert_int_equal(ret, 0);
	}
}

static void poll_one(struct ibv_cq_ex *cq, struct comp *c)
{
	poll_n(cq, 1, c);
}

static void check_comp(const struct comp *c, uint64_t wr_id,
		       enum ibv_wc_opcode opcode, uint32_t qp_num)
{
	if (c->status != IBV_WC_SUCCESS)
		fail_msg("wr_id %llu: status %s", (unsigned long long)c->wr_id,
			 ibv_wc_status_str(c->status));
	assert_int_equal(c->wr_id, wr_id);
	assert_int_equal(c->opcode, opcode);
	assert_int_equal(c->qp_num, qp_num);
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

/* one signaled WQE session: start, builder (by the caller), complete */
static void start(struct ibv_qp_ex *x, uint64_t wr_id, unsigned int flags)
{
	ibv_wr_start(x);
	x->wr_id = wr_id;
	x->wr_flags = flags;
}

static uintptr_t A(size_t off)
{
	return (uintptr_t)(F.buf_a + off);
}

static uintptr_t B(size_t off)
{
	return (uintptr_t)(F.buf_b + off);
}

/* ---- setup ---- */

static int group_setup(void **state)
{
	int n = 0;

	(void)state;
	signal(SIGALRM, watchdog_fired);
	alarm(WATCHDOG_S);
	g_list = ibv_get_device_list(&n);
	if (!g_list || n < 1) {
		fprintf(stderr, "no verbs device (is SOFTVERBS_SOCKET set?)\n");
		return -1;
	}
	g_ctx = ibv_open_device(g_list[0]);
	if (!g_ctx) {
		fprintf(stderr, "ibv_open_device: %s\n", strerror(errno));
		return -1;
	}
	if (ibv_query_gid(g_ctx, 1, 0, &g_gid)) {
		fprintf(stderr, "ibv_query_gid: %s\n", strerror(errno));
		return -1;
	}
	g_pd = ibv_alloc_pd(g_ctx);
	if (!g_pd)
		return -1;
	F.buf_a = aligned_alloc(4096, BUF_BYTES);
	F.buf_b = aligned_alloc(4096, BUF_BYTES);
	if (!F.buf_a || !F.buf_b)
		return -1;
	F.mr_a = ibv_reg_mr(g_pd, F.buf_a, BUF_BYTES, MR_ACCESS);
	F.mr_b = ibv_reg_mr(g_pd, F.buf_b, BUF_BYTES, MR_ACCESS);
	if (!F.mr_a || !F.mr_b)
		return -1;
	alarm(0);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	if (ibv_dereg_mr(F.mr_a) || ibv_dereg_mr(F.mr_b))
		return -1;
	free(F.buf_a);
	free(F.buf_b);
	if (ibv_dealloc_pd(g_pd) || ibv_close_device(g_ctx))
		return -1;
	ibv_free_device_list(g_list);
	return 0;
}

static int test_setup(void **state)
{
	(void)state;
	alarm(WATCHDOG_S);
	memset(F.buf_a, 0, BUF_BYTES);
	memset(F.buf_b, 0, BUF_BYTES);
	F.scq = cq_new();
	F.rcq = cq_new();
	rc_pair(16, 0, &F.a, &F.b, &F.cap);
	F.xa = ibv_qp_to_qp_ex(F.a);
	F.xb = ibv_qp_to_qp_ex(F.b);
	return 0;
}

static int test_teardown(void **state)
{
	int bad = 0;

	(void)state;
	bad |= ibv_destroy_qp(F.a);
	bad |= ibv_destroy_qp(F.b);
	bad |= ibv_destroy_cq(ibv_cq_ex_to_cq(F.scq));
	bad |= ibv_destroy_cq(ibv_cq_ex_to_cq(F.rcq));
	alarm(0);
	return bad ? -1 : 0;
}

/* ---- RC: sends ---- */

static void test_send(void **state)
{
	struct comp c;

	(void)state;
	/* send */
	fill(F.buf_a, 200, 1);
	post_recv(F.b, 100, F.buf_b, 256, F.mr_b);
	start(F.xa, 1, IBV_SEND_SIGNALED);
	ibv_wr_send(F.xa);
	ibv_wr_set_sge(F.xa, F.mr_a->lkey, A(0), 200);
	assert_int_equal(ibv_wr_complete(F.xa), 0);
	poll_one(F.scq, &c);
	check_comp(&c, 1, IBV_WC_SEND, F.a->qp_num);
	poll_one(F.rcq, &c);
	check_comp(&c, 100, IBV_WC_RECV, F.b->qp_num);
	assert_int_equal(c.byte_len, 200);
	assert_false(c.wc_flags & IBV_WC_WITH_IMM);
	assert_memory_equal(F.buf_b, F.buf_a, 200);

	/* send with immediate */
	fill(F.buf_a + 1000, 64, 2);
	post_recv(F.b, 101, F.buf_b + 1000, 256, F.mr_b);
	start(F.xa, 2, IBV_SEND_SIGNALED);
	ibv_wr_send_imm(F.xa, htobe32(0xdeadbeef));
	ibv_wr_set_sge(F.xa, F.mr_a->lkey, A(1000), 64);
	assert_int_equal(ibv_wr_complete(F.xa), 0);
	poll_one(F.scq, &c);
	check_comp(&c, 2, IBV_WC_SEND, F.a->qp_num);
	poll_one(F.rcq, &c);
	check_comp(&c, 101, IBV_WC_RECV, F.b->qp_num);
	assert_int_equal(c.byte_len, 64);
	assert_true(c.wc_flags & IBV_WC_WITH_IMM);
	assert_int_equal(c.imm, htobe32(0xdeadbeef));
	assert_memory_equal(F.buf_b + 1000, F.buf_a + 1000, 64);

	/* a send with no data setter carries nothing */
	post_recv(F.b, 102, F.buf_b + 2000, 256, F.mr_b);
	start(F.xa, 3, IBV_SEND_SIGNALED);
	ibv_wr_send(F.xa);
	assert_int_equal(ibv_wr_complete(F.xa), 0);
	poll_one(F.scq, &c);
	check_comp(&c, 3, IBV_WC_SEND, F.a->qp_num);
	poll_one(F.rcq, &c);
	check_comp(&c, 102, IBV_WC_RECV, F.b->qp_num);
	assert_int_equal(c.byte_len, 0);

	/* the other direction works the same */
	fill(F.buf_b + 3000, 10, 3);
	post_recv(F.a, 103, F.buf_a + 3000, 16, F.mr_a);
	start(F.xb, 4, IBV_SEND_SIGNALED);
	ibv_wr_send(F.xb);
	ibv_wr_set_sge(F.xb, F.mr_b->lkey, B(3000), 10);
	assert_int_equal(ibv_wr_complete(F.xb), 0);
	poll_one(F.scq, &c);
	check_comp(&c, 4, IBV_WC_SEND, F.b->qp_num);
	poll_one(F.rcq, &c);
	check_comp(&c, 103, IBV_WC_RECV, F.a->qp_num);
	assert_int_equal(c.byte_len, 10);
	assert_memory_equal(F.buf_a + 3000, F.buf_b + 3000, 10);
}

static void test_sge_list(void **state)
{
	const struct ibv_sge sg[3] = {
		{ A(0), 10, F.mr_a->lkey },
		{ A(100), 300, F.mr_a->lkey },
		{ A(1000), 7, F.mr_a->lkey },
	};
	uint8_t want[317];
	struct comp c;

	(void)state;
	fill(F.buf_a, 2048, 5);
	memcpy(want, F.buf_a, 10);
	memcpy(want + 10, F.buf_a + 100, 300);
	memcpy(want + 310, F.buf_a + 1000, 7);
	post_recv(F.b, 200, F.buf_b, 1024, F.mr_b);
	start(F.xa, 20, IBV_SEND_SIGNALED);
	ibv_wr_send(F.xa);
	ibv_wr_set_sge_list(F.xa, ARRAY_SIZE(sg), sg);
	assert_int_equal(ibv_wr_complete(F.xa), 0);
	poll_one(F.scq, &c);
	check_comp(&c, 20, IBV_WC_SEND, F.a->qp_num);
	poll_one(F.rcq, &c);
	check_comp(&c, 200, IBV_WC_RECV, F.b->qp_num);
	assert_int_equal(c.byte_len, sizeof(want));
	assert_memory_equal(F.buf_b, want, sizeof(want));

	/* as many SGEs as the QP holds */
	{
		struct ibv_sge full[16];
		uint32_t i, n = F.cap.max_send_sge;

		assert_true(n >= 4);
		if (n > ARRAY_SIZE(full))
			n = ARRAY_SIZE(full);
		for (i = 0; i < n; i++) {
			full[i].addr = A(4096 + i * 64);
			full[i].length = 32;
			full[i].lkey = F.mr_a->lkey;
		}
		fill(F.buf_a + 4096, 64 * n, 9);
		post_recv(F.b, 201, F.buf_b + 4096, 4096, F.mr_b);
		start(F.xa, 21, IBV_SEND_SIGNALED);
		ibv_wr_send(F.xa);
		ibv_wr_set_sge_list(F.xa, n, full);
		assert_int_equal(ibv_wr_complete(F.xa), 0);
		poll_one(F.scq, &c);
		check_comp(&c, 21, IBV_WC_SEND, F.a->qp_num);
		poll_one(F.rcq, &c);
		check_comp(&c, 201, IBV_WC_RECV, F.b->qp_num);
		assert_int_equal(c.byte_len, 32 * n);
		for (i = 0; i < n; i++)
			assert_memory_equal(F.buf_b + 4096 + i * 32,
					    F.buf_a + 4096 + i * 64, 32);
	}
}

/* several WQEs in one session, and ibv_post_send on the same queue */
static void test_session_many(void **state)
{
	struct ibv_sge sge = { A(500), 5, F.mr_a->lkey };
	struct ibv_send_wr wr, *bad = NULL;
	struct comp c[4];
	int i;

	(void)state;
	fill(F.buf_a, 1024, 11);
	for (i = 0; i < 4; i++)
		post_recv(F.b, 300 + i, F.buf_b + i * 128, 128, F.mr_b);
	ibv_wr_start(F.xa);
	for (i = 0; i < 3; i++) {
		F.xa->wr_id = 30 + i;
		F.xa->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(F.xa);
		ibv_wr_set_sge(F.xa, F.mr_a->lkey, A(i * 100), 50 + i);
	}
	assert_int_equal(ibv_wr_complete(F.xa), 0);

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 33;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	assert_int_equal(ibv_post_send(F.a, &wr, &bad), 0);

	poll_n(F.scq, 4, c);
	for (i = 0; i < 4; i++)
		check_comp(&c[i], 30 + i, IBV_WC_SEND, F.a->qp_num);
	poll_n(F.rcq, 4, c);
	for (i = 0; i < 3; i++) {
		check_comp(&c[i], 300 + i, IBV_WC_RECV, F.b->qp_num);
		assert_int_equal(c[i].byte_len, 50 + i);
		assert_memory_equal(F.buf_b + i * 128, F.buf_a + i * 100,
				    50 + i);
	}
	check_comp(&c[3], 303, IBV_WC_RECV, F.b->qp_num);
	assert_int_equal(c[3].byte_len, 5);
	assert_memory_equal(F.buf_b + 3 * 128, F.buf_a + 500, 5);
}

/* ---- RC: RDMA ---- */

static void test_rdma_write(void **state)
{
	struct comp c;

	(void)state;
	fill(F.buf_a, 4096, 13);

	/* an unsignaled write, then a signaled one: one completion, the
	 * second's, and both writes done */
	start(F.xa, 40, 0);
	ibv_wr_rdma_write(F.xa, F.mr_b->rkey, B(1024));
	ibv_wr_set_sge(F.xa, F.mr_a->lkey, A(0), 512);
	F.xa->wr_id = 41;
	F.xa->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(F.xa, F.mr_b->rkey, B(2048));
	ibv_wr_set_sge(F.xa, F.mr_a->lkey, A(512), 100);
	assert_int_equal(ibv_wr_complete(F.xa), 0);
	poll_one(F.scq, &c);
	check_comp(&c, 41, IBV_WC_RDMA_WRITE, F.a->qp_num);
	assert_memory_equal(F.buf_b + 1024, F.buf_a, 512);
	assert_memory_equal(F.buf_b + 2048, F.buf_a + 512, 100);

	/* with immediate: consumes a receive at b */
	post_recv(F.b, 400, F.buf_b + 8192, 64, F.mr_b);
	start(F.xa, 42, IBV_SEND_SIGNALED);
	ibv_wr_rdma_write_imm(F.xa, F.mr_b->rkey, B(4096), htobe32(0x01020304));
	ibv_wr_set_sge(F.xa, F.mr_a->lkey, A(1000), 300);
	assert_int_equal(ibv_wr_complete(F.xa), 0);
	poll_one(F.scq, &c);
	check_comp(&c, 42, IBV_WC_RDMA_WRITE, F.a->qp_num);
	poll_one(F.rcq, &c);
	check_comp(&c, 400, IBV_WC_RECV_RDMA_WITH_IMM, F.b->qp_num);
	assert_true(c.wc_flags & IBV_WC_WITH_IMM);
	assert_int_equal(c.imm, htobe32(0x01020304));
	assert_int_equal(c.byte_len, 300);
	assert_memory_equal(F.buf_b + 4096, F.buf_a + 1000, 300);
}

static void test_rdma_read(void **state)
{
	const struct ibv_sge sg[2] = {
		{ A(16384), 100, F.mr_a->lkey },
		{ A(20000), 200, F.mr_a->lkey },
	};
	struct comp c;

	(void)state;
	fill(F.buf_b + 8192, 4096, 17);
	start(F.xa, 50, IBV_SEND_SIGNALED);
	ibv_wr_rdma_read(F.xa, F.mr_b->rkey, B(8192));
	ibv_wr_set_sge(F.xa, F.mr_a->lkey, A(8192), 700);
	assert_int_equal(ibv_wr_complete(F.xa), 0);
	poll_one(F.scq, &c);
	check_comp(&c, 50, IBV_WC_RDMA_READ, F.a->qp_num);
	assert_int_equal(c.byte_len, 700);
	assert_memory_equal(F.buf_a + 8192, F.buf_b + 8192, 700);

	/* scattered into two local pieces */
	start(F.xa, 51, IBV_SEND_SIGNALED);
	ibv_wr_rdma_read(F.xa, F.mr_b->rkey, B(10000));
	ibv_wr_set_sge_list(F.xa, 2, sg);
	assert_int_equal(ibv_wr_complete(F.xa), 0);
	poll_one(F.scq, &c);
	check_comp(&c, 51, IBV_WC_RDMA_READ, F.a->qp_num);
	assert_int_equal(c.byte_len, 300);
	assert_memory_equal(F.buf_a + 16384, F.buf_b + 10000, 100);
	assert_memory_equal(F.buf_a + 20000, F.buf_b + 10100, 200);
}

static void test_atomics(void **state)
{
	uint64_t *remote = (uint64_t *)(F.buf_b + 32768);
	uint64_t *local = (uint64_t *)(F.buf_a + 32768);
	struct comp c[2];

	(void)state;
	*remote = 5;
	local[0] = local[1] = local[2] = 0xffff;

	/* compare 5 (equal): swapped */
	start(F.xa, 60, IBV_SEND_SIGNALED);
	ibv_wr_atomic_cmp_swp(F.xa, F.mr_b->rkey, B(32768), 5, 9);
	ibv_wr_set_sge(F.xa, F.mr_a->lkey, A(32768), 8);
	assert_int_equal(ibv_wr_complete(F.xa), 0);
	poll_one(F.scq, c);
	check_comp(&c[0], 60, IBV_WC_COMP_SWAP, F.a->qp_num);
	assert_int_equal(local[0], 5);
	assert_int_equal(*remote, 9);

	/* compare 5 again (not equal): unchanged; then add 23 */
	ibv_wr_start(F.xa);
	F.xa->wr_id = 61;
	F.xa->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_cmp_swp(F.xa, F.mr_b->rkey, B(32768), 5, 1);
	ibv_wr_set_sge(F.xa, F.mr_a->lkey, A(32768 + 8), 8);
	F.xa->wr_id = 62;
	ibv_wr_atomic_fetch_add(F.xa, F.mr_b->rkey, B(32768), 23);
	ibv_wr_set_sge(F.xa, F.mr_a->lkey, A(32768 + 16), 8);
	assert_int_equal(ibv_wr_complete(F.xa), 0);
	poll_n(F.scq, 2, c);
	check_comp(&c[0], 61, IBV_WC_COMP_SWAP, F.a->qp_num);
	check_comp(&c[1], 62, IBV_WC_FETCH_ADD, F.a->qp_num);
	assert_int_equal(local[1], 9);
	assert_int_equal(local[2], 9);
	assert_int_equal(*remote, 32);
}

/* ---- inline data ---- */

static void test_inline(void **state)
{
	uint8_t data[100], p1[7], p2[30], p3[1], want[38];
	const struct ibv_data_buf list[3] = {
		{ p1, sizeof(p1) }, { p2, sizeof(p2) }, { p3, sizeof(p3) },
	};
	struct comp c;

	(void)state;
	assert_true(F.cap.max_inline_data >= sizeof(data));

	/* from unregistered memory, copied by wr_complete: changing the
	 * source afterwards changes nothing */
	fill(data, sizeof(data), 19);
	post_recv(F.b, 500, F.buf_b, 256, F.mr_b);
	start(F.xa, 70, IBV_SEND_SIGNALED);
	ibv_wr_send(F.xa);
	ibv_wr_set_inline_data(F.xa, data, sizeof(data));
	assert_int_equal(ibv_wr_complete(F.xa), 0);
	fill(F.buf_a, sizeof(data), 19); /* the reference */
	memset(data, 0, sizeof(data));
	poll_one(F.scq, &c);
	check_comp(&c, 70, IBV_WC_SEND, F.a->qp_num);
	poll_one(F.rcq, &c);
	check_comp(&c, 500, IBV_WC_RECV, F.b->qp_num);
	assert_int_equal(c.byte_len, sizeof(data));
	assert_memory_equal(F.buf_b, F.buf_a, sizeof(data));

	/* a list of pieces arrives as one */
	fill(p1, sizeof(p1), 21);
	fill(p2, sizeof(p2), 22);
	fill(p3, sizeof(p3), 23);
	memcpy(want, p1, 7);
	memcpy(want + 7, p2, 30);
	memcpy(want + 37, p3, 1);
	post_recv(F.b, 501, F.buf_b + 1024, 256, F.mr_b);
	start(F.xa, 71, IBV_SEND_SIGNALED);
	ibv_wr_send_imm(F.xa, htobe32(7));
	ibv_wr_set_inline_data_list(F.xa, 3, list);
	assert_int_equal(ibv_wr_complete(F.xa), 0);
	poll_one(F.scq, &c);
	check_comp(&c, 71, IBV_WC_SEND, F.a->qp_num);
	poll_one(F.rcq, &c);
	check_comp(&c, 501, IBV_WC_RECV, F.b->qp_num);
	assert_int_equal(c.byte_len, sizeof(want));
	assert_int_equal(c.imm, htobe32(7));
	assert_memory_equal(F.buf_b + 1024, want, sizeof(want));

	/* an inline RDMA write, exactly max_inline_data long */
	{
		uint32_t n = F.cap.max_inline_data;
		uint8_t *big = malloc(n);

		assert_non_null(big);
		fill(big, n, 29);
		start(F.xa, 72, IBV_SEND_SIGNALED);
		ibv_wr_rdma_write(F.xa, F.mr_b->rkey, B(8192));
		ibv_wr_set_inline_data(F.xa, big, n);
		assert_int_equal(ibv_wr_complete(F.xa), 0);
		poll_one(F.scq, &c);
		check_comp(&c, 72, IBV_WC_RDMA_WRITE, F.a->qp_num);
		assert_memory_equal(F.buf_b + 8192, big, n);
		free(big);
	}
}

/* ---- UD ---- */

static void test_ud(void **state)
{
	const uint64_t ops = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	struct ibv_qp *ua, *ub;
	struct ibv_qp_ex *xa;
	struct ibv_ah_attr ah_attr;
	struct ibv_ah *ah;
	uint8_t msg[16];
	struct comp c;

	(void)state;
	ua = qp_new(IBV_QPT_UD, ops, 8, 2, 64, 0, NULL);
	ub = qp_new(IBV_QPT_UD, ops, 8, 2, 64, 0, NULL);
	ud_ready(ua);
	ud_ready(ub);
	xa = ibv_qp_to_qp_ex(ua);
	memset(&ah_attr, 0, sizeof(ah_attr));
	ah_attr.is_global = 1;
	ah_attr.grh.dgid = g_gid;
	ah_attr.grh.sgid_index = 0;
	ah_attr.grh.hop_limit = 64;
	ah_attr.port_num = 1;
	ah = ibv_create_ah(g_pd, &ah_attr);
	assert_non_null(ah);

	/* send: the receive starts with the 40-byte GRH */
	fill(F.buf_a, 128, 31);
	post_recv(ub, 600, F.buf_b, GRH_BYTES + 256, F.mr_b);
	start(xa, 80, IBV_SEND_SIGNALED);
	ibv_wr_send(xa);
	ibv_wr_set_ud_addr(xa, ah, ub->qp_num, UD_QKEY);
	ibv_wr_set_sge(xa, F.mr_a->lkey, A(0), 128);
	assert_int_equal(ibv_wr_complete(xa), 0);
	poll_one(F.scq, &c);
	check_comp(&c, 80, IBV_WC_SEND, ua->qp_num);
	poll_one(F.rcq, &c);
	check_comp(&c, 600, IBV_WC_RECV, ub->qp_num);
	assert_int_equal(c.byte_len, GRH_BYTES + 128);
	assert_int_equal(c.src_qp, ua->qp_num);
	assert_true(c.wc_flags & IBV_WC_GRH);
	assert_false(c.wc_flags & IBV_WC_WITH_IMM);
	assert_memory_equal(F.buf_b + GRH_BYTES, F.buf_a, 128);

	/* send with immediate, inline, the address set last */
	fill(msg, sizeof(msg), 37);
	post_recv(ub, 601, F.buf_b + 1024, GRH_BYTES + 256, F.mr_b);
	start(xa, 81, IBV_SEND_SIGNALED);
	ibv_wr_send_imm(xa, htobe32(0xabcd));
	ibv_wr_set_inline_data(xa, msg, sizeof(msg));
	ibv_wr_set_ud_addr(xa, ah, ub->qp_num, UD_QKEY);
	assert_int_equal(ibv_wr_complete(xa), 0);
	poll_one(F.scq, &c);
	check_comp(&c, 81, IBV_WC_SEND, ua->qp_num);
	poll_one(F.rcq, &c);
	check_comp(&c, 601, IBV_WC_RECV, ub->qp_num);
	assert_int_equal(c.byte_len, GRH_BYTES + sizeof(msg));
	assert_int_equal(c.src_qp, ua->qp_num);
	assert_true(c.wc_flags & IBV_WC_WITH_IMM);
	assert_int_equal(c.imm, htobe32(0xabcd));
	assert_memory_equal(F.buf_b + 1024 + GRH_BYTES, msg, sizeof(msg));

	/* no address: EINVAL; RDMA on UD: EINVAL */
	start(xa, 82, IBV_SEND_SIGNALED);
	ibv_wr_send(xa);
	ibv_wr_set_sge(xa, F.mr_a->lkey, A(0), 8);
	assert_int_equal(ibv_wr_complete(xa), EINVAL);
	start(xa, 83, IBV_SEND_SIGNALED);
	ibv_wr_rdma_write(xa, F.mr_b->rkey, B(0));
	ibv_wr_set_ud_addr(xa, ah, ub->qp_num, UD_QKEY);
	ibv_wr_set_sge(xa, F.mr_a->lkey, A(0), 8);
	assert_int_equal(ibv_wr_complete(xa), EINVAL);

	/* and the queue still works: the next completion is the next send */
	post_recv(ub, 602, F.buf_b + 2048, GRH_BYTES + 64, F.mr_b);
	start(xa, 84, IBV_SEND_SIGNALED);
	ibv_wr_send(xa);
	ibv_wr_set_ud_addr(xa, ah, ub->qp_num, UD_QKEY);
	ibv_wr_set_sge(xa, F.mr_a->lkey, A(0), 3);
	assert_int_equal(ibv_wr_complete(xa), 0);
	poll_one(F.scq, &c);
	check_comp(&c, 84, IBV_WC_SEND, ua->qp_num);
	poll_one(F.rcq, &c);
	check_comp(&c, 602, IBV_WC_RECV, ub->qp_num);
	assert_int_equal(c.byte_len, GRH_BYTES + 3);

	assert_int_equal(ibv_destroy_ah(ah), 0);
	assert_int_equal(ibv_destroy_qp(ua), 0);
	assert_int_equal(ibv_destroy_qp(ub), 0);
}

/* ---- errors ---- */

/* More WQEs than room: ENOMEM and nothing published; exactly room: fine. */
static void test_enomem(void **state)
{
	struct ibv_qp *a, *b;
	struct ibv_qp_ex *x;
	struct ibv_qp_cap cap;
	struct comp c[64];
	uint32_t i;

	(void)state;
	rc_pair(4, 0, &a, &b, &cap);
	assert_true(cap.max_send_wr <= ARRAY_SIZE(c));
	x = ibv_qp_to_qp_ex(a);
	fill(F.buf_a, 1024, 41);

	ibv_wr_start(x);
	for (i = 0; i < cap.max_send_wr + 1; i++) {
		x->wr_id = 1000 + i;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(x, F.mr_b->rkey, B(i * 8));
		ibv_wr_set_sge(x, F.mr_a->lkey, A(i * 8), 8);
	}
	assert_int_equal(ibv_wr_complete(x), ENOMEM);

	ibv_wr_start(x);
	for (i = 0; i < cap.max_send_wr; i++) {
		x->wr_id = 2000 + i;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(x, F.mr_b->rkey, B(4096 + i * 8));
		ibv_wr_set_sge(x, F.mr_a->lkey, A(i * 8), 8);
	}
	assert_int_equal(ibv_wr_complete(x), 0);
	poll_n(F.scq, (int)cap.max_send_wr, c);
	for (i = 0; i < cap.max_send_wr; i++)
		check_comp(&c[i], 2000 + i, IBV_WC_RDMA_WRITE, a->qp_num);
	assert_memory_equal(F.buf_b + 4096, F.buf_a, 8 * cap.max_send_wr);

	assert_int_equal(ibv_destroy_qp(a), 0);
	assert_int_equal(ibv_destroy_qp(b), 0);
}

static void test_einval(void **state)
{
	struct ibv_sge sg[64];
	struct ibv_qp *s;
	struct ibv_qp_ex *xs;
	uint8_t *big;
	struct comp c;
	uint32_t i, n = F.cap.max_send_sge + 1;

	(void)state;
	assert_true(n <= ARRAY_SIZE(sg));
	for (i = 0; i < n; i++) {
		sg[i].addr = A(i * 8);
		sg[i].length = 8;
		sg[i].lkey = F.mr_a->lkey;
	}
	/* too many SGEs */
	start(F.xa, 90, IBV_SEND_SIGNALED);
	ibv_wr_send(F.xa);
	ibv_wr_set_sge_list(F.xa, n, sg);
	assert_int_equal(ibv_wr_complete(F.xa), EINVAL);

	/* too much inline data */
	big = calloc(1, F.cap.max_inline_data + 1);
	assert_non_null(big);
	start(F.xa, 91, IBV_SEND_SIGNALED);
	ibv_wr_send(F.xa);
	ibv_wr_set_inline_data(F.xa, big, F.cap.max_inline_data + 1);
	assert_int_equal(ibv_wr_complete(F.xa), EINVAL);
	free(big);

	/* a setter with no WQE to set */
	ibv_wr_start(F.xa);
	ibv_wr_set_sge(F.xa, F.mr_a->lkey, A(0), 8);
	assert_int_equal(ibv_wr_complete(F.xa), EINVAL);

	/* an error poisons the whole session, the good WQEs too */
	start(F.xa, 92, IBV_SEND_SIGNALED);
	ibv_wr_send(F.xa);
	ibv_wr_set_sge(F.xa, F.mr_a->lkey, A(0), 8);
	ibv_wr_send(F.xa);
	ibv_wr_set_sge_list(F.xa, n, sg);
	ibv_wr_send(F.xa);
	assert_int_equal(ibv_wr_complete(F.xa), EINVAL);

	/* ops the device has no ibv_wr_* form for yet fail, never crash */
	start(F.xa, 93, IBV_SEND_SIGNALED);
	ibv_wr_local_inv(F.xa, F.mr_b->rkey);
	assert_int_not_equal(ibv_wr_complete(F.xa), 0);
	start(F.xa, 94, IBV_SEND_SIGNALED);
	ibv_wr_send_inv(F.xa, F.mr_b->rkey);
	assert_int_not_equal(ibv_wr_complete(F.xa), 0);

	/* nothing of that was published: the next WQE completes first */
	post_recv(F.b, 900, F.buf_b, 64, F.mr_b);
	start(F.xa, 95, IBV_SEND_SIGNALED);
	ibv_wr_send(F.xa);
	ibv_wr_set_sge(F.xa, F.mr_a->lkey, A(0), 33);
	assert_int_equal(ibv_wr_complete(F.xa), 0);
	poll_one(F.scq, &c);
	check_comp(&c, 95, IBV_WC_SEND, F.a->qp_num);
	poll_one(F.rcq, &c);
	check_comp(&c, 900, IBV_WC_RECV, F.b->qp_num);
	assert_int_equal(c.byte_len, 33);

	/* an opcode send_ops_flags did not ask for */
	s = qp_new(IBV_QPT_RC, IBV_QP_EX_WITH_SEND, 4, 1, 0, 0, NULL);
	xs = ibv_qp_to_qp_ex(s);
	start(xs, 96, IBV_SEND_SIGNALED);
	ibv_wr_rdma_write(xs, F.mr_b->rkey, B(0));
	ibv_wr_set_sge(xs, F.mr_a->lkey, A(0), 8);
	assert_int_equal(ibv_wr_complete(xs), EINVAL);
	start(xs, 97, IBV_SEND_SIGNALED);
	ibv_wr_atomic_fetch_add(xs, F.mr_b->rkey, B(0), 1);
	assert_int_equal(ibv_wr_complete(xs), EINVAL);
	start(xs, 98, IBV_SEND_SIGNALED);
	ibv_wr_send_imm(xs, 0);
	assert_int_equal(ibv_wr_complete(xs), EINVAL);
	assert_int_equal(ibv_destroy_qp(s), 0);
}

/* wr_abort publishes nothing; sq_sig_all signals every WQE */
static void test_abort(void **state)
{
	struct ibv_qp *a, *b;
	struct ibv_qp_ex *x;
	struct comp c;

	(void)state;
	memset(F.buf_a, 'A', 64);
	memset(F.buf_a + 64, 'B', 64);
	post_recv(F.b, 700, F.buf_b, 256, F.mr_b);
	start(F.xa, 110, IBV_SEND_SIGNALED);
	ibv_wr_send(F.xa);
	ibv_wr_set_sge(F.xa, F.mr_a->lkey, A(0), 50);
	ibv_wr_abort(F.xa);
	start(F.xa, 111, IBV_SEND_SIGNALED);
	ibv_wr_send(F.xa);
	ibv_wr_set_sge(F.xa, F.mr_a->lkey, A(64), 60);
	assert_int_equal(ibv_wr_complete(F.xa), 0);
	poll_one(F.scq, &c);
	check_comp(&c, 111, IBV_WC_SEND, F.a->qp_num);
	poll_one(F.rcq, &c);
	check_comp(&c, 700, IBV_WC_RECV, F.b->qp_num);
	assert_int_equal(c.byte_len, 60);
	assert_memory_equal(F.buf_b, F.buf_a + 64, 60);

	/* an empty session is fine */
	ibv_wr_start(F.xa);
	assert_int_equal(ibv_wr_complete(F.xa), 0);
	ibv_wr_start(F.xa);
	ibv_wr_abort(F.xa);

	/* sq_sig_all: wr_flags 0 still completes */
	rc_pair(4, 1, &a, &b, NULL);
	x = ibv_qp_to_qp_ex(a);
	start(x, 120, 0);
	ibv_wr_rdma_write(x, F.mr_b->rkey, B(512));
	ibv_wr_set_sge(x, F.mr_a->lkey, A(0), 16);
	assert_int_equal(ibv_wr_complete(x), 0);
	poll_one(F.scq, &c);
	check_comp(&c, 120, IBV_WC_RDMA_WRITE, a->qp_num);
	assert_memory_equal(F.buf_b + 512, F.buf_a, 16);
	assert_int_equal(ibv_destroy_qp(a), 0);
	assert_int_equal(ibv_destroy_qp(b), 0);
}

/* ---- two threads building sessions on one QP: the send lock ---- */

#define THREAD_WRS 400         /* per thread */
#define SESSION_WRS 4          /* per session */

struct poster {
	struct ibv_qp_ex *x;
	int id;
	int enomem;                /* ENOMEM answers (queue full): retried */
	int bad;                   /* any other answer */
};

static void *poster_main(void *arg)
{
	struct poster *p = arg;
	int i, j, ret;

	for (i = 0; i < THREAD_WRS; i += SESSION_WRS) {
		for (;;) {
			ibv_wr_start(p->x);
			for (j = i; j < i + SESSION_WRS; j++) {
				size_t off = (size_t)(p->id * THREAD_WRS + j) * 8;

				p->x->wr_id = ((uint64_t)p->id << 32) | (uint64_t)j;
				p->x->wr_flags = IBV_SEND_SIGNALED;
				ibv_wr_rdma_write(p->x, F.mr_b->rkey, B(off));
				ibv_wr_set_sge(p->x, F.mr_a->lkey, A(off), 8);
			}
			ret = ibv_wr_complete(p->x);
			if (ret != ENOMEM)
				break;
			p->enomem++;
			sched_yield();
		}
		if (ret)
			p->bad++;
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct poster p[2];
	pthread_t t[2];
	struct ibv_cq_ex *cq = F.scq;
	struct ibv_cq_init_attr_ex ca;
	struct ibv_qp *a, *b;
	struct comp c;
	int next[2] = { 0, 0 };
	int i;

	(void)state;
	/* a CQ that holds every completion: the posters outrun the poller */
	memset(&ca, 0, sizeof(ca));
	ca.cqe = 2 * THREAD_WRS + 16;
	ca.wc_flags = IBV_WC_STANDARD_FLAGS;
	F.scq = ibv_create_cq_ex(g_ctx, &ca);
	assert_non_null(F.scq);
	rc_pair(16, 0, &a, &b, NULL);
	fill(F.buf_a, 2 * THREAD_WRS * 8, 43);

	for (i = 0; i < 2; i++) {
		p[i] = (struct poster){ .x = ibv_qp_to_qp_ex(a), .id = i };
		assert_int_equal(pthread_create(&t[i], NULL, poster_main, &p[i]),
				 0);
	}
	/* each thread's WQEs complete in the order it posted them */
	for (i = 0; i < 2 * THREAD_WRS; i++) {
		int who;

		poll_one(F.scq, &c);
		if (c.status != IBV_WC_SUCCESS)
			fail_msg("completion %d: %s", i,
				 ibv_wc_status_str(c.status));
		who = (int)(c.wr_id >> 32);
		assert_true(who == 0 || who == 1);
		assert_int_equal(c.wr_id & 0xffffffffu, next[who]);
		assert_int_equal(c.opcode, IBV_WC_RDMA_WRITE);
		next[who]++;
	}
	for (i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(p[i].bad, 0);
	}
	assert_memory_equal(F.buf_b, F.buf_a, 2 * THREAD_WRS * 8);

	assert_int_equal(ibv_destroy_qp(a), 0);
	assert_int_equal(ibv_destroy_qp(b), 0);
	assert_int_equal(ibv_destroy_cq(ibv_cq_ex_to_cq(F.scq)), 0);
	F.scq = cq;
}

/* ---- two threads polling one CQ: the private ring's counters ---- */

#define POLL_WRS 800

struct poller {
	struct ibv_cq *cq;
	int *total;                /* completions taken by both pollers */
	uint8_t *seen;             /* per wr_id, how often it came back */
	int bad;                   /* error completions */
};

static void *poller_main(void *arg)
{
	struct poller *p = arg;
	struct ibv_wc wc[4];

	while (__atomic_load_n(p->total, __ATOMIC_RELAXED) < POLL_WRS) {
		int n = ibv_poll_cq(p->cq, 4, wc);

		if (n < 0) {
			p->bad++;
			break;
		}
		for (int k = 0; k < n; k++) {
			if (wc[k].status != IBV_WC_SUCCESS ||
			    wc[k].wr_id >= POLL_WRS)
				p->bad++;
			else
				__atomic_fetch_add(&p->seen[wc[k].wr_id], 1,
						   __ATOMIC_RELAXED);
		}
		if (n)
			__atomic_fetch_add(p->total, n, __ATOMIC_RELAXED);
		else
			sched_yield();
	}
	return NULL;
}

/* Completions of one QP's RDMA WRITEs (on this host they run in the
 * library, their completions in the CQ's private ring) polled by two
 * threads at once, each poll looking at the ring without the CQ lock
 * first: every completion comes back once. */
static void test_poll_threads(void **state)
{
	static uint8_t seen[POLL_WRS];
	struct poller p[2];
	pthread_t t[2];
	struct ibv_cq_ex *cq = F.scq;
	struct ibv_cq_init_attr_ex ca;
	struct ibv_qp *a, *b;
	int total = 0, i, ret;

	(void)state;
	memset(seen, 0, sizeof(seen));
	memset(&ca, 0, sizeof(ca));
	ca.cqe = POLL_WRS + 16;
	ca.wc_flags = IBV_WC_STANDARD_FLAGS;
	F.scq = ibv_create_cq_ex(g_ctx, &ca);
	assert_non_null(F.scq);
	rc_pair(16, 0, &a, &b, NULL);
	fill(F.buf_a, POLL_WRS * 8, 47);
	for (i = 0; i < 2; i++) {
		p[i] = (struct poller){ .cq = ibv_cq_ex_to_cq(F.scq),
					.total = &total, .seen = seen };
		assert_int_equal(pthread_create(&t[i], NULL, poller_main,
						&p[i]), 0);
	}
	/* ibv_post_send: the path that runs WRITEs to this host directly */
	for (i = 0; i < POLL_WRS; i++) {
		struct ibv_sge sge = { A((size_t)i * 8), 8, F.mr_a->lkey };
		struct ibv_send_wr wr, *bad = NULL;

		memset(&wr, 0, sizeof(wr));
		wr.wr_id = (uint64_t)i;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = B((size_t)i * 8);
		wr.wr.rdma.rkey = F.mr_b->rkey;
		while ((ret = ibv_post_send(a, &wr, &bad)) == ENOMEM)
			sched_yield();  /* the send queue is full: wait */
		assert_int_equal(ret, 0);
	}
	for (i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(p[i].bad, 0);
	}
	assert_int_equal(total, POLL_WRS);
	for (i = 0; i < POLL_WRS; i++)
		if (seen[i] != 1)
			fail_msg("wr_id %d came back %u times", i, seen[i]);
	assert_memory_equal(F.buf_b, F.buf_a, POLL_WRS * 8);

	assert_int_equal(ibv_destroy_qp(a), 0);
	assert_int_equal(ibv_destroy_qp(b), 0);
	assert_int_equal(ibv_destroy_cq(ibv_cq_ex_to_cq(F.scq)), 0);
	F.scq = cq;
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, test_setup, test_teardown)
	const struct CMUnitTest tests[] = {
		T(test_send),
		T(test_sge_list),
		T(test_session_many),
		T(test_rdma_write),
		T(test_rdma_read),
		T(test_atomics),
		T(test_inline),
		T(test_ud),
		T(test_enomem),
		T(test_einval),
		T(test_abort),
		T(test_threads),
		T(test_poll_threads),
	};
#undef T

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
