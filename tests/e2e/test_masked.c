// SPDX-License-Identifier: MIT
/*
 * Masked atomics (issue 8) through the device, on one host or across two:
 *
 *   test_masked                       both sides here, through 127.0.0.1
 *   test_masked server PORT           the side whose memory is targeted
 *   test_masked client HOST PORT      the side that posts the atomics
 *   test_masked client HOST PORT nak  a peer without masked atomics: one
 *                                     masked CAS completes with
 *                                     IBV_WC_REM_INV_REQ_ERR
 *   test_masked errors                both sides here, errors: a bad rkey,
 *                                     an unaligned address, a short SGE,
 *                                     4-byte operands, each failing cleanly
 *                                     and writing nothing
 *   test_masked client HOST PORT errors  the same across hosts
 *   test_masked nosup                 this device has none: the query says
 *                                     so and ibv_exp_post_send refuses
 *
 * The client forks NWORK + 1 workers, each with a TCP connection and an RC
 * QP of its own (in a resource domain of its own: an engine of its own) to
 * a QP of the server's, all targeting words in one MR of the server's:
 *  - worker 0, the model: NMODEL masked CAS and masked FAA with random
 *    operands, masks and field boundaries on a word only it touches; every
 *    returned value must be what a bit-by-bit model (atomic_ref.h) says the
 *    word held, and the word must end as the model's; those whose first
 *    operand is odd go through ibv_wr_* (ibv_exp_wr_masked_*), the rest
 *    through ibv_exp_post_send;
 *  - workers 1..NWORK: NFIELD masked FAAs each into a 16-bit field of one
 *    shared word (worker k owns bits 16(k-1) .. 16k-1, the boundaries
 *    close every field), interleaved with masked CASes that compare and
 *    swap that field only: the field in every returned value must be the
 *    worker's own running sum (a neighbour's carry or a CAS that clobbered
 *    a neighbour would show), and every CAS must succeed whatever the other
 *    fields do. At the end the server sends the words back and each worker
 *    checks its field.
 * Atomic results land in an MR of the worker's and are read from there.
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
#include <softverbs/softverbs.h>

#include "atomic_ref.h"
#include "vu.h"

#define NWORK  4
#define NMODEL 3000
#define NFIELD 2000
#define FIELD_ENDS 0x8000800080008000ull

#define CHECK VU_CHECK

/* What the server tells a worker. */
struct target {
	struct vu_addr qp;
	uint64_t model_addr, field_addr;
	uint32_t rkey;
};

/* ---------------- the server ---------------- */

/* Accept the workers (the first says how many), give each a QP towards
 * its own, let them all start at once, then send each the final words. */
static int server(int ls)
{
	struct vu_qp_caps caps = { .send_wr = 4, .recv_wr = 4, .cqe = 16 };
	struct vu_conn c = vu_conn_default();
	struct ibv_context *ctx = vu_open();
	struct vu_ep ep[NWORK + 1];
	int fd[NWORK + 1];
	uint32_t n = 1;
	uint64_t *words;
	struct ibv_pd *pd;
	struct ibv_mr *mr;

	CHECK(ctx, "no sv0");
	pd = ibv_alloc_pd(ctx);
	words = aligned_alloc(4096, 4096);
	CHECK(pd && words, "pd, memory");
	memset(words, 0, 4096);
	words[0] = 0x0123456789abcdefull;      /* the model's word */
	words[8] = 0;                          /* the fields' word */
	mr = ibv_reg_mr(pd, words, 4096,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC |
				IBV_ACCESS_REMOTE_READ);
	CHECK(mr, "ibv_reg_mr");
	for (uint32_t i = 0; i < n; i++) {
		struct target t = { .model_addr = (uintptr_t)&words[0],
				    .field_addr = (uintptr_t)&words[8],
				    .rkey = mr->rkey };
		struct vu_addr peer;

		uint32_t said;

		fd[i] = accept(ls, NULL, NULL);
		CHECK(fd[i] >= 0, "accept");
		/* each says how many they are */
		vu_xfer_all(fd[i], &said, sizeof(said), false);
		if (!i)
			n = said;
		CHECK(n >= 1 && n <= NWORK + 1 && said == n, "%u workers", said);
		CHECK(!vu_ep_create(&ep[i], ctx, pd, IBV_QPT_RC, &caps),
		      "endpoint");
		vu_xfer_all(fd[i], &peer, sizeof(peer), false);
		t.qp = vu_addr_of(ep[i].qp, c.sq_psn);
		CHECK(!vu_connect(ep[i].qp, &peer, &c), "connect");
		vu_xfer_all(fd[i], &t, sizeof(t), true);
	}
	close(ls);
	for (uint32_t i = 0; i < n; i++) {
		char go = 1;

		vu_xfer_all(fd[i], &go, 1, true);
	}
	for (uint32_t i = 0; i < n; i++) {
		char done;

		vu_xfer_all(fd[i], &done, 1, false);
	}
	for (uint32_t i = 0; i < n; i++) {
		uint64_t w[2] = { __atomic_load_n(&words[0], __ATOMIC_RELAXED),
				  __atomic_load_n(&words[8], __ATOMIC_RELAXED) };
		char ok;

		vu_xfer_all(fd[i], w, sizeof(w), true);
		vu_xfer_all(fd[i], &ok, 1, false);
		close(fd[i]);
		vu_ep_destroy(&ep[i]);
	}
	printf("server: %u workers done, model word %#llx, fields %#llx\n", n,
	       (unsigned long long)words[0], (unsigned long long)words[8]);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(words);
	return 0;
}

/* ---------------- a worker ---------------- */

struct worker {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *ex;      /* worker 0: ibv_wr_* too */
	struct ibv_mr *mr;
	uint64_t *res;             /* where the original values land */
	unsigned int built;        /* atomics posted through ibv_wr_* */
	uint32_t rkey, sge_len;    /* what masked() posts: t.rkey and 8, or
				    * a deliberate error's */
	struct target t;
	int fd;
};

/* An RC QP: in a resource domain of its own (an engine of its own), or,
 * wr_api, for the ibv_wr_* API (worker 0: half its atomics are built so). */
static struct ibv_qp *make_qp(struct worker *w, bool wr_api)
{
	struct ibv_exp_res_domain_init_attr da = {
		.comp_mask = IBV_EXP_RES_DOMAIN_THREAD_MODEL |
			     IBV_EXP_RES_DOMAIN_MSG_MODEL,
		.thread_model = IBV_EXP_THREAD_SINGLE,
		.msg_model = IBV_EXP_MSG_DEFAULT,
	};
	struct ibv_qp_init_attr_ex qa;
	struct ibv_exp_qp_init_attr ea;
	struct ibv_qp_cap cap = { .max_send_wr = 16, .max_recv_wr = 1,
				  .max_send_sge = 1, .max_recv_sge = 1 };
	struct ibv_qp *qp;

	if (wr_api) {
		memset(&qa, 0, sizeof(qa));
		qa.send_cq = qa.recv_cq = w->cq;
		qa.cap = cap;
		qa.qp_type = IBV_QPT_RC;
		qa.pd = w->pd;
		qa.comp_mask = IBV_QP_INIT_ATTR_PD |
			       IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		qa.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
				    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
		qp = ibv_create_qp_ex(w->ctx, &qa);
		CHECK(qp, "ibv_create_qp_ex");
		w->ex = ibv_qp_to_qp_ex(qp);
		CHECK(w->ex, "ibv_qp_to_qp_ex");
		return qp;
	}
	memset(&ea, 0, sizeof(ea));
	ea.send_cq = ea.recv_cq = w->cq;
	ea.cap = cap;
	ea.qp_type = IBV_QPT_RC;
	ea.pd = w->pd;
	ea.res_domain = ibv_exp_create_res_domain(w->ctx, &da);
	CHECK(ea.res_domain, "ibv_exp_create_res_domain");
	ea.comp_mask = IBV_EXP_QP_INIT_ATTR_PD | IBV_EXP_QP_INIT_ATTR_RES_DOMAIN;
	qp = ibv_exp_create_qp(w->ctx, &ea);
	CHECK(qp, "ibv_exp_create_qp");
	return qp;
}

static void worker_up(struct worker *w, const char *host, int port,
		      uint32_t nconn, bool wr_api)
{
	struct vu_conn c = vu_conn_default();
	struct vu_addr me;
	char go;

	w->ctx = vu_open();
	CHECK(w->ctx, "no sv0");
	w->pd = ibv_alloc_pd(w->ctx);
	w->cq = ibv_create_cq(w->ctx, 32, NULL, NULL, 0);
	w->res = aligned_alloc(64, 64);
	CHECK(w->pd && w->cq && w->res, "pd, cq, memory");
	w->mr = ibv_reg_mr(w->pd, w->res, 64, IBV_ACCESS_LOCAL_WRITE);
	CHECK(w->mr, "ibv_reg_mr");
	w->ex = NULL;
	w->built = 0;
	w->sge_len = 8;
	w->qp = make_qp(w, wr_api);
	w->fd = vu_tcp_connect(host, port);
	vu_xfer_all(w->fd, &nconn, sizeof(nconn), true);
	me = vu_addr_of(w->qp, c.sq_psn);
	vu_xfer_all(w->fd, &me, sizeof(me), true);
	vu_xfer_all(w->fd, &w->t, sizeof(w->t), false);
	w->rkey = w->t.rkey;
	CHECK(!vu_connect(w->qp, &w->t.qp, &c), "connect");
	vu_xfer_all(w->fd, &go, 1, false);
}

/* Post one masked atomic and return its status; *orig: the old value. */
static enum ibv_wc_status masked(struct worker *w, bool cas, uint64_t addr,
				 uint64_t a, uint64_t b, uint64_t cmask,
				 uint64_t smask, uint64_t *orig)
{
	struct ibv_sge sge = { .addr = (uintptr_t)w->res, .length = w->sge_len,
			       .lkey = w->mr->lkey };
	struct ibv_exp_send_wr wr, *bad;
	struct ibv_wc wc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 7;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.exp_send_flags = IBV_SEND_SIGNALED;
	wr.ext_op.masked_atomics.log_arg_sz = 3;
	wr.ext_op.masked_atomics.remote_addr = addr;
	wr.ext_op.masked_atomics.rkey = w->rkey;
	if (cas) {
		struct ibv_exp_cmp_swap *o =
			&wr.ext_op.masked_atomics.wr_data.inline_data.op.cmp_swap;

		wr.exp_opcode = IBV_EXP_WR_EXT_MASKED_ATOMIC_CMP_AND_SWP;
		o->compare_val = a;
		o->swap_val = b;
		o->compare_mask = cmask;
		o->swap_mask = smask;
	} else {
		struct ibv_exp_fetch_add *o =
			&wr.ext_op.masked_atomics.wr_data.inline_data.op.fetch_add;

		wr.exp_opcode = IBV_EXP_WR_EXT_MASKED_ATOMIC_FETCH_AND_ADD;
		o->add_val = a;
		o->field_boundary = b;
	}
	*w->res = 0x5a5a5a5a5a5a5a5aull;
	if (w->ex && (a & 1)) {
		/* the same through ibv_wr_* and softverbs.h's builders */
		const typeof(wr.ext_op.masked_atomics.wr_data.inline_data.op)
			*o = &wr.ext_op.masked_atomics.wr_data.inline_data.op;

		ibv_wr_start(w->ex);
		w->ex->wr_id = 7;
		w->ex->wr_flags = IBV_SEND_SIGNALED;
		if (cas)
			ibv_exp_wr_masked_cmp_swp(w->ex, w->rkey, addr,
						  &o->cmp_swap);
		else
			ibv_exp_wr_masked_fetch_add(w->ex, w->rkey, addr,
						    &o->fetch_add);
		ibv_wr_set_sge(w->ex, w->mr->lkey, (uintptr_t)w->res,
			       w->sge_len);
		CHECK(!ibv_wr_complete(w->ex), "ibv_wr_complete");
		w->built++;
	} else {
		CHECK(!ibv_exp_post_send(w->qp, &wr, &bad),
		      "ibv_exp_post_send");
	}
	CHECK(vu_poll(w->cq, &wc, 1, VU_WAIT_MS) == 1, "no completion");
	if (wc.status == IBV_WC_SUCCESS)
		CHECK((int)wc.opcode == (int)(cas ? IBV_EXP_WC_MASKED_COMP_SWAP :
						    IBV_EXP_WC_MASKED_FETCH_ADD),
		      "completion opcode %d", (int)wc.opcode);
	*orig = __atomic_load_n(w->res, __ATOMIC_RELAXED);
	return wc.status;
}

static void ok(enum ibv_wc_status st, const char *what)
{
	CHECK(st == IBV_WC_SUCCESS, "%s completed with %s", what,
	      ibv_wc_status_str(st));
}

/* The final words from the server. */
static void worker_end(struct worker *w, uint64_t fin[2])
{
	char done = 1;

	vu_xfer_all(w->fd, &done, 1, true);
	vu_xfer_all(w->fd, fin, 2 * sizeof(uint64_t), false);
}

static void worker_bye(struct worker *w)
{
	char bye = 1;

	vu_xfer_all(w->fd, &bye, 1, true);
	close(w->fd);
}

/* Worker 0: random masked operations on a word of its own, against the
 * model. */
static void model_worker(struct worker *w)
{
	uint64_t model = 0x0123456789abcdefull, seed = 0x5eed0001ull, fin[2];
	unsigned int swaps = 0;
	struct ibv_exp_device_attr da = {
		.comp_mask = IBV_EXP_DEVICE_ATTR_EXP_CAP_FLAGS |
			     IBV_EXP_DEVICE_ATTR_MASKED_ATOMICS,
	};

	/* what the device says it does */
	CHECK(!ibv_exp_query_device(w->ctx, &da), "ibv_exp_query_device");
	CHECK(da.comp_mask == (IBV_EXP_DEVICE_ATTR_EXP_CAP_FLAGS |
			       IBV_EXP_DEVICE_ATTR_MASKED_ATOMICS) &&
	      (da.exp_device_cap_flags & IBV_EXP_DEVICE_MASKED_ATOMICS) &&
	      da.masked_atomic.masked_log_atomic_arg_sizes == 1u << 3 &&
	      da.masked_atomic.max_fa_bit_boundary == 64 &&
	      da.masked_atomic.log_max_atomic_inline == 3 &&
	      !da.masked_atomic.masked_log_atomic_arg_sizes_network_endianness,
	      "the query does not report 8-byte masked atomics");

	for (int n = 0; n < NMODEL; n++) {
		uint64_t orig, want;

		if (n & 1) {
			uint64_t cm = ref_rnd_mask(&seed),
				 sm = ref_rnd_mask(&seed), sw = ref_rnd(&seed);
			/* half of these compare equal under the mask */
			uint64_t cmp = (n & 2) ? (model & cm) |
							 (ref_rnd(&seed) & ~cm)
					       : ref_rnd(&seed);

			ok(masked(w, true, w->t.model_addr, cmp, sw, cm, sm,
				  &orig), "masked CAS");
			want = ref_masked_cas(model, cmp, cm, sw, sm);
			swaps += want != model;
		} else {
			uint64_t add = ref_rnd(&seed),
				 ends = ref_rnd_mask(&seed);

			ok(masked(w, false, w->t.model_addr, add, ends, 0, 0,
				  &orig), "masked FAA");
			want = ref_masked_faa(model, add, ends);
		}
		CHECK(orig == model, "op %d returned %#llx, the model held "
		      "%#llx", n, (unsigned long long)orig,
		      (unsigned long long)model);
		model = want;
	}
	worker_end(w, fin);
	CHECK(fin[0] == model, "the word ends %#llx, the model %#llx",
	      (unsigned long long)fin[0], (unsigned long long)model);
	worker_bye(w);
	CHECK(w->built > NMODEL / 4, "only %u through ibv_wr_*", w->built);
	printf("model: %d masked CAS/FAA matched the model (%u swaps "
	       "changed the word; %u posted through ibv_wr_*)\n", NMODEL,
	       swaps, w->built);
}

/* Worker k (1..NWORK): its own 16-bit field of a shared word. */
static void field_worker(struct worker *w, int k)
{
	unsigned int shift = 16u * (unsigned int)(k - 1);
	uint64_t fmask = 0xffffull << shift, mine = 0, seed = 0xf1e1dull + k,
		 fin[2], last = 0;
	unsigned int others = 0;

	for (int n = 0; n < NFIELD; n++) {
		uint64_t orig;

		if (n % 4 == 3) {
			/* compare and swap this field alone: must succeed
			 * whatever the neighbours do */
			uint64_t nv = ref_rnd(&seed) & 0xffff;

			ok(masked(w, true, w->t.field_addr, mine << shift,
				  nv << shift, fmask, fmask, &orig),
			   "masked CAS");
			CHECK(((orig & fmask) >> shift) == mine,
			      "worker %d: CAS saw field %#llx, it holds "
			      "%#llx", k,
			      (unsigned long long)((orig & fmask) >> shift),
			      (unsigned long long)mine);
			mine = nv;
		} else {
			/* big adds: the field wraps, its carry must stop */
			uint64_t add = 0x8000 | (ref_rnd(&seed) & 0x7fff);

			ok(masked(w, false, w->t.field_addr, add << shift,
				  FIELD_ENDS, 0, 0, &orig),
			   "masked FAA");
			CHECK(((orig & fmask) >> shift) == mine,
			      "worker %d: FAA saw field %#llx, it holds "
			      "%#llx", k,
			      (unsigned long long)((orig & fmask) >> shift),
			      (unsigned long long)mine);
			mine = (mine + add) & 0xffff;
		}
		/* the neighbours moved between two of ours: concurrency */
		others += (orig & ~fmask) != last;
		last = orig & ~fmask;
	}
	worker_end(w, fin);
	CHECK(((fin[1] & fmask) >> shift) == mine,
	      "worker %d: the field ends %#llx, not %#llx", k,
	      (unsigned long long)((fin[1] & fmask) >> shift),
	      (unsigned long long)mine);
	worker_bye(w);
	printf("field %d: %d masked FAA/CAS, never disturbed (the other "
	       "fields moved between two of them %u times)\n", k, NFIELD,
	       others);
}

/* What a run of the client checks. */
enum mode {
	M_CHECK,   /* the model and the fields */
	M_NAK,     /* a peer without masked atomics: a clean NAK */
	M_ERRORS,  /* errors: each fails cleanly and writes nothing */
};

static void want(enum ibv_wc_status st, enum ibv_wc_status exp,
		 const char *what)
{
	CHECK(st == exp, "%s completed with %s, not %s", what,
	      ibv_wc_status_str(st), ibv_wc_status_str(exp));
	printf("%s: %s\n", what, ibv_wc_status_str(st));
}

/*
 * M_NAK: worker 0's masked CAS to a peer without them. M_ERRORS: worker k
 * makes error k (each leaves its QP in error, hence one a worker): a bad
 * rkey, an unaligned address, a result SGE of 4 bytes (and, first, an
 * operand size the device does not take, refused at the post). Either way
 * the words must be as the server made them: nothing written.
 */
static void error_worker(struct worker *w, enum mode m, uint32_t k)
{
	uint64_t orig, fin[2];

	if (m == M_NAK) {
		want(masked(w, true, w->t.model_addr, 0, 1, 1, 1, &orig),
		     IBV_WC_REM_INV_REQ_ERR,
		     "nak: a masked CAS to a peer without them");
	} else if (k == 0) {
		w->rkey ^= 0x100;      /* another consumer key */
		want(masked(w, false, w->t.model_addr, 1, 0, 0, 0, &orig),
		     IBV_WC_REM_ACCESS_ERR, "errors: a masked FAA, bad rkey");
	} else if (k == 1) {
		want(masked(w, true, w->t.model_addr + 4, 0, 1, 0, ~0ull,
			    &orig),
		     IBV_WC_REM_INV_REQ_ERR,
		     "errors: a masked CAS, unaligned address");
	} else {
		struct ibv_sge sge = { .addr = (uintptr_t)w->res, .length = 8,
				       .lkey = w->mr->lkey };
		struct ibv_exp_send_wr wr, *bad;

		memset(&wr, 0, sizeof(wr));
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.exp_opcode = IBV_EXP_WR_EXT_MASKED_ATOMIC_FETCH_AND_ADD;
		wr.ext_op.masked_atomics.log_arg_sz = 2;    /* 4 bytes */
		wr.ext_op.masked_atomics.remote_addr = w->t.model_addr;
		wr.ext_op.masked_atomics.rkey = w->rkey;
		CHECK(ibv_exp_post_send(w->qp, &wr, &bad) == EINVAL &&
		      bad == &wr, "4-byte operands were not refused");
		w->sge_len = 4;
		want(masked(w, false, w->t.model_addr, 1, 0, 0, 0, &orig),
		     IBV_WC_LOC_LEN_ERR,
		     "errors: a masked FAA, 4-byte result SGE");
	}
	worker_end(w, fin);
	CHECK(fin[0] == 0x0123456789abcdefull && fin[1] == 0,
	      "the words changed: %#llx %#llx", (unsigned long long)fin[0],
	      (unsigned long long)fin[1]);
	worker_bye(w);
}

static int client(const char *host, int port, enum mode m)
{
	uint32_t nconn = m == M_NAK ? 1 : m == M_ERRORS ? 3 : NWORK + 1;
	pid_t pid[NWORK + 1];
	int bad = 0;

	for (uint32_t k = 0; k < nconn; k++) {
		pid[k] = fork();
		CHECK(pid[k] >= 0, "fork");
		if (!pid[k]) {
			struct worker w;

			worker_up(&w, host, port, nconn,
				  k == 0 && m == M_CHECK);
			if (m != M_CHECK)
				error_worker(&w, m, k);
			else if (k == 0)
				model_worker(&w);
			else
				field_worker(&w, (int)k);
			exit(0);
		}
	}
	for (uint32_t k = 0; k < nconn; k++) {
		int st;

		if (waitpid(pid[k], &st, 0) != pid[k] || !WIFEXITED(st) ||
		    WEXITSTATUS(st))
			bad++;
	}
	CHECK(!bad, "%d workers failed", bad);
	printf("PASS: masked atomics: %s\n",
	       m == M_NAK ? "clean NAK from a peer without them" :
	       m == M_ERRORS ? "errors fail cleanly, nothing written" :
			       "model and disjoint fields");
	return 0;
}

static enum mode mode_of(const char *s)
{
	return !s ? M_CHECK : !strcmp(s, "nak") ? M_NAK :
	       !strcmp(s, "errors") ? M_ERRORS : M_CHECK;
}

/* This device has no masked atomics (SOFTVERBSD_NO_MASKED_ATOMICS=1). */
static int nosup(void)
{
	struct ibv_exp_device_attr da = {
		.comp_mask = IBV_EXP_DEVICE_ATTR_EXP_CAP_FLAGS |
			     IBV_EXP_DEVICE_ATTR_MASKED_ATOMICS,
	};
	struct worker w = { 0 };
	struct ibv_exp_send_wr wr, *bad;
	struct ibv_sge sge;

	w.ctx = vu_open();
	CHECK(w.ctx, "no sv0");
	CHECK(!ibv_exp_query_device(w.ctx, &da), "ibv_exp_query_device");
	CHECK(!(da.exp_device_cap_flags & IBV_EXP_DEVICE_MASKED_ATOMICS) &&
	      (da.comp_mask & IBV_EXP_DEVICE_ATTR_MASKED_ATOMICS) &&
	      !da.masked_atomic.masked_log_atomic_arg_sizes,
	      "the device claims masked atomics");
	w.pd = ibv_alloc_pd(w.ctx);
	w.cq = ibv_create_cq(w.ctx, 4, NULL, NULL, 0);
	CHECK(w.pd && w.cq, "pd, cq");
	w.qp = make_qp(&w, true);
	{
		/* RTS (to itself), where a post is otherwise taken */
		struct vu_conn c = vu_conn_default();
		struct vu_addr me = vu_addr_of(w.qp, c.sq_psn);

		CHECK(!vu_connect(w.qp, &me, &c), "connect");
	}
	memset(&wr, 0, sizeof(wr));
	sge = (struct ibv_sge){ .addr = (uintptr_t)&da, .length = 8 };
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.exp_opcode = IBV_EXP_WR_EXT_MASKED_ATOMIC_FETCH_AND_ADD;
	wr.ext_op.masked_atomics.log_arg_sz = 3;
	CHECK(ibv_exp_post_send(w.qp, &wr, &bad) == EOPNOTSUPP && bad == &wr,
	      "ibv_exp_post_send of a masked FAA did not refuse it");
	printf("PASS: no masked atomics: not reported, posting refused\n");
	ibv_destroy_qp(w.qp);
	ibv_destroy_cq(w.cq);
	ibv_dealloc_pd(w.pd);
	ibv_close_device(w.ctx);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(vu_tcp_listen(atoi(argv[2]), NWORK + 1));
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]),
			      mode_of(argc == 5 ? argv[4] : NULL));
	if (argc == 2 && !strcmp(argv[1], "nosup"))
		return nosup();
	if (argc == 1 || (argc == 2 && !strcmp(argv[1], "errors"))) {
		/* both sides here: the server on an ephemeral port */
		struct sockaddr_in a;
		socklen_t al = sizeof(a);
		int ls = vu_tcp_listen(0, NWORK + 1), st;
		pid_t srv;

		CHECK(!getsockname(ls, (struct sockaddr *)&a, &al), "port");
		srv = fork();
		CHECK(srv >= 0, "fork");
		if (!srv)
			exit(server(ls));
		close(ls);
		client("127.0.0.1", ntohs(a.sin_port),
		       mode_of(argc == 2 ? argv[1] : NULL));
		CHECK(waitpid(srv, &st, 0) == srv && WIFEXITED(st) &&
		      !WEXITSTATUS(st), "the server failed");
		return 0;
	}
	fprintf(stderr, "usage: test_masked [errors | server PORT | client "
		"HOST PORT [nak | errors] | nosup]\n");
	return 2;
}
