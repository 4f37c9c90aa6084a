// SPDX-License-Identifier: MIT
/*
 * XRC through the standard verbs API, at its edges: XRC domains (private,
 * shared by a file, O_CREAT / O_EXCL, busy), XRC SRQs and their numbers,
 * XRC_SEND and XRC_RECV QPs, ibv_open_qp, a domain shared by two processes
 * (a message from one process lands in the other's SRQ through a target QP
 * of the first; the target outlives its creator's handle while the other
 * process has it open), an SRQ number that names nothing or another domain (an
 * error completion, the daemon fine), and ibv_wr_set_xrc_srqn.
 *
 * Waits are bounded (vu_poll), never used as synchronisation.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <infiniband/verbs.h>

#include "vu.h"

static char g_file[256];

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_xrcd *xrcd;
	struct ibv_mr *mr;
	char buf[8192];
};

/* An XRC domain of file (NULL: private) with oflags. */
static struct ibv_xrcd *open_xrcd(struct ibv_context *ctx, const char *file,
				  int oflags, int *fd_out)
{
	struct ibv_xrcd_init_attr a = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1,
		.oflags = oflags,
	};
	struct ibv_xrcd *x;

	if (file) {
		a.fd = open(file, O_RDONLY | O_CREAT, 0600);
		assert_true(a.fd >= 0);
	}
	x = ibv_open_xrcd(ctx, &a);
	if (fd_out)
		*fd_out = a.fd;
	else if (a.fd >= 0)
		close(a.fd);
	return x;
}

static void side_up(struct side *s, const char *file)
{
	memset(s, 0, sizeof(*s));
	s->ctx = vu_open();
	assert_non_null(s->ctx);
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 64, NULL, NULL, 0);
	s->mr = ibv_reg_mr(s->pd, s->buf, sizeof(s->buf),
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	assert_non_null(s->pd);
	assert_non_null(s->cq);
	assert_non_null(s->mr);
	s->xrcd = open_xrcd(s->ctx, file, O_CREAT, NULL);
	assert_non_null(s->xrcd);
}

static void side_down(struct side *s)
{
	assert_int_equal(ibv_close_xrcd(s->xrcd), 0);
	assert_int_equal(ibv_dereg_mr(s->mr), 0);
	assert_int_equal(ibv_destroy_cq(s->cq), 0);
	assert_int_equal(ibv_dealloc_pd(s->pd), 0);
	assert_int_equal(ibv_close_device(s->ctx), 0);
}

static struct ibv_srq *xsrq(struct side *s, struct ibv_xrcd *xrcd,
			    uint32_t *num)
{
	struct ibv_srq_init_attr_ex a = {
		.attr = { .max_wr = 16, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD |
			     IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD,
		.srq_type = IBV_SRQT_XRC,
		.xrcd = xrcd,
		.cq = s->cq,
		.pd = s->pd,
	};
	struct ibv_srq *srq = ibv_create_srq_ex(s->ctx, &a);

	assert_non_null(srq);
	assert_int_equal(ibv_get_srq_num(srq, num), 0);
	assert_true(*num != 0 && *num <= 0xffffff);
	return srq;
}

static void post_srq_recv(struct side *s, struct ibv_srq *srq, size_t off,
			  uint32_t len, uint64_t id)
{
	struct ibv_sge sge = {
		(uintptr_t)s->buf + off, len, s->mr->lkey
	};
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	assert_int_equal(ibv_post_srq_recv(srq, &wr, &bad), 0);
}

static struct ibv_qp *tgt_qp(struct side *s)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = IBV_QPT_XRC_RECV,
		.comp_mask = IBV_QP_INIT_ATTR_XRCD,
		.xrcd = s->xrcd,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(s->ctx, &a);

	assert_non_null(qp);
	return qp;
}

static struct ibv_qp *ini_qp(struct side *s, bool ex)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = IBV_QPT_XRC_SEND,
		.send_cq = s->cq,
		.cap = { .max_send_wr = 16, .max_send_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = s->pd,
	};
	struct ibv_qp *qp;

	if (ex) {
		a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		a.send_ops_flags = IBV_QP_EX_WITH_SEND;
	}
	qp = ibv_create_qp_ex(s->ctx, &a);
	assert_non_null(qp);
	assert_int_equal(a.cap.max_recv_wr, 0);
	return qp;
}

/* Bring tgt (XRC_RECV) and ini (XRC_SEND) to RTS towards each other's
 * numbers (the peers may be QPs of another process: only numbers). */
static void connect_tgt(struct ibv_qp *tgt, uint32_t ini_qpn,
			const union ibv_gid *gid)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};

	assert_int_equal(ibv_modify_qp(tgt, &a, IBV_QP_STATE |
				       IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				       IBV_QP_ACCESS_FLAGS), 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = ini_qpn;
	a.rq_psn = 7;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	assert_int_equal(ibv_modify_qp(tgt, &a, IBV_QP_STATE | IBV_QP_AV |
				       IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				       IBV_QP_MIN_RNR_TIMER), 0);
}

static void connect_ini(struct ibv_qp *ini, uint32_t tgt_qpn,
			const union ibv_gid *gid)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
	};

	assert_int_equal(ibv_modify_qp(ini, &a, IBV_QP_STATE |
				       IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				       IBV_QP_ACCESS_FLAGS), 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = tgt_qpn;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	assert_int_equal(ibv_modify_qp(ini, &a, IBV_QP_STATE | IBV_QP_AV |
				       IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				       IBV_QP_RQ_PSN), 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 7;
	assert_int_equal(ibv_modify_qp(ini, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
				       IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT |
				       IBV_QP_RNR_RETRY |
				       IBV_QP_MAX_QP_RD_ATOMIC), 0);
}

static void post_xrc_send(struct side *s, struct ibv_qp *ini, size_t off,
			  uint32_t len, uint32_t srqn)
{
	struct ibv_sge sge = {
		(uintptr_t)s->buf + off, len, s->mr->lkey
	};
	struct ibv_send_wr wr = {
		.wr_id = 99, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad;

	wr.qp_type.xrc.remote_srqn = srqn;
	assert_int_equal(ibv_post_send(ini, &wr, &bad), 0);
}

/* ---- XRC domains ---- */

static void test_xrcd(void **state)
{
	struct ibv_device_attr_ex dx;
	struct ibv_context *ctx = vu_open();
	struct ibv_xrcd *a, *b, *p, *x;
	char fresh[300];
	int fd;

	(void)state;
	assert_non_null(ctx);
	assert_int_equal(ibv_query_device_ex(ctx, NULL, &dx), 0);
	assert_true(dx.orig_attr.device_cap_flags & IBV_DEVICE_XRC);
	/* private */
	p = open_xrcd(ctx, NULL, 0, NULL);
	assert_non_null(p);
	/* a file that names no domain yet: ENOENT without O_CREAT */
	snprintf(fresh, sizeof(fresh), "%s.fresh", g_file);
	unlink(fresh);
	errno = 0;
	x = open_xrcd(ctx, fresh, 0, NULL);
	assert_null(x);
	assert_int_equal(errno, ENOENT);
	a = open_xrcd(ctx, fresh, O_CREAT, NULL);
	assert_non_null(a);
	/* now it does: found without O_CREAT, refused with O_EXCL */
	b = open_xrcd(ctx, fresh, 0, NULL);
	assert_non_null(b);
	errno = 0;
	assert_null(open_xrcd(ctx, fresh, O_CREAT | O_EXCL, NULL));
	assert_int_equal(errno, EEXIST);
	/* bad arguments */
	{
		struct ibv_xrcd_init_attr bad = {
			.comp_mask = IBV_XRCD_INIT_ATTR_FD | (1u << 7),
			.fd = -1,
		};

		errno = 0;
		assert_null(ibv_open_xrcd(ctx, &bad));
		assert_int_equal(errno, EINVAL);
		bad.comp_mask = IBV_XRCD_INIT_ATTR_FD;
		fd = open("/dev/null", O_RDONLY);
		close(fd);
		bad.fd = fd;            /* closed */
		errno = 0;
		assert_null(ibv_open_xrcd(ctx, &bad));
		assert_int_equal(errno, EBADF);
	}
	assert_int_equal(ibv_close_xrcd(a), 0);
	assert_int_equal(ibv_close_xrcd(b), 0);
	/* the last handle closed: the domain is gone */
	errno = 0;
	assert_null(open_xrcd(ctx, fresh, 0, NULL));
	assert_int_equal(errno, ENOENT);
	assert_int_equal(ibv_close_xrcd(p), 0);
	unlink(fresh);
	assert_int_equal(ibv_close_device(ctx), 0);
}

/* SRQ numbers, busy domains and CQs, what XRC QPs take. */
static void test_srq_busy(void **state)
{
	struct side s;
	struct ibv_srq *s1, *s2;
	struct ibv_qp *tgt, *ini;
	uint32_t n1, n2;

	(void)state;
	side_up(&s, NULL);
	s1 = xsrq(&s, s.xrcd, &n1);
	s2 = xsrq(&s, s.xrcd, &n2);
	assert_int_not_equal(n1, n2);
	tgt = tgt_qp(&s);
	ini = ini_qp(&s, false);
	assert_null(tgt->pd);
	/* busy: SRQs and a target QP use the domain, an SRQ the CQ */
	assert_int_equal(ibv_close_xrcd(s.xrcd), EBUSY);
	assert_int_equal(ibv_destroy_cq(s.cq), EBUSY);
	assert_int_equal(ibv_destroy_srq(s1), 0);
	assert_int_equal(ibv_destroy_srq(s2), 0);
	assert_int_equal(ibv_close_xrcd(s.xrcd), EBUSY);
	/* no receive queue on either: posting receives is refused */
	{
		struct ibv_recv_wr wr = { .wr_id = 1 }, *bad;

		assert_int_not_equal(ibv_post_recv(ini, &wr, &bad), 0);
		assert_int_not_equal(ibv_post_recv(tgt, &wr, &bad), 0);
	}
	/* a target has no send queue */
	{
		struct ibv_send_wr wr = { .opcode = IBV_WR_SEND }, *bad;

		assert_int_not_equal(ibv_post_send(tgt, &wr, &bad), 0);
	}
	/* XRC_RECV without a domain, XRC_SEND with an SRQ: refused */
	{
		struct ibv_qp_init_attr_ex a = {
			.qp_type = IBV_QPT_XRC_RECV,
			.comp_mask = IBV_QP_INIT_ATTR_PD, .pd = s.pd,
		};

		assert_null(ibv_create_qp_ex(s.ctx, &a));
	}
	assert_int_equal(ibv_destroy_qp(tgt), 0);
	assert_int_equal(ibv_destroy_qp(ini), 0);
	side_down(&s);
}

/* One process, one domain: XRC_SEND -> XRC_RECV -> SRQ by number; an SRQ
 * number of no SRQ, or of another domain's: an error completion. Also the
 * ibv_wr_* API. */
static void test_send_local(void **state)
{
	struct side s;
	struct ibv_xrcd *other;
	struct ibv_srq *srq, *osrq;
	struct ibv_qp *tgt, *ini;
	union ibv_gid gid;
	struct ibv_wc wc[2];
	uint32_t n, on;

	(void)state;
	side_up(&s, NULL);
	assert_int_equal(vu_gid(s.ctx, &gid), 0);
	srq = xsrq(&s, s.xrcd, &n);
	tgt = tgt_qp(&s);
	for (int round = 0; round < 3; round++) {
		bool ex = round == 1;

		ini = ini_qp(&s, ex);
		if (round == 0)
			connect_tgt(tgt, ini->qp_num, &gid);
		else {
			/* the target follows the new initiator */
			struct ibv_qp_attr r = { .qp_state = IBV_QPS_RESET };

			assert_int_equal(ibv_modify_qp(tgt, &r, IBV_QP_STATE),
					 0);
			connect_tgt(tgt, ini->qp_num, &gid);
		}
		connect_ini(ini, tgt->qp_num, &gid);
		memset(s.buf, 0, sizeof(s.buf));
		snprintf(s.buf, 64, "xrc round %d", round);
		post_srq_recv(&s, srq, 4096, 4096, 1000 + round);
		if (round == 2) {
			/* no such SRQ: an error, the QP in ERR */
			post_xrc_send(&s, ini, 0, 64, n ^ 0x800000);
			assert_int_equal(vu_poll(s.cq, wc, 1, VU_WAIT_MS), 1);
			assert_int_equal(wc[0].status, IBV_WC_REM_INV_REQ_ERR);
			assert_int_equal(vu_qp_state(ini), IBV_QPS_ERR);
			assert_int_equal(ibv_destroy_qp(ini), 0);
			break;
		}
		if (ex) {
			struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(ini);

			assert_non_null(qx);
			ibv_wr_start(qx);
			qx->wr_id = 99;
			qx->wr_flags = IBV_SEND_SIGNALED;
			ibv_wr_send(qx);
			ibv_wr_set_xrc_srqn(qx, n);
			ibv_wr_set_sge(qx, s.mr->lkey, (uintptr_t)s.buf, 64);
			assert_int_equal(ibv_wr_complete(qx), 0);
		} else {
			post_xrc_send(&s, ini, 0, 64, n);
		}
		/* the send's and the receive's completions, on one CQ */
		assert_int_equal(vu_poll(s.cq, wc, 2, VU_WAIT_MS), 2);
		for (int i = 0; i < 2; i++) {
			assert_int_equal(wc[i].status, IBV_WC_SUCCESS);
			if (wc[i].opcode == IBV_WC_RECV) {
				assert_int_equal(wc[i].wr_id, 1000 + round);
				assert_int_equal(wc[i].byte_len, 64);
				assert_int_equal(wc[i].qp_num, tgt->qp_num);
				assert_int_equal(wc[i].src_qp, ini->qp_num);
			} else {
				assert_int_equal(wc[i].wr_id, 99);
			}
		}
		assert_memory_equal(s.buf + 4096, s.buf, 64);
		assert_int_equal(ibv_destroy_qp(ini), 0);
	}
	/* an SRQ of another domain (private): refused as well */
	other = open_xrcd(s.ctx, NULL, 0, NULL);
	assert_non_null(other);
	osrq = xsrq(&s, other, &on);
	ini = ini_qp(&s, false);
	{
		struct ibv_qp_attr r = { .qp_state = IBV_QPS_RESET };

		assert_int_equal(ibv_modify_qp(tgt, &r, IBV_QP_STATE), 0);
	}
	connect_tgt(tgt, ini->qp_num, &gid);
	connect_ini(ini, tgt->qp_num, &gid);
	post_srq_recv(&s, osrq, 0, 64, 5);
	post_xrc_send(&s, ini, 0, 64, on);
	assert_int_equal(vu_poll(s.cq, wc, 1, VU_WAIT_MS), 1);
	assert_int_equal(wc[0].status, IBV_WC_REM_INV_REQ_ERR);
	assert_int_equal(ibv_destroy_qp(ini), 0);
	assert_int_equal(ibv_destroy_qp(tgt), 0);
	assert_int_equal(ibv_destroy_srq(osrq), 0);
	assert_int_equal(ibv_close_xrcd(other), 0);
	/* destroying an SRQ completes nothing; nothing else came */
	assert_int_equal(ibv_destroy_srq(srq), 0);
	assert_int_equal(vu_poll(s.cq, wc, 1, 0), 0);
	side_down(&s);
}

/* ---- two processes sharing a domain through a file ---- */

static bool get_msg(struct side *s, uint64_t id, uint32_t qpn,
		    const char *text)
{
	struct ibv_wc wc;

	return vu_poll(s->cq, &wc, 1, VU_WAIT_MS) == 1 &&
	       wc.status == IBV_WC_SUCCESS && wc.wr_id == id &&
	       wc.qp_num == qpn && wc.byte_len == 100 &&
	       !strcmp(s->buf + id * 1024, text);
}

static int child_main(int rd, int wr)
{
	struct side s;
	struct ibv_srq *srq;
	struct ibv_qp *op;
	struct ibv_qp_open_attr oa;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	uint32_t n, tgt_qpn;

	side_up(&s, g_file);
	srq = xsrq(&s, s.xrcd, &n);
	post_srq_recv(&s, srq, 1024, 1024, 1);
	post_srq_recv(&s, srq, 2048, 1024, 2);
	if (write(wr, &n, sizeof(n)) != sizeof(n) ||
	    read(rd, &tgt_qpn, sizeof(tgt_qpn)) != sizeof(tgt_qpn))
		return 2;
	/* the parent's target QP, opened through our handle on the domain */
	memset(&oa, 0, sizeof(oa));
	oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
		       IBV_QP_OPEN_ATTR_TYPE;
	oa.qp_num = tgt_qpn;
	oa.xrcd = s.xrcd;
	oa.qp_type = IBV_QPT_XRC_RECV;
	op = ibv_open_qp(s.ctx, &oa);
	if (!op || op->qp_num != tgt_qpn)
		return 3;
	if (ibv_query_qp(op, &qa, IBV_QP_STATE, &qi) ||
	    qa.qp_state != IBV_QPS_RTR)
		return 4;
	/* a number of no XRC_RECV QP */
	oa.qp_num = tgt_qpn ^ 0x400000;
	errno = 0;
	if (ibv_open_qp(s.ctx, &oa) || !errno)
		return 5;
	/* opened: the parent may send */
	if (write(wr, &n, sizeof(n)) != sizeof(n))
		return 13;
	/* the parent's message, in our SRQ; its QP's first message is an
	 * event of ours too */
	if (!get_msg(&s, 1, tgt_qpn, "from the parent"))
		return 6;
	{
		struct ibv_async_event ev;

		if (vu_async_event(s.ctx, &ev, VU_WAIT_MS) ||
		    ev.event_type != IBV_EVENT_COMM_EST ||
		    ev.element.qp != op)
			return 12;
	}
	if (write(wr, &n, sizeof(n)) != sizeof(n) ||
	    read(rd, &n, sizeof(n)) != sizeof(n))
		return 7;
	/* the parent destroyed its handle: the QP is ours now, and works */
	if (ibv_query_qp(op, &qa, IBV_QP_STATE, &qi) ||
	    qa.qp_state != IBV_QPS_RTR)
		return 8;
	if (!get_msg(&s, 2, tgt_qpn, "again, its QP ours"))
		return 9;
	if (ibv_close_xrcd(s.xrcd) != EBUSY || ibv_destroy_qp(op) ||
	    ibv_destroy_srq(srq))
		return 10;
	if (write(wr, &n, sizeof(n)) != sizeof(n))
		return 11;
	side_down(&s);
	return 0;
}

static void test_two_processes(void **state)
{
	int to_child[2], to_parent[2], st;
	struct side s;
	struct ibv_qp *tgt, *ini;
	union ibv_gid gid;
	struct ibv_wc wc;
	uint32_t n, tgt_qpn;
	pid_t pid;

	(void)state;
	unlink(g_file);
	assert_int_equal(pipe(to_child), 0);
	assert_int_equal(pipe(to_parent), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		close(to_child[1]);
		close(to_parent[0]);
		_exit(child_main(to_child[0], to_parent[1]));
	}
	close(to_child[0]);
	close(to_parent[1]);
	side_up(&s, g_file);
	assert_int_equal(vu_gid(s.ctx, &gid), 0);
	tgt = tgt_qp(&s);
	tgt_qpn = tgt->qp_num;
	ini = ini_qp(&s, false);
	connect_tgt(tgt, ini->qp_num, &gid);
	connect_ini(ini, tgt_qpn, &gid);
	assert_int_equal(read(to_parent[0], &n, sizeof(n)), sizeof(n));
	assert_int_equal(write(to_child[1], &tgt_qpn, 4), 4);
	/* the child has our target open before the first message */
	assert_int_equal(read(to_parent[0], &n, sizeof(n)), sizeof(n));
	strcpy(s.buf, "from the parent");
	post_xrc_send(&s, ini, 0, 100, n);
	assert_int_equal(vu_poll(s.cq, &wc, 1, VU_WAIT_MS), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	/* the child has it: our handle goes, the child's keeps the QP */
	assert_int_equal(read(to_parent[0], &n, sizeof(n)), sizeof(n));
	assert_int_equal(ibv_destroy_qp(tgt), 0);
	assert_int_equal(write(to_child[1], &n, 4), 4);
	strcpy(s.buf, "again, its QP ours");
	post_xrc_send(&s, ini, 0, 100, n);
	assert_int_equal(vu_poll(s.cq, &wc, 1, VU_WAIT_MS), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(read(to_parent[0], &n, sizeof(n)), sizeof(n));
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_int_equal(ibv_destroy_qp(ini), 0);
	side_down(&s);
	close(to_child[1]);
	close(to_parent[0]);
	unlink(g_file);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_xrcd),
		cmocka_unit_test(test_srq_busy),
		cmocka_unit_test(test_send_local),
		cmocka_unit_test(test_two_processes),
	};
	const char *dir = getenv("SV_TEST_DIR");

	snprintf(g_file, sizeof(g_file), "%s/xrc_domain",
		 dir ? dir : "/tmp");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
