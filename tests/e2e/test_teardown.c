// SPDX-License-Identifier: MIT
/*
 * Work posted before a destroy runs first (docs/DESIGN.md, "The data
 * path", teardown): what Debian's mckey sender does, made a test.
 *
 * 50 rounds, each: a receiver process makes a UD QP and posts NMSG
 * receives; a sender process makes a CQ, a UD QP, an MR and an AH, posts
 * NMSG unsignaled sends to the receiver's QP and at once destroys the AH,
 * the QP, the CQ and the MR (mckey's order; every other round the QP
 * before the AH). On hardware the NIC has sent the datagrams long before
 * the destroy commands reach it; on sv0 the engine may not have run them
 * yet. The receiver must get every message of the round, each once. The
 * first half of the rounds find the engine idle (asleep, as mckey's
 * sender does: the destroy overtakes it now and then); in the second half
 * a thread of the receiver keeps the same engine busy with 1 MiB RDMA
 * writes between two RC QPs, so that the engine runs one UD send per big
 * write and a destroy nearly always comes before the last of them.
 *
 * Then QPs that must not hold a destroy up: an RC QP whose head WQE waits
 * out RNR NAKs (the responder has no receive posted, rnr_retry 7), and
 * RC QPs whose target is gone (transport timeout 14, and 0: no timer at
 * all) are destroyed with WQEs posted, each in well under the device's
 * one-second bound on waiting for posted work.
 *
 * Every wait is bounded (a bound turns a hang into a failure).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "vu.h"

#define ROUNDS   50
#define NMSG     64
#define QKEY     0x11111111u
#define MAGIC    0x7464776eu        /* "tdwn" */
#define GRH      40
#define LATE_MS  1000               /* a message not there by then is lost */
#define QUICK_MS 250                /* a destroy that must not wait */
#define BUSY_FROM (ROUNDS / 2)      /* rounds from here: the engine busy */
#define BIG      (1u << 20)         /* the busy thread's writes */

#define CHECK(c, ...)                                                        \
	do {                                                                 \
		if (!(c)) {                                                  \
			fprintf(stderr, "FAIL (pid %d, line %d): ",          \
				(int)getpid(), __LINE__);                    \
			fprintf(stderr, __VA_ARGS__);                        \
			fprintf(stderr, "\n");                               \
			exit(1);                                             \
		}                                                            \
	} while (0)

struct payload {
	uint32_t magic;
	uint32_t round;
	uint32_t k;
};

/* The side channel: fixed 8-byte messages. */
enum { MSG_READY = 1, MSG_SENT = 2, MSG_NEXT = 3 };
struct ctl {
	uint32_t type;
	uint32_t val;
};

static void ctl_send(int fd, uint32_t type, uint32_t val)
{
	struct ctl m = { type, val };

	CHECK(vu_xfer(fd, &m, sizeof(m), true) == 0, "side channel: %s",
	      strerror(errno));
}

static uint32_t ctl_recv(int fd, uint32_t type)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct ctl m;

	CHECK(poll(&p, 1, VU_WAIT_MS) == 1, "side channel: nothing in %d ms",
	      VU_WAIT_MS);
	CHECK(vu_xfer(fd, &m, sizeof(m), false) == 0, "side channel closed");
	CHECK(m.type == type, "side channel: message %u, not %u", m.type,
	      type);
	return m.val;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void ud_up(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = QKEY;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			     IBV_QP_PORT | IBV_QP_QKEY), "UD to INIT");
	a.qp_state = IBV_QPS_RTR;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE), "UD to RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN),
	      "UD to RTS");
}

static struct ibv_qp *ud_qp(struct ibv_pd *pd, struct ibv_cq *cq,
			    uint32_t send_wr, uint32_t recv_wr)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_UD;
	ia.sq_sig_all = 0;
	ia.cap.max_send_wr = send_wr;
	ia.cap.max_recv_wr = recv_wr;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd, &ia);
	CHECK(qp, "create UD QP: %s", strerror(errno));
	ud_up(qp);
	return qp;
}

/* ---- the sender: mckey's post-then-destroy, ROUNDS times ---- */

static int sender(int fd)
{
	struct ibv_context *ctx = vu_open();
	struct ibv_pd *pd;
	union ibv_gid gid;
	uint8_t *buf;
	size_t len;

	CHECK(ctx, "no device");
	CHECK(vu_gid(ctx, &gid) == 0, "no GID 0");
	pd = ibv_alloc_pd(ctx);
	CHECK(pd, "alloc_pd");
	len = vu_mtu_bytes(vu_active_mtu(ctx));
	if (len > 1024)
		len = 1024;
	buf = calloc(NMSG, len);
	CHECK(buf, "no memory");
	for (uint32_t rd = 0; rd < ROUNDS; rd++) {
		uint32_t qpn = ctl_recv(fd, MSG_READY);
		struct ibv_cq *cq = ibv_create_cq(ctx, NMSG, NULL, NULL, 0);
		struct ibv_qp *qp;
		struct ibv_mr *mr;
		struct ibv_ah *ah;
		double t;

		CHECK(cq, "create_cq");
		qp = ud_qp(pd, cq, NMSG, 1);
		mr = ibv_reg_mr(pd, buf, (size_t)NMSG * len, 0);
		CHECK(mr, "reg_mr: %s", strerror(errno));
		ah = vu_ah(pd, &gid);
		CHECK(ah, "create_ah: %s", strerror(errno));
		for (uint32_t k = 0; k < NMSG; k++) {
			struct payload *p = (void *)(buf + k * len);
			struct ibv_sge sge = { .addr = (uintptr_t)p,
					       .length = (uint32_t)len,
					       .lkey = mr->lkey };
			struct ibv_send_wr wr = {
				.wr_id = k, .sg_list = &sge, .num_sge = 1,
				.opcode = IBV_WR_SEND, .send_flags = 0,
			}, *bad;

			p->magic = MAGIC;
			p->round = rd;
			p->k = k;
			wr.wr.ud.ah = ah;
			wr.wr.ud.remote_qpn = qpn;
			wr.wr.ud.remote_qkey = QKEY;
			CHECK(!ibv_post_send(qp, &wr, &bad), "post_send %u", k);
		}
		/* at once, as mckey's destroy_node: nothing polled, nothing
		 * waited for */
		t = now_ms();
		if (rd & 1) {
			CHECK(!ibv_destroy_qp(qp), "destroy_qp");
			CHECK(!ibv_destroy_ah(ah), "destroy_ah");
		} else {
			CHECK(!ibv_destroy_ah(ah), "destroy_ah");
			CHECK(!ibv_destroy_qp(qp), "destroy_qp");
		}
		CHECK(!ibv_destroy_cq(cq), "destroy_cq");
		CHECK(!ibv_dereg_mr(mr), "dereg_mr");
		t = now_ms() - t;
		ctl_send(fd, MSG_SENT, (uint32_t)(t * 1000));
		(void)ctl_recv(fd, MSG_NEXT);
	}
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(buf);
	return 0;
}

/* ---- a busy engine: 1 MiB RDMA writes between two RC QPs ---- */

/* set by the main thread, read by busy_main's loop */
static int busy_stop;

static bool busy_stopped(void)
{
	return __atomic_load_n(&busy_stop, __ATOMIC_RELAXED);
}

static void *busy_main(void *arg)
{
	struct ibv_context *ctx = arg;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr ia;
	struct ibv_qp *a, *b;
	struct ibv_mr *mr;
	struct vu_conn c = vu_conn_default();
	uint8_t *buf = calloc(2, BIG);
	unsigned int inflight = 0;

	CHECK(pd && cq && buf, "busy: pd, cq, memory");
	mr = ibv_reg_mr(pd, buf, 2 * (size_t)BIG,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr, "busy: reg_mr");
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	a = ibv_create_qp(pd, &ia);
	b = ibv_create_qp(pd, &ia);
	CHECK(a && b, "busy: create_qp");
	CHECK(!vu_connect_pair(a, b, &c), "busy: connect");
	while (!busy_stopped() || inflight) {
		struct ibv_wc wc[4];
		int n;

		while (!busy_stopped() && inflight < 2) {
			struct ibv_sge sge = { .addr = (uintptr_t)buf,
					       .length = BIG,
					       .lkey = mr->lkey };
			struct ibv_send_wr wr = {
				.sg_list = &sge, .num_sge = 1,
				.opcode = IBV_WR_RDMA_WRITE,
				.send_flags = IBV_SEND_SIGNALED,
			}, *bad;

			wr.wr.rdma.remote_addr = (uintptr_t)buf + BIG;
			wr.wr.rdma.rkey = mr->rkey;
			CHECK(!ibv_post_send(a, &wr, &bad), "busy: post");
			inflight++;
		}
		n = vu_poll(cq, wc, 1, VU_WAIT_MS);
		CHECK(n == 1 && wc[0].status == IBV_WC_SUCCESS,
		      "busy: write completion");
		inflight--;
	}
	CHECK(!ibv_destroy_qp(a) && !ibv_destroy_qp(b), "busy: destroy_qp");
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	free(buf);
	return NULL;
}

/* ---- the receiver ---- */

/* Round rd's messages, taken from cq until all NMSG came or LATE_MS after
 * the sender said it was done: how many. */
static uint32_t take_round(struct ibv_cq *cq, const uint8_t *buf, size_t slot,
			   uint32_t rd)
{
	uint8_t seen[NMSG] = { 0 };
	uint32_t got = 0;
	long end = vu_now_ms() + LATE_MS;

	while (got < NMSG && vu_now_ms() < end) {
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(cq, 16, wc);

		CHECK(n >= 0, "poll_cq");
		for (int i = 0; i < n; i++) {
			const struct payload *p;

			CHECK(wc[i].status == IBV_WC_SUCCESS, "receive: %s",
			      ibv_wc_status_str(wc[i].status));
			CHECK(wc[i].opcode == IBV_WC_RECV, "opcode %d",
			      wc[i].opcode);
			CHECK(wc[i].wr_id < NMSG, "wr_id %llu",
			      (unsigned long long)wc[i].wr_id);
			p = (const void *)(buf + wc[i].wr_id * slot + GRH);
			CHECK(p->magic == MAGIC && p->round == rd &&
			      p->k < NMSG, "round %u: garbage (round %u)", rd,
			      p->round);
			CHECK(!seen[p->k], "round %u: message %u twice", rd,
			      p->k);
			seen[p->k] = 1;
			got++;
		}
		if (!n)
			vu_sleep_ms(1);
	}
	return got;
}

static int receiver(int fd, pid_t child)
{
	struct ibv_context *ctx = vu_open();
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t slot;
	uint32_t lossy = 0, lost = 0, worst_us[2] = { 0, 0 };
	pthread_t busy;
	int st;

	CHECK(ctx, "no device");
	pd = ibv_alloc_pd(ctx);
	CHECK(pd, "alloc_pd");
	slot = GRH + vu_mtu_bytes(vu_active_mtu(ctx));
	buf = calloc(NMSG, slot);
	CHECK(buf, "no memory");
	mr = ibv_reg_mr(pd, buf, NMSG * slot, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "reg_mr");
	for (uint32_t rd = 0; rd < ROUNDS; rd++) {
		struct ibv_cq *cq = ibv_create_cq(ctx, NMSG + 8, NULL, NULL, 0);
		struct ibv_qp *qp;
		uint32_t got, us;

		if (rd == BUSY_FROM)
			CHECK(!pthread_create(&busy, NULL, busy_main, ctx),
			      "pthread_create");
		CHECK(cq, "create_cq");
		qp = ud_qp(pd, cq, 1, NMSG);
		memset(buf, 0, NMSG * slot);
		for (uint32_t k = 0; k < NMSG; k++) {
			struct ibv_sge sge = {
				.addr = (uintptr_t)(buf + k * slot),
				.length = (uint32_t)slot,
				.lkey = mr->lkey,
			};
			struct ibv_recv_wr wr = { .wr_id = k, .sg_list = &sge,
						  .num_sge = 1 }, *bad;

			CHECK(!ibv_post_recv(qp, &wr, &bad), "post_recv");
		}
		ctl_send(fd, MSG_READY, qp->qp_num);
		us = ctl_recv(fd, MSG_SENT);
		got = take_round(cq, buf, slot, rd);
		if (us > worst_us[rd >= BUSY_FROM])
			worst_us[rd >= BUSY_FROM] = us;
		if (got != NMSG) {
			fprintf(stderr, "round %u (%s first, engine %s): %u of "
				"%u messages arrived\n", rd,
				rd & 1 ? "QP" : "AH",
				rd < BUSY_FROM ? "idle" : "busy", got, NMSG);
			lossy++;
			lost += NMSG - got;
		}
		CHECK(!ibv_destroy_qp(qp), "destroy_qp");
		CHECK(!ibv_destroy_cq(cq), "destroy_cq");
		ctl_send(fd, MSG_NEXT, 0);
	}
	__atomic_store_n(&busy_stop, 1, __ATOMIC_RELAXED);
	CHECK(!pthread_join(busy, NULL), "pthread_join");
	CHECK(waitpid(child, &st, 0) == child, "waitpid");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the sender failed");
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(buf);
	printf("%u rounds of %u unsignaled UD sends, then destroy AH and QP "
	       "at once (%u with the engine busy): %u rounds lost %u "
	       "messages; slowest teardown %.3f ms idle, %.3f ms busy\n",
	       ROUNDS, NMSG, ROUNDS - BUSY_FROM, lossy, lost,
	       worst_us[0] / 1000.0, worst_us[1] / 1000.0);
	CHECK(!lossy, "messages posted before the destroy were lost");
	return 0;
}

/* ---- QPs that must not hold a destroy up ---- */

static struct ibv_qp *rc_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd, &ia);
	CHECK(qp, "create RC QP: %s", strerror(errno));
	return qp;
}

static void post_sends(struct ibv_qp *qp, struct ibv_mr *mr, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)mr->addr,
				       .length = 64, .lkey = mr->lkey };
		struct ibv_send_wr wr = { .wr_id = (uint64_t)i,
					  .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND }, *bad;

		CHECK(!ibv_post_send(qp, &wr, &bad), "post_send %d", i);
	}
}

/* Destroy qp (WQEs posted, the head given time to start): in ms. */
static double destroy_ms(struct ibv_qp *qp)
{
	double t;

	vu_sleep_ms(30);
	t = now_ms();
	CHECK(!ibv_destroy_qp(qp), "destroy_qp");
	return now_ms() - t;
}

static int wedged(void)
{
	struct ibv_context *ctx = vu_open();
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *a, *b;
	struct vu_conn c = vu_conn_default();
	struct vu_addr gone;
	static uint8_t buf[4096];
	double ms;

	CHECK(ctx, "no device");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	CHECK(pd && cq, "pd, cq");
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "reg_mr");

	/* RNR NAKs without end: b has no receive posted */
	a = rc_qp(pd, cq);
	b = rc_qp(pd, cq);
	CHECK(!vu_connect_pair(a, b, &c), "connect");
	post_sends(a, mr, 8);
	ms = destroy_ms(a);
	printf("RC, head waiting out RNR NAKs (rnr_retry 7): destroyed in "
	       "%.3f ms\n", ms);
	CHECK(ms < QUICK_MS, "destroy waited %.1f ms for an RNR loop", ms);
	gone = vu_addr_of(b, c.sq_psn);
	CHECK(!ibv_destroy_qp(b), "destroy_qp");

	/* the target is gone: retries every transport timeout, or, with
	 * timeout 0, none at all (the WQE waits for the QP to change) */
	for (int t = 0; t < 2; t++) {
		c.timeout = t ? 0 : 14;
		a = rc_qp(pd, cq);
		CHECK(!vu_connect(a, &gone, &c), "connect");
		post_sends(a, mr, 8);
		ms = destroy_ms(a);
		printf("RC, target gone, timeout %u: destroyed in %.3f ms\n",
		       c.timeout, ms);
		CHECK(ms < QUICK_MS, "destroy waited %.1f ms for a QP whose "
		      "target is gone", ms);
	}

	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}

int main(void)
{
	int sv[2];
	pid_t pid;

	setvbuf(stdout, NULL, _IOLBF, 0);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		close(sv[0]);
		exit(sender(sv[1]));
	}
	close(sv[1]);
	receiver(sv[0], pid);
	close(sv[0]);
	wedged();
	printf("PASS\n");
	return 0;
}
