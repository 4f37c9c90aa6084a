// SPDX-License-Identifier: MIT
/*
 * RDMA FLUSH (IBTA 1.5) from the requester, as Linux rxe does it, on one
 * host or across two (RoCEv2 opcode 0x1C with the FETH, answered by a
 * zero-length READ response):
 *
 *   test_flush                   both sides here, through 127.0.0.1
 *   test_flush server PORT       the side whose memory is flushed
 *   test_flush client HOST PORT  the side that posts
 *
 * The client checks:
 *  - the device says it has FLUSH of global visibility (device_cap_flags_ex
 *    bit 38); IBV_QP_EX_WITH_FLUSH is taken on RC, refused on UC and UD
 *    (EOPNOTSUPP, as rxe: RC only);
 *  - ibv_wr_flush of a range (IBV_FLUSH_RANGE) and of the MR
 *    (IBV_FLUSH_MR, any length: ignored) after an RDMA WRITE, in one
 *    session and in sessions of their own, completes with IBV_WC_FLUSH
 *    (rdma-core 56's 8), in order; a READ reads the written bytes back;
 *  - ibv_post_send refuses IBV_WR_FLUSH (EINVAL: no ibv_send_wr names its
 *    fields); a QP made without the flag fails its session (EINVAL);
 *  - an MR asking for FLUSH_PERSISTENT is refused (no persistent memory);
 *  - remote access errors, each on a QP of its own (it goes to error): a
 *    PERSISTENT flush of an MR with FLUSH_GLOBAL only (rdma-core's
 *    test_qp_ex_rc_flush_type_violate), an MR without the FLUSH right, a
 *    range past the MR's end, a key that names nothing; a placement type
 *    that is none is a remote invalid request; a range longer than a
 *    message a local length error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "vu.h"

#define CHECK VU_CHECK

/* rdma-core 56's names, which Debian 12's verbs.h lacks */
#define WR_FLUSH            14
#define WC_FLUSH            8
#define QP_EX_WITH_FLUSH    (1ull << 11)
#define ACCESS_FLUSH_GLOBAL     (1u << 8)
#define ACCESS_FLUSH_PERSISTENT (1u << 9)
#define FLUSH_GLOBAL        1
#define FLUSH_PERSISTENT    2
#define FLUSH_RANGE         0
#define FLUSH_MR            1
#define DEV_FLUSH_GLOBAL    (1ull << 38)

/* the wr_flush that follows rdma-core 44's struct ibv_qp_ex in 56: past
 * wr_atomic_write, 44's last member (built against 56's verbs.h, ex's own
 * wr_flush; against 44's, the word past ex) */
typedef void (*wr_flush_fn)(struct ibv_qp_ex *qp, uint32_t rkey,
			    uint64_t remote_addr, size_t len, uint8_t type,
			    uint8_t level);

static void wr_flush(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr,
		     size_t len, uint8_t type, uint8_t level)
{
	wr_flush_fn f;

	memcpy(&f, (char *)x + offsetof(struct ibv_qp_ex, wr_atomic_write) +
			   sizeof(x->wr_atomic_write), sizeof(f));
	f(x, rkey, addr, len, type, level);
}

#define NQP     8      /* main, 6 for the errors, one without the flag */
#define MSG     1024
#define HALF    4096   /* the FLUSH MR: [0, HALF); the other: [HALF, 2*HALF) */

struct target {
	struct vu_addr qp[NQP];
	uint64_t addr;             /* 2 * HALF bytes */
	uint32_t rkey;             /* the first half: WRITE, READ, FLUSH_GLOBAL */
	uint32_t nf_rkey;          /* the second: WRITE, READ, no FLUSH right */
};

static struct ibv_qp *mk_qp(struct ibv_pd *pd, struct ibv_cq **cq,
			    enum ibv_qp_type type, uint64_t ex_ops, int *err)
{
	struct ibv_qp_init_attr_ex a;
	struct ibv_qp *qp;

	*cq = ibv_create_cq(pd->context, 256, NULL, NULL, 0);
	CHECK(*cq, "ibv_create_cq");
	memset(&a, 0, sizeof(a));
	a.qp_type = type;
	a.send_cq = a.recv_cq = *cq;
	a.cap.max_send_wr = 64;
	a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	a.pd = pd;
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	if (ex_ops) {
		a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		a.send_ops_flags = ex_ops;
	}
	qp = ibv_create_qp_ex(pd->context, &a);
	if (err)
		*err = qp ? 0 : errno;
	if (!qp)
		ibv_destroy_cq(*cq);
	return qp;
}

/* ---------------- the server ---------------- */

static int server(int ls)
{
	struct vu_conn c = vu_conn_default();
	struct ibv_context *ctx = vu_open();
	struct ibv_qp *qp[NQP];
	struct ibv_cq *cq[NQP];
	struct ibv_mr *mr, *nf;
	struct ibv_pd *pd;
	struct vu_addr peer[NQP];
	struct target t;
	char *buf, go;
	int fd, bad = 0;

	CHECK(ctx, "no sv0");
	pd = ibv_alloc_pd(ctx);
	buf = aligned_alloc(4096, 2 * HALF);
	CHECK(pd && buf, "pd, memory");
	memset(buf, 0, 2 * HALF);
	mr = ibv_reg_mr(pd, buf, HALF,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ | ACCESS_FLUSH_GLOBAL);
	CHECK(mr, "ibv_reg_mr with IBV_ACCESS_FLUSH_GLOBAL: %s",
	      strerror(errno));
	nf = ibv_reg_mr(pd, buf + HALF, HALF,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ);
	CHECK(nf, "ibv_reg_mr");
	/* no persistent memory here: refused, as rxe refuses it */
	CHECK(!ibv_reg_mr(pd, buf, HALF, IBV_ACCESS_LOCAL_WRITE |
					  ACCESS_FLUSH_PERSISTENT),
	      "an MR with IBV_ACCESS_FLUSH_PERSISTENT was registered");
	for (int i = 0; i < NQP; i++) {
		qp[i] = mk_qp(pd, &cq[i], IBV_QPT_RC, 0, NULL);
		CHECK(qp[i], "ibv_create_qp");
		t.qp[i] = vu_addr_of(qp[i], c.sq_psn);
	}
	t.addr = (uintptr_t)buf;
	t.rkey = mr->rkey;
	t.nf_rkey = nf->rkey;
	fd = accept(ls, NULL, NULL);
	CHECK(fd >= 0, "accept");
	close(ls);
	vu_xfer_all(fd, peer, sizeof(peer), false);
	for (int i = 0; i < NQP; i++)
		CHECK(!vu_connect(qp[i], &peer[i], &c), "connect %d", i);
	vu_xfer_all(fd, &t, sizeof(t), true);
	vu_xfer_all(fd, &go, 1, false);           /* the client is done */
	for (int i = 0; i < MSG; i++)
		bad += __atomic_load_n(&buf[i], __ATOMIC_ACQUIRE) !=
		       (char)('a' + i % 26);
	vu_xfer_all(fd, &bad, sizeof(bad), true);
	vu_xfer_all(fd, &go, 1, false);
	close(fd);
	for (int i = 0; i < NQP; i++) {
		ibv_destroy_qp(qp[i]);
		ibv_destroy_cq(cq[i]);
	}
	ibv_dereg_mr(mr);
	ibv_dereg_mr(nf);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(buf);
	printf("server: the bytes were written\n");
	return 0;
}

/* ---------------- the client ---------------- */

struct cl {
	struct ibv_qp *qp[NQP];
	struct ibv_cq *cq[NQP];
	struct ibv_mr *mr;
	char *buf;                 /* MSG to write, MSG read back */
	struct target t;
};

static void wc_one(struct ibv_cq *cq, uint64_t id, enum ibv_wc_status st,
		   int opcode, const char *what)
{
	struct ibv_wc wc;

	CHECK(vu_poll(cq, &wc, 1, VU_WAIT_MS) == 1, "%s: no completion", what);
	CHECK(wc.wr_id == id && wc.status == st,
	      "%s: wr_id %llu: %s, not %s", what,
	      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
	      ibv_wc_status_str(st));
	if (st == IBV_WC_SUCCESS && opcode >= 0)
		CHECK((int)wc.opcode == opcode,
		      "%s: completion opcode %d, not %d", what, wc.opcode,
		      opcode);
}

/* one FLUSH in a session of its own, signaled */
static void flush1(struct ibv_qp *qp, uint64_t id, uint32_t rkey,
		   uint64_t addr, size_t len, uint8_t type, uint8_t level)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
	int ret;

	ibv_wr_start(x);
	x->wr_id = id;
	x->wr_flags = IBV_SEND_SIGNALED;
	wr_flush(x, rkey, addr, len, type, level);
	ret = ibv_wr_complete(x);
	CHECK(!ret, "ibv_wr_complete of a FLUSH: %s", strerror(ret));
}

static void basics(struct cl *k)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(k->qp[0]);
	struct ibv_sge s = { (uintptr_t)k->buf, MSG, k->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 9, .sg_list = &s, .num_sge = 1,
				  .opcode = (enum ibv_wr_opcode)WR_FLUSH,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	int ret;

	CHECK(x, "ibv_qp_to_qp_ex");
	for (int i = 0; i < MSG; i++)
		k->buf[i] = (char)('a' + i % 26);
	/* a WRITE and a FLUSH of its range, in one session */
	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, k->t.rkey, k->t.addr);
	ibv_wr_set_sge(x, k->mr->lkey, (uintptr_t)k->buf, MSG);
	x->wr_id = 2;
	wr_flush(x, k->t.rkey, k->t.addr, MSG, FLUSH_GLOBAL, FLUSH_RANGE);
	ret = ibv_wr_complete(x);
	CHECK(!ret, "ibv_wr_complete: %s", strerror(ret));
	wc_one(k->cq[0], 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, "WRITE");
	wc_one(k->cq[0], 2, IBV_WC_SUCCESS, WC_FLUSH, "FLUSH of the range");
	/* sessions of their own: the MR (length ignored), a range of 0
	 * bytes, the whole MR as a range */
	flush1(k->qp[0], 3, k->t.rkey, k->t.addr, 0, FLUSH_GLOBAL, FLUSH_MR);
	wc_one(k->cq[0], 3, IBV_WC_SUCCESS, WC_FLUSH, "FLUSH of the MR");
	flush1(k->qp[0], 4, k->t.rkey, k->t.addr, 12345678, FLUSH_GLOBAL,
	       FLUSH_MR);
	wc_one(k->cq[0], 4, IBV_WC_SUCCESS, WC_FLUSH,
	       "FLUSH of the MR, a length past it");
	flush1(k->qp[0], 5, k->t.rkey, k->t.addr + 100, 0, FLUSH_GLOBAL,
	       FLUSH_RANGE);
	wc_one(k->cq[0], 5, IBV_WC_SUCCESS, WC_FLUSH, "FLUSH of 0 bytes");
	flush1(k->qp[0], 6, k->t.rkey, k->t.addr, HALF, FLUSH_GLOBAL,
	       FLUSH_RANGE);
	wc_one(k->cq[0], 6, IBV_WC_SUCCESS, WC_FLUSH, "FLUSH of the whole MR");
	/* unsignaled FLUSHes, then a signaled one: one completion */
	{
		ibv_wr_start(x);
		x->wr_flags = 0;
		for (int i = 0; i < 8; i++) {
			x->wr_id = 100 + i;
			wr_flush(x, k->t.rkey, k->t.addr + 8 * i, 8,
				 FLUSH_GLOBAL, FLUSH_RANGE);
		}
		x->wr_id = 7;
		x->wr_flags = IBV_SEND_SIGNALED;
		wr_flush(x, k->t.rkey, k->t.addr, MSG, FLUSH_GLOBAL,
			 FLUSH_MR);
		CHECK(!ibv_wr_complete(x), "ibv_wr_complete");
		wc_one(k->cq[0], 7, IBV_WC_SUCCESS, WC_FLUSH,
		       "the signaled FLUSH after 8 unsignaled ones");
	}
	/* the bytes are there */
	ibv_wr_start(x);
	x->wr_id = 8;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_read(x, k->t.rkey, k->t.addr);
	ibv_wr_set_sge(x, k->mr->lkey, (uintptr_t)k->buf + MSG, MSG);
	CHECK(!ibv_wr_complete(x), "ibv_wr_complete of a READ");
	wc_one(k->cq[0], 8, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, "READ");
	CHECK(!memcmp(k->buf, k->buf + MSG, MSG), "READ back other bytes");
	/* ibv_post_send has no FLUSH */
	ret = ibv_post_send(k->qp[0], &wr, &bad);
	CHECK(ret == EINVAL && bad == &wr,
	      "ibv_post_send of IBV_WR_FLUSH: %d, not EINVAL", ret);
	/* the QP still works */
	flush1(k->qp[0], 10, k->t.rkey, k->t.addr, MSG, FLUSH_GLOBAL,
	       FLUSH_RANGE);
	wc_one(k->cq[0], 10, IBV_WC_SUCCESS, WC_FLUSH, "FLUSH after that");
}

static void errors(struct cl *k)
{
	/* rdma-core's test_qp_ex_rc_flush_type_violate */
	flush1(k->qp[1], 21, k->t.rkey, k->t.addr, MSG, FLUSH_PERSISTENT,
	       FLUSH_RANGE);
	wc_one(k->cq[1], 21, IBV_WC_REM_ACCESS_ERR, -1,
	       "a PERSISTENT FLUSH of a FLUSH_GLOBAL MR");
	flush1(k->qp[2], 22, k->t.nf_rkey, k->t.addr + HALF, MSG,
	       FLUSH_GLOBAL, FLUSH_MR);
	wc_one(k->cq[2], 22, IBV_WC_REM_ACCESS_ERR, -1,
	       "a FLUSH of an MR without the right");
	flush1(k->qp[3], 23, k->t.rkey, k->t.addr + HALF - 512, MSG,
	       FLUSH_GLOBAL, FLUSH_RANGE);
	wc_one(k->cq[3], 23, IBV_WC_REM_ACCESS_ERR, -1,
	       "a FLUSH of a range past the MR");
	flush1(k->qp[4], 24, k->t.rkey ^ 0x00ffff00u, k->t.addr, MSG,
	       FLUSH_GLOBAL, FLUSH_RANGE);
	wc_one(k->cq[4], 24, IBV_WC_REM_ACCESS_ERR, -1,
	       "a FLUSH with a key of nothing");
	flush1(k->qp[5], 25, k->t.rkey, k->t.addr, MSG, 4, FLUSH_RANGE);
	wc_one(k->cq[5], 25, IBV_WC_REM_INV_REQ_ERR, -1,
	       "a FLUSH of placement type 4");
	flush1(k->qp[6], 26, k->t.rkey, k->t.addr, 1ull << 32, FLUSH_GLOBAL,
	       FLUSH_RANGE);
	wc_one(k->cq[6], 26, IBV_WC_LOC_LEN_ERR, -1,
	       "a FLUSH of a range of 4 GiB");
}

static void client(const char *host, int port)
{
	struct vu_conn c = vu_conn_default();
	struct ibv_context *ctx = vu_open();
	struct ibv_device_attr_ex dx;
	struct vu_addr me[NQP];
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *q;
	struct cl k;
	int fd, err, bad;
	char go = 1;

	CHECK(ctx, "no sv0");
	CHECK(!ibv_query_device_ex(ctx, NULL, &dx), "ibv_query_device_ex");
	CHECK(dx.device_cap_flags_ex & DEV_FLUSH_GLOBAL,
	      "device_cap_flags_ex %#llx: no FLUSH_GLOBAL",
	      (unsigned long long)dx.device_cap_flags_ex);
	pd = ibv_alloc_pd(ctx);
	k.buf = aligned_alloc(64, 2 * MSG);
	CHECK(pd && k.buf, "pd, memory");
	k.mr = ibv_reg_mr(pd, k.buf, 2 * MSG, IBV_ACCESS_LOCAL_WRITE);
	CHECK(k.mr, "ibv_reg_mr");
	/* RC only, as rxe */
	CHECK(!mk_qp(pd, &cq, IBV_QPT_UC, QP_EX_WITH_FLUSH, &err) &&
	      err == EOPNOTSUPP, "a UC QP with IBV_QP_EX_WITH_FLUSH: %s",
	      strerror(err));
	CHECK(!mk_qp(pd, &cq, IBV_QPT_UD, QP_EX_WITH_FLUSH, &err) &&
	      err == EOPNOTSUPP, "a UD QP with IBV_QP_EX_WITH_FLUSH: %s",
	      strerror(err));
	for (int i = 0; i < NQP - 1; i++) {
		k.qp[i] = mk_qp(pd, &k.cq[i], IBV_QPT_RC,
				QP_EX_WITH_FLUSH | IBV_QP_EX_WITH_RDMA_WRITE |
					IBV_QP_EX_WITH_RDMA_READ, &err);
		CHECK(k.qp[i], "an RC QP with IBV_QP_EX_WITH_FLUSH: %s",
		      strerror(err));
	}
	k.qp[NQP - 1] = mk_qp(pd, &k.cq[NQP - 1], IBV_QPT_RC,
			      IBV_QP_EX_WITH_RDMA_WRITE, &err);
	CHECK(k.qp[NQP - 1], "ibv_create_qp_ex: %s", strerror(err));
	for (int i = 0; i < NQP; i++)
		me[i] = vu_addr_of(k.qp[i], c.sq_psn);
	fd = vu_tcp_connect(host, port);
	vu_xfer_all(fd, me, sizeof(me), true);
	vu_xfer_all(fd, &k.t, sizeof(k.t), false);
	for (int i = 0; i < NQP; i++)
		CHECK(!vu_connect(k.qp[i], &k.t.qp[i], &c), "connect %d", i);

	/* a QP made without the flag: its session fails */
	q = k.qp[NQP - 1];
	{
		struct ibv_qp_ex *x = ibv_qp_to_qp_ex(q);

		ibv_wr_start(x);
		wr_flush(x, k.t.rkey, k.t.addr, MSG, FLUSH_GLOBAL,
			 FLUSH_RANGE);
		err = ibv_wr_complete(x);
		CHECK(err == EINVAL, "FLUSH on a QP made without it: %d", err);
	}
	basics(&k);
	errors(&k);
	vu_xfer_all(fd, &go, 1, true);
	vu_xfer_all(fd, &bad, sizeof(bad), false);
	CHECK(!bad, "the server has %d bytes other than written", bad);
	vu_xfer_all(fd, &go, 1, true);
	close(fd);
	for (int i = 0; i < NQP; i++) {
		ibv_destroy_qp(k.qp[i]);
		ibv_destroy_cq(k.cq[i]);
	}
	ibv_dereg_mr(k.mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(k.buf);
	printf("PASS: flush: ranges and MRs, ordering, errors\n");
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(vu_tcp_listen(atoi(argv[2]), 1));
	if (argc == 4 && !strcmp(argv[1], "client")) {
		client(argv[2], atoi(argv[3]));
		return 0;
	}
	if (argc == 1) {
		struct sockaddr_in a;
		socklen_t al = sizeof(a);
		int ls = vu_tcp_listen(0, 1), st;
		pid_t srv;

		CHECK(!getsockname(ls, (struct sockaddr *)&a, &al), "port");
		fflush(stdout);
		srv = fork();
		CHECK(srv >= 0, "fork");
		if (!srv)
			exit(server(ls));
		close(ls);
		client("127.0.0.1", ntohs(a.sin_port));
		CHECK(waitpid(srv, &st, 0) == srv && WIFEXITED(st) &&
		      !WEXITSTATUS(st), "the server failed");
		return 0;
	}
	fprintf(stderr, "usage: test_flush [server PORT | client HOST PORT]\n");
	return 2;
}
