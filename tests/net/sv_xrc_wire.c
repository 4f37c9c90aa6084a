// SPDX-License-Identifier: MIT
/*
 * XRC on the wire, every operation: the server has an XRC domain, an XRC
 * SRQ and an XRC_RECV QP; the client (another host) an XRC_SEND QP that
 * names the server's SRQ in every request. The client
 *   - SENDs 3 messages of 5000 bytes (several packets each, a pattern the
 *     server checks byte by byte as they land in its SRQ);
 *   - RDMA WRITEs 10000 bytes into the server's buffer (the key checked
 *     against the SRQ's PD), then a WRITE with immediate (a completion on
 *     the SRQ's CQ), then READs them back and compares;
 *   - FETCH_AND_ADDs the server's counter (0 comes back, 5 is there),
 *     COMPARE_AND_SWAPs it to 0x77, and fails to swap it again;
 *   - SENDs naming an SRQ number the server does not have: the WQE fails
 *     with IBV_WC_REM_INV_REQ_ERR, the server's target QP stays usable.
 * Then the server checks its completions, its counter and its QP's state.
 * Exit status 0 when all held; 1 and a message otherwise.
 *
 *   sv_xrc_wire server PORT
 *   sv_xrc_wire client HOST PORT
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vu.h"
#include "wire_setup.h"

#define BUF      65536u
#define NSEND    3u
#define SEND_LEN 5000u
#define WR_LEN   10000u
#define WR_OFF   32768u
#define CNT_OFF  60000u
#define WAIT_MS  20000

struct info {
	uint32_t qpn, srqn, rkey, pad;
	uint64_t addr;
	uint8_t gid[16];
};

static uint8_t pat(uint32_t msg, uint32_t i)
{
	return (uint8_t)(msg * 131u + i * 7u + (i >> 8));
}

static void modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask,
		   const char *what)
{
	if (ibv_modify_qp(qp, a, mask))
		wire_die(what);
}

static int server(const char *port)
{
	struct ibv_xrcd_init_attr xa = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1,
	};
	struct ibv_srq_init_attr_ex sa = { .attr = { 16, 1, 0 } };
	struct ibv_qp_init_attr_ex qa = { .qp_type = IBV_QPT_XRC_RECV };
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr qi;
	struct info me = { 0 }, peer;
	struct wire_dev d;
	struct ibv_xrcd *xrcd;
	struct ibv_mr *mr;
	struct ibv_srq *srq;
	struct ibv_qp *tgt;
	struct ibv_wc wc;
	uint8_t *buf = calloc(1, BUF);
	char ok = 0;
	int fd;

	wire_open(&d, 64);
	if (!buf)
		wire_die("device");
	xrcd = ibv_open_xrcd(d.ctx, &xa);
	mr = ibv_reg_mr(d.pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			IBV_ACCESS_REMOTE_ATOMIC);
	if (!xrcd || !mr)
		wire_die("xrcd or mr");
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD |
		       IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD;
	sa.srq_type = IBV_SRQT_XRC;
	sa.xrcd = xrcd;
	sa.cq = d.cq;
	sa.pd = d.pd;
	srq = ibv_create_srq_ex(d.ctx, &sa);
	qa.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	qa.xrcd = xrcd;
	tgt = ibv_create_qp_ex(d.ctx, &qa);
	if (!srq || !tgt || ibv_get_srq_num(srq, &me.srqn))
		wire_die("srq or target qp");
	/* NSEND receives of SEND_LEN and one for the WRITE with immediate */
	for (uint32_t i = 0; i <= NSEND; i++) {
		struct ibv_sge sge = { (uintptr_t)buf + i * 8192u, 8192,
				       mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge,
					  .num_sge = 1 }, *bad;

		if (ibv_post_srq_recv(srq, &wr, &bad))
			wire_die("post_srq_recv");
	}
	me.qpn = tgt->qp_num;
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	wire_gid(d.ctx, me.gid);
	fd = wire_accept(wire_listen(port));
	wire_swap(fd, &me, &peer, sizeof(me));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;
	modify(tgt, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
	       IBV_QP_ACCESS_FLAGS, "target to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	wire_path(&a, peer.qpn, peer.gid);
	a.rq_psn = peer.pad;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = 1;
	modify(tgt, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
	       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
	       IBV_QP_MIN_RNR_TIMER, "target to RTR");
	wire_swap(fd, &ok, &ok, 1); /* ready; the client runs */
	/* the client's operations are over */
	for (uint32_t n = 0; n <= NSEND; n++) {
		if (vu_poll(d.cq, &wc, 1, WAIT_MS) != 1)
			wire_die("a receive did not complete");
		if (wc.status != IBV_WC_SUCCESS || wc.qp_num != tgt->qp_num ||
		    wc.src_qp != peer.qpn)
			wire_die("receive completion");
		if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
			if (!(wc.wc_flags & IBV_WC_WITH_IMM) ||
			    ntohl(wc.imm_data) != 0x1234)
				wire_die("WRITE with immediate");
			continue;
		}
		if (wc.opcode != IBV_WC_RECV || wc.byte_len != SEND_LEN)
			wire_die("SEND completion");
		for (uint32_t i = 0; i < SEND_LEN; i++)
			if (buf[wc.wr_id * 8192u + i] !=
			    pat((uint32_t)wc.wr_id, i))
				wire_die("SEND bytes wrong");
	}
	wire_swap(fd, &ok, &ok, 1); /* the client's READ and atomic are done */
	for (uint32_t i = 0; i < WR_LEN; i++)
		if (buf[WR_OFF + i] != pat(9, i))
			wire_die("WRITE bytes wrong");
	{
		uint64_t v;

		memcpy(&v, buf + CNT_OFF, 8);
		if (v != 0x77)
			wire_die("counter");
	}
	wire_swap(fd, &ok, &ok, 1); /* the bad SRQ number was sent */
	if (ibv_query_qp(tgt, &a, IBV_QP_STATE, &qi) ||
	    a.qp_state != IBV_QPS_RTR)
		wire_die("the target QP did not stay in RTR");
	if (vu_poll(d.cq, &wc, 1, 0) != 0)
		wire_die("a completion of the bad SRQ number");
	ok = 1;
	wire_swap(fd, &ok, &ok, 1);
	close(fd);
	if (ibv_destroy_qp(tgt) || ibv_destroy_srq(srq) ||
	    ibv_close_xrcd(xrcd) || ibv_dereg_mr(mr) || ibv_destroy_cq(d.cq) ||
	    ibv_dealloc_pd(d.pd) || ibv_close_device(d.ctx))
		wire_die("teardown");
	printf("server: %u SENDs, a WRITE with immediate, the WRITE and the "
	       "counter checked; the target stayed in RTR\n", NSEND);
	return 0;
}

static void post(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	wr->send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(qp, wr, &bad))
		wire_die("post_send");
}

static void done(struct ibv_cq *cq, enum ibv_wc_status want,
		 const char *what)
{
	struct ibv_wc wc;

	if (vu_poll(cq, &wc, 1, WAIT_MS) != 1 || wc.status != want) {
		fprintf(stderr, "sv_xrc_wire: %s: status %d\n", what,
			wc.status);
		exit(1);
	}
}

static int client(const char *host, const char *port)
{
	struct ibv_qp_init_attr_ex qa = {
		.qp_type = IBV_QPT_XRC_SEND,
		.cap = { .max_send_wr = 16, .max_send_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD,
	};
	struct info me = { 0 }, peer;
	struct ibv_qp_attr a;
	struct wire_dev d;
	struct ibv_mr *mr;
	struct ibv_qp *ini;
	uint8_t *buf = calloc(1, BUF);
	char ok = 0;
	int fd;

	wire_open(&d, 64);
	if (!buf)
		wire_die("device");
	mr = ibv_reg_mr(d.pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		wire_die("mr");
	qa.send_cq = d.cq;
	qa.pd = d.pd;
	ini = ibv_create_qp_ex(d.ctx, &qa);
	if (!ini)
		wire_die("initiator qp");
	me.qpn = ini->qp_num;
	me.pad = 0x123;                 /* our first PSN */
	wire_gid(d.ctx, me.gid);
	fd = wire_connect(host, port, 1);
	wire_swap(fd, &me, &peer, sizeof(me));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	modify(ini, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
	       IBV_QP_ACCESS_FLAGS, "initiator to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	wire_path(&a, peer.qpn, peer.gid);
	modify(ini, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
	       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN, "initiator to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = me.pad;
	a.max_rd_atomic = 16;
	modify(ini, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN |
	       IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC,
	       "initiator to RTS");
	wire_swap(fd, &ok, &ok, 1); /* the target is in RTR */
	for (uint32_t m = 0; m < NSEND; m++) {
		struct ibv_sge sge = { (uintptr_t)buf, SEND_LEN, mr->lkey };
		struct ibv_send_wr wr = { .wr_id = m, .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = IBV_WR_SEND };

		for (uint32_t i = 0; i < SEND_LEN; i++)
			buf[i] = pat(m, i);
		wr.qp_type.xrc.remote_srqn = peer.srqn;
		post(ini, &wr);
		done(d.cq, IBV_WC_SUCCESS, "SEND");
	}
	{
		struct ibv_sge sge = { (uintptr_t)buf, WR_LEN, mr->lkey };
		struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE };

		for (uint32_t i = 0; i < WR_LEN; i++)
			buf[i] = pat(9, i);
		wr.wr.rdma.remote_addr = peer.addr + WR_OFF;
		wr.wr.rdma.rkey = peer.rkey;
		wr.qp_type.xrc.remote_srqn = peer.srqn;
		post(ini, &wr);
		done(d.cq, IBV_WC_SUCCESS, "RDMA WRITE");
		/* with immediate: 16 bytes more at the end, and a receive */
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.imm_data = htonl(0x1234);
		sge.length = 16;
		wr.wr.rdma.remote_addr = peer.addr + WR_OFF + WR_LEN;
		post(ini, &wr);
		done(d.cq, IBV_WC_SUCCESS, "RDMA WRITE with immediate");
		/* READ it back */
		memset(buf + 20000, 0, WR_LEN);
		sge.addr = (uintptr_t)buf + 20000;
		sge.length = WR_LEN;
		wr.opcode = IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = peer.addr + WR_OFF;
		post(ini, &wr);
		done(d.cq, IBV_WC_SUCCESS, "RDMA READ");
		if (memcmp(buf, buf + 20000, WR_LEN))
			wire_die("READ bytes differ from the WRITE's");
	}
	{
		struct ibv_sge sge = { (uintptr_t)buf + 40000, 8, mr->lkey };
		struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD };
		uint64_t v;

		memset(buf + 40000, 0xff, 8);
		wr.wr.atomic.remote_addr = peer.addr + CNT_OFF;
		wr.wr.atomic.rkey = peer.rkey;
		wr.wr.atomic.compare_add = 5;
		wr.qp_type.xrc.remote_srqn = peer.srqn;
		post(ini, &wr);
		done(d.cq, IBV_WC_SUCCESS, "FETCH_AND_ADD");
		memcpy(&v, buf + 40000, 8);
		if (v != 0)
			wire_die("FETCH_AND_ADD returned a value other than 0");
		/* a COMPARE_AND_SWAP that swaps, then one that does not */
		wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
		wr.wr.atomic.compare_add = 5;
		wr.wr.atomic.swap = 0x77;
		post(ini, &wr);
		done(d.cq, IBV_WC_SUCCESS, "COMPARE_AND_SWAP");
		memcpy(&v, buf + 40000, 8);
		if (v != 5)
			wire_die("COMPARE_AND_SWAP returned a value "
				 "other than 5");
		wr.wr.atomic.swap = 0x99;
		post(ini, &wr);
		done(d.cq, IBV_WC_SUCCESS, "COMPARE_AND_SWAP");
		memcpy(&v, buf + 40000, 8);
		if (v != 0x77)
			wire_die("COMPARE_AND_SWAP returned a value "
				 "other than 0x77");
	}
	wire_swap(fd, &ok, &ok, 1); /* the server checks */
	{
		struct ibv_sge sge = { (uintptr_t)buf, 64, mr->lkey };
		struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND };

		wr.qp_type.xrc.remote_srqn = peer.srqn ^ 0x800000;
		post(ini, &wr);
		done(d.cq, IBV_WC_REM_INV_REQ_ERR, "SEND to a bad SRQ number");
	}
	wire_swap(fd, &ok, &ok, 1); /* it failed */
	ok = 0;
	wire_swap(fd, &ok, &ok, 1);
	if (!ok)
		wire_die("the server found trouble");
	close(fd);
	if (ibv_destroy_qp(ini) || ibv_dereg_mr(mr) || ibv_destroy_cq(d.cq) ||
	    ibv_dealloc_pd(d.pd) || ibv_close_device(d.ctx))
		wire_die("teardown");
	printf("client: SEND, WRITE, WRITE with immediate, READ, "
	       "FETCH_AND_ADD, COMPARE_AND_SWAP done; a bad SRQ number "
	       "failed as it must\n");
	return 0;
}

int main(int argc, char **argv)
{
	wire_prog = "sv_xrc_wire";
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "client"))
		return client(argv[2], argv[3]);
	fprintf(stderr, "usage: sv_xrc_wire server PORT | "
			"client HOST PORT\n");
	return 2;
}
