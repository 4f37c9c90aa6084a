// SPDX-License-Identifier: MIT
/*
 * softverbs why (issue 24, Deliver 5): every refused command and every
 * error completion this test provokes is listed with the device's reason:
 *   ibv_reg_mr over unmapped memory: REG_MR refused, Bad address, and the
 *     range;
 *   a WRITE whose rkey's MR has no REMOTE_WRITE: REM_ACCESS_ERR, "lacks
 *     REMOTE_WRITE";
 *   a WRITE past the end of the MR: REM_ACCESS_ERR, the range and the MR's;
 *   a SEND with an lkey that names no MR: LOC_PROT_ERR, "names no valid MR";
 *   a SEND with no receive posted and rnr_retry 0: RNR_RETRY_EXC_ERR, and
 *     what it means;
 * each under the QP (--qp) or the process (--pid) it belongs to, and
 * nothing under a QP that had no error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vu.h"

static const struct vu_qp_caps caps = {
	.send_wr = 16, .recv_wr = 16, .send_sge = 1, .recv_sge = 1,
};

/* softverbs why ARGS into out; it must succeed */
static void why(char *out, size_t len, const char *args)
{
	VU_CHECK(vu_softverbs(out, len, "why %s", args) == 0,
		 "softverbs why %s failed: %s", args, out);
}

static void expect_in(const char *args, const char *a, const char *b)
{
	static char out[65536];

	why(out, sizeof(out), args);
	VU_CHECK(strstr(out, a) && (!b || strstr(out, b)),
		 "softverbs why %s shows no '%s'%s%s:\n%s", args, a,
		 b ? " with " : "", b ? b : "", out);
}

#define post(ep, op, addr, lkey, len, raddr, rkey) \
	vu_post_one(ep, op, 42, addr, lkey, len, raddr, rkey)

int main(void)
{
	static uint8_t abuf[4096], bbuf[4096];
	struct ibv_context *ctx = vu_open();
	struct vu_conn c = vu_conn_default();
	struct vu_ep a, b;
	struct ibv_mr *amr, *bmr;
	struct ibv_pd *pd;
	char args[64];
	void *hole;

	VU_CHECK(ctx, "no device");
	pd = ibv_alloc_pd(ctx);
	VU_CHECK(pd, "pd");
	VU_CHECK(!vu_ep_create(&a, ctx, pd, IBV_QPT_RC, &caps), "ep a");
	VU_CHECK(!vu_ep_create(&b, ctx, pd, IBV_QPT_RC, &caps), "ep b");
	c.rnr_retry = 0;
	VU_CHECK(!vu_connect_pair(a.qp, b.qp, &c), "connect");

	/* a refused command */
	hole = mmap(NULL, 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	VU_CHECK(hole != MAP_FAILED, "mmap");
	munmap(hole, 8192);
	errno = 0;
	VU_CHECK(!ibv_reg_mr(pd, hole, 8192, IBV_ACCESS_LOCAL_WRITE) &&
		 errno == EFAULT, "reg_mr of unmapped memory: errno %d", errno);
	snprintf(args, sizeof(args), "--pid %d", (int)getpid());
	expect_in(args, "REG_MR refused: Bad address", NULL);

	/* no REMOTE_WRITE */
	amr = ibv_reg_mr(pd, abuf, sizeof(abuf), IBV_ACCESS_LOCAL_WRITE |
			 IBV_ACCESS_REMOTE_READ);
	bmr = ibv_reg_mr(pd, bbuf, sizeof(bbuf), IBV_ACCESS_LOCAL_WRITE);
	VU_CHECK(amr && bmr, "mrs");
	VU_CHECK(post(&b, IBV_WR_RDMA_WRITE, (uintptr_t)bbuf, bmr->lkey, 64,
		      (uintptr_t)abuf, amr->rkey) == IBV_WC_REM_ACCESS_ERR,
		 "a WRITE without REMOTE_WRITE");
	snprintf(args, sizeof(args), "--qp %u", b.qp->qp_num);
	expect_in(args, "RDMA_WRITE wr_id 42: REM_ACCESS_ERR", "lacks REMOTE_WRITE");
	snprintf(args, sizeof(args), "--qp %u", a.qp->qp_num);
	{
		char out[4096];

		why(out, sizeof(out), args);
		VU_CHECK(!strstr(out, "REM_ACCESS_ERR"),
			 "the responder's QP shows the requester's error:\n%s",
			 out);
	}
	VU_CHECK(!ibv_dereg_mr(amr), "dereg");
	vu_ep_destroy(&b);
	vu_ep_destroy(&a);

	/* past the end; a bad lkey; no receive posted */
	VU_CHECK(!vu_ep_create(&a, ctx, pd, IBV_QPT_RC, &caps), "ep a");
	VU_CHECK(!vu_ep_create(&b, ctx, pd, IBV_QPT_RC, &caps), "ep b");
	VU_CHECK(!vu_connect_pair(a.qp, b.qp, &c), "connect");
	VU_CHECK(!ibv_dereg_mr(bmr), "dereg");
	amr = ibv_reg_mr(pd, abuf, sizeof(abuf), IBV_ACCESS_LOCAL_WRITE |
			 IBV_ACCESS_REMOTE_WRITE);
	bmr = ibv_reg_mr(pd, bbuf, sizeof(bbuf), IBV_ACCESS_LOCAL_WRITE);
	VU_CHECK(amr && bmr, "mrs");
	VU_CHECK(post(&b, IBV_WR_RDMA_WRITE, (uintptr_t)bbuf, bmr->lkey, 200,
		      (uintptr_t)abuf + 4000, amr->rkey) ==
		 IBV_WC_REM_ACCESS_ERR, "a WRITE past the MR");
	snprintf(args, sizeof(args), "--qp %u", b.qp->qp_num);
	expect_in(args, "REM_ACCESS_ERR", "+200) is outside its MR");
	vu_ep_destroy(&b);
	vu_ep_destroy(&a);

	VU_CHECK(!vu_ep_create(&a, ctx, pd, IBV_QPT_RC, &caps), "ep a");
	VU_CHECK(!vu_ep_create(&b, ctx, pd, IBV_QPT_RC, &caps), "ep b");
	VU_CHECK(!vu_connect_pair(a.qp, b.qp, &c), "connect");
	VU_CHECK(post(&b, IBV_WR_SEND, (uintptr_t)bbuf, bmr->lkey + 0x100, 64,
		      0, 0) == IBV_WC_LOC_PROT_ERR, "a SEND with a bad lkey");
	snprintf(args, sizeof(args), "--qp %u", b.qp->qp_num);
	expect_in(args, "SEND wr_id 42: LOC_PROT_ERR", "names no valid MR");
	vu_ep_destroy(&b);
	vu_ep_destroy(&a);

	VU_CHECK(!vu_ep_create(&a, ctx, pd, IBV_QPT_RC, &caps), "ep a");
	VU_CHECK(!vu_ep_create(&b, ctx, pd, IBV_QPT_RC, &caps), "ep b");
	VU_CHECK(!vu_connect_pair(a.qp, b.qp, &c), "connect");
	{
		enum ibv_wc_status st = post(&b, IBV_WR_SEND, (uintptr_t)bbuf,
					     bmr->lkey, 64, 0, 0);

		VU_CHECK(st == IBV_WC_RNR_RETRY_EXC_ERR,
			 "a SEND with no receive posted: %s",
			 ibv_wc_status_str(st));
	}
	snprintf(args, sizeof(args), "--qp %u", b.qp->qp_num);
	expect_in(args, "RNR_RETRY_EXC_ERR", "no receive WQE posted");
	vu_ep_destroy(&b);
	vu_ep_destroy(&a);

	VU_CHECK(!ibv_dereg_mr(amr) && !ibv_dereg_mr(bmr), "dereg");
	VU_CHECK(!ibv_dealloc_pd(pd), "dealloc");
	VU_CHECK(!ibv_close_device(ctx), "close");
	printf("PASS: every refusal and error completion has its reason\n");
	return 0;
}
