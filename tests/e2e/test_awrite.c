// SPDX-License-Identifier: MIT
/*
 * ATOMIC WRITE (IBTA 1.5, issue 23) through the verbs, on one host or
 * across two (RoCEv2 opcode 0x1D, answered as Linux rxe answers it):
 *
 *   test_awrite                   both sides here, through 127.0.0.1
 *   test_awrite server PORT       the side whose words are written
 *   test_awrite client HOST PORT  the side that posts
 *
 * The client checks:
 *  - the device says it has ATOMIC WRITE (device_cap_flags_ex bit 40) and
 *    FLUSH of global visibility (bit 38), and IBV_QP_EX_WITH_ATOMIC_WRITE
 *    is taken on RC;
 *  - ibv_wr_atomic_write writes its 8 bytes (completion opcode
 *    IBV_WC_ATOMIC_WRITE), and so does ibv_post_send with
 *    IBV_WR_ATOMIC_WRITE and one 8-byte SGE (read at post: changing the
 *    buffer after the post changes nothing); a READ reads them back;
 *  - ibv_post_send refuses an SGE that is not 8 bytes, or two SGEs
 *    (EINVAL); a QP made without the flag fails its session
 *    (EOPNOTSUPP);
 *  - racing: one QP ATOMIC-WRITEs v(i) = i << 40 | i << 20 for i = 1 ..
 *    NW while three others FETCH_ADD 1 on the same word, all posted before
 *    any is polled: every value a FETCH_ADD returns has equal bits 40..59
 *    and 20..39 (never half of one write and half of another, never an
 *    add that straddled a write), each adder sees i never go back, and the
 *    word ends as v(NW) plus the adds that came after it;
 *  - an unaligned address is a remote invalid request, a key without
 *    remote write a remote access error (each on a QP of its own).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
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

#define NQP     6      /* main (qp_ex), 3 adders, 2 for the errors */
#define NADD    3
#define NW      300    /* atomic writes in the race */
#define NA      300    /* FETCH_ADDs per adder */
#define DEV_ATOMIC_WRITE (1ull << 40)
#define DEV_FLUSH_GLOBAL (1ull << 38)

struct target {
	struct vu_addr qp[NQP];
	uint64_t addr;             /* 8 words, REMOTE_WRITE/READ/ATOMIC */
	uint32_t rkey, ro_rkey;    /* ro: REMOTE_READ only, same words */
};

/* An RC QP on pd with its own CQ; ex: made with ibv_create_qp_ex and the
 * send ops given (0: ibv_create_qp). */
static struct ibv_qp *rc_qp(struct ibv_pd *pd, struct ibv_cq **cq,
			    uint64_t ex_ops, int *err)
{
	struct ibv_qp_init_attr_ex a;
	struct ibv_qp *qp;

	*cq = ibv_create_cq(pd->context, 1024, NULL, NULL, 0);
	CHECK(*cq, "ibv_create_cq");
	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_RC;
	a.send_cq = a.recv_cq = *cq;
	a.cap.max_send_wr = 512;
	a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = 2;
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
	return qp;
}

/* ---------------- the server ---------------- */

static int server(int ls)
{
	struct vu_conn c = vu_conn_default();
	struct ibv_context *ctx = vu_open();
	struct ibv_qp *qp[NQP];
	struct ibv_cq *cq[NQP];
	struct ibv_mr *mr, *ro;
	struct ibv_pd *pd;
	struct vu_addr peer[NQP];
	struct target t;
	uint64_t *words;
	int fd;
	char go;

	CHECK(ctx, "no sv0");
	pd = ibv_alloc_pd(ctx);
	words = aligned_alloc(4096, 4096);
	CHECK(pd && words, "pd, memory");
	memset(words, 0, 4096);
	mr = ibv_reg_mr(pd, words, 4096,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_ATOMIC);
	ro = ibv_reg_mr(pd, words, 4096, IBV_ACCESS_REMOTE_READ);
	CHECK(mr && ro, "ibv_reg_mr");
	for (int i = 0; i < NQP; i++) {
		qp[i] = rc_qp(pd, &cq[i], 0, NULL);
		CHECK(qp[i], "ibv_create_qp");
		t.qp[i] = vu_addr_of(qp[i], c.sq_psn);
	}
	t.addr = (uintptr_t)words;
	t.rkey = mr->rkey;
	t.ro_rkey = ro->rkey;
	fd = accept(ls, NULL, NULL);
	CHECK(fd >= 0, "accept");
	close(ls);
	vu_xfer_all(fd, peer, sizeof(peer), false);
	for (int i = 0; i < NQP; i++)
		CHECK(!vu_connect(qp[i], &peer[i], &c), "connect %d", i);
	vu_xfer_all(fd, &t, sizeof(t), true);
	vu_xfer_all(fd, &go, 1, false);           /* the client is done */
	{
		uint64_t w[3] = { __atomic_load_n(&words[0], __ATOMIC_ACQUIRE),
				  __atomic_load_n(&words[1], __ATOMIC_ACQUIRE),
				  __atomic_load_n(&words[2], __ATOMIC_ACQUIRE) };

		vu_xfer_all(fd, w, sizeof(w), true);
	}
	vu_xfer_all(fd, &go, 1, false);
	close(fd);
	for (int i = 0; i < NQP; i++) {
		ibv_destroy_qp(qp[i]);
		ibv_destroy_cq(cq[i]);
	}
	ibv_dereg_mr(mr);
	ibv_dereg_mr(ro);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(words);
	printf("server: the words were written\n");
	return 0;
}

/* ---------------- the client ---------------- */

struct cl {
	struct ibv_qp *qp[NQP];
	struct ibv_cq *cq[NQP];
	struct ibv_mr *mr;
	uint64_t *res;             /* 8 words: READ and FETCH_ADD results */
	uint64_t *adds;            /* NADD * NA: the adders' results */
	struct ibv_mr *amr;
	struct target t;
};

static void wc_one(struct ibv_cq *cq, uint64_t id, enum ibv_wc_status st,
		   int opcode, const char *what)
{
	struct ibv_wc wc;

	CHECK(vu_poll(cq, &wc, 1, VU_WAIT_MS) == 1, "%s: no completion", what);
	CHECK(wc.wr_id == id && wc.status == st, "%s: wr_id %llu: %s", what,
	      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	if (st == IBV_WC_SUCCESS && opcode >= 0)
		CHECK(wc.opcode == (enum ibv_wc_opcode)opcode,
		      "%s: completion opcode %d, not %d", what, wc.opcode,
		      opcode);
}

static void post(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t id,
		 struct ibv_sge *sge, int nsge, uint64_t raddr, uint32_t rkey,
		 uint64_t add, bool signaled)
{
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = sge,
				  .num_sge = nsge, .opcode = op,
				  .send_flags = signaled ? IBV_SEND_SIGNALED :
							   0 },
			   *bad;
	int ret;

	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = add;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	ret = ibv_post_send(qp, &wr, &bad);
	CHECK(!ret, "ibv_post_send %s: %s", vu_opcode_str(op), strerror(ret));
}

static uint64_t vw(uint64_t i)
{
	return i << 40 | i << 20;
}

static void read_word(struct cl *k, int w, uint64_t *out)
{
	struct ibv_sge s = { (uintptr_t)&k->res[7], 8, k->mr->lkey };

	post(k->qp[0], IBV_WR_RDMA_READ, 100, &s, 1, k->t.addr + 8 * w,
	     k->t.rkey, 0, true);
	wc_one(k->cq[0], 100, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, "READ");
	*out = k->res[7];
}

static void basics(struct cl *k)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(k->qp[0]);
	uint64_t v = 0x1122334455667788ull, got, src;
	struct ibv_sge s = { (uintptr_t)&src, 8, k->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &s, .num_sge = 1,
				  .opcode = IBV_WR_ATOMIC_WRITE }, *bad;
	struct ibv_sge two[2] = { s, s };

	CHECK(x, "ibv_qp_to_qp_ex");
	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(x, k->t.rkey, k->t.addr, &v);
	CHECK(!ibv_wr_complete(x), "ibv_wr_complete");
	wc_one(k->cq[0], 1, IBV_WC_SUCCESS, IBV_WC_ATOMIC_WRITE,
	       "ibv_wr_atomic_write");
	read_word(k, 0, &got);
	CHECK(got == v, "ibv_wr_atomic_write wrote %#llx",
	      (unsigned long long)got);

	src = 0x0102030405060708ull;
	post(k->qp[0], IBV_WR_ATOMIC_WRITE, 2, &s, 1, k->t.addr + 8,
	     k->t.rkey, 0, true);
	src = 0xdeadbeef;          /* read at post: this changes nothing */
	wc_one(k->cq[0], 2, IBV_WC_SUCCESS, IBV_WC_ATOMIC_WRITE,
	       "IBV_WR_ATOMIC_WRITE");
	read_word(k, 1, &got);
	CHECK(got == 0x0102030405060708ull, "IBV_WR_ATOMIC_WRITE wrote %#llx",
	      (unsigned long long)got);

	wr.wr.rdma.remote_addr = k->t.addr;
	wr.wr.rdma.rkey = k->t.rkey;
	s.length = 4;
	CHECK(ibv_post_send(k->qp[0], &wr, &bad) == EINVAL && bad == &wr,
	      "a 4-byte ATOMIC WRITE was posted");
	s.length = 8;
	wr.sg_list = two;
	wr.num_sge = 2;
	CHECK(ibv_post_send(k->qp[0], &wr, &bad) == EINVAL,
	      "an ATOMIC WRITE of two SGEs was posted");
}

static void race(struct cl *k)
{
	struct ibv_sge as[NADD];
	uint64_t src[NW], fin, prev[NADD];
	int done[NQP] = { 0 };
	int posted_w = 0, posted_a[NADD] = { 0 }, left;

	for (int a = 0; a < NADD; a++) {
		as[a] = (struct ibv_sge){ 0, 8, k->amr->lkey };
		prev[a] = 0;
	}
	/* everything posted before anything is polled, in rounds that fit
	 * the queues */
	while (posted_w < NW || posted_a[0] < NA) {
		for (int n = 0; n < 60 && posted_w < NW; n++, posted_w++) {
			struct ibv_sge s = { (uintptr_t)&src[posted_w], 8,
					     k->mr->lkey };

			src[posted_w] = vw((uint64_t)posted_w + 1);
			post(k->qp[0], IBV_WR_ATOMIC_WRITE, 1000 + posted_w,
			     &s, 1, k->t.addr + 16, k->t.rkey, 0, true);
		}
		for (int a = 0; a < NADD; a++)
			for (int n = 0; n < 60 && posted_a[a] < NA;
			     n++, posted_a[a]++) {
				as[a].addr = (uintptr_t)&k->adds[a * NA +
								 posted_a[a]];
				post(k->qp[1 + a], IBV_WR_ATOMIC_FETCH_AND_ADD,
				     posted_a[a], &as[a], 1, k->t.addr + 16,
				     k->t.rkey, 1, true);
			}
		/* poll this round */
		left = 1;
		while (left) {
			left = 0;
			if (done[0] < posted_w) {
				wc_one(k->cq[0], 1000 + done[0], IBV_WC_SUCCESS,
				       IBV_WC_ATOMIC_WRITE, "race write");
				done[0]++;
				left = 1;
			}
			for (int a = 0; a < NADD; a++)
				if (done[1 + a] < posted_a[a]) {
					wc_one(k->cq[1 + a], done[1 + a],
					       IBV_WC_SUCCESS,
					       IBV_WC_FETCH_ADD, "race add");
					done[1 + a]++;
					left = 1;
				}
		}
	}
	for (int a = 0; a < NADD; a++)
		for (int n = 0; n < NA; n++) {
			uint64_t r = k->adds[a * NA + n];
			uint64_t hi = r >> 40, mid = (r >> 20) & 0xfffff;

			CHECK(hi == mid && hi <= NW,
			      "adder %d, add %d: returned %#llx: a torn value",
			      a, n, (unsigned long long)r);
			CHECK(hi >= prev[a], "adder %d saw write %llu after "
			      "%llu", a, (unsigned long long)hi,
			      (unsigned long long)prev[a]);
			prev[a] = hi;
		}
	/* the adds met several writes, not one */
	{
		unsigned int distinct = 0;
		uint64_t last = UINT64_MAX;

		for (int n = 0; n < NA; n++)
			if (k->adds[n] >> 40 != last) {
				last = k->adds[n] >> 40;
				distinct++;
			}
		CHECK(distinct >= 2, "adder 0 met %u write(s): no race",
		      distinct);
		printf("race: adder 0 met %u different writes\n", distinct);
	}
	read_word(k, 2, &fin);
	CHECK(fin >> 40 == NW && ((fin >> 20) & 0xfffff) == NW &&
	      (fin & 0xfffff) <= NADD * NA,
	      "the word ends as %#llx, not the last write (%#llx) and adds",
	      (unsigned long long)fin, (unsigned long long)vw(NW));
	printf("race: %d atomic writes, %d FETCH_ADDs, no torn value; the "
	       "word ends %#llx (%llu adds after the last write)\n", NW,
	       NADD * NA, (unsigned long long)fin,
	       (unsigned long long)(fin & 0xfffff));
}

static void errors(struct cl *k)
{
	uint64_t v = 7;
	struct ibv_sge s = { (uintptr_t)&v, 8, k->mr->lkey };

	post(k->qp[4], IBV_WR_ATOMIC_WRITE, 4, &s, 1, k->t.addr + 4,
	     k->t.rkey, 0, true);
	wc_one(k->cq[4], 4, IBV_WC_REM_INV_REQ_ERR, -1, "unaligned");
	post(k->qp[5], IBV_WR_ATOMIC_WRITE, 5, &s, 1, k->t.addr + 24,
	     k->t.ro_rkey, 0, true);
	wc_one(k->cq[5], 5, IBV_WC_REM_ACCESS_ERR, -1, "a read-only key");
}

static void client(const char *host, int port)
{
	struct vu_conn c = vu_conn_default();
	struct ibv_context *ctx = vu_open();
	struct ibv_device_attr_ex dx;
	struct vu_addr me[NQP];
	struct ibv_pd *pd;
	struct cl k;
	uint64_t w[3];
	int fd, err;
	char go = 1;

	CHECK(ctx, "no sv0");
	CHECK(!ibv_query_device_ex(ctx, NULL, &dx), "ibv_query_device_ex");
	CHECK((dx.device_cap_flags_ex & DEV_ATOMIC_WRITE) &&
	      (dx.device_cap_flags_ex & DEV_FLUSH_GLOBAL),
	      "device_cap_flags_ex %#llx: no ATOMIC WRITE or FLUSH",
	      (unsigned long long)dx.device_cap_flags_ex);
	pd = ibv_alloc_pd(ctx);
	k.res = aligned_alloc(64, 64);
	k.adds = calloc(NADD * NA, 8);
	CHECK(pd && k.res && k.adds, "pd, memory");
	k.mr = ibv_reg_mr(pd, k.res, 64, IBV_ACCESS_LOCAL_WRITE);
	k.amr = ibv_reg_mr(pd, k.adds, NADD * NA * 8, IBV_ACCESS_LOCAL_WRITE);
	CHECK(k.mr && k.amr, "ibv_reg_mr");
	k.qp[0] = rc_qp(pd, &k.cq[0], IBV_QP_EX_WITH_ATOMIC_WRITE |
				       IBV_QP_EX_WITH_RDMA_READ, &err);
	CHECK(k.qp[0], "a QP with IBV_QP_EX_WITH_ATOMIC_WRITE: %s",
	      strerror(err));
	for (int i = 1; i < NQP; i++) {
		k.qp[i] = rc_qp(pd, &k.cq[i], 0, NULL);
		CHECK(k.qp[i], "ibv_create_qp");
	}
	for (int i = 0; i < NQP; i++)
		me[i] = vu_addr_of(k.qp[i], c.sq_psn);
	fd = vu_tcp_connect(host, port);
	vu_xfer_all(fd, me, sizeof(me), true);
	vu_xfer_all(fd, &k.t, sizeof(k.t), false);
	for (int i = 0; i < NQP; i++)
		CHECK(!vu_connect(k.qp[i], &k.t.qp[i], &c), "connect %d", i);

	/* a QP made without the flag: its session fails */
	{
		struct ibv_cq *cq;
		struct ibv_qp *q = rc_qp(pd, &cq, IBV_QP_EX_WITH_RDMA_WRITE,
					 NULL);
		struct ibv_qp_ex *x;
		uint64_t v = 1;

		CHECK(q, "ibv_create_qp_ex");
		CHECK(!vu_connect(q, &k.t.qp[5], &c), "connect");
		x = ibv_qp_to_qp_ex(q);
		ibv_wr_start(x);
		ibv_wr_atomic_write(x, k.t.rkey, k.t.addr, &v);
		CHECK(ibv_wr_complete(x) == EOPNOTSUPP,
		      "ATOMIC WRITE on a QP made without it");
		ibv_destroy_qp(q);
		ibv_destroy_cq(cq);
	}
	basics(&k);
	race(&k);
	errors(&k);
	vu_xfer_all(fd, &go, 1, true);
	vu_xfer_all(fd, w, sizeof(w), false);
	CHECK(w[0] == 0x1122334455667788ull && w[1] == 0x0102030405060708ull &&
	      w[2] >> 40 == NW, "the server's words: %#llx %#llx %#llx",
	      (unsigned long long)w[0], (unsigned long long)w[1],
	      (unsigned long long)w[2]);
	vu_xfer_all(fd, &go, 1, true);
	close(fd);
	for (int i = 0; i < NQP; i++) {
		ibv_destroy_qp(k.qp[i]);
		ibv_destroy_cq(k.cq[i]);
	}
	ibv_dereg_mr(k.mr);
	ibv_dereg_mr(k.amr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(k.res);
	free(k.adds);
	printf("PASS: atomic write: the verbs, a race with FETCH_ADDs, "
	       "errors\n");
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
	fprintf(stderr, "usage: test_awrite [server PORT | client HOST PORT]\n");
	return 2;
}
