// SPDX-License-Identifier: MIT
/*
 * A dead device drains (issue 21, item 4; docs/DESIGN.md "A dead device
 * drains"). RC QP a posts N receives, N SENDs and N RDMA WRITEs towards b,
 * which posts no receive: the first SEND waits on RNR (retried forever), so
 * every WR is in flight. The daemon is SIGKILLed; the context reports
 * IBV_EVENT_DEVICE_FATAL, a thread blocked in ibv_get_cq_event wakes with
 * the receive CQ, and polling (ibv_poll_cq on one CQ, the extended
 * start_poll/next_poll on the other) returns every WR, in order, with
 * IBV_WC_WR_FLUSH_ERR, its wr_id and opcode, and nothing more. A post after
 * that fails with EIO (and *bad_wr names it), on a QP, an SRQ and through
 * ibv_wr_*; then everything is destroyed cleanly.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "vu.h"

#define N 32

struct waiter {
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;          /* what ibv_get_cq_event gave */
	int ret, err;
	volatile int done;
};

static void *wait_event(void *arg)
{
	struct waiter *w = arg;
	void *cq_ctx;

	w->ret = ibv_get_cq_event(w->ch, &w->cq, &cq_ctx);
	w->err = errno;
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Drain an extended CQ: up to want completions within ms, into wc. */
static int drain_ex(struct ibv_cq_ex *cq, struct ibv_wc *wc, int want, long ms)
{
	struct ibv_poll_cq_attr attr = { 0 };
	long end = vu_now_ms() + ms;
	int got = 0;

	while (got < want && vu_now_ms() < end) {
		if (ibv_start_poll(cq, &attr) == ENOENT) {
			vu_sleep_ms(1);
			continue;
		}
		do {
			wc[got].wr_id = cq->wr_id;
			wc[got].status = cq->status;
			wc[got].opcode = ibv_wc_read_opcode(cq);
			wc[got].qp_num = ibv_wc_read_qp_num(cq);
			got++;
		} while (got < want + 1 && ibv_next_poll(cq) == 0);
		ibv_end_poll(cq);
	}
	return got;
}

int main(void)
{
	struct ibv_cq_init_attr_ex sattr = {
		.cqe = 4 * N, .wc_flags = IBV_WC_STANDARD_FLAGS,
	};
	struct ibv_qp_init_attr qa_attr = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4 * N, .max_recv_wr = 2 * N,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_srq_init_attr srq_attr = {
		.attr = { .max_wr = 16, .max_sge = 1 },
	};
	struct ibv_wc wc[4 * N + 1];
	struct vu_conn conn = vu_conn_default();
	struct ibv_qp_init_attr qb_attr = qa_attr;
	struct ibv_qp_init_attr_ex qx_attr;
	struct ibv_recv_wr rwr, *bad_rwr;
	struct ibv_send_wr swr, *bad_swr;
	struct ibv_async_event ev;
	struct waiter w = { 0 };
	struct ibv_context *ctx;
	struct ibv_cq_ex *scq;
	struct ibv_cq *rcq, *bcq;
	struct ibv_qp *qa, *qb, *qx;
	struct ibv_srq *srq;
	struct ibv_sge sge;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	pthread_t th;
	static char buf[4096];
	pid_t dpid;
	long end;
	int i, n;

	ctx = vu_open();
	VU_CHECK(ctx, "no device");
	pd = ibv_alloc_pd(ctx);
	VU_CHECK(pd, "alloc_pd: %s", strerror(errno));
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE);
	VU_CHECK(mr, "reg_mr: %s", strerror(errno));
	w.ch = ibv_create_comp_channel(ctx);
	VU_CHECK(w.ch, "create_comp_channel: %s", strerror(errno));
	scq = ibv_create_cq_ex(ctx, &sattr);
	VU_CHECK(scq, "create_cq_ex: %s", strerror(errno));
	rcq = ibv_create_cq(ctx, 4 * N, NULL, w.ch, 0);
	bcq = ibv_create_cq(ctx, 4 * N, NULL, NULL, 0);
	VU_CHECK(rcq && bcq, "create_cq: %s", strerror(errno));
	qa_attr.send_cq = ibv_cq_ex_to_cq(scq);
	qa_attr.recv_cq = rcq;
	qb_attr.send_cq = qb_attr.recv_cq = bcq;
	qa = ibv_create_qp(pd, &qa_attr);
	qb = ibv_create_qp(pd, &qb_attr);
	VU_CHECK(qa && qb, "create_qp: %s", strerror(errno));
	memset(&qx_attr, 0, sizeof(qx_attr));
	qx_attr.qp_type = IBV_QPT_RC;
	qx_attr.send_cq = qx_attr.recv_cq = bcq;
	qx_attr.cap = qa_attr.cap;
	qx_attr.pd = pd;
	qx_attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	qx_attr.send_ops_flags = IBV_QP_EX_WITH_SEND;
	qx = ibv_create_qp_ex(ctx, &qx_attr);
	VU_CHECK(qx, "create_qp_ex: %s", strerror(errno));
	srq = ibv_create_srq(pd, &srq_attr);
	VU_CHECK(srq, "create_srq: %s", strerror(errno));
	conn.rnr_retry = 7; /* RNR retried forever: the SENDs stay in flight */
	VU_CHECK(!vu_connect_pair(qa, qb, &conn), "connect");
	{
		struct vu_addr self = vu_addr_of(qx, conn.sq_psn);

		VU_CHECK(!vu_connect(qx, &self, &conn), "connect qx to itself");
	}

	sge = (struct ibv_sge){ (uintptr_t)buf, 64, mr->lkey };
	for (i = 0; i < N; i++) {
		rwr = (struct ibv_recv_wr){ .wr_id = 1000 + i, .sg_list = &sge,
					    .num_sge = 1 };
		VU_CHECK(!ibv_post_recv(qa, &rwr, &bad_rwr), "post_recv %d", i);
	}
	for (i = 0; i < 2 * N; i++) {
		bool wr = i >= N;

		swr = (struct ibv_send_wr){
			.wr_id = (wr ? 3000 : 2000) + i % N, .sg_list = &sge,
			.num_sge = 1,
			.opcode = wr ? IBV_WR_RDMA_WRITE : IBV_WR_SEND,
			/* every other one unsignaled: a flush completes it
			 * all the same */
			.send_flags = i % 2 ? 0 : IBV_SEND_SIGNALED,
			.wr.rdma = { (uintptr_t)buf + 2048, mr->rkey },
		};
		VU_CHECK(!ibv_post_send(qa, &swr, &bad_swr), "post_send %d", i);
	}
	VU_CHECK(ibv_poll_cq(ibv_cq_ex_to_cq(scq), 1, wc) == 0,
		 "a WR completed before the device died");
	VU_CHECK(!ibv_req_notify_cq(rcq, 0), "req_notify_cq");
	VU_CHECK(!pthread_create(&th, NULL, wait_event, &w), "thread");

	dpid = vu_daemon_pid();
	VU_CHECK(dpid > 0, "no daemon pid in $SV_TEST_DIR/control.lock");
	VU_CHECK(!kill(dpid, SIGKILL), "kill %d: %s", (int)dpid, strerror(errno));
	VU_CHECK(!vu_async_event(ctx, &ev, VU_WAIT_MS) &&
		 ev.event_type == IBV_EVENT_DEVICE_FATAL, "no DEVICE_FATAL");

	/* the waiter wakes, with the CQ whose flushes are due */
	for (end = vu_now_ms() + VU_WAIT_MS;
	     !__atomic_load_n(&w.done, __ATOMIC_ACQUIRE) && vu_now_ms() < end;)
		vu_sleep_ms(1);
	VU_CHECK(w.done, "ibv_get_cq_event still blocked on a dead device");
	pthread_join(th, NULL);
	VU_CHECK(w.ret == 0 && w.cq == rcq, "ibv_get_cq_event: %d (%s)", w.ret,
		 strerror(w.err));
	ibv_ack_cq_events(rcq, 1);

	/* every receive back, flushed, in order */
	n = vu_poll(rcq, wc, N, VU_WAIT_MS);
	VU_CHECK(n == N, "%d of %d receives came back", n, N);
	for (i = 0; i < N; i++)
		VU_CHECK(wc[i].status == IBV_WC_WR_FLUSH_ERR &&
			 wc[i].wr_id == (uint64_t)(1000 + i) &&
			 wc[i].opcode == IBV_WC_RECV &&
			 wc[i].qp_num == qa->qp_num,
			 "receive %d: status %d wr_id %llu opcode %d", i,
			 wc[i].status, (unsigned long long)wc[i].wr_id,
			 wc[i].opcode);
	/* every send and write back, the unsignaled too */
	n = drain_ex(scq, wc, 2 * N, VU_WAIT_MS);
	VU_CHECK(n == 2 * N, "%d of %d sends came back", n, 2 * N);
	for (i = 0; i < 2 * N; i++) {
		bool wr = i >= N;

		VU_CHECK(wc[i].status == IBV_WC_WR_FLUSH_ERR &&
			 wc[i].wr_id == (uint64_t)((wr ? 3000 : 2000) + i % N) &&
			 wc[i].opcode == (wr ? IBV_WC_RDMA_WRITE : IBV_WC_SEND) &&
			 wc[i].qp_num == qa->qp_num,
			 "send %d: status %d wr_id %llu opcode %d", i,
			 wc[i].status, (unsigned long long)wc[i].wr_id,
			 wc[i].opcode);
	}
	VU_CHECK(ibv_poll_cq(rcq, 1, wc) == 0 &&
		 ibv_poll_cq(ibv_cq_ex_to_cq(scq), 1, wc) == 0 &&
		 ibv_poll_cq(bcq, 1, wc) == 0, "more completions than WRs");
	printf("PASS: %d receives and %d sends came back flushed\n", N, 2 * N);

	/* posting now: EIO, as a NIC in its fatal state */
	bad_swr = NULL;
	VU_CHECK(ibv_post_send(qa, &swr, &bad_swr) == EIO && bad_swr == &swr,
		 "post_send after the death");
	bad_rwr = NULL;
	VU_CHECK(ibv_post_recv(qa, &rwr, &bad_rwr) == EIO && bad_rwr == &rwr,
		 "post_recv after the death");
	bad_rwr = NULL;
	VU_CHECK(ibv_post_srq_recv(srq, &rwr, &bad_rwr) == EIO &&
		 bad_rwr == &rwr, "post_srq_recv after the death");
	{
		struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qx);

		ibv_wr_start(x);
		x->wr_id = 1;
		ibv_wr_send(x);
		ibv_wr_set_sge(x, mr->lkey, (uintptr_t)buf, 8);
		VU_CHECK(ibv_wr_complete(x) == EIO, "ibv_wr_complete");
	}
	VU_CHECK(ibv_poll_cq(bcq, 1, wc) == 0, "a refused post completed");
	printf("PASS: posts after the death fail with EIO\n");

	VU_CHECK(!ibv_destroy_qp(qa) && !ibv_destroy_qp(qb) &&
		 !ibv_destroy_qp(qx) && !ibv_destroy_srq(srq), "destroy qp");
	VU_CHECK(!ibv_destroy_cq(ibv_cq_ex_to_cq(scq)) && !ibv_destroy_cq(rcq) &&
		 !ibv_destroy_cq(bcq), "destroy cq");
	VU_CHECK(!ibv_destroy_comp_channel(w.ch) && !ibv_dereg_mr(mr) &&
		 !ibv_dealloc_pd(pd), "destroy the rest");
	VU_CHECK(!ibv_close_device(ctx), "close_device");
	printf("PASS: everything destroyed\n");
	return 0;
}
