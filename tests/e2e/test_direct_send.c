// SPDX-License-Identifier: MIT
/*
 * SEND and RECV on the direct path (issue 38, docs/DESIGN.md "The direct
 * path"): a SEND, a SEND with immediate data or a WRITE with immediate
 * data between two QPs of this host takes the receiver's head receive WQE
 * in the sender's process, one process_vm_writev, and the receiver's
 * completion comes from the receiver's completion ring. These check what
 * a program sees, with the direct path on and off (check-nodirect runs
 * the same with SOFTVERBS_DIRECT=0, where every count of direct SENDs must
 * be 0):
 *  - every kind and size, scattered over two receive SGEs: bytes and
 *    completion fields as the daemon's;
 *  - RNR: a SEND with no receive posted waits at the daemon (RNR NAKs),
 *    a late receive takes it, and the next SENDs go direct; the three
 *    completions come in order without a poll between;
 *  - completions of both paths mixed (a SEND from device memory goes to
 *    the daemon), polled only at the end: posting order;
 *  - a receive CQ that overflows errs (IBV_EVENT_CQ_ERR); one resized
 *    between SENDs keeps them, in order;
 *  - a receive CQ on a channel: NEXT and SOLICITED arms fire for direct
 *    completions, one event each, also for one that came while unarmed,
 *    none again when re-armed before the poll;
 *  - a sender stopped in its copy while the receiver destroys its QP, and
 *    a sender killed there: nothing lands after the destroy returns (or
 *    after the kill), every receive WQE is completed once (flushed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "direct_hooks.h"
#include "vu.h"

#define LEN        (2u << 20)

/* ---- one process, two QPs ---- */

struct pair {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct vu_ep a, b;         /* a sends, b receives */
	struct ibv_comp_channel *ch;  /* b's receive CQ's, or NULL */
	struct ibv_cq *bcq;        /* b's receive CQ when made here */
	uint8_t *abuf, *bbuf;
	struct ibv_mr *amr, *bmr;
};

/* bcqe: b's receive CQ's size (0: vu's); channel: on a channel. */
static void pair_make(struct pair *p, int bcqe, bool channel)
{
	struct vu_qp_caps caps = { .send_wr = 64, .recv_wr = 64,
				   .send_sge = 4, .recv_sge = 4,
				   .inline_data = 64 };
	struct vu_qp_caps bcaps = caps;
	struct vu_conn c = vu_conn_default();
	unsigned int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

	memset(p, 0, sizeof(*p));
	p->ctx = vu_open();
	assert_non_null(p->ctx);
	p->pd = ibv_alloc_pd(p->ctx);
	assert_non_null(p->pd);
	if (channel) {
		p->ch = ibv_create_comp_channel(p->ctx);
		assert_non_null(p->ch);
	}
	if (bcqe || channel) {
		p->bcq = ibv_create_cq(p->ctx, bcqe ? bcqe : 256, NULL, p->ch,
				       0);
		assert_non_null(p->bcq);
		bcaps.rcq = p->bcq;
	}
	assert_int_equal(vu_ep_create(&p->a, p->ctx, p->pd, IBV_QPT_RC,
				      &caps), 0);
	assert_int_equal(vu_ep_create(&p->b, p->ctx, p->pd, IBV_QPT_RC,
				      &bcaps), 0);
	assert_int_equal(vu_connect_pair(p->a.qp, p->b.qp, &c), 0);
	p->abuf = calloc(1, LEN);
	p->bbuf = calloc(1, LEN);
	assert_non_null(p->abuf);
	assert_non_null(p->bbuf);
	p->amr = ibv_reg_mr(p->pd, p->abuf, LEN, acc);
	p->bmr = ibv_reg_mr(p->pd, p->bbuf, LEN, acc);
	assert_non_null(p->amr);
	assert_non_null(p->bmr);
}

static void pair_free(struct pair *p)
{
	ibv_dereg_mr(p->amr);
	ibv_dereg_mr(p->bmr);
	vu_ep_destroy(&p->a);
	vu_ep_destroy(&p->b);
	if (p->bcq)
		assert_int_equal(ibv_destroy_cq(p->bcq), 0);
	if (p->ch)
		assert_int_equal(ibv_destroy_comp_channel(p->ch), 0);
	ibv_dealloc_pd(p->pd);
	ibv_close_device(p->ctx);
	free(p->abuf);
	free(p->bbuf);
}

/* b posts a receive of len bytes at off of its buffer, in two SGEs. */
static void post_recv2(struct pair *p, uint64_t id, size_t off, uint32_t len)
{
	struct ibv_sge s[2] = {
		{ (uintptr_t)(p->bbuf + off), len / 3, p->bmr->lkey },
		{ (uintptr_t)(p->bbuf + off + len / 3 + 64), len - len / 3,
		  p->bmr->lkey },
	};
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = s, .num_sge = 2 },
			   *bad;

	assert_int_equal(ibv_post_recv(p->b.qp, &wr, &bad), 0);
}

/* a posts op of len bytes from off of its buffer (WRITE_WITH_IMM: to
 * raddr of b's buffer). */
static void post_send1(struct pair *p, uint64_t id, enum ibv_wr_opcode op,
		       size_t off, uint32_t len, unsigned int flags,
		       uint32_t lkey, uint64_t laddr)
{
	struct ibv_sge s = { laddr ? laddr : (uintptr_t)(p->abuf + off), len,
			     lkey ? lkey : p->amr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = id, .sg_list = &s, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED | flags,
	}, *bad;

	wr.imm_data = htobe32(0x5e000000u + (uint32_t)id);
	wr.wr.rdma.remote_addr = (uintptr_t)(p->bbuf + off);
	wr.wr.rdma.rkey = p->bmr->rkey;
	assert_int_equal(ibv_post_send(p->a.qp, &wr, &bad), 0);
}

/* The receive completion of b for the message id of op and len bytes. */
/* The receive completion of b for receive id, message sid (its immediate
 * data) of op and len bytes. */
static void expect_recv(struct pair *p, struct ibv_wc wc, uint64_t id,
			uint64_t sid, enum ibv_wr_opcode op, uint32_t len)
{
	bool imm = op != IBV_WR_SEND;

	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != id)
		fail_msg("receive: wr_id %" PRIu64 " (want %" PRIu64 "), %s",
			 wc.wr_id, id, ibv_wc_status_str(wc.status));
	assert_int_equal(wc.opcode, op == IBV_WR_RDMA_WRITE_WITH_IMM ?
			 IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV);
	assert_int_equal(wc.byte_len, len);
	assert_int_equal(wc.qp_num, p->b.qp->qp_num);
	assert_int_equal(wc.src_qp, p->a.qp->qp_num);
	assert_int_equal(!!(wc.wc_flags & IBV_WC_WITH_IMM), imm);
	if (imm)
		assert_int_equal(be32toh(wc.imm_data),
				 0x5e000000u + (uint32_t)sid);
}

static void expect_send_ok(struct pair *p, uint64_t id)
{
	struct ibv_wc wc = wait_wc(p->a.scq);

	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != id)
		fail_msg("send: wr_id %" PRIu64 " (want %" PRIu64 "), %s",
			 wc.wr_id, id, ibv_wc_status_str(wc.status));
}

/* Every kind of message that takes a receive WQE, of every size, into two
 * SGEs: the bytes where they belong, nothing past them, the completions as
 * the daemon's. */
static void test_send_kinds(void **state)
{
	static const enum ibv_wr_opcode ops[] = {
		IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE_WITH_IMM,
	};
	static const uint32_t lens[] = { 0, 1, 100, 4099, 65536, 1u << 20 };
	struct pair p;
	uint64_t before, id = 1, n = 0;

	(void)state;
	pair_make(&p, 0, false);
	before = direct_msgs();
	for (unsigned int o = 0; o < VU_ARRAY_SIZE(ops); o++) {
		for (unsigned int l = 0; l < VU_ARRAY_SIZE(lens); l++, id++) {
			uint32_t len = lens[l];
			bool w = ops[o] == IBV_WR_RDMA_WRITE_WITH_IMM;
			size_t tail = len + 64 + len / 3;

			vu_fill(p.abuf, (unsigned int)id, len);
			memset(p.bbuf, 0, tail + 4096);
			post_recv2(&p, id, 0, len + 1);
			post_send1(&p, id, ops[o], 0, len,
				   len && len <= 64 ? IBV_SEND_INLINE : 0, 0,
				   0);
			expect_send_ok(&p, id);
			expect_recv(&p, wait_wc(p.b.rcq), id, id, ops[o],
				    len);
			if (w) {
				vu_expect(p.bbuf, (unsigned int)id, len,
					  "WRITE_WITH_IMM data");
				for (size_t k = len; k < tail + 4096; k++)
					assert_int_equal(p.bbuf[k], 0);
			} else {
				/* len / 3 in the first SGE, the rest 64
				 * bytes later */
				uint32_t a = (len + 1) / 3;
				uint8_t *want = malloc(len + 1);

				assert_non_null(want);
				vu_fill(want, (unsigned int)id, len);
				assert_memory_equal(p.bbuf, want,
						    a < len ? a : len);
				if (len > a)
					assert_memory_equal(p.bbuf + a + 64,
							    want + a, len - a);
				for (size_t k = a; k < a + 64; k++)
					assert_int_equal(p.bbuf[k], 0);
				for (size_t k = (size_t)a + 64 +
						(len > a ? len - a : 0);
				     k < tail + 4096; k++)
					assert_int_equal(p.bbuf[k], 0);
				free(want);
			}
			n++;
		}
	}
	/* the SENDs and the peer's receive completions ran here */
	expect_direct(before, n);
	pair_free(&p);
}

/* A SEND finds no receive posted: it waits at the daemon (RNR NAKs, rnr
 * retry 7: for ever); a receive posted late takes it; the next two go
 * direct. The three receive completions, polled only at the end, come in
 * posting order (the first is the daemon's, the others the direct path's:
 * the stamps). */
static void test_send_rnr_late(void **state)
{
	struct pair p;
	struct ibv_wc wc[3];
	uint64_t before;

	(void)state;
	pair_make(&p, 0, false);
	vu_fill(p.abuf, 1, 3000);
	post_send1(&p, 1, IBV_WR_SEND, 0, 1000, 0, 0, 0);
	/* no completion while no receive is posted */
	assert_int_equal(vu_poll(p.a.scq, wc, 1, 50), 0);
	post_recv2(&p, 11, 0, 1000);
	expect_send_ok(&p, 1);
	post_recv2(&p, 12, 8192, 1000);
	post_recv2(&p, 13, 16384, 1000);
	before = direct_msgs();
	post_send1(&p, 2, IBV_WR_SEND_WITH_IMM, 1000, 1000, 0, 0, 0);
	post_send1(&p, 3, IBV_WR_SEND, 2000, 1000, 0, 0, 0);
	expect_send_ok(&p, 2);
	expect_send_ok(&p, 3);
	expect_direct(before, 2);
	assert_int_equal(vu_poll(p.b.rcq, wc, 3, WC_WAIT_MS), 3);
	expect_recv(&p, wc[0], 11, 1, IBV_WR_SEND, 1000);
	expect_recv(&p, wc[1], 12, 2, IBV_WR_SEND_WITH_IMM, 1000);
	expect_recv(&p, wc[2], 13, 3, IBV_WR_SEND, 1000);
	assert_memory_equal(p.bbuf + 8192, p.abuf + 1000, 333);
	assert_memory_equal(p.bbuf + 16384 + 333 + 64, p.abuf + 2333, 667);
	pair_free(&p);
}

/* SENDs from device memory (which only the daemon reads) between direct
 * ones: the receiver polls nothing until the last, then gets all of them in
 * posting order, each with its bytes. */
static void test_send_mixed_order(void **state)
{
	enum { N = 24, SZ = 512 };
	struct ibv_alloc_dm_attr da = { .length = SZ * N };
	struct ibv_wc wc[N];
	struct ibv_dm *dm;
	struct ibv_mr *dmr;
	struct pair p;
	uint64_t before;

	(void)state;
	pair_make(&p, 0, false);
	dm = ibv_alloc_dm(p.ctx, &da);
	assert_non_null(dm);
	dmr = ibv_reg_dm_mr(p.pd, dm, 0, SZ * N, IBV_ACCESS_LOCAL_WRITE |
			    IBV_ACCESS_ZERO_BASED);
	assert_non_null(dmr);
	vu_fill(p.abuf, 7, SZ * N);
	assert_int_equal(ibv_memcpy_to_dm(dm, 0, p.abuf, SZ * N), 0);
	for (int i = 0; i < N; i++)
		post_recv2(&p, 100 + (uint64_t)i, (size_t)i * 4096, SZ);
	before = direct_msgs();
	for (int i = 0; i < N; i++) {
		if (i % 3 == 1)
			post_send1(&p, (uint64_t)i, IBV_WR_SEND, 0, SZ, 0,
				   dmr->lkey, (uint64_t)i * SZ);
		else
			post_send1(&p, (uint64_t)i, IBV_WR_SEND_WITH_IMM,
				   (size_t)i * SZ, SZ, 0, 0, 0);
	}
	for (int i = 0; i < N; i++)
		expect_send_ok(&p, (uint64_t)i);
	expect_direct(before, N - N / 3);
	assert_int_equal(vu_poll(p.b.rcq, wc, N, WC_WAIT_MS), N);
	for (int i = 0; i < N; i++) {
		uint8_t *at = p.bbuf + (size_t)i * 4096;

		expect_recv(&p, wc[i], 100 + (uint64_t)i, (uint64_t)i,
			    i % 3 == 1 ? IBV_WR_SEND : IBV_WR_SEND_WITH_IMM,
			    SZ);
		assert_memory_equal(at, p.abuf + (size_t)i * SZ, SZ / 3);
		assert_memory_equal(at + SZ / 3 + 64,
				    p.abuf + (size_t)i * SZ + SZ / 3,
				    SZ - SZ / 3);
	}
	ibv_dereg_mr(dmr);
	ibv_free_dm(dm);
	pair_free(&p);
}

/* More direct SENDs than b's receive CQ holds, none polled: the CQ errs
 * (IBV_EVENT_CQ_ERR), as it does when the daemon writes the completions. */
static void test_send_cq_overrun(void **state)
{
	struct ibv_async_event ev;
	struct pair p;
	int n;

	(void)state;
	pair_make(&p, 4, false);
	n = p.bcq->cqe + 2;
	assert_true(n <= 64);
	for (int i = 0; i < n; i++)
		post_recv2(&p, (uint64_t)i, (size_t)i * 256, 100);
	for (int i = 0; i < n; i++)
		post_send1(&p, (uint64_t)i, IBV_WR_SEND, 0, 100, 0, 0, 0);
	for (int i = 0; i < n; i++)
		wait_wc(p.a.scq);
	assert_int_equal(vu_async_event(p.ctx, &ev, WC_WAIT_MS), 0);
	assert_int_equal(ev.event_type, IBV_EVENT_CQ_ERR);
	assert_ptr_equal(ev.element.cq, p.bcq);
	pair_free(&p);
}

/* b's receive CQ resized between direct SENDs, with completions in it:
 * the sender maps the new ring, and all of them come, in order. */
static void test_send_cq_resized(void **state)
{
	struct ibv_wc wc[6];
	struct pair p;
	uint64_t before;

	(void)state;
	pair_make(&p, 16, false);
	before = direct_msgs();
	for (int i = 0; i < 6; i++) {
		post_recv2(&p, 10 + (uint64_t)i, (size_t)i * 1024, 200);
		if (i == 3)
			assert_int_equal(ibv_resize_cq(p.bcq, 200), 0);
		post_send1(&p, (uint64_t)i, IBV_WR_SEND_WITH_IMM,
			   (size_t)i * 200, 200, 0, 0, 0);
		expect_send_ok(&p, (uint64_t)i);
	}
	expect_direct(before, 6);
	assert_int_equal(vu_poll(p.bcq, wc, 6, WC_WAIT_MS), 6);
	for (int i = 0; i < 6; i++)
		expect_recv(&p, wc[i], 10 + (uint64_t)i, (uint64_t)i,
			    IBV_WR_SEND_WITH_IMM, 200);
	pair_free(&p);
}

/* An event on b's channel right now? (Deterministic: a direct SEND's
 * event is sent before its post returns; the daemon's before the sender's
 * completion.) */
/* Both QPs to RESET and connected again (the same two QPs): the receiver's
 * new connection has a new completion side, which the sender maps once it
 * finds the old one closed; its SENDs go direct again, and land. */
static void test_send_reconnected(void **state)
{
	struct ibv_qp_attr rst = { .qp_state = IBV_QPS_RESET };
	struct vu_conn c = vu_conn_default();
	struct pair p;

	(void)state;
	pair_make(&p, 0, false);
	for (unsigned int round = 0; round < 3; round++) {
		uint64_t before;

		if (round) {
			assert_int_equal(ibv_modify_qp(p.a.qp, &rst,
						       IBV_QP_STATE), 0);
			assert_int_equal(ibv_modify_qp(p.b.qp, &rst,
						       IBV_QP_STATE), 0);
			assert_int_equal(vu_connect_pair(p.a.qp, p.b.qp, &c),
					 0);
		}
		before = direct_msgs();
		for (uint64_t i = 0; i < 4; i++) {
			uint8_t v = (uint8_t)(0x30 + round * 4 + i);

			memset(p.abuf, v, 192);
			post_recv2(&p, 100 * round + i, 0, 192);
			post_send1(&p, i, IBV_WR_SEND, 0, 192, 0, 0, 0);
			expect_send_ok(&p, i);
			expect_recv(&p, wait_wc(p.b.rcq), 100 * round + i, i,
				    IBV_WR_SEND, 192);
			assert_int_equal(p.bbuf[0], v);
			assert_int_equal(p.bbuf[192 / 3 + 64], v);
		}
		expect_direct(before, 4);
	}
	pair_free(&p);
}

static bool event_ready(struct pair *p)
{
	return vu_fd_readable(p->ch->fd, 0);
}

static void take_event(struct pair *p)
{
	struct ibv_cq *cq;

	assert_int_equal(vu_cq_event(p->ch, &cq, WC_WAIT_MS), 0);
	assert_ptr_equal(cq, p->bcq);
}

/* One SEND (solicited or not) that b receives; a's completion taken. */
static void send_one(struct pair *p, uint64_t id, bool solicited)
{
	post_recv2(p, id, 0, 64);
	post_send1(p, id, IBV_WR_SEND, 0, 64,
		   solicited ? IBV_SEND_SOLICITED : 0, 0, 0);
	expect_send_ok(p, id);
}

static void poll_one(struct pair *p, uint64_t id)
{
	expect_recv(p, wait_wc(p->bcq), id, id, IBV_WR_SEND, 64);
}

/* b's receive CQ on a channel, the patterns programs use: arm, then a
 * SEND fires it (one event); perftest -e's re-arm before the poll does not
 * fire again for the completion that woke it; UCX's poll, arm, sleep: a
 * completion that came while unarmed fires the arm at once; a SOLICITED
 * arm fires only for a solicited SEND. */
static void test_send_channel_events(void **state)
{
	struct pair p;
	uint64_t before;

	(void)state;
	pair_make(&p, 0, true);
	before = direct_msgs();
	/* arm, send: one event */
	assert_int_equal(ibv_req_notify_cq(p.bcq, 0), 0);
	send_one(&p, 1, false);
	take_event(&p);
	/* re-armed before polling: nothing more for that completion */
	assert_int_equal(ibv_req_notify_cq(p.bcq, 0), 0);
	assert_false(event_ready(&p));
	poll_one(&p, 1);
	/* the next SEND fires the standing arm */
	send_one(&p, 2, false);
	take_event(&p);
	poll_one(&p, 2);
	/* unarmed: a SEND arrives; the arm after it fires at once */
	send_one(&p, 3, false);
	assert_false(event_ready(&p));
	assert_int_equal(ibv_req_notify_cq(p.bcq, 0), 0);
	take_event(&p);
	poll_one(&p, 3);
	/* SOLICITED: an unsolicited SEND does not fire it, a solicited one
	 * does */
	assert_int_equal(ibv_req_notify_cq(p.bcq, 1), 0);
	send_one(&p, 4, false);
	assert_false(event_ready(&p));
	poll_one(&p, 4);
	send_one(&p, 5, true);
	take_event(&p);
	poll_one(&p, 5);
	assert_false(event_ready(&p));
	expect_direct(before, 5);
	pair_free(&p);
}

/* ---- two processes: a sender stopped in its copy ---- */

#define STOP_LEN (64u << 10)
#define NRECV    8

struct rinfo {
	struct vu_addr addr;
};

/* How the receiver meets its stopped sender (run_stopped_send). */
enum stop_case { STOP_KILL, STOP_DESTROY, STOP_AFTER_ERR };

/* The sender (a child): connects to the receiver over fd, then SENDs
 * STOP_LEN bytes, stopped (SIGSTOP) inside its copy, or (after) once the
 * copy is done and before its completion is published. Exits 0 once the
 * SEND completed with an error (the receiver's QP is gone or in ERR by
 * then). */
static void stopped_sender(int fd, bool after)
{
	struct vu_qp_caps caps = { .send_wr = 16, .recv_wr = 1, .send_sge = 1,
				   .recv_sge = 1 };
	struct vu_conn c = vu_conn_default();
	struct ibv_send_wr wr = { .wr_id = 1, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_sge s;
	struct ibv_wc wc;
	struct ibv_mr *mr;
	struct rinfo peer;
	struct vu_addr me;
	struct vu_ep ep;
	uint8_t *buf;
	char go;

	if (vu_ep_create(&ep, NULL, NULL, IBV_QPT_RC, &caps))
		_exit(10);
	buf = calloc(1, STOP_LEN);
	if (!buf)
		_exit(11);
	memset(buf, 0xa5, STOP_LEN);
	mr = ibv_reg_mr(ep.pd, buf, STOP_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		_exit(12);
	me = vu_addr_of(ep.qp, c.sq_psn);
	/* a vanished peer errs soon */
	c.timeout = 12;
	c.retry_cnt = 3;
	if (vu_xfer(fd, &peer, sizeof(peer), false) ||
	    vu_xfer(fd, &me, sizeof(me), true) ||
	    vu_connect(ep.qp, &peer.addr, &c) ||
	    vu_xfer(fd, &go, 1, false))
		_exit(13);
	s = (struct ibv_sge){ (uintptr_t)buf, STOP_LEN, mr->lkey };
	wr.sg_list = &s;
	__atomic_store_n(after ? &stop_after_copy : &stop_in_copy, 1,
			 __ATOMIC_RELAXED);
	if (ibv_post_send(ep.qp, &wr, &bad))
		_exit(14);
	if (vu_poll(ep.scq, &wc, 1, WC_WAIT_MS) != 1)
		_exit(15);
	if (__atomic_load_n(after ? &stop_after_copy : &stop_in_copy,
			    __ATOMIC_RELAXED))
		_exit(16);         /* it never reached a copy of its own */
	if (wc.status == IBV_WC_SUCCESS)
		_exit(17);         /* it landed after all */
	_exit(0);
}

/* Every one of the NRECV receives completes flushed, once, in order. */
static void expect_flushed(struct ibv_cq *cq)
{
	struct ibv_wc wc[NRECV];

	assert_int_equal(vu_poll(cq, wc, NRECV, WC_WAIT_MS), NRECV);
	for (int i = 0; i < NRECV; i++) {
		assert_int_equal(wc[i].wr_id, i);
		assert_int_equal(wc[i].status, IBV_WC_WR_FLUSH_ERR);
	}
	assert_int_equal(vu_poll(cq, wc, 1, 100), 0);
}

/* The stopped sender resumed: it must exit 0 (its SEND failed; 17: it
 * succeeded, which would mean it "what"). */
static void resume_sender(pid_t pid, const char *what)
{
	int status;

	assert_int_equal(kill(pid, SIGCONT), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		fail_msg("the sender says %d (17: its SEND %s)",
			 WIFEXITED(status) ? WEXITSTATUS(status) : -1, what);
}

/*
 * The receiver (this process) posts NRECV receives, starts the sender,
 * waits until it stops in its copy; then (STOP_KILL) kills it and moves
 * its QP to ERR, or (STOP_DESTROY) destroys its QP while the sender stays
 * stopped. Either way the receive buffers are reused at once and must stay
 * as they are: after a kill every receive WQE is flushed once (none taken
 * by the dead sender); after a destroy the sender, resumed long after,
 * lands nothing and its SEND fails. STOP_AFTER_ERR: the sender stops once
 * its message landed, before it publishes the completion, and the
 * receiver moves its QP to ERR meanwhile: resumed, the sender publishes
 * nothing (the device closed the completion side), its SEND fails, and
 * every receive WQE is flushed once, none completed as received.
 */
static void run_stopped_send(enum stop_case how)
{
	struct vu_qp_caps caps = { .send_wr = 4, .recv_wr = 16, .send_sge = 1,
				   .recv_sge = 1 };
	struct vu_conn c = vu_conn_default();
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_ERR };
	struct vu_addr peer;
	struct rinfo me;
	struct vu_ep ep;
	struct ibv_mr *mr;
	uint8_t *buf;
	int sv[2], status;
	pid_t pid;
	char go = 'g';

	if (!direct_on())
		return;            /* nothing of the copies is the test's */
	assert_int_equal(vu_ep_create(&ep, NULL, NULL, IBV_QPT_RC, &caps), 0);
	buf = calloc(NRECV, STOP_LEN);
	assert_non_null(buf);
	mr = ibv_reg_mr(ep.pd, buf, (size_t)NRECV * STOP_LEN,
			IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(mr);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(sv[1]);
		stopped_sender(sv[0], how == STOP_AFTER_ERR);
	}
	close(sv[0]);
	me.addr = vu_addr_of(ep.qp, c.sq_psn);
	assert_int_equal(vu_xfer(sv[1], &me, sizeof(me), true), 0);
	assert_int_equal(vu_xfer(sv[1], &peer, sizeof(peer), false), 0);
	assert_int_equal(vu_connect(ep.qp, &peer, &c), 0);
	for (int i = 0; i < NRECV; i++) {
		struct ibv_sge s = { (uintptr_t)(buf + (size_t)i * STOP_LEN),
				     STOP_LEN, mr->lkey };
		struct ibv_recv_wr r = { .wr_id = (uint64_t)i, .sg_list = &s,
					 .num_sge = 1 }, *bad;

		assert_int_equal(ibv_post_recv(ep.qp, &r, &bad), 0);
	}
	assert_int_equal(vu_xfer(sv[1], &go, 1, true), 0);
	assert_int_equal(waitpid(pid, &status, WUNTRACED), pid);
	if (!WIFSTOPPED(status))
		fail_msg("the sender never stopped in a copy (status %#x)",
			 status);
	if (how == STOP_AFTER_ERR) {
		assert_int_equal(ibv_modify_qp(ep.qp, &at, IBV_QP_STATE), 0);
		vu_sleep_ms(100);
		resume_sender(pid, "completed after the QP's error");
		expect_flushed(ep.rcq);
		/* (what the copy wrote before the error may stay) */
		memset(buf, 0x11, (size_t)NRECV * STOP_LEN);
	} else if (how == STOP_KILL) {
		assert_int_equal(kill(pid, SIGKILL), 0);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		memset(buf, 0x11, (size_t)NRECV * STOP_LEN);
		assert_int_equal(ibv_modify_qp(ep.qp, &at, IBV_QP_STATE), 0);
		/* every receive flushed, once */
		expect_flushed(ep.rcq);
	} else {
		/* the destroy returns with the sender stopped in its copy */
		assert_int_equal(ibv_destroy_qp(ep.qp), 0);
		ep.qp = NULL;
		memset(buf, 0x11, (size_t)NRECV * STOP_LEN);
		vu_sleep_ms(300);
		resume_sender(pid, "landed after the destroy");
	}
	for (size_t k = 0; k < (size_t)NRECV * STOP_LEN; k++)
		if (buf[k] != 0x11)
			fail_msg("byte %zu of the receive buffers changed", k);
	ibv_dereg_mr(mr);
	vu_ep_destroy(&ep);
	free(buf);
	close(sv[1]);
}

static void test_recv_qp_destroyed_mid_send(void **state)
{
	(void)state;
	run_stopped_send(STOP_DESTROY);
}

static void test_sender_killed_mid_copy(void **state)
{
	(void)state;
	run_stopped_send(STOP_KILL);
}

static void test_recv_qp_err_before_publish(void **state)
{
	(void)state;
	run_stopped_send(STOP_AFTER_ERR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_send_kinds),
		cmocka_unit_test(test_send_rnr_late),
		cmocka_unit_test(test_send_mixed_order),
		cmocka_unit_test(test_send_cq_overrun),
		cmocka_unit_test(test_send_cq_resized),
		cmocka_unit_test(test_send_channel_events),
		cmocka_unit_test(test_send_reconnected),
		cmocka_unit_test(test_recv_qp_destroyed_mid_send),
		cmocka_unit_test(test_sender_killed_mid_copy),
		cmocka_unit_test(test_recv_qp_err_before_publish),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
