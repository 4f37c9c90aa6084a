// SPDX-License-Identifier: MIT
/*
 * Every error a work request can meet, provoked and checked: the status of
 * the failing WR, the IBV_WC_WR_FLUSH_ERR of every WR behind it and of the
 * receive queue, the QP states on both sides, the async events (access
 * error, communication established, SRQ limit, last WQE, CQ overrun, SQ
 * drained), completion channels armed for the next or the next solicited
 * completion, and signaled versus unsignaled sends.
 *
 * Two contexts (two clients of the daemon) in this process, and for "the
 * peer process is gone" a peer in a process of its own (sv_peer). Every
 * wait has a generous bound; nothing here waits for time to pass except
 * where a WR must NOT complete (RNR retried forever), and a correct device
 * passes that however long the test waits.
 *
 * Run under tests/e2e/isolated.sh (a daemon of its own).
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <infiniband/verbs.h>

#include "vu.h"

#define BUF_LEN    (64u * 1024u)
#define WATCHDOG_S 100
#define WC_WAIT_MS 10000  /* a completion that must come */

static struct ibv_context *ctx_a, *ctx_b;

/* A connected pair: A (requester) and B (responder), each with a buffer
 * registered with mr_access (every right unless the test says otherwise). */
struct pair {
	struct vu_ep a, b;
	struct ibv_mr *amr, *bmr;
	uint8_t *abuf, *bbuf;
	struct ibv_srq *srq;
};

struct pair_opts {
	enum ibv_qp_type type;
	struct vu_conn ca, cb;         /* A's and B's connection */
	unsigned int a_mr_access, b_mr_access;
	struct vu_qp_caps a_caps, b_caps;
	bool no_connect;
};

static uint8_t pattern(size_t i, unsigned int seed)
{
	return (uint8_t)(i * 7u + seed * 31u + (i >> 8));
}

static void fill(uint8_t *p, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pattern(i, seed);
}

/* buf[off, off + len) still holds what fill() put there. */
static void expect_pattern_at(const uint8_t *buf, size_t off, size_t len,
			      unsigned int seed, const char *what)
{
	for (size_t i = off; i < off + len; i++)
		if (buf[i] != pattern(i, seed))
			fail_msg("%s: byte %zu changed", what, i);
}

static void expect_pattern(const uint8_t *p, size_t len, unsigned int seed,
			   const char *what)
{
	expect_pattern_at(p, 0, len, seed, what);
}

static struct pair_opts opts_default(enum ibv_qp_type type)
{
	struct pair_opts o;
	unsigned int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

	memset(&o, 0, sizeof(o));
	o.type = type;
	o.ca = vu_conn_default();
	o.cb = vu_conn_default();
	o.a_mr_access = all;
	o.b_mr_access = all;
	o.a_caps = (struct vu_qp_caps){ .send_wr = 16, .recv_wr = 16,
					.send_sge = 2, .recv_sge = 2,
					.cqe = 64 };
	o.b_caps = o.a_caps;
	return o;
}

static void pair_create(struct pair *p, const struct pair_opts *o)
{
	struct vu_addr aa, ba;

	memset(p, 0, sizeof(p[0]));
	p->abuf = calloc(1, BUF_LEN);
	p->bbuf = calloc(1, BUF_LEN);
	assert_non_null(p->abuf);
	assert_non_null(p->bbuf);
	fill(p->abuf, BUF_LEN, 1);
	fill(p->bbuf, BUF_LEN, 2);
	assert_int_equal(vu_ep_create(&p->a, ctx_a, NULL, o->type, &o->a_caps),
			 0);
	assert_int_equal(vu_ep_create(&p->b, ctx_b, NULL, o->type, &o->b_caps),
			 0);
	p->amr = ibv_reg_mr(p->a.pd, p->abuf, BUF_LEN, (int)o->a_mr_access);
	p->bmr = ibv_reg_mr(p->b.pd, p->bbuf, BUF_LEN, (int)o->b_mr_access);
	assert_non_null(p->amr);
	assert_non_null(p->bmr);
	if (o->no_connect)
		return;
	aa = vu_addr_of(p->a.qp, o->ca.sq_psn);
	ba = vu_addr_of(p->b.qp, o->cb.sq_psn);
	assert_int_equal(vu_connect(p->a.qp, &ba, &o->ca), 0);
	assert_int_equal(vu_connect(p->b.qp, &aa, &o->cb), 0);
}

/* MRs first: vu_ep_destroy deallocates the PDs they are on. */
static void pair_free(struct pair *p)
{
	if (p->amr)
		ibv_dereg_mr(p->amr);
	if (p->bmr)
		ibv_dereg_mr(p->bmr);
	vu_ep_destroy(&p->a);
	vu_ep_destroy(&p->b);
	free(p->abuf);
	free(p->bbuf);
	memset(p, 0, sizeof(*p));
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	memset(&a, 0, sizeof(a));
	assert_int_equal(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia), 0);
	return a.qp_state;
}

/* Wait (bounded) for a QP to reach a state the device moves it to. */
static void wait_state(struct ibv_qp *qp, enum ibv_qp_state want)
{
	long end = vu_now_ms() + VU_WAIT_MS;
	enum ibv_qp_state s;

	while ((s = qp_state(qp)) != want) {
		if (vu_now_ms() > end)
			fail_msg("QP %u in state %d, expected %d", qp->qp_num,
				 s, want);
		vu_sleep_ms(2);
	}
}

static void post_recv(struct ibv_qp *qp, uint64_t id, void *addr,
		      uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { (uintptr_t)addr, len, lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	assert_int_equal(ibv_post_recv(qp, &wr, &bad), 0);
}

static void post_srq_recv(struct ibv_srq *srq, uint64_t id, void *addr,
			  uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { (uintptr_t)addr, len, lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	assert_int_equal(ibv_post_srq_recv(srq, &wr, &bad), 0);
}

/* One WR: opcode, local range, remote address and key; not posted. */
static void make_wr(struct ibv_send_wr *wr, struct ibv_sge *sge, uint64_t id,
		    enum ibv_wr_opcode op, void *laddr, uint32_t len,
		    uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	memset(wr, 0, sizeof(*wr));
	sge->addr = (uintptr_t)laddr;
	sge->length = len;
	sge->lkey = lkey;
	wr->wr_id = id;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = op;
	wr->send_flags = IBV_SEND_SIGNALED;
	if (op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	    op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr->wr.atomic.remote_addr = raddr;
		wr->wr.atomic.rkey = rkey;
		wr->wr.atomic.compare_add = 1;
	} else {
		wr->wr.rdma.remote_addr = raddr;
		wr->wr.rdma.rkey = rkey;
	}
}

static void post_send_ok(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;
	int ret = ibv_post_send(qp, wr, &bad);

	if (ret)
		fail_msg("ibv_post_send: %s", strerror(ret));
}

/* Exactly this completion next on cq (status, and wr_id). */
static void expect_wc(struct ibv_cq *cq, uint64_t wr_id,
		      enum ibv_wc_status status, const char *what)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	if (vu_poll(cq, &wc, 1, WC_WAIT_MS) != 1)
		fail_msg("%s: no completion (wr_id %" PRIu64 ") within %d ms",
			 what, wr_id, WC_WAIT_MS);
	if (wc.status != status || wc.wr_id != wr_id)
		fail_msg("%s: completion wr_id %" PRIu64 " status %s (%d); "
			 "expected wr_id %" PRIu64 " status %s", what,
			 wc.wr_id, ibv_wc_status_str(wc.status), wc.status,
			 wr_id, ibv_wc_status_str(status));
}

static void expect_no_wc(struct ibv_cq *cq, const char *what)
{
	struct ibv_wc wc;

	if (ibv_poll_cq(cq, 1, &wc) != 0)
		fail_msg("%s: unexpected completion wr_id %" PRIu64
			 " status %s", what, wc.wr_id,
			 ibv_wc_status_str(wc.status));
}

/* Events of earlier tests are no business of this one. */
static void drain_events(struct ibv_context *ctx)
{
	struct ibv_async_event ev;

	while (vu_async_event(ctx, &ev, 0) == 0)
		print_message("(an earlier event: %s)\n",
			      ibv_event_type_str(ev.event_type));
}

/* The next event of this type on ctx, for this object (qp, cq or srq);
 * other events on the way are reported and skipped. */
static void expect_event(struct ibv_context *ctx, enum ibv_event_type type,
			 void *obj)
{
	struct ibv_async_event ev;
	long end = vu_now_ms() + VU_WAIT_MS;

	for (;;) {
		long left = end - vu_now_ms();

		if (left < 0 || vu_async_event(ctx, &ev, left))
			fail_msg("no %s event within %d ms",
				 ibv_event_type_str(type), VU_WAIT_MS);
		if (ev.event_type == type) {
			void *got = type == IBV_EVENT_CQ_ERR ?
					    (void *)ev.element.cq :
				    type == IBV_EVENT_SRQ_LIMIT_REACHED ||
						    type == IBV_EVENT_SRQ_ERR ?
					    (void *)ev.element.srq :
					    (void *)ev.element.qp;

			if (got != obj)
				fail_msg("%s event for %p, expected %p",
					 ibv_event_type_str(type), got, obj);
			return;
		}
		print_message("(event %s on the way to %s)\n",
			      ibv_event_type_str(ev.event_type),
			      ibv_event_type_str(type));
	}
}

static void expect_no_event(struct ibv_context *ctx, const char *what)
{
	struct ibv_async_event ev;

	if (vu_async_event(ctx, &ev, 0) == 0)
		fail_msg("%s: unexpected event %s", what,
			 ibv_event_type_str(ev.event_type));
}

static void watchdog_fired(int sig)
{
	static const char m[] = "test_errors: watchdog: a test did not "
				"finish in time\n";

	(void)sig;
	fflush(stdout);
	if (write(STDERR_FILENO, m, sizeof(m) - 1) < 0)
		_exit(2);
	_exit(1);
}

static int group_setup(void **state)
{
	(void)state;
	signal(SIGALRM, watchdog_fired);
	signal(SIGPIPE, SIG_IGN);
	ctx_a = vu_open();
	ctx_b = vu_open();
	return ctx_a && ctx_b ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	if (ctx_a)
		ibv_close_device(ctx_a);
	if (ctx_b)
		ibv_close_device(ctx_b);
	return 0;
}

static int test_setup(void **state)
{
	(void)state;
	alarm(WATCHDOG_S);
	drain_events(ctx_a);
	drain_events(ctx_b);
	return 0;
}

/*
 * The core of most tests: A posts a chain [bad, SEND, WRITE] (all signaled)
 * with two receives of its own posted and B with one. The bad WR completes
 * with `status`, everything behind it and A's receives with FLUSH_ERR, A
 * ends in ERR; B's buffer is untouched. What happens to B is the caller's.
 */
static void chain_after(struct pair *p, struct ibv_send_wr *bad_wr,
			enum ibv_wc_status status, const char *what)
{
	struct ibv_send_wr wr[2];
	struct ibv_sge sge[2];

	post_recv(p->a.qp, 900, p->abuf + 60000, 100, p->amr->lkey);
	post_recv(p->a.qp, 901, p->abuf + 60100, 100, p->amr->lkey);
	post_recv(p->b.qp, 800, p->bbuf + 60000, 4096, p->bmr->lkey);
	make_wr(&wr[0], &sge[0], 11, IBV_WR_SEND, p->abuf, 64, p->amr->lkey,
		0, 0);
	make_wr(&wr[1], &sge[1], 12, IBV_WR_RDMA_WRITE, p->abuf, 64,
		p->amr->lkey, (uintptr_t)p->bbuf + 100, p->bmr->rkey);
	bad_wr->next = &wr[0];
	wr[0].next = &wr[1];
	post_send_ok(p->a.qp, bad_wr);
	expect_wc(p->a.scq, bad_wr->wr_id, status, what);
	expect_wc(p->a.scq, 11, IBV_WC_WR_FLUSH_ERR, what);
	expect_wc(p->a.scq, 12, IBV_WC_WR_FLUSH_ERR, what);
	expect_wc(p->a.rcq, 900, IBV_WC_WR_FLUSH_ERR, what);
	expect_wc(p->a.rcq, 901, IBV_WC_WR_FLUSH_ERR, what);
	expect_no_wc(p->a.scq, what);
	expect_no_wc(p->a.rcq, what);
	wait_state(p->a.qp, IBV_QPS_ERR);

	/* WRs posted to a QP in ERR complete with FLUSH_ERR */
	{
		struct ibv_send_wr w;
		struct ibv_sge s;

		make_wr(&w, &s, 13, IBV_WR_SEND, p->abuf, 8, p->amr->lkey, 0,
			0);
		post_send_ok(p->a.qp, &w);
		expect_wc(p->a.scq, 13, IBV_WC_WR_FLUSH_ERR, "post in ERR");
		post_recv(p->a.qp, 902, p->abuf + 60200, 8, p->amr->lkey);
		expect_wc(p->a.rcq, 902, IBV_WC_WR_FLUSH_ERR, "recv in ERR");
	}
}

/* B saw an access error: QP_ACCESS_ERR, B in ERR, its receive flushed, its
 * buffer untouched. */
static void responder_access_error(struct pair *p, const char *what)
{
	expect_event(ctx_b, IBV_EVENT_QP_ACCESS_ERR, p->b.qp);
	wait_state(p->b.qp, IBV_QPS_ERR);
	expect_wc(p->b.rcq, 800, IBV_WC_WR_FLUSH_ERR, what);
	expect_no_wc(p->b.rcq, what);
	expect_pattern(p->bbuf, BUF_LEN, 2, what);
}

/* ---- remote access errors ---- */

static void rem_access_case(enum ibv_wr_opcode op, unsigned int b_access,
			    int how)
{
	struct pair_opts o = opts_default(IBV_QPT_RC);
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_pd *other_pd = NULL;
	struct ibv_mr *other_mr = NULL;
	uint8_t other_buf[64], other_copy[64];
	struct pair p;
	uint64_t raddr;
	uint32_t rkey, len = op == IBV_WR_ATOMIC_CMP_AND_SWP ||
				     op == IBV_WR_ATOMIC_FETCH_AND_ADD ? 8 : 64;
	char what[96];

	o.b_mr_access = b_access;
	pair_create(&p, &o);
	raddr = (uintptr_t)p.bbuf + 1024;
	rkey = p.bmr->rkey;
	switch (how) {
	case 0: /* right key, missing right */
		break;
	case 1: /* a key that names nothing (another consumer key) */
		rkey ^= 0x5a;
		break;
	case 2: /* past the end (atomics: all of it, still aligned) */
		raddr = (uintptr_t)p.bbuf + BUF_LEN - (len == 8 ? 0 : len / 2);
		break;
	case 3: /* before the start */
		raddr = (uintptr_t)p.bbuf - 8;
		break;
	case 4: { /* an MR of B's client, in another PD */
		other_pd = ibv_alloc_pd(ctx_b);
		assert_non_null(other_pd);
		fill(other_buf, sizeof(other_buf), 3);
		memcpy(other_copy, other_buf, sizeof(other_buf));
		other_mr = ibv_reg_mr(other_pd, other_buf, sizeof(other_buf),
				      IBV_ACCESS_LOCAL_WRITE |
				      IBV_ACCESS_REMOTE_WRITE |
				      IBV_ACCESS_REMOTE_READ |
				      IBV_ACCESS_REMOTE_ATOMIC);
		assert_non_null(other_mr);
		rkey = other_mr->rkey;
		raddr = (uintptr_t)other_buf;
		break;
	}
	case 5: /* the requester's own MR: another client's key */
		rkey = p.amr->rkey;
		raddr = (uintptr_t)p.abuf;
		break;
	case 6: { /* a key that was valid and is not any more */
		struct ibv_mr *gone = ibv_reg_mr(p.b.pd, p.bbuf, 4096,
						 IBV_ACCESS_LOCAL_WRITE |
						 IBV_ACCESS_REMOTE_WRITE |
						 IBV_ACCESS_REMOTE_READ |
						 IBV_ACCESS_REMOTE_ATOMIC);

		assert_non_null(gone);
		rkey = gone->rkey;
		raddr = (uintptr_t)p.bbuf;
		assert_int_equal(ibv_dereg_mr(gone), 0);
		break;
	}
	}
	snprintf(what, sizeof(what), "%s, case %d", vu_opcode_str(op), how);
	make_wr(&wr, &sge, 10, op, p.abuf, len, p.amr->lkey, raddr, rkey);
	chain_after(&p, &wr, IBV_WC_REM_ACCESS_ERR, what);
	responder_access_error(&p, what);
	expect_pattern(p.abuf, BUF_LEN, 1, what);
	if (other_mr) {
		assert_memory_equal(other_buf, other_copy, sizeof(other_buf));
		ibv_dereg_mr(other_mr);
		ibv_dealloc_pd(other_pd);
	}
	pair_free(&p);
}

static void test_rem_access_bad_rkey(void **state)
{
	const unsigned int all = IBV_ACCESS_LOCAL_WRITE |
		IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		IBV_ACCESS_REMOTE_ATOMIC;
	static const enum ibv_wr_opcode ops[] = {
		IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
		IBV_WR_RDMA_READ, IBV_WR_ATOMIC_FETCH_AND_ADD,
		IBV_WR_ATOMIC_CMP_AND_SWP,
	};

	(void)state;
	for (unsigned int i = 0; i < VU_ARRAY_SIZE(ops); i++)
		for (int how = 1; how <= 6; how++)
			rem_access_case(ops[i], all, how);
}

static void test_rem_access_rights(void **state)
{
	(void)state;
	/* the MR lacks the right the operation needs */
	rem_access_case(IBV_WR_RDMA_WRITE, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, 0);
	rem_access_case(IBV_WR_RDMA_WRITE_WITH_IMM, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_READ, 0);
	rem_access_case(IBV_WR_RDMA_READ, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC, 0);
	rem_access_case(IBV_WR_RDMA_READ, 0, 0);
	rem_access_case(IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, 0);
	rem_access_case(IBV_WR_ATOMIC_CMP_AND_SWP, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, 0);
}

/* UC has no NAK: a write with a bad key is dropped at the responder and
 * the requester completes it; nothing lands. */
static void test_uc_bad_rkey(void **state)
{
	struct pair_opts o = opts_default(IBV_QPT_UC);
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct pair p;

	(void)state;
	pair_create(&p, &o);
	make_wr(&wr, &sge, 1, IBV_WR_RDMA_WRITE, p.abuf, 64, p.amr->lkey,
		(uintptr_t)p.bbuf, p.bmr->rkey ^ 0x5a);
	post_send_ok(p.a.qp, &wr);
	expect_wc(p.a.scq, 1, IBV_WC_SUCCESS, "UC write, bad rkey");
	/* a good one behind it lands: the drop did not break the QP pair */
	make_wr(&wr, &sge, 2, IBV_WR_RDMA_WRITE, p.abuf, 64, p.amr->lkey,
		(uintptr_t)p.bbuf + 4096, p.bmr->rkey);
	post_send_ok(p.a.qp, &wr);
	expect_wc(p.a.scq, 2, IBV_WC_SUCCESS, "UC write");
	/* UC: the good write may land only once the QP pair is back in
	 * step; it has, since the requester completed it in order */
	assert_memory_equal(p.bbuf + 4096, p.abuf, 64);
	fill(p.bbuf, BUF_LEN, 2);
	expect_pattern(p.bbuf, BUF_LEN, 2, "UC");
	pair_free(&p);
}

/* ---- local protection ---- */

static void loc_prot_case(int how)
{
	struct pair_opts o = opts_default(IBV_QPT_RC);
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_pd *other_pd = NULL;
	struct ibv_mr *other_mr = NULL;
	enum ibv_wr_opcode op = IBV_WR_SEND;
	struct pair p;
	uint8_t *laddr;
	uint32_t lkey, len = 64;
	char what[64];

	if (how == 5)	/* a READ's sink must be locally writable */
		o.a_mr_access = 0;
	pair_create(&p, &o);
	laddr = p.abuf;
	lkey = p.amr->lkey;
	switch (how) {
	case 0: /* a key that names nothing */
		lkey ^= 0x5a;
		break;
	case 1: /* an MR of this client in another PD */
		other_pd = ibv_alloc_pd(ctx_a);
		assert_non_null(other_pd);
		other_mr = ibv_reg_mr(other_pd, p.abuf, 4096,
				      IBV_ACCESS_LOCAL_WRITE);
		assert_non_null(other_mr);
		lkey = other_mr->lkey;
		break;
	case 2: /* past the MR's end */
		laddr = p.abuf + BUF_LEN - 32;
		break;
	case 3: /* another client's key (B's, B's memory) */
		lkey = p.bmr->lkey;
		laddr = p.bbuf;
		break;
	case 4: /* a WRITE from a bad key */
		op = IBV_WR_RDMA_WRITE;
		lkey ^= 0x5a;
		break;
	case 5: /* a READ into an MR without local write */
		op = IBV_WR_RDMA_READ;
		break;
	}
	snprintf(what, sizeof(what), "local protection, case %d", how);
	make_wr(&wr, &sge, 10, op, laddr, len, lkey, (uintptr_t)p.bbuf,
		p.bmr->rkey);
	chain_after(&p, &wr, IBV_WC_LOC_PROT_ERR, what);
	/* B had nothing to do with it: still RTS, its receive waiting */
	assert_int_equal(qp_state(p.b.qp), IBV_QPS_RTS);
	expect_no_wc(p.b.rcq, what);
	expect_pattern(p.bbuf, BUF_LEN, 2, what);
	expect_pattern(p.abuf, BUF_LEN, 1, what);
	expect_no_event(ctx_b, what);
	if (other_mr) {
		ibv_dereg_mr(other_mr);
		ibv_dealloc_pd(other_pd);
	}
	pair_free(&p);
}

static void test_loc_prot(void **state)
{
	(void)state;
	for (int how = 0; how <= 5; how++)
		loc_prot_case(how);
}

/* A receive whose SGE has a bad lkey: LOC_PROT_ERR at the receiver, a
 * remote operational error at the sender. */
static void test_recv_loc_prot(void **state)
{
	struct pair_opts o = opts_default(IBV_QPT_RC);
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct pair p;

	(void)state;
	pair_create(&p, &o);
	post_recv(p.b.qp, 700, p.bbuf, 4096, p.bmr->lkey ^ 0x5a);
	post_recv(p.b.qp, 701, p.bbuf + 4096, 4096, p.bmr->lkey);
	make_wr(&wr, &sge, 1, IBV_WR_SEND, p.abuf, 64, p.amr->lkey, 0, 0);
	post_send_ok(p.a.qp, &wr);
	expect_wc(p.b.rcq, 700, IBV_WC_LOC_PROT_ERR, "receiver");
	expect_wc(p.b.rcq, 701, IBV_WC_WR_FLUSH_ERR, "receiver");
	expect_wc(p.a.scq, 1, IBV_WC_REM_OP_ERR, "sender");
	wait_state(p.b.qp, IBV_QPS_ERR);
	wait_state(p.a.qp, IBV_QPS_ERR);
	expect_pattern(p.bbuf, BUF_LEN, 2, "receiver's memory");
	pair_free(&p);
}

/* ---- local length ---- */

static void test_loc_len(void **state)
{
	struct pair_opts o = opts_default(IBV_QPT_RC);
	struct ibv_send_wr wr[3];
	struct ibv_sge sge[3];
	struct pair p;

	(void)state;
	pair_create(&p, &o);
	/* a 100-byte receive for a 200-byte message */
	post_recv(p.b.qp, 700, p.bbuf, 100, p.bmr->lkey);
	post_recv(p.b.qp, 701, p.bbuf + 4096, 4096, p.bmr->lkey);
	post_recv(p.a.qp, 900, p.abuf + 60000, 100, p.amr->lkey);
	make_wr(&wr[0], &sge[0], 1, IBV_WR_SEND, p.abuf, 200, p.amr->lkey, 0,
		0);
	make_wr(&wr[1], &sge[1], 2, IBV_WR_SEND, p.abuf, 10, p.amr->lkey, 0,
		0);
	make_wr(&wr[2], &sge[2], 3, IBV_WR_RDMA_WRITE, p.abuf, 10,
		p.amr->lkey, (uintptr_t)p.bbuf + 8192, p.bmr->rkey);
	wr[0].next = &wr[1];
	wr[1].next = &wr[2];
	post_send_ok(p.a.qp, wr);
	expect_wc(p.b.rcq, 700, IBV_WC_LOC_LEN_ERR, "receiver");
	expect_wc(p.b.rcq, 701, IBV_WC_WR_FLUSH_ERR, "receiver");
	expect_wc(p.a.scq, 1, IBV_WC_REM_INV_REQ_ERR, "sender");
	expect_wc(p.a.scq, 2, IBV_WC_WR_FLUSH_ERR, "sender");
	expect_wc(p.a.scq, 3, IBV_WC_WR_FLUSH_ERR, "sender");
	expect_wc(p.a.rcq, 900, IBV_WC_WR_FLUSH_ERR, "sender's receive");
	wait_state(p.b.qp, IBV_QPS_ERR);
	wait_state(p.a.qp, IBV_QPS_ERR);
	/* nothing past the receive buffer was written */
	expect_pattern_at(p.bbuf, 100, BUF_LEN - 100, 2, "receiver's memory");
	pair_free(&p);
}

/* A UD message larger than the path MTU: refused at post time or a
 * local length error, and nothing arrives. */
static void test_ud_too_long(void **state)
{
	struct pair_opts o = opts_default(IBV_QPT_UD);
	unsigned int mtu = vu_mtu_bytes(vu_active_mtu(ctx_a));
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge sge;
	union ibv_gid gid;
	struct ibv_ah *ah;
	struct pair p;
	int ret;

	(void)state;
	pair_create(&p, &o);
	assert_int_equal(vu_gid(ctx_b, &gid), 0);
	ah = vu_ah(p.a.pd, &gid);
	assert_non_null(ah);
	post_recv(p.b.qp, 700, p.bbuf, BUF_LEN, p.bmr->lkey);
	make_wr(&wr, &sge, 1, IBV_WR_SEND, p.abuf, mtu + 1, p.amr->lkey, 0,
		0);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = p.b.qp->qp_num;
	wr.wr.ud.remote_qkey = o.cb.qkey;
	ret = ibv_post_send(p.a.qp, &wr, &bad);
	if (ret) {
		assert_int_equal(ret, EINVAL);
		assert_ptr_equal(bad, &wr);
	} else {
		expect_wc(p.a.scq, 1, IBV_WC_LOC_LEN_ERR, "UD too long");
	}
	/* ... and one that fits is received */
	make_wr(&wr, &sge, 2, IBV_WR_SEND, p.abuf, mtu, p.amr->lkey, 0, 0);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = p.b.qp->qp_num;
	wr.wr.ud.remote_qkey = o.cb.qkey;
	if (!ret) {
		/* the error took the send queue down: SQE (UD's own error
		 * state: SQE -> RTS) or ERR (RESET -> ... -> RTS) */
		struct vu_addr none = { 0 };
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS };
		long end = vu_now_ms() + VU_WAIT_MS;
		enum ibv_qp_state s;

		while ((s = qp_state(p.a.qp)) != IBV_QPS_SQE &&
		       s != IBV_QPS_ERR) {
			if (vu_now_ms() > end)
				fail_msg("UD QP in state %d after a send "
					 "error", s);
			vu_sleep_ms(2);
		}
		print_message("UD QP after a local length error: %s\n",
			      s == IBV_QPS_SQE ? "SQE" : "ERR");
		if (s == IBV_QPS_SQE) {
			assert_int_equal(ibv_modify_qp(p.a.qp, &a,
						       IBV_QP_STATE), 0);
		} else {
			a.qp_state = IBV_QPS_RESET;
			assert_int_equal(ibv_modify_qp(p.a.qp, &a,
						       IBV_QP_STATE), 0);
			assert_int_equal(vu_connect(p.a.qp, &none, &o.ca), 0);
		}
	}
	post_send_ok(p.a.qp, &wr);
	expect_wc(p.a.scq, 2, IBV_WC_SUCCESS, "UD at the MTU");
	expect_wc(p.b.rcq, 700, IBV_WC_SUCCESS, "UD at the MTU");
	ibv_destroy_ah(ah);
	pair_free(&p);
}

/* UD with the wrong Q_Key: dropped; nothing arrives, the sender completes. */
static void test_ud_bad_qkey(void **state)
{
	struct pair_opts o = opts_default(IBV_QPT_UD);
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	union ibv_gid gid;
	struct ibv_ah *ah;
	struct pair p;

	(void)state;
	pair_create(&p, &o);
	assert_int_equal(vu_gid(ctx_b, &gid), 0);
	ah = vu_ah(p.a.pd, &gid);
	assert_non_null(ah);
	post_recv(p.b.qp, 700, p.bbuf, 4096, p.bmr->lkey);
	make_wr(&wr, &sge, 1, IBV_WR_SEND, p.abuf, 64, p.amr->lkey, 0, 0);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = p.b.qp->qp_num;
	wr.wr.ud.remote_qkey = o.cb.qkey + 1;
	post_send_ok(p.a.qp, &wr);
	expect_wc(p.a.scq, 1, IBV_WC_SUCCESS, "UD, wrong qkey");
	/* the right one, behind it, takes the receive */
	make_wr(&wr, &sge, 2, IBV_WR_SEND, p.abuf + 100, 64, p.amr->lkey, 0,
		0);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = p.b.qp->qp_num;
	wr.wr.ud.remote_qkey = o.cb.qkey;
	post_send_ok(p.a.qp, &wr);
	expect_wc(p.a.scq, 2, IBV_WC_SUCCESS, "UD");
	expect_wc(p.b.rcq, 700, IBV_WC_SUCCESS, "UD");
	assert_memory_equal(p.bbuf + 40, p.abuf + 100, 64);
	ibv_destroy_ah(ah);
	pair_free(&p);
}

/* ---- invalid requests ---- */

static void inv_req_case(enum ibv_wr_opcode op, unsigned int b_qp_access,
			 bool misaligned)
{
	struct pair_opts o = opts_default(IBV_QPT_RC);
	bool atomic = op == IBV_WR_ATOMIC_CMP_AND_SWP ||
		      op == IBV_WR_ATOMIC_FETCH_AND_ADD;
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct pair p;
	char what[96];

	o.cb.access = b_qp_access;
	pair_create(&p, &o);
	snprintf(what, sizeof(what), "%s, B's QP access %#x%s",
		 vu_opcode_str(op), b_qp_access,
		 misaligned ? ", misaligned" : "");
	make_wr(&wr, &sge, 10, op, p.abuf, atomic ? 8 : 64, p.amr->lkey,
		(uintptr_t)p.bbuf + 1024 + (misaligned ? 4 : 0), p.bmr->rkey);
	chain_after(&p, &wr, IBV_WC_REM_INV_REQ_ERR, what);
	wait_state(p.b.qp, IBV_QPS_ERR);
	expect_wc(p.b.rcq, 800, IBV_WC_WR_FLUSH_ERR, what);
	expect_pattern(p.bbuf, BUF_LEN, 2, what);
	pair_free(&p);
}

static void test_inv_req(void **state)
{
	const unsigned int lw = IBV_ACCESS_LOCAL_WRITE;

	(void)state;
	inv_req_case(IBV_WR_RDMA_READ, lw | IBV_ACCESS_REMOTE_WRITE |
		     IBV_ACCESS_REMOTE_ATOMIC, false);
	inv_req_case(IBV_WR_RDMA_WRITE, lw | IBV_ACCESS_REMOTE_READ |
		     IBV_ACCESS_REMOTE_ATOMIC, false);
	inv_req_case(IBV_WR_RDMA_WRITE_WITH_IMM, lw, false);
	inv_req_case(IBV_WR_ATOMIC_FETCH_AND_ADD, lw | IBV_ACCESS_REMOTE_READ |
		     IBV_ACCESS_REMOTE_WRITE, false);
	inv_req_case(IBV_WR_ATOMIC_CMP_AND_SWP, lw, false);
	/* every right, but not 8-byte aligned */
	inv_req_case(IBV_WR_ATOMIC_FETCH_AND_ADD, lw | IBV_ACCESS_REMOTE_READ |
		     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC, true);
	inv_req_case(IBV_WR_ATOMIC_CMP_AND_SWP, lw | IBV_ACCESS_REMOTE_READ |
		     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC, true);
}

/* ---- receiver not ready ---- */

static void test_rnr_exceeded(void **state)
{
	(void)state;
	for (uint8_t r = 0; r <= 6; r++) {
		struct pair_opts o = opts_default(IBV_QPT_RC);
		struct ibv_send_wr wr[2];
		struct ibv_sge sge[2];
		struct pair p;
		char what[64];

		snprintf(what, sizeof(what), "rnr_retry %u", r);
		o.ca.rnr_retry = r;
		o.cb.min_rnr_timer = 1;	/* 0.01 ms */
		pair_create(&p, &o);
		make_wr(&wr[0], &sge[0], 1, IBV_WR_SEND, p.abuf, 64,
			p.amr->lkey, 0, 0);
		make_wr(&wr[1], &sge[1], 2, IBV_WR_SEND, p.abuf, 64,
			p.amr->lkey, 0, 0);
		wr[0].next = &wr[1];
		post_send_ok(p.a.qp, wr);
		expect_wc(p.a.scq, 1, IBV_WC_RNR_RETRY_EXC_ERR, what);
		expect_wc(p.a.scq, 2, IBV_WC_WR_FLUSH_ERR, what);
		wait_state(p.a.qp, IBV_QPS_ERR);
		/* the responder did nothing wrong */
		assert_int_equal(qp_state(p.b.qp), IBV_QPS_RTS);
		expect_no_event(ctx_b, what);
		pair_free(&p);
	}
}

/* rnr_retry 7: the send waits for as long as it takes, then lands. */
static void test_rnr_forever(void **state)
{
	struct pair_opts o = opts_default(IBV_QPT_RC);
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc;
	struct pair p;

	(void)state;
	o.ca.rnr_retry = 7;
	o.cb.min_rnr_timer = 1;
	pair_create(&p, &o);
	make_wr(&wr, &sge, 1, IBV_WR_SEND, p.abuf, 64, p.amr->lkey, 0, 0);
	post_send_ok(p.a.qp, &wr);
	/* however long we look: no receive, no completion (a device that
	 * gave up would have, after 7 retries of 0.01 ms) */
	assert_int_equal(vu_poll(p.a.scq, &wc, 1, 300), 0);
	assert_int_equal(qp_state(p.a.qp), IBV_QPS_RTS);
	post_recv(p.b.qp, 700, p.bbuf, 4096, p.bmr->lkey);
	expect_wc(p.a.scq, 1, IBV_WC_SUCCESS, "rnr_retry 7");
	expect_wc(p.b.rcq, 700, IBV_WC_SUCCESS, "rnr_retry 7");
	assert_memory_equal(p.bbuf, p.abuf, 64);
	pair_free(&p);
}

/* ---- transport retries exceeded ---- */

static void test_retry_exc_destroyed(void **state)
{
	static const uint8_t retries[] = { 0, 1, 7 };

	(void)state;
	for (unsigned int i = 0; i < VU_ARRAY_SIZE(retries); i++) {
		struct pair_opts o = opts_default(IBV_QPT_RC);
		struct ibv_send_wr wr[3];
		struct ibv_sge sge[3];
		struct pair p;
		char what[64];

		snprintf(what, sizeof(what), "retry_cnt %u, peer destroyed",
			 retries[i]);
		o.ca.timeout = 1;	/* 8 us */
		o.ca.retry_cnt = retries[i];
		pair_create(&p, &o);
		/* B's QP goes; its number names nothing now */
		assert_int_equal(ibv_destroy_qp(p.b.qp), 0);
		p.b.qp = NULL;
		post_recv(p.a.qp, 900, p.abuf + 60000, 100, p.amr->lkey);
		make_wr(&wr[0], &sge[0], 1, IBV_WR_RDMA_WRITE, p.abuf, 64,
			p.amr->lkey, (uintptr_t)p.bbuf, p.bmr->rkey);
		make_wr(&wr[1], &sge[1], 2, IBV_WR_SEND, p.abuf, 64,
			p.amr->lkey, 0, 0);
		make_wr(&wr[2], &sge[2], 3, IBV_WR_RDMA_READ, p.abuf, 64,
			p.amr->lkey, (uintptr_t)p.bbuf, p.bmr->rkey);
		wr[0].next = &wr[1];
		wr[1].next = &wr[2];
		post_send_ok(p.a.qp, wr);
		expect_wc(p.a.scq, 1, IBV_WC_RETRY_EXC_ERR, what);
		expect_wc(p.a.scq, 2, IBV_WC_WR_FLUSH_ERR, what);
		expect_wc(p.a.scq, 3, IBV_WC_WR_FLUSH_ERR, what);
		expect_wc(p.a.rcq, 900, IBV_WC_WR_FLUSH_ERR, what);
		wait_state(p.a.qp, IBV_QPS_ERR);
		expect_pattern(p.bbuf, BUF_LEN, 2, what);
		expect_pattern(p.abuf, BUF_LEN, 1, what);
		pair_free(&p);
	}
}

/* A peer in its own process, SIGKILLed: writes to it complete until the
 * device has let it go, then the next fails with RETRY_EXC_ERR. */
static void test_retry_exc_peer_gone(void **state)
{
	const char *peer_bin = SV_PEER_BIN;
	struct vu_qp_caps caps = { .send_wr = 16, .recv_wr = 16, .cqe = 64 };
	struct vu_conn c = vu_conn_default();
	int to_child[2], from_child[2], st;
	unsigned int qpn, psn, rkey, len, ok = 0;
	struct vu_addr me, peer;
	char line[256], hex[40];
	uint64_t addr;
	struct ibv_mr *mr;
	struct vu_ep ep;
	uint8_t buf[64];
	FILE *in, *out;
	long end;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(to_child), 0);
	assert_int_equal(pipe(from_child), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(to_child[0], 0);
		dup2(from_child[1], 1);
		close(to_child[1]);
		close(from_child[0]);
		execl(peer_bin, peer_bin, (char *)NULL);
		_exit(127);
	}
	close(to_child[0]);
	close(from_child[1]);
	in = fdopen(from_child[0], "r");
	out = fdopen(to_child[1], "w");
	assert_non_null(in);
	assert_non_null(out);
	if (!fgets(line, sizeof(line), in) ||
	    sscanf(line, "%u %u %39s %u %" SCNu64 " %u", &qpn, &psn, hex,
		   &rkey, &addr, &len) != 6) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		fail_msg("sv_peer said: %s", line);
	}
	memset(&peer, 0, sizeof(peer));
	peer.qpn = qpn;
	peer.psn = psn;
	for (int i = 0; i < 16; i++) {
		unsigned int b;

		assert_int_equal(sscanf(hex + 2 * i, "%2x", &b), 1);
		peer.gid.raw[i] = (uint8_t)b;
	}
	c.timeout = 1;
	c.retry_cnt = 2;
	assert_int_equal(vu_ep_create(&ep, ctx_a, NULL, IBV_QPT_RC, &caps), 0);
	mr = ibv_reg_mr(ep.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(mr);
	assert_int_equal(vu_connect(ep.qp, &peer, &c), 0);
	me = vu_addr_of(ep.qp, c.sq_psn);
	for (int i = 0; i < 16; i++)
		sprintf(hex + 2 * i, "%02x", me.gid.raw[i]);
	fprintf(out, "%u %u %s\n", me.qpn, me.psn, hex);
	fflush(out);
	assert_non_null(fgets(line, sizeof(line), in));
	assert_string_equal(line, "ready\n");

	/* it works while the peer lives */
	{
		struct ibv_send_wr wr;
		struct ibv_sge sge;

		make_wr(&wr, &sge, 1, IBV_WR_RDMA_WRITE, buf, 64, mr->lkey,
			addr, rkey);
		post_send_ok(ep.qp, &wr);
		expect_wc(ep.scq, 1, IBV_WC_SUCCESS, "write to a live peer");
	}
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	fclose(in);
	fclose(out);
	for (end = vu_now_ms() + VU_WAIT_MS;; ok++) {
		struct ibv_send_wr wr;
		struct ibv_sge sge;
		struct ibv_wc wc;

		make_wr(&wr, &sge, 100 + ok, IBV_WR_RDMA_WRITE, buf, 64,
			mr->lkey, addr, rkey);
		post_send_ok(ep.qp, &wr);
		assert_int_equal(vu_poll(ep.scq, &wc, 1, VU_WAIT_MS), 1);
		assert_int_equal(wc.wr_id, 100 + ok);
		if (wc.status == IBV_WC_SUCCESS) {
			if (vu_now_ms() > end)
				fail_msg("writes to a killed peer still "
					 "succeed after %d ms", VU_WAIT_MS);
			vu_sleep_ms(1);
			continue;
		}
		if (wc.status != IBV_WC_RETRY_EXC_ERR)
			fail_msg("write to a killed peer: %s",
				 ibv_wc_status_str(wc.status));
		break;
	}
	print_message("%u writes completed between the kill and the error\n",
		      ok);
	wait_state(ep.qp, IBV_QPS_ERR);
	ibv_dereg_mr(mr);
	vu_ep_destroy(&ep);
}

/* ---- moving a QP to ERR by hand, and back ---- */

static void test_modify_to_err_and_back(void **state)
{
	struct pair_opts o = opts_default(IBV_QPT_RC);
	struct ibv_qp_attr a;
	struct ibv_send_wr wr[2];
	struct ibv_sge sge[2];
	struct vu_addr aa, ba;
	struct pair p;

	(void)state;
	pair_create(&p, &o);
	/* sends stuck in RNR (no receives) and receives of A's own */
	make_wr(&wr[0], &sge[0], 1, IBV_WR_SEND, p.abuf, 64, p.amr->lkey, 0,
		0);
	make_wr(&wr[1], &sge[1], 2, IBV_WR_SEND, p.abuf, 64, p.amr->lkey, 0,
		0);
	wr[0].next = &wr[1];
	post_recv(p.a.qp, 900, p.abuf + 60000, 100, p.amr->lkey);
	post_send_ok(p.a.qp, wr);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	assert_int_equal(ibv_modify_qp(p.a.qp, &a, IBV_QP_STATE), 0);
	expect_wc(p.a.scq, 1, IBV_WC_WR_FLUSH_ERR, "moved to ERR");
	expect_wc(p.a.scq, 2, IBV_WC_WR_FLUSH_ERR, "moved to ERR");
	expect_wc(p.a.rcq, 900, IBV_WC_WR_FLUSH_ERR, "moved to ERR");
	expect_no_wc(p.a.scq, "moved to ERR");
	wait_state(p.a.qp, IBV_QPS_ERR);
	/* B's QP too, with a receive posted */
	post_recv(p.b.qp, 800, p.bbuf, 4096, p.bmr->lkey);
	assert_int_equal(ibv_modify_qp(p.b.qp, &a, IBV_QP_STATE), 0);
	expect_wc(p.b.rcq, 800, IBV_WC_WR_FLUSH_ERR, "B moved to ERR");

	/* ERR -> RESET -> INIT -> RTR -> RTS, and data moves again */
	a.qp_state = IBV_QPS_RESET;
	assert_int_equal(ibv_modify_qp(p.a.qp, &a, IBV_QP_STATE), 0);
	assert_int_equal(ibv_modify_qp(p.b.qp, &a, IBV_QP_STATE), 0);
	assert_int_equal(qp_state(p.a.qp), IBV_QPS_RESET);
	o.ca.sq_psn = o.cb.sq_psn = 0x777;
	aa = vu_addr_of(p.a.qp, 0x777);
	ba = vu_addr_of(p.b.qp, 0x777);
	assert_int_equal(vu_connect(p.a.qp, &ba, &o.ca), 0);
	assert_int_equal(vu_connect(p.b.qp, &aa, &o.cb), 0);
	post_recv(p.b.qp, 801, p.bbuf, 4096, p.bmr->lkey);
	make_wr(&wr[0], &sge[0], 3, IBV_WR_SEND, p.abuf + 10, 64, p.amr->lkey,
		0, 0);
	post_send_ok(p.a.qp, wr);
	expect_wc(p.a.scq, 3, IBV_WC_SUCCESS, "after reset");
	expect_wc(p.b.rcq, 801, IBV_WC_SUCCESS, "after reset");
	assert_memory_equal(p.bbuf, p.abuf + 10, 64);
	pair_free(&p);
}

/* What this process writes on stderr between stderr_catch() and
 * stderr_release() (SOFTVERBS_DEBUG's messages), NUL-terminated in buf. */
static int caught_fd = -1, saved_fd = -1;

static void stderr_catch(void)
{
	FILE *f = tmpfile();

	assert_non_null(f);
	fflush(stderr);
	caught_fd = dup(fileno(f));
	fclose(f);
	saved_fd = dup(2);
	assert_true(caught_fd >= 0 && saved_fd >= 0);
	assert_int_equal(dup2(caught_fd, 2), 2);
}

static void stderr_release(char *buf, size_t len)
{
	ssize_t n;

	fflush(stderr);
	assert_int_equal(dup2(saved_fd, 2), 2);
	close(saved_fd);
	n = pread(caught_fd, buf, len - 1, 0);
	close(caught_fd);
	buf[n > 0 ? n : 0] = '\0';
}

/* An RC QP of pd on scq and rcq (4 WRs, 1 SGE each way), in INIT. */
static struct ibv_qp *rc_qp_init(struct ibv_pd *pd, struct ibv_cq *scq,
				 struct ibv_cq *rcq)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = scq;
	ia.recv_cq = rcq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd, &ia);
	assert_non_null(qp);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				       IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
	return qp;
}

/* A QP moved to RESET, or destroyed, leaves none of its completions in its
 * CQs (mlx4 and mlx5 clean them; rdma-core's tests/test_mr.py restates its
 * QPs through RESET and polls again); another QP's completions on the same
 * CQ stay, in order. */
static void test_reset_drops_cqes(void **state)
{
	struct pair_opts o = opts_default(IBV_QPT_RC);
	char msg[256], want[128];
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq3, *evcq;
	void *evctx;
	uint32_t qpn;
	struct ibv_qp_attr a;
	struct ibv_qp *q2;
	struct pair p;

	(void)state;
	pair_create(&p, &o);
	q2 = rc_qp_init(p.a.pd, p.a.scq, p.a.rcq);
	/* A's receives flushed: the first polled, the second left */
	post_recv(p.a.qp, 900, p.abuf, 64, p.amr->lkey);
	post_recv(p.a.qp, 901, p.abuf, 64, p.amr->lkey);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	assert_int_equal(ibv_modify_qp(p.a.qp, &a, IBV_QP_STATE), 0);
	expect_wc(p.a.rcq, 900, IBV_WC_WR_FLUSH_ERR, "A moved to ERR");
	/* then the other QP's, behind it */
	post_recv(q2, 700, p.abuf, 64, p.amr->lkey);
	assert_int_equal(ibv_modify_qp(q2, &a, IBV_QP_STATE), 0);
	a.qp_state = IBV_QPS_RESET;
	stderr_catch();
	assert_int_equal(ibv_modify_qp(p.a.qp, &a, IBV_QP_STATE), 0);
	stderr_release(msg, sizeof(msg));
	expect_wc(p.a.rcq, 700, IBV_WC_WR_FLUSH_ERR, "A reset, the other QP's");
	expect_no_wc(p.a.rcq, "A reset");
	/* SOFTVERBS_DEBUG (main) tells what went */
	snprintf(want, sizeof(want),
		 "softverbs: QP 0x%06x reset: 1 completion not polled dropped\n",
		 p.a.qp->qp_num);
	assert_string_equal(msg, want);
	/* a destroyed QP's completions go with it */
	post_recv(q2, 701, p.abuf, 64, p.amr->lkey);
	assert_int_equal(ibv_destroy_qp(q2), 0);
	expect_no_wc(p.a.rcq, "the other QP destroyed");
	expect_no_wc(p.a.scq, "the other QP destroyed");
	/* and SOFTVERBS_DEBUG says so: a QP in ERR on a CQ of its own, its
	 * receive's flush awaited through the CQ's channel (not polled) */
	ch = ibv_create_comp_channel(p.a.ctx);
	assert_non_null(ch);
	cq3 = ibv_create_cq(p.a.ctx, 4, NULL, ch, 0);
	assert_non_null(cq3);
	q2 = rc_qp_init(p.a.pd, cq3, cq3);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	assert_int_equal(ibv_modify_qp(q2, &a, IBV_QP_STATE), 0);
	assert_int_equal(ibv_req_notify_cq(cq3, 0), 0);
	post_recv(q2, 702, p.abuf, 64, p.amr->lkey);
	assert_int_equal(ibv_get_cq_event(ch, &evcq, &evctx), 0);
	assert_ptr_equal(evcq, cq3);
	ibv_ack_cq_events(cq3, 1);
	qpn = q2->qp_num;
	stderr_catch();
	assert_int_equal(ibv_destroy_qp(q2), 0);
	stderr_release(msg, sizeof(msg));
	snprintf(want, sizeof(want),
		 "softverbs: QP 0x%06x destroyed: 1 completion not polled "
		 "dropped\n", qpn);
	assert_string_equal(msg, want);
	expect_no_wc(cq3, "its QP destroyed");
	assert_int_equal(ibv_destroy_cq(cq3), 0);
	assert_int_equal(ibv_destroy_comp_channel(ch), 0);
	pair_free(&p);
}

/* ---- posting what cannot be posted ---- */

static void test_post_refused(void **state)
{
	struct pair_opts o = opts_default(IBV_QPT_RC);
	struct ibv_send_wr wr[3], *bad;
	struct ibv_recv_wr rwr[2], *rbad;
	struct ibv_sge sge[8], rsge[8];
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr ia;
	struct pair p;
	int ret;

	(void)state;
	pair_create(&p, &o);
	memset(&qa, 0, sizeof(qa));
	assert_int_equal(ibv_query_qp(p.a.qp, &qa, IBV_QP_CAP, &ia), 0);
	memset(sge, 0, sizeof(sge));
	for (int i = 0; i < 8; i++) {
		sge[i].addr = (uintptr_t)p.abuf + 64u * (unsigned int)i;
		sge[i].length = 8;
		sge[i].lkey = p.amr->lkey;
		rsge[i] = sge[i];
		rsge[i].addr = (uintptr_t)p.bbuf + 64u * (unsigned int)i;
		rsge[i].lkey = p.bmr->lkey;
	}
	/* more SGEs than the QP holds, second in a chain: the first is
	 * posted, the call fails with bad_wr at the second */
	if (qa.cap.max_send_sge < 8) {
		post_recv(p.b.qp, 800, p.bbuf + 4096, 4096, p.bmr->lkey);
		make_wr(&wr[0], &sge[0], 1, IBV_WR_SEND, p.abuf, 8,
			p.amr->lkey, 0, 0);
		make_wr(&wr[1], &sge[1], 2, IBV_WR_SEND, p.abuf, 8,
			p.amr->lkey, 0, 0);
		wr[1].sg_list = sge;
		wr[1].num_sge = (int)qa.cap.max_send_sge + 1;
		wr[0].next = &wr[1];
		bad = NULL;
		ret = ibv_post_send(p.a.qp, wr, &bad);
		assert_int_equal(ret, EINVAL);
		assert_ptr_equal(bad, &wr[1]);
		expect_wc(p.a.scq, 1, IBV_WC_SUCCESS, "the WR before");
		expect_wc(p.b.rcq, 800, IBV_WC_SUCCESS, "the WR before");
		expect_no_wc(p.a.scq, "the refused WR");
	}
	/* inline data beyond max_inline_data */
	{
		static uint8_t big[4096];

		make_wr(&wr[0], &sge[0], 3, IBV_WR_RDMA_WRITE, big,
			qa.cap.max_inline_data + 1, 0, (uintptr_t)p.bbuf,
			p.bmr->rkey);
		wr[0].send_flags |= IBV_SEND_INLINE;
		bad = NULL;
		ret = ibv_post_send(p.a.qp, wr, &bad);
		assert_true(ret == EINVAL || ret == ENOMEM);
		assert_ptr_equal(bad, &wr[0]);
	}
	/* an opcode that does not exist */
	make_wr(&wr[0], &sge[0], 4, (enum ibv_wr_opcode)0x7f, p.abuf, 8,
		p.amr->lkey, 0, 0);
	bad = NULL;
	ret = ibv_post_send(p.a.qp, wr, &bad);
	assert_int_equal(ret, EINVAL);
	assert_ptr_equal(bad, &wr[0]);
	/* receives with too many SGEs */
	if (qa.cap.max_recv_sge < 8) {
		memset(rwr, 0, sizeof(rwr));
		rwr[0].wr_id = 1;
		rwr[0].sg_list = rsge;
		rwr[0].num_sge = (int)qa.cap.max_recv_sge + 1;
		rbad = NULL;
		assert_int_equal(ibv_post_recv(p.b.qp, rwr, &rbad), EINVAL);
		assert_ptr_equal(rbad, &rwr[0]);
	}
	/* the QP still works */
	post_recv(p.b.qp, 801, p.bbuf + 8192, 4096, p.bmr->lkey);
	make_wr(&wr[0], &sge[0], 5, IBV_WR_SEND, p.abuf, 8, p.amr->lkey, 0,
		0);
	post_send_ok(p.a.qp, wr);
	expect_wc(p.a.scq, 5, IBV_WC_SUCCESS, "after refusals");
	expect_wc(p.b.rcq, 801, IBV_WC_SUCCESS, "after refusals");
	/* RDMA READ on UC does not exist */
	{
		struct pair_opts u = opts_default(IBV_QPT_UC);
		struct pair q;

		pair_create(&q, &u);
		make_wr(&wr[0], &sge[0], 6, IBV_WR_RDMA_READ, q.abuf, 8,
			q.amr->lkey, (uintptr_t)q.bbuf, q.bmr->rkey);
		bad = NULL;
		ret = ibv_post_send(q.a.qp, wr, &bad);
		if (ret) {
			assert_int_equal(ret, EINVAL);
			assert_ptr_equal(bad, &wr[0]);
		} else {
			struct ibv_wc wc;

			assert_int_equal(vu_poll(q.a.scq, &wc, 1, VU_WAIT_MS),
					 1);
			assert_int_equal(wc.status, IBV_WC_LOC_QP_OP_ERR);
		}
		pair_free(&q);
	}
	pair_free(&p);
}

/* ---- async events ---- */

/* A QP in RTR that receives its first message: COMM_EST. */
static void test_comm_est(void **state)
{
	struct pair_opts o = opts_default(IBV_QPT_RC);
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct pair p;

	(void)state;
	o.no_connect = true;
	pair_create(&p, &o);
	{
		struct vu_addr aa = vu_addr_of(p.a.qp, o.ca.sq_psn);
		struct vu_addr ba = vu_addr_of(p.b.qp, o.cb.sq_psn);

		o.cb.stop_at = IBV_QPS_RTR;
		assert_int_equal(vu_connect(p.a.qp, &ba, &o.ca), 0);
		assert_int_equal(vu_connect(p.b.qp, &aa, &o.cb), 0);
	}
	post_recv(p.b.qp, 700, p.bbuf, 4096, p.bmr->lkey);
	make_wr(&wr, &sge, 1, IBV_WR_SEND, p.abuf, 64, p.amr->lkey, 0, 0);
	post_send_ok(p.a.qp, &wr);
	expect_wc(p.b.rcq, 700, IBV_WC_SUCCESS, "receive in RTR");
	expect_wc(p.a.scq, 1, IBV_WC_SUCCESS, "send to RTR");
	expect_event(ctx_b, IBV_EVENT_COMM_EST, p.b.qp);
	/* once, not per message */
	post_recv(p.b.qp, 701, p.bbuf, 4096, p.bmr->lkey);
	wr.wr_id = 2;
	post_send_ok(p.a.qp, &wr);
	expect_wc(p.a.scq, 2, IBV_WC_SUCCESS, "second send");
	expect_wc(p.b.rcq, 701, IBV_WC_SUCCESS, "second receive");
	expect_no_event(ctx_b, "second message");
	/* and on to RTS */
	assert_int_equal(vu_to_rts(p.b.qp, &o.cb), 0);
	pair_free(&p);
}

static struct ibv_srq *make_srq(struct ibv_pd *pd, uint32_t max_wr)
{
	struct ibv_srq_init_attr sa;

	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = max_wr;
	sa.attr.max_sge = 1;
	return ibv_create_srq(pd, &sa);
}

/* An SRQ armed at 4 with 8 receives: no event until fewer than 4 are left;
 * then one, and the limit is disarmed. */
static void test_srq_limit(void **state)
{
	struct pair_opts o = opts_default(IBV_QPT_RC);
	struct ibv_srq_attr sa;
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_srq *srq;
	struct pair p;
	int i;

	(void)state;
	o.no_connect = true;
	pair_create(&p, &o);
	/* B's QP again, on an SRQ of its PD */
	srq = make_srq(p.b.pd, 16);
	assert_non_null(srq);
	assert_int_equal(ibv_destroy_qp(p.b.qp), 0);
	{
		struct ibv_qp_init_attr ia;

		memset(&ia, 0, sizeof(ia));
		ia.send_cq = p.b.scq;
		ia.recv_cq = p.b.rcq;
		ia.srq = srq;
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_send_wr = 4;
		ia.cap.max_send_sge = 1;
		p.b.qp = ibv_create_qp(p.b.pd, &ia);
		assert_non_null(p.b.qp);
	}
	{
		struct vu_addr aa = vu_addr_of(p.a.qp, o.ca.sq_psn);
		struct vu_addr ba = vu_addr_of(p.b.qp, o.cb.sq_psn);

		assert_int_equal(vu_connect(p.a.qp, &ba, &o.ca), 0);
		assert_int_equal(vu_connect(p.b.qp, &aa, &o.cb), 0);
	}
	for (i = 0; i < 8; i++)
		post_srq_recv(srq, 700 + (uint64_t)i,
			      p.bbuf + 4096 * (size_t)i, 4096, p.bmr->lkey);
	memset(&sa, 0, sizeof(sa));
	sa.srq_limit = 4;
	assert_int_equal(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT), 0);
	memset(&sa, 0, sizeof(sa));
	assert_int_equal(ibv_query_srq(srq, &sa), 0);
	assert_int_equal(sa.srq_limit, 4);
	for (i = 0; i < 5; i++) {
		make_wr(&wr, &sge, 1 + (uint64_t)i, IBV_WR_SEND, p.abuf, 64,
			p.amr->lkey, 0, 0);
		post_send_ok(p.a.qp, &wr);
		expect_wc(p.a.scq, 1 + (uint64_t)i, IBV_WC_SUCCESS, "send");
		expect_wc(p.b.rcq, 700 + (uint64_t)i, IBV_WC_SUCCESS,
			  "SRQ receive");
		if (i < 4)	/* 7, 6, 5, 4 left: not below the limit */
			expect_no_event(ctx_b, "SRQ above its limit");
	}
	expect_event(ctx_b, IBV_EVENT_SRQ_LIMIT_REACHED, srq);
	memset(&sa, 0, sizeof(sa));
	assert_int_equal(ibv_query_srq(srq, &sa), 0);
	assert_int_equal(sa.srq_limit, 0);	/* disarmed */
	/* one more: no second event */
	make_wr(&wr, &sge, 6, IBV_WR_SEND, p.abuf, 64, p.amr->lkey, 0, 0);
	post_send_ok(p.a.qp, &wr);
	expect_wc(p.a.scq, 6, IBV_WC_SUCCESS, "send");
	expect_wc(p.b.rcq, 705, IBV_WC_SUCCESS, "SRQ receive");
	expect_no_event(ctx_b, "a disarmed SRQ");
	/* a QP on an SRQ moved to ERR: LAST_WQE_REACHED */
	{
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

		assert_int_equal(ibv_modify_qp(p.b.qp, &a, IBV_QP_STATE), 0);
		expect_event(ctx_b, IBV_EVENT_QP_LAST_WQE_REACHED, p.b.qp);
	}
	/* the SRQ's receives are not the QP's to flush */
	expect_no_wc(p.b.rcq, "SRQ after its QP's error");
	/* an SRQ with a QP on it is busy */
	assert_int_equal(ibv_destroy_srq(srq), EBUSY);
	assert_int_equal(ibv_destroy_qp(p.b.qp), 0);
	p.b.qp = NULL;
	assert_int_equal(ibv_destroy_srq(srq), 0);
	pair_free(&p);
}

/* More signaled completions than the CQ holds, never polled: CQ_ERR. */
static void test_cq_overrun(void **state)
{
	struct pair_opts o = opts_default(IBV_QPT_RC);
	struct ibv_send_wr wr[64];
	struct ibv_sge sge[64];
	struct pair p;
	int n, i;

	(void)state;
	o.a_caps.cqe = 4;
	o.a_caps.send_wr = 64;
	pair_create(&p, &o);
	n = p.a.scq->cqe + 2;
	if (n > 64)
		skip();
	for (i = 0; i < n; i++) {
		make_wr(&wr[i], &sge[i], (uint64_t)i, IBV_WR_RDMA_WRITE,
			p.abuf, 8, p.amr->lkey,
			(uintptr_t)p.bbuf + 8u * (unsigned int)i,
			p.bmr->rkey);
		wr[i].next = i < n - 1 ? &wr[i + 1] : NULL;
	}
	post_send_ok(p.a.qp, wr);
	expect_event(ctx_a, IBV_EVENT_CQ_ERR, p.a.scq);
	pair_free(&p);
}

/* RTS -> SQD with notification: SQ_DRAINED once the sends are done, and
 * back to RTS. */
static void test_sq_drained(void **state)
{
	struct pair_opts o = opts_default(IBV_QPT_RC);
	struct ibv_send_wr wr[4];
	struct ibv_sge sge[4];
	struct ibv_wc wc[4];
	struct ibv_qp_attr a;
	struct pair p;
	int i, done;

	(void)state;
	pair_create(&p, &o);
	for (i = 0; i < 4; i++) {
		make_wr(&wr[i], &sge[i], (uint64_t)i, IBV_WR_RDMA_WRITE,
			p.abuf, 4096, p.amr->lkey,
			(uintptr_t)p.bbuf + 4096u * (unsigned int)i,
			p.bmr->rkey);
		wr[i].next = i < 3 ? &wr[i + 1] : NULL;
	}
	post_send_ok(p.a.qp, wr);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_SQD;
	a.en_sqd_async_notify = 1;
	assert_int_equal(ibv_modify_qp(p.a.qp, &a, IBV_QP_STATE |
				       IBV_QP_EN_SQD_ASYNC_NOTIFY), 0);
	expect_event(ctx_a, IBV_EVENT_SQ_DRAINED, p.a.qp);
	assert_int_equal(qp_state(p.a.qp), IBV_QPS_SQD);
	/* drained: what had started is complete; WRs not yet started stay
	 * queued until the QP is back in RTS */
	done = ibv_poll_cq(p.a.scq, 4, wc);
	assert_in_range(done, 0, 4);	/* 0: the SQD came before the first */
	for (i = 0; i < done; i++) {
		assert_int_equal(wc[i].status, IBV_WC_SUCCESS);
		assert_int_equal(wc[i].wr_id, i);
	}
	print_message("%d of 4 WRs done when the SQ drained\n", done);
	/* a WR posted in SQD waits as well */
	make_wr(&wr[0], &sge[0], 9, IBV_WR_RDMA_WRITE, p.abuf, 64,
		p.amr->lkey, (uintptr_t)p.bbuf + 20000, p.bmr->rkey);
	wr[0].next = NULL;
	post_send_ok(p.a.qp, wr);
	/* SQD -> RTS: the rest, in order */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	assert_int_equal(ibv_modify_qp(p.a.qp, &a, IBV_QP_STATE), 0);
	for (i = done; i < 4; i++)
		expect_wc(p.a.scq, (uint64_t)i, IBV_WC_SUCCESS, "after SQD");
	expect_wc(p.a.scq, 9, IBV_WC_SUCCESS, "posted in SQD");
	expect_no_wc(p.a.scq, "after SQD");
	assert_memory_equal(p.bbuf, p.abuf, 4096);
	assert_memory_equal(p.bbuf + 20000, p.abuf, 64);
	pair_free(&p);
}

/* ---- completion channels ---- */

static void test_comp_channel(void **state)
{
	struct pair_opts o = opts_default(IBV_QPT_RC);
	struct ibv_comp_channel *ch;
	struct ibv_cq *rcq, *got;
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc[4];
	struct pair p;

	(void)state;
	ch = ibv_create_comp_channel(ctx_b);
	assert_non_null(ch);
	rcq = ibv_create_cq(ctx_b, 64, NULL, ch, 0);
	assert_non_null(rcq);
	o.b_caps.rcq = rcq;
	pair_create(&p, &o);
	for (int i = 0; i < 4; i++)
		post_recv(p.b.qp, 700 + (uint64_t)i, p.bbuf + 4096 * (size_t)i,
			  4096, p.bmr->lkey);

	/* not armed: a completion, no event */
	make_wr(&wr, &sge, 1, IBV_WR_SEND, p.abuf, 64, p.amr->lkey, 0, 0);
	post_send_ok(p.a.qp, &wr);
	expect_wc(p.a.scq, 1, IBV_WC_SUCCESS, "unarmed");
	expect_wc(rcq, 700, IBV_WC_SUCCESS, "unarmed");
	assert_false(vu_fd_readable(ch->fd, 0));

	/* armed for the next completion */
	assert_int_equal(ibv_req_notify_cq(rcq, 0), 0);
	wr.wr_id = 2;
	post_send_ok(p.a.qp, &wr);
	assert_int_equal(vu_cq_event(ch, &got, VU_WAIT_MS), 0);
	assert_ptr_equal(got, rcq);
	expect_wc(p.a.scq, 2, IBV_WC_SUCCESS, "armed");
	expect_wc(rcq, 701, IBV_WC_SUCCESS, "armed");
	/* one event per arming */
	assert_false(vu_fd_readable(ch->fd, 0));

	/* armed for solicited only: an unsolicited one passes by ... */
	assert_int_equal(ibv_req_notify_cq(rcq, 1), 0);
	wr.wr_id = 3;
	post_send_ok(p.a.qp, &wr);
	expect_wc(p.a.scq, 3, IBV_WC_SUCCESS, "unsolicited");
	expect_wc(rcq, 702, IBV_WC_SUCCESS, "unsolicited");
	assert_false(vu_fd_readable(ch->fd, 0));
	/* ... a solicited one rings */
	wr.wr_id = 4;
	wr.send_flags |= IBV_SEND_SOLICITED;
	post_send_ok(p.a.qp, &wr);
	assert_int_equal(vu_cq_event(ch, &got, VU_WAIT_MS), 0);
	assert_ptr_equal(got, rcq);
	expect_wc(p.a.scq, 4, IBV_WC_SUCCESS, "solicited");
	expect_wc(rcq, 703, IBV_WC_SUCCESS, "solicited");
	assert_false(vu_fd_readable(ch->fd, 0));

	/* armed for the next: an error completion rings too */
	assert_int_equal(ibv_req_notify_cq(rcq, 0), 0);
	{
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

		post_recv(p.b.qp, 704, p.bbuf, 4096, p.bmr->lkey);
		assert_int_equal(ibv_modify_qp(p.b.qp, &a, IBV_QP_STATE), 0);
		assert_int_equal(vu_cq_event(ch, &got, VU_WAIT_MS), 0);
		assert_ptr_equal(got, rcq);
		assert_int_equal(vu_poll(rcq, wc, 1, VU_WAIT_MS), 1);
		assert_int_equal(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	}
	pair_free(&p);
	assert_int_equal(ibv_destroy_cq(rcq), 0);
	assert_int_equal(ibv_destroy_comp_channel(ch), 0);
}

/* ---- signaled and unsignaled ---- */

static void test_signaling(void **state)
{
	struct ibv_send_wr wr[10];
	struct ibv_sge sge[10];
	struct ibv_wc wc[10];
	struct pair p;
	int i;

	(void)state;
	for (int sig_all = 0; sig_all <= 1; sig_all++) {
		struct pair_opts o = opts_default(IBV_QPT_RC);

		o.a_caps.sq_sig_all = sig_all;
		pair_create(&p, &o);
		for (i = 0; i < 10; i++) {
			post_recv(p.b.qp, 700 + (uint64_t)i, p.bbuf + 64 * i,
				  64, p.bmr->lkey);
			make_wr(&wr[i], &sge[i], (uint64_t)i, IBV_WR_SEND,
				p.abuf + 64 * i, 64, p.amr->lkey, 0, 0);
			wr[i].send_flags = 0;
			wr[i].next = i < 9 ? &wr[i + 1] : NULL;
		}
		wr[9].send_flags = IBV_SEND_SIGNALED;
		post_send_ok(p.a.qp, wr);
		assert_int_equal(vu_poll(p.b.rcq, wc, 10, VU_WAIT_MS), 10);
		if (sig_all) {
			assert_int_equal(vu_poll(p.a.scq, wc, 10, VU_WAIT_MS),
					 10);
			for (i = 0; i < 10; i++) {
				assert_int_equal(wc[i].wr_id, i);
				assert_int_equal(wc[i].status, IBV_WC_SUCCESS);
			}
		} else {
			expect_wc(p.a.scq, 9, IBV_WC_SUCCESS, "the signaled");
		}
		expect_no_wc(p.a.scq, "after the last");
		assert_memory_equal(p.bbuf, p.abuf, 640);

		/* an unsignaled WR that fails still completes */
		make_wr(&wr[0], &sge[0], 50, IBV_WR_SEND, p.abuf, 64,
			p.amr->lkey ^ 0x5a, 0, 0);
		wr[0].send_flags = 0;
		wr[0].next = NULL;
		post_send_ok(p.a.qp, wr);
		expect_wc(p.a.scq, 50, IBV_WC_LOC_PROT_ERR, "unsignaled");
		pair_free(&p);
	}
}

int main(void)
{
	/* test_reset_drops_cqes reads what it says of dropped completions */
	setenv("SOFTVERBS_DEBUG", "1", 1);
#define T_(f) cmocka_unit_test_setup(f, test_setup)
	const struct CMUnitTest tests[] = {
		T_(test_rem_access_bad_rkey),
		T_(test_rem_access_rights),
		T_(test_uc_bad_rkey),
		T_(test_loc_prot),
		T_(test_recv_loc_prot),
		T_(test_loc_len),
		T_(test_ud_too_long),
		T_(test_ud_bad_qkey),
		T_(test_inv_req),
		T_(test_rnr_exceeded),
		T_(test_rnr_forever),
		T_(test_retry_exc_destroyed),
		T_(test_retry_exc_peer_gone),
		T_(test_modify_to_err_and_back),
		T_(test_reset_drops_cqes),
		T_(test_post_refused),
		T_(test_comm_est),
		T_(test_srq_limit),
		T_(test_cq_overrun),
		T_(test_sq_drained),
		T_(test_comp_channel),
		T_(test_signaling),
	};

	/* SV_TEST_FILTER=pattern runs only the matching tests */
	if (getenv("SV_TEST_FILTER"))
		cmocka_set_test_filter(getenv("SV_TEST_FILTER"));
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
