// SPDX-License-Identifier: MIT
/*
 * ibv_rereg_mr across hosts (issue 18): the server's MR is re-registered
 * between the client's transfers, which cross the wire (RoCEv2):
 *   0. a SEND lands in the MR (local write only); a receive into it stays
 *      posted;
 *   1. CHANGE_ACCESS (+ remote write and read): the next SEND takes the
 *      receive posted before the rereg; a WRITE with the rkey ibv_mr now
 *      holds lands, a READ brings it back;
 *   2. CHANGE_TRANSLATION to other memory: WRITE, SEND, READ there;
 *   3. CHANGE_PD to a second PD: WRITE and SEND through the server's QP of
 *      that PD;
 *   4. all three at once (back to the first PD, over the first buffer).
 * The server checks every byte that lands and its QPs' states; the client
 * every completion and every byte read back. Exit 0 when all held.
 *
 *   sv_rereg_wire server PORT
 *   sv_rereg_wire client HOST PORT
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vu.h"
#include "wire_setup.h"

#define BUF   65536u
#define WAIT  20000

struct hello {
	uint32_t qpn[2];
	uint8_t gid[16];
};

/* What the server tells the client before a step. */
struct step {
	uint32_t n, rkey;
	uint64_t addr;             /* the MR's first byte */
};

static uint8_t pat(uint32_t seed, uint32_t i)
{
	return (uint8_t)(seed * 131u + i * 7u + (i >> 8));
}

static void fill(uint8_t *p, uint32_t n, uint32_t seed)
{
	for (uint32_t i = 0; i < n; i++)
		p[i] = pat(seed, i);
}

static void check(const uint8_t *p, uint32_t n, uint32_t seed, const char *w)
{
	for (uint32_t i = 0; i < n; i++)
		if (p[i] != pat(seed, i)) {
			fprintf(stderr, "%s: byte %u is 0x%02x, not 0x%02x\n",
				w, i, p[i], pat(seed, i));
			exit(1);
		}
}

/* The next completion on cq, which must be a success of wr_id. */
static void done(struct ibv_cq *cq, uint64_t wr_id, const char *what)
{
	struct ibv_wc wc;

	if (vu_poll(cq, &wc, 1, WAIT) != 1)
		wire_die(what);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != wr_id) {
		fprintf(stderr, "sv_rereg_wire: %s: wr_id %llu %s\n", what,
			(unsigned long long)wc.wr_id,
			ibv_wc_status_str(wc.status));
		exit(1);
	}
}

static void post_recv(struct ibv_qp *qp, uint64_t id, void *p, uint32_t len,
		      uint32_t lkey)
{
	struct ibv_sge s = { (uintptr_t)p, len, lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &s, .num_sge = 1 },
			   *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		wire_die("post recv");
}

static void post(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t id,
		 void *p, uint32_t len, uint32_t lkey, uint64_t raddr,
		 uint32_t rkey)
{
	struct ibv_sge s = { (uintptr_t)p, len, lkey };
	struct ibv_send_wr wr = {
		.wr_id = id, .sg_list = &s, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED, .wr.rdma = { raddr, rkey },
	}, *bad;

	if (ibv_post_send(qp, &wr, &bad))
		wire_die("post send");
}

static int server(const char *port)
{
	const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		       IBV_ACCESS_REMOTE_READ;
	struct wire_dev d;
	struct ibv_pd *pd2;
	struct ibv_qp *q0, *q1;
	struct ibv_mr *mr;
	struct hello me, peer;
	struct step st;
	uint8_t *b1, *b2, *at;
	uint32_t handle, ack;
	int fd;

	wire_open(&d, 64);
	pd2 = ibv_alloc_pd(d.ctx);
	b1 = calloc(1, BUF);
	b2 = calloc(1, 2 * BUF);
	if (!pd2 || !b1 || !b2)
		wire_die("resources");
	q0 = wire_qp(d.pd, d.cq, IBV_QPT_RC, 16, 16);
	q1 = wire_qp(pd2, d.cq, IBV_QPT_RC, 16, 16);
	mr = ibv_reg_mr(d.pd, b1, BUF, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		wire_die("reg mr");
	handle = mr->handle;

	fd = wire_accept(wire_listen(port));
	me.qpn[0] = q0->qp_num;
	me.qpn[1] = q1->qp_num;
	wire_gid(d.ctx, me.gid);
	wire_put(fd, &me, sizeof(me));
	wire_get(fd, &peer, sizeof(peer));
	wire_rts(q0, peer.qpn[0], peer.gid);
	wire_rts(q1, peer.qpn[1], peer.gid);
	post_recv(q0, 1, b1, 1000, mr->lkey);
	post_recv(q0, 2, b1 + 2000, 1000, mr->lkey);

	/* 0: a SEND into the MR as registered */
	st = (struct step){ 0, mr->rkey, (uintptr_t)b1 };
	wire_put(fd, &st, sizeof(st));
	wire_get(fd, &ack, sizeof(ack));
	done(d.cq, 1, "step 0: receive");
	check(b1, 1000, 1, "step 0");

	/* 1: CHANGE_ACCESS; receive 2 was posted before it */
	if (ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, rw))
		wire_die("rereg access");
	st = (struct step){ 1, mr->rkey, (uintptr_t)mr->addr };
	wire_put(fd, &st, sizeof(st));
	wire_get(fd, &ack, sizeof(ack));
	done(d.cq, 2, "step 1: the receive posted before the rereg");
	check(b1 + 2000, 1000, 2, "step 1 send");
	check(b1 + 8000, 5000, 3, "step 1 write");

	/* 2: CHANGE_TRANSLATION */
	at = b2 + 4096 + 13;
	if (ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, at,
			 BUF + 100, 0))
		wire_die("rereg translation");
	post_recv(q0, 3, at + 20000, 2000, mr->lkey);
	st = (struct step){ 2, mr->rkey, (uintptr_t)mr->addr };
	wire_put(fd, &st, sizeof(st));
	wire_get(fd, &ack, sizeof(ack));
	done(d.cq, 3, "step 2: receive");
	check(at + 300, 7000, 4, "step 2 write");
	check(at + 20000, 2000, 5, "step 2 send");

	/* 3: CHANGE_PD: the QP of pd2 takes the traffic */
	if (ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0))
		wire_die("rereg pd");
	post_recv(q1, 4, at + 30000, 3000, mr->lkey);
	st = (struct step){ 3, mr->rkey, (uintptr_t)mr->addr };
	wire_put(fd, &st, sizeof(st));
	wire_get(fd, &ack, sizeof(ack));
	done(d.cq, 4, "step 3: receive");
	check(at + 100, 6000, 6, "step 3 write");
	check(at + 30000, 3000, 7, "step 3 send");

	/* 4: all three, back to pd over b1 */
	if (ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD |
			 IBV_REREG_MR_CHANGE_TRANSLATION |
			 IBV_REREG_MR_CHANGE_ACCESS, d.pd, b1, BUF, rw))
		wire_die("rereg all");
	st = (struct step){ 4, mr->rkey, (uintptr_t)mr->addr };
	wire_put(fd, &st, sizeof(st));
	wire_get(fd, &ack, sizeof(ack));
	check(b1 + 50, 4000, 8, "step 4 write");

	if (mr->handle != handle || vu_qp_state(q0) != IBV_QPS_RTS ||
	    vu_qp_state(q1) != IBV_QPS_RTS)
		wire_die("the MR's handle or a QP's state changed");
	st.n = 99;
	wire_put(fd, &st, sizeof(st));
	close(fd);
	if (ibv_dereg_mr(mr) || ibv_destroy_qp(q0) || ibv_destroy_qp(q1) ||
	    ibv_destroy_cq(d.cq) || ibv_dealloc_pd(d.pd) ||
	    ibv_dealloc_pd(pd2) || ibv_close_device(d.ctx))
		wire_die("teardown");
	free(b1);
	free(b2);
	printf("PASS: server: every byte landed, through every rereg\n");
	return 0;
}

static int client(const char *host, const char *port)
{
	struct wire_dev d;
	struct ibv_qp *q[2];
	struct ibv_mr *mr;
	struct hello me, peer;
	struct step st;
	uint8_t *b, *back;
	uint32_t ack = 1;
	int fd;

	wire_open(&d, 64);
	b = calloc(1, 2 * BUF);
	if (!b)
		wire_die("resources");
	back = b + BUF;
	q[0] = wire_qp(d.pd, d.cq, IBV_QPT_RC, 16, 16);
	q[1] = wire_qp(d.pd, d.cq, IBV_QPT_RC, 16, 16);
	mr = ibv_reg_mr(d.pd, b, 2 * BUF, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		wire_die("reg mr");
	fd = wire_connect(host, port, 1);
	me.qpn[0] = q[0]->qp_num;
	me.qpn[1] = q[1]->qp_num;
	wire_gid(d.ctx, me.gid);
	wire_get(fd, &peer, sizeof(peer));
	wire_put(fd, &me, sizeof(me));
	wire_rts(q[0], peer.qpn[0], peer.gid);
	wire_rts(q[1], peer.qpn[1], peer.gid);

	for (;;) {
		/* step 3 goes through the server's QP of its second PD */
		struct ibv_qp *qp;

		wire_get(fd, &st, sizeof(st));
		if (st.n == 99)
			break;
		qp = q[st.n == 3];
		switch (st.n) {
		case 0:
			fill(b, 1000, 1);
			post(qp, IBV_WR_SEND, 10, b, 1000, mr->lkey, 0, 0);
			done(d.cq, 10, "step 0 send");
			break;
		case 1:
			fill(b, 1000, 2);
			post(qp, IBV_WR_SEND, 11, b, 1000, mr->lkey, 0, 0);
			done(d.cq, 11, "step 1 send");
			fill(b, 5000, 3);
			post(qp, IBV_WR_RDMA_WRITE, 12, b, 5000, mr->lkey,
			     st.addr + 8000, st.rkey);
			done(d.cq, 12, "step 1 write");
			post(qp, IBV_WR_RDMA_READ, 13, back, 5000, mr->lkey,
			     st.addr + 8000, st.rkey);
			done(d.cq, 13, "step 1 read");
			check(back, 5000, 3, "step 1 read back");
			break;
		case 2:
		case 3: {
			uint32_t wl = st.n == 2 ? 7000 : 6000;
			uint32_t wo = st.n == 2 ? 300 : 100;
			uint32_t sl = st.n == 2 ? 2000 : 3000;

			fill(b, wl, st.n == 2 ? 4 : 6);
			post(qp, IBV_WR_RDMA_WRITE, 20, b, wl, mr->lkey,
			     st.addr + wo, st.rkey);
			done(d.cq, 20, "write");
			post(qp, IBV_WR_RDMA_READ, 21, back, wl, mr->lkey,
			     st.addr + wo, st.rkey);
			done(d.cq, 21, "read");
			check(back, wl, st.n == 2 ? 4 : 6, "read back");
			fill(b, sl, st.n == 2 ? 5 : 7);
			post(qp, IBV_WR_SEND, 22, b, sl, mr->lkey, 0, 0);
			done(d.cq, 22, "send");
			break;
		}
		case 4:
			fill(b, 4000, 8);
			post(qp, IBV_WR_RDMA_WRITE, 30, b, 4000, mr->lkey,
			     st.addr + 50, st.rkey);
			done(d.cq, 30, "step 4 write");
			break;
		default:
			wire_die("unknown step");
		}
		printf("step %u done\n", st.n);
		wire_put(fd, &ack, sizeof(ack));
	}
	close(fd);
	if (ibv_dereg_mr(mr) || ibv_destroy_qp(q[0]) || ibv_destroy_qp(q[1]) ||
	    ibv_destroy_cq(d.cq) || ibv_dealloc_pd(d.pd) ||
	    ibv_close_device(d.ctx))
		wire_die("teardown");
	free(b);
	printf("PASS: client: rereg of access, translation, PD and all three "
	       "across the wire\n");
	return 0;
}

int main(int argc, char **argv)
{
	wire_prog = "sv_rereg_wire";
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "client"))
		return client(argv[2], argv[3]);
	fprintf(stderr, "usage: sv_rereg_wire server PORT | client HOST PORT\n");
	return 2;
}
