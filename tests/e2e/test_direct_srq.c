// SPDX-License-Identifier: MIT
/*
 * SEND and RECV on the direct path into a receiver on a shared receive
 * queue (docs/DESIGN.md "The direct path"): a SEND, a SEND with immediate
 * data or a WRITE with immediate data to an RC or UC QP of this host that
 * is attached to a basic SRQ (IBV_SRQT_BASIC) takes the SRQ's head WQE in
 * the sender's process; several senders may take from one SRQ at once.
 * These check what a program sees, with the direct path on and off
 * (check-nodirect runs the same with SOFTVERBS_DIRECT=0, where every count
 * of direct SENDs must be 0):
 *  - every kind (SEND, SEND_WITH_IMM, WRITE_WITH_IMM) and size (0 B to
 *    1 MiB), RC and UC, into SRQ WQEs of one and of two SGEs: the bytes
 *    where they belong and nothing past them (a WRITE_WITH_IMM's at its
 *    rkey, its WQE's buffers untouched), every completion field;
 *  - one SRQ under two RC QPs whose senders are two processes sending at
 *    once: every WQE taken once, each message in the buffers of the WQE
 *    that completed for it, each QP's completions in its sender's order;
 *    then one SEND at a time, alternating: the WQEs in posting order;
 *  - RNR on an empty SRQ (RC, rnr_retry 7) taken by a late receive, two
 *    more SENDs, the three completions in order without a poll between;
 *    UC: a SEND that finds the SRQ empty is dropped, the next takes the
 *    WQE;
 *  - the SRQ limit (IBV_EVENT_SRQ_LIMIT_REACHED): once when fewer WQEs
 *    than the limit are left, disarmed then (no second event), again once
 *    re-armed;
 *  - a receive CQ that overflows errs (IBV_EVENT_CQ_ERR), and the QP, in
 *    ERR, reports its last WQE (IBV_EVENT_QP_LAST_WQE_REACHED);
 *  - an SRQ resized (IBV_SRQ_MAX_WR) between SENDs with WQEs posted before
 *    and after: every message, in order, none lost or taken twice;
 *  - a receiving QP moved to ERR flushes no SRQ WQE; another QP on the
 *    SRQ takes them;
 *  - completions of both paths mixed (a SEND from device memory goes to
 *    the daemon), polled only at the end: posting order;
 *  - with the direct path on: a sender stopped in its copy while the
 *    receiver destroys its QP and its SRQ (both return; nothing lands
 *    after, the SEND fails), and a sender killed there (the WQE it had
 *    claimed is flushed once on the receiving QP, no other; a new QP on
 *    the SRQ takes the rest, once each).
 *
 * Waits are bounded (a bound only turns a hang into a failure); the
 * checks that nothing more comes look once the thing that would have
 * caused it is done.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "direct_hooks.h"
#include "vu.h"

#define LEN        (4u << 20)      /* each side's buffer */
#define WOFF       (2u << 20)      /* where a WRITE_WITH_IMM writes */
#define GAP        64u             /* between a WQE's two SGEs */
#define NONE_MS    200             /* a look for what must not come */
#define IMM(id)    (0x5e000000u + (uint32_t)(id))

/* A verb that does not return in time fails the test (it would else hang
 * until ctest's limit, with less said). */
static const char *watch_what;

static void watchdog_fired(int sig)
{
	static const char m[] = "test_direct_srq: timed out in: ";

	(void)sig;
	if (write(2, m, sizeof(m) - 1) < 0 ||
	    write(2, watch_what, strlen(watch_what)) < 0 ||
	    write(2, "\n", 1) < 0)
		_exit(3);
	_exit(3);
}

static void watchdog(unsigned int secs, const char *what)
{
	watch_what = what;
	signal(SIGALRM, watchdog_fired);
	alarm(secs);
}

static void expect_no_wc(struct ibv_cq *cq, const char *what)
{
	struct ibv_wc wc;

	if (vu_poll(cq, &wc, 1, NONE_MS) != 0)
		fail_msg("%s: a completion more: wr_id %" PRIu64 ", %s, qp %#x",
			 what, wc.wr_id, ibv_wc_status_str(wc.status),
			 wc.qp_num);
}

/* n bytes at p equal want's; else the first that differs. */
static void expect_bytes(const uint8_t *p, const uint8_t *want, size_t n,
			 const char *what)
{
	if (!memcmp(p, want, n))
		return;
	for (size_t i = 0; i < n; i++)
		if (p[i] != want[i])
			fail_msg("%s: byte %zu is %#x, not %#x", what, i, p[i],
				 want[i]);
}

/* n bytes at p of pattern tag (vu_pat); then, to end, all fill. */
static void expect_pat(const uint8_t *p, unsigned int tag, size_t n,
		       size_t end, uint8_t fill, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != vu_pat(tag, i))
			fail_msg("%s: byte %zu is %#x, not %#x", what, i, p[i],
				 vu_pat(tag, i));
	for (size_t i = n; i < end; i++)
		if (p[i] != fill)
			fail_msg("%s: byte %zu past the message is %#x, not "
				 "%#x", what, i, p[i], fill);
}

/* ---- one process: sender QPs a[i], receiving QPs b[i] on one SRQ ---- */

struct rig {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_srq *srq;
	struct ibv_cq *scq;        /* every QP's send CQ */
	struct ibv_cq *rcq;        /* the receiving QPs' receive CQ */
	struct ibv_qp *a[2], *b[2];
	uint8_t *abuf, *bbuf;
	struct ibv_mr *amr, *bmr;
};

static struct ibv_qp *qp_make(struct rig *r, enum ibv_qp_type type,
			      bool on_srq)
{
	struct ibv_qp_init_attr qa;
	struct ibv_qp *qp;

	memset(&qa, 0, sizeof(qa));
	qa.send_cq = r->scq;
	qa.recv_cq = on_srq ? r->rcq : r->scq;
	qa.srq = on_srq ? r->srq : NULL;
	qa.qp_type = type;
	qa.cap.max_send_wr = 64;
	qa.cap.max_send_sge = 2;
	qa.cap.max_recv_wr = on_srq ? 0 : 1;
	qa.cap.max_recv_sge = on_srq ? 0 : 1;
	qa.cap.max_inline_data = 64;
	qp = ibv_create_qp(r->pd, &qa);
	assert_non_null(qp);
	return qp;
}

/* A sender a[i] and a receiver b[i] on the SRQ, connected. */
static void pair_add(struct rig *r, enum ibv_qp_type type, int i)
{
	struct vu_conn c = vu_conn_default();

	r->a[i] = qp_make(r, type, false);
	r->b[i] = qp_make(r, type, true);
	assert_int_equal(vu_connect_pair(r->a[i], r->b[i], &c), 0);
}

/* An SRQ of srq_wr WQEs of up to 2 SGEs, a receive CQ of rcqe, npairs
 * pairs of type. */
static void rig_make(struct rig *r, enum ibv_qp_type type, int npairs,
		     uint32_t srq_wr, int rcqe)
{
	unsigned int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct ibv_srq_init_attr sa;

	memset(r, 0, sizeof(*r));
	r->ctx = vu_open();
	assert_non_null(r->ctx);
	r->pd = ibv_alloc_pd(r->ctx);
	assert_non_null(r->pd);
	r->scq = ibv_create_cq(r->ctx, 256, NULL, NULL, 0);
	assert_non_null(r->scq);
	r->rcq = ibv_create_cq(r->ctx, rcqe, NULL, NULL, 0);
	assert_non_null(r->rcq);
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = srq_wr;
	sa.attr.max_sge = 2;
	r->srq = ibv_create_srq(r->pd, &sa);
	assert_non_null(r->srq);
	for (int i = 0; i < npairs; i++)
		pair_add(r, type, i);
	r->abuf = calloc(1, LEN);
	r->bbuf = calloc(1, LEN);
	assert_non_null(r->abuf);
	assert_non_null(r->bbuf);
	r->amr = ibv_reg_mr(r->pd, r->abuf, LEN, acc);
	r->bmr = ibv_reg_mr(r->pd, r->bbuf, LEN, acc);
	assert_non_null(r->amr);
	assert_non_null(r->bmr);
}

static void rig_free(struct rig *r)
{
	assert_int_equal(ibv_dereg_mr(r->amr), 0);
	assert_int_equal(ibv_dereg_mr(r->bmr), 0);
	for (int i = 0; i < 2; i++) {
		if (r->a[i])
			assert_int_equal(ibv_destroy_qp(r->a[i]), 0);
		if (r->b[i])
			assert_int_equal(ibv_destroy_qp(r->b[i]), 0);
	}
	if (r->srq)
		assert_int_equal(ibv_destroy_srq(r->srq), 0);
	assert_int_equal(ibv_destroy_cq(r->scq), 0);
	assert_int_equal(ibv_destroy_cq(r->rcq), 0);
	assert_int_equal(ibv_dealloc_pd(r->pd), 0);
	assert_int_equal(ibv_close_device(r->ctx), 0);
	free(r->abuf);
	free(r->bbuf);
}

/* An SRQ WQE id of cap bytes at off of b's buffer: one SGE, or two (cap /
 * 3 bytes, then the rest GAP bytes later). */
static void post_srq(struct rig *r, uint64_t id, size_t off, uint32_t cap,
		     int nsge)
{
	struct ibv_sge s[2] = {
		{ (uintptr_t)(r->bbuf + off), nsge == 2 ? cap / 3 : cap,
		  r->bmr->lkey },
		{ (uintptr_t)(r->bbuf + off + cap / 3 + GAP), cap - cap / 3,
		  r->bmr->lkey },
	};
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = s, .num_sge = nsge },
			   *bad;

	assert_int_equal(ibv_post_srq_recv(r->srq, &wr, &bad), 0);
}

/* Where a message of len bytes (data) lands in a WQE of post_srq(off,
 * cap, nsge): written into the image img of b's buffer. */
static void place(uint8_t *img, size_t off, const uint8_t *data, size_t len,
		  uint32_t cap, int nsge)
{
	size_t a = nsge == 2 ? cap / 3 : cap;

	memcpy(img + off, data, a < len ? a : len);
	if (len > a)
		memcpy(img + off + a + GAP, data + a, len - a);
}

/* a[qi] posts op, id, of len bytes from aoff of its buffer (or from laddr
 * and lkey when lkey is not 0); WRITE_WITH_IMM to roff of b's buffer. */
static void post_send(struct rig *r, int qi, uint64_t id,
		      enum ibv_wr_opcode op, size_t aoff, uint32_t len,
		      unsigned int flags, uint32_t lkey, uint64_t laddr,
		      size_t roff)
{
	struct ibv_sge s = { lkey ? laddr : (uintptr_t)(r->abuf + aoff), len,
			     lkey ? lkey : r->amr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = id, .sg_list = &s, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED | flags,
	}, *bad;

	wr.imm_data = htobe32(IMM(id));
	wr.wr.rdma.remote_addr = (uintptr_t)(r->bbuf + roff);
	wr.wr.rdma.rkey = r->bmr->rkey;
	assert_int_equal(ibv_post_send(r->a[qi], &wr, &bad), 0);
}

/* The completion of SRQ WQE id on b[qi] for message sid (its immediate
 * data) of op and len bytes from a[qi]. */
static void expect_recv(struct rig *r, int qi, struct ibv_wc wc, uint64_t id,
			uint64_t sid, enum ibv_wr_opcode op, uint32_t len)
{
	bool imm = op != IBV_WR_SEND;

	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != id)
		fail_msg("receive: wr_id %" PRIu64 " (want %" PRIu64 "), %s",
			 wc.wr_id, id, ibv_wc_status_str(wc.status));
	assert_int_equal(wc.opcode, op == IBV_WR_RDMA_WRITE_WITH_IMM ?
			 IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV);
	assert_int_equal(wc.byte_len, len);
	assert_int_equal(wc.qp_num, r->b[qi]->qp_num);
	assert_int_equal(wc.src_qp, r->a[qi]->qp_num);
	assert_int_equal(!!(wc.wc_flags & IBV_WC_WITH_IMM), imm);
	if (imm)
		assert_int_equal(be32toh(wc.imm_data), IMM(sid));
}

static void expect_send_ok(struct rig *r, uint64_t id)
{
	struct ibv_wc wc = wait_wc(r->scq);

	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != id)
		fail_msg("send: wr_id %" PRIu64 " (want %" PRIu64 "), %s",
			 wc.wr_id, id, ibv_wc_status_str(wc.status));
}

/* ---- 1: kinds and sizes ---- */

/* Every kind of message that takes a WQE, of every size, into WQEs of one
 * and two SGEs: b's whole buffer as it must be after each (the message in
 * the WQE's buffers or, a WRITE_WITH_IMM, at its rkey; nothing else), and
 * the completion's every field. */
static void run_kinds(enum ibv_qp_type type)
{
	static const enum ibv_wr_opcode ops[] = {
		IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE_WITH_IMM,
	};
	static const uint32_t lens[] = { 0, 1, 64, 4096, 65536, 1u << 20 };
	uint8_t *img = calloc(1, LEN);
	uint64_t before, id = 1, n = 0;
	struct rig r;

	assert_non_null(img);
	rig_make(&r, type, 1, 64, 256);
	before = direct_msgs();
	for (unsigned int o = 0; o < VU_ARRAY_SIZE(ops); o++) {
		for (unsigned int l = 0; l < VU_ARRAY_SIZE(lens); l++) {
			for (int nsge = 1; nsge <= 2; nsge++, id++, n++) {
				uint32_t len = lens[l], cap = len + 1;

				vu_fill(r.abuf, (unsigned int)id, len);
				memset(r.bbuf, 0, LEN);
				memset(img, 0, LEN);
				post_srq(&r, id, 0, cap, nsge);
				post_send(&r, 0, id, ops[o], 0, len,
					  len && len <= 64 ? IBV_SEND_INLINE :
					  0, 0, 0, WOFF);
				expect_send_ok(&r, id);
				expect_recv(&r, 0, wait_wc(r.rcq), id, id,
					    ops[o], len);
				if (ops[o] == IBV_WR_RDMA_WRITE_WITH_IMM)
					memcpy(img + WOFF, r.abuf, len);
				else
					place(img, 0, r.abuf, len, cap, nsge);
				expect_bytes(r.bbuf, img, LEN,
					     vu_opcode_str(ops[o]));
			}
		}
	}
	expect_no_wc(r.rcq, "kinds");
	expect_direct(before, n);
	rig_free(&r);
	free(img);
}

static void test_srq_kinds_rc(void **state)
{
	(void)state;
	run_kinds(IBV_QPT_RC);
}

static void test_srq_kinds_uc(void **state)
{
	(void)state;
	run_kinds(IBV_QPT_UC);
}

/* ---- 2: one SRQ, two QPs, two sender processes at once ---- */

#define BURST 200u                 /* each sender's SENDs at once */
#define STEPS 8u                   /* then each one's, one at a time */
#define SLOT  8192u                /* an SRQ WQE's buffer */
#define NWQE  (2 * BURST + 2 * STEPS)

static uint32_t msg_len(unsigned int k, unsigned int j)
{
	return (j * 2741u + k * 613u) % (SLOT + 1);
}

static unsigned int msg_tag(unsigned int k, unsigned int j)
{
	return (k + 1) << 16 | j;
}

/* Sender k (a child) of messages j = 0.. (msg_len, msg_tag) to the peer
 * over fd, on its commands: 'b' BURST of them as fast as its send queue
 * takes them, 'o' one, each answered 'k' once every SEND completed
 * successfully (in order); 'q' or the parent gone: it leaves. Exit codes
 * say what failed. */
static void burst_sender(int fd, unsigned int k)
{
	enum { SQ = 32 };
	struct vu_qp_caps caps = { .send_wr = SQ, .recv_wr = 1, .send_sge = 1,
				   .recv_sge = 1 };
	struct vu_conn c = vu_conn_default();
	struct vu_addr peer, me;
	struct ibv_mr *mr;
	struct vu_ep ep;
	unsigned int next = 0;
	uint8_t *buf;
	char cmd, ok = 'k';

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (vu_ep_create(&ep, NULL, NULL, IBV_QPT_RC, &caps))
		_exit(10);
	buf = calloc(BURST + STEPS, SLOT);
	if (!buf)
		_exit(11);
	for (unsigned int j = 0; j < BURST + STEPS; j++)
		vu_fill(buf + (size_t)j * SLOT, msg_tag(k, j), msg_len(k, j));
	mr = ibv_reg_mr(ep.pd, buf, (size_t)(BURST + STEPS) * SLOT,
			IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		_exit(12);
	me = vu_addr_of(ep.qp, c.sq_psn);
	if (vu_xfer(fd, &peer, sizeof(peer), false) ||
	    vu_xfer(fd, &me, sizeof(me), true) ||
	    vu_connect(ep.qp, &peer, &c))
		_exit(13);
	while (!vu_xfer(fd, &cmd, 1, false) && cmd != 'q') {
		unsigned int n = cmd == 'b' ? BURST : 1, posted = 0, done = 0;

		if ((cmd != 'b' && cmd != 'o') || next + n > BURST + STEPS)
			_exit(14);
		while (done < n) {
			struct ibv_wc wc;

			if (posted < n && posted - done < SQ) {
				unsigned int j = next + posted;
				struct ibv_sge s = {
					(uintptr_t)(buf + (size_t)j * SLOT),
					msg_len(k, j), mr->lkey };
				struct ibv_send_wr wr = {
					.wr_id = j, .sg_list = &s,
					.num_sge = 1,
					.opcode = IBV_WR_SEND_WITH_IMM,
					.send_flags = IBV_SEND_SIGNALED,
					.imm_data = htobe32(msg_tag(k, j)),
				}, *bad;

				if (ibv_post_send(ep.qp, &wr, &bad))
					_exit(15);
				posted++;
				continue;
			}
			if (vu_poll(ep.scq, &wc, 1, WC_WAIT_MS) != 1)
				_exit(16);
			if (wc.status != IBV_WC_SUCCESS)
				_exit(17);
			if (wc.wr_id != next + done)
				_exit(18);
			done++;
		}
		next += n;
		if (vu_xfer(fd, &ok, 1, true))
			_exit(19);
	}
	_exit(0);
}

struct sender {
	pid_t pid;
	int fd;
	uint32_t qpn;
};

/* Start sender k, its QP connected to qp. */
static void sender_start(struct sender *s, unsigned int k, struct ibv_qp *qp)
{
	struct vu_conn c = vu_conn_default();
	struct vu_addr me = vu_addr_of(qp, c.sq_psn), peer;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	s->pid = fork();
	assert_true(s->pid >= 0);
	if (s->pid == 0) {
		close(sv[1]);
		burst_sender(sv[0], k);
	}
	close(sv[0]);
	s->fd = sv[1];
	assert_int_equal(vu_xfer(s->fd, &me, sizeof(me), true), 0);
	assert_int_equal(vu_xfer(s->fd, &peer, sizeof(peer), false), 0);
	assert_int_equal(vu_connect(qp, &peer, &c), 0);
	s->qpn = peer.qpn;
}

static void sender_cmd(struct sender *s, char cmd)
{
	assert_int_equal(vu_xfer(s->fd, &cmd, 1, true), 0);
}

static void sender_done(struct sender *s, unsigned int k)
{
	char ok = 0;

	if (vu_xfer(s->fd, &ok, 1, false) || ok != 'k')
		fail_msg("sender %u failed (see its exit status)", k);
}

static void sender_end(struct sender *s, unsigned int k)
{
	int status;

	sender_cmd(s, 'q');
	assert_int_equal(waitpid(s->pid, &status, 0), s->pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		fail_msg("sender %u: status %#x", k, status);
	close(s->fd);
}

/* A completion of the two-sender SRQ (rig r's: b[k] on the SRQ, sender k's
 * QP s[k].qpn) for message tag, in the buffer of its WQE: returns k and
 * j of the message, checks every field and the WQE's bytes. */
static void expect_burst_recv(struct rig *r, const struct sender *s,
			      const struct ibv_wc *wc, unsigned int *kp,
			      unsigned int *jp)
{
	unsigned int tag, k, j;
	uint32_t len;

	if (wc->status != IBV_WC_SUCCESS)
		fail_msg("receive wr_id %" PRIu64 ": %s", wc->wr_id,
			 ibv_wc_status_str(wc->status));
	assert_int_equal(wc->opcode, IBV_WC_RECV);
	assert_true(wc->wc_flags & IBV_WC_WITH_IMM);
	tag = be32toh(wc->imm_data);
	k = (tag >> 16) - 1;
	j = tag & 0xffff;
	if (k > 1 || j >= BURST + STEPS)
		fail_msg("receive wr_id %" PRIu64 ": immediate data %#x is "
			 "no message's", wc->wr_id, tag);
	len = msg_len(k, j);
	assert_int_equal(wc->qp_num, r->b[k]->qp_num);
	assert_int_equal(wc->src_qp, s[k].qpn);
	assert_int_equal(wc->byte_len, len);
	if (wc->wr_id >= NWQE)
		fail_msg("wr_id %" PRIu64 " was never posted", wc->wr_id);
	expect_pat(r->bbuf + wc->wr_id * SLOT, tag, len, SLOT, 0,
		   "the message in its WQE's buffer");
	*kp = k;
	*jp = j;
}

/*
 * Two sender processes SEND at once to two RC QPs of this process on one
 * SRQ (one receive CQ): each WQE completes once, none is missing, each
 * message is in the buffer of the WQE that completed for it, and each
 * QP's completions come in its sender's order. Then one SEND at a time,
 * the senders taking turns: the WQEs are taken in posting order.
 */
static void test_srq_two_senders(void **state)
{
	static struct ibv_wc wc[2 * BURST];
	struct ibv_device_attr da;
	struct sender s[2];
	bool seen[NWQE] = { false };
	unsigned int next[2] = { 0, 0 };
	uint64_t before;
	struct rig r;

	(void)state;
	rig_make(&r, IBV_QPT_RC, 0, NWQE, 1024);
	assert_int_equal(ibv_query_device(r.ctx, &da), 0);
	assert_true((uint32_t)da.max_srq_wr >= NWQE);
	assert_true((size_t)NWQE * SLOT <= LEN);
	for (unsigned int k = 0; k < 2; k++) {
		r.b[k] = qp_make(&r, IBV_QPT_RC, true);
		sender_start(&s[k], k, r.b[k]);
	}
	for (unsigned int i = 0; i < 2 * BURST; i++)
		post_srq(&r, i, (size_t)i * SLOT, SLOT, 1);
	before = direct_msgs();
	sender_cmd(&s[0], 'b');
	sender_cmd(&s[1], 'b');
	sender_done(&s[0], 0);
	sender_done(&s[1], 1);
	assert_int_equal(vu_poll(r.rcq, wc, 2 * BURST, WC_WAIT_MS),
			 2 * BURST);
	for (unsigned int i = 0; i < 2 * BURST; i++) {
		unsigned int k, j;

		expect_burst_recv(&r, s, &wc[i], &k, &j);
		if (seen[wc[i].wr_id])
			fail_msg("WQE %" PRIu64 " completed twice",
				 wc[i].wr_id);
		seen[wc[i].wr_id] = true;
		if (j != next[k])
			fail_msg("QP %u: message %u completed where %u was "
				 "due", k, j, next[k]);
		next[k]++;
	}
	/* 2 * BURST distinct wr_ids of 0 .. 2 * BURST - 1: all of them */
	for (unsigned int i = 0; i < 2 * BURST; i++)
		assert_true(seen[i]);
	expect_no_wc(r.rcq, "burst");

	/* one at a time: the head WQE each time */
	for (unsigned int i = 2 * BURST; i < NWQE; i++)
		post_srq(&r, i, (size_t)i * SLOT, SLOT, 1);
	for (unsigned int i = 2 * BURST; i < NWQE; i++) {
		unsigned int want = i & 1, k, j;
		struct ibv_wc one;

		sender_cmd(&s[want], 'o');
		sender_done(&s[want], want);
		one = wait_wc(r.rcq);
		expect_burst_recv(&r, s, &one, &k, &j);
		if (one.wr_id != i)
			fail_msg("one at a time: WQE %" PRIu64 " taken where "
				 "%u was the head", one.wr_id, i);
		assert_int_equal(k, want);
		assert_int_equal(j, next[k]);
		next[k]++;
	}
	expect_no_wc(r.rcq, "one at a time");
	expect_direct(before, NWQE);
	sender_end(&s[0], 0);
	sender_end(&s[1], 1);
	rig_free(&r);
}

/* ---- 3: RNR, a late receive; UC's drop ---- */

/* A SEND finds the SRQ empty: it waits (RNR NAKs, rnr_retry 7: for ever);
 * a WQE posted late takes it; the next two (WQEs posted) go direct. The
 * three receive completions, polled only at the end, come in posting
 * order, each with its bytes. */
static void test_srq_rnr_late(void **state)
{
	struct ibv_wc wc[3];
	uint64_t before;
	struct rig r;

	(void)state;
	rig_make(&r, IBV_QPT_RC, 1, 16, 256);
	vu_fill(r.abuf, 1, 3000);
	post_send(&r, 0, 1, IBV_WR_SEND, 0, 1000, 0, 0, 0, 0);
	/* no completion while no WQE is posted */
	assert_int_equal(vu_poll(r.scq, wc, 1, 50), 0);
	post_srq(&r, 11, 0, 1000, 2);
	expect_send_ok(&r, 1);
	post_srq(&r, 12, 8192, 1000, 2);
	post_srq(&r, 13, 16384, 1000, 1);
	before = direct_msgs();
	post_send(&r, 0, 2, IBV_WR_SEND_WITH_IMM, 1000, 1000, 0, 0, 0, 0);
	post_send(&r, 0, 3, IBV_WR_SEND, 2000, 1000, 0, 0, 0, 0);
	expect_send_ok(&r, 2);
	expect_send_ok(&r, 3);
	expect_direct(before, 2);
	assert_int_equal(vu_poll(r.rcq, wc, 3, WC_WAIT_MS), 3);
	expect_recv(&r, 0, wc[0], 11, 1, IBV_WR_SEND, 1000);
	expect_recv(&r, 0, wc[1], 12, 2, IBV_WR_SEND_WITH_IMM, 1000);
	expect_recv(&r, 0, wc[2], 13, 3, IBV_WR_SEND, 1000);
	expect_no_wc(r.rcq, "RNR");
	expect_bytes(r.bbuf, r.abuf, 333, "late WQE, first SGE");
	expect_bytes(r.bbuf + 333 + GAP, r.abuf + 333, 667,
		     "late WQE, second SGE");
	expect_bytes(r.bbuf + 8192, r.abuf + 1000, 333, "second, first SGE");
	expect_bytes(r.bbuf + 8192 + 333 + GAP, r.abuf + 1333, 667,
		     "second, second SGE");
	expect_bytes(r.bbuf + 16384, r.abuf + 2000, 1000, "third");
	rig_free(&r);
}

/* UC has no RNR: a SEND that finds the SRQ empty is dropped (the sender
 * succeeds, nothing completes); the next one, a WQE posted, takes it. */
static void test_srq_uc_empty_drops(void **state)
{
	uint8_t zero[1000] = { 0 };
	uint64_t before;
	struct rig r;

	(void)state;
	rig_make(&r, IBV_QPT_UC, 1, 16, 256);
	vu_fill(r.abuf, 2, 2000);
	before = direct_msgs();
	post_send(&r, 0, 1, IBV_WR_SEND_WITH_IMM, 0, 1000, 0, 0, 0, 0);
	expect_send_ok(&r, 1);
	expect_no_wc(r.rcq, "a SEND into an empty SRQ");
	post_srq(&r, 21, 4096, 1000, 1);
	post_send(&r, 0, 2, IBV_WR_SEND_WITH_IMM, 1000, 1000, 0, 0, 0, 0);
	expect_send_ok(&r, 2);
	expect_recv(&r, 0, wait_wc(r.rcq), 21, 2, IBV_WR_SEND_WITH_IMM, 1000);
	expect_no_wc(r.rcq, "UC");
	expect_bytes(r.bbuf + 4096, r.abuf + 1000, 1000, "the second SEND");
	expect_bytes(r.bbuf, zero, sizeof(zero), "before the WQE");
	expect_direct(before, 1);
	rig_free(&r);
}

/* ---- 4: the SRQ limit ---- */

static void send_n(struct rig *r, uint64_t id0, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		post_send(r, 0, id0 + i, IBV_WR_SEND, (id0 + i) % 64 * 256,
			  256, 0, 0, 0, 0);
		expect_send_ok(r, id0 + i);
	}
}

static void set_limit(struct ibv_srq *srq, uint32_t limit)
{
	struct ibv_srq_attr a = { .srq_limit = limit };

	assert_int_equal(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), 0);
}

static uint32_t srq_limit(struct ibv_srq *srq)
{
	struct ibv_srq_attr a;

	memset(&a, 0, sizeof(a));
	assert_int_equal(ibv_query_srq(srq, &a), 0);
	return a.srq_limit;
}

static void expect_limit_event(struct rig *r)
{
	struct ibv_async_event ev;

	if (vu_async_event(r->ctx, &ev, WC_WAIT_MS))
		fail_msg("no IBV_EVENT_SRQ_LIMIT_REACHED within %d ms",
			 WC_WAIT_MS);
	if (ev.event_type != IBV_EVENT_SRQ_LIMIT_REACHED)
		fail_msg("event %s, not the SRQ limit",
			 ibv_event_type_str(ev.event_type));
	assert_ptr_equal(ev.element.srq, r->srq);
	/* the event disarms the limit */
	assert_int_equal(srq_limit(r->srq), 0);
}

static void expect_no_event(struct rig *r, const char *what)
{
	struct ibv_async_event ev;

	if (!vu_async_event(r->ctx, &ev, NONE_MS))
		fail_msg("%s: event %s", what,
			 ibv_event_type_str(ev.event_type));
}

/* 16 WQEs, the limit armed at 8: 8 SENDs leave 8 (no event), the 9th
 * leaves 7 (the event, once); 3 more: none (disarmed). 8 more WQEs (12),
 * armed at 8 again: 4 SENDs, none; the 5th, the event. */
static void test_srq_limit(void **state)
{
	uint64_t before, id = 0;
	struct rig r;

	(void)state;
	rig_make(&r, IBV_QPT_RC, 1, 32, 256);
	vu_fill(r.abuf, 5, 64 * 256);
	for (unsigned int i = 0; i < 16; i++)
		post_srq(&r, 100 + i, (size_t)i * 4096, 256, 1);
	set_limit(r.srq, 8);
	assert_int_equal(srq_limit(r.srq), 8);
	before = direct_msgs();
	send_n(&r, id, 8);
	id += 8;
	expect_no_event(&r, "8 WQEs left of a limit of 8");
	assert_int_equal(srq_limit(r.srq), 8);
	send_n(&r, id++, 1);
	expect_limit_event(&r);
	send_n(&r, id, 3);
	id += 3;
	expect_no_event(&r, "disarmed, 4 WQEs left");
	for (unsigned int i = 16; i < 24; i++)
		post_srq(&r, 100 + i, (size_t)i * 4096, 256, 1);
	set_limit(r.srq, 8);
	send_n(&r, id, 4);
	id += 4;
	expect_no_event(&r, "re-armed at 8, 8 left");
	send_n(&r, id++, 1);
	expect_limit_event(&r);
	expect_direct(before, id);
	/* every WQE taken once, in order */
	for (unsigned int i = 0; i < id; i++) {
		struct ibv_wc wc = wait_wc(r.rcq);

		expect_recv(&r, 0, wc, 100 + i, i, IBV_WR_SEND, 256);
		expect_bytes(r.bbuf + (size_t)i * 4096, r.abuf + i % 64 * 256,
			     256, "limit");
	}
	expect_no_wc(r.rcq, "limit");
	rig_free(&r);
}

/* ---- 5: the receive CQ overruns ---- */

/* More SENDs than b's receive CQ holds (the SRQ has WQEs for all, and
 * more), none polled: the CQ errs (IBV_EVENT_CQ_ERR, the first event); b
 * goes to ERR, and being on an SRQ it reports its last WQE. (A CQ asked
 * for 4 entries has 15 here: the device's smallest ring is 16.) */
static void test_srq_cq_overrun(void **state)
{
	struct ibv_async_event ev;
	bool last_wqe = false;
	uint64_t before;
	struct rig r;
	int n;

	(void)state;
	rig_make(&r, IBV_QPT_RC, 1, 64, 4);
	assert_true(r.rcq->cqe >= 4);
	n = r.rcq->cqe + 2;
	assert_true(n + 4 <= 64);
	for (int i = 0; i < n + 4; i++)
		post_srq(&r, (uint64_t)i, (size_t)i * 256, 100, 2);
	before = direct_msgs();
	for (int i = 0; i < n; i++)
		post_send(&r, 0, (uint64_t)i, IBV_WR_SEND, 0, 100, 0, 0, 0, 0);
	/* the ones the CQ had room for succeed; then anything */
	for (int i = 0; i < r.rcq->cqe; i++)
		expect_send_ok(&r, (uint64_t)i);
	for (int i = r.rcq->cqe; i < n; i++)
		wait_wc(r.scq);
	assert_int_equal(vu_async_event(r.ctx, &ev, WC_WAIT_MS), 0);
	if (ev.event_type != IBV_EVENT_CQ_ERR)
		fail_msg("event %s before the CQ's error",
			 ibv_event_type_str(ev.event_type));
	assert_ptr_equal(ev.element.cq, r.rcq);
	for (int i = 0; i < 4 && !last_wqe; i++) {
		if (vu_async_event(r.ctx, &ev, WC_WAIT_MS))
			fail_msg("no IBV_EVENT_QP_LAST_WQE_REACHED");
		if (ev.event_type != IBV_EVENT_QP_FATAL &&
		    ev.event_type != IBV_EVENT_QP_LAST_WQE_REACHED)
			fail_msg("event %s after the CQ's error",
				 ibv_event_type_str(ev.event_type));
		assert_ptr_equal(ev.element.qp, r.b[0]);
		last_wqe = ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED;
	}
	assert_true(last_wqe);
	/* (with the direct path on, nothing said of how many went direct) */
	expect_direct(before, 0);
	rig_free(&r);
}

/* ---- 6: the SRQ resized between SENDs ---- */

/* An SRQ of 8: 4 WQEs, 2 SENDs; grown to 64 with 2 of them still
 * posted, 20 more posted (more than the old size), 12 SENDs; grown to
 * 256 with 10 posted, 10 more posted, 20 SENDs. All 34 complete in
 * posting order, polled only at the end, each with its bytes. */
static void test_srq_resized(void **state)
{
	static struct ibv_wc wc[34];
	struct ibv_srq_attr a;
	uint64_t before, sent = 0, posted = 0;
	struct rig r;

	(void)state;
	rig_make(&r, IBV_QPT_RC, 1, 8, 256);
	vu_fill(r.abuf, 3, 34 * 300);
	before = direct_msgs();
	for (; posted < 4; posted++)
		post_srq(&r, 50 + posted, posted * 1024, 300,
			 posted & 1 ? 2 : 1);
	for (; sent < 2; sent++) {
		post_send(&r, 0, sent, IBV_WR_SEND_WITH_IMM, sent * 300, 300,
			  0, 0, 0, 0);
		expect_send_ok(&r, sent);
	}
	memset(&a, 0, sizeof(a));
	a.max_wr = 64;
	assert_int_equal(ibv_modify_srq(r.srq, &a, IBV_SRQ_MAX_WR), 0);
	for (; posted < 24; posted++)
		post_srq(&r, 50 + posted, posted * 1024, 300,
			 posted & 1 ? 2 : 1);
	for (; sent < 14; sent++) {
		post_send(&r, 0, sent, IBV_WR_SEND_WITH_IMM, sent * 300, 300,
			  0, 0, 0, 0);
		expect_send_ok(&r, sent);
	}
	a.max_wr = 256;
	assert_int_equal(ibv_modify_srq(r.srq, &a, IBV_SRQ_MAX_WR), 0);
	for (; posted < 34; posted++)
		post_srq(&r, 50 + posted, posted * 1024, 300,
			 posted & 1 ? 2 : 1);
	for (; sent < 34; sent++) {
		post_send(&r, 0, sent, IBV_WR_SEND_WITH_IMM, sent * 300, 300,
			  0, 0, 0, 0);
		expect_send_ok(&r, sent);
	}
	assert_int_equal(vu_poll(r.rcq, wc, 34, WC_WAIT_MS), 34);
	for (unsigned int i = 0; i < 34; i++) {
		uint8_t *want = calloc(1, 1024);

		assert_non_null(want);
		expect_recv(&r, 0, wc[i], 50 + i, i, IBV_WR_SEND_WITH_IMM,
			    300);
		place(want, 0, r.abuf + i * 300, 300, 300, i & 1 ? 2 : 1);
		expect_bytes(r.bbuf + (size_t)i * 1024, want, 1024,
			     "resized SRQ");
		free(want);
	}
	expect_no_wc(r.rcq, "resized");
	expect_direct(before, 34);
	memset(&a, 0, sizeof(a));
	assert_int_equal(ibv_query_srq(r.srq, &a), 0);
	assert_true(a.max_wr >= 256);
	rig_free(&r);
}

/* ---- a receiving QP in ERR leaves the SRQ's WQEs ---- */

#define NRECV    8

/* NRECV WQEs, 2 taken by b[0]'s SENDs; b[0] to ERR: its last WQE is
 * reported (IBV_EVENT_QP_LAST_WQE_REACHED) and no WQE of the SRQ is
 * flushed; a second pair on the SRQ (its receiver on the same CQ) takes
 * the other NRECV - 2, in order. */
static void test_srq_qp_err_keeps_wqes(void **state)
{
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_ERR };
	struct ibv_async_event ev;
	uint64_t before;
	struct rig r;

	(void)state;
	rig_make(&r, IBV_QPT_RC, 1, 16, 256);
	vu_fill(r.abuf, 4, NRECV * 512);
	for (int i = 0; i < NRECV; i++)
		post_srq(&r, (uint64_t)i, (size_t)i * 1024, 512, 1);
	before = direct_msgs();
	for (int i = 0; i < 2; i++) {
		post_send(&r, 0, (uint64_t)i, IBV_WR_SEND, (size_t)i * 512, 512,
			  0, 0, 0, 0);
		expect_send_ok(&r, (uint64_t)i);
		expect_recv(&r, 0, wait_wc(r.rcq), (uint64_t)i, (uint64_t)i,
			    IBV_WR_SEND, 512);
	}
	assert_int_equal(ibv_modify_qp(r.b[0], &at, IBV_QP_STATE), 0);
	if (vu_async_event(r.ctx, &ev, WC_WAIT_MS))
		fail_msg("no IBV_EVENT_QP_LAST_WQE_REACHED");
	assert_int_equal(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
	assert_ptr_equal(ev.element.qp, r.b[0]);
	/* the engine is done with b[0] when it reports the last WQE */
	expect_no_wc(r.rcq, "a QP on the SRQ in ERR");
	pair_add(&r, IBV_QPT_RC, 1);
	for (int i = 2; i < NRECV; i++) {
		post_send(&r, 1, (uint64_t)i, IBV_WR_SEND, (size_t)i * 512, 512,
			  0, 0, 0, 0);
		expect_send_ok(&r, (uint64_t)i);
	}
	for (int i = 2; i < NRECV; i++)
		expect_recv(&r, 1, wait_wc(r.rcq), (uint64_t)i, (uint64_t)i,
			    IBV_WR_SEND, 512);
	expect_no_wc(r.rcq, "the second pair");
	for (int i = 0; i < NRECV; i++)
		expect_bytes(r.bbuf + (size_t)i * 1024, r.abuf + i * 512, 512,
			     "a QP in ERR");
	expect_direct(before, NRECV);
	rig_free(&r);
}

/* ---- 9: both paths' completions mixed ---- */

/* SENDs from device memory (which only the daemon reads) between direct
 * ones, all into the SRQ: the receiver polls nothing until the last, then
 * gets all of them in posting order, each WQE once, with its bytes. */
static void test_srq_mixed_order(void **state)
{
	enum { N = 24, SZ = 512 };
	struct ibv_alloc_dm_attr da = { .length = SZ * N };
	struct ibv_wc wc[N];
	struct ibv_dm *dm;
	struct ibv_mr *dmr;
	uint64_t before;
	struct rig r;

	(void)state;
	rig_make(&r, IBV_QPT_RC, 1, 64, 256);
	dm = ibv_alloc_dm(r.ctx, &da);
	assert_non_null(dm);
	dmr = ibv_reg_dm_mr(r.pd, dm, 0, SZ * N, IBV_ACCESS_LOCAL_WRITE |
			    IBV_ACCESS_ZERO_BASED);
	assert_non_null(dmr);
	vu_fill(r.abuf, 7, SZ * N);
	assert_int_equal(ibv_memcpy_to_dm(dm, 0, r.abuf, SZ * N), 0);
	for (int i = 0; i < N; i++)
		post_srq(&r, 100 + (uint64_t)i, (size_t)i * 4096, SZ, 2);
	before = direct_msgs();
	for (int i = 0; i < N; i++) {
		if (i % 3 == 1)
			post_send(&r, 0, (uint64_t)i, IBV_WR_SEND, 0, SZ, 0,
				  dmr->lkey, (uint64_t)i * SZ, 0);
		else
			post_send(&r, 0, (uint64_t)i, IBV_WR_SEND_WITH_IMM,
				  (size_t)i * SZ, SZ, 0, 0, 0, 0);
	}
	for (int i = 0; i < N; i++)
		expect_send_ok(&r, (uint64_t)i);
	expect_direct(before, N - N / 3);
	assert_int_equal(vu_poll(r.rcq, wc, N, WC_WAIT_MS), N);
	for (int i = 0; i < N; i++) {
		uint8_t want[4096] = { 0 };

		expect_recv(&r, 0, wc[i], 100 + (uint64_t)i, (uint64_t)i,
			    i % 3 == 1 ? IBV_WR_SEND : IBV_WR_SEND_WITH_IMM,
			    SZ);
		place(want, 0, r.abuf + (size_t)i * SZ, SZ, SZ, 2);
		expect_bytes(r.bbuf + (size_t)i * 4096, want, sizeof(want),
			     "mixed");
	}
	expect_no_wc(r.rcq, "mixed");
	assert_int_equal(ibv_dereg_mr(dmr), 0);
	assert_int_equal(ibv_free_dm(dm), 0);
	rig_free(&r);
}

/* ---- 7, 8: two processes, a sender stopped in its copy ---- */

#define STOP_LEN (64u << 10)

/* The sender (a child): connects to the receiver over fd, then SENDs
 * STOP_LEN bytes of 0xa5, stopped (SIGSTOP) inside its copy. Exits 0 once
 * the SEND completed with an error (the receiver's QP is gone by then). */
static void stopped_sender(int fd)
{
	struct vu_qp_caps caps = { .send_wr = 16, .recv_wr = 1, .send_sge = 1,
				   .recv_sge = 1 };
	struct vu_conn c = vu_conn_default();
	struct ibv_send_wr wr = { .wr_id = 1, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct vu_addr peer, me;
	struct ibv_sge s;
	struct ibv_wc wc;
	struct ibv_mr *mr;
	struct vu_ep ep;
	uint8_t *buf;
	char go;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (vu_ep_create(&ep, NULL, NULL, IBV_QPT_RC, &caps))
		_exit(10);
	buf = calloc(1, STOP_LEN);
	if (!buf)
		_exit(11);
	memset(buf, 0xa5, STOP_LEN);
	mr = ibv_reg_mr(ep.pd, buf, STOP_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		_exit(12);
	me = vu_addr_of(ep.qp, c.sq_psn);
	/* a vanished peer errs soon */
	c.timeout = 12;
	c.retry_cnt = 3;
	if (vu_xfer(fd, &peer, sizeof(peer), false) ||
	    vu_xfer(fd, &me, sizeof(me), true) ||
	    vu_connect(ep.qp, &peer, &c) ||
	    vu_xfer(fd, &go, 1, false))
		_exit(13);
	s = (struct ibv_sge){ (uintptr_t)buf, STOP_LEN, mr->lkey };
	wr.sg_list = &s;
	__atomic_store_n(&stop_in_copy, 1, __ATOMIC_RELAXED);
	if (ibv_post_send(ep.qp, &wr, &bad))
		_exit(14);
	if (vu_poll(ep.scq, &wc, 1, WC_WAIT_MS) != 1)
		_exit(15);
	if (__atomic_load_n(&stop_in_copy, __ATOMIC_RELAXED))
		_exit(16);         /* it never reached a copy of its own */
	if (wc.status == IBV_WC_SUCCESS)
		_exit(17);         /* it landed after all */
	_exit(0);
}

/* The receiver's side: this process's QP b[0] on the SRQ with NRECV WQEs
 * of STOP_LEN each (wr_id i at slot i of bbuf), the sender a child that
 * has stopped in its copy. */
struct stopped {
	struct rig r;
	pid_t pid;
	int fd;
};

static void stopped_start(struct stopped *t)
{
	struct vu_conn c = vu_conn_default();
	struct vu_addr me, peer;
	int sv[2], status;
	char go = 'g';

	rig_make(&t->r, IBV_QPT_RC, 0, 16, 256);
	t->r.b[0] = qp_make(&t->r, IBV_QPT_RC, true);
	assert_true((size_t)NRECV * STOP_LEN <= LEN);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	t->pid = fork();
	assert_true(t->pid >= 0);
	if (t->pid == 0) {
		close(sv[1]);
		stopped_sender(sv[0]);
	}
	close(sv[0]);
	t->fd = sv[1];
	me = vu_addr_of(t->r.b[0], c.sq_psn);
	assert_int_equal(vu_xfer(t->fd, &me, sizeof(me), true), 0);
	assert_int_equal(vu_xfer(t->fd, &peer, sizeof(peer), false), 0);
	assert_int_equal(vu_connect(t->r.b[0], &peer, &c), 0);
	for (int i = 0; i < NRECV; i++)
		post_srq(&t->r, (uint64_t)i, (size_t)i * STOP_LEN, STOP_LEN, 1);
	assert_int_equal(vu_xfer(t->fd, &go, 1, true), 0);
	assert_int_equal(waitpid(t->pid, &status, WUNTRACED), t->pid);
	if (!WIFSTOPPED(status))
		fail_msg("the sender never stopped in a copy (status %#x)",
			 status);
}

/* The sender stopped in its copy; the receiver destroys its QP, then its
 * SRQ: both return while it is stopped. The buffers, reused at once, stay
 * as they are after it resumes; its SEND fails. */
static void test_srq_destroyed_mid_send(void **state)
{
	struct stopped t;
	int status, qret, sret;

	(void)state;
	if (!direct_on())
		return;            /* nothing of the copies is the test's */
	stopped_start(&t);
	watchdog(60, "destroying the QP and the SRQ under a stopped sender");
	qret = ibv_destroy_qp(t.r.b[0]);
	sret = qret ? -1 : ibv_destroy_srq(t.r.srq);
	alarm(0);
	assert_int_equal(qret, 0);
	assert_int_equal(sret, 0);
	t.r.b[0] = NULL;
	t.r.srq = NULL;
	memset(t.r.bbuf, 0x11, (size_t)NRECV * STOP_LEN);
	vu_sleep_ms(300);
	assert_int_equal(kill(t.pid, SIGCONT), 0);
	assert_int_equal(waitpid(t.pid, &status, 0), t.pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		fail_msg("the sender says %d (17: its SEND landed after the "
			 "destroy)", WIFEXITED(status) ?
			 WEXITSTATUS(status) : -1);
	for (size_t k = 0; k < (size_t)NRECV * STOP_LEN; k++)
		if (t.r.bbuf[k] != 0x11)
			fail_msg("byte %zu of the receive buffers changed", k);
	rig_free(&t.r);
	close(t.fd);
}

/* The sender killed in its copy, holding the SRQ's head WQE (wr_id 0);
 * then b[0] to ERR: that WQE is flushed on b[0], once, and no other. A new
 * pair on the SRQ (sender here) takes WQEs 1 .. NRECV - 1, each once, in
 * order; WQE 0's buffer never changes after the kill. */
static void test_srq_sender_killed_mid_copy(void **state)
{
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_ERR };
	struct stopped t;
	struct ibv_wc wc;
	uint64_t before;
	int status;

	(void)state;
	if (!direct_on())
		return;            /* nothing of the copies is the test's */
	stopped_start(&t);
	assert_int_equal(kill(t.pid, SIGKILL), 0);
	assert_int_equal(waitpid(t.pid, &status, 0), t.pid);
	memset(t.r.bbuf, 0x11, STOP_LEN);
	memset(t.r.bbuf + STOP_LEN, 0, (size_t)(NRECV - 1) * STOP_LEN);
	assert_int_equal(ibv_modify_qp(t.r.b[0], &at, IBV_QP_STATE), 0);
	wc = wait_wc(t.r.rcq);
	if (wc.wr_id != 0 || wc.status != IBV_WC_WR_FLUSH_ERR)
		fail_msg("after the kill: wr_id %" PRIu64 " %s, not WQE 0 "
			 "flushed", wc.wr_id, ibv_wc_status_str(wc.status));
	assert_int_equal(wc.qp_num, t.r.b[0]->qp_num);
	expect_no_wc(t.r.rcq, "the claimed WQE flushed");
	pair_add(&t.r, IBV_QPT_RC, 1);
	before = direct_msgs();
	for (int i = 1; i < NRECV; i++) {
		uint32_t len = STOP_LEN - (uint32_t)i * 100;

		vu_fill(t.r.abuf + (size_t)i * STOP_LEN, 0x800u + (unsigned)i,
			len);
		post_send(&t.r, 1, (uint64_t)i, IBV_WR_SEND,
			  (size_t)i * STOP_LEN, len, 0, 0, 0, 0);
		expect_send_ok(&t.r, (uint64_t)i);
	}
	for (int i = 1; i < NRECV; i++) {
		uint32_t len = STOP_LEN - (uint32_t)i * 100;

		expect_recv(&t.r, 1, wait_wc(t.r.rcq), (uint64_t)i,
			    (uint64_t)i, IBV_WR_SEND, len);
		expect_pat(t.r.bbuf + (size_t)i * STOP_LEN,
			   0x800u + (unsigned)i, len, STOP_LEN, 0,
			   "a WQE after the kill");
	}
	expect_no_wc(t.r.rcq, "after the kill");
	expect_direct(before, NRECV - 1);
	for (size_t k = 0; k < STOP_LEN; k++)
		if (t.r.bbuf[k] != 0x11)
			fail_msg("byte %zu of WQE 0's buffer changed", k);
	rig_free(&t.r);
	close(t.fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_srq_kinds_rc),
		cmocka_unit_test(test_srq_kinds_uc),
		cmocka_unit_test(test_srq_two_senders),
		cmocka_unit_test(test_srq_rnr_late),
		cmocka_unit_test(test_srq_uc_empty_drops),
		cmocka_unit_test(test_srq_limit),
		cmocka_unit_test(test_srq_cq_overrun),
		cmocka_unit_test(test_srq_resized),
		cmocka_unit_test(test_srq_qp_err_keeps_wqes),
		cmocka_unit_test(test_srq_mixed_order),
		cmocka_unit_test(test_srq_destroyed_mid_send),
		cmocka_unit_test(test_srq_sender_killed_mid_copy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
