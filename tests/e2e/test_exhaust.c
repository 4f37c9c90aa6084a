// SPDX-License-Identifier: MIT
/*
 * Exhaustion is contained (issue 21; docs/DESIGN.md "Exhaustion"): one
 * process that creates objects until the device refuses gets ENOMEM
 * itself, and another process beside it keeps working.
 *
 * An exhausting process, while a bystander process waits:
 *   - opens device contexts until the device refuses one (it must refuse
 *     one: a process may hold a bounded number of connections), with
 *     EMFILE, while ibv_get_device_list still lists sv0;
 *   - on one context: CQs until ENOMEM, exactly at the max_cq that
 *     ibv_query_device reported; then QPs until ENOMEM, exactly at max_qp
 *     (at least 65535: half of the device's);
 *     then MRs (of one buffer) until ENOMEM, exactly at max_mr;
 *   - on another context of the same process: every kind is refused there
 *     too (the share is the process's, not the connection's);
 *   - CQs of max_cqe entries until ENOMEM: the ring memory one process may
 *     hold runs out after a bounded number of them.
 * Then, while the exhausting process holds all of that, the bystander opens
 * sv0, creates a CQ of max_cqe entries, a CQ, a QP pair, an MR, and runs a
 * ping-pong of SENDs and RDMA WRITEs between its two RC QPs, every byte
 * checked; and once more after the exhausting process freed a part (the
 * device gives the room back). Last, the exhausting process exits without
 * freeing, and a fresh process gets its whole share again.
 *
 * Every wait is bounded.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "vu.h"

#define MAX_CTX   4096      /* more than any share: the refusal must come */
#define ROUNDS    200
#define MSG       4096

/*
 * The exhausting process creates hundreds of thousands of objects, which
 * takes a minute under the sanitizers on a busy two-core machine: it sends
 * a '.' as it goes, and each one restarts the other process's bound. A
 * wait fails after 60 s without any word, not after 60 s in all.
 */
static void wait_byte(int fd, char want)
{
	char c = 0;

	do {
		VU_CHECK(vu_fd_readable(fd, 60000),
			 "no word from the other process in 60 s");
		VU_CHECK(read(fd, &c, 1) == 1, "the other process is gone");
	} while (c == '.' && want != '.');
	VU_CHECK(c == want, "unexpected message '%c'", c);
}

static void say(int fd, char c)
{
	VU_CHECK(write(fd, &c, 1) == 1, "cannot write the pipe");
}

static int progress_fd = -1;

/* a sign of life from the exhausting process, every few thousand objects */
static void progress(int n)
{
	if (progress_fd >= 0 && n % 4096 == 0)
		say(progress_fd, '.');
}

/* ---- the bystander's work: a ping-pong between two RC QPs ---- */

static void pingpong(const char *when)
{
	struct ibv_context *ctx = vu_open();
	struct ibv_device_attr attr;
	struct vu_qp_caps caps = { .send_wr = 64, .recv_wr = 64, .send_sge = 1,
				   .recv_sge = 1, .cqe = 256 };
	struct vu_conn conn = vu_conn_default();
	struct vu_ep a = { 0 }, b = { 0 };
	struct ibv_cq *big;
	struct ibv_mr *mr;
	struct ibv_wc wc[2];
	uint8_t *buf;

	VU_CHECK(ctx, "%s: the bystander cannot open sv0", when);
	VU_CHECK(!ibv_query_device(ctx, &attr), "%s: query_device", when);
	big = ibv_create_cq(ctx, attr.max_cqe, NULL, NULL, 0);
	VU_CHECK(big, "%s: the bystander's CQ of %d entries: %s", when,
	      attr.max_cqe, strerror(errno));
	VU_CHECK(!vu_ep_create(&a, ctx, NULL, IBV_QPT_RC, &caps), "%s: ep a", when);
	VU_CHECK(!vu_ep_create(&b, ctx, a.pd, IBV_QPT_RC, &caps), "%s: ep b", when);
	VU_CHECK(!vu_connect_pair(a.qp, b.qp, &conn), "%s: connect", when);
	buf = calloc(4, MSG);
	VU_CHECK(buf, "calloc");
	mr = ibv_reg_mr(a.pd, buf, 4 * MSG, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE);
	VU_CHECK(mr, "%s: the bystander's MR: %s", when, strerror(errno));
	/* buf: [0] a's send, [1] b's receive, [2] a's write source, [3] target */
	for (int i = 0; i < ROUNDS; i++) {
		struct ibv_sge rs = { (uintptr_t)(buf + MSG), MSG, mr->lkey };
		struct ibv_recv_wr rwr = { .wr_id = i, .sg_list = &rs,
					   .num_sge = 1 }, *rbad;
		struct ibv_sge ss = { (uintptr_t)buf, MSG, mr->lkey };
		struct ibv_send_wr swr = { .wr_id = i, .sg_list = &ss,
					   .num_sge = 1, .opcode = IBV_WR_SEND,
					   .send_flags = IBV_SEND_SIGNALED },
				   *sbad;
		struct ibv_sge ws = { (uintptr_t)(buf + 2 * MSG), MSG,
				      mr->lkey };
		struct ibv_send_wr wwr = {
			.wr_id = 1000 + i, .sg_list = &ws, .num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { (uintptr_t)(buf + 3 * MSG), mr->rkey },
		};

		memset(buf, 'a' + i % 26, MSG);
		memset(buf + 2 * MSG, 'A' + i % 26, MSG);
		VU_CHECK(!ibv_post_recv(b.qp, &rwr, &rbad), "post_recv");
		VU_CHECK(!ibv_post_send(a.qp, &swr, &sbad), "post_send");
		VU_CHECK(!ibv_post_send(a.qp, &wwr, &sbad), "post_send write");
		VU_CHECK(vu_poll(a.scq, wc, 2, VU_WAIT_MS) == 2,
		      "%s: round %d: sends did not complete", when, i);
		VU_CHECK(wc[0].status == IBV_WC_SUCCESS &&
		      wc[1].status == IBV_WC_SUCCESS, "%s: round %d: %s",
		      when, i, ibv_wc_status_str(wc[0].status ? wc[0].status :
						 wc[1].status));
		VU_CHECK(vu_poll(b.rcq, wc, 1, VU_WAIT_MS) == 1 &&
		      wc[0].status == IBV_WC_SUCCESS && wc[0].byte_len == MSG,
		      "%s: round %d: receive", when, i);
		for (int k = 0; k < MSG; k++) {
			VU_CHECK(buf[MSG + k] == 'a' + i % 26, "%s: round %d: "
			      "byte %d received wrong", when, i, k);
			VU_CHECK(buf[3 * MSG + k] == 'A' + i % 26, "%s: round %d: "
			      "byte %d written wrong", when, i, k);
		}
	}
	VU_CHECK(!ibv_dereg_mr(mr), "dereg");
	free(buf);
	vu_ep_destroy(&b);
	vu_ep_destroy(&a);
	VU_CHECK(!ibv_destroy_cq(big), "destroy big cq");
	VU_CHECK(!ibv_close_device(ctx), "close");
	printf("bystander %s: %d rounds of SEND + WRITE, every byte right\n",
	       when, ROUNDS);
}

/* ---- the exhausting process ---- */

struct held {
	struct ibv_context *ctx[MAX_CTX];
	int nctx;
	struct ibv_pd *pd;
	struct ibv_cq **cq;
	int ncq;
	struct ibv_qp **qp;
	int nqp;
	struct ibv_mr **mr;
	int nmr;
	struct ibv_cq *bigcq[64];
	int nbig;
	void *buf;
};

static void exhaust(struct held *h, const struct ibv_device_attr *attr)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd2;
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};

	/* contexts until one is refused */
	for (h->nctx = 0; h->nctx < MAX_CTX; h->nctx++) {
		h->ctx[h->nctx] = vu_open();
		if (!h->ctx[h->nctx])
			break;
	}
	VU_CHECK(h->nctx > 1 && h->nctx < MAX_CTX,
	      "opened %d contexts: no share of connections", h->nctx);
	/* the refusal is EMFILE, at once, and the device is still listed */
	{
		int n = 0;
		struct ibv_device **list = ibv_get_device_list(&n);

		VU_CHECK(list && n == 1, "a process at its share of contexts "
			 "lists %d devices", n);
		errno = 0;
		VU_CHECK(!ibv_open_device(list[0]) && errno == EMFILE,
			 "one more context: %s (EMFILE expected)",
			 strerror(errno));
		ibv_free_device_list(list);
	}
	printf("exhauster: contexts: %d opened, then refused\n", h->nctx);
	/* give most back: the objects below need only two */
	while (h->nctx > 2)
		VU_CHECK(!ibv_close_device(h->ctx[--h->nctx]), "close");
	ctx = h->ctx[0];

	h->pd = ibv_alloc_pd(ctx);
	VU_CHECK(h->pd, "alloc_pd");
	h->cq = calloc((size_t)attr->max_cq + 1, sizeof(*h->cq));
	h->qp = calloc((size_t)attr->max_qp + 1, sizeof(*h->qp));
	h->mr = calloc((size_t)attr->max_mr + 1, sizeof(*h->mr));
	VU_CHECK(h->cq && h->qp && h->mr, "calloc");
	for (h->ncq = 0; h->ncq <= attr->max_cq; h->ncq++) {
		progress(h->ncq);
		h->cq[h->ncq] = ibv_create_cq(ctx, 1, NULL, NULL, 0);
		if (!h->cq[h->ncq])
			break;
	}
	VU_CHECK(h->ncq == attr->max_cq && errno == ENOMEM,
	      "CQs: %d created (max_cq %d), then %s", h->ncq, attr->max_cq,
	      strerror(errno));
	qa.send_cq = qa.recv_cq = h->cq[0];
	for (h->nqp = 0; h->nqp <= attr->max_qp; h->nqp++) {
		progress(h->nqp);
		h->qp[h->nqp] = ibv_create_qp(h->pd, &qa);
		if (!h->qp[h->nqp])
			break;
	}
	VU_CHECK(h->nqp == attr->max_qp && errno == ENOMEM,
	      "QPs: %d created (max_qp %d), then %s", h->nqp, attr->max_qp,
	      strerror(errno));
	h->buf = calloc(1, 4096);
	VU_CHECK(h->buf, "calloc");
	for (h->nmr = 0; h->nmr <= attr->max_mr; h->nmr++) {
		progress(h->nmr);
		h->mr[h->nmr] = ibv_reg_mr(h->pd, h->buf, 4096,
					   IBV_ACCESS_LOCAL_WRITE);
		if (!h->mr[h->nmr])
			break;
	}
	VU_CHECK(h->nmr == attr->max_mr && errno == ENOMEM,
	      "MRs: %d registered (max_mr %d), then %s", h->nmr, attr->max_mr,
	      strerror(errno));
	printf("exhauster: %d CQs, %d QPs, %d MRs, each refused after its "
	       "maximum with ENOMEM\n", h->ncq, h->nqp, h->nmr);

	/* the share is the process's: its second context gets no more */
	pd2 = ibv_alloc_pd(h->ctx[1]);
	VU_CHECK(pd2, "alloc_pd on the second context");
	errno = 0;
	VU_CHECK(!ibv_create_cq(h->ctx[1], 1, NULL, NULL, 0) && errno == ENOMEM,
	      "a CQ on the second context: %s", strerror(errno));
	errno = 0;
	VU_CHECK(!ibv_reg_mr(pd2, h->buf, 4096, IBV_ACCESS_LOCAL_WRITE) &&
	      errno == ENOMEM, "an MR on the second context: %s",
	      strerror(errno));
	VU_CHECK(!ibv_dealloc_pd(pd2), "dealloc pd2");

	/* ring memory: give some CQs back, then CQs of max_cqe until the
	 * process's ring memory is spent */
	for (int i = 0; i < 64; i++)
		VU_CHECK(!ibv_destroy_cq(h->cq[--h->ncq]), "destroy cq");
	for (h->nbig = 0; h->nbig < 64; h->nbig++) {
		h->bigcq[h->nbig] = ibv_create_cq(h->ctx[1], attr->max_cqe,
						  NULL, NULL, 0);
		if (!h->bigcq[h->nbig])
			break;
	}
	VU_CHECK(h->nbig > 0 && h->nbig < 64 && errno == ENOMEM,
	      "CQs of %d entries: %d, then %s", attr->max_cqe, h->nbig,
	      strerror(errno));
	printf("exhauster: %d CQs of %d entries, then ENOMEM (ring memory)\n",
	       h->nbig, attr->max_cqe);
}

static void release_some(struct held *h)
{
	while (h->nbig)
		VU_CHECK(!ibv_destroy_cq(h->bigcq[--h->nbig]), "destroy big cq");
	for (int i = 0; i < 100; i++) {
		VU_CHECK(!ibv_destroy_qp(h->qp[--h->nqp]), "destroy qp");
		VU_CHECK(!ibv_dereg_mr(h->mr[--h->nmr]), "dereg mr");
	}
	/* and the room is back for the process itself */
	h->qp[h->nqp] = ibv_create_qp(h->pd, &(struct ibv_qp_init_attr){
		.qp_type = IBV_QPT_RC, .send_cq = h->cq[0],
		.recv_cq = h->cq[0],
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 } });
	VU_CHECK(h->qp[h->nqp], "a QP after 100 went: %s", strerror(errno));
	h->nqp++;
	h->bigcq[0] = ibv_create_cq(h->ctx[1], 1 << 20, NULL, NULL, 0);
	VU_CHECK(h->bigcq[0], "a big CQ after the big ones went: %s",
	      strerror(errno));
	h->nbig = 1;
}

int main(void)
{
	struct ibv_device_attr attr;
	struct ibv_context *ctx;
	int to_ex[2], from_ex[2], status;
	pid_t ex;

	setvbuf(stdout, NULL, _IOLBF, 0);
	ctx = vu_open();
	VU_CHECK(ctx, "no sv0");
	VU_CHECK(!ibv_query_device(ctx, &attr), "query_device");
	VU_CHECK(!ibv_close_device(ctx), "close");
	printf("max_cq %d, max_qp %d, max_mr %d, max_cqe %d\n", attr.max_cq,
	       attr.max_qp, attr.max_mr, attr.max_cqe);
	/* issue 35: a device of at least 65,536 QPs, half of them one
	 * process's (the exhauster creates exactly max_qp; the bystander
	 * makes more beside them) */
	VU_CHECK(attr.max_qp >= 65535, "max_qp %d: a process may take at "
		 "least half of a 131,070-QP device", attr.max_qp);
	VU_CHECK(pipe(to_ex) == 0 && pipe(from_ex) == 0, "pipe");

	ex = fork();
	VU_CHECK(ex >= 0, "fork");
	if (ex == 0) {
		struct held h = { 0 };

		close(to_ex[1]);
		close(from_ex[0]);
		progress_fd = from_ex[1];
		exhaust(&h, &attr);
		say(from_ex[1], 'E');          /* exhausted, holding */
		wait_byte(to_ex[0], 'R');
		release_some(&h);
		say(from_ex[1], 'F');          /* freed a part */
		wait_byte(to_ex[0], 'X');
		_exit(0);                      /* everything still held */
	}
	close(to_ex[0]);
	close(from_ex[1]);
	wait_byte(from_ex[0], 'E');
	pingpong("beside an exhausted process");
	say(to_ex[1], 'R');
	wait_byte(from_ex[0], 'F');
	pingpong("after it freed a part");
	say(to_ex[1], 'X');
	VU_CHECK(waitpid(ex, &status, 0) == ex && WIFEXITED(status) &&
	      !WEXITSTATUS(status), "the exhausting process failed");

	/* its objects went with it: a new process gets its whole share */
	ex = fork();
	VU_CHECK(ex >= 0, "fork");
	if (ex == 0) {
		struct ibv_context *c2 = vu_open();
		struct ibv_cq **cq = calloc((size_t)attr.max_cq, sizeof(*cq));

		VU_CHECK(c2 && cq, "open");
		for (int i = 0; i < attr.max_cq; i++) {
			cq[i] = ibv_create_cq(c2, 1, NULL, NULL, 0);
			VU_CHECK(cq[i], "CQ %d of a fresh process: %s", i,
			      strerror(errno));
		}
		for (int i = 0; i < attr.max_cq; i++)
			VU_CHECK(!ibv_destroy_cq(cq[i]), "destroy");
		free(cq);
		VU_CHECK(!ibv_close_device(c2), "close");
		_exit(0);
	}
	VU_CHECK(waitpid(ex, &status, 0) == ex && WIFEXITED(status) &&
	      !WEXITSTATUS(status), "a fresh process did not get its share");
	pingpong("after the exhausting process exited");
	printf("PASS\n");
	return 0;
}
