// SPDX-License-Identifier: MIT
/*
 * softverbs inject (issue 24, Deliver 2), each fault with the effect a
 * program sees on a NIC that has that fault, through the verbs only:
 *
 *   cmd=create_qp errno=ENOMEM: the next ibv_create_qp of this process
 *     fails with ENOMEM, the one after works; count=2 of alloc_pd for any
 *     process: two fail (EACCES), the third works;
 *   port down / up: IBV_EVENT_PORT_ERR then IBV_EVENT_PORT_ACTIVE for
 *     port 1, and ibv_query_port says DOWN, then ACTIVE;
 *   fatal: IBV_EVENT_QP_FATAL for that QP, which is in ERR; a WR posted
 *     then is flushed;
 *   rnr: with rnr_retry 0 a SEND (a receive posted at the target) ends in
 *     IBV_WC_RNR_RETRY_EXC_ERR; with rnr_retry 7 two injected RNR NAKs are
 *     retried through and the message arrives;
 *   access: a WRITE with a good rkey ends in IBV_WC_REM_ACCESS_ERR and
 *     writes nothing (the direct path is withdrawn from both QPs, so a
 *     WRITE that would run in this process reaches the device);
 *   lose: the next message to the QP gets no answer: a SEND is sent
 *     again after the requester's timeout and arrives; three lost WRITEs
 *     with retry_cnt 2 end in IBV_WC_RETRY_EXC_ERR;
 *   refused: a QPN that names no QP, an unknown command name.
 * Then the same faults for a process and for the whole device:
 *   rnr (no QP, no process): the next SEND to any QP meets an RNR NAK;
 *   rnr pid=1: armed for another process, our SEND goes through;
 *   access pid=<ours>, armed before our QPs exist: a WRITE between two QPs
 *     made afterwards ends in IBV_WC_REM_ACCESS_ERR, nothing written;
 *   lose pid=<ours>: a SEND is lost once and sent again;
 *   fatal pid=<ours>: IBV_EVENT_QP_FATAL for both QPs of a pair;
 *   access pid=<another process>, armed for that process's QP before ours
 *     connects to it: our WRITE (which the direct path would run in this
 *     process) reaches the device and ends in IBV_WC_REM_ACCESS_ERR, and
 *     the other process's memory is untouched.
 * The tool's counts say how many of each were injected.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vu.h"

static const struct vu_qp_caps caps = {
	.send_wr = 16, .recv_wr = 16, .send_sge = 1, .recv_sge = 1,
};

#define inject(out, len, ...) vu_softverbs(out, len, "inject " __VA_ARGS__)

static uint8_t abuf[4096], bbuf[4096];

/* The default connection with rnr_retry as given. */
static struct vu_conn conn_rnr(uint8_t rnr_retry)
{
	struct vu_conn c = vu_conn_default();

	c.rnr_retry = rnr_retry;
	return c;
}

/* a and b connected (RC, as c says), with an MR over abuf on a's side that
 * takes remote writes and one over bbuf for b's sends */
static void connect_pair(struct ibv_context *ctx, struct vu_ep *a,
			 struct vu_ep *b, struct vu_conn c,
			 struct ibv_mr **amr, struct ibv_mr **bmr)
{
	VU_CHECK(!vu_ep_create(a, ctx, NULL, IBV_QPT_RC, &caps), "ep a");
	VU_CHECK(!vu_ep_create(b, ctx, a->pd, IBV_QPT_RC, &caps), "ep b");
	VU_CHECK(!vu_connect_pair(a->qp, b->qp, &c), "connect");
	*amr = ibv_reg_mr(a->pd, abuf, sizeof(abuf), IBV_ACCESS_LOCAL_WRITE |
			  IBV_ACCESS_REMOTE_WRITE);
	*bmr = ibv_reg_mr(a->pd, bbuf, sizeof(bbuf), IBV_ACCESS_LOCAL_WRITE);
	VU_CHECK(*amr && *bmr, "mrs");
}

static void drop_pair(struct vu_ep *a, struct vu_ep *b, struct ibv_mr *amr,
		      struct ibv_mr *bmr)
{
	VU_CHECK(!ibv_dereg_mr(amr) && !ibv_dereg_mr(bmr), "dereg");
	vu_ep_destroy(b);
	vu_ep_destroy(a);
}

/* One signaled WR on ep's QP from buf (mr): its completion's status. */
#define post_one(ep, op, buf, mr, len, raddr, rkey) \
	vu_post_one(ep, op, 1, (uintptr_t)(buf), (mr)->lkey, len, raddr, rkey)

static void post_recv(struct vu_ep *ep, void *buf, struct ibv_mr *mr,
		      uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len,
			       .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1 },
			   *bad;

	VU_CHECK(!ibv_post_recv(ep->qp, &wr, &bad), "post_recv");
}

static void cmd_faults(struct ibv_context *ctx)
{
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *p;
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp *qp;

	VU_CHECK(pd && cq, "pd, cq");
	qa.send_cq = qa.recv_cq = cq;
	VU_CHECK(!inject(NULL, 0, "cmd=create_qp errno=ENOMEM pid=%d",
			 (int)getpid()), "inject cmd");
	errno = 0;
	VU_CHECK(!ibv_create_qp(pd, &qa) && errno == ENOMEM,
		 "injected create_qp: errno %d", errno);
	qp = ibv_create_qp(pd, &qa);
	VU_CHECK(qp, "create_qp after the fault: %s", strerror(errno));
	VU_CHECK(!ibv_destroy_qp(qp), "destroy");
	VU_CHECK(!inject(NULL, 0, "cmd=alloc_pd errno=EACCES count=2"),
		 "inject alloc_pd");
	for (int i = 0; i < 2; i++) {
		errno = 0;
		VU_CHECK(!ibv_alloc_pd(ctx) && errno == EACCES,
			 "injected alloc_pd %d: errno %d", i, errno);
	}
	p = ibv_alloc_pd(ctx);
	VU_CHECK(p, "alloc_pd after the faults");
	VU_CHECK(!ibv_dealloc_pd(p) && !ibv_destroy_cq(cq) &&
		 !ibv_dealloc_pd(pd), "cleanup");
	/* another process's pid: not ours */
	VU_CHECK(!inject(NULL, 0, "cmd=alloc_pd errno=EIO pid=1"), "pid 1");
	p = ibv_alloc_pd(ctx);
	VU_CHECK(p && !ibv_dealloc_pd(p), "a fault armed for pid 1 hit us");
	VU_CHECK(!inject(NULL, 0, "clear"), "clear");
}

static void port_faults(struct ibv_context *ctx)
{
	struct ibv_async_event ev;
	struct ibv_port_attr pa;

	VU_CHECK(!inject(NULL, 0, "port down"), "port down");
	VU_CHECK(!vu_async_event(ctx, &ev, VU_WAIT_MS) &&
		 ev.event_type == IBV_EVENT_PORT_ERR &&
		 ev.element.port_num == 1, "no PORT_ERR for port 1");
	VU_CHECK(!ibv_query_port(ctx, 1, &pa) && pa.state == IBV_PORT_DOWN,
		 "the port is %d, not DOWN", (int)pa.state);
	VU_CHECK(!inject(NULL, 0, "port up"), "port up");
	VU_CHECK(!vu_async_event(ctx, &ev, VU_WAIT_MS) &&
		 ev.event_type == IBV_EVENT_PORT_ACTIVE &&
		 ev.element.port_num == 1, "no PORT_ACTIVE for port 1");
	VU_CHECK(!ibv_query_port(ctx, 1, &pa) && pa.state == IBV_PORT_ACTIVE,
		 "the port is %d, not ACTIVE", (int)pa.state);
}

static void qp_faults(struct ibv_context *ctx)
{
	struct vu_ep a, b;
	struct ibv_mr *amr, *bmr;
	struct ibv_async_event ev;
	char out[512];

	/* fatal */
	connect_pair(ctx, &a, &b, conn_rnr(7), &amr, &bmr);
	VU_CHECK(!inject(NULL, 0, "fatal qp=%u", a.qp->qp_num), "fatal");
	VU_CHECK(!vu_async_event(ctx, &ev, VU_WAIT_MS) &&
		 ev.event_type == IBV_EVENT_QP_FATAL && ev.element.qp == a.qp,
		 "no QP_FATAL for the QP");
	VU_CHECK(vu_qp_state(a.qp) == IBV_QPS_ERR, "not in ERR");
	VU_CHECK(post_one(&a, IBV_WR_SEND, abuf, amr, 8, 0, 0) ==
		 IBV_WC_WR_FLUSH_ERR, "a WR on a fatal QP was not flushed");
	drop_pair(&a, &b, amr, bmr);

	/* RNR, rnr_retry 0: the requester gives up at once */
	connect_pair(ctx, &a, &b, conn_rnr(0), &amr, &bmr);
	post_recv(&a, abuf, amr, sizeof(abuf));
	VU_CHECK(!inject(NULL, 0, "rnr qp=%u count=1", a.qp->qp_num), "rnr");
	VU_CHECK(post_one(&b, IBV_WR_SEND, bbuf, bmr, 64, 0, 0) ==
		 IBV_WC_RNR_RETRY_EXC_ERR,
		 "a SEND met by an injected RNR NAK (rnr_retry 0)");
	drop_pair(&a, &b, amr, bmr);

	/* RNR, rnr_retry 7: retried through */
	connect_pair(ctx, &a, &b, conn_rnr(7), &amr, &bmr);
	post_recv(&a, abuf, amr, sizeof(abuf));
	VU_CHECK(!inject(NULL, 0, "rnr qp=%u count=2", a.qp->qp_num), "rnr");
	memset(bbuf, 0x5a, 64);
	VU_CHECK(post_one(&b, IBV_WR_SEND, bbuf, bmr, 64, 0, 0) ==
		 IBV_WC_SUCCESS, "a SEND retried through two RNR NAKs");
	{
		struct ibv_wc wc;

		VU_CHECK(vu_poll(a.rcq, &wc, 1, VU_WAIT_MS) == 1 &&
			 wc.status == IBV_WC_SUCCESS && wc.byte_len == 64,
			 "the receive");
		VU_CHECK(abuf[0] == 0x5a && abuf[63] == 0x5a, "bytes");
	}

	/* access: a good rkey refused, nothing written */
	memset(abuf, 0, sizeof(abuf));
	memset(bbuf, 0x77, sizeof(bbuf));
	VU_CHECK(!inject(NULL, 0, "access qp=%u", a.qp->qp_num), "access");
	VU_CHECK(post_one(&b, IBV_WR_RDMA_WRITE, bbuf, bmr, 4096,
			  (uintptr_t)abuf, amr->rkey) == IBV_WC_REM_ACCESS_ERR,
		 "a WRITE met by an injected access error");
	for (size_t i = 0; i < sizeof(abuf); i++)
		VU_CHECK(!abuf[i], "byte %zu written through a refused WRITE",
			 i);
	drop_pair(&a, &b, amr, bmr);

	/* lose: no answer; one lost message is retried through, more than
	 * retry_cnt allows end in a retry error (timeout 8: about 1 ms) */
	{
		struct vu_conn c = conn_rnr(7);
		struct ibv_wc wc;

		c.timeout = 8;
		c.retry_cnt = 2;
		connect_pair(ctx, &a, &b, c, &amr, &bmr);
		post_recv(&a, abuf, amr, sizeof(abuf));
		VU_CHECK(!inject(NULL, 0, "lose qp=%u", a.qp->qp_num), "lose");
		memset(bbuf, 0x3c, 64);
		VU_CHECK(post_one(&b, IBV_WR_SEND, bbuf, bmr, 64, 0, 0) ==
			 IBV_WC_SUCCESS, "a SEND sent again after a loss");
		VU_CHECK(vu_poll(a.rcq, &wc, 1, VU_WAIT_MS) == 1 &&
			 wc.status == IBV_WC_SUCCESS && wc.byte_len == 64 &&
			 abuf[0] == 0x3c, "the receive after a loss");
		VU_CHECK(!inject(NULL, 0, "lose qp=%u count=3", a.qp->qp_num),
			 "lose 3");
		VU_CHECK(post_one(&b, IBV_WR_RDMA_WRITE, bbuf, bmr, 64,
				  (uintptr_t)abuf, amr->rkey) ==
			 IBV_WC_RETRY_EXC_ERR,
			 "a WRITE lost three times with retry_cnt 2");
		drop_pair(&a, &b, amr, bmr);
	}
	VU_CHECK(!inject(out, sizeof(out), "status"), "status");
	VU_CHECK(strstr(out, "rnr 3,") && strstr(out, "access 1,") &&
		 strstr(out, "fatal 1,") && strstr(out, "cmd 3,") &&
		 strstr(out, "port 2,") && strstr(out, "lose 4") &&
		 strstr(out, "armed: 0"), "counts: %s", out);

	/* refused */
	VU_CHECK(inject(NULL, 0, "rnr qp=%u", 0xfffff0u) == 1,
		 "a fault for a QP that does not exist");
	VU_CHECK(inject(NULL, 0, "cmd=no_such errno=EIO") == 2,
		 "an unknown command name");
	VU_CHECK(inject(NULL, 0, "cmd=hello errno=EIO") == 1,
		 "HELLO cannot be made to fail");
}

/* The other process of wide_faults: a QP and an MR over its own buffer,
 * which it checks is untouched once the parent says so. */
static void target_process(int fd)
{
	struct ibv_context *ctx = vu_open();
	struct vu_ep a = { 0 };
	struct vu_addr me, peer;
	struct ibv_mr *mr;
	struct { uint64_t addr; uint32_t rkey; } where;
	static uint8_t buf[4096];
	char c;

	VU_CHECK(ctx, "target: no device");
	VU_CHECK(!vu_ep_create(&a, ctx, NULL, IBV_QPT_RC, &caps), "target ep");
	mr = ibv_reg_mr(a.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE);
	VU_CHECK(mr, "target mr");
	me = vu_addr_of(a.qp, 0);
	where.addr = (uintptr_t)buf;
	where.rkey = mr->rkey;
	vu_xfer_all(fd, &me, sizeof(me), true);
	vu_xfer_all(fd, &where, sizeof(where), true);
	vu_xfer_all(fd, &peer, sizeof(peer), false);
	{
		struct vu_conn cn = vu_conn_default();

		VU_CHECK(!vu_connect(a.qp, &peer, &cn), "target connect");
	}
	c = 'C';
	vu_xfer_all(fd, &c, 1, true);
	vu_xfer_all(fd, &c, 1, false);          /* the parent wrote */
	for (size_t i = 0; i < sizeof(buf); i++)
		VU_CHECK(!buf[i], "byte %zu written through a refused WRITE "
			 "from another process", i);
	VU_CHECK(!ibv_dereg_mr(mr), "target dereg");
	vu_ep_destroy(&a);
	VU_CHECK(!ibv_close_device(ctx), "target close");
	_exit(0);
}

static void wide_faults(struct ibv_context *ctx)
{
	struct vu_ep a, b;
	struct ibv_mr *amr, *bmr;
	struct ibv_async_event ev;
	struct ibv_wc wc;
	char out[512];
	int pid = (int)getpid();

	/* the whole device: the next SEND to any QP */
	connect_pair(ctx, &a, &b, conn_rnr(0), &amr, &bmr);
	post_recv(&a, abuf, amr, sizeof(abuf));
	VU_CHECK(!inject(NULL, 0, "rnr count=1"), "rnr for the device");
	VU_CHECK(post_one(&b, IBV_WR_SEND, bbuf, bmr, 64, 0, 0) ==
		 IBV_WC_RNR_RETRY_EXC_ERR,
		 "a SEND met by an RNR NAK armed for the device");
	drop_pair(&a, &b, amr, bmr);

	/* another process's fault is not ours */
	connect_pair(ctx, &a, &b, conn_rnr(0), &amr, &bmr);
	post_recv(&a, abuf, amr, sizeof(abuf));
	VU_CHECK(!inject(NULL, 0, "rnr pid=1"), "rnr for pid 1");
	VU_CHECK(post_one(&b, IBV_WR_SEND, bbuf, bmr, 64, 0, 0) ==
		 IBV_WC_SUCCESS, "an RNR NAK armed for pid 1 hit us");
	VU_CHECK(vu_poll(a.rcq, &wc, 1, VU_WAIT_MS) == 1 &&
		 wc.status == IBV_WC_SUCCESS, "the receive");
	VU_CHECK(!inject(out, sizeof(out), "status") &&
		 strstr(out, "armed: 1"), "pid 1's fault armed: %s", out);
	VU_CHECK(!inject(NULL, 0, "clear"), "clear");
	drop_pair(&a, &b, amr, bmr);

	/* this process, armed before its QPs exist */
	VU_CHECK(!inject(NULL, 0, "access pid=%d", pid), "access pid");
	connect_pair(ctx, &a, &b, conn_rnr(7), &amr, &bmr);
	memset(abuf, 0, sizeof(abuf));
	memset(bbuf, 0x66, sizeof(bbuf));
	VU_CHECK(post_one(&b, IBV_WR_RDMA_WRITE, bbuf, bmr, 4096,
			  (uintptr_t)abuf, amr->rkey) == IBV_WC_REM_ACCESS_ERR,
		 "a WRITE between QPs made after access pid=%d", pid);
	for (size_t i = 0; i < sizeof(abuf); i++)
		VU_CHECK(!abuf[i], "byte %zu written through a refused WRITE",
			 i);
	drop_pair(&a, &b, amr, bmr);

	/* lose, for this process */
	{
		struct vu_conn c = conn_rnr(7);

		c.timeout = 8;
		c.retry_cnt = 2;
		connect_pair(ctx, &a, &b, c, &amr, &bmr);
		post_recv(&a, abuf, amr, sizeof(abuf));
		VU_CHECK(!inject(NULL, 0, "lose pid=%d", pid), "lose pid");
		memset(bbuf, 0x4b, 64);
		VU_CHECK(post_one(&b, IBV_WR_SEND, bbuf, bmr, 64, 0, 0) ==
			 IBV_WC_SUCCESS, "a SEND sent again after a loss");
		VU_CHECK(vu_poll(a.rcq, &wc, 1, VU_WAIT_MS) == 1 &&
			 wc.status == IBV_WC_SUCCESS && abuf[0] == 0x4b,
			 "the receive after a loss");
	}

	/* fatal, for this process: both QPs */
	VU_CHECK(!inject(NULL, 0, "fatal pid=%d", pid), "fatal pid");
	{
		bool fa = false, fb = false;

		/* (after the access errors' QP_ACCESS_ERR events) */
		for (int i = 0, n = 0; n < 2; i++) {
			VU_CHECK(i < 8 && !vu_async_event(ctx, &ev, VU_WAIT_MS),
				 "QP_FATAL %d of 2", n + 1);
			if (ev.event_type != IBV_EVENT_QP_FATAL)
				continue;
			n++;
			fa |= ev.element.qp == a.qp;
			fb |= ev.element.qp == b.qp;
		}
		VU_CHECK(fa && fb, "QP_FATAL for both QPs of the process");
		VU_CHECK(vu_qp_state(a.qp) == IBV_QPS_ERR &&
			 vu_qp_state(b.qp) == IBV_QPS_ERR, "both in ERR");
	}
	drop_pair(&a, &b, amr, bmr);
	VU_CHECK(inject(NULL, 0, "fatal pid=%d", pid) == 1,
		 "fatal for a process without a QP");
	VU_CHECK(inject(NULL, 0, "fatal") == 2 &&
		 inject(NULL, 0, "rnr qp=1 pid=%d", pid) == 2,
		 "fatal of nothing, or of a QP and a process");

	/* another process's QP, armed before ours connects to it */
	{
		int sv[2], status;
		struct vu_addr ta, me;
		struct { uint64_t addr; uint32_t rkey; } where;
		struct vu_conn cn = vu_conn_default();
		pid_t child;
		char c;

		VU_CHECK(!socketpair(AF_UNIX, SOCK_STREAM, 0, sv), "socketpair");
		child = fork();
		VU_CHECK(child >= 0, "fork");
		if (child == 0) {
			close(sv[0]);
			target_process(sv[1]);
		}
		close(sv[1]);
		memset(&b, 0, sizeof(b));
		VU_CHECK(!vu_ep_create(&b, ctx, NULL, IBV_QPT_RC, &caps),
			 "ep b");
		bmr = ibv_reg_mr(b.pd, bbuf, sizeof(bbuf),
				 IBV_ACCESS_LOCAL_WRITE);
		VU_CHECK(bmr, "mr b");
		vu_xfer_all(sv[0], &ta, sizeof(ta), false);
		vu_xfer_all(sv[0], &where, sizeof(where), false);
		VU_CHECK(!inject(NULL, 0, "access pid=%d", (int)child),
			 "access for the other process");
		VU_CHECK(!vu_connect(b.qp, &ta, &cn), "connect b");
		me = vu_addr_of(b.qp, 0);
		vu_xfer_all(sv[0], &me, sizeof(me), true);
		vu_xfer_all(sv[0], &c, 1, false);       /* connected */
		memset(bbuf, 0x5d, sizeof(bbuf));
		VU_CHECK(post_one(&b, IBV_WR_RDMA_WRITE, bbuf, bmr, 4096,
				  where.addr, where.rkey) ==
			 IBV_WC_REM_ACCESS_ERR,
			 "a WRITE to a QP of a process with access armed");
		vu_xfer_all(sv[0], &c, 1, true);
		VU_CHECK(waitpid(child, &status, 0) == child &&
			 WIFEXITED(status) && !WEXITSTATUS(status),
			 "the other process's memory was written");
		close(sv[0]);
		VU_CHECK(!ibv_dereg_mr(bmr), "dereg b");
		vu_ep_destroy(&b);
	}
	VU_CHECK(!inject(out, sizeof(out), "status"), "status");
	VU_CHECK(strstr(out, "rnr 4,") && strstr(out, "access 3,") &&
		 strstr(out, "fatal 3,") && strstr(out, "lose 5") &&
		 strstr(out, "armed: 0"), "counts: %s", out);
}

int main(void)
{
	struct ibv_context *ctx = vu_open();

	VU_CHECK(ctx, "no device");
	cmd_faults(ctx);
	port_faults(ctx);
	qp_faults(ctx);
	wide_faults(ctx);
	VU_CHECK(!ibv_close_device(ctx), "close");
	printf("PASS: every injected fault has its effect\n");
	return 0;
}
